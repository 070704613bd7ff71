#!/usr/bin/env bats
# remove --drain and max N --drain (docs/design.md, "Draining"): the
# holders of the slots removed run their jobs to the end, undisturbed;
# nobody gets those slots meanwhile; status shows them draining; wait
# returns once they have ended. Without --drain (and by a destroy) every
# job above the new size ends, draining or not. model/hold.pml checks the
# same with -DDRAIN (DRAINED; tests/model.bats).
#
# Needs jq.

bats_require_minimum_version 1.5.0
load lib/helper

setup() { test_init; }

teardown() { test_cleanup; }

# job TAG [OPTIONS...]: a hold whose command writes $T/TAG.start, runs
# until $T/TAG.stop exists, then writes $T/TAG.end; it ignores nothing, so
# a signal ends it at once. Returns once it runs; pid in JOB.
job() {
    local tag=$1
    shift
    bg "$tag" hold "$@" "$n" -- sh -c "
        date +%s.%N >$T/$tag.start
        while [ ! -e $T/$tag.stop ]; do sleep 0.05; done
        date +%s.%N >$T/$tag.end"
    JOB=$BG
    wait_until 10 test -s "$T/$tag.start" || fail "$tag did not start: $(cat "$T/$tag.err")"
}

# draining_is JSON, waiting_is N: what status says.
draining_is() { [ "$(al --json status --no-names "$n" | jq -c .draining)" = "$1" ]; }
waiting_is() { [ "$(al --json status --no-names "$n" | jq .waiting)" = "$1" ]; }

@test "remove --drain: the removed slot's job runs on and exits 0, status shows it draining, a waiter does not get it, and wait returns once it has ended" {
    al create "$n" 2
    job a
    A=$JOB
    job b
    B=$JOB
    bg w hold -w 60 "$n" -- sh -c "date +%s.%N >$T/w.start"
    W=$BG
    wait_until 10 waiting_is 1 || fail "w does not wait: $(cat "$T/w.err")"
    run -0 --separate-stderr al remove --drain "$n"
    assert_output "$n: 2 -> 1 slot"
    [ "$stderr" = "amqplock: 1 running holder of $n drains: its job runs on to its end, and nobody gets its slot meanwhile (amqplock wait $n returns once it has ended)" ] ||
        fail "remove said: $stderr"
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.max == 1 and .held == [1] and .orphans == [2] and .draining == [2]'
    run -0 al status --no-names "$n"
    assert_line "draining   1: 2 (removed by a --drain shrink: the jobs run on to their end)"
    run -0 al status --metrics --no-names "$n"
    assert_line "amqplock_draining{semaphore=\"$n\"} 1"
    # the holder heard of it, and goes on (a verification a second)
    wait_until 10 grep -q "slot 2 of $n was removed by a --drain shrink: the command runs on" "$T/b.err" ||
        fail "b was not told: $(cat "$T/b.err")"
    nap 1.5
    ! ended "$B" || fail "the draining hold ended: $(cat "$T/b.err")"
    [ ! -e "$T/b.end" ] || fail "the draining job was ended"
    run -1 al wait -w 0.5 "$n"
    touch "$T/b.stop"
    wait_exit "$B" 10
    [ "$rc" -eq 0 ] || fail "the draining hold exited $rc: $(cat "$T/b.err")"
    [ -e "$T/b.end" ] || fail "the draining job did not run to its end"
    run -0 al wait -w 10 "$n"
    # slot 2 went with its holder: the waiter still waits for slot 1
    nap 1
    [ ! -e "$T/w.start" ] || fail "the waiter got the drained slot"
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.max == 1 and .orphans == [] and .draining == [] and .waiting == 1'
    touch "$T/a.stop"
    wait_exit "$W" 20
    [ "$rc" -eq 0 ] || fail "the waiter exited $rc: $(cat "$T/w.err")"
    wait_exit "$A" 10
}

@test "max NAME 0 --drain pauses: running jobs finish with exit 0, no new one starts, wait returns, max N resumes" {
    al create "$n" 2
    job a
    A=$JOB
    job b
    B=$JOB
    run -0 --separate-stderr al --json max "$n" 0 --drain
    assert_json '.max == 0 and .previous == 2 and .draining_holders == 2 and (has("ended_holders") | not)'
    run -1 --separate-stderr al hold -n "$n" -- true
    [[ $stderr == *"paused"* ]] || fail "hold -n said: $stderr"
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.paused and .draining == [1,2]'
    bg w wait -w 60 "$n"
    WAIT=$BG
    touch "$T/a.stop" "$T/b.stop"
    wait_exit "$A" 10
    [ "$rc" -eq 0 ] || fail "a exited $rc: $(cat "$T/a.err")"
    wait_exit "$B" 10
    [ "$rc" -eq 0 ] || fail "b exited $rc: $(cat "$T/b.err")"
    wait_exit "$WAIT" 10
    [ "$rc" -eq 0 ] || fail "wait exited $rc: $(cat "$T/w.err")"
    run -0 al max "$n" 2
    run -0 al hold -n "$n" -- true
}

@test "a size set without --drain ends the draining jobs too, the same size included, and their holds say why (exit 75)" {
    al create "$n" 2
    job a
    job b
    B=$JOB
    run -0 al remove --drain "$n"
    wait_until 10 grep -q "removed by a --drain shrink" "$T/b.err" || fail "$(cat "$T/b.err")"
    run -0 --separate-stderr al --json max "$n" 1
    assert_json '.ended_holders == 1'
    wait_exit "$B" 10
    [ "$rc" -eq 75 ] || fail "b exited $rc: $(cat "$T/b.err")"
    grep -q "lost slot 2 of $n: slot 2 of $n was draining, and a shrink without --drain or a destroy has ended its drain" "$T/b.err" ||
        fail "b said: $(cat "$T/b.err")"
    [ ! -e "$T/b.end" ] || fail "the job ran to its end"
}

@test "a plain remove says in user terms that the slot was removed by a shrink; made again, a draining slot is held as before" {
    al create "$n" 3
    job a
    job b
    job c
    C=$JOB
    run -0 al remove --drain "$n"
    wait_until 10 grep -q "removed by a --drain shrink" "$T/c.err" || fail "$(cat "$T/c.err")"
    run -0 al add "$n"
    wait_until 10 grep -q "slot 3 of $n was made again: it is held as before the drain" "$T/c.err" ||
        fail "c was not told: $(cat "$T/c.err")"
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.max == 3 and .held == [1,2,3] and .draining == []'
    # an ordinary holder again: a plain remove ends it
    run -0 al remove "$n"
    wait_exit "$C" 10
    [ "$rc" -eq 75 ] || fail "c exited $rc: $(cat "$T/c.err")"
    grep -q "slot 3 of $n was removed: $n shrank to 2 slots without --drain (amqplock remove, max or destroy)" "$T/c.err" ||
        fail "c said: $(cat "$T/c.err")"
}

@test "a draining holder's release hands nothing over and wakes nobody: the one in line gets a slot only when one is made" {
    al create "$n" 1
    job a
    A=$JOB
    bg w hold -w 60 "$n" -- sh -c "date +%s.%N >$T/w.start"
    W=$BG
    wait_until 10 waiting_is 1 || fail "w does not wait: $(cat "$T/w.err")"
    run -0 al max "$n" 0 --drain
    wait_until 10 grep -q "removed by a --drain shrink" "$T/a.err" || fail "$(cat "$T/a.err")"
    touch "$T/a.stop"
    wait_exit "$A" 10
    [ "$rc" -eq 0 ] || fail "a exited $rc: $(cat "$T/a.err")"
    nap 1.5
    [ ! -e "$T/w.start" ] || fail "the one in line got the drained slot: $(cat "$T/w.err")"
    run -0 al max "$n" 1
    wait_exit "$W" 20
    [ "$rc" -eq 0 ] || fail "w exited $rc: $(cat "$T/w.err")"
    [ -e "$T/w.start" ] || fail "w never ran"
}

@test "draining holders far above max are found by status and wait (the markers have no gaps); their markers go with the last of them" {
    al create "$n" 6
    local i
    for i in 1 2 3 4 5 6; do job "j$i"; done
    J6=$JOB
    for i in 2 3 4 5; do touch "$T/j$i.stop"; done
    wait_until 10 eval '[ "$(al --json status --no-names "$n" | jq -c .held)" = "[1,6]" ]' ||
        fail "held: $(al --json status --no-names "$n" | jq -c .held)"
    run -0 al max "$n" 1 --drain
    # the holder queues and leases alone would be looked for in 2..3 only
    run -0 --separate-stderr al --json status --no-names --overshoot 2 "$n"
    assert_json '.max == 1 and .orphans == [6] and .draining == [6]'
    run -1 al wait -w 0.5 --overshoot 2 "$n"
    touch "$T/j6.stop"
    wait_exit "$J6" 10
    [ "$rc" -eq 0 ] || fail "j6 exited $rc: $(cat "$T/j6.err")"
    run -0 al wait -w 10 --overshoot 2 "$n"
    # the next administrative command sweeps the markers
    run -0 al max "$n" 1
    run -0 rmqctl list_queues name
    ! grep -q -- "^amqplock\.$n-[0-9]*-D$" <<<"$output" || fail "markers left: $output"
    touch "$T/j1.stop"
}
