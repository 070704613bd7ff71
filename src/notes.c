/* The notes of a hand-over (handover.c offers, adopt.c asks): their
 * headers read and written, their nonces and ids drawn, and the wait for
 * one of them. */
#include "sem_parts.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"

/* Copies bytes into buf as a string; false if they do not fit. */
bool note_text_copy(amqp_bytes_t b, char *buf, size_t size)
{
	if (b.len >= size || memchr(b.bytes, '\0', b.len))
		return false;
	memcpy(buf, b.bytes, b.len);
	buf[b.len] = '\0';
	return true;
}

bool note_header_i64(const amqp_basic_properties_t *p, const char *key, int64_t *v)
{
	const amqp_field_value_t *f = conn_header(p, key);

	if (f && f->kind == AMQP_FIELD_KIND_I64)
		*v = f->value.i64;
	return f && f->kind == AMQP_FIELD_KIND_I64;
}

bool note_header_text(const amqp_basic_properties_t *p, const char *key, char *buf, size_t size)
{
	const amqp_field_value_t *f = conn_header(p, key);

	return f && (f->kind == AMQP_FIELD_KIND_UTF8 || f->kind == AMQP_FIELD_KIND_BYTES) &&
	       note_text_copy(f->value.bytes, buf, size);
}

bool note_nonce_is(const amqp_basic_properties_t *p, const char *nonce)
{
	return (p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG) &&
	       conn_bytes_are(p->correlation_id, nonce);
}

/* A fresh nonce or id: 63 random bits, in hex. */
void note_new_id(char *buf, size_t size)
{
	snprintf(buf, size, "%016" PRIx64, (uint64_t)sem_lease_token());
}

/* The notes' headers. */
amqp_table_entry_t note_i64_entry(const char *key, int64_t v)
{
	return (amqp_table_entry_t){.key = amqp_cstring_bytes(key),
				    .value = {.kind = AMQP_FIELD_KIND_I64, .value.i64 = v}};
}

amqp_table_entry_t note_text_entry(const char *key, const char *v)
{
	return (amqp_table_entry_t){
		.key = amqp_cstring_bytes(key),
		.value = {.kind = AMQP_FIELD_KIND_UTF8, .value.bytes = amqp_cstring_bytes(v)}};
}

/* Reads what comes until done(s) or `by`. */
enum al_status note_wait_for(struct sem *s, bool (*done)(const struct sem *), struct deadline by)
{
	enum al_status st = AL_OK;

	while (st == AL_OK && !done(s) && !deadline_passed(by))
		if (conn_wait_readable(s->conn, by))
			st = conn_drain(s->conn);
	return st;
}
