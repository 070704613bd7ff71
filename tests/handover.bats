#!/usr/bin/env bats
# The lease handed over (docs/design.md, "Handing the lease over"): a
# release with someone in line offers its lease, as it is, to the first in
# line, which asks for it through the releaser's own holder queue and runs
# its command only once the releaser has handed it over and its own claim
# with the lease (holder queue included) has gone through. Every way a
# hand-over can fail falls back to the release as before, and no two
# commands run on one slot, whatever anyone of the holders' own login
# publishes with a token read from the broker (offers, asks, answers, in
# this amqplock's form or 0.3.0's), an offer of an away holder's slot, an
# offer delivered a second time, a first in line that says nothing (an
# older amqplock; the real 0.2.0 too, built from this repository's
# history), a releaser paused or cut off after its offer, an adopter cut
# off or killed half-way (a relay that drops or holds back what the broker
# sends after a chosen note), and a broker restarted there. Commands
# record when they ran (tools/leasecmd.pl) and tools/overlaps.pl checks
# that no two overlapped. Timing bounds here catch stalls, not slowness:
# make bench and make bench-phases measure the speed.
#
# Needs jq and perl (core modules). Helper programs: tests/tools/
# (leasecmd.pl, overlaps.pl, proxy.pl, linehead.pl, offer.pl, forger.pl,
# looker.pl).
#
# It restarts the node. tests/run.sh runs it so:
# run.sh: a broker of its own

bats_require_minimum_version 1.5.0
load lib/helper

setup() {
    test_init
    declare -gA PID
}

teardown() {
    [ -z "${LOOKER:-}" ] || kill "$LOOKER" 2>/dev/null || true
    if [ -n "${NODE_STOPPED:-}" ]; then
        "$H/renode.sh" start "$AMQPLOCK_TEST_BROKER_DIR" >/dev/null 2>&1 ||
            echo "# teardown could not start the broker again" >&3
    fi
    test_cleanup
    # (rabbitmqctl costs a second of CPU: only where a test made the user)
    [ -z "${FORGER:-}" ] || rmqctl delete_user "$FORGER" >/dev/null 2>&1 || true
}

# holder TAG [OPTIONS...]: a hold -v of the 1-slot semaphore whose command
# (leasecmd.pl, $T/TAG.cmd) runs until $T/go exists; returns once it runs.
# Pid in PID[TAG].
holder() {
    local tag=$1
    shift
    bg "$tag" -v hold "$@" "$n" -- perl "$H/leasecmd.pl" "$T/$tag.cmd" 60 0 "$T/go"
    PID[$tag]=$BG
    wait_until 15 test -e "$T/$tag.cmd.ready" || fail "$tag did not start: $(cat "$T/$tag.err")"
}

# waiter TAG [OPTIONS...]: a hold -v -w 60 whose command runs 0.2 s,
# returns once it is in line. Pid in PID[TAG].
waiter() {
    local tag=$1
    shift
    bg "$tag" -v hold -w 60 "$@" "$n" -- perl "$H/leasecmd.pl" "$T/$tag.cmd" 0.2
    PID[$tag]=$BG
    in_line "$tag"
}

# offer_left_over: a 1-slot semaphore whose holder r let go with nobody
# in line (a waiter made the line, then gave up): its offer lies in the
# line for the next half second.
offer_left_over() {
    al create "$n" 1
    holder r
    # the line made, then left empty: a waiter that gives up
    run "$AMQPLOCK_BIN" hold -w 0.3 "$n" -- true
    [ "$status" -eq 1 ] || fail "hold -w 0.3 exited $status: $output"
    touch "$T/go"
    finish r
    grep -q "nobody was in line" "$T/r.err" || fail "$(cat "$T/r.err")"
}

# one_after_other TAG...: each command ran once, none beside another.
one_after_other() {
    local files=() tag bad
    for tag in "$@"; do files+=("$T/$tag.cmd"); done
    perl "$H/overlaps.pl" "${files[@]}" >"$T/runs"
    [ "$(grep -c '^interval ' "$T/runs")" -eq $# ] || fail "not $# commands ran: $(cat "$T/runs")"
    bad=$(awk '$1 == "handover" && $5 < 0' "$T/runs")
    [ -z "$bad" ] || fail "two commands on one slot at once: $bad"
    bad=$(awk '$1 == "interval" && $9 != 1' "$T/runs")
    [ -z "$bad" ] || fail "a command ran twice: $bad"
}

# lease_token K: the token (x-max-length) of the lease of slot K, if any.
lease_token() {
    rmqctl -q list_queues name arguments --no-table-headers |
        awk -v q="amqplock.$n-$1-L" '$1 == q' | grep -o '"x-max-length",[0-9]*' | cut -d, -f2
}

# lease_ms K: the length (x-expires, ms) of the lease of slot K, if any.
lease_ms() {
    rmqctl -q list_queues name arguments --no-table-headers |
        awk -v q="amqplock.$n-$1-L" '$1 == q' | grep -o '"x-expires",[0-9]*' | cut -d, -f2
}

# finish TAG...: each hold exits 0 within 20 s.
finish() {
    local tag
    for tag in "$@"; do
        wait_exit "${PID[$tag]}" 20
        [ "$rc" -eq 0 ] || fail "$tag exited $rc: $(cat "$T/$tag.err")"
    done
}

@test "a release hands its lease to the first in line as it is; the waiter runs once it is handed over, after the release" {
    al create "$n" 1
    holder r
    waiter w
    local token
    token=$(lease_token 1)
    [ -n "$token" ] || fail "no lease"
    touch "$T/go"
    finish r w
    grep -q "handed slot 1 over" "$T/r.err" || fail "not handed over: $(cat "$T/r.err")"
    grep -q "slot 1 is ours, handed over" "$T/w.err" || fail "not adopted: $(cat "$T/w.err")"
    grep -q "claiming slot" <(sed -n '/woken/,$p' "$T/w.err") && fail "w claimed anew: $(cat "$T/w.err")"
    one_after_other r w
    no_lease_left "$n"
}

@test "the lease goes on with its token: while the adopter holds, the lease queue is the releaser's, renewed" {
    al create "$n" 1
    holder r
    bg w -v hold -w 60 "$n" -- perl "$H/leasecmd.pl" "$T/w.cmd" 60 0 "$T/go2"
    PID[w]=$BG
    in_line w
    local token
    token=$(lease_token 1)
    touch "$T/go"
    wait_until 10 test -e "$T/w.cmd.ready" || fail "w did not start: $(cat "$T/w.err")"
    # its holder queue comes with its adoption, before its command
    # starts: the slot is never shown away
    wait_until 0.5 eval '[ "$(al --json status --no-names "$n" | jq -c .away)" = "[]" ]' ||
        fail "the adopter's slot is away: $(al --json status --no-names "$n")"
    [ "$(lease_token 1)" = "$token" ] || fail "the lease was made again: $token, now $(lease_token 1)"
    # renewed by the adopter beyond the releaser's exit
    sleep 2
    [ "$(lease_token 1)" = "$token" ] || fail "the lease changed or went"
    slot_held "$n" 1 || fail "slot 1 not held"
    touch "$T/go2"
    finish r w
    no_lease_left "$n"
}

# The token can be read by anyone with the monitoring tag (management API,
# rabbitmqctl), and the README's inspector may publish to the line: a
# forged offer naming an away holder's lease would make the first in line
# run beside that holder's job. Only an offer whose user_id is the
# waiter's own login is adopted, and the broker lets nobody set another's.
@test "a forged offer of an away holder's lease is not adopted: the waiter waits until the lease runs out" {
    al create "$n" 1
    FORGER=forger-$n
    rmqctl add_user "forger-$n" pw >/dev/null
    rmqctl set_permissions -p / "forger-$n" '^$' '^amq\.default$' '^$' >/dev/null
    # the lease outlasts what follows (a few seconds of rabbitmqctl)
    bg a acquire --heartbeat 1 --lease 12 "$n"
    local a=$BG
    wait_until 10 has_line "$T/a.out" '[0-9]+' || fail "acquire got no slot: $(cat "$T/a.err")"
    local token
    token=$(lease_token 1)
    [ -n "$token" ] || fail "no lease"
    kill -KILL "$a"
    wait_until 10 eval '[ "$(al --json status --no-names "$n" | jq -c .away)" = "[1]" ]' ||
        fail "not away: $(al --json status --no-names "$n")"
    waiter w --heartbeat 1 --grace 1 --lease 12
    local quorum=1
    [ "$(queue_type "amqplock.$n-1-L")" = quorum ] || quorum=0
    run perl "$H/offer.pl" "$AMQPLOCK_TEST_PORT" "forger-$n" pw "amqplock.$n#waiters" 1 "$token" 12000 "$quorum"
    [[ $output == *amqplock.declined* ]] || fail "unsigned offer: $output"
    run perl "$H/offer.pl" "$AMQPLOCK_TEST_PORT" "forger-$n" pw "amqplock.$n#waiters" 1 "$token" 12000 "$quorum" "forger-$n"
    [[ $output == *amqplock.declined* ]] || fail "offer signed by another login: $output"
    run perl "$H/offer.pl" "$AMQPLOCK_TEST_PORT" "forger-$n" pw "amqplock.$n#waiters" 1 "$token" 12000 "$quorum" guest
    [[ $output == *"closed 406"* ]] || fail "the broker let a user sign as another: $output"
    grep -q "not adopted: it is not signed by our login" "$T/w.err" || fail "$(cat "$T/w.err")"
    # signed by our login, in this amqplock's form: the ask goes to the
    # away holder's holder queue, which nobody holds
    run perl "$H/offer.pl" "$AMQPLOCK_TEST_PORT" guest guest "amqplock.$n#waiters" 1 - 12000 "$quorum" guest
    wait_until 5 grep -q "not adopted: no holder holds its holder queue" "$T/w.err" || fail "$(cat "$T/w.err")"
    ! grep -q "is ours, handed over" "$T/w.err" || fail "w adopted a forged offer: $(cat "$T/w.err")"
    # while the away holder's lease lasts, w runs nothing
    if [ "$(lease_token 1)" = "$token" ]; then
        [ ! -e "$T/w.cmd.ready" ] || fail "w ran beside the away holder's job"
    else
        note "the lease ran out before the check (a slow machine?)"
    fi
    # and the slot is the waiter's once the lease runs out
    wait_exit "${PID[w]}" 30
    [ "$rc" -eq 0 ] || fail "w exited $rc: $(cat "$T/w.err")"
}

@test "a first in line that does not adopt (an older amqplock) costs the release half a second: the lease is ended as before" {
    al create "$n" 1
    holder r
    local r=$BG
    perl "$H/linehead.pl" "$AMQPLOCK_TEST_PORT" "amqplock.$n#waiters" >"$T/head.out" 2>&1 3>&- &
    keep $!
    wait_until 10 grep -qx ready "$T/head.out" || fail "linehead.pl: $(cat "$T/head.out")"
    local t0 took
    t0=$(now)
    touch "$T/go"
    wait_exit "$r" 10
    took=$(since "$t0")
    [ "$rc" -eq 0 ] || fail "r exited $rc: $(cat "$T/r.err")"
    grep -q "was not asked for; ending it" "$T/r.err" || fail "$(cat "$T/r.err")"
    note "release with a first in line that does not adopt: $took s"
    at_most "$took" 3
    wait_until 5 none_held "$n" || fail "still held: $(al --json status --no-names "$n")"
    no_lease_left "$n"
}

# The first in line dies holding the offer, unacknowledged: the broker
# gives it to the next, marked as delivered before. That one cannot know
# whether the dead one adopted it and is away with a job (its
# acknowledgement may have been lost with it), so it does not adopt; the
# releaser, told so, ends the lease and wakes it as before.
# The last amqplock before hand-overs, 0.2.0, built from this repository's
# history into $OLD_AMQPLOCK; the test is skipped without that history (a
# tarball of the sources).
OLD_COMMIT=7e45825
old_amqplock() {
    local top
    # (the repository's top: CI's sanitizer pass runs a copy in build/san,
    # inside the work tree, from where git archive refuses to run)
    top=$(git -C "$BATS_TEST_DIRNAME/.." rev-parse --show-toplevel 2>/dev/null) &&
        git -C "$top" cat-file -e "$OLD_COMMIT^{commit}" 2>/dev/null || skip "no git history with amqplock 0.2.0"
    mkdir "$T/old"
    git -C "$top" archive "$OLD_COMMIT" | tar -x -C "$T/old"
    make -C "$T/old" -s -j2 amqplock >"$T/old.log" 2>&1 || fail "building 0.2.0: $(tail "$T/old.log")"
    OLD_AMQPLOCK=$T/old/amqplock
    [ "$("$OLD_AMQPLOCK" --version)" = "amqplock 0.2.0" ] || fail "not 0.2.0: $("$OLD_AMQPLOCK" --version)"
}

@test "amqplock 0.2.0 in the line: it never adopts; a hand-off to it is a release half a second late, from it a release; one command at a time, in line order" {
    old_amqplock
    al create "$n" 1
    holder r
    AMQPLOCK_BIN=$OLD_AMQPLOCK waiter o
    waiter w
    touch "$T/go"
    finish r o w
    grep -q "offering its lease" "$T/r.err" || fail "$(cat "$T/r.err")"
    grep -q "was not asked for; ending it" "$T/r.err" || fail "$(cat "$T/r.err")"
    ! grep -q "handed over" "$T/o.err" || fail "0.2.0 adopted: $(cat "$T/o.err")"
    ! grep -q "offering its lease" "$T/o.err" || fail "0.2.0 offered: $(cat "$T/o.err")"
    one_after_other r o w
    # the hand-overs of the slot, in the order the commands started
    [ "$(awk '$1 == "handover" { printf "%s>%s ", $3, $4 }' "$T/runs")" = "$T/r.cmd>$T/o.cmd $T/o.cmd>$T/w.cmd " ] ||
        fail "not in line order: $(cat "$T/runs")"
    no_lease_left "$n"
}

# The first in line dies holding the offer, unacknowledged: the broker
# gives it to the next, marked as delivered before. The dead one never
# asked (it died first), so the releaser hands its lease to the one that
# does. (Had it asked, the releaser would have decided for it, once, and
# the next one's ask would go unanswered: no second holder either way.)
@test "an offer delivered a second time is asked for by the next in line, which gets the lease" {
    al create "$n" 1
    holder r
    perl "$H/linehead.pl" "$AMQPLOCK_TEST_PORT" "amqplock.$n#waiters" --die-holding >"$T/head.out" 2>&1 3>&- &
    keep $!
    wait_until 10 grep -qx ready "$T/head.out" || fail "linehead.pl: $(cat "$T/head.out")"
    waiter w
    touch "$T/go"
    finish r w
    grep -qx "died holding" "$T/head.out" || fail "the head got nothing: $(cat "$T/head.out")"
    grep -q "handed slot 1 over" "$T/r.err" || fail "$(cat "$T/r.err")"
    grep -q "slot 1 is ours, handed over" "$T/w.err" || fail "$(cat "$T/w.err")"
    one_after_other r w
}

# A client of the holders' own login (one login on every host is the usual
# setup) reads the live holder's token from the text of a refusal (a
# declare of its lease with another x-max-length), then plays a releaser:
# amqplock 0.3.0's offer, adopted and confirmed (which ran the waiter
# beside the holder), and this amqplock's offer and answer with a guessed
# id. The first in line declines the old form and asks for the new one
# through the holder's own queue, where only the holder reads: nothing
# hands the lease over, and the holder's lease is never touched.
@test "a forger of our login with the live token (offer, adopted, confirmed) never gets a waiter to run beside the holder" {
    al create "$n" 1
    holder r
    waiter w
    local token quorum=1 group1=0 ms
    token=$(lease_token 1)
    ms=$(lease_ms 1)
    [ -n "$token" ] || fail "no lease"
    [ "$(queue_type "amqplock.$n-1-L")" = quorum ] || quorum=0
    [ "$quorum" = 1 ] && [ "$(queue_type "amqplock.$n-1-A")" != quorum ] && group1=1
    # the lease looked at every 2 ms: r renews it every second, which
    # would make it again if it were deleted
    perl "$H/looker.pl" "$AMQPLOCK_TEST_PORT" "amqplock.$n-1-L" 0.002 >"$T/looks" 2>"$T/looker.err" &
    LOOKER=$!
    wait_until 10 grep -q there "$T/looks" || fail "looker: $(cat "$T/looker.err")"
    run perl "$H/forger.pl" "$AMQPLOCK_TEST_PORT" guest guest "amqplock.$n" 1 "$ms" "$quorum" "$group1"
    [[ $output == *"token $token"* ]] || fail "the forger did not read the token: $output"
    # w, whatever it made of the forgeries, runs nothing beside r
    wait_until 5 grep -q "slot 1 offered, not handed over\|is ours, handed over" "$T/w.err" ||
        fail "$(cat "$T/w.err")"
    sleep 0.2
    [ ! -e "$T/w.cmd.ready" ] || fail "w ran beside r: $output"
    [[ $output == *"old: amqplock.declined"* ]] || fail "the 0.3.0 form was not declined: $output"
    grep -q "slot 1 offered, not handed over" "$T/w.err" || fail "$(cat "$T/w.err")"
    # the holder's lease is as it was
    kill "$LOOKER"
    ! grep -q gone "$T/looks" || fail "r's lease was ended: $(sort "$T/looks" | uniq -c | xargs)"
    [ "$(lease_token 1)" = "$token" ] || fail "r's lease is another: $(lease_token 1)"
    touch "$T/go"
    finish r w
    one_after_other r w
    no_lease_left "$n"
}

# The same left-over offer, behind a holder with a lease: the waiter
# asks that holder, which is not letting go and says nothing. When it
# does let go, its own offer reaches the waiter, still waiting for an
# answer: declined, it ends the wait, and the holder releases as usual.
# Waiting out ASK_WAIT (1 s) instead, the waiter ran a second after the
# release (bench/phases.pl: every round after the first).
@test "an offer left in an empty line costs the next waiter no second: the holder's own release serves it at once" {
    offer_left_over
    bg h -v hold "$n" -- perl "$H/leasecmd.pl" "$T/h.cmd" 60 0 "$T/go2"
    PID[h]=$BG
    wait_until 15 test -e "$T/h.cmd.ready" || fail "h did not start: $(cat "$T/h.err")"
    waiter w
    # h lets go while w still waits for an answer
    wait_until 2 grep -q "offered: asking" "$T/w.err" ||
        note "the offer expired before w came (a slow machine): nothing to ask"
    local t0 took
    t0=$(now)
    touch "$T/go2"
    wait_until 10 test -e "$T/w.cmd.ready" || fail "w did not run: $(cat "$T/w.err")"
    took=$(since "$t0")
    finish h w
    note "w ran $took s after h was told to let go"
    ! grep -q "not handed over within" "$T/w.err" || fail "w: $(cat "$T/w.err")"
    at_most "$took" 0.9
    one_after_other r h w
}

@test "an offer left in an empty line is spent harmlessly: a waiter that takes it later, behind a holder without a lease, makes no lease" {
    offer_left_over
    # within the offer's half second: a holder without a lease, a waiter
    # behind, whose ask reaches the new holder, who answers nothing
    bg h -v hold --lease 0 "$n" -- perl "$H/leasecmd.pl" "$T/h.cmd" 60 0 "$T/go2"
    PID[h]=$BG
    wait_until 15 test -e "$T/h.cmd.ready" || fail "h did not start: $(cat "$T/h.err")"
    waiter w
    if wait_until 2 grep -q "offered: asking" "$T/w.err"; then
        wait_until 5 grep -q "slot 1 offered, not" "$T/w.err" || fail "$(cat "$T/w.err")"
    else
        note "the offer expired before w came (a slow machine): nothing to adopt"
    fi
    [ -z "$(lease_token 1)" ] || fail "a lease was made beside a holder without one"
    local t0 took
    t0=$(now)
    touch "$T/go2"
    finish h w
    took=$(since "$t0")
    note "w ran $took s after h's release"
    at_most "$took" 5
    one_after_other r h w
}

@test "a releaser cut off after its offer: the asker is never answered, and runs only after the release" {
    al create "$n" 1
    start_relay_stalling amqplock.offer
    holder r --url "$RELAY_URL" --rpc-timeout 3
    waiter w
    touch "$T/go"
    finish r w
    grep -q "slot 1 offered, not handed over" "$T/w.err" || fail "$(cat "$T/w.err")"
    one_after_other r w
    no_lease_left "$n"
}

# A releaser paused (SIGSTOP, a VM pause, swap) right after its offer: it
# reads the ask only once it runs again, after the asker stopped waiting.
# The relay holds back all the broker sends it for 1.5 s from its offer
# on. Too late to hand over, it releases the slot as usual at once; before,
# it handed the lease to an asker that had given up, and the slot stayed
# blocked for the lease's length.
@test "a releaser paused 1.5 s after its offer: the slot is free within 3 s of its resume" {
    local base=$n try t0 took
    for try in 1 2 3; do
        n=$base-$try
        al create "$n" 1
        # (r's pause lasts until w's ask has come for r: on a loaded
        # machine the ask may take longer than the 1.5 s, and r would then
        # hear no ask at all)
        start_relay_holding amqplock.offer 1.5 amqplock.ask
        holder r --url "$RELAY_URL"
        waiter w
        t0=$(now)
        touch "$T/go"
        finish r w
        took=$(since "$t0")
        note "w ran $took s after r's release began (r paused 1.5 s after its offer; lease 40 s)"
        one_after_other r w
        at_most "$took" 4.5
        no_lease_left "$n"
        grep -q "too late" "$T/r.err" && break
        # r sends the count's question and the offer in two writes: if
        # the relay read them apart, the count's answer reached r before
        # the pause began, and r waited out its time for an ask unpaused
        # (CI, once in many runs). Safe, as checked above, but not the
        # window of this test: tried again.
        grep -q "not asked for" "$T/r.err" && [ "$try" -lt 3 ] ||
            fail "$(cat "$T/r.err" "$T/w.err")"
        note "try $try: r was not paused before the count's answer; again"
        kill "$RELAY"
        wait "$RELAY" 2>/dev/null || true
        rm -f "$T/relay.port" "$T/go" "$T"/[rw].*
    done
}

@test "kill -9 of a releaser after its offer: its keeper ends the lease; the asker runs only after" {
    al create "$n" 1
    start_relay_stalling amqplock.offer
    holder r --url "$RELAY_URL" --rpc-timeout 10
    waiter w
    touch "$T/go"
    wait_until 10 grep -q "offering its lease" "$T/r.err" || fail "no offer: $(cat "$T/r.err")"
    # (killed once w has asked: killed before, its holder queue gone, w's
    # ask comes back unrouted, which "an offer left in an empty line" tests)
    wait_until 10 grep -q "asking its holder for the lease" "$T/w.err" || fail "no ask: $(cat "$T/w.err")"
    kill -KILL "${PID[r]}"
    finish w
    grep -q "slot 1 offered, not handed over" "$T/w.err" || fail "$(cat "$T/w.err")"
    one_after_other r w
    wait_until 5 none_held "$n" || fail "still held: $(al --json status --no-names "$n")"
    no_lease_left "$n"
}

# The relay drops all the broker sends the adopter once it has sent its
# adoption (its lease declare, the first it makes): the releaser has
# handed the lease over and is gone, the adoption's answers never arrive.
# The adopter runs nothing, loses its connection to the reply timeout,
# ends on the next one the lease handed to it (nobody else would) and
# takes the slot again.
@test "an adopter cut off as it adopts: it runs nothing, ends the adopted lease on its next connection, and takes the slot again" {
    al create "$n" 1
    start_relay_stalling x-max-length
    holder r
    waiter w --url "$RELAY_URL" --rpc-timeout 2
    local t0 took
    t0=$(now)
    touch "$T/go"
    finish r
    grep -q "handed slot 1 over" "$T/r.err" || fail "$(cat "$T/r.err")"
    finish w
    took=$(since "$t0")
    note "the adopter cut off ran $took s after the release (lease 40 s)"
    grep -q "slot 1 handed over: adopting" "$T/w.err" || fail "$(cat "$T/w.err")"
    grep -q "no reply from the broker" "$T/w.err" || fail "$(cat "$T/w.err")"
    one_after_other r w
    at_most "$took" 15
    no_lease_left "$n"
}

# The relay drops all the broker sends the asker once it has asked: the
# releaser hands the lease over, and the answer never arrives. The asker
# cannot know that the lease is its own, and leaves it: the slot stays
# blocked until the lease runs out (here 5 s), then it is taken as usual.
@test "an asker cut off before the answer: it runs nothing, and the slot is free once the lease handed to it runs out" {
    al create "$n" 1
    start_relay_stalling amqplock.ask
    holder r --lease 5 --heartbeat 1 --grace 1
    waiter w --lease 5 --heartbeat 1 --grace 1 --url "$RELAY_URL" --rpc-timeout 2
    local t0 took
    t0=$(now)
    touch "$T/go"
    finish r
    grep -q "handed slot 1 over" "$T/r.err" || fail "$(cat "$T/r.err")"
    wait_until 10 grep -q "lost while waiting for a reply" "$T/w.err" || fail "$(cat "$T/w.err")"
    [ ! -e "$T/w.cmd.ready" ] || fail "w ran without its answer"
    finish w
    took=$(since "$t0")
    note "the asker cut off ran $took s after the release (lease 5 s)"
    one_after_other r w
    at_most "$took" 15
    no_lease_left "$n"
}

# SIGTERM to the first in line between its ask and the answer (the relay
# holds back what the broker sends it for 1.5 s from its ask): it does not
# end at once, which would leave the lease handed to it to block the slot
# for 40 s, but takes the answer, adopts, runs nothing and lets go.
@test "SIGTERM to an asker before the answer: it adopts, runs nothing, exits 143 and lets go; the next runs within seconds" {
    # The premise: SIGTERM lands while the asker waits for its answer
    # (ASK_WAIT, 1 s after its ask; the relay holds the answer back
    # 1.5 s). On a busy machine the signal can come after that second;
    # the asker has then stopped waiting, and runs nothing either. Such
    # a try is noted and made again, on a semaphore and relay of its own,
    # up to three times.
    local base=$n try t0 took r w v ran
    for try in 1 2 3; do
        n=$base-$try r=r$try w=w$try v=v$try
        rm -f "$T/go" "$T/relay.port"
        al create "$n" 1
        start_relay_holding amqplock.ask 1.5
        holder "$r"
        waiter "$w" --url "$RELAY_URL"
        waiter "$v"
        touch "$T/go"
        wait_until 10 grep -q "offered: asking" "$T/$w.err" || fail "$(cat "$T/$w.err")"
        t0=$(now) ran=
        kill -TERM "${PID[$w]}" 2>/dev/null || true
        wait_exit "${PID[$w]}" 10
        # a command started before the signal (its .ready is older): the
        # signal came too late to test anything
        if [ -e "$T/$w.cmd.ready" ] &&
            awk -v a="$(stat -c %.3Y "$T/$w.cmd.ready")" -v b="$t0" 'BEGIN { exit !(a < b) }'; then
            ran=1
        fi
        if [ -z "$ran" ]; then
            [ ! -e "$T/$w.cmd" ] || fail "$w ran its command after SIGTERM: $(cat "$T/$w.err")"
            [ "$rc" -eq 143 ] || fail "$w exited $rc: $(cat "$T/$w.err")"
            grep -q "slot 1 is ours, handed over" "$T/$w.err" && break
            grep -q "not handed over within 1 s" "$T/$w.err" || fail "$(cat "$T/$w.err")"
        fi
        # the signal came after the asker's second: it had stopped waiting
        # (not handed over, nothing run), or adopted and run its command.
        # Having stopped waiting, it left the lease that the holder had
        # handed it to run out (its 40 s: "an asker cut off before the
        # answer"), so v is not waited for: it is stopped, and the next
        # try has a semaphore of its own.
        note "try $try: SIGTERM came after the asker's second${ran:+ and its command}; again"
        finish "$r"
        kill -TERM "${PID[$v]}" 2>/dev/null || true
        wait_exit "${PID[$v]}" 10
        al destroy "$n" >/dev/null
        [ "$try" -lt 3 ] || fail "three times SIGTERM came after the ask's second: $(cat "$T/$w.err")"
    done
    finish "$r" "$v"
    took=$(since "$t0")
    note "$v ran $took s after SIGTERM to the asker (lease 40 s)"
    at_most "$took" 8
    one_after_other "$r" "$v"
    no_lease_left "$n"
}

@test "a broker restart in the middle of a hand-over: the adopter runs nothing before it, ends the adopted lease, and runs once after" {
    al create "$n" 1
    start_relay_stalling x-max-length
    # one lease length for both (40 s); the adopter hears nothing of the
    # broker (the relay) for longer than the broker takes to stop, however
    # busy the machine: neither its heartbeats (30 s) nor its replies (60
    # s) end its wait, only the broker's going
    holder r --heartbeat 1 --grace 1 --lease 40
    waiter w --url "$RELAY_URL" --rpc-timeout 60 --heartbeat 30 --grace 1 --lease 40
    touch "$T/go"
    finish r
    grep -q "handed slot 1 over" "$T/r.err" || fail "$(cat "$T/r.err")"
    wait_until 10 grep -q "adopting its lease" "$T/w.err" || fail "$(cat "$T/w.err")"
    local t0 back took
    t0=$(now)
    NODE_STOPPED=1
    "$H/renode.sh" stop "$AMQPLOCK_TEST_BROKER_DIR" >/dev/null
    # (checked while the broker is down: once it is back, the adopter
    # may well have claimed the slot anew and run)
    [ ! -e "$T/w.cmd.ready" ] || fail "the adopter ran before its answers"
    "$H/renode.sh" start "$AMQPLOCK_TEST_BROKER_DIR" >/dev/null
    NODE_STOPPED=
    back=$(now)
    finish w
    took=$(since "$back")
    note "the adopter ran once, $took s after the broker was back, $(since "$t0") s after its restart began (lease 40 s)"
    grep -q "slot 1 of $n was not handed over\|connecting again" "$T/w.err" || fail "$(cat "$T/w.err")"
    one_after_other r w
    # not after the lease ran out: it ended it on its next connection
    at_most "$took" 10
    no_lease_left "$n"
}

@test "kill -9 of an adopter mid-adoption (its answers held back): its keeper ends the adopted lease, the slot is free within seconds" {
    al create "$n" 1
    start_relay_stalling x-max-length
    holder r
    waiter w --url "$RELAY_URL" --rpc-timeout 10
    touch "$T/go"
    finish r
    wait_until 10 grep -q "adopting its lease" "$T/w.err" || fail "$(cat "$T/w.err")"
    local t0 took
    t0=$(now)
    kill -KILL "${PID[w]}"
    wait_until 10 none_held "$n" || fail "still held: $(al --json status --no-names "$n")"
    took=$(since "$t0")
    note "slot free $took s after kill -9 of an adopter (lease 40 s)"
    at_most "$took" 5
    [ ! -e "$T/w.cmd" ] || fail "the adopter's command ran"
    no_lease_left "$n"
}
