#include "sem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"
#include "probe.h"
#include "record.h"

/* Reading max starts by probing this many slots: a small semaphore is
 * answered in one round trip. Holder queues are then scanned in windows
 * that double, up to the largest. */
#define FIRST_WINDOW   16u
#define LARGEST_WINDOW 1024u
/* Slots probed in one round of the narrowing search for max. */
#define SEARCH_POINTS 64u

/* -v: the number of slots, when it is news (a waiting client counts them
 * on every try). */
static void trace_max(struct sem *s, unsigned max)
{
	if (s->traced_max == max + 1)
		return;
	s->traced_max = max + 1;
	trace("%s has %u slot%s", s->name.base, max, max == 1 ? "" : "s");
}

static enum al_status append(struct slot_list *l, unsigned slot);

/* A semaphore's size as administrators see it, under their mutex. */
struct census {
	unsigned max;      /* the record's, or the highest slot queue there is */
	unsigned recorded; /* the record's max; 0: none (or not readable) */
	/* Slot queues missing at or below max (ascending), and the lowest
	 * and highest there are (0: none). */
	struct slot_list missing;
	unsigned lowest, highest;
};

/* Administrators count the slot queues one by one from 1, in windows that
 * double, on past holes, until past the record a window finds none: so a
 * slot queue that an expires policy or a hand deleted leaves a hole, not a
 * smaller semaphore. max is the record's; a semaphore without one (made by
 * amqplock 0.2 or older) has the highest slot queue found for max, holes
 * filled upward rather than the slots above them swept. Slot queues above
 * a record are strays (sweep_strays). */
static enum al_status count_slots(struct sem *s, struct census *cs)
{
	bool exists[LARGEST_WINDOW], any = true, read = false;
	unsigned first = 1, batch = FIRST_WINDOW, i, top = 0;
	enum al_status st;

	memset(cs, 0, sizeof(*cs));
	while (first <= SLOTS_MAX) {
		/* The record is asked for once the slot queues run out, near
		 * the highest found, which is max when nothing is amiss: two
		 * questions. Then on to its max, should that lie higher. */
		if (!any && !read) {
			read = true;
			st = record_read(s->conn, &s->name, top, &cs->recorded);
			if (st != AL_OK)
				return st;
		}
		if (!any && first > cs->recorded)
			break;
		if (batch > SLOTS_MAX + 1 - first)
			batch = SLOTS_MAX + 1 - first;
		st = probe_slots(s->conn, &s->name, SLOT_QUEUE, first, batch, exists, NULL);
		if (st != AL_OK)
			return st;
		any = false;
		for (i = 0; i < batch; i++) {
			if (!exists[i])
				continue;
			any = true;
			top = first + i;
		}
		first += batch;
		if (batch < LARGEST_WINDOW)
			batch *= 2;
	}
	if (!read && (st = record_read(s->conn, &s->name, top, &cs->recorded)) != AL_OK)
		return st;
	cs->max = cs->recorded ? cs->recorded : top;
	/* Slot queues right above the record, without a gap: slots an
	 * amqplock older than the record added (or a remove stopped between
	 * cutting the record and deleting them). They are taken for slots,
	 * to be recorded, rather than swept as strays: that can leave a
	 * semaphore larger than a stopped remove meant, never end a job. */
	for (first = cs->max + 1; cs->recorded && first <= top; first += batch) {
		batch = top - first + 1 < LARGEST_WINDOW ? top - first + 1 : LARGEST_WINDOW;
		st = probe_slots(s->conn, &s->name, SLOT_QUEUE, first, batch, exists, NULL);
		for (i = 0; st == AL_OK && i < batch && exists[i]; i++)
			cs->max = first + i;
		if (st != AL_OK || i < batch)
			break;
	}
	if (st != AL_OK)
		return st;
	trace_max(s, cs->max);
	/* The holes: asked again, slot by slot up to max. */
	for (first = 1; st == AL_OK && first <= cs->max; first += batch) {
		batch = cs->max - first + 1 < LARGEST_WINDOW ? cs->max - first + 1 : LARGEST_WINDOW;
		st = probe_slots(s->conn, &s->name, SLOT_QUEUE, first, batch, exists, NULL);
		for (i = 0; st == AL_OK && i < batch; i++) {
			if (!exists[i]) {
				st = append(&cs->missing, first + i);
				continue;
			}
			if (!cs->lowest)
				cs->lowest = first + i;
			cs->highest = first + i;
		}
	}
	if (st == AL_OK && cs->missing.len > 0)
		trace("%zu slot queue(s) of %s missing, the first %u (an expires policy? deleted "
		      "by "
		      "hand?)",
		      cs->missing.len, s->label, cs->missing.slot[0]);
	return st;
}

/* Probes of ascending slots, answered: moves *lo up to the last slot found
 * before the first one missing, and *hi down to that missing one. Slots
 * 1..max exist without holes, so the boundary lies between them. */
static void bracket(const struct probe *p, size_t n, unsigned *lo, unsigned *hi)
{
	size_t i;

	for (i = 0; i < n && p[i].exists; i++)
		*lo = p[i].slot;
	if (i < n)
		*hi = p[i].slot;
}

/* Slot lo exists (or is 0) and slot hi does not: probes up to
 * SEARCH_POINTS slots spread between them per round trip and keeps the
 * boundary between the last one found and the first one missing. */
static enum al_status narrow(struct sem *s, unsigned lo, unsigned hi, unsigned *max)
{
	struct probe p[SEARCH_POINTS];
	enum al_status st;
	unsigned gap, n, i;

	while (hi - lo > 1) {
		gap = hi - lo - 1;
		n = gap < SEARCH_POINTS ? gap : SEARCH_POINTS;
		for (i = 0; i < n; i++)
			p[i] = (struct probe){.kind = SLOT_QUEUE,
					      .slot = lo + 1 +
						      (unsigned)((unsigned long)gap * i / n)};
		if ((st = probe_queues(s->conn, &s->name, p, n)) != AL_OK)
			return st;
		bracket(p, n, &lo, &hi);
	}
	*max = lo;
	trace_max(s, *max);
	return AL_OK;
}

/* max from the answers for slots 1..FIRST_WINDOW: if they all exist,
 * probes 2, 4, 8 ... times as far in one round trip, then narrows. */
static enum al_status max_after_window(struct sem *s, const struct probe *window, unsigned *max)
{
	struct probe p[16];
	unsigned lo = 0, hi = SLOTS_MAX + 1, k, n = 0;
	enum al_status st;

	bracket(window, FIRST_WINDOW, &lo, &hi);
	if (hi <= FIRST_WINDOW)
		return narrow(s, lo, hi, max);
	for (k = 2 * FIRST_WINDOW; k < SLOTS_MAX; k *= 2)
		p[n++] = (struct probe){.kind = SLOT_QUEUE, .slot = k};
	p[n++] = (struct probe){.kind = SLOT_QUEUE, .slot = SLOTS_MAX};
	if ((st = probe_queues(s->conn, &s->name, p, n)) != AL_OK)
		return st;
	bracket(p, n, &lo, &hi);
	return narrow(s, lo, hi, max);
}

/* Readers search for max rather than count: amqplock keeps the slot
 * queues 1..max without holes at every moment (declares go up, deletes
 * come down, one administrator at a time), so a few round trips answer
 * for any size. */
enum al_status sem_max(struct sem *s, unsigned *max)
{
	struct probe window[FIRST_WINDOW];
	unsigned i, recorded;
	enum al_status st;

	for (i = 0; i < FIRST_WINDOW; i++)
		window[i] = (struct probe){.kind = SLOT_QUEUE, .slot = i + 1};
	if ((st = probe_queues(s->conn, &s->name, window, FIRST_WINDOW)) != AL_OK ||
	    (st = max_after_window(s, window, max)) != AL_OK)
		return st;
	/* The slot queues' max is the record's unless some have gone. */
	if ((st = record_read(s->conn, &s->name, *max, &recorded)) != AL_OK)
		return st;
	if (recorded > *max) {
		trace("the record says %u slots, the slot queues %u", recorded, *max);
		*max = recorded;
	}
	return AL_OK;
}

/* The queue requests amqplock makes, each with the reply it expects. */
enum queue_op {
	DECLARE_SLOT,   /* durable, shared: classic */
	DECLARE_QUORUM, /* durable, shared: quorum */
	/* The same as DECLARE_SLOT with x-queue-type classic said, which a
	 * quorum queue refuses (406): for checking types only. */
	DECLARE_CLASSIC,
	DECLARE_EXCLUSIVE, /* holder queue or admin mutex */
	DECLARE_PASSIVE,   /* does it exist? */
	DECLARE_LEASE,     /* durable, x-expires, our token (s->lease) */
	/* basic.get without ack, answered get-empty (or get-ok): what
	 * restarts a quorum queue's expiry, which a declare does not (see
	 * renewal_steps). */
	READ_QUEUE,
	DELETE_QUEUE,
};

struct queue_request {
	amqp_method_number_t id, ok;
	amqp_queue_declare_t declare;
	amqp_queue_delete_t del;
	amqp_basic_get_t get;
	amqp_table_entry_t lease_args[3];
};

static amqp_table_entry_t quorum_type = {
	.key = {sizeof("x-queue-type") - 1, "x-queue-type"},
	.value = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = {sizeof("quorum") - 1, "quorum"}},
};

static amqp_table_entry_t classic_type = {
	.key = {sizeof("x-queue-type") - 1, "x-queue-type"},
	.value = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = {sizeof("classic") - 1, "classic"}},
};

/* Up to RabbitMQ 4.2.5 a passive declare needs no permission on the
 * queue, and it restarts a classic queue's expiry: anyone who can log in
 * could keep a dead holder's classic lease, and its slot, for as long as
 * they looked at it once in D (a monitoring script reading queue depths
 * does). A quorum queue's expiry restarts only on a read (basic.get or a
 * consumer), which needs read on the lease; publishes and passive
 * declares leave it alone. So leases are quorum queues there, and where
 * the slots are (they must outlive a node); elsewhere classic, which are
 * quicker to make and delete (1.7 + 0.8 ms against 4.2 + 1.9 ms on
 * 3.10) and expire on time (a quorum queue's expiry is checked every 5
 * s). A broker that does not say its version is taken as an old one. */
#define LOOKS_NEED_PERMISSION 4002006ul

static bool lease_type_quorum(const struct sem *s)
{
	return s->slots_quorum || s->conn->version < LOOKS_NEED_PERMISSION;
}

/* A lease queue's arguments: x-expires makes the broker delete it D after
 * its last declare; x-max-length, which nothing ever reaches (nobody
 * publishes to a lease), is the token: the broker refuses a redeclare
 * with any other value (406), so a declare is an atomic "create, or
 * renew if it is mine". */
static amqp_table_t lease_arguments(const struct sem *s, amqp_table_entry_t *e)
{
	e[0] = (amqp_table_entry_t){
		.key = amqp_cstring_bytes("x-expires"),
		.value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = (int64_t)s->lease.ms}};
	e[1] = (amqp_table_entry_t){
		.key = amqp_cstring_bytes("x-max-length"),
		.value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = s->lease.token}};
	e[2] = quorum_type;
	return (amqp_table_t){.num_entries = s->lease.quorum ? 3 : 2, .entries = e};
}

/* The reply that says op went through. */
static amqp_method_number_t reply_to(enum queue_op op)
{
	return op == DELETE_QUEUE ? AMQP_QUEUE_DELETE_OK_METHOD
	       : op == READ_QUEUE ? AMQP_BASIC_GET_EMPTY_METHOD
				  : AMQP_QUEUE_DECLARE_OK_METHOD;
}

static void *queue_request(const struct sem *s, struct queue_request *r, enum queue_op op,
			   const char *queue)
{
	memset(r, 0, sizeof(*r));
	r->ok = reply_to(op);
	if (op == DELETE_QUEUE) {
		r->id = AMQP_QUEUE_DELETE_METHOD;
		r->del.queue = amqp_cstring_bytes(queue);
		return &r->del;
	}
	if (op == READ_QUEUE) {
		r->id = AMQP_BASIC_GET_METHOD;
		r->get.queue = amqp_cstring_bytes(queue);
		r->get.no_ack = true;
		return &r->get;
	}
	r->id = AMQP_QUEUE_DECLARE_METHOD;
	r->declare.queue = amqp_cstring_bytes(queue);
	r->declare.durable = op == DECLARE_SLOT || op == DECLARE_QUORUM || op == DECLARE_CLASSIC ||
			     op == DECLARE_LEASE;
	if (op == DECLARE_QUORUM)
		r->declare.arguments = (amqp_table_t){.num_entries = 1, .entries = &quorum_type};
	if (op == DECLARE_CLASSIC)
		r->declare.arguments = (amqp_table_t){.num_entries = 1, .entries = &classic_type};
	if (op == DECLARE_LEASE)
		r->declare.arguments = lease_arguments(s, r->lease_args);
	r->declare.exclusive = op == DECLARE_EXCLUSIVE;
	r->declare.passive = op == DECLARE_PASSIVE;
	return &r->declare;
}

/* What op is doing, for messages: "deleting amqplock.x-1-A ...". */
static const char *verb(enum queue_op op)
{
	return op == DELETE_QUEUE      ? "deleting"
	       : op == DECLARE_PASSIVE ? "checking"
	       : op == READ_QUEUE      ? "reading"
				       : "declaring";
}

/* One request about one queue, and its reply; a refusal in `tolerated`
 * is an answer (*refused, see conn_answer), any other a failure. */
static enum al_status ask_one(struct sem *s, enum queue_op op, const char *queue,
			      unsigned tolerated, uint16_t *refused)
{
	struct queue_request r;
	void *method = queue_request(s, &r, op, queue);

	return conn_call(s->conn, r.id, method, r.ok, tolerated, refused, verb(op), queue);
}

/* One request that must go through. */
static enum al_status ask_ok(struct sem *s, enum queue_op op, const char *queue)
{
	return ask_one(s, op, queue, 0, NULL);
}

/* Requests sent before their replies are read, in ask_each: few enough
 * that the replies never fill the socket buffers while we still send. */
#define ASK_BATCH 256u

/* The same request about the kind queue of each slot[i], answer[i] as
 * ask_one gives it, pipelined. The broker drops the requests that follow
 * a refusal on a channel, so after one the rest are sent again on the
 * fresh channel, in batches that start again from one and double while
 * all their answers are ok: answers that are ok cost a round trip per
 * batch, each refusal (a holder's queue, say) about two, and requests
 * are not sent over and over where refusals are many. */
static enum al_status ask_each(struct sem *s, enum queue_op op, enum slot_kind kind,
			       const unsigned *slot, size_t n, unsigned accept, uint16_t *answer)
{
	char queue[QUEUE_NAME_MAX + 1];
	struct queue_request r;
	enum al_status st;
	amqp_method_t m;
	size_t i = 0, j, end, batch = ASK_BATCH;
	void *method;

	while (i < n) {
		end = n - i < batch ? n : i + batch;
		for (j = i; j < end; j++) {
			sem_name_slot(&s->name, slot[j], kind, queue);
			method = queue_request(s, &r, op, queue);
			if ((st = conn_send(s->conn, r.id, method)) != AL_OK)
				return st;
		}
		for (j = i; j < end;) {
			s->conn->reply_code = 0;
			st = conn_expect(s->conn, r.ok, &m);
			sem_name_slot(&s->name, slot[j], kind, queue);
			st = conn_answer(s->conn, st, accept, &answer[j++], verb(op), queue);
			if (st != AL_OK)
				return st;
			if (answer[j - 1] != 0)
				break; /* the rest of the batch goes again */
		}
		batch = j < end ? 1 : batch < ASK_BATCH ? 2 * batch : ASK_BATCH;
		i = j;
	}
	return AL_OK;
}

/* Sends one request per slot (from, from - 1, ... when descending) before
 * reading any reply. The broker handles a channel's methods in order and
 * drops the rest after a failure, so an interrupted run leaves a prefix of
 * the work done: deleting from the top down never leaves holes. *done
 * counts the replies that came back ok. */
static enum al_status pipeline(struct sem *s, enum queue_op op, unsigned from, unsigned count,
			       bool descending, unsigned *done)
{
	char queue[QUEUE_NAME_MAX + 1];
	struct queue_request r;
	enum al_status st = AL_OK;
	amqp_method_t m;
	unsigned i, slot;
	void *method;

	*done = 0;
	for (i = 0; i < count && st == AL_OK; i++) {
		slot = descending ? from - i : from + i;
		sem_name_slot(&s->name, slot, SLOT_QUEUE, queue);
		method = queue_request(s, &r, op, queue);
		st = conn_send(s->conn, r.id, method);
	}
	for (i = 0; i < count && st == AL_OK; i++) {
		st = conn_expect(s->conn, r.ok, &m);
		if (st == AL_OK)
			++*done;
	}
	if (st != AL_OK) {
		slot = descending ? from - *done : from + *done;
		sem_name_slot(&s->name, slot, SLOT_QUEUE, queue);
		return conn_refused(s->conn, st, verb(op), queue);
	}
	return AL_OK;
}

static enum al_status delete_slots_down(struct sem *s, unsigned top, unsigned count)
{
	unsigned done;

	trace("deleting slots %u..%u", top, top - count + 1);
	return pipeline(s, DELETE_QUEUE, top, count, true, &done);
}

/* Declares slots from..from+count-1. If the broker refuses one, the ones
 * this call made are deleted again: no half-made semaphore stays behind. */
static enum al_status declare_slots(struct sem *s, unsigned from, unsigned count)
{
	enum al_status st;
	unsigned done;

	trace("declaring slots %u..%u", from, from + count - 1);
	st = pipeline(s, s->opts.slot_type == SLOT_QUORUM ? DECLARE_QUORUM : DECLARE_SLOT, from,
		      count, false, &done);
	if (st != AL_OK && done > 0 && !s->conn->dead && conn_reset_channel(s->conn) == AL_OK)
		delete_slots_down(s, from + done - 1, done);
	return st;
}

/* array (len elements used of *cap, each `size` bytes) with room for one
 * more, doubled when full; NULL, with the failure recorded, if memory ran
 * out (array is then unchanged). */
static void *make_room(void *array, size_t len, size_t *cap, size_t size)
{
	size_t more = *cap ? 2 * *cap : 16;
	void *grown;

	if (len < *cap)
		return array;
	if (!(grown = realloc(array, more * size))) {
		fail(AL_INTERNAL, "out of memory");
		return NULL;
	}
	*cap = more;
	return grown;
}

static enum al_status append(struct slot_list *l, unsigned slot)
{
	unsigned *room = make_room(l->slot, l->len, &l->cap, sizeof(*room));

	if (!room)
		return AL_INTERNAL;
	l->slot = room;
	l->slot[l->len++] = slot;
	return AL_OK;
}

/* How long a lease that left a probe unanswered counts as held without
 * being asked again. */
#define STUCK_FOR 10.0

/* The index in lease.stuck of slot's current entry, or -1. */
static int stuck_index(const struct sem *s, unsigned slot)
{
	double now = now_seconds();
	int i;

	for (i = 0; i < SEM_STUCK_MAX; i++)
		if (s->lease.stuck[i].slot == slot && s->lease.stuck[i].until > now)
			return i;
	return -1;
}

/* Remembers slot's lease as unanswering, in its own, a free or the
 * oldest entry. */
static void note_stuck(struct sem *s, unsigned slot)
{
	int i = stuck_index(s, slot), k;

	if (i < 0)
		for (i = 0, k = 1; k < SEM_STUCK_MAX; k++)
			if (s->lease.stuck[k].until < s->lease.stuck[i].until)
				i = k;
	trace("the lease of slot %u does not answer (a quorum queue without a leader?); "
	      "counting the slot as held for %.0f s",
	      slot, STUCK_FOR);
	s->lease.stuck[i].slot = slot;
	s->lease.stuck[i].until = now_seconds() + STUCK_FOR;
}

/* Of slots first..first+n-1, those without a holder queue (holder[i]
 * false) are asked whether they have a lease: lease[i], or, with lease
 * NULL, holder[i] set for them too (a holder away, coming back). Leases
 * are probed only where no holder queue is: a probe that meets a quorum
 * queue being deleted (a holder's release) crashes the connection on
 * RabbitMQ 3.10. A lease that leaves its probe unanswered, or that did
 * so less than STUCK_FOR ago, counts as there and unreachable
 * (refused[i]), and is not asked again meanwhile: the connection and the
 * other answers are kept (probe.h, unanswered). */
static enum al_status leases_of_free(struct sem *s, unsigned first, unsigned n, bool *holder,
				     bool *lease, bool *refused)
{
	struct probe *p = calloc(n ? n : 1, sizeof(*p));
	enum al_status st = AL_OK;
	bool *taken = lease ? lease : holder;
	size_t i, m = 0;

	if (!p)
		return fail(AL_INTERNAL, "out of memory");
	for (i = 0; i < n; i++) {
		if (lease)
			lease[i] = false;
		if (!holder[i] && stuck_index(s, first + (unsigned)i) < 0)
			p[m++] = (struct probe){.kind = LEASE_QUEUE, .slot = first + (unsigned)i};
	}
	if (m > 0)
		st = probe_queues(s->conn, &s->name, p, m);
	for (i = 0; st == AL_OK && i < m; i++) {
		if (p[i].unanswered)
			note_stuck(s, p[i].slot);
		if (p[i].exists)
			taken[p[i].slot - first] = true;
		if (p[i].refused && refused)
			refused[p[i].slot - first] = true;
	}
	/* Those stuck a while ago, not asked now, are held. */
	for (i = 0; st == AL_OK && i < n; i++) {
		if (holder[i] || taken[i] || stuck_index(s, first + (unsigned)i) < 0)
			continue;
		taken[i] = true;
		if (refused)
			refused[i] = true;
	}
	free(p);
	return st;
}

/* Which of slots first..first+n-1 have a holder queue (holder[i]), which
 * of the others a lease (as leases_of_free says), and, if refused is not
 * NULL, whose holder queue or lease the broker has but cannot reach
 * (refused[i]; those count as taken). */
static enum al_status probe_taken(struct sem *s, unsigned first, unsigned n, bool *holder,
				  bool *lease, bool *refused)
{
	enum al_status st = probe_slots(s->conn, &s->name, HOLDER_QUEUE, first, n, holder, refused);

	return st == AL_OK ? leases_of_free(s, first, n, holder, lease, refused) : st;
}

/* Collects the kind queues that exist above max, probing windows of
 * `overshoot` slots and going on to the next window while one finds any.
 * What lies beyond an empty window goes unseen: that is the limit of a
 * semaphore that keeps no record of its past sizes. */
static enum al_status scan_above(struct sem *s, enum slot_kind kind, unsigned max,
				 struct slot_list *found)
{
	unsigned first = max + 1, i;
	enum al_status st = AL_OK;
	bool *exists, any;

	if (s->opts.overshoot == 0)
		return AL_OK;
	exists = calloc(s->opts.overshoot, sizeof(*exists));
	if (!exists)
		return fail(AL_INTERNAL, "out of memory");
	do {
		any = false;
		st = probe_slots(s->conn, &s->name, kind, first, s->opts.overshoot, exists, NULL);
		for (i = 0; st == AL_OK && i < s->opts.overshoot; i++) {
			if (exists[i]) {
				st = append(found, first + i);
				any = true;
			}
		}
		first += s->opts.overshoot;
		/* amqplock never makes a slot above SLOTS_MAX, so strays lie
		 * below twice that. The bound ends the scan where every probe
		 * reads as there (a broker that refuses them all: refused
		 * counts as there, see probe.h). */
	} while (st == AL_OK && any && first <= 2 * SLOTS_MAX);
	free(exists);
	return st;
}

/* The slot queues above max (an administrator stopped between cutting
 * the record and deleting the slots, a foreign client), less those a
 * holder holds: deleting one would end its job, and amqplock's own
 * repairs never end a job. *kept counts those left. */
static enum al_status find_strays(struct sem *s, unsigned max, struct slot_list *strays,
				  unsigned *kept)
{
	enum al_status st = scan_above(s, SLOT_QUEUE, max, strays);
	bool holder, lease;
	size_t i, n = 0;

	*kept = 0;
	for (i = 0; st == AL_OK && i < strays->len; i++) {
		st = probe_taken(s, strays->slot[i], 1, &holder, &lease, NULL);
		if (st == AL_OK && (holder || lease)) {
			trace("stray slot queue %u above max %u is held; kept", strays->slot[i],
			      max);
			++*kept;
		} else {
			strays->slot[n++] = strays->slot[i];
		}
	}
	strays->len = n;
	return st;
}

/* Deletes the stray slot queues above max that nobody holds, highest
 * first like every delete. */
static enum al_status sweep_strays(struct sem *s, unsigned max, struct sem_change *out)
{
	struct slot_list strays = {0};
	enum al_status st = find_strays(s, max, &strays, &out->strays_kept);
	size_t i;

	for (i = strays.len; st == AL_OK && i > 0; i--) {
		trace("deleting stray slot queue %u above max %u", strays.slot[i - 1], max);
		st = delete_slots_down(s, strays.slot[i - 1], 1);
	}
	out->swept = (unsigned)strays.len;
	free(strays.slot);
	return st;
}

/* The holder queues that exist for slots 1..max and in the overshoot
 * windows above, sorted: strays, which no connection holds (a passive
 * declare of ours sees them, where a holder's exclusive queue gets 405),
 * and, above max, orphans (the real holders of removed slots; orphans may
 * be NULL). A queue we may not look at (RabbitMQ 4.2 and later check
 * permissions on passive declares) is taken for a holder's. (Asking the
 * holders' leases first would spare the broker those refusals, but a
 * probe of a lease being deleted can crash the connection: see
 * leases_of_free.) */
static enum al_status find_holders(struct sem *s, unsigned max, struct slot_list *strays,
				   struct slot_list *orphans)
{
	struct slot_list found = {0};
	enum al_status st = AL_OK;
	uint16_t *answer = NULL;
	bool *exists;
	size_t i;

	if (max > 0) {
		if (!(exists = calloc(max, sizeof(*exists))))
			return fail(AL_INTERNAL, "out of memory");
		st = probe_slots(s->conn, &s->name, HOLDER_QUEUE, 1, max, exists, NULL);
		for (i = 0; st == AL_OK && i < max; i++)
			if (exists[i])
				st = append(&found, (unsigned)i + 1);
		free(exists);
	}
	if (st == AL_OK)
		st = scan_above(s, HOLDER_QUEUE, max, &found);
	if (st == AL_OK && found.len > 0 && !(answer = calloc(found.len, sizeof(*answer))))
		st = fail(AL_INTERNAL, "out of memory");
	if (st == AL_OK)
		st = ask_each(s, DECLARE_PASSIVE, HOLDER_QUEUE, found.slot, found.len,
			      REFUSED_ACCESS | REFUSED_NOT_FOUND | REFUSED_LOCKED, answer);
	for (i = 0; st == AL_OK && i < found.len; i++) {
		if (answer[i] == 0)
			st = append(strays, found.slot[i]);
		else if (answer[i] != AMQP_NOT_FOUND && found.slot[i] > max && orphans)
			st = append(orphans, found.slot[i]);
		if (answer[i] == AMQP_ACCESS_REFUSED)
			trace("holder queue %u may not be looked at; taken as held", found.slot[i]);
	}
	free(answer);
	free(found.slot);
	return st;
}

/* Deletes stray holder queues, each answer as ask_each gives it. A holder
 * that has taken the slot since the queue was found owns the queue now,
 * exclusively, and the broker refuses to delete it (405). */
static enum al_status delete_holders(struct sem *s, const struct slot_list *strays, unsigned accept,
				     uint16_t **answer)
{
	size_t i;

	*answer = NULL;
	if (strays->len == 0)
		return AL_OK;
	if (!(*answer = calloc(strays->len, sizeof(**answer))))
		return fail(AL_INTERNAL, "out of memory");
	for (i = 0; i < strays->len; i++)
		trace("deleting stray holder queue %u (held by no connection)", strays->slot[i]);
	return ask_each(s, DELETE_QUEUE, HOLDER_QUEUE, strays->slot, strays->len,
			REFUSED_LOCKED | accept, *answer);
}

/* What administrators do on their way: a stray holder queue makes its
 * slot read as held for ever, and outlives a destroy. A user who may not
 * delete holder queues leaves them (counted in holders_kept) rather than
 * fail the change it came for. */
static enum al_status sweep_holders(struct sem *s, unsigned max, struct sem_change *out)
{
	struct slot_list strays = {0};
	uint16_t *answer = NULL;
	enum al_status st = find_holders(s, max, &strays, NULL);
	size_t i;

	if (st == AL_OK)
		st = delete_holders(s, &strays, REFUSED_ACCESS, &answer);
	for (i = 0; st == AL_OK && i < strays.len; i++) {
		if (answer[i] == 0)
			out->swept_holders++;
		else if (answer[i] == AMQP_ACCESS_REFUSED)
			out->holders_kept++;
	}
	free(answer);
	free(strays.slot);
	return st;
}

/* Takes the admin mutex, an exclusive queue: a crashed administrator's
 * goes with its connection. A shared queue of that name (declared by hand
 * or by a foreign client) would keep every administrator waiting for
 * ever, as the exclusive declare is refused for it (405) just as for a
 * real mutex; but a passive declare, refused for another connection's
 * exclusive queue, sees it. With `repair` such a leftover is deleted and
 * the mutex taken; without, lock_admin returns at once with *locked
 * false. *stray says whether there was one. */
static enum al_status lock_admin(struct sem *s, bool repair, bool *locked, bool *stray)
{
	struct deadline given_up = deadline_in(s->opts.admin_wait);
	struct backoff pauses = backoff_start(RETRY_FIRST, RETRY_LONGEST);
	const char *mutex = s->name.base;
	double pause;
	unsigned quick = 0;
	enum al_status st;
	uint16_t answer;

	*locked = *stray = false;
	for (;;) {
		if ((st = ask_one(s, DECLARE_EXCLUSIVE, mutex, REFUSED_LOCKED, &answer)) != AL_OK)
			return st;
		if (answer == 0) {
			trace("holding admin mutex %s", mutex);
			*locked = true;
			return AL_OK;
		}
		st = ask_one(s, DECLARE_PASSIVE, mutex, REFUSED_LOCKED | REFUSED_NOT_FOUND,
			     &answer);
		if (st != AL_OK)
			return st;
		if (answer == 0) {
			*stray = true;
			if (!repair) {
				trace("admin mutex %s is a leftover shared queue; not taken",
				      mutex);
				return AL_OK;
			}
			/* Refused (405) only if another administrator deleted it
			 * first and holds the mutex now. */
			st = ask_one(s, DELETE_QUEUE, mutex, REFUSED_LOCKED, &answer);
			if (st != AL_OK)
				return st;
			if (answer == 0)
				trace("deleted the leftover admin mutex %s (a shared queue; a real "
				      "one is exclusive)",
				      mutex);
		}
		/* Deleted, or gone meanwhile: try again at once (even past the
		 * deadline), but not for ever should it keep coming back. */
		if (answer != AMQP_RESOURCE_LOCKED && quick++ < 10)
			continue;
		if (deadline_passed(given_up))
			return fail(AL_BUSY,
				    "another administrator is changing %s (waited %g s for %s)",
				    s->label, s->opts.admin_wait, mutex);
		/* The last pause ends at the deadline, for one more try. */
		pause = backoff_next(&pauses, given_up);
		trace("admin mutex %s is busy; retrying in %.0f ms", mutex, pause * 1000);
		sleep_seconds(pause);
	}
}

const char *sem_slot_type_name(enum slot_type t)
{
	return t == SLOT_QUORUM ? "quorum" : "classic";
}

/* The type of existing slot k, found by declaring it again as a quorum
 * queue: the broker accepts that for a quorum queue and refuses it (406,
 * inequivalent arguments) for a classic one. Only under the admin mutex,
 * where slot k cannot go away meanwhile. */
static enum al_status slot_type_of(struct sem *s, unsigned k, enum slot_type *type)
{
	char queue[QUEUE_NAME_MAX + 1];
	struct queue_request r;
	void *method;
	enum al_status st;
	uint16_t refused;

	sem_name_slot(&s->name, k, SLOT_QUEUE, queue);
	method = queue_request(s, &r, DECLARE_QUORUM, queue);
	st = conn_call(s->conn, r.id, method, r.ok, REFUSED_MISMATCH, &refused,
		       "checking the type of", queue);
	*type = refused ? SLOT_CLASSIC : SLOT_QUORUM;
	return st;
}

/* The slots' type as the quorum marker tells it, for a semaphore none of
 * whose slot queues is left to tell it. */
static enum al_status marked_type(struct sem *s, enum slot_type *type)
{
	bool quorum;
	enum al_status st =
		probe_slots(s->conn, &s->name, QUORUM_MARKER_QUEUE, 1, 1, &quorum, NULL);

	*type = quorum ? SLOT_QUORUM : SLOT_CLASSIC;
	return st;
}

/* New slots take the type of the slots there are (the lowest and highest
 * slot queues must agree; slot queues that are gone have none to tell: the
 * quorum marker does then); a --slot-type that says otherwise is refused,
 * as is a semaphore whose slots were mixed by hand. */
static enum al_status keep_slot_type(struct sem *s, const struct census *cs)
{
	enum slot_type first, last;
	enum al_status st;

	if ((st = cs->lowest ? slot_type_of(s, cs->lowest, &first) : marked_type(s, &first)) !=
	    AL_OK)
		return st;
	last = first;
	if (cs->highest > cs->lowest && (st = slot_type_of(s, cs->highest, &last)) != AL_OK)
		return st;
	if (first != last)
		return fail(AL_BROKER,
			    "the slots of %s are of mixed types (slot %u %s, slot %u %s); "
			    "recreate it",
			    s->label, cs->lowest, sem_slot_type_name(first), cs->highest,
			    sem_slot_type_name(last));
	trace("%s has %s slots", s->name.base, sem_slot_type_name(first));
	if (s->opts.slot_type_given && s->opts.slot_type != first)
		return fail(AL_USAGE, "%s has %s slots: %s ones would mix types", s->label,
			    sem_slot_type_name(first), sem_slot_type_name(s->opts.slot_type));
	s->opts.slot_type = first;
	return AL_OK;
}

/* Makes again the slot queues missing at or below `upto`, ascending. */
static enum al_status fill_holes(struct sem *s, const struct census *cs, unsigned upto,
				 unsigned *filled)
{
	enum al_status st = AL_OK;
	size_t i;

	*filled = 0;
	for (i = 0; st == AL_OK && i < cs->missing.len && cs->missing.slot[i] <= upto; i++) {
		trace("making slot queue %u again (it was gone)", cs->missing.slot[i]);
		if ((st = declare_slots(s, cs->missing.slot[i], 1)) == AL_OK)
			++*filled;
	}
	return st;
}

static enum al_status target_max(enum sem_admin_op op, unsigned n, unsigned max, unsigned *target)
{
	unsigned long t = n;

	if (op == SEM_ADD)
		t = (unsigned long)max + n;
	else if (op == SEM_REMOVE)
		t = n >= max ? 0 : max - n;
	else if (op == SEM_DESTROY)
		t = 0;
	if (t > SLOTS_MAX)
		return fail(AL_USAGE, "that would make %lu slots; at most %u are allowed", t,
			    SLOTS_MAX);
	*target = (unsigned)t;
	return AL_OK;
}

/* Makes or deletes the semaphore's quorum marker, a quorum queue itself
 * (so that it survives the loss of a node, as the slots do). */
static enum al_status set_marker(struct sem *s, bool quorum)
{
	char queue[QUEUE_NAME_MAX + 1];

	sem_name_slot(&s->name, 1, QUORUM_MARKER_QUEUE, queue);
	return ask_ok(s, quorum ? DECLARE_QUORUM : DELETE_QUEUE, queue);
}

/* The record goes up after the slot queues and down before them: it
 * never says more than the slots amqplock has made (record.h). Holes below
 * what stays are filled first; a semaphore without a record gets one. */
static enum al_status change_locked(struct sem *s, enum sem_admin_op op, unsigned n,
				    struct sem_change *out)
{
	struct census cs;
	enum al_status st;
	unsigned max, keep, target = 0;

	if ((st = count_slots(s, &cs)) != AL_OK)
		goto out;
	max = cs.max;
	if ((st = sweep_strays(s, max, out)) != AL_OK || (st = sweep_holders(s, max, out)) != AL_OK)
		goto out;
	/* A record without a single slot queue left (every slot expired
	 * while idle, or an amqplock older than the record destroyed it):
	 * create makes the semaphore anew, as it would have without one. */
	if (op == SEM_CREATE && max > 0 && cs.lowest == 0) {
		trace("the record of %s says %u slots, but none is left; making it anew", s->label,
		      max);
		if ((st = record_cut(s->conn, &s->name, cs.recorded, 1)) != AL_OK)
			goto out;
		max = cs.recorded = 0;
		cs.missing.len = 0;
	}
	out->previous = out->max = max;
	if (op == SEM_CREATE && max > 0) {
		st = fail(AL_EXISTS, "semaphore %s already exists with %u slots", s->label, max);
		goto out;
	}
	if (op != SEM_CREATE && max == 0) {
		st = fail(AL_NOT_FOUND, "semaphore %s does not exist", s->label);
		goto out;
	}
	if ((st = target_max(op, n, max, &target)) != AL_OK)
		goto out;
	if (max > 0 && (target > max || s->opts.slot_type_given || cs.missing.len > 0) &&
	    (st = keep_slot_type(s, &cs)) != AL_OK)
		goto out;
	keep = target < max ? target : max;
	if ((st = fill_holes(s, &cs, keep, &out->filled)) != AL_OK ||
	    (st = record_write(s->conn, &s->name, cs.recorded + 1, keep)) != AL_OK)
		goto out;
	if (target > max) {
		if ((st = declare_slots(s, max + 1, target - max)) == AL_OK)
			st = record_write(s->conn, &s->name, max + 1, target);
	} else if (target < max) {
		if ((st = record_cut(s->conn, &s->name, cs.recorded > keep ? cs.recorded : keep,
				     target + 1)) == AL_OK)
			st = delete_slots_down(s, max, max - target);
	}
	if (st == AL_OK)
		out->max = target;
	/* Quorum slots get quorum leases: the marker tells holders so. Its
	 * type is known here when slots were made (or --slot-type said). */
	if (st == AL_OK && target == 0)
		st = set_marker(s, false);
	else if (st == AL_OK && (target > max || s->opts.slot_type_given))
		st = set_marker(s, s->opts.slot_type == SLOT_QUORUM);
out:
	free(cs.missing.slot);
	return st;
}

enum al_status sem_admin(struct sem *s, enum sem_admin_op op, unsigned n, struct sem_change *out)
{
	enum al_status st;
	bool locked, stray;

	memset(out, 0, sizeof(*out));
	st = lock_admin(s, true, &locked, &stray);
	if (st != AL_OK)
		return st;
	st = change_locked(s, op, n, out);
	/* After a failure the connection may be gone; closing it releases the
	 * mutex just the same. */
	if (st == AL_OK)
		st = ask_ok(s, DELETE_QUEUE, s->name.base);
	/* Each slot added wakes one waiter, the next in line: nobody else
	 * says that a slot is free (waiters would find it by polling). */
	if (st == AL_OK && out->max > out->previous)
		st = sem_wake_added(s, out->max - out->previous);
	return st;
}

/* Sends one request about a queue of slot k with `send` (conn_send: the
 * main channel; conn_lease_send: the lease's) without waiting for the
 * reply. */
static enum al_status send_request(struct sem *s, enum queue_op op, unsigned k, enum slot_kind kind,
				   enum al_status (*send)(struct conn *, amqp_method_number_t,
							  void *))
{
	char queue[QUEUE_NAME_MAX + 1];
	struct queue_request r;
	void *method;

	sem_name_slot(&s->name, k, kind, queue);
	method = queue_request(s, &r, op, queue);
	return send(s->conn, r.id, method);
}

static enum al_status slot_send(struct sem *s, enum queue_op op, unsigned k, enum slot_kind kind)
{
	return send_request(s, op, k, kind, conn_send);
}

/* The lowest free slots from `first` to max: holder queues and leases
 * probed in windows that double, up to the first window with a free slot. */
static enum al_status free_slots(struct sem *s, unsigned first, unsigned max,
				 struct slot_list *free_list)
{
	bool held[LARGEST_WINDOW];
	unsigned window = 2 * FIRST_WINDOW, n, i;
	enum al_status st = AL_OK;

	for (; st == AL_OK && first <= max && free_list->len == 0; first += n) {
		n = max - first + 1 < window ? max - first + 1 : window;
		st = probe_taken(s, first, n, held, NULL, NULL);
		for (i = 0; st == AL_OK && i < n; i++)
			if (!held[i])
				st = append(free_list, first + i);
		if (window < LARGEST_WINDOW)
			window *= 2;
	}
	return st;
}

/* What a probe of the line's queue says of it. A refusal means a node
 * that is down: RabbitMQ 4.0 answers no declare of such a queue, so the
 * line counts as gone until a probe reaches it again. */
static void note_line(struct sem *s, const struct probe *line)
{
	if (line->refused && s->line != LINE_DOWN)
		trace("the line of %s is unreachable (its node is down?); polling instead",
		      s->label);
	s->line = line->refused ? LINE_DOWN : line->exists ? LINE_UP : LINE_ABSENT;
}

/* Max and the free slots, lowest first, from the first look at a
 * semaphore: slots and holders 1..FIRST_WINDOW, the quorum marker and the
 * line (s->line) in one round trip, the leases of the slots without a
 * holder in another. */
static enum al_status find_free(struct sem *s, unsigned *max, struct slot_list *free_list,
				bool leases)
{
	struct probe p[2 * FIRST_WINDOW + 2];
	bool taken[FIRST_WINDOW];
	enum al_status st;
	unsigned i, n;

	free_list->len = 0;
	for (i = 0; i < FIRST_WINDOW; i++) {
		p[i] = (struct probe){.kind = SLOT_QUEUE, .slot = i + 1};
		p[FIRST_WINDOW + i] = (struct probe){.kind = HOLDER_QUEUE, .slot = i + 1};
	}
	p[2 * FIRST_WINDOW] = (struct probe){.kind = QUORUM_MARKER_QUEUE, .slot = 1};
	p[2 * FIRST_WINDOW + 1] = (struct probe){.kind = WAITERS_QUEUE, .slot = 1};
	if ((st = probe_queues(s->conn, &s->name, p, 2 * FIRST_WINDOW + 2)) != AL_OK ||
	    (st = max_after_window(s, p, max)) != AL_OK)
		return st;
	s->slots_quorum = p[2 * FIRST_WINDOW].exists;
	s->lease.quorum = lease_type_quorum(s);
	note_line(s, &p[2 * FIRST_WINDOW + 1]);
	/* A slot queue gone behind amqplock's back (an expires policy took
	 * an idle slot) leaves a hole: within the first window a client
	 * looks past it to the slots above, and takes none of the holes. */
	for (i = FIRST_WINDOW; *max < FIRST_WINDOW && i > *max; i--)
		if (p[i - 1].exists)
			*max = i;
	n = *max < FIRST_WINDOW ? *max : FIRST_WINDOW;
	for (i = 0; i < n; i++)
		taken[i] = p[FIRST_WINDOW + i].exists || !p[i].exists;
	if (leases && (st = leases_of_free(s, 1, n, taken, NULL, NULL)) != AL_OK)
		return st;
	for (i = 0; st == AL_OK && i < n; i++)
		if (!taken[i])
			st = append(free_list, i + 1);
	if (st == AL_OK && free_list->len == 0)
		st = free_slots(s, FIRST_WINDOW + 1, *max, free_list);
	return st;
}

/* One request in a pipelined sequence about the queues of one slot. */
struct step {
	enum queue_op op;
	enum slot_kind kind;
};

/* While a cluster node is down, RabbitMQ waits 5 s for the quorum
 * queue's member there before it answers a delete (docs/internals.md,
 * section 7): the deletion of a quorum lease may take that much longer
 * than any other reply. Given up on at the reply timeout, it left the
 * lease to block the slot for its whole length. */
#define QUORUM_DELETE_WAIT 5.0

/* How long the broker may take to answer op on slot's queue of kind. */
static double reply_wait(const struct sem *s, enum queue_op op, enum slot_kind kind)
{
	double wait = s->conn->rpc_timeout;

	return op == DELETE_QUEUE && kind == LEASE_QUEUE && s->lease.quorum
		       ? wait + QUORUM_DELETE_WAIT
		       : wait;
}

/* Sends every step about slot's queues at once, then reads the answers in
 * order: one round trip. *done counts the steps answered ok; the first
 * refusal ends the sequence (the broker drops the rest), *refused is its
 * reply code (0: none) and a fresh channel replaces the closed one. A
 * failure of the connection is returned as such. */
static enum al_status send_steps(struct sem *s, unsigned slot, const struct step *step, size_t n)
{
	enum al_status st = AL_OK;
	size_t i;

	for (i = 0; i < n && st == AL_OK; i++)
		st = slot_send(s, step[i].op, slot, step[i].kind);
	return st;
}

/* The answers to what send_steps sent; see run_steps. */
static enum al_status await_steps(struct sem *s, const struct step *step, size_t n, size_t *done,
				  uint16_t *refused)
{
	enum al_status st = AL_OK;
	amqp_method_t m;
	size_t i;

	*done = 0;
	*refused = 0;
	for (i = 0; i < n && st == AL_OK; i++) {
		s->conn->reply_code = 0;
		st = conn_expect_within(s->conn, reply_to(step[i].op),
					reply_wait(s, step[i].op, step[i].kind), &m);
		if (st == AL_OK)
			++*done;
	}
	if (st == AL_OK || s->conn->dead || s->conn->reply_code == 0)
		return st;
	*refused = s->conn->reply_code;
	return conn_reset_channel(s->conn);
}

static enum al_status run_steps(struct sem *s, unsigned slot, const struct step *step, size_t n,
				size_t *done, uint16_t *refused)
{
	enum al_status st = send_steps(s, slot, step, n);

	*done = 0;
	*refused = 0;
	return st == AL_OK ? await_steps(s, step, n, done, refused) : st;
}

/* The refusal of step `at` of a run_steps sequence, described. */
static enum al_status step_refused(struct sem *s, unsigned slot, const struct step *step,
				   enum al_status st)
{
	char queue[QUEUE_NAME_MAX + 1];

	sem_name_slot(&s->name, slot, step->kind, queue);
	return conn_refused(s->conn, st, verb(step->op), queue);
}

/* Sends op on slot k's lease, on the lease channel. */
static enum al_status lease_send(struct sem *s, enum queue_op op, unsigned k)
{
	return send_request(s, op, k, LEASE_QUEUE, conn_lease_send);
}

/* The answer to lease_send(op); a refusal's code in *refused (0: none). */
static enum al_status lease_answer(struct sem *s, enum queue_op op, uint16_t *refused)
{
	enum al_status st;

	s->conn->reply_code = 0;
	st = conn_lease_expect(s->conn, reply_to(op), reply_wait(s, op, LEASE_QUEUE));
	*refused = st != AL_OK && !s->conn->dead ? s->conn->reply_code : 0;
	return st;
}

/* How often a claim that got the lease asks again for a holder queue that
 * another has (pauses of about 2, 4, 6 and 8 ms). */
#define HOLDER_RETRIES 4

/* Deletes the lease of slot k that a failed claim made. */
static enum al_status drop_lease(struct sem *s, unsigned k)
{
	char queue[QUEUE_NAME_MAX + 1];
	enum al_status st = lease_send(s, DELETE_QUEUE, k);
	uint16_t refused;

	if (st == AL_OK)
		st = lease_answer(s, DELETE_QUEUE, &refused);
	if (st == AL_OK)
		return AL_OK;
	sem_name_slot(&s->name, k, LEASE_QUEUE, queue);
	return conn_refused(s->conn, st, "deleting", queue);
}

/* A claim answered within s->claim_window of its sending counts; one
 * answered later is void, and so is one whose connection the broker has
 * closed by the time its answers are read (a close that came with them):
 * the connection is dropped, which takes the holder queue with it, and
 * the caller connects again (s->claim_late), ends the lease the claim may
 * have made (s->late_slot), and tries again. */
static enum al_status claim_fresh(struct sem *s, unsigned k)
{
	double took = boot_seconds() - s->lease.renewed;

	if (s->claim_window > 0 && took > s->claim_window) {
		conn_abort(s->conn);
		s->claim_late = true;
		s->late_slot = k;
		return fail(
			AL_CONNECTION,
			"the claim of slot %u was answered %.1f s after it was sent, too late to "
			"count (was amqplock stopped?); trying again",
			k, took);
	}
	/* Anything the broker sent after the answers, already here. */
	if (conn_buffered(s->conn) || conn_readable(s->conn)) {
		conn_drain(s->conn);
		if (s->conn->dead) {
			s->claim_late = true;
			s->late_slot = k;
			return fail_context(AL_CONNECTION,
					    "the claim of slot %u came with its end: ", k);
		}
	}
	return AL_OK;
}

/* Claims slot k: declares its holder queue exclusive and, in the same
 * round trip, checks that the slot still exists (a remove may have taken
 * it since it was probed) and, with a lease, declares the lease: that
 * declare is refused (406) if any lease of the slot exists, since its
 * token differs. The check is a passive declare, which works under a
 * broker alarm; a probe would not. The lease goes on a channel of its
 * own, so that the broker makes it while it makes the holder queue; the
 * slot is ours only if both are, and whichever of the two we got from a
 * claim that failed is deleted again. AL_BUSY if another client was
 * first, the slot is gone or leased. */
static enum al_status claim(struct sem *s, unsigned k)
{
	static const struct step steps[] = {
		{DECLARE_EXCLUSIVE, HOLDER_QUEUE},
		{DECLARE_PASSIVE, SLOT_QUEUE},
	};
	char queue[QUEUE_NAME_MAX + 1], text[sizeof(s->conn->reply_text)];
	char lease_text[sizeof(text)];
	enum al_status st, lease_st = AL_OK;
	unsigned tries;
	uint16_t refused, lease_refused = 0;
	bool leased;
	size_t done;

	s->lease.claim_closed = false;
	done = 0, refused = 0;
	/* A lease claimed now lasts from before the claim was sent. */
	s->lease.renewed = boot_seconds();
	st = s->lease.on ? lease_send(s, DECLARE_LEASE, k) : AL_OK;
	if (st == AL_OK)
		st = send_steps(s, k, steps, 2);
	/* The broker's work takes a few milliseconds: the caller's meanwhile. */
	if (st == AL_OK && s->claim_sent)
		s->claim_sent(s->claim_arg, k);
	if (st == AL_OK)
		st = await_steps(s, steps, 2, &done, &refused);
	memcpy(text, s->conn->reply_text, sizeof(text));
	if (st == AL_OK && s->lease.on)
		lease_st = lease_answer(s, DECLARE_LEASE, &lease_refused);
	/* Answered on the main channel, not on the lease's: a lease
	 * without a leader (section 7 of docs/internals.md). */
	if (st == AL_OK && refused == 0 && lease_st == AL_CONNECTION && s->conn->no_reply) {
		note_stuck(s, k);
		s->lease.stalled = true;
	}
	if ((st == AL_CONNECTION || lease_st == AL_CONNECTION) &&
	    s->conn->close_code == AMQP_INTERNAL_ERROR && s->lease.quorum) {
		s->lease.claim_closed = true;
		return fail_context(
			AL_CONNECTION,
			"slot %u's last lease is still being deleted (a node down?): ", k);
	}
	if (st != AL_OK)
		return st;
	if (lease_st != AL_OK && s->conn->dead)
		return lease_st;
	memcpy(lease_text, s->conn->reply_text, sizeof(lease_text));
	/* The lease ours, the holder queue another's: most often another
	 * claimer's, refused the lease (ours) and deleting its holder queue
	 * now. The lease decides between claimers, so we ask again rather
	 * than both letting go. */
	for (tries = 0; s->lease.on && lease_st == AL_OK && done == 0 &&
			refused == AMQP_RESOURCE_LOCKED && tries < HOLDER_RETRIES;
	     tries++) {
		sleep_seconds(jitter(0.002 * (tries + 1)));
		if ((st = run_steps(s, k, steps, 2, &done, &refused)) != AL_OK)
			return st;
		memcpy(text, s->conn->reply_text, sizeof(text));
	}
	if (refused == 0 && lease_st == AL_OK) {
		if (s->lease.on) {
			trace("slot %u leased for %u ms (a %s queue)", k, s->lease.ms,
			      s->lease.quorum ? "quorum" : "classic");
			return claim_fresh(s, k);
		}
		/* Without a lease of our own, someone else's is looked for
		 * once the holder queue is ours: its holder may have gone
		 * away since the slot was probed. */
		if ((st = probe_slots(s->conn, &s->name, LEASE_QUEUE, k, 1, &leased, NULL)) !=
		    AL_OK)
			return st;
		if (!leased)
			return claim_fresh(s, k);
	}
	/* Lost, or half won: a lease made for a claim that failed goes at
	 * once (it would block the slot for its length). */
	if (s->lease.on && lease_st == AL_OK && (st = drop_lease(s, k)) != AL_OK)
		return st;
	if (done == 0 && refused == AMQP_RESOURCE_LOCKED)
		return AL_BUSY;
	/* Removed (404 on the slot queue) or leased by another: a race
	 * lost; anything else is a failure, the holder queue's told first,
	 * as when the lease was asked for only after it. */
	if (refused != 0 && !(done == 1 && refused == AMQP_NOT_FOUND)) {
		memcpy(s->conn->reply_text, text, sizeof(text));
		return step_refused(s, k, &steps[done], status_for_reply(refused));
	}
	if (lease_st != AL_OK && lease_refused != AMQP_PRECONDITION_FAILED) {
		memcpy(s->conn->reply_text, lease_text, sizeof(lease_text));
		sem_name_slot(&s->name, k, LEASE_QUEUE, queue);
		return conn_refused(s->conn, lease_st, "declaring", queue);
	}
	trace("slot %u was %s meanwhile", k,
	      refused != 0 ? "removed" : "leased by a holder that is away");
	/* Our holder queue goes, so that the slot does not read as held. */
	sem_name_slot(&s->name, k, HOLDER_QUEUE, queue);
	if (ask_ok(s, DELETE_QUEUE, queue) != AL_OK)
		return AL_CONNECTION;
	return AL_BUSY;
}

int64_t sem_lease_token(void)
{
	uint64_t t = 0;

	/* Unpredictable and unique enough: 63 random bits. rand() would
	 * repeat for two clients started in the same second. */
	if (getrandom(&t, sizeof(t), 0) != (ssize_t)sizeof(t))
		t = (uint64_t)now_seconds() * 1000003u ^ (uint64_t)rand() << 20;
	t &= INT64_MAX;
	return t ? (int64_t)t : 1;
}

/* The steps that renew our lease, into step (room for 2); their number.
 * A declare with our token is refused (406) if the lease is another's,
 * and restarts a classic queue's expiry. It does not restart a quorum
 * queue's: RabbitMQ (3.10 to 4.3) counts only reads and consumers as a
 * quorum queue's use, so a quorum lease renewed by declares alone ran out
 * 5-10 s after it was made (--lease 5) under a holder renewing it every
 * second; a quorum lease is read too (basic.get: the lease holds no
 * message, so the read takes nothing). */
static size_t renewal_steps(const struct sem *s, struct step *step)
{
	step[0] = (struct step){DECLARE_LEASE, LEASE_QUEUE};
	step[1] = (struct step){READ_QUEUE, LEASE_QUEUE};
	return s->lease.quorum ? 2 : 1;
}

enum al_status sem_reattach(struct sem *s, unsigned slot, bool *lease_ours)
{
	/* Passive first: a re-attach never makes a lease, it only renews
	 * one that still exists, and only if the token is ours; then the
	 * slot queue and the holder queue. */
	struct step steps[5] = {{DECLARE_PASSIVE, LEASE_QUEUE}};
	char queue[QUEUE_NAME_MAX + 1];
	enum al_status st;
	uint16_t refused;
	size_t done, renewed = 1 + renewal_steps(s, &steps[1]), n = renewed + 2;

	steps[renewed] = (struct step){DECLARE_PASSIVE, SLOT_QUEUE};
	steps[renewed + 1] = (struct step){DECLARE_EXCLUSIVE, HOLDER_QUEUE};
	*lease_ours = false;
	st = run_steps(s, slot, steps, n, &done, &refused);
	*lease_ours = done >= 2;
	if (st != AL_OK)
		return st;
	sem_name_slot(&s->name, slot, steps[done < n ? done : n - 1].kind, queue);
	s->lease.need_holder = false;
	if (done >= 2)
		s->lease.reattached = now_seconds();
	if (refused == 0)
		return AL_OK;
	if (done == 0 && refused == AMQP_NOT_FOUND)
		return fail(AL_LOST, "its lease %s ran out before amqplock could reconnect", queue);
	if (done == 1 && refused == AMQP_PRECONDITION_FAILED)
		return fail(AL_LOST, "its lease %s belongs to another holder now", queue);
	if (done == renewed && refused == AMQP_NOT_FOUND)
		return fail(AL_LOST, "its slot queue %s was deleted", queue);
	if (done == renewed + 1 && refused == AMQP_RESOURCE_LOCKED) {
		/* The broker has not yet dropped our old connection, whose
		 * holder queue it is; the lease keeps the slot meanwhile. */
		trace("holder queue %s is still the old connection's; taking it later", queue);
		s->lease.need_holder = true;
		return AL_OK;
	}
	return step_refused(s, slot, &steps[done], status_for_reply(refused));
}

enum al_status sem_lease_keep(struct sem *s, unsigned slot)
{
	char queue[QUEUE_NAME_MAX + 1];
	struct step steps[2];
	enum al_status st;
	uint16_t refused;
	size_t done;

	st = run_steps(s, slot, steps, renewal_steps(s, steps), &done, &refused);
	if (st != AL_OK || refused == 0)
		return st;
	sem_name_slot(&s->name, slot, LEASE_QUEUE, queue);
	if (done == 0 && refused == AMQP_PRECONDITION_FAILED)
		return fail(AL_LOST, "its lease %s belongs to another holder now", queue);
	return step_refused(s, slot, &steps[done], status_for_reply(refused));
}

/* Deletes our lease of slot if it is still ours; *ended says whether it
 * was. Gone (404) or another's (406): nothing of ours to end. */
static enum al_status lease_drop(struct sem *s, unsigned slot, bool *ended)
{
	static const struct step steps[] = {
		{DECLARE_PASSIVE, LEASE_QUEUE},
		{DECLARE_LEASE, LEASE_QUEUE},
		{DELETE_QUEUE, LEASE_QUEUE},
	};
	enum al_status st;
	uint16_t refused;
	size_t done;

	*ended = false;
	st = run_steps(s, slot, steps, 3, &done, &refused);
	if (st == AL_OK && refused == 0)
		*ended = true;
	if (st != AL_OK || refused == 0 || (done == 0 && refused == AMQP_NOT_FOUND) ||
	    (done == 1 && refused == AMQP_PRECONDITION_FAILED))
		return st;
	return step_refused(s, slot, &steps[done], status_for_reply(refused));
}

enum al_status sem_lease_end(struct sem *s, unsigned slot)
{
	bool ended;
	enum al_status st = lease_drop(s, slot, &ended);

	/* Ended: the slot is free now, and nobody else says so. */
	return st == AL_OK && ended ? sem_wake_line(s) : st;
}

/* How long sem_lease_end_apart waits for the broker to drop the holder
 * queue of a hung-up connection before it wakes the line anyway (the
 * first in line then finds the slot at its next look). It asks every
 * millisecond: the broker takes one or two. */
#define HOLDER_GONE_WAIT 1.0

enum al_status sem_lease_end_apart(struct sem *s, unsigned slot, struct conn *holding)
{
	struct deadline gone_by;
	enum al_status st;
	bool ended, holder = true;

	if (!s->lease.quorum) {
		conn_hang_up(holding);
		return sem_lease_end(s, slot);
	}
	/* A quorum lease goes first, while the holder queue still keeps the
	 * slot held, for the reason sem_released gives. */
	st = lease_drop(s, slot, &ended);
	conn_hang_up(holding);
	if (st != AL_OK || !ended)
		return st;
	gone_by = deadline_in(HOLDER_GONE_WAIT);
	while ((st = probe_slots(s->conn, &s->name, HOLDER_QUEUE, slot, 1, &holder, NULL)) ==
		       AL_OK &&
	       holder && !deadline_passed(gone_by))
		sleep_seconds(0.001);
	return st == AL_OK ? sem_wake_line(s) : st;
}

void sem_all_held(char *buf, size_t size, unsigned max, const char *label)
{
	if (max == 1)
		snprintf(buf, size, "the one slot of %s is held", label);
	else
		snprintf(buf, size, "all %u slots of %s are held", max, label);
}

/* The waiters queue of the semaphore: its line (see sem_watch_releases). */
static void waiters_queue(const struct sem *s, char *buf)
{
	sem_name_slot(&s->name, 1, WAITERS_QUEUE, buf);
}

/* The line's waiters queue as a passive declare sees it: how many clients
 * are in the line (its consumers) and how many wake-ups wait undelivered
 * (none of either if there is no such queue, or we may not look). */
static enum al_status line_counts(struct sem *s, uint32_t *waiters, uint32_t *waiting)
{
	char queue[QUEUE_NAME_MAX + 1];
	struct queue_request r;
	enum al_status st;
	amqp_method_t m;

	*waiters = *waiting = 0;
	waiters_queue(s, queue);
	s->conn->reply_code = 0;
	st = conn_send(s->conn, AMQP_QUEUE_DECLARE_METHOD,
		       queue_request(s, &r, DECLARE_PASSIVE, queue));
	if (st == AL_OK && (st = conn_expect(s->conn, r.ok, &m)) == AL_OK) {
		*waiters = ((amqp_queue_declare_ok_t *)m.decoded)->consumer_count;
		*waiting = ((amqp_queue_declare_ok_t *)m.decoded)->message_count;
	}
	return conn_answer(s->conn, st, REFUSED_NOT_FOUND | REFUSED_ACCESS, NULL, "checking",
			   queue);
}

static enum al_status count_waiters(struct sem *s, uint32_t *waiters)
{
	uint32_t waiting;

	return line_counts(s, waiters, &waiting);
}

/* Whether a newcomer must queue behind others: free slots are theirs
 * first. The probe of find_free said whether the line exists and takes
 * messages; whether anyone is in it takes one more round trip, only
 * then. */
static enum al_status line_ahead(struct sem *s, bool *ahead)
{
	uint32_t waiters = 0;
	enum al_status st = s->line == LINE_UP ? count_waiters(s, &waiters) : AL_OK;

	*ahead = s->behind_line = waiters > 0;
	if (*ahead)
		trace("%u clients wait for a slot of %s; queueing behind them", (unsigned)waiters,
		      s->label);
	return st;
}

/* No slot queue: the semaphore does not exist, unless its record says it
 * does, its slot queues gone behind amqplock's back. */
static enum al_status no_slots(struct sem *s)
{
	enum al_status st;
	unsigned recorded;

	if ((st = record_read(s->conn, &s->name, 0, &recorded)) != AL_OK)
		return st;
	if (recorded == 0)
		return fail(AL_NOT_FOUND, "semaphore %s does not exist", s->label);
	return fail(AL_DAMAGED,
		    "the slot queues of %s are gone, its %u slot%s all missing (an expires "
		    "policy? deleted by hand?): amqplock check --repair %s makes them again",
		    s->label, recorded, recorded == 1 ? "" : "s", s->label);
}

enum al_status sem_acquire(struct sem *s, enum sem_take how, unsigned *slot, unsigned *max)
{
	struct slot_list candidates = {0};
	char held[NAME_MAX_BYTES + 64];
	enum al_status st;
	unsigned races = 0, k;
	bool ahead;

	*slot = 0;
	s->lease.stalled = false;
	s->claim_late = false;
	s->behind_line = false;
	for (;;) {
		/* Woken, the slot is known to be free but for a race: the
		 * claim's lease declare sees a lease if one is there. */
		if ((st = find_free(s, max, &candidates, how != SEM_TAKE_WOKEN || races > 0)) !=
		    AL_OK)
			break;
		if (*max == 0) {
			st = no_slots(s);
			break;
		}
		if (candidates.len == 0) {
			sem_all_held(held, sizeof(held), *max, s->label);
			st = fail(AL_BUSY, "%s", held);
			break;
		}
		if (how == SEM_LOOK) {
			*slot = candidates.slot[0];
			break;
		}
		if (how == SEM_TAKE_UNLESS_LINE && races == 0 &&
		    ((st = line_ahead(s, &ahead)) != AL_OK || ahead)) {
			if (st == AL_OK)
				st = fail(AL_BUSY, "others are already waiting for a slot of %s",
					  s->label);
			break;
		}
		/* The lowest free slot keeps a lone client on slot 1, as a flock
		 * user expects; after a lost race a random one keeps the
		 * losers from colliding again. */
		k = candidates.slot[races ? (size_t)rand() % candidates.len : 0];
		trace("claiming slot %u of %u", k, *max);
		if ((st = claim(s, k)) == AL_OK) {
			*slot = k;
			break;
		}
		if (st != AL_BUSY)
			break;
		if (++races > SEM_RACE_LIMIT) {
			st = fail(AL_BUSY, "lost %u races for a slot of %s", races - 1, s->label);
			break;
		}
		trace("slot %u was taken first; retrying", k);
		/* The winner's claim came a round trip (a millisecond or two)
		 * before ours: a pause of about that per race lost so far
		 * spreads the losers apart, and the 20 allowed cost 0.4 s
		 * at most on average. */
		sleep_seconds(jitter(0.002 * races));
	}
	free(candidates.slot);
	return st;
}

/* The line: one queue per semaphore that its waiters consume from, with
 * a single active consumer, so that the broker keeps them in the order
 * they joined and gives every wake-up (a release's, a poller's) to the
 * oldest alone. docs/design.md, "Waiters in line", says why it cannot
 * stall. */
enum al_status sem_watch_releases(struct sem *s)
{
	char queue[QUEUE_NAME_MAX + 1];

	if (s->line == LINE_DOWN)
		return AL_BROKER;
	waiters_queue(s, queue);
	return conn_subscribe(s->conn, queue);
}

enum al_status sem_wake_line(struct sem *s)
{
	char queue[QUEUE_NAME_MAX + 1];

	waiters_queue(s, queue);
	return conn_notify(s->conn, queue);
}

void sem_leave_line(struct sem *s)
{
	char queue[QUEUE_NAME_MAX + 1];

	waiters_queue(s, queue);
	conn_unsubscribe(s->conn, queue);
}

/* How long a wake-up may wait undelivered before the first in line counts
 * as stuck: a live one takes each within milliseconds (it holds one at a
 * time, only while it claims). */
#define LINE_TAKE_WAIT 0.5

enum al_status sem_unstick_line(struct sem *s, bool *restarted)
{
	char queue[QUEUE_NAME_MAX + 1];
	uint32_t waiters, waiting;
	enum al_status st;
	uint16_t refused;

	struct probe line = {.kind = WAITERS_QUEUE, .slot = 1};

	*restarted = false;
	if ((st = sem_wake_line(s)) != AL_OK)
		return st;
	sleep_seconds(LINE_TAKE_WAIT);
	/* The probe also takes the wake-up's confirm, which a passive
	 * declare's answer must not meet first. */
	if ((st = probe_queues(s->conn, &s->name, &line, 1)) != AL_OK)
		return st;
	note_line(s, &line);
	if (s->line != LINE_UP || (st = line_counts(s, &waiters, &waiting)) != AL_OK ||
	    waiting == 0)
		return st;
	waiters_queue(s, queue);
	trace("the first in line of %s has not taken a free slot (%u wake-ups wait for it: "
	      "stopped, its host frozen, heartbeats off?); starting the line again",
	      s->label, (unsigned)waiting);
	/* Every waiter's consumer is cancelled with it: they take what they
	 * find, and the stuck one too once it runs again. */
	st = ask_one(s, DELETE_QUEUE, queue, REFUSED_ACCESS, &refused);
	*restarted = st == AL_OK && refused == 0;
	return st;
}

enum al_status sem_wake_added(struct sem *s, unsigned added)
{
	struct probe line = {.kind = WAITERS_QUEUE, .slot = 1};
	uint32_t waiters = 0;
	enum al_status st;
	unsigned i;

	/* Only a line that takes messages is asked how long it is. */
	if ((st = probe_queues(s->conn, &s->name, &line, 1)) != AL_OK)
		return st;
	note_line(s, &line);
	if (s->line == LINE_UP)
		st = count_waiters(s, &waiters);
	if (st == AL_OK && waiters > 0)
		trace("%u clients wait for a slot of %s; waking %u", (unsigned)waiters, s->label,
		      added < waiters ? added : (unsigned)waiters);
	for (i = 0; st == AL_OK && i < added && i < waiters; i++)
		st = sem_wake_line(s);
	return st;
}

/* The holder queue is deleted before the wake-up is published, so that
 * the waiter the broker wakes finds the slot free: a channel's methods
 * are handled in order. Nothing asks first whether anyone waits: a
 * wake-up to a line that does not exist is dropped, one to an empty line
 * expires within a second, and a question to a line whose node is down
 * may never be answered. Only the lease's deletion is waited for (it is
 * not exclusive: a close would leave it blocking the slot for its whole
 * length); the connection's close waits for the rest. */
enum al_status sem_released(struct sem *s, unsigned slot)
{
	char lease[QUEUE_NAME_MAX + 1];
	enum al_status st = AL_OK, lease_st = AL_OK;
	uint16_t refused;

	sem_name_slot(&s->name, slot, LEASE_QUEUE, lease);
	/* The lease and the holder queue are deleted side by side (two
	 * channels); the wake-up follows the holder queue's deletion on its
	 * channel, and is sent once the lease's is answered: the slot is
	 * free when the first in line hears of it. A quorum lease goes
	 * first, alone: on RabbitMQ 3.10 a probe that reaches a quorum queue
	 * while it is being deleted crashes the prober's connection (6 in
	 * 147 probes of a queue made and deleted in a loop; passive declares
	 * never did), and waiters probe a slot's lease once they see no
	 * holder queue. A waiter that lost its connection so lost its place
	 * in line (3 of 30 holds 50 ms apart on one slot). */
	if (s->lease.on)
		st = lease_send(s, DELETE_QUEUE, slot);
	if (st == AL_OK && s->lease.on && s->lease.quorum)
		lease_st = lease_answer(s, DELETE_QUEUE, &refused);
	if (st == AL_OK)
		st = slot_send(s, DELETE_QUEUE, slot, HOLDER_QUEUE);
	if (st == AL_OK && s->lease.on && !s->lease.quorum)
		lease_st = lease_answer(s, DELETE_QUEUE, &refused);
	if (st == AL_OK && !s->conn->dead) {
		trace("released slot %u of %s; waking the first in line, if anyone waits", slot,
		      s->label);
		st = sem_wake_line(s);
	}
	if (st == AL_OK && lease_st != AL_OK)
		return conn_refused(s->conn, lease_st, "deleting", lease);
	return st;
}

/* A verification asks, in one pipelined round trip: the lease declared
 * again (renewed, and refused if it is not ours), the slot queue (the
 * slot may have been removed) and our holder queue (deleted behind our
 * back: rabbitmqctl delete_queue, an `expires` policy) declared passively.
 * The broker answers in order and drops what follows a refusal, so the
 * number of answers already in says which one failed. (A passive declare
 * also counts as use of the queue: an `expires` policy never fires on a
 * holder queue checked every second.) After a reconnect the holder queue
 * may still be the old connection's: it is declared, not checked, until
 * it is ours again. */
/* The request that verification question i (s->verify_kind) makes: our
 * lease declared with our token (406 if it is another's); the slot queue
 * checked; the holder queue checked, or declared again while need_holder.
 * A kind asked twice in a row is read the second time: a quorum queue's
 * expiry restarts only then (see renewal_steps), so that neither the
 * lease nor the slot queue of a quorum semaphore runs out under its
 * holder, nor goes to an expires policy while held. */
static enum queue_op verify_op(const struct sem *s, unsigned i)
{
	if (i > 0 && s->verify_kind[i - 1] == s->verify_kind[i])
		return READ_QUEUE;
	if (s->verify_kind[i] == LEASE_QUEUE)
		return DECLARE_LEASE;
	if (s->verify_kind[i] == HOLDER_QUEUE && s->lease.need_holder)
		return DECLARE_EXCLUSIVE;
	return DECLARE_PASSIVE;
}

enum al_status sem_verify_send(struct sem *s, unsigned slot)
{
	enum al_status st = AL_OK;
	unsigned i, n = 0;

	if (s->lease.on)
		s->verify_kind[n++] = LEASE_QUEUE;
	if (s->lease.on && s->lease.quorum)
		s->verify_kind[n++] = LEASE_QUEUE;
	s->verify_kind[n++] = SLOT_QUEUE;
	if (s->slots_quorum)
		s->verify_kind[n++] = SLOT_QUEUE;
	s->verify_kind[n++] = HOLDER_QUEUE;
	s->verify_asked = n;
	s->verify_answers = 0;
	for (i = 0; i < n && st == AL_OK; i++)
		st = slot_send(s, verify_op(s, i), slot, s->verify_kind[i]);
	return st;
}

/* How long after a re-attach a deleted holder queue is not a loss. When a
 * cluster node dies, RabbitMQ 4.0 removes its connections' exclusive
 * queues a few seconds later, by name: a holder that has re-attached
 * through a survivor meanwhile can see its new holder queue go (measured:
 * 1 s after the kill). Its lease, renewed in the same round trip, still
 * keeps the slot, so it declares the holder queue again. */
#define HOLDER_SETTLE 15.0

/* The refusal that ended a verification, as a loss; AL_OK if it is none
 * (our old holder queue not yet dropped, or dropped late by the broker
 * after a re-attach: the lease keeps the slot). */
static enum al_status verify_refused(struct sem *s, unsigned slot, enum al_status st)
{
	enum slot_kind kind = s->verify_kind[s->verify_answers];
	char queue[QUEUE_NAME_MAX + 1];

	sem_name_slot(&s->name, slot, kind, queue);
	if (kind == HOLDER_QUEUE && st == AL_NOT_FOUND && s->lease.on && !s->lease.need_holder &&
	    s->lease.reattached && now_seconds() - s->lease.reattached < HOLDER_SETTLE) {
		/* The lease was renewed just before, in this round trip. */
		trace("holder queue %s gone soon after a re-attach; declaring it again", queue);
		s->lease.need_holder = true;
	}
	if (kind == HOLDER_QUEUE && s->lease.need_holder && (st == AL_BUSY || st == AL_NOT_FOUND)) {
		s->verify_answers = s->verify_asked;
		return conn_reset_channel(s->conn) == AL_OK
			       ? AL_OK
			       : fail(AL_LOST, "the connection failed");
	}
	if (kind == SLOT_QUEUE && st == AL_NOT_FOUND)
		return fail(AL_LOST, "its slot queue %s was deleted", queue);
	if (kind == HOLDER_QUEUE && (st == AL_NOT_FOUND || st == AL_BUSY))
		return fail(AL_LOST, "its holder queue %s was %s", queue,
			    st == AL_BUSY ? "taken by another connection" : "deleted");
	if (kind == LEASE_QUEUE && s->conn->reply_code == AMQP_PRECONDITION_FAILED)
		return fail(AL_LOST, "its lease %s was taken by another holder", queue);
	conn_refused(s->conn, st, verb(verify_op(s, s->verify_answers)), queue);
	return AL_LOST;
}

/* Whether a method is the answer to a verification's question. */
static bool is_answer(amqp_method_number_t id)
{
	return id == AMQP_QUEUE_DECLARE_OK_METHOD || id == AMQP_BASIC_GET_EMPTY_METHOD ||
	       id == AMQP_BASIC_GET_OK_METHOD;
}

enum al_status sem_held_poll(struct sem *s, unsigned slot, bool *verified)
{
	enum al_status st;
	amqp_method_t m;
	bool got;

	*verified = false;
	do {
		st = conn_poll(s->conn, &m, &got);
		if (st != AL_OK && !s->conn->dead && s->verify_answers < s->verify_asked) {
			if ((st = verify_refused(s, slot, st)) != AL_OK)
				return st;
			*verified = got = true;
			continue;
		}
		if (st != AL_OK)
			return fail(AL_LOST, "the connection failed");
		if (!got || !is_answer(m.id) || ++s->verify_answers != s->verify_asked)
			continue;
		*verified = true;
		if (s->lease.need_holder) {
			trace("holder queue of slot %u is ours again", slot);
			s->lease.need_holder = false;
		}
	} while (got);
	return AL_OK;
}

static int ascending(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return (x > y) - (x < y);
}

/* The holders above max: holder queues, and leases whose holders are
 * away; each slot once, ascending. */
static enum al_status scan_orphans(struct sem *s, unsigned max, struct slot_list *orphans)
{
	enum al_status st = scan_above(s, HOLDER_QUEUE, max, orphans);
	size_t i, kept = 0;

	if (st == AL_OK)
		st = scan_above(s, LEASE_QUEUE, max, orphans);
	if (st != AL_OK || orphans->len == 0)
		return st;
	qsort(orphans->slot, orphans->len, sizeof(*orphans->slot), ascending);
	for (i = 0; i < orphans->len; i++)
		if (kept == 0 || orphans->slot[kept - 1] != orphans->slot[i])
			orphans->slot[kept++] = orphans->slot[i];
	orphans->len = kept;
	return AL_OK;
}

enum al_status sem_orphans(struct sem *s, unsigned *max, struct slot_list *orphans)
{
	enum al_status st = sem_max(s, max);

	orphans->len = 0;
	return st == AL_OK ? scan_orphans(s, *max, orphans) : st;
}

enum al_status sem_status(struct sem *s, struct sem_status *out)
{
	bool *holder, *lease, *refused, *slot;
	struct probe *p = NULL;
	enum al_status st;
	unsigned i;

	memset(out, 0, sizeof(*out));
	if ((st = sem_max(s, &out->max)) != AL_OK)
		return st;
	if (out->max == 0)
		return fail(AL_NOT_FOUND, "semaphore %s does not exist", s->label);
	holder = calloc(out->max, sizeof(*holder));
	lease = calloc(out->max, sizeof(*lease));
	refused = calloc(out->max, sizeof(*refused));
	slot = calloc(out->max, sizeof(*slot));
	p = calloc(2 * (size_t)out->max, sizeof(*p));
	if (!holder || !lease || !refused || !slot || !p)
		st = fail(AL_INTERNAL, "out of memory");
	/* Slot queues (the holes) and holder queues in one pipeline. */
	for (i = 0; st == AL_OK && i < out->max; i++) {
		p[i] = (struct probe){.kind = SLOT_QUEUE, .slot = i + 1};
		p[out->max + i] = (struct probe){.kind = HOLDER_QUEUE, .slot = i + 1};
	}
	if (st == AL_OK)
		st = probe_queues(s->conn, &s->name, p, 2 * (size_t)out->max);
	for (i = 0; st == AL_OK && i < out->max; i++) {
		slot[i] = p[i].exists;
		holder[i] = p[out->max + i].exists;
		refused[i] = p[out->max + i].refused;
	}
	if (st == AL_OK)
		st = leases_of_free(s, 1, out->max, holder, lease, refused);
	for (i = 0; st == AL_OK && i < out->max; i++) {
		if (!slot[i])
			st = append(&out->missing, i + 1);
		if (st == AL_OK && (holder[i] || lease[i] || slot[i]))
			st = append(holder[i] || lease[i] ? &out->held : &out->free, i + 1);
		if (st == AL_OK && lease[i] && !holder[i])
			st = append(&out->away, i + 1);
		if (st == AL_OK && refused[i])
			st = append(&out->unreachable, i + 1);
	}
	free(holder);
	free(lease);
	free(refused);
	free(slot);
	free(p);
	if (st == AL_OK)
		st = scan_orphans(s, out->max, &out->orphans);
	return st;
}

void sem_status_free(struct sem_status *st)
{
	free(st->held.slot);
	free(st->away.slot);
	free(st->unreachable.slot);
	free(st->free.slot);
	free(st->orphans.slot);
	free(st->missing.slot);
	memset(st, 0, sizeof(*st));
}

/* --- check: an fsck for one semaphore ------------------------------------ */

static enum al_status add_problem(struct sem_check *c, enum sem_problem_kind kind, unsigned slot,
				  bool repaired)
{
	struct sem_problem *room = make_room(c->problem, c->len, &c->cap, sizeof(*room));

	if (!room)
		return AL_INTERNAL;
	c->problem = room;
	c->problem[c->len++] =
		(struct sem_problem){.kind = kind, .slot = slot, .repaired = repaired};
	c->repaired += repaired;
	return AL_OK;
}

/* Slot queues above max: what sweep_strays deletes, reported one by one;
 * with `repair` deleted as it does, highest first. One exclusive to
 * another connection cannot be deleted (405) and stays; one a holder
 * holds is left alone, and its holder shows among the orphans. */
static enum al_status check_stray_slots(struct sem *s, bool repair, struct sem_check *c)
{
	struct slot_list strays = {0};
	uint16_t *answer = NULL;
	unsigned *down = NULL, kept;
	enum al_status st = find_strays(s, c->max, &strays, &kept);
	size_t i, n = strays.len;

	if (st == AL_OK && repair && n > 0) {
		answer = calloc(n, sizeof(*answer));
		down = calloc(n, sizeof(*down));
		if (!answer || !down)
			st = fail(AL_INTERNAL, "out of memory");
		for (i = 0; st == AL_OK && i < n; i++) {
			down[i] = strays.slot[n - 1 - i];
			trace("deleting stray slot queue %u above max %u", down[i], c->max);
		}
		if (st == AL_OK)
			st = ask_each(s, DELETE_QUEUE, SLOT_QUEUE, down, n, REFUSED_LOCKED, answer);
	}
	for (i = 0; st == AL_OK && i < n; i++)
		st = add_problem(c, SEM_STRAY_SLOT, strays.slot[i],
				 answer && answer[n - 1 - i] == 0);
	free(answer);
	free(down);
	free(strays.slot);
	return st;
}

/* Slot queues gone below max, and a missing record: reported, and with
 * `repair` (under the admin mutex) made again, as the slots' type. */
static enum al_status check_holes(struct sem *s, bool repair, const struct census *cs,
				  struct sem_check *c)
{
	enum al_status st = AL_OK;
	unsigned filled = 0;
	size_t i;

	if (repair && cs->missing.len > 0) {
		if (c->typed)
			s->opts.slot_type = c->slot_type;
		else
			st = marked_type(s, &s->opts.slot_type);
		if (st == AL_OK)
			st = fill_holes(s, cs, cs->max, &filled);
	}
	for (i = 0; st == AL_OK && i < cs->missing.len; i++)
		st = add_problem(c, SEM_MISSING_SLOT, cs->missing.slot[i], i < filled);
	if (st != AL_OK || cs->recorded >= c->max)
		return st;
	if (repair)
		st = record_write(s->conn, &s->name, cs->recorded + 1, c->max);
	return st == AL_OK ? add_problem(c, SEM_UNRECORDED, 0, repair) : st;
}

/* Slot queues 1..max exclusive to some connection: a passive declare of
 * ours gets 405 for them. Those and the slots that vanished meanwhile are
 * marked in skip[], for check_types. */
static enum al_status check_exclusive_slots(struct sem *s, const unsigned *slots,
					    struct sem_check *c, bool *skip)
{
	uint16_t *answer = calloc(c->max, sizeof(*answer));
	enum al_status st;
	unsigned i;

	if (!answer)
		return fail(AL_INTERNAL, "out of memory");
	st = ask_each(s, DECLARE_PASSIVE, SLOT_QUEUE, slots, c->max,
		      REFUSED_ACCESS | REFUSED_NOT_FOUND | REFUSED_LOCKED, answer);
	for (i = 0; st == AL_OK && i < c->max; i++) {
		skip[i] = answer[i] == AMQP_RESOURCE_LOCKED || answer[i] == AMQP_NOT_FOUND;
		if (answer[i] == AMQP_RESOURCE_LOCKED)
			st = add_problem(c, SEM_EXCLUSIVE_SLOT, i + 1, false);
		else if (answer[i] == AMQP_NOT_FOUND)
			trace("slot queue %u was deleted during the check", i + 1);
		else if (answer[i] == AMQP_ACCESS_REFUSED)
			trace("slot queue %u may not be looked at", i + 1);
	}
	free(answer);
	return st;
}

/* The type of every slot queue but those in skip[]. A redeclare that the
 * broker refuses costs a round trip or two (and a line in its log), so
 * the slots are redeclared, pipelined, as the type of the lowest one
 * (which slot_type_of finds), and only those refused are asked again: as
 * quorum queues, which a classic queue refuses (406) whatever its
 * arguments. (A broker that refused x-queue-type classic said outright
 * for a classic slot queue would get every slot asked that way.) Most
 * slots give the semaphore its type, the lowest slot's on a tie; the
 * others are reported. Redeclaring a slot queue that was deleted
 * meanwhile would make it again: only under the admin mutex. */
static enum al_status check_types(struct sem *s, const unsigned *slots, const bool *skip,
				  struct sem_check *c)
{
	const unsigned accept = REFUSED_MISMATCH | REFUSED_LOCKED | REFUSED_NOT_FOUND;
	unsigned *asked = calloc(c->max, sizeof(*asked)), *again = calloc(c->max, sizeof(*again));
	size_t *again_at = calloc(c->max, sizeof(*again_at)), n = 0, m = 0, count[2] = {0, 0}, j;
	uint16_t *answer = calloc(c->max, sizeof(*answer));
	/* Per slot asked: its enum slot_type, or -1 if it tells none (taken
	 * or deleted meanwhile: 405, 404). */
	int *type = calloc(c->max, sizeof(*type)), lowest = -1;
	enum slot_type first = SLOT_CLASSIC;
	enum al_status st = AL_OK;
	bool fallback;

	if (!asked || !again || !again_at || !answer || !type)
		st = fail(AL_INTERNAL, "out of memory");
	for (j = 0; st == AL_OK && j < c->max; j++)
		if (!skip[j])
			asked[n++] = slots[j];
	if (st == AL_OK && n > 0 && (st = slot_type_of(s, asked[0], &first)) == AL_OK)
		st = ask_each(s, first == SLOT_QUORUM ? DECLARE_QUORUM : DECLARE_CLASSIC,
			      SLOT_QUEUE, asked, n, accept, answer);
	fallback = n > 0 && first == SLOT_CLASSIC && answer[0] != 0;
	for (j = 0; st == AL_OK && j < n; j++) {
		if (answer[j] != 0 && answer[j] != AMQP_PRECONDITION_FAILED)
			type[j] = -1;
		else if (answer[j] == 0 && !fallback)
			type[j] = (int)first;
		else if (first == SLOT_QUORUM)
			type[j] = SLOT_CLASSIC; /* refused as a quorum queue */
		else
			again_at[m++] = j;
	}
	for (j = 0; st == AL_OK && j < m; j++)
		again[j] = asked[again_at[j]];
	if (st == AL_OK && m > 0)
		st = ask_each(s, DECLARE_QUORUM, SLOT_QUEUE, again, m, accept, answer);
	for (j = 0; st == AL_OK && j < m; j++) {
		type[again_at[j]] = -1;
		if (answer[j] == 0)
			type[again_at[j]] = SLOT_QUORUM;
		else if (answer[j] == AMQP_PRECONDITION_FAILED)
			type[again_at[j]] = SLOT_CLASSIC;
	}
	for (j = 0; st == AL_OK && j < n; j++) {
		if (type[j] < 0)
			continue;
		count[type[j]]++;
		if (lowest < 0)
			lowest = type[j];
	}
	if (st == AL_OK && lowest >= 0) {
		c->typed = true;
		c->slot_type = (enum slot_type)lowest;
		if (count[SLOT_QUORUM] != count[SLOT_CLASSIC])
			c->slot_type = count[SLOT_QUORUM] > count[SLOT_CLASSIC] ? SLOT_QUORUM
										: SLOT_CLASSIC;
		trace("%s has %s slots", s->name.base, sem_slot_type_name(c->slot_type));
	}
	for (j = 0; st == AL_OK && j < n; j++) {
		if (type[j] < 0 || type[j] == (int)c->slot_type)
			continue;
		if ((st = add_problem(c, SEM_MIXED_TYPE, asked[j], false)) == AL_OK)
			c->problem[c->len - 1].type = (enum slot_type)type[j];
	}
	free(asked);
	free(again);
	free(again_at);
	free(answer);
	free(type);
	return st;
}

/* The problems of slots 1..max: exclusive slot queues, and mixed types
 * when the admin mutex is held. */
static enum al_status check_slots(struct sem *s, bool locked, struct sem_check *c)
{
	unsigned *slots = calloc(c->max, sizeof(*slots)), i;
	bool *skip = calloc(c->max, sizeof(*skip));
	enum al_status st = AL_OK;

	if (!slots || !skip)
		st = fail(AL_INTERNAL, "out of memory");
	for (i = 0; st == AL_OK && i < c->max; i++)
		slots[i] = i + 1;
	if (st == AL_OK)
		st = check_exclusive_slots(s, slots, c, skip);
	if (st == AL_OK && locked)
		st = check_types(s, slots, skip, c);
	else if (st == AL_OK)
		trace("slot types not checked: the admin mutex is not held");
	free(slots);
	free(skip);
	return st;
}

/* Stray holder queues as find_holders sorts them, deleted with `repair`;
 * one that a holder has taken since is a holder's now, no problem. */
static enum al_status check_holders(struct sem *s, bool repair, struct sem_check *c)
{
	struct slot_list strays = {0};
	uint16_t *answer = NULL;
	enum al_status st = find_holders(s, c->max, &strays, &c->orphans);
	size_t i;

	if (st == AL_OK && repair)
		st = delete_holders(s, &strays, 0, &answer);
	for (i = 0; st == AL_OK && i < strays.len; i++) {
		if (answer && answer[i] == AMQP_RESOURCE_LOCKED)
			trace("holder queue %u is held now; kept", strays.slot[i]);
		else
			st = add_problem(c, SEM_STRAY_HOLDER, strays.slot[i], answer != NULL);
	}
	free(answer);
	free(strays.slot);
	return st;
}

/* The quorum marker against the slots' type (known only under the admin
 * mutex): missing for quorum slots (an older amqplock made them), or there
 * for classic slots or none. With `repair` made or deleted. */
static enum al_status check_marker(struct sem *s, bool repair, struct sem_check *c)
{
	bool exists, quorum = c->typed && c->slot_type == SLOT_QUORUM;
	enum al_status st;

	if (!c->typed && c->max > 0)
		return AL_OK;
	if ((st = probe_slots(s->conn, &s->name, QUORUM_MARKER_QUEUE, 1, 1, &exists, NULL)) !=
		    AL_OK ||
	    exists == quorum)
		return st;
	if (repair && (st = set_marker(s, quorum)) != AL_OK)
		return st;
	return add_problem(c, quorum ? SEM_MISSING_MARKER : SEM_STRAY_MARKER, 0, repair);
}

enum al_status sem_check(struct sem *s, bool repair, struct sem_check *out)
{
	struct census cs = {0};
	enum al_status st;
	bool locked, stray;

	memset(out, 0, sizeof(*out));
	if ((st = lock_admin(s, repair, &locked, &stray)) != AL_OK)
		return st;
	if (stray)
		st = add_problem(out, SEM_STRAY_MUTEX, 0, locked);
	if (st == AL_OK)
		st = count_slots(s, &cs);
	out->max = cs.max;
	if (st == AL_OK)
		st = check_stray_slots(s, repair, out);
	if (st == AL_OK && out->max > 0)
		st = check_slots(s, locked, out);
	if (st == AL_OK)
		st = check_holes(s, repair && locked, &cs, out);
	if (st == AL_OK)
		st = check_holders(s, repair, out);
	if (st == AL_OK && locked)
		st = check_marker(s, repair, out);
	/* As in sem_admin: after a failure, closing the connection releases
	 * the mutex. */
	if (st == AL_OK && locked)
		st = ask_ok(s, DELETE_QUEUE, s->name.base);
	free(cs.missing.slot);
	return st;
}

void sem_check_free(struct sem_check *c)
{
	free(c->problem);
	free(c->orphans.slot);
	memset(c, 0, sizeof(*c));
}

void sem_problem_queue(const struct sem *s, const struct sem_problem *p, char *buf)
{
	if (p->kind == SEM_STRAY_MUTEX)
		snprintf(buf, QUEUE_NAME_MAX + 1, "%s", s->name.base);
	else if (p->kind == SEM_MISSING_MARKER || p->kind == SEM_STRAY_MARKER)
		sem_name_slot(&s->name, 1, QUORUM_MARKER_QUEUE, buf);
	else if (p->kind == SEM_UNRECORDED)
		sem_name_slot(&s->name, 1, SLOT_QUEUE, buf);
	else
		sem_name_slot(&s->name, p->slot,
			      p->kind == SEM_STRAY_HOLDER ? HOLDER_QUEUE : SLOT_QUEUE, buf);
}
