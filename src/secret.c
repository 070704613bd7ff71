/* Keeping the broker password out of what others can read of amqplock.
 *
 * The kernel shows a process's original argument strings to every user
 * (/proc/PID/cmdline, ps), and its original environment block, its memory
 * and ptrace to the processes of its user and to root (/proc/PID/environ,
 * /proc/PID/mem). The keeper, forked once the slot is held, is a copy of
 * amqplock and shows the same; CMD, its child, runs as the same user. */
#include "secret.h"

#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Replaces by '*' what a reading of each URL of a space-separated list
 * could take for a password: from the first ':' after "://" to the last
 * '@'. For a URL that amqp_parse_url accepts that is the password; for an
 * odd one it may be more, which is harmless: only what others see of the
 * argument changes, never what amqplock uses. */
void secret_mask_urls(char *list)
{
	char *p = list, *end, *from, *colon, *at;

	while (*p) {
		p += strspn(p, " ");
		end = p + strcspn(p, " ");
		from = memmem(p, (size_t)(end - p), "://", 3);
		from = from ? from + 3 : p;
		colon = memchr(from, ':', (size_t)(end - from));
		at = memrchr(from, '@', (size_t)(end - from));
		if (colon && at && colon < at)
			memset(colon + 1, '*', (size_t)(at - colon - 1));
		p = end;
	}
}

/* NAME's value moves to setenv's copy, where getenv finds it, and the
 * original, in the block /proc/PID/environ shows, is overwritten. */
static void hide_env(const char *name)
{
	size_t len = strlen(name);
	char *value = getenv(name), *copy, **e;

	if (!value || setenv(name, value, 1) != 0)
		return;
	memset(value, '*', strlen(value));
	/* A second NAME=... (execve allows it) is never read, but shown. */
	copy = getenv(name);
	for (e = environ; *e; e++)
		if (strncmp(*e, name, len) == 0 && (*e)[len] == '=' && *e + len + 1 != copy)
			memset(*e + len + 1, '*', strlen(*e + len + 1));
}

void secret_hide(void)
{
	/* Not dumpable: environ, mem, the other /proc files that need ptrace
	 * rights, and ptrace itself are then root's alone, for amqplock and
	 * for the keeper, which inherits it (exec makes CMD dumpable again).
	 * No core dump either, which would hold the password. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* Both: CMD is given neither, whichever was used. */
	hide_env("AMQPLOCK_URL");
	hide_env("AMQP_URL");
}
