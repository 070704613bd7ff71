/* acquire, hold and wait: the lock clients; --create's semaphore made
 * when a client finds it missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "hold.h"
#include "news.h"
#include "out.h"
#include "parse.h"
#include "signals.h"

/* The lease given or the default, checked against what it must cover: the
 * command's --grace and the silence that tells a lost connection. */
static enum al_status settle_lease(struct cli *cli, bool has_command)
{
	double grace = has_command ? cli->hold.grace : 0;
	double silence = hold_silence(cli->conn.heartbeat, cli->conn.rpc_timeout);
	double shortest = lease_shortest(grace, silence);
	/* In whole seconds, for people. */
	double least = (double)(unsigned long)shortest + 1;
	char with_grace[64] = "";

	if (has_command)
		snprintf(with_grace, sizeof(with_grace), "--grace %g with ", grace);
	if (cli->hold.lease < 0)
		cli->hold.lease =
			DEFAULT_LEASE_BASE + grace > shortest ? DEFAULT_LEASE_BASE + grace : least;
	else if (cli->hold.lease > 0 && cli->hold.lease < shortest)
		return fail(
			AL_USAGE,
			"--lease %g is too short for %s--heartbeat %u: at least %.0f s, or 0 for "
			"no lease",
			cli->hold.lease, with_grace, cli->conn.heartbeat, least);
	if (cli->hold.min_hold > 0 && cli->hold.lease == 0)
		return fail(AL_USAGE,
			    "--min-hold needs a lease to keep the slot with: not --lease 0");
	trace("lease %g s", cli->hold.lease);
	return AL_OK;
}

/* hold's --timeout, from $AMQPLOCK_TIMEOUT if it was not given (0: none). */
static enum al_status settle_timeout(struct cli *cli)
{
	const char *env = getenv("AMQPLOCK_TIMEOUT");
	const char *why;
	char q[64];

	if (cli->hold.timeout >= 0)
		return AL_OK;
	cli->hold.timeout = 0;
	if (!env || !*env)
		return AL_OK;
	if ((why = parse_seconds(env, MAX_SECONDS, &cli->hold.timeout)) != NULL)
		return fail(AL_USAGE,
			    "AMQPLOCK_TIMEOUT=%s %s: set it to seconds (0 = none), or give "
			    "--timeout",
			    parse_quote_arg(env, q, sizeof(q)), why);
	return AL_OK;
}

/* --label, from $AMQPLOCK_LABEL if it was not given. */
static enum al_status settle_label(struct cli *cli)
{
	const char *env = getenv("AMQPLOCK_LABEL");
	const char *why;
	char q[80];

	if (cli->conn.who.label || !env || !*env)
		return AL_OK;
	if ((why = parse_label(env)) != NULL)
		return fail(AL_USAGE, "AMQPLOCK_LABEL=%s %s: change it, or give --label",
			    parse_quote_arg(env, q, sizeof(q)), why);
	cli->conn.who.label = env;
	return AL_OK;
}

static struct hold_opts hold_opts_from(struct cli *cli, struct client *cl, char **argv)
{
	struct hold_opts o = cli->hold;

	/* Without a command (acquire) nothing needs a grace period. */
	if (!argv)
		o.grace = 0;
	o.argv = argv;
	o.conn_opts = &cli->conn;
	o.events.lost = news_lost;
	o.events.notice = news_notice;
	o.events.warning = news_warning;
	o.events.waiting = news_waiting;
	o.events.remaining = news_remaining;
	o.events.arg = cl;
	return o;
}

/* A waiting client (hold, acquire, wait) whose connection cannot be made
 * or is lost because the broker is away (conn_broker_away: refused,
 * reset, timed out, closed by its shutdown) connects again, to the first
 * broker of the list that answers (in a cluster, a surviving node), after
 * a pause from RECONNECT_FIRST doubling to RECONNECT_LONGEST, jittered,
 * until its deadline: -w's, or none. Nothing is held meanwhile. Other
 * losses of a connection once made (the broker's side of it crashed:
 * INTERNAL_ERROR, RESOURCE_ERROR) are reconnected RECONNECTS_MAX times at
 * most, with -n too when a deletion explains them (conn_broker_raced); a
 * connection refused for any other reason (a login refused, TLS,
 * a host name that does not resolve) ends the wait at once, waiting would
 * not change it. */
#define RECONNECT_FIRST   0.1
#define RECONNECT_LONGEST 2.0
#define RECONNECTS_MAX    5
/* A broker that has not answered once since amqplock started is more
 * likely a wrong URL than an outage: the wait for it ends after this long
 * (-w's end if sooner), and at once for the built-in default URL, which
 * nobody chose (cron's empty environment). Once it has answered, its
 * absence is ridden out until -w's end. */
#define NEVER_ANSWERED_LIMIT 60.0

/* Until the slot is held, a signal ends amqplock at once, with these
 * words: whatever it is doing (resolving, connecting, logging in, waiting
 * for a reply or for a slot), nothing is held that needs undoing. */
static void exit_on_interrupt(struct cli *cli, const char *before, const char *after)
{
	char text[300];

	snprintf(text, sizeof(text), "%s%s%s", before, cli->name, after);
	out_interrupt_prepare(cli->name, text);
	signals_exit_on_interrupt(out_interrupted);
}

/* The last try for a slot starts at the end of -w; its replies may take
 * this much longer (a broker that answers at all answers in milliseconds),
 * and no more. A reply waited for from earlier gets no more than -w: a
 * broker silent since before the last try ends the wait at -w's end, not
 * this much after it (deadline_graced). */
#define LAST_TRY_REPLIES 0.5

/* The two ends of a wait (hold, acquire, wait): when to stop trying
 * (-n: at once), and the limit on every reply until then (-n: none but
 * the reply timeout): -w's end, with the last try's grace. */
static void wait_deadlines(const struct hold_opts *o, struct deadline *wait_end,
			   struct deadline *replies_end)
{
	*wait_end = deadline_in(o->nonblock ? 0 : o->wait);
	*replies_end =
		o->nonblock ? deadline_never() : deadline_graced(*wait_end, LAST_TRY_REPLIES);
}

/* A connection lost to a lease in the way is a race lost, not a failure
 * of the connection: a claim that the broker refused by closing the
 * connection (the slot's last quorum lease still being deleted, see
 * claim in claim.c), or a lease that left a probe or a declare unanswered
 * (a quorum queue without a leader; its slot now counts as held for a
 * while: see struct sem, stuck). Such losses are not counted as reconnects,
 * and the next try comes after a pause (0.1 s doubling to 1 s). But this
 * many in a row, none more than REFUSALS_APART from the last, is a
 * broker that cannot serve leases at all (a quorum queue with too few
 * nodes), and a failure after all: some 15-20 s of trying, more if
 * replies are waited for. */
#define REFUSALS_MAX   20
#define REFUSALS_APART 10.0

struct retries {
	int reconnects;
	int refusals;        /* connections lost to a lease in the way, in a row */
	double last_refusal; /* now_seconds() */
	struct backoff pauses;
	bool away;                  /* the broker is away: news_away has told */
	struct backoff away_pauses; /* while it is */
	bool looked;                /* the broker has taken a publish of ours (conn_confirmed) */
	bool answered;              /* a connection was made since we started */
	double started;             /* now_seconds() when we started */
};

/* A connection made: an outage, if any, is over. */
static void connected(struct client *cl, const struct conn *c, struct retries *r)
{
	if (r->away)
		news_back(cl, c);
	r->away = false;
	r->answered = true;
	r->away_pauses = backoff_start(RECONNECT_FIRST, RECONNECT_LONGEST);
}

/* After the connection failed (`connecting`: could not be made) while
 * waiting: whether to connect again, after a pause if the broker is
 * away. With -w, a deadline that passes while it is away ends the wait
 * as a failure to connect (69), naming the broker: nothing shows that the
 * semaphore was busy. */
static bool reconnect_due(struct client *cl, const struct conn *c, bool connecting,
			  const struct hold_opts *o, struct deadline wait_end, struct retries *r)
{
	double pause, waited = now_seconds() - r->started;
	struct deadline until = wait_end;
	const char *why = "-w";

	if (o->nonblock)
		return false;
	/* Never answered: the default URL at once, another after a while. */
	if (!r->answered && conn_broker_away(c) && cli_url_is_default(cl->cli))
		return false;
	if (!r->answered && conn_broker_away(c) && waited >= NEVER_ANSWERED_LIMIT) {
		fail_context(
			AL_CONNECTION,
			"gave up after %.0f s: the broker has not answered once since amqplock "
			"started (a wrong host or port in the URL?): ",
			waited);
		return false;
	}
	/* (-w's, if the two end within the second shown) */
	if (!r->answered && deadline_left(wait_end) > NEVER_ANSWERED_LIMIT - waited + 0.5) {
		until = deadline_within(wait_end, NEVER_ANSWERED_LIMIT - waited);
		why = "it has not answered yet";
	}
	if (!conn_broker_away(c)) {
		if (connecting || deadline_passed(wait_end) || r->reconnects++ >= RECONNECTS_MAX)
			return false;
		trace("%s; connecting again to go on waiting", status_message());
		return true;
	}
	if (deadline_passed(wait_end)) {
		fail_context(AL_CONNECTION,
			     "gave up at the end of -w %g s, the broker away: ", o->wait);
		return false;
	}
	if (!r->away) {
		r->away = true;
		news_away(cl, until, why);
	}
	/* The last pause ends at the deadline, for one more try. */
	pause = backoff_next(&r->away_pauses, until);
	trace("%s; connecting again in %.2f s", status_message(), pause);
	sleep_seconds(pause);
	return true;
}

/* After the connection failed while waiting for a slot: whether to
 * connect again and go on. */
static bool may_go_on(struct client *cl, const struct conn *c, bool connecting, const struct sem *s,
		      const struct hold_opts *o, struct deadline wait_end, struct retries *r)
{
	double now = now_seconds();

	/* -n: only a race with a deletion is tried again, at once (in the
	 * CI once in 450 racing hold -n --create: 4.3 closed the connection
	 * when a probe of the admin mutex met it deleted as its creator
	 * left). */
	if (o->nonblock)
		return !connecting && !sem_lost_to_lease(s) && conn_broker_raced(c) &&
		       r->reconnects++ < RECONNECTS_MAX;
	if (connecting || !sem_lost_to_lease(s))
		return reconnect_due(cl, c, connecting, o, wait_end, r);
	if (deadline_passed(wait_end))
		return false;
	if (now - r->last_refusal > REFUSALS_APART) {
		r->refusals = 0;
		r->pauses = backoff_start(0.1, 1.0);
	}
	r->last_refusal = now;
	if (++r->refusals > REFUSALS_MAX)
		return false;
	trace("%s; connecting again to go on waiting", status_message());
	sleep_seconds(backoff_next(&r->pauses, wait_end));
	return !deadline_passed(wait_end);
}

/* A resource alarm met while waiting: the broker blocked the connection
 * at a publish (conn_blocked). A client that has looked (the broker took
 * more than a first publish of ours: conn_confirmed) rides it out as it rides out
 * the broker's absence, until its deadline, then connects again; -w's
 * end is a wait timed out (AL_BUSY), not a failure. It waits on the
 * blocked connection: a new one would be blocked at its first look, and
 * the broker keeps every blocked connection until the alarm clears. A
 * command whose first look the alarm meets fails at once (AL_BROKER, 76,
 * as conn.c says): nothing tells it that the alarm will end. True if the
 * alarm has ended and the caller connects again; otherwise *st says how
 * the wait ends (a lost connection: AL_CONNECTION, as any loss). */
static bool alarm_ridden(struct client *cl, struct conn *c, const struct hold_opts *o,
			 struct deadline wait_end, struct retries *r, enum al_status *st)
{
	r->looked = r->looked || conn_confirmed(c);
	if (*st != AL_BROKER || !conn_blocked(c) || !r->looked || o->nonblock)
		return false;
	trace("the broker at %s blocked us for a resource alarm (%s); waiting for it to clear",
	      c->where, conn_blocked(c));
	news_alarm(cl, c, wait_end);
	status_clear();
	*st = conn_await_unblocked(c, wait_end);
	if (*st == AL_BUSY)
		fail_context(AL_BUSY, "timed out after %g s waiting: ", o->wait);
	if (*st != AL_OK)
		return false;
	trace("the resource alarm has cleared; connecting again");
	news_alarm_over(cl, c);
	return true;
}

/* --create N: a semaphore that does not exist is made with N slots, under
 * the admin mutex; one that another made meanwhile (the same crontab
 * firing on every host) is used as it is, whatever its size. Only this
 * needs the admin role's permissions. */
static enum al_status create_missing(struct cli *cli, struct sem *s)
{
	struct sem_change change;
	enum al_status st;

	trace("%s does not exist; creating it with %u slot(s) (--create)", cli->name, cli->create);
	status_clear();
	st = sem_admin(s, SEM_CREATE, cli->create, &change);
	if (st == AL_EXISTS) {
		trace("%s was created meanwhile by another: %s", cli->name, status_message());
		status_clear();
		return AL_OK;
	}
	/* Refused at the admin mutex: a crontab of the client role. */
	if (st == AL_ACCESS)
		fail_context(st,
			     "%s does not exist, and --create may not make it (it needs the admin "
			     "role's configure permission; see PERMISSIONS in amqplock(1)): ",
			     cli->name);
	if (st != AL_OK)
		return st;
	out_begin();
	out_str("event", NULL, "created");
	out_str("semaphore", NULL, cli->name);
	out_uint("max", NULL, change.max);
	return out_end();
}

/* Connect and wait for a slot: what acquire and hold share. From the
 * moment it returns AL_OK, the signals amqplock handles are blocked and
 * wait on *sig_fd. */
static enum al_status wait_for_slot(struct cli *cli, struct client *cl, const struct hold_opts *o,
				    struct conn *c, struct sem *s, unsigned *max, int *sig_fd)
{
	struct deadline wait_end, replies_end;
	struct retries retries = {.away_pauses = backoff_start(RECONNECT_FIRST, RECONNECT_LONGEST),
				  .started = now_seconds()};
	enum al_status st;
	bool connecting, created = false;

	/* One deadline for the whole wait, connecting and reconnects
	 * included. */
	wait_deadlines(o, &wait_end, &replies_end);
	exit_on_interrupt(cli, "before a slot of ", " was held; nothing was run");
	cl->waiting_for = "a slot of";
	st = cli_connect(cli, c, s, replies_end);
	/* The lease's token is fixed for the run: a reconnect keeps it. */
	sem_hold_init(s, &cl->hold, (unsigned)(o->lease * 1000),
		      o->lease > 0 ? sem_lease_token() : 0);
	for (;;) {
		connecting = st != AL_OK;
		if (!connecting) {
			connected(cl, c, &retries);
			st = hold_take(s, o, wait_end, &cl->slot, max);
			/* Once: a semaphore destroyed again meanwhile is not
			 * fought over. */
			if (st == AL_NOT_FOUND && cli->create && !created) {
				created = true;
				if ((st = create_missing(cli, s)) == AL_OK)
					st = hold_take(s, o, wait_end, &cl->slot, max);
			}
		}
		if (!alarm_ridden(cl, c, o, wait_end, &retries, &st) &&
		    (st != AL_CONNECTION ||
		     !may_go_on(cl, c, connecting, s, o, wait_end, &retries)))
			break;
		status_clear();
		conn_close(c);
		st = cli_reconnect(cli, c, s, replies_end);
	}
	/* -n: the slot is not free yet, whatever it cost. */
	if (st == AL_CONNECTION && o->nonblock && sem_lease_being_deleted(s)) {
		status_clear();
		st = fail(AL_BUSY, "a slot of %s is still being let go: its lease is being deleted",
			  s->label);
	}
	/* Holding is not limited by -w. */
	conn_limit(c, deadline_never());
	/* Held, but amqplock cannot go on (no signalfd): the slot goes back
	 * at once, its lease too, rather than staying blocked for the
	 * lease's length. */
	if (st == AL_OK && (st = signals_block(o->argv != NULL, sig_fd)) != AL_OK)
		sem_released(s, cl->slot);
	if (st != AL_OK) {
		hold_keeper_abandon(o->keeper);
		conn_close(c);
	} else
		trace("holding slot %u of %u", cl->slot, *max);
	/* A connection made again while holding (with a lease) says which
	 * slot it holds. */
	if (st == AL_OK)
		cli_name_connections(cli, cl->slot);
	return st;
}

enum al_status cmd_acquire(struct cli *cli, int argc, char **argv)
{
	struct client cl = {.cli = cli};
	struct hold_opts o;
	struct conn c;
	struct sem s;
	enum al_status st;
	unsigned max;
	int code, sig_fd;

	(void)argc, (void)argv;
	if ((st = settle_lease(cli, false)) != AL_OK || (st = settle_label(cli)) != AL_OK)
		return st;
	o = hold_opts_from(cli, &cl, NULL);
	if ((st = wait_for_slot(cli, &cl, &o, &c, &s, &max, &sig_fd)) != AL_OK)
		return st;
	news_event(&cl, "acquired");
	/* With --token: "SLOT TOKEN" on one line, for read(1). */
	out_uint(NULL, cl.hold.fencing_token ? "%lu" : "%lu\n", cl.slot);
	if (cl.hold.fencing_token)
		out_uint("token", " %lu\n", cl.hold.fencing_token);
	out_uint("max", NULL, max);
	/* The slot's number unwritten (a closed pipe), nobody can use the
	 * slot: it goes back at once, its lease too. */
	if ((st = out_end()) == AL_OK)
		st = hold_run(&s, cl.slot, &o, sig_fd, &code);
	else
		sem_released(&s, cl.slot);
	conn_close(&c);
	if (st == AL_OK) {
		news_event(&cl, "released");
		st = out_end();
	}
	return st;
}

/* What the command is told, and what it need not know: the broker's
 * address and credentials. */
static void command_env(void *arg, unsigned slot)
{
	struct client *cl = arg;
	char slot_text[16];

	snprintf(slot_text, sizeof(slot_text), "%u", slot);
	setenv("AMQPLOCK_SEMAPHORE", cl->cli->name, 1);
	setenv("AMQPLOCK_SLOT", slot_text, 1);
	/* (an outer hold's; ours, if any, comes with the keeper's go) */
	unsetenv("AMQPLOCK_TOKEN");
	unsetenv("AMQPLOCK_URL");
	unsetenv("AMQP_URL");
}

enum al_status cmd_hold(struct cli *cli, int argc, char **argv)
{
	struct client cl = {.cli = cli};
	char *shell[] = {"/bin/sh", "-c", cli->command_text, NULL};
	struct hold_keeper keeper;
	struct hold_opts o;
	struct conn c;
	struct sem s;
	enum al_status st;
	unsigned max;
	int code = 0, sig_fd;

	(void)argc, (void)argv;
	if ((st = settle_lease(cli, true)) != AL_OK || (st = settle_timeout(cli)) != AL_OK ||
	    (st = settle_label(cli)) != AL_OK)
		return st;
	o = hold_opts_from(cli, &cl, cli->command_text ? shell : cli->command);
	if (o.argv) {
		hold_keeper_init(&keeper);
		o.keeper = &keeper;
		o.events.command_env = command_env;
	}
	/* Output goes to stderr (main.c): stdout belongs to the command. */
	if ((st = wait_for_slot(cli, &cl, &o, &c, &s, &max, &sig_fd)) != AL_OK)
		return st;
	news_event(&cl, "acquired");
	if (cl.hold.fencing_token)
		out_uint("token", NULL, cl.hold.fencing_token);
	out_uint("max", NULL, max);
	out_end();
	st = hold_run(&s, cl.slot, &o, sig_fd, &code);
	conn_close(&c);
	if (st == AL_OK) {
		news_event(&cl, "released");
		out_uint("exit_status", NULL, (unsigned long)code);
		out_end();
		cli->exit_code = code;
	}
	return st;
}

enum al_status cmd_wait(struct cli *cli, int argc, char **argv)
{
	struct backoff pauses = backoff_start(RETRY_FIRST, RETRY_LONGEST);
	struct client cl = {.cli = cli, .waiting_for = "the holders above max of"};
	struct deadline wait_end, replies_end;
	struct slot_list orphans = {0};
	struct retries retries = {.away_pauses = backoff_start(RECONNECT_FIRST, RECONNECT_LONGEST),
				  .started = now_seconds()};
	double start = now_seconds();
	struct conn c;
	struct sem s;
	enum al_status st;
	unsigned max;
	size_t told = 0;
	int tries = 0;
	bool connecting, looked = false, paused;

	(void)argc, (void)argv;
	exit_on_interrupt(cli, "while waiting for the holders above max of ", " to leave");
	wait_deadlines(&cli->hold, &wait_end, &replies_end);
	st = cli_connect(cli, &c, &s, replies_end);
	for (;;) {
		connecting = st != AL_OK;
		if (!connecting) {
			connected(&cl, &c, &retries);
			st = sem_orphans(&s, &max, &orphans);
		}
		/* Nothing at all by that name (a typo?): as status and max
		 * say. One that had holders above max is done once they are
		 * gone; so is a paused one, every holder of which is above
		 * max 0. */
		if (st == AL_OK && !looked && max == 0 && orphans.len == 0 &&
		    (st = sem_paused(&s, &paused)) == AL_OK && !paused)
			st = fail(AL_NOT_FOUND, "semaphore %s does not exist", cli->name);
		looked = looked || st == AL_OK;
		if (st == AL_OK && orphans.len == 0)
			break;
		if (st == AL_OK && orphans.len != told) {
			told = orphans.len;
			trace("%zu holder(s) above max %u of %s; waiting for them to leave", told,
			      max, cli->name);
		}
		if (st != AL_OK) {
			conn_close(&c);
			/* A crash of the broker's side of the connection: a
			 * look again (cli_look_again); the broker away: as
			 * hold and acquire. */
			if (connecting || !cli_look_again(&c, st, &tries)) {
				if (st != AL_CONNECTION ||
				    !reconnect_due(&cl, &c, connecting, &cli->hold, wait_end,
						   &retries))
					break;
				status_clear();
			}
			st = cli_reconnect(cli, &c, &s, replies_end);
			continue;
		}
		if (deadline_passed(wait_end)) {
			st = fail(AL_BUSY,
				  "%zu holder(s) above max %u of %s remain (lowest: slot %u)",
				  orphans.len, max, cli->name, orphans.slot[0]);
			break;
		}
		/* The last pause ends at the deadline, for one more look. */
		sleep_seconds(backoff_next(&pauses, wait_end));
	}
	conn_close(&c);
	free(orphans.slot);
	if (st != AL_OK)
		return st;
	out_begin();
	out_bool("ok", true);
	out_str("semaphore", NULL, cli->name);
	out_uint("waited_ms", NULL, (unsigned long)((now_seconds() - start) * 1000));
	return out_end();
}
