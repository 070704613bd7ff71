# Loaded by every bats suite: the private broker started by tests/run.sh,
# the binary under test, and small helpers.
#
# tests/run.sh exports AMQPLOCK_URL and AMQPLOCK_TEST_* for the private
# broker; a suite run on its own (bats tests/x.bats) needs them too.

bats_load_library bats-support
bats_load_library bats-assert

TOP=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
AMQPLOCK_BIN=${AMQPLOCK_BIN:-$TOP/amqplock}
# Helper programs of the tests.
H=$TOP/tests/tools

# The binary under test, optionally under a wrapper such as valgrind.
amqplock() {
    ${AMQPLOCK_WRAP:-} "$AMQPLOCK_BIN" "$@"
}

# rabbitmqctl against the private broker.
rmqctl() {
    "$TOP/tests/lib/broker.sh" ctl "$AMQPLOCK_TEST_BROKER_DIR" "$@"
}

# queues_like PREFIX [VHOST]: "name durable exclusive" for every queue of
# VHOST (default /) whose name starts with PREFIX, sorted, one per line (a
# quorum queue, which has no exclusive flag, as "false").
queues_like() {
    rmqctl -q list_queues -p "${2:-/}" name durable exclusive --no-table-headers 2>/dev/null |
        awk -F '\t' -v p="$1" 'index($1, p) == 1 { print $1, $2, ($3 == "" ? "false" : $3) }' | sort -V
}

# queue_type QUEUE: "classic" or "quorum" (empty if there is no QUEUE).
# Leases are quorum queues on RabbitMQ before 4.2.6 (request.c,
# lease_type_quorum).
queue_type() {
    rmqctl -q list_queues name type --no-table-headers 2>/dev/null | awk -v q="$1" '$1 == q { print $2 }'
}

# The keeper's name in ps (comm and command line): the process between
# amqplock and CMD. It holds no "amqplock", so that `pkill amqplock` spares
# it (docs/design.md, section 1).
KEEPER=amqp-keeper

# state PID: the one-letter state of PID's leader (R, S, T, Z, ...) as
# /proc/PID/stat shows it, empty if gone.
state() { proc_field "$1" 3; }

# A semaphore name no other test uses.
unique_name() {
    echo "t${BATS_TEST_NUMBER:-0}-${1:-s}-$$-$RANDOM"
}

# A TCP port on 127.0.0.1 where nothing listens.
closed_port() {
    local p
    while :; do
        p=$((40000 + RANDOM % 20000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

# Starts a listener that accepts connections and never says a word; sets
# SILENT_PORT and SILENT_PID. Stop it with kill "$SILENT_PID".
start_silent_listener() {
    local portfile="$BATS_TEST_TMPDIR/silent.port"
    rm -f "$portfile"
    perl -MIO::Socket::INET -e '
        my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
                                      Listen => 16, ReuseAddr => 1) or die $!;
        open(my $f, ">", $ARGV[0]) or die $!; print $f $s->sockport, "\n"; close $f;
        my @keep; while (my $c = $s->accept) { push @keep, $c }' "$portfile" &
    SILENT_PID=$!
    local i
    for i in $(seq 1 100); do
        [ -s "$portfile" ] && break
        sleep 0.05
    done
    SILENT_PORT=$(cat "$portfile")
}

# One "amqplock: ..." line on stderr (after run --separate-stderr).
assert_error_line() {
    [[ $stderr == "amqplock: "?* && $stderr != *$'\n'* ]] ||
        fail "expected one line 'amqplock: ...' on stderr, got: '$stderr'"
}

# assert_json FILTER [JQ ARGS...]: stdout is exactly one JSON object on one
# line, and jq -e FILTER holds for it.
assert_json() {
    local filter=$1
    shift
    [[ -n $output && $output != *$'\n'* ]] || fail "stdout is not one line: '$output'"
    [ "$(jq -c . <<<"$output" 2>/dev/null | wc -l)" -eq 1 ] ||
        fail "stdout is not one JSON value: '$output'"
    jq -e 'type == "object"' <<<"$output" >/dev/null || fail "not a JSON object: '$output'"
    jq -e "$@" "$filter" <<<"$output" >/dev/null ||
        fail "JSON '$output' does not satisfy: $filter"
}

# amqplock in the foreground, bounded in time (30 s catches a hang).
al() {
    timeout 30 ${AMQPLOCK_WRAP:-} "$AMQPLOCK_BIN" "$@"
}

now() { echo "$EPOCHREALTIME"; }
# seconds_between A B: B - A in seconds, e.g. 1.234 (A and B as now prints
# them); since A: from A to now.
seconds_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", b - a }'; }
since() { seconds_between "$1" "$EPOCHREALTIME"; }
# started PID: when PID began (seconds since the epoch, to 10 ms): its
# start in /proc/PID/stat, in clock ticks since boot, set against
# /proc/uptime now. With written, the span a process itself saw, free of
# the time a busy machine takes to start it and to tell the test it ended.
started() {
    local up now=$EPOCHREALTIME
    proc_stat "$1" || return 1
    read -r up _ </proc/uptime
    awk -v s="$PROC_STAT" -v up="$up" -v now="$now" -v hz="$(getconf CLK_TCK)" \
        'BEGIN { split(s, f, " "); printf "%.3f\n", now - up + f[20] / hz }'
}
# written FILE: when FILE was last written (seconds since the epoch).
written() { stat -c %.3Y "$1"; }
# at_least X Y / at_most X Y: numeric comparisons of seconds
at_least() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x >= y) }' || fail "$1 s is less than $2 s"; }
at_most() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x <= y) }' || fail "$1 s is more than $2 s"; }

# note TEXT: a measurement, shown in the TAP output as a "# ..." line.
note() { echo "# $*" >&3; }

# test_init: the state the helpers below expect, for setup(): n, a
# semaphore name of the test's own; T, its scratch directory; PIDS, the
# background processes stop_bg ends; MARKS, the marks kill_marks ends.
test_init() {
    n=$(unique_name)
    T=$BATS_TEST_TMPDIR
    PIDS=()
    MARKS=()
}

# slot_free NAME K / slot_held NAME K: status --json lists slot K as free
# / held.
slot_free() { al --json status --no-names "$1" | jq -e --argjson k "$2" '.free | index($k) != null' >/dev/null; }
slot_held() { al --json status --no-names "$1" | jq -e --argjson k "$2" '.held | index($k) != null' >/dev/null; }
# in_line TAG: the background hold or acquire TAG (started with -v) has
# joined the line of the test's semaphore.
in_line() {
    wait_until 20 grep -q "waiting on amqplock.$n#" "$T/$1.err" ||
        fail "$1 did not join the line: $(cat "$T/$1.err")"
}
# none_held NAME: no slot of NAME is held, by a holder or a lease
none_held() { [ "$(al --json status --no-names "$1" | jq -c '[.held, .away]')" = '[[],[]]' ]; }
# no_lease_left NAME: nothing of NAME but its slot queues (-A) exists: no
# holder queue, no lease.
no_lease_left() {
    local left
    left=$(queues_like "amqplock.$1-" | grep -v -- '-A true false$' || true)
    [ -z "$left" ] || fail "queues left: $left"
}

# --- background processes (setup calls test_init) ---

# bg TAG ARGS...: amqplock ARGS in the background, stdout in $T/TAG.out and
# stderr in $T/TAG.err, its pid in BG (the pid of amqplock itself, to send
# signals to). SIGINT and SIGQUIT are reset to their defaults: a shell
# without job control would start it with them ignored. Killed in teardown.
bg() {
    local tag=$1
    shift
    env --default-signal=INT,QUIT ${AMQPLOCK_WRAP:-} "$AMQPLOCK_BIN" "$@" \
        >"$T/$tag.out" 2>"$T/$tag.err" </dev/null 3>&- &
    BG=$!
    PIDS+=("$BG")
}

# bg_job TAG ARGS...: as bg, but amqplock leads a process group of its own,
# as a job of an interactive shell does. (A TSTP to a process whose group is
# orphaned, say the only job of a session, is refused by the kernel; this
# group's parent is in the same session, so it is not orphaned.)
bg_job() {
    local tag=$1
    shift
    env --default-signal=INT,QUIT perl -e 'setpgrp(0, 0) or die "setpgrp: $!\n"; exec @ARGV or die "exec: $!\n"' \
        -- ${AMQPLOCK_WRAP:-} "$AMQPLOCK_BIN" "$@" >"$T/$tag.out" 2>"$T/$tag.err" </dev/null 3>&- &
    BG=$!
    PIDS+=("$BG")
}

# keep PID: kill PID in teardown.
keep() { PIDS+=("$1"); }

# test_cleanup [NAME...]: the one teardown every suite's teardown starts
# with (or is), whatever the test left: loops told to stop ($T/stop and
# the contention loops'), a frozen relay (RELAY) continued, background processes (bg)
# stopped, the terminal's session ended, every process whose command line
# names a file of this test's directory ended (TERM, KILL after a second),
# marked processes (kill_marks), a policy (POLICY, expire_policy) cleared,
# a stopped broker app (APP_STOPPED) or lowered watermark
# (RESTORE_WATERMARK) restored, and the test's semaphore $n and NAMEs
# destroyed.
test_cleanup() {
    # The test's own directory: never empty, or "every process whose
    # command line names a file of it" would be every process there is.
    local dir=${T:-$BATS_TEST_TMPDIR}
    [ -n "$dir" ] && [ "$dir" != / ] || dir=
    # loops of the test's own that run until $T/stop, and the contention
    # loops
    if [ -n "$dir" ]; then
        touch "$dir/stop" 2>/dev/null || true
        [ ! -d "$dir/crit" ] || touch "$dir/crit/stop"
    fi
    [ -z "${RELAY:-}" ] || kill -CONT "$RELAY" 2>/dev/null || true
    stop_bg
    end_pty_session
    local p left=()
    for p in $([ -z "$dir" ] || pgrep -f -- "$dir/" || true); do
        kill -CONT "$p" 2>/dev/null || true
        kill -TERM "$p" 2>/dev/null && left+=("$p")
    done
    for p in "${left[@]}"; do
        wait_until 1 ended "$p" || kill -KILL "$p" 2>/dev/null || true
    done
    kill_marks
    clear_expire_policy
    if [ -n "${RESTORE_WATERMARK:-}" ]; then
        rmqctl set_vm_memory_high_watermark "$RESTORE_WATERMARK" >/dev/null 2>&1 || true
    fi
    if [ -n "${APP_STOPPED:-}" ]; then
        rmqctl start_app >/dev/null 2>&1 || true
    fi
    local s
    for s in ${n:+"$n"} "$@"; do
        al destroy --admin-wait 10 "$s" >/dev/null 2>&1 || true
    done
}

# stop_bg: for teardown; CONT and TERM every process in PIDS, KILL what is
# left after 3 s, and reap them.
stop_bg() {
    local p
    for p in "${PIDS[@]}"; do
        kill -CONT "$p" 2>/dev/null || true
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do
        wait_until 3 ended "$p" || kill -KILL "$p" 2>/dev/null || true
    done
    for p in "${PIDS[@]}"; do
        wait_until 2 ended "$p" || true
        ended "$p" && { wait "$p" 2>/dev/null || true; }
    done
}

# wait_until SECS CMD...: runs CMD every 50 ms until it succeeds (0) or SECS
# have passed (1).
wait_until() {
    local secs=$1 frac=000000 end
    [[ $secs == *.* ]] && frac=${secs#*.}000000
    secs=${secs%%.*}
    end=$((${EPOCHREALTIME/./} + 10#${secs:-0} * 1000000 + 10#${frac:0:6}))
    shift
    until "$@"; do
        ((${EPOCHREALTIME/./} < end)) || return 1
        nap 0.05
    done
}

# ended, running, gone, wait_ended: tests/lib/procs.sh
. "${BASH_SOURCE[0]%/*}/procs.sh"

# wait_exit PID SECS: waits at most SECS for the background process PID to
# end (the test fails otherwise) and sets rc to its exit status.
wait_exit() {
    wait_until "$2" ended "$1" || fail "process $1 still runs after $2 s"
    rc=0
    wait "$1" || rc=$?
}

# has_line FILE REGEX (grep -E -x)
has_line() { grep -qEx -- "$2" "$1" 2>/dev/null; }

# connected PID: amqplock PID has a socket open, i.e. it is past its
# signal setup and talking to the broker (or waiting for a slot).
connected() { ls -l "/proc/$1/fd" 2>/dev/null | grep -q 'socket:'; }

# start_relay: proxy.pl in front of the broker, pid in RELAY, its URL in
# RELAY_URL. kill -STOP "$RELAY" is a silent partition for every
# connection through it; teardown (stop_bg) continues it.
start_relay() {
    perl "$H/proxy.pl" "$T/relay.port" "$AMQPLOCK_TEST_PORT" >"$T/relay.err" 2>&1 </dev/null 3>&- &
    RELAY=$!
    keep "$RELAY"
    wait_until 10 test -s "$T/relay.port" || fail "relay did not start: $(cat "$T/relay.err")"
    RELAY_URL="amqp://guest:guest@127.0.0.1:$(cat "$T/relay.port")/"
}

# start_relay_stalling TEXT: start_relay, whose first connection to send
# TEXT then hears nothing more from the broker (proxy.pl,
# AMQPLOCK_RELAY_STALL); its requests still reach the broker.
start_relay_stalling() {
    AMQPLOCK_RELAY_STALL=$1 start_relay
}

# start_relay_holding TEXT SECONDS [UNTIL]: start_relay, whose first
# connection to send TEXT then hears from the broker only SECONDS later,
# and not before the broker has sent it UNTIL if that is given (proxy.pl,
# AMQPLOCK_RELAY_HOLD): to that client, a pause right after it sent TEXT.
start_relay_holding() {
    AMQPLOCK_RELAY_HOLD="$1 $2${3:+ $3}" start_relay
}

# start_relay_closing TEXT CODE: start_relay, whose first connection to
# send TEXT is closed as the broker closes one, with reply code CODE
# (proxy.pl, AMQPLOCK_RELAY_CLOSE); later connections are relayed.
start_relay_closing() {
    AMQPLOCK_RELAY_CLOSE="$1 $2" start_relay
}

# expire_policy MS: an expires policy on the queues of this test's
# semaphore, the clean-up policy operators set (docs/operators.md, "Policies");
# clear_expire_policy (teardown) clears it.
expire_policy() {
    POLICY="expire-$n"
    rmqctl set_policy -p / --apply-to queues "$POLICY" "^amqplock\\.$n" "{\"expires\":$1}" >/dev/null
}
clear_expire_policy() {
    [ -z "${POLICY:-}" ] || rmqctl clear_policy -p / "$POLICY" >/dev/null 2>&1 || true
    POLICY=
}

# --- marked processes: "sleep MARK" under a command ---

# new_mark: a number no other process uses as its sleep argument, in MARK:
# "sleep $MARK" and "sleep $((MARK + 1))" mark the processes a test starts
# under a command. kill_marks (teardown) kills what is left of them.
new_mark() {
    MARK=$((3000000 + (RANDOM * 32768 + RANDOM) % 6000000))
    MARKS+=("$MARK" "$((MARK + 1))")
}
# marker_pids M: the pids of "sleep M" processes
marker_pids() { pgrep -fx "sleep $1" || true; }
no_marker() { [ -z "$(marker_pids "$1")" ]; }
has_marker() { ! no_marker "$1"; }
kill_marks() {
    local m p
    for m in "${MARKS[@]}"; do
        for p in $(marker_pids "$m"); do
            kill -KILL "$p" 2>/dev/null || true
        done
    done
}

# victim_hold ARGS...: `amqplock ARGS -- victim.sh $T MARK` (ARGS end with
# hold's semaphore name) in the background with tag h (bg), MARK a fresh
# new_mark; returns once CMD runs and has started its "sleep MARK". Pid in
# BG. IGNORE_TERM=1 victim_hold ... passes IGNORE_TERM on to victim.sh.
victim_hold() {
    new_mark
    bg h "$@" -- sh "$H/victim.sh" "$T" "$MARK"
    wait_until 10 test -e "$T/ready" || fail "CMD did not start: $(cat "$T/h.err")"
    has_marker "$MARK" || fail "CMD's grandchild sleep $MARK does not run"
}

# --- contention: loops of holds around crit.pl's critical section ---

# critical_dir BOUND: a fresh directory for crit.pl ($T/crit), allowing
# BOUND inside.
critical_dir() {
    local d=$T/crit
    mkdir -p "$d"
    : >"$d/log"
    : >"$d/rc"
    echo "$1" >"$d/bound"
    echo "$d"
}

# client_loops DIR CLIENTS ENTRIES CMD...: CLIENTS loops in the background,
# each running CMD (a hold, or a function that runs one) again and again
# until DIR/stop exists or, unless ENTRIES is 0, DIR/log has ENTRIES
# entries; from 100 ENTRIES on, also until DIR/wanted (if the test wrote
# one) jobs were inside at once (most_reached), or twice ENTRIES: on a
# loaded machine the turns may be too slow to fill every slot at first.
# CMD runs with CLIENT set to its loop's number (1..CLIENTS),
# stdin from /dev/null and stderr appended to DIR/err; each exit status
# goes to DIR/rc. Pids in CLIENT_PIDS (and PIDS).
client_loops() {
    local d=$1 clients=$2 entries=$3 CLIENT
    shift 3
    CLIENT_PIDS=()
    for CLIENT in $(seq 1 "$clients"); do
        (
            while [ ! -e "$d/stop" ] && { [ "$entries" -eq 0 ] || ! enough_turns "$d" "$entries"; }; do
                rc=0
                "$@" 2>>"$d/err" </dev/null || rc=$?
                echo "$rc" >>"$d/rc"
            done
        ) 2>/dev/null 3>&- &
        CLIENT_PIDS+=("$!")
        PIDS+=("$!")
    done
}

# most_reached DIR [N]: crit.pl saw N jobs inside at once (DIR/most), N
# the number in DIR/wanted if not given; true if neither says one.
most_reached() {
    local want=${2:-$(cat "$1/wanted" 2>/dev/null)}
    [ -z "$want" ] || [ "$(cat "$1/most" 2>/dev/null || echo 0)" -ge "$want" ]
}

# enough_turns DIR ENTRIES: client_loops' end (see there)
enough_turns() {
    local count
    count=$(turns "$1")
    [ "$count" -ge "$2" ] || return 1
    [ "$2" -lt 100 ] || most_reached "$1" || [ "$count" -ge $(($2 * 2)) ]
}

# finish_contention SECS: waits for every client loop to end.
finish_contention() {
    local p
    for p in "${CLIENT_PIDS[@]}"; do
        wait_until "$1" ended "$p" || fail "client loop $p still runs after $1 s"
    done
}

# turns DIR: how many turns crit.pl's critical section has seen
turns() { wc -l <"$1/log"; }
turns_at_least() { [ "$(turns "$1")" -ge "$2" ]; }

# check_contention DIR ENTRIES MOST: no breach recorded, at least ENTRIES
# turns, and MOST commands were inside at once at some point (the test
# really contended; not asked of fewer than 100 turns).
check_contention() {
    local d=$1
    [ ! -s "$d/bad" ] || fail "breaches: $(sort "$d/bad" | uniq -c | head -20)"
    local count most
    count=$(turns "$d")
    most=$(awk '$2 > m { m = $2 } END { print m + 0 }' "$d/log")
    note "$count turns in $(awk '{ if (!a) a = $1; b = $1 } END { printf "%.1f", b - a }' "$d/log") s, at most $most inside at once"
    [ "$count" -ge "$2" ] || fail "only $count turns"
    [ "$most" -eq "$3" ] || [ "$2" -lt 100 ] || fail "at most $most inside at once, expected $3"
    # no critical section is left running
    [ -z "$(pgrep -f -- "crit.pl $d" || true)" ] || fail "a command still runs"
}

# exit_counts DIR: the holds' exit statuses as "COUNTxSTATUS ...", one line
exit_counts() { sort -n "$1/rc" | uniq -c | awk '{ print $1 "x" $2 }' | tr '\n' ' '; }

# --- the terminal: tests/tools/pty.py ---------------------------------------------

# pty_play STEP...: pty.py in the background, playing STEPs on an
# interactive bash on a terminal of its own, in $T, with core dumps off
# (Ctrl-\). Its pid in PTY, the shell's session in PTY_SID; the transcript
# grows in $T/pty.log. A test goes on with pty_done.
pty_play() {
    (
        ulimit -c 0
        cd "$T" || exit 1
        exec python3 "$H/pty.py" --timeout 30 --log "$T/pty.log" --pidfile "$T/pty.pid" "$@"
    ) >"$T/pty.out" 2>"$T/pty.err" </dev/null 3>&- &
    PTY=$!
    PIDS+=("$PTY")
    wait_until 10 test -s "$T/pty.pid" || fail "pty.py did not start: $(cat "$T/pty.err")"
    PTY_SID=$(cat "$T/pty.pid")
}

# pty_done SECS: pty.py played its script to the end within SECS.
pty_done() {
    wait_until "$1" ended "$PTY" || fail "pty.py still runs after $1 s; so far: $(cat "$T/pty.log")"
    rc=0
    wait "$PTY" || rc=$?
    [ "$rc" -eq 0 ] || fail "pty.py exited $rc: $(cat "$T/pty.err")
--- transcript:
$(cat "$T/pty.out")"
}

# seen REGEX: the terminal has shown it (grep -E)
seen() { grep -qE -- "$1" "$T/pty.log" 2>/dev/null; }
# in_session COMM: the pid of the process named COMM in the terminal's session
in_session() { pgrep -s "$PTY_SID" -x "$1" | head -n 1; }

# end_pty_session: for teardown; kills what is left of the terminal's
# session (PTY_SID, if pty_play ran), and of CMDs that left it.
end_pty_session() {
    local p
    [ -n "${PTY_SID:-}" ] || return 0
    for p in $(pgrep -s "$PTY_SID" || true); do
        kill -CONT "$p" 2>/dev/null || true
        kill -KILL "$p" 2>/dev/null || true
    done
}
