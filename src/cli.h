/* What the command line decided, shared by main.c and the commands. */
#ifndef AMQPLOCK_CLI_H
#define AMQPLOCK_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "conn.h"
#include "sem.h"
#include "status.h"

struct cli {
	struct conn_opts conn;
	bool urls_given; /* conn.url comes from --url options */
	const char *prefix;
	bool json, quiet;
	/* admin commands, status, wait */
	double admin_wait;
	unsigned overshoot;
	/* check */
	bool repair;
	/* create, add, max N */
	enum slot_type slot_type;
	bool slot_type_given;
	/* acquire, hold, wait */
	bool nonblock;
	double wait; /* seconds; < 0: forever */
	int conflict_exit;
	/* hold */
	char *command_text; /* -c */
	char **command;     /* after "--" */
	int lost_signal;
	double grace;
	/* acquire, hold: seconds; < 0: not given (the default then) */
	double lease;
	int64_t lease_token;
	/* The semaphore named by the first argument, once checked. */
	const char *name;
	/* Set by a command: the exit code to use instead of the status's
	 * (a command's own, 128+N after a signal); -1 if none. */
	int exit_code;
	/* Set by a command that has already told the user why it failed. */
	bool reported;
};

struct command {
	const char *name;
	enum al_status (*run)(struct cli *cli, int argc, char **argv);
	int min_args, max_args; /* after the command name and options */
	const char *args;       /* for usage lines: "NAME SLOTS" */
	const char *summary;    /* one line for `amqplock --help` */
	unsigned scopes;        /* which option groups apply (main.c) */
	bool takes_command;     /* CMD [ARGS...] after "--" */
};

/* Parsers for arguments, recording a usage message on failure. */
enum al_status cli_count(const char *arg, const char *what, unsigned long min, unsigned long max,
			 unsigned *out);

/* Connects and prepares s for cli->name; every wait on the connection
 * ends by `by` (see conn_open). On failure the connection is already
 * closed. */
enum al_status cli_connect(struct cli *cli, struct conn *c, struct sem *s, struct deadline by);

/* The commands, in cmd_*.c. */
enum al_status cmd_create(struct cli *cli, int argc, char **argv);
enum al_status cmd_destroy(struct cli *cli, int argc, char **argv);
enum al_status cmd_add(struct cli *cli, int argc, char **argv);
enum al_status cmd_remove(struct cli *cli, int argc, char **argv);
enum al_status cmd_max(struct cli *cli, int argc, char **argv);
enum al_status cmd_status(struct cli *cli, int argc, char **argv);
enum al_status cmd_check(struct cli *cli, int argc, char **argv);
enum al_status cmd_acquire(struct cli *cli, int argc, char **argv);
enum al_status cmd_hold(struct cli *cli, int argc, char **argv);
enum al_status cmd_wait(struct cli *cli, int argc, char **argv);

#endif
