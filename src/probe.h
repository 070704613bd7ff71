/* Pipelined existence checks of a semaphore's slot or holder queues. */
#ifndef AMQPLOCK_PROBE_H
#define AMQPLOCK_PROBE_H

#include <stdbool.h>
#include <stddef.h>

#include "conn.h"
#include "names.h"

/* One question: does the kind queue of slot exist? */
struct probe {
	enum slot_kind kind;
	unsigned slot;
	bool exists; /* the answer */
	/* The broker nacked it: a queue by that name is registered but could
	 * not take the message (its node is down, or a quorum queue is
	 * between leaders). exists is then true: the queue is there, and
	 * "there" is the careful answer for every question amqplock asks. */
	bool refused;
	/* No answer came within the connection's rpc_timeout (a lease, a
	 * quorum queue, without a leader): exists and refused are set too,
	 * and the probe is not asked again. Only leases are let off so; any
	 * other silence is the connection's end. */
	bool unanswered;
};

/* Answers p[0..n-1]. A probe is a mandatory publish with confirms: it says
 * whether a queue by that name exists, not who holds it, and it never
 * leaves a message behind. Probes go out in batches and their answers are
 * read afterwards, so the cost is a few round trips whatever n is. */
enum al_status probe_queues(struct conn *c, const struct sem_name *sn, struct probe *p, size_t n);

/* The same for the kind queues of slots first..first+count-1: exists[i]
 * answers for slot first + i, and refused[i] (if refused is not NULL)
 * says it was a refusal. */
enum al_status probe_slots(struct conn *c, const struct sem_name *sn, enum slot_kind kind,
			   unsigned first, unsigned count, bool *exists, bool *refused);

#endif
