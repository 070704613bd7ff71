/* The persistent semaphore: durable slot queues <base>-k-A, exclusive
 * holder queues <base>-k-B and an exclusive admin mutex <base>. This
 * module runs the algorithm over a connection; it never prints (beyond -v
 * traces) and never exits, and knows nothing of the command line. */
#ifndef AMQPLOCK_SEM_H
#define AMQPLOCK_SEM_H

#include <stddef.h>

#include "conn.h"
#include "names.h"

struct sem {
	struct conn *conn;
	struct sem_name name;
	const char *label; /* the name as the user gave it, for messages */
	/* How far past the last slot to look for stray slot queues (swept by
	 * admin commands) and for holders left above max (orphans). */
	unsigned overshoot;
	/* Seconds to wait for another administrator's mutex; 0: try once. */
	double admin_wait;
};

enum sem_admin_op {
	SEM_CREATE,  /* n slots; the semaphore must not exist */
	SEM_DESTROY, /* every slot */
	SEM_ADD,     /* n more slots */
	SEM_REMOVE,  /* n fewer slots, never below 0 */
	SEM_SET_MAX, /* exactly n slots */
};

struct sem_change {
	unsigned previous; /* slots before */
	unsigned max;      /* slots after */
	unsigned swept;    /* stray slot queues found above max and deleted */
};

/* Runs one administrative change under the admin mutex. Every operation
 * but SEM_CREATE needs an existing semaphore (AL_NOT_FOUND otherwise). */
enum al_status sem_admin(struct sem *s, enum sem_admin_op op, unsigned n, struct sem_change *out);

/* The number of slots: slot queues 1..max exist, max + 1 does not. */
enum al_status sem_max(struct sem *s, unsigned *max);

struct slot_list {
	unsigned *slot; /* ascending */
	size_t len, cap;
};

struct sem_status {
	unsigned max;
	struct slot_list held, free, orphans;
};

/* A snapshot without the admin mutex: it may be stale by the time it is
 * read. Free it with sem_status_free, also after a failure. */
enum al_status sem_status(struct sem *s, struct sem_status *out);
void sem_status_free(struct sem_status *st);

#endif
