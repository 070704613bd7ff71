/* amqplock: distributed counting semaphores on RabbitMQ.
 *
 * The top floor: the commands, help about them, and turning a status into
 * an exit code. The options are in cli.c, the commands in cmd_*.c, the
 * algorithm in sem.h and its parts (sem_parts.h), the broker in conn.c. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "list.h"
#include "out.h"
#include "parse.h"
#include "secret.h"
#include "signals.h"

static const struct command commands[] = {
	{"create", cmd_create, 2, 2, "NAME SLOTS", "create a semaphore with SLOTS slots",
	 ADMIN | SCAN | GROW, false},
	{"destroy", cmd_destroy, 1, 1, "NAME", "delete every slot of a semaphore", ADMIN | SCAN,
	 false},
	{"add", cmd_add, 1, 2, "NAME [COUNT]", "add COUNT slots (default 1)", ADMIN | SCAN | GROW,
	 false},
	{"remove", cmd_remove, 1, 2, "NAME [COUNT]", "remove the COUNT highest slots (default 1)",
	 ADMIN | SCAN | SHRINK, false},
	{"max", cmd_max, 1, 2, "NAME [N]", "print the number of slots, or set it to N",
	 ADMIN | SCAN | GROW | SHRINK, false},
	{"status", cmd_status, 1, STATUS_NAMES_MAX, "NAME...", "show held, free and orphan slots",
	 SCAN | NAMES | METRICS, false},
	{"list", cmd_list, 0, 0, "", "list the semaphores, with max, held and waiting", METRICS,
	 false},
	{"evict", cmd_evict, 2, 2, "NAME SLOT",
	 "end the job of SLOT's holder; give the slot back once it has ended", ADMIN | WAIT | NAMES,
	 false},
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

static void print_help(FILE *f, const struct command *cmd)
{
	size_t i;
	char left[64];

	if (cmd) {
		fprintf(f, "Usage: amqplock %s [OPTIONS]%s%s\n\n%c%s.\n", cmd->name,
			cmd->args[0] ? " " : "", cmd->args, cmd->summary[0] - 'a' + 'A',
			cmd->summary + 1);
		if (cmd->scopes & ~GLOBAL) {
			fprintf(f, "\nOptions:\n");
			cli_print_options(f, cmd->scopes & ~GLOBAL);
		}
		fprintf(f, "\nGlobal options:\n");
		cli_print_options(f, GLOBAL);
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
	cli_print_options(f, GLOBAL);
	fprintf(f, "\nExit status: 0 ok, 1 busy (-E), 64 usage, 65 damaged, 66 not found,\n"
		   "69 connection, 70 internal, 73 exists, 75 lost, 76 broker, 77 access;\n"
		   "hold: CMD's own status once CMD has run.\n");
}

static int finish(struct cli *cli, enum al_status st)
{
	/* -q: "busy" is an answer, not an error; its exit code says it all,
	 * as with flock -n. -E 0 says a busy semaphore is no failure at all
	 * (flock -E 0 -n: a cron run skipped), so nothing is said of it that
	 * cron would mail. */
	bool quiet_busy = st == AL_BUSY && (cli->quiet || cli->conflict_exit == 0);

	cli_suggest(cli, st);
	if (st != AL_OK && !cli->reported && !quiet_busy)
		out_error(st, st == AL_USAGE ? NULL : cli->name,
			  status_message()[0] ? status_message() : "failed");
	if (cli->exit_code >= 0)
		return cli->exit_code;
	/* -E only exists for the commands that can fail to obtain. */
	return st == AL_BUSY ? (int)cli->conflict_exit : status_exit_code(st);
}

static int usage_error(struct cli *cli, const struct command *cmd)
{
	char usage[128];

	if (cmd)
		snprintf(usage, sizeof(usage), "usage: amqplock %s [OPTIONS]%s%s", cmd->name,
			 cmd->args[0] ? " " : "", cmd->args);
	else
		snprintf(usage, sizeof(usage),
			 "usage: amqplock [OPTIONS] COMMAND ARGS... "
			 "(see amqplock --help)");
	if (!status_message()[0])
		fail(AL_USAGE, "%s", usage);
	return finish(cli, AL_USAGE);
}

static int print_help_or_version(enum cli_show what, const struct command *cmd)
{
	if (what == CLI_SHOW_VERSION)
		printf("amqplock %s\n", AMQPLOCK_VERSION);
	else
		print_help(stdout, cmd);
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	out_error_line("cannot write to standard output");
	return status_exit_code(AL_INTERNAL);
}

static int unknown_command(struct cli *cli, const char *name)
{
	const char *names[N_COMMANDS], *near;
	char q[64];
	size_t i;

	for (i = 0; i < N_COMMANDS; i++)
		names[i] = commands[i].name;
	near = list_nearest_word(names, N_COMMANDS, name);
	if (near)
		fail(AL_USAGE, "unknown command %s (did you mean %s? see amqplock --help)",
		     parse_quote_arg(name, q, sizeof(q)), near);
	else
		fail(AL_USAGE, "unknown command %s (see amqplock --help)",
		     parse_quote_arg(name, q, sizeof(q)));
	return usage_error(cli, NULL);
}

/* amqplock help [COMMAND]: argv is what follows "help". */
static int help(struct cli *cli, int argc, char **argv)
{
	const struct command *cmd = argc > 0 ? find_command(argv[0]) : NULL;

	/* "help --help", "help -h": the general help, like "help". */
	if (argc == 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0))
		return print_help_or_version(CLI_SHOW_HELP, NULL);
	if (argc > 0 && !cmd)
		return unknown_command(cli, argv[0]);
	if (argc > 1) {
		fail(AL_USAGE, "help takes one command");
		return usage_error(cli, NULL);
	}
	return print_help_or_version(CLI_SHOW_HELP, cmd);
}

/* The usage error for the wrong number of arguments names what is missing
 * (the first word of the usage line not given) or the first one too many. */
static enum al_status wrong_count(const struct command *cmd, char **args, int nargs)
{
	const char *word = cmd->args;
	char q[64];
	size_t len;
	int i;

	if (nargs > cmd->max_args)
		return fail(AL_USAGE, "unexpected argument %s (usage: amqplock %s [OPTIONS]%s%s)",
			    parse_quote_arg(args[cmd->max_args], q, sizeof(q)), cmd->name,
			    cmd->args[0] ? " " : "", cmd->args);
	for (i = 0; i < nargs && word; i++)
		word = strchr(word, ' ') ? strchr(word, ' ') + 1 : NULL;
	len = word ? strcspn(word, " ") : 0;
	return fail(AL_USAGE, "missing %.*s (usage: amqplock %s [OPTIONS] %s)", (int)len,
		    word ? word : "", cmd->name, cmd->args);
}

/* A word of a command line as a shell would need it: quoted only if it
 * holds something other than letters, digits and _./=:@%+,- . */
static const char *shell_word(const char *word, char *buf, size_t size)
{
	static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "0123456789_./=:@%+,-";

	if (*word && word[strspn(word, plain)] == '\0' && strlen(word) < size)
		return word;
	return parse_quote_arg(word, buf, size);
}

/* hold NAME CMD...: the flock habit. Shows the line with "--" put in. */
static enum al_status missing_dashes(const struct command *cmd, char **args, int nargs)
{
	char line[256], q[64];
	size_t used;
	int i;

	used = (size_t)snprintf(line, sizeof(line), "amqplock %s %s --", cmd->name,
				shell_word(args[0], q, sizeof(q)));
	for (i = 1; i < nargs && used < sizeof(line); i++)
		used += (size_t)snprintf(line + used, sizeof(line) - used, " %s",
					 shell_word(args[i], q, sizeof(q)));
	return fail(AL_USAGE, "put -- before the command: %s", line);
}

/* hold NAME CMD -x ...: the flock habit with an option of CMD's, which
 * getopt takes for one of ours. argv (n words from the command's name,
 * no "--" among them) is read as amqplock would with options first: if
 * a word that is no option follows NAME, that is the command, and the
 * usage error says where "--" goes instead of the one recorded. copy is
 * a copy of the words taken before getopt moved them about. */
static void missing_dashes_before_option(const struct command *cmd, int n, char **copy)
{
	char why[512];
	struct cli scratch;
	int at = n;
	bool habit;

	snprintf(why, sizeof(why), "%s", status_message());
	status_clear();
	cli_defaults(&scratch);
	habit = cli_parse(&scratch, n, copy, cmd->scopes | GLOBAL, true, cmd->name, &at) == AL_OK &&
		at + 1 < n && copy[at + 1][0] != '-' && !scratch.command_text;
	status_clear();
	if (habit)
		missing_dashes(cmd, copy + at, n - at);
	else
		fail(AL_USAGE, "%s", why);
}

/* Where results and JSON errors go: stdout, unless it belongs to the
 * command that hold runs; then every word of amqplock's, even a usage
 * error, goes to stderr. */
static FILE *result_stream(const struct command *cmd)
{
	return cmd && cmd->takes_command ? stderr : stdout;
}

/* amqplock --list-options, alone (not in --help: for the tests): every
 * option each command accepts, as cli_list_options prints them, "_" for
 * the command of options given before any command. */
static int list_options(void)
{
	size_t i;

	cli_list_options(stdout, "_", GLOBAL);
	for (i = 0; i < N_COMMANDS; i++)
		cli_list_options(stdout, commands[i].name, commands[i].scopes | GLOBAL);
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	out_error_line("cannot write to standard output");
	return status_exit_code(AL_INTERNAL);
}

/* The command line, parsed and run: argv is main's copy of it. */
static int run(int argc, char **argv)
{
	const struct command *cmd = NULL;
	int cmd_at, opts_end, end, nargs;
	char **args, **unparsed = NULL;
	enum al_status st;
	struct cli cli;

	if (argc == 2 && strcmp(argv[1], "--list-options") == 0)
		return list_options();
	signals_init();
	cli_defaults(&cli);
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	/* Global options before the command. */
	st = cli_parse(&cli, argc, argv, GLOBAL, true, NULL, &cmd_at);
	out_init(cli.json ? OUT_JSON : OUT_TEXT, cli.quiet,
		 result_stream(cmd_at < argc ? find_command(argv[cmd_at]) : NULL));
	if (st == AL_OK && cli.show == CLI_SHOW_NOTHING && cmd_at < argc) {
		if (strcmp(argv[cmd_at], "help") == 0)
			return help(&cli, argc - cmd_at - 1, argv + cmd_at + 1);
		cmd = find_command(argv[cmd_at]);
		if (!cmd)
			return unknown_command(&cli, argv[cmd_at]);
	}
	if (st == AL_OK && cli.show != CLI_SHOW_NOTHING)
		return print_help_or_version(cli.show, NULL);
	if (st != AL_OK || !cmd)
		return usage_error(&cli, NULL);

	/* The command's options, which may also be global ones, anywhere
	 * among its arguments up to a "--". */
	for (end = cmd_at + 1; end < argc && strcmp(argv[end], "--") != 0; end++)
		;
	/* (the words as given, for the flock habit's hint) */
	if (cmd->takes_command && end == argc &&
	    (unparsed = malloc((size_t)(end - cmd_at + 1) * sizeof(*unparsed))))
		memcpy(unparsed, argv + cmd_at, (size_t)(end - cmd_at + 1) * sizeof(*unparsed));
	st = cli_parse(&cli, end - cmd_at, argv + cmd_at, cmd->scopes | GLOBAL, false, cmd->name,
		       &opts_end);
	if (st != AL_OK && unparsed)
		missing_dashes_before_option(cmd, end - cmd_at, unparsed);
	free(unparsed);
	out_init(cli.json ? OUT_JSON : OUT_TEXT, cli.quiet, result_stream(cmd));
	if (st == AL_OK && cli.show != CLI_SHOW_NOTHING)
		return print_help_or_version(cli.show, cmd);
	args = argv + cmd_at + opts_end;
	nargs = end - cmd_at - opts_end;
	if (st == AL_OK && cmd->takes_command) {
		/* hold NAME -- CMD [ARGS...], or hold -c TEXT NAME */
		if (end < argc - 1 && !cli.command_text)
			cli.command = argv + end + 1;
		else if (end == argc && !cli.command_text && nargs > cmd->max_args)
			st = missing_dashes(cmd, args, nargs);
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
	if (st == AL_OK && (nargs < cmd->min_args || nargs > cmd->max_args))
		st = wrong_count(cmd, args, nargs);
	if (st != AL_OK || end < argc)
		return usage_error(&cli, cmd);
	cli.command_name = cmd->name;
	if ((st = cmd->max_args > 0 ? cli_check_name(&cli, args[0]) : cli_check_prefix(&cli)) !=
		    AL_OK ||
	    (st = conn_check_opts(&cli.conn)) != AL_OK)
		return finish(&cli, st);
	return finish(&cli, cmd->run(&cli, nargs, args));
}

/* A standard descriptor left closed by whoever started us (a daemon, a
 * supervisor, `cmd >&-`) would be the next file opened: the broker's
 * socket would get our messages, the keeper's would be taken for stdio,
 * the job would inherit them. /dev/null takes its place, before anything
 * opens a file; false (errno set) if it cannot. */
static bool standard_fds_open(const char **which)
{
	static const char *const names[] = {"input", "output", "error"};
	int fd;

	/* open() takes the lowest free number: fd, as those below are open. */
	for (fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", O_RDWR) < 0) {
			*which = names[fd];
			return false;
		}
	return true;
}

int main(int argc, char **argv)
{
	const char *which;
	char text[128], **copy;
	int code;

	/* librabbitmq takes 128 KiB blocks for its frames and mostly uses a
	 * few KiB of each. Mapped apart they cost only the pages written;
	 * glibc would soon carve them from the heap, whose pages stay once
	 * written (84 KiB of the peak RSS of hold -- true). */
	mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	if (!standard_fds_open(&which)) {
		/* Seen only if stderr is open: it never goes anywhere else. */
		snprintf(text, sizeof(text),
			 "cannot open /dev/null in place of the closed standard %s: %s", which,
			 strerror(errno));
		out_error_line(text);
		return status_exit_code(AL_INTERNAL);
	}
	/* Before anything reads the environment. */
	secret_hide();
	/* What ps shows stays out of reach of every pointer: see secret.h. */
	if (!(copy = secret_copy_args(argc, argv))) {
		out_error_line("out of memory");
		return status_exit_code(AL_INTERNAL);
	}
	code = run(argc, copy);
	free(copy);
	return code;
}
