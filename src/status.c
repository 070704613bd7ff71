#include "status.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sysexits.h>

static char message[512];

const char *status_name(enum al_status st)
{
	static const char *const names[] = {
		[AL_OK] = "ok",
		[AL_BUSY] = "busy",
		[AL_USAGE] = "usage",
		[AL_NOT_FOUND] = "not_found",
		[AL_LOST] = "lost",
		[AL_EXISTS] = "exists",
		[AL_CONNECTION] = "connection",
		[AL_ACCESS] = "access",
		[AL_BROKER] = "broker",
		[AL_DAMAGED] = "damaged",
		[AL_INTERNAL] = "internal",
	};
	if ((unsigned)st < sizeof(names) / sizeof(names[0]) && names[st])
		return names[st];
	return "internal";
}

int status_exit_code(enum al_status st)
{
	static const int codes[] = {
		[AL_OK] = 0,
		[AL_BUSY] = 1,
		[AL_USAGE] = EX_USAGE,
		[AL_NOT_FOUND] = EX_NOINPUT,
		[AL_LOST] = EX_TEMPFAIL,
		[AL_EXISTS] = EX_CANTCREAT,
		[AL_CONNECTION] = EX_UNAVAILABLE,
		[AL_ACCESS] = EX_NOPERM,
		[AL_BROKER] = EX_PROTOCOL,
		[AL_DAMAGED] = EX_DATAERR,
		[AL_INTERNAL] = EX_SOFTWARE,
	};
	if ((unsigned)st < sizeof(codes) / sizeof(codes[0]) && (st == AL_OK || codes[st]))
		return codes[st];
	return EX_SOFTWARE;
}

enum al_status vfail(enum al_status st, const char *fmt, va_list ap)
{
	if (message[0] == '\0')
		vsnprintf(message, sizeof(message), fmt, ap);
	return st;
}

enum al_status fail(enum al_status st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(st, fmt, ap);
	va_end(ap);
	return st;
}

enum al_status fail_context(enum al_status st, const char *fmt, ...)
{
	char cause[sizeof(message)];
	size_t n;
	va_list ap;

	snprintf(cause, sizeof(cause), "%s", message);
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	n = strlen(message);
	snprintf(message + n, sizeof(message) - n, "%s", cause);
	return st;
}

const char *status_strerror(int err)
{
	static char text[128];

	if (err != EMFILE)
		return strerror(err);
	snprintf(text, sizeof(text), "%s (raise ulimit -n)", strerror(err));
	return text;
}

const char *status_message(void)
{
	return message;
}

void status_clear(void)
{
	message[0] = '\0';
}

void status_clear_unless(bool had)
{
	if (!had)
		status_clear();
}

int trace_enabled;

void trace(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if (!trace_enabled)
		return;
	/* One write, so that a command's output never lands mid-line. */
	n = snprintf(line, sizeof(line), "amqplock: ");
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	strcat(line, "\n");
	fputs(line, stderr);
}
