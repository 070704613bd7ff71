/* The messages between supervise.c (amqplock's side) and keeper.c (the
 * keeper process) on their socket: amqplock's orders, the keeper's events.
 * For those two files only. */
#ifndef AMQPLOCK_SUPERVISE_PARTS_H
#define AMQPLOCK_SUPERVISE_PARTS_H

#include <stdint.h>

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
	uint64_t token; /* GO: CMD's $AMQPLOCK_TOKEN (0: none) */
};
/* The keeper's answer to STOP_ALL, among the events: every descendant is
 * stopped. Never returned by super_next. */
#define FROZEN (-1)
struct event_msg {
	int event, value; /* event: enum super_event (keeper.h), or FROZEN */
};

#endif
