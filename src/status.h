/* Outcomes shared by every module, and the process exit codes they map to
 * (status_exit_code). The exit codes are part of the command-line
 * contract: never renumber. */
#ifndef AMQPLOCK_STATUS_H
#define AMQPLOCK_STATUS_H

#include <stdarg.h>

enum al_status {
	AL_OK = 0,
	AL_BUSY = 1,       /* no free slot, timed out, admin mutex busy */
	AL_USAGE = 2,      /* bad option, argument, name or number */
	AL_NOT_FOUND = 3,  /* the semaphore does not exist */
	AL_LOST = 4,       /* a held slot was lost */
	AL_EXISTS = 5,     /* create: already exists */
	AL_CONNECTION = 6, /* unreachable, TLS, timeout, dropped */
	AL_ACCESS = 7,     /* login refused or permission denied */
	AL_BROKER = 8,     /* any other broker or protocol error */
	AL_DAMAGED = 9,    /* check: problems found and not all repaired */
	/* Not the broker's doing: out of memory, no fork, no signalfd,
	 * stdout unwritable, a bug. Exits 8 like AL_BROKER (exit 8 meant
	 * both before this had a name of its own). */
	AL_INTERNAL = 10,
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

/* The message recorded by fail(), or "" if none. */
const char *status_message(void);
void status_clear(void);

/* -v: each step on stderr, prefixed "amqplock: ". Off unless set. */
extern int trace_enabled;
void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
