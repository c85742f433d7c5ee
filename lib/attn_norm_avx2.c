/* attn_norm_avx2.c — AVX2 + FMA row kernels of general-alpha entmax.
 *
 * Compiled to nothing unless the build targets AVX2 and FMA without AVX-512
 * (`make V3=1`, -march=x86-64-v3, or -march=native on such a machine):
 * attn_norm_impl.h defines SB_NORM_AVX2 then. Only entmax_bisect's and headwise
 * adaptive entmax's rows (alpha not 1.5 or 2) on rows that need no effective-row
 * copy come here; every other normaliser and row runs the portable kernels of
 * attn_norm.c, as before.
 *
 * The algorithm is the AVX-512 kernel's (attn_norm_avx512.c, gsolve and
 * bwd_group): Halley's method from Jensen's lower bound tau0 on the threshold,
 * over the candidate keys only (keys with y <= tau0 are never in the support:
 * the iterates are kept >= tau0), for up to 8 rows (one per lane) whose per-row
 * steps are one vector computation; the backward likewise in runs of up to 8
 * rows. log2 and 2^x are the AVX-512 kernel's polynomials (attn_norm_poly.h),
 * with the exponent and mantissa split by integer operations instead of
 * vgetexp/vgetmant and 2^n built in the exponent bits instead of vscalef (0 below
 * 2^-126); 1/d is the 12-bit reciprocal estimate with one Newton step.
 *
 * The portable kernel needs four to five times as long per row on AVX2: a true
 * division per key in its log and another for 1/d, every key in every pass, and
 * one row's scalar step (a libm pow) between passes. Results differ from the
 * portable kernels' in the last bits (they are tested against the same double
 * reference, tests/unit/test_attn_norm.c on the v3 build, tests/sh/isa_v3.sh);
 * a row's result does not depend on the rows solved with it (tested bit for bit).
 */
#include "attn_norm_impl.h"
#include "attn_norm_poly.h"

#ifdef SB_NORM_AVX2

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define GROWS 8 /* rows solved together: one per lane */

static inline __m256 set1(float v)
{
	return _mm256_set1_ps(v);
}

/* lanes of the 8-key block at i that lie inside a row of n keys */
static inline __m256i tm(int n, int i)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* x[i..i+8) with the lanes past n replaced by `fill` (no read past n) */
static inline __m256 load_fill(const float *x, int n, int i, __m256 fill)
{
	if (n - i >= 8)
		return _mm256_loadu_ps(x + i);
	__m256i k = tm(n, i);
	return _mm256_blendv_ps(fill, _mm256_maskload_ps(x + i, k), _mm256_castsi256_ps(k));
}

static inline void store_tail(float *x, int n, int i, __m256 v)
{
	if (n - i >= 8)
		_mm256_storeu_ps(x + i, v);
	else
		_mm256_maskstore_ps(x + i, tm(n, i), v);
}

static inline __m256 and_mask(__m256 m, __m256 v)
{
	return _mm256_and_ps(m, v);
}

static inline float hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* lane q of the result = the sum of the 8 lanes of v[q] */
static inline __m256 hsum8(const __m256 *v)
{
	__m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
	__m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
	t0 = _mm256_hadd_ps(t0, t1); /* per 128-bit half: the half-sums of v0..v3 */
	t2 = _mm256_hadd_ps(t2, t3);
	return _mm256_add_ps(_mm256_permute2f128_ps(t0, t2, 0x20), _mm256_permute2f128_ps(t0, t2, 0x31));
}

/* log2 x for positive normal x: x = 2^k m, m in [0.75, 1.5) */
static inline __m256 vlog2(__m256 x)
{
	__m256i i = _mm256_castps_si256(x);
	__m256 k = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(i, 23), _mm256_set1_epi32(127)));
	__m256 m = _mm256_castsi256_ps(
	    _mm256_or_si256(_mm256_and_si256(i, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f800000)));
	__m256 big = _mm256_cmp_ps(m, set1(1.5f), _CMP_GE_OQ); /* [1.5, 2): m/2, k + 1 */
	m = _mm256_blendv_ps(m, _mm256_mul_ps(m, set1(0.5f)), big);
	k = _mm256_add_ps(k, _mm256_and_ps(big, set1(1.0f)));
	__m256 f = _mm256_sub_ps(m, set1(1.0f)), f2 = _mm256_mul_ps(f, f), f4 = _mm256_mul_ps(f2, f2);
	__m256 P = SB_LOG2_POLY(_mm256_fmadd_ps, _mm256_mul_ps, set1, f, f2, f4);
	return _mm256_fmadd_ps(f, P, k);
}

/* 2^t: n = round(t), 2^(t-n) by the degree-6 fit, times 2^n put into the exponent
 * bits; t is clamped to [-127, 128], so 0 for n = -127 (below 2^-126.5) and +inf
 * for n = 128 */
static inline __m256 vexp2(__m256 t)
{
	t = _mm256_min_ps(_mm256_max_ps(t, set1(-127.0f)), set1(128.0f));
	__m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_sub_ps(t, n), r2 = _mm256_mul_ps(r, r);
	__m256 q = SB_EXP2_POLY(_mm256_fmadd_ps, _mm256_mul_ps, set1, r, r2);
	__m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	return _mm256_mul_ps(q, _mm256_castsi256_ps(e));
}

/* 1/b for a normal b: the 12-bit estimate and one Newton step (about 2^-23) */
static inline __m256 vrcp(__m256 b)
{
	__m256 r = _mm256_rcp_ps(b);
	return _mm256_mul_ps(r, _mm256_fnmadd_ps(b, r, set1(2.0f)));
}

/* y = x (alpha-1) - max(x)(alpha-1), a product then a difference, not fused: the portable
 * kernels and the AVX-512 one round it so too, so that d = y - tau is the same number in every
 * kernel's forward and backward (a backward handed another kernel's p and tau, as
 * test_cuda_host does, recomputes the d that p was made from; a fused y differs in the last
 * bit, which near the support's edge, d ~ 1e-5, moves q = p/d by 1e-3) */
static inline __m256 vy(__m256 x, __m256 am1, __m256 ym)
{
	__m256 p = _mm256_mul_ps(x, am1);
	/* a compiler allowed to contract (-ffp-contract=fast, -std=gnu11, clang's default) would
	 * fuse the two into one FMA: the max key's y would then be the rounding error of m (alpha-1)
	 * instead of exactly 0, and at scores of 1e30 no key would lie above the bound (p = 0) */
	__asm__("" : "+x"(p));
	return _mm256_sub_ps(p, ym);
}

int sbv_row_finite(const float *x, int n, float *mn)
{
	__m256 lo = set1(INFINITY), bad = _mm256_setzero_ps(), absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	for (int i = 0; i < n; i += 8) {
		__m256 v = load_fill(x, n, i, set1(0.0f));
		bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_and_ps(v, absm), set1(INFINITY), _CMP_NLT_UQ));
		lo = _mm256_min_ps(lo, load_fill(x, n, i, set1(INFINITY)));
	}
	__m128 m = _mm_min_ps(_mm256_castps256_ps128(lo), _mm256_extractf128_ps(lo, 1));
	m = _mm_min_ps(m, _mm_movehl_ps(m, m));
	m = _mm_min_ss(m, _mm_movehdup_ps(m));
	*mn = _mm_cvtss_f32(m);
	return _mm256_movemask_ps(bad) == 0;
}

static float vmax_row(const float *x, int n)
{
	__m256 hi = set1(-INFINITY);
	for (int i = 0; i < n; i += 8)
		hi = _mm256_max_ps(hi, load_fill(x, n, i, set1(-INFINITY)));
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(hi), _mm256_extractf128_ps(hi, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

/* ------------------------------------------------------------ forward */

/* One row of the solver: its candidate keys (y > tau0) compressed into y, their
 * positions in pos, and u = [y - tau]_+^e of the last pass. */
struct grow {
	const float *x;
	float *p, *y, *u; /* y, u: n + 8 floats each (the 8 past the candidates: -inf, 0) */
	int32_t *pos;     /* n */
	float m;
	int n, nc;
};

/* floats of ws per row */
static size_t grow_floats(int n)
{
	return 3 * (size_t)n + 16;
}

int sbv_entmax_rows_fit(int n, size_t ws_floats)
{
	size_t g = ws_floats / grow_floats(n);
	return g < 1 ? 1 : g > GROWS ? GROWS : (int)g;
}

/* Jensen's lower bound on each row's threshold (see gsetup in attn_norm_avx512.c):
 * for any set S of keys, tau* >= mean_S y - |S|^-(alpha-1), with S = {y > t}, t in
 * {-1, -1/2, -1/4, -1/8}, backed off by a few ulps for the rounding of the means;
 * then the row's candidates (y > tau0) compressed. Returns tau0 in lanes. */
static __m256 gsetup(struct grow *g, int G, float am1)
{
	static const float thr[4] = {-1.0f, -0.5f, -0.25f, -0.125f};
	__m256 va = set1(am1), sums[4][GROWS];
	float cnt[4][GROWS];
	for (int q = 0; q < GROWS; q++)
		for (int t = 0; t < 4; t++) {
			sums[t][q] = _mm256_setzero_ps();
			cnt[t][q] = 1.0f;
		}
	for (int q = 0; q < G; q++) {
		const float *x = g[q].x;
		int n = g[q].n;
		g[q].m = vmax_row(x, n);
		__m256 ym = set1(g[q].m * am1);
		__m256i c[4];
		for (int t = 0; t < 4; t++)
			c[t] = _mm256_setzero_si256();
		for (int i = 0; i < n; i += 8) {
			/* lanes past the row: y = -inf, in no set and no candidate */
			__m256 y = vy(load_fill(x, n, i, set1(-INFINITY)), va, ym);
			_mm256_storeu_ps(g[q].u + i, y); /* y of every key, compressed below */
			for (int t = 0; t < 4; t++) {
				__m256 in = _mm256_cmp_ps(y, set1(thr[t]), _CMP_GT_OQ);
				sums[t][q] = _mm256_add_ps(sums[t][q], and_mask(in, y));
				c[t] = _mm256_sub_epi32(c[t], _mm256_castps_si256(in)); /* true lanes are -1 */
			}
		}
		for (int t = 0; t < 4; t++) { /* k0 >= k1 >= k2 >= k3 >= 1: the max key has y = 0 */
			int32_t ck[8], k = 0;
			_mm256_storeu_si256((__m256i *)ck, c[t]);
			for (int l = 0; l < 8; l++)
				k += ck[l];
			cnt[t][q] = (float)k;
		}
	}
	__m256 t0 = set1(-1.0f);
	for (int t = 0; t < 4; t++) {
		__m256 k = _mm256_loadu_ps(cnt[t]);
		__m256 kp = vexp2(_mm256_mul_ps(set1(-am1), vlog2(k))); /* k^-(alpha-1) */
		t0 = _mm256_max_ps(t0, _mm256_sub_ps(_mm256_div_ps(hsum8(sums[t]), k), kp));
	}
	__m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	t0 = _mm256_fnmadd_ps(set1(4.8e-7f), _mm256_add_ps(set1(1.0f), _mm256_and_ps(t0, absm)), t0);
	t0 = _mm256_max_ps(t0, set1(-1.0f));
	float t0s[GROWS];
	_mm256_storeu_ps(t0s, t0);
	for (int q = 0; q < G; q++) {
		const float *yall = g[q].u;
		float *y = g[q].y, t = t0s[q];
		int32_t *pos = g[q].pos;
		int c = 0;
		for (int i = 0; i < g[q].n; i++) { /* branch-free: write, then keep when a candidate */
			y[c] = yall[i];
			pos[c] = i;
			c += yall[i] > t;
		}
		g[q].nc = c;
		for (int j = 0; j < 8; j++)
			y[c + j] = -INFINITY; /* d = -inf: outside the support in every pass */
	}
	return t0;
}

/* One pass over a row's candidates at tau: u = [y - tau]_+^e, and the vector
 * partial sums of d^e, d^(e-1) and d^(e-2). */
static inline void gpass(struct grow *g, __m256 vt, __m256 ve, __m256 *F, __m256 *S1, __m256 *S2)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, one = set1(1.0f);
	const float *y = g->y;
	float *u = g->u;
	for (int i = 0; i < g->nc; i += 8) {
		__m256 d = _mm256_sub_ps(_mm256_loadu_ps(y + i), vt);
		__m256 in = _mm256_cmp_ps(d, set1(FLT_MIN), _CMP_GT_OQ);
		__m256 dc = _mm256_blendv_ps(one, d, in);
		__m256 v = and_mask(in, vexp2(_mm256_mul_ps(ve, vlog2(dc))));
		__m256 r = vrcp(dc);
		__m256 w = _mm256_mul_ps(v, r);
		_mm256_storeu_ps(u + i, v);
		a0 = _mm256_add_ps(a0, v);
		a1 = _mm256_add_ps(a1, w);
		a2 = _mm256_fmadd_ps(w, r, a2);
	}
	*F = a0;
	*S1 = a1;
	*S2 = a2;
}

/* Halley's method for G <= 8 rows (lanes) from tau0, as gsolve in
 * attn_norm_avx512.c (see there for the step): a step that falls by more than
 * 2 ulps is taken, the iteration stops when a step moves tau by at most 2 ulps
 * (the last pass then left u at the final tau) or after 100 passes. */
static void gsolve(struct grow *g, int G, float am1, __m256 *tau_out, __m256 *Z_out, __m256 *it_out)
{
	__m256 t0 = gsetup(g, G, am1);
	__m256 ve = set1(1.0f / am1), tau = t0, Z = set1(1.0f), it = _mm256_setzero_ps();
	__m256 em1 = set1(1.0f / am1 - 1.0f), om = set1(1.0f - am1), one = set1(1.0f), prev = set1(INFINITY);
	__m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	int done = ~((1 << G) - 1) & 0xff;
	float ts[GROWS];
	__m256 a0[GROWS], a1[GROWS], a2[GROWS];
	for (int q = 0; q < GROWS; q++)
		a0[q] = a1[q] = a2[q] = _mm256_setzero_ps();
	while (done != 0xff) {
		_mm256_storeu_ps(ts, tau);
		for (int q = 0; q < G; q++)
			if (!(done >> q & 1))
				gpass(&g[q], set1(ts[q]), ve, &a0[q], &a1[q], &a2[q]);
		/* act: lanes of the rows still solving */
		__m256 act = _mm256_castsi256_ps(_mm256_cmpeq_epi32(
		    _mm256_and_si256(_mm256_set1_epi32(done), _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128)),
		    _mm256_setzero_si256()));
		__m256 F = _mm256_blendv_ps(one, hsum8(a0), act);
		__m256 S1 = _mm256_blendv_ps(one, hsum8(a1), act);
		__m256 S2 = hsum8(a2);
		__m256 pw = vexp2(_mm256_mul_ps(om, vlog2(F))); /* F^(1-(alpha-1)) */
		__m256 nstep = _mm256_div_ps(_mm256_sub_ps(F, pw), S1);
		__m256 P = _mm256_div_ps(F, pw);
		__m256 L = _mm256_div_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(P, one), em1),
		                                       _mm256_fmsub_ps(F, S2, _mm256_mul_ps(S1, S1))),
		                         _mm256_mul_ps(P, _mm256_mul_ps(S1, S1)));
		__m256 hal = _mm256_cmp_ps(_mm256_and_ps(L, absm), one, _CMP_LE_OQ);
		__m256 step =
		    _mm256_blendv_ps(nstep, _mm256_div_ps(nstep, _mm256_fnmadd_ps(set1(0.5f), L, one)), hal);
		__m256 tn = _mm256_max_ps(_mm256_add_ps(tau, step), t0);
		__m256 thr = _mm256_mul_ps(set1(2.4e-7f), _mm256_and_ps(tau, absm));
		it = _mm256_add_ps(it, and_mask(act, one));
		/* stalled: a step no smaller than the last, within 16 ulps, is the noise of F's exp and
		 * log, not convergence (constant rows oscillated to the pass cap); tau stays */
		__m256 astep = _mm256_and_ps(_mm256_sub_ps(tn, tau), absm);
		__m256 stall = _mm256_and_ps(_mm256_cmp_ps(astep, prev, _CMP_GE_OQ),
		                             _mm256_cmp_ps(astep, _mm256_mul_ps(set1(16.0f), thr), _CMP_LE_OQ));
		prev = _mm256_blendv_ps(prev, astep, act);
		__m256 moved = _mm256_andnot_ps(stall, _mm256_cmp_ps(astep, thr, _CMP_GT_OQ));
		__m256 go = _mm256_and_ps(_mm256_and_ps(moved, _mm256_cmp_ps(it, set1(100.0f), _CMP_LT_OQ)), act);
		Z = _mm256_blendv_ps(Z, F, act);
		tau = _mm256_blendv_ps(tau, tn, go);
		done |= _mm256_movemask_ps(_mm256_andnot_ps(go, act));
	}
	*tau_out = tau;
	*Z_out = Z;
	*it_out = it;
}

/* p from the candidates' u (zeros elsewhere), normalised; aux */
static void gfinish(struct grow *g, float tau, float Z, float it, float *aux)
{
	float inv = 1.0f / Z;
	int cnt = 0;
	memset(g->p, 0, (size_t)g->n * sizeof *g->p);
	for (int j = 0; j < g->nc; j++) {
		float v = g->u[j] * inv;
		g->p[g->pos[j]] = v;
		cnt += v > 0;
	}
	aux[0] = tau;
	aux[1] = g->m;
	aux[2] = it;
	aux[3] = (float)cnt;
}

void sbv_entmax_rows(float *p, const float *x, int rows, long stride, int n, float am1, float *aux, float *ws,
                     size_t ws_floats)
{
	int gmax = sbv_entmax_rows_fit(n, ws_floats);
	size_t per = grow_floats(n);
	for (int r0 = 0; r0 < rows; r0 += gmax) {
		int G = rows - r0 < gmax ? rows - r0 : gmax;
		struct grow g[GROWS];
		for (int q = 0; q < G; q++) {
			float *w = ws + (size_t)q * per;
			g[q] = (struct grow){.x = x + (r0 + q) * stride,
			                     .p = p + (r0 + q) * stride,
			                     .y = w,
			                     .u = w + n + 8,
			                     .pos = (int32_t *)(w + 2 * (size_t)n + 16),
			                     .n = n};
		}
		__m256 tau, Z, it;
		gsolve(g, G, am1, &tau, &Z, &it);
		float ts[GROWS], zs[GROWS], is[GROWS];
		_mm256_storeu_ps(ts, tau);
		_mm256_storeu_ps(zs, Z);
		_mm256_storeu_ps(is, it);
		for (int q = 0; q < G; q++)
			gfinish(&g[q], ts[q], zs[q], is[q], aux + 4 * (r0 + q));
	}
}

/* ----------------------------------------------------------- backward */

/* The exact backward (kb_entmax in attn_norm.c) for G <= 8 rows, their
 * reductions done together (bwd_group in attn_norm_avx512.c): q = p/d, ds = q (dp
 * - c) with c = sum q dp / sum q, and d loss/d alpha = e sum_i dp_i (e (p_i - yq_i)
 * - (p_i ln p_i - yq_i ent)), yq = q/Q, ent = sum p ln p. ws: 2n floats per row.
 * Returns da plus the rows' d loss/d alpha, added one by one in row order (so that a
 * run of rows sums as row by row calls do, whatever its groups). */
static double bwd_group(float *ds, const float *p, const float *dp, const float *x, const float *aux, int G,
                        long stride, int n, float am1, int want_alpha, float *ws, double da)
{
	__m256 va = set1(am1), zero = _mm256_setzero_ps(), one = set1(1.0f), aq[GROWS], aqd[GROWS], ah[GROWS],
	       acc[GROWS];
	for (int r = 0; r < GROWS; r++)
		aq[r] = aqd[r] = ah[r] = acc[r] = zero;
	for (int r = 0; r < G; r++) {
		const float *pr = p + r * stride, *gr = dp + r * stride, *xr = x + r * stride;
		float *wq = ws + (size_t)r * 2 * n, *wl = wq + n;
		__m256 ym = set1(aux[4 * r + 1] * am1), vt = set1(aux[4 * r]), a0 = zero, a1 = zero, a2 = zero;
		for (int i = 0; i < n; i += 8) {
			__m256 pv = load_fill(pr, n, i, zero);
			__m256 d = _mm256_sub_ps(vy(load_fill(xr, n, i, zero), va, ym), vt);
			__m256 in = _mm256_and_ps(_mm256_cmp_ps(pv, zero, _CMP_GT_OQ), _mm256_cmp_ps(d, zero, _CMP_GT_OQ));
			__m256 q = and_mask(in, _mm256_mul_ps(pv, vrcp(_mm256_blendv_ps(one, d, in))));
			store_tail(wq, n, i, q);
			a0 = _mm256_add_ps(a0, q);
			a1 = _mm256_fmadd_ps(q, load_fill(gr, n, i, zero), a1);
			if (want_alpha) { /* p ln p (0 where p <= FLT_MIN), kept for the second pass */
				__m256 pos = _mm256_cmp_ps(pv, set1(FLT_MIN), _CMP_GT_OQ);
				__m256 lp = _mm256_mul_ps(vlog2(_mm256_blendv_ps(one, pv, pos)), set1(0.693147181f));
				__m256 plp = and_mask(pos, _mm256_mul_ps(pv, lp));
				store_tail(wl, n, i, plp);
				a2 = _mm256_add_ps(a2, plp);
			}
		}
		aq[r] = a0;
		aqd[r] = a1;
		ah[r] = a2;
	}
	__m256 live = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(G), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
	__m256 Q = _mm256_blendv_ps(one, hsum8(aq), live), QD = hsum8(aqd);
	float cs[GROWS], iq[GROWS], ents[GROWS];
	_mm256_storeu_ps(cs, _mm256_div_ps(QD, Q));
	_mm256_storeu_ps(iq, _mm256_div_ps(one, Q));
	_mm256_storeu_ps(ents, hsum8(ah));
	float e = 1.0f / am1;
	__m256 ve = set1(e);
	for (int r = 0; r < G; r++) {
		const float *pr = p + r * stride, *gr = dp + r * stride, *wq = ws + (size_t)r * 2 * n, *wl = wq + n;
		float *dr = ds + r * stride;
		__m256 c = set1(cs[r]), vQ = set1(iq[r]), vent = set1(ents[r]), a = zero;
		for (int i = 0; i < n; i += 8) {
			__m256 q = load_fill(wq, n, i, zero), gv = load_fill(gr, n, i, zero);
			if (want_alpha) {
				__m256 pv = load_fill(pr, n, i, zero), plp = load_fill(wl, n, i, zero);
				__m256 yq = _mm256_mul_ps(q, vQ);
				__m256 t = _mm256_sub_ps(_mm256_mul_ps(ve, _mm256_sub_ps(pv, yq)),
				                         _mm256_fnmadd_ps(yq, vent, plp));
				a = _mm256_fmadd_ps(gv, t, a);
			}
			store_tail(dr, n, i, _mm256_mul_ps(q, _mm256_sub_ps(gv, c)));
		}
		acc[r] = a;
	}
	if (!want_alpha)
		return da;
	float das[GROWS];
	_mm256_storeu_ps(das, hsum8(acc));
	for (int r = 0; r < G; r++)
		da += (double)e * (double)das[r];
	return da;
}

double sbv_entmax_bwd_rows(float *ds, const float *p, const float *dp, const float *x, const float *aux, int rows,
                           long stride, int n, float am1, int want_alpha, float *ws, size_t ws_floats)
{
	int gmax = (int)(ws_floats / (2 * (size_t)n));
	gmax = gmax < 1 ? 1 : gmax > GROWS ? GROWS : gmax;
	double da = 0;
	for (int r0 = 0; r0 < rows; r0 += gmax) {
		int G = rows - r0 < gmax ? rows - r0 : gmax;
		da = bwd_group(ds + r0 * stride, p + r0 * stride, dp + r0 * stride, x + r0 * stride, aux + 4 * r0, G,
		               stride, n, am1, want_alpha, ws, da);
	}
	return da;
}

#endif
