/* timeit: wall time of whole-process runs of several commands, taken in
 * turns so that machine noise hits each of them alike (bench/run.sh).
 *
 *   timeit [-r ROUNDS] [-w WARMUP] [-t SECS] [-f] [-o RAWFILE] --
 *          LABEL CMD [ARGS...] [:: LABEL CMD [ARGS...]]...
 *
 * Each round runs every command once; the order rotates from round to
 * round (-f keeps the given order, for steps that must follow each other,
 * such as create then destroy). WARMUP rounds (default 2) come first and
 * are not counted. A run is timed from just before posix_spawn to just
 * after waitpid, with CLOCK_MONOTONIC; stdin and stdout are /dev/null,
 * stderr is inherited. A run that exits non-zero, or lasts longer than
 * SECS (default 60; it is then killed), ends timeit with status 1.
 *
 * Prints one line per command: LABEL N MEDIAN P10 P90 MIN MAX (ms;
 * percentiles by nearest rank); RAWFILE gets "LABEL ROUND MS" per run. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct cmd {
	const char *label;
	char **argv;
	double *ms;
	int n;
};

static volatile sig_atomic_t alarmed;

static void on_alarm(int sig)
{
	(void)sig;
	alarmed = 1;
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void usage(void)
{
	fprintf(stderr, "usage: timeit [-r ROUNDS] [-w WARMUP] [-t SECS] [-f] [-o RAWFILE] -- "
			"LABEL CMD [ARGS...] [:: LABEL CMD [ARGS...]]...\n");
	exit(2);
}

/* Runs c once; returns its wall time in ms, or -1 on failure. */
static double run_once(const struct cmd *c, const posix_spawn_file_actions_t *fa,
		       const posix_spawnattr_t *attr, unsigned timeout)
{
	double t0, t1;
	pid_t pid;
	int st, e, killed = 0;

	t0 = now_ms();
	e = posix_spawnp(&pid, c->argv[0], fa, attr, c->argv, environ);
	if (e != 0) {
		fprintf(stderr, "timeit: %s: cannot run %s: %s\n", c->label, c->argv[0],
			strerror(e));
		return -1;
	}
	alarmed = 0;
	alarm(timeout);
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR) {
			perror("timeit: waitpid");
			return -1;
		}
		if (alarmed && !killed) {
			kill(pid, SIGKILL);
			killed = 1;
		}
	}
	t1 = now_ms();
	alarm(0);
	if (killed) {
		fprintf(stderr, "timeit: %s: still running after %u s, killed\n", c->label,
			timeout);
		return -1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "timeit: %s: %s %d\n", c->label,
			WIFEXITED(st) ? "exit status" : "killed by signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		return -1;
	}
	return t1 - t0;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n-1]. */
static double rank(const double *v, int n, double p)
{
	int i = (int)ceil(p / 100.0 * n) - 1;

	return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

int main(int argc, char **argv)
{
	int rounds = 30, warmup = 2, fixed = 0, ncmd = 0, opt, i, r, k;
	unsigned timeout = 60;
	const char *rawpath = NULL;
	FILE *raw = NULL;
	struct cmd *cmds;
	struct sigaction sa;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t dfl;

	while ((opt = getopt(argc, argv, "+r:w:t:fo:")) != -1) {
		switch (opt) {
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'w':
			warmup = atoi(optarg);
			break;
		case 't':
			timeout = (unsigned)atoi(optarg);
			break;
		case 'f':
			fixed = 1;
			break;
		case 'o':
			rawpath = optarg;
			break;
		default:
			usage();
		}
	}
	if (rounds < 1 || warmup < 0 || timeout < 1 || optind >= argc)
		usage();
	cmds = calloc((size_t)(argc - optind), sizeof(*cmds));
	if (!cmds)
		return 1;
	/* Split the rest at "::" into LABEL CMD ARGS... groups (argv is
	 * NULL-terminated, so each "::" becomes the end of a group). */
	for (i = optind; i < argc;) {
		int start = i;

		while (i < argc && strcmp(argv[i], "::") != 0)
			i++;
		if (i - start < 2)
			usage();
		cmds[ncmd].label = argv[start];
		cmds[ncmd].argv = &argv[start + 1];
		cmds[ncmd].ms = calloc((size_t)rounds, sizeof(double));
		if (!cmds[ncmd].ms)
			return 1;
		ncmd++;
		if (i < argc)
			argv[i++] = NULL;
	}
	if (rawpath && !(raw = fopen(rawpath, "a"))) {
		perror(rawpath);
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART: waitpid returns EINTR */
	sigaction(SIGALRM, &sa, NULL);
	/* A shell without job control starts background commands with
	 * SIGINT and SIGQUIT ignored; an interrupt must end them here and in
	 * the commands measured. */
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGINT);
	sigaddset(&dfl, SIGQUIT);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);

	for (r = -warmup; r < rounds; r++) {
		for (k = 0; k < ncmd; k++) {
			int j = fixed ? k : (k + (r < 0 ? -r : r)) % ncmd;
			double ms = run_once(&cmds[j], &fa, &attr, timeout);

			if (ms < 0)
				return 1;
			if (r < 0)
				continue;
			cmds[j].ms[cmds[j].n++] = ms;
			if (raw)
				fprintf(raw, "%s %d %.3f\n", cmds[j].label, r, ms);
		}
	}
	if (raw)
		fclose(raw);
	for (k = 0; k < ncmd; k++) {
		struct cmd *c = &cmds[k];

		qsort(c->ms, (size_t)c->n, sizeof(double), by_value);
		printf("%s %d %.3f %.3f %.3f %.3f %.3f\n", c->label, c->n,
		       c->n % 2 ? c->ms[c->n / 2] : (c->ms[c->n / 2 - 1] + c->ms[c->n / 2]) / 2,
		       rank(c->ms, c->n, 10), rank(c->ms, c->n, 90), c->ms[0], c->ms[c->n - 1]);
	}
	return 0;
}
