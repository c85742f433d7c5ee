/* backend_cpu_lm.c — the CPU implementation of the LM track's ops
 * (struct sb_backend_lm_ops, lib/backend.h): norms, RoPE, SwiGLU, causal
 * attention (training: OpenBLAS; evaluation: row kernels with the sparse
 * masks of lib/lm_mask.h), the gated short convolution and linear attention.
 *
 * Single-threaded per call, like the rest of the CPU backend: the parallelism
 * is the backend's tasks. The evaluation ("rows") ops compute each row with a
 * fixed sequence of operations that does not depend on how many rows a call
 * processes, so a prefill and token-by-token decoding give the same bits.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "backend_cpu_simd.h"
#include "lm_mask.h"

/* ---------------------------------------------------------------- small helpers */

/* fixed-order dot product */
static inline float dotf(const float *a, const float *b, int n)
{
	int c = 0;
	float s = 0;
	if (n >= VL) {
		ve acc[VP];
		for (int h = 0; h < VP; h++)
			acc[h] = vzero_e();
		for (; c + VL <= n; c += VL)
			for (int h = 0; h < VP; h++)
				acc[h] = vfma_e(vload_e(a + c + h * VE), vload_e(b + c + h * VE), acc[h]);
		s = vhsum_parts(acc);
	}
	for (; c < n; c++)
		s = sfma(a[c], b[c], s);
	return s;
}

/* y = a x + y */
static inline void axpy(float *y, float a, const float *x, int n)
{
	int c = 0;
	ve va = vset1_e(a);
	for (; c + VE <= n; c += VE)
		vstore_e(y + c, vfma_e(va, vload_e(x + c), vload_e(y + c)));
	for (; c < n; c++)
		y[c] = sfma(a, x[c], y[c]);
}

static inline float phi(float x) { return x > 0 ? x + 1.0f : expf(x); }
static inline float dphi(float x) { return x > 0 ? 1.0f : expf(x); }

/* ---------------------------------------------------------------- embedding, positions */

static void lm_embedding_backward(struct sb_ctx *ctx, float *dtable, const float *dout, const int32_t *ids, int n,
				  int d)
{
	for (int i = 0; i < n; i++)
		axpy(dtable + (size_t)ids[i] * d, 1.0f, dout + (size_t)i * d, d);
}

static void lm_pos_forward(struct sb_ctx *ctx, float *x, const float *pos, int B, int T, int t0, int d)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			float *xi = x + ((size_t)b * T + t) * d;
			const float *p = pos + (size_t)(t0 + t) * d;
			for (int c = 0; c < d; c++)
				xi[c] += p[c];
		}
}

static void lm_pos_backward(struct sb_ctx *ctx, float *dpos, const float *dx, int B, int T, int t0, int d)
{
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			axpy(dpos + (size_t)(t0 + t) * d, 1.0f, dx + ((size_t)b * T + t) * d, d);
}

/* ---------------------------------------------------------------- norms */

#if defined(__AVX512F__)
/* mean (0 for RMSNorm) and rstd of 16 rows (d a multiple of 16) as lm_norm_forward's row
 * loop computes them, the two sums of the 16 rows reduced together (vhsum16) */
static void norm_moments16(float *mean, float *rstd, const float *x, int d, float eps, int rms)
{
	__m512 a[16], mu = _mm512_setzero_ps();
	if (!rms) {
		for (int g = 0; g < 16; g++) {
			__m512 s = _mm512_setzero_ps();
			for (int c = 0; c < d; c += 16)
				s = _mm512_add_ps(s, _mm512_loadu_ps(x + (size_t)g * d + c));
			a[g] = s;
		}
		mu = _mm512_div_ps(vhsum16(a), _mm512_set1_ps((float)d));
	}
	float m[16];
	_mm512_storeu_ps(m, mu);
	for (int g = 0; g < 16; g++) {
		__m512 q = _mm512_setzero_ps(), vm = _mm512_set1_ps(m[g]);
		for (int c = 0; c < d; c += 16) {
			__m512 t = _mm512_sub_ps(_mm512_loadu_ps(x + (size_t)g * d + c), vm);
			q = _mm512_fmadd_ps(t, t, q);
		}
		a[g] = q;
	}
	__m512 var = _mm512_add_ps(_mm512_div_ps(vhsum16(a), _mm512_set1_ps((float)d)), _mm512_set1_ps(eps));
	_mm512_storeu_ps(rstd, _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_sqrt_ps(var)));
	_mm512_storeu_ps(mean, mu);
}
#endif

static void lm_norm_forward(struct sb_ctx *ctx, float *out, float *mean, float *rstd, const float *x, const float *w,
			    const float *b, int M, int d, float eps, int rms)
{
	int i = 0;
#if defined(__AVX512F__)
	if (d % 16 == 0)
		for (; i + 16 <= M; i += 16) {
			float mu[16];
			norm_moments16(mu, rstd + i, x + (size_t)i * d, d, eps, rms);
			if (mean)
				memcpy(mean + i, mu, sizeof mu);
			for (int g = i; g < i + 16; g++) {
				const float *xi = x + (size_t)g * d;
				float *oi = out + (size_t)g * d;
				vf vm = vset1(mu[g - i]), vr = vset1(rstd[g]);
				for (int c = 0; c < d; c += VL) {
					vf xh = (vload(xi + c) - vm) * vr;
					vstore(oi + c, b ? vfma(xh, vload(w + c), vload(b + c)) : xh * vload(w + c));
				}
			}
		}
#endif
	for (; i < M; i++) {
		const float *xi = x + (size_t)i * d;
		float *oi = out + (size_t)i * d;
		float mu = 0;
		if (!rms) {
			float s = 0;
			int c = 0;
			if (d >= VL) {
				ve a[VP];
				for (int h = 0; h < VP; h++)
					a[h] = vzero_e();
				for (; c + VL <= d; c += VL)
					for (int h = 0; h < VP; h++)
						a[h] += vload_e(xi + c + h * VE);
				s = vhsum_parts(a);
			}
			for (; c < d; c++)
				s += xi[c];
			mu = s / (float)d;
		}
		float q = 0;
		int c = 0;
		if (d >= VL) {
			ve a[VP], m = vset1_e(mu);
			for (int h = 0; h < VP; h++)
				a[h] = vzero_e();
			for (; c + VL <= d; c += VL)
				for (int h = 0; h < VP; h++) {
					ve t = vload_e(xi + c + h * VE) - m;
					a[h] = vfma_e(t, t, a[h]);
				}
			q = vhsum_parts(a);
		}
		for (; c < d; c++) {
			float t = xi[c] - mu;
			q = sfma(t, t, q);
		}
		float rs = 1.0f / sqrtf(q / (float)d + eps);
		if (mean)
			mean[i] = mu;
		rstd[i] = rs;
		ve vm = vset1_e(mu), vr = vset1_e(rs);
		for (c = 0; c + VE <= d; c += VE) {
			ve xh = (vload_e(xi + c) - vm) * vr;
			vstore_e(oi + c, b ? vfma_e(xh, vload_e(w + c), vload_e(b + c)) : xh * vload_e(w + c));
		}
		for (; c < d; c++) {
			float xh = (xi[c] - mu) * rs;
			oi[c] = b ? sfma(xh, w[c], b[c]) : xh * w[c];
		}
	}
}

/* one row of the norm backward given its sums s1 = sum_c dxh, s2 = sum_c dxh xh (dxh = g w,
 * xh = (x - mu) rs, each a chain over c in order): dw += g xh, db += g (chains over the rows
 * in order), dx += (dxh - s1/d - xh s2/d) rs */
static inline void norm_backward_row(float *dxi, float *dw, float *db, const float *g, const float *xi, float mu,
				     float rs, const float *w, int d, int rms, float s1, float s2)
{
	ve vm = vset1_e(mu), vr = vset1_e(rs);
	int c = 0;
	for (; c + VE <= d; c += VE) {
		ve gg = vload_e(g + c), xh = (vload_e(xi + c) - vm) * vr;
		vstore_e(dw + c, vfma_e(gg, xh, vload_e(dw + c)));
		if (db)
			vstore_e(db + c, vload_e(db + c) + gg);
	}
	for (; c < d; c++) {
		float xh = (xi[c] - mu) * rs;
		dw[c] = sfma(g[c], xh, dw[c]);
		if (db)
			db[c] += g[c];
	}
	float m1 = rms ? 0.0f : s1 / (float)d, m2 = s2 / (float)d;
	ve v1 = vset1_e(m1), v2 = vset1_e(m2);
	for (c = 0; c + VE <= d; c += VE) {
		ve xh = (vload_e(xi + c) - vm) * vr;
		vstore_e(dxi + c, vload_e(dxi + c) + (vload_e(g + c) * vload_e(w + c) - v1 - xh * v2) * vr);
	}
	for (; c < d; c++) {
		float xh = (xi[c] - mu) * rs;
		dxi[c] += (g[c] * w[c] - m1 - xh * m2) * rs;
	}
}

#if defined(__AVX512F__)
/* s1, s2 of 16 consecutive rows (d a multiple of 16) with a row in each lane: the rows'
 * blocks of 16 columns transposed in registers, then the same chains over c as a row's
 * scalar loop, 16 rows at once */
static void norm_sums16(float *s1, float *s2, const float *g, const float *x, const float *mean, const float *rstd,
			const float *w, int d)
{
	__m512 mu = mean ? _mm512_loadu_ps(mean) : _mm512_setzero_ps(), rs = _mm512_loadu_ps(rstd);
	__m512 a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps();
	for (int c0 = 0; c0 < d; c0 += 16) {
		__m512 G[16], X[16];
		for (int r = 0; r < 16; r++) {
			G[r] = _mm512_loadu_ps(g + (size_t)r * d + c0);
			X[r] = _mm512_loadu_ps(x + (size_t)r * d + c0);
		}
		vtranspose16(G);
		vtranspose16(X);
		for (int c = 0; c < 16; c++) {
			__m512 xh = _mm512_mul_ps(_mm512_sub_ps(X[c], mu), rs);
			__m512 dxh = _mm512_mul_ps(G[c], _mm512_set1_ps(w[c0 + c]));
			a1 = _mm512_add_ps(a1, dxh);
			a2 = _mm512_fmadd_ps(dxh, xh, a2);
		}
	}
	_mm512_storeu_ps(s1, a1);
	_mm512_storeu_ps(s2, a2);
}
#endif

static void lm_norm_backward(struct sb_ctx *ctx, float *dx, float *dw, float *db, const float *dout, const float *x,
			     const float *mean, const float *rstd, const float *w, int M, int d, int rms)
{
	int i = 0;
#if defined(__AVX512F__)
	if (d % 16 == 0)
		for (; i + 16 <= M; i += 16) {
			float s1[16], s2[16];
			size_t o = (size_t)i * d;
			norm_sums16(s1, s2, dout + o, x + o, rms ? NULL : mean + i, rstd + i, w, d);
			for (int r = 0; r < 16; r++, o += (size_t)d)
				norm_backward_row(dx + o, dw, db, dout + o, x + o, rms ? 0.0f : mean[i + r], rstd[i + r], w,
						  d, rms, s1[r], s2[r]);
		}
#endif
	for (; i < M; i++) {
		const float *g = dout + (size_t)i * d, *xi = x + (size_t)i * d;
		float mu = rms ? 0.0f : mean[i], rs = rstd[i];
		float s1 = 0, s2 = 0;
		for (int c = 0; c < d; c++) {
			float xh = (xi[c] - mu) * rs;
			float dxh = g[c] * w[c];
			s1 += dxh;
			s2 = sfma(dxh, xh, s2);
		}
		norm_backward_row(dx + (size_t)i * d, dw, db, g, xi, mu, rs, w, d, rms, s1, s2);
	}
}

static void lm_add(struct sb_ctx *ctx, float *x, const float *y, size_t n)
{
	size_t c = 0;
	for (; c + VE <= n; c += VE)
		vstore_e(x + c, vload_e(x + c) + vload_e(y + c));
	for (; c < n; c++)
		x[c] += y[c];
}

/* ---------------------------------------------------------------- row-deterministic matmul */

/* The layout matmul_rows reads: w[N, K] transposed and cut in panels of PANEL columns,
 * each panel's K x PANEL block contiguous (element (k, n) of the panel that starts at
 * column p0 at wp[p0 K + k PANEL + n - p0]); a last, narrower panel holds the N mod PANEL
 * columns left (at wp[p0 K + k w + n - p0], w its width). A product then streams its
 * weights in order instead of striding N floats per k. Same size as w. */
#define PANEL (3 * VL)

static void lm_pack_rows(struct sb_ctx *ctx, float *wp, const float *w, int N, int K)
{
	for (int p0 = 0; p0 < N; p0 += PANEL) {
		int pw = N - p0 < PANEL ? N - p0 : PANEL;
		float *dst = wp + (size_t)p0 * K;
		for (int j = 0; j < pw; j++) {
			const float *src = w + (size_t)(p0 + j) * K;
			for (int k = 0; k < K; k++)
				dst[(size_t)k * pw + j] = src[k];
		}
	}
}

/* the same layout of bfloat16 weights (half the memory; widened exactly when read) */
static void lm_pack_rows_bf16(struct sb_ctx *ctx, uint16_t *wp, const uint16_t *w, int N, int K)
{
	for (int p0 = 0; p0 < N; p0 += PANEL) {
		int pw = N - p0 < PANEL ? N - p0 : PANEL;
		uint16_t *dst = wp + (size_t)p0 * K;
		for (int j = 0; j < pw; j++) {
			const uint16_t *src = w + (size_t)(p0 + j) * K;
			for (int k = 0; k < K; k++)
				dst[(size_t)k * pw + j] = src[k];
		}
	}
}

/* n bfloat16 values widened to float (exact: the top 16 bits of a float) */
static void widen_bf16(float *dst, const uint16_t *src, size_t n)
{
	uint32_t *d = (uint32_t *)(void *)dst;
	for (size_t i = 0; i < n; i++)
		d[i] = (uint32_t)src[i] << 16;
}

/* out[i, n] = bias[n] + sum_k inp[i, k] w[n, k] from the packed wp: each output element
 * is an FMA chain over k = 0..K-1 from 0, then the bias is added, in every code path
 * below (4-row blocks, single rows, vector lanes and the scalar tail), so a row's bits do
 * not depend on M or on the row's position. A panel is taken ROWS_KC values of k at a
 * time, all rows per block (the partial sums wait in out: stored and reloaded exactly,
 * the chain is unchanged), so each block of weights (ROWS_KC x PANEL floats, 24 KiB)
 * is read from memory once and then from L1 for every row. */
#define ROWS_KC 128

/* Values k0..k1-1 of the panel at column n for every row: blk is the block's first
 * weight row (row k0 of the panel, PANEL floats per row); first: the chains start from
 * 0, else from the partial sums in out; bias (may be NULL) is added after the last
 * block (k1 == K). */
/* PANEL columns are PV registers of VE lanes; a block of PR rows keeps PR x PV = 12 chains
 * in registers (4 x 3 with AVX-512, 2 x 6 with AVX2's 16 registers) */
#define PV (PANEL / VE)
#define PR (12 / PV)

static void panel_block(float *out, const float *inp, const float *blk, const float *bias, int M, int K, int N, int n,
			int k0, int k1)
{
	int first = k0 == 0, addb = k1 == K && bias;
	int i = 0;
	/* PR rows x PV vectors: the chains share each broadcast and each weight load */
	for (; i + PR <= M; i += PR) {
		const float *a[PR];
		float *o[PR];
		ve c[PR][PV];
		_Pragma("GCC unroll 4") for (int r = 0; r < PR; r++) {
			a[r] = inp + (size_t)(i + r) * K;
			o[r] = out + (size_t)(i + r) * N + n;
			_Pragma("GCC unroll 6") for (int j = 0; j < PV; j++)
				c[r][j] = first ? vzero_e() : vload_e(o[r] + j * VE);
		}
		const float *bp = blk;
		for (int k = k0; k < k1; k++, bp += PANEL) {
			ve bv[PV];
			_Pragma("GCC unroll 6") for (int j = 0; j < PV; j++)
				bv[j] = vload_e(bp + j * VE);
			_Pragma("GCC unroll 4") for (int r = 0; r < PR; r++) {
				ve x = vset1_e(a[r][k]);
				_Pragma("GCC unroll 6") for (int j = 0; j < PV; j++)
					c[r][j] = vfma_e(x, bv[j], c[r][j]);
			}
		}
		_Pragma("GCC unroll 4") for (int r = 0; r < PR; r++)
			_Pragma("GCC unroll 6") for (int j = 0; j < PV; j++) {
				ve v = c[r][j];
				if (addb)
					v += vload_e(bias + n + j * VE);
				vstore_e(o[r] + j * VE, v);
			}
	}
	/* one row x PV vectors (and one weight stream) */
	for (; i < M; i++) {
		const float *a0 = inp + (size_t)i * K;
		float *o0 = out + (size_t)i * N + n;
		ve c[PV];
		_Pragma("GCC unroll 6") for (int j = 0; j < PV; j++)
			c[j] = first ? vzero_e() : vload_e(o0 + j * VE);
		const float *bp = blk;
		for (int k = k0; k < k1; k++, bp += PANEL) {
			ve x = vset1_e(a0[k]);
			__builtin_prefetch(bp + 16 * PANEL); /* one row streams the weights once: ask ahead */
			_Pragma("GCC unroll 6") for (int j = 0; j < PV; j++)
				c[j] = vfma_e(x, vload_e(bp + j * VE), c[j]);
		}
		_Pragma("GCC unroll 6") for (int j = 0; j < PV; j++)
			vstore_e(o0 + j * VE, addb ? c[j] + vload_e(bias + n + j * VE) : c[j]);
	}
}

/* Values k0..k1-1 of the last panel, columns [n0, N) narrower than PANEL (pw wide): blk
 * is the block's first weight row (pw floats per row); its vectors, then scalar columns;
 * partial sums and bias as panel_block's. */
static void last_block(float *out, const float *inp, const float *blk, const float *bias, int M, int K, int N, int n0,
		       int k0, int k1)
{
	int pw = N - n0, nv = n0 + (pw - pw % VE), first = k0 == 0, addb = k1 == K && bias;
	int i = 0;
	for (; i + 4 <= M; i += 4) {
		const float *a0 = inp + (size_t)i * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;
		float *o0 = out + (size_t)i * N, *o1 = o0 + N, *o2 = o1 + N, *o3 = o2 + N;
		for (int n = n0; n < nv; n += VE) {
			ve c0 = first ? vzero_e() : vload_e(o0 + n), c1 = first ? vzero_e() : vload_e(o1 + n),
			   c2 = first ? vzero_e() : vload_e(o2 + n), c3 = first ? vzero_e() : vload_e(o3 + n);
			const float *bp = blk + (n - n0);
			for (int k = k0; k < k1; k++, bp += pw) {
				ve bv = vload_e(bp);
				c0 = vfma_e(vset1_e(a0[k]), bv, c0);
				c1 = vfma_e(vset1_e(a1[k]), bv, c1);
				c2 = vfma_e(vset1_e(a2[k]), bv, c2);
				c3 = vfma_e(vset1_e(a3[k]), bv, c3);
			}
			if (addb) {
				ve bb = vload_e(bias + n);
				c0 += bb;
				c1 += bb;
				c2 += bb;
				c3 += bb;
			}
			vstore_e(o0 + n, c0);
			vstore_e(o1 + n, c1);
			vstore_e(o2 + n, c2);
			vstore_e(o3 + n, c3);
		}
		for (int n = nv; n < N; n++) {
			float s0 = first ? 0 : o0[n], s1 = first ? 0 : o1[n], s2 = first ? 0 : o2[n], s3 = first ? 0 : o3[n];
			const float *bp = blk + (n - n0);
			for (int k = k0; k < k1; k++, bp += pw) {
				float bv = *bp;
				s0 = sfma(a0[k], bv, s0);
				s1 = sfma(a1[k], bv, s1);
				s2 = sfma(a2[k], bv, s2);
				s3 = sfma(a3[k], bv, s3);
			}
			o0[n] = addb ? s0 + bias[n] : s0;
			o1[n] = addb ? s1 + bias[n] : s1;
			o2[n] = addb ? s2 + bias[n] : s2;
			o3[n] = addb ? s3 + bias[n] : s3;
		}
	}
	for (; i < M; i++) {
		const float *a0 = inp + (size_t)i * K;
		float *o0 = out + (size_t)i * N;
		for (int n = n0; n < nv; n += VE) {
			ve c0 = first ? vzero_e() : vload_e(o0 + n);
			const float *bp = blk + (n - n0);
			for (int k = k0; k < k1; k++, bp += pw)
				c0 = vfma_e(vset1_e(a0[k]), vload_e(bp), c0);
			if (addb)
				c0 += vload_e(bias + n);
			vstore_e(o0 + n, c0);
		}
		for (int n = nv; n < N; n++) {
			float s0 = first ? 0 : o0[n];
			const float *bp = blk + (n - n0);
			for (int k = k0; k < k1; k++, bp += pw)
				s0 = sfma(a0[k], *bp, s0);
			o0[n] = addb ? s0 + bias[n] : s0;
		}
	}
}

static void lm_matmul_rows(struct sb_ctx *ctx, float *out, const float *inp, const float *wp, const float *bias,
			   int M, int K, int N)
{
	int full = N - N % PANEL, pw = N - full;
	/* panel by panel (its partial sums stay in cache), ROWS_KC values of k at a time */
	for (int n = 0; n < full; n += PANEL)
		for (int k0 = 0; k0 < K; k0 += ROWS_KC)
			panel_block(out, inp, wp + (size_t)n * K + (size_t)k0 * PANEL, bias, M, K, N, n, k0,
				    K - k0 < ROWS_KC ? K : k0 + ROWS_KC);
	if (pw)
		for (int k0 = 0; k0 < K; k0 += ROWS_KC)
			last_block(out, inp, wp + (size_t)full * K + (size_t)k0 * pw, bias, M, K, N, full, k0,
				   K - k0 < ROWS_KC ? K : k0 + ROWS_KC);
}

/* VE bfloat16 as floats (exact), and one */
typedef uint16_t vebf __attribute__((vector_size(2 * VE), aligned(2), may_alias));
typedef uint32_t veu32 __attribute__((vector_size(4 * VE)));
static inline ve vload_bf16(const uint16_t *p)
{
	veu32 u = __builtin_convertvector(*(const vebf *)p, veu32) << 16;
	return (ve)u;
}
static inline float bf16f(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* rows [i0, M) one at a time straight from the bfloat16 weights (a decoding step: each
 * weight is used once, so it is widened in registers, not copied): the same chains */
static void rows_direct_bf16(float *out, const float *inp, const uint16_t *wp, const float *bias, int i0, int M,
			     int K, int N)
{
	int full = N - N % PANEL, pw = N - full, nv = full + (pw - pw % VE);
	const uint16_t *base = wp + (size_t)full * K;
	for (int i = i0; i < M; i++) {
		const float *a0 = inp + (size_t)i * K;
		float *o0 = out + (size_t)i * N;
		for (int n = 0; n < full; n += PANEL) {
			ve c[PV];
			_Pragma("GCC unroll 6") for (int j = 0; j < PV; j++)
				c[j] = vzero_e();
			const uint16_t *bp = wp + (size_t)n * K;
			for (int k = 0; k < K; k++, bp += PANEL) {
				ve x = vset1_e(a0[k]);
				__builtin_prefetch(bp + 16 * PANEL);
				_Pragma("GCC unroll 6") for (int j = 0; j < PV; j++)
					c[j] = vfma_e(x, vload_bf16(bp + j * VE), c[j]);
			}
			_Pragma("GCC unroll 6") for (int j = 0; j < PV; j++)
				vstore_e(o0 + n + j * VE, bias ? c[j] + vload_e(bias + n + j * VE) : c[j]);
		}
		for (int n = full; n < nv; n += VE) {
			ve c0 = vzero_e();
			const uint16_t *bp = base + (n - full);
			for (int k = 0; k < K; k++, bp += pw)
				c0 = vfma_e(vset1_e(a0[k]), vload_bf16(bp), c0);
			if (bias)
				c0 += vload_e(bias + n);
			vstore_e(o0 + n, c0);
		}
		for (int n = nv; n < N; n++) {
			float s0 = 0;
			const uint16_t *bp = base + (n - full);
			for (int k = 0; k < K; k++, bp += pw)
				s0 = sfma(a0[k], bf16f(*bp), s0);
			o0[n] = bias ? s0 + bias[n] : s0;
		}
	}
}

/* The same products from bfloat16 weights, with the results of matmul_rows on the widened
 * weights bit for bit (the same chains), while half as many bytes of weights are read
 * from memory. Blocks of 4 rows: each weight block widened once into a float buffer on
 * the stack (24 KiB, in L1) and taken by matmul_rows's code; the rows left over (all of
 * a decoding step) widen in registers. */
static void lm_matmul_rows_bf16(struct sb_ctx *ctx, float *out, const float *inp, const uint16_t *wp,
				const float *bias, int M, int K, int N)
{
	float blk[ROWS_KC * PANEL] __attribute__((aligned(64)));
	int full = N - N % PANEL, pw = N - full, M4 = M - M % 4;
	if (M4)
		for (int n = 0; n < full; n += PANEL)
			for (int k0 = 0; k0 < K; k0 += ROWS_KC) {
				int k1 = K - k0 < ROWS_KC ? K : k0 + ROWS_KC;
				widen_bf16(blk, wp + (size_t)n * K + (size_t)k0 * PANEL, (size_t)(k1 - k0) * PANEL);
				panel_block(out, inp, blk, bias, M4, K, N, n, k0, k1);
			}
	if (M4 && pw)
		for (int k0 = 0; k0 < K; k0 += ROWS_KC) {
			int k1 = K - k0 < ROWS_KC ? K : k0 + ROWS_KC;
			widen_bf16(blk, wp + (size_t)full * K + (size_t)k0 * pw, (size_t)(k1 - k0) * pw);
			last_block(out, inp, blk, bias, M4, K, N, full, k0, k1);
		}
	rows_direct_bf16(out, inp, wp, bias, M4, M, K, N);
}

/* ---------------------------------------------------------------- SwiGLU */

static void lm_swiglu_forward(struct sb_ctx *ctx, float *out, const float *gu, int M, int F)
{
	for (int i = 0; i < M; i++) {
		const float *g = gu + (size_t)i * 2 * F, *u = g + F;
		float *o = out + (size_t)i * F;
		for (int c = 0; c < F; c++) {
			float s = 1.0f / (1.0f + expf(-g[c]));
			o[c] = g[c] * s * u[c];
		}
	}
}

static void lm_geglu_forward(struct sb_ctx *ctx, float *out, const float *gu, int M, int F)
{
	const float beta = 0.7978845608028654f, kappa = 0.044715f; /* sqrt(2/pi), as torch's kernel */
	for (int i = 0; i < M; i++) {
		const float *g = gu + (size_t)i * 2 * F, *u = g + F;
		float *o = out + (size_t)i * F;
		for (int c = 0; c < F; c++) {
			float x = g[c], inner = beta * (x + kappa * x * x * x);
			o[c] = 0.5f * x * (1.0f + tanhf(inner)) * u[c];
		}
	}
}

static void lm_geglu_backward(struct sb_ctx *ctx, float *dgu, const float *dout, const float *gu, int M, int F)
{
	const float beta = 0.7978845608028654f, kappa = 0.044715f;
	for (int i = 0; i < M; i++) {
		const float *g = gu + (size_t)i * 2 * F, *u = g + F, *d = dout + (size_t)i * F;
		float *dg = dgu + (size_t)i * 2 * F, *du = dg + F;
		for (int c = 0; c < F; c++) {
			float x = g[c], th = tanhf(beta * (x + kappa * x * x * x));
			du[c] = d[c] * (0.5f * x * (1.0f + th));
			/* d/dx x/2 (1 + tanh(inner)) = (1 + th)/2 + x/2 (1 - th^2) beta (1 + 3 kappa x^2) */
			dg[c] = d[c] * u[c] *
				(0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * beta * (1.0f + 3.0f * kappa * x * x));
		}
	}
}

static void lm_swiglu_backward(struct sb_ctx *ctx, float *dgu, const float *dout, const float *gu, int M, int F)
{
	for (int i = 0; i < M; i++) {
		const float *g = gu + (size_t)i * 2 * F, *u = g + F, *d = dout + (size_t)i * F;
		float *dg = dgu + (size_t)i * 2 * F, *du = dg + F;
		for (int c = 0; c < F; c++) {
			float s = 1.0f / (1.0f + expf(-g[c]));
			float silu = g[c] * s;
			du[c] = d[c] * silu;
			dg[c] = d[c] * u[c] * (s * (1.0f + g[c] * (1.0f - s)));
		}
	}
}

/* ---------------------------------------------------------------- RoPE */

static void lm_rope(struct sb_ctx *ctx, float *x, int B, int T, int t0, int nh, int hd, int rd, const double *freq,
		    int inverse)
{
	int half = rd / 2;
	for (int t = 0; t < T; t++) {
		double pos = (double)(t0 + t);
		for (int i = 0; i < half; i++) {
			double ang = pos * freq[i];
			float cs = (float)cos(ang), sn = (float)(inverse ? -sin(ang) : sin(ang));
			for (int b = 0; b < B; b++)
				for (int h = 0; h < nh; h++) {
					float *p = x + ((size_t)b * T + t) * nh * hd + (size_t)h * hd;
					float x1 = p[i], x2 = p[i + half];
					p[i] = x1 * cs - x2 * sn;
					p[i + half] = x2 * cs + x1 * sn;
				}
		}
	}
}

/* ---------------------------------------------------------------- attention: training path */

/* Gemma 2's soft-capping of attention scores, as transformers computes it in float32: s / cap,
 * tanh, times cap. Monotone, so a selection by score (top-k, the recipe) keeps its order
 * except where tanh saturates to equal floats; the block mask's pooled-key scores are not
 * capped (their order is all it uses) */
static void soft_cap(float *s, int n, float cap)
{
	for (int i = 0; i < n; i++)
		s[i] = tanhf(s[i] / cap) * cap;
}

/* A softmax's numerators in place: r[i] = exp(r[i] - max r) over n >= 1 floats; returns
 * 1 / their sum (the caller normalises, or weighs with it) */
static float exp_shifted(float *r, int n)
{
	float mx = r[0];
	for (int j = 1; j < n; j++)
		mx = r[j] > mx ? r[j] : mx;
	for (int j = 0; j < n; j++)
		r[j] -= mx;
	sb_cpu_exp(r, r, (size_t)n);
	float s = 0;
	for (int j = 0; j < n; j++)
		s += r[j];
	return 1.0f / s;
}

/* causal softmax attention; window > 0: query t sees keys t - window + 1 .. t only; softcap
 * > 0: scores soft-capped first (soft_cap, as attn_rows) */
static void attn_forward_w(float *out, float *P, const float *q, const float *k, const float *v, int B, int T,
			   int NH, int NKV, int hd, int window, float softcap)
{
	float scale = 1.0f / sqrtf((float)hd);
	int g = NH / NKV, ldq = NH * hd, ldk = NKV * hd;
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++) {
			const float *qh = q + (size_t)b * T * ldq + (size_t)h * hd;
			const float *kh = k + (size_t)b * T * ldk + (size_t)(h / g) * hd;
			const float *vh = v + (size_t)b * T * ldk + (size_t)(h / g) * hd;
			float *Pb = P + ((size_t)b * NH + h) * T * T;
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, scale, qh, ldq, kh, ldk, 0.0f, Pb, T);
			for (int t = 0; t < T; t++) {
				float *row = Pb + (size_t)t * T;
				int lo = window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
				float *r = row + lo;
				int n = t + 1 - lo;
				if (softcap > 0.0f)
					soft_cap(r, n, softcap);
				float inv = exp_shifted(r, n);
				for (int j = 0; j < n; j++)
					r[j] *= inv;
				if (lo)
					memset(row, 0, (size_t)lo * sizeof *row);
				if (t + 1 < T)
					memset(row + t + 1, 0, (size_t)(T - t - 1) * sizeof *row);
			}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, Pb, T, vh, ldk, 0.0f,
				    out + (size_t)b * T * ldq + (size_t)h * hd, ldq);
		}
}

static void lm_attn_forward(struct sb_ctx *ctx, float *out, float *P, const float *q, const float *k, const float *v,
			    int B, int T, int NH, int NKV, int hd, float softcap)
{
	attn_forward_w(out, P, q, k, v, B, T, NH, NKV, hd, 0, softcap);
}

static void lm_swa_forward(struct sb_ctx *ctx, float *out, float *P, const float *q, const float *k, const float *v,
			   int B, int T, int NH, int NKV, int hd, int window, float softcap)
{
	attn_forward_w(out, P, q, k, v, B, T, NH, NKV, hd, window, softcap);
}

/* The backward from P (its zeros carry a window); with softcap > 0 the scores are computed
 * again as the forward did, and the gradient of a capped score s' = c tanh(s / c) takes the
 * factor 1 - tanh^2 */
static void lm_attn_backward(struct sb_ctx *ctx, float *dq, float *dk, float *dv, const float *dout, const float *P,
			     const float *q, const float *k, const float *v, int B, int T, int NH, int NKV, int hd,
			     float softcap)
{
	float scale = 1.0f / sqrtf((float)hd);
	int g = NH / NKV, ldq = NH * hd, ldk = NKV * hd;
	float *dS = sb_cpu_scratch(ctx, (size_t)T * T * sizeof(float) * (softcap > 0.0f ? 2 : 1));
	float *S = dS + (size_t)T * T; /* the scores again (softcap only) */
	for (int b = 0; b < B; b++) {
		for (int t = 0; t < T; t++) {
			memset(dk + ((size_t)b * T + t) * ldk, 0, (size_t)ldk * sizeof(float));
			memset(dv + ((size_t)b * T + t) * ldk, 0, (size_t)ldk * sizeof(float));
		}
		for (int h = 0; h < NH; h++) {
			const float *qh = q + (size_t)b * T * ldq + (size_t)h * hd;
			const float *kh = k + (size_t)b * T * ldk + (size_t)(h / g) * hd;
			const float *vh = v + (size_t)b * T * ldk + (size_t)(h / g) * hd;
			const float *doh = dout + (size_t)b * T * ldq + (size_t)h * hd;
			const float *Pb = P + ((size_t)b * NH + h) * T * T;
			float *dqh = dq + (size_t)b * T * ldq + (size_t)h * hd;
			float *dkh = dk + (size_t)b * T * ldk + (size_t)(h / g) * hd;
			float *dvh = dv + (size_t)b * T * ldk + (size_t)(h / g) * hd;
			/* dP = dO V^T */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, doh, ldq, vh, ldk, 0.0f, dS, T);
			if (softcap > 0.0f) /* the forward's product, the same call */
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, scale, qh, ldq, kh, ldk, 0.0f, S,
					    T);
			for (int t = 0; t < T; t++) {
				float *r = dS + (size_t)t * T;
				const float *p = Pb + (size_t)t * T;
				float s = dotf(p, r, t + 1);
				for (int j = 0; j <= t; j++)
					r[j] = p[j] * (r[j] - s);
				if (softcap > 0.0f)
					for (int j = 0; j <= t; j++) {
						float th = tanhf(S[(size_t)t * T + j] / softcap);
						r[j] *= 1.0f - th * th;
					}
				if (t + 1 < T)
					memset(r + t + 1, 0, (size_t)(T - t - 1) * sizeof *r);
			}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, scale, dS, T, kh, ldk, 0.0f, dqh,
				    ldq);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, scale, dS, T, qh, ldq, 1.0f, dkh, ldk);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, Pb, T, doh, ldq, 1.0f, dvh, ldk);
		}
	}
}

/* ---------------------------------------------------------------- attention: evaluation rows */


static int lm_attn_rows(struct sb_ctx *ctx, float *out, const float *q, const float *k, const float *v, float *acc,
			int Tcap, int t0, int n, int NH, int NKV, int hd, float softcap, const struct sb_lm_mask *mask,
			int layer, struct sb_lm_attn_obs *obs, struct sb_err *err)
{
	int T = t0 + n; /* keys 0..T-1 exist */
	int g = NH / NKV, ldq = NH * hd, ldk = NKV * hd;
	float scale = 1.0f / sqrtf((float)hd);
	struct sb_lm_mask dense = {.kind = SB_LM_MASK_DENSE};
	if (!mask)
		mask = &dense;
	if (mask->kind == SB_LM_MASK_H2O && !acc)
		return SB_ERR(err, SB_EINTERNAL, "heavy-hitter mask without its accumulated attention");
	int B = mask->kind == SB_LM_MASK_BLOCK ? mask->block : 1;
	int nblk = mask->kind == SB_LM_MASK_BLOCK ? T / B : 0;
	/* scratch: scores/probabilities [T], keys idx [T], mask scratch a [T] + f [T],
	 * pooled keys [nblk, hd], block scores [nblk] */
	size_t need = (size_t)T * 4 * sizeof(float) + (size_t)(nblk + 1) * (hd + 1) * sizeof(float) + 256;
	char *scr = sb_cpu_scratch(ctx, need);
	if (!scr)
		return SB_ERR(err, SB_EINTERNAL, "out of memory (attention scratch)");
	float *sc = (float *)scr;
	int32_t *idx = (int32_t *)(sc + T);
	struct sb_lm_mask_scratch ms = {.cap = T, .a = (int32_t *)(idx + T), .f = (float *)(idx + 2 * (size_t)T)};
	float *kbar = ms.f + T, *bsc = kbar + (size_t)nblk * hd;
	float *es = ms.f; /* softmax over the selected keys */
	for (int h = 0; h < NH; h++) {
		int kvh = h / g;
		if (nblk) {
			/* pooled keys of the complete blocks: sum in key order, then times 1/B */
			float invB = 1.0f / (float)B;
			for (int c = 0; c < nblk; c++) {
				float *kb = kbar + (size_t)c * hd;
				memcpy(kb, k + (size_t)c * B * ldk + (size_t)kvh * hd, (size_t)hd * sizeof *kb);
				for (int j = c * B + 1; j < (c + 1) * B; j++)
					axpy(kb, 1.0f, k + (size_t)j * ldk + (size_t)kvh * hd, hd);
				for (int e = 0; e < hd; e++)
					kb[e] *= invB;
			}
		}
		float *acch = acc ? acc + (size_t)h * Tcap : NULL;
		for (int r = 0; r < n; r++) {
			int t = t0 + r;
			const float *qt = q + (size_t)r * ldq + (size_t)h * hd;
			float *ot = out + (size_t)r * ldq + (size_t)h * hd;
			int ns;
			if (mask->kind == SB_LM_MASK_RECIPE || mask->kind == SB_LM_MASK_DENSE) {
				/* full scoring of the causal keys (the recipe's selection needs it) */
				for (int j = 0; j <= t; j++)
					sc[j] = dotf(qt, k + (size_t)j * ldk + (size_t)kvh * hd, hd) * scale;
				if (softcap > 0.0f)
					soft_cap(sc, t + 1, softcap);
				ns = sb_lm_mask_row(mask, layer, h, t, sc, NULL, NULL, idx, &ms);
				for (int i = 0; i < ns; i++)
					es[i] = sc[idx[i]];
			} else {
				if (mask->kind == SB_LM_MASK_BLOCK)
					for (int c = 0; c < t / B; c++)
						bsc[c] = dotf(qt, kbar + (size_t)c * hd, hd) * scale;
				ns = sb_lm_mask_row(mask, layer, h, t, NULL, acch, bsc, idx, &ms);
				/* scores of the selected keys only */
				for (int i = 0; i < ns; i++)
					es[i] = dotf(qt, k + (size_t)idx[i] * ldk + (size_t)kvh * hd, hd) * scale;
				if (softcap > 0.0f)
					soft_cap(es, ns, softcap);
			}
			float inv = exp_shifted(es, ns);
			memset(ot, 0, (size_t)hd * sizeof *ot);
			for (int i = 0; i < ns; i++) {
				float p = es[i] * inv;
				axpy(ot, p, v + (size_t)idx[i] * ldk + (size_t)kvh * hd, hd);
				if (acch)
					acch[idx[i]] += p;
			}
			if (obs) {
				obs->kept += ns;
				obs->causal += t + 1;
				obs->rows += 1;
				for (int bi = 0; bi < 3; bi++)
					obs->touched[bi] += sb_lm_mask_blocks_touched(idx, ns, sb_lm_touch_block(bi));
				if (obs->sel && obs->sel_n) {
					int m = ns < obs->cap ? ns : obs->cap;
					memcpy(obs->sel + ((size_t)r * NH + h) * obs->cap, idx, (size_t)m * sizeof *idx);
					obs->sel_n[(size_t)r * NH + h] = ns;
				}
			}
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- gated short convolution */

static void lm_conv_forward(struct sb_ctx *ctx, float *y, float *z, const float *bch, const float *w, const float *bias,
			    int B, int T, int d, int K)
{
	float *u = sb_cpu_scratch(ctx, ((size_t)T * d + (size_t)K * d) * sizeof(float));
	float *wt = u + (size_t)T * d; /* taps transposed: wt[i][c] */
	for (int c = 0; c < d; c++)
		for (int i = 0; i < K; i++)
			wt[(size_t)i * d + c] = w[(size_t)c * K + i];
	for (int b = 0; b < B; b++) {
		const float *xb = bch + (size_t)b * T * 3 * d;
		for (int t = 0; t < T; t++) {
			const float *bt = xb + (size_t)t * 3 * d, *ht = bt + 2 * d;
			float *ut = u + (size_t)t * d;
			for (int c = 0; c < d; c++)
				ut[c] = bt[c] * ht[c];
		}
		for (int t = 0; t < T; t++) {
			float *zt = z + ((size_t)b * T + t) * d, *yt = y + ((size_t)b * T + t) * d;
			const float *ct = xb + (size_t)t * 3 * d + d;
			for (int c = 0; c < d; c++)
				zt[c] = 0;
			for (int i = 0; i < K; i++) {
				int s = t - K + 1 + i;
				if (s < 0) { /* the zero history: the same FMA with 0 as the rows op */
					for (int c = 0; c < d; c++)
						zt[c] = sfma(wt[(size_t)i * d + c], 0.0f, zt[c]);
					continue;
				}
				const float *us = u + (size_t)s * d, *wi = wt + (size_t)i * d;
				int c = 0;
				for (; c + VE <= d; c += VE)
					vstore_e(zt + c, vfma_e(vload_e(wi + c), vload_e(us + c), vload_e(zt + c)));
				for (; c < d; c++)
					zt[c] = sfma(wi[c], us[c], zt[c]);
			}
			for (int c = 0; c < d; c++) {
				if (bias)
					zt[c] += bias[c];
				yt[c] = ct[c] * zt[c];
			}
		}
	}
}

static void lm_conv_backward(struct sb_ctx *ctx, float *dbch, float *dw, float *dbias, const float *dy,
			     const float *bch, const float *z, const float *w, int B, int T, int d, int K)
{
	float *u = sb_cpu_scratch(ctx, ((size_t)3 * T * d + (size_t)2 * K * d) * sizeof(float));
	float *dz = u + (size_t)T * d, *du = dz + (size_t)T * d, *wt = du + (size_t)T * d, *dwt = wt + (size_t)K * d;
	for (int c = 0; c < d; c++)
		for (int i = 0; i < K; i++)
			wt[(size_t)i * d + c] = w[(size_t)c * K + i];
	memset(dwt, 0, (size_t)K * d * sizeof *dwt);
	for (int b = 0; b < B; b++) {
		const float *xb = bch + (size_t)b * T * 3 * d;
		float *db = dbch + (size_t)b * T * 3 * d;
		for (int t = 0; t < T; t++) {
			const float *bt = xb + (size_t)t * 3 * d, *ct = bt + d, *ht = bt + 2 * d;
			const float *g = dy + ((size_t)b * T + t) * d, *zt = z + ((size_t)b * T + t) * d;
			float *ut = u + (size_t)t * d, *dzt = dz + (size_t)t * d, *dct = db + (size_t)t * 3 * d + d;
			for (int c = 0; c < d; c++) {
				ut[c] = bt[c] * ht[c];
				dct[c] = g[c] * zt[c];
				dzt[c] = g[c] * ct[c];
				if (dbias)
					dbias[c] += dzt[c];
			}
		}
		memset(du, 0, (size_t)T * d * sizeof *du);
		for (int t = 0; t < T; t++) {
			const float *dzt = dz + (size_t)t * d;
			for (int i = 0; i < K; i++) {
				int s = t - K + 1 + i;
				if (s < 0)
					continue;
				const float *us = u + (size_t)s * d, *wi = wt + (size_t)i * d;
				float *dws = dwt + (size_t)i * d, *dus = du + (size_t)s * d;
				for (int c = 0; c < d; c++) {
					dws[c] = sfma(dzt[c], us[c], dws[c]);
					dus[c] = sfma(wi[c], dzt[c], dus[c]);
				}
			}
		}
		for (int t = 0; t < T; t++) {
			const float *bt = xb + (size_t)t * 3 * d, *ht = bt + 2 * d, *dut = du + (size_t)t * d;
			float *dbt = db + (size_t)t * 3 * d, *dht = dbt + 2 * d;
			for (int c = 0; c < d; c++) {
				dbt[c] = dut[c] * ht[c];
				dht[c] = dut[c] * bt[c];
			}
		}
	}
	for (int c = 0; c < d; c++)
		for (int i = 0; i < K; i++)
			dw[(size_t)c * K + i] += dwt[(size_t)i * d + c];
}

static void lm_conv_rows(struct sb_ctx *ctx, float *y, const float *bch, float *hist, const float *w, const float *bias,
			 int n, int d, int K)
{
	float *wt = sb_cpu_scratch(ctx, ((size_t)K * d + d) * sizeof(float));
	float *u = wt + (size_t)K * d;
	for (int c = 0; c < d; c++)
		for (int i = 0; i < K; i++)
			wt[(size_t)i * d + c] = w[(size_t)c * K + i];
	for (int r = 0; r < n; r++) {
		const float *bt = bch + (size_t)r * 3 * d, *ct = bt + d, *ht = bt + 2 * d;
		float *yt = y + (size_t)r * d;
		for (int c = 0; c < d; c++)
			u[c] = bt[c] * ht[c];
		float *zt = yt; /* z accumulates in y, then y = c * z */
		for (int c = 0; c < d; c++)
			zt[c] = 0;
		for (int i = 0; i < K; i++) {
			const float *us = i < K - 1 ? hist + (size_t)i * d : u, *wi = wt + (size_t)i * d;
			int c = 0;
			for (; c + VE <= d; c += VE)
				vstore_e(zt + c, vfma_e(vload_e(wi + c), vload_e(us + c), vload_e(zt + c)));
			for (; c < d; c++)
				zt[c] = sfma(wi[c], us[c], zt[c]);
		}
		for (int c = 0; c < d; c++) {
			float zc = bias ? zt[c] + bias[c] : zt[c];
			yt[c] = ct[c] * zc;
		}
		if (K > 1) {
			memmove(hist, hist + d, (size_t)(K - 2) * d * sizeof *hist);
			memcpy(hist + (size_t)(K - 2) * d, u, (size_t)d * sizeof *hist);
		}
	}
}

/* ---------------------------------------------------------------- plain depthwise convolution */

/* y_t = sum_i w[i] x[t-K+1+i] as an FMA chain from 0 in i order (out-of-range rows count
 * as zeros, with the same FMA as the rows op), then + bias */
static void lm_dwconv_forward(struct sb_ctx *ctx, float *y, const float *x, const float *w, const float *bias, int B,
			      int T, int d, int K)
{
	float *wt = sb_cpu_scratch(ctx, (size_t)K * d * sizeof(float));
	for (int c = 0; c < d; c++)
		for (int i = 0; i < K; i++)
			wt[(size_t)i * d + c] = w[(size_t)c * K + i];
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			float *yt = y + ((size_t)b * T + t) * d;
			memset(yt, 0, (size_t)d * sizeof *yt);
			for (int i = 0; i < K; i++) {
				int s = t - K + 1 + i;
				const float *wi = wt + (size_t)i * d;
				if (s < 0) {
					for (int c = 0; c < d; c++)
						yt[c] = sfma(wi[c], 0.0f, yt[c]);
					continue;
				}
				const float *xs = x + ((size_t)b * T + s) * d;
				int c = 0;
				for (; c + VE <= d; c += VE)
					vstore_e(yt + c, vfma_e(vload_e(wi + c), vload_e(xs + c), vload_e(yt + c)));
				for (; c < d; c++)
					yt[c] = sfma(wi[c], xs[c], yt[c]);
			}
			if (bias)
				for (int c = 0; c < d; c++)
					yt[c] += bias[c];
		}
}

static void lm_dwconv_backward(struct sb_ctx *ctx, float *dx, float *dw, float *dbias, const float *dy, const float *x,
			       const float *w, int B, int T, int d, int K)
{
	float *wt = sb_cpu_scratch(ctx, (size_t)2 * K * d * sizeof(float));
	float *dwt = wt + (size_t)K * d;
	for (int c = 0; c < d; c++)
		for (int i = 0; i < K; i++)
			wt[(size_t)i * d + c] = w[(size_t)c * K + i];
	memset(dwt, 0, (size_t)K * d * sizeof *dwt);
	memset(dx, 0, (size_t)B * T * d * sizeof *dx);
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++) {
			const float *g = dy + ((size_t)b * T + t) * d;
			if (dbias)
				for (int c = 0; c < d; c++)
					dbias[c] += g[c];
			for (int i = 0; i < K; i++) {
				int s = t - K + 1 + i;
				if (s < 0)
					continue;
				const float *xs = x + ((size_t)b * T + s) * d, *wi = wt + (size_t)i * d;
				float *dxs = dx + ((size_t)b * T + s) * d, *dwi = dwt + (size_t)i * d;
				for (int c = 0; c < d; c++) {
					dwi[c] = sfma(g[c], xs[c], dwi[c]);
					dxs[c] = sfma(wi[c], g[c], dxs[c]);
				}
			}
		}
	for (int c = 0; c < d; c++)
		for (int i = 0; i < K; i++)
			dw[(size_t)c * K + i] += dwt[(size_t)i * d + c];
}

static void lm_dwconv_rows(struct sb_ctx *ctx, float *y, const float *x, float *hist, const float *w, const float *bias,
			   int n, int d, int K)
{
	float *wt = sb_cpu_scratch(ctx, (size_t)K * d * sizeof(float));
	for (int c = 0; c < d; c++)
		for (int i = 0; i < K; i++)
			wt[(size_t)i * d + c] = w[(size_t)c * K + i];
	for (int r = 0; r < n; r++) {
		const float *xt = x + (size_t)r * d;
		float *yt = y + (size_t)r * d;
		memset(yt, 0, (size_t)d * sizeof *yt);
		for (int i = 0; i < K; i++) {
			const float *xs = i < K - 1 ? hist + (size_t)i * d : xt, *wi = wt + (size_t)i * d;
			int c = 0;
			for (; c + VE <= d; c += VE)
				vstore_e(yt + c, vfma_e(vload_e(wi + c), vload_e(xs + c), vload_e(yt + c)));
			for (; c < d; c++)
				yt[c] = sfma(wi[c], xs[c], yt[c]);
		}
		if (bias)
			for (int c = 0; c < d; c++)
				yt[c] += bias[c];
		if (K > 1) {
			memmove(hist, hist + d, (size_t)(K - 2) * d * sizeof *hist);
			memcpy(hist + (size_t)(K - 2) * d, xt, (size_t)d * sizeof *hist);
		}
	}
}

/* ---------------------------------------------------------------- linear attention */

#define LIN_EPS 1e-6f

static void lm_linattn_forward(struct sb_ctx *ctx, float *out, float *den, const float *q, const float *k,
			       const float *v, int B, int T, int NH, int hd)
{
	int ld = NH * hd;
	float *Fq = sb_cpu_scratch(ctx, ((size_t)2 * T * hd + (size_t)T * T) * sizeof(float));
	float *Fk = Fq + (size_t)T * hd, *A = Fk + (size_t)T * hd;
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++) {
			const float *qh = q + (size_t)b * T * ld + (size_t)h * hd, *kh = k + (size_t)b * T * ld + (size_t)h * hd;
			const float *vh = v + (size_t)b * T * ld + (size_t)h * hd;
			float *oh = out + (size_t)b * T * ld + (size_t)h * hd, *dn = den + ((size_t)b * NH + h) * T;
			for (int t = 0; t < T; t++)
				for (int e = 0; e < hd; e++) {
					Fq[(size_t)t * hd + e] = phi(qh[(size_t)t * ld + e]);
					Fk[(size_t)t * hd + e] = phi(kh[(size_t)t * ld + e]);
				}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, Fq, hd, Fk, hd, 0.0f, A, T);
			for (int t = 0; t < T; t++) {
				float *r = A + (size_t)t * T, s = 0;
				for (int j = 0; j <= t; j++)
					s += r[j];
				if (t + 1 < T)
					memset(r + t + 1, 0, (size_t)(T - t - 1) * sizeof *r);
				dn[t] = s + LIN_EPS;
			}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, A, T, vh, ld, 0.0f, oh, ld);
			for (int t = 0; t < T; t++) {
				float inv = 1.0f / dn[t];
				for (int e = 0; e < hd; e++)
					oh[(size_t)t * ld + e] *= inv;
			}
		}
}

static void lm_linattn_backward(struct sb_ctx *ctx, float *dq, float *dk, float *dv, const float *dout,
				const float *out, const float *den, const float *q, const float *k, const float *v,
				int B, int T, int NH, int hd)
{
	int ld = NH * hd;
	size_t Th = (size_t)T * hd, TT = (size_t)T * T;
	float *Fq = sb_cpu_scratch(ctx, (5 * Th + 2 * TT) * sizeof(float));
	float *Fk = Fq + Th, *dnum = Fk + Th, *dFq = dnum + Th, *dFk = dFq + Th, *A = dFk + Th, *dA = A + TT;
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++) {
			size_t off = (size_t)b * T * ld + (size_t)h * hd;
			const float *qh = q + off, *kh = k + off, *vh = v + off, *oh = out + off, *g = dout + off;
			const float *dn = den + ((size_t)b * NH + h) * T;
			for (int t = 0; t < T; t++)
				for (int e = 0; e < hd; e++) {
					Fq[(size_t)t * hd + e] = phi(qh[(size_t)t * ld + e]);
					Fk[(size_t)t * hd + e] = phi(kh[(size_t)t * ld + e]);
				}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, Fq, hd, Fk, hd, 0.0f, A, T);
			for (int t = 0; t < T; t++)
				if (t + 1 < T)
					memset(A + (size_t)t * T + t + 1, 0, (size_t)(T - t - 1) * sizeof(float));
			/* dnum = dO / den; dden = -sum dO * O / den */
			float *ddn = dFq; /* first T floats, used before dFq is written */
			for (int t = 0; t < T; t++) {
				float inv = 1.0f / dn[t], s = 0;
				for (int e = 0; e < hd; e++) {
					float ge = g[(size_t)t * ld + e];
					dnum[(size_t)t * hd + e] = ge * inv;
					s = sfma(ge, oh[(size_t)t * ld + e], s);
				}
				ddn[t] = -s * inv;
			}
			/* dA = dnum V^T + dden 1^T, causal */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hd, 1.0f, dnum, hd, vh, ld, 0.0f, dA, T);
			for (int t = 0; t < T; t++) {
				float *r = dA + (size_t)t * T;
				for (int j = 0; j <= t; j++)
					r[j] += ddn[t];
				if (t + 1 < T)
					memset(r + t + 1, 0, (size_t)(T - t - 1) * sizeof *r);
			}
			/* dV = A^T dnum */
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, A, T, dnum, hd, 0.0f, dv + off, ld);
			/* dFq = dA Fk; dFk = dA^T Fq */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hd, T, 1.0f, dA, T, Fk, hd, 0.0f, dFq, hd);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, T, 1.0f, dA, T, Fq, hd, 0.0f, dFk, hd);
			for (int t = 0; t < T; t++)
				for (int e = 0; e < hd; e++) {
					dq[off + (size_t)t * ld + e] = dFq[(size_t)t * hd + e] * dphi(qh[(size_t)t * ld + e]);
					dk[off + (size_t)t * ld + e] = dFk[(size_t)t * hd + e] * dphi(kh[(size_t)t * ld + e]);
				}
		}
}

static void lm_linattn_rows(struct sb_ctx *ctx, float *out, const float *q, const float *k, const float *v, float *S,
			    float *z, int n, int NH, int hd)
{
	int ld = NH * hd;
	float *fq = sb_cpu_scratch(ctx, (size_t)2 * hd * sizeof(float));
	float *fk = fq + hd;
	for (int r = 0; r < n; r++)
		for (int h = 0; h < NH; h++) {
			const float *qt = q + (size_t)r * ld + (size_t)h * hd, *kt = k + (size_t)r * ld + (size_t)h * hd;
			const float *vt = v + (size_t)r * ld + (size_t)h * hd;
			float *ot = out + (size_t)r * ld + (size_t)h * hd;
			float *Sh = S + (size_t)h * hd * hd, *zh = z + (size_t)h * hd;
			for (int e = 0; e < hd; e++) {
				fq[e] = phi(qt[e]);
				fk[e] = phi(kt[e]);
			}
			for (int a = 0; a < hd; a++) {
				axpy(Sh + (size_t)a * hd, fk[a], vt, hd);
				zh[a] += fk[a];
			}
			memset(ot, 0, (size_t)hd * sizeof *ot);
			float dsum = 0;
			for (int a = 0; a < hd; a++) {
				axpy(ot, fq[a], Sh + (size_t)a * hd, hd);
				dsum = sfma(fq[a], zh[a], dsum);
			}
			float inv = 1.0f / (dsum + LIN_EPS);
			for (int e = 0; e < hd; e++)
				ot[e] *= inv;
		}
}

/* ---------------------------------------------------------------- Mamba2 mixer (evaluation) */

static inline float silu_f(float x) { return x / (1.0f + expf(-x)); }
/* PyTorch's softplus (beta 1, threshold 20): x above 20 is returned as is */
static inline float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* n rows of one sequence, one row at a time in order (so any split of the rows gives the
 * same bits). proj[n, I + CD + H] = (z | xBC | dt), I = H P, CD = I + 2 G N (I is nI here:
 * complex.h, through cblas.h, defines I). hist[K-1, CD]
 * holds the K-1 previous xBC rows (oldest first, zeros at the start), S[H, P, N] the
 * state; both updated. y[n, I] = (S C + D x) * silu(z), before the gated norm's RMSNorm, or
 * S C + D x when gate is 0 (the norm before the gate: Falcon-H1's mamba_norm_before_gate). */
static void lm_mamba2_rows(struct sb_ctx *ctx, float *y, const float *proj, float *hist, float *S, const float *cw,
			   const float *cb, const float *dt_bias, const float *A_log, const float *D, int n, int H,
			   int P, int N, int G, int K, int gate)
{
	int nI = H * P, GN = G * N, CD = nI + 2 * GN, hpg = H / G;
	size_t ld = (size_t)nI + CD + H;
	float *wt = sb_cpu_scratch(ctx, ((size_t)K * CD + CD) * sizeof(float));
	float *u = wt + (size_t)K * CD;
	for (int c = 0; c < CD; c++)
		for (int i = 0; i < K; i++)
			wt[(size_t)i * CD + c] = cw[(size_t)c * K + i];
	for (int r = 0; r < n; r++) {
		const float *zt = proj + (size_t)r * ld, *xin = zt + nI, *dtr = xin + CD;
		float *yt = y + (size_t)r * nI;
		/* causal depthwise convolution over xBC, an FMA chain from 0 in tap order, then
		 * the bias, then SiLU */
		for (int c = 0; c < CD; c++)
			u[c] = 0;
		for (int i = 0; i < K; i++) {
			const float *xs = i < K - 1 ? hist + (size_t)i * CD : xin, *wi = wt + (size_t)i * CD;
			for (int c = 0; c < CD; c++)
				u[c] = sfma(wi[c], xs[c], u[c]);
		}
		if (K > 1) {
			memmove(hist, hist + CD, (size_t)(K - 2) * CD * sizeof *hist);
			memcpy(hist + (size_t)(K - 2) * CD, xin, (size_t)CD * sizeof *hist);
		}
		for (int c = 0; c < CD; c++)
			u[c] = silu_f(cb ? u[c] + cb[c] : u[c]);
		const float *x = u, *B = u + nI, *C = u + nI + GN;
		/* the selective state recurrence, head by head */
		for (int h = 0; h < H; h++) {
			const float *Bg = B + (size_t)(h / hpg) * N, *Cg = C + (size_t)(h / hpg) * N;
			float dt = softplus_f(dtr[h] + dt_bias[h]);
			float dA = expf(dt * -expf(A_log[h]));
			ve vdA = vset1_e(dA);
			for (int p = 0; p < P; p++) {
				float xp = x[(size_t)h * P + p], dx = dt * xp;
				float *Sp = S + ((size_t)h * P + p) * N;
				/* S = dx B + S dA (element by element: the same rounding in the vector
				 * and the scalar tail), then y = S.C in dotf's fixed order (a single
				 * accumulator chain over N was latency-bound: 3x slower prefill) */
				ve vdx = vset1_e(dx);
				int j = 0;
				for (; j + VE <= N; j += VE)
					vstore_e(Sp + j, vfma_e(vdx, vload_e(Bg + j), vload_e(Sp + j) * vdA));
				for (; j < N; j++)
					Sp[j] = sfma(dx, Bg[j], Sp[j] * dA);
				float yv = sfma(D[h], xp, dotf(Sp, Cg, N));
				float g = zt[(size_t)h * P + p];
				yt[(size_t)h * P + p] = gate ? yv * silu_f(g) : yv;
			}
		}
	}
}

/* Mamba (1)'s scan, one row at a time in order (any split of the rows gives the same bits):
 * per channel, S = exp(dt * -exp(A_log)) S + (dt u) B element by element, y = S.C in dotf's
 * order, plus D u, times silu(z) */
static void lm_mamba1_rows(struct sb_ctx *ctx, float *y, const float *u, const float *dt, const float *B, const float *C,
			   const float *z, float *S, const float *A_log, const float *D, int n, int nI, int N)
{
	for (int r = 0; r < n; r++) {
		const float *ur = u + (size_t)r * nI, *dr = dt + (size_t)r * nI, *zr = z + (size_t)r * nI;
		const float *Br = B + (size_t)r * N, *Cr = C + (size_t)r * N;
		float *yr = y + (size_t)r * nI;
		for (int i = 0; i < nI; i++) {
			float delta = softplus_f(dr[i]), du = delta * ur[i];
			float *Si = S + (size_t)i * N;
			const float *Ai = A_log + (size_t)i * N;
			for (int j = 0; j < N; j++)
				Si[j] = sfma(du, Br[j], expf(delta * -expf(Ai[j])) * Si[j]);
			yr[i] = sfma(D[i], ur[i], dotf(Si, Cr, N)) * silu_f(zr[i]);
		}
	}
}

/* gated DeltaNet's recurrence (transformers' torch_recurrent_gated_delta_rule), one row at a
 * time in order: any split of the rows gives the same bits */
static void lm_deltanet_rows(struct sb_ctx *ctx, float *y, const float *qkv, const float *b, const float *a, float *S,
			     const float *A_log, const float *dt_bias, int n, int Hk, int Hv, int dk, int dv)
{
	size_t ld = 2 * (size_t)Hk * dk + (size_t)Hv * dv;
	float *qn = sb_cpu_scratch(ctx, (2 * (size_t)dk + (size_t)dv) * sizeof(float)), *kn = qn + dk, *dl = kn + dk;
	float qscale = 1.0f / sqrtf((float)dk);
	int r = Hv / Hk;
	for (int t = 0; t < n; t++) {
		const float *row = qkv + (size_t)t * ld, *q = row, *k = row + (size_t)Hk * dk, *v = k + (size_t)Hk * dk;
		float *yt = y + (size_t)t * Hv * dv;
		for (int h = 0; h < Hv; h++) {
			const float *qh = q + (size_t)(h / r) * dk, *kh = k + (size_t)(h / r) * dk, *vh = v + (size_t)h * dv;
			float sq = 0, sk = 0;
			for (int i = 0; i < dk; i++) {
				sq = sfma(qh[i], qh[i], sq);
				sk = sfma(kh[i], kh[i], sk);
			}
			float iq = 1.0f / sqrtf(sq + 1e-6f), ik = 1.0f / sqrtf(sk + 1e-6f);
			for (int i = 0; i < dk; i++) {
				qn[i] = qh[i] * iq * qscale;
				kn[i] = kh[i] * ik;
			}
			float beta = 1.0f / (1.0f + expf(-b[(size_t)t * Hv + h]));
			float decay = expf(-expf(A_log[h]) * softplus_f(a[(size_t)t * Hv + h] + dt_bias[h]));
			float *Sh = S + (size_t)h * dk * dv; /* [dk, dv] */
			for (size_t i = 0; i < (size_t)dk * dv; i++)
				Sh[i] *= decay;
			for (int j = 0; j < dv; j++) { /* kv_mem = S^T k, then delta */
				float m = 0;
				for (int i = 0; i < dk; i++)
					m = sfma(Sh[(size_t)i * dv + j], kn[i], m);
				dl[j] = (vh[j] - m) * beta;
			}
			for (int i = 0; i < dk; i++)
				for (int j = 0; j < dv; j++)
					Sh[(size_t)i * dv + j] = sfma(kn[i], dl[j], Sh[(size_t)i * dv + j]);
			float *yh = yt + (size_t)h * dv;
			for (int j = 0; j < dv; j++) {
				float o = 0;
				for (int i = 0; i < dk; i++)
					o = sfma(Sh[(size_t)i * dv + j], qn[i], o);
				yh[j] = o;
			}
		}
	}
}

/* ---------------------------------------------------------------- mixture of experts (evaluation) */

/* Granite's experts: out[i] = moe(x[i]) + out[i]. Router logits r[E, d] . x (dotf, row by
 * row); the top K (ties: the lower index); gates = softmax of the picked logits (gate_all:
 * over all E logits, the picked ones not renormalised: Jamba's). Then
 * expert by expert, in index order: the rows routed to it gathered, h = wi[e] x and
 * o = wo[e] a with a = silu(h[0:Fe]) * h[Fe:2Fe] as matmul_rows products (each element
 * an FMA chain over k from 0, the same whatever rows share the batch), and gate * o added
 * to the row's sum; each row's sum thus takes its experts in index order (transformers'
 * index_add), then is added to out. A row's bits depend on that row alone. The experts'
 * matrices are packed one by one (wi16 / wo16: bfloat16, read by matmul_rows_bf16 with
 * the same chains on the widened values; else wi / wo in float). K <= 64. */
static void moe_rows(struct sb_ctx *ctx, float *out, const float *x, const float *r, const float *wi,
		     const float *wo, const uint16_t *wi16, const uint16_t *wo16, float *scr, int n, int d, int E,
		     int K, int Fe, int gate_all)
{
	size_t nn = (size_t)n;
	float *lg = scr, *gate = lg + nn * E, *xg = gate + 2 * nn * K + nn, *h = xg + nn * d, *a = h + nn * 2 * Fe;
	float *o = a + nn * Fe, *acc = o + nn * d;
	int *pick = (int *)(void *)(gate + nn * K), *rows = pick + nn * K; /* n K picks, n row indices */
	float *gsel = lg; /* the gathered rows' gates (the logits are no longer needed then) */
	for (int i = 0; i < n; i++) {
		const float *xi = x + (size_t)i * d;
		float *li = lg + (size_t)i * E, *gi = gate + (size_t)i * K;
		int *pi = pick + (size_t)i * K;
		for (int e = 0; e < E; e++)
			li[e] = dotf(r + (size_t)e * d, xi, d);
		for (int k = 0; k < K; k++) {
			int best = -1;
			for (int e = 0; e < E; e++) {
				int used = 0;
				for (int j = 0; j < k && !used; j++)
					used = pi[j] == e;
				if (!used && (best < 0 || li[e] > li[best]))
					best = e;
			}
			pi[k] = best;
		}
		float mx = li[pi[0]], sum = 0;
		for (int k = 0; k < K; k++)
			sum += gi[k] = expf(li[pi[k]] - mx);
		if (gate_all) { /* the softmax over every expert: the unpicked ones join the sum */
			sum = 0;
			for (int e = 0; e < E; e++)
				sum += expf(li[e] - mx);
		}
		for (int k = 0; k < K; k++)
			gi[k] /= sum;
	}
	/* the logits' space now holds gathered gates: n E >= n floats are there */
	memset(acc, 0, nn * d * sizeof *acc);
	for (int e = 0; e < E; e++) {
		int m = 0;
		for (int i = 0; i < n; i++)
			for (int k = 0; k < K; k++)
				if (pick[(size_t)i * K + k] == e) {
					rows[m] = i;
					gsel[m] = gate[(size_t)i * K + k];
					memcpy(xg + (size_t)m * d, x + (size_t)i * d, (size_t)d * sizeof *xg);
					m++;
				}
		if (!m)
			continue;
		size_t oi = (size_t)e * 2 * Fe * d, oo = (size_t)e * d * Fe;
		if (wi16)
			lm_matmul_rows_bf16(ctx, h, xg, wi16 + oi, NULL, m, d, 2 * Fe);
		else
			lm_matmul_rows(ctx, h, xg, wi + oi, NULL, m, d, 2 * Fe);
		for (int j = 0; j < m; j++) {
			const float *hj = h + (size_t)j * 2 * Fe;
			float *aj = a + (size_t)j * Fe;
			for (int q = 0; q < Fe; q++)
				aj[q] = hj[q] / (1.0f + expf(-hj[q])) * hj[Fe + q];
		}
		if (wo16)
			lm_matmul_rows_bf16(ctx, o, a, wo16 + oo, NULL, m, Fe, d);
		else
			lm_matmul_rows(ctx, o, a, wo + oo, NULL, m, Fe, d);
		for (int j = 0; j < m; j++)
			axpy(acc + (size_t)rows[j] * d, gsel[j], o + (size_t)j * d, d);
	}
	lm_add(ctx, out, acc, nn * d);
}

static void lm_moe_rows(struct sb_ctx *ctx, float *out, const float *x, const float *r, const float *wi,
			const float *wo, float *scr, int n, int d, int E, int K, int Fe, int gate_all)
{
	moe_rows(ctx, out, x, r, wi, wo, NULL, NULL, scr, n, d, E, K, Fe, gate_all);
}

static void lm_moe_rows_bf16(struct sb_ctx *ctx, float *out, const float *x, const float *r, const uint16_t *wi,
			     const uint16_t *wo, float *scr, int n, int d, int E, int K, int Fe, int gate_all)
{
	moe_rows(ctx, out, x, r, NULL, NULL, wi, wo, scr, n, d, E, K, Fe, gate_all);
}

/* ---------------------------------------------------------------- table */

static const struct sb_backend_lm_ops cpu_lm_ops = {
	.embedding_backward = lm_embedding_backward,
	.pos_forward = lm_pos_forward,
	.pos_backward = lm_pos_backward,
	.norm_forward = lm_norm_forward,
	.norm_backward = lm_norm_backward,
	.add = lm_add,
	.pack_rows = lm_pack_rows,
	.pack_rows_bf16 = lm_pack_rows_bf16,
	.matmul_rows_bf16 = lm_matmul_rows_bf16,
	.matmul_rows = lm_matmul_rows,
	.swiglu_forward = lm_swiglu_forward,
	.swiglu_backward = lm_swiglu_backward,
	.geglu_forward = lm_geglu_forward,
	.geglu_backward = lm_geglu_backward,
	.rope = lm_rope,
	.attn_forward = lm_attn_forward,
	.attn_backward = lm_attn_backward,
	.swa_forward = lm_swa_forward,
	.swa_backward = lm_attn_backward,
	.attn_rows = lm_attn_rows,
	.conv_forward = lm_conv_forward,
	.conv_backward = lm_conv_backward,
	.conv_rows = lm_conv_rows,
	.dwconv_forward = lm_dwconv_forward,
	.dwconv_backward = lm_dwconv_backward,
	.dwconv_rows = lm_dwconv_rows,
	.linattn_forward = lm_linattn_forward,
	.linattn_backward = lm_linattn_backward,
	.linattn_rows = lm_linattn_rows,
	.mamba2_rows = lm_mamba2_rows,
	.mamba1_rows = lm_mamba1_rows,
	.deltanet_rows = lm_deltanet_rows,
	.moe_rows = lm_moe_rows,
	.moe_rows_bf16 = lm_moe_rows_bf16,
};

const struct sb_backend_lm_ops *sb_backend_lm(const struct sb_backend *be)
{
	if (be && be->ops && be->ops->name && strcmp(be->ops->name, "cpu") == 0)
		return &cpu_lm_ops;
	return NULL;
}
