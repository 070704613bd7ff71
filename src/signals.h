/* Signals in amqplock's three kinds of process.
 *
 * amqplock: until it holds a slot, a signal that would end it ends it at
 * once (signals_exit_on_interrupt); from then on the signals it handles are
 * blocked and read from a signalfd in its event loop (signals_block).
 * The keeper ignores what is not meant for it (signals_keeper). CMD starts
 * with the dispositions amqplock was started with and an empty mask
 * (signals_reset_for_exec). */
#ifndef AMQPLOCK_SIGNALS_H
#define AMQPLOCK_SIGNALS_H

#include <signal.h>
#include <stdbool.h>

#include "status.h"

/* First thing in main: records which of SIGHUP, SIGINT and SIGQUIT were
 * ignored when amqplock started (by convention, `nohup` and `cmd &` in a
 * script, they stay ignored in amqplock and in CMD), and undoes an
 * inherited ignored SIGCHLD, which would make the kernel reap children
 * behind amqplock's back. */
void signals_init(void);

/* The signals that end a waiting amqplock and that a holding one passes on
 * to CMD: every one that would end a process by default (TERM, INT, HUP,
 * QUIT, USR1, USR2, ALRM, PIPE, XCPU, the real-time ones, ...), less
 * HUP, INT and QUIT when inherited as ignored. */
void signals_terminating(sigset_t *set);

/* Until the slot is held: each terminating signal calls say(sig), which
 * may only use async-signal-safe calls, then _exit(128 + sig). Nothing is
 * held then that needs undoing: the broker drops a connection's queues
 * when its socket closes. */
void signals_exit_on_interrupt(void (*say)(int sig));

/* While a waiting amqplock asks for a lease handed over, until its
 * adoption is sent (the keeper then holds the token): the terminating
 * signals held back (*before: the mask to go back to), so that none ends
 * amqplock with a lease handed to it that nobody would end. Adopted, the
 * slot is held, and signals_block's signalfd takes them (the command does
 * not start); not, signals_release puts the mask back and they end
 * amqplock then. */
void signals_hold_back(sigset_t *before);
void signals_release(const sigset_t *before);
/* Whether a terminating signal held back is waiting. */
bool signals_held_pending(void);

/* While waiting in line: SIGTSTP (Ctrl-Z) only notes that a stop was
 * asked for (signals_stop_asked), and ends a wait in poll(2), so that
 * amqplock can leave the line before it stops (signals_stop_now);
 * signals_note_stops(false) restores the default. A SIGTSTP ignored when
 * asked to note them stays ignored. Only for a process that a stop can
 * stop (super_can_stop). */
void signals_note_stops(bool on);
bool signals_stop_asked(void);
/* Stops amqplock as SIGTSTP would have; returns once it is continued,
 * noting stops again. */
void signals_stop_now(void);

/* From the moment the slot is held: blocks the terminating signals,
 * SIGCHLD and, with job_control, SIGTSTP, SIGTTIN, SIGTTOU and SIGCONT, and
 * returns a signalfd for them in *fd. */
enum al_status signals_block(bool job_control, int *fd);

/* The next signal waiting on fd, or 0. */
int signals_next(int fd);

/* In the keeper: ignores every signal that would end or stop it (what a
 * terminal or a user sends to a whole job, and the rest), so that only
 * SIGKILL ends it. */
void signals_keeper(void);

/* In CMD, just before exec. */
void signals_reset_for_exec(void);

#endif
