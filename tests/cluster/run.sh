#!/usr/bin/env bash
# Runs the cluster suite (tests/cluster/cluster.bats) against a private
# three-node RabbitMQ cluster (tests/lib/cluster.sh) that lives only as long as
# this script. Ends with the line "N passed, N failed" and exits non-zero on
# any failure. Arguments, if any, are passed on to bats (e.g. -f REGEX).
set -u
cd "$(dirname "$0")/../.." || exit 2
# Signals at their defaults, whatever started this (nohup, a background
# job of a script): see tests/lib/default-signals.pl.
if [ -z "${AMQPLOCK_SIGNALS_DEFAULT:-}" ]; then
    export AMQPLOCK_SIGNALS_DEFAULT=1
    exec tests/lib/default-signals.pl tests/cluster/run.sh "$@"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/amqplock-cluster.XXXXXX")
tap="$work/tap"
: >"$tap"
stop_cluster() {
    tests/lib/cluster.sh stop "$work/cluster" || echo "not ok - cluster.sh stop failed" >>"$tap"
    # After a failure, the nodes' logs outlive the run.
    if grep -q '^not ok ' "$tap" && [ -z "${logs:-}" ] && [ -d "$work/cluster/n1" ]; then
        logs=$(mktemp -d "${TMPDIR:-/tmp}/amqplock-cluster-logs.XXXXXX")
        for d in "$work"/cluster/n[123]; do
            mkdir -p "$logs/${d##*/}"
            cp -r "$d/log" "$d/server.out" "$logs/${d##*/}/" 2>/dev/null || true
        done
        echo "# the nodes' logs are kept in $logs"
    fi
}
cleanup() {
    stop_cluster
    rm -rf "$work"
}
trap cleanup EXIT
# bats runs in a session of its own (setsid; its id in $work/bats.sid) so
# that a signal to this script can end it, and everything the tests
# started, at once.
on_signal() {
    local sid
    sid=$(cat "$work/bats.sid" 2>/dev/null) && [ -n "$sid" ] && kill -TERM -- -"$sid" 2>/dev/null
    exit "$1"
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap 'on_signal 129' HUP

t0=$SECONDS
if ! tests/lib/cluster.sh start "$work/cluster"; then
    echo "not ok - the three-node RabbitMQ cluster did not start" | tee -a "$tap"
else
    echo "# cluster started in $((SECONDS - t0)) s"
    # shellcheck disable=SC1091
    . "$work/cluster/env"
    export AMQPLOCK_TEST_WORK="$work"
    setsid -w bash -c 'echo $$ >"$0.sid"
        bats --tap --timing "$@" tests/cluster/cluster.bats | tee "$0.tap"
        echo "${PIPESTATUS[0]}" >"$0.status"' "$work/bats" "$@" &
    wait "$!"
    rm -f "$work/bats.sid"
    status=$(cat "$work/bats.status" 2>/dev/null || echo 1)
    cat "$work/bats.tap" >>"$tap"
    if [ "$status" -ne 0 ] && ! grep -q '^not ok ' "$work/bats.tap"; then
        echo "not ok - bats exited with status $status" | tee -a "$tap"
    fi
fi
t1=$SECONDS
stop_cluster
echo "# cluster suite took $((SECONDS - t0)) s (stopping the cluster $((SECONDS - t1)) s)"

tests/lib/tap-summary.sh "$tap"
