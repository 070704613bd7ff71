/* The list of broker URLs (--url, AMQPLOCK_URL): its URLs, each checked
 * and parsed. Pure functions: no file, no network, no printing, no exit.
 * Failures are recorded with fail() (status.h) and never echo a URL, which
 * may hold a password: " (2 of 3)" says which one of a list is meant. */
#ifndef AMQPLOCK_URL_H
#define AMQPLOCK_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "amqp_compat.h"
#include "status.h"

/* A URL of the list is shorter than this. */
#define URL_MAX 1024
/* The most URLs a list may hold. */
#define URL_BROKERS_MAX 64

/* One checked URL. The strings of info (host, user, password, vhost)
 * point into text, or at a constant ("/", amqp_parse_url's defaults), so a
 * filled struct is not to be copied by value. Holds the password: never
 * printed. */
struct broker_url {
	struct amqp_connection_info info; /* vhost "/" where the URL has none */
	char text[URL_MAX];               /* the URL, as amqp_parse_url left it */
	/* The URL names a user but gives no password ("amqp://bob@host/"):
	 * amqp_parse_url then leaves the default "guest", which a refused
	 * login should name as the likely cause. */
	bool no_password;
};

/* How many URLs the space-separated list holds (NULL: none). */
unsigned url_count(const char *list);

/* The nth (0-based) URL of the list: *url points at it in list, *len is
 * its length. False (and *len 0) if the list has no nth URL. */
bool url_nth(const char *list, unsigned nth, const char **url, size_t *len);

/* Checks the URL url[0..len), the nth (0-based) of the n of its list (n is
 * for the messages only), and parses it into b: what amqp_parse_url takes,
 * minus what a URL on a command line more likely means by mistake (an
 * empty host, a port with a sign or out of 1..65535, a second colon, a
 * space or control character, %00). tls_options: --cacert, --cert, --key
 * or --insecure was given, which needs amqps://. On failure b is zeroed. */
enum al_status url_check(const char *url, size_t len, unsigned nth, unsigned n, bool tls_options,
			 struct broker_url *b);

/* Every URL of the list, checked with url_check into b[0..*n), in order;
 * a list of none or of more than max URLs is refused too. On failure *n
 * is 0 and whatever was filled of b is zeroed. */
enum al_status url_check_list(const char *list, bool tls_options, struct broker_url *b,
			      unsigned max, unsigned *n);

#endif
