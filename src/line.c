/* The line of waiters (the #waiters queue): joining it, waking its first
 * waiter, leaving it, and restarting it behind a first in line that
 * never takes its turn. */
#include "sem_parts.h"

#include "clock.h"

/* The waiters queue of the semaphore: its line (see sem_watch_releases). */
static void waiters_queue(const struct sem *s, char *buf)
{
	sem_name_slot(&s->name, 1, WAITERS_QUEUE, buf);
}

/* The line's waiters queue as a passive declare sees it: how many clients
 * are in the line (its consumers) and how many wake-ups wait undelivered
 * (none of either if there is no such queue, or we may not look). */
static enum al_status line_counts(struct sem *s, uint32_t *waiters, uint32_t *waiting)
{
	char queue[QUEUE_NAME_MAX + 1];
	struct queue_request r;
	enum al_status st;
	amqp_method_t m;

	*waiters = *waiting = 0;
	waiters_queue(s, queue);
	s->conn->reply_code = 0;
	st = conn_send(s->conn, AMQP_QUEUE_DECLARE_METHOD,
		       queue_request(s, &r, DECLARE_PASSIVE, queue));
	if (st == AL_OK && (st = conn_expect(s->conn, r.ok, &m)) == AL_OK) {
		*waiters = ((amqp_queue_declare_ok_t *)m.decoded)->consumer_count;
		*waiting = ((amqp_queue_declare_ok_t *)m.decoded)->message_count;
	}
	return conn_answer(s->conn, st, REFUSED_NOT_FOUND | REFUSED_ACCESS, NULL, "checking",
			   queue);
}

static enum al_status count_waiters(struct sem *s, uint32_t *waiters)
{
	uint32_t waiting;

	return line_counts(s, waiters, &waiting);
}

/* Whether a newcomer must queue behind others: free slots are theirs
 * first. The probe of find_free said whether the line exists and takes
 * messages; whether anyone is in it takes one more round trip, only
 * then. */
enum al_status line_ahead(struct sem *s, bool *ahead)
{
	uint32_t waiters = 0;
	enum al_status st = s->line == LINE_UP ? count_waiters(s, &waiters) : AL_OK;

	*ahead = s->behind_line = waiters > 0;
	if (*ahead)
		trace("%u clients wait for a slot of %s; queueing behind them", (unsigned)waiters,
		      s->label);
	return st;
}

/* The line: one queue per semaphore that its waiters consume from, with
 * a single active consumer, so that the broker keeps them in the order
 * they joined and gives every wake-up (a release's, a poller's) to the
 * oldest alone. docs/design.md, "Waiters in line", says why it cannot
 * stall. */
enum al_status sem_watch_releases(struct sem *s)
{
	char queue[QUEUE_NAME_MAX + 1];

	if (s->line == LINE_DOWN)
		return AL_BROKER;
	waiters_queue(s, queue);
	return conn_subscribe(s->conn, queue);
}

enum al_status sem_wake_line(struct sem *s)
{
	char queue[QUEUE_NAME_MAX + 1];

	waiters_queue(s, queue);
	return conn_notify(s->conn, queue);
}

void sem_leave_line(struct sem *s)
{
	char queue[QUEUE_NAME_MAX + 1];

	waiters_queue(s, queue);
	conn_unsubscribe(s->conn, queue);
}

/* How long a wake-up may wait undelivered before the first in line counts
 * as stuck: a live one takes each within milliseconds (it holds one at a
 * time, only while it claims). */
#define LINE_TAKE_WAIT 0.5

enum al_status sem_unstick_line(struct sem *s, bool *restarted)
{
	char queue[QUEUE_NAME_MAX + 1];
	uint32_t waiters, waiting;
	enum al_status st;
	uint16_t refused;

	struct probe line = {.kind = WAITERS_QUEUE, .slot = 1};

	*restarted = false;
	if ((st = sem_wake_line(s)) != AL_OK)
		return st;
	sleep_seconds(LINE_TAKE_WAIT);
	/* The probe also takes the wake-up's confirm, which a passive
	 * declare's answer must not meet first. */
	if ((st = probe_queues(s->conn, &s->name, &line, 1)) != AL_OK)
		return st;
	note_line(s, &line);
	if (s->line != LINE_UP || (st = line_counts(s, &waiters, &waiting)) != AL_OK ||
	    waiting == 0)
		return st;
	waiters_queue(s, queue);
	trace("the first in line of %s has not taken a free slot (%u wake-ups wait for it: "
	      "stopped, its host frozen, heartbeats off?); starting the line again",
	      s->label, (unsigned)waiting);
	/* Every waiter's consumer is cancelled with it: they take what they
	 * find, and the stuck one too once it runs again. */
	st = ask_one(s, DELETE_QUEUE, queue, REFUSED_ACCESS, &refused);
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
	note_line(s, &line);
	if (s->line == LINE_UP)
		st = count_waiters(s, &waiters);
	if (st == AL_OK && waiters > 0)
		trace("%u clients wait for a slot of %s; waking %u", (unsigned)waiters, s->label,
		      added < waiters ? added : (unsigned)waiters);
	for (i = 0; st == AL_OK && i < added && i < waiters; i++)
		st = sem_wake_line(s);
	return st;
}
