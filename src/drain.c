/* A shrink that drains (`remove --drain`, `max N --drain`; docs/design.md,
 * "Draining"): the drain markers, and what a holder makes of them. Before
 * it deletes slot queues, such a shrink declares a marker NAME-k-D for
 * every slot it removes; a holder whose slot queue is gone looks for its
 * marker and, if it is there, runs on, checking the marker instead of the
 * slot queue. Nobody else can take the slot meanwhile: a claim checks the
 * slot queue after declaring the holder queue, and the holder queue (and
 * the lease) are still the holder's. The marker never admits anyone; it
 * only spares a holder the signal.
 *
 * Markers are an administrator's alone (clients only read them), made
 * and deleted under the admin mutex: kept without gaps from max + 1 up
 * while any of them is held, so that the scans above max that find
 * holders find them all however far up they are; deleted, all of them,
 * once none is held, and by a shrink without --drain or a destroy (which
 * end every job above the new size, draining or not); deleted for each
 * slot an administrator makes again once its slot queue is back, its
 * holder then an ordinary one. */
#include "sem_parts.h"

#include <stdlib.h>

#include "record.h"

/* The markers that exist among slots first..last, appended to found. */
static enum al_status markers_in(struct sem *s, unsigned first, unsigned last,
				 struct slot_list *found)
{
	unsigned n = last >= first ? last - first + 1 : 0, i;
	enum al_status st = AL_OK;
	bool *exists;

	if (n == 0)
		return AL_OK;
	if (!(exists = calloc(n, sizeof(*exists))))
		return fail(AL_INTERNAL, "out of memory");
	st = probe_slots(s->conn, &s->name, DRAIN_QUEUE, first, n, exists, NULL);
	for (i = 0; st == AL_OK && i < n; i++)
		if (exists[i])
			st = req_append(found, first + i);
	free(exists);
	return st;
}

/* op on the markers of slot[0..n) (a declare or a delete), pipelined;
 * any refusal fails it. */
static enum al_status ask_markers(struct sem *s, enum queue_op op, const unsigned *slot, size_t n)
{
	uint16_t *answer = calloc(n ? n : 1, sizeof(*answer));
	enum al_status st = answer ? AL_OK : fail(AL_INTERNAL, "out of memory");

	if (st == AL_OK && n) {
		trace("%s the drain markers of slots %u..%u",
		      op == DELETE_QUEUE ? "deleting" : "declaring", slot[0], slot[n - 1]);
		st = req_ask_each(s, op, DRAIN_QUEUE, slot, n, 0, answer);
	}
	free(answer);
	return st;
}

/* Deletes the markers of l, highest first: one stopped halfway leaves
 * the lower ones, still without a gap. */
static enum al_status unmark(struct sem *s, const struct slot_list *l)
{
	unsigned *down = calloc(l->len ? l->len : 1, sizeof(*down));
	enum al_status st = down ? AL_OK : fail(AL_INTERNAL, "out of memory");
	size_t i;

	for (i = 0; st == AL_OK && i < l->len; i++)
		down[i] = l->slot[l->len - 1 - i];
	if (st == AL_OK)
		st = ask_markers(s, DELETE_QUEUE, down, l->len);
	free(down);
	return st;
}

/* Made from the bottom up: one stopped halfway leaves no gap either. */
enum al_status drain_mark(struct sem *s, unsigned first, unsigned last)
{
	enum queue_op op = s->opts.slot_type == SLOT_QUORUM ? DECLARE_QUORUM : DECLARE_SLOT;
	unsigned n = last - first + 1, *up = calloc(n, sizeof(*up)), i;
	enum al_status st = up ? AL_OK : fail(AL_INTERNAL, "out of memory");

	for (i = 0; st == AL_OK && i < n; i++)
		up[i] = first + i;
	if (st == AL_OK)
		st = ask_markers(s, op, up, n);
	free(up);
	return st;
}

enum al_status drain_end(struct sem *s, unsigned first, unsigned max, unsigned *ended)
{
	struct slot_list above = {0}, held = {0}, all = {0};
	enum al_status st = markers_in(s, first, max, &all);
	size_t i;

	if (st == AL_OK)
		st = look_drained(s, max, &above, &held);
	*ended = (unsigned)held.len;
	for (i = 0; st == AL_OK && i < above.len; i++)
		st = req_append(&all, above.slot[i]);
	if (st == AL_OK)
		st = unmark(s, &all);
	free(above.slot);
	free(held.slot);
	free(all.slot);
	return st;
}

enum al_status drain_unmark(struct sem *s, unsigned first, unsigned last)
{
	struct slot_list found = {0};
	enum al_status st = markers_in(s, first, last, &found);

	if (st == AL_OK)
		st = unmark(s, &found);
	free(found.slot);
	return st;
}

enum al_status drain_sweep(struct sem *s, unsigned max, unsigned *draining)
{
	struct slot_list marked = {0}, held = {0};
	enum al_status st = look_drained(s, max, &marked, &held);

	*draining = (unsigned)held.len;
	if (st == AL_OK && held.len == 0)
		st = unmark(s, &marked);
	free(marked.slot);
	free(held.slot);
	return st;
}

/* Why the slot is not ours any more, both its slot queue and its marker
 * gone: the size record says whether the semaphore shrank below it. */
static enum al_status lost_why(struct sem *s, unsigned slot, bool was_draining)
{
	char queue[QUEUE_NAME_MAX + 1];
	unsigned max = 0;

	sem_name_slot(&s->name, slot, SLOT_QUEUE, queue);
	if (conn_reset_channel(s->conn) != AL_OK ||
	    record_read(s->conn, &s->name, slot, &max) != AL_OK)
		return fail(AL_LOST, "its slot queue %s was deleted", queue);
	if (was_draining)
		return fail(AL_LOST,
			    "slot %u of %s was draining, and a shrink without --drain or a "
			    "destroy has ended its drain",
			    slot, s->label);
	if (max < slot)
		return fail(AL_LOST,
			    "slot %u of %s was removed: %s shrank to %u slot%s without --drain "
			    "(amqplock remove, max or destroy)",
			    slot, s->label, s->label, max, max == 1 ? "" : "s");
	return fail(AL_LOST,
		    "its slot queue %s was deleted (amqplock evict by an administrator, or an "
		    "expires policy)",
		    queue);
}

enum al_status drain_look_again(struct sem *s, unsigned slot)
{
	enum slot_kind other = s->hold->draining ? SLOT_QUEUE : DRAIN_QUEUE;
	char queue[QUEUE_NAME_MAX + 1];
	enum al_status st;
	uint16_t refused;

	if (conn_reset_channel(s->conn) != AL_OK)
		return fail(AL_LOST, "the connection failed");
	sem_name_slot(&s->name, slot, other, queue);
	st = req_ask_one(s, DECLARE_PASSIVE, queue, REFUSED_NOT_FOUND | REFUSED_ACCESS, &refused);
	if (st != AL_OK)
		return st;
	if (refused == 0) {
		s->hold->draining = other == DRAIN_QUEUE;
		s->hold->drain_news = true;
		trace("slot %u: %s is there; %s", slot, queue,
		      s->hold->draining ? "draining: the job runs on" : "the slot is back");
		return AL_OK;
	}
	if (refused == AMQP_ACCESS_REFUSED)
		return fail(AL_LOST,
			    "slot %u of %s was removed, and this user may not look at its drain "
			    "marker %s (a --drain shrink keeps only holders of the client role "
			    "running; see PERMISSIONS in amqplock(1))",
			    slot, s->label, queue);
	return lost_why(s, slot, s->hold->draining);
}

bool sem_drain_news(struct sem *s, bool *draining)
{
	bool news = s->hold->drain_news;

	s->hold->drain_news = false;
	*draining = s->hold->draining;
	return news;
}
