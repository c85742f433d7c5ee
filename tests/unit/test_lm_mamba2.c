/* test_lm_mamba2 — the Mamba2 mixer (kind M, Granite 4.0's hybrid layers) of the LM track:
 *   - the CPU op mamba2_rows against a plain double-precision transcription written here
 *     (the convolution as an explicit sum over the window of the whole sequence, the
 *     recurrence in double), on random inputs of many shapes (1, primes, groups > 1,
 *     kernels 1 to 4, state sizes below, at and past the vector width);
 *   - the op row-deterministic: all rows at once, one at a time, and in chunks of 7 give
 *     the same bits (the conv window and the state carried in hist and S);
 *   - a model with M layers and Granite's multipliers: token-by-token decoding and a
 *     chunked prefill equal the prefill bit for bit, dense and under the recipe mask, and
 *     the mask is observed on A layers only; the multipliers change the logits;
 *   - the configuration round-trips through JSON; training refuses M layers.
 *   - Granite's mixture of experts (moe_rows) against a double transcription, a tie, each
 *     row's bits whatever the batch, bfloat16 experts equal to float ones bit for bit; a
 *     model with experts: decoding = prefill, float and bfloat16 evaluation models = it.
 *   - Mamba (1)'s scan (mamba1_rows, Jamba's V layers) and gated DeltaNet's recurrence
 *     (deltanet_rows, Qwen3-Next's D layers) against double transcriptions;
 *     chunks of rows give the same bits.
 * (The whole model against transformers' GraniteMoeHybridForCausalLM, JambaForCausalLM: test_lm_import.) */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "backend.h"
#include "json.h"
#include "lm_mask.h"
#include "lm_model.h"
#include "rng.h"

static double silu(double x) { return x / (1.0 + exp(-x)); }

/* y[n, I] for proj[n, I + CD + H] from position 0 (no history), in double; gate 0: without
 * the factor silu(z) */
static void ref_mamba2(double *y, const float *proj, const float *cw, const float *cb, const float *dt_bias,
		       const float *A_log, const float *D, int n, int H, int P, int N, int G, int K, int gate)
{
	int nI = H * P, CD = nI + 2 * G * N;
	size_t ld = (size_t)nI + CD + H;
	double *u = malloc((size_t)CD * sizeof *u), *S = calloc((size_t)H * P * N, sizeof *S);
	for (int t = 0; t < n; t++) {
		const float *row = proj + (size_t)t * ld;
		for (int c = 0; c < CD; c++) {
			double s = cb ? cb[c] : 0;
			for (int i = 0; i < K; i++) { /* tap i reads row t - (K - 1) + i */
				int src = t - (K - 1) + i;
				if (src >= 0)
					s += (double)cw[(size_t)c * K + i] * proj[(size_t)src * ld + nI + c];
			}
			u[c] = silu(s);
		}
		for (int h = 0; h < H; h++) {
			int g = h / (H / G);
			double x0 = row[nI + CD + h] + (double)dt_bias[h];
			double dt = x0 > 20 ? x0 : log1p(exp(x0));
			double dA = exp(-dt * exp((double)A_log[h]));
			for (int p = 0; p < P; p++) {
				double xp = u[h * P + p], acc = 0;
				for (int j = 0; j < N; j++) {
					double *s = &S[((size_t)h * P + p) * N + j];
					*s = *s * dA + dt * xp * u[nI + g * N + j];
					acc += *s * u[nI + G * N + g * N + j];
				}
				y[(size_t)t * nI + h * P + p] = (acc + D[h] * xp) * (gate ? silu(row[h * P + p]) : 1.0);
			}
		}
	}
	free(u);
	free(S);
}

static void fill(float *x, size_t n, struct sb_rng *r, double scale, double shift)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float)(shift + scale * sb_rng_normal(r));
}

static void check_op(struct sb_backend *be)
{
	const struct sb_backend_lm_ops *lo = sb_backend_lm(be);
	struct sb_ctx *ctx = sb_be_main(be);
	/* H, P, N, G, K, n */
	static const int shapes[][6] = {{1, 1, 1, 1, 1, 1},  {1, 1, 1, 1, 4, 5},  {4, 3, 7, 2, 4, 13},
					{6, 5, 3, 3, 3, 29}, {2, 16, 16, 1, 4, 40}, {5, 2, 11, 5, 2, 31},
					{3, 7, 5, 1, 1, 17},  {3, 4, 37, 3, 4, 23}}; /* N 37: two vectors of 16 and a tail */
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		int H = shapes[s][0], P = shapes[s][1], N = shapes[s][2], G = shapes[s][3], K = shapes[s][4];
		int n = shapes[s][5], nI = H * P, CD = nI + 2 * G * N;
		size_t ld = (size_t)nI + CD + H, hl = (size_t)(K > 1 ? K - 1 : 1) * CD, sl = (size_t)nI * N;
		struct sb_rng r;
		sb_rng_init(&r, 40 + s, SB_RNG_USER, 1);
		float *proj = malloc((size_t)n * ld * sizeof *proj), *cw = malloc((size_t)CD * K * sizeof *cw);
		float *cb = malloc((size_t)CD * sizeof *cb), *dtb = malloc((size_t)H * sizeof *dtb);
		float *al = malloc((size_t)H * sizeof *al), *D = malloc((size_t)H * sizeof *D);
		fill(proj, (size_t)n * ld, &r, 1.0, 0);
		fill(cw, (size_t)CD * K, &r, 0.5, 0);
		fill(cb, (size_t)CD, &r, 0.1, 0);
		fill(dtb, (size_t)H, &r, 1.0, -1.0);
		fill(al, (size_t)H, &r, 0.5, 0);
		fill(D, (size_t)H, &r, 0.5, 0);
		if (s == 1) /* a dt above softplus's threshold: taken as is */
			dtb[0] = 30.0f;
		float *y = malloc((size_t)n * nI * sizeof *y), *y1 = malloc((size_t)n * nI * sizeof *y1);
		float *y7 = malloc((size_t)n * nI * sizeof *y7);
		float *hist = malloc(hl * sizeof *hist), *S = malloc(sl * sizeof *S);
		double *want = malloc((size_t)n * nI * sizeof *want), *got = malloc((size_t)n * nI * sizeof *got);
		const float *cbp = s % 2 ? NULL : cb;
		int gate = s % 3 != 2; /* every third shape without the gate (Falcon-H1's norm first) */
		memset(hist, 0, hl * sizeof *hist);
		memset(S, 0, sl * sizeof *S);
		lo->mamba2_rows(ctx, y, proj, hist, S, cw, cbp, dtb, al, D, n, H, P, N, G, K, gate);
		ref_mamba2(want, proj, cw, cbp, dtb, al, D, n, H, P, N, G, K, gate);
		for (size_t i = 0; i < (size_t)n * nI; i++)
			got[i] = y[i];
		char name[160];
		snprintf(name, sizeof name, "mamba2_rows H %d P %d N %d G %d K %d, %d rows%s%s vs the double transcription",
			 H, P, N, G, K, n, cbp ? "" : " (no conv bias)", gate ? "" : " (no gate)");
		/* float32 products and exp/log1p against double through n steps of the recurrence:
		 * errors seen are ~1e-6; 2e-5 + 1e-4 relative leaves room, and a wrong tap, group
		 * or gate is O(1) */
		sb_check_close(name, got, want, (size_t)n * nI, 2e-5, 1e-4);
		memset(hist, 0, hl * sizeof *hist);
		memset(S, 0, sl * sizeof *S);
		for (int t = 0; t < n; t++)
			lo->mamba2_rows(ctx, y1 + (size_t)t * nI, proj + (size_t)t * ld, hist, S, cw, cbp, dtb, al, D, 1, H, P,
					N, G, K, gate);
		memset(hist, 0, hl * sizeof *hist);
		memset(S, 0, sl * sizeof *S);
		for (int t = 0; t < n; t += 7)
			lo->mamba2_rows(ctx, y7 + (size_t)t * nI, proj + (size_t)t * ld, hist, S, cw, cbp, dtb, al, D,
					n - t < 7 ? n - t : 7, H, P, N, G, K, gate);
		SB_CHECK(!memcmp(y1, y, (size_t)n * nI * sizeof *y) && !memcmp(y7, y, (size_t)n * nI * sizeof *y),
			 "mamba2_rows H %d P %d N %d G %d K %d: one row at a time and chunks of 7 give the same bits", H, P, N,
			 G, K);
		free(proj);
		free(cw);
		free(cb);
		free(dtb);
		free(al);
		free(D);
		free(y);
		free(y1);
		free(y7);
		free(hist);
		free(S);
		free(want);
		free(got);
	}
}

/* E experts' matrices [E, N, K] packed one by one for moe_rows (float), and their
 * bfloat16 roundings (to nearest, ties to even) packed for moe_rows_bf16 */
static void pack_experts(const struct sb_backend_lm_ops *lo, struct sb_ctx *ctx, float *wp, uint16_t *wp16,
			 const float *w, int E, int N, int K)
{
	size_t one = (size_t)N * K;
	uint16_t *w16 = malloc(one * sizeof *w16);
	for (int e = 0; e < E; e++) {
		if (wp)
			lo->pack_rows(ctx, wp + (size_t)e * one, w + (size_t)e * one, N, K);
		if (wp16) {
			for (size_t j = 0; j < one; j++) {
				uint32_t u;
				memcpy(&u, &w[(size_t)e * one + j], sizeof u);
				w16[j] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
			}
			lo->pack_rows_bf16(ctx, wp16 + (size_t)e * one, w16, N, K);
		}
	}
	free(w16);
}

/* w rounded to bfloat16 (to nearest, ties to even) and widened back */
static void round_bf16(float *w, size_t n)
{
	for (size_t j = 0; j < n; j++) {
		uint32_t u;
		memcpy(&u, &w[j], sizeof u);
		u = ((u + 0x7fffu + ((u >> 16) & 1)) >> 16) << 16;
		memcpy(&w[j], &u, sizeof u);
	}
}

/* Mamba (1)'s scan, mamba1_rows (Jamba's V layers): against a plain double transcription of
 * transformers' slow_forward recurrence on random inputs of several shapes (I and N at, below and
 * past the vector width; one row to 31); one row at a time and chunks of 5 give the batch's bits */
static void check_mamba1(struct sb_backend *be)
{
	const struct sb_backend_lm_ops *lo = sb_backend_lm(be);
	struct sb_ctx *ctx = sb_be_main(be);
	static const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {16, 16, 12}, {37, 17, 31}, {64, 8, 9}}; /* I, N, n */
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		int I = shapes[s][0], N = shapes[s][1], n = shapes[s][2];
		size_t nI = (size_t)n * I, nN = (size_t)n * N;
		struct sb_rng r;
		sb_rng_init(&r, 90 + s, SB_RNG_USER, 2);
		float *u = malloc(nI * sizeof *u), *dt = malloc(nI * sizeof *dt), *z = malloc(nI * sizeof *z);
		float *B = malloc(nN * sizeof *B), *C = malloc(nN * sizeof *C), *al = malloc((size_t)I * N * sizeof *al);
		float *D = malloc((size_t)I * sizeof *D), *S = calloc((size_t)I * N, sizeof *S);
		float *y = malloc(nI * sizeof *y), *y1 = malloc(nI * sizeof *y1);
		double *want = malloc(nI * sizeof *want), *got = malloc(nI * sizeof *got);
		double *Sd = calloc((size_t)I * N, sizeof *Sd);
		fill(u, nI, &r, 1.0, 0);
		fill(dt, nI, &r, 1.0, -0.5);
		fill(z, nI, &r, 1.0, 0);
		fill(B, nN, &r, 1.0, 0);
		fill(C, nN, &r, 1.0, 0);
		fill(al, (size_t)I * N, &r, 0.5, 0);
		fill(D, (size_t)I, &r, 0.5, 0);
		if (s == 1)
			dt[0] = 25.0f; /* above softplus's threshold: taken as is */
		lo->mamba1_rows(ctx, y, u, dt, B, C, z, S, al, D, n, I, N);
		for (int t = 0; t < n; t++)
			for (int i = 0; i < I; i++) {
				double x0 = dt[(size_t)t * I + i], delta = x0 > 20 ? x0 : log1p(exp(x0)), acc = 0;
				double ui = u[(size_t)t * I + i];
				for (int j = 0; j < N; j++) {
					double *sj = &Sd[(size_t)i * N + j];
					*sj = exp(-exp((double)al[(size_t)i * N + j]) * delta) * *sj + delta * B[(size_t)t * N + j] * ui;
					acc += *sj * C[(size_t)t * N + j];
				}
				want[(size_t)t * I + i] = (acc + D[i] * ui) * silu(z[(size_t)t * I + i]);
			}
		for (size_t i = 0; i < nI; i++)
			got[i] = y[i];
		char name[128];
		snprintf(name, sizeof name, "mamba1_rows I %d N %d, %d rows vs the double transcription", I, N, n);
		/* float exp/log1p and products against double through n steps (errors seen ~1e-6);
		 * a wrong sign, gate, skip or state is O(1) */
		sb_check_close(name, got, want, nI, 2e-5, 1e-4);
		memset(S, 0, (size_t)I * N * sizeof *S);
		for (int t = 0; t < n; t += 5) {
			int k = n - t < 5 ? n - t : 5;
			size_t o = (size_t)t * I, on = (size_t)t * N;
			lo->mamba1_rows(ctx, y1 + o, u + o, dt + o, B + on, C + on, z + o, S, al, D, k, I, N);
		}
		SB_CHECK(!memcmp(y1, y, nI * sizeof *y), "mamba1_rows I %d N %d: chunks of 5 rows give the same bits", I, N);
		free(u);
		free(dt);
		free(z);
		free(B);
		free(C);
		free(al);
		free(D);
		free(S);
		free(y);
		free(y1);
		free(want);
		free(got);
		free(Sd);
	}
}

/* gated DeltaNet's recurrence, deltanet_rows (Qwen3-Next's D layers): against a plain double
 * transcription of transformers' torch_recurrent_gated_delta_rule (with its L2 norms, scale,
 * sigmoid and decay) on several shapes (value heads 1 or 2 per key head); chunks of 3 rows give
 * the batch's bits */
static void check_deltanet(struct sb_backend *be)
{
	const struct sb_backend_lm_ops *lo = sb_backend_lm(be);
	struct sb_ctx *ctx = sb_be_main(be);
	static const int shapes[][5] = {{1, 1, 1, 1, 1}, {2, 4, 8, 8, 9}, {1, 3, 5, 7, 6}, {2, 2, 16, 4, 17}}; /* Hk Hv dk dv n */
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		int Hk = shapes[s][0], Hv = shapes[s][1], dk = shapes[s][2], dv = shapes[s][3], n = shapes[s][4];
		size_t ld = 2 * (size_t)Hk * dk + (size_t)Hv * dv, ny = (size_t)n * Hv * dv, st = (size_t)Hv * dk * dv;
		struct sb_rng r;
		sb_rng_init(&r, 95 + s, SB_RNG_USER, 3);
		float *qkv = malloc((size_t)n * ld * sizeof *qkv), *b = malloc((size_t)n * Hv * sizeof *b);
		float *a = malloc((size_t)n * Hv * sizeof *a), *al = malloc((size_t)Hv * sizeof *al);
		float *dtb = malloc((size_t)Hv * sizeof *dtb), *S = calloc(st, sizeof *S), *y = malloc(ny * sizeof *y);
		float *y1 = malloc(ny * sizeof *y1);
		double *want = malloc(ny * sizeof *want), *got = malloc(ny * sizeof *got), *Sd = calloc(st, sizeof *Sd);
		fill(qkv, (size_t)n * ld, &r, 1.0, 0);
		fill(b, (size_t)n * Hv, &r, 1.0, 0);
		fill(a, (size_t)n * Hv, &r, 1.0, 0);
		fill(al, (size_t)Hv, &r, 0.5, 0);
		fill(dtb, (size_t)Hv, &r, 0.5, 0);
		lo->deltanet_rows(ctx, y, qkv, b, a, S, al, dtb, n, Hk, Hv, dk, dv);
		for (int t = 0; t < n; t++) {
			const float *row = qkv + (size_t)t * ld;
			for (int h = 0; h < Hv; h++) {
				const float *q = row + (size_t)(h / (Hv / Hk)) * dk, *k = row + (size_t)Hk * dk + (size_t)(h / (Hv / Hk)) * dk;
				const float *v = row + 2 * (size_t)Hk * dk + (size_t)h * dv;
				double nq = 0, nk = 0, qn[64], kn[64], dl[64];
				for (int i = 0; i < dk; i++) {
					nq += (double)q[i] * q[i];
					nk += (double)k[i] * k[i];
				}
				for (int i = 0; i < dk; i++) {
					qn[i] = q[i] / sqrt(nq + 1e-6) / sqrt((double)dk);
					kn[i] = k[i] / sqrt(nk + 1e-6);
				}
				double x0 = (double)a[(size_t)t * Hv + h] + dtb[h], sp = x0 > 20 ? x0 : log1p(exp(x0));
				double beta = 1 / (1 + exp(-(double)b[(size_t)t * Hv + h])), decay = exp(-exp((double)al[h]) * sp);
				double *Sh = Sd + (size_t)h * dk * dv;
				for (int i = 0; i < dk * dv; i++)
					Sh[i] *= decay;
				for (int j = 0; j < dv; j++) {
					double m = 0;
					for (int i = 0; i < dk; i++)
						m += Sh[(size_t)i * dv + j] * kn[i];
					dl[j] = (v[j] - m) * beta;
				}
				for (int i = 0; i < dk; i++)
					for (int j = 0; j < dv; j++)
						Sh[(size_t)i * dv + j] += kn[i] * dl[j];
				for (int j = 0; j < dv; j++) {
					double o = 0;
					for (int i = 0; i < dk; i++)
						o += Sh[(size_t)i * dv + j] * qn[i];
					want[((size_t)t * Hv + h) * dv + j] = o;
				}
			}
		}
		for (size_t i = 0; i < ny; i++)
			got[i] = y[i];
		char name[128];
		snprintf(name, sizeof name, "deltanet_rows Hk %d Hv %d dk %d dv %d, %d rows vs the double transcription", Hk,
			 Hv, dk, dv, n);
		/* float sums of dk terms and exp against double through n steps (errors seen ~1e-7);
		 * a wrong head, norm, gate or decay is O(0.1) */
		sb_check_close(name, got, want, ny, 2e-5, 1e-4);
		memset(S, 0, st * sizeof *S);
		for (int t = 0; t < n; t += 3) {
			int k = n - t < 3 ? n - t : 3;
			lo->deltanet_rows(ctx, y1 + (size_t)t * Hv * dv, qkv + (size_t)t * ld, b + (size_t)t * Hv,
					  a + (size_t)t * Hv, S, al, dtb, k, Hk, Hv, dk, dv);
		}
		SB_CHECK(!memcmp(y1, y, ny * sizeof *y), "deltanet_rows Hk %d Hv %d: chunks of 3 rows give the same bits", Hk, Hv);
		free(qkv);
		free(b);
		free(a);
		free(al);
		free(dtb);
		free(S);
		free(y);
		free(y1);
		free(want);
		free(got);
		free(Sd);
	}
}

/* Granite's mixture of experts, moe_rows: against a double transcription (top-k by a full
 * sort, ties to the lower index) on shapes with 1 to 8 experts, top 1 to all of them, d and
 * Fe below, at and past the vector width, the products' panel (48) and k block (128),
 * 1 to 37 rows (an expert then gets blocks of rows and rows left over); a tie between two
 * experts resolved towards the lower index; each row alone, and the rows in reverse order
 * (other batches per expert), give the batch's bits; bfloat16 experts give the float op's
 * bits on the widened weights */
static void check_moe(struct sb_backend *be)
{
	const struct sb_backend_lm_ops *lo = sb_backend_lm(be);
	struct sb_ctx *ctx = sb_be_main(be);
	/* d, E, K, Fe, n */
	static const int shapes[][5] = {{1, 1, 1, 1, 1},    {19, 5, 2, 7, 6},    {33, 8, 3, 17, 4},
					{16, 4, 4, 16, 3},  {150, 8, 3, 53, 37}, {50, 7, 7, 49, 11},
					{131, 6, 6, 20, 1}, {61, 3, 1, 130, 9}};
	int nsh = (int)(sizeof shapes / sizeof shapes[0]);
	for (int s = 0; s <= nsh; s++) {
		int tie = s == nsh, sh = tie ? 1 : s;
		int d = shapes[sh][0], E = shapes[sh][1], K = shapes[sh][2], Fe = shapes[sh][3], n = shapes[sh][4];
		struct sb_rng r;
		sb_rng_init(&r, 70 + s, SB_RNG_USER, 4);
		size_t ni = (size_t)E * 2 * Fe * d, no = (size_t)E * d * Fe, nd = (size_t)n * d;
		float *x = malloc(nd * sizeof *x), *wr = malloc((size_t)E * d * sizeof *wr);
		float *wi = malloc(ni * sizeof *wi), *wo = malloc(no * sizeof *wo);
		float *wip = malloc(ni * sizeof *wip), *wop = malloc(no * sizeof *wop);
		uint16_t *wi16 = malloc(ni * sizeof *wi16), *wo16 = malloc(no * sizeof *wo16);
		float *out = malloc(nd * sizeof *out), *base = malloc(nd * sizeof *base);
		float *o1 = malloc(nd * sizeof *o1), *rev = malloc(nd * sizeof *rev), *xr = malloc(nd * sizeof *xr);
		float *scr = malloc(SB_LM_MOE_SCRATCH(n, d, E, K, Fe) * sizeof *scr);
		double *want = malloc(nd * sizeof *want), *got = malloc(nd * sizeof *got);
		fill(x, nd, &r, 1.0, 0);
		fill(wr, (size_t)E * d, &r, 0.5, 0);
		fill(wi, ni, &r, 0.3, 0);
		fill(wo, no, &r, 0.3, 0);
		fill(base, nd, &r, 1.0, 0);
		if (tie) { /* experts 1 and 3 score the same (the same router row), the others 0: where
			    * that score is positive the tie is at the top and K = 1 must pick expert 1 */
			memset(wr, 0, (size_t)E * d * sizeof *wr);
			for (int j = 0; j < d; j++)
				wr[(size_t)3 * d + j] = wr[(size_t)1 * d + j] = (float)sb_rng_normal(&r);
		}
		int top_ties = 0;
		int Ku = tie ? 1 : K;
		int ga = s % 2; /* odd shapes: the softmax over every expert (Jamba's gates) */
		pack_experts(lo, ctx, wip, NULL, wi, E, 2 * Fe, d);
		pack_experts(lo, ctx, wop, NULL, wo, E, d, Fe);
		memcpy(out, base, nd * sizeof *out);
		lo->moe_rows(ctx, out, x, wr, wip, wop, scr, n, d, E, Ku, Fe, ga);
		for (int i = 0; i < n; i++) {
			const float *xi = x + (size_t)i * d;
			double lg[64];
			int order[64];
			for (int e = 0; e < E; e++) {
				double t = 0;
				for (int j = 0; j < d; j++)
					t += (double)wr[(size_t)e * d + j] * xi[j];
				lg[e] = t;
				order[e] = e;
			}
			for (int a = 0; a < E; a++) /* stable selection sort: descending, ties by index */
				for (int b = a + 1; b < E; b++)
					if (lg[order[b]] > lg[order[a]]) {
						int t = order[a];
						order[a] = order[b];
						order[b] = t;
					}
			top_ties += tie && lg[1] > 0 && lg[1] == lg[3];
			double sum = 0, g[64];
			for (int k = 0; k < Ku; k++)
				sum += g[k] = exp(lg[order[k]] - lg[order[0]]);
			if (ga) {
				sum = 0;
				for (int e = 0; e < E; e++)
					sum += exp(lg[e] - lg[order[0]]);
			}
			for (int j = 0; j < d; j++)
				want[(size_t)i * d + j] = base[(size_t)i * d + j];
			for (int k = 0; k < Ku; k++) {
				int e = order[k];
				double *hh = malloc((size_t)2 * Fe * sizeof *hh);
				for (int q = 0; q < 2 * Fe; q++) {
					double t = 0;
					for (int j = 0; j < d; j++)
						t += (double)wi[((size_t)e * 2 * Fe + q) * d + j] * xi[j];
					hh[q] = t;
				}
				for (int j = 0; j < d; j++) {
					double t = 0;
					for (int q = 0; q < Fe; q++)
						t += (double)wo[((size_t)e * d + j) * Fe + q] * silu(hh[q]) * hh[Fe + q];
					want[(size_t)i * d + j] += g[k] / sum * t;
				}
				free(hh);
			}
		}
		for (size_t i = 0; i < nd; i++)
			got[i] = out[i];
		char name[160];
		snprintf(name, sizeof name, "moe_rows d %d, %d experts of %d, top %d, %d rows%s%s vs the double transcription",
			 d, E, Fe, Ku, n, tie ? " (a tie between experts 1 and 3: 1 picked)" : "",
			 ga ? " (gates over all experts)" : "");
		/* float FMA chains of d and Fe terms (one chain each, not dotf's 16 partial sums)
		 * vs double, on sums up to ~40: the rounding grows with the chains' length
		 * (observed 2.4e-7 at d 19, 9e-5 at d 150, Fe 53), hence 2e-5 plus 1e-6 per term;
		 * a wrong pick, gate or expert row is O(0.1) */
		sb_check_close(name, got, want, nd, 2e-5 + 1e-6 * (d + Fe), 1e-4);
		if (tie)
			SB_CHECK(top_ties > 0, "moe_rows: the tie was at the top in %d of %d rows", top_ties, n);
		/* each row alone */
		memcpy(o1, base, nd * sizeof *o1);
		for (int i = 0; i < n; i++)
			lo->moe_rows(ctx, o1 + (size_t)i * d, x + (size_t)i * d, wr, wip, wop, scr, 1, d, E, Ku, Fe, ga);
		SB_CHECK(!memcmp(o1, out, nd * sizeof *o1),
			 "moe_rows d %d E %d top %d, %d rows: one row at a time, the same bits", d, E, Ku, n);
		/* the rows in reverse order: each expert's batch holds them at other places */
		for (int i = 0; i < n; i++) {
			memcpy(xr + (size_t)(n - 1 - i) * d, x + (size_t)i * d, (size_t)d * sizeof *xr);
			memcpy(rev + (size_t)(n - 1 - i) * d, base + (size_t)i * d, (size_t)d * sizeof *rev);
		}
		lo->moe_rows(ctx, rev, xr, wr, wip, wop, scr, n, d, E, Ku, Fe, ga);
		int same = 1;
		for (int i = 0; i < n && same; i++)
			same = !memcmp(rev + (size_t)(n - 1 - i) * d, out + (size_t)i * d, (size_t)d * sizeof *rev);
		SB_CHECK(same, "moe_rows d %d E %d top %d, %d rows: the rows reversed, each row's bits the same", d, E, Ku,
			 n);
		/* bfloat16 experts vs the float op on the widened (rounded) weights */
		round_bf16(wi, ni);
		round_bf16(wo, no);
		pack_experts(lo, ctx, wip, wi16, wi, E, 2 * Fe, d);
		pack_experts(lo, ctx, wop, wo16, wo, E, d, Fe);
		memcpy(out, base, nd * sizeof *out);
		lo->moe_rows(ctx, out, x, wr, wip, wop, scr, n, d, E, Ku, Fe, ga);
		memcpy(o1, base, nd * sizeof *o1);
		lo->moe_rows_bf16(ctx, o1, x, wr, wi16, wo16, scr, n, d, E, Ku, Fe, ga);
		SB_CHECK(!memcmp(o1, out, nd * sizeof *o1),
			 "moe_rows_bf16 d %d E %d top %d, %d rows: the float op's bits on the widened weights", d, E, Ku,
			 n);
		memcpy(o1, base, nd * sizeof *o1);
		for (int i = 0; i < n; i++)
			lo->moe_rows_bf16(ctx, o1 + (size_t)i * d, x + (size_t)i * d, wr, wi16, wo16, scr, 1, d, E, Ku, Fe,
					  ga);
		SB_CHECK(!memcmp(o1, out, nd * sizeof *o1),
			 "moe_rows_bf16 d %d E %d top %d, %d rows: one row at a time, the same bits", d, E, Ku, n);
		free(x);
		free(wr);
		free(wi);
		free(wo);
		free(wip);
		free(wop);
		free(wi16);
		free(wo16);
		free(out);
		free(base);
		free(o1);
		free(rev);
		free(xr);
		free(scr);
		free(want);
		free(got);
	}
}

static struct sb_lm_model *make(struct sb_backend *be, const char *extra)
{
	struct sb_lm_cfg c;
	sb_lm_cfg_default(&c);
	const char *kv[] = {"pattern=MAMMA", "d=32", "heads=4", "kv_heads=2", "ffn=48", "mlp=swiglu", "norm=rmsnorm",
			    "ssm_heads=4", "ssm_head_dim=16", "ssm_state=8", "ssm_groups=2", "conv_k=4", "max_T=96",
			    "init_std=0.2", extra};
	struct sb_err err = {0};
	for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
		if (kv[i] && sb_lm_cfg_set(&c, kv[i], &err))
			SB_CHECK(0, "cfg %s: %s", kv[i], err.msg);
	struct sb_lm_model *m = NULL;
	if (sb_lm_model_new(be, &c, &m, &err) || sb_lm_model_init(m, 5, &err)) {
		SB_CHECK(0, "model: %s", err.msg);
		return NULL;
	}
	/* random A_log, dt_bias and D (the initialisation's are constants) */
	struct sb_rng r;
	sb_rng_init(&r, 9, SB_RNG_USER, 2);
	for (int l = 0; l < m->cfg.n_layer; l++)
		if (m->cfg.pattern[l] == 'M') {
			fill(m->w.layer[l].A_log, 4, &r, 0.5, 0);
			fill(m->w.layer[l].dt_bias, 4, &r, 1.0, -1.0);
			fill(m->w.layer[l].Dskip, 4, &r, 0.5, 0);
		}
	sb_lm_model_prepare(m);
	return m;
}

static void check_model(struct sb_backend *be)
{
	enum { T = 60 };
	struct sb_ctx *ctx = sb_be_main(be);
	struct sb_err err = {0};
	struct sb_lm_model *m = make(be, "resid_mult=0.5"), *m0 = make(be, NULL);
	if (!m || !m0)
		return;
	int V = m->cfg.vocab, L = m->cfg.n_layer;
	uint8_t tok[T];
	struct sb_rng r;
	sb_rng_init(&r, 3, SB_RNG_USER, 3);
	for (int i = 0; i < T; i++)
		tok[i] = (uint8_t)sb_rng_below(&r, 256);
	struct sb_lm_cache *c = NULL;
	sb_lm_cache_new(m, T, &c, &err);
	float *full = malloc((size_t)T * V * sizeof *full), *step = malloc((size_t)T * V * sizeof *step);
	float *chunk = malloc((size_t)T * V * sizeof *chunk);
	struct sb_lm_attn_obs *obs = calloc((size_t)L, sizeof *obs);
	const char *specs[] = {"dense", "recipe:s=2,w=4,k=4"};
	for (int k = 0; k < 2; k++) {
		struct sb_lm_mask mk;
		int rc = sb_lm_mask_parse(specs[k], &mk, &err);
		const struct sb_lm_mask *mp = k ? &mk : NULL;
		memset(obs, 0, (size_t)L * sizeof *obs);
		sb_lm_cache_reset(c, 1);
		if (!rc)
			rc = sb_lm_forward_cached(ctx, m, c, tok, T, mp, full, 1, obs, &err);
		sb_lm_cache_reset(c, 1);
		for (int t = 0; t < T && !rc; t++)
			rc = sb_lm_forward_cached(ctx, m, c, tok + t, 1, mp, step + (size_t)t * V, 0, NULL, &err);
		sb_lm_cache_reset(c, 1);
		for (int t = 0; t < T && !rc; t += 9)
			rc = sb_lm_forward_cached(ctx, m, c, tok + t, T - t < 9 ? T - t : 9, mp, chunk + (size_t)t * V, 1, NULL,
						  &err);
		SB_CHECK(!rc && !memcmp(step, full, (size_t)T * V * sizeof *full) &&
				 !memcmp(chunk, full, (size_t)T * V * sizeof *full),
			 "MAMMA %s: token-by-token decoding and a prefill in chunks of 9 equal the prefill bit for bit (%s)",
			 specs[k], rc ? err.msg : "compared");
		int finite = 1;
		for (size_t i = 0; i < (size_t)T * V; i++)
			finite &= isfinite(full[i]) != 0;
		SB_CHECK(finite, "MAMMA %s: finite logits", specs[k]);
		if (k) {
			int where = 1;
			for (int l = 0; l < L; l++)
				where &= m->cfg.pattern[l] == 'A' ? obs[l].kept > 0 && obs[l].kept < obs[l].causal
								  : obs[l].causal == 0 && obs[l].rows == 0;
			SB_CHECK(where, "MAMMA recipe: observed on the A layers (1, 4) only");
		}
	}
	/* the residual multiplier is applied: the same weights without it give other logits */
	struct sb_lm_cache *c0 = NULL;
	sb_lm_cache_new(m0, T, &c0, &err);
	int rc = sb_lm_forward_cached(ctx, m0, c0, tok, T, NULL, step, 1, NULL, &err);
	sb_lm_cache_reset(c, 0);
	rc |= sb_lm_forward_cached(ctx, m, c, tok, T, NULL, full, 1, NULL, &err);
	SB_CHECK(!rc && memcmp(step, full, (size_t)T * V * sizeof *full), "resid_mult 0.5 changes the logits");
	/* JSON round trip of the M fields and the multipliers */
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_lm_cfg_json(&w, &m->cfg);
	struct sb_json *v = NULL;
	struct sb_lm_cfg back;
	sb_lm_cfg_default(&back);
	rc = sb_json_parse(w.buf, w.len, &v, &err);
	if (!rc)
		rc = sb_lm_cfg_from_json(&back, v, &err);
	SB_CHECK(!rc && !strcmp(back.pattern, "MAMMA") && back.ssm_heads == 4 && back.ssm_head_dim == 16 &&
			 back.ssm_state == 8 && back.ssm_groups == 2 && back.ssm_conv_bias == 1 && back.ssm_proj_bias == 0 &&
			 back.resid_mult == 0.5f && back.emb_mult == 1.0f && back.attn_scale == 0.0f && back.logit_div == 1.0f,
		 "the M fields and multipliers round-trip through JSON (%.*s)", (int)w.len, w.buf);
	sb_json_free(v);
	sb_jw_free(&w);
	/* training refuses M layers */
	struct sb_lm_train_opts o = {.B = 1, .T = 16, .tile = 1, .b1 = 0.9f, .b2 = 0.99f, .eps = 1e-8f, .clip = 1.0f};
	struct sb_lm_trainer *tr = NULL;
	rc = sb_lm_trainer_new(m0, &o, &tr, &err);
	SB_CHECK(rc == SB_EUSAGE && strstr(err.msg, "evaluation-only"), "training an M model is refused (%s)", err.msg);
	sb_lm_trainer_free(tr);
	/* an M layer needs its sizes */
	struct sb_lm_cfg bad;
	sb_lm_cfg_default(&bad);
	sb_lm_cfg_set(&bad, "pattern=MA", &err);
	SB_CHECK(sb_lm_cfg_check(&bad, &err) == SB_EUSAGE && strstr(err.msg, "ssm_heads"),
		 "M layers without ssm sizes are refused (%s)", err.msg);
	free(full);
	free(step);
	free(chunk);
	free(obs);
	sb_lm_cache_free(c);
	sb_lm_cache_free(c0);
	sb_lm_model_free(m);
	sb_lm_model_free(m0);
}

/* A model with Granite's experts (MAMMA, 6 experts of 20, top 2) at every layer: the full
 * model (its experts packed from the parameters, prepare) decodes token by token with the
 * prefill's bits; an evaluation-only model loaded from its tensors gives those bits; so does
 * one loaded from the same weights in BF16 (Linear weights, experts and embedding), against
 * the full model on the rounded weights */
static void check_moe_model(struct sb_backend *be)
{
	enum { T = 40 };
	struct sb_ctx *ctx = sb_be_main(be);
	struct sb_err err = {0};
	struct sb_lm_cfg cf;
	sb_lm_cfg_default(&cf);
	const char *kv[] = {"pattern=MAMMA", "d=32",         "heads=4",      "kv_heads=2",   "ffn=48",
			    "mlp=swiglu",    "norm=rmsnorm", "ssm_heads=4",  "ssm_head_dim=16", "ssm_state=8",
			    "ssm_groups=2",  "conv_k=4",     "max_T=96",     "init_std=0.2", "moe_experts=6",
			    "moe_topk=2",    "moe_ffn=20"};
	int rc = 0;
	for (size_t i = 0; i < sizeof kv / sizeof kv[0] && !rc; i++)
		rc = sb_lm_cfg_set(&cf, kv[i], &err);
	struct sb_lm_model *m = NULL, *me = NULL, *mb = NULL;
	struct sb_tensors ts, tb;
	sb_tensors_init(&ts);
	sb_tensors_init(&tb);
	if (!rc)
		rc = sb_lm_model_new(be, &cf, &m, &err);
	if (!rc)
		rc = sb_lm_model_init(m, 11, &err);
	if (!rc) { /* every weight rounded to bfloat16 (exact in float, so the full model's too) */
		for (int i = 0; i < m->n_params; i++)
			round_bf16(m->p + m->params[i].offset, m->params[i].numel);
		sb_lm_model_prepare(m);
		rc = sb_lm_model_to_tensors(m, &ts, &err);
	}
	for (size_t i = 0; i < ts.n && !rc; i++) { /* the same tensors, as BF16 */
		const struct sb_tensor *t = &ts.t[i];
		size_t n = (size_t)sb_tensor_numel(t);
		uint16_t *h = malloc(n * sizeof *h);
		for (size_t j = 0; j < n; j++) {
			uint32_t u;
			memcpy(&u, (const float *)t->data + j, sizeof u);
			h[j] = (uint16_t)(u >> 16);
		}
		rc = sb_tensors_add(&tb, t->name, SB_BF16, t->ndim, t->shape, h, 0, &err);
		free(h);
	}
	if (!rc)
		rc = sb_lm_model_new_eval(be, &cf, 0, &me, &err);
	if (!rc)
		rc = sb_lm_model_from_tensors(me, &ts, &err);
	if (!rc)
		rc = sb_lm_model_new_eval(be, &cf, sb_lm_tensors_bf16(&cf, &tb), &mb, &err);
	if (!rc)
		rc = sb_lm_model_from_tensors(mb, &tb, &err);
	SB_CHECK(!rc && mb->bf16, "MoE model: made, and loaded as float and as bfloat16 (%s)", rc ? err.msg : "ok");
	if (rc) {
		sb_tensors_free(&ts);
		sb_tensors_free(&tb);
		sb_lm_model_free(m);
		sb_lm_model_free(me);
		sb_lm_model_free(mb);
		return;
	}
	int V = cf.vocab;
	uint8_t tok[T];
	struct sb_rng r;
	sb_rng_init(&r, 4, SB_RNG_USER, 3);
	for (int i = 0; i < T; i++)
		tok[i] = (uint8_t)sb_rng_below(&r, 256);
	float *full = malloc((size_t)T * V * sizeof *full), *step = malloc((size_t)T * V * sizeof *step);
	float *ev = malloc((size_t)T * V * sizeof *ev), *bf = malloc((size_t)T * V * sizeof *bf);
	struct sb_lm_cache *c = NULL, *ce = NULL, *cb = NULL;
	rc = sb_lm_cache_new(m, T, &c, &err);
	if (!rc)
		rc = sb_lm_cache_new(me, T, &ce, &err);
	if (!rc)
		rc = sb_lm_cache_new(mb, T, &cb, &err);
	if (!rc)
		rc = sb_lm_forward_cached(ctx, m, c, tok, T, NULL, full, 1, NULL, &err);
	sb_lm_cache_reset(c, 1);
	for (int t = 0; t < T && !rc; t++)
		rc = sb_lm_forward_cached(ctx, m, c, tok + t, 1, NULL, step + (size_t)t * V, 0, NULL, &err);
	SB_CHECK(!rc && !memcmp(step, full, (size_t)T * V * sizeof *full),
		 "MoE model: token-by-token decoding equals the prefill bit for bit (%s)", rc ? err.msg : "compared");
	if (!rc)
		rc = sb_lm_forward_cached(ctx, me, ce, tok, T, NULL, ev, 1, NULL, &err);
	SB_CHECK(!rc && !memcmp(ev, full, (size_t)T * V * sizeof *full),
		 "MoE model: the evaluation-only float model gives the full model's bits (%s)", rc ? err.msg : "compared");
	if (!rc)
		rc = sb_lm_forward_cached(ctx, mb, cb, tok, T, NULL, bf, 1, NULL, &err);
	SB_CHECK(!rc && !memcmp(bf, full, (size_t)T * V * sizeof *full),
		 "MoE model: the bfloat16 model (experts in bfloat16) gives the float model's bits (%s)",
		 rc ? err.msg : "compared");
	int finite = 1;
	for (size_t i = 0; i < (size_t)T * V; i++)
		finite &= isfinite(full[i]) != 0;
	SB_CHECK(finite, "MoE model: finite logits");
	free(full);
	free(step);
	free(ev);
	free(bf);
	sb_lm_cache_free(c);
	sb_lm_cache_free(ce);
	sb_lm_cache_free(cb);
	sb_tensors_free(&ts);
	sb_tensors_free(&tb);
	sb_lm_model_free(m);
	sb_lm_model_free(me);
	sb_lm_model_free(mb);
}

int main(void)
{
	struct sb_backend *be;
	struct sb_err err = {0};
	if (sb_backend_cpu_open(1, &be, &err)) {
		SB_CHECK(0, "backend: %s", err.msg);
		return sb_test_done();
	}
	check_op(be);
	check_mamba1(be);
	check_deltanet(be);
	check_moe(be);
	check_moe_model(be);
	check_model(be);
	sb_backend_close(be);
	return sb_test_done();
}
