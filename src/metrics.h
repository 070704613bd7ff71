/* The OpenMetrics text format of status --metrics and list --metrics,
 * which Prometheus scrapes and node_exporter's textfile collector reads:
 * a family at a time (# HELP, # TYPE, then one sample per semaphore,
 * labelled semaphore="NAME"), and # EOF. Pure: what to print comes in,
 * text goes out. */
#ifndef AMQPLOCK_METRICS_H
#define AMQPLOCK_METRICS_H

#include <stdbool.h>
#include <stdio.h>

/* One semaphore as a status or a list saw it. */
struct metrics_sem {
	const char *name;
	/* Its state could be read (amqplock_up 1): the rest is set. */
	bool up;
	unsigned max, held, free, away, unreachable, missing, draining;
	bool paused;
	bool waiting_known;
	unsigned long waiting;
	/* Seconds since the oldest named holder took its slot; < 0: none
	 * named (none held, --no-names, or no answer). */
	double oldest_age;
};

/* Which families: a list knows max, held and waiting only. */
enum metrics_view { METRICS_STATUS, METRICS_LIST };

/* Writes the families of `view` for sems[0..n) to f, ending with # EOF. */
void metrics_write(FILE *f, const struct metrics_sem *sems, size_t n, enum metrics_view view);

#endif
