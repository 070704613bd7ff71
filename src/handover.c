/* The lease handed over (docs/design.md, "Handing the lease over"): a
 * holder that is done offers its lease to the first in line, which adopts
 * it with the claim's own round trip, the offer's token in place of its
 * own. The lease still decides who holds; the notes between the two only
 * say who may act on it: the offerer until it confirms one adopter, that
 * adopter from then on, and nobody runs a command before that. */
#include "sem_parts.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"

/* The notes of a hand-over, by their type. */
#define OFFER_TYPE     "amqplock.offer"
#define ADOPTED_TYPE   "amqplock.adopted"
#define DECLINED_TYPE  "amqplock.declined"
#define CONFIRMED_TYPE "amqplock.confirmed"

/* How long an offerer waits for the first in line to adopt: it takes one
 * round trip (a millisecond or two), and a first in line that says
 * nothing (an older amqplock, one that died) costs the slot this long. */
#define ADOPT_WAIT 0.5
/* An offer lives no longer than its offerer waits (ms, as a message's
 * expiration): one left in a line nobody waited in (sem_hand_over) is
 * gone by the time the offerer has ended its lease. */
#define OFFER_EXPIRATION "500"
/* How long an adopter waits for its confirmation (two notes through the
 * broker: a millisecond) before it gives the slot back. */
#define CONFIRM_WAIT 1.0

/* Copies bytes into buf as a string; false if they do not fit. */
static bool text_copy(amqp_bytes_t b, char *buf, size_t size)
{
	if (b.len >= size || memchr(b.bytes, '\0', b.len))
		return false;
	memcpy(buf, b.bytes, b.len);
	buf[b.len] = '\0';
	return true;
}

static bool header_i64(const amqp_basic_properties_t *p, const char *key, int64_t *v)
{
	const amqp_field_value_t *f = conn_header(p, key);

	if (f && f->kind == AMQP_FIELD_KIND_I64)
		*v = f->value.i64;
	return f && f->kind == AMQP_FIELD_KIND_I64;
}

static bool header_text(const amqp_basic_properties_t *p, const char *key, char *buf, size_t size)
{
	const amqp_field_value_t *f = conn_header(p, key);

	return f && (f->kind == AMQP_FIELD_KIND_UTF8 || f->kind == AMQP_FIELD_KIND_BYTES) &&
	       text_copy(f->value.bytes, buf, size);
}

/* A fresh nonce or id: 63 random bits, in hex. */
static void new_id(char *buf, size_t size)
{
	snprintf(buf, size, "%016" PRIx64, (uint64_t)sem_lease_token());
}

/* An offer as the first in line reads it; false if any part is missing
 * or out of range (it is then acknowledged and ignored). */
static bool read_offer(struct sem *s, const amqp_basic_properties_t *p)
{
	int64_t slot, ms, quorum, token;

	if (!header_i64(p, "slot", &slot) || !header_i64(p, "lease-ms", &ms) ||
	    !header_i64(p, "quorum", &quorum) || !header_i64(p, "token", &token) || slot < 1 ||
	    slot > SLOTS_MAX || ms < 1 || ms > INT32_MAX || token < 1 ||
	    !(p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG) ||
	    !text_copy(p->correlation_id, s->handover.nonce, sizeof(s->handover.nonce)) ||
	    !(p->_flags & AMQP_BASIC_REPLY_TO_FLAG) || !conn_is_reply_to(&p->reply_to) ||
	    !text_copy(p->reply_to, s->handover.reply_to, sizeof(s->handover.reply_to)))
		return false;
	s->handover.slot = (unsigned)slot;
	s->handover.ms = (unsigned)ms;
	s->handover.quorum = quorum != 0;
	s->handover.token = token;
	s->handover.offer_signed = conn_signed_by_us(s->conn, p);
	s->handover.offer_again = conn_delivered_again(s->conn);
	return true;
}

/* An offer that comes while we adopt another (releases on other slots of
 * the semaphore): declined at once, from the delivery's hook, so that its
 * offerer releases the slot as usual now rather than after ADOPT_WAIT. */
static void decline_now(struct sem *s, const amqp_basic_properties_t *p)
{
	char to[256], nonce[40];
	amqp_table_t none = {0};
	struct conn_note n = {.queue = to,
			      .type = DECLINED_TYPE,
			      .expiration = NOTICE_EXPIRATION,
			      .correlation_id = nonce,
			      .headers = &none};

	if ((p->_flags & AMQP_BASIC_REPLY_TO_FLAG) && conn_is_reply_to(&p->reply_to) &&
	    text_copy(p->reply_to, to, sizeof(to)) &&
	    (p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG) &&
	    text_copy(p->correlation_id, nonce, sizeof(nonce)) &&
	    conn_send_note(s->conn, &n) != AL_OK)
		trace("could not decline an offer: %s", status_message());
}

enum handover_note handover_note(struct sem *s, const amqp_basic_properties_t *p)
{
	char id[sizeof(s->handover.adopter)];

	if (conn_is_type(p, OFFER_TYPE) && s->handover.adopter[0]) {
		decline_now(s, p);
		return NOTE_OTHER;
	}
	if (conn_is_type(p, OFFER_TYPE))
		return (s->handover.offered = read_offer(s, p)) ? NOTE_OFFER : NOTE_OTHER;
	if (!conn_is_type(p, CONFIRMED_TYPE))
		return NOT_A_NOTE;
	/* Ours only if it names this adoption and us, from our login. */
	if (s->handover.adopter[0] && conn_signed_by_us(s->conn, p) &&
	    (p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG) &&
	    conn_bytes_are(p->correlation_id, s->handover.nonce) &&
	    header_text(p, "adopter", id, sizeof(id)) && strcmp(id, s->handover.adopter) == 0)
		s->handover.confirmed = true;
	return NOTE_OTHER;
}

bool handover_woken(struct sem *s, uint64_t tag)
{
	if (!s->handover.adopter[0])
		return false;
	conn_ack(s->conn, tag);
	s->handover.woken_meanwhile = true;
	return true;
}

bool sem_offered(const struct sem *s)
{
	return s->place.wake_tag != 0 && s->handover.offered;
}

static enum al_status note_adopter(struct sem *s, const char *to, const char *type);

/* The offerer decides for the adopter that said so: its keeper told to
 * leave the lease alone, then the adopter confirmed, at once, from the
 * delivery's hook (while the offerer may still read the answers about
 * the line). Decided: from here on the lease is the adopter's, whatever
 * happens to the confirmation (without it, the adopter gives the slot
 * back itself). */
static void hand_to_adopter(struct sem *s)
{
	char line[QUEUE_NAME_MAX + 1];

	if (s->lease_given)
		s->lease_given(s->given_arg);
	waiters_queue(s, line);
	if (note_adopter(s, line, CONFIRMED_TYPE) != AL_OK)
		trace("could not confirm the adopter of slot %u: %s", s->handover.slot,
		      status_message());
	else
		trace("handed slot %u over", s->handover.slot);
}

/* The offerer's side: what comes back to its reply-to. A decline need
 * not be signed: all it can do is make us release the slot as usual. */
static void heard_back(void *owner, uint64_t tag, const amqp_basic_properties_t *p)
{
	struct sem *s = owner;

	(void)tag; /* direct reply-to: nothing to acknowledge */
	if (!(p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG) ||
	    !conn_bytes_are(p->correlation_id, s->handover.nonce) || s->handover.adopter[0] ||
	    s->handover.declined)
		return;
	if (conn_is_type(p, DECLINED_TYPE))
		s->handover.declined = true;
	else if (conn_is_type(p, ADOPTED_TYPE) && conn_signed_by_us(s->conn, p) &&
		 header_text(p, "adopter", s->handover.adopter, sizeof(s->handover.adopter)))
		hand_to_adopter(s);
}

static void stopped_hearing(void *owner, enum conn_consumer_end why)
{
	struct sem *s = owner;

	(void)why;
	s->handover.deaf = true;
}

/* The offerer has decided for an adopter (hand_to_adopter). */
static bool decided(const struct sem *s)
{
	return s->handover.adopter[0] != '\0';
}

/* The offerer has its answer: an adopter, a decline, or no more ears. */
static bool answered(const struct sem *s)
{
	return decided(s) || s->handover.declined || s->handover.deaf;
}

static bool confirmed(const struct sem *s)
{
	return s->handover.confirmed;
}

/* Reads what comes until done(s) or `by`. */
static enum al_status wait_for(struct sem *s, bool (*done)(const struct sem *), struct deadline by)
{
	enum al_status st = AL_OK;

	while (st == AL_OK && !done(s) && !deadline_passed(by))
		if (conn_wait_readable(s->conn, by))
			st = conn_drain(s->conn);
	return st;
}

/* The notes' headers: an offer's lease, an adoption's or confirmation's
 * adopter. */
static amqp_table_entry_t i64_entry(const char *key, int64_t v)
{
	return (amqp_table_entry_t){.key = amqp_cstring_bytes(key),
				    .value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = v}};
}

static amqp_table_entry_t text_entry(const char *key, const char *v)
{
	return (amqp_table_entry_t){
		.key = amqp_cstring_bytes(key),
		.value = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = amqp_cstring_bytes(v)}};
}

static enum al_status note_adopter(struct sem *s, const char *to, const char *type)
{
	amqp_table_entry_t e = text_entry("adopter", s->handover.adopter);
	amqp_table_t headers = {.num_entries = 1, .entries = &e};
	struct conn_note n = {.queue = to,
			      .type = type,
			      .expiration = NOTICE_EXPIRATION,
			      .correlation_id = s->handover.nonce,
			      .headers = &headers};

	return conn_send_note(s->conn, &n);
}

/* Whether a line that takes messages is there to be asked how long it is
 * (a question to a line whose node is down may never be answered): one
 * that the last look did not find so is probed first. */
static enum al_status line_up(struct sem *s, bool *up)
{
	struct probe line = {.kind = WAITERS_QUEUE, .slot = 1};
	enum al_status st = AL_OK;

	if (s->line != LINE_UP && (st = probe_queues(s->conn, &s->name, &line, 1)) == AL_OK)
		note_line(s, &line);
	*up = st == AL_OK && s->line == LINE_UP;
	return st;
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
 * for its expiry; a waiter that comes meanwhile finds the lease gone or
 * another's, or is not confirmed (sem_adopt). A line gone since refuses
 * the question: the release then goes on as if there were no line. */
static enum al_status anyone_waiting(struct sem *s, const struct conn_note *offer, bool *waiting)
{
	char queue[QUEUE_NAME_MAX + 1];
	struct offering o = {s, offer};
	uint32_t waiters, messages;
	enum al_status st;

	waiters_queue(s, queue);
	st = ask_counts_meanwhile(s, queue, &waiters, &messages, send_offer, &o);
	*waiting = st == AL_OK && waiters > 0;
	return st;
}

enum al_status sem_hand_over(struct sem *s, unsigned slot, bool *handed, bool *holder_gone)
{
	char line[QUEUE_NAME_MAX + 1], holder[QUEUE_NAME_MAX + 1];
	struct conn_consumer hooks = {
		.delivered = heard_back, .ended = stopped_hearing, .owner = s};
	amqp_table_entry_t e[4] = {i64_entry("slot", slot), i64_entry("lease-ms", s->lease.ms),
				   i64_entry("quorum", s->lease.quorum),
				   i64_entry("token", s->lease.token)};
	amqp_table_t headers = {.num_entries = 4, .entries = e};
	struct conn_note offer = {.type = OFFER_TYPE,
				  .expiration = OFFER_EXPIRATION,
				  .headers = &headers,
				  .replies = true};
	enum al_status st;
	bool up, waiting, someone;

	*handed = *holder_gone = false;
	/* One slot only. The line serves one message at a time, to its
	 * first waiter alone: with several slots, offers of releases that
	 * come together reach a first in line busy adopting another, and
	 * all but one fall back to the release, later than without an
	 * offer (100 holds 5 ms apart on 5 slots: 41% busy, against 52%
	 * without hand-overs, on 3.10.8). */
	if (!s->lease.on || s->max_seen != 1 || !s->conn->user[0] || conn_consuming(s->conn))
		return AL_OK;
	if ((st = line_up(s, &up)) != AL_OK || !up)
		return st;
	memset(&s->handover, 0, sizeof(s->handover));
	s->handover.slot = slot;
	new_id(s->handover.nonce, sizeof(s->handover.nonce));
	waiters_queue(s, line);
	sem_name_slot(&s->name, slot, HOLDER_QUEUE, holder);
	offer.queue = line;
	offer.correlation_id = s->handover.nonce;
	/* Listening for the answer from the round trip that asks whether
	 * anyone waits on: the offer follows the consume on its channel,
	 * which the broker takes in order. */
	if ((st = conn_listen_replies(s->conn, &hooks)) != AL_OK)
		return st;
	trace("released slot %u of %s; offering its lease to the first in line", slot, s->label);
	st = anyone_waiting(s, &offer, &waiting);
	/* (an adopter that came after the count: someone all the same) */
	someone = st == AL_OK && (waiting || decided(s));
	if (st == AL_OK && !someone)
		trace("nobody was in line for slot %u", slot);
	/* Our holder queue goes while the first in line adopts: it declares
	 * its own only once it runs. Nobody in line, it stays for the
	 * release as before. */
	if (someone && (st = ask_ok(s, DELETE_QUEUE, holder)) == AL_OK)
		*holder_gone = true;
	if (st == AL_OK && someone)
		st = wait_for(s, answered, deadline_in(ADOPT_WAIT));
	conn_consume_end(s->conn, NULL);
	/* Handed over, even if the connection failed since: the adopter
	 * has the lease, and the keeper has let go of it. */
	if ((*handed = decided(s))) {
		status_clear();
		return AL_OK;
	}
	if (st == AL_OK && someone)
		trace("the lease of slot %u was %s; ending it", slot,
		      s->handover.declined ? "declined" : "not taken");
	return st;
}

/* The adopter's claim: the lease renewed with the offer's token (and read,
 * if it is a quorum queue: a declare does not restart its expiry) and
 * the slot checked, in one round trip; *adopted* is sent behind it, so
 * that the offerer lets go and confirms while the broker works. We run
 * nothing before both the claim's answers and the confirmation are in.
 * The lease is checked before it is declared: an offer that waited in an
 * empty line for us (sem_hand_over) may be of a lease ended since, which
 * a declare would make again.
 * The holder queue, the mark of a live holder, is not on this path (an
 * exclusive declare is the slowest of the broker's answers here): the
 * lease alone keeps the slot while it is declared, by the first
 * verification once the command has started (need_holder). As a
 * claim's, the lease's time starts before it is sent. *leased says
 * whether the lease is ours; AL_BUSY if any step was refused. */
static enum al_status adopt_claim(struct sem *s, unsigned k, bool *leased)
{
	struct step steps[4] = {{DECLARE_PASSIVE, LEASE_QUEUE}, {DECLARE_LEASE, LEASE_QUEUE}};
	size_t n = 2, done = 0;
	uint16_t refused;
	enum al_status st;

	if (s->lease.quorum)
		steps[n++] = (struct step){READ_QUEUE, LEASE_QUEUE};
	steps[n++] = (struct step){DECLARE_PASSIVE, SLOT_QUEUE};
	s->lease.renewed = boot_seconds();
	st = send_steps(s, k, steps, n);
	if (st == AL_OK && s->claim_sent)
		s->claim_sent(s->claim_arg, k);
	if (st == AL_OK)
		st = note_adopter(s, s->handover.reply_to, ADOPTED_TYPE);
	if (st == AL_OK)
		st = await_steps(s, steps, n, &done, &refused);
	*leased = done > 1;
	if (st == AL_OK && done < n)
		trace("could not adopt slot %u (refused %u at step %zu)", k, refused, done + 1);
	return st == AL_OK && done < n ? AL_BUSY : st;
}

/* A wake-up taken while we adopted (handover_woken): another slot may be
 * free. Published again, for the next in line if we leave with our slot,
 * or for us. */
static enum al_status pass_on_wake(struct sem *s)
{
	if (!s->handover.woken_meanwhile)
		return AL_OK;
	s->handover.woken_meanwhile = false;
	return sem_wake_line(s);
}

/* What the first in line would have made itself: a lease of its own
 * length and type, signed by its login. */
static const char *not_adoptable(const struct sem *s)
{
	if (!s->lease.on)
		return "we hold without a lease";
	if (!s->handover.offer_signed)
		return "it is not signed by our login";
	/* Delivered before to a first in line that left without a word:
	 * it may have adopted it, and be away. */
	if (s->handover.offer_again)
		return "it was delivered to another first";
	if (s->handover.ms != s->lease.ms)
		return "its length is not our --lease";
	if (s->handover.quorum != s->lease.quorum)
		return "its type is not the one we would make";
	return NULL;
}

enum al_status sem_adopt(struct sem *s, unsigned *slot)
{
	unsigned k = s->handover.slot;
	int64_t own = s->lease.token;
	const char *why = not_adoptable(s);
	enum al_status st, wait_st = AL_OK;
	bool leased = false;

	*slot = 0;
	s->handover.adopter[0] = '\0';
	s->handover.confirmed = s->handover.woken_meanwhile = false;
	/* Spent whatever comes of it: the confirmation comes through the
	 * line, after it. */
	sem_wake_done(s);
	if (why) {
		trace("slot %u offered, not adopted: %s", k, why);
		(void)note_adopter(s, s->handover.reply_to, DECLINED_TYPE);
		return fail(AL_BUSY, "slot %u of %s is being handed over", k, s->label);
	}
	trace("slot %u offered: adopting its lease", k);
	new_id(s->handover.adopter, sizeof(s->handover.adopter));
	s->lease.token = s->handover.token;
	st = adopt_claim(s, k, &leased);
	/* Refused after the lease was renewed (the slot removed, say), the
	 * confirmation is waited for all the same: once it has come, the
	 * lease is ours alone to end (sem_lease_let_go). */
	if (st == AL_OK || (st == AL_BUSY && leased))
		wait_st = wait_for(s, confirmed,
				   deadline_in(s->claim_window > 0 && s->claim_window < CONFIRM_WAIT
						       ? s->claim_window
						       : CONFIRM_WAIT));
	if (wait_st != AL_OK)
		st = wait_st;
	if (st == AL_OK && s->handover.confirmed)
		st = claim_fresh(s, k);
	if (st == AL_OK && s->handover.confirmed) {
		trace("slot %u is ours, handed over", k);
		s->lease.need_holder = true;
		*slot = k;
		s->handover.adopter[0] = '\0';
		return pass_on_wake(s);
	}
	if (st == AL_OK)
		trace("slot %u adopted but not confirmed; giving it back", k);
	/* What we adopted and may not keep (a claim refused after the
	 * lease's renewal, no confirmation) goes back, as the offerer's
	 * lease would have: see sem_lease_let_go. */
	if ((st == AL_OK || st == AL_BUSY) && leased)
		st = sem_lease_let_go(s, k, true, s->handover.confirmed);
	else if (st == AL_BUSY)
		st = AL_OK;
	/* A connection lost meanwhile may have left the lease adopted, and
	 * its offerer may have let it go to us: the next connection ends it,
	 * by the offer's token. Nobody else can hold it by that token: an
	 * offer delivered again (our acknowledgement lost with us) is not
	 * adopted. */
	if (st != AL_OK && s->conn->dead) {
		s->claim_void = true;
		s->void_slot = k;
	}
	if (s->claim_void)
		s->void_token = s->handover.token;
	s->lease.token = own;
	s->handover.adopter[0] = '\0';
	if (st == AL_OK)
		st = pass_on_wake(s);
	return st == AL_OK ? fail(AL_BUSY, "slot %u of %s was not handed over", k, s->label) : st;
}
