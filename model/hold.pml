/* model/hold.pml: the holder's protocol on one slot, as src/ runs it,
 * for SPIN to explore (model/run.sh, `make model`). Nothing in src/ uses
 * it: it is docs/design.md's safety argument in a form a machine checks.
 * A change to the protocol changes this file in the same commit.
 *
 * Modelled (docs/design.md, section 4, "Handing the lease over", and
 * src/hold.c's actions[state][event], whose names the labels carry):
 *   - the broker: the exclusive holder queue -B (it dies with the
 *     connection that declared it; asks published into it die with it),
 *     the slot queue -A, the lease -L with its token and expiry (classic:
 *     D after its last use; quorum: checked lazily, up to QSTEP later),
 *     the line #waiters (transient notes, gone within a tick: an offer in
 *     0.5 s, the others in 1 s; all of them in a broker restart);
 *   - two honest clients of one login, ROUNDS holds and one fewer: look, wait in
 *     line, claim (-B and -L on two channels, granted in either order,
 *     interleaved with the other claimer; a lease granted without -B asks
 *     again within the tick, then gives back), the claim window, renewal
 *     every tick, away and re-attach, amqplock's own deadline, release,
 *     the hand-over (offer, ask into -B, decision within X, answer,
 *     adoption by the answer's token), the keeper's deadline and its last
 *     act when amqplock dies;
 *   - faults, FAULTS per run, at any point of any tick: a connection
 *     dropped, a broker restart (connections and notes gone; durable
 *     queues kept), amqplock killed (its keeper left), amqplock stopped
 *     for 1 tick or for D (its keeper not; the broker drops the stopped
 *     client's connection once its heartbeats stop); a keeper's clock
 *     may run a tick behind amqplock's (the margin covers that);
 *   - an adversary of the holders' own login, ADV actions per run: a
 *     forged offer, an answer with the live lease's token (tokens are
 *     public) and a guessed id, a seen answer replayed, a note taken from
 *     the line, a holder queue deleted, the slot removed or added again;
 *   - with -DEVICT, an administrator's `amqplock evict` (src/evict.c):
 *     once someone holds, the slot queue deleted, then, once neither -B
 *     nor -L is left, made again and the line woken;
 *   - with -DTOKEN, the fencing token as designed for issue 44 (src/ does
 *     not take one yet): once its claim or adoption is granted, and
 *     before its command starts, a holder appends to the semaphore's
 *     stream, and the offset of its entry is its token;
 *   - with -DDRAIN, an administrator's `max N --drain` (src/drain.c):
 *     once someone holds, the drain marker -D made, then the slot queue
 *     deleted, then the marker deleted if neither -B nor -L is left;
 *     later the slot queue made again, then the marker deleted. A holder
 *     takes its slot as there while either -A or -D is (its verification
 *     and its re-attach); a claim checks -A once its -B is granted.
 *
 * Properties, asserted at every step (SAFE) or every tick:
 *   SAFE    at most one command runs on the slot: the ghost `running`
 *           goes up when a command starts and down when its last process
 *           has ended (with one slot, "at most max" is the same);
 *   FREE    no holder queue outlives its holder (the lease runs out D
 *           after its last use, + QSTEP: the clock does that), so a slot
 *           whose holder is gone is free again within D + QSTEP;
 *   SERVED  while no fault and no adversary has acted, no tick passes
 *           with the slot free and someone in line: a release wakes the
 *           line or hands the lease over, and the first in line takes the
 *           slot at once. (The model has no horizon, but a waiter's
 *           polls make "eventually" hold trivially; SERVED is the bounded
 *           promise that the line itself keeps.)
 *   EVICTED when an eviction gives the slot back, no command runs: the
 *           evicted one has ended with every process, and nobody else
 *           could start one meanwhile. (SERVED says nothing once an
 *           eviction has begun: it removes the slot, as the adversary
 *           may.)
 *   FENCED  every grant's token is larger than every earlier grant's: a
 *           resource that refuses tokens below the largest it has seen
 *           refuses a late write of an earlier holder.
 *   DRAINED no command starts on a slot that a drain has removed, but
 *           one whose claim or adoption checked the slot queue before it
 *           went: the holder of the drained slot runs on, nobody else
 *           gets the slot until it is made again.
 *
 * Known-bad variants, each a -D switch that model/run.sh expects to fail
 * (all but BUG_NO_WAKE with -DSAFE_ONLY, which leaves SERVED out, so that
 * the counterexample is the overlap or the stranded holder queue):
 *   BUG_ADOPT_OFFER        a waiter takes an offer (first delivery or
 *                          redelivered) for the lease: it adopts by the
 *                          lease's public token without asking the holder
 *   BUG_KEEPER_LATE        the keeper's deadline falls after the lease's
 *   BUG_LATE_CLAIM         a claim answered late is kept, not voided
 *   BUG_OFFERER_ENDS_LEASE the offerer ends the lease after its answer
 *   BUG_NO_WAKE            a release wakes nobody
 *   BUG_ANY_ANSWER         an answer is taken without checking its id
 *   BUG_EVICT_FREES        an eviction frees the slot at once (deletes
 *                          -B and -L) instead of removing the slot queue
 *   BUG_TOKEN_EARLY        the token is drawn when the claim is sent, not
 *                          once it is granted
 *   BUG_DRAIN_ADMITS       a claim takes the drain marker for the slot
 *                          queue: a slot drained and left is taken
 *
 * Time: a tick is the renewal interval (1 s); it passes only when nothing
 * else can happen (timeout), so every process has done what it does at
 * this time. Counters hold ages, not dates, so the state space is finite
 * without a horizon. X (0.5 s) is "within the tick of the offer", ASK_WAIT
 * and the claim window W one tick, the margin MARGIN ticks.
 *
 * Tokens, nonces and ids are 63 random bits in the code, never met twice;
 * here each is the smallest value that none still about has (pick_*),
 * and the adversary's guessed id, 200, is never drawn. */

#ifndef D
#define D 4		/* --lease */
#endif
#define MARGIN 2	/* rules.c's lease_margin, in ticks */
#define QSTEP 1		/* a quorum lease's lazy expiry */
#define POLL 2		/* a waiter looks again on its own */
#ifndef FAULTS
#define FAULTS 1
#endif
#ifndef ADV
#define ADV 1
#endif
#ifndef ROUNDS
#define ROUNDS 2	/* holds of the first client; the second makes one fewer */
#endif
#define CLIENTS 2
#define NONE 255
#define AGE_CAP (D + 2)

mtype = { WAKE, OFFER, ANSWER };
/* src/hold_parts.h's states, and the waiting before them */
mtype = { WAITING, HOLD_HELD, HOLD_AWAY, HOLD_LOST, HOLD_DONE, HOLD_GONE, FINISHED };

/* --- the broker ------------------------------------------------------ */
byte b_owner = NONE;		/* the client whose connection holds -B */
bool a_exists = true;		/* the slot queue */
byte l_token = 0;		/* the lease's token; 0: no lease */
byte l_age = 0;			/* ticks since its last use */
bool l_quorum;			/* chosen at the start */
bool conn[CLIENTS];		/* a client's connection is up */
chan line = [3] of { mtype, byte, byte, byte };	/* kind, nonce, id, token */
chan bq = [1] of { byte, byte };		/* asks in -B: nonce, id */

/* --- per client, seen by the clock and the keepers --------------------- */
byte age[CLIENTS];		/* ticks since the last renewal (or claim) sent */
bool drift[CLIENTS];		/* the keeper's clock a tick behind */
bool renewed[CLIENTS];		/* renewed in this tick */
bool tried[CLIENTS];		/* a re-attach tried in this tick */
bool turn[CLIENTS];		/* the command may end in this tick */
bool fresh[CLIENTS];		/* our offer was made in this tick (X) */
byte poll_left[CLIENTS];
byte stop_left[CLIENTS];	/* stopped while > 0 */
bool dead[CLIENTS];		/* amqplock killed */
bool in_line[CLIENTS];		/* consuming #waiters */
byte head = NONE;		/* the line's active consumer */
bool fin[CLIENTS];		/* ended */
byte tok[CLIENTS];		/* the lease a client holds, claims or adopts */
byte mn[CLIENTS], mid[CLIENTS];	/* its ask while in line: the offer's nonce, its id */
byte on[CLIENTS];		/* its offer's nonce, as a releaser */
byte k_token[CLIENTS];		/* the lease the keeper ends if amqplock dies */
bool k_ends[CLIENTS];		/* ... unless it was handed over */

#ifdef DRAIN
bool d_exists = false;		/* the drain marker */
#define PRESENT (a_exists || d_exists)
#else
#define PRESENT a_exists
#endif
#ifdef BUG_DRAIN_ADMITS
#define CLAIM_SEES PRESENT
#else
#define CLAIM_SEES a_exists
#endif

/* --- ghosts ------------------------------------------------------------ */
byte running = 0;
bool cmd[CLIENTS];
byte faults = 0, adv = 0;
bool chaos_turn = false;
bool disturbed = false;		/* a fault or the adversary has acted */
byte removals = 0;		/* the drain's removals of the slot queue */
bool drained = false;		/* the slot removed by the drain, not yet back */
byte checked[CLIENTS];		/* removals when the client last saw -A */
byte pk = 0;			/* pick_*'s scratch */
byte pub_nonce = 0;		/* the last offer's nonce: the line is public */
byte seen_nonce = 0, seen_id = 0, seen_token = 0;	/* the last answer */

#define stopped(i) (stop_left[i] > 0)
#define slot_free (b_owner == NONE && l_token == 0 && a_exists)
#define someone_in_line (in_line[0] && !cmd[0] || in_line[1] && !cmd[1])
#define can(i) (!stopped(i) && !dead[i])

/* the line is single-active-consumer: its head alone gets notes; one
 * who joins again (a new connection) is last */
inline join(i) {
	if
	:: !in_line[i] -> in_line[i] = true;
		if
		:: head == NONE -> head = i
		:: else -> skip
		fi
	:: else -> skip
	fi
}
inline leave(i) {
	in_line[i] = false;
	if
	:: head == i && in_line[1 - i] -> head = 1 - i
	:: head == i && !in_line[1 - i] -> head = NONE
	:: else -> skip
	fi
}

inline empty_bq() {
	do
	:: bq?_, _
	:: empty(bq) -> break
	od
}

/* the broker drops connection i: its -B goes, and its place in line */
inline drop_conn(i) {
	conn[i] = false;
	leave(i);
	if
	:: b_owner == i -> b_owner = NONE; empty_bq()
	:: else -> skip
	fi
}

inline delete_b(i) {
	if
	:: b_owner == i -> b_owner = NONE; empty_bq()
	:: else -> skip
	fi
}

/* sem_wake_line */
inline wake() {
#ifndef BUG_NO_WAKE
	if
	:: nfull(line) -> line!WAKE, 0, 0, 0
	:: full(line) -> skip
	fi
#else
	skip
#endif
}

/* lease_drop by token: a passive declare, a declare with the token, and
 * the delete, in one round trip; woke: it was ours and has gone */
inline end_lease(tk, woke) {
	woke = false;
	if
	:: l_token == tk && tk != 0 -> l_token = 0; woke = true
	:: else -> skip
	fi
}

/* the smallest value no live token, nonce or id has: the code's 63
 * random bits never repeat one that is still about */
inline pick_token(v) {
	pk = 1;
	do
	:: pk == l_token || pk == tok[0] || pk == tok[1] || pk == k_token[0] || pk == k_token[1] ||
	   pk == seen_token -> pk++
	:: else -> break
	od;
	v = pk;
	pk = 0
}
inline pick_nonce(v) {
	pk = 1;
	do
	:: pk == on[0] || pk == on[1] || pk == mn[0] || pk == mn[1] || pk == seen_nonce ||
	   pk == pub_nonce -> pk++
	:: else -> break
	od;
	v = pk;
	pk = 0
}
inline pick_id(v) {
	pk = 1;
	do
	:: pk == mid[0] || pk == mid[1] || pk == seen_id -> pk++
	:: else -> break
	od;
	v = pk;
	pk = 0
}

#ifdef TOKEN
/* The fencing token (-DTOKEN): an append to the semaphore's stream once
 * the slot is granted, its offset the token; before the command starts. */
byte seq = 0;			/* the stream's next offset */
byte gtok[CLIENTS];		/* the token of a client's grant */
byte last_grant = 0;		/* ghost: the latest grant's token */
inline draw_token(i) {
	if :: seq < 250 -> seq++ :: else -> skip fi;
	gtok[i] = seq
}
#endif

inline cmd_start(i) {
	assert(!drained || checked[i] < removals);	/* DRAINED */
#ifdef TOKEN
#ifndef BUG_TOKEN_EARLY
	draw_token(i);
#endif
	assert(gtok[i] > last_grant);	/* FENCED */
	last_grant = gtok[i];
#endif
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

/* a renewal (or a claim) sent now, answered in full: R moves, and with
 * it both deadlines (amqplock's, and its keeper's on the keeper's clock) */
inline renew_sent(i) {
	age[i] = 0
}

#ifdef BUG_KEEPER_LATE
#define KEEPER_DUE(i) (age[i] >= D + 1)
#else
#define KEEPER_DUE(i) (age[i] >= D - MARGIN + drift[i])
#endif

/* the broker's answers to a claim's two halves */
inline grant_l(i) {
	if
	:: conn[i] && l_token == 0 -> l_token = tok[i]; l_age = 0; got_l = true
	:: else -> skip
	fi
}
inline grant_b(i) {
	if
	:: conn[i] && b_owner == NONE -> b_owner = i; got_b = true
	:: else -> skip
	fi
}

/* a note's fields, once read, are forgotten: they are not state */
#define forget() kind = 0; n = 0; id = 0; t = 0

/* --- a client: amqplock hold, ROUNDS times ---------------------------- */
proctype client(byte i) {
	mtype state = WAITING;
	byte rounds = 0;
	bool got_b, got_l, got_a, woke;
	mtype kind;
	byte n, id, t;

	/* amqplock killed: it does nothing more (its keeper acts) */
	{
	conn[i] = true;
look:
	/* a look (connected again if need be): a free slot is claimed, a
	 * held one waited for in line */
	atomic { can(i) ->
		got_b = false; got_l = false; got_a = false; woke = false;
		conn[i] = true;
		join(i);
		if
		:: slot_free -> goto claim
		:: else -> poll_left[i] = POLL
		fi }
waiting:
	if
	:: atomic { can(i) && conn[i] && head == i && line?[kind, n, id, t] ->
		line?kind, n, id, t;
		if
		:: kind == WAKE -> forget(); goto claim
		:: kind == OFFER ->
#ifdef BUG_ADOPT_OFFER
			tok[i] = l_token;
			forget(); goto adopt;
#endif
			if
			:: b_owner == NONE -> forget(); goto waiting	/* the ask returned: declined */
			:: else ->
				mn[i] = n;
				pick_id(mid[i]);
				if
				:: nfull(bq) -> bq!n, mid[i]
				:: full(bq) -> skip
				fi;
				forget(); goto waiting
			fi
		:: kind == ANSWER ->
			if
#ifdef BUG_ANY_ANSWER
			:: mn[i] != 0 && n == mn[i] ->
#else
			:: mn[i] != 0 && n == mn[i] && id == mid[i] ->
#endif
				mn[i] = 0; mid[i] = 0; tok[i] = t; forget(); goto adopt
			:: else -> forget(); goto waiting
			fi
		fi }
	:: atomic { can(i) && (poll_left[i] == 0 || !conn[i]) -> goto look }
	:: atomic { dead[i] -> goto finished }
	fi;

claim:
	/* the claim, one round trip: -B exclusive and -L with a new tok[i],
	 * on two channels: the broker grants them in either order, and may
	 * handle the other claimer's in between. The keeper is readied with
	 * the tok[i] as the claim is sent. */
	atomic {
		pick_token(tok[i]);
#if defined(TOKEN) && defined(BUG_TOKEN_EARLY)
		draw_token(i);
#endif
		got_b = false; got_l = false;
#ifdef DRAIN
		got_a = false;
#else
		got_a = a_exists;
#endif
		k_token[i] = tok[i]; k_ends[i] = true;
		renew_sent(i) }
	if
	:: atomic { conn[i] && b_owner == NONE -> b_owner = i; got_b = true };
	   atomic { grant_l(i) }
	:: atomic { grant_l(i) };
	   atomic { grant_b(i) }
	fi;
#ifdef DRAIN
	/* the slot queue checked, after -B on its channel (without a drain,
	 * checked as the claim is sent: the same outcomes, fewer states) */
	atomic { got_a = CLAIM_SEES; checked[i] = removals }
#endif
	/* the answers read: late, if amqplock was stopped meanwhile */
	atomic { can(i) || dead[i] ->
		if
		:: dead[i] -> goto finished
		:: else -> skip
		fi;
		/* a close from the broker behind the answers voids them, if it
		 * has arrived by then */
		if
		:: !conn[i] -> got_b = false
		:: true -> skip
		fi;
		if
		:: got_l && !got_b && got_a && conn[i] -> goto retry_b
		:: else -> goto decide
		fi }
retry_b:
	/* granted the lease, refused -B: another claimer's half, which it
	 * gives back; asked for again within the tick (claim.c) */
	if
	:: atomic { can(i) && conn[i] && b_owner == NONE -> b_owner = i; got_b = true }
	:: atomic { can(i) && (age[i] > 0 || !conn[i]) -> skip }
	fi;
decide:
	atomic { can(i) ->
		if
		:: got_b && got_l && got_a ->
#ifndef BUG_LATE_CLAIM
			if
			:: age[i] > 0 ->
				/* void: answered after the claim window; the
				 * connection dropped, the lease ended on a new one */
				drop_conn(i);
				end_lease(tok[i], woke);
				if
				:: woke -> wake()
				:: else -> skip
				fi;
				goto look
			:: else -> skip
			fi;
#endif
			leave(i);
			state = HOLD_HELD;
			renewed[i] = true;
			cmd_start(i);
			goto holding
		:: else ->
			/* refused: what was granted given back */
			delete_b(i);
			if
			:: got_l -> end_lease(tok[i], woke)
			:: else -> skip
			fi;
			poll_left[i] = POLL;
			goto waiting
		fi }

adopt:
	/* the answer's lease adopted in one round trip: -L declared with T
	 * (made again if it ran out), -A, -B exclusive; the keeper readied
	 * with T as it is sent */
	atomic { can(i) ->
		leave(i);
		k_token[i] = tok[i]; k_ends[i] = true;
		if
		:: (l_token == tok[i] || l_token == 0) && a_exists && b_owner == NONE && conn[i] ->
			checked[i] = removals;
			l_token = tok[i]; l_age = 0; b_owner = i;
			renew_sent(i);
			state = HOLD_HELD;
			renewed[i] = true;
			cmd_start(i);
			goto holding
		:: else ->
			/* the lease is ours to give back, by T */
			end_lease(tok[i], woke);
			if
			:: woke -> wake()
			:: else -> skip
			fi;
			goto look
		fi }

holding:
	do
	/* HOLD_HELD, HOLD_EV_TICK: the verification renews -L by its tok[i] */
	:: atomic { state == HOLD_HELD && can(i) && conn[i] && !renewed[i] ->
		renewed[i] = true;
		if
		:: b_owner == i && l_token == tok[i] && PRESENT ->
			l_age = 0;
			renew_sent(i)
		:: else -> state = HOLD_LOST	/* HOLD_EV_REFUSED */
		fi }
	/* HOLD_HELD, HOLD_EV_CONN_LOST */
	:: atomic { state == HOLD_HELD && !conn[i] -> state = HOLD_AWAY }
	/* HOLD_AWAY: a re-attach, -L by our tok[i] first: HOLD_EV_BACK, or
	 * HOLD_EV_GONE */
	:: atomic { state == HOLD_AWAY && can(i) && !tried[i] ->
		tried[i] = true;
		conn[i] = true;
		if
		:: l_token != tok[i] || !PRESENT -> state = HOLD_LOST
		:: else ->
			l_age = 0;
			if
			:: b_owner == NONE -> b_owner = i; renew_sent(i); renewed[i] = true;
				state = HOLD_HELD
			:: else -> skip
			fi
		fi }
	/* HOLD_AWAY, HOLD_EV_LEASE_OUT: amqplock's deadline */
	:: atomic { state == HOLD_AWAY && can(i) && age[i] >= D - MARGIN -> state = HOLD_LOST }
	/* HOLD_LOST: --lost-signal, SIGKILL after --grace (now, or later:
	 * the keeper's deadline comes anyway); then HOLD_GONE */
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
	:: atomic { state == HOLD_GONE || state == HOLD_DONE || dead[i] -> break }
	od;
	if
	:: dead[i] -> goto finished
	:: state == HOLD_GONE ->
		/* a lease still ours goes: the command has ended */
		atomic { can(i) -> conn[i] = true; end_lease(tok[i], woke); delete_b(i);
			if
			:: woke -> wake()
			:: else -> skip
			fi }
		goto next
	:: else -> skip
	fi;
	/* HOLD_DONE: let_go */
	if
	:: atomic { can(i) && conn[i] && b_owner == i && someone_in_line && nfull(line) ->
		/* the offer: the first in line may ask through our -B */
		pick_nonce(on[i]);
		pub_nonce = on[i];
		fresh[i] = true;
		line!OFFER, on[i], 0, 0 }
		goto offered
	:: atomic { can(i) ->
		/* the release: -L, -B, then the wake-up (away: apart) */
		conn[i] = true;
		end_lease(tok[i], woke);
		delete_b(i);
		if
		:: woke -> wake()
		:: else -> skip
		fi }
		goto next
	:: atomic { dead[i] -> goto finished }
	fi;
offered:
	if
	:: atomic { can(i) && conn[i] && bq?[n, id] ->
		bq?n, id;
		if
		:: n == on[i] && fresh[i] ->
			/* decided: the keeper told, -B deleted, then the answer */
			k_ends[i] = false;
			delete_b(i);
			if
			:: nfull(line) -> line!ANSWER, n, id, tok[i];
				seen_nonce = n; seen_id = id; seen_token = tok[i]
			:: full(line) -> skip
			fi;
			n = 0; id = 0
		:: else -> n = 0; id = 0; goto offered	/* not for our offer: dropped */
		fi }
#ifdef BUG_OFFERER_ENDS_LEASE
		atomic { can(i) -> end_lease(tok[i], woke) }
#endif
		goto next
	/* no ask within X, or our connection lost: the release */
	:: atomic { can(i) && (!fresh[i] || !conn[i]) ->
		conn[i] = true;
		end_lease(tok[i], woke);
		delete_b(i);
		if
		:: woke -> wake()
		:: else -> skip
		fi }
		goto next
	:: atomic { dead[i] -> goto finished }
	fi;
next:
	atomic {
		rounds++;
		tok[i] = 0;
		on[i] = 0;
		state = WAITING;
		woke = false; got_b = false; got_l = false; got_a = false;
		if
		:: rounds < ROUNDS - i -> goto look
		:: else -> goto finished
		fi }
	} unless { dead[i] };
finished:
	atomic { leave(i); state = FINISHED; fin[i] = true }
}

/* --- the keeper: its deadline, and its last act when amqplock dies ----- */
proctype keeper(byte i) {
	bool woke;
end:	do
	:: atomic { cmd[i] && KEEPER_DUE(i) -> cmd_end(i) }
	:: atomic { dead[i] ->
		cmd_end(i);
		/* the holding connection goes with the keeper; the lease by
		 * the token, unless it was handed over */
		drop_conn(i);
		if
		:: k_ends[i] ->
			end_lease(k_token[i], woke);
			if
			:: woke -> wake()
			:: else -> skip
			fi
		:: else -> skip
		fi;
		break }
	od
}

/* --- faults and the adversary: at most one act per tick ----------------- */
active proctype chaos() {
	byte i, n, id, t;
	mtype kind;
end:	do
	:: atomic { chaos_turn -> chaos_turn = false }	/* nothing now */
	:: atomic { chaos_turn && faults < FAULTS -> chaos_turn = false; faults++; disturbed = true;
		if
		:: i = 0
		:: i = 1
		fi;
		if
		:: conn[i] -> drop_conn(i)			/* a connection dropped */
		:: !dead[i] && !fin[i] -> dead[i] = true	/* amqplock killed */
		:: !dead[i] && !fin[i] && !stopped(i) -> stop_left[i] = 1	/* stopped */
		:: !dead[i] && !fin[i] && !stopped(i) -> stop_left[i] = D
		:: /* a broker restart: connections and notes gone */
			drop_conn(0); drop_conn(1);
			do
			:: line?_, _, _, _
			:: empty(line) -> break
			od
		fi;
		i = 0 }
	:: atomic { chaos_turn && adv < ADV -> chaos_turn = false; adv++; disturbed = true;
		if
		:: nfull(line) -> pick_nonce(pub_nonce); line!OFFER, pub_nonce, 0, 0	/* forged */
		:: nfull(line) -> line!ANSWER, pub_nonce, 200, l_token	/* a guessed id */
		:: nfull(line) && seen_nonce != 0 -> line!ANSWER, seen_nonce, seen_id, seen_token	/* replayed */
		:: line?[kind, n, id, t] -> line?kind, n, id, t	/* taken from the line */
		:: b_owner != NONE -> b_owner = NONE; empty_bq()	/* a -B deleted */
		:: a_exists = !a_exists				/* removed, or added */
		fi;
		kind = 0; n = 0; id = 0; t = 0 }
	od
}

#ifdef EVICT
/* --- amqplock evict: the slot queue deleted under the holder, which then
 * ends its job as for a removed slot, keeping -B (and -L) until the last
 * process has gone; the slot queue made again once both have gone ------ */
active proctype evictor() {
	b_owner != NONE;
	/* a removal of the slot, as the adversary's: SERVED no longer
	 * speaks (a claim under way when the slot queue comes back fails,
	 * and its waiter looks again a poll later) */
	atomic {
		disturbed = true;
#ifdef BUG_EVICT_FREES
		b_owner = NONE; empty_bq(); l_token = 0; l_age = 0
#else
		a_exists = false
#endif
	}
	atomic { b_owner == NONE && l_token == 0 ->
		assert(running == 0);	/* EVICTED */
		a_exists = true;
		wake() }
}
#endif

#ifdef DRAIN
/* --- amqplock max N --drain, then max N + 1: the marker made before the
 * slot queue goes; the marker deleted where neither -B nor -L is left
 * (drain_sweep); the slot queue made again before the marker goes ------ */
active proctype drainer() {
	b_owner != NONE;
	atomic { disturbed = true; d_exists = true }
	atomic { a_exists = false; removals++; drained = true }
	atomic {
		if
		:: b_owner == NONE && l_token == 0 -> d_exists = false
		:: else -> skip
		fi }
	/* made again, at some later time */
	atomic { a_exists = true; drained = false }
	atomic { d_exists = false; wake() }
}
#endif

/* --- time: a tick passes when nothing else can happen ------------------ */
active proctype clock() {
	byte i;
end:	do
	:: timeout ->
		atomic {
#ifndef SAFE_ONLY
			/* SERVED */
			assert(disturbed || !(slot_free && someone_in_line));
#endif
			/* FREE */
			assert(b_owner == NONE || !fin[b_owner] && !dead[b_owner]);
			/* the lease's expiry */
			if
			:: l_token != 0 -> if :: l_age < AGE_CAP -> l_age++ :: else -> skip fi
			:: else -> l_age = 0
			fi;
			if
			:: l_token != 0 && !l_quorum && l_age >= D -> l_token = 0; l_age = 0
			:: l_token != 0 && l_quorum && l_age >= D + QSTEP -> l_token = 0; l_age = 0
			:: l_token != 0 && l_quorum && l_age >= D -> l_token = 0; l_age = 0
			:: l_token != 0 && l_quorum && l_age >= D && l_age < D + QSTEP -> skip
			:: else -> skip
			fi;
			/* every note of the line expires within the tick */
			do
			:: line?_, _, _, _
			:: empty(line) -> break
			od;
			i = 0;
			do
			:: i < CLIENTS ->
				if :: age[i] < AGE_CAP -> age[i]++ :: else -> skip fi;
				if :: poll_left[i] > 0 -> poll_left[i]-- :: else -> skip fi;
				if :: stop_left[i] > 0 -> stop_left[i]-- :: else -> skip fi;
				/* a stopped client's heartbeats stop: the broker drops it */
				if :: stop_left[i] > 0 && conn[i] -> drop_conn(i) :: true -> skip fi;
				renewed[i] = false; tried[i] = false; fresh[i] = false;
				turn[i] = cmd[i];
				i++
			:: else -> break
			od;
			i = 0;
			chaos_turn = true
		}
	od
}

init {
	atomic {
		if
		:: l_quorum = true
		:: l_quorum = false
		fi;
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
