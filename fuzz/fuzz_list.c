/* libFuzzer target for src/list.c: the management API's answers, which
 * come from the network, made into the list of semaphores, and the
 * nearest name.
 *
 * Input: the queues' JSON, then after a NUL (if any) the exchanges' JSON,
 * then after another NUL a name to find the nearest to. The prefix is
 * "p." Checked: a parse that fails leaves an empty list; every semaphore
 * listed has a valid name and a slot, is listed once and in order, holds
 * no more than it could, and the nearest name is one of the list. The
 * same two texts are read as lists of consumers and connections: the
 * waiters of p.jobs are listed oldest first, their text printable. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "list.h"

int LLVMFuzzerTestOneInput(const char *data, size_t size);

int LLVMFuzzerTestOneInput(const char *data, size_t size)
{
	char *text = malloc(size + 3), *exchanges, *name;
	const char *near;
	struct sem_list l;
	struct list_waiters w;
	struct sem_name sn;
	enum al_status st;
	size_t i, k;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = text[size + 1] = text[size + 2] = '\0';
	exchanges = text + strlen(text) + 1;
	name = exchanges + strlen(exchanges) + 1;
	st = list_parse("p.", text, exchanges < text + size ? exchanges : NULL, &l);
	status_clear();
	check(st == AL_OK || (l.len == 0 && l.sem == NULL));
	for (i = 0; i < l.len; i++) {
		check(names_problem(l.sem[i].name) == NULL);
		check(l.sem[i].max >= 1 && l.sem[i].max <= SLOTS_MAX);
		check(l.sem[i].held <= SLOTS_MAX);
		check(i == 0 || strcmp(l.sem[i - 1].name, l.sem[i].name) < 0);
		check(list_find(&l, l.sem[i].name) == &l.sem[i]);
		check(list_nearest(&l, l.sem[i].name) == NULL);
	}
	near = name < text + size ? list_nearest(&l, name) : NULL;
	check(!near || (list_find(&l, near) && strcmp(near, name) != 0));
	list_free(&l);
	/* The same texts as consumers and connections: the waiters of
	 * "p.jobs", printable, oldest first. */
	sem_name_init(&sn, "p.", "jobs");
	st = list_waiters(&sn, text, exchanges < text + size ? exchanges : "", &w);
	status_clear();
	check(st == AL_OK || (w.len == 0 && w.w == NULL));
	for (i = 0; i < w.len; i++) {
		check(i == 0 || w.w[i - 1].connected_at <= w.w[i].connected_at);
		for (k = 0; w.w[i].host[k]; k++)
			check(w.w[i].host[k] >= 0x20 && w.w[i].host[k] < 0x7f);
		for (k = 0; w.w[i].label[k]; k++)
			check(w.w[i].label[k] >= 0x20 && w.w[i].label[k] < 0x7f);
	}
	list_waiters_free(&w);
	free(text);
	return 0;
}
