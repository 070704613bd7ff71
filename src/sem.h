/* The persistent semaphore: durable slot queues <base>-k-A, exclusive
 * holder queues <base>-k-B and an exclusive admin mutex <base>, with
 * leases <base>-k-L, the line <base>#waiters and the size record
 * (record.h). This module runs the algorithm over a connection; it never
 * prints (beyond -v traces) and never exits, and knows nothing of the
 * command line. */
#ifndef AMQPLOCK_SEM_H
#define AMQPLOCK_SEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "names.h"

/* The queue type of slot queues. Quorum queues are replicated across a
 * cluster's nodes; holder queues stay exclusive classic queues (a quorum
 * queue cannot be exclusive). */
enum slot_type {
	SLOT_CLASSIC, /* durable, no arguments */
	SLOT_QUORUM,  /* durable, x-queue-type quorum */
};

/* What the user decides about how the algorithm runs (cli.c's options
 * are bound to these fields). */
struct sem_opts {
	/* How far past the last slot to look for stray slot queues (swept by
	 * admin commands) and for holders left above max (orphans). */
	unsigned overshoot;
	/* Seconds to wait for another administrator's mutex; 0: try once. */
	double admin_wait;
	/* The type of slots a create makes. Other changes keep the type of
	 * the slots there are; slot_type_given makes them refuse another. */
	enum slot_type slot_type;
	bool slot_type_given;
	/* status: leave the holders unnamed rather than ask them (each
	 * question costs the holder a connection, the asker up to a second
	 * for a holder that does not answer). */
	bool no_names;
	/* remove and max N: holders of the slots removed keep running
	 * (--drain; drain.c); without, their jobs are signalled. */
	bool drain;
};

/* What a delivery from the line is to a waiter, as the ear that
 * sem_join_line was given hears it: a wake-up, a wake-up that offers a
 * slot's lease (sem_offered), a note to acknowledge at once, or one the
 * ear has dealt with itself. */
enum line_heard { HEARD_WAKE, HEARD_OFFER, HEARD_NOTE, HEARD_TAKEN };
struct sem;
typedef enum line_heard (*sem_line_ear)(struct sem *s, uint64_t tag,
					const amqp_basic_properties_t *p);

/* A lease remembered as unanswering (struct sem, stuck). */
#define SEM_STUCK_MAX 8
struct sem_stuck {
	unsigned slot;
	double until; /* now_seconds(); past: no entry */
};

/* A holder's side of a semaphore: its lease, its place in the line, a
 * hand-over under way, a void claim to end. Only those that wait for,
 * claim or hold a slot have one (sem_hold_init: acquire, hold, wait);
 * administrators and readers never do (struct sem's hold is NULL). */
struct sem_hold {
	/* The holder's lease (docs/design.md, section 4); off: none, the
	 * slot lives as long as the connection. */
	struct {
		bool on;
		unsigned ms;   /* x-expires: how long it outlives its holder */
		int64_t token; /* x-max-length: whose it is (random, > 0) */
		/* Our holder queue is gone (the broker has not yet dropped a
		 * lost connection's): the verification declares it again. */
		bool need_holder;
		/* now_seconds() of the last re-attach: for a while after it,
		 * a holder queue found deleted is declared again (see
		 * verify_refused). */
		double reattached;
		/* The last try failed on a lease that does not answer (the
		 * connection lost to a claim's declare that stalled: struct
		 * sem, stuck). */
		bool stalled;
		/* The last claim's lease declare was answered by the broker
		 * closing the connection (541): RabbitMQ does that while a
		 * quorum queue of the same name is still being deleted,
		 * that is while the slot's last lease is going. A race
		 * lost, though it costs the connection. */
		bool claim_closed;
		/* When the last renewal that the broker confirmed was sent
		 * (boot_seconds(); hold.c keeps it): the lease lasts at
		 * least until renewed + ms / 1000 on the broker's clock. */
		double renewed;
	} lease;
	/* The broker refused us a place in #line (a permission, a line of
	 * other arguments): we wait in #waiters. */
	bool entries_refused;
	/* --token's fencing token for our grant (sem_fencing_token; 0:
	 * none): the command's $AMQPLOCK_TOKEN. */
	uint64_t fencing_token;
	/* Our place in the line, while we are in it (sem_join_line). */
	struct {
		/* The broker has shown that we are first: we joined an empty
		 * line, or something was delivered to us (only the first gets
		 * anything). We stay first until we leave. */
		bool first;
		/* The wake-up delivered and not yet acknowledged (0: none; see
		 * sem_woken): while we hold it, the broker gives the line's
		 * next message to nobody else. */
		uint64_t wake_tag;
		/* That wake-up offers its holder's lease (handover.c). */
		bool offer;
		/* We wait in #line, with an entry that names our own queue
		 * (else in #waiters). */
		bool entered;
		char own[QUEUE_NAME_MAX + 1];
		/* now_seconds() when we last declared #waiters (sem_line_keep) */
		double kept;
		/* #waiters lapsed while we waited in #line (an expires policy
		 * shorter than LINE_KEEP): it is declared at every look now. */
		bool lapsed;
		/* Who hears what the line delivers (sem_join_line). */
		sem_line_ear ear;
	} place;
	/* The lease handed over (handover.c; docs/design.md, "Handing the
	 * lease over"). */
	struct {
		/* First in line: the offer that place.wake_tag holds
		 * (place.offer) of a slot's lease, its length and type,
		 * signed by our login or not; old: an older amqplock's, which
		 * names the lease's token and a reply_to, and is declined. */
		bool offer_signed, offer_old;
		unsigned slot, ms;
		bool quorum;
		/* Every note of one hand-over carries the offer's nonce. */
		char nonce[40], reply_to[256];
		/* The waiter's side: the id our ask to the offer's holder
		 * queue carried (empty: none out), whether we wait for its
		 * answer (asking), and the answer: the lease handed to us,
		 * with its token (ours to adopt, or to end). */
		char asked[40];
		bool asking, handed;
		int64_t token;
		/* A wake-up came while we asked: taken at once (held, it
		 * would keep the answer from us), and passed on. Another
		 * offer (declined): the slot's holder lets go now, so
		 * whoever we asked hands us nothing. */
		bool woken_meanwhile, offer_meanwhile;
		/* The releaser's side: when the offer went out (boot clock),
		 * the id of the asker we decided for (set: the lease is its
		 * from then on), or that the first in line declined, or that
		 * we no longer listen (no decision may come any more). */
		double offered_at;
		char adopter[40];
		bool declined, deaf;
	} handover;
	/* Called once a hand-over is decided, before the adopter hears of
	 * it: from then on the lease is not ours to end (hold tells its
	 * keeper so), or NULL. */
	void (*lease_given)(void *arg);
	void *given_arg;
	/* The token a void claim's lease was made with, if not our own (an
	 * adoption's): the lease to end on the next connection. */
	int64_t void_token;
	/* The last sem_acquire (SEM_TAKE_UNLESS_LINE) left a free slot to
	 * others in line. */
	bool behind_line;
	/* How long after it was sent a claim may be answered and still
	 * count (seconds; 0: any time; rules_claim_window). An answer read
	 * later (amqplock was stopped, its host paused) may come over a
	 * connection the broker has dropped since, for a slot that is
	 * another's by now: such a claim is void, its connection dropped
	 * (claim_void, void_slot: the slot whose lease it may have left,
	 * to end on the next connection with sem_lease_end). So is a claim
	 * whose connection was lost before its answers were all read: the
	 * broker may have made its lease all the same. */
	double claim_window;
	bool claim_void;
	unsigned void_slot;
	/* Called when a claim of slot k has been sent, before its answers
	 * are read (hold readies its command's keeper then), or NULL. */
	void (*claim_sent)(void *arg, unsigned k);
	void *claim_arg;
	/* The verification sem_verify_send last sent: the queue kinds asked
	 * about, in order, and how many answers are in. */
	enum slot_kind verify_kind[5];
	unsigned verify_asked, verify_answers;
	/* Our slot was removed by a --drain shrink: its drain marker, not
	 * its slot queue, says that we run on (drain.c); drain_news: that
	 * changed since hold last asked (sem_drain_news). */
	bool draining, drain_news;
};

struct sem {
	struct conn *conn;
	struct sem_name name;
	const char *label; /* the name as the user gave it, for messages */
	struct sem_opts opts;
	bool slots_quorum; /* the slots are quorum queues (the marker is there) */
	/* A lease of ours would be a quorum queue (see req_lease_type_quorum in
	 * request.c): where the slots are quorum queues, and on brokers
	 * that let anyone look at a queue (a look restarts a classic
	 * queue's expiry). */
	bool lease_quorum;
	/* Leases that left a probe or a declare unanswered: a quorum queue
	 * without a leader, which RabbitMQ 4.0 can leave when a node dies as
	 * a lease is declared through it, stalls every channel that touches
	 * it until the node is back. Their slots count as held, without
	 * being asked, until `until` (now_seconds()). */
	struct sem_stuck stuck[SEM_STUCK_MAX];
	/* The line's queue (#waiters: the mark that anyone may wait, in it
	 * or in #line) as the last look found it: absent, there but refusing
	 * messages (its node is down: then no declare of it may be answered,
	 * and nothing waits on it), or taking them. */
	enum { LINE_ABSENT, LINE_DOWN, LINE_UP } line;
	/* A look at #line (the line of entries) on this connection found it
	 * missing or refused: nothing more is asked of it. */
	bool no_entries;
	/* The max -v last told of, plus one (0: none yet). */
	unsigned traced_max;
	/* Max as the last look for a free slot found it (0: none yet). */
	unsigned max_seen;
	/* The holder's side (sem_hold_init), or NULL. */
	struct sem_hold *hold;
};

enum sem_admin_op {
	SEM_CREATE,  /* n slots; the semaphore must not exist */
	SEM_DESTROY, /* every slot */
	SEM_ADD,     /* n more slots */
	SEM_REMOVE,  /* n fewer slots, never below 0 */
	SEM_SET_MAX, /* exactly n slots */
};

struct sem_change {
	unsigned previous; /* slots before */
	unsigned max;      /* slots after */
	unsigned swept;    /* stray slot queues found above max and deleted */
	unsigned filled;   /* slot queues missing below max, made again */
	/* The semaphore was a create stopped halfway (slot 1 not recorded),
	 * finished by this change: its holes made, slot 1 recorded. */
	bool finished;
	/* Stray slot queues above max left alone: a holder holds them. */
	unsigned strays_kept;
	/* Stray holder queues (no connection holds them) deleted, and those
	 * the broker would not let us delete (a user without configure
	 * permission on holder queues). */
	unsigned swept_holders, holders_kept;
	/* Slots taken away that a holder held when they went (shrinking,
	 * destroy): each holder's job is signalled and ends. */
	unsigned ended_holders;
	/* With --drain: slots taken away that a holder held, whose jobs run
	 * on until they end (drain.c). */
	unsigned draining_holders;
};

/* Runs one administrative change under the admin mutex. Every operation
 * but SEM_CREATE needs an existing semaphore (AL_NOT_FOUND otherwise). */
enum al_status sem_admin(struct sem *s, enum sem_admin_op op, unsigned n, struct sem_change *out);

/* The number of slots: the size record's (record.h), or, for a
 * semaphore without one, what its slot queues say (1..max exist, max + 1
 * does not). */
enum al_status sem_max(struct sem *s, unsigned *max);

/* For a semaphore without slots (max 0): whether it is paused, there with
 * max 0 until a resize or destroy, rather than gone (record.h, the pause
 * marker). A broker that will not let us look says not. */
enum al_status sem_paused(struct sem *s, bool *paused);

/* What a client is told of a paused semaphore: busy, and how to resume. */
enum al_status sem_paused_busy(const struct sem *s);

/* An acquire gives up after this many lost races in a row (another client
 * declared the chosen holder queue first); waiting clients try again. */
#define SEM_RACE_LIMIT 20

struct slot_list {
	unsigned *slot; /* ascending */
	size_t len, cap;
};

/* A holder as it describes itself to status (holders.c). */
struct sem_holder {
	unsigned slot;
	char host[64];
	long pid;
	char since[32];   /* when it took the slot: ISO 8601, UTC */
	char until[32];   /* --min-hold: kept at least until then ("": none) */
	char command[16]; /* acquire or hold: never the job's arguments */
	char label[65];   /* hold --label ("": none) */
};

/* What sem_evict did. */
struct sem_eviction {
	unsigned max;
	bool named; /* the holder answered who it is: */
	struct sem_holder holder;
	double deleted_at; /* now_seconds() when its slot queue went */
	double waited;     /* seconds from then until its job had ended */
};

/* After a wait that found every slot busy (AL_BUSY): AL_ACCESS instead
 * if this user could not have taken a slot anyway (no configure on holder
 * queues: the inspector's role), so that a busy answer never hides it;
 * else AL_BUSY, its message kept. One round trip. */
enum al_status sem_busy_unless_refused(struct sem *s);

/* fencing.c: a fencing token for a grant of ours, drawn once the slot is
 * ours and before its command starts: larger than every token drawn
 * before (by a grant whose command has ended, above all). AL_DAMAGED
 * if the semaphore has no stream of tokens, AL_ACCESS if we may not read
 * it. */
enum al_status sem_fencing_token(struct sem *s, uint64_t *token);

/* Ends the job of slot k's holder (evict.c), under the admin mutex: its
 * slot queue deleted, then made again once the holder queue and the lease
 * have gone, which its holder lets happen only when its last process has
 * ended; the next in line is then woken. AL_NOT_FOUND if the slot is free
 * or there is none; AL_BUSY if the holder is still there at `until` (the
 * slot queue stays deleted: nobody can take the slot; sem_evict again
 * waits on). */
enum al_status sem_evict(struct sem *s, unsigned k, struct deadline until,
			 struct sem_eviction *out);

/* A holder's side: it answers status's questions about its slot, asked
 * through its own holder queue, from a connection of its own (see
 * sem_answers_send). hold.c keeps one per hold. */
#define SEM_ANSWERS_BATCH 8
struct sem_answers {
	struct sem *s;
	struct conn_opts *opts;
	struct sem_holder me;
	long long taken_at;  /* time(2) when the slot was taken: set by the caller */
	long long min_until; /* time(2) until which --min-hold keeps it (0: none) */
	bool listening;      /* a consumer of the holder queue is there */
	bool refused;        /* the broker refused it: unnamed from now on */
	/* Questions taken, to answer; how many were answered or dropped in
	 * the second that began at window. */
	unsigned pending;
	struct {
		char reply_to[256];
		char correlation_id[16];
	} question[SEM_ANSWERS_BATCH];
	unsigned taken;
	double window;
};

struct sem_status {
	unsigned max;
	bool paused; /* max 0 on purpose (sem_paused) */
	/* held: a holder queue or a lease; away: a lease only (its holder
	 * lost its connection and may come back), also in held; unreachable:
	 * held by a queue the broker keeps but cannot reach (its node is
	 * down), also in held. */
	struct slot_list held, away, unreachable, free, orphans;
	/* Slots 1..max whose slot queue is gone (an expires policy, a
	 * delete by hand) while the size record keeps them: not free, as
	 * nobody can take them until an administrator makes them again. */
	struct slot_list missing;
	/* The orphans (above max) that a --drain shrink left running:
	 * their slots' drain markers are there (drain.c). */
	struct slot_list draining;
	/* The held slots whose holders answered (holders.c), by slot. */
	struct sem_holder *holders;
	size_t holders_len;
	/* How many clients wait in the line (consumers of #waiters; those
	 * that fell back to polling are not counted), if it could be read. */
	bool waiting_known;
	unsigned long waiting;
};

/* What sem_acquire may do with a free slot. */
enum sem_take {
	/* A newcomer: take it unless others wait in the line, whose it is
	 * then (no barging; AL_BUSY, "others are already waiting"). */
	SEM_TAKE_UNLESS_LINE,
	/* A client the line refused, or outside it. */
	SEM_TAKE,
	/* The head of the line, woken: a release or a waiter that looked
	 * says a slot is free, so the leases are not probed first (the
	 * claim sees one that is there). */
	SEM_TAKE_WOKEN,
};

/* One attempt to take a free slot: probes slots, holders and leases,
 * claims the lowest free slot by declaring its holder queue exclusive
 * (and, with s->hold->lease.on, its lease), and checks that the slot still
 * exists. AL_BUSY if every slot is held. Without a lease the slot is held
 * as long as the connection lives. */
enum al_status sem_acquire(struct sem *s, enum sem_take how, unsigned *slot, unsigned *max);

/* What a waiter in line does instead of sem_acquire: looks for a free
 * slot as sem_acquire would (*slot: the lowest free one), claims none. */
enum al_status sem_find_free(struct sem *s, unsigned *slot, unsigned *max);

/* "all 3 slots of jobs are held" ("the one slot of jobs is held"): what
 * sem_acquire says when it finds none free, and the waiting line repeats. */
void sem_all_held(char *buf, size_t size, unsigned max, const char *label);

/* Sets s up, fresh, for the semaphore `name` under `prefix` (both
 * checked before) on connection c, with its options: what administrators
 * and readers need; no holder's side. */
void sem_init(struct sem *s, struct conn *c, const char *prefix, const char *name,
	      const struct sem_opts *opts);

/* Gives s a holder's side, fresh, in h: for waiting, claiming and
 * holding, with a lease of lease_ms and our token (0: no lease). */
void sem_hold_init(struct sem *s, struct sem_hold *h, unsigned lease_ms, int64_t token);

/* A fresh lease token: random, positive, fixed for the run. */

/* Whether the last try lost its connection to a lease in the way rather
 * than to the broker: a claim refused by the broker closing the
 * connection while the slot's last quorum lease is being deleted
 * (sem_lease_being_deleted), or a lease that left a request unanswered (a
 * quorum queue without a leader). */
bool sem_lost_to_lease(const struct sem *s);
bool sem_lease_being_deleted(const struct sem *s);

/* After s's connection was lost and opened again: what belonged to the
 * old connection is forgotten (our place in the line, verifications
 * under way, what the last look saw), what outlives it is kept (leases
 * that do not answer, a claim answered too late), and
 * the lease that such a late claim may have left is ended now. */
void sem_reconnected(struct sem *s);

int64_t sem_lease_token(void);

/* After a lost connection, on a new one: takes slot back if its lease is
 * still ours (renewing it) and the slot still exists. AL_OK: held again
 * (lease.need_holder if the broker still has the old holder queue);
 * AL_LOST with the reason if the lease ran out, is another's, or the slot
 * was removed; anything else: try again. */
enum al_status sem_reattach(struct sem *s, unsigned slot);

/* Keeps our lease of slot: declares it with our token, which renews it,
 * or makes it again if it ran out meanwhile; AL_LOST if another holder's
 * lease is there. For a holder that cannot end its job (a process it may
 * not signal) and so must not let the slot go. */
enum al_status sem_lease_keep(struct sem *s, unsigned slot);

/* Ends our lease of slot, if it is still ours: on its own connection,
 * after the command has ended (the keeper's last act when amqplock died,
 * or after a loss that left the lease ours). Waits for the answers, and
 * wakes the first in line if it ended one. */
enum al_status sem_lease_end(struct sem *s, unsigned slot);

/* sem_lease_end on a connection apart (s->conn) for the keeper, which
 * also hangs up the holding connection (its holder queue then goes). A
 * quorum lease is ended before the hang-up, and the line woken once the
 * holder queue is gone (or after a second): a probe that meets a quorum
 * queue being deleted crashes the prober's connection on RabbitMQ 3.10,
 * and waiters probe a lease once they see no holder queue. *ended: the
 * lease is gone, whatever failed after (the wake-up, under an alarm). */
enum al_status sem_lease_end_apart(struct sem *s, unsigned slot, struct conn *holding, bool *ended);

/* --min-hold: our lease of slot replaced by one that lasts `seconds`
 * from now, while our holder queue still keeps the slot (the caller then
 * lets the connection go, and the broker frees the slot when that lease
 * runs out). *placed says whether it is there; if not (another's lease
 * in the way for a second), our lease is gone all the same and the caller
 * releases the slot as usual, without one. */
enum al_status sem_lease_minimum(struct sem *s, unsigned slot, double seconds, bool *placed);

/* Waiting for a slot: joins the semaphore's line, last. The broker
 * gives each wake-up to the oldest waiter in it alone: sem_woken then
 * says so. Without it (refused, say), waiting still polls, and takes
 * what it finds free. What the line delivers goes to ear first
 * (sem_handover_ear: the notes of a hand-over), or is a wake-up. */
enum al_status sem_join_line(struct sem *s, sem_line_ear ear);

/* Whether we are in the line (joined, and neither refused nor left). */
bool sem_in_line(const struct sem *s);

/* Whether the broker has shown that we are first in line. */
bool sem_first_in_line(const struct sem *s);

/* Now and then, while waiting in #line: keeps the mark that anyone may
 * wait (#waiters) there. */
void sem_line_keep(struct sem *s);

/* Whether a wake-up has come and is not yet done with. */
bool sem_woken(const struct sem *s);

/* Acknowledges the wake-up, if any: the line's next message may then be
 * delivered. */
void sem_wake_done(struct sem *s);

/* Wakes the head of the line: the slot it was woken for may be free
 * (sem_released, a waiter that saw one free, an added slot). */
enum al_status sem_wake_line(struct sem *s);

/* Leaves the line (sem_join_line), with a slot or without. If we were
 * first in #waiters, the next is told that it is first now: it then
 * looks for free slots as often as the first does. From #line, a wake-up
 * not used is passed on, and without a slot our entry goes if it is
 * first. */
void sem_leave_line(struct sem *s, bool with_slot);

/* The first in line has not taken the free slot that a waiter behind it,
 * or a newcomer, sees (see docs/design.md, "Waiters in line"): wakes it
 * once more, and if the slot is still free half a second later, the first
 * in line is stuck (stopped with heartbeats off, say, which the broker
 * never drops, or a consumer of the line that is no waiting amqplock and
 * takes wake-ups without taking slots), and the line is deleted: every
 * waiter then takes what it finds, as after any deletion of the line.
 * *restarted says whether it was. */
enum al_status sem_unstick_line(struct sem *s, bool *restarted);

/* After `added` slots were added: wakes as many waiters (fewer if fewer
 * wait), one after the other in line. */
enum al_status sem_wake_added(struct sem *s, unsigned added);

/* Gives slot back and wakes the first in line, if any, before the
 * connection closes; waits for nothing but the lease's deletion. */
enum al_status sem_released(struct sem *s, unsigned slot);

/* Whether our slot's drain changed since the last call (drain.c): it
 * was removed by a --drain shrink and the job runs on (*draining), or it
 * was made again and is an ordinary held slot once more. A draining
 * holder's release neither offers its lease nor wakes the line: nobody
 * may take its slot. */
bool sem_drain_news(struct sem *s, bool *draining);

/* With a lease, a one-slot semaphore and someone in line, offers our
 * lease of slot to the first in line, and hands it over if it asks in
 * time (*handed: the lease, and the slot, are not ours any more; our
 * holder queue is gone). Otherwise our holder queue and lease are as they
 * were, for sem_released. */
enum al_status sem_hand_over(struct sem *s, unsigned slot, bool *handed);

/* The line's ear for a waiter (sem_join_line): offers, answers to our
 * ask, and a wake-up that comes while we ask (acknowledged at once: held,
 * it would keep the answer from us, as the line delivers one message at
 * a time; published again once the ask is over). */
enum line_heard sem_handover_ear(struct sem *s, uint64_t tag, const amqp_basic_properties_t *p);

/* Whether the wake-up we hold is a lease offered by its holder, or a
 * lease has been handed to us (an answer to our ask that came late). */
bool sem_offered(const struct sem *s);

/* First in line with an offer (sem_offered): asks its holder for the
 * lease, through the holder's own holder queue, if the offer is signed by
 * our login and is what we would have made; once the holder hands it
 * over, claims its slot with it (*slot). AL_BUSY if not handed over
 * (declined, not answered: the offerer then releases the slot as usual);
 * the offer is spent either way. */
enum al_status sem_adopt(struct sem *s, unsigned *slot);

/* Leaving the line: a lease handed to us that we did not adopt (its
 * answer came late, and we got another slot or gave up) is ended; an ask
 * still out no longer counts. */
void sem_handover_forget(struct sem *s);

/* While holding: asks the broker whether the slot still exists and the
 * holder queue is still ours, and renews the lease (declares, never a
 * publish, so a broker alarm cannot block them). The answers are taken by
 * sem_held_poll. */
enum al_status sem_verify_send(struct sem *s, unsigned slot);

/* While holding: takes whatever the broker has sent. AL_OK while the slot
 * is still held, with *verified set once a whole verification came back
 * (the lease renewed as of its sending); AL_LOST if the slot was removed,
 * the holder queue deleted or taken, the lease taken, or the connection
 * failed (then s->conn->dead), with the reason recorded ("its slot queue
 * ... was deleted", or the connection's). */
enum al_status sem_held_poll(struct sem *s, unsigned slot, bool *verified);

/* Holders above max (holder queues or leases): after a remove or destroy
 * they keep their slots until they leave. */
enum al_status sem_orphans(struct sem *s, unsigned *max, struct slot_list *orphans);

/* A snapshot without the admin mutex: it may be stale by the time it is
 * read. Free it with sem_status_free, also after a failure. */
enum al_status sem_status(struct sem *s, struct sem_status *out);
void sem_status_free(struct sem_status *st);

/* The holder of slot starts answering who it is (a consumer of its
 * holder queue, on a channel of its own, set up without waiting); again
 * after each reconnect. A refusal (no read permission on the holder
 * queue) leaves the slot held, its holder unnamed. Never fails. */
void sem_answers_listen(struct sem_answers *a, struct sem *s, unsigned slot,
			struct conn_opts *opts);
/* Answers the questions taken since, from a connection of its own opened
 * for the purpose (a holder's connection never publishes: docs/design.md,
 * "Naming holders"), within half a second in all. Never fails. */
void sem_answers_send(struct sem_answers *a);

/* What sem_check finds wrong with a semaphore. */
enum sem_problem_kind {
	/* A shared queue where the admin mutex goes: a real mutex is
	 * exclusive, and every administrator would wait for this one for
	 * ever. */
	SEM_STRAY_MUTEX,
	/* A slot queue above max, behind a hole. */
	SEM_STRAY_SLOT,
	/* A slot queue exclusive to some connection: it goes with that
	 * connection and leaves a hole. */
	SEM_EXCLUSIVE_SLOT,
	/* A slot queue of another type than most. */
	SEM_MIXED_TYPE,
	/* A holder queue that no connection holds exclusively: its slot
	 * reads as held for ever. */
	SEM_STRAY_HOLDER,
	/* Quorum slots without the marker that gives their holders quorum
	 * leases (made by an older amqplock): leases then do not survive
	 * the loss of their node. */
	SEM_MISSING_MARKER,
	/* The quorum marker where the slots are classic, or there are none. */
	SEM_STRAY_MARKER,
	/* A slot queue gone below max (an expires policy, a delete by hand):
	 * a hole, which the size record shows. Repaired by making it again. */
	SEM_MISSING_SLOT,
	/* The pause marker beside slots: a pause or a resume stopped
	 * halfway, or an older amqplock's create of a paused semaphore.
	 * Harmless (nobody reads it while there are slots); repaired by
	 * deleting it, which keeps the slots. */
	SEM_STRAY_PAUSE,
	/* No size record, or one short of the slot queues right above it
	 * (a semaphore made or grown by amqplock 0.2 or older): its max
	 * cannot survive the loss of its top slot queues. Repaired by
	 * writing it. */
	SEM_UNRECORDED,
	/* A create stopped halfway: slot 1 not recorded (a create records
	 * it last), `count` slot queues not made; or, stopped while writing
	 * the record, slots 2..count recorded and no slot queue made (the
	 * semaphore does not exist). Repaired by finishing it, or by taking
	 * the part-written record off. */
	SEM_UNFINISHED,
	/* No stream of fencing tokens (a semaphore made by amqplock 0.4 or
	 * older, or its stream deleted by hand): `hold --token` is refused.
	 * Repaired by making it (its tokens count from 1). */
	SEM_MISSING_TOKENS,
};

struct sem_problem {
	enum sem_problem_kind kind;
	unsigned slot;       /* 0 for the mutex */
	enum slot_type type; /* SEM_MIXED_TYPE: the type of this slot */
	unsigned count;      /* SEM_UNFINISHED: see there */
	bool repaired;
};

struct sem_check {
	unsigned max;
	bool paused; /* max 0 on purpose, the slots' type kept (sem_paused) */
	/* The type of most slots; known (typed) when there are slots and
	 * they could be checked under the admin mutex. */
	bool typed;
	enum slot_type slot_type;
	/* In the order found: the mutex, stray slots, exclusive slots,
	 * mixed types, stray holders; slots ascending within each kind. */
	struct sem_problem *problem;
	size_t len, cap;
	unsigned repaired;
	/* Real holders above max: not a problem. */
	struct slot_list orphans;
};

/* An fsck for one semaphore, under the admin mutex: counts the slots one
 * by one and looks for each kind of problem above. With `repair` it
 * deletes the strays (slot queues above max highest first, holder queues,
 * a leftover mutex); the other problems cannot be repaired by deleting.
 * Without `repair` nothing changes: a leftover mutex is then reported
 * and the rest checked without the mutex, but for the slot types, whose
 * check redeclares slot queues. Free out with sem_check_free, also after
 * a failure. */
enum al_status sem_check(struct sem *s, bool repair, struct sem_check *out);
void sem_check_free(struct sem_check *c);

/* The name of the queue that problem p is about, into buf
 * (QUEUE_NAME_MAX + 1 bytes). */
void sem_problem_queue(const struct sem *s, const struct sem_problem *p, char *buf);

/* "classic" or "quorum". */
const char *sem_slot_type_name(enum slot_type t);

#endif
