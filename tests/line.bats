#!/usr/bin/env bats
# Waiters in line: holds are served in the order they began to wait, a
# free slot is the first waiter's while it takes it and not a newcomer's
# (-n says busy then), and the line never stalls for more than 10 s behind
# a waiter that died, is stopped (also one the broker never drops:
# heartbeats off), a consumer that takes wake-ups and never a slot, or a
# line deleted; added slots wake as many waiters.
# Timing bounds here catch stalls, not slowness: the line's speed is
# measured by make bench.
#
# Needs perl (core modules only) and jq. Helper scripts live in tests/tools/
# (linehead.pl: a first in line that takes wake-ups and never a slot).

bats_require_minimum_version 1.5.0
load lib/helper

setup() {
    test_init
}

teardown() { test_cleanup; }

# holder TAG: an acquire of the semaphore's slot in the background (BG);
# returns once it holds it.
holder() {
    bg "$1" acquire "$n"
    wait_until 10 has_line "$T/$1.out" '[0-9]+' || fail "acquire $1 got no slot: $(cat "$T/$1.err")"
}

# started TAG: the hold TAG's command has started (it touches $T/TAG.ran).
started() { test -e "$T/$1.ran"; }

# waiter TAG [OPTIONS...]: a hold -v -w 60 in the background (started by
# $START, default bg) whose command touches $T/TAG.ran, appends TAG to
# $T/order and "TAG SLOT" to $T/slots, then sleeps as long as $T/TAG.hold
# says (default 0); returns once it is in line (or as $ARRIVED says).
# Pid in BG.
waiter() {
    local tag=$1
    shift
    "${START:-bg}" "$tag" -v hold -w 60 "$@" "$n" -- sh -c \
        "touch '$T/$tag.ran'; echo $tag >>'$T/order'; echo $tag \$AMQPLOCK_SLOT >>'$T/slots'; sleep \$(cat '$T/$tag.hold' 2>/dev/null || echo 0)"
    "${ARRIVED:-in_line}" "$tag"
}

# in_line_or_ran TAG: TAG joined the line, or ran its command without
# waiting: everyone ahead of it had been served by the time it looked (a
# busy machine may take longer to start a hold than the jobs ahead last).
in_line_or_ran() {
    joined() { grep -q "waiting on amqplock.$n#" "$T/$1.err" 2>/dev/null || started "$1"; }
    wait_until 20 joined "$1" || fail "$1 neither joined the line nor ran: $(cat "$T/$1.err")"
}

# line_up TAG...: a 1-slot semaphore whose slot acquire a holds, and the
# waiters TAG... (see waiter) in line in that order; pids in PID[a] and
# PID[TAG].
line_up() {
    declare -gA PID
    al create "$n" 1
    holder a
    PID[a]=$BG
    local tag
    for tag in "$@"; do
        waiter "$tag"
        PID[$tag]=$BG
    done
}

@test "30 holds arriving 50 ms apart on 1 slot run in the order they arrived" {
    al create "$n" 1
    local i pids=()
    : >"$T/order"
    for i in $(seq 1 30); do
        echo 0.15 >"$T/w$i.hold"
        if [ "$i" -eq 1 ]; then
            bg w1 -v hold -w 120 "$n" -- sh -c "echo w1 >>'$T/order'; sleep 0.15"
            wait_until 10 grep -qx w1 "$T/order" || fail "w1 did not start: $(cat "$T/w1.err")"
        else
            ARRIVED=in_line_or_ran waiter "w$i"
        fi
        pids+=("$BG")
        sleep 0.05
    done
    for i in $(seq 1 30); do
        wait_exit "${pids[i - 1]}" 60
        [ "$rc" -eq 0 ] || fail "hold w$i exited $rc: $(cat "$T/w$i.err")"
    done
    local want got
    want=$(seq 1 30 | sed 's/^/w/' | paste -sd' ')
    got=$(paste -sd' ' "$T/order")
    [ "$got" = "$want" ] || fail "served out of order: $got"
}

# A first in line that takes every wake-up and never a slot: a stray
# script that consumes the line, or an inspector (who may read it to
# count the waiters). Waiters judge the first in line by what it does:
# a slot still free half a second after a fresh wake-up was not taken.
@test "a first in line that takes wake-ups but never a slot holds a free slot at most 10 s: -n takes it in half a second, a waiter behind it within 10 s" {
    declare -gA PID
    al create "$n" 1
    holder a
    PID[a]=$BG
    perl "$H/linehead.pl" "$AMQPLOCK_TEST_PORT" "amqplock.$n#waiters" >"$T/head.out" 2>&1 3>&- &
    keep $!
    wait_until 10 grep -qx ready "$T/head.out" || fail "linehead.pl: $(cat "$T/head.out")"
    kill -TERM "${PID[a]}"
    wait_exit "${PID[a]}" 10
    wait_until 10 slot_free "$n" 1 || fail "slot 1 not free after the release"
    local t0 took
    t0=$(now)
    run -0 --separate-stderr al hold -n "$n" -- touch "$T/n.ran"
    took=$(since "$t0")
    note "hold -n took the slot in $took s behind a first in line that never takes one"
    [ -e "$T/n.ran" ]
    at_most "$took" 3
    # The line deleted, the stray consumer with it; a holder, then the
    # stray consumer back, first again, and a waiter behind it.
    holder b
    PID[b]=$BG
    perl "$H/linehead.pl" "$AMQPLOCK_TEST_PORT" "amqplock.$n#waiters" >"$T/head2.out" 2>&1 3>&- &
    keep $!
    wait_until 10 grep -qx ready "$T/head2.out" || fail "linehead.pl: $(cat "$T/head2.out")"
    waiter w1
    local w1=$BG
    t0=$(now)
    kill -TERM "${PID[b]}"
    wait_exit "${PID[b]}" 10
    wait_until 20 started w1 || fail "w1 not served: $(cat "$T/w1.err")"
    took=$(since "$t0")
    note "w1 served $took s after the release, behind a first in line that never takes a slot"
    at_most "$took" 10
    grep -q "has not taken free slot" "$T/w1.err" || fail "w1 did not say why: $(cat "$T/w1.err")"
    wait_exit "$w1" 10
    [ "$rc" -eq 0 ] || fail "w1 exited $rc: $(cat "$T/w1.err")"
}

# The first in line is stopped as the slot comes free, and continued once
# a newcomer -n has woken it: it takes the slot within its half second,
# and -n is told busy. (Had it taken the slot before -n looked, -n would
# be told busy as well: all that may not happen is -n running.)
@test "-n does not take a free slot from a first in line that takes it within half a second of its wake-up" {
    declare -gA PID
    al create "$n" 1
    holder a
    PID[a]=$BG
    waiter w1
    PID[w1]=$BG
    kill -STOP "${PID[w1]}"
    kill -TERM "${PID[a]}"
    wait_exit "${PID[a]}" 10
    wait_until 10 slot_free "$n" 1 || fail "slot 1 not free after the release"
    bg nb -v hold -n "$n" -- touch "$T/barged"
    local nb=$BG
    wait_until 10 grep -q "clients\? wait for a slot" "$T/nb.err" || fail "$(cat "$T/nb.err")"
    kill -CONT "${PID[w1]}"
    wait_exit "$nb" 10
    [ "$rc" -eq 1 ] || fail "hold -n exited $rc: $(cat "$T/nb.err")"
    [ ! -e "$T/barged" ] || fail "hold -n took the slot from the first in line"
    grep -q "amqplock: others are already waiting for a slot of $n\|is held" "$T/nb.err" ||
        fail "$(cat "$T/nb.err")"
    wait_exit "${PID[w1]}" 10
    [ "$rc" -eq 0 ] || fail "w1 exited $rc: $(cat "$T/w1.err")"
    started w1
}

@test "a waiter killed at the head of the line, holding its wake-up, does not stall the next: served within 1 s" {
    line_up w1 w2 w3
    local w1=${PID[w1]} w2=${PID[w2]} w3=${PID[w3]}
    # w1 is woken but stopped: the wake-up waits, unacknowledged, with it.
    kill -STOP "$w1"
    kill -TERM "${PID[a]}"
    wait_exit "${PID[a]}" 10
    sleep 0.5
    started w2 && fail "w2 was served while w1 was first in line"
    local t0
    t0=$(now)
    kill -KILL "$w1"
    wait_until 10 started w2 || fail "w2 not served: $(cat "$T/w2.err")"
    local took
    took=$(since "$t0")
    note "w2 served ${took} s after the head of the line was killed"
    at_most "$took" 1
    wait_exit "$w2" 10
    [ "$rc" -eq 0 ]
    wait_exit "$w3" 10
    [ "$rc" -eq 0 ]
    [ "$(paste -sd' ' "$T/order")" = "w2 w3" ]
}

# stuck_head: a 1-slot semaphore whose slot acquire a holds, w1 first in
# line with heartbeats off (the broker never drops it) and stopped, as a
# frozen host would leave it; then a lets go. Pids in PID[a] and PID[w1].
stuck_head() {
    declare -gA PID
    al create "$n" 1
    holder a
    PID[a]=$BG
    waiter w1 --heartbeat 0
    PID[w1]=$BG
    "$@"
    kill -STOP "${PID[w1]}"
    T0=$(now)
    kill -TERM "${PID[a]}"
    wait_exit "${PID[a]}" 10
}

@test "a first in line that never takes its turn (stopped, heartbeats off) loses it: the next is served within 10 s" {
    stuck_head waiter w2
    local w1=${PID[w1]} w2=$BG
    wait_until 20 started w2 || fail "w2 not served behind a stuck head: $(cat "$T/w2.err")"
    local took
    took=$(since "$T0")
    note "w2 served $took s after the release, the first in line stopped"
    at_most "$took" 10
    grep -q "has not taken free slot" "$T/w2.err" || fail "w2 did not say why: $(cat "$T/w2.err")"
    kill -CONT "$w1"
    wait_exit "$w2" 10
    [ "$rc" -eq 0 ]
    # continued, the stuck one still gets its turn
    wait_exit "$w1" 30
    [ "$rc" -eq 0 ] || fail "w1 exited $rc: $(cat "$T/w1.err")"
    [ "$(paste -sd' ' "$T/order")" = "w2 w1" ]
}

@test "-n is not told busy while a slot sits free behind a stuck first in line" {
    stuck_head
    sleep 0.5
    local t0
    t0=$(now)
    run -0 --separate-stderr al hold -n "$n" -- touch "$T/n.ran"
    note "hold -n got the free slot in $(since "$t0") s"
    at_most "$(since "$t0")" 3
    [ -e "$T/n.ran" ]
    kill -CONT "${PID[w1]}"
    wait_exit "${PID[w1]}" 30
    [ "$rc" -eq 0 ] || fail "w1 exited $rc: $(cat "$T/w1.err")"
}

@test "add wakes as many waiters as slots added, in line order, within a second" {
    al create "$n" 1
    holder a
    local i pids=()
    for i in 1 2 3 4; do
        echo 30 >"$T/w$i.hold"
        waiter "w$i"
        pids+=("$BG")
    done
    # Long enough for every waiter's polling to have backed off.
    sleep 1.5
    local t0
    t0=$(now)
    run -0 al -v add "$n" 3
    assert_output --partial "waking 3"
    wait_until 10 started w3 || fail "w3 not served after add: $(cat "$T/w3.err")"
    local took
    took=$(since "$t0")
    note "3 waiters served ${took} s after add 3"
    at_most "$took" 1
    started w1 && started w2 || fail "w1 or w2 not served"
    sleep 1
    started w4 && fail "w4 was served with every slot held"
    # Served in line order: each claims the lowest free slot after the one
    # before it has claimed. (Which command then writes first is up to the
    # scheduler: three commands start within milliseconds.)
    [ "$(sort "$T/slots" | paste -sd' ')" = "w1 2 w2 3 w3 4" ] ||
        fail "not served in line order: $(paste -sd' ' "$T/slots")"
}

@test "a line deleted behind the waiters' back: they poll and take the slot once it is free" {
    line_up w1 w2
    rmqctl delete_queue "amqplock.$n#waiters" >/dev/null
    wait_until 10 grep -q "the line was deleted; polling instead" "$T/w1.err" ||
        fail "w1 was not told: $(cat "$T/w1.err")"
    kill -TERM "${PID[a]}"
    wait_exit "${PID[w1]}" 10
    [ "$rc" -eq 0 ] || fail "w1 exited $rc: $(cat "$T/w1.err")"
    wait_exit "${PID[w2]}" 10
    [ "$rc" -eq 0 ] || fail "w2 exited $rc: $(cat "$T/w2.err")"
}

@test "a waiters queue of an older amqplock (no single active consumer): waiters poll, nothing stalls" {
    al create "$n" 1
    # What amqplock before the line declared: durable, no line.
    perl "$H/holdq.pl" "$AMQPLOCK_TEST_PORT" --shared "amqplock.$n#waiters" --exit >/dev/null
    holder a
    local a=$BG
    bg w1 -v hold -w 60 "$n" -- touch "$T/w1.ran"
    local w1=$BG
    wait_until 10 grep -q "notifications refused; polling instead" "$T/w1.err" ||
        fail "w1 did not fall back to polling: $(cat "$T/w1.err")"
    kill -TERM "$a"
    wait_exit "$w1" 10
    [ "$rc" -eq 0 ] || fail "w1 exited $rc: $(cat "$T/w1.err")"
    started w1
    perl "$H/holdq.pl" "$AMQPLOCK_TEST_PORT" --delete "amqplock.$n#waiters" --exit >/dev/null
}

@test "a waiter that gives up (-w) passes its turn on: the next in line is served" {
    al create "$n" 1
    holder a
    local a=$BG
    bg w1 -v hold -w 2 "$n" -- touch "$T/w1.ran"
    local w1=$BG
    in_line w1
    waiter w2
    local w2=$BG
    wait_exit "$w1" 10
    [ "$rc" -eq 1 ] || fail "w1 exited $rc: $(cat "$T/w1.err")"
    kill -TERM "$a"
    wait_exit "$w2" 10
    [ "$rc" -eq 0 ] || fail "w2 exited $rc: $(cat "$T/w2.err")"
    [ ! -e "$T/w1.ran" ]
}

# is_stopped PID: PID is stopped (state T)
is_stopped() { [ "$(state "$1")" = T ]; }

@test "kill -TSTP (Ctrl-Z) of the first in line: it steps out, the next is served; continued, it queues again, last" {
    echo 1 >"$T/w2.hold"
    # w1 a job of a shell, as Ctrl-Z finds it (see bg_job)
    START=bg_job line_up w1
    waiter w2
    local w1=${PID[w1]} w2=$BG
    kill -TSTP "$w1"
    wait_until 10 is_stopped "$w1" || fail "w1 did not stop: $(cat "$T/w1.err")"
    grep -q "stopped: leaving the line of $n" "$T/w1.err" || fail "w1 kept its place: $(cat "$T/w1.err")"
    local t0
    t0=$(now)
    kill -TERM "${PID[a]}"
    wait_until 10 started w2 || fail "w2 not served while w1 was stopped: $(cat "$T/w2.err")"
    note "w2 served $(since "$t0") s after the release, w1 stopped"
    echo 1 >"$T/w3.hold"
    waiter w3
    local w3=$BG
    kill -CONT "$w1"
    wait_until 10 grep -q "continued: joining the line of $n again, last" "$T/w1.err" ||
        fail "w1 did not join again: $(cat "$T/w1.err")"
    local p
    for p in "$w1" "$w2" "$w3"; do
        wait_exit "$p" 30
        [ "$rc" -eq 0 ] || fail "a hold exited $rc: $(cat "$T"/w*.err)"
    done
    [ "$(paste -sd' ' "$T/order")" = "w2 w3 w1" ]
}

@test "kill -TSTP of a waiter that no stop can stop (an orphaned process group): it keeps its place" {
    echo 1 >"$T/w2.hold"
    # setsid: a session of its own, whose only group has no parent
    # outside it; the kernel discards TSTP there
    AMQPLOCK_WRAP="setsid ${AMQPLOCK_WRAP:-}" START=bg line_up w1
    waiter w2
    local w1=${PID[w1]} w2=$BG
    kill -TSTP "$w1"
    sleep 0.5
    is_stopped "$w1" && fail "w1 stopped"
    ! grep -q "stopped: leaving the line" "$T/w1.err" || fail "w1 left the line: $(cat "$T/w1.err")"
    kill -TERM "${PID[a]}"
    local p
    for p in "$w1" "$w2"; do
        wait_exit "$p" 30
        [ "$rc" -eq 0 ] || fail "a hold exited $rc: $(cat "$T"/w*.err)"
    done
    [ "$(paste -sd' ' "$T/order")" = "w1 w2" ]
}
