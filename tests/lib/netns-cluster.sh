#!/usr/bin/env bash
# tests/lib/netns-cluster.sh: a three-node RabbitMQ cluster whose nodes, and
# the clients of the partition suite, each live in a network namespace of
# their own, joined by veth links to a bridge in one more namespace (the
# hub), and a nemesis that cuts, slows and heals those links. Nothing of it
# is in the host's namespace: no address, route, link or rule; no default
# route anywhere, so nothing can leave the machine.
#
#   netns-cluster.sh start DIR [pause_minority|ignore] [CLIENT_NODES]
#       make the namespaces, start nodes 1-3 with that
#       cluster_partition_handling (default pause_minority), join 2 and 3
#       to 1, wait until node 1 sees 3 running nodes, write DIR/env.
#       CLIENT_NODES ("1 1 2 2 3 3" by default) makes one client namespace
#       per word, attached to the node it names: its URL list names that
#       node first, then the others.
#   netns-cluster.sh stop DIR       kill every process in the namespaces and
#                                   every one started for DIR, delete the
#                                   namespaces (their links and bridge go with
#                                   them); safe to repeat, and after a start
#                                   that failed halfway
#   netns-cluster.sh running DIR N  how many running nodes node N sees (0: no
#                                   answer, or paused)
#   netns-cluster.sh wait-running DIR N COUNT SECS
#   netns-cluster.sh ctl DIR N ARGS...  rabbitmqctl ARGS against node N
#   netns-cluster.sh handling DIR MODE  set cluster_partition_handling on the
#                                   running nodes (read by RabbitMQ when it
#                                   next sees a node go down)
#   netns-cluster.sh partitioned DIR  the partitions the nodes report, as
#                                   node 1 knows them: a line "N: NODE..."
#                                   per node that reports some ("1: ?" if
#                                   node 1 does not answer); nothing when
#                                   the cluster is whole
#   netns-cluster.sh mend DIR       RabbitMQ's remedy for a partition it
#                                   reports: restart (stop_app, start_app) the
#                                   nodes outside the largest side, then wait
#                                   until node 1 sees 3 running nodes and no
#                                   node reports a partition
#   netns-cluster.sh exec DIR NAME CMD...  CMD in namespace NAME (n1-n3, c1-cK,
#                                   hub), with AMQPLOCK_CLUSTER_OWNER=DIR
#
# The nemesis, each undone by heal:
#   isolate DIR N          node N cut from the other two nodes, both ways
#                          (nftables in N's namespace); its clients still
#                          reach it, as in a partition between racks
#   isolate-oneway DIR N   only what N sends to the other nodes is dropped
#   cut-client DIR C       client C cut from its node, both ways (it can
#                          still reach the others)
#   link DIR PORT up|down  the bridge's port PORT (n1-n3, c1-cK) up or down:
#                          the namespace cut from everything
#   flap DIR PORT SECS DOWN UP  PORT down for DOWN s, up for UP s, for SECS
#   slow DIR N RATE LOSS   node N's link slowed to RATE (tc tbf, both ways,
#                          a queue of up to 300 ms) with LOSS percent of
#                          packets dropped at random each way (nftables
#                          numgen). The kernel here has no sch_netem
#                          (CONFIG_NET_SCH_NETEM is not set): tbf's queue
#                          stands in for netem's delay, nftables for its
#                          loss.
#   heal DIR               every rule, qdisc and link of the nemesis undone
#
# The naming trick: nodes use long names with their IP
# (rabbit@10.A.B.N, RABBITMQ_USE_LONGNAME=true), so nothing needs
# /etc/hosts or DNS inside the namespaces. Each node's namespace has its
# own epmd (the node starts it; it listens on every address of its own
# namespace on the usual 4369), and every port is RabbitMQ's default: no
# two nodes share a namespace, so none collide, with each other or with the
# host. rabbitmqctl runs inside the node's namespace (its own node name,
# rabbitmqcli-PID-rabbit@<host name>, is never looked up: the node answers
# on the connection the CLI opened). net_ticktime is 10 s (RabbitMQ's
# default: 60) so that a partition is seen in 8-13 s, not 45-75.
#
# Addresses: 10.A.B.0/24 with A in 200-249 and B at random, away from every
# address and route of the host's: nodes .1-.3, clients .101 up.
#
# Every process of the cluster is started with AMQPLOCK_CLUSTER_OWNER=DIR
# in its environment (never in DIR/env); stop kills those and whatever else
# runs in the namespaces. The namespaces' names are in DIR/namespaces,
# written before each is made. Every wait has a bound.
set -euo pipefail
# shellcheck source=tests/lib/procs.sh
. "$(dirname "${BASH_SOURCE[0]}")/procs.sh"
# shellcheck source=tests/lib/nodes.sh
. "$(dirname "${BASH_SOURCE[0]}")/nodes.sh"
WHO=netns-cluster.sh RUNNING_CTL_TIMEOUT=15
node_label() { :; }

RMQ_BIN=${RMQ_BIN:-/usr/lib/rabbitmq/bin}
NODES=(1 2 3)

die() {
    echo "netns-cluster.sh: $*" >&2
    exit 1
}
say() { [ -z "${CLUSTER_QUIET:-}" ] && echo "netns-cluster.sh: $*" >&2 || true; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# load DIR: reads DIR/netns.conf (TAG NET HANDLING CLIENT_NODES...) and
# sets DIR, TAG, NET (10.A.B), HANDLING, CNODE[C] (the node of client C),
# NCLIENTS.
declare -a CNODE
load() {
    DIR=$(absdir "$1") || die "no directory $1"
    [ -f "$DIR/netns.conf" ] || return 1
    local -a w
    read -r -a w <"$DIR/netns.conf"
    TAG=${w[0]} NET=${w[1]} HANDLING=${w[2]}
    [[ $TAG =~ ^[a-z0-9]+$ && $NET =~ ^10\.[0-9]+\.[0-9]+$ ]] || die "$DIR/netns.conf is damaged"
    CNODE=()
    local i
    for ((i = 3; i < ${#w[@]}; i++)); do CNODE[i - 2]=${w[i]}; done
    NCLIENTS=$((${#w[@]} - 3))
}

ns() { echo "amqpl-$TAG-$1"; }  # ns NAME: the namespace of n1, c2, hub...
ip_of() {                       # ip_of NAME: n1-n3, c1...
    case "$1" in
    n[123]) echo "$NET.${1#n}" ;;
    c[0-9]*) echo "$NET.$((100 + ${1#c}))" ;;
    *) die "no such member '$1'" ;;
    esac
}
node_name() { echo "rabbit@$NET.$1"; }
check_node() { case "$1" in 1 | 2 | 3) ;; *) die "no node '$1' (1, 2 or 3)" ;; esac; }
check_port() {
    case "$1" in
    n[123]) ;;
    c[0-9]*) [ "${1#c}" -ge 1 ] && [ "${1#c}" -le "$NCLIENTS" ] || die "no client '$1'" ;;
    *) die "no port '$1' (n1-n3, c1-c$NCLIENTS)" ;;
    esac
}

# in NAME CMD...: CMD in NAME's namespace, owned by DIR.
in_ns() {
    local name=$1
    shift
    AMQPLOCK_CLUSTER_OWNER="$DIR" ip netns exec "$(ns "$name")" "$@"
}

# A subnet 10.A.B.0/24 that no address or route of the host's touches.
pick_net() {
    local a b used
    used=$(ip -4 -o addr show 2>/dev/null; ip -4 route show table all 2>/dev/null)
    for _ in $(seq 1 100); do
        a=$((200 + RANDOM % 50)) b=$((RANDOM % 256))
        grep -qE "(^|[^0-9])10\.$a\.($b\.|0/|$b/)" <<<"$used" || { echo "10.$a.$b"; return 0; }
    done
    die "no free 10.x.y.0/24 found"
}

# The environment shared by the nodes and rabbitmqctl.
common_env() {
    export HOME="$DIR/home" RABBITMQ_USE_LONGNAME=true \
        RABBITMQ_CONF_ENV_FILE="$DIR/rabbitmq-env.conf" \
        RABBITMQ_ENABLED_PLUGINS_FILE="$DIR/enabled_plugins" \
        AMQPLOCK_CLUSTER_OWNER="$DIR"
}

# ctl N ARGS...: rabbitmqctl against node N from its namespace, bounded by
# CTL_TIMEOUT.
ctl() {
    local n=$1
    shift
    (
        common_env
        exec ip netns exec "$(ns "n$n")" timeout -k 5 "${CTL_TIMEOUT:-60}" "$RMQ_BIN/rabbitmqctl" \
            -n "$(node_name "$n")" "$@" 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- </dev/null
    )
}

# launch N: node N in the background, in its namespace, in a session of
# its own, with no file descriptor of the caller's.
launch() {
    local n=$1 d="$DIR/n$1"
    (
        common_env
        RABBITMQ_NODENAME=$(node_name "$n")
        export RABBITMQ_NODENAME \
            RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" \
            RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" RABBITMQ_PID_FILE="$d/beam.pid" \
            AMQPLOCK_CLUSTER_NODE="$n"
        ip netns exec "$(ns "n$n")" setsid "$RMQ_BIN/rabbitmq-server" >>"$d/server.out" 2>&1 \
            </dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
    )
}

# own_pids: every process in the namespaces and every one started for DIR,
# never this script itself.
own_pids() {
    {
        grep -lzxF -- "AMQPLOCK_CLUSTER_OWNER=$DIR" /proc/[0-9]*/environ 2>/dev/null |
            sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p'
        local n
        [ ! -f "$DIR/namespaces" ] || while read -r n; do
            [ -e "/run/netns/$n" ] && ip netns pids "$n" 2>/dev/null
        done <"$DIR/namespaces"
    } | sort -u | grep -vx -- "$$" || true
}

# wait_up N SECS: node N accepts AMQP and has finished booting.
wait_up() {
    local n=$1 end
    end=$(deadline "$2")
    # shellcheck disable=SC2016 # $0 is the inner shell's
    until in_ns "n$n" timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/5672"' "$(ip_of "n$n")" 2>/dev/null; do
        if past "$end"; then
            echo "netns-cluster.sh: node $n did not open its port; end of $DIR/n$n/server.out:" >&2
            tail -n 20 "$DIR/n$n/server.out" >&2 || true
            return 1
        fi
        sleep 0.3
    done
    CTL_TIMEOUT=$(awk -v t="$EPOCHREALTIME" -v e="$end" 'BEGIN { s = int(e - t); print s < 5 ? 5 : s }') \
        ctl "$n" -q await_startup >/dev/null 2>&1 || {
        echo "netns-cluster.sh: node $n did not finish booting (logs in $DIR/n$n/log)" >&2
        return 1
    }
}

# mkns NAME: a namespace with lo up, recorded first in DIR/namespaces.
mkns() {
    ns "$1" >>"$DIR/namespaces"
    ip netns add "$(ns "$1")"
    ip -n "$(ns "$1")" link set lo up
}

# attach NAME: NAME's namespace linked to the hub's bridge by a veth pair
# (NAME on the bridge's side, eth0 in NAME's namespace) with its address
# and the subnet's route only.
attach() {
    local hub
    hub=$(ns hub)
    ip -n "$hub" link add "$1" type veth peer name eth0 netns "$(ns "$1")"
    ip -n "$hub" link set "$1" master br0 up
    ip -n "$(ns "$1")" addr add "$(ip_of "$1")/24" dev eth0
    ip -n "$(ns "$1")" link set eth0 up
}

write_node_files() {
    local n=$1 d="$DIR/n$1"
    mkdir -p "$d/mnesia" "$d/log"
    cat >"$d/rabbitmq.conf" <<CONF
listeners.tcp.1 = $(ip_of "n$n"):5672
disk_free_limit.absolute = 1MB
loopback_users = none
cluster_partition_handling = $HANDLING
net_ticktime = 10
CONF
}

start() {
    local handling=${2:-pause_minority} clients=${3:-1 1 2 2 3 3}
    case "$handling" in pause_minority | ignore | autoheal) ;; *) die "no partition handling '$handling'" ;; esac
    mkdir -p "$1"
    DIR=$(absdir "$1")
    [ ! -e "$DIR/netns.conf" ] || die "$DIR/netns.conf exists: a cluster may already run there"
    [ ! -e "$DIR/n1" ] || die "$DIR/n1 exists: start wants a fresh directory"
    local c n t0
    for c in $clients; do check_node "$c"; done
    t0=$EPOCHREALTIME
    # shellcheck disable=SC2086
    echo "$(head -c 3 /dev/urandom | od -An -tx1 | tr -d ' \n') $(pick_net) $handling" $clients \
        >"$DIR/netns.conf"
    load "$DIR"
    : >"$DIR/namespaces"
    mkns hub
    ip -n "$(ns hub)" link add br0 type bridge
    ip -n "$(ns hub)" link set br0 up
    for n in "${NODES[@]}"; do mkns "n$n" && attach "n$n"; done
    for ((c = 1; c <= NCLIENTS; c++)); do mkns "c$c" && attach "c$c"; done
    mkdir -p "$DIR/home"
    (umask 077 && head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr 0-9a-f A-P \
        >"$DIR/home/.erlang.cookie")
    chmod 400 "$DIR/home/.erlang.cookie"
    : >"$DIR/rabbitmq-env.conf"
    : >"$DIR/enabled_plugins"
    for n in "${NODES[@]}"; do
        write_node_files "$n"
        launch "$n"
    done
    say "starting $(node_name 1), $(node_name 2), $(node_name 3) ($HANDLING)"
    local -a waits=()
    for n in "${NODES[@]}"; do
        wait_up "$n" 120 &
        waits+=("$!")
    done
    local failed=
    for n in "${!waits[@]}"; do wait "${waits[n]}" || failed=1; done
    [ -z "$failed" ] || { stop "$DIR"; die "a node did not start"; }
    say "3 nodes up after $(since "$t0") s; clustering"
    # As tests/lib/cluster.sh: stop 2 and 3 together, join them one at a
    # time, start them together.
    local step
    for step in stop_app "join_cluster $(node_name 1)" start_app; do
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
        echo "export AMQPLOCK_TEST_NETNS_DIR='$DIR'"
        echo "export AMQPLOCK_TEST_NETNS_CLIENTS=$NCLIENTS"
        for n in "${NODES[@]}"; do
            echo "export AMQPLOCK_TEST_P${n}_URL='amqp://guest:guest@$(ip_of "n$n"):5672/'"
        done
        for ((c = 1; c <= NCLIENTS; c++)); do
            local urls="" m
            for m in "${CNODE[c]}" 1 2 3; do
                [[ " $urls " == *"@$(ip_of "n$m"):"* ]] ||
                    urls+="${urls:+ }amqp://guest:guest@$(ip_of "n$m"):5672/"
            done
            echo "export AMQPLOCK_TEST_PC${c}_NS='$(ns "c$c")'"
            echo "export AMQPLOCK_TEST_PC${c}_NODE=${CNODE[c]}"
            echo "export AMQPLOCK_TEST_PC${c}_URLS='$urls'"
        done
    } >"$DIR/env.tmp"
    mv "$DIR/env.tmp" "$DIR/env"
    say "cluster of 3 running after $(since "$t0") s (net $NET.0/24)"
}

# stop DIR: nothing of the data is kept, so no clean stop is asked for:
# every process is killed, then the namespaces deleted.
stop() {
    [ -d "$1" ] || return 0
    DIR=$(absdir "$1")
    local pids n
    for _ in 1 2 3; do
        mapfile -t pids < <(own_pids)
        [ ${#pids[@]} -gt 0 ] || break
        kill -KILL "${pids[@]}" 2>/dev/null || true
        wait_ended 10 "${pids[@]}" || true
    done
    mapfile -t pids < <(own_pids)
    if [ -f "$DIR/namespaces" ]; then
        while read -r n; do
            [ ! -e "/run/netns/$n" ] || ip netns del "$n" 2>/dev/null ||
                echo "netns-cluster.sh: could not delete namespace $n" >&2
        done <"$DIR/namespaces"
        local left
        left=$(while read -r n; do [ ! -e "/run/netns/$n" ] || echo "$n"; done <"$DIR/namespaces")
        [ -z "$left" ] || die "namespaces of $DIR left: $left"
        rm -f "$DIR/namespaces"
    fi
    rm -f "$DIR/env" "$DIR/netns.conf"
    [ ${#pids[@]} -eq 0 ] || die "processes of $DIR left: ${pids[*]}"
}

# The nemesis. Its rules are nftables tables named "nemesis" and tc qdiscs
# on the veths; heal removes all of them.
nft_in() { in_ns "$1" nft -f -; }

isolate() {
    local n=$1 others="" m
    check_node "$n"
    for m in "${NODES[@]}"; do [ "$m" = "$n" ] || others+="${others:+, }$(ip_of "n$m")"; done
    if [ "${2:-}" = oneway ]; then
        nft_in "n$n" <<NFT
table inet nemesis {
    chain out { type filter hook output priority 0; ip daddr { $others } drop; }
}
NFT
    else
        nft_in "n$n" <<NFT
table inet nemesis {
    chain in { type filter hook input priority 0; ip saddr { $others } drop; }
    chain out { type filter hook output priority 0; ip daddr { $others } drop; }
}
NFT
    fi
}

cut_client() {
    local c=$1 ip
    check_port "c$c"
    ip=$(ip_of "n${CNODE[c]}")
    nft_in "c$c" <<NFT
table inet nemesis {
    chain in { type filter hook input priority 0; ip saddr $ip drop; }
    chain out { type filter hook output priority 0; ip daddr $ip drop; }
}
NFT
}

link() {
    check_port "$1"
    case "$2" in up | down) ;; *) die "link: up or down, not '$2'" ;; esac
    ip -n "$(ns hub)" link set "$1" "$2"
}

flap() {
    local port=$1 end
    check_port "$port"
    end=$(deadline "$2")
    until past "$end"; do
        link "$port" down
        sleep "$3"
        link "$port" up
        past "$end" || sleep "$4"
    done
}

slow() {
    local n=$1 rate=$2 loss=$3
    check_node "$n"
    # Toward the node on the bridge's side, from the node on its eth0.
    ip netns exec "$(ns hub)" tc qdisc replace dev "n$n" root tbf rate "$rate" burst 4kb latency 300ms
    in_ns "n$n" tc qdisc replace dev eth0 root tbf rate "$rate" burst 4kb latency 300ms
    nft_in "n$n" <<NFT
table inet nemesis {
    chain in { type filter hook input priority 0; iifname "eth0" numgen random mod 100 < $loss drop; }
    chain out { type filter hook output priority 0; oifname "eth0" numgen random mod 100 < $loss drop; }
}
NFT
}

heal() {
    local name
    for name in n1 n2 n3 $(seq -f 'c%g' 1 "$NCLIENTS"); do
        in_ns "$name" nft delete table inet nemesis 2>/dev/null || true
        in_ns "$name" tc qdisc del dev eth0 root 2>/dev/null || true
        ip netns exec "$(ns hub)" tc qdisc del dev "$name" root 2>/dev/null || true
        ip -n "$(ns hub)" link set "$name" up
    done
}

handling() {
    case "$1" in pause_minority | ignore | autoheal) ;; *) die "no partition handling '$1'" ;; esac
    local n
    for n in "${NODES[@]}"; do
        CTL_TIMEOUT=30 ctl "$n" -q eval "application:set_env(rabbit, cluster_partition_handling, $1)." \
            >/dev/null || die "node $n: could not set cluster_partition_handling"
    done
    sed -i "s/^\([^ ]* [^ ]* \)[a-z_]*/\1$1/" "$DIR/netns.conf"
}

# partitioned: see the header. RabbitMQ records a partition when two nodes
# meet again that each took the other for down; with Mnesia (3.x) their
# metadata then stays apart until a node restarts. pause_minority acts only
# when a node sees the others go down while they still are: a partition
# seen only once it had healed (a one-way cut can do that) stays. Node 1
# is asked alone (one rabbitmqctl, not three: each costs a second or two of
# CPU): its cluster_status lists what each node on its side reports, and
# whichever side it is on, some node of that side reports the other.
partitioned() {
    local out
    out=$(CTL_TIMEOUT=30 ctl 1 -q cluster_status --formatter json 2>/dev/null) ||
        { echo "1: ?"; return; }
    jq -r '.partitions // {} | to_entries[] | select(.value | length > 0)
        | "\(.key | sub(".*\\."; "")): \(.value | join(" "))"' <<<"$out"
}

# mend: restarts the app of the nodes apart from the larger side, and so
# has them take that side's metadata: the nodes that two others report
# apart; else a node that reports both others apart (it alone, on node 1's
# view, is the other side); else those that node 1 reports.
mend() {
    local report losers="" n m count
    report=$(partitioned)
    [ -n "$report" ] || return 0
    for n in "${NODES[@]}"; do
        count=$(grep -c "[ :]$(node_name "$n")\( \|$\)" <<<"$report" || true)
        [ "$count" -ge 2 ] && losers+=" $n"
    done
    if [ -z "$losers" ]; then
        losers=$(awk 'NF >= 3 { sub(":", "", $1); printf " %s", $1 }' <<<"$report")
    fi
    if [ -z "$losers" ]; then
        for m in $(sed -n 's/^1: //p' <<<"$report"); do losers+=" ${m##*.}"; done
    fi
    [ -n "$losers" ] || die "cannot tell which nodes to restart from: $report"
    say "restarting node(s)$losers to mend the partition ($(tr '\n' ';' <<<"$report"))"
    for n in $losers; do
        CTL_TIMEOUT=120 ctl "$n" -q stop_app >/dev/null 2>&1 || die "node $n: stop_app failed"
        CTL_TIMEOUT=120 ctl "$n" -q start_app >/dev/null 2>&1 || die "node $n: start_app failed"
    done
    wait_running 1 3 60 || die "node 1 does not see 3 running nodes after the mend"
    report=$(partitioned)
    [ -z "$report" ] || die "still partitioned after restarting node(s)$losers: $report"
}

cmd=${1:-}
[ $# -ge 2 ] || die "usage: netns-cluster.sh start|stop|running|wait-running|ctl|handling|partitioned|mend|exec|isolate|isolate-oneway|cut-client|link|flap|slow|heal DIR ..."
case "$cmd" in
start) start "$2" "${3:-}" "${4:-}" ;;
stop) stop "$2" ;;
*)
    load "$2" || die "no cluster in $2"
    shift 2
    case "$cmd" in
    running) check_node "${1:?node}" && running "$1" ;;
    wait-running) check_node "${1:?node}" && wait_running "$1" "${2:?count}" "${3:?secs}" ;;
    ctl) check_node "${1:?node}" && { n=$1 && shift && ctl "$n" "$@"; } ;;
    handling) handling "${1:?pause_minority or ignore}" ;;
    partitioned) partitioned ;;
    mend) mend ;;
    exec) { name=${1:?name} && shift && in_ns "$name" "$@"; } ;;
    isolate) isolate "${1:?node}" ;;
    isolate-oneway) isolate "${1:?node}" oneway ;;
    cut-client) cut_client "${1:?client}" ;;
    link) link "${1:?port}" "${2:?up or down}" ;;
    flap) flap "${1:?port}" "${2:?secs}" "${3:-2}" "${4:-3}" ;;
    slow) slow "${1:?node}" "${2:-1mbit}" "${3:-5}" ;;
    heal) heal ;;
    *) die "no command '$cmd'" ;;
    esac
    ;;
esac
