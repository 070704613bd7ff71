/* What hold.c (a held slot's life, as one state machine) and job.c (the
 * command under it) share; nothing else includes this. The states and
 * events of a held slot are listed here, and hold.c's table says what
 * each event does in each state (docs/design.md, "A held slot's life"). */
#ifndef AMQPLOCK_HOLD_PARTS_H
#define AMQPLOCK_HOLD_PARTS_H

#include <stdbool.h>

#include "clock.h"
#include "hold.h"
#include "supervise.h"

/* How long after SIGKILL to wait for the last process of the command. */
#define KILL_WAIT 2.0

/* While a lost command winds down, look this often whether it is gone. */
#define WIND_DOWN_POLL 0.02

/* The command has exited: what remains of it is news this long after. */
#define REMAINING_NEWS 1.0

/* A held slot's life, from the claim (or adoption) that made it ours to
 * its release. Before it: waiting and claiming (take.c; a claim answered
 * too late is void there, and its lease ended on the next connection). */
enum hold_state {
	/* Ours: verified, and the lease renewed, every second; the command
	 * runs (or has yet to start). */
	HOLD_HELD,
	/* Ours, the command stopped by amqplock (a stop of the job, or a
	 * continue after amqplock itself was stopped): it goes on only once
	 * a verification says the slot is still ours. */
	HOLD_PAUSED,
	/* The connection lost: the lease keeps the slot for the command
	 * while amqplock connects again and re-attaches. */
	HOLD_AWAY,
	/* Away, and the command stopped: it goes on once back. */
	HOLD_AWAY_PAUSED,
	/* Not ours any more: the command has had --lost-signal, SIGKILL
	 * follows after --grace; the hold ends once it is gone. */
	HOLD_LOST,
	/* The command has ended (or, without one, a signal came): the slot
	 * is let go, its lease offered to the first in line or ended. */
	HOLD_DONE,
	/* Lost, and every process of the command gone (or given up on). */
	HOLD_GONE,
	HOLD_STATES
};

enum hold_event {
	HOLD_EV_NONE,
	/* Data from the broker, or a timer: the state's own work (verify,
	 * reconnect, wind down), which may raise another event. */
	HOLD_EV_TICK,
	/* The broker refused a verification: the slot queue deleted, the
	 * holder queue deleted or taken, the lease another's. */
	HOLD_EV_REFUSED,
	/* The connection failed, or the broker was silent too long. */
	HOLD_EV_CONN_LOST,
	/* Connected again and re-attached within the lease. */
	HOLD_EV_BACK,
	/* A re-attach found the lease run out or another's, or the slot
	 * removed. */
	HOLD_EV_GONE,
	/* Away past the lease's deadline for the command. */
	HOLD_EV_LEASE_OUT,
	/* The keeper killed the command for want of a renewal, or did not
	 * start it (its claim came too late). */
	HOLD_EV_KEEPER_LATE,
	/* A stop of the job: SIGTSTP, SIGTTIN or SIGTTOU to amqplock, or the
	 * command stopped. */
	HOLD_EV_STOP,
	/* amqplock continued (SIGCONT). */
	HOLD_EV_CONT,
	/* The command and everything it started have ended; or, without a
	 * command, a terminating signal. */
	HOLD_EV_ENDED,
	/* --timeout has passed since the command started (SIGTERM is due),
	 * or --grace since then (SIGKILL). */
	HOLD_EV_TIMEOUT,
	HOLD_EVENTS
};

/* State of one hold while it runs. */
struct holding {
	struct sem *s;
	unsigned slot;
	const struct hold_opts *o;
	int sig_fd;
	enum hold_state state;
	/* The command, if there is one. */
	struct supervisor sv;
	bool supervising;
	/* Why the command could not be started (amqplock's failure: no
	 * descriptor, no process; hold_run returns AL_INTERNAL), or "". */
	char no_start[256];
	bool done;    /* the command and every process it started have ended */
	int code;     /* the command's exit status */
	int pending;  /* a terminating signal that came before the command ran */
	int stop_sig; /* the signal of the last HOLD_EV_STOP */
	/* Job control. terminal: the controlling terminal, or -1. The
	 * command's group gets it whenever amqplock is in the foreground and
	 * either leads its process group (it is a job of an interactive
	 * shell) or the command asked for it (SIGTTIN, SIGTTOU). */
	int terminal;
	bool wants_terminal, has_terminal;
	struct lease_end end; /* for job_end_lease_apart */
	double exited_at;     /* now_seconds() when CMD exited; 0: not yet */
	bool told_remaining;  /* what remains of the command was told */
	/* A process of the command that may not be signalled (another
	 * user's): the slot stays held until it has ended. */
	bool not_permitted;
	/* Why the keeper acted on its own (HOLD_EV_KEEPER_LATE). */
	const char *keeper_late;
	bool channel_fresh; /* after a loss: the channel was opened again */
	bool readable;      /* the last wait ended with data from the broker */
	/* The slot. */
	double heard;       /* last time the broker sent anything */
	double verify_sent; /* 0: no verification outstanding */
	double verify_sent_boot;
	double next_verify;
	/* Verifications in a row that could not declare our holder queue
	 * (sem.h, need_holder): the next comes sooner (next_verification). */
	unsigned holder_tries;
	double lost_at;   /* now_seconds() when lost; 0: not lost */
	double killed_at; /* 0: no SIGKILL yet */
	/* --timeout: when the command started, and when it timed out;
	 * 0: not yet. */
	double started_at;
	double timed_out_at;
	/* Away since, whether lease_running_out was told, and the reconnects. */
	bool warned;
	double away_since;
	double next_reconnect;
	struct backoff reconnects;
	char away_reason[256];
	/* Who we are, for status (holders.c): set up after the claim. */
	struct sem_answers answers;
};

/* The command's processes are stopped by amqplock. */
static inline bool holding_paused(const struct holding *h)
{
	return h->state == HOLD_PAUSED || h->state == HOLD_AWAY_PAUSED;
}

/* job.c: the command's side. It raises events; what they do is hold.c's. */

/* --min-hold: when a slot taken now stays taken until (boot_seconds()),
 * 0 without a minimum; and, if e's minimum has time left, our lease of
 * e's slot replaced on s's connection by one that lasts that long: true
 * if it was (the slot is then let go without a release). */
double job_minimum_until(const struct hold_opts *o);
bool job_keep_minimum(struct sem *s, const struct lease_end *e);
/* Starts the command (its keeper readied during the claim, or a fresh
 * one); h->done and h->no_start if it cannot. */
void job_start(struct holding *h);
/* The keeper learns when to kill the command unless renewed (boot clock). */
void job_kill_at(struct holding *h, double deadline);
/* The command gets --lost-signal, or SIGKILL at once while it is stopped. */
void job_lost(struct holding *h);
/* News for the user: event, one figure (key, in milliseconds) and text
 * (hold_events.notice; traced if nobody listens). */
void job_notice(struct holding *h, const char *event, const char *key, double seconds,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* --timeout (HOLD_EV_TIMEOUT's action): SIGTERM to every process of the
 * command, the second time SIGKILL. When its next step is due
 * (now_seconds(); INFINITY: none), and the event if it is due now. */
enum hold_event job_time_out(struct holding *h);
double job_timeout_next(const struct holding *h);
enum hold_event job_timeout_due(const struct holding *h);
/* SIGKILL to every process of the command, once. */
void job_kill(struct holding *h);
/* sig, which ends the job, to every process of the command: what is
 * stopped is continued so that it takes effect, unless amqplock stopped
 * the job itself (it goes on once its slot is checked). */
void job_end_with(struct holding *h, int sig);
/* The next event of the command (its keeper's reports), or HOLD_EV_NONE. */
enum hold_event job_next(struct holding *h);
/* A signal to amqplock: what the command is to get of it, and the event
 * it is for the slot, if any. */
enum hold_event job_signal(struct holding *h, int sig);
/* Stops every process of the command, then takes the terminal back. */
void job_freeze(struct holding *h);
/* Stops amqplock itself as the job's stop (sig); false if the kernel did
 * not stop it. */
bool job_stop_self(int sig);
/* The command goes on (the terminal handed back if it had it). */
void job_thaw(struct holding *h);
void job_tell_remaining(struct holding *h);
void job_take_terminal_back(struct holding *h);
/* The lease ended (or a --min-hold minimum left) on a connection apart. */
void job_end_lease_apart(void *arg);

#endif
