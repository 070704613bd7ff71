#!/usr/bin/env bash
# tests/mutants.sh [NAME...]: proves that the tests can fail. Each mutant
# below is amqplock with one promise deliberately broken by a perl
# substitution on one source file. It is built in a scratch copy and the
# tests meant to catch it run against it on a private broker. A mutant is
# "caught" when at least one of those tests fails; one that passes them all
# "survived", which is a hole in the tests, and the script then fails.
# Not part of `make check` (it takes minutes): run `make mutants`.
set -uo pipefail
cd "$(dirname "$0")/.."

# name | file | perl expression | bats file | test filter (regex)
mutants() {
    cat <<'EOF'
shared-slot|src/request.c|s/declare\.exclusive = op == DECLARE_EXCLUSIVE/declare.exclusive = 0/|faults.bats|^at most (N: 50 hold|one: 20 hold)
no-keeper-kill|src/keeper.c|s/\t\t\t\tk->killing = k->orphaned = true;\n/\t\t\t\tk->orphaned = true;\n/|containment.bats|^kill -9 of the hold ends
no-subreaper|src/keeper.c|s/\tprctl\(PR_SET_CHILD_SUBREAPER, 1\);\n\tsignals_keeper/\tsignals_keeper/|containment.bats|^a setsid child keeps the slot
resume-unchecked|src/hold.c|s/\tif \(verify_now\(h\) != AL_OK\)\n/\tif (0)\n/|containment.bats|a 5 s kill -STOP
stop-without-command|src/job.c|s/\tsuper_stop_all\(&h->sv, FREEZE_WAIT\);\n//|containment.bats|^kill -TSTP of a background hold
no-parent-watch|src/keeper.c|s/(static void watch_parent\(struct keeper \*k\)\n\{)/$1\n\treturn;/|containment.bats|^kill -STOP of amqplock alone
holder-queue-unchecked|src/lease.c|s/\ts->hold->verify_kind\[n\+\+\] = HOLDER_QUEUE;\n//|containment.bats|^the holder queue deleted
signal-waits-for-connect|src/cmd_client.c|s/\tsignals_exit_on_interrupt\(out_interrupted\);//|containment.bats|^a signal while logging in
inherited-sigchld|src/signals.c|s/\tsignal\(SIGCHLD, SIG_DFL\);//g|containment.bats|^SIGCHLD ignored
dumpable|src/secret.c|s/\tprctl\(PR_SET_DUMPABLE, 0, 0, 0, 0\);//|secrets.bats|^run as nobody
url-in-ps|src/cli.c|s/\tsecret_mask_urls\(arg\);//|secrets.bats|^the password of -u/--url is replaced
late-signal|src/rules.c|s/return heartbeat < least \? least : \(double\)heartbeat;/return heartbeat < least ? least : 3.0 * (double)heartbeat;/|faults.bats|silent partitions
lost-exits-0|src/hold.c|s/\t\treturn AL_LOST;\n\t\}\n\t\/\* A verification/\t}\n\t\/* A verification/|faults.bats|the broker.s app stopped
no-connect-deadline|src/connect.c|s/deadline_within\(by, o->connect_timeout\)/deadline_within(by, 30)/|faults.bats|^a listener that never speaks
wait-limit-kept|src/cmd_client.c|s/\tconn_limit\(c, deadline_never\(\)\);\n//|client.bats|^-w bounds only the wait
no-wait-deadline|src/cmd_client.c|s/o->nonblock \? deadline_never\(\) : deadline_graced\(\*wait_end, LAST_TRY_REPLIES\)/deadline_never()/|client.bats|^hold -w 3 behind a relay
no-rpc-deadline|src/connect.c|s/c->rpc_timeout = o->rpc_timeout;/c->rpc_timeout = 30;/|faults.bats|^a broker falling silent mid-operation
nonblock-race-fatal|src/cmd_client.c|s/return !connecting && !sem_lost_to_lease\(s\) && conn_broker_raced\(c\) &&/return 0 \&\&/|faults.bats|RESOURCE_ERROR at a publish
alarm-unnoticed|src/conn.c|s/return connection_blocked\(c, f\.payload\.method\.decoded\);/continue;/|faults.bats|^a memory alarm
no-admin-mutex|src/admin.c|s/(\nenum al_status admin_lock\(struct sem \*s, bool repair, bool \*locked, bool \*stray\)\n\{)/$1\n\t*locked = true, *stray = false;\n\treturn AL_OK;/|faults.bats|^20 concurrent administrators
looked-at-lease-kept|src/request.c|s/return s->slots_quorum \x7c\x7c s->conn->version < LOOKS_NEED_PERMISSION;/return s->slots_quorum;/|permissions.bats|^someone looking at a dead holder
create-slot-1-first|src/admin.c|s/if \(st == AL_OK && n > 1 && \(st = declare_slots\(s, 2, n - 1\)\) == AL_OK\)/if (st == AL_OK \&\& (st = declare_slots(s, 1, 1)) == AL_OK \&\& n > 1 \&\& (st = declare_slots(s, 2, n - 1)) == AL_OK)/|admin.bats|killed while making its slot queues
create-record-1-first|src/admin.c|s/st = record_write\(s->conn, &s->name, written < 2 \? 2 : written \+ 1, n\);/st = record_write(s->conn, \&s->name, 1, n);/|admin.bats|killed while writing its size record
holes-unread|src/look.c|s/holes = \*max > contiguous \x7c\x7c \(!p\[0\].exists && \*max > 0\);/holes = false;/|admin.bats|killed while making its slot queues
hole-in-window-unread|src/look.c|s/holes = \*max > contiguous \x7c\x7c /holes = /|check.bats|^a hole among the first slots
record-ignored|src/admin.c|s/cs->max = cs->recorded \? cs->recorded : top;/cs->max = top;/|check.bats|idle top slots
held-stray-swept|src/strays.c|s/if \(st == AL_OK && \(holder \x7c\x7c lease\)\) \{/if (0) {/|admin.bats|that a holder holds
holes-not-filled|src/admin.c|s/\tif \(\(st = admin_fill_holes\(s, &cs, keep, &out->filled\)\) != AL_OK \x7c\x7c/\tif (/|check.bats|idle slot below a live holder
holders-taken-for-strays|src/strays.c|s/if \(answer\[i\] == 0\)\n\t\t\tst = req_append\(strays,/if (answer[i] != AMQP_NOT_FOUND)\n\t\t\tst = req_append(strays,/|check.bats|^real holders
no-holder-sweep|src/admin.c|s/(static enum al_status sweep_holders\(struct sem \*s, unsigned max, struct sem_change \*out\)\n\{)/$1\n\treturn AL_OK;/|check.bats|swept_holders
mutex-taken-for-stray|src/admin.c|s/if \(answer == 0\) \{\n(\t\t\t\*stray = true;)/if (answer != AMQP_NOT_FOUND) {\n$1/|check.bats|real administrator
lax-names|src/names.c|s/(const char \*names_problem\(const char \*name\)\n\{)/$1\n\treturn NULL;/|hostile.bats|.
leak|src/conn.c|s/amqp_destroy_connection\(c->amqp\);//|valgrind.bats|.
password-shown|src/connect.c|s/"%s:%d", host, info->port/"%s:%s:%d", info->password, host, info->port/|secrets.bats|password
url-to-command|src/cmd_client.c|s/unsetenv\("AMQP_URL"\);//; s/unsetenv\("AMQPLOCK_URL"\);//|secrets.bats|environment
no-wakeup|src/lease.c|s/(if anyone waits\", slot,\n\t\t      s->label\);\n)\t\tst = sem_wake_line\(s\);/$1/|client.bats|wakes a waiting hold
barging|src/take.c|s/: sem_acquire\(s, SEM_TAKE_UNLESS_LINE, slot, max\);/: sem_acquire(s, SEM_TAKE, slot, max);/|line.bats|^-n does not take a free slot
stuck-head-kept|src/take.c|s/if \(now_seconds\(\) - \*free_since >= LINE_STALL\) \{/if (0) {/|line.bats|^a first in line that never takes
stuck-head-answers|src/unstick.c|s/\!= AL_OK \x7c\x7c !free_still \x7c\x7c/!= AL_OK \x7c\x7c 1 \x7c\x7c/|line.bats|takes wake-ups but never a slot
stuck-head-left|src/unstick.c|s/ \x7c\x7c after < before\)/)/|line.bats|^-n does not take a free slot
no-line|src/take.c|s/\tst = sem_find_free\(s, slot, max\);/\treturn sem_acquire(s, SEM_TAKE, slot, max);/|line.bats|^(30 holds|-n does not take a free slot|a first in line that takes wake-ups)
mark-lapse-kept-late|src/line.c|s/\t\ts->hold->place\.lapsed = true;\n//; s/\tif \(s->line == LINE_UP && !s->hold->place\.lapsed &&/\tif (!s->hold->place.lapsed \&\&/|entries.bats|^under an expires policy
line-gone-polls|src/line.c|s/\tif \(code == AMQP_NOT_FOUND &&/\tif (0 \&\&/|entries.bats|deleted under its waiters
entry-missing-ignored|src/line.c|s/if \(st == AL_OK && !found\[0\] && entries_wanted/if (0 \&\& !found[0] \&\& entries_wanted/|entries.bats|deleted under its waiters
timeout-never-killed|src/job.c|s/\tif \(h->timed_out_at\) \{\n\t\tjob_kill\(h\);/\tif (h->timed_out_at) {/|timeout.bats|grandchild that ignores SIGTERM
timeout-own-status|src/hold.c|s/h\.timed_out_at \? HOLD_TIMEOUT_EXIT : h\.code/h.code/|timeout.bats|^a command that ends on SIGTERM
timeout-env-ignored|src/cmd_client.c|s/getenv\("AMQPLOCK_TIMEOUT"\)/NULL/|timeout.bats|^AMQPLOCK_TIMEOUT
token-not-given|src/keeper.c|s/\t\t\tif \(m\.token\)\n\t\t\t\tset_token\(m\.token\);\n//|fencing.bats|^hold --token gives
token-outer-leaks|src/cmd_client.c|s/\tunsetenv\("AMQPLOCK_TOKEN"\);\n//|fencing.bats|^without --token
token-from-zero|src/fencing.c|s/\*token = \(uint64_t\)d\.offset \+ 1;/*token = (uint64_t)d.offset;/|fencing.bats|without its stream
tokens-unchecked|src/check.c|s/(static enum al_status check_tokens\(struct sem \*s, bool repair, struct sem_check \*c\)\n\{)/$1\n\t(void)s, (void)repair, (void)c;\n\treturn AL_OK;/|fencing.bats|without its stream
tokens-kept-by-destroy|src/admin.c|s/return st == AL_OK \? req_ask_one\(s, DELETE_QUEUE, tokens, REFUSED_ACCESS, &refused\) : st;/return st;/|fencing.bats|without its stream
min-hold-until-unsaid|src/hold.c|s/\t\th\.answers\.min_until = [^\n]*\n/\t\t;\n/|holders.bats|until when --min-hold
default-url-waited|src/cmd_client.c|s/\tif \(!r->answered && conn_broker_away\(c\) && cli_url_is_default\(cl->cli\)\)\n\t\treturn false;\n//|cli.bats|empty environment
never-answered-waited|src/cmd_client.c|s/#define NEVER_ANSWERED_LIMIT 60\.0/#define NEVER_ANSWERED_LIMIT 600.0/|cli.bats|never answers
duration-unit-ignored|src/parse.c|s/v = strtod\(s, NULL\) \* unit;/v = strtod(s, NULL);/|cli.bats|durations take a unit
metrics-up-always|src/metrics.c|s/\t\*v = s->up;/\t*v = 1;/|metrics.bats|^status --metrics
status-stops-at-first|src/cmd_look.c|s/(\t\tif \(first == AL_OK\)\n\t\t\tfirst = st;\n)/$1\t\tif (st != AL_OK)\n\t\t\tbreak;\n/|metrics.bats|NAME NAME
evict-gives-back-early|src/evict.c|s/if \(\(\*gone = !holder && !lease\) \x7c\x7c deadline_passed\(until\) \x7c\x7c/if ((*gone = true) \x7c\x7c deadline_passed(until) \x7c\x7c/|evict.bats|^evict ends the whole job
evict-interrupt-unheld|src/evict.c|s/\tsignals_hold_back\(&before\);/\t(void)before;/|evict.bats|^evict interrupted by Ctrl-C
evict-waiters-damaged|src/claim.c|s/\tif \(at_work\)\n\t\treturn fail\(AL_BUSY,/\tif (0)\n\t\treturn fail(AL_BUSY,/|evict.bats|^evict ends the whole job
no-added-wakeups|src/admin.c|s/\t\tst = sem_wake_added\(s, added \+ out->filled\);/\t\t;/|line.bats|^add wakes
orphan-leaves-early|src/hold.c|s/\treturn lose\(h, true\);/\treturn lose(h, false);/|client.bats|counts as an orphan until
no-lease-claim|src/claim.c|s/st = s->hold->lease\.on \? req_lease_send\(s, DECLARE_LEASE, k\) : AL_OK;/st = AL_OK;/; s/\t\tlease_st = req_lease_answer\(s, DECLARE_LEASE, &lease_refused\);\n/\t\t;\n/|lease.bats|^a (newcomer while a holder is away|waiter woken for a freed slot)
no-keeper-lease-end|src/job.c|s/\.last_act = o->lease \? job_end_lease_apart : NULL,/.last_act = NULL,/|lease.bats|^kill -9 of 5 holds
late-lease-deadline|src/rules.c|s/return renewed \+ lease - lease_margin\(lease\);/return renewed + lease + 3.0;/|lease.bats|^a silent partition longer than the lease
drop-ends-job|src/hold.c|s/\tif \(!h->o->lease\)\n\t\treturn lose\(h, false\);/\tif (1)\n\t\treturn lose(h, false);/|lease.bats|^close_connection of every connection
refused-taken-as-free|src/probe.c|s/\t\t\tp\[tag - base - 1\]\.exists = true;/\t\t\tp[tag - base - 1].exists = false;/|client.bats|^a holder queue whose probes are refused
no-holder-settle|src/lease.c|s/now_seconds\(\) - s->hold->lease\.reattached < HOLDER_SETTLE/0/|lease.bats|^a holder queue deleted soon after a re-attach
quorum-lease-unread|src/lease.c|s/\tif \(s->hold->lease\.on && s->lease_quorum\)\n\t\ts->hold->verify_kind\[n\+\+\] = LEASE_QUEUE;\n//|lease.bats|^a quorum lease lasts
quorum-slot-unread|src/lease.c|s/\tif \(s->slots_quorum\)\n\t\ts->hold->verify_kind\[n\+\+\] = SLOT_QUEUE;\n//|check.bats|never takes a held quorum slot
zombie-unseen|src/procs.c|s/\tif \(out->state == 'Z'\)\n\t\tout->state = procs_other_threads\(pid\);\n//|supervisor.bats|^a zombie leader
unsignallable-given-up|src/hold.c|s/if \(!h->not_permitted && h->killed_at/if (h->killed_at/|supervisor.bats|remove says once
handover-unsigned|src/rules.c|s/\tif \(!signed_by_us\)\n\t\treturn "it is not signed by our login";\n//|handover.bats|^a forged offer
handover-own-token|src/handover.c|s/\ts->hold->lease\.token = s->hold->handover\.token;\n//|handover.bats|hands its lease to the first in line
handover-signal-unheld|src/take.c|s/\tsignals_hold_back\(&before\);\n//|handover.bats|^SIGTERM to an asker
handover-ask-waits-out|src/handover.c|s/wait_for\(s, answered_or_moot,/wait_for(s, handed,/|handover.bats|^an offer left in an empty line costs the next waiter
handover-answer-unchecked|src/handover.c|s/strcmp\(id, s->hold->handover\.asked\) == 0 && //|handover.bats|^a forger of our login
handover-no-holder-queue|src/handover.c|s/\tsteps\[n\+\+\] = holder;\n//|handover.bats|lease goes on with its token
handover-late-ask-taken|src/handover.c|s/if \(after > ADOPT_WAIT\) \{/if (0) {/|handover.bats|^a releaser paused
handover-ask-unsigned|src/handover.c|s/\tif \(!conn_is_type\(p, ASK_TYPE\) \x7c\x7c !conn_signed_by_us\(s->conn, p\) \x7c\x7c/\tif (!conn_is_type(p, ASK_TYPE) \x7c\x7c/|permissions.bats|consuming the line
handover-ask-anywhere|src/handover.c|s/\tsem_name_slot\(&s->name, k, HOLDER_QUEUE, holder\);\n\tst = conn_send_note/\tsem_name_slot(&s->name, k, WAITERS_QUEUE, holder);\n\tst = conn_send_note/|handover.bats|^a forged offer of an away
keeper-lets-lease-go|src/job.c|s/\.hold_on = o->lease \? keep_lease_apart : NULL,/.hold_on = NULL,/|supervisor.bats|kill -9 of amqplock keeps its slot
keeper-named-amqplock|src/keeper.c|s/secret_show_as\(KEEPER_NAME\);/secret_show_as("amqplock-keeper");/|supervisor.bats|^pkill
late-claim-counts|src/claim.c|s/if \(rules_claim_void\(took, s->hold->claim_window\)\) \{/if (0) {/|supervisor.bats|^a claim whose answers
leftover-stop-unseen|src/keeper.c|s/ \x7c\x7c \(k->cmd_done && getpgid\(pid\) == k->cmd\)//|supervisor.bats|^Ctrl-Z of a job
few-signals-handled|src/signals.c|s/\tcase SIGKILL:\n/\tcase SIGALRM:\n\tcase SIGPIPE:\n\tcase SIGVTALRM:\n\tcase SIGXCPU:\n\tcase SIGPROF:\n\tcase SIGKILL:\n/|supervisor.bats|^ALRM
continued-by-hand|src/keeper.c|s/\tif \(k->parent_frozen\) \{\n\t\tstop_running\(k\);/\tif (k->parent_frozen) {/|supervisor.bats|^kill -STOP of amqplock, then kill -CONT
stopped-left-stopped|src/job.c|s/super_signal_all_awake\(&h->sv, sig\);/super_signal_all(\&h->sv, sig);/|supervisor.bats|^TERM to amqplock ends a job
no-host-check|src/connect.c|s/set_verify_hostname\(sock, !o->insecure\)/set_verify_hostname(sock, 0)/|secrets.bats|does not name
answers-to-anyone|src/holders.c|s/ \x7c\x7c\n\t    !conn_is_reply_to\(&p->reply_to\)\)/)/|holders.bats|reply_to is a queue
away-ends-wait|src/cmd_client.c|s/\tif \(!conn_broker_away\(c\)\) \{/\tif (1) {/|faults.bats|rides out stop_app
cut-claim-counts|src/claim.c|s/if \(st == AL_CONNECTION && s->hold->lease.on && s->conn->dead &&\n\t\t    !sem_lost_to_lease\(s\)\) \{/if (0) {/|lease.bats|a claim cut by a lost connection is void
pause-forgotten|src/record.c|s/\treturn recorded\(c, sn, 0, paused, known\);/\t*paused = false;\n\treturn AL_OK;/|admin.bats|max NAME 0 pauses
busy-E0-said|src/main.c|s/ \x7c\x7c cli->conflict_exit == 0\)/)/|client.bats|E 0 -n on a full semaphore is silent
minimum-not-kept|src/hold.c|s/if \(!s->conn->dead && job_keep_minimum\(s, &h->end\)\)/if (0)/|cron.bats|min-hold 8 -- true returns at once
keeper-ends-minimum|src/job.c|s/if \(e->apart_open && job_keep_minimum\(&s, e\)\)/if (0)/|cron.bats|kill -9 of a hold during its minimum
minimum-too-long|src/lease.c|s/s->hold->lease.ms = \(unsigned\)\(seconds \* 1000\) \+ 1;/s->hold->lease.ms = (unsigned)(seconds * 2000) + 1;/|cron.bats|min-hold 8 -- true returns at once
create-race-fails|src/cmd_client.c|s/\tif \(st == AL_EXISTS\) \{/\tif (0) {/|cron.bats|racing on a missing name
create-size-ignored|src/cmd_client.c|s/sem_admin\(s, SEM_CREATE, cli->create, &change\)/sem_admin(s, SEM_CREATE, 1, \&change)/|cron.bats|uses it as it is
alarm-ends-wait|src/cmd_client.c|s/\tif \(\*st != AL_BROKER \x7c\x7c !conn_blocked\(c\)/\tif (1/|faults.bats|holds waiting in line ride it out
alarm-wake-as-lease|src/job.c|s/\telse if \(ended\)\n/\telse if (0)\n/|faults.bats|holds waiting in line ride it out
shrink-unsaid|src/admin.c|s/: count_held\(s, target \+ 1, max - target, &held\);/: AL_OK;/|client.bats|how many running holders
stdio-left-closed|src/main.c|s/if \(!standard_fds_open\(&which\)\) \{/if (0) {/|cli.bats|stdin, stdout or stderr closed
drain-not-marked|src/admin.c|s/st = s->opts\.drain \? drain_mark\(s, target \+ 1, max\)/st = s->opts.drain ? AL_OK/|drain.bats|^remove --drain: the removed slot
drain-marker-ignored|src/drain.c|s/\tif \(refused == 0\) \{\n\t\ts->hold->draining/\tif (refused == 0 && 0) {\n\t\ts->hold->draining/|drain.bats|^remove --drain: the removed slot
drain-sweeps-held|src/drain.c|s/if \(st == AL_OK && held\.len == 0\)/if (st == AL_OK)/|drain.bats|^remove --drain: the removed slot
drain-never-ended|src/admin.c|s/if \(!s->opts\.drain && target <= max &&/if (0 \&\& target <= max \&\&/|drain.bats|^a size set without --drain
drain-kept-on-growth|src/admin.c|s/\t\t\tst = drain_unmark\(s, max \+ 1, target\);/\t\t\tst = AL_OK;/|drain.bats|^a plain remove says
draining-unseen|src/look.c|s/\tenum al_status st = scan_draining\(s, max, orphans, draining\);/\tenum al_status st = AL_OK;/|drain.bats|^draining holders far above max
label-unsent|src/holders.c|s/\theader_text\(p, "label", h->label, sizeof\(h->label\)\);\n//|holders.bats|^hold --label and AMQPLOCK_LABEL
waiters-unnamed|src/cmd_look.c|s/\t\twaiter_lines\(cli\);/\t\t;/|holders.bats|^status names the waiters
mark-refused-channel-left|src/line.c|s/\t\tstatus_clear\(\);\n\t\treq_recover\(s\);\n\t\} else if \(!refused\)/\t\tstatus_clear();\n\t} else if (!refused)/|entries.bats|taken by another connection
no-start-passes|src/hold.c|s/if \(st == AL_OK && h\.no_start\[0\]\) \{/if (0) {/|cli.bats|out of descriptors on the way
EOF
}

work=$(mktemp -d "${TMPDIR:-/tmp}/amqplock-mutants.XXXXXX")
cleanup() {
    tests/lib/broker.sh stop "$work/broker"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

tests/lib/broker.sh start "$work/broker" || exit 1
# shellcheck disable=SC1091
. "$work/broker/env"
export AMQPLOCK_TEST_WORK="$work"

caught=0 survived=0
while IFS='|' read -r name file expr suite filter; do
    if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
        continue
    fi
    dir=$work/$name
    mkdir -p "$dir"
    cp -r Makefile src "$dir/"
    if ! perl -0pi -e "$expr" "$dir/$file" || cmp -s "$file" "$dir/$file"; then
        echo "mutant $name: the substitution changed nothing in $file"
        survived=$((survived + 1))
        continue
    fi
    if ! make -s -C "$dir" amqplock WERROR=0 OPT='-O0 -g' >"$dir/build.log" 2>&1 </dev/null; then
        echo "mutant $name: does not build"
        sed 's/^/    /' "$dir/build.log" | tail -5
        survived=$((survived + 1))
        continue
    fi
    # (stdin: the table being read)
    AMQPLOCK_BIN=$dir/amqplock bats --tap --filter "$filter" "tests/$suite" >"$dir/tap" 2>&1 </dev/null
    failed=$(grep -c '^not ok' "$dir/tap")
    ran=$(grep -cE '^(not )?ok' "$dir/tap")
    if [ "$failed" -gt 0 ]; then
        caught=$((caught + 1))
        echo "mutant $name: caught by $failed of $ran tests in $suite:"
        grep '^not ok' "$dir/tap" | sed 's/^not ok [0-9]* /    /'
    else
        survived=$((survived + 1))
        echo "mutant $name: SURVIVED $ran tests in $suite"
    fi
done < <(mutants)
echo "$caught caught, $survived survived"
[ "$survived" -eq 0 ] && [ "$caught" -gt 0 ]
