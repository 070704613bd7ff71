/* libFuzzer target for src/parse.c: parse_uint, parse_seconds, parse_signal,
 * parse_version and parse_quote_arg.
 *
 * Input: a range selector byte (values 0-6 pick a range from the table
 * below; 7 takes min and max for parse_uint from the next 16 bytes), a byte
 * giving parse_quote_arg's buffer size (16 + byte), then the string under test
 * (cut at its first NUL). Each function is checked against an independent
 * statement of its contract; a broken invariant abort()s. */
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check.h"
#include "parse.h"

static const struct {
	unsigned long min, max;
	double max_seconds;
} ranges[] = {
	{0, 0xfffffffful, 1e6},        {1, 10000, 0}, {1, 64, 1},   {0, 255, 86400.5},
	{0, (unsigned long)-1, 1e300}, {5, 4, 0.25},  {1, 1, 1e-9},
};

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* Compares two decimal digit strings by value (leading zeros allowed). */
static int cmp_decimal(const char *a, const char *b)
{
	size_t la, lb;
	int c;

	while (*a == '0' && a[1])
		a++;
	while (*b == '0' && b[1])
		b++;
	la = strlen(a);
	lb = strlen(b);
	if (la != lb)
		return la < lb ? -1 : 1;
	c = strcmp(a, b);
	return (c > 0) - (c < 0);
}

static void check_uint(const char *s, unsigned long min, unsigned long max)
{
	char smin[32], smax[32], back[32];
	unsigned long v = 12345;
	const char *why = parse_uint(s, min, max, &v);
	const char *t = s;

	snprintf(smin, sizeof(smin), "%lu", min);
	snprintf(smax, sizeof(smax), "%lu", max);
	if (!all_digits(s)) {
		check(why != NULL && v == 12345);
		return;
	}
	if (cmp_decimal(s, smax) > 0) {
		check(why && strcmp(why, "is too large") == 0 && v == 12345);
		return;
	}
	if (cmp_decimal(s, smin) < 0) {
		check(why && strcmp(why, "is too small") == 0 && v == 12345);
		return;
	}
	check(why == NULL);
	check(v >= min && v <= max);
	/* Printed back it is the input, less any leading zeros. */
	while (*t == '0' && t[1])
		t++;
	snprintf(back, sizeof(back), "%lu", v);
	check(strcmp(back, t) == 0);
}

static void check_seconds(const char *s, double max)
{
	double v = -7, unit = 1;
	const char *why = parse_seconds(s, max, &v);
	const char *p, *end = s + strlen(s);
	int digits = 0, points = 0;
	bool form;

	/* one unit at the end: s, m or h */
	if (end > s && strchr("smh", end[-1])) {
		unit = end[-1] == 'h' ? 3600 : end[-1] == 'm' ? 60 : 1;
		end--;
	}
	form = end > s;
	for (p = s; p < end; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p == '.')
			points++;
		else
			form = false;
	}
	form = form && digits > 0 && points <= 1;
	if (!form) {
		check(why != NULL && v == -7);
		return;
	}
	if (strtod(s, NULL) * unit > max) {
		check(why != NULL && v == -7);
		return;
	}
	check(why == NULL);
	check(!isnan(v) && v >= 0 && v <= max);
	check(v == strtod(s, NULL) * unit);
}

static void check_signal(const char *s)
{
	int sig = -1, again, ref = 0, i;
	const char *why = parse_signal(s, &sig);
	const char *n = s, *abbrev;
	char buf[32];

	if (*s >= '0' && *s <= '9') {
		if (all_digits(s)) {
			snprintf(buf, sizeof(buf), "%d", NSIG - 1);
			if (cmp_decimal(s, "1") >= 0 && cmp_decimal(s, buf) <= 0)
				ref = atoi(s);
		}
	} else {
		if (strncasecmp(n, "SIG", 3) == 0)
			n += 3;
		for (i = 1; i < NSIG && *n && !ref; i++) {
			abbrev = sigabbrev_np(i);
			if (abbrev && strcasecmp(n, abbrev) == 0)
				ref = i;
		}
	}
	if (!ref) {
		check(why != NULL && sig == -1);
		return;
	}
	check(why == NULL && sig == ref);
	check(sig >= 1 && sig < NSIG);
	/* Its number and its names lead back to it. */
	snprintf(buf, sizeof(buf), "%d", sig);
	check(parse_signal(buf, &again) == NULL && again == sig);
	abbrev = sigabbrev_np(sig);
	if (abbrev) {
		check(parse_signal(abbrev, &again) == NULL && again == sig);
		snprintf(buf, sizeof(buf), "sig%s", abbrev);
		check(parse_signal(buf, &again) == NULL && again == sig);
	}
}

static int hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static bool needs_escape(unsigned char c)
{
	return c < 0x20 || c > 0x7e || c == '"' || c == '\\';
}

static void check_quote(const char *s, size_t size)
{
	/* Exactly size bytes, so that ASan catches a write past the end. */
	char *buf = malloc(size), *dec;
	size_t len, i, n = 0, slen = strlen(s);
	char *r;

	if (!buf)
		abort();
	memset(buf, 0x55, size);
	r = parse_quote_arg(s, buf, size);
	check(r == buf);
	check(memchr(buf, 0, size) != NULL);
	len = strlen(buf);
	check(len < size && len >= 2);
	check(buf[0] == '"' && buf[len - 1] == '"');
	for (i = 0; i < len; i++)
		check(buf[i] >= 0x20 && buf[i] <= 0x7e);
	/* Undo the quoting: plain printable bytes, and \xNN (lower-case hex)
	 * only for the bytes that need it. */
	dec = malloc(len);
	if (!dec)
		abort();
	for (i = 1; i < len - 1; i++) {
		check(buf[i] != '"');
		if (buf[i] == '\\') {
			int hi, lo;

			check(i + 3 < len - 1 && buf[i + 1] == 'x');
			hi = hex(buf[i + 2]);
			lo = hex(buf[i + 3]);
			check(hi >= 0 && lo >= 0);
			dec[n] = (char)(hi * 16 + lo);
			check(needs_escape((unsigned char)dec[n]));
			check(dec[n] != '\0');
			n++;
			i += 3;
		} else {
			dec[n++] = buf[i];
		}
	}
	if (!(n == slen && memcmp(dec, s, n) == 0)) {
		/* Cut short: what is shown is a proper prefix of s, then "...",
		 * and the cut happened only for lack of room. */
		check(n >= 3 && memcmp(dec + n - 3, "...", 3) == 0);
		check(n - 3 < slen && memcmp(dec, s, n - 3) == 0);
		check(len + 5 >= size);
	}
	free(dec);
	free(buf);
}

/* parse_version reads only its len bytes (s is not NUL-terminated
 * there), and what it accepts starts with three dot-separated numbers
 * that give back its value. */
static void check_version(const char *s, size_t len)
{
	char *copy = malloc(len ? len : 1), *end;
	unsigned long v = 7, major, minor, patch;

	if (!copy)
		abort();
	memcpy(copy, s, len);
	if (parse_version(copy, len, &v) == NULL) {
		check(len >= 5 && copy[0] >= '0' && copy[0] <= '9');
		major = strtoul(s, &end, 10);
		check(*end == '.');
		minor = strtoul(end + 1, &end, 10);
		check(*end == '.');
		patch = strtoul(end + 1, &end, 10);
		check(minor < 1000 && patch < 1000 && v == major * 1000000 + minor * 1000 + patch);
	} else {
		check(v == 7);
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned long min, max;
	double max_seconds;
	size_t qsize, off = 2, len;
	unsigned sel;
	char *s;

	if (size < 2)
		return 0;
	sel = data[0] & 7;
	qsize = 16 + data[1];
	if (sel < sizeof(ranges) / sizeof(ranges[0])) {
		min = ranges[sel].min;
		max = ranges[sel].max;
		max_seconds = ranges[sel].max_seconds;
	} else {
		if (size < 18)
			return 0;
		memcpy(&min, data + 2, sizeof(min));
		memcpy(&max, data + 10, sizeof(max));
		max_seconds = 1e6;
		off = 18;
	}
	len = strnlen((const char *)data + off, size - off);
	s = malloc(len + 1);
	if (!s)
		abort();
	memcpy(s, data + off, len);
	s[len] = '\0';

	check_uint(s, min, max);
	check_uint(s, 0, (unsigned long)-1);
	check_seconds(s, max_seconds);
	check_seconds(s, 1e6);
	check_signal(s);
	check_quote(s, qsize);
	check_quote(s, 16);
	check_quote(s, 64);
	check_version(s, len);

	free(s);
	return 0;
}
