/* Parsing of numbers and durations given on the command line, and of the
 * broker's version (connect.c). Pure
 * functions: each returns NULL on success or a short reason for a usage
 * message. Only plain decimal is accepted, so "0x10", "1e3", " 5" and "+5"
 * are refused rather than guessed at (a duration may end in a unit). */
#ifndef AMQPLOCK_PARSE_H
#define AMQPLOCK_PARSE_H

#include <stddef.h>

/* A whole number in [min, max]. */
const char *parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out);

/* A duration in seconds, in [0, max]: a number with an optional fraction
 * ("2", "0.5", ".25"), and optionally one unit after it: s, m (60 s) or
 * h (3600 s): "90s", "1.5m", "2h". */
const char *parse_seconds(const char *s, double max, double *out);

/* A signal by name ("TERM", "SIGTERM", "term") or number ("15"). */
const char *parse_signal(const char *s, int *out);

/* A label (hold --label): 1 to PARSE_LABEL_MAX bytes of printable ASCII,
 * what status prints of it as it is (an answer's other bytes read as '?'). */
#define PARSE_LABEL_MAX 64
const char *parse_label(const char *s);

/* A broker's version, "MAJOR.MINOR.PATCH" with anything after the patch
 * number ("4.2.6+1.g1234", "3.10.8-1") ignored, as one number that
 * compares as versions do: MAJOR * 1000000 + MINOR * 1000 + PATCH. */
const char *parse_version(const char *s, size_t len, unsigned long *out);

/* Copies s into buf (size >= 16) as a double-quoted string safe for one
 * line of a message and for JSON: bytes outside printable ASCII become
 * \xNN, and a long s is cut short with "...". Returns buf. */
char *parse_quote_arg(const char *s, char *buf, size_t size);

/* Copies len bytes of text from the broker (a reply text, a host name)
 * into dst (size bytes), anything but printable ASCII replaced by '?' and
 * cut to fit: a message stays one line and valid JSON. Returns dst. */
char *parse_printable_copy(char *dst, size_t size, const void *src, size_t len);

#endif
