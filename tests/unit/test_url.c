/* Broker URL lists: counting, taking the nth, and each URL checked and
 * parsed (url.c), with the usage messages users see. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "status.h"
#include "tap.h"
#include "url.h"

#define FORM "(expected amqp[s]://[user[:password]@]host[:port][/vhost])"

static struct broker_url b;

/* url alone (one of one) into b; the message is status_message(). */
static enum al_status check(const char *url, bool tls_options)
{
	status_clear();
	return url_check(url, strlen(url), 0, 1, tls_options, &b);
}

/* url is refused with the message "invalid broker URL: <why> (expected
 * ...)", or "invalid broker URL (expected ...)" when why is NULL. */
static void refused(const char *url, const char *why, const char *what)
{
	char want[256];

	if (why)
		snprintf(want, sizeof(want), "invalid broker URL: %s %s", why, FORM);
	else
		snprintf(want, sizeof(want), "invalid broker URL %s", FORM);
	ok(check(url, false) == AL_USAGE, "%s is refused", what);
	is_str(status_message(), want, "%s: its message", what);
}

static void lists(void)
{
	const char *url = NULL;
	size_t len = 99;

	ok(url_count("amqp://a") == 1, "one URL");
	ok(url_count("amqp://a amqp://b amqps://c") == 3, "three URLs");
	ok(url_count("  amqp://a    amqp://b  ") == 2, "extra spaces separate nothing");
	ok(url_count("") == 0 && url_count("   ") == 0 && url_count(NULL) == 0,
	   "an empty list, spaces only and none count 0");
	ok(url_count("amqp://a\tamqp://b") == 1, "a tab does not separate");
	ok(url_nth("  amqp://a   amqp://bb  ", 1, &url, &len) && len == 9 &&
		   strncmp(url, "amqp://bb", 9) == 0,
	   "the second URL of a list with extra spaces");
	ok(url_nth("amqp://a", 0, &url, &len) && len == 8, "the only URL");
	ok(!url_nth("amqp://a amqp://b", 2, &url, &len) && len == 0, "no third URL of two");
	ok(!url_nth("", 0, &url, &len), "no first URL of an empty list");
}

static void whole_lists(void)
{
	static struct broker_url list[URL_BROKERS_MAX];
	char many[(URL_BROKERS_MAX + 1) * 12 + 1];
	unsigned n = 99;
	size_t i, used = 0;

	status_clear();
	ok(url_check_list("amqp://a amqps://b:5000/v   amqp://[::1]", false, list, URL_BROKERS_MAX,
			  &n) == AL_OK &&
		   n == 3,
	   "a list of three is checked");
	ok(strcmp(list[0].info.host, "a") == 0 && list[0].info.port == 5672 &&
		   strcmp(list[1].info.host, "b") == 0 && list[1].info.port == 5000 &&
		   list[1].info.ssl && strcmp(list[1].info.vhost, "v") == 0 &&
		   strcmp(list[2].info.host, "::1") == 0,
	   "each in its place");

	status_clear();
	ok(url_check_list("  ", false, list, URL_BROKERS_MAX, &n) == AL_USAGE && n == 0,
	   "an empty list is refused");
	is_str(status_message(), "no broker URL given " FORM, "an empty list: its message");

	status_clear();
	ok(url_check_list("amqp://a amqp://u:s3cret@:5672 amqp://c", false, list, URL_BROKERS_MAX,
			  &n) == AL_USAGE &&
		   n == 0,
	   "a bad second URL of three fails the list");
	is_str(status_message(), "invalid broker URL (2 of 3): no host " FORM,
	       "the message says which URL, not what it holds");
	ok(list[0].text[0] == '\0' && list[0].info.host == NULL,
	   "what was filled before is zeroed (it may hold a password)");

	status_clear();
	ok(url_check_list("amqp://a amqp://b", true, list, URL_BROKERS_MAX, &n) == AL_USAGE,
	   "TLS options with an amqp:// list are refused");
	is_str(status_message(), "--cacert, --cert, --key and --insecure need an amqps:// URL",
	       "TLS options with amqp://: its message");

	for (i = 0; i < URL_BROKERS_MAX; i++)
		used += (size_t)snprintf(many + used, sizeof(many) - used, "amqp://h%02zu ", i);
	status_clear();
	ok(url_check_list(many, false, list, URL_BROKERS_MAX, &n) == AL_OK &&
		   n == URL_BROKERS_MAX && strcmp(list[URL_BROKERS_MAX - 1].info.host, "h63") == 0,
	   "%d URLs are taken", URL_BROKERS_MAX);
	snprintf(many + used, sizeof(many) - used, "amqp://h%d", URL_BROKERS_MAX);
	status_clear();
	ok(url_check_list(many, false, list, URL_BROKERS_MAX, &n) == AL_USAGE && n == 0,
	   "%d URLs are too many", URL_BROKERS_MAX + 1);
	is_str(status_message(), "too many broker URLs (65; at most 64)", "too many: its message");
}

static void logins(void)
{
	ok(check("amqp://h", false) == AL_OK && strcmp(b.info.user, "guest") == 0 &&
		   strcmp(b.info.password, "guest") == 0,
	   "no user: guest, guest");
	ok(check("amqp://us%40er:p%3Ass@h", false) == AL_OK && strcmp(b.info.user, "us@er") == 0 &&
		   strcmp(b.info.password, "p:ss") == 0 && strcmp(b.info.host, "h") == 0,
	   "%%40 and %%3A are decoded in user and password");
	ok(check("amqp://u:p%2fw@h", false) == AL_OK && strcmp(b.info.password, "p/w") == 0,
	   "%%2f too");
	ok(check("amqp://bob@h:5672/v", false) == AL_OK && b.no_password &&
		   strcmp(b.info.user, "bob") == 0,
	   "a user without a password is noted (the login will say so)");
	ok(check("amqp://bob:@h", false) == AL_OK && !b.no_password, "an empty password is one");
	ok(check("amqp://h/v%40x", false) == AL_OK && !b.no_password,
	   "an @ in the vhost is no user");
	ok(check("amqp://bob:pw@h", false) == AL_OK && !b.no_password, "user and password");
	ok(check("amqp://h", false) == AL_OK && !b.no_password, "no user at all: the defaults");
	refused("amqp://u:p@ss@h", NULL, "a second @ (unencoded)");
	refused("amqp://u:p%00w@h", "%00", "%00 in the password");
	refused("amqp://h/v%00", "%00", "%00 in the vhost");
}

static void hosts(void)
{
	ok(check("amqp://[::1]:5672", false) == AL_OK && strcmp(b.info.host, "::1") == 0 &&
		   b.info.port == 5672,
	   "[::1]:5672");
	ok(check("amqp://[::1]", false) == AL_OK && strcmp(b.info.host, "::1") == 0 &&
		   b.info.port == 5672,
	   "[::1]: the default port");
	ok(check("amqps://u:p@[fe80::1]:5000/v", false) == AL_OK &&
		   strcmp(b.info.host, "fe80::1") == 0 && b.info.port == 5000,
	   "an IPv6 address with login, port and vhost");
	refused("amqp://[]", "no host", "[]");
	refused("amqp://[]:5672", "no host", "[]:5672");
	refused("amqp://", "no host", "amqp://");
	refused("amqp:///v", "no host", "amqp:///v");
	refused("amqp://:5672", "no host", "amqp://:5672");
	refused("amqp://u:p@", "no host", "a login and no host");
	ok(check("amqp://h.example:5672", false) == AL_OK && strcmp(b.info.host, "h.example") == 0,
	   "a host name");
}

static void vhosts(void)
{
	ok(check("amqp://h", false) == AL_OK && strcmp(b.info.vhost, "/") == 0, "no vhost: /");
	ok(check("amqp://h/", false) == AL_OK && strcmp(b.info.vhost, "/") == 0, "\"/\": /");
	ok(check("amqp://h:5672/", false) == AL_OK && strcmp(b.info.vhost, "/") == 0,
	   "\"/\" after a port: /");
	ok(check("amqp://h/%2F", false) == AL_OK && strcmp(b.info.vhost, "/") == 0, "%%2F: /");
	ok(check("amqp://h/prod", false) == AL_OK && strcmp(b.info.vhost, "prod") == 0,
	   "a named vhost");
	ok(check("amqp://h/%2Fprod", false) == AL_OK && strcmp(b.info.vhost, "/prod") == 0,
	   "%%2Fprod: /prod");
}

static void ports(void)
{
	ok(check("amqp://h", false) == AL_OK && b.info.port == 5672 && !b.info.ssl,
	   "amqp://: 5672 by default");
	ok(check("amqps://h", false) == AL_OK && b.info.port == 5671 && b.info.ssl,
	   "amqps://: 5671 by default");
	ok(check("amqp://h:1", false) == AL_OK && b.info.port == 1, "port 1");
	ok(check("amqp://h:65535/v", false) == AL_OK && b.info.port == 65535, "port 65535");
	ok(check("amqp://h:05672", false) == AL_OK && b.info.port == 5672, "a leading zero");
	refused("amqp://h:0", "a bad port", "port 0");
	refused("amqp://h:65536", NULL, "port 65536");
	refused("amqp://h:99999", NULL, "port 99999");
	refused("amqp://h:123456", "a bad port", "six digits");
	refused("amqp://h:+5672", "a bad port", "a port with +");
	refused("amqp://h:-1", "a bad port", "a port with -");
	refused("amqp://h:", "a bad port", "an empty port");
	refused("amqp://h:56:72", "a bad port", "a second colon");
	refused("amqp://[::1]:5672:1", "a bad port", "a second colon after [::1]");
	refused("amqp://h:56x", "a bad port", "a port with a letter");
}

static void characters(void)
{
	refused("amqp://h ost", "a space or control character", "a space");
	refused("amqp://h\tx", "a space or control character", "a tab");
	refused("amqp://h/v\x7f", "a space or control character", "DEL");
	refused("amqp://h/caf\xc3\xa9", "a space or control character", "a non-ASCII byte");
	status_clear();
	ok(url_check("amqp://h\0x", 10, 0, 1, false, &b) == AL_USAGE,
	   "a NUL inside the URL is refused");
	is_str(status_message(), "invalid broker URL: a space or control character " FORM,
	       "a NUL: its message");
}

static void schemes(void)
{
	refused("h:5672", "no scheme", "no scheme");
	refused("guest:guest@h", "no scheme", "a login without a scheme");
	refused("http://h", NULL, "http://");
	refused("amqpx://h", NULL, "amqpx://");
	ok(check("amqp://h", true) == AL_USAGE, "TLS options with amqp:// are refused");
	is_str(status_message(), "--cacert, --cert, --key and --insecure need an amqps:// URL",
	       "TLS options with amqp://: its message");
	ok(check("amqps://h", true) == AL_OK && b.info.ssl, "TLS options with amqps:// are taken");
}

static void lengths(void)
{
	char url[URL_MAX + 8];

	memset(url, 'h', sizeof(url));
	memcpy(url, "amqp://", 7);
	url[URL_MAX - 1] = '\0';
	ok(check(url, false) == AL_OK && strlen(b.info.host) == URL_MAX - 1 - 7,
	   "a URL of %d bytes is taken", URL_MAX - 1);
	url[URL_MAX - 1] = 'h';
	url[URL_MAX] = '\0';
	ok(check(url, false) == AL_USAGE, "a URL of %d bytes is too long", URL_MAX);
	is_str(status_message(), "broker URL is too long", "too long: its message");
	status_clear();
	ok(url_check(url, URL_MAX, 1, 2, false, &b) == AL_USAGE, "the second of two, too long");
	is_str(status_message(), "broker URL (2 of 2) is too long",
	       "too long, in a list: its message");
}

static void secrets(void)
{
	ok(check("amqp://u:s3cret@h:0", false) == AL_USAGE && !strstr(status_message(), "s3cret") &&
		   !strstr(status_message(), "u:"),
	   "a refused URL is not echoed");
	ok(b.text[0] == '\0' && b.info.password == NULL && b.info.host == NULL,
	   "a refused URL leaves nothing behind");
	ok(check("amqp://u:s3cret@h", false) == AL_OK && strcmp(b.info.password, "s3cret") == 0 &&
		   b.info.password >= b.text && b.info.password < b.text + sizeof(b.text),
	   "the parsed strings live in the struct's own buffer");
}

int main(void)
{
	lists();
	whole_lists();
	logins();
	hosts();
	vhosts();
	ports();
	characters();
	schemes();
	lengths();
	secrets();
	return done_testing();
}
