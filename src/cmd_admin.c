/* create, destroy, add, remove, max and check: the administration half
 * (status and list are cmd_look.c's). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "out.h"
#include "sem.h"
#include "signals.h"

/* "%lu slot" or "%lu slots", then `after`. */
#define SLOTS(n, after) ((n) == 1 ? "%lu slot" after : "%lu slots" after)

/* The same keys in the same order for every change: ok, semaphore,
 * previous, max. */
static void print_change(struct cli *cli, enum sem_admin_op op, const struct sem_change *ch)
{
	out_begin();
	out_bool("ok", true);
	switch (op) {
	case SEM_CREATE:
		out_str("semaphore", "created %s: ", cli->name);
		out_uint("previous", NULL, ch->previous);
		out_uint("max", SLOTS(ch->max, "\n"), ch->max);
		break;
	case SEM_DESTROY:
		out_str("semaphore", "destroyed %s: had ", cli->name);
		out_uint("previous", SLOTS(ch->previous, "\n"), ch->previous);
		out_uint("max", NULL, ch->max);
		break;
	default:
		out_str("semaphore", "%s: ", cli->name);
		out_uint("previous", "%lu -> ", ch->previous);
		out_uint("max", SLOTS(ch->max, "\n"), ch->max);
		break;
	}
	if (ch->swept)
		out_uint("swept", NULL, ch->swept);
	if (ch->swept_holders)
		out_uint("swept_holders", NULL, ch->swept_holders);
	if (ch->filled)
		out_uint("filled", NULL, ch->filled);
	if (ch->finished)
		out_bool("finished", true);
	if (ch->ended_holders)
		out_uint("ended_holders", NULL, ch->ended_holders);
	if (ch->draining_holders)
		out_uint("draining_holders", NULL, ch->draining_holders);
}

/* A warning line on stderr, if count (its first argument) is not 0. */
__attribute__((format(printf, 2, 3))) static void warn_if(unsigned count, const char *fmt, ...)
{
	char warning[1024]; /* two names of NAME_MAX_BYTES, and the words */
	va_list ap;

	if (count == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(warning, sizeof(warning), fmt, ap);
	va_end(ap);
	out_error_line(warning);
}

/* Refused at the admin mutex, the first thing every change declares
 * (and evict): a user of the client or inspector role, not a broken
 * broker. */
static void admin_refused(enum al_status st, const char *command, const char *does)
{
	if (st == AL_ACCESS)
		fail_context(st,
			     "%s %s, which this user may not do (it needs the admin role's "
			     "configure permission; see PERMISSIONS in amqplock(1)): ",
			     command, does);
}

/* Every administrative command is this: connect, change under the admin
 * mutex, report. */
static enum al_status admin(struct cli *cli, enum sem_admin_op op, unsigned n)
{
	struct sem_change ch;
	struct conn c;
	struct sem s;
	enum al_status st;

	if ((st = cli_connect(cli, &c, &s, deadline_never())) != AL_OK)
		return st;
	st = sem_admin(&s, op, n, &ch);
	conn_close(&c);
	admin_refused(st, cli->command_name, "changes a semaphore");
	if (ch.swept)
		trace("deleted %u stray slot queue(s) above slot %u", ch.swept, ch.previous);
	if (ch.swept_holders)
		trace("deleted %u stray holder queue(s)", ch.swept_holders);
	if (st != AL_OK)
		return st;
	/* A create stopped halfway, finished: what was missing. */
	warn_if(ch.finished,
		"finished %s, a create stopped halfway: made its %u missing slot queue(s) and "
		"recorded slot 1",
		cli->name, ch.filled);
	/* Slots the broker had lost (an expires policy, say): worth a line,
	 * as the cause will strike again. */
	warn_if(ch.finished ? 0 : ch.filled,
		"warning: made %u missing slot queue(s) of %s again (an expires policy on its "
		"queues? see amqplock check)",
		ch.filled, cli->name);
	/* The change is made, but each of these keeps its slot from ever
	 * being taken: worth a line, as --insecure's warning is. */
	warn_if(ch.strays_kept,
		"warning: %u stray slot queue(s) of %s above max left alone: a holder holds "
		"each (see amqplock status, orphans)",
		ch.strays_kept, cli->name);
	/* Jobs about to be signalled on hosts the administrator may not be
	 * watching: say so, and how to know when they have ended. A holder
	 * looks for its slot queue about once a second, and runs on if it is
	 * back by then (max N 0 and max 1 at once). */
	warn_if(ch.ended_holders,
		ch.ended_holders == 1
			? "%u running holder of %s will lose its slot unless the slot is back "
			  "when it next looks (within a second): its job is then signalled and "
			  "ends (amqplock wait %s returns once it has)"
			: "%u running holders of %s will lose their slots unless the slots are "
			  "back when they next look (within a second): their jobs are then "
			  "signalled and end (amqplock wait %s returns once they have)",
		ch.ended_holders, cli->name, cli->name);
	/* --drain: the jobs run on; how to know when they have ended. */
	warn_if(cli->sem.drain ? ch.draining_holders : 0,
		ch.draining_holders == 1
			? "%u running holder of %s drains: its job runs on to its end, and "
			  "nobody gets its slot meanwhile (amqplock wait %s returns once it has "
			  "ended)"
			: "%u running holders of %s drain: their jobs run on to their end, and "
			  "nobody gets their slots meanwhile (amqplock wait %s returns once they "
			  "have ended)",
		ch.draining_holders, cli->name, cli->name);
	warn_if(ch.holders_kept,
		"warning: %u stray holder queue(s) of %s could not be deleted (refused by the "
		"broker); see amqplock check",
		ch.holders_kept, cli->name);
	print_change(cli, op, &ch);
	return out_end();
}

/* Whom it evicted, and how long its job took to end. */
enum al_status cmd_evict(struct cli *cli, int argc, char **argv)
{
	struct deadline until = cli->hold.nonblock    ? deadline_in(0)
				: cli->hold.wait >= 0 ? deadline_in(cli->hold.wait)
						      : deadline_never();
	struct sem_eviction ev;
	struct conn c;
	struct sem s;
	enum al_status st;
	char doing[300];
	unsigned k;

	(void)argc;
	if ((st = cli_count(argv[1], "slot", 1, SLOTS_MAX, &k)) != AL_OK)
		return st;
	/* A signal ends evict at once until the slot queue is deleted, and
	 * once it is back (sem_evict holds it back in between). */
	snprintf(doing, sizeof(doing),
		 "while evicting slot %u of %s: its slot queue is in place; a holder that has "
		 "looked ends its job, and keeps the slot until it has",
		 k, cli->name);
	out_interrupt_prepare(cli->name, doing);
	signals_exit_on_interrupt(out_interrupted);
	if ((st = cli_connect(cli, &c, &s, deadline_never())) != AL_OK)
		return st;
	st = sem_evict(&s, k, until, &ev);
	conn_close(&c);
	admin_refused(st, "evict", "ends another's job");
	if (st != AL_OK)
		return st;
	out_begin();
	out_bool("ok", true);
	out_str("semaphore", "evicted %s", cli->name);
	out_uint("slot", " slot %lu: ", k);
	/* As status names holders: a list, empty if it did not answer. */
	out_list_begin("holders");
	if (ev.named) {
		out_item_begin();
		out_uint("slot", NULL, k);
		out_str("host", "held by %s", ev.holder.host);
		out_uint("pid", " pid %lu", (unsigned long)ev.holder.pid);
		out_str("since", " since %s", ev.holder.since);
		out_str("command", " (%s); ", ev.holder.command);
		out_item_end();
	}
	out_list_end();
	out_uint("waited_ms", "its job ended %lu ms after, and the slot is free again\n",
		 (unsigned long)(ev.waited * 1000));
	return out_end();
}

static enum al_status optional_count(int argc, char **argv, unsigned *n)
{
	*n = 1;
	if (argc < 2)
		return AL_OK;
	return cli_count(argv[1], "COUNT", 1, SLOTS_MAX, n);
}

enum al_status cmd_create(struct cli *cli, int argc, char **argv)
{
	unsigned n;
	enum al_status st = cli_count(argv[1], "SLOTS", 1, SLOTS_MAX, &n);

	(void)argc;
	return st != AL_OK ? st : admin(cli, SEM_CREATE, n);
}

enum al_status cmd_destroy(struct cli *cli, int argc, char **argv)
{
	(void)argc, (void)argv;
	return admin(cli, SEM_DESTROY, 0);
}

enum al_status cmd_add(struct cli *cli, int argc, char **argv)
{
	unsigned n;
	enum al_status st = optional_count(argc, argv, &n);

	return st != AL_OK ? st : admin(cli, SEM_ADD, n);
}

enum al_status cmd_remove(struct cli *cli, int argc, char **argv)
{
	unsigned n;
	enum al_status st = optional_count(argc, argv, &n);

	return st != AL_OK ? st : admin(cli, SEM_REMOVE, n);
}

enum al_status cmd_max(struct cli *cli, int argc, char **argv)
{
	struct conn c;
	struct sem s;
	enum al_status st;
	bool paused = false;
	unsigned n;

	if (argc > 1) {
		if ((st = cli_count(argv[1], "N", 0, SLOTS_MAX, &n)) != AL_OK)
			return st;
		return admin(cli, SEM_SET_MAX, n);
	}
	if ((st = cli_connect(cli, &c, &s, deadline_never())) != AL_OK)
		return st;
	st = sem_max(&s, &n);
	if (st == AL_OK && n == 0 && (st = sem_paused(&s, &paused)) == AL_OK && !paused)
		st = fail(AL_NOT_FOUND, "semaphore %s does not exist", s.label);
	conn_close(&c);
	if (st != AL_OK)
		return st;
	out_begin();
	out_bool("ok", true);
	out_str("semaphore", NULL, cli->name);
	out_uint("max", "%lu\n", n);
	out_bool("paused", paused);
	return out_end();
}

/* The names scripts see in JSON. */
static const char *problem_name(enum sem_problem_kind kind)
{
	switch (kind) {
	case SEM_STRAY_MUTEX:
		return "stray_mutex";
	case SEM_STRAY_SLOT:
		return "stray_slot";
	case SEM_EXCLUSIVE_SLOT:
		return "exclusive_slot";
	case SEM_MIXED_TYPE:
		return "mixed_type";
	case SEM_STRAY_HOLDER:
		return "stray_holder";
	case SEM_MISSING_MARKER:
		return "missing_marker";
	case SEM_STRAY_MARKER:
		return "stray_marker";
	case SEM_MISSING_SLOT:
		return "missing_slot";
	case SEM_STRAY_PAUSE:
		return "stray_pause";
	case SEM_UNRECORDED:
		return "unrecorded";
	case SEM_UNFINISHED:
		return "unfinished";
	case SEM_MISSING_TOKENS:
		return "missing_tokens";
	}
	return "unknown";
}

/* What became of a problem, for people: deleting repairs the strays; the
 * rest need someone else. */
static const char *verdict(const struct sem_problem *p, unsigned max)
{
	if (p->repaired && p->kind == SEM_UNFINISHED)
		return max > 0 ? "finished" : "taken off";
	if (p->repaired)
		return p->kind == SEM_MISSING_MARKER || p->kind == SEM_MISSING_SLOT ||
				       p->kind == SEM_MISSING_TOKENS
			       ? "made again"
		       : p->kind == SEM_UNRECORDED ? "written"
						   : "deleted";
	if (p->kind == SEM_MIXED_TYPE)
		return "cannot be repaired, recreate the semaphore";
	if (p->kind == SEM_EXCLUSIVE_SLOT)
		return "cannot be repaired, the connection that owns it must close";
	return "not repaired";
}

/* A create stopped halfway: what it left, and what finishes it. */
static void print_unfinished(struct cli *cli, const struct sem_check *ck,
			     const struct sem_problem *p, const char *exchange)
{
	char text[NAME_MAX_BYTES * 2 + 160];

	if (ck->max == 0) {
		/* Stopped while writing the record: count is its top. */
		out_uint("count", "slots 2..%lu recorded", p->count);
		snprintf(text, sizeof(text),
			 ", slot 1 and every slot queue not: a create stopped while writing its "
			 "size record (%s does not exist; amqplock create %s N makes it)",
			 cli->name, cli->name);
		out_str(NULL, "%s", text);
		return;
	}
	out_str("exchange", "slot 1 not recorded (%s, an exchange), ", exchange);
	out_uint("count", "%lu", p->count);
	snprintf(text, sizeof(text),
		 " of %u slot queues not made: a create stopped halfway (amqplock create %s %u "
		 "finishes it)",
		 ck->max, cli->name, ck->max);
	out_str(NULL, "%s", text);
}

/* One item of the problems list; in text, one line. */
static void print_problem(struct cli *cli, const struct sem *s, const struct sem_check *ck,
			  const struct sem_problem *p)
{
	char queue[QUEUE_NAME_MAX + 1];

	sem_problem_queue(s, p, queue);
	out_item_begin();
	out_str(NULL, "%s: ", cli->name);
	out_str("kind", NULL, problem_name(p->kind));
	if (p->slot > 0)
		out_uint("slot", "slot %lu: ", p->slot);
	switch (p->kind) {
	case SEM_STRAY_MUTEX:
		out_str("queue", "admin mutex %s is a leftover shared queue", queue);
		break;
	case SEM_STRAY_SLOT:
		out_str("queue", "stray slot queue %s", queue);
		out_uint(NULL, " above max %lu", ck->max);
		break;
	case SEM_EXCLUSIVE_SLOT:
		out_str("queue", "slot queue %s is exclusive to a connection", queue);
		break;
	case SEM_MIXED_TYPE:
		out_str("queue", "slot queue %s", queue);
		out_str("type", " is %s", sem_slot_type_name(p->type));
		out_str(NULL, ", the others %s", sem_slot_type_name(ck->slot_type));
		break;
	case SEM_STRAY_HOLDER:
		out_str("queue", "stray holder queue %s, held by no connection", queue);
		break;
	case SEM_MISSING_MARKER:
		out_str("queue", "quorum marker %s is missing: leases are not replicated", queue);
		break;
	case SEM_STRAY_MARKER:
		out_str("queue", "quorum marker %s, but the slots are not quorum queues", queue);
		break;
	case SEM_MISSING_TOKENS:
		out_str("queue", "stream of fencing tokens %s is missing: hold --token is refused",
			queue);
		break;
	case SEM_MISSING_SLOT:
		out_str("queue", "slot queue %s is gone (an expires policy, or deleted by hand?)",
			queue);
		break;
	case SEM_STRAY_PAUSE:
		out_str("exchange", "pause marker %s (an exchange) beside ", queue);
		out_uint(NULL,
			 SLOTS(ck->max, ", not paused (a pause or resume stopped halfway, or an "
					"older amqplock's create?)"),
			 ck->max);
		break;
	case SEM_UNRECORDED:
		out_str(NULL,
			"no size record (made by amqplock 0.2 or older): its max is lost with "
			"its top slot queues",
			NULL);
		break;
	case SEM_UNFINISHED:
		print_unfinished(cli, ck, p, queue);
		break;
	}
	out_bool("repaired", p->repaired);
	out_str(NULL, ": %s\n", verdict(p, ck->max));
	out_item_end();
}

/* The text format for the number of problems. */
static const char *counted(size_t problems)
{
	if (problems == 0)
		return ", no problems";
	return problems == 1 ? ", %lu problem" : ", %lu problems";
}

enum al_status cmd_check(struct cli *cli, int argc, char **argv)
{
	struct sem_check ck;
	struct conn c;
	struct sem s;
	enum al_status st;
	char message[256];
	size_t i, left;

	(void)argc, (void)argv;
	if ((st = cli_connect(cli, &c, &s, deadline_never())) != AL_OK)
		return st;
	st = sem_check(&s, cli->repair, &ck);
	conn_close(&c);
	if (st == AL_OK && ck.max == 0 && ck.len == 0 && !ck.paused)
		st = fail(AL_NOT_FOUND, "semaphore %s does not exist", cli->name);
	if (st != AL_OK) {
		sem_check_free(&ck);
		return st;
	}
	left = ck.len - ck.repaired;
	if (!cli->repair)
		snprintf(message, sizeof(message),
			 "%s is damaged: %zu problem%s (check --repair repairs what it can)",
			 cli->name, left, left == 1 ? "" : "s");
	else
		snprintf(message, sizeof(message),
			 "%s is damaged: %zu of %zu problem%s not repaired", cli->name, left,
			 ck.len, ck.len == 1 ? "" : "s");
	/* In text: a line per problem, then the verdict. */
	out_begin();
	out_bool("ok", left == 0);
	out_str("semaphore", NULL, cli->name);
	out_uint("max", NULL, ck.max);
	out_bool("paused", ck.paused);
	if (ck.typed)
		out_str("slot_type", NULL, sem_slot_type_name(ck.slot_type));
	out_list_begin("problems");
	for (i = 0; i < ck.len; i++)
		print_problem(cli, &s, &ck, &ck.problem[i]);
	out_list_end();
	out_uint("repaired", NULL, ck.repaired);
	out_slots("orphans", NULL, ck.orphans.slot, ck.orphans.len);
	out_str(NULL, "checked %s: ", cli->name);
	out_uint(NULL, SLOTS(ck.max, ""), ck.max);
	if (ck.typed)
		out_str(NULL, " (%s)", sem_slot_type_name(ck.slot_type));
	out_str(NULL, ck.paused ? "%s" : NULL, ", paused");
	out_uint(NULL, counted(ck.len), ck.len);
	out_uint(NULL, cli->repair && ck.len > 0 ? ", %lu repaired" : NULL, ck.repaired);
	out_slots(NULL, ck.orphans.len > 0 ? "; holders above max: %s" : NULL, ck.orphans.slot,
		  ck.orphans.len);
	out_str(NULL, "%s\n", "");
	if (left > 0) {
		out_str("error", NULL, status_name(AL_DAMAGED));
		out_str("message", NULL, message);
	}
	if (st == AL_OK)
		st = out_end();
	sem_check_free(&ck);
	if (st != AL_OK || left == 0)
		return st;
	/* The verdict above was the JSON error object; this is the line. */
	out_error_line(message);
	cli->reported = true;
	return AL_DAMAGED;
}
