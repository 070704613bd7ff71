#include "probe.h"

#include <stdlib.h>
#include <string.h>

/* Probes sent before their answers are read. Large enough to make 1000
 * probes a handful of round trips, small enough that neither side's socket
 * buffers fill while nobody reads. */
#define PROBE_BATCH 1024u

static enum al_status probe_batch(struct conn *c, const struct sem_name *sn, enum slot_kind kind,
				  unsigned first, unsigned count, bool *exists)
{
	char queue[QUEUE_NAME_MAX + 1];
	bool single_acks[PROBE_BATCH] = {false};
	uint64_t base = c->published, confirmed = base, last;
	enum al_status st;
	amqp_method_t m;
	unsigned i;

	for (i = 0; i < count; i++) {
		exists[i] = true;
		sem_name_slot(sn, first + i, kind, queue);
		if ((st = conn_publish_probe(c, queue)) != AL_OK)
			return st;
	}
	last = c->published;
	/* A missing queue's basic.return comes before the basic.ack of the
	 * same probe, so every return is in when the last tag is confirmed.
	 * Returns are matched by routing key: acks may be merged. */
	while (confirmed < last) {
		if ((st = conn_recv(c, &m)) != AL_OK)
			return conn_refused(c, st, "probing", queue);
		if (m.id == AMQP_BASIC_RETURN_METHOD) {
			amqp_basic_return_t *r = m.decoded;
			unsigned slot = sem_name_parse_slot(sn, r->routing_key.bytes,
							    r->routing_key.len, kind);
			if (slot >= first && slot - first < count)
				exists[slot - first] = false;
		} else if (m.id == AMQP_BASIC_ACK_METHOD) {
			amqp_basic_ack_t *a = m.decoded;

			if (a->delivery_tag <= confirmed || a->delivery_tag > last)
				continue;
			if (a->multiple)
				confirmed = a->delivery_tag;
			else
				single_acks[a->delivery_tag - base - 1] = true;
			while (confirmed < last && single_acks[confirmed - base])
				confirmed++;
		} else if (m.id == AMQP_BASIC_NACK_METHOD) {
			return fail(AL_BROKER, "the broker at %s could not handle a probe of %s",
				    c->where, queue);
		}
	}
	return AL_OK;
}

enum al_status probe_slots(struct conn *c, const struct sem_name *sn, enum slot_kind kind,
			   unsigned first, unsigned count, bool *exists)
{
	enum al_status st = AL_OK;
	unsigned done, n;

	for (done = 0; done < count && st == AL_OK; done += n) {
		n = count - done < PROBE_BATCH ? count - done : PROBE_BATCH;
		st = probe_batch(c, sn, kind, first + done, n, exists + done);
	}
	return st;
}
