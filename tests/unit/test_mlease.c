/* The lease made of messages: what a holder knows and the rules of its
 * requests (mlease.h). Each failure model/mlease.pml found without a rule
 * (its BUG_ variants) is a case here. */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "mlease.h"
#include "rules.h"
#include "tap.h"

#define TOKEN 77
#define OTHER 99
#define D     40.0

/* A lease claimed at t, both publishes confirmed. */
static void claimed_at(struct mlease *l, double t)
{
	mlease_init(l, TOKEN, D, t);
	mlease_published(l, 0, t, true);
	mlease_published(l, 1, t, true);
}

/* The steps of one renewal at `now`, each answered as `answer` says: a
 * publish of ours confirmed unless refused[k], a take finding found[k].
 * The steps as letters (P publish, T take, B put back) and queues, e.g.
 * "T0 P0 T1 P1". */
static bool renew(struct mlease *l, double now, const bool refused[2], const int64_t found[2],
		  bool holder_ours, char *trace)
{
	struct mlease_renewal r;
	enum mlease_step step;
	unsigned k = 9;
	char *p = trace;

	*p = '\0';
	mlease_renewal_begin(&r, now);
	while ((step = mlease_renewal_next(l, &r, now, &k)) != MLEASE_DONE) {
		p += sprintf(p, "%s%c%u", p == trace ? "" : " ",
			     step == MLEASE_PUBLISH ? 'P'
			     : step == MLEASE_TAKE  ? 'T'
						    : 'B',
			     k);
		if (step == MLEASE_PUBLISH) {
			mlease_published(l, k, now, !refused[k]);
			mlease_renewal_published(&r, !refused[k]);
		} else if (step == MLEASE_TAKE) {
			mlease_take_sent(l, k);
			mlease_renewal_taken(&r, found[k]);
		}
		if (p - trace > 60)
			break;
	}
	return mlease_renewal_end(l, &r, holder_ours);
}

static void test_knowing(void)
{
	struct mlease l;
	double young;

	mlease_init(&l, TOKEN, D, 10);
	ok(l.token == TOKEN && l.lease == D && l.renewed == 10,
	   "a claim's lease counts from before the claim was sent");
	ok(!mlease_claimed(&l) && !mlease_ours(&l, 0, 10) && !mlease_ours(&l, 1, 10),
	   "nothing is known before a publish is confirmed");
	mlease_published(&l, 0, 10, true);
	mlease_published(&l, 1, 10, false);
	ok(!mlease_claimed(&l), "a claim holds only if every queue took its message");
	ok(mlease_ours(&l, 0, 10) && !mlease_ours(&l, 1, 10),
	   "a refused publish is not ours: a refused claim takes back only queue 0");
	mlease_published(&l, 1, 10, true);
	ok(mlease_claimed(&l), "both publishes confirmed: the claim holds");
	young = 10 + D - lease_margin(D);
	ok(mlease_ours(&l, 0, young - 0.001) && !mlease_ours(&l, 0, young),
	   "ours only while younger than the lease by its margin (BUG_TAKE_BACK_OLD: an older "
	   "one may have run out by the time the take arrives, and the queue hold the next "
	   "holder's)");
	mlease_take_sent(&l, 0);
	ok(!mlease_ours(&l, 0, 11) && !mlease_claimed(&l),
	   "a take sent, answered or not, leaves the queue unknown (BUG_TAKE_UNKNOWN)");
	ok(mlease_deadline(&l) == rules_kill_deadline(10, D),
	   "the deadline is the lease's margin before the broker may drop the messages");
}

static void test_renewal(void)
{
	static const bool confirm[2] = {false, false}, refuse1[2] = {false, true};
	static const int64_t ours[2] = {TOKEN, TOKEN}, other1[2] = {TOKEN, OTHER},
			     nothing[2] = {0, 0};
	struct mlease l;
	char trace[80];
	double late;

	claimed_at(&l, 0);
	ok(renew(&l, 1, confirm, ours, true, trace) && strcmp(trace, "T0 P0 T1 P1") == 0,
	   "a renewal takes and publishes each queue in turn (%s)", trace);
	ok(l.renewed == 1 && mlease_ours(&l, 0, 1) && mlease_ours(&l, 1, 1),
	   "and both hold ours, from the renewal on");

	claimed_at(&l, 0);
	ok(renew(&l, 1, confirm, nothing, true, trace) && strcmp(trace, "T0 P0 T1 P1") == 0,
	   "a take that found nothing is followed by ours (%s)", trace);

	/* The holder's publish into queue 1 was refused: another's message
	 * is there (a claim that got in once -B was deleted, a forgery). */
	claimed_at(&l, 0);
	mlease_take_sent(&l, 1);
	ok(!renew(&l, 1, refuse1, other1, true, trace) && strcmp(trace, "P1 T1 B1") == 0,
	   "queue 1 not ours: queue 0, our last message, is never taken (BUG_TAKE_LAST), queue "
	   "1's message is put back, and nothing fresh means the slot is lost (%s)",
	   trace);
	ok(mlease_ours(&l, 0, 1) && !mlease_ours(&l, 1, 1), "queue 0 still holds ours");

	claimed_at(&l, 0);
	mlease_take_sent(&l, 1);
	ok(renew(&l, 1, confirm, ours, true, trace) && strcmp(trace, "P1 T0 P0 T1 P1") == 0,
	   "first ours into a queue not known to hold it, then each in turn (%s)", trace);

	/* Past the deadline nothing is taken: a message of the last renewal
	 * may be gone any moment, and with it the slot. */
	claimed_at(&l, 0);
	ok(!renew(&l, mlease_deadline(&l), confirm, ours, true, trace) && trace[0] == '\0',
	   "at the deadline a renewal takes nothing (%s)", trace);
	claimed_at(&l, 0);
	mlease_take_sent(&l, 0);
	late = mlease_deadline(&l);
	ok(renew(&l, late, confirm, ours, true, trace) && strcmp(trace, "P0") == 0 &&
		   l.renewed == late,
	   "but it publishes ours where it knows of none, and that renews (%s)", trace);

	/* Taken only while the other queue holds ours from no earlier than
	 * the last renewal: one from before may run out before the deadline
	 * that renewal set. */
	claimed_at(&l, 0);
	l.renewed = 5;
	l.q[1].sent = 6;
	ok(renew(&l, 7, confirm, ours, true, trace) && strcmp(trace, "T0 P0 T1 P1") == 0,
	   "queue 1 published after the last renewal began: queue 0 may be taken (%s)", trace);
	claimed_at(&l, 0);
	l.renewed = 5;
	l.q[0].sent = 6;
	ok(renew(&l, 7, confirm, ours, true, trace) && strcmp(trace, "T1 P1") == 0,
	   "queue 1 older than the last renewal: queue 0 is not taken (%s)", trace);

	claimed_at(&l, 0);
	ok(!renew(&l, 1, confirm, ours, false, trace) && l.renewed == 0,
	   "our holder queue gone: not renewed, the deadline unchanged");
}

/* The deadline counts from the renewal's first request, however late its
 * answers are read (a client stopped in the middle). */
static void test_renewal_began(void)
{
	struct mlease l;
	struct mlease_renewal r;
	unsigned k;

	claimed_at(&l, 0);
	mlease_renewal_begin(&r, 3);
	ok(mlease_renewal_next(&l, &r, 3, &k) == MLEASE_TAKE && k == 0, "the renewal begins at 3");
	mlease_take_sent(&l, 0);
	mlease_renewal_taken(&r, TOKEN);
	ok(mlease_renewal_next(&l, &r, 30, &k) == MLEASE_PUBLISH && k == 0, "answered at 30");
	mlease_published(&l, 0, 3, true);
	mlease_renewal_published(&r, true);
	ok(mlease_renewal_next(&l, &r, 30, &k) == MLEASE_TAKE && k == 1, "queue 1 next");
	mlease_take_sent(&l, 1);
	mlease_renewal_taken(&r, TOKEN);
	ok(mlease_renewal_next(&l, &r, 30, &k) == MLEASE_PUBLISH && k == 1, "ours again");
	mlease_published(&l, 1, 3, true);
	mlease_renewal_published(&r, true);
	ok(mlease_renewal_next(&l, &r, 30, &k) == MLEASE_DONE, "done");
	ok(mlease_renewal_end(&l, &r, true) && l.renewed == 3,
	   "renewed from 3, when the renewal began, not from when it was answered");
	ok(mlease_renewal_next(&l, &r, 30, &k) == MLEASE_DONE, "and stays done");
}

static void test_handover(void)
{
	struct mlease r, w, before;
	struct mlease_handed h;

	claimed_at(&r, 100);
	mlease_published(&r, 0, 100.25, true);
	mlease_published(&r, 1, 100.5, true);
	mlease_hand(&r, 101, &h);
	ok(h.token == TOKEN && h.renewed_ms == 1000 && h.sent_ms[0] == 750 && h.sent_ms[1] == 500,
	   "the releaser gives its token and ages in ms");
	mlease_take_sent(&r, 1);
	mlease_hand(&r, 100.2500001, &h);
	ok(h.renewed_ms == 251 && h.sent_ms[0] == 1 && h.sent_ms[1] == -1,
	   "ages are rounded up, a queue not known is -1");
	mlease_hand(&r, 99, &h);
	ok(h.renewed_ms == 0 && h.sent_ms[0] == 0, "and never below 0");

	/* The adopter's clock is its own: it asked at 50 and read the answer
	 * at 60 (stopped meanwhile). */
	claimed_at(&r, 100);
	mlease_hand(&r, 101, &h);
	memset(&w, 0, sizeof(w));
	ok(mlease_adopt(&w, &h, D, 50) && w.token == TOKEN && w.lease == D && w.renewed == 49 &&
		   w.q[0].known && w.q[0].sent == 49 && w.q[1].known,
	   "every age counts from the adopter's ask");
	ok(mlease_ours(&w, 0, 60) && !mlease_ours(&w, 0, 89 - lease_margin(D)) &&
		   mlease_deadline(&w) == rules_kill_deadline(49, D),
	   "so a message runs out for the adopter no later than it does (BUG_ADOPT_AGE0: counted "
	   "from the reading at 60, it would still look young at 86)");

	h.sent_ms[1] = -1;
	ok(mlease_adopt(&w, &h, D, 50) && w.q[0].known && !w.q[1].known,
	   "a queue the releaser did not know is not known");

	before = w;
	h.token = 0;
	ok(!mlease_adopt(&w, &h, D, 50) && memcmp(&w, &before, sizeof(w)) == 0,
	   "no token: refused, nothing changed");
	h.token = TOKEN;
	h.renewed_ms = -1;
	ok(!mlease_adopt(&w, &h, D, 50) && memcmp(&w, &before, sizeof(w)) == 0,
	   "a negative age: refused");
	h.renewed_ms = 0;
	h.sent_ms[0] = -2;
	ok(!mlease_adopt(&w, &h, D, 50) && memcmp(&w, &before, sizeof(w)) == 0,
	   "an age below -1: refused");
}

int main(void)
{
	test_knowing();
	test_renewal();
	test_renewal_began();
	test_handover();
	return done_testing();
}
