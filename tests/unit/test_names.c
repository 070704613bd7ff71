/* Semaphore names, prefixes and the queue names made from them. */
#include <stdlib.h>
#include <string.h>

#include "names.h"
#include "tap.h"

static void valid_names(void)
{
	static const char *const good[] = {
		"jobs",  "a",   "nightly.backup", "db:primary", "x-1",
		"x-1-C", "x-A", "x-1A",           "x-1-a",      "X_Y.z:0-9"};
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		is_str(names_problem(good[i]), NULL, "name \"%s\" is valid", good[i]);
}

static void invalid_names(void)
{
	static const char *const bad[] = {
		"",           "a b",   "a/b",  "a\tb",   "caf\xc3\xa9", "\xff", "x-1-A", "x-22-B",
		"jobs-007-A", "1-1-B", "-1-A", "x--1-A", "a*",          "a\nb", "x-3-L", "x-4-D"};
	char long_name[NAME_MAX_BYTES + 2];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(names_problem(bad[i]) != NULL, "name #%zu is refused", i);
	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	ok(names_problem(long_name) != NULL, "201-byte name is refused");
	long_name[NAME_MAX_BYTES] = '\0';
	is_str(names_problem(long_name), NULL, "200-byte name is valid");
}

static void prefixes(void)
{
	char long_prefix[PREFIX_MAX_BYTES + 2];
	struct sem_name sn;

	is_str(names_prefix_problem(""), NULL, "empty prefix is valid");
	is_str(names_prefix_problem("amqplock."), NULL, "default prefix is valid");
	ok(names_prefix_problem("a b") != NULL, "prefix with a space is refused");
	memset(long_prefix, 'p', sizeof(long_prefix) - 1);
	long_prefix[sizeof(long_prefix) - 1] = '\0';
	ok(names_prefix_problem(long_prefix) != NULL, "41-byte prefix is refused");
	ok(sem_name_init(&sn, "", "amq.x") != NULL, "amq. without prefix is refused");
	ok(sem_name_init(&sn, "amq.", "x") != NULL, "amq. as prefix is refused");
	is_str(sem_name_init(&sn, "amqplock.", "amq.x"), NULL, "amq. after a prefix is fine");
	ok(sem_name_init(&sn, "p-", "1-A") != NULL,
	   "prefix p- and name 1-A make a slot queue name");
	ok(sem_name_init(&sn, "amqplock.x-1-", "B") != NULL,
	   "prefix and name together ending in -1-B are refused");
	ok(sem_name_init(&sn, "x-", "12-B") != NULL, "prefix x- and name 12-B are refused");
	is_str(sem_name_init(&sn, "p-", "1-C"), NULL, "prefix p- and name 1-C are fine");
	is_str(sem_name_init(&sn, "p-1", "-AB"), NULL, "prefix p-1 and name -AB are fine");
	is_str(sem_name_init(&sn, "my.p-", "x-1"), NULL, "prefix my.p- and name x-1 are fine");
}

static void queue_names(void)
{
	char q[QUEUE_NAME_MAX + 1], longest[NAME_MAX_BYTES + 1];
	char prefix[PREFIX_MAX_BYTES + 1];
	struct sem_name sn;

	sem_name_init(&sn, "amqplock.", "jobs");
	is_str(sn.base, "amqplock.jobs", "admin mutex name");
	sem_name_slot(&sn, 3, SLOT_QUEUE, q);
	is_str(q, "amqplock.jobs-3-A", "slot queue name");
	sem_name_slot(&sn, 12, HOLDER_QUEUE, q);
	is_str(q, "amqplock.jobs-12-B", "holder queue name");

	ok(sem_name_parse_slot(&sn, "amqplock.jobs-3-A", 17, SLOT_QUEUE) == 3, "parse slot 3");
	ok(sem_name_parse_slot(&sn, "amqplock.jobs-12-B", 18, HOLDER_QUEUE) == 12,
	   "parse holder 12");
	ok(sem_name_parse_slot(&sn, "amqplock.jobs-3-A", 17, HOLDER_QUEUE) == 0, "kind must match");
	ok(sem_name_parse_slot(&sn, "amqplock.jobz-3-A", 17, SLOT_QUEUE) == 0, "base must match");
	ok(sem_name_parse_slot(&sn, "amqplock.jobs--A", 16, SLOT_QUEUE) == 0, "no digits");
	ok(sem_name_parse_slot(&sn, "amqplock.jobs-03-A", 18, SLOT_QUEUE) == 0,
	   "leading zero is not ours");
	ok(sem_name_parse_slot(&sn, "amqplock.jobs-x-1-A", 19, SLOT_QUEUE) == 0,
	   "another semaphore's slot");

	/* The two queues of a semaphore that are not a slot's. */
	sem_name_slot(&sn, 1, WAITERS_QUEUE, q);
	is_str(q, "amqplock.jobs#waiters", "waiters queue name (the line)");
	sem_name_slot(&sn, 1, QUORUM_MARKER_QUEUE, q);
	is_str(q, "amqplock.jobs#quorum", "quorum marker name");
	ok(sem_name_parse_slot(&sn, "amqplock.jobs#waiters", 21, WAITERS_QUEUE) == 1,
	   "parse the waiters queue");
	ok(sem_name_parse_slot(&sn, "amqplock.jobs#waiters", 21, QUORUM_MARKER_QUEUE) == 0,
	   "the waiters queue is not the marker");
	ok(sem_name_parse_slot(&sn, "amqplock.jobs#quorum", 20, WAITERS_QUEUE) == 0,
	   "the marker is not the waiters queue");
	ok(sem_name_parse_slot(&sn, "amqplock.job#waiters", 20, WAITERS_QUEUE) == 0,
	   "another semaphore's waiters queue");
	ok(sem_name_parse_slot(&sn, "amqplock.jobs#waiter", 20, WAITERS_QUEUE) == 0,
	   "a shorter suffix is not ours");

	memset(longest, 'n', NAME_MAX_BYTES);
	longest[NAME_MAX_BYTES] = '\0';
	memset(prefix, 'p', PREFIX_MAX_BYTES);
	prefix[PREFIX_MAX_BYTES] = '\0';
	is_str(sem_name_init(&sn, prefix, longest), NULL, "longest prefix and name fit");
	sem_name_slot(&sn, 4294967295u, SLOT_QUEUE, q);
	ok(strlen(q) <= QUEUE_NAME_MAX, "largest queue name fits in 255 bytes (%zu)", strlen(q));
	sem_name_waiter(&sn, ~0ull, q);
	ok(strlen(q) <= QUEUE_NAME_MAX, "longest waiter's queue name fits in 255 bytes (%zu)",
	   strlen(q));
	ok(sem_name_is_waiter(&sn, q, strlen(q)), "the longest waiter's queue name is one");
}

static void line_names(void)
{
	char q[QUEUE_NAME_MAX + 1];
	struct sem_name sn;

	sem_name_init(&sn, "amqplock.", "jobs");
	sem_name_slot(&sn, 1, LINE_QUEUE, q);
	is_str(q, "amqplock.jobs#line", "the line of entries");
	ok(sem_name_parse_slot(&sn, "amqplock.jobs#line", 18, LINE_QUEUE) == 1, "parse the line");
	ok(sem_name_parse_slot(&sn, "amqplock.jobs#line", 18, WAITERS_QUEUE) == 0,
	   "the line is not the waiters queue");
	sem_name_waiter(&sn, 0x1234567890abcdefull, q);
	is_str(q, "amqplock.jobs#w567890abcdef", "a waiter's queue: the id's low 48 bits");
	sem_name_waiter(&sn, 5, q);
	is_str(q, "amqplock.jobs#w000000000005", "a waiter's queue: 12 digits always");
	ok(sem_name_is_waiter(&sn, q, strlen(q)), "a waiter's queue is one");
	ok(!sem_name_is_waiter(&sn, "amqplock.jobs#w00000000000", 26), "one digit short");
	ok(!sem_name_is_waiter(&sn, "amqplock.jobs#w0000000000050", 28), "one digit more");
	ok(!sem_name_is_waiter(&sn, "amqplock.jobs#w00000000000G", 27), "not hex");
	ok(!sem_name_is_waiter(&sn, "amqplock.jobs#w00000000000A", 27), "upper case");
	ok(!sem_name_is_waiter(&sn, "amqplock.jobx#w000000000005", 27), "another semaphore's");
	ok(!sem_name_is_waiter(&sn, "amqplock.jobs-1-B", 17), "a holder queue");
	ok(!sem_name_is_waiter(&sn, "amqplock.jobs#line", 18), "the line itself");
	ok(!sem_name_is_waiter(&sn, "amq", 3), "shorter than the base");
}

int main(void)
{
	valid_names();
	invalid_names();
	prefixes();
	queue_names();
	line_names();
	return done_testing();
}
