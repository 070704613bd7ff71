#!/usr/bin/env bash
# tests/lib/pool.sh: a bound, machine-wide, on the heavy test runs going at
# once: a suite of tests/run.sh, a cluster run (tests/cluster/run.sh), a
# partition run (tests/partition/run.sh). CI runs three streams side by
# side on 2 cores (.ci/run); without a bound they ran up to six suites and
# two clusters at once, at a load of 25 to 38, where rabbitmqctl stop_app
# outlived its 120 s and every timing test failed. Each run takes one of
# the pool's slots before it starts and gives it back when it ends.
#
#   AMQPLOCK_TEST_POOL  a directory whose file "size" says how many slots
#                       (.ci/run makes it); unset: no bound
#
# Sourced: pool_take (returns once a slot is ours), pool_give. Run:
# `pool.sh CMD...` runs CMD in a slot and exits with its status.
#
# A slot is a directory DIR/slot.N, made with mkdir (atomic), with the
# taker's pid in it: a slot whose taker has gone is free again, so that a
# run killed midway cannot keep its slot. (Two takers that find the same
# slot stale at once may, rarely, let one run more than the bound go: a
# bound on the load, not a lock, so that is allowed.)

POOL_SLOT=

pool_take() {
    local pool=${AMQPLOCK_TEST_POOL:-} size i owner
    [ -n "$pool" ] && [ -r "$pool/size" ] || return 0
    size=$(cat "$pool/size")
    while :; do
        for i in $(seq 1 "$size"); do
            if mkdir "$pool/slot.$i" 2>/dev/null; then
                echo "$BASHPID" >"$pool/slot.$i/pid"
                POOL_SLOT=$pool/slot.$i
                return 0
            fi
            # (a slot just made has no pid yet: it is not stale)
            owner=$(cat "$pool/slot.$i/pid" 2>/dev/null) || continue
            [ -d "/proc/$owner" ] || rm -rf "$pool/slot.$i"
        done
        sleep 0.5
    done
}

pool_give() {
    [ -z "$POOL_SLOT" ] || rm -rf "$POOL_SLOT"
    POOL_SLOT=
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    [ $# -gt 0 ] || { echo "usage: pool.sh CMD..." >&2; exit 64; }
    trap pool_give EXIT
    trap 'exit 143' TERM INT HUP
    pool_take
    rc=0
    "$@" || rc=$?
    pool_give
    exit "$rc"
fi
