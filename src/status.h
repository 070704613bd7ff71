/* Outcomes shared by every module, and the process exit codes they map to
 * (status_exit_code). amqplock's own failures take sysexits(3) codes, as
 * flock(1) does, so that they never pass for the exit status of a job
 * run under `hold` (0-63, 126, 127, 128+N); busy is 1, or -E's. The exit
 * codes are part of the command-line contract: they moved once, to
 * sysexits; never renumber them again. */
#ifndef AMQPLOCK_STATUS_H
#define AMQPLOCK_STATUS_H

#include <stdarg.h>
#include <stdbool.h>

enum al_status {
	AL_OK = 0,
	AL_BUSY,       /* no free slot, timed out, admin mutex busy: exit 1 (-E) */
	AL_USAGE,      /* bad option, argument, name or number: 64 */
	AL_NOT_FOUND,  /* the semaphore does not exist: 66 */
	AL_LOST,       /* a held slot was lost (the job ended for it): 75 */
	AL_EXISTS,     /* create: already exists: 73 */
	AL_CONNECTION, /* unreachable, TLS, timeout, dropped: 69 */
	AL_ACCESS,     /* login refused or permission denied: 77 */
	AL_BROKER,     /* refused or failed by the broker, alarms: 76 */
	AL_DAMAGED,    /* check: problems left; every slot queue gone: 65 */
	AL_INTERNAL,   /* not the broker's doing: no memory, no fork, a bug: 70 */
};

/* The name scripts see in JSON ("busy", "not_found", "internal", ...). */
const char *status_name(enum al_status st);

/* The process exit code for st. */
int status_exit_code(enum al_status st);

/* Records why the current operation failed and returns st, so that a
 * failing path reads `return fail(AL_BUSY, "...", ...)`. The first failure
 * recorded since the last status_clear() wins: it is the cause, later ones
 * are consequences. */
enum al_status fail(enum al_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
enum al_status vfail(enum al_status st, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* Puts words in front of the failure recorded (which stays the cause),
 * e.g. "lost slot 1 of jobs: " before "the broker has been silent for
 * 3.0 s", and returns st: the one way to say more about a failure than
 * its first words, instead of clearing and recording another. */
enum al_status fail_context(enum al_status st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* strerror(err) for a message, with the remedy where amqplock knows one:
 * EMFILE (too many open files) says to raise `ulimit -n`. */
const char *status_strerror(int err);

/* The message recorded by fail(), or "" if none. */
const char *status_message(void);
void status_clear(void);
/* Clears what a tidying step recorded, but not a failure recorded before
 * it (had: status_message() was not "" then), which stays the cause the
 * caller reports: a cleanup on a failure's path must not erase it. */
void status_clear_unless(bool had);

/* -v: each step on stderr, prefixed "amqplock: ". Off unless set. */
extern int trace_enabled;
void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
