/* check: an fsck for one semaphore, its problems found and, with --repair,
 * mended. */
#include "sem_parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"

/* --- check: an fsck for one semaphore ------------------------------------ */

static enum al_status add_problem(struct sem_check *c, enum sem_problem_kind kind, unsigned slot,
				  bool repaired)
{
	struct sem_problem *room = req_make_room(c->problem, c->len, &c->cap, sizeof(*room));

	if (!room)
		return AL_INTERNAL;
	c->problem = room;
	c->problem[c->len++] =
		(struct sem_problem){.kind = kind, .slot = slot, .repaired = repaired};
	c->repaired += repaired;
	return AL_OK;
}

/* Slot queues above max: what sweep_strays deletes, reported one by one;
 * with `repair` deleted as it does, highest first. One exclusive to
 * another connection cannot be deleted (405) and stays; one a holder
 * holds is left alone, and its holder shows among the orphans. */
static enum al_status check_stray_slots(struct sem *s, bool repair, struct sem_check *c)
{
	struct slot_list strays = {0};
	uint16_t *answer = NULL;
	unsigned *down = NULL, kept;
	enum al_status st = strays_find(s, c->max, &strays, &kept);
	size_t i, n = strays.len;

	if (st == AL_OK && repair && n > 0) {
		answer = calloc(n, sizeof(*answer));
		down = calloc(n, sizeof(*down));
		if (!answer || !down)
			st = fail(AL_INTERNAL, "out of memory");
		for (i = 0; st == AL_OK && i < n; i++) {
			down[i] = strays.slot[n - 1 - i];
			trace("deleting stray slot queue %u above max %u", down[i], c->max);
		}
		if (st == AL_OK)
			st = req_ask_each(s, DELETE_QUEUE, SLOT_QUEUE, down, n, REFUSED_LOCKED,
					  answer);
	}
	for (i = 0; st == AL_OK && i < n; i++)
		st = add_problem(c, SEM_STRAY_SLOT, strays.slot[i],
				 answer && answer[n - 1 - i] == 0);
	free(answer);
	free(down);
	free(strays.slot);
	return st;
}

/* A create stopped halfway (slot 1 not recorded): one problem, however
 * many slot queues it did not make. With `repair` finished as a create of
 * its size finishes it (its holes made, its stream of fencing tokens,
 * slot 1 recorded last); stopped
 * while writing the record (no slot queue made, nothing anyone could
 * use), its record is taken off instead, since its size is not known. */
static enum al_status check_unfinished(struct sem *s, bool repair, const struct census *cs,
				       struct sem_check *c, unsigned *filled)
{
	enum al_status st = AL_OK;

	if (repair && cs->max == 0)
		st = record_cut(s->conn, &s->name, cs->unfinished, 2);
	else if (repair)
		st = admin_fill_holes(s, cs, cs->max, filled);
	if (st == AL_OK && repair && cs->max > 0 && (st = admin_make_tokens(s)) == AL_OK)
		st = record_write(s->conn, &s->name, 1, 1);
	if (st == AL_OK && (st = add_problem(c, SEM_UNFINISHED, 0, repair)) == AL_OK)
		c->problem[c->len - 1].count =
			cs->max > 0 ? (unsigned)cs->missing.len : cs->unfinished;
	return st;
}

/* Slot queues gone below max, and a missing record: reported, and with
 * `repair` (under the admin mutex) made again, as the slots' type. */
static enum al_status check_holes(struct sem *s, bool repair, const struct census *cs,
				  struct sem_check *c, unsigned *filled)
{
	enum al_status st = AL_OK;
	size_t i;

	*filled = 0;
	if (repair && cs->missing.len > 0) {
		if (c->typed)
			s->opts.slot_type = c->slot_type;
		else
			st = admin_marked_type(s, &s->opts.slot_type);
	}
	if (st == AL_OK && cs->unfinished)
		return check_unfinished(s, repair, cs, c, filled);
	if (st == AL_OK && repair && cs->missing.len > 0)
		st = admin_fill_holes(s, cs, cs->max, filled);
	for (i = 0; st == AL_OK && i < cs->missing.len; i++)
		st = add_problem(c, SEM_MISSING_SLOT, cs->missing.slot[i], i < *filled);
	if (st != AL_OK || cs->recorded >= c->max)
		return st;
	if (repair)
		st = record_write(s->conn, &s->name, cs->recorded + 1, c->max);
	return st == AL_OK ? add_problem(c, SEM_UNRECORDED, 0, repair) : st;
}

/* Slot queues 1..max exclusive to some connection: a passive declare of
 * ours gets 405 for them. Those and the slots that vanished meanwhile are
 * marked in skip[], for check_types. */
static enum al_status check_exclusive_slots(struct sem *s, const unsigned *slots,
					    struct sem_check *c, bool *skip)
{
	uint16_t *answer = calloc(c->max, sizeof(*answer));
	enum al_status st;
	unsigned i;

	if (!answer)
		return fail(AL_INTERNAL, "out of memory");
	st = req_ask_each(s, DECLARE_PASSIVE, SLOT_QUEUE, slots, c->max,
			  REFUSED_ACCESS | REFUSED_NOT_FOUND | REFUSED_LOCKED, answer);
	for (i = 0; st == AL_OK && i < c->max; i++) {
		skip[i] = answer[i] == AMQP_RESOURCE_LOCKED || answer[i] == AMQP_NOT_FOUND;
		if (answer[i] == AMQP_RESOURCE_LOCKED)
			st = add_problem(c, SEM_EXCLUSIVE_SLOT, i + 1, false);
		else if (answer[i] == AMQP_NOT_FOUND)
			trace("slot queue %u was deleted during the check", i + 1);
		else if (answer[i] == AMQP_ACCESS_REFUSED)
			trace("slot queue %u may not be looked at", i + 1);
	}
	free(answer);
	return st;
}

/* The type of every slot queue but those in skip[]. A redeclare that the
 * broker refuses costs a round trip or two (and a line in its log), so
 * the slots are redeclared, pipelined, as the type of the lowest one
 * (which admin_slot_type_of finds), and only those refused are asked again: as
 * quorum queues, which a classic queue refuses (406) whatever its
 * arguments. (A broker that refused x-queue-type classic said outright
 * for a classic slot queue would get every slot asked that way.) Most
 * slots give the semaphore its type, the lowest slot's on a tie; the
 * others are reported. Redeclaring a slot queue that was deleted
 * meanwhile would make it again: only under the admin mutex. */
static enum al_status check_types(struct sem *s, const unsigned *slots, const bool *skip,
				  struct sem_check *c)
{
	const unsigned accept = REFUSED_MISMATCH | REFUSED_LOCKED | REFUSED_NOT_FOUND;
	unsigned *asked = calloc(c->max, sizeof(*asked)), *again = calloc(c->max, sizeof(*again));
	size_t *again_at = calloc(c->max, sizeof(*again_at)), n = 0, m = 0, count[2] = {0, 0}, j;
	uint16_t *answer = calloc(c->max, sizeof(*answer));
	/* Per slot asked: its enum slot_type, or -1 if it tells none (taken
	 * or deleted meanwhile: 405, 404). */
	int *type = calloc(c->max, sizeof(*type)), lowest = -1;
	enum slot_type first = SLOT_CLASSIC;
	enum al_status st = AL_OK;
	bool fallback;

	if (!asked || !again || !again_at || !answer || !type)
		st = fail(AL_INTERNAL, "out of memory");
	for (j = 0; st == AL_OK && j < c->max; j++)
		if (!skip[j])
			asked[n++] = slots[j];
	if (st == AL_OK && n > 0 && (st = admin_slot_type_of(s, asked[0], &first)) == AL_OK)
		st = req_ask_each(s, first == SLOT_QUORUM ? DECLARE_QUORUM : DECLARE_CLASSIC,
				  SLOT_QUEUE, asked, n, accept, answer);
	fallback = n > 0 && first == SLOT_CLASSIC && answer[0] != 0;
	for (j = 0; st == AL_OK && j < n; j++) {
		if (answer[j] != 0 && answer[j] != AMQP_PRECONDITION_FAILED)
			type[j] = -1;
		else if (answer[j] == 0 && !fallback)
			type[j] = (int)first;
		else if (first == SLOT_QUORUM)
			type[j] = SLOT_CLASSIC; /* refused as a quorum queue */
		else
			again_at[m++] = j;
	}
	for (j = 0; st == AL_OK && j < m; j++)
		again[j] = asked[again_at[j]];
	if (st == AL_OK && m > 0)
		st = req_ask_each(s, DECLARE_QUORUM, SLOT_QUEUE, again, m, accept, answer);
	for (j = 0; st == AL_OK && j < m; j++) {
		type[again_at[j]] = -1;
		if (answer[j] == 0)
			type[again_at[j]] = SLOT_QUORUM;
		else if (answer[j] == AMQP_PRECONDITION_FAILED)
			type[again_at[j]] = SLOT_CLASSIC;
	}
	for (j = 0; st == AL_OK && j < n; j++) {
		if (type[j] < 0)
			continue;
		count[type[j]]++;
		if (lowest < 0)
			lowest = type[j];
	}
	if (st == AL_OK && lowest >= 0) {
		c->typed = true;
		c->slot_type = (enum slot_type)lowest;
		if (count[SLOT_QUORUM] != count[SLOT_CLASSIC])
			c->slot_type = count[SLOT_QUORUM] > count[SLOT_CLASSIC] ? SLOT_QUORUM
										: SLOT_CLASSIC;
		trace("%s has %s slots", s->name.base, sem_slot_type_name(c->slot_type));
	}
	for (j = 0; st == AL_OK && j < n; j++) {
		if (type[j] < 0 || type[j] == (int)c->slot_type)
			continue;
		if ((st = add_problem(c, SEM_MIXED_TYPE, asked[j], false)) == AL_OK)
			c->problem[c->len - 1].type = (enum slot_type)type[j];
	}
	free(asked);
	free(again);
	free(again_at);
	free(answer);
	free(type);
	return st;
}

/* The problems of slots 1..max: exclusive slot queues, and mixed types
 * when the admin mutex is held. */
static enum al_status check_slots(struct sem *s, bool locked, struct sem_check *c)
{
	unsigned *slots = calloc(c->max, sizeof(*slots)), i;
	bool *skip = calloc(c->max, sizeof(*skip));
	enum al_status st = AL_OK;

	if (!slots || !skip)
		st = fail(AL_INTERNAL, "out of memory");
	for (i = 0; st == AL_OK && i < c->max; i++)
		slots[i] = i + 1;
	if (st == AL_OK)
		st = check_exclusive_slots(s, slots, c, skip);
	if (st == AL_OK && locked)
		st = check_types(s, slots, skip, c);
	else if (st == AL_OK)
		trace("slot types not checked: the admin mutex is not held");
	free(slots);
	free(skip);
	return st;
}

/* Stray holder queues as strays_find_holders sorts them, deleted with `repair`;
 * one that a holder has taken since is a holder's now, no problem. */
static enum al_status check_holders(struct sem *s, bool repair, struct sem_check *c)
{
	struct slot_list strays = {0};
	uint16_t *answer = NULL;
	enum al_status st = strays_find_holders(s, c->max, &strays, &c->orphans);
	size_t i;

	if (st == AL_OK && repair)
		st = strays_delete_holders(s, &strays, 0, &answer);
	for (i = 0; st == AL_OK && i < strays.len; i++) {
		if (answer && answer[i] == AMQP_RESOURCE_LOCKED)
			trace("holder queue %u is held now; kept", strays.slot[i]);
		else
			st = add_problem(c, SEM_STRAY_HOLDER, strays.slot[i], answer != NULL);
	}
	free(answer);
	free(strays.slot);
	return st;
}

/* The quorum marker against the slots' type (known only under the admin
 * mutex): missing for quorum slots (an older amqplock made them), or there
 * for classic slots or none. With `repair` made or deleted. */
static enum al_status check_marker(struct sem *s, bool repair, struct sem_check *c)
{
	bool exists, quorum = c->typed && c->slot_type == SLOT_QUORUM;
	enum al_status st;

	if (!c->typed && c->max > 0)
		return AL_OK;
	/* Paused, the marker alone keeps the slots' type for the resume. */
	if (c->paused) {
		c->typed = true;
		return admin_marked_type(s, &c->slot_type);
	}
	if ((st = probe_slots(s->conn, &s->name, QUORUM_MARKER_QUEUE, 1, 1, &exists, NULL)) !=
		    AL_OK ||
	    exists == quorum)
		return st;
	if (repair && (st = admin_set_marker(s, quorum)) != AL_OK)
		return st;
	return add_problem(c, quorum ? SEM_MISSING_MARKER : SEM_STRAY_MARKER, 0, repair);
}

/* The stream of fencing tokens, which a create makes since amqplock 0.5:
 * with `repair` made (a semaphore that has slots, or is paused). Part of
 * a create stopped halfway, which makes it as it finishes. */
static enum al_status check_tokens(struct sem *s, bool repair, struct sem_check *c)
{
	char queue[QUEUE_NAME_MAX + 1];
	uint16_t refused;
	enum al_status st;
	size_t i;

	if (c->max == 0 && !c->paused)
		return AL_OK;
	for (i = 0; i < c->len; i++)
		if (c->problem[i].kind == SEM_UNFINISHED)
			return AL_OK;
	/* (a passive declare: a probe, a publish, would be an entry; one
	 * that a broker from 4.2.6 refuses an inspector tells nothing) */
	sem_name_slot(&s->name, 1, TOKENS_QUEUE, queue);
	if ((st = req_ask_one(s, DECLARE_PASSIVE, queue, REFUSED_NOT_FOUND | REFUSED_ACCESS,
			      &refused)) != AL_OK ||
	    refused != AMQP_NOT_FOUND)
		return st;
	if (repair && (st = admin_make_tokens(s)) != AL_OK)
		return st;
	return add_problem(c, SEM_MISSING_TOKENS, 0, repair);
}

/* The pause marker beside slots: readers never look at it while there
 * are slots, but a semaphore that loses them all (an expires policy)
 * would read as paused rather than damaged. Deleted with `repair`,
 * keeping the slots: a pause stopped halfway is undone, no job ended. */
static enum al_status check_stray_pause(struct sem *s, bool repair, struct sem_check *c)
{
	enum al_status st = repair ? record_cut(s->conn, &s->name, 0, 0) : AL_OK;

	return st == AL_OK ? add_problem(c, SEM_STRAY_PAUSE, 0, repair) : st;
}

enum al_status sem_check(struct sem *s, bool repair, struct sem_check *out)
{
	struct census cs = {0};
	enum al_status st;
	unsigned filled = 0;
	bool locked, stray;

	memset(out, 0, sizeof(*out));
	if ((st = admin_lock(s, repair, &locked, &stray)) != AL_OK)
		return st;
	if (stray)
		st = add_problem(out, SEM_STRAY_MUTEX, 0, locked);
	if (st == AL_OK)
		st = admin_count_slots(s, &cs);
	out->max = cs.max;
	out->paused = cs.paused && cs.max == 0;
	if (st == AL_OK && cs.paused && cs.max > 0)
		st = check_stray_pause(s, repair && locked, out);
	if (st == AL_OK)
		st = check_stray_slots(s, repair, out);
	if (st == AL_OK && out->max > 0)
		st = check_slots(s, locked, out);
	if (st == AL_OK)
		st = check_holes(s, repair && locked, &cs, out, &filled);
	if (st == AL_OK)
		st = check_holders(s, repair, out);
	if (st == AL_OK && locked)
		st = check_marker(s, repair, out);
	if (st == AL_OK)
		st = check_tokens(s, repair && locked, out);
	/* As in sem_admin: after a failure, closing the connection releases
	 * the mutex. */
	if (st == AL_OK && locked)
		st = req_ask_ok(s, DELETE_QUEUE, s->name.base);
	/* Each slot made again is free: a waiter in line is woken for it,
	 * as for a slot added. */
	if (st == AL_OK && filled > 0)
		st = sem_wake_added(s, filled);
	free(cs.missing.slot);
	return st;
}

void sem_check_free(struct sem_check *c)
{
	free(c->problem);
	free(c->orphans.slot);
	memset(c, 0, sizeof(*c));
}

void sem_problem_queue(const struct sem *s, const struct sem_problem *p, char *buf)
{
	if (p->kind == SEM_STRAY_MUTEX)
		snprintf(buf, QUEUE_NAME_MAX + 1, "%s", s->name.base);
	else if (p->kind == SEM_MISSING_MARKER || p->kind == SEM_STRAY_MARKER)
		sem_name_slot(&s->name, 1, QUORUM_MARKER_QUEUE, buf);
	else if (p->kind == SEM_MISSING_TOKENS)
		sem_name_slot(&s->name, 1, TOKENS_QUEUE, buf);
	else if (p->kind == SEM_UNRECORDED || p->kind == SEM_UNFINISHED)
		sem_name_slot(&s->name, 1, SLOT_QUEUE, buf);
	else if (p->kind == SEM_STRAY_PAUSE)
		sem_name_slot(&s->name, 0, SLOT_QUEUE, buf);
	else
		sem_name_slot(&s->name, p->slot,
			      p->kind == SEM_STRAY_HOLDER ? HOLDER_QUEUE : SLOT_QUEUE, buf);
}
