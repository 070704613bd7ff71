#include "clock.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double boot_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void sleep_seconds(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

double jitter(double d)
{
	return d / 2 + d * ((double)rand() / ((double)RAND_MAX + 1));
}

double sooner(double a, double b)
{
	return a < b ? a : b;
}

#define LEASE_MARGIN_FIXED 1.0
#define LEASE_MARGIN_RATE  0.05

double lease_margin(double lease)
{
	return LEASE_MARGIN_FIXED + LEASE_MARGIN_RATE * lease;
}

double lease_shortest(double grace, double silence)
{
	return (grace + silence + 1.0 + LEASE_MARGIN_FIXED) / (1.0 - LEASE_MARGIN_RATE);
}

int poll_ms(double seconds)
{
	double ms = seconds * 1000;
	int whole;

	if (!(ms > 0))
		return 0;
	if (ms > 3600000)
		return 3600000;
	whole = (int)ms;
	return whole < ms ? whole + 1 : whole;
}

struct timeval timeval_of(double seconds)
{
	struct timeval tv;

	if (seconds < 0.001)
		seconds = 0.001;
	tv.tv_sec = (time_t)seconds;
	tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
	return tv;
}

struct deadline deadline_in(double seconds)
{
	return (struct deadline){.at = seconds < 0 ? INFINITY : now_seconds() + seconds};
}

struct deadline deadline_never(void)
{
	return (struct deadline){.at = INFINITY};
}

bool deadline_is_never(struct deadline d)
{
	return isinf(d.at);
}

bool deadline_passed(struct deadline d)
{
	return !deadline_is_never(d) && now_seconds() >= d.at;
}

double deadline_left(struct deadline d)
{
	double left;

	if (deadline_is_never(d))
		return INFINITY;
	left = d.at - now_seconds();
	return left > 0 ? left : 0;
}

struct deadline deadline_within(struct deadline d, double seconds)
{
	double now = now_seconds(), end = d.at;

	if (d.grace > 0 && now + d.grace > d.at)
		end = sooner(now, d.at) + d.grace;
	return (struct deadline){.at = sooner(end, now + seconds)};
}

struct deadline deadline_graced(struct deadline d, double grace)
{
	return (struct deadline){.at = d.at, .grace = grace};
}

struct backoff backoff_start(double first, double longest)
{
	return (struct backoff){first, longest};
}

double backoff_next(struct backoff *b, struct deadline d)
{
	double pause = sooner(jitter(b->pause), deadline_left(d));

	b->pause = sooner(b->pause * 2, b->longest);
	return pause;
}

void utc_text(time_t t, char *buf, size_t size)
{
	struct tm tm;

	if (!gmtime_r(&t, &tm) || strftime(buf, size, UTC_TEXT_FORMAT, &tm) == 0)
		buf[0] = '\0';
}
