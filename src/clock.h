/* Time for deadlines and back-off. */
#ifndef AMQPLOCK_CLOCK_H
#define AMQPLOCK_CLOCK_H

/* Monotonic seconds. */
double now_seconds(void);

/* Monotonic seconds that also count the time the machine was suspended:
 * the clock of lease deadlines (a lease runs on in the broker meanwhile). */
double boot_seconds(void);

void sleep_seconds(double s);

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

/* A lease of `lease` seconds (docs/design.md, section 4) is trusted to
 * last this much less on our clock than on the broker's: a second for
 * scheduling and 5% for clocks that run at different rates. */
double lease_margin(double lease);

/* The shortest lease that covers a command's grace period and the silence
 * that tells a lost connection, with a second to spare between noticing
 * and signalling: (grace + silence + 1) <= lease - lease_margin(lease). */
double lease_shortest(double grace, double silence);

#endif
