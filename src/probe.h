/* Pipelined existence checks of a semaphore's slot or holder queues. */
#ifndef AMQPLOCK_PROBE_H
#define AMQPLOCK_PROBE_H

#include <stdbool.h>

#include "conn.h"
#include "names.h"

/* Sets exists[i] for the kind queue of slot first + i, i < count. A probe
 * is a mandatory publish with confirms: it says whether a queue by that
 * name exists, not who holds it, and it never leaves a message behind.
 * Probes go out in batches and their answers are read afterwards, so the
 * cost is a few round trips whatever count is. */
enum al_status probe_slots(struct conn *c, const struct sem_name *sn, enum slot_kind kind,
			   unsigned first, unsigned count, bool *exists);

#endif
