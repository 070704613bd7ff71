/* The lease handed over (docs/design.md, "Handing the lease over"), the
 * first in line's side: what the line delivers heard (an offer, an
 * answer, a wake-up), the lease offered asked for through its holder's
 * holder queue (handover.c answers), and adopted by the answer's token;
 * or declined, or given back. */
#include "sem_parts.h"

#include <string.h>

#include "clock.h"
#include "rules.h"

/* How long an asker waits for the answer: longer than the offerer
 * listens (ADOPT_WAIT_MS from its offer, which came before our ask), so
 * that an answer sent in time is not missed for a moment's delay. */
#define ASK_WAIT 1.0
/* How often, about 2, 4, 6 and 8 ms apart, an adopter asks again for a
 * holder queue that another has: a claimer refused the lease (ours),
 * deleting its holder queue now. */
#define ADOPT_HOLDER_TRIES 4

/* An offer as the first in line reads it; false if any part is missing
 * or out of range (it is then acknowledged and ignored). One that names
 * a token is an older amqplock's: read only to be declined. */
static bool read_offer(struct sem *s, const amqp_basic_properties_t *p)
{
	int64_t slot, ms, quorum, token;

	if (!note_header_i64(p, "slot", &slot) || !note_header_i64(p, "lease-ms", &ms) ||
	    !note_header_i64(p, "quorum", &quorum) || slot < 1 || slot > SLOTS_MAX || ms < 1 ||
	    ms > INT32_MAX || !(p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG) ||
	    !note_text_copy(p->correlation_id, s->hold->handover.nonce,
			    sizeof(s->hold->handover.nonce)))
		return false;
	s->hold->handover.offer_old = note_header_i64(p, "token", &token);
	s->hold->handover.reply_to[0] = '\0';
	if (s->hold->handover.offer_old &&
	    (!(p->_flags & AMQP_BASIC_REPLY_TO_FLAG) || !conn_is_reply_to(&p->reply_to) ||
	     !note_text_copy(p->reply_to, s->hold->handover.reply_to,
			     sizeof(s->hold->handover.reply_to))))
		return false;
	s->hold->handover.slot = (unsigned)slot;
	s->hold->handover.ms = (unsigned)ms;
	s->hold->handover.quorum = quorum != 0;
	s->hold->handover.offer_signed = conn_signed_by_us(s->conn, p);
	/* A new offer: an answer to an earlier ask no longer counts. */
	s->hold->handover.asked[0] = '\0';
	return true;
}

/* Tells an offerer that we will not ask for its lease, so that it
 * releases the slot as usual now rather than after ADOPT_WAIT: into its
 * holder queue, or an older amqplock's reply-to. Nothing is waited for. */
static void decline(struct sem *s, unsigned slot, const char *nonce, const char *reply_to)
{
	char holder[QUEUE_NAME_MAX + 1];
	amqp_table_t none = {0};
	struct conn_note n = {.queue = reply_to,
			      .type = DECLINED_TYPE,
			      .expiration = NOTICE_EXPIRATION,
			      .correlation_id = nonce,
			      .headers = &none};

	if (!reply_to) {
		sem_name_slot(&s->name, slot, HOLDER_QUEUE, holder);
		n.queue = holder;
	}
	if (conn_send_note(s->conn, &n) != AL_OK)
		trace("could not decline an offer: %s", status_message());
}

/* An offer that comes while we ask for another (releases on other slots
 * of the semaphore): declined at once, from the delivery's hook, so that
 * its offerer releases the slot as usual now. */
static void decline_now(struct sem *s, const amqp_basic_properties_t *p)
{
	char to[256], nonce[40];
	int64_t slot, token;
	bool old = note_header_i64(p, "token", &token);

	if (!note_text_copy(p->correlation_id, nonce, sizeof(nonce)) ||
	    !(p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG))
		return;
	if (old && (p->_flags & AMQP_BASIC_REPLY_TO_FLAG) && conn_is_reply_to(&p->reply_to) &&
	    note_text_copy(p->reply_to, to, sizeof(to)))
		decline(s, 0, nonce, to);
	else if (!old && note_header_i64(p, "slot", &slot) && slot >= 1 && slot <= SLOTS_MAX)
		decline(s, (unsigned)slot, nonce, NULL);
}

/* What a delivery from the line is to the hand-over (taken into
 * s->hold->handover): no note of it, an offer (a wake-up), or another note (the
 * answer to our ask among them), which is acknowledged at once. */
enum handover_note { NOT_A_NOTE, NOTE_OFFER, NOTE_OTHER };

static enum handover_note handover_note(struct sem *s, const amqp_basic_properties_t *p)
{
	char id[sizeof(s->hold->handover.asked)];
	int64_t token;

	if (conn_is_type(p, OFFER_TYPE) && s->hold->handover.asking) {
		decline_now(s, p);
		s->hold->handover.offer_meanwhile = true;
		return NOTE_OTHER;
	}
	if (conn_is_type(p, OFFER_TYPE))
		return read_offer(s, p) ? NOTE_OFFER : NOTE_OTHER;
	if (!conn_is_type(p, HANDED_TYPE))
		return NOT_A_NOTE;
	/* Ours only if it answers our ask: its id went nowhere but into the
	 * offerer's holder queue, which only the holder's connection reads
	 * (anyone may publish an answer, nobody else can know the id). */
	if (s->hold->handover.asked[0] && conn_signed_by_us(s->conn, p) &&
	    note_nonce_is(p, s->hold->handover.nonce) &&
	    note_header_text(p, "adopter", id, sizeof(id)) &&
	    strcmp(id, s->hold->handover.asked) == 0 && note_header_i64(p, "token", &token) &&
	    token > 0) {
		s->hold->handover.handed = true;
		s->hold->handover.token = token;
	}
	return NOTE_OTHER;
}

enum line_heard sem_handover_ear(struct sem *s, uint64_t tag, const amqp_basic_properties_t *p)
{
	enum handover_note note = handover_note(s, p);

	if (note != NOT_A_NOTE)
		return note == NOTE_OFFER ? HEARD_OFFER : HEARD_NOTE;
	if (!s->hold->handover.asking)
		return HEARD_WAKE;
	conn_ack(s->conn, tag);
	s->hold->handover.woken_meanwhile = true;
	return HEARD_TAKEN;
}

bool sem_offered(const struct sem *s)
{
	return (s->hold->place.wake_tag != 0 && s->hold->place.offer) || s->hold->handover.handed;
}

static bool handed(const struct sem *s)
{
	return s->hold->handover.handed;
}

/* The wait for an answer ends when it comes, or when another offer
 * reaches us (declined: handover_note): the slot's holder is letting go
 * now, so whoever we asked hands us nothing. That is an offer left in a
 * line nobody waited in, taken by the next to join, who asked whoever
 * holds the slot by then; waiting out ASK_WAIT, it ran a second after
 * that holder's release. A wake-up alone does not end the wait: it may
 * come while the holder we asked is answering, and with another slot
 * taken meanwhile, the lease handed to us would be left to run out. */
static bool answered_or_moot(const struct sem *s)
{
	return s->hold->handover.handed || s->hold->handover.offer_meanwhile;
}

/* A wake-up taken while we asked (sem_handover_ear): another slot may be
 * free. Published again, for the next in line if we leave with our slot,
 * or for us. */
static enum al_status pass_on_wake(struct sem *s)
{
	if (!s->hold->handover.woken_meanwhile)
		return AL_OK;
	s->hold->handover.woken_meanwhile = false;
	return sem_wake_line(s);
}

/* What the first in line would have made itself (rules.h). */
static const char *not_adoptable(const struct sem *s)
{
	return rules_not_adoptable(s->hold->lease.on, s->hold->handover.offer_signed,
				   s->hold->handover.offer_old, s->hold->handover.ms,
				   s->hold->lease.ms, s->hold->handover.quorum, s->lease_quorum);
}

/* The ask, into the offerer's holder queue, mandatory: only the
 * connection that holds that queue can read it, and if none does (an
 * offer left from a holder since gone, or one that names an away
 * holder's slot), the broker returns it. */
static enum al_status send_ask(struct sem *s, unsigned k, bool *routed)
{
	char holder[QUEUE_NAME_MAX + 1];
	amqp_table_entry_t e = note_text_entry("adopter", s->hold->handover.asked);
	amqp_table_t headers = {.num_entries = 1, .entries = &e};
	struct conn_note n = {.queue = holder,
			      .type = ASK_TYPE,
			      .expiration = NOTICE_EXPIRATION,
			      .correlation_id = s->hold->handover.nonce,
			      .headers = &headers,
			      .main = true,
			      .mandatory = true};
	enum al_status st;

	*routed = false;
	sem_name_slot(&s->name, k, HOLDER_QUEUE, holder);
	st = conn_send_note(s->conn, &n);
	return st == AL_OK ? conn_note_routed(s->conn, routed) : st;
}

/* The offer spent: asked for, or declined. AL_OK once the lease is
 * handed to us (s->hold->handover.handed), AL_BUSY if not. An answer that comes
 * after ASK_WAIT still hands it to us (handover_note), while we wait in
 * line. */
static enum al_status ask(struct sem *s)
{
	unsigned k = s->hold->handover.slot;
	const char *why = not_adoptable(s);
	enum al_status st;
	bool routed = false;

	/* Spent whatever comes of it: the answer comes through the line,
	 * after it. */
	sem_wake_done(s);
	s->hold->handover.woken_meanwhile = false;
	s->hold->handover.offer_meanwhile = false;
	if (why) {
		trace("slot %u offered, not adopted: %s", k, why);
		decline(s, k, s->hold->handover.nonce,
			s->hold->handover.offer_old ? s->hold->handover.reply_to : NULL);
		return fail(AL_BUSY, "slot %u of %s is being handed over", k, s->label);
	}
	trace("slot %u offered: asking its holder for the lease", k);
	note_new_id(s->hold->handover.asked, sizeof(s->hold->handover.asked));
	s->hold->handover.asking = true;
	st = send_ask(s, k, &routed);
	if (st == AL_OK && routed)
		st = note_wait_for(s, answered_or_moot, deadline_in(ASK_WAIT));
	s->hold->handover.asking = false;
	if (st == AL_OK && !routed) {
		trace("slot %u offered, not adopted: no holder holds its holder queue "
		      "(an offer left over, or not its holder's)",
		      k);
		s->hold->handover.asked[0] = '\0';
	} else if (st == AL_OK && !handed(s) && s->hold->handover.offer_meanwhile) {
		trace("slot %u offered, not handed over: another offer came meanwhile", k);
	} else if (st == AL_OK && !handed(s)) {
		trace("slot %u offered, not handed over within %g s", k, ASK_WAIT);
	}
	if (st == AL_OK && !handed(s))
		st = pass_on_wake(s);
	return st == AL_OK && !handed(s)
		       ? fail(AL_BUSY, "slot %u of %s was not handed over", k, s->label)
		       : st;
}

/* The adopter's claim, in one round trip, a claim's with the lease's
 * token for ours: the lease declared (refused, 406, if it is another's;
 * made again if it ran out while we were stopped, which makes this a
 * claim like any other), read if it is a quorum queue (a declare does not
 * restart its expiry; the read does, so the lease lasts D from the
 * adoption, as our deadline counts), the slot checked and our holder
 * queue declared: the mark of a live holder, which the offerer deleted
 * before it answered, and which no other claimer may hold while we do.
 * As a claim's, the lease's time starts before it is sent. *leased says
 * whether the lease is ours; AL_BUSY if any step was refused. */
static enum al_status adopt_claim(struct sem *s, unsigned k, bool *leased)
{
	static const struct step holder = {DECLARE_EXCLUSIVE, HOLDER_QUEUE};
	struct step steps[4] = {{DECLARE_LEASE, LEASE_QUEUE}};
	size_t n = 1, done = 0, got;
	uint16_t refused;
	enum al_status st;
	unsigned tries;

	if (s->lease_quorum)
		steps[n++] = (struct step){READ_QUEUE, LEASE_QUEUE};
	steps[n++] = (struct step){DECLARE_PASSIVE, SLOT_QUEUE};
	steps[n++] = holder;
	s->hold->lease.renewed = boot_seconds();
	st = req_send_steps(s, k, steps, n);
	if (st == AL_OK && s->hold->claim_sent)
		s->hold->claim_sent(s->hold->claim_arg, k);
	if (st == AL_OK)
		st = req_await_steps(s, steps, n, &done, &refused);
	*leased = done > 0;
	for (tries = 0; st == AL_OK && done == n - 1 && refused == AMQP_RESOURCE_LOCKED &&
			tries < ADOPT_HOLDER_TRIES;
	     tries++) {
		sleep_seconds(jitter(0.002 * (tries + 1)));
		if ((st = req_run_steps(s, k, &holder, 1, &got, &refused)) == AL_OK && got == 1)
			done = n;
	}
	if (st == AL_OK && done < n)
		trace("could not adopt slot %u (refused %u at step %zu)", k, refused,
		      done < n - 1 ? done + 1 : n);
	if (st == AL_OK && done == n)
		st = claim_fresh(s, k);
	return st == AL_OK && done < n ? AL_BUSY : st;
}

/* The lease handed to us, claimed with its token; given back (ended by
 * its token, which only we may use now) if that fails. */
static enum al_status adopt(struct sem *s, unsigned *slot)
{
	unsigned k = s->hold->handover.slot;
	int64_t own = s->hold->lease.token;
	enum al_status st;
	bool leased = false;

	s->hold->handover.handed = false;
	s->hold->handover.asked[0] = '\0';
	trace("slot %u handed over: adopting its lease", k);
	s->hold->lease.token = s->hold->handover.token;
	st = adopt_claim(s, k, &leased);
	if (st == AL_OK) {
		trace("slot %u is ours, handed over", k);
		*slot = k;
		return pass_on_wake(s);
	}
	if (st == AL_BUSY && leased)
		st = sem_lease_let_go(s, k);
	else if (st == AL_BUSY)
		st = AL_OK;
	/* A connection lost meanwhile leaves the lease ours to end: the
	 * next connection ends it, by its token. */
	if (st != AL_OK && s->conn->dead) {
		s->hold->claim_void = true;
		s->hold->void_slot = k;
	}
	if (s->hold->claim_void)
		s->hold->void_token = s->hold->handover.token;
	s->hold->lease.token = own;
	if (st == AL_OK)
		st = pass_on_wake(s);
	return st == AL_OK ? fail(AL_BUSY, "slot %u of %s was not handed over", k, s->label) : st;
}

enum al_status sem_adopt(struct sem *s, unsigned *slot)
{
	enum al_status st;

	*slot = 0;
	if (!s->hold->handover.handed && (st = ask(s)) != AL_OK)
		return st;
	return adopt(s, slot);
}

void sem_handover_forget(struct sem *s)
{
	unsigned k = s->hold->handover.slot;
	int64_t own = s->hold->lease.token;
	bool had = status_message()[0] != '\0';

	s->hold->handover.asked[0] = '\0';
	if (!s->hold->handover.handed)
		return;
	/* Handed to us and not adopted (we leave the line with another
	 * slot, or give up): ours to end, by its token. */
	s->hold->handover.handed = false;
	s->hold->lease.token = s->hold->handover.token;
	if (s->conn->dead || sem_lease_end(s, k) != AL_OK) {
		trace("could not end the lease of slot %u handed to us: it runs out", k);
		status_clear_unless(had);
	}
	s->hold->lease.token = own;
}
