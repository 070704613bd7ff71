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
 *
 * Same library, headers and login parameters (frame max 128 KiB, heartbeat
 * 5 s, vhost "/" for a URL without one) as amqplock; no TLS. Exit 0 on
 * success, 1 on any failure (one line on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
static void send(amqp_connection_state_t c, amqp_channel_t ch, amqp_method_number_t id, void *m)
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

	send(c, ch, AMQP_QUEUE_DECLARE_METHOD, &m);
}

static void delete (amqp_connection_state_t c, amqp_channel_t ch, const char *name)
{
	amqp_queue_delete_t m = {.queue = amqp_cstring_bytes(name)};

	send(c, ch, AMQP_QUEUE_DELETE_METHOD, &m);
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
		long n = argc == 4 ? strtol(argv[3], NULL, 10) : 1000;

		if (n < 1 || n > 100000 || strlen(argv[2]) > 200)
			die("bad PREFIX or N", NULL);
		c = open_connection();
		many(c, argv[2], n, !strcmp(argv[1], "declare1000"));
		close_connection(c);
		return 0;
	}
	if ((argc == 2 || argc == 3) && !strcmp(argv[1], "handoff")) {
		long n = argc == 3 ? strtol(argv[2], NULL, 10) : 60;

		if (n < 1 || n > 100000)
			die("bad N", NULL);
		handoff(n);
		return 0;
	}
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "pass") &&
	    (!strcmp(argv[2], "sac") || !strcmp(argv[2], "get"))) {
		long n = argc == 4 ? strtol(argv[3], NULL, 10) : 60;

		if (n < 1 || n > 100000)
			die("bad N", NULL);
		pass(!strcmp(argv[2], "get"), n);
		return 0;
	}
	fprintf(stderr, "usage: floor [declare1000|delete1000 PREFIX [N] | handoff [N] | pass "
			"sac|get [N]]\n");
	return 1;
}
