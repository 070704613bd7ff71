/* floor: the least work an AMQP client has to do for what `amqplock hold`
 * does, as a yardstick for the benchmark (bench/run.sh).
 *
 *   floor                       connect to $AMQPLOCK_URL, log in, open
 *                               channel 1, declare one exclusive queue,
 *                               close the connection (the AMQP floor of a
 *                               hold)
 *   floor declare1000 PREFIX [N] declare N (default 1000) durable queues
 *                               PREFIX-1..PREFIX-N one at a time, waiting
 *                               for each declare-ok
 *   floor delete1000 PREFIX [N]  delete them again, one at a time
 *   floor handoff [N]           N (default 60) hand-offs of one slot between
 *                               two connections of this process, as amqplock
 *                               does them but with no process in the way: the
 *                               holder deletes its lease and holder queue and
 *                               publishes a wake-up to a single-active-consumer
 *                               queue (both answered first: the lease is on a
 *                               second channel); the waiter, on the delivery,
 *                               declares the holder queue, checks the slot queue
 *                               and declares the lease (on its second channel),
 *                               and waits for the three replies. Prints the
 *                               median and the 10th and 90th percentiles in ms
 *                               (the broker's floor of a clean hand-off), and
 *                               the median time until the wake-up came
 *   floor pass sac|get [N]      N (default 60) hand-overs of one slot's lease
 *                               between two connections of this process, from
 *                               the releaser's first request to the adopter's
 *                               last reply: "sac" as src/ hands over today
 *                               (an offer through the single-active-consumer
 *                               line #waiters, the ask into -B, the answer
 *                               through the line), "get" as docs/design.md's
 *                               "A line for N slots" would (the oldest entry
 *                               of #line taken with basic.get, the offer and
 *                               the answer into the waiter's own queue, the
 *                               entry acknowledged). The adopter declares -L
 *                               with the lease's token, -A and -B, as an
 *                               adoption does. Prints the median and the
 *                               10th and 90th percentiles in ms
 *   floor lease [N]             what a lease costs the broker on a hold's
 *                               path, N (default 60) times each, one request
 *                               at a time: as src/ makes it, a queue declared
 *                               with the holder's token and deleted (quorum,
 *                               then classic); and as a message, persistent,
 *                               expiring in 30 s, published with a confirm
 *                               into a lasting durable classic queue of one
 *                               message at most (x-overflow reject-publish),
 *                               taken back with basic.get, and renewed (taken
 *                               and published again). Checks that a second
 *                               message is refused while one is in, and that
 *                               a message of 0.3 s runs out under passive
 *                               declares every 0.1 s, which restart a
 *                               classic queue's x-expires; and whether the
 *                               same queue, made a quorum queue, refuses a
 *                               second message. Then the premises of a lease
 *                               taken unacknowledged: whether it still counts
 *                               against the one message; whether it runs out
 *                               on time once its taker's connection is cut;
 *                               and, N times, whether a connection that takes
 *                               the cut one's exclusive queue at once has a
 *                               publish taken before the message is back.
 *                               Prints the median of each step in ms, then
 *                               the answers (issue 43: a cheaper durable
 *                               lease, measured, not yet used)
 *
 * Same library, headers and login parameters (frame max 128 KiB, heartbeat
 * 5 s, vhost "/" for a URL without one) as amqplock; no TLS. Exit 0 on
 * success, 1 on any failure (one line on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../src/amqp_compat.h"

#define FRAME_MAX 131072
#define HEARTBEAT 5

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "floor: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	exit(1);
}

static void check(amqp_connection_state_t c, const char *what)
{
	amqp_rpc_reply_t r = amqp_get_rpc_reply(c);

	if (r.reply_type == AMQP_RESPONSE_NORMAL)
		return;
	if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
		die(what, amqp_error_string2(r.library_error));
	die(what, "refused by the broker");
}

static amqp_connection_state_t open_connection(void)
{
	const char *env = getenv("AMQPLOCK_URL");
	struct amqp_connection_info info;
	struct timeval tv = {5, 0};
	amqp_connection_state_t c;
	amqp_socket_t *sock;
	amqp_rpc_reply_t r;
	char *url;

	if (!env || !*env)
		die("AMQPLOCK_URL is not set", NULL);
	url = strdup(env); /* amqp_parse_url edits its input */
	if (!url)
		die("out of memory", NULL);
	amqp_default_connection_info(&info);
	if (amqp_parse_url(url, &info) != AMQP_STATUS_OK)
		die("cannot parse AMQPLOCK_URL", NULL);
	if (info.ssl)
		die("amqps:// is not supported here", NULL);
	if (!info.vhost[0])
		info.vhost = "/";
	c = amqp_new_connection();
	sock = c ? amqp_tcp_socket_new(c) : NULL;
	if (!sock)
		die("out of memory", NULL);
	if (amqp_socket_open_noblock(sock, info.host, info.port, &tv) != AMQP_STATUS_OK)
		die("cannot connect", info.host);
	r = amqp_login(c, info.vhost, 0, FRAME_MAX, HEARTBEAT, AMQP_SASL_METHOD_PLAIN, info.user,
		       info.password);
	if (r.reply_type != AMQP_RESPONSE_NORMAL)
		die("login failed", NULL);
	amqp_channel_open(c, 1);
	check(c, "channel.open");
	/* The lease's channel, for handoff. */
	amqp_channel_open(c, 2);
	check(c, "channel.open");
	free(url);
	return c;
}

static void close_connection(amqp_connection_state_t c)
{
	amqp_connection_close(c, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(c);
}

/* Sends one method on a channel without waiting for its reply. */
static void send_method(amqp_connection_state_t c, amqp_channel_t ch, amqp_method_number_t id,
			void *m)
{
	if (amqp_send_method(c, ch, id, m) != AMQP_STATUS_OK)
		die("cannot send", NULL);
}

/* Reads frames until n replies `id` have come, on whatever channel. */
static void await(amqp_connection_state_t c, amqp_method_number_t id, int n)
{
	amqp_frame_t f;

	while (n > 0) {
		if (amqp_simple_wait_frame(c, &f) != AMQP_STATUS_OK)
			die("no reply", NULL);
		if (f.frame_type != AMQP_FRAME_METHOD)
			continue;
		if (f.payload.method.id != id)
			die("refused by the broker", NULL);
		n--;
	}
}

static void declare(amqp_connection_state_t c, amqp_channel_t ch, const char *name, int passive,
		    int durable, int exclusive, amqp_table_t args)
{
	amqp_queue_declare_t m = {.queue = amqp_cstring_bytes(name),
				  .passive = passive,
				  .durable = durable,
				  .exclusive = exclusive,
				  .arguments = args};

	send_method(c, ch, AMQP_QUEUE_DECLARE_METHOD, &m);
}

static void delete (amqp_connection_state_t c, amqp_channel_t ch, const char *name)
{
	amqp_queue_delete_t m = {.queue = amqp_cstring_bytes(name)};

	send_method(c, ch, AMQP_QUEUE_DELETE_METHOD, &m);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The slot's holder queue, slot queue and lease, taken by c with token. */
static void claim(amqp_connection_state_t c, const char *base, long token)
{
	amqp_table_entry_t e[2] = {
		{amqp_cstring_bytes("x-expires"),
		 {.kind = AMQP_FIELD_KIND_I32, .value.i32 = 30000}},
		{amqp_cstring_bytes("x-max-length"),
		 {.kind = AMQP_FIELD_KIND_I64, .value.i64 = token}},
	};
	amqp_table_t lease = {2, e};
	char name[256];

	snprintf(name, sizeof(name), "%s-1-L", base);
	declare(c, 2, name, 0, 1, 0, lease);
	snprintf(name, sizeof(name), "%s-1-B", base);
	declare(c, 1, name, 0, 0, 1, amqp_empty_table);
	snprintf(name, sizeof(name), "%s-1-A", base);
	declare(c, 1, name, 1, 0, 0, amqp_empty_table);
	await(c, AMQP_QUEUE_DECLARE_OK_METHOD, 3);
}

/* A message of BODY into QUEUE, expiring in a second as amqplock's notes do. */
static void publish(amqp_connection_state_t c, const char *queue, int mandatory, const char *body)
{
	amqp_basic_properties_t p = {._flags = AMQP_BASIC_EXPIRATION_FLAG,
				     .expiration = amqp_cstring_bytes("1000")};

	if (amqp_basic_publish(c, 1, amqp_empty_bytes, amqp_cstring_bytes(queue), mandatory, 0, &p,
			       amqp_cstring_bytes(body)) != AMQP_STATUS_OK)
		die("cannot publish", NULL);
}

/* The next delivery on c, acknowledged if ack. */
static void delivery(amqp_connection_state_t c, int ack)
{
	struct timeval tv = {5, 0};
	amqp_envelope_t env;

	if (amqp_consume_message(c, &env, &tv, 0).reply_type != AMQP_RESPONSE_NORMAL)
		die("no delivery", NULL);
	if (ack)
		amqp_basic_ack(c, env.channel, env.delivery_tag, 0);
	amqp_destroy_envelope(&env);
}

static void consume(amqp_connection_state_t c, const char *queue)
{
	amqp_basic_consume(c, 1, amqp_cstring_bytes(queue), amqp_empty_bytes, 0, 0, 0,
			   amqp_empty_table);
	check(c, "basic.consume");
}

/* The waiter's side of today's line: #waiters declared with a single
 * active consumer, one delivery at a time, consumed. */
static void join_sac_line(amqp_connection_state_t w, const char *line)
{
	amqp_table_entry_t sac = {amqp_cstring_bytes("x-single-active-consumer"),
				  {.kind = AMQP_FIELD_KIND_BOOLEAN, .value.boolean = 1}};
	amqp_table_t args = {1, &sac};

	amqp_queue_declare(w, 1, amqp_cstring_bytes(line), 0, 0, 0, 1, args);
	check(w, "queue.declare");
	amqp_basic_qos(w, 1, 0, 1, 0);
	check(w, "basic.qos");
	consume(w, line);
}

/* Lets the slot go: lease and holder queue deleted side by side, then,
 * both answered, a wake-up to the line. */
static void release(amqp_connection_state_t c, const char *base, const char *line)
{
	char name[256];

	snprintf(name, sizeof(name), "%s-1-L", base);
	delete (c, 2, name);
	snprintf(name, sizeof(name), "%s-1-B", base);
	delete (c, 1, name);
	await(c, AMQP_QUEUE_DELETE_OK_METHOD, 2);
	publish(c, line, 0, "");
}

/* The adopter lets the slot go quietly (lease and holder queue deleted,
 * nobody told), so that the other side can take it again. */
static void let_go(amqp_connection_state_t c, const char *base)
{
	char name[256];

	snprintf(name, sizeof(name), "%s-1-L", base);
	amqp_queue_delete(c, 1, amqp_cstring_bytes(name), 0, 0);
	check(c, "queue.delete");
	snprintf(name, sizeof(name), "%s-1-B", base);
	amqp_queue_delete(c, 1, amqp_cstring_bytes(name), 0, 0);
	check(c, "queue.delete");
}

/* The line and the slot queue deleted, both connections closed. */
static void tear_down(amqp_connection_state_t holder, amqp_connection_state_t waiter,
		      const char *line, const char *base)
{
	char name[256];

	amqp_queue_delete(waiter, 1, amqp_cstring_bytes(line), 0, 0);
	snprintf(name, sizeof(name), "%s-1-A", base);
	amqp_queue_delete(holder, 1, amqp_cstring_bytes(name), 0, 0);
	close_connection(holder);
	close_connection(waiter);
}

static void handoff(long n)
{
	amqp_connection_state_t holder = open_connection(), waiter = open_connection();
	struct timeval tv = {5, 0};
	amqp_envelope_t env;
	char base[64], name[128], line[128];
	double *ms = calloc((size_t)n, sizeof(*ms)), *woken = calloc((size_t)n, sizeof(*woken));
	double start;
	long i;

	if (!ms || !woken)
		die("out of memory", NULL);
	snprintf(base, sizeof(base), "amqplock.floor-%ld", (long)getpid());
	snprintf(line, sizeof(line), "%s#waiters", base);
	snprintf(name, sizeof(name), "%s-1-A", base);
	amqp_queue_declare(holder, 1, amqp_cstring_bytes(name), 0, 1, 0, 0, amqp_empty_table);
	check(holder, "queue.declare");
	join_sac_line(waiter, line);
	for (i = 0; i < n; i++) {
		claim(holder, base, 1000 + i);
		start = now_ms();
		release(holder, base, line);
		if (amqp_consume_message(waiter, &env, &tv, 0).reply_type != AMQP_RESPONSE_NORMAL)
			die("no wake-up", NULL);
		woken[i] = now_ms() - start;
		claim(waiter, base, 2000000 + i);
		ms[i] = now_ms() - start;
		amqp_basic_ack(waiter, 1, env.delivery_tag, 0);
		amqp_destroy_envelope(&env);
		let_go(waiter, base);
	}
	tear_down(holder, waiter, line, base);
	qsort(ms, (size_t)n, sizeof(*ms), by_value);
	qsort(woken, (size_t)n, sizeof(*woken), by_value);
	printf("handoff n %ld p50 %.3f p10 %.3f p90 %.3f woken p50 %.3f\n", n, ms[n / 2],
	       ms[n / 10], ms[n * 9 / 10], woken[n / 2]);
	free(ms);
	free(woken);
}

/* floor pass sac|get N: see the head of this file */
static void pass(int get, long n)
{
	amqp_connection_state_t r = open_connection(), w = open_connection();
	char base[64], name[128], line[128], wq[128] = "";
	double *ms = calloc((size_t)n, sizeof(*ms));
	double start;
	long i;

	if (!ms)
		die("out of memory", NULL);
	snprintf(base, sizeof(base), "amqplock.floor-%ld", (long)getpid());
	snprintf(line, sizeof(line), "%s#%s", base, get ? "line" : "waiters");
	snprintf(name, sizeof(name), "%s-1-A", base);
	amqp_queue_declare(r, 1, amqp_cstring_bytes(name), 0, 1, 0, 0, amqp_empty_table);
	check(r, "queue.declare");
	if (get) {
		amqp_queue_declare_ok_t *ok;

		amqp_queue_declare(w, 1, amqp_cstring_bytes(line), 0, 1, 0, 0, amqp_empty_table);
		check(w, "queue.declare");
		amqp_basic_qos(w, 1, 0, 1, 0);
		check(w, "basic.qos");
		ok = amqp_queue_declare(w, 1, amqp_empty_bytes, 0, 0, 1, 1, amqp_empty_table);
		check(w, "queue.declare");
		snprintf(wq, sizeof(wq), "%.*s", (int)ok->queue.len, (char *)ok->queue.bytes);
		consume(w, wq);
	} else {
		join_sac_line(w, line);
	}
	for (i = 0; i < n; i++) {
		amqp_message_t entry;
		uint64_t tag = 0;

		claim(r, base, 1000 + i);
		snprintf(name, sizeof(name), "%s-1-B", base);
		consume(r, name);
		if (get) {
			/* the waiter's place, taken while it waits (in #line once
			 * a passive declare behind it is answered) */
			publish(w, line, 0, wq);
			amqp_queue_declare(w, 1, amqp_cstring_bytes(line), 1, 0, 0, 0,
					   amqp_empty_table);
			check(w, "queue.declare");
		}
		start = now_ms();
		if (get) {
			amqp_rpc_reply_t rr = amqp_basic_get(r, 1, amqp_cstring_bytes(line), 0);

			if (rr.reply_type != AMQP_RESPONSE_NORMAL ||
			    rr.reply.id != AMQP_BASIC_GET_OK_METHOD)
				die("basic.get", "no entry");
			tag = ((amqp_basic_get_ok_t *)rr.reply.decoded)->delivery_tag;
			if (amqp_read_message(r, 1, &entry, 0).reply_type != AMQP_RESPONSE_NORMAL)
				die("basic.get", "no body");
			amqp_destroy_message(&entry);
			publish(r, wq, 1, "offer");
		} else {
			publish(r, line, 0, "offer");
		}
		delivery(w, 1); /* the offer */
		publish(w, name, 1, "ask");
		delivery(r, 1); /* the ask */
		if (get)
			amqp_basic_ack(r, 1, tag, 0);
		delete (r, 1, name);
		publish(r, get ? wq : line, 0, "answer");
		delivery(w, 1); /* the answer */
		claim(w, base, 1000 + i);
		ms[i] = now_ms() - start;
		await(r, AMQP_QUEUE_DELETE_OK_METHOD, 1);
		let_go(w, base);
	}
	tear_down(r, w, line, base);
	qsort(ms, (size_t)n, sizeof(*ms), by_value);
	printf("pass %s n %ld p50 %.3f p10 %.3f p90 %.3f\n", get ? "get" : "sac", n, ms[n / 2],
	       ms[n / 10], ms[n * 9 / 10]);
	free(ms);
}

/* floor lease: a persistent message of body "lease" into queue on channel
 * ch (in confirm mode), expiring in expiration ms; 1 if the broker took
 * it, 0 if it refused it (basic.nack: the queue is full). */
static int lease_message_on(amqp_connection_state_t c, amqp_channel_t ch, const char *queue,
			    const char *expiration)
{
	amqp_basic_properties_t p = {._flags = AMQP_BASIC_DELIVERY_MODE_FLAG |
					       AMQP_BASIC_EXPIRATION_FLAG,
				     .delivery_mode = 2,
				     .expiration = amqp_cstring_bytes(expiration)};
	amqp_frame_t f;

	if (amqp_basic_publish(c, ch, amqp_empty_bytes, amqp_cstring_bytes(queue), 1, 0, &p,
			       amqp_cstring_bytes("lease")) != AMQP_STATUS_OK)
		die("cannot publish", NULL);
	for (;;) {
		if (amqp_simple_wait_frame(c, &f) != AMQP_STATUS_OK)
			die("no confirm", NULL);
		if (f.frame_type != AMQP_FRAME_METHOD)
			continue;
		if (f.payload.method.id == AMQP_BASIC_ACK_METHOD)
			return 1;
		if (f.payload.method.id == AMQP_BASIC_NACK_METHOD)
			return 0;
		die("lease message", "returned or refused");
	}
}

static int lease_message(amqp_connection_state_t c, const char *queue, const char *expiration)
{
	return lease_message_on(c, 3, queue, expiration);
}

/* The message taken with basic.get on channel 3, acknowledged at once if
 * no_ack, else left unacknowledged: its delivery tag, 0 if queue was
 * empty. */
static uint64_t lease_take(amqp_connection_state_t c, const char *queue, int no_ack)
{
	amqp_rpc_reply_t r = amqp_basic_get(c, 3, amqp_cstring_bytes(queue), no_ack);
	uint64_t tag;
	amqp_message_t m;

	if (r.reply_type != AMQP_RESPONSE_NORMAL)
		die("basic.get", "refused by the broker");
	if (r.reply.id != AMQP_BASIC_GET_OK_METHOD)
		return 0;
	tag = ((amqp_basic_get_ok_t *)r.reply.decoded)->delivery_tag;
	if (amqp_read_message(c, 3, &m, 0).reply_type != AMQP_RESPONSE_NORMAL)
		die("basic.get", "no body");
	amqp_destroy_message(&m);
	return tag;
}

/* The messages in queue, by a passive declare. */
static uint32_t lease_count(amqp_connection_state_t c, const char *queue)
{
	amqp_queue_declare_ok_t *ok =
		amqp_queue_declare(c, 1, amqp_cstring_bytes(queue), 1, 0, 0, 0, amqp_empty_table);

	check(c, "passive queue.declare");
	return ok->message_count;
}

/* A connection whose channel 3 is in confirm mode (lease_message). */
static amqp_connection_state_t open_lease_connection(void)
{
	amqp_connection_state_t c = open_connection();

	amqp_channel_open(c, 3);
	check(c, "channel.open");
	amqp_confirm_select(c, 3);
	check(c, "confirm.select");
	return c;
}

/* The end of c as a lost connection's: its socket shut, no close. */
static void cut(amqp_connection_state_t c)
{
	shutdown(amqp_get_sockfd(c), SHUT_RDWR);
	amqp_destroy_connection(c);
}

/* Declares `holder` exclusive on a fresh channel of e until the broker
 * grants it; that channel, put in confirm mode. */
static amqp_channel_t take_holder(amqp_connection_state_t e, const char *holder,
				  amqp_channel_t *next)
{
	amqp_channel_close_ok_t close_ok = {0};
	amqp_channel_t ch;
	int tries;

	for (tries = 0; tries < 1000; tries++) {
		ch = *next;
		*next = (amqp_channel_t)(*next % 1000 + 10);
		amqp_channel_open(e, ch);
		check(e, "channel.open");
		if (amqp_queue_declare(e, ch, amqp_cstring_bytes(holder), 0, 0, 1, 0,
				       amqp_empty_table)) {
			amqp_confirm_select(e, ch);
			check(e, "confirm.select");
			return ch;
		}
		/* refused (its owner's connection not yet gone): the channel
		 * closed by the broker */
		if (amqp_send_method(e, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &close_ok) !=
		    AMQP_STATUS_OK)
			die("cannot send", NULL);
	}
	die("holder queue", "not granted in 1000 tries");
	return 0;
}

/* The design's premises for a lease taken with basic.get and left
 * unacknowledged (docs/design.md, "A lease as a message"), on queue msg,
 * empty, of one message at most: whether a message so taken still counts
 * against x-max-length; whether it runs out on time once the end of its
 * taker's connection puts it back; and, `rounds` times, whether another
 * connection, declaring the taker's exclusive queue the moment the broker
 * lets it, has its publish taken before the message is back. */
static void lease_premises(const char *msg, long rounds)
{
	amqp_connection_state_t h = open_lease_connection(), e = open_lease_connection();
	amqp_channel_t ch, next = 10;
	char holder[128];
	double start;
	long i, claimed = 0;
	uint32_t back, after;

	snprintf(holder, sizeof(holder), "amqplock.floor-%ld-1-B", (long)getpid());
	if (!lease_message(h, msg, "30000") || !lease_take(h, msg, 0))
		die("lease message", "none to take");
	printf(" unacked_counts %s", lease_message(h, msg, "30000") ? "no" : "yes");
	close_connection(h);
	amqp_queue_purge(e, 1, amqp_cstring_bytes(msg));
	check(e, "queue.purge");
	/* 1.5 s of expiry; taken at 0.5 s by a connection cut at once */
	h = open_lease_connection();
	start = now_ms();
	if (!lease_message(h, msg, "1500"))
		die("lease message", "refused in an empty queue");
	usleep(500000);
	if (!lease_take(h, msg, 0))
		die("lease message", "none to take");
	cut(h);
	usleep(300000);
	back = lease_count(e, msg);
	while (now_ms() - start < 1800)
		usleep(10000);
	after = lease_count(e, msg);
	printf(" requeued_runs_out %s", back == 1 && after == 0 ? "yes" : "no");
	for (i = 0; i < rounds; i++) {
		amqp_queue_purge(e, 1, amqp_cstring_bytes(msg));
		check(e, "queue.purge");
		h = open_lease_connection();
		amqp_queue_declare(h, 1, amqp_cstring_bytes(holder), 0, 0, 1, 0, amqp_empty_table);
		check(h, "holder queue.declare");
		if (!lease_message(h, msg, "30000") || !lease_take(h, msg, 0))
			die("lease message", "none to take");
		cut(h);
		ch = take_holder(e, holder, &next);
		claimed += lease_message_on(e, ch, msg, "30000");
		amqp_queue_delete(e, ch, amqp_cstring_bytes(holder), 0, 0);
		check(e, "holder queue.delete");
		amqp_channel_close(e, ch, AMQP_REPLY_SUCCESS);
	}
	printf(" claimed_before_back %ld/%ld", claimed, rounds);
	amqp_queue_purge(e, 1, amqp_cstring_bytes(msg));
	check(e, "queue.purge");
	close_connection(e);
}

static double median_of(double *v, long n)
{
	qsort(v, (size_t)n, sizeof(*v), by_value);
	return v[n / 2];
}

static void lease(long n)
{
	amqp_connection_state_t c = open_lease_connection();
	amqp_table_entry_t e[3] = {
		{amqp_cstring_bytes("x-expires"),
		 {.kind = AMQP_FIELD_KIND_I32, .value.i32 = 30000}},
		{amqp_cstring_bytes("x-max-length"), {.kind = AMQP_FIELD_KIND_I64}},
		{amqp_cstring_bytes("x-queue-type"),
		 {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = amqp_cstring_bytes("quorum")}},
	};
	amqp_table_entry_t one[2] = {
		{amqp_cstring_bytes("x-max-length"), {.kind = AMQP_FIELD_KIND_I64, .value.i64 = 1}},
		{amqp_cstring_bytes("x-overflow"),
		 {.kind = AMQP_FIELD_KIND_UTF8,
		  .value.bytes = amqp_cstring_bytes("reject-publish")}},
	};
	amqp_table_t held = {2, one};
	double *t[7], start, mid;
	char name[128], msg[128];
	int type, k;
	long i;

	for (k = 0; k < 7; k++)
		if (!(t[k] = calloc((size_t)n, sizeof(*t[k]))))
			die("out of memory", NULL);
	snprintf(name, sizeof(name), "amqplock.floor-%ld-1-L", (long)getpid());
	snprintf(msg, sizeof(msg), "amqplock.floor-%ld-1-M", (long)getpid());
	/* as src/ does: quorum (type 0), then classic (type 1) */
	for (type = 0; type < 2; type++)
		for (i = 0; i < n; i++) {
			amqp_table_t args = {type == 0 ? 3 : 2, e};

			e[1].value.value.i64 = 1000 + i;
			start = now_ms();
			amqp_queue_declare(c, 2, amqp_cstring_bytes(name), 0, 1, 0, 0, args);
			check(c, "lease queue.declare");
			mid = now_ms();
			amqp_queue_delete(c, 2, amqp_cstring_bytes(name), 0, 0);
			check(c, "lease queue.delete");
			t[2 * type][i] = mid - start;
			t[2 * type + 1][i] = now_ms() - mid;
		}
	/* as a message */
	amqp_queue_declare(c, 1, amqp_cstring_bytes(msg), 0, 1, 0, 0, held);
	check(c, "queue.declare");
	for (i = 0; i < n; i++) {
		start = now_ms();
		if (!lease_message(c, msg, "30000"))
			die("lease message", "refused in an empty queue");
		t[4][i] = now_ms() - start;
		if (i == 0 && lease_message(c, msg, "30000"))
			die("lease message", "a second one taken while one is in");
		start = now_ms();
		if (!lease_take(c, msg, 1) || !lease_message(c, msg, "30000"))
			die("lease message", "not renewed");
		t[5][i] = now_ms() - start;
		start = now_ms();
		if (!lease_take(c, msg, 1))
			die("lease message", "gone before its release");
		t[6][i] = now_ms() - start;
	}
	printf("lease n %ld quorum queue declare %.3f delete %.3f classic queue declare %.3f "
	       "delete %.3f message publish %.3f renew %.3f take %.3f",
	       n, median_of(t[0], n), median_of(t[1], n), median_of(t[2], n), median_of(t[3], n),
	       median_of(t[4], n), median_of(t[5], n), median_of(t[6], n));
	/* Nobody keeps a message from running out by looking at its queue. */
	if (!lease_message(c, msg, "300"))
		die("lease message", "refused in an empty queue");
	for (k = 0; k < 6; k++) {
		lease_count(c, msg);
		usleep(100000);
	}
	printf(" out_under_looks %s", lease_count(c, msg) == 0 ? "yes" : "no");
	lease_premises(msg, n);
	amqp_queue_delete(c, 1, amqp_cstring_bytes(msg), 0, 0);
	check(c, "queue.delete");
	/* The same queue as a quorum queue: does it refuse a second message?
	 * (Its first is refused until it has a leader: tried for up to 1 s.) */
	{
		amqp_table_entry_t q[3] = {one[0], one[1], e[2]};
		amqp_table_t quorum = {3, q};

		amqp_queue_declare(c, 1, amqp_cstring_bytes(msg), 0, 1, 0, 0, quorum);
		check(c, "quorum queue.declare");
		for (k = 0; k < 100 && !lease_message(c, msg, "30000"); k++)
			usleep(10000);
		if (k == 100)
			die("lease message", "a quorum queue took none in 1 s");
		printf(" quorum_refuses_second %s\n",
		       lease_message(c, msg, "30000") ? "no" : "yes");
		amqp_queue_delete(c, 1, amqp_cstring_bytes(msg), 0, 0);
		check(c, "queue.delete");
	}
	close_connection(c);
	for (k = 0; k < 7; k++)
		free(t[k]);
}

static void many(amqp_connection_state_t c, const char *prefix, long n, int declare)
{
	char name[256];
	long k;

	for (k = 1; k <= n; k++) {
		snprintf(name, sizeof(name), "%s-%ld", prefix, k);
		if (declare)
			amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 1, 0, 0,
					   amqp_empty_table);
		else
			amqp_queue_delete(c, 1, amqp_cstring_bytes(name), 0, 0);
		check(c, declare ? "queue.declare" : "queue.delete");
	}
}

/* The count N of a mode: argv[at] if given, else dflt; 1 to 100000. */
static long count_arg(int argc, char **argv, int at, long dflt)
{
	long n = at < argc ? strtol(argv[at], NULL, 10) : dflt;

	if (n < 1 || n > 100000)
		die("bad N", NULL);
	return n;
}

int main(int argc, char **argv)
{
	amqp_connection_state_t c;

	if (argc == 1) {
		char name[64];

		snprintf(name, sizeof(name), "amqplock.floor-%ld", (long)getpid());
		c = open_connection();
		amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 1, 0, amqp_empty_table);
		check(c, "exclusive queue.declare");
		close_connection(c);
		return 0;
	}
	if ((argc == 3 || argc == 4) &&
	    (!strcmp(argv[1], "declare1000") || !strcmp(argv[1], "delete1000"))) {
		long n = count_arg(argc, argv, 3, 1000);

		if (strlen(argv[2]) > 200)
			die("bad PREFIX", NULL);
		c = open_connection();
		many(c, argv[2], n, !strcmp(argv[1], "declare1000"));
		close_connection(c);
		return 0;
	}
	if ((argc == 2 || argc == 3) && !strcmp(argv[1], "handoff")) {
		handoff(count_arg(argc, argv, 2, 60));
		return 0;
	}
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "pass") &&
	    (!strcmp(argv[2], "sac") || !strcmp(argv[2], "get"))) {
		pass(!strcmp(argv[2], "get"), count_arg(argc, argv, 3, 60));
		return 0;
	}
	if ((argc == 2 || argc == 3) && !strcmp(argv[1], "lease")) {
		lease(count_arg(argc, argv, 2, 60));
		return 0;
	}
	fprintf(stderr, "usage: floor [declare1000|delete1000 PREFIX [N] | handoff [N] | pass "
			"sac|get [N] | lease [N]]\n");
	return 1;
}
