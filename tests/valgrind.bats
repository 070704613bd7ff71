#!/usr/bin/env bats
# amqplock under valgrind's memcheck against the private broker: every
# command once (create, max, add, remove, max N, status, acquire, hold,
# wait, destroy), and the error paths of a missing semaphore, a wrong
# password, a usage error, a closed port and TLS. A test fails on the exit
# status it expects not being the one seen, and on any memory error or
# definite leak in amqplock itself (valgrind's report is shown). Forked
# children (hold's watchdog, CMD) are not checked.
#
# Skipped without valgrind, and for a binary built with the sanitizers
# (make SANITIZE=1), which cannot run under valgrind. Each command takes a
# second or two to start under valgrind, so timeouts are generous.

bats_require_minimum_version 1.5.0
load lib/helper

# Skipping is decided once here and done in setup (this bats cannot skip
# from setup_file).
setup_file() {
    VG_SKIP=
    if ! command -v valgrind >/dev/null; then
        VG_SKIP="valgrind is not installed"
    elif ldd "$AMQPLOCK_BIN" 2>/dev/null | grep -qE 'lib(asan|ubsan|tsan)'; then
        VG_SKIP="amqplock is built with sanitizers"
    fi
    export VG_SKIP
}

setup() {
    [ -z "$VG_SKIP" ] || skip "$VG_SKIP"
    n=$(unique_name)
    T=$BATS_TEST_TMPDIR
    PIDS=()
    VG_N=0
    # Timeouts for a slow start under valgrind.
    G=(--connect-timeout 20 --rpc-timeout 20)
}

teardown() {
    [ -z "$VG_SKIP" ] || return 0
    # the semaphore is destroyed without valgrind, under which al runs in
    # this suite
    n='' test_cleanup
    plain destroy --admin-wait 5 "$n" >/dev/null 2>&1 || true
}

# valgrind as in the brief: errors and definite leaks make exit status 99.
# Forked children (hold's watchdog) say nothing; exec'd ones are not traced.
VALGRIND="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
--show-leak-kinds=definite --child-silent-after-fork=yes"

# vg_wrap TAG: al and bg (helper.bash) run amqplock under valgrind, which
# writes its report (nothing when all is well) to $T/vg.TAG.<pid>.log.
vg_wrap() {
    AMQPLOCK_WRAP="$VALGRIND --log-file=$T/vg.$1.%p.log"
}

# amqplock without valgrind, to set things up quickly.
plain() { timeout 30 "$AMQPLOCK_BIN" "$@"; }

# vg_report TAG: what valgrind reported for the runs tagged TAG.
vg_report() {
    local f
    for f in "$T"/vg."$1".*.log; do
        [ -s "$f" ] || continue
        echo "--- valgrind report ${f##*/}:"
        cat "$f"
    done
}

# vg_check TAG WANT GOT WHAT: amqplock WHAT (run with vg_wrap TAG) exited
# WANT and valgrind found no error; else fail, with valgrind's report and
# amqplock's output.
vg_check() {
    local tag=$1 want=$2 got=$3 what=$4 report
    report=$(vg_report "$tag")
    if [ "$got" -eq 99 ] || [ -n "$report" ]; then
        fail "valgrind found errors in: amqplock $what (exit $got, expected $want)
$report
stdout: ${output:-}
stderr: ${stderr:-}"
    fi
    [ "$got" -eq "$want" ] ||
        fail "amqplock $what exited $got, expected $want
stdout: ${output:-}
stderr: ${stderr:-}"
}

# vg WANT ARGS...: amqplock ARGS under valgrind exits WANT, cleanly. Sets
# output, stderr and status as bats' run does.
vg() {
    local want=$1
    shift
    VG_N=$((VG_N + 1))
    vg_wrap "$VG_N"
    run --separate-stderr al "${G[@]}" "$@"
    vg_check "$VG_N" "$want" "$status" "$*"
}

# vg_bg TAG ARGS...: amqplock ARGS under valgrind in the background (bg in
# helper.bash: pid in BG, output in $T/TAG.out and $T/TAG.err). Check it
# with wait_exit "$BG" SECS, then vg_check TAG WANT "$rc" WHAT.
vg_bg() {
    local tag=$1
    shift
    vg_wrap "$tag"
    bg "$tag" "${G[@]}" "$@"
}

# connected PID: amqplock PID has a socket open (to the broker).
connected() { ls -l "/proc/$1/fd" 2>/dev/null | grep -q 'socket:'; }

# await_slot TAG: waits for a background acquire TAG to print its slot.
await_slot() {
    wait_until 30 has_line "$T/$1.out" '[0-9]+' ||
        fail "acquire $1 printed no slot: $(cat "$T/$1.out" "$T/$1.err"; vg_report "$1")"
}

@test "create, max, add, remove and max N under valgrind" {
    vg 0 create "$n" 2
    vg 0 max "$n"
    assert_output 2
    vg 0 add "$n"
    vg 0 --json add "$n" 2
    assert_json '.ok and .max == 5 and .previous == 3'
    vg 0 remove "$n"
    vg 0 --json max "$n" 2
    assert_json '.ok and .max == 2 and .previous == 4'
}

@test "status, text and --json, under valgrind" {
    plain create "$n" 3
    vg_bg holder acquire "$n"
    # The holder runs under valgrind too: it is checked when it ends.
    await_slot holder
    vg 0 status "$n"
    assert_line --regexp "^semaphore +$n\$"
    assert_line --regexp '^max +3$'
    assert_line --regexp '^held +1 of 3: 1$'
    assert_line --regexp '^free +2 of 3: 2 3$'
    assert_line --regexp '^orphans +0$'
    vg 0 --json status "$n"
    assert_json '.ok and .max == 3 and .held == [1] and .free == [2,3] and .orphans == []'
    kill -TERM "$BG"
    wait_exit "$BG" 30
    vg_check holder 0 "$rc" "acquire (holding during status)"
}

@test "acquire until TERM under valgrind" {
    plain create "$n" 1
    vg_bg acq acquire -w 20 "$n"
    await_slot acq
    [ "$(head -n 1 "$T/acq.out")" = 1 ]
    kill -TERM "$BG"
    wait_exit "$BG" 30
    vg_check acq 0 "$rc" "acquire"
}

@test "acquire --json until TERM under valgrind" {
    plain create "$n" 1
    vg_bg acq --json acquire -w 20 "$n"
    wait_until 30 has_line "$T/acq.out" '.*"acquired".*' ||
        fail "no acquired event: $(cat "$T/acq.out" "$T/acq.err"; vg_report acq)"
    kill -TERM "$BG"
    wait_exit "$BG" 30
    vg_check acq 0 "$rc" "--json acquire"
    has_line "$T/acq.out" '.*"released".*'
}

@test "hold -- true and hold -- sh -c 'exit 66' under valgrind" {
    plain create "$n" 1
    vg 0 hold -w 20 "$n" -- true
    vg 3 hold -w 20 "$n" -- sh -c 'echo "slot $AMQPLOCK_SLOT"; exit 3'
    assert_output "slot 1"
}

@test "wait for an orphan under valgrind" {
    plain create "$n" 2
    # A foreign holder of slot 2 (it never checks its slot, so it stays),
    # an orphan once slot 2 is removed.
    perl "$H/holdq.pl" "$AMQPLOCK_TEST_PORT" "amqplock.$n-2-B" >"$T/holdq.out" 2>&1 </dev/null 3>&- &
    local orphan=$!
    PIDS+=("$orphan")
    wait_until 20 has_line "$T/holdq.out" ready || fail "holdq: $(cat "$T/holdq.out")"
    plain remove "$n"
    vg_bg waiter wait -w 40 "$n"
    # Connected, then a few rounds of probing for the orphan.
    wait_until 20 connected "$BG" || fail "wait did not connect: $(cat "$T/waiter.err")"
    sleep 1
    running "$BG" || fail "wait ended with an orphan left: $(cat "$T/waiter.err"; vg_report waiter)"
    kill -TERM "$orphan"
    wait_exit "$BG" 30
    vg_check waiter 0 "$rc" "wait"
    # With no orphan left, wait returns at once.
    vg 0 wait "$n"
}

@test "check and check --repair of a damaged semaphore under valgrind" {
    plain create "$n" 4
    # a hole at slot 3, a stray holder queue and a leftover admin mutex
    timeout 20 perl "$H/holdq.pl" "$AMQPLOCK_TEST_PORT" --delete "amqplock.$n-3-A" \
        --shared "amqplock.$n" "amqplock.$n-1-B" --exit >"$T/holdq.out" 2>&1 </dev/null 3>&- ||
        fail "holdq: $(cat "$T/holdq.out")"
    vg 65 --json check --admin-wait 0 "$n"
    assert_json '(.problems | map(.kind)) == ["stray_mutex", "missing_slot", "stray_holder"]
        and .error == "damaged"'
    vg 0 check --repair "$n"
    vg 0 --json check "$n"
    assert_json '.ok and .problems == [] and .repaired == 0'
}

@test "destroy under valgrind" {
    plain create "$n" 3
    vg 0 destroy "$n"
    plain create "$n" 2
    vg 0 --json destroy "$n"
    assert_json '.ok and .max == 0 and .previous == 2'
}

@test "not_found and usage errors under valgrind: exit 66 and 2" {
    vg 66 status "$n"
    assert_error_line
    vg 66 --json status "$n"
    assert_json '.ok == false and .error == "not_found"'
    vg 64 create "$n" lots
    assert_error_line
    vg 64 --json --no-such-option status "$n"
    assert_json '.ok == false and .error == "usage"'
    vg 64 hold "$n"
}

@test "a wrong password (exit 77) and a closed port (exit 69) under valgrind" {
    local url
    url=$(sed -E 's#^(amqps?://[^:/@]*:)[^@]*@#\1wrong-password@#' <<<"$AMQPLOCK_URL")
    [ "$url" != "$AMQPLOCK_URL" ] || fail "no password to swap in $AMQPLOCK_URL"
    vg 77 -u "$url" status "$n"
    assert_error_line
    vg 77 --json -u "$url" create "$n" 1
    assert_json '.ok == false and .error == "access"'
    vg 69 -u "amqp://guest:guest@127.0.0.1:$(closed_port)/" status "$n"
    assert_error_line
}

@test "amqps:// under valgrind: status through TLS" {
    local ca=${AMQPLOCK_TEST_TLS_DIR:-}/ca.pem
    [ -n "${AMQPLOCK_TEST_TLS_PORT:-}" ] && [ -f "$ca" ] || skip "the test broker has no TLS listener"
    plain create "$n" 1
    vg 0 -u "amqps://guest:guest@localhost:$AMQPLOCK_TEST_TLS_PORT/" --cacert "$ca" status "$n"
    assert_line --regexp '^max +1$'
}
