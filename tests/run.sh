#!/usr/bin/env bash
# Runs every test: the C unit tests, then the bats suites against private
# RabbitMQ nodes that live only as long as this script, several suites at
# once. Ends with the line "N passed, N failed" (N skipped may follow) and
# exits non-zero on any failure. Arguments, if any, name the bats files to
# run (tests/x.bats, or just x; default: all).
#
#   AMQPLOCK_TEST_JOBS  how many suites run at once (default 4; 1: one
#                       after the other, as before)
#   AMQPLOCK_WRAP       a command to run amqplock under (e.g. "valgrind -q
#                       --error-exitcode=99"); see tests/lib/helper.bash
#   AMQPLOCK_TEST_SKIP  suites to leave out, by name (e.g. "docs")
#
# The suites share one private node, each test on semaphores of its own
# name (helper.bash, unique_name) and its own scratch directory, except
# those whose header says, on a line of its own:
#   # run.sh: a broker of its own
# (they stop, restart or alarm the node, or close every connection on it):
# each of those gets a node of its own, started when the suite starts; and
#   # run.sh: processes of its own
# (they signal amqplock by name, killall and pkill without a session): run
# in a PID namespace of their own, where no other suite's process shows.
# Each suite's TAP is printed whole once it ends; then how long each took,
# and the wall time of the whole run.
set -u
cd "$(dirname "$0")/.."
# Signals at their defaults, whatever started this (nohup, a background
# job of a script): see tests/lib/default-signals.pl.
if [ -z "${AMQPLOCK_SIGNALS_DEFAULT:-}" ]; then
    export AMQPLOCK_SIGNALS_DEFAULT=1
    exec tests/lib/default-signals.pl tests/run.sh "$@"
fi

started=$SECONDS
work=$(mktemp -d "${TMPDIR:-/tmp}/amqplock-test.XXXXXX")
tap="$work/tap"
: >"$tap"
cleanup() {
    local b
    # (a suite's job that is still running when we are interrupted)
    jobs -p | xargs -r kill -TERM 2>/dev/null
    wait 2>/dev/null
    for b in "$work"/broker*; do
        [ -d "$b" ] && tests/lib/broker.sh stop "$b"
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# The nodes' data on a tmpfs where there is one (tests/lib/broker.sh,
# AMQPLOCK_NODE_DATA): a quorum lease's every write is an fsync, which on
# this machine's disk is most of the nodes' CPU and of a claim's wait.
# Nothing the suites assert depends on the disk; a restart keeps the data.
if [ -z "${AMQPLOCK_NODE_DATA+set}" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
    [ -w /dev/shm ]; then
    export AMQPLOCK_NODE_DATA=/dev/shm
fi

# A sanitizer build (make check SANITIZE=1) writes any report to a file
# here, so that an error counts even where the test expected a failure.
mkdir -p "$work/sanitizer"
export ASAN_OPTIONS="log_path=$work/sanitizer/asan:detect_leaks=1:exitcode=86${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="log_path=$work/sanitizer/ubsan:print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(tests/*.bats)
# A suite may be named alone: "lease" is tests/lease.bats.
for i in "${!suites[@]}"; do
    [[ ${suites[i]} == */* || ${suites[i]} == *.bats ]] || suites[i]=tests/${suites[i]}.bats
done
# AMQPLOCK_TEST_SKIP: suites to leave out, by name ("docs valgrind"); CI's
# sanitizer pass leaves out the documentation suite, which checks text.
kept=()
for suite in "${suites[@]}"; do
    [[ " ${AMQPLOCK_TEST_SKIP:-} " == *" $(basename "$suite" .bats) "* ]] || kept+=("$suite")
done
suites=("${kept[@]}")

# The longest suites start first, so that none is left to run alone at the
# end; the order measured on 2 cores (the rest follow, alphabetically).
LONGEST="model mlease lease faults cron client containment handover admin supervisor check permissions line"
ordered=()
for name in $LONGEST; do
    for suite in "${suites[@]}"; do
        [ "$(basename "$suite" .bats)" = "$name" ] && ordered+=("$suite")
    done
done
for suite in "${suites[@]}"; do
    [[ " $LONGEST " == *" $(basename "$suite" .bats) "* ]] || ordered+=("$suite")
done
suites=("${ordered[@]}")

# Unit tests first: they need no broker. A binary that dies before its plan
# is complete counts as a failure.
for t in build/unit/test_*; do
    [ -x "$t" ] || continue
    if ! "$t" >>"$tap" 2>&1; then
        echo "not ok - $t exited with status $?" >>"$tap"
    fi
done
grep -E '^(not )?ok ' "$tap" | grep -v '^ok ' || true
echo "unit tests: $(grep -c '^ok ' "$tap") passed"

has_tag() { grep -qx "# run.sh: $2" "$1"; }

# run_suite SUITE OUT: one bats run of SUITE, its TAP to OUT.tap, its time
# in seconds to OUT.time; on a node of its own if its header asks for one
# (started here, and stopped after), else on the shared one.
run_suite() {
    local suite=$1 out=$2 t0=$SECONDS node=$work/broker status=0
    local -a wrap=()
    if has_tag "$suite" "a broker of its own"; then
        node=$work/broker-$(basename "$suite" .bats)
        if ! tests/lib/broker.sh start "$node" >"$out.broker" 2>&1; then
            {
                echo "not ok - private RabbitMQ for $suite did not start: $(tail -n 1 "$out.broker")"
                tail -n 15 "$out.broker" | sed 's/^/# /'
            } >"$out.tap"
            echo $((SECONDS - t0)) >"$out.time"
            return
        fi
    fi
    has_tag "$suite" "processes of its own" && wrap=(unshare --pid --fork --mount-proc)
    # (the CPU its processes used, rabbitmqctl's included: where the
    # machine's time goes, in the summary)
    local TIMEFORMAT='%U %S'
    {
        time (
            # shellcheck disable=SC1091
            . "$node/env"
            # (the suites name the management API where they mean it,
            # AMQPLOCK_TEST_MANAGEMENT_URL: with it set for all, every
            # "does not exist" would ask the API for a near name)
            unset AMQPLOCK_MANAGEMENT_URL
            export AMQPLOCK_TEST_WORK="$work"
            "${wrap[@]}" bats --tap --timing "$suite" >"$out.tap" 2>&1
        ) || status=$?
    } 2>"$out.cpu"
    if [ "$status" -ne 0 ] && ! grep -q '^not ok ' "$out.tap"; then
        echo "not ok - bats $suite exited with status $status" >>"$out.tap"
    fi
    if [ "$node" != "$work/broker" ]; then
        tests/lib/broker.sh cpu "$node" >"$out.node" 2>/dev/null
        tests/lib/broker.sh stop "$node" >/dev/null 2>&1
    fi
    echo $((SECONDS - t0)) >"$out.time"
}

# finished PID: prints the suite PID ran, whole, and adds it to the tally.
declare -A running_suite=()
finished() {
    local suite=${running_suite[$1]} out
    out=$work/run-$(basename "$suite" .bats)
    unset "running_suite[$1]"
    cat "$out.tap"
    cat "$out.tap" >>"$tap"
    times+=("$(basename "$suite" .bats) $(cat "$out.time" 2>/dev/null || echo '?') s ($(awk '{ printf "%.0f", $1 + $2 }' "$out.cpu" 2>/dev/null || echo '?') s CPU$([ ! -s "$out.node" ] || echo ", its node $(cat "$out.node") s"))")
}

times=()
if ! tests/lib/broker.sh start "$work/broker"; then
    echo "not ok - private RabbitMQ did not start" >>"$tap"
else
    jobs_max=${AMQPLOCK_TEST_JOBS:-4}
    for suite in "${suites[@]}"; do
        while [ ${#running_suite[@]} -ge "$jobs_max" ]; do
            wait -n -p done_pid
            finished "$done_pid"
        done
        run_suite "$suite" "$work/run-$(basename "$suite" .bats)" &
        running_suite[$!]=$suite
    done
    while [ ${#running_suite[@]} -gt 0 ]; do
        wait -n -p done_pid
        finished "$done_pid"
    done
    echo "# suites took: $(printf '%s; ' "${times[@]}" | sed 's/; $//')"
    echo "# the shared node used $(tests/lib/broker.sh cpu "$work/broker") s of CPU"
    # (a suite whose run left no TAP at all did not run: a failure)
    for suite in "${suites[@]}"; do
        [ -s "$work/run-$(basename "$suite" .bats).tap" ] ||
            echo "not ok - $suite did not run" >>"$tap"
    done
fi

# A report of nothing but LeakSanitizer's "Unable to get registers from
# thread N." is no finding. Its leak check could not read the registers
# of a thread it had stopped (gone: the process was killed meanwhile),
# and went on without them. Any leak it then found would be in lines of
# its own; later compiler-rt sources print this warning only when
# verbose. It is shown, not failed.
for report in "$work"/sanitizer/*; do
    [ -e "$report" ] || continue
    echo "# sanitizer report $report:"
    sed 's/^/#   /' "$report"
    if [ -s "$report" ] &&
        ! grep -qvE '^==[0-9]+==Unable to get registers from thread [0-9]+\.$' "$report"; then
        echo "# (LeakSanitizer's warning alone: no finding)"
    else
        echo "not ok - sanitizer report $(basename "$report")" >>"$tap"
    fi
done

echo "# wall time: $((SECONDS - started)) s, ${AMQPLOCK_TEST_JOBS:-4} suites at a time"
tests/lib/tap-summary.sh "$tap"
