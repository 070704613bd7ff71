/* The OpenMetrics text of status --metrics and list --metrics. */
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "tap.h"

/* metrics_write's text for sems[0..n). The caller frees it. */
static char *written(const struct metrics_sem *sems, size_t n, enum metrics_view view)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		abort();
	metrics_write(f, sems, n, view);
	fclose(f);
	return text;
}

static void a_status(void)
{
	const struct metrics_sem s[] = {
		{.name = "jobs",
		 .up = true,
		 .max = 3,
		 .held = 2,
		 .free = 1,
		 .away = 1,
		 .draining = 2,
		 .waiting_known = true,
		 .waiting = 4,
		 .oldest_age = 61.5},
		{.name = "gone", .oldest_age = -1},
	};
	char *t = written(s, 2, METRICS_STATUS);

	ok(strncmp(t, "# TYPE amqplock_up gauge\n# HELP amqplock_up ", 44) == 0,
	   "a family starts with its TYPE and HELP");
	ok(strstr(t, "\namqplock_up{semaphore=\"jobs\"} 1\namqplock_up{semaphore=\"gone\"} 0\n") !=
		   NULL,
	   "amqplock_up: 1 for a semaphore read, 0 for one that was not");
	ok(strstr(t, "\namqplock_max{semaphore=\"jobs\"} 3\n# TYPE amqplock_held gauge\n") != NULL,
	   "a semaphore not read has no other sample");
	ok(strstr(t, "amqplock_waiting{semaphore=\"jobs\"} 4\n") != NULL, "waiting");
	ok(strstr(t, "amqplock_away{semaphore=\"jobs\"} 1\n") != NULL, "away");
	ok(strstr(t, "amqplock_draining{semaphore=\"jobs\"} 2\n") != NULL, "draining");
	ok(strstr(t, "# TYPE amqplock_oldest_holder_age_seconds gauge\n"
		     "# UNIT amqplock_oldest_holder_age_seconds seconds\n") != NULL,
	   "the age family has its unit");
	ok(strstr(t, "amqplock_oldest_holder_age_seconds{semaphore=\"jobs\"} 61.500\n") != NULL,
	   "the age, in seconds");
	ok(strlen(t) > 6 && strcmp(t + strlen(t) - 6, "# EOF\n") == 0, "ends with # EOF");
	free(t);
}

static void unknowns_left_out(void)
{
	const struct metrics_sem s[] = {{.name = "x", .up = true, .max = 1, .oldest_age = -1}};
	char *t = written(s, 1, METRICS_STATUS);

	ok(strstr(t, "amqplock_waiting{") == NULL, "no waiting sample when the line was unread");
	ok(strstr(t, "amqplock_oldest_holder_age_seconds{") == NULL, "no age without a holder");
	ok(strstr(t, "# TYPE amqplock_waiting gauge\n") != NULL, "the family is still described");
	free(t);
}

static void a_list(void)
{
	const struct metrics_sem s[] = {{.name = "a",
					 .up = true,
					 .max = 2,
					 .held = 1,
					 .waiting_known = true,
					 .waiting = 0,
					 .oldest_age = -1}};
	char *t = written(s, 1, METRICS_LIST);

	is_str(t,
	       "# TYPE amqplock_max gauge\n"
	       "# HELP amqplock_max Slots of the semaphore (max).\n"
	       "amqplock_max{semaphore=\"a\"} 2\n"
	       "# TYPE amqplock_held gauge\n"
	       "# HELP amqplock_held Slots held, by a holder or its lease.\n"
	       "amqplock_held{semaphore=\"a\"} 1\n"
	       "# TYPE amqplock_waiting gauge\n"
	       "# HELP amqplock_waiting Clients waiting in line for a slot.\n"
	       "amqplock_waiting{semaphore=\"a\"} 0\n"
	       "# EOF\n",
	       "a list: max, held and waiting");
	free(t);
}

static void labels_escaped(void)
{
	const struct metrics_sem s[] = {{.name = "a\"b\\c\nd", .oldest_age = -1}};
	char *t = written(s, 1, METRICS_STATUS);

	ok(strstr(t, "amqplock_up{semaphore=\"a\\\"b\\\\c\\nd\"} 0\n") != NULL,
	   "quote, backslash and newline escaped in a label");
	free(t);
}

int main(void)
{
	a_status();
	unknowns_left_out();
	a_list();
	labels_escaped();
	return done_testing();
}
