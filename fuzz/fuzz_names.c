/* libFuzzer target for src/names.c: semaphore names, prefixes and the queue
 * names made from them.
 *
 * Input: one flag byte (bit 0: slot kind A or B; bit 1: the second
 * semaphore has its own prefix), four bytes of slot number (little-endian),
 * then strings separated by NUL bytes: a prefix, a name, a second prefix, a
 * second name and a queue name (the queue takes the rest of the input, NULs
 * included). Every function is checked against an independent statement of
 * its contract; a broken invariant abort()s. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "names.h"

static bool allowed_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == ':' || c == '-';
}

static bool all_allowed(const char *s)
{
	for (; *s; s++)
		if (!allowed_char((unsigned char)*s))
			return false;
	return true;
}

/* s ends in "-<one or more digits>-" and A, B, D or L. */
static bool reserved_suffix(const char *s)
{
	size_t len = strlen(s), digits = 0;

	if (len < 2 || s[len - 2] != '-' ||
	    (s[len - 1] != 'A' && s[len - 1] != 'B' && s[len - 1] != 'D' && s[len - 1] != 'L'))
		return false;
	len -= 2;
	while (len > 0 && s[len - 1] >= '0' && s[len - 1] <= '9') {
		len--;
		digits++;
	}
	return digits > 0 && len > 0 && s[len - 1] == '-';
}

static bool name_ok(const char *name)
{
	size_t len = strlen(name);

	return len >= 1 && len <= NAME_MAX_BYTES && all_allowed(name) && !reserved_suffix(name);
}

/* Next NUL-terminated piece of the input, as a fresh heap string of exactly
 * its size, so that ASan sees any read past its end. */
static char *take(const uint8_t **p, size_t *left)
{
	const uint8_t *nul = memchr(*p, 0, *left);
	size_t len = nul ? (size_t)(nul - *p) : *left;
	char *s = malloc(len + 1);

	if (!s)
		abort();
	memcpy(s, *p, len);
	s[len] = '\0';
	*p += nul ? len + 1 : len;
	*left -= nul ? len + 1 : len;
	return s;
}

/* The queue name of slot k, and that it parses back to k (or to 0 for a
 * number outside 1..SLOTS_MAX * 10, the widest range parse accepts). */
static void check_slot_round_trip(const struct sem_name *sn, unsigned k, enum slot_kind kind)
{
	enum slot_kind other = kind == SLOT_QUEUE ? HOLDER_QUEUE : SLOT_QUEUE;
	char buf[QUEUE_NAME_MAX + 1], want[QUEUE_NAME_MAX + 64];
	unsigned got;
	size_t len;

	memset(buf, 0x55, sizeof(buf));
	sem_name_slot(sn, k, kind, buf);
	check(memchr(buf, 0, sizeof(buf)) != NULL);
	len = strlen(buf);
	snprintf(want, sizeof(want), "%s-%u-%c", sn->base, k, (char)kind);
	/* Every valid prefix and name leaves room for any unsigned. */
	check(strlen(want) <= QUEUE_NAME_MAX);
	check(strcmp(buf, want) == 0);
	got = sem_name_parse_slot(sn, buf, len, kind);
	if (k >= 1 && k <= SLOTS_MAX)
		check(got == k);
	else
		check(got == 0 || (got == k && k <= SLOTS_MAX * 10u));
	check(sem_name_parse_slot(sn, buf, len, other) == 0);
	/* The admin mutex is never a slot or holder queue of its own. */
	check(sem_name_parse_slot(sn, sn->base, sn->len, kind) == 0);
}

/* Whatever parses as a slot is that slot's queue name, written the one
 * canonical way. */
static void check_parse(const struct sem_name *sn, const char *queue, size_t len,
			enum slot_kind kind)
{
	char buf[QUEUE_NAME_MAX + 1];
	unsigned got = sem_name_parse_slot(sn, queue, len, kind);

	if (got == 0)
		return;
	check(got <= SLOTS_MAX * 10u);
	sem_name_slot(sn, got, kind, buf);
	check(strlen(buf) == len && memcmp(buf, queue, len) == 0);
}

/* a and b are semaphores with different admin mutexes. */
static void check_pair(const struct sem_name *a, const struct sem_name *b, unsigned k,
		       enum slot_kind kind)
{
	char q[QUEUE_NAME_MAX + 1];
	size_t len;

	sem_name_slot(b, k, kind, q);
	len = strlen(q);
	check(strcmp(q, a->base) != 0);
	check(sem_name_parse_slot(a, q, len, SLOT_QUEUE) == 0);
	check(sem_name_parse_slot(a, q, len, HOLDER_QUEUE) == 0);
	check(sem_name_parse_slot(b, a->base, a->len, SLOT_QUEUE) == 0);
	check(sem_name_parse_slot(b, a->base, a->len, HOLDER_QUEUE) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data;
	size_t left = size, qlen;
	enum slot_kind kind;
	unsigned slot;
	char *prefix, *name, *prefix2, *name2, *queue;
	const char *p2;
	bool own_prefix;
	const char *why, *why2, *pwhy;
	struct sem_name sn, sn2;
	char buf[QUEUE_NAME_MAX + 1];

	if (size < 5)
		return 0;
	kind = (data[0] & 1) ? HOLDER_QUEUE : SLOT_QUEUE;
	own_prefix = (data[0] & 2) != 0;
	slot = (unsigned)data[1] | (unsigned)data[2] << 8 | (unsigned)data[3] << 16 |
	       (unsigned)data[4] << 24;
	p += 5;
	left -= 5;
	prefix = take(&p, &left);
	name = take(&p, &left);
	prefix2 = take(&p, &left);
	name2 = take(&p, &left);
	/* The queue is a length-counted buffer of the rest, NULs and all. */
	qlen = left;
	queue = malloc(qlen ? qlen : 1);
	if (!queue)
		abort();
	memcpy(queue, p, qlen);

	why = names_problem(name);
	check(!why == name_ok(name));
	check(!why || *why);
	check(!names_problem(name2) == name_ok(name2));
	pwhy = names_prefix_problem(prefix);
	check(!pwhy == (strlen(prefix) <= PREFIX_MAX_BYTES && all_allowed(prefix)));
	check(!names_prefix_problem(prefix2) ==
	      (strlen(prefix2) <= PREFIX_MAX_BYTES && all_allowed(prefix2)));

	/* Meant for checked input, but safe with any strings. */
	if (!sem_name_init(&sn, prefix, name))
		check(sn.len == strlen(sn.base) && sn.len == strlen(prefix) + strlen(name));

	if (!pwhy && !why) {
		size_t plen = strlen(prefix), nlen = strlen(name);

		memset(&sn, 0x55, sizeof(sn));
		why2 = sem_name_init(&sn, prefix, name);
		/* Any valid prefix and name fit together. Refused: "amq." at
		 * the start, or a slot queue suffix made of prefix and name
		 * together (prefix "p-" and name "1-A"). */
		check(plen + nlen <= BASE_MAX);
		snprintf(buf, sizeof(buf), "%s%s", prefix, name);
		check(!why2 == (strncmp(buf, "amq.", 4) != 0 && !reserved_suffix(buf)));
		if (!why2) {
			check(sn.len == plen + nlen);
			check(strlen(sn.base) == sn.len);
			check(memcmp(sn.base, prefix, plen) == 0);
			check(strcmp(sn.base + plen, name) == 0);
			check(strncmp(sn.base, "amq.", 4) != 0);

			check_slot_round_trip(&sn, slot, kind);
			check_slot_round_trip(&sn, slot % SLOTS_MAX + 1, kind);
			check_slot_round_trip(&sn, 1, kind);
			check_slot_round_trip(&sn, SLOTS_MAX, kind);
			check_slot_round_trip(&sn, 0, kind);
			check_slot_round_trip(&sn, ~0u, kind);
			check_parse(&sn, queue, qlen, kind);

			/* Two semaphores with different admin mutexes never
			 * share a queue, whatever their prefixes: neither's
			 * slot or holder queues parse as the other's, and
			 * neither's admin mutex is a queue of the other. Under
			 * one prefix, different names never give one mutex. */
			p2 = own_prefix ? prefix2 : prefix;
			if (!names_problem(name2) && !names_prefix_problem(p2) &&
			    !sem_name_init(&sn2, p2, name2)) {
				unsigned k = slot % SLOTS_MAX + 1;

				if (strcmp(sn.base, sn2.base) != 0) {
					check_pair(&sn, &sn2, k, kind);
					check_pair(&sn2, &sn, k, kind);
				} else {
					check(own_prefix || strcmp(name, name2) == 0);
				}
			}
		}
	}

	free(prefix);
	free(name);
	free(prefix2);
	free(name2);
	free(queue);
	return 0;
}
