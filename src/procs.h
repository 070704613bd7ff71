/* The process table as /proc shows it: a process's state, its parent, the
 * descendants of a process. What amqplock's side of supervision and the
 * keeper judge a job by; it signals nothing and knows nothing of either. */
#ifndef AMQPLOCK_PROCS_H
#define AMQPLOCK_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A process as /proc shows it. Its state is the process's, not only its
 * leader's: a process whose main thread has exited (pthread_exit) shows
 * its leader as a zombie while its other threads run on, and is alive
 * ('R' here) until the last of them has exited, and stopped ('T') only
 * when every one of them is. */
struct proc {
	pid_t pid, ppid;
	char state;
};

/* A list of them; free(p) when done. */
struct procs {
	struct proc *p;
	size_t len, cap;
};

/* Whether a state is that of a process that has ended (a zombie, or dead). */
bool procs_gone(char state);
/* Whether a state is that of a stopped process (by a signal, or traced). */
bool procs_stopped(char state);

/* The state of pid's threads but its leader: 'R' if one of them is alive
 * and not stopped, 'T' if all that are alive are stopped, 'Z' if none is
 * alive (or there is none). */
char procs_other_threads(pid_t pid);

/* pid as /proc shows it now; false if it is not there. */
bool procs_read(pid_t pid, struct proc *out);

/* The live descendants of root (root excluded), by one pass over /proc;
 * false if /proc cannot be read. */
bool procs_descendants(pid_t root, struct procs *out);

#endif
