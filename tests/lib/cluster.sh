#!/usr/bin/env bash
# A private three-node RabbitMQ cluster on loopback, for tests/cluster/.
#
#   tests/lib/cluster.sh start DIR         start nodes 1, 2 and 3 (in parallel),
#                                      join 2 and 3 to 1, wait until node 1
#                                      sees 3 running nodes, write DIR/env
#   tests/lib/cluster.sh stop DIR          stop every node and the epmd they use,
#                                      leaving no process behind (also after
#                                      a start that failed halfway); safe to
#                                      repeat
#   tests/lib/cluster.sh stop-node DIR N [kill|clean]
#                                      kill -9 the Erlang VM of node N
#                                      (default), or `rabbitmqctl stop` it;
#                                      returns once it is gone; the time of
#                                      the kill (or stop) is in
#                                      DIR/nN/stopped_at ($EPOCHREALTIME)
#   tests/lib/cluster.sh start-node DIR N  start node N again (same name, ports
#                                      and data): returns once it runs and
#                                      node 1 (node 2 if N is 1) sees 3
#                                      running nodes again
#   tests/lib/cluster.sh running DIR N     how many running nodes node N sees
#   tests/lib/cluster.sh ctl DIR N ARGS... rabbitmqctl ARGS against node N
#   tests/lib/cluster.sh pids DIR          the processes of this cluster, if any
#
# Runs as root, without the Debian service wrapper, like tests/lib/broker.sh.
# The three nodes share one HOME (so one Erlang cookie) and one private epmd;
# each has its own node name (amqplockcN-PORT@localhost), AMQP port,
# distribution port (RABBITMQ_DIST_PORT) and data and log directories under
# DIR/nN. Every wait has a bound.
#
# Ports: a block of 64 starting at 26000 + 64k (26000-32719), below Linux's
# ephemeral range (32768-60999: an outgoing connection holding the
# distribution port of a node about to start made clustering fail with
# eaddrinuse), above RabbitMQ's 25672 and away from tests/lib/broker.sh's blocks
# (16000-24991). In a block at B: AMQP B+N, distribution B+10+N, epmd B+20,
# and the rabbitmqctl processes' own distribution ports B+32..B+63.
#
# DIR/env exports AMQPLOCK_TEST_CLUSTER_DIR, AMQPLOCK_TEST_CN_PORT,
# AMQPLOCK_TEST_CN_NODE and AMQPLOCK_TEST_CN_URL for N = 1, 2, 3, and
# AMQPLOCK_TEST_C_EPMD_PORT.
#
# CLUSTER_QUIET=1 keeps start and start-node from saying what they do;
# CLUSTER_STOP_FAST=1 makes stop kill the nodes at once instead of first
# asking each to stop (about 5 s).
#
# Every process of the cluster (nodes, epmd, rabbitmqctl) is started with
# AMQPLOCK_CLUSTER_OWNER=DIR in its environment (never in DIR/env), which
# is how stop finds them all without touching anybody else's broker.
set -euo pipefail
# shellcheck source=tests/lib/procs.sh
. "$(dirname "${BASH_SOURCE[0]}")/procs.sh"
# shellcheck source=tests/lib/nodes.sh
. "$(dirname "${BASH_SOURCE[0]}")/nodes.sh"
WHO=cluster.sh RUNNING_CTL_TIMEOUT=30
node_label() { echo " (${NODE[$1]})"; }

RMQ_BIN=${RMQ_BIN:-/usr/lib/rabbitmq/bin}
NODES=(1 2 3)

die() {
    echo "cluster.sh: $*" >&2
    exit 1
}
say() { [ -z "${CLUSTER_QUIET:-}" ] && echo "cluster.sh: $*" >&2 || true; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Seconds since the epoch with a fraction (deadlines: nodes.sh).
now() { echo "$EPOCHREALTIME"; }

pick_base() {
    local base p ok
    for _ in $(seq 1 60); do
        base=$((26000 + 64 * (RANDOM % 105)))
        ok=1
        for p in $((base + 1)) $((base + 2)) $((base + 3)) $((base + 11)) $((base + 12)) \
            $((base + 13)) $((base + 20)); do
            port_free "$p" || { ok=; break; }
        done
        [ -z "$ok" ] || { echo "$base"; return 0; }
    done
    die "no free block of ports found in 26000-32719"
}


# load DIR: reads DIR/cluster.conf (written first thing by start) and sets
# DIR, BASE, EPMD_PORT, and for each node N: PORT[N], DIST[N], NODE[N].
declare -a PORT DIST NODE
load() {
    DIR=$(absdir "$1") || die "no directory $1"
    [ -f "$DIR/cluster.conf" ] || return 1
    BASE=$(cat "$DIR/cluster.conf")
    [[ $BASE =~ ^[0-9]+$ ]] || die "$DIR/cluster.conf is damaged"
    EPMD_PORT=$((BASE + 20))
    local n
    for n in "${NODES[@]}"; do
        PORT[n]=$((BASE + n))
        DIST[n]=$((BASE + 10 + n))
        NODE[n]="amqplockc$n-${PORT[n]}@localhost"
    done
}

check_node() {
    case "$1" in 1 | 2 | 3) ;; *) die "no node '$1' (1, 2 or 3)" ;; esac
}

# The environment shared by the nodes and rabbitmqctl.
common_env() {
    export HOME="$DIR/home" ERL_EPMD_PORT="$EPMD_PORT" ERL_EPMD_ADDRESS=127.0.0.1 \
        RABBITMQ_CONF_ENV_FILE="$DIR/rabbitmq-env.conf" \
        RABBITMQ_ENABLED_PLUGINS_FILE="$DIR/enabled_plugins" \
        RABBITMQ_CTL_DIST_PORT_MIN=$((BASE + 32)) RABBITMQ_CTL_DIST_PORT_MAX=$((BASE + 63)) \
        AMQPLOCK_CLUSTER_OWNER="$DIR"
}

# ctl N ARGS...: rabbitmqctl against node N, bounded by CTL_TIMEOUT.
ctl() {
    local n=$1
    shift
    (
        common_env
        exec timeout -k 5 "${CTL_TIMEOUT:-60}" "$RMQ_BIN/rabbitmqctl" -n "${NODE[n]}" "$@" 3>&- 4>&- 5>&- \
            6>&- 7>&- 8>&- 9>&- </dev/null
    )
}

# launch N: starts node N in the background, in a session of its own,
# with no file descriptor of the caller's (bats waits on its fd 3).
launch() {
    local n=$1 d="$DIR/n$1"
    (
        common_env
        export RABBITMQ_NODENAME="${NODE[n]}" RABBITMQ_NODE_PORT="${PORT[n]}" \
            RABBITMQ_DIST_PORT="${DIST[n]}" \
            RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" \
            RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" RABBITMQ_PID_FILE="$d/beam.pid" \
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
            AMQPLOCK_CLUSTER_NODE="$n"
        # Each start and its end marked in server.out, so that the tail
        # printed when a start fails shows this start's lines (the end's
        # status is the start script's: 0 even after a kill -9 of the VM).
        echo "cluster.sh: starting ${NODE[n]} at $(date +%T.%N)" >>"$d/server.out"
        # shellcheck disable=SC2016 # $0, $? and $(date) are the inner shell's
        setsid sh -c '"$0"; echo "cluster.sh: rabbitmq-server ended with status $? at $(date +%T.%N)"' \
            "$RMQ_BIN/rabbitmq-server" >>"$d/server.out" 2>&1 </dev/null 3>&- 4>&- 5>&- 6>&- \
            7>&- 8>&- 9>&- &
        echo $! >"$d/server.pid"
    )
}

# own_pids [N]: every process started for this cluster (or only node N's
# Erlang VM), never this script itself. One grep reads every environment.
own_pids() {
    local pid
    grep -lzxF -- "AMQPLOCK_CLUSTER_OWNER=$DIR" /proc/[0-9]*/environ 2>/dev/null |
        sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' | while read -r pid; do
        [ "$pid" != $$ ] || continue
        if [ -n "${1:-}" ]; then
            grep -qzxF -- "AMQPLOCK_CLUSTER_NODE=$1" "/proc/$pid/environ" 2>/dev/null || continue
            [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == */beam.smp ]] || continue
        fi
        echo "$pid"
    done
}

# node_alive N: some process of node N is there: the one launch started
# (until it has run rabbitmq-server, its /proc/PID/environ is still the
# caller's, without this node's variables: a node launched a moment
# before was once taken for dead there, under CI's load), or any with
# the node's variables (its start script, or the VM).
node_alive() {
    local pid
    pid=$(cat "$DIR/n$1/server.pid" 2>/dev/null) && [ -n "$pid" ] && ! ended "$pid" && return 0
    for pid in $(grep -lzxF -- "AMQPLOCK_CLUSTER_NODE=$1" /proc/[0-9]*/environ 2>/dev/null |
        sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p'); do
        grep -qzxF -- "AMQPLOCK_CLUSTER_OWNER=$DIR" "/proc/$pid/environ" 2>/dev/null && ! ended "$pid" &&
            return 0
    done
    return 1
}

# wait_up N SECS: node N accepts AMQP and has finished booting.
wait_up() {
    local n=$1 end
    end=$(deadline "$2")
    until ! port_free "${PORT[n]}"; do
        if past "$end" || ! node_alive "$n"; then
            echo "cluster.sh: node $n (${NODE[n]}) did not open its port; end of $DIR/n$n/server.out:" >&2
            tail -n 20 "$DIR/n$n/server.out" >&2 || true
            # (the kernel's word, if the OOM killer ended it)
            dmesg 2>/dev/null | grep -iE 'out of memory|killed process' | tail -n 3 >&2 || true
            return 1
        fi
        sleep 0.2
    done
    CTL_TIMEOUT=$(awk -v t="$EPOCHREALTIME" -v e="$end" 'BEGIN { s = int(e - t); print s < 5 ? 5 : s }') \
        ctl "$n" -q await_startup >/dev/null 2>&1 || {
        echo "cluster.sh: node $n (${NODE[n]}) did not finish booting (logs in $DIR/n$n/log)" >&2
        return 1
    }
}

write_node_files() {
    local n=$1 d="$DIR/n$1"
    mkdir -p "$d/mnesia" "$d/log"
    # Loopback only, no plugins, no disk alarm on a nearly full /tmp, guest
    # allowed from 127.0.0.1.
    cat >"$d/rabbitmq.conf" <<CONF
listeners.tcp.1 = 127.0.0.1:${PORT[n]}
disk_free_limit.absolute = 1MB
loopback_users = none
CONF
}

start() {
    mkdir -p "$1"
    DIR=$(absdir "$1")
    [ ! -e "$DIR/cluster.conf" ] || die "$DIR/cluster.conf exists: a cluster may already run there"
    [ ! -e "$DIR/n1" ] || die "$DIR/n1 exists: start wants a fresh directory"
    local base n t0
    t0=$(now)
    base=$(pick_base)
    echo "$base" >"$DIR/cluster.conf"
    load "$DIR"
    mkdir -p "$DIR/home"
    # One cookie for the three nodes and rabbitmqctl, made before any node
    # starts (nodes starting together would each make their own).
    (umask 077 && head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr 0-9a-f A-P \
        >"$DIR/home/.erlang.cookie")
    chmod 400 "$DIR/home/.erlang.cookie"
    : >"$DIR/rabbitmq-env.conf"
    : >"$DIR/enabled_plugins"
    for n in "${NODES[@]}"; do
        write_node_files "$n"
        launch "$n"
    done
    say "starting ${NODE[1]}, ${NODE[2]}, ${NODE[3]} (AMQP ports $((base + 1))-$((base + 3)))"
    local -a waits=()
    for n in "${NODES[@]}"; do
        wait_up "$n" 120 &
        waits+=("$!")
    done
    local failed=
    for n in "${!waits[@]}"; do wait "${waits[n]}" || failed=1; done
    [ -z "$failed" ] || { stop "$DIR"; die "a node did not start"; }
    say "3 nodes up after $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s; clustering"
    # Join 2 and 3 to 1: stop their apps together, join one at a time (two
    # joins at once would change node 1's schema concurrently), start both
    # apps together.
    local step
    for step in stop_app "join_cluster ${NODE[1]}" start_app; do
        waits=()
        for n in 2 3; do
            # shellcheck disable=SC2086
            if [[ $step == join* ]]; then
                ctl "$n" -q $step >"$DIR/n$n/join.out" 2>&1 ||
                    { cat "$DIR/n$n/join.out" >&2; stop "$DIR"; die "node $n could not join node 1"; }
            else
                ctl "$n" -q $step >/dev/null 2>&1 &
                waits+=("$!")
            fi
        done
        failed=
        for n in "${!waits[@]}"; do wait "${waits[n]}" || failed=1; done
        [ -z "$failed" ] || { stop "$DIR"; die "rabbitmqctl $step failed on node 2 or 3"; }
    done
    wait_running 1 3 60 || { stop "$DIR"; die "node 1 does not see 3 running nodes"; }
    {
        echo "export AMQPLOCK_TEST_CLUSTER_DIR='$DIR'"
        echo "export AMQPLOCK_TEST_C_EPMD_PORT=$EPMD_PORT"
        for n in "${NODES[@]}"; do
            echo "export AMQPLOCK_TEST_C${n}_PORT=${PORT[n]}"
            echo "export AMQPLOCK_TEST_C${n}_NODE='${NODE[n]}'"
            echo "export AMQPLOCK_TEST_C${n}_URL='amqp://guest:guest@127.0.0.1:${PORT[n]}/'"
        done
    } >"$DIR/env.tmp"
    mv "$DIR/env.tmp" "$DIR/env"
    say "cluster of 3 running after $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
}

stop() {
    [ -d "$1" ] || return 0
    load "$1" || { DIR=$(absdir "$1"); }
    local n pids
    if [ -n "${BASE:-}" ] && [ -z "${CLUSTER_STOP_FAST:-}" ]; then
        # A clean stop first, all at once, bounded; whatever is left is
        # killed below.
        local -a waits=()
        for n in "${NODES[@]}"; do
            [ -n "$(own_pids "$n")" ] || continue
            CTL_TIMEOUT=20 ctl "$n" -q stop >/dev/null 2>&1 &
            waits+=("$!")
        done
        for n in "${!waits[@]}"; do wait "${waits[n]}" || true; done
    fi
    # Everything left: the VMs, their port programs, epmd, stray rabbitmqctl.

    for _ in 1 2 3; do
        mapfile -t pids < <(own_pids)
        [ ${#pids[@]} -gt 0 ] || break
        kill -KILL "${pids[@]}" 2>/dev/null || true
        wait_ended 10 "${pids[@]}" || true
    done
    mapfile -t pids < <(own_pids)
    rm -f "$DIR/env" "$DIR/cluster.conf"
    [ ${#pids[@]} -eq 0 ] || die "processes of $DIR left: ${pids[*]}"
}

stop_node() {
    local n=$2 mode=${3:-kill} pids
    check_node "$n"
    load "$1" || die "no cluster in $1"
    mapfile -t pids < <(own_pids "$n")
    [ ${#pids[@]} -gt 0 ] || die "node $n (${NODE[n]}) is not running"
    # The moment of the kill or stop, for tests that time what follows.
    echo "$EPOCHREALTIME" >"$DIR/n$n/stopped_at"
    case "$mode" in
    kill) kill -KILL "${pids[@]}" ;;
    clean) CTL_TIMEOUT=30 ctl "$n" -q stop >/dev/null 2>&1 || kill -KILL "${pids[@]}" 2>/dev/null || true ;;
    *) die "stop-node: mode is kill or clean, not '$mode'" ;;
    esac
    wait_ended 30 "${pids[@]}" || { kill -KILL "${pids[@]}" 2>/dev/null || true; }
    wait_ended 10 "${pids[@]}" || die "node $n (${NODE[n]}) is still there"
}

start_node() {
    local n=$2 other=1
    check_node "$n"
    load "$1" || die "no cluster in $1"
    [ "$n" != 1 ] || other=2
    if [ -z "$(own_pids "$n")" ]; then
        launch "$n"
    else
        say "node $n (${NODE[n]}) runs already; waiting for it to rejoin"
    fi
    wait_up "$n" 120 || die "node $n did not start again"
    # It is a member already: it rejoins by itself. Both it and another
    # node must see three.
    wait_running "$other" 3 90 || die "node $other does not see 3 running nodes after node $n restarted"
    wait_running "$n" 3 30 || die "node $n does not see 3 running nodes after its restart"
}

case "${1:-}" in
start) start "${2:?usage: cluster.sh start DIR}" ;;
stop) stop "${2:?usage: cluster.sh stop DIR}" ;;
stop-node) stop_node "${2:?usage: cluster.sh stop-node DIR N [kill|clean]}" "${3:?node number}" "${4:-kill}" ;;
start-node) start_node "${2:?usage: cluster.sh start-node DIR N}" "${3:?node number}" ;;
running)
    load "${2:?usage: cluster.sh running DIR N}" || die "no cluster in $2"
    check_node "${3:?node number}"
    running "$3"
    ;;
ctl)
    load "${2:?usage: cluster.sh ctl DIR N ARGS...}" || die "no cluster in $2"
    check_node "${3:?node number}"
    n=$3
    shift 3
    ctl "$n" "$@"
    ;;
pids)
    [ -d "${2:?usage: cluster.sh pids DIR}" ] || exit 0
    DIR=$(absdir "$2")
    own_pids
    ;;
*) die "usage: cluster.sh start|stop|stop-node|start-node|running|ctl|pids DIR [N] ..." ;;
esac
