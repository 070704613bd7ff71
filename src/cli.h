/* What the command line decided (cli.c parses it into struct cli), shared
 * by main.c and the commands. */
#ifndef AMQPLOCK_CLI_H
#define AMQPLOCK_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "conn.h"
#include "hold.h"
#include "list.h"
#include "sem.h"
#include "status.h"

/* Option groups; a command lists the groups it accepts. */
enum scope {
	GLOBAL = 1 << 0,
	ADMIN = 1 << 1, /* takes the admin mutex */
	SCAN = 1 << 2,  /* looks past max for strays or orphans */
	WAIT = 1 << 3,  /* waits for a slot or for orphans */
	HOLD = 1 << 4,  /* runs a command */
	GROW = 1 << 5,  /* may declare slot queues */
	/* check --repair: may delete the strays it finds */
	REPAIR = 1 << 6,
	LEASE = 1 << 7,   /* holds a slot */
	NAMES = 1 << 8,   /* status: asks holders who they are */
	METRICS = 1 << 9, /* status, list: OpenMetrics text */
	SHRINK = 1 << 10, /* remove, max N: may take slots away */
	ALL_SCOPES = GLOBAL | ADMIN | SCAN | WAIT | HOLD | GROW | REPAIR | LEASE | NAMES | METRICS |
		     SHRINK,
};

/* What to show instead of running a command: --help, --version. */
enum cli_show { CLI_SHOW_NOTHING, CLI_SHOW_HELP, CLI_SHOW_VERSION };

/* The --url options, joined by spaces, for conn.url. */
#define CLI_URLS_MAX 8192

/* The Makefile's version. */
#ifndef AMQPLOCK_VERSION
#define AMQPLOCK_VERSION "unknown"
#endif

/* How many semaphores one status may name. */
#define STATUS_NAMES_MAX 1000

/* The most seconds any option (or $AMQPLOCK_TIMEOUT) takes. */
#define MAX_SECONDS 1e6

/* The default lease is this plus --grace (cmd_client.c): a hold rides out
 * a broker outage of 10 s and more (a restart, a failover) with a
 * heartbeat's silence to notice it, and a host that dies keeps its slot
 * this long. Written as --help shows it. */
#define DEFAULT_LEASE_BASE 30

struct cli {
	/* The options are bound to fields of these three (cli.c). */
	struct conn_opts conn;
	/* admin commands, status, wait: overshoot, admin_wait; create, add,
	 * max N: slot_type */
	struct sem_opts sem;
	/* acquire, hold, wait: nonblock, wait; hold: lost_signal, grace;
	 * acquire, hold: lease, seconds, < 0 when not given until the
	 * command settles it. The rest is filled in by the command. */
	struct hold_opts hold;
	/* The --url options so far, which conn.url then points to. */
	bool urls_given;
	char urls[CLI_URLS_MAX];
	const char *prefix;
	/* The management API's URL; NULL: derived from the broker URL. */
	const char *management_url;
	bool json, quiet;
	enum cli_show show;
	/* check */
	bool repair;
	/* status, list */
	bool metrics;
	/* acquire, hold, wait */
	unsigned conflict_exit;
	/* acquire, hold: --create N, 0 if not given */
	unsigned create;
	/* hold */
	char *command_text; /* -c */
	char **command;     /* after "--" */
	/* The command running ("hold"), and the semaphore named by the
	 * first argument, once checked. */
	const char *command_name;
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
	unsigned scopes;        /* which option groups apply */
	bool takes_command;     /* CMD [ARGS...] after "--" */
};

/* The defaults, then $AMQPLOCK_URL, $AMQP_URL, $AMQPLOCK_PREFIX and
 * $AMQPLOCK_MANAGEMENT_URL. All else is zeroed but conn.broker, left
 * unwritten: conn.brokers, 0, says that none of it is filled yet. */
void cli_defaults(struct cli *cli);

/* Parses the options in argv[1..argc) (argv[0] is the program or command
 * name) of the groups in `scopes` into cli; stops at the first non-option
 * if `stop`, else permutes the options before the arguments. *args_at:
 * the index of the first argument. `cmd`: the command's name, for
 * messages (NULL: before the command). Keeps going after a usage error,
 * so that a later --json still decides how the error is reported. */
enum al_status cli_parse(struct cli *cli, int argc, char **argv, unsigned scopes, bool stop,
			 const char *cmd, int *args_at);

/* The help lines of the options in `scopes`. */
void cli_print_options(FILE *f, unsigned scopes);

/* "COMMAND LONG SHORT" for every option of `scopes` (SHORT "-": none), a
 * line each: amqplock --list-options, which tests/docs.bats checks the
 * help, the man page and the completions against. */
void cli_list_options(FILE *f, const char *command, unsigned scopes);

/* Parsers for arguments, recording a usage message on failure. */
enum al_status cli_count(const char *arg, const char *what, unsigned long min, unsigned long max,
			 unsigned *out);
/* The semaphore name (with the prefix); sets cli->name. */
enum al_status cli_check_name(struct cli *cli, const char *name);

/* The prefix alone, for a command that takes no name (list). */
enum al_status cli_check_prefix(struct cli *cli);

/* Every semaphore under the prefix, from the management HTTP API as the
 * options say (mgmt.h), all before `by`. */
enum al_status cli_list(struct cli *cli, struct deadline by, struct sem_list *l);

/* Who waits in the named semaphore's line, from the management HTTP API
 * as the options say (mgmt_waiters), all before `by`. */
enum al_status cli_waiters(struct cli *cli, struct deadline by, struct list_waiters *w);

/* After a command failed with st: if the semaphore it named does not
 * exist and the management API answers within a second or two, a name
 * under the prefix a typo away is put in the message ("did you mean
 * nightly?"). Nothing else changes, nor is said, when it does not. */
void cli_suggest(struct cli *cli, enum al_status st);

/* Names the connections that follow, for the broker's list of them:
 * command, semaphore, and slot once there is one (0: none yet). */
void cli_name_connections(struct cli *cli, unsigned slot);

/* Connects and prepares s for cli->name; every wait on the connection
 * ends by `by` (see conn_open). On failure the connection is already
 * closed. */
enum al_status cli_connect(struct cli *cli, struct conn *c, struct sem *s, struct deadline by);

/* Whether the broker URL is the built-in default, given nowhere (no
 * --url, AMQPLOCK_URL or AMQP_URL): cron's empty environment. */
bool cli_url_is_default(const struct cli *cli);

/* After s's connection was lost (and closed): opens it again as the
 * options say, and s goes on with what outlives a connection (see
 * sem_reconnected). On failure the connection is already closed. */
enum al_status cli_reconnect(struct cli *cli, struct conn *c, struct sem *s, struct deadline by);

/* For a command that only looks (status, wait), after st on c: whether
 * to connect again and look once more. Yes when the broker closed the
 * connection over a queue deleted under a request (conn_broker_raced):
 * INTERNAL_ERROR, as RabbitMQ 3.10 says when a probe meets a quorum queue
 * being deleted (a lease that runs out, or that a keeper or an
 * administrator ends), or 4.3's RESOURCE_ERROR for a probe whose queue
 * went: a race, not a failure. At most a few times (*tries counts them);
 * the caller then calls cli_reconnect. */
bool cli_look_again(const struct conn *c, enum al_status st, int *tries);

/* The commands, in cmd_*.c. */
enum al_status cmd_create(struct cli *cli, int argc, char **argv);
enum al_status cmd_destroy(struct cli *cli, int argc, char **argv);
enum al_status cmd_evict(struct cli *cli, int argc, char **argv);
enum al_status cmd_add(struct cli *cli, int argc, char **argv);
enum al_status cmd_remove(struct cli *cli, int argc, char **argv);
enum al_status cmd_max(struct cli *cli, int argc, char **argv);
enum al_status cmd_status(struct cli *cli, int argc, char **argv);
enum al_status cmd_check(struct cli *cli, int argc, char **argv);
enum al_status cmd_acquire(struct cli *cli, int argc, char **argv);
enum al_status cmd_hold(struct cli *cli, int argc, char **argv);
enum al_status cmd_wait(struct cli *cli, int argc, char **argv);
enum al_status cmd_list(struct cli *cli, int argc, char **argv);

#endif
