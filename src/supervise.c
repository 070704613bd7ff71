/* Supervising CMD, amqplock's side (supervise.h): forking the keeper,
 * ordering it, hearing from it, the terminal. The keeper itself is
 * keeper.c; the process table both judge descendants by is procs.c. */
#include "supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "clock.h"
#include "keeper.h"
#include "procs.h"
#include "supervise_parts.h"

enum al_status super_prepare(struct supervisor *sv, const struct super_opts *o)
{
	pid_t parent = getpid();
	sigset_t all, mask;
	int sv_pair[2];

	memset(sv, 0, sizeof(*sv));
	sv->fd = -1;
	/* Orphans of the keeper (if it is killed) become our children. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv_pair) != 0)
		return fail(AL_INTERNAL, "cannot create a socket pair: %s", status_strerror(errno));
	/* While a claim is answered, amqplock's handlers for INT, TERM and
	 * HUP (exit at once) are still in place: the keeper starts with
	 * every signal blocked, so that none runs them in it before it has
	 * its own dispositions (signals_keeper). */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &mask);
	sv->keeper = fork();
	if (sv->keeper != 0)
		sigprocmask(SIG_SETMASK, &mask, NULL);
	if (sv->keeper < 0) {
		close(sv_pair[0]), close(sv_pair[1]);
		return fail(AL_INTERNAL, "cannot fork: %s", status_strerror(errno));
	}
	if (sv->keeper == 0) {
		close(sv_pair[0]);
		keeper_main(o, sv_pair[1], parent);
	}
	close(sv_pair[1]);
	sv->fd = sv_pair[0];
	return AL_OK;
}

enum al_status super_start(struct supervisor *sv, const struct super_opts *o)
{
	enum al_status st = super_prepare(sv, o);

	if (st == AL_OK)
		super_go(sv, o->give_terminal, o->start_by, o->token);
	return st;
}

int super_fd(const struct supervisor *sv)
{
	return sv->fd;
}

/* The next message from the keeper, as it came: false if none is waiting
 * (or the keeper is gone: then SUPER_VANISHED). */
static bool receive(struct supervisor *sv, int *event, int *value)
{
	struct event_msg m;
	ssize_t n;

	if (sv->fd < 0)
		return false;
	/* A keeper that exits with an order of ours unread makes the kernel
	 * report ECONNRESET once; the events it sent before are still
	 * there to read. */
	do
		n = recv(sv->fd, &m, sizeof(m), MSG_DONTWAIT);
	while (n < 0 && errno == ECONNRESET);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return false;
	if (n != (ssize_t)sizeof(m)) {
		close(sv->fd);
		sv->fd = -1;
		/* Once it has said EMPTY, a keeper that goes is no news. */
		if (sv->empty)
			return false;
		m.event = SUPER_VANISHED, m.value = 0;
	}
	if (m.event == SUPER_STARTED)
		sv->cmd = (pid_t)m.value;
	if (m.event == SUPER_EMPTY)
		sv->empty = true;
	*event = m.event, *value = m.value;
	return true;
}

enum super_event super_next(struct supervisor *sv, int *value)
{
	int event;

	*value = 0;
	if (sv->n_held > 0) {
		event = sv->held[0].event, *value = sv->held[0].value;
		memmove(sv->held, sv->held + 1, --sv->n_held * sizeof(sv->held[0]));
		return (enum super_event)event;
	}
	while (receive(sv, &event, value))
		if (event != FROZEN)
			return (enum super_event)event;
	return SUPER_NOTHING;
}

static void send_order(struct supervisor *sv, const struct order_msg *m)
{
	if (sv->fd >= 0 && send(sv->fd, m, sizeof(*m), MSG_NOSIGNAL) < 0)
		trace("cannot reach the keeper: %s", strerror(errno));
}

void super_done(struct supervisor *sv)
{
	struct order_msg m = {.order = DONE};

	if (sv->fd < 0)
		return;
	/* A keeper already gone cannot be told, and need not be: killed, or
	 * ended with the command when it has no last act (--lease 0). Not
	 * traced: -v said "cannot reach the keeper: Broken pipe" after every
	 * such hold. */
	if (send(sv->fd, &m, sizeof(m), MSG_NOSIGNAL) < 0 && errno != EPIPE && errno != ECONNRESET)
		trace("cannot reach the keeper: %s", strerror(errno));
	close(sv->fd);
	sv->fd = -1;
}

static void order(struct supervisor *sv, enum order what, int sig)
{
	struct order_msg m = {what, sig, 0, 0};

	send_order(sv, &m);
}

void super_go(struct supervisor *sv, bool give_terminal, double start_by, uint64_t token)
{
	struct order_msg m = {GO, give_terminal, start_by, token};

	send_order(sv, &m);
}

void super_abandon(struct supervisor *sv)
{
	pid_t pid;

	if (sv->fd < 0)
		return;
	super_done(sv);
	/* It exits at once: reaped here, a long wait leaves no zombies. */
	do
		pid = waitpid(sv->keeper, NULL, 0);
	while (pid < 0 && errno == EINTR);
}

void super_signal_group(struct supervisor *sv, int sig)
{
	/* Straight from here: the group is CMD's. */
	if (sv->cmd > 0)
		kill(-sv->cmd, sig);
	else
		order(sv, SIGNAL_GROUP, sig);
}

void super_signal_all(struct supervisor *sv, int sig)
{
	order(sv, SIGNAL_ALL, sig);
}

void super_signal_all_awake(struct supervisor *sv, int sig)
{
	order(sv, SIGNAL_ALL_AWAKE, sig);
}

void super_stop_all(struct supervisor *sv, double wait)
{
	double deadline = now_seconds() + wait;
	struct pollfd fd = {sv->fd, POLLIN, 0};
	int event, value;

	order(sv, STOP_ALL, 0);
	while (sv->fd >= 0 && now_seconds() < deadline) {
		if (!receive(sv, &event, &value)) {
			if (poll(&fd, 1, poll_ms(deadline - now_seconds())) < 0 && errno != EINTR)
				return;
			continue;
		}
		if (event == FROZEN)
			return;
		/* Anything else waits its turn in super_next. */
		if (sv->n_held < SUPER_HELD_EVENTS) {
			sv->held[sv->n_held].event = event;
			sv->held[sv->n_held++].value = value;
		}
		if (event == SUPER_VANISHED || event == SUPER_EMPTY)
			return;
	}
	trace("the keeper did not confirm the stop within %g s", wait);
}

void super_continue_all(struct supervisor *sv)
{
	order(sv, CONTINUE_ALL, 0);
}

void super_kill_at(struct supervisor *sv, double when)
{
	struct order_msg m = {KILL_AT, 0, when, 0};

	/* Its clock checks run with the watch for a stopped amqplock, so the
	 * kill comes up to its WATCH_INTERVAL_MS late: the lease's margin is
	 * far larger. */
	send_order(sv, &m);
}

/* sig to every descendant of root; the number signalled. */
static size_t signal_descendants(pid_t root, int sig)
{
	struct procs d = {0};
	size_t i, n = 0;

	if (procs_descendants(root, &d))
		for (i = 0; i < d.len; i++)
			n += kill(d.p[i].pid, sig) == 0;
	free(d.p);
	return n;
}

bool super_kill_orphans(void)
{
	int wstatus;

	signal_descendants(getpid(), SIGKILL);
	while (waitpid(-1, &wstatus, WNOHANG) > 0)
		;
	return waitpid(-1, &wstatus, WNOHANG) < 0 && errno == ECHILD;
}

void super_process_name(pid_t pid, char *buf, size_t size)
{
	char path[64];
	ssize_t n = -1;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, size - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (!buf[0])
		snprintf(buf, size, "?");
}

/* How many of the remaining processes super_remaining names. */
#define REMAINING_NAMED 3

void super_remaining(const struct supervisor *sv, char *buf, size_t size)
{
	struct procs d = {0};
	char comm[32];
	size_t i, used;

	buf[0] = '\0';
	if (sv->keeper <= 0 || !procs_descendants(sv->keeper, &d) || d.len == 0) {
		free(d.p);
		return;
	}
	used = (size_t)snprintf(buf, size, "%zu remaining process%s:", d.len,
				d.len == 1 ? "" : "es");
	for (i = 0; i < d.len && i < REMAINING_NAMED && used < size; i++) {
		super_process_name(d.p[i].pid, comm, sizeof(comm));
		used += (size_t)snprintf(buf + used, size - used, "%s %s (pid %d)", i ? "," : "",
					 comm, (int)d.p[i].pid);
	}
	if (d.len > REMAINING_NAMED && used < size)
		snprintf(buf + used, size - used, ", ...");
	free(d.p);
}

int super_open_terminal(void)
{
	return open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
}

bool super_in_foreground(int terminal)
{
	return terminal >= 0 && tcgetpgrp(terminal) == getpgrp();
}

void super_give_terminal(int terminal, pid_t pgrp)
{
	/* SIGTTOU is blocked while CMD runs, so this works from the
	 * background too. */
	if (terminal >= 0 && tcsetpgrp(terminal, pgrp) != 0)
		trace("cannot hand the terminal to process group %d: %s", (int)pgrp,
		      strerror(errno));
}

/* Whether pid's parent is in another process group of our session. */
static bool parent_outside(pid_t pid)
{
	struct proc p;

	return procs_read(pid, &p) && p.ppid > 0 && getpgid(p.ppid) != getpgrp() &&
	       getsid(p.ppid) == getsid(0);
}

bool super_can_stop(void)
{
	return parent_outside(getpid()) || parent_outside(getpgrp());
}

bool super_stop_self(int sig)
{
	sigset_t one, pending;

	sigemptyset(&one);
	sigaddset(&one, sig);
	if (sig != SIGSTOP)
		signal(sig, SIG_DFL);
	kill(getpid(), sig);
	/* The stop happens here, if the kernel lets it. */
	sigprocmask(SIG_UNBLOCK, &one, NULL);
	sigprocmask(SIG_BLOCK, &one, NULL);
	/* A stop ends with SIGCONT, which is blocked and so stays pending. */
	return sigpending(&pending) == 0 && sigismember(&pending, SIGCONT);
}
