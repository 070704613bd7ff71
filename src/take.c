/* Waiting for a slot (hold_take): a claim at once, or a place in the line
 * (or polling) until a claim succeeds, the wait ends or the line stalls;
 * the command's keeper is readied while a claim is answered. Holding the
 * slot once it is ours is hold.c's. */
#include "hold.h"

#include "clock.h"
#include "conn.h"
#include "rules.h"
#include "signals.h"
#include "supervise.h"

/* In line, but not known to be first: the first and longest pauses
 * between looks for a free slot that nobody announced (a holder killed,
 * a lease run out). The first in line looks as often as any waiter did
 * before the line (RETRY_FIRST to RETRY_LONGEST). */
#define LINE_FIRST   0.25
#define LINE_LONGEST 2.0
/* In line: how long a waiter sees a slot free, look after look, before it
 * asks whether the first in line is stuck (sem_unstick_line). A live
 * first in line takes a free slot within milliseconds of its wake-up.
 * Once it has seen one free, a waiter looks every LINE_STALL_LOOK: a
 * stuck first in line costs the slot at most a look's pause (LINE_LONGEST)
 * + LINE_STALL + LINE_STALL_LOOK + the half second of the question, about
 * 8 s (docs/guarantees.md). */
#define LINE_STALL      5.0
#define LINE_STALL_LOOK 0.5
/* Waiting for a slot: the waiting callback is first called after this
 * long (a wait that ends sooner is no news). */
#define WAITING_NEWS 1.0

/* A wake-up has come, or a lease has been handed to us (an answer to
 * our ask that came late). */
static bool woken(const struct sem *s)
{
	return sem_woken(s) || sem_offered(s);
}

/* A pause between tries, cut short by a wake-up; takes heartbeats
 * meanwhile, which keeps the connection alive. */
static enum al_status pause_for_wake(struct sem *s, struct deadline next)
{
	enum al_status st;

	while (!woken(s) && !deadline_passed(next) && !signals_stop_asked())
		if (conn_wait_readable(s->conn, next) && (st = conn_drain(s->conn)) != AL_OK)
			return st;
	return AL_OK;
}

/* Whether we wait in the line: joined, and neither refused (permissions,
 * a queue an older amqplock declared otherwise) nor cancelled (the line
 * deleted behind our back), in which case we take what is free. */
static bool in_line(const struct sem *s)
{
	return sem_in_line(s);
}

/* Asks for the lease offered (sem_adopt), signals held back meanwhile:
 * killed between its ask and its adoption, a waiter would leave the lease
 * handed to it to block the slot for its length. At most ASK_WAIT and a
 * round trip; adopted, the slot is ours and a signal that came is read
 * with the others (the command does not start, the slot is released). */
static enum al_status adopt(struct sem *s, unsigned *slot)
{
	sigset_t before;
	enum al_status st;

	signals_hold_back(&before);
	st = sem_adopt(s, slot);
	if (st != AL_OK)
		signals_release(&before);
	return st;
}

/* One try while waiting. In line, only a wake-up lets a waiter take a
 * slot: it is then the oldest waiter. Otherwise it looks, and a free slot
 * wakes the oldest (itself, maybe): holders that die and leases that run
 * out say nothing, so every waiter looks now and then. Outside the line
 * (it refused us) a waiter takes what it finds. *free_since: since when
 * (now_seconds()) every look has found a slot free, 0 if the last did
 * not; after LINE_STALL of that the first in line may be stuck. */
static enum al_status try_in_line(struct sem *s, unsigned *slot, unsigned *max, double *free_since)
{
	enum al_status st;
	bool restarted;

	if (!in_line(s))
		return sem_acquire(s, SEM_TAKE, slot, max);
	if (woken(s)) {
		trace("woken: first in line for a slot of %s", s->label);
		*free_since = 0;
		/* Its holder's lease, offered: taken as it is, or the
		 * slot is released as usual, which wakes us again. */
		if (sem_offered(s))
			return adopt(s, slot);
		st = sem_acquire(s, SEM_TAKE_WOKEN, slot, max);
		/* Taken or not, this wake-up is spent; unacknowledged, it
		 * would go to the next in line when we leave. */
		if (st == AL_OK || st == AL_BUSY)
			sem_wake_done(s);
		return st;
	}
	st = sem_find_free(s, slot, max);
	if (st != AL_OK) {
		*free_since = 0;
		return st;
	}
	*slot = 0;
	if (!*free_since)
		*free_since = now_seconds();
	if (now_seconds() - *free_since >= LINE_STALL) {
		*free_since = 0;
		if ((st = sem_unstick_line(s, &restarted)) != AL_OK)
			return st;
		if (restarted)
			return sem_acquire(s, SEM_TAKE, slot, max);
	} else if (!woken(s)) {
		/* Woken meanwhile (a release's wake-up, most likely): the
		 * next try takes it; another wake-up would only make work. */
		trace("a slot of %s is free; waking the first in line", s->label);
		if ((st = sem_wake_line(s)) != AL_OK)
			return st;
	}
	return fail(AL_BUSY, "a slot of %s is free for the first in line", s->label);
}

/* How long after it was sent a claim may be answered and still count
 * (sem.h, claim_window): within the reply timeout, and before the command
 * would get --lost-signal for want of a renewal (a lease's arithmetic, as
 * kill_deadline has it) or, without a lease, before the silence that
 * tells a lost connection (the broker drops one only later). */
static double claim_window(const struct hold_opts *o, const struct conn *c)
{
	return rules_claim_window(o->lease, o->grace, c->heartbeat, c->rpc_timeout);
}

/* --token: the fencing token, drawn once the slot is ours (one drawn
 * before the grant could be smaller than that of a grant made
 * meanwhile) and before anything runs. Without one the slot goes back
 * at once (if the connection is gone, its lease runs out). */
static enum al_status draw_token(struct sem *s, const struct hold_opts *o, unsigned slot)
{
	enum al_status st = sem_fencing_token(s, &s->hold->fencing_token);

	if (st == AL_OK)
		return st;
	hold_keeper_abandon(o->keeper);
	if (s->conn->dead || sem_released(s, slot) != AL_OK)
		trace("could not give slot %u back: its lease, if any, runs out", slot);
	return st;
}

enum al_status hold_take(struct sem *s, const struct hold_opts *o, struct deadline until,
			 unsigned *slot, unsigned *max)
{
	struct backoff pauses = backoff_start(RETRY_FIRST, RETRY_LONGEST);
	double start = now_seconds(), free_since = 0;
	enum al_status st;
	bool watching = false, told = false, restarted = false;

	/* A waiter that is stopped keeps its place and would hold back all
	 * behind it: on Ctrl-Z it leaves the line first, and joins it again,
	 * last, once continued. Where the kernel would discard the stop,
	 * leaving would only lose our place: SIGTSTP is left to it. */
	if (super_can_stop())
		signals_note_stops(true);
	if (o->keeper) {
		o->keeper->end = (struct lease_end){.s = s, .o = o};
		s->hold->claim_sent = hold_keeper_ready;
		s->hold->claim_arg = o->keeper;
	}
	s->hold->claim_window = claim_window(o, s->conn);
	for (;;) {
		status_clear();
		st = watching ? try_in_line(s, slot, max, &free_since)
			      : sem_acquire(s, SEM_TAKE_UNLESS_LINE, slot, max);
		if (st != AL_OK)
			hold_keeper_abandon(o->keeper);
		/* -n cannot wait to see a stuck first in line lose its
		 * turn: it asks at once, once. */
		if (st == AL_BUSY && o->nonblock && s->hold->behind_line && !restarted &&
		    sem_unstick_line(s, &restarted) == AL_OK && restarted)
			continue;
		if (st != AL_BUSY || o->nonblock || deadline_passed(until))
			break;
		/* Waiting: "all slots are held" is not a failure (yet), and must
		 * not hide the cause of one while waiting. */
		status_clear();
		/* Into the line, last. A slot freed between the try above and
		 * joining woke nobody: a look straight after joining finds it. */
		if (!watching) {
			watching = true;
			if (sem_join_line(s, sem_handover_ear) != AL_OK && s->conn->dead) {
				st = AL_CONNECTION;
				break;
			}
			if (in_line(s))
				continue;
		}
		/* Only the first in line takes a slot, so the others look
		 * less often: a long line does not load the broker. */
		if (!in_line(s) || sem_first_in_line(s)) {
			pauses.longest = RETRY_LONGEST;
			pauses.pause = sooner(pauses.pause, RETRY_LONGEST);
		} else {
			pauses.longest = free_since ? LINE_STALL_LOOK : LINE_LONGEST;
			pauses.pause = pauses.pause < LINE_FIRST
					       ? LINE_FIRST
					       : sooner(pauses.pause, pauses.longest);
		}
		if (o->events.waiting && now_seconds() - start >= WAITING_NEWS) {
			told = true;
			o->events.waiting(o->events.arg, *max, now_seconds() - start);
		}
		sem_line_keep(s);
		if ((st = pause_for_wake(s, deadline_in(backoff_next(&pauses, until)))) != AL_OK)
			break;
		if (signals_stop_asked()) {
			trace("stopped: leaving the line of %s", s->label);
			sem_handover_forget(s);
			sem_leave_line(s, false);
			watching = false;
			signals_stop_now();
			trace("continued: joining the line of %s again, last", s->label);
			continue;
		}
	}
	signals_note_stops(false);
	s->hold->claim_sent = NULL;
	if (told)
		o->events.waiting(o->events.arg, *max, -1);
	/* Out of the line: the next in it is the oldest now. A wake-up
	 * not acknowledged (we are leaving without a slot) goes to it. */
	sem_handover_forget(s);
	sem_leave_line(s, st == AL_OK);
	if (st == AL_BUSY)
		st = sem_busy_unless_refused(s);
	if (st == AL_BUSY && o->wait > 0 && !o->nonblock)
		fail_context(AL_BUSY, "timed out after %g s waiting: ", o->wait);
	if (st == AL_OK && o->token)
		st = draw_token(s, o, *slot);
	return st;
}
