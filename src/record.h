/* The size record: what keeps a semaphore's max when its slot queues go.
 *
 * Slot k of a semaphore is recorded by a durable exchange named as its
 * slot queue, "<prefix><name>-<k>-A" (exchanges and queues have names of
 * their own). RabbitMQ never expires an exchange, whatever a policy says,
 * so an `expires` policy that deletes idle slot queues, or a slot queue
 * deleted by hand, leaves a hole that the record shows, not a smaller
 * semaphore. Administrators keep the record as they keep the slots: 1..max
 * without holes, written after the slot queues when a semaphore grows and
 * cut before them when it shrinks, so that the record says no more than
 * the slots amqplock has made. A create is the exception: it writes the
 * record first, from slot 2 up, then the slot queues, and records slot 1
 * last, so that a create stopped halfway leaves either a record nobody
 * reads (no slot 1: the semaphore does not exist) or a semaphore of the
 * size asked for whose missing slot queues are holes, and slot 1 not
 * recorded says which (record_unfinished). A semaphore made before the
 * record (amqplock 0.2 and older) has none until an administrative command
 * writes it. docs/design.md, "The size record", argues it.
 *
 * A semaphore paused at max 0 has no slot to record: slot 0's exchange,
 * "<prefix><name>-0-A" (no slot queue has that name), says that it exists
 * all the same. It is there only while max is 0: written before the last
 * slot is cut when a semaphore shrinks to 0, cut once slots are recorded
 * again, and cut first by destroy (docs/design.md, "Paused at max 0").
 *
 * Reading the record needs no permission on RabbitMQ before 4.2.6 and any
 * one of configure, write or read on the exchanges from then on; a reader
 * refused goes without it, as if there were none. Nothing here prints. */
#ifndef AMQPLOCK_RECORD_H
#define AMQPLOCK_RECORD_H

#include <stdbool.h>

#include "conn.h"
#include "names.h"

/* The recorded max into *max (0: no record), found by passive declares of
 * the exchanges, starting at hint (the max the slot queues suggest): two
 * questions when it is right, a search when not; 0 too if the broker
 * would not let us look. */
enum al_status record_read(struct conn *c, const struct sem_name *sn, unsigned hint, unsigned *max);

/* What a create stopped halfway left: with the record read as max (0:
 * none), *top is max if slot 1 is not recorded, or, with no record read,
 * the top of one recorded from slot 2 up (a create stopped while writing
 * it); else 0. One question or a search, for administrators. */
enum al_status record_unfinished(struct conn *c, const struct sem_name *sn, unsigned max,
				 unsigned *top);

/* Whether the pause marker (slot 0's exchange) is there, into *paused;
 * *known goes false if the broker would not let us look (then *paused is
 * false). */
enum al_status record_paused(struct conn *c, const struct sem_name *sn, bool *paused, bool *known);

/* Records slots from..to (ascending; from > to: nothing). */
enum al_status record_write(struct conn *c, const struct sem_name *sn, unsigned from, unsigned to);

/* Takes slots top..from off the record, highest first (top < from:
 * nothing). */
enum al_status record_cut(struct conn *c, const struct sem_name *sn, unsigned top, unsigned from);

#endif
