/* Getting a connection, once conn_opts.c has checked the options: the
 * brokers tried in order, the socket, TLS, the login with the identity
 * the broker shows, and the first channel. What is done with a
 * connection once open is conn.c's. */
#include "conn.h"

#include "clock.h"
#include "parse.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* rabbitmq-c 0.11 loads no trust store of its own for amqps. */
#define SYSTEM_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define FRAME_MAX        131072

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
			    parse_quote_arg(ca, shown, sizeof(shown)));
	if (o->cert &&
	    amqp_ssl_socket_set_key(sock, o->cert, o->key ? o->key : o->cert) != AMQP_STATUS_OK)
		return fail(AL_USAGE, "cannot load the client certificate %s and its key",
			    parse_quote_arg(o->cert, shown, sizeof(shown)));
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
	tv = timeval_of(deadline_left(by));
	errno = 0;
	r = amqp_socket_open_noblock(sock, info->host, info->port, &tv);
	if (r == AMQP_STATUS_OK)
		return AL_OK;
	/* Nothing listening, nothing answering, a reset: a broker away,
	 * which waiting may bring back. TLS refused and a host name that does
	 * not resolve stay as they are (set below). */
	c->away = r == AMQP_STATUS_TIMEOUT || r == AMQP_STATUS_SOCKET_ERROR ||
		  r == AMQP_STATUS_SOCKET_CLOSED || r == AMQP_STATUS_CONNECTION_CLOSED;
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
			    c->where, parse_quote_arg(info->host, shown, sizeof(shown)));
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

/* Whether the broker has greeted us (its connection.start, whose server
 * properties rabbitmq-c keeps). */
static bool greeted(const struct conn *c)
{
	amqp_table_t *props = amqp_get_server_properties(c->amqp);

	return props && props->num_entries > 0;
}

/* What a refused login most likely means: a URL with a user but no
 * password (and no --password-file), which logs in with amqp_parse_url's
 * default "guest"; otherwise `otherwise`. */
static const char *refusal_hint(const struct conn_opts *o, const struct broker_url *b,
				const char *otherwise)
{
	if (b->no_password && !o->password_read)
		return " (the URL gives a user but no password: put it in a --password-file)";
	return otherwise;
}

/* How long the look at what answered instead of a broker may take. */
#define WHO_ANSWERS_WAIT 1.0

/* What answers at host:port, where no AMQP broker greeted us: after the
 * AMQP header and an empty line, an HTTP server says "HTTP/" (400), a
 * TLS server sends an alert (0x15 0x03). One plain connection, within
 * WHO_ANSWERS_WAIT; "" if it tells neither. */
static const char *who_answers(const char *host, int port)
{
	static const char hello[] = "AMQP\x00\x00\x09\x01\r\n\r\n";
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	struct deadline by = deadline_in(WHO_ANSWERS_WAIT);
	unsigned char got[8] = {0};
	char service[16];
	struct pollfd p;
	ssize_t n = -1;
	int fd = -1;

	snprintf(service, sizeof(service), "%d", port);
	if (getaddrinfo(host, service, &hints, &ai) != 0 || !ai)
		return "";
	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	p = (struct pollfd){.fd = fd, .events = POLLOUT};
	if (fd >= 0 && (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) &&
	    poll(&p, 1, poll_ms(deadline_left(by))) == 1 && (p.revents & POLLOUT) &&
	    send(fd, hello, sizeof(hello) - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof(hello) - 1)) {
		p = (struct pollfd){.fd = fd, .events = POLLIN};
		if (poll(&p, 1, poll_ms(deadline_left(by))) == 1)
			n = recv(fd, got, sizeof(got), 0);
	}
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	if (n >= 5 && memcmp(got, "HTTP/", 5) == 0)
		return "an HTTP server answers there (the management API's port?): give the "
		       "AMQP port, 5672 by default";
	if (n >= 2 && got[0] == 0x15 && got[1] == 0x03)
		return "a TLS server answers there: use amqps:// for it, or give the plain "
		       "AMQP port, 5672 by default";
	return "";
}

/* What to say of a server that does not speak AMQP at host:port. */
static const char *not_amqp(const char *host, int port)
{
	const char *who = who_answers(host, port);

	return *who ? who
		    : "the management API's port, or a TLS port with amqp://? give the AMQP "
		      "port (5672 by default, 5671 with amqps://)";
}

static enum al_status login(struct conn *c, struct conn_opts *o, const struct broker_url *b,
			    struct deadline by)
{
	const struct amqp_connection_info *info = &b->info;
	struct timeval tv = timeval_of(deadline_left(by));
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
		utf8_entry("label", o->who.label ? o->who.label : ""),
	};
	/* Without an identity (no name given), product and capabilities. */
	amqp_table_t table = {.num_entries =
				      o->who.name[0] ? (int)(sizeof(props) / sizeof(props[0])) : 2,
			      .entries = props};

	parse_quote_arg(info->user, user, sizeof(user));
	amqp_set_handshake_timeout(c->amqp, &tv);
	r = amqp_login_with_properties(c->amqp, info->vhost, 0, FRAME_MAX, (int)o->heartbeat,
				       &table, AMQP_SASL_METHOD_PLAIN, info->user, info->password);
	if (r.reply_type == AMQP_RESPONSE_NORMAL) {
		o->logged_in = true;
		return AL_OK;
	}
	c->dead = true;
	if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
	    r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
		amqp_connection_close_t *m = r.reply.decoded;
		char text[128];

		/* A node shutting down closes logins too. */
		if (m->reply_code == AMQP_CONNECTION_FORCED) {
			c->away = true;
			return fail(AL_CONNECTION, "the broker at %s closed the connection: %s",
				    c->where,
				    parse_printable_copy(text, sizeof(text), m->reply_text.bytes,
							 m->reply_text.len));
		}
		return fail(conn_status_for_reply(m->reply_code) == AL_ACCESS ? AL_ACCESS
									      : AL_BROKER,
			    "login to %s as %s (vhost %s) refused: %s%s", c->where, user,
			    parse_quote_arg(info->vhost, vhost, sizeof(vhost)),
			    parse_printable_copy(text, sizeof(text), m->reply_text.bytes,
						 m->reply_text.len),
			    refusal_hint(o, b, ""));
	}
	if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
		/* A login cut short or unanswered: a broker going down or not
		 * up yet. */
		c->away = r.library_error != AMQP_STATUS_SSL_ERROR;
		if (r.library_error == AMQP_STATUS_TIMEOUT && greeted(c))
			return fail(AL_CONNECTION, "no answer from %s while logging in%s", c->where,
				    timed_out_after(c, o, waited, sizeof(waited)));
		/* Silent, or closed, before the broker's greeting
		 * (connection.start, whose properties we keep): no AMQP broker
		 * listens there. The classic mistakes are the management port
		 * (an HTTP server, which waits for a request line) and amqp://
		 * to a TLS port (an alert, then the socket closed): a second
		 * look says which. */
		if (!greeted(c))
			return fail(AL_CONNECTION,
				    "the server at %s does not speak AMQP (%s before any AMQP "
				    "greeting): %s",
				    c->where,
				    r.library_error == AMQP_STATUS_TIMEOUT
					    ? "silent"
					    : amqp_error_string2(r.library_error),
				    not_amqp(info->host, info->port));
		/* RabbitMQ drops the socket on a bad password unless the client
		 * asked for a close method; either way it is a refusal. But a
		 * node starting up drops logins as well (RabbitMQ 4.3 before
		 * its users are loaded): once these credentials have worked in
		 * this run, it is the broker not up yet, tried again until the
		 * caller's deadline. */
		if ((r.library_error == AMQP_STATUS_CONNECTION_CLOSED ||
		     r.library_error == AMQP_STATUS_SOCKET_CLOSED) &&
		    o->logged_in)
			return fail(AL_CONNECTION,
				    "login to %s as %s cut short (the broker starting up?)",
				    c->where, user);
		if (r.library_error == AMQP_STATUS_CONNECTION_CLOSED ||
		    r.library_error == AMQP_STATUS_SOCKET_CLOSED)
			return fail(AL_ACCESS, "login to %s as %s refused%s", c->where, user,
				    refusal_hint(o, b, " (wrong user or password?)"));
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
static enum al_status open_one(struct conn *c, struct conn_opts *o, unsigned nth,
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
	parse_printable_copy(host, sizeof(host), info->host, strlen(info->host));
	snprintf(c->where, sizeof(c->where), "%s:%d", host, info->port);
	/* The login, as the broker checks a message's user_id against it
	 * (conn_send_note); longer than any queue name: never sent. */
	if (strlen(info->user) < sizeof(c->user))
		strcpy(c->user, info->user);
	c->amqp = amqp_new_connection();
	if (!c->amqp)
		return fail(AL_INTERNAL, "out of memory");
	trace("connecting to %s", c->where);
	st = open_socket(c, o, info, connected);
	if (st == AL_OK)
		st = login(c, o, &o->broker[nth], connected);
	if (st == AL_OK) {
		c->heartbeat = (unsigned)amqp_get_heartbeat(c->amqp);
		c->version = server_version(c);
		rpc = timeval_of(o->rpc_timeout);
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
enum al_status conn_open(struct conn *c, struct conn_opts *o, struct deadline by)
{
	unsigned n = o->brokers, i;
	enum al_status st;

	for (i = 0;; i++) {
		st = open_one(c, o, i, by);
		/* Only a broker that cannot be reached sends us on to the next:
		 * a login refused by one would be refused by the others. */
		/* (The next broker's own window, as open_one takes it: at
		 * the end of a wait, the last try's grace, if `by` has one.) */
		if (st != AL_CONNECTION || i + 1 >= n ||
		    deadline_passed(deadline_within(by, o->connect_timeout)))
			break;
		trace("%s; trying the next broker", status_message());
		status_clear();
		conn_close(c);
	}
	if (st == AL_CONNECTION && n > 1)
		fail_context(AL_CONNECTION, "none of the %u brokers answered; the last: ", n);
	return st;
}
