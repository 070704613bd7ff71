/* A first in line that never takes its turn (sem_unstick_line): a free
 * slot that a woken first waiter leaves free goes to the next. In #line,
 * its entry goes to the back; in #waiters, the line starts again. The
 * line itself, and waking it, are line.c's. */
#include "sem_parts.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"

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
	enum al_status st = look_find_free(s, &max, &free_list, true);

	*free_still = st == AL_OK && req_has(&free_list, slot);
	free(free_list.slot);
	return st;
}

/* #line's first waiter, woken, has not taken a free slot within
 * LINE_TAKE_WAIT: its entry goes to the back of the line (a copy last,
 * then the entry itself acknowledged), and the next one is woken. A
 * stopped waiter keeps a place; it is no longer first. */
static enum al_status pass_entry(struct sem *s, unsigned slot, bool *passed)
{
	char woke[QUEUE_NAME_MAX + 1], line[QUEUE_NAME_MAX + 1];
	char named[QUEUE_NAME_MAX + 1];
	struct conn_got got;
	enum al_status st;
	bool free_still;

	*passed = false;
	if ((st = line_head(s, HEAD_WAKE, 1, NULL, woke)) != AL_OK || !woke[0])
		return st;
	/* Our own entry first: ours is the turn, and the wake-up says so. */
	if (s->hold->place.entered && strcmp(woke, s->hold->place.own) == 0)
		return AL_OK;
	sleep_seconds(LINE_TAKE_WAIT);
	if ((st = still_free(s, slot, &free_still)) != AL_OK || !free_still)
		return st;
	line_entries_queue(s, line);
	if ((st = conn_get(s->conn, line, "queue", named, sizeof(named), &got)) != AL_OK ||
	    !got.tag)
		return st;
	if (strcmp(named, woke) != 0) {
		conn_settle(s->conn, &got, true);
		return AL_OK;
	}
	trace("the first in line of %s (%s) has not taken free slot %u %.1f s after a wake-up "
	      "(stopped, its host frozen, heartbeats off, or not an amqplock); it goes to the "
	      "back of the line",
	      s->label, woke, slot, LINE_TAKE_WAIT);
	if ((st = line_entry_last(s, woke)) == AL_OK)
		conn_settle(s->conn, &got, false);
	*passed = st == AL_OK;
	return st == AL_OK ? line_wake_entries(s, 1, NULL) : st;
}

/* #waiters' first consumer is judged by what it does, not by what it
 * says: anything that consumes the line is its first while it is the
 * oldest consumer, and acknowledging wake-ups is not taking slots (an
 * inspector, a stray script, a stopped amqplock whose wake-ups wait). A
 * slot that is still free half a second after a fresh wake-up, while
 * nobody has left the line (a first in line that took the slot leaves
 * it; its job may already be over), was not taken: the line is deleted,
 * every consumer cancelled, and every waiter takes what it finds.
 * *deleted says whether it was. */
static enum al_status restart_waiters(struct sem *s, unsigned slot, bool *deleted)
{
	char queue[QUEUE_NAME_MAX + 1];
	uint32_t before, after, waiting;
	enum al_status st;
	uint16_t refused;
	bool free_still;

	*deleted = false;
	/* Nobody consumes it (waiters in #line keep it as a mark): none
	 * is stuck there. */
	if ((st = line_counts(s, &before, &waiting)) != AL_OK || before == 0) {
		*deleted = st == AL_OK;
		return st;
	}
	line_waiters_queue(s, queue);
	if ((st = conn_publish_expiring(s->conn, queue, false, NOTICE_EXPIRATION)) != AL_OK)
		return st;
	sleep_seconds(LINE_TAKE_WAIT);
	if ((st = still_free(s, slot, &free_still)) != AL_OK || !free_still || s->line != LINE_UP ||
	    (st = line_counts(s, &after, &waiting)) != AL_OK || after < before)
		return st;
	trace("the first in line of %s has not taken free slot %u %.1f s after a wake-up "
	      "(stopped, its host frozen, heartbeats off, or not an amqplock); starting the "
	      "line again",
	      s->label, slot, LINE_TAKE_WAIT);
	/* Every waiter's consumer is cancelled with it: they take what they
	 * find, and the stuck one too once it runs again. */
	st = req_ask_one(s, DELETE_QUEUE, queue, REFUSED_ACCESS, &refused);
	*deleted = st == AL_OK && refused == 0;
	return st;
}

/* A free slot that the first in line does not take: #line's first entry
 * goes to the back (pass_entry), #waiters starts again
 * (restart_waiters). *restarted: no waiter is left in either line for
 * the slot to wait for. */
enum al_status sem_unstick_line(struct sem *s, bool *restarted)
{
	char found[QUEUE_NAME_MAX + 1] = "";
	enum al_status st;
	unsigned slot;
	bool passed, no_waiters = s->line != LINE_UP;

	*restarted = false;
	if ((st = lowest_free(s, &slot)) != AL_OK || slot == 0)
		return st;
	if (line_entries_wanted(s) && (st = pass_entry(s, slot, &passed)) != AL_OK)
		return st;
	if (s->line == LINE_UP && (st = restart_waiters(s, slot, &no_waiters)) != AL_OK)
		return st;
	if (no_waiters && line_entries_wanted(s))
		st = line_head(s, HEAD_FIND, 1, NULL, found);
	*restarted = st == AL_OK && no_waiters && !found[0];
	return st;
}
