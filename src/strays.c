/* Queues beside a semaphore's slots, found under the admin mutex: the
 * strays, which nobody holds (slot queues above max, holder queues of no
 * connection), for admin.c to sweep and check.c to report and repair, and
 * the orphans (holders above max: the real holders of removed slots).
 * Stray holder queues are deleted here too; slot queues are deleted with
 * admin.c's other deletes, highest first. */
#include "sem_parts.h"

#include <stdlib.h>

/* The slot queues above max (an administrator stopped between cutting
 * the record and deleting the slots, a foreign client), less those a
 * holder holds: deleting one would end its job, and amqplock's own
 * repairs never end a job. *kept counts those left. */
enum al_status strays_find(struct sem *s, unsigned max, struct slot_list *strays, unsigned *kept)
{
	enum al_status st = look_scan_above(s, SLOT_QUEUE, max, strays);
	bool holder, lease;
	size_t i, n = 0;

	*kept = 0;
	for (i = 0; st == AL_OK && i < strays->len; i++) {
		st = look_probe_taken(s, strays->slot[i], 1, &holder, &lease, NULL);
		if (st == AL_OK && (holder || lease)) {
			trace("stray slot queue %u above max %u is held; kept", strays->slot[i],
			      max);
			++*kept;
		} else {
			strays->slot[n++] = strays->slot[i];
		}
	}
	strays->len = n;
	return st;
}

/* The holder queues that exist for slots 1..max and in the overshoot
 * windows above, sorted: strays, which no connection holds (a passive
 * declare of ours sees them, where a holder's exclusive queue gets 405),
 * and, above max, orphans (the real holders of removed slots; orphans may
 * be NULL). A queue we may not look at (RabbitMQ 4.2 and later check
 * permissions on passive declares) is taken for a holder's. (Asking the
 * holders' leases first would spare the broker those refusals, but a
 * probe of a lease being deleted can crash the connection: see
 * leases_of_free.) */
enum al_status strays_find_holders(struct sem *s, unsigned max, struct slot_list *strays,
				   struct slot_list *orphans)
{
	struct slot_list found = {0};
	enum al_status st = AL_OK;
	uint16_t *answer = NULL;
	bool *exists;
	size_t i;

	if (max > 0) {
		if (!(exists = calloc(max, sizeof(*exists))))
			return fail(AL_INTERNAL, "out of memory");
		st = probe_slots(s->conn, &s->name, HOLDER_QUEUE, 1, max, exists, NULL);
		for (i = 0; st == AL_OK && i < max; i++)
			if (exists[i])
				st = req_append(&found, (unsigned)i + 1);
		free(exists);
	}
	if (st == AL_OK)
		st = look_scan_above(s, HOLDER_QUEUE, max, &found);
	if (st == AL_OK && found.len > 0 && !(answer = calloc(found.len, sizeof(*answer))))
		st = fail(AL_INTERNAL, "out of memory");
	if (st == AL_OK)
		st = req_ask_each(s, DECLARE_PASSIVE, HOLDER_QUEUE, found.slot, found.len,
				  REFUSED_ACCESS | REFUSED_NOT_FOUND | REFUSED_LOCKED, answer);
	for (i = 0; st == AL_OK && i < found.len; i++) {
		if (answer[i] == 0)
			st = req_append(strays, found.slot[i]);
		else if (answer[i] != AMQP_NOT_FOUND && found.slot[i] > max && orphans)
			st = req_append(orphans, found.slot[i]);
		if (answer[i] == AMQP_ACCESS_REFUSED)
			trace("holder queue %u may not be looked at; taken as held", found.slot[i]);
	}
	free(answer);
	free(found.slot);
	return st;
}

/* Deletes stray holder queues, each answer as req_ask_each gives it. A holder
 * that has taken the slot since the queue was found owns the queue now,
 * exclusively, and the broker refuses to delete it (405). */
enum al_status strays_delete_holders(struct sem *s, const struct slot_list *strays, unsigned accept,
				     uint16_t **answer)
{
	size_t i;

	*answer = NULL;
	if (strays->len == 0)
		return AL_OK;
	if (!(*answer = calloc(strays->len, sizeof(**answer))))
		return fail(AL_INTERNAL, "out of memory");
	for (i = 0; i < strays->len; i++)
		trace("deleting stray holder queue %u (held by no connection)", strays->slot[i]);
	return req_ask_each(s, DELETE_QUEUE, HOLDER_QUEUE, strays->slot, strays->len,
			    REFUSED_LOCKED | accept, *answer);
}
