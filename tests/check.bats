#!/usr/bin/env bats
# amqplock check NAME [--repair], an fsck for one semaphore, and the repairs
# the administrative commands make on their way. Each test damages a
# semaphore as a foreign client or an interrupted administrator could
# (tests/tools/holdq.pl declares and deletes queues behind amqplock's
# back): a stray holder queue, a slot queue gone (an expires policy, a
# delete by hand: a hole, which the size record shows), stray slot queues
# above the record, a semaphore without a record (amqplock 0.2), slot queues
# of mixed types or exclusive to a connection, a leftover admin mutex. check
# must report it (text and JSON, exit 65), check --repair must fix what can
# be fixed, and real holders must never be touched.
#
# Needs jq, and perl (core modules only) for tests/tools/holdq.pl.

bats_require_minimum_version 1.5.0
load lib/helper

# damage [MODE] QUEUE... (holdq.pl's modes): declares or deletes queues on a
# connection of its own, which then closes.
damage() {
    timeout 20 perl "$H/holdq.pl" "$AMQPLOCK_TEST_PORT" "$@" --exit >"$T/damage.out" 2>&1 \
        </dev/null 3>&- || fail "holdq.pl $*: $(cat "$T/damage.out")"
}

# hold_queues QUEUE...: declares each QUEUE exclusive on a connection of a
# perl client that keeps it (another holder, or another administrator)
# until teardown; its pid in HOLD_PID.
hold_queues() {
    local out=$T/hold.$RANDOM
    perl "$H/holdq.pl" "$AMQPLOCK_TEST_PORT" "$@" >"$out" 2>&1 </dev/null 3>&- &
    HOLD_PID=$!
    keep "$HOLD_PID"
    wait_until 10 has_line "$out" ready || fail "could not hold $*: $(cat "$out")"
}

# "name durable exclusive" of every queue of semaphore $n (the mutex, slot
# and holder queues), sorted. One rabbitmqctl call.
sem_queues() {
    queues_like "amqplock.$n" | awk -v n="amqplock.$n" '{
            rest = substr($1, length(n) + 1)
            if (rest == "" || substr(rest, 1, 1) == "-") print
        }'
}

# slot_lines FROM TO: what sem_queues prints for the slot queues FROM..TO.
slot_lines() {
    local i
    for ((i = $1; i <= $2; i++)); do
        echo "amqplock.$n-$i-A true false"
    done
}

# assert_keys PATH KEYS: the keys of the object at jq PATH in stdout (one
# JSON object, as assert_json checks), in order, are the words KEYS.
assert_keys() {
    local got
    got=$(jq -r "$1 | keys_unsorted | join(\" \")" <<<"$output") ||
        fail "no object at $1 in '$output'"
    [ "$got" = "$2" ] || fail "the keys of $1 are '$got', not '$2'"
}

setup() {
    test_init
    CLEANUP_NAMES=()
}

teardown() {
    test_cleanup ${CLEANUP_NAMES[@]+"${CLEANUP_NAMES[@]}"}
    # what a failed test may have left
    local i qs=("amqplock.$n")
    for i in $(seq 1 8); do qs+=("amqplock.$n-$i-A" "amqplock.$n-$i-B"); done
    timeout 20 perl "$H/holdq.pl" "$AMQPLOCK_TEST_PORT" --delete "${qs[@]}" --exit \
        >/dev/null 2>&1 </dev/null 3>&- || true
}

# --- a semaphore in good order ---------------------------------------------------

@test "a healthy semaphore checks clean (exit 0) in text and JSON, with and without --repair" {
    al create "$n" 3
    run -0 --separate-stderr al check "$n"
    assert_output "checked $n: 3 slots (classic), no problems"
    [ -z "$stderr" ]
    run -0 --separate-stderr al --json check "$n"
    assert_json '. == {"ok":true,"semaphore":$n,"max":3,"paused":false,"slot_type":"classic",
        "problems":[],"repaired":0,"orphans":[]}' --arg n "$n"
    # the keys in the order of the other administrative commands
    assert_keys . "ok semaphore max paused slot_type problems repaired orphans"
    run -0 --separate-stderr al check --repair "$n"
    assert_output "checked $n: 3 slots (classic), no problems"
    run -0 --separate-stderr al -q check "$n"
    assert_output ""
    # nothing changed, no admin mutex left behind
    run sem_queues
    assert_output "$(slot_lines 1 3)"
}

@test "quorum slots check clean; the slot type is reported" {
    al create --slot-type quorum "$n" 2
    run -0 --separate-stderr al --json check "$n"
    assert_json '.ok and .max == 2 and .slot_type == "quorum" and .problems == []'
}

@test "a paused semaphore (max 0) checks clean, with and without --repair; a quorum one keeps its type" {
    al create "$n" 2
    al max "$n" 0
    run -0 --separate-stderr al check "$n"
    assert_output "checked $n: 0 slots (classic), paused, no problems"
    [ -z "$stderr" ]
    run -0 --separate-stderr al --json check --repair "$n"
    assert_json '.ok and .max == 0 and .paused and .slot_type == "classic" and .problems == []'
    local q=$n-q
    al create --slot-type quorum "$q" 1
    CLEANUP_NAMES=("$q")
    al max "$q" 0
    run -0 --separate-stderr al --json check --repair "$q"
    assert_json '.ok and .max == 0 and .paused and .slot_type == "quorum" and .problems == []'
    # the quorum marker stayed: resumed, the slots are quorum queues again
    al max "$q" 2
    [ "$(queue_type "amqplock.$q-2-A")" = quorum ]
    run -0 al --json check "$q"
    assert_json '.ok and .max == 2 and .paused == false and .slot_type == "quorum"'
}

@test "a pause marker beside slot queues (a resume stopped halfway, an older amqplock's create): reported, deleted by --repair" {
    al create "$n" 1
    al max "$n" 0
    # slot 1 made again behind amqplock's back, as an older create would
    damage --shared "amqplock.$n-1-A"
    run -65 --separate-stderr al --json check "$n"
    assert_json '.max == 1 and .paused == false
        and (.problems | map(.kind) | sort) == ["stray_pause", "unrecorded"]'
    run -0 --separate-stderr al check --repair "$n"
    [ -z "$(rmqctl -q list_exchanges name | grep -Fx "amqplock.$n-0-A" || true)" ]
    run -0 --separate-stderr al check "$n"
    assert_output "checked $n: 1 slot (classic), no problems"
    run -0 al hold -n "$n" -- true
}

@test "check of a missing semaphore exits 66 and creates nothing" {
    run -66 --separate-stderr al check "$n"
    refute_output
    assert_error_line
    run -66 --separate-stderr al --json check --repair "$n"
    assert_json '.ok == false and .error == "not_found" and .semaphore == $n' --arg n "$n"
    assert_error_line
    run sem_queues
    assert_output ""
}

# --- stray holder queues -----------------------------------------------------------

@test "the issue's stray holder queue: check exits 65, check --repair deletes it, slot 1 is free again" {
    al create "$n" 2
    damage --shared "amqplock.$n-1-B"
    # the damage: slot 1 reads as held, and nobody can ever take it
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.held == [1] and .free == [2]'
    run -0 --separate-stderr al hold -n "$n" -- printenv AMQPLOCK_SLOT
    assert_output 2

    run -65 --separate-stderr al check "$n"
    assert_output "$(printf '%s\n' \
        "$n: slot 1: stray holder queue amqplock.$n-1-B, held by no connection: not repaired" \
        "checked $n: 2 slots (classic), 1 problem")"
    assert_error_line
    [[ $stderr == *"$n is damaged"* ]] || fail "stderr: $stderr"
    run -65 --separate-stderr al --json check "$n"
    assert_json 'del(.message) == {"ok":false,"semaphore":$n,"max":2,"paused":false,"slot_type":"classic",
            "problems":[{"kind":"stray_holder","slot":1,"queue":$q,"repaired":false}],
            "repaired":0,"orphans":[],"error":"damaged"}
        and (.message | startswith($n + " is damaged"))' --arg n "$n" --arg q "amqplock.$n-1-B"
    assert_keys . "ok semaphore max paused slot_type problems repaired orphans error message"
    assert_keys '.problems[0]' "kind slot queue repaired"
    # the message is also the error line
    [ "$stderr" = "amqplock: $(jq -r .message <<<"$output")" ] || fail "stderr: $stderr"
    # check alone changes nothing
    run sem_queues
    assert_output "$( (slot_lines 1 2; echo "amqplock.$n-1-B true false") | sort -V)"

    run -0 --separate-stderr al check --repair "$n"
    assert_output "$(printf '%s\n' \
        "$n: slot 1: stray holder queue amqplock.$n-1-B, held by no connection: deleted" \
        "checked $n: 2 slots (classic), 1 problem, 1 repaired")"
    [ -z "$stderr" ]
    run sem_queues
    assert_output "$(slot_lines 1 2)"
    run -0 --separate-stderr al check "$n"
    run -0 --separate-stderr al hold -n "$n" -- printenv AMQPLOCK_SLOT
    assert_output 1
}

@test "check --repair --json: one object with the list of problems" {
    al create "$n" 2
    damage --shared "amqplock.$n-2-B"
    run -0 --separate-stderr al --json check --repair "$n"
    assert_json '. == {"ok":true,"semaphore":$n,"max":2,"paused":false,"slot_type":"classic",
        "problems":[{"kind":"stray_holder","slot":2,"queue":$q,"repaired":true}],
        "repaired":1,"orphans":[]}' --arg n "$n" --arg q "amqplock.$n-2-B"
    assert_keys . "ok semaphore max paused slot_type problems repaired orphans"
    assert_keys '.problems[0]' "kind slot queue repaired"
    [ -z "$stderr" ]
}

@test "check --repair --json: what is left unrepaired makes ok false, with error and message" {
    al create "$n" 3
    damage --delete "amqplock.$n-2-A" --quorum "amqplock.$n-2-A" \
        --shared "amqplock.$n" "amqplock.$n-1-B"
    run -65 --separate-stderr al --json check --repair --admin-wait 0 "$n"
    assert_json '. == {"ok":false,"semaphore":$n,"max":3,"paused":false,"slot_type":"classic","problems":[
            {"kind":"stray_mutex","queue":$m,"repaired":true},
            {"kind":"mixed_type","slot":2,"queue":$s,"type":"quorum","repaired":false},
            {"kind":"stray_holder","slot":1,"queue":$h,"repaired":true}],
        "repaired":2,"orphans":[],"error":"damaged",
        "message":($n + " is damaged: 1 of 3 problems not repaired")}' \
        --arg n "$n" --arg m "amqplock.$n" --arg s "amqplock.$n-2-A" --arg h "amqplock.$n-1-B"
    assert_keys . "ok semaphore max paused slot_type problems repaired orphans error message"
    assert_keys '.problems[0]' "kind queue repaired"
    assert_keys '.problems[1]' "kind slot queue type repaired"
    assert_keys '.problems[2]' "kind slot queue repaired"
    [ "$stderr" = "amqplock: $n is damaged: 1 of 3 problems not repaired" ] || fail "stderr: $stderr"
}

@test "a stray holder queue above max is found within --overshoot" {
    al create "$n" 2
    damage --shared "amqplock.$n-4-B"
    run -0 --separate-stderr al --json check --overshoot 1 "$n"
    assert_json '.ok and .problems == []'
    run -65 --separate-stderr al --json check "$n"
    assert_json '(.problems | map([.kind, .slot])) == [["stray_holder", 4]]'
    run -0 --separate-stderr al --json check --repair --overshoot 2 "$n"
    assert_json '.ok and .repaired == 1 and (.problems | map([.slot, .repaired])) == [[4, true]]'
    run sem_queues
    assert_output "$(slot_lines 1 2)"
}

@test "a stray holder queue without a semaphore: exit 65, not 66; repaired, then exit 66" {
    damage --shared "amqplock.$n-1-B"
    run -65 --separate-stderr al --json check "$n"
    assert_json '(.problems | map([.kind, .slot])) == [["stray_holder", 1]]
        and .max == 0 and .error == "damaged" and (has("slot_type") | not)'
    run -0 --separate-stderr al check --repair "$n"
    assert_output "$(printf '%s\n' \
        "$n: slot 1: stray holder queue amqplock.$n-1-B, held by no connection: deleted" \
        "checked $n: 0 slots, 1 problem, 1 repaired")"
    run -66 --separate-stderr al check "$n"
    run sem_queues
    assert_output ""
}

# --- stray slot queues ---------------------------------------------------------------

@test "a slot queue deleted below max is a hole: reported, made again by --repair; the slots above it stay" {
    al create "$n" 5
    damage --delete "amqplock.$n-3-A"
    run -65 --separate-stderr al check "$n"
    assert_output "$(printf '%s\n' \
        "$n: slot 3: slot queue amqplock.$n-3-A is gone (an expires policy, or deleted by hand?): not repaired" \
        "checked $n: 5 slots (classic), 1 problem")"
    run -65 --separate-stderr al --json check "$n"
    assert_json '(.problems | map([.kind, .slot])) == [["missing_slot", 3]]
        and .problems[0].queue == $q and .max == 5 and .repaired == 0' --arg q "amqplock.$n-3-A"
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.max == 5 and .missing == [3] and .free == [1,2,4,5]'
    run -0 --separate-stderr al --json check --repair "$n"
    assert_json '.ok and .repaired == 1 and (.problems | map(.repaired)) == [true]'
    run sem_queues
    assert_output "$(slot_lines 1 5)"
    run -0 --separate-stderr al check "$n"
}

# hole_below_top K: a 10-slot semaphore with slot K's queue gone and every
# other slot but 10 held: hold -n takes slot 10.
hole_below_top() {
    local sem=$n-$1 k qs=()
    al create "$sem" 10
    damage --delete "amqplock.$sem-$1-A"
    for k in 1 2 3 4 5 6 7 8 9; do [ "$k" = "$1" ] || qs+=("amqplock.$sem-$k-B"); done
    hold_queues "${qs[@]}"
    run -0 --separate-stderr al hold -n "$sem" -- sh -c 'echo "$AMQPLOCK_SLOT"'
    assert_output 10
}

@test "a hole among the first slots sends a hold to the record: with slot 3, or slot 4, of 10 gone and the others but 10 held, it takes slot 10" {
    hole_below_top 3
    hole_below_top 4
}

@test "stray slot queues above the record, past a gap: reported, and deleted by --repair, highest first" {
    al create "$n" 2
    damage --shared "amqplock.$n-4-A" "amqplock.$n-5-A"
    run -65 --separate-stderr al check "$n"
    assert_output "$(printf '%s\n' \
        "$n: slot 4: stray slot queue amqplock.$n-4-A above max 2: not repaired" \
        "$n: slot 5: stray slot queue amqplock.$n-5-A above max 2: not repaired" \
        "checked $n: 2 slots (classic), 2 problems")"
    run -0 --separate-stderr al -v --json check --repair "$n"
    assert_json '.ok and .repaired == 2 and (.problems | map(.repaired)) == [true, true]'
    # highest first, as every delete
    [[ $stderr == *"stray slot queue 5"*"stray slot queue 4"* ]] || fail "order: $stderr"
    run sem_queues
    assert_output "$(slot_lines 1 2)"
    run -0 --separate-stderr al check "$n"
}

@test "slot queues right above the record (added by an amqplock older than it) are slots: recorded, never swept" {
    al create "$n" 2
    damage --shared "amqplock.$n-3-A" "amqplock.$n-4-A"
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.max == 4 and .free == [1,2,3,4]'
    run -65 --separate-stderr al --json check "$n"
    assert_json '(.problems | map(.kind)) == ["unrecorded"] and .max == 4'
    run -0 --separate-stderr al --json add "$n"
    assert_json '.previous == 4 and .max == 5 and (.swept // 0) == 0'
    run -0 --separate-stderr al check "$n"
    assert_output "checked $n: 5 slots (classic), no problems"
}

@test "a semaphore without a size record (amqplock 0.2): reported; a hole is filled upward, not swept; --repair writes the record" {
    # slot queues alone, as amqplock 0.2 made them (no stream of fencing
    # tokens either); slot 2 gone
    damage --shared "amqplock.$n-1-A" "amqplock.$n-3-A"
    run -65 --separate-stderr al --json check "$n"
    assert_json '(.problems | map([.kind, .slot // 0])) == [["missing_slot", 2], ["unrecorded", 0], ["missing_tokens", 0]]
        and .max == 3'
    run -0 --separate-stderr al check --repair "$n"
    run sem_queues
    assert_output "$(slot_lines 1 3)"
    run -0 --separate-stderr al check "$n"
    assert_output "checked $n: 3 slots (classic), no problems"
    # the record keeps the size once the top slot queue goes
    damage --delete "amqplock.$n-3-A"
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.max == 3 and .missing == [3]'
}

@test "every slot queue gone: status and check still see the semaphore; hold says why and what to do (exit 65)" {
    al create "$n" 2
    damage --delete "amqplock.$n-1-A" "amqplock.$n-2-A"
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.max == 2 and .missing == [1,2] and .free == []'
    run -65 --separate-stderr al hold -n "$n" -- touch "$T/ran"
    assert_error_line
    [ "$stderr" = "amqplock: the slot queues of $n are gone, its 2 slots all missing (an expires policy? deleted by hand?): amqplock check --repair $n makes them again" ] ||
        fail "$stderr"
    [ ! -e "$T/ran" ]
    run -0 --separate-stderr al check --repair "$n"
    run -0 al hold -n "$n" -- touch "$T/ran"
    [ -e "$T/ran" ]
}

@test "create where every slot queue is gone (an older amqplock's destroy, an idle semaphore expired) makes it anew" {
    al create "$n" 2
    damage --delete "amqplock.$n-1-A" "amqplock.$n-2-A"
    run -0 --separate-stderr al create "$n" 3
    assert_output "created $n: 3 slots"
    run -0 --separate-stderr al check "$n"
    assert_output "checked $n: 3 slots (classic), no problems"
    # a semaphore with a slot queue left is not made anew
    damage --delete "amqplock.$n-1-A" "amqplock.$n-3-A"
    run -73 --separate-stderr al create "$n" 1
}

# --- what others do on the broker ---------------------------------------------------

# no_queue QUEUE: the broker has no queue of that name.
no_queue() { [ -z "$(queues_like "$1")" ]; }

# acquirers SLOT...: acquire in the background until each holds its slot,
# in order (each takes the lowest free); pids in ACQ[SLOT].
acquirers() {
    declare -gA ACQ
    local k
    for k in "$@"; do
        bg "a$k" acquire "$n"
        ACQ[$k]=$BG
        wait_until 10 has_line "$T/a$k.out" "$k" || fail "acquire $k: $(cat "$T/a$k.out" "$T/a$k.err")"
    done
}

@test "an expires policy takes an idle slot below a live holder: status, check, add and remove keep the holder; the size stays right" {
    al create "$n" 3
    acquirers 1 2 3
    kill -TERM "${ACQ[2]}"
    wait_exit "${ACQ[2]}" 10
    expire_policy 3000
    wait_until 20 no_queue "amqplock.$n-2-A" || fail "slot 2 never expired"
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.max == 3 and .missing == [2] and .held == [1,3] and .free == []'
    run -65 --separate-stderr al check "$n"
    assert_line "$n: slot 2: slot queue amqplock.$n-2-A is gone (an expires policy, or deleted by hand?): not repaired"
    run -0 --separate-stderr al add "$n"
    assert_output "$n: 3 -> 4 slots"
    [[ $stderr == *"made 1 missing slot queue(s) of $n again"* ]] || fail "$stderr"
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.max == 4 and .held == [1,3]'
    run -0 --separate-stderr al remove "$n"
    assert_output "$n: 4 -> 3 slots"
    running "${ACQ[1]}" || fail "the holder of slot 1 ended: $(cat "$T/a1.err")"
    running "${ACQ[3]}" || fail "the holder of slot 3 ended: $(cat "$T/a3.err")"
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.max == 3 and .held == [1,3]'
}

@test "an expires policy never takes a held quorum slot from its holder" {
    # (a classic slot queue is kept by the holder's passive declares, as
    # the holder of slot 1 in the tests above shows)
    al create --slot-type quorum "$n" 1
    expire_policy 3000
    # longer than two of the broker's expiry checks (every 5 s)
    run -0 --separate-stderr al hold "$n" -- sleep 11
    [ -z "$stderr" ] || fail "$stderr"
}

@test "an expires policy takes the idle top slots: the record keeps the size; add fills the holes" {
    al create "$n" 3
    acquirers 1
    expire_policy 3000
    wait_until 20 no_queue "amqplock.$n-3-A" || fail "slot 3 never expired"
    wait_until 10 no_queue "amqplock.$n-2-A" || fail "slot 2 never expired"
    run -0 --separate-stderr al --json status --no-names "$n"
    assert_json '.max == 3 and .missing == [2,3] and .held == [1]'
    clear_expire_policy
    run -0 --separate-stderr al add "$n"
    assert_output "$n: 3 -> 4 slots"
    run -0 --separate-stderr al check "$n"
    assert_output "checked $n: 4 slots (classic), no problems"
    running "${ACQ[1]}" || fail "the holder of slot 1 ended"
}

# --- slot queues of the wrong kind ------------------------------------------------------

@test "a quorum slot among classic ones is reported and cannot be repaired (exit 65)" {
    al create "$n" 3
    damage --delete "amqplock.$n-2-A" --quorum "amqplock.$n-2-A"
    local line="$n: slot 2: slot queue amqplock.$n-2-A is quorum, the others classic: cannot be repaired, recreate the semaphore"
    run -65 --separate-stderr al check "$n"
    assert_output "$(printf '%s\n' "$line" "checked $n: 3 slots (classic), 1 problem")"
    run -65 --separate-stderr al --json check --repair "$n"
    assert_json '.problems == [{"kind":"mixed_type","slot":2,"queue":$q,"type":"quorum",
        "repaired":false}] and .slot_type == "classic" and .error == "damaged" and .repaired == 0' \
        --arg q "amqplock.$n-2-A"
    assert_keys '.problems[0]' "kind slot queue type repaired"
    assert_error_line
    run -65 --separate-stderr al check --repair "$n"
    assert_output "$(printf '%s\n' "$line" "checked $n: 3 slots (classic), 1 problem, 0 repaired")"
}

@test "a classic slot among quorum ones is reported as classic" {
    al create --slot-type quorum "$n" 3
    damage --delete "amqplock.$n-1-A" --shared "amqplock.$n-1-A"
    run -65 --separate-stderr al check "$n"
    assert_line --index 0 "$n: slot 1: slot queue amqplock.$n-1-A is classic, the others quorum: cannot be repaired, recreate the semaphore"
    run -65 --separate-stderr al --json check "$n"
    assert_json '.slot_type == "quorum" and (.problems | map([.kind, .slot, .type]))
        == [["mixed_type", 1, "classic"]]'
}

@test "a slot queue exclusive to a connection is reported; it leaves a hole when that connection ends" {
    al create "$n" 3
    damage --delete "amqplock.$n-2-A"
    hold_queues "amqplock.$n-2-A"
    local line="$n: slot 2: slot queue amqplock.$n-2-A is exclusive to a connection: cannot be repaired, the connection that owns it must close"
    run -65 --separate-stderr al check "$n"
    assert_output "$(printf '%s\n' "$line" "checked $n: 3 slots (classic), 1 problem")"
    run -65 --separate-stderr al --json check --repair "$n"
    assert_json '.problems == [{"kind":"exclusive_slot","slot":2,"queue":$q,"repaired":false}]
        and .repaired == 0 and .error == "damaged"' --arg q "amqplock.$n-2-A"
    run sem_queues
    assert_output "$( (slot_lines 1 1; echo "amqplock.$n-2-A false true"; slot_lines 3 3) | sort -V)"
    # the owner leaves: slot 2 is a hole, which the record shows
    kill "$HOLD_PID"
    wait_until 5 ended "$HOLD_PID"
    sleep 0.2
    run -65 --separate-stderr al --json check "$n"
    assert_json '(.problems | map([.kind, .slot])) == [["missing_slot", 2]] and .max == 3'
    run -0 --separate-stderr al check --repair "$n"
    run sem_queues
    assert_output "$(slot_lines 1 3)"
}

# --- the admin mutex ---------------------------------------------------------------------

@test "a leftover admin mutex (a shared queue): check reports it, check --repair deletes it" {
    al create "$n" 2
    damage --shared "amqplock.$n"
    local line="$n: admin mutex amqplock.$n is a leftover shared queue: "
    run -65 --separate-stderr al check --admin-wait 0 "$n"
    assert_output "$(printf '%s\n' "${line}not repaired" "checked $n: 2 slots, 1 problem")"
    assert_error_line
    run -65 --separate-stderr al --json check --admin-wait 0 "$n"
    assert_json '.problems == [{"kind":"stray_mutex","queue":$q,"repaired":false}]
        and .max == 2 and .error == "damaged"' --arg q "amqplock.$n"
    # the mutex was not taken: no slot types, and the mutex has no slot
    assert_keys . "ok semaphore max paused problems repaired orphans error message"
    assert_keys '.problems[0]' "kind queue repaired"
    run sem_queues
    assert_output "$( (echo "amqplock.$n true false"; slot_lines 1 2) | sort -V)"
    run -0 --separate-stderr al check --repair --admin-wait 0 "$n"
    assert_output "$(printf '%s\n' "${line}deleted" \
        "checked $n: 2 slots (classic), 1 problem, 1 repaired")"
    run sem_queues
    assert_output "$(slot_lines 1 2)"
    run -0 --separate-stderr al check --admin-wait 0 "$n"
}

@test "every administrative command deletes a leftover admin mutex and goes on (-v says so)" {
    al create "$n" 2
    local args
    for args in "add $n" "remove $n" "max $n 4" "destroy $n" "create $n 3"; do
        damage --shared "amqplock.$n"
        set -- $args
        run -0 --separate-stderr al -v "$1" --admin-wait 0 "${@:2}"
        [[ $stderr == *"deleted the leftover admin mutex amqplock.$n"* ]] ||
            fail "$args: stderr: $stderr"
    done
    run sem_queues
    assert_output "$(slot_lines 1 3)"
}

@test "a real administrator's mutex is waited for, never deleted, by check and the others" {
    al create "$n" 2
    hold_queues "amqplock.$n"
    run -1 --separate-stderr al check --admin-wait 0 "$n"
    refute_output
    assert_error_line
    run -1 --separate-stderr al --json check --repair --admin-wait 0.3 "$n"
    assert_json '.ok == false and .error == "busy"'
    run -1 --separate-stderr al add --admin-wait 0 "$n"
    running "$HOLD_PID" || fail "the administrator is gone"
    run sem_queues
    assert_output "$( (echo "amqplock.$n false true"; slot_lines 1 2) | sort -V)"
}

# --- the administrative commands repair stray holder queues -----------------------------

@test "add, remove and max N delete stray holder queues and count them in swept_holders" {
    al create "$n" 3
    local args
    for args in "add $n" "remove $n" "max $n 5" "max $n 3"; do
        # one within max, one in the overshoot window above it
        damage --shared "amqplock.$n-1-B" "amqplock.$n-7-B"
        set -- $args
        run -0 --separate-stderr al --json "$1" "${@:2}"
        assert_json '.ok and .swept_holders == 2'
        run -0 --separate-stderr al hold -n "$n" -- printenv AMQPLOCK_SLOT
        assert_output 1
    done
    run -0 --separate-stderr al --json add "$n"
    assert_json '.ok and (has("swept_holders") | not)'
    run sem_queues
    assert_output "$(slot_lines 1 4)"
}

@test "destroy and create delete stray holder queues: destroy + create clears the issue's stray" {
    al create "$n" 2
    damage --shared "amqplock.$n-1-B"
    run -0 --separate-stderr al --json destroy "$n"
    assert_json '.ok and .max == 0 and .swept_holders == 1'
    run -0 --separate-stderr al create "$n" 2
    run -0 --separate-stderr al hold -n "$n" -- printenv AMQPLOCK_SLOT
    assert_output 1
    # a stray left before the semaphore existed
    al destroy "$n"
    damage --shared "amqplock.$n-1-B"
    run -0 --separate-stderr al --json create "$n" 1
    assert_json '.ok and .max == 1 and .swept_holders == 1'
    run -0 --separate-stderr al hold -n "$n" -- printenv AMQPLOCK_SLOT
    assert_output 1
}

# --- real holders are never touched -------------------------------------------------------

@test "real holders, within max and above it, are never reported or deleted, nor their leases" {
    al create "$n" 3
    bg acquire acquire "$n"
    local acq=$BG
    wait_until 10 has_line "$T/acquire.out" 1 || fail "acquire: $(cat "$T/acquire.out" "$T/acquire.err")"
    bg hold hold "$n" -- sleep 60
    local hold=$BG
    # an orphan above max, held by a client that never checks its slot
    hold_queues "amqplock.$n-5-B"
    wait_until 10 eval '[ "$(al --json status --no-names "$n" | jq -c .held)" = "[1,2]" ]' ||
        fail "status: $(al status "$n")"

    run -0 --separate-stderr al check "$n"
    assert_output "checked $n: 3 slots (classic), no problems; holders above max: 5"
    run -0 --separate-stderr al --json check --repair "$n"
    assert_json '.ok and .problems == [] and .orphans == [5]'
    run -0 --separate-stderr al --json add "$n"
    assert_json '.ok and (has("swept_holders") | not)'
    run -0 --separate-stderr al --json max "$n" 3
    assert_json '.ok and (has("swept_holders") | not)'
    # the leases of the two real holders stay too
    run sem_queues
    assert_output "$( (slot_lines 1 3; printf 'amqplock.%s-%s-B false true\n' "$n" 1 "$n" 2 "$n" 5
        printf 'amqplock.%s-%s-L true false\n' "$n" 1 "$n" 2) | sort -V)"
    running "$acq" || fail "acquire ended: $(cat "$T/acquire.err")"
    running "$hold" || fail "hold ended: $(cat "$T/hold.err")"
    running "$HOLD_PID" || fail "the orphan's client ended"
    kill -TERM "$acq"
    wait_exit "$acq" 5
    [ "$rc" -eq 0 ] || fail "acquire exited $rc: $(cat "$T/acquire.err")"
}

# --- several problems at once, and the command line -----------------------------------------

@test "several problems at once are all reported, and all repaired" {
    al create "$n" 4
    damage --delete "amqplock.$n-3-A" --shared "amqplock.$n" "amqplock.$n-1-B" "amqplock.$n-9-B"
    run -65 --separate-stderr al --json check --admin-wait 0 "$n"
    assert_json '(.problems | map(.kind)) == ["stray_mutex", "missing_slot", "stray_holder", "stray_holder"]
        and (.problems | map(.slot)) == [null, 3, 1, 9] and (.problems[0] | has("slot") | not)
        and .max == 4 and .repaired == 0 and .error == "damaged"'
    run -0 --separate-stderr al --json check --repair --admin-wait 0 "$n"
    assert_json '.ok and .repaired == 4 and (.problems | map(.repaired)) == [true, true, true, true]
        and (has("error") | not)'
    run sem_queues
    assert_output "$(slot_lines 1 4)"
    run -0 --separate-stderr al check "$n"
}

@test "--repair applies only to check; check takes --admin-wait and --overshoot, and --prefix" {
    run -64 --separate-stderr al status --repair "$n"
    assert_error_line
    [[ $stderr == *"option --repair does not apply to status"* ]] || fail "$stderr"
    run -64 --separate-stderr al --repair check "$n"
    assert_error_line
    run -64 --separate-stderr al check "$n" 2
    run -64 --separate-stderr al check --admin-wait x "$n"
    run -64 --separate-stderr al check --slot-type quorum "$n"
    run -0 --separate-stderr al --prefix chk. create "$n" 1
    damage --shared "chk.$n-1-B"
    run -65 --separate-stderr al --prefix chk. check "$n"
    assert_line --index 0 --partial "stray holder queue chk.$n-1-B"
    run -0 --separate-stderr al check --repair --prefix chk. "$n"
    run -0 --separate-stderr al --prefix chk. destroy "$n"
}
