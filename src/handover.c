/* The lease handed over (docs/design.md, "Handing the lease over"), the
 * offerer's side: a holder that is done offers its lease to the first in
 * line (through #line, or #waiters on one slot); the first in line asks
 * for it through the offerer's holder queue, which nobody but the
 * offerer's connection can read (adopt.c); the offerer answers with the
 * lease's token, and from then on the lease is the asker's, which claims
 * the slot with it, its holder queue included. A lease's token is no
 * secret: what decides is what the broker enforces, an exclusive queue
 * and the lease's arguments. An offer, an ask or an answer that anyone
 * else publishes can make a hand-over fail, never run a second command. */
#include "sem_parts.h"

#include <string.h>

#include "clock.h"
#include "rules.h"

/* How long an offerer waits for the first in line to ask (ADOPT_WAIT_MS
 * in seconds): it takes one round trip, and a first in line that says
 * nothing (an older amqplock, one that died) costs the slot this long. An
 * offer lives no longer (its expiration, as text): one left in a line
 * nobody waited in is gone by the time its offerer has released the
 * slot. */
#define ADOPT_WAIT (ADOPT_WAIT_MS / 1000.0)
#define TEXT_OF(n) #n
#define TEXT(n)    TEXT_OF(n)

/* The offerer has decided for an asker (heard_ask). */
static bool decided(const struct sem *s)
{
	return s->hold->handover.adopter[0] != '\0';
}

/* The offerer has its answer: an adopter, a decline, or no more ears. */
static bool answered(const struct sem *s)
{
	return decided(s) || s->hold->handover.declined || s->hold->handover.deaf;
}

/* What comes to our holder queue while we offer: the first in line's ask
 * (or decline), and whatever else anyone publishes there (status's
 * questions, probes, forgeries), which is dropped. The first ask signed by
 * our login that names this offer and comes within ADOPT_WAIT of it
 * decides: the keeper is told that the lease is not its to end any more,
 * and the lease is the asker's whatever happens next. A decline need not
 * be signed: all it can do is make us release the slot as usual. */
static void heard_ask(void *owner, uint64_t tag, const amqp_basic_properties_t *p)
{
	struct sem *s = owner;
	char id[sizeof(s->hold->handover.adopter)];
	double after = boot_seconds() - s->hold->handover.offered_at;

	(void)tag; /* the holder queue is read without acknowledgements */
	if (decided(s) || s->hold->handover.deaf || !note_nonce_is(p, s->hold->handover.nonce))
		return;
	if (conn_is_type(p, DECLINED_TYPE)) {
		s->hold->handover.declined = true;
		return;
	}
	if (!conn_is_type(p, ASK_TYPE) || !conn_signed_by_us(s->conn, p) ||
	    !note_header_text(p, "adopter", id, sizeof(id)))
		return;
	/* The asker stops waiting ASK_WAIT after it asked, which was after
	 * our offer: an ask read later than ADOPT_WAIT after the offer (we
	 * were stopped, our host paused) may have been given up. */
	if (after > ADOPT_WAIT) {
		trace("an ask for slot %u came %.3f s after the offer: too late",
		      s->hold->handover.slot, after);
		return;
	}
	memcpy(s->hold->handover.adopter, id, sizeof(id));
	if (s->hold->lease_given)
		s->hold->lease_given(s->hold->given_arg);
}

static void stopped_hearing(void *owner, enum conn_consumer_end why)
{
	struct sem *s = owner;

	(void)why;
	s->hold->handover.deaf = true;
}

/* The offer, published in the round trip that asks whether anyone waits
 * (anyone_waiting), as soon as the question is sent. */
struct offering {
	struct sem *s;
	const struct conn_note *offer;
};

static enum al_status send_offer(void *arg)
{
	const struct offering *o = arg;

	return conn_send_note(o->s->conn, o->offer);
}

/* Whether anyone waits in line, asked in the round trip that publishes
 * the offer. An offer that went to a line nobody waited in lies there
 * for its expiry; a waiter that takes it meanwhile asks into a holder
 * queue that is gone, and is told so (sem_adopt). A line gone since
 * refuses the question: the release then goes on as if there were no
 * line. */
static enum al_status anyone_waiting(struct sem *s, const struct conn_note *offer, bool *waiting)
{
	char queue[QUEUE_NAME_MAX + 1];
	struct offering o = {s, offer};
	uint32_t waiters, messages;
	enum al_status st;

	line_waiters_queue(s, queue);
	st = req_ask_counts_meanwhile(s, queue, &waiters, &messages, send_offer, &o);
	*waiting = st == AL_OK && waiters > 0;
	return st;
}

/* Decided: our holder queue is deleted, then the answer, which hands the
 * lease over with its token, goes behind it on the same channel to where
 * the offer went (the asker's own queue, or #waiters), so that the
 * adopter, which claims the holder queue with the lease, finds it free.
 * Whatever fails now, the lease is not ours any more: the keeper has let
 * go of it. */
static void hand_to_adopter(struct sem *s, unsigned slot, const char *to)
{
	amqp_table_entry_t e[2] = {note_text_entry("adopter", s->hold->handover.adopter),
				   note_i64_entry("token", s->hold->lease.token)};
	amqp_table_t headers = {.num_entries = 2, .entries = e};
	struct conn_note n = {.queue = to,
			      .type = HANDED_TYPE,
			      .expiration = NOTICE_EXPIRATION,
			      .correlation_id = s->hold->handover.nonce,
			      .headers = &headers,
			      .main = true};
	static const struct step delete_holder = {DELETE_QUEUE, HOLDER_QUEUE};
	enum al_status st;
	uint16_t refused;
	size_t done;

	st = req_send_steps(s, slot, &delete_holder, 1);
	if (st == AL_OK)
		st = conn_send_note(s->conn, &n);
	if (st == AL_OK)
		st = req_await_steps(s, &delete_holder, 1, &done, &refused);
	if (st == AL_OK)
		trace("handed slot %u over", slot);
	else
		trace("could not hand slot %u over: %s", slot, status_message());
	status_clear();
}

/* The release's decision, once the offer is out: the first ask that
 * comes within ADOPT_WAIT decides (heard_ask), a decline or deafness
 * ends the wait sooner. Then no decision any more: an ask read later is
 * dropped. */
static enum al_status await_ask(struct sem *s, bool someone, struct deadline by)
{
	enum al_status st = someone ? note_wait_for(s, answered, by) : AL_OK;

	/* What came meanwhile is heard (an ask too late is said so). */
	if (st == AL_OK && !answered(s))
		st = conn_drain(s->conn);
	s->hold->handover.deaf = true;
	conn_consume_end(s->conn, NULL);
	return st;
}

/* A new hand-over of slot k: its nonce, and our holder queue listened
 * to, where the ask comes (nobody else can read it), from before the
 * offer: an ask that comes first waits there for us. */
static enum al_status listen_for_ask(struct sem *s, unsigned slot)
{
	char holder[QUEUE_NAME_MAX + 1];
	struct conn_consumer hooks = {.delivered = heard_ask, .ended = stopped_hearing, .owner = s};

	memset(&s->hold->handover, 0, sizeof(s->hold->handover));
	s->hold->handover.slot = slot;
	note_new_id(s->hold->handover.nonce, sizeof(s->hold->handover.nonce));
	sem_name_slot(&s->name, slot, HOLDER_QUEUE, holder);
	return conn_listen(s->conn, holder, &hooks);
}

/* The offer through #line (docs/design.md, "A line for N slots"): the
 * oldest entry taken, unacknowledged, and the offer sent into the queue
 * it names, mandatory; an entry whose queue is gone (the offer comes
 * back) is acknowledged, and the next one taken. Decided, the entry is
 * acknowledged (its waiter served) before the answer goes; otherwise it
 * goes back in its place, and the release wakes it. *nobody: no entry
 * of a waiter that is there. */
static enum al_status offer_to_entries(struct sem *s, unsigned slot, bool *handed, bool *nobody)
{
	char line[QUEUE_NAME_MAX + 1], to[QUEUE_NAME_MAX + 1];
	amqp_table_entry_t e[3] = {note_i64_entry("slot", slot),
				   note_i64_entry("lease-ms", s->hold->lease.ms),
				   note_i64_entry("quorum", s->lease_quorum)};
	amqp_table_t headers = {.num_entries = 3, .entries = e};
	struct conn_note offer = {.queue = to,
				  .type = OFFER_TYPE,
				  .expiration = TEXT(ADOPT_WAIT_MS),
				  .headers = &headers,
				  .main = true,
				  .mandatory = true};
	struct conn_got got = {0};
	struct deadline by = deadline_in(ADOPT_WAIT);
	enum al_status st;
	unsigned passed;
	bool routed = false;

	*nobody = true;
	if ((st = listen_for_ask(s, slot)) != AL_OK)
		return st;
	offer.correlation_id = s->hold->handover.nonce;
	line_entries_queue(s, line);
	for (passed = 0; st == AL_OK && !routed && passed < ENTRIES_PASSED_MAX; passed++) {
		if ((st = conn_get(s->conn, line, "queue", to, sizeof(to), &got)) != AL_OK ||
		    !got.tag) {
			/* (no #line, or not ours to read: not asked again) */
			s->no_entries = s->no_entries || got.refused;
			break;
		}
		if (!sem_name_is_waiter(&s->name, to, strlen(to))) {
			conn_settle(s->conn, &got, false);
			continue;
		}
		s->hold->handover.offered_at = boot_seconds();
		by = deadline_in(ADOPT_WAIT);
		if ((st = conn_send_note(s->conn, &offer)) == AL_OK)
			st = conn_note_routed(s->conn, &routed);
		if (st == AL_OK && !routed)
			conn_settle(s->conn, &got, false);
	}
	if (st == AL_OK && passed > (routed ? 1u : 0u))
		trace("passed %u entries of waiters gone in %s", passed - (routed ? 1u : 0u), line);
	*nobody = st == AL_OK && !routed;
	if (routed)
		trace("released slot %u of %s; offering its lease to the first in line (%s)", slot,
		      s->label, to);
	st = await_ask(s, routed, by);
	if ((*handed = decided(s))) {
		conn_settle(s->conn, &got, false);
		if (st == AL_OK)
			hand_to_adopter(s, slot, to);
		status_clear();
		return AL_OK;
	}
	if (routed)
		conn_settle(s->conn, &got, true);
	if (st == AL_OK && routed)
		trace("the lease of slot %u was %s; ending it", slot,
		      s->hold->handover.declined ? "declined" : "not asked for");
	return st;
}

enum al_status sem_hand_over(struct sem *s, unsigned slot, bool *handed)
{
	char line[QUEUE_NAME_MAX + 1];
	amqp_table_entry_t e[3] = {note_i64_entry("slot", slot),
				   note_i64_entry("lease-ms", s->hold->lease.ms),
				   note_i64_entry("quorum", s->lease_quorum)};
	amqp_table_t headers = {.num_entries = 3, .entries = e};
	struct conn_note offer = {
		.type = OFFER_TYPE, .expiration = TEXT(ADOPT_WAIT_MS), .headers = &headers};
	struct deadline by;
	enum al_status st;
	bool up, waiting, someone, nobody = true;

	*handed = false;
	/* Not while our holder queue is not ours (after a re-attach): the
	 * first in line asks through it. */
	if (!rules_offer(s->hold->lease.on, s->conn->user[0] != '\0', conn_consuming(s->conn),
			 !s->hold->lease.need_holder, s->hold->draining))
		return AL_OK;
	if ((st = line_up(s, &up)) != AL_OK || !up)
		return st;
	if (line_entries_wanted(s) &&
	    ((st = offer_to_entries(s, slot, handed, &nobody)) != AL_OK || *handed || !nobody))
		return st;
	/* Through #waiters, to an older amqplock, on one slot only: that
	 * line serves one message at a time, to its first waiter alone.
	 * With several slots, offers of releases that come together reach a
	 * first in line busy with another, and all but one fall back to the
	 * release, later than without an offer (100 holds 5 ms apart on 5
	 * slots: 41% busy, against 52% without hand-overs, on 3.10.8). */
	if (s->max_seen != 1 || s->line != LINE_UP)
		return AL_OK;
	line_waiters_queue(s, line);
	offer.queue = line;
	/* The offer goes on the listener's channel, behind its consume: if
	 * the broker refuses us the holder queue (a user without read on
	 * it), the channel closes and the offer with it, and the first in
	 * line gets the release's wake-up at once. */
	if ((st = listen_for_ask(s, slot)) != AL_OK)
		return st;
	offer.correlation_id = s->hold->handover.nonce;
	trace("released slot %u of %s; offering its lease to the first in line", slot, s->label);
	s->hold->handover.offered_at = boot_seconds();
	by = deadline_in(ADOPT_WAIT);
	st = anyone_waiting(s, &offer, &waiting);
	/* (an asker that came after the count: someone all the same) */
	someone = st == AL_OK && (waiting || decided(s));
	if (st == AL_OK && !someone)
		trace("nobody was in line for slot %u", slot);
	if (st == AL_OK)
		st = await_ask(s, someone, by);
	if ((*handed = decided(s))) {
		if (st == AL_OK)
			hand_to_adopter(s, slot, line);
		status_clear();
		return AL_OK;
	}
	if (st == AL_OK && someone)
		trace("the lease of slot %u was %s; ending it", slot,
		      s->hold->handover.declined ? "declined" : "not asked for");
	return st;
}
