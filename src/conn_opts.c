/* The connection options, checked and resolved once per run, before any
 * connection: the URL list (url.c), the TLS files, and the password file
 * read once (a pipe or FIFO cannot be read again). Secrets that others
 * can read are refused, as ssh refuses such keys. No network. */
#include "conn.h"

#include "parse.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static enum al_status not_private(const char *what, const char *shown)
{
	return fail(AL_USAGE, "%s %s is accessible by group or others; chmod 600 it", what, shown);
}

/* Like ssh with its keys: a secret that others can read is refused. The
 * same rule holds for a named FIFO, which has the mode it was made with,
 * and a pipe (<(...), /dev/stdin) always passes it: the kernel makes it
 * 0600, and only its user's processes (through /proc/PID/fd) and root
 * can open it. */
static enum al_status check_private(int fd, const char *what, const char *shown)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && (st.st_mode & 077))
		return not_private(what, shown);
	return AL_OK;
}

/* The first line of path into buf (size bytes), without its line end; a
 * NUL ends it too. */
static enum al_status read_password_file(const char *path, char *buf, size_t size)
{
	char shown[64];
	struct stat st;
	size_t len = 0;
	ssize_t r = 0;
	int fd, e;

	parse_quote_arg(path, shown, sizeof(shown));
	/* Opening a FIFO waits for a writer: one that fstat would refuse
	 * below is refused now. */
	if (stat(path, &st) == 0 && S_ISFIFO(st.st_mode) && (st.st_mode & 077))
		return not_private("password file", shown);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return fail(AL_USAGE, "cannot read password file %s: %s", shown, strerror(errno));
	/* Read from a terminal the password would be echoed. */
	if (isatty(fd)) {
		close(fd);
		return fail(AL_USAGE,
			    "password file %s is a terminal (give a file, a pipe or a FIFO)",
			    shown);
	}
	if (check_private(fd, "password file", shown) != AL_OK) {
		close(fd);
		return AL_USAGE;
	}
	/* A byte at a time up to the line end: from a pipe (/dev/stdin)
	 * nothing past the first line is taken, and the rest is left for
	 * CMD. */
	while (len < size - 1 && (r = read(fd, buf + len, 1)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		if (buf[len++] == '\n')
			break;
	}
	e = errno;
	close(fd);
	buf[len] = '\0';
	if (r < 0) {
		explicit_bzero(buf, size);
		return fail(AL_USAGE, "cannot read password file %s: %s", shown, strerror(e));
	}
	len = strcspn(buf, "\r\n");
	if (buf[len] == '\0' && len == size - 1) {
		explicit_bzero(buf, size);
		return fail(AL_USAGE, "password in %s is longer than %zu bytes", shown, size - 2);
	}
	explicit_bzero(buf + len, size - len);
	return AL_OK;
}

/* The client's private key (in --key, or with the certificate in --cert)
 * is a secret like the password. */
static enum al_status check_key_file(const char *path)
{
	char shown[64];
	enum al_status st;
	int fd;

	parse_quote_arg(path, shown, sizeof(shown));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return fail(AL_USAGE, "cannot read private key %s: %s", shown, strerror(errno));
	st = check_private(fd, "private key", shown);
	close(fd);
	return st;
}

enum al_status conn_check_opts(struct conn_opts *o)
{
	bool tls_options = o->cacert || o->cert || o->key || o->insecure;
	enum al_status st;
	unsigned i;

	/* Every URL of the list, before anything is read: a typo in the last
	 * one is a usage error even while the first one answers, and is not
	 * left waiting for a FIFO's writer. */
	st = url_check_list(o->url, tls_options, o->broker, URL_BROKERS_MAX, &o->brokers);
	if (st == AL_OK && o->key && !o->cert)
		st = fail(AL_USAGE, "--key needs --cert");
	if (st == AL_OK && o->cert)
		st = check_key_file(o->key ? o->key : o->cert);
	if (st == AL_OK && o->password_file && !o->password_read) {
		st = read_password_file(o->password_file, o->password, sizeof(o->password));
		o->password_read = st == AL_OK;
	}
	if (st != AL_OK) {
		explicit_bzero(o->broker, o->brokers * sizeof(o->broker[0]));
		o->brokers = 0;
		return st;
	}
	if (o->password_read)
		for (i = 0; i < o->brokers; i++)
			o->broker[i].info.password = o->password;
	return AL_OK;
}
