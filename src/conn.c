/* Using the one connection: requests on the main channel and their
 * replies, each wait bounded by a deadline; every frame read goes to the
 * channel it belongs to (the parallel and consumer channels' to
 * channels.c, through the hook it set: c->beside); broker refusals
 * turned into statuses; closing. Opening it is connect.c's. */
#include "conn.h"
#include "conn_parts.h"

#include "clock.h"
#include "parse.h"

#include <poll.h>
#include <string.h>
#include <sys/socket.h>

enum al_status conn_status_for_reply(uint16_t code)
{
	switch (code) {
	case AMQP_CONNECTION_FORCED:
		return AL_CONNECTION;
	case AMQP_ACCESS_REFUSED:
	case AMQP_NOT_ALLOWED:
		return AL_ACCESS;
	case AMQP_NOT_FOUND:
		return AL_NOT_FOUND;
	case AMQP_RESOURCE_LOCKED:
		return AL_BUSY;
	default:
		return AL_BROKER;
	}
}

/* The connection is unusable from now on: records why (a rabbitmq-c
 * status while `doing` something). */
enum al_status conn_failed(struct conn *c, int amqp_status, const char *doing)
{
	c->dead = true;
	c->away = true;
	c->no_reply = amqp_status == AMQP_STATUS_TIMEOUT;
	if (amqp_status == AMQP_STATUS_TIMEOUT && deadline_passed(c->limit))
		return fail(AL_CONNECTION,
			    "no reply from the broker at %s while %s, and the time to wait is up",
			    c->where, doing);
	if (amqp_status == AMQP_STATUS_TIMEOUT)
		return fail(AL_CONNECTION, "no reply from the broker at %s within %g s while %s",
			    c->where, c->rpc_timeout, doing);
	return fail(AL_CONNECTION, "connection to %s lost while %s: %s", c->where, doing,
		    amqp_error_string2(amqp_status));
}

static enum al_status connection_closed(struct conn *c, const amqp_connection_close_t *m)
{
	amqp_connection_close_ok_t ok = {0};
	enum al_status st = conn_status_for_reply(m->reply_code);
	char text[128];

	amqp_send_method(c->amqp, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
	c->dead = true;
	c->close_code = m->reply_code;
	/* RabbitMQ's own words on shutdown: "broker forced connection
	 * closure with reason 'shutdown'". */
	c->away = m->reply_code == AMQP_CONNECTION_FORCED;
	if (st == AL_NOT_FOUND || st == AL_BUSY)
		st = AL_BROKER;
	/* Forced: an operator or a node going down. Internal error: a crash
	 * of the broker's side of the connection (RabbitMQ 3.10 has one when
	 * a probe meets a quorum queue being deleted). Resource error: 4.3
	 * closes the connection when a publish finds its queue deleted
	 * between routing and delivery ("failed to deliver message"). A new
	 * connection works, so each counts as a lost connection, not a
	 * refusal. */
	if (m->reply_code == AMQP_CONNECTION_FORCED || m->reply_code == AMQP_INTERNAL_ERROR ||
	    m->reply_code == AMQP_RESOURCE_ERROR)
		st = AL_CONNECTION;
	return fail(
		st, "the broker at %s closed the connection: %s", c->where,
		parse_printable_copy(text, sizeof(text), m->reply_text.bytes, m->reply_text.len));
}

/* Sent only after we published during a resource alarm: the broker reads
 * nothing more from us until the alarm clears, so rather than wait for
 * the reply deadline we say why at once (a waiter may then wait for the
 * alarm's end: conn_await_unblocked). Holders never publish, so they are
 * not affected. */
static enum al_status connection_blocked(struct conn *c, const amqp_connection_blocked_t *m)
{
	c->dead = true;
	parse_printable_copy(c->blocked, sizeof(c->blocked), m->reason.bytes, m->reason.len);
	if (!c->blocked[0])
		strcpy(c->blocked, "no reason given");
	return fail(AL_BROKER,
		    "the broker at %s is refusing work: %s (a resource alarm; try again once it "
		    "clears)",
		    c->where, c->blocked);
}

const char *conn_blocked(const struct conn *c)
{
	return c->blocked[0] ? c->blocked : NULL;
}

bool conn_confirmed(const struct conn *c)
{
	return c->confirmed;
}

enum al_status conn_await_unblocked(struct conn *c, struct deadline until)
{
	amqp_frame_t f;
	struct timeval tv;
	int r;

	if (!c->amqp || !c->blocked[0])
		return conn_unusable(c);
	for (;;) {
		/* Waiting inside the library sends our heartbeats; the broker
		 * reads them once the alarm clears, and meanwhile does not
		 * count them. A second at a time: `until` may be never. */
		tv = timeval_of(sooner(deadline_left(until), 1.0));
		r = amqp_simple_wait_frame_noblock(c->amqp, &f, &tv);
		if (r == AMQP_STATUS_TIMEOUT && deadline_passed(until))
			return fail(AL_BUSY, "the broker at %s is under a resource alarm (%s)",
				    c->where, c->blocked);
		if (r == AMQP_STATUS_TIMEOUT)
			continue;
		if (r != AMQP_STATUS_OK)
			return conn_failed(c, r, "waiting for a resource alarm to clear");
		if (f.frame_type != AMQP_FRAME_METHOD || f.channel != 0)
			continue;
		if (f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)
			return connection_closed(c, f.payload.method.decoded);
		if (f.payload.method.id == AMQP_CONNECTION_UNBLOCKED_METHOD)
			return AL_OK;
	}
}

enum al_status conn_channel_closed(struct conn *c, amqp_channel_t channel,
				   const amqp_channel_close_t *close)
{
	amqp_channel_close_ok_t ok = {0};
	int r;

	c->reply_code = close->reply_code;
	parse_printable_copy(c->reply_text, sizeof(c->reply_text), close->reply_text.bytes,
			     close->reply_text.len);
	/* Without close-ok, reusing the channel id would make the broker close
	 * the whole connection. */
	r = amqp_send_method(c->amqp, channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
	if (channel == c->parallel_channel)
		c->parallel_channel = 0;
	else if (channel == c->channel)
		c->channel = 0;
	if (r != AMQP_STATUS_OK)
		return conn_failed(c, r, "acknowledging a channel close");
	return conn_status_for_reply(c->reply_code);
}

/* A request on a connection that has died, or on a channel that is not
 * open. Dead is a lost connection, whatever lost it (a send that failed
 * inside a step whose status nobody reads, a node killed meanwhile): the
 * caller connects again, as after any loss. A channel that is not open
 * on a live connection is our bug. */
enum al_status conn_unusable(const struct conn *c)
{
	if (c->dead)
		return fail(AL_CONNECTION, "the connection to %s was lost", c->where);
	return fail(AL_INTERNAL, "internal error: no open channel");
}

enum al_status conn_send(struct conn *c, amqp_method_number_t id, void *decoded)
{
	int r;

	if (c->dead || c->channel == 0)
		return conn_unusable(c);
	r = amqp_send_method(c->amqp, c->channel, id, decoded);
	if (r != AMQP_STATUS_OK)
		return conn_failed(c, r, "sending a request");
	return AL_OK;
}

/* An empty message for queue through the default exchange, with an
 * expiration (milliseconds, as text) rather than a queue argument, so that
 * it does not stay in a queue and the queues keep having no arguments.
 * Mandatory: the broker returns it if the queue is missing. */
enum al_status conn_publish_on(struct conn *c, amqp_channel_t channel, const char *queue,
			       bool mandatory, const char *expiration, const char *type,
			       const char *doing)
{
	amqp_basic_properties_t props = {
		._flags = AMQP_BASIC_EXPIRATION_FLAG | (type ? AMQP_BASIC_TYPE_FLAG : 0),
		.expiration = amqp_cstring_bytes(expiration),
		.type = type ? amqp_cstring_bytes(type) : amqp_empty_bytes,
	};
	int r;

	if (c->dead || channel == 0)
		return conn_unusable(c);
	r = amqp_basic_publish(c->amqp, channel, amqp_empty_bytes, amqp_cstring_bytes(queue),
			       mandatory, 0, &props, amqp_empty_bytes);
	if (r != AMQP_STATUS_OK)
		return conn_failed(c, r, doing);
	/* The channel is in confirm mode: this is the publish's tag. */
	if (channel == c->channel)
		c->published++;
	return AL_OK;
}

static enum al_status publish_expiring(struct conn *c, const char *queue, bool mandatory,
				       const char *expiration, const char *doing)
{
	return conn_publish_on(c, c->channel, queue, mandatory, expiration, NULL, doing);
}

enum al_status conn_publish_probe(struct conn *c, const char *queue)
{
	/* "0": a probe never stays anywhere. */
	return publish_expiring(c, queue, true, "0", "probing a queue");
}

/* Whether a wait that runs out is the connection's end (NO_REPLY_FAILS)
 * or only *none (NO_REPLY_TOLD). */
enum silence { NO_REPLY_FAILS, NO_REPLY_TOLD };

/* The next method for `channel`, waiting at most `wait` seconds in all
 * and never past the connection's limit (0: only what has already
 * arrived). *none is set if nothing came, or if the wait ran out and
 * silence is NO_REPLY_TOLD. */
static enum al_status next_frame_after(struct conn *c, amqp_channel_t channel, double wait,
				       enum silence silence, amqp_method_t *m,
				       amqp_basic_properties_t **header, bool *none);

static enum al_status next_method_after(struct conn *c, amqp_channel_t channel, double wait,
					enum silence silence, amqp_method_t *m, bool *none)
{
	return next_frame_after(c, channel, wait, silence, m, NULL, none);
}

/* As next_method_after; with header, a content header of `channel` that
 * comes before its next method is returned in *header (m->id 0). */
static enum al_status next_frame_after(struct conn *c, amqp_channel_t channel, double wait,
				       enum silence silence, amqp_method_t *m,
				       amqp_basic_properties_t **header, bool *none)
{
	struct deadline by = deadline_within(c->limit, wait);
	amqp_frame_t f;
	struct timeval tv;
	int r;

	*none = false;
	if (c->dead || channel == 0)
		return conn_unusable(c);
	amqp_maybe_release_buffers(c->amqp);
	for (;;) {
		/* Waiting inside the library also sends our heartbeats. Late
		 * frames of other channels do not extend the wait. */
		tv = wait > 0 ? timeval_of(deadline_left(by)) : (struct timeval){0, 0};
		r = amqp_simple_wait_frame_noblock(c->amqp, &f, &tv);
		if (r == AMQP_STATUS_TIMEOUT && wait <= 0) {
			*none = true;
			return AL_OK;
		}
		/* The library waits in whole milliseconds, rounded down: a
		 * timeout a little early is no timeout yet. */
		if (r == AMQP_STATUS_TIMEOUT && !deadline_passed(by))
			continue;
		/* Told only while the caller's wait goes on: cut by its end,
		 * a silence ends the connection as any other would (told, it
		 * would be asked about again, and waited for in the last
		 * try's grace: deadline_within). */
		if (r == AMQP_STATUS_TIMEOUT && silence == NO_REPLY_TOLD &&
		    !deadline_passed(c->limit)) {
			*none = true;
			return AL_OK;
		}
		if (r != AMQP_STATUS_OK)
			return conn_failed(c, r, "waiting for a reply");
		if (c->beside) {
			bool taken;
			enum al_status st = c->beside(c, channel, &f, &taken);

			if (st != AL_OK)
				return st;
			if (taken)
				continue;
		}
		if (header && f.frame_type == AMQP_FRAME_HEADER && f.channel == channel) {
			*header = f.payload.properties.decoded;
			m->id = 0;
			return AL_OK;
		}
		/* Other content frames (of a basic.return) carry nothing we
		 * need. */
		if (f.frame_type != AMQP_FRAME_METHOD)
			continue;
		if (f.channel == 0) {
			if (f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)
				return connection_closed(c, f.payload.method.decoded);
			if (f.payload.method.id == AMQP_CONNECTION_BLOCKED_METHOD)
				return connection_blocked(c, f.payload.method.decoded);
			continue;
		}
		if (f.channel != channel)
			continue; /* late frames of a channel we gave up */
		if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD)
			return conn_channel_closed(c, channel, f.payload.method.decoded);
		/* Not the first publish: under an alarm RabbitMQ still takes
		 * a new connection's first empty message before it blocks
		 * (its confirm may even come before connection.blocked). */
		if (f.payload.method.id == AMQP_BASIC_ACK_METHOD && channel == c->channel &&
		    ((amqp_basic_ack_t *)f.payload.method.decoded)->delivery_tag >= 2)
			c->confirmed = true;
		/* (an ack and a nack have the tag in the same place) */
		if ((f.payload.method.id == AMQP_BASIC_ACK_METHOD ||
		     f.payload.method.id == AMQP_BASIC_NACK_METHOD) &&
		    channel == c->channel &&
		    ((amqp_basic_ack_t *)f.payload.method.decoded)->delivery_tag > c->answered)
			c->answered = ((amqp_basic_ack_t *)f.payload.method.decoded)->delivery_tag;
		*m = f.payload.method;
		return AL_OK;
	}
}

enum al_status conn_next_method_on(struct conn *c, amqp_channel_t channel, double wait,
				   amqp_method_t *m, bool *none)
{
	return next_method_after(c, channel, wait, NO_REPLY_FAILS, m, none);
}

enum al_status conn_next_header_on(struct conn *c, amqp_channel_t channel,
				   amqp_basic_properties_t **header)
{
	enum al_status st;
	amqp_method_t m;
	bool none;

	*header = NULL;
	st = next_frame_after(c, channel, c->rpc_timeout, NO_REPLY_FAILS, &m, header, &none);
	if (st == AL_OK && !*header) {
		c->dead = true;
		st = fail(AL_BROKER, "unexpected reply from the broker at %s (method 0x%08x)",
			  c->where, (unsigned)m.id);
	}
	return st;
}

static enum al_status next_method(struct conn *c, double wait, amqp_method_t *m, bool *none)
{
	return conn_next_method_on(c, c->channel, wait, m, none);
}

enum al_status conn_recv(struct conn *c, amqp_method_t *m)
{
	bool none;

	return next_method(c, c->rpc_timeout, m, &none);
}

enum al_status conn_recv_or_silence(struct conn *c, amqp_method_t *m, bool *silence)
{
	return next_method_after(c, c->channel, c->rpc_timeout, NO_REPLY_TOLD, m, silence);
}

enum al_status conn_poll(struct conn *c, amqp_method_t *m, bool *got)
{
	bool none;
	enum al_status st = next_method(c, 0, m, &none);

	*got = st == AL_OK && !none;
	return st;
}

enum al_status conn_drain(struct conn *c)
{
	enum al_status st;
	amqp_method_t m;
	bool got;

	do
		st = conn_poll(c, &m, &got);
	while (st == AL_OK && got);
	if (st != AL_OK && !c->dead)
		return conn_refused(c, st, "using", "the channel");
	return st;
}

enum al_status conn_keepalive(struct conn *c)
{
	struct timeval none = {0, 0};
	amqp_frame_t f;
	int r;

	if (c->dead)
		return conn_unusable(c);
	amqp_maybe_release_buffers(c->amqp);
	for (;;) {
		r = amqp_simple_wait_frame_noblock(c->amqp, &f, &none);
		if (r == AMQP_STATUS_TIMEOUT)
			return AL_OK;
		if (r != AMQP_STATUS_OK)
			return conn_failed(c, r, "keeping the connection open");
		if (f.frame_type == AMQP_FRAME_METHOD && f.channel == 0 &&
		    f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)
			return connection_closed(c, f.payload.method.decoded);
	}
}

int conn_fd(const struct conn *c)
{
	return c->dead ? -1 : amqp_get_sockfd(c->amqp);
}

bool conn_buffered(const struct conn *c)
{
	return !c->dead && (amqp_frames_enqueued(c->amqp) || amqp_data_in_buffer(c->amqp));
}

bool conn_wait_readable(const struct conn *c, struct deadline until)
{
	struct pollfd fd = {conn_fd(c), POLLIN, 0};

	/* Dead: nothing will come, and reading at once says why, rather
	 * than sleeping until `until` on no socket. */
	if (c->dead)
		return true;
	return conn_buffered(c) || (poll(&fd, 1, poll_ms(deadline_left(until))) > 0 && fd.revents);
}

bool conn_readable(const struct conn *c)
{
	struct pollfd fd = {conn_fd(c), POLLIN, 0};

	return fd.fd >= 0 && poll(&fd, 1, 0) > 0;
}

enum al_status conn_expect(struct conn *c, amqp_method_number_t expect, amqp_method_t *m)
{
	return conn_expect_within(c, expect, c->rpc_timeout, m);
}

/* The confirm of a publish not waited for (a wake-up: conn_publish_expiring),
 * come before the reply to what was asked since. */
static bool stray_confirm(amqp_method_number_t got, amqp_method_number_t expect)
{
	return (got == AMQP_BASIC_ACK_METHOD || got == AMQP_BASIC_NACK_METHOD) && got != expect;
}

enum al_status conn_expect_within(struct conn *c, amqp_method_number_t expect, double wait,
				  amqp_method_t *m)
{
	enum al_status st;
	bool none;

	/* As many as were published: each read waits afresh. */
	do
		st = next_method(c, wait, m, &none);
	while (st == AL_OK && stray_confirm(m->id, expect));
	if (st != AL_OK)
		return st;
	/* A basic.get is answered either way. */
	if (expect == AMQP_BASIC_GET_EMPTY_METHOD && m->id == AMQP_BASIC_GET_OK_METHOD)
		return AL_OK;
	if (m->id != expect) {
		c->dead = true;
		return fail(AL_BROKER, "unexpected reply from the broker at %s (method 0x%08x)",
			    c->where, (unsigned)m->id);
	}
	return AL_OK;
}

enum al_status conn_publish_expiring(struct conn *c, const char *queue, bool mandatory,
				     const char *expiration)
{
	return publish_expiring(c, queue, mandatory, expiration, "publishing");
}

void conn_refusal_clear(struct conn *c)
{
	c->reply_code = 0;
}

uint16_t conn_refusal_code(const struct conn *c)
{
	return c->reply_code;
}

void conn_refusal_keep(const struct conn *c, struct conn_refusal *r)
{
	r->code = c->reply_code;
	memcpy(r->text, c->reply_text, sizeof(r->text));
}

void conn_refusal_restore(struct conn *c, const struct conn_refusal *r)
{
	c->reply_code = r->code;
	memcpy(c->reply_text, r->text, sizeof(c->reply_text));
}

enum al_status conn_refused(struct conn *c, enum al_status st, const char *doing, const char *queue)
{
	if (c->dead)
		return st; /* the connection failure already said why */
	return fail(st, "%s %s refused by the broker: %s", doing, queue, c->reply_text);
}

static unsigned refusal_bit(uint16_t code)
{
	switch (code) {
	case AMQP_ACCESS_REFUSED:
		return REFUSED_ACCESS;
	case AMQP_NOT_FOUND:
		return REFUSED_NOT_FOUND;
	case AMQP_RESOURCE_LOCKED:
		return REFUSED_LOCKED;
	case AMQP_PRECONDITION_FAILED:
		return REFUSED_MISMATCH;
	default:
		return 0;
	}
}

enum al_status conn_answer(struct conn *c, enum al_status st, unsigned tolerated, uint16_t *refused,
			   const char *doing, const char *queue)
{
	uint16_t code = st == AL_OK ? 0 : c->reply_code;

	if (refused)
		*refused = code;
	if (st == AL_OK)
		return AL_OK;
	if (c->dead || !(refusal_bit(code) & tolerated))
		return conn_refused(c, st, doing, queue);
	return conn_reset_channel(c);
}

enum al_status conn_call(struct conn *c, amqp_method_number_t id, void *decoded,
			 amqp_method_number_t ok, unsigned tolerated, uint16_t *refused,
			 const char *doing, const char *queue)
{
	enum al_status st;
	amqp_method_t m;

	c->reply_code = 0;
	if ((st = conn_send(c, id, decoded)) == AL_OK)
		st = conn_expect(c, ok, &m);
	return conn_answer(c, st, tolerated, refused, doing, queue);
}

enum al_status conn_reset_channel(struct conn *c)
{
	amqp_channel_open_t open = {0};
	amqp_confirm_select_t confirm = {0};
	amqp_method_t m;
	enum al_status st;

	if (c->dead)
		return conn_unusable(c);
	if (c->channel != 0) {
		amqp_channel_close_t close = {.reply_code = AMQP_REPLY_SUCCESS};

		/* Leave the old channel without waiting; conn_recv drops its
		 * late frames. */
		st = conn_send(c, AMQP_CHANNEL_CLOSE_METHOD, &close);
		if (st != AL_OK)
			return st;
	}
	/* Channel ids cycle so that a long wait for a busy admin mutex never
	 * runs past channel_max. */
	c->channel = (amqp_channel_t)(c->channel % 1000 + 1);
	c->published = 0;
	c->answered = 0;
	/* Both requests go out before either reply is read: one round trip. */
	if ((st = conn_send(c, AMQP_CHANNEL_OPEN_METHOD, &open)) != AL_OK ||
	    (st = conn_send(c, AMQP_CONFIRM_SELECT_METHOD, &confirm)) != AL_OK)
		return st;
	if ((st = conn_expect(c, AMQP_CHANNEL_OPEN_OK_METHOD, &m)) != AL_OK ||
	    (st = conn_expect(c, AMQP_CONFIRM_SELECT_OK_METHOD, &m)) != AL_OK) {
		if (!c->dead)
			return conn_refused(c, st, "opening channel", "");
		return st;
	}
	return AL_OK;
}

void conn_limit(struct conn *c, struct deadline by)
{
	c->limit = by;
}

bool conn_broker_away(const struct conn *c)
{
	return c->away;
}

bool conn_broker_crashed(const struct conn *c)
{
	return c->close_code == AMQP_INTERNAL_ERROR;
}

bool conn_broker_raced(const struct conn *c)
{
	return conn_broker_crashed(c) || c->close_code == AMQP_RESOURCE_ERROR;
}

void conn_close(struct conn *c)
{
	if (!c->amqp)
		return;
	if (!c->dead) {
		/* Polite but brief: a broker that blocks us for a resource
		 * alarm (after a release's notification) would not answer,
		 * and closing the socket ends the connection anyway. */
		struct timeval bye = timeval_of(c->rpc_timeout < 1 ? c->rpc_timeout : 1);

		amqp_set_rpc_timeout(c->amqp, &bye);
		amqp_connection_close(c->amqp, AMQP_REPLY_SUCCESS);
	}
	amqp_destroy_connection(c->amqp);
	c->amqp = NULL;
	c->channel = 0;
	c->dead = true;
}

void conn_abort(struct conn *c)
{
	c->dead = true;
	conn_close(c);
}

void conn_hang_up(struct conn *c)
{
	if (c->amqp && amqp_get_sockfd(c->amqp) >= 0)
		shutdown(amqp_get_sockfd(c->amqp), SHUT_RDWR);
	conn_abort(c);
}
