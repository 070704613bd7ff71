#!/usr/bin/env bats
# amqplock list, through the management HTTP API of the private broker
# (tests/lib/broker.sh enables rabbitmq_management on AMQPLOCK_TEST_
# MANAGEMENT_URL): every semaphore under the prefix with max, held and
# waiting, in text and JSON; its one clear line and exit code when the API
# cannot be reached (69) or the user may not use it (77); no password in
# any output; and "did you mean NAME?" in a not-found message when the API
# answers, nothing extra when it does not.
#
# Makes two broker users of its own (setup_file): one without a tag, and
# one with the monitoring tag; deletes them again.

bats_require_minimum_version 1.5.0
load lib/helper

setup_file() {
    local pw user
    pw=s3cr3t-XYZ-$(printf '%05d%05d' "$RANDOM" "$RANDOM")
    for user in amqplock-list-$$ amqplock-listmon-$$; do
        rmqctl add_user "$user" "$pw" >/dev/null 2>&1 || fail "could not add $user"
        rmqctl set_permissions -p / "$user" '.*' '.*' '.*' >/dev/null 2>&1 ||
            fail "could not give $user permissions"
    done
    rmqctl set_user_tags amqplock-listmon-$$ monitoring >/dev/null 2>&1 ||
        fail "could not tag amqplock-listmon-$$"
    (umask 077 && echo "amqplock-list-$$ amqplock-listmon-$$ $pw" >"$BATS_FILE_TMPDIR/users")
}

teardown_file() {
    local plain mon pw
    read -r plain mon pw <"$BATS_FILE_TMPDIR/users" || return 0
    rmqctl delete_user "$plain" >/dev/null 2>&1 || true
    rmqctl delete_user "$mon" >/dev/null 2>&1 || true
}

setup() {
    [ -n "${AMQPLOCK_TEST_MANAGEMENT_URL:-}" ] ||
        skip "the broker has no management API (AMQPLOCK_TEST_MANAGEMENT_URL)"
    read -r PLAIN_USER MON_USER PW <"$BATS_FILE_TMPDIR/users"
    test_init
    # A prefix of the test's own: the list holds only what the test made.
    P=lt$$-$RANDOM.
    export AMQPLOCK_MANAGEMENT_URL=$AMQPLOCK_TEST_MANAGEMENT_URL
    MAIN_URL=$AMQPLOCK_URL
}

teardown() {
    export AMQPLOCK_URL=$MAIN_URL
    test_cleanup
}

# url_of USER: the private broker's AMQP URL for USER and the test password.
url_of() { echo "amqp://$1:$PW@127.0.0.1:$AMQPLOCK_TEST_PORT/"; }

# no_password: after run --separate-stderr, no output shows the password.
no_password() {
    [[ $output != *s3cr3t* && ${stderr-} != *s3cr3t* && $output != *"${PW#s3cr3t-XYZ-}"* &&
        ${stderr-} != *"${PW#s3cr3t-XYZ-}"* ]] || fail "the password shows: '$output' '${stderr-}'"
}

# waiting_is NAME N: list --json shows N waiting for NAME (the API's
# consumer counts lag the broker by its statistics interval, 5 s).
waiting_is() {
    al --prefix "$P" --json list | jq -e --arg n "$1" --argjson w "$2" \
        '.semaphores[] | select(.semaphore == $n) | .waiting == $w' >/dev/null
}

@test "list: every semaphore under the prefix with max, held and waiting, in text and JSON" {
    al --prefix "$P" create nightly 3
    al --prefix "$P" create db 2
    al --prefix "$P" create weekly 1
    # another prefix's semaphore, and a name that extends ours
    al --prefix "x$P" create other 1
    bg hold1 --prefix "$P" hold nightly -- sleep 60
    bg hold2 --prefix "$P" hold weekly -- sleep 60
    wait_until 20 slot_held_p weekly 1 || fail "weekly is not held"
    wait_until 20 slot_held_p nightly 1 || fail "nightly is not held"
    bg waiter --prefix "$P" hold weekly -w 60 -- true
    wait_until 30 waiting_is weekly 1 || fail "no waiter listed: $(al --prefix "$P" --json list)"

    run --separate-stderr al --prefix "$P" list
    assert_success
    [ -z "$stderr" ] || fail "stderr: $stderr"
    assert_equal "$(head -n1 <<<"$output" | tr -s ' ')" "SEMAPHORE MAX HELD WAITING"
    assert_equal "$(sed 1d <<<"$output" | tr -s ' ')" "db 2 0 0
nightly 3 1 0
weekly 1 1 1"

    run --separate-stderr al --prefix "$P" --json list
    assert_success
    assert_json '.ok == true and .prefix == $p and .semaphores == [
        {semaphore: "db", max: 2, held: 0, waiting: 0},
        {semaphore: "nightly", max: 3, held: 1, waiting: 0},
        {semaphore: "weekly", max: 1, held: 1, waiting: 1}]' --arg p "$P"

    run --separate-stderr al --prefix "x$P" --json list
    assert_success
    assert_json '.semaphores == [{semaphore: "other", max: 1, held: 0, waiting: 0}]'
    al --prefix "x$P" destroy other
}

# slot_held_p NAME K: slot_held under the test's prefix.
slot_held_p() { al --prefix "$P" --json status "$1" | jq -e --argjson k "$2" '.held | index($k) != null' >/dev/null; }

@test "list: nothing under the prefix is an empty list, not an error" {
    run --separate-stderr al --prefix "$P" list
    assert_success
    assert_output "no semaphores under prefix \"$P\""
    run --separate-stderr al --prefix "$P" --json list
    assert_success
    assert_json '.ok == true and .semaphores == []'
}

@test "list: the management API not reachable is exit 69 and one line saying what is missing" {
    local port
    port=$(closed_port)
    run --separate-stderr al list --management-url "http://127.0.0.1:$port/"
    assert_equal "$status" 69
    assert_error_line
    [[ $stderr == *"the management API at http://127.0.0.1:$port/ is not reachable (is the rabbitmq_management plugin enabled?"* ]] ||
        fail "unclear: $stderr"
    # derived from the broker URL: amqp://HOST → http://HOST:15672/
    if (exec 3<>/dev/tcp/127.0.0.1/15672) 2>/dev/null; then
        skip "something listens on 15672"
    fi
    unset AMQPLOCK_MANAGEMENT_URL
    run --separate-stderr al --json list
    assert_equal "$status" 69
    assert_json '.ok == false and .error == "connection"'
    [[ $stderr == *"the management API at http://127.0.0.1:15672/ is not reachable"* ]] ||
        fail "not the derived URL: $stderr"
}

@test "list: a user without the management or monitoring tag is exit 77, the line naming the tag" {
    export AMQPLOCK_URL
    AMQPLOCK_URL=$(url_of "$PLAIN_USER")
    run --separate-stderr al list
    assert_equal "$status" 77
    assert_error_line
    [[ $stderr == *"the user needs the management or monitoring tag for list"* ]] ||
        fail "no tag named: $stderr"
    no_password
    run --separate-stderr al --json list
    assert_equal "$status" 77
    assert_json '.error == "access"'
    no_password
    # with the tag, the same list works, the password from a file too
    (umask 077 && echo "$PW" >"$T/pw")
    AMQPLOCK_URL=amqp://$MON_USER@127.0.0.1:$AMQPLOCK_TEST_PORT/
    al --password-file "$T/pw" --prefix "$P" create tagged 2
    run --separate-stderr al --password-file "$T/pw" --prefix "$P" --json list
    assert_success
    assert_json '.semaphores == [{semaphore: "tagged", max: 2, held: 0, waiting: 0}]'
    no_password
}

@test "list: --management-url takes no user or password, and never shows one" {
    run --separate-stderr al list --management-url "http://u:$PW@127.0.0.1:1/"
    assert_equal "$status" 64
    assert_error_line
    [[ $stderr == *"no"*"user or password"* || $stderr == *"a user or password"* ]] ||
        fail "unclear: $stderr"
    no_password
    AMQPLOCK_MANAGEMENT_URL="ftp://127.0.0.1/" run --separate-stderr al list
    assert_equal "$status" 64
    [[ $stderr == *AMQPLOCK_MANAGEMENT_URL* ]] || fail "not named: $stderr"
}

@test "a semaphore that does not exist: did you mean the name a typo away?" {
    al --prefix "$P" create nightly 2
    run --separate-stderr al --prefix "$P" status nightlly
    assert_equal "$status" 66
    assert_error_line
    assert_equal "$stderr" "amqplock: semaphore nightlly does not exist (did you mean nightly?)"
    run --separate-stderr al --prefix "$P" --json max nihgtly
    assert_equal "$status" 66
    assert_json '.message == "semaphore nihgtly does not exist (did you mean nightly?)"'
    run --separate-stderr al --prefix "$P" acquire -n nightlx
    assert_equal "$status" 66
    [[ $stderr == *"(did you mean nightly?)" ]] || fail "acquire: $stderr"
    run --separate-stderr al --prefix "$P" hold nightl -- true
    assert_equal "$status" 66
    [[ $stderr == *"(did you mean nightly?)" ]] || fail "hold: $stderr"
    run --separate-stderr al --prefix "$P" add nightlyy
    assert_equal "$status" 66
    [[ $stderr == *"(did you mean nightly?)" ]] || fail "add: $stderr"
    # nothing near: nothing said
    run --separate-stderr al --prefix "$P" status daily
    assert_equal "$stderr" "amqplock: semaphore daily does not exist"
}

@test "did you mean: nothing extra, and no delay, when the API cannot be reached" {
    local t0 took
    al --prefix "$P" create nightly 2
    export AMQPLOCK_MANAGEMENT_URL=http://127.0.0.1:$(closed_port)/
    t0=$(now)
    run --separate-stderr al --prefix "$P" status nightlly
    took=$(since "$t0")
    assert_equal "$status" 66
    assert_equal "$stderr" "amqplock: semaphore nightlly does not exist"
    note "status of a missing semaphore, API closed: $took s"
    at_most "$took" 5
    # a silent API: the hint waits at most its own short deadline
    start_silent_listener
    export AMQPLOCK_MANAGEMENT_URL=http://127.0.0.1:$SILENT_PORT/
    t0=$(now)
    run --separate-stderr al --prefix "$P" status nightlly
    took=$(since "$t0")
    kill "$SILENT_PID"
    assert_equal "$status" 66
    assert_equal "$stderr" "amqplock: semaphore nightlly does not exist"
    note "status of a missing semaphore, API silent: $took s"
    at_least "$took" 1
    at_most "$took" 8
}
