#!/usr/bin/env bash
# Runs every test: the C unit tests, then the bats suites against a private
# RabbitMQ that lives only as long as this script. Ends with the line
# "N passed, N failed" (N skipped may follow) and exits non-zero on any
# failure. Arguments, if any, name the bats files to run (tests/x.bats, or
# just x; default: all).
#
#   AMQPLOCK_WRAP   a command to run amqplock under (e.g. "valgrind -q
#                   --error-exitcode=99"); see tests/lib/helper.bash
#   AMQPLOCK_TEST_SKIP  suites to leave out, by name (e.g. "docs")
set -u
cd "$(dirname "$0")/.."
# Signals at their defaults, whatever started this (nohup, a background
# job of a script): see tests/lib/default-signals.pl.
if [ -z "${AMQPLOCK_SIGNALS_DEFAULT:-}" ]; then
    export AMQPLOCK_SIGNALS_DEFAULT=1
    exec tests/lib/default-signals.pl tests/run.sh "$@"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/amqplock-test.XXXXXX")
tap="$work/tap"
: >"$tap"
cleanup() {
    tests/lib/broker.sh stop "$work/broker"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

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

if ! tests/lib/broker.sh start "$work/broker"; then
    echo "not ok - private RabbitMQ did not start" >>"$tap"
else
    # shellcheck disable=SC1091
    . "$work/broker/env"
    export AMQPLOCK_TEST_WORK="$work"
    # One bats run per suite, each timed: what CI's budget is made of.
    times=()
    for suite in "${suites[@]}"; do
        start=$SECONDS
        bats --tap --timing "$suite" | tee "$work/bats.tap"
        status=${PIPESTATUS[0]}
        cat "$work/bats.tap" >>"$tap"
        if [ "$status" -ne 0 ] && ! grep -q '^not ok ' "$work/bats.tap"; then
            echo "not ok - bats $suite exited with status $status" >>"$tap"
        fi
        times+=("$(basename "$suite" .bats) $((SECONDS - start)) s")
    done
    echo "# suites took: $(IFS=,; echo "${times[*]}" | sed 's/,/, /g')"
fi

for report in "$work"/sanitizer/*; do
    [ -e "$report" ] || continue
    echo "# sanitizer report $report:"
    sed 's/^/#   /' "$report"
    echo "not ok - sanitizer report $(basename "$report")" >>"$tap"
done

tests/lib/tap-summary.sh "$tap"
