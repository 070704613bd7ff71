/* The keeper (keeper.c), the process between amqplock and CMD: what it is
 * given (struct super_opts), what it reports (enum super_event), and its
 * entry. These are supervise.h's words, which callers use through it; they
 * are here because the keeper speaks them too, and it is below supervise.c,
 * which alone starts it. */
#ifndef AMQPLOCK_KEEPER_H
#define AMQPLOCK_KEEPER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Its name in ps, /proc/PID/comm and /proc/PID/cmdline (supervise.h says
 * why it has no "amqplock" in it). */
#define KEEPER_NAME "amqp-keeper"

/* What it runs and keeps. */
struct super_opts {
	char **argv; /* CMD */
	/* The controlling terminal, or -1: with give_terminal, CMD's process
	 * group becomes its foreground group before CMD runs. */
	int terminal;
	bool give_terminal;
	/* A descriptor the keeper keeps open until every descendant is gone
	 * (the broker connection: the slot lives as long as it does), or -1. */
	int hold_fd;
	/* If amqplock dies first (before super_done): the keeper's last
	 * act, once every descendant is gone (ending the lease), or NULL.
	 * With one, the keeper outlives the command until super_done. */
	void (*last_act)(void *arg);
	/* While amqplock cannot keep the slot (it is dead, or stopped) and a
	 * process of the job that the keeper may not signal runs on: called
	 * about once a second, to keep the slot held (renew the lease), or
	 * NULL. */
	void (*hold_on)(void *arg);
	void *arg;
	/* super_start: start_by and token as super_go takes them. */
	double start_by;
	uint64_t token;
};

/* What it reports (super_next); SUPER_NOTHING and SUPER_VANISHED are
 * supervise.c's own. */
enum super_event {
	SUPER_NOTHING,
	SUPER_STARTED,  /* value: CMD's pid, which is also its process group */
	SUPER_NO_EXEC,  /* value: errno of the failed exec (exit status follows) */
	SUPER_STOPPED,  /* CMD stopped; value: the signal */
	SUPER_EXITED,   /* value: CMD's exit status (128+N after signal N) */
	SUPER_EMPTY,    /* no descendant is left; the keeper is done */
	SUPER_VANISHED, /* the keeper died; its orphans are ours (see super_kill_orphans) */
	/* The keeper's super_kill_at deadline came: it kills them all;
	 * value 1: it had passed at super_go, and CMD was never started. */
	SUPER_DEADLINE,
	/* A process of the job may not be signalled (EPERM: it runs as
	 * another user); value: its pid. Once per process. */
	SUPER_NOT_PERMITTED,
	/* CMD could not be started for want of a descriptor or a process
	 * (value: errno); SUPER_EMPTY follows. */
	SUPER_NO_START,
};

/* In the keeper's process, just forked by super_prepare: ctl is its end
 * of the socket to amqplock (supervise_parts.h's messages), parent
 * amqplock's pid. Never returns. */
_Noreturn void keeper_main(const struct super_opts *o, int ctl, pid_t parent);

#endif
