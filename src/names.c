#include "names.h"

#include <stdio.h>
#include <string.h>

static bool name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == ':' || c == '-';
}

static const char *charset_problem(const char *s)
{
	for (; *s; s++)
		if (!name_char((unsigned char)*s))
			return "may contain only letters, digits and . _ : -";
	return NULL;
}

/* True if s ends in "-<digits>-A", "-B" or "-L": such a name would make one
 * semaphore's admin mutex another semaphore's slot, holder or lease queue. */
static bool has_slot_suffix(const char *s, size_t len)
{
	size_t i;

	if (len < 4 || s[len - 2] != '-' || !strchr("ABDL", s[len - 1]))
		return false;
	i = len - 2;
	if (i == 0 || s[i - 1] < '0' || s[i - 1] > '9')
		return false;
	while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9')
		i--;
	return i > 0 && s[i - 1] == '-';
}

const char *names_problem(const char *name)
{
	size_t len = strlen(name);

	if (len == 0)
		return "is empty";
	if (len > NAME_MAX_BYTES)
		return "is longer than 200 bytes";
	if (charset_problem(name))
		return charset_problem(name);
	if (has_slot_suffix(name, len))
		return "may not end in -<number>-A, -B, -D or -L (reserved for slot queues)";
	return NULL;
}

const char *names_prefix_problem(const char *prefix)
{
	if (strlen(prefix) > PREFIX_MAX_BYTES)
		return "is longer than 40 bytes";
	return charset_problem(prefix);
}

const char *sem_name_init(struct sem_name *sn, const char *prefix, const char *name)
{
	int n = snprintf(sn->base, sizeof(sn->base), "%s%s", prefix, name);

	if (n < 0 || (size_t)n >= sizeof(sn->base))
		return "is too long together with the prefix";
	if (strncmp(sn->base, "amq.", 4) == 0)
		return "may not start with \"amq.\" (reserved by RabbitMQ), prefix included";
	/* The name alone was checked, but "p-" and "1-A" make "p-1-A" too. */
	if (has_slot_suffix(sn->base, (size_t)n))
		return "may not end in -<number>-A, -B, -D or -L (reserved for slot queues), "
		       "prefix included";
	sn->len = (size_t)n;
	return NULL;
}

/* The per-semaphore queues' suffixes: '#' cannot occur in a semaphore
 * name, so neither is ever another semaphore's queue. */
static const char *single_suffix(enum slot_kind kind)
{
	return kind == QUORUM_MARKER_QUEUE ? "#quorum"
	       : kind == WAITERS_QUEUE     ? "#waiters"
	       : kind == LINE_QUEUE        ? "#line"
	       : kind == TOKENS_QUEUE      ? "#tokens"
					   : NULL;
}

/* A waiter's own queue: the suffix and its digits (14 characters, the
 * room BASE_MAX leaves). */
#define WAITER_SUFFIX "#w"
#define WAITER_DIGITS 12

void sem_name_waiter(const struct sem_name *sn, unsigned long long id, char *buf)
{
	snprintf(buf, QUEUE_NAME_MAX + 1, "%s" WAITER_SUFFIX "%012llx", sn->base,
		 id & 0xffffffffffffull);
}

bool sem_name_is_waiter(const struct sem_name *sn, const char *queue, size_t len)
{
	size_t head = sn->len + sizeof(WAITER_SUFFIX) - 1, i;

	if (len != head + WAITER_DIGITS || memcmp(queue, sn->base, sn->len) != 0 ||
	    memcmp(queue + sn->len, WAITER_SUFFIX, sizeof(WAITER_SUFFIX) - 1) != 0)
		return false;
	for (i = head; i < len; i++)
		if (!((queue[i] >= '0' && queue[i] <= '9') || (queue[i] >= 'a' && queue[i] <= 'f')))
			return false;
	return true;
}

void sem_name_slot(const struct sem_name *sn, unsigned slot, enum slot_kind kind, char *buf)
{
	const char *suffix = single_suffix(kind);

	if (suffix)
		snprintf(buf, QUEUE_NAME_MAX + 1, "%s%s", sn->base, suffix);
	else
		snprintf(buf, QUEUE_NAME_MAX + 1, "%s-%u-%c", sn->base, slot, (char)kind);
}

unsigned sem_name_parse_slot(const struct sem_name *sn, const char *queue, size_t len,
			     enum slot_kind kind)
{
	const char *suffix = single_suffix(kind);
	unsigned long slot = 0;
	size_t i;

	if (suffix)
		return len == sn->len + strlen(suffix) && memcmp(queue, sn->base, sn->len) == 0 &&
		       memcmp(queue + sn->len, suffix, len - sn->len) == 0;
	if (len < sn->len + 4 || memcmp(queue, sn->base, sn->len) != 0 || queue[sn->len] != '-' ||
	    queue[len - 2] != '-' || queue[len - 1] != (char)kind)
		return 0;
	for (i = sn->len + 1; i < len - 2; i++) {
		if (queue[i] < '0' || queue[i] > '9' || slot > SLOTS_MAX * 10ul)
			return 0;
		slot = slot * 10 + (unsigned long)(queue[i] - '0');
	}
	if (i == sn->len + 1 || queue[sn->len + 1] == '0' || slot > SLOTS_MAX * 10ul)
		return 0;
	return (unsigned)slot;
}
