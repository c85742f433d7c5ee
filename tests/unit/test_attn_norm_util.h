/* test_attn_norm_util.h — shared by tests/unit/test_attn_norm*.c: row generators
 * and an error accumulator that reports the worst case with its context. */
#ifndef TEST_ATTN_NORM_UTIL_H
#define TEST_ATTN_NORM_UTIL_H

#include "attn_norm.h"
#include "../harness.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int test_sizes[] = {1, 2, 3, 5, 7, 13, 31, 50, 65, 97, 128, 513, 4096};
#define N_SIZES ((int)(sizeof test_sizes / sizeof test_sizes[0]))

enum variant {
	V_NORMAL,  /* N(0, 2^2) */
	V_TIES,    /* N(0, 1.5^2) rounded to multiples of 0.5: many exact ties */
	V_EQUAL,   /* all scores equal */
	V_HUGE,    /* N(0, 300^2) */
	V_SMALL,   /* N(0, 1e-4^2) */
	V_WIDE,    /* N(0,1) times 10^U(-3,2): magnitudes mixed over five decades */
	V_NEGINF,  /* N(0, 2^2) with about a quarter of the keys at -inf (never all) */
	N_VARIANTS
};

__attribute__((unused)) static const char *variant_name[] = {"normal", "ties", "equal", "huge", "small", "wide", "neginf"};

static inline void gen_row(struct sb_rng *r, float *s, int T, int v)
{
	for (int i = 0; i < T; i++) {
		double z = sb_rng_normal(r);
		switch (v) {
		case V_NORMAL:
			s[i] = (float)(2 * z);
			break;
		case V_TIES:
			s[i] = (float)(round(3 * z) / 2);
			break;
		case V_EQUAL:
			s[i] = 0.75f;
			break;
		case V_HUGE:
			s[i] = (float)(300 * z);
			break;
		case V_SMALL:
			s[i] = (float)(1e-4 * z);
			break;
		case V_WIDE:
			s[i] = (float)(z * pow(10, -3 + 5 * sb_rng_uniform(r)));
			break;
		case V_NEGINF:
			s[i] = sb_rng_uniform(r) < 0.25 ? -INFINITY : (float)(2 * z);
			break;
		}
	}
	if (v == V_NEGINF && T > 0 && s[0] == -INFINITY)
		s[0] = 0.5f; /* keep one finite key */
}

/* Accumulates element-wise errors over many cases and remembers the worst:
 * pass when |got - want| <= atol + rtol |want| everywhere (NaN only matches NaN). */
struct errs {
	double max_abs, max_rel, num, den, worst_ratio, worst_got, worst_want;
	long n, bad;
	char ctx[200];
};

static inline void errs_add(struct errs *e, const double *got, const double *want, long n, double atol,
		     double rtol, const char *ctx)
{
	for (long i = 0; i < n; i++) {
		double g = got[i], w = want[i], d, ratio;
		if (isnan(g) || isnan(w)) {
			if (isnan(g) && isnan(w))
				continue;
			d = INFINITY;
		} else {
			d = fabs(g - w);
		}
		e->n++;
		ratio = d / (atol + rtol * fabs(w));
		if (d > atol + rtol * fabs(w))
			e->bad++;
		if (d > e->max_abs)
			e->max_abs = d;
		if (fabs(w) > 1e-6 && d / fabs(w) > e->max_rel)
			e->max_rel = d / fabs(w); /* relative error where |want| > 1e-6 */
		if (isfinite(d)) {
			e->num += d * d;
			e->den += w * w;
		}
		if (ratio > e->worst_ratio || (e->worst_ratio == 0 && e->ctx[0] == 0)) {
			e->worst_ratio = ratio;
			e->worst_got = g;
			e->worst_want = w;
			snprintf(e->ctx, sizeof e->ctx, "%s [%ld]", ctx, i);
		}
	}
}

static inline int errs_report(const struct errs *e, const char *name, double atol, double rtol)
{
	return SB_CHECK(e->bad == 0 && e->n > 0,
			"%s: n=%ld max_abs=%.3g max_rel(|want|>1e-6)=%.3g nmse=%.3g (atol %.1g rtol %.1g; "
			"%ld over; worst %.3g of tolerance at %s: got %.9g want %.9g)",
			name, e->n, e->max_abs, e->max_rel, e->den > 0 ? e->num / e->den : e->num, atol,
			rtol, e->bad, e->worst_ratio, e->ctx, e->worst_got, e->worst_want);
}

static inline double *to_f64(const float *x, long n)
{
	double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
	for (long i = 0; i < n; i++)
		d[i] = x[i];
	return d;
}

#endif
