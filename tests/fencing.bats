#!/usr/bin/env bats
# hold --token and acquire --token: a fencing token for every grant, drawn
# once the slot is ours from the semaphore's stream NAME#tokens, given to
# the command as $AMQPLOCK_TOKEN. A grant whose command starts after
# another's command ended gets the larger token, across slots,
# hand-overs, kills and broker restarts.
#
# It stops and starts the node's app. tests/run.sh runs it so:
# run.sh: a broker of its own
#
# Needs jq and perl (core modules).

bats_require_minimum_version 1.5.0
load lib/helper

setup() { test_init; }

teardown() { test_cleanup; }

# A command that says its token and slot: "TOKEN SLOT" into FILE ("none"
# for no token).
says() { echo "echo \"\${AMQPLOCK_TOKEN:-none} \$AMQPLOCK_SLOT\" >>$1"; }

@test "hold --token gives the command AMQPLOCK_TOKEN, larger at every grant, whatever slot; acquire --token prints SLOT TOKEN, and --json a token" {
    al create "$n" 3
    local i
    for i in 1 2 3 4; do
        run -0 al hold --token "$n" -- sh -c "$(says "$T/t")"
    done
    # two held at once get different slots and different tokens
    bg a hold --token "$n" -- sh -c "$(says "$T/t"); touch $T/a.in; sleep 60"
    wait_until 10 test -e "$T/a.in" || fail "$(cat "$T/a.err")"
    run -0 al hold --token "$n" -- sh -c "$(says "$T/t")"
    awk 'NR > 1 && $1 <= last { bad = 1 } { last = $1 } END { exit bad }' "$T/t" ||
        fail "tokens not increasing: $(cat "$T/t")"
    [ "$(awk '{ print $2 }' "$T/t" | sort -u | wc -l)" -ge 2 ] || fail "one slot only: $(cat "$T/t")"
    bg q acquire --token -n "$n"
    wait_until 10 test -s "$T/q.out" || fail "$(cat "$T/q.err")"
    run -0 cat "$T/q.out"
    [[ "$output" =~ ^[1-3]\ [0-9]+$ ]] || fail "acquire printed: $output"
    [ "${output#* }" -gt "$(tail -n 1 "$T/t" | cut -d' ' -f1)" ] || fail "token $output after $(cat "$T/t")"
    bg j --json acquire --token -n "$n"
    wait_until 10 test -s "$T/j.out" || fail "$(cat "$T/j.err")"
    jq -e --argjson t "${output#* }" '.event == "acquired" and .token > $t' "$T/j.out" >/dev/null ||
        fail "$(cat "$T/j.out")"
}

@test "without --token the command finds no AMQPLOCK_TOKEN, not even an outer hold's" {
    al create "$n" 2
    # (the command is not told the broker's URL: the inner hold is)
    run -0 al hold --token "$n" -- sh -c \
        "echo outer=\$AMQPLOCK_TOKEN >$T/o; $AMQPLOCK_BIN --url '$AMQPLOCK_URL' hold $n -- sh -c 'echo inner=\${AMQPLOCK_TOKEN-unset}' >>$T/o"
    grep -qx 'outer=[0-9][0-9]*' "$T/o" || fail "$(cat "$T/o")"
    grep -qx 'inner=unset' "$T/o" || fail "$(cat "$T/o")"
}

@test "a semaphore without its stream of tokens: hold --token exits 65 naming check --repair, runs nothing, leaves the slot free; check --repair makes it" {
    al create "$n" 1
    rmqctl delete_queue "amqplock.$n#tokens" >/dev/null
    run -65 --separate-stderr al hold --token "$n" -- touch "$T/ran"
    assert_error_line "amqplock: semaphore $n has no stream of fencing tokens (amqplock.$n#tokens; made by create since amqplock 0.5): an administrator makes it with amqplock check --repair $n"
    [ ! -e "$T/ran" ] || fail "the command ran"
    none_held "$n" || fail "still held: $(al --json status --no-names "$n")"
    no_lease_left "$n"
    run -65 al check "$n"
    [[ "$output" == *"stream of fencing tokens amqplock.$n#tokens is missing"* ]] || fail "$output"
    run -0 al check --repair "$n"
    run -0 al hold --token "$n" -- sh -c "$(says "$T/t")"
    [ "$(cut -d' ' -f1 "$T/t")" = 1 ] || fail "$(cat "$T/t")"
    # destroy takes the stream too
    al destroy "$n" >/dev/null
    [ -z "$(queues_like "amqplock.$n#")" ] || fail "left: $(queues_like "amqplock.$n#")"
}

@test "a hand-over draws a token of its own, larger than the releaser's" {
    al create "$n" 1
    bg r hold --token -v "$n" -- sh -c "$(says "$T/t"); touch $T/r.in; while [ ! -e $T/go ]; do sleep 0.05; done"
    wait_until 10 test -e "$T/r.in" || fail "$(cat "$T/r.err")"
    bg w hold --token -v -w 30 "$n" -- sh -c "$(says "$T/t")"
    local w=$BG
    in_line w
    touch "$T/go"
    wait_exit "$w" 20
    [ "$rc" -eq 0 ] || fail "w exited $rc: $(cat "$T/w.err")"
    grep -q "is ours, handed over" "$T/w.err" || fail "not handed over: $(cat "$T/w.err")"
    [ "$(wc -l <"$T/t")" -eq 2 ] || fail "$(cat "$T/t")"
    awk 'NR == 2 && $1 <= last { exit 1 } { last = $1 }' "$T/t" || fail "$(cat "$T/t")"
}

# grant FILE: one hold of the loops below, on 3 slots: its command writes
# "START END TOKEN SLOT" (nanoseconds) to FILE, after 20-70 ms inside. A
# lease of 10 s (--grace 1 lets it be that short): it outlasts the
# restart (6-7 s here), and a release cut by the restart leaves its slot
# blocked that long, not 40 s.
grant() {
    "$AMQPLOCK_BIN" hold -w 90 --grace 1 --lease 10 --token "$n" -- sh -c \
        's=$(date +%s%N); sleep 0.0$((RANDOM % 5 + 2)); echo "$s $(date +%s%N) $AMQPLOCK_TOKEN $AMQPLOCK_SLOT" >>"$0"' \
        "$1"
}

@test "200 grants on 3 slots, with kill -9 of holds and a broker restart: tokens are distinct, and on each slot every hold's token is larger than those before it" {
    al create "$n" 3
    local d=$T/c i victims
    d=$(critical_dir 3)
    client_loops "$d" 6 200 grant "$d/log"
    # kill -9 of holds now and then, a restart of the broker's app after
    # about a third of the grants
    for i in $(seq 1 8); do
        wait_until 60 turns_at_least "$d" $((i * 20)) || fail "only $(turns "$d") grants: $(tail -n 5 "$d/err")"
        victims=$(pgrep -f -- "hold -w 90 --grace 1 --lease 10 --token $n" | shuf -n 1 || true)
        [ -z "$victims" ] || kill -KILL $victims 2>/dev/null || true
        if [ "$i" -eq 3 ]; then
            APP_STOPPED=1
            rmqctl stop_app >/dev/null
            rmqctl start_app >/dev/null
            APP_STOPPED=
        fi
    done
    wait_until 120 turns_at_least "$d" 200 || fail "only $(turns "$d") grants: $(tail -n 5 "$d/err")"
    touch "$d/stop"
    finish_contention 120
    note "$(turns "$d") grants; hold exits: $(exit_counts "$d")"
    # distinct, all given
    [ "$(awk '{ print $3 }' "$d/log" | sort -u | grep -c '^[1-9][0-9]*$')" -eq "$(turns "$d")" ] ||
        fail "tokens missing or given twice: $(awk '{ print $3 }' "$d/log" | sort -n | uniq -d | head)"
    # on each slot, holds follow each other (the promise): each one's
    # token is larger than that of every earlier hold of the slot. (Across
    # slots the order is the grants', which a command cannot see: one that
    # starts late may hold a smaller token than one that ran meanwhile on
    # another slot; docs/guarantees.md says to keep the largest per slot.)
    sort -k4,4n -k1,1n "$d/log" | awk '$4 == slot && $3 <= last { print "slot " $4 ": " $3 " after " last; bad++ }
        { slot = $4; last = $3 } END { exit bad > 0 }' >"$T/bad" || fail "$(head "$T/bad")"
    local late
    late=$(awk '{ s[NR] = $1; e[NR] = $2; t[NR] = $3 }
        END { for (i = 1; i <= NR; i++) for (j = 1; j <= NR; j++) if (e[i] < s[j] && t[i] >= t[j]) n++
              print n + 0 }' "$d/log")
    note "$late pairs across slots where a command that started late holds the smaller token"
}

# freeze PID: a frozen host, as far as hold PID goes: its keeper (its
# child), the command's processes (the keeper's descendants) and amqplock
# itself stopped, in an order in which none sees another stop (amqplock
# would take a stopped command for a job stopped at the terminal, and
# stop itself). thaw_command, then thaw PID: the command first (amqplock,
# continued, stops it until it has checked its slot: a check a frozen
# host's command cannot count on), then the rest.
freeze() {
    FROZEN_KEEPER=$(pgrep -P "$1")
    FROZEN_CMD="$(pgrep -P "$FROZEN_KEEPER") $(pgrep -P "$(pgrep -P "$FROZEN_KEEPER" | tr '\n' ',' | sed 's/,$//')" || true)"
    kill -STOP "$FROZEN_KEEPER"
    kill -STOP $FROZEN_CMD
    kill -STOP "$1"
}
thaw_command() { kill -CONT $FROZEN_CMD 2>/dev/null || true; }
thaw() {
    kill -CONT "$1"
    kill -CONT "$FROZEN_KEEPER"
}

@test "docs/guarantees.md's fenced-append: a holder frozen past its lease, woken after the next holder wrote, is refused" {
    sed -n '/<!-- fence-example -->/,/^```$/p' "$TOP/docs/guarantees.md" | sed '1,2d;$d' >"$T/fenced-append"
    chmod +x "$T/fenced-append"
    grep -q '^flock 9$' "$T/fenced-append" || fail "no example: $(cat "$T/fenced-append")"
    al create "$n" 1
    # a writes once, then waits for go, ignoring TERM so that its late
    # write is tried whatever amqplock does once it wakes
    bg a hold --token --heartbeat 1 --grace 1 --lease 5 "$n" -- sh -c \
        "trap '' TERM; echo a1 | $T/fenced-append $T/data; touch $T/a.in
         while [ ! -e $T/go ]; do sleep 0.05; done
         echo a2 | $T/fenced-append $T/data"
    local a=$BG
    wait_until 10 test -e "$T/a.in" || fail "$(cat "$T/a.err")"
    freeze "$a"
    bg b hold --token -w 60 "$n" -- sh -c "echo b1 | $T/fenced-append $T/data"
    wait_exit "$BG" 60
    [ "$rc" -eq 0 ] || fail "b exited $rc: $(cat "$T/b.err")"
    touch "$T/go"
    thaw_command
    wait_until 10 grep -q '^fenced-append: ' "$T/a.err" || fail "a wrote nothing: $(cat "$T/a.err")"
    grep -Eq '^fenced-append: token [0-9]+ is below [0-9]+: a later holder has written$' "$T/a.err" ||
        fail "a's late write was not refused: $(cat "$T/a.err")"
    thaw "$a"
    wait_exit "$a" 20
    [ "$(cat "$T/data")" = "a1
b1" ] || fail "data: $(cat "$T/data")"
}
