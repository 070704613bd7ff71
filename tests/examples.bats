#!/usr/bin/env bats
# The examples of README.md and docs/*.md (the tour, the cheat sheet, every
# block marked `<!-- example: ID -->`) and of the man page's EXAMPLES, run as they are
# written against the test broker, so that they cannot drift from what
# amqplock does. tests/tools/examples.sh copies them out; its header says
# how a block is read, how `# exit N` gives a command's expected status,
# and what it substitutes (semaphore names, the example broker's URL,
# password files, jobs, amqplock's installed path, the private broker),
# and how a crontab line is run in cron's environment. Each command must
# exit as its text says.

bats_require_minimum_version 1.5.0
load lib/helper

# Every example, by ID (`tests/tools/examples.sh list`); each is run by a
# test below.
KNOWN="tour-private tour-own tour-job tour-look tour-resize tour-cron
tour-fleet cheatsheet tour-scripts admin-shrink admin-drain clusters man-1 man-2 man-3 man-4 man-5 man-6
man-7"

# The semaphore names the examples use (examples.sh makes them NAME.$S).
NAMES="nightly batch jobs reports"

# The examples log in as a user of their own, whose password is not the
# default "guest": a crontab line that forgets its password file fails
# here as it would on a real broker. Made in one import of definitions
# (one rabbitmqctl call costs about a second).
setup_file() {
    export EX_USER=amqplock-examples-$$ EX_PW=pw-$RANDOM$RANDOM$RANDOM
    local defs=$BATS_FILE_TMPDIR/definitions.json hash
    hash=$(perl -MDigest::SHA=sha256 -MMIME::Base64 -e '
        my $salt = pack("N", int(rand(2**32)));
        print encode_base64($salt . sha256($salt . $ARGV[0]), "")' "$EX_PW")
    jq -n --arg u "$EX_USER" --arg h "$hash" '
        {users: [{name: $u, password_hash: $h, tags: ["monitoring"],
                  hashing_algorithm: "rabbit_password_hashing_sha256"}],
         permissions: [{user: $u, vhost: "/", configure: ".*", write: ".*", read: ".*"}]}' >"$defs"
    rmqctl import_definitions "$defs" >"$BATS_FILE_TMPDIR/import.out" 2>&1 ||
        fail "import_definitions failed: $(cat "$BATS_FILE_TMPDIR/import.out")"
    # the test broker's URL, with this user
    export EX_URL
    EX_URL=$(sed -E "s|^(amqps?://)[^@]*@|\\1$EX_USER:$EX_PW@|" <<<"${AMQPLOCK_URL%% *}")
    wait_until 20 exits0 "$AMQPLOCK_BIN" --url "$EX_URL" max ready-$$ ||
        fail "the user $EX_USER cannot log in"
}

teardown_file() {
    [ -z "${EX_USER:-}" ] || rmqctl delete_user "$EX_USER" >/dev/null 2>&1 || true
}

# exits0 CMD...: CMD exits with 0 or 66 (logged in: no such semaphore)
exits0() {
    local rc=0
    "$@" >/dev/null 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 66 ]
}

setup() {
    test_init
    X=$T/ex
    S=x${BATS_TEST_NUMBER}-$$-$RANDOM
    AMQPLOCK_URL=$EX_URL AMQPLOCK_BIN=$AMQPLOCK_BIN AMQPLOCK_WRAP=${AMQPLOCK_WRAP:-} \
        "$H/examples.sh" extract "$X" "$S"
}

teardown() {
    local nm names=()
    for nm in $NAMES; do names+=("$nm.$S"); done
    test_cleanup "${names[@]}"
}

# run_examples ID...: the examples in one bash, in order (an example's
# exports reach the next), each command checked against its expected exit
# status; fails with their stderr if any is not as written. NO_URL=1: with
# neither AMQPLOCK_URL nor AMQP_URL set, as in a fresh shell.
run_examples() {
    local url=(AMQPLOCK_URL="$EX_URL")
    [ -z "${NO_URL:-}" ] || url=(-u AMQPLOCK_URL -u AMQP_URL)
    # (the test broker's management API stands for a real broker's on
    # port 15672, which `amqplock list` would find by itself; the user is
    # tagged monitoring, as `list` needs). NO_API=1: not set, as in a
    # fresh shell.
    if [ -z "${NO_API:-}" ]; then
        url+=(AMQPLOCK_MANAGEMENT_URL="$AMQPLOCK_TEST_MANAGEMENT_URL")
    else
        url+=(-u AMQPLOCK_MANAGEMENT_URL)
    fi
    run --separate-stderr env "${url[@]}" timeout 120 bash -c '
        . "$1/prelude.sh"
        __ex_dir=$1
        shift
        for __ex_id; do . "$__ex_dir/$__ex_id.sh"; done
        exit "$__ex_failed"' _ "$X" "$@"
    [ "$status" -eq 0 ] || fail "examples $* (status $status): $stderr"
}

# jobs_ran NAME: the stand-in job ran, every time under a slot of NAME.$S
jobs_ran() {
    [ -s "$X/job.log" ] || fail "no job ran"
    ! grep -vEx "$1\.$S [0-9]+" "$X/job.log" || fail "a job ran outside a slot of $1.$S"
}

# the rest of the README's tour, in its order, and then docs/operators.md's
# In scripts, which goes on from it
THE_REST="tour-job tour-look tour-resize tour-cron tour-scripts"

@test "every example of README, docs/*.md and the man page is one this suite runs" {
    run -0 "$H/examples.sh" list
    local ids
    ids=$(awk '{ print $1 }' <<<"$output" | sort)
    [ "$ids" = "$(tr -s ' \n' '\n\n' <<<"$KNOWN" | sed '/^$/d' | sort)" ] ||
        fail "examples.sh finds: $(echo $ids); this suite knows: $(echo $KNOWN)"
}

@test "README's tour, on a private broker, in order" {
    # the private-broker block must set AMQPLOCK_URL and the management
    # API's URL (for list) itself
    NO_URL=1 NO_API=1 run_examples tour-private $THE_REST
    jobs_ran nightly
}

@test "README's tour, on your own broker, in order" {
    NO_URL=1 run_examples tour-own $THE_REST
    jobs_ran nightly
}

@test "README's crontab line needs its full path, URL and password file in cron's environment" {
    # the line as written works (the tour runs it too)
    run_examples tour-job tour-cron
    local cron
    cron=$(ls "$X"/tour-cron.cron*)
    # ... and is checked the way cron runs it: without the full path,
    # amqplock is not found; without the password file, the login fails
    sed -E 's|[^ ]*/bin/amqplock |amqplock |' "$cron" >"$T/nopath"
    sed -E 's|--password-file [^ ]+ ||' "$cron" >"$T/nopw"
    run -127 bash -c '. "$1/prelude.sh"; __ex_cron "$2"' _ "$X" "$T/nopath"
    run bash -c '. "$1/prelude.sh"; __ex_cron "$2"' _ "$X" "$T/nopw"
    [ "$status" -eq 77 ] || fail "without the password file: status $status, $output"
}

@test "docs/operators.md's cheat sheet, row by row" {
    run_examples cheatsheet
    jobs_ran '(nightly|batch)'
}

@test "docs/operators.md's Resizing: remove, then wait" {
    al create "jobs.$S" 3
    run_examples admin-shrink
    [ "$(al max "jobs.$S")" = 1 ] || fail "max is $(al max "jobs.$S")"
}

@test "docs/operators.md's Draining: max 0 --drain, wait, max 3 again" {
    al create "jobs.$S" 3
    run_examples admin-drain
    [ "$(al max "jobs.$S")" = 3 ] || fail "max is $(al max "jobs.$S")"
}

@test "docs/operators.md's Clusters: quorum slots, and every node's URL in AMQPLOCK_URL" {
    # the nodes' URLs all become the test broker's: the first answers
    run_examples clusters
    jobs_ran nightly
    run -0 al check "nightly.$S"
    assert_line --partial "3 slots (quorum)"
}

@test "man page: the cron example, then the same with -w, -c, --lost-signal and --grace" {
    run_examples man-1 man-2
    jobs_ran reports
    [ -e "$X/reports.log" ] || fail "-c's redirection did not run"
}

@test "man page: the shrink script" {
    al create "jobs.$S" 4
    run -0 --separate-stderr timeout 60 env PATH="$X/bin:$PATH" "$X/man-3.sh" "jobs.$S" 2
    [ "$(al max "jobs.$S")" = 2 ] || fail "max is $(al max "jobs.$S")"
    # already small enough: nothing to do
    run -0 --separate-stderr timeout 60 env PATH="$X/bin:$PATH" "$X/man-3.sh" "jobs.$S" 3
    [ "$(al max "jobs.$S")" = 2 ]
}

@test "the fleet's crontab line (README and man page): it makes the semaphore, runs the job once, and keeps the slot" {
    run_examples tour-fleet
    jobs_ran nightly
    [ "$(al max "nightly.$S")" = 1 ] || fail "max is $(al max "nightly.$S" 2>&1)"
    # the same line again, as another host a few seconds later: skipped
    run -1 al hold -n "nightly.$S" -- true
    run_examples man-7
    [ "$(grep -c "^nightly\.$S " "$X/job.log")" = 1 ] || fail "the job ran again: $(cat "$X/job.log")"
}

@test "man page: status, jq, and the command's environment" {
    al create "jobs.$S" 3
    run_examples man-4 man-5 man-6
    # man-6's command printed its semaphore and slot
    assert_line --regexp "^jobs\.$S [1-3]\$"
}
