/* The semaphores under a prefix, from the management API's lists. */
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "tap.h"

static const char queues[] = "[{\"name\":\"amqplock.jobs-1-A\",\"consumers\":0},"
			     "{\"name\":\"amqplock.jobs-2-A\"},"
			     "{\"name\":\"amqplock.jobs-3-A\",\"consumers\":0},"
			     "{\"name\":\"amqplock.jobs-1-B\",\"consumers\":0},"
			     "{\"name\":\"amqplock.jobs-1-L\",\"consumers\":0},"
			     "{\"name\":\"amqplock.jobs-3-L\",\"consumers\":0},"
			     "{\"name\":\"amqplock.jobs#waiters\",\"consumers\":2},"
			     /* the line of entries: its entries wait too; the
			      * waiters' own queues are nobody's slots */
			     "{\"name\":\"amqplock.jobs#line\",\"consumers\":0,"
			     "\"messages_ready\":3},"
			     "{\"name\":\"amqplock.jobs#w0123456789ab\",\"consumers\":1},"
			     "{\"name\":\"amqplock.jobs#quorum\",\"consumers\":0},"
			     "{\"name\":\"amqplock.jobs\",\"consumers\":0},"
			     /* the name of another semaphore, ending in digits */
			     "{\"name\":\"amqplock.db-1-1-A\",\"consumers\":0},"
			     /* slot queues gone, the record left: max from the record */
			     "{\"name\":\"amqplock.nightly-1-B\",\"consumers\":0},"
			     /* a create stopped halfway: the record's size */
			     "{\"name\":\"amqplock.part-2-A\",\"consumers\":0},"
			     /* only a line: no semaphore */
			     "{\"name\":\"amqplock.gone#waiters\",\"consumers\":1},"
			     "{\"name\":\"amqplock.gone#line\",\"messages_ready\":1},"
			     /* not ours, or not a name */
			     "{\"name\":\"other.jobs-1-A\"},"
			     "{\"name\":\"amqplock.bad name-1-A\"},"
			     "{\"name\":\"amqplock.x-01-A\"},"
			     "{\"name\":\"amqplock.x-0-A\"},"
			     "{\"name\":\"amqplock.x-10001-A\"},"
			     "{\"name\":\"amqplock.x-1-C\"},"
			     "{\"name\":\"amqplock.-1-A\"},"
			     "{\"name\":\"amqplock.y-1-A-2-A\"},"
			     "{\"name\":7},{\"consumers\":3},[],null]";

static const char exchanges[] =
	"[{\"name\":\"\"},{\"name\":\"amq.direct\"},"
	"{\"name\":\"amqplock.jobs-1-A\"},{\"name\":\"amqplock.jobs-2-A\"},"
	"{\"name\":\"amqplock.jobs-3-A\"},{\"name\":\"amqplock.jobs-4-A\"},"
	"{\"name\":\"amqplock.nightly-1-A\"},{\"name\":\"amqplock.nightly-2-A\"},"
	"{\"name\":\"amqplock.nightly-2-B\"},"
	/* a create stopped halfway, slot 1 not recorded: with a slot queue
	 * (part) a semaphore of the record's size, without (half) none */
	"{\"name\":\"amqplock.part-2-A\"},{\"name\":\"amqplock.part-3-A\"},"
	"{\"name\":\"amqplock.half-2-A\"},{\"name\":\"amqplock.half-3-A\"}]";

static void parsed(void)
{
	const struct sem_entry *e;
	struct sem_list l;

	ok(list_parse("amqplock.", queues, exchanges, &l) == AL_OK, "the lists parse");
	ok(l.len == 4, "four semaphores (%zu)", l.len);
	if (l.len != 4)
		return;
	is_str(l.sem[0].name, "db-1", "sorted by name: db-1");
	is_str(l.sem[1].name, "jobs", "then jobs");
	is_str(l.sem[2].name, "nightly", "then nightly");
	is_str(l.sem[3].name, "part", "then part");
	e = list_find(&l, "jobs");
	ok(e && e->max == 4 && e->recorded, "jobs: max from its record (4)");
	ok(e && e->held == 2, "jobs: slots 1 (holder and lease) and 3 (lease) held (%u)",
	   e ? e->held : 0);
	ok(e && e->waiting == 5, "jobs: two waiters in #waiters, three entries in #line (%lu)",
	   e ? (unsigned long)e->waiting : 0ul);
	e = list_find(&l, "db-1");
	ok(e && e->max == 1 && !e->recorded && e->held == 0 && e->waiting == 0,
	   "db-1: one slot queue, no record");
	e = list_find(&l, "nightly");
	ok(e && e->max == 2 && e->held == 1, "nightly: recorded, its slot queues gone");
	ok(!list_find(&l, "gone"), "a line alone is no semaphore");
	e = list_find(&l, "part");
	ok(e && e->max == 3 && e->recorded,
	   "part: a create stopped halfway, with a slot queue: the record's size");
	ok(!list_find(&l, "half"), "a record without slot 1 or a slot queue is no semaphore");
	list_free(&l);

	ok(list_parse("other.", queues, NULL, &l) == AL_OK && l.len == 1 &&
		   strcmp(l.sem[0].name, "jobs") == 0 && l.sem[0].max == 1,
	   "another prefix, no exchanges");
	list_free(&l);
	ok(list_parse("", queues, NULL, &l) == AL_OK && l.len == 5 &&
		   list_find(&l, "amqplock.jobs") && list_find(&l, "other.jobs"),
	   "the empty prefix: the prefix is part of the names (%zu)", l.len);
	list_free(&l);
}

static void refused(void)
{
	struct sem_list l;

	status_clear();
	ok(list_parse("amqplock.", "{\"error\":\"not_authorised\"}", NULL, &l) == AL_BROKER &&
		   l.len == 0 && l.sem == NULL,
	   "an object instead of the list");
	ok(strstr(status_message(), "not a JSON array") != NULL, "says so: %s", status_message());
	status_clear();
	ok(list_parse("amqplock.", "[", NULL, &l) == AL_BROKER, "cut short");
	status_clear();
	ok(list_parse("amqplock.", "[]", "<html>", &l) == AL_BROKER, "exchanges not JSON");
	status_clear();
	ok(list_parse("amqplock.", "[]", "[]", &l) == AL_OK && l.len == 0, "empty lists");
	list_free(&l);
}

static void nearest(void)
{
	static const char json[] = "[{\"name\":\"p.nightly-1-A\"},{\"name\":\"p.db-1-A\"},"
				   "{\"name\":\"p.backup.weekly-1-A\"},{\"name\":\"p.ab-1-A\"}]";
	struct sem_list l;

	ok(list_parse("p.", json, NULL, &l) == AL_OK && l.len == 4, "four names");
	is_str(list_nearest(&l, "nightlly"), "nightly", "an extra letter");
	is_str(list_nearest(&l, "nihgtly"), "nightly", "two letters swapped");
	is_str(list_nearest(&l, "nitly"), "nightly", "two letters missing");
	is_str(list_nearest(&l, "nightly"), NULL, "the name itself: nothing to suggest");
	is_str(list_nearest(&l, "daily"), NULL, "too far from every name");
	is_str(list_nearest(&l, "dc"), "db", "a short name, one change");
	is_str(list_nearest(&l, "xy"), NULL, "a short name, two changes");
	is_str(list_nearest(&l, "backup-weekly"), "backup.weekly", "one change in a long name");
	is_str(list_nearest(&l, "ba"), "ab", "swapped, short");
	list_free(&l);
	ok(list_nearest(&l, "x") == NULL, "an empty list");
}

static void nearest_word(void)
{
	static const char *const commands[] = {"create", "destroy", "status", "hold", "acquire"};
	size_t n = sizeof(commands) / sizeof(commands[0]);

	is_str(list_nearest_word(commands, n, "hlod"), "hold", "a swap");
	is_str(list_nearest_word(commands, n, "stauts"), "status", "a swap in a longer word");
	is_str(list_nearest_word(commands, n, "acquir"), "acquire", "a letter missing");
	is_str(list_nearest_word(commands, n, "hold"), NULL, "the word itself");
	is_str(list_nearest_word(commands, n, "frobnicate"), NULL, "too far");
	ok(list_nearest_word(commands, 0, "hold") == NULL, "no words");
}

static void waiters(void)
{
	static const char consumers[] =
		"[{\"queue\":{\"name\":\"amqplock.jobs-1-B\"},"
		"\"channel_details\":{\"connection_name\":\"c1\"}},"
		"{\"queue\":{\"name\":\"amqplock.jobs#waiters\"},"
		"\"channel_details\":{\"connection_name\":\"c3\"}},"
		"{\"queue\":{\"name\":\"amqplock.jobs#w0123456789ab\"},"
		"\"channel_details\":{\"connection_name\":\"c2\"}},"
		/* another semaphore's waiter, and a connection not listed */
		"{\"queue\":{\"name\":\"amqplock.db#waiters\"},"
		"\"channel_details\":{\"connection_name\":\"c4\"}},"
		"{\"queue\":{\"name\":\"amqplock.jobs#waiters\"},"
		"\"channel_details\":{\"connection_name\":\"gone\"}}]";
	static const char connections[] =
		"[{\"name\":\"c1\",\"client_properties\":{\"host\":\"h1\",\"pid\":1},"
		"\"connected_at\":1000},"
		"{\"name\":\"c2\",\"client_properties\":{\"host\":\"h2\",\"pid\":2,"
		"\"label\":\"two\"},\"connected_at\":2000},"
		"{\"name\":\"c3\",\"client_properties\":{\"host\":\"h\\u001b3\",\"pid\":3,"
		"\"label\":\"\"},\"connected_at\":3000},"
		"{\"name\":\"c4\",\"client_properties\":{\"host\":\"h4\",\"pid\":4},"
		"\"connected_at\":500}]";
	struct list_waiters w;
	struct sem_name sn;

	sem_name_init(&sn, "amqplock.", "jobs");
	ok(list_waiters(&sn, consumers, connections, &w) == AL_OK, "the waiters of jobs");
	ok(w.len == 2, "two: the line's and a waiter's own queue's consumers, not a holder's");
	ok(w.len == 2 && w.w[0].pid == 2 && strcmp(w.w[0].label, "two") == 0 &&
		   w.w[0].connected_at == 2.0,
	   "oldest connection first, with its label");
	ok(w.len == 2 && w.w[1].pid == 3 && strcmp(w.w[1].host, "h?3") == 0 &&
		   w.w[1].label[0] == '\0',
	   "an unprintable byte of the host reads '?'");
	list_waiters_free(&w);
	ok(list_waiters(&sn, "{}", connections, &w) == AL_BROKER && w.len == 0 && !w.w,
	   "not an array: refused, nothing listed");
	status_clear();
	ok(list_waiters(&sn, "[]", "[]", &w) == AL_OK && w.len == 0, "nobody waits");
	list_waiters_free(&w);
}

int main(void)
{
	waiters();
	parsed();
	refused();
	nearest();
	nearest_word();
	return done_testing();
}
