/* Holding a slot: waiting for one (flock-style), then keeping it while a
 * command runs (hold) or until a signal (acquire), servicing the broker
 * connection all the while so that a lost slot is noticed in time. */
#ifndef AMQPLOCK_HOLD_H
#define AMQPLOCK_HOLD_H

#include <stdbool.h>
#include <sys/types.h>

#include "sem.h"

struct hold_opts {
	bool nonblock;   /* try once */
	double wait;     /* give up after this many seconds; < 0: never */
	int lost_signal; /* sent to the command's process group on loss */
	double grace;    /* seconds between lost_signal and SIGKILL */
	char **argv;     /* the command; NULL: hold until a signal */
	/* Called the moment the slot is lost (the reason is in
	 * status_message()), before the command has ended. */
	void (*lost)(void *arg);
	void *arg;
};

/* Blocks the signals amqplock handles itself, so that they are read from
 * a descriptor in the event loop. Call before anything else. */
enum al_status hold_signals_init(void);

/* Starts the watchdog that kills the command's process group if amqplock
 * itself dies, even by SIGKILL. Call before connecting, so that it never
 * holds the broker connection open. */
enum al_status hold_guard_start(void);

/* Waits for a slot as o says. AL_OK with *slot and *max; AL_BUSY if none
 * was obtained in time; *signo is set (and AL_BUSY returned) if a signal
 * cut the wait short. */
enum al_status hold_take(struct sem *s, const struct hold_opts *o, unsigned *slot, unsigned *max,
			 int *signo);

/* Holds slot until the command ends (its exit code is returned in *code,
 * 128+N for a signal, 126/127 if it could not be run) or, without a
 * command, until a terminating signal (*code 0). AL_LOST if the slot was
 * lost; the command has then been signalled and has ended. */
enum al_status hold_run(struct sem *s, unsigned slot, const struct hold_opts *o, int *code);

#endif
