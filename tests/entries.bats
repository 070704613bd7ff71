#!/usr/bin/env bats
# The line of entries (docs/design.md, "A line for N slots"): on a
# semaphore of more than one slot a waiter waits with an entry in
# NAME#line that names a queue of its own; a release hands its lease to
# the oldest entry's waiter, and releases that come together to as many
# of the oldest, in the order they came; entries of waiters gone are
# passed, entries that name no waiter's queue are dropped unread, a first
# entry whose waiter does not take its turn goes to the back; a client
# the broker refuses #line waits in NAME#waiters as amqplock 0.4 did;
# destroy deletes the line. Timing bounds here catch stalls, not
# slowness: make bench measures the line.
#
# Needs jq and perl (core modules). Helper programs: tests/tools/
# (entry.pl, overlaps.pl, leasecmd.pl).

bats_require_minimum_version 1.5.0
load lib/helper

setup() {
    test_init
    declare -gA PID
}

teardown() { test_cleanup; }

# holder TAG: a hold -v whose command runs until $T/go.TAG exists;
# returns once it runs. Pid in PID[TAG].
holder() {
    bg "$1" -v hold "$n" -- sh -c "touch '$T/$1.ran'; while [ ! -e '$T/go.$1' ]; do sleep 0.02; done"
    PID[$1]=$BG
    wait_until 15 test -e "$T/$1.ran" || fail "$1 did not start: $(cat "$T/$1.err")"
}

# waiter TAG [OPTIONS...]: a hold -v -w 60 whose command appends "TAG
# SLOT" to $T/order, then runs until $T/go.TAG exists; returns once it
# has its entry in #line. Pid in PID[TAG].
waiter() {
    local tag=$1
    shift
    bg "$tag" -v hold -w 60 "$@" "$n" -- sh -c \
        "echo $tag \$AMQPLOCK_SLOT >>'$T/order'; while [ ! -e '$T/go.$tag' ]; do sleep 0.02; done"
    PID[$tag]=$BG
    wait_until 15 grep -q "our place in amqplock.$n#line" "$T/$tag.err" ||
        fail "$tag has no entry in #line: $(cat "$T/$tag.err")"
}

# finish TAG...: lets each command end; each hold exits 0 within 20 s.
finish() {
    local tag
    for tag in "$@"; do
        touch "$T/go.$tag"
        wait_exit "${PID[$tag]}" 20
        [ "$rc" -eq 0 ] || fail "$tag exited $rc: $(cat "$T/$tag.err")"
    done
}

# served N: N commands of waiters have started.
served() { [ "$(cat "$T/order" 2>/dev/null | wc -l)" -ge "$1" ]; }

# waiting_is N: status --json counts N waiting.
waiting_is() { [ "$(al --json status --no-names "$n" | jq .waiting)" = "$1" ]; }

# entries: the messages ready in NAME#line (the broker's count).
entries() {
    rmqctl -q list_queues name messages_ready --no-table-headers |
        awk -v q="amqplock.$n#line" '$1 == q { print $2 }'
}

@test "a waiter on 2 slots waits in NAME#line, counted by status; a release hands it its lease" {
    al create "$n" 2
    holder a
    holder b
    waiter w
    waiting_is 1 || fail "status: $(al status "$n")"
    touch "$T/go.a"
    wait_until 10 served 1 || fail "w not served: $(cat "$T/w.err")"
    grep -q "offering its lease to the first in line (amqplock.$n#w" "$T/a.err" ||
        fail "no offer to w's queue: $(cat "$T/a.err")"
    grep -Eq "handed slot [12] over" "$T/a.err" || fail "a handed nothing over: $(cat "$T/a.err")"
    grep -Eq "slot [12] is ours, handed over" "$T/w.err" || fail "w did not adopt: $(cat "$T/w.err")"
    sed -n '/woken/,$p' "$T/w.err" | grep -q "claiming slot" && fail "w claimed anew: $(cat "$T/w.err")"
    waiting_is 0 || fail "status: $(al status "$n")"
    finish b w
}

@test "two releases at once on 2 slots hand over to the two oldest waiters; the third is served after" {
    al create "$n" 2
    holder a
    holder b
    waiter w1
    waiter w2
    waiter w3
    touch "$T/go.a" "$T/go.b"
    wait_until 10 served 2 || fail "not served: $(cat "$T/order" 2>/dev/null)"
    sleep 0.3
    [ "$(cut -d' ' -f1 "$T/order" | sort | xargs)" = "w1 w2" ] ||
        fail "served out of order: $(cat "$T/order")"
    [ "$(cut -d' ' -f2 "$T/order" | sort | xargs)" = "1 2" ] || fail "slots: $(cat "$T/order")"
    grep -q "is ours, handed over" "$T/w1.err" || fail "w1: $(cat "$T/w1.err")"
    grep -q "is ours, handed over" "$T/w2.err" || fail "w2: $(cat "$T/w2.err")"
    finish w1
    wait_until 10 served 3 || fail "w3 not served: $(cat "$T/w3.err")"
    finish w2 w3
}

# arrived TAG: TAG's hold has a slot, or its place in #line (its -v trace).
arrived() { grep -q -e '^amqplock: holding slot' -e '^amqplock: waiting on .*, our place in ' "$T/$1.err"; }

# ran_at_least N: N commands have started (leasecmd.pl's FILE.ready).
ran_at_least() { [ "$(find "$T" -name 'cmd.*.ready' | wc -l)" -ge "$1" ]; }

@test "holds on 3 slots started one after another are served in the order they came, never two on a slot" {
    al create "$n" 3
    local i k bad order
    # each started once the one before has arrived (a slot, or its place
    # in line): 0.1 s apart, a loaded CI machine once let h9 enter the
    # line before h8
    for i in $(seq 1 12); do
        bg "h$i" -v hold -w 60 "$n" -- perl "$H/leasecmd.pl" "$T/cmd.$i" 60 0 "$T/go.$i"
        PID[h$i]=$BG
        wait_until 10 arrived "h$i" || fail "h$i did not arrive: $(cat "$T/h$i.err")"
    done
    # jobs end one at a time, each once the slot before has gone to the
    # next in line: two grants at once could start their commands in
    # either order (a command cannot see its grant), which a loaded
    # machine once did (11 before 10)
    for k in $(seq 1 12); do
        wait_until 20 test -e "$T/cmd.$k.ready" || fail "h$k never ran: $(cat "$T/h$k.err")"
        touch "$T/go.$k"
        wait_until 20 ran_at_least $((k + 3 < 12 ? k + 3 : 12)) ||
            fail "nobody took the slot h$k let go: $(cat "$T/h$((k + 3)).err" 2>/dev/null)"
    done
    for i in $(seq 1 12); do
        wait_exit "${PID[h$i]}" 60
        [ "$rc" -eq 0 ] || fail "h$i exited $rc: $(cat "$T/h$i.err")"
    done
    perl "$H/overlaps.pl" "$T"/cmd.? "$T"/cmd.?? >"$T/runs"
    [ "$(grep -c '^interval ' "$T/runs")" -eq 12 ] || fail "not 12 commands ran: $(cat "$T/runs")"
    bad=$(awk '$1 == "handover" && $5 < 0' "$T/runs")
    [ -z "$bad" ] || fail "two commands on one slot at once: $bad"
    # the order their commands started (interval FILE SEM/SLOT START ...)
    order=$(awk '$1 == "interval" { sub(/.*cmd\./, "", $2); print $4, $2 }' "$T/runs" |
        sort -n | awk '{ print $2 }' | xargs)
    note "served: $order"
    [ "$(echo "$order" | cut -d' ' -f4-)" = "4 5 6 7 8 9 10 11 12" ] || fail "out of order: $order"
}

@test "a waiter that gives up takes its entry along; one killed leaves an entry that the next release passes" {
    al create "$n" 2
    holder a
    holder b
    bg g -v hold -w 1 "$n" -- true
    local g=$BG
    wait_until 10 grep -q "our place in amqplock.$n#line" "$T/g.err" || fail "g: $(cat "$T/g.err")"
    wait_exit "$g" 10
    [ "$rc" -eq 1 ] || fail "g exited $rc: $(cat "$T/g.err")"
    [ "$(entries)" = 0 ] || fail "g left an entry: $(entries)"
    waiter k
    waiter w
    kill -9 "${PID[k]}"
    wait_exit "${PID[k]}" 10
    [ "$(entries)" = 2 ] || fail "entries: $(entries)"
    touch "$T/go.a"
    wait_until 10 served 1 || fail "w not served: $(cat "$T/w.err")"
    [ "$(cut -d' ' -f1 "$T/order")" = w ] || fail "served: $(cat "$T/order")"
    grep -q "passed 1 entries of waiters gone" "$T/a.err" || fail "k's entry not passed: $(cat "$T/a.err")"
    grep -q "is ours, handed over" "$T/w.err" || fail "w: $(cat "$T/w.err")"
    [ "$(entries)" = 0 ] || fail "entries left: $(entries)"
    finish b w
}

@test "an entry that names no waiter's queue (a holder queue, another semaphore's) is dropped unread" {
    al create "$n" 2
    holder a
    holder b
    waiter w
    # forged behind w, then w leaves: they are first
    perl "$H/entry.pl" "$AMQPLOCK_TEST_PORT" guest guest "amqplock.$n#line" "amqplock.$n-1-B"
    perl "$H/entry.pl" "$AMQPLOCK_TEST_PORT" guest guest "amqplock.$n#line" "amqplock.other#w000000000001"
    waiter w2
    [ "$(entries)" = 4 ] || fail "entries: $(entries)"
    touch "$T/go.a"
    wait_until 10 served 1 || fail "nobody served: $(cat "$T/a.err")"
    touch "$T/go.b"
    wait_until 10 served 2 || fail "w2 not served: $(cat "$T/b.err" "$T/w2.err")"
    [ "$(cut -d' ' -f1 "$T/order" | xargs)" = "w w2" ] || fail "served: $(cat "$T/order")"
    # a holder queue never gets an offer: the forgery went unread
    ! grep -q "offering its lease to the first in line (amqplock.$n-1-B)" "$T/b.err" ||
        fail "an offer went to a holder queue: $(cat "$T/b.err")"
    [ "$(entries)" = 0 ] || fail "entries left: $(entries)"
    finish w w2
}

@test "a first waiter in NAME#line that is stopped goes to the back: the next is served within 10 s" {
    al create "$n" 2
    holder a
    holder b
    waiter w1 --heartbeat 0
    waiter w2
    kill -STOP "${PID[w1]}"
    local t0=$EPOCHREALTIME
    touch "$T/go.a"
    wait_until 12 served 1 || fail "w2 not served: $(cat "$T/w2.err")"
    local took
    took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    note "w2 served $took s after the release, the first waiter stopped"
    [ "$(cut -d' ' -f1 "$T/order")" = w2 ] || fail "served: $(cat "$T/order")"
    grep -q "it goes to the back of the line" "$T/w2.err" || fail "w2: $(cat "$T/w2.err")"
    kill -CONT "${PID[w1]}"
    finish w2
    wait_until 15 served 2 || fail "w1 not served after its continue: $(cat "$T/w1.err")"
    finish b w1
}

@test "under an expires policy of 3 s the mark NAME#waiters lapses, and its waiter puts it back: a slot freed after is taken within 2.5 s" {
    al create "$n" 2
    holder a
    holder b
    waiter w
    expire_policy 3000
    wait_until 15 grep -q "has lapsed" "$T/w.err" || fail "#waiters did not lapse: $(cat "$T/w.err")"
    local t0=$EPOCHREALTIME took
    touch "$T/go.a"
    wait_until 10 served 1 || fail "w not served: $(cat "$T/w.err")"
    took=$(since "$t0")
    note "w served $took s after the release"
    awk -v t="$took" 'BEGIN { exit !(t < 2.5) }' || fail "w served $took s after: $(cat "$T/w.err")"
    finish b w
}

@test "NAME#line deleted under its waiters (an expires policy, by hand): they enter it again, served within 2.5 s and 4 s of the releases" {
    al create "$n" 2
    holder a
    holder b
    waiter w1
    waiter w2
    rmqctl -q delete_queue "amqplock.$n#line" >/dev/null
    local t0=$EPOCHREALTIME took
    touch "$T/go.a"
    wait_until 10 served 1 || fail "nobody served: $(cat "$T/w1.err" "$T/w2.err")"
    took=$(since "$t0")
    note "first served $took s after the release"
    awk -v t="$took" 'BEGIN { exit !(t < 2.5) }' || fail "served $took s after the release"
    t0=$EPOCHREALTIME
    touch "$T/go.b"
    wait_until 10 served 2 || fail "the second not served: $(cat "$T/w1.err" "$T/w2.err")"
    took=$(since "$t0")
    note "second served $took s after the release"
    # its entry went with the line: it finds the slot by its own look
    # (every 2 s at most); 4 s still tells that from the 5 s stall
    awk -v t="$took" 'BEGIN { exit !(t < 4) }' || fail "served $took s after the release"
    cat "$T/w1.err" "$T/w2.err" | grep -Eq "was gone, our place with it|our entry is missing" ||
        fail "nobody entered again: $(cat "$T/w1.err" "$T/w2.err")"
    finish w1 w2
}

@test "destroy deletes NAME#line" {
    al create "$n" 2
    holder a
    holder b
    waiter w
    rmqctl -q list_queues name --no-table-headers | grep -qx "amqplock.$n#line" || fail "no #line"
    touch "$T/go.a" "$T/go.b"
    wait_until 10 served 1 || fail "w not served"
    # (w's job ends first: a destroy under a running holder takes its slot
    # away, and it exits 75 once it next looks, before or after its job)
    finish w
    al destroy "$n"
    ! rmqctl -q list_queues name --no-table-headers | grep -qx "amqplock.$n#line" ||
        fail "#line left after destroy"
}

@test "the mark NAME#waiters taken by another connection (exclusive): a waiter in #line is refused its declare, waits on, and is served when a slot frees" {
    al create "$n" 2
    holder a
    holder b
    waiter w
    # deleted, and declared again exclusive on a connection of another
    # (again if the waiter declared it in between: its first look after
    # joining does)
    local try q
    for try in 1 2 3; do
        perl "$H/holdq.pl" "$AMQPLOCK_TEST_PORT" --delete "amqplock.$n#waiters" \
            --exclusive "amqplock.$n#waiters" >"$T/q.out" 2>&1 3>&- &
        q=$!
        keep "$q"
        wait_until 10 eval 'grep -qx ready "$T/q.out" || ended "$q"'
        ! grep -qx ready "$T/q.out" || break
    done
    grep -qx ready "$T/q.out" || fail "holdq: $(cat "$T/q.out")"
    # the waiter declares the mark again every 20 s (LINE_KEEP): 405
    wait_until 40 grep -q "could not declare amqplock.$n#waiters again" "$T/w.err" ||
        fail "w: $(cat "$T/w.err")"
    nap 1.5
    ! ended "${PID[w]}" || fail "the waiter ended: $(cat "$T/w.err")"
    touch "$T/go.a"
    wait_until 15 served 1 || fail "w not served: $(cat "$T/w.err")"
    finish w b
}
