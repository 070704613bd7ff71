#!/usr/bin/env bats
# Secrets and TLS against a live broker. No password in any output (text,
# --json, -v; wrong password, failures after login, usage errors); the
# password file and the private key refused when group or others can read
# them, before any connection; the password file's first line, read once
# per run, from a file, a pipe (<(...), /dev/stdin) or a FIFO; the URL and
# password kept out of CMD's environment and out of every cmdline (a --url
# password replaced by '*' however the option is spelled, CMD's own
# arguments untouched); run as a non-root user, nothing CMD can read (its
# environment, /proc of the keeper and of amqplock, ps) shows the password;
# amqps:// verifying the broker's certificate and host name by default, its
# failures (exit 69), --insecure, client certificates, and the TLS options'
# usage errors.
#
# Needs jq, perl (core modules only) and the broker of tests/lib/broker.sh with
# its TLS listener and certificates (AMQPLOCK_TEST_TLS_PORT,
# AMQPLOCK_TEST_TLS_DIR). Makes a broker user of its own with a
# distinctive password (setup_file), and deletes it again. The tests that
# run amqplock as nobody (setpriv) need root, and are skipped without.

bats_require_minimum_version 1.5.0
load lib/helper

# The broker user and its password are kept in a file, not exported: an
# exported password would be in every process's environment, CMD's too.
setup_file() {
    # Passwords are "s3cr3t-XYZ-<10 digits>": no honest output contains
    # "s3cr3t" or the digits.
    local user=amqplock-sec-$$ pw
    pw=s3cr3t-XYZ-$(printf '%05d%05d' "$RANDOM" "$RANDOM")
    rmqctl add_user "$user" "$pw" >/dev/null 2>&1 ||
        fail "could not add the broker user $user"
    rmqctl set_permissions -p / "$user" '.*' '.*' '.*' >/dev/null 2>&1 ||
        fail "could not give $user permissions"
    (umask 077 && echo "$user $pw" >"$BATS_FILE_TMPDIR/user")
}

teardown_file() {
    local user pw
    read -r user pw <"$BATS_FILE_TMPDIR/user" || return 0
    rmqctl delete_user "$user" >/dev/null 2>&1 || true
}

setup() {
    read -r SEC_USER SEC_PW <"$BATS_FILE_TMPDIR/user"
    n=$(unique_name)
    T=$BATS_TEST_TMPDIR
    PIDS=()
    # tests unset AMQPLOCK_URL; teardown puts it back
    MAIN_URL=$AMQPLOCK_URL
    TLS=$AMQPLOCK_TEST_TLS_DIR
    # a wrong password, as distinctive as the right one
    BAD_PW=s3cr3t-XYZ-$(printf '%05d%05d' "$RANDOM" "$RANDOM")
    # the right password, and a wrong one, for the private broker
    GOOD_URL=amqp://$SEC_USER:$SEC_PW@127.0.0.1:$AMQPLOCK_TEST_PORT/
    BAD_URL=amqp://$SEC_USER:$BAD_PW@127.0.0.1:$AMQPLOCK_TEST_PORT/
}

teardown() {
    export AMQPLOCK_URL=$MAIN_URL
    test_cleanup
    [ -z "${NB-}" ] || rm -rf "$NB"
}

# amqps:// URL for guest: tls_url [HOST [PORT]] (default localhost, the TLS
# listener).
tls_url() { echo "amqps://guest:guest@${1:-localhost}:${2:-$AMQPLOCK_TEST_TLS_PORT}/"; }

# private FILE TEXT...: FILE holds the lines TEXT, mode 600.
private() {
    local f=$1
    shift
    (umask 077 && printf '%s\n' "$@" >"$f")
    chmod 600 "$f"
}

# no_secret: after run --separate-stderr, neither stdout nor stderr shows
# any part of a password (its "s3cr3t" stem or its random digits).
no_secret() {
    local text pw
    for text in "$output" "${stderr-}"; do
        for pw in "$SEC_PW" "$BAD_PW"; do
            [[ $text != *s3cr3t* && $text != *"${pw#s3cr3t-XYZ-}"* ]] ||
                fail "a password shows in the output: '$text'"
        done
    done
}

# execd_sleep PID: PID runs "sleep 300"
execd_sleep() { [ "$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" = "sleep 300 " ]; }

# stderr_has TEXT: stderr (after run --separate-stderr) contains TEXT.
stderr_has() {
    [[ $stderr == *"$1"* ]] || fail "stderr lacks '$1': '$stderr'"
}

# The error names of the exit codes.
error_name() {
    case $1 in
    64) echo usage ;;
    66) echo not_found ;;
    69) echo connection ;;
    77) echo access ;;
    *) echo "?" ;;
    esac
}

# fails_quietly CODE ARGS...: amqplock ARGS exits CODE and shows no
# password. Without -v stderr is one "amqplock: ..." line; with --json the
# error object is on stdout, except for hold, which keeps stdout for CMD:
# its object is on stderr and stdout is empty.
fails_quietly() {
    local code=$1 json=0 verbose=0 hold=0 a
    shift
    for a in "$@"; do
        case $a in
        --json) json=1 ;;
        -v) verbose=1 ;;
        hold) hold=1 ;;
        --) break ;;
        esac
    done
    run --separate-stderr al "$@"
    no_secret
    [ "$status" -eq "$code" ] || fail "exit $status, not $code; stderr: '$stderr'"
    [[ $'\n'$stderr == *$'\n'"amqplock: "?* ]] || fail "no error line on stderr: '$stderr'"
    if [ $hold = 1 ] && [ $json = 1 ]; then
        [ -z "$output" ] || fail "hold wrote to stdout: '$output'"
        # move the JSON lines of stderr to output
        local line err=()
        output=
        while IFS= read -r line; do
            if [[ $line == "amqplock: "* ]]; then err+=("$line"); else output+=$line; fi
        done <<<"$stderr"
        stderr=$(printf '%s\n' "${err[@]}")
    fi
    if [ $json = 1 ]; then
        # as assert_json, with one jq
        [[ -n $output && $output != *$'\n'* ]] || fail "stdout is not one line: '$output'"
        jq -e -s --arg e "$(error_name "$code")" 'length == 1 and (.[0] | type == "object"
            and .ok == false and .error == $e and (.message | type == "string"))' \
            <<<"$output" >/dev/null 2>&1 || fail "not one error object '$(error_name "$code")': '$output'"
    else
        [ -z "$output" ] || fail "stdout: '$output'"
    fi
    [ $verbose = 1 ] || assert_error_line
}

# feed FIFO LINE...: writes the LINEs into FIFO in the background, once a
# reader opens it (the text is on no command line: printf is a builtin).
feed() {
    local fifo=$1
    shift
    (printf '%s\n' "$@" >"$fifo") </dev/null >/dev/null 2>&1 3>&- &
    keep $!
}

# piped LINE1 LINE2 ARGS...: amqplock ARGS with the two lines on its stdin,
# through a pipe.
piped() {
    local one=$1 two=$2
    shift 2
    printf '%s\n' "$one" "$two" | al "$@"
}

# A CMD for hold that prints the command lines of its parent (the keeper)
# and grandparent (amqplock), one per line, NULs as spaces.
# shellcheck disable=SC2016
ANCESTORS='p=$PPID; for i in 1 2; do tr "\0" " " <"/proc/$p/cmdline"; echo; p=$(cut -d")" -f2 "/proc/$p/stat" | cut -d" " -f3); done'

# masked TEXT USER: TEXT shows amqp[s]://USER: followed by '*' only up to
# the '@' (the password replaced), and no password.
masked() {
    [[ $1 =~ amqps?://"$2":\*+@ ]] || fail "no amqp://$2:***@ in '$1'"
    [[ $1 != *s3cr3t* && $1 != *"${SEC_PW#s3cr3t-XYZ-}"* && $1 != *"${BAD_PW#s3cr3t-XYZ-}"* ]] ||
        fail "a password shows in '$1'"
}

# For the tests that run amqplock as nobody: needs root. NB is a directory
# that nobody can use (BATS_TEST_TMPDIR is not); teardown removes it.
nobody_dir() {
    [ "$(id -u)" -eq 0 ] || skip "needs root, to run amqplock as nobody"
    NB=$(mktemp -d /tmp/amqplock-secrets.XXXXXX)
    chmod 755 "$NB"
}

# as_nobody TAG ARGS...: like bg, amqplock ARGS as nobody, its output in
# $NB/TAG.out and .err. setpriv execs amqplock: no wrapper process (such
# as timeout) is left between the shell and amqplock to keep the URL on its
# own command line.
as_nobody() {
    local tag=$1
    shift
    setpriv --reuid=nobody --regid=nogroup --clear-groups "$AMQPLOCK_BIN" "$@" \
        >"$NB/$tag.out" 2>"$NB/$tag.err" </dev/null 3>&- &
    BG=$!
    PIDS+=("$BG")
}

# The commands tried with a wrong password: none may do anything.
bad_login_commands() {
    printf '%s\n' "status $n" "create $n 1" "hold $n -- touch $T/ran" "acquire -n $n" "max $n"
}

# --- no password in any output ---------------------------------------------

@test "a wrong password in the URL: exit 77, one error line, the password nowhere (text, --json, -v)" {
    local c mode i=0 traced=("-v" "--json -v")
    # every command in text and --json, and traced (-v, --json -v in turn)
    while read -r c; do
        for mode in "" --json "${traced[i++ % 2]}"; do
            # shellcheck disable=SC2086
            fails_quietly 77 $mode -u "$BAD_URL" $c
        done
    done < <(bad_login_commands)
    # guest with a wrong password alike
    fails_quietly 77 -u "amqp://guest:$BAD_PW@127.0.0.1:$AMQPLOCK_TEST_PORT/" status "$n"
    fails_quietly 77 --json -v -u "amqp://guest:$BAD_PW@127.0.0.1:$AMQPLOCK_TEST_PORT/" status "$n"
    # nothing was done
    [ ! -e "$T/ran" ]
    run -66 al status "$n"
}

@test "a wrong password from --password-file, AMQPLOCK_URL or AMQP_URL: exit 77, the password nowhere" {
    private "$T/pw" "$BAD_PW"
    local c mode i=0
    local modes=("" --json -v "--json -v")
    # every command, each source, the modes in turn
    while read -r c; do
        mode=${modes[i++ % 4]}
        # the file's password replaces the URL's (right) one
        # shellcheck disable=SC2086
        fails_quietly 77 $mode -u "$GOOD_URL" --password-file "$T/pw" $c
        mode=${modes[i++ % 4]}
        # shellcheck disable=SC2086
        AMQPLOCK_URL=$BAD_URL fails_quietly 77 $mode $c
        # AMQP_URL when AMQPLOCK_URL is not set
        mode=${modes[i++ % 4]}
        unset AMQPLOCK_URL
        # shellcheck disable=SC2086
        AMQP_URL=$BAD_URL fails_quietly 77 $mode $c
        export AMQPLOCK_URL=$MAIN_URL
    done < <(bad_login_commands)
    [ ! -e "$T/ran" ]
    run -66 al status "$n"
}

@test "after a good login a failure (exit 66) shows no password, nor does a success, with -v and --json" {
    private "$T/pw" "$SEC_PW"
    local m c mode i=0
    local modes=("" --json -v "--json -v")
    m=$(unique_name missing)
    # every command in two of the modes, the modes in turn; the password
    # from the URL, the file or AMQPLOCK_URL in turn
    for c in "status $m" "max $m" "max $m 3" "destroy $m" "add $m" "acquire -n $m" \
        "hold $m -- touch $T/ran"; do
        mode=${modes[i % 4]}
        # shellcheck disable=SC2086
        fails_quietly 66 $mode -u "$GOOD_URL" $c
        mode=${modes[(i + 2) % 4]}
        case $((i++ % 2)) in
        0)
            # shellcheck disable=SC2086
            fails_quietly 66 $mode -u "amqp://$SEC_USER@127.0.0.1:$AMQPLOCK_TEST_PORT/" \
                --password-file "$T/pw" $c
            ;;
        1)
            # shellcheck disable=SC2086
            AMQPLOCK_URL=$GOOD_URL fails_quietly 66 $mode $c
            ;;
        esac
    done
    [ ! -e "$T/ran" ]

    # and a whole life of a semaphore, traced: the password in the URL,
    # then from the file
    local how
    for how in "-v -u $GOOD_URL" \
        "--json -v --password-file $T/pw -u amqp://$SEC_USER@127.0.0.1:$AMQPLOCK_TEST_PORT/"; do
        # shellcheck disable=SC2086
        run -0 --separate-stderr al $how create "$n" 2
        no_secret
        # shellcheck disable=SC2086
        run -0 --separate-stderr al $how status "$n"
        no_secret
        # shellcheck disable=SC2086
        run -0 --separate-stderr al $how hold "$n" -- echo held
        no_secret
        assert_output held
        # shellcheck disable=SC2086
        run -0 --separate-stderr al $how destroy "$n"
        no_secret
    done
}

@test "usage errors about the URL or the options do not echo the password (exit 64)" {
    local u i=0 p=127.0.0.1:$AMQPLOCK_TEST_PORT
    for u in "amqp://guest:$BAD_PW@127.0.0.1:99999/" "amqp://guest:$BAD_PW@127.0.0.1:0/" \
        "amqp://guest:$BAD_PW@127.0.0.1:port/" "amqp://guest:$BAD_PW@/" \
        "amqp://guest:$BAD_PW@:$AMQPLOCK_TEST_PORT/" "http://guest:$BAD_PW@$p/" \
        "guest:$BAD_PW@$p" "amqp://guest:$BAD_PW@$p/$(printf 'v%.0s' $(seq 1100))"; do
        case $((i++ % 3)) in
        0) fails_quietly 64 -u "$u" status "$n" ;;
        1) fails_quietly 64 -v --json -u "$u" create "$n" 1 ;;
        2) AMQPLOCK_URL=$u fails_quietly 64 --json hold "$n" -- touch "$T/ran" ;;
        esac
        AMQPLOCK_URL=$u fails_quietly 64 -v acquire -n "$n"
    done
    # bad options and arguments next to a URL with a password
    fails_quietly 64 -u "$BAD_URL" --bogus status "$n"
    fails_quietly 64 --json -u "$BAD_URL" status 'bad name!'
    fails_quietly 64 -u "$BAD_URL" --connect-timeout x status "$n"
    fails_quietly 64 -u "$BAD_URL" --cacert "$TLS/ca.pem" status "$n"
    fails_quietly 64 --json -u "$BAD_URL" create "$n" 0
    fails_quietly 64 -u "$BAD_URL" hold "$n"
    [ ! -e "$T/ran" ]
}

# --- the password file -------------------------------------------------------

@test "a password file readable by group or others, or missing, is refused (exit 64) before connecting" {
    local closed mode
    closed=amqp://$SEC_USER@127.0.0.1:$(closed_port)/
    private "$T/pw" "$SEC_PW"
    for mode in 640 604 644 660; do
        chmod "$mode" "$T/pw"
        # a closed port: exit 64 means nothing was tried on the network
        run -64 --separate-stderr al -u "$closed" --password-file "$T/pw" status "$n"
        refute_output
        assert_error_line
        stderr_has "chmod 600"
        no_secret
        run -64 --separate-stderr al --json -u "$closed" --password-file "$T/pw" status "$n"
        assert_json '.ok == false and .error == "usage" and (.message | contains("chmod 600"))'
        assert_error_line
    done
    # nor against the real broker
    run -64 --separate-stderr al -u "amqp://$SEC_USER@127.0.0.1:$AMQPLOCK_TEST_PORT/" \
        --password-file "$T/pw" create "$n" 1
    assert_error_line
    run -66 al status "$n"

    for mode in 600 400; do
        chmod "$mode" "$T/pw"
        # accepted: it goes on to connect, and fails at the closed port
        run -69 --separate-stderr al -u "$closed" --password-file "$T/pw" status "$n"
        assert_error_line
        run -66 --separate-stderr al -u "amqp://$SEC_USER@127.0.0.1:$AMQPLOCK_TEST_PORT/" \
            --password-file "$T/pw" status "$n"
        assert_error_line
    done

    # a missing or unreadable file is exit 64 too, before connecting
    run -64 --separate-stderr al -u "$closed" --password-file "$T/no-such-file" status "$n"
    refute_output
    assert_error_line
    run -64 --separate-stderr al --json -u "$closed" --password-file "$T/no-such-file" status "$n"
    assert_json '.ok == false and .error == "usage"'
    mkdir -m 700 "$T/dir"
    run -64 --separate-stderr al -u "$closed" --password-file "$T/dir" status "$n"
    assert_error_line
}

@test "the password file's first line is the password (CRLF too), and it overrides the URL's" {
    local u=amqp://$SEC_USER:$BAD_PW@127.0.0.1:$AMQPLOCK_TEST_PORT/
    al create "$n" 1

    # the first line counts, a second line is ignored
    private "$T/pw" "$SEC_PW" "$BAD_PW"
    run -0 al -u "$u" --password-file "$T/pw" status "$n"
    private "$T/pw" "$BAD_PW" "$SEC_PW"
    fails_quietly 77 -u "$GOOD_URL" --password-file "$T/pw" status "$n"

    # a CRLF line ending, or none
    printf '%s\r\n' "$SEC_PW" >"$T/pw"
    run -0 al -u "$u" --password-file "$T/pw" status "$n"
    printf '%s\r\nmore\r\n' "$SEC_PW" >"$T/pw"
    run -0 al -u "$u" --password-file "$T/pw" status "$n"
    printf '%s' "$SEC_PW" >"$T/pw"
    run -0 al -u "$u" --password-file "$T/pw" status "$n"

    # the file wins over the URL either way; a URL without a password works
    private "$T/pw" "$SEC_PW"
    run -0 al -u "amqp://$SEC_USER@127.0.0.1:$AMQPLOCK_TEST_PORT/" --password-file "$T/pw" \
        status "$n"
    AMQPLOCK_URL=$u run -0 al --password-file "$T/pw" status "$n"
    private "$T/pw" "$BAD_PW"
    fails_quietly 77 -u "$GOOD_URL" --password-file "$T/pw" status "$n"
    AMQPLOCK_URL=$GOOD_URL fails_quietly 77 --password-file "$T/pw" status "$n"
    # an empty file is an empty password, not the URL's
    : >"$T/pw"
    fails_quietly 77 -u "$GOOD_URL" --password-file "$T/pw" status "$n"
}

@test "--password-file from <(...), a FIFO or /dev/stdin (pipes): exit 0, the file's password used" {
    al create "$n" 1
    # the URL's own password is wrong: only the file's can log in
    local u=amqp://$SEC_USER:$BAD_PW@127.0.0.1:$AMQPLOCK_TEST_PORT/
    run -0 --separate-stderr al -u "$u" --password-file <(printf '%s\n' "$SEC_PW") status "$n"
    no_secret
    run -0 --separate-stderr al -u "$u" --password-file <(printf '%s\n' "$SEC_PW") \
        hold "$n" -- echo held
    assert_output held
    no_secret

    mkfifo -m 600 "$T/fifo"
    feed "$T/fifo" "$SEC_PW"
    run -0 --separate-stderr al -u "$u" --password-file "$T/fifo" status "$n"
    no_secret
    feed "$T/fifo" "$SEC_PW"
    run -0 --separate-stderr al -u "$u" --password-file "$T/fifo" hold "$n" -- echo held
    assert_output held

    # /dev/stdin: only the first line is taken; the rest is CMD's
    run -0 --separate-stderr piped "$SEC_PW" "for CMD" -u "$u" --password-file /dev/stdin \
        hold "$n" -- cat
    assert_output "for CMD"
    no_secret
    run -0 --separate-stderr piped "$SEC_PW" "" -u "$u" --password-file /dev/stdin status "$n"

    # each broker of a list is tried with the one password (the first
    # does not answer)
    run -0 --separate-stderr al -u "amqp://$SEC_USER@127.0.0.1:$(closed_port)/ $u" \
        --password-file <(printf '%s\n' "$SEC_PW") status "$n"
}

@test "a wrong password from a FIFO or a pipe is the usual 'login ... refused' (exit 77)" {
    al create "$n" 1
    mkfifo -m 600 "$T/fifo"
    feed "$T/fifo" "$BAD_PW"
    fails_quietly 77 -u "$GOOD_URL" --password-file "$T/fifo" status "$n"
    [[ $stderr == "amqplock: login to 127.0.0.1:$AMQPLOCK_TEST_PORT as "*refused* ]] ||
        fail "stderr: '$stderr'"
    feed "$T/fifo" "$BAD_PW"
    fails_quietly 77 --json -u "$GOOD_URL" --password-file "$T/fifo" hold "$n" -- touch "$T/ran"
    fails_quietly 77 -u "$GOOD_URL" --password-file <(printf '%s\n' "$BAD_PW") status "$n"
    stderr_has "refused"
    # an empty pipe is an empty password
    fails_quietly 77 -u "$GOOD_URL" --password-file <(:) status "$n"
    [ ! -e "$T/ran" ]
}

@test "a FIFO open to group or others is refused at once (exit 64, chmod 600); usage errors come before the FIFO is read" {
    local t0 mode
    mkfifo "$T/fifo"
    for mode in 604 640 666; do
        chmod "$mode" "$T/fifo"
        t0=$(now)
        # no writer: refused without waiting for one
        run -64 --separate-stderr al -u "amqp://$SEC_USER@127.0.0.1:$AMQPLOCK_TEST_PORT/" \
            --password-file "$T/fifo" status "$n"
        at_most "$(since "$t0")" 3
        assert_error_line
        stderr_has "chmod 600"
    done
    # a bad URL anywhere in the list, or a bad option, is reported without
    # waiting for the FIFO's writer
    chmod 600 "$T/fifo"
    t0=$(now)
    run -64 --separate-stderr al -u "$GOOD_URL amqp://$SEC_USER@127.0.0.1:99999/" \
        --password-file "$T/fifo" status "$n"
    assert_error_line
    stderr_has "2 of 2"
    run -64 --separate-stderr al -u "$GOOD_URL" --password-file "$T/fifo" \
        --key "$TLS/client.key" status "$n"
    assert_error_line
    at_most "$(since "$t0")" 3
}

@test "a terminal as --password-file is refused (exit 64): the password would be echoed" {
    command -v script >/dev/null || skip "needs script(1), for a terminal"
    run -0 script -qec "$(printf '%q' "$AMQPLOCK_BIN") --password-file /dev/tty status $n; echo rc=\$?" \
        /dev/null </dev/null
    [[ $output == *"amqplock: password file \"/dev/tty\" is a terminal"* && $output == *rc=64* ]] ||
        fail "output: '$output'"
}

@test "a waiting hold whose connection is closed connects again, with the password it read once from a FIFO" {
    al create "$n" 1
    bg a acquire "$n"
    local a=$BG w conn
    wait_until 10 has_line "$T/a.out" 1 || fail "no slot: $(cat "$T/a.err")"
    mkfifo -m 600 "$T/fifo"
    feed "$T/fifo" "$SEC_PW"
    bg w -v -u "amqp://$SEC_USER@127.0.0.1:$AMQPLOCK_TEST_PORT/" --password-file "$T/fifo" \
        hold -w 30 "$n" -- echo ran
    w=$BG
    wait_until 10 grep -q "waiting on" "$T/w.err" || fail "not waiting: $(cat "$T/w.err")"
    conn=$(rmqctl -q list_connections user pid --no-table-headers 2>/dev/null |
        awk -v u="$SEC_USER" '$1 == u { print $2 }')
    [ -n "$conn" ] && [ "$(wc -l <<<"$conn")" -eq 1 ] || fail "the waiting hold's connection? '$conn'"
    rmqctl close_connection "$conn" "test" >/dev/null
    wait_until 10 grep -q "connecting again" "$T/w.err" || fail "no reconnection: $(cat "$T/w.err")"
    kill -TERM "$a"
    wait_exit "$w" 15
    [ "$rc" -eq 0 ] || fail "hold exited $rc: $(cat "$T/w.err")"
    [ "$(cat "$T/w.out")" = ran ]
    [ "$(grep -c "connected, heartbeat" "$T/w.err")" -eq 2 ] || fail "trace: $(cat "$T/w.err")"
    ! grep -q s3cr3t "$T/w.err" || fail "a password in the trace"
}

@test "--key (the client's private key) readable by group or others is refused (exit 64, chmod 600)" {
    local closed u mode
    closed=$(tls_url localhost "$(closed_port)")
    u=$(tls_url)
    cp "$TLS/client.key" "$T/client.key"
    cat "$TLS/client.pem" "$TLS/client.key" >"$T/both.pem"
    for mode in 644 640 604; do
        chmod "$mode" "$T/client.key" "$T/both.pem"
        run -64 --separate-stderr al -u "$closed" --cacert "$TLS/ca.pem" \
            --cert "$TLS/client.pem" --key "$T/client.key" status "$n"
        refute_output
        assert_error_line
        stderr_has "chmod 600"
        run -64 --separate-stderr al -u "$u" --cacert "$TLS/ca.pem" \
            --cert "$TLS/client.pem" --key "$T/client.key" create "$n" 1
        assert_error_line
        stderr_has "chmod 600"
        # the key inside the --cert file is a secret too
        run -64 --separate-stderr al -u "$u" --cacert "$TLS/ca.pem" --cert "$T/both.pem" \
            create "$n" 1
        assert_error_line
        stderr_has "chmod 600"
    done
    run -66 al status "$n"
    # at 600 they are used
    chmod 600 "$T/client.key" "$T/both.pem"
    run -0 al -u "$u" --cacert "$TLS/ca.pem" --cert "$TLS/client.pem" --key "$T/client.key" \
        create "$n" 1
    run -0 al -u "$u" --cacert "$TLS/ca.pem" --cert "$T/both.pem" status "$n"
}

# --- the URL and the password kept from CMD and from cmdlines ---------------

@test "CMD's environment, /proc environ and cmdline hold neither AMQPLOCK_URL, AMQP_URL nor the password" {
    al create "$n" 1
    local other=amqp://guest:$BAD_PW@127.0.0.1:$AMQPLOCK_TEST_PORT/
    # shellcheck disable=SC2016
    local dump='env; echo ---; tr "\0" "\n" </proc/$$/environ; echo; echo ---; tr "\0" " " </proc/$$/cmdline'
    # the URL from AMQPLOCK_URL (AMQP_URL set too), from AMQP_URL alone,
    # and from -u with both set. (The variables are looked for as
    # assignments: bats 1.11 and later export the test's own description,
    # which names them.)
    AMQPLOCK_URL=$GOOD_URL AMQP_URL=$other run -0 --separate-stderr al hold "$n" -- sh -c "$dump"
    no_secret
    [ "$(grep -cx 'AMQPLOCK_SLOT=1' <<<"$output")" -eq 2 ] || fail "env dump: '$output'"
    [ "$(grep -cx "AMQPLOCK_SEMAPHORE=$n" <<<"$output")" -eq 2 ] || fail "env dump: '$output'"
    refute_output --partial AMQPLOCK_URL=
    refute_output --partial AMQP_URL=
    refute_output --partial "$SEC_USER"

    unset AMQPLOCK_URL
    AMQP_URL=$GOOD_URL run -0 --separate-stderr al hold "$n" -- sh -c "$dump"
    export AMQPLOCK_URL=$MAIN_URL
    no_secret
    [ "$(grep -cx 'AMQPLOCK_SLOT=1' <<<"$output")" -eq 2 ] || fail "env dump: '$output'"
    refute_output --partial AMQPLOCK_URL=
    refute_output --partial AMQP_URL=

    AMQPLOCK_URL=$other AMQP_URL=$other run -0 --separate-stderr al -u "$GOOD_URL" hold "$n" -- \
        sh -c "$dump"
    no_secret
    [ "$(grep -cx 'AMQPLOCK_SLOT=1' <<<"$output")" -eq 2 ] || fail "env dump: '$output'"
    refute_output --partial AMQPLOCK_URL=
    refute_output --partial AMQP_URL=

    # printenv, one name at a time
    AMQPLOCK_URL=$GOOD_URL AMQP_URL=$other run -0 al hold "$n" -- \
        sh -c 'printenv AMQPLOCK_URL; printenv AMQP_URL; printenv AMQPLOCK_SLOT'
    assert_output 1
}

@test "while hold runs, the password from --password-file is in no process's cmdline, nor in CMD's environ" {
    al create "$n" 1
    private "$T/pw" "$SEC_PW"
    # grep -f: the pattern is not on grep's own command line
    printf '%s\n' "$SEC_PW" "${SEC_PW#s3cr3t-XYZ-}" >"$T/pattern"
    AMQPLOCK_URL=amqp://$SEC_USER@127.0.0.1:$AMQPLOCK_TEST_PORT/ AMQP_URL=$GOOD_URL \
        bg h --password-file "$T/pw" hold "$n" -- \
        sh -c 'echo $$ >"$1.tmp"; mv "$1.tmp" "$1"; exec sleep 300' sh "$T/cmd.pid"
    local h=$BG cmd
    wait_until 10 test -s "$T/cmd.pid" || fail "CMD did not start: $(cat "$T/h.err")"
    cmd=$(cat "$T/cmd.pid")
    wait_until 5 execd_sleep "$cmd" || fail "CMD did not exec sleep"
    [ "$(al --json status --no-names "$n" | jq -c .held)" = '[1]' ]

    # CMD's environment as it was given to it
    tr '\0' '\n' <"/proc/$cmd/environ" >"$T/cmd.environ"
    grep -qx 'AMQPLOCK_SLOT=1' "$T/cmd.environ" || fail "CMD's environ: $(cat "$T/cmd.environ")"
    ! grep -qE '^(AMQPLOCK_URL|AMQP_URL)=' "$T/cmd.environ" || fail "a URL in CMD's environ"
    ! grep -qFf "$T/pattern" "$T/cmd.environ" || fail "the password in CMD's environ"

    # amqplock's own cmdline, CMD's, and everyone else's
    running "$h"
    ! grep -qFf "$T/pattern" "/proc/$h/cmdline" || fail "the password in amqplock's cmdline"
    local hits
    hits=$(grep -lFf "$T/pattern" /proc/[0-9]*/cmdline 2>/dev/null || true)
    [ -z "$hits" ] || fail "the password in a cmdline: $hits"

    kill -TERM "$h"
    wait_exit "$h" 5
    [ "$rc" -eq 143 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    ! grep -qFf "$T/pattern" "$T/h.out" "$T/h.err" || fail "the password in hold's output"
}

@test "run as nobody, CMD finds the password nowhere it can read: AMQPLOCK_URL, AMQP_URL, -u, a FIFO" {
    al create "$n" 1
    nobody_dir
    # the password and its random digits; snoop.pl reads them from a file
    printf '%s\n' "$SEC_PW" "${SEC_PW#s3cr3t-XYZ-}" >"$NB/pattern"
    chown nobody:nogroup "$NB/pattern"
    chmod 600 "$NB/pattern"
    mkfifo -m 600 "$NB/fifo"
    chown nobody:nogroup "$NB/fifo"
    local how snoop=("$n" -- perl "$H/snoop.pl" "$NB/pattern")
    for how in AMQPLOCK_URL AMQP_URL -u --password-file; do
        case $how in
        AMQPLOCK_URL) AMQPLOCK_URL=$GOOD_URL AMQP_URL=$GOOD_URL as_nobody h hold "${snoop[@]}" ;;
        AMQP_URL)
            unset AMQPLOCK_URL
            AMQP_URL=$GOOD_URL as_nobody h hold "${snoop[@]}"
            export AMQPLOCK_URL=$MAIN_URL
            ;;
        -u) as_nobody h -u "$GOOD_URL" hold "${snoop[@]}" ;;
        --password-file)
            as_nobody h -u "amqp://$SEC_USER@127.0.0.1:$AMQPLOCK_TEST_PORT/" \
                --password-file "$NB/fifo" hold "${snoop[@]}"
            printf '%s\n' "$SEC_PW" | perl "$H/feeder.pl" "$NB/fifo" "$BG" >/dev/null ||
                fail "amqplock did not read the FIFO: $(cat "$NB/h.err")"
            ;;
        esac
        wait_exit "$BG" 20
        run cat "$NB/h.out"
        # hold exits with CMD's status: snoop.pl's 1 if it found the password
        [ "$rc" -eq 0 ] || fail "$how: hold exited $rc: $output $(cat "$NB/h.err")"
        refute_line --partial FOUND
        # it did look: its own environment, what /proc shows of the keeper
        # and of amqplock (the command lines only), and ps
        assert_line 'read own environment'
        assert_line --regexp '^read ancestor [0-9]+ amqp-keeper: cmdline$'
        assert_line --regexp '^unreadable ancestor [0-9]+ amqp-keeper: environ '
        assert_line --regexp '^unreadable ancestor [0-9]+ amqp-keeper: mem '
        assert_line --regexp '^read ancestor [0-9]+ amqplock: cmdline$'
        assert_line --regexp '^unreadable ancestor [0-9]+ amqplock: environ '
        assert_line --regexp '^unreadable ancestor [0-9]+ amqplock: mem '
        assert_line --regexp '^read ps auxeww '
        ! grep -qF "${SEC_PW#s3cr3t-XYZ-}" "$NB/h.err" || fail "the password in hold's stderr"
    done

    # the same search under a parent that shows the password (a plain
    # process of the same user with the URL in its environment and on its
    # command line) finds it in each place
    AMQPLOCK_URL=$GOOD_URL run -1 setpriv --reuid=nobody --regid=nogroup --clear-groups \
        perl -e 'exit(system("perl", @ARGV[0, 1]) >> 8)' "$H/snoop.pl" "$NB/pattern" "$GOOD_URL"
    assert_line --regexp '^FOUND ancestor [0-9]+ perl: cmdline$'
    assert_line --regexp '^FOUND ancestor [0-9]+ perl: environ$'
    assert_line --regexp '^FOUND ancestor [0-9]+ perl: mem$'
    assert_line --regexp '^FOUND ps auxeww '
}

@test "root reading /proc of amqplock and of the keeper: AMQPLOCK_URL and AMQP_URL wiped, the -u password replaced, the keeper shows its name alone" {
    al create "$n" 1
    local other=amqp://guest:$BAD_PW@127.0.0.1:$AMQPLOCK_TEST_PORT/ how h cmd keeper p
    for how in env -u; do
        rm -f "$T/cmd.pid"
        if [ $how = env ]; then
            AMQPLOCK_URL=$GOOD_URL AMQP_URL=$other bg h hold "$n" -- \
                sh -c 'echo $$ >"$1.tmp"; mv "$1.tmp" "$1"; exec sleep 300' sh "$T/cmd.pid"
        else
            AMQPLOCK_URL=$other bg h -u "$GOOD_URL" hold "$n" -- \
                sh -c 'echo $$ >"$1.tmp"; mv "$1.tmp" "$1"; exec sleep 300' sh "$T/cmd.pid"
        fi
        h=$BG
        wait_until 10 test -s "$T/cmd.pid" || fail "CMD did not start: $(cat "$T/h.err")"
        cmd=$(cat "$T/cmd.pid")
        keeper=$(proc_field "$cmd" 4)
        [ "$(cat "/proc/$keeper/comm")" = "$KEEPER" ] || fail "CMD's parent is not the keeper"
        for p in "$h" "$keeper"; do
            tr '\0' '\n' <"/proc/$p/environ" >"$T/environ"
            # the entries are there, every byte of their values wiped
            grep -qxE 'AMQPLOCK_URL=\*+' "$T/environ" ||
                fail "$how: $p's environ: $(grep AMQPLOCK_URL "$T/environ")"
            if [ $how = env ]; then
                grep -qxE 'AMQP_URL=\*+' "$T/environ" ||
                    fail "$p's environ: $(grep AMQP_URL "$T/environ")"
            fi
            ! grep -q 's3cr3t' "$T/environ" || fail "$how: a password in $p's environ"
            output=$(tr '\0' ' ' <"/proc/$p/cmdline")
            [[ $output != *s3cr3t* ]] || fail "$how: a password in $p's cmdline: $output"
            if [ "$p" = "$keeper" ]; then
                [[ $output =~ ^$KEEPER\ *$ ]] || fail "the keeper's command line: '$output'"
            elif [ $how = -u ]; then
                masked "$output" "$SEC_USER"
            fi
        done
        kill -TERM "$h"
        wait_exit "$h" 5
        [ "$rc" -eq 143 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    done
}

@test "the password of -u/--url is replaced by '*' in amqplock's command line, however the option is written" {
    al create "$n" 1
    local u=$GOOD_URL closed spell
    closed=amqp://$SEC_USER:$BAD_PW@[::1]:$(closed_port)/
    # options before "hold" (global ones) and after it, "^" standing for
    # the URL
    for spell in "-u ^ hold" "-u^ hold" "--url ^ hold" "--url=^ hold" "--ur=^ hold" "--u ^ hold" \
        "-qu ^ hold" "-vqu^ hold" "--json --connect-timeout=2 --url ^ hold" "hold -u ^" \
        "hold -w1 -u ^" "hold -E3 -nu ^" "hold -nqvu^" "hold --grace 1 --prefix amqplock. -u ^" \
        "hold --lost-signal TERM --url=^"; do
        # shellcheck disable=SC2086
        set -- ${spell//^/$u}
        run -0 --separate-stderr al "$@" "$n" -- sh -c "$ANCESTORS"
        [ "${#lines[@]}" -eq 2 ] || fail "$spell: '$output' $stderr"
        masked "${lines[1]}" "$SEC_USER"
        # the keeper shows its own name, and nothing else
        [[ ${lines[0]} =~ ^$KEEPER\ *$ ]] || fail "the keeper's command line: '${lines[0]}'"
        no_secret
    done
    # after the command, and a second URL (an unreachable one first, tried
    # in vain), in two options or in one list
    run -0 --separate-stderr al hold -u "$closed" "$n" --url="$u" -- sh -c "$ANCESTORS"
    masked "${lines[1]}" "$SEC_USER"
    [[ ${lines[1]} =~ :\*+@.*:\*+@ ]] || fail "both passwords: '${lines[1]}'"
    no_secret
    run -0 --separate-stderr al -u "$closed $u" hold "$n" -- sh -c "$ANCESTORS"
    [[ ${lines[1]} =~ :\*+@.*:\*+@ ]] || fail "both passwords: '${lines[1]}'"
    no_secret
    # "--" before the command ends only the global options
    run -0 --separate-stderr al -q -- hold -u "$u" "$n" -- sh -c "$ANCESTORS"
    masked "${lines[1]}" "$SEC_USER"
    no_secret
}

@test "CMD's arguments and -c TEXT are left as they are, URLs with passwords and -u included" {
    al create "$n" 1
    local v=amqp://user:$BAD_PW@host/
    run -0 al hold "$n" -- printf '%s\n' -u "$v" "--url=$v" -u"$v"
    assert_output "$(printf '%s\n' -u "$v" "--url=$v" -u"$v")"
    # shellcheck disable=SC2016
    run -0 al hold "$n" -- sh -c 'tr "\0" "\n" </proc/$$/cmdline' sh -u "$v"
    # shellcheck disable=SC2016
    assert_output "$(printf '%s\n' sh -c 'tr "\0" "\n" </proc/$$/cmdline' sh -u "$v")"
    run -0 al hold -c "echo $v" "$n"
    assert_output "$v"
    run -0 al hold "-cecho $v" "$n"
    assert_output "$v"
    run -0 al hold -nc "echo -u $v" "$n"
    assert_output "-u $v"
    run -0 al hold --command="echo $v" "$n"
    assert_output "$v"
    run -0 al hold --comm "echo --url $v" "$n"
    assert_output "--url $v"
}

# option_forms: for every option of every command in the help but --url,
# --password-file, --help and --version, one line "COMMAND LONG SHORT ARG"
# (SHORT and ARG "-" when there is none), with the first command that takes
# it.
option_forms() {
    local c long short arg
    declare -A seen
    for c in $(al --help | sed -n '/^Commands:/,/^$/s/^  \([a-z]*\) .*/\1/p' | grep -vx help); do
        while read -r short long arg; do
            [ -z "${seen[$long]-}" ] || continue
            seen[$long]=1
            echo "$c $long $short ${arg:--}"
        done < <(al help "$c" | sed -nE 's/^  (-(.), |    )--([a-z-]+)( ([A-Z]+))? .*/\2 \3 \5/p' |
            sed 's/^ /- /' | grep -Ev '^. (url|password-file|help|version) ')
    done
}

@test "every option, written before -u, is told from its value: the password of the -u after it is still hidden" {
    local closed c long short arg value opt args extra form forms=0
    closed=amqps://$SEC_USER:$BAD_PW@localhost:$(closed_port)/
    cp "$TLS/client.key" "$T/client.key"
    chmod 600 "$T/client.key"
    mkfifo -m 600 "$T/fifo"
    while read -r c long short arg; do
        # a value the option accepts, and its companions (after the -u)
        extra=()
        case $long in
        cacert) value=$TLS/ca.pem ;;
        cert) value=$TLS/client.pem extra=(--key "$T/client.key") ;;
        key) value=$T/client.key extra=(--cert "$TLS/client.pem") ;;
        prefix) value=amqplock. ;;
        slot-type) value=classic ;;
        lost-signal) value=TERM ;;
        lease) value=60 ;; # (1 is too short: exit 64)
        command) value=true ;;
        management-url) value=http://127.0.0.1:1/ ;;
        label) value=nightly ;;
        *)
            case $arg in
            -) value= ;;
            SECS | N) value=1 ;;
            *) fail "no value known for --$long $arg: teach this test one" ;;
            esac
            ;;
        esac
        args=("$n")
        [ "$c" != create ] && [ "$c" != evict ] || args=("$n" 1)
        [ "$c" != hold ] || [ "$long" = command ] || args=("$n" -- true)
        # a client that waits would wait for the closed port to open
        case $c:$long in
        hold:wait | hold:nonblock | acquire:wait | acquire:nonblock | wait:wait | wait:nonblock) ;;
        hold:* | acquire:* | wait:*) args=(-n "${args[@]}") ;;
        esac
        # the long form with the value apart, the short one with it attached
        for form in long short; do
            if [ $form = long ]; then
                opt=(--"$long" ${value:+"$value"})
            else
                [ "$short" != - ] || continue
                opt=(-"$short$value")
            fi
            bg x "$c" "${opt[@]}" -u "$closed" "${extra[@]}" --password-file "$T/fifo" "${args[@]}"
            run perl "$H/feeder.pl" "$T/fifo" "$BG" <<<"x"
            [ "$status" -eq 0 ] || fail "${opt[*]}: amqplock did not read the FIFO: $(cat "$T/x.err")"
            masked "$output" "$SEC_USER"
            [[ $output == *" $c ${opt[*]} "* ]] || fail "${opt[*]} changed: '$output'"
            wait_exit "$BG" 10
            # the closed port: the options were good
            [ "$rc" -eq 69 ] || fail "${opt[*]}: exit $rc: $(cat "$T/x.err")"
            forms=$((forms + 1))
        done
    done < <(option_forms)
    # all of them were tried (22 options today, 6 with a short form)
    [ "$forms" -ge 27 ] || fail "only $forms forms"
}

# --- amqps:// ----------------------------------------------------------------

@test "amqps:// with --cacert and the host name localhost: create, status, hold, acquire, destroy" {
    local u
    u=$(tls_url)
    run -0 --separate-stderr al -u "$u" --cacert "$TLS/ca.pem" create "$n" 2
    [ -z "$stderr" ] || fail "stderr: '$stderr'"
    run -0 --separate-stderr al -u "$u" --cacert "$TLS/ca.pem" --json status "$n"
    assert_json '.max == 2 and .held == [] and .free == [1,2]'

    run -0 --separate-stderr al -u "$u" --cacert "$TLS/ca.pem" hold "$n" -- \
        sh -c 'echo "$AMQPLOCK_SLOT"'
    assert_output 1
    run -0 al -u "$u" --cacert "$TLS/ca.pem" hold "$n" -- true
    [ "$(al --json status --no-names "$n" | jq -c '[.held, .free]')" = '[[],[1,2]]' ]

    # a slot held through TLS is seen held over plain AMQP, and given back
    bg a -u "$u" --cacert "$TLS/ca.pem" acquire "$n"
    local a=$BG
    wait_until 10 has_line "$T/a.out" 1 || fail "no slot: $(cat "$T/a.out" "$T/a.err")"
    [ "$(al --json status --no-names "$n" | jq -c .held)" = '[1]' ]
    kill -TERM "$a"
    wait_exit "$a" 5
    [ "$rc" -eq 0 ] || fail "acquire exited $rc: $(cat "$T/a.err")"
    [ "$(al --json status --no-names "$n" | jq -c '[.held, .free]')" = '[[],[1,2]]' ]

    # the password through TLS: a wrong one is exit 77 and not shown
    fails_quietly 77 -u "amqps://guest:$BAD_PW@localhost:$AMQPLOCK_TEST_TLS_PORT/" \
        --cacert "$TLS/ca.pem" status "$n"
    fails_quietly 77 --json -v -u "amqps://guest:$BAD_PW@localhost:$AMQPLOCK_TEST_TLS_PORT/" \
        --cacert "$TLS/ca.pem" status "$n"

    run -0 al -u "$u" --cacert "$TLS/ca.pem" destroy "$n"
    run -66 al status "$n"
}

@test "amqps:// without --cacert (the system bundle), or with another CA's: exit 69, no trusted CA" {
    run -69 --separate-stderr al -u "$(tls_url)" create "$n" 1
    refute_output
    assert_error_line
    stderr_has "trusted CA"
    run -69 --separate-stderr al --json -u "$(tls_url)" status "$n"
    assert_json '.ok == false and .error == "connection" and (.message | contains("trusted CA"))'

    # --cacert of a CA that did not sign the broker's certificate
    run -69 --separate-stderr al -u "$(tls_url)" --cacert "$TLS/other-ca.pem" create "$n" 1
    refute_output
    assert_error_line
    stderr_has "not signed by a trusted CA"
    run -66 al status "$n"
}

@test "amqps:// to 127.0.0.1, which the certificate does not name: exit 69 even with the right CA" {
    run -69 --separate-stderr al -u "$(tls_url 127.0.0.1)" --cacert "$TLS/ca.pem" create "$n" 1
    refute_output
    assert_error_line
    stderr_has "does not name the host"
    stderr_has "127.0.0.1"
    run -69 --separate-stderr al --json -u "$(tls_url 127.0.0.1)" --cacert "$TLS/ca.pem" status "$n"
    assert_json '.ok == false and .error == "connection" and (.message | contains("does not name the host"))'
    run -66 al status "$n"
}

@test "amqps:// to the plain AMQP port: exit 69 with a TLS message" {
    local t0
    t0=$(now)
    run -69 --separate-stderr al -u "$(tls_url localhost "$AMQPLOCK_TEST_PORT")" \
        --cacert "$TLS/ca.pem" status "$n"
    refute_output
    assert_error_line
    stderr_has "TLS"
    at_most "$(since "$t0")" 6
}

@test "amqps:// to a silent listener with --connect-timeout 1: exit 69 within 3 s" {
    start_silent_listener
    PIDS+=("$SILENT_PID")
    [ -n "$SILENT_PORT" ] || fail "no silent listener"
    local t0
    t0=$(now)
    run -69 --separate-stderr al -u "$(tls_url localhost "$SILENT_PORT")" --cacert "$TLS/ca.pem" \
        --connect-timeout 1 status "$n"
    at_most "$(since "$t0")" 3
    refute_output
    assert_error_line
    t0=$(now)
    run -69 --separate-stderr al -u "$(tls_url localhost "$SILENT_PORT")" --cacert "$TLS/ca.pem" \
        --connect-timeout 1 hold -n "$n" -- touch "$T/ran"
    at_most "$(since "$t0")" 3
    [ ! -e "$T/ran" ]
}

@test "--insecure skips the checks (127.0.0.1 works) but warns on stderr naming --insecure" {
    al create "$n" 1
    run -0 --separate-stderr al -u "$(tls_url 127.0.0.1)" --insecure status "$n"
    assert_line --regexp '^max +1$'
    [[ $stderr == "amqplock: "*--insecure* && $stderr != *$'\n'* ]] ||
        fail "expected one warning line naming --insecure, got: '$stderr'"
    # without a CA that trusts the broker too, and through hold
    run -0 --separate-stderr al -u "$(tls_url 127.0.0.1)" --cacert "$TLS/other-ca.pem" \
        --insecure hold "$n" -- echo ran
    assert_output ran
    stderr_has "--insecure"
    [ "$(al --json status --no-names "$n" | jq -c .held)" = '[]' ]
}

@test "a client certificate from the broker's CA is accepted; one from another CA is refused (exit 69)" {
    local u
    u=$(tls_url)
    run -0 --separate-stderr al -u "$u" --cacert "$TLS/ca.pem" \
        --cert "$TLS/client.pem" --key "$TLS/client.key" create "$n" 1
    run -0 --separate-stderr al -u "$u" --cacert "$TLS/ca.pem" \
        --cert "$TLS/client.pem" --key "$TLS/client.key" hold "$n" -- true
    [ "$(al --json status --no-names "$n" | jq -c '[.held, .free]')" = '[[],[1]]' ]

    local m
    m=$(unique_name other)
    run -69 --separate-stderr al -u "$u" --cacert "$TLS/ca.pem" \
        --cert "$TLS/other-client.pem" --key "$TLS/other-client.key" create "$m" 1
    refute_output
    assert_error_line
    run -69 --separate-stderr al --json -u "$u" --cacert "$TLS/ca.pem" \
        --cert "$TLS/other-client.pem" --key "$TLS/other-client.key" status "$n"
    assert_json '.ok == false and .error == "connection"'
    run -69 --separate-stderr al -u "$u" --cacert "$TLS/ca.pem" \
        --cert "$TLS/other-client.pem" --key "$TLS/other-client.key" hold "$n" -- touch "$T/ran"
    [ ! -e "$T/ran" ]
    run -66 al status "$m"
}

@test "TLS options: --key without --cert, or any with amqp://, and a missing --cacert are exit 64" {
    local closed_tls closed_plain
    closed_tls=$(tls_url localhost "$(closed_port)")
    closed_plain=amqp://guest:guest@127.0.0.1:$(closed_port)/

    run -64 --separate-stderr al -u "$closed_tls" --cacert "$TLS/ca.pem" --key "$TLS/client.key" \
        status "$n"
    refute_output
    assert_error_line
    stderr_has "--cert"
    run -64 --separate-stderr al -u "$(tls_url)" --cacert "$TLS/ca.pem" --key "$TLS/client.key" \
        create "$n" 1
    assert_error_line

    local opt
    for opt in "--cacert $TLS/ca.pem" "--cert $TLS/client.pem" \
        "--cert $TLS/client.pem --key $TLS/client.key" "--key $TLS/client.key" --insecure; do
        # shellcheck disable=SC2086
        run -64 --separate-stderr al -u "$closed_plain" $opt status "$n"
        refute_output
        assert_error_line
        stderr_has "amqps://"
        # shellcheck disable=SC2086
        run -64 --separate-stderr al --json $opt create "$n" 1
        assert_json '.ok == false and .error == "usage"'
    done

    run -64 --separate-stderr al -u "$closed_tls" --cacert "$T/no-such-ca.pem" status "$n"
    refute_output
    assert_error_line
    run -64 --separate-stderr al -u "$(tls_url)" --cacert "$T/no-such-ca.pem" create "$n" 1
    assert_error_line
    run -64 --separate-stderr al -u "$(tls_url)" --cacert "$TLS/ca.pem" \
        --cert "$T/no-such-cert.pem" --key "$TLS/client.key" create "$n" 1
    assert_error_line
    run -66 al status "$n"
}
