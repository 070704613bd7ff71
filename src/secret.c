/* Keeping the broker password out of what others can read of amqplock.
 *
 * The kernel shows a process's original argument strings to every user
 * (/proc/PID/cmdline, ps), and its original environment block, its memory
 * and ptrace to the processes of its user and to root (/proc/PID/environ,
 * /proc/PID/mem). The keeper, forked once the slot is held, is a copy of
 * amqplock and shows the same; CMD, its child, runs as the same user. */
#include "secret.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Where the kernel keeps the original argument strings (fields 48 and 49
 * of /proc/self/stat, which a process may always read of itself); false
 * if it cannot tell. */
static bool arg_area(char **start, size_t *len)
{
	char buf[1024], *p, *save = NULL;
	unsigned long from = 0, to = 0;
	int field = 3;
	FILE *f = fopen("/proc/self/stat", "re");
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* "pid (comm) state ...": comm may hold anything, even ") ". */
	if (!(p = strrchr(buf, ')')))
		return false;
	for (p = strtok_r(p + 1, " ", &save); p; p = strtok_r(NULL, " ", &save), field++) {
		if (field == 48)
			from = strtoul(p, NULL, 10);
		else if (field == 49)
			to = strtoul(p, NULL, 10);
	}
	/* The strings main got (argv[0] is where they begin): under
	 * valgrind, say, the kernel's are another program's, not to be
	 * touched. */
	if (!from || to <= from || (char *)from != program_invocation_name)
		return false;
	*start = (char *)from;
	*len = to - from;
	return true;
}

char **secret_copy_args(int argc, char **argv)
{
	size_t size = ((size_t)argc + 1) * sizeof(char *), len;
	char **copy, *text;
	int i;

	for (i = 0; i < argc; i++)
		size += strlen(argv[i]) + 1;
	/* One block, the strings after the pointers: a main that moves the
	 * pointers about loses none, and one free() ends it all. */
	if (!(copy = malloc(size)))
		return NULL;
	text = (char *)(copy + argc + 1);
	for (i = 0; i < argc; i++) {
		len = strlen(argv[i]) + 1;
		copy[i] = memcpy(text, argv[i], len);
		text += len;
	}
	copy[argc] = NULL;
	return copy;
}

/* Replaces by '*' what a reading of each URL of a space-separated list
 * could take for a password: from the first ':' after "://" to the last
 * '@'. For a URL that amqp_parse_url accepts that is the password; for an
 * odd one it may be more, which is harmless: only what others see of the
 * argument changes, never what amqplock uses. */
static void mask(char *list)
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

void secret_mask_urls(char *list)
{
	size_t len = strlen(list);
	char *area, *at, *end;
	size_t size;

	/* The same text where ps shows it: every place, should it be there
	 * twice. */
	if (len > 0 && arg_area(&area, &size))
		for (end = area + size; (at = memmem(area, (size_t)(end - area), list, len));
		     area = at + len)
			mask(at);
	mask(list);
}

void secret_show_as(const char *name)
{
	size_t len, n = strlen(name) + 1;
	char *area;

	prctl(PR_SET_NAME, name, 0, 0, 0);
	if (!arg_area(&area, &len))
		return;
	memset(area, 0, len);
	memcpy(area, name, n < len ? n - 1 : len - 1);
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
