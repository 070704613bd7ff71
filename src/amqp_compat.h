/* One place that knows where rabbitmq-c keeps its headers: 0.12 and later
 * install them under <rabbitmq-c/...> and warn about the old paths, 0.11
 * (Debian 12) only has the old ones. */
#ifndef AMQPLOCK_AMQP_COMPAT_H
#define AMQPLOCK_AMQP_COMPAT_H

#if defined(__has_include)
#if __has_include(<rabbitmq-c/amqp.h>)
#define AMQPLOCK_NEW_HEADERS 1
#endif
#endif

#ifdef AMQPLOCK_NEW_HEADERS
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/framing.h>
#include <rabbitmq-c/ssl_socket.h>
#include <rabbitmq-c/tcp_socket.h>
#else
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#endif

#endif
