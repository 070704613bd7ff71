#include "probe.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"

/* Probes sent before their answers are read. Large enough to make 1000
 * probes a handful of round trips, small enough that neither side's socket
 * buffers fill while nobody reads. */
#define PROBE_BATCH 1024u

/* The probe a basic.return answers. The broker handles a channel's
 * publishes in order, so returns come in the order of their probes: the
 * search goes on from the last match. */
static struct probe *returned(const struct sem_name *sn, struct probe *p, size_t n, size_t *next,
			      const amqp_basic_return_t *r)
{
	size_t i;

	for (i = *next; i < n; i++) {
		if (sem_name_parse_slot(sn, r->routing_key.bytes, r->routing_key.len, p[i].kind) ==
		    p[i].slot) {
			*next = i + 1;
			return &p[i];
		}
	}
	return NULL;
}

/* A nacked probe reached a queue that could not take it. Between quorum
 * leaders (half a second, measured on three nodes) that passes, so a batch
 * with such refusals is sent again, on a fresh channel, after a pause
 * that doubles, for at most NACK_PATIENCE. Holder queues and the line are
 * never quorum queues: their refusal means a node that is gone (RabbitMQ
 * 4.2 and later keep a dead node's exclusive queues registered until it
 * returns; every version keeps a durable classic queue's) and waiting
 * would not change it. */
#define NACK_FIRST_PAUSE   0.02
#define NACK_LONGEST_PAUSE 0.5
#define NACK_PATIENCE      2.0

/* Marks probes first..last (delivery tags, base + 1 + index) that the
 * broker had not acked singly as refused: nacked, or (unanswered) not
 * answered at all. */
static void mark_refused(struct probe *p, uint64_t base, uint64_t first, uint64_t last,
			 const bool *single_acks, bool unanswered)
{
	uint64_t tag;

	for (tag = first; tag <= last; tag++) {
		if (!single_acks[tag - base - 1]) {
			p[tag - base - 1].refused = true;
			p[tag - base - 1].exists = true;
			p[tag - base - 1].unanswered = unanswered;
		}
	}
}

/* Whether a silence may answer p[0..n-1]: only a batch of leases. A lease
 * is a quorum queue on quorum semaphores, and one left without a leader
 * (its node died as it was declared) never answers until that node is
 * back, while the broker serves the rest. */
static bool may_go_unanswered(const struct probe *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i].kind != LEASE_QUEUE)
			return false;
	return true;
}

static enum al_status probe_batch(struct conn *c, const struct sem_name *sn, struct probe *p,
				  size_t n)
{
	char queue[QUEUE_NAME_MAX + 1];
	bool single_acks[PROBE_BATCH] = {false};
	uint64_t base = c->published, confirmed = base, last;
	bool silence_ok = may_go_unanswered(p, n), silence = false;
	struct probe *answered;
	enum al_status st;
	amqp_method_t m;
	size_t i, next = 0;

	for (i = 0; i < n; i++) {
		p[i].exists = true;
		p[i].refused = false;
		p[i].unanswered = false;
		sem_name_slot(sn, p[i].slot, p[i].kind, queue);
		if ((st = conn_publish_probe(c, queue)) != AL_OK)
			return st;
	}
	last = c->published;
	/* A missing queue's basic.return comes before the basic.ack of the
	 * same probe, so every return is in when the last tag is confirmed.
	 * Acks (and nacks) may be merged. */
	while (confirmed < last) {
		/* A refusal here is about the exchange, not any one queue: a
		 * probe needs write permission on the default exchange. */
		st = silence_ok ? conn_recv_or_silence(c, &m, &silence) : conn_recv(c, &m);
		if (st != AL_OK)
			return conn_refused(c, st, "publishing probes through", "amq.default");
		/* The probes left unanswered are marked so; the channel they
		 * stalled is left for a fresh one, whose opening shows whether
		 * the broker still answers at all. */
		if (silence) {
			mark_refused(p, base, confirmed + 1, last, single_acks, true);
			return conn_reset_channel(c);
		}
		if (m.id == AMQP_BASIC_RETURN_METHOD) {
			if ((answered = returned(sn, p, n, &next, m.decoded)) != NULL)
				answered->exists = false;
		} else if (m.id == AMQP_BASIC_ACK_METHOD || m.id == AMQP_BASIC_NACK_METHOD) {
			/* basic.ack and basic.nack share their layout. */
			amqp_basic_ack_t *a = m.decoded;

			if (a->delivery_tag <= confirmed || a->delivery_tag > last)
				continue;
			if (m.id == AMQP_BASIC_NACK_METHOD)
				mark_refused(p, base, a->multiple ? confirmed + 1 : a->delivery_tag,
					     a->delivery_tag, single_acks, false);
			if (a->multiple)
				confirmed = a->delivery_tag;
			else
				single_acks[a->delivery_tag - base - 1] = true;
			while (confirmed < last && single_acks[confirmed - base])
				confirmed++;
		}
	}
	return AL_OK;
}

/* Whether a refusal of a probe of this kind of queue may pass. */
static bool may_pass(enum slot_kind kind)
{
	return kind != HOLDER_QUEUE && kind != WAITERS_QUEUE;
}

/* Whether p[0..n-1] has a refusal: of any probe, or (all false) of one
 * that may pass if asked again. A batch with an unanswered probe is not
 * sent again: it would wait as long once more. */
static bool some_refused(const struct probe *p, size_t n, bool all)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i].unanswered)
			return false;
	for (i = 0; i < n; i++)
		if (p[i].refused && (all || may_pass(p[i].kind)))
			return true;
	return false;
}

static enum al_status probe_batch_again(struct conn *c, const struct sem_name *sn, struct probe *p,
					size_t n)
{
	struct deadline patience = deadline_in(sooner(c->rpc_timeout, NACK_PATIENCE));
	struct backoff pauses = backoff_start(NACK_FIRST_PAUSE, NACK_LONGEST_PAUSE);
	enum al_status st;
	double pause;

	for (;;) {
		if ((st = probe_batch(c, sn, p, n)) != AL_OK || !some_refused(p, n, true))
			return st;
		/* On a fresh channel: the old one may keep sending to the dead
		 * leader it knew. */
		if ((st = conn_reset_channel(c)) != AL_OK)
			return st;
		if (!some_refused(p, n, false) || deadline_passed(patience)) {
			/* Once per connection: a waiter asks again every pause. */
			if (!c->told_refused)
				trace("the broker refused probes; taking those queues as there");
			c->told_refused = true;
			return AL_OK;
		}
		pause = backoff_next(&pauses, patience);
		trace("the broker nacked a probe; probing again in %.0f ms", pause * 1000);
		sleep_seconds(pause);
	}
}

enum al_status probe_queues(struct conn *c, const struct sem_name *sn, struct probe *p, size_t n)
{
	enum al_status st = AL_OK;
	size_t done, batch;

	for (done = 0; done < n && st == AL_OK; done += batch) {
		batch = n - done < PROBE_BATCH ? n - done : PROBE_BATCH;
		st = probe_batch_again(c, sn, p + done, batch);
	}
	return st;
}

enum al_status probe_slots(struct conn *c, const struct sem_name *sn, enum slot_kind kind,
			   unsigned first, unsigned count, bool *exists, bool *refused)
{
	struct probe p[PROBE_BATCH];
	enum al_status st = AL_OK;
	unsigned done, n, i;

	for (done = 0; done < count && st == AL_OK; done += n) {
		n = count - done < PROBE_BATCH ? count - done : PROBE_BATCH;
		for (i = 0; i < n; i++)
			p[i] = (struct probe){.kind = kind, .slot = first + done + i};
		st = probe_batch_again(c, sn, p, n);
		for (i = 0; st == AL_OK && i < n; i++) {
			exists[done + i] = p[i].exists;
			if (refused)
				refused[done + i] = p[i].refused;
		}
	}
	return st;
}
