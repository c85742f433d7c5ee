/* cli.h — the command-line contract shared by every program (DESIGN.md §8).
 *
 *   --help      usage to stdout, exit 0
 *   --version   "PROGRAM VERSION" to stdout, exit 0
 *   misuse      "PROGRAM: what\nTry 'PROGRAM --help' for more information." on stderr, exit 2
 *   errors      "PROGRAM: message" on stderr, exit with the error's code
 *   at exit     stdout is checked (ferror + fclose): a failed write is exit 4
 *   -q          silences progress lines (sb_progress)
 */
#ifndef SB_CLI_H
#define SB_CLI_H

#include "err.h"

extern const char *sb_prog;   /* program name, set by sb_cli_init */
extern int sb_cli_argc;
extern char **sb_cli_argv;
extern int sb_quiet;

/* Remember argv (for run.meta), install the temp-file signal handlers. */
void sb_cli_init(const char *prog, int argc, char **argv);
/* Print usage error and exit 2. */
_Noreturn void sb_cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* getopt_long's ':' (an option without its value: missing_value 1) and '?' (an unknown
 * option) as a usage error (exit 2) naming the option. */
_Noreturn void sb_cli_bad_option(char **argv, int missing_value);
/* Print "PROGRAM: err->msg" and exit with err->code (5 when unset). */
_Noreturn void sb_cli_die(const struct sb_err *err);
/* Print "PROGRAM: msg" (a diagnostic, not fatal). */
void sb_cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Check stdout and return the exit status to use: rc if stdout is fine, else 4. */
int sb_cli_finish(int rc);
/* Print the version line and exit 0. */
_Noreturn void sb_cli_version(void);

/* Progress line on stderr ("\r"-updated when stderr is a terminal, one line
 * per call otherwise, at most once per `min_interval_s` unless final != 0). */
void sb_progress(int final, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse helpers for option values: SB_EUSAGE with "invalid value for --OPT: 'x'". */
int sb_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out, struct sb_err *err);
int sb_parse_double(const char *opt, const char *s, double lo, double hi, double *out, struct sb_err *err);

#endif
