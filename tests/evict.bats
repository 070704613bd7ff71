#!/usr/bin/env bats
# amqplock evict NAME SLOT (docs/design.md, "Evicting a holder"): the
# holder of one slot is told by its missing slot queue, ends its whole
# job, and only then can anyone take the slot; evict says whom it evicted
# and returns once the job has ended. model/hold.pml checks the same
# (EVICTED; tests/model.bats).
#
# Needs jq.

bats_require_minimum_version 1.5.0
load lib/helper

setup() { test_init; }

teardown() { test_cleanup; }

# victim TAG [OPTIONS...]: a hold with --grace 3 whose job is a shell that,
# on SIGTERM, lingers 1.5 s before it exits, and a grandchild in a
# session of its own that ignores SIGTERM; $T/TAG.ended appears when the
# shell is done. Returns once it runs; pid in VICTIM.
victim() {
    local tag=$1
    shift
    bg "$tag" hold --grace 3 "$@" "$n" -- sh -c "
        setsid perl -e '\$SIG{TERM} = \"IGNORE\"; open my \$f, \">\", \"$T/$tag.gc\"; print \$f \$\$; close \$f; sleep 60' &
        trap 'sleep 1.5; touch $T/$tag.ended; exit 0' TERM
        while :; do sleep 0.1; done"
    VICTIM=$BG
    wait_until 10 test -s "$T/$tag.gc" || fail "$tag did not start: $(cat "$T/$tag.err")"
}

# checker TAG: a hold -w 60 whose command writes to $T/TAG.saw whether the
# victim v's job had ended and its grandchild gone when it started.
checker() {
    bg "$1" hold -w 60 "$n" -- sh -c "
        if [ -e $T/v.ended ] && ! kill -0 \$(cat $T/v.gc) 2>/dev/null; then echo after; else echo during; fi >$T/$1.saw"
    CHECKER=$BG
}

# waiting_is N: status counts N waiting.
waiting_is() { [ "$(al --json status --no-names "$n" | jq .waiting)" = "$1" ]; }

@test "evict ends the whole job of a slot's holder (a grandchild too) before a waiter's command starts, names whom it evicted, and the evicted hold exits 75" {
    al create "$n" 1
    victim v
    checker w
    wait_until 10 waiting_is 1 || fail "w does not wait: $(cat "$T/w.err")"
    # (its stderr said on failure: CI's sanitizer pass once saw exit 69
    # here, and nothing more)
    run --separate-stderr al evict "$n" 1
    [ "$status" -eq 0 ] || fail "evict exited $status: $stderr"
    [[ $output == "evicted $n slot 1: held by $(hostname) pid $VICTIM since "*"(hold); its job ended "*" ms after, and the slot is free again" ]] ||
        fail "evict said: $output"
    wait_exit "$VICTIM" 10
    [ "$rc" -eq 75 ] || fail "the evicted hold exited $rc: $(cat "$T/v.err")"
    grep -q "lost slot 1 of $n: its slot queue .* was deleted (amqplock evict" "$T/v.err" ||
        fail "the evicted hold said: $(cat "$T/v.err")"
    wait_exit "$CHECKER" 10
    [ "$rc" -eq 0 ] || fail "the waiter exited $rc: $(cat "$T/w.err")"
    [ "$(cat "$T/w.saw")" = after ] || fail "the waiter's command ran beside the evicted job"
}

@test "a holder without a lease (--lease 0) is evicted the same way: its slot waits for its job's end" {
    al create "$n" 1
    victim v --lease 0
    checker w
    run -0 al evict "$n" 1
    wait_exit "$CHECKER" 10
    [ "$(cat "$T/w.saw")" = after ] || fail "the waiter's command ran beside the evicted job"
}

@test "evict -n tells the holder and exits 1 while its job ends; nobody takes the slot meanwhile; evict again waits for the end" {
    al create "$n" 1
    victim v
    run -1 --separate-stderr al evict -n "$n" 1
    [[ $stderr == *"has not ended its job within the wait"* ]] || fail "stderr: $stderr"
    run -1 al hold -n "$n" -- true
    run -0 --separate-stderr al --json evict "$n" 1
    assert_json '.ok and .slot == 1 and (.holders | length) <= 1 and .waited_ms >= 0'
    run -0 al hold -n "$n" -- true
}

@test "evict interrupted by Ctrl-C (SIGINT) while the job ends: the slot queue is made again before it exits 130, saying so; the holder keeps the slot until its job has ended" {
    al create "$n" 1
    victim v --grace 5
    bg e evict "$n" 1
    local evictor=$BG
    wait_until 10 grep -q "lost slot 1 of $n" "$T/v.err" ||
        fail "the holder was not told: $(cat "$T/v.err"); evict: $(cat "$T/e.err")"
    kill -INT "$evictor"
    wait_exit "$evictor" 10
    [ "$rc" -eq 130 ] || fail "evict exited $rc: $(cat "$T/e.err")"
    grep -qxF "amqplock: interrupted by SIGINT while evicting slot 1 of $n: its slot queue is in place; a holder that has looked ends its job, and keeps the slot until it has" "$T/e.err" ||
        fail "evict said: $(cat "$T/e.err")"
    run -0 al check "$n"
    run -1 al hold -n "$n" -- true
    wait_exit "$VICTIM" 20
    [ "$rc" -eq 75 ] || fail "the evicted hold exited $rc: $(cat "$T/v.err")"
    [ -e "$T/v.ended" ] || fail "the evicted job did not end"
    run -0 al hold -n "$n" -- true
}

@test "evict of a free slot, of a slot past max and of a semaphore that does not exist: exit 66, a line saying so, nothing changed" {
    al create "$n" 2
    run -66 --separate-stderr al evict "$n" 1
    [ "$stderr" = "amqplock: slot 1 of $n is free: nothing to evict" ] || fail "stderr: $stderr"
    run -66 --separate-stderr al evict "$n" 3
    [ "$stderr" = "amqplock: $n has no slot 3 (max 2)" ] || fail "stderr: $stderr"
    run -66 --separate-stderr al evict "$n.nope" 1
    [[ $stderr == "amqplock: semaphore $n.nope does not exist"* ]] || fail "stderr: $stderr"
    run -64 al evict "$n" 0
    [ "$(al --json status --no-names "$n" | jq -c '[.max, .free]')" = '[2,[1,2]]' ]
}
