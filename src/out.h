/* Output for people and for scripts from one set of calls, in the manner of
 * iproute2's print_*(PRINT_ANY, ...): a command states each fact once with
 * its JSON key and its text format, and never asks which mode is on.
 *
 *   out_begin();
 *   out_str("semaphore", NULL, name);         JSON only (text_fmt NULL)
 *   out_uint("max", "%lu\n", max);            both
 *   out_end();                                JSON: one line on stdout
 *
 * A NULL key prints text only. */
#ifndef AMQPLOCK_OUT_H
#define AMQPLOCK_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "status.h"

enum out_mode { OUT_TEXT, OUT_JSON };

void out_init(enum out_mode mode, bool quiet, FILE *stream);
/* Whether lines for people are wanted: text output, without -q. A
 * command asks this, never which mode is on, before it draws progress
 * for a person (a wait's line at a terminal). */
bool out_for_people(void);

void out_begin(void);
void out_str(const char *key, const char *text_fmt, const char *value);
void out_uint(const char *key, const char *text_fmt, unsigned long value);
void out_bool(const char *key, bool value);
/* Text: text_fmt gets the slots joined by spaces, or "-" if none. */
void out_slots(const char *key, const char *text_fmt, const unsigned *slot, size_t len);
/* A list of objects under key: between out_item_begin and out_item_end
 * the calls above fill one object of it (in text, they print as usual). */
void out_list_begin(const char *key);
void out_item_begin(void);
void out_item_end(void);
void out_list_end(void);
/* Ends the record; AL_BROKER with a message if stdout could not be
 * written (a full disk, a closed pipe). */
enum al_status out_end(void);

/* One "amqplock: message" line on stderr, whatever the mode. */
void out_error_line(const char *message);

/* One "amqplock: message" line on stderr and, in JSON mode, the object
 * {"ok":false,"error":...,"message":...} on stdout, with `semaphore` if
 * known. */
void out_error(enum al_status st, const char *semaphore, const char *message);

/* A signal that ends amqplock before it holds a slot (signals.c): the
 * words are made ready here, and out_interrupted writes them from the
 * signal handler with nothing but write(2). `doing` ends the sentence
 * "interrupted by SIGxxx ...". */
void out_interrupt_prepare(const char *semaphore, const char *doing);
void out_interrupted(int sig);

#endif
