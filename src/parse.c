#include "parse.h"

#include <errno.h>
#include <signal.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first n bytes of s: digits, and with allow_point one '.'. */
static const char *digits_problem(const char *s, size_t n, int allow_point)
{
	int digits = 0, points = 0;
	const char *end = s + n;

	if (n == 0)
		return "is empty";
	for (; s < end; s++) {
		if (*s >= '0' && *s <= '9')
			digits++;
		else if (*s == '.' && allow_point && points++ == 0)
			continue;
		else
			return allow_point ? "is not a duration (seconds, or with s, m or h: 90, "
					     "1.5m, 2h)"
					   : "is not a whole number";
	}
	return digits ? NULL : "is not a number";
}

const char *parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	const char *why = digits_problem(s, strlen(s), 0);
	unsigned long v;

	if (why)
		return why;
	errno = 0;
	v = strtoul(s, NULL, 10);
	if (errno == ERANGE || v > max)
		return "is too large";
	if (v < min)
		return "is too small";
	*out = v;
	return NULL;
}

const char *parse_seconds(const char *s, double max, double *out)
{
	size_t n = strlen(s);
	double unit = 1, v;
	const char *why;

	/* One unit at the end, systemd's habit: 90s, 1.5m, 2h. */
	if (n > 0 && (s[n - 1] == 's' || s[n - 1] == 'm' || s[n - 1] == 'h')) {
		unit = s[n - 1] == 'h' ? 3600 : s[n - 1] == 'm' ? 60 : 1;
		n--;
	}
	if ((why = digits_problem(s, n, 1)))
		return why;
	/* (strtod stops at the unit) */
	v = strtod(s, NULL) * unit;
	if (v > max)
		return "is too large";
	*out = v;
	return NULL;
}

char *parse_quote_arg(const char *s, char *buf, size_t size)
{
	size_t n = 0;

	buf[n++] = '"';
	/* Room is kept for one escape, "...", the quote and the NUL. */
	for (; *s && n + 9 < size; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c > 0x7e || c == '"' || c == '\\')
			n += (size_t)snprintf(buf + n, 5, "\\x%02x", c);
		else
			buf[n++] = (char)c;
	}
	if (*s) {
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n++] = '"';
	buf[n] = '\0';
	return buf;
}

const char *parse_signal(const char *s, int *out)
{
	unsigned long n;
	const char *abbrev;
	int sig;

	if (*s >= '0' && *s <= '9') {
		if (parse_uint(s, 1, NSIG - 1, &n))
			return "is not a signal number";
		*out = (int)n;
		return NULL;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (sig = 1; sig < NSIG; sig++) {
		abbrev = sigabbrev_np(sig);
		if (abbrev && *s && strcasecmp(s, abbrev) == 0) {
			*out = sig;
			return NULL;
		}
	}
	return "is not a signal name";
}

const char *parse_label(const char *s)
{
	size_t i;

	if (!*s)
		return "is empty";
	for (i = 0; s[i]; i++) {
		if (i == PARSE_LABEL_MAX)
			return "is longer than 64 bytes";
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			return "may hold only printable ASCII (letters, digits, spaces, "
			       "punctuation)";
	}
	return NULL;
}

const char *parse_version(const char *s, size_t len, unsigned long *out)
{
	unsigned long part[3] = {0, 0, 0}, limit[3] = {4293, 999, 999};
	size_t i = 0, k;

	for (k = 0; k < 3; k++) {
		size_t digits = 0;

		if (k > 0 && (i >= len || s[i++] != '.'))
			return "not MAJOR.MINOR.PATCH";
		for (; i < len && s[i] >= '0' && s[i] <= '9' && digits < 7; i++, digits++)
			part[k] = part[k] * 10 + (unsigned long)(s[i] - '0');
		if (digits == 0)
			return "not MAJOR.MINOR.PATCH";
		if (part[k] > limit[k])
			return "a part is too large";
	}
	if (i < len && s[i] >= '0' && s[i] <= '9')
		return "a part is too large";
	*out = part[0] * 1000000 + part[1] * 1000 + part[2];
	return NULL;
}

char *parse_printable_copy(char *dst, size_t size, const void *src, size_t len)
{
	const unsigned char *p = src;
	size_t i;

	if (len >= size)
		len = size - 1;
	for (i = 0; i < len; i++)
		dst[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
	dst[len] = '\0';
	return dst;
}
