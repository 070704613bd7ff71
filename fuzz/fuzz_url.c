/* libFuzzer target for conn_check_opts (src/conn_opts.c): the broker URL list
 * and the password file, checked and resolved into struct conn_opts before
 * any connection is made. conn_check_opts only parses the URLs (src/url.c,
 * amqp_parse_url) and opens, stats and reads local files: it never touches
 * the network.
 *
 * Input: a mode byte, then the data. Mode bit 0 clear: the data (cut at its
 * first NUL) is the URL; bit 1 also sets --insecure, which needs amqps://.
 * Bit 0 set: the data, NULs and all, is the content of a password file
 * (created once with mkstemp in $TMPDIR or /tmp, mode 0600, removed at
 * exit) and the URL is a fixed valid one; bit 1 makes the file readable by
 * its group, which must be refused. A broken invariant abort()s.
 *
 * What is checked: only the fixed usage messages, never the URL echoed;
 * a list is accepted only if each URL is, and then each resolved broker
 * is what amqp_parse_url makes of the URL (with "/" for an empty vhost);
 * a password file's first line becomes every broker's password. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conn.h"
#include "parse.h"
#include "status.h"

#define CHECK_CONTEXT() fprintf(stderr, "status message: \"%s\"\n", status_message())
#include "check.h"

#define GOOD_URL "amqp://guest:guest@127.0.0.1:5672/"
#define PW_MAX   254 /* the longest password a file may hold */

static char pw_path[4096];
static int pw_fd = -1;

static void remove_pw_file(void)
{
	if (pw_fd >= 0) {
		unlink(pw_path);
		close(pw_fd);
		pw_fd = -1;
	}
}

static void make_pw_file(void)
{
	const char *dir = getenv("TMPDIR");

	if (!dir || !*dir)
		dir = "/tmp";
	snprintf(pw_path, sizeof(pw_path), "%s/amqplock-fuzz-pw.XXXXXX", dir);
	pw_fd = mkstemp(pw_path); /* mode 0600 */
	if (pw_fd < 0) {
		perror(pw_path);
		abort();
	}
	atexit(remove_pw_file);
}

static bool starts_with(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* The message without the " (i of n)" that names a URL of a list. */
static const char *unnumbered(const char *msg, char *buf, size_t size)
{
	const char *open = strstr(msg, " (");
	unsigned i, n;
	int used = 0;

	if (open && sscanf(open, " (%u of %u)%n", &i, &n, &used) == 2 && used > 0 && i >= 1 &&
	    i <= n && n > 1) {
		snprintf(buf, size, "%.*s%s", (int)(open - msg), msg, open + used);
		return buf;
	}
	return msg;
}

/* The options of one run: static, for struct conn_opts holds every
 * broker's URL (some 70 kB). */
static struct conn_opts o;

/* One URL of a list that conn_check_opts accepted, as it resolved it. */
static void check_good_url(const char *url, size_t len, bool insecure, const struct broker_url *got)
{
	struct amqp_connection_info info;
	char copy[URL_MAX];

	check(len < sizeof(copy));
	memcpy(copy, url, len);
	copy[len] = '\0';
	/* What amqp_parse_url would take but a URL may not hold. */
	check(!strstr(copy, "%00"));
	for (const char *p = copy; *p; p++)
		check(*p > ' ' && *p < 0x7f);
	check(starts_with(copy, "amqp://") || starts_with(copy, "amqps://"));
	if (insecure)
		check(starts_with(copy, "amqps://"));
	/* The same URL parsed here gives a host and a usable port. */
	amqp_default_connection_info(&info);
	check(amqp_parse_url(copy, &info) == AMQP_STATUS_OK);
	check(info.host && info.host[0] != '\0');
	check(info.port > 0 && info.port <= 65535);
	/* ... and what conn_check_opts resolved, in its own buffer. */
	check(strcmp(got->info.host, info.host) == 0);
	check(got->info.port == info.port);
	check(got->info.ssl == info.ssl);
	check(strcmp(got->info.user, info.user) == 0);
	check(strcmp(got->info.password, info.password) == 0);
	check(strcmp(got->info.vhost, info.vhost[0] ? info.vhost : "/") == 0);
	check(got->info.host >= got->text && got->info.host < got->text + sizeof(got->text));
}

/* The URLs of a list, counted here on their own. */
static size_t count_urls(const char *url)
{
	size_t len, n = 0;

	for (; *url; url += len) {
		url += strspn(url, " ");
		len = strcspn(url, " ");
		if (len)
			n++;
	}
	return n;
}

static void check_url(const char *url, bool insecure)
{
	enum al_status st;
	char buf[512];
	const char *msg;
	size_t len, urls = count_urls(url), i = 0;

	memset(&o, 0, sizeof(o));
	o.url = url;
	o.insecure = insecure;
	st = conn_check_opts(&o);
	msg = unnumbered(status_message(), buf, sizeof(buf));
	check(st == AL_OK || st == AL_USAGE);
	check((st == AL_OK) == (msg[0] == '\0'));
	check(st == AL_OK ? o.brokers == urls : o.brokers == 0);
	if (urls == 0)
		check(st == AL_USAGE && starts_with(msg, "no broker URL given (expected "));
	if (urls > URL_BROKERS_MAX) {
		snprintf(buf, sizeof(buf), "too many broker URLs (%zu; at most %d)", urls,
			 URL_BROKERS_MAX);
		check(st == AL_USAGE && strcmp(msg, buf) == 0);
	}
	if (st == AL_USAGE) {
		/* Fixed texts only: the URL, which may hold a password, is
		 * never echoed. */
		check(strcmp(msg, "broker URL is too long") == 0 ||
		      starts_with(msg, "no broker URL given (expected ") ||
		      starts_with(msg, "invalid broker URL (expected ") ||
		      starts_with(msg, "invalid broker URL: no host (expected ") ||
		      starts_with(msg, "invalid broker URL: no scheme (expected ") ||
		      starts_with(msg, "invalid broker URL: a bad port (expected ") ||
		      starts_with(msg, "invalid broker URL: %00 (expected ") ||
		      starts_with(msg,
				  "invalid broker URL: a space or control character (expected ") ||
		      starts_with(msg, "too many broker URLs (") ||
		      starts_with(msg, "--cacert, --cert, --key and --insecure need"));
		return;
	}
	/* A list: URLs separated by spaces, each one good. */
	for (; *url; url += len) {
		url += strspn(url, " ");
		len = strcspn(url, " ");
		if (len) {
			check_good_url(url, len, insecure, &o.broker[i]);
			i++;
		}
	}
	check(i == o.brokers && i > 0);
}

static void check_password_file(const uint8_t *data, size_t size, bool group_readable)
{
	char shown[64], want[256];
	enum al_status st;
	size_t i, scan, line;
	bool too_long;

	memset(&o, 0, sizeof(o));
	o.url = GOOD_URL;
	o.password_file = pw_path;
	if (ftruncate(pw_fd, 0) != 0 || (size && pwrite(pw_fd, data, size, 0) != (ssize_t)size) ||
	    fchmod(pw_fd, group_readable ? 0640 : 0600) != 0) {
		perror(pw_path);
		abort();
	}
	st = conn_check_opts(&o);
	parse_quote_arg(pw_path, shown, sizeof(shown));
	if (group_readable) {
		snprintf(want, sizeof(want),
			 "password file %s is accessible by group or others; chmod 600 it", shown);
		check(st == AL_USAGE && strcmp(status_message(), want) == 0);
		return;
	}
	/* The first line is the password: refused only when no line end (or
	 * NUL) comes within its first PW_MAX + 1 bytes. */
	scan = size < PW_MAX + 1 ? size : PW_MAX + 1;
	too_long = size >= PW_MAX + 1;
	for (i = 0, line = scan; i < scan; i++)
		if (data[i] == '\n' || data[i] == '\r' || data[i] == '\0') {
			too_long = false;
			if (line == scan)
				line = i;
		}
	if (too_long) {
		snprintf(want, sizeof(want), "password in %s is longer than %d bytes", shown,
			 PW_MAX);
		check(st == AL_USAGE && strcmp(status_message(), want) == 0);
	} else {
		check(st == AL_OK && status_message()[0] == '\0');
		/* The first line, and it is the broker's password. */
		check(o.password_read && o.brokers == 1);
		check(strlen(o.password) == line && memcmp(o.password, data, line) == 0);
		check(o.broker[0].info.password == o.password);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t mode;

	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	status_clear();
	if (mode & 1) {
		if (pw_fd < 0)
			make_pw_file();
		check_password_file(data, size, (mode & 2) != 0);
	} else {
		char *url = strndup((const char *)data, size);

		if (!url)
			abort();
		check_url(url, (mode & 2) != 0);
		free(url);
	}
	status_clear();
	return 0;
}
