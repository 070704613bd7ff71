/* The process table read from /proc (procs.h): states, parents,
 * descendants. Reads only; nothing here signals a process. */
#include "procs.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool procs_gone(char state)
{
	return state == 'Z' || state == 'X';
}

bool procs_stopped(char state)
{
	return state == 'T' || state == 't';
}

/* The state field of a /proc/.../stat line, and the parent's pid. */
static bool parse_stat(const char *path, char *state, pid_t *ppid)
{
	char buf[512], *close_paren;
	ssize_t n;
	int fd, parent;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* "pid (comm) state ppid ...": comm may hold anything, even ')'. */
	close_paren = strrchr(buf, ')');
	if (!close_paren || sscanf(close_paren + 1, " %c %d", state, &parent) != 2)
		return false;
	*ppid = (pid_t)parent;
	return true;
}

char procs_other_threads(pid_t pid)
{
	char path[64], state, result = 'Z';
	struct dirent *e;
	pid_t ppid;
	long tid;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return 'Z';
	while ((e = readdir(d)) && result != 'R') {
		tid = strtol(e->d_name, NULL, 10);
		if (tid <= 0 || tid == pid)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%ld/stat", (int)pid, tid);
		if (!parse_stat(path, &state, &ppid) || procs_gone(state))
			continue;
		result = procs_stopped(state) ? 'T' : 'R';
	}
	closedir(d);
	return result;
}

bool procs_read(pid_t pid, struct proc *out)
{
	char path[32];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!parse_stat(path, &out->state, &out->ppid))
		return false;
	out->pid = pid;
	/* A zombie leader: the process lives while another thread does. */
	if (out->state == 'Z')
		out->state = procs_other_threads(pid);
	return true;
}

/* Every process on the system, by one pass over /proc. */
static bool scan_procs(struct procs *all)
{
	struct dirent *e;
	struct proc p;
	DIR *d = opendir("/proc");
	char *end;
	long pid;

	all->len = 0;
	if (!d)
		return false;
	while ((e = readdir(d))) {
		pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || !procs_read((pid_t)pid, &p))
			continue;
		if (all->len == all->cap) {
			size_t cap = all->cap ? 2 * all->cap : 256;
			struct proc *grown = realloc(all->p, cap * sizeof(*grown));

			if (!grown)
				break;
			all->p = grown;
			all->cap = cap;
		}
		all->p[all->len++] = p;
	}
	closedir(d);
	return true;
}

static int by_pid(const void *a, const void *b)
{
	const struct proc *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Keeps in `all` only the live descendants of root (root excluded): each
 * process is marked once its parent is, pass after pass, as many passes
 * as the tree is deep. */
static void keep_descendants(struct procs *all, pid_t root)
{
	size_t *parent = malloc((all->len ? all->len : 1) * sizeof(*parent));
	bool *mine = calloc(all->len ? all->len : 1, sizeof(*mine));
	bool grew = true;
	size_t i, kept = 0;
	struct proc key, *found;

	if (!parent || !mine) {
		all->len = 0;
		goto out;
	}
	qsort(all->p, all->len, sizeof(*all->p), by_pid);
	for (i = 0; i < all->len; i++) {
		key.pid = all->p[i].ppid;
		found = bsearch(&key, all->p, all->len, sizeof(*all->p), by_pid);
		parent[i] = found ? (size_t)(found - all->p) : i;
		mine[i] = all->p[i].ppid == root;
	}
	while (grew) {
		grew = false;
		for (i = 0; i < all->len; i++)
			if (!mine[i] && mine[parent[i]])
				mine[i] = grew = true;
	}
	for (i = 0; i < all->len; i++)
		if (mine[i] && !procs_gone(all->p[i].state))
			all->p[kept++] = all->p[i];
	all->len = kept;
out:
	free(parent);
	free(mine);
}

bool procs_descendants(pid_t root, struct procs *out)
{
	if (!scan_procs(out))
		return false;
	keep_descendants(out, root);
	return true;
}
