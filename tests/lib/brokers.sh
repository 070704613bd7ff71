#!/usr/bin/env bash
# make check-brokers: the suites against RabbitMQ releases other than the
# host's, each from a minimal Debian root of its own (debootstrap), its
# nodes run through chroot:
#
#   4.0          RabbitMQ 4.0 (Debian trixie): the whole suite (tests/run.sh)
#   4.0-cluster  the same: the cluster suite (tests/cluster/run.sh)
#   4.3          RabbitMQ 4.3 (Debian sid): the whole suite
#   4.3-cluster  the same: the cluster suite
#   4.3-build    amqplock built inside the sid root (its librabbitmq and gcc,
#                WERROR=1), its unit tests and the admin and client suites
#                run inside against the root's own RabbitMQ
#
# and, only when named (make bench-brokers), 4.0-bench and 4.3-bench: make
# bench's measurements (bench/run.sh) against that RabbitMQ, written to
# bench/RESULTS-4.0.md and bench/RESULTS-4.3.md; and 4.0-root and 4.3-root:
# the root made (or found made), nothing run (.ci/run makes them while it
# runs the host's suites: debootstrap waits on the network and dpkg, not
# the CPU).
#
# The first four use the host's ./amqplock (make amqplock unit first; a
# copy is taken at the start) and the host's test harness, with RMQ_BIN
# pointing at wrappers that run the root's rabbitmq-server and rabbitmqctl
# through chroot. Arguments, if any, name the runs to do (default: all).
# Prints every TAP line, a "# ..." line naming the versions before each run
# and how long each phase took, and ends with one line "N passed, N
# failed" for all runs together (a run that printed no count is one
# failure); exits non-zero on any failure. Runs as root (debootstrap,
# mount, chroot); takes about 25 minutes with roots to make.
#
#   AMQPLOCK_ROOTS      where the roots live (default
#                       ${TMPDIR:-/tmp}/amqplock-roots): ROOTS/trixie and
#                       ROOTS/sid, each reused when its set-up finished
#                       (ROOTS/SUITE/.amqplock-root), made anew otherwise;
#                       one run at a time uses them (ROOTS/.lock)
#   AMQPLOCK_TEST_SKIP  suites tests/run.sh leaves out (see there)
#   AMQPLOCK_CLUSTER_FILTER  a regex: only the cluster tests it matches
#                       run (bats -f), for chasing one test
#
# The mirror is the one the host's apt sources use for the host's own
# Debian suite. The harness runs with TMPDIR set to a work directory of its
# own that is bind-mounted at the same path inside each root, so that the
# directories the harness makes for a node exist for the node too; the
# roots also get /proc and /dev. Whatever way this script ends, it stops
# every process of its runs (a node, an epmd), takes its mounts down and
# removes the work directory; it never removes a directory while something
# is mounted below it.
set -euo pipefail
# shellcheck source=tests/lib/roots.sh
. "$(dirname "${BASH_SOURCE[0]}")/roots.sh"
cd "$(dirname "$0")/../.."

ROOTS=${AMQPLOCK_ROOTS:-${TMPDIR:-/tmp}/amqplock-roots}
# What a finished root's stamp says; a root made by another recipe is made
# anew. Bump when the set-up changes.
RECIPE="amqplock-root 1"
ALL_RUNS=(4.0 4.0-cluster 4.3 4.3-cluster 4.3-build)
# Runs done only when named: make bench's measurements against a root's
# RabbitMQ (host_runs), and the roots made alone.
BENCH_RUNS=(4.0-bench 4.3-bench 4.0-root 4.3-root)

# --- mounts and processes ------------------------------------------------------------

# our_pids: every live process of our runs: those whose root is one of our
# roots (nodes, epmd, rabbitmqctl, a build), and those that carry the work
# directory in their environment (the harness, its tests and what they
# start, the brokers' markers). Never this script or its tee. (kill_ours,
# tests/lib/roots.sh, kills them.)
our_pids() {
    local p
    {
        pids_rooted_in "$ROOTS/trixie" "$ROOTS/sid"
        # (grep fails on the environ of processes that just ended)
        if [ -n "${WORK:-}" ]; then
            grep -lzF -e "TMPDIR=$WORK/tmp" -e "AMQPLOCK_BROKER_OWNER=$WORK/" \
                -e "AMQPLOCK_CLUSTER_OWNER=$WORK/" /proc/[0-9]*/environ 2>/dev/null |
                sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' || true
        fi
    } | sort -un | while read -r p; do
        if [ "$p" != $$ ] && [ "$p" != "${TEE_PID:-}" ] && ! ended "$p"; then echo "$p"; fi
    done
}

# --- the runs' session ----------------------------------------------------------------

# A run (the harness, or the build in the sid root) goes in a session of its
# own (setsid; its pid is RUN_PID), so that a signal to this script can end
# it and everything it started at once. Its output goes through one tee
# that ignores the signals, to the terminal and a log.
RUN_PID=
end_run() {
    [ -n "$RUN_PID" ] || return 0
    kill -TERM -- -"$RUN_PID" 2>/dev/null || true
    # The harness stops its brokers on TERM: time for that, then no mercy.
    local end=$((SECONDS + 60))
    while [ -n "$(session_pids "$RUN_PID")" ] && [ $SECONDS -lt $end ]; do sleep 0.2; done
    kill -KILL -- -"$RUN_PID" 2>/dev/null || true
}
# session_pids SID: the live processes of session SID
session_pids() {
    local p
    for p in $(pgrep -s "$1"); do
        ended "$p" || echo "$p"
    done
}

CLEANED=
cleanup() {
    local rc=$? root ok=1
    set +e
    [ -z "$CLEANED" ] || return 0
    CLEANED=1
    trap '' INT TERM HUP
    [ -z "$RUN_PID" ] || say "brokers.sh ends (status $rc) during $RUN_NAME: stopping it"
    end_run
    kill_ours || ok=
    for root in "$ROOTS/trixie" "$ROOTS/sid"; do
        umount_under "$root" || ok=
    done
    if [ -n "${WORK:-}" ] && [ -d "$WORK" ]; then
        keep_logs
        if [ -n "$ok" ]; then
            safe_rm "$WORK" || true
        else
            echo "brokers.sh: leaving $WORK (processes or mounts left, see above)" >&2
        fi
    fi
    exit "$rc"
}

# keep_logs: the nodes' logs that tests/cluster/run.sh keeps after a failure
# would go with the work directory; they move next to it.
keep_logs() {
    local d
    for d in "$WORK"/tmp/amqplock-cluster-logs.*; do
        [ -d "$d" ] || continue
        mv "$d" "$PARENT/" && echo "# the nodes' logs kept in $d are now in $PARENT/${d##*/}"
    done
}

# --- the roots ------------------------------------------------------------------------

# version ROOT PACKAGE-PATTERN: the version of the installed package that
# matches (ROOT / for the host's), the first if several do.
version() {
    local root=$1
    shift
    # shellcheck disable=SC2016
    chroot "$root" dpkg-query -W -f '${db:Status-Abbrev} ${Version}\n' "$@" 2>/dev/null |
        awk '$1 == "ii" && v == "" { v = $2 } END { print v == "" ? "?" : v }' || true
}

# wrappers SUITE: WORK/bin-SUITE, a directory of the root's
# /usr/lib/rabbitmq/bin commands run through chroot (the environment passes
# through; chroot starts them in /, and the harness names absolute paths).
wrappers() {
    local root=$ROOTS/$1 dir=$WORK/bin-$1 f chroot
    chroot=$(command -v chroot) || return 1
    mkdir -p "$dir"
    for f in "$root"/usr/lib/rabbitmq/bin/*; do
        printf '#!/bin/sh\nexec %s %s /usr/lib/rabbitmq/bin/%s "$@"\n' "$chroot" "$root" "${f##*/}" \
            >"$dir/${f##*/}"
        chmod 755 "$dir/${f##*/}"
    done
}

# --- the runs -------------------------------------------------------------------------

PASSED=0 FAILED=0 SKIPPED=0 STATUS=0

# count LOG RC: adds the last "N passed, N failed[, N skipped]" line of LOG
# to the totals (no such line: one failure).
count() {
    local line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1) || true
    if [ -z "$line" ]; then
        echo "not ok - ${1##*/} printed no test count"
        FAILED=$((FAILED + 1))
    else
        # shellcheck disable=SC2086
        set -- $line
        PASSED=$((PASSED + $1))
        FAILED=$((FAILED + $3))
        [ $# -lt 5 ] || SKIPPED=$((SKIPPED + $5))
    fi
}

# run NAME SECS CMD...: CMD in a session of its own (see end_run), its
# output printed and kept in WORK/logs/NAME.log, stopped if it still runs
# after SECS (a failure); counted; what it left running is named and
# killed.
run() {
    local name=$1 log=$WORK/logs/$1.log limit=$2 rc=0 out left end late=
    shift 2
    mkdir -p "$WORK/logs"
    phase_start
    exec {out}> >(trap '' INT TERM HUP && exec tee "$log")
    TEE_PID=$!
    # Neither the run nor what it leaves behind keeps the tee's pipe (other
    # than as its output) or the lock. An asynchronous command starts with
    # SIGINT and SIGQUIT ignored, and so would every test (the terminal
    # tests send Ctrl-C and Ctrl-\): env gives them back their defaults.
    setsid env --default-signal=INT,QUIT "$@" >&"$out" 2>&1 </dev/null {out}>&- {LOCK}>&- &
    RUN_PID=$! RUN_NAME=$name
    exec {out}>&-
    # (not a bare wait, which would have no bound; a signal is handled
    # within a second)
    end=$((SECONDS + limit))
    while ! ended "$RUN_PID" && [ $SECONDS -lt $end ]; do sleep 1; done
    if ! ended "$RUN_PID"; then
        late=1
        end_run
    fi
    wait "$RUN_PID" 2>/dev/null || rc=$?
    RUN_PID=
    # The tee ends when the last writer does; something the run left
    # behind may still hold its output.
    wait_ended 10 "$TEE_PID" || { kill_ours || true; wait_ended 5 "$TEE_PID" || kill -KILL "$TEE_PID" 2>/dev/null || true; }
    wait "$TEE_PID" 2>/dev/null || true
    TEE_PID=
    left=$(our_pids | tr '\n' ' ')
    if [ -n "$left" ]; then
        say "$name left processes behind:"
        # shellcheck disable=SC2086
        { ps -o pid=,args= -p ${left// /,} 2>/dev/null || true; } | cut -c1-200 | sed 's/^/#   /'
        kill_ours || true
    fi
    count "$log"
    if [ -n "$late" ]; then
        echo "not ok - $name still ran after $limit s: stopped"
        FAILED=$((FAILED + 1))
        rc=1
    fi
    [ "$rc" -eq 0 ] || STATUS=1
    phase_end "$name"
}

# not_run NAME WHY: a run that could not be done counts as one failure.
not_run() {
    echo "not ok - $1 not run: $2"
    FAILED=$((FAILED + 1))
    STATUS=1
}

# upstream VERSION: a Debian version's upstream part (1:27.3.4+dfsg-1 ->
# 27.3.4).
upstream() { sed -E 's/^[0-9]+://; s/[-+~].*$//' <<<"$1"; }

# versions_row SUITE: docs/versions.md's row for SUITE's root names the
# RabbitMQ and Erlang it has (one test, counted).
versions_row() {
    local suite=$1 root=$ROOTS/$1 want row
    want="$(upstream "$(version "$root" rabbitmq-server)")|$(upstream "$(version "$root" erlang-base)")"
    row=$(grep -E "^\| $suite root " docs/versions.md | head -n 1) || true
    if [ "$(cut -d'|' -f3-4 <<<"$row" | tr -d ' ')" = "$want" ]; then
        echo "ok - docs/versions.md's row for the $suite root: RabbitMQ|Erlang $want"
        PASSED=$((PASSED + 1))
    else
        echo "not ok - docs/versions.md's row for the $suite root is '$row'; the root has RabbitMQ|Erlang $want"
        FAILED=$((FAILED + 1))
        STATUS=1
    fi
}

# host_runs SUITE RABBITMQ: the whole suite and the cluster suite, with the
# host's harness and amqplock, against SUITE's RabbitMQ.
host_runs() {
    local suite=$1 rmq=$2 root=$ROOTS/$1 versions
    versions="RabbitMQ $(version "$root" rabbitmq-server), Erlang $(version "$root" erlang-base)"
    versions+=" (Debian $suite); the host's amqplock, librabbitmq $(version / 'librabbitmq[0-9]*')"
    if want "$rmq"; then
        say "$rmq: the whole suite (tests/run.sh): $versions"
        # (the bound on a whole run: CI runs these suites one at a time,
        # AMQPLOCK_TEST_JOBS=1, beside two other streams. They took
        # 1000-1260 s here, and CI's machine ran make check 2.3 times
        # slower)
        run "$rmq" 3600 env RMQ_BIN="$WORK/bin-$suite" TMPDIR="$WORK/tmp" AMQPLOCK_BIN="$WORK/amqplock" \
            tests/run.sh
    fi
    if want "$rmq-cluster"; then
        say "$rmq-cluster: the cluster suite (tests/cluster/run.sh): $versions"
        run "$rmq-cluster" 900 env RMQ_BIN="$WORK/bin-$suite" TMPDIR="$WORK/tmp" \
            AMQPLOCK_BIN="$WORK/amqplock" tests/cluster/run.sh \
            ${AMQPLOCK_CLUSTER_FILTER:+-f "$AMQPLOCK_CLUSTER_FILTER"}
    fi
    if want "$rmq-bench"; then
        say "$rmq-bench: make bench (bench/run.sh) to bench/RESULTS-$rmq.md: $versions"
        # one "test": the measurements could all be made
        run "$rmq-bench" 1800 env RMQ_BIN="$WORK/bin-$suite" TMPDIR="$WORK/tmp" \
            BENCH_RESULTS="$PWD/bench/RESULTS-$rmq.md" BENCH_DPKG_ROOT="$root" \
            BENCH_BY="\`tests/lib/brokers.sh $rmq-bench\`" \
            bash -c 'if bench/run.sh; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi'
    fi
}

# sid_build: the project's files (tracked, and new ones not ignored:
# tests/lib/copy-tree.sh) copied to WORK/src; inside the sid root, the
# project's own install-deps.sh with the Makefile's DEB_PKGS (and procps and
# perl, which the tests use and a minimal root lacks), then the build, unit
# tests and the admin and client suites against the root's own RabbitMQ.
sid_build() {
    local root=$ROOTS/sid pkgs versions gcc
    if ! tests/lib/copy-tree.sh "$WORK/src"; then
        not_run 4.3-build "could not copy the project's files (tests/lib/copy-tree.sh) to $WORK/src"
        return
    fi
    # shellcheck disable=SC2016
    if ! pkgs=$(printf '_brokers_deb_pkgs:\n\t@echo $(DEB_PKGS)\n' |
        make -s --no-print-directory -f Makefile -f - _brokers_deb_pkgs) || [ -z "$pkgs" ]; then
        not_run 4.3-build "could not read DEB_PKGS from the Makefile"
        return
    fi
    phase_start
    say "4.3-build: tests/lib/install-deps.sh $pkgs procps perl (in the sid root)"
    # shellcheck disable=SC2086
    if ! in_root "$root" sh "$WORK/src/tests/lib/install-deps.sh" $pkgs procps perl \
        >"$WORK/sid-deps.log" 2>&1; then
        tail -n 20 "$WORK/sid-deps.log" | sed 's/^/#   /'
        not_run 4.3-build "the build and test dependencies could not be installed in the sid root"
        return
    fi
    phase_end "sid: build and test dependencies installed"
    versions="RabbitMQ $(version "$root" rabbitmq-server), Erlang $(version "$root" erlang-base)"
    gcc=$(chroot "$root" gcc -dumpfullversion 2>/dev/null) || gcc='?'
    versions+=", librabbitmq $(version "$root" 'librabbitmq[0-9]*'), gcc $gcc"
    say "4.3-build: make amqplock unit WERROR=1 and tests/run.sh admin client, in the sid root: $versions"
    # shellcheck disable=SC2016
    run 4.3-build 900 chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        LANG=C.UTF-8 TMPDIR="$WORK/tmp" \
        bash -c 'cd "$1" && make amqplock unit WERROR=1 && tests/run.sh admin client' bash "$WORK/src"
}

# suite_runs SUITE RABBITMQ: the runs against RabbitMQ from SUITE's root
# that were asked for; each counts as a failure if the root is missing.
suite_runs() {
    local suite=$1 rmq=$2 root=$ROOTS/$1 r
    local -a runs=()
    for r in "$rmq" "$rmq-cluster" "$rmq-build" "$rmq-bench"; do
        ! want "$r" || runs+=("$r")
    done
    if [ ${#runs[@]} -eq 0 ]; then
        # (the root alone: made, or one failure)
        ! want "$rmq-root" || make_root "$suite" rabbitmq-server || not_run "$rmq-root" "no $suite root"
        return 0
    fi
    if make_root "$suite" rabbitmq-server && mount_root "$root"; then
        wrappers "$suite"
        versions_row "$suite"
        host_runs "$suite" "$rmq"
        if want "$rmq-build"; then sid_build; fi
    else
        for r in "${runs[@]}"; do not_run "$r" "no $suite root"; done
    fi
    umount_under "$root" || die "mounts left in $root"
}

want() { [[ " ${RUNS[*]} " == *" $1 "* ]]; }

main() {
    [ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, mount, chroot)"
    RUNS=("$@")
    [ ${#RUNS[@]} -gt 0 ] || RUNS=("${ALL_RUNS[@]}")
    local r
    for r in "${RUNS[@]}"; do
        [[ " ${ALL_RUNS[*]} ${BENCH_RUNS[*]} " == *" $r "* ]] ||
            die "no run '$r' (runs: ${ALL_RUNS[*]} ${BENCH_RUNS[*]})"
    done
    # (the roots alone need no build)
    [ -x amqplock ] || [[ " ${RUNS[*]} " =~ ^(" "[0-9.]+-root)+" "$ ]] ||
        die "no ./amqplock: make amqplock unit first"
    mkdir -p "$ROOTS"
    ROOTS=$(cd "$ROOTS" && pwd -P)
    PARENT=$(cd "${TMPDIR:-/tmp}" && pwd -P)
    roots_begin "$ROOTS/.lock" "tests/lib/brokers.sh (AMQPLOCK_ROOTS names another place)" debootstrap
    local t0=$SECONDS
    WORK=$(mktemp -d "$PARENT/amqplock-brokers.XXXXXX")
    mkdir -p "$WORK/tmp"
    # The binary under test stays the same all along, whatever is rebuilt.
    [ ! -x amqplock ] || cp amqplock "$WORK/amqplock"
    say "roots in $ROOTS, mirror $MIRROR, work directory $WORK"

    suite_runs trixie 4.0
    suite_runs sid 4.3
    keep_logs
    say "times:"
    for r in "${PHASES[@]}"; do say "  $r"; done
    say "  total: $((SECONDS - t0)) s"
    if [ "$SKIPPED" -gt 0 ]; then
        echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
    else
        echo "$PASSED passed, $FAILED failed"
    fi
    [ "$STATUS" -eq 0 ] && [ "$FAILED" -eq 0 ]
}

main "$@"
