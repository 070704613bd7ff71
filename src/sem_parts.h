/* What the parts of the semaphore algorithm share (sem.h is what the rest
 * of amqplock sees): request.c builds and sends the queue requests, look.c
 * reads, admin.c and check.c administer (strays.c finds the queues they
 * sweep), claim.c claims, lease.c holds and releases, line.c runs the line
 * of waiters, handover.c hands a lease over. For those files only. */
#ifndef AMQPLOCK_SEM_PARTS_H
#define AMQPLOCK_SEM_PARTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "names.h"
#include "probe.h"
#include "sem.h"

/* Reading max starts by probing this many slots: a small semaphore is
 * answered in one round trip. Holder queues are then scanned in windows
 * that double, up to the largest. */
#define FIRST_WINDOW   16u
#define LARGEST_WINDOW 1024u
/* A client's first look probes the holder queues of this many slots and
 * the slot queues of one more (later looks, of the max it saw, up to
 * FIRST_WINDOW): most semaphores have no more, and each probe is two
 * frames each way (make bench: 91 frames to the broker for an
 * uncontended hold of a 1-slot semaphore with 16, 43 with 4, before the
 * probe one past added 2). A larger semaphore costs the first look one or
 * two more round trips to find its max (max_after_window). */
#define FIRST_LOOK 4u

/* A semaphore's size as administrators see it, under their mutex. */
struct census {
	unsigned max;      /* the record's, or the highest slot queue there is */
	unsigned recorded; /* the record's max; 0: none (or not readable) */
	/* A create stopped halfway (record.h, record_unfinished): the
	 * record's max if slot 1 is not recorded, or, with no record, the
	 * top of one from slot 2 up (a create stopped while writing it,
	 * before any slot queue); 0: none. */
	unsigned unfinished;
	/* Slot queues missing at or below max (ascending), and the lowest
	 * and highest there are (0: none). */
	struct slot_list missing;
	unsigned lowest, highest;
	/* The pause marker is there (record.h): max 0 on purpose, or, beside
	 * slots, left by a pause or resume stopped halfway. */
	bool paused;
};

/* The queue requests amqplock makes, each with the reply it expects. */
enum queue_op {
	DECLARE_SLOT,   /* durable, shared: classic */
	DECLARE_QUORUM, /* durable, shared: quorum */
	/* The same as DECLARE_SLOT with x-queue-type classic said, which a
	 * quorum queue refuses (406): for checking types only. */
	DECLARE_CLASSIC,
	DECLARE_EXCLUSIVE, /* holder queue or admin mutex */
	DECLARE_PASSIVE,   /* does it exist? */
	DECLARE_LEASE,     /* durable, x-expires, our token (s->hold->lease) */
	/* basic.get without ack, answered get-empty (or get-ok): what
	 * restarts a quorum queue's expiry, which a declare does not (see
	 * renewal_steps). */
	READ_QUEUE,
	DELETE_QUEUE,
	/* #waiters, as its waiters declare it (req_waiters_arguments) */
	DECLARE_WAITERS,
	/* #tokens, the stream of fencing tokens (fencing.c) */
	DECLARE_TOKENS,
};

struct queue_request {
	amqp_method_number_t id, ok;
	amqp_queue_declare_t declare;
	amqp_queue_delete_t del;
	amqp_basic_get_t get;
	amqp_table_entry_t lease_args[4];
};

/* One request in a pipelined sequence about the queues of one slot. */
struct step {
	enum queue_op op;
	enum slot_kind kind;
};

/* request.c */
bool req_lease_type_quorum(const struct sem *s);
void *req_build(const struct sem *s, struct queue_request *r, enum queue_op op, const char *queue);
const char *req_verb(enum queue_op op);
enum al_status req_ask_one(struct sem *s, enum queue_op op, const char *queue, unsigned tolerated,
			   uint16_t *refused);
enum al_status req_ask_ok(struct sem *s, enum queue_op op, const char *queue);
/* After a failure that the caller goes on from (traced, not returned): a
 * refusal the request did not tolerate closed the main channel, which is
 * opened again for what follows (a request on it would be an internal
 * error); a dead connection is left to the next request to find. */
void req_recover(struct sem *s);
enum al_status req_ask_each(struct sem *s, enum queue_op op, enum slot_kind kind,
			    const unsigned *slot, size_t n, unsigned accept, uint16_t *answer);
enum al_status req_pipeline(struct sem *s, enum queue_op op, unsigned from, unsigned count,
			    bool descending, unsigned *done);
void *req_make_room(void *array, size_t len, size_t *cap, size_t size);
enum al_status req_append(struct slot_list *l, unsigned slot);
/* Whether slot is in l. */
bool req_has(const struct slot_list *l, unsigned slot);
enum al_status req_slot_send(struct sem *s, enum queue_op op, unsigned k, enum slot_kind kind);
enum al_status req_send_steps(struct sem *s, unsigned slot, const struct step *step, size_t n);
enum al_status req_await_steps(struct sem *s, const struct step *step, size_t n, size_t *done,
			       uint16_t *refused);
enum al_status req_run_steps(struct sem *s, unsigned slot, const struct step *step, size_t n,
			     size_t *done, uint16_t *refused);
enum al_status req_step_refused(struct sem *s, unsigned slot, const struct step *step,
				enum al_status st);
enum al_status req_lease_send(struct sem *s, enum queue_op op, unsigned k);
enum al_status req_lease_answer(struct sem *s, enum queue_op op, uint16_t *refused);
/* A passive declare's counts: consumers and messages waiting (0 and 0 if
 * there is no such queue or we may not look). */
enum al_status req_ask_counts(struct sem *s, const char *queue, uint32_t *consumers,
			      uint32_t *messages);
/* req_ask_counts, meanwhile(arg) called (if not NULL) once the question is
 * sent, before its answer is read. */
enum al_status req_ask_counts_meanwhile(struct sem *s, const char *queue, uint32_t *consumers,
					uint32_t *messages, enum al_status (*meanwhile)(void *),
					void *arg);
/* Whether a method is the answer to a question about a queue (a
 * declare's or a read's), as a verification's answers are. */
bool req_is_queue_answer(amqp_method_number_t id);

/* look.c */
void look_trace_max(struct sem *s, unsigned max);
void look_note_stuck(struct sem *s, unsigned slot);
enum al_status look_probe_taken(struct sem *s, unsigned first, unsigned n, bool *holder,
				bool *lease, bool *refused);
enum al_status look_scan_above(struct sem *s, enum slot_kind kind, unsigned max,
			       struct slot_list *found);
void look_note_line(struct sem *s, const struct probe *line);
/* The drain markers above max (drain.c) into marked, those whose slot a
 * holder holds (a holder queue or a lease) into held; both ascending. */
enum al_status look_drained(struct sem *s, unsigned max, struct slot_list *marked,
			    struct slot_list *held);
enum al_status look_find_free(struct sem *s, unsigned *max, struct slot_list *free_list,
			      bool leases);

/* drain.c */
/* Declares the drain markers of slots first..last (a --drain shrink,
 * before it deletes their slot queues). */
enum al_status drain_mark(struct sem *s, unsigned first, unsigned last);
/* Deletes every marker from slot first up, the markers above max found as
 * the orphans are (a shrink without --drain, a destroy, before their
 * slot queues go): *ended counts the draining holders above max whose
 * jobs this ends. */
enum al_status drain_end(struct sem *s, unsigned first, unsigned max, unsigned *ended);
/* Deletes the markers of slots first..last (made again: their holders
 * are ordinary ones again, their slot queues back). */
enum al_status drain_unmark(struct sem *s, unsigned first, unsigned last);
/* The markers above max: *draining counts those held; none held, all of
 * them are deleted. */
enum al_status drain_sweep(struct sem *s, unsigned max, unsigned *draining);
/* A holder's slot queue (or, draining, its marker) is gone: the other
 * one asked for (AL_OK: s->hold->draining says which one the holder
 * checks from now on), or AL_LOST with the reason. */
enum al_status drain_look_again(struct sem *s, unsigned slot);

/* strays.c */
enum al_status strays_find(struct sem *s, unsigned max, struct slot_list *strays, unsigned *kept);
enum al_status strays_find_holders(struct sem *s, unsigned max, struct slot_list *strays,
				   struct slot_list *orphans);
enum al_status strays_delete_holders(struct sem *s, const struct slot_list *strays, unsigned accept,
				     uint16_t **answer);

/* admin.c */
enum al_status admin_count_slots(struct sem *s, struct census *cs);
enum al_status admin_lock(struct sem *s, bool repair, bool *locked, bool *stray);
enum al_status admin_slot_type_of(struct sem *s, unsigned k, enum slot_type *type);
enum al_status admin_marked_type(struct sem *s, enum slot_type *type);
enum al_status admin_fill_holes(struct sem *s, const struct census *cs, unsigned upto,
				unsigned *filled);
enum al_status admin_set_marker(struct sem *s, bool quorum);
enum al_status admin_make_tokens(struct sem *s);

/* notes.c: the notes of a hand-over, by their type: the offer (to the
 * first in line), the ask (to the offerer's holder queue), the answer
 * that hands the lease over (where the offer went), and a decline (to the
 * offerer's holder queue; to an older amqplock's reply-to, whose offers
 * named the token). */
#define OFFER_TYPE    "amqplock.offer"
#define ASK_TYPE      "amqplock.ask"
#define HANDED_TYPE   "amqplock.handed"
#define DECLINED_TYPE "amqplock.declined"
/* How long an offerer waits for the first in line to ask, in ms. */
#define ADOPT_WAIT_MS 500
/* Copies bytes into buf as a string; false if they do not fit. */
bool note_text_copy(amqp_bytes_t b, char *buf, size_t size);
bool note_header_i64(const amqp_basic_properties_t *p, const char *key, int64_t *v);
bool note_header_text(const amqp_basic_properties_t *p, const char *key, char *buf, size_t size);
/* The correlation id is nonce. */
bool note_nonce_is(const amqp_basic_properties_t *p, const char *nonce);
/* A fresh nonce or id: 63 random bits, in hex. */
void note_new_id(char *buf, size_t size);
/* The notes' headers. */
amqp_table_entry_t note_i64_entry(const char *key, int64_t v);
amqp_table_entry_t note_text_entry(const char *key, const char *v);
/* Reads what comes until done(s) or `by`. */
enum al_status note_wait_for(struct sem *s, bool (*done)(const struct sem *), struct deadline by);

/* line.c */
enum al_status line_ahead(struct sem *s, bool *ahead);
void line_waiters_queue(const struct sem *s, char *buf);
/* #waiters' arguments: durable (RabbitMQ 4.3 refuses new transient
 * shared queues), gone a minute after it was last used, and one active
 * consumer at a time. */
amqp_table_t req_waiters_arguments(void);
void line_entries_queue(const struct sem *s, char *buf);
/* How many entries one look at the head of #line passes at most (entries
 * of waiters gone, or naming no waiter's queue); the next look goes on. */
#define ENTRIES_PASSED_MAX 64
/* Whether a line that takes messages is there to be asked how long it is
 * (a question to a line whose node is down may never be answered): one
 * that the last look did not find so is probed first. */
enum al_status line_up(struct sem *s, bool *up);
/* Whether #line may have entries to serve (see line.c). */
bool line_entries_wanted(const struct sem *s);
/* #waiters as a passive declare sees it: its consumers (waiters) and
 * the wake-ups it holds (none of either if it is not there). */
enum al_status line_counts(struct sem *s, uint32_t *waiters, uint32_t *waiting);
/* What a look at the head of #line does with the oldest entry whose
 * waiter is there: nothing (it is only found), or a wake-up into its
 * queue. Either way the entry goes back in its place. */
enum head_act { HEAD_FIND, HEAD_WAKE };
enum al_status line_head(struct sem *s, enum head_act act, unsigned n, const char *skip,
			 char *found);
enum al_status line_wake_entries(struct sem *s, unsigned n, const char *skip);
enum al_status line_entry_last(struct sem *s, const char *queue);
/* How long a notice to the line (a wake-up, a note of a hand-over) may
 * wait for a consumer (ms, text). Not "0": RabbitMQ 4.3 drops such a
 * message even with a consumer ready (3.10 and 4.0 hand it over). A
 * second is long enough to reach a waiter, short enough that one
 * arriving later wakes for nothing at most once. */
#define NOTICE_EXPIRATION "1000"

/* lease.c: ends a lease of slot handed to us that we cannot keep, by
 * its token (s->hold->lease.token), which nobody else may use now: the holder
 * queue declared first (asked for up to a second), unless another has it;
 * wakes the line if it ended the lease. */
enum al_status sem_lease_let_go(struct sem *s, unsigned slot);

/* claim.c */
enum al_status claim_fresh(struct sem *s, unsigned k);

/* holders.c: asks the holders of the slots in held that are not away
 * who they are, and waits a moment for their answers (out->holders). */
enum al_status holders_ask(struct sem *s, struct sem_status *out);

#endif
