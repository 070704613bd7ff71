#!/bin/sh
# critical.sh DIR: one turn in the critical section of the contention test,
# run by amqplock hold. Under flock DIR/lock it counts the commands inside
# (DIR/count), logs "COUNT SLOT" to DIR/log, and reports to DIR/bad a slot
# another command inside already has (DIR/slots lists them). Outside the
# lock it checks with amqplock status that its slot is held (T_AMQPLOCK and
# T_URL: the binary and the broker), stays a while, then leaves.
set -u
d=$1
slot=${AMQPLOCK_SLOT:-unset}
exec 9>>"$d/lock"
flock 9
count=$(($(cat "$d/count" 2>/dev/null || echo 0) + 1))
echo "$count" >"$d/count"
if grep -qx "$slot" "$d/slots" 2>/dev/null; then
    echo "slot $slot taken twice at once" >>"$d/bad"
fi
echo "$slot" >>"$d/slots"
echo "$count $slot" >>"$d/log"
flock -u 9
if ! "$T_AMQPLOCK" --url "$T_URL" --json status "$AMQPLOCK_SEMAPHORE" 9>&- |
    jq -e --argjson s "$slot" '.held | index($s) != null' >/dev/null 2>&1; then
    echo "slot $slot not held while its command runs" >>"$d/bad"
fi
sleep 0.3
flock 9
echo $(($(cat "$d/count") - 1)) >"$d/count"
grep -vx "$slot" "$d/slots" >"$d/slots.new" || true
mv "$d/slots.new" "$d/slots"
flock -u 9
