/* Time for deadlines and back-off. */
#ifndef AMQPLOCK_CLOCK_H
#define AMQPLOCK_CLOCK_H

/* Monotonic seconds. */
double now_seconds(void);

void sleep_seconds(double s);

/* Uniform in [d/2, 3d/2): clients that collided once do not collide again
 * in lock step. */
double jitter(double d);

#endif
