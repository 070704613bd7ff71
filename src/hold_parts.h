/* What hold.c (holding a slot) and job.c (the command under it) share;
 * nothing else includes this. */
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

/* State of one hold while it runs. */
struct holding {
	struct sem *s;
	unsigned slot;
	const struct hold_opts *o;
	int sig_fd;
	/* The command, if there is one. */
	struct supervisor sv;
	bool supervising;
	/* Why the command could not be started (amqplock's failure: no
	 * descriptor, no process; hold_run returns AL_INTERNAL), or "". */
	char no_start[256];
	bool done;   /* the command and every process it started have ended */
	int code;    /* the command's exit status */
	int pending; /* a terminating signal that came before the command ran */
	/* Job control. terminal: the controlling terminal, or -1. The
	 * command's group gets it whenever amqplock is in the foreground and
	 * either leads its process group (it is a job of an interactive
	 * shell) or the command asked for it (SIGTTIN, SIGTTOU). */
	int terminal;
	bool wants_terminal, has_terminal;
	struct lease_end end; /* for end_lease_apart */
	bool frozen;          /* the command's processes are stopped */
	double exited_at;     /* now_seconds() when CMD exited; 0: not yet */
	bool told_remaining;  /* what remains of the command was told */
	/* A process of the command that may not be signalled (another
	 * user's): the slot stays held until it has ended. */
	bool not_permitted;
	bool channel_fresh; /* after a loss: the channel was opened again */
	/* The slot. */
	double heard;       /* last time the broker sent anything */
	double verify_sent; /* 0: no verification outstanding */
	double verify_sent_boot;
	double next_verify;
	/* Verifications in a row that could not declare our holder queue
	 * (sem.h, need_holder): the next comes sooner (next_verification). */
	unsigned holder_tries;
	double lost_at;   /* 0: still held */
	double killed_at; /* 0: no SIGKILL yet */
	/* Away: the connection was lost and the lease keeps the slot while
	 * amqplock connects again. */
	bool away, warned;
	double away_since;
	bool thaw_when_back; /* continued while away: the command goes on once back */
	double next_reconnect;
	struct backoff reconnects;
	char away_reason[256];
	/* Who we are, for status (holders.c): set up after the claim. */
	struct sem_answers answers;
};

/* hold.c: the slot's side */

/* --min-hold (job.c): when a slot taken now stays taken until
 * (boot_seconds()), 0 without a minimum; and, if e's minimum has time
 * left, our lease of e's slot replaced on s's connection by one that lasts
 * that long: true if it was (the slot is then let go without a release). */
double minimum_until(const struct hold_opts *o);
bool keep_minimum(struct sem *s, const struct lease_end *e);
/* The broker confirmed a renewal sent at `sent` (boot clock): the keeper
 * learns the new deadline. */
void renewed(struct holding *h, double sent);
/* Verifies the slot now and waits for the answer. */
enum al_status verify_now(struct holding *h);
/* The slot is lost: the command gets lost_signal, then SIGKILL. */
void give_up_slot(struct holding *h, bool keep_connection);
/* The connection is lost: away while the lease keeps the slot, else lost. */
void connection_lost(struct holding *h);
/* News for the user: event, one figure (key, in milliseconds) and text. */
void notice(struct holding *h, const char *event, const char *key, double seconds, const char *fmt,
	    ...) __attribute__((format(printf, 5, 6)));
/* A line for people that is no event (hold_opts.warning). */
void warn(struct holding *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* job.c: the command's side */

void start_command(struct holding *h);
void on_supervisor(struct holding *h);
void on_signal(struct holding *h, int sig);
void tell_remaining(struct holding *h);
void thaw(struct holding *h);
void take_terminal_back(struct holding *h);
void end_lease_apart(void *arg);

#endif
