/* amqplock: distributed counting semaphores on RabbitMQ.
 *
 * This file owns the command line: the option table, the command table,
 * help, and turning a status into an exit code. The commands live in
 * cmd_*.c, the algorithm in sem.c, the broker in conn.c. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "names.h"
#include "out.h"
#include "parse.h"
#include "secret.h"
#include "signals.h"

#ifndef AMQPLOCK_VERSION
#define AMQPLOCK_VERSION "unknown"
#endif

#define DEFAULT_URL    "amqp://guest:guest@localhost:5672/"
#define DEFAULT_PREFIX "amqplock."
/* Long enough for a peer's create of a few thousand slots. */
#define DEFAULT_ADMIN_WAIT 30.0
/* A pipelined probe of 128 missing queues costs about 1 ms. */
#define DEFAULT_OVERSHOOT       128u
#define DEFAULT_HEARTBEAT       5u
#define DEFAULT_CONNECT_TIMEOUT 5.0
#define DEFAULT_RPC_TIMEOUT     10.0
#define MAX_SECONDS             1e6
#define DEFAULT_GRACE           10.0

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
	LEASE = 1 << 7, /* holds a slot */
	ALL_SCOPES = GLOBAL | ADMIN | SCAN | WAIT | HOLD | GROW | REPAIR | LEASE,
};

enum opt_id {
	OPT_URL = 'u',
	OPT_QUIET = 'q',
	OPT_VERBOSE = 'v',
	OPT_HELP = 'h',
	OPT_VERSION = 'V',
	OPT_NONBLOCK = 'n',
	OPT_WAIT = 'w',
	OPT_CONFLICT_EXIT = 'E',
	OPT_COMMAND = 'c',
	OPT_PASSWORD_FILE = 256,
	OPT_PREFIX,
	OPT_JSON,
	OPT_HEARTBEAT,
	OPT_CONNECT_TIMEOUT,
	OPT_RPC_TIMEOUT,
	OPT_CACERT,
	OPT_CERT,
	OPT_KEY,
	OPT_INSECURE,
	OPT_ADMIN_WAIT,
	OPT_OVERSHOOT,
	OPT_LOST_SIGNAL,
	OPT_GRACE,
	OPT_SLOT_TYPE,
	OPT_REPAIR,
	OPT_LEASE,
};

struct opt_def {
	const char *name;
	int id;
	const char *arg; /* NULL: takes no value */
	unsigned scope;
	const char *help;
};

static const struct opt_def opt_defs[] = {
	{"url", OPT_URL, "URL", GLOBAL,
	 "broker, amqp[s]://user:pass@host:port/vhost; give several\n"
	 "(or a space-separated list) to try them in order\n"
	 "(default $AMQPLOCK_URL, $AMQP_URL, " DEFAULT_URL ")"},
	{"password-file", OPT_PASSWORD_FILE, "FILE", GLOBAL,
	 "read the password from the first line of FILE (mode 600)"},
	{"cacert", OPT_CACERT, "FILE", GLOBAL,
	 "CA certificates for amqps:// (default: the system's)"},
	{"cert", OPT_CERT, "FILE", GLOBAL, "client certificate for amqps:// (PEM)"},
	{"key", OPT_KEY, "FILE", GLOBAL, "its private key (default: in the --cert file; mode 600)"},
	{"insecure", OPT_INSECURE, NULL, GLOBAL,
	 "amqps:// without checking the broker's certificate (unsafe)"},
	{"prefix", OPT_PREFIX, "P", GLOBAL,
	 "queue-name prefix (default $AMQPLOCK_PREFIX, \"" DEFAULT_PREFIX "\")"},
	{"json", OPT_JSON, NULL, GLOBAL, "print one JSON object per result on stdout"},
	{"quiet", OPT_QUIET, NULL, GLOBAL, "print nothing on stdout"},
	{"verbose", OPT_VERBOSE, NULL, GLOBAL, "trace each step on stderr"},
	{"heartbeat", OPT_HEARTBEAT, "SECS", GLOBAL,
	 "AMQP heartbeat, whole seconds, 0 = off (default 5)"},
	{"connect-timeout", OPT_CONNECT_TIMEOUT, "SECS", GLOBAL,
	 "give up connecting and logging in after SECS (default 5)"},
	{"rpc-timeout", OPT_RPC_TIMEOUT, "SECS", GLOBAL,
	 "give up when a reply from the broker takes longer (default 10)"},
	{"admin-wait", OPT_ADMIN_WAIT, "SECS", ADMIN,
	 "wait up to SECS for another administrator to finish (default 30)"},
	{"overshoot", OPT_OVERSHOOT, "N", SCAN,
	 "look N slots past max for stray slots and orphan holders (default 128)"},
	{"slot-type", OPT_SLOT_TYPE, "TYPE", GROW,
	 "classic or quorum (replicated in a cluster); default: create\n"
	 "classic, others the type of the slots there are"},
	{"repair", OPT_REPAIR, NULL, REPAIR,
	 "delete the stray queues found (the other problems stay)"},
	{"nonblock", OPT_NONBLOCK, NULL, WAIT, "try once; do not wait"},
	{"wait", OPT_WAIT, "SECS", WAIT, "give up after SECS (fractions allowed; 0 = -n)"},
	{"conflict-exit-code", OPT_CONFLICT_EXIT, "N", WAIT,
	 "exit code when nothing was obtained in time (default 1)"},
	{"command", OPT_COMMAND, "TEXT", HOLD, "run TEXT with /bin/sh -c instead of CMD"},
	{"lost-signal", OPT_LOST_SIGNAL, "SIG", HOLD,
	 "signal for the command if the slot is lost (default TERM)"},
	{"grace", OPT_GRACE, "SECS", HOLD,
	 "SIGKILL the command this long after --lost-signal (default 10)"},
	{"lease", OPT_LEASE, "SECS", LEASE,
	 "keep the slot this long for a holder that lost its connection,\n"
	 "to reconnect; 0 = none (default 30 + --grace)"},
	{"help", OPT_HELP, NULL, GLOBAL, "show help and exit"},
	{"version", OPT_VERSION, NULL, GLOBAL, "show the version and exit"},
};
#define N_OPTS (sizeof(opt_defs) / sizeof(opt_defs[0]))

static const struct command commands[] = {
	{"create", cmd_create, 2, 2, "NAME SLOTS", "create a semaphore with SLOTS slots",
	 ADMIN | SCAN | GROW, false},
	{"destroy", cmd_destroy, 1, 1, "NAME", "delete every slot of a semaphore", ADMIN | SCAN,
	 false},
	{"add", cmd_add, 1, 2, "NAME [COUNT]", "add COUNT slots (default 1)", ADMIN | SCAN | GROW,
	 false},
	{"remove", cmd_remove, 1, 2, "NAME [COUNT]", "remove the COUNT highest slots (default 1)",
	 ADMIN | SCAN, false},
	{"max", cmd_max, 1, 2, "NAME [N]", "print the number of slots, or set it to N",
	 ADMIN | SCAN | GROW, false},
	{"status", cmd_status, 1, 1, "NAME", "show held, free and orphan slots", SCAN, false},
	{"check", cmd_check, 1, 1, "NAME", "report what is wrong with a semaphore, or repair it",
	 ADMIN | SCAN | REPAIR, false},
	{"wait", cmd_wait, 1, 1, "NAME", "wait until no holder is left above max", SCAN | WAIT,
	 false},
	{"acquire", cmd_acquire, 1, 1, "NAME", "take a slot, print it, hold it until a signal",
	 WAIT | LEASE, false},
	{"hold", cmd_hold, 1, 1, "NAME -- CMD [ARGS...]", "run CMD while holding a slot",
	 WAIT | HOLD | LEASE, true},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *find_command(const char *name)
{
	size_t i;

	for (i = 0; i < N_COMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void print_options(FILE *f, unsigned scopes)
{
	char left[64];
	const char *p, *nl;
	size_t i;

	for (i = 0; i < N_OPTS; i++) {
		const struct opt_def *o = &opt_defs[i];

		if (!(o->scope & scopes))
			continue;
		if (o->id < 256)
			snprintf(left, sizeof(left), "-%c, --%s%s%s", o->id, o->name,
				 o->arg ? " " : "", o->arg ? o->arg : "");
		else
			snprintf(left, sizeof(left), "    --%s%s%s", o->name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
		/* Help texts may span lines; continuation lines are indented. */
		for (p = o->help; p; p = nl ? nl + 1 : NULL) {
			nl = strchr(p, '\n');
			fprintf(f, "  %-26s %.*s\n", p == o->help ? left : "",
				(int)(nl ? (size_t)(nl - p) : strlen(p)), p);
		}
	}
}

static void print_help(FILE *f, const struct command *cmd)
{
	size_t i;
	char left[64];

	if (cmd) {
		fprintf(f, "Usage: amqplock %s [OPTIONS] %s\n\n%c%s.\n", cmd->name, cmd->args,
			cmd->summary[0] - 'a' + 'A', cmd->summary + 1);
		if (cmd->scopes & ~GLOBAL) {
			fprintf(f, "\nOptions:\n");
			print_options(f, cmd->scopes & ~GLOBAL);
		}
		fprintf(f, "\nGlobal options:\n");
		print_options(f, GLOBAL);
		return;
	}
	fprintf(f, "Usage: amqplock [OPTIONS] COMMAND [OPTIONS] ARGS...\n\n"
		   "Distributed counting semaphores on RabbitMQ.\n\nCommands:\n");
	for (i = 0; i < N_COMMANDS; i++) {
		snprintf(left, sizeof(left), "%s %s", commands[i].name, commands[i].args);
		fprintf(f, "  %-26s %s\n", left, commands[i].summary);
	}
	fprintf(f, "  %-26s %s\n", "help COMMAND", "show a command's options");
	fprintf(f, "\nGlobal options (before or after COMMAND):\n");
	print_options(f, GLOBAL);
	fprintf(f, "\nExit status: 0 ok, 1 busy, 2 usage, 3 not found, 4 lost, 5 exists,\n"
		   "6 connection, 7 access, 8 broker or internal error, 9 damaged (check).\n");
}

/* getopt_long's tables for the options in `scopes`; `stop`: stop at the
 * first non-option instead of permuting. */
static void build_getopt(unsigned scopes, bool stop, struct option *longopts, char *shortopts)
{
	size_t i, n = 0;
	char *s = shortopts;

	if (stop)
		*s++ = '+';
	*s++ = ':'; /* report a missing value as ':' */
	for (i = 0; i < N_OPTS; i++) {
		const struct opt_def *o = &opt_defs[i];

		if (!(o->scope & scopes))
			continue;
		longopts[n++] = (struct option){o->name, o->arg ? required_argument : no_argument,
						NULL, o->id};
		if (o->id < 256) {
			*s++ = (char)o->id;
			if (o->arg)
				*s++ = ':';
		}
	}
	longopts[n] = (struct option){0};
	*s = '\0';
}

static const struct opt_def *find_opt(int id)
{
	size_t i;

	for (i = 0; i < N_OPTS; i++)
		if (opt_defs[i].id == id)
			return &opt_defs[i];
	return NULL;
}

static enum al_status seconds_opt(const char *name, const char *arg, double min, double *out)
{
	char q[64];
	const char *why = parse_seconds(arg, MAX_SECONDS, out);

	if (!why && *out < min)
		why = "is too small";
	if (why)
		return fail(AL_USAGE, "--%s %s: %s", name, quote_arg(arg, q, sizeof(q)), why);
	return AL_OK;
}

enum al_status cli_count(const char *arg, const char *what, unsigned long min, unsigned long max,
			 unsigned *out)
{
	char q[64];
	unsigned long v;
	const char *why = parse_uint(arg, min, max, &v);

	if (why)
		return fail(AL_USAGE, "%s %s %s (expected a whole number from %lu to %lu)", what,
			    quote_arg(arg, q, sizeof(q)), why, min, max);
	*out = (unsigned)v;
	return AL_OK;
}

static enum al_status signal_opt(const char *arg, int *out)
{
	char q[64];
	const char *why = parse_signal(arg, out);

	/* Only a signal whose default action ends a process: one that a
	 * command ignores or stops on would leave it running, without its
	 * slot, until the --grace SIGKILL. (32 and 33 belong to glibc.) */
	if (!why && (*out == SIGKILL || *out == SIGSTOP || *out == SIGCHLD || *out == SIGCONT ||
		     *out == SIGTSTP || *out == SIGTTIN || *out == SIGTTOU || *out == SIGURG ||
		     *out == SIGWINCH || (*out > 31 && *out < SIGRTMIN)))
		why = "cannot be used (it does not end a command)";
	if (why)
		return fail(AL_USAGE, "--lost-signal %s %s", quote_arg(arg, q, sizeof(q)), why);
	return AL_OK;
}

enum { SHOW_NOTHING, SHOW_HELP, SHOW_VERSION };

/* --url given several times: the brokers of a cluster, tried in order
 * (conn.c). The first --url replaces the environment's list. */
static enum al_status add_url(struct cli *cli, char *arg)
{
	static char list[8192];
	size_t used = cli->urls_given ? strlen(list) : 0;
	int n;

	if (arg[strspn(arg, " ")] == '\0')
		return fail(AL_USAGE, "invalid broker URL: empty");
	n = snprintf(list + used, sizeof(list) - used, "%s%s", used ? " " : "", arg);
	/* arg is the original argument string: ps shows it to every user. */
	secret_mask_urls(arg);
	if (n < 0 || (size_t)n >= sizeof(list) - used)
		return fail(AL_USAGE, "the --url options are too long together");
	cli->urls_given = true;
	cli->conn.url = list;
	return AL_OK;
}

static enum al_status apply_option(struct cli *cli, int id, char *arg, int *show)
{
	unsigned n;
	char q[64];

	switch (id) {
	case OPT_URL:
		return add_url(cli, arg);
	case OPT_SLOT_TYPE:
		if (strcmp(arg, "classic") == 0)
			cli->slot_type = SLOT_CLASSIC;
		else if (strcmp(arg, "quorum") == 0)
			cli->slot_type = SLOT_QUORUM;
		else
			return fail(AL_USAGE, "--slot-type %s: expected classic or quorum",
				    quote_arg(arg, q, sizeof(q)));
		cli->slot_type_given = true;
		return AL_OK;
	case OPT_PASSWORD_FILE:
		cli->conn.password_file = arg;
		return AL_OK;
	case OPT_CACERT:
		cli->conn.cacert = arg;
		return AL_OK;
	case OPT_CERT:
		cli->conn.cert = arg;
		return AL_OK;
	case OPT_KEY:
		cli->conn.key = arg;
		return AL_OK;
	case OPT_INSECURE:
		cli->conn.insecure = true;
		return AL_OK;
	case OPT_PREFIX:
		cli->prefix = arg;
		return AL_OK;
	case OPT_JSON:
		cli->json = true;
		return AL_OK;
	case OPT_QUIET:
		cli->quiet = true;
		return AL_OK;
	case OPT_VERBOSE:
		trace_enabled = 1;
		return AL_OK;
	case OPT_HEARTBEAT:
		if (cli_count(arg, "--heartbeat", 0, 3600, &n) != AL_OK)
			return AL_USAGE;
		cli->conn.heartbeat = n;
		return AL_OK;
	case OPT_CONNECT_TIMEOUT:
		return seconds_opt("connect-timeout", arg, 0.001, &cli->conn.connect_timeout);
	case OPT_RPC_TIMEOUT:
		return seconds_opt("rpc-timeout", arg, 0.001, &cli->conn.rpc_timeout);
	case OPT_ADMIN_WAIT:
		return seconds_opt("admin-wait", arg, 0, &cli->admin_wait);
	case OPT_OVERSHOOT:
		return cli_count(arg, "--overshoot", 0, SLOTS_MAX, &cli->overshoot);
	case OPT_REPAIR:
		cli->repair = true;
		return AL_OK;
	case OPT_NONBLOCK:
		cli->nonblock = true;
		return AL_OK;
	case OPT_WAIT:
		if (seconds_opt("wait", arg, 0, &cli->wait) != AL_OK)
			return AL_USAGE;
		cli->nonblock = cli->nonblock || cli->wait == 0;
		return AL_OK;
	case OPT_CONFLICT_EXIT:
		if (cli_count(arg, "--conflict-exit-code", 0, 255, &n) != AL_OK)
			return AL_USAGE;
		cli->conflict_exit = (int)n;
		return AL_OK;
	case OPT_COMMAND:
		cli->command_text = optarg;
		return AL_OK;
	case OPT_LOST_SIGNAL:
		return signal_opt(arg, &cli->lost_signal);
	case OPT_GRACE:
		return seconds_opt("grace", arg, 0, &cli->grace);
	case OPT_LEASE:
		return seconds_opt("lease", arg, 0, &cli->lease);
	case OPT_HELP:
		*show = SHOW_HELP;
		return AL_OK;
	case OPT_VERSION:
		*show = SHOW_VERSION;
		return AL_OK;
	default:
		return fail(AL_BROKER, "internal error: unhandled option %d", id);
	}
}

/* Parses options in argv[1..argc) (argv[0] is the program or command name)
 * for the groups in `scopes`; stops at the first non-option if `stop`.
 * Keeps going after a usage error, so that a later --json still decides
 * how the error is reported. */
static enum al_status parse_options(struct cli *cli, int argc, char **argv, unsigned scopes,
				    bool stop, const char *cmd, int *show)
{
	struct option longopts[N_OPTS + 1];
	char shortopts[2 * N_OPTS + 3], q[64];
	enum al_status st = AL_OK, r;
	const struct opt_def *o;
	int id;

	/* Every option is known, so that one outside `scopes` is reported as
	 * not applying rather than unknown. */
	build_getopt(ALL_SCOPES, stop, longopts, shortopts);
	optind = 0; /* glibc: start afresh */
	opterr = 0;
	while ((id = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		if (id == '?' || id == ':') {
			const char *bad = argv[optind - 1];

			if (optopt && optopt < 256 && strncmp(bad, "--", 2) != 0)
				snprintf(q, sizeof(q), "-%c", optopt);
			else
				quote_arg(bad, q, sizeof(q));
			r = fail(AL_USAGE,
				 id == '?' ? "unknown option %s" : "option %s needs a value", q);
		} else if (!((o = find_opt(id))->scope & scopes)) {
			r = cmd ? fail(AL_USAGE, "option --%s does not apply to %s", o->name, cmd)
				: fail(AL_USAGE,
				       "option --%s belongs after the command (amqplock COMMAND "
				       "--%s ...)",
				       o->name, o->name);
		} else {
			r = apply_option(cli, id, optarg, show);
		}
		if (st == AL_OK)
			st = r;
	}
	return st;
}

static void defaults(struct cli *cli)
{
	const char *env;

	memset(cli, 0, sizeof(*cli));
	cli->conn.url = DEFAULT_URL;
	if ((env = getenv("AMQP_URL")) && *env)
		cli->conn.url = env;
	if ((env = getenv("AMQPLOCK_URL")) && *env)
		cli->conn.url = env;
	cli->prefix = DEFAULT_PREFIX;
	if ((env = getenv("AMQPLOCK_PREFIX")))
		cli->prefix = env;
	cli->conn.heartbeat = DEFAULT_HEARTBEAT;
	cli->conn.connect_timeout = DEFAULT_CONNECT_TIMEOUT;
	cli->conn.rpc_timeout = DEFAULT_RPC_TIMEOUT;
	cli->admin_wait = DEFAULT_ADMIN_WAIT;
	cli->overshoot = DEFAULT_OVERSHOOT;
	cli->wait = -1;
	cli->conflict_exit = 1;
	cli->lost_signal = SIGTERM;
	cli->grace = DEFAULT_GRACE;
	cli->lease = -1;
	cli->exit_code = -1;
}

static enum al_status check_name(struct cli *cli, const char *name)
{
	struct sem_name sn;
	const char *why;
	char q[64];

	if ((why = prefix_problem(cli->prefix)))
		return fail(AL_USAGE, "prefix %s %s", quote_arg(cli->prefix, q, sizeof(q)), why);
	if (!(why = name_problem(name)))
		why = sem_name_init(&sn, cli->prefix, name);
	if (why)
		return fail(AL_USAGE, "semaphore name %s %s", quote_arg(name, q, sizeof(q)), why);
	cli->name = name;
	return AL_OK;
}

enum al_status cli_connect(struct cli *cli, struct conn *c, struct sem *s, struct deadline by)
{
	enum al_status st;

	memset(s, 0, sizeof(*s));
	sem_name_init(&s->name, cli->prefix, cli->name); /* checked before */
	s->label = cli->name;
	s->conn = c;
	s->opts.overshoot = cli->overshoot;
	s->opts.admin_wait = cli->admin_wait;
	s->opts.slot_type = cli->slot_type;
	s->opts.slot_type_given = cli->slot_type_given;
	if (cli->lease > 0) {
		if (!cli->lease_token)
			cli->lease_token = sem_lease_token();
		s->lease.on = true;
		s->lease.ms = (unsigned)(cli->lease * 1000);
		s->lease.token = cli->lease_token;
	}
	/* Loud on every run, so that a forgotten --insecure does not go
	 * unnoticed in a cron job's mail. */
	if (cli->conn.insecure)
		out_error_line("warning: --insecure: the broker's certificate is not verified");
	st = conn_open(c, &cli->conn, by);
	if (st != AL_OK)
		conn_close(c);
	return st;
}

static int finish(struct cli *cli, enum al_status st)
{
	if (st != AL_OK && !cli->reported)
		out_error(st, st == AL_USAGE ? NULL : cli->name,
			  status_message()[0] ? status_message() : "failed");
	if (cli->exit_code >= 0)
		return cli->exit_code;
	/* -E only exists for the commands that can fail to obtain. */
	return st == AL_BUSY ? cli->conflict_exit : (int)st;
}

static int usage_error(struct cli *cli, const struct command *cmd)
{
	char usage[128];

	if (cmd)
		snprintf(usage, sizeof(usage), "usage: amqplock %s [OPTIONS] %s", cmd->name,
			 cmd->args);
	else
		snprintf(usage, sizeof(usage),
			 "usage: amqplock [OPTIONS] COMMAND ARGS... "
			 "(see amqplock --help)");
	if (!status_message()[0])
		fail(AL_USAGE, "%s", usage);
	return finish(cli, AL_USAGE);
}

static int show(int what, const struct command *cmd)
{
	if (what == SHOW_VERSION)
		printf("amqplock %s\n", AMQPLOCK_VERSION);
	else
		print_help(stdout, cmd);
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	out_error_line("cannot write to standard output");
	return AL_BROKER;
}

static int unknown_command(struct cli *cli, const char *name)
{
	char q[64];

	fail(AL_USAGE, "unknown command %s (see amqplock --help)", quote_arg(name, q, sizeof(q)));
	return usage_error(cli, NULL);
}

/* Where results and JSON errors go: stdout, unless it belongs to the
 * command that hold runs; then every word of amqplock's, even a usage
 * error, goes to stderr. */
static FILE *result_stream(const struct command *cmd)
{
	return cmd && cmd->takes_command ? stderr : stdout;
}

int main(int argc, char **argv)
{
	const struct command *cmd = NULL;
	int show_what = SHOW_NOTHING, cmd_at, end, nargs;
	enum al_status st;
	struct cli cli;
	char **args;

	/* Before anything reads the environment. */
	secret_hide();
	signals_init();
	defaults(&cli);
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	/* Global options before the command. */
	st = parse_options(&cli, argc, argv, GLOBAL, true, NULL, &show_what);
	cmd_at = optind;
	out_init(cli.json ? OUT_JSON : OUT_TEXT, cli.quiet,
		 result_stream(cmd_at < argc ? find_command(argv[cmd_at]) : NULL));
	if (st == AL_OK && show_what == SHOW_NOTHING && cmd_at < argc) {
		if (strcmp(argv[cmd_at], "help") == 0) {
			/* "help --help", "help -h": the general help, like "help". */
			if (cmd_at + 2 == argc && (strcmp(argv[cmd_at + 1], "--help") == 0 ||
						   strcmp(argv[cmd_at + 1], "-h") == 0))
				return show(SHOW_HELP, NULL);
			cmd = cmd_at + 1 < argc ? find_command(argv[cmd_at + 1]) : NULL;
			if (cmd_at + 1 < argc && !cmd)
				return unknown_command(&cli, argv[cmd_at + 1]);
			if (cmd_at + 2 < argc) {
				fail(AL_USAGE, "help takes one command");
				return usage_error(&cli, NULL);
			}
			return show(SHOW_HELP, cmd);
		}
		cmd = find_command(argv[cmd_at]);
		if (!cmd)
			return unknown_command(&cli, argv[cmd_at]);
	}
	if (st == AL_OK && show_what != SHOW_NOTHING)
		return show(show_what, NULL);
	if (st != AL_OK || !cmd)
		return usage_error(&cli, NULL);

	/* The command's options, which may also be global ones, anywhere
	 * among its arguments up to a "--". */
	for (end = cmd_at + 1; end < argc && strcmp(argv[end], "--") != 0; end++)
		;
	st = parse_options(&cli, end - cmd_at, argv + cmd_at, cmd->scopes | GLOBAL, false,
			   cmd->name, &show_what);
	out_init(cli.json ? OUT_JSON : OUT_TEXT, cli.quiet, result_stream(cmd));
	if (st == AL_OK && show_what != SHOW_NOTHING)
		return show(show_what, cmd);
	args = argv + cmd_at + optind;
	nargs = end - cmd_at - optind;
	if (st == AL_OK && cmd->takes_command) {
		/* hold NAME -- CMD [ARGS...], or hold -c TEXT NAME */
		if (end < argc - 1 && !cli.command_text)
			cli.command = argv + end + 1;
		else if (end < argc || !cli.command_text)
			st = fail(AL_USAGE, cli.command_text
						    ? "give either -c TEXT or -- CMD, not both"
						    : "no command: hold NAME -- CMD [ARGS...]");
		end = argc;
	} else if (end < argc) {
		/* What follows "--" are arguments too (a name starting with
		 * "-"): close the gap the "--" leaves. */
		memmove(argv + end, argv + end + 1, (size_t)(argc - end - 1) * sizeof(*argv));
		nargs += argc - end - 1;
		end = argc;
	}
	if (st != AL_OK || nargs < cmd->min_args || nargs > cmd->max_args || end < argc)
		return usage_error(&cli, cmd);
	if ((st = check_name(&cli, args[0])) != AL_OK || (st = conn_check_opts(&cli.conn)) != AL_OK)
		return finish(&cli, st);
	return finish(&cli, cmd->run(&cli, nargs, args));
}
