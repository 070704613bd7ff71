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
 *
 * Same library, headers and login parameters (frame max 128 KiB, heartbeat
 * 5 s, vhost "/" for a URL without one) as amqplock; no TLS. Exit 0 on
 * success, 1 on any failure (one line on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
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
	free(url);
	return c;
}

static void close_connection(amqp_connection_state_t c)
{
	amqp_connection_close(c, AMQP_REPLY_SUCCESS);
	amqp_destroy_connection(c);
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
	fprintf(stderr, "usage: floor [declare1000|delete1000 PREFIX [N]]\n");
	return 1;
}
