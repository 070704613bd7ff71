/* The keeper: the process between amqplock and CMD (amqp-keeper in ps).
 * It starts CMD when told, watches amqplock and every descendant of CMD,
 * stops, continues, signals and kills them as amqplock orders, and when
 * amqplock dies first ends the job before the slot can go (and keeps or
 * ends the lease through the hooks it was given). Knows no AMQP.
 *
 * The keeper, and CMD's process until its exec, end by _exit: each is a
 * forked process whose whole life is this file's, with no command above
 * to return to, and amqplock's stdio buffers and atexit work are not
 * theirs to flush. */
#include "keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "clock.h"
#include "procs.h"
#include "secret.h"
#include "signals.h"
#include "supervise_parts.h"

/* How often the keeper looks whether amqplock has been stopped. amqplock
 * keeps its slot through a stop this short (the broker waits at least
 * 2.5 heartbeats), so CMD never runs unsupervised for long. */
#define WATCH_INTERVAL_MS 200

/* While killing: how often to look again for descendants. */
#define KILL_INTERVAL_MS 20

/* A list of pids, for the keeper's records. */
struct pids {
	pid_t *pid;
	size_t len, cap;
};

static bool pids_has(const struct pids *l, pid_t pid)
{
	size_t i;

	for (i = 0; i < l->len; i++)
		if (l->pid[i] == pid)
			return true;
	return false;
}

static void pids_add(struct pids *l, pid_t pid)
{
	if (l->len == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 32;
		pid_t *grown = realloc(l->pid, cap * sizeof(*grown));

		if (!grown)
			return;
		l->pid = grown;
		l->cap = cap;
	}
	l->pid[l->len++] = pid;
}

struct keeper {
	int ctl;      /* socket to amqplock */
	int sig_fd;   /* SIGCHLD */
	pid_t parent; /* amqplock */
	pid_t cmd;
	bool cmd_done;
	bool killing;        /* SIGKILL to every descendant until none is left */
	bool parent_stopped; /* amqplock shows stopped (the last look) */
	bool parent_frozen;  /* the descendants were stopped because amqplock is */
	bool orphaned;       /* amqplock is gone */
	bool empty;          /* no descendant is left */
	bool done;           /* amqplock said DONE: the last act is not needed */
	double kill_at;      /* boot_seconds(); 0: none */
	double start_by;     /* GO's, boot_seconds(); 0: none */
	double next_hold_on; /* now_seconds() */
	const struct super_opts *o;
	/* What the keeper stopped, to be continued again (and only that: a
	 * job stopped inside an interactive CMD stays stopped). */
	struct pids stopped;
	/* What the kernel would not let the keeper signal (EPERM). */
	struct pids refused;
};

static void tell(int fd, enum super_event ev, int value)
{
	struct event_msg m = {ev, value};

	/* amqplock may be gone: then nobody listens, which is fine. */
	if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) < 0)
		return;
}

/* sig to pid. A process the kernel will not let the keeper signal (EPERM:
 * another user's, a setuid program that stayed root) is recorded, and
 * amqplock told of it, once. */
static bool send_signal(struct keeper *k, pid_t pid, int sig)
{
	if (kill(pid, sig) == 0)
		return true;
	if (errno == EPERM && !pids_has(&k->refused, pid)) {
		pids_add(&k->refused, pid);
		tell(k->ctl, SUPER_NOT_PERMITTED, (int)pid);
	}
	return false;
}

/* sig to every descendant; with awake, SIGCONT too to those that show
 * stopped, so that sig takes effect. The number sig reached. */
static size_t signal_all(struct keeper *k, int sig, bool awake)
{
	struct procs d = {0};
	size_t i, n = 0;

	if (procs_descendants(getpid(), &d))
		for (i = 0; i < d.len; i++) {
			n += send_signal(k, d.p[i].pid, sig);
			if (awake && procs_stopped(d.p[i].state))
				send_signal(k, d.p[i].pid, SIGCONT);
		}
	free(d.p);
	return n;
}

/* Whether a process the keeper may not signal still runs: those that
 * have ended are forgotten. */
static bool refused_running(struct keeper *k)
{
	struct proc p;
	size_t i, kept = 0;

	for (i = 0; i < k->refused.len; i++)
		if (procs_read(k->refused.pid[i], &p) && !procs_gone(p.state))
			k->refused.pid[kept++] = k->refused.pid[i];
	k->refused.len = kept;
	return kept > 0;
}

/* Stops every running descendant, pass after pass until a pass finds none
 * left running: a child forked while a pass ran is caught by the next. A
 * process that forks without end could outrun this; the bound keeps the
 * keeper responsive, and such a job is then stopped but for its newest
 * children, which a following pass (or the SIGKILL of a lost slot) gets. */
#define STOP_PASSES 10

/* kill() only queues SIGSTOP: a process stops once it is next scheduled,
 * which on a busy machine can be after amqplock has stopped itself. The
 * job must be seen stopped first, so wait (boundedly: one stuck in the
 * kernel stops when it leaves) until every process stopped shows it. */
#define STOP_CONFIRM_WAIT 0.5

/* While amqplock cannot keep the slot and part of the job runs on that
 * the keeper may not signal: how often the keeper keeps the slot itself. */
#define HOLD_ON_INTERVAL 1.0

static bool shows_stopped(pid_t pid)
{
	struct proc p;

	/* Gone, a zombie or stopped: none of them runs. A stopped leader
	 * whose other threads have not stopped yet still runs. */
	return !procs_read(pid, &p) || procs_gone(p.state) ||
	       (procs_stopped(p.state) && procs_other_threads(pid) != 'R');
}

static void await_stopped(const struct keeper *k)
{
	double deadline = now_seconds() + STOP_CONFIRM_WAIT;
	size_t i = 0;

	while (i < k->stopped.len && now_seconds() < deadline) {
		if (shows_stopped(k->stopped.pid[i]))
			i++;
		else
			poll(NULL, 0, 1);
	}
}

/* SIGSTOP to every descendant that does not show stopped; the number of
 * those the keeper had not stopped before. (One stopped a moment ago may
 * not show 'T' yet: stopping it again does no harm.) */
static size_t stop_running(struct keeper *k)
{
	struct procs d = {0};
	size_t i, stopped = 0;

	if (procs_descendants(getpid(), &d))
		for (i = 0; i < d.len; i++) {
			if (procs_stopped(d.p[i].state) || !send_signal(k, d.p[i].pid, SIGSTOP) ||
			    pids_has(&k->stopped, d.p[i].pid))
				continue;
			pids_add(&k->stopped, d.p[i].pid);
			stopped++;
		}
	free(d.p);
	return stopped;
}

static void stop_all(struct keeper *k)
{
	int pass;

	for (pass = 0; pass < STOP_PASSES && stop_running(k) > 0; pass++)
		;
	await_stopped(k);
}

static void continue_all(struct keeper *k)
{
	size_t i;

	for (i = 0; i < k->stopped.len; i++)
		send_signal(k, k->stopped.pid[i], SIGCONT);
	k->stopped.len = 0;
	k->parent_frozen = false;
	if (k->cmd > 0)
		kill(-k->cmd, SIGCONT);
}

static void obey(struct keeper *k, const struct order_msg *m)
{
	switch (m->order) {
	case SIGNAL_GROUP:
		if (k->cmd > 0)
			kill(-k->cmd, m->sig);
		break;
	case SIGNAL_ALL:
	case SIGNAL_ALL_AWAKE:
		if (m->sig == SIGKILL)
			k->killing = true;
		signal_all(k, m->sig, m->order == SIGNAL_ALL_AWAKE);
		break;
	case STOP_ALL:
		stop_all(k);
		tell(k->ctl, FROZEN, 0);
		break;
	case CONTINUE_ALL:
		continue_all(k);
		break;
	case KILL_AT:
		k->kill_at = m->when;
		break;
	case DONE:
		k->done = true;
		break;
	}
}

/* A stopped amqplock cannot keep its slot (it answers no heartbeat), so
 * nothing it supervises may run meanwhile. When it is continued it checks
 * the slot first, then asks for CONTINUE_ALL. */
static void watch_parent(struct keeper *k)
{
	struct proc p;

	k->parent_stopped = procs_read(k->parent, &p) && procs_stopped(p.state);
	if (!k->parent_stopped)
		return;
	/* Stopped again, every time: what someone else continued meanwhile
	 * (`pkill -CONT`) must not run while amqplock cannot check. */
	if (k->parent_frozen) {
		stop_running(k);
		return;
	}
	stop_all(k);
	k->parent_frozen = true;
}

/* amqplock cannot keep the slot (it is gone, or stopped) while part of
 * the job that may not be signalled runs on: the keeper keeps the slot
 * (o->hold_on renews the lease) until that part has ended. */
static void hold_on(struct keeper *k)
{
	if (!k->o->hold_on || k->empty || !(k->orphaned || k->parent_stopped) ||
	    now_seconds() < k->next_hold_on || !refused_running(k))
		return;
	k->o->hold_on(k->o->arg);
	k->next_hold_on = now_seconds() + HOLD_ON_INTERVAL;
}

static int exit_status(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return 1;
}

/* A stop that stops the job as a shell sees it: CMD's own, or, once CMD
 * has exited, that of a process left in its group (a `sleep &` that
 * Ctrl-Z stopped: the keeper adopted it). */
static bool job_stop(const struct keeper *k, pid_t pid)
{
	return pid == k->cmd || (k->cmd_done && getpgid(pid) == k->cmd);
}

/* Reaps every child that changed state; false once none is left. */
static bool reap(struct keeper *k)
{
	int wstatus;
	pid_t pid;

	while ((pid = waitpid(-1, &wstatus, WNOHANG | WUNTRACED | WCONTINUED)) > 0) {
		if (WIFSTOPPED(wstatus)) {
			/* A stop the keeper made itself is no news to
			 * amqplock, which asked for it or is stopped itself;
			 * reporting it would stop amqplock again on its way
			 * out of a stop. */
			if (!pids_has(&k->stopped, pid) && job_stop(k, pid))
				tell(k->ctl, SUPER_STOPPED, WSTOPSIG(wstatus));
		} else if (pid == k->cmd && !WIFCONTINUED(wstatus)) {
			k->cmd_done = true;
			tell(k->ctl, SUPER_EXITED, exit_status(wstatus));
		}
	}
	return !(pid < 0 && errno == ECHILD);
}

static void drain(int fd)
{
	struct signalfd_siginfo si;

	while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
}

static _Noreturn void keeper_loop(struct keeper *k)
{
	struct pollfd fds[2] = {{k->ctl, POLLIN, 0}, {k->sig_fd, POLLIN, 0}};
	struct order_msg m;
	bool hurry;
	ssize_t n;

	for (;;) {
		if (!k->empty && !reap(k)) {
			tell(k->ctl, SUPER_EMPTY, 0);
			k->empty = true;
		}
		/* With a last act, the keeper outlives the command until
		 * amqplock is done with the slot (super_done): amqplock
		 * killed between the command's end and its release leaves
		 * the lease to the keeper, not to run out. */
		if (k->empty && (k->done || k->orphaned || !k->o->last_act)) {
			if (k->orphaned && !k->done && k->o->last_act)
				k->o->last_act(k->o->arg);
			_exit(0);
		}
		if (!k->empty && k->kill_at > 0 && boot_seconds() >= k->kill_at && !k->killing) {
			/* amqplock renewed nothing in time and did not act. */
			k->killing = true;
			tell(k->ctl, SUPER_DEADLINE, 0);
		}
		/* While killing, look again soon, unless only what may not
		 * be signalled is left. */
		hurry = k->killing && signal_all(k, SIGKILL, false) > 0;
		hold_on(k);
		if (poll(fds, 2, hurry ? KILL_INTERVAL_MS : WATCH_INTERVAL_MS) < 0 &&
		    errno != EINTR)
			k->killing = true;
		if (fds[1].revents)
			drain(k->sig_fd);
		if (fds[0].revents) {
			n = recv(k->ctl, &m, sizeof(m), MSG_DONTWAIT);
			if (n == (ssize_t)sizeof(m))
				obey(k, &m);
			else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
				/* amqplock is gone: no descendant may outlive it. */
				k->killing = k->orphaned = true;
				fds[0].fd = -1;
			}
		}
		if (!k->killing)
			watch_parent(k);
	}
}

/* In CMD's process: its own process group, death with the keeper, the
 * terminal if it is to have it, dispositions and mask as amqplock got
 * them, then exec. On failure errno goes up err_fd. */
static _Noreturn void cmd_main(const struct super_opts *o, bool give_terminal, pid_t keeper,
			       int err_fd)
{
	int e;

	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != keeper)
		_exit(127);
	/* SIGTTOU is still blocked: taking the terminal from the background
	 * is allowed then. */
	if (give_terminal && o->terminal >= 0)
		tcsetpgrp(o->terminal, getpid());
	signals_reset_for_exec();
	execvp(o->argv[0], o->argv);
	e = errno;
	if (write(err_fd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(e == ENOENT ? 127 : 126);
}

/* Closes every descriptor but those in keep[] (ascending, n of them). */
static void close_all_but(const int *keep, size_t n)
{
	unsigned from = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		if (keep[i] < 0)
			continue;
		if ((unsigned)keep[i] > from)
			close_range(from, (unsigned)keep[i] - 1, 0);
		from = (unsigned)keep[i] + 1;
	}
	close_range(from, ~0u, 0);
}

static int sort_ints(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Holding stdout would keep a $(amqplock hold ...) reader waiting. */
static void drop_stdio(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (null >= 0) {
		dup2(null, 0), dup2(null, 1), dup2(null, 2);
		close(null);
	}
}

/* CMD's fencing token, in the environment it inherits from us. */
static void set_token(uint64_t token)
{
	char text[24];

	snprintf(text, sizeof(text), "%" PRIu64, token);
	setenv("AMQPLOCK_TOKEN", text, 1);
}

/* Until GO, CMD does not exist. DONE: amqplock has no use for us (its
 * claim failed, or it is done with a slot whose command never started).
 * amqplock gone: its claim may have made the slot ours, so the last act is
 * done (it ends the lease only if it is ours). give_terminal NULL: no GO
 * is awaited, only one of those two. Other orders find nothing to act on. */
static void await_go(struct keeper *k, bool *give_terminal)
{
	struct order_msg m;
	ssize_t n;

	for (;;) {
		n = recv(k->ctl, &m, sizeof(m), 0);
		if (n == (ssize_t)sizeof(m) && m.order == GO && give_terminal) {
			*give_terminal = m.sig != 0;
			k->start_by = m.when;
			if (m.token)
				set_token(m.token);
			return;
		}
		if (n == (ssize_t)sizeof(m) && m.order == DONE)
			_exit(0);
		if (n == 0 || (n < 0 && errno != EINTR)) {
			drop_stdio();
			if (k->o->last_act)
				k->o->last_act(k->o->arg);
			_exit(0);
		}
	}
}

/* CMD cannot be started (err: no descriptor, no process): amqplock's
 * failure, not CMD's, and nothing of the job is left. As after a
 * command's end, the keeper stays until amqplock is done with the slot,
 * or does the last act if amqplock dies first. */
static _Noreturn void cannot_start(struct keeper *k, int err)
{
	tell(k->ctl, SUPER_NO_START, err);
	tell(k->ctl, SUPER_EMPTY, 0);
	await_go(k, NULL);
	_exit(0);
}

/* Forks CMD and waits until it has exec'd (or failed to). */
static void start_cmd(struct keeper *k, bool give_terminal)
{
	pid_t keeper = getpid();
	int p[2], e = 0;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) != 0)
		cannot_start(k, errno);
	if ((k->cmd = fork()) < 0) {
		e = errno;
		close(p[0]), close(p[1]);
		cannot_start(k, e);
	}
	if (k->cmd == 0)
		cmd_main(k->o, give_terminal, keeper, p[1]);
	/* Both sides set the group, so it exists before anyone signals it. */
	setpgid(k->cmd, k->cmd);
	close(p[1]);
	do
		n = read(p[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	tell(k->ctl, SUPER_STARTED, (int)k->cmd);
	if (n == (ssize_t)sizeof(e))
		tell(k->ctl, SUPER_NO_EXEC, e);
}

_Noreturn void keeper_main(const struct super_opts *o, int ctl, pid_t parent)
{
	struct keeper k = {.ctl = ctl, .parent = parent, .o = o};
	bool give_terminal = false;
	sigset_t chld;
	int keep[3], err;

	/* Not "amqplock": `pkill amqplock` must leave the keeper to end or
	 * stop the job. */
	secret_show_as(KEEPER_NAME);
	/* A group of its own: `kill -9 -<job>` must not take it with amqplock. */
	setpgid(0, 0);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signals_keeper();
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	k.sig_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	err = k.sig_fd < 0 ? errno : 0;
	/* Even so: amqplock dead before its word, the last act is due. */
	await_go(&k, &give_terminal);
	if (err)
		cannot_start(&k, err);
	/* amqplock decided in time, but may have been stopped before its
	 * word came: a command started now could outlive its slot. */
	if (k.start_by > 0 && boot_seconds() >= k.start_by)
		tell(ctl, SUPER_DEADLINE, 1);
	else
		start_cmd(&k, give_terminal);
	/* CMD has what it inherits; the keeper keeps only its own. */
	drop_stdio();
	keep[0] = ctl, keep[1] = k.sig_fd, keep[2] = o->hold_fd;
	qsort(keep, 3, sizeof(keep[0]), sort_ints);
	close_all_but(keep, 3);
	keeper_loop(&k);
}
