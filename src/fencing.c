/* The fencing token of a grant (hold --token): an entry appended to the
 * semaphore's stream NAME#tokens once the slot is ours, and its offset
 * read back. The broker numbers a stream's entries in the order it
 * appends them, never gives an offset twice and keeps them across
 * restarts, so a grant that comes after another's command ended gets a
 * larger token (docs/design.md, "Fencing tokens"). */
#include "sem_parts.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"

/* Our entry, found among those the stream delivers. */
struct drawing {
	struct conn *conn;
	char id[24];    /* our entry's message id (random) */
	int64_t offset; /* its offset, once read (-1 before) */
	bool ended;     /* the consumer ended before we read it */
};

/* Every entry delivered is acknowledged (the next ones come); the first
 * with our id is ours. Anyone who may write to the default exchange can
 * append entries with any id and headers, but only one with our id
 * before ours could mislead us, and the id is drawn as we append; the
 * offset is the broker's. */
static void heard_entry(void *owner, uint64_t tag, const amqp_basic_properties_t *p)
{
	struct drawing *d = owner;
	int64_t offset;

	conn_ack(d->conn, tag);
	if (d->offset >= 0 || !(p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG) ||
	    !conn_bytes_are(p->message_id, d->id))
		return;
	if (note_header_i64(p, "x-stream-offset", &offset) && offset >= 0)
		d->offset = offset;
}

static void stopped_hearing(void *owner, enum conn_consumer_end why)
{
	struct drawing *d = owner;

	(void)why;
	d->ended = true;
}

enum al_status sem_fencing_token(struct sem *s, uint64_t *token)
{
	char stream[QUEUE_NAME_MAX + 1];
	struct drawing d = {.conn = s->conn, .offset = -1};
	struct conn_consumer hooks = {
		.delivered = heard_entry, .ended = stopped_hearing, .owner = &d};
	struct deadline by = deadline_in(s->conn->rpc_timeout);
	enum al_status st;

	*token = 0;
	note_new_id(d.id, sizeof(d.id));
	sem_name_slot(&s->name, 1, TOKENS_QUEUE, stream);
	st = conn_stream_append(s->conn, stream, d.id, &hooks);
	if (st != AL_OK && !s->conn->dead && s->conn->reply_code == AMQP_NOT_FOUND)
		return fail(AL_DAMAGED,
			    "semaphore %s has no stream of fencing tokens (%s; made by create "
			    "since amqplock 0.5): an administrator makes it with amqplock check "
			    "--repair %s",
			    s->label, stream, s->label);
	if (st != AL_OK && !s->conn->dead && s->conn->reply_code == AMQP_ACCESS_REFUSED)
		return fail(AL_ACCESS,
			    "the broker refused us a fencing token: this login may not read %s "
			    "(a client needs read on it; see PERMISSIONS in amqplock(1))",
			    stream);
	while (st == AL_OK && d.offset < 0 && !d.ended && !deadline_passed(by))
		if (conn_wait_readable(s->conn, by))
			st = conn_drain(s->conn);
	if (conn_consuming(s->conn))
		conn_consume_end(s->conn, NULL);
	if (st != AL_OK)
		return st;
	if (d.offset < 0)
		return fail(AL_CONNECTION,
			    "no fencing token: the stream %s did not give our entry "
			    "back within %.0f s",
			    stream, s->conn->rpc_timeout);
	/* Offsets count from 0; tokens from 1 (0: none). */
	*token = (uint64_t)d.offset + 1;
	trace("fencing token %" PRIu64, *token);
	return AL_OK;
}
