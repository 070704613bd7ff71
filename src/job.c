/* The command as a hold runs it: its keeper readied while a claim is
 * answered and started once the slot is ours, the keeper's lease work
 * (ending the lease on its own connection, or leaving --min-hold's
 * minimum there; keeping it there while a process we may not signal runs
 * on), and what comes from the command and from signals to amqplock: job
 * control, the terminal, what remains of the command once it has
 * exited. What that means for the slot it tells hold.c as events
 * (hold_parts.h), which hold.c's table acts on; it never calls up. The
 * keeper's own code is keeper.c's. */
#include "hold.h"
#include "hold_parts.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "signals.h"
#include "supervise.h"

/* How long a stop of the job may wait for the keeper to stop every process
 * of the command; it takes milliseconds. */
#define FREEZE_WAIT 2.0

/* A minimum shorter than this is not worth a lease: the slot goes back. */
#define MINIMUM_LEAST 0.05

double job_minimum_until(const struct hold_opts *o)
{
	return o->min_hold > 0 ? boot_seconds() + o->min_hold : 0;
}

bool job_keep_minimum(struct sem *s, const struct lease_end *e)
{
	double left = e->min_until - boot_seconds();
	bool placed = false;

	if (!e->min_until || !s->hold->lease.on || left < MINIMUM_LEAST)
		return false;
	if (sem_lease_minimum(s, e->slot, left, &placed) != AL_OK) {
		trace("could not keep slot %u for its minimum: %s", e->slot, status_message());
		status_clear();
	}
	return placed;
}

/* Ends the lease on a connection of its own, one attempt: the keeper's
 * last act if amqplock died (every process of the command has ended by
 * then), or amqplock's after the command ended while it was away. */
void job_end_lease_apart(void *arg)
{
	struct lease_end *e = arg;
	struct sem s = *e->s;
	enum al_status st = AL_CONNECTION;
	bool ended = false;

	/* The holding connection (the keeper's copy of it keeps the holder
	 * queue alive until now) is hung up as the lease ends, so that the
	 * waiter the lease's end wakes finds the slot free. */
	s.conn = &e->apart;
	if (!e->apart_open && conn_open(&e->apart, e->o->conn_opts, deadline_never()) == AL_OK)
		e->apart_open = true;
	/* A minimum still to run: a lease of that length in place of ours
	 * before the holder queue goes, and nobody woken. */
	if (e->apart_open && job_keep_minimum(&s, e)) {
		conn_hang_up(e->s->conn);
		st = AL_OK;
	} else if (e->apart_open)
		st = sem_lease_end_apart(&s, e->slot, e->s->conn, &ended);
	else
		conn_hang_up(e->s->conn);
	/* What failed: the lease's end, or only the wake-up after it (a
	 * publish, which a resource alarm blocks); the first in line then
	 * finds the slot free at its next look. */
	if (st == AL_OK)
		trace("ended the lease of slot %u", e->slot);
	else if (ended)
		trace("ended the lease of slot %u, but could not wake the first in line, which "
		      "finds the slot free at its next look: %s",
		      e->slot, status_message());
	else
		trace("could not end the lease of slot %u (%s); it runs out in %.0f s", e->slot,
		      status_message(), e->o->lease);
	conn_close(&e->apart);
	e->apart_open = false;
}

/* The keeper keeps the lease, on a connection of its own (opened at the
 * first call, and again after a failure), while amqplock cannot: it is
 * dead or stopped, and a process of the command that may not be
 * signalled runs on. */
static void keep_lease_apart(void *arg)
{
	struct lease_end *e = arg;
	struct sem s = *e->s;

	if (!e->apart_open)
		e->apart_open = conn_open(&e->apart, e->o->conn_opts,
					  deadline_in(e->o->conn_opts->connect_timeout)) == AL_OK;
	if (!e->apart_open) {
		conn_close(&e->apart);
		return;
	}
	s.conn = &e->apart;
	if (sem_lease_keep(&s, e->slot) != AL_OK) {
		conn_close(&e->apart);
		e->apart_open = false;
	}
	status_clear();
}

/* What the keeper of the command is given: the holding connection to
 * keep open, the lease to end if amqplock dies first, and to keep while
 * amqplock cannot. */
static struct super_opts keeper_opts(const struct hold_opts *o, int terminal, struct lease_end *end)
{
	return (struct super_opts){
		.argv = o->argv,
		.terminal = terminal,
		.hold_fd = conn_fd(end->s->conn),
		.last_act = o->lease ? job_end_lease_apart : NULL,
		.hold_on = o->lease ? keep_lease_apart : NULL,
		.arg = end,
	};
}

void hold_keeper_ready(void *arg, unsigned k)
{
	struct hold_keeper *kp = arg;
	const struct hold_opts *o = kp->end.o;
	struct super_opts so = keeper_opts(o, kp->terminal, &kp->end);

	hold_keeper_abandon(kp);
	kp->end.slot = k;
	/* From the claim: the command starts milliseconds later. */
	kp->end.min_until = job_minimum_until(o);
	if (o->events.command_env)
		o->events.command_env(o->events.arg, k);
	kp->ready = super_prepare(&kp->sv, &so) == AL_OK;
	/* Not fatal here: job_start tries again, and says why it
	 * cannot. */
	if (!kp->ready)
		status_clear();
}

void hold_keeper_init(struct hold_keeper *kp)
{
	memset(kp, 0, sizeof(*kp));
	kp->terminal = super_open_terminal();
}

void hold_keeper_abandon(struct hold_keeper *kp)
{
	if (!kp)
		return;
	if (kp->ready)
		super_abandon(&kp->sv);
	kp->ready = false;
}

void job_start(struct holding *h)
{
	struct hold_keeper *kp = h->o->keeper;
	struct super_opts so = keeper_opts(h->o, h->terminal, &h->end);

	/* A job of an interactive shell: the command gets the terminal
	 * at once, so that Ctrl-C and Ctrl-Z reach it as they would without
	 * amqplock. */
	h->wants_terminal = getpgrp() == getpid() && isatty(STDIN_FILENO);
	so.give_terminal = h->wants_terminal && super_in_foreground(h->terminal);
	/* No start past the moment the claim could count (sem.h,
	 * claim_window): amqplock stopped between its decision and the
	 * keeper's must not start the command on a slot lost meanwhile. */
	so.start_by = h->s->hold->lease.renewed + h->s->hold->claim_window;
	so.token = h->s->hold->fencing_token;
	if (kp && kp->ready && kp->end.slot == h->slot) {
		/* Readied during the claim: it runs the command now. */
		h->sv = kp->sv;
		kp->ready = false;
		super_go(&h->sv, so.give_terminal, so.start_by, so.token);
	} else if (super_start(&h->sv, &so) != AL_OK) {
		snprintf(h->no_start, sizeof(h->no_start), "cannot start %s: %s", h->o->argv[0],
			 status_message());
		status_clear();
		h->done = true;
		return;
	}
	h->supervising = true;
	h->has_terminal = so.give_terminal;
	h->started_at = now_seconds();
}

void job_kill_at(struct holding *h, double deadline)
{
	if (h->supervising && !h->done)
		super_kill_at(&h->sv, deadline);
}

void job_kill(struct holding *h)
{
	if (h->supervising && !h->done && !h->killed_at) {
		trace("sending SIGKILL to every process of the command");
		super_signal_all(&h->sv, SIGKILL);
		h->killed_at = now_seconds();
	}
}

void job_lost(struct holding *h)
{
	/* A stopped command must not run another instruction: it gets
	 * SIGKILL at once. */
	if (holding_paused(h)) {
		job_kill(h);
	} else if (h->supervising && !h->done) {
		trace("sending SIG%s to every process of the command",
		      sigabbrev_np(h->o->lost_signal));
		super_signal_all(&h->sv, h->o->lost_signal);
	}
}

/* News for the user: an event (hold_events.notice, with one figure) or,
 * with event NULL, a line for people that is no event
 * (hold_events.warning); traced if nobody listens. */
static void tell(struct holding *h, const char *event, const char *key, double seconds,
		 const char *fmt, va_list ap)
{
	char text[512];

	vsnprintf(text, sizeof(text), fmt, ap);
	if (event && h->o->events.notice)
		h->o->events.notice(h->o->events.arg, event, key,
				    seconds > 0 ? (unsigned long)(seconds * 1000) : 0, text);
	else if (!event && h->o->events.warning)
		h->o->events.warning(h->o->events.arg, text);
	else
		trace("%s", text);
}

void job_notice(struct holding *h, const char *event, const char *key, double seconds,
		const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tell(h, event, key, seconds, fmt, ap);
	va_end(ap);
}

/* --timeout: the command has had its time. Every process of it gets
 * SIGTERM now, and SIGKILL --grace later (the second event); the slot
 * stays ours until the last has gone, as after any end of the command. */
enum hold_event job_time_out(struct holding *h)
{
	if (h->timed_out_at) {
		job_kill(h);
		return HOLD_EV_NONE;
	}
	h->timed_out_at = now_seconds();
	job_notice(h, "timeout", "grace_ms", h->o->grace,
		   "the command has run for --timeout %g s: SIGTERM to every process of it, "
		   "SIGKILL in %g s",
		   h->o->timeout, h->o->grace);
	job_end_with(h, SIGTERM);
	return HOLD_EV_NONE;
}

double job_timeout_next(const struct holding *h)
{
	if (h->o->timeout <= 0 || !h->started_at || h->done || h->killed_at)
		return INFINITY;
	return h->timed_out_at ? h->timed_out_at + h->o->grace : h->started_at + h->o->timeout;
}

enum hold_event job_timeout_due(const struct holding *h)
{
	return now_seconds() >= job_timeout_next(h) ? HOLD_EV_TIMEOUT : HOLD_EV_NONE;
}

static void job_warn(struct holding *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void job_warn(struct holding *h, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tell(h, NULL, NULL, 0, fmt, ap);
	va_end(ap);
}

static void hand_terminal(struct holding *h)
{
	if (h->wants_terminal && h->sv.cmd > 0 && super_in_foreground(h->terminal)) {
		super_give_terminal(h->terminal, h->sv.cmd);
		h->has_terminal = true;
	}
}

void job_take_terminal_back(struct holding *h)
{
	if (h->has_terminal) {
		super_give_terminal(h->terminal, getpgrp());
		h->has_terminal = false;
	}
}

void job_thaw(struct holding *h)
{
	hand_terminal(h);
	super_continue_all(&h->sv);
}

void job_freeze(struct holding *h)
{
	/* Everything of the command is stopped before amqplock stops. */
	super_stop_all(&h->sv, FREEZE_WAIT);
	job_take_terminal_back(h);
}

bool job_stop_self(int sig)
{
	return super_stop_self(sig);
}

/* The command stopped. It needs the terminal and amqplock has it: as
 * sudo does, hand it over and let the command go on. Otherwise the whole
 * job stops. */
static enum hold_event command_stopped(struct holding *h, int sig)
{
	if ((sig == SIGTTIN || sig == SIGTTOU) && super_in_foreground(h->terminal)) {
		h->wants_terminal = true;
		hand_terminal(h);
		super_signal_group(&h->sv, SIGCONT);
		return HOLD_EV_NONE;
	}
	h->stop_sig = sig;
	return HOLD_EV_STOP;
}

static void cannot_run(struct holding *h, const char *what, int err)
{
	job_warn(h, "cannot run %s: %s", what, strerror(err));
}

/* After the keeper was killed: SIGKILL to what it left to us, for as long
 * as a SIGKILL may take. */
static void end_orphans(void)
{
	double deadline = now_seconds() + KILL_WAIT;

	while (!super_kill_orphans() && now_seconds() < deadline)
		sleep_seconds(WIND_DOWN_POLL);
}

/* A process of the command that amqplock may not signal (another user's:
 * a setuid program that stayed root, what `sudo cmd` leaves) cannot be
 * stopped or ended: the slot stays held, whatever happens to it, until
 * that process has exited. Said once. */
static void cannot_signal(struct holding *h, pid_t pid)
{
	char comm[32];

	super_process_name(pid, comm, sizeof(comm));
	trace("process %d (%s) of the command may not be signalled", (int)pid, comm);
	if (h->not_permitted)
		return;
	h->not_permitted = true;
	job_warn(h,
		 "cannot signal process %d (%s) of the command (it runs as another user); slot %u "
		 "of "
		 "%s stays held until it exits",
		 (int)pid, comm, h->slot, h->s->label);
}

/* What remains of the command after CMD has exited, said once, a while
 * after: a prompt that does not come back says why. */
void job_tell_remaining(struct holding *h)
{
	char what[512];

	if (!h->exited_at || h->told_remaining || h->done || !h->o->events.remaining ||
	    now_seconds() - h->exited_at < REMAINING_NEWS)
		return;
	h->told_remaining = true;
	super_remaining(&h->sv, what, sizeof(what));
	if (what[0])
		h->o->events.remaining(h->o->events.arg, what);
}

enum hold_event job_next(struct holding *h)
{
	enum hold_event ev = HOLD_EV_NONE;
	enum super_event sev;
	int value;

	while (ev == HOLD_EV_NONE && (sev = super_next(&h->sv, &value)) != SUPER_NOTHING) {
		switch (sev) {
		case SUPER_STARTED:
			trace("command started, pid %d", value);
			break;
		case SUPER_NO_EXEC:
			cannot_run(h, h->o->argv[0], value);
			break;
		case SUPER_NO_START:
			snprintf(h->no_start, sizeof(h->no_start), "cannot start %s: %s",
				 h->o->argv[0], status_strerror(value));
			break;
		case SUPER_STOPPED:
			ev = command_stopped(h, value);
			break;
		case SUPER_EXITED:
			trace("command exited with status %d", value);
			h->code = value;
			h->exited_at = now_seconds();
			break;
		case SUPER_EMPTY:
			if (h->sv.cmd > 0)
				trace("every process of the command has ended");
			h->done = true;
			ev = HOLD_EV_ENDED;
			break;
		case SUPER_DEADLINE:
			/* amqplock was held up (in a library call) past the
			 * lease's deadline; the keeper did what it had to. Or
			 * it was stopped between the claim and the keeper's
			 * start: the command never ran. */
			h->keeper_late = value ? "the command was not started: its claim came "
						 "too late (was amqplock stopped?)"
					       : "no renewal of the lease in time; the keeper "
						 "killed the command";
			ev = HOLD_EV_KEEPER_LATE;
			break;
		case SUPER_NOT_PERMITTED:
			cannot_signal(h, (pid_t)value);
			break;
		case SUPER_VANISHED:
			/* Someone killed the keeper: the command died with it
			 * (PR_SET_PDEATHSIG); its orphans are ours now. */
			job_warn(h, "the keeper process was killed; ending the command");
			end_orphans();
			if (!h->code)
				h->code = 128 + SIGKILL;
			h->done = true;
			ev = HOLD_EV_ENDED;
			break;
		default:
			break;
		}
	}
	return ev;
}

enum hold_event job_signal(struct holding *h, int sig)
{
	int wstatus;

	switch (sig) {
	case SIGCHLD:
		/* amqplock's own children: the keeper once done, and
		 * anything the keeper left behind. */
		while (waitpid(-1, &wstatus, WNOHANG) > 0)
			;
		return HOLD_EV_NONE;
	case SIGTSTP:
	case SIGTTIN:
	case SIGTTOU:
		h->stop_sig = sig;
		return HOLD_EV_STOP;
	case SIGCONT:
		return HOLD_EV_CONT;
	}
	if (!h->o->argv) {
		trace("SIG%s: releasing slot %u", sigabbrev_np(sig), h->slot);
		h->done = true;
		return HOLD_EV_ENDED;
	}
	if (!h->supervising) {
		h->pending = sig;
	} else if (!h->done && h->state != HOLD_LOST) {
		trace("passing SIG%s on to the command", sigabbrev_np(sig));
		/* USR1 and USR2 mean something to the command alone; the others
		 * end the job. */
		if (sig == SIGUSR1 || sig == SIGUSR2)
			super_signal_group(&h->sv, sig);
		else
			job_end_with(h, sig);
	}
	return HOLD_EV_NONE;
}

void job_end_with(struct holding *h, int sig)
{
	if (!h->supervising || h->done)
		return;
	if (holding_paused(h))
		super_signal_all(&h->sv, sig);
	else
		super_signal_all_awake(&h->sv, sig);
}
