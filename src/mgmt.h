/* The management HTTP API (RabbitMQ's rabbitmq_management plugin): the
 * only HTTP in amqplock, for `list` and for "did you mean" (list.h makes
 * the semaphores out of what it answers). Never prints, never exits; every
 * request ends by its deadline. */
#ifndef AMQPLOCK_MGMT_H
#define AMQPLOCK_MGMT_H

#include "clock.h"
#include "conn.h"
#include "list.h"
#include "status.h"

/* NULL if url can be the management API's base URL (http[s]://host[:port]
 * [/path], no user or password: they come from the broker URL), else
 * why not. */
const char *mgmt_url_problem(const char *url);

/* Every semaphore under prefix in the broker's vhost, as the management
 * API lists them, into *l (list_free it). The API is at management_url
 * (NULL: derived from each broker of o, already checked by
 * conn_check_opts: amqp://host → http://host:15672/, amqps://host →
 * https://host:15671/, tried in order while unreachable), asked with the
 * broker's user and password (never in a URL) and o's TLS options. Each
 * request gets o's connect and reply timeouts, all of it ends by `by`.
 * AL_CONNECTION: not reachable, or TLS failed; AL_ACCESS: the user may
 * not ask (a wrong password, or no management or monitoring tag);
 * AL_BROKER: an answer that is not a list. */
enum al_status mgmt_list(const struct conn_opts *o, const char *management_url, const char *prefix,
			 struct deadline by, struct sem_list *l);

/* The clients waiting in sn's line, from the same API (list_waiters):
 * the consumers of the broker's vhost and its connections. */
enum al_status mgmt_waiters(const struct conn_opts *o, const char *management_url,
			    const struct sem_name *sn, struct deadline by, struct list_waiters *w);

#endif
