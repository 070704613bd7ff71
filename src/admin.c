/* Administration under the admin mutex: counting the slot queues against
 * the size record, resizing, slot types and the quorum marker, and
 * sweeping strays (create, destroy, add, remove, max N). */
#include "sem_parts.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "record.h"

/* Administrators count the slot queues one by one from 1, in windows that
 * double, on past holes, until past the record a window finds none: so a
 * slot queue that an expires policy or a hand deleted leaves a hole, not a
 * smaller semaphore. max is the record's; a semaphore without one (made by
 * amqplock 0.2 or older) has the highest slot queue found for max, holes
 * filled upward rather than the slots above them swept. Slot queues above
 * a record are strays (sweep_strays). */
enum al_status admin_count_slots(struct sem *s, struct census *cs)
{
	bool exists[LARGEST_WINDOW], any = true, read = false, known;
	unsigned first = 1, batch = FIRST_WINDOW, i, top = 0;
	enum al_status st;

	memset(cs, 0, sizeof(*cs));
	while (first <= SLOTS_MAX) {
		/* The record is asked for once the slot queues run out, near
		 * the highest found, which is max when nothing is amiss: two
		 * questions. Then on to its max, should that lie higher. */
		if (!any && !read) {
			read = true;
			st = record_read(s->conn, &s->name, top, &cs->recorded);
			if (st != AL_OK)
				return st;
		}
		if (!any && first > cs->recorded)
			break;
		if (batch > SLOTS_MAX + 1 - first)
			batch = SLOTS_MAX + 1 - first;
		st = probe_slots(s->conn, &s->name, SLOT_QUEUE, first, batch, exists, NULL);
		if (st != AL_OK)
			return st;
		any = false;
		for (i = 0; i < batch; i++) {
			if (!exists[i])
				continue;
			any = true;
			top = first + i;
		}
		first += batch;
		if (batch < LARGEST_WINDOW)
			batch *= 2;
	}
	if (!read && (st = record_read(s->conn, &s->name, top, &cs->recorded)) != AL_OK)
		return st;
	cs->max = cs->recorded ? cs->recorded : top;
	/* Slot queues right above the record, without a gap: slots an
	 * amqplock older than the record added (or a remove stopped between
	 * cutting the record and deleting them). They are taken for slots,
	 * to be recorded, rather than swept as strays: that can leave a
	 * semaphore larger than a stopped remove meant, never end a job. */
	for (first = cs->max + 1; cs->recorded && first <= top; first += batch) {
		batch = top - first + 1 < LARGEST_WINDOW ? top - first + 1 : LARGEST_WINDOW;
		st = probe_slots(s->conn, &s->name, SLOT_QUEUE, first, batch, exists, NULL);
		for (i = 0; st == AL_OK && i < batch && exists[i]; i++)
			cs->max = first + i;
		if (st != AL_OK || i < batch)
			break;
	}
	if (st != AL_OK)
		return st;
	look_trace_max(s, cs->max);
	/* The holes: asked again, slot by slot up to max. */
	for (first = 1; st == AL_OK && first <= cs->max; first += batch) {
		batch = cs->max - first + 1 < LARGEST_WINDOW ? cs->max - first + 1 : LARGEST_WINDOW;
		st = probe_slots(s->conn, &s->name, SLOT_QUEUE, first, batch, exists, NULL);
		for (i = 0; st == AL_OK && i < batch; i++) {
			if (!exists[i]) {
				st = req_append(&cs->missing, first + i);
				continue;
			}
			if (!cs->lowest)
				cs->lowest = first + i;
			cs->highest = first + i;
		}
	}
	if (st == AL_OK && cs->missing.len > 0)
		trace("%zu slot queue(s) of %s missing, the first %u (an expires policy? deleted "
		      "by "
		      "hand?)",
		      cs->missing.len, s->label, cs->missing.slot[0]);
	/* A create records slot 1 last: without it, the create stopped
	 * halfway. (A semaphore without a record but with slot queues is
	 * amqplock 0.2's, not a create of ours.) */
	if (st == AL_OK && (cs->recorded > 0 || top == 0))
		st = record_unfinished(s->conn, &s->name, cs->recorded, &cs->unfinished);
	if (st == AL_OK && cs->unfinished)
		trace("%s is a create stopped halfway: %s", s->label,
		      cs->recorded ? "slot 1 is not recorded"
				   : "its record is part written, no slot queue made");
	if (st == AL_OK)
		st = record_paused(s->conn, &s->name, &cs->paused, &known);
	if (st == AL_OK && cs->paused)
		trace("%s is paused%s", s->label,
		      cs->max ? " (a marker left beside its slots)" : "");
	return st;
}

/* How many of slots first..first+n-1 a holder holds (a holder queue or a
 * lease): the jobs a shrink is about to end, for its report. */
static enum al_status count_held(struct sem *s, unsigned first, unsigned n, unsigned *held)
{
	bool *taken = calloc(n ? n : 1, sizeof(*taken));
	enum al_status st;
	unsigned i;

	*held = 0;
	if (!taken)
		return fail(AL_INTERNAL, "out of memory");
	st = look_probe_taken(s, first, n, taken, NULL, NULL);
	for (i = 0; st == AL_OK && i < n; i++)
		*held += taken[i];
	free(taken);
	return st;
}

static enum al_status delete_slots_down(struct sem *s, unsigned top, unsigned count)
{
	unsigned done;

	trace("deleting slots %u..%u", top, top - count + 1);
	return req_pipeline(s, DELETE_QUEUE, top, count, true, &done);
}

/* Declares slots from..from+count-1. If the broker refuses one, the ones
 * this call made are deleted again: no half-made semaphore stays behind. */
static enum al_status declare_slots(struct sem *s, unsigned from, unsigned count)
{
	enum al_status st;
	unsigned done;

	trace("declaring slots %u..%u", from, from + count - 1);
	st = req_pipeline(s, s->opts.slot_type == SLOT_QUORUM ? DECLARE_QUORUM : DECLARE_SLOT, from,
			  count, false, &done);
	if (st != AL_OK && done > 0 && !s->conn->dead && conn_reset_channel(s->conn) == AL_OK)
		delete_slots_down(s, from + done - 1, done);
	return st;
}

/* Deletes the stray slot queues above max that nobody holds, highest
 * first like every delete. */
static enum al_status sweep_strays(struct sem *s, unsigned max, struct sem_change *out)
{
	struct slot_list strays = {0};
	enum al_status st = strays_find(s, max, &strays, &out->strays_kept);
	size_t i;

	for (i = strays.len; st == AL_OK && i > 0; i--) {
		trace("deleting stray slot queue %u above max %u", strays.slot[i - 1], max);
		st = delete_slots_down(s, strays.slot[i - 1], 1);
	}
	out->swept = (unsigned)strays.len;
	free(strays.slot);
	return st;
}

/* What administrators do on their way: a stray holder queue makes its
 * slot read as held for ever, and outlives a destroy. A user who may not
 * delete holder queues leaves them (counted in holders_kept) rather than
 * fail the change it came for. */
static enum al_status sweep_holders(struct sem *s, unsigned max, struct sem_change *out)
{
	struct slot_list strays = {0};
	uint16_t *answer = NULL;
	enum al_status st = strays_find_holders(s, max, &strays, NULL);
	size_t i;

	if (st == AL_OK)
		st = strays_delete_holders(s, &strays, REFUSED_ACCESS, &answer);
	for (i = 0; st == AL_OK && i < strays.len; i++) {
		if (answer[i] == 0)
			out->swept_holders++;
		else if (answer[i] == AMQP_ACCESS_REFUSED)
			out->holders_kept++;
	}
	free(answer);
	free(strays.slot);
	return st;
}

/* Takes the admin mutex, an exclusive queue: a crashed administrator's
 * goes with its connection. A shared queue of that name (declared by hand
 * or by a foreign client) would keep every administrator waiting for
 * ever, as the exclusive declare is refused for it (405) just as for a
 * real mutex; but a passive declare, refused for another connection's
 * exclusive queue, sees it. With `repair` such a leftover is deleted and
 * the mutex taken; without, admin_lock returns at once with *locked
 * false. *stray says whether there was one. */
enum al_status admin_lock(struct sem *s, bool repair, bool *locked, bool *stray)
{
	struct deadline given_up = deadline_in(s->opts.admin_wait);
	struct backoff pauses = backoff_start(RETRY_FIRST, RETRY_LONGEST);
	const char *mutex = s->name.base;
	double pause;
	unsigned quick = 0;
	enum al_status st;
	uint16_t answer;

	*locked = *stray = false;
	for (;;) {
		if ((st = req_ask_one(s, DECLARE_EXCLUSIVE, mutex, REFUSED_LOCKED, &answer)) !=
		    AL_OK)
			return st;
		if (answer == 0) {
			trace("holding admin mutex %s", mutex);
			*locked = true;
			return AL_OK;
		}
		st = req_ask_one(s, DECLARE_PASSIVE, mutex, REFUSED_LOCKED | REFUSED_NOT_FOUND,
				 &answer);
		if (st != AL_OK)
			return st;
		if (answer == 0) {
			*stray = true;
			if (!repair) {
				trace("admin mutex %s is a leftover shared queue; not taken",
				      mutex);
				return AL_OK;
			}
			/* Refused (405) only if another administrator deleted it
			 * first and holds the mutex now. */
			st = req_ask_one(s, DELETE_QUEUE, mutex, REFUSED_LOCKED, &answer);
			if (st != AL_OK)
				return st;
			if (answer == 0)
				trace("deleted the leftover admin mutex %s (a shared queue; a real "
				      "one is exclusive)",
				      mutex);
		}
		/* Deleted, or gone meanwhile: try again at once (even past the
		 * deadline), but not for ever should it keep coming back. */
		if (answer != AMQP_RESOURCE_LOCKED && quick++ < 10)
			continue;
		if (deadline_passed(given_up))
			return fail(AL_BUSY,
				    "another administrator is changing %s (waited %g s for %s)",
				    s->label, s->opts.admin_wait, mutex);
		/* The last pause ends at the deadline, for one more try. */
		pause = backoff_next(&pauses, given_up);
		trace("admin mutex %s is busy; retrying in %.0f ms", mutex, pause * 1000);
		sleep_seconds(pause);
	}
}

const char *sem_slot_type_name(enum slot_type t)
{
	return t == SLOT_QUORUM ? "quorum" : "classic";
}

/* The type of existing slot k, found by declaring it again as a quorum
 * queue: the broker accepts that for a quorum queue and refuses it (406,
 * inequivalent arguments) for a classic one. Only under the admin mutex,
 * where slot k cannot go away meanwhile. */
enum al_status admin_slot_type_of(struct sem *s, unsigned k, enum slot_type *type)
{
	char queue[QUEUE_NAME_MAX + 1];
	struct queue_request r;
	void *method;
	enum al_status st;
	uint16_t refused;

	sem_name_slot(&s->name, k, SLOT_QUEUE, queue);
	method = req_build(s, &r, DECLARE_QUORUM, queue);
	st = conn_call(s->conn, r.id, method, r.ok, REFUSED_MISMATCH, &refused,
		       "checking the type of", queue);
	*type = refused ? SLOT_CLASSIC : SLOT_QUORUM;
	return st;
}

/* The slots' type as the quorum marker tells it, for a semaphore none of
 * whose slot queues is left to tell it. */
enum al_status admin_marked_type(struct sem *s, enum slot_type *type)
{
	bool quorum;
	enum al_status st =
		probe_slots(s->conn, &s->name, QUORUM_MARKER_QUEUE, 1, 1, &quorum, NULL);

	*type = quorum ? SLOT_QUORUM : SLOT_CLASSIC;
	return st;
}

/* New slots take the type of the slots there are (the lowest and highest
 * slot queues must agree; slot queues that are gone have none to tell: the
 * quorum marker does then); a --slot-type that says otherwise is refused,
 * as is a semaphore whose slots were mixed by hand. */
static enum al_status keep_slot_type(struct sem *s, const struct census *cs)
{
	enum slot_type first, last;
	enum al_status st;

	if ((st = cs->lowest ? admin_slot_type_of(s, cs->lowest, &first)
			     : admin_marked_type(s, &first)) != AL_OK)
		return st;
	last = first;
	if (cs->highest > cs->lowest && (st = admin_slot_type_of(s, cs->highest, &last)) != AL_OK)
		return st;
	if (first != last)
		return fail(AL_BROKER,
			    "the slots of %s are of mixed types (slot %u %s, slot %u %s); "
			    "recreate it",
			    s->label, cs->lowest, sem_slot_type_name(first), cs->highest,
			    sem_slot_type_name(last));
	trace("%s has %s slots", s->name.base, sem_slot_type_name(first));
	if (s->opts.slot_type_given && s->opts.slot_type != first)
		return fail(AL_USAGE, "%s has %s slots: %s ones would mix types", s->label,
			    sem_slot_type_name(first), sem_slot_type_name(s->opts.slot_type));
	s->opts.slot_type = first;
	return AL_OK;
}

/* Makes again the slot queues missing at or below `upto`: each run of
 * them in one pipeline, ascending, and slot 1 last, so that readers, who
 * read the record when slot 1 is missing (or another slot of their first
 * window: look_find_free), see max whole until the last hole is made. */
enum al_status admin_fill_holes(struct sem *s, const struct census *cs, unsigned upto,
				unsigned *filled)
{
	const struct slot_list *m = &cs->missing;
	size_t i, j, first = m->len > 0 && m->slot[0] == 1 ? 1 : 0;
	enum al_status st = AL_OK;

	*filled = 0;
	for (i = first; st == AL_OK && i < m->len && m->slot[i] <= upto; i = j) {
		for (j = i + 1;
		     j < m->len && m->slot[j] <= upto && m->slot[j] == m->slot[j - 1] + 1; j++)
			;
		trace("making slot queues %u..%u again (they were missing)", m->slot[i],
		      m->slot[j - 1]);
		if ((st = declare_slots(s, m->slot[i], (unsigned)(j - i))) == AL_OK)
			*filled += (unsigned)(j - i);
	}
	if (st == AL_OK && first && upto >= 1) {
		trace("making slot queue 1 again (it was missing)");
		if ((st = declare_slots(s, 1, 1)) == AL_OK)
			++*filled;
	}
	return st;
}

static enum al_status target_max(enum sem_admin_op op, unsigned n, unsigned max, unsigned *target)
{
	unsigned long t = n;

	if (op == SEM_ADD)
		t = (unsigned long)max + n;
	else if (op == SEM_REMOVE)
		t = n >= max ? 0 : max - n;
	else if (op == SEM_DESTROY)
		t = 0;
	if (t > SLOTS_MAX)
		return fail(AL_USAGE, "that would make %lu slots; at most %u are allowed", t,
			    SLOTS_MAX);
	*target = (unsigned)t;
	return AL_OK;
}

/* Makes or deletes the semaphore's quorum marker, a quorum queue itself
 * (so that it survives the loss of a node, as the slots do). */
enum al_status admin_set_marker(struct sem *s, bool quorum)
{
	char queue[QUEUE_NAME_MAX + 1];

	sem_name_slot(&s->name, 1, QUORUM_MARKER_QUEUE, queue);
	return req_ask_ok(s, quorum ? DECLARE_QUORUM : DELETE_QUEUE, queue);
}

/* The stream of fencing tokens (fencing.c), made with the semaphore and
 * deleted with it; a create refused after it leaves it, to be used by
 * the create run again (its offsets go on). */
enum al_status admin_make_tokens(struct sem *s)
{
	char queue[QUEUE_NAME_MAX + 1];

	sem_name_slot(&s->name, 1, TOKENS_QUEUE, queue);
	return req_ask_ok(s, DECLARE_TOKENS, queue);
}

/* A destroy deletes the line of entries too (#line, which has no expiry:
 * waiters of a semaphore destroyed find it gone at their next look) and
 * the stream of fencing tokens (made again by a create, its tokens count
 * from 1 again); an administrator whose permissions predate them is not
 * refused for them. */
static enum al_status drop_extras(struct sem *s)
{
	char line[QUEUE_NAME_MAX + 1], tokens[QUEUE_NAME_MAX + 1];
	uint16_t refused;
	enum al_status st;

	line_entries_queue(s, line);
	sem_name_slot(&s->name, 1, TOKENS_QUEUE, tokens);
	st = req_ask_one(s, DELETE_QUEUE, line, REFUSED_ACCESS, &refused);
	return st == AL_OK ? req_ask_one(s, DELETE_QUEUE, tokens, REFUSED_ACCESS, &refused) : st;
}

/* Takes back what a create refused halfway made (create_new): its slot
 * queues 1..made (or 2..n), its record from slot 2 up as far as it got,
 * and a quorum marker it made; nothing else, so that what another
 * permission refuses is never asked. */
static void unmake(struct sem *s, unsigned n, unsigned made, bool marker)
{
	unsigned top;

	if (s->conn->dead || conn_reset_channel(s->conn) != AL_OK)
		return;
	trace("taking back what the create of %s made", s->label);
	if (made > 0 && delete_slots_down(s, n, made) != AL_OK)
		return;
	if (record_unfinished(s->conn, &s->name, 0, &top) != AL_OK ||
	    record_cut(s->conn, &s->name, top, 2) != AL_OK)
		return;
	if (marker)
		admin_set_marker(s, false);
}

/* A new semaphore of n slots, made so that readers see n slots or none
 * (docs/design.md, "A create stopped halfway"): a quorum marker first,
 * which tells the slots' type to holders and to whoever finishes a
 * stopped create; the record from slot 2 up; the slot queues from 2 up,
 * then slot 1's; a stray quorum marker deleted; the stream of fencing
 * tokens; slot 1 recorded last.
 * Slots 2..written are recorded already (a create stopped while writing
 * the record): those above n are cut. Refused, it takes back what it
 * made (unmake). */
static enum al_status create_new(struct sem *s, unsigned n, unsigned written)
{
	bool quorum = s->opts.slot_type == SLOT_QUORUM;
	unsigned made = 0;
	enum al_status st;

	if ((quorum && (st = admin_set_marker(s, true)) != AL_OK) ||
	    (st = record_cut(s->conn, &s->name, written, n + 1)) != AL_OK)
		return st;
	st = record_write(s->conn, &s->name, written < 2 ? 2 : written + 1, n);
	if (st == AL_OK && n > 1 && (st = declare_slots(s, 2, n - 1)) == AL_OK)
		made = n - 1;
	if (st == AL_OK && (st = declare_slots(s, 1, 1)) == AL_OK)
		made = n;
	if (st == AL_OK && !quorum)
		st = admin_set_marker(s, false);
	if (st == AL_OK)
		st = admin_make_tokens(s);
	if (st == AL_OK)
		st = record_write(s->conn, &s->name, 1, 1);
	if (st != AL_OK)
		unmake(s, n, made, quorum);
	return st;
}

/* create: a semaphore made anew, or a create of the same size stopped
 * halfway finished; anything else there exists (73). */
static enum al_status create_locked(struct sem *s, const struct census *cs, unsigned n,
				    struct sem_change *out)
{
	unsigned written = cs->unfinished;
	enum al_status st;

	out->previous = out->max = cs->max;
	if (cs->max > 0 && cs->lowest == 0) {
		/* A record without a single slot queue left (every slot
		 * expired while idle, or an amqplock older than the record
		 * destroyed it): made anew, as it would have been without
		 * one. Slot 1's record goes first: from then on nobody reads
		 * it (record.h). */
		trace("the record of %s says %u slots, but none is left; making it anew", s->label,
		      cs->max);
		if ((st = record_cut(s->conn, &s->name, 1, 1)) != AL_OK)
			return st;
		written = cs->recorded;
		out->previous = out->max = 0;
	} else if (cs->max > 0 && cs->unfinished && n == cs->max) {
		/* What a user who runs the create again expects: done. */
		trace("finishing %s, a create of %u slots stopped halfway", s->label, n);
		if ((st = keep_slot_type(s, cs)) != AL_OK || (st = admin_make_tokens(s)) != AL_OK ||
		    (st = admin_set_marker(s, s->opts.slot_type == SLOT_QUORUM)) != AL_OK ||
		    (st = admin_fill_holes(s, cs, n, &out->filled)) != AL_OK)
			return st;
		out->finished = true;
		return record_write(s->conn, &s->name, 1, 1);
	} else if (cs->max > 0 && cs->unfinished) {
		return fail(AL_EXISTS,
			    "semaphore %s already exists with %u slots, unfinished (a create "
			    "stopped halfway, %zu slot queue%s not made): amqplock create %s %u "
			    "finishes it, amqplock destroy %s removes it",
			    s->label, cs->max, cs->missing.len, cs->missing.len == 1 ? "" : "s",
			    s->label, cs->max, s->label);
	} else if (cs->max > 0) {
		return fail(AL_EXISTS, "semaphore %s already exists with %u slots", s->label,
			    cs->max);
	} else if (cs->paused) {
		return fail(AL_EXISTS,
			    "semaphore %s already exists, paused (max 0): amqplock max %s N "
			    "resumes it",
			    s->label, s->label);
	} else if (written) {
		/* Stopped while writing the record: nothing anyone could
		 * use, so this create makes it, whatever its size. */
		trace("%s: a create stopped while recording slots 2..%u; making it anew", s->label,
		      written);
	}
	if ((st = create_new(s, n, written)) == AL_OK)
		out->max = n;
	return st;
}

/* The record goes up after the slot queues and down before them: it
 * never says more than the slots amqplock has made (record.h), but for a
 * create (create_new). Holes below what stays are filled first; a
 * semaphore without a record gets one, and a create stopped halfway its
 * slot 1's record, last. The pause marker is written before the last slot
 * goes (a pause stopped halfway leaves a marker beside slots, never a
 * semaphore gone), cut once slots are recorded again, and cut first by
 * destroy (one stopped then leaves slots without a marker, as before
 * pauses, never a marker alone). */
static enum al_status change_locked(struct sem *s, enum sem_admin_op op, unsigned n,
				    struct sem_change *out)
{
	struct census cs;
	enum al_status st;
	unsigned max, keep, target = 0, held = 0, drained = 0;
	bool pausing;

	if ((st = admin_count_slots(s, &cs)) != AL_OK)
		goto out;
	max = cs.max;
	if ((st = sweep_strays(s, max, out)) != AL_OK || (st = sweep_holders(s, max, out)) != AL_OK)
		goto out;
	if (op == SEM_CREATE) {
		st = create_locked(s, &cs, n, out);
		goto out;
	}
	out->previous = out->max = max;
	if (max == 0 && !cs.paused && cs.unfinished && op == SEM_DESTROY) {
		trace("taking off slots %u..2 of the record, left by a create stopped halfway",
		      cs.unfinished);
		if ((st = record_cut(s->conn, &s->name, cs.unfinished, 2)) == AL_OK)
			st = admin_set_marker(s, false);
		goto out;
	}
	if (max == 0 && !cs.paused) {
		st = cs.unfinished ? fail(AL_NOT_FOUND,
					  "semaphore %s does not exist (a create stopped halfway "
					  "left part of its size record: amqplock create %s N "
					  "makes it, amqplock destroy %s removes the rest)",
					  s->label, s->label, s->label)
				   : fail(AL_NOT_FOUND, "semaphore %s does not exist", s->label);
		goto out;
	}
	if ((st = target_max(op, n, max, &target)) != AL_OK)
		goto out;
	pausing = target == 0 && op != SEM_DESTROY;
	/* A pause learns the slots' type too: the quorum marker keeps it
	 * for the resume, no slot queue being left to tell it. */
	if ((target > max || s->opts.slot_type_given || cs.missing.len > 0 ||
	     (pausing && max > 0) || (s->opts.drain && target < max)) &&
	    (st = keep_slot_type(s, &cs)) != AL_OK)
		goto out;
	if (op == SEM_DESTROY && cs.paused && (st = record_cut(s->conn, &s->name, 0, 0)) != AL_OK)
		goto out;
	if (pausing && !cs.paused && (st = record_write(s->conn, &s->name, 0, 0)) != AL_OK)
		goto out;
	keep = target < max ? target : max;
	if ((st = admin_fill_holes(s, &cs, keep, &out->filled)) != AL_OK ||
	    (st = record_write(s->conn, &s->name, cs.recorded + 1, keep)) != AL_OK)
		goto out;
	/* A size set without --drain (and no growth) ends every job above
	 * it, those of earlier drains too: their markers go before the slot
	 * queues. */
	if (!s->opts.drain && target <= max &&
	    (st = drain_end(s, target + 1, max, &drained)) != AL_OK)
		goto out;
	if (target > max) {
		if ((st = declare_slots(s, max + 1, target - max)) == AL_OK &&
		    (st = record_write(s->conn, &s->name, max + 1, target)) == AL_OK)
			st = drain_unmark(s, max + 1, target);
	} else if (target < max) {
		/* Drained, the holders run on; else, how many jobs end. */
		st = s->opts.drain ? drain_mark(s, target + 1, max)
				   : count_held(s, target + 1, max - target, &held);
		if (st == AL_OK &&
		    (st = record_cut(s->conn, &s->name, cs.recorded > keep ? cs.recorded : keep,
				     target + 1)) == AL_OK)
			st = delete_slots_down(s, max, max - target);
	}
	out->ended_holders = s->opts.drain ? 0 : held + drained;
	/* A create stopped halfway, now whole: slot 1 recorded, last. */
	if (st == AL_OK && target > 0 && cs.unfinished) {
		st = record_write(s->conn, &s->name, 1, 1);
		out->finished = st == AL_OK;
	}
	/* Resumed (or a marker left beside slots): slots are recorded. */
	if (st == AL_OK && target > 0 && cs.paused)
		st = record_cut(s->conn, &s->name, 0, 0);
	if (st == AL_OK)
		out->max = target;
	/* Markers nobody holds any more go (drain.c). */
	if (st == AL_OK)
		st = drain_sweep(s, target, &out->draining_holders);
	/* Quorum slots get quorum leases: the marker tells holders so. Its
	 * type is known here when slots were made or paused (or --slot-type
	 * said). */
	if (st == AL_OK && op == SEM_DESTROY) {
		if ((st = admin_set_marker(s, false)) == AL_OK)
			st = drop_extras(s);
	} else if (st == AL_OK &&
		   (target > max || s->opts.slot_type_given || (pausing && max > 0))) {
		st = admin_set_marker(s, s->opts.slot_type == SLOT_QUORUM);
	}
out:
	free(cs.missing.slot);
	return st;
}

enum al_status sem_admin(struct sem *s, enum sem_admin_op op, unsigned n, struct sem_change *out)
{
	enum al_status st;
	unsigned added;
	bool locked, stray;

	memset(out, 0, sizeof(*out));
	st = admin_lock(s, true, &locked, &stray);
	if (st != AL_OK)
		return st;
	st = change_locked(s, op, n, out);
	/* After a failure the connection may be gone; closing it releases the
	 * mutex just the same. */
	if (st == AL_OK)
		st = req_ask_ok(s, DELETE_QUEUE, s->name.base);
	/* Each slot added, or made again, wakes one waiter, the next in
	 * line: nobody else says that a slot is free (waiters would find it
	 * by polling). */
	added = out->max > out->previous ? out->max - out->previous : 0;
	if (st == AL_OK && added + out->filled > 0)
		st = sem_wake_added(s, added + out->filled);
	return st;
}
