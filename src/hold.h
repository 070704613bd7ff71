/* The lock client's two halves, what cmd_client.c calls: waiting for a
 * slot (take.c: flock-style, in line or polling) and keeping it while a
 * command runs or until a signal (hold.c, the slot's side; job.c, the
 * command's side), servicing the broker connection all the while so that
 * a lost slot is noticed in time. The command's processes and terminal
 * are supervise.c's and keeper.c's; these files decide what to do with
 * them. */
#ifndef AMQPLOCK_HOLD_H
#define AMQPLOCK_HOLD_H

#include <stdbool.h>
#include <sys/types.h>

#include "clock.h"
#include "sem.h"
#include "supervise.h"

/* How long the broker may stay silent before a held slot's connection
 * counts as lost, for the heartbeat negotiated (0: none) and the reply
 * deadline. */
double hold_silence(unsigned heartbeat, double rpc_timeout);

/* What a hold tells its caller, as it happens: hold.c, take.c and job.c
 * print nothing themselves. Each hook may be NULL (nobody is told; -v
 * still traces); arg goes to each. */
struct hold_events {
	/* Called the moment the slot is lost (the reason is in
	 * status_message()), before the command has ended. */
	void (*lost)(void *arg);
	/* News while holding: event "disconnected" or "lease_running_out"
	 * (key "deadline_ms": until the command gets lost_signal) or
	 * "reconnected" (key "away_ms"), with a sentence for people. */
	void (*notice)(void *arg, const char *event, const char *key, unsigned long ms,
		       const char *text);
	/* A line for people that is no event: the command could not be
	 * started, a process of it may not be signalled, its keeper was
	 * killed. NULL: -v alone says it. */
	void (*warning)(void *arg, const char *text);
	/* Waiting for a slot: called after each try once the wait has
	 * lasted WAITING_NEWS seconds, with the slots there are and the
	 * seconds waited; once more with waited < 0 when the wait ends,
	 * however it ends. NULL: nobody is told. */
	void (*waiting)(void *arg, unsigned max, double waited);
	/* Called with the slot a claim is for, just before the command's
	 * keeper is forked: what the command is to find in its environment
	 * is set then. */
	void (*command_env)(void *arg, unsigned slot);
	/* The command has exited a while ago and part of it runs on: what
	 * amqplock still waits for ("1 remaining process: sleep (pid
	 * 123)"), once. NULL: nobody is told. */
	void (*remaining)(void *arg, const char *what);
	void *arg;
};

/* cli.c's options are bound to nonblock, wait, lost_signal, grace and
 * lease of struct cli's hold; the command fills in the rest. */
struct hold_opts {
	bool nonblock;   /* try once */
	double wait;     /* -w: seconds, for messages (hold_take's `until`); < 0: none */
	int lost_signal; /* sent to every process of the command on loss */
	double grace;    /* seconds between lost_signal and SIGKILL */
	char **argv;     /* the command; NULL: hold until a signal */
	/* The lease, seconds (the holder's side of struct sem has it too); 0: none,
	 * the slot is lost with the connection. */
	double lease;
	/* --timeout: the command (every process of it) gets SIGTERM this
	 * long after it started, SIGKILL --grace later, and hold exits
	 * HOLD_TIMEOUT_EXIT. 0: none; < 0: not given ($AMQPLOCK_TIMEOUT
	 * may say). */
	double timeout;
	/* --min-hold: the slot stays taken this long after it was taken,
	 * by a lease of that length left behind (sem_lease_minimum); 0:
	 * none. */
	double min_hold;
	/* --token: a fencing token is drawn once the slot is ours, before
	 * the command starts (hold_take; the holder's side keeps it). */
	bool token;
	/* Where to connect again after a lost connection, with a lease. */
	struct conn_opts *conn_opts;
	/* Who is told what happens (cmd_client.c prints it). */
	struct hold_events events;
	/* With a command: its keeper (below); NULL without one. */
	struct hold_keeper *keeper;
};

/* hold's exit code after --timeout, whatever ended the command: as
 * timeout(1)'s; no sysexits code, so never one of amqplock's own. */
#define HOLD_TIMEOUT_EXIT 124

/* A slot's lease, for the keeper's last act (and amqplock's own end of a
 * lease after a loss): ended on a connection of its own. The keeper also
 * keeps it on that connection (apart) while amqplock cannot and a process
 * of the command that may not be signalled runs on. */
struct lease_end {
	struct sem *s;
	const struct hold_opts *o;
	unsigned slot;
	struct conn apart;
	bool apart_open;
	/* --min-hold: until when (boot_seconds()) the slot stays taken
	 * after the command, by a minimum lease; 0: no minimum. */
	double min_until;
};

/* The command's keeper (keeper.c) is forked while each claim is under
 * way, in the milliseconds the broker takes to answer: once the slot is
 * ours the command starts without a fork of amqplock in the way, and
 * amqplock killed at any moment after the claim was sent leaves the
 * lease to the keeper, which ends it, rather than to run out. A claim
 * that fails abandons it. */
struct hold_keeper {
	struct supervisor sv;
	bool ready;   /* forked for end.slot, waiting for super_go */
	int terminal; /* the controlling terminal, or -1 */
	struct lease_end end;
};

/* Opens the terminal; nothing is forked yet. */
void hold_keeper_init(struct hold_keeper *kp);
/* A keeper readied for a claim that failed (or a command that will not
 * run) exits; kp may be NULL. */
void hold_keeper_abandon(struct hold_keeper *kp);

/* The claim of slot k has been sent (sem.h's claim_sent, which take.c
 * sets with the hold_keeper as arg): the command's keeper is forked now,
 * while the broker works. */
void hold_keeper_ready(void *arg, unsigned k);

/* Waits for a slot until `until` (o->nonblock: tries once). AL_OK with
 * *slot and *max; AL_BUSY if none was obtained in time. A signal
 * meanwhile ends amqplock (see signals_exit_on_interrupt). */
enum al_status hold_take(struct sem *s, const struct hold_opts *o, struct deadline until,
			 unsigned *slot, unsigned *max);

/* Holds slot until the command and everything it started have ended (its
 * exit code is returned in *code, 128+N for a signal, 126/127 if it could
 * not be run) or, without a command, until a terminating signal (*code 0).
 * A terminating signal that came before the command could start means it
 * is not run: *code is 128+N. AL_LOST if the slot was lost; every process
 * of the command has then been signalled and has ended. AL_INTERNAL if the
 * command could not be started for want of a descriptor or a process (the
 * slot given back). sig_fd: from signals_block, called as soon as the slot
 * was held. */
enum al_status hold_run(struct sem *s, unsigned slot, const struct hold_opts *o, int sig_fd,
			int *code);

#endif
