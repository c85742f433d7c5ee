/* test_attn_norm.c — the float normalisers against the double reference, plus
 * names, errors and the properties PROTOCOL A3 asks for.
 *
 * Finite differences on the reference: test_attn_norm_fd.c.
 * PyTorch golden outputs: test_attn_norm_golden.c.
 */
#include "test_attn_norm_util.h"
#include "attn_norm_impl.h"

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
	static const char *names[] = {"softmax",
	                              "topk_softmax_0125",
	                              "topk_softmax_025",
	                              "topk_softmax_05",
	                              "bottomk_softmax_0125",
	                              "bottomk_softmax_025",
	                              "sparsemax",
	                              "entmax15",
	                              "entmax_bisect",
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
	SB_CHECK(k65[0] == 9 && k65[1] == 17 && k65[2] == 33, "top-k counts at T=65: %d/%d/%d (want 9/17/33)", k65[0],
	         k65[1], k65[2]);
	SB_CHECK(k50[0] == 7 && k50[1] == 13 && k50[2] == 25, "top-k counts at T=50: %d/%d/%d (want 7/13/25)", k50[0],
	         k50[1], k50[2]);
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
		SB_CHECK(rc == SB_EDATA && err.code == SB_EDATA, "%s: n_valid = 0 is SB_EDATA (rc %d): %s", ms[m], rc,
		         err.msg);
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
	static const enum sb_norm_algo algos[] = {SB_NORM_ALGO_AUTO, SB_NORM_ALGO_PLAIN, SB_NORM_ALGO_ITERATE};
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
		 * ((max y - min y + 1)/2^18), hence its looser tolerance. The absolute
		 * terms shrink with 16/n_valid on long rows (see below). */
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
					/* p and ds shrink like 1/n on dense rows: scale the absolute
					 * term so a relative error there is still seen */
					double shrink = nv > 16 ? 16.0 / nv : 1;
					double at = atol_f * e * sc * shrink, rt = rtol_f * e * sc;
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
					double atb = atol_b * e * sc * gmax * shrink, rtb = rtol_b * e * sc;
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
			snprintf(name, sizeof name, "%s dalpha/(e^2 max(1,|s|) sum|dp|) float vs double reference",
			         c->label);
			errs_report(&ea, name, c->unrolled ? 3e-6 : 1e-7, 0);
		}
	}
}

/* ------------------------------------------------------ blocks of rows */

/* The AVX-512 general-alpha forward solves runs of up to 16 direct rows together
 * (lanes of one vector); a block must give every row exactly what the row alone
 * gives (bit for bit: the per-row arithmetic does not depend on the other
 * lanes), and stay within test_against_ref's tolerances of the double reference.
 * The backward solves such runs together too: the same bits per row again.
 * Rows cycle through the generators, so runs are broken by rows with -inf keys
 * (not direct), and groups of 16 end at every position. */
/* sb_norm_stats on blocks of many shapes (every length modulo the 16 lanes, rows
 * longer than a register, padded rows with n_valid < T, dense, sparse and one-hot
 * rows, values down to the 1e-12 clamp) against the plain double-precision loop:
 * counts exact, entropy within rel_tol, the same bits on a second call. */
static void test_stats_blocks(double rel_tol)
{
	static const int Ts[] = {1, 2, 7, 15, 16, 17, 31, 50, 65, 97, 513};
	uint64_t st = 0x5eed5eedULL;
	double worst = 0;
	char wdesc[96] = "";
	int bad = 0, nblocks = 0;
	for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
		int T = Ts[ti], rows = T < 40 ? T : 40;
		float *p = malloc(sizeof(float) * (size_t)rows * T);
		for (int kind = 0; kind < 4; kind++) /* dense, sparse, one-hot, tiny values */
			for (int nvk = 0; nvk < 2; nvk++) {
				int nv = nvk ? (T > 1 ? T - 1 - (T / 3) : 1) : T;
				for (int r = 0; r < rows; r++) {
					float *pr = p + (size_t)r * T;
					double sum = 0;
					for (int j = 0; j < T; j++) {
						st = st * 6364136223846793005ULL + 1442695040888963407ULL;
						double u = (double)(st >> 11) / 9007199254740992.0;
						double v = kind == 1 && u < 0.6 ? 0 : kind == 3 ? exp(-28 * u) : u;
						pr[j] = (float)v;
						sum += v;
					}
					if (kind == 2) {
						for (int j = 0; j < T; j++)
							pr[j] = 0;
						pr[r % T] = 1;
					} else if (sum > 0 && kind != 3) {
						for (int j = 0; j < T; j++)
							pr[j] = (float)(pr[j] / sum);
					}
				}
				double nz = 0, vt = 0, ent = 0, nz2 = 0, vt2 = 0, ent2 = 0;
				sb_norm_stats(p, rows, T, nv, &nz, &vt, &ent);
				sb_norm_stats(p, rows, T, nv, &nz2, &vt2, &ent2);
				double wnz = 0, went = 0;
				for (int r = 0; r < rows; r++)
					for (int j = 0; j < T; j++) {
						double v = p[(size_t)r * T + j];
						if (j < nv && v > 1e-7)
							wnz++;
						went -= v * log(v > 1e-12 ? v : 1e-12);
					}
				double rel = went > 0 ? fabs(ent - went) / went : fabs(ent);
				nblocks++;
				if (rel > worst) {
					worst = rel;
					snprintf(wdesc, sizeof wdesc, "T=%d kind %d n_valid %d", T, kind, nv);
				}
				if (nz != wnz || vt != (double)rows * nv || rel > rel_tol ||
				    memcmp(&ent, &ent2, sizeof ent) || nz2 != nz || vt2 != vt) {
					if (!bad)
						fprintf(stderr, "# stats T=%d kind %d n_valid %d: nonzero %g (want %g), valid %g (want %g), "
						        "entropy %.17g (want %.17g, rel %.2e), repeat %.17g\n",
						        T, kind, nv, nz, wnz, vt, (double)rows * nv, ent, went, rel, ent2);
					bad++;
				}
			}
		free(p);
	}
	/* the density's threshold is (double)p > 1e-7: the float nearest 1e-7 is above it
	 * and counts, the float below it does not; 17 keys, so both a full lane chunk and
	 * the scalar tail see them */
	float edge[17];
	for (int j = 0; j < 17; j++)
		edge[j] = j % 2 ? nextafterf(1e-7f, 0) : 1e-7f;
	double enz = 0;
	sb_norm_stats(edge, 1, 17, 17, &enz, NULL, NULL);
	SB_CHECK(enz == 9, "stats: 1e-7f counts as above 1e-7, the float below it does not (%g of 17 counted, want 9)", enz);
	SB_CHECK(!bad, "stats on %d blocks (T 1..513, dense/sparse/one-hot/tiny, padded rows): counts exact, entropy "
	         "within %.1e of double precision (worst %.2e at %s), repeatable; %d bad", nblocks, rel_tol, worst, wdesc, bad);
}

static void test_blocks(void)
{
	static const double alphas[] = {1.05, 1.13, 1.33, 1.499, 1.8, 1.95};
	static const int Ts[] = {1, 2, 7, 16, 17, 50, 97, 513};
	long n_rows = 0, n_diff = 0, n_blocks = 0, n_bdiff = 0;
	struct errs ef = {0};
	char worst[200] = "", bworst[200] = "";
	for (int ai = 0; ai < 6; ai++)
		for (int ti = 0; ti < 8; ti++)
			for (int mode = 0; mode < 3; mode++) {
				int T = Ts[ti], R = T > 100 ? 21 : 37, nv = mode == 0 ? T : (T * 3 + 4) / 5;
				if (mode && nv == T)
					continue;
				struct sb_norm nm;
				struct sb_err err = {0};
				sb_norm_parse(ai % 2 ? "headwise_adaptive_entmax" : "entmax_bisect", alphas[ai], &nm, &err);
				nm.mask = mode == 2 ? SB_MASK_EXCLUDE : SB_MASK_MARGIN;
				float alpha = (float)alphas[ai];
				long n = (long)R * T;
				float *s = malloc(n * sizeof *s), *pb = malloc(n * sizeof *pb), *pr = malloc(n * sizeof *pr);
				float *ab = malloc(R * SB_NORM_AUX * sizeof *ab), *ar = malloc(R * SB_NORM_AUX * sizeof *ar);
				double *ref = malloc(n * sizeof *ref);
				struct sb_rng rng;
				sb_rng_init(&rng, 77, SB_RNG_USER, (uint64_t)(ai * 1000 + ti * 10 + mode));
				for (int r = 0; r < R; r++) {
					int v = r % 9 == 8 ? V_NEGINF : r % 4 == 1 ? V_TIES : V_NORMAL;
					gen_row(&rng, s + (long)r * T, T, v);
					if (r % 3 == 2) /* dense rows: scores N(0, 0.3^2) */
						for (int j = 0; j < T; j++)
							s[(long)r * T + j] *= 0.15f;
				}
				int rc = sb_norm_forward(&nm, pb, ab, s, R, T, nv, alpha, &err);
				for (int r = 0; r < R && !rc; r++)
					rc = sb_norm_forward(&nm, pr + (long)r * T, ar + r * SB_NORM_AUX, s + (long)r * T, 1, T, nv,
					                     alpha, &err);
				/* backward of the block and of each row alone, from the block's forward */
				float *g = malloc(n * sizeof *g), *db = malloc(n * sizeof *db), *dr = malloc(n * sizeof *dr);
				for (long i = 0; i < n; i++)
					g[i] = (float)sb_rng_normal(&rng);
				double dab = 0, dar = 0;
				sb_norm_backward(&nm, db, &dab, g, pb, ab, s, R, T, nv, alpha);
				for (int r = 0; r < R; r++)
					sb_norm_backward(&nm, dr + (long)r * T, &dar, g + (long)r * T, pb + (long)r * T,
					                 ab + r * SB_NORM_AUX, s + (long)r * T, 1, T, nv, alpha);
				if (memcmp(db, dr, n * sizeof *db) || !(fabs(dab - dar) <= 1e-12 * (fabs(dar) + 1e-30))) {
					if (!n_bdiff++)
						snprintf(bworst, sizeof bworst, "alpha %g T=%d n_valid=%d: dalpha %.17g vs %.17g",
						         alphas[ai], T, nv, dab, dar);
				}
				n_blocks++;
				free(g);
				free(db);
				free(dr);
				double *sd = to_f64(s, n);
				rc = rc ? rc : sb_norm_forward_ref_f64(&nm, ref, sd, R, T, nv, alpha, &err);
				for (int r = 0; r < R; r++) {
					n_rows++;
					if (memcmp(pb + (long)r * T, pr + (long)r * T, T * sizeof *pb) ||
					    memcmp(ab + r * SB_NORM_AUX, ar + r * SB_NORM_AUX, SB_NORM_AUX * sizeof *ab)) {
						if (!n_diff++)
							snprintf(worst, sizeof worst, "alpha %g T=%d n_valid=%d row %d", alphas[ai], T,
							         nv, r);
					}
				}
				double mag = 0;
				for (long i = 0; i < n; i++)
					if (isfinite(s[i]) && fabs(s[i]) > mag)
						mag = fabs(s[i]);
				double sc = mag > 1 ? mag : 1, e = 1 / (alpha - 1.0), shrink = nv > 16 ? 16.0 / nv : 1;
				double *pd = to_f64(pb, n);
				char ctx[160];
				snprintf(ctx, sizeof ctx, "alpha %g T=%d n_valid=%d %s", alphas[ai], T, nv, mask_name[mode]);
				if (rc) {
					double bad = NAN;
					errs_add(&ef, &bad, &sc, 1, 0, 0, ctx);
				} else {
					errs_add(&ef, pd, ref, n, 2e-7 * e * sc * shrink, 2e-6 * e * sc, ctx);
				}
				free(pd);
				free(sd);
				free(s);
				free(pb);
				free(pr);
				free(ab);
				free(ar);
				free(ref);
			}
	SB_CHECK(n_diff == 0, "general alpha: a block of rows gives each row bit for bit what the row alone gives "
	                      "(%ld of %ld rows differ%s%s)",
	         n_diff, n_rows, n_diff ? "; first: " : "", worst);
	SB_CHECK(n_bdiff == 0, "general alpha: the backward of a block gives each row's ds bit for bit, and dalpha "
	                       "the sum of the rows' within 1e-12 (%ld of %ld blocks differ%s%s)",
	         n_bdiff, n_blocks, n_bdiff ? "; first: " : "", bworst);
	errs_report(&ef, "general alpha: blocks of 21-37 rows vs double reference", 2e-7, 2e-6);
}

/* ---------------------------------------------------------- properties */

static int fwd(const char *method, double alpha, int unrolled, enum sb_mask_mode mask, float *p, const float *s,
               int rows, int T, int nv)
{
	struct sb_norm nm;
	struct sb_err err = {0};
	sb_norm_parse(method, alpha, &nm, &err);
	nm.unrolled = unrolled;
	nm.mask = mask;
	float *aux = malloc((size_t)(rows ? rows : 1) * SB_NORM_AUX * sizeof *aux);
	int rc = sb_norm_forward(&nm, p, aux, s, rows, T, nv, (float)alpha, &err);
	free(aux);
	return rc;
}

static void test_topk_exact(void)
{
	/* ties at the k-th score go to the lower key index; exactly k kept, the rest exactly 0 */
	float s[5] = {1, 3, 3, 3, 2}, p[5];
	fwd("topk_softmax_05", 0, 0, SB_MASK_MARGIN, p, s, 1, 5, 4); /* k = 2 of the 4 valid */
	SB_CHECK(p[1] > 0 && p[2] > 0 && p[0] == 0 && p[3] == 0 && p[4] == 0 && p[1] == p[2],
	         "top-k: s=[1,3,3,3 | 2] k=2 keeps keys 1,2 (the lower-index ties): p = %g %g %g %g %g", p[0], p[1],
	         p[2], p[3], p[4]);
	float b[5] = {1, 1, 1, 0, 2};
	fwd("bottomk_softmax_025", 0, 0, SB_MASK_MARGIN, p, b, 1, 5, 5); /* k = 2 */
	SB_CHECK(p[3] > 0 && p[0] > 0 && p[1] == 0 && p[2] == 0 && p[4] == 0,
	         "bottom-k: s=[1,1,1,0,2] k=2 keeps keys 3 and 0: p = %g %g %g %g %g", p[0], p[1], p[2], p[3], p[4]);
	float z[4] = {-0.0f, 0.0f, 0.0f, -1}, pz[4];
	fwd("topk_softmax_05", 0, 0, SB_MASK_MARGIN, pz, z, 1, 4, 4);
	SB_CHECK(pz[0] == 0.5f && pz[1] == 0.5f && pz[2] == 0 && pz[3] == 0,
	         "top-k: -0 and +0 tie (keys 0 and 1 kept): p = %g %g %g %g", pz[0], pz[1], pz[2], pz[3]);
	/* random tied rows of every size: count the kept keys */
	static const char *ms[] = {"topk_softmax_0125", "topk_softmax_025", "topk_softmax_05", "bottomk_softmax_0125",
	                           "bottomk_softmax_025"};
	static const double rs[] = {0.125, 0.25, 0.5, 0.125, 0.25};
	int bad = 0, total = 0, leak = 0;
	char ctx[160] = "";
	for (int m = 0; m < 5; m++)
		for (int si = 0; si < N_SIZES; si++)
			for (int v = V_NORMAL; v <= V_EQUAL; v++) {
				int T = test_sizes[si];
				float *sr = malloc(T * sizeof *sr), *pr = malloc(T * sizeof *pr);
				struct sb_rng rng;
				sb_rng_init(&rng, 5, SB_RNG_USER, (uint64_t)(m * 1000 + si * 10 + v));
				gen_row(&rng, sr, T, v);
				fwd(ms[m], 0, 0, SB_MASK_MARGIN, pr, sr, 1, T, T);
				int kept = 0, k = sb_norm_topk_k(rs[m], T);
				for (int i = 0; i < T; i++) {
					kept += pr[i] > 0;
					leak += pr[i] != 0 && pr[i] < 1e-30f;
				}
				total++;
				if (kept != k && !(v == V_NORMAL && T == 4096)) { /* 4096 N(0,4) may underflow */
					bad++;
					snprintf(ctx, sizeof ctx, "%s T=%d %s kept %d want %d", ms[m], T,
					         variant_name[v], kept, k);
				}
				free(sr);
				free(pr);
			}
	SB_CHECK(bad == 0 && leak == 0,
	         "top-k/bottom-k keep exactly k keys on %d tied/equal/normal rows (%d wrong %s; %d leaks)", total, bad,
	         ctx, leak);
}

static double l1(const float *a, const float *b, int n)
{
	double d = 0;
	for (int i = 0; i < n; i++)
		d += fabs((double)a[i] - b[i]);
	return d;
}

static void test_limits(void)
{
	enum { T = 97, R = 4 };
	float s[R * T], a[R * T], b[R * T];
	struct sb_rng rng;
	sb_rng_init(&rng, 9, SB_RNG_USER, 0);
	for (int i = 0; i < R * T; i++) /* small scores: supports of tens of keys */
		s[i] = (float)(0.15 * sb_rng_normal(&rng));
	/* alpha = 2 is sparsemax and alpha = 1.5 is entmax15: same code path in float */
	fwd("entmax_bisect", 2.0, 0, SB_MASK_MARGIN, a, s, R, T, T);
	fwd("sparsemax", 0, 0, SB_MASK_MARGIN, b, s, R, T, T);
	int supp = 0;
	for (int i = 0; i < R * T; i++)
		supp += b[i] > 0;
	SB_CHECK(memcmp(a, b, sizeof a) == 0 && supp > 10 * R,
	         "entmax_bisect(alpha=2) == sparsemax bit for bit (float; %d of %d keys in the supports)", supp, R * T);
	fwd("entmax_bisect", 1.5, 0, SB_MASK_MARGIN, a, s, R, T, T);
	fwd("entmax15", 0, 0, SB_MASK_MARGIN, b, s, R, T, T);
	SB_CHECK(memcmp(a, b, sizeof a) == 0, "entmax_bisect(alpha=1.5) == entmax15 bit for bit (float)");
	/* and in the reference, bisection against the sort-based closed forms */
	double sd[T], pa[T], pb[T];
	for (int i = 0; i < T; i++)
		sd[i] = s[i];
	struct sb_norm nm;
	struct sb_err err = {0};
	sb_norm_entmax_row_f64(pa, sd, T, 2.0);
	sb_norm_parse("sparsemax", 0, &nm, &err);
	sb_norm_forward_ref_f64(&nm, pb, sd, 1, T, T, 0, &err);
	sb_check_close("reference: bisection at alpha=2 vs sort-based sparsemax", pa, pb, T, 1e-12, 0);
	sb_norm_entmax_row_f64(pa, sd, T, 1.5);
	sb_norm_parse("entmax15", 0, &nm, &err);
	sb_norm_forward_ref_f64(&nm, pb, sd, 1, T, T, 0, &err);
	sb_check_close("reference: bisection at alpha=1.5 vs entmax15 closed form", pa, pb, T, 1e-12, 0);
	/* alpha -> 1: entmax -> softmax, with an O(alpha-1) gap */
	static const double as[] = {1.5, 1.2, 1.1, 1.05, 1.01, 1.001, 1.0001};
	double dist[7], sm[T];
	for (int i = 0; i < T; i++)
		sd[i] = 10 * s[i];
	sb_norm_parse("softmax", 0, &nm, &err);
	sb_norm_forward_ref_f64(&nm, sm, sd, 1, T, T, 0, &err);
	int mono = 1;
	for (int k = 0; k < 7; k++) {
		sb_norm_entmax_row_f64(pa, sd, T, as[k]);
		dist[k] = 0;
		for (int i = 0; i < T; i++)
			dist[k] += fabs(pa[i] - sm[i]);
		if (k && !(dist[k] < dist[k - 1]))
			mono = 0;
	}
	SB_CHECK(mono && dist[5] < 5e-3 && dist[6] < 5e-4,
	         "reference: L1(entmax_alpha, softmax) falls with alpha -> 1: %.3g %.3g %.3g %.3g %.3g %.3g %.3g "
	         "(alpha 1.5 .. 1.0001; want < 5e-3 at 1.001, < 5e-4 at 1.0001)",
	         dist[0], dist[1], dist[2], dist[3], dist[4], dist[5], dist[6]);
	float s15[T];
	for (int i = 0; i < T; i++)
		s15[i] = 10 * s[i];
	fwd("softmax", 0, 0, SB_MASK_MARGIN, b, s15, 1, T, T);
	double dfl[4];
	static const double af[4] = {1.5, 1.2, 1.1, 1.05};
	for (int k = 0; k < 4; k++) {
		fwd("entmax_bisect", af[k], 0, SB_MASK_MARGIN, a, s15, 1, T, T);
		dfl[k] = l1(a, b, T);
	}
	SB_CHECK(dfl[1] < dfl[0] && dfl[2] < dfl[1] && dfl[3] < dfl[2] && dfl[3] < 0.3 * dfl[0],
	         "float: L1(entmax, softmax) at alpha 1.5/1.2/1.1/1.05 (the clamp) = %.3g %.3g %.3g %.3g, falling",
	         dfl[0], dfl[1], dfl[2], dfl[3]);
	/* the study's bisection against the exact answer: within its final bracket */
	fwd("entmax15", 0, 1, SB_MASK_MARGIN, a, s, R, T, T);
	fwd("entmax15", 0, 0, SB_MASK_MARGIN, b, s, R, T, T);
	double m = 0;
	for (int i = 0; i < R * T; i++)
		m = fmax(m, fabs((double)a[i] - b[i]));
	SB_CHECK(m < 1e-4, "entmax15: 18-iteration bisection vs exact, max |dp| = %.3g (< 1e-4)", m);
	fwd("entmax_bisect", 2.0, 1, SB_MASK_MARGIN, a, s, R, T, T);
	fwd("sparsemax", 0, 0, SB_MASK_MARGIN, b, s, R, T, T);
	m = 0;
	for (int i = 0; i < R * T; i++)
		m = fmax(m, fabs((double)a[i] - b[i]));
	SB_CHECK(m < 1e-4, "alpha=2: 18-iteration bisection vs sparsemax, max |dp| = %.3g (< 1e-4)", m);
}

static void test_masks(void)
{
	enum { T = 65, R = 3, NV = 40 };
	static const char *ms[] = {"softmax",  "topk_softmax_025", "sparsemax",
	                           "entmax15", "entmax_bisect",    "headwise_adaptive_entmax"};
	float s[R * T], pm[R * T], pe[R * T], g[R * T], dm[R * T], de[R * T], aux[R * SB_NORM_AUX];
	struct sb_rng rng;
	sb_rng_init(&rng, 10, SB_RNG_USER, 0);
	for (int i = 0; i < R * T; i++) {
		s[i] = (float)(2 * sb_rng_normal(&rng));
		g[i] = (float)sb_rng_normal(&rng);
	}
	for (int m = 0; m < 6; m++) {
		struct sb_norm nm;
		struct sb_err err = {0};
		sb_norm_parse(ms[m], 1.3, &nm, &err);
		nm.mask = SB_MASK_MARGIN;
		sb_norm_forward(&nm, pm, aux, s, R, T, NV, 1.3f, &err);
		sb_norm_backward(&nm, dm, NULL, g, pm, aux, s, R, T, NV, 1.3f);
		nm.mask = SB_MASK_EXCLUDE;
		sb_norm_forward(&nm, pe, aux, s, R, T, NV, 1.3f, &err);
		sb_norm_backward(&nm, de, NULL, g, pe, aux, s, R, T, NV, 1.3f);
		double padmass = 0, sum_err = 0;
		int pad_zero = 1, dpad_zero = 1;
		for (int r = 0; r < R; r++) {
			double sm = 0;
			for (int j = 0; j < T; j++)
				sm += pe[r * T + j];
			sum_err = fmax(sum_err, fabs(sm - 1));
			for (int j = NV; j < T; j++) {
				padmass = fmax(padmass, pm[r * T + j]);
				pad_zero &= pe[r * T + j] == 0;
				dpad_zero &= de[r * T + j] == 0 && dm[r * T + j] == 0;
			}
		}
		SB_CHECK(pad_zero && dpad_zero && sum_err < 1e-6,
		         "%s exclude: padded keys get p = 0 and ds = 0 exactly, rows sum to 1 (|sum-1| %.2g)", ms[m],
		         sum_err);
		SB_CHECK(padmass <= 1e-6, "%s margin: padded keys get mass <= 1e-6 (the study's self-check): %.3g",
		         ms[m], padmass);
		if (m >= 2) /* a margin of 60 is outside every support: identical results */
			SB_CHECK(memcmp(pm, pe, sizeof pm) == 0 && memcmp(dm, de, sizeof dm) == 0,
			         "%s: margin and exclude give identical p and ds", ms[m]);
	}
	/* -inf keys: excluded exactly, the same as removing them */
	float si[6] = {0.5f, -INFINITY, 2, -INFINITY, 1, -1}, sr[4] = {0.5f, 2, 1, -1}, pi[6], prr[4];
	for (int m = 0; m < 6; m++) {
		fwd(ms[m], 1.3, 0, SB_MASK_MARGIN, pi, si, 1, 6, 6);
		fwd(ms[m], 1.3, 0, SB_MASK_MARGIN, prr, sr, 1, 4, 4);
		int ok = pi[1] == 0 && pi[3] == 0;
		if (m != 1) /* top-k's k counts n_valid (6 -> 2 kept, of 4 finite -> 1) */
			ok = ok && pi[0] == prr[0] && pi[2] == prr[1] && pi[4] == prr[2] && pi[5] == prr[3];
		SB_CHECK(ok, "%s: -inf keys get p = 0 and the rest equals the row without them: %g %g %g %g %g %g",
		         ms[m], pi[0], pi[1], pi[2], pi[3], pi[4], pi[5]);
	}
	/* margin gradient goes to the valid minimum (visible in the study's bisection,
	 * whose lower bracket is min y - 1 and so includes the padded score) */
	float sm[5] = {1.0f, 0.2f, 2.0f, 9, 9}, pmm[5], gm[5] = {1, -1, 0.5f, 3, 3}, dsm[5];
	struct sb_norm nm;
	struct sb_err err = {0};
	sb_norm_parse("entmax15", 0, &nm, &err);
	nm.unrolled = 1;
	sb_norm_forward(&nm, pmm, aux, sm, 1, 5, 3, 0, &err);
	sb_norm_backward(&nm, dsm, NULL, gm, pmm, aux, sm, 1, 5, 3, 0);
	double dsd[5], sdd[5] = {1.0, 0.2, 2.0, 9, 9}, gdd[5] = {1, -1, 0.5, 3, 3};
	sb_norm_backward_ref_f64(&nm, dsd, NULL, gdd, sdd, 1, 5, 3, 0, &err);
	SB_CHECK(dsm[3] == 0 && dsm[4] == 0 && fabs(dsm[1] - dsd[1]) < 1e-6 && dsd[1] != 0,
	         "unrolled margin: padded keys' gradient is routed to the valid minimum (key 1): %g vs ref %g; "
	         "padded ds %g %g",
	         dsm[1], dsd[1], dsm[3], dsm[4]);
}

static void test_misc(void)
{
	enum { T = 97, R = 5 };
	float s[R * T], p1[R * T], p2[R * T], g[R * T], d1[R * T], d2[R * T], aux[R * SB_NORM_AUX];
	struct sb_rng rng;
	sb_rng_init(&rng, 11, SB_RNG_USER, 0);
	for (int i = 0; i < R * T; i++) {
		s[i] = (float)(2 * sb_rng_normal(&rng));
		g[i] = (float)sb_rng_normal(&rng);
	}
	struct sb_norm nm;
	struct sb_err err = {0};
	/* backward without aux recomputes the threshold: the same gradient */
	sb_norm_parse("headwise_adaptive_entmax", 0, &nm, &err);
	sb_norm_forward(&nm, p1, aux, s, R, T, T, 1.37f, &err);
	double da1 = 0, da2 = 0;
	sb_norm_backward(&nm, d1, &da1, g, p1, aux, s, R, T, T, 1.37f);
	sb_norm_backward(&nm, d2, &da2, g, p1, NULL, s, R, T, T, 1.37f);
	SB_CHECK(memcmp(d1, d2, sizeof d1) == 0 && da1 == da2, "HAE backward with aux == NULL equals with aux");
	/* determinism and shift invariance */
	static const char *ms[] = {"softmax", "topk_softmax_025", "sparsemax", "entmax15", "entmax_bisect"};
	for (int m = 0; m < 5; m++) {
		fwd(ms[m], 1.3, 0, SB_MASK_MARGIN, p1, s, R, T, T);
		fwd(ms[m], 1.3, 0, SB_MASK_MARGIN, p2, s, R, T, T);
		int same = memcmp(p1, p2, sizeof p1) == 0;
		float sh[R * T];
		for (int i = 0; i < R * T; i++)
			sh[i] = s[i] + 3.0f;
		fwd(ms[m], 1.3, 0, SB_MASK_MARGIN, p2, sh, R, T, T);
		double mx = 0;
		for (int i = 0; i < R * T; i++)
			mx = fmax(mx, fabs((double)p1[i] - p2[i]));
		/* s + 3 is rounded to float: |ds| <= 2.4e-7 per score, times (alpha-1)e = 1 */
		SB_CHECK(same && mx < 2e-6, "%s: deterministic, and p(s + 3) = p(s) within %.3g (< 2e-6)", ms[m], mx);
	}
	/* ITERATE (Michelot / Newton / bisection select) vs PLAIN (sorts) directly, LM-size rows */
	static const char *it[] = {"topk_softmax_0125", "bottomk_softmax_025", "sparsemax", "entmax15"};
	enum { TL = 4096 };
	float *sl = malloc(2 * TL * sizeof *sl), *pa = malloc(2 * TL * sizeof *pa), *pb = malloc(2 * TL * sizeof *pb),
	      al[2 * SB_NORM_AUX];
	for (int i = 0; i < 2 * TL; i++) /* row 0: N(0, 0.03^2), support of thousands; row 1: N(0, 3^2) */
		sl[i] = (float)((i < TL ? 0.03 : 3) * sb_rng_normal(&rng));
	for (int m = 0; m < 4; m++) {
		sb_norm_parse(it[m], 0, &nm, &err);
		sb_norm_forward_algo(&nm, SB_NORM_ALGO_ITERATE, pa, al, sl, 2, TL, TL, 0, &err);
		sb_norm_forward_algo(&nm, SB_NORM_ALGO_PLAIN, pb, al, sl, 2, TL, TL, 0, &err);
		char name[120];
		snprintf(name, sizeof name, "%s T=4096: O(T) path vs sort-based path", it[m]);
		sb_check_closef(name, pa, pb, 2 * TL, 2e-7, 2e-6);
	}
	free(sl);
	free(pa);
	free(pb);
	/* stats: density over valid keys, entropy over the row. The entropy's terms use the
	 * float logarithm (lib/attn_norm.c entropy_terms): each term -p log p within
	 * 2.08e-7 relative of the double-precision term (log_pos against libm's log over
	 * every float in [1e-12, 1]), all terms >= 0, so the sum is within ENT_REL of the
	 * double-precision entropy (the bound plus room for the double sums' rounding). */
	const double ENT_REL = 2.5e-7;
	float ps[2 * 4] = {0.5f, 0.5f, 0, 0, 1, 0, 5e-8f, 0};
	double nz = 0, vt = 0, ent = 0;
	sb_norm_stats(ps, 2, 4, 3, &nz, &vt, &ent);
	double want_ent = -(2 * 0.5 * log(0.5) + 5e-8 * log(5e-8));
	SB_CHECK(nz == 3 && vt == 6 && fabs(ent - want_ent) <= ENT_REL * want_ent,
	         "stats: nonzero %g (want 3), valid %g (want 6), entropy %.12g (want %.12g, rel err %.2e)", nz, vt, ent,
	         want_ent, fabs(ent - want_ent) / want_ent);
	test_stats_blocks(ENT_REL);
}

#ifdef SB_NORM_AVX512
/* the softmax kernels for runs of up to 16 rows (what sb_norm_forward / _backward run on
 * direct softmax rows) against the one-row kernels, bit for bit: probabilities, aux and
 * the score gradient (also in place, as the attention backward calls it), and the
 * finiteness mask against sbv_row_finite */
static void test_softmax_rows(void)
{
	static const int ns[] = {1, 2, 15, 16, 17, 31, 32, 33, 64, 65, 100};
	enum { LD = 104 };
	float s[16 * LD], g[16 * LD], p1[16 * LD], p2[16 * LD], d1[16 * LD], d2[16 * LD];
	float a1[16 * 4], a2[16 * 4];
	struct sb_rng rng;
	sb_rng_init(&rng, 23, SB_RNG_USER, 0);
	int bad = 0, masks = 0, cases = 0;
	for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
		for (int rows = 1; rows <= 16; rows++)
			for (int v = 0; v < 3; v++) {
				int n = ns[ni];
				double sc = v == 0 ? 2 : v == 1 ? 30 : 1e-3; /* spread of the scores */
				for (int i = 0; i < 16 * LD; i++) {
					s[i] = (float)(sc * sb_rng_normal(&rng));
					g[i] = (float)sb_rng_normal(&rng);
				}
				memset(p1, 0, sizeof p1), memset(p2, 0, sizeof p2), memset(a1, 0, sizeof a1);
				memset(a2, 0, sizeof a2);
				for (int r = 0; r < rows; r++) {
					sbv_softmax(p1 + r * LD, s + r * LD, n, a1 + 4 * r);
					sbv_softmax_bwd(d1 + r * LD, p1 + r * LD, g + r * LD, n);
				}
				sbv_softmax_rows(p2, s, rows, LD, n, a2);
				memcpy(d2, g, sizeof d2);
				sbv_softmax_bwd_rows(d2, p2, d2, rows, LD, n); /* in place */
				for (int r = 0; r < rows; r++)
					bad += memcmp(p1 + r * LD, p2 + r * LD, n * 4) != 0 ||
					       memcmp(d1 + r * LD, d2 + r * LD, n * 4) != 0 || memcmp(a1 + 4 * r, a2 + 4 * r, 8) != 0;
				/* finiteness: a few non-finite entries */
				if (v == 0 && rows > 2) {
					s[1 * LD + n - 1] = INFINITY;
					s[(rows - 1) * LD] = NAN;
				}
				unsigned m = sbv_rows_finite(s, rows, LD, n), want = 0;
				for (int r = 0; r < rows; r++) {
					float mn;
					want |= (unsigned)sbv_row_finite(s + r * LD, n, &mn) << r;
				}
				masks += m != want;
				cases++;
			}
	SB_CHECK(!bad && !masks, "softmax over runs of 1-16 rows (n 1-100): probabilities, aux, gradient (in place) "
	                         "bit for bit the one-row kernels', finiteness masks equal (%d rows differ in %d cases, %d "
	                         "masks)", bad, cases, masks);
}
#endif

/* General alpha converges in few passes: Halley from Jensen's bound (both the
 * portable and the AVX-512 kernel) takes about 3 on rows like attention's, where
 * Newton from tau = -1 took 4 to 5 (aux[2] counts the passes). A bound of 3.5 on the
 * mean keeps the cheaper iteration from being lost unnoticed; the exactness of each
 * row is test_against_ref's. */
#if defined(SB_NORM_AVX512) || defined(SB_NORM_AVX2)
/* The vector general-alpha kernels (sbv_entmax_rows / sbv_entmax_bwd_rows: AVX-512, or
 * AVX2 on an x86-64-v3 build) are what sb_norm_forward / sb_norm_backward run on such
 * rows: the library's results equal the kernel's, bit for bit, whatever the number of
 * rows solved together (1 to 16, tails of 1 to 15 lanes), for alpha near both clamps,
 * score spreads from 1e-3 to 30; and every row sums to 1. A build that fell back to the
 * portable kernels would differ in low bits here. */
static void test_entmax_rows_kernel(void)
{
	static const int ns[] = {1, 2, 7, 8, 9, 15, 16, 17, 50, 65, 97};
	static const float alphas[] = {1.05f, 1.13f, 1.37f, 1.8f, 1.95f};
	enum { LD = 100, R = 16 };
	static float s[R * LD], g[R * LD], pk[R * LD], pl[R * LD], dk[R * LD], dl[R * LD], ws[64 * LD];
	float ak[R * 4], al[R * 4];
	struct sb_rng rng;
	sb_rng_init(&rng, 31, SB_RNG_USER, 0);
	long cases = 0, bad = 0;
	double worst_sum = 0;
	char first[200] = "";
	for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
		for (int a = 0; a < 5; a++)
			for (int v = 0; v < 3; v++) {
				int n = ns[ni], rows = 1 + (int)(ni * 5 + a * 3 + v) % R;
				double sc = v == 0 ? 1 : v == 1 ? 30 : 1e-3;
				for (int i = 0; i < R * LD; i++) {
					s[i] = (float)(sc * sb_rng_normal(&rng));
					g[i] = (float)sb_rng_normal(&rng);
				}
				struct sb_norm nm;
				struct sb_err err = {0};
				sb_norm_parse("headwise_adaptive_entmax", alphas[a], &nm, &err);
				float am1 = alphas[a] - 1.0f;
				memset(pk, 0, sizeof pk), memset(pl, 0, sizeof pl), memset(dk, 0, sizeof dk), memset(dl, 0, sizeof dl);
				sbv_entmax_rows(pk, s, rows, LD, n, am1, ak, ws, sizeof ws / sizeof *ws);
				double dak = sbv_entmax_bwd_rows(dk, pk, g, s, ak, rows, LD, n, am1, 1, ws, sizeof ws / sizeof *ws);
				double dal = 0;
				int rc = 0;
				for (int r = 0; r < rows && !rc; r++)
					rc = sb_norm_forward(&nm, pl + r * LD, al + 4 * r, s + r * LD, 1, n, n, alphas[a], &err);
				for (int r = 0; r < rows; r++)
					sb_norm_backward(&nm, dl + r * LD, &dal, g + r * LD, pl + r * LD, al + 4 * r, s + r * LD, 1,
					                 n, n, alphas[a]);
				for (int r = 0; r < rows; r++) {
					double sum = 0;
					for (int j = 0; j < n; j++)
						sum += pk[r * LD + j];
					worst_sum = fmax(worst_sum, fabs(sum - 1));
				}
				cases++;
				/* the per-row d alpha sums are added in row order on both sides */
				if (rc || memcmp(pk, pl, sizeof pk) || memcmp(ak, al, 4 * rows * sizeof *ak) ||
				    memcmp(dk, dl, sizeof dk) || dak != dal) {
					if (!bad++)
						snprintf(first, sizeof first, "n=%d rows=%d alpha %g spread %g: d alpha %.9g vs %.9g",
						         n, rows, alphas[a], sc, dak, dal);
				}
			}
	SB_CHECK(bad == 0 && worst_sum < 1e-5,
	         "general-alpha rows kernel == sb_norm_forward/backward bit for bit in %ld/%ld cases (first "
	         "difference: %s); rows sum to 1 within %.2g",
	         cases - bad, cases, bad ? first : "none", worst_sum);
}
#endif

/* general alpha at huge scores: y = x (alpha-1) - max (alpha-1) must be exactly 0 at the max key
 * (a product then a difference, never fused: an FMA left the rounding error of m (alpha-1),
 * -9e20 at 2e30, and no key above the threshold's bound, p = 0 or NaN) */
static void test_entmax_huge(void)
{
	static const float alphas[] = {1.05f, 1.5000001f, 1.95f};
	static const char *methods[] = {"headwise_adaptive_entmax", "entmax_bisect"};
	float x[64], p[64], aux[4];
	int bad = 0, cases = 0;
	char first[200] = "";
	for (int mi = 0; mi < 2; mi++)
		for (int a = 0; a < 3; a++)
			for (int v = 0; v < 4; v++) {
				int n = v == 0 ? 1 : v == 1 ? 15 : v == 2 ? 16 : 33, best = 0;
				for (int i = 0; i < n; i++)
					x[i] = v == 0 ? 2e30f : v == 1 ? (i ? 1e30f : 2e30f) : v == 2 ? -1e30f : 1e20f * (float)(i % 7);
				for (int i = 1; i < n; i++)
					best = x[i] > x[best] ? i : best;
				struct sb_norm nm;
				struct sb_err e = {0};
				sb_norm_parse(methods[mi], alphas[a], &nm, &e);
				int rc = sb_norm_forward(&nm, p, aux, x, 1, n, n, alphas[a], &e);
				double sum = 0;
				int finite = 1;
				for (int i = 0; i < n; i++) {
					sum += p[i];
					finite &= isfinite(p[i]);
				}
				cases++;
				if (rc || !finite || fabs(sum - 1) > 1e-5 || !(p[best] > 0)) {
					if (!bad++)
						snprintf(first, sizeof first, "%s alpha %.9g row %d (n %d): sum %g, p[max] %g, rc %d",
						         methods[mi], alphas[a], v, n, sum, p[best], rc);
				}
			}
	SB_CHECK(bad == 0, "general alpha at scores of 1e20-2e30: p finite, sums to 1, the max key kept, in %d/%d cases "
	                   "(first wrong: %s)",
	         cases - bad, cases, bad ? first : "none");
}

/* constant rows (an untrained model's, padded queries'): every kernel stops at the noise of
 * its exp and log instead of oscillating to the 100-pass cap (a step no smaller than the last
 * within 16 ulps ends the solve: lib/entmax_step.h, and the vector kernels' gsolve); p is the
 * uniform 1/n */
static void test_entmax_constant_rows(void)
{
	int capped = 0, rows = 0;
	double passes = 0, worst = 0;
	float x[512], p[512], aux[4];
	for (int n = 1; n <= 512; n += n < 16 ? 1 : n < 64 ? 7 : 41)
		for (int ai = 0; ai < 60; ai++) {
			float alpha = 1.05f + 0.95f * (float)ai / 59.0f;
			if (alpha == 1.5f || alpha == 2.0f)
				continue;
			for (int i = 0; i < n; i++)
				x[i] = 1.0f;
			struct sb_norm nm;
			struct sb_err e = {0};
			sb_norm_parse("headwise_adaptive_entmax", alpha, &nm, &e);
			sb_norm_forward(&nm, p, aux, x, 1, n, n, alpha, &e);
			for (int i = 0; i < n; i++)
				worst = fmax(worst, fabs(p[i] - 1.0 / n));
			rows++;
			passes += aux[2];
			capped += aux[2] >= 100;
		}
	SB_CHECK(capped == 0 && worst < 1e-7 && passes / rows < 4,
	         "constant rows (n 1-512, 60 alphas): %d of %d took the 100-pass cap, %.2f passes on average (bound 4), "
	         "max |p - 1/n| %.2g",
	         capped, rows, passes / rows, worst);
}

static void test_entmax_passes(void)
{
	struct sb_rng r;
	sb_rng_init(&r, 77, 0, 0);
	enum { T = 50, R = 50 };
	static const double scale[] = {0.1, 0.3, 1.0};
	static const float alphas[] = {1.2f, 1.5001f, 1.8f};
	for (int a = 0; a < 3; a++)
		for (int algo = SB_NORM_ALGO_AUTO; algo <= SB_NORM_ALGO_ITERATE; algo += 2) {
			struct sb_norm nm;
			struct sb_err err;
			sb_norm_parse("headwise_adaptive_entmax", 1.5, &nm, &err);
			double passes = 0, worst = 0, sum_err = 0;
			int rows = 0, rc = 0;
			for (int sc = 0; sc < 3; sc++)
				for (int blk = 0; blk < 4; blk++) {
					float s[R * T], p[R * T], aux[R * SB_NORM_AUX];
					for (int i = 0; i < R * T; i++)
						s[i] = (float)(scale[sc] * sb_rng_normal(&r));
					rc |= sb_norm_forward_algo(&nm, algo, p, aux, s, R, T, T, alphas[a], &err);
					for (int q = 0; q < R; q++) {
						double it = aux[q * SB_NORM_AUX + 2], tot = 0;
						passes += it;
						worst = it > worst ? it : worst;
						for (int i = 0; i < T; i++)
							tot += p[q * T + i];
						sum_err = fabs(tot - 1) > sum_err ? fabs(tot - 1) : sum_err;
						rows++;
					}
				}
			SB_CHECK(rc == 0 && passes / rows <= 3.5 && sum_err < 1e-5,
			         "alpha %g, %s: %.2f passes per row on average (bound 3.5), at most %g, over %d Gaussian rows "
			         "of %d keys (score sd 0.1, 0.3, 1); rows sum to 1 within %.2g",
			         alphas[a], algo == SB_NORM_ALGO_AUTO ? "auto" : "iterate", passes / rows, worst, rows, T,
			         sum_err);
		}
}

int main(void)
{
	test_names();
	test_errors();
	test_topk_exact();
	test_limits();
	test_masks();
	test_misc();
#ifdef SB_NORM_AVX512
	test_softmax_rows();
#endif
#if defined(SB_NORM_AVX512) || defined(SB_NORM_AVX2)
	test_entmax_rows_kernel();
#endif
	test_against_ref();
	test_blocks();
	test_entmax_passes();
	test_entmax_huge();
	test_entmax_constant_rows();
	return sb_test_done();
}
