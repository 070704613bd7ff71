#include "hold.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"

/* A held slot is re-verified this often (a passive declare of its slot
 * queue: one small round trip), so a remove is noticed within a second. */
#define VERIFY_INTERVAL 1.0
/* While the group of a lost command winds down, look this often whether
 * it is gone. */
#define GROUP_POLL_INTERVAL 0.02
/* How long after SIGKILL to wait for the last of the group. */
#define KILL_WAIT 2.0
/* Waiting for a slot: first and longest pause between attempts. The
 * longest pause, jittered up by half, stays under a second, so a freed
 * slot is taken within a second. */
#define FIRST_RETRY   0.01
#define LONGEST_RETRY 0.5

/* The signals amqplock takes over; all but SIGCHLD reach the command. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_FORWARDED (sizeof(forwarded) / sizeof(forwarded[0]))

static int signal_fd = -1;
static sigset_t original_mask;
static int guard_fd = -1; /* write end of the watchdog's pipe */

enum al_status hold_signals_init(void)
{
	sigset_t set;
	size_t i;

	sigemptyset(&set);
	for (i = 0; i < N_FORWARDED; i++)
		sigaddset(&set, forwarded[i]);
	sigaddset(&set, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &set, &original_mask) != 0)
		return fail(AL_BROKER, "cannot block signals: %s", strerror(errno));
	signal_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (signal_fd < 0)
		return fail(AL_BROKER, "cannot create a signalfd: %s", strerror(errno));
	return AL_OK;
}

/* The next pending signal, or 0. */
static int take_signal(void)
{
	struct signalfd_siginfo si;

	if (read(signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		return (int)si.ssi_signo;
	return 0;
}

/* Sleeps until `until` (monotonic seconds), a signal (returned) or data
 * on the broker socket (*readable set; may be NULL when c is NULL). */
static int wait_event(struct conn *c, double until, bool *readable)
{
	struct pollfd fds[2] = {{signal_fd, POLLIN, 0}, {-1, POLLIN, 0}};
	double left = until - now_seconds();
	int sig, timeout_ms;

	if (readable)
		*readable = false;
	if (c)
		fds[1].fd = conn_fd(c);
	if ((sig = take_signal()) != 0)
		return sig;
	timeout_ms = poll_ms(left);
	if (poll(fds, 2, timeout_ms) > 0) {
		if (fds[1].revents && readable)
			*readable = true;
		if (fds[0].revents)
			return take_signal();
	}
	return 0;
}

enum al_status hold_take(struct sem *s, const struct hold_opts *o, unsigned *slot, unsigned *max,
			 int *signo)
{
	double start = now_seconds(), deadline = o->wait < 0 ? INFINITY : start + o->wait;
	double delay = FIRST_RETRY, until;
	enum al_status st;
	bool readable, watching = false;
	int sig;

	*signo = 0;
	for (;;) {
		status_clear();
		/* Cleared before the attempt: a release announced during it
		 * cuts the next pause short. */
		s->conn->notified = false;
		st = sem_acquire(s, slot, max);
		if (st != AL_BUSY || o->nonblock || now_seconds() >= deadline)
			break;
		/* Waiting: "all slots are held" is not a failure (yet), and must
		 * not hide the cause of one while waiting. */
		status_clear();
		/* A waiter hears of clean releases at once. Holders that die
		 * say nothing, so polling with back-off goes on as well. A
		 * release between the attempt above and the subscription
		 * is caught by trying again straight after it. */
		if (!watching) {
			watching = true;
			if (sem_watch_releases(s) != AL_OK && s->conn->dead)
				return AL_CONNECTION;
			if (s->conn->notify_channel)
				continue;
		}
		until = sooner(now_seconds() + jitter(delay), deadline);
		do {
			sig = wait_event(s->conn, until, &readable);
			if (sig && sig != SIGCHLD) {
				*signo = sig;
				status_clear();
				return fail(AL_BUSY,
					    "interrupted by SIG%s while waiting for a slot of %s",
					    sigabbrev_np(sig), s->label);
			}
			/* Heartbeats and release notifications; taking
			 * them keeps the connection alive. */
			if (readable && (st = conn_drain(s->conn)) != AL_OK)
				return st;
		} while (!s->conn->notified && now_seconds() < until);
		if (s->conn->notified)
			trace("a slot of %s was released; trying again", s->label);
		delay = sooner(delay * 2, LONGEST_RETRY);
	}
	/* A holder has no use for other clients' releases. */
	conn_unsubscribe(s->conn);
	if (st == AL_BUSY && o->wait > 0 && !o->nonblock) {
		status_clear();
		fail(AL_BUSY, "timed out after %g s waiting for a slot of %s (all %u held)",
		     o->wait, s->label, *max);
	}
	return st;
}

/* The watchdog: a process of its own that learns the command's process
 * group, then waits. If amqplock ends without saying goodbye (killed, even
 * by SIGKILL), the pipe reads end-of-file and the watchdog kills the whole
 * group, so no command runs on without the slot. */
static void guard_main(int fd)
{
	pid_t group = 0;
	char bye = 0;
	size_t i;

	prctl(PR_SET_NAME, "amqplock-guard");
	for (i = 0; i < N_FORWARDED; i++)
		signal(forwarded[i], SIG_IGN);
	sigprocmask(SIG_SETMASK, &original_mask, NULL);
	if (read(fd, &group, sizeof(group)) != (ssize_t)sizeof(group))
		_exit(0); /* amqplock ended before starting a command */
	if (read(fd, &bye, 1) != 1 && group > 0)
		kill(-group, SIGKILL);
	_exit(0);
}

/* Leaves the watchdog with stdin, stdout and stderr on /dev/null and keep
 * as descriptor 3: holding stdout would keep a $(amqplock hold ...) reader
 * waiting, holding the broker socket would keep the slot. */
static int close_other_fds(int keep)
{
	int null = open("/dev/null", O_RDWR);

	if (keep != 3 && dup2(keep, 3) < 0)
		_exit(1);
	if (null >= 0)
		dup2(null, 0), dup2(null, 1), dup2(null, 2);
	close_range(4, ~0u, 0);
	return 3;
}

enum al_status hold_guard_start(void)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0)
		return fail(AL_BROKER, "cannot create a pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		return fail(AL_BROKER, "cannot fork: %s", strerror(errno));
	if (pid == 0) {
		setsid(); /* out of the terminal's reach: Ctrl-C must not end it */
		guard_main(close_other_fds(p[0]));
	}
	close(p[0]);
	guard_fd = p[1];
	return AL_OK;
}

static void guard_watch(pid_t group)
{
	if (guard_fd >= 0 && write(guard_fd, &group, sizeof(group)) != (ssize_t)sizeof(group))
		trace("cannot reach the watchdog: %s", strerror(errno));
}

static void guard_stop(void)
{
	if (guard_fd >= 0) {
		if (write(guard_fd, "", 1) != 1)
			trace("cannot reach the watchdog: %s", strerror(errno));
		close(guard_fd);
		guard_fd = -1;
	}
}

/* In the child: its own process group (so that a lost slot can signal
 * everything the command started), death with its parent, the signals
 * amqplock blocked unblocked again, then exec. On failure errno goes up
 * the error pipe. */
static void child_main(char **argv, pid_t parent, int err_fd)
{
	int e;

	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127); /* the parent is already gone */
	sigprocmask(SIG_SETMASK, &original_mask, NULL);
	execvp(argv[0], argv);
	e = errno;
	if (write(err_fd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(e == ENOENT ? 127 : 126);
}

static enum al_status start_child(char **argv, pid_t *child, int *exec_errno)
{
	pid_t parent = getpid();
	int p[2], e = 0;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) != 0)
		return fail(AL_BROKER, "cannot create a pipe: %s", strerror(errno));
	*child = fork();
	if (*child < 0) {
		close(p[0]), close(p[1]);
		return fail(AL_BROKER, "cannot fork: %s", strerror(errno));
	}
	if (*child == 0)
		child_main(argv, parent, p[1]);
	/* Set it from both sides: whichever runs first, the group exists
	 * before anyone signals it. */
	setpgid(*child, *child);
	close(p[1]);
	do
		n = read(p[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	*exec_errno = n == (ssize_t)sizeof(e) ? e : 0;
	return AL_OK;
}

static int exit_code(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return 1;
}

/* State of one hold while it runs. */
struct holding {
	struct sem *s;
	unsigned slot;
	const struct hold_opts *o;
	pid_t child; /* 0: none, or reaped */
	int code;
	double heard;       /* last time the broker sent anything */
	double verify_sent; /* 0: no verification outstanding */
	double next_verify;
	double lost_at; /* 0: still held */
};

/* How long the broker may stay silent before the slot counts as lost: one
 * heartbeat. The broker itself waits at least twice that before it gives
 * the slot away, so the command is signalled first. Without heartbeats,
 * the reply deadline bounds each verification instead. */
static double silence_limit(const struct holding *h)
{
	return h->s->conn->heartbeat ? (double)h->s->conn->heartbeat : h->s->conn->rpc_timeout;
}

/* keep_connection: the broker is fine but the slot is gone (removed).
 * The connection, and with it the holder queue, then stays until the
 * command has ended, so that `wait` (and an add of the slot) sees this
 * holder until its command is really done. */
static void lose(struct holding *h, bool keep_connection)
{
	char reason[512];

	snprintf(reason, sizeof(reason), "%s", status_message());
	status_clear();
	fail(AL_LOST, "lost slot %u of %s: %s", h->slot, h->s->label, reason);
	h->lost_at = now_seconds();
	/* The command first: nothing may delay the signal. */
	if (h->child > 0) {
		trace("sending SIG%s to the command's process group",
		      sigabbrev_np(h->o->lost_signal));
		kill(-h->child, h->o->lost_signal);
	}
	if (h->o->lost)
		h->o->lost(h->o->arg);
	/* Otherwise no goodbye: the broker may be what went silent. */
	if (!keep_connection)
		conn_abort(h->s->conn);
}

/* Takes what the broker sent, starts or times out a verification. */
static void check_slot(struct holding *h, bool readable)
{
	double now = now_seconds();
	bool verified = false;

	if (readable) {
		h->heard = now;
		if (sem_held_poll(h->s, h->slot, &verified) != AL_OK) {
			lose(h, !h->s->conn->dead);
			return;
		}
		if (verified)
			h->verify_sent = 0;
	}
	if (h->verify_sent && now - h->verify_sent > silence_limit(h)) {
		fail(AL_LOST, "the broker did not answer a check within %g s", silence_limit(h));
		lose(h, false);
	} else if (h->s->conn->heartbeat && now - h->heard > silence_limit(h)) {
		fail(AL_LOST, "the broker has been silent for %.1f s", now - h->heard);
		lose(h, false);
	} else if (!h->verify_sent && now >= h->next_verify) {
		if (sem_verify_send(h->s, h->slot) != AL_OK) {
			lose(h, false);
			return;
		}
		h->verify_sent = now;
		h->next_verify = now + VERIFY_INTERVAL;
	}
}

static double next_wakeup(const struct holding *h)
{
	double t;

	if (h->lost_at)
		return now_seconds() + GROUP_POLL_INTERVAL;
	t = h->verify_sent ? h->verify_sent + silence_limit(h) : h->next_verify;
	if (h->s->conn->heartbeat)
		t = sooner(t, h->heard + silence_limit(h));
	/* Let the library send our heartbeats on time. */
	if (h->s->conn->heartbeat)
		t = sooner(t, now_seconds() + h->s->conn->heartbeat / 4.0);
	return t;
}

/* Collects every child that has ended: the command, and (amqplock being
 * a subreaper) whatever the command started and left behind, so that no
 * zombie keeps its process group looking alive. */
static void reap(struct holding *h)
{
	int wstatus;
	pid_t pid;

	while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
		if (pid == h->child) {
			h->code = exit_code(wstatus);
			trace("command exited with status %d", h->code);
			h->child = -h->child; /* remember the group, mark reaped */
		}
	}
}

/* After a loss: done once the command was reaped and its whole group is
 * gone; SIGKILL for the group once the grace period is over. Members that
 * even SIGKILL does not remove in time (stuck in the kernel, or zombies
 * of a parent outside our reach) are given up on. */
static bool wound_down(struct holding *h)
{
	pid_t group = h->child < 0 ? -h->child : h->child;
	double since = now_seconds() - h->lost_at;

	if (group == 0)
		return true;
	if (since >= h->o->grace)
		kill(-group, SIGKILL);
	if (h->child < 0 && since >= h->o->grace + KILL_WAIT)
		return true;
	return h->child < 0 && kill(-group, 0) != 0;
}

enum al_status hold_run(struct sem *s, unsigned slot, const struct hold_opts *o, int *code)
{
	struct holding h = {.s = s, .slot = slot, .o = o};
	int sig, exec_errno = 0;
	bool readable;

	h.heard = now_seconds();
	h.next_verify = h.heard + VERIFY_INTERVAL;
	*code = 0;
	if (o->argv) {
		/* Orphans of the command become our children, to be reaped. */
		prctl(PR_SET_CHILD_SUBREAPER, 1);
		if (start_child(o->argv, &h.child, &exec_errno) != AL_OK)
			return AL_BROKER;
		guard_watch(h.child);
		if (exec_errno)
			fprintf(stderr, "amqplock: cannot run %s: %s\n", o->argv[0],
				strerror(exec_errno));
	}
	for (;;) {
		sig = wait_event(s->conn, next_wakeup(&h), &readable);
		/* Every time round, not only on SIGCHLD: signalfd merges
		 * pending signals. */
		reap(&h);
		if (sig && sig != SIGCHLD) {
			if (h.child > 0) {
				trace("passing SIG%s on to the command", sigabbrev_np(sig));
				kill(-h.child, sig);
			} else if (!o->argv) {
				trace("SIG%s: releasing slot %u", sigabbrev_np(sig), slot);
				break;
			}
		}
		if (h.lost_at) {
			if (!s->conn->dead && conn_keepalive(s->conn) != AL_OK)
				conn_abort(s->conn);
			if (wound_down(&h))
				break;
		} else if (h.child < 0) {
			break; /* the command is done: release */
		} else {
			check_slot(&h, readable);
		}
	}
	guard_stop();
	*code = h.code;
	if (h.lost_at)
		return AL_LOST;
	/* Waiters hear of it at once; a failure here changes nothing, as
	 * the connection's close gives the slot back anyway. */
	if (!s->conn->dead)
		sem_released(s, slot);
	return AL_OK;
}
