#!/usr/bin/env bash
# Runs libFuzzer targets built by `make fuzz-build` (see fuzz/fuzz.mk), one
# after another, each for SECONDS. Prints one TAP-like line per target,
#   ok 1 - fuzz_names: 123456 runs in 60 s
# then "N passed, N failed", and exits non-zero if any target crashed,
# leaked, broke an invariant or did not run.
#
#   fuzz/run.sh SECONDS TARGET...
#
# A target starts from its committed seeds in fuzz/corpus/TARGET/ and adds
# what it finds to the scratch corpus build/fuzz/corpus/TARGET/. Crashing
# inputs go to build/fuzz/artifacts/, the full log to build/fuzz/TARGET.log.
# FUZZ_ARGS adds libFuzzer options (e.g. FUZZ_ARGS=-seed=1).
set -u
cd "$(dirname "$0")/.." || exit 2

seconds=${1:?usage: fuzz/run.sh SECONDS TARGET...}
shift
[ $# -gt 0 ] || { echo "usage: fuzz/run.sh SECONDS TARGET..." >&2; exit 2; }

# Our own sanitizer settings: an inherited log_path (tests/run.sh sets one)
# would hide the report from the log read below.
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

mkdir -p build/fuzz/artifacts
passed=0 failed=0 i=0
for t in "$@"; do
    i=$((i + 1))
    bin=build/fuzz/$t
    log=build/fuzz/$t.log
    if [ ! -x "$bin" ]; then
        echo "not ok $i - $t: $bin is not built (make fuzz-build)"
        failed=$((failed + 1))
        continue
    fi
    mkdir -p "build/fuzz/corpus/$t" "fuzz/corpus/$t"
    start=$EPOCHREALTIME
    # shellcheck disable=SC2086
    "$bin" -max_total_time="$seconds" -max_len=2048 -timeout=20 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="build/fuzz/artifacts/$t-" ${FUZZ_ARGS:-} \
        "build/fuzz/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
    runs=$(sed -n 's/^Done \([0-9]*\) runs in .*/\1/p' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ] && [ -n "$runs" ]; then
        echo "ok $i - $t: $runs runs in $took s"
        passed=$((passed + 1))
    else
        artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
        echo "not ok $i - $t: exit status $rc after $took s${artifact:+, input saved in $artifact}"
        # The report: the sanitizer's or the broken invariant, and its stack.
        grep -E -A40 '^(==[0-9]+==ERROR|.*invariant broken|.*runtime error)' "$log" |
            head -n 60 | sed 's/^/#   /'
        echo "#   (full log: $log)"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
