/* The one connection to the broker, transport only: opened by connect.c
 * (URL list, password file, TLS, login), used by conn.c (requests and
 * replies on the main channel, a parallel channel, a consumer channel;
 * heartbeats; a deadline on every wait; broker reply codes turned into
 * statuses). It knows queues and messages, not what the semaphore makes
 * of them. Never prints (except -v traces) and never exits. */
#ifndef AMQPLOCK_CONN_H
#define AMQPLOCK_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "amqp_compat.h"
#include "clock.h"
#include "status.h"
#include "url.h"

/* The longest password a --password-file may hold. */
#define CONN_PASSWORD_MAX 254

/* Who connects, in the client properties that the broker shows
 * (rabbitmqctl list_connections name client_properties, the management
 * UI's Connections): what an operator needs to tell who holds what. */
struct conn_identity {
	char name[200]; /* connection_name: command, semaphore, slot, host, pid */
	const char *version;
	char host[64];
	char user[64];       /* the local user running amqplock */
	const char *command; /* acquire, hold, ...: never the job's arguments */
	const char *label;   /* hold --label, $AMQPLOCK_LABEL; NULL: none */
	long pid;
};

struct conn_opts {
	const char *url;           /* amqp[s]://user:pass@host:port/vhost */
	const char *password_file; /* NULL: the password in the URL */
	const char *cacert;        /* amqps: CA bundle; NULL: the system's */
	const char *cert;          /* amqps: client certificate (PEM), or NULL */
	const char *key;           /* its private key; NULL: in the cert file */
	bool insecure;             /* amqps: skip certificate and host checks */
	unsigned heartbeat;        /* seconds; 0 disables heartbeats */
	double connect_timeout;    /* seconds for TCP connect + TLS + login */
	double rpc_timeout;        /* seconds for each reply from the broker */
	/* What conn_check_opts resolved from the above, once per run: every
	 * broker of url, checked and parsed (brokers 0: not yet), and
	 * password_file's first line (a pipe or FIFO can be read only once),
	 * which each broker's info.password then points to. They serve every
	 * connection of the run. Hold passwords: never printed. Filled, the
	 * struct is not to be copied by value (info points into it). */
	struct conn_identity who; /* empty name: none sent */
	unsigned brokers;
	struct broker_url broker[URL_BROKERS_MAX];
	bool password_read;
	/* A login has worked with these in this run: a login cut short
	 * since is the broker starting up, not a refusal (conn_open sets it). */
	bool logged_in;
	char password[CONN_PASSWORD_MAX + 2];
};

/* Why a consumer ended (conn_consumer.ended). */
enum conn_consumer_end {
	CONSUMER_LEFT,      /* conn_consume_end: its owner asked */
	CONSUMER_REFUSED,   /* the broker closed its channel */
	CONSUMER_CANCELLED, /* the broker cancelled it: its queue was deleted */
};

/* Who takes a consumer's deliveries (conn_consume). The hooks run inside
 * whatever conn_* call is reading when a delivery comes. */
struct conn_consumer {
	/* A message delivered, with its tag (for conn_ack) and header. */
	void (*delivered)(void *owner, uint64_t tag, const amqp_basic_properties_t *props);
	/* No more deliveries will come, and why. */
	void (*ended)(void *owner, enum conn_consumer_end why);
	void *owner;
};

/* An empty message to publish through the default exchange: to `queue`,
 * expiring after `expiration` milliseconds (text), of `type` (or NULL). */
struct conn_message {
	const char *queue, *expiration, *type;
};

struct conn {
	amqp_connection_state_t amqp;
	amqp_channel_t channel; /* open channel, 0 if none */
	uint64_t published;     /* last publisher-confirm tag on channel */
	uint64_t answered;      /* the last of them the broker confirmed (or nacked) */
	/* The channel of conn_consume's consumer (0: none), the delivery
	 * whose header is still to come (0: none), and its owner's hooks. */
	amqp_channel_t consumer_channel;
	/* The channel conn_listen used last (0: none yet). */
	amqp_channel_t listened;
	uint64_t delivering;
	bool delivering_again; /* its basic.deliver's redelivered */
	struct conn_consumer consumer;
	/* The parallel channel (conn_parallel_send; 0: not open), whether
	 * its open-ok is still to come, and its one answer when it came
	 * while we waited on the main channel (id 0: none yet; a refusal as
	 * AMQP_CHANNEL_CLOSE_METHOD with its reply code). */
	amqp_channel_t parallel_channel;
	bool parallel_opening;
	struct {
		amqp_method_number_t id;
		uint16_t code;
		char text[128];
	} parallel_answer;
	/* channels.c's, set when it opens the consumer or the parallel
	 * channel (NULL before): every frame read, while `reading` is waited
	 * on, is first offered to it, and *taken says whether it was one of
	 * its channels' (a status other than AL_OK ends the wait). conn.c
	 * reads every channel but stands below channels.c: it learns of the
	 * other channels' frames through this hook, never by calling up. The
	 * context is c itself, where channels.c keeps its state. */
	enum al_status (*beside)(struct conn *c, amqp_channel_t reading, const amqp_frame_t *f,
				 bool *taken);
	/* How many channels conn_side_call has used (their ids cycle). */
	unsigned side_calls;
	unsigned heartbeat; /* as negotiated */
	/* The broker's version (parse.h, parse_version); 0: unknown. */
	unsigned long version;
	double rpc_timeout;
	/* The end of the caller's whole wait (conn_open's `by`; never
	 * unless given): no reply is waited for past it (or past its grace,
	 * for one waited for from less than the grace before it:
	 * deadline_within), so a silent broker cannot stretch a wait that
	 * has a limit. */
	struct deadline limit;
	bool dead; /* the connection is unusable; only conn_close remains */
	/* Its last failure is one that the broker's absence explains (see
	 * conn_broker_away). */
	bool away;
	bool no_reply;     /* it died waiting for a reply that did not come */
	bool told_refused; /* -v has said that the broker refuses probes */
	/* The broker has confirmed a publish of ours on the main channel
	 * other than its first (conn_confirmed). */
	bool confirmed;
	/* Why the broker blocked it for a resource alarm (connection.blocked's
	 * reason; empty: it has not). */
	char blocked[64];
	/* The last channel-level refusal, set when conn_recv returns one. */
	uint16_t reply_code;
	/* The broker's reply code if it closed the connection, else 0. */
	uint16_t close_code;
	char reply_text[128];
	/* "host:port" for messages: never the password. */
	char where[256];
	/* The login, empty if too long to sign with (conn_send_note). */
	char user[256];
};

/* Checks and parses every URL of the list into o->broker (url.c) and
 * checks the TLS options, then reads the password file (once: a pipe or
 * FIFO cannot be read again) into o->password, all without touching the
 * network, so that usage errors come before connection errors. A FIFO is
 * waited on until its writer comes. */
enum al_status conn_check_opts(struct conn_opts *o);

/* Connects, logs in and opens a channel in confirm mode, to the first
 * broker of the list that answers, each within the connect timeout, all
 * before `by` (which then limits every reply on the connection: see
 * limit). Check the options with conn_check_opts first: a bad URL
 * anywhere in the list is then a usage error before any broker is tried,
 * and the brokers and password it resolved are used as they are, parsed
 * and read no more (main.c does, once per run). */
enum al_status conn_open(struct conn *c, struct conn_opts *o, struct deadline by);
/* From now on no reply is waited for past `by` (deadline_never(): each
 * reply within the reply timeout alone), replacing conn_open's limit:
 * for a connection that outlives the wait it was opened within. */
void conn_limit(struct conn *c, struct deadline by);

/* Whether the broker closed the connection with INTERNAL_ERROR (541): a
 * crash of its side of the connection, as RabbitMQ 3.10 has when a probe
 * or a declare meets a quorum queue being deleted. */
bool conn_broker_crashed(const struct conn *c);
/* Whether the broker closed the connection over a queue deleted under a
 * request of ours, which a new connection does not meet again: a crash
 * (conn_broker_crashed), or RESOURCE_ERROR (506), which RabbitMQ 4.3 says
 * when a publish finds its queue deleted between routing and delivery
 * ("failed to deliver message": a probe of an exclusive queue whose
 * owner just left). */
bool conn_broker_raced(const struct conn *c);

/* Whether the last failure to open c, or the loss of c, is one that the
 * broker's absence explains and waiting may end: nothing listening, the
 * connection refused, reset, lost or timed out, or closed by the broker
 * with CONNECTION_FORCED (a node shutting down). Not a login refused,
 * TLS, a name that does not resolve, nor a crash of the broker's side of
 * the connection (conn_broker_crashed). Still true once c is closed. */
bool conn_broker_away(const struct conn *c);

/* Why the broker blocked c for a resource alarm ("low on memory"), NULL
 * if it has not: it then reads nothing more of c until the alarm clears,
 * and c is dead (AL_BROKER). Blocked only at a publish: a connection that
 * publishes nothing never is. Still set once c is closed. */
const char *conn_blocked(const struct conn *c);

/* Whether the broker has confirmed a publish of ours on c other than the
 * channel's first: it took publishes then, so no alarm blocked c at the
 * time. The first proves nothing: under an alarm the broker takes one
 * empty message before it blocks, and RabbitMQ 4.3 may confirm it before
 * it says connection.blocked. Still set once c is closed. */
bool conn_confirmed(const struct conn *c);

/* After the broker blocked c (conn_blocked): waits until the alarm clears
 * (connection.unblocked), taking the broker's heartbeats and sending
 * ours. c stays unusable: what it asked before the block is answered only
 * now. AL_BUSY if `until` passes first, AL_CONNECTION if c is lost
 * meanwhile (conn_broker_away says whether to the broker's absence);
 * either way only conn_close remains. */
enum al_status conn_await_unblocked(struct conn *c, struct deadline until);

/* Closes politely (bounded by the reply deadline) and frees everything. */
void conn_close(struct conn *c);

/* Drops the connection without the close handshake, which a silent
 * broker would make us wait for. */
void conn_abort(struct conn *c);

/* conn_abort, and the TCP connection ends even where another process
 * (a child that inherited it) holds a copy of the socket: the broker, if
 * it still hears us, drops the connection's exclusive queues at once. */
void conn_hang_up(struct conn *c);

/* Replaces the channel with a fresh one in confirm mode. Needed after the
 * broker closed the channel (405, 404, ...); the close-ok has been sent. */
enum al_status conn_reset_channel(struct conn *c);

/* Sends one method on the channel without waiting. */
enum al_status conn_send(struct conn *c, amqp_method_number_t id, void *decoded);

/* Waits, within the reply deadline, for the next method on the channel.
 * Content frames (a basic.return's) are skipped. The method stays valid
 * until the next conn_* call. If the broker closed
 * the channel, the close-ok is sent, reply_code/reply_text are set and the
 * status for that code is returned without recording a message (the
 * caller knows what it was doing: see conn_refused). Connection-level
 * failures record their message and mark the connection dead. */
enum al_status conn_recv(struct conn *c, amqp_method_t *m);

/* Like conn_recv, but rpc_timeout without a reply is not the end of the
 * connection: *silence is set and the channel is left to the caller
 * (conn_reset_channel then shows whether the broker still answers). For
 * questions that one queue may leave unanswered (a quorum queue without
 * a leader) while the broker serves everything else. */
enum al_status conn_recv_or_silence(struct conn *c, amqp_method_t *m, bool *silence);

/* Like conn_recv, but takes only what has already arrived (and sends a
 * heartbeat if one is due); *got says whether *m was filled. For loops
 * that poll conn_fd themselves. */
enum al_status conn_poll(struct conn *c, amqp_method_t *m, bool *got);

/* conn_poll until nothing is left, ignoring what came: for a connection
 * that only needs its heartbeats taken care of. */
enum al_status conn_drain(struct conn *c);

/* Takes whatever has arrived and sends a heartbeat if one is due, needing
 * no open channel: keeps a connection (and its exclusive queues) alive
 * while nothing is asked of it. */
enum al_status conn_keepalive(struct conn *c);

/* The socket, for poll(2); -1 once the connection is dead. */
int conn_fd(const struct conn *c);

/* Whether the library has already read data that nobody has taken yet
 * (a wake-up that came with the last reply, say): poll(2) on conn_fd
 * would not say so. */
bool conn_buffered(const struct conn *c);

/* Sleeps until `until` or data from the broker, already read or not;
 * whether there is some. True at once on a dead connection: the next
 * read reports the loss (AL_CONNECTION). */
bool conn_wait_readable(const struct conn *c, struct deadline until);

/* Whether the socket has something to read now (poll(2), no wait). */
bool conn_readable(const struct conn *c);

/* conn_recv, then check that the method is `expect`. */
enum al_status conn_expect(struct conn *c, amqp_method_number_t expect, amqp_method_t *m);
/* conn_expect for a reply that the broker may take `wait` seconds to give
 * rather than the reply timeout (still no later than limit). */
enum al_status conn_expect_within(struct conn *c, amqp_method_number_t expect, double wait,
				  amqp_method_t *m);

/* One request at a time on a channel of its own, opened on first use
 * without a round trip of its own: the broker then works on it while it
 * works on the main channel's requests, rather than after them (a queue
 * declared beside another). Send it, read the main channel's replies,
 * then conn_parallel_expect its answer. */
enum al_status conn_parallel_send(struct conn *c, amqp_method_number_t id, void *decoded);
/* The answer to the request conn_parallel_send sent, waiting at most
 * `wait` seconds: AL_OK if it is `expect`; a refusal as conn_recv returns
 * one on the main channel (reply_code and reply_text set; the channel is
 * then closed, and reopened by the next conn_parallel_send). */
enum al_status conn_parallel_expect(struct conn *c, amqp_method_number_t expect, double wait);

/* Publishes an empty, mandatory, immediately expiring message to queue
 * through the default exchange: the broker answers basic.return (no such
 * queue) then basic.ack, or basic.ack alone. Tag: ++c->published. */
enum al_status conn_publish_probe(struct conn *c, const char *queue);

/* Publishes an empty message to queue through the default exchange,
 * expiring after `expiration` milliseconds (text) unless a consumer takes
 * it; nothing is waited for (its confirm comes with the next reply read,
 * or conn_note_routed reads it; mandatory: the broker returns it first
 * if no queue took it). */
enum al_status conn_publish_expiring(struct conn *c, const char *queue, bool mandatory,
				     const char *expiration);

/* A place in a line of entries: a queue of our own (exclusive, deleted
 * with its consumer) consumed as conn_consume does, a `mark` declared
 * (durable, with `mark_arguments`: what tells others that someone may
 * wait), the line (durable, no arguments) declared, and an entry of
 * `type` published into it, signed with our login when known, naming our
 * queue in its header "queue". *ahead: the entries in the line before
 * ours. AL_BROKER if the broker refused any of it (a permission, a mark
 * of other arguments): the consumer has ended then. */
struct conn_entry {
	const char *own, *mark, *line, *type;
	const amqp_table_t *mark_arguments;
};
enum al_status conn_enter(struct conn *c, const struct conn_entry *e,
			  const struct conn_consumer *hooks, uint32_t *ahead);

/* Consumes from queue (declared if need be: durable, with `arguments`)
 * on a channel of its own, one unacknowledged delivery at a time, all in
 * one round trip. From then on every conn_* call that reads hands each
 * delivery to hooks->delivered; *alone says whether nobody consumed from
 * the queue before us. On failure (no permission, a queue declared
 * otherwise) the connection is still usable; only a dead connection
 * matters to the caller. */
enum al_status conn_consume(struct conn *c, const char *queue, const amqp_table_t *arguments,
			    const struct conn_consumer *hooks, bool *alone);

/* Consumes from `stream` (a stream queue, which must exist) from its next
 * entry on, on conn_consume's channel, and appends an empty entry of
 * `message_id` to it once the consumer is in place, all in one round
 * trip: every entry appended from then on, this one among them, comes to
 * hooks->delivered (its header "x-stream-offset" says where it is); ack
 * each with conn_ack, end with conn_consume_end. A refusal (404: no such
 * stream, 403) leaves reply_code set and the connection usable. */
enum al_status conn_stream_append(struct conn *c, const char *stream, const char *message_id,
				  const struct conn_consumer *hooks);

/* Inside hooks->delivered: whether the broker had delivered the message
 * before, to a consumer that left without acknowledging it. */
bool conn_delivered_again(const struct conn *c);
/* Whether conn_consume's consumer is still there. */
bool conn_consuming(const struct conn *c);

/* Acknowledges delivery `tag`: the queue's next message may then come. */
void conn_ack(struct conn *c, uint64_t tag);

/* Ends the consumer without waiting: `last` (if not NULL) is published on
 * its channel first, so that it goes out before what the close gives back
 * (a delivery not acknowledged returns to the queue). hooks->ended is
 * told, with CONSUMER_LEFT. */
void conn_consume_end(struct conn *c, const struct conn_message *last);

/* Consumes from queue without acknowledgements on a channel of its own
 * (conn_consume's place: one consumer at a time), declaring nothing and
 * waiting for nothing: a refusal comes later, to hooks->ended
 * (CONSUMER_REFUSED), and closes only that channel. End it with
 * conn_consume_end. For a queue of the connection's own (exclusive to
 * it). */
enum al_status conn_listen(struct conn *c, const char *queue, const struct conn_consumer *hooks);

/* conn_listen on direct reply-to: the answers to conn_ask's questions
 * come to hooks->delivered. */
enum al_status conn_listen_replies(struct conn *c, const struct conn_consumer *hooks);

/* Publishes an empty question of `type` to queue through the default
 * exchange, on the channel of conn_listen_replies (whose name the broker
 * puts in its reply_to), expiring after `expiration` ms (text), not
 * mandatory; nothing is waited for. */
enum al_status conn_ask(struct conn *c, const char *queue, const char *type, const char *expiration,
			const char *correlation_id);

/* Whether bytes b are the text s. */
bool conn_bytes_are(amqp_bytes_t b, const char *s);
/* Whether a message's type property is `type`. */
bool conn_is_type(const amqp_basic_properties_t *p, const char *type);
/* A message's header `key`, or NULL if it has none such. */
const amqp_field_value_t *conn_header(const amqp_basic_properties_t *p, const char *key);
/* Whether name is a direct reply-to name, the only place an answer may go
 * (never a named queue, which a forged reply_to could name). */
bool conn_is_reply_to(const amqp_bytes_t *name);

/* Publishes an empty answer of `type` with `headers` to reply_to through
 * the default exchange on the main channel, not mandatory; its confirm is
 * not waited for. */
enum al_status conn_reply(struct conn *c, const char *reply_to, const char *correlation_id,
			  const char *type, const amqp_table_t *headers);

/* A message taken with basic.get and not yet settled: its tag, on the
 * main channel it was taken on. Until settled it is nobody else's; if the
 * channel or the connection closes first, the broker puts it back in its
 * place. */
struct conn_got {
	uint64_t tag; /* 0: none was there */
	amqp_channel_t channel;
	bool signed_by_us; /* its user_id is our login */
	uint16_t refused;  /* none: no such queue (404), or not ours to read (403) */
};
/* Takes the oldest message of queue, unacknowledged, on the main channel:
 * got->tag 0 if there was none, or no such queue (404) or no permission
 * (403), which closes the main channel (a new one is opened); value gets
 * its header `key`, if that is a string shorter than size (else ""). */
enum al_status conn_get(struct conn *c, const char *queue, const char *key, char *value,
			size_t size, struct conn_got *got);
/* Acknowledges it (gone for good), or with requeue puts it back in its
 * place; nothing is waited for, and nothing is done if the channel it
 * was taken on is no more. */
void conn_settle(struct conn *c, const struct conn_got *got, bool requeue);

/* A signed message: an empty message of `type` with `headers` and
 * `correlation_id`, to `queue` (a queue's name or a direct reply-to name)
 * through the default exchange, expiring after `expiration` ms (text;
 * NULL: never). It carries our login as its user_id, which the broker
 * refuses to pass on from anyone logged in as another user: its receiver
 * knows it comes from a connection of our login (conn_signed_by_us).
 * Nothing is waited for.
 * On the channel of the connection's consumer (conn_consume or
 * conn_listen), which must be there, unless `main`: then on the main
 * channel, after whatever was sent there before (the broker handles a
 * channel's methods in order), its confirm to come with the next reply;
 * `mandatory` (main only) has the broker return it if no queue took it,
 * which conn_note_routed then reads. */
struct conn_note {
	const char *queue, *type, *expiration, *correlation_id;
	const amqp_table_t *headers;
	bool main, mandatory;
};
enum al_status conn_send_note(struct conn *c, const struct conn_note *n);
/* After a publish on the main channel (a note, or
 * conn_publish_expiring), before anything else is read there: waits for
 * its confirm, and says whether a queue took it (the broker's
 * basic.return of a mandatory note, if any, comes before the confirm). */
enum al_status conn_note_routed(struct conn *c, bool *routed);
/* Whether a message's user_id is our login: only a client logged in as
 * we are can have sent it (or one tagged impersonator). */
bool conn_signed_by_us(const struct conn *c, const amqp_basic_properties_t *p);

/* A channel refusal as conn_recv recorded it, kept for a message given
 * later (when more replies were read meanwhile). */
struct conn_refusal {
	uint16_t code;
	char text[128];
};

/* Forgets the last refusal: after the next replies, conn_refusal_code
 * says whether one of them was a refusal (0: none). */
void conn_refusal_clear(struct conn *c);
/* The reply code of the last refusal read (0: none since cleared). */
uint16_t conn_refusal_code(const struct conn *c);
/* Keeps the last refusal in *r; conn_refusal_restore makes it the last
 * again, for conn_refused's message. */
void conn_refusal_keep(const struct conn *c, struct conn_refusal *r);
void conn_refusal_restore(struct conn *c, const struct conn_refusal *r);

/* Records a message for the channel refusal in reply_code, e.g.
 * "declaring amqplock.jobs-1-A: ACCESS_REFUSED - ...", and returns st. */
enum al_status conn_refused(struct conn *c, enum al_status st, const char *doing,
			    const char *queue);

/* Channel refusals that a caller takes as answers about a queue rather
 * than as failures (conn_call's and conn_answer's `tolerated`). */
#define REFUSED_ACCESS    (1u << 0) /* 403: not allowed to touch it */
#define REFUSED_NOT_FOUND (1u << 1) /* 404: no such queue */
#define REFUSED_LOCKED    (1u << 2) /* 405: exclusive to another connection */
#define REFUSED_MISMATCH  (1u << 3) /* 406: declared otherwise than asked */

/* The reply st to a request (`doing` `queue`, for messages) as an answer:
 * *refused gets 0 if it was ok, else the refusal's reply code, which
 * closed the channel. A fresh channel replaces it if the refusal is one
 * of `tolerated`; any other is described (conn_refused) and returned.
 * refused may be NULL when nothing is tolerated. */
enum al_status conn_answer(struct conn *c, enum al_status st, unsigned tolerated, uint16_t *refused,
			   const char *doing, const char *queue);

/* One request and its reply: sends method `id`, expects `ok`, and takes
 * the reply as conn_answer does. */
enum al_status conn_call(struct conn *c, amqp_method_number_t id, void *decoded,
			 amqp_method_number_t ok, unsigned tolerated, uint16_t *refused,
			 const char *doing, const char *queue);

/* One request on a channel of its own, opened for it in the same round
 * trip and closed after: a refusal (its reply code in *refused, 0 if
 * none) closes that channel, not the main one, whose state (its confirm
 * tags, the broker's routing of its publishes) stays as it was. Only
 * when nothing is outstanding on the main channel: its frames that come
 * meanwhile are dropped. */
enum al_status conn_side_call(struct conn *c, amqp_method_number_t id, void *decoded,
			      amqp_method_number_t ok, uint16_t *refused, const char *doing,
			      const char *what);

/* Maps an AMQP reply code to a status. */
enum al_status conn_status_for_reply(uint16_t code);

#endif
