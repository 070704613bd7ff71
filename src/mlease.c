/* The lease made of messages: what a holder knows of its lease queues and
 * the rules of its requests there (mlease.h; model/mlease.pml). Pure. */
#include "mlease.h"

#include <string.h>

#include "clock.h"
#include "rules.h"

void mlease_init(struct mlease *l, int64_t token, double lease, double now)
{
	memset(l, 0, sizeof(*l));
	l->token = token;
	l->lease = lease;
	/* A claim's lease lasts from before it was sent. */
	l->renewed = now;
}

void mlease_published(struct mlease *l, unsigned k, double sent, bool confirmed)
{
	l->q[k].known = confirmed;
	l->q[k].sent = sent;
}

void mlease_take_sent(struct mlease *l, unsigned k)
{
	l->q[k].known = false;
}

bool mlease_ours(const struct mlease *l, unsigned k, double now)
{
	/* Older, it may have run out by the time the take arrives, and the
	 * queue hold the next holder's message: the margin covers the take's
	 * way as it covers the deadline's. */
	return l->q[k].known && now - l->q[k].sent < l->lease - lease_margin(l->lease);
}

bool mlease_claimed(const struct mlease *l)
{
	unsigned k;

	for (k = 0; k < MLEASE_QUEUES; k++)
		if (!l->q[k].known)
			return false;
	return true;
}

double mlease_deadline(const struct mlease *l)
{
	return rules_kill_deadline(l->renewed, l->lease);
}

/* Queue j holds ours from no earlier than the last renewal, whose
 * deadline has not passed: it outlasts our deadline whatever happens to
 * the other queue. */
static bool fresh(const struct mlease *l, unsigned j, double now)
{
	return l->q[j].known && l->q[j].sent >= l->renewed && now < mlease_deadline(l);
}

/* Whether queue k may be taken: another queue keeps the slot meanwhile,
 * so no claim can get past a take of ours. */
static bool may_take(const struct mlease *l, unsigned k, double now)
{
	unsigned j;

	for (j = 0; j < MLEASE_QUEUES; j++)
		if (j != k && fresh(l, j, now))
			return true;
	return false;
}

void mlease_renewal_begin(struct mlease_renewal *r, double now)
{
	memset(r, 0, sizeof(*r));
	r->began = now;
}

enum mlease_step mlease_renewal_next(const struct mlease *l, struct mlease_renewal *r, double now,
				     unsigned *k)
{
	unsigned q;

	/* First round: ours into every queue not known to hold it (the
	 * broker takes it only where the queue is empty). */
	while (r->at < MLEASE_QUEUES) {
		q = r->at++;
		if (!l->q[q].known) {
			*k = q;
			return MLEASE_PUBLISH;
		}
	}
	/* Second round: each queue taken and published again. */
	while (r->at < 2 * MLEASE_QUEUES) {
		q = r->at - MLEASE_QUEUES;
		*k = q;
		if (r->taken) {
			r->taken = false;
			r->at++;
			/* Ours, or nothing: ours again. Another's (a claim
			 * that got in, a forgery): put back as it was. */
			return r->found == 0 || r->found == l->token ? MLEASE_PUBLISH
								     : MLEASE_PUT_BACK;
		}
		if (may_take(l, q, now))
			return MLEASE_TAKE;
		r->at++;
	}
	return MLEASE_DONE;
}

void mlease_renewal_published(struct mlease_renewal *r, bool confirmed)
{
	r->fresh = r->fresh || confirmed;
}

void mlease_renewal_taken(struct mlease_renewal *r, int64_t found)
{
	r->taken = true;
	r->found = found;
}

bool mlease_renewal_end(struct mlease *l, const struct mlease_renewal *r, bool holder_ours)
{
	if (!holder_ours || !r->fresh)
		return false;
	l->renewed = r->began;
	return true;
}

/* An age in ms, rounded up; never below 0. */
static int64_t age_ms(double now, double then)
{
	double ms = (now - then) * 1000.0;
	int64_t whole;

	if (ms <= 0)
		return 0;
	whole = (int64_t)ms;
	return whole < ms ? whole + 1 : whole;
}

void mlease_hand(const struct mlease *l, double now, struct mlease_handed *h)
{
	unsigned k;

	h->token = l->token;
	h->renewed_ms = age_ms(now, l->renewed);
	for (k = 0; k < MLEASE_QUEUES; k++)
		h->sent_ms[k] = l->q[k].known ? age_ms(now, l->q[k].sent) : -1;
}

bool mlease_adopt(struct mlease *l, const struct mlease_handed *h, double lease, double asked)
{
	unsigned k;

	if (h->token <= 0 || h->renewed_ms < 0)
		return false;
	for (k = 0; k < MLEASE_QUEUES; k++)
		if (h->sent_ms[k] < -1)
			return false;
	l->token = h->token;
	l->lease = lease;
	/* The releaser answered after our ask reached it: what it published
	 * a seconds before its answer it published no earlier than a before
	 * our ask. So dated, nothing looks younger than it is, however late
	 * the answer was read. */
	l->renewed = asked - (double)h->renewed_ms / 1000.0;
	for (k = 0; k < MLEASE_QUEUES; k++) {
		l->q[k].known = h->sent_ms[k] >= 0;
		l->q[k].sent = l->q[k].known ? asked - (double)h->sent_ms[k] / 1000.0 : 0;
	}
	return true;
}
