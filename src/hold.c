#include "hold.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "out.h"
#include "signals.h"
#include "supervise.h"

/* A held slot is re-verified this often (passive declares of its slot and
 * holder queues: one small round trip), so a remove is noticed within a
 * second, and a policy that expires unused queues never takes the holder
 * queue. */
#define VERIFY_INTERVAL 1.0
/* While a lost command winds down, look this often whether it is gone. */
#define WIND_DOWN_POLL 0.02
/* How long a stop of the job may wait for the keeper to stop every process
 * of the command; it takes milliseconds. */
#define FREEZE_WAIT 2.0
/* How long after SIGKILL to wait for the last process of the command. */
#define KILL_WAIT 2.0
/* Waiting for a slot: first and longest pause between attempts. The
 * longest pause, jittered up by half, stays under a second, so a freed
 * slot is taken within a second. */
#define FIRST_RETRY   0.01
#define LONGEST_RETRY 0.5

/* Sleeps until `until` (monotonic seconds) or data on the broker socket. */
static bool wait_readable(struct conn *c, double until)
{
	struct pollfd fd = {conn_fd(c), POLLIN, 0};

	return poll(&fd, 1, poll_ms(until - now_seconds())) > 0 && fd.revents;
}

enum al_status hold_take(struct sem *s, const struct hold_opts *o, unsigned *slot, unsigned *max)
{
	double start = now_seconds(), deadline = o->wait < 0 ? INFINITY : start + o->wait;
	double delay = FIRST_RETRY, until;
	enum al_status st;
	bool watching = false;

	for (;;) {
		status_clear();
		/* Cleared before the attempt: a release announced during it
		 * cuts the next pause short. */
		s->conn->notified = false;
		st = sem_acquire(s, slot, max);
		if (st != AL_BUSY || o->nonblock || now_seconds() >= deadline)
			break;
		/* Waiting: "all slots are held" is not a failure (yet), and must
		 * not hide the cause of one while waiting. */
		status_clear();
		/* A waiter hears of clean releases at once. Holders that die
		 * say nothing, so polling with back-off goes on as well. A
		 * release between the attempt above and the subscription
		 * is caught by trying again straight after it. */
		if (!watching) {
			watching = true;
			if (sem_watch_releases(s) != AL_OK && s->conn->dead)
				return AL_CONNECTION;
			if (s->conn->notify_channel)
				continue;
		}
		until = sooner(now_seconds() + jitter(delay), deadline);
		do {
			/* Heartbeats and release notifications; taking
			 * them keeps the connection alive. */
			if (wait_readable(s->conn, until) && (st = conn_drain(s->conn)) != AL_OK)
				return st;
		} while (!s->conn->notified && now_seconds() < until);
		if (s->conn->notified)
			trace("a slot of %s was released; trying again", s->label);
		delay = sooner(delay * 2, LONGEST_RETRY);
	}
	/* A holder has no use for other clients' releases. */
	conn_unsubscribe(s->conn);
	if (st == AL_BUSY && o->wait > 0 && !o->nonblock) {
		status_clear();
		fail(AL_BUSY, "timed out after %g s waiting for a slot of %s (all %u held)",
		     o->wait, s->label, *max);
	}
	return st;
}

/* State of one hold while it runs. */
struct holding {
	struct sem *s;
	unsigned slot;
	const struct hold_opts *o;
	int sig_fd;
	/* The command, if there is one. */
	struct supervisor sv;
	bool supervising;
	bool done;   /* the command and every process it started have ended */
	int code;    /* the command's exit status */
	int pending; /* a terminating signal that came before the command ran */
	/* Job control. terminal: the controlling terminal, or -1. The
	 * command's group gets it whenever amqplock is in the foreground and
	 * either leads its process group (it is a job of an interactive
	 * shell) or the command asked for it (SIGTTIN, SIGTTOU). */
	int terminal;
	bool wants_terminal, has_terminal;
	bool frozen; /* the command's processes are stopped */
	/* The slot. */
	double heard;       /* last time the broker sent anything */
	double verify_sent; /* 0: no verification outstanding */
	double next_verify;
	double lost_at;   /* 0: still held */
	double killed_at; /* 0: no SIGKILL yet */
};

/* How long the broker may stay silent before the slot counts as lost: one
 * heartbeat. The broker itself waits at least twice that before it gives
 * the slot away, so the command is signalled first. Without heartbeats,
 * the reply deadline bounds each verification instead. */
static double silence_limit(const struct holding *h)
{
	return h->s->conn->heartbeat ? (double)h->s->conn->heartbeat : h->s->conn->rpc_timeout;
}

static void kill_command(struct holding *h)
{
	if (h->supervising && !h->done && !h->killed_at) {
		trace("sending SIGKILL to every process of the command");
		super_signal_all(&h->sv, SIGKILL);
		h->killed_at = now_seconds();
	}
}

/* keep_connection: the broker is fine but the slot is gone (removed).
 * The connection, and with it the holder queue, then stays until the
 * command has ended, so that `wait` (and an add of the slot) sees this
 * holder until its command is really done. */
static void lose(struct holding *h, bool keep_connection)
{
	char reason[512];

	snprintf(reason, sizeof(reason), "%s", status_message());
	status_clear();
	fail(AL_LOST, "lost slot %u of %s: %s", h->slot, h->s->label, reason);
	h->lost_at = now_seconds();
	/* The command first: nothing may delay the signal. A stopped command
	 * must not run another instruction: it gets SIGKILL at once. */
	if (h->frozen) {
		kill_command(h);
	} else if (h->supervising && !h->done) {
		trace("sending SIG%s to every process of the command",
		      sigabbrev_np(h->o->lost_signal));
		super_signal_all(&h->sv, h->o->lost_signal);
	}
	if (h->o->lost)
		h->o->lost(h->o->arg);
	/* Otherwise no goodbye: the broker may be what went silent. */
	if (!keep_connection)
		conn_abort(h->s->conn);
}

/* Takes what the broker sent, starts or times out a verification. */
static void check_slot(struct holding *h, bool readable)
{
	double now = now_seconds();
	bool verified = false;

	if (readable) {
		h->heard = now;
		if (sem_held_poll(h->s, h->slot, &verified) != AL_OK) {
			lose(h, !h->s->conn->dead);
			return;
		}
		if (verified)
			h->verify_sent = 0;
	}
	if (h->verify_sent && now - h->verify_sent > silence_limit(h)) {
		fail(AL_LOST, "the broker did not answer a check within %g s", silence_limit(h));
		lose(h, false);
	} else if (h->s->conn->heartbeat && now - h->heard > silence_limit(h)) {
		fail(AL_LOST, "the broker has been silent for %.1f s", now - h->heard);
		lose(h, false);
	} else if (!h->verify_sent && now >= h->next_verify) {
		if (sem_verify_send(h->s, h->slot) != AL_OK) {
			lose(h, false);
			return;
		}
		h->verify_sent = now;
		h->next_verify = now + VERIFY_INTERVAL;
	}
}

/* One verification, waited for: after amqplock was stopped, before the
 * command may go on. */
static enum al_status verify_now(struct holding *h)
{
	double deadline;
	bool verified = false;

	/* What came while we were stopped, then a fresh question. */
	if (h->verify_sent && sem_held_poll(h->s, h->slot, &verified) != AL_OK)
		return AL_LOST;
	if (sem_verify_send(h->s, h->slot) != AL_OK)
		return fail(AL_LOST, "the connection failed");
	deadline = now_seconds() + h->s->conn->rpc_timeout;
	verified = false;
	while (!verified) {
		if (now_seconds() >= deadline)
			return fail(AL_LOST, "the broker did not answer a check within %g s",
				    h->s->conn->rpc_timeout);
		if (wait_readable(h->s->conn, deadline) &&
		    sem_held_poll(h->s, h->slot, &verified) != AL_OK)
			return AL_LOST;
	}
	h->heard = now_seconds();
	h->verify_sent = 0;
	h->next_verify = h->heard + VERIFY_INTERVAL;
	return AL_OK;
}

static void hand_terminal(struct holding *h)
{
	if (h->wants_terminal && h->sv.cmd > 0 && super_in_foreground(h->terminal)) {
		super_give_terminal(h->terminal, h->sv.cmd);
		h->has_terminal = true;
	}
}

static void take_terminal_back(struct holding *h)
{
	if (h->has_terminal) {
		super_give_terminal(h->terminal, getpgrp());
		h->has_terminal = false;
	}
}

/* amqplock was continued (fg, bg, kill -CONT): the command goes on only
 * once the slot is known to be still ours. */
static void resume(struct holding *h)
{
	if (!h->supervising || h->lost_at || h->done)
		return;
	/* The keeper may have stopped the command while amqplock was stopped
	 * (SIGSTOP), unknown to us: until the check says otherwise, a lost
	 * slot must not let it run another instruction. */
	h->frozen = true;
	trace("continued; checking slot %u before the command goes on", h->slot);
	if (verify_now(h) != AL_OK) {
		lose(h, !h->s->conn->dead);
		return;
	}
	hand_terminal(h);
	super_continue_all(&h->sv);
	h->frozen = false;
}

/* A stop of the job: the command's processes first, then amqplock, so the
 * shell sees the job stopped. */
static void suspend(struct holding *h, int sig)
{
	if (!h->supervising || h->done || h->lost_at)
		return;
	trace("SIG%s: stopping the command, then amqplock", sigabbrev_np(sig));
	/* Everything of the command is stopped before amqplock stops. */
	super_stop_all(&h->sv, FREEZE_WAIT);
	h->frozen = true;
	take_terminal_back(h);
	/* Continued, SIGCONT is pending and resume() follows from it. */
	if (!super_stop_self(sig))
		resume(h);
}

static void command_stopped(struct holding *h, int sig)
{
	/* It needs the terminal and amqplock has it: as sudo does, hand it
	 * over and let the command go on. */
	if ((sig == SIGTTIN || sig == SIGTTOU) && super_in_foreground(h->terminal)) {
		h->wants_terminal = true;
		hand_terminal(h);
		super_signal_group(&h->sv, SIGCONT);
		return;
	}
	suspend(h, sig);
}

static void cannot_run(const char *what, int err)
{
	char message[300];

	snprintf(message, sizeof(message), "cannot run %s: %s", what, strerror(err));
	out_error_line(message);
}

/* After the keeper was killed: SIGKILL to what it left to us, for as long
 * as a SIGKILL may take. */
static void end_orphans(void)
{
	double deadline = now_seconds() + KILL_WAIT;

	while (!super_kill_orphans() && now_seconds() < deadline)
		sleep_seconds(WIND_DOWN_POLL);
}

static void on_supervisor(struct holding *h)
{
	enum super_event ev;
	int value;

	while ((ev = super_next(&h->sv, &value)) != SUPER_NOTHING) {
		switch (ev) {
		case SUPER_STARTED:
			trace("command started, pid %d", value);
			break;
		case SUPER_NO_EXEC:
			cannot_run(h->o->argv[0], value);
			break;
		case SUPER_STOPPED:
			command_stopped(h, value);
			break;
		case SUPER_EXITED:
			trace("command exited with status %d", value);
			h->code = value;
			break;
		case SUPER_EMPTY:
			if (h->sv.cmd > 0)
				trace("every process of the command has ended");
			h->done = true;
			break;
		case SUPER_VANISHED:
			/* Someone killed the keeper: the command died with it
			 * (PR_SET_PDEATHSIG); its orphans are ours now. */
			out_error_line("the keeper process was killed; ending the command");
			end_orphans();
			if (!h->code)
				h->code = 128 + SIGKILL;
			h->done = true;
			break;
		default:
			break;
		}
	}
}

static void on_signal(struct holding *h, int sig)
{
	int wstatus;

	switch (sig) {
	case SIGCHLD:
		/* amqplock's own children: the keeper once done, and
		 * anything the keeper left behind. */
		while (waitpid(-1, &wstatus, WNOHANG) > 0)
			;
		return;
	case SIGTSTP:
	case SIGTTIN:
	case SIGTTOU:
		suspend(h, sig);
		return;
	case SIGCONT:
		resume(h);
		return;
	}
	if (!h->o->argv) {
		trace("SIG%s: releasing slot %u", sigabbrev_np(sig), h->slot);
		h->done = true;
	} else if (!h->supervising) {
		h->pending = sig;
	} else if (!h->done && !h->lost_at) {
		trace("passing SIG%s on to the command", sigabbrev_np(sig));
		/* USR1 and USR2 mean something to the command alone; the others
		 * end the job, so every process of it gets them. */
		if (sig == SIGUSR1 || sig == SIGUSR2)
			super_signal_group(&h->sv, sig);
		else
			super_signal_all(&h->sv, sig);
	}
}

static double next_wakeup(const struct holding *h)
{
	double t;

	if (h->lost_at)
		return now_seconds() + WIND_DOWN_POLL;
	t = h->verify_sent ? h->verify_sent + silence_limit(h) : h->next_verify;
	if (h->s->conn->heartbeat)
		t = sooner(t, h->heard + silence_limit(h));
	/* Let the library send our heartbeats on time. */
	if (h->s->conn->heartbeat)
		t = sooner(t, now_seconds() + h->s->conn->heartbeat / 4.0);
	return t;
}

/* Sleeps until `until`, a signal, an event of the command or data from
 * the broker (*readable). */
static void wait_event(struct holding *h, double until, bool *readable)
{
	struct pollfd fds[3] = {{h->sig_fd, POLLIN, 0},
				{h->s->conn->dead ? -1 : conn_fd(h->s->conn), POLLIN, 0},
				{h->supervising ? super_fd(&h->sv) : -1, POLLIN, 0}};

	*readable = false;
	if (poll(fds, 3, poll_ms(until - now_seconds())) > 0)
		*readable = fds[1].revents != 0;
}

/* After a loss: done once every process of the command is gone; SIGKILL
 * for all of them once the grace period is over. Processes that even
 * SIGKILL does not remove in time (stuck in the kernel) are given up on;
 * the keeper goes on killing them. */
static bool wound_down(struct holding *h)
{
	if (!h->supervising || h->done)
		return true;
	if (now_seconds() - h->lost_at >= h->o->grace)
		kill_command(h);
	return h->killed_at && now_seconds() - h->killed_at >= KILL_WAIT;
}

static void start_command(struct holding *h)
{
	struct super_opts so = {
		.argv = h->o->argv,
		.terminal = h->terminal,
		.hold_fd = conn_fd(h->s->conn),
	};

	/* A job of an interactive shell: the command gets the terminal
	 * at once, so that Ctrl-C and Ctrl-Z reach it as they would without
	 * amqplock. */
	h->wants_terminal = getpgrp() == getpid() && isatty(STDIN_FILENO);
	so.give_terminal = h->wants_terminal && super_in_foreground(h->terminal);
	/* Orphans of the keeper (if it is killed) become our children. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (super_start(&h->sv, &so) != AL_OK) {
		out_error_line(status_message());
		status_clear();
		h->code = 126;
		h->done = true;
		return;
	}
	h->supervising = true;
	h->has_terminal = so.give_terminal;
}

enum al_status hold_run(struct sem *s, unsigned slot, const struct hold_opts *o, int sig_fd,
			int *code)
{
	struct holding h = {.s = s, .slot = slot, .o = o, .sig_fd = sig_fd, .terminal = -1};
	bool readable;
	int sig;

	h.heard = now_seconds();
	h.next_verify = h.heard + VERIFY_INTERVAL;
	*code = 0;
	/* A signal that came while the slot was being taken: nothing runs. */
	while ((sig = signals_next(sig_fd)) != 0)
		on_signal(&h, sig);
	if (h.pending) {
		trace("SIG%s came before the command started; not running it",
		      sigabbrev_np(h.pending));
		h.code = 128 + h.pending;
		h.done = true;
	} else if (o->argv && !h.done) {
		h.terminal = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
		start_command(&h);
	}
	while (!h.done || h.lost_at) {
		if (h.lost_at && wound_down(&h))
			break;
		wait_event(&h, next_wakeup(&h), &readable);
		if (h.supervising)
			on_supervisor(&h);
		while ((sig = signals_next(sig_fd)) != 0)
			on_signal(&h, sig);
		if (h.lost_at) {
			if (!s->conn->dead && conn_keepalive(s->conn) != AL_OK)
				conn_abort(s->conn);
		} else if (!h.done) {
			check_slot(&h, readable);
		}
	}
	take_terminal_back(&h);
	if (h.terminal >= 0)
		close(h.terminal);
	*code = h.code;
	if (h.lost_at)
		return AL_LOST;
	/* Waiters hear of it at once; a failure here changes nothing, as
	 * the connection's close gives the slot back anyway. */
	if (!s->conn->dead)
		sem_released(s, slot);
	return AL_OK;
}
