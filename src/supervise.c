#include "supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include "secret.h"
#include "signals.h"

/* How often the keeper looks whether amqplock has been stopped. amqplock
 * keeps its slot through a stop this short (the broker waits at least
 * 2.5 heartbeats), so CMD never runs unsupervised for long. */
#define WATCH_INTERVAL_MS 200
/* While killing: how often to look again for descendants. */
#define KILL_INTERVAL_MS 20

/* Requests from amqplock to the keeper. */
enum order {
	SIGNAL_GROUP,
	SIGNAL_ALL,
	SIGNAL_ALL_AWAKE,
	STOP_ALL,
	CONTINUE_ALL,
	KILL_AT,
	DONE,
	GO
};

struct order_msg {
	int order, sig; /* GO: sig says whether CMD gets the terminal */
	double when;    /* KILL_AT: the kill deadline; GO: start_by (0: none) */
};
/* The keeper's answer to STOP_ALL, among the events: every descendant is
 * stopped. Never returned by super_next. */
#define FROZEN (-1)
struct event_msg {
	int event, value;
};

/* --- processes -------------------------------------------------------- */

/* A process as /proc shows it. Its state is the process's, not only its
 * leader's: a process whose main thread has exited (pthread_exit) shows
 * its leader as a zombie while its other threads run on, and is alive
 * ('R' here) until the last of them has exited, and stopped ('T') only
 * when every one of them is. */
struct proc {
	pid_t pid, ppid;
	char state;
};

struct procs {
	struct proc *p;
	size_t len, cap;
};

static bool is_gone(char state)
{
	return state == 'Z' || state == 'X';
}

static bool is_stopped(char state)
{
	return state == 'T' || state == 't';
}

/* The state field of a /proc/.../stat line, and the parent's pid. */
static bool parse_stat(const char *path, char *state, pid_t *ppid)
{
	char buf[512], *close_paren;
	ssize_t n;
	int fd, parent;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "pid (comm) state ppid ...": comm may hold anything, even ')'. */
	close_paren = strrchr(buf, ')');
	if (!close_paren || sscanf(close_paren + 1, " %c %d", state, &parent) != 2)
		return false;
	*ppid = (pid_t)parent;
	return true;
}

/* The state of pid's threads but its leader: 'R' if one of them is alive
 * and not stopped, 'T' if all that are alive are stopped, 'Z' if none is
 * alive (or there is none). */
static char other_threads(pid_t pid)
{
	char path[64], state, result = 'Z';
	struct dirent *e;
	pid_t ppid;
	long tid;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return 'Z';
	while ((e = readdir(d)) && result != 'R') {
		tid = strtol(e->d_name, NULL, 10);
		if (tid <= 0 || tid == pid)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%ld/stat", (int)pid, tid);
		if (!parse_stat(path, &state, &ppid) || is_gone(state))
			continue;
		result = is_stopped(state) ? 'T' : 'R';
	}
	closedir(d);
	return result;
}

static bool read_proc(pid_t pid, struct proc *out)
{
	char path[32];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!parse_stat(path, &out->state, &out->ppid))
		return false;
	out->pid = pid;
	/* A zombie leader: the process lives while another thread does. */
	if (out->state == 'Z')
		out->state = other_threads(pid);
	return true;
}

/* Every process on the system, by one pass over /proc. */
static bool scan_procs(struct procs *all)
{
	struct dirent *e;
	struct proc p;
	DIR *d = opendir("/proc");
	char *end;
	long pid;

	all->len = 0;
	if (!d)
		return false;
	while ((e = readdir(d))) {
		pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || !read_proc((pid_t)pid, &p))
			continue;
		if (all->len == all->cap) {
			size_t cap = all->cap ? 2 * all->cap : 256;
			struct proc *grown = realloc(all->p, cap * sizeof(*grown));

			if (!grown)
				break;
			all->p = grown;
			all->cap = cap;
		}
		all->p[all->len++] = p;
	}
	closedir(d);
	return true;
}

static int by_pid(const void *a, const void *b)
{
	const struct proc *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Keeps in `all` only the live descendants of root (root excluded): each
 * process is marked once its parent is, pass after pass, as many passes
 * as the tree is deep. */
static void keep_descendants(struct procs *all, pid_t root)
{
	size_t *parent = malloc((all->len ? all->len : 1) * sizeof(*parent));
	bool *mine = calloc(all->len ? all->len : 1, sizeof(*mine));
	bool grew = true;
	size_t i, kept = 0;
	struct proc key, *found;

	if (!parent || !mine) {
		all->len = 0;
		goto out;
	}
	qsort(all->p, all->len, sizeof(*all->p), by_pid);
	for (i = 0; i < all->len; i++) {
		key.pid = all->p[i].ppid;
		found = bsearch(&key, all->p, all->len, sizeof(*all->p), by_pid);
		parent[i] = found ? (size_t)(found - all->p) : i;
		mine[i] = all->p[i].ppid == root;
	}
	while (grew) {
		grew = false;
		for (i = 0; i < all->len; i++)
			if (!mine[i] && mine[parent[i]])
				mine[i] = grew = true;
	}
	for (i = 0; i < all->len; i++)
		if (mine[i] && !is_gone(all->p[i].state))
			all->p[kept++] = all->p[i];
	all->len = kept;
out:
	free(parent);
	free(mine);
}

static bool descendants(pid_t root, struct procs *out)
{
	if (!scan_procs(out))
		return false;
	keep_descendants(out, root);
	return true;
}

/* sig to every descendant of root; the number signalled. */
static size_t signal_descendants(pid_t root, int sig)
{
	struct procs d = {0};
	size_t i, n = 0;

	if (descendants(root, &d))
		for (i = 0; i < d.len; i++)
			n += kill(d.p[i].pid, sig) == 0;
	free(d.p);
	return n;
}

/* --- the keeper ------------------------------------------------------- */

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

	if (descendants(getpid(), &d))
		for (i = 0; i < d.len; i++) {
			n += send_signal(k, d.p[i].pid, sig);
			if (awake && is_stopped(d.p[i].state))
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
		if (read_proc(k->refused.pid[i], &p) && !is_gone(p.state))
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
	return !read_proc(pid, &p) || is_gone(p.state) ||
	       (is_stopped(p.state) && other_threads(pid) != 'R');
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

	if (descendants(getpid(), &d))
		for (i = 0; i < d.len; i++) {
			if (is_stopped(d.p[i].state) || !send_signal(k, d.p[i].pid, SIGSTOP) ||
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

	k->parent_stopped = read_proc(k->parent, &p) && is_stopped(p.state);
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

/* Until GO, CMD does not exist. DONE: amqplock has no use for us (its
 * claim failed). amqplock gone: its claim may have made the slot ours, so
 * the last act is done (it ends the lease only if it is ours). */
static void await_go(struct keeper *k, bool *give_terminal)
{
	struct order_msg m;
	ssize_t n;

	for (;;) {
		n = recv(k->ctl, &m, sizeof(m), 0);
		if (n == (ssize_t)sizeof(m) && m.order == GO) {
			*give_terminal = m.sig != 0;
			k->start_by = m.when;
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

/* Forks CMD and waits until it has exec'd (or failed to). */
static void start_cmd(struct keeper *k, bool give_terminal)
{
	pid_t keeper = getpid();
	int p[2], e = 0;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) != 0 || (k->cmd = fork()) < 0) {
		tell(k->ctl, SUPER_NO_EXEC, errno);
		tell(k->ctl, SUPER_EXITED, 126);
		_exit(1);
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

static _Noreturn void keeper_main(const struct super_opts *o, int ctl, pid_t parent)
{
	struct keeper k = {.ctl = ctl, .parent = parent, .o = o};
	bool give_terminal = false;
	sigset_t chld;
	int keep[3];

	/* Not "amqplock": `pkill amqplock` must leave the keeper to end or
	 * stop the job. */
	secret_show_as(SUPER_KEEPER_NAME);
	/* A group of its own: `kill -9 -<job>` must not take it with amqplock. */
	setpgid(0, 0);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signals_keeper();
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	k.sig_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	if (k.sig_fd < 0) {
		tell(ctl, SUPER_NO_EXEC, errno);
		tell(ctl, SUPER_EXITED, 126);
		_exit(1);
	}
	await_go(&k, &give_terminal);
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

/* --- amqplock's side ---------------------------------------------------- */

enum al_status super_prepare(struct supervisor *sv, const struct super_opts *o)
{
	pid_t parent = getpid();
	sigset_t all, mask;
	int sv_pair[2];

	memset(sv, 0, sizeof(*sv));
	sv->fd = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv_pair) != 0)
		return fail(AL_INTERNAL, "cannot create a socket pair: %s", strerror(errno));
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
		return fail(AL_INTERNAL, "cannot fork: %s", strerror(errno));
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
		super_go(sv, o->give_terminal, o->start_by);
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
	/* A keeper already gone (killed) cannot be told, and need not be. */
	send_order(sv, &m);
	close(sv->fd);
	sv->fd = -1;
}

static void order(struct supervisor *sv, enum order what, int sig)
{
	struct order_msg m = {what, sig, 0};

	send_order(sv, &m);
}

void super_go(struct supervisor *sv, bool give_terminal, double start_by)
{
	struct order_msg m = {GO, give_terminal, start_by};

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
	struct order_msg m = {KILL_AT, 0, when};

	/* Its clock checks run with the watch for a stopped amqplock, so the
	 * kill comes up to WATCH_INTERVAL_MS late: the lease's margin is
	 * far larger. */
	send_order(sv, &m);
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
	if (sv->keeper <= 0 || !descendants(sv->keeper, &d) || d.len == 0) {
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

	return read_proc(pid, &p) && p.ppid > 0 && getpgid(p.ppid) != getpgrp() &&
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
