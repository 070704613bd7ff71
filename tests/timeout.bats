#!/usr/bin/env bats
# hold --timeout (and $AMQPLOCK_TIMEOUT): a command that runs too long is
# ended, its whole tree, while the slot stays taken until the last of its
# processes is gone; hold then exits 124, as timeout(1) does.
#
# Needs jq and perl (core modules).

bats_require_minimum_version 1.5.0
load lib/helper

setup() { test_init; }

teardown() { test_cleanup; }

# at_least T M, at_most T M: seconds T (as since prints them) against M.
at_least() { awk -v t="$1" -v m="$2" 'BEGIN { exit !(t >= m) }'; }
at_most() { awk -v t="$1" -v m="$2" 'BEGIN { exit !(t <= m) }'; }

@test "hold --timeout 2: a grandchild that ignores SIGTERM gets SIGKILL --grace later, the whole tree is gone before a waiter's command starts, and hold exits 124" {
    al create "$n" 1
    local t0=$EPOCHREALTIME took
    bg h hold --timeout 2 --grace 1 "$n" -- sh -c \
        "perl -e '\$SIG{TERM} = \"IGNORE\"; open my \$f, \">\", \"$T/gc.pid\"; print \$f \$\$; close \$f; sleep 60' & sleep 60"
    local h=$BG
    wait_until 10 test -s "$T/gc.pid" || fail "no grandchild: $(cat "$T/h.err")"
    bg w hold -w 30 "$n" -- sh -c \
        "if kill -0 $(cat "$T/gc.pid") 2>/dev/null; then echo alive; else echo gone; fi >'$T/w.saw'"
    wait_exit "$h" 15
    took=$(since "$t0")
    [ "$rc" -eq 124 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    note "hold ended $took s after it started"
    at_least "$took" 3 || fail "ended after $took s, before --timeout + --grace"
    at_most "$took" 8 || fail "ended after $took s"
    wait_exit "$BG" 15
    [ "$rc" -eq 0 ] || fail "the waiter exited $rc: $(cat "$T/w.err")"
    [ "$(cat "$T/w.saw")" = gone ] || fail "the waiter's command ran beside the grandchild"
}

@test "a command that ends on SIGTERM at --timeout: hold exits 124 at once, and --json tells the timeout and exit_status 124" {
    al create "$n" 1
    local t0=$EPOCHREALTIME took
    run -124 timeout 20 "$AMQPLOCK_BIN" --json hold --timeout 1 "$n" -- sleep 30
    took=$(since "$t0")
    at_most "$took" 3 || fail "took $took s"
    echo "$output" | grep '^{' | grep -q '"event":"timeout".*"grace_ms":10000' ||
        fail "no timeout event: $output"
    echo "$output" | grep '^{' | grep -q '"event":"released".*"exit_status":124' ||
        fail "no exit_status 124: $output"
    slot_free "$n" 1
}

@test "a command that ends before --timeout keeps its own exit status" {
    al create "$n" 1
    run -3 al hold --timeout 10 "$n" -- sh -c 'exit 3'
}

@test "AMQPLOCK_TIMEOUT works as --timeout; --timeout 0 turns it off; a bad value is refused (64) naming the variable" {
    al create "$n" 1
    AMQPLOCK_TIMEOUT=0.5 run -124 al hold "$n" -- sleep 30
    AMQPLOCK_TIMEOUT=0.5 run -0 al hold --timeout 0 "$n" -- sleep 1
    AMQPLOCK_TIMEOUT=soon run -64 al hold "$n" -- true
    [[ $output == 'amqplock: AMQPLOCK_TIMEOUT="soon" is not a duration'* ]] ||
        fail "message: $output"
    run -64 al hold --timeout soon "$n" -- true
    [[ $output == *'--timeout "soon"'* ]] || fail "message: $output"
}

@test "--timeout with --min-hold: after a timeout the slot stays taken until the minimum" {
    al create "$n" 1
    local t0=$EPOCHREALTIME took
    run -124 al hold --timeout 1 --min-hold 5 "$n" -- sleep 30
    run -1 al hold -n "$n" -- true
    wait_until 15 al hold -n "$n" -- true || fail "the slot never came free"
    took=$(since "$t0")
    note "free again $took s after the hold started"
    at_least "$took" 4.5 || fail "free after $took s, before the minimum"
}
