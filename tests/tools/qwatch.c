/* qwatch.c: watches whether a queue exists, for the lease tests. Built by
 * the tests:
 *
 *   cc -o qwatch tests/tools/qwatch.c $(pkg-config --cflags --libs librabbitmq)
 *
 *   qwatch PORT QUEUE SECS
 *
 * Connects as guest to 127.0.0.1:PORT and, ten times a second for SECS
 * seconds, asks whether QUEUE exists the way amqplock's probes do: a
 * mandatory publish through the default exchange that expires at once,
 * with a confirm. Unlike a passive declare, that is no use of the queue:
 * it restarts no expiry clock. Prints a line each time the answer
 * changes, "SECONDS there" or "SECONDS gone" (seconds since the start),
 * and exits 0; 2 if it cannot connect. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if __has_include(<rabbitmq-c/amqp.h>)
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/tcp_socket.h>
#else
#include <amqp.h>
#include <amqp_tcp_socket.h>
#endif

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* 1: the queue exists; 0: it does not; -1: the connection failed. */
static int exists(amqp_connection_state_t c, const char *queue)
{
	amqp_basic_properties_t p = {._flags = AMQP_BASIC_EXPIRATION_FLAG,
				     .expiration = amqp_cstring_bytes("0")};
	amqp_message_t msg;
	amqp_frame_t f;
	int there = 1;

	if (amqp_basic_publish(c, 1, amqp_empty_bytes, amqp_cstring_bytes(queue), 1, 0, &p,
			       amqp_empty_bytes) != AMQP_STATUS_OK)
		return -1;
	for (;;) {
		if (amqp_simple_wait_frame(c, &f) != AMQP_STATUS_OK)
			return -1;
		if (f.frame_type != AMQP_FRAME_METHOD)
			continue;
		if (f.payload.method.id == AMQP_BASIC_RETURN_METHOD) {
			there = 0;
			if (amqp_read_message(c, 1, &msg, 0).reply_type != AMQP_RESPONSE_NORMAL)
				return -1;
			amqp_destroy_message(&msg);
		} else if (f.payload.method.id == AMQP_BASIC_ACK_METHOD) {
			return there;
		} else if (f.payload.method.id != AMQP_BASIC_NACK_METHOD) {
			return -1;
		}
	}
}

int main(int argc, char **argv)
{
	amqp_connection_state_t c = amqp_new_connection();
	amqp_socket_t *s = amqp_tcp_socket_new(c);
	double t0, secs;
	int last = -1, e;

	if (argc != 4) {
		fprintf(stderr, "usage: qwatch PORT QUEUE SECS\n");
		return 2;
	}
	secs = atof(argv[3]);
	if (!s || amqp_socket_open(s, "127.0.0.1", atoi(argv[1])) != AMQP_STATUS_OK ||
	    amqp_login(c, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest").reply_type !=
		    AMQP_RESPONSE_NORMAL ||
	    !amqp_channel_open(c, 1) || !amqp_confirm_select(c, 1)) {
		fprintf(stderr, "qwatch: cannot connect to port %s\n", argv[1]);
		return 2;
	}
	t0 = now();
	while (now() - t0 < secs) {
		if ((e = exists(c, argv[2])) < 0) {
			fprintf(stderr, "qwatch: the connection failed\n");
			return 2;
		}
		if (e != last)
			printf("%.1f %s\n", now() - t0, e ? "there" : "gone");
		fflush(stdout);
		last = e;
		usleep(100000);
	}
	return 0;
}
