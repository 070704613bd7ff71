#!/usr/bin/env bats
# The supervisor cannot be fooled: every process of the job is found,
# signalled or waited for, whatever /proc says of it, whoever owns it, and
# whatever is done to amqplock and its keeper by name. A job whose main
# thread has exited (a zombie leader that runs on), a setuid-root job that
# amqplock, run as nobody, may not signal, pkill and killall of amqplock,
# a claim whose answers are read only after a long stop, Ctrl-Z of a job
# whose first process has exited, and signals that amqplock used to die
# of. In each, a second command on the slot starts only after the first
# job's last line (tools/overlaps.pl over the records of
# tools/leasecmd.pl and tools/oddjob.c).
#
# Needs cc, perl (core modules), python3, setpriv, setsid, pkill and, where
# it is installed, killall; root, to install a setuid-root program. Helper
# programs: tests/tools/ (oddjob.c, built here; leasecmd.pl, overlaps.pl,
# claimstop.pl, pty.py).
#
# It signals amqplock by name (killall, pkill -f). tests/run.sh runs it so:
# run.sh: processes of its own

bats_require_minimum_version 1.5.0
load lib/helper

setup_file() {
    # A directory nobody may enter, for the setuid-root job and the copy
    # of amqplock that nobody runs (the checkout may be out of its reach).
    ODD=$(mktemp -d "${TMPDIR:-/tmp}/oddjob.XXXXXX")
    chmod 755 "$ODD"
    cc -O -pthread -o "$ODD/oddjob" "$BATS_TEST_DIRNAME/tools/oddjob.c"
    cp "$ODD/oddjob" "$ODD/rootjob"
    chown root:root "$ODD/rootjob"
    chmod 4755 "$ODD/rootjob"
    cp "$AMQPLOCK_BIN" "$ODD/amqplock"
    export ODD
}

teardown_file() {
    rm -rf "$ODD"
}

setup() {
    test_init
    PTY_SID=
}

teardown() { test_cleanup; }

# --- helpers -------------------------------------------------------------------------

# Short leases: a second of heartbeat and of grace, a lease of 5 s: a job
# left running shows beside the next one within seconds.
SHORT=(--heartbeat 1)
SHORT_HOLD=(--grace 1 --lease 5)

# odd_hold TAG KIND SECS ARGS...: `amqplock ARGS -- oddjob KIND $T/TAG.cmd
# SECS` in the background (bg); ARGS end with hold's semaphore name.
# Returns once the job runs as it should; its pid in JOB, the hold's in BG.
odd_hold() {
    local tag=$1 kind=$2 secs=$3
    shift 3
    bg "$tag" "$@" -- "$ODD/oddjob" "$kind" "$T/$tag.cmd" "$secs"
    job_ready "$tag"
}

# job_ready TAG: the job of TAG runs (oddjob wrote its pid); JOB
job_ready() {
    wait_until 15 test -s "$T/$1.cmd.ready" || fail "the job did not start: $(cat "$T/$1.err")"
    JOB=$(cat "$T/$1.cmd.ready")
}

# as_nobody TAG ARGS...: amqplock ARGS run by the user nobody, in the
# background as bg does; pid in BG.
as_nobody() {
    local tag=$1
    shift
    env --default-signal=INT,QUIT setpriv --reuid=65534 --regid=65534 --clear-groups \
        "$ODD/amqplock" "$@" >"$T/$tag.out" 2>"$T/$tag.err" </dev/null 3>&- &
    BG=$!
    PIDS+=("$BG")
}

# in_new_session TAG ARGS...: amqplock ARGS in the background as bg does, as
# the leader of a session of its own (its pid is the session's id, for
# pkill -s); pid in BG.
in_new_session() {
    local tag=$1
    shift
    env --default-signal=INT,QUIT setsid "$AMQPLOCK_BIN" "$@" \
        >"$T/$tag.out" 2>"$T/$tag.err" </dev/null 3>&- &
    BG=$!
    PIDS+=("$BG")
}

# next_hold TAG SECS: `hold -w 40 $n -- leasecmd.pl $T/TAG.cmd SECS`,
# waited for: it must get the slot and exit 0.
next_hold() {
    local t0
    t0=$(now)
    run -0 --separate-stderr timeout 60 "$AMQPLOCK_BIN" hold -w 40 "$n" -- \
        perl "$H/leasecmd.pl" "$T/$1.cmd" "$2"
    NEXT_WAITED=$(since "$t0")
}

# next_hold_bg TAG SECS: next_hold in the background, returns once its
# command runs; pid in NEXT.
next_hold_bg() {
    bg "$1" hold -w 40 "$n" -- perl "$H/leasecmd.pl" "$T/$1.cmd" "$2"
    NEXT=$BG
    wait_until 20 test -e "$T/$1.cmd.ready" || fail "the next hold got no slot: $(cat "$T/$1.err")"
}

# handed_over FIRST SECOND: the command of SECOND started after the last
# line of FIRST's (overlaps.pl); MARGIN: the time between them.
handed_over() {
    perl "$H/overlaps.pl" "$T/$1.cmd" "$T/$2.cmd" >"$T/runs"
    MARGIN=$(awk '$1 == "handover" { print $5 }' "$T/runs")
    [ -n "$MARGIN" ] || fail "not two commands on one slot: $(cat "$T/runs")"
    awk -v m="$MARGIN" 'BEGIN { exit !(m >= 0) }' ||
        fail "$2 started $MARGIN s before $1's last line: $(cat "$T/runs")"
}

# ended_itself TAG: TAG's command wrote its end line (it was not killed)
ended_itself() { [ "$(tail -n 1 "$T/$1.cmd" | cut -d' ' -f1)" = end ]; }
# lines TAG: how many lines TAG's command has written
lines() { wc -l <"$T/$1.cmd"; }

# --- a job whose main thread has exited ------------------------------------------

@test "a zombie leader whose thread runs on: kill -9 of amqplock ends it before its slot is free" {
    al create "$n" 1
    odd_hold j1 zombie 30 "${SHORT[@]}" hold "${SHORT_HOLD[@]}" "$n"
    local h=$BG job=$JOB
    [ "$(state "$job")" = Z ] || fail "the job's leader is $(state "$job"), not a zombie"
    kill -KILL "$h"
    next_hold j2 1
    wait_until 5 ended "$job" || fail "the job still runs"
    handed_over j1 j2
    note "the next hold got the slot after $NEXT_WAITED s; its command started $MARGIN s after the job's last line"
    at_most "$NEXT_WAITED" 3
}

@test "a zombie leader whose thread runs on: remove signals it; wait returns once it has ended, not before" {
    al create "$n" 1
    odd_hold j1 zombie 30 hold --grace 1 "$n"
    local h=$BG job=$JOB
    al remove "$n" >/dev/null
    run -0 al wait -w 20 "$n"
    ended "$job" || fail "wait returned while the job runs"
    wait_exit "$h" 10
    [ "$rc" -eq 75 ] || fail "hold exited $rc: $(cat "$T/j1.err")"
    al max "$n" 1 >/dev/null # resumed: remove of the last slot paused it
    next_hold j2 1
    handed_over j1 j2
    note "the job ended on the lost slot's TERM; the next command started $MARGIN s after its last line"
}

@test "a zombie leader whose thread runs on: kill -STOP of amqplock stops it; kill -CONT lets it end" {
    al create "$n" 1
    odd_hold j1 zombie 6 hold "$n"
    local h=$BG before
    kill -STOP "$h"
    sleep 0.6
    before=$(lines j1)
    sleep 1
    [ "$(lines j1)" -eq "$before" ] || fail "the job ran on while amqplock was stopped: $before -> $(lines j1) lines"
    kill -CONT "$h"
    wait_exit "$h" 20
    [ "$rc" -eq 0 ] || fail "hold exited $rc: $(cat "$T/j1.err")"
    ended_itself j1 || fail "the job did not end by itself: $(tail -n 2 "$T/j1.cmd")"
}

@test "kill -STOP of amqplock, then kill -CONT of the job by hand: the keeper stops it again" {
    al create "$n" 1
    odd_hold j1 zombie 30 hold "$n"
    local h=$BG job=$JOB before
    kill -STOP "$h"
    # (its leader shows Z whatever the thread does: the record tells)
    sleep 0.6
    before=$(lines j1)
    sleep 0.5
    [ "$(lines j1)" -eq "$before" ] || fail "the job did not stop with amqplock"
    kill -CONT "$job"
    sleep 0.5
    before=$(lines j1)
    sleep 1
    [ "$(lines j1)" -eq "$before" ] || fail "the job ran on after a SIGCONT by hand: $before -> $(lines j1) lines"
    kill -CONT "$h"
    kill -TERM "$h"
    wait_exit "$h" 10
}

# --- a job amqplock may not signal -----------------------------------------------

@test "a setuid-root job of a hold run by nobody: kill -9 of amqplock keeps its slot until the job has ended" {
    al create "$n" 1
    # (a 20 s job: a 5 s lease nobody renews may last 10 s on a broker
    # that checks a quorum queue's expiry now and then)
    as_nobody j1 "${SHORT[@]}" hold "${SHORT_HOLD[@]}" "$n" -- "$ODD/rootjob" root "$T/j1.cmd" 20
    local h=$BG
    job_ready j1
    [ "$(stat -c %u "/proc/$JOB")" -eq 0 ] || fail "the job does not run as root"
    [ "$(stat -c %u "/proc/$h")" -eq 65534 ] || fail "amqplock does not run as nobody"
    kill -KILL "$h"
    next_hold j2 1
    handed_over j1 j2
    ended_itself j1 || fail "the job did not end by itself: $(tail -n 2 "$T/j1.cmd")"
    note "the next hold waited $NEXT_WAITED s for the 20 s job; its command started $MARGIN s after the job's last line"
    at_most "$MARGIN" 3
}

@test "a setuid-root job of a hold run by nobody: remove says once that it cannot be signalled; hold and wait wait for it" {
    al create "$n" 1
    as_nobody j1 hold --grace 1 "$n" -- "$ODD/rootjob" root "$T/j1.cmd" 6
    local h=$BG
    job_ready j1
    al remove "$n" >/dev/null
    run -0 al wait -w 30 "$n"
    ended_itself j1 || fail "wait returned while the job runs: $(tail -n 1 "$T/j1.cmd")"
    wait_exit "$h" 10
    [ "$rc" -eq 75 ] || fail "hold exited $rc: $(cat "$T/j1.err")"
    [ "$(grep -c 'cannot signal' "$T/j1.err")" -eq 1 ] || fail "stderr: $(cat "$T/j1.err")"
    grep -qEx "amqplock: cannot signal process $JOB \(rootjob\) of the command \(.+\); slot 1 of $n stays held until it exits" \
        "$T/j1.err" || fail "stderr: $(cat "$T/j1.err")"
    al max "$n" 1 >/dev/null # resumed: remove of the last slot paused it
    next_hold j2 1
    handed_over j1 j2
}

# --- amqplock stopped or killed by name --------------------------------------------

# named_job_hold TAG: `hold $n -- sh -c 'job.pl FILE 30 & wait'` with short
# leases, in a session of its own (in_new_session), where job.pl is a copy
# of leasecmd.pl in $T: neither command line holds "amqplock", as a
# pkill -f amqplock would find it. Returns once the job runs; pid in BG.
named_job_hold() {
    [[ $T != *amqplock* ]] || skip "the test's directory $T holds amqplock"
    cp "$H/leasecmd.pl" "$T/job.pl"
    in_new_session "$1" "${SHORT[@]}" hold "${SHORT_HOLD[@]}" "$n" -- \
        sh -c "perl '$T/job.pl' '$T/$1.cmd' 30 & wait"
    wait_until 15 test -e "$T/$1.cmd.ready" || fail "the job did not start: $(cat "$T/$1.err")"
}

@test "pkill -STOP amqplock, and its -f form: the job stops with amqplock; the next holder runs after it" {
    al create "$n" 1
    local form h
    for form in plain -f; do
        rm -f "$T"/j1.cmd* "$T"/j2.cmd*
        named_job_hold j1
        h=$BG
        if [ "$form" = -f ]; then pkill -STOP -f -s "$h" amqplock; else pkill -STOP -s "$h" amqplock; fi
        wait_until 2 eval '[ "$(state "$h")" = T ]' || fail "amqplock is not stopped"
        # its lease runs out: the next hold gets the slot
        next_hold j2 1
        # (not pkill -CONT -s: that would continue the job too)
        kill -CONT "$h"
        wait_exit "$h" 10
        [ "$rc" -eq 75 ] || fail "$form: hold exited $rc: $(cat "$T/j1.err")"
        handed_over j1 j2
        note "pkill -STOP $form: the next hold got the slot after $NEXT_WAITED s, $MARGIN s after the stopped job's last line"
    done
}

@test "pkill -9 amqplock, its -f form and killall -9 amqplock: the keeper ends the job before the slot is free" {
    al create "$n" 1
    local how h forms=(pkill "pkill -f")
    command -v killall >/dev/null && forms+=(killall)
    for how in "${forms[@]}"; do
        rm -f "$T"/j1.cmd* "$T"/j2.cmd*
        named_job_hold j1
        h=$BG
        case $how in
        pkill) pkill -KILL -s "$h" amqplock ;;
        "pkill -f") pkill -KILL -f -s "$h" amqplock ;;
        killall) killall -KILL amqplock ;;
        esac
        next_hold j2 1
        handed_over j1 j2
        note "$how -9: the next hold got the slot after $NEXT_WAITED s, $MARGIN s after the job's last line"
        at_most "$NEXT_WAITED" 3
    done
}

# --- a claim answered late ------------------------------------------------------------

# A hold waits for a slot; the moment its claim is sent (its keeper is
# forked then) claimstop.pl stops it, before it reads the answers. Its
# connection, through a relay, is then cut on the broker's side (the
# broker drops the holder queue with it) while the answers wait in the
# hold's socket, the claim's lease runs out (5 s) and another hold takes
# the slot. Continued, the first reads the old answers: they are too late
# to count, and its command must not start beside the other. A stop that
# lands after the command started misses the window; up to 6 tries, until
# one lands.
@test "a claim whose answers are read only after a long stop is void: the command does not start beside the next holder" {
    al create "$n" 1
    start_relay
    local try hit=0 h0 h1 keeper
    for try in 1 2 3 4 5 6; do
        rm -f "$T"/j*.cmd* "$T/go0" "$T/stopped"
        bg h0 hold "$n" -- perl "$H/leasecmd.pl" "$T/j0.cmd" 30 0 "$T/go0"
        h0=$BG
        wait_until 10 test -e "$T/j0.cmd.ready" || fail "the first holder did not start: $(cat "$T/h0.err")"
        # (-v says when the command starts: it may be killed before it
        # could write a line)
        bg h1 -v --url "$RELAY_URL" "${SHORT[@]}" hold --grace 0.5 --lease 5 -w 60 "$n" -- \
            perl "$H/leasecmd.pl" "$T/j1.cmd" 2
        h1=$BG
        wait_until 10 connected "$h1" || fail "the waiter did not connect"
        sleep 0.5
        perl "$H/claimstop.pl" "$h1" "$T/stopped" &
        keep "$!"
        touch "$T/go0"
        wait_until 10 test -s "$T/stopped" || fail "the waiter never claimed: $(cat "$T/h1.err")"
        wait_exit "$h0" 10
        sleep 0.3
        # The stop came after amqplock had told its keeper to start the
        # command (it has a child): a miss. (amqplock, stopped, says
        # nothing until continued.)
        keeper=$(pgrep -P "$h1" || true)
        if [ -z "$keeper" ] || [ -n "$(pgrep -P "$keeper" || true)" ]; then
            kill -CONT "$h1"
            wait_exit "$h1" 30
            continue
        fi
        hit=$try
        kill -USR1 "$RELAY"
        next_hold_bg j2 4
        kill -CONT "$h1"
        sleep 1.5
        ! grep -q 'command started' "$T/h1.err" ||
            fail "the first hold started its command on a claim answered late: $(cat "$T/h1.err")"
        wait_exit "$NEXT" 30
        [ "$rc" -eq 0 ] || fail "the next hold exited $rc: $(cat "$T/j2.err")"
        wait_exit "$h1" 30
        if [ "$rc" -eq 75 ] && grep -q "holding slot 1 of 1" "$T/h1.err"; then
            # The stop came once the answers had been read in time, before
            # the keeper was told to start the command: either the keeper
            # will not start it that late, or amqplock, continued, checks
            # the slot first over the cut connection and loses it when the
            # lease runs out (CI, once in many runs each). Safe, the
            # command never started, but another window: tried again.
            ! grep -q 'command started' "$T/h1.err" &&
                grep -q -e "the command was not started: its claim came too late" \
                    -e "lost slot 1 of $n: could not get back to the broker before the lease ran out" \
                    "$T/h1.err" || fail "the first hold exited 75: $(cat "$T/h1.err")"
            hit=0
            continue
        fi
        # the first one then waited its turn
        [ "$rc" -eq 0 ] || fail "the first hold exited $rc: $(cat "$T/h1.err")"
        handed_over j2 j1
        break
    done
    [ "$hit" -gt 0 ] || fail "the stop never came between a claim and its answers in $try tries"
    note "the stop landed in the window at try $hit; the stopped hold ran its command $MARGIN s after the next one's"
}

# --- the terminal ------------------------------------------------------------------------

@test "Ctrl-Z of a job whose first process has exited stops what remains and gives the prompt back; fg, then Ctrl-C ends it" {
    al create "$n" 1
    new_mark
    local m=$MARK al leftover
    # sh starts `sleep &` with SIGINT ignored, which Ctrl-C would then not
    # end: the first leftover takes SIGINT back
    printf '%s\n' "perl -e '\$SIG{INT} = \"DEFAULT\"; exec \"sleep\", @ARGV' \"\$1\" &" 'exit 0' >"$T/leave.sh"
    pty_play \
        line "'$AMQPLOCK_BIN' hold $n -- sh '$T/leave.sh' $m" \
        expect "amqplock: waiting for 1 remaining process: sleep \\(pid [0-9]+\\)" \
        key '^Z' \
        expect 'Stopped' \
        prompt \
        waitfile "$T/go.fg" \
        line fg \
        waitfile "$T/go.c" \
        key '^C' \
        prompt \
        line 'echo "hold=$?"' \
        expect '^hold=0$' \
        line "'$AMQPLOCK_BIN' hold $n -- sh -c 'sleep $m & exit 0'" \
        expect "amqplock: waiting for 1 remaining process: sleep" \
        key '^Z' \
        expect 'Stopped' \
        prompt \
        line 'kill %1' \
        prompt \
        waitfile "$T/go.done" \
        line true \
        expect 'Done' \
        prompt
    wait_until 15 seen Stopped || fail "the shell saw no stop: $(cat "$T/pty.log")"
    al=$(in_session amqplock)
    leftover=$(marker_pids "$m")
    wait_until 5 eval '[ "$(state "$al")" = T ] && [ "$(state "$leftover")" = T ]' ||
        fail "not stopped: amqplock $(state "$al"), sleep $(state "$leftover")"
    slot_held "$n" 1
    touch "$T/go.fg"
    wait_until 5 eval '[ "$(state "$leftover")" = S ]' || fail "fg did not resume sleep: $(state "$leftover")"
    touch "$T/go.c"
    # the second: kill %1 (TERM, then CONT, from the shell) ends it
    wait_until 30 seen 'kill %1' || fail "the second hold did not stop: $(cat "$T/pty.log")"
    wait_until 20 eval '[ -z "$(in_session amqplock)" ]' ||
        fail "kill %1 did not end the second hold: $(cat "$T/pty.log")"
    touch "$T/go.done"
    pty_done 60
    no_marker "$m" || fail "sleep survived: $(cat "$T/pty.log")"
    slot_free "$n" 1
}

@test "TERM to amqplock ends a job part of which was stopped by hand: the stopped process is continued to take it" {
    al create "$n" 1
    new_mark
    local m=$MARK h leftover
    bg h hold "$n" -- sh -c "sleep $m & wait"
    h=$BG
    wait_until 10 has_marker "$m" || fail "no job: $(cat "$T/h.err")"
    leftover=$(marker_pids "$m")
    kill -STOP "$leftover"
    wait_until 5 eval '[ "$(state "$leftover")" = T ]' || fail "sleep did not stop"
    kill -TERM "$h"
    wait_exit "$h" 10
    no_marker "$m" || fail "the stopped sleep survived"
    slot_free "$n" 1
}

# --- signals amqplock used to die of ------------------------------------------------------

@test "ALRM, PIPE, VTALRM, XCPU, PROF or RTMIN to a holding acquire release its slot at once, as TERM does" {
    al create "$n" 1
    local sig a slot
    for sig in ALRM PIPE VTALRM XCPU PROF RTMIN; do
        bg a acquire "$n"
        a=$BG
        wait_until 10 has_line "$T/a.out" '[0-9]+' || fail "acquire printed no slot: $(cat "$T/a.err")"
        kill -s "$sig" "$a"
        wait_exit "$a" 5
        [ "$rc" -eq 0 ] || fail "SIG$sig: acquire exited $rc: $(cat "$T/a.err")"
        wait_until 1 slot_free "$n" 1 || fail "SIG$sig: slot 1 is not free: $(al status "$n")"
    done
    # waiting: ended at once with 128+N and the words of a TERM
    bg a acquire "$n"
    a=$BG
    wait_until 10 has_line "$T/a.out" '[0-9]+' || fail "acquire printed no slot: $(cat "$T/a.err")"
    bg h hold "$n" -- true
    wait_until 10 connected "$BG" || fail "hold did not connect"
    sleep 0.5
    kill -ALRM "$BG"
    wait_exit "$BG" 5
    [ "$rc" -eq 142 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    [ "$(cat "$T/h.err")" = "amqplock: interrupted by SIGALRM before a slot of $n was held; nothing was run" ] ||
        fail "stderr: $(cat "$T/h.err")"
}
