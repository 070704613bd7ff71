#!/usr/bin/env bash
# renode.sh stop|start|restart DIR: the private RabbitMQ node that
# tests/lib/broker.sh started in DIR, stopped as a whole (rabbitmqctl stop: the
# Erlang VM ends, not just the rabbit application) and started again with
# the same name, ports, configuration and data, as tests/lib/broker.sh does;
# DIR/server.pid follows the new node, so that `broker.sh stop DIR` still
# ends it. stop returns once the VM is gone and the AMQP port closed;
# start once the node accepts AMQP and has finished booting (bounded waits:
# 60 s each). start does nothing to a node that answers already. Prints,
# on stdout, "stopped in S s" / "started in S s".
set -euo pipefail

mode=${1:?usage: renode.sh stop|start|restart DIR}
dir=$(cd "${2:?usage: renode.sh stop|start|restart DIR}" && pwd)
# shellcheck disable=SC1091
. "$dir/env"
port=$AMQPLOCK_TEST_PORT

die() { echo "renode.sh: $*" >&2; exit 1; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }
took() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
# rabbitmqctl with broker.sh's environment for the node (its ports, and the
# marker by which broker.sh stop finds whatever it starts)
ctl() {
    CTL_TIMEOUT=${CTL_TIMEOUT:-60} "$(dirname "$0")/../lib/broker.sh" ctl "$dir" "$@" </dev/null
}
# the node's processes: its session (the server was started with setsid)
node_alive() {
    local pid
    pid=$(cat "$dir/server.pid" 2>/dev/null) || return 1
    pgrep -s "$pid" >/dev/null 2>&1
}

stop_node() {
    local t0=$EPOCHREALTIME
    ctl -q stop >/dev/null 2>&1 || true
    for _ in $(seq 1 600); do
        node_alive || listening || break
        sleep 0.1
    done
    if node_alive; then
        kill -KILL -- -"$(cat "$dir/server.pid")" 2>/dev/null || true
        die "the node did not stop within 60 s (killed)"
    fi
    echo "stopped in $(took "$t0") s"
}

start_node() {
    local t0=$EPOCHREALTIME
    if listening && ctl -q await_startup --timeout 5 >/dev/null 2>&1; then
        return 0
    fi
    "$(dirname "$0")/../lib/broker.sh" launch "$dir"
    for _ in $(seq 1 600); do
        listening && break
        node_alive || die "the node ended while starting (log in $dir)"
        sleep 0.1
    done
    listening || die "the node does not listen on $port after 60 s"
    ctl await_startup --timeout 60 >/dev/null 2>&1 || die "the node did not finish starting"
    echo "started in $(took "$t0") s"
}

case $mode in
stop) stop_node ;;
start) start_node ;;
restart) stop_node && start_node ;;
*) die "usage: renode.sh stop|start|restart DIR" ;;
esac
