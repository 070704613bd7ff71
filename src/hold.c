/* A held slot's life (hold_run), as one state machine: the states and
 * events are hold_parts.h's, and the table `actions` below says what each
 * event does in each state: the slot verified and the lease renewed every
 * second, reconnects while the lease keeps the slot, the job stopped and
 * continued, a lost slot wound down, the release. The command's side
 * (job.c) raises events and never calls back; waiting for the slot is
 * take.c's. */
#include "hold.h"
#include "hold_parts.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "rules.h"
#include "signals.h"
#include "supervise.h"

/* A held slot is re-verified every RULES_VERIFY_INTERVAL (passive
 * declares of its slot and holder queues: one small round trip), so a
 * remove is noticed within a second, and a policy that expires unused
 * queues never takes the holder queue. */
#define VERIFY_INTERVAL RULES_VERIFY_INTERVAL
/* Away: first and longest pause between attempts to reconnect. */
#define FIRST_RECONNECT   0.1
#define LONGEST_RECONNECT 1.0
/* Away: "lease_running_out" comes this long before the command gets
 * --lost-signal. */
#define LEASE_WARNING 5.0

/* How long the broker may stay silent before the slot counts as lost: one
 * heartbeat. The broker itself waits at least twice that before it gives
 * the slot away, so the command is signalled first. Without heartbeats,
 * the reply deadline bounds each verification instead. */
static double silence_limit(const struct holding *h)
{
	return rules_silence(h->s->conn->heartbeat, h->s->conn->rpc_timeout);
}

double hold_silence(unsigned heartbeat, double rpc_timeout)
{
	return rules_silence(heartbeat, rpc_timeout);
}

/* On the boot clock: when the command gets SIGKILL, and --lost-signal,
 * unless a renewal comes first (rules.h). */
static double kill_deadline(const struct holding *h)
{
	return rules_kill_deadline(h->s->hold->lease.renewed, h->o->lease);
}

static double signal_deadline(const struct holding *h)
{
	return rules_signal_deadline(h->s->hold->lease.renewed, h->o->lease, h->o->grace);
}

/* The broker confirmed a renewal sent at `sent` (boot clock); the keeper
 * learns the new deadline. */
static void renewed(struct holding *h, double sent)
{
	if (!h->o->lease)
		return;
	h->s->hold->lease.renewed = sent;
	job_kill_at(h, kill_deadline(h));
}

/* The slot is lost (the cause is recorded): the command gets the lost
 * signal at once. keep_connection: the broker is fine, but the slot is
 * gone (removed). The connection, and with it the holder queue, then
 * stays until the command has ended, so that `wait` (and an add of the
 * slot) sees this holder until its command is really done. The winding
 * down starts at once (a hold without a command is over now). */
static enum hold_event lose(struct holding *h, bool keep_connection)
{
	fail_context(AL_LOST, "lost slot %u of %s: ", h->slot, h->s->label);
	h->lost_at = now_seconds();
	/* The command first: nothing may delay the signal. */
	job_lost(h);
	h->state = HOLD_LOST;
	if (h->o->events.lost)
		h->o->events.lost(h->o->events.arg);
	/* Otherwise no goodbye: the broker may be what went silent. */
	if (!keep_connection)
		conn_abort(h->s->conn);
	return HOLD_EV_TICK;
}

/* When the next verification goes, once one has been answered: in a
 * second, or sooner while our holder queue is still to be declared after
 * a re-attach (sem.h, need_holder): 10 ms, doubling up to the second. The
 * broker most often drops our old connection, whose queue it is, within
 * milliseconds of our hang-up; one it cannot reach (a partition, a node
 * down) takes longer, and is asked less and less often. */
static void next_verification(struct holding *h, double from)
{
	double wait = VERIFY_INTERVAL;

	if (!h->s->hold->lease.need_holder)
		h->holder_tries = 0;
	else if (h->holder_tries < 7)
		wait = 0.01 * (double)(1u << h->holder_tries++);
	h->next_verify = from + wait;
}

/* The broker answered in full. */
static void heard_back(struct holding *h)
{
	h->heard = now_seconds();
	h->verify_sent = 0;
	next_verification(h, h->heard);
}

/* A verification's send time on both clocks. */
static void verification_sent(struct holding *h)
{
	h->verify_sent = now_seconds();
	h->verify_sent_boot = boot_seconds();
	h->next_verify = h->verify_sent + VERIFY_INTERVAL;
}

/* Our slot removed by a --drain shrink (the job runs on), or made again:
 * news for the user, once. */
static void tell_drain(struct holding *h)
{
	bool draining;

	if (!sem_drain_news(h->s, &draining))
		return;
	if (draining)
		job_notice(h, "draining", NULL, 0,
			   "slot %u of %s was removed by a --drain shrink: the command runs on "
			   "to its end, and nobody gets the slot after it",
			   h->slot, h->s->label);
	else
		job_notice(h, "restored", NULL, 0,
			   "slot %u of %s was made again: it is held as before the drain", h->slot,
			   h->s->label);
}

/* Takes what the broker sent, starts or times out a verification: the
 * event it comes to, if any. */
static enum hold_event check_slot(struct holding *h, bool readable)
{
	double now = now_seconds();
	bool verified = false;

	if (readable) {
		h->heard = now;
		if (sem_held_poll(h->s, h->slot, &verified) != AL_OK)
			return h->s->conn->dead ? HOLD_EV_CONN_LOST : HOLD_EV_REFUSED;
		tell_drain(h);
		if (verified && h->verify_sent) {
			next_verification(h, h->verify_sent);
			h->verify_sent = 0;
			renewed(h, h->verify_sent_boot);
		}
	}
	if (h->verify_sent && now - h->verify_sent > silence_limit(h)) {
		fail(AL_LOST, "the broker did not answer a check within %g s", silence_limit(h));
		return HOLD_EV_CONN_LOST;
	}
	if (h->s->conn->heartbeat && now - h->heard > silence_limit(h)) {
		fail(AL_LOST, "the broker has been silent for %.1f s", now - h->heard);
		return HOLD_EV_CONN_LOST;
	}
	if (!h->verify_sent && now >= h->next_verify) {
		if (sem_verify_send(h->s, h->slot) != AL_OK)
			return HOLD_EV_CONN_LOST;
		verification_sent(h);
	}
	return HOLD_EV_NONE;
}

/* One attempt to connect again and take the slot back, within what is
 * left of the lease. AL_OK: held again; AL_LOST: it never will be (the
 * reason recorded); anything else: try again later. */
static enum al_status reattach(struct holding *h, double left)
{
	double sent;
	enum al_status st;

	conn_close(h->s->conn);
	if ((st = conn_open(h->s->conn, h->o->conn_opts, deadline_in(left))) != AL_OK)
		return st;
	sent = boot_seconds();
	st = sem_reattach(h->s, h->slot);
	/* Held again: replies may take their usual time. */
	conn_limit(h->s->conn, deadline_never());
	if (st == AL_OK)
		renewed(h, sent);
	return st;
}

/* Waits, within the reply deadline, for the answers to the verification
 * outstanding; the lease is renewed as of its sending. */
static enum al_status await_verification(struct holding *h)
{
	struct deadline answered = deadline_in(h->s->conn->rpc_timeout);
	bool verified = false;

	while (!verified) {
		if (deadline_passed(answered)) {
			fail(AL_LOST, "the broker did not answer a check within %g s",
			     h->s->conn->rpc_timeout);
			conn_abort(h->s->conn); /* a reply may still come: unusable */
			return AL_LOST;
		}
		if (conn_wait_readable(h->s->conn, answered) &&
		    sem_held_poll(h->s, h->slot, &verified) != AL_OK)
			return AL_LOST;
	}
	heard_back(h);
	renewed(h, h->verify_sent_boot);
	return AL_OK;
}

/* One verification, waited for: after amqplock was stopped, before the
 * command may go on. One sent before the stop is answered first: its
 * answers must not be taken for the fresh question's, which would date
 * the renewal too late. */
static enum al_status verify_now(struct holding *h)
{
	if (h->verify_sent && await_verification(h) != AL_OK)
		return AL_LOST;
	if (sem_verify_send(h->s, h->slot) != AL_OK)
		return fail(AL_LOST, "the connection failed");
	verification_sent(h);
	return await_verification(h);
}

/* --- the actions: what an event does in a state -------------------------- */

typedef enum hold_event action(struct holding *h);

/* Held: the broker's news, the verification, and who we are for status:
 * from the first verification on, a second after the claim, so that
 * naming us costs neither the claim nor a short job (hold -- true)
 * anything; not before our holder queue is ours again after a re-attach. */
static enum hold_event verify(struct holding *h)
{
	enum hold_event ev = check_slot(h, h->readable);

	if (ev != HOLD_EV_NONE)
		return ev;
	if (!h->answers.s && h->verify_sent && !h->s->hold->lease.need_holder)
		sem_answers_listen(&h->answers, h->s, h->slot, h->o->conn_opts);
	sem_answers_send(&h->answers);
	return HOLD_EV_NONE;
}

/* The slot's own refusal: the connection stays until the command ends. */
static enum hold_event refused(struct holding *h)
{
	return lose(h, true);
}

/* The connection failed or went silent (the reason is recorded). Without
 * a lease the slot goes with it. With one, the command runs on while
 * amqplock connects again; the old connection is hung up first, so that
 * a broker that still hears us drops our old holder queue at once. */
static enum hold_event go_away(struct holding *h)
{
	double left;

	if (!h->o->lease)
		return lose(h, false);
	snprintf(h->away_reason, sizeof(h->away_reason), "%s", status_message());
	status_clear();
	conn_hang_up(h->s->conn);
	h->state = h->state == HOLD_PAUSED ? HOLD_AWAY_PAUSED : HOLD_AWAY;
	h->away_since = now_seconds();
	h->warned = false;
	h->next_reconnect = now_seconds();
	h->reconnects = backoff_start(FIRST_RECONNECT, LONGEST_RECONNECT);
	h->verify_sent = 0;
	left = signal_deadline(h) - boot_seconds();
	job_notice(h, "disconnected", "deadline_ms", left,
		   "connection for slot %u of %s lost (%s); reconnecting, the lease keeps the slot "
		   "for the command %.1f s",
		   h->slot, h->s->label, h->away_reason, left > 0 ? left : 0);
	return HOLD_EV_NONE;
}

/* Away: the lease runs out unless amqplock gets back in time. The command
 * gets --lost-signal at the signal deadline whatever else happens. */
static enum hold_event reconnect(struct holding *h)
{
	double left = signal_deadline(h) - boot_seconds();
	enum al_status st;

	/* The warning always comes before the loss, if only just: a holder
	 * that learnt of its disconnection late (a busy machine, a short
	 * lease) still tells its readers the lease is running out. */
	if (!h->warned && left <= LEASE_WARNING) {
		h->warned = true;
		job_notice(h, "lease_running_out", "deadline_ms", left > 0 ? left : 0,
			   "the lease of slot %u of %s runs out: the command gets SIG%s in %.1f s "
			   "unless amqplock reconnects",
			   h->slot, h->s->label, sigabbrev_np(h->o->lost_signal),
			   left > 0 ? left : 0);
	}
	if (left <= 0)
		return HOLD_EV_LEASE_OUT;
	if (now_seconds() < h->next_reconnect)
		return HOLD_EV_NONE;
	st = reattach(h, left);
	if (st == AL_OK)
		return HOLD_EV_BACK;
	if (st == AL_LOST)
		return HOLD_EV_GONE;
	trace("%s; trying again", status_message());
	status_clear();
	conn_abort(h->s->conn);
	h->next_reconnect = now_seconds() + backoff_next(&h->reconnects, deadline_never());
	return HOLD_EV_NONE;
}

static enum hold_event back(struct holding *h)
{
	bool paused = h->state == HOLD_AWAY_PAUSED;

	h->state = HOLD_HELD;
	heard_back(h);
	if (h->answers.s)
		sem_answers_listen(&h->answers, h->s, h->slot, h->o->conn_opts);
	job_notice(h, "reconnected", "away_ms", now_seconds() - h->away_since,
		   "reconnected to %s after %.2f s; slot %u of %s is still ours", h->s->conn->where,
		   now_seconds() - h->away_since, h->slot, h->s->label);
	tell_drain(h);
	if (paused)
		job_thaw(h);
	return HOLD_EV_NONE;
}

/* A re-attach refused: the lease ran out or is another's, or the slot is
 * gone; the connection, if there is one, stays until the command ends. */
static enum hold_event gone(struct holding *h)
{
	return lose(h, !h->s->conn->dead);
}

static enum hold_event lease_out(struct holding *h)
{
	fail(AL_LOST, "could not get back to the broker before the lease ran out (%s)",
	     h->away_reason);
	return lose(h, false);
}

static enum hold_event keeper_late(struct holding *h)
{
	fail(AL_LOST, "%s", h->keeper_late);
	return lose(h, false);
}

/* A stop of the job: the command's processes first, then amqplock, so the
 * shell sees the job stopped. Continued, SIGCONT is pending and its event
 * follows; not stopped (an orphaned process group), it follows now. */
static enum hold_event stop(struct holding *h)
{
	if (!h->supervising || h->done)
		return HOLD_EV_NONE;
	trace("SIG%s: stopping the command, then amqplock", sigabbrev_np(h->stop_sig));
	job_freeze(h);
	h->state = h->state == HOLD_AWAY || h->state == HOLD_AWAY_PAUSED ? HOLD_AWAY_PAUSED
									 : HOLD_PAUSED;
	return job_stop_self(h->stop_sig) ? HOLD_EV_NONE : HOLD_EV_CONT;
}

/* amqplock was continued (fg, bg, kill -CONT): the command goes on only
 * once the slot is known to be still ours. The keeper may have stopped
 * the command while amqplock was stopped (SIGSTOP), unknown to us: until
 * the check says otherwise, a lost slot must not let it run another
 * instruction. Away, it goes on once back. */
static enum hold_event resume(struct holding *h)
{
	if (!h->supervising || h->done)
		return HOLD_EV_NONE;
	if (h->state == HOLD_AWAY || h->state == HOLD_AWAY_PAUSED) {
		h->state = HOLD_AWAY_PAUSED;
		return HOLD_EV_NONE;
	}
	h->state = HOLD_PAUSED;
	trace("continued; checking slot %u before the command goes on", h->slot);
	if (verify_now(h) != AL_OK)
		return h->s->conn->dead ? HOLD_EV_CONN_LOST : HOLD_EV_REFUSED;
	h->state = HOLD_HELD;
	job_thaw(h);
	return HOLD_EV_NONE;
}

static enum hold_event ended(struct holding *h)
{
	h->state = HOLD_DONE;
	return HOLD_EV_NONE;
}

/* After a loss, while a process of the command that may not be signalled
 * runs on: the slot must not be let go, so the lease is kept (renewed
 * every second, made again if it ran out) as long as the connection is
 * there; its holder queue stays with it. */
static void hold_on_lost(struct holding *h)
{
	double now = now_seconds();

	if (!h->not_permitted || !h->o->lease || h->s->conn->dead || now < h->next_verify)
		return;
	h->next_verify = now + VERIFY_INTERVAL;
	/* The refusal that told of the loss closed the channel. */
	if (!h->channel_fresh && conn_reset_channel(h->s->conn) != AL_OK)
		return;
	h->channel_fresh = true;
	if (sem_lease_keep(h->s, h->slot) != AL_OK)
		trace("could not keep the lease of slot %u", h->slot);
}

/* Lost: every process of the command gets SIGKILL once the grace period
 * is over; the hold is over once they are all gone. Processes that even
 * SIGKILL does not remove in time (stuck in the kernel) are given up on;
 * the keeper goes on killing them. What may not be signalled is waited
 * for, however long it runs. */
static enum hold_event wind_down(struct holding *h)
{
	hold_on_lost(h);
	if (!h->s->conn->dead && conn_keepalive(h->s->conn) != AL_OK)
		conn_abort(h->s->conn);
	if (!h->supervising || h->done)
		return HOLD_EV_ENDED;
	if (now_seconds() - h->lost_at >= h->o->grace)
		job_kill(h);
	if (!h->not_permitted && h->killed_at && now_seconds() - h->killed_at >= KILL_WAIT)
		return HOLD_EV_ENDED;
	return HOLD_EV_NONE;
}

static enum hold_event wound_down(struct holding *h)
{
	h->state = HOLD_GONE;
	return HOLD_EV_NONE;
}

/* What each event does in each state; an event a state does not list is
 * ignored there. A reader's question, "the connection drops while the
 * job is stopped?", is one cell: HOLD_PAUSED, HOLD_EV_CONN_LOST. */
/* clang-format off */
static action *const actions[HOLD_STATES][HOLD_EVENTS] = {
	[HOLD_HELD] = {
		[HOLD_EV_TICK] = verify, [HOLD_EV_REFUSED] = refused,
		[HOLD_EV_CONN_LOST] = go_away, [HOLD_EV_KEEPER_LATE] = keeper_late,
		[HOLD_EV_STOP] = stop, [HOLD_EV_CONT] = resume, [HOLD_EV_ENDED] = ended,
		[HOLD_EV_TIMEOUT] = job_time_out},
	[HOLD_PAUSED] = {
		[HOLD_EV_TICK] = verify, [HOLD_EV_REFUSED] = refused,
		[HOLD_EV_CONN_LOST] = go_away, [HOLD_EV_KEEPER_LATE] = keeper_late,
		[HOLD_EV_STOP] = stop, [HOLD_EV_CONT] = resume, [HOLD_EV_ENDED] = ended,
		[HOLD_EV_TIMEOUT] = job_time_out},
	[HOLD_AWAY] = {
		[HOLD_EV_TICK] = reconnect, [HOLD_EV_BACK] = back, [HOLD_EV_GONE] = gone,
		[HOLD_EV_LEASE_OUT] = lease_out, [HOLD_EV_KEEPER_LATE] = keeper_late,
		[HOLD_EV_STOP] = stop, [HOLD_EV_CONT] = resume, [HOLD_EV_ENDED] = ended,
		[HOLD_EV_TIMEOUT] = job_time_out},
	[HOLD_AWAY_PAUSED] = {
		[HOLD_EV_TICK] = reconnect, [HOLD_EV_BACK] = back, [HOLD_EV_GONE] = gone,
		[HOLD_EV_LEASE_OUT] = lease_out, [HOLD_EV_KEEPER_LATE] = keeper_late,
		[HOLD_EV_STOP] = stop, [HOLD_EV_CONT] = resume, [HOLD_EV_ENDED] = ended,
		[HOLD_EV_TIMEOUT] = job_time_out},
	[HOLD_LOST] = {
		[HOLD_EV_TICK] = wind_down, [HOLD_EV_ENDED] = wound_down},
	/* HOLD_DONE and HOLD_GONE: over; hold_run lets the slot go. */
};
/* clang-format on */

/* An event, and those its action raises, one after the other. */
static void dispatch(struct holding *h, enum hold_event ev)
{
	action *act;

	while (ev != HOLD_EV_NONE && (act = actions[h->state][ev]) != NULL)
		ev = act(h);
}

static double next_wakeup(const struct holding *h)
{
	double t, now = now_seconds();

	if (h->state == HOLD_LOST)
		return now + WIND_DOWN_POLL;
	t = job_timeout_next(h);
	if (h->exited_at && !h->told_remaining && h->o->events.remaining)
		t = sooner(t, h->exited_at + REMAINING_NEWS);
	if (h->state == HOLD_AWAY || h->state == HOLD_AWAY_PAUSED) {
		/* The lease's times are on the boot clock; poll on ours. */
		t = sooner(t, now + signal_deadline(h) - boot_seconds() -
				      (h->warned ? 0 : LEASE_WARNING));
		return sooner(h->next_reconnect, t);
	}
	t = sooner(t, h->verify_sent ? h->verify_sent + silence_limit(h) : h->next_verify);
	if (h->s->conn->heartbeat)
		t = sooner(t, h->heard + silence_limit(h));
	/* Let the library send our heartbeats on time. */
	if (h->s->conn->heartbeat)
		t = sooner(t, now_seconds() + h->s->conn->heartbeat / 4.0);
	return t;
}

/* Sleeps until `until`, a signal, an event of the command or data from
 * the broker (h->readable). */
static void wait_event(struct holding *h, double until)
{
	struct pollfd fds[3] = {{h->sig_fd, POLLIN, 0},
				{h->s->conn->dead ? -1 : conn_fd(h->s->conn), POLLIN, 0},
				{h->supervising ? super_fd(&h->sv) : -1, POLLIN, 0}};

	h->readable = false;
	if (poll(fds, 3, poll_ms(until - now_seconds())) > 0)
		h->readable = fds[1].revents != 0;
}

/* The lease handed over to the first in line (sem_hand_over): the keeper
 * must not end it if we die now, before the adopter is told. */
static void lease_given(void *arg)
{
	struct holding *h = arg;

	if (h->supervising)
		super_done(&h->sv);
}

/* After the command: the slot goes back (the lease handed over to the
 * first in line, or ended; waiters told); AL_LOST if it had been lost. */
static enum al_status let_go(struct holding *h)
{
	struct sem *s = h->s;
	bool handed = false;

	if (h->state == HOLD_GONE) {
		/* Lost but the lease still ours (the slot was removed, say):
		 * the command has ended, so the lease may go, on a fresh
		 * channel (the refusal that told of the loss closed ours). */
		if (h->o->lease && !s->conn->dead &&
		    (conn_reset_channel(s->conn) != AL_OK || sem_lease_end(s, h->slot) != AL_OK))
			trace("could not end the lease of slot %u: it runs out", h->slot);
		return AL_LOST;
	}
	/* A verification still in flight answers first: its answers are
	 * taken here, or the release would read them as its own, fail, and
	 * leave the waiters to find the slot by polling. */
	if (!s->conn->dead && h->verify_sent)
		(void)await_verification(h);
	/* --min-hold not yet over: the slot stays taken by a lease of what
	 * is left, and goes back when the broker deletes it; the holder
	 * queue goes with the connection. Nobody is woken. */
	if (!s->conn->dead && job_keep_minimum(s, &h->end))
		return AL_OK;
	/* Offered to the first in line, or released: waiters hear of it at
	 * once; a failure here changes nothing, as the connection's close
	 * gives the slot back anyway, but for a lease, which lasts its
	 * length if it cannot be ended now. */
	s->hold->lease_given = lease_given;
	s->hold->given_arg = h;
	if (!s->conn->dead && sem_hand_over(s, h->slot, &handed) == AL_OK &&
	    (handed || sem_released(s, h->slot) == AL_OK))
		return AL_OK;
	if (h->o->lease)
		job_end_lease_apart(&h->end);
	status_clear();
	return AL_OK;
}

enum al_status hold_run(struct sem *s, unsigned slot, const struct hold_opts *o, int sig_fd,
			int *code)
{
	struct holding h = {.s = s,
			    .slot = slot,
			    .o = o,
			    .sig_fd = sig_fd,
			    .state = HOLD_HELD,
			    .terminal = o->keeper ? o->keeper->terminal : -1,
			    .end = {.s = s, .o = o, .slot = slot}};
	enum hold_event ev;
	enum al_status st;
	int sig;

	h.answers.taken_at = (long long)time(NULL);
	h.end.min_until = job_minimum_until(o);
	/* (status shows it: a minimum needs a lease, whole seconds up) */
	if (h.end.min_until && o->lease > 0)
		h.answers.min_until = h.answers.taken_at + (long long)(o->min_hold + 0.999);
	h.heard = now_seconds();
	h.next_verify = h.heard + VERIFY_INTERVAL;
	*code = 0;
	/* A signal that came while the slot was being taken: nothing runs. */
	while ((sig = signals_next(sig_fd)) != 0)
		dispatch(&h, job_signal(&h, sig));
	if (h.pending) {
		trace("SIG%s came before the command started; not running it",
		      sigabbrev_np(h.pending));
		h.code = 128 + h.pending;
		h.done = true;
	} else if (o->argv && !h.done) {
		job_start(&h);
		renewed(&h, s->hold->lease.renewed);
	}
	if (h.done)
		h.state = HOLD_DONE;
	while (h.state != HOLD_DONE && h.state != HOLD_GONE) {
		wait_event(&h, next_wakeup(&h));
		while (h.supervising && (ev = job_next(&h)) != HOLD_EV_NONE)
			dispatch(&h, ev);
		while ((sig = signals_next(sig_fd)) != 0)
			dispatch(&h, job_signal(&h, sig));
		if (h.supervising)
			job_tell_remaining(&h);
		dispatch(&h, job_timeout_due(&h));
		dispatch(&h, HOLD_EV_TICK);
	}
	/* The release deletes the holder queue anyway; no more questions. */
	if (!s->conn->dead && conn_consuming(s->conn))
		conn_consume_end(s->conn, NULL);
	job_take_terminal_back(&h);
	if (h.terminal >= 0)
		close(h.terminal);
	if (o->keeper)
		o->keeper->terminal = -1;
	*code = h.timed_out_at ? HOLD_TIMEOUT_EXIT : h.code;
	st = let_go(&h);
	/* The slot given back: now the failure to start the command. */
	if (st == AL_OK && h.no_start[0]) {
		status_clear();
		st = fail(AL_INTERNAL, "%s", h.no_start);
	}
	/* Only now may the keeper go without ending the lease itself (or
	 * one readied for a command that did not run). */
	if (h.supervising)
		super_done(&h.sv);
	hold_keeper_abandon(o->keeper);
	return st;
}
