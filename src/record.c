/* The size record: one durable exchange per slot (record.h). */
#include "record.h"

/* Requests sent before their replies are read: few enough that the
 * replies never fill the socket buffers while we still send. */
#define RECORD_BATCH 256u

/* Whether slot k is recorded (slot 0: the pause marker); *known goes
 * false if we may not look. */
static enum al_status recorded(struct conn *c, const struct sem_name *sn, unsigned k, bool *yes,
			       bool *known)
{
	char name[QUEUE_NAME_MAX + 1];
	amqp_exchange_declare_t d = {.passive = 1};
	enum al_status st;
	uint16_t refused;

	sem_name_slot(sn, k, SLOT_QUEUE, name);
	d.exchange = amqp_cstring_bytes(name);
	/* On a channel of its own: the first slot not recorded closes it,
	 * and the main channel goes on as it was (RabbitMQ 4.0 after a node
	 * loss was seen to leave a fresh channel's publishes to a quorum
	 * queue unanswered). */
	st = conn_side_call(c, AMQP_EXCHANGE_DECLARE_METHOD, &d, AMQP_EXCHANGE_DECLARE_OK_METHOD,
			    &refused, "checking the record", name);
	if (st == AL_OK && refused != 0 && refused != AMQP_NOT_FOUND &&
	    refused != AMQP_ACCESS_REFUSED)
		st = conn_refused(c, conn_status_for_reply(refused), "checking the record", name);
	*yes = st == AL_OK && refused == 0;
	if (refused == AMQP_ACCESS_REFUSED) {
		trace("the record of %s may not be read; going by its slot queues", sn->base);
		*known = false;
	}
	return st;
}

/* Asks whether slot k is recorded, and moves *lo up or *hi down to it. */
static enum al_status ask_at(struct conn *c, const struct sem_name *sn, unsigned k, unsigned *lo,
			     unsigned *hi, bool *yes, bool *known)
{
	enum al_status st = recorded(c, sn, k, yes, known);

	if (st == AL_OK && *known)
		*(*yes ? lo : hi) = k;
	return st;
}

enum al_status record_paused(struct conn *c, const struct sem_name *sn, bool *paused, bool *known)
{
	*known = true;
	return recorded(c, sn, 0, paused, known);
}

/* The top of the record, found from slot `start`: if it is recorded, up
 * one step, then steps that double, until a slot is not; then halving
 * between (below start if it is not). */
static enum al_status climb(struct conn *c, const struct sem_name *sn, unsigned start,
			    unsigned *max)
{
	/* Slot lo is recorded (or 0), slot hi is not. */
	unsigned lo = 0, hi = SLOTS_MAX + 1, step;
	enum al_status st;
	bool yes, known = true;

	*max = 0;
	st = ask_at(c, sn, start, &lo, &hi, &yes, &known);
	if (st != AL_OK || !known)
		return st;
	for (step = 1; st == AL_OK && yes && lo + step < hi; step *= 2)
		st = ask_at(c, sn, lo + step, &lo, &hi, &yes, &known);
	while (st == AL_OK && known && hi - lo > 1)
		st = ask_at(c, sn, lo + (hi - lo) / 2, &lo, &hi, &yes, &known);
	*max = known ? lo : 0;
	return st;
}

enum al_status record_read(struct conn *c, const struct sem_name *sn, unsigned hint, unsigned *max)
{
	return climb(c, sn, hint > 0 && hint <= SLOTS_MAX ? hint : 1, max);
}

enum al_status record_unfinished(struct conn *c, const struct sem_name *sn, unsigned max,
				 unsigned *top)
{
	enum al_status st;
	bool yes, known = true;

	*top = 0;
	if (max == 0)
		return climb(c, sn, 2, top);
	if ((st = recorded(c, sn, 1, &yes, &known)) == AL_OK && known && !yes)
		*top = max;
	return st;
}

/* Declares (or deletes) the exchanges of `count` slots from `first`, up
 * (or down), pipelined in batches; stops at the first refusal. */
static enum al_status each_slot(struct conn *c, const struct sem_name *sn, unsigned first,
				unsigned count, bool declare)
{
	char name[QUEUE_NAME_MAX + 1];
	amqp_exchange_declare_t d = {.type = amqp_cstring_bytes("fanout"), .durable = 1};
	amqp_exchange_delete_t del = {0};
	amqp_method_number_t ok =
		declare ? AMQP_EXCHANGE_DECLARE_OK_METHOD : AMQP_EXCHANGE_DELETE_OK_METHOD;
	enum al_status st = AL_OK;
	unsigned done = 0, i, n, k;
	amqp_method_t m;

	while (st == AL_OK && done < count) {
		n = count - done < RECORD_BATCH ? count - done : RECORD_BATCH;
		for (i = 0; st == AL_OK && i < n; i++) {
			k = declare ? first + done + i : first - done - i;
			sem_name_slot(sn, k, SLOT_QUEUE, name);
			d.exchange = del.exchange = amqp_cstring_bytes(name);
			conn_refusal_clear(c);
			st = declare ? conn_send(c, AMQP_EXCHANGE_DECLARE_METHOD, &d)
				     : conn_send(c, AMQP_EXCHANGE_DELETE_METHOD, &del);
		}
		for (i = 0; st == AL_OK && i < n; i++, done++)
			st = conn_expect(c, ok, &m);
	}
	if (st != AL_OK) {
		k = declare ? first + done : first - done;
		sem_name_slot(sn, k, SLOT_QUEUE, name);
		return conn_refused(c, st, declare ? "recording" : "taking off the record", name);
	}
	return AL_OK;
}

enum al_status record_write(struct conn *c, const struct sem_name *sn, unsigned from, unsigned to)
{
	if (from > to)
		return AL_OK;
	trace("recording slots %u..%u", from, to);
	return each_slot(c, sn, from, to - from + 1, true);
}

enum al_status record_cut(struct conn *c, const struct sem_name *sn, unsigned top, unsigned from)
{
	if (top < from)
		return AL_OK;
	trace("taking slots %u..%u off the record", top, from);
	return each_slot(c, sn, top, top - from + 1, false);
}
