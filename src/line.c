/* The line of waiters (the #waiters queue): joining it, waking its first
 * waiter, leaving it, and restarting it behind a first in line that
 * never takes its turn. */
#include "sem_parts.h"

#include <stdlib.h>

#include "clock.h"

/* The waiters queue of the semaphore: its line (see sem_join_line). */
void line_waiters_queue(const struct sem *s, char *buf)
{
	sem_name_slot(&s->name, 1, WAITERS_QUEUE, buf);
}

/* The line's waiters queue as a passive declare sees it: how many clients
 * are in the line (its consumers) and how many wake-ups wait undelivered
 * (none of either if there is no such queue, or we may not look). */
static enum al_status line_counts(struct sem *s, uint32_t *waiters, uint32_t *waiting)
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

/* Whether a newcomer must queue behind others: free slots are theirs
 * first. The probe of look_find_free said whether the line exists and takes
 * messages; whether anyone is in it takes one more round trip, only
 * then. */
enum al_status line_ahead(struct sem *s, bool *ahead)
{
	uint32_t waiters = 0;
	enum al_status st = s->line == LINE_UP ? count_waiters(s, &waiters) : AL_OK;

	*ahead = s->hold->behind_line = waiters > 0;
	if (*ahead)
		trace("%u clients wait for a slot of %s; queueing behind them", (unsigned)waiters,
		      s->label);
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

/* The type of the message that passes the turn (sem_leave_line). */
#define TURN_TYPE "amqplock.turn"

/* A probe's expiration: "0" (conn_publish_probe). */
static bool is_probe(const amqp_basic_properties_t *p)
{
	return (p->_flags & AMQP_BASIC_EXPIRATION_FLAG) && p->expiration.len == 1 &&
	       *(const char *)p->expiration.bytes == '0';
}

/* Something delivered from the line, whatever was being read: it says
 * that we are first in line (only the first gets anything). It is a
 * wake-up (a lease offered is one too) unless its header says it is a
 * newcomer's probe of the line (RabbitMQ 3.10 and 4.0 hand an expiring
 * message to a ready consumer) or the turn passed on, or the ear says it
 * is a note (of a hand-over): those are acknowledged at once, so that
 * they hold nothing up. */
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
	s->hold->place.wake_tag = 0;
	s->hold->place.offer = false;
	if (why == CONSUMER_CANCELLED)
		trace("the line was deleted; polling instead");
	else if (why == CONSUMER_REFUSED)
		trace("notifications refused; polling instead");
}

/* The line: one queue per semaphore that its waiters consume from, with
 * a single active consumer, so that the broker keeps them in the order
 * they joined and gives every wake-up (a release's, a poller's) to the
 * oldest alone. docs/design.md, "Waiters in line", says why it cannot
 * stall. */
enum al_status sem_join_line(struct sem *s, sem_line_ear ear)
{
	/* Durable (RabbitMQ 4.3 refuses new transient shared queues), gone
	 * a minute after its last consumer, and a line: the broker gives
	 * its messages to one consumer at a time, the oldest, and passes
	 * them on to the next when that one leaves (in the order they came)
	 * or dies, unacknowledged ones included. */
	amqp_table_entry_t arguments[] = {
		{.key = amqp_cstring_bytes("x-expires"),
		 .value = {.kind = AMQP_FIELD_KIND_I32, .value.i32 = 60000}},
		{.key = amqp_cstring_bytes("x-single-active-consumer"),
		 .value = {.kind = AMQP_FIELD_KIND_BOOLEAN, .value.boolean = 1}},
	};
	amqp_table_t table = {.num_entries = 2, .entries = arguments};
	struct conn_consumer hooks = {.delivered = delivered, .ended = left_line, .owner = s};
	char queue[QUEUE_NAME_MAX + 1];
	enum al_status st;
	bool alone;

	if (s->line == LINE_DOWN)
		return AL_BROKER;
	if (conn_consuming(s->conn))
		return AL_OK;
	s->hold->place.first = false;
	s->hold->place.wake_tag = 0;
	s->hold->place.offer = false;
	s->hold->place.ear = ear;
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
	s->hold->place.wake_tag = 0;
	s->hold->place.offer = false;
}

enum al_status sem_wake_line(struct sem *s)
{
	char queue[QUEUE_NAME_MAX + 1];

	line_waiters_queue(s, queue);
	return conn_publish_expiring(s->conn, queue, NOTICE_EXPIRATION);
}

void sem_leave_line(struct sem *s)
{
	char queue[QUEUE_NAME_MAX + 1];
	struct conn_message turn = {
		.queue = queue, .expiration = NOTICE_EXPIRATION, .type = TURN_TYPE};
	bool first = s->hold->place.first;

	line_waiters_queue(s, queue);
	/* If we were first in line, the next is told that it is first now
	 * (the message is no wake-up). */
	conn_consume_end(s->conn, first ? &turn : NULL);
	s->hold->place.first = false;
	s->hold->place.wake_tag = 0;
	s->hold->place.offer = false;
}

/* How long the first in line has, once woken, to take a free slot before
 * it counts as stuck: a live one claims within milliseconds of its
 * wake-up. */
#define LINE_TAKE_WAIT 0.5

/* The lowest free slot (0: none), as a waiter sees it. */
static enum al_status lowest_free(struct sem *s, unsigned *slot)
{
	struct slot_list free_list = {0};
	unsigned max;
	enum al_status st = look_find_free(s, &max, &free_list, true);

	*slot = st == AL_OK && free_list.len ? free_list.slot[0] : 0;
	free(free_list.slot);
	return st;
}

/* Whether slot is still free: among the free ones. */
static enum al_status still_free(struct sem *s, unsigned slot, bool *free_still)
{
	struct slot_list free_list = {0};
	unsigned max;
	size_t i;
	enum al_status st = look_find_free(s, &max, &free_list, true);

	*free_still = false;
	for (i = 0; st == AL_OK && i < free_list.len; i++)
		*free_still = *free_still || free_list.slot[i] == slot;
	free(free_list.slot);
	return st;
}

/* The first in line is judged by what it does, not by what it says:
 * anything that consumes the line is its first while it is the oldest
 * consumer, and acknowledging wake-ups is not taking slots (an inspector,
 * a stray script, a stopped amqplock whose wake-ups wait). A slot that is
 * still free half a second after a fresh wake-up, while nobody has left
 * the line (a first in line that took the slot leaves it; its job may
 * already be over), was not taken: the line is deleted, every consumer
 * cancelled, and every waiter takes what it finds. */
enum al_status sem_unstick_line(struct sem *s, bool *restarted)
{
	char queue[QUEUE_NAME_MAX + 1];
	uint32_t before, after, waiting;
	enum al_status st;
	uint16_t refused;
	unsigned slot;
	bool free_still;

	*restarted = false;
	if ((st = lowest_free(s, &slot)) != AL_OK || slot == 0 || s->line != LINE_UP ||
	    (st = line_counts(s, &before, &waiting)) != AL_OK)
		return st;
	if ((st = sem_wake_line(s)) != AL_OK)
		return st;
	sleep_seconds(LINE_TAKE_WAIT);
	if ((st = still_free(s, slot, &free_still)) != AL_OK || !free_still || s->line != LINE_UP ||
	    (st = line_counts(s, &after, &waiting)) != AL_OK || after < before)
		return st;
	line_waiters_queue(s, queue);
	trace("the first in line of %s has not taken free slot %u %.1f s after a wake-up "
	      "(stopped, its host frozen, heartbeats off, or not an amqplock); starting the "
	      "line again",
	      s->label, slot, LINE_TAKE_WAIT);
	/* Every waiter's consumer is cancelled with it: they take what they
	 * find, and the stuck one too once it runs again. */
	st = req_ask_one(s, DELETE_QUEUE, queue, REFUSED_ACCESS, &refused);
	*restarted = st == AL_OK && refused == 0;
	return st;
}

enum al_status sem_wake_added(struct sem *s, unsigned added)
{
	struct probe line = {.kind = WAITERS_QUEUE, .slot = 1};
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
	for (i = 0; st == AL_OK && i < added && i < waiters; i++)
		st = sem_wake_line(s);
	return st;
}
