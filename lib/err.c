#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int sb_err_vsetf(struct sb_err *err, int code, const char *src, int line, const char *fmt, va_list ap)
{
	if (!err)
		return code;
	/* through a copy: callers may pass err->msg itself as an argument ("%s: %s", path,
	 * err->msg), and vsnprintf's source and destination must not overlap */
	char msg[sizeof err->msg];
	vsnprintf(msg, sizeof msg, fmt, ap);
	memcpy(err->msg, msg, sizeof msg);
	err->code = code;
	err->src = src;
	err->src_line = line;
	return code;
}

int sb_err_setf(struct sb_err *err, int code, const char *src, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sb_err_vsetf(err, code, src, line, fmt, ap);
	va_end(ap);
	return code;
}

void sb_err_prefix(struct sb_err *err, const char *fmt, ...)
{
	if (!err)
		return;
	char pre[512], old[sizeof err->msg];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof pre, fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof old);
	snprintf(err->msg, sizeof err->msg, "%s: %s", pre, old);
}

void sb_err_clear(struct sb_err *err)
{
	if (!err)
		return;
	err->code = 0;
	err->msg[0] = 0;
	err->src = NULL;
	err->src_line = 0;
}

int sb_err_errno(struct sb_err *err, const char *src, int line, const char *what)
{
	int e = errno;
	return sb_err_setf(err, SB_EIO, src, line, "%s: %s", what, strerror(e));
}

const char *sb_code_name(int code)
{
	switch (code) {
	case SB_OK: return "ok";
	case SB_EVERDICT: return "refused";
	case SB_EUSAGE: return "usage";
	case SB_EDATA: return "bad data";
	case SB_EIO: return "i/o error";
	case SB_EINTERNAL: return "internal error";
	}
	return "unknown";
}
