#!/usr/bin/env bash
# Start or stop a private RabbitMQ node for the tests and the demo.
#
#   tests/lib/broker.sh start DIR   start a node whose files all live in DIR, wait
#                               until it accepts AMQP, write DIR/env
#   tests/lib/broker.sh stop DIR    stop that node and its epmd, leaving no
#                               process behind; safe to repeat
#
# With AMQPLOCK_NODE_DATA set to a directory, the node keeps its data
# (RabbitMQ's "mnesia" directory: queues, quorum logs) there instead of in
# DIR, and stop removes it: tests/run.sh points it at a tmpfs, where a
# quorum lease's fsync costs nothing. make bench never sets it: its
# broker writes to disk, as etcd does beside it.
#
# DIR/env is a shell fragment: it exports AMQPLOCK_URL and
# AMQPLOCK_MANAGEMENT_URL (for `amqplock list`) for the private node, and
# the variables rabbitmqctl needs to reach it (see rmqctl in
# tests/lib/helper.bash). Ports are picked at random among free ones, so several
# runs (or a system broker on 5672) do not collide. Runs as root, without the
# Debian service wrapper.
#
# Ports: a block of 32 starting at 16000 + 32k (16000-24991). In a block at
# B: AMQP B, TLS B+1, Erlang distribution B+2, epmd B+3, the management
# HTTP API B+4, and the rabbitmqctl processes' own distribution ports
# B+8..B+31. All of it lies
# below Linux's ephemeral range (32768-60999), where an outgoing
# connection may hold a port just when a node wants to listen on it, above
# RabbitMQ's own defaults (4369, 5671, 5672, 15672) and below
# tests/lib/cluster.sh's blocks (26000-32719) and 25672.
#
# Every process of the node (the server script, the Erlang VM, its port
# programs, the epmd it starts, rabbitmqctl) is started with
# AMQPLOCK_BROKER_OWNER=DIR in its environment (never in DIR/env), which is
# how stop finds them all, also those of a node run through chroot (see
# tests/lib/brokers.sh), without touching anybody else's broker.
set -euo pipefail
# shellcheck source=tests/lib/procs.sh
. "$(dirname "${BASH_SOURCE[0]}")/procs.sh"

RMQ_BIN=${RMQ_BIN:-/usr/lib/rabbitmq/bin}

die() { echo "broker.sh: $*" >&2; exit 1; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ports BASE: sets TLS_PORT, DIST_PORT, EPMD_PORT, MGMT_PORT, CTL_PORT_MIN and
# CTL_PORT_MAX for the block at BASE (the AMQP port).
ports() {
    TLS_PORT=$(($1 + 1)) DIST_PORT=$(($1 + 2)) EPMD_PORT=$(($1 + 3)) MGMT_PORT=$(($1 + 4))
    CTL_PORT_MIN=$(($1 + 8)) CTL_PORT_MAX=$(($1 + 31))
}

pick_ports() {
    local base
    for _ in $(seq 1 50); do
        base=$((16000 + 32 * (RANDOM % 281)))
        ports "$base"
        if port_free "$base" && port_free "$TLS_PORT" && port_free "$DIST_PORT" &&
            port_free "$EPMD_PORT" && port_free "$MGMT_PORT"; then
            echo "$base"
            return 0
        fi
    done
    die "no free block of ports found in 16000-24991"
}

# make_tls DIR: a test CA and certificates in DIR, made with openssl (EC
# keys: quick). ca.pem signs server.pem (for the host name "localhost"
# only, so that 127.0.0.1 is a wrong host name) and client.pem;
# other-ca.pem signs other-client.pem, a client the broker must refuse.
make_tls() {
    local d=$1 ca
    mkdir -p "$d"
    (
        cd "$d"
        umask 077
        for ca in ca other-ca; do
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
                -keyout "$ca.key" -out "$ca.pem" -days 30 -subj "/CN=amqplock test $ca" \
                2>/dev/null
        done
        leaf() { # NAME CA SUBJECT [EXTENSIONS]
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
                -keyout "$1.key" -out "$1.csr" -subj "$3" 2>/dev/null
            openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
                -out "$1.pem" -days 30 ${4:+-extfile "$4"} 2>/dev/null
        }
        printf 'subjectAltName = DNS:localhost\n' >server.ext
        leaf server ca /CN=localhost server.ext
        leaf client ca /CN=amqplock-client
        leaf other-client other-ca /CN=amqplock-other-client
    )
}

node_env() {
    local dir=$1
    # shellcheck disable=SC1091
    . "$dir/env"
}

start() {
    local dir=$1 port node
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ ! -e "$dir/env" ] || die "$dir/env exists: a node may already run there"
    port=$(pick_ports)
    ports "$port"
    node="amqplock$port@localhost"
    mkdir -p "$dir/home" "$dir/log"
    # The node's data in AMQPLOCK_NODE_DATA if set (tests/run.sh: a tmpfs),
    # through a link that stop follows to remove it; else in DIR.
    if [ -n "${AMQPLOCK_NODE_DATA:-}" ]; then
        ln -sfn "$(mktemp -d "$AMQPLOCK_NODE_DATA/amqplock-node.XXXXXX")" "$dir/mnesia"
    else
        mkdir -p "$dir/mnesia"
    fi
    : >"$dir/rabbitmq-env.conf"
    # Loopback only, no disk alarm on a nearly full /tmp, one plugin: the
    # management HTTP API (amqplock list), plain HTTP on B+4. A TLS
    # listener too, that asks for (but does not require) a client
    # certificate from the test CA.
    make_tls "$dir/tls" || die "openssl could not make the test certificates"
    cat >"$dir/rabbitmq.conf" <<CONF
listeners.tcp.1 = 127.0.0.1:$port
listeners.ssl.1 = 127.0.0.1:$TLS_PORT
ssl_options.cacertfile = $dir/tls/ca.pem
ssl_options.certfile = $dir/tls/server.pem
ssl_options.keyfile = $dir/tls/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
disk_free_limit.absolute = 1MB
loopback_users = none
management.tcp.ip = 127.0.0.1
management.tcp.port = $MGMT_PORT
CONF
    echo '[rabbitmq_management].' >"$dir/enabled_plugins"
    cat >"$dir/env" <<ENV
export AMQPLOCK_TEST_BROKER_DIR='$dir'
export AMQPLOCK_TEST_PORT=$port
export AMQPLOCK_TEST_TLS_PORT=$TLS_PORT
export AMQPLOCK_TEST_MANAGEMENT_URL='http://127.0.0.1:$MGMT_PORT/'
export AMQPLOCK_TEST_TLS_DIR='$dir/tls'
export AMQPLOCK_TEST_NODE='$node'
export AMQPLOCK_URL='amqp://guest:guest@127.0.0.1:$port/'
export AMQPLOCK_MANAGEMENT_URL='http://127.0.0.1:$MGMT_PORT/'
ENV
    launch "$dir"
    local deadline=$((SECONDS + 90))
    until ! port_free "$port"; do
        if [ $SECONDS -ge $deadline ] || ! kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
            tail -n 30 "$dir/server.out" >&2 || true
            stop "$dir"
            die "RabbitMQ did not start (log in $dir)"
        fi
        sleep 0.2
    done
    # (twice at most: the node listens already, and rabbitmqctl, an
    # Erlang VM of its own, has once failed to see it start within 60 s
    # beside three suites and another node on 2 cores)
    local tries=0
    until ctl "$dir" await_startup --timeout 60 >"$dir/await.out" 2>&1; do
        tries=$((tries + 1))
        if [ $tries -ge 2 ] || ! kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
            tail -n 30 "$dir/server.out" >&2 || true
            sed 's/^/rabbitmqctl await_startup: /' "$dir/await.out" | tail -n 5 >&2
            stop "$dir"
            die "RabbitMQ did not finish starting (log in $dir)"
        fi
    done
}

# launch DIR: the node that DIR/env describes, started in the background
# in a session of its own (the pid in DIR/server.pid); no descriptor of
# ours stays open in it (a bats run waits for fd 3). Also used by
# tests/tools/renode.sh to start a stopped node again.
launch() {
    local dir=$1
    node_env "$dir"
    (
        ports "$AMQPLOCK_TEST_PORT"
        export HOME="$dir/home" RABBITMQ_NODENAME="$AMQPLOCK_TEST_NODE" \
            RABBITMQ_NODE_PORT="$AMQPLOCK_TEST_PORT" RABBITMQ_DIST_PORT="$DIST_PORT" \
            ERL_EPMD_PORT="$EPMD_PORT" \
            RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" \
            RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf" \
            RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" \
            RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
            AMQPLOCK_BROKER_OWNER="$dir"
        setsid "$RMQ_BIN/rabbitmq-server" >>"$dir/server.out" 2>&1 </dev/null 3>&- 4>&- \
            5>&- 6>&- 7>&- 8>&- 9>&- &
        echo $! >"$dir/server.pid"
    )
}

# api_list ARGS...: the lines `rabbitmqctl -q list_queues [-p VHOST]
# COLUMN... --no-table-headers` or `-q list_exchanges name` would print, made
# from the management API (tests/lib/api-list.pl), where the columns are
# ones the broker answers from its metadata at once (name, durable,
# exclusive, arguments, type: no counts, which the API has only from its
# statistics, seconds late). rabbitmqctl is an Erlang VM of its own, about
# a second of CPU a call, the API a few milliseconds: the suites list
# queues a hundred times. Fails (1, nothing printed) for anything else,
# which rabbitmqctl then answers.
api_list() {
    local kind vhost=/ headers=1 col
    local -a cols=()
    [ "${1:-}" = -q ] || return 1
    shift
    kind=${1:-}
    [ "$kind" = list_queues ] || [ "$kind" = list_exchanges ] || return 1
    shift
    while [ $# -gt 0 ]; do
        case $1 in
        -p) vhost=${2:?}; shift 2 ;;
        --no-table-headers) headers=; shift ;;
        name | durable | exclusive | arguments | type) cols+=("$1"); shift ;;
        *) return 1 ;;
        esac
    done
    [ ${#cols[@]} -gt 0 ] && [ -n "${AMQPLOCK_TEST_MANAGEMENT_URL:-}" ] || return 1
    # (no curl: inside the sid root of tests/lib/brokers.sh's 4.3-build)
    command -v curl >/dev/null || return 1
    # (exchanges: only their names, with the header rabbitmqctl prints)
    if [ "$kind" = list_exchanges ]; then
        [ "${cols[*]}" = name ] || return 1
        [ -z "$headers" ] || echo name
    elif [ -n "$headers" ]; then
        return 1
    fi
    vhost=$(perl -MURI::Escape -e 'print uri_escape($ARGV[0])' "$vhost" 2>/dev/null ||
        perl -e '($_ = $ARGV[0]) =~ s/([^A-Za-z0-9._~-])/sprintf("%%%02X", ord $1)/ge; print' "$vhost")
    curl -sf --max-time 30 -u guest:guest \
        "${AMQPLOCK_TEST_MANAGEMENT_URL}api/${kind#list_}/$vhost?disable_stats=true" |
        perl "$(dirname "${BASH_SOURCE[0]}")/api-list.pl" "${kind#list_}" "${cols[@]}"
}

# api_do ARGS...: what `rabbitmqctl [-q] delete_user|add_user|
# set_permissions|set_policy|clear_policy ...` does, through the management
# API (the same definitions, answered once stored, as rabbitmqctl's are),
# without an Erlang VM's second of CPU. (Not delete_queue: the API may not
# delete another connection's exclusive queue.) Returns 2, having done nothing,
# for any other command or option, which rabbitmqctl then does; else 0,
# or 1 (the API's error on stderr) where rabbitmqctl would fail.
api_do() {
    local vhost=/ apply=all priority=0 method path body=
    [ "${1:-}" != -q ] || shift
    [ -n "${AMQPLOCK_TEST_MANAGEMENT_URL:-}" ] && command -v curl >/dev/null || return 2
    local cmd=${1:-}
    shift || return 2
    while [ $# -gt 0 ]; do
        case $1 in
        -p) vhost=${2:?}; shift 2 ;;
        --apply-to) apply=${2:?}; shift 2 ;;
        --priority) priority=${2:?}; shift 2 ;;
        -*) return 2 ;;
        *) break ;;
        esac
    done
    case "$cmd $#" in
    "delete_user 1") method=DELETE path=users/$(uri "$1") ;;
    "add_user 2")
        method=PUT path=users/$(uri "$1")
        body=$(json_of password "$2" tags "")
        ;;
    "set_permissions 4")
        method=PUT path=permissions/$(uri "$vhost")/$(uri "$1")
        body=$(json_of configure "$2" write "$3" read "$4")
        ;;
    "set_policy 3")
        method=PUT path=policies/$(uri "$vhost")/$(uri "$1")
        body=$(perl -MJSON::PP -e 'print JSON::PP->new->encode({pattern => $ARGV[0],
            definition => JSON::PP->new->decode($ARGV[1]), "apply-to" => $ARGV[2],
            priority => $ARGV[3] + 0})' "$2" "$3" "$apply" "$priority") || return 1
        ;;
    "clear_policy 1") method=DELETE path=policies/$(uri "$vhost")/$(uri "$1") ;;
    *) return 2 ;;
    esac
    # (add_user of a user who exists: rabbitmqctl refuses, PUT would not)
    if [ "$cmd" = add_user ] &&
        curl -sf -o /dev/null --max-time 30 -u guest:guest "${AMQPLOCK_TEST_MANAGEMENT_URL}api/$path"; then
        echo "user '$1' already exists" >&2
        return 1
    fi
    local out
    local -a send=()
    [ -z "$body" ] || send=(-H 'content-type: application/json' --data-binary "$body")
    out=$(curl -sS --max-time 30 -u guest:guest -X "$method" -w '\n%{http_code}' "${send[@]}" \
        "${AMQPLOCK_TEST_MANAGEMENT_URL}api/$path" 2>&1) || { echo "$out" >&2; return 1; }
    case ${out##*$'\n'} in
    2??) return 0 ;;
    *) echo "${out%$'\n'*}" >&2; return 1 ;;
    esac
}
uri() { perl -e '($_ = $ARGV[0]) =~ s/([^A-Za-z0-9._~-])/sprintf("%%%02X", ord $1)/ge; print' "$1"; }
# json_of KEY VALUE...: a JSON object of strings
json_of() { perl -MJSON::PP -e 'print JSON::PP->new->encode({@ARGV})' "$@"; }

# ctl DIR ARGS...: rabbitmqctl against the node, bounded by CTL_TIMEOUT
# (what api_list and api_do answer, through the management API).
# rabbitmqctl is an Erlang node too: it listens on a distribution port of
# the block and starts an epmd if none runs (as when the node is down),
# which stop then finds by the marker.
ctl() {
    local dir=$1
    shift
    node_env "$dir"
    ! api_list "$@" || return 0
    local rc=0
    api_do "$@" || rc=$?
    [ "$rc" -eq 2 ] || return "$rc"
    ports "$AMQPLOCK_TEST_PORT"
    HOME="$dir/home" ERL_EPMD_PORT="$EPMD_PORT" \
        RABBITMQ_CTL_DIST_PORT_MIN="$CTL_PORT_MIN" RABBITMQ_CTL_DIST_PORT_MAX="$CTL_PORT_MAX" \
        AMQPLOCK_BROKER_OWNER="$dir" \
        timeout "${CTL_TIMEOUT:-120}" "$RMQ_BIN/rabbitmqctl" -n "$AMQPLOCK_TEST_NODE" "$@"
}

# own_pids DIR: every process started for the node in DIR (see the top),
# never this script itself. One grep reads every environment.
own_pids() {
    grep -lzxF -- "AMQPLOCK_BROKER_OWNER=$1" /proc/[0-9]*/environ 2>/dev/null |
        sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' | grep -vx -- "$$" || true
}

stop() {
    local dir=$1 pids
    [ -d "$dir" ] || return 0
    dir=$(cd "$dir" && pwd)
    # A clean stop first, if something of the node runs (rabbitmqctl
    # against a node that is down only costs time); whatever is left, epmd
    # included, is killed below.
    if [ -f "$dir/env" ] && [ -n "$(own_pids "$dir")" ]; then
        CTL_TIMEOUT=30 ctl "$dir" stop >/dev/null 2>&1 || true
    fi
    for _ in 1 2 3; do
        mapfile -t pids < <(own_pids "$dir")
        [ ${#pids[@]} -gt 0 ] || break
        kill -KILL "${pids[@]}" 2>/dev/null || true
        wait_ended 10 "${pids[@]}" || true
    done
    mapfile -t pids < <(own_pids "$dir")
    rm -f "$dir/env" "$dir/server.pid"
    if [ ${#pids[@]} -eq 0 ] && [ -L "$dir/mnesia" ]; then
        rm -rf "$(readlink "$dir/mnesia")" "$dir/mnesia"
    fi
    [ ${#pids[@]} -eq 0 ] || die "processes of $dir left: ${pids[*]}"
}

# cpu DIR: the CPU seconds the node's processes have used so far (user and
# system), for tests/run.sh's account of where the time went.
cpu() {
    local dir pid ticks=0
    dir=$(cd "$1" && pwd) || return 0
    for pid in $(own_pids "$dir"); do
        ticks=$((ticks + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f\n", t / hz }'
}

case "${1:-}" in
start) start "${2:?usage: broker.sh start DIR}" ;;
cpu) cpu "${2:?usage: broker.sh cpu DIR}" ;;
stop) stop "${2:?usage: broker.sh stop DIR}" ;;
ctl) d=${2:?usage: broker.sh ctl DIR ARGS...}; shift 2; ctl "$d" "$@" ;;
launch) launch "$(cd "${2:?usage: broker.sh launch DIR}" && pwd)" ;;
*) die "usage: broker.sh start|stop|ctl|cpu|launch DIR" ;;
esac
