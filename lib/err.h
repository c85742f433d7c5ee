/* err.h — errors carried out of lib/ and the exit codes of every program.
 *
 * Nothing in lib/ prints, exits or aborts: a function that can fail returns an
 * int status (0 on success, otherwise one of enum sb_code) and fills the
 * struct sb_err it was given. Only a program's main() prints and exits.
 */
#ifndef SB_ERR_H
#define SB_ERR_H

#include <stdarg.h>

/* Exit codes (DESIGN.md §8). */
enum sb_code {
	SB_OK = 0,
	SB_EVERDICT = 1, /* a negative verdict: the guard refused, a check failed */
	SB_EUSAGE = 2,   /* command-line misuse */
	SB_EDATA = 3,    /* bad input data: hash mismatch, malformed record or file */
	SB_EIO = 4,      /* I/O or system error */
	SB_EINTERNAL = 5 /* internal or device error */
};

struct sb_err {
	int code;          /* enum sb_code; 0 when no error is recorded */
	char msg[1024];    /* "what went wrong", usually "path:line: detail" */
	const char *src;   /* source file of the code that set it (for debugging) */
	int src_line;
};

/* Record an error; returns code, so `return sb_err_set(...)` reads naturally.
 * A NULL err is allowed (the error is dropped). */
int sb_err_setf(struct sb_err *err, int code, const char *src, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
int sb_err_vsetf(struct sb_err *err, int code, const char *src, int line, const char *fmt, va_list ap);

/* Prefix the existing message with "prefix: " (e.g. the file being read). */
void sb_err_prefix(struct sb_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void sb_err_clear(struct sb_err *err);

/* Record the current errno as an SB_EIO error: "<what>: <strerror>". */
int sb_err_errno(struct sb_err *err, const char *src, int line, const char *what);

#define SB_ERR(err, code, ...) sb_err_setf((err), (code), __FILE__, __LINE__, __VA_ARGS__)
#define SB_ERRNO(err, what) sb_err_errno((err), __FILE__, __LINE__, (what))

/* Propagate a non-zero status. */
#define SB_TRY(expr)                                                                               \
	do {                                                                                       \
		int sb_try_rc_ = (expr);                                                           \
		if (sb_try_rc_)                                                                    \
			return sb_try_rc_;                                                         \
	} while (0)

const char *sb_code_name(int code);

#endif
