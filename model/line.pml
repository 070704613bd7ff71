/* model/line.pml: the line of a semaphore of SLOTS slots, which hands
 * leases over at every slot count (issue 43), for SPIN to explore
 * (model/run.sh, `make model`). src/line.c and src/handover.c run it on
 * semaphores of more than one slot; one-slot semaphores keep the
 * single-active-consumer line that model/hold.pml explores. This model
 * came first, so that the C follows a design a machine has checked; what
 * the C adds (older clients, entries of waiters gone, a first entry whose
 * waiter is stopped) is in docs/design.md, "What the C adds to the
 * model".
 *
 * The design (docs/design.md, "A line for N slots"):
 *   - a waiter declares a queue of its own (exclusive: Wq) and
 *     publishes an *entry* naming it into the durable line #line;
 *   - a releaser takes the oldest entry with basic.get, unacknowledged:
 *     no other get returns it while the releaser holds it, and the
 *     releaser's death puts it back in its place (a classic queue keeps
 *     the position of a requeued message);
 *   - it offers its lease into that Wq (mandatory: an entry whose Wq is
 *     gone comes back, is acknowledged, and the next one is taken); the
 *     waiter asks through the releaser's holder queue -B, and the rest
 *     is model/hold.pml's hand-over (nonce, id, answer, adoption);
 *   - releasers of different slots hold different entries at once: N
 *     hand-overs run side by side, in arrival order; there is no single
 *     active consumer, so never RabbitMQ 3.10's crashing pattern
 *     (upstream 5460);
 *   - a newcomer takes a free slot only while #line has no ready entry
 *     (a passive declare's message count); else it joins the line and,
 *     if a slot is free, looks at the line's head: a gone entry is
 *     acknowledged, a live one not its own is woken (a WAKE into its Wq,
 *     the entry requeued in place), its own means the slot is its turn;
 *   - a slot freed without a hand-over (no ask within X, or a keeper's
 *     last act for a killed holder) wakes the oldest live entry the same
 *     way.
 *
 * What model/hold.pml explores and this model takes as given: a claim's
 * two halves and its window, renewals, away holders and re-attaches,
 * stopped processes, the keeper's clock. Here a claim is one step, a
 * holder keeps its slot until its command ends, and its death ends its
 * command at once (its keeper); a holder whose -B is gone has its
 * command ended before its lease ends (model/hold.pml's result). A get, a
 * publish and a requeue made for one wake are one step too: three round
 * trips in the code, between which a newcomer's count can pass a woken
 * waiter. The model does not see that window; docs/design.md names it.
 *
 * Modelled: the broker (-B per slot, the lease per slot with its token
 * and its end D ticks after its last use, #line as an ordered array of
 * entries each ready or held by a getter, each waiter's Wq and what it
 * holds, the asks in each -B); CLIENTS clients of one login (ROUNDS
 * holds for the first, one for the others) on SLOTS slots; faults, FAULTS
 * per run: a client killed at any step (its connection, its Wq and its
 * -B gone, the entries it held requeued; its keeper ends its command and
 * its lease, unless handed over, and wakes the line); an adversary of
 * the same login, ADV acts per run: an offer forged into a live Wq, an
 * answer with the live lease's token and a guessed id, a seen answer
 * replayed, the oldest entry taken for good, an entry forged for a live
 * waiter, a holder queue deleted.
 *
 * Properties:
 *   SAFE    at most one command runs on each slot (asserted at every
 *           command's start);
 *   KEPT    no waiter loses its place: at every tick, a waiter in line
 *           has its entry in #line (ready, or held by a live getter),
 *           whatever the faults; only the adversary can take entries;
 *   SERVED  while no lease could be left behind (no holder, releaser or
 *           asker killed) and no adversary has acted, no tick passes with
 *           a slot free and a live waiter in line;
 *   ORDER   while no adversary has acted, no grant (a claim, or a
 *           releaser's decision for an asker) passes a ready entry of a
 *           waiter that arrived earlier (a newcomer arrives at its look;
 *           a waiter whose entry a releaser holds is being served),
 *           unless a kill ended that waiter's service: its entry is
 *           back in place, and a grant already under way passes it.
 *
 * Known-bad variants, each a -D switch that model/run.sh expects to fail:
 *   BUG_ACK_AT_GET     entries taken with auto-ack: a releaser killed
 *                      after its get loses the waiter's place (KEPT)
 *   BUG_SINGLE_OFFER   a releaser whose offer came back (the waiter is
 *                      gone) releases without offering to the next entry
 *                      (SERVED, after a plain waiter is killed)
 *   BUG_WAKE_ACKS      a wake acknowledges the entry: a woken waiter
 *                      whose claim another passes has no place (KEPT)
 *   BUG_SKIP_COUNT     a newcomer takes a free slot without looking at
 *                      #line's count (ORDER)
 *
 * Time: a tick (the renewal interval) passes only when nothing else can
 * happen (timeout). X, the releaser's wait for an ask, ends at the tick;
 * a waiter's ask is forgotten at the tick; a waiter looks again every
 * POLL ticks. Tokens, nonces and ids are picked as the smallest value not
 * in use (the code draws 63 random bits); the adversary's guessed id, 200,
 * is never drawn. */

#define SLOTS 2		/* the adversary's acts name slots 0 and 1 */
#ifndef CLIENTS
#define CLIENTS 4	/* two hold, two wait: two hand-overs at once */
#endif
#ifndef ROUNDS
#define ROUNDS 1	/* holds of client 0; the others make one */
#endif
#ifndef FAULTS
#define FAULTS 1
#endif
#ifndef ADV
#define ADV 0
#endif
#define LN (CLIENTS + 2)	/* #line's room: a wait each, old entries, a forged one */
#define D 2		/* a lease no holder uses ends D ticks after its last use */
#define POLL 2
#define NONE 255

mtype = { WAKE, OFFER, ANSWER };
mtype = { WAITING, HOLDING, OFFERING, FINISHED };

/* --- the broker ------------------------------------------------------ */
byte b_owner[SLOTS];		/* the client whose connection holds -B */
byte l_token[SLOTS];		/* the lease's token; 0: none */
byte l_age[SLOTS];		/* ticks since the lease's last use */
chan bq[SLOTS] = [1] of { byte, byte, byte };	/* asks in -B: nonce, id, the asker's Wq */
byte wq[CLIENTS];		/* the generation of c's Wq; 0: none */
chan inbox[CLIENTS] = [2] of { mtype, byte, byte, byte, byte };	/* Wq: kind, slot, nonce, id, token */
/* #line, oldest first: whose Wq an entry names (client, generation), its
 * delivery tag, and who holds it (getter + 1; 0: ready) */
byte e_c[LN], e_gen[LN], e_tag[LN], e_held[LN];
byte e_n = 0;

/* --- per client ---------------------------------------------------------- */
mtype state[CLIENTS];
bool dead[CLIENTS];
byte poll_left[CLIENTS];
bool turn[CLIENTS];		/* the command may end in this tick */
bool fresh[CLIENTS];		/* a releaser's offer, or a waiter's ask, made in this tick */
byte tok[CLIENTS];		/* the lease held, claimed or adopted */
byte slot[CLIENTS];		/* its slot */
byte mn[CLIENTS], mid[CLIENTS], ms[CLIENTS];	/* a waiter's ask: nonce, id, slot */
byte on[CLIENTS];		/* a releaser's offer: nonce */
byte gtag[CLIENTS];		/* the entry a releaser holds */
byte k_slot[CLIENTS], k_token[CLIENTS];	/* what the keeper ends */
bool k_ends[CLIENTS];
bool interrupted[CLIENTS];	/* a fault ended the service of c's entry */
bool before[CLIENTS * CLIENTS];	/* before[a*CLIENTS+b]: a's entry is older than b's */

/* --- ghosts ---------------------------------------------------------- */
byte running[SLOTS];
bool cmd[CLIENTS];
byte faults = 0, adv = 0;
bool chaos_turn = false;
bool adv_acted = false;		/* the adversary has acted: only SAFE is asked */
bool left_lease = false;	/* a holder, releaser or asker was killed */
byte pk, cand, gone;		/* scratch */
bool served = true, kept = true, ordered = true;	/* what SERVED, KEPT and ORDER assert */
byte seen_slot, seen_nonce, seen_id, seen_token;	/* the last answer */

/* a point a run must reach: `-DREACH=N` makes reaching point N a
 * violation, so that model/run.sh can see the model reaches it */
#ifdef REACH
#define reach(x) assert(REACH != x)
#else
#define reach(x) skip
#endif

#define slot_free(k) (b_owner[k] == NONE && l_token[k] == 0)
#define live(i) (e_c[i] < CLIENTS && wq[e_c[i]] != 0 && wq[e_c[i]] == e_gen[i])
#define waiting_in_line(c) (state[c] == WAITING && wq[c] != 0 && !dead[c])

/* the first ready entry (NONE: none) */
inline first_ready(idx) {
	idx = 0;
	do
	:: idx < e_n && e_held[idx] != 0 -> idx++
	:: idx < e_n && e_held[idx] == 0 -> break
	:: idx >= e_n -> idx = NONE; break
	od
}
inline ready_count(n) {
	n = 0; pk = 0;
	do
	:: pk < e_n -> if :: e_held[pk] == 0 -> n++ :: else -> skip fi; pk++
	:: else -> break
	od;
	pk = 0
}
/* the entry at idx leaves the line (acknowledged) */
inline e_remove(idx) {
	pk = idx;
	do
	:: pk + 1 < e_n ->
		e_c[pk] = e_c[pk + 1]; e_gen[pk] = e_gen[pk + 1];
		e_tag[pk] = e_tag[pk + 1]; e_held[pk] = e_held[pk + 1];
		pk++
	:: else -> break
	od;
	e_n--;
	e_c[e_n] = 0; e_gen[e_n] = 0; e_tag[e_n] = 0; e_held[e_n] = 0;
	pk = 0
}
inline find_tag(tg, idx) {
	idx = 0;
	do
	:: idx < e_n && e_tag[idx] != tg -> idx++
	:: idx < e_n && e_tag[idx] == tg -> break
	:: idx >= e_n -> idx = NONE; break
	od
}
/* a new entry naming (c, g), last; a full line drops it (LN is room
 * enough for every run the model makes: KEPT would say otherwise) */
inline e_append(c, g) {
	if
	:: e_n < LN ->
		cand = 1; pk = 0;
		do
		:: pk < e_n && e_tag[pk] == cand -> cand++; pk = 0
		:: pk < e_n && e_tag[pk] != cand -> pk++
		:: pk >= e_n -> break
		od;
		e_c[e_n] = c; e_gen[e_n] = g; e_tag[e_n] = cand; e_held[e_n] = 0;
		e_n++;
		pk = 0; cand = 0
	:: else -> skip
	fi
}

/* join: a Wq of a new generation, then its entry, last in line */
inline join(c) {
	cand = 1; pk = 0;
	do
	:: cand == wq[c] -> cand++; pk = 0
	:: cand != wq[c] && pk < e_n && e_c[pk] == c && e_gen[pk] == cand -> cand++; pk = 0
	:: cand != wq[c] && pk < e_n && !(e_c[pk] == c && e_gen[pk] == cand) -> pk++
	:: cand != wq[c] && pk >= e_n -> break
	od;
	wq[c] = cand;
	interrupted[c] = false;
	pk = 0; cand = 0;
	e_append(c, wq[c])
}
/* the Wq deleted (left the line): what was in it goes with it */
inline drop_wq(c) {
	wq[c] = 0;
	do
	:: inbox[c]?_, _, _, _, _
	:: empty(inbox[c]) -> break
	od
}
inline delete_b(k) {
	b_owner[k] = NONE;
	do
	:: bq[k]?_, _, _
	:: empty(bq[k]) -> break
	od
}
inline end_lease(k, t, woke) {
	woke = false;
	if
	:: t != 0 && l_token[k] == t -> l_token[k] = 0; l_age[k] = 0; woke = true
	:: else -> skip
	fi
}

/* the line's head, as a get sees it: entries whose Wq is gone are
 * acknowledged (gone counts them); idx is the oldest live ready entry,
 * or NONE */
inline head(idx) {
	gone = 0;
	do
	:: first_ready(idx);
		if
		:: idx != NONE && !live(idx) -> e_remove(idx); gone++
		:: else -> break
		fi
	od
}
/* the entry at idx woken: a WAKE in its Wq, the entry requeued in place */
inline wake_entry(idx) {
	if
	:: nfull(inbox[e_c[idx]]) -> inbox[e_c[idx]]!WAKE, 0, 0, 0, 0;
		printf("MSC: wake %d\n", e_c[idx])
	:: full(inbox[e_c[idx]]) -> skip
	fi;
#ifdef BUG_WAKE_ACKS
	e_remove(idx);
#endif
	skip
}
/* a wake: the oldest live entry woken */
inline wake_line(idx) {
	head(idx);
	if
	:: idx != NONE -> wake_entry(idx)
	:: else -> skip
	fi;
	idx = 0; gone = 0
}
/* lease_drop: our lease ended by its token, the line woken if it was */
inline let_lease_go(k, t, woke, idx) {
	end_lease(k, t, woke);
	if
	:: woke -> wake_line(idx)
	:: else -> skip
	fi
}
/* the first free slot (NONE: none) */
inline first_free(k) {
	k = 0;
	do
	:: k < SLOTS && !slot_free(k) -> k++
	:: k < SLOTS && slot_free(k) -> break
	:: k >= SLOTS -> k = NONE; break
	od
}

/* the smallest value that nothing still about has */
inline pick_nonce(v) {
	cand = 1; pk = 0;
	do
	:: pk < CLIENTS && (on[pk] == cand || mn[pk] == cand) -> cand++; pk = 0
	:: pk < CLIENTS && !(on[pk] == cand || mn[pk] == cand) -> pk++
	:: pk >= CLIENTS && cand == seen_nonce -> cand++; pk = 0
	:: pk >= CLIENTS && cand != seen_nonce -> break
	od;
	v = cand; pk = 0; cand = 0
}
inline pick_id(v) {
	cand = 1; pk = 0;
	do
	:: pk < CLIENTS && mid[pk] == cand -> cand++; pk = 0
	:: pk < CLIENTS && mid[pk] != cand -> pk++
	:: pk >= CLIENTS && cand == seen_id -> cand++; pk = 0
	:: pk >= CLIENTS && cand != seen_id -> break
	od;
	v = cand; pk = 0; cand = 0
}
inline pick_token(v) {
	cand = 1; pk = 0;
	do
	:: pk < CLIENTS && (tok[pk] == cand || k_token[pk] == cand) -> cand++; pk = 0
	:: pk < CLIENTS && !(tok[pk] == cand || k_token[pk] == cand) -> pk++
	:: pk >= CLIENTS && pk < CLIENTS + SLOTS && l_token[pk - CLIENTS] == cand -> cand++; pk = 0
	:: pk >= CLIENTS && pk < CLIENTS + SLOTS && l_token[pk - CLIENTS] != cand -> pk++
	:: pk >= CLIENTS + SLOTS && cand == seen_token -> cand++; pk = 0
	:: pk >= CLIENTS + SLOTS && cand != seen_token -> break
	od;
	v = cand; pk = 0; cand = 0
}

/* ORDER, at a grant (a claim, or a releaser's decision for an asker):
 * no waiter that entered the line before c has a ready entry, unless a
 * fault ended its service (a releaser killed while it held the entry:
 * the entry is back in place, and a grant already under way passes it) */
inline order_check(c) {
	if
	:: !adv_acted ->
		pk = 0;
		do
		:: pk < e_n ->
			ordered = !(e_held[pk] == 0 && live(pk) && e_c[pk] != c && !interrupted[e_c[pk]] &&
			            before[e_c[pk] * CLIENTS + c]);
			assert(ordered);	/* ORDER */
			pk++
		:: else -> break
		od;
		pk = 0
	:: else -> skip
	fi
}
/* a command starts on slot k: SAFE */
inline cmd_start(c, k) {
	cmd[c] = true;
	running[k]++;
	assert(running[k] <= 1)	/* SAFE */
}
inline cmd_end(c) {
	if
	:: cmd[c] -> cmd[c] = false; running[slot[c]]--
	:: else -> skip
	fi
}

#define forget() kind = 0; sl = 0; n = 0; id = 0; t = 0

proctype client(byte c) {
	byte rounds = 0, k, idx, n, id, t, sl, cnt;
	mtype kind;
	bool woke;
	{
	skip;
look:
	/* the look: the slots probed, #line's count; a newcomer takes a free
	 * slot only while #line has no ready entry; else it joins, and with a
	 * slot free it looks at the line's head */
	atomic {
		/* a newcomer arrives now: after every waiter in line */
		if
		:: wq[c] == 0 ->
			pk = 0;
			do
			:: pk < CLIENTS -> before[pk * CLIENTS + c] = (pk != c && wq[pk] != 0); before[c * CLIENTS + pk] = false; pk++
			:: else -> break
			od;
			pk = 0
		:: else -> skip
		fi;
		first_free(k);
		ready_count(cnt);
#ifdef BUG_SKIP_COUNT
		cnt = 0;
#endif
		if
		:: k != NONE && wq[c] == 0 && cnt == 0 -> goto claim
		:: else -> skip
		fi;
		if
		:: wq[c] == 0 -> join(c);
			printf("MSC: %d joins the line\n", c);
			if :: k != NONE -> reach(6) :: else -> skip fi
		:: else -> skip
		fi;
		poll_left[c] = POLL;
		if
		:: k == NONE -> goto waiting
		:: else -> skip
		fi;
		/* the head: our own entry, or none ready: the free slot is
		 * ours to claim; another's: woken */
		head(idx);
		gone = 0;
		if
		:: idx == NONE || e_c[idx] == c -> goto claim
		:: else -> wake_entry(idx); goto waiting
		fi }
claim:
	/* the claim: -B and -L with a new token, one step here */
	atomic {
		pick_token(tok[c]);
		if
		:: slot_free(k) ->
			b_owner[k] = c; l_token[k] = tok[c]; l_age[k] = 0;
			slot[c] = k;
			k_slot[c] = k; k_token[c] = tok[c]; k_ends[c] = true;
			drop_wq(c);
			mn[c] = 0; mid[c] = 0;
			state[c] = HOLDING;
			printf("MSC: %d claims slot %d (token %d)\n", c, k, tok[c]);
			order_check(c);
			cmd_start(c, k);
			/* another slot still free: the line's head is woken */
			first_free(k);
			if
			:: k != NONE -> wake_line(idx)
			:: else -> skip
			fi;
			goto holding
		:: else ->
			tok[c] = 0;
			if
			:: wq[c] == 0 -> goto look	/* a newcomer passed: look again */
			:: else -> goto waiting
			fi
		fi }
waiting:
	if
	:: atomic { inbox[c]?[kind, sl, n, id, t] ->
		inbox[c]?kind, sl, n, id, t;
		if
		:: kind == WAKE && mn[c] != 0 -> forget(); goto waiting	/* asked: the answer first */
		:: kind == WAKE && mn[c] == 0 -> forget(); reach(5); goto look
		:: kind == OFFER ->
			if
			:: mn[c] != 0 -> skip			/* one ask at a time */
			:: mn[c] == 0 && b_owner[sl] == NONE -> skip	/* the ask came back */
			:: mn[c] == 0 && b_owner[sl] != NONE ->
				mn[c] = n; ms[c] = sl; pick_id(mid[c]); fresh[c] = true;
				if
				:: nfull(bq[sl]) -> bq[sl]!n, mid[c], c;
					printf("MSC: %d asks for slot %d\n", c, sl)
				:: full(bq[sl]) -> skip
				fi
			fi;
			forget(); goto waiting
		:: kind == ANSWER ->
			if
			:: mn[c] != 0 && n == mn[c] && id == mid[c] && sl == ms[c] ->
				tok[c] = t; k = sl; mn[c] = 0; mid[c] = 0; ms[c] = 0;
				forget(); goto adopt
			:: else -> forget(); goto waiting
			fi
		fi }
	:: atomic { poll_left[c] == 0 && mn[c] == 0 -> goto look }
	fi;
adopt:
	/* the answer's lease: -L with its token (made again if it ran out)
	 * and -B, one step */
	atomic {
		k_slot[c] = k; k_token[c] = tok[c]; k_ends[c] = true;
		if
		:: b_owner[k] == NONE && (l_token[k] == tok[c] || l_token[k] == 0) ->
			b_owner[k] = c; l_token[k] = tok[c]; l_age[k] = 0;
			slot[c] = k;
			drop_wq(c);
			state[c] = HOLDING;
			printf("MSC: %d adopts slot %d (token %d)\n", c, k, tok[c]);
			cmd_start(c, k);
			reach(4);
			goto holding
		:: else ->
			let_lease_go(k, tok[c], woke, idx);
			tok[c] = 0; k_ends[c] = false;
			goto look
		fi }
holding:
	/* the command runs for a tick or more, then ends; or the slot is
	 * lost (its -B gone) and the command was ended (the clock) */
	do
	:: atomic { turn[c] && cmd[c] -> turn[c] = false }	/* not in this tick */
	:: atomic { turn[c] && cmd[c] -> cmd_end(c); turn[c] = false; break }
	:: atomic { !cmd[c] -> break }
	od;
	if
	:: atomic { b_owner[slot[c]] != c ->
		/* lost: no offer; the lease, if still ours, ends */
		k = slot[c];
		let_lease_go(k, tok[c], woke, idx);
		goto next }
	:: else -> skip
	fi;
	/* the release: the oldest live entry gets an offer of our lease */
	atomic {
		k = slot[c];
		/* (an offer into a gone Wq comes back: that entry is
		 * acknowledged and the next one taken) */
		head(idx);
		if
		:: gone > 0 -> reach(3)
		:: else -> skip
		fi;
#ifdef BUG_SINGLE_OFFER
		if
		:: gone > 0 -> idx = NONE
		:: else -> skip
		fi;
#endif
		gone = 0;
		if
		:: idx == NONE ->
			/* nobody ready: the release */
			printf("MSC: %d releases slot %d, nobody ready\n", c, k);
			end_lease(k, tok[c], woke);
			delete_b(k);
			goto next
		:: else ->
			gtag[c] = e_tag[idx];
#ifndef BUG_ACK_AT_GET
			e_held[idx] = c + 1;
#else
			e_remove(idx);
#endif
			pick_nonce(on[c]);
			fresh[c] = true;
			state[c] = OFFERING;
			if
			:: nfull(inbox[e_c[idx]]) -> inbox[e_c[idx]]!OFFER, k, on[c], 0, 0;
				printf("MSC: %d offers slot %d to %d\n", c, k, e_c[idx])
			:: full(inbox[e_c[idx]]) -> skip
			fi
		fi }
offered:
	if
	:: atomic { bq[k]?[n, id, t] ->
		bq[k]?n, id, t;
		if
		:: n == on[c] && fresh[c] ->
			/* decided: the keeper told, -B deleted, the entry
			 * acknowledged, then the answer, into the asker's Wq */
			k_ends[c] = false;
			delete_b(k);
			find_tag(gtag[c], idx);
			if
			:: idx != NONE -> e_remove(idx)
			:: else -> skip		/* auto-acked (BUG_ACK_AT_GET) */
			fi;
			order_check(t);
			if
			:: wq[t] != 0 && nfull(inbox[t]) ->
				inbox[t]!ANSWER, k, n, id, tok[c];
				printf("MSC: %d answers %d: slot %d\n", c, t, k);
				reach(1);
				/* another releaser offering meanwhile */
				pk = 0; cand = 0;
				do
				:: pk < CLIENTS -> if :: state[pk] == OFFERING -> cand++ :: else -> skip fi; pk++
				:: else -> break
				od;
				if :: cand >= 2 -> reach(2) :: else -> skip fi;
				pk = 0; cand = 0;
				seen_slot = k; seen_nonce = n; seen_id = id; seen_token = tok[c]
			:: wq[t] == 0 || full(inbox[t]) -> skip	/* lost: the lease ends in D */
			fi;
			forget(); idx = 0;
			goto next
		:: else -> forget(); goto offered	/* not for our offer */
		fi }
	/* no ask within X: the entry requeued in place, the release, a wake */
	:: atomic { !fresh[c] ->
		find_tag(gtag[c], idx);
		if
		:: idx != NONE -> e_held[idx] = 0
		:: else -> skip
		fi;
		printf("MSC: %d: no ask, releases slot %d\n", c, k);
		end_lease(k, tok[c], woke);
		delete_b(k);
		wake_line(idx);
		goto next }
	fi;
next:
	atomic {
		rounds++;
		tok[c] = 0; on[c] = 0; gtag[c] = 0; k_ends[c] = false; k_token[c] = 0;
		state[c] = WAITING;
		woke = false; k = 0; idx = 0; cnt = 0;
		if
		:: c == 0 && rounds < ROUNDS -> goto look
		:: else -> goto finished
		fi }
	} unless { dead[c] };
finished:
	atomic { state[c] = FINISHED; idx = 0; k = 0; cnt = 0; woke = false; forget() }
}

/* the connection of c closed by its death: -B, Wq and held entries; its
 * keeper's last act: the command ended, the lease ended unless handed
 * over, the line woken */
inline kill(c) {
	dead[c] = true;
	printf("MSC: %d killed\n", c);
	if
	:: state[c] == HOLDING || state[c] == OFFERING || mn[c] != 0 || tok[c] != 0 || k_ends[c] ->
		left_lease = true	/* a lease may be left to end on its own */
	:: else -> skip
	fi;
	cmd_end(c);
	drop_wq(c);
	i = 0;
	do
	:: i < SLOTS -> if :: b_owner[i] == c -> delete_b(i) :: else -> skip fi; i++
	:: else -> break
	od;
	i = 0;
	do
	:: i < e_n ->
		if
		:: e_held[i] == c + 1 -> e_held[i] = 0;
			if :: e_c[i] < CLIENTS -> interrupted[e_c[i]] = true :: else -> skip fi
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
	if
	:: k_ends[c] -> let_lease_go(k_slot[c], k_token[c], woke, i)
	:: else -> skip
	fi;
	i = 0; woke = false
}

active proctype chaos() {
	byte i, j;
	bool woke;
end:	do
	:: atomic { chaos_turn -> chaos_turn = false }
	:: atomic { chaos_turn && faults < FAULTS -> chaos_turn = false; faults++;
		select(j : 0 .. CLIENTS - 1);
		if
		:: !dead[j] && state[j] != FINISHED -> kill(j)
		:: else -> skip
		fi;
		j = 0 }
	:: atomic { chaos_turn && adv < ADV -> chaos_turn = false; adv++; adv_acted = true;
		select(j : 0 .. CLIENTS - 1);
		if
		/* an offer forged into a live Wq (its name is in #line) */
		:: wq[j] != 0 && nfull(inbox[j]) -> pick_nonce(i); inbox[j]!OFFER, 0, i, 0, 0
		:: wq[j] != 0 && nfull(inbox[j]) -> pick_nonce(i); inbox[j]!OFFER, 1, i, 0, 0
		/* an answer: the live lease's token, a nonce seen, a guessed id */
		:: wq[j] != 0 && nfull(inbox[j]) -> inbox[j]!ANSWER, 0, mn[j], 200, l_token[0]
		:: wq[j] != 0 && nfull(inbox[j]) -> inbox[j]!ANSWER, 1, mn[j], 200, l_token[1]
		/* a seen answer replayed */
		:: wq[j] != 0 && nfull(inbox[j]) && seen_nonce != 0 ->
			inbox[j]!ANSWER, seen_slot, seen_nonce, seen_id, seen_token
		/* the oldest ready entry taken for good */
		:: first_ready(i); i != NONE -> e_remove(i)
		/* an entry forged for a live waiter */
		:: wq[j] != 0 -> e_append(j, wq[j])
		/* a holder queue deleted */
		:: b_owner[0] != NONE -> delete_b(0)
		:: b_owner[1] != NONE -> delete_b(1)
		fi;
		i = 0; j = 0 }
	od
}

active proctype clock() {
	byte c, k, i;
end:	do
	:: timeout ->
		atomic {
			printf("MSC: tick\n");
			/* SERVED */
			if
			:: !adv_acted && !left_lease ->
				k = 0;
				do
				:: k < SLOTS ->
					c = 0;
					do
					:: c < CLIENTS -> served = !(slot_free(k) && waiting_in_line(c)); assert(served); c++
					:: else -> break
					od;
					k++
				:: else -> break
				od
			:: else -> skip
			fi;
			served = true;
			/* KEPT */
			if
			:: !adv_acted ->
				c = 0;
				do
				:: c < CLIENTS ->
					if
					:: waiting_in_line(c) ->
						kept = false; i = 0;
						do
						:: i < e_n -> if :: e_c[i] == c && e_gen[i] == wq[c] -> kept = true :: else -> skip fi; i++
						:: else -> break
						od;
						assert(kept);
						kept = true
					:: else -> skip
					fi;
					c++
				:: else -> break
				od
			:: else -> skip
			fi;
			/* leases: used by a live -B, or ending; a holder whose -B
			 * is gone has its command ended before its lease ends
			 * (the renewal refused, and the keeper's deadline:
			 * model/hold.pml explores that) */
			k = 0;
			do
			:: k < SLOTS ->
				c = 0;
				do
				:: c < CLIENTS ->
					if
					:: cmd[c] && slot[c] == k && b_owner[k] != c -> cmd_end(c)
					:: else -> skip
					fi;
					c++
				:: else -> break
				od;
				if
				:: l_token[k] != 0 && b_owner[k] != NONE -> l_age[k] = 0
				:: l_token[k] != 0 && b_owner[k] == NONE ->
					l_age[k]++;
					if
					:: l_age[k] >= D -> l_token[k] = 0; l_age[k] = 0
					:: else -> skip
					fi
				:: else -> skip
				fi;
				k++
			:: else -> break
			od;
			c = 0;
			do
			:: c < CLIENTS ->
				if :: poll_left[c] > 0 -> poll_left[c]-- :: else -> skip fi;
				fresh[c] = false;
				mn[c] = 0; mid[c] = 0; ms[c] = 0;	/* an ask is forgotten */
				turn[c] = cmd[c];
				c++
			:: else -> break
			od;
			c = 0; k = 0; i = 0;
			chaos_turn = true
		}
	od
}

init {
	atomic {
		pk = 0;
		do
		:: pk < SLOTS -> b_owner[pk] = NONE; pk++
		:: else -> break
		od;
		pk = 0;
		do
		:: pk < CLIENTS -> state[pk] = WAITING; run client(pk); pk++
		:: else -> break
		od;
		pk = 0;
		chaos_turn = true
	}
}
