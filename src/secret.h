/* Keeping the broker password out of what other processes can read of
 * amqplock (and of its keeper, a fork of it). */
#ifndef AMQPLOCK_SECRET_H
#define AMQPLOCK_SECRET_H

/* First thing in main, before anything reads the environment. Makes
 * amqplock non-dumpable, so that other processes of its user (CMD among
 * them) cannot read its /proc/PID/environ or mem nor trace it; then moves
 * AMQPLOCK_URL and AMQP_URL to private copies and wipes their values in
 * the original environment block. getenv gives main the full texts as
 * before. */
void secret_hide(void);

/* Replaces by '*', in place, what could be the password of each URL of a
 * space-separated list. For a --url value, which getopt_long hands over
 * as a pointer into the original argument strings (what /proc/PID/cmdline
 * and ps show to every user): call it once the URL has been copied. */
void secret_mask_urls(char *list);

#endif
