/* The commands' uses of the management HTTP API (mgmt.c): `list`'s
 * semaphores, who waits for `status`, and "did you mean" after a
 * semaphore that does not exist.
 * Part of the cli module: the options are cli.c's. */
#include <stdio.h>

#include "cli.h"
#include "list.h"
#include "mgmt.h"
#include "names.h"
#include "out.h"

/* "Did you mean": how long the management API may take, all of it. */
#define SUGGEST_SECONDS 1.5

enum al_status cli_list(struct cli *cli, struct deadline by, struct sem_list *l)
{
	const char *why;

	*l = (struct sem_list){0};
	/* The environment's, which the option's check has not seen. */
	if (cli->management_url && (why = mgmt_url_problem(cli->management_url)))
		return fail(AL_USAGE, "invalid AMQPLOCK_MANAGEMENT_URL: %s", why);
	if (cli->conn.insecure)
		out_error_line("warning: --insecure: the broker's certificate is not verified");
	return mgmt_list(&cli->conn, cli->management_url, cli->prefix, by, l);
}

enum al_status cli_waiters(struct cli *cli, struct deadline by, struct list_waiters *w)
{
	struct sem_name sn;
	const char *why;

	*w = (struct list_waiters){0};
	if (cli->management_url && (why = mgmt_url_problem(cli->management_url)))
		return fail(AL_USAGE, "invalid AMQPLOCK_MANAGEMENT_URL: %s", why);
	if ((why = sem_name_init(&sn, cli->prefix, cli->name)))
		return fail(AL_USAGE, "semaphore name %s", why);
	return mgmt_waiters(&cli->conn, cli->management_url, &sn, by, w);
}

void cli_suggest(struct cli *cli, enum al_status st)
{
	char message[1024], hint[NAME_MAX_BYTES + 32] = "";
	const char *near;
	struct sem_list l;
	int on = trace_enabled;

	if (st != AL_NOT_FOUND || !cli->name || !cli->conn.brokers ||
	    (cli->management_url && mgmt_url_problem(cli->management_url)))
		return;
	snprintf(message, sizeof(message), "%s", status_message());
	/* Quietly: whatever the API answers, the failure stays the one said. */
	trace_enabled = 0;
	if (mgmt_list(&cli->conn, cli->management_url, cli->prefix, deadline_in(SUGGEST_SECONDS),
		      &l) == AL_OK) {
		if ((near = list_nearest(&l, cli->name)))
			snprintf(hint, sizeof(hint), " (did you mean %s?)", near);
		list_free(&l);
	}
	trace_enabled = on;
	status_clear();
	fail(st, "%s%s", message, hint);
}
