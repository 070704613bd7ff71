#include "out.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static enum out_mode mode;
static bool quiet;
static FILE *stream;
static cJSON *record;
static bool write_failed;

void out_init(enum out_mode m, bool q, FILE *s)
{
	mode = m;
	quiet = q;
	stream = s;
}

bool out_json(void)
{
	return mode == OUT_JSON;
}

static bool text_wanted(const char *text_fmt)
{
	return mode == OUT_TEXT && !quiet && text_fmt;
}

static void json_add(const char *key, cJSON *item)
{
	if (!record)
		record = cJSON_CreateObject();
	if (!record || !item || !cJSON_AddItemToObject(record, key, item)) {
		cJSON_Delete(item);
		write_failed = true;
	}
}

static void text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void text(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vfprintf(stream, fmt, ap) < 0)
		write_failed = true;
	va_end(ap);
}

void out_begin(void)
{
	cJSON_Delete(record);
	record = mode == OUT_JSON ? cJSON_CreateObject() : NULL;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
void out_str(const char *key, const char *text_fmt, const char *value)
{
	if (mode == OUT_JSON && key)
		json_add(key, cJSON_CreateString(value));
	else if (text_wanted(text_fmt))
		text(text_fmt, value);
}

void out_uint(const char *key, const char *text_fmt, unsigned long value)
{
	if (mode == OUT_JSON && key)
		json_add(key, cJSON_CreateNumber((double)value));
	else if (text_wanted(text_fmt))
		text(text_fmt, value);
}

void out_slots(const char *key, const char *text_fmt, const unsigned *slot, size_t len)
{
	char *joined, *p;
	size_t i;

	if (mode == OUT_JSON && key) {
		cJSON *array = cJSON_CreateArray();

		for (i = 0; array && i < len; i++)
			cJSON_AddItemToArray(array, cJSON_CreateNumber(slot[i]));
		json_add(key, array);
		return;
	}
	if (!text_wanted(text_fmt))
		return;
	/* Slots are at most 5 digits plus a separator. */
	joined = p = malloc(len * 7 + 2);
	if (!joined) {
		write_failed = true;
		return;
	}
	strcpy(joined, "-");
	for (i = 0; i < len; i++)
		p += sprintf(p, "%s%u", i ? " " : "", slot[i]);
	text(text_fmt, joined);
	free(joined);
}
#pragma GCC diagnostic pop

void out_bool(const char *key, bool value)
{
	if (mode == OUT_JSON && key)
		json_add(key, cJSON_CreateBool(value));
}

enum al_status out_end(void)
{
	char *line;

	if (record) {
		line = cJSON_PrintUnformatted(record);
		if (!line)
			write_failed = true;
		else if (!quiet)
			text("%s\n", line);
		free(line);
		cJSON_Delete(record);
		record = NULL;
	}
	if (fflush(stream) != 0 || ferror(stream))
		write_failed = true;
	if (write_failed) {
		write_failed = false;
		return fail(AL_BROKER, "cannot write to standard output: %s",
			    errno ? strerror(errno) : "write error");
	}
	return AL_OK;
}

void out_error_line(const char *message)
{
	fprintf(stderr, "amqplock: %s\n", message);
}

void out_error(enum al_status st, const char *semaphore, const char *message)
{
	out_error_line(message);
	if (mode != OUT_JSON)
		return;
	out_begin();
	out_bool("ok", false);
	if (semaphore)
		out_str("semaphore", NULL, semaphore);
	out_str("error", NULL, status_name(st));
	out_str("message", NULL, message);
	out_end();
}
