/* stamp.c: the recorder of the partition suite (tests/partition/). A job
 * run under `amqplock hold` logs when it started and ended, on
 * CLOCK_MONOTONIC, which every network namespace shares, so that the
 * checker can lay the jobs of all clients on one time line.
 *
 *   stamp job FILE CLIENT SECS    append "start T CLIENT SEM SLOT PID",
 *                                 sleep SECS, append "end T CLIENT SEM SLOT
 *                                 PID done"; SEM and SLOT from
 *                                 AMQPLOCK_SEMAPHORE and AMQPLOCK_SLOT.
 *                                 TERM, INT or HUP (a lost slot) ends the
 *                                 sleep: the end line then says the signal
 *   stamp mark FILE WORD...       append "mark T WORD..."
 *   stamp now                     print T
 *
 * T is seconds with nine decimals. Each line is one write(2) to a file
 * opened with O_APPEND, so lines of jobs in different processes never mix.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

static void now(char *buf, size_t len)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(buf, len, "%lld.%09ld", (long long)ts.tv_sec, ts.tv_nsec);
}

/* One line appended with one write; exits 1 if it cannot be. */
static void append(const char *file, const char *line)
{
	int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	size_t len = strlen(line);
	if (fd < 0 || write(fd, line, len) != (ssize_t)len) {
		fprintf(stderr, "stamp: cannot append to %s: %s\n", file, strerror(errno));
		exit(1);
	}
	close(fd);
}

static int job(const char *file, const char *client, const char *secs)
{
	const char *sem = getenv("AMQPLOCK_SEMAPHORE");
	const char *slot = getenv("AMQPLOCK_SLOT");
	char t[32], line[512];
	double s = strtod(secs, NULL);
	struct timespec left = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal; /* no SA_RESTART: the sleep ends */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (!sem || !slot)
		sem = "-", slot = "-";
	now(t, sizeof t);
	snprintf(line, sizeof line, "start %s %s %s %s %ld\n", t, client, sem, slot,
		 (long)getpid());
	append(file, line);
	while (!got_signal && nanosleep(&left, &left) != 0 && errno == EINTR)
		;
	now(t, sizeof t);
	snprintf(line, sizeof line, "end %s %s %s %s %ld %s\n", t, client, sem, slot,
		 (long)getpid(),
		 got_signal == SIGTERM  ? "TERM"
		 : got_signal == SIGINT ? "INT"
		 : got_signal == SIGHUP ? "HUP"
					: "done");
	append(file, line);
	return got_signal ? 128 + got_signal : 0;
}

int main(int argc, char **argv)
{
	char t[32], line[1024];
	if (argc == 5 && strcmp(argv[1], "job") == 0)
		return job(argv[2], argv[3], argv[4]);
	if (argc >= 4 && strcmp(argv[1], "mark") == 0) {
		size_t off;
		now(t, sizeof t);
		off = (size_t)snprintf(line, sizeof line, "mark %s", t);
		for (int i = 3; i < argc && off < sizeof line - 2; i++)
			off += (size_t)snprintf(line + off, sizeof line - off, " %s", argv[i]);
		if (off > sizeof line - 2)
			off = sizeof line - 2;
		line[off] = '\n';
		line[off + 1] = '\0';
		append(argv[2], line);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "now") == 0) {
		now(t, sizeof t);
		printf("%s\n", t);
		return 0;
	}
	fprintf(stderr,
		"usage: stamp job FILE CLIENT SECS | stamp mark FILE WORD... | stamp now\n");
	return 64;
}
