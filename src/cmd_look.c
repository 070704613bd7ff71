/* status and list: a semaphore's state for people, for scripts (JSON)
 * and for Prometheus (--metrics, metrics.c's text). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "clock.h"
#include "list.h"
#include "metrics.h"
#include "out.h"
#include "sem.h"

/* How long status waits for the management API to name the waiters. */
#define WAITERS_SECONDS 1.5

/* A list of slots: in JSON the array; in text its count first, out of
 * `of` (0: no total), then the slots, so that a script can read the count
 * and a person the slots: "2 of 5: 1 3", "0 of 5", "1: 7". */
static void slot_line(const char *key, const char *text_fmt, const struct slot_list *l, unsigned of)
{
	char head[32], *text;
	size_t i, used;

	out_slots(key, NULL, l->slot, l->len);
	if (!text_fmt || !out_for_people())
		return;
	if (of)
		snprintf(head, sizeof(head), "%zu of %u", l->len, of);
	else
		snprintf(head, sizeof(head), "%zu", l->len);
	/* A slot is at most 5 digits and a space. */
	text = malloc(sizeof(head) + 2 + 6 * l->len);
	if (!text) {
		out_str(NULL, text_fmt, head);
		return;
	}
	used = (size_t)sprintf(text, "%s%s", head, l->len ? ":" : "");
	for (i = 0; i < l->len; i++)
		used += (size_t)sprintf(text + used, " %u", l->slot[i]);
	out_str(NULL, text_fmt, text);
	free(text);
}

static bool in_list(const struct slot_list *l, unsigned slot)
{
	size_t i;

	for (i = 0; i < l->len; i++)
		if (l->slot[i] == slot)
			return true;
	return false;
}

/* A holder's age, from its `since` (whole seconds, UTC); -1 if that
 * cannot be read. */
static double holder_age(const struct sem_holder *who, time_t now)
{
	struct tm tm;
	time_t t;

	memset(&tm, 0, sizeof(tm));
	if (!strptime(who->since, UTC_TEXT_FORMAT, &tm) || (t = timegm(&tm)) == (time_t)-1)
		return -1;
	return now > t ? (double)(now - t) : 0;
}

/* Each held slot on a line of its own: its holder as it described itself
 * (JSON: the list "holders"), held by its lease alone (no holder
 * connected), or unnamed (it did not answer). */
static void holder_lines(const struct sem_status *ss)
{
	static const char alone[] = "slot %lu: held by its lease alone (its holder away, or "
				    "a --min-hold after its job ended)\n";
	static const char unnamed[] = "slot %lu: held, its holder unnamed (away, or no answer)\n";
	size_t i, h = 0;

	out_list_begin("holders");
	for (i = 0; i < ss->held.len; i++) {
		unsigned slot = ss->held.slot[i];
		const struct sem_holder *who = NULL;
		double age;

		while (h < ss->holders_len && ss->holders[h].slot < slot)
			h++;
		if (h < ss->holders_len && ss->holders[h].slot == slot)
			who = &ss->holders[h];
		if (!who) {
			out_uint(NULL, in_list(&ss->away, slot) ? alone : unnamed, slot);
			continue;
		}
		out_item_begin();
		out_uint("slot", "slot %lu: held by ", slot);
		out_str("host", "%s", who->host);
		out_uint("pid", " pid %lu", (unsigned long)who->pid);
		out_str("since", " since %s", who->since);
		if ((age = holder_age(who, time(NULL))) >= 0)
			out_uint("age_seconds", NULL, (unsigned long)age);
		out_str("command", " (%s", who->command);
		if (who->label[0])
			out_str("label", ", \"%s\"", who->label);
		out_str(NULL, ")", "");
		if (who->until[0])
			out_str("min_hold_until", ", kept until %s by --min-hold", who->until);
		out_str(NULL, "\n", NULL);
		out_item_end();
	}
	out_list_end();
}

/* One semaphore's status, looked at again if the broker's side of the
 * connection crashed (cli_look_again). */
static enum al_status read_status(struct cli *cli, struct sem_status *ss)
{
	struct conn c;
	struct sem s;
	enum al_status st;
	int tries = 0;
	bool again;

	do {
		if ((st = cli_connect(cli, &c, &s, deadline_never())) != AL_OK)
			return st;
		st = sem_status(&s, ss);
		conn_close(&c);
		again = cli_look_again(&c, st, &tries);
		if (again)
			sem_status_free(ss);
	} while (again);
	return st;
}

/* Who waits: the line itself does not say (its entries are read by
 * taking them), the management API's lists of consumers and connections
 * do, once they have seen the connection (the plugin's statistics
 * interval, 5 s by default). Without the API: said, not a failure. */
static void waiter_lines(struct cli *cli)
{
	struct list_waiters w;
	char since[32];
	size_t i;

	if (cli_waiters(cli, deadline_in(WAITERS_SECONDS), &w) != AL_OK) {
		out_bool("waiters_named", false);
		out_str(NULL, "waiters    not named (%s)\n", status_message());
		status_clear();
		return;
	}
	out_bool("waiters_named", true);
	out_list_begin("waiters");
	for (i = 0; i < w.len; i++) {
		utc_text((time_t)w.w[i].connected_at, since, sizeof(since));
		out_item_begin();
		out_str("host", "waiter     %s", w.w[i].host);
		out_uint("pid", " pid %lu", (unsigned long)w.w[i].pid);
		out_str("since", " since %s", since);
		if (w.w[i].label[0])
			out_str("label", " (\"%s\")", w.w[i].label);
		out_str(NULL, "\n", "");
		out_item_end();
	}
	out_list_end();
	list_waiters_free(&w);
}

static enum al_status print_status(struct cli *cli, const struct sem_status *ss)
{
	out_begin();
	out_bool("ok", true);
	out_str("semaphore", "semaphore  %s\n", cli->name);
	out_uint("max", ss->paused ? "max        %lu" : "max        %lu\n", ss->max);
	out_str(NULL, ss->paused ? " (paused: amqplock max %s N resumes it)\n" : NULL, cli->name);
	out_bool("paused", ss->paused);
	slot_line("held", "held       %s\n", &ss->held, ss->max);
	out_uint("held_count", NULL, ss->held.len);
	holder_lines(ss);
	/* Leased, their holders away: reconnecting, or gone for good (then
	 * free when the lease runs out). */
	slot_line("away", ss->away.len ? "away       %s\n" : NULL, &ss->away, 0);
	/* Their holder queue or lease is on a node that is down: held until
	 * it returns (or is forgotten), to be safe. */
	slot_line("unreachable", ss->unreachable.len ? "unreachable %s\n" : NULL, &ss->unreachable,
		  0);
	slot_line("free", "free       %s\n", &ss->free, ss->max);
	out_uint("free_count", NULL, ss->free.len);
	/* In line; clients that fell back to polling are not counted. */
	if (ss->waiting_known)
		out_uint("waiting", "waiting    %lu\n", ss->waiting);
	else
		out_str(NULL, "waiting    %s\n", "unknown (the line could not be read)");
	if (!cli->sem.no_names && (ss->waiting || !ss->waiting_known))
		waiter_lines(cli);
	slot_line("orphans", "orphans    %s\n", &ss->orphans, 0);
	/* Orphans whose jobs run on: a --drain shrink removed their slots. */
	slot_line("draining", ss->draining.len ? "draining   %s" : NULL, &ss->draining, 0);
	if (ss->draining.len)
		out_str(NULL, " (removed by a --drain shrink: the jobs run on to their end)\n", "");
	/* Taken by nobody and takeable by nobody until an administrator
	 * makes them again. */
	slot_line("missing", ss->missing.len ? "missing    %s" : NULL, &ss->missing, ss->max);
	if (ss->missing.len)
		out_str(NULL,
			" (slot queues gone: an expires policy, deleted by hand, or a create "
			"stopped halfway? amqplock check --repair %s makes them)\n",
			cli->name);
	return out_end();
}

/* A status as --metrics counts it: the oldest named holder's age. */
static struct metrics_sem metrics_of(const char *name, const struct sem_status *ss, bool up)
{
	struct metrics_sem m = {.name = name, .up = up, .oldest_age = -1};
	time_t now = time(NULL);
	double age;
	size_t i;

	if (!up)
		return m;
	m.max = ss->max;
	m.held = (unsigned)ss->held.len;
	m.free = (unsigned)ss->free.len;
	m.away = (unsigned)ss->away.len;
	m.unreachable = (unsigned)ss->unreachable.len;
	m.missing = (unsigned)ss->missing.len;
	m.draining = (unsigned)ss->draining.len;
	m.paused = ss->paused;
	m.waiting_known = ss->waiting_known;
	m.waiting = ss->waiting;
	for (i = 0; i < ss->holders_len; i++)
		if ((age = holder_age(&ss->holders[i], now)) > m.oldest_age)
			m.oldest_age = age;
	return m;
}

/* The metrics text, printed as one piece of text output. */
static enum al_status print_metrics(const struct metrics_sem *m, size_t n, enum metrics_view view)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return fail(AL_INTERNAL, "out of memory");
	metrics_write(f, m, n, view);
	if (fclose(f) != 0) {
		free(text);
		return fail(AL_INTERNAL, "out of memory");
	}
	out_begin();
	out_str(NULL, "%s", text);
	free(text);
	return out_end();
}

/* Each NAME in turn. With several, a failure of one is said at once and
 * the others are still looked at; one of the connection (the broker, the
 * login, memory) would be the same for every name left: the looking
 * stops there. The first failure is the exit status. --metrics prints
 * every name at the end, amqplock_up 0 for one that failed or was not
 * looked at. */
enum al_status cmd_status(struct cli *cli, int argc, char **argv)
{
	struct metrics_sem *m = NULL;
	struct sem_status ss;
	enum al_status st = AL_OK, first = AL_OK;
	bool printed = false, whole = false;
	int i, j;

	if (cli->metrics && cli->json)
		return fail(AL_USAGE, "give --json or --metrics, not both");
	if (cli->metrics && !(m = calloc((size_t)argc, sizeof(*m))))
		return fail(AL_INTERNAL, "out of memory");
	for (i = 0; i < argc && !whole; i++) {
		memset(&ss, 0, sizeof(ss));
		if ((st = cli_check_name(cli, argv[i])) == AL_OK)
			st = read_status(cli, &ss);
		if (m)
			m[i] = metrics_of(argv[i], &ss, st == AL_OK);
		else if (st == AL_OK) {
			if (printed)
				out_str(NULL, "%s", "\n");
			printed = true;
			st = print_status(cli, &ss);
		}
		sem_status_free(&ss);
		if (st == AL_OK)
			continue;
		whole = st == AL_CONNECTION || st == AL_ACCESS || st == AL_INTERNAL;
		if (first == AL_OK)
			first = st;
		/* main says the last one, unless one was said before it */
		if (argc > 1 && (!whole || cli->reported)) {
			out_error(st, argv[i], status_message());
			cli->reported = true;
			status_clear();
		}
	}
	for (j = i; m && j < argc; j++)
		m[j] = (struct metrics_sem){.name = argv[j], .oldest_age = -1};
	if (m) {
		st = print_metrics(m, (size_t)argc, METRICS_STATUS);
		free(m);
	}
	return first != AL_OK ? first : st;
}

/* list --metrics: what the management API counts, for every semaphore. */
static enum al_status list_metrics(struct sem_list *l)
{
	struct metrics_sem *m = calloc(l->len ? l->len : 1, sizeof(*m));
	enum al_status st;
	size_t i;

	if (!m) {
		list_free(l);
		return fail(AL_INTERNAL, "out of memory");
	}
	for (i = 0; i < l->len; i++)
		m[i] = (struct metrics_sem){.name = l->sem[i].name,
					    .up = true,
					    .max = l->sem[i].max,
					    .held = l->sem[i].held,
					    .waiting_known = true,
					    .waiting = l->sem[i].waiting,
					    .oldest_age = -1};
	st = print_metrics(m, l->len, METRICS_LIST);
	free(m);
	list_free(l);
	return st;
}

/* In text a table, its first column as wide as the longest name. */
enum al_status cmd_list(struct cli *cli, int argc, char **argv)
{
	char name_fmt[32];
	struct sem_list l;
	enum al_status st;
	size_t i, width = 9;

	(void)argc, (void)argv;
	if (cli->metrics && cli->json)
		return fail(AL_USAGE, "give --json or --metrics, not both");
	if ((st = cli_list(cli, deadline_never(), &l)) != AL_OK)
		return st;
	if (cli->metrics)
		return list_metrics(&l);
	for (i = 0; i < l.len; i++)
		if (strlen(l.sem[i].name) > width)
			width = strlen(l.sem[i].name);
	snprintf(name_fmt, sizeof(name_fmt), "%%-%zus", width);
	out_begin();
	out_bool("ok", true);
	out_str("prefix", NULL, cli->prefix);
	if (l.len) {
		out_str(NULL, name_fmt, "SEMAPHORE");
		out_str(NULL, "  %5s  HELD  WAITING\n", "MAX");
	}
	out_list_begin("semaphores");
	for (i = 0; i < l.len; i++) {
		out_item_begin();
		out_str("semaphore", name_fmt, l.sem[i].name);
		out_uint("max", "  %5lu", l.sem[i].max);
		out_uint("held", "  %4lu", l.sem[i].held);
		out_uint("waiting", "  %7lu\n", l.sem[i].waiting);
		out_item_end();
	}
	out_list_end();
	out_str(NULL, l.len ? NULL : "no semaphores under prefix \"%s\"\n", cli->prefix);
	list_free(&l);
	return out_end();
}
