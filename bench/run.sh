#!/usr/bin/env bash
# bench/run.sh: the benchmark behind `make bench` (bench/bench.mk installs
# what is missing and builds ./amqplock, bench/floor and bench/timeit first).
#
# Starts a private RabbitMQ (tests/lib/broker.sh) and a private etcd, both on
# random loopback ports with all their files under one temporary directory,
# then measures:
#   1. `amqplock hold NAME -- true` on a 1-slot semaphore against
#      bench/floor (connect, login, channel.open, one exclusive
#      queue.declare, connection.close: the least an AMQP client can do for
#      a hold), `flock FILE true` and `etcdctl lock NAME true`, and what
#      `hold --token` (a fencing token) adds;
#   2. `amqplock max NAME` at 1, 100 and 1000 slots;
#   3. acquiring once, as `amqplock hold -n NAME -- true`, at 1 slot, at 1000
#      slots with none held and at 1000 slots with 999 held (by
#      tests/tools/holdq.pl on one connection);
#   4. `amqplock status NAME` at 1000 slots (0 and 999 held);
#   5. `amqplock create NAME 1000` and `destroy NAME` against 1000 durable
#      declares (and deletes) sent one at a time by bench/floor;
#   6. hand-off latency on a 1-slot semaphore with 20 waiters, after clean
#      releases and after kill -9 of the holder (bench/handoff.pl);
#   7. peak RSS of `amqplock hold NAME -- true` (/usr/bin/time -v);
#   8. the lease: what it adds to a hold (against `hold --lease 0`, which
#      still probes leases), how long a hold whose connection the broker
#      closed takes to re-attach, and the frames a holder sends per minute
#      (bench/lease.pl);
#   9. contention (bench/contention.pl): whole `amqplock hold` processes
#      arriving 50 on 1 slot 20 ms apart (and the same with `etcdctl
#      lock`), 100 on 5 slots 5 ms apart, 200 on 5 slots at once: how busy
#      the slots were kept, hand-off, arrival-order inversions (and those
#      of the same 200 processes with no lock: the order they start in); and what
#      a hold costs the broker, in frames counted by a relay
#      (tests/tools/proxy.pl with a count), alone and in a line.
# 1-4 are medians of BENCH_ROUNDS (default 40) whole-process runs per
# command after 3 warm-up rounds, the commands compared taking turns in one
# loop (bench/timeit) so that machine noise hits all of them; 5 has
# BENCH_SLOW_ROUNDS (default 4) rounds in a fixed order.
#
# Prints a table and writes it, with a description of the machine, to
# bench/RESULTS.md ($BENCH_RESULTS if set). RMQ_BIN (tests/lib/broker.sh)
# may name another RabbitMQ's commands: tests/lib/brokers.sh's 4.0-bench
# and 4.3-bench runs set it to a Debian root's, BENCH_DPKG_ROOT to that
# root (whose packages' versions RESULTS gives) and BENCH_BY to what ran
# it. The targets beside the figures are benchmark figures,
# not assertions: the exit status only says whether everything could be
# measured. Every wait is bounded; the servers, every process started here
# and the temporary directory are gone at the end, also after a failure or
# an interrupt.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
B=$TOP/bench
AL=$TOP/amqplock
ROUNDS=${BENCH_ROUNDS:-40}
SLOW_ROUNDS=${BENCH_SLOW_ROUNDS:-4}
HANDOFF_ROUNDS=${BENCH_HANDOFF_ROUNDS:-3}
HANDOFF_WAITERS=20
LEASE_ROUNDS=${BENCH_LEASE_ROUNDS:-10}
KILL_WAITERS=${BENCH_KILL_WAITERS:-15}
RSS_RUNS=10
CPU_HOLDS=${BENCH_CPU_HOLDS:-100}
RESULTS=${BENCH_RESULTS:-$B/RESULTS.md}

export ETCDCTL_API=3
unset AMQP_URL AMQPLOCK_PREFIX ETCDCTL_ENDPOINTS

log() { printf 'bench: %s\n' "$*" >&2; }
die() {
    printf 'bench: %s\n' "$*" >&2
    exit 1
}

for f in "$AL" "$B/floor" "$B/timeit" "$B/stamp"; do
    [ -x "$f" ] || die "$f is missing: run 'make bench'"
done
for c in etcd etcdctl flock perl /usr/bin/time timeout; do
    command -v "$c" >/dev/null || die "$c is missing: run 'make bench'"
done

START=$SECONDS
WORK=$(mktemp -d "${TMPDIR:-/tmp}/amqplock-bench.XXXXXX")
CUR=          # the measurement running in the background
ETCD_PID=
HOLDQ_PID=
FRAMES_PID=
BROKER_STARTED=

# ended PID: tests/lib/procs.sh
. "$TOP/tests/lib/procs.sh"

# stop_pid PID SIG SECS [reap]: sends SIG, waits up to SECS for the process
# to end, then SIGKILL (and 2 s more); with "reap", reaps it. Not "reap" in
# the exit trap: bash's wait can block for good on a child that a trapped
# signal interrupted a wait for.
stop_pid() {
    local pid=$1 sig=$2 secs=$3 i
    [ -n "$pid" ] || return 0
    kill "-$sig" "$pid" 2>/dev/null || true
    for ((i = 0; i < secs * 10; i++)); do
        ended "$pid" && break
        sleep 0.1
    done
    if ! ended "$pid"; then
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 20; i++)); do
            ended "$pid" && break
            sleep 0.1
        done
    fi
    if [ "${4:-}" = reap ] && ended "$pid"; then
        wait "$pid" 2>/dev/null || true
    fi
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    set +e
    [ "$rc" -eq 0 ] || log "failed (status $rc); cleaning up"
    stop_pid "$CUR" TERM 10
    stop_pid "$HOLDQ_PID" TERM 5
    stop_pid "$FRAMES_PID" TERM 5
    stop_pid "$ETCD_PID" TERM 10
    if [ -n "$BROKER_STARTED" ]; then
        timeout 120 "$TOP/tests/lib/broker.sh" stop "$WORK/broker" >/dev/null 2>&1 ||
            log "could not stop the broker cleanly"
    fi
    rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# step OUT CMD...: CMD in the background with stdout to OUT, waited for
# here, so that a signal to this script is acted on at once.
step() {
    local out=$1 rc=0
    shift
    "$@" >"$out" &
    CUR=$!
    wait "$CUR" || rc=$?
    CUR=
    return "$rc"
}

# amqplock, bounded.
al() { timeout 120 "$AL" "$@"; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
    local p i
    for i in $(seq 1 100); do
        p=$((30000 + RANDOM % 9000))
        if port_free "$p"; then
            echo "$p"
            return 0
        fi
    done
    die "no free port found"
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
# Percent of CPU time idle over the next 2 s (all cores), from /proc/stat.
cpu_idle() {
    local a b
    a=$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
    sleep 2
    b=$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
    awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
        printf "%.0f", (y[2] > x[2]) ? 100 * (y[1] - x[1]) / (y[2] - x[2]) : 0 }'
}

# Numbers: ratio A B (A/B, 2 decimals); le A B / ge A B (exit status).
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
fmt() { awk -v a="$1" 'BEGIN { printf "%.2f", a }'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
met() { if "$@"; then echo met; else echo "**not met**"; fi; }

# Noise from other work on the machine: CPU ticks (all cores) used over the
# measurements by everything, against those used by this script's children
# (reaped), the broker and etcd.
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
# proc_ticks PID [1]: utime + stime of PID (with 1: plus its reaped children).
proc_ticks() {
    local v=
    [ -z "$1" ] || v=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null |
        awk -v c="${2:-0}" '{ print $12 + $13 + (c ? $14 + $15 : 0) }')
    echo "${v:-0}"
}
# ticks_now: "OURS BROKER ETCD", the ticks of this script with what it
# reaped, of the broker's node and of etcd; own_ticks: their sum.
ticks_now() { echo "$(proc_ticks $$ 1) $(proc_ticks "$BEAM_PID") $(proc_ticks "$ETCD_PID")"; }
own_ticks() {
    local a b e
    read -r a b e <<<"$(ticks_now)"
    echo $((a + b + e))
}
BEAM_PID=

# CPU per hold (row 9): what a hold costs the machine, not only how long
# it takes, because on 2 cores a busy semaphore runs out of CPU before it
# runs out of protocol. cpu_step LABEL OUT CMD...: step OUT CMD..., then
# "LABEL PROCESSES BROKER ETCD WALL" appended to $WORK/cpu.txt: the CPU
# ticks of the processes the step started (all reaped by now, so counted
# in this script's children), of the broker's node and of etcd, and the
# step's wall time in seconds.
cpu_step() {
    local label=$1 c0 b0 e0 c1 b1 e1 t0 t1
    shift
    read -r c0 b0 e0 <<<"$(ticks_now)"
    t0=$(date +%s.%N)
    step "$@"
    t1=$(date +%s.%N)
    read -r c1 b1 e1 <<<"$(ticks_now)"
    echo "$label $((c1 - c0)) $((b1 - b0)) $((e1 - e0))" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" >>"$WORK/cpu.txt"
}
# ets_bytes: "TABLES BYTES" of the Raft log's ETS tables on the broker's
# node (those of its ra_log_ets process; every table if it has none), "?"
# if they cannot be read. The whole node's ETS memory moves by more than
# a hold's leftovers as the metrics of closed connections are cleared.
ets_bytes() {
    local v
    # shellcheck disable=SC2016 # Erlang, not shell
    v=$(timeout 60 "$TOP/tests/lib/broker.sh" ctl "$WORK/broker" eval '
        O = whereis(ra_log_ets),
        T = [X || X <- ets:all(), O == undefined orelse ets:info(X, owner) == O],
        io:format("~b ~b~n", [length(T),
            lists:sum([ets:info(X, memory) || X <- T]) * erlang:system_info(wordsize)]).' \
        2>/dev/null | awk 'NF == 2 && $1 ~ /^[0-9]+$/ { print; exit }')
    echo "${v:-?}"
}
# repeat N CMD...: CMD N times in a row; fails with the first that fails.
repeat() {
    local n=$1 i
    shift
    for ((i = 0; i < n; i++)); do "$@" >/dev/null || return 1; done
}

LOAD_START=$(loadavg)

# --- servers ---------------------------------------------------------------

log "starting a private RabbitMQ under $WORK/broker"
BROKER_STARTED=1
timeout 200 "$TOP/tests/lib/broker.sh" start "$WORK/broker" >/dev/null || die "RabbitMQ did not start"
# shellcheck disable=SC1091
. "$WORK/broker/env"
BEAM_PID=$(pgrep -f -- "beam.smp.*-home $WORK/broker/home" | head -n 1) || true
[ -n "$BEAM_PID" ] || log "cannot find the broker's beam.smp: its CPU counts as foreign"

ETCD_PORT=$(free_port)
ETCD_PEER=$(free_port)
[ "$ETCD_PORT" != "$ETCD_PEER" ] || ETCD_PEER=$(free_port)
ETCD_URL=http://127.0.0.1:$ETCD_PORT
mkdir -m 700 "$WORK/etcd"
log "starting a private etcd on $ETCD_URL"
etcd --name bench --data-dir "$WORK/etcd/data" \
    --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" \
    --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
    --initial-cluster "bench=http://127.0.0.1:$ETCD_PEER" --initial-cluster-state new \
    --logger zap --log-outputs stderr >"$WORK/etcd/etcd.log" 2>&1 </dev/null &
ETCD_PID=$!
deadline=$((SECONDS + 30))
until timeout 5 etcdctl --endpoints="$ETCD_URL" --command-timeout=2s endpoint health >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ] || ended "$ETCD_PID"; then
        tail -n 20 "$WORK/etcd/etcd.log" >&2
        die "etcd did not start"
    fi
    sleep 0.2
done

# --- semaphores --------------------------------------------------------------

log "creating semaphores (1000 slots take a few seconds each)"
al -q create bench-1 1
al -q create bench-100 100
al -q create bench-1000 1000
al -q create bench-busy 1000
al -q create bench-handoff 1
al -q create bench-c1 1
al -q create bench-c5 5
log "holding 999 of bench-busy's 1000 slots with tests/tools/holdq.pl"
mapfile -t busyq < <(for k in $(seq 1 999); do echo "amqplock.bench-busy-$k-B"; done)
perl "$TOP/tests/tools/holdq.pl" "$AMQPLOCK_TEST_PORT" "${busyq[@]}" >"$WORK/holdq.out" 2>&1 &
HOLDQ_PID=$!
deadline=$((SECONDS + 90))
until grep -qx ready "$WORK/holdq.out"; do
    { [ $SECONDS -lt $deadline ] && ! ended "$HOLDQ_PID"; } || {
        cat "$WORK/holdq.out" >&2
        die "holdq.pl did not hold the 999 queues"
    }
    sleep 0.1
done
held=$(al --json status bench-busy | perl -MJSON::PP -e \
    'my $j = decode_json(join "", <STDIN>); print scalar @{$j->{held}}')
[ "$held" = 999 ] || die "bench-busy: $held slots held, expected 999"

# CMD start-up inside the hand-off measurement: bench/stamp.
: >"$WORK/flock"
LOAD_MEASURE=$(loadavg)
IDLE_BEFORE=$(cpu_idle)
[ "$IDLE_BEFORE" -ge 80 ] ||
    log "WARNING: the machine is busy (${IDLE_BEFORE}% CPU idle before measuring): figures will be noisy"
T=$B/timeit
read -r BUSY0 TOTAL0 <<<"$(machine_ticks)"
OWN0=$(own_ticks)

# --- 1: hold against the floors ---------------------------------------------

log "1: hold vs floor vs flock vs etcd, $ROUNDS rounds"
step "$WORK/m1.txt" "$T" -r "$ROUNDS" -w 3 -t 60 -o "$WORK/raw.txt" -- \
    hold "$AL" hold bench-1 -- true :: \
    hold0 "$AL" hold --lease 0 bench-1 -- true :: \
    holdtoken "$AL" hold --token bench-1 -- true :: \
    floor "$B/floor" :: \
    flock flock "$WORK/flock" true :: \
    etcd etcdctl --endpoints="$ETCD_URL" lock bench-1 true :: \
    stamp "$B/stamp" /dev/null 0 x

# --- 2-4: max, acquire once, status at 1 to 1000 slots ------------------------

log "2-4: max, hold -n and status at 1, 100, 1000 slots, $ROUNDS rounds"
step "$WORK/m2.txt" "$T" -r "$ROUNDS" -w 3 -t 60 -o "$WORK/raw.txt" -- \
    max1 "$AL" max bench-1 :: \
    max100 "$AL" max bench-100 :: \
    max1000 "$AL" max bench-1000 :: \
    acq1 "$AL" hold -n bench-1 -- true :: \
    acq1000 "$AL" hold -n bench-1000 -- true :: \
    acq1000busy "$AL" hold -n bench-busy -- true :: \
    status1000 "$AL" status bench-1000 :: \
    status1000busy "$AL" status bench-busy
stop_pid "$HOLDQ_PID" TERM 5 reap
HOLDQ_PID=

# --- 5: create and destroy 1000 slots ------------------------------------------

log "5: create/destroy 1000 vs 1000 declares/deletes one at a time, $SLOW_ROUNDS rounds"
step "$WORK/m5.txt" "$T" -f -r "$SLOW_ROUNDS" -w 0 -t 180 -o "$WORK/raw.txt" -- \
    create1000 "$AL" -q create bench-c 1000 :: \
    destroy1000 "$AL" -q destroy bench-c :: \
    fdeclare1000 "$B/floor" declare1000 amqplock.bench-floorq :: \
    fdelete1000 "$B/floor" delete1000 amqplock.bench-floorq

# --- 6: hand-off -----------------------------------------------------------------

log "6: hand-off after clean releases, $HANDOFF_ROUNDS rounds of $HANDOFF_WAITERS waiters"
step "$WORK/m6clean.txt" perl "$B/handoff.pl" clean "$AL" bench-handoff "$HANDOFF_ROUNDS" \
    "$HANDOFF_WAITERS" "$WORK"
log "6: the broker's floor of a clean hand-off (bench/floor handoff)"
step "$WORK/m6floor.txt" "$B/floor" handoff 60
log "6: the queue work of a lease passed over, today's line against #line (bench/floor pass)"
# Taking turns, 3 runs of 100 each, so that noise hits both
# shellcheck disable=SC2016 # $1 is the inner shell's
step "$WORK/m6pass.txt" sh -c 'for i in 1 2 3; do "$1" pass sac 100 && "$1" pass get 100 || exit 1; done' \
    sh "$B/floor"
log "6: hand-off after kill -9 of the holder, $KILL_WAITERS waiters"
step "$WORK/m6kill.txt" perl "$B/handoff.pl" kill "$AL" bench-handoff 1 "$KILL_WAITERS" "$WORK"
# After the kill -9 row: its 120 quorum queues would leave 120 more of the
# Raft log's tables in the broker, which slow its later quorum queues down.
log "6: what a lease costs the broker: a queue made and deleted, or a message (bench/floor lease)"
step "$WORK/m6lease.txt" "$B/floor" lease 60

# --- 8: the lease ---------------------------------------------------------------

log "8: re-attach after close_connection, $LEASE_ROUNDS rounds; frames per held slot"
step "$WORK/m8reclaim.txt" perl "$B/lease.pl" reclaim "$AL" bench-handoff "$LEASE_ROUNDS" \
    "$TOP/tests/lib/broker.sh" ctl "$WORK/broker"
step "$WORK/m8rate.txt" perl "$B/lease.pl" rate "$AL" bench-handoff 20 \
    "$TOP/tests/lib/broker.sh" ctl "$WORK/broker"

# --- 9: contention ----------------------------------------------------------------

log "9: contention: 50 holds on 1 slot 20 ms apart (and etcdctl lock), 100 on 5 slots 5 ms apart, 200 at once (and with no lock)"
cpu_step one "$WORK/m9one.txt" perl "$B/contention.pl" "$AL" bench-c1 1 50 20 "$WORK"
cpu_step etcd "$WORK/m9etcd.txt" env CONTENTION_LOCK="etcdctl --endpoints=$ETCD_URL lock bench-c1 --" \
    perl "$B/contention.pl" "$AL" bench-c1-etcd 1 50 20 "$WORK"
cpu_step five "$WORK/m9five.txt" perl "$B/contention.pl" "$AL" bench-c5 5 100 5 "$WORK"
cpu_step herd "$WORK/m9herd.txt" perl "$B/contention.pl" "$AL" bench-c5 5 200 0 "$WORK"
# The same 200 processes with no lock at all (`env` runs the job at once):
# the order in which 200 processes started together on this machine reach
# their command, which no lock can improve on.
step "$WORK/m9nolock.txt" env CONTENTION_LOCK=env \
    perl "$B/contention.pl" "$AL" bench-nolock 1 200 0 "$WORK"
log "9: CPU per uncontended hold, $CPU_HOLDS in a row each: hold, hold --lease 0, floor, etcdctl lock"
# (and what those holds leave in the broker's memory: RabbitMQ's Raft log
# keeps a table of each quorum queue deleted, a lease among them, until
# its write-ahead log rolls over; docs/operators.md, "The broker's memory")
ets_bytes >"$WORK/ets0"
cpu_step hold /dev/null repeat "$CPU_HOLDS" "$AL" hold bench-1 -- true
ets_bytes >"$WORK/ets1"
cpu_step hold0 /dev/null repeat "$CPU_HOLDS" "$AL" hold --lease 0 bench-1 -- true
ets_bytes >"$WORK/ets2"
cpu_step floor /dev/null repeat "$CPU_HOLDS" "$B/floor"
cpu_step etcd1 /dev/null repeat "$CPU_HOLDS" etcdctl --endpoints="$ETCD_URL" lock bench-1 true

# frames OUT CMD...: CMD (which may use $FRAMES_URL) with tests/tools/proxy.pl
# relaying to the broker; its counts in OUT.
frames() {
    local out=$1 deadline=$((SECONDS + 10))
    shift
    rm -f "$WORK/frames.port"
    perl "$TOP/tests/tools/proxy.pl" "$WORK/frames.port" "$AMQPLOCK_TEST_PORT" "$out" &
    FRAMES_PID=$!
    until [ -s "$WORK/frames.port" ]; do
        [ $SECONDS -lt $deadline ] && ! ended "$FRAMES_PID" || die "the counting relay did not start"
        sleep 0.1
    done
    FRAMES_URL="amqp://guest:guest@127.0.0.1:$(cat "$WORK/frames.port")/"
    "$@" || die "$* failed behind the counting relay"
    stop_pid "$FRAMES_PID" TERM 10 reap
    FRAMES_PID=
    [ -s "$out" ] || die "the counting relay wrote no counts"
}
holds_alone() { for _ in $(seq 1 "$1"); do al -q --url "$FRAMES_URL" hold bench-c1 -- true; done; }
holds_in_line() {
    CONTENTION_OPTS="--url $FRAMES_URL" perl "$B/contention.pl" "$AL" bench-c1 1 "$1" 20 "$WORK" \
        >"$WORK/m9line.txt"
}
log "9: frames per hold: 20 alone, 20 in a line"
frames "$WORK/m9alone.frames" holds_alone 20
frames "$WORK/m9line.frames" holds_in_line 20

# --- 7: peak RSS -------------------------------------------------------------------

log "7: peak RSS, $RSS_RUNS runs each"
rss() { # LABEL CMD...: appends "LABEL KiB" to $WORK/rss.txt
    local label=$1
    shift
    timeout 60 /usr/bin/time -v -o "$WORK/time.out" "$@" >/dev/null ||
        die "$label: $* failed under /usr/bin/time"
    awk -v l="$label" -F': ' '/Maximum resident set size/ { print l, $2 }' \
        "$WORK/time.out" >>"$WORK/rss.txt"
}
for _ in $(seq 1 "$RSS_RUNS"); do
    rss hold "$AL" hold bench-1 -- true
    rss floor "$B/floor"
    rss flock flock "$WORK/flock" true
done

read -r BUSY1 TOTAL1 <<<"$(machine_ticks)"
OWN1=$(own_ticks)
FOREIGN=$(awk -v b=$((BUSY1 - BUSY0)) -v t=$((TOTAL1 - TOTAL0)) -v o=$((OWN1 - OWN0)) \
    'BEGIN { f = t > 0 ? 100 * (b - o) / t : 0; printf "%.0f", f < 0 ? 0 : f }')
[ "$FOREIGN" -le 10 ] ||
    log "WARNING: other processes used ${FOREIGN}% of the machine's CPU during the measurements"
LOAD_END=$(loadavg)
IDLE_AFTER=$(cpu_idle)
for s in bench-1 bench-100 bench-1000 bench-busy bench-handoff bench-c1 bench-c5; do
    al -q destroy "$s" || log "could not destroy $s"
done

# --- the table -----------------------------------------------------------------------

declare -A MED LO HI N
for f in m1 m2 m5; do
    while read -r label n med p10 p90 _min _max; do
        MED[$label]=$med LO[$label]=$p10 HI[$label]=$p90 N[$label]=$n
    done <"$WORK/$f.txt"
done
# handoff.pl: n N p50 MS p99 MS min MS max MS overlaps K
read -r _ hc_n _ hc_p50 _ hc_p99 _ hc_min _ hc_max _ hc_over <"$WORK/m6clean.txt"
read -r _ hk_n _ hk_p50 _ hk_p99 _ hk_min _ hk_max _ hk_over <"$WORK/m6kill.txt"
# floor handoff: handoff n N p50 MS p10 MS p90 MS woken p50 MS
read -r _ _ hf_n _ hf_p50 _ hf_p10 _ hf_p90 _ _ hf_woken <"$WORK/m6floor.txt"
# floor pass: "pass sac|get n N p50 MS p10 MS p90 MS", 3 runs each.
# pass_med MODE FIELD: the median of that figure over the runs; pass_n
# MODE: the hand-overs of all of them.
pass_med() { awk -v m="$1" -v f="$2" '$2 == m { print $f }' "$WORK/m6pass.txt" | sort -n | sed -n 2p; }
pass_n() { awk -v m="$1" '$2 == m { n += $4 } END { print n }' "$WORK/m6pass.txt"; }
ps_p50=$(pass_med sac 6) ps_p10=$(pass_med sac 8) ps_p90=$(pass_med sac 10) ps_n=$(pass_n sac)
pg_p50=$(pass_med get 6) pg_p10=$(pass_med get 8) pg_p90=$(pass_med get 10) pg_n=$(pass_n get)
# floor lease: "lease n N quorum queue declare MS delete MS classic queue
# declare MS delete MS message publish MS renew MS take MS out_under_looks
# yes|no unacked_counts yes|no requeued_runs_out yes|no claimed_before_back
# K/N quorum_refuses_second yes|no"
read -r _ _ fl_n _ _ _ fl_qd _ fl_qx _ _ _ fl_cd _ fl_cx _ _ fl_mp _ fl_mr _ fl_mt _ fl_out \
    _ fl_unacked _ fl_requeued _ fl_before _ fl_quorum <"$WORK/m6lease.txt"
sum() { awk -v a="$1" -v b="$2" 'BEGIN { print a + b }'; }
# lease.pl: "n N p50 MS max MS"; "frames_per_min F"
read -r _ rc_n _ rc_p50 _ rc_max <"$WORK/m8reclaim.txt"
read -r _ frames_min <"$WORK/m8rate.txt"
# contention.pl: holds N slots S util PCT handoff_p50 MS handoff_p99 MS
# handoff_max MS inversions K pairs P worst_wait S failed F
declare -A CT
for c in one etcd five herd nolock; do
    read -r _ n _ _ _ util _ p50 _ p99 _ hmax _ inv _ pairs _ worst _ <"$WORK/m9$c.txt"
    CT[$c]="$n $util $p50 $p99 $hmax $inv $pairs $worst"
done
# proxy.pl: connections C to_broker_methods M to_broker_messages P
# from_broker_methods R from_broker_messages D heartbeats H
per_hold() { # FILE HOLDS: "to the broker T (M methods, P messages); back B"
    read -r _ _ _ m _ p _ r _ d _ <"$1"
    awk -v m="$m" -v p="$p" -v r="$r" -v d="$d" -v n="$2" 'BEGIN {
        printf "%.0f to the broker (%.0f methods, %.0f messages), %.0f back", (m + p) / n, m / n, p / n, (r + d) / n }'
}
# Median peak RSS (KiB) of a label's runs.
rss_med() {
    awk -v l="$1" '$1 == l { print $2 }' "$WORK/rss.txt" | sort -n |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
rss_max() { awk -v l="$1" '$1 == l && $2 > m { m = $2 } END { print m }' "$WORK/rss.txt"; }

# cpu_of KIND HOLDS: CPU per hold in ms, of the processes and of the server
# (the broker and etcd: each idles while the other is measured), and how
# busy the machine's cores were over the step, in %.
cpu_of() {
    awk -v l="$1" -v n="$2" -v hz="$(getconf CLK_TCK)" -v c="$(nproc)" '$1 == l {
        printf "%.1f %.1f %.0f\n", 1000 * $2 / hz / n, 1000 * ($3 + $4) / hz / n,
            100 * ($2 + $3 + $4) / hz / ($5 * c) }' "$WORK/cpu.txt"
}
# ets_per_hold BEFORE AFTER: the Raft log's tables and KiB per hold between
# two readings ($WORK/BEFORE, $WORK/AFTER: ets_bytes), or "?".
ets_per_hold() {
    awk -v n="$CPU_HOLDS" 'NR == FNR { t = $1; b = $2; next }
        { if ($1 ~ /^[0-9]+$/ && t ~ /^[0-9]+$/)
              printf "%.2f tables, %.1f KiB", ($1 - t) / n, ($2 - b) / 1024 / n
          else print "?" }' "$WORK/$1" "$WORK/$2"
}
# ceiling MS: the utilisation (%) that MS of CPU per hold allows 5 slots
# of 50 ms jobs on this machine's cores.
ceiling() {
    awk -v t="$1" -v c="$(nproc)" 'BEGIN { u = t > 0 ? 100 * 0.05 * c / (5 * t / 1000) : 100
        printf "%.0f", (u > 100 ? 100 : u) }'
}
m() { fmt "${MED[$1]}"; }
spread() { echo "$(fmt "${LO[$1]}")–$(fmt "${HI[$1]}")"; }
# row CELLS...: one table row.
row() {
    local out="|" c
    for c in "$@"; do out+=" $c |"; done
    echo "$out"
}
R_HOLD=$(ratio "${MED[hold]}" "${MED[floor]}")
R_LEASE=$(ratio "${MED[hold]}" "${MED[hold0]}")
R_ETCD=$(ratio "${MED[etcd]}" "${MED[hold]}")
R_MAX=$(ratio "${MED[max1000]}" "${MED[max1]}")
R_ACQ=$(ratio "${MED[acq1000busy]}" "${MED[acq1]}")
RSS_HOLD=$(rss_med hold)
RSS_HOLD_MIB=$(awk -v k="$RSS_HOLD" 'BEGIN { printf "%.2f", k / 1024 }')

# Backquotes in single quotes are Markdown here.
# shellcheck disable=SC2016
{
    echo "| # | measurement | median ms | p10–p90 ms | n | ratio | target | met? |"
    echo "|---|---|---:|---:|---:|---|---|---|"
    row 1 '`amqplock hold NAME -- true` (1 slot)' "$(m hold)" "$(spread hold)" "${N[hold]}" \
        "hold/floor $R_HOLD" "≤ 1.5" "$(met le "$R_HOLD" 1.5)"
    row 1 '`amqplock hold --lease 0 NAME -- true` (no lease)' "$(m hold0)" "$(spread hold0)" \
        "${N[hold0]}" "hold/hold0 $R_LEASE" "≤ 1.2" "$(met le "$R_LEASE" 1.2)"
    row 1 '`amqplock hold --token NAME -- true` (a fencing token)' "$(m holdtoken)" \
        "$(spread holdtoken)" "${N[holdtoken]}" \
        "$(awk -v a="${MED[holdtoken]}" -v b="${MED[hold]}" 'BEGIN { printf "+%.2f ms over hold", a - b }')" \
        "" ""
    row 1 '`bench/floor` (connect, login, channel, exclusive declare, close)' "$(m floor)" \
        "$(spread floor)" "${N[floor]}" "" "" ""
    row 1 '`flock FILE true`' "$(m flock)" "$(spread flock)" "${N[flock]}" \
        "hold/flock $(ratio "${MED[hold]}" "${MED[flock]}")" "" ""
    row 1 '`etcdctl lock NAME true`' "$(m etcd)" "$(spread etcd)" "${N[etcd]}" \
        "etcd/hold $R_ETCD" "≥ 3" "$(met ge "$R_ETCD" 3)"
    row 2 '`amqplock max NAME`, 1 slot' "$(m max1)" "$(spread max1)" "${N[max1]}" "" "" ""
    row 2 '`amqplock max NAME`, 100 slots' "$(m max100)" "$(spread max100)" "${N[max100]}" \
        "/1 slot $(ratio "${MED[max100]}" "${MED[max1]}")" "" ""
    row 2 '`amqplock max NAME`, 1000 slots' "$(m max1000)" "$(spread max1000)" \
        "${N[max1000]}" "/1 slot $R_MAX" "≤ 3" "$(met le "$R_MAX" 3)"
    row 3 'acquire once (`hold -n NAME -- true`), 1 slot' "$(m acq1)" "$(spread acq1)" \
        "${N[acq1]}" "" "" ""
    row 3 'acquire once, 1000 slots, 0 held' "$(m acq1000)" "$(spread acq1000)" \
        "${N[acq1000]}" "/1 slot $(ratio "${MED[acq1000]}" "${MED[acq1]}")" "" ""
    row 3 'acquire once, 1000 slots, 999 held' "$(m acq1000busy)" "$(spread acq1000busy)" \
        "${N[acq1000busy]}" "/1 slot $R_ACQ" "≤ 3" "$(met le "$R_ACQ" 3)"
    row 4 '`amqplock status NAME`, 1000 slots, 0 held' "$(m status1000)" \
        "$(spread status1000)" "${N[status1000]}" \
        "/max 1000 $(ratio "${MED[status1000]}" "${MED[max1000]}")" "" ""
    row 4 '`amqplock status NAME`, 1000 slots, 999 held' "$(m status1000busy)" \
        "$(spread status1000busy)" "${N[status1000busy]}" \
        "/max 1000 $(ratio "${MED[status1000busy]}" "${MED[max1000]}")" "" ""
    row 5 '`amqplock create NAME 1000`' "$(m create1000)" "$(spread create1000)" \
        "${N[create1000]}" "/floor $(ratio "${MED[create1000]}" "${MED[fdeclare1000]}")" "" ""
    row 5 '`floor declare1000` (1000 durable declares, one at a time)' "$(m fdeclare1000)" \
        "$(spread fdeclare1000)" "${N[fdeclare1000]}" "" "" ""
    row 5 '`amqplock destroy NAME` (1000 slots)' "$(m destroy1000)" "$(spread destroy1000)" \
        "${N[destroy1000]}" "/floor $(ratio "${MED[destroy1000]}" "${MED[fdelete1000]}")" "" ""
    row 5 '`floor delete1000` (1000 deletes, one at a time)' "$(m fdelete1000)" \
        "$(spread fdelete1000)" "${N[fdelete1000]}" "" "" ""
    row 6 "hand-off after a clean release, p50 ($HANDOFF_WAITERS waiters)" "$(fmt "$hc_p50")" \
        "min–max $(fmt "$hc_min")–$(fmt "$hc_max")" "$hc_n" "" "≤ 5 ms" \
        "$(met le "$hc_p50" 5)"
    row 6 "hand-off after a clean release, p99" "$(fmt "$hc_p99")" "" "$hc_n" "" "≤ 20 ms" \
        "$(met le "$hc_p99" 20)"
    row 6 '(the same queue work alone, `bench/floor handoff`: the broker'"'"'s floor)' \
        "$(fmt "$hf_p50")" "$(fmt "$hf_p10")–$(fmt "$hf_p90")" "$hf_n" \
        "woken after $(fmt "$hf_woken")" "" ""
    row 6 '(a lease passed over, `bench/floor pass sac`: offer and answer through `#waiters`)' \
        "$(fmt "$ps_p50")" "$(fmt "$ps_p10")–$(fmt "$ps_p90")" "$ps_n" "" "" ""
    row 6 '(the same through `#line`, `bench/floor pass get`: the entry taken with basic.get)' \
        "$(fmt "$pg_p50")" "$(fmt "$pg_p10")–$(fmt "$pg_p90")" "$pg_n" \
        "get/sac $(ratio "$pg_p50" "$ps_p50")" "" ""
    row 6 '(a lease as src/ makes one before RabbitMQ 4.2.6, `bench/floor lease`: a quorum queue declared, then deleted)' \
        "$(fmt "$(sum "$fl_qd" "$fl_qx")")" "declare $(fmt "$fl_qd"), delete $(fmt "$fl_qx")" \
        "$fl_n" "" "" ""
    row 6 '(the same, a classic queue: 4.2.6 and later)' \
        "$(fmt "$(sum "$fl_cd" "$fl_cx")")" "declare $(fmt "$fl_cd"), delete $(fmt "$fl_cx")" \
        "$fl_n" "" "" ""
    row 6 '(a lease as a message in a lasting queue of one message: not used yet)' \
        "$(fmt "$(sum "$fl_mp" "$fl_mt")")" "publish $(fmt "$fl_mp"), take $(fmt "$fl_mt")" \
        "$fl_n" "renewal $(fmt "$fl_mr"); ran out under passive declares: $fl_out; a quorum queue refused a second: $fl_quorum" "" ""
    row 6 '(the same, taken unacknowledged: does it still count against the one message? does it run out on time once back?)' \
        "$fl_unacked; $fl_requeued" "" "" \
        "its taker's connection cut, another declared its exclusive queue and had a publish taken before the message was back: $fl_before" "" ""
    row 6 "hand-off after kill -9 of the holder, p50 ($KILL_WAITERS waiters)" \
        "$(fmt "$hk_p50")" "min–max $(fmt "$hk_min")–$(fmt "$hk_max")" "$hk_n" "" "" ""
    row 6 "hand-off after kill -9 of the holder, p99" "$(fmt "$hk_p99")" "" "$hk_n" "" "" ""
    row 6 '(whole run of the CMD, `bench/stamp`: part of each hand-off)' "$(m stamp)" \
        "$(spread stamp)" "${N[stamp]}" "" "" ""
    row 7 'peak RSS of `amqplock hold NAME -- true`' \
        "$RSS_HOLD KiB = $RSS_HOLD_MIB MiB" "max $(rss_max hold) KiB" "$RSS_RUNS" "" "≤ 4 MiB" \
        "$(met le "$RSS_HOLD_MIB" 4)"
    row 7 'peak RSS of `bench/floor`; of `flock FILE true`' \
        "$(rss_med floor) KiB; $(rss_med flock) KiB" "" "$RSS_RUNS" "" "" ""
    row 8 'a hold re-attached after `close_connection` (away_ms), p50' "$(fmt "$rc_p50")" \
        "max $(fmt "$rc_max")" "$rc_n" "" "" ""
    row 8 'frames a holder sends per minute (renewals, heartbeats)' "$frames_min" "" 1 "" "" ""
    # contention: the hand-off in the ms columns, the rest in "ratio"
    crow() { # KIND LABEL TARGET_UTIL
        local n util p50 p99 hmax inv pairs worst procs server busy
        read -r n util p50 p99 hmax inv pairs worst <<<"${CT[$1]}"
        read -r procs server busy <<<"$(cpu_of "$1" "$n")"
        row 9 "$2" "$(fmt "$p50")" "p99 $(fmt "$p99"), max $(fmt "$hmax")" "$n" \
            "utilisation ${util}%; $inv of $pairs pairs inverted; worst wait ${worst} s; CPU per hold: processes $procs ms, server $server ms; the machine's CPU ${busy}% busy" \
            "${3:+utilisation ≥ $3%}" "${3:+$(met ge "$util" "${3:-0}")}"
    }
    # CPU per hold alone, and the most utilisation that CPU allows 5
    # slots of 50 ms jobs on this machine, whatever the line does: a run
    # lasts at least its CPU over the cores.
    cpurow() { # KIND LABEL
        local procs server total
        read -r procs server _ <<<"$(cpu_of "$1" "$CPU_HOLDS")"
        total=$(awk -v a="$procs" -v b="$server" 'BEGIN { printf "%.1f", a + b }')
        row 9 "$2" "$total" "processes $procs, server $server" "$CPU_HOLDS" \
            "${3:+at most $(ceiling "$total")% busy on 5 slots}" "" ""
    }
    crow one '50 `amqplock hold`s 20 ms apart, 1 slot: hand-off p50' 93
    crow etcd 'the same with `etcdctl lock`' ""
    crow five '100 holds 5 ms apart, 5 slots: hand-off p50' 90
    crow herd '200 holds at once, 5 slots: hand-off p50' 85
    read -r _ _ _ _ _ inv pairs _ <<<"${CT[nolock]}"
    row 9 '(the same 200 started at once with no lock: the order their commands began in)' \
        "" "" 200 "$inv of $pairs pairs inverted" "" ""
    cpurow hold 'CPU per uncontended `hold NAME -- true` (ms, in a row)' ceiling
    cpurow hold0 'CPU per uncontended `hold --lease 0 NAME -- true`' ceiling
    cpurow floor 'CPU per `bench/floor`' ceiling
    cpurow etcd1 'CPU per `etcdctl lock NAME true` (server: etcd)'
    row 9 "the broker's memory left per uncontended hold (the Raft log's ETS tables), $CPU_HOLDS in a row" \
        "$(ets_per_hold ets0 ets1)" "\`--lease 0\`: $(ets_per_hold ets1 ets2)" "$CPU_HOLDS" "" "" ""
    row 9 'frames per uncontended `hold NAME -- true`' "$(per_hold "$WORK/m9alone.frames" 20)" \
        "" 20 "" "" ""
    row 9 'frames per hold, 20 holds 20 ms apart on 1 slot (waiting included)' \
        "$(per_hold "$WORK/m9line.frames" 20)" "" 20 "" "" ""
} >"$WORK/table.md"

echo
cat "$WORK/table.md"
echo
[ "$hc_over$hk_over" = 00 ] || log "WARNING: hand-off overlaps seen (clean $hc_over, kill $hk_over)"

# --- bench/RESULTS.md ------------------------------------------------------------------

cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
ram=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "?"; }
# the broker's packages: the host's, or those of the root it ran from
broker_ver() {
    dpkg-query ${BENCH_DPKG_ROOT:+--admindir="$BENCH_DPKG_ROOT/var/lib/dpkg"} -W -f='${Version}' "$1" \
        2>/dev/null || echo "?"
}
commit=$(git -C "$TOP" describe --always --dirty 2>/dev/null || echo "?")
elapsed=$((SECONDS - START))
{
    echo "# amqplock benchmark results"
    echo
    echo "Written by ${BENCH_BY:-\`make bench\`} (bench/run.sh) on $(date -u '+%Y-%m-%d %H:%M UTC');"
    echo "amqplock $("$AL" --version 2>/dev/null | head -n 1 || true) at commit $commit."
    echo
    cat "$WORK/table.md"
    echo
    echo "## How"
    echo
    echo "- Rows 1-4: median of $ROUNDS whole-process runs per command after 3 warm-up"
    echo "  rounds, wall time from spawn to exit (bench/timeit). The commands of each"
    echo "  group take turns in one loop (rows 1: hold, floor, flock, etcd, stamp; rows"
    echo "  2-4: all eight), the order rotating every round."
    echo "- Acquiring once is measured as \`amqplock hold -n NAME -- true\` (take a free"
    echo "  slot or fail, run \`true\`, release); the 999 holders are exclusive queues"
    echo "  held on one connection by tests/tools/holdq.pl."
    echo "- Row 5: $SLOW_ROUNDS rounds of create, destroy, floor declares, floor deletes,"
    echo "  in that order."
    echo "- Row 6: bench/handoff.pl. Clean: $HANDOFF_ROUNDS rounds; in each, \`amqplock"
    echo "  acquire\` holds the slot while $HANDOFF_WAITERS \`amqplock hold -w 60 NAME --"
    echo "  bench/stamp\` wait (2 s to settle), then gets SIGTERM; each CMD holds 50 ms."
    echo "  Gap = CMD start (CLOCK_MONOTONIC, taken first thing in bench/stamp) minus the time"
    echo "  just before the SIGTERM or the previous CMD's exit. Kill: one holder, then"
    echo "  $KILL_WAITERS waiters; the holding \`amqplock hold\` is killed with SIGKILL,"
    echo "  each new holder in turn; gap = CMD start minus the kill. Gaps include the"
    echo "  CMD's fork, exec and start-up. Overlaps seen (two CMDs after one"
    echo "  release): clean $hc_over, kill $hk_over. The floor: bench/floor handoff"
    echo "  hands one slot between two connections of one process $hf_n times, with"
    echo "  amqplock's requests (lease and holder queue deleted, wake-up published;"
    echo "  on delivery, holder queue, slot check and lease declared, the lease on a"
    echo "  second channel), timed from the release's send to the last answer; no"
    echo "  process is started, nothing else is asked. bench/floor pass passes a"
    echo "  lease between two connections of one process (3 runs of 100 each way,"
    echo "  taking turns; the medians of the runs' figures), from the releaser's"
    echo "  first request to the adopter's last answer: \"sac\" as src/ does today"
    echo "  (offer and answer through the single-active-consumer line), \"get\" as"
    echo "  docs/design.md's \"A line for N slots\" would (the oldest entry of #line"
    echo "  taken with basic.get, offer and answer into the waiter's own queue)."
    echo "  bench/floor lease times each request of a lease alone, one at a time, 60"
    echo "  times (medians): a queue declared with a token and deleted, quorum and"
    echo "  classic, as src/ makes leases; and a persistent message expiring in 30 s,"
    echo "  published with a confirm into a lasting durable classic queue that"
    echo "  holds one message at most (x-overflow reject-publish: a second one is"
    echo "  refused, which it checks), taken with basic.get, and renewed (taken and"
    echo "  published again); a message of 0.3 s must run out while the queue is"
    echo "  passive-declared every 0.1 s; and the same queue, made a quorum queue,"
    echo "  is asked to take a second message (docs/design.md, \"A lease as a"
    echo "  message\"). Then a message taken with basic.get and left"
    echo "  unacknowledged: is a second publish refused meanwhile? taken at 0.5 s"
    echo "  of 1.5 s by a connection then cut, is it back at 0.8 s and gone at"
    echo "  1.8 s? and, 60 times, does a connection that declares the cut one's"
    echo "  exclusive queue the moment the broker lets it have a publish taken"
    echo "  before the message is back?"
    echo "- Row 7: \"Maximum resident set size\" of /usr/bin/time -v, median of $RSS_RUNS."
    echo "- Row 9: bench/contention.pl starts whole \`amqplock -q hold -w 120 NAME -- sh -c"
    echo "  'exec bench/stamp LOG 0.05 ...'\` processes (each job 50 ms) the given time"
    echo "  apart; utilisation = time jobs ran / (slots x first job's start to last job's"
    echo "  end); hand-off = a job's start minus the end of the job before it on that"
    echo "  slot; inversions = pairs that started in the opposite order of their start"
    echo "  as processes; worst wait = longest start of process to start of job. The"
    echo "  etcd row runs \`etcdctl lock NAME sh -c ...\` instead; the row with no lock,"
    echo "  \`env sh -c ...\`: each job at once, so only its inversions mean anything (a lock's"
    echo "  waiters cannot reach it in a better order than their processes start in)."
    echo "  Frames: tests/tools/proxy.pl"
    echo "  relays the holds' connections and counts AMQP frames (methods; messages ="
    echo "  content headers: probes and wake-ups one way, returns and deliveries back)."
    echo "  CPU per hold: the user and system time of every process a row started and of"
    echo "  the server (the broker's node; etcd for etcd's rows), over the row, per hold"
    echo "  (/proc, $(getconf CLK_TCK) ticks a second); \"the machine's CPU busy\" is that time"
    echo "  over the row's wall time on $(nproc) cores. Alone: $CPU_HOLDS runs in a row of each"
    echo "  command. A run of H holds on S slots cannot end before its CPU is spent on"
    echo "  the cores, so CPU per hold C bounds the utilisation of 50 ms jobs on 5 slots"
    echo "  at 0.05 x cores / (5 x C), whatever order and hand-over the line has."
    echo "  The broker's memory left per hold: the ETS tables of the Raft log (those of"
    echo "  the node's ra_log_ets process), counted and sized by rabbitmqctl eval before"
    echo "  and after the $CPU_HOLDS holds in a row, per hold."
    echo "- Targets are benchmark figures, not assertions."
    echo
    echo "## Machine"
    echo
    echo "- CPU: $cpu; $(nproc) cores online; RAM $ram"
    echo "- Kernel: $(uname -sr); $(. /etc/os-release && echo "$PRETTY_NAME")"
    echo "- RabbitMQ: rabbitmq-server $(broker_ver rabbitmq-server), Erlang $(broker_ver erlang-base)"
    echo "  (private node on loopback, no plugins${BENCH_DPKG_ROOT:+; from the Debian root $BENCH_DPKG_ROOT})"
    echo "- librabbitmq: $(pkg-config --modversion librabbitmq 2>/dev/null || echo "?")" \
        "(librabbitmq4 $(ver librabbitmq4))"
    echo "- etcd: $(etcd --version 2>/dev/null | head -n 1) (etcd-server $(ver etcd-server)," \
        "single member on loopback, data on $(df -T "$WORK" | awk 'NR == 2 { print $2 }'))"
    echo "- Load average (1, 5, 15 min): $LOAD_START at the start, $LOAD_MEASURE before"
    echo "  the measurements (servers up), $LOAD_END after them; CPU idle over 2 s:"
    echo "  ${IDLE_BEFORE}% just before the measurements, ${IDLE_AFTER}% just after"
    echo "- CPU used by processes other than the benchmark, its broker and its etcd"
    echo "  during the measurements: ${FOREIGN}% of the machine (noise; want ~0):"
    echo "  $((BUSY1 - BUSY0)) busy of $((TOTAL1 - TOTAL0)) CPU ticks, $((OWN1 - OWN0)) of them ours"
    echo "- Whole run of bench/run.sh up to this point: ${elapsed} s"
} >"$RESULTS"
log "wrote ${RESULTS#"$TOP"/}; ${elapsed} s so far"
