/* The semaphores under a prefix, made out of the broker's lists of queue
 * and exchange names (as the management HTTP API gives them: mgmt.c), and
 * the waiters of one semaphore, out of its lists of consumers and
 * connections. Pure functions: no network, no printing. */
#ifndef AMQPLOCK_LIST_H
#define AMQPLOCK_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "names.h"
#include "status.h"

/* One semaphore as the lists show it. */
struct sem_entry {
	char name[NAME_MAX_BYTES + 1]; /* without the prefix */
	/* The size record's highest slot, else the highest slot queue's. */
	unsigned max;
	unsigned held;    /* slots with a holder queue or a lease */
	unsigned waiting; /* consumers of its line (#waiters) */
	bool recorded;    /* it has a size record */
};

struct sem_list {
	struct sem_entry *sem; /* sorted by name */
	size_t len, cap;
};

/* Fills *l from the JSON arrays of the management API's
 * /api/queues/VHOST?columns=name,consumers and /api/exchanges/VHOST?
 * columns=name (exchanges may be NULL: none known): every semaphore under
 * prefix that has a slot queue or a size record. AL_BROKER (with a
 * message) if either text is not such an array, AL_INTERNAL if memory ran
 * out; then *l is empty. Names that no semaphore can have are passed
 * over. */
enum al_status list_parse(const char *prefix, const char *queues, const char *exchanges,
			  struct sem_list *l);
void list_free(struct sem_list *l);

/* The semaphore of l named name, or NULL. */
const struct sem_entry *list_find(const struct sem_list *l, const char *name);

/* The name in l closest to name (a typo away: an edit distance of at most
 * 1, 2 for names of 5 bytes and more, 3 from 12; a swap of two neighbours
 * counts 1), the first such in order on a tie; NULL if none is, or if
 * name itself is in l. */
const char *list_nearest(const struct sem_list *l, const char *name);

/* The same among n words (a mistyped command: "hlod" -> "hold"). */
const char *list_nearest_word(const char *const *words, size_t n, const char *name);

/* A client waiting in a semaphore's line, as its connection describes
 * itself to the broker (client properties: anyone may write them, so they
 * are hints to print, made printable). */
struct list_waiter {
	char host[64];
	long pid;
	char label[65];
	double connected_at; /* seconds since the epoch */
};

struct list_waiters {
	struct list_waiter *w; /* oldest connection first */
	size_t len;
};

/* Fills *out from the JSON arrays of the management API's
 * /api/consumers/VHOST (queue.name, channel_details.connection_name) and
 * /api/vhosts/VHOST/connections (name, client_properties, connected_at):
 * one entry per connection that consumes sn's line #waiters or a waiter's
 * own queue of sn (sem_name_is_waiter). AL_BROKER if a text is not such an
 * array, AL_INTERNAL if memory ran out; then *out is empty. */
enum al_status list_waiters(const struct sem_name *sn, const char *consumers,
			    const char *connections, struct list_waiters *out);
void list_waiters_free(struct list_waiters *w);

#endif
