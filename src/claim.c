/* Claiming a slot: the holder queue, the slot check and the lease in one
 * round trip, and the acquire loop around it (sem_acquire). */
#include "sem_parts.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "record.h"
#include "rules.h"

/* How often a claim that got the lease asks again for a holder queue that
 * another has (pauses of about 2, 4, 6 and 8 ms). */
#define HOLDER_RETRIES 4

/* Deletes the lease of slot k that a failed claim made. */
static enum al_status drop_lease(struct sem *s, unsigned k)
{
	char queue[QUEUE_NAME_MAX + 1];
	enum al_status st = req_lease_send(s, DELETE_QUEUE, k);
	uint16_t refused;

	if (st == AL_OK)
		st = req_lease_answer(s, DELETE_QUEUE, &refused);
	if (st == AL_OK)
		return AL_OK;
	sem_name_slot(&s->name, k, LEASE_QUEUE, queue);
	return conn_refused(s->conn, st, "deleting", queue);
}

/* A claim answered within s->hold->claim_window of its sending counts; one
 * answered later is void, and so is one whose connection the broker has
 * closed by the time its answers are read (a close that came with them):
 * the connection is dropped, which takes the holder queue with it, and
 * the caller connects again (s->hold->claim_void), ends the lease the claim may
 * have made (s->hold->void_slot), and tries again. */
enum al_status claim_fresh(struct sem *s, unsigned k)
{
	double took = boot_seconds() - s->hold->lease.renewed;

	if (rules_claim_void(took, s->hold->claim_window)) {
		conn_abort(s->conn);
		s->hold->claim_void = true;
		s->hold->void_slot = k;
		return fail(
			AL_CONNECTION,
			"the claim of slot %u was answered %.1f s after it was sent, too late to "
			"count (was amqplock stopped?); trying again",
			k, took);
	}
	/* Anything the broker sent after the answers, already here. */
	if (conn_buffered(s->conn) || conn_readable(s->conn)) {
		conn_drain(s->conn);
		if (s->conn->dead) {
			s->hold->claim_void = true;
			s->hold->void_slot = k;
			return fail_context(AL_CONNECTION,
					    "the claim of slot %u came with its end: ", k);
		}
	}
	return AL_OK;
}

/* A claim refused for want of a permission: a user of the inspector's
 * role, most often, not a broken broker. */
#define CLIENT_ROLE_NEEDED                                                                         \
	"taking a slot needs the client role's configure permission on holder and lease "          \
	"queues (see PERMISSIONS in amqplock(1)): "

/* Claims slot k: declares its holder queue exclusive and, in the same
 * round trip, checks that the slot still exists (a remove may have taken
 * it since it was probed) and, with a lease, declares the lease: that
 * declare is refused (406) if any lease of the slot exists, since its
 * token differs. The check is a passive declare, which works under a
 * broker alarm; a probe would not. The lease goes on a channel of its
 * own, so that the broker makes it while it makes the holder queue; the
 * slot is ours only if both are, and whichever of the two we got from a
 * claim that failed is deleted again. AL_BUSY if another client was
 * first, the slot is gone or leased. */
static enum al_status claim(struct sem *s, unsigned k)
{
	static const struct step steps[] = {
		{DECLARE_EXCLUSIVE, HOLDER_QUEUE},
		{DECLARE_PASSIVE, SLOT_QUEUE},
	};
	char queue[QUEUE_NAME_MAX + 1];
	struct conn_refusal holder_refusal, lease_refusal;
	enum al_status st, lease_st = AL_OK;
	unsigned tries;
	uint16_t refused, lease_refused = 0;
	bool leased;
	size_t done;

	s->hold->lease.claim_closed = false;
	done = 0, refused = 0;
	/* A lease claimed now lasts from before the claim was sent. */
	s->hold->lease.renewed = boot_seconds();
	st = s->hold->lease.on ? req_lease_send(s, DECLARE_LEASE, k) : AL_OK;
	if (st == AL_OK)
		st = req_send_steps(s, k, steps, 2);
	/* The broker's work takes a few milliseconds: the caller's meanwhile. */
	if (st == AL_OK && s->hold->claim_sent)
		s->hold->claim_sent(s->hold->claim_arg, k);
	if (st == AL_OK)
		st = req_await_steps(s, steps, 2, &done, &refused);
	conn_refusal_keep(s->conn, &holder_refusal);
	if (st == AL_OK && s->hold->lease.on)
		lease_st = req_lease_answer(s, DECLARE_LEASE, &lease_refused);
	/* Answered on the main channel, not on the lease's: a lease
	 * without a leader (section 7 of docs/internals.md). */
	if (st == AL_OK && refused == 0 && lease_st == AL_CONNECTION && s->conn->no_reply) {
		look_note_stuck(s, k);
		s->hold->lease.stalled = true;
	}
	if ((st == AL_CONNECTION || lease_st == AL_CONNECTION) && conn_broker_crashed(s->conn) &&
	    s->lease_quorum) {
		s->hold->lease.claim_closed = true;
		return fail_context(
			AL_CONNECTION,
			"slot %u's last lease is still being deleted (a node down?): ", k);
	}
	if (st != AL_OK)
		return st;
	if (lease_st != AL_OK && s->conn->dead)
		return lease_st;
	conn_refusal_keep(s->conn, &lease_refusal);
	/* The lease ours, the holder queue another's: most often another
	 * claimer's, refused the lease (ours) and deleting its holder queue
	 * now. The lease decides between claimers, so we ask again rather
	 * than both letting go. */
	for (tries = 0; s->hold->lease.on && lease_st == AL_OK && done == 0 &&
			refused == AMQP_RESOURCE_LOCKED && tries < HOLDER_RETRIES;
	     tries++) {
		sleep_seconds(jitter(0.002 * (tries + 1)));
		if ((st = req_run_steps(s, k, steps, 2, &done, &refused)) != AL_OK)
			return st;
		conn_refusal_keep(s->conn, &holder_refusal);
	}
	if (refused == 0 && lease_st == AL_OK) {
		if (s->hold->lease.on) {
			trace("slot %u leased for %u ms (a %s queue)", k, s->hold->lease.ms,
			      s->lease_quorum ? "quorum" : "classic");
			return claim_fresh(s, k);
		}
		/* Without a lease of our own, someone else's is looked for
		 * once the holder queue is ours: its holder may have gone
		 * away since the slot was probed. */
		if ((st = probe_slots(s->conn, &s->name, LEASE_QUEUE, k, 1, &leased, NULL)) !=
		    AL_OK)
			return st;
		if (!leased)
			return claim_fresh(s, k);
	}
	/* Lost, or half won: a lease made for a claim that failed goes at
	 * once (it would block the slot for its length). */
	if (s->hold->lease.on && lease_st == AL_OK && (st = drop_lease(s, k)) != AL_OK)
		return st;
	if (done == 0 && refused == AMQP_RESOURCE_LOCKED)
		return AL_BUSY;
	/* Removed (404 on the slot queue) or leased by another: a race
	 * lost; anything else is a failure, the holder queue's told first,
	 * as when the lease was asked for only after it. */
	if (refused != 0 && !(done == 1 && refused == AMQP_NOT_FOUND)) {
		conn_refusal_restore(s->conn, &holder_refusal);
		st = req_step_refused(s, k, &steps[done], conn_status_for_reply(refused));
		return st == AL_ACCESS ? fail_context(st, CLIENT_ROLE_NEEDED) : st;
	}
	if (lease_st != AL_OK && lease_refused != AMQP_PRECONDITION_FAILED) {
		conn_refusal_restore(s->conn, &lease_refusal);
		sem_name_slot(&s->name, k, LEASE_QUEUE, queue);
		st = conn_refused(s->conn, lease_st, "declaring", queue);
		return st == AL_ACCESS ? fail_context(st, CLIENT_ROLE_NEEDED) : st;
	}
	trace("slot %u was %s meanwhile", k,
	      refused != 0 ? "removed" : "leased by a holder that is away");
	/* Our holder queue goes, so that the slot does not read as held. */
	sem_name_slot(&s->name, k, HOLDER_QUEUE, queue);
	if (req_ask_ok(s, DELETE_QUEUE, queue) != AL_OK)
		return AL_CONNECTION;
	return AL_BUSY;
}

enum al_status sem_busy_unless_refused(struct sem *s)
{
	char queue[QUEUE_NAME_MAX + 1];
	uint16_t refused = 0;

	/* (exclusive: ours alone, gone with the connection; no slot has
	 * number 0, so nobody's claim meets it) */
	sem_name_slot(&s->name, 0, HOLDER_QUEUE, queue);
	if (s->conn->dead ||
	    req_ask_one(s, DECLARE_EXCLUSIVE, queue, REFUSED_ACCESS, &refused) != AL_OK ||
	    refused != AMQP_ACCESS_REFUSED)
		return AL_BUSY;
	status_clear();
	return fail(AL_ACCESS,
		    "no slot of %s is free, and this user could not take one anyway: declaring "
		    "%s was refused; " CLIENT_ROLE_NEEDED "%s",
		    s->label, queue, s->conn->reply_text);
}

bool sem_lost_to_lease(const struct sem *s)
{
	return s->hold->lease.claim_closed || s->hold->lease.stalled;
}

bool sem_lease_being_deleted(const struct sem *s)
{
	return s->hold->lease.claim_closed;
}

enum al_status sem_paused_busy(const struct sem *s)
{
	return fail(AL_BUSY, "semaphore %s is paused (max 0): amqplock max %s N resumes it",
		    s->label, s->label);
}

/* Whether an administrator holds the semaphore's mutex (a probe of it,
 * which needs no permission on it). */
static enum al_status admin_at_work(struct sem *s, bool *at_work)
{
	enum al_status st = conn_publish_probe(s->conn, s->name.base);

	return st == AL_OK ? conn_note_routed(s->conn, at_work) : st;
}

/* No slot queue: the semaphore does not exist, unless its record says it
 * does, its slot queues gone behind amqplock's back, or it is paused:
 * then no slot is free, and a waiter waits for a resume as for a release.
 * Slot queues gone while an administrator holds the mutex are its doing
 * (evict deletes a held slot's until its job has ended): busy, not
 * damaged. */
static enum al_status no_slots(struct sem *s)
{
	enum al_status st;
	unsigned recorded;
	bool paused, at_work;

	if ((st = record_read(s->conn, &s->name, 0, &recorded)) != AL_OK)
		return st;
	if (recorded == 0 && (st = sem_paused(s, &paused)) != AL_OK)
		return st;
	if (recorded == 0 && paused)
		return sem_paused_busy(s);
	if (recorded == 0)
		return fail(AL_NOT_FOUND, "semaphore %s does not exist", s->label);
	if ((st = admin_at_work(s, &at_work)) != AL_OK)
		return st;
	if (at_work)
		return fail(AL_BUSY,
			    "the slot queues of %s are gone while an administrator holds its "
			    "mutex (an evict under way?)",
			    s->label);
	return fail(AL_DAMAGED,
		    "the slot queues of %s are gone, its %u slot%s all missing (an expires "
		    "policy? deleted by hand?): amqplock check --repair %s makes them again",
		    s->label, recorded, recorded == 1 ? "" : "s", s->label);
}

/* sem_acquire, or with look_only sem_find_free: the same search. */
static enum al_status acquire(struct sem *s, enum sem_take how, bool look_only, unsigned *slot,
			      unsigned *max)
{
	struct slot_list candidates = {0};
	char held[NAME_MAX_BYTES + 64];
	enum al_status st;
	unsigned races = 0, k;
	bool ahead, again_damaged = false, again_missing = false;

	*slot = 0;
	s->hold->lease.stalled = false;
	s->hold->behind_line = false;
	for (;;) {
		/* Woken, the slot is known to be free but for a race: the
		 * claim's lease declare sees a lease if one is there. */
		if ((st = look_find_free(s, max, &candidates,
					 how != SEM_TAKE_WOKEN || races > 0)) != AL_OK)
			break;
		if (*max == 0) {
			st = no_slots(s);
			/* No slot queue when probed, a record when read: a
			 * create (another host's --create) may have come in
			 * between. Neither a record nor the pause marker: a
			 * resume may have come between the two reads (it makes
			 * the slot queue and the record, then takes the marker
			 * off). Each is looked at again once before it counts
			 * as damage, or as no semaphore: a create that the
			 * second look sees midway is seen whole by the third. */
			if ((st == AL_DAMAGED && !again_damaged) ||
			    (st == AL_NOT_FOUND && !again_missing)) {
				trace("%s: %s; looking again", s->label, status_message());
				status_clear();
				again_damaged = again_damaged || st == AL_DAMAGED;
				again_missing = again_missing || st == AL_NOT_FOUND;
				continue;
			}
			break;
		}
		if (candidates.len == 0) {
			sem_all_held(held, sizeof(held), *max, s->label);
			st = fail(AL_BUSY, "%s", held);
			break;
		}
		if (look_only) {
			*slot = candidates.slot[0];
			break;
		}
		if (how == SEM_TAKE_UNLESS_LINE && races == 0 &&
		    ((st = line_ahead(s, &ahead)) != AL_OK || ahead)) {
			if (st == AL_OK)
				st = fail(AL_BUSY, "others are already waiting for a slot of %s",
					  s->label);
			break;
		}
		/* The lowest free slot keeps a lone client on slot 1, as a flock
		 * user expects; after a lost race a random one keeps the
		 * losers from colliding again. */
		k = candidates.slot[races ? (size_t)rand() % candidates.len : 0];
		trace("claiming slot %u of %u", k, *max);
		if ((st = claim(s, k)) == AL_OK) {
			*slot = k;
			break;
		}
		/* Its connection lost before the answers were in (a broker
		 * going down), the claim may still have made its lease, ours
		 * by its token: void, as a claim answered late, and ended
		 * on the next connection. Left, it would keep the slot from
		 * everyone, and a woken claim of ours (which does not look
		 * for leases first) could take it back as it stands, a
		 * quorum lease's expiry then counting from the lost claim
		 * rather than the new one. Not a claim lost to a lease in
		 * the way: ending that lease would meet it again. */
		if (st == AL_CONNECTION && s->hold->lease.on && s->conn->dead &&
		    !sem_lost_to_lease(s)) {
			s->hold->claim_void = true;
			s->hold->void_slot = k;
		}
		if (st != AL_BUSY)
			break;
		if (++races > SEM_RACE_LIMIT) {
			st = fail(AL_BUSY, "lost %u races for a slot of %s", races - 1, s->label);
			break;
		}
		trace("slot %u was taken first; retrying", k);
		/* The winner's claim came a round trip (a millisecond or two)
		 * before ours: a pause of about that per race lost so far
		 * spreads the losers apart, and the 20 allowed cost 0.4 s
		 * at most on average. */
		sleep_seconds(jitter(0.002 * races));
	}
	free(candidates.slot);
	return st;
}

enum al_status sem_acquire(struct sem *s, enum sem_take how, unsigned *slot, unsigned *max)
{
	return acquire(s, how, false, slot, max);
}

enum al_status sem_find_free(struct sem *s, unsigned *slot, unsigned *max)
{
	return acquire(s, SEM_TAKE, true, slot, max);
}
