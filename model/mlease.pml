/* model/mlease.pml: a lease made of messages rather than of a queue per
 * hold (docs/design.md, "A lease as a message"), as designed for issue
 * 43, for SPIN to explore (model/run.sh, `make model`). Its rules are
 * src/mlease.c's, which no request uses yet: this model comes first, so
 * that the C follows a design a machine has checked, as model/line.pml
 * did for the line. Its first drafts failed here; what they taught is in
 * docs/design.md.
 *
 * The design:
 *   - each slot has MQ lasting lease queues (durable, classic, made by
 *     create), each of one message at most (x-max-length 1, x-overflow
 *     reject-publish): the broker refuses a publish into a full one;
 *   - a lease is a persistent message carrying its holder's token, which
 *     runs out D after it was published; neither a look nor a refused
 *     publish restarts that (bench/floor lease: out_under_looks);
 *   - a message cannot be looked at without taking it (basic.get,
 *     acknowledged at once: one left unacknowledged no longer counts
 *     against the one message, bench/floor lease: unacked_counts), so a
 *     client keeps what it knows: lease queue k holds its message if a
 *     publish of its own there was confirmed and it has sent no take
 *     there since. Nobody takes a message that is not known to be
 *     theirs, so a known message younger than D is there;
 *   - a claim, one round trip on one channel: -B declared exclusive,
 *     then one message into each lease queue, behind it (a refused
 *     declare closes the channel, and what follows it is dropped); it
 *     holds only if every queue took its message, answered within the
 *     claim window; otherwise it takes back what it got (and knows to
 *     be younger than D) and deletes -B;
 *   - a renewal, one request at a time, each sent once the answer before
 *     it is read: first a message of ours into each queue not known to
 *     hold one (taken where empty); then each queue in turn, while
 *     another queue holds ours from no earlier than our last renewal
 *     and our deadline has not passed, taken and published again (ours,
 *     or what was there put back). A take thus never leaves the slot
 *     without a message of ours, and a claim needs every queue empty
 *     at its publish. The deadline runs from the renewal's first
 *     request; renewed if a message of ours was published afresh and -B
 *     is still ours, lost otherwise;
 *   - a re-attach: a new connection, -B, and a renewal on it, knowing
 *     what was known before: a take whose answer never came counts as
 *     done;
 *   - the end of a lease, once its command has ended (or never started):
 *     the queues known to hold ours, younger than D by the margin (a
 *     take travels), taken (on a new connection if need be), -B deleted;
 *     what we do not know to be ours runs out. The keeper's deadline is
 *     model/hold.pml's;
 *   - the keeper's last act, when amqplock is killed: its command ended,
 *     the queues it was told hold ours, young, taken, as amqplock would
 *     end the lease. amqplock tells it after each confirmed publish, and
 *     before it sends a take (or answers a hand-over: then it forgets
 *     everything);
 *   - a hand-over, instead of that end: the releaser R, its command
 *     ended, -B its own and its deadline not passed, deletes -B and,
 *     behind it on the same channel, answers the waiter W with T, what
 *     it knows of each lease queue and the age of its last renewal.
 *     From then on R takes nothing. W, reading the answer (at any moment
 *     after its ask: a delivery waits in W's socket while W is stopped),
 *     counts every age R gave from its own ask, which R's answer follows,
 *     declares -B, and starts its command under T if -B is its own and
 *     the deadline so inherited has not passed; otherwise it ends the
 *     lease as above. Its first renewal comes at its next tick. Who may
 *     answer whom, and when, is model/hold.pml's: only R can, and only
 *     W's ask. So the answer here comes from R alone, to a W that asked;
 *     W reads it while it waits, not in a claim, or never (it is dropped
 *     once W holds or ends its round, and the lease runs out).
 *
 * Modelled: the broker (-B, the lease queues with their messages and
 * ages, the connections); CLIENTS clients of one login, ROUNDS holds for
 * the first and one fewer for the second, each claiming at any moment
 * (at most once a tick) while it waits: whatever a look would show, and
 * asking for a lease at any moment while it waits;
 * faults, FAULTS per run, at any step: a connection dropped, a broker
 * restart (connections gone, durable queues and persistent messages
 * kept), amqplock killed (its keeper ends its command), amqplock stopped
 * for a tick or for D (the broker drops its connection once its
 * heartbeats stop); an adversary of the same login, ADV acts per run: a
 * holder queue deleted, a message forged into an empty lease queue.
 * Each request is one step at the broker, in the order its channel sent
 * it. Not modelled: the offer, and who may ask and answer whom
 * (model/hold.pml), the line (model/line.pml), the slot queue, an
 * adversary who takes a lease message (as model/hold.pml's never
 * deletes -L: either ends a live lease, which only an eviction may do).
 *
 * Properties, asserted at every step (SAFE, OWN) or every tick (FREE):
 *   SAFE    at most one command runs on the slot;
 *   OWN     while a client's command runs, a take of a queue it knows to
 *           hold its message, younger than D, finds that message: nobody
 *           else has taken it;
 *   FREE    no holder queue outlives its holder;
 *   LAST    a keeper's last act takes no message but its amqplock's.
 *
 * Known-bad variants, each a -D switch that model/run.sh expects to fail:
 *   BUG_ONE_QUEUE      one lease queue, renewed by a take and a publish:
 *                      a connection lost between the two leaves no lease
 *                      while the command runs (SAFE, under faults)
 *   BUG_TAKE_LAST      two queues, but a renewal takes a queue whatever
 *                      the other holds: once a claim under way has filled
 *                      the queue it took first (the adversary deleted -B),
 *                      it takes our last message, and the claim gets both
 *                      (SAFE, under the adversary)
 *   BUG_TAKE_UNKNOWN   the end of a lease takes every queue, known or
 *                      not: after a connection lost in a renewal it takes
 *                      the next holder's message (OWN, under faults)
 *   BUG_TAKE_BACK_OLD  a refused claim takes back every queue it got,
 *                      however long ago: stopped after its answers (its
 *                      connection kept), it takes the message of the
 *                      holder that claimed once its own had run out and
 *                      the adversary had deleted its -B (OWN, under
 *                      faults and the adversary)
 *   BUG_ADOPT_AGE0     the adopter counts the ages R gave from its reading
 *                      of the answer, not from its ask: a message it
 *                      counts as young has run out while its command runs,
 *                      and a claim may take the queue (OWN, under faults)
 *   BUG_KEEPER_TOLD_LATE  the keeper hears of a take once it is answered,
 *                      not before it is sent: amqplock killed in between,
 *                      the keeper takes the next holder's message (LAST,
 *                      under faults)
 *
 * Points that a run must reach (model/run.sh): -DREACH=7 (REACH_MADOPT),
 * an adopter's command started; -DREACH=8 (REACH_LAST_ACT), a keeper's
 * last act taking its amqplock's message.
 *
 * Time: a tick is the renewal interval (1 s); it passes only when nothing
 * else can happen (timeout). Ages, not dates, keep the state space
 * finite. Tokens are 63 random bits in the code; here each is the
 * smallest value none still about has (pick_token), and the adversary's
 * forged token, 200, is never drawn. */

#ifndef D
#define D 4		/* --lease */
#endif
#define MARGIN 2	/* rules.c's lease_margin, in ticks */
#ifndef FAULTS
#define FAULTS 1
#endif
#ifndef ADV
#define ADV 1
#endif
#ifndef ROUNDS
#define ROUNDS 2	/* holds of the first client; the second makes one fewer */
#endif
#ifdef BUG_ONE_QUEUE
#define MQ 1
#define BUG_TAKE_LAST
#endif
#ifndef MQ
#define MQ 2		/* lease queues per slot */
#endif
#define CLIENTS 2
#define NONE 255
#define FORGED 200
#define AGE_CAP (D + 2)

/* src/hold_parts.h's states, and the waiting before them */
mtype = { WAITING, HOLD_HELD, HOLD_AWAY, HOLD_LOST, HOLD_DONE, HOLD_GONE, FINISHED };

/* --- the broker ------------------------------------------------------ */
byte b_owner = NONE;		/* the client whose connection holds -B */
byte m_tok[MQ];			/* lease queue k's message: its token; 0: empty */
byte m_age[MQ];			/* ticks since it was published */
bool conn[CLIENTS];		/* a client's connection is up */

/* --- per client, seen by the clock and the keepers --------------------- */
byte age[CLIENTS];		/* ticks since the last renewal (or claim) sent */
byte rstart[CLIENTS];		/* ticks since the renewal under way began */
bool drift[CLIENTS];		/* the keeper's clock a tick behind */
bool renewed[CLIENTS];		/* renewed in this tick */
bool tried[CLIENTS];		/* a claim or a re-attach tried in this tick */
bool turn[CLIENTS];		/* the command may end in this tick */
byte stop_left[CLIENTS];	/* stopped while > 0 */
bool dead[CLIENTS];		/* amqplock killed */
bool fin[CLIENTS];		/* ended */
byte tok[CLIENTS];		/* the token of the lease a client holds or claims */
/* What a client knows of lease queue k: it holds our message (a publish
 * of ours confirmed, and no take of ours sent since), published KAGE
 * ticks ago. Known and younger than D, it is there: nobody else takes it */
bool know_[CLIENTS * MQ];
byte kage_[CLIENTS * MQ];
#define KNOW(i, k) know_[(i) * MQ + (k)]
#define KAGE(i, k) kage_[(i) * MQ + (k)]
/* What a client's keeper knows of lease queue k: told by amqplock after
 * each confirmed publish (with its age), and before each take is sent
 * (or, BUG_KEEPER_TOLD_LATE, once the take is answered) */
bool kknow_[CLIENTS * MQ];
#define KKNOW(i, k) kknow_[(i) * MQ + (k)]
/* A take only of a message younger than the lease by the margin: a take
 * travels to the broker, and the margin covers its way as it covers the
 * keeper's deadline's (in the model a request arrives as it is sent; in
 * the code it arrives later) */
#define YOUNG(i, k) (KAGE(i, k) < D - MARGIN)

/* W's ask, and how long ago W sent it. R answers only an ask, so the
 * answer is sent after it, however late W reads it (a delivery waits in
 * W's socket for as long as W is stopped): the ages R gives, counted from
 * the ask, are never younger than they are. */
bool asked[CLIENTS];
byte ask_age[CLIENTS];
/* R's answer on its way to W: for whom (NONE: none), T, the age of R's
 * last renewal and what R knew, at the moment R sent it */
byte a_to = NONE;
byte a_tok = 0;
byte a_age = 0;
bool a_know[MQ];
byte a_kage[MQ];

/* The answer for client i dropped: it holds or has ended its round, and
 * the answer's lease runs out */
inline drop_answer(i) {
	if
	:: a_to == i ->
		a_to = NONE; a_tok = 0; a_age = 0;
		a_know[0] = false; a_kage[0] = 0; a_know[MQ - 1] = false; a_kage[MQ - 1] = 0
	:: else -> skip
	fi;
	asked[i] = false; ask_age[i] = 0
}

/* --- ghosts ------------------------------------------------------------ */
byte running = 0;
bool cmd[CLIENTS];
byte faults = 0, adv = 0;
bool chaos_turn = false;
byte pk = 0;			/* pick_token's scratch */

#define stopped(i) (stop_left[i] > 0)
#define can(i) (!stopped(i) && !dead[i])

/* the broker drops connection i: its -B goes with it */
inline drop_conn(i) {
	conn[i] = false;
	if
	:: b_owner == i -> b_owner = NONE
	:: else -> skip
	fi
}

/* the smallest token that no client and no message has */
inline pick_token(v) {
	pk = 1;
	do
	:: pk == tok[0] || pk == tok[1] || pk == m_tok[0] || pk == m_tok[MQ - 1] || pk == a_tok -> pk++
	:: else -> break
	od;
	v = pk;
	pk = 0
}

inline cmd_start(i) {
	cmd[i] = true;
	running++;
	assert(running <= 1)	/* SAFE */
}
inline cmd_end(i) {
	if
	:: cmd[i] -> cmd[i] = false; running--
	:: else -> skip
	fi
}

#define KEEPER_DUE(i) (age[i] >= D - MARGIN + drift[i])

/* a publish of token t into lease queue k on client i's channel, live
 * (ch): taken only into an empty queue */
inline publish(i, ch, k, t, ok) {
	ok = false;
	if
	:: ch && conn[i] && m_tok[k] == 0 -> m_tok[k] = t; m_age[k] = 0; ok = true
	:: else -> skip
	fi
}
/* a take (basic.get, acknowledged at once) from lease queue k on client
 * i's connection: what was there, into t. While our command runs, a
 * queue we know to hold our message, younger than D, holds it (OWN) */
inline take(i, k, t) {
#ifndef BUG_KEEPER_TOLD_LATE
	KKNOW(i, k) = false;	/* the keeper told first */
#endif
	t = 0;
	if
	:: conn[i] -> t = m_tok[k]; m_tok[k] = 0; m_age[k] = 0;
		assert(!(cmd[i] && KNOW(i, k) && KAGE(i, k) < D) || t == tok[i])	/* OWN */
	:: else -> skip
	fi;
	KNOW(i, k) = false
}
/* a publish of our token into lease queue k: known if taken */
inline publish_ours(i, ch, k, ok) {
	publish(i, ch, k, tok[i], ok);
	KNOW(i, k) = ok;
	KKNOW(i, k) = ok;	/* the keeper told, once the confirm is read */
	KAGE(i, k) = 0
}
/* BUG_KEEPER_TOLD_LATE: the keeper learns of our takes only at amqplock's
 * next step */
inline tell_keeper(i) {
#ifdef BUG_KEEPER_TOLD_LATE
	KKNOW(i, 0) = KNOW(i, 0); KKNOW(i, MQ - 1) = KNOW(i, MQ - 1)
#else
	skip
#endif
}

/* Another queue than k holds our message, published no earlier than our
 * last renewal, whose deadline has not passed: it outlasts our deadline
 * whatever happens to k */
#define FRESH(i, j) (KNOW(i, j) && KAGE(i, j) <= age[i] && age[i] < D - MARGIN)
#define OTHER_KNOWN(k) (k != 0 && FRESH(i, 0) || k != MQ - 1 && FRESH(i, MQ - 1))

/* --- a client: amqplock hold, ROUNDS times ---------------------------- */
proctype client(byte i) {
	mtype state = WAITING;
	byte rounds = 0, k, t;
	bool got_b, ok, all, fresh, voided, handing;

	{
	conn[i] = true;
waiting:
	if
	/* a claim, at any moment: whatever a look showed, the broker decides */
	:: atomic { can(i) && !tried[i] ->
		tried[i] = true;
		conn[i] = true;
		pick_token(tok[i]);
		got_b = false;
		age[i] = 0 }
	/* an ask for a lease offered (model/hold.pml's offer and ask) */
	:: atomic { !asked[i] && can(i) -> asked[i] = true; ask_age[i] = 0; goto waiting }
	/* R's answer read, at any moment after the ask: T, and what R knew,
	 * every age counted from the ask */
	:: atomic { a_to == i && asked[i] && can(i) ->
		conn[i] = true;
		tok[i] = a_tok;
		k = 0;
		do
		:: k < MQ ->
			KNOW(i, k) = a_know[k];
			KKNOW(i, k) = a_know[k];	/* the keeper told */
#ifndef BUG_ADOPT_AGE0
			t = ask_age[i] + a_kage[k];
#else
			t = a_kage[k];
#endif
			if :: t < AGE_CAP -> KAGE(i, k) = t :: else -> KAGE(i, k) = AGE_CAP fi;
			k++
		:: k == MQ -> break
		od;
#ifndef BUG_ADOPT_AGE0
		t = ask_age[i] + a_age;
#else
		t = a_age;
#endif
		if :: t < AGE_CAP -> age[i] = t :: else -> age[i] = AGE_CAP fi;
		t = 0;
		drop_answer(i);
		k = 0;
		got_b = false;
		goto adopt }
	fi;
	atomic {
		if
		:: conn[i] && b_owner == NONE -> b_owner = i; got_b = true
		:: else -> skip
		fi }
	/* one message into each lease queue, behind -B */
	k = 0;
	do
	:: k < MQ -> atomic { publish_ours(i, got_b, k, ok); k++ }
	:: k == MQ -> break
	od;
	/* the answers read: late, if amqplock was stopped meanwhile; a close
	 * from the broker behind them voids them */
	atomic { can(i) ->
		all = got_b && conn[i];
		k = 0;
		do
		:: k < MQ -> all = all && KNOW(i, k); k++
		:: k == MQ -> break
		od;
		if
		:: all && age[i] == 0 ->
			state = HOLD_HELD;
			renewed[i] = true;
			drop_answer(i);
			cmd_start(i);
			goto holding
		:: all && age[i] > 0 ->
			/* void: answered after the claim window; the connection
			 * dropped, the lease ended apart */
			drop_conn(i);
			voided = true;
			goto end_apart
		:: else -> skip
		fi }
	/* refused: our messages taken back, those younger than D by the
	 * margin (a stop since the answers may have outlasted them, and the
	 * queue may hold the next holder's), -B deleted, on the same channel */
	k = 0;
	do
	:: k < MQ ->
		atomic { can(i) ->
			tell_keeper(i);
			if
#ifndef BUG_TAKE_BACK_OLD
			:: KNOW(i, k) && YOUNG(i, k) && got_b -> take(i, k, t)
#else
			:: KNOW(i, k) && got_b -> take(i, k, t)
#endif
			:: else -> skip
			fi;
			t = 0; k++ }
	:: k == MQ -> break
	od;
	atomic { can(i) ->
		tell_keeper(i);
		if
		:: b_owner == i && conn[i] -> b_owner = NONE
		:: else -> skip
		fi;
		got_b = false;
		k = 0;
		do
		:: k < MQ -> KNOW(i, k) = false; KKNOW(i, k) = false; k++
		:: k == MQ -> break
		od;
		tok[i] = 0;
		goto waiting }

adopt:
	/* -B declared: R deleted it before it answered */
	atomic {
		if
		:: conn[i] && b_owner == NONE -> b_owner = i; got_b = true
		:: else -> skip
		fi }
	/* its answer read: the command starts under T if -B is ours and the
	 * deadline inherited from R's last renewal has not passed; else the
	 * lease is ended as W's own */
	atomic { can(i) ->
		if
		:: got_b && conn[i] && b_owner == i && age[i] < D - MARGIN ->
			state = HOLD_HELD;
			renewed[i] = true;	/* the first renewal at the next tick */
			cmd_start(i);
#if defined(REACH) && REACH == 7
			assert(false);
#endif
			goto holding
		:: else ->
			voided = true;
			goto end_apart
		fi }

holding:
	do
	/* HOLD_HELD, HOLD_EV_TICK: the renewal (below) */
	:: atomic { state == HOLD_HELD && can(i) && conn[i] && !renewed[i] ->
		renewed[i] = true;
		goto renew }
	/* HOLD_HELD, HOLD_EV_CONN_LOST */
	:: atomic { state == HOLD_HELD && !conn[i] -> state = HOLD_AWAY }
	/* HOLD_AWAY: a re-attach: a new connection, -B, and a renewal on it */
	:: atomic { state == HOLD_AWAY && can(i) && !tried[i] ->
		tried[i] = true;
		conn[i] = true;
		if
		:: b_owner == NONE -> b_owner = i; goto renew
		:: else -> skip	/* -B not ours: tried again next tick */
		fi }
	/* HOLD_AWAY, HOLD_EV_LEASE_OUT: amqplock's deadline */
	:: atomic { state == HOLD_AWAY && can(i) && age[i] >= D - MARGIN -> state = HOLD_LOST }
	/* HOLD_LOST: --lost-signal, SIGKILL after --grace; then HOLD_GONE */
	:: atomic { state == HOLD_LOST && can(i) && turn[i] -> cmd_end(i); state = HOLD_GONE }
	:: atomic { state == HOLD_LOST && !cmd[i] -> state = HOLD_GONE }
	/* HOLD_EV_ENDED: the command ends, now or at a later tick */
	:: atomic { (state == HOLD_HELD || state == HOLD_AWAY) && can(i) && turn[i] && cmd[i] ->
		cmd_end(i);
		state = HOLD_DONE }
	/* the keeper ended it (its deadline): amqplock finds it ended */
	:: atomic { (state == HOLD_HELD || state == HOLD_AWAY) && can(i) && !cmd[i] ->
		state = HOLD_LOST }
	:: atomic { can(i) && turn[i] -> turn[i] = false }	/* not in this tick */
	:: atomic { state == HOLD_GONE || state == HOLD_DONE -> break }
	od;
	/* a hand-over instead of the end: -B deleted, the answer behind it */
	atomic { can(i) ->
		if
		:: state == HOLD_DONE && conn[i] && b_owner == i && age[i] < D - MARGIN &&
		   asked[1 - i] && a_to == NONE ->
			b_owner = NONE;
			handing = true
		:: true -> skip
		fi }
	if
	:: handing -> goto answer
	:: else -> skip
	fi;
	goto end_apart;

answer:
	/* sent behind the delete: lost with the connection, and then the
	 * lease runs out. Decided: R takes nothing any more, nor does its
	 * keeper, told first */
	atomic {
		KKNOW(i, 0) = false; KKNOW(i, MQ - 1) = false;
		if
		:: conn[i] ->
			a_to = 1 - i; a_tok = tok[i]; a_age = age[i];
			k = 0;
			do
			:: k < MQ -> a_know[k] = KNOW(i, k); a_kage[k] = KAGE(i, k); k++
			:: k == MQ -> break
			od
		:: else -> skip
		fi;
		handing = false;
		goto next_round }

renew:
	/* A renewal, one request at a time, each sent once the answer before
	 * it is read. First ours into every queue not known to hold it (taken
	 * where empty); then each queue, while another is known to hold ours,
	 * taken and published again: ours, or what was there put back. A take
	 * thus never leaves the slot without our message, which no claim can
	 * then get past. Renewed if a message of ours was published afresh,
	 * -B still ours: HOLD_EV_BACK from away; else HOLD_EV_REFUSED. */
	atomic { fresh = false; rstart[i] = 0; k = 0 }
	do
	:: k < MQ ->
		atomic { can(i) ->
			if
			:: !KNOW(i, k) -> publish_ours(i, true, k, ok); fresh = fresh || ok
			:: else -> skip
			fi;
			k++ }
	:: k == MQ -> break
	od;
	k = 0;
	do
	:: k < MQ ->
		/* decided as the take is sent */
		atomic { can(i) ->
			if
#ifndef BUG_TAKE_LAST
			:: OTHER_KNOWN(k) -> all = true; take(i, k, t)
			:: else -> all = false
#else
			:: all = true; take(i, k, t)
#endif
			fi }
		atomic { can(i) ->
			tell_keeper(i);
			if
			:: !all -> skip
			:: all && (t == 0 || t == tok[i]) -> publish_ours(i, true, k, ok); fresh = fresh || ok
			:: all && t != 0 && t != tok[i] -> publish(i, true, k, t, ok)	/* put back */
			fi;
			all = false; t = 0; k++ }
	:: k == MQ -> break
	od;
	atomic { can(i) ->
		if
		:: conn[i] && b_owner == i && fresh ->
			/* the deadline runs from the renewal's first request */
			age[i] = rstart[i]; renewed[i] = true; state = HOLD_HELD
		:: conn[i] && !(b_owner == i && fresh) ->
			state = HOLD_LOST
		:: else -> skip	/* lost meanwhile: away */
		fi;
		fresh = false;
		goto holding }

end_apart:
	/* The lease ended once the command has ended (or never started): the
	 * queues known to hold ours taken, on a new connection if need be,
	 * -B deleted. What we do not know to be ours runs out. */
	atomic { can(i) -> conn[i] = true; k = 0 }
	do
	:: k < MQ ->
		atomic { can(i) ->
			tell_keeper(i);
			if
#ifndef BUG_TAKE_UNKNOWN
			:: KNOW(i, k) && YOUNG(i, k) -> take(i, k, t)
			:: else -> KNOW(i, k) = false; KKNOW(i, k) = false
#else
			:: take(i, k, t)
#endif
			fi;
			t = 0; k++ }
	:: k == MQ -> break
	od;
	atomic { can(i) ->
		tell_keeper(i);
		if
		:: b_owner == i && conn[i] -> b_owner = NONE
		:: else -> skip
		fi }
next_round:
	atomic {
		if
		:: !voided -> rounds++
		:: else -> voided = false
		fi;
		tok[i] = 0;
		state = WAITING;
		drop_answer(i);
		got_b = false; ok = false; all = false;
		k = 0;
		do
		:: k < MQ -> KNOW(i, k) = false; KKNOW(i, k) = false; k++
		:: k == MQ -> break
		od;
		k = 0;
		if
		:: rounds < ROUNDS - i -> goto waiting
		:: else -> goto finished
		fi }
	} unless { dead[i] };
finished:
	atomic { state = FINISHED; fin[i] = true }
}

/* --- the keeper: its deadline, and its last act when amqplock dies ----- */
proctype keeper(byte i) {
	byte k, t;
end:	do
	:: atomic { cmd[i] && KEEPER_DUE(i) -> cmd_end(i) }
	:: atomic { dead[i] -> cmd_end(i); drop_conn(i); break }
	od;
	/* Its last act, once the command has ended: on a connection of its
	 * own, each queue it was told holds amqplock's message, young, taken
	 * (decided as the take is sent). The rest runs out. */
	k = 0;
	do
	:: k < MQ ->
		atomic {
			if
			:: KKNOW(i, k) && YOUNG(i, k) ->
				t = m_tok[k]; m_tok[k] = 0; m_age[k] = 0;
				assert(t == 0 || t == tok[i]);	/* LAST */
#if defined(REACH) && REACH == 8
				assert(t != tok[i]);
#endif
				skip
			:: else -> skip
			fi;
			KKNOW(i, k) = false; t = 0; k++ }
	:: k == MQ -> break
	od
}

/* --- faults and the adversary: at most one act per tick ----------------- */
active proctype chaos() {
	byte i, k;
end:	do
	:: atomic { chaos_turn -> chaos_turn = false }	/* nothing now */
	:: atomic { chaos_turn && faults < FAULTS -> chaos_turn = false; faults++;
		if
		:: i = 0
		:: i = 1
		fi;
		if
		:: conn[i] -> drop_conn(i)			/* a connection dropped */
		:: !dead[i] && !fin[i] -> dead[i] = true	/* amqplock killed */
		:: !dead[i] && !fin[i] && !stopped(i) -> stop_left[i] = 1	/* stopped */
		:: !dead[i] && !fin[i] && !stopped(i) -> stop_left[i] = D
		:: drop_conn(0); drop_conn(1)		/* a broker restart */
		fi;
		i = 0 }
	:: atomic { chaos_turn && adv < ADV -> chaos_turn = false; adv++;
		if
		:: b_owner != NONE -> b_owner = NONE		/* a -B deleted */
		:: m_tok[0] == 0 -> m_tok[0] = FORGED; m_age[0] = 0	/* a message forged */
		:: m_tok[MQ - 1] == 0 -> m_tok[MQ - 1] = FORGED; m_age[MQ - 1] = 0
		:: else -> skip
		fi }
	od
}

/* --- time: a tick passes when nothing else can happen ------------------ */
active proctype clock() {
	byte i;
end:	do
	:: timeout ->
		atomic {
			/* FREE */
			assert(b_owner == NONE || !fin[b_owner] && !dead[b_owner]);
			/* a message runs out D after it was published */
			i = 0;
			do
			:: i < MQ ->
				if
				:: m_tok[i] != 0 && m_age[i] + 1 >= D -> m_tok[i] = 0; m_age[i] = 0
				:: m_tok[i] != 0 && m_age[i] + 1 < D -> m_age[i]++
				:: else -> skip
				fi;
				i++
			:: else -> break
			od;
			i = 0;
			do
			:: i < CLIENTS ->
				if :: age[i] < AGE_CAP -> age[i]++ :: else -> skip fi;
				if :: rstart[i] < AGE_CAP -> rstart[i]++ :: else -> skip fi;
				if :: stop_left[i] > 0 -> stop_left[i]-- :: else -> skip fi;
				/* a stopped client's heartbeats stop: the broker drops it */
				if :: stop_left[i] > 0 && conn[i] -> drop_conn(i) :: true -> skip fi;
				renewed[i] = false; tried[i] = false;
				if :: KAGE(i, 0) < AGE_CAP -> KAGE(i, 0)++ :: else -> skip fi;
				if :: KAGE(i, MQ - 1) < AGE_CAP -> KAGE(i, MQ - 1)++ :: else -> skip fi;
				turn[i] = cmd[i];
				i++
			:: else -> break
			od;
			if :: asked[0] && ask_age[0] < AGE_CAP -> ask_age[0]++ :: else -> skip fi;
			if :: asked[1] && ask_age[1] < AGE_CAP -> ask_age[1]++ :: else -> skip fi;
			i = 0;
			chaos_turn = true
		}
	od
}

init {
	atomic {
		chaos_turn = true;
		/* the keepers' clocks: on time, or a tick behind amqplock's */
		if
		:: drift[0] = true
		:: skip
		fi;
		if
		:: drift[1] = true
		:: skip
		fi;
		turn[0] = true; turn[1] = true;
		run keeper(0); run keeper(1);
		run client(0); run client(1)
	}
}
