/* Semaphore names and the queue names derived from them. Pure functions:
 * no broker, no printing. */
#ifndef AMQPLOCK_NAMES_H
#define AMQPLOCK_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#define NAME_MAX_BYTES   200
#define PREFIX_MAX_BYTES 40
/* The broker's limit on a queue name. */
#define QUEUE_NAME_MAX 255
/* Slot numbers are capped so that every queue name fits comfortably and a
 * typo cannot ask the broker for a billion queues. */
#define SLOTS_MAX 10000u

/* Queue names of one semaphore: "<prefix><name>" is its admin mutex,
 * "<prefix><name>-<k>-A" / "-<k>-B" / "-<k>-L" its slot k, the holder of
 * slot k and the holder's lease, and "<prefix><name>#quorum" exists when
 * its slots are quorum queues (so that holders make quorum leases);
 * "<prefix><name>#waiters" is the line of clients waiting for a slot
 * that older amqplocks wait in, "<prefix><name>#line" the line of entries
 * that newer ones wait in, each entry naming its waiter's own queue,
 * "<prefix><name>#w" and 12 hex digits; "<prefix><name>#tokens" is the
 * stream whose offsets are its fencing tokens. */
/* Room left for "-<slot>-A" with any unsigned slot number. */
#define BASE_MAX (QUEUE_NAME_MAX - 14)

struct sem_name {
	char base[BASE_MAX + 1];
	size_t len;
};

/* NULL if name is a valid semaphore name, else why it is not. */
const char *names_problem(const char *name);
/* NULL if prefix is a valid queue-name prefix, else why it is not. */
const char *names_prefix_problem(const char *prefix);

/* Fills sn from a prefix and name that passed the checks above; returns
 * NULL, or why the combination is refused (e.g. it starts with "amq."). */
const char *sem_name_init(struct sem_name *sn, const char *prefix, const char *name);

enum slot_kind {
	SLOT_QUEUE = 'A',
	HOLDER_QUEUE = 'B',
	LEASE_QUEUE = 'L',
	/* A removed slot's drain marker (drain.c): its holder runs on. */
	DRAIN_QUEUE = 'D',
	/* One per semaphore each: their "slot" is 1. */
	QUORUM_MARKER_QUEUE = 'Q',
	WAITERS_QUEUE = 'W',
	LINE_QUEUE = 'N',
	TOKENS_QUEUE = 'T',
};

/* Writes the queue name of slot k into buf (QUEUE_NAME_MAX + 1 bytes). */
void sem_name_slot(const struct sem_name *sn, unsigned slot, enum slot_kind kind, char *buf);

/* Writes the name of a waiter's own queue, made of the low 48 bits of id,
 * into buf (QUEUE_NAME_MAX + 1 bytes). */
void sem_name_waiter(const struct sem_name *sn, unsigned long long id, char *buf);

/* Whether queue (len bytes, not NUL-terminated) is the name of a waiter's
 * own queue of sn, as sem_name_waiter makes them. */
bool sem_name_is_waiter(const struct sem_name *sn, const char *queue, size_t len);

/* The slot number if queue (len bytes, not NUL-terminated) is the kind
 * queue of some slot of sn, else 0 (the quorum marker: 1 if it is). */
unsigned sem_name_parse_slot(const struct sem_name *sn, const char *queue, size_t len,
			     enum slot_kind kind);

#endif
