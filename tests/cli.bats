#!/usr/bin/env bats
# The command line: usage errors, JSON errors, connection and access
# failures, the password file, the broker URL from the environment, help,
# version, --quiet and a full stdout.
#
# Needs jq, and perl (core modules only, for start_silent_listener).

bats_require_minimum_version 1.5.0
load lib/helper

# amqplock with stdout on a full device.
al_full() {
    al "$@" >/dev/full
}

# amqplock with AMQPLOCK_URL unset.
al_without_amqplock_url() {
    (
        unset AMQPLOCK_URL
        al "$@"
    )
}

# usage_error ARGS...: amqplock ARGS exits 64 with nothing on stdout and one
# "amqplock: " line on stderr.
usage_error() {
    run -64 --separate-stderr al "$@"
    refute_output
    assert_error_line
}

# A usage error with --json: one JSON object, ok false, error "usage".
json_usage_error() {
    run -64 --separate-stderr al "$@"
    assert_json '.ok == false and .error == "usage" and (.message | type == "string")'
    assert_error_line
}


# Never to be seen in any output.
SECRET=Sup3rS3cret

refute_secret() {
    [[ $output != *"$SECRET"* ]] || fail "the password is on stdout: $output"
    [[ ${stderr:-} != *"$SECRET"* ]] || fail "the password is on stderr: $stderr"
}

setup() {
    n=$(unique_name)
    # Names given to commands that must fail before touching the broker;
    # the last test checks that no queue carries this marker.
    bad=$(unique_name nouse)
    GOOD_URL=$AMQPLOCK_URL
    HOST_PORT=127.0.0.1:$AMQPLOCK_TEST_PORT
    SILENT_PID=
}

teardown() {
    if [ -n "${SILENT_PID:-}" ]; then
        kill "$SILENT_PID" 2>/dev/null || true
        wait "$SILENT_PID" 2>/dev/null || true
    fi
    AMQPLOCK_URL=$GOOD_URL test_cleanup
}

# --- usage errors: names -----------------------------------------------------

@test "usage: empty name" {
    usage_error create "" 1
}

@test "usage: name of 201 bytes (200 are fine)" {
    local long=$bad
    while [ ${#long} -lt 201 ]; do long+=x; done
    usage_error create "$long" 1
}

@test "usage: name with a space" {
    usage_error create "$bad x" 1
}

@test "usage: name with a slash" {
    usage_error create "$bad/x" 1
}

@test "usage: name with a tab" {
    usage_error create "$bad"$'\t' 1
}

@test "usage: name with a newline" {
    usage_error create "$bad"$'\nx' 1
}

@test "usage: name with a control character" {
    usage_error create "$bad"$'\x01x' 1
}

@test "usage: name with non-ASCII UTF-8" {
    usage_error create "${bad}é" 1
}

@test "usage: name with a byte that is not UTF-8" {
    usage_error create "$bad"$'\xff' 1
}

@test "usage: name ending in -<digits>-A (x-1-A)" {
    usage_error create "$bad-1-A" 1
}

@test "usage: name ending in -<digits>-B (x-22-B)" {
    usage_error create "$bad-22-B" 1
}

@test "usage: --prefix '' with a name starting with amq." {
    usage_error --prefix '' create "amq.$bad" 1
}

@test "usage: prefix and name together starting with amq." {
    usage_error --prefix am create "q.$bad" 1
    usage_error create --prefix amq. "$bad" 1
}

@test "usage: --prefix with a space" {
    usage_error --prefix 'a b' create "$bad" 1
}

@test "usage: --prefix with a slash" {
    usage_error create "$bad" 1 --prefix 'a/'
}

@test "usage: AMQPLOCK_PREFIX with a space" {
    AMQPLOCK_PREFIX='a b' usage_error create "$bad" 1
}

# --- usage errors: numbers ---------------------------------------------------

@test "usage: SLOTS -1" {
    usage_error create "$bad" -1
}

@test "usage: SLOTS 0" {
    usage_error create "$bad" 0
}

@test "usage: SLOTS 1.5" {
    usage_error create "$bad" 1.5
}

@test "usage: SLOTS 0x10" {
    usage_error create "$bad" 0x10
}

@test "usage: SLOTS 1e3" {
    usage_error create "$bad" 1e3
}

@test "usage: SLOTS 10001" {
    usage_error create "$bad" 10001
}

@test "usage: SLOTS '5 ' and ' 5'" {
    usage_error create "$bad" '5 '
    usage_error create "$bad" ' 5'
}

@test "usage: SLOTS ''" {
    usage_error create "$bad" ''
}

@test "usage: SLOTS abc" {
    usage_error create "$bad" abc
}

@test "usage: COUNT 0, 10001, abc for add" {
    usage_error add "$bad" 0
    usage_error add "$bad" 10001
    usage_error add "$bad" abc
}

@test "usage: COUNT 0, 1.5 for remove" {
    usage_error remove "$bad" 0
    usage_error remove "$bad" 1.5
}

@test "usage: max N 10001, -1, '' " {
    usage_error max "$bad" 10001
    usage_error max "$bad" -1
    usage_error max "$bad" ''
}

# --- usage errors: options, arguments, commands ---------------------------------

@test "usage: unknown long option" {
    usage_error --bogus create "$bad" 1
    usage_error create "$bad" 1 --bogus
}

@test "usage: unknown short option" {
    usage_error create -Z "$bad" 1
}

@test "usage: option missing its value" {
    usage_error create "$bad" 1 --url
    usage_error --prefix
}

@test "usage: no command" {
    usage_error
    usage_error --prefix x.
}

@test "usage: missing arguments" {
    usage_error create "$bad"
    usage_error create
    usage_error destroy
    usage_error add
    usage_error remove
    usage_error max
    usage_error status
}

@test "usage: too many arguments" {
    usage_error create "$bad" 1 2
    usage_error destroy "$bad" x
    usage_error add "$bad" 1 2
    usage_error remove "$bad" 1 2
    usage_error max "$bad" 1 2
    usage_error evict "$bad" 1 2
}

@test "usage: unknown command; a typo of one gets \"did you mean\"" {
    usage_error frobnicate "$bad"
    [ "$stderr" = 'amqplock: unknown command "frobnicate" (see amqplock --help)' ] || fail "$stderr"
    usage_error CREATE "$bad" 1
    usage_error hlod "$bad" -- true
    [ "$stderr" = 'amqplock: unknown command "hlod" (did you mean hold? see amqplock --help)' ] ||
        fail "$stderr"
    usage_error stauts "$bad"
    [[ $stderr == *"(did you mean status? "* ]] || fail "$stderr"
}

@test "usage: the flock habit, hold NAME CMD ARGS without --: the error shows the line with -- in place, also when CMD has options of its own" {
    usage_error hold "$bad" echo hi
    [ "$stderr" = "amqplock: put -- before the command: amqplock hold $bad -- echo hi" ] || fail "$stderr"
    usage_error hold "$bad" ls -l /x
    [ "$stderr" = "amqplock: put -- before the command: amqplock hold $bad -- ls -l /x" ] || fail "$stderr"
    usage_error hold -w 5 "$bad" ls -l
    [ "$stderr" = "amqplock: put -- before the command: amqplock hold $bad -- ls -l" ] || fail "$stderr"
    # an option of ours misspelt is still one, and --json still says it
    # in JSON (on stderr: hold's stdout is the command's)
    usage_error hold "$bad" --bogus
    [ "$stderr" = 'amqplock: unknown option "--bogus"' ] || fail "$stderr"
    run -64 --separate-stderr al hold "$bad" --json --bogus
    [[ $stderr == *'{"ok":false,"error":"usage","message":"unknown option \"--bogus\""}'* ]] ||
        fail "$stderr"
}

@test "usage: bad --heartbeat values" {
    usage_error --heartbeat abc create "$bad" 1
    usage_error --heartbeat -1 create "$bad" 1
    usage_error --heartbeat 1.5 create "$bad" 1
    usage_error create "$bad" 1 --heartbeat ''
}

@test "usage: bad --connect-timeout values" {
    usage_error --connect-timeout abc create "$bad" 1
    usage_error --connect-timeout -1 create "$bad" 1
    usage_error --connect-timeout '' create "$bad" 1
    usage_error create "$bad" 1 --connect-timeout 1e3
}

@test "usage: bad --rpc-timeout, --admin-wait and --overshoot values" {
    usage_error --rpc-timeout abc create "$bad" 1
    usage_error create --admin-wait abc "$bad" 1
    usage_error create --overshoot -1 "$bad" 1
}

@test "durations take a unit as systemd's do: -w 0.05m waits 3 s, --min-hold 2s keeps the slot 2 s; 1x, 1mm and 1M are refused (64)" {
    al create "$n" 1
    bg h hold "$n" -- sleep 60
    local h=$BG t0 took
    wait_until 10 slot_held "$n" 1 || fail "$(cat "$T/h.err")"
    t0=$(now)
    run -1 al hold -w 0.05m "$n" -- true
    took=$(since "$t0")
    at_least "$took" 2.9
    at_most "$took" 4
    kill -TERM "$h"
    wait_exit "$h" 10
    run -0 al hold --min-hold 2s "$n" -- true
    run -1 al hold -n "$n" -- true
    wait_until 8 al hold -n "$n" -- true || fail "still held after the 2 s"
    local bad
    for bad in 1x 1mm 1M; do
        usage_error hold -w "$bad" "$n" -- true
        [[ $stderr == *"is not a duration (seconds, or with s, m or h: 90, 1.5m, 2h)" ]] || fail "$stderr"
    done
    AMQPLOCK_TIMEOUT=0.01m run -124 al hold "$n" -- sleep 30
}

@test "usage: an option of another command (status --admin-wait 1 x)" {
    usage_error status --admin-wait 1 "$bad"
}

@test "usage: broker URL http://x" {
    usage_error -u http://x status "$bad"
}

@test "usage: broker URL with port 99999" {
    usage_error -u amqp://host:99999/ status "$bad"
}

@test "usage: broker URL without a host" {
    usage_error -u amqp://:5672/ status "$bad"
}

@test "usage: broker URL with a query" {
    usage_error -u 'amqp://h/?x=1' status "$bad"
}

@test "usage: empty broker URL" {
    usage_error --url '' status "$bad"
}

# --- usage errors in JSON ----------------------------------------------------------

@test "--json on a usage error prints one JSON object: ok false, error usage" {
    json_usage_error --json create "$bad" 0
    json_usage_error create "$bad" 1 2 --json
    json_usage_error --json create
    json_usage_error --json frobnicate
}

@test "--json after the bad option still gives JSON" {
    json_usage_error create --bogus --json "$bad" 1
}

@test "--json usage errors are valid JSON whatever the hostile text in them" {
    json_usage_error --json create "$bad\"x" 1
    json_usage_error --json create "$bad"$'\nx' 1
    json_usage_error --json create "$bad\\x" 1
    json_usage_error --json create "$bad"$'\xff\xfe' 1
    json_usage_error --json create "$bad"$'\x01\x7f' 1
    json_usage_error --json create "$bad" $'1"\n\\'
    json_usage_error --json $'frob"\n\\nicate'
    json_usage_error --json $'--bo"g\nus' create "$bad" 1
}

# --- error messages stay on one line ---------------------------------------------

@test "error line: a password file path with a newline" {
    run -64 --separate-stderr al --password-file $'/nonexistent/pw\nfile' status "$bad"
    assert_error_line
}

@test "error line: a user name with a newline (%0A) in the URL" {
    run -77 --separate-stderr al -u "amqp://gu%0Aest:$SECRET@$HOST_PORT/" status "$n"
    assert_error_line
    refute_secret
}

@test "error line: a vhost with a newline (%0A) in the URL" {
    run ! --separate-stderr al -u "amqp://guest:guest@$HOST_PORT/no%0Asuch" status "$n"
    assert_error_line
}

# --- connection and access ------------------------------------------------------------

@test "connection: a closed port exits 69" {
    local url="amqp://guest:guest@127.0.0.1:$(closed_port)/"
    run -69 --separate-stderr al -u "$url" status "$n"
    refute_output
    assert_error_line
    run -69 --separate-stderr al -u "$url" --json create "$n" 1
    assert_json '.ok == false and .error == "connection" and (.message | type == "string")'
    assert_error_line
}

@test "no URL anywhere: the failure says that the default was tried and how to give one" {
    # a network namespace of its own: nothing listens on its localhost:5672
    run -69 --separate-stderr env -u AMQPLOCK_URL -u AMQP_URL unshare --net \
        timeout 20 ${AMQPLOCK_WRAP:-} "$AMQPLOCK_BIN" status "$n"
    [[ $stderr == "amqplock: no broker URL was given (--url, AMQPLOCK_URL or AMQP_URL), and the default one failed: cannot connect to localhost:5672: "* ]] ||
        fail "stderr: '$stderr'"
    # one given, the same failure says nothing of the default
    run -69 --separate-stderr env -u AMQPLOCK_URL -u AMQP_URL unshare --net \
        timeout 20 ${AMQPLOCK_WRAP:-} "$AMQPLOCK_BIN" -u amqp://localhost/ status "$n"
    [[ $stderr == "amqplock: cannot connect to localhost:5672: "* ]] || fail "stderr: '$stderr'"
}

@test "cron's empty environment and nothing on localhost:5672: hold, acquire and wait exit 69 at once, naming the default URL, and run nothing" {
    local cmd t0 took
    for cmd in "hold $n -- touch $T/ran" "acquire $n" "wait $n"; do
        t0=$(now)
        # shellcheck disable=SC2086
        run -69 --separate-stderr env -i PATH=/usr/bin:/bin unshare --net \
            timeout 20 ${AMQPLOCK_WRAP:-} "$AMQPLOCK_BIN" $cmd
        took=$(since "$t0")
        assert_error_line
        [[ $stderr == "amqplock: no broker URL was given (--url, AMQPLOCK_URL or AMQP_URL), and the default one failed: cannot connect to localhost:5672: "* ]] ||
            fail "$cmd: '$stderr'"
        at_most "$took" 10
    done
    [ ! -e "$T/ran" ] || fail "the command ran"
}

@test "a URL given whose broker never answers: a hold without -w gives up after 60 s (69), naming it; -w 3 at 3 s" {
    local url="amqp://guest:guest@127.0.0.1:$(closed_port)/" t0 took
    t0=$(now)
    run -69 --separate-stderr al -u "$url" hold -w 3 "$n" -- touch "$T/ran"
    took=$(since "$t0")
    at_least "$took" 2.5
    at_most "$took" 6
    [[ $stderr == *"gave up at the end of -w 3 s"* ]] || fail "$stderr"
    t0=$(now)
    run -69 --separate-stderr timeout 90 ${AMQPLOCK_WRAP:-} "$AMQPLOCK_BIN" -u "$url" hold "$n" -- touch "$T/ran"
    took=$(since "$t0")
    note "gave up after $took s: $stderr"
    assert_error_line
    [[ $stderr == "amqplock: gave up after 60 s: the broker has not answered once since amqplock started (a wrong host or port in the URL?): cannot connect to 127.0.0.1:"*": connection refused"* ]] ||
        fail "$stderr"
    at_least "$took" 59
    at_most "$took" 65
    [ ! -e "$T/ran" ] || fail "the command ran"
}

@test "an amqp:// URL at the management port says an HTTP server answers, at the TLS port a TLS one (use amqps://): 69, which port to give" {
    local mgmt=${AMQPLOCK_TEST_MANAGEMENT_URL##*:}
    # (the management API's HTTP server waits for a request line past
    # --connect-timeout; the TLS port sends an alert and closes)
    mgmt=${mgmt%/}
    run -69 --separate-stderr al --connect-timeout 2 -u "amqp://guest:guest@127.0.0.1:$mgmt" status "$n"
    assert_error_line
    [ "$stderr" = "amqplock: the server at 127.0.0.1:$mgmt does not speak AMQP (silent before any AMQP greeting): an HTTP server answers there (the management API's port?): give the AMQP port, 5672 by default" ] ||
        fail "$stderr"
    run -69 --separate-stderr al --connect-timeout 2 -u "amqp://guest:guest@127.0.0.1:$AMQPLOCK_TEST_TLS_PORT/" status "$n"
    assert_error_line
    [[ $stderr == "amqplock: the server at 127.0.0.1:$AMQPLOCK_TEST_TLS_PORT does not speak AMQP ("*" before any AMQP greeting): a TLS server answers there: use amqps:// for it, or give the plain AMQP port, 5672 by default" ]] ||
        fail "$stderr"
    # neither: a server that says nothing at all gets the general hint
    start_silent_listener
    run -69 --separate-stderr al --connect-timeout 2 -u "amqp://guest:guest@127.0.0.1:$SILENT_PORT" status "$n"
    [[ $stderr == *"does not speak AMQP (silent before any AMQP greeting): the management API's port, or a TLS port with amqp://? give the AMQP port (5672 by default, 5671 with amqps://)" ]] ||
        fail "$stderr"
}

@test "access: a URL with a user and no password: the refusal says the password is missing" {
    run -77 --separate-stderr al -u "amqp://amqplock-nopw@$HOST_PORT/" status "$n"
    [[ $stderr == *"refused"*"(the URL gives a user but no password: put it in a --password-file)" ]] ||
        fail "stderr: '$stderr'"
    # with a password file the hint would be wrong
    local pw=$T/pw
    printf 'wrong\n' >"$pw"
    chmod 600 "$pw"
    run -77 --separate-stderr al -u "amqp://amqplock-nopw@$HOST_PORT/" --password-file "$pw" status "$n"
    [[ $stderr != *"no password"* ]] || fail "stderr: '$stderr'"
}

@test "connection: a listener that never speaks, --connect-timeout 1, exits 69 within 3 s" {
    start_silent_listener
    local t0
    t0=$(now)
    run -69 --separate-stderr al --connect-timeout 1 -u "amqp://guest:guest@127.0.0.1:$SILENT_PORT/" status "$n"
    at_most "$(since "$t0")" 3
    refute_output
    assert_error_line
}

@test "access: a wrong password exits 77 and never shows the password" {
    local url="amqp://guest:$SECRET@$HOST_PORT/"
    run -77 --separate-stderr al -u "$url" status "$n"
    refute_output
    assert_error_line
    refute_secret
    run -77 --separate-stderr al -u "$url" --json create "$n" 1
    assert_json '.ok == false and .error == "access" and (.message | type == "string")'
    assert_error_line
    refute_secret
    run -77 --separate-stderr al -v -u "$url" max "$n"
    refute_secret
}

@test "the password in the URL is not shown on connection or usage errors" {
    run -69 --separate-stderr al -u "amqp://guest:$SECRET@127.0.0.1:$(closed_port)/" --json status "$n"
    assert_json '.error == "connection"'
    refute_secret
    run -64 --separate-stderr al -u "amqp://guest:$SECRET@host:99999/" --json status "$n"
    assert_json '.error == "usage"'
    refute_secret
    run -64 --separate-stderr al -u "amqp://guest:$SECRET@h/?x=1" -v status "$n"
    refute_secret
}

@test "--password-file overrides the password in the URL" {
    local pw="$BATS_TEST_TMPDIR/pw"
    echo guest >"$pw"
    chmod 600 "$pw"
    run -0 al --password-file "$pw" -u "amqp://guest:$SECRET@$HOST_PORT/" create "$n" 2
    assert_output "created $n: 2 slots"
    run -0 al max "$n" --password-file "$pw" -u "amqp://guest:$SECRET@$HOST_PORT/"
    assert_output 2
}

@test "--password-file with a wrong password exits 77 and never shows it" {
    local pw="$BATS_TEST_TMPDIR/pw"
    printf '%s\nsecond line\n' "$SECRET" >"$pw"
    chmod 600 "$pw"
    run -77 --separate-stderr al --password-file "$pw" --json status "$n"
    assert_json '.ok == false and .error == "access"'
    assert_error_line
    refute_secret
}

@test "--password-file readable by group or others is refused (exit 64) and touches nothing" {
    local pw="$BATS_TEST_TMPDIR/pw"
    echo guest >"$pw"
    chmod 644 "$pw"
    run -64 --separate-stderr al --password-file "$pw" create "$n" 1
    refute_output
    assert_error_line
    chmod 640 "$pw"
    run -64 --separate-stderr al create "$n" 1 --password-file "$pw"
    assert_error_line
    chmod 604 "$pw"
    run -64 --separate-stderr al --json --password-file "$pw" create "$n" 1
    assert_json '.ok == false and .error == "usage"'
    run -66 al max "$n"
}

# --- the broker URL from the environment ----------------------------------------------

@test "AMQP_URL is used when AMQPLOCK_URL is unset" {
    al create "$n" 3
    AMQP_URL=$GOOD_URL run -0 al_without_amqplock_url max "$n"
    assert_output 3
}

@test "AMQPLOCK_URL wins over AMQP_URL" {
    al create "$n" 3
    local closed="amqp://guest:guest@127.0.0.1:$(closed_port)/"
    AMQPLOCK_URL=$GOOD_URL AMQP_URL=$closed run -0 al max "$n"
    assert_output 3
    AMQPLOCK_URL=$closed AMQP_URL=$GOOD_URL run -69 al max "$n"
}

@test "--url wins over AMQPLOCK_URL and AMQP_URL" {
    al create "$n" 3
    local closed="amqp://guest:guest@127.0.0.1:$(closed_port)/"
    AMQPLOCK_URL=$closed AMQP_URL=$closed run -0 al --url "$GOOD_URL" max "$n"
    assert_output 3
    AMQPLOCK_URL=$closed AMQP_URL=$closed run -0 al max "$n" -u "$GOOD_URL"
    assert_output 3
    AMQPLOCK_URL=$GOOD_URL run -69 al -u "$closed" max "$n"
}

# Several brokers: tried in the order given, a dead one skipped.
@test "several --url (or a list in AMQPLOCK_URL): the first that answers is used, in order" {
    al create "$n" 2
    local closed="amqp://guest:guest@127.0.0.1:$(closed_port)/"
    run -0 --separate-stderr al -v --url "$closed" --url "$GOOD_URL" max "$n"
    assert_output 2
    [[ $stderr == *"trying the next broker"* ]]
    AMQPLOCK_URL="$closed $GOOD_URL" run -0 al max "$n"
    assert_output 2
    # the first that answers wins: the dead one after it is never tried
    run -0 --separate-stderr al -v -u "$GOOD_URL" -u "$closed" max "$n"
    [[ $stderr != *"trying the next"* ]]
    run -0 al -u "$closed" -u "$GOOD_URL" hold "$n" -- true
    # none answers: exit 69, one line naming how many were tried
    run -69 --separate-stderr al -u "$closed" -u "$closed" max "$n"
    assert_error_line
    [[ $stderr == *"none of the 2 brokers answered"* ]]
    # a bad URL anywhere in the list is a usage error before any is tried
    run -64 --separate-stderr al -u "$GOOD_URL" -u 'amqp://:1/' max "$n"
    assert_error_line
    [[ $stderr == *"(2 of 2)"* ]]
    AMQPLOCK_URL="$GOOD_URL amqp://h:99999/" run -64 al max "$n"
}

# --- names at the edge that are valid ------------------------------------------------------

@test "names of 200 bytes, of every allowed character, and close to the reserved endings work" {
    local long=$n
    while [ ${#long} -lt 200 ]; do long+=x; done
    local name
    for name in "$long" "$n.Az_09:x-Y" "$n-1-C" "$n-1-M" "${n}x-L" "${n}x-A" "$n-12-AB" "$n-x1-A" "$n-1-A-"; do
        run -0 al create "$name" 1
        assert_output "created $name: 1 slot"
        run -0 al destroy "$name"
    done
}

# --- help and version -------------------------------------------------------------------------

@test "--help and -h exit 0 and list the commands, without connecting" {
    local opt cmd
    for opt in --help -h; do
        run -0 --separate-stderr al -u "amqp://127.0.0.1:$(closed_port)/" "$opt"
        [ -z "$stderr" ]
        for cmd in create destroy add remove max status; do
            assert_output --partial "$cmd"
        done
    done
}

@test "help COMMAND and COMMAND --help exit 0 and show that command" {
    local cmd
    for cmd in create destroy add remove max status; do
        run -0 --separate-stderr al help "$cmd"
        assert_output --partial "amqplock $cmd"
        [ -z "$stderr" ]
        run -0 --separate-stderr al "$cmd" --help
        assert_output --partial "amqplock $cmd"
    done
    run -0 al help create
    assert_output --partial SLOTS
    run -0 al help add
    assert_output --partial -- --admin-wait
    assert_output --partial -- --overshoot
    run -0 al help status
    assert_output --partial -- --overshoot
}

@test "--version and -V print 'amqplock 0.4.0'" {
    run -0 --separate-stderr al --version
    assert_output "amqplock 0.4.0"
    [ -z "$stderr" ]
    run -0 al -V
    assert_output "amqplock 0.4.0"
}

# --- quiet ---------------------------------------------------------------------------------------

@test "-q prints nothing on stdout, in text and in JSON, on success and on failure" {
    run -0 --separate-stderr al -q create "$n" 2
    refute_output
    [ -z "$stderr" ]
    run -0 al --quiet max "$n"
    refute_output
    run -0 al status "$n" -q
    refute_output
    run -0 al -q --json add "$n"
    refute_output
    run -73 --separate-stderr al -q --json create "$n" 1
    refute_output
    assert_error_line
    run -0 al max "$n"
    assert_output 3
}

# --- a stdout that cannot be written ------------------------------------------------------------

@test "a full stdout is an error (exit 70, a message on stderr)" {
    run -70 --separate-stderr al_full create "$n" 1
    assert_error_line
    run -70 --separate-stderr al_full max "$n"
    assert_error_line
    run -70 --separate-stderr al_full --json status "$n"
    assert_error_line
}

@test "a failure that is not the broker's is named internal and exits 70 (no fd for a signalfd: ulimit -n 4)" {
    [ -z "${AMQPLOCK_WRAP:-}" ] || skip "a wrapper needs file descriptors of its own"
    al create "$n" 1
    # 0, 1 and 2 open; the connection takes 3, and the signalfd finds none.
    run -70 --separate-stderr bash -c 'for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ "$fd" -le 2 ] || eval "exec $fd>&-"; done; ulimit -n 4; exec "$@"' _ \
        timeout 30 "$AMQPLOCK_BIN" --json acquire "$n"
    assert_error_line
    [[ $stderr == *"signalfd"* ]] || fail "stderr: $stderr"
    jq -e '.ok == false and .error == "internal"' <<<"$output" || fail "stdout: $output"
    # and nothing is held
    run -0 al hold -n "$n" -- true
}

# --- the descriptors amqplock starts with -----------------------------------------------------

# bare CLOSED LIMIT ARGS...: amqplock ARGS with no descriptor open above 2
# (bats keeps some), with `ulimit -n LIMIT` ("-": as it is) and the
# standard descriptors in CLOSED ("0 2", say) closed; stdin /dev/null,
# stdout $T/out and stderr $T/err where open. With BARE_EXEC set, in
# place of the shell (for `BARE_EXEC=1 bare ... &`: $! is amqplock's pid).
bare() {
    local closed=$1 limit=$2
    shift 2
    ${BARE_EXEC:+exec} bash -c 'closed=$1 limit=$2
        shift 2
        for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ "$fd" -le 2 ] || eval "exec $fd>&-"; done
        [ "$limit" = - ] || ulimit -n "$limit"
        for fd in $closed; do eval "exec $fd>&-"; done
        exec "$@"' _ "$closed" "$limit" "$AMQPLOCK_BIN" "$@" </dev/null >"$T/out" 2>"$T/err"
}

@test "hold and acquire started with stdin, stdout or stderr closed (or all three) run as usual, /dev/null in their place" {
    [ -z "${AMQPLOCK_WRAP:-}" ] || skip "a wrapper opens descriptors of its own"
    local T=$BATS_TEST_TMPDIR fds opt i k=0 want got rc
    local -a cases=() pids=()
    PIDS=()
    for opt in "" --json -v; do
        for fds in 0 1 2 "0 1 2"; do cases+=("$opt|$fds"); done
    done
    al create "$n" $((${#cases[@]} + 1))
    # acquire: each holds a slot of its own until its SIGTERM
    for i in "${!cases[@]}"; do
        opt=${cases[i]%|*} fds=${cases[i]#*|}
        mkdir "$T/a$i"
        T=$T/a$i BARE_EXEC=1 bare "$fds" - $opt acquire "$n" &
        pids[i]=$!
        keep "${pids[i]}"
    done
    # hold, on the slot left: the job runs with /dev/null for what was
    # closed, and its status is hold's
    for i in "${!cases[@]}"; do
        opt=${cases[i]%|*} fds=${cases[i]#*|}
        mkdir "$T/h$i"
        rc=0
        T=$T/h$i bare "$fds" - $opt hold "$n" -- \
            sh -c 'fds=$(readlink /proc/$$/fd/0 /proc/$$/fd/1 /proc/$$/fd/2); echo "$fds" >"$0"; exit 3' "$T/h$i/fds" ||
            rc=$?
        [ "$rc" -eq 3 ] || fail "hold $opt, $fds closed: exit $rc: $(cat "$T/h$i/err" 2>/dev/null)"
        want=$(for k in 0 1 2; do
            if [[ " $fds " == *" $k "* || $k -eq 0 ]]; then echo /dev/null
            elif [ "$k" -eq 1 ]; then echo "$T/h$i/out"
            else echo "$T/h$i/err"; fi
        done)
        got=$(cat "$T/h$i/fds")
        [ "$got" = "$want" ] || fail "hold $opt, $fds closed: the job's 0-2: $got"
        [[ " $fds " == *" 2 "* || $opt != -v ]] || grep -q '^amqplock: holding slot' "$T/h$i/err" ||
            fail "hold -v, $fds closed: $(cat "$T/h$i/err")"
        [[ " $fds " == *" 2 "* || $opt != --json ]] || grep -q '"event":"acquired"' "$T/h$i/err" ||
            fail "hold --json, $fds closed: $(cat "$T/h$i/err")"
    done
    held() { [ "$(al --json status --no-names "$n" | jq '.held | length')" -eq "${#cases[@]}" ]; }
    wait_until 10 held || fail "the acquires do not hold ${#cases[@]} slots: $(al status "$n")"
    kill -TERM "${pids[@]}"
    for i in "${!cases[@]}"; do
        opt=${cases[i]%|*} fds=${cases[i]#*|}
        wait_exit "${pids[i]}" 5
        [ "$rc" -eq 0 ] || fail "acquire $opt, $fds closed: exit $rc: $(cat "$T/a$i/err" 2>/dev/null)"
        # the slot's number where stdout was open
        [[ " $fds " == *" 1 "* ]] || grep -qE '^[0-9]+$|"event":"acquired"' "$T/a$i/out" ||
            fail "acquire $opt, $fds closed: stdout: $(cat "$T/a$i/out")"
    done
    # (a lease left behind would show as held too)
    none_held "$n" || fail "left held: $(al status "$n")"
}

@test "a closed standard descriptor that /dev/null cannot replace: exit 70, one line if stderr is open" {
    [ "$(id -u)" -eq 0 ] && unshare -m true 2>/dev/null || skip "needs root and unshare -m"
    # /dev without null, in a mount namespace of the test's own
    run -70 --separate-stderr unshare -m sh -c 'mount -t tmpfs none /dev && exec "$@" <&-' _ \
        "$AMQPLOCK_BIN" status "$n"
    assert_error_line
    [[ $stderr == *"/dev/null"* ]] || fail "stderr: $stderr"
    refute_output
    run -70 --separate-stderr unshare -m sh -c 'mount -t tmpfs none /dev && exec "$@" 2>&-' _ \
        "$AMQPLOCK_BIN" status "$n"
    refute_output
}

@test "out of descriptors on the way to a hold's job (ulimit -n 4 and up): exit 70 naming ulimit -n, nothing left held" {
    [ -z "${AMQPLOCK_WRAP:-}" ] || skip "a wrapper needs file descriptors of its own"
    local T=$BATS_TEST_TMPDIR k rc=1
    al create "$n" 1
    # (with 3, the dynamic loader finds none for amqplock's libraries:
    # exit 127 before amqplock runs)
    for ((k = 4; k <= 16; k++)); do
        rc=0
        bare "" "$k" hold "$n" -- touch "$T/ran" || rc=$?
        [ "$rc" -ne 0 ] || break
        [ "$rc" -eq 70 ] || fail "ulimit -n $k: exit $rc: $(cat "$T/err")"
        [ ! -e "$T/ran" ] || fail "ulimit -n $k: exit 70, but the job ran"
        stderr=$(cat "$T/err")
        assert_error_line
        [[ $stderr == *"Too many open files (raise ulimit -n)" ]] || fail "ulimit -n $k: $stderr"
        none_held "$n" || fail "ulimit -n $k: left held: $(al status "$n")"
    done
    [ "$rc" -eq 0 ] || fail "no hold worked up to ulimit -n 16"
    [ -e "$T/ran" ] || fail "ulimit -n $k: exit 0, but the job never ran"
    # (a lease lasts 40 s: one left by any of them would be there still)
    no_lease_left "$n"
    note "hold works from ulimit -n $k on"
}

@test "a full stdout is an error for --version and --help too" {
    run -70 --separate-stderr al_full --version
    assert_error_line
    run -70 --separate-stderr al_full --help
    assert_error_line
    run -70 --separate-stderr al_full help create
    assert_error_line
}

@test "amqplock's own failures exit with sysexits codes, apart from a job's; the tables agree" {
    # each code once, as a script would meet it
    run -64 al create "$n"
    run -66 al status "$n-none"
    run -69 al --url amqp://127.0.0.1:1/ --connect-timeout 1 status "$n"
    run -77 al -u "amqp://guest:$SECRET@$HOST_PORT/" status "$n"
    al create "$n" 1
    run -73 al create "$n" 1
    run -70 al_full status "$n"
    bg al hold "$n" -- sleep 30
    wait_until 10 slot_held "$n" 1 || fail "slot 1 not held"
    al remove "$n" 1 >/dev/null
    wait_exit "$BG" 30
    [ "$rc" -eq 75 ] || fail "hold on a removed slot exited $rc"
    # a job's own status is the job's, whatever it is
    al create "$n-j" 1
    for code in 2 3 4 9 64 66 69 75 77 126; do
        run "-$code" al hold "$n-j" -- sh -c "exit $code"
    done
    # --help, the man page and README list the same codes and names
    local help man readme
    help=$(al --help | sed -n '/^Exit status:/,/^$/p' | grep -o '[0-9][0-9]* [a-z][a-z ]*' |
        awk '{ print $1 }' | sort -n | tr '\n' ' ')
    man=$(sed -n '/^\.Sh EXIT STATUS/,/^\.Sh/p' "$BATS_TEST_DIRNAME/../man/amqplock.1" |
        sed -n 's/^\.It \([0-9]*\) Pq \([a-z_]*\)$/\1 \2/p' | sort -n | tr '\n' ' ')
    readme=$(sed -n '/^| code | name | meaning |/,/^$/p' "$BATS_TEST_DIRNAME/../README.md" |
        sed -n 's/^| \([0-9]*\) | \([a-z_]*\) |.*/\1 \2/p' | sort -n | tr '\n' ' ')
    [ "$man" = "0 ok 1 busy 64 usage 65 damaged 66 not_found 69 connection 70 internal 73 exists 75 lost 76 broker 77 access " ] ||
        fail "man page: $man"
    [ "$readme" = "$man" ] || fail "README: $readme; man page: $man"
    [ "$help" = "$(awk '{ for (i = 1; i <= NF; i += 2) printf "%s ", $i }' <<<"$man")" ] || fail "--help: $help"
}

@test "the harness undoes signals ignored by whoever started it (nohup make check)" {
    # (signals 32 and 33 are glibc's own, which no program may set: CI's
    # runner leaves them ignored, as containment.bats notes too)
    run -0 perl -e '$SIG{HUP} = $SIG{INT} = "IGNORE"; exec @ARGV' \
        "$BATS_TEST_DIRNAME/lib/default-signals.pl" awk '/^Sig(Ign|Blk):/ { print $1, $2 }' /proc/self/status
    local blk ign
    blk=$(awk '$1 == "SigBlk:" { print $2 }' <<<"$output")
    ign=$(awk '$1 == "SigIgn:" { print $2 }' <<<"$output")
    [ $((0x$blk)) -eq 0 ] || fail "blocked: $output"
    [ $((0x$ign & ~0x180000000)) -eq 0 ] || fail "ignored: $output"
    grep -q 'default-signals.pl tests/run.sh' "$BATS_TEST_DIRNAME/run.sh"
    grep -q 'default-signals.pl tests/cluster/run.sh' "$BATS_TEST_DIRNAME/cluster/run.sh"
    # and this suite runs under it when tests/run.sh started it: SIGHUP
    # (bit 0 of SigIgn) is not ignored here
    [ -z "${AMQPLOCK_SIGNALS_DEFAULT:-}" ] ||
        [ $((0x$(awk '/^SigIgn:/ { print $2 }' /proc/$$/status) & 1)) -eq 0 ] ||
        fail "bats runs with SIGHUP ignored"
}

# --- last: nothing above made a queue -------------------------------------------------------------

@test "no usage error above created a queue" {
    run rmqctl -q list_queues name --no-table-headers
    assert_success
    local made
    made=$(printf '%s\n' "$output" | grep -e '-nouse-' -e '^amqplock\.$' -e '^amqplock\.-' || true)
    [ -z "$made" ] || fail "queues made by usage errors: $made"
}
