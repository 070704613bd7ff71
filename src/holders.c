/* Naming holders: status asks the holder of each held slot who it is
 * (host, pid, since when, acquire or hold), through the slot's holder
 * queue, and the holder answers to status's direct reply-to name. These
 * answers are hints to print: no claim, verification or release ever
 * reads them (docs/design.md, "Naming holders"). */
#include "sem_parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "parse.h"

#define QUESTION_TYPE "amqplock.who"
#define ANSWER_TYPE   "amqplock.holder"
/* A question nobody takes (an older amqplock, a holder away or without
 * read on its holder queue) leaves the holder queue after a second. Not
 * "0": RabbitMQ 4.3 drops such a message even with a consumer ready. */
#define QUESTION_EXPIRATION "1000"
/* How long status waits for the answers, all in all. */
#define ANSWER_WAIT 1.0
/* The answering connection's whole life, from connect to close: the
 * holding loop waits this long at most, once a second at most. */
#define ANSWERING_LIMIT 0.5

/* --- the holder's side ------------------------------------------------- */

/* A question delivered to our holder queue, whatever was being read:
 * kept if it is one, its answer to go to a direct reply-to name (never
 * to a queue: anyone may write the question, and an answer in a line or
 * a slot queue could wake a waiter), at most SEM_ANSWERS_BATCH a second.
 * Everything else (the probes every client publishes here) is dropped. */
static void question_came(void *owner, uint64_t tag, const amqp_basic_properties_t *p)
{
	struct sem_answers *a = owner;
	double now = now_seconds();
	unsigned i;

	(void)tag; /* no acknowledgements: the consumer takes no-ack */
	if (!conn_is_type(p, QUESTION_TYPE) || !(p->_flags & AMQP_BASIC_REPLY_TO_FLAG) ||
	    !conn_is_reply_to(&p->reply_to))
		return;
	if (now - a->window >= 1.0) {
		a->window = now;
		a->taken = 0;
	}
	if (a->taken >= SEM_ANSWERS_BATCH || a->pending >= SEM_ANSWERS_BATCH)
		return;
	a->taken++;
	i = a->pending++;
	memcpy(a->question[i].reply_to, p->reply_to.bytes, p->reply_to.len);
	a->question[i].reply_to[p->reply_to.len] = '\0';
	a->question[i].correlation_id[0] = '\0';
	if ((p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG) &&
	    p->correlation_id.len < sizeof(a->question[i].correlation_id)) {
		memcpy(a->question[i].correlation_id, p->correlation_id.bytes,
		       p->correlation_id.len);
		a->question[i].correlation_id[p->correlation_id.len] = '\0';
	}
}

static void stopped_listening(void *owner, enum conn_consumer_end why)
{
	struct sem_answers *a = owner;

	a->listening = false;
	if (why == CONSUMER_REFUSED) {
		a->refused = true;
		trace("may not read holder queue of slot %u: status will not name this holder",
		      a->me.slot);
	}
}

void sem_answers_listen(struct sem_answers *a, struct sem *s, unsigned slot, struct conn_opts *opts)
{
	struct conn_consumer hooks = {
		.delivered = question_came, .ended = stopped_listening, .owner = a};
	char queue[QUEUE_NAME_MAX + 1];

	if (!a->s) {
		utc_text(a->taken_at ? (time_t)a->taken_at : time(NULL), a->me.since,
			 sizeof(a->me.since));
		a->me.until[0] = '\0';
		if (a->min_until)
			utc_text((time_t)a->min_until, a->me.until, sizeof(a->me.until));
		a->me.slot = slot;
		snprintf(a->me.host, sizeof(a->me.host), "%s", opts->who.host);
		a->me.pid = opts->who.pid;
		snprintf(a->me.command, sizeof(a->me.command), "%s",
			 opts->who.command ? opts->who.command : "");
		snprintf(a->me.label, sizeof(a->me.label), "%s",
			 opts->who.label ? opts->who.label : "");
	}
	a->s = s;
	a->opts = opts;
	a->pending = 0;
	if (a->refused || s->conn->dead || conn_consuming(s->conn))
		return;
	sem_name_slot(&s->name, slot, HOLDER_QUEUE, queue);
	a->listening = conn_listen(s->conn, queue, &hooks) == AL_OK;
	status_clear(); /* a failure here is the next read's to find */
}

/* The answer's headers: what status prints, nothing secret. */
static void send_answers(struct sem_answers *a, const char *pid)
{
	amqp_table_entry_t e[] = {
		{.key = amqp_cstring_bytes("host"),
		 .value = {.kind = AMQP_FIELD_KIND_UTF8,
			   .value.bytes = amqp_cstring_bytes(a->me.host)}},
		{.key = amqp_cstring_bytes("pid"),
		 .value = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = amqp_cstring_bytes(pid)}},
		{.key = amqp_cstring_bytes("since"),
		 .value = {.kind = AMQP_FIELD_KIND_UTF8,
			   .value.bytes = amqp_cstring_bytes(a->me.since)}},
		{.key = amqp_cstring_bytes("command"),
		 .value = {.kind = AMQP_FIELD_KIND_UTF8,
			   .value.bytes = amqp_cstring_bytes(a->me.command)}},
		{.key = amqp_cstring_bytes("until"),
		 .value = {.kind = AMQP_FIELD_KIND_UTF8,
			   .value.bytes = amqp_cstring_bytes(a->me.until)}},
		{.key = amqp_cstring_bytes("label"),
		 .value = {.kind = AMQP_FIELD_KIND_UTF8,
			   .value.bytes = amqp_cstring_bytes(a->me.label)}},
	};
	amqp_table_t headers = {.num_entries = 6, .entries = e};
	struct conn answering;
	unsigned i;

	/* Not on the holder's connection: under a memory or disk alarm the
	 * broker stops reading a connection that publishes, and the
	 * holder's checks would go unanswered. This one may be blocked:
	 * its whole life is bounded, and nothing else depends on it. */
	if (conn_open(&answering, a->opts, deadline_in(ANSWERING_LIMIT)) == AL_OK) {
		for (i = 0; i < a->pending; i++)
			if (conn_reply(&answering, a->question[i].reply_to,
				       a->question[i].correlation_id, ANSWER_TYPE,
				       &headers) != AL_OK)
				break;
		conn_close(&answering);
	} else {
		trace("could not answer who holds slot %u: %s", a->me.slot, status_message());
	}
}

void sem_answers_send(struct sem_answers *a)
{
	char pid[24];

	if (!a->pending)
		return;
	snprintf(pid, sizeof(pid), "%ld", a->me.pid);
	send_answers(a, pid);
	status_clear();
	a->pending = 0;
}

/* --- status's side ----------------------------------------------------- */

struct asking {
	struct sem_status *out;
	const unsigned *asked; /* the slots asked about, ascending */
	size_t n, answered;
	bool ended;
};

/* A header's text, made printable (the answer comes from the broker, and
 * anyone may publish), or "" if absent. */
static void header_text(const amqp_basic_properties_t *p, const char *key, char *dst, size_t size)
{
	const amqp_field_value_t *f = conn_header(p, key);

	dst[0] = '\0';
	if (f && f->kind == AMQP_FIELD_KIND_UTF8)
		parse_printable_copy(dst, size, f->value.bytes.bytes, f->value.bytes.len);
}

static void answer_came(void *owner, uint64_t tag, const amqp_basic_properties_t *p)
{
	struct asking *q = owner;
	struct sem_holder *h;
	char text[24], pid[24];
	unsigned long slot;
	char *end;
	size_t i;

	(void)tag;
	if (!conn_is_type(p, ANSWER_TYPE) || !(p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG) ||
	    !(p->_flags & AMQP_BASIC_HEADERS_FLAG))
		return;
	parse_printable_copy(text, sizeof(text), p->correlation_id.bytes, p->correlation_id.len);
	slot = strtoul(text, &end, 10);
	if (*end || slot == 0)
		return;
	for (i = 0; i < q->n && q->asked[i] != slot; i++)
		;
	if (i == q->n)
		return;
	for (i = 0; i < q->out->holders_len; i++)
		if (q->out->holders[i].slot == slot)
			return; /* answered already */
	h = &q->out->holders[q->out->holders_len];
	memset(h, 0, sizeof(*h));
	h->slot = (unsigned)slot;
	header_text(p, "host", h->host, sizeof(h->host));
	header_text(p, "pid", pid, sizeof(pid));
	h->pid = strtol(pid, NULL, 10);
	header_text(p, "since", h->since, sizeof(h->since));
	header_text(p, "command", h->command, sizeof(h->command));
	header_text(p, "until", h->until, sizeof(h->until));
	header_text(p, "label", h->label, sizeof(h->label));
	q->out->holders_len++;
	q->answered++;
}

static void replies_ended(void *owner, enum conn_consumer_end why)
{
	struct asking *q = owner;

	q->ended = true;
	if (why == CONSUMER_REFUSED)
		trace("direct reply-to refused: holders are not named");
}

static int by_slot(const void *x, const void *y)
{
	const struct sem_holder *a = x, *b = y;

	return (a->slot > b->slot) - (a->slot < b->slot);
}

enum al_status holders_ask(struct sem *s, struct sem_status *out)
{
	struct asking q = {.out = out};
	struct conn_consumer hooks = {
		.delivered = answer_came, .ended = replies_ended, .owner = &q};
	char queue[QUEUE_NAME_MAX + 1], id[16];
	unsigned *asked;
	struct deadline by;
	enum al_status st = AL_OK;
	amqp_method_t m;
	bool got;
	size_t i, j;

	if (!out->held.len)
		return AL_OK;
	asked = calloc(out->held.len, sizeof(*asked));
	out->holders = calloc(out->held.len, sizeof(*out->holders));
	if (!asked || !out->holders) {
		free(asked);
		return fail(AL_INTERNAL, "out of memory");
	}
	/* Away: no holder queue, nobody to ask. */
	for (i = j = 0; i < out->held.len; i++) {
		size_t k;

		for (k = 0; k < out->away.len && out->away.slot[k] != out->held.slot[i]; k++)
			;
		if (k == out->away.len)
			asked[q.n++] = out->held.slot[i];
	}
	q.asked = asked;
	if (q.n && (st = conn_listen_replies(s->conn, &hooks)) == AL_OK) {
		for (i = 0; st == AL_OK && i < q.n; i++) {
			sem_name_slot(&s->name, asked[i], HOLDER_QUEUE, queue);
			snprintf(id, sizeof(id), "%u", asked[i]);
			st = conn_ask(s->conn, queue, QUESTION_TYPE, QUESTION_EXPIRATION, id);
		}
		by = deadline_in(ANSWER_WAIT);
		/* The answers come on the listening channel, taken by whatever
		 * reads; nothing else is outstanding on the main one. */
		while (st == AL_OK && !q.ended && q.answered < q.n && !deadline_passed(by))
			if (conn_wait_readable(s->conn, by))
				st = conn_poll(s->conn, &m, &got);
		if (!s->conn->dead && conn_consuming(s->conn))
			conn_consume_end(s->conn, NULL);
	}
	free(asked);
	qsort(out->holders, out->holders_len, sizeof(*out->holders), by_slot);
	/* Unanswered is unnamed, not a failure; a dead connection is, but
	 * for one the broker's side crashed under (INTERNAL_ERROR): RabbitMQ
	 * 4.3.6 once crashed a status's channel as it began to consume
	 * direct reply-to ("only creator channel may consume"). What status
	 * reports was read before the naming began. */
	if (st != AL_OK && (!s->conn->dead || conn_broker_crashed(s->conn))) {
		if (s->conn->dead)
			trace("holders not named: %s", status_message());
		status_clear();
		st = AL_OK;
	}
	return st;
}
