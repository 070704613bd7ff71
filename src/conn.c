#include "conn.h"

#include "clock.h"
#include "parse.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* rabbitmq-c 0.11 loads no trust store of its own for amqps. */
#define SYSTEM_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define FRAME_MAX        131072

static struct timeval to_timeval(double seconds)
{
	struct timeval tv;

	if (seconds < 0.001)
		seconds = 0.001;
	tv.tv_sec = (time_t)seconds;
	tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
	return tv;
}

/* Copies text from the broker or the user into a message buffer with
 * anything but printable ASCII replaced by '?': an error stays one line
 * and valid JSON. */
static char *printable(char *dst, size_t size, const void *src, size_t len)
{
	const unsigned char *p = src;
	size_t i;

	if (len >= size)
		len = size - 1;
	for (i = 0; i < len; i++)
		dst[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
	dst[len] = '\0';
	return dst;
}

enum al_status status_for_reply(uint16_t code)
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

static enum al_status not_private(const char *what, const char *shown)
{
	return fail(AL_USAGE, "%s %s is accessible by group or others; chmod 600 it", what, shown);
}

/* Like ssh with its keys: a secret that others can read is refused. The
 * same rule holds for a named FIFO, which has the mode it was made with,
 * and a pipe (<(...), /dev/stdin) always passes it: the kernel makes it
 * 0600, and only its user's processes (through /proc/PID/fd) and root
 * can open it. */
static enum al_status check_private(int fd, const char *what, const char *shown)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && (st.st_mode & 077))
		return not_private(what, shown);
	return AL_OK;
}

/* The first line of path into buf (size bytes), without its line end; a
 * NUL ends it too. */
static enum al_status read_password_file(const char *path, char *buf, size_t size)
{
	char shown[64];
	struct stat st;
	size_t len = 0;
	ssize_t r = 0;
	int fd, e;

	quote_arg(path, shown, sizeof(shown));
	/* Opening a FIFO waits for a writer: one that fstat would refuse
	 * below is refused now. */
	if (stat(path, &st) == 0 && S_ISFIFO(st.st_mode) && (st.st_mode & 077))
		return not_private("password file", shown);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return fail(AL_USAGE, "cannot read password file %s: %s", shown, strerror(errno));
	/* Read from a terminal the password would be echoed. */
	if (isatty(fd)) {
		close(fd);
		return fail(AL_USAGE,
			    "password file %s is a terminal (give a file, a pipe or a FIFO)",
			    shown);
	}
	if (check_private(fd, "password file", shown) != AL_OK) {
		close(fd);
		return AL_USAGE;
	}
	/* A byte at a time up to the line end: from a pipe (/dev/stdin)
	 * nothing past the first line is taken, and the rest is left for
	 * CMD. */
	while (len < size - 1 && (r = read(fd, buf + len, 1)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		if (buf[len++] == '\n')
			break;
	}
	e = errno;
	close(fd);
	buf[len] = '\0';
	if (r < 0) {
		explicit_bzero(buf, size);
		return fail(AL_USAGE, "cannot read password file %s: %s", shown, strerror(e));
	}
	len = strcspn(buf, "\r\n");
	if (buf[len] == '\0' && len == size - 1) {
		explicit_bzero(buf, size);
		return fail(AL_USAGE, "password in %s is longer than %zu bytes", shown, size - 2);
	}
	explicit_bzero(buf + len, size - len);
	return AL_OK;
}

/* The client's private key (in --key, or with the certificate in --cert)
 * is a secret like the password. */
static enum al_status check_key_file(const char *path)
{
	char shown[64];
	enum al_status st;
	int fd;

	quote_arg(path, shown, sizeof(shown));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return fail(AL_USAGE, "cannot read private key %s: %s", shown, strerror(errno));
	st = check_private(fd, "private key", shown);
	close(fd);
	return st;
}

enum al_status conn_check_opts(struct conn_opts *o)
{
	bool tls_options = o->cacert || o->cert || o->key || o->insecure;
	enum al_status st;
	unsigned i;

	/* Every URL of the list, before anything is read: a typo in the last
	 * one is a usage error even while the first one answers, and is not
	 * left waiting for a FIFO's writer. */
	st = url_check_list(o->url, tls_options, o->broker, URL_BROKERS_MAX, &o->brokers);
	if (st == AL_OK && o->key && !o->cert)
		st = fail(AL_USAGE, "--key needs --cert");
	if (st == AL_OK && o->cert)
		st = check_key_file(o->key ? o->key : o->cert);
	if (st == AL_OK && o->password_file && !o->password_read) {
		st = read_password_file(o->password_file, o->password, sizeof(o->password));
		o->password_read = st == AL_OK;
	}
	if (st != AL_OK) {
		explicit_bzero(o->broker, o->brokers * sizeof(o->broker[0]));
		o->brokers = 0;
		return st;
	}
	if (o->password_read)
		for (i = 0; i < o->brokers; i++)
			o->broker[i].info.password = o->password;
	return AL_OK;
}

/* The connection is unusable from now on: records why (a rabbitmq-c
 * status while `doing` something). */
static enum al_status connection_failed(struct conn *c, int amqp_status, const char *doing)
{
	c->dead = true;
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
	enum al_status st = status_for_reply(m->reply_code);
	char text[128];

	amqp_send_method(c->amqp, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
	c->dead = true;
	c->close_code = m->reply_code;
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
	return fail(st, "the broker at %s closed the connection: %s", c->where,
		    printable(text, sizeof(text), m->reply_text.bytes, m->reply_text.len));
}

/* Sent only after we published during a resource alarm: the broker reads
 * nothing more from us until the alarm clears, so rather than wait for
 * the reply deadline we say why at once. Holders never publish, so they
 * are not affected. */
static enum al_status connection_blocked(struct conn *c, const amqp_connection_blocked_t *m)
{
	char text[128];

	c->dead = true;
	return fail(AL_BROKER,
		    "the broker at %s is refusing work: %s (a resource alarm; try again once it "
		    "clears)",
		    c->where, printable(text, sizeof(text), m->reason.bytes, m->reason.len));
}

static enum al_status channel_closed(struct conn *c, amqp_channel_t channel,
				     const amqp_channel_close_t *close)
{
	amqp_channel_close_ok_t ok = {0};
	int r;

	c->reply_code = close->reply_code;
	printable(c->reply_text, sizeof(c->reply_text), close->reply_text.bytes,
		  close->reply_text.len);
	/* Without close-ok, reusing the channel id would make the broker close
	 * the whole connection. */
	r = amqp_send_method(c->amqp, channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
	if (channel == c->lease_channel)
		c->lease_channel = 0;
	else if (channel == c->channel)
		c->channel = 0;
	if (r != AMQP_STATUS_OK)
		return connection_failed(c, r, "acknowledging a channel close");
	return status_for_reply(c->reply_code);
}

enum al_status conn_send(struct conn *c, amqp_method_number_t id, void *decoded)
{
	int r;

	if (c->dead || c->channel == 0)
		return fail(AL_INTERNAL, "internal error: no open channel");
	r = amqp_send_method(c->amqp, c->channel, id, decoded);
	if (r != AMQP_STATUS_OK)
		return connection_failed(c, r, "sending a request");
	return AL_OK;
}

/* An empty message for queue through the default exchange, with an
 * expiration (milliseconds, as text) rather than a queue argument, so that
 * it does not stay in a queue and the queues keep having no arguments.
 * Mandatory: the broker returns it if the queue is missing. */
static enum al_status publish_on(struct conn *c, amqp_channel_t channel, const char *queue,
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
		return fail(AL_INTERNAL, "internal error: no open channel");
	r = amqp_basic_publish(c->amqp, channel, amqp_empty_bytes, amqp_cstring_bytes(queue),
			       mandatory, 0, &props, amqp_empty_bytes);
	if (r != AMQP_STATUS_OK)
		return connection_failed(c, r, doing);
	/* The channel is in confirm mode: this is the publish's tag. */
	if (channel == c->channel)
		c->published++;
	return AL_OK;
}

static enum al_status publish_expiring(struct conn *c, const char *queue, bool mandatory,
				       const char *expiration, const char *doing)
{
	return publish_on(c, c->channel, queue, mandatory, expiration, NULL, doing);
}

enum al_status conn_publish_probe(struct conn *c, const char *queue)
{
	/* "0": a probe never stays anywhere. */
	return publish_expiring(c, queue, true, "0", "probing a queue");
}

/* The next method for the channel, waiting at most `wait` seconds
 * (0: only what has already arrived). *none is set if nothing came. */
/* Far from the ids conn_reset_channel cycles through (1..1000). */
#define NOTIFY_CHANNEL 1001

static void ack_delivery(struct conn *c, uint64_t tag)
{
	amqp_basic_ack_t ack = {.delivery_tag = tag};

	amqp_send_method(c->amqp, c->notify_channel, AMQP_BASIC_ACK_METHOD, &ack);
}

/* Not "0": RabbitMQ 4.3 drops such a message even with a consumer ready
 * (3.10 and 4.0 hand it over). A second is long enough to reach a waiter,
 * short enough that one arriving later wakes for nothing at most once. */
#define NOTICE_EXPIRATION "1000"

/* The type of conn_unsubscribe's message that passes the turn. */
#define TURN_TYPE "amqplock.turn"

/* A probe's expiration: "0" (conn_publish_probe). */
static bool is_probe(const amqp_basic_properties_t *p)
{
	return (p->_flags & AMQP_BASIC_EXPIRATION_FLAG) && p->expiration.len == 1 &&
	       *(const char *)p->expiration.bytes == '0';
}

static bool is_turn(const amqp_basic_properties_t *p)
{
	return (p->_flags & AMQP_BASIC_TYPE_FLAG) && p->type.len == strlen(TURN_TYPE) &&
	       memcmp(p->type.bytes, TURN_TYPE, p->type.len) == 0;
}

/* A frame on the notification channel, read while waiting for another.
 * Whatever is delivered says that we are first in line. A delivery is a
 * wake-up unless its header says it is a newcomer's probe of the line
 * (RabbitMQ 3.10 and 4.0 hand an expiring message to a ready consumer) or
 * the turn passed on: those are acknowledged at once, so that they hold
 * nothing up. */
static void take_notification(struct conn *c, const amqp_frame_t *f)
{
	amqp_channel_close_ok_t ok = {0};

	if (f->frame_type == AMQP_FRAME_HEADER && c->delivering) {
		const amqp_basic_properties_t *p = f->payload.properties.decoded;

		c->first_in_line = true;
		if (is_probe(p) || is_turn(p)) {
			ack_delivery(c, c->delivering);
		} else {
			c->wake_tag = c->delivering;
		}
		c->delivering = 0;
	}
	if (f->frame_type != AMQP_FRAME_METHOD)
		return;
	if (f->payload.method.id == AMQP_BASIC_DELIVER_METHOD) {
		c->delivering = ((amqp_basic_deliver_t *)f->payload.method.decoded)->delivery_tag;
	} else if (f->payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
		/* Refused (say, by permissions): waiting falls back to polling. */
		amqp_send_method(c->amqp, c->notify_channel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
		c->notify_channel = 0;
		trace("notifications refused; polling instead");
	} else if (f->payload.method.id == AMQP_BASIC_CANCEL_METHOD) {
		/* The line was deleted under us: no wake-up will come. */
		trace("the line was deleted; polling instead");
		conn_unsubscribe(c, NULL);
	}
}

/* Far from the main channel's ids and the line's. */
#define LEASE_CHANNEL 1002

/* A frame on the lease channel, read while waiting on the main channel:
 * its open-ok is dropped, its answer kept for conn_lease_expect. */
static enum al_status take_lease_answer(struct conn *c, const amqp_frame_t *f)
{
	enum al_status st;

	if (f->frame_type != AMQP_FRAME_METHOD)
		return AL_OK;
	if (f->payload.method.id == AMQP_CHANNEL_OPEN_OK_METHOD && c->lease_opening) {
		c->lease_opening = false;
		return AL_OK;
	}
	c->lease_answer.id = f->payload.method.id;
	if (f->payload.method.id != AMQP_CHANNEL_CLOSE_METHOD)
		return AL_OK;
	/* The main channel's reply code is not ours to change: it may
	 * hold a refusal read just before. */
	{
		uint16_t code = c->reply_code;
		char text[sizeof(c->reply_text)];

		memcpy(text, c->reply_text, sizeof(text));
		st = channel_closed(c, c->lease_channel, f->payload.method.decoded);
		c->lease_answer.code = c->reply_code;
		memcpy(c->lease_answer.text, c->reply_text, sizeof(text));
		c->reply_code = code;
		memcpy(c->reply_text, text, sizeof(text));
	}
	return st == AL_CONNECTION || c->dead ? st : AL_OK;
}

/* Whether a wait that runs out is the connection's end (NO_REPLY_FAILS)
 * or only *none (NO_REPLY_TOLD). */
enum silence { NO_REPLY_FAILS, NO_REPLY_TOLD };

/* The next method for `channel`, waiting at most `wait` seconds in all
 * and never past the connection's limit (0: only what has already
 * arrived). *none is set if nothing came, or if the wait ran out and
 * silence is NO_REPLY_TOLD. */
static enum al_status next_method_after(struct conn *c, amqp_channel_t channel, double wait,
					enum silence silence, amqp_method_t *m, bool *none)
{
	struct deadline by = deadline_within(c->limit, wait);
	amqp_frame_t f;
	struct timeval tv;
	int r;

	*none = false;
	if (c->dead || channel == 0)
		return fail(AL_INTERNAL, "internal error: no open channel");
	amqp_maybe_release_buffers(c->amqp);
	for (;;) {
		/* Waiting inside the library also sends our heartbeats. Late
		 * frames of other channels do not extend the wait. */
		tv = wait > 0 ? to_timeval(deadline_left(by)) : (struct timeval){0, 0};
		r = amqp_simple_wait_frame_noblock(c->amqp, &f, &tv);
		if (r == AMQP_STATUS_TIMEOUT && wait <= 0) {
			*none = true;
			return AL_OK;
		}
		/* The library waits in whole milliseconds, rounded down: a
		 * timeout a little early is no timeout yet. */
		if (r == AMQP_STATUS_TIMEOUT && !deadline_passed(by))
			continue;
		if (r == AMQP_STATUS_TIMEOUT && silence == NO_REPLY_TOLD) {
			*none = true;
			return AL_OK;
		}
		if (r != AMQP_STATUS_OK)
			return connection_failed(c, r, "waiting for a reply");
		if (c->notify_channel && f.channel == c->notify_channel &&
		    channel != c->notify_channel) {
			take_notification(c, &f);
			continue;
		}
		if (c->lease_channel && f.channel == c->lease_channel &&
		    channel != c->lease_channel) {
			if (take_lease_answer(c, &f) != AL_OK)
				return AL_CONNECTION;
			continue;
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
		if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD &&
		    channel == c->notify_channel) {
			take_notification(c, &f);
			return AL_BROKER;
		}
		if (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD)
			return channel_closed(c, channel, f.payload.method.decoded);
		if (f.payload.method.id == AMQP_CHANNEL_OPEN_OK_METHOD &&
		    channel == c->lease_channel && c->lease_opening) {
			c->lease_opening = false;
			continue;
		}
		*m = f.payload.method;
		return AL_OK;
	}
}

static enum al_status next_method_on(struct conn *c, amqp_channel_t channel, double wait,
				     amqp_method_t *m, bool *none)
{
	return next_method_after(c, channel, wait, NO_REPLY_FAILS, m, none);
}

static enum al_status next_method(struct conn *c, double wait, amqp_method_t *m, bool *none)
{
	return next_method_on(c, c->channel, wait, m, none);
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
		return fail(AL_CONNECTION, "connection to %s is closed", c->where);
	amqp_maybe_release_buffers(c->amqp);
	for (;;) {
		r = amqp_simple_wait_frame_noblock(c->amqp, &f, &none);
		if (r == AMQP_STATUS_TIMEOUT)
			return AL_OK;
		if (r != AMQP_STATUS_OK)
			return connection_failed(c, r, "keeping the connection open");
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

enum al_status conn_expect_within(struct conn *c, amqp_method_number_t expect, double wait,
				  amqp_method_t *m)
{
	bool none;
	enum al_status st = next_method(c, wait, m, &none);

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

enum al_status conn_lease_send(struct conn *c, amqp_method_number_t id, void *decoded)
{
	amqp_channel_open_t open = {0};
	int r;

	if (c->dead)
		return fail(AL_INTERNAL, "internal error: connection is closed");
	c->lease_answer.id = 0;
	/* Opened and used in one go: the broker takes the channel's frames
	 * in order, the open first. */
	if (!c->lease_channel) {
		c->lease_channel = LEASE_CHANNEL;
		c->lease_opening = true;
		if ((r = amqp_send_method(c->amqp, c->lease_channel, AMQP_CHANNEL_OPEN_METHOD,
					  &open)) != AMQP_STATUS_OK)
			return connection_failed(c, r, "opening the lease's channel");
	}
	if ((r = amqp_send_method(c->amqp, c->lease_channel, id, decoded)) != AMQP_STATUS_OK)
		return connection_failed(c, r, "sending a request");
	return AL_OK;
}

enum al_status conn_lease_expect(struct conn *c, amqp_method_number_t expect, double wait)
{
	enum al_status st;
	amqp_method_t m;
	bool none;

	if (c->lease_answer.id == 0 && c->lease_channel && !c->dead) {
		st = next_method_on(c, c->lease_channel, wait, &m, &none);
		if (st != AL_OK)
			return st; /* refused: reply_code is set, the channel closed */
		c->lease_answer.id = m.id;
	} else if (c->lease_answer.id == AMQP_CHANNEL_CLOSE_METHOD) {
		c->reply_code = c->lease_answer.code;
		memcpy(c->reply_text, c->lease_answer.text, sizeof(c->reply_text));
		c->lease_answer.id = 0;
		return status_for_reply(c->reply_code);
	} else if (c->lease_answer.id == 0) {
		return fail(AL_CONNECTION, "connection to %s is closed", c->where);
	}
	if (c->lease_answer.id != expect) {
		c->dead = true;
		return fail(AL_BROKER, "unexpected reply from the broker at %s (method 0x%08x)",
			    c->where, (unsigned)c->lease_answer.id);
	}
	c->lease_answer.id = 0;
	return AL_OK;
}

enum al_status conn_subscribe(struct conn *c, const char *queue)
{
	/* Durable (RabbitMQ 4.3 refuses new transient shared queues), gone
	 * a minute after its last consumer, and a line: the broker gives
	 * its messages to one consumer at a time, the oldest, and passes
	 * them on to the next when that one leaves (in the order they came)
	 * or dies, unacknowledged ones included. */
	amqp_table_entry_t arguments[] = {
		{.key = amqp_cstring_bytes("x-expires"),
		 .value = {.kind = AMQP_FIELD_KIND_I32, .value.i32 = 60000}},
		{.key = amqp_cstring_bytes("x-single-active-consumer"),
		 .value = {.kind = AMQP_FIELD_KIND_BOOLEAN, .value.boolean = 1}},
	};
	amqp_channel_open_t open = {0};
	/* One wake-up at a time: the next waits for this one's answer. */
	amqp_basic_qos_t qos = {.prefetch_count = 1};
	amqp_queue_declare_t declare = {.queue = amqp_cstring_bytes(queue),
					.durable = 1,
					.arguments = {.num_entries = 2, .entries = arguments}};
	amqp_basic_consume_t consume = {.queue = amqp_cstring_bytes(queue)};
	static const amqp_method_number_t replies[] = {
		AMQP_CHANNEL_OPEN_OK_METHOD, AMQP_BASIC_QOS_OK_METHOD, AMQP_QUEUE_DECLARE_OK_METHOD,
		AMQP_BASIC_CONSUME_OK_METHOD};
	amqp_method_t m;
	bool none;
	size_t i;
	int r;

	if (c->dead)
		return AL_CONNECTION;
	if (c->notify_channel)
		return AL_OK;
	c->notify_channel = NOTIFY_CHANNEL;
	c->first_in_line = false;
	c->delivering = c->wake_tag = 0;
	/* One round trip for the four. */
	if ((r = amqp_send_method(c->amqp, c->notify_channel, AMQP_CHANNEL_OPEN_METHOD, &open)) ||
	    (r = amqp_send_method(c->amqp, c->notify_channel, AMQP_BASIC_QOS_METHOD, &qos)) ||
	    (r = amqp_send_method(c->amqp, c->notify_channel, AMQP_QUEUE_DECLARE_METHOD,
				  &declare)) ||
	    (r = amqp_send_method(c->amqp, c->notify_channel, AMQP_BASIC_CONSUME_METHOD, &consume)))
		return connection_failed(c, r, "subscribing to releases");
	for (i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
		enum al_status st = next_method_on(c, c->notify_channel, c->rpc_timeout, &m, &none);

		if (st != AL_OK || m.id != replies[i])
			return c->dead ? st : AL_BROKER; /* polling will do */
		/* Nobody consumed before us: we are first. */
		if (m.id == AMQP_QUEUE_DECLARE_OK_METHOD)
			c->first_in_line =
				((amqp_queue_declare_ok_t *)m.decoded)->consumer_count == 0;
	}
	trace("waiting on %s", queue);
	return AL_OK;
}

void conn_wake_done(struct conn *c)
{
	if (!c->dead && c->notify_channel && c->wake_tag)
		ack_delivery(c, c->wake_tag);
	c->wake_tag = 0;
}

void conn_unsubscribe(struct conn *c, const char *turn_to)
{
	amqp_channel_close_t close = {.reply_code = AMQP_REPLY_SUCCESS};
	bool first = c->first_in_line;

	c->first_in_line = false;
	c->delivering = c->wake_tag = 0;
	if (c->dead || !c->notify_channel)
		return;
	/* On this channel, which is not in confirm mode: no answer comes
	 * to be read later. Delivered to us before the close, it goes back
	 * to the line with it. */
	if (first && turn_to)
		publish_on(c, c->notify_channel, turn_to, false, NOTICE_EXPIRATION, TURN_TYPE,
			   "passing the turn");
	/* Its close-ok, like any late frame, is skipped by next_method_on. */
	amqp_send_method(c->amqp, c->notify_channel, AMQP_CHANNEL_CLOSE_METHOD, &close);
	c->notify_channel = 0;
}

enum al_status conn_notify(struct conn *c, const char *queue)
{
	return publish_expiring(c, queue, false, NOTICE_EXPIRATION, "waking a waiter");
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
		return fail(AL_CONNECTION, "connection to %s is closed", c->where);
	if ((r = amqp_send_method(c->amqp, side, AMQP_CHANNEL_OPEN_METHOD, &open)) ||
	    (r = amqp_send_method(c->amqp, side, id, decoded)))
		return connection_failed(c, r, doing);
	c->reply_code = 0;
	st = next_method_on(c, side, c->rpc_timeout, &m, &none);
	if (st == AL_OK && m.id == AMQP_CHANNEL_OPEN_OK_METHOD)
		st = next_method_on(c, side, c->rpc_timeout, &m, &none);
	if (st == AL_OK && m.id == ok) {
		/* Its close-ok, like any late frame, is skipped. */
		if ((r = amqp_send_method(c->amqp, side, AMQP_CHANNEL_CLOSE_METHOD, &close)))
			return connection_failed(c, r, doing);
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

enum al_status conn_reset_channel(struct conn *c)
{
	amqp_channel_open_t open = {0};
	amqp_confirm_select_t confirm = {0};
	amqp_method_t m;
	enum al_status st;

	if (c->dead)
		return fail(AL_INTERNAL, "internal error: connection is closed");
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

/* A TLS socket that checks the broker's certificate against the CA
 * bundle and its host name, unless the user said --insecure. */
static enum al_status tls_socket(struct conn *c, const struct conn_opts *o, amqp_socket_t **out)
{
	const char *ca = o->cacert;
	amqp_socket_t *sock = amqp_ssl_socket_new(c->amqp);
	char shown[64];

	if (!sock)
		return fail(AL_CONNECTION, "cannot set up TLS");
	amqp_ssl_socket_set_verify_peer(sock, !o->insecure);
	amqp_ssl_socket_set_verify_hostname(sock, !o->insecure);
	if (!ca && access(SYSTEM_CA_BUNDLE, R_OK) == 0)
		ca = SYSTEM_CA_BUNDLE;
	if (ca && amqp_ssl_socket_set_cacert(sock, ca) != AMQP_STATUS_OK)
		return fail(AL_USAGE, "cannot load CA certificates from %s",
			    quote_arg(ca, shown, sizeof(shown)));
	if (o->cert &&
	    amqp_ssl_socket_set_key(sock, o->cert, o->key ? o->key : o->cert) != AMQP_STATUS_OK)
		return fail(AL_USAGE, "cannot load the client certificate %s and its key",
			    quote_arg(o->cert, shown, sizeof(shown)));
	*out = sock;
	return AL_OK;
}

/* How a connect or login timed out, for its message: the connect timeout
 * ran out, or the caller's whole wait did. */
static const char *timed_out_after(const struct conn *c, const struct conn_opts *o, char *buf,
				   size_t size)
{
	if (deadline_passed(c->limit))
		return ", and the time to wait is up";
	snprintf(buf, size, " (waited %g s)", o->connect_timeout);
	return buf;
}

static enum al_status open_socket(struct conn *c, const struct conn_opts *o,
				  const struct amqp_connection_info *info, struct deadline by)
{
	amqp_socket_t *sock = NULL;
	struct timeval tv;
	char shown[64], text[64];
	int r;

	if (info->ssl) {
		enum al_status st = tls_socket(c, o, &sock);
		if (st != AL_OK)
			return st;
	} else {
		sock = amqp_tcp_socket_new(c->amqp);
		if (!sock)
			return fail(AL_CONNECTION, "cannot create a socket");
	}
	tv = to_timeval(deadline_left(by));
	errno = 0;
	r = amqp_socket_open_noblock(sock, info->host, info->port, &tv);
	if (r == AMQP_STATUS_OK)
		return AL_OK;
	if (r == AMQP_STATUS_TIMEOUT)
		return fail(AL_CONNECTION, "cannot connect to %s: timed out%s", c->where,
			    timed_out_after(c, o, text, sizeof(text)));
	if (r == AMQP_STATUS_SSL_PEER_VERIFY_FAILED)
		return fail(AL_CONNECTION,
			    "TLS with %s failed: its certificate is not signed by a trusted CA "
			    "(see --cacert)",
			    c->where);
	if (r == AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED)
		return fail(AL_CONNECTION,
			    "TLS with %s failed: its certificate does not name the host %s",
			    c->where, quote_arg(info->host, shown, sizeof(shown)));
	if (r == AMQP_STATUS_SSL_ERROR || r == AMQP_STATUS_SSL_CONNECTION_FAILED)
		return fail(AL_CONNECTION,
			    "TLS with %s failed (not a TLS port, or the broker refused the "
			    "client certificate?)",
			    c->where);
	/* rabbitmq-c leaves errno at EINPROGRESS when the non-blocking
	 * connect itself failed; it did not keep the real reason. */
	if (r == AMQP_STATUS_SOCKET_ERROR && errno && errno != EINPROGRESS)
		return fail(AL_CONNECTION, "cannot connect to %s: %s", c->where, strerror(errno));
	if (r == AMQP_STATUS_SOCKET_ERROR)
		return fail(AL_CONNECTION,
			    "cannot connect to %s: connection refused or unreachable", c->where);
	return fail(AL_CONNECTION, "cannot connect to %s: %s", c->where, amqp_error_string2(r));
}

static amqp_table_entry_t utf8_entry(const char *key, const char *value)
{
	return (amqp_table_entry_t){
		.key = amqp_cstring_bytes(key),
		.value = {.kind = AMQP_FIELD_KIND_UTF8,
			  .value.bytes = amqp_cstring_bytes(value ? value : "")}};
}

static enum al_status login(struct conn *c, const struct conn_opts *o,
			    const struct amqp_connection_info *info, struct deadline by)
{
	struct timeval tv = to_timeval(deadline_left(by));
	amqp_rpc_reply_t r;
	char user[64], vhost[64], waited[64];

	/* With the connection.blocked capability a broker under a resource
	 * alarm says so when we publish, instead of going silent; with
	 * consumer_cancel_notify it says so when the line we wait in is
	 * deleted, instead of leaving us in no line at all. The library
	 * merges these with its own capabilities. */
	amqp_table_entry_t capability[] = {
		{.key = amqp_cstring_bytes("connection.blocked"),
		 .value = {.kind = AMQP_FIELD_KIND_BOOLEAN, .value.boolean = 1}},
		{.key = amqp_cstring_bytes("consumer_cancel_notify"),
		 .value = {.kind = AMQP_FIELD_KIND_BOOLEAN, .value.boolean = 1}},
	};
	/* Ours win over the library's own (its "version" is its own). */
	amqp_table_entry_t props[] = {
		utf8_entry("product", "amqplock"),
		{.key = amqp_cstring_bytes("capabilities"),
		 .value = {.kind = AMQP_FIELD_KIND_TABLE,
			   .value.table = {.num_entries = 2, .entries = capability}}},
		utf8_entry("connection_name", o->who.name),
		utf8_entry("version", o->who.version),
		utf8_entry("host", o->who.host),
		utf8_entry("user", o->who.user),
		{.key = amqp_cstring_bytes("pid"),
		 .value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = o->who.pid}},
	};
	/* Without an identity (no name given), product and capabilities. */
	amqp_table_t table = {.num_entries =
				      o->who.name[0] ? (int)(sizeof(props) / sizeof(props[0])) : 2,
			      .entries = props};

	quote_arg(info->user, user, sizeof(user));
	amqp_set_handshake_timeout(c->amqp, &tv);
	r = amqp_login_with_properties(c->amqp, info->vhost, 0, FRAME_MAX, (int)o->heartbeat,
				       &table, AMQP_SASL_METHOD_PLAIN, info->user, info->password);
	if (r.reply_type == AMQP_RESPONSE_NORMAL)
		return AL_OK;
	c->dead = true;
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
	    r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
		amqp_connection_close_t *m = r.reply.decoded;
		char text[128];

		return fail(status_for_reply(m->reply_code) == AL_ACCESS ? AL_ACCESS : AL_BROKER,
			    "login to %s as %s (vhost %s) refused: %s", c->where, user,
			    quote_arg(info->vhost, vhost, sizeof(vhost)),
			    printable(text, sizeof(text), m->reply_text.bytes, m->reply_text.len));
	}
	if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
		if (r.library_error == AMQP_STATUS_TIMEOUT)
			return fail(AL_CONNECTION, "no answer from %s while logging in%s", c->where,
				    timed_out_after(c, o, waited, sizeof(waited)));
		/* RabbitMQ drops the socket on a bad password unless the client
		 * asked for a close method; either way it is a refusal. */
		if (r.library_error == AMQP_STATUS_CONNECTION_CLOSED ||
		    r.library_error == AMQP_STATUS_SOCKET_CLOSED)
			return fail(AL_ACCESS,
				    "login to %s as %s refused (wrong user or password?)", c->where,
				    user);
		/* With TLS 1.3 the broker checks a client certificate after
		 * the handshake, so its refusal arrives here. */
		if (r.library_error == AMQP_STATUS_SSL_ERROR)
			return fail(AL_CONNECTION,
				    "TLS with %s failed while logging in (client certificate "
				    "refused?)",
				    c->where);
		return fail(AL_CONNECTION, "cannot log in to %s: %s", c->where,
			    amqp_error_string2(r.library_error));
	}
	return fail(AL_BROKER, "cannot log in to %s", c->where);
}

/* The broker's version as parse_version gives it, from the "version"
 * of its connection.start; 0 if it has none we can read. */
static unsigned long server_version(const struct conn *c)
{
	amqp_table_t *props = amqp_get_server_properties(c->amqp);
	unsigned long version;
	int i;

	for (i = 0; props && i < props->num_entries; i++) {
		const amqp_table_entry_t *e = &props->entries[i];

		if (e->key.len == strlen("version") &&
		    memcmp(e->key.bytes, "version", e->key.len) == 0 &&
		    (e->value.kind == AMQP_FIELD_KIND_UTF8 ||
		     e->value.kind == AMQP_FIELD_KIND_BYTES) &&
		    !parse_version(e->value.value.bytes.bytes, e->value.value.bytes.len, &version))
			return version;
	}
	return 0;
}

/* One try: the nth broker of the list, as conn_check_opts resolved it,
 * within the connect timeout and before `by`. */
static enum al_status open_one(struct conn *c, const struct conn_opts *o, unsigned nth,
			       struct deadline by)
{
	struct deadline connected = deadline_within(by, o->connect_timeout);
	const struct amqp_connection_info *info;
	struct timeval rpc;
	char host[128];
	enum al_status st;

	memset(c, 0, sizeof(*c));
	c->rpc_timeout = o->rpc_timeout;
	c->limit = by;
	if (nth >= o->brokers)
		return fail(AL_INTERNAL, "internal error: the broker URLs were not checked");
	if (o->password_file && !o->password_read)
		return fail(AL_INTERNAL, "internal error: the password file was not read");
	info = &o->broker[nth].info;
	printable(host, sizeof(host), info->host, strlen(info->host));
	snprintf(c->where, sizeof(c->where), "%s:%d", host, info->port);
	c->amqp = amqp_new_connection();
	if (!c->amqp)
		return fail(AL_INTERNAL, "out of memory");
	trace("connecting to %s", c->where);
	st = open_socket(c, o, info, connected);
	if (st == AL_OK)
		st = login(c, o, info, connected);
	if (st == AL_OK) {
		c->heartbeat = (unsigned)amqp_get_heartbeat(c->amqp);
		c->version = server_version(c);
		rpc = to_timeval(o->rpc_timeout);
		amqp_set_rpc_timeout(c->amqp, &rpc);
		st = conn_reset_channel(c);
	}
	if (st != AL_OK)
		c->dead = true;
	else
		trace("connected, heartbeat %u s", c->heartbeat);
	return st;
}

/* The brokers are tried in the order given (a cluster's clients then
 * agree on a first choice), each within its own --connect-timeout. */
enum al_status conn_open(struct conn *c, const struct conn_opts *o, struct deadline by)
{
	unsigned n = o->brokers, i;
	enum al_status st;

	for (i = 0;; i++) {
		st = open_one(c, o, i, by);
		/* Only a broker that cannot be reached sends us on to the next:
		 * a login refused by one would be refused by the others. */
		if (st != AL_CONNECTION || i + 1 >= n || deadline_passed(by))
			break;
		trace("%s; trying the next broker", status_message());
		status_clear();
		conn_close(c);
	}
	if (st == AL_CONNECTION && n > 1)
		fail_context(AL_CONNECTION, "none of the %u brokers answered; the last: ", n);
	return st;
}

void conn_close(struct conn *c)
{
	if (!c->amqp)
		return;
	if (!c->dead) {
		/* Polite but brief: a broker that blocks us for a resource
		 * alarm (after a release's notification) would not answer,
		 * and closing the socket ends the connection anyway. */
		struct timeval bye = to_timeval(c->rpc_timeout < 1 ? c->rpc_timeout : 1);

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
