/* io.h — safe file output and small file helpers.
 *
 * Atomic write: the data goes to a temporary file in the target's directory
 * (".NAME.tmp.XXXXXX"), is fsync'ed, and renamed over the target; the
 * directory is fsync'ed too. On error, or when the process receives SIGINT,
 * SIGTERM or SIGHUP, the temporary file is removed (sb_io_install_signals()).
 */
#ifndef SB_IO_H
#define SB_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"

struct sb_atomic {
	FILE *f;          /* write here */
	char *path;       /* final path */
	char *tmp;        /* temporary path */
	int slot;         /* registry slot for signal cleanup */
};

/* Install the SIGINT/SIGTERM/SIGHUP handler that removes pending temporary
 * files and then re-raises the signal with its default action. */
void sb_io_install_signals(void);
/* Remove the pending temporary files (async-signal-safe: for signal handlers that end the
 * process, as this one and lib/tensor.c's SIGBUS handler do). */
void sb_io_remove_pending(void);

int sb_atomic_open(struct sb_atomic *a, const char *path, struct sb_err *err);
/* Flush, fsync, close, rename; on failure removes the temporary file. */
int sb_atomic_commit(struct sb_atomic *a, struct sb_err *err);
/* Discard: close and remove the temporary file. Safe to call after commit (no-op). */
void sb_atomic_abort(struct sb_atomic *a);

/* A record log held in memory and rewritten whole and atomically after each change (a
 * killed process leaves whole lines, never a torn one): train.ndjson of both tracks. */
struct sb_lines {
	char **l;
	size_t n, cap;
};
/* Append line s[0..n) (trailing newlines dropped). */
int sb_lines_add(struct sb_lines *L, const char *s, size_t n, struct sb_err *err);
void sb_lines_free(struct sb_lines *L); /* and empty it */
/* Write every line, each ended by a newline, to path atomically (sb_atomic). */
int sb_lines_write(const struct sb_lines *L, const char *path, struct sb_err *err);

/* Write a whole buffer atomically. */
int sb_write_file_atomic(const char *path, const void *data, size_t n, struct sb_err *err);
/* The same, but only where path does not exist when the file appears (link(2), not rename:
 * no window between a check and the write): SB_EVERDICT naming path when it does. */
int sb_write_file_new(const char *path, const void *data, size_t n, struct sb_err *err);
/* Read a whole file (NUL appended, not counted in *n). limit 0 = no limit;
 * a larger file is SB_EDATA. */
int sb_read_file(const char *path, char **data, size_t *n, size_t limit, struct sb_err *err);
/* The same for an open stream (stdin), named in messages by name. */
int sb_read_stream(FILE *f, const char *name, char **data, size_t *n, size_t limit, struct sb_err *err);

/* mkdir -p */
int sb_mkdir_p(const char *path, struct sb_err *err);
int sb_file_exists(const char *path);
/* A file's size in bytes (0 when it cannot be stat'ed): for a run.meta input just hashed. */
uint64_t sb_file_size(const char *path);
/* Modification time with nanoseconds, as seconds since the epoch. */
int sb_file_mtime(const char *path, double *mtime, struct sb_err *err);
/* "dir/name" joined into a newly allocated string. */
char *sb_path_join(const char *dir, const char *name);

/* Check stdout at exit: fflush + ferror + fclose. Returns 0 or SB_EIO with a message. */
int sb_stdout_close(struct sb_err *err);

/* Current time as RFC 3339 UTC with milliseconds ("2026-11-29T23:05:01.123Z"). */
void sb_time_rfc3339(char buf[32], double *unix_seconds);
double sb_now_seconds(void);      /* wall clock */
double sb_monotonic_seconds(void);

#endif
