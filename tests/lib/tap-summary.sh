#!/usr/bin/env bash
# tap-summary.sh TAPFILE: prints the line "N passed, N failed" (with ", N
# skipped" when some were) for the TAP lines in TAPFILE, the last line of
# every test runner here, and exits 0 only if none failed and some passed.
set -u
tap=$1
passed=$(grep -E '^ok ' "$tap" | grep -vc ' # skip' || true)
skipped=$(grep -E '^ok .* # skip' -c "$tap" || true)
failed=$(grep -c '^not ok ' "$tap" || true)
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
