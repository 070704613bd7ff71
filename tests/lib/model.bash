# tests/lib/model.bash: what the model suites (tests/model.bats,
# tests/mlease.bats) share. Loaded after lib/helper.

# model NAME: model/run.sh NAME, its TAP line noted
model() {
    run "$TOP/model/run.sh" "$1"
    echo "$output"
    note "$(grep -m1 -E '^(not )?ok ' <<<"$output" | sed -E 's/^(not )?ok [0-9]+ - //')"
    [ "$status" -eq 0 ]
}
