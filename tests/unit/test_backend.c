/* test_backend.c — every CPU backend op against the plain double-precision
 * reference (ref_encoder.h) on random inputs of many sizes: 1, primes, and sizes
 * that are not multiples of the 16-lane vectors; the vector exp and erfc against
 * libm; dropout masks against sb_rng_word_at.
 *
 * Tolerances (float32 vs double; ~1e-7 relative per rounding): element-wise ops
 * 1e-6 relative, reductions over K terms 1e-5 * scale; each check prints its
 * measured max abs / rel error and NMSE.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../harness.h"
#include "backend_cpu.h"
#include "redzone.h"
#include "ref_encoder.h"

static uint64_t rs = 4242;
static double ur(void)
{
	rs = rs * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(rs >> 11) / 9007199254740992.0;
}
static void frand(float *x, size_t n, double lo, double hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(lo + (hi - lo) * ur());
}
static double *todbl(const float *x, size_t n)
{
	double *d = ref_alloc(n);
	for (size_t i = 0; i < n; i++)
		d[i] = x[i];
	return d;
}

static struct sb_backend *be;
static struct sb_ctx *ctx;

static void test_exp_erfc(void)
{
	size_t n = 200001;
	float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
	double *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(-87.0 + 175.0 * i / (n - 1));
	sb_cpu_exp(y, x, n);
	double worst = 0;
	for (size_t i = 0; i < n; i++)
		worst = fmax(worst, fabs(y[i] - exp((double)x[i])) / exp((double)x[i]));
	SB_CHECK(worst < 3e-7, "vector exp on [-87, 88]: max rel err %.3g vs libm exp (tol 3e-7, ~2.5 ulp)", worst);
	float spec[4] = {-100.0f, 100.0f, NAN, -INFINITY}, sy[4];
	sb_cpu_exp(sy, spec, 4);
	SB_CHECK(sy[0] == 0 && isinf(sy[1]) && isnan(sy[2]) && sy[3] == 0,
	         "vector exp: -100 -> 0, 100 -> inf, nan -> nan, -inf -> 0");
	/* normal CDF: relative error where Phi >= 1e-30 */
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(-11.0 + 22.0 * i / (n - 1));
	sb_cpu_normcdf(y, x, n);
	worst = 0;
	for (size_t i = 0; i < n; i++) {
		double w = 0.5 * erfc(-(double)x[i] / sqrt(2.0));
		if (w > 1e-30)
			worst = fmax(worst, fabs(y[i] - w) / w);
	}
	SB_CHECK(worst < 1e-6,
	         "Phi(x) = erfc(-x/sqrt2)/2 via the vector erfc on [-11, 11]: max rel err %.3g (tol 1e-6; x^2 formed "
	         "exactly)",
	         worst);
	/* GELU against the exact double GELU and against erff */
	sb_cpu_gelu_ref_f(y, x, n);
	double wa = 0, wr = 0, ea = 0;
	for (size_t i = 0; i < n; i++) {
		double w = ref_gelu(x[i]);
		double ef = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f)); /* libm erff */
		wa = fmax(wa, fabs(y[i] - w));
		if (fabs(w) > 1e-30)
			wr = fmax(wr, fabs(y[i] - w) / fabs(w));
		ea = fmax(ea, fabs(ef - w));
	}
	SB_CHECK(wa <= 1.5 * ea,
	         "GELU with the vector erfc is as accurate as one with libm's erff: max abs %.3g vs %.3g", wa, ea);
	SB_CHECK(wa < 1e-6 && wr < 1e-6,
	         "GELU (vector erfc) vs exact double: max abs %.3g, max rel %.3g (tol 1e-6 abs and rel); erff-based: "
	         "max abs %.3g",
	         wa, wr, ea);
	free(x);
	free(y);
	free(want);
	free(got);
}

static void test_dropout(void)
{
	int bad = 0, total = 0;
	uint8_t mask[300];
	for (int off = 0; off < 9; off++)
		for (int n = 1; n < 260; n += (n < 20 ? 1 : 37)) {
			struct sb_dropout d = {0.1f, 12345 + (uint64_t)off, SB_DROPOUT_STREAM(7, 3),
			                       1000 + (uint64_t)off, NULL};
			sb_cpu_dropout_mask(mask, (size_t)n, &d);
			for (int i = 0; i < n; i++) {
				total++;
				bad += mask[i] != ref_keep(0.1, d.seed, d.stream, d.offset + (uint64_t)i);
			}
		}
	/* element offsets around 2^34, where the Philox block number needs its high word */
	for (uint64_t off = (1ull << 34) - 70; off < (1ull << 34) + 10; off += 13)
		for (int n = 1; n < 300; n += 29) {
			struct sb_dropout d = {0.3f, 99, SB_DROPOUT_STREAM(1, 2), off, NULL};
			sb_cpu_dropout_mask(mask, (size_t)n, &d);
			for (int i = 0; i < n; i++) {
				total++;
				bad += mask[i] != ref_keep(0.3, d.seed, d.stream, d.offset + (uint64_t)i);
			}
		}
	SB_CHECK(bad == 0, "dropout masks (vectorised Philox) equal sb_rng_word_at's rule: %d of %d differ", bad,
	         total);
	uint8_t big[100000];
	struct sb_dropout d = {0.1f, 1, 5, 0, NULL};
	sb_cpu_dropout_mask(big, sizeof big, &d);
	int kept = 0;
	for (size_t i = 0; i < sizeof big; i++)
		kept += big[i];
	SB_CHECK(fabs(kept / 1e5 - 0.9) < 0.005, "dropout p = 0.1 keeps %.4f of 100000", kept / 1e5);
}

/* one FMA, as the kernels do it (fused where the target has FMA) */
static float chain_fma(float a, float b, float c)
{
#if defined(__FMA__) || defined(__AVX512F__)
	return fmaf(a, b, c);
#else
	return a * b + c;
#endif
}

static void test_matmul(void)
{
	int sizes[][3] = {{1, 1, 1},    {1, 16, 3},    {7, 5, 3},    {13, 17, 19}, {50, 64, 192},
			  {97, 64, 256}, {33, 256, 64}, {300, 7, 64}, {41, 3, 20}};
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		int M = sizes[s][0], K = sizes[s][1], N = sizes[s][2];
		float *x = malloc((size_t)M * K * 4), *w = malloc((size_t)N * K * 4), *b = malloc((size_t)N * 4);
		float *o = malloc((size_t)M * N * 4), *g = malloc((size_t)M * N * 4), *dx = malloc((size_t)M * K * 4);
		float *dw = calloc((size_t)N * K, 4), *db = calloc((size_t)N, 4);
		frand(x, (size_t)M * K, -1, 1), frand(w, (size_t)N * K, -1, 1), frand(b, N, -1, 1),
		    frand(g, (size_t)M * N, -1, 1);
		be->ops->matmul_forward(ctx, o, x, w, b, M, K, N);
		be->ops->matmul_backward(ctx, dx, dw, db, g, x, w, M, K, N, 0);
		double *X = todbl(x, (size_t)M * K), *W = todbl(w, (size_t)N * K), *Bb = todbl(b, N),
		       *G = todbl(g, (size_t)M * N);
		double *O = ref_alloc((size_t)M * N), *DX = ref_alloc((size_t)M * K), *DW = ref_alloc((size_t)N * K),
		       *DB = ref_alloc(N);
		ref_linear(O, X, W, Bb, M, K, N);
		ref_linear_bwd(DX, DW, DB, G, X, W, M, K, N, 0);
		char nm[128];
		double tol = 2e-6 * sqrt((double)K);
		double *o2 = todbl(o, (size_t)M * N), *dx2 = todbl(dx, (size_t)M * K), *dw2 = todbl(dw, (size_t)N * K),
		       *db2 = todbl(db, N);
		snprintf(nm, sizeof nm, "matmul forward M=%d K=%d N=%d", M, K, N);
		sb_check_close(nm, o2, O, (size_t)M * N, tol, 1e-5);
		snprintf(nm, sizeof nm, "matmul d/dinput M=%d K=%d N=%d", M, K, N);
		sb_check_close(nm, dx2, DX, (size_t)M * K, 2e-6 * sqrt((double)N), 1e-5);
		snprintf(nm, sizeof nm, "matmul d/dweight M=%d K=%d N=%d", M, K, N);
		sb_check_close(nm, dw2, DW, (size_t)N * K, 2e-6 * sqrt((double)M), 1e-5);
		snprintf(nm, sizeof nm, "matmul d/dbias M=%d K=%d N=%d", M, K, N);
		sb_check_close(nm, db2, DB, N, 2e-6 * sqrt((double)M), 1e-5);
		/* the weight gradient is, element by element, the FMA chain over the rows in order
		 * (what makes runs reproducible): exactly, also on the narrow-input path (K < 16) */
		size_t bad = 0;
		for (int n = 0; n < N; n++)
			for (int k = 0; k < K; k++) {
				float acc = 0;
				for (int i = 0; i < M; i++)
#if defined(__FMA__) || defined(__AVX512F__)
					acc = fmaf(g[(size_t)i * N + n], x[(size_t)i * K + k], acc);
#else
					acc = g[(size_t)i * N + n] * x[(size_t)i * K + k] + acc;
#endif
				bad += memcmp(&acc, &dw[(size_t)n * K + k], 4) != 0;
			}
		SB_CHECK(!bad, "matmul d/dweight M=%d K=%d N=%d: each element the in-order FMA chain, bit for bit (%zu of "
			       "%d differ)", M, K, N, bad, N * K);
		/* so are the forward (from the bias, over k) and the input gradient (over n) */
		bad = 0;
		for (int i = 0; i < M; i++) {
			for (int n = 0; n < N; n++) {
				float acc = b[n];
				for (int k = 0; k < K; k++)
					acc = chain_fma(x[(size_t)i * K + k], w[(size_t)n * K + k], acc);
				bad += memcmp(&acc, &o[(size_t)i * N + n], 4) != 0;
			}
			for (int k = 0; k < K; k++) {
				float acc = 0;
				for (int n = 0; n < N; n++)
					acc = chain_fma(g[(size_t)i * N + n], w[(size_t)n * K + k], acc);
				bad += memcmp(&acc, &dx[(size_t)i * K + k], 4) != 0;
			}
		}
		SB_CHECK(!bad, "matmul forward and d/dinput M=%d K=%d N=%d: each element the in-order FMA chain, bit for "
			       "bit (%zu of %d differ)", M, K, N, bad, M * (N + K));
		free(x), free(w), free(b), free(o), free(g), free(dx), free(dw), free(db);
		free(X), free(W), free(Bb), free(G), free(O), free(DX), free(DW), free(DB), free(o2), free(dx2),
		    free(dw2), free(db2);
	}
}



/* sb_cpu_gemm is, element by element, one FMA chain over k in increasing order from the
 * bias, zero or the old C: exactly, whatever its tiles (8 or 6 rows, 1-4 vectors, a
 * column tail) and its passes over a long k (each pass stores C and the next loads it) */
static void test_gemm_chains(void)
{
	uint64_t saved = rs; /* own draws: the other tests keep their inputs */
	rs = 977;
	int Ms[] = {1, 5, 8, 13, 33}, Ns[] = {1, 16, 17, 32, 48, 65, 192}, Ks[] = {1, 7, 64, 257, 600};
	size_t bad = 0, total = 0;
	for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
		for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
			for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
				for (int mode = 0; mode < 4; mode++) { /* A layout x (bias | acc) */
					int M = Ms[mi], N = Ns[ni], K = Ks[ki], trans = mode & 1, acc = mode >> 1;
					long ars = trans ? 1 : K, acs = trans ? M : 1;
					int ldb = N + 3, ldc = N + 5;
					float *A = malloc((size_t)M * K * 4), *B = malloc((size_t)K * ldb * 4);
					float *C = malloc((size_t)M * ldc * 4), *C0 = malloc((size_t)M * ldc * 4);
					float *bias = malloc((size_t)N * 4);
					frand(A, (size_t)M * K, -1, 1), frand(B, (size_t)K * ldb, -1, 1);
					frand(C0, (size_t)M * ldc, -1, 1), frand(bias, N, -1, 1);
					memcpy(C, C0, (size_t)M * ldc * 4);
					sb_cpu_gemm(C, ldc, A, ars, acs, B, ldb, M, N, K, acc ? NULL : bias, acc);
					for (int i = 0; i < M; i++)
						for (int j = 0; j < N; j++) {
							float c = acc ? C0[(size_t)i * ldc + j] : bias[j];
							for (int k = 0; k < K; k++)
								c = chain_fma(A[i * ars + k * acs], B[(size_t)k * ldb + j], c);
							total++;
							bad += memcmp(&c, &C[(size_t)i * ldc + j], 4) != 0;
						}
					free(A), free(B), free(C), free(C0), free(bias);
				}
	rs = saved;
	SB_CHECK(!bad, "sb_cpu_gemm: each element the in-order FMA chain, bit for bit, over %zu elements of "
	               "M 1-33, N 1-192, K 1-600, A either way round, bias or accumulate (%zu differ)",
	         total, bad);
}

/* softmax attention, bit for bit against plain loops in the kernels' order: products as
 * in-order FMA chains (a row of a probability or score gradient that is mostly zero in its
 * block of 4 rows would go through the sparse two-accumulator loop: mirrored), the
 * normaliser one row at a time, the 1/sqrt(hd) scaling after the chain */
static void mix_ref(float *O, int ldo, const float *A, const float *Y, int ldy, int T, int hd)
{
	for (int i0 = 0; i0 < T; i0 += 4) {
		int nr = T - i0 < 4 ? T - i0 : 4, cnt = 0;
		for (int r = 0; r < nr; r++)
			for (int j = 0; j < T; j++)
				cnt += A[(size_t)(i0 + r) * T + j] != 0.0f;
		for (int r = 0; r < nr; r++)
			for (int c = 0; c < hd; c++) {
				const float *a = A + (size_t)(i0 + r) * T;
				float s0 = 0, s1 = 0;
				if (nr == 4 && 2 * cnt > 4 * T) {
					for (int j = 0; j < T; j++)
						s0 = chain_fma(a[j], Y[(size_t)j * ldy + c], s0);
				} else {
					int q = 0;
					for (int j = 0; j < T; j++)
						if (a[j] != 0.0f) {
							if (q++ % 2 == 0)
								s0 = chain_fma(a[j], Y[(size_t)j * ldy + c], s0);
							else
								s1 = chain_fma(a[j], Y[(size_t)j * ldy + c], s1);
						}
					s0 = s0 + s1;
				}
				O[(size_t)(i0 + r) * ldo + c] = s0;
			}
	}
}

static void test_attention_chains(void)
{
	uint64_t saved = rs; /* own draws: the other tests keep their inputs */
	rs = 977;
	int Ts[] = {1, 5, 16, 17, 32, 33, 65}, hds[] = {16, 32};
	struct sb_norm nm;
	struct sb_err e = {0};
	sb_norm_parse("softmax", 0, &nm, &e);
	for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++)
		for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++) {
			int T = Ts[ti], hd = hds[hi], NH = 2, d = hd * NH, B = 3, d3 = 3 * d;
			size_t nq = (size_t)B * T * d3, no = (size_t)B * T * d, np = (size_t)B * NH * T * T;
			size_t na = (size_t)B * NH * T * SB_NORM_AUX;
			float *qkv = malloc(nq * 4), *out = malloc(no * 4), *S = malloc(np * 4), *P = malloc(np * 4);
			float *aux = malloc(na * 4), *g = malloc(no * 4), *dq = malloc(nq * 4);
			float *rout = malloc(no * 4), *rS = malloc(np * 4), *rP = malloc(np * 4), *raux = malloc(na * 4);
			float *rdq = malloc(nq * 4), *dP = malloc((size_t)T * T * 4);
			frand(qkv, nq, -2, 2), frand(g, no, -1, 1);
			int rc = be->ops->attention_forward(ctx, out, S, P, aux, qkv, NULL, NULL, &nm, B, T, d, NH, &e);
			be->ops->attention_backward(ctx, dq, NULL, g, qkv, S, P, aux, NULL, NULL, &nm, B, T, d, NH);
			double r = sqrt((double)hd);
			float div = (float)r, mul = 1.0f / div;
			int frx, exact = frexp(r, &frx) == 0.5;
			for (int b = 0; b < B; b++)
				for (int h = 0; h < NH; h++) {
					const float *q = qkv + (size_t)b * T * d3 + h * hd, *k = q + d, *v = q + 2 * d;
					const float *go = g + (size_t)b * T * d + h * hd;
					float *o = rout + (size_t)b * T * d + h * hd;
					float *dqb = rdq + (size_t)b * T * d3 + h * hd, *dk = dqb + d, *dv = dqb + 2 * d;
					size_t blk = (size_t)b * NH + h;
					float *Sb = rS + blk * T * T, *Pb = rP + blk * T * T, *ab = raux + blk * T * SB_NORM_AUX;
					for (int i = 0; i < T; i++)
						for (int j = 0; j < T; j++) {
							float s = 0;
							for (int c = 0; c < hd; c++)
								s = chain_fma(q[(size_t)i * d3 + c], k[(size_t)j * d3 + c], s);
							Sb[(size_t)i * T + j] = exact ? s * mul : s / div;
						}
					for (int i = 0; i < T; i++)
						sb_norm_forward(&nm, Pb + (size_t)i * T, ab + (size_t)i * SB_NORM_AUX,
						                Sb + (size_t)i * T, 1, T, T, 0, &e);
					mix_ref(o, d, Pb, v, d3, T, hd);
					for (int i = 0; i < T; i++)
						for (int j = 0; j < T; j++) {
							float s = 0;
							for (int c = 0; c < hd; c++)
								s = chain_fma(go[(size_t)i * d + c], v[(size_t)j * d3 + c], s);
							dP[(size_t)i * T + j] = s;
						}
					for (int j = 0; j < T; j++)
						for (int c = 0; c < hd; c++) {
							float s = 0;
							for (int i = 0; i < T; i++)
								s = chain_fma(Pb[(size_t)i * T + j], go[(size_t)i * d + c], s);
							dv[(size_t)j * d3 + c] = s;
						}
					for (int i = 0; i < T; i++)
						sb_norm_backward(&nm, dP + (size_t)i * T, NULL, dP + (size_t)i * T,
						                 Pb + (size_t)i * T, ab + (size_t)i * SB_NORM_AUX,
						                 Sb + (size_t)i * T, 1, T, T, 0);
					for (size_t x = 0; x < (size_t)T * T; x++)
						dP[x] = exact ? dP[x] * mul : dP[x] / div;
					mix_ref(dqb, d3, dP, k, d3, T, hd);
					for (int j = 0; j < T; j++)
						for (int c = 0; c < hd; c++) {
							float s = 0;
							for (int i = 0; i < T; i++)
								s = chain_fma(dP[(size_t)i * T + j], q[(size_t)i * d3 + c], s);
							dk[(size_t)j * d3 + c] = s;
						}
				}
			SB_CHECK(rc == 0 && !memcmp(S, rS, np * 4) && !memcmp(P, rP, np * 4) && !memcmp(aux, raux, na * 4) &&
			             !memcmp(out, rout, no * 4),
			         "softmax attention T=%d hd=%d forward: scores, probabilities, aux and output bit for bit "
			         "those of plain in-order loops",
			         T, hd);
			SB_CHECK(!memcmp(dq, rdq, nq * 4),
			         "softmax attention T=%d hd=%d backward: d/dqkv bit for bit that of plain in-order loops", T,
			         hd);
			free(qkv), free(out), free(S), free(P), free(aux), free(g), free(dq);
			free(rout), free(rS), free(rP), free(raux), free(rdq), free(dP);
		}
	rs = saved;
}

/* the LM table's LayerNorm / RMSNorm (used by N3-A's encoder too), bit for bit against
 * the plain row loops: forward (sums over vectors then the fixed tree), backward (s1, s2 as
 * chains over the columns, dw and db as chains over the rows, dx accumulated) */
static void test_lm_norm_chains(void)
{
	uint64_t saved = rs; /* own draws: the other tests keep their inputs */
	rs = 977;
	const struct sb_backend_lm_ops *lm = sb_backend_lm(be);
	int ds[] = {1, 7, 16, 17, 48, 64, 100, 128}, Ms[] = {1, 15, 16, 17, 37, 64};
	size_t bad = 0, total = 0;
	for (size_t di = 0; di < sizeof ds / sizeof *ds; di++)
		for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
			for (int mode = 0; mode < 4; mode++) {
				int d = ds[di], M = Ms[mi], rms = mode & 1, nob = mode >> 1;
				size_t n = (size_t)M * d;
				float *x = malloc(n * 4), *o = malloc(n * 4), *g = malloc(n * 4), *dx = malloc(n * 4);
				float *rdx = malloc(n * 4), *w = malloc(d * 4), *b = malloc(d * 4), *mean = malloc(M * 4);
				float *rstd = malloc(M * 4), *dw = malloc(d * 4), *db = malloc(d * 4), *rdw = malloc(d * 4);
				float *rdb = malloc(d * 4);
				frand(x, n, -2, 3), frand(g, n, -1, 1), frand(dx, n, -1, 1), frand(w, d, 0.5, 1.5);
				frand(b, d, -1, 1), frand(dw, d, -1, 1), frand(db, d, -1, 1);
				memcpy(rdx, dx, n * 4), memcpy(rdw, dw, d * 4), memcpy(rdb, db, d * 4);
				lm->norm_forward(ctx, o, rms ? NULL : mean, rstd, x, w, nob ? NULL : b, M, d, 1e-5f, rms);
				lm->norm_backward(ctx, dx, dw, nob ? NULL : db, g, x, mean, rstd, w, M, d, rms);
				/* in place and without the mean (as the LM's q/k norms call it): the same output */
				float *xo = malloc(n * 4), *rs2 = malloc(M * 4);
				memcpy(xo, x, n * 4);
				lm->norm_forward(ctx, xo, NULL, rs2, xo, w, nob ? NULL : b, M, d, 1e-5f, rms);
				total += n;
				bad += memcmp(xo, o, n * 4) != 0 || memcmp(rs2, rstd, M * 4) != 0;
				free(xo), free(rs2);
				for (int i = 0; i < M; i++) {
					const float *xi = x + (size_t)i * d, *gi = g + (size_t)i * d;
					float mu = 0, q = 0;
					int c = 0;
					if (!rms) {
						float s = 0;
						if (d >= 16) {
							float a[16] = {0};
							for (; c + 16 <= d; c += 16)
								for (int l = 0; l < 16; l++)
									a[l] += xi[c + l];
							for (int w2 = 8; w2 >= 1; w2 >>= 1)
								for (int l = 0; l < w2; l++)
									a[l] += a[l + w2];
							s = a[0];
						}
						for (; c < d; c++)
							s += xi[c];
						mu = s / (float)d;
					}
					c = 0;
					if (d >= 16) {
						float a[16] = {0};
						for (; c + 16 <= d; c += 16)
							for (int l = 0; l < 16; l++) {
								float t = xi[c + l] - mu;
								a[l] = chain_fma(t, t, a[l]);
							}
						for (int w2 = 8; w2 >= 1; w2 >>= 1)
							for (int l = 0; l < w2; l++)
								a[l] += a[l + w2];
						q = a[0];
					}
					for (; c < d; c++) {
						float t = xi[c] - mu;
						q = chain_fma(t, t, q);
					}
					float rs = 1.0f / sqrtf(q / (float)d + 1e-5f);
					total += 2;
					bad += memcmp(&rs, &rstd[i], 4) != 0 || (!rms && memcmp(&mu, &mean[i], 4) != 0);
					float s1 = 0, s2 = 0;
					for (c = 0; c < d; c++) {
						float xh = (xi[c] - mu) * rs, dxh = gi[c] * w[c];
						float oc = nob ? xh * w[c] : chain_fma(xh, w[c], b[c]);
						total++;
						bad += memcmp(&oc, &o[(size_t)i * d + c], 4) != 0;
						s1 += dxh;
						s2 = chain_fma(dxh, xh, s2);
						rdw[c] = chain_fma(gi[c], xh, rdw[c]);
						if (!nob)
							rdb[c] += gi[c];
					}
					float m1 = rms ? 0.0f : s1 / (float)d, m2 = s2 / (float)d;
					for (c = 0; c < d; c++) {
						float xh = (xi[c] - mu) * rs;
						rdx[(size_t)i * d + c] += (gi[c] * w[c] - m1 - xh * m2) * rs;
					}
				}
				total += n + 2 * (size_t)d;
				for (size_t k = 0; k < n; k++)
					bad += memcmp(&rdx[k], &dx[k], 4) != 0;
				for (int c = 0; c < d; c++)
					bad += (memcmp(&rdw[c], &dw[c], 4) != 0) + (!nob && memcmp(&rdb[c], &db[c], 4) != 0);
				free(x), free(o), free(g), free(dx), free(rdx), free(w), free(b), free(mean), free(rstd);
				free(dw), free(db), free(rdw), free(rdb);
			}
	rs = saved;
	SB_CHECK(!bad, "LM norm forward/backward (LayerNorm and RMSNorm, d 1-128, 1-64 rows, with and without "
	               "bias; forward also in place without the mean): bit for bit the plain row loops over %zu values (%zu differ)",
	         total, bad);
}

static void test_layernorm(void)
{
	int ds[] = {1, 2, 7, 16, 17, 64, 100, 128};
	for (size_t s = 0; s < sizeof ds / sizeof ds[0]; s++) {
		int d = ds[s], M = 13;
		size_t n = (size_t)M * d;
		float *x = malloc(n * 4), *y = malloc(n * 4), *w = malloc(d * 4), *b = malloc(d * 4),
		      *o = malloc(n * 4);
		float *r = malloc(n * 4), *mu = malloc(M * 4), *rstd = malloc(M * 4), *g = malloc(n * 4),
		      *dx = malloc(n * 4), *dy = malloc(n * 4), *dw = calloc(d, 4), *db = calloc(d, 4);
		uint8_t *mask = malloc(n);
		frand(x, n, -2, 2), frand(y, n, -2, 2), frand(w, d, 0.5, 1.5), frand(b, d, -1, 1), frand(g, n, -1, 1);
		struct sb_dropout dr = {0.25f, 9, SB_DROPOUT_STREAM(2, 1), 77, NULL};
		be->ops->residual_ln_forward(ctx, o, r, mu, rstd, mask, x, y, w, b, &dr, M, d);
		be->ops->residual_ln_backward(ctx, dx, dy, dw, db, g, r, mu, rstd, mask, w, 0.25f, M, d);
		double sc = 1.0f / 0.75f;
		double *R = ref_alloc(n), *O = ref_alloc(n), *MU = ref_alloc(M), *RS = ref_alloc(M), *DR = ref_alloc(n);
		double *DW = ref_alloc(d), *DB = ref_alloc(d), *DY = ref_alloc(n), *G = todbl(g, n), *Wd = todbl(w, d),
		       *Bd = todbl(b, d);
		int maskok = 1;
		for (size_t i = 0; i < n; i++) {
			int k = ref_keep(0.25, 9, dr.stream, 77 + i);
			maskok &= k == mask[i];
			R[i] = (double)x[i] + (k ? (double)y[i] * sc : 0.0);
		}
		ref_ln(O, MU, RS, R, Wd, Bd, M, d);
		ref_ln_bwd(DR, DW, DB, G, R, MU, RS, Wd, M, d, 0);
		for (size_t i = 0; i < n; i++)
			DY[i] = mask[i] ? DR[i] * sc : 0.0;
		char nm[128];
		double *o2 = todbl(o, n), *dx2 = todbl(dx, n), *dy2 = todbl(dy, n), *dw2 = todbl(dw, d),
		       *db2 = todbl(db, d);
		SB_CHECK(maskok, "residual+dropout+LN d=%d: dropout mask at offset 77 follows the rule", d);
		snprintf(nm, sizeof nm, "residual+dropout+LN forward d=%d", d);
		sb_check_close(nm, o2, O, n, 5e-6, 5e-6);
		snprintf(nm, sizeof nm, "residual+dropout+LN d/dx d=%d", d);
		sb_check_close(nm, dx2, DR, n, 1e-5, 1e-5);
		snprintf(nm, sizeof nm, "residual+dropout+LN d/dy d=%d", d);
		sb_check_close(nm, dy2, DY, n, 1e-5, 1e-5);
		snprintf(nm, sizeof nm, "residual+dropout+LN d/dweight, d/dbias d=%d", d);
		sb_check_close(nm, dw2, DW, d, 2e-5, 1e-5);
		sb_check_close(nm, db2, DB, d, 2e-5, 1e-5);
		free(x), free(y), free(w), free(b), free(o), free(r), free(mu), free(rstd), free(g), free(dx), free(dy),
		    free(dw), free(db), free(mask);
		free(R), free(O), free(MU), free(RS), free(DR), free(DW), free(DB), free(DY), free(G), free(Wd),
		    free(Bd);
		free(o2), free(dx2), free(dy2), free(dw2), free(db2);
	}
}

static void test_gelu_op(void)
{
	size_t ns[] = {1, 15, 16, 17, 1000, 4099};
	for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
		size_t n = ns[s];
		float *x = malloc(n * 4), *o = malloc(n * 4), *g = malloc(n * 4), *dx = malloc(n * 4),
		      *dg = malloc(n * 4), *o0 = malloc(n * 4), *xin = malloc(n * 4);
		uint8_t *mask = malloc(n), *mask0 = malloc(n);
		frand(x, n, -6, 6), frand(g, n, -1, 1);
		struct sb_dropout dr = {0.1f, 3, 11, 5, NULL};
		be->ops->gelu_forward(ctx, o0, mask0, NULL, x, &dr, n); /* evaluation: no gelu' */
		be->ops->gelu_forward(ctx, o, mask, dg, x, &dr, n);
		be->ops->gelu_backward(ctx, dx, g, dg, mask, 0.1f, n);
		double *O = ref_alloc(n), *DX = ref_alloc(n), *DG = ref_alloc(n), sc = 1.0f / 0.9f;
		for (size_t i = 0; i < n; i++) {
			int k = ref_keep(0.1, 3, 11, 5 + i);
			O[i] = k ? ref_gelu(x[i]) * sc : 0;
			DG[i] = ref_gelu_d(x[i]);
			DX[i] = k ? g[i] * sc * ref_gelu_d(x[i]) : 0;
		}
		double *o2 = todbl(o, n), *dx2 = todbl(dx, n), *dg2 = todbl(dg, n);
		char nm[100];
		snprintf(nm, sizeof nm, "GELU+dropout forward n=%zu", n);
		sb_check_close(nm, o2, O, n, 1e-6, 3e-6);
		snprintf(nm, sizeof nm, "GELU forward's gelu' n=%zu", n);
		sb_check_close(nm, dg2, DG, n, 1e-6, 3e-6);
		SB_CHECK(!memcmp(o0, o, n * 4) && !memcmp(mask0, mask, n),
		         "GELU forward n=%zu: output and mask the same with and without gelu'", n);
		snprintf(nm, sizeof nm, "GELU+dropout backward n=%zu", n);
		sb_check_close(nm, dx2, DX, n, 1e-6, 3e-6);
		/* a training pass: gelu' in place of the input, backward in place on dout */
		memcpy(xin, x, n * 4);
		be->ops->gelu_forward(ctx, o0, mask0, xin, xin, &dr, n);
		SB_CHECK(!memcmp(o0, o, n * 4) && !memcmp(xin, dg, n * 4),
		         "GELU forward n=%zu with gelu' written over its input: the same output and gelu'", n);
		snprintf(nm, sizeof nm, "GELU+dropout backward n=%zu (in place on dout)", n);
		memcpy(dx, g, n * 4);
		be->ops->gelu_backward(ctx, dx, dx, xin, mask, 0.1f, n);
		free(dx2);
		dx2 = todbl(dx, n);
		sb_check_close(nm, dx2, DX, n, 1e-6, 3e-6);
		free(x), free(o), free(g), free(dx), free(dg), free(o0), free(xin), free(mask), free(mask0), free(O),
		    free(DX), free(DG), free(o2), free(dx2), free(dg2);
	}
}

static void test_attention(void)
{
	static const char *methods[] = {"softmax",   "topk_softmax_025", "bottomk_softmax_0125",
	                                "sparsemax", "entmax15",         "headwise_adaptive_entmax"};
	int Ts[] = {1, 2, 5, 17, 50, 65, 97};
	int hds[] = {3, 16, 32};
	for (size_t mi = 0; mi < sizeof methods / sizeof methods[0]; mi++)
		for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++)
			for (size_t hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
				int T = Ts[ti], hd = hds[hi], NH = 2, d = hd * NH, B = 2, d3 = 3 * d;
				if (T > 50 && hd == 3)
					continue;
				struct sb_norm nm;
				struct sb_err e = {0};
				sb_norm_parse(methods[mi], 1.5, &nm, &e);
				size_t nq = (size_t)B * T * d3, no = (size_t)B * T * d, np = (size_t)B * NH * T * T;
				float *qkv = malloc(nq * 4), *out = malloc(no * 4), *S = malloc(np * 4),
				      *P = malloc(np * 4);
				float *aux = malloc((size_t)B * NH * T * SB_NORM_AUX * 4), *g = malloc(no * 4),
				      *dq = malloc(nq * 4);
				float alpha[2] = {1.3f, 1.8f}, dal[2] = {0, 0};
				int32_t nv[2] = {T, T > 3 ? T / 2 : T};
				int text = T == 17 || T == 97;
				frand(qkv, nq, -2, 2), frand(g, no, -1, 1);
				int adaptive = nm.kind == SB_NORM_ADAPTIVE;
				int rc = be->ops->attention_forward(ctx, out, S, P, aux, qkv, text ? nv : NULL,
				                                    adaptive ? alpha : NULL, &nm, B, T, d, NH, &e);
				be->ops->attention_backward(ctx, dq, adaptive ? dal : NULL, g, qkv, S, P, aux,
				                            text ? nv : NULL, adaptive ? alpha : NULL, &nm, B, T, d,
				                            NH);
				double *Q = todbl(qkv, nq), *O = ref_alloc(no), *SS = ref_alloc(np),
				       *PP = ref_alloc(np), *G = todbl(g, no);
				double *DQ = ref_alloc(nq), AL[2] = {alpha[0], alpha[1]}, DAL[2] = {0, 0};
				ref_attention(O, SS, PP, Q, text ? nv : NULL, adaptive ? AL : NULL, &nm, B, T, d, NH);
				ref_attention_bwd(DQ, adaptive ? DAL : NULL, G, Q, SS, PP, text ? nv : NULL,
				                  adaptive ? AL : NULL, &nm, B, T, d, NH);
				double *o2 = todbl(out, no), *dq2 = todbl(dq, nq);
				double gmax = 0;
				for (size_t i = 0; i < nq; i++)
					gmax = fmax(gmax, fabs(DQ[i]));
				char nmb[160];
				snprintf(nmb, sizeof nmb, "attention %s T=%d hd=%d%s forward", methods[mi], T, hd,
				         text ? " masked" : "");
				SB_CHECK(rc == 0, "%s runs", nmb);
				sb_check_close(nmb, o2, O, no, 1e-5, 1e-5);
				snprintf(nmb, sizeof nmb, "attention %s T=%d hd=%d%s d/dqkv", methods[mi], T, hd,
				         text ? " masked" : "");
				sb_check_close(nmb, dq2, DQ, nq, 2e-5 * fmax(gmax, 1), 1e-4);
				if (adaptive) {
					double da2[2] = {dal[0], dal[1]};
					snprintf(nmb, sizeof nmb, "attention HAE T=%d hd=%d d/dalpha", T, hd);
					sb_check_close(nmb, da2, DAL, 2, 1e-4 * fmax(fabs(DAL[0]) + fabs(DAL[1]), 1e-3),
					               1e-3);
				}
				free(qkv), free(out), free(S), free(P), free(aux), free(g), free(dq);
				free(Q), free(O), free(SS), free(PP), free(G), free(DQ), free(o2), free(dq2);
			}
}

static void test_localmix(void)
{
	struct {
		int T, d, G, masked;
	} cs[] = {{50, 64, 7, 0}, {10, 5, 3, 0}, {13, 17, 0, 1}, {97, 64, 0, 1}, {2, 3, 1, 0}};
	for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
		int T = cs[c].T, d = cs[c].d, G = cs[c].G, B = 3, L = T - 1, KK = G > 0 ? 9 : 3;
		size_t n = (size_t)B * T * d, nl = (size_t)B * L * d;
		float *x = malloc(n * 4), *o = malloc(n * 4), *y = malloc(nl * 4), *z = malloc(nl * 4),
		      *mu = malloc(B * L * 4), *rsd = malloc(B * L * 4), *lw = malloc(d * 4), *lb = malloc(d * 4),
		      *cw = malloc(d * KK * 4), *cb = malloc(d * 4), sc = 0.37f, *g = malloc(n * 4),
		      *dx = malloc(n * 4), *dlw = calloc(d, 4), *dlb = calloc(d, 4), *dcw = calloc(d * KK, 4),
		      *dcb = calloc(d, 4), dsc = 0;
		int32_t nv[3] = {T, 1, T / 2 + 1};
		frand(x, n, -2, 2), frand(lw, d, 0.5, 1.5), frand(lb, d, -0.5, 0.5), frand(cw, d * KK, -0.5, 0.5);
		frand(cb, d, -0.2, 0.2), frand(g, n, -1, 1);
		const int32_t *nvp = cs[c].masked ? nv : NULL;
		be->ops->localmix_forward(ctx, o, y, z, mu, rsd, x, nvp, lw, lb, cw, cb, &sc, B, T, d, G);
		be->ops->localmix_backward(ctx, dx, dlw, dlb, dcw, dcb, &dsc, g, x, y, z, mu, rsd, nvp, lw, cw, &sc, B,
		                           T, d, G);
		double *X = todbl(x, n), *O = ref_alloc(n), *Y = ref_alloc(nl), *Z = ref_alloc(nl),
		       *MU = ref_alloc(B * L), *RS = ref_alloc(B * L), *LW = todbl(lw, d), *LB = todbl(lb, d),
		       *CW = todbl(cw, d * KK), *CB = todbl(cb, d), *GG = todbl(g, n), *DX = ref_alloc(n),
		       *DLW = ref_alloc(d), *DLB = ref_alloc(d), *DCW = ref_alloc(d * KK), *DCB = ref_alloc(d), DSC = 0;
		ref_localmix(O, Y, Z, MU, RS, X, nvp, LW, LB, CW, CB, sc, B, T, d, G);
		ref_localmix_bwd(DX, DLW, DLB, DCW, DCB, &DSC, GG, X, Y, Z, MU, RS, nvp, LW, CW, sc, B, T, d, G);
		char nm[128];
		double *o2 = todbl(o, n), *dx2 = todbl(dx, n), *dcw2 = todbl(dcw, d * KK), *dlw2 = todbl(dlw, d),
		       ds2 = dsc;
		snprintf(nm, sizeof nm, "local mixer T=%d d=%d %s forward", T, d, G > 0 ? "2-D" : "1-D masked");
		sb_check_close(nm, o2, O, n, 5e-6, 5e-6);
		snprintf(nm, sizeof nm, "local mixer T=%d d=%d d/dx", T, d);
		sb_check_close(nm, dx2, DX, n, 2e-5, 1e-5);
		snprintf(nm, sizeof nm, "local mixer T=%d d=%d d/dconv, d/dln, d/dscale", T, d);
		sb_check_close(nm, dcw2, DCW, d * KK, 5e-5, 1e-4);
		sb_check_close(nm, dlw2, DLW, d, 5e-5, 1e-4);
		sb_check_close(nm, &ds2, &DSC, 1, 1e-4 * (1 + fabs(DSC)), 1e-4);
		free(x), free(o), free(y), free(z), free(mu), free(rsd), free(lw), free(lb), free(cw), free(cb),
		    free(g), free(dx);
		free(dlw), free(dlb), free(dcw), free(dcb);
		free(X), free(O), free(Y), free(Z), free(MU), free(RS), free(LW), free(LB), free(CW), free(CB),
		    free(GG), free(DX), free(DLW), free(DLB), free(DCW), free(DCB), free(o2), free(dx2), free(dcw2),
		    free(dlw2);
	}
}

static void test_ce_adam(void)
{
	int B = 7, C = 13;
	float lg[7 * 13], loss[7], dl[7 * 13];
	int32_t lab[7] = {0, 12, 5, 5, 3, 1, 7}, pred[7];
	frand(lg, (size_t)B * C, -20, 20);
	lg[13 + 2] = lg[13 + 9] = 25.0f; /* a tie: the lower index is the prediction */
	be->ops->cross_entropy(ctx, loss, pred, dl, lg, lab, B, C, 1.0f / 7);
	double L[7], D[7 * 13], l2[7], d2[7 * 13];
	for (int b = 0; b < B; b++) {
		double mx = -INFINITY, s = 0;
		for (int c = 0; c < C; c++)
			mx = fmax(mx, lg[b * C + c]);
		for (int c = 0; c < C; c++)
			s += exp(lg[b * C + c] - mx);
		L[b] = log(s) + mx - lg[b * C + lab[b]];
		for (int c = 0; c < C; c++)
			D[b * C + c] = (exp(lg[b * C + c] - mx) / s - (c == lab[b])) / 7;
		l2[b] = loss[b];
	}
	for (int i = 0; i < B * C; i++)
		d2[i] = dl[i];
	sb_check_close("cross-entropy losses", l2, L, B, 1e-6, 1e-6);
	sb_check_close("cross-entropy d/dlogits", d2, D, (size_t)B * C, 1e-7, 1e-6);
	SB_CHECK(pred[1] == 2, "argmax ties go to the lower index (got %d)", pred[1]);
	{
		/* a NaN logit: the prediction is the first NaN's index, as torch.argmax gives it
		 * (torch 2: argmax([1, nan, 3, nan]) = 1, argmax([nan, 5, 1, 2]) = 0), and the loss
		 * is NaN; a row without NaN is unchanged (+inf the largest) */
		float nl[5 * 4] = {1, NAN, 3, NAN, NAN, 5, 1, 2, 1, 2, 3, 3, -INFINITY, -1e30f, INFINITY, 7, 2, 9, 1, NAN};
		int32_t nlab[5] = {0, 1, 2, 3, 3}, np[5];
		float nls[5];
		be->ops->cross_entropy(ctx, nls, np, NULL, nl, nlab, 5, 4, 1.0f);
		SB_CHECK(np[0] == 1 && np[1] == 0 && np[2] == 2 && np[3] == 2 && np[4] == 3 && isnan(nls[0]) && isnan(nls[1]) &&
		             isnan(nls[4]) && !isnan(nls[2]),
		         "argmax with NaN logits follows torch.argmax: predictions %d %d %d %d %d (want 1 0 2 2 3), "
		         "losses %g %g %g %g (NaN where a logit is)",
		         np[0], np[1], np[2], np[3], np[4], nls[0], nls[1], nls[2], nls[4]);
	}
	/* AdamW against torch's formula in double */
	size_t n = 100003;
	float *p = malloc(n * 4), *m = calloc(n, 4), *v = calloc(n, 4), *g = malloc(n * 4);
	double *P = ref_alloc(n), *M = ref_alloc(n), *V = ref_alloc(n);
	frand(p, n, -1, 1);
	for (size_t i = 0; i < n; i++)
		P[i] = p[i];
	for (int t = 1; t <= 5; t++) {
		frand(g, n, -1e-2, 1e-2);
		be->ops->adamw(sb_be_main(be), p, m, v, g, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f, t);
		double bc1 = 1 - pow(0.9, t), bc2 = 1 - pow(0.999, t);
		for (size_t i = 0; i < n; i++) {
			P[i] *= 1 - 1e-3 * 1e-4;
			M[i] = 0.9 * M[i] + 0.1 * g[i];
			V[i] = 0.999 * V[i] + 0.001 * (double)g[i] * g[i];
			P[i] -= 1e-3 / bc1 * M[i] / (sqrt(V[i]) / sqrt(bc2) + 1e-8);
		}
	}
	double *p2 = todbl(p, n);
	sb_check_close("AdamW: 5 steps on 100003 parameters vs torch's formula in double", p2, P, n, 1e-6, 1e-6);
	double ss = be->ops->sumsq(sb_be_main(be), p, n), want = 0;
	for (size_t i = 0; i < n; i++)
		want += (double)p[i] * p[i];
	sb_check_close("sum of squares (fixed chunk order)", &ss, &want, 1, 0, 1e-12);
	free(p), free(m), free(v), free(g), free(P), free(M), free(V), free(p2);
}

/* which OpenBLAS kernel sets count as a pre-AVX2 fallback on an AVX2 CPU (the LM track's
 * efficiency records and report say so: its dense baseline is OpenBLAS's) */
static void test_blas_core(void)
{
	static const struct {
		const char *core;
		int avx2, want;
	} c[] = {{"Prescott", 1, 1},   {"Prescott", 0, 0}, {"prescott", 1, 1}, {"Sandybridge", 1, 1},
	         {"Core2", 1, 1},      {"Haswell", 1, 0},  {"SkylakeX", 1, 0}, {"Zen", 1, 0},
	         {"Cooperlake", 1, 0}, {"", 1, 0},         {NULL, 1, 0}};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		int got = sb_blas_core_generic(c[i].core, c[i].avx2);
		SB_CHECK(got == c[i].want, "OpenBLAS core '%s' on a CPU %s AVX2: generic %d (want %d)",
		         c[i].core ? c[i].core : "(none)", c[i].avx2 ? "with" : "without", got, c[i].want);
	}
}

/* two CPU backends of `threads` workers, without SB_ARENA_CHECK and with it (0 or not) */
static int open_pair(int threads, struct sb_backend **b0, struct sb_backend **b1, struct sb_err *e)
{
	char *saved = sb_test_env_set("SB_ARENA_CHECK", NULL);
	int rc = sb_backend_open("cpu", threads, b0, e);
	setenv("SB_ARENA_CHECK", "1", 1);
	rc |= sb_backend_open("cpu", threads, b1, e);
	sb_test_env_restore("SB_ARENA_CHECK", saved);
	return rc;
}

/* a hit of `kind` (sb_test_zone_hit) at zone z, the tails checked "after a test" (its rc,
 * e1), the zone restored and checked again (*r2) */
static int hit_and_restore(struct sb_backend *b, unsigned char *z, int kind, struct sb_err *e1, int *r2)
{
	unsigned char orig[4], bad[4];
	struct sb_err e2 = {0};
	memcpy(orig, z, 4);
	sb_test_zone_hit(bad, orig, kind);
	memcpy(z, bad, 4);
	int r1 = sb_be_tails_check(b, "a test", e1);
	memcpy(z, orig, 4);
	*r2 = sb_be_tails_check(b, "a test", &e2);
	return r1;
}

/* SB_ARENA_CHECK's allocation tails (redzone.h): sb_backend_open enables them when the
 * variable is set, and every sb_be_alloc then has a red zone right after the bytes asked
 * for (inside the backend's own rounding); a byte or a float updated in place there is
 * reported with the allocation's file and line, and no longer once restored; a freed
 * allocation is no longer checked; without the variable there are none. */
static void test_alloc_tails(void)
{
	struct sb_err e = {0};
	struct sb_backend *b0 = NULL, *b1 = NULL;
	int rc = open_pair(1, &b0, &b1, &e);
	if (!SB_CHECK(!rc, "allocation tails: two CPU backends (%s)", e.msg))
		return;
	float *p0 = sb_be_alloc(b0, 40), *p1 = sb_be_alloc(b1, 40), *q1 = sb_be_alloc(b1, 4);
	int line = __LINE__ - 1;
	unsigned char *z = sb_be_tail(b1, p1);
	SB_CHECK(!sb_be_tail(b0, p0) && z == (unsigned char *)p1 + 40 && sb_be_tail(b1, q1) == (char *)q1 + 4 &&
	             sb_be_tails_check(b0, "x", &e) == 0 && sb_be_tails_check(b1, "x", &e) == 0,
	         "allocation tails: none without SB_ARENA_CHECK; with it a zone right after the 40 and the 4 bytes asked "
	         "for, intact");
	for (int kind = 0; kind < 2; kind++) {
		struct sb_err e1 = {0};
		int r2, r1 = hit_and_restore(b1, z, kind, &e1, &r2);
		char want[120];
		snprintf(want, sizeof want, "after a test: byte %d past the end of the 40-byte buffer of %s:%d (allocation ",
		         kind ? 2 : 0, __FILE__, line);
		SB_CHECK(r1 == SB_EINTERNAL && strstr(e1.msg, want) && strstr(e1.msg, "of the cpu backend)") && r2 == 0,
		         "allocation tails: %s the zone after a 40-byte allocation is reported (rc %d: %s), and no longer "
		         "once restored (rc %d)",
		         kind ? "a float updated in place (+= 1) in" : "a byte changed in", r1, e1.msg, r2);
	}
	/* a freed allocation's zone is not checked any more (its memory is gone) */
	z = sb_be_tail(b1, q1);
	z[0] ^= 1;
	int r3 = sb_be_tails_check(b1, "x", &e);
	z[0] ^= 1;
	sb_be_free(b1, p1);
	SB_CHECK(r3 == SB_EINTERNAL && !sb_be_tail(b1, p1) && sb_be_tails_check(b1, "x", &e) == 0,
	         "allocation tails: the 4-byte allocation's zone is checked too (rc %d), and a freed one no longer", r3);
	sb_be_free(b1, q1);
	sb_be_free(b0, p0);
	sb_backend_close(b0);
	sb_backend_close(b1);
}

/* SB_ARENA_CHECK's scratch tails (redzone.h): with them each request for a worker's scratch
 * puts a red zone right after the bytes asked for, inside the room the scratch is grown with
 * (where ASan sees nothing); sb_be_tails_check reports a write there with the request's file
 * and line, and no longer once restored; a request checks the zone of the one before (its op
 * has run) and keeps a written one until reported, where the next request may have made the
 * bytes legitimate again; the zone follows the request as the scratch grows; it changes
 * nothing an op computes; without the variable there is none. */
static void test_scratch_tails(void)
{
	struct sb_err e = {0};
	struct sb_backend *b0 = NULL, *b1 = NULL;
	int rc = open_pair(2, &b0, &b1, &e);
	if (!SB_CHECK(!rc, "scratch tails: two CPU backends (%s)", e.msg))
		return;
	struct sb_ctx *c0 = sb_be_main(b0), *c1 = sb_be_main(b1);

	/* an op that uses the scratch: the same bits with the zones as without */
	enum { M = 7, K = 32, N = 48 };
	static float inp[M * K], w[N * K], bias[N], y0[M * N], y1[M * N];
	for (int i = 0; i < M * K; i++)
		inp[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
	for (int i = 0; i < N * K; i++)
		w[i] = (float)((i * 11) % 23) / 16.0f - 0.7f;
	for (int i = 0; i < N; i++)
		bias[i] = (float)i / 32.0f;
	sb_cpu_matmul_forward(c0, y0, inp, w, bias, M, K, N);
	sb_cpu_matmul_forward(c1, y1, inp, w, bias, M, K, N);
	unsigned char *zm = sb_be_scratch_zone(b1, 0);
	SB_CHECK(!sb_be_scratch_zone(b0, 0) && zm && sb_scratch_intact(zm) && !memcmp(y0, y1, sizeof y0) &&
	             sb_be_tails_check(b1, "a product", &e) == 0,
	         "scratch tails: none without SB_ARENA_CHECK; with it a product of %dx%dx%d leaves its zone intact (%s) "
	         "and its %d outputs bit for bit",
	         M, K, N, e.msg, M * N);

	char *p = sb_cpu_scratch(c1, 40);
	memset(p, 0x11, 40);
	unsigned char *z = sb_be_scratch_zone(b1, 0);
	char *again = sb_cpu_scratch(c1, 40); /* the zone is this request's now */
	int line = __LINE__ - 1;
	int kept = 1;
	for (int i = 0; i < 40; i++)
		kept &= p[i] == 0x11;
	SB_CHECK(z == (unsigned char *)p + 40 && again == p && kept && !sb_be_scratch_zone(b1, 1) &&
	             sb_be_tails_check(b1, "x", &e) == 0,
	         "scratch tails: the zone right after the 40 bytes asked for; a request leaves the bytes asked for as "
	         "they were; worker 1 has none yet");
	char want[160];
	for (int kind = 0; kind < 2; kind++) {
		struct sb_err e1 = {0};
		int r2, r1 = hit_and_restore(b1, z, kind, &e1, &r2);
		snprintf(want, sizeof want, "after a test: byte %d past the end of the 40-byte scratch of %s:%d (worker 0's "
		         "scratch (the cpu backend))", kind ? 2 : 0, __FILE__, line);
		SB_CHECK(r1 == SB_EINTERNAL && strstr(e1.msg, want) && r2 == 0,
		         "scratch tails: %s the zone after a 40-byte request is reported (rc %d: %s), and no longer once "
		         "restored (rc %d)",
		         kind ? "a float updated in place (+= 1) in" : "a byte changed in", r1, e1.msg, r2);
	}

	/* the zone follows the request: a larger one makes those bytes its own, and one larger
	 * than the scratch grows it with its zone after the new bytes */
	sb_cpu_scratch(c1, 100);
	p[40] ^= 1; /* inside the 100 bytes now */
	int r0 = sb_be_tails_check(b1, "x", &e);
	size_t big = SB_CPU_SCRATCH_DEFAULT + 4096;
	char *g = sb_cpu_scratch(c1, big);
	SB_CHECK(r0 == 0 && g && sb_be_scratch_zone(b1, 0) == g + big && sb_scratch_intact((unsigned char *)g + big) &&
	             sb_be_tails_check(b1, "x", &e) == 0,
	         "scratch tails: a write inside a later, larger request is not reported (rc %d); a request past the "
	         "scratch grows it, the zone right after the %zu bytes",
	         r0, big);

	/* a write found by the next request, where its bytes are the new request's own: kept
	 * and reported at the next check, and every check after */
	char *q = sb_cpu_scratch(c1, 24);
	int qline = __LINE__ - 1;
	q[24 + 5] = 0;
	sb_cpu_scratch(c1, 64);
	struct sb_err e3 = {0}, e4 = {0};
	int r3 = sb_be_tails_check(b1, "a step", &e3), r4 = sb_be_tails_check(b1, "a step", &e4);
	snprintf(want, sizeof want, "after the op that asked for it: byte 5 past the end of the 24-byte scratch of %s:%d",
	         __FILE__, qline);
	SB_CHECK(r3 == SB_EINTERNAL && strstr(e3.msg, want) && r4 == SB_EINTERNAL && !strcmp(e3.msg, e4.msg),
	         "scratch tails: a write past a 24-byte request, found by the next request, is reported (rc %d: %s) at "
	         "every check after (rc %d)",
	         r3, e3.msg, r4);
	sb_backend_close(b0);
	sb_backend_close(b1);
}

/* a task that asks worker 1 for scratch (sleeping a little, so that both workers take one) */
static int scratch_task_w1(struct sb_ctx *c, int worker, int task, void *arg, struct sb_err *err)
{
	if (worker == 1)
		sb_cpu_scratch(c, 40);
	struct timespec ts = {0, 2000000};
	nanosleep(&ts, NULL);
	return 0;
}

/* a task checking the tails from inside (as a cached forward pass of sb-eval's workers does) */
static int scratch_task_check(struct sb_ctx *c, int worker, int task, void *arg, struct sb_err *err)
{
	int *rc = arg;
	*rc = sb_be_tails_check(c->be, "a task", err);
	return 0;
}

/* Inside a task the other workers may be in the middle of an op on their scratch, so a
 * check made there reads the task's own worker's zone only (sb-eval's cached passes check
 * from their tasks: reading another worker's zone while it moved gave false reports); out
 * of tasks, every worker's. */
static void test_scratch_tails_tasks(void)
{
	struct sb_err e = {0};
	struct sb_backend *b = NULL;
	char *saved = sb_test_env_set("SB_ARENA_CHECK", "1");
	int rc = sb_backend_open("cpu", 2, &b, &e);
	sb_test_env_restore("SB_ARENA_CHECK", saved);
	if (!SB_CHECK(!rc && b->threads == 2, "scratch tails in tasks: a CPU backend of 2 workers (%s)", e.msg))
		return;
	for (int k = 0; k < 200 && !sb_be_scratch_zone(b, 1); k++)
		b->ops->run(b, 2, scratch_task_w1, NULL, &e);
	unsigned char *z1 = sb_be_scratch_zone(b, 1);
	if (SB_CHECK(z1 != NULL, "scratch tails in tasks: worker 1 took a task and asked for scratch")) {
		z1[3] ^= 0x10;
		int inside = -1;
		struct sb_err ei = {0}, eo = {0};
		b->ops->run(b, 1, scratch_task_check, &inside, &ei); /* one task: worker 0, the caller */
		int outside = sb_be_tails_check(b, "the runs", &eo);
		z1[3] ^= 0x10;
		int after = sb_be_tails_check(b, "the runs", &e);
		SB_CHECK(inside == 0 && outside == SB_EINTERNAL &&
		             strstr(eo.msg, "after the runs: byte 3 past the end of the 40-byte scratch of ") &&
		             strstr(eo.msg, "(worker 1's scratch (the cpu backend))") && after == 0,
		         "scratch tails in tasks: a write after worker 1's request is not read from worker 0's task (rc "
		         "%d), is out of tasks (rc %d: %s), and no longer once restored (rc %d)",
		         inside, outside, eo.msg, after);
	}
	sb_backend_close(b);
}

int main(void)
{
	struct sb_err e = {0};
	if (sb_backend_cpu_open(2, &be, &e)) {
		SB_CHECK(0, "open: %s", e.msg);
		return sb_test_done();
	}
	ctx = sb_be_main(be);
	test_alloc_tails();
	test_scratch_tails();
	test_scratch_tails_tasks();
	test_exp_erfc();
	test_dropout();
	test_matmul();
	test_gemm_chains();
	test_layernorm();
	test_lm_norm_chains();
	test_gelu_op();
	test_attention();
	test_attention_chains();
	test_localmix();
	test_ce_adam();
	test_blas_core();
	sb_backend_close(be);
	return sb_test_done();
}
