#include "out.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The one output of the run: how results are written (out_init), the
 * JSON record being built, and whether a write has failed. */
static struct {
	enum out_mode mode;
	bool quiet;
	FILE *stream;
	cJSON *record;
	/* Where out_* calls put their keys: the record, or the object of a
	 * list item (out_item_begin); and the list being filled. */
	cJSON *current, *list;
	bool write_failed;
} output;

void out_init(enum out_mode m, bool q, FILE *s)
{
	output.mode = m;
	output.quiet = q;
	output.stream = s;
}

bool out_for_people(void)
{
	return output.mode == OUT_TEXT && !output.quiet;
}

static bool text_wanted(const char *text_fmt)
{
	return out_for_people() && text_fmt;
}

static bool json_add(const char *key, cJSON *item)
{
	if (!output.record)
		output.record = output.current = cJSON_CreateObject();
	if (!output.current || !item || !cJSON_AddItemToObject(output.current, key, item)) {
		cJSON_Delete(item);
		output.write_failed = true;
		return false;
	}
	return true;
}

static void text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void text(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vfprintf(output.stream, fmt, ap) < 0)
		output.write_failed = true;
	va_end(ap);
}

void out_begin(void)
{
	cJSON_Delete(output.record);
	output.record = output.current = output.mode == OUT_JSON ? cJSON_CreateObject() : NULL;
	output.list = NULL;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
void out_str(const char *key, const char *text_fmt, const char *value)
{
	if (output.mode == OUT_JSON && key)
		json_add(key, cJSON_CreateString(value));
	else if (text_wanted(text_fmt))
		text(text_fmt, value);
}

void out_uint(const char *key, const char *text_fmt, unsigned long value)
{
	if (output.mode == OUT_JSON && key)
		json_add(key, cJSON_CreateNumber((double)value));
	else if (text_wanted(text_fmt))
		text(text_fmt, value);
}

void out_slots(const char *key, const char *text_fmt, const unsigned *slot, size_t len)
{
	char *joined, *p;
	size_t i;

	if (output.mode == OUT_JSON && key) {
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
		output.write_failed = true;
		return;
	}
	strcpy(joined, "-");
	for (i = 0; i < len; i++)
		p += sprintf(p, "%s%u", i ? " " : "", slot[i]);
	text(text_fmt, joined);
	free(joined);
}
#pragma GCC diagnostic pop

void out_list_begin(const char *key)
{
	if (output.mode != OUT_JSON)
		return;
	output.list = cJSON_CreateArray();
	if (!json_add(key, output.list))
		output.list = NULL;
}

void out_item_begin(void)
{
	cJSON *item;

	if (output.mode != OUT_JSON || !output.list)
		return;
	item = cJSON_CreateObject();
	if (!item || !cJSON_AddItemToArray(output.list, item)) {
		cJSON_Delete(item);
		output.write_failed = true;
		return;
	}
	output.current = item;
}

void out_item_end(void)
{
	output.current = output.record;
}

void out_list_end(void)
{
	output.current = output.record;
	output.list = NULL;
}

void out_bool(const char *key, bool value)
{
	if (output.mode == OUT_JSON && key)
		json_add(key, cJSON_CreateBool(value));
}

enum al_status out_end(void)
{
	char *line;

	if (output.record) {
		line = cJSON_PrintUnformatted(output.record);
		if (!line)
			output.write_failed = true;
		else if (!output.quiet)
			text("%s\n", line);
		free(line);
		cJSON_Delete(output.record);
		output.record = output.current = output.list = NULL;
	}
	if (fflush(output.stream) != 0 || ferror(output.stream))
		output.write_failed = true;
	if (output.write_failed) {
		output.write_failed = false;
		return fail(AL_INTERNAL, "cannot write to standard output: %s",
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
	if (output.mode != OUT_JSON)
		return;
	out_begin();
	out_bool("ok", false);
	if (semaphore)
		out_str("semaphore", NULL, semaphore);
	out_str("error", NULL, status_name(st));
	out_str("message", NULL, message);
	out_end();
}

/* The parts around the signal's name, ready for a signal handler. */
static struct {
	char text_head[32], text_tail[320], json_head[400], json_tail[320];
	int json_fd;
} interrupt;

void out_interrupt_prepare(const char *semaphore, const char *doing)
{
	cJSON *o = cJSON_CreateObject();
	char *line = NULL, *mark;

	snprintf(interrupt.text_head, sizeof(interrupt.text_head), "amqplock: interrupted by SIG");
	snprintf(interrupt.text_tail, sizeof(interrupt.text_tail), " %s\n", doing);
	interrupt.json_head[0] = interrupt.json_tail[0] = '\0';
	interrupt.json_fd = output.mode == OUT_JSON && !output.quiet ? fileno(output.stream) : -1;
	if (interrupt.json_fd < 0 || !o)
		goto out;
	/* The message's signal name goes where the mark is: DEL, which cJSON
	 * leaves as it is (it escapes control characters). */
	cJSON_AddFalseToObject(o, "ok");
	cJSON_AddStringToObject(o, "semaphore", semaphore);
	cJSON_AddStringToObject(o, "error", "interrupted");
	cJSON_AddStringToObject(o, "message", "interrupted by SIG\x7f");
	line = cJSON_PrintUnformatted(o);
	mark = line ? strchr(line, '\x7f') : NULL;
	if (mark && (size_t)(mark - line) < sizeof(interrupt.json_head)) {
		memcpy(interrupt.json_head, line, (size_t)(mark - line));
		interrupt.json_head[mark - line] = '\0';
		/* the tail: the rest of the message, then the closing quote */
		snprintf(interrupt.json_tail, sizeof(interrupt.json_tail), " %s%s\n", doing,
			 mark + 1);
	} else {
		interrupt.json_fd = -1;
	}
out:
	free(line);
	cJSON_Delete(o);
}

static void write_all(int fd, const char *s)
{
	size_t len = strlen(s);
	ssize_t n;

	while (len > 0 && (n = write(fd, s, len)) > 0)
		s += n, len -= (size_t)n;
}

void out_interrupted(int sig)
{
	const char *name = sigabbrev_np(sig);

	if (!name)
		name = "?";
	write_all(STDERR_FILENO, interrupt.text_head);
	write_all(STDERR_FILENO, name);
	write_all(STDERR_FILENO, interrupt.text_tail);
	if (interrupt.json_fd >= 0 && interrupt.json_head[0]) {
		write_all(interrupt.json_fd, interrupt.json_head);
		write_all(interrupt.json_fd, name);
		write_all(interrupt.json_fd, interrupt.json_tail);
	}
}
