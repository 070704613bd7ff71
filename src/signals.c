/* Signal dispositions and masks in amqplock, the keeper and CMD
 * (signals.h); the handler that ends a waiting amqplock. */
#include "signals.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

static sigset_t ignored_at_start;

/* Whether sig, by default, ends a process (terminates it, or dumps core):
 * every signal but those that stop, continue or are ignored by default,
 * and but KILL and STOP, which cannot be caught, and glibc's own (32, 33).
 * amqplock dying of any of them would leave its slot to its keeper, or
 * (acquire) to the lease's end. */
static bool ends_by_default(int sig)
{
	switch (sig) {
	case SIGKILL:
	case SIGSTOP:
	case SIGTSTP:
	case SIGTTIN:
	case SIGTTOU:
	case SIGCONT:
	case SIGCHLD:
	case SIGURG:
	case SIGWINCH:
		return false;
	default:
		return sig > 0 && sig < NSIG && (sig < 32 || sig >= SIGRTMIN);
	}
}
static void (*say_interrupted)(int sig);

/* The conventional "leave me out" signals: an ignored SIGTERM or SIGUSR1
 * says nothing of the kind and is taken over like any other. */
static bool may_stay_ignored(int sig)
{
	return sig == SIGHUP || sig == SIGINT || sig == SIGQUIT;
}

void signals_init(void)
{
	struct sigaction sa;
	int sig;

	sigemptyset(&ignored_at_start);
	for (sig = 1; sig < NSIG; sig++)
		if (may_stay_ignored(sig) && sigaction(sig, NULL, &sa) == 0 &&
		    sa.sa_handler == SIG_IGN)
			sigaddset(&ignored_at_start, sig);
	signal(SIGCHLD, SIG_DFL);
}

void signals_terminating(sigset_t *set)
{
	int sig;

	sigemptyset(set);
	for (sig = 1; sig < NSIG; sig++)
		if (ends_by_default(sig) && !sigismember(&ignored_at_start, sig))
			sigaddset(set, sig);
}

/* A fault of amqplock's own (a bug: SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGTRAP, SIGSYS, from the kernel, si_code > 0), not a request to end. */
static bool own_fault(int sig, const siginfo_t *info)
{
	return info && info->si_code > 0 &&
	       (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
		sig == SIGTRAP || sig == SIGSYS);
}

static void interrupted(int sig, siginfo_t *info, void *context)
{
	(void)context;
	/* The faulting instruction runs again on return, and the default
	 * action then ends amqplock as any crash would. */
	if (own_fault(sig, info)) {
		signal(sig, SIG_DFL);
		return;
	}
	if (say_interrupted)
		say_interrupted(sig);
	/* amqplock's one exit below the commands, and it must stay: a
	 * handler has nobody to return a status to (returning resumes the
	 * interrupted wait, and the signal is lost), and what follows may
	 * only be async-signal-safe. Left to the caller's hook, "ends at
	 * once" would hold only if every hook remembered. */
	_exit(128 + sig);
}

void signals_exit_on_interrupt(void (*say)(int sig))
{
	struct sigaction sa = {.sa_sigaction = interrupted, .sa_flags = SA_SIGINFO};
	sigset_t set;
	int sig;

	say_interrupted = say;
	signals_terminating(&set);
	/* One at a time: a second signal must not interleave its words. */
	sa.sa_mask = set;
	for (sig = 1; sig < NSIG; sig++)
		if (sigismember(&set, sig))
			sigaction(sig, &sa, NULL);
}

void signals_hold_back(sigset_t *before)
{
	sigset_t set;

	signals_terminating(&set);
	sigprocmask(SIG_BLOCK, &set, before);
}

void signals_release(const sigset_t *before)
{
	sigprocmask(SIG_SETMASK, before, NULL);
}

bool signals_held_pending(void)
{
	sigset_t set, pending;
	int sig;

	signals_terminating(&set);
	if (sigpending(&pending) != 0)
		return false;
	for (sig = 1; sig < NSIG; sig++)
		if (sigismember(&set, sig) && sigismember(&pending, sig))
			return true;
	return false;
}

static volatile sig_atomic_t stop_asked;
static bool stops_noted;

static void note_stop(int sig)
{
	(void)sig;
	stop_asked = 1;
}

static void tstp_mask(int how)
{
	sigset_t tstp;

	sigemptyset(&tstp);
	sigaddset(&tstp, SIGTSTP);
	sigprocmask(how, &tstp, NULL);
}

void signals_note_stops(bool on)
{
	struct sigaction sa = {.sa_handler = on ? note_stop : SIG_DFL}, old;
	bool asked = stop_asked;

	stop_asked = 0;
	/* An ignored SIGTSTP (nohup-like starters) stays ignored. */
	if (on && (sigaction(SIGTSTP, NULL, &old) != 0 || old.sa_handler == SIG_IGN))
		return;
	if (!on && !stops_noted)
		return;
	/* No SA_RESTART: a wait in poll(2) ends, and the stop is seen. */
	sigaction(SIGTSTP, &sa, NULL);
	stops_noted = on;
	if (on) {
		/* One left pending below is noted now. */
		tstp_mask(SIG_UNBLOCK);
	} else if (asked) {
		/* A stop asked for during the last try is not lost: pending,
		 * it is taken by signals_block's signalfd (hold: the job
		 * stops, and the slot is checked on resume), or delivered
		 * when signals_block or signals_note_stops unblock it. */
		tstp_mask(SIG_BLOCK);
		raise(SIGTSTP);
	}
}

bool signals_stop_asked(void)
{
	return stop_asked != 0;
}

void signals_stop_now(void)
{
	stop_asked = 0;
	signals_note_stops(false);
	raise(SIGTSTP);
	/* Continued (or never stopped: an orphaned process group). */
	signals_note_stops(true);
}

enum al_status signals_block(bool job_control, int *fd)
{
	sigset_t set;

	signals_terminating(&set);
	sigaddset(&set, SIGCHLD);
	if (job_control) {
		sigaddset(&set, SIGTSTP);
		sigaddset(&set, SIGTTIN);
		sigaddset(&set, SIGTTOU);
		sigaddset(&set, SIGCONT);
	}
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
		return fail(AL_INTERNAL, "cannot block signals: %s", strerror(errno));
	/* Without job control a stop left pending by signals_note_stops
	 * stops amqplock now, as it would have. */
	if (!job_control)
		tstp_mask(SIG_UNBLOCK);
	*fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (*fd < 0)
		return fail(AL_INTERNAL, "cannot create a signalfd: %s", status_strerror(errno));
	return AL_OK;
}

int signals_next(int fd)
{
	struct signalfd_siginfo si;

	while (fd >= 0 && read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		/* amqplock's own write to a pipe nobody reads any more (its
		 * stderr gone): the write has failed, and that is all; it is
		 * no request to end the job. */
		if (si.ssi_signo == SIGPIPE && si.ssi_pid == (uint32_t)getpid())
			continue;
		return (int)si.ssi_signo;
	}
	return 0;
}

void signals_keeper(void)
{
	sigset_t set;
	int sig;

	sigemptyset(&set);
	for (sig = 1; sig < NSIG; sig++) {
		if (!ends_by_default(sig) && sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU)
			continue;
		signal(sig, SIG_IGN);
		sigaddset(&set, sig);
	}
	sigaddset(&set, SIGCONT);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	/* Whatever amqplock inherited: an ignored SIGCHLD would have the kernel
	 * reap CMD, and its exit status be lost. */
	signal(SIGCHLD, SIG_DFL);
}

void signals_reset_for_exec(void)
{
	sigset_t none;
	int sig;

	for (sig = 1; sig < NSIG; sig++) {
		/* glibc keeps 32 and 33 to itself; KILL and STOP cannot change. */
		if (sig == SIGKILL || sig == SIGSTOP || (sig > 31 && sig < SIGRTMIN))
			continue;
		signal(sig, sigismember(&ignored_at_start, sig) ? SIG_IGN : SIG_DFL);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}
