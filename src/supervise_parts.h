/* What supervise.c (amqplock's side) and keeper.c (the keeper process)
 * share: the messages between them. For those two files only. */
#ifndef AMQPLOCK_SUPERVISE_PARTS_H
#define AMQPLOCK_SUPERVISE_PARTS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "supervise.h"

/* How often the keeper looks whether amqplock has been stopped. amqplock
 * keeps its slot through a stop this short (the broker waits at least
 * 2.5 heartbeats), so CMD never runs unsupervised for long. */
#define WATCH_INTERVAL_MS 200

/* Requests from amqplock to the keeper. */
enum order {
	SIGNAL_GROUP,
	SIGNAL_ALL,
	SIGNAL_ALL_AWAKE,
	STOP_ALL,
	CONTINUE_ALL,
	KILL_AT,
	DONE,
	GO
};

struct order_msg {
	int order, sig; /* GO: sig says whether CMD gets the terminal */
	double when;    /* KILL_AT: the kill deadline; GO: start_by (0: none) */
};
/* The keeper's answer to STOP_ALL, among the events: every descendant is
 * stopped. Never returned by super_next. */
#define FROZEN (-1)
struct event_msg {
	int event, value;
};

/* keeper.c */
_Noreturn void keeper_main(const struct super_opts *o, int ctl, pid_t parent);

#endif
