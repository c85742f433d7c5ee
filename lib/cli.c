/* cli.c — the command-line contract shared by every program. This is the one
 * lib/ file allowed to print and exit: it is called only from main(). */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <math.h>

#include "io.h"
#include "version.h"

const char *sb_prog = "sparsebench";
int sb_cli_argc;
char **sb_cli_argv;
int sb_quiet;

void sb_cli_init(const char *prog, int argc, char **argv)
{
	sb_prog = prog;
	sb_cli_argc = argc;
	/* a copy of the pointers: GNU getopt permutes argv, and run.meta records the command line
	 * as typed (a global, so reachable until exit) */
	sb_cli_argv = malloc(((size_t)argc + 1) * sizeof *sb_cli_argv);
	if (sb_cli_argv)
		memcpy(sb_cli_argv, argv, ((size_t)argc + 1) * sizeof *sb_cli_argv);
	else
		sb_cli_argv = argv;
	sb_io_install_signals();
}

_Noreturn void sb_cli_usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", sb_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", sb_prog);
	exit(SB_EUSAGE);
}

_Noreturn void sb_cli_die(const struct sb_err *err)
{
	int code = err && err->code ? err->code : SB_EINTERNAL;
	fprintf(stderr, "%s: %s\n", sb_prog, err && err->msg[0] ? err->msg : "internal error");
	if (err && err->src && getenv("SB_DEBUG"))
		fprintf(stderr, "%s: (raised at %s:%d)\n", sb_prog, err->src, err->src_line);
	if (code == SB_EUSAGE)
		fprintf(stderr, "Try '%s --help' for more information.\n", sb_prog);
	fflush(stdout);
	exit(code);
}

void sb_cli_warn(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", sb_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int sb_cli_finish(int rc)
{
	struct sb_err err = {0};
	if (sb_stdout_close(&err)) {
		fprintf(stderr, "%s: %s\n", sb_prog, err.msg);
		return SB_EIO;
	}
	return rc;
}

_Noreturn void sb_cli_version(void)
{
	printf("%s %s\n", sb_prog, SB_VERSION);
	exit(sb_cli_finish(0));
}

static double last_progress;
static int progress_open;

void sb_progress(int final, const char *fmt, ...)
{
	if (sb_quiet)
		return;
	double now = sb_monotonic_seconds();
	int tty = isatty(STDERR_FILENO);
	if (!final && now - last_progress < (tty ? 0.2 : 5.0))
		return;
	last_progress = now;
	va_list ap;
	char line[512];
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (tty) {
		fprintf(stderr, "\r\033[K%s: %s", sb_prog, line);
		progress_open = !final;
		if (final)
			fputc('\n', stderr);
	} else {
		fprintf(stderr, "%s: %s\n", sb_prog, line);
	}
	fflush(stderr);
}

void sb_cli_bad_option(char **argv, int missing_value)
{
	if (missing_value)
		sb_cli_usage_error("option '%s' needs a value", argv[optind - 1]);
	if (optopt && optopt < 256)
		sb_cli_usage_error("unknown option '-%c'", optopt);
	sb_cli_usage_error("unknown option '%s'", argv[optind - 1]);
}

int sb_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out, struct sb_err *err)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (!*s || *end || errno || v < lo || v > hi)
		return SB_ERR(err, SB_EUSAGE, "invalid value for %s: '%s' (an integer in [%lld, %lld])", opt, s, lo, hi);
	*out = v;
	return 0;
}

int sb_parse_double(const char *opt, const char *s, double lo, double hi, double *out, struct sb_err *err)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || v < lo || v > hi)
		return SB_ERR(err, SB_EUSAGE, "invalid value for %s: '%s' (a number in [%g, %g])", opt, s, lo, hi);
	*out = v;
	return 0;
}
