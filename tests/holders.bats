#!/usr/bin/env bats
# Naming holders: status asks each holder who it is (host, pid, since
# when, acquire or hold) and counts the clients in line; a holder answers
# only to direct reply-to names, a bounded number a second, and questions
# never disturb its hold. Permissions (the inspector, a holder that may
# not read its holder queue) are tests/permissions.bats's.
#
# Needs perl (core modules only) and jq; tests/tools/asker.pl asks raw
# questions.

bats_require_minimum_version 1.5.0
load lib/helper

setup() {
    test_init
}

teardown() { test_cleanup; }

# named NAME K: status names K holders of NAME (a holder listens from its
# first check on, a second after its claim).
named() { [ "$(al --json status "$1" | jq '.holders | length')" = "$2" ]; }

# ask QUEUE MODE N: asker.pl as guest on the test broker; prints the answers.
ask() {
    perl "$BATS_TEST_DIRNAME/tools/asker.pl" "$AMQPLOCK_TEST_PORT" guest guest / "$@"
}

@test "status names the holder of each held slot, hold and acquire, in text and JSON" {
    al create "$n" 3
    bg hold -v hold "$n" -- sleep 60
    hold_pid=$BG
    wait_until 20 slot_held "$n" 1 || fail "hold did not take a slot: $(cat "$T/hold.err")"
    bg acq acquire "$n"
    acq_pid=$BG
    wait_until 20 slot_held "$n" 2 || fail "acquire did not take a slot: $(cat "$T/acq.err")"
    wait_until 20 named "$n" 2 || fail "not named: $(al status "$n")"
    run -0 al --json status "$n"
    assert_json '.held == [1,2] and (.holders | length) == 2
        and .holders[0].slot == 1 and .holders[0].pid == $h and .holders[0].command == "hold"
        and .holders[1].slot == 2 and .holders[1].pid == $a and .holders[1].command == "acquire"
        and .holders[0].host == $host
        and (.holders[0].since | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"))
        and (.holders[0].age_seconds | type == "number" and . >= 0 and . < 60)' \
        --argjson h "$hold_pid" --argjson a "$acq_pid" --arg host "$(hostname)"
    run -0 al status "$n"
    [[ $output == *"slot 1: held by $(hostname) pid $hold_pid since "*" (hold)"* ]] || fail "$output"
    [[ $output == *"slot 2: held by $(hostname) pid $acq_pid since "*" (acquire)"* ]] || fail "$output"
}

@test "status says until when --min-hold keeps a running holder's slot; after the job, the slot is held by its lease alone" {
    al create "$n" 2
    local t0
    t0=$(date +%s)
    bg h hold --min-hold 30 "$n" -- sh -c "touch $T/h.in; while [ ! -e $T/go ]; do sleep 0.05; done"
    local h=$BG
    wait_until 10 test -e "$T/h.in" || fail "$(cat "$T/h.err")"
    wait_until 20 named "$n" 1 || fail "not named: $(al status "$n")"
    run -0 al --json status "$n"
    # whole seconds, from when the slot was taken
    assert_json '.holders[0].min_hold_until | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")'
    local until
    until=$(jq -r '.holders[0].min_hold_until' <<<"$output")
    until=$(date -u -d "$until" +%s)
    [ "$until" -ge $((t0 + 30)) ] && [ "$until" -le $((t0 + 33)) ] ||
        fail "until $until, started at $t0: $output"
    run -0 al status "$n"
    [[ $output == *"(hold), kept until "*"Z by --min-hold"* ]] || fail "$output"
    # without --min-hold: no such key
    bg k hold "$n" -- sleep 60
    wait_until 20 named "$n" 2 || fail "not named: $(al status "$n")"
    run -0 al --json status "$n"
    assert_json '[.holders[] | has("min_hold_until")] == [true, false]'
    touch "$T/go"
    wait_exit "$h" 10
    run -0 al status "$n"
    [[ $output == *"slot 1: held by its lease alone"* ]] || fail "$output"
}

@test "status counts the clients waiting in line, in text and JSON" {
    al create "$n" 1
    bg holder acquire "$n"
    wait_until 20 slot_held "$n" 1 || fail "no holder"
    bg w1 -v acquire "$n"
    bg w2 -v acquire "$n"
    wait_until 20 eval '[ "$(al --json status "$n" | jq .waiting)" = 2 ]' ||
        fail "status: $(al --json status "$n")"
    run -0 al status "$n"
    [[ $output == *$'\nwaiting    2\n'* ]] || fail "$output"
}

@test "a holder does not answer a question whose reply_to is a queue" {
    al create "$n" 1
    bg holder acquire "$n"
    wait_until 20 named "$n" 1 || fail "no holder named: $(al status "$n")"
    run -0 ask "amqplock.$n-1-B" direct 1
    [ "$output" = 1 ] || fail "a direct reply-to question: $output answers"
    run -0 ask "amqplock.$n-1-B" foreign 5
    [ "$output" = 0 ] || fail "$output answers went to a queue"
}

@test "a burst of 200 questions neither ends a hold nor lets anyone in; answers are bounded" {
    al create "$n" 1
    bg hold -v hold "$n" -- sleep 60
    hold_pid=$BG
    wait_until 20 named "$n" 1 || fail "no holder named: $(al status "$n")"
    run -0 ask "amqplock.$n-1-B" direct 200
    note "answers to 200 questions: $output"
    [ "$output" -ge 1 ] && [ "$output" -le 16 ] || fail "$output answers"
    run -1 al acquire -n "$n"
    kill -0 "$hold_pid" || fail "the hold ended: $(cat "$T/hold.err")"
    ! grep -q disconnected "$T/hold.err" || fail "$(cat "$T/hold.err")"
    run -0 al --json status "$n"
    assert_json '.held == [1] and .holders[0].pid == $h' --argjson h "$hold_pid"
}

@test "a holder that does not answer costs status a second at most; --no-names asks nobody and waits for nothing" {
    al create "$n" 2
    # a holder queue held by a raw client, which answers no question
    timeout 60 perl "$BATS_TEST_DIRNAME/tools/holdq.pl" "$AMQPLOCK_TEST_PORT" "amqplock.$n-1-B" \
        >"$T/holdq.out" 2>&1 3>&- &
    local q=$!
    wait_until 10 grep -qx ready "$T/holdq.out" || fail "holdq: $(cat "$T/holdq.out")"
    # The wait for the holder's answer is a second however busy the
    # machine: status takes at least that. What it adds is measured
    # against a status that asks nobody, timed just before and just
    # after (the faster of the two: a busy machine slows either).
    local t0 base base2 took
    t0=$(now)
    run -0 al --json status --no-names "$n"
    assert_json '.held == [1] and .holders == [] and .free == [2]'
    base=$(since "$t0")
    t0=$(now)
    run -0 al --json status "$n"
    assert_json '.held == [1] and .holders == [] and .free == [2]'
    took=$(since "$t0")
    t0=$(now)
    run -0 al --json status --no-names "$n"
    base2=$(since "$t0")
    base=$(awk -v a="$base" -v b="$base2" 'BEGIN { print (a < b ? a : b) }')
    note "status with an unanswering holder took $took s, --no-names $base s"
    # the unanswering holder costs status its second and no more, and
    # --no-names waits for nothing of it
    at_least "$took" 0.95
    at_most "$(awk -v a="$took" -v b="$base" 'BEGIN { printf "%.3f", a - b }')" 2
    at_least "$(awk -v a="$took" -v b="$base" 'BEGIN { printf "%.3f", a - b }')" 0.5
    run -0 al status --no-names "$n"
    assert_line "slot 1: held, its holder unnamed (away, or no answer)"
    kill "$q"
}

@test "hold --label and AMQPLOCK_LABEL are shown by status beside host and pid, in text and JSON; a label that is not printable ASCII of at most 64 bytes is a usage error (64)" {
    al create "$n" 2
    bg a hold --label "nightly db backup" "$n" -- sleep 60
    A=$BG
    wait_until 20 slot_held "$n" 1 || fail "$(cat "$T/a.err")"
    AMQPLOCK_LABEL=from-env bg b hold "$n" -- sleep 60
    B=$BG
    wait_until 20 named "$n" 2 || fail "not named: $(al status "$n")"
    run -0 al status "$n"
    assert_line --regexp "^slot 1: held by .* pid $A since .* \(hold, \"nightly db backup\"\)$"
    assert_line --regexp "^slot 2: held by .* pid $B since .* \(hold, \"from-env\"\)$"
    run -0 al --json status "$n"
    assert_json '[.holders[].label] == ["nightly db backup", "from-env"]'
    run -64 --separate-stderr al hold --label "$(printf 'a\tb')" "$n" -- true
    [ "$stderr" = 'amqplock: --label "a\x09b" may hold only printable ASCII (letters, digits, spaces, punctuation)' ] ||
        fail "$stderr"
    run -64 --separate-stderr al acquire --label "$(printf '%065d' 0)" "$n"
    [[ $stderr == *"is longer than 64 bytes" ]] || fail "$stderr"
    AMQPLOCK_LABEL=$'x\ny' run -64 --separate-stderr al hold "$n" -- true
    [[ $stderr == *'AMQPLOCK_LABEL="x\x0ay" may hold only printable ASCII'*': change it, or give --label' ]] ||
        fail "$stderr"
}

# waiting_count NAME K: status counts K waiting for NAME.
waiting_count() { [ "$(al --json status --no-names "$1" | jq .waiting)" = "$2" ]; }

# waiters_named NAME K: status names K waiters of NAME.
waiters_named() { [ "$(al --json status "$1" | jq '.waiters | length')" = "$2" ]; }

@test "status names the waiters (host, pid, since, label) through the management API, oldest first; without the API it says so and exits 0" {
    [ -n "${AMQPLOCK_TEST_MANAGEMENT_URL:-}" ] ||
        skip "the broker has no management API (AMQPLOCK_TEST_MANAGEMENT_URL)"
    export AMQPLOCK_MANAGEMENT_URL=$AMQPLOCK_TEST_MANAGEMENT_URL
    local other=$n-2
    al create "$n" 1
    al create "$other" 2
    bg h hold "$n" -- sleep 60
    wait_until 20 slot_held "$n" 1 || fail "$(cat "$T/h.err")"
    bg w1 hold --label first -w 60 "$n" -- true
    W1=$BG
    wait_until 20 waiting_count "$n" 1 || fail "w1 does not wait: $(cat "$T/w1.err")"
    nap 1.1
    bg w2 hold -w 60 "$n" -- true
    W2=$BG
    # and a semaphore of two slots, whose waiters wait in #line
    bg h1 hold "$other" -- sleep 60
    bg h2 hold "$other" -- sleep 60
    wait_until 20 slot_held "$other" 2 || fail "$(cat "$T/h2.err")"
    bg w3 hold --label third -w 60 "$other" -- true
    W3=$BG
    # the plugin sees a connection within its statistics interval
    wait_until 30 waiters_named "$n" 2 || fail "status: $(al --json status "$n")"
    run -0 al --json status "$n"
    assert_json '.waiting == 2 and .waiters_named and ([.waiters[].pid] == [$w1, $w2])
        and .waiters[0].label == "first" and (.waiters[1] | has("label") | not)
        and (.waiters[0].since | test("^20[0-9-]+T[0-9:]+Z$"))' --argjson w1 "$W1" --argjson w2 "$W2"
    run -0 al status "$n"
    assert_line --regexp "^waiter     .* pid $W1 since [0-9T:Z-]+ \(\"first\"\)$"
    assert_line --regexp "^waiter     .* pid $W2 since [0-9T:Z-]+$"
    wait_until 30 waiters_named "$other" 1 || fail "status: $(al --json status "$other")"
    run -0 al --json status "$other"
    assert_json '[.waiters[].pid] == [$w3] and .waiters[0].label == "third"' --argjson w3 "$W3"
    # no API: the waiters are counted, not named; status does not fail
    AMQPLOCK_MANAGEMENT_URL=http://127.0.0.1:$(closed_port)/ run -0 al status "$n"
    assert_line "waiting    2"
    assert_line --partial "waiters    not named (the management API at http://127.0.0.1:"
    run -0 al status --no-names "$n"
    refute_line --partial "waiter"
}
