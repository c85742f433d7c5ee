/* test_cuda_host.c — the CUDA backend's row kernels, compiled for the host
 * (lib/cuda/host_cuda.cu: the same templates as the device code, with the 16
 * lanes of a half-warp run as a loop), against the CPU backend and
 * lib/attn_norm.c. Needs no GPU and no driver; in a CUDA=0 build it is skipped.
 *
 * What "same" means here. The device code was written to do the CPU's float
 * operations in the CPU's order (lanes.cuh) and was bit-identical to the CPU
 * backend and attn_norm.c as of the merge base 88564bd (2957 checks, all
 * bit-identical). The CPU side has since gained AVX-512 paths (other exp/pow
 * forms, other orders), so the checks are now tolerances on max |a-b|/(1+|b|)
 * (p 1e-6, tau and ds 1e-5, d alpha 1e-4 relative; LN, GELU 1e-6), and every
 * line still reports how many elements differ in their bits. Cases:
 *   - every normaliser's forward (p and aux) and backward (ds and d alpha), for
 *     every method, both mask modes, the exact and the study's unrolled entmax,
 *     many row lengths (1, primes, multiples of 16 and not) and n_valid, with
 *     ties (quantised scores) and without;
 *   - residual + layer norm forward (with dropout) and backward (dx, dy, dw, db);
 *   - GELU and its derivative, the dropout masks at unaligned offsets, Philox,
 *     AdamW over several steps.
 * Rows with -inf among the valid keys are normalised in another order on the
 * GPU (norm_rows.cuh): there the check is a tolerance (max abs 1e-6) and exact
 * zeros for the excluded keys. NaN rows must be NaN at the same places.
 * Where the CPU library was built without FMA (__FMA__ undefined) the layer
 * norm and GELU comparisons fall back to a tolerance of 1e-6 relative.
 *
 * test_cuda_host_portable.c compiles this file against the portable kernels
 * (lib/attn_norm.c with SB_NORM_PORTABLE, what the GPU bundle's x86-64-v3 build runs,
 * and what the CUDA kernels repeat operation by operation): there the normaliser
 * cases must agree bit for bit (p, all of aux, ds, d alpha), the -inf rows aside.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "attn_norm.h"
#include "backend.h"
#include "rng.h"

#ifndef SB_HAVE_CUDA
int main(void)
{
	SB_CHECK(1, "skipped: built without the CUDA backend (make CUDA=1 builds and tests it)");
	return sb_test_done();
}
#else
#include "cuda/backend_cuda.h"

#ifdef CUDA_HOST_EXACT
#define EXACT_TAG "bit for bit vs the portable kernels: "
#else
#define EXACT_TAG ""
#endif

#if defined(__FMA__) || defined(__AVX512F__)
#define CPU_FMA 1
#else
#define CPU_FMA 0
#endif

static uint64_t rs = 12345;
static double urand(void)
{
	rs = rs * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(rs >> 11) / 9007199254740992.0;
}
static float nrand(void)
{
	double u1 = 1.0 - urand(), u2 = urand();
	return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* number of elements whose bits differ (NaN == NaN) and the max of |a-b|/(1+|b|) */
static size_t diff_bits(const float *a, const float *b, size_t n, double *maxabs)
{
	size_t bad = 0;
	double m = 0;
	for (size_t i = 0; i < n; i++) {
		if (isnan(a[i]) && isnan(b[i]))
			continue;
		if (memcmp(&a[i], &b[i], sizeof(float))) {
			bad++;
			double d = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
			if (!(d <= m))
				m = d;
		}
	}
	*maxabs = m;
	return bad;
}

struct meth {
	const char *name;
	double alpha;
	int unrolled;
};

static const struct meth meths[] = {
	{"softmax", 1.5, 0},
	{"topk_softmax_0125", 1.5, 0},
	{"topk_softmax_025", 1.5, 0},
	{"topk_softmax_05", 1.5, 0},
	{"bottomk_softmax_0125", 1.5, 0},
	{"bottomk_softmax_025", 1.5, 0},
	{"sparsemax", 1.5, 0},
	{"entmax15", 1.5, 0},
	{"entmax_bisect", 1.05, 0},
	{"entmax_bisect", 1.3, 0},
	{"entmax_bisect", 1.5, 0},
	{"entmax_bisect", 1.77, 0},
	{"entmax_bisect", 2.0, 0},
	{"headwise_adaptive_entmax", 1.23, 0},
	{"headwise_adaptive_entmax", 1.95, 0},
	{"entmax15", 1.5, 1},
	{"entmax_bisect", 1.3, 1},
	{"headwise_adaptive_entmax", 1.62, 1},
	{"headwise_adaptive_entmax", 2.0, 1},
};

/* kind: 0 gaussian scores, 1 quantised (ties), 2 large scale, 3 with -inf keys, 4 with a NaN */
static void fill_scores(float *s, int n, int kind)
{
	for (int i = 0; i < n; i++) {
		float v = nrand() * (kind == 2 ? 8.0f : 1.5f);
		if (kind == 1)
			v = (float)floor(v * 2.0) / 2.0f;
		s[i] = v;
	}
	if (kind == 3)
		for (int i = 0; i < n; i++)
			if (urand() < 0.2)
				s[i] = -INFINITY;
	if (kind == 4)
		s[(int)(urand() * n)] = NAN;
}

static int norm_case(const struct meth *me, enum sb_mask_mode mask, int T, int n_valid, int kind, int rows)
{
	struct sb_err e = {0};
	struct sb_norm nm;
	if (sb_norm_parse(me->name, me->alpha, &nm, &e))
		return SB_CHECK(0, "parse %s: %s", me->name, e.msg);
	nm.mask = mask;
	nm.unrolled = me->unrolled;
	float alpha = (float)me->alpha;
	size_t n = (size_t)rows * T;
	float *s = malloc(n * sizeof *s), *p1 = malloc(n * sizeof *s), *p2 = malloc(n * sizeof *s);
	float *a1 = calloc((size_t)rows * 4, sizeof *s), *a2 = calloc((size_t)rows * 4, sizeof *s);
	float *g = malloc(n * sizeof *s), *d1 = malloc(n * sizeof *s), *d2 = malloc(n * sizeof *s);
	for (int r = 0; r < rows; r++) {
		fill_scores(s + (size_t)r * T, T, kind);
		/* keep at least one finite valid score in -inf rows */
		if (kind == 3)
			s[(size_t)r * T] = nrand();
	}
	for (size_t i = 0; i < n; i++)
		g[i] = nrand();
	struct sb_err e1 = {0}, e2 = {0};
	int rc1 = sb_norm_forward(&nm, p1, a1, s, rows, T, n_valid, alpha, &e1);
	int rc2 = sb_cuda_host_norm_forward(&nm, p2, a2, s, rows, T, n_valid, alpha, &e2);
	char label[160];
	snprintf(label, sizeof label, "%s%s a=%.3g %s T=%d nv=%d %s", me->name, me->unrolled ? "(unrolled)" : "",
		 me->alpha, mask == SB_MASK_MARGIN ? "margin" : "exclude", T, n_valid,
		 (const char *[]){"gauss", "ties", "wide", "-inf", "nan"}[kind]);
	int ok = 1;
	if (rc1 || rc2) {
		ok = rc1 == rc2;
		SB_CHECK(ok, "%s: forward status cpu %d (%s) cuda %d (%s)", label, rc1, e1.msg, rc2, e2.msg);
		goto out;
	}
	double dp, da_, dd;
	size_t bp = diff_bits(p1, p2, n, &dp), ba = diff_bits(a1, a2, (size_t)rows * 4, &da_);
	double dalpha1 = 0, dalpha2 = 0;
	sb_norm_backward(&nm, d1, &dalpha1, g, p1, a1, s, rows, T, n_valid, alpha);
	sb_cuda_host_norm_backward(&nm, d2, &dalpha2, g, p1, a1, s, rows, T, n_valid, alpha);
	size_t bd = diff_bits(d1, d2, n, &dd);
	int same_alpha = (isnan(dalpha1) && isnan(dalpha2)) || memcmp(&dalpha1, &dalpha2, sizeof(double)) == 0;
	if (kind == 3) { /* other summation order: tolerance, and exact zeros at -inf keys */
		int zeros = 1;
		for (size_t i = 0; i < n; i++)
			if ((i % T) < (size_t)n_valid && s[i] == -INFINITY && (p2[i] != 0.0f || d2[i] != 0.0f))
				zeros = 0;
		/* d alpha carries e^2 = 1/(alpha-1)^2 (400 at alpha 1.05): its rounding scales with it,
		 * as in the branch below (the CPU's AVX-512 order and this port's differ) */
		double am1 = me->alpha < 1.05 ? 0.05 : me->alpha - 1, e2 = 1.0 / (am1 * am1);
		double tol_a = (fabs(dalpha1) * 1e-4 + 1e-5) * (e2 > 4 ? e2 / 4 : 1);
		ok = zeros && dp <= 1e-6 && dd <= 1e-5 * (1 + fabs(dd)) && fabs(dalpha1 - dalpha2) <= tol_a;
		SB_CHECK(ok, "%s: p max_abs %.3g, ds max_abs %.3g, dalpha %.9g vs %.9g, excluded keys zero %d", label, dp,
			 dd, dalpha1, dalpha2, zeros);
	} else {
		/* tau (aux[0]) is what the backward reads; aux[1..3] are diagnostics */
		double dtau = 0;
		for (int r = 0; r < rows; r++) {
			double t = fabs((double)a1[r * 4] - a2[r * 4]) / (1.0 + fabs((double)a1[r * 4]));
			if (!(t <= dtau) && !(isnan(a1[r * 4]) && isnan(a2[r * 4])))
				dtau = t;
		}
		/* d alpha carries e^2 = 1/(alpha-1)^2 (400 at alpha 1.05): its rounding scales with it */
		double am1 = me->alpha < 1.05 ? 0.05 : me->alpha - 1, e2 = 1.0 / (am1 * am1);
		double tol_a = (fabs(dalpha1) * 1e-4 + 2e-5) * (e2 > 4 ? e2 / 4 : 1);
		int alpha_ok = same_alpha || fabs(dalpha1 - dalpha2) <= tol_a;
		/* top-k / bottom-k: aux[1] is the largest kept score on both (lib/attn_norm.h),
		 * not the row's maximum: bit for bit (a bottom-k row's maximum is not kept) */
		size_t bk1 = 0;
		if (nm.kind == SB_NORM_TOPK || nm.kind == SB_NORM_BOTTOMK)
			for (int r = 0; r < rows; r++)
				if (memcmp(&a1[r * 4 + 1], &a2[r * 4 + 1], sizeof(float)) &&
				    !(isnan(a1[r * 4 + 1]) && isnan(a2[r * 4 + 1])))
					bk1++;
		ok = dp <= 1e-6 && dd <= 1e-5 && dtau <= 1e-5 && alpha_ok && bk1 == 0;
#ifdef CUDA_HOST_EXACT
		ok = bp == 0 && ba == 0 && bd == 0 && same_alpha;
#endif
		SB_CHECK(ok,
			 "%s%s: p %zu differ (max %.3g, tol 1e-6), aux %zu (tau %.3g, tol 1e-5; top-k largest kept "
			 "score: %zu rows differ), ds %zu (%.3g, tol 1e-5), dalpha %.17g vs %.17g",
			 EXACT_TAG, label, bp, dp, ba, dtau, bk1, bd, dd, dalpha1, dalpha2);
	}
out:
	free(s);
	free(p1);
	free(p2);
	free(a1);
	free(a2);
	free(g);
	free(d1);
	free(d2);
	return ok;
}

static void test_norms(int global)
{
	static const int Ts_sh[] = {1, 2, 7, 16, 17, 33, 50, 65, 97, 128, 200, 300, 512};
	/* the global-memory kernels' layout: more lanes than T needs must give the same bits */
	static const int Ts_gl[] = {1, 17, 50, 97, 129, 200, 257, 512};
	const int *Ts = global ? Ts_gl : Ts_sh;
	size_t nT = global ? sizeof Ts_gl / sizeof Ts_gl[0] : sizeof Ts_sh / sizeof Ts_sh[0];
	sb_cuda_host_set_layout(global);
	int nmeth = (int)(sizeof meths / sizeof meths[0]);
	int fails = 0, total = 0;
	for (int mi = 0; mi < nmeth; mi++)
		for (size_t ti = 0; ti < nT; ti++) {
			int T = Ts[ti];
			int nvs[3] = {T, T > 3 ? T / 3 + 1 : 1, 1};
			for (int vi = 0; vi < 3; vi++) {
				if (vi && nvs[vi] == nvs[vi - 1])
					continue;
				for (int mk = 0; mk < 2; mk++) {
					if (mk == 1 && nvs[vi] == T)
						continue;
					int kinds[] = {0, 1, 2};
					for (int ki = 0; ki < 3; ki++) {
						total++;
						fails += !norm_case(&meths[mi], mk ? SB_MASK_EXCLUDE : SB_MASK_MARGIN, T,
								    nvs[vi], kinds[ki], 5);
					}
				}
			}
		}
	/* rows with -inf keys and with NaN keys */
	for (int mi = 0; mi < nmeth; mi++)
		for (int T = 9; T <= 70; T += 61) {
			total += 3;
			fails += !norm_case(&meths[mi], SB_MASK_MARGIN, T, T, 3, 4);
			fails += !norm_case(&meths[mi], SB_MASK_MARGIN, T, T - 3, 3, 4);
			fails += !norm_case(&meths[mi], SB_MASK_MARGIN, T, T, 4, 3);
		}
	printf("# normalisers (%s layout): %d cases, %d failed\n", global ? "global-memory" : "shared-memory", total,
	       fails);
	sb_cuda_host_set_layout(0);
}

static void test_no_finite(void)
{
	struct sb_norm nm;
	struct sb_err e = {0};
	sb_norm_parse("softmax", 1.5, &nm, &e);
	float s[8] = {-INFINITY, -INFINITY, -INFINITY, 1, 2, 3, 4, 5}, p[8], a[4];
	int rc = sb_cuda_host_norm_forward(&nm, p, a, s, 1, 8, 3, 1.5f, &e);
	SB_CHECK(rc == SB_EDATA, "no finite valid score -> SB_EDATA (got %d: %s)", rc, e.msg);
	rc = sb_cuda_host_norm_forward(&nm, p, a, s, 1, 8, 0, 1.5f, &e);
	SB_CHECK(rc == SB_EDATA, "n_valid 0 -> SB_EDATA (got %d: %s)", rc, e.msg);
}

static void test_ln(struct sb_backend *cpu)
{
	static const int ds[] = {8, 16, 24, 64, 100, 128, 256};
	struct sb_ctx *ctx = sb_be_main(cpu);
	for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++)
		for (int var = 0; var < 3; var++) { /* 0: y with dropout, 1: y no dropout, 2: no y */
			int d = ds[di], M = 37;
			size_t n = (size_t)M * d;
			float *x = malloc(n * 4), *y = malloc(n * 4), *w = malloc(d * 4), *b = malloc(d * 4);
			float *o1 = malloc(n * 4), *o2 = malloc(n * 4), *r1 = malloc(n * 4), *r2 = malloc(n * 4);
			float *m1 = malloc(M * 4), *m2 = malloc(M * 4), *s1 = malloc(M * 4), *s2 = malloc(M * 4);
			uint8_t *k1 = calloc(n, 1), *k2 = calloc(n, 1);
			for (size_t i = 0; i < n; i++) {
				x[i] = nrand() * 2 + 0.5f;
				y[i] = nrand();
			}
			for (int c = 0; c < d; c++) {
				w[c] = 1 + 0.3f * nrand();
				b[c] = 0.1f * nrand();
			}
			struct sb_dropout dr = {var == 0 ? 0.1f : 0.0f, 77, SB_DROPOUT_STREAM(5, 2), 1003, NULL};
			const float *yy = var == 2 ? NULL : y;
			cpu->ops->residual_ln_forward(ctx, o1, r1, m1, s1, k1, x, yy, w, b, &dr, M, d);
			sb_cuda_host_residual_ln_forward(o2, r2, m2, s2, k2, x, yy, w, b, &dr, M, d);
			double e1, e2, e3, e4;
			size_t c1 = diff_bits(o1, o2, n, &e1), c2 = diff_bits(r1, r2, n, &e2), c3 = diff_bits(m1, m2, M, &e3),
			       c4 = diff_bits(s1, s2, M, &e4);
			int kmask = var != 0 || memcmp(k1, k2, n) == 0;
			int ok = kmask && e1 < 1e-6 && e2 < 1e-6 && e3 < 1e-6 && e4 < 1e-6;
			SB_CHECK(ok, "residual_ln_forward d=%d var=%d: out %zu differ (%.3g), r %zu, mean %zu, rstd %zu, masks %s",
				 d, var, c1, e1, c2, c3, c4, kmask ? "same" : "DIFFER");
			/* backward */
			float *g = malloc(n * 4), *dx1 = malloc(n * 4), *dx2 = malloc(n * 4), *dy1 = malloc(n * 4),
			      *dy2 = malloc(n * 4);
			float *dw1 = calloc(d, 4), *dw2 = calloc(d, 4), *db1 = calloc(d, 4), *db2 = calloc(d, 4);
			for (size_t i = 0; i < n; i++)
				g[i] = nrand();
			for (int c = 0; c < d; c++)
				dw1[c] = dw2[c] = db1[c] = db2[c] = 0.25f * nrand();
			float p = var == 0 ? 0.1f : 0.0f;
			cpu->ops->residual_ln_backward(ctx, dx1, dy1, dw1, db1, g, r1, m1, s1, k1, w, p, M, d);
			sb_cuda_host_residual_ln_backward(dx2, dy2, dw2, db2, g, r1, m1, s1, k1, w, p, M, d);
			c1 = diff_bits(dx1, dx2, n, &e1);
			c2 = diff_bits(dy1, dy2, n, &e2);
			c3 = diff_bits(dw1, dw2, d, &e3);
			c4 = diff_bits(db1, db2, d, &e4);
			ok = e1 < 1e-6 && e2 < 1e-6 && e3 < 1e-6 && e4 < 1e-6;
			SB_CHECK(ok, "residual_ln_backward d=%d var=%d: dx %zu differ (%.3g), dy %zu (%.3g), dw %zu (%.3g), db %zu (%.3g)",
				 d, var, c1, e1, c2, e2, c3, e3, c4, e4);
			free(g);
			free(dx1);
			free(dx2);
			free(dy1);
			free(dy2);
			free(dw1);
			free(dw2);
			free(db1);
			free(db2);
			free(x);
			free(y);
			free(w);
			free(b);
			free(o1);
			free(o2);
			free(r1);
			free(r2);
			free(m1);
			free(m2);
			free(s1);
			free(s2);
			free(k1);
			free(k2);
		}
}

static void test_gelu_dropout(struct sb_backend *cpu)
{
	struct sb_ctx *ctx = sb_be_main(cpu);
	size_t n = 100003;
	float *x = malloc(n * 4), *o1 = malloc(n * 4), *o2 = malloc(n * 4), *g1 = malloc(n * 4), *g2 = malloc(n * 4);
	for (size_t i = 0; i < n; i++)
		x[i] = i < 64 ? (float)((double)i - 32) * 0.37f : nrand() * (i % 3 == 0 ? 6.0f : 1.5f);
	x[0] = 0.0f;
	x[1] = -0.0f;
	x[2] = 40.0f;
	x[3] = -40.0f;
	sb_cpu_gelu_ref_f(o1, x, n);
	cpu->ops->gelu_forward(ctx, o2, NULL, g1, x, NULL, n); /* gelu' (o2 is rewritten below) */
	sb_cuda_host_gelu(o2, g2, x, n);
	double e1, e2;
	size_t c1 = diff_bits(o1, o2, n, &e1), c2 = diff_bits(g1, g2, n, &e2);
	/* with FMA the CPU's vnormcdf and the CUDA port do the same float operations
	 * (lanes.cuh sb_normcdf1, including the exact x^2 = h + l of backend_cpu_simd.h): the
	 * same bits; without FMA the CPU's vfma rounds twice, hence the tolerance */
	int gelu_ok = CPU_FMA ? c1 == 0 && c2 == 0 : e1 < 1e-6 && e2 < 1e-6;
	SB_CHECK(gelu_ok, "gelu and gelu' on %zu inputs: %zu and %zu differ (max %.3g, %.3g; %s)", n, c1, c2, e1, e2,
		 CPU_FMA ? "bit for bit" : "tol 1e-6");
	/* dropout masks at unaligned offsets, through the CPU op */
	static const uint64_t offs[] = {0, 1, 2, 3, 5, 1000001, (1ull << 33) + 3};
	static const size_t lens[] = {1, 3, 4, 63, 64, 65, 1000};
	for (size_t oi = 0; oi < sizeof offs / sizeof offs[0]; oi++)
		for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
			struct sb_dropout dr = {oi % 2 ? 0.1f : 0.5f, 1234567ull + oi, SB_DROPOUT_STREAM(oi + 3, li), offs[oi], NULL};
			size_t m = lens[li];
			uint8_t *k1 = calloc(m, 1), *k2 = calloc(m, 1), *k3 = calloc(m, 1);
			cpu->ops->gelu_forward(ctx, o1, k1, NULL, x, &dr, m);
			sb_cuda_host_dropout_mask(k2, m, &dr);
			for (size_t i = 0; i < m; i++)
				k3[i] = sb_rng_u32_to_unit_f(sb_rng_word_at(dr.seed, SB_RNG_DROPOUT, dr.stream, dr.offset + i)) >=
					dr.p;
			int ok = memcmp(k1, k2, m) == 0 && memcmp(k2, k3, m) == 0;
			if (!ok || (oi == 0 && li == 0) || (oi + 1 == sizeof offs / sizeof offs[0] && li + 1 == sizeof lens / sizeof lens[0]))
				SB_CHECK(ok, "dropout mask offset %llu n %zu p %.2g: CUDA == CPU op == sb_rng_word_at rule",
					 (unsigned long long)dr.offset, m, dr.p);
			free(k1);
			free(k2);
			free(k3);
		}
	free(x);
	free(o1);
	free(o2);
	free(g1);
	free(g2);
}

static void test_philox(void)
{
	int bad = 0;
	for (int i = 0; i < 10000; i++) {
		uint32_t ctr[4], key[2], a[4], b[4];
		for (int j = 0; j < 4; j++)
			ctr[j] = (uint32_t)(urand() * 4294967296.0);
		key[0] = (uint32_t)(urand() * 4294967296.0);
		key[1] = (uint32_t)(urand() * 4294967296.0);
		sb_philox4x32_10(a, ctr, key);
		sb_cuda_host_philox(b, ctr, key);
		bad += memcmp(a, b, sizeof a) != 0;
	}
	SB_CHECK(bad == 0, "Philox-4x32-10: 10000 random blocks identical to lib/rng.c (%d differ)", bad);
}

static void test_adamw(struct sb_backend *cpu)
{
	struct sb_ctx *ctx = sb_be_main(cpu);
	size_t n = 70001;
	float *p1 = malloc(n * 4), *m1 = calloc(n, 4), *v1 = calloc(n, 4), *p2 = malloc(n * 4), *m2 = calloc(n, 4),
	      *v2 = calloc(n, 4), *g = malloc(n * 4);
	for (size_t i = 0; i < n; i++)
		p1[i] = p2[i] = nrand();
	size_t bad = 0;
	for (int t = 1; t <= 7; t++) {
		for (size_t i = 0; i < n; i++)
			g[i] = nrand() * (t == 3 ? 100.0f : 0.1f);
		cpu->ops->adamw(ctx, p1, m1, v1, g, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f, t);
		sb_cuda_host_adamw(p2, m2, v2, g, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f, t);
	}
	double e;
	bad = diff_bits(p1, p2, n, &e) + diff_bits(m1, m2, n, &e) + diff_bits(v1, v2, n, &e);
	SB_CHECK(bad == 0, "AdamW, 7 steps on %zu parameters: p, m, v bit-identical to the CPU op (%zu differ)", n, bad);
	free(p1);
	free(m1);
	free(v1);
	free(p2);
	free(m2);
	free(v2);
	free(g);
}

int main(void)
{
	struct sb_backend *cpu = NULL;
	struct sb_err e = {0};
	if (sb_backend_cpu_open(1, &cpu, &e)) {
		SB_CHECK(0, "open the CPU backend: %s", e.msg);
		return sb_test_done();
	}
	printf("# CPU FMA: %s (layer norm and GELU are compared %s)\n", CPU_FMA ? "yes" : "no",
	       CPU_FMA ? "bit for bit" : "with a tolerance");
	test_philox();
	test_norms(0);
	test_norms(1);
	test_no_finite();
	test_ln(cpu);
	test_gelu_dropout(cpu);
	test_adamw(cpu);
	SB_CHECK(sb_cuda_device_count() >= 0, "sb_cuda_device_count() answers without a GPU (%d devices)",
		 sb_cuda_device_count());
	sb_backend_close(cpu);
	return sb_test_done();
}
#endif
