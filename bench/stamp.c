/* stamp LOG SECS TAG: the command run under `amqplock hold` by
 * bench/handoff.pl. Appends "start T PID PPID TAG" to LOG as soon as it
 * runs (T: CLOCK_MONOTONIC seconds; PPID is the hold process), holds for
 * SECS, then appends "end T PID PPID TAG" just before it exits 0. In C, so
 * that its own start-up, part of every measured hand-off, stays small. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One write per line with O_APPEND: lines of concurrent stamps never mix. */
static void record(int fd, const char *what, double t, const char *tag)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "%s %.6f %d %d %s\n", what, t, (int)getpid(),
			 (int)getppid(), tag);

	if (n < 0 || (size_t)n >= sizeof(line) || write(fd, line, (size_t)n) != n) {
		fprintf(stderr, "stamp: cannot write the log\n");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	double t0 = now(), secs;
	struct timespec hold;
	int fd;

	if (argc != 4) {
		fprintf(stderr, "usage: stamp LOG SECS TAG\n");
		return 1;
	}
	if ((fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0) {
		perror(argv[1]);
		return 1;
	}
	record(fd, "start", t0, argv[3]);
	secs = atof(argv[2]);
	if (secs > 0) {
		hold.tv_sec = (time_t)secs;
		hold.tv_nsec = (long)((secs - (double)hold.tv_sec) * 1e9);
		while (nanosleep(&hold, &hold) != 0)
			;
	}
	record(fd, "end", now(), argv[3]);
	return 0;
}
