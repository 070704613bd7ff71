/* The queue requests the algorithm makes (sem_parts.h, enum queue_op), built
 * and sent one at a time, pipelined, or as the steps of one round trip, and
 * their answers read; the lease queue's arguments and type; struct sem
 * set up, and the random tokens and ids its holders draw. */
#include "sem_parts.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"

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

bool req_lease_type_quorum(const struct sem *s)
{
	return s->slots_quorum || s->conn->version < LOOKS_NEED_PERMISSION;
}

/* A lease queue's arguments: x-expires makes the broker delete it D after
 * its last declare; x-max-length, which nothing ever reaches (nobody
 * publishes to a lease), is the token: the broker refuses a redeclare
 * with any other value (406), so a declare is an atomic "create, or
 * renew if it is mine". A quorum lease of classic slots, quorum only so
 * that looks do not keep it, has one member, on the node it was declared
 * through, as a classic lease would: with a member on every node, each
 * of its deletions waited 5 s for a node that was down (the cluster
 * suite: a release took 5.05 s). */
static amqp_table_t lease_arguments(const struct sem *s, amqp_table_entry_t *e)
{
	size_t n = 2;

	e[0] = (amqp_table_entry_t){
		.key = amqp_cstring_bytes("x-expires"),
		.value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = (int64_t)s->hold->lease.ms}};
	e[1] = (amqp_table_entry_t){
		.key = amqp_cstring_bytes("x-max-length"),
		.value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = s->hold->lease.token}};
	if (s->lease_quorum)
		e[n++] = quorum_type;
	if (s->lease_quorum && !s->slots_quorum)
		e[n++] = (amqp_table_entry_t){
			.key = amqp_cstring_bytes("x-quorum-initial-group-size"),
			.value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = 1}};
	return (amqp_table_t){.num_entries = (int)n, .entries = e};
}

/* The reply that says op went through. */
static amqp_method_number_t reply_to(enum queue_op op)
{
	return op == DELETE_QUEUE ? AMQP_QUEUE_DELETE_OK_METHOD
	       : op == READ_QUEUE ? AMQP_BASIC_GET_EMPTY_METHOD
				  : AMQP_QUEUE_DECLARE_OK_METHOD;
}

static amqp_table_entry_t waiters_arguments[] = {
	{.key = {sizeof("x-expires") - 1, "x-expires"},
	 .value = {.kind = AMQP_FIELD_KIND_I32, .value.i32 = 60000}},
	{.key = {sizeof("x-single-active-consumer") - 1, "x-single-active-consumer"},
	 .value = {.kind = AMQP_FIELD_KIND_BOOLEAN, .value.boolean = 1}},
};

/* The stream of fencing tokens keeps its offsets for ever, and about the
 * last megabyte of entries (a few thousand): nobody reads old ones. */
static amqp_table_entry_t tokens_arguments[] = {
	{.key = {sizeof("x-queue-type") - 1, "x-queue-type"},
	 .value = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = {sizeof("stream") - 1, "stream"}}},
	{.key = {sizeof("x-max-length-bytes") - 1, "x-max-length-bytes"},
	 .value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = 1000000}},
	{.key = {sizeof("x-stream-max-segment-size-bytes") - 1, "x-stream-max-segment-size-bytes"},
	 .value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = 100000}},
};

amqp_table_t req_waiters_arguments(void)
{
	return (amqp_table_t){.num_entries = 2, .entries = waiters_arguments};
}

void *req_build(const struct sem *s, struct queue_request *r, enum queue_op op, const char *queue)
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
			     op == DECLARE_LEASE || op == DECLARE_WAITERS || op == DECLARE_TOKENS;
	if (op == DECLARE_TOKENS)
		r->declare.arguments =
			(amqp_table_t){.num_entries = 3, .entries = tokens_arguments};
	if (op == DECLARE_WAITERS)
		r->declare.arguments = req_waiters_arguments();
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
const char *req_verb(enum queue_op op)
{
	return op == DELETE_QUEUE      ? "deleting"
	       : op == DECLARE_PASSIVE ? "checking"
	       : op == READ_QUEUE      ? "reading"
				       : "declaring";
}

/* One request about one queue, and its reply; a refusal in `tolerated`
 * is an answer (*refused, see conn_answer), any other a failure. */
enum al_status req_ask_one(struct sem *s, enum queue_op op, const char *queue, unsigned tolerated,
			   uint16_t *refused)
{
	struct queue_request r;
	void *method = req_build(s, &r, op, queue);

	return conn_call(s->conn, r.id, method, r.ok, tolerated, refused, req_verb(op), queue);
}

void req_recover(struct sem *s)
{
	bool had = status_message()[0] != '\0';

	if (!s->conn->dead && s->conn->channel == 0 && conn_reset_channel(s->conn) != AL_OK) {
		trace("could not open a channel again: %s", status_message());
		status_clear_unless(had);
	}
}

/* One request that must go through. */
enum al_status req_ask_ok(struct sem *s, enum queue_op op, const char *queue)
{
	return req_ask_one(s, op, queue, 0, NULL);
}

/* Requests sent before their replies are read, in req_ask_each: few enough
 * that the replies never fill the socket buffers while we still send. */
#define ASK_BATCH 256u

/* The same request about the kind queue of each slot[i], answer[i] as
 * req_ask_one gives it, pipelined. The broker drops the requests that follow
 * a refusal on a channel, so after one the rest are sent again on the
 * fresh channel, in batches that start again from one and double while
 * all their answers are ok: answers that are ok cost a round trip per
 * batch, each refusal (a holder's queue, say) about two, and requests
 * are not sent over and over where refusals are many. */
enum al_status req_ask_each(struct sem *s, enum queue_op op, enum slot_kind kind,
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
			method = req_build(s, &r, op, queue);
			if ((st = conn_send(s->conn, r.id, method)) != AL_OK)
				return st;
		}
		for (j = i; j < end;) {
			conn_refusal_clear(s->conn);
			st = conn_expect(s->conn, r.ok, &m);
			sem_name_slot(&s->name, slot[j], kind, queue);
			st = conn_answer(s->conn, st, accept, &answer[j++], req_verb(op), queue);
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
enum al_status req_pipeline(struct sem *s, enum queue_op op, unsigned from, unsigned count,
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
		method = req_build(s, &r, op, queue);
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
		return conn_refused(s->conn, st, req_verb(op), queue);
	}
	return AL_OK;
}

/* array (len elements used of *cap, each `size` bytes) with room for one
 * more, doubled when full; NULL, with the failure recorded, if memory ran
 * out (array is then unchanged). */
void *req_make_room(void *array, size_t len, size_t *cap, size_t size)
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

bool req_has(const struct slot_list *l, unsigned slot)
{
	size_t i;

	for (i = 0; i < l->len; i++)
		if (l->slot[i] == slot)
			return true;
	return false;
}

enum al_status req_append(struct slot_list *l, unsigned slot)
{
	unsigned *room = req_make_room(l->slot, l->len, &l->cap, sizeof(*room));

	if (!room)
		return AL_INTERNAL;
	l->slot = room;
	l->slot[l->len++] = slot;
	return AL_OK;
}

/* Sends one request about a queue of slot k with `send` (conn_send: the
 * main channel; conn_parallel_send: the lease's) without waiting for the
 * reply. */
static enum al_status send_request(struct sem *s, enum queue_op op, unsigned k, enum slot_kind kind,
				   enum al_status (*send)(struct conn *, amqp_method_number_t,
							  void *))
{
	char queue[QUEUE_NAME_MAX + 1];
	struct queue_request r;
	void *method;

	sem_name_slot(&s->name, k, kind, queue);
	method = req_build(s, &r, op, queue);
	return send(s->conn, r.id, method);
}

enum al_status req_slot_send(struct sem *s, enum queue_op op, unsigned k, enum slot_kind kind)
{
	return send_request(s, op, k, kind, conn_send);
}

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

	return op == DELETE_QUEUE && kind == LEASE_QUEUE && s->lease_quorum
		       ? wait + QUORUM_DELETE_WAIT
		       : wait;
}

/* Sends every step about slot's queues at once, then reads the answers in
 * order: one round trip. *done counts the steps answered ok; the first
 * refusal ends the sequence (the broker drops the rest), *refused is its
 * reply code (0: none) and a fresh channel replaces the closed one. A
 * failure of the connection is returned as such. */
enum al_status req_send_steps(struct sem *s, unsigned slot, const struct step *step, size_t n)
{
	enum al_status st = AL_OK;
	size_t i;

	for (i = 0; i < n && st == AL_OK; i++)
		st = req_slot_send(s, step[i].op, slot, step[i].kind);
	return st;
}

/* The answers to what req_send_steps sent; see req_run_steps. */
enum al_status req_await_steps(struct sem *s, const struct step *step, size_t n, size_t *done,
			       uint16_t *refused)
{
	enum al_status st = AL_OK;
	amqp_method_t m;
	size_t i;

	*done = 0;
	*refused = 0;
	for (i = 0; i < n && st == AL_OK; i++) {
		conn_refusal_clear(s->conn);
		st = conn_expect_within(s->conn, reply_to(step[i].op),
					reply_wait(s, step[i].op, step[i].kind), &m);
		if (st == AL_OK)
			++*done;
	}
	if (st == AL_OK || s->conn->dead || conn_refusal_code(s->conn) == 0)
		return st;
	*refused = conn_refusal_code(s->conn);
	return conn_reset_channel(s->conn);
}

enum al_status req_run_steps(struct sem *s, unsigned slot, const struct step *step, size_t n,
			     size_t *done, uint16_t *refused)
{
	enum al_status st = req_send_steps(s, slot, step, n);

	*done = 0;
	*refused = 0;
	return st == AL_OK ? req_await_steps(s, step, n, done, refused) : st;
}

/* The refusal of step `at` of a req_run_steps sequence, described. */
enum al_status req_step_refused(struct sem *s, unsigned slot, const struct step *step,
				enum al_status st)
{
	char queue[QUEUE_NAME_MAX + 1];

	sem_name_slot(&s->name, slot, step->kind, queue);
	return conn_refused(s->conn, st, req_verb(step->op), queue);
}

/* Sends op on slot k's lease, on the connection's parallel channel (beside the
 * main channel's requests). */
enum al_status req_lease_send(struct sem *s, enum queue_op op, unsigned k)
{
	return send_request(s, op, k, LEASE_QUEUE, conn_parallel_send);
}

/* The answer to req_lease_send(op); a refusal's code in *refused (0: none). */
enum al_status req_lease_answer(struct sem *s, enum queue_op op, uint16_t *refused)
{
	enum al_status st;

	conn_refusal_clear(s->conn);
	st = conn_parallel_expect(s->conn, reply_to(op), reply_wait(s, op, LEASE_QUEUE));
	*refused = st != AL_OK && !s->conn->dead ? conn_refusal_code(s->conn) : 0;
	return st;
}

enum al_status req_ask_counts_meanwhile(struct sem *s, const char *queue, uint32_t *consumers,
					uint32_t *messages, enum al_status (*meanwhile)(void *),
					void *arg)
{
	struct queue_request r;
	enum al_status st;
	amqp_method_t m;

	*consumers = *messages = 0;
	conn_refusal_clear(s->conn);
	st = conn_send(s->conn, AMQP_QUEUE_DECLARE_METHOD,
		       req_build(s, &r, DECLARE_PASSIVE, queue));
	if (st == AL_OK && meanwhile)
		st = meanwhile(arg);
	if (st == AL_OK && (st = conn_expect(s->conn, r.ok, &m)) == AL_OK) {
		*consumers = ((amqp_queue_declare_ok_t *)m.decoded)->consumer_count;
		*messages = ((amqp_queue_declare_ok_t *)m.decoded)->message_count;
	}
	return conn_answer(s->conn, st, REFUSED_NOT_FOUND | REFUSED_ACCESS, NULL, "checking",
			   queue);
}

enum al_status req_ask_counts(struct sem *s, const char *queue, uint32_t *consumers,
			      uint32_t *messages)
{
	return req_ask_counts_meanwhile(s, queue, consumers, messages, NULL, NULL);
}

bool req_is_queue_answer(amqp_method_number_t id)
{
	return id == AMQP_QUEUE_DECLARE_OK_METHOD || id == AMQP_BASIC_GET_EMPTY_METHOD ||
	       id == AMQP_BASIC_GET_OK_METHOD;
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

void sem_init(struct sem *s, struct conn *c, const char *prefix, const char *name,
	      const struct sem_opts *opts)
{
	memset(s, 0, sizeof(*s));
	sem_name_init(&s->name, prefix, name);
	s->label = name;
	s->conn = c;
	s->opts = *opts;
}
