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
    "$TOP/tests/broker.sh" ctl "$AMQPLOCK_TEST_BROKER_DIR" "$@"
}

# "name durable exclusive" for every queue whose name starts with $1,
# sorted, one per line.
queues_like() {
    rmqctl -q list_queues name durable exclusive --no-table-headers 2>/dev/null |
        awk -v p="$1" 'index($1, p) == 1 { print $1, $2, $3 }' | sort -V
}

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
# seconds since $1, e.g. 1.234
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f\n", b - a }'; }
# at_least X Y / at_most X Y: numeric comparisons of seconds
at_least() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x >= y) }' || fail "$1 s is less than $2 s"; }
at_most() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x <= y) }' || fail "$1 s is more than $2 s"; }

# --- background processes (tests set T=$BATS_TEST_TMPDIR and PIDS=()) ---

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

# keep PID: kill PID in teardown.
keep() { PIDS+=("$1"); }

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
    local end
    end=$(awk -v t="$EPOCHREALTIME" -v s="$1" 'BEGIN { printf "%.3f", t + s }')
    shift
    until "$@"; do
        awk -v t="$EPOCHREALTIME" -v e="$end" 'BEGIN { exit !(t >= e) }' && return 1
        sleep 0.05
    done
}

# ended PID: the process is gone or a zombie.
ended() {
    local st
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
    [ -z "$st" ] || [ "$st" = Z ]
}
running() { ! ended "$1"; }
# gone PID: no such process (not even a zombie)
gone() { ! kill -0 "$1" 2>/dev/null; }

# wait_exit PID SECS: waits at most SECS for the background process PID to
# end (the test fails otherwise) and sets rc to its exit status.
wait_exit() {
    wait_until "$2" ended "$1" || fail "process $1 still runs after $2 s"
    rc=0
    wait "$1" || rc=$?
}

# has_line FILE REGEX (grep -E -x)
has_line() { grep -qEx -- "$2" "$1" 2>/dev/null; }
