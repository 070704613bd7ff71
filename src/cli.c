/* The command line's options: one table binds each option to its field of
 * struct cli and says what kind of value it takes; the defaults, each
 * written once for struct cli and for --help; the semaphore name; and
 * connecting as the options say. */
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mgmt.h"
#include "names.h"
#include "out.h"
#include "parse.h"
#include "secret.h"

/* The defaults. Numbers are written as --help shows them. */
#define DEFAULT_URL "amqp://guest:guest@localhost:5672/"
/* The one copy of DEFAULT_URL that struct cli points at: a URL that is
 * this pointer was given by nobody. */
static const char default_url[] = DEFAULT_URL;
#define DEFAULT_PREFIX          "amqplock."
#define DEFAULT_HEARTBEAT       5
#define DEFAULT_CONNECT_TIMEOUT 5
#define DEFAULT_RPC_TIMEOUT     10
/* Long enough for a peer's create of a few thousand slots. */
#define DEFAULT_ADMIN_WAIT 30
/* A pipelined probe of 128 missing queues costs about 1 ms. */
#define DEFAULT_OVERSHOOT     128
#define DEFAULT_CONFLICT_EXIT 1
#define DEFAULT_LOST_SIGNAL   TERM /* SIGTERM */
#define DEFAULT_GRACE         10
/* A minimum hold of up to a day: a cron schedule's period at most. */
#define MAX_MIN_HOLD 86400

#define STR_(x)    #x
#define STR(x)     STR_(x)
#define CAT_(a, b) a##b
#define CAT(a, b)  CAT_(a, b)
/* The end of a help text: DEFAULT_IS(HEARTBEAT) is " (default 5)". */
#define DEFAULT_IS(x) " (default " STR(DEFAULT_##x) ")"

/* getopt_long's value for each option: its short letter, if it has one. */
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
	OPT_DRAIN,
	OPT_LABEL,
	OPT_NO_NAMES,
	OPT_LEASE,
	OPT_MANAGEMENT_URL,
	OPT_MIN_HOLD,
	OPT_CREATE,
	OPT_TIMEOUT,
	OPT_METRICS,
	OPT_TOKEN,
};

/* What an option does with its field. */
enum opt_kind {
	KIND_FLAG,    /* bool: set to true */
	KIND_TEXT,    /* const char * or char *: the value as given */
	KIND_SECONDS, /* double: seconds, fractions allowed, from min to max */
	KIND_COUNT,   /* unsigned: a whole number from min to max */
	KIND_CALL,    /* set() parses the value */
};

/* A row of the table. tests/docs.bats reads the first four fields. */
struct opt_def {
	const char *name;
	int id;          /* enum opt_id */
	const char *arg; /* NULL: takes no value */
	unsigned scope;
	enum opt_kind kind;
	size_t field;    /* offsetof(struct cli, ...) */
	double min, max; /* KIND_SECONDS, KIND_COUNT */
	enum al_status (*set)(struct cli *cli, const struct opt_def *o, char *arg);
	const char *help;
};

/* A row's kind and field: offsetof(struct cli, f), checked to be of the
 * type that the kind writes (else the build fails). */
#define AT(f)          offsetof(struct cli, f)
#define TYPED(f, type) _Generic(((struct cli *)0)->f, type : AT(f))
#define FLAG(f)        .kind = KIND_FLAG, .field = TYPED(f, bool)
#define TEXT(f)                                                                                    \
	.kind = KIND_TEXT, .field = _Generic(((struct cli *)0)->f, const char *: AT(f), char *: AT(f))
#define SECONDS(f, least)                                                                          \
	.kind = KIND_SECONDS, .field = TYPED(f, double), .min = (least), .max = MAX_SECONDS
#define COUNT(f, least, most)                                                                      \
	.kind = KIND_COUNT, .field = TYPED(f, unsigned), .min = (least), .max = (most)
#define CALL(fn) .kind = KIND_CALL, .set = (fn)

static enum al_status add_url(struct cli *cli, const struct opt_def *o, char *arg);
static enum al_status set_slot_type(struct cli *cli, const struct opt_def *o, char *arg);
static enum al_status set_wait(struct cli *cli, const struct opt_def *o, char *arg);
static enum al_status set_lost_signal(struct cli *cli, const struct opt_def *o, char *arg);
static enum al_status set_verbose(struct cli *cli, const struct opt_def *o, char *arg);
static enum al_status set_show(struct cli *cli, const struct opt_def *o, char *arg);
static enum al_status set_management_url(struct cli *cli, const struct opt_def *o, char *arg);
static enum al_status set_label(struct cli *cli, const struct opt_def *o, char *arg);

static const struct opt_def opt_defs[] = {
	{"url", OPT_URL, "URL", GLOBAL, CALL(add_url),
	 .help = "broker, amqp[s]://user:pass@host:port/vhost; give several\n"
		 "(or a space-separated list) to try them in order\n"
		 "(default $AMQPLOCK_URL, $AMQP_URL, " DEFAULT_URL ")"},
	{"password-file", OPT_PASSWORD_FILE, "FILE", GLOBAL, TEXT(conn.password_file),
	 .help = "read the password from the first line of FILE (mode 600)"},
	{"cacert", OPT_CACERT, "FILE", GLOBAL, TEXT(conn.cacert),
	 .help = "CA certificates for amqps:// (default: the system's)"},
	{"cert", OPT_CERT, "FILE", GLOBAL, TEXT(conn.cert),
	 .help = "client certificate for amqps:// (PEM)"},
	{"key", OPT_KEY, "FILE", GLOBAL, TEXT(conn.key),
	 .help = "its private key (default: in the --cert file; mode 600)"},
	{"insecure", OPT_INSECURE, NULL, GLOBAL, FLAG(conn.insecure),
	 .help = "amqps:// without checking the broker's certificate (unsafe)"},
	{"prefix", OPT_PREFIX, "P", GLOBAL, TEXT(prefix),
	 .help = "queue-name prefix (default $AMQPLOCK_PREFIX, \"" DEFAULT_PREFIX "\")"},
	{"management-url", OPT_MANAGEMENT_URL, "URL", GLOBAL, CALL(set_management_url),
	 .help = "the management HTTP API, for list and \"did you mean\"\n"
		 "(default $AMQPLOCK_MANAGEMENT_URL, else http://HOST:15672/\n"
		 "for amqp://HOST, https://HOST:15671/ for amqps://HOST)"},
	{"json", OPT_JSON, NULL, GLOBAL, FLAG(json),
	 .help = "print one JSON object per result on stdout"},
	{"quiet", OPT_QUIET, NULL, GLOBAL, FLAG(quiet), .help = "print nothing on stdout"},
	{"verbose", OPT_VERBOSE, NULL, GLOBAL, CALL(set_verbose),
	 .help = "trace each step on stderr"},
	{"heartbeat", OPT_HEARTBEAT, "SECS", GLOBAL, COUNT(conn.heartbeat, 0, 3600),
	 .help = "AMQP heartbeat, whole seconds, 0 = off" DEFAULT_IS(HEARTBEAT)},
	{"connect-timeout", OPT_CONNECT_TIMEOUT, "SECS", GLOBAL,
	 SECONDS(conn.connect_timeout, 0.001),
	 .help = "give up connecting and logging in after SECS" DEFAULT_IS(CONNECT_TIMEOUT)},
	{"rpc-timeout", OPT_RPC_TIMEOUT, "SECS", GLOBAL, SECONDS(conn.rpc_timeout, 0.001),
	 .help = "give up when a reply from the broker takes longer" DEFAULT_IS(RPC_TIMEOUT)},
	{"admin-wait", OPT_ADMIN_WAIT, "SECS", ADMIN, SECONDS(sem.admin_wait, 0),
	 .help = "wait up to SECS for another administrator to finish" DEFAULT_IS(ADMIN_WAIT)},
	{"overshoot", OPT_OVERSHOOT, "N", SCAN, COUNT(sem.overshoot, 0, SLOTS_MAX),
	 .help = "look N slots past max for stray slots and orphan holders" DEFAULT_IS(OVERSHOOT)},
	{"slot-type", OPT_SLOT_TYPE, "TYPE", GROW, CALL(set_slot_type),
	 .help = "classic or quorum (replicated in a cluster); default: create\n"
		 "classic, others the type of the slots there are"},
	{"drain", OPT_DRAIN, NULL, SHRINK, FLAG(sem.drain),
	 .help = "let the holders of the slots removed run their jobs to the\n"
		 "end; nobody gets those slots meanwhile"},
	{"repair", OPT_REPAIR, NULL, REPAIR, FLAG(repair),
	 .help = "delete the stray queues found (the other problems stay)"},
	{"metrics", OPT_METRICS, NULL, METRICS, FLAG(metrics),
	 .help = "print OpenMetrics text (Prometheus, node_exporter's textfile collector)"},
	{"no-names", OPT_NO_NAMES, NULL, NAMES, FLAG(sem.no_names),
	 .help = "do not ask the holders who they are (no wait for their answers)"},
	{"nonblock", OPT_NONBLOCK, NULL, WAIT, FLAG(hold.nonblock),
	 .help = "try once; do not wait"},
	{"wait", OPT_WAIT, "SECS", WAIT, CALL(set_wait),
	 .help = "give up after SECS (fractions allowed; 0 = -n)"},
	{"conflict-exit-code", OPT_CONFLICT_EXIT, "N", WAIT, COUNT(conflict_exit, 0, 255),
	 .help = "exit code when nothing was obtained in time" DEFAULT_IS(CONFLICT_EXIT)},
	{"command", OPT_COMMAND, "TEXT", HOLD, TEXT(command_text),
	 .help = "run TEXT with /bin/sh -c instead of CMD"},
	{"lost-signal", OPT_LOST_SIGNAL, "SIG", HOLD, CALL(set_lost_signal),
	 .help = "signal for the command if the slot is lost" DEFAULT_IS(LOST_SIGNAL)},
	{"grace", OPT_GRACE, "SECS", HOLD, SECONDS(hold.grace, 0),
	 .help = "SIGKILL the command this long after --lost-signal" DEFAULT_IS(GRACE)},
	{"timeout", OPT_TIMEOUT, "SECS", HOLD, SECONDS(hold.timeout, 0),
	 .help = "end the command after SECS: SIGTERM to every process of it,\n"
		 "SIGKILL --grace later; hold exits 124 (default\n"
		 "$AMQPLOCK_TIMEOUT; 0 = none)"},
	/* The default is the command's (cmd_client.c, settle_lease). */
	{"lease", OPT_LEASE, "SECS", LEASE, SECONDS(hold.lease, 0),
	 .help = "keep the slot this long for a holder that lost its connection,\n"
		 "to reconnect; 0 = none (default " STR(DEFAULT_LEASE_BASE) " + --grace)"},
	{"min-hold", OPT_MIN_HOLD, "SECS", LEASE, .kind = KIND_SECONDS,
	 .field = TYPED(hold.min_hold, double), .max = MAX_MIN_HOLD,
	 .help = "keep the slot SECS after it was taken, even if done sooner;\n"
		 "amqplock exits at once, the broker frees it (at most a day)"},
	{"token", OPT_TOKEN, NULL, LEASE, FLAG(hold.token),
	 .help = "draw a fencing token once the slot is ours: CMD's\n"
		 "$AMQPLOCK_TOKEN, \"token\" in --json (costs a round trip)"},
	{"label", OPT_LABEL, "TEXT", LEASE, CALL(set_label),
	 .help = "what status shows beside host and pid (printable ASCII, at\n"
		 "most 64 bytes; default $AMQPLOCK_LABEL)"},
	{"create", OPT_CREATE, "N", LEASE, COUNT(create, 1, SLOTS_MAX),
	 .help = "create the semaphore with N slots if it does not exist\n"
		 "(needs the admin role only when it creates)"},
	{"help", OPT_HELP, NULL, GLOBAL, CALL(set_show), .help = "show help and exit"},
	{"version", OPT_VERSION, NULL, GLOBAL, CALL(set_show), .help = "show the version and exit"},
};
#define N_OPTS (sizeof(opt_defs) / sizeof(opt_defs[0]))

/* Zeroes *cli but for conn.broker: room for 64 resolved URLs, 70 KiB of
 * which a run fills an entry or a few (conn.brokers says how many). A page
 * never written is no memory: zeroed, they were 88 KiB of the peak RSS of
 * hold -- true (tests/unit cannot see this; bench/run.sh row 7 can). */
static void zero_but_brokers(struct cli *cli)
{
	size_t at = offsetof(struct cli, conn.broker), len = sizeof(cli->conn.broker);

	memset(cli, 0, at);
	memset((char *)cli + at + len, 0, sizeof(*cli) - at - len);
}

void cli_defaults(struct cli *cli)
{
	const char *env;

	zero_but_brokers(cli);
	cli->conn.url = default_url;
	cli->conn.heartbeat = DEFAULT_HEARTBEAT;
	cli->conn.connect_timeout = DEFAULT_CONNECT_TIMEOUT;
	cli->conn.rpc_timeout = DEFAULT_RPC_TIMEOUT;
	cli->sem.overshoot = DEFAULT_OVERSHOOT;
	cli->sem.admin_wait = DEFAULT_ADMIN_WAIT;
	cli->hold.wait = -1;
	cli->hold.lost_signal = CAT(SIG, DEFAULT_LOST_SIGNAL);
	cli->hold.grace = DEFAULT_GRACE;
	cli->hold.lease = -1;
	cli->hold.timeout = -1;
	cli->prefix = DEFAULT_PREFIX;
	cli->conflict_exit = DEFAULT_CONFLICT_EXIT;
	cli->exit_code = -1;
	if ((env = getenv("AMQP_URL")) && *env)
		cli->conn.url = env;
	if ((env = getenv("AMQPLOCK_URL")) && *env)
		cli->conn.url = env;
	if ((env = getenv("AMQPLOCK_PREFIX")))
		cli->prefix = env;
	if ((env = getenv("AMQPLOCK_MANAGEMENT_URL")) && *env)
		cli->management_url = env;
}

/* --- the values ----------------------------------------------------------- */

static enum al_status seconds(const char *name, const char *arg, double min, double max,
			      double *out)
{
	char q[64];
	const char *why = parse_seconds(arg, max, out);

	if (!why && *out < min)
		why = "is too small";
	if (why)
		return fail(AL_USAGE, "--%s %s: %s", name, parse_quote_arg(arg, q, sizeof(q)), why);
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
			    parse_quote_arg(arg, q, sizeof(q)), why, min, max);
	*out = (unsigned)v;
	return AL_OK;
}

/* --url given several times: the brokers of a cluster, tried in order
 * (connect.c). The first --url replaces the environment's list. */
static enum al_status add_url(struct cli *cli, const struct opt_def *o, char *arg)
{
	size_t used = cli->urls_given ? strlen(cli->urls) : 0;
	int n;

	(void)o;
	if (arg[strspn(arg, " ")] == '\0')
		return fail(AL_USAGE, "invalid broker URL: empty");
	n = snprintf(cli->urls + used, sizeof(cli->urls) - used, "%s%s", used ? " " : "", arg);
	/* ps shows arg's original to every user. */
	secret_mask_urls(arg);
	if (n < 0 || (size_t)n >= sizeof(cli->urls) - used)
		return fail(AL_USAGE, "the --url options are too long together");
	cli->urls_given = true;
	cli->conn.url = cli->urls;
	return AL_OK;
}

static enum al_status set_slot_type(struct cli *cli, const struct opt_def *o, char *arg)
{
	char q[64];

	if (strcmp(arg, "classic") == 0)
		cli->sem.slot_type = SLOT_CLASSIC;
	else if (strcmp(arg, "quorum") == 0)
		cli->sem.slot_type = SLOT_QUORUM;
	else
		return fail(AL_USAGE, "--%s %s: expected classic or quorum", o->name,
			    parse_quote_arg(arg, q, sizeof(q)));
	cli->sem.slot_type_given = true;
	return AL_OK;
}

/* -w 0 is -n. */
static enum al_status set_wait(struct cli *cli, const struct opt_def *o, char *arg)
{
	if (seconds(o->name, arg, 0, MAX_SECONDS, &cli->hold.wait) != AL_OK)
		return AL_USAGE;
	cli->hold.nonblock = cli->hold.nonblock || cli->hold.wait == 0;
	return AL_OK;
}

static enum al_status set_label(struct cli *cli, const struct opt_def *o, char *arg)
{
	const char *why = parse_label(arg);
	char q[80];

	if (why)
		return fail(AL_USAGE, "--%s %s %s", o->name, parse_quote_arg(arg, q, sizeof(q)),
			    why);
	cli->conn.who.label = arg;
	return AL_OK;
}

static enum al_status set_lost_signal(struct cli *cli, const struct opt_def *o, char *arg)
{
	char q[64];
	int *sig = &cli->hold.lost_signal;
	const char *why = parse_signal(arg, sig);

	/* Only a signal whose default action ends a process: one that a
	 * command ignores or stops on would leave it running, without its
	 * slot, until the --grace SIGKILL. (32 and 33 belong to glibc.) */
	if (!why && *sig == SIGKILL)
		why = "is not needed: SIGKILL follows the lost signal after --grace seconds "
		      "(--grace 0 for at once)";
	else if (!why && (*sig == SIGSTOP || *sig == SIGCHLD || *sig == SIGCONT ||
			  *sig == SIGTSTP || *sig == SIGTTIN || *sig == SIGTTOU || *sig == SIGURG ||
			  *sig == SIGWINCH || (*sig > 31 && *sig < SIGRTMIN)))
		why = "cannot be used (it does not end a command)";
	if (why)
		return fail(AL_USAGE, "--%s %s %s", o->name, parse_quote_arg(arg, q, sizeof(q)),
			    why);
	return AL_OK;
}

static enum al_status set_verbose(struct cli *cli, const struct opt_def *o, char *arg)
{
	(void)cli, (void)o, (void)arg;
	trace_enabled = 1;
	return AL_OK;
}

/* --help, --version: the last one given wins. */
static enum al_status set_show(struct cli *cli, const struct opt_def *o, char *arg)
{
	(void)arg;
	cli->show = o->id == OPT_VERSION ? CLI_SHOW_VERSION : CLI_SHOW_HELP;
	return AL_OK;
}

/* Refused with a user or password in it: those come from the broker URL
 * or --password-file, and would show in ps (so masked there too). */
static enum al_status set_management_url(struct cli *cli, const struct opt_def *o, char *arg)
{
	const char *why = mgmt_url_problem(arg);

	if (why) {
		secret_mask_urls(arg);
		return fail(AL_USAGE, "invalid --%s: %s", o->name, why);
	}
	cli->management_url = arg;
	return AL_OK;
}

static enum al_status apply(struct cli *cli, const struct opt_def *o, char *arg)
{
	void *field = (char *)cli + o->field;
	char what[64];

	switch (o->kind) {
	case KIND_FLAG:
		*(bool *)field = true;
		return AL_OK;
	case KIND_TEXT:
		/* const char * and char * have the same representation. */
		memcpy(field, &arg, sizeof(arg));
		return AL_OK;
	case KIND_SECONDS:
		return seconds(o->name, arg, o->min, o->max, field);
	case KIND_COUNT:
		snprintf(what, sizeof(what), "--%s", o->name);
		return cli_count(arg, what, (unsigned long)o->min, (unsigned long)o->max, field);
	case KIND_CALL:
		return o->set(cli, o, arg);
	}
	return fail(AL_INTERNAL, "internal error: unhandled option %d", o->id);
}

/* --- the table, for getopt and for help ------------------------------------ */

void cli_list_options(FILE *f, const char *command, unsigned scopes)
{
	char short_name[3] = "-";
	size_t i;

	for (i = 0; i < N_OPTS; i++) {
		const struct opt_def *o = &opt_defs[i];

		if (!(o->scope & scopes))
			continue;
		if (o->id < 256)
			snprintf(short_name, sizeof(short_name), "-%c", o->id);
		else
			snprintf(short_name, sizeof(short_name), "-");
		fprintf(f, "%s %s %s\n", command, o->name, short_name);
	}
}

void cli_print_options(FILE *f, unsigned scopes)
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

enum al_status cli_parse(struct cli *cli, int argc, char **argv, unsigned scopes, bool stop,
			 const char *cmd, int *args_at)
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
				parse_quote_arg(bad, q, sizeof(q));
			r = fail(AL_USAGE,
				 id == '?' ? "unknown option %s" : "option %s needs a value", q);
		} else if (!((o = find_opt(id))->scope & scopes)) {
			r = cmd ? fail(AL_USAGE, "option --%s does not apply to %s", o->name, cmd)
				: fail(AL_USAGE,
				       "option --%s belongs after the command (amqplock COMMAND "
				       "--%s ...)",
				       o->name, o->name);
		} else {
			r = apply(cli, o, optarg);
		}
		if (st == AL_OK)
			st = r;
	}
	*args_at = optind;
	return st;
}

/* --- using what the options say --------------------------------------------- */

enum al_status cli_check_prefix(struct cli *cli)
{
	const char *why;
	char q[64];

	if ((why = names_prefix_problem(cli->prefix)))
		return fail(AL_USAGE, "prefix %s %s", parse_quote_arg(cli->prefix, q, sizeof(q)),
			    why);
	return AL_OK;
}

enum al_status cli_check_name(struct cli *cli, const char *name)
{
	struct sem_name sn;
	const char *why;
	char q[64];

	if (cli_check_prefix(cli) != AL_OK)
		return AL_USAGE;
	if (!(why = names_problem(name)))
		why = sem_name_init(&sn, cli->prefix, name);
	if (why)
		return fail(AL_USAGE, "semaphore name %s %s", parse_quote_arg(name, q, sizeof(q)),
			    why);
	cli->name = name;
	return AL_OK;
}

void cli_name_connections(struct cli *cli, unsigned slot)
{
	struct conn_identity *who = &cli->conn.who;
	struct passwd *pw;
	char at_slot[32] = "";

	if (!who->pid) {
		who->version = AMQPLOCK_VERSION;
		who->pid = (long)getpid();
		if (gethostname(who->host, sizeof(who->host)) != 0)
			snprintf(who->host, sizeof(who->host), "?");
		who->host[sizeof(who->host) - 1] = '\0';
		pw = getpwuid(geteuid());
		snprintf(who->user, sizeof(who->user), "%s", pw ? pw->pw_name : "?");
	}
	who->command = cli->command_name ? cli->command_name : "";
	if (slot)
		snprintf(at_slot, sizeof(at_slot), "slot %u, ", slot);
	snprintf(who->name, sizeof(who->name), "amqplock %s %s (%son %s, pid %ld)",
		 cli->command_name ? cli->command_name : "", cli->name ? cli->name : "", at_slot,
		 who->host, who->pid);
}

/* Opens c as the options say; on failure it is closed. */
static enum al_status cli_open(struct cli *cli, struct conn *c, struct deadline by)
{
	enum al_status st;

	if (!cli->conn.who.name[0])
		cli_name_connections(cli, 0);
	/* Loud on every run, so that a forgotten --insecure does not go
	 * unnoticed in a cron job's mail. */
	if (cli->conn.insecure)
		out_error_line("warning: --insecure: the broker's certificate is not verified");
	st = conn_open(c, &cli->conn, by);
	/* In cron, the environment a login shell sets is not there: say that
	 * the broker tried was nobody's choice. */
	if ((st == AL_CONNECTION || st == AL_ACCESS) && cli_url_is_default(cli))
		fail_context(st, "no broker URL was given (--url, AMQPLOCK_URL or AMQP_URL), and "
				 "the default one failed: ");
	if (st != AL_OK)
		conn_close(c);
	return st;
}

enum al_status cli_connect(struct cli *cli, struct conn *c, struct sem *s, struct deadline by)
{
	/* The name was checked before. */
	sem_init(s, c, cli->prefix, cli->name, &cli->sem);
	return cli_open(cli, c, by);
}

bool cli_url_is_default(const struct cli *cli)
{
	return cli->conn.url == default_url;
}

enum al_status cli_reconnect(struct cli *cli, struct conn *c, struct sem *s, struct deadline by)
{
	enum al_status st = cli_open(cli, c, by);

	if (st == AL_OK)
		sem_reconnected(s);
	return st;
}

/* A broker that fails every look is not racing a deletion. */
#define LOOK_TRIES 3

bool cli_look_again(const struct conn *c, enum al_status st, int *tries)
{
	if (st != AL_CONNECTION || !conn_broker_raced(c) || ++*tries > LOOK_TRIES)
		return false;
	trace("%s; looking again on a new connection", status_message());
	status_clear();
	return true;
}
