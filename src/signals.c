#include "signals.h"

#include <errno.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

static const int terminating[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_TERMINATING (sizeof(terminating) / sizeof(terminating[0]))

static sigset_t ignored_at_start;
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
	size_t i;

	sigemptyset(&ignored_at_start);
	for (i = 0; i < N_TERMINATING; i++)
		if (may_stay_ignored(terminating[i]) && sigaction(terminating[i], NULL, &sa) == 0 &&
		    sa.sa_handler == SIG_IGN)
			sigaddset(&ignored_at_start, terminating[i]);
	signal(SIGCHLD, SIG_DFL);
}

void signals_terminating(sigset_t *set)
{
	size_t i;

	sigemptyset(set);
	for (i = 0; i < N_TERMINATING; i++)
		if (!sigismember(&ignored_at_start, terminating[i]))
			sigaddset(set, terminating[i]);
}

static void interrupted(int sig)
{
	if (say_interrupted)
		say_interrupted(sig);
	_exit(128 + sig);
}

void signals_exit_on_interrupt(void (*say)(int sig))
{
	struct sigaction sa = {.sa_handler = interrupted};
	sigset_t set;
	size_t i;

	say_interrupted = say;
	signals_terminating(&set);
	/* One at a time: a second signal must not interleave its words. */
	sa.sa_mask = set;
	for (i = 0; i < N_TERMINATING; i++)
		if (sigismember(&set, terminating[i]))
			sigaction(terminating[i], &sa, NULL);
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
		return fail(AL_INTERNAL, "cannot create a signalfd: %s", strerror(errno));
	return AL_OK;
}

int signals_next(int fd)
{
	struct signalfd_siginfo si;

	if (fd >= 0 && read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		return (int)si.ssi_signo;
	return 0;
}

void signals_keeper(void)
{
	static const int ignore[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGUSR1,
				     SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE};
	sigset_t set;
	size_t i;

	sigemptyset(&set);
	for (i = 0; i < sizeof(ignore) / sizeof(ignore[0]); i++) {
		signal(ignore[i], SIG_IGN);
		sigaddset(&set, ignore[i]);
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
