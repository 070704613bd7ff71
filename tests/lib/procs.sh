# Sourced by tests/lib/helper.bash, tests/lib/broker.sh, tests/lib/cluster.sh,
# tests/lib/netns-cluster.sh, tests/partition/run.sh,
# tests/lib/roots.sh (for brokers.sh and deb-check.sh) and bench/run.sh:
# whether processes have ended, and waiting for them to, the same way
# everywhere.

# proc_stat PID: PROC_STAT set to /proc/PID/stat from field 3 (the
# state) on, past the command's name, which may hold spaces and ")"; 1 if
# there is no PID. One read, no process started.
proc_stat() {
    { read -r PROC_STAT <"/proc/$1/stat"; } 2>/dev/null || return 1
    PROC_STAT=${PROC_STAT##*) }
}

# proc_field PID N: field N of /proc/PID/stat (3 state, 4 ppid, 5 pgrp,
# 6 session, 22 start time), empty if there is no PID.
proc_field() {
    local f
    proc_stat "$1" || return 0
    read -ra f <<<"$PROC_STAT"
    echo "${f[$2 - 3]}"
}

# ended PID: the process has ended: no such process, or only a zombie
# (ended, not yet reaped).
ended() {
    proc_stat "$1" || return 0
    [ -z "$PROC_STAT" ] || [ "${PROC_STAT%% *}" = Z ]
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
