/* The semaphores under a prefix, from the broker's lists of queue and
 * exchange names, and one semaphore's waiters from its lists of consumers
 * and connections (list.h). Pure: the JSON comes in as text. */
#include "list.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

/* One queue or exchange of some semaphore under the prefix. */
struct piece {
	const char *name; /* the semaphore's name, not NUL-terminated */
	size_t len;
	char kind; /* 'A', 'B', 'L': the slot's queues; 'R': its record; 'W', 'N' the lines */
	unsigned slot;
	unsigned consumers; /* of 'W'; of 'N', its entries ready */
};

struct pieces {
	struct piece *p;
	size_t len, cap;
};

/* "-<k>-X" at the end of s[0..len): the slot k (1..SLOTS_MAX, no leading
 * zero) and *kind X if X is one of kinds, with *name_len the length
 * before it; else 0. */
static unsigned slot_suffix(const char *s, size_t len, const char *kinds, char *kind,
			    size_t *name_len)
{
	size_t i;
	unsigned long k = 0, scale = 1;

	if (len < 5 || s[len - 2] != '-' || !strchr(kinds, s[len - 1]) || s[len - 1] == '\0')
		return 0;
	for (i = len - 2; i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9'; i--) {
		if (len - 2 - i >= 5)
			return 0;
		k += (unsigned long)(s[i - 1] - '0') * scale;
		scale *= 10;
	}
	if (i == len - 2 || i < 2 || s[i - 1] != '-' || s[i] == '0' || k > SLOTS_MAX)
		return 0;
	*kind = s[len - 1];
	*name_len = i - 1;
	return (unsigned)k;
}

/* Whether name[0..len) is a name that a semaphore can have. */
static bool valid_name(const char *name, size_t len)
{
	char copy[NAME_MAX_BYTES + 1];

	if (len == 0 || len > NAME_MAX_BYTES)
		return false;
	memcpy(copy, name, len);
	copy[len] = '\0';
	return names_problem(copy) == NULL;
}

static bool add_piece(struct pieces *ps, struct piece p)
{
	struct piece *more;

	if (ps->len == ps->cap) {
		ps->cap = ps->cap ? 2 * ps->cap : 64;
		if (!(more = realloc(ps->p, ps->cap * sizeof(*more))))
			return false;
		ps->p = more;
	}
	ps->p[ps->len++] = p;
	return true;
}

/* The pieces of root, a JSON array of objects with a "name" (and, for
 * queues, "consumers"); they point into root. */
static enum al_status read_pieces(const char *prefix, const cJSON *root, bool exchanges,
				  struct pieces *ps)
{
	static const char waiters[] = "#waiters", entries[] = "#line";
	size_t plen = strlen(prefix), wlen = sizeof(waiters) - 1, elen = sizeof(entries) - 1;
	const cJSON *item;

	if (!cJSON_IsArray(root))
		return fail(AL_BROKER, "the management API's list of %s is not a JSON array",
			    exchanges ? "exchanges" : "queues");
	cJSON_ArrayForEach(item, root)
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(item, "name");
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(item, "consumers");
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(item, "messages_ready");
		struct piece p = {0};
		const char *s;
		size_t len;

		if (!cJSON_IsString(n) || strncmp(n->valuestring, prefix, plen) != 0)
			continue;
		s = n->valuestring + plen;
		len = strlen(s);
		if (!exchanges && len > wlen && strcmp(s + len - wlen, waiters) == 0) {
			p.kind = 'W';
			p.len = len - wlen;
		} else if (!exchanges && len > elen && strcmp(s + len - elen, entries) == 0) {
			/* the line of entries: its entries are its waiters */
			p.kind = 'N';
			p.len = len - elen;
			c = m;
		} else if (!(p.slot = slot_suffix(s, len, exchanges ? "A" : "ABL", &p.kind,
						  &p.len))) {
			continue;
		}
		if (!valid_name(s, p.len))
			continue;
		if (exchanges)
			p.kind = 'R';
		p.name = s;
		if (cJSON_IsNumber(c) && c->valuedouble > 0)
			p.consumers = c->valuedouble < 1e6 ? (unsigned)c->valuedouble : 1000000u;
		if (!add_piece(ps, p))
			return fail(AL_INTERNAL, "out of memory");
	}
	return AL_OK;
}

/* By name, then kind, then slot: a semaphore's pieces together, its held
 * slots each once after the other. */
static int piece_order(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	int d = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);

	if (d)
		return d;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return x->slot < y->slot ? -1 : x->slot > y->slot;
}

static bool same_name(const struct piece *a, const struct piece *b)
{
	return a->len == b->len && memcmp(a->name, b->name, a->len) == 0;
}

/* How many distinct slots the sorted runs a[0..na) and b[0..nb) hold. */
static unsigned distinct_slots(const struct piece *a, size_t na, const struct piece *b, size_t nb)
{
	unsigned count = 0, last = 0;
	size_t i = 0, j = 0;

	while (i < na || j < nb) {
		unsigned k =
			j == nb || (i < na && a[i].slot <= b[j].slot) ? a[i++].slot : b[j++].slot;

		if (k != last)
			count++;
		last = k;
	}
	return count;
}

/* The semaphore made of the pieces p[0..n) (one name, sorted), if it
 * exists: it has a slot queue or a record. */
static bool summarize(const struct piece *p, size_t n, struct sem_entry *e)
{
	size_t i, b = 0, nb = 0, l = 0, nl = 0;
	unsigned top_slot = 0, top_record = 0;
	bool record_1 = false;

	*e = (struct sem_entry){0};
	memcpy(e->name, p->name, p->len);
	for (i = 0; i < n; i++) {
		switch (p[i].kind) {
		case 'A':
			top_slot = p[i].slot;
			break;
		case 'B':
			b = nb++ ? b : i;
			break;
		case 'L':
			l = nl++ ? l : i;
			break;
		case 'R':
			top_record = p[i].slot;
			record_1 = record_1 || p[i].slot == 1;
			break;
		case 'W':
		case 'N':
			e->waiting += p[i].consumers;
			break;
		}
	}
	/* A slot with a holder queue and a lease is held once. */
	e->held = distinct_slots(p + b, nb, p + l, nl);
	/* A record without slot 1 is a create stopped halfway (record.h):
	 * a semaphore of the record's size once it has a slot queue, none
	 * before. */
	e->recorded = top_record > 0 && (record_1 || top_slot > 0);
	e->max = e->recorded ? top_record : top_slot;
	return top_slot > 0 || e->recorded;
}

static enum al_status gather(const char *prefix, const cJSON *queues, const cJSON *exchanges,
			     struct sem_list *l)
{
	struct pieces ps = {0};
	enum al_status st;
	size_t i, j;

	st = read_pieces(prefix, queues, false, &ps);
	if (st == AL_OK && exchanges)
		st = read_pieces(prefix, exchanges, true, &ps);
	if (st == AL_OK && ps.len)
		qsort(ps.p, ps.len, sizeof(*ps.p), piece_order);
	for (i = 0; st == AL_OK && i < ps.len; i = j) {
		struct sem_entry e;

		for (j = i + 1; j < ps.len && same_name(&ps.p[i], &ps.p[j]); j++)
			;
		if (!summarize(ps.p + i, j - i, &e))
			continue;
		if (l->len == l->cap) {
			struct sem_entry *more;

			l->cap = l->cap ? 2 * l->cap : 16;
			if (!(more = realloc(l->sem, l->cap * sizeof(*more)))) {
				st = fail(AL_INTERNAL, "out of memory");
				break;
			}
			l->sem = more;
		}
		l->sem[l->len++] = e;
	}
	free(ps.p);
	return st;
}

enum al_status list_parse(const char *prefix, const char *queues, const char *exchanges,
			  struct sem_list *l)
{
	cJSON *q = cJSON_Parse(queues), *x = exchanges ? cJSON_Parse(exchanges) : NULL;
	enum al_status st;

	*l = (struct sem_list){0};
	if (exchanges && !x)
		st = fail(AL_BROKER, "the management API's list of exchanges is not JSON");
	else
		st = gather(prefix, q, x, l);
	cJSON_Delete(q);
	cJSON_Delete(x);
	if (st != AL_OK)
		list_free(l);
	return st;
}

void list_free(struct sem_list *l)
{
	free(l->sem);
	*l = (struct sem_list){0};
}

const struct sem_entry *list_find(const struct sem_list *l, const char *name)
{
	size_t i;

	for (i = 0; i < l->len; i++)
		if (strcmp(l->sem[i].name, name) == 0)
			return &l->sem[i];
	return NULL;
}

/* The edit distance between a and b (insertions, deletions, changes, and
 * swaps of two neighbours), or more than limit: then limit + 1. */
static size_t distance(const char *a, const char *b, size_t limit)
{
	size_t la = strlen(a), lb = strlen(b), i, j;
	/* Three rows of the table: two back, one back, this one. */
	size_t rows[3][NAME_MAX_BYTES + 2], *r2 = rows[0], *r1 = rows[1], *r0 = rows[2], *t;

	if (la > NAME_MAX_BYTES || lb > NAME_MAX_BYTES || (la > lb ? la - lb : lb - la) > limit)
		return limit + 1;
	for (j = 0; j <= lb; j++)
		r1[j] = j;
	for (i = 1; i <= la; i++) {
		size_t least;

		r0[0] = least = i;
		for (j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] != b[j - 1];
			size_t d = r1[j - 1] + cost;

			if (r1[j] + 1 < d)
				d = r1[j] + 1;
			if (r0[j - 1] + 1 < d)
				d = r0[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    r2[j - 2] + 1 < d)
				d = r2[j - 2] + 1;
			r0[j] = d;
			least = d < least ? d : least;
		}
		if (least > limit)
			return limit + 1;
		t = r2, r2 = r1, r1 = r0, r0 = t;
	}
	return r1[lb] <= limit ? r1[lb] : limit + 1;
}

/* How far a typo may go: farther in a longer name. */
static size_t typo_limit(const char *name)
{
	size_t len = strlen(name);

	return len >= 12 ? 3 : len >= 5 ? 2 : 1;
}

const char *list_nearest(const struct sem_list *l, const char *name)
{
	size_t limit = typo_limit(name), best = limit + 1, d, i;
	const char *found = NULL;

	if (list_find(l, name))
		return NULL;
	for (i = 0; i < l->len; i++) {
		d = distance(name, l->sem[i].name, limit);
		if (d < best) {
			best = d;
			found = l->sem[i].name;
		}
	}
	return found;
}

const char *list_nearest_word(const char *const *words, size_t n, const char *name)
{
	size_t limit = typo_limit(name), best = limit + 1, d, i;
	const char *found = NULL;

	for (i = 0; i < n; i++) {
		if (strcmp(words[i], name) == 0)
			return NULL;
		d = distance(name, words[i], limit);
		if (d < best) {
			best = d;
			found = words[i];
		}
	}
	return found;
}

/* --- a semaphore's waiters ---------------------------------------------- */

/* Whether the consumer c consumes sn's line or a waiter's own queue. */
static bool waits(const struct sem_name *sn, const cJSON *c)
{
	const cJSON *q = cJSON_GetObjectItemCaseSensitive(c, "queue");
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(q, "name"));
	char line[QUEUE_NAME_MAX + 1];

	if (!name)
		return false;
	sem_name_slot(sn, 1, WAITERS_QUEUE, line);
	return strcmp(name, line) == 0 || sem_name_is_waiter(sn, name, strlen(name));
}

static const char *connection_of(const cJSON *consumer)
{
	const cJSON *ch = cJSON_GetObjectItemCaseSensitive(consumer, "channel_details");

	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ch, "connection_name"));
}

/* The connection named name in the list conns, or NULL. */
static const cJSON *connection_named(const cJSON *conns, const char *name)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, conns)
	{
		const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "name"));

		if (n && strcmp(n, name) == 0)
			return c;
	}
	return NULL;
}

/* A string's text, made printable (anyone may write client
 * properties), or "" if it is none. */
static void text_of(char *dst, size_t size, const cJSON *item)
{
	const char *v = cJSON_GetStringValue(item);

	parse_printable_copy(dst, size, v ? v : "", v ? strlen(v) : 0);
}

static void describe(struct list_waiter *w, const cJSON *conn)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(conn, "client_properties");
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(p, "pid");
	const cJSON *at = cJSON_GetObjectItemCaseSensitive(conn, "connected_at");

	text_of(w->host, sizeof(w->host), cJSON_GetObjectItemCaseSensitive(p, "host"));
	text_of(w->label, sizeof(w->label), cJSON_GetObjectItemCaseSensitive(p, "label"));
	w->pid = cJSON_IsNumber(pid) && pid->valuedouble > 0 && pid->valuedouble < 1e9
			 ? (long)pid->valuedouble
			 : 0;
	w->connected_at = cJSON_IsNumber(at) && at->valuedouble > 0 ? at->valuedouble / 1000 : 0;
}

static bool same(const struct list_waiter *a, const struct list_waiter *b)
{
	return a->pid == b->pid && a->connected_at == b->connected_at &&
	       strcmp(a->host, b->host) == 0;
}

static int older(const void *a, const void *b)
{
	const struct list_waiter *x = a, *y = b;

	return (x->connected_at > y->connected_at) - (x->connected_at < y->connected_at);
}

enum al_status list_waiters(const struct sem_name *sn, const char *consumers,
			    const char *connections, struct list_waiters *out)
{
	cJSON *cons = cJSON_Parse(consumers), *conns = cJSON_Parse(connections);
	const cJSON *c, *conn;
	const char *name;
	enum al_status st = AL_OK;
	size_t n = 0, i;

	*out = (struct list_waiters){0};
	if (!cJSON_IsArray(cons) || !cJSON_IsArray(conns))
		st = fail(AL_BROKER, "the management API's lists of consumers and connections "
				     "are not JSON arrays");
	if (st == AL_OK && (n = (size_t)cJSON_GetArraySize(cons)) > 0 &&
	    !(out->w = calloc(n, sizeof(*out->w))))
		st = fail(AL_INTERNAL, "out of memory");
	if (st == AL_OK) {
		cJSON_ArrayForEach(c, cons)
		{
			if (!waits(sn, c) || !(name = connection_of(c)) ||
			    !(conn = connection_named(conns, name)))
				continue;
			describe(&out->w[out->len], conn);
			/* One per connection (a consumer each of two queues). */
			for (i = 0; i < out->len && !same(&out->w[i], &out->w[out->len]); i++)
				;
			if (i == out->len)
				out->len++;
		}
	}
	if (st == AL_OK && out->len > 1)
		qsort(out->w, out->len, sizeof(*out->w), older);
	if (st != AL_OK)
		list_waiters_free(out);
	cJSON_Delete(cons);
	cJSON_Delete(conns);
	return st;
}

void list_waiters_free(struct list_waiters *w)
{
	free(w->w);
	*w = (struct list_waiters){0};
}
