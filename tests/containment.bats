#!/usr/bin/env bats
# Containment: whatever CMD does, it never runs without the slot. Job
# control at a real terminal (a pseudo-terminal driven by tests/tools/pty.py)
# and without one, amqplock stopped with SIGSTOP, descendants that leave
# CMD's process group or session (setsid, timeout), holder queues deleted
# or expired behind amqplock's back, dispositions inherited from the
# caller, signals before the slot is held, and job control inside a
# contention loop of 20 holds.
#
# Needs python3, perl (core modules), jq, pgrep, setsid and timeout.
# Helper programs: tests/tools/ (pty.py, ticker.pl, daemon.pl, trapper.pl,
# victim.sh, holdq.pl). Measured times go to the TAP output as "# ..."
# lines.

bats_require_minimum_version 1.5.0
load lib/helper

setup() {
    test_init
    PTY_SID=
    POLICY=
}

teardown() {
    test_cleanup
    # CMDs that left the terminal's session
    pkill -KILL -f -- "ticker.pl $T/" 2>/dev/null || true
    pkill -KILL -f -- "daemon.pl $T/" 2>/dev/null || true
}

# no_queue NAME: the broker has no queue NAME
no_queue() { [ -z "$(queues_like "$1")" ]; }

# states PID...: "pid:state ..." for a message
states() {
    local p
    for p in "$@"; do printf '%s:%s ' "$p" "$(state "$p")"; done
}
# stopped PID...: every PID is stopped (state T)
stopped() {
    local p
    for p in "$@"; do [ "$(state "$p")" = T ] || return 1; done
}
# going PID...: every PID exists and none is stopped or a zombie
going() {
    local p s
    for p in "$@"; do
        s=$(state "$p")
        [ -n "$s" ] && [ "$s" != T ] && [ "$s" != Z ] || return 1
    done
}

# --- tests/tools/ticker.pl: a CMD of three processes that count ----------------

# ticks DIR [ROLE]: how many ticks ticker.pl DIR wrote (of ROLE only)
ticks() {
    if [ -n "${2:-}" ]; then
        grep -c "^$2 " "$1/ticks" 2>/dev/null || true
    else
        if [ -e "$1/ticks" ]; then wc -l <"$1/ticks"; else echo 0; fi
    fi
}
# ticker_pids DIR: its main process, its child and its setsid daemon
ticker_pids() { cat "$1/pid.main" "$1/pid.child" "$1/pid.daemon"; }
# ticking DIR: ticker.pl DIR has started and ticked 3 times
ticking() { [ -e "$1/ready" ] && [ "$(ticks "$1" main)" -ge 3 ]; }
# frozen DIR SECS: no tick for SECS seconds
frozen() {
    local before
    before=$(ticks "$1")
    sleep "$2"
    [ "$(ticks "$1")" -eq "$before" ] || fail "CMD ran on while stopped ($before -> $(ticks "$1") ticks)"
}
# ticked_to_end DIR COUNT: each of ticker.pl DIR's processes ticked COUNT
# times, and none got a signal
ticked_to_end() {
    local role
    for role in main child daemon; do
        [ "$(ticks "$1" "$role")" -eq "$2" ] || fail "$role stopped at $(ticks "$1" "$role") ticks"
    done
    [ ! -e "$1/signals" ] || fail "CMD got $(cat "$1/signals")"
}

# ticker_hold START DIR COUNT [OPTIONS...]: `amqplock hold OPTIONS $n --
# ticker.pl DIR COUNT` (DIR made here), started with START (bg or bg_job)
# and tag h; returns once it ticks. The hold's pid in BG, the ticker's
# three in TICKER.
ticker_hold() {
    local start=$1 d=$2 count=$3
    shift 3
    mkdir "$d"
    "$start" h hold "$@" "$n" -- perl "$H/ticker.pl" "$d" "$count"
    wait_until 20 ticking "$d" || fail "CMD does not tick: $(cat "$T/h.err")"
    TICKER=$(ticker_pids "$d")
}

# cont_to_end HOLD DIR COUNT: kill -CONT of HOLD (tag h, stopped with its
# ticker.pl DIR COUNT); HOLD and the ticker go on within 5 s, and HOLD
# exits 0 within 30 s, the ticker ticked to its end (ticked_to_end).
cont_to_end() {
    local h=$1 pids t0
    pids=$(ticker_pids "$2")
    t0=$(now)
    kill -CONT "$h"
    # shellcheck disable=SC2086
    wait_until 5 going "$h" $pids || fail "not all going: $(states "$h" $pids)"
    note "going again $(since "$t0") s after kill -CONT"
    wait_exit "$h" 30
    [ "$rc" -eq 0 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    ticked_to_end "$2" "$3"
}

# take_with_n DIR SECS: `hold -n $n -- ticker.pl DIR 0` (DIR made here)
# again and again (each exits 1 while the slot is held) until one gets the
# slot, within SECS; its pid in BG.
take_with_n() {
    local d=$1 t0
    mkdir "$d"
    t0=$(now)
    while :; do
        bg h2 hold -n "$n" -- perl "$H/ticker.pl" "$d" 0
        wait_until 10 eval "test -e '$d/ready' || ended $BG" || fail "hold -n neither got nor gave up"
        [ -e "$d/ready" ] && return 0
        wait_exit "$BG" 1
        [ "$rc" -eq 1 ] || fail "hold -n exited $rc: $(cat "$T/h2.err")"
        at_most "$(since "$t0")" "$2"
        sleep 0.2
    done
}

# stop_ticker SIG HOLD: kill -SIG of HOLD (of ticker_hold); HOLD and the
# ticker's processes are stopped within 5 s. Sets STOPPED_IN (seconds).
stop_ticker() {
    local t0
    t0=$(now)
    kill -s "$1" "$2"
    # shellcheck disable=SC2086
    wait_until 5 stopped "$2" $TICKER || fail "not all stopped: $(states "$2" $TICKER)"
    STOPPED_IN=$(since "$t0")
}

# second_takes_over DIR DIR2 PID...: while the first hold, of ticker.pl
# DIR, is stopped (PIDs: it and the ticker's processes), another hold -n
# (take_with_n DIR2) gets the slot within 20 s, once the broker has
# dropped the first (2.5-3 heartbeats); the stop lasts 5 s at least, and
# the PIDs stay stopped. Sets BEFORE (the first ticker's ticks), TOOK
# (when in the stop the second got the slot) and H2 (the second's pid).
second_takes_over() {
    local d=$1 d2=$2 t0
    shift 2
    BEFORE=$(ticks "$d")
    t0=$(now)
    take_with_n "$d2" 20
    H2=$BG
    TOOK=$(since "$t0")
    while awk -v t="$(since "$t0")" 'BEGIN { exit !(t < 5) }'; do sleep 0.1; done
    stopped "$@" || fail "the first job did not stay stopped: $(states "$@")"
}

# first_never_ran DIR DIR2 SECS: after second_takes_over, the first hold's
# ticker.pl DIR never ran again: not one tick since BEFORE, not even its
# TERM handler, and its processes (TICKER) are gone within SECS. The
# second (H2, ticker.pl DIR2) was not disturbed, and exits 0 on TERM.
first_never_ran() {
    local d=$1 p
    [ "$(ticks "$d")" -eq "$BEFORE" ] ||
        fail "the first CMD ran again without its slot: $BEFORE -> $(ticks "$d") ticks"
    [ ! -e "$d/signals" ] || fail "the first CMD ran its TERM handler: $(cat "$d/signals")"
    for p in $TICKER; do
        wait_until "$3" ended "$p" || fail "process $p of the first CMD survived"
    done
    running "$H2"
    ticking "$2"
    kill -TERM "$H2"
    wait_exit "$H2" 10
    [ "$rc" -eq 0 ] || fail "the second hold exited $rc: $(cat "$T/h2.err")"
}

# kill9_then_free HOLD SLOT PID: kill -9 of HOLD; the slot must not be free
# while PID (a descendant) still runs, PID must be gone within a second and
# the slot free within 5 s. Sets GONE_IN and FREE_IN (seconds).
kill9_then_free() {
    local h=$1 slot=$2 victim=$3 t0 poller
    rm -f "$T/gone_in"
    t0=$(now)
    # times the victim's end closely, whatever a status call costs
    (
        while running "$victim" && awk -v t="$(since "$t0")" 'BEGIN { exit !(t < 10) }'; do
            sleep 0.02
        done
        since "$t0" >"$T/gone_in"
    ) 3>&- &
    poller=$!
    PIDS+=("$poller")
    kill -KILL "$h"
    FREE_IN=
    while [ -z "$FREE_IN" ]; do
        if slot_free "$n" "$slot"; then
            FREE_IN=$(since "$t0")
            ended "$victim" || fail "slot $slot free while descendant $victim still runs"
        fi
        at_most "$(since "$t0")" 5
    done
    wait_until 10 test -s "$T/gone_in" || fail "no time"
    GONE_IN=$(cat "$T/gone_in")
    at_most "$GONE_IN" 1
}

# --- tests/tools/daemon.pl: a CMD that leaves a setsid daemon behind -------------

# daemon_hold DIR: `hold $n -- daemon.pl DIR` in the background (tag h; DIR
# made here); returns once the daemon runs and CMD has exited. The hold's
# pid in BG, the daemon's in DAEMON.
daemon_hold() {
    mkdir "$1"
    bg h hold "$n" -- perl "$H/daemon.pl" "$1"
    wait_until 10 test -s "$1/daemon.pid" || fail "no daemon: $(cat "$T/h.err")"
    DAEMON=$(cat "$1/daemon.pid")
    wait_until 5 gone "$(cat "$1/cmd.pid")" || fail "CMD still runs"
}

# daemon_termed DIR HOLD RC SECS: HOLD (of daemon_hold DIR) exits RC within
# SECS, its daemon got TERM and nothing else, and is gone within 2 s.
daemon_termed() {
    wait_exit "$2" "$4"
    [ "$rc" -eq "$3" ] || fail "hold exited $rc: $(cat "$T/h.err")"
    [ "$(cat "$1/signals")" = TERM ] || fail "the daemon got: $(cat "$1/signals")"
    wait_until 2 ended "$DAEMON" || fail "the daemon survived"
}

# --- the terminal: tests/tools/pty.py (helper.bash) -----------------------------------

# ctrl_z_ticker DIR LINE STEP...: pty_play of LINE (a command line that
# runs ticker.pl DIR; DIR made here), Ctrl-Z once it ticks, then `fg` once
# the test touches $T/go.fg, then STEPs. Returns once the shell said
# Stopped and amqplock and the ticker's processes are stopped; amqplock's
# pid in AL, the ticker's in TICKER.
ctrl_z_ticker() {
    local d=$1 line=$2
    shift 2
    mkdir "$d"
    pty_play \
        line "$line" \
        expect '^ticker: ticking$' \
        waitfile "$T/go.stop" \
        key '^Z' \
        expect 'Stopped' \
        prompt \
        waitfile "$T/go.fg" \
        line fg \
        "$@"
    wait_until 20 ticking "$d" || fail "CMD does not tick: $(cat "$T/pty.log")"
    touch "$T/go.stop"
    wait_until 10 seen Stopped || fail "the shell saw no stop: $(cat "$T/pty.log")"
    AL=$(in_session amqplock)
    TICKER=$(ticker_pids "$d")
    # shellcheck disable=SC2086
    wait_until 5 stopped "$AL" $TICKER || fail "not all stopped: $(states "$AL" $TICKER)"
}

# --- the process tree ----------------------------------------------------------------

@test "process tree: amqplock, then the keeper () in a group of its own, then CMD in another" {
    al create "$n" 1
    local d=$T/tk
    ticker_hold bg "$d" 0
    local h=$BG
    local keeper cmd daemon
    keeper=$(pgrep -P "$h")
    [ "$(wc -w <<<"$keeper")" -eq 1 ] || fail "amqplock's children: $keeper"
    [ "$(cat "/proc/$keeper/comm")" = "$KEEPER" ]
    [ "$(proc_field "$keeper" 5)" -eq "$keeper" ] || fail "the keeper is in group $(proc_field "$keeper" 5)"
    [ "$(proc_field "$keeper" 6)" -eq "$(proc_field "$h" 6)" ] || fail "the keeper left amqplock's session"
    cmd=$(cat "$d/pid.main")
    [ "$(proc_field "$cmd" 4)" -eq "$keeper" ] || fail "CMD's parent is $(proc_field "$cmd" 4), not the keeper"
    [ "$(proc_field "$cmd" 5)" -eq "$cmd" ] || fail "CMD is in group $(proc_field "$cmd" 5)"
    [ "$(proc_field "$(cat "$d/pid.child")" 5)" -eq "$cmd" ]
    daemon=$(cat "$d/pid.daemon")
    [ "$(proc_field "$daemon" 6)" -eq "$daemon" ] || fail "the daemon is not in a session of its own"
    # TERM to amqplock reaches every process of CMD, the daemon too
    kill -TERM "$h"
    wait_exit "$h" 10
    [ "$rc" -eq 0 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    [ "$(sort "$d/signals" | paste -sd' ')" = "child TERM daemon TERM main TERM" ] ||
        fail "signals: $(cat "$d/signals")"
    # (a zombie for a moment, if amqplock exited first)
    wait_until 2 ended "$keeper" || fail "the keeper survived"
    slot_free "$n" 1
}

# --- job control at a terminal ----------------------------------------------------------

@test "Ctrl-Z at a terminal stops CMD and amqplock, the shell says Stopped; fg resumes CMD to its end, exit 0" {
    al create "$n" 1
    local d=$T/tk
    ctrl_z_ticker "$d" "'$AMQPLOCK_BIN' hold $n -- perl '$H/ticker.pl' '$d' 40" \
        prompt \
        line 'echo "hold=$?"' \
        expect '^hold=0$'
    local keeper
    keeper=$(in_session "$KEEPER")
    [ "$(state "$keeper")" != T ] || fail "the keeper is stopped too"
    frozen "$d" 1
    slot_held "$n" 1
    touch "$T/go.fg"
    pty_done 40
    ticked_to_end "$d" 40
    slot_free "$n" 1
}

@test "without a lease, a 5 s Ctrl-Z with --heartbeat 1: another hold -n gets the slot; after fg the first CMD never runs again, exit 75" {
    al create "$n" 1
    local d=$T/tk d2=$T/tk2
    ctrl_z_ticker "$d" "'$AMQPLOCK_BIN' --heartbeat 1 hold --lease 0 $n -- perl '$H/ticker.pl' '$d' 0" \
        expect "^amqplock: lost slot 1 of $n: " \
        prompt \
        line 'echo "hold=$?"' \
        expect '^hold=75$'
    # shellcheck disable=SC2086
    second_takes_over "$d" "$d2" "$AL" $TICKER
    touch "$T/go.fg"
    pty_done 30
    note "hold -n got the slot $TOOK s into the stop (--heartbeat 1); after fg: $(grep -m1 'lost slot' "$T/pty.log")"
    first_never_ran "$d" "$d2" 3
}

@test "Ctrl-C and Ctrl-\\ at a terminal reach an interactive CMD themselves: exit 130 and 131, slot released" {
    al create "$n" 1
    printf '%s\n' 'echo waiting' 'read x' 'echo "got $x"' >"$T/reader.sh"
    # (-v: amqplock's lines may be split by CMD's, hence 'waiting$')
    pty_play \
        line "'$AMQPLOCK_BIN' -v hold $n -- sh '$T/reader.sh'" \
        expect 'waiting$' \
        key '^C' \
        prompt \
        line 'echo "hold=$?"' \
        expect '^hold=130$' \
        line "'$AMQPLOCK_BIN' -v hold $n -- sh '$T/reader.sh'" \
        expect 'waiting$' \
        key '^\' \
        prompt \
        line 'echo "hold=$?"' \
        expect '^hold=131$'
    pty_done 60
    # the terminal sent them to CMD's group, not to amqplock's
    ! grep -q 'passing SIG' "$T/pty.out" || fail "amqplock got the signal: $(cat "$T/pty.out")"
    slot_free "$n" 1
}

@test "CMD reads a line typed at the terminal: as a job of its own, and inside a pipeline" {
    al create "$n" 1
    printf '%s\n' 'echo waiting' 'read x' 'echo "got $x"' >"$T/reader.sh"
    # in a pipeline amqplock does not lead the job's group, and its stdin
    # is not the terminal: CMD gets the terminal when it asks (SIGTTIN)
    printf '%s\n' 'echo waiting' 'read x </dev/tty' 'echo "got $x"' >"$T/tty-reader.sh"
    pty_play \
        line "'$AMQPLOCK_BIN' hold $n -- sh '$T/reader.sh'" \
        expect 'waiting$' \
        line 'hello there' \
        expect '^got hello there$' \
        prompt \
        line 'echo "hold=$?"' \
        expect '^hold=0$' \
        line "true | '$AMQPLOCK_BIN' hold $n -- sh '$T/tty-reader.sh'" \
        expect 'waiting$' \
        line 'second line' \
        expect '^got second line$' \
        prompt \
        line 'echo "hold=$?"' \
        expect '^hold=0$'
    pty_done 60
    slot_free "$n" 1
}

@test "at a terminal a hold that waits over a second says so on one line, rewritten in place; on a pipe, in JSON or with -q it does not" {
    al create "$n" 1
    # (held until the waiter has said so for 3 s, however long its start
    # took on a busy machine)
    bg h hold "$n" -- sh -c "while [ ! -e '$T/go' ]; do sleep 0.05; done"
    local h=$BG
    wait_until 10 slot_held "$n" 1 || fail "slot 1 not held: $(cat "$T/h.err")"
    pty_play \
        line "'$AMQPLOCK_BIN' hold -w 20 $n -- echo 'go''t it'" \
        expect "amqplock: waiting, the one slot of $n is held \\([12] s\\)" \
        expect "amqplock: waiting, the one slot of $n is held \\([345] s\\)" \
        expect 'got it$' \
        prompt \
        line 'echo "hold=$?"' \
        expect '^hold=0$'
    wait_until 20 seen "held \\(3 s\\)" || fail "no waiting line for 3 s: $(cat "$T/pty.log")"
    touch "$T/go"
    pty_done 40
    wait_exit "$h" 10
    # on a pipe: nothing while waiting, the reason at the end
    bg h2 hold "$n" -- sleep 30
    h=$BG
    wait_until 10 slot_held "$n" 1 || fail "slot 1 not held: $(cat "$T/h2.err")"
    run -1 --separate-stderr al hold -w 2 "$n" -- true
    [[ $stderr != *"amqplock: waiting,"* ]] || fail "stderr: $stderr"
    assert_error_line
    # JSON: one waiting event, then the error
    run -1 --separate-stderr al --json hold -w 2 "$n" -- true
    local json
    json=$(grep '^{' <<<"$stderr")
    [ "$(jq -c 'select(.event == "waiting") | [.semaphore, .max]' <<<"$json")" = "[\"$n\",1]" ] ||
        fail "stderr: $stderr"
    [ "$(jq -c 'select(.error) | .error' <<<"$json")" = '"busy"' ] || fail "stderr: $stderr"
    # -q: nothing at all, only the exit code
    run -1 --separate-stderr al -q hold -w 2 "$n" -- true
    [ -z "$stderr" ] || fail "stderr: $stderr"
    run -1 --separate-stderr al -q hold -n "$n" -- true
    [ -z "$stderr" ] || fail "stderr: $stderr"
    kill -TERM "$h"
    wait_exit "$h" 10
}

# --- job control without a terminal ------------------------------------------------------

@test "kill -TSTP of a background hold stops every process of CMD; kill -CONT lets them go on; exit 0" {
    al create "$n" 1
    local d=$T/tk
    ticker_hold bg_job "$d" 30
    local h=$BG keeper
    keeper=$(pgrep -P "$h" -x "$KEEPER")
    # The job stops before amqplock does: watched every millisecond, the
    # moment amqplock shows T, so does every process of CMD.
    perl -e '
        use Time::HiRes qw(sleep);
        sub state { open(my $f, "<", "/proc/$_[0]/stat") or return ""; my $s = <$f>;
                    $s =~ /\)\s+(\S)/; return $1 }
        my ($hold, @cmd) = @ARGV;
        for (1 .. 5000) {
            if (state($hold) eq "T") {
                my @running = grep { state($_) ne "T" } @cmd;
                print "@running\n";
                exit 0;
            }
            sleep 0.001;
        }
        exit 1' "$h" $TICKER >"$T/first" &
    local watcher=$!
    sleep 0.2
    stop_ticker TSTP "$h"
    wait "$watcher" || fail "amqplock never showed T"
    [ -z "$(tr -d ' \n' <"$T/first")" ] || fail "amqplock stopped before CMD's $(cat "$T/first")"
    note "amqplock and CMD's 3 processes stopped $STOPPED_IN s after kill -TSTP"
    [ "$(state "$keeper")" != T ] || fail "the keeper is stopped too"
    frozen "$d" 1
    slot_held "$n" 1
    cont_to_end "$h" "$d" 30
    slot_free "$n" 1
}

@test "kill -STOP of amqplock alone: the keeper stops every process of CMD within a second; kill -CONT resumes them" {
    al create "$n" 1
    local d=$T/tk
    ticker_hold bg "$d" 30
    local h=$BG
    stop_ticker STOP "$h"
    note "CMD's 3 processes stopped $STOPPED_IN s after kill -STOP of amqplock"
    at_most "$STOPPED_IN" 1.5
    frozen "$d" 1
    cont_to_end "$h" "$d" 30
    slot_free "$n" 1
}

@test "without a lease, a 5 s kill -STOP with --heartbeat 1: another hold -n gets the slot; after kill -CONT the CMD never runs again, exit 75 at once" {
    al create "$n" 1
    local d=$T/tk d2=$T/tk2
    ticker_hold bg "$d" 0 --heartbeat 1 --lease 0
    local h=$BG t0
    stop_ticker STOP "$h"
    # shellcheck disable=SC2086
    second_takes_over "$d" "$d2" "$h" $TICKER
    t0=$(now)
    kill -CONT "$h"
    wait_exit "$h" 8
    note "hold -n got the slot $TOOK s into the stop (--heartbeat 1); the first hold exited $(since "$t0") s after kill -CONT"
    [ "$rc" -eq 75 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    grep -qEx "amqplock: lost slot 1 of $n: .+" "$T/h.err" || fail "stderr: $(cat "$T/h.err")"
    # stopped, it was killed without running another instruction: with
    # the default --grace of 10 s, a TERM would have left it waiting
    at_most "$(since "$t0")" 4
    # (gone already: 0 s)
    first_never_ran "$d" "$d2" 0
}

# --- descendants that leave CMD's group or session ----------------------------------------

@test "a setsid child keeps the slot after CMD exited; the slot is free once it ends" {
    al create "$n" 1
    local d=$T/d
    daemon_hold "$d"
    local h=$BG daemon=$DAEMON keeper
    keeper=$(pgrep -P "$h" -x "$KEEPER")
    # CMD is gone; the keeper adopted the daemon
    [ "$(proc_field "$daemon" 4)" -eq "$keeper" ] || fail "the daemon's parent is $(proc_field "$daemon" 4)"
    sleep 1.5
    running "$h" || fail "hold ended: $(cat "$T/h.err")"
    slot_held "$n" 1
    run -1 al hold -n "$n" -- touch "$T/ran"
    [ ! -e "$T/ran" ]
    local t0
    t0=$(now)
    touch "$d/end"
    wait_exit "$h" 10
    note "hold ended $(since "$t0") s after the daemon was told to end"
    [ "$rc" -eq 0 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    [ ! -e "$d/signals" ]
    run -0 al hold -n "$n" -- touch "$T/ran"
    [ -e "$T/ran" ]
    slot_free "$n" 1
}

@test "TERM to the hold reaches a setsid child of CMD; hold exits with CMD's status" {
    al create "$n" 1
    local d=$T/d
    daemon_hold "$d"
    local h=$BG
    kill -TERM "$h"
    daemon_termed "$d" "$h" 0 5
    slot_free "$n" 1
}

@test "a setsid child is ended on a lost slot (remove): it gets TERM, hold exits 75" {
    al create "$n" 1
    local d=$T/d
    daemon_hold "$d"
    local h=$BG t0
    t0=$(now)
    al remove "$n" >/dev/null
    wait_until 5 test -s "$d/signals" || fail "the daemon got no signal: $(cat "$T/h.err")"
    note "the daemon got TERM $(since "$t0") s after the remove"
    daemon_termed "$d" "$h" 75 10
    grep -qFx "amqplock: lost slot 1 of $n: slot 1 of $n was removed: $n shrank to 0 slots without --drain (amqplock remove, max or destroy)" "$T/h.err" ||
        fail "stderr: $(cat "$T/h.err")"
}

@test "kill -9 of the hold ends a setsid child within a second, and the slot is not free before" {
    al create "$n" 1
    local d=$T/d
    daemon_hold "$d"
    local h=$BG
    kill9_then_free "$h" 1 "$DAEMON"
    note "kill -9 of the hold: its setsid child gone within $GONE_IN s, the slot free $FREE_IN s after"
}

@test "hold -c 'timeout 60 job': the job (in timeout's own group) ends on kill -9 of the hold and on a lost slot" {
    al create "$n" 1
    new_mark
    local m=$MARK h job
    # "; true" keeps sh from exec'ing timeout: timeout then makes a group
    # of its own below CMD's, as in `hold -c 'timeout 60 job'` with more
    # after it
    bg h hold -c "timeout 60 sleep $m; true" "$n"
    h=$BG
    wait_until 10 has_marker "$m" || fail "no job: $(cat "$T/h.err")"
    job=$(marker_pids "$m")
    local cmd
    cmd=$(pgrep -P "$(pgrep -P "$h" -x "$KEEPER")")
    [ "$(proc_field "$job" 5)" -ne "$cmd" ] || fail "the job stayed in CMD's group"
    kill9_then_free "$h" 1 "$job"
    note "kill -9: the job gone within $GONE_IN s, the slot free $FREE_IN s after"

    bg h hold -c "timeout 60 sleep $m; true" "$n"
    h=$BG
    wait_until 10 has_marker "$m" || fail "no job: $(cat "$T/h.err")"
    job=$(marker_pids "$m")
    al remove "$n" >/dev/null
    wait_exit "$h" 10
    [ "$rc" -eq 75 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    grep -qEx "amqplock: lost slot 1 of $n: .+" "$T/h.err" || fail "stderr: $(cat "$T/h.err")"
    ended "$job" || fail "the job survived the lost slot"
    no_marker "$m"
}

# --- the holder queue -------------------------------------------------------------------

@test "a policy that expires unused holder queues (1.5 s): the hold keeps its slot, a second hold -n gets 1" {
    al create "$n" 1
    POLICY=amqplock-test-$n
    rmqctl set_policy --apply-to queues "$POLICY" "^amqplock\\.$n-[0-9]+-B\$" '{"expires":1500}' >/dev/null
    # the policy works: a holder queue nobody uses goes (a client that
    # never checks it, on a slot that does not exist)
    perl "$H/holdq.pl" "$AMQPLOCK_TEST_PORT" "amqplock.$n-9-B" >"$T/holdq.out" 2>&1 </dev/null 3>&- &
    keep "$!"
    wait_until 10 grep -q ready "$T/holdq.out" || fail "holdq: $(cat "$T/holdq.out")"
    bg h hold "$n" -- perl "$H/trapper.pl" "$T/sig"
    local h=$BG t0
    wait_until 10 test -e "$T/sig.ready" || fail "CMD did not start: $(cat "$T/h.err")"
    t0=$(now)
    wait_until 15 no_queue "amqplock.$n-9-B" || fail "the policy expired nothing"
    note "an unchecked holder queue expired $(since "$t0") s after the hold began"
    while awk -v t="$(since "$t0")" 'BEGIN { exit !(t < 6) }'; do
        sleep 1
        running "$h" || fail "hold ended: $(cat "$T/h.err")"
    done
    [ "$(queues_like "amqplock.$n-1-B")" = "amqplock.$n-1-B false true" ] ||
        fail "holder queue: '$(queues_like "amqplock.$n-1-B")'"
    run -1 al hold -n "$n" -- touch "$T/ran"
    [ ! -e "$T/ran" ]
    [ ! -s "$T/sig" ] || fail "CMD got $(cat "$T/sig")"
    kill -TERM "$h"
    wait_exit "$h" 5
    [ "$rc" -eq 0 ] || fail "hold exited $rc: $(cat "$T/h.err")"
}

@test "the holder queue deleted (rabbitmqctl delete_queue): CMD gets TERM, hold exits 75 and names the queue" {
    al create "$n" 1
    victim_hold hold "$n"
    local h=$BG m=$MARK t0
    t0=$(now)
    rmqctl delete_queue "amqplock.$n-1-B" >/dev/null
    wait_until 5 has_line "$T/signals" TERM || fail "CMD got no TERM: $(cat "$T/h.err")"
    note "CMD got TERM $(since "$t0") s after rabbitmqctl delete_queue began"
    wait_exit "$h" 10
    [ "$rc" -eq 75 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    # (CMD's shell may add "Terminated")
    grep -qx "amqplock: lost slot 1 of $n: its holder queue amqplock.$n-1-B was deleted" "$T/h.err" ||
        fail "stderr: $(cat "$T/h.err")"
    [ "$(cat "$T/signals")" = TERM ]
    no_marker "$m"
}

# --- dispositions inherited from the caller ------------------------------------------------

@test "SIGCHLD ignored by the caller: hold exits 0 at once, frees its slot; CMD gets default dispositions, no mask" {
    al create "$n" 1
    local t0
    t0=$(now)
    run -0 timeout 20 perl -e '$SIG{CHLD} = "IGNORE"; exec @ARGV or die' -- "$AMQPLOCK_BIN" hold "$n" -- true
    note "hold -- true with SIGCHLD ignored took $(since "$t0") s"
    at_most "$(since "$t0")" 5
    slot_free "$n" 1
    # CMD's own status, which the kernel would throw away for a parent that
    # ignores SIGCHLD; and a CMD with a child of its own
    run -7 timeout 20 perl -e '$SIG{CHLD} = "IGNORE"; exec @ARGV or die' -- "$AMQPLOCK_BIN" hold "$n" -- \
        sh -c 'sleep 0.2 & wait; exit 7'
    slot_free "$n" 1
    # CHLD and PIPE ignored, ALRM and WINCH blocked: CMD starts clean, but
    # for the INT that stays ignored by convention (HUP and QUIT default)
    run -0 --separate-stderr timeout 20 perl -MPOSIX -MConfig -e '
        my %num;
        @num{split " ", $Config{sig_name}} = split " ", $Config{sig_num};
        $SIG{$_} = "IGNORE" for qw(CHLD PIPE INT);
        $SIG{$_} = "DEFAULT" for qw(HUP QUIT);
        sigprocmask(SIG_BLOCK, POSIX::SigSet->new(@num{qw(ALRM WINCH)})) or die "sigprocmask: $!";
        exec @ARGV or die' -- "$AMQPLOCK_BIN" hold "$n" -- grep -E '^Sig(Blk|Ign):' /proc/self/status
    assert_line -e '^SigBlk:[[:space:]]+0+$'
    # Signals 32 and 33 belong to glibc, which refuses to change them (and
    # takes them over when it needs them): a caller may pass them on
    # ignored, as CI's does. Every other bit but INT's must be clear.
    local ign
    ign=$(awk '$1 == "SigIgn:" { print $2 }' <<<"$output")
    [ $((0x$ign & ~0x180000000)) -eq 2 ] || fail "SigIgn $ign: more than INT ignored"
    slot_free "$n" 1
}

# --- a signal before the slot is held ---------------------------------------------------------

@test "a signal while logging in to a silent listener: exit 128+N within a second, the message, nothing run" {
    start_silent_listener
    keep "$SILENT_PID"
    local url="amqp://guest:guest@127.0.0.1:$SILENT_PORT/" s
    local -A pid
    for s in TERM INT HUP; do
        bg "h$s" --connect-timeout 20 --url "$url" hold "$n" -- touch "$T/ran"
        pid[$s]=$BG
    done
    bg a --connect-timeout 20 --url "$url" acquire "$n"
    pid[acquire]=$BG
    for s in TERM INT HUP acquire; do
        wait_until 10 connected "${pid[$s]}" || fail "$s: no connection"
    done
    sleep 0.5
    local t0 took code tag sig
    for s in TERM INT HUP acquire; do
        running "${pid[$s]}" || fail "$s: ended early"
        tag=h$s sig=$s
        [ "$s" = acquire ] && tag=a sig=TERM
        t0=$(now)
        kill -s "$sig" "${pid[$s]}"
        wait_exit "${pid[$s]}" 5
        took=$(since "$t0")
        code=$((128 + $(kill -l "$sig")))
        [ "$rc" -eq "$code" ] || fail "$s: exit $rc, not $code: $(cat "$T/$tag.err")"
        at_most "$took" 1
        [ "$(cat "$T/$tag.err")" = "amqplock: interrupted by SIG$sig before a slot of $n was held; nothing was run" ] ||
            fail "$s: stderr '$(cat "$T/$tag.err")'"
        [ ! -s "$T/$tag.out" ]
    done
    note "the last one exited $took s after its signal"
    [ ! -e "$T/ran" ]
}

@test "--json: a TERM while logging in gives one JSON object, on stderr for hold and on stdout for acquire" {
    start_silent_listener
    keep "$SILENT_PID"
    local url="amqp://guest:guest@127.0.0.1:$SILENT_PORT/"
    bg h --json --connect-timeout 20 --url "$url" hold "$n" -- touch "$T/ran"
    local h=$BG
    bg a --json --connect-timeout 20 --url "$url" acquire "$n"
    local a=$BG
    wait_until 10 connected "$h" || fail "hold: no connection"
    wait_until 10 connected "$a" || fail "acquire: no connection"
    sleep 0.5
    kill -TERM "$h" "$a"
    wait_exit "$h" 5
    [ "$rc" -eq 143 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    wait_exit "$a" 5
    [ "$rc" -eq 143 ] || fail "acquire exited $rc: $(cat "$T/a.err")"
    local text="interrupted by SIGTERM before a slot of $n was held; nothing was run" filter
    filter='. == {"ok": false, "semaphore": $n, "error": "interrupted", "message": $m}'
    # hold: stdout is CMD's; the text line and the object on stderr
    [ ! -s "$T/h.out" ]
    [ "$(grep -vc '^{' "$T/h.err")" -eq 1 ] && grep -qx "amqplock: $text" "$T/h.err" ||
        fail "hold's stderr: $(cat "$T/h.err")"
    [ "$(grep -c '^{' "$T/h.err")" -eq 1 ] || fail "hold's stderr: $(cat "$T/h.err")"
    grep '^{' "$T/h.err" | jq -e --arg n "$n" --arg m "$text" "$filter" >/dev/null ||
        fail "hold's JSON: $(cat "$T/h.err")"
    # acquire: the object on stdout, the text on stderr
    [ "$(wc -l <"$T/a.out")" -eq 1 ] || fail "acquire's stdout: $(cat "$T/a.out")"
    jq -e --arg n "$n" --arg m "$text" "$filter" "$T/a.out" >/dev/null || fail "acquire's JSON: $(cat "$T/a.out")"
    [ "$(cat "$T/a.err")" = "amqplock: $text" ] || fail "acquire's stderr: $(cat "$T/a.err")"
    [ ! -e "$T/ran" ]
}

@test "a TERM while waiting for a held slot: exit 143 at once, the message, nothing run" {
    al create "$n" 1
    bg a acquire "$n"
    local a=$BG
    wait_until 10 has_line "$T/a.out" 1 || fail "acquire: $(cat "$T/a.err")"
    bg w hold "$n" -- touch "$T/ran"
    local w=$BG t0
    wait_until 10 connected "$w" || fail "hold did not connect"
    sleep 1
    running "$w" || fail "hold ended: $(cat "$T/w.err")"
    t0=$(now)
    kill -TERM "$w"
    wait_exit "$w" 5
    at_most "$(since "$t0")" 1
    [ "$rc" -eq 143 ] || fail "hold exited $rc: $(cat "$T/w.err")"
    [ "$(cat "$T/w.err")" = "amqplock: interrupted by SIGTERM before a slot of $n was held; nothing was run" ] ||
        fail "stderr: $(cat "$T/w.err")"
    [ ! -e "$T/ran" ]
    running "$a"
    slot_held "$n" 1
}

# --- job control in a contention loop ---------------------------------------------------

# linger_hold DIR: one `hold -w 30 $n -- crit.pl DIR linger` (the command
# leaves a setsid child inside for a while), one time in two with
# --heartbeat 1.
linger_hold() {
    local hb=()
    [ $((RANDOM % 2)) -eq 0 ] && hb=(--heartbeat 1)
    timeout -k 5 60 "$AMQPLOCK_BIN" "${hb[@]}" hold -w 30 "$n" -- perl "$H/crit.pl" "$1" linger
}

# Job control in the contention loop: a stopped hold stops its command's
# processes, a continued one lets them go on only once its slot is checked,
# and one stopped past the broker's eviction time (with --heartbeat 1 the
# broker drops it 2.5-3 s in; stops last up to 3 s) loses its slot and
# exits 75, its command killed before it runs again (crit.pl checks every
# command that runs again after a stop). Some stops are by name, as
# `pkill -STOP amqplock` would stop a hold (its keeper spared). Each
# command also leaves a setsid child inside for a while, which keeps the
# slot; one in three of those is a program whose main thread has exited
# (tools/oddjob.c: a zombie leader that runs on). About 35 s.
@test "at most N under job control: kill -TSTP/-CONT, stops by name and kill -9 of random holds, setsid and zombie-leader children outliving CMD" {
    al create "$n" 3
    local d
    d=$(critical_dir 3)
    : >"$d/stops"
    : >"$d/killed"
    : >"$d/odd"
    cc -O -pthread -o "$T/oddjob" "$H/oddjob.c" || fail "cannot build oddjob.c"
    # 20 loops of linger_hold, until $d/stop exists
    CRIT_ODDJOB=$T/oddjob client_loops "$d" 20 0 linger_hold "$d"
    perl "$H/stopper.pl" "$d" 2>"$d/stopper.err" 3>&- &
    local stopper=$!
    PIDS+=("$stopper")
    wait_until 35 turns_at_least "$d" 400 || true
    # (and the bound reached once, which check_contention asks)
    wait_until 30 most_reached "$d" 3 || true
    touch "$d/stop"
    wait_until 10 ended "$stopper" || fail "the stopper did not stop"
    finish_contention 60
    [ ! -s "$d/stopper.err" ] || fail "stopper: $(cat "$d/stopper.err")"
    local stops long kills named odd
    stops=$(wc -l <"$d/stops")
    long=$(awk '$2 > 2.5' "$d/stops" | wc -l)
    kills=$(wc -l <"$d/killed")
    named=$(wc -l <"$d/named")
    odd=$(wc -l <"$d/odd")
    note "$stops holds stopped for 0.05-3 s ($long for more than 2.5 s, $named by name), $kills killed, $odd zombie-leader children; hold exits: $(exit_counts "$d")"
    [ ! -s "$d/bad" ] || fail "breaches: $(sort "$d/bad" | uniq -c | head -20)"
    # lost while stopped (75) and killed (137) are the only failures; a
    # hold that stays stopped after CONT shows as 1 (others waited 30 s
    # in vain) or 124 (timeout)
    [ -z "$(grep -vxE '0|75|137' "$d/rc" || true)" ] || fail "holds failed: $(exit_counts "$d"); $(tail -5 "$d/err")"
    check_contention "$d" 100 3
    [ "$stops" -ge 20 ] || fail "only $stops stops"
    [ "$named" -ge 2 ] || fail "only $named stops by name"
    [ "$odd" -ge 20 ] || fail "only $odd zombie-leader children"
    [ "$kills" -ge 2 ] || fail "only $kills kills"
    [ "$(al --json status --no-names "$n" | jq -c '[.max, .held]')" = '[3,[]]' ]
}
