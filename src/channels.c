/* The channels beside the main one: the parallel channel (one request
 * answered while the main channel is read), the consumer channel (its
 * deliveries handed to its owner's hooks whatever is being read), and
 * side calls (one request on a channel of its own, opened and closed for
 * it). conn.c reads every channel's frames and hands these their own
 * through the hook set here (c->beside): this file stands above conn.c,
 * which calls nothing of it. */
#include "conn.h"
#include "conn_parts.h"

#include <string.h>

/* The consumer channel and the parallel channel: far from the ids that
 * conn_reset_channel cycles through (1..1000). */
#define CONSUMER_CHANNEL 1001
#define PARALLEL_CHANNEL 1002
/* conn_listen's: not the line's, whose close may still be under way when
 * a waiter that got its slot starts to listen; two, taken in turn, as the
 * last one's close may still be under way when a holder that lets go
 * listens again (to its holder queue, for an ask: handover.c); and
 * conn_listen_replies'. Opening a channel whose close-ok has not come
 * yet is an error that ends the connection. */
#define LISTEN_CHANNEL  1003
#define REPLIES_CHANNEL 1004
#define LISTEN_CHANNEL2 1005
/* conn_stream_append's: the line's close may still be under way when a
 * waiter that got its slot draws its fencing token. */
#define STREAM_CHANNEL 1006

/* Ends the consumer: publishes `last` on its channel if asked, closes
 * the channel (unless the broker has: closed), and tells the owner why. */
static void end_consumer(struct conn *c, const struct conn_message *last, bool closed,
			 enum conn_consumer_end why)
{
	amqp_channel_close_t close = {.reply_code = AMQP_REPLY_SUCCESS};
	amqp_channel_t channel = c->consumer_channel;
	struct conn_consumer hooks = c->consumer;

	c->consumer_channel = 0;
	c->delivering = 0;
	memset(&c->consumer, 0, sizeof(c->consumer));
	if (!c->dead && channel && !closed) {
		/* On this channel, which is not in confirm mode: no answer
		 * comes to be read later. What was delivered to us and not
		 * acknowledged goes back to the queue with the close. */
		if (last)
			conn_publish_on(c, channel, last->queue, false, last->expiration,
					last->type, "publishing");
		/* Its close-ok, like any late frame, is skipped by
		 * conn_next_method_on. */
		amqp_send_method(c->amqp, channel, AMQP_CHANNEL_CLOSE_METHOD, &close);
	}
	if (hooks.ended)
		hooks.ended(hooks.owner, why);
}

/* A frame of the consumer channel, read while `reading` was waited on:
 * ours unless it is the reader's, on the consumer channel itself, where
 * only its close by the broker is ours (the consumer ended: AL_BROKER
 * ends the wait). A delivery goes to the owner's hook once its header has
 * come. */
static enum al_status take_consumed(struct conn *c, amqp_channel_t reading, const amqp_frame_t *f,
				    bool *taken)
{
	amqp_channel_close_ok_t ok = {0};
	bool method = f->frame_type == AMQP_FRAME_METHOD;
	bool being_read = reading == c->consumer_channel;

	if (being_read && !(method && f->payload.method.id == AMQP_CHANNEL_CLOSE_METHOD))
		return AL_OK;
	*taken = true;
	if (f->frame_type == AMQP_FRAME_HEADER && c->delivering) {
		uint64_t tag = c->delivering;

		c->delivering = 0;
		if (c->consumer.delivered)
			c->consumer.delivered(c->consumer.owner, tag,
					      f->payload.properties.decoded);
	}
	if (!method)
		return AL_OK;
	if (f->payload.method.id == AMQP_BASIC_DELIVER_METHOD) {
		const amqp_basic_deliver_t *d = f->payload.method.decoded;

		c->delivering = d->delivery_tag;
		c->delivering_again = d->redelivered;
	} else if (f->payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
		/* Read while its opening was answered: the refusal is the
		 * reader's (reply_code and reply_text); otherwise the main
		 * channel's may be in them. */
		if (being_read)
			(void)conn_channel_closed(c, c->consumer_channel,
						  f->payload.method.decoded);
		else
			amqp_send_method(c->amqp, c->consumer_channel, AMQP_CHANNEL_CLOSE_OK_METHOD,
					 &ok);
		end_consumer(c, NULL, true, CONSUMER_REFUSED);
	} else if (f->payload.method.id == AMQP_BASIC_CANCEL_METHOD) {
		/* Its queue was deleted: nothing more will come. */
		end_consumer(c, NULL, false, CONSUMER_CANCELLED);
	}
	return being_read ? AL_BROKER : AL_OK;
}

/* A frame of the parallel channel, read while `reading` was waited on:
 * its open-ok is dropped; its answer, read while another channel was,
 * kept for conn_parallel_expect; the rest is the reader's. */
static enum al_status take_parallel(struct conn *c, amqp_channel_t reading, const amqp_frame_t *f,
				    bool *taken)
{
	enum al_status st;

	if (f->frame_type == AMQP_FRAME_METHOD &&
	    f->payload.method.id == AMQP_CHANNEL_OPEN_OK_METHOD && c->parallel_opening) {
		c->parallel_opening = false;
		*taken = true;
		return AL_OK;
	}
	if (reading == c->parallel_channel)
		return AL_OK;
	*taken = true;
	if (f->frame_type != AMQP_FRAME_METHOD)
		return AL_OK;
	c->parallel_answer.id = f->payload.method.id;
	if (f->payload.method.id != AMQP_CHANNEL_CLOSE_METHOD)
		return AL_OK;
	/* The main channel's reply code is not ours to change: it may
	 * hold a refusal read just before. */
	{
		uint16_t code = c->reply_code;
		char text[sizeof(c->reply_text)];

		memcpy(text, c->reply_text, sizeof(text));
		st = conn_channel_closed(c, c->parallel_channel, f->payload.method.decoded);
		c->parallel_answer.code = c->reply_code;
		memcpy(c->parallel_answer.text, c->reply_text, sizeof(text));
		c->reply_code = code;
		memcpy(c->reply_text, text, sizeof(text));
	}
	return st == AL_CONNECTION || c->dead ? AL_CONNECTION : AL_OK;
}

/* c->beside, set when the consumer or the parallel channel opens: conn.c
 * reads every channel's frames, and offers each to us first. */
static enum al_status take_beside(struct conn *c, amqp_channel_t reading, const amqp_frame_t *f,
				  bool *taken)
{
	*taken = false;
	if (c->consumer_channel && f->channel == c->consumer_channel)
		return take_consumed(c, reading, f, taken);
	if (c->parallel_channel && f->channel == c->parallel_channel)
		return take_parallel(c, reading, f, taken);
	return AL_OK;
}

enum al_status conn_parallel_send(struct conn *c, amqp_method_number_t id, void *decoded)
{
	amqp_channel_open_t open = {0};
	int r;

	if (c->dead)
		return conn_unusable(c);
	c->parallel_answer.id = 0;
	/* Opened and used in one go: the broker takes the channel's frames
	 * in order, the open first. */
	if (!c->parallel_channel) {
		c->beside = take_beside;
		c->parallel_channel = PARALLEL_CHANNEL;
		c->parallel_opening = true;
		if ((r = amqp_send_method(c->amqp, c->parallel_channel, AMQP_CHANNEL_OPEN_METHOD,
					  &open)) != AMQP_STATUS_OK)
			return conn_failed(c, r, "opening a second channel");
	}
	if ((r = amqp_send_method(c->amqp, c->parallel_channel, id, decoded)) != AMQP_STATUS_OK)
		return conn_failed(c, r, "sending a request");
	return AL_OK;
}

enum al_status conn_parallel_expect(struct conn *c, amqp_method_number_t expect, double wait)
{
	enum al_status st;
	amqp_method_t m;
	bool none;

	if (c->parallel_answer.id == 0 && c->parallel_channel && !c->dead) {
		st = conn_next_method_on(c, c->parallel_channel, wait, &m, &none);
		if (st != AL_OK)
			return st; /* refused: reply_code is set, the channel closed */
		c->parallel_answer.id = m.id;
	} else if (c->parallel_answer.id == AMQP_CHANNEL_CLOSE_METHOD) {
		c->reply_code = c->parallel_answer.code;
		memcpy(c->reply_text, c->parallel_answer.text, sizeof(c->reply_text));
		c->parallel_answer.id = 0;
		return conn_status_for_reply(c->reply_code);
	} else if (c->parallel_answer.id == 0) {
		return fail(AL_CONNECTION, "connection to %s is closed", c->where);
	}
	if (c->parallel_answer.id != expect) {
		c->dead = true;
		return fail(AL_BROKER, "unexpected reply from the broker at %s (method 0x%08x)",
			    c->where, (unsigned)c->parallel_answer.id);
	}
	c->parallel_answer.id = 0;
	return AL_OK;
}

/* The one consumer a connection has: on `channel`, its deliveries to
 * `hooks`; what conn_consume and conn_listen start with. */
static enum al_status consumer_begin(struct conn *c, amqp_channel_t channel,
				     const struct conn_consumer *hooks)
{
	if (c->dead)
		return conn_unusable(c);
	if (c->consumer_channel)
		return fail(AL_INTERNAL, "internal error: already consuming");
	c->beside = take_beside;
	c->consumer_channel = channel;
	c->consumer = *hooks;
	c->delivering = 0;
	return AL_OK;
}

/* A request of a consumer's opening round trip. */
struct opening {
	amqp_method_number_t id;
	void *decoded;
};

/* Sends the requests on the consumer channel, in order; a rabbitmq-c
 * status. */
static int send_opening(struct conn *c, const struct opening *req, size_t n)
{
	int r = AMQP_STATUS_OK;
	size_t i;

	for (i = 0; i < n && r == AMQP_STATUS_OK; i++)
		r = amqp_send_method(c->amqp, c->consumer_channel, req[i].id, req[i].decoded);
	return r;
}

/* The replies to a consumer's opening round trip, in order (`n` of
 * them); *ok gets the declare-ok at index `pick`. AL_BROKER if any is
 * not the one asked for (a refusal has ended the consumer then). */
static enum al_status opening_replies(struct conn *c, const amqp_method_number_t *replies, size_t n,
				      size_t pick, amqp_queue_declare_ok_t *ok)
{
	enum al_status st;
	amqp_method_t m;
	bool none;
	size_t i;

	for (i = 0; i < n; i++) {
		st = conn_next_method_on(c, c->consumer_channel, c->rpc_timeout, &m, &none);
		if (st != AL_OK || m.id != replies[i])
			return c->dead ? st : AL_BROKER;
		if (i == pick)
			*ok = *(amqp_queue_declare_ok_t *)m.decoded;
	}
	return AL_OK;
}

enum al_status conn_consume(struct conn *c, const char *queue, const amqp_table_t *arguments,
			    const struct conn_consumer *hooks, bool *alone)
{
	amqp_channel_open_t open = {0};
	/* One delivery at a time: the next waits for this one's ack. */
	amqp_basic_qos_t qos = {.prefetch_count = 1};
	amqp_queue_declare_t declare = {
		.queue = amqp_cstring_bytes(queue), .durable = 1, .arguments = *arguments};
	amqp_basic_consume_t consume = {.queue = amqp_cstring_bytes(queue)};
	const struct opening req[] = {{AMQP_CHANNEL_OPEN_METHOD, &open},
				      {AMQP_BASIC_QOS_METHOD, &qos},
				      {AMQP_QUEUE_DECLARE_METHOD, &declare},
				      {AMQP_BASIC_CONSUME_METHOD, &consume}};
	static const amqp_method_number_t replies[] = {
		AMQP_CHANNEL_OPEN_OK_METHOD, AMQP_BASIC_QOS_OK_METHOD, AMQP_QUEUE_DECLARE_OK_METHOD,
		AMQP_BASIC_CONSUME_OK_METHOD};
	amqp_queue_declare_ok_t ok = {0};
	enum al_status st;
	int r;

	*alone = false;
	if ((st = consumer_begin(c, CONSUMER_CHANNEL, hooks)) != AL_OK)
		return st;
	/* One round trip for the four. */
	if ((r = send_opening(c, req, sizeof(req) / sizeof(req[0]))))
		return conn_failed(c, r, "subscribing to a queue");
	st = opening_replies(c, replies, sizeof(replies) / sizeof(replies[0]), 2, &ok);
	*alone = st == AL_OK && ok.consumer_count == 0;
	return st;
}

enum al_status conn_enter(struct conn *c, const struct conn_entry *e,
			  const struct conn_consumer *hooks, uint32_t *ahead)
{
	amqp_channel_open_t open = {0};
	amqp_basic_qos_t qos = {.prefetch_count = 1};
	amqp_queue_declare_t own = {
		.queue = amqp_cstring_bytes(e->own), .exclusive = 1, .auto_delete = 1};
	amqp_queue_declare_t mark = {.queue = amqp_cstring_bytes(e->mark),
				     .durable = 1,
				     .arguments = *e->mark_arguments};
	amqp_queue_declare_t line = {.queue = amqp_cstring_bytes(e->line), .durable = 1};
	amqp_basic_consume_t consume = {.queue = amqp_cstring_bytes(e->own)};
	amqp_table_entry_t named = {
		.key = amqp_cstring_bytes("queue"),
		.value = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = amqp_cstring_bytes(e->own)}};
	amqp_basic_properties_t props = {
		._flags = AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_HEADERS_FLAG |
			  (c->user[0] ? AMQP_BASIC_USER_ID_FLAG : 0),
		.type = amqp_cstring_bytes(e->type),
		.headers = {.num_entries = 1, .entries = &named},
		.user_id = amqp_cstring_bytes(c->user),
	};
	const struct opening req[] = {
		{AMQP_CHANNEL_OPEN_METHOD, &open},  {AMQP_BASIC_QOS_METHOD, &qos},
		{AMQP_QUEUE_DECLARE_METHOD, &own},  {AMQP_QUEUE_DECLARE_METHOD, &mark},
		{AMQP_QUEUE_DECLARE_METHOD, &line}, {AMQP_BASIC_CONSUME_METHOD, &consume}};
	static const amqp_method_number_t replies[] = {
		AMQP_CHANNEL_OPEN_OK_METHOD,  AMQP_BASIC_QOS_OK_METHOD,
		AMQP_QUEUE_DECLARE_OK_METHOD, AMQP_QUEUE_DECLARE_OK_METHOD,
		AMQP_QUEUE_DECLARE_OK_METHOD, AMQP_BASIC_CONSUME_OK_METHOD};
	amqp_queue_declare_ok_t ok = {0};
	enum al_status st;
	int r;

	*ahead = 0;
	if ((st = consumer_begin(c, CONSUMER_CHANNEL, hooks)) != AL_OK)
		return st;
	/* One round trip for all: the entry goes last, once its queue is
	 * consumed, so that nothing sent to it on the entry's word is
	 * missed. The channel is not in confirm mode: the entry has no
	 * answer (a refusal before it closes the channel, and the entry
	 * goes with it). */
	if ((r = send_opening(c, req, sizeof(req) / sizeof(req[0]))) ||
	    (r = amqp_basic_publish(c->amqp, c->consumer_channel, amqp_empty_bytes,
				    amqp_cstring_bytes(e->line), 0, 0, &props, amqp_empty_bytes)))
		return conn_failed(c, r, "joining a line");
	/* (the line's declare-ok: how many entries are before ours) */
	st = opening_replies(c, replies, sizeof(replies) / sizeof(replies[0]), 4, &ok);
	*ahead = st == AL_OK ? ok.message_count : 0;
	return st;
}

enum al_status conn_stream_append(struct conn *c, const char *stream, const char *message_id,
				  const struct conn_consumer *hooks)
{
	amqp_channel_open_t open = {0};
	/* Deliveries of others' entries before ours come without waiting
	 * for each one's ack. */
	amqp_basic_qos_t qos = {.prefetch_count = 64};
	amqp_table_entry_t at = {
		.key = amqp_cstring_bytes("x-stream-offset"),
		.value = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = amqp_cstring_bytes("next")}};
	amqp_basic_consume_t consume = {.queue = amqp_cstring_bytes(stream),
					.arguments = {.num_entries = 1, .entries = &at}};
	amqp_basic_properties_t props = {
		._flags = AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
			  (c->user[0] ? AMQP_BASIC_USER_ID_FLAG : 0),
		.message_id = amqp_cstring_bytes(message_id),
		.delivery_mode = AMQP_DELIVERY_PERSISTENT,
		.user_id = amqp_cstring_bytes(c->user),
	};
	const struct opening req[] = {{AMQP_CHANNEL_OPEN_METHOD, &open},
				      {AMQP_BASIC_QOS_METHOD, &qos},
				      {AMQP_BASIC_CONSUME_METHOD, &consume}};
	static const amqp_method_number_t replies[] = {AMQP_CHANNEL_OPEN_OK_METHOD,
						       AMQP_BASIC_QOS_OK_METHOD,
						       AMQP_BASIC_CONSUME_OK_METHOD};
	enum al_status st;
	int r;

	if ((st = consumer_begin(c, STREAM_CHANNEL, hooks)) != AL_OK)
		return st;
	c->reply_code = 0;
	/* One round trip: the entry goes once the consumer is in place, so
	 * that it is among what the consumer reads (a refusal before it
	 * closes the channel, and the entry goes with it). */
	if ((r = send_opening(c, req, sizeof(req) / sizeof(req[0]))) ||
	    (r = amqp_basic_publish(c->amqp, c->consumer_channel, amqp_empty_bytes,
				    amqp_cstring_bytes(stream), 0, 0, &props, amqp_empty_bytes)))
		return conn_failed(c, r, "appending to a stream");
	return opening_replies(c, replies, sizeof(replies) / sizeof(replies[0]),
			       sizeof(replies) / sizeof(replies[0]), NULL);
}

bool conn_delivered_again(const struct conn *c)
{
	return c->delivering_again;
}

bool conn_consuming(const struct conn *c)
{
	return c->consumer_channel != 0;
}

void conn_ack(struct conn *c, uint64_t tag)
{
	amqp_basic_ack_t ack = {.delivery_tag = tag};

	if (!c->dead && c->consumer_channel)
		amqp_send_method(c->amqp, c->consumer_channel, AMQP_BASIC_ACK_METHOD, &ack);
}

void conn_consume_end(struct conn *c, const struct conn_message *last)
{
	end_consumer(c, last, false, CONSUMER_LEFT);
}

static enum al_status listen_on(struct conn *c, amqp_channel_t channel, const char *queue,
				const struct conn_consumer *hooks)
{
	amqp_channel_open_t open = {0};
	amqp_basic_consume_t consume = {.queue = amqp_cstring_bytes(queue), .no_ack = 1};
	enum al_status st;
	int r;

	if ((st = consumer_begin(c, channel, hooks)) != AL_OK)
		return st;
	/* Nothing is waited for: the open-ok and consume-ok are skipped
	 * when they come, a refusal ends the consumer (take_consumed). */
	if ((r = amqp_send_method(c->amqp, c->consumer_channel, AMQP_CHANNEL_OPEN_METHOD, &open)) ||
	    (r = amqp_send_method(c->amqp, c->consumer_channel, AMQP_BASIC_CONSUME_METHOD,
				  &consume)))
		return conn_failed(c, r, "subscribing to a queue");
	return AL_OK;
}

enum al_status conn_listen(struct conn *c, const char *queue, const struct conn_consumer *hooks)
{
	c->listened = c->listened == LISTEN_CHANNEL ? LISTEN_CHANNEL2 : LISTEN_CHANNEL;
	return listen_on(c, c->listened, queue, hooks);
}

/* Direct reply-to (REPLY_TO): the answers come to the channel that asked. */
enum al_status conn_listen_replies(struct conn *c, const struct conn_consumer *hooks)
{
	return listen_on(c, REPLIES_CHANNEL, REPLY_TO, hooks);
}

enum al_status conn_ask(struct conn *c, const char *queue, const char *type, const char *expiration,
			const char *correlation_id)
{
	amqp_basic_properties_t props = {
		._flags = AMQP_BASIC_EXPIRATION_FLAG | AMQP_BASIC_TYPE_FLAG |
			  AMQP_BASIC_REPLY_TO_FLAG | AMQP_BASIC_CORRELATION_ID_FLAG,
		.expiration = amqp_cstring_bytes(expiration),
		.type = amqp_cstring_bytes(type),
		.reply_to = amqp_cstring_bytes(REPLY_TO),
		.correlation_id = amqp_cstring_bytes(correlation_id),
	};
	int r;

	if (c->dead)
		return conn_unusable(c);
	if (!c->consumer_channel)
		return fail(AL_INTERNAL, "internal error: not listening for replies");
	r = amqp_basic_publish(c->amqp, c->consumer_channel, amqp_empty_bytes,
			       amqp_cstring_bytes(queue), 0, 0, &props, amqp_empty_bytes);
	return r == AMQP_STATUS_OK ? AL_OK : conn_failed(c, r, "asking a question");
}

/* conn_side_call's channel ids: above the line's and the lease's, and
 * cycled, so that none is opened again before the broker has closed it. */
#define SIDE_CHANNEL_FIRST 1100
#define SIDE_CHANNELS      900

enum al_status conn_side_call(struct conn *c, amqp_method_number_t id, void *decoded,
			      amqp_method_number_t ok, uint16_t *refused, const char *doing,
			      const char *what)
{
	amqp_channel_t side =
		(amqp_channel_t)(SIDE_CHANNEL_FIRST + c->side_calls++ % SIDE_CHANNELS);
	amqp_channel_close_t close = {.reply_code = AMQP_REPLY_SUCCESS};
	amqp_channel_open_t open = {0};
	enum al_status st;
	amqp_method_t m;
	bool none;
	int r;

	*refused = 0;
	if (c->dead)
		return conn_unusable(c);
	if ((r = amqp_send_method(c->amqp, side, AMQP_CHANNEL_OPEN_METHOD, &open)) ||
	    (r = amqp_send_method(c->amqp, side, id, decoded)))
		return conn_failed(c, r, doing);
	c->reply_code = 0;
	st = conn_next_method_on(c, side, c->rpc_timeout, &m, &none);
	if (st == AL_OK && m.id == AMQP_CHANNEL_OPEN_OK_METHOD)
		st = conn_next_method_on(c, side, c->rpc_timeout, &m, &none);
	if (st == AL_OK && m.id == ok) {
		/* Its close-ok, like any late frame, is skipped. */
		if ((r = amqp_send_method(c->amqp, side, AMQP_CHANNEL_CLOSE_METHOD, &close)))
			return conn_failed(c, r, doing);
		return AL_OK;
	}
	if (st == AL_OK) {
		c->dead = true;
		return fail(AL_BROKER, "unexpected reply from the broker at %s (method 0x%08x)",
			    c->where, (unsigned)m.id);
	}
	if (c->dead || c->reply_code == 0)
		return conn_refused(c, st, doing, what);
	*refused = c->reply_code;
	return AL_OK;
}
