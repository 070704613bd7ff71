#!/usr/bin/env bats
# The administration commands against a live broker: create, destroy, add,
# remove, max and status; their text and JSON output, the queues they
# leave, the admin mutex, and the repair of a semaphore with a hole.
#
# Needs jq, and perl (core modules only) for tests/tools/holdq.pl.

bats_require_minimum_version 1.5.0
load lib/helper

# "name durable exclusive messages" of every queue of semaphore $1 under any
# prefix (P$1, P$1-k-A, P$1-k-B), sorted (a quorum queue, which has no
# exclusive flag, as "false"). One rabbitmqctl call.
sem_queues() {
    rmqctl -q list_queues name durable exclusive messages --no-table-headers 2>/dev/null |
        awk -F '\t' -v n="$1" '{
            i = index($1, n); rest = substr($1, i + length(n))
            if (i && (rest == "" || substr(rest, 1, 1) == "-")) print $1, $2, ($3 == "" ? "false" : $3), $4
        }' | sort -V
}

# The lines sem_queues prints for slots FROM..TO of NAME under PREFIX.
slot_lines() { # PREFIX NAME FROM TO
    local i
    for ((i = $3; i <= $4; i++)); do
        echo "$1$2-$i-A true false 0"
    done | sort -V
}

# hold_queues QUEUE...: declares each QUEUE exclusive on one connection of
# its own and keeps them (a slot holder, or another administrator's mutex)
# until release_queues. A minimal AMQP 0-9-1 client in core perl.
hold_queues() {
    local out="$BATS_TEST_TMPDIR/hold.out" i
    : >"$out"
    timeout 60 perl "$TOP/tests/tools/holdq.pl" "$AMQPLOCK_TEST_PORT" "$@" >"$out" 2>&1 3>&- &
    HOLD_PID=$!
    for i in $(seq 1 200); do
        grep -qx ready "$out" && return 0
        kill -0 "$HOLD_PID" 2>/dev/null || break
        sleep 0.05
    done
    fail "could not hold $*: $(cat "$out")"
}

release_queues() {
    if [ -n "${HOLD_PID:-}" ]; then
        kill "$HOLD_PID" 2>/dev/null || true
        wait "$HOLD_PID" 2>/dev/null || true
        HOLD_PID=
    fi
}


setup() {
    test_init
    HOLD_PID=
    CLEANUP=()
}

teardown() {
    release_queues
    local c
    for c in "${CLEANUP[@]}"; do
        eval "$c" >/dev/null 2>&1 || true
    done
    test_cleanup
}

# --- create ---------------------------------------------------------------

@test "create prints 'created NAME: N slots' and makes durable, non-exclusive, empty slot queues 1..N" {
    run -0 --separate-stderr al create "$n" 3
    assert_output "created $n: 3 slots"
    [ -z "$stderr" ]
    # Slots 1..3 only: no admin mutex left behind, no probe message.
    run sem_queues "$n"
    assert_output "$(slot_lines amqplock. "$n" 1 3)"
}

@test "create --json reports ok, semaphore, max and previous" {
    run -0 --separate-stderr al --json create "$n" 4
    assert_json '.ok == true and .semaphore == $n and .max == 4 and .previous == 0' --arg n "$n"
    [ -z "$stderr" ]
}

@test "create of an existing semaphore exits 73 (exists) and changes nothing" {
    al create "$n" 2
    run -73 --separate-stderr al create "$n" 7
    refute_output
    assert_error_line
    run -73 --separate-stderr al create --json "$n" 7
    assert_json '.ok == false and .error == "exists" and (.message | type == "string")'
    assert_error_line
    run -0 al max "$n"
    assert_output 2
}

# --- a create stopped halfway ------------------------------------------------

# create_killed N KIND NAME: create $n N in the background, killed (KILL)
# the moment the queue or exchange (KIND) NAME exists: a create stopped at
# a point the test names, not after a sleep (tests/tools/appear.pl).
create_killed() {
    kill_when "$2" "$3" create "$n" "$1"
    wait_exit "$BG" 10
    [ "$rc" -eq 137 ] || fail "create exited $rc, not killed: $(cat "$T/create.err")"
}

# kill_when KIND NAME ARGS...: `al ARGS` in the background (bg, tag
# create; pid in BG), started once appear.pl watches for the queue or
# exchange (KIND) NAME, and killed (KILL) the moment it exists.
kill_when() {
    local kind=$1 name=$2
    shift 2
    rm -f "$T/watched" "$T/watched.ready"
    timeout 60 perl "$H/appear.pl" "$AMQPLOCK_TEST_PORT" "$kind" "$name" "@$T/watched" 30 \
        >"$T/appear.out" 2>&1 3>&- &
    local appear=$! status=0
    ready() { [ -e "$T/watched.ready" ] || ! kill -0 "$appear" 2>/dev/null; }
    wait_until 30 ready && [ -e "$T/watched.ready" ] || fail "appear.pl not ready: $(cat "$T/appear.out")"
    bg create "$@"
    echo "$BG" >"$T/watched.tmp" && mv "$T/watched.tmp" "$T/watched"
    wait "$appear" || status=$?
    [ "$status" -eq 0 ] && [ "$(cat "$T/appear.out")" = killed ] ||
        fail "appear.pl exited $status: $(cat "$T/appear.out"); create: $(cat "$T/create.err")"
}

# watch_max: until $T/stop, what readers see of $n, one line each: max's
# max (or its error), and the max of a hold -n's "acquired" event (on
# stderr: stdout is the command's).
watch_max() {
    while [ ! -e "$T/stop" ]; do
        al --json max "$n" 2>/dev/null | jq -r 'if .ok then .max else .error end' >>"$T/seen"
        al --json hold -n "$n" -- true 2>&1 >/dev/null | grep '^{' |
            jq -r 'select(.event == "acquired") | "hold \(.max)"' >>"$T/seen"
    done
}

# seen_only WORD...: every line watch_max wrote is one of WORDs.
seen_only() {
    touch "$T/stop"
    wait_exit "$WATCH" 30
    local odd
    odd=$(sort -u "$T/seen" | grep -vxF -f <(printf '%s\n' "$@") || true)
    [ -z "$odd" ] || fail "readers saw: $(sort "$T/seen" | uniq -c | tr '\n' ' ')"
    note "readers: $(sort "$T/seen" | uniq -c | tr -s ' \n' ' ')"
}

@test "a create killed while making its slot queues: readers see its size; create N finishes it (exit 0), create M says what is there (73)" {
    watch_max 3>&- &
    WATCH=$!
    keep "$WATCH"
    # (1000 slots, killed once slot queue 20 exists: 980 more to make,
    # about 3 s of a loaded broker's work; with 400 and slot 50, a CI run
    # once saw the kill land after the broker had made them all)
    create_killed 1000 queue "amqplock.$n-20-A"
    seen_only 1000 "hold 1000" not_found
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.max == 1000 and (.missing | length) > 0 and (.missing | index(1)) != null'
    # hold's events go to stderr: stdout is the command's
    run -0 --separate-stderr al --json hold -n "$n" -- true
    [[ $stderr == '{"event":"acquired",'*'"max":1000}'* ]] || fail "$stderr"
    # another size: what is there, and what to do
    run -73 --separate-stderr al create "$n" 300
    assert_error_line
    [[ $stderr == "amqplock: semaphore $n already exists with 1000 slots, unfinished (a create stopped halfway, "*" slot queues not made): amqplock create $n 1000 finishes it, amqplock destroy $n removes it" ]] ||
        fail "$stderr"
    run -65 --separate-stderr al --json check "$n"
    assert_json '.max == 1000 and ([.problems[].kind] == ["unfinished"]) and .problems[0].count > 0
        and .problems[0].exchange == "amqplock.\($n)-1-A"' --arg n "$n"
    # the same size: what a user running it again expects; readers
    # meanwhile see 1000
    rm -f "$T/stop" "$T/seen"
    watch_max 3>&- &
    WATCH=$!
    keep "$WATCH"
    run -0 --separate-stderr al create "$n" 1000
    assert_output "created $n: 1000 slots"
    [[ $stderr == "amqplock: finished $n, a create stopped halfway: made its "*" missing slot queue(s) and recorded slot 1" ]] ||
        fail "$stderr"
    seen_only 1000 "hold 1000"
    run -0 --separate-stderr al check "$n"
    assert_output "checked $n: 1000 slots (classic), no problems"
}

@test "a create killed while writing its size record leaves nothing readers see; check reports it; any create makes the semaphore, destroy and check --repair take it off" {
    # (2000 slots, killed at the 99th record: 1900 more to write before
    # the first slot queue, which a kill under ASan beside two brokers'
    # suites once came too late for with 400)
    watch_max 3>&- &
    WATCH=$!
    keep "$WATCH"
    create_killed 2000 exchange "amqplock.$n-100-A"
    seen_only not_found
    run -66 --separate-stderr al status "$n"
    run -66 --separate-stderr al hold -n "$n" -- true
    run -66 --separate-stderr al add "$n"
    assert_output --partial ""
    [[ $stderr == *"a create stopped halfway left part of its size record: amqplock create $n N makes it, amqplock destroy $n removes the rest)" ]] ||
        fail "$stderr"
    run -65 --separate-stderr al --json check "$n"
    assert_json '.max == 0 and [.problems[].kind] == ["unfinished"] and .problems[0].count >= 100'
    # nothing was there to anyone: a create of another size makes it
    run -0 --separate-stderr al create "$n" 5
    assert_output "created $n: 5 slots"
    run -0 --separate-stderr al check "$n"
    assert_output "checked $n: 5 slots (classic), no problems"
    run -0 al destroy "$n"
    # destroy takes it off
    create_killed 2000 exchange "amqplock.$n-100-A"
    run -0 --separate-stderr al destroy "$n"
    run -66 --separate-stderr al check "$n"
    # and so does check --repair
    create_killed 2000 exchange "amqplock.$n-100-A"
    run -0 --separate-stderr al check --repair "$n"
    assert_line --index 1 "checked $n: 0 slots, 1 problem, 1 repaired"
    run -66 --separate-stderr al check "$n"
}

@test "check --repair finishes a create killed halfway, quorum slots as quorum; destroy removes one" {
    # (killed at the 20th slot: the slot queues the create has left to
    # make are the time appear.pl has to see the 20th on a busy machine.
    # With 60 classic slots the create once ended first, and with 150 once
    # in CI on 4.0; quorum queues are made slowly enough at 150)
    create_killed 1000 queue "amqplock.$n-20-A"
    run -0 --separate-stderr al --json check --repair "$n"
    assert_json '.ok and .max == 1000 and [.problems[] | [.kind, .repaired]] == [["unfinished", true]]'
    run -0 --separate-stderr al check "$n"
    assert_output "checked $n: 1000 slots (classic), no problems"
    al destroy "$n"
    kill_when queue "amqplock.$n-20-A" create --slot-type quorum "$n" 150
    run -0 --separate-stderr al check --repair "$n"
    run -0 --separate-stderr al check "$n"
    assert_output "checked $n: 150 slots (quorum), no problems"
    al destroy "$n"
    create_killed 1000 queue "amqplock.$n-20-A"
    run -0 --separate-stderr al --json destroy "$n"
    assert_json '.previous == 1000 and .max == 0'
    run -66 --separate-stderr al check "$n"
    [ -z "$(queues_like "amqplock.$n-")" ]
}

@test "create 1000 works and max answers 1000 quickly" {
    run -0 al create "$n" 1000
    assert_output "created $n: 1000 slots"
    local t0
    t0=$(now)
    run -0 al max "$n"
    assert_output 1000
    at_most "$(since "$t0")" 2
    run -0 al --json destroy "$n"
    assert_json '.ok and .previous == 1000 and .max == 0'
}

# --- destroy --------------------------------------------------------------

@test "destroy deletes every slot and prints 'destroyed NAME: had N slots'" {
    al create "$n" 3
    run -0 --separate-stderr al destroy "$n"
    assert_output "destroyed $n: had 3 slots"
    [ -z "$stderr" ]
    run sem_queues "$n"
    assert_output ""
}

@test "destroy --json reports max 0 and the previous max" {
    al create "$n" 5
    run -0 al destroy --json "$n"
    assert_json '.ok == true and .semaphore == $n and .max == 0 and .previous == 5' --arg n "$n"
    run -66 al max "$n"
}

# --- add ------------------------------------------------------------------

@test "add adds one slot by default and COUNT slots when given" {
    al create "$n" 2
    run -0 --separate-stderr al add "$n"
    assert_output "$n: 2 -> 3 slots"
    [ -z "$stderr" ]
    run -0 al add "$n" 5
    assert_output "$n: 3 -> 8 slots"
    run sem_queues "$n"
    assert_output "$(slot_lines amqplock. "$n" 1 8)"
}

@test "add --json reports max and previous" {
    al create "$n" 1
    run -0 al add --json "$n" 3
    assert_json '.ok == true and .semaphore == $n and .previous == 1 and .max == 4' --arg n "$n"
    run -0 al --json add "$n"
    assert_json '.ok == true and .previous == 4 and .max == 5'
}

# --- remove ---------------------------------------------------------------

@test "remove deletes the highest slot by default and the COUNT highest when given" {
    al create "$n" 6
    run -0 --separate-stderr al remove "$n"
    assert_output "$n: 6 -> 5 slots"
    [ -z "$stderr" ]
    run -0 al remove "$n" 3
    assert_output "$n: 5 -> 2 slots"
    run sem_queues "$n"
    assert_output "$(slot_lines amqplock. "$n" 1 2)"
}

@test "remove --json reports max and previous" {
    al create "$n" 4
    run -0 al remove --json "$n" 2
    assert_json '.ok == true and .semaphore == $n and .previous == 4 and .max == 2' --arg n "$n"
    run -0 al --json remove "$n"
    assert_json '.ok == true and .previous == 2 and .max == 1'
}

@test "remove of more than max leaves 0 slots: the semaphore is paused, its slot queues gone" {
    al create "$n" 3
    run -0 al remove "$n" 10
    assert_output "$n: 3 -> 0 slots"
    run -0 al max "$n"
    assert_output 0
    run sem_queues "$n"
    assert_output ""
}

# --- max ------------------------------------------------------------------

@test "max NAME prints only the number of slots" {
    al create "$n" 4
    run -0 --separate-stderr al max "$n"
    assert_output 4
    [ -z "$stderr" ]
}

@test "max NAME --json reports max" {
    al create "$n" 4
    run -0 al --json max "$n"
    assert_json '.ok == true and .semaphore == $n and .max == 4' --arg n "$n"
}

@test "max NAME N sets exactly N slots, up and down" {
    al create "$n" 2
    run -0 al max "$n" 6
    assert_output "$n: 2 -> 6 slots"
    run -0 al max "$n" 6
    assert_output "$n: 6 -> 6 slots"
    run -0 al max "$n" 3
    assert_output "$n: 6 -> 3 slots"
    run sem_queues "$n"
    assert_output "$(slot_lines amqplock. "$n" 1 3)"
}

@test "max NAME N --json reports max and previous" {
    al create "$n" 2
    run -0 al --json max "$n" 5
    assert_json '.ok == true and .semaphore == $n and .previous == 2 and .max == 5' --arg n "$n"
    run -0 al max "$n" 1 --json
    assert_json '.ok == true and .previous == 5 and .max == 1'
}

@test "max NAME 0 pauses: every slot goes, the semaphore stays with max 0 until destroy" {
    al create "$n" 3
    run -0 al max "$n" 0
    assert_output "$n: 3 -> 0 slots"
    run -0 al max "$n"
    assert_output 0
    run -0 --separate-stderr al status "$n"
    assert_output "$(printf '%s\n' "semaphore  $n" "max        0 (paused: amqplock max $n N resumes it)" \
        "held       0" "free       0" "waiting    0" "orphans    0")"
    [ -z "$stderr" ]
    run sem_queues "$n"
    assert_output ""
    run -0 al max "$n" 0
    assert_output "$n: 0 -> 0 slots"
    run -0 al destroy "$n"
    assert_output "destroyed $n: had 0 slots"
    run -66 al status "$n"
    run -66 al max "$n"
    [ -z "$(rmqctl -q list_exchanges name | grep -F "amqplock.$n" || true)" ]
}

@test "status --json of a paused semaphore: max 0, paused true, empty lists" {
    al create "$n" 2
    run -0 al --json status --no-names "$n"
    assert_json '.paused == false'
    al max "$n" 0
    run -0 al --json status --no-names "$n"
    assert_json '.ok == true and .semaphore == $n and .max == 0 and .paused == true
        and .held == [] and .free == [] and .orphans == [] and .missing == []
        and .held_count == 0 and .free_count == 0' --arg n "$n"
    run -0 al --json max "$n"
    assert_json '.max == 0 and .paused == true'
}

@test "hold -n and acquire -n on a paused semaphore exit 1 (busy), saying it is paused and how to resume it" {
    al create "$n" 1
    al remove "$n"
    run -1 --separate-stderr al hold -n "$n" -- true
    assert_error_line
    [ "$stderr" = "amqplock: semaphore $n is paused (max 0): amqplock max $n N resumes it" ] ||
        fail "$stderr"
    run -1 --separate-stderr al acquire -n "$n"
    [ "$stderr" = "amqplock: semaphore $n is paused (max 0): amqplock max $n N resumes it" ] ||
        fail "$stderr"
    run -1 --separate-stderr al hold -w 1 "$n" -- true
    [[ "$stderr" == *"timed out after 1 s waiting: semaphore $n is paused (max 0)"* ]] || fail "$stderr"
}

@test "create of a paused semaphore exits 73 (exists); add and max N resume it" {
    al create "$n" 2
    al max "$n" 0
    run -73 --separate-stderr al create "$n" 4
    assert_error_line
    [[ "$stderr" == *"paused"* ]] || fail "$stderr"
    run -0 al max "$n"
    assert_output 0
    run -0 al add "$n" 2
    assert_output "$n: 0 -> 2 slots"
    run sem_queues "$n"
    assert_output "$(slot_lines amqplock. "$n" 1 2)"
    run -0 al --json status --no-names "$n"
    assert_json '.max == 2 and .paused == false and .free == [1, 2]'
    al max "$n" 0
    run -0 al max "$n" 3
    assert_output "$n: 0 -> 3 slots"
    run -0 al hold -n "$n" -- true
}

@test "a waiting hold -w 60 on a paused semaphore runs once max NAME 1 resumes it" {
    al create "$n" 1
    al max "$n" 0
    bg h hold -w 60 "$n" -- sh -c "echo ran >$T/ran"
    local h=$BG
    wait_until 10 connected "$h"
    sleep 1.5
    running "$h" || fail "the hold did not wait: $(cat "$T/h.err")"
    [ ! -e "$T/ran" ]
    local t0
    t0=$(now)
    run -0 al max "$n" 1
    wait_exit "$h" 20
    [ "$rc" -eq 0 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    [ "$(cat "$T/ran")" = ran ]
    note "resumed waiter ran $(since "$t0") s after max $n 1"
}

@test "a waiting hold on a paused semaphore exits 66 once it is destroyed" {
    al create "$n" 1
    al max "$n" 0
    bg h hold -w 60 "$n" -- true
    local h=$BG
    wait_until 10 connected "$h"
    # it waits in line, and status counts it
    one_waits() { [ "$(al --json status --no-names "$n" | jq .waiting)" = 1 ]; }
    wait_until 10 one_waits || fail "status: $(al status "$n")"
    al destroy "$n"
    wait_exit "$h" 20
    [ "$rc" -eq 66 ] || fail "hold exited $rc: $(cat "$T/h.err")"
}

@test "remove down to 0 under a running holder: the holder is ended (75), status says max 0 and paused" {
    al create "$n" 1
    victim_hold hold "$n"
    local h=$BG
    run -0 --separate-stderr al remove "$n"
    assert_output "$n: 1 -> 0 slots"
    [[ $stderr == "amqplock: 1 running holder of $n will lose its slot unless "* ]] || fail "stderr: '$stderr'"
    wait_exit "$h" 10
    [ "$rc" -eq 75 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    run -0 al --json status --no-names "$n"
    assert_json '.max == 0 and .paused == true and .orphans == []'
    run -0 al wait "$n"
}

@test "wait on a paused semaphore waits for every holder (all are above max 0), then exits 0" {
    al create "$n" 2
    # a holder that never notices its slot went (an orphan that stays)
    hold_queues "amqplock.$n-2-B"
    al max "$n" 0
    run -0 al --json status --no-names "$n"
    assert_json '.max == 0 and .paused == true and .orphans == [2]'
    run -1 --separate-stderr al wait -w 1 "$n"
    assert_error_line
    release_queues
    run -0 al wait -w 20 "$n"
}

@test "a holder of slot 1 that max 0 removed and a holder after max 1 are never inside at once" {
    al create "$n" 1
    # A's command says it is inside while it is; a TERM ends it
    bg a hold -w 10 "$n" -- sh -c "trap 'rm -f $T/a; exit 143' TERM; touch $T/a; sleep 4 & wait; rm -f $T/a"
    local a=$BG
    wait_until 10 test -e "$T/a" || fail "A did not start: $(cat "$T/a.err")"
    # paused and resumed at once: A may not have noticed yet
    al max "$n" 0
    al max "$n" 1
    bg b hold -w 30 "$n" -- sh -c "if [ -e $T/a ]; then echo both; else echo alone; fi >$T/b"
    local b=$BG
    wait_exit "$a" 20
    note "A exited $rc"
    [ "$rc" -eq 0 ] || [ "$rc" -eq 75 ] || fail "A exited $rc: $(cat "$T/a.err")"
    wait_exit "$b" 20
    [ "$rc" -eq 0 ] || fail "B exited $rc: $(cat "$T/b.err")"
    [ "$(cat "$T/b")" = alone ] || fail "B ran while A was inside"
}

@test "claims racing pauses and resumes: 6 hold -w loops on one slot, max 0 and 1 in turn, never two inside" {
    al create "$n" 1
    local d i
    d=$(critical_dir 1)
    client_loops "$d" 6 0 timeout 90 "$AMQPLOCK_BIN" hold -w 60 "$n" -- perl "$H/crit.pl" "$d"
    wait_until 20 turns_at_least "$d" 5 || fail "no turns: $(tail -3 "$d/err")"
    for i in $(seq 1 8); do
        al max "$n" 0 >/dev/null
        sleep 0.$((RANDOM % 5))
        al max "$n" 1 >/dev/null
        sleep 0.$((RANDOM % 5))
    done
    touch "$d/stop"
    finish_contention 120
    check_contention "$d" 20 1
    note "hold exits: $(exit_counts "$d")"
    [ -z "$(grep -vxE '0|75' "$d/rc" || true)" ] || fail "holds failed: $(exit_counts "$d"); $(tail -5 "$d/err")"
}

@test "create makes no pause marker: a paused and resumed semaphore is one as older amqplocks made it" {
    al create "$n" 2
    [ -z "$(rmqctl -q list_exchanges name | grep -Fx "amqplock.$n-0-A" || true)" ]
    al max "$n" 0
    [ -n "$(rmqctl -q list_exchanges name | grep -Fx "amqplock.$n-0-A" || true)" ]
    al max "$n" 2
    [ -z "$(rmqctl -q list_exchanges name | grep -Fx "amqplock.$n-0-A" || true)" ]
    run -0 al hold -n "$n" -- true
}

# --- status ---------------------------------------------------------------

@test "status prints semaphore, max, held, free and orphans, each list with its count first" {
    al create "$n" 3
    run -0 --separate-stderr al status "$n"
    assert_output "$(printf '%s\n' "semaphore  $n" "max        3" "held       0 of 3" \
        "free       3 of 3: 1 2 3" "waiting    0" "orphans    0")"
    [ -z "$stderr" ]
    # the counts, for awk
    [ "$(al status "$n" | awk '$1 == "free" { print $2 }')" = 3 ]
}

@test "status --json reports max and arrays of held, holders, away, unreachable, free, orphan, draining and missing slots" {
    al create "$n" 3
    run -0 al --json status --no-names "$n"
    assert_json '.ok == true and .semaphore == $n and .max == 3 and .held == []
        and .away == [] and .unreachable == [] and .free == [1, 2, 3] and .orphans == []
        and .draining == [] and .missing == [] and .held_count == 0 and .free_count == 3
        and .holders == [] and .waiting == 0' --arg n "$n"
    # one key order
    run -0 al --json status --no-names "$n"
    [ "$(jq -c keys_unsorted <<<"$output")" = '["ok","semaphore","max","paused","held","held_count","holders","away","unreachable","free","free_count","waiting","orphans","draining","missing"]' ]
}

@test "status shows held slots and orphan holders above max" {
    al create "$n" 3
    hold_queues "amqplock.$n-2-B" "amqplock.$n-5-B"
    run -0 al status "$n"
    assert_output "$(printf '%s\n' "semaphore  $n" "max        3" "held       1 of 3: 2" \
        "slot 2: held, its holder unnamed (away, or no answer)" \
        "free       2 of 3: 1 3" "waiting    0" "orphans    1: 5")"
    run -0 al status --json "$n"
    assert_json '.max == 3 and .held == [2] and .free == [1, 3] and .orphans == [5]
        and .held_count == 1 and .free_count == 2'
    release_queues
}

@test "status --overshoot N looks N slots past max for orphans" {
    al create "$n" 3
    hold_queues "amqplock.$n-5-B"
    run -0 al --json status --overshoot 1 "$n"
    assert_json '.max == 3 and .orphans == []'
    run -0 al --json status --overshoot 2 "$n"
    assert_json '.max == 3 and .orphans == [5]'
}

@test "no probe message is left in any slot queue" {
    al create "$n" 20
    al status "$n" >/dev/null
    al max "$n" >/dev/null
    al add "$n" 2 >/dev/null
    al remove "$n" >/dev/null
    al max "$n" 25 >/dev/null
    run sem_queues "$n"
    assert_output "$(slot_lines amqplock. "$n" 1 25)"
}

# --- a semaphore that does not exist ---------------------------------------

@test "destroy, add, remove, max, max N and status on a missing semaphore exit 66 and create nothing" {
    local args
    for args in destroy add "add 2" remove "remove 2" max "max 3" status; do
        set -- $args
        run -66 --separate-stderr al "$1" "$n" "${@:2}"
        refute_output
        assert_error_line
        run -66 --separate-stderr al --json "$1" "$n" "${@:2}"
        assert_json '.ok == false and .error == "not_found" and (.message | type == "string")'
        assert_error_line
    done
    run sem_queues "$n"
    assert_output ""
}

# --- limits -----------------------------------------------------------------

@test "more than 10000 slots in total is a usage error (exit 64) that changes nothing" {
    run -64 --separate-stderr al create "$n" 10001
    assert_error_line
    al create "$n" 1
    run -64 --separate-stderr al add "$n" 10000
    refute_output
    assert_error_line
    run -64 --separate-stderr al --json max "$n" 10001
    assert_json '.ok == false and .error == "usage"'
    run sem_queues "$n"
    assert_output "$(slot_lines amqplock. "$n" 1 1)"
}

# --- the admin mutex --------------------------------------------------------

@test "20 concurrent adds wait for the admin mutex and leave exactly slots 1..21" {
    al create "$n" 1
    local i pids=()
    for i in $(seq 1 20); do
        al add "$n" 1 >"$BATS_TEST_TMPDIR/add.$i" 2>&1 3>&- &
        pids+=($!)
    done
    local failed=0
    for i in "${pids[@]}"; do
        wait "$i" || failed=$((failed + 1))
    done
    [ "$failed" -eq 0 ] || fail "$failed adds failed: $(cat "$BATS_TEST_TMPDIR"/add.*)"
    # Each add saw a different state: together they went 1 -> 21 step by step.
    run sort "$BATS_TEST_TMPDIR"/add.{1..20}
    assert_output "$(for i in $(seq 1 20); do echo "$n: $i -> $((i + 1)) slots"; done | sort)"
    run sem_queues "$n"
    assert_output "$(slot_lines amqplock. "$n" 1 21)"
}

@test "a held admin mutex makes every admin command fail busy (exit 1) with --admin-wait 0" {
    al create "$n" 3
    local m
    m=$(unique_name new)
    hold_queues "amqplock.$n" "amqplock.$m"
    local args
    for args in "add $n" "remove $n" "max $n 5" "destroy $n" "create $m 2"; do
        set -- $args
        run -1 --separate-stderr al "$1" --admin-wait 0 "${@:2}"
        refute_output
        assert_error_line
    done
    run -1 --separate-stderr al add --json --admin-wait 0 "$n"
    assert_json '.ok == false and .error == "busy" and (.message | type == "string")'
    assert_error_line
    release_queues
    run -0 al max "$n"
    assert_output 3
    run -66 al max "$m"
}

@test "an admin command waits for the admin mutex within --admin-wait" {
    al create "$n" 2
    hold_queues "amqplock.$n"
    (
        sleep 1
        kill "$HOLD_PID"
    ) 3>&- &
    local t0
    t0=$(now)
    run -0 al add --admin-wait 10 "$n"
    assert_output "$n: 2 -> 3 slots"
    at_least "$(since "$t0")" 0.8
}

@test "--admin-wait 1 keeps trying for the whole second before failing busy" {
    al create "$n" 2
    hold_queues "amqplock.$n"
    local t0 took
    t0=$(now)
    run -1 --separate-stderr al add --admin-wait 1 "$n"
    took=$(since "$t0")
    assert_error_line
    at_least "$took" 0.95
    at_most "$took" 4
}

# --- a semaphore with a hole ---------------------------------------------------

# shared_slot QUEUE...: declares each QUEUE durable and shared (a slot
# queue left above max by an interrupted remove, or a foreign client).
shared_slot() {
    timeout 20 perl "$TOP/tests/tools/holdq.pl" "$AMQPLOCK_TEST_PORT" --shared "$@" --exit \
        >"$BATS_TEST_TMPDIR/shared.out" 2>&1 3>&- || fail "holdq.pl: $(cat "$BATS_TEST_TMPDIR/shared.out")"
}

@test "a slot queue deleted behind the semaphore's back is a hole: the next admin command makes it again" {
    al create "$n" 5
    rmqctl -q delete_queue "amqplock.$n-3-A" >/dev/null
    run -0 --separate-stderr al --json add "$n"
    assert_json '.ok == true and .previous == 5 and .max == 6 and .filled == 1'
    [ "$stderr" = "amqplock: warning: made 1 missing slot queue(s) of $n again (an expires policy on its queues? see amqplock check)" ] ||
        fail "$stderr"
    run sem_queues "$n"
    assert_output "$(slot_lines amqplock. "$n" 1 6)"
}

@test "a hole above the new max is not made again; the slots above it go" {
    al create "$n" 5
    rmqctl -q delete_queue "amqplock.$n-3-A" >/dev/null
    run -0 al --json max "$n" 2
    assert_json '.previous == 5 and .max == 2 and (.filled // 0) == 0 and (.swept // 0) == 0'
    run sem_queues "$n"
    assert_output "$(slot_lines amqplock. "$n" 1 2)"
}

@test "--overshoot 1 does not reach a stray past a gap above max; the default overshoot does" {
    al create "$n" 2
    shared_slot "amqplock.$n-4-A"
    run -0 al --json max --overshoot 1 "$n" 2
    assert_json '.previous == 2 and .max == 2 and (.swept // 0) == 0'
    run -0 al --json remove "$n"
    assert_json '.previous == 2 and .max == 1 and .swept == 1'
    run sem_queues "$n"
    assert_output "$(slot_lines amqplock. "$n" 1 1)"
}

@test "a stray slot queue above max that a holder holds is left alone: amqplock's repairs end no job" {
    al create "$n" 2
    shared_slot "amqplock.$n-4-A"
    hold_queues "amqplock.$n-4-B"
    run -0 --separate-stderr al --json max "$n" 2
    assert_json '.previous == 2 and .max == 2 and (.swept // 0) == 0'
    [ "$stderr" = "amqplock: warning: 1 stray slot queue(s) of $n above max left alone: a holder holds each (see amqplock status, orphans)" ] ||
        fail "$stderr"
    run sem_queues "$n"
    assert_output "$( (slot_lines amqplock. "$n" 1 2; slot_lines amqplock. "$n" 4 4;
        echo "amqplock.$n-4-B false true 0") | sort -V)"
    release_queues
    run -0 al --json max "$n" 2
    assert_json '.swept == 1'
    run sem_queues "$n"
    assert_output "$(slot_lines amqplock. "$n" 1 2)"
}

@test "destroy of a semaphore with a hole deletes every slot, and the size record" {
    al create "$n" 5
    rmqctl -q delete_queue "amqplock.$n-3-A" >/dev/null
    run -0 al --json destroy "$n"
    assert_json '.ok == true and .previous == 5 and .max == 0'
    run sem_queues "$n"
    assert_output ""
    [ -z "$(rmqctl -q list_exchanges name | grep -F "amqplock.$n-" || true)" ]
}

# --- prefixes -----------------------------------------------------------------

@test "--prefix, before or after the command, changes the queue names" {
    CLEANUP+=("al --prefix my.p- destroy '$n'")
    run -0 al --prefix my.p- create "$n" 2
    assert_output "created $n: 2 slots"
    run -66 al max "$n"
    run -0 al max "$n" --prefix my.p-
    assert_output 2
    run sem_queues "$n"
    assert_output "$(slot_lines my.p- "$n" 1 2)"
    run -0 al destroy --prefix my.p- "$n"
}

@test "AMQPLOCK_PREFIX changes the queue names and --prefix overrides it" {
    CLEANUP+=("AMQPLOCK_PREFIX=envp: al destroy '$n'" "al --prefix optp: destroy '$n'")
    AMQPLOCK_PREFIX=envp: run -0 al create "$n" 1
    AMQPLOCK_PREFIX=envp: run -0 al --prefix optp: create "$n" 2
    run -0 al --prefix envp: max "$n"
    assert_output 1
    run -0 al max --prefix optp: "$n"
    assert_output 2
    run -66 al max "$n"
    run sem_queues "$n"
    assert_output "$( (slot_lines envp: "$n" 1 1; slot_lines optp: "$n" 1 2) | sort -V)"
}

@test "--prefix '' names the queues after NAME alone" {
    CLEANUP+=("al --prefix '' destroy '$n'")
    run -0 al --prefix '' create "$n" 2
    run sem_queues "$n"
    assert_output "$(slot_lines '' "$n" 1 2)"
    run -0 al --prefix '' destroy "$n"
    assert_output "destroyed $n: had 2 slots"
}

# --- slot types -----------------------------------------------------------------

# "name type" of the slot queues of $1, in slot order.
slot_types() {
    rmqctl -q list_queues name type --no-table-headers 2>/dev/null |
        awk -v p="amqplock.$1-" 'index($1, p) == 1 && $1 ~ /-A$/ { print $1, $2 }' | sort -V
}

@test "--slot-type quorum: create, add and max N keep quorum slots; probes leave no message" {
    run -0 al create --slot-type quorum "$n" 2
    run -0 al add "$n"
    run -0 al max "$n" 4
    run slot_types "$n"
    assert_output "$(for i in 1 2 3 4; do echo "amqplock.$n-$i-A quorum"; done)"
    run -0 al hold "$n" -- true
    run -0 al --json status --no-names "$n"
    assert_json '.max == 4 and (.free | length) == 4'
    # durable, and no probe's message left behind
    output=$(rmqctl -q list_queues name durable messages --no-table-headers 2>/dev/null)
    [ "$(grep -c "^amqplock\.$n-[0-9]*-A[[:space:]]*true[[:space:]]*0\$" <<<"$output")" -eq 4 ]
}

@test "mixing slot types is refused (exit 64) and changes nothing; a bad type is a usage error" {
    al create "$n" 2
    run -64 --separate-stderr al add --slot-type quorum "$n"
    assert_error_line
    [[ $stderr == *"has classic slots"* ]]
    run -64 al max "$n" 5 --slot-type quorum
    run slot_types "$n"
    assert_output "$(printf '%s\n' "amqplock.$n-1-A classic" "amqplock.$n-2-A classic")"
    run -0 al add --slot-type classic "$n"
    run -64 --separate-stderr al create --slot-type fast "$n-x" 1
    [[ $stderr == *"expected classic or quorum"* ]]
    run -64 al remove --slot-type quorum "$n"
    run -0 al destroy "$n"
    al create --slot-type quorum "$n" 1
    run -64 --separate-stderr al add --slot-type classic "$n"
    [[ $stderr == *"has quorum slots"* ]]
}
