/* What the lock clients (acquire, hold, wait) tell while they wait and
 * hold: their events for --json, and for a person at a terminal how a
 * wait goes (never on a pipe). cmd_client.c gives these as hold's hooks
 * (struct hold_events) and calls the rest itself. */
#ifndef AMQPLOCK_NEWS_H
#define AMQPLOCK_NEWS_H

#include <stdbool.h>

#include "cli.h"
#include "clock.h"
#include "conn.h"
#include "sem.h"

/* One lock client's run. */
struct client {
	struct cli *cli;
	unsigned slot;
	bool waiting_told;       /* the "waiting" event is out */
	bool waiting_line;       /* a waiting line is on the terminal */
	const char *waiting_for; /* "a slot of", or wait's words */
	/* acquire and hold: the holder's side of the semaphore. */
	struct sem_hold hold;
};

/* Begins an event (out_begin): its name, the semaphore and the slot. */
void news_event(struct client *cl, const char *name);

/* Hooks of struct hold_events, arg a struct client. */
void news_lost(void *arg);
void news_notice(void *arg, const char *name, const char *key, unsigned long ms, const char *text);
void news_warning(void *arg, const char *text);
void news_waiting(void *arg, unsigned max, double waited);
void news_remaining(void *arg, const char *what);

/* At a terminal, once per outage: the broker is away, and amqplock tries
 * again until `until` (`why`: "-w", say); then, when it is back. */
void news_away(struct client *cl, struct deadline until, const char *why);
void news_back(struct client *cl, const struct conn *c);
/* At a terminal: the broker blocked us for a resource alarm, and we wait
 * for it to clear until `until`. */
void news_alarm(struct client *cl, const struct conn *c, struct deadline until);
void news_alarm_over(struct client *cl, const struct conn *c);

#endif
