/* create, destroy, add, remove, max and status: the administration half. */
#include <stdlib.h>

#include "cli.h"
#include "out.h"
#include "sem.h"

static void print_change(struct cli *cli, enum sem_admin_op op, const struct sem_change *ch)
{
	out_begin();
	out_bool("ok", true);
	switch (op) {
	case SEM_CREATE:
		out_str("semaphore", "created %s: ", cli->name);
		out_uint("max", "%lu slots\n", ch->max);
		out_uint("previous", NULL, ch->previous);
		break;
	case SEM_DESTROY:
		out_str("semaphore", "destroyed %s: ", cli->name);
		out_uint("previous", "had %lu slots\n", ch->previous);
		out_uint("max", NULL, ch->max);
		break;
	default:
		out_str("semaphore", "%s: ", cli->name);
		out_uint("previous", "%lu -> ", ch->previous);
		out_uint("max", "%lu slots\n", ch->max);
		break;
	}
	if (ch->swept)
		out_uint("swept", NULL, ch->swept);
}

/* Every administrative command is this: connect, change under the admin
 * mutex, report. */
static enum al_status admin(struct cli *cli, enum sem_admin_op op, unsigned n)
{
	struct sem_change ch;
	struct conn c;
	struct sem s;
	enum al_status st;

	if ((st = cli_connect(cli, &c, &s)) != AL_OK)
		return st;
	st = sem_admin(&s, op, n, &ch);
	conn_close(&c);
	if (ch.swept)
		trace("deleted %u stray slot queue(s) above slot %u", ch.swept, ch.previous);
	if (st != AL_OK)
		return st;
	print_change(cli, op, &ch);
	return out_end();
}

static enum al_status optional_count(int argc, char **argv, unsigned *n)
{
	*n = 1;
	if (argc < 2)
		return AL_OK;
	return cli_count(argv[1], "COUNT", 1, SLOTS_MAX, n);
}

enum al_status cmd_create(struct cli *cli, int argc, char **argv)
{
	unsigned n;
	enum al_status st = cli_count(argv[1], "SLOTS", 1, SLOTS_MAX, &n);

	(void)argc;
	return st != AL_OK ? st : admin(cli, SEM_CREATE, n);
}

enum al_status cmd_destroy(struct cli *cli, int argc, char **argv)
{
	(void)argc, (void)argv;
	return admin(cli, SEM_DESTROY, 0);
}

enum al_status cmd_add(struct cli *cli, int argc, char **argv)
{
	unsigned n;
	enum al_status st = optional_count(argc, argv, &n);

	return st != AL_OK ? st : admin(cli, SEM_ADD, n);
}

enum al_status cmd_remove(struct cli *cli, int argc, char **argv)
{
	unsigned n;
	enum al_status st = optional_count(argc, argv, &n);

	return st != AL_OK ? st : admin(cli, SEM_REMOVE, n);
}

enum al_status cmd_max(struct cli *cli, int argc, char **argv)
{
	struct conn c;
	struct sem s;
	enum al_status st;
	unsigned n;

	if (argc > 1) {
		if ((st = cli_count(argv[1], "N", 0, SLOTS_MAX, &n)) != AL_OK)
			return st;
		return admin(cli, SEM_SET_MAX, n);
	}
	if ((st = cli_connect(cli, &c, &s)) != AL_OK)
		return st;
	st = sem_max(&s, &n);
	conn_close(&c);
	if (st == AL_OK && n == 0)
		st = fail(AL_NOT_FOUND, "semaphore %s does not exist", s.label);
	if (st != AL_OK)
		return st;
	out_begin();
	out_bool("ok", true);
	out_str("semaphore", NULL, cli->name);
	out_uint("max", "%lu\n", n);
	return out_end();
}

enum al_status cmd_status(struct cli *cli, int argc, char **argv)
{
	struct sem_status ss;
	struct conn c;
	struct sem s;
	enum al_status st;

	(void)argc, (void)argv;
	if ((st = cli_connect(cli, &c, &s)) != AL_OK)
		return st;
	st = sem_status(&s, &ss);
	conn_close(&c);
	if (st == AL_OK) {
		out_begin();
		out_bool("ok", true);
		out_str("semaphore", "semaphore  %s\n", cli->name);
		out_uint("max", "max        %lu\n", ss.max);
		out_slots("held", "held       %s\n", ss.held.slot, ss.held.len);
		out_slots("free", "free       %s\n", ss.free.slot, ss.free.len);
		out_slots("orphans", "orphans    %s\n", ss.orphans.slot, ss.orphans.len);
		st = out_end();
	}
	sem_status_free(&ss);
	return st;
}
