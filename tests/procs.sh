# Sourced by tests/broker.sh, tests/cluster.sh and tests/brokers.sh: waiting
# for processes to end, the same way in each.

# gone PID: no such process, or only a zombie
gone() {
    local st
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
    [ -z "$st" ] || [ "$st" = Z ]
}

# wait_gone SECS PIDS...: until every PID is gone (0), or SECS (whole
# seconds) have passed (1).
wait_gone() {
    local end p left
    end=$((${EPOCHREALTIME//[!0-9]/} + $1 * 1000000))
    shift
    while :; do
        left=
        for p in "$@"; do gone "$p" || left=1; done
        [ -n "$left" ] || return 0
        [ "${EPOCHREALTIME//[!0-9]/}" -lt "$end" ] || return 1
        sleep 0.05
    done
}
