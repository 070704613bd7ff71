/* The holder's side of a held slot: its lease (token, renewal, re-attach,
 * keeping and ending it, the minimum lease --min-hold leaves behind), the
 * verification every second, and the release; and the holder's side of
 * struct sem set up (sem_hold_init) and carried across a lost connection
 * (sem_reconnected), which is mostly about leases. */
#include "sem_parts.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"

/* What says that our slot is still there: its slot queue, or, once a
 * --drain shrink has removed it, its drain marker (drain.c). */
static enum slot_kind presence(const struct sem *s)
{
	return s->hold->draining ? DRAIN_QUEUE : SLOT_QUEUE;
}

void sem_hold_init(struct sem *s, struct sem_hold *h, unsigned lease_ms, int64_t token)
{
	memset(h, 0, sizeof(*h));
	h->lease.on = lease_ms > 0;
	h->lease.ms = lease_ms;
	h->lease.token = lease_ms > 0 ? token : 0;
	s->hold = h;
}

void sem_reconnected(struct sem *s)
{
	struct sem old = *s;
	struct sem_hold *h = s->hold, was;

	memset(s, 0, sizeof(*s));
	s->conn = old.conn;
	s->name = old.name;
	s->label = old.label;
	s->opts = old.opts;
	/* What was learnt of leases that do not answer outlives the
	 * connection they stalled. */
	memcpy(s->stuck, old.stuck, sizeof(s->stuck));
	if (!h)
		return;
	was = *h;
	sem_hold_init(s, h, was.lease.ms, was.lease.token);
	/* A void claim (answered too late to count, see claim_window, or
	 * its connection lost before its answers) may have left a lease of
	 * ours: it would keep the slot from everyone, us included,
	 * for its length. It is ended as the claim made it (the next look
	 * finds the types again). */
	/* A lease handed to us and not yet adopted is ours to end, as a
	 * void claim's. */
	if (was.handover.handed && !was.claim_void) {
		was.claim_void = true;
		was.void_slot = was.handover.slot;
		was.void_token = was.handover.token;
	}
	if (!was.claim_void)
		return;
	s->lease_quorum = old.lease_quorum;
	s->slots_quorum = old.slots_quorum;
	/* An adoption's lease has the offerer's token, not ours. */
	if (was.void_token)
		h->lease.token = was.void_token;
	if (h->lease.on && sem_lease_end(s, was.void_slot) != AL_OK) {
		trace("could not end the lease of slot %u that a void claim may have left: %s",
		      was.void_slot, status_message());
		/* Lost again: the next connection tries again. */
		if (s->conn->dead) {
			h->claim_void = true;
			h->void_slot = was.void_slot;
			h->void_token = was.void_token;
		}
	}
	h->lease.token = was.lease.token;
	status_clear();
}

/* The steps that renew our lease, into step (room for 2); their number.
 * A declare with our token is refused (406) if the lease is another's,
 * and restarts a classic queue's expiry. It does not restart a quorum
 * queue's: RabbitMQ (3.10 to 4.3) counts only reads and consumers as a
 * quorum queue's use, so a quorum lease renewed by declares alone ran out
 * 5-10 s after it was made (--lease 5) under a holder renewing it every
 * second; a quorum lease is read too (basic.get: the lease holds no
 * message, so the read takes nothing). */
static size_t renewal_steps(const struct sem *s, struct step *step)
{
	step[0] = (struct step){DECLARE_LEASE, LEASE_QUEUE};
	step[1] = (struct step){READ_QUEUE, LEASE_QUEUE};
	return s->lease_quorum ? 2 : 1;
}

enum al_status sem_reattach(struct sem *s, unsigned slot)
{
	/* Passive first: a re-attach never makes a lease, it only renews
	 * one that still exists, and only if the token is ours; then the
	 * slot queue and the holder queue. */
	struct step steps[5] = {{DECLARE_PASSIVE, LEASE_QUEUE}};
	char queue[QUEUE_NAME_MAX + 1];
	enum al_status st;
	uint16_t refused;
	size_t done, renewed = 1 + renewal_steps(s, &steps[1]), n = renewed + 2;

	steps[renewed] = (struct step){DECLARE_PASSIVE, presence(s)};
	steps[renewed + 1] = (struct step){DECLARE_EXCLUSIVE, HOLDER_QUEUE};
	st = req_run_steps(s, slot, steps, n, &done, &refused);
	if (st != AL_OK)
		return st;
	sem_name_slot(&s->name, slot, steps[done < n ? done : n - 1].kind, queue);
	s->hold->lease.need_holder = false;
	if (done >= 2)
		s->hold->lease.reattached = now_seconds();
	if (refused == 0)
		return AL_OK;
	if (done == 0 && refused == AMQP_NOT_FOUND)
		return fail(AL_LOST, "its lease %s ran out before amqplock could reconnect", queue);
	if (done == 1 && refused == AMQP_PRECONDITION_FAILED)
		return fail(AL_LOST, "its lease %s belongs to another holder now", queue);
	if (done == renewed && refused == AMQP_NOT_FOUND) {
		/* Drained, or back: the holder queue is declared by the next
		 * verification. */
		s->hold->lease.need_holder = true;
		return drain_look_again(s, slot);
	}
	if (done == renewed + 1 && refused == AMQP_RESOURCE_LOCKED) {
		/* The broker has not yet dropped our old connection, whose
		 * holder queue it is; the lease keeps the slot meanwhile. */
		trace("holder queue %s is still the old connection's; taking it later", queue);
		s->hold->lease.need_holder = true;
		return AL_OK;
	}
	return req_step_refused(s, slot, &steps[done], conn_status_for_reply(refused));
}

enum al_status sem_lease_keep(struct sem *s, unsigned slot)
{
	char queue[QUEUE_NAME_MAX + 1];
	struct step steps[2];
	enum al_status st;
	uint16_t refused;
	size_t done;

	st = req_run_steps(s, slot, steps, renewal_steps(s, steps), &done, &refused);
	if (st != AL_OK || refused == 0)
		return st;
	sem_name_slot(&s->name, slot, LEASE_QUEUE, queue);
	if (done == 0 && refused == AMQP_PRECONDITION_FAILED)
		return fail(AL_LOST, "its lease %s belongs to another holder now", queue);
	return req_step_refused(s, slot, &steps[done], conn_status_for_reply(refused));
}

/* Deletes our lease of slot if it is still ours; *ended says whether it
 * was. Gone (404) or another's (406): nothing of ours to end. */
static enum al_status lease_drop(struct sem *s, unsigned slot, bool *ended)
{
	static const struct step steps[] = {
		{DECLARE_PASSIVE, LEASE_QUEUE},
		{DECLARE_LEASE, LEASE_QUEUE},
		{DELETE_QUEUE, LEASE_QUEUE},
	};
	enum al_status st;
	uint16_t refused;
	size_t done;

	*ended = false;
	st = req_run_steps(s, slot, steps, 3, &done, &refused);
	if (st == AL_OK && refused == 0)
		*ended = true;
	if (st != AL_OK || refused == 0 || (done == 0 && refused == AMQP_NOT_FOUND) ||
	    (done == 1 && refused == AMQP_PRECONDITION_FAILED))
		return st;
	return req_step_refused(s, slot, &steps[done], conn_status_for_reply(refused));
}

enum al_status sem_lease_end(struct sem *s, unsigned slot)
{
	bool ended;
	enum al_status st = lease_drop(s, slot, &ended);

	/* Ended: the slot is free now, and nobody else says so. */
	return st == AL_OK && ended ? sem_wake_line(s) : st;
}

/* How long sem_lease_minimum tries to place a minimum lease while
 * another's is in the way: a claimer that raced us between our lease's
 * deletion and the new declare holds one until its holder queue has been
 * refused a few times (claim.c, HOLDER_RETRIES: some 20 ms), then drops
 * it. A lease there for longer is not a claimer's, and is left alone. */
#define MINIMUM_PLACE_WAIT  1.0
#define MINIMUM_PLACE_PAUSE 0.005

/* The minimum lease has our token and the time left as its x-expires:
 * arguments other than the running lease's, so that nothing of ours
 * that renews or ends a lease by its token (a keeper's last act, a
 * verification) can touch it; its holder queue keeps the slot while one
 * replaces the other. Nobody else's claim gets through meanwhile: a
 * claimer that gets the lease in the gap is refused the holder queue,
 * and drops its lease. */
enum al_status sem_lease_minimum(struct sem *s, unsigned slot, double seconds, bool *placed)
{
	static const struct step make = {DECLARE_LEASE, LEASE_QUEUE};
	struct deadline by = deadline_in(MINIMUM_PLACE_WAIT);
	unsigned running_ms = s->hold->lease.ms;
	enum al_status st;
	uint16_t refused = 0;
	size_t done;
	bool ended;

	*placed = false;
	if ((st = lease_drop(s, slot, &ended)) != AL_OK)
		return st;
	s->hold->lease.ms = (unsigned)(seconds * 1000) + 1;
	do {
		if (refused)
			sleep_seconds(MINIMUM_PLACE_PAUSE);
		st = req_run_steps(s, slot, &make, 1, &done, &refused);
	} while (st == AL_OK && refused == AMQP_PRECONDITION_FAILED && !deadline_passed(by));
	s->hold->lease.ms = running_ms;
	if (st == AL_OK && refused == 0) {
		*placed = true;
		trace("slot %u kept for %.3f s more by a minimum lease (--min-hold)", slot,
		      seconds);
	} else if (st == AL_OK) {
		trace("could not place the minimum lease of slot %u (refused %u)", slot, refused);
	}
	return st;
}

/* How long sem_lease_end_apart waits for the broker to drop the holder
 * queue of a hung-up connection before it wakes the line anyway (the
 * first in line then finds the slot at its next look). It asks every
 * millisecond: the broker takes one or two. */
#define HOLDER_GONE_WAIT 1.0

/* The wake-up of an end apart, confirmed: this connection closes right
 * after it, and under a resource alarm the broker blocks it at its first
 * publish, so only the confirm tells whether the line was woken (the
 * caller says which of the two failed). One round trip, off the hot path. */
static enum al_status wake_line_confirmed(struct sem *s)
{
	enum al_status st = sem_wake_line(s);
	bool routed;

	/* (the wake-ups into #line were confirmed one by one) */
	return st == AL_OK && s->conn->answered < s->conn->published
		       ? conn_note_routed(s->conn, &routed)
		       : st;
}

enum al_status sem_lease_end_apart(struct sem *s, unsigned slot, struct conn *holding, bool *ended)
{
	struct deadline gone_by;
	enum al_status st;
	bool holder = true;

	/* A quorum lease goes first, while the holder queue still keeps the
	 * slot held, for the reason sem_released gives. */
	if (!s->lease_quorum)
		conn_hang_up(holding);
	st = lease_drop(s, slot, ended);
	if (s->lease_quorum)
		conn_hang_up(holding);
	if (st != AL_OK || !*ended)
		return st;
	/* Ended: nobody else says that the slot is free. A classic lease's
	 * holder queue went with the hang-up; a quorum lease's is waited
	 * for. */
	if (!s->lease_quorum)
		return wake_line_confirmed(s);
	gone_by = deadline_in(HOLDER_GONE_WAIT);
	while ((st = probe_slots(s->conn, &s->name, HOLDER_QUEUE, slot, 1, &holder, NULL)) ==
		       AL_OK &&
	       holder && !deadline_passed(gone_by))
		sleep_seconds(0.001);
	return st == AL_OK ? wake_line_confirmed(s) : st;
}

/* A lease handed to us that we cannot keep (the slot removed, its holder
 * queue another's for good) goes, by its token, which only we may use
 * now: nobody else ends it. A quorum lease is not deleted while nothing
 * shows the slot held, for the reason sem_released gives (3.10 crashed
 * the connection of every waiter that probed it meanwhile): the holder
 * queue is declared first, asked for again for up to a second (a claimer
 * refused the lease holds it for a few milliseconds). Another's for
 * longer, it shows the slot held all the same, and the lease goes. */
#define LET_GO_HOLDER_WAIT  1.0
#define LET_GO_HOLDER_PAUSE 0.005

enum al_status sem_lease_let_go(struct sem *s, unsigned slot)
{
	char holder[QUEUE_NAME_MAX + 1];
	struct deadline by = deadline_in(LET_GO_HOLDER_WAIT);
	enum al_status st = AL_OK;
	bool ended = false;
	uint16_t refused = 0;

	sem_name_slot(&s->name, slot, HOLDER_QUEUE, holder);
	while (s->lease_quorum &&
	       (st = req_ask_one(s, DECLARE_EXCLUSIVE, holder, REFUSED_LOCKED, &refused)) ==
		       AL_OK &&
	       refused && !deadline_passed(by))
		sleep_seconds(LET_GO_HOLDER_PAUSE);
	if (st != AL_OK)
		return st;
	if (refused)
		trace("holder queue %s is another's: ending the lease of slot %u all the same",
		      holder, slot);
	st = lease_drop(s, slot, &ended);
	if (st == AL_OK && s->lease_quorum && !refused)
		st = req_ask_ok(s, DELETE_QUEUE, holder);
	return st == AL_OK && ended ? sem_wake_line(s) : st;
}

/* The holder queue is deleted before the wake-up is published, so that
 * the waiter the broker wakes finds the slot free: a channel's methods
 * are handled in order. Nothing asks first whether anyone waits: a
 * wake-up to a line that does not exist is dropped, and one to an empty
 * line expires within a second. Only the lease's deletion is waited for
 * (it is not exclusive: a close would leave it blocking the slot for its
 * whole length); the connection's close waits for the rest. */
enum al_status sem_released(struct sem *s, unsigned slot)
{
	static const struct step delete_holder = {DELETE_QUEUE, HOLDER_QUEUE};
	char lease[QUEUE_NAME_MAX + 1];
	enum al_status st = AL_OK, lease_st = AL_OK;
	uint16_t refused, held_refused;
	size_t done;

	sem_name_slot(&s->name, slot, LEASE_QUEUE, lease);
	/* The lease and the holder queue are deleted side by side (two
	 * channels); the wake-up follows the holder queue's deletion on its
	 * channel, and is sent once the lease's is answered: the slot is
	 * free when the first in line hears of it. A quorum lease goes
	 * first, alone: on RabbitMQ 3.10 a probe that reaches a quorum queue
	 * while it is being deleted crashes the prober's connection (6 in
	 * 147 probes of a queue made and deleted in a loop; passive declares
	 * never did), and waiters probe a slot's lease once they see no
	 * holder queue. A waiter that lost its connection so lost its place
	 * in line (3 of 30 holds 50 ms apart on one slot). */
	if (s->hold->lease.on)
		st = req_lease_send(s, DELETE_QUEUE, slot);
	if (st == AL_OK && s->hold->lease.on && s->lease_quorum)
		lease_st = req_lease_answer(s, DELETE_QUEUE, &refused);
	if (st == AL_OK)
		st = req_slot_send(s, DELETE_QUEUE, slot, HOLDER_QUEUE);
	/* The holder queue's answer, before the wake-up's own questions
	 * to the line (it comes first on the channel anyway), and before
	 * the lease's: the lease's answer, read while the main channel is,
	 * is kept for its reader, where a read of the lease's channel
	 * passes the main channel's by. */
	if (st == AL_OK)
		st = req_await_steps(s, &delete_holder, 1, &done, &held_refused);
	if (st == AL_OK && s->hold->lease.on && !s->lease_quorum)
		lease_st = req_lease_answer(s, DELETE_QUEUE, &refused);
	/* A draining slot was removed: nobody is to be told of it. */
	if (st == AL_OK && !s->conn->dead && !s->hold->draining) {
		trace("released slot %u of %s; waking the first in line, if anyone waits", slot,
		      s->label);
		st = sem_wake_line(s);
	}
	if (st == AL_OK && lease_st != AL_OK)
		return conn_refused(s->conn, lease_st, "deleting", lease);
	return st;
}

/* A verification asks, in one pipelined round trip: the lease declared
 * again (renewed, and refused if it is not ours), the slot queue (the
 * slot may have been removed; once a --drain shrink has, its drain
 * marker: presence) and our holder queue (deleted behind our
 * back: rabbitmqctl delete_queue, an `expires` policy) declared passively.
 * The broker answers in order and drops what follows a refusal, so the
 * number of answers already in says which one failed. (A passive declare
 * also counts as use of the queue: an `expires` policy never fires on a
 * holder queue checked every second.) After a reconnect the holder queue
 * may still be the old connection's: it is declared, not checked, until
 * it is ours again. */
/* The request that verification question i (s->hold->verify_kind) makes: our
 * lease declared with our token (406 if it is another's); the slot queue
 * checked; the holder queue checked, or declared again while need_holder.
 * A kind asked twice in a row is read the second time: a quorum queue's
 * expiry restarts only then (see renewal_steps), so that neither the
 * lease nor the slot queue of a quorum semaphore runs out under its
 * holder, nor goes to an expires policy while held. */
static enum queue_op verify_op(const struct sem *s, unsigned i)
{
	if (i > 0 && s->hold->verify_kind[i - 1] == s->hold->verify_kind[i])
		return READ_QUEUE;
	if (s->hold->verify_kind[i] == LEASE_QUEUE)
		return DECLARE_LEASE;
	if (s->hold->verify_kind[i] == HOLDER_QUEUE && s->hold->lease.need_holder)
		return DECLARE_EXCLUSIVE;
	return DECLARE_PASSIVE;
}

enum al_status sem_verify_send(struct sem *s, unsigned slot)
{
	enum al_status st = AL_OK;
	unsigned i, n = 0;

	if (s->hold->lease.on)
		s->hold->verify_kind[n++] = LEASE_QUEUE;
	if (s->hold->lease.on && s->lease_quorum)
		s->hold->verify_kind[n++] = LEASE_QUEUE;
	s->hold->verify_kind[n++] = presence(s);
	if (s->slots_quorum)
		s->hold->verify_kind[n++] = presence(s);
	s->hold->verify_kind[n++] = HOLDER_QUEUE;
	s->hold->verify_asked = n;
	s->hold->verify_answers = 0;
	for (i = 0; i < n && st == AL_OK; i++)
		st = req_slot_send(s, verify_op(s, i), slot, s->hold->verify_kind[i]);
	return st;
}

/* How long after a re-attach a deleted holder queue is not a loss. When a
 * cluster node dies, RabbitMQ 4.0 removes its connections' exclusive
 * queues a few seconds later, by name: a holder that has re-attached
 * through a survivor meanwhile can see its new holder queue go (measured:
 * 1 s after the kill). Its lease, renewed in the same round trip, still
 * keeps the slot, so it declares the holder queue again. */
#define HOLDER_SETTLE 15.0

/* The refusal that ended a verification, as a loss; AL_OK if it is none
 * (our old holder queue not yet dropped, or dropped late by the broker
 * after a re-attach: the lease keeps the slot). */
static enum al_status verify_refused(struct sem *s, unsigned slot, enum al_status st)
{
	enum slot_kind kind = s->hold->verify_kind[s->hold->verify_answers];
	char queue[QUEUE_NAME_MAX + 1];

	sem_name_slot(&s->name, slot, kind, queue);
	if (kind == HOLDER_QUEUE && st == AL_NOT_FOUND && s->hold->lease.on &&
	    !s->hold->lease.need_holder && s->hold->lease.reattached &&
	    now_seconds() - s->hold->lease.reattached < HOLDER_SETTLE) {
		/* The lease was renewed just before, in this round trip. */
		trace("holder queue %s gone soon after a re-attach; declaring it again", queue);
		s->hold->lease.need_holder = true;
	}
	if (kind == HOLDER_QUEUE && s->hold->lease.need_holder &&
	    (st == AL_BUSY || st == AL_NOT_FOUND)) {
		s->hold->verify_answers = s->hold->verify_asked;
		return conn_reset_channel(s->conn) == AL_OK
			       ? AL_OK
			       : fail(AL_LOST, "the connection failed");
	}
	if ((kind == SLOT_QUEUE || kind == DRAIN_QUEUE) && st == AL_NOT_FOUND) {
		/* The rest of the round trip was dropped with the channel. */
		s->hold->verify_answers = s->hold->verify_asked;
		return drain_look_again(s, slot);
	}
	if (kind == HOLDER_QUEUE && (st == AL_NOT_FOUND || st == AL_BUSY))
		return fail(AL_LOST, "its holder queue %s was %s", queue,
			    st == AL_BUSY ? "taken by another connection" : "deleted");
	if (kind == LEASE_QUEUE && conn_refusal_code(s->conn) == AMQP_PRECONDITION_FAILED)
		return fail(AL_LOST, "its lease %s was taken by another holder", queue);
	conn_refused(s->conn, st, req_verb(verify_op(s, s->hold->verify_answers)), queue);
	return AL_LOST;
}

enum al_status sem_held_poll(struct sem *s, unsigned slot, bool *verified)
{
	enum al_status st;
	amqp_method_t m;
	bool got;

	*verified = false;
	do {
		st = conn_poll(s->conn, &m, &got);
		if (st != AL_OK && !s->conn->dead &&
		    s->hold->verify_answers < s->hold->verify_asked) {
			if ((st = verify_refused(s, slot, st)) != AL_OK)
				return st;
			*verified = got = true;
			continue;
		}
		if (st != AL_OK)
			return fail(AL_LOST, "the connection failed");
		if (!got || !req_is_queue_answer(m.id) ||
		    ++s->hold->verify_answers != s->hold->verify_asked)
			continue;
		*verified = true;
		if (s->hold->lease.need_holder) {
			trace("holder queue of slot %u is ours again", slot);
			s->hold->lease.need_holder = false;
		}
	} while (got);
	return AL_OK;
}
