/* Supervising CMD: everything about the command that hold runs, and
 * nothing about the broker.
 *
 * CMD runs as the child of a small process of its own, the keeper, which
 * is a subreaper: whatever CMD starts (a setsid daemon, a `timeout` in a
 * group of its own, a double fork) stays its descendant. The keeper tells
 * amqplock when CMD stops, when it exits, and when the last descendant is
 * gone; on request it signals, stops or continues every descendant. If
 * amqplock dies, even by SIGKILL, the keeper kills every descendant before
 * it lets go of the broker connection it inherited, so the slot is never
 * free while any of them runs. If amqplock is stopped by a signal it
 * cannot catch (SIGSTOP), the keeper stops the descendants too. A
 * descendant the keeper may not signal (another user's: a setuid program)
 * is reported, and while amqplock cannot keep the slot itself (dead or
 * stopped) the keeper keeps it for as long as such a process lives.
 *
 * The keeper shows in ps as KEEPER_NAME, without "amqplock" in it:
 * `pkill amqplock` and `killall amqplock`, also with -f, stop or kill
 * amqplock alone, and the keeper, which watches it, then stops or ends
 * the job.
 *
 * The policy (when to stop, when to continue, what a lost slot means)
 * stays with the caller. */
#ifndef AMQPLOCK_SUPERVISE_H
#define AMQPLOCK_SUPERVISE_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "keeper.h"
#include "status.h"

/* Events read while waiting for something else, returned first. */
#define SUPER_HELD_EVENTS 8

struct supervisor {
	pid_t keeper;
	pid_t cmd;  /* 0 until SUPER_STARTED */
	int fd;     /* to the keeper; -1 once it is gone or told super_done */
	bool empty; /* the keeper said SUPER_EMPTY */
	struct {
		int event, value;
	} held[SUPER_HELD_EVENTS];
	size_t n_held;
};

/* Forks the keeper, which forks and runs CMD. amqplock must be a subreaper
 * itself (it adopts whatever the keeper leaves if the keeper is killed).
 * The signals amqplock blocks stay blocked in the keeper. */
enum al_status super_start(struct supervisor *sv, const struct super_opts *o);

/* super_start in two steps, so that the fork costs nothing on the way to
 * CMD: super_prepare forks the keeper, which readies itself and waits;
 * super_go has it run CMD (give_terminal as in super_opts, decided now;
 * token, if not 0, in CMD's environment as AMQPLOCK_TOKEN, a fencing
 * token drawn once the slot was ours),
 * unless start_by (boot_seconds(); 0: none) has passed by the time it
 * reads the order (then SUPER_DEADLINE with value 1: amqplock stopped
 * between its decision and the keeper's must not start a command past
 * its slot's time); super_abandon has it exit at once, and reaps it. A
 * keeper whose amqplock dies before either does its last act
 * (o->last_act). */
enum al_status super_prepare(struct supervisor *sv, const struct super_opts *o);
void super_go(struct supervisor *sv, bool give_terminal, double start_by, uint64_t token);
void super_abandon(struct supervisor *sv);

/* amqplock is done with what the keeper guards (the slot is released,
 * or given up): the keeper, once every descendant is gone, exits without
 * its last act. Closes the descriptor. */
void super_done(struct supervisor *sv);

/* The descriptor to poll for events. */
int super_fd(const struct supervisor *sv);

/* The next event, or SUPER_NOTHING if none is waiting; *value as above. */
enum super_event super_next(struct supervisor *sv, int *value);

/* sig to CMD's process group, as a terminal would send it. */
void super_signal_group(struct supervisor *sv, int sig);
/* sig to every descendant, whatever group or session it is in. */
void super_signal_all(struct supervisor *sv, int sig);
/* sig to every descendant, then SIGCONT to those that are stopped, as a
 * shell's kill does to a stopped job: a signal meant to end the job
 * reaches what Ctrl-Z stopped. Not for a job amqplock has stopped itself
 * (super_stop_all): that goes on only after its slot was checked. */
void super_signal_all_awake(struct supervisor *sv, int sig);
/* SIGSTOP to every descendant that is not stopped already; returns once
 * the keeper says they all are, or after `wait` seconds. */
void super_stop_all(struct supervisor *sv, double wait);
/* SIGCONT to what super_stop_all (or the keeper, while amqplock was
 * stopped) stopped, and to CMD's process group. */
void super_continue_all(struct supervisor *sv);

/* A dead man's switch: the keeper sends SIGKILL to every descendant at
 * `when` (boot_seconds()) unless it is moved again first; 0: never. So a
 * command stops by the deadline of its lease even if amqplock is stuck. */
void super_kill_at(struct supervisor *sv, double when);

/* After SUPER_VANISHED: SIGKILL to every remaining descendant of amqplock
 * (the keeper's orphans); true once none is left. */
bool super_kill_orphans(void);

/* What is left of the job once CMD has exited, for people: "1 remaining
 * process: sleep (pid 123)", "3 remaining processes: ...", at most a few
 * named; "" if nothing is left. */
void super_remaining(const struct supervisor *sv, char *buf, size_t size);

/* The name of process pid (/proc/PID/comm), or "?". */
void super_process_name(pid_t pid, char *buf, size_t size);

/* amqplock's controlling terminal, opened (-1: none), for the calls below. */
int super_open_terminal(void);

/* The terminal: fd if it is amqplock's controlling terminal and amqplock's
 * process group is its foreground group, else -1. */
bool super_in_foreground(int terminal);
/* Makes pgrp the terminal's foreground group, from the background too. */
void super_give_terminal(int terminal, pid_t pgrp);

/* Whether SIGTSTP would stop amqplock: the kernel discards it in an
 * orphaned process group, one where no member's parent is in another
 * group of the session (a job whose shell is gone, a `setsid` command).
 * Judged by our parent and the group's leader, as for a shell's job. */
bool super_can_stop(void);

/* Stops amqplock itself with sig (SIGTSTP, SIGTTIN, SIGTTOU or SIGSTOP),
 * as the shell expects of a job whose command stopped; returns once it is
 * continued. False if the kernel did not stop it (an orphaned process
 * group ignores SIGTSTP, SIGTTIN and SIGTTOU). */
bool super_stop_self(int sig);

#endif
