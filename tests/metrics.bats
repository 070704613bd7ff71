#!/usr/bin/env bats
# status --metrics and list --metrics: OpenMetrics text for Prometheus and
# node_exporter's textfile collector, read back by the Prometheus Python
# client's two parsers (python3-prometheus-client: OpenMetrics, strict,
# and the older text format that node_exporter reads); and status with
# several names.
#
# Needs jq and python3-prometheus-client (Debian's python3).

bats_require_minimum_version 1.5.0
load lib/helper

setup() { test_init; }

teardown() { test_cleanup; }

# parse FORMAT FILE: FILE read by the client's parser of FORMAT
# (openmetrics or text); prints "family sample-count" per family.
parse() {
    local module=openmetrics.parser
    [ "$1" = openmetrics ] || module=parser
    /usr/bin/python3 -c "
import sys
from prometheus_client.$module import text_string_to_metric_families as parse
for f in parse(open(sys.argv[1]).read()):
    print(f.name, len(f.samples))" "$2"
}

# sample FILE FAMILY SEMAPHORE: the value of FAMILY{semaphore="SEMAPHORE"}.
sample() {
    awk -v k="$2{semaphore=\"$3\"}" '$1 == k { print $2 }' "$1"
}

@test "status --metrics NAME...: OpenMetrics text both Prometheus parsers accept, one sample per semaphore, amqplock_up 0 and exit 66 for one that does not exist" {
    al create "$n" 3
    al create "$n.b" 1
    bg h hold "$n" -- sleep 30
    wait_until 10 slot_held "$n" 1 || fail "not held: $(cat "$T/h.err")"
    sleep 1.2
    run -66 --separate-stderr al status --metrics "$n" "$n.nope" "$n.b"
    echo "$output" >"$T/m"
    [[ $stderr == *"$n.nope does not exist"* ]] || fail "stderr: $stderr"
    parse openmetrics "$T/m" >"$T/om" || fail "OpenMetrics parser: $(cat "$T/m")"
    parse text "$T/m" >"$T/tf" || fail "text-format parser: $(cat "$T/m")"
    grep -qx "amqplock_up 3" "$T/om" || fail "families: $(cat "$T/om")"
    grep -qx "amqplock_max 2" "$T/om" || fail "families: $(cat "$T/om")"
    [ "$(sample "$T/m" amqplock_up "$n.nope")" = 0 ] || fail "$(cat "$T/m")"
    [ "$(sample "$T/m" amqplock_up "$n")" = 1 ] || fail "$(cat "$T/m")"
    [ "$(sample "$T/m" amqplock_max "$n")" = 3 ] || fail "$(cat "$T/m")"
    [ "$(sample "$T/m" amqplock_held "$n")" = 1 ] || fail "$(cat "$T/m")"
    [ "$(sample "$T/m" amqplock_free "$n")" = 2 ] || fail "$(cat "$T/m")"
    [ "$(sample "$T/m" amqplock_free "$n.b")" = 1 ] || fail "$(cat "$T/m")"
    [ "$(sample "$T/m" amqplock_waiting "$n")" = 0 ] || fail "$(cat "$T/m")"
    awk -v a="$(sample "$T/m" amqplock_oldest_holder_age_seconds "$n")" 'BEGIN { exit !(a >= 1 && a < 30) }' ||
        fail "age: $(cat "$T/m")"
    [ -z "$(sample "$T/m" amqplock_oldest_holder_age_seconds "$n.b")" ] || fail "$(cat "$T/m")"
    [ "$(tail -n 1 "$T/m")" = "# EOF" ] || fail "no # EOF last"
}

@test "the OpenMetrics parser these tests use is strict: it refuses a missing # EOF and a counter's sample without _total" {
    printf '# TYPE a gauge\na 1\n' >"$T/bad1"
    run ! parse openmetrics "$T/bad1"
    printf '# TYPE a counter\na 1\n# EOF\n' >"$T/bad3"
    run ! parse openmetrics "$T/bad3"
}

@test "list --metrics: max, held and waiting of every semaphore, accepted by both parsers" {
    al create "$n" 2
    bg h hold "$n" -- sleep 30
    wait_until 10 slot_held "$n" 1 || fail "not held: $(cat "$T/h.err")"
    run -0 --separate-stderr al --management-url "$AMQPLOCK_TEST_MANAGEMENT_URL" list --metrics
    echo "$output" >"$T/m"
    parse openmetrics "$T/m" >"$T/om" || fail "OpenMetrics parser: $(cat "$T/m")"
    parse text "$T/m" >/dev/null || fail "text-format parser: $(cat "$T/m")"
    [ "$(cut -d' ' -f1 "$T/om" | xargs)" = "amqplock_max amqplock_held amqplock_waiting" ] ||
        fail "families: $(cat "$T/om")"
    [ "$(sample "$T/m" amqplock_max "$n")" = 2 ] || fail "$(cat "$T/m")"
    [ "$(sample "$T/m" amqplock_held "$n")" = 1 ] || fail "$(cat "$T/m")"
}

@test "status NAME NAME: a text block and a JSON object per semaphore; one that does not exist is said in its place, the others shown, exit 66" {
    al create "$n" 2
    al create "$n.b" 1
    run -66 --separate-stderr al status "$n" "$n.nope" "$n.b"
    [ "$(grep -c '^semaphore ' <<<"$output")" -eq 2 ] || fail "$output"
    [[ $stderr == *"$n.nope does not exist"* ]] || fail "stderr: $stderr"
    run -66 --separate-stderr al --json status "$n" "$n.nope" "$n.b"
    [ "$(jq -sc 'map([.semaphore, .ok])' <<<"$output")" = "[[\"$n\",true],[\"$n.nope\",false],[\"$n.b\",true]]" ] ||
        fail "$output"
}

@test "--metrics with --json is refused (64); --metrics applies to status and list only" {
    run -64 al --json status --metrics "$n"
    [[ $output == *"--json or --metrics"* ]] || fail "$output"
    run -64 al max --metrics "$n"
    [[ $output == *"does not apply to max"* ]] || fail "$output"
}

@test "status NAME NAME with the broker unreachable: one line, exit 69; --metrics still prints amqplock_up 0 for each" {
    run -69 --separate-stderr al -u amqp://guest:guest@127.0.0.1:1/ status "$n" "$n.b"
    [ "$(wc -l <<<"$stderr")" -eq 1 ] || fail "stderr: $stderr"
    run -69 --separate-stderr al -u amqp://guest:guest@127.0.0.1:1/ status --metrics "$n" "$n.b"
    [ "$(wc -l <<<"$stderr")" -eq 1 ] || fail "stderr: $stderr"
    [ "$(grep -c '^amqplock_up{.*} 0$' <<<"$output")" -eq 2 ] || fail "$output"
}
