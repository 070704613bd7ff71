#!/usr/bin/env bats
# Least-privilege broker users: each role of the README's "Permissions"
# and docs/operators.md's "RabbitMQ permissions" gets exactly its
# configure/write/read regexes on a vhost of its own, and may do its
# commands and nothing more. A refused command exits 77 with one
# "amqplock: ..." line and leaves the semaphore as it was.
#
# Needs jq and perl (core modules only). Makes a vhost of its own and a
# user per role (setup_file), and deletes them again (teardown_file).

bats_require_minimum_version 1.5.0
load lib/helper

# USER CONFIGURE WRITE READ. inspector, client and admin are the README's
# set_permissions lines, team and adminonly docs/operators.md's, and must
# stay as they are there.
# noread is a client that may not consume from #waiters, nowaiters one
# that may not even declare it (their waiters poll instead); nolease is
# the client of before leases (with read on slot queues, which RabbitMQ
# 4.2.6 and later want), without configure on lease queues; naive
# has write on the prefix, where amq.default is needed; partial may make
# slot 1 of "partial" only; team is a full user for --prefix team.locks.;
# unnamed is the client of before holders were named, without read on
# holder queues; noholder may make leases but not holder queues; client04
# is the client of amqplock 0.4, before the line of entries (#line and
# the waiters' own queues #w...) and the stream of fencing tokens
# (#tokens); nobody has no permissions on the vhost at all.
roles() {
    cat <<'ROLES'
inspector ^$ ^amq\.default$ ^amqplock\..+(-0-A|#waiters|#line)$
client ^amqplock\..+(-[0-9]+-[BL]|#waiters|#line|#w[0-9a-f]{12})$ ^amq\.default$ ^amqplock\..+(-[0-9]+-[ABDL]|#waiters|#line|#w[0-9a-f]{12}|#tokens)$
admin ^amqplock\. ^amq\.default$ ^amqplock\.
adminonly ^amqplock\.(?!.*(-[0-9]+-[BL]|#waiters)$) ^amq\.default$ ^amqplock\..+-[0-9]+-B$
noread ^amqplock\..+(-[0-9]+-[BL]|#waiters)$ ^amq\.default$ ^amqplock\..+-[0-9]+-[AL]$
nowaiters ^amqplock\..+-[0-9]+-[BL]$ ^amq\.default$ ^amqplock\..+-[0-9]+-[AL]$
nolease ^amqplock\..+(-[0-9]+-B|#waiters)$ ^amq\.default$ ^amqplock\..+(-[0-9]+-A|#waiters)$
naive ^amqplock\. ^amqplock\. ^amqplock\.
partial ^amqplock\.partial(-1-A)?$ ^amq\.default$ ^$
team ^team\.locks\. ^amq\.default$ ^team\.locks\.
unnamed ^amqplock\..+(-[0-9]+-[BL]|#waiters)$ ^amq\.default$ ^amqplock\..+(-[0-9]+-[AL]|#waiters)$
noholder ^amqplock\..+(-[0-9]+-L|#waiters)$ ^amq\.default$ ^amqplock\..+(-[0-9]+-[AL]|#waiters)$
client04 ^amqplock\..+(-[0-9]+-[BL]|#waiters)$ ^amq\.default$ ^amqplock\..+(-[0-9]+-[ABL]|#waiters)$
nobody
ROLES
}

# password_hash PASSWORD: the form in which RabbitMQ keeps a password
# (rabbit_password_hashing_sha256): base64 of a 4-byte salt followed by
# SHA-256 of the salt and the password.
password_hash() {
    perl -MDigest::SHA=sha256 -MMIME::Base64 -e '
        my $salt = pack("N", int(rand(2**32)));
        print encode_base64($salt . sha256($salt . $ARGV[0]), "")' "$1"
}

# One rabbitmqctl call costs about a second of CPU, and calls side by side
# only share the cores: the vhost, the users and their permissions come in
# one import of definitions, and go in one eval.
setup_file() {
    local defs=$BATS_FILE_TMPDIR/definitions.json
    export PERM_TAG=amqplock-perm-$$ PERM_PW=pw-$RANDOM$RANDOM$RANDOM
    export PERM_VHOST=$PERM_TAG
    roles | jq -R -s --arg tag "$PERM_TAG-" --arg vhost "$PERM_VHOST" \
        --arg hash "$(password_hash "$PERM_PW")" '
        [split("\n")[] | select(. != "") | split(" ")] as $roles
        | {vhosts: [{name: $vhost}],
           users: [$roles[] | {name: ($tag + .[0]), password_hash: $hash,
                               hashing_algorithm: "rabbit_password_hashing_sha256",
                               tags: []}],
           permissions: [$roles[] | select(length == 4)
                         | {user: ($tag + .[0]), vhost: $vhost,
                            configure: .[1], write: .[2], read: .[3]}]}' >"$defs"
    rmqctl import_definitions "$defs" >"$BATS_FILE_TMPDIR/import.out" 2>&1 ||
        fail "import_definitions failed: $(cat "$BATS_FILE_TMPDIR/import.out")"
    # RabbitMQ may apply the definitions after the command returns, in
    # order: once the last role ("team") can log in and probe, all can.
    wait_until 20 exits 66 as team --prefix team.locks. max ready ||
        fail "the imported users do not work: $(as team --prefix team.locks. max ready 2>&1)"
}

teardown_file() {
    local role rest users=() acting='<<"amqplock-tests">>'
    [ -n "${PERM_TAG:-}" ] || return 0
    while read -r role rest; do
        users+=("<<\"$PERM_TAG-$role\">>")
    done < <(roles)
    # rabbitmqctl delete_user and delete_vhost, in one call; one by one if
    # this RabbitMQ's internals differ.
    local IFS=,
    rmqctl eval "[catch rabbit_auth_backend_internal:delete_user(U, $acting) || U <- [${users[*]}]],
        ok = rabbit_vhost:delete(<<\"$PERM_VHOST\">>, $acting)." >/dev/null 2>&1 && return 0
    unset IFS
    rmqctl delete_vhost "$PERM_VHOST" >/dev/null 2>&1 || true
    while read -r role rest; do
        rmqctl delete_user "$PERM_TAG-$role" >/dev/null 2>&1 || true
    done < <(roles)
}

# exits CODE CMD...: CMD exits with status CODE.
exits() {
    local code=$1 rc=0
    shift
    "$@" >/dev/null 2>&1 || rc=$?
    [ "$rc" -eq "$code" ]
}

setup() {
    test_init
}

teardown() { test_cleanup; }

# url ROLE: the broker URL of ROLE's user on the test vhost.
url() { echo "amqp://$PERM_TAG-$1:$PERM_PW@127.0.0.1:$AMQPLOCK_TEST_PORT/$PERM_VHOST"; }

# as ROLE ARGS...: amqplock ARGS as ROLE's user (in the foreground, bounded);
# the URL as url gives it, without a subshell.
as() { al -u "amqp://$PERM_TAG-$1:$PERM_PW@127.0.0.1:$AMQPLOCK_TEST_PORT/$PERM_VHOST" "${@:2}"; }

# bg_as TAG ROLE ARGS...: as bg (helper.bash), as ROLE's user.
bg_as() {
    local tag=$1 role=$2
    shift 2
    bg "$tag" -u "$(url "$role")" "$@"
}

# snapshot NAME: the semaphore as the admin sees it (status --json, or the
# error object when it does not exist).
snapshot() { { as admin --json status "$1" 2>/dev/null || true; } | jq -c 'del(.holders[]?.age_seconds)' 2>/dev/null; }

# refused ROLE ARGS...: amqplock ARGS as ROLE exits 77 with one error line
# saying the broker refused access, and nothing on stdout.
refused() {
    run --separate-stderr as "$@"
    [ "$status" -eq 77 ] || fail "as $1 ${*:2}: exit $status, not 77; stderr: '$stderr'"
    assert_error_line
    [[ $stderr == *ACCESS_REFUSED* || $stderr == *NOT_ALLOWED* ]] ||
        fail "as $1 ${*:2}: the message does not say access was refused: '$stderr'"
    [ -z "$output" ] || fail "as $1 ${*:2}: stdout: '$output'"
}

# await_slot TAG: waits for a background acquire TAG to print its slot and
# prints it.
await_slot() {
    wait_until 10 has_line "$T/$1.out" '[0-9]+' ||
        fail "acquire $1 printed no slot: $(cat "$T/$1.out" "$T/$1.err")"
    head -n 1 "$T/$1.out"
}

# vhost_queues PREFIX: "name durable exclusive" of each queue of the test
# vhost whose name starts with PREFIX, sorted, one per line.
vhost_queues() { queues_like "$1" "$PERM_VHOST"; }

# connection_of USER: the pid of the one connection of USER (a role's
# user name), empty unless there is exactly one.
connection_of() {
    local c
    c=$(rmqctl -q list_connections user pid --no-table-headers 2>/dev/null | awk -v u="$1" '$1 == u { print $2 }')
    [ "$(wc -l <<<"$c")" -eq 1 ] && echo "$c"
}

# held_by ROLE NAME: the held slots of NAME as ROLE's status --json shows them.
held_by() { as "$1" --json status "$2" | jq -c .held; }

# slot_of TAG: the slot a background acquire TAG printed, if any.
slot_of() { head -n 1 "$T/$1.out" 2>/dev/null; }

# new_holder TAG...: one of the waiters TAG... that are not in GOT has
# printed its slot; it is added to GOT.
new_holder() {
    local w
    for w in "$@"; do
        [[ " ${GOT[*]} " != *" $w "* ]] && [ -n "$(slot_of "$w")" ] && GOT+=("$w") && return 0
    done
    return 1
}

# --- the roles at work --------------------------------------------------------

# set_permissions_in DOC: "ROLE CONF WRITE READ" of each set_permissions
# line of DOC (continuations joined), with the user name as the role
set_permissions_in() {
    perl -0777 -ne 's/\s*\\\n\s*/ /g;
        while (/set_permissions -p \S+ (\S+) \x27([^\x27]*)\x27 \x27([^\x27]*)\x27 \x27([^\x27]*)\x27/g) {
            print "$1 $2 $3 $4\n" }' "$1"
}

@test "the set_permissions lines of README, the man page and docs/operators.md are the roles tested here" {
    local readme=$TOP/README.md ops=$TOP/docs/operators.md role
    grep -qs '^## Permissions' "$readme" || fail "README.md has no Permissions section"
    grep -qs '^## RabbitMQ permissions' "$ops" || fail "docs/operators.md has no RabbitMQ permissions section"
    # the README: the three roles, and nothing else
    run -0 set_permissions_in "$readme"
    for role in inspector client admin; do
        assert_line "$(roles | grep "^$role ")"
    done
    [ "${#lines[@]}" -eq 3 ] || fail "README's set_permissions lines not tested here: $output"
    # the man page (an installed package's): the same three, roff's \e
    # undone
    local from_readme=$output
    sed 's/\\e/\\/g' "$TOP/man/amqplock.1" >"$T/man.txt"
    run -0 set_permissions_in "$T/man.txt"
    [ "$output" = "$from_readme" ] || fail "the man page's roles: $output"
    # the operator's guide: another prefix, and nothing else
    run -0 set_permissions_in "$ops"
    assert_output "$(roles | grep "^team ")"
    # the administrator that cannot hold, given inline
    grep -qF "$(roles | awk '$1 == "adminonly" { printf "\x27%s\x27 \x27%s\x27 \x27%s\x27", $2, $3, $4 }')" \
        "$ops" || fail "$ops does not give adminonly's regexes"
}

# Each bats test costs a few tenths of a second here, so related checks
# share one.

@test "admin and adminonly: the administrative commands; adminonly cannot hold" {
    run -0 as admin create "$n" 2
    run -0 as admin add "$n" 2
    run -0 as admin remove "$n"
    run -0 as admin max "$n" 5
    run -0 as admin hold "$n" -- printenv AMQPLOCK_SLOT
    assert_output 1
    run -0 as admin destroy "$n"
    run -66 as admin max "$n"

    # quorum slots: the administrator re-declares slot 1 to learn their
    # type, and keeps the quorum marker (configure on it)
    run -0 as adminonly create --slot-type quorum "$n" 1
    [ "$(vhost_queues "amqplock.$n#" | cut -d' ' -f1 | sort | tr '\n' ' ')" = "amqplock.$n#quorum amqplock.$n#tokens " ] ||
        fail "no quorum marker or no stream of tokens: '$(vhost_queues "amqplock.$n#")'"
    run -0 as adminonly add "$n"
    run -0 as adminonly remove "$n"
    run -0 as adminonly max "$n" 4
    run -0 as adminonly --json status "$n"
    assert_json '.max == 4 and .held == []'
    run -0 as adminonly check "$n"
    refused adminonly acquire -n "$n"
    refused adminonly hold "$n" -- touch "$T/ran"
    [ ! -e "$T/ran" ] || fail "hold ran its command without a slot"
    run -0 as adminonly destroy "$n"
    # the marker went with the semaphore
    [ -z "$(vhost_queues "amqplock.$n")" ] || fail "left behind: $(vhost_queues "amqplock.$n")"
}

@test "inspector: status names each holder (host, pid) and counts the waiters" {
    as admin create "$n" 1
    bg_as h client hold "$n" -- sleep 60
    hold_pid=$BG
    wait_until 20 eval '[ "$(held_by admin "$n")" = "[1]" ]' || fail "no holder: $(cat "$T/h.err")"
    bg_as w client acquire "$n"
    wait_until 20 eval '[ "$(as inspector --json status "$n" | jq ".waiting, (.holders | length)" | xargs)" = "1 1" ]' ||
        fail "status: $(as inspector --json status "$n" 2>&1)"
    run -0 as inspector --json status "$n"
    assert_json '.held == [1] and .holders[0].slot == 1 and .holders[0].pid == $p
        and .holders[0].host == $host and .holders[0].command == "hold" and .waiting == 1' \
        --argjson p "$hold_pid" --arg host "$(hostname)"
    run -0 as inspector status "$n"
    [[ $output == *"slot 1: held by $(hostname) pid $hold_pid since "* ]] || fail "$output"
}

# The inspector may read the line (to count the waiters), and so consume
# it: first in line, it takes every wake-up and never a slot, gets every
# offer of a lease, and asks for each (it may publish: probes need it).
# Waiters judge the first in line by what it does, the line carries no
# token, and a releaser hands its lease only to an ask of its own login.
@test "inspector: consuming the line delays a waiter at most 10 s and shows it no lease's token" {
    as admin create "$n" 1
    bg_as h client -v hold "$n" -- sh -c "while [ ! -e '$T/go' ]; do sleep 0.05; done"
    local h=$BG
    wait_until 20 eval '[ "$(held_by admin "$n")" = "[1]" ]' || fail "no holder: $(cat "$T/h.err")"
    bg_as w1 client -v hold -w 60 "$n" -- sleep 1
    local w1=$BG
    wait_until 20 eval '[ "$(as admin --json status "$n" | jq .waiting)" = 1 ]' ||
        fail "w1 not in line: $(cat "$T/w1.err")"
    perl "$H/linehead.pl" "$AMQPLOCK_TEST_PORT" "amqplock.$n#waiters" --ask \
        --as "$PERM_TAG-inspector" "$PERM_PW" "$PERM_VHOST" >"$T/head.out" 2>&1 3>&- &
    keep $!
    wait_until 10 grep -qx ready "$T/head.out" || fail "linehead.pl: $(cat "$T/head.out")"
    bg_as w2 client -v hold -w 60 "$n" -- touch "$T/w2.ran"
    local w2=$BG
    wait_until 20 eval '[ "$(as admin --json status "$n" | jq .waiting)" = 3 ]' ||
        fail "not 3 in line: $(as admin --json status "$n")"
    touch "$T/go"
    wait_exit "$w1" 30
    [ "$rc" -eq 0 ] || fail "w1 exited $rc: $(cat "$T/w1.err")"
    local t0 took
    t0=$(now)
    wait_exit "$w2" 20
    took=$(since "$t0")
    [ "$rc" -eq 0 ] || fail "w2 exited $rc: $(cat "$T/w2.err")"
    note "w2 ran $took s after the slot was released, behind the inspector"
    at_most "$took" 10
    grep -q "^woken amqplock.offer" "$T/head.out" || fail "the inspector got no offer: $(cat "$T/head.out")"
    grep -qx asked "$T/head.out" || fail "the inspector did not ask: $(cat "$T/head.out")"
    ! grep -q token "$T/head.out" || fail "the inspector saw a token: $(cat "$T/head.out")"
    wait_exit "$h" 10
}

# The first in line asks for the lease through the holder's holder
# queue, which this holder may not read: the broker refuses it the queue,
# and with it the offer, sent behind on the same channel; it releases
# the slot as usual.
@test "a holder that may not read its holder queue hands nothing over: the waiter takes the slot as it is released" {
    as admin create "$n" 1
    bg_as h unnamed -v hold "$n" -- sh -c "while [ ! -e '$T/go' ]; do sleep 0.05; done"
    local h=$BG
    wait_until 20 eval '[ "$(held_by admin "$n")" = "[1]" ]' || fail "no holder: $(cat "$T/h.err")"
    bg_as w client -v hold -w 60 "$n" -- touch "$T/w.ran"
    local w=$BG
    wait_until 20 eval '[ "$(as admin --json status "$n" | jq .waiting)" = 1 ]' ||
        fail "w not in line: $(cat "$T/w.err")"
    touch "$T/go"
    wait_exit "$h" 10
    [ "$rc" -eq 0 ] || fail "h exited $rc: $(cat "$T/h.err")"
    local t0 took
    t0=$(now)
    wait_exit "$w" 10
    took=$(since "$t0")
    [ "$rc" -eq 0 ] || fail "w exited $rc: $(cat "$T/w.err")"
    note "w ran $took s after h's release ended"
    grep -q "the lease of slot 1 was not asked for" "$T/h.err" || fail "$(cat "$T/h.err")"
    ! grep -q "offered" "$T/w.err" || fail "w got an offer: $(cat "$T/w.err")"
    at_most "$took" 0.8
}

@test "a holder that may not read its holder queue keeps holding, unnamed" {
    as admin create "$n" 1
    bg_as h unnamed -v hold "$n" -- sleep 60
    hold_pid=$BG
    wait_until 20 eval '[ "$(held_by admin "$n")" = "[1]" ]' || fail "no holder: $(cat "$T/h.err")"
    run -0 as inspector --json status "$n"
    assert_json '.held == [1] and .holders == []'
    run -0 as inspector status "$n"
    [[ $output == *"slot 1: held, its holder unnamed"* ]] || fail "$output"
    sleep 1.5
    kill -0 "$hold_pid" || fail "the hold ended: $(cat "$T/h.err")"
    run -1 as admin acquire -n "$n"
    [ "$(held_by admin "$n")" = "[1]" ]
}

@test "inspector: status, max and wait work; everything else exits 77 and changes nothing" {
    as admin create "$n" 3
    bg_as holder client acquire "$n"
    [ "$(await_slot holder)" = 1 ]
    run -0 as inspector max "$n"
    assert_output 3
    run -0 as inspector --json status "$n"
    assert_json '.max == 3 and .held == [1] and .free == [2,3] and .orphans == []'
    before=$(snapshot "$n")
    run -0 as inspector wait -n "$n"
    run -66 as inspector status "$n-none"

    refused inspector create "$n-new" 1
    refused inspector destroy "$n"
    refused inspector add "$n"
    refused inspector remove "$n"
    refused inspector max "$n" 1
    refused inspector acquire -n "$n"
    refused inspector hold "$n" -- touch "$T/ran"
    [ ! -e "$T/ran" ] || fail "hold ran its command without a slot"
    [[ $stderr == *"access to queue 'amqplock.$n-2-B'"* ]] ||
        fail "the message does not name the holder queue: '$stderr'"
    [[ $stderr == "amqplock: taking a slot needs the client role's configure permission on holder and lease queues (see PERMISSIONS in amqplock(1)): "* ]] ||
        fail "the message does not name the role: '$stderr'"
    run -77 --separate-stderr as inspector --json create "$n" 1
    assert_json '.ok == false and .error == "access" and (.message | test("ACCESS_REFUSED"))'
    [ "$(snapshot "$n")" = "$before" ] || fail "the semaphore changed: $(snapshot "$n")"
    run -66 as admin max "$n-new"
    # every slot busy: still 77, not 1, for a user who could not hold one
    as admin create "$n-full" 1
    bg_as full client acquire "$n-full"
    [ "$(await_slot full)" = 1 ]
    run -77 --separate-stderr as inspector hold -n -E 0 "$n-full" -- touch "$T/ran"
    assert_error_line
    [[ $stderr == "amqplock: no slot of $n-full is free, and this user could not take one anyway: declaring amqplock.$n-full-0-B was refused; taking a slot needs the client role's"* ]] ||
        fail "$stderr"
    run -77 as inspector hold -w 0.5 "$n-full" -- touch "$T/ran"
    [ ! -e "$T/ran" ] || fail "hold ran its command"
    # the client is busy as ever
    run -1 as client hold -n "$n-full" -- true
    as admin destroy "$n-full" >/dev/null
}

@test "hold --create as the client: 77 naming the admin role while the semaphore is missing, nothing made; it holds once the admin made it" {
    refused client hold -n --create 1 "$n" -- touch "$T/ran"
    [[ $stderr == *"admin role"* ]] || fail "the message does not name the admin role: '$stderr'"
    [ ! -e "$T/ran" ] || fail "hold ran its command without a slot"
    [ -z "$(vhost_queues "amqplock.$n")" ] || fail "left behind: $(vhost_queues "amqplock.$n")"
    as admin create "$n" 2
    run -0 as client hold -n --create 1 "$n" -- printenv AMQPLOCK_SLOT
    assert_output 1
    run -0 as admin --json hold -n --create 1 "$n-new" -- true
    run -0 as inspector max "$n-new"
    assert_output 1
    as admin destroy "$n-new" >/dev/null
}

@test "a paused semaphore is paused to the inspector and the client: max 0, busy, not missing" {
    as admin create "$n" 1
    as admin max "$n" 0 >/dev/null
    run -0 as inspector --json status "$n"
    assert_json '.max == 0 and .paused == true'
    run -0 as inspector max "$n"
    assert_output 0
    run -0 as inspector wait -n "$n"
    run -1 --separate-stderr as client hold -n "$n" -- touch "$T/ran"
    [[ $stderr == *"is paused (max 0)"* ]] || fail "stderr: '$stderr'"
    run -0 as client --json status "$n"
    assert_json '.max == 0 and .paused == true'
    [ ! -e "$T/ran" ]
}

@test "client: acquire, hold, status, max and wait work; admin commands and evict exit 77 and change nothing" {
    as admin create "$n" 2
    run -0 as client hold "$n" -- printenv AMQPLOCK_SLOT
    assert_output 1
    bg_as a client acquire "$n"
    [ "$(await_slot a)" = 1 ]
    run -0 as client hold -n "$n" -- printenv AMQPLOCK_SLOT
    assert_output 2
    run -0 as client max "$n"
    assert_output 2
    run -0 as client wait -n "$n"
    [ "$(held_by client "$n")" = "[1]" ]

    before=$(snapshot "$n")
    refused client create "$n-new" 1
    refused client destroy "$n"
    refused client add "$n" 3
    refused client remove "$n"
    refused client evict "$n" 1
    [[ $stderr == "amqplock: evict ends another's job, which this user may not do (it needs the admin role's configure permission"* ]] ||
        fail "evict's message does not say what the user lacks: '$stderr'"
    refused client max "$n" 0
    [[ $stderr == *"access to queue 'amqplock.$n'"* ]] ||
        fail "the message does not name the admin mutex: '$stderr'"
    [[ $stderr == "amqplock: max changes a semaphore, which this user may not do (it needs the admin role's configure permission"* ]] ||
        fail "the message does not say what the user lacks: '$stderr'"
    run -77 --separate-stderr as client --json remove "$n"
    assert_json '.ok == false and .error == "access"'
    [ "$(snapshot "$n")" = "$before" ] || fail "the semaphore changed: $(snapshot "$n")"
    run -66 as admin max "$n-new"

    kill -TERM "$BG"
    wait_exit "$BG" 5
    [ "$rc" -eq 0 ] || fail "acquire exited $rc: $(cat "$T/a.err")"
    [ "$(held_by inspector "$n")" = "[]" ]
}

@test "client: a leased hold declares its lease, renews it, and deletes it on release" {
    as admin create "$n" 1
    bg_as h client -v hold "$n" -- sh -c 'touch "$1/ready"; while [ ! -e "$1/go" ]; do sleep 0.1; done' sh "$T"
    local h=$BG
    wait_until 10 test -e "$T/ready" || fail "CMD did not start: $(cat "$T/h.err")"
    [ "$(vhost_queues "amqplock.$n-1-")" = "amqplock.$n-1-A true false
amqplock.$n-1-B false true
amqplock.$n-1-L true false" ] || fail "queues: $(vhost_queues "amqplock.$n-")"
    grep -q "leased for" "$T/h.err" || fail "no lease: $(cat "$T/h.err")"
    # renewals (redeclares of the lease) are allowed too
    sleep 2.5
    running "$h" || fail "hold ended: $(cat "$T/h.err")"
    run -1 as client hold -n "$n" -- touch "$T/ran"
    touch "$T/go"
    wait_exit "$h" 10
    [ "$rc" -eq 0 ] || fail "hold exited $rc: $(cat "$T/h.err")"
    # released cleanly: the lease is gone, the slot free at once
    [ "$(vhost_queues "amqplock.$n-")" = "amqplock.$n-1-A true false" ] ||
        fail "left behind: $(vhost_queues "amqplock.$n-")"
    run -0 as inspector --json status "$n"
    assert_json '.held == [] and .away == [] and .free == [1]'
    [ ! -e "$T/ran" ]
}

@test "client: a leased hold rides out a closed connection, and its keeper ends the lease after a kill -9" {
    as admin create "$n" 1
    bg_as h client hold "$n" -- sh -c 'touch "$1/ready"; sleep 60' sh "$T"
    local h=$BG conn t0
    wait_until 10 test -e "$T/ready" || fail "CMD did not start: $(cat "$T/h.err")"
    conn=$(connection_of "$PERM_TAG-client")
    [ -n "$conn" ] || fail "the hold's connection?"
    rmqctl close_connection "$conn" "test" >/dev/null
    # back with the client's permissions: passive declares, the lease
    # declared again, the holder queue declared exclusive
    wait_until 15 grep -q "reconnected to .*; slot 1 of $n is still ours" "$T/h.err" ||
        fail "not back: $(cat "$T/h.err")"
    running "$h" || fail "hold ended: $(cat "$T/h.err")"
    wait_until 5 eval '[ "$(held_by inspector "$n")" = "[1]" ] && [ "$(as inspector --json status "$n" | jq -c .away)" = "[]" ]' ||
        fail "status: $(as inspector --json status "$n")"
    # the keeper ends the lease on a connection of its own, as the client
    t0=$(now)
    kill -KILL "$h"
    wait_until 5 eval '[ "$(held_by inspector "$n")" = "[]" ]' || fail "still held: $(as inspector --json status "$n")"
    at_most "$(since "$t0")" 3
    [ "$(vhost_queues "amqplock.$n-")" = "amqplock.$n-1-A true false" ] ||
        fail "left behind: $(vhost_queues "amqplock.$n-")"
}

# A lease runs out D after its holder's last renewal, however often
# others look at it. A passive declare restarts a classic queue's expiry
# and, before RabbitMQ 4.2.6, needs no permission on the queue: a reader
# looking at a dead holder's lease once a second kept its slot away for
# as long as it looked. Here the reader is the inspector (write on
# amq.default only), the holder and its keeper are killed, and a waiter
# must get the slot within D + 7 s (the broker's expiry timer: 5 s for a
# quorum lease).
@test "someone looking at a dead holder's lease once a second does not keep its slot: free within D + 7 s" {
    local D=5
    as admin create "$n" 1
    bg_as h client hold --lease "$D" --heartbeat 1 --grace 1 "$n" -- \
        sh -c 'echo $$ >"$1/cmd.pid"; touch "$1/ready"; exec sleep 120' sh "$T"
    local h=$BG keeper t0
    wait_until 10 test -e "$T/ready" || fail "CMD did not start: $(cat "$T/h.err")"
    # killed with its keeper, CMD may outlive both: teardown ends it
    keep "$(cat "$T/cmd.pid")"
    wait_until 10 eval 'keeper=$(pgrep -P "$h" -x "$KEEPER")' || fail "no keeper"
    HOLDQ_USER=$PERM_TAG-inspector HOLDQ_PASS=$PERM_PW HOLDQ_VHOST=$PERM_VHOST \
        perl "$H/looker.pl" "$AMQPLOCK_TEST_PORT" "amqplock.$n-1-L" 1 >"$T/looks" 2>"$T/looker.err" &
    local looker=$!
    sleep 1.5
    t0=$(now)
    kill -KILL "$h" "$keeper"
    bg_as w client hold -w $((D + 20)) "$n" -- true
    local w=$BG
    wait_exit "$w" $((D + 25))
    local took
    took=$(since "$t0")
    kill "$looker" 2>/dev/null || true
    note "the slot went to a waiter $took s after the kill (lease $D s), the lease looked at every second: $(sort "$T/looks" | uniq -c | xargs)"
    [ "$rc" -eq 0 ] || fail "the waiter exited $rc after $took s: $(cat "$T/w.err"); looks: $(sort "$T/looks" | uniq -c | xargs)"
    at_most "$took" $((D + 7))
}

# A claim asks for its lease beside its holder queue, on a channel of its
# own, so the broker may grant the lease and refuse the holder queue; the
# lease is then deleted at once, or it would block the slot for its length.
@test "a claim granted its lease but refused its holder queue deletes the lease: exit 77, nothing left" {
    as admin create "$n" 1
    refused noholder hold "$n" -- touch "$T/ran"
    [[ $stderr == *"access to queue 'amqplock.$n-1-B'"* ]] ||
        fail "the message does not name the holder queue: '$stderr'"
    [ ! -e "$T/ran" ] || fail "hold ran its command without a slot"
    [ "$(vhost_queues "amqplock.$n-")" = "amqplock.$n-1-A true false" ] ||
        fail "left behind: $(vhost_queues "amqplock.$n-")"
    run -0 as client hold -n "$n" -- printenv AMQPLOCK_SLOT
    assert_output 1
}

@test "a client without configure on lease queues: a leased hold exits 77 and leaves nothing; --lease 0 works" {
    as admin create "$n" 1
    refused nolease hold "$n" -- touch "$T/ran"
    [[ $stderr == *"access to queue 'amqplock.$n-1-L'"* ]] ||
        fail "the message does not name the lease queue: '$stderr'"
    refused nolease acquire -n "$n"
    [ ! -e "$T/ran" ] || fail "hold ran its command without a lease"
    [ "$(vhost_queues "amqplock.$n-")" = "amqplock.$n-1-A true false" ] ||
        fail "left behind: $(vhost_queues "amqplock.$n-")"
    run -0 as nolease hold --lease 0 "$n" -- printenv AMQPLOCK_SLOT
    assert_output 1
    [ "$(held_by inspector "$n")" = "[]" ]
}

@test "check: a client's stray holder queue; admin repairs it, adminonly cannot delete it" {
    as admin create "$n" 2
    # the issue: a client declares a holder queue durable and not exclusive
    HOLDQ_USER=$PERM_TAG-client HOLDQ_PASS=$PERM_PW HOLDQ_VHOST=$PERM_VHOST \
        timeout 20 perl "$H/holdq.pl" "$AMQPLOCK_TEST_PORT" --shared "amqplock.$n-1-B" --exit \
        >"$T/holdq.out" 2>&1 </dev/null 3>&- || fail "holdq.pl: $(cat "$T/holdq.out")"
    [ "$(held_by admin "$n")" = "[1]" ]
    refused client check "$n"
    refused inspector check --repair "$n"
    run -65 --separate-stderr as adminonly --json check "$n"
    assert_json '(.problems | map([.kind, .slot, .repaired])) == [["stray_holder", 1, false]]
        and .error == "damaged"'
    # adminonly may not delete holder queues: check --repair is refused,
    # and the administrative commands leave the stray with a warning
    refused adminonly check --repair "$n"
    [[ $stderr == *"amqplock.$n-1-B"* ]] || fail "the message does not name the queue: '$stderr'"
    run -0 --separate-stderr as adminonly add "$n"
    [[ $stderr == "amqplock: warning: 1 stray holder queue(s) of $n could not be deleted"* ]] ||
        fail "no warning: '$stderr'"
    run -0 --separate-stderr as admin --json check --repair "$n"
    assert_json '.ok and .repaired == 1 and (.problems | map([.kind, .repaired])) == [["stray_holder", true]]'
    run -0 as client hold -n "$n" -- printenv AMQPLOCK_SLOT
    assert_output 1
}

@test "waiters: a client with amqplock 0.4's permissions waits in #waiters on 2 slots, as 0.4 did, and is served" {
    as admin create "$n" 2
    bg_as a client acquire "$n"
    [ "$(await_slot a)" = 1 ]
    local a=$BG
    bg_as b client acquire "$n"
    [ "$(await_slot b)" = 2 ]
    bg_as w client04 -v hold -w 20 "$n" -- true
    local w=$BG
    wait_until 10 grep -q "waiting on amqplock.$n#waiters" "$T/w.err" ||
        fail "not in #waiters: $(cat "$T/w.err")"
    grep -q "the broker refused us a place in amqplock.$n#line" "$T/w.err" ||
        fail "no word of #line: $(cat "$T/w.err")"
    kill -TERM "$a"
    wait_exit "$w" 10
    [ "$rc" -eq 0 ] || fail "w exited $rc: $(cat "$T/w.err")"
    grep -q "woken: first in line" "$T/w.err" || fail "w was not woken: $(cat "$T/w.err")"
}

@test "fencing tokens: the client draws them; without read on #tokens, hold --token exits 77, runs nothing and leaves the slot free" {
    as admin create "$n" 1
    run -0 as client hold --token "$n" -- sh -c 'echo "$AMQPLOCK_TOKEN" >"$0"' "$T/t"
    [ "$(cat "$T/t")" = 1 ] || fail "token $(cat "$T/t")"
    run -77 --separate-stderr as client04 hold --token "$n" -- touch "$T/ran"
    assert_error_line
    [[ $stderr == *"may not read amqplock.$n#tokens"* ]] || fail "$stderr"
    [ ! -e "$T/ran" ] || fail "the command ran"
    [ "$(as admin --json status --no-names "$n" | jq -c '[.held, .away]')" = '[[],[]]' ] ||
        fail "still held: $(as admin --json status --no-names "$n")"
    run -0 as admin check "$n"
}

@test "waiters: a client consumes from #waiters; without read or configure on it, it polls" {
    as admin create "$n" 1
    bg_as a client acquire "$n"
    [ "$(await_slot a)" = 1 ]
    declare -A pid=([a]=$BG)
    bg_as b client -v acquire -w 20 "$n"
    pid[b]=$BG
    bg_as c noread -v acquire -w 20 "$n"
    pid[c]=$BG
    bg_as d nowaiters -v acquire -w 20 "$n"
    pid[d]=$BG
    wait_until 10 grep -q "waiting on amqplock.$n#" "$T/b.err" ||
        fail "the client did not subscribe: $(cat "$T/b.err")"
    for w in c d; do
        wait_until 10 grep -q 'polling instead' "$T/$w.err" ||
            fail "waiter $w did not fall back to polling: $(cat "$T/$w.err")"
    done
    ! grep -q 'polling instead' "$T/b.err" || fail "the client was refused: $(cat "$T/b.err")"
    # The slot goes round: each waiter gets it once its holder lets go.
    GOT=()
    holder=a
    for round in 1 2 3; do
        kill -TERM "${pid[$holder]}"
        wait_until 10 new_holder b c d ||
            fail "round $round: no waiter got the slot: $(cat "$T"/[bcd].err)"
        holder=${GOT[-1]}
        [ "$(slot_of "$holder")" = 1 ]
    done
}

# --- what is left out -----------------------------------------------------------

@test "write on the prefix instead of amq.default: every command exits 77 and changes nothing" {
    as admin create "$n" 2
    before=$(snapshot "$n")
    for args in "status $n" "wait -n $n" "acquire -n $n" "create $n-new 1" "destroy $n"; do
        # shellcheck disable=SC2086
        refused naive $args
        [[ $stderr == *"access to exchange 'amq.default'"* ]] ||
            fail "$args: the message does not name amq.default: '$stderr'"
    done
    refused naive hold "$n" -- touch "$T/ran"
    [ ! -e "$T/ran" ] || fail "hold ran its command without a slot"
    [ "$(snapshot "$n")" = "$before" ] || fail "the semaphore changed: $(snapshot "$n")"
    run -66 as admin max "$n-new"
}

@test "no permissions on the vhost: the login is refused, exit 77" {
    refused nobody status "$n"
    [[ $stderr == *"login to "*" refused"* ]] || fail "not a login refusal: '$stderr'"
    run -77 --separate-stderr as nobody --json max "$n"
    assert_json '.ok == false and .error == "access"'
}

@test "create refused half-way takes back what it made" {
    # partial may configure amqplock.partial and its slot 1, not slot 2:
    # refused at slot 2's record, the first thing a create writes
    run -77 --separate-stderr as partial create partial 3
    assert_error_line
    [[ $stderr == *"access to exchange 'amqplock.partial-2-A'"* ]] ||
        fail "not refused at slot 2: '$stderr'"
    run -66 as admin max partial
    run -66 as admin check partial
}

# --- another prefix ---------------------------------------------------------------

@test "--prefix: a user limited to ^team\\.locks\\. does everything there, and nothing under amqplock." {
    p=(--prefix team.locks.)
    run -0 as team "${p[@]}" create "$n" 1
    bg_as a team "${p[@]}" acquire "$n"
    [ "$(await_slot a)" = 1 ]
    pid_a=$BG
    bg_as b team "${p[@]}" -v acquire -w 20 "$n"
    wait_until 10 grep -q "waiting on team.locks.$n#" "$T/b.err" ||
        fail "the waiter did not subscribe: $(cat "$T/b.err")"
    kill -TERM "$pid_a"
    [ "$(await_slot b)" = 1 ]
    run -0 as team "${p[@]}" --json status "$n"
    assert_json '.max == 1 and .held == [1]'
    run -0 as team "${p[@]}" add "$n" 2
    run -0 as team "${p[@]}" hold -n "$n" -- printenv AMQPLOCK_SLOT
    assert_output 2
    run -0 as team "${p[@]}" wait -n "$n"
    kill -TERM "$BG"
    wait_exit "$BG" 5
    run -0 as team "${p[@]}" destroy "$n"
    # Under the default prefix it may look (probes need only amq.default)
    # but neither change nor hold anything.
    as admin create "$n" 1
    run -0 as team max "$n"
    refused team add "$n"
    refused team acquire -n "$n"
    refused team destroy "$n"
    run -0 as admin max "$n"
    assert_output 1
}

# passive_checked: the broker checks permissions on passive declares
# (RabbitMQ 4.2.6 and later; `rabbitmqctl version` says its own, which is
# the node's, and asks no node: 0.3 s).
passive_checked() {
    local v
    v=$(rmqctl -q version 2>/dev/null | tail -n 1)
    [ -n "$v" ] || fail "no broker version"
    [ "$(printf '%s\n' 4.2.6 "$v" | sort -V | head -n 1)" = 4.2.6 ]
}

@test "--drain: a client's drained job runs on; one with amqplock 0.4's read regex (no D) loses its slot where the broker checks passive declares, and says why" {
    as admin create "$n" 2
    bg_as a client hold "$n" -- sh -c "touch $T/a.started; while [ ! -e $T/a.stop ]; do sleep 0.05; done"
    local a=$BG
    wait_until 10 test -e "$T/a.started" || fail "a: $(cat "$T/a.err")"
    bg_as b client04 hold "$n" -- sh -c "touch $T/b.started; while [ ! -e $T/b.stop ]; do sleep 0.05; done"
    local b=$BG
    wait_until 10 test -e "$T/b.started" || fail "b: $(cat "$T/b.err")"
    run -0 as admin max "$n" 0 --drain
    wait_until 10 grep -q "removed by a --drain shrink" "$T/a.err" || fail "a: $(cat "$T/a.err")"
    if passive_checked; then
        wait_exit "$b" 10
        [ "$rc" -eq 75 ] || fail "b exited $rc: $(cat "$T/b.err")"
        grep -q "may not look at its drain marker amqplock.$n-[12]-D (a --drain shrink keeps only holders of the client role running; see PERMISSIONS in amqplock(1))" "$T/b.err" ||
            fail "b said: $(cat "$T/b.err")"
    else
        wait_until 10 grep -q "removed by a --drain shrink" "$T/b.err" || fail "b: $(cat "$T/b.err")"
        touch "$T/b.stop"
        wait_exit "$b" 10
        [ "$rc" -eq 0 ] || fail "b exited $rc: $(cat "$T/b.err")"
    fi
    touch "$T/a.stop"
    wait_exit "$a" 10
    [ "$rc" -eq 0 ] || fail "a exited $rc: $(cat "$T/a.err")"
    run -0 as client wait -w 10 "$n"
}
