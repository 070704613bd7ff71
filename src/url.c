#include "url.h"

#include <stdio.h>
#include <string.h>

/* The URLs of a list are separated by spaces: a URL never holds one (it
 * would be %20). Other white space stays in, to be refused. */
#define URL_SEPARATOR " "

static const char form[] = "expected amqp[s]://[user[:password]@]host[:port][/vhost]";

/* What amqp_parse_url lets through but a URL on a command line more likely
 * means by mistake: an empty host (it puts in "localhost"), a port with a
 * sign, a space or a second colon (it reads a number where it can),
 * spaces and control characters, and %00 (which cuts a user or vhost
 * short). NULL if none, else why. */
static const char *url_problem(const char *url)
{
	const char *p = strstr(url, "://"), *end, *at, *c, *bracket;

	for (c = url; *c; c++)
		if (*c <= ' ' || *c >= 0x7f)
			return "a space or control character";
	if (strstr(url, "%00"))
		return "%00";
	if (!p)
		return "no scheme";
	p += 3;
	end = p + strcspn(p, "/?#");
	for (at = p; at < end; at++)
		if (*at == '@')
			p = at + 1;
	if (*p == '[') { /* [IPv6 address], not empty */
		bracket = memchr(p, ']', (size_t)(end - p));
		if (bracket == p + 1)
			return "no host";
		p = bracket ? bracket + 1 : end;
	} else if (p == end || *p == ':')
		return "no host";
	else
		p += strcspn(p, ":/?#");
	if (p < end && *p == ':') {
		size_t digits = strspn(p + 1, "0123456789");

		if (digits == 0 || digits > 5 || p + 1 + digits != end)
			return "a bad port";
	}
	return NULL;
}

bool url_nth(const char *list, unsigned nth, const char **url, size_t *len)
{
	*url = list;
	*len = 0;
	if (!list)
		return false;
	for (;;) {
		list += strspn(list, URL_SEPARATOR);
		*len = strcspn(list, URL_SEPARATOR);
		if (*len == 0)
			return false;
		if (nth-- == 0)
			break;
		list += *len;
	}
	*url = list;
	return true;
}

unsigned url_count(const char *list)
{
	const char *url;
	size_t len;
	unsigned n = 0;

	while (url_nth(list, n, &url, &len))
		n++;
	return n;
}

/* Whether url's authority has a user and no ":password" before its "@". */
static bool names_user_only(const char *url)
{
	const char *p = strstr(url, "://"), *at;
	size_t authority;

	if (!p)
		return false;
	p += 3;
	authority = strcspn(p, "/?#");
	at = memchr(p, '@', authority);
	return at && at > p && !memchr(p, ':', (size_t)(at - p));
}

static enum al_status refuse(struct broker_url *b, enum al_status st)
{
	explicit_bzero(b, sizeof(*b));
	return st;
}

enum al_status url_check(const char *url, size_t len, unsigned nth, unsigned n, bool tls_options,
			 struct broker_url *b)
{
	struct amqp_connection_info *info = &b->info;
	const char *why;
	char which[48] = "";

	/* Never echo the URL back: it may hold a password. Say which one. */
	if (n > 1)
		snprintf(which, sizeof(which), " (%u of %u)", nth + 1, n);
	if (len >= sizeof(b->text))
		return refuse(b, fail(AL_USAGE, "broker URL%s is too long", which));
	memcpy(b->text, url, len);
	b->text[len] = '\0';
	amqp_default_connection_info(info);
	if (strlen(b->text) != len) /* a NUL inside */
		why = "a space or control character";
	else
		why = url_problem(b->text);
	if (why)
		return refuse(b, fail(AL_USAGE, "invalid broker URL%s: %s (%s)", which, why, form));
	b->no_password = names_user_only(b->text);
	if (amqp_parse_url(b->text, info) != AMQP_STATUS_OK)
		return refuse(b, fail(AL_USAGE, "invalid broker URL%s (%s)", which, form));
	if (info->port <= 0 || info->port > 65535)
		return refuse(b,
			      fail(AL_USAGE, "invalid broker URL%s: a bad port (%s)", which, form));
	/* amqp_parse_url reads "amqp://host/" as the vhost "", which no
	 * broker has; like most clients we take it to mean the default "/". */
	if (info->vhost[0] == '\0')
		info->vhost = "/";
	if (tls_options && !info->ssl)
		return refuse(b, fail(AL_USAGE, "--cacert, --cert, --key and --insecure need an "
						"amqps:// URL"));
	return AL_OK;
}

enum al_status url_check_list(const char *list, bool tls_options, struct broker_url *b,
			      unsigned max, unsigned *n)
{
	unsigned count = url_count(list), i;
	const char *url;
	size_t len;
	enum al_status st;

	*n = 0;
	if (count == 0)
		return fail(AL_USAGE, "no broker URL given (%s)", form);
	if (count > max)
		return fail(AL_USAGE, "too many broker URLs (%u; at most %u)", count, max);
	/* Every URL of the list: a typo in the last one is a usage error
	 * even while the first one answers. */
	for (i = 0; i < count; i++) {
		url_nth(list, i, &url, &len);
		if ((st = url_check(url, len, i, count, tls_options, &b[i])) != AL_OK) {
			explicit_bzero(b, i * sizeof(*b));
			return st;
		}
	}
	*n = count;
	return AL_OK;
}
