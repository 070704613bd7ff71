#!/usr/bin/env bash
# tests/partition/run.sh [short|long]: the partition suite. A three-node
# RabbitMQ cluster whose nodes and six clients each live in a network
# namespace of their own (tests/lib/netns-cluster.sh), a workload of six
# clients looping `amqplock hold -w` around a recorder (tests/tools/stamp.c,
# build/stamp) on a 1-slot and a 3-slot semaphore of classic slots and the
# same of quorum slots, all at once, and a nemesis that cuts and heals the
# links between them, one scenario after the other. The checker
# (tests/partition/check.awk) reads the history: at most N running at every
# instant per semaphore, how long each slot stayed empty after a heal,
# whether every client's jobs ran.
#
# With cluster_partition_handling = pause_minority (the setting
# docs/operators.md recommends) each scenario must show no overlap, no slot
# taken twice, and some job of every client run; slots empty for more than
# 60 s after a heal are reported, not failed (RabbitMQ 3.10 can leave a
# lease without members across a heal, see judge). A scenario after whose
# heal RabbitMQ still reports a partition (pause_minority did not act: see
# mend_split) is skipped with its figures, and the cluster mended before
# the next. With `ignore` the promise is expected to break: that run is
# recorded (its overlaps printed as "# " lines) and never fails.
#
# short (CI, make check-partitions): one cluster, 15 s cuts; then the same
# cluster switched to `ignore` for one cut of node 3. long (make
# partitions): a cluster per setting, cuts longer than the leases, node 1
# (where the classic slot queues live) cut too.
#
# Ends with "N passed, N failed". The history, the checker's output and,
# after a failure, the nodes' logs are kept in PARTITION_KEEP (a directory,
# default: a new one under $TMPDIR, named at the end) when set or when a
# test failed.
set -u
cd "$(dirname "$0")/../.." || exit 2
if [ -z "${AMQPLOCK_SIGNALS_DEFAULT:-}" ]; then
    export AMQPLOCK_SIGNALS_DEFAULT=1
    exec tests/lib/default-signals.pl tests/partition/run.sh "$@"
fi
MODE=${1:-short}
case "$MODE" in short | long) ;; *) echo "usage: tests/partition/run.sh [short|long]" >&2; exit 2 ;; esac

TOP=$PWD
NC=$TOP/tests/lib/netns-cluster.sh
# shellcheck source=tests/lib/procs.sh
. "$TOP/tests/lib/procs.sh"
AL=${AMQPLOCK_BIN:-$TOP/amqplock}
STAMP=$TOP/build/stamp
# The nodes' data on a tmpfs when there is one (quorum queues fsync).
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then tmp=/dev/shm; else tmp=${TMPDIR:-/tmp}; fi
work=$(mktemp -d "$tmp/amqplock-partition.XXXXXX")
tap=$work/tap
hist=$work/history
: >"$tap"
: >"$hist"
unset AMQPLOCK_URL AMQP_URL

# The clients' options: leases short enough to run out during a cut
# (the least --lease allows with --grace 1 and --heartbeat 2 is 5.3 s).
HOLD_OPTS=(--heartbeat 2 --grace 1 --lease 6 --connect-timeout 2 --rpc-timeout 4 -w 10)
JOB_SECS=0.3
SEMS="cls1=1 cls3=3 qrm1=1 qrm3=3"
CLIENTS="c1 c2 c3 c4 c5 c6"
BLOCK_BOUND=60

n=0
ok() { n=$((n + 1)); echo "ok $n - $*" | tee -a "$tap"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $*" | tee -a "$tap"; }
note() { echo "# $*"; }
mark() { "$STAMP" mark "$hist" "$@"; }

# What the host had before, to check that stop leaves nothing of ours.
host_links() { ip -o link show | awk -F': ' '{ print $2 }' | sort; }
links_before=$(host_links)

stop_workload() {
    [ -f "$work/loops" ] || return 0
    touch "$work/stop"
    local pids
    mapfile -t pids <"$work/loops"
    # A loop ends after its hold: -w 10 and a 0.3 s job, or an away holder's
    # lease.
    local groups=("${pids[@]/#/-}")
    wait_ended 20 "${pids[@]}" || {
        kill -TERM -- "${groups[@]}" 2>/dev/null
        wait_ended 5 "${pids[@]}" || kill -KILL -- "${groups[@]}" 2>/dev/null
    }
    rm -f "$work/loops"
}

keep_dir=
keep() {
    [ -n "$keep_dir" ] && return 0
    keep_dir=${PARTITION_KEEP:-$(mktemp -d "${TMPDIR:-/tmp}/amqplock-partition-keep.XXXXXX")}
    mkdir -p "$keep_dir"
    # (each run's history is in its directory, $work/HANDLING/history;
    # $hist itself is the run under way, empty between runs)
    [ -s "$hist" ] && cp "$hist" "$keep_dir/"
    cp -r "$work"/*.check "$work"/*.rc "$work/pause_minority" "$work/ignore" "$keep_dir/" \
        2>/dev/null || true
    local d
    for d in "$work"/cluster*/n[123]; do
        [ -d "$d" ] || continue
        mkdir -p "$keep_dir/${d#"$work"/}"
        cp -r "$d/log" "$d/server.out" "$keep_dir/${d#"$work"/}/" 2>/dev/null || true
    done
}
stop_cluster() {
    local dir=$1 tag
    [ -f "$dir/netns.conf" ] || return 0
    tag=$(cut -d' ' -f1 "$dir/netns.conf")
    if ! "$NC" stop "$dir"; then
        not_ok "the cluster's namespaces and processes are gone after stop"
        return
    fi
    local left="" l
    left+=$(ip netns list | grep -F "amqpl-$tag-" || true)
    left+=$(grep -F "amqpl-$tag-" /proc/mounts || true)
    l=$(comm -13 <(echo "$links_before") <(host_links))
    left+=$l
    if [ -z "$left" ]; then
        ok "stop leaves no namespace, link, process or mount of the cluster behind"
    else
        not_ok "stop leaves no namespace, link, process or mount of the cluster behind"
        note "left: $left"
    fi
}
cleanup() {
    stop_workload
    local d
    for d in "$work"/cluster*; do [ -d "$d" ] && stop_cluster "$d"; done
    if grep -q '^not ok ' "$tap" || [ -n "${PARTITION_KEEP:-}" ]; then
        keep
        echo "# the history, the checker's output and the nodes' logs are kept in $keep_dir"
    fi
    tests/lib/tap-summary.sh "$tap"
    local rc=$?
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# start_cluster DIR HANDLING: the cluster, and the four semaphores made
# through client 1.
start_cluster() {
    local t0=$SECONDS
    if ! CLUSTER_QUIET=1 nice -n 0 "$NC" start "$1" "$2" "1 1 2 2 3 3" 2>"$work/start.err"; then
        cat "$work/start.err" >&2
        not_ok "a three-node cluster ($2) starts, each node and client in a namespace of its own"
        return 1
    fi
    # shellcheck disable=SC1091
    . "$1/env"
    local s ok=1
    for s in $SEMS; do
        local type=classic
        [[ $s == qrm* ]] && type=quorum
        ip netns exec "$AMQPLOCK_TEST_PC1_NS" "$AL" --url "$AMQPLOCK_TEST_PC1_URLS" create -q \
            --slot-type "$type" "${s%=*}" "${s#*=}" || ok=
    done
    if [ -z "$ok" ]; then
        not_ok "a three-node cluster ($2) starts and its semaphores are made"
        return 1
    fi
    ok "a three-node cluster ($2) starts, each node and client in a namespace of its own ($((SECONDS - t0)) s)"
}

# start_workload: for each client and semaphore, a loop of holds in the
# client's namespace, each in a session of its own (its id in
# $work/loops), until $work/stop exists.
start_workload() {
    rm -f "$work/stop"
    : >"$work/loops"
    local c s i urls nsname
    for c in $CLIENTS; do
        i=${c#c}
        urls="AMQPLOCK_TEST_PC${i}_URLS" nsname="AMQPLOCK_TEST_PC${i}_NS"
        for s in $SEMS; do
            setsid ip netns exec "${!nsname}" env AMQPLOCK_CLUSTER_OWNER="$AMQPLOCK_TEST_NETNS_DIR" \
                bash -c 'al=$1 urls=$2 sem=$3 c=$4 stamp=$5 hist=$6 secs=$7 stop=$8 rcs=$9
                shift 9
                while [ ! -e "$stop" ]; do
                    "$al" --url "$urls" hold "$@" "$sem" -- "$stamp" job "$hist" "$c" "$secs" \
                        >/dev/null 2>>"$rcs.err"
                    rc=$?
                    echo "$rc" >>"$rcs"
                    # A failure that comes at once (nothing reachable) is
                    # not tried again at once.
                    [ "$rc" -eq 0 ] || sleep 0.2
                done' loop "$AL" "${!urls}" "${s%=*}" "$c" "$STAMP" "$hist" "$JOB_SECS" \
                "$work/stop" "$work/$c-${s%=*}.rc" "${HOLD_OPTS[@]}" </dev/null &
            echo "$!" >>"$work/loops"
        done
    done
}

# scenario NAME CUT SETTLE NEMESIS...: the nemesis for CUT seconds (flap
# runs that long itself), heal, then SETTLE seconds and until node 1 sees
# all the nodes again (at most 60 s more; with ignore, no waiting for that).
scenario() {
    local name=$1 cut=$2 settle=$3 t0=$SECONDS
    shift 3
    note "$name: $* for $cut s"
    mark cut "$name"
    if [ "$1" = flap ]; then
        "$NC" flap "$AMQPLOCK_TEST_NETNS_DIR" "$2" "$cut" "${3:-2}" "${4:-3}"
    else
        "$NC" "$1" "$AMQPLOCK_TEST_NETNS_DIR" "${@:2}"
        sleep "$cut"
    fi
    "$NC" heal "$AMQPLOCK_TEST_NETNS_DIR"
    mark heal "$name"
    sleep "$settle"
    if [ "$(cut -d' ' -f3 "$AMQPLOCK_TEST_NETNS_DIR/netns.conf")" != ignore ]; then
        CLUSTER_QUIET=1 "$NC" wait-running "$AMQPLOCK_TEST_NETNS_DIR" 1 3 60 ||
            note "$name: node 1 does not see 3 running nodes 60 s after the heal"
        mend_split "$name"
    fi
    mark end "$name"
    SCEN_SECS[$name]=$((SECONDS - t0))
    SCEN_WHAT[$name]="$*, $cut s"
}
declare -A SCEN_SECS SCEN_WHAT SCEN_SPLIT

# mend_split NAME: if a node reports a partition after scenario NAME's heal,
# RabbitMQ has left the cluster split (netns-cluster.sh, partitioned: with
# Mnesia, pause_minority does nothing about a partition seen only once it
# had healed), and each side has handed out slots on its own since. The
# scenario is then not judged (judge), and the suite does what RabbitMQ's
# partitions guide tells an operator to do, restart the nodes of the
# smaller side, so that the next scenario starts on a whole cluster.
mend_split() {
    local split
    # (node 1 not answering, "1: ?", is not a split by itself)
    split=$("$NC" partitioned "$AMQPLOCK_TEST_NETNS_DIR" 2>/dev/null | grep -v ': ?$' | paste -sd ';')
    [ -n "$split" ] || return 0
    SCEN_SPLIT[$1]=$split
    mark split "$1"
    note "$1: RabbitMQ reports the cluster partitioned after the heal ($split); restarting the smaller side"
    if CLUSTER_QUIET='' "$NC" mend "$AMQPLOCK_TEST_NETNS_DIR" 2>"$work/mend.err"; then
        note "$1: $(tail -n 1 "$work/mend.err" | sed 's/^netns-cluster.sh: //'); whole again"
    else
        note "$1: the mend failed: $(tail -n 3 "$work/mend.err" | paste -sd ' ')"
    fi
    mark mended "$1"
}

# judge CHECK_FILE NAME HANDLING: one TAP line for scenario NAME.
judge() {
    local f=$1 name=$2 handling=$3 line
    line=$(grep "^scenario $name " "$f")
    if [ -z "$line" ]; then
        not_ok "$handling, $name: the checker read the scenario"
        return
    fi
    local overlaps doubles idle
    overlaps=$(sed 's/.* overlaps=\([0-9]*\).*/\1/' <<<"$line")
    doubles=$(sed 's/.* doubles=\([0-9]*\).*/\1/' <<<"$line")
    idle=$(sed 's/.* idle=\([^ ]*\).*/\1/' <<<"$line")
    local jobs
    jobs=$(awk -v s="$name" '$1 == "jobs" && $2 == s { j[$4] += $5; l[$4] += $6 }
        END { for (c in j) printf "%s=%d(lost:%d) ", c, j[c], l[c] }' "$f" | tr ' ' '\n' | sort | tr '\n' ' ')
    # Slots empty for longer than BLOCK_BOUND after the heal are reported,
    # not failed: on RabbitMQ 3.10 every lease is a quorum queue, and one
    # ended on the minority side as the partition heals can be left as a
    # record without members: its slot counts as held (status:
    # unreachable) until an operator deletes the lease queue
    # (docs/operators.md, Clusters). Clients that ran no job at all fail.
    local stuck ran
    stuck=$(awk -v s="$name" -v m="$BLOCK_BOUND" '$1 == "blocked" && $2 == s && $5 > m' "$f")
    ran=$(awk -v s="$name" '$1 == "jobs" && $2 == s { j[$4] += $5 } END { for (c in j) if (!j[c]) print c }' "$f")
    local title="$handling, $name (${SCEN_WHAT[$name]}): at most N on every semaphore, never two on a slot, every client's jobs ran"
    note "$name: ${SCEN_SECS[$name]} s; $(cut -d' ' -f3- <<<"$line")"
    note "$name: jobs per client (all four semaphores): $jobs"
    grep -E "^(overlap|double) $name " "$f" | sed 's/^/# /'
    if [ "$handling" = ignore ]; then
        # Expected to break: recorded, never failed.
        ok "$handling, $name (${SCEN_WHAT[$name]}): recorded, not judged: $overlaps overlaps, $doubles slots taken twice"
    elif [ -n "${SCEN_SPLIT[$name]:-}" ]; then
        # RabbitMQ's metadata was split: nothing a client does can hold the
        # promise then (docs/operators.md, Clusters). Recorded, and skipped.
        ok "$title # skip RabbitMQ left the cluster partitioned after the heal (${SCEN_SPLIT[$name]}): $overlaps overlaps, $doubles slots taken twice until the suite restarted the smaller side"
    else
        if [ -n "$stuck" ]; then
            note "$name: slots empty for more than $BLOCK_BOUND s after the heal (a lease left without members):"
            sed 's/^/#   /' <<<"$stuck"
        fi
        [ "$idle" = - ] || note "$name: no job on: $idle"
        if [ "$overlaps" -eq 0 ] && [ "$doubles" -eq 0 ] && [ -z "$ran" ]; then
            ok "$title"
        else
            not_ok "$title"
        fi
    fi
}

# run_checker NAME: the checker over the history so far, into $work/NAME.check.
run_checker() {
    sort -k2,2g "$hist" | awk -v maxes="$SEMS" -v clients="$CLIENTS" -f tests/partition/check.awk \
        >"$work/$1.check"
}

t_start=$SECONDS
for f in "$AL" "$STAMP"; do
    [ -x "$f" ] || { not_ok "$f is built (make amqplock build/stamp)"; exit 1; }
done
for tool in ip nft tc jq; do
    command -v "$tool" >/dev/null || { not_ok "$tool is installed (tests/partition/partition.mk installs it)"; exit 1; }
done

if [ "$MODE" = short ]; then
    CUT=15 SETTLE=8
    PLAN_PM=(
        "node3-cut|$CUT|$SETTLE|isolate 3"
        "client1-cut|$CUT|$SETTLE|cut-client 1"
        "node2-oneway|$CUT|$SETTLE|isolate-oneway 2"
        "node1-flap|$CUT|$SETTLE|flap n1 3 3"
        "node3-slow|$CUT|$SETTLE|slow 3 1mbit 10"
    )
    PLAN_IGN=("node3-cut-ignore|$CUT|$SETTLE|isolate 3")
else
    CUT=40 SETTLE=20
    PLAN_PM=(
        "node3-cut|$CUT|$SETTLE|isolate 3"
        "node1-cut|$CUT|$SETTLE|isolate 1"
        "client1-cut|$CUT|$SETTLE|cut-client 1"
        "client5-down|$CUT|$SETTLE|link c5 down"
        "node2-oneway|$CUT|$SETTLE|isolate-oneway 2"
        "node1-flap|$CUT|$SETTLE|flap n1 4 4"
        "node3-slow|$CUT|$SETTLE|slow 3 512kbit 20"
    )
    PLAN_IGN=(
        "node3-cut-ignore|$CUT|$SETTLE|isolate 3"
    )
fi

# run_plan HANDLING PLAN...: the workload through each scenario of PLAN.
run_plan() {
    local handling=$1 entry name cut settle what
    shift
    start_workload
    sleep 3
    for entry in "$@"; do
        IFS='|' read -r name cut settle what <<<"$entry"
        # shellcheck disable=SC2086
        scenario "$name" "$cut" "$settle" $what
    done
    mark stop
    stop_workload
}
judge_plan() {
    local handling=$1 entry
    shift
    run_checker "$handling"
    for entry in "$@"; do judge "$work/$handling.check" "${entry%%|*}" "$handling"; done
    note "$handling: jobs that lost their slot (exit 75) and waits that timed out, per client and semaphore:"
    local f
    for f in "$work"/c*.rc; do
        [ -f "$f" ] || continue
        printf '%s ' "$(basename "$f" .rc)"
        sort "$f" | uniq -c | awk '{ printf "rc%s=%d ", $2, $1 }'
        echo
    done | sed 's/^/# /'
    mkdir -p "$work/$handling"
    mv "$work"/c*.rc "$work"/c*.rc.err "$hist" "$work/$handling.check" "$work/$handling/" 2>/dev/null
    : >"$hist"
}

if start_cluster "$work/cluster" pause_minority; then
    run_plan pause_minority "${PLAN_PM[@]}"
    judge_plan pause_minority "${PLAN_PM[@]}"
    if [ "$MODE" = short ]; then
        # The same cluster, switched to ignore at run time: RabbitMQ reads
        # the setting when it sees a node go down.
        "$NC" handling "$AMQPLOCK_TEST_NETNS_DIR" ignore && ignore_dir=$work/cluster
    else
        stop_cluster "$work/cluster"
        start_cluster "$work/cluster-ignore" ignore && ignore_dir=$work/cluster-ignore
    fi
    if [ -n "${ignore_dir:-}" ]; then
        . "$ignore_dir/env"
        run_plan ignore "${PLAN_IGN[@]}"
        judge_plan ignore "${PLAN_IGN[@]}"
    else
        not_ok "the cluster runs with cluster_partition_handling = ignore"
    fi
fi
note "partition suite ($MODE) took $((SECONDS - t_start)) s before stopping"
