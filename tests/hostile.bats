#!/usr/bin/env bats
# Hostile command lines, table-driven: bad names and prefixes, numbers,
# durations, signal names, broker URLs, options, commands and argument
# counts. Every row must be a clean usage error, checked three ways:
#
#   text     exit 64, nothing on stdout, one line "amqplock: ..." on stderr
#            that shows the offending text escaped (printable ASCII only);
#   --json   exit 64, one JSON object {"ok":false,"error":"usage",
#            "message":...} on stdout (for hold: on stderr after the
#            error line, stdout being CMD's) that survives a round trip
#            through jq, whose message is the error line and echoes the
#            offending text in the same escaped form;
#   network  (rows whose bad part is not the URL) the text run is made
#            with --url of a closed port: still exit 64, never 69, so
#            nothing was attempted.
#
# The rows name the semaphore "jobs", which exists (2 slots) while the suite
# runs, so that a row taken for a real command would change the broker.
# Each @test lists the broker's queues before and after its table and fails
# if the list changed. A failing @test reports every bad row at once.
# cli.bats has the one-off cases; this suite is the broad sweep.
#
# Needs jq. AMQPLOCK_TEST_HOSTILE_MODES (default "text json") picks the
# runs made of each row: CI's sanitizer pass makes only the JSON one, which
# goes through the same parsing and more output code, to save time.
#
# It checks that no queue appears or vanishes anywhere on the node. tests/run.sh runs it so:
# run.sh: a broker of its own

MODES=${AMQPLOCK_TEST_HOSTILE_MODES:-text json}

bats_require_minimum_version 1.5.0
load lib/helper

setup_file() {
    al create jobs 2 >/dev/null || [ $? -eq 73 ] # 5: left by an interrupted run
}

teardown_file() {
    al destroy jobs >/dev/null || true
}

# Never to be seen in any output: the password in the URL rows.
SECRET=Hst1leS3cret
# A number past 2^64, a name one byte too long, a prefix one byte too long.
BIG=99999999999999999999
LONG=$(printf 'jobs%0197d' 0)
P41=$(printf 'p%040d' 0)

# --- the tables ------------------------------------------------------------------
#
# row DESCRIPTION SHOWS [VAR=value...] ARGS...
#   SHOWS is text the message must contain, as the program escapes it
#   (quoted, bytes outside printable ASCII, '"' and '\' as \xNN), or "-"
#   where the message names nothing. Leading VAR=value words go to the
#   environment, the rest are amqplock's arguments; rows for hold start
#   with "hold" (see check_row).

row() {
    DESC+=("$1")
    SHOWS+=("$2")
    shift 2
    if [ $# -eq 0 ]; then
        ARGV+=("")
    else
        ARGV+=("$(printf '%q ' "$@")")
    fi
}

names_table() {
    row 'empty name'                      '""'             create '' 1
    row 'name of 201 bytes'               "\"${LONG:0:40}" create "$LONG" 1
    row 'newline in the name'             '"jo\x0abs"'     create $'jo\nbs' 1
    row 'tab in the name'                 '"jobs\x09"'     status $'jobs\t'
    row 'ESC sequence in the name'        '"\x1b[31mjobs"' destroy $'\e[31mjobs'
    row 'carriage return in the name'     '"jobs\x0d"'     add $'jobs\r'
    row 'DEL in the name'                 '"jo\x7fbs"'     max $'jo\x7fbs'
    row 'bytes that are not UTF-8'        '"jobs\xff\xfe"' create $'jobs\xff\xfe' 1
    row 'UTF-8 letter in the name'        '"caf\xc3\xa9"'  acquire café
    row 'space in the name'               '"my jobs"'      wait 'my jobs'
    row 'slash in the name'               '"a/b"'          create a/b 1
    row 'double quote in the name'        '"jobs\x22"'     create 'jobs"' 1
    row 'backslash in the name'           '"jo\x5cbs"'     create 'jo\bs' 1
    row 'single quote in the name'        "\"it's\""       status "it's"
    row 'glob star as the name'           '"*"'            status '*'
    row 'name ending in -3-A'             '"jobs-3-A"'     create jobs-3-A 1
    row 'name ending in -12-B (hold)'     '"x-12-B"'       hold x-12-B -- true
    row 'name ending in -007-A'           '"jobs-007-A"'   status jobs-007-A
    row 'name ending in -3-D (a marker)'  '"jobs-3-D"'     create jobs-3-D 1
    row '--label with a tab'              '"a\x09b"'       hold --label $'a\tb' jobs -- true
    row '--label with an ESC sequence'    '"\x1b[31m"'     acquire --label $'\e[31m' jobs
    row '--label of 65 bytes'             "\"${LONG:0:40}" hold --label "${LONG:0:65}" jobs -- true
    row 'AMQPLOCK_LABEL with a newline'   '"x\x0ay"'       AMQPLOCK_LABEL=$'x\ny' hold jobs -- true
    row 'name after -- ending in -1-B'    '"-x-1-B"'       create -- -x-1-B 1
    row 'bad name for hold -c'            '"a/b"'          hold -c true a/b
    row '--prefix amq.'                   '"amq."'         --prefix amq. create jobs 1
    row '--prefix amq. after the command' '"amq."'         max jobs --prefix amq.
    row "--prefix '' and name amq.jobs"   '"amq.jobs"'     --prefix '' status amq.jobs
    row 'AMQPLOCK_PREFIX=amq.'            '"amq."'         AMQPLOCK_PREFIX=amq. create jobs 1
    row 'prefix p- and name 1-A: p-1-A'   '"1-A"'          --prefix p- create 1-A 1
    row 'prefix jobs-1- and name B'       '"B"'            --prefix jobs-1- acquire B
    row 'prefix of 41 bytes'              "\"${P41:0:30}"  --prefix "$P41" status jobs
    row 'prefix with a newline (env)'     '"a\x0a"'        AMQPLOCK_PREFIX=$'a\n' status jobs
    row 'prefix with a space'             '"my "'          status jobs --prefix 'my '
    row 'prefix with a backslash'         '"a\x5c"'        --prefix "a\\" status jobs
}

numbers_table() {
    row 'SLOTS -1 (taken for an option)'  '-1'             create jobs -1
    row 'SLOTS -1 after --'               '"-1"'           create -- jobs -1
    row 'SLOTS 0'                         '"0"'            create jobs 0
    row 'SLOTS 10001, over the cap'       '"10001"'        create jobs 10001
    row 'SLOTS past 2^64'                 "\"$BIG\""       create jobs "$BIG"
    row 'SLOTS 4294967297 (1 in 32 bits)' '"4294967297"'   create jobs 4294967297
    row 'SLOTS 1.5'                       '"1.5"'          create jobs 1.5
    row 'SLOTS 0x10'                      '"0x10"'         create jobs 0x10
    row 'SLOTS 1e3'                       '"1e3"'          create jobs 1e3
    row 'SLOTS 5x'                        '"5x"'           create jobs 5x
    row 'SLOTS "5 "'                      '"5 "'           create jobs '5 '
    row 'SLOTS " 5"'                      '" 5"'           create jobs ' 5'
    row 'SLOTS +5'                        '"+5"'           create jobs +5
    row 'SLOTS ""'                        '""'             create jobs ''
    row 'SLOTS 5 and a newline'           '"5\x0a"'        create jobs $'5\n'
    row 'SLOTS as a Roman numeral'        '"\xe2\x85\xa4"' create jobs Ⅴ
    row 'add COUNT 0'                     '"0"'            add jobs 0
    row 'add COUNT -3 after --'           '"-3"'           add -- jobs -3
    row 'add COUNT 2.0'                   '"2.0"'          add jobs 2.0
    row 'remove COUNT 10001'              '"10001"'        remove jobs 10001
    row 'remove COUNT 1e1'                '"1e1"'          remove jobs 1e1
    row 'remove COUNT +1'                 '"+1"'           remove jobs +1
    row 'max N -1 after --'               '"-1"'           max -- jobs -1
    row 'max N 10001'                     '"10001"'        max jobs 10001
    row 'max N 1,000'                     '"1,000"'        max jobs 1,000
    row 'max N ""'                        '""'             max jobs ''
    row '--overshoot -1'                  '"-1"'           status --overshoot -1 jobs
    row '--overshoot 10001'               '"10001"'        wait --overshoot 10001 jobs
    row '--overshoot 1.5'                 '"1.5"'          create jobs 1 --overshoot 1.5
    row '-E 256'                          '"256"'          acquire -E 256 jobs
    row '-E -1'                           '"-1"'           hold -E -1 jobs -- true
    row '-E ""'                           '""'             wait -E '' jobs
    row '--conflict-exit-code 0x1'        '"0x1"'          acquire --conflict-exit-code 0x1 jobs
}

durations_table() {
    row '--wait -1'                '"-1"'        acquire --wait -1 jobs
    row '-w 1sec'                  '"1sec"'      acquire -w 1sec jobs
    row '-w 300h, over 1e6 s'      '"300h"'      acquire -w 300h jobs
    row '-w 1mm'                   '"1mm"'       acquire -w 1mm jobs
    row '-w nan'                   '"nan"'       hold -w nan jobs -- true
    row '-w inf'                   '"inf"'       wait -w inf jobs
    row '-w 1e3'                   '"1e3"'       acquire -w 1e3 jobs
    row '-w 1000001, over 1e6 s'   '"1000001"'   acquire -w 1000001 jobs
    row '-w past 2^64'             "\"$BIG\""    acquire -w "$BIG" jobs
    row '-w ""'                    '""'          acquire -w '' jobs
    row '-w .'                     '"."'         acquire -w . jobs
    row '-w 1.2.3'                 '"1.2.3"'     acquire -w 1.2.3 jobs
    row '-w 1,5'                   '"1,5"'       acquire -w 1,5 jobs
    row '-w +1'                    '"+1"'        acquire -w +1 jobs
    row '-w 0x10'                  '"0x10"'      acquire -w 0x10 jobs
    row '--admin-wait -5'          '"-5"'        create --admin-wait -5 jobs 1
    row '--admin-wait INF'         '"INF"'       destroy --admin-wait INF jobs
    row '--admin-wait 1e400'       '"1e400"'     max jobs 3 --admin-wait 1e400
    row '--admin-wait 1000000.5'   '"1000000.5"' add jobs --admin-wait 1000000.5
    row '--grace -1'               '"-1"'        hold --grace -1 jobs -- true
    row '--grace NaN'              '"NaN"'       hold --grace NaN jobs -- true
    row '--grace 10min'            '"10min"'     hold -c true --grace 10min jobs
    row '--grace 99999999'         '"99999999"'  hold --grace 99999999 jobs -- true
    row '--connect-timeout 0'      '"0"'         --connect-timeout 0 status jobs
    row '--connect-timeout 0.0001' '"0.0001"'    status jobs --connect-timeout 0.0001
    row '--connect-timeout -1'     '"-1"'        --connect-timeout -1 status jobs
    row '--connect-timeout inf'    '"inf"'       --connect-timeout inf status jobs
    row '--rpc-timeout 0'          '"0"'         --rpc-timeout 0 status jobs
    row '--rpc-timeout 1d'         '"1d"'        status --rpc-timeout 1d jobs
    row '--rpc-timeout 2000000'    '"2000000"'   --rpc-timeout 2000000 status jobs
    row '--heartbeat -1'           '"-1"'        --heartbeat -1 status jobs
    row '--heartbeat 1s'           '"1s"'        --heartbeat 1s status jobs
    row '--heartbeat nan'          '"nan"'       acquire --heartbeat nan jobs
    row '--heartbeat 3601'         '"3601"'      --heartbeat 3601 status jobs
    row '--heartbeat past 2^64'    "\"$BIG\""    --heartbeat "$BIG" status jobs
    row '--heartbeat 0.5'          '"0.5"'       hold --heartbeat 0.5 jobs -- true
}

signals_table() {
    row 'FOO'                        '"FOO"'      hold --lost-signal FOO jobs -- true
    row 'SIGFOO'                     '"SIGFOO"'   hold --lost-signal SIGFOO jobs -- true
    row '0'                          '"0"'        hold --lost-signal 0 jobs -- true
    row '65, past the last signal'   '"65"'       hold --lost-signal 65 jobs -- true
    row '-9'                         '"-9"'       hold --lost-signal -9 jobs -- true
    row 'empty'                      '""'         hold --lost-signal '' jobs -- true
    row 'SIG alone'                  '"SIG"'      hold --lost-signal SIG jobs -- true
    row 'KILL (cannot be passed on)' '"KILL"'     hold --lost-signal KILL jobs -- true
    row 'SIGKILL'                    '"SIGKILL"'  hold jobs --lost-signal SIGKILL -- true
    row 'kill in lower case'         '"kill"'     hold --lost-signal kill jobs -- true
    row '9'                          '"9"'        hold --lost-signal 9 jobs -- true
    row 'STOP'                       '"STOP"'     hold --lost-signal STOP jobs -- true
    row 'sigstop'                    '"sigstop"'  hold -c true --lost-signal sigstop jobs
    row '19 (STOP)'                  '"19"'       hold --lost-signal 19 jobs -- true
    row 'CHLD'                       '"CHLD"'     hold --lost-signal CHLD jobs -- true
    row '" 15"'                      '" 15"'      hold --lost-signal ' 15' jobs -- true
    row '"15 "'                      '"15 "'      hold --lost-signal '15 ' jobs -- true
    row '+15'                        '"+15"'      hold --lost-signal +15 jobs -- true
    row '15x'                        '"15x"'      hold --lost-signal 15x jobs -- true
    row '0x0f'                       '"0x0f"'     hold --lost-signal 0x0f jobs -- true
    row 'RTMIN'                      '"RTMIN"'    hold --lost-signal RTMIN jobs -- true
    row 'CONT (does not end CMD)'    '"CONT"'     hold --lost-signal CONT jobs -- true
    row 'TSTP (stops CMD)'           '"TSTP"'     hold --lost-signal TSTP jobs -- true
    row 'WINCH (ignored)'            '"WINCH"'    hold --lost-signal WINCH jobs -- true
    row '32 (reserved by glibc)'     '"32"'       hold --lost-signal 32 jobs -- true
    row 'TERM and a newline'         '"TERM\x0a"' hold --lost-signal $'TERM\n' jobs -- true
    row 'past 2^64'                  "\"$BIG\""   hold --lost-signal "$BIG" jobs -- true
}

# The message never repeats a URL (it may hold a password); SECRET in
# these rows must not show anywhere.
urls_table() {
    row 'scheme http://'              - -u "http://guest:$SECRET@127.0.0.1/" status jobs
    row 'scheme AMQP:// in capitals'  - -u 'AMQP://127.0.0.1/' status jobs
    row 'scheme amqp:/ (one slash)'   - --url 'amqp:/127.0.0.1/' status jobs
    row 'port 99999'                  - -u "amqp://guest:$SECRET@127.0.0.1:99999/" status jobs
    row 'port 65536'                  - -u 'amqp://127.0.0.1:65536/' create jobs 1
    row 'port abc'                    - -u 'amqp://127.0.0.1:abc/' status jobs
    row 'port 0'                      - -u "amqp://guest:$SECRET@127.0.0.1:0/" status jobs
    row 'port -1'                     - -u 'amqp://127.0.0.1:-1/' status jobs
    row 'empty port'                  - -u 'amqp://127.0.0.1:/' status jobs
    row 'no host, a port'             - -u 'amqp://:5672/' status jobs
    row 'user but no host'            - -u 'amqp://user@/' status jobs
    row 'password but no host'        - -u "amqp://guest:$SECRET@:5672/" status jobs
    row 'empty IPv6 brackets'         - -u 'amqp://[]:5672/' status jobs
    row 'nothing after the scheme'    - -u 'amqp://' status jobs
    row 'query ?heartbeat=1'          - -u 'amqp://127.0.0.1/?heartbeat=1' status jobs
    row 'query after a vhost'         - -u "amqp://guest:$SECRET@127.0.0.1/vh?x=1" status jobs
    row 'fragment'                    - -u 'amqp://127.0.0.1/#x' status jobs
    row 'vhost with a raw slash'      - -u 'amqp://127.0.0.1/a/b' status jobs
    row 'bad percent escape'          - -u 'amqp://127.0.0.1/%zz' status jobs
    row 'two colons in the user info' - -u "amqp://guest:$SECRET:x@127.0.0.1/" status jobs
    row 'two @'                       - -u "amqp://a@guest:$SECRET@127.0.0.1/" status jobs
    row 'a URL of spaces'             - -u '   ' status jobs
    row 'empty --url'                 - acquire jobs --url ''
    row 'bad URL for hold, before --' - hold jobs -u 'amqp://:1/' -- true
    row 'AMQPLOCK_URL, http://'       - AMQPLOCK_URL="http://guest:$SECRET@127.0.0.1/" status jobs
    row 'AMQPLOCK_URL, port 99999'    - AMQPLOCK_URL='amqp://127.0.0.1:99999/' create jobs 1
    row 'AMQPLOCK_URL, a query'       - AMQPLOCK_URL='amqp://127.0.0.1/?heartbeat=1' acquire jobs
    row 'AMQP_URL without a host'     - AMQPLOCK_URL= AMQP_URL='amqp://user@/' status jobs
    row 'two ports'                   - -u 'amqp://127.0.0.1:99:1/' status jobs
    row 'port with a plus sign'       - -u 'amqp://127.0.0.1:+1/' status jobs
    row 'port after a space'          - -u 'amqp://127.0.0.1: 1/' status jobs
    row 'a space in the host'         - -u 'amqp://127.0.0.1 :1/' status jobs
    row '%00 in the vhost'            - -u 'amqp://127.0.0.1:1/a%00b' status jobs
    row '%00 in the user'             - -u "amqp://gu%00est:$SECRET@127.0.0.1:1/" status jobs
    row 'a newline in the vhost'      - -u $'amqp://127.0.0.1:1/\n' status jobs
}

options_table() {
    row 'unknown global option'            '"--bogus"'        --bogus status jobs
    row 'unknown option after the command' '"--bogus"'        status jobs --bogus
    row 'unknown short option'             '-Z'               create -Z jobs 1
    row 'unknown short option, clustered'  '-x'               -vx status jobs
    row 'a value for a flag'               '"--json=yes"'     --json=yes status jobs
    row 'ambiguous abbreviation --co'      '"--co"'           acquire --co 1 jobs
    row 'option with a newline'            '"--bo\x0ag"'      $'--bo\ng' status jobs
    row 'status --nonblock'                '--nonblock'       status --nonblock jobs
    row 'status -n'                        '--nonblock'       status -n jobs
    row 'create --grace 1'                 '--grace'          create --grace 1 jobs 1
    row 'create -c TEXT'                   '--command'        create -c true jobs 1
    row 'destroy --wait 1'                 '--wait'           destroy --wait 1 jobs
    row 'acquire --admin-wait 1'           '--admin-wait'     acquire --admin-wait 1 jobs
    row 'acquire --lost-signal TERM'       '--lost-signal'    acquire --lost-signal TERM jobs
    row 'hold --overshoot 1'               '--overshoot'      hold --overshoot 1 jobs -- true
    row 'status --repair'                  '--repair'         status --repair jobs
    row 'destroy --repair'                 '--repair'         destroy jobs --repair
    row 'check --slot-type quorum'         '--slot-type'      check --slot-type quorum jobs
    row '--repair before the command'      '--repair'         --repair check jobs
    row '--nonblock before the command'    '--nonblock'       --nonblock acquire jobs
    row 'option without its value'         '"--wait"'         acquire jobs --wait
    row '-c without its value'             '-c'               hold -c
    row 'unknown command'                  '"frobnicate"'     frobnicate jobs
    row 'command in capitals'              '"CREATE"'         CREATE jobs 1
    row 'empty command'                    '""'               '' jobs
    row 'command with control characters'  '"st\x0aat\x1bus"' $'st\nat\x1bus' jobs
    row 'help for an unknown command'      '"frobnicate"'     help frobnicate
    row 'help with two words'              -                  help create extra
    row 'no arguments at all'              -
    row 'global options but no command'    -                  --prefix x. --heartbeat 1
    row 'create without SLOTS'             -                  create jobs
    row 'create without anything'          -                  create
    row 'acquire without NAME'             -                  acquire
    row 'wait without NAME'                -                  wait -w 1
    row 'evict with an extra argument'     -                  evict jobs 1 extra
    row 'evict without SLOT'               -                  evict jobs
    row 'evict with slot 0'                -                  evict jobs 0
    row 'check --repair with two names'    -                  check --repair jobs extra
    row 'check --repair without NAME'      -                  check --repair
    row 'acquire with an extra argument'   -                  acquire jobs extra
    row 'wait with two names'              -                  wait a b
    row 'destroy, extra argument after --' -                  destroy jobs -- extra
    row 'create with three arguments'      -                  create jobs 1 2
    row 'add with three arguments'         -                  add jobs 1 2
    row 'hold without --'                  -                  hold jobs true
    row 'hold without a command'           -                  hold jobs
    row 'hold with -- and no command'      -                  hold jobs --
    row 'hold without a name'              -                  hold -- true
    row 'hold -c without a name'           -                  hold -c true
    row 'hold with both -c and --'         -                  hold -c true jobs -- true
    row 'hold with two names'              -                  hold a b -- true
}

# --- checking a table ------------------------------------------------------------

# problem TEXT: records a failure of the current row (cut at 400 bytes).
problem() {
    local text=$1
    [ ${#text} -le 400 ] || text="${text:0:400}..."
    problems+=("$ROW: $text")
}

# shown TEXT: TEXT for a failure message: on one line (quoted with %q if
# it holds anything but printable ASCII) and cut short.
shown() {
    local q=$1 LC_ALL=C
    [[ $q != *[^' '-~]* ]] || q=$(printf '%q' "$q")
    [ ${#q} -le 160 ] || q="${q:0:160}..."
    echo "$q"
}

# collect WHAT ASSERTION...: runs an assertion (assert_error_line,
# refute_output, json_problems) without ending the test; a non-zero
# status or any message it prints counts as a failure of the row.
collect() {
    local what=$1 msg
    shift
    if ! msg=$("$@" 2>&1) || [ -n "$msg" ]; then
        problem "$what: ${msg:-failed}"
    fi
}

# printable WHAT TEXT: TEXT holds printable ASCII only.
printable() {
    local LC_ALL=C
    if [[ $2 == *[^' '-~]* ]]; then
        problem "$1 has bytes outside printable ASCII: $(shown "$2")"
    fi
}

# no_secret WHAT: neither stdout nor stderr shows SECRET.
no_secret() {
    [[ $output != *"$SECRET"* && $stderr != *"$SECRET"* ]] ||
        problem "$1 shows the password"
}

# run_al ARGS...: amqplock ARGS, bounded in time, with the row's
# environment (envs).
run_al() {
    if [ ${#envs[@]} -gt 0 ]; then
        # shellcheck disable=SC2086 # AMQPLOCK_WRAP is words, as in helper.bash
        run --separate-stderr env "${envs[@]}" timeout 30 ${AMQPLOCK_WRAP:-} "$AMQPLOCK_BIN" "$@"
    else
        run --separate-stderr al "$@"
    fi
}

# json_problems: $output is one line holding exactly one JSON object with ok
# false, error "usage" and a message (what assert_json checks); serialised
# again and parsed again it is the same value; its message is the stderr
# line without "amqplock: "; and the message shows $shows. Prints what is
# wrong. One jq run per row, as jq is the slow part of this suite.
json_problems() {
    [[ -n $output && $output != *$'\n'* ]] || {
        echo "the JSON output is not one line"
        return
    }
    jq -rs --arg line "$stderr" --arg shows "$shows" '
        if length != 1 then "not one JSON value"
        elif (.[0] | type) != "object" then "not a JSON object"
        else .[0]
          | (tojson | fromjson) as $again
          | (if .ok != false or .error != "usage" or (.message | type) != "string"
                or .message == ""
             then "not {\"ok\":false,\"error\":\"usage\",\"message\":...}" else empty end),
            (if $again != . or ($again | tojson) != tojson
             then "not the same after a round trip: \($again | tojson)" else empty end),
            (if "amqplock: \(.message)" != $line
             then "message is not the stderr line" else empty end),
            (if $shows != "-" and (.message | contains($shows) | not)
             then "message does not show \($shows)" else empty end)
        end' <<<"$output"
}

# check_row NET: the current row (words, envs, shows) in text and in JSON.
# If NET is "closed-port", the text run uses the URL of a closed port
# (closed_url): still exit 64, not 69, so nothing was even tried on the
# network; the JSON run goes to the real broker, whose queues are compared
# before and after the table.
check_row() {
    local net=$1 url=()

    [ "$net" != closed-port ] || url=(--url "$closed_url")
    [[ " $MODES " == *" text "* ]] || { check_json_row; return; }
    run_al "${url[@]}" "${words[@]}"
    [ "$status" -eq 64 ] || problem "text: exit $status, not 64 (stderr: $(shown "$stderr"))"
    collect "text: stdout" refute_output
    collect "text: stderr" assert_error_line
    printable "text: stderr" "$stderr"
    [[ $shows == - || $stderr == *"$shows"* ]] ||
        problem "text: stderr does not show $shows: $(shown "$stderr")"
    no_secret text
    [[ " $MODES " == *" json "* ]] || return 0
    check_json_row
}

check_json_row() {
    run_al --json "${words[@]}"
    [ "$status" -eq 64 ] || problem "json: exit $status, not 64 (stderr: $(shown "$stderr"))"
    if [ "${words[0]:-}" = hold ]; then
        # hold keeps stdout for CMD: its JSON object follows the error line
        # on stderr. Checked below as if it had been on stdout.
        [ -z "$output" ] || problem "json: hold wrote to stdout: $(shown "$output")"
        if [[ $stderr == *$'\n'* ]]; then
            output=${stderr#*$'\n'}
            stderr=${stderr%%$'\n'*}
        else
            problem "json: no JSON after the error line on stderr: $(shown "$stderr")"
        fi
    fi
    collect "json: $(shown "$output")" json_problems
    collect "json: stderr" assert_error_line
    printable "json: stdout" "$output"
    no_secret json

}

# The broker's queues, but for the lines (NAME#waiters, which expire by
# themselves, at any moment; NAME#line) and waiters' own queues (NAME#w
# and 12 hex digits) that other suites' waiting clients make and leave.
queue_list() {
    local names
    names=$(rmqctl -q list_queues name --no-table-headers) || return 1
    grep -Ev '#waiters$|#line$|#w[0-9a-f]{12}$' <<<"$names" | LC_ALL=C sort
}

# check_table TABLE NET: every row of TABLE is a clean usage error (see
# check_row), and the broker's queues are the same afterwards. Fails once,
# listing every failing row.
check_table() {
    local table=$1 net=$2 before after changed i shows runs
    local -a words envs
    problems=()
    DESC=() SHOWS=() ARGV=()
    "$table"
    closed_url="amqp://guest:guest@127.0.0.1:$(closed_port)/"
    before=$(queue_list) || fail "cannot list the broker's queues"

    for i in "${!DESC[@]}"; do
        ROW="$table row $((i + 1)) (${DESC[i]})"
        shows=${SHOWS[i]}
        eval "words=(${ARGV[i]})"
        envs=()
        while [ ${#words[@]} -gt 0 ] && [[ ${words[0]} =~ ^[A-Z_]+= ]]; do
            envs+=("${words[0]}")
            words=("${words[@]:1}")
        done
        check_row "$net"
    done

    after=$(queue_list) || fail "cannot list the broker's queues"
    changed=$(LC_ALL=C comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after"))
    [ -z "$changed" ] || problems+=("queues appeared on the broker: ${changed//$'\n'/ }")
    changed=$(LC_ALL=C comm -23 <(printf '%s\n' "$before") <(printf '%s\n' "$after"))
    [ -z "$changed" ] || problems+=("queues vanished from the broker: ${changed//$'\n'/ }")

    runs=$((${#DESC[@]} * 2))
    echo "# $table: ${#DESC[@]} rows, $runs runs of amqplock" >&3
    if [ ${#problems[@]} -gt 0 ]; then
        fail "$(printf '%s\n' "${#problems[@]} problem(s):" "${problems[@]}")"
    fi
}

# --- the tests --------------------------------------------------------------------

@test "hostile names and prefixes are usage errors" {
    check_table names_table closed-port
}

@test "hostile numbers (SLOTS, COUNT, N, --overshoot, -E) are usage errors" {
    check_table numbers_table closed-port
}

@test "hostile durations are usage errors" {
    check_table durations_table closed-port
}

@test "hostile --lost-signal values are usage errors" {
    check_table signals_table closed-port
}

@test "hostile broker URLs (--url, AMQPLOCK_URL, AMQP_URL) are usage errors" {
    check_table urls_table no-network-pass
}

@test "hostile options, commands and argument counts are usage errors" {
    check_table options_table closed-port
}

@test "the tables hold at least 30 rows in all" {
    local table total=0
    for table in names_table numbers_table durations_table signals_table urls_table \
        options_table; do
        DESC=() SHOWS=() ARGV=()
        "$table"
        total=$((total + ${#DESC[@]}))
    done
    echo "# $total rows in all" >&3
    [ "$total" -ge 30 ] || fail "only $total rows"
}
