/* libFuzzer target for conn_check_opts (src/conn.c): the broker URL and the
 * password file, checked before any connection is made. conn_check_opts
 * only parses the URL (amqp_parse_url) and opens, stats and reads local
 * files: it never touches the network.
 *
 * Input: a mode byte, then the data. Mode bit 0 clear: the data (cut at its
 * first NUL) is the URL; bit 1 also sets --insecure, which needs amqps://.
 * Bit 0 set: the data, NULs and all, is the content of a password file
 * (created once with mkstemp in $TMPDIR or /tmp, mode 0600, removed at
 * exit) and the URL is a fixed valid one; bit 1 makes the file readable by
 * its group, which must be refused. A broken invariant abort()s. */
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

/* One URL of a list that conn_check_opts accepted. */
static void check_good_url(const char *url, size_t len, bool insecure)
{
	struct amqp_connection_info info;
	char copy[1024];

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
}

static void check_url(const char *url, bool insecure)
{
	struct conn_opts o = {.url = url, .insecure = insecure};
	enum al_status st = conn_check_opts(&o);
	char buf[512];
	const char *msg = unnumbered(status_message(), buf, sizeof(buf));
	size_t len, urls = 0;

	check(st == AL_OK || st == AL_USAGE);
	check((st == AL_OK) == (msg[0] == '\0'));
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
		      starts_with(msg, "--cacert, --cert, --key and --insecure need"));
		return;
	}
	/* A list: URLs separated by spaces, each one good. */
	for (; *url; url += len) {
		url += strspn(url, " ");
		len = strcspn(url, " ");
		if (len) {
			check_good_url(url, len, insecure);
			urls++;
		}
	}
	check(urls > 0);
}

static void check_password_file(const uint8_t *data, size_t size, bool group_readable)
{
	struct conn_opts o = {.url = GOOD_URL, .password_file = pw_path};
	char shown[64], want[256];
	enum al_status st;
	size_t i, scan;
	bool too_long;

	if (ftruncate(pw_fd, 0) != 0 || (size && pwrite(pw_fd, data, size, 0) != (ssize_t)size) ||
	    fchmod(pw_fd, group_readable ? 0640 : 0600) != 0) {
		perror(pw_path);
		abort();
	}
	st = conn_check_opts(&o);
	quote_arg(pw_path, shown, sizeof(shown));
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
	for (i = 0; i < scan; i++)
		if (data[i] == '\n' || data[i] == '\r' || data[i] == '\0')
			too_long = false;
	if (too_long) {
		snprintf(want, sizeof(want), "password in %s is longer than %d bytes", shown,
			 PW_MAX);
		check(st == AL_USAGE && strcmp(status_message(), want) == 0);
	} else {
		check(st == AL_OK && status_message()[0] == '\0');
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
