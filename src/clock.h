/* Time for deadlines and back-off. */
#ifndef AMQPLOCK_CLOCK_H
#define AMQPLOCK_CLOCK_H

/* Monotonic seconds. */
double now_seconds(void);

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

#endif
