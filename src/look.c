/* Read-only looks at a semaphore: its max, the free slots a client may
 * claim, who holds what (status), the holders above max (orphans), and
 * the leases that do not answer. */
#include "sem_parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "record.h"

/* Slots probed in one round of the narrowing search for max. */
#define SEARCH_POINTS 64u

/* -v: the number of slots, when it is news (a waiting client counts them
 * on every try). */
void look_trace_max(struct sem *s, unsigned max)
{
	if (s->traced_max == max + 1)
		return;
	s->traced_max = max + 1;
	trace("%s has %u slot%s", s->name.base, max, max == 1 ? "" : "s");
}

/* Probes of ascending slots, answered: moves *lo up to the last slot found
 * before the first one missing, and *hi down to that missing one. Slots
 * 1..max exist without holes, so the boundary lies between them. */
static void bracket(const struct probe *p, size_t n, unsigned *lo, unsigned *hi)
{
	size_t i;

	for (i = 0; i < n && p[i].exists; i++)
		*lo = p[i].slot;
	if (i < n)
		*hi = p[i].slot;
}

/* Slot lo exists (or is 0) and slot hi does not: probes up to
 * SEARCH_POINTS slots spread between them per round trip and keeps the
 * boundary between the last one found and the first one missing. */
static enum al_status narrow(struct sem *s, unsigned lo, unsigned hi, unsigned *max)
{
	struct probe p[SEARCH_POINTS];
	enum al_status st;
	unsigned gap, n, i;

	while (hi - lo > 1) {
		gap = hi - lo - 1;
		n = gap < SEARCH_POINTS ? gap : SEARCH_POINTS;
		for (i = 0; i < n; i++)
			p[i] = (struct probe){.kind = SLOT_QUEUE,
					      .slot = lo + 1 +
						      (unsigned)((unsigned long)gap * i / n)};
		if ((st = probe_queues(s->conn, &s->name, p, n)) != AL_OK)
			return st;
		bracket(p, n, &lo, &hi);
	}
	*max = lo;
	look_trace_max(s, *max);
	return AL_OK;
}

/* max from the answers for slots 1..width: if they all exist, probes
 * the slots up to twice as far one by one, and 4, 8 ... times as far, in
 * one round trip (a semaphore a little larger than the window is then
 * answered), then narrows. */
static enum al_status max_after_window(struct sem *s, const struct probe *window, unsigned width,
				       unsigned *max)
{
	struct probe p[FIRST_WINDOW + 16];
	unsigned lo = 0, hi = SLOTS_MAX + 1, k, n = 0;
	enum al_status st;

	bracket(window, width, &lo, &hi);
	if (hi <= width)
		return narrow(s, lo, hi, max);
	for (k = width + 1; k < 2 * width; k++)
		p[n++] = (struct probe){.kind = SLOT_QUEUE, .slot = k};
	for (k = 2 * width; k < SLOTS_MAX; k *= 2)
		p[n++] = (struct probe){.kind = SLOT_QUEUE, .slot = k};
	p[n++] = (struct probe){.kind = SLOT_QUEUE, .slot = SLOTS_MAX};
	if ((st = probe_queues(s->conn, &s->name, p, n)) != AL_OK)
		return st;
	bracket(p, n, &lo, &hi);
	return narrow(s, lo, hi, max);
}

/* The highest slot queue that the first window found (0: none): max, or
 * the hint for the record's, when slot 1 is missing and the search
 * (which takes 1..max for whole) found none. */
static unsigned window_top(const struct probe *window)
{
	unsigned i;

	for (i = FIRST_WINDOW; i > 0; i--)
		if (window[i - 1].exists)
			return i;
	return 0;
}

/* Readers search for max rather than count: amqplock keeps the slot
 * queues 1..max without holes at every moment (declares go up, deletes
 * come down, one administrator at a time), so a few round trips answer
 * for any size. */
enum al_status sem_max(struct sem *s, unsigned *max)
{
	struct probe window[FIRST_WINDOW];
	unsigned i, recorded;
	enum al_status st;

	for (i = 0; i < FIRST_WINDOW; i++)
		window[i] = (struct probe){.kind = SLOT_QUEUE, .slot = i + 1};
	if ((st = probe_queues(s->conn, &s->name, window, FIRST_WINDOW)) != AL_OK ||
	    (st = max_after_window(s, window, FIRST_WINDOW, max)) != AL_OK)
		return st;
	/* The slot queues' max is the record's unless some have gone. With
	 * slot 1 gone (or not made yet: a create makes it last), the record
	 * is read from the slots above it. */
	if ((st = record_read(s->conn, &s->name, *max ? *max : window_top(window), &recorded)) !=
	    AL_OK)
		return st;
	if (recorded > *max) {
		trace("the record says %u slots, the slot queues %u", recorded, *max);
		*max = recorded;
	}
	return AL_OK;
}

enum al_status sem_paused(struct sem *s, bool *paused)
{
	enum al_status st;
	bool known;

	if ((st = record_paused(s->conn, &s->name, paused, &known)) == AL_OK && !known)
		trace("whether %s is paused may not be looked at: taken as not", s->label);
	return st;
}

/* How long a lease that left a probe unanswered counts as held without
 * being asked again. */
#define STUCK_FOR 10.0

/* The index in s->stuck of slot's current entry, or -1. */
static int stuck_index(const struct sem *s, unsigned slot)
{
	double now = now_seconds();
	int i;

	for (i = 0; i < SEM_STUCK_MAX; i++)
		if (s->stuck[i].slot == slot && s->stuck[i].until > now)
			return i;
	return -1;
}

/* Remembers slot's lease as unanswering, in its own, a free or the
 * oldest entry. */
void look_note_stuck(struct sem *s, unsigned slot)
{
	int i = stuck_index(s, slot), k;

	if (i < 0)
		for (i = 0, k = 1; k < SEM_STUCK_MAX; k++)
			if (s->stuck[k].until < s->stuck[i].until)
				i = k;
	trace("the lease of slot %u does not answer (a quorum queue without a leader?); "
	      "counting the slot as held for %.0f s",
	      slot, STUCK_FOR);
	s->stuck[i].slot = slot;
	s->stuck[i].until = now_seconds() + STUCK_FOR;
}

/* Of slots first..first+n-1, those without a holder queue (holder[i]
 * false) are asked whether they have a lease: lease[i], or, with lease
 * NULL, holder[i] set for them too (a holder away, coming back). Leases
 * are probed only where no holder queue is: a probe that meets a quorum
 * queue being deleted (a holder's release) crashes the connection on
 * RabbitMQ 3.10. A lease that leaves its probe unanswered, or that did
 * so less than STUCK_FOR ago, counts as there and unreachable
 * (refused[i]), and is not asked again meanwhile: the connection and the
 * other answers are kept (probe.h, unanswered). */
static enum al_status leases_of_free(struct sem *s, unsigned first, unsigned n, bool *holder,
				     bool *lease, bool *refused)
{
	struct probe *p = calloc(n ? n : 1, sizeof(*p));
	enum al_status st = AL_OK;
	bool *taken = lease ? lease : holder;
	size_t i, m = 0;

	if (!p)
		return fail(AL_INTERNAL, "out of memory");
	for (i = 0; i < n; i++) {
		if (lease)
			lease[i] = false;
		if (!holder[i] && stuck_index(s, first + (unsigned)i) < 0)
			p[m++] = (struct probe){.kind = LEASE_QUEUE, .slot = first + (unsigned)i};
	}
	if (m > 0)
		st = probe_queues(s->conn, &s->name, p, m);
	for (i = 0; st == AL_OK && i < m; i++) {
		if (p[i].unanswered)
			look_note_stuck(s, p[i].slot);
		if (p[i].exists)
			taken[p[i].slot - first] = true;
		if (p[i].refused && refused)
			refused[p[i].slot - first] = true;
	}
	/* Those stuck a while ago, not asked now, are held. */
	for (i = 0; st == AL_OK && i < n; i++) {
		if (holder[i] || taken[i] || stuck_index(s, first + (unsigned)i) < 0)
			continue;
		taken[i] = true;
		if (refused)
			refused[i] = true;
	}
	free(p);
	return st;
}

/* Which of slots first..first+n-1 have a holder queue (holder[i]), which
 * of the others a lease (as leases_of_free says), and, if refused is not
 * NULL, whose holder queue or lease the broker has but cannot reach
 * (refused[i]; those count as taken). */
enum al_status look_probe_taken(struct sem *s, unsigned first, unsigned n, bool *holder,
				bool *lease, bool *refused)
{
	enum al_status st = probe_slots(s->conn, &s->name, HOLDER_QUEUE, first, n, holder, refused);

	return st == AL_OK ? leases_of_free(s, first, n, holder, lease, refused) : st;
}

/* Collects the kind queues that exist above max, probing windows of
 * `overshoot` slots and going on to the next window while one finds any.
 * What lies beyond an empty window goes unseen: that is the limit of a
 * semaphore that keeps no record of its past sizes. */
enum al_status look_scan_above(struct sem *s, enum slot_kind kind, unsigned max,
			       struct slot_list *found)
{
	unsigned first = max + 1, i;
	enum al_status st = AL_OK;
	bool *exists, any;

	if (s->opts.overshoot == 0)
		return AL_OK;
	exists = calloc(s->opts.overshoot, sizeof(*exists));
	if (!exists)
		return fail(AL_INTERNAL, "out of memory");
	do {
		any = false;
		st = probe_slots(s->conn, &s->name, kind, first, s->opts.overshoot, exists, NULL);
		for (i = 0; st == AL_OK && i < s->opts.overshoot; i++) {
			if (exists[i]) {
				st = req_append(found, first + i);
				any = true;
			}
		}
		first += s->opts.overshoot;
		/* amqplock never makes a slot above SLOTS_MAX, so strays lie
		 * below twice that. The bound ends the scan where every probe
		 * reads as there (a broker that refuses them all: refused
		 * counts as there, see probe.h). */
	} while (st == AL_OK && any && first <= 2 * SLOTS_MAX);
	free(exists);
	return st;
}

/* The lowest free slots from `first` to max: holder queues and leases
 * probed in windows that double, up to the first window with a free slot;
 * with `holes`, the slot queues too, and those missing are not free. */
static enum al_status free_slots(struct sem *s, unsigned first, unsigned max, bool holes,
				 struct slot_list *free_list)
{
	bool held[LARGEST_WINDOW], slot[LARGEST_WINDOW];
	unsigned window = 2 * FIRST_WINDOW, n, i;
	enum al_status st = AL_OK;

	for (; st == AL_OK && first <= max && free_list->len == 0; first += n) {
		n = max - first + 1 < window ? max - first + 1 : window;
		st = look_probe_taken(s, first, n, held, NULL, NULL);
		if (st == AL_OK && holes)
			st = probe_slots(s->conn, &s->name, SLOT_QUEUE, first, n, slot, NULL);
		for (i = 0; st == AL_OK && i < n; i++)
			if (!held[i] && (!holes || slot[i]))
				st = req_append(free_list, first + i);
		if (window < LARGEST_WINDOW)
			window *= 2;
	}
	return st;
}

/* What a probe of the line's queue says of it. A refusal means a node
 * that is down: RabbitMQ 4.0 answers no declare of such a queue, so the
 * line counts as gone until a probe reaches it again. */
void look_note_line(struct sem *s, const struct probe *line)
{
	if (line->refused && s->line != LINE_DOWN)
		trace("the line of %s is unreachable (its node is down?); polling instead",
		      s->label);
	s->line = line->refused ? LINE_DOWN : line->exists ? LINE_UP : LINE_ABSENT;
}

/* Max and the free slots, lowest first, from a look at a semaphore:
 * holder queues 1..w and slot queues 1..w+1 (one past, so that a hole at
 * w is told from the end), the quorum marker and the line (s->line) in
 * one round trip, the leases of the slots without a holder in another. w
 * is FIRST_LOOK at the first look, then the max seen (at most
 * FIRST_WINDOW), so that a waiter that looks again finds max in that one
 * round trip. */
enum al_status look_find_free(struct sem *s, unsigned *max, struct slot_list *free_list,
			      bool leases)
{
	struct probe p[2 * FIRST_WINDOW + 3];
	bool taken[FIRST_WINDOW], holes;
	enum al_status st;
	unsigned i, n, w, a, contiguous, recorded = 0;

	w = s->max_seen < FIRST_LOOK     ? FIRST_LOOK
	    : s->max_seen > FIRST_WINDOW ? FIRST_WINDOW
					 : s->max_seen;
	a = w + 1;
	free_list->len = 0;
	for (i = 0; i < a; i++)
		p[i] = (struct probe){.kind = SLOT_QUEUE, .slot = i + 1};
	for (i = 0; i < w; i++)
		p[a + i] = (struct probe){.kind = HOLDER_QUEUE, .slot = i + 1};
	p[a + w] = (struct probe){.kind = QUORUM_MARKER_QUEUE, .slot = 1};
	p[a + w + 1] = (struct probe){.kind = WAITERS_QUEUE, .slot = 1};
	if ((st = probe_queues(s->conn, &s->name, p, (size_t)a + w + 2)) != AL_OK ||
	    (st = max_after_window(s, p, a, max)) != AL_OK)
		return st;
	s->slots_quorum = p[a + w].exists;
	s->lease_quorum = req_lease_type_quorum(s);
	look_note_line(s, &p[a + w + 1]);
	/* A slot queue gone behind amqplock's back (an expires policy took
	 * an idle slot) leaves a hole: a client looks past it to the slots
	 * above, and takes none of the holes. Within the window it sees
	 * them; a hole there, or slot 1 missing (a hole, or a create
	 * stopped halfway: it makes slot 1 last, docs/design.md), sends it
	 * to the record for how many slots there are, and the slots past
	 * the window are looked at as well before one is called free. */
	contiguous = *max;
	for (i = a; *max < a && i > *max; i--)
		if (p[i - 1].exists)
			*max = i;
	holes = *max > contiguous || (!p[0].exists && *max > 0);
	if (holes && (st = record_read(s->conn, &s->name, *max, &recorded)) != AL_OK)
		return st;
	if (holes && recorded > *max) {
		trace("%s has a hole; its record says %u slots", s->label, recorded);
		*max = recorded;
	}
	s->max_seen = *max;
	n = *max < w ? *max : w;
	for (i = 0; i < n; i++)
		taken[i] = p[a + i].exists || !p[i].exists;
	if (leases && (st = leases_of_free(s, 1, n, taken, NULL, NULL)) != AL_OK)
		return st;
	for (i = 0; st == AL_OK && i < n; i++)
		if (!taken[i])
			st = req_append(free_list, i + 1);
	if (st == AL_OK && free_list->len == 0)
		st = free_slots(s, w + 1, *max, holes, free_list);
	return st;
}

void sem_all_held(char *buf, size_t size, unsigned max, const char *label)
{
	if (max == 1)
		snprintf(buf, size, "the one slot of %s is held", label);
	else
		snprintf(buf, size, "all %u slots of %s are held", max, label);
}

static int ascending(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return (x > y) - (x < y);
}

enum al_status look_drained(struct sem *s, unsigned max, struct slot_list *marked,
			    struct slot_list *held)
{
	enum al_status st = look_scan_above(s, DRAIN_QUEUE, max, marked);
	unsigned first = marked->len ? marked->slot[0] : 0,
		 n = marked->len ? marked->slot[marked->len - 1] - first + 1 : 0, k;
	bool *holder = calloc(n ? n : 1, sizeof(*holder)),
	     *lease = calloc(n ? n : 1, sizeof(*lease));
	size_t i;

	if (st == AL_OK && (!holder || !lease))
		st = fail(AL_INTERNAL, "out of memory");
	if (st == AL_OK && n)
		st = look_probe_taken(s, first, n, holder, lease, NULL);
	for (i = 0; st == AL_OK && i < marked->len; i++) {
		k = marked->slot[i];
		if (holder[k - first] || lease[k - first])
			st = req_append(held, k);
	}
	free(holder);
	free(lease);
	return st;
}

/* The draining holders (drain.c), into orphans and, if given, draining:
 * markers have no gaps, so these are found however far above max they
 * are, where the scans of holder queues and leases stop at the first
 * window without any. */
static enum al_status scan_draining(struct sem *s, unsigned max, struct slot_list *orphans,
				    struct slot_list *draining)
{
	struct slot_list marked = {0}, held = {0};
	enum al_status st = look_drained(s, max, &marked, &held);
	size_t i;

	for (i = 0; st == AL_OK && i < held.len; i++)
		if ((st = req_append(orphans, held.slot[i])) == AL_OK && draining)
			st = req_append(draining, held.slot[i]);
	free(marked.slot);
	free(held.slot);
	return st;
}

/* The holders above max: holder queues, and leases whose holders are
 * away, and the draining ones; each slot once, ascending. */
static enum al_status scan_orphans(struct sem *s, unsigned max, struct slot_list *orphans,
				   struct slot_list *draining)
{
	enum al_status st = scan_draining(s, max, orphans, draining);
	size_t i, kept = 0;

	if (st == AL_OK)
		st = look_scan_above(s, HOLDER_QUEUE, max, orphans);
	if (st == AL_OK)
		st = look_scan_above(s, LEASE_QUEUE, max, orphans);
	if (st != AL_OK || orphans->len == 0)
		return st;
	qsort(orphans->slot, orphans->len, sizeof(*orphans->slot), ascending);
	for (i = 0; i < orphans->len; i++)
		if (kept == 0 || orphans->slot[kept - 1] != orphans->slot[i])
			orphans->slot[kept++] = orphans->slot[i];
	orphans->len = kept;
	return AL_OK;
}

enum al_status sem_orphans(struct sem *s, unsigned *max, struct slot_list *orphans)
{
	enum al_status st = sem_max(s, max);

	orphans->len = 0;
	return st == AL_OK ? scan_orphans(s, *max, orphans, NULL) : st;
}

/* How many wait in line, by passive declares (which need a permission
 * from RabbitMQ 4.2.6: without one, unknown): the consumers of #waiters,
 * and the entries of #line (those of waiters gone included, until a look
 * at the line's head passes them). Waiters in #line keep #waiters there
 * (sem_line_keep): no #waiters, nobody waits. A line on a node that is
 * down: unknown. */
static enum al_status count_one_line(struct sem *s, enum slot_kind kind, unsigned long *waiting,
				     bool *known)
{
	char queue[QUEUE_NAME_MAX + 1];
	uint32_t consumers, messages;
	enum al_status st;

	*known = s->line == LINE_ABSENT;
	if (s->line != LINE_UP)
		return AL_OK;
	sem_name_slot(&s->name, 1, kind, queue);
	st = req_ask_counts(s, queue, &consumers, &messages);
	if (st == AL_OK && conn_refusal_code(s->conn) != 404) {
		*known = conn_refusal_code(s->conn) == 0;
		*waiting += kind == LINE_QUEUE ? messages : consumers;
	} else if (st == AL_OK) {
		*known = true; /* gone since the probe, or none */
	}
	return st;
}

static enum al_status count_line(struct sem *s, struct sem_status *out)
{
	bool waiters_known, entries_known = true;
	enum al_status st;

	out->waiting = 0;
	st = count_one_line(s, WAITERS_QUEUE, &out->waiting, &waiters_known);
	if (st == AL_OK)
		st = count_one_line(s, LINE_QUEUE, &out->waiting, &entries_known);
	out->waiting_known = st == AL_OK && waiters_known && entries_known;
	return st;
}

/* The line alone, probed then counted: a paused semaphore has no slot
 * to probe it with, and clients wait in it all the same. */
static enum al_status look_at_line(struct sem *s, struct sem_status *out)
{
	struct probe line = {.kind = WAITERS_QUEUE, .slot = 1};
	enum al_status st = probe_queues(s->conn, &s->name, &line, 1);

	if (st != AL_OK)
		return st;
	look_note_line(s, &line);
	return count_line(s, out);
}

enum al_status sem_status(struct sem *s, struct sem_status *out)
{
	bool *holder, *lease, *refused, *slot;
	struct probe *p = NULL;
	enum al_status st;
	unsigned i;

	memset(out, 0, sizeof(*out));
	if ((st = sem_max(s, &out->max)) != AL_OK)
		return st;
	if (out->max == 0) {
		/* Paused: no slot, but holders may still run above max 0. */
		if ((st = sem_paused(s, &out->paused)) == AL_OK && !out->paused)
			st = fail(AL_NOT_FOUND, "semaphore %s does not exist", s->label);
		if (st == AL_OK)
			st = scan_orphans(s, 0, &out->orphans, &out->draining);
		return st == AL_OK ? look_at_line(s, out) : st;
	}
	holder = calloc(out->max, sizeof(*holder));
	lease = calloc(out->max, sizeof(*lease));
	refused = calloc(out->max, sizeof(*refused));
	slot = calloc(out->max, sizeof(*slot));
	p = calloc(2 * (size_t)out->max + 1, sizeof(*p));
	if (!holder || !lease || !refused || !slot || !p)
		st = fail(AL_INTERNAL, "out of memory");
	/* Slot queues (the holes) and holder queues in one pipeline. */
	for (i = 0; st == AL_OK && i < out->max; i++) {
		p[i] = (struct probe){.kind = SLOT_QUEUE, .slot = i + 1};
		p[out->max + i] = (struct probe){.kind = HOLDER_QUEUE, .slot = i + 1};
	}
	/* And the line, for the count of waiters. */
	if (st == AL_OK)
		p[2 * out->max] = (struct probe){.kind = WAITERS_QUEUE, .slot = 1};
	if (st == AL_OK)
		st = probe_queues(s->conn, &s->name, p, 2 * (size_t)out->max + 1);
	if (st == AL_OK)
		look_note_line(s, &p[2 * out->max]);
	for (i = 0; st == AL_OK && i < out->max; i++) {
		slot[i] = p[i].exists;
		holder[i] = p[out->max + i].exists;
		refused[i] = p[out->max + i].refused;
	}
	if (st == AL_OK)
		st = leases_of_free(s, 1, out->max, holder, lease, refused);
	for (i = 0; st == AL_OK && i < out->max; i++) {
		if (!slot[i])
			st = req_append(&out->missing, i + 1);
		if (st == AL_OK && (holder[i] || lease[i] || slot[i]))
			st = req_append(holder[i] || lease[i] ? &out->held : &out->free, i + 1);
		if (st == AL_OK && lease[i] && !holder[i])
			st = req_append(&out->away, i + 1);
		if (st == AL_OK && refused[i])
			st = req_append(&out->unreachable, i + 1);
	}
	free(holder);
	free(lease);
	free(refused);
	free(slot);
	free(p);
	if (st == AL_OK)
		st = scan_orphans(s, out->max, &out->orphans, &out->draining);
	if (st == AL_OK)
		st = count_line(s, out);
	if (st == AL_OK && !s->opts.no_names)
		st = holders_ask(s, out);
	return st;
}

void sem_status_free(struct sem_status *st)
{
	free(st->held.slot);
	free(st->away.slot);
	free(st->unreachable.slot);
	free(st->free.slot);
	free(st->orphans.slot);
	free(st->draining.slot);
	free(st->missing.slot);
	free(st->holders);
	memset(st, 0, sizeof(*st));
}
