#!/bin/sh
# victim.sh DIR MARK: a command for amqplock hold that may lose its slot.
# Writes its pid to DIR/pid, starts the grandchild "sleep MARK" (found with
# pgrep -fx "sleep MARK"), writes its slot to DIR/ready, then idles. It
# appends the name of each TERM or USR1 it gets to DIR/signals. USR1 leaves
# it running. TERM ends it (status 0), unless IGNORE_TERM=1: then TERM
# leaves it running too (it also writes the time to DIR/term_at), and the
# grandchild ignores TERM altogether.
dir=$1 mark=$2
echo $$ >"$dir/pid"
trap 'echo USR1 >>"$dir/signals"' USR1
if [ "${IGNORE_TERM:-}" = 1 ]; then
    trap '' TERM
    sleep "$mark" &
    trap 'echo TERM >>"$dir/signals"; date +%s.%N >"$dir/term_at"' TERM
else
    trap 'echo TERM >>"$dir/signals"; exit 0' TERM
    sleep "$mark" &
fi
echo "$AMQPLOCK_SLOT" >"$dir/ready.tmp"
mv "$dir/ready.tmp" "$dir/ready"
while :; do sleep 0.1; done
