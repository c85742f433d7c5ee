/* test_attn_norm.c — the float normalisers against the double reference, plus
 * names, errors and the properties PROTOCOL A3 asks for.
 *
 * Finite differences on the reference: test_attn_norm_fd.c.
 * PyTorch golden outputs: test_attn_norm_golden.c.
 */
#include "test_attn_norm_util.h"

struct cfg {
	const char *label, *method;
	double alpha;
	int unrolled;
};

static const struct cfg cfgs[] = {
	{"softmax", "softmax", 0, 0},
	{"topk_0125", "topk_softmax_0125", 0, 0},
	{"topk_025", "topk_softmax_025", 0, 0},
	{"topk_05", "topk_softmax_05", 0, 0},
	{"bottomk_0125", "bottomk_softmax_0125", 0, 0},
	{"bottomk_025", "bottomk_softmax_025", 0, 0},
	{"sparsemax", "sparsemax", 0, 0},
	{"entmax15", "entmax15", 0, 0},
	{"bisect_a1.05", "entmax_bisect", 1.05, 0},
	{"bisect_a1.2", "entmax_bisect", 1.2, 0},
	{"bisect_a1.5", "entmax_bisect", 1.5, 0},
	{"bisect_a1.8", "entmax_bisect", 1.8, 0},
	{"bisect_a2", "entmax_bisect", 2.0, 0},
	{"hae_a1.33", "headwise_adaptive_entmax", 1.33, 0},
	{"entmax15_unrolled", "entmax15", 0, 1},
	{"bisect_a1.3_unrolled", "entmax_bisect", 1.3, 1},
	{"hae_a1.05_unrolled", "headwise_adaptive_entmax", 1.05, 1},
	{"bisect_a2_unrolled", "entmax_bisect", 2.0, 1},
};
#define N_CFGS ((int)(sizeof cfgs / sizeof cfgs[0]))

static struct sb_norm make(const struct cfg *c, enum sb_mask_mode mask)
{
	struct sb_norm nm;
	struct sb_err err = {0};
	if (sb_norm_parse(c->method, c->alpha, &nm, &err))
		fprintf(stderr, "parse %s: %s\n", c->method, err.msg);
	nm.unrolled = c->unrolled;
	nm.mask = mask;
	return nm;
}

static float call_alpha(const struct cfg *c, const struct sb_norm *nm)
{
	return nm->kind == SB_NORM_ENTMAX_BISECT ? (float)nm->alpha : (float)c->alpha;
}

/* the exponent 1/(alpha-1) amplifies float rounding of d = y - tau */
static double amp(const struct cfg *c, const struct sb_norm *nm)
{
	if (nm->kind == SB_NORM_ENTMAX_BISECT || nm->kind == SB_NORM_ADAPTIVE) {
		double a = call_alpha(c, nm);
		return 1 / (a - 1);
	}
	return 2;
}

/* -------------------------------------------------------------- names */

static void test_names(void)
{
	struct sb_norm nm;
	struct sb_err err = {0};
	static const char *names[] = {"softmax", "topk_softmax_0125", "topk_softmax_025",
				      "topk_softmax_05", "bottomk_softmax_0125", "bottomk_softmax_025",
				      "sparsemax", "entmax15", "entmax_bisect",
				      "headwise_adaptive_entmax"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		int rc = sb_norm_parse(names[i], 1.5, &nm, &err);
		SB_CHECK(rc == 0 && strcmp(sb_norm_name(&nm), names[i]) == 0,
			 "parse/name round trip '%s' -> '%s' (rc %d)", names[i], rc ? "-" : sb_norm_name(&nm), rc);
	}
	int rc = sb_norm_parse("topk_softmax", 0, &nm, &err);
	SB_CHECK(rc == 0 && nm.kind == SB_NORM_TOPK && nm.ratio == 0.25 &&
			 strcmp(sb_norm_name(&nm), "topk_softmax_025") == 0,
		 "bare topk_softmax means ratio 0.25 (got %g, name %s)", nm.ratio, sb_norm_name(&nm));
	rc = sb_norm_parse("topk_softmax_0375", 0, &nm, &err);
	SB_CHECK(rc == 0 && nm.ratio == 0.375 && strcmp(sb_norm_name(&nm), "topk_softmax_0375") == 0,
		 "topk_softmax_0375 parses to ratio 0.375 and back (got %g, %s)", nm.ratio, sb_norm_name(&nm));
	rc = sb_norm_parse("entmax_bisect", 3.0, &nm, &err);
	SB_CHECK(rc == 0 && nm.alpha == 2.0, "entmax_bisect alpha 3 clamps to 2 (got %g)", nm.alpha);
	rc = sb_norm_parse("entmax_bisect", 0.5, &nm, &err);
	SB_CHECK(rc == 0 && nm.alpha == 1.05, "entmax_bisect alpha 0.5 clamps to 1.05 (got %g)", nm.alpha);
	rc = sb_norm_parse("entmax15", 1.9, &nm, &err);
	SB_CHECK(rc == 0 && nm.alpha == 1.5 && nm.mask == SB_MASK_MARGIN && nm.unrolled == 0,
		 "entmax15 has alpha 1.5, margin mask, exact gradient by default (alpha %g)", nm.alpha);
	rc = sb_norm_parse("entmax_bisect", NAN, &nm, &err);
	SB_CHECK(rc == SB_EUSAGE, "entmax_bisect with alpha NaN is a usage error (rc %d)", rc);
	err.code = 0;
	rc = sb_norm_parse("softmaxx", 0, &nm, &err);
	SB_CHECK(rc == SB_EUSAGE && strstr(err.msg, "softmaxx"), "unknown method is a usage error naming it: %s",
		 err.msg);
	rc = sb_norm_parse("topk_softmax_5", 0, &nm, &err);
	SB_CHECK(rc == SB_EUSAGE, "topk_softmax_5 (ratio 5) is rejected (rc %d)", rc);

	/* PROTOCOL A3: retained counts T=65 -> 9/17/33, T=50 -> 7/13/25 */
	int k65[3] = {sb_norm_topk_k(0.125, 65), sb_norm_topk_k(0.25, 65), sb_norm_topk_k(0.5, 65)};
	int k50[3] = {sb_norm_topk_k(0.125, 50), sb_norm_topk_k(0.25, 50), sb_norm_topk_k(0.5, 50)};
	SB_CHECK(k65[0] == 9 && k65[1] == 17 && k65[2] == 33, "top-k counts at T=65: %d/%d/%d (want 9/17/33)",
		 k65[0], k65[1], k65[2]);
	SB_CHECK(k50[0] == 7 && k50[1] == 13 && k50[2] == 25, "top-k counts at T=50: %d/%d/%d (want 7/13/25)",
		 k50[0], k50[1], k50[2]);
	SB_CHECK(sb_norm_topk_k(0.125, 1) == 1 && sb_norm_topk_k(0.125, 3) == 1 && sb_norm_topk_k(1, 7) == 7 &&
			 sb_norm_topk_k(0.5, 97) == 49,
		 "top-k counts: k = max(1, ceil(r n)) at n = 1, 3, 7, 97");
}

/* ------------------------------------------------------------- errors */

static void test_errors(void)
{
	struct sb_norm nm;
	struct sb_err err = {0};
	float s[8] = {1, 2, 3, 4, 5, 6, 7, 8}, p[8], aux[SB_NORM_AUX];
	static const char *ms[] = {"softmax", "topk_softmax_025", "sparsemax", "entmax15", "entmax_bisect"};
	for (int m = 0; m < 5; m++) {
		sb_norm_parse(ms[m], 1.3, &nm, &err);
		err.code = 0;
		int rc = sb_norm_forward(&nm, p, aux, s, 1, 8, 0, 1.3f, &err);
		SB_CHECK(rc == SB_EDATA && err.code == SB_EDATA, "%s: n_valid = 0 is SB_EDATA (rc %d): %s", ms[m],
			 rc, err.msg);
		rc = sb_norm_forward(&nm, p, aux, s, 1, 8, 9, 1.3f, &err);
		SB_CHECK(rc == SB_EDATA, "%s: n_valid > T is SB_EDATA (rc %d)", ms[m], rc);
		float ni[8] = {-INFINITY, -INFINITY, -INFINITY, 2, 2, 2, 2, 2};
		rc = sb_norm_forward(&nm, p, aux, ni, 1, 8, 3, 1.3f, &err);
		SB_CHECK(rc == SB_EDATA && strstr(err.msg, "row 0"),
			 "%s: a row whose valid keys are all -inf is SB_EDATA naming the row: %s", ms[m], err.msg);
		/* NaN: the row is NaN, the call returns, the next row is unaffected */
		float sn[16] = {1, NAN, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8};
		float pn[16], dsn[16], g[16] = {1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
		float an[2 * SB_NORM_AUX];
		rc = sb_norm_forward(&nm, pn, an, sn, 2, 8, 8, 1.3f, &err);
		int allnan = 1, finite2 = 1;
		for (int i = 0; i < 8; i++)
			allnan &= isnan(pn[i]);
		for (int i = 8; i < 16; i++)
			finite2 &= isfinite(pn[i]);
		SB_CHECK(rc == 0 && allnan && finite2, "%s: a NaN score makes its row NaN, the next row is fine",
			 ms[m]);
		double da = 0;
		sb_norm_backward(&nm, dsn, &da, g, pn, an, sn, 2, 8, 8, 1.3f);
		allnan = 1;
		finite2 = 1;
		for (int i = 0; i < 8; i++)
			allnan &= isnan(dsn[i]);
		for (int i = 8; i < 16; i++)
			finite2 &= isfinite(dsn[i]);
		SB_CHECK(allnan && finite2 && (nm.kind != SB_NORM_ENTMAX_BISECT || isnan(da)),
			 "%s: backward of a NaN row is NaN (and dalpha NaN for entmax_bisect)", ms[m]);
		float si[8] = {1, INFINITY, 3, 4, 5, 6, 7, 8};
		rc = sb_norm_forward(&nm, p, aux, si, 1, 8, 8, 1.3f, &err);
		SB_CHECK(rc == 0 && isnan(p[0]) && isnan(p[7]), "%s: a +inf score makes the row NaN", ms[m]);
	}
}

/* ------------------------------------------------- float vs reference */

static const char *mask_name[] = {"unmasked", "margin", "exclude"};

/* forward (every algorithm) and backward (with dalpha) against the reference */
static void test_against_ref(void)
{
	static const enum sb_norm_algo algos[] = {SB_NORM_ALGO_AUTO, SB_NORM_ALGO_PLAIN,
						  SB_NORM_ALGO_ITERATE};
	static const char *algo_name[] = {"auto", "plain", "iterate"};
	for (int ci = 0; ci < N_CFGS; ci++) {
		const struct cfg *c = &cfgs[ci];
		struct errs ef[3] = {0}, eb = {0}, ea = {0};
		/* Tolerances. Forward: float keeps ~1e-7 relative per operation; the exponent
		 * e = 1/(alpha-1) multiplies the relative error of d = y - tau (e = 20 at
		 * alpha = 1.05), and a score of magnitude |s| carries an absolute rounding
		 * of |s| 6e-8 into y. Backward: sums of O(T) float products. The study's
		 * bisection (unrolled) can flip a branch decision when sum p - 1 is within
		 * float rounding of 0, which moves tau by one final bracket width
		 * ((max y - min y + 1)/2^18), hence its looser tolerance. */
		double atol_f = 2e-7, rtol_f = 2e-6, atol_b = 2e-6, rtol_b = 2e-5;
		for (int mode = 0; mode < 3; mode++)
			for (int si = 0; si < N_SIZES; si++)
				for (int v = 0; v < N_VARIANTS; v++) {
					int T = test_sizes[si], rows = T >= 4096 ? 1 : 3;
					int nv = mode == 0 ? T : (T * 3 + 4) / 5;
					if (mode && nv == T)
						continue;
					struct sb_norm nm = make(c, mode == 2 ? SB_MASK_EXCLUDE : SB_MASK_MARGIN);
					float alpha = call_alpha(c, &nm);
					struct sb_rng rng;
					sb_rng_init(&rng, 1000 + ci, SB_RNG_USER, (uint64_t)(si * 100 + v * 10 + mode));
					long n = (long)rows * T;
					float *s = malloc(n * sizeof *s), *p = malloc(n * sizeof *p);
					float *g = malloc(n * sizeof *g), *ds = malloc(n * sizeof *ds);
					float *aux = malloc(rows * SB_NORM_AUX * sizeof *aux);
					for (int r = 0; r < rows; r++)
						gen_row(&rng, s + (long)r * T, T, v);
					for (long i = 0; i < n; i++)
						g[i] = (float)sb_rng_normal(&rng);
					double *sd = to_f64(s, n), *gd = to_f64(g, n);
					double *pr = malloc(n * sizeof *pr), *dr = malloc(n * sizeof *dr);
					struct sb_err err = {0};
					int rc = sb_norm_forward_ref_f64(&nm, pr, sd, rows, T, nv, alpha, &err);
					double mag = 0;
					for (long i = 0; i < n; i++)
						if (isfinite(s[i]) && fabs(s[i]) > mag)
							mag = fabs(s[i]);
					double sc = mag > 1 ? mag : 1, e = amp(c, &nm);
					double at = atol_f * e * sc, rt = rtol_f * e * sc;
					if (c->unrolled) {
						at = 3e-5 * e * sc;
						rt = 3e-4 * e * sc;
					}
					char ctx[160];
					snprintf(ctx, sizeof ctx, "T=%d n_valid=%d %s %s", T, nv, variant_name[v],
						 mask_name[mode]);
					for (int a = 0; a < 3; a++) {
						int rc2 = sb_norm_forward_algo(&nm, algos[a], p, aux, s, rows, T, nv,
									       alpha, &err);
						double *pd = to_f64(p, n);
						if (rc || rc2) {
							double bad = NAN;
							errs_add(&ef[a], &bad, &sc, 1, 0, 0, ctx);
						} else {
							errs_add(&ef[a], pd, pr, n, at, rt, ctx);
						}
						free(pd);
					}
					/* backward from the AUTO forward, with ds aliasing dp in half the cases */
					sb_norm_forward(&nm, p, aux, s, rows, T, nv, alpha, &err);
					double da = 0, dar = 0;
					float *dsp = (si + v) % 2 ? g : ds;
					sb_norm_backward(&nm, dsp, &da, g, p, aux, s, rows, T, nv, alpha);
					sb_norm_backward_ref_f64(&nm, dr, &dar, gd, sd, rows, T, nv, alpha, &err);
					double *dd = to_f64(dsp, n);
					double gmax = 0;
					for (long i = 0; i < n; i++)
						gmax = fabs(gd[i]) > gmax ? fabs(gd[i]) : gmax;
					double atb = atol_b * e * sc * gmax, rtb = rtol_b * e * sc;
					if (c->unrolled) {
						atb *= 30;
						rtb *= 30;
					}
					errs_add(&eb, dd, dr, n, atb, rtb, ctx);
					/* dalpha sums e^2-scaled terms over every key of the block: compare
					 * it in units of e^2 max(1,|s|) sum|dp| */
					double gs = 0;
					for (long i = 0; i < n; i++)
						gs += fabs(gd[i]);
					double un = e * e * sc * (gs > 0 ? gs : 1), dan = da / un, darn = dar / un;
					errs_add(&ea, &dan, &darn, 1, c->unrolled ? 3e-6 : 1e-7, 0, ctx);
					free(dd);
					free(s);
					free(p);
					free(g);
					free(ds);
					free(aux);
					free(sd);
					free(gd);
					free(pr);
					free(dr);
				}
		char name[200];
		for (int a = 0; a < 3; a++) {
			snprintf(name, sizeof name, "%s forward (%s) float vs double reference", c->label,
				 algo_name[a]);
			errs_report(&ef[a], name, atol_f, rtol_f);
		}
		snprintf(name, sizeof name, "%s backward float vs double reference", c->label);
		errs_report(&eb, name, atol_b, rtol_b);
		struct sb_norm nm = make(c, SB_MASK_MARGIN);
		if (nm.kind == SB_NORM_ENTMAX_BISECT || nm.kind == SB_NORM_ADAPTIVE) {
			snprintf(name, sizeof name, "%s dalpha/(e^2 max(1,|s|) sum|dp|) float vs double reference", c->label);
			errs_report(&ea, name, c->unrolled ? 3e-6 : 1e-7, 0);
		}
	}
}

int main(void)
{
	test_names();
	test_errors();
	test_against_ref();
	return sb_test_done();
}
