/* The line of waiters: joining it, waking its first waiter, leaving it,
 * keeping it (its mark, and #line found gone). Two queues make
 * it: #line, where a waiter's place is an entry naming a queue of its own
 * (semaphores of more than one slot: docs/design.md, "A line for N
 * slots"), and #waiters, the single-active-consumer line that one-slot
 * semaphores and amqplock 0.4 and older wait in, and newer ones when the
 * broker refuses them #line. #waiters is also the mark that anyone may
 * wait: waiters in #line keep it there (sem_line_keep), and who finds no
 * #waiters asks nothing of #line. A wake-up goes to both. */
#include "sem_parts.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"

/* The type of an entry in #line. */
#define ENTRY_TYPE "amqplock.entry"
/* How many waiters one call wakes at most (slots added at once). */
#define WAKES_MAX 16

/* The waiters queue of the semaphore: its line (see sem_join_line). */
void line_waiters_queue(const struct sem *s, char *buf)
{
	sem_name_slot(&s->name, 1, WAITERS_QUEUE, buf);
}

void line_entries_queue(const struct sem *s, char *buf)
{
	sem_name_slot(&s->name, 1, LINE_QUEUE, buf);
}

/* The line's waiters queue as a passive declare sees it: how many clients
 * are in the line (its consumers) and how many wake-ups wait undelivered
 * (none of either if there is no such queue, or we may not look). */
enum al_status line_counts(struct sem *s, uint32_t *waiters, uint32_t *waiting)
{
	char queue[QUEUE_NAME_MAX + 1];

	line_waiters_queue(s, queue);
	return req_ask_counts(s, queue, waiters, waiting);
}

static enum al_status count_waiters(struct sem *s, uint32_t *waiters)
{
	uint32_t waiting;

	return line_counts(s, waiters, &waiting);
}

/* --- the entries of #line ----------------------------------------------- */

/* How often a waiter in #line declares #waiters again (its expiry is a
 * minute): the mark that someone waits. */
#define LINE_KEEP 20.0

/* Whether #line may have entries to look at: someone may wait (#waiters
 * is there), no look at #line on this connection found it missing or
 * refused, and either the semaphore has more than one slot (one-slot
 * waiters wait in #waiters) or we wait in #line ourselves. */
static bool entries_wanted(const struct sem *s)
{
	return s->line == LINE_UP && !s->no_entries &&
	       (s->max_seen != 1 || (s->hold && s->hold->place.entered));
}

/* An entry that names queue, last in #line (the place of a waiter that
 * did not take its turn, or of one whose entry went with #line). */
enum al_status line_entry_last(struct sem *s, const char *queue)
{
	char line[QUEUE_NAME_MAX + 1];
	amqp_table_entry_t e = {
		.key = amqp_cstring_bytes("queue"),
		.value = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = amqp_cstring_bytes(queue)}};
	amqp_table_t headers = {.num_entries = 1, .entries = &e};
	struct conn_note n = {.queue = line,
			      .type = ENTRY_TYPE,
			      .correlation_id = "",
			      .headers = &headers,
			      .main = true};

	line_entries_queue(s, line);
	return conn_send_note(s->conn, &n);
}

/* #line is gone (an expires policy took it, or a delete by hand), and
 * every entry with it: a waiter in it enters it again (last of those
 * who find it gone); refused that, it waits by looking, as when #waiters
 * is deleted under its consumers. Others ask no more of it on this
 * connection, nor if it is not ours to read (403). */
static void line_gone(struct sem *s, uint16_t code)
{
	char line[QUEUE_NAME_MAX + 1];
	uint16_t refused;

	s->no_entries = true;
	if (!s->hold || !s->hold->place.entered)
		return;
	line_entries_queue(s, line);
	if (code == AMQP_NOT_FOUND &&
	    req_ask_one(s, DECLARE_SLOT, line, REFUSED_ACCESS | REFUSED_MISMATCH, &refused) ==
		    AL_OK &&
	    !refused && line_entry_last(s, s->hold->place.own) == AL_OK) {
		s->no_entries = false;
		trace("%s was gone, our place with it (an expires policy?); entered it again",
		      line);
		return;
	}
	status_clear();
	trace("our place in %s is gone; polling instead", line);
	conn_consume_end(s->conn, NULL);
}

static void note_get(struct sem *s, const struct conn_got *got)
{
	if (got->refused)
		line_gone(s, got->refused);
}

/* One entry's waiter told, mandatory: *there is false if its queue is
 * gone (the broker returned the message). A wake-up lives as long as
 * any notice; a find is a probe, which stays nowhere. */
static enum al_status tell_entry(struct sem *s, const char *queue, enum head_act act, bool *there)
{
	enum al_status st = act == HEAD_WAKE
				    ? conn_publish_expiring(s->conn, queue, true, NOTICE_EXPIRATION)
				    : conn_publish_probe(s->conn, queue);

	return st == AL_OK ? conn_note_routed(s->conn, there) : st;
}

/* The head of #line, taken entry by entry (basic.get, unacknowledged):
 * an entry that names no waiter's queue of this semaphore, or a queue
 * that is gone, or `skip` (ours, as we leave), is acknowledged and so
 * gone; the oldest `n` others (at most WAKES_MAX) are told (act), held
 * until all are found (one put back would be the next get's again), and
 * put back in their places. found (QUEUE_NAME_MAX + 1 bytes, or NULL)
 * gets the first one's queue, "" if none. */
enum al_status line_head(struct sem *s, enum head_act act, unsigned n, const char *skip,
			 char *found)
{
	char line[QUEUE_NAME_MAX + 1], named[QUEUE_NAME_MAX + 1];
	struct conn_got held[WAKES_MAX];
	enum al_status st = AL_OK;
	unsigned told = 0, i, passed = 0;
	bool there;

	if (found)
		found[0] = '\0';
	if (n > WAKES_MAX)
		n = WAKES_MAX;
	line_entries_queue(s, line);
	while (st == AL_OK && told < n && passed < ENTRIES_PASSED_MAX) {
		if ((st = conn_get(s->conn, line, "queue", named, sizeof(named), &held[told])) !=
			    AL_OK ||
		    !held[told].tag) {
			note_get(s, &held[told]);
			break;
		}
		there = false;
		if (sem_name_is_waiter(&s->name, named, strlen(named)) &&
		    !(skip && strcmp(named, skip) == 0))
			st = tell_entry(s, named, act, &there);
		if (st == AL_OK && there) {
			if (found && told == 0)
				memcpy(found, named, sizeof(named));
			told++;
		} else {
			/* Unsure (no answer): back in place, as a closed
			 * channel would put it. */
			conn_settle(s->conn, &held[told], st != AL_OK);
			passed++;
		}
	}
	for (i = 0; i < told; i++)
		conn_settle(s->conn, &held[i], true);
	if (st == AL_OK && passed > 0)
		trace("passed %u entries of waiters gone in %s", passed, line);
	return st;
}

enum al_status line_wake_entries(struct sem *s, unsigned n, const char *skip)
{
	return line_head(s, HEAD_WAKE, n, skip, NULL);
}

/* --- joining and leaving ------------------------------------------------ */

/* Whether a newcomer must queue behind others: free slots are theirs
 * first. The probe of look_find_free said whether #waiters exists and
 * takes messages; whether anyone is in line takes one more round trip or
 * two, only then: the consumers of #waiters, and the head of #line
 * (entries whose waiter has gone passed on the way). */
enum al_status line_ahead(struct sem *s, bool *ahead)
{
	char found[QUEUE_NAME_MAX + 1] = "";
	uint32_t waiters = 0;
	enum al_status st = s->line == LINE_UP ? count_waiters(s, &waiters) : AL_OK;

	if (st == AL_OK && waiters == 0 && entries_wanted(s))
		st = line_head(s, HEAD_FIND, 1, NULL, found);
	*ahead = s->hold->behind_line = waiters > 0 || found[0];
	if (waiters > 0)
		trace("%u clients wait for a slot of %s; queueing behind them", (unsigned)waiters,
		      s->label);
	else if (found[0])
		trace("others wait for a slot of %s; queueing behind them", s->label);
	return st;
}

enum al_status line_up(struct sem *s, bool *up)
{
	struct probe line = {.kind = WAITERS_QUEUE, .slot = 1};
	enum al_status st = AL_OK;

	if (s->line != LINE_UP && (st = probe_queues(s->conn, &s->name, &line, 1)) == AL_OK)
		look_note_line(s, &line);
	*up = st == AL_OK && s->line == LINE_UP;
	return st;
}

bool line_entries_wanted(const struct sem *s)
{
	return entries_wanted(s);
}

/* The type of the message that passes the turn (sem_leave_line). */
#define TURN_TYPE "amqplock.turn"

/* A probe's expiration: "0" (conn_publish_probe). */
static bool is_probe(const amqp_basic_properties_t *p)
{
	return (p->_flags & AMQP_BASIC_EXPIRATION_FLAG) && p->expiration.len == 1 &&
	       *(const char *)p->expiration.bytes == '0';
}

static void forget_wake(struct sem *s)
{
	s->hold->place.wake_tag = 0;
	s->hold->place.offer = false;
}

/* Something delivered from the line, whatever was being read: it says
 * that we are first in line (only the first of #waiters gets anything;
 * in #line, a wake-up or an offer comes to the oldest entry). It is a
 * wake-up (a lease offered is one too) unless its header says it is a
 * probe (RabbitMQ 3.10 and 4.0 hand an expiring message to a ready
 * consumer) or the turn passed on, or the ear says it is a note (of a
 * hand-over): those are acknowledged at once, so that they hold nothing
 * up. */
static void delivered(void *owner, uint64_t tag, const amqp_basic_properties_t *props)
{
	struct sem *s = owner;
	enum line_heard heard = HEARD_NOTE;

	s->hold->place.first = true;
	if (!is_probe(props) && !conn_is_type(props, TURN_TYPE))
		heard = s->hold->place.ear ? s->hold->place.ear(s, tag, props) : HEARD_WAKE;
	if (heard == HEARD_NOTE)
		conn_ack(s->conn, tag);
	else if (heard != HEARD_TAKEN) {
		s->hold->place.wake_tag = tag;
		s->hold->place.offer = heard == HEARD_OFFER;
	}
}

static void left_line(void *owner, enum conn_consumer_end why)
{
	struct sem *s = owner;

	s->hold->place.first = false;
	s->hold->place.entered = false;
	forget_wake(s);
	if (why == CONSUMER_CANCELLED)
		trace("the line was deleted; polling instead");
	else if (why == CONSUMER_REFUSED)
		trace("notifications refused; polling instead");
}

/* Our place in #line: a queue of our own, consumed, and an entry naming
 * it, last in #line (made if it is not there: durable, no arguments). We
 * are first if no entry was before ours. */
static enum al_status enter(struct sem *s, const struct conn_consumer *hooks)
{
	char line[QUEUE_NAME_MAX + 1], mark[QUEUE_NAME_MAX + 1];
	amqp_table_t arguments = req_waiters_arguments();
	struct conn_entry e = {.own = s->hold->place.own,
			       .mark = mark,
			       .line = line,
			       .type = ENTRY_TYPE,
			       .mark_arguments = &arguments};
	uint32_t ahead = 0;
	enum al_status st;

	line_entries_queue(s, line);
	line_waiters_queue(s, mark);
	sem_name_waiter(&s->name, (unsigned long long)sem_lease_token(), s->hold->place.own);
	if ((st = conn_enter(s->conn, &e, hooks, &ahead)) != AL_OK)
		return st;
	s->line = LINE_UP;
	s->no_entries = false;
	s->hold->place.entered = true;
	s->hold->place.kept = now_seconds();
	s->hold->place.first = ahead == 0;
	trace("waiting on %s, our place in %s", s->hold->place.own, line);
	return AL_OK;
}

/* The line: our entry in #line, or (one slot, or the broker refused us
 * #line) a consumer of #waiters, with a single active consumer, so that
 * the broker keeps them in the order they joined and gives every wake-up
 * (a release's, a poller's) to the oldest alone. docs/design.md,
 * "Waiters in line", says why it cannot stall. */
enum al_status sem_join_line(struct sem *s, sem_line_ear ear)
{
	/* A line: the broker gives its messages to one consumer at a time,
	 * the oldest, and passes them on to the next when that one leaves
	 * (in the order they came) or dies, unacknowledged ones included. */
	amqp_table_t table = req_waiters_arguments();
	struct conn_consumer hooks = {.delivered = delivered, .ended = left_line, .owner = s};
	char queue[QUEUE_NAME_MAX + 1];
	enum al_status st;
	bool alone;

	if (conn_consuming(s->conn))
		return AL_OK;
	s->hold->place.first = false;
	s->hold->place.entered = false;
	forget_wake(s);
	s->hold->place.ear = ear;
	/* One slot: #waiters, whose hand-over is a round trip shorter (the
	 * offer goes with the question whether anyone waits; #line's needs
	 * the entry first), and has only ever one offer to make at a time. */
	if (s->max_seen != 1 && !s->hold->entries_refused && s->line != LINE_DOWN) {
		if ((st = enter(s, &hooks)) == AL_OK || s->conn->dead)
			return st;
		line_entries_queue(s, queue);
		trace("the broker refused us a place in %s: waiting as amqplock 0.4 did", queue);
		s->hold->entries_refused = true;
		status_clear();
		req_recover(s);
	}
	if (s->line == LINE_DOWN)
		return fail(AL_BROKER, "the line of %s is on a node that is down", s->label);
	line_waiters_queue(s, queue);
	st = conn_consume(s->conn, queue, &table, &hooks, &alone);
	/* Nobody consumed before us: we are first. */
	if (st == AL_OK && alone)
		s->hold->place.first = true;
	if (st == AL_OK)
		trace("waiting on %s", queue);
	return st;
}

bool sem_in_line(const struct sem *s)
{
	return conn_consuming(s->conn);
}

bool sem_first_in_line(const struct sem *s)
{
	return s->hold->place.first;
}

bool sem_woken(const struct sem *s)
{
	return s->hold->place.wake_tag != 0;
}

void sem_wake_done(struct sem *s)
{
	if (s->hold->place.wake_tag && conn_consuming(s->conn))
		conn_ack(s->conn, s->hold->place.wake_tag);
	forget_wake(s);
}

/* Declares #waiters again, the mark that anyone may wait (see
 * sem_line_keep). #line is left alone: a declare of it would wait for
 * ever if its node is down (RabbitMQ 4.0 answers none), and a probe
 * would stay in it, behind the entries, until it reached the head; one
 * that an expires policy took is found at the next wake (line_gone). */
static void keep_mark(struct sem *s)
{
	char queue[QUEUE_NAME_MAX + 1];
	uint16_t refused;

	s->hold->place.kept = now_seconds();
	line_waiters_queue(s, queue);
	if (req_ask_one(s, DECLARE_WAITERS, queue, REFUSED_ACCESS | REFUSED_MISMATCH, &refused) !=
	    AL_OK) {
		trace("could not declare %s again: %s", queue, status_message());
		status_clear();
		req_recover(s);
	} else if (!refused)
		s->line = LINE_UP;
}

/* Wakes the oldest waiter of each line: #waiters takes an expiring
 * message (its first consumer gets it, or nobody), #line wakes its
 * oldest entry's waiter, if anyone may be in it (#waiters probed if no
 * look of ours has found it yet: a newcomer may have come since). A
 * waiter in #line that finds the mark gone puts it back first. */
static enum al_status wake_lines(struct sem *s, unsigned n, const char *skip, char *found)
{
	struct probe p = {.kind = WAITERS_QUEUE, .slot = 1};
	char queue[QUEUE_NAME_MAX + 1];
	enum al_status st;
	unsigned i;

	line_waiters_queue(s, queue);
	for (i = 0, st = AL_OK; st == AL_OK && i < n && i < WAKES_MAX; i++)
		st = conn_publish_expiring(s->conn, queue, false, NOTICE_EXPIRATION);
	if (st == AL_OK && s->line != LINE_UP && s->max_seen != 1 &&
	    (st = probe_queues(s->conn, &s->name, &p, 1)) == AL_OK)
		look_note_line(s, &p);
	if (st == AL_OK)
		sem_line_keep(s);
	return st == AL_OK && entries_wanted(s) ? line_head(s, HEAD_WAKE, n, skip, found) : st;
}

enum al_status sem_wake_line(struct sem *s)
{
	char found[QUEUE_NAME_MAX + 1] = "";
	enum al_status st = wake_lines(s, 1, NULL, found);

	/* We wait in #line and found no entry there, not even ours: it went
	 * with a #line that someone made again since (see line_gone). */
	if (st == AL_OK && !found[0] && entries_wanted(s) && s->hold && s->hold->place.entered) {
		trace("our entry is missing from the line of %s; entering it again", s->label);
		if ((st = line_entry_last(s, s->hold->place.own)) == AL_OK)
			st = line_wake_entries(s, 1, NULL);
	}
	return st;
}

/* Our entry, left behind: acknowledged if it is the first (the usual
 * place of one that leaves: it was woken, or is the only one), else put
 * back where it was, for a later look at the head to pass. */
static enum al_status drop_own(struct sem *s, const char *own)
{
	char line[QUEUE_NAME_MAX + 1], named[QUEUE_NAME_MAX + 1];
	struct conn_got got;
	enum al_status st;

	line_entries_queue(s, line);
	if ((st = conn_get(s->conn, line, "queue", named, sizeof(named), &got)) == AL_OK && got.tag)
		conn_settle(s->conn, &got, strcmp(named, own) != 0);
	return st;
}

void sem_leave_line(struct sem *s, bool with_slot)
{
	char queue[QUEUE_NAME_MAX + 1], own[QUEUE_NAME_MAX + 1];
	struct conn_message turn = {
		.queue = queue, .expiration = NOTICE_EXPIRATION, .type = TURN_TYPE};
	bool first = s->hold->place.first, entered = s->hold->place.entered;
	bool woken = s->hold->place.wake_tag != 0, had = status_message()[0] != '\0';
	enum al_status st = AL_OK;

	line_waiters_queue(s, queue);
	memcpy(own, s->hold->place.own, sizeof(own));
	/* Our own queue goes with its consumer, and what it held. If we
	 * were first in #waiters, the next is told that it is first now (the
	 * message is no wake-up). */
	conn_consume_end(s->conn, first && !entered ? &turn : NULL);
	s->hold->place.first = false;
	s->hold->place.entered = false;
	forget_wake(s);
	if (!entered || s->conn->dead)
		return;
	/* Leaving #line with a wake-up we did not use, the next is woken
	 * (our entry passed on the way); without a slot, our entry goes if
	 * it is first. With a slot, it is left for whoever looks next: a
	 * round trip here would come before our command. */
	if (woken)
		st = wake_lines(s, 1, own, NULL);
	else if (!with_slot)
		st = drop_own(s, own);
	if (st != AL_OK) {
		trace("could not leave %s tidy: %s", own, status_message());
		status_clear_unless(had);
	}
}

enum al_status sem_wake_added(struct sem *s, unsigned added)
{
	struct probe line = {.kind = WAITERS_QUEUE, .slot = 1};
	char queue[QUEUE_NAME_MAX + 1];
	uint32_t waiters = 0;
	enum al_status st;
	unsigned i;

	/* Only a line that takes messages is asked how long it is. */
	if ((st = probe_queues(s->conn, &s->name, &line, 1)) != AL_OK)
		return st;
	look_note_line(s, &line);
	if (s->line == LINE_UP)
		st = count_waiters(s, &waiters);
	if (st == AL_OK && waiters > 0)
		trace("%u clients wait for a slot of %s; waking %u", (unsigned)waiters, s->label,
		      added < waiters ? added : (unsigned)waiters);
	line_waiters_queue(s, queue);
	for (i = 0; st == AL_OK && i < added && i < waiters; i++)
		st = conn_publish_expiring(s->conn, queue, false, NOTICE_EXPIRATION);
	/* The line of entries, whatever the slots now: its waiters came
	 * when there were more than one, or none (paused). */
	if (st == AL_OK && s->line == LINE_UP && !s->no_entries)
		st = line_wake_entries(s, added, NULL);
	return st;
}

/* Declares #waiters again, now and then, while we wait in #line: the
 * mark that anyone may wait, which expires a minute after it was last
 * used. A look that finds it gone (an expires policy shorter than
 * LINE_KEEP took it) puts it back at once, and from then on at every
 * look: releasers that find no mark wake nobody. */
void sem_line_keep(struct sem *s)
{
	if (!s->hold || !s->hold->place.entered || s->line == LINE_DOWN)
		return;
	if (s->line == LINE_ABSENT && !s->hold->place.lapsed) {
		trace("the mark that anyone waits for %s has lapsed (an expires policy?); "
		      "declaring it at every look",
		      s->label);
		s->hold->place.lapsed = true;
	}
	if (s->line == LINE_UP && !s->hold->place.lapsed &&
	    now_seconds() - s->hold->place.kept < LINE_KEEP)
		return;
	keep_mark(s);
}
