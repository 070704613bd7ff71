#!/usr/bin/env bash
# `make demo`: the main job of amqplock on a private RabbitMQ. A semaphore
# with 2 slots, 5 copies of a one-second job started at once through
# `amqplock hold`: at most 2 run at any moment, the others wait their turn.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d "${TMPDIR:-/tmp}/amqplock-demo.XXXXXX")
trap 'tests/lib/broker.sh stop "$work/broker"; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

echo "Starting a private RabbitMQ (about 10 s)..."
tests/lib/broker.sh start "$work/broker"
# shellcheck disable=SC1091
. "$work/broker/env"
export PATH="$PWD:$PATH"

show() {
    echo
    echo "\$ $*"
    "$@"
}

show amqplock create demo 2
show amqplock status demo

cat >"$work/job" <<'JOB'
#!/bin/sh
# A job that must not run more than twice at once across the fleet.
echo "$(date +%T.%N | cut -c1-12)  job $1 starts on slot $AMQPLOCK_SLOT"
sleep 1
echo "$(date +%T.%N | cut -c1-12)  job $1 done"
JOB
chmod +x "$work/job"

echo
echo "\$ for i in 1 2 3 4 5; do amqplock hold demo -- job \$i & done; wait"
for i in 1 2 3 4 5; do
    amqplock hold demo -- "$work/job" "$i" &
done
sleep 0.3
echo
echo "While they run (one moment):"
amqplock status demo | sed 's/^/    /'
wait

echo
echo "A cron-style try-once while the semaphore is full, then a JSON view:"
amqplock acquire demo >/dev/null &
holder1=$!
amqplock acquire demo >/dev/null &
holder2=$!
sleep 0.5
show amqplock hold -n demo -- echo "never printed" || echo "(exit $?: no free slot, nothing ran)"
show amqplock --json status demo
kill "$holder1" "$holder2"
wait

echo
echo "Resizing:"
show amqplock add demo 3
show amqplock remove demo 1
show amqplock max demo
show amqplock destroy demo
