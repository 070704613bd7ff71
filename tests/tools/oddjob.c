/* oddjob.c: jobs that a supervisor reading /proc or calling kill() could get
 * wrong, for tests/supervisor.bats and the fault suite. Built by the tests:
 *
 *   cc -pthread -o oddjob tests/tools/oddjob.c
 *
 *   oddjob zombie FILE SECS   the main thread exits (pthread_exit) while a
 *                             second thread runs on: /proc shows the
 *                             process's leader as a zombie (state Z),
 *                             yet the process runs
 *   oddjob root FILE SECS     becomes root for good (real, effective and
 *                             saved ids, as `sudo cmd` leaves a command):
 *                             installed setuid root, it may then not be
 *                             signalled by the user who started it
 *
 * Either writes the record of tests/tools/leasecmd.pl to FILE ("start
 * SEMAPHORE SLOT TIME", "tick TIME" every 0.1 s for SECS seconds, "end
 * TIME"; TIME is CLOCK_MONOTONIC, each line appended with its own open and
 * close), and writes its pid to FILE.ready once it runs as it should (the
 * leader a zombie; root). FILE "-" writes nothing: the job only lasts SECS seconds.
 * Signals keep their default actions. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *file;
static double secs;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void out(const char *what, const char *extra)
{
	FILE *f;

	if (strcmp(file, "-") == 0 || !(f = fopen(file, "a")))
		return;
	fprintf(f, "%s %s%.6f\n", what, extra, now());
	fclose(f);
}

static void ready(void)
{
	char path[4096];
	FILE *f;

	if (strcmp(file, "-") == 0)
		return;
	snprintf(path, sizeof(path), "%s.ready", file);
	if ((f = fopen(path, "w"))) {
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
}

/* The leader's own state in /proc: 'Z' once its thread has exited. */
static char leader_state(void)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)getpid());
	if (!(f = fopen(path, "r")))
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static void run(int zombie)
{
	char start[300];
	double end = now() + secs;
	struct timespec tenth = {0, 100000000};

	snprintf(start, sizeof(start), "%s %s ",
		 getenv("AMQPLOCK_SEMAPHORE") ? getenv("AMQPLOCK_SEMAPHORE") : "unset",
		 getenv("AMQPLOCK_SLOT") ? getenv("AMQPLOCK_SLOT") : "unset");
	out("start", start);
	while (zombie && leader_state() != 'Z')
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	ready();
	while (now() < end) {
		out("tick", "");
		nanosleep(&tenth, NULL);
	}
	out("end", "");
	exit(0);
}

static void *thread(void *arg)
{
	(void)arg;
	run(1);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;

	if (argc != 4 || (strcmp(argv[1], "zombie") != 0 && strcmp(argv[1], "root") != 0)) {
		fprintf(stderr, "usage: oddjob zombie|root FILE SECS\n");
		return 2;
	}
	file = argv[2];
	secs = atof(argv[3]);
	if (strcmp(argv[1], "root") == 0) {
		if (setgid(0) != 0 || setuid(0) != 0) {
			perror("oddjob: cannot become root (not installed setuid root?)");
			return 1;
		}
		run(0);
	}
	if (pthread_create(&t, NULL, thread, NULL) != 0) {
		perror("oddjob: pthread_create");
		return 1;
	}
	pthread_exit(NULL);
}
