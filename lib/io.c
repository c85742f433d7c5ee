/* io.c — atomic file output (temp + fsync + rename), cleanup on signals,
 * whole-file reads, stdout checking, time helpers. */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Registry of pending temporary files, removed by the signal handler. Slots
 * hold fixed-size copies of the paths so the handler touches no heap. */
#define MAX_PENDING 64
#define PATH_CAP 4096
static char pending[MAX_PENDING][PATH_CAP];
static volatile sig_atomic_t pending_used[MAX_PENDING];

static int register_tmp(const char *tmp)
{
	if (strlen(tmp) >= PATH_CAP)
		return -1;
	for (int i = 0; i < MAX_PENDING; i++) {
		if (!pending_used[i]) {
			memcpy(pending[i], tmp, strlen(tmp) + 1);
			pending_used[i] = 1;
			return i;
		}
	}
	return -1; /* too many at once: still correct, only not cleaned on a signal */
}

static void unregister_tmp(int slot)
{
	if (slot >= 0 && slot < MAX_PENDING)
		pending_used[slot] = 0;
}

void sb_io_remove_pending(void)
{
	for (int i = 0; i < MAX_PENDING; i++)
		if (pending_used[i])
			unlink(pending[i]);
}

static void on_signal(int sig)
{
	sb_io_remove_pending();
	signal(sig, SIG_DFL);
	raise(sig);
}

void sb_io_install_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

static char *dir_of(const char *path)
{
	char *copy = strdup(path);
	if (!copy)
		return NULL;
	char *d = strdup(dirname(copy));
	free(copy);
	return d;
}

static int fsync_dir(const char *path)
{
	char *d = dir_of(path);
	if (!d)
		return -1;
	int fd = open(d, O_RDONLY | O_DIRECTORY);
	free(d);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	/* some file systems refuse fsync on directories: not an error for us */
	if (rc && (errno == EINVAL || errno == EROFS))
		rc = 0;
	close(fd);
	return rc;
}

int sb_atomic_open(struct sb_atomic *a, const char *path, struct sb_err *err)
{
	memset(a, 0, sizeof *a);
	a->slot = -1;
	char *copy = strdup(path), *copy2 = strdup(path);
	if (!copy || !copy2) {
		free(copy);
		free(copy2);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	const char *dir = dirname(copy);
	const char *base = basename(copy2);
	size_t n = strlen(dir) + strlen(base) + 32;
	a->tmp = malloc(n);
	a->path = strdup(path);
	if (!a->tmp || !a->path) {
		free(copy);
		free(copy2);
		free(a->tmp);
		free(a->path);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	snprintf(a->tmp, n, "%s/.%s.tmp.XXXXXX", dir, base);
	free(copy);
	free(copy2);
	/* block the cleanup signals while creating and registering the temp file */
	sigset_t all, old;
	sigemptyset(&all);
	sigaddset(&all, SIGINT);
	sigaddset(&all, SIGTERM);
	sigaddset(&all, SIGHUP);
	sigprocmask(SIG_BLOCK, &all, &old);
	int fd = mkstemp(a->tmp);
	if (fd >= 0)
		a->slot = register_tmp(a->tmp);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (fd < 0) {
		int rc = SB_ERRNO(err, path);
		free(a->tmp);
		free(a->path);
		a->tmp = a->path = NULL;
		return rc;
	}
	/* mkstemp makes 0600; give the file the mode a plain fopen would */
	mode_t um = umask(022);
	umask(um);
	fchmod(fd, 0666 & ~um);
	a->f = fdopen(fd, "wb");
	if (!a->f) {
		int rc = SB_ERRNO(err, path);
		close(fd);
		sb_atomic_abort(a);
		return rc;
	}
	return 0;
}

void sb_atomic_abort(struct sb_atomic *a)
{
	if (a->f) {
		fclose(a->f);
		a->f = NULL;
	}
	if (a->tmp) {
		unlink(a->tmp);
		unregister_tmp(a->slot);
		free(a->tmp);
		a->tmp = NULL;
	}
	free(a->path);
	a->path = NULL;
}

int sb_atomic_commit(struct sb_atomic *a, struct sb_err *err)
{
	if (!a->f || !a->tmp)
		return SB_ERR(err, SB_EINTERNAL, "atomic write not open");
	int rc = 0;
	if (fflush(a->f) != 0 || ferror(a->f))
		rc = SB_ERRNO(err, a->path);
	else if (fsync(fileno(a->f)) != 0)
		rc = SB_ERRNO(err, a->path);
	if (fclose(a->f) != 0 && !rc)
		rc = SB_ERRNO(err, a->path);
	a->f = NULL;
	if (!rc && rename(a->tmp, a->path) != 0)
		rc = SB_ERRNO(err, a->path);
	if (rc) {
		sb_atomic_abort(a);
		return rc;
	}
	unregister_tmp(a->slot);
	free(a->tmp);
	a->tmp = NULL;
	if (fsync_dir(a->path) != 0)
		rc = SB_ERRNO(err, a->path);
	free(a->path);
	a->path = NULL;
	return rc;
}

int sb_write_file_atomic(const char *path, const void *data, size_t n, struct sb_err *err)
{
	struct sb_atomic a;
	SB_TRY(sb_atomic_open(&a, path, err));
	if (n && fwrite(data, 1, n, a.f) != n) {
		int rc = SB_ERRNO(err, path);
		sb_atomic_abort(&a);
		return rc;
	}
	return sb_atomic_commit(&a, err);
}

int sb_write_file_new(const char *path, const void *data, size_t n, struct sb_err *err)
{
	struct sb_atomic a;
	SB_TRY(sb_atomic_open(&a, path, err));
	int rc = 0;
	if ((n && fwrite(data, 1, n, a.f) != n) || fflush(a.f) != 0 || fsync(fileno(a.f)) != 0)
		rc = SB_ERRNO(err, path);
	if (fclose(a.f) != 0 && !rc)
		rc = SB_ERRNO(err, path);
	a.f = NULL;
	if (!rc && link(a.tmp, path) != 0)
		rc = errno == EEXIST ? SB_ERR(err, SB_EVERDICT, "%s: exists; refusing to replace it", path)
		                     : SB_ERRNO(err, path);
	sb_atomic_abort(&a); /* the temporary name goes; the file stays under path when linked */
	if (!rc && fsync_dir(path) != 0)
		rc = SB_ERRNO(err, path);
	return rc;
}

int sb_read_stream(FILE *f, const char *name, char **data, size_t *n, size_t limit, struct sb_err *err)
{
	*data = NULL;
	*n = 0;
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	if (!buf)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (;;) {
		if (len + 1 >= cap) {
			size_t nc = cap * 2;
			char *b = realloc(buf, nc);
			if (!b) {
				free(buf);
				return SB_ERR(err, SB_EINTERNAL, "out of memory");
			}
			buf = b;
			cap = nc;
		}
		size_t got = fread(buf + len, 1, cap - len - 1, f);
		len += got;
		if (limit && len > limit) {
			free(buf);
			return SB_ERR(err, SB_EDATA, "%s: file larger than %zu bytes", name, limit);
		}
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		free(buf);
		return SB_ERR(err, SB_EIO, "%s: read error", name);
	}
	buf[len] = 0;
	*data = buf;
	*n = len;
	return 0;
}

int sb_read_file(const char *path, char **data, size_t *n, size_t limit, struct sb_err *err)
{
	*data = NULL;
	*n = 0;
	FILE *f = fopen(path, "rb");
	if (!f)
		return SB_ERRNO(err, path);
	int rc = sb_read_stream(f, path, data, n, limit, err);
	fclose(f);
	return rc;
}

int sb_mkdir_p(const char *path, struct sb_err *err)
{
	char *p = strdup(path);
	if (!p)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) != 0 && errno != EEXIST) {
			int rc = SB_ERRNO(err, p);
			free(p);
			return rc;
		}
		*s = '/';
	}
	if (mkdir(p, 0755) != 0 && errno != EEXIST) {
		int rc = SB_ERRNO(err, p);
		free(p);
		return rc;
	}
	struct stat st;
	if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
		int rc = SB_ERR(err, SB_EIO, "%s: not a directory", p);
		free(p);
		return rc;
	}
	free(p);
	return 0;
}

int sb_file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

uint64_t sb_file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

int sb_file_mtime(const char *path, double *mtime, struct sb_err *err)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return SB_ERRNO(err, path);
	*mtime = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
	return 0;
}

char *sb_path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = malloc(a + b + 2);
	if (!p)
		return NULL;
	memcpy(p, dir, a);
	size_t k = a;
	if (a && dir[a - 1] != '/')
		p[k++] = '/';
	memcpy(p + k, name, b + 1);
	return p;
}

int sb_stdout_close(struct sb_err *err)
{
	int bad = fflush(stdout) != 0;
	bad |= ferror(stdout) != 0;
	int e = errno;
	if (fclose(stdout) != 0 && !bad) {
		bad = 1;
		e = errno;
	}
	if (bad) {
		errno = e ? e : EIO;
		return SB_ERRNO(err, "write error on standard output");
	}
	return 0;
}

double sb_now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double sb_monotonic_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void sb_time_rfc3339(char buf[32], double *unix_seconds)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char base[24];
	strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, 32, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
	if (unix_seconds)
		*unix_seconds = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int sb_lines_add(struct sb_lines *L, const char *s, size_t n, struct sb_err *err)
{
	while (n && s[n - 1] == '\n')
		n--;
	if (L->n == L->cap) {
		size_t cap = L->cap ? 2 * L->cap : 64;
		char **p = realloc(L->l, cap * sizeof *p);
		if (!p)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		L->l = p;
		L->cap = cap;
	}
	char *c = malloc(n + 1);
	if (!c)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	memcpy(c, s, n);
	c[n] = 0;
	L->l[L->n++] = c;
	return 0;
}

void sb_lines_free(struct sb_lines *L)
{
	for (size_t i = 0; i < L->n; i++)
		free(L->l[i]);
	free(L->l);
	memset(L, 0, sizeof *L);
}

int sb_lines_write(const struct sb_lines *L, const char *path, struct sb_err *err)
{
	struct sb_atomic a;
	SB_TRY(sb_atomic_open(&a, path, err));
	for (size_t i = 0; i < L->n; i++)
		if (fputs(L->l[i], a.f) == EOF || fputc('\n', a.f) == EOF) {
			sb_atomic_abort(&a);
			return SB_ERRNO(err, path);
		}
	return sb_atomic_commit(&a, err);
}
