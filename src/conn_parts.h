/* What conn.c, connect.c, channels.c and messages.c share about a
 * connection's insides; nothing else includes this (the rest of amqplock
 * sees conn.h). */
#ifndef AMQPLOCK_CONN_PARTS_H
#define AMQPLOCK_CONN_PARTS_H

#include "conn.h"

/* Direct reply-to: the broker gives a question's answers to the channel
 * that published it, if that channel consumes this pseudo-queue. */
#define REPLY_TO "amq.rabbitmq.reply-to"

/* conn.c */

/* The connection is unusable from now on: records why (a rabbitmq-c
 * status while `doing` something) and returns AL_CONNECTION. */
enum al_status conn_failed(struct conn *c, int amqp_status, const char *doing);

/* A request on a dead connection (AL_CONNECTION: connect again) or on a
 * channel not open on a live one (AL_INTERNAL: a bug). */
enum al_status conn_unusable(const struct conn *c);

/* The broker closed `channel`: sends close-ok, marks the channel closed,
 * sets reply_code/reply_text, and returns the status for the code. */
enum al_status conn_channel_closed(struct conn *c, amqp_channel_t channel,
				   const amqp_channel_close_t *close);

/* An empty message for queue through the default exchange on `channel`,
 * expiring after `expiration` ms (text), of `type` (or NULL); mandatory:
 * the broker returns it if the queue is missing. */
enum al_status conn_publish_on(struct conn *c, amqp_channel_t channel, const char *queue,
			       bool mandatory, const char *expiration, const char *type,
			       const char *doing);

/* The next method for `channel`, waiting at most `wait` seconds (0: only
 * what has already arrived; never past the connection's limit); *none is
 * set if nothing came. Frames of the other channels go where they
 * belong meanwhile (the consumer's and the parallel one's through
 * c->beside). */
enum al_status conn_next_method_on(struct conn *c, amqp_channel_t channel, double wait,
				   amqp_method_t *m, bool *none);

/* The content header that `channel` has next (a basic.get-ok's), within
 * the reply timeout; a method instead is the broker's error. *header
 * lives until the next read. */
enum al_status conn_next_header_on(struct conn *c, amqp_channel_t channel,
				   amqp_basic_properties_t **header);

#endif
