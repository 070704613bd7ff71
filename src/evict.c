/* Evicting the holder of one slot (sem_evict, `amqplock evict`;
 * docs/design.md, "Evicting a holder"), under the admin mutex: the slot
 * queue is deleted, which its holder takes for a removed slot at its next
 * verification (within a second): it signals its job, and keeps its
 * holder queue, and its lease, until the last process of the job has
 * gone. Once neither is left the slot queue is made again, of its type,
 * and the line woken. Nobody can take the slot meanwhile: a claim checks
 * the slot queue, and the holder queue and the lease are still there.
 * Given up waiting (-w), the slot queue is made again all the same, after
 * NOTICE_WAIT at least: a holder that has looked meanwhile is winding
 * down, and keeps the slot until it is done. A terminating signal (an
 * operator's Ctrl-C on a long wait) is held back from the mutex on and
 * gives up the wait the same way: it ends amqplock only once the slot
 * queue is back, where it once left the slot without one. */
#include "sem_parts.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "rules.h"
#include "signals.h"

/* How long a connected holder may take to look at its slot and find its
 * slot queue gone: a verification's interval, and its answer. The slot
 * queue stays deleted at least that long, whatever -w says. */
#define NOTICE_WAIT (RULES_VERIFY_INTERVAL + 1.0)

/* Whether slot k has a holder queue or a lease. */
static enum al_status slot_taken(struct sem *s, unsigned k, bool *holder, bool *lease)
{
	enum al_status st = probe_slots(s->conn, &s->name, HOLDER_QUEUE, k, 1, holder, NULL);

	return st == AL_OK ? probe_slots(s->conn, &s->name, LEASE_QUEUE, k, 1, lease, NULL) : st;
}

/* Who holds slot k, as it says (status's question); out->named false if
 * it does not answer (away, older, or not allowed to read its queue). */
static void name_holder(struct sem *s, unsigned k, bool away, struct sem_eviction *out)
{
	unsigned slot = k;
	struct sem_status ss = {.held = {.slot = &slot, .len = 1},
				.away = {.slot = away ? &slot : NULL, .len = away}};

	if (s->opts.no_names || holders_ask(s, &ss) != AL_OK || ss.holders_len == 0) {
		status_clear();
		free(ss.holders);
		return;
	}
	out->holder = ss.holders[0];
	out->named = true;
	free(ss.holders);
}

/* Waits until slot k has neither holder queue nor lease, or `until`, or,
 * once `notice` has passed, a terminating signal held back. */
static enum al_status await_gone(struct sem *s, unsigned k, struct deadline until,
				 struct deadline notice, bool *gone)
{
	struct backoff pauses = backoff_start(RETRY_FIRST, RETRY_LONGEST);
	enum al_status st;
	bool holder, lease;

	for (;;) {
		if ((st = slot_taken(s, k, &holder, &lease)) != AL_OK)
			return st;
		if ((*gone = !holder && !lease) || deadline_passed(until) ||
		    (deadline_passed(notice) && signals_held_pending()))
			return AL_OK;
		sleep_seconds(backoff_next(&pauses, until));
	}
}

/* Under the mutex: the slot checked, its queue deleted, the holder
 * waited for, the slot queue made again. A slot queue already missing
 * while a holder is there (an expires policy took it) is waited on as
 * well. */
static enum al_status evict_locked(struct sem *s, unsigned k, struct deadline until,
				   struct sem_eviction *out)
{
	char queue[QUEUE_NAME_MAX + 1];
	struct census cs = {0};
	struct deadline notice;
	enum slot_type type;
	enum al_status st;
	uint16_t refused;
	bool holder, lease, missing, gone;
	unsigned filled;

	if ((st = admin_count_slots(s, &cs)) != AL_OK)
		goto out;
	out->max = cs.max;
	if (cs.max == 0 && !cs.paused) {
		st = fail(AL_NOT_FOUND, "semaphore %s does not exist", s->label);
		goto out;
	}
	if (k > cs.max) {
		st = fail(AL_NOT_FOUND, "%s has no slot %u (max %u)", s->label, k, cs.max);
		goto out;
	}
	missing = req_has(&cs.missing, k);
	if ((st = slot_taken(s, k, &holder, &lease)) != AL_OK)
		goto out;
	if (!holder && !lease) {
		st = missing ? fail(AL_NOT_FOUND,
				    "slot %u of %s has no holder, and its slot queue is gone: "
				    "nothing to evict (amqplock check --repair %s makes it again)",
				    k, s->label, s->label)
			     : fail(AL_NOT_FOUND, "slot %u of %s is free: nothing to evict", k,
				    s->label);
		goto out;
	}
	name_holder(s, k, !holder, out);
	/* The type to make it again with, asked while it is there; a slot
	 * queue already gone takes the others' (the quorum marker's). */
	if ((st = missing ? admin_marked_type(s, &type) : admin_slot_type_of(s, k, &type)) != AL_OK)
		goto out;
	s->opts.slot_type = type;
	/* A marker left by a drain stopped halfway would keep the holder
	 * running (drain.c): it goes first. */
	if ((st = drain_unmark(s, k, k)) != AL_OK)
		goto out;
	/* Interrupted before anything was deleted: nothing to give back. */
	if (signals_held_pending())
		goto out;
	if (!missing) {
		sem_name_slot(&s->name, k, SLOT_QUEUE, queue);
		if ((st = req_ask_one(s, DELETE_QUEUE, queue, REFUSED_ACCESS, &refused)) != AL_OK)
			goto out;
		if (refused) {
			st = fail(AL_ACCESS, "the broker refused to delete %s", queue);
			goto out;
		}
		trace("deleted %s: its holder ends its job at its next look", queue);
	}
	out->deleted_at = now_seconds();
	notice = deadline_in(holder ? NOTICE_WAIT : 0);
	if (holder && !deadline_is_never(until) && deadline_left(until) < NOTICE_WAIT)
		until = notice;
	if ((st = await_gone(s, k, until, notice, &gone)) != AL_OK)
		goto out;
	out->waited = now_seconds() - out->deleted_at;
	free(cs.missing.slot);
	cs.missing = (struct slot_list){0};
	if ((st = req_append(&cs.missing, k)) == AL_OK)
		st = admin_fill_holes(s, &cs, k, &filled);
	if (st == AL_OK && !gone)
		st = holder ? fail(AL_BUSY,
				   "the holder of slot %u of %s has not ended its job within the "
				   "wait: once it has looked (each second, unless it is stopped) "
				   "it ends it within its --grace, and keeps the slot until then",
				   k, s->label)
			    : fail(AL_BUSY,
				   "the holder of slot %u of %s is away, and keeps the slot if it "
				   "comes back within its lease; amqplock evict %s %u without -w "
				   "waits for that lease to end",
				   k, s->label, s->label, k);
out:
	free(cs.missing.slot);
	return st;
}

enum al_status sem_evict(struct sem *s, unsigned k, struct deadline until, struct sem_eviction *out)
{
	enum al_status st;
	sigset_t before;
	bool locked, stray;

	memset(out, 0, sizeof(*out));
	if ((st = admin_lock(s, true, &locked, &stray)) != AL_OK)
		return st;
	signals_hold_back(&before);
	st = evict_locked(s, k, until, out);
	/* After a failure the connection may be gone; closing it releases
	 * the mutex just the same. */
	if (st == AL_OK)
		st = req_ask_ok(s, DELETE_QUEUE, s->name.base);
	/* The slot is back: the next in line is told, as for a slot added. */
	if (st == AL_OK)
		st = sem_wake_added(s, 1);
	/* A signal held back ends amqplock here, the slot queue in place. */
	signals_release(&before);
	return st;
}
