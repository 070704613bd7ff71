# Sourced by tests/lib/helper.bash, tests/lib/broker.sh, tests/lib/cluster.sh,
# tests/lib/netns-cluster.sh, tests/partition/run.sh,
# tests/lib/roots.sh (for brokers.sh and deb-check.sh) and bench/run.sh:
# whether processes have ended, and waiting for them to, the same way
# everywhere.

# ended PID: the process has ended: no such process, or only a zombie
# (ended, not yet reaped).
ended() {
    local stat
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 0
    stat=${stat##*) }
    [ -z "$stat" ] || [ "${stat%% *}" = Z ]
}

# running PID: not ended
running() { ! ended "$1"; }

# gone PID: no such process at all, not even a zombie (reaped).
gone() { ! kill -0 "$1" 2>/dev/null; }

# nap SECS: sleeps SECS (e.g. 0.05) without starting a process: the
# timeout of a read from a pipe no one writes to. The waits below poll
# twenty times a second, several at once in every suite; a sleep(1) and an
# awk at each turn were a tenth of a core.
nap() { read -r -t "$1" _ <> <(:) || :; }

# wait_ended SECS PIDS...: until every PID has ended (0), or SECS (whole
# seconds) have passed (1).
wait_ended() {
    local end p left
    end=$((${EPOCHREALTIME//[!0-9]/} + $1 * 1000000))
    shift
    while :; do
        left=
        for p in "$@"; do ended "$p" || left=1; done
        [ -n "$left" ] || return 0
        [ "${EPOCHREALTIME//[!0-9]/}" -lt "$end" ] || return 1
        nap 0.05
    done
}
