/* The OpenMetrics text of status --metrics and list --metrics: a table
 * of families, each written for every semaphore at once (OpenMetrics
 * wants a family's samples together). Names are Prometheus's style:
 * amqplock_ and the JSON key's meaning, a unit as a suffix. */
#include "metrics.h"

#include <string.h>

enum value_kind { COUNT, FLAG, SECONDS };

struct family {
	const char *name, *help;
	enum value_kind kind;
	bool in_list; /* a list (the management API's counts) has it too */
	/* The sample of s, false if s has none in this family. */
	bool (*get)(const struct metrics_sem *s, double *v);
};

static bool get_up(const struct metrics_sem *s, double *v)
{
	*v = s->up;
	return true;
}

#define GETTER(field, cond)                                                                        \
	static bool get_##field(const struct metrics_sem *s, double *v)                            \
	{                                                                                          \
		*v = (double)s->field;                                                             \
		return s->up && (cond);                                                            \
	}
GETTER(max, true)
GETTER(held, true)
GETTER(free, true)
GETTER(waiting, s->waiting_known)
GETTER(paused, true)
GETTER(away, true)
GETTER(unreachable, true)
GETTER(missing, true)
GETTER(draining, true)
GETTER(oldest_age, s->oldest_age >= 0)
#undef GETTER

static const struct family families[] = {
	{"amqplock_up", "Whether the semaphore's state could be read (1) or not (0).", FLAG, false,
	 get_up},
	{"amqplock_max", "Slots of the semaphore (max).", COUNT, true, get_max},
	{"amqplock_held", "Slots held, by a holder or its lease.", COUNT, true, get_held},
	{"amqplock_free", "Slots free to take.", COUNT, false, get_free},
	{"amqplock_waiting", "Clients waiting in line for a slot.", COUNT, true, get_waiting},
	{"amqplock_paused", "Whether max was set to 0 on purpose (1) or not (0).", FLAG, false,
	 get_paused},
	{"amqplock_away",
	 "Slots held by their lease alone: the holder reconnecting, or a "
	 "--min-hold after its job.",
	 COUNT, false, get_away},
	{"amqplock_unreachable", "Slots held on a node that is down.", COUNT, false,
	 get_unreachable},
	{"amqplock_missing", "Slots whose slot queue is gone (amqplock check --repair).", COUNT,
	 false, get_missing},
	{"amqplock_draining",
	 "Holders above max whose jobs run on to their end after a --drain shrink.", COUNT, false,
	 get_draining},
	{"amqplock_oldest_holder_age_seconds",
	 "Time since the longest-running named holder took its slot.", SECONDS, false,
	 get_oldest_age},
};

/* A label value: backslash, double quote and newline escaped. */
static void write_label(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

void metrics_write(FILE *f, const struct metrics_sem *sems, size_t n, enum metrics_view view)
{
	const struct family *fam;
	size_t i;
	double v;

	for (fam = families; fam < families + sizeof(families) / sizeof(families[0]); fam++) {
		if (view == METRICS_LIST && !fam->in_list)
			continue;
		fprintf(f, "# TYPE %s gauge\n", fam->name);
		if (fam->kind == SECONDS)
			fprintf(f, "# UNIT %s seconds\n", fam->name);
		fprintf(f, "# HELP %s %s\n", fam->name, fam->help);
		for (i = 0; i < n; i++) {
			if (!fam->get(&sems[i], &v))
				continue;
			fprintf(f, "%s{semaphore=\"", fam->name);
			write_label(f, sems[i].name);
			if (fam->kind == SECONDS)
				fprintf(f, "\"} %.3f\n", v);
			else
				fprintf(f, "\"} %.0f\n", v);
		}
	}
	fputs("# EOF\n", f);
}
