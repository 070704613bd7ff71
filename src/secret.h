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

/* Right after secret_hide: a copy of argv (argc strings and a NULL) for
 * amqplock to work on, in one block to free() when done. The kernel goes
 * on showing the original strings (/proc/PID/cmdline, ps): no pointer of
 * amqplock's leads into them, so that they can be changed
 * (secret_mask_urls, secret_show_as). NULL if memory ran out. */
char **secret_copy_args(int argc, char **argv);

/* Replaces by '*', in place, what could be the password of each URL of a
 * space-separated list, and does the same to that text where the original
 * argument strings show it (a --url value). */
void secret_mask_urls(char *list);

/* What ps shows of this process from now on: its command line and its
 * name (comm) become `name` (at most 15 bytes), the original argument
 * strings overwritten. For the keeper, which must not answer to
 * `pkill amqplock` (keeper.c). */
void secret_show_as(const char *name);

#endif
