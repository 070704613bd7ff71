# shellcheck shell=bash
# Sourced by tests/lib/cluster.sh and tests/lib/netns-cluster.sh: deadlines,
# and how many running nodes a node of their three-node cluster sees, the
# same way in both. The script that sources it gives: ctl N ARGS...
# (rabbitmqctl against node N), DIR, WHO (its name, for messages),
# RUNNING_CTL_TIMEOUT (how long running waits for an answer, unless
# CTL_TIMEOUT says) and node_label N (what follows "node N" in a message).

past() { awk -v t="$EPOCHREALTIME" -v e="$1" 'BEGIN { exit !(t >= e) }'; }
deadline() { awk -v t="$EPOCHREALTIME" -v s="$1" 'BEGIN { printf "%.3f", t + s }'; }
absdir() { (cd "$1" && pwd); }

# running N: the number of running nodes that node N sees (0 if it does
# not answer; what it said goes to DIR/nN/running.out).
running() {
    local out
    out=$(CTL_TIMEOUT=${CTL_TIMEOUT:-$RUNNING_CTL_TIMEOUT} ctl "$1" -q cluster_status --formatter json 2>&1) ||
        { printf '%s\n' "$out" >"$DIR/n$1/running.out"; echo 0; return; }
    printf '%s\n' "$out" >"$DIR/n$1/running.out"
    jq -r '.running_nodes | length' <<<"$out" 2>/dev/null || echo 0
}

# wait_running N COUNT SECS: until node N sees COUNT running nodes; says
# what it saw last if not.
wait_running() {
    local end
    end=$(deadline "$3")
    until [ "$(running "$1")" = "$2" ]; do
        if past "$end"; then
            echo "$WHO: node $1$(node_label "$1") does not see $2 running nodes after $3 s; it said:" >&2
            jq -c '{running_nodes, partitions, alarms}' "$DIR/n$1/running.out" >&2 2>/dev/null ||
                head -c 2000 "$DIR/n$1/running.out" >&2
            return 1
        fi
        sleep 0.5
    done
}
