/* Time for deadlines and back-off. */
#ifndef AMQPLOCK_CLOCK_H
#define AMQPLOCK_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/time.h>
#include <time.h>

/* Monotonic seconds. */
double now_seconds(void);

/* Monotonic seconds that also count the time the machine was suspended:
 * the clock of lease deadlines (a lease runs on in the broker meanwhile). */
double boot_seconds(void);

void sleep_seconds(double s);

/* Wall-clock times as amqplock shows them: ISO 8601, UTC, whole seconds,
 * as in "2026-11-27T21:44:03Z". */
#define UTC_TEXT_FORMAT "%Y-%m-%dT%H:%M:%SZ"
/* t in that form into buf (size bytes, 21 are enough); "" if it cannot. */
void utc_text(time_t t, char *buf, size_t size);

/* Uniform in [d/2, 3d/2): clients that collided once do not collide again
 * in lock step. */
double jitter(double d);

/* The earlier of two times (or the shorter of two pauses). Ours rather
 * than fmin(3): the binary then needs no libm, whose mere loading costs a
 * few hundred KiB of memory in every run. */
double sooner(double a, double b);

/* Seconds as whole milliseconds for poll(2), rounded up so that a wait
 * never ends just before its deadline; 0 for none left, at most an hour. */
int poll_ms(double seconds);

/* Seconds as a struct timeval for rabbitmq-c's waits: at least a
 * millisecond, since the library takes a zero as "do not wait at all". */
struct timeval timeval_of(double seconds);

/* The moment a wait must end, on the monotonic clock: the one type that
 * every wait takes (connecting, each reply, each pause, each poll), so
 * that a whole operation keeps to one limit however many steps it takes.
 * A struct, so that it cannot be mixed up with a length of time. */
struct deadline {
	double at; /* now_seconds() time; INFINITY: never */
	/* How long a step begun late may run past `at` (deadline_graced);
	 * 0 for most deadlines. */
	double grace;
};

/* `seconds` from now; negative: never. */
struct deadline deadline_in(double seconds);
struct deadline deadline_never(void);
bool deadline_is_never(struct deadline d);
bool deadline_passed(struct deadline d);
/* Seconds left: 0 once passed, INFINITY for never. */
double deadline_left(struct deadline d);
/* The earlier of d and `seconds` from now: one step (a reply, a connect,
 * a pause) within the whole. With a grace, a step begun less than the
 * grace before d (or after it) may end up to the grace after its start,
 * but not past d + grace; one begun earlier still ends by d. */
struct deadline deadline_within(struct deadline d, double seconds);
/* d, with a grace for its last step (never stays never): the last try of
 * a wait, begun at its end, is answered in time by a broker that answers
 * at all, while a step begun long before, and still unanswered at d,
 * has met a silence that the grace would only stretch. */
struct deadline deadline_graced(struct deadline d, double grace);

/* Pauses between tries that double from a first pause to a longest one,
 * each jittered, none past the deadline of the whole wait. Most waits
 * start at RETRY_FIRST and grow to RETRY_LONGEST: a freed slot or mutex
 * is then noticed within a few milliseconds at first, and within a second
 * (the longest pause jittered up by half) however long the wait. */
#define RETRY_FIRST   0.01
#define RETRY_LONGEST 0.5

struct backoff {
	double pause, longest;
};

struct backoff backoff_start(double first, double longest);
/* The next pause: jitter(pause), cut to what is left before d, then
 * doubles up to the longest. 0 once d has passed. */
double backoff_next(struct backoff *b, struct deadline d);

/* A lease of `lease` seconds (docs/design.md, section 4) is trusted to
 * last this much less on our clock than on the broker's: a second for
 * scheduling and 5% for clocks that run at different rates. */
double lease_margin(double lease);

/* The shortest lease that covers a command's grace period and the silence
 * that tells a lost connection, with a second to spare between noticing
 * and signalling: (grace + silence + 1) <= lease - lease_margin(lease). */
double lease_shortest(double grace, double silence);

#endif
