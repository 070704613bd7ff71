/* The lease made of messages (docs/design.md, "A lease as a message";
 * model/mlease.pml is its model): what a holder knows of its slot's lease
 * queues, and the rules that choose each request it sends there, as
 * functions of plain values. Pure: the caller reads the clock (the boot
 * clock, in seconds) and sends the requests. Issue 43 builds the lease on
 * it; the requests are not wired into claim.c and lease.c yet.
 *
 * The rules, each one a failure the model found without it:
 *   - a queue is known to hold our message once a publish of ours there
 *     was confirmed, and no longer once a take of ours there is sent,
 *     answered or not (mlease_published, mlease_take_sent);
 *   - nobody takes a message not known to be theirs and younger than the
 *     lease by its margin (mlease_ours): at a lease's end, when a refused
 *     claim takes back what it got, and in the keeper's last act (the
 *     keeper knows what amqplock tells it: after each confirmed publish,
 *     and before each take is sent);
 *   - a renewal takes a queue only while another holds our message from
 *     no earlier than the last renewal, before our deadline, decided as
 *     the take is sent (mlease_renewal_next);
 *   - the deadline runs from the renewal's first request, not from its
 *     answers (mlease_renewal_end);
 *   - an adopter counts the ages a releaser gave from its own ask, which
 *     the answer follows, not from when it read the answer (mlease_adopt). */
#ifndef AMQPLOCK_MLEASE_H
#define AMQPLOCK_MLEASE_H

#include <stdbool.h>
#include <stdint.h>

/* Lease queues per slot: with one, a renewal's take and publish leave a
 * gap that a lost connection turns into no lease while the command runs. */
#define MLEASE_QUEUES 2u

struct mlease_queue {
	/* It holds our message: a publish of ours was confirmed there, and
	 * no take of ours has been sent there since. */
	bool known;
	/* When that publish was sent: the message runs out a lease later. */
	double sent;
};

struct mlease {
	int64_t token; /* whose the messages are (random, > 0) */
	double lease;  /* how long a message lasts, seconds */
	/* When the last renewal that counted began (a claim's: when it was
	 * sent; an adopted lease's: the releaser's, dated from our ask). */
	double renewed;
	struct mlease_queue q[MLEASE_QUEUES];
};

/* A lease about to be claimed at `now`: nothing known yet. */
void mlease_init(struct mlease *l, int64_t token, double lease, double now);

/* The answer to a publish of ours into queue k, sent at `sent`. */
void mlease_published(struct mlease *l, unsigned k, double sent, bool confirmed);

/* A take of queue k is about to be sent: from now on it is not known to
 * hold ours, whatever the answer (or none) says. */
void mlease_take_sent(struct mlease *l, unsigned k);

/* Whether queue k may be taken at the lease's end, by a refused claim or
 * by the keeper's last act: known to hold ours, and younger than the
 * lease by its margin (lease_margin), so it is there when the take
 * arrives. Decided as the take is sent. */
bool mlease_ours(const struct mlease *l, unsigned k, double now);

/* Whether a claim's publishes made the lease: every queue took ours. (The
 * holder queue, and the claim window, are the caller's to check.) */
bool mlease_claimed(const struct mlease *l);

/* When our command must have ended: the lease's margin before the
 * broker may drop the messages of the last renewal (rules_kill_deadline).
 * A lease is handed over, or adopted, only before it. */
double mlease_deadline(const struct mlease *l);

/* A renewal, one request at a time, each sent once the answer before it
 * is read. First ours into each queue not known to hold it; then each
 * queue in turn, while another is known to hold ours from no earlier
 * than the last renewal and our deadline has not passed, taken and
 * published again: ours, or what it held put back. */
enum mlease_step {
	MLEASE_PUBLISH,  /* ours into queue k */
	MLEASE_TAKE,     /* queue k taken (basic.get, acknowledged) */
	MLEASE_PUT_BACK, /* what the take found, published into queue k again */
	MLEASE_DONE,     /* nothing more: mlease_renewal_end */
};

struct mlease_renewal {
	double began; /* its first request: the deadline counts from it */
	unsigned at;  /* where it is: MLEASE_QUEUES + k in the second round */
	/* A take of queue `at` answered: what it found (0: nothing). */
	bool taken;
	int64_t found;
	/* A message of ours was published afresh. */
	bool fresh;
};

void mlease_renewal_begin(struct mlease_renewal *r, double now);
/* The next request, into *k. A take is decided here: call
 * mlease_take_sent and send it at once. */
enum mlease_step mlease_renewal_next(const struct mlease *l, struct mlease_renewal *r, double now,
				     unsigned *k);
/* The answers: to a publish of ours (mlease_published too), and to a take
 * (the token of what it found, 0 if nothing or not a lease message). */
void mlease_renewal_published(struct mlease_renewal *r, bool confirmed);
void mlease_renewal_taken(struct mlease_renewal *r, int64_t found);
/* Renewed if a message of ours was published afresh and our holder queue
 * is still ours: the deadline then counts from the renewal's beginning.
 * False: the slot is lost. */
bool mlease_renewal_end(struct mlease *l, const struct mlease_renewal *r, bool holder_ours);

/* What a releaser tells the first in line with the lease, as ages at the
 * moment of its answer, in ms, rounded up: older is the safe direction. */
struct mlease_handed {
	int64_t token;
	int64_t renewed_ms;             /* its last renewal's beginning */
	int64_t sent_ms[MLEASE_QUEUES]; /* each known message's; -1: not known */
};

void mlease_hand(const struct mlease *l, double now, struct mlease_handed *h);
/* The lease handed over, taken as ours by one that asked for it at
 * `asked`: every age counted from the ask. False, and l untouched, if the
 * answer makes no sense (no token, a negative age). */
bool mlease_adopt(struct mlease *l, const struct mlease_handed *h, double lease, double asked);

#endif
