/* What the lock clients tell while they wait and hold (news.h). */
#include "news.h"

#include <stdio.h>
#include <unistd.h>

#include "out.h"

void news_event(struct client *cl, const char *name)
{
	out_begin();
	out_str("event", NULL, name);
	out_str("semaphore", NULL, cl->cli->name);
	out_uint("slot", NULL, cl->slot);
}

void news_lost(void *arg)
{
	struct client *cl = arg;

	out_error_line(status_message());
	news_event(cl, "lost");
	out_str("reason", NULL, status_message());
	out_end();
	cl->cli->reported = true;
}

void news_notice(void *arg, const char *name, const char *key, unsigned long ms, const char *text)
{
	struct client *cl = arg;

	if (!cl->cli->quiet)
		out_error_line(text);
	news_event(cl, name);
	out_uint(key, NULL, ms);
	out_str("message", NULL, text);
	out_end();
}

void news_warning(void *arg, const char *text)
{
	(void)arg;
	out_error_line(text);
}

/* Whether to tell a person at a terminal how a wait goes: never on a
 * pipe (cron mails stay quiet), nor with -q or --json. */
static bool telling(const struct client *cl)
{
	return !cl->cli->quiet && out_for_people() && isatty(STDERR_FILENO);
}

/* A wait longer than a second is news: a "waiting" event once, and for a
 * person at a terminal one line, rewritten in place, that says for what
 * and how long (never on a pipe: cron mails stay quiet). */
void news_waiting(void *arg, unsigned max, double waited)
{
	struct client *cl = arg;
	char held[NAME_MAX_BYTES + 64];

	if (waited >= 0 && !cl->waiting_told) {
		cl->waiting_told = true;
		out_begin();
		out_str("event", NULL, "waiting");
		out_str("semaphore", NULL, cl->cli->name);
		out_uint("max", NULL, max);
		out_end();
	}
	if (!telling(cl))
		return;
	if (waited < 0) {
		if (cl->waiting_line)
			fputs("\r\033[K", stderr);
		cl->waiting_line = false;
		return;
	}
	sem_all_held(held, sizeof(held), max, cl->cli->name);
	/* Back to the line's start, and the rest of the old one erased. */
	fprintf(stderr, "\ramqplock: waiting, %s (%u s)\033[K", held, (unsigned)waited);
	cl->waiting_line = true;
}

/* At a terminal, once per outage: the broker is away, and amqplock
 * tries again (until `until`: how long it has left, and why no longer). */
void news_away(struct client *cl, struct deadline until, const char *why)
{
	if (!telling(cl))
		return;
	if (deadline_is_never(until))
		fprintf(stderr, "amqplock: %s; trying again until it answers\n", status_message());
	else
		fprintf(stderr, "amqplock: %s; trying again for up to %.0f s (%s)\n",
			status_message(), deadline_left(until), why);
}

/* At a terminal, when a connection is made again after news_away. */
void news_back(struct client *cl, const struct conn *c)
{
	if (telling(cl))
		fprintf(stderr, "amqplock: connected to %s again; waiting for %s %s\n", c->where,
			cl->waiting_for, cl->cli->name);
}

/* At a terminal, what a hold still waits for once its command has
 * exited: a prompt that does not come back says why. */
void news_remaining(void *arg, const char *what)
{
	struct client *cl = arg;

	if (telling(cl))
		fprintf(stderr, "amqplock: waiting for %s\n", what);
}

void news_alarm(struct client *cl, const struct conn *c, struct deadline until)
{
	if (telling(cl) && deadline_is_never(until))
		fprintf(stderr,
			"amqplock: the broker at %s is under a resource alarm (%s); waiting "
			"for it to clear\n",
			c->where, conn_blocked(c));
	else if (telling(cl))
		fprintf(stderr,
			"amqplock: the broker at %s is under a resource alarm (%s); waiting for it "
			"to clear, for up to %.0f s (-w)\n",
			c->where, conn_blocked(c), deadline_left(until));
}

void news_alarm_over(struct client *cl, const struct conn *c)
{
	if (telling(cl))
		fprintf(stderr,
			"amqplock: the resource alarm at %s has cleared; waiting for %s %s\n",
			c->where, cl->waiting_for, cl->cli->name);
}
