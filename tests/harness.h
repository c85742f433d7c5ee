/* harness.h — the tiny in-tree test harness (TAP-like).
 *
 * Each test program prints "ok N - name" or "not ok N - name" per check,
 * diagnostics as "# ..." lines, and closes with "N passed, N failed";
 * it exits 1 when any check failed. Every numeric check says what it
 * compared and by how much it missed.
 *
 *   int main(void) { ...; SB_CHECK(x == 3, "x is three (got %d)", x); ...; return sb_test_done(); }
 */
#ifndef SB_TEST_HARNESS_H
#define SB_TEST_HARNESS_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int sb_t_n, sb_t_fail;

static inline int sb_t_report(int pass, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int sb_t_report(int pass, const char *fmt, ...)
{
	va_list ap;
	++sb_t_n;
	if (!pass)
		++sb_t_fail;
	printf("%sok %d - ", pass ? "" : "not ", sb_t_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	return pass;
}

#define SB_CHECK(cond, ...) sb_t_report(!!(cond), __VA_ARGS__)

/* Compare two double arrays: passes when max |got-want| <= atol + rtol*|want|
 * element-wise. Reports max abs error, max rel error and NMSE. NaN never passes
 * unless both sides are NaN at the same place. */
static inline int sb_check_close(const char *name, const double *got, const double *want, size_t n,
				 double atol, double rtol)
{
	double max_abs = 0, max_rel = 0, num = 0, den = 0;
	size_t worst = 0;
	int pass = 1;
	for (size_t i = 0; i < n; i++) {
		if (isnan(got[i]) || isnan(want[i])) {
			if (!(isnan(got[i]) && isnan(want[i]))) {
				pass = 0;
				worst = i;
				max_abs = INFINITY;
			}
			continue;
		}
		double d = fabs(got[i] - want[i]);
		double r = d / (fabs(want[i]) > 1e-300 ? fabs(want[i]) : 1e-300);
		num += d * d;
		den += want[i] * want[i];
		if (d > atol + rtol * fabs(want[i]))
			pass = 0;
		if (d > max_abs) {
			max_abs = d;
			worst = i;
		}
		if (d > atol && r > max_rel)
			max_rel = r;
	}
	double nmse = den > 0 ? num / den : num;
	return sb_t_report(pass, "%s: n=%zu max_abs=%.3g max_rel=%.3g nmse=%.3g (atol %.1g rtol %.1g; worst [%zu] got %.9g want %.9g)",
			   name, n, max_abs, max_rel, nmse, atol, rtol, worst, n ? got[worst] : 0.0,
			   n ? want[worst] : 0.0);
}

static inline int sb_check_closef(const char *name, const float *got, const float *want, size_t n,
				  double atol, double rtol)
{
	double *g = malloc((n ? n : 1) * sizeof *g), *w = malloc((n ? n : 1) * sizeof *w);
	for (size_t i = 0; i < n; i++) {
		g[i] = got[i];
		w[i] = want[i];
	}
	int r = sb_check_close(name, g, w, n, atol, rtol);
	free(g);
	free(w);
	return r;
}

/* What a stray write leaves in the 4 bytes orig of a red zone: kind 0 flips the low bit of
 * the first byte; kind 1 reads them as a float and adds 1 in place (x += 1, as a kernel
 * running one element too far would: a signalling NaN pattern turns quiet). */
static inline void sb_test_zone_hit(unsigned char bad[4], const unsigned char orig[4], int kind)
{
	memcpy(bad, orig, 4);
	if (kind) {
		float x;
		memcpy(&x, orig, 4);
		volatile float one = 1.0f;
		x += one;
		memcpy(bad, &x, 4);
	} else {
		bad[0] ^= 0x01;
	}
}

/* A variable of the environment set to value (unset with NULL) for a while: returns the
 * value it had (malloc'd, NULL when unset), which sb_test_env_restore puts back. */
static inline char *sb_test_env_set(const char *name, const char *value)
{
	const char *was = getenv(name);
	char *saved = was ? strdup(was) : NULL;
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
	return saved;
}

static inline void sb_test_env_restore(const char *name, char *saved)
{
	if (saved)
		setenv(name, saved, 1);
	else
		unsetenv(name);
	free(saved);
}

static inline int sb_test_done(void)
{
	printf("%d passed, %d failed\n", sb_t_n - sb_t_fail, sb_t_fail);
	return sb_t_fail ? 1 : 0;
}

#endif
