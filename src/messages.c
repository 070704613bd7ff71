/* The messages amqplock sends and reads beside its queue requests: notes
 * published (a hand-over's, on the main channel or behind a consumer's
 * opening) and whether they were routed, replies to questions, one
 * message got from a queue and settled, and a message's type, headers
 * and signature read. */
#include "conn.h"
#include "conn_parts.h"

#include <string.h>

bool conn_bytes_are(amqp_bytes_t b, const char *s)
{
	return b.len == strlen(s) && memcmp(b.bytes, s, b.len) == 0;
}

bool conn_is_type(const amqp_basic_properties_t *p, const char *type)
{
	return (p->_flags & AMQP_BASIC_TYPE_FLAG) && conn_bytes_are(p->type, type);
}

const amqp_field_value_t *conn_header(const amqp_basic_properties_t *p, const char *key)
{
	int i;

	if (!(p->_flags & AMQP_BASIC_HEADERS_FLAG))
		return NULL;
	for (i = 0; i < p->headers.num_entries; i++)
		if (conn_bytes_are(p->headers.entries[i].key, key))
			return &p->headers.entries[i].value;
	return NULL;
}

bool conn_is_reply_to(const amqp_bytes_t *name)
{
	static const char prefix[] = REPLY_TO ".";

	return name->len > sizeof(prefix) - 1 && name->len <= 255 /* a queue name's longest */ &&
	       memcmp(name->bytes, prefix, sizeof(prefix) - 1) == 0;
}

enum al_status conn_reply(struct conn *c, const char *reply_to, const char *correlation_id,
			  const char *type, const amqp_table_t *headers)
{
	amqp_basic_properties_t props = {
		._flags = AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_CORRELATION_ID_FLAG |
			  AMQP_BASIC_HEADERS_FLAG,
		.type = amqp_cstring_bytes(type),
		.correlation_id = amqp_cstring_bytes(correlation_id),
		.headers = *headers,
	};
	int r;

	if (c->dead || !c->channel)
		return conn_unusable(c);
	/* Not mandatory: an asker gone meanwhile is no error. */
	r = amqp_basic_publish(c->amqp, c->channel, amqp_empty_bytes, amqp_cstring_bytes(reply_to),
			       0, 0, &props, amqp_empty_bytes);
	if (r != AMQP_STATUS_OK)
		return conn_failed(c, r, "answering a question");
	c->published++; /* the channel is in confirm mode */
	return AL_OK;
}

enum al_status conn_send_note(struct conn *c, const struct conn_note *n)
{
	/* The consumer's channel is not in confirm mode: no confirm comes
	 * back for a later request's answer to meet first. The main one is:
	 * its confirm is the next reply's to skip (or conn_note_routed's to
	 * read). */
	amqp_channel_t channel = n->main ? c->channel : c->consumer_channel;
	amqp_basic_properties_t props = {
		._flags = AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_CORRELATION_ID_FLAG |
			  AMQP_BASIC_HEADERS_FLAG | AMQP_BASIC_USER_ID_FLAG |
			  (n->expiration ? AMQP_BASIC_EXPIRATION_FLAG : 0),
		.type = amqp_cstring_bytes(n->type),
		.correlation_id = amqp_cstring_bytes(n->correlation_id),
		.headers = *n->headers,
		.user_id = amqp_cstring_bytes(c->user),
		.expiration = n->expiration ? amqp_cstring_bytes(n->expiration) : amqp_empty_bytes,
	};
	int r;

	if (c->dead)
		return conn_unusable(c);
	if (!channel || !c->user[0] || (n->mandatory && !n->main))
		return fail(AL_INTERNAL, "internal error: no channel or login to send a note with");
	r = amqp_basic_publish(c->amqp, channel, amqp_empty_bytes, amqp_cstring_bytes(n->queue),
			       n->mandatory, 0, &props, amqp_empty_bytes);
	if (r != AMQP_STATUS_OK)
		return conn_failed(c, r, "publishing");
	if (n->main)
		c->published++;
	return AL_OK;
}

enum al_status conn_note_routed(struct conn *c, bool *routed)
{
	uint64_t tag = c->published;
	enum al_status st;
	amqp_method_t m;

	*routed = true;
	/* Confirms of earlier publishes (wake-ups) may come first; a nack
	 * is a queue that could not take it: there, as for a probe. */
	for (;;) {
		if ((st = conn_recv(c, &m)) != AL_OK)
			return conn_refused(c, st, "publishing a note through", "amq.default");
		if (m.id == AMQP_BASIC_RETURN_METHOD)
			*routed = false;
		else if ((m.id == AMQP_BASIC_ACK_METHOD || m.id == AMQP_BASIC_NACK_METHOD) &&
			 ((amqp_basic_ack_t *)m.decoded)->delivery_tag >= tag)
			return AL_OK;
	}
}

bool conn_signed_by_us(const struct conn *c, const amqp_basic_properties_t *p)
{
	return (p->_flags & AMQP_BASIC_USER_ID_FLAG) && c->user[0] &&
	       conn_bytes_are(p->user_id, c->user);
}

enum al_status conn_get(struct conn *c, const char *queue, const char *key, char *value,
			size_t size, struct conn_got *got)
{
	amqp_basic_get_t get = {.queue = amqp_cstring_bytes(queue)};
	amqp_basic_properties_t *header = NULL;
	const amqp_field_value_t *f;
	enum al_status st;
	amqp_method_t m;

	memset(got, 0, sizeof(*got));
	value[0] = '\0';
	c->reply_code = 0;
	st = conn_send(c, AMQP_BASIC_GET_METHOD, &get);
	if (st == AL_OK)
		st = conn_expect(c, AMQP_BASIC_GET_EMPTY_METHOD, &m);
	if (st != AL_OK || m.id != AMQP_BASIC_GET_OK_METHOD)
		return conn_answer(c, st, REFUSED_NOT_FOUND | REFUSED_ACCESS, &got->refused,
				   "reading", queue);
	got->tag = ((amqp_basic_get_ok_t *)m.decoded)->delivery_tag;
	got->channel = c->channel;
	/* Its header comes next; a body, if any, is skipped with the
	 * frames of the next reply. */
	if ((st = conn_next_header_on(c, c->channel, &header)) != AL_OK)
		return conn_refused(c, st, "reading", queue);
	f = conn_header(header, key);
	if (f && (f->kind == AMQP_FIELD_KIND_UTF8 || f->kind == AMQP_FIELD_KIND_BYTES) &&
	    f->value.bytes.len < size && !memchr(f->value.bytes.bytes, '\0', f->value.bytes.len)) {
		memcpy(value, f->value.bytes.bytes, f->value.bytes.len);
		value[f->value.bytes.len] = '\0';
	}
	got->signed_by_us = conn_signed_by_us(c, header);
	return AL_OK;
}

void conn_settle(struct conn *c, const struct conn_got *got, bool requeue)
{
	amqp_basic_ack_t ack = {.delivery_tag = got->tag};
	amqp_basic_reject_t reject = {.delivery_tag = got->tag, .requeue = 1};

	/* On another channel (ours was closed since, which put the message
	 * back) or none: nothing to settle. */
	if (c->dead || !got->tag || got->channel != c->channel)
		return;
	if (requeue)
		amqp_send_method(c->amqp, c->channel, AMQP_BASIC_REJECT_METHOD, &reject);
	else
		amqp_send_method(c->amqp, c->channel, AMQP_BASIC_ACK_METHOD, &ack);
}
