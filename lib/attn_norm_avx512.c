/* attn_norm_avx512.c — AVX-512 row kernels of the float normalisers.
 *
 * Compiled to nothing unless __AVX512F__ is defined (e.g. -march=native on a
 * machine that has it). The algorithms are those of the portable kernels in
 * attn_norm.c (see the comments there); here rows need no padding, the tails
 * use masked loads and stores, and exp/log are vectorised from the same series
 * (exp: Taylor to r^7 after x = n ln2 + r, then vscalefps; log: vgetmantps to
 * m in [0.75, 1.5), log m = 2 atanh((m-1)/(m+1)) to u^11). Explicit FMAs are
 * used where they help; results therefore differ from the portable kernels in
 * the last bits, and both are tested against the double reference.
 *
 * General alpha (entmax_bisect, headwise_adaptive_entmax): the portable kernel's
 * Halley steps from Jensen's lower bound (entmax_halley), here over the
 * compressed candidate keys (keys below the bound are never in the support), up
 * to 16 rows (one (sample, head) block's queries)
 * solved together with their per-row steps as one vector computation, and the
 * backward likewise done for runs of rows (gsolve, bwd_group below). A row's
 * result does not depend on the rows solved with it (tested bit for bit).
 *
 * The study's bisection (sbv_unrolled) takes its branch decisions from the
 * exact root tau* of sum p = 1 (found by the same Newton iteration as the
 * exact entmax): sum p(tau) - 1 >= 0 exactly when tau <= tau*, so a midpoint
 * farther from tau* than the float error of the sum (relative to the slope of
 * the sum at tau*) is decided without evaluating the sum; nearer ones are
 * evaluated in float as the straightforward loop would. The backward reads the
 * decisions and tau_hi from aux instead of re-running the bisection.
 */
#include "attn_norm_impl.h"
#include "attn_norm_poly.h"

#ifdef SB_NORM_AVX512

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline __mmask16 tm(int n, int i)
{
	int r = n - i;
	return r >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << r) - 1u);
}

static inline __m512 set1(float v)
{
	return _mm512_set1_ps(v);
}

static inline __m512 vexp(__m512 x)
{
	x = _mm512_max_ps(x, set1(-150.0f)); /* also maps -inf to -150: e^-150 underflows to 0 */
	x = _mm512_min_ps(x, set1(89.0f));   /* e^89 overflows to inf */
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, set1(1.44269504088896341f)),
	                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, set1(0.693359375f), x);
	r = _mm512_fnmadd_ps(n, set1(-2.12194440054690583e-4f), r);
	__m512 q = set1(1.0f / 5040.0f);
	q = _mm512_fmadd_ps(q, r, set1(1.0f / 720.0f));
	q = _mm512_fmadd_ps(q, r, set1(1.0f / 120.0f));
	q = _mm512_fmadd_ps(q, r, set1(1.0f / 24.0f));
	q = _mm512_fmadd_ps(q, r, set1(1.0f / 6.0f));
	q = _mm512_fmadd_ps(q, r, set1(0.5f));
	q = _mm512_fmadd_ps(q, r, set1(1.0f));
	q = _mm512_fmadd_ps(q, r, set1(1.0f));
	return _mm512_scalef_ps(q, n);
}

/* a/b via the 14-bit reciprocal estimate and one Newton-Raphson step
 * (relative error about 2^-28 before the final rounding; b a normal float) */
static inline __m512 vdiv(__m512 a, __m512 b)
{
	__m512 r = _mm512_rcp14_ps(b);
	r = _mm512_mul_ps(r, _mm512_fnmadd_ps(b, r, set1(2.0f)));
	return _mm512_mul_ps(a, r);
}

/* log x for positive normal x */
static inline __m512 vlog(__m512 x)
{
	__m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_src);
	__m512 k = _mm512_getexp_ps(x);
	k = _mm512_mask_add_ps(k, _mm512_cmp_ps_mask(m, set1(1.0f), _CMP_LT_OQ), k, set1(1.0f));
	__m512 u = vdiv(_mm512_sub_ps(m, set1(1.0f)), _mm512_add_ps(m, set1(1.0f)));
	__m512 u2 = _mm512_mul_ps(u, u);
	__m512 q = set1(1.0f / 11.0f);
	q = _mm512_fmadd_ps(q, u2, set1(1.0f / 9.0f));
	q = _mm512_fmadd_ps(q, u2, set1(1.0f / 7.0f));
	q = _mm512_fmadd_ps(q, u2, set1(1.0f / 5.0f));
	q = _mm512_fmadd_ps(q, u2, set1(1.0f / 3.0f));
	q = _mm512_fmadd_ps(q, u2, set1(1.0f));
	__m512 lm = _mm512_mul_ps(_mm512_add_ps(u, u), q);
	return _mm512_fmadd_ps(k, set1(0.693359375f), _mm512_fmadd_ps(k, set1(-2.12194440054690583e-4f), lm));
}

/* log2 x for positive normal x, with a short dependency chain (the entmax
 * passes are limited by how many pow chains are in flight): x = 2^k m with
 * m in [0.75, 1.5), log2 m = f P(f), f = m - 1, P of degree 9 fitted here for
 * minimax relative error on [-0.25, 0.5] (1.6e-8 with float coefficients),
 * evaluated by Estrin's scheme; no division. */
static inline __m512 vlog2(__m512 x)
{
	__m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_src);
	__m512 k = _mm512_getexp_ps(x);
	k = _mm512_mask_add_ps(k, _mm512_cmp_ps_mask(m, set1(1.0f), _CMP_LT_OQ), k, set1(1.0f));
	__m512 f = _mm512_sub_ps(m, set1(1.0f)), f2 = _mm512_mul_ps(f, f), f4 = _mm512_mul_ps(f2, f2);
	__m512 P = SB_LOG2_POLY(_mm512_fmadd_ps, _mm512_mul_ps, set1, f, f2, f4);
	return _mm512_fmadd_ps(f, P, k);
}

/* 2^t: n = round(t), 2^(t-n) by a degree-6 fit on [-0.5, 0.5] (relative error
 * 1.6e-8 with float coefficients), Estrin's scheme, then vscalefps (0 below
 * 2^-149, inf above 2^128) */
static inline __m512 vexp2(__m512 t)
{
	t = _mm512_min_ps(_mm512_max_ps(t, set1(-160.0f)), set1(130.0f));
	__m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_sub_ps(t, n), r2 = _mm512_mul_ps(r, r);
	__m512 q = SB_EXP2_POLY(_mm512_fmadd_ps, _mm512_mul_ps, set1, r, r2);
	return _mm512_scalef_ps(q, n);
}

/* [d]_+^e as in the portable powpos_v: 0 where d <= FLT_MIN */
static inline __m512 vpowpos(__m512 d, __m512 e, __mmask16 *in_out)
{
	__mmask16 in = _mm512_cmp_ps_mask(d, set1(FLT_MIN), _CMP_GT_OQ);
	__m512 dc = _mm512_mask_blend_ps(in, set1(1.0f), d);
	*in_out = in;
	return _mm512_maskz_mov_ps(in, vexp2(_mm512_mul_ps(e, vlog2(dc))));
}

/* x^y for a positive normal x, with the vector exp/log (no libm call) */
static inline float spow(float x, float y)
{
	return _mm512_cvtss_f32(vexp2(_mm512_mul_ps(set1(y), vlog2(set1(x)))));
}

static float vmax_row(const float *x, int n)
{
	__m512 m = set1(-INFINITY);
	for (int i = 0; i < n; i += 16)
		m = _mm512_max_ps(m, _mm512_mask_loadu_ps(set1(-INFINITY), tm(n, i), x + i));
	return _mm512_reduce_max_ps(m);
}

int sbv_row_finite(const float *x, int n, float *mn)
{
	__m512 z = _mm512_setzero_ps(), lo = set1(INFINITY);
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 v = _mm512_maskz_loadu_ps(k, x + i);
		z = _mm512_add_ps(z, _mm512_mul_ps(v, _mm512_setzero_ps())); /* NaN iff not finite */
		lo = _mm512_mask_min_ps(lo, k, lo, v);
	}
	*mn = _mm512_reduce_min_ps(lo);
	return _mm512_reduce_add_ps(z) == 0.0f;
}

/* bit g set when x + g stride [0..n) are all finite, g < rows <= 16 (the same test as
 * sbv_row_finite: a NaN in the sum of x * 0; no reduction needed for a yes/no) */
unsigned sbv_rows_finite(const float *x, int rows, long stride, int n)
{
	unsigned m = 0;
	for (int g = 0; g < rows; g++) {
		__m512 z = _mm512_setzero_ps();
		for (int i = 0; i < n; i += 16)
			z = _mm512_add_ps(z, _mm512_mul_ps(_mm512_maskz_loadu_ps(tm(n, i), x + g * stride + i),
			                                   _mm512_setzero_ps()));
		m |= (unsigned)(_mm512_cmp_ps_mask(z, z, _CMP_UNORD_Q) == 0) << g;
	}
	return m;
}

/* ------------------------------------------------------------ softmax */

void sbv_softmax(float *p, const float *x, int n, float *aux)
{
	float mx = vmax_row(x, n);
	__m512 vm = set1(mx), acc = _mm512_setzero_ps();
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 e = vexp(_mm512_sub_ps(_mm512_mask_loadu_ps(set1(-INFINITY), k, x + i), vm));
		e = _mm512_maskz_mov_ps(k, e);
		_mm512_mask_storeu_ps(p + i, k, e);
		acc = _mm512_add_ps(acc, e);
	}
	__m512 inv = set1(1.0f / _mm512_reduce_add_ps(acc));
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		_mm512_mask_storeu_ps(p + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + i), inv));
	}
	aux[0] = mx;
	aux[1] = mx;
}

void sbv_softmax_bwd(float *ds, const float *p, const float *dp, int n)
{
	__m512 acc = _mm512_setzero_ps();
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, p + i), _mm512_maskz_loadu_ps(k, dp + i), acc);
	}
	__m512 d = set1(_mm512_reduce_add_ps(acc));
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 g = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + i), d);
		_mm512_mask_storeu_ps(ds + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + i), g));
	}
}

/* Up to 16 rows at once: the per-row sums of sbv_softmax and sbv_softmax_bwd reduced
 * together. a[g] is row g's vector of partial sums; lane g of the result is
 * _mm512_reduce_add_ps(a[g]) bit for bit: the same additions with the same operands in
 * the same order (GCC's: upper 256 + lower 256, upper 128 + lower 128, lanes 0 + 2 and
 * 1 + 3, then 0 + 1), two rows per vector from the first step on. */
static inline __m512 reduce_add16(const __m512 a[16])
{
	__m512 s1[8], s2[4], s3[2];
	for (int k = 0; k < 8; k++) /* rows 2k, 2k+1: halves of 8 */
		s1[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xee),
		                      _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x44));
	for (int h = 0; h < 4; h++) /* rows 4h..4h+3: quarters of 4, one row per 128-bit lane */
		s2[h] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * h], s1[2 * h + 1], 0xdd),
		                      _mm512_shuffle_f32x4(s1[2 * h], s1[2 * h + 1], 0x88));
	for (int k = 0; k < 2; k++) /* lane q of s3[k]: rows 8k+q (elements 0, 1), 8k+4+q (2, 3) */
		s3[k] = _mm512_add_ps(_mm512_shuffle_ps(s2[2 * k], s2[2 * k + 1], 0x44),
		                      _mm512_shuffle_ps(s2[2 * k], s2[2 * k + 1], 0xee));
	/* element m of 128-bit lane q: row 4m + q */
	__m512 e = _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], 0x88), _mm512_shuffle_ps(s3[0], s3[1], 0xdd));
	const __m512i to_row = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	return _mm512_permutexvar_ps(to_row, e);
}

void sbv_softmax_rows(float *p, const float *x, int rows, long stride, int n, float *aux)
{
	__m512 acc[16];
	float mx[16], inv[16];
	for (int g = 0; g < 16; g++)
		acc[g] = _mm512_setzero_ps();
	for (int g = 0; g < rows; g++) {
		const float *xg = x + g * stride;
		float *pg = p + g * stride;
		mx[g] = vmax_row(xg, n);
		__m512 vm = set1(mx[g]);
		for (int i = 0; i < n; i += 16) {
			__mmask16 k = tm(n, i);
			__m512 e = vexp(_mm512_sub_ps(_mm512_mask_loadu_ps(set1(-INFINITY), k, xg + i), vm));
			e = _mm512_maskz_mov_ps(k, e);
			_mm512_mask_storeu_ps(pg + i, k, e);
			acc[g] = _mm512_add_ps(acc[g], e);
		}
	}
	_mm512_storeu_ps(inv, _mm512_div_ps(set1(1.0f), reduce_add16(acc)));
	for (int g = 0; g < rows; g++) {
		float *pg = p + g * stride;
		__m512 vi = set1(inv[g]);
		for (int i = 0; i < n; i += 16) {
			__mmask16 k = tm(n, i);
			_mm512_mask_storeu_ps(pg + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, pg + i), vi));
		}
		aux[4 * g] = mx[g];
		aux[4 * g + 1] = mx[g];
	}
}

void sbv_softmax_bwd_rows(float *ds, const float *p, const float *dp, int rows, long stride, int n)
{
	__m512 acc[16];
	float d[16];
	for (int g = 0; g < 16; g++)
		acc[g] = _mm512_setzero_ps();
	for (int g = 0; g < rows; g++)
		for (int i = 0; i < n; i += 16) {
			__mmask16 k = tm(n, i);
			acc[g] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, p + g * stride + i),
			                         _mm512_maskz_loadu_ps(k, dp + g * stride + i), acc[g]);
		}
	_mm512_storeu_ps(d, reduce_add16(acc));
	for (int g = 0; g < rows; g++) {
		__m512 vd = set1(d[g]);
		for (int i = 0; i < n; i += 16) {
			__mmask16 k = tm(n, i);
			__m512 gg = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + g * stride + i), vd);
			_mm512_mask_storeu_ps(ds + g * stride + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + g * stride + i), gg));
		}
	}
}

/* -------------------------------------------------------------- top-k */

/* number of keys with sign * x >= t */
static inline int count_ge(const float *x, int n, float t, __m512 sign)
{
	__m512 vt = set1(t);
	int c = 0;
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), sign);
		c += __builtin_popcount(_mm512_mask_cmp_ps_mask(k, v, vt, _CMP_GE_OQ));
	}
	return c;
}

/* Top-k (largest) or bottom-k of x, ties to the lower index, then softmax over
 * the kept keys. On v = +-x, with c(t) = #{v >= t}:
 *  1. bracket: lo, hi with c(lo) = clo >= k > chi = c(hi), from [min, max],
 *     narrowed by a safeguarded interpolation search (the straight line through
 *     (lo, clo) and (hi, chi) reaching k - 1/2; bisection when the last step did
 *     not halve the bracket) until a threshold splits off exactly k keys or at
 *     most 16 keys lie in [lo, hi) (usually one to three counting passes at
 *     T <= 100);
 *  2. the keys in [lo, hi) are compressed, in index order, into one vector and
 *     ranked exactly: rank_j = #{v_l > v_j} + #{l < j : v_l = v_j}; the
 *     k - chi of lowest rank are kept with every key >= hi. This is exact, and
 *     breaks ties toward the lower index.
 * If lo and hi become adjacent floats with more than 16 keys at lo (a heavily
 * tied row), the keys at lo are taken lowest index first. */
void sbv_topk(float *p, const float *x, int n, int kk, int largest, int32_t *key, float *aux)
{
	__m512 sign = set1(largest ? 1.0f : -1.0f);
	__m512 vmn = set1(INFINITY), vmx = set1(-INFINITY);
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), sign);
		vmn = _mm512_mask_min_ps(vmn, k, vmn, v);
		vmx = _mm512_mask_max_ps(vmx, k, vmx, v);
	}
	float lo = _mm512_reduce_min_ps(vmn), hi = INFINITY;
	int clo = n, chi = 0, passes = 0, nb = (n + 15) / 16;
	if (kk < n) {
		hi = _mm512_reduce_max_ps(vmx);
		chi = count_ge(x, n, hi, sign);
		passes++;
		if (chi >= kk) { /* the maximum is tied k or more times */
			lo = hi;
			clo = chi;
			chi = 0;
			hi = INFINITY;
		}
		int bisect = 0;
		while (clo != kk && clo - chi > 16 && hi != INFINITY) {
			float w = hi - lo, mid;
			mid = bisect ? lo + 0.5f * w : lo + w * ((float)(clo - kk) + 0.5f) / (float)(clo - chi);
			if (!(mid > lo && mid < hi))
				mid = lo + 0.5f * w;
			if (!(mid > lo && mid < hi))
				break; /* adjacent floats: every key in [lo, hi) equals lo */
			int c = count_ge(x, n, mid, sign), up = c >= kk;
			passes++;
			lo = up ? mid : lo;
			clo = up ? c : clo;
			hi = up ? hi : mid;
			chi = up ? chi : c;
			bisect = hi - lo > 0.5f * w;
		}
	}
	/* keep masks per block: v >= lo when that is exactly k keys, else v >= hi
	 * plus the best-ranked candidates in [lo, hi) */
	__m512 vlo = set1(lo), vhi = set1(hi);
	int exact = clo == kk || kk >= n, rank = !exact && clo - chi <= 16;
	int need = kk - chi, m = 0;
	__m512 vc = _mm512_setzero_ps();
	uint32_t *cmask = (uint32_t *)key + nb; /* per block: candidate mask, offset in vc */
	for (int i = 0, b = 0; i < n; i += 16, b++) {
		__mmask16 k = tm(n, i);
		__m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), sign);
		if (exact) {
			key[b] = _mm512_mask_cmp_ps_mask(k, v, vlo, _CMP_GE_OQ);
			continue;
		}
		key[b] = _mm512_mask_cmp_ps_mask(k, v, vhi, _CMP_GE_OQ);
		__mmask16 cand = _mm512_mask_cmp_ps_mask(k, v, vlo, _CMP_GE_OQ) & (__mmask16)~key[b];
		if (rank) { /* append this block's candidates to vc at lane m */
			int c = __builtin_popcount(cand);
			__m512 packed = _mm512_maskz_compress_ps(cand, v);
			__m512i idx =
			    _mm512_sub_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
			                     _mm512_set1_epi32(m));
			vc = _mm512_mask_permutexvar_ps(vc, (__mmask16)(((1u << c) - 1u) << m), idx, packed);
			cmask[2 * b] = cand;
			cmask[2 * b + 1] = (uint32_t)m;
			m += c;
		} else { /* more than 16 keys in [lo, hi), all equal to lo: lowest index first */
			while (cand && need > 0) {
				__mmask16 low = cand & (__mmask16)(-(int)cand);
				key[b] |= low;
				cand &= (__mmask16)~low;
				need--;
			}
		}
	}
	if (rank && m > 0) {
		/* rank_j = #{l : v_l > v_j} + #{l < j : v_l = v_j}, all lanes at once */
		__m512i r = _mm512_setzero_si512(), one = _mm512_set1_epi32(1);
		__m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
		__mmask16 live = tm(m, 0);
		float cvs[16];
		_mm512_storeu_ps(cvs, vc);
		for (int l = 0; l < m; l++) {
			__m512 vl = set1(cvs[l]);
			__mmask16 gt = _mm512_mask_cmp_ps_mask(live, vc, vl, _CMP_LT_OQ); /* v_l > v_j */
			__mmask16 eq = _mm512_mask_cmp_ps_mask(live, vc, vl, _CMP_EQ_OQ) &
			               _mm512_cmpgt_epi32_mask(lane, _mm512_set1_epi32(l)); /* l < j */
			r = _mm512_mask_add_epi32(r, gt | eq, r, one);
		}
		uint32_t kept = _mm512_mask_cmplt_epi32_mask(live, r, _mm512_set1_epi32(need));
		for (int b = 0; b < nb; b++) { /* kept lanes back to key positions */
			uint32_t cand = cmask[2 * b], bits = kept >> cmask[2 * b + 1];
#ifdef __BMI2__
			key[b] |= (int32_t)_pdep_u32(bits, cand);
#else
			for (uint32_t c = cand; c; c &= c - 1, bits >>= 1)
				key[b] |= (int32_t)(c & -c & -(bits & 1u));
#endif
		}
	}
	__m512 vm = set1(-INFINITY);
	for (int i = 0, b = 0; i < n; i += 16, b++)
		vm = _mm512_mask_max_ps(vm, (__mmask16)key[b], vm, _mm512_maskz_loadu_ps(tm(n, i), x + i));
	float mx = _mm512_reduce_max_ps(vm);
	__m512 acc = _mm512_setzero_ps(), vmx2 = set1(mx);
	for (int i = 0, b = 0; i < n; i += 16, b++) {
		__mmask16 k = tm(n, i), keep = (__mmask16)key[b];
		__m512 e = _mm512_maskz_mov_ps(keep, vexp(_mm512_sub_ps(_mm512_maskz_loadu_ps(keep, x + i), vmx2)));
		_mm512_mask_storeu_ps(p + i, k, e);
		acc = _mm512_add_ps(acc, e);
	}
	__m512 inv = set1(1.0f / _mm512_reduce_add_ps(acc));
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		_mm512_mask_storeu_ps(p + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + i), inv));
	}
	aux[0] = mx;
	aux[2] = (float)passes;
}

/* ----------------------------------------------------------- sparsemax */

/* Michelot passes on y = x - m (see sparsemax_tau_iter in attn_norm.c) */
static int michelot(float *tau_out, const float *x, int n, float m)
{
	__m512 vm = set1(m);
	float tau = -1.0f;
	int kprev = -1;
	for (int it = 1; it <= 64; it++) {
		__m512 acc = _mm512_setzero_ps(), vt = set1(tau);
		int cnt = 0;
		for (int i = 0; i < n; i += 16) {
			__m512 y = _mm512_sub_ps(_mm512_mask_loadu_ps(set1(-INFINITY), tm(n, i), x + i), vm);
			__mmask16 in = _mm512_cmp_ps_mask(y, vt, _CMP_GT_OQ);
			acc = _mm512_mask_add_ps(acc, in, acc, y);
			cnt += __builtin_popcount(in);
		}
		float tn = (_mm512_reduce_add_ps(acc) - 1.0f) / (float)cnt;
		if (cnt == kprev) {
			*tau_out = tn;
			return it;
		}
		kprev = cnt;
		tau = tn > tau ? tn : tau;
	}
	return -1;
}

static int cmp_fdesc(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x < y) - (x > y);
}

void sbv_sparsemax(float *p, const float *x, int n, float *aux)
{
	float m = vmax_row(x, n), tau;
	int it = michelot(&tau, x, n, m);
	if (it < 0) { /* past the cap (never seen): the sort-based formula, in p as scratch */
		for (int i = 0; i < n; i++)
			p[i] = x[i] - m;
		qsort(p, (size_t)n, sizeof *p, cmp_fdesc);
		float cs = 0, csk = 0;
		int k = 0;
		for (int j = 0; j < n; j++) {
			cs += p[j];
			k += 1.0f + (float)(j + 1) * p[j] > cs;
		}
		k = k < 1 ? 1 : k;
		for (int j = 0; j < k; j++)
			csk += p[j];
		tau = (csk - 1.0f) / (float)k;
	}
	__m512 vm = set1(m), vt = set1(tau);
	int cnt = 0;
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 d = _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm), vt);
		__m512 v = _mm512_max_ps(d, _mm512_setzero_ps());
		_mm512_mask_storeu_ps(p + i, k, v);
		cnt += __builtin_popcount(_mm512_mask_cmp_ps_mask(k, v, _mm512_setzero_ps(), _CMP_GT_OQ));
	}
	aux[0] = tau;
	aux[1] = m;
	aux[2] = (float)it;
	aux[3] = (float)cnt;
}

void sbv_sparsemax_bwd(float *ds, const float *p, const float *dp, int n)
{
	__m512 acc = _mm512_setzero_ps();
	int cnt = 0;
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__mmask16 in =
		    _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, p + i), _mm512_setzero_ps(), _CMP_GT_OQ);
		acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(in, dp + i));
		cnt += __builtin_popcount(in);
	}
	__m512 mean = set1(cnt ? _mm512_reduce_add_ps(acc) / (float)cnt : 0.0f);
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__mmask16 in =
		    _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, p + i), _mm512_setzero_ps(), _CMP_GT_OQ);
		__m512 g = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + i), mean);
		_mm512_mask_storeu_ps(ds + i, k, _mm512_maskz_mov_ps(in, g));
	}
}

/* -------------------------------------------------------------- entmax */

enum emode { E_ONE, E_TWO, E_GEN };

static enum emode emode_of(float am1)
{
	return am1 == 1.0f ? E_ONE : am1 == 0.5f ? E_TWO : E_GEN;
}

/* y = x (alpha-1) - max(x)(alpha-1), as in the portable entmax_y */
static inline __m512 vy(const float *x, int i, __mmask16 k, __m512 am1, __m512 ym)
{
	__m512 p = _mm512_mul_ps(_mm512_mask_loadu_ps(set1(-INFINITY), k, x + i), am1);
	__asm__("" : "+v"(p)); /* never fused with the difference, whatever the contraction setting: the max
	                          key's y is then exactly 0 (attn_norm_avx2.c, vy) */
	return _mm512_sub_ps(p, ym);
}

/* sum [y - tau]_+^e into u (u may be NULL); also sum of d^(e-1) in *s1 */
static float esum(float *u, float *s1, const float *x, int n, __m512 am1, __m512 ym, float tau, enum emode mode,
                  float e)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), vt = set1(tau), ve = set1(e);
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 d = _mm512_sub_ps(vy(x, i, k, am1, ym), vt), v, w;
		if (mode == E_ONE) {
			v = _mm512_max_ps(d, _mm512_setzero_ps());
			w = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_GT_OQ), set1(1.0f));
		} else if (mode == E_TWO) {
			w = _mm512_max_ps(d, _mm512_setzero_ps());
			v = _mm512_mul_ps(w, w);
		} else {
			__mmask16 in;
			v = vpowpos(d, ve, &in);
			w = _mm512_maskz_mov_ps(in, vdiv(v, _mm512_mask_blend_ps(in, set1(1.0f), d)));
		}
		if (u)
			_mm512_mask_storeu_ps(u + i, k, v);
		a0 = _mm512_add_ps(a0, v);
		a1 = _mm512_add_ps(a1, w);
	}
	if (s1)
		*s1 = _mm512_reduce_add_ps(a1);
	return _mm512_reduce_add_ps(a0);
}

/* Newton on (sum [y - tau]_+^e)^(1/e) - 1 from tau = -1 (see entmax15_newton in
 * attn_norm.c); leaves u = [y - tau]_+^e in p. Returns passes. */
static int newton(float *p, float *tau_out, float *Z, float *S1, const float *x, int n, float am1, float m,
                  enum emode mode)
{
	__m512 va = set1(am1), ym = set1(m * am1);
	float e = 1.0f / am1, tau = -1.0f;
	int it;
	for (it = 1; it <= 100; it++) {
		float s1, se = esum(p, &s1, x, n, va, ym, tau, mode, e);
		*Z = se;
		*S1 = s1;
		float pw = mode == E_TWO ? sqrtf(se) : spow(se, 1.0f - am1);
		float tn = tau + (se - pw) / s1;
		/* stop when the step is within 2 ulps of tau: p (just written, at tau) is
		 * then as accurate as float allows, and the next pass would not move */
		if (!(tn - tau > 2.4e-7f * fabsf(tau)))
			break;
		tau = tn;
	}
	*tau_out = tau;
	return it;
}

/* entmax-1.5: Newton passes that also try the closed form on the current
 * support S = {d > 0} (d = y - tau): sum_S (d - delta)^2 = 1 gives
 * delta = (S1 - sqrt(S1^2 - k (S2 - 1)))/k, and if every d in S stays above
 * delta and every d outside is <= delta, tau + delta is the exact threshold
 * (the support is then S). Newton's iterates only shrink S towards the true
 * support, so the test usually succeeds on the second pass. Returns passes;
 * p is not written (the caller evaluates p at the returned tau). */
static int newton15(float *tau_out, const float *x, int n, float m)
{
	__m512 va = set1(0.5f), ym = set1(m * 0.5f);
	float tau = -1.0f;
	int it;
	for (it = 1; it <= 100; it++) {
		__m512 a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), vt = set1(tau);
		__m512 mnin = set1(INFINITY), mxout = set1(-INFINITY);
		int k = 0;
		for (int i = 0; i < n; i += 16) {
			__mmask16 km = tm(n, i);
			__m512 d = _mm512_sub_ps(vy(x, i, km, va, ym), vt);
			__mmask16 in = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_GT_OQ);
			__m512 dp = _mm512_maskz_mov_ps(in, d);
			a1 = _mm512_add_ps(a1, dp);
			a2 = _mm512_fmadd_ps(dp, dp, a2);
			mnin = _mm512_mask_min_ps(mnin, in, mnin, d);
			mxout = _mm512_mask_max_ps(mxout, km & ~in, mxout, d);
			k += __builtin_popcount(in);
		}
		double S1 = _mm512_reduce_add_ps(a1), S2 = _mm512_reduce_add_ps(a2);
		double disc = S1 * S1 - k * (S2 - 1);
		if (disc > 0) {
			double sq = sqrt(disc), delta = (S1 - sq) / k;
			/* float sums of k terms carry ~eps sqrt(k) relative error, which reaches
			 * delta through d delta/d S1 = delta/sq and d delta/d S2 = 1/(2 sq):
			 * accept only if that is within a few ulps (far from the root with
			 * thousands of keys it is not, and Newton goes on) */
			double err = 6e-8 * sqrt((double)k) * (S1 * delta + 0.5 * S2) / sq;
			if (err <= 2.4e-7 && delta < _mm512_reduce_min_ps(mnin) &&
			    delta >= _mm512_reduce_max_ps(mxout)) {
				*tau_out = tau + (float)delta;
				return it;
			}
		}
		/* Newton on sqrt(S2) - 1: tau += (S2 - sqrt S2)/S1 */
		float tn = tau + (float)((S2 - sqrt(S2)) / S1);
		if (!(tn > tau))
			break;
		tau = tn;
	}
	*tau_out = tau;
	return it;
}

void sbv_entmax(float *p, const float *x, int n, float am1, float *aux, float *ws)
{
	enum emode mode = emode_of(am1);
	if (mode == E_ONE) {
		sbv_sparsemax(p, x, n, aux);
		return;
	}
	float m = vmax_row(x, n), tau, Z, S1;
	int it;
	if (mode == E_TWO) {
		it = newton15(&tau, x, n, m);
		Z = esum(p, NULL, x, n, set1(0.5f), set1(m * 0.5f), tau, E_TWO, 2.0f);
	} else if (ws) {
		sbv_entmax_rows(p, x, 1, 0, n, am1, aux, ws, SBV_ENTMAX_WS(n));
		return;
	} else {
		it = newton(p, &tau, &Z, &S1, x, n, am1, m, mode);
	}
	__m512 inv = set1(1.0f / Z);
	int cnt = 0;
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + i), inv);
		_mm512_mask_storeu_ps(p + i, k, v);
		cnt += __builtin_popcount(_mm512_mask_cmp_ps_mask(k, v, _mm512_setzero_ps(), _CMP_GT_OQ));
	}
	aux[0] = tau;
	aux[1] = m;
	aux[2] = (float)it;
	aux[3] = (float)cnt;
}

/* lane q of the result = the sum of the 16 lanes of v[q] (a transposing tree:
 * 15 additions instead of 16 separate reductions) */
static inline __m512 hsum16(const __m512 *v)
{
	__m512 a[8], b[4], c[2];
	for (int i = 0; i < 8; i++) /* lanes 0-7: halves of v[2i]; 8-15: of v[2i+1] */
		a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
		                     _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
	for (int i = 0; i < 4; i++) /* 128-bit chunk j: quarters of v[4i + j] */
		b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
		                     _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xDD));
	for (int i = 0; i < 2; i++) /* chunk j, lanes 0-1: v[8i + j]; lanes 2-3: v[8i + 4 + j] */
		c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
		                     _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xEE));
	/* chunk j, lane k: v[4k + j]; put v[q] in lane q */
	__m512 s = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xDD));
	return _mm512_permutexvar_ps(_mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0), s);
}

/* One row of the general-alpha solver. */
struct grow {
	const float *x;
	float *p, *y, *u; /* y, u: candidates and their [y - tau]_+^e, n + 16 floats each */
	uint32_t *km;     /* per block of x: candidate mask, then offset in y */
	float m;
	int n, nc;
};

#define GROWS 16 /* rows solved together */

/* floats of ws per row */
static size_t grow_floats(int n)
{
	return 2 * (size_t)n + 32 + 2 * (((size_t)n + 15) / 16) + 16;
}

int sbv_entmax_rows_fit(int n, size_t ws_floats)
{
	size_t g = ws_floats / grow_floats(n);
	return g < 1 ? 1 : g > GROWS ? GROWS : (int)g;
}

static void grow_init(struct grow *g, float *ws, const float *x, float *p, int n)
{
	g->x = x;
	g->p = p;
	g->n = n;
	g->y = ws;
	g->u = ws + n + 16;
	g->km = (uint32_t *)(ws + 2 * n + 32);
}

/* Lower bound on tau (Jensen): for any set S of keys, (1/|S|) sum_S [y - tau]_+^e
 * >= [mean_S y - tau]_+^e by convexity, and sum_S <= 1 at the root, so
 * tau* >= mean_S y - |S|^-(alpha-1). S = {y > t} for t in {-1, -1/2, -1/4, -1/8}
 * (and tau* >= -1 from the max key alone) gives tau0 <= tau*. Since the
 * iterates never fall below tau0, keys with y <= tau0 stay outside the
 * support: only the others are kept, compressed, for the passes.
 * Pass 1 (per row): the max; pass 2: the four sums and counts; then the bounds
 * of all rows at once; pass 3: the compressed candidates. Returns tau0 in lanes. */
static __m512 gsetup(struct grow *g, int G, float am1)
{
	__m512 va = set1(am1), acc[4][GROWS];
	float cnt[4][GROWS];
	for (int q = 0; q < GROWS; q++)
		for (int t = 0; t < 4; t++) {
			acc[t][q] = _mm512_setzero_ps();
			cnt[t][q] = 1.0f;
		}
	for (int q = 0; q < G; q++) {
		const float *x = g[q].x;
		int n = g[q].n;
		g[q].m = vmax_row(x, n);
		__m512 ym = set1(g[q].m * am1);
		__m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
		int k0 = 0, k1 = 0, k2 = 0, k3 = 0;
		for (int i = 0; i < n; i += 16) {
			__mmask16 k = tm(n, i);
			__m512 y = vy(x, i, k, va, ym);
			__mmask16 m0 = _mm512_cmp_ps_mask(y, set1(-1.0f), _CMP_GT_OQ);
			__mmask16 m1 = _mm512_cmp_ps_mask(y, set1(-0.5f), _CMP_GT_OQ);
			__mmask16 m2 = _mm512_cmp_ps_mask(y, set1(-0.25f), _CMP_GT_OQ);
			__mmask16 m3 = _mm512_cmp_ps_mask(y, set1(-0.125f), _CMP_GT_OQ);
			s0 = _mm512_mask_add_ps(s0, m0, s0, y);
			s1 = _mm512_mask_add_ps(s1, m1, s1, y);
			s2 = _mm512_mask_add_ps(s2, m2, s2, y);
			s3 = _mm512_mask_add_ps(s3, m3, s3, y);
			k0 += __builtin_popcount(m0);
			k1 += __builtin_popcount(m1);
			k2 += __builtin_popcount(m2);
			k3 += __builtin_popcount(m3);
		}
		/* k0 >= k1 >= k2 >= k3 >= 1 (the max key has y = 0) */
		acc[0][q] = s0;
		acc[1][q] = s1;
		acc[2][q] = s2;
		acc[3][q] = s3;
		cnt[0][q] = (float)k0;
		cnt[1][q] = (float)k1;
		cnt[2][q] = (float)k2;
		cnt[3][q] = (float)k3;
	}
	__m512 t0 = set1(-1.0f);
	for (int t = 0; t < 4; t++) {
		__m512 k = _mm512_loadu_ps(cnt[t]);
		__m512 kp = vexp2(_mm512_mul_ps(set1(-am1), vlog2(k))); /* k^-(alpha-1) */
		t0 = _mm512_max_ps(t0, _mm512_sub_ps(_mm512_div_ps(hsum16(acc[t]), k), kp));
	}
	/* the bound carries float rounding: back off by a few ulps so it stays below tau* */
	t0 = _mm512_fnmadd_ps(set1(4.8e-7f), _mm512_add_ps(set1(1.0f), _mm512_abs_ps(t0)), t0);
	t0 = _mm512_max_ps(t0, set1(-1.0f));
	float t0s[GROWS];
	_mm512_storeu_ps(t0s, t0);
	for (int q = 0; q < G; q++) {
		const float *x = g[q].x;
		int n = g[q].n, c = 0;
		__m512 ym = set1(g[q].m * am1), vt = set1(t0s[q]);
		for (int i = 0, b = 0; i < n; i += 16, b++) {
			__mmask16 k = tm(n, i);
			__m512 y = vy(x, i, k, va, ym);
			__mmask16 cand = _mm512_mask_cmp_ps_mask(k, y, vt, _CMP_GT_OQ);
			int cc = __builtin_popcount(cand);
			_mm512_mask_storeu_ps(g[q].y + c, (__mmask16)((1u << cc) - 1u), _mm512_maskz_compress_ps(cand, y));
			g[q].km[2 * b] = cand;
			g[q].km[2 * b + 1] = (uint32_t)c;
			c += cc;
		}
		g[q].nc = c;
	}
	return t0;
}

/* One pass over a row's candidates at tau: u = [y - tau]_+^e, and the vector
 * partial sums of u = d^e, d^(e-1) and d^(e-2). */
static inline void gpass(struct grow *g, __m512 vt, __m512 ve, __m512 *F, __m512 *S1, __m512 *S2)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0;
	const float *y = g->y;
	float *u = g->u;
	int nc = g->nc;
	for (int i = 0; i < nc; i += 16) {
		__mmask16 k = tm(nc, i), in;
		__m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, y + i), vt);
		__m512 v = vpowpos(d, ve, &in);
		in &= k;
		v = _mm512_maskz_mov_ps(in, v);
		__m512 dc = _mm512_mask_blend_ps(in, set1(1.0f), d);
		__m512 r = _mm512_rcp14_ps(dc);
		r = _mm512_mul_ps(r, _mm512_fnmadd_ps(dc, r, set1(2.0f))); /* 1/d, as vdiv */
		__m512 w = _mm512_maskz_mul_ps(in, v, r);
		_mm512_storeu_ps(u + i, v);
		a0 = _mm512_add_ps(a0, v);
		a1 = _mm512_add_ps(a1, w);
		a2 = _mm512_fmadd_ps(w, r, a2);
	}
	*F = a0;
	*S1 = a1;
	*S2 = a2;
}

/* Solve G <= 16 rows (lanes) for tau: Halley's method on the convex, decreasing
 * h(tau) = F^(alpha-1) - 1, F = sum [y - tau]_+^e, from the Jensen bound tau0.
 * With P = F^(alpha-1), S1 = sum d^(e-1), S2 = sum d^(e-2):
 *   Newton step  -h/h' = (F - F^(1-(alpha-1)))/S1   (as before: h is close to
 *                linear, and from below Newton rises monotonically to the root)
 *   Halley step  = Newton / (1 - L/2),  L = h h''/h'^2
 *                = (P - 1)(e - 1)(F S2 - S1^2)/(P S1^2)
 * (used when |L| <= 1, Newton otherwise), which converges cubically: about 3
 * passes from tau0 instead of 4. A step that falls by more than 2 ulps (a
 * Halley step can pass the root by its cubic error) is taken; the iteration
 * stops when a step moves tau by at most 2 ulps (the last pass then left
 * u = [y - tau]_+^e, as accurate as float allows, in u), or after 100 passes.
 * The rows' passes are independent vector work; the steps of all rows are one
 * vector computation per round (no per-row scalar chain or branch on it).
 * Lane q of *tau, *Z, *S1 (F and S1 at the final tau), *it: row q. */
static void gsolve(struct grow *g, int G, float am1, __m512 *tau_out, __m512 *Z_out, __m512 *S1_out, __m512 *it_out)
{
	__m512 t0 = gsetup(g, G, am1);
	__m512 ve = set1(1.0f / am1), tau = t0, Z = set1(1.0f), S1z = set1(1.0f), it = _mm512_setzero_ps();
	__m512 em1 = set1(1.0f / am1 - 1.0f), om = set1(1.0f - am1), one = set1(1.0f), prev = set1(INFINITY);
	__mmask16 done = (__mmask16)~((1u << G) - 1u);
	float ts[GROWS];
	__m512 a0[GROWS], a1[GROWS], a2[GROWS];
	for (int q = 0; q < GROWS; q++)
		a0[q] = a1[q] = a2[q] = _mm512_setzero_ps();
	while (done != 0xffff) {
		_mm512_storeu_ps(ts, tau);
		for (int q = 0; q < G; q++)
			if (!(done >> q & 1))
				gpass(&g[q], set1(ts[q]), ve, &a0[q], &a1[q], &a2[q]);
		__mmask16 act = (__mmask16)~done;
		__m512 F = _mm512_mask_blend_ps(act, one, hsum16(a0));
		__m512 S1 = _mm512_mask_blend_ps(act, one, hsum16(a1));
		__m512 S2 = hsum16(a2);
		__m512 pw = vexp2(_mm512_mul_ps(om, vlog2(F))); /* F^(1-(alpha-1)) */
		__m512 nstep = _mm512_div_ps(_mm512_sub_ps(F, pw), S1);
		__m512 P = _mm512_div_ps(F, pw);
		__m512 L = _mm512_div_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(P, one), em1),
		                                       _mm512_fmsub_ps(F, S2, _mm512_mul_ps(S1, S1))),
		                         _mm512_mul_ps(P, _mm512_mul_ps(S1, S1)));
		__mmask16 hal = _mm512_cmp_ps_mask(_mm512_abs_ps(L), one, _CMP_LE_OQ);
		__m512 step = _mm512_mask_div_ps(nstep, hal, nstep, _mm512_fnmadd_ps(set1(0.5f), L, one));
		__m512 tn = _mm512_max_ps(_mm512_add_ps(tau, step), t0);
		__m512 thr = _mm512_mul_ps(set1(2.4e-7f), _mm512_abs_ps(tau));
		it = _mm512_mask_add_ps(it, act, it, one);
		/* stalled: a step no smaller than the last, within 16 ulps, is the noise of F's exp and
		 * log, not convergence (constant rows oscillated to the pass cap); tau stays */
		__m512 astep = _mm512_abs_ps(_mm512_sub_ps(tn, tau));
		__mmask16 stall = _mm512_cmp_ps_mask(astep, prev, _CMP_GE_OQ) &
		                  _mm512_cmp_ps_mask(astep, _mm512_mul_ps(set1(16.0f), thr), _CMP_LE_OQ);
		prev = _mm512_mask_mov_ps(prev, act, astep);
		__mmask16 go = _mm512_cmp_ps_mask(astep, thr, _CMP_GT_OQ) & ~stall &
		               _mm512_cmp_ps_mask(it, set1(100.0f), _CMP_LT_OQ) & act;
		Z = _mm512_mask_mov_ps(Z, act, F);
		S1z = _mm512_mask_mov_ps(S1z, act, S1);
		tau = _mm512_mask_mov_ps(tau, go, tn);
		done |= (__mmask16)(act & ~go);
	}
	*tau_out = tau;
	*Z_out = Z;
	*S1_out = S1z;
	*it_out = it;
}

/* write p from the candidates' u (zeros elsewhere), normalised; fill aux */
static void gfinish(struct grow *g, float tau, float Z, float it, float *aux)
{
	int n = g->n, cnt = 0;
	__m512 inv = set1(1.0f / Z);
	for (int i = 0, b = 0; i < n; i += 16, b++) {
		__mmask16 k = tm(n, i), cand = (__mmask16)g->km[2 * b];
		__m512 v = _mm512_maskz_expand_ps(cand, _mm512_loadu_ps(g->u + g->km[2 * b + 1]));
		v = _mm512_mul_ps(v, inv);
		_mm512_mask_storeu_ps(g->p + i, k, v);
		cnt += __builtin_popcount(_mm512_mask_cmp_ps_mask(k, v, _mm512_setzero_ps(), _CMP_GT_OQ));
	}
	aux[0] = tau;
	aux[1] = g->m;
	aux[2] = it;
	aux[3] = (float)cnt;
}

/* Exact alpha-entmax (general alpha) for `rows` rows of stride `stride`, in
 * groups of up to 16 rows (as many as ws holds: sbv_entmax_rows_fit) solved
 * together by gsolve. */
void sbv_entmax_rows(float *p, const float *x, int rows, long stride, int n, float am1, float *aux, float *ws,
                     size_t ws_floats)
{
	enum emode mode = emode_of(am1);
	if (mode != E_GEN) {
		for (int r = 0; r < rows; r++)
			sbv_entmax(p + r * stride, x + r * stride, n, am1, aux + 4 * r, NULL);
		return;
	}
	int gmax = sbv_entmax_rows_fit(n, ws_floats);
	size_t per = grow_floats(n);
	for (int r0 = 0; r0 < rows; r0 += gmax) {
		int G = rows - r0 < gmax ? rows - r0 : gmax;
		struct grow g[GROWS];
		for (int q = 0; q < G; q++)
			grow_init(&g[q], ws + (size_t)q * per, x + (r0 + q) * stride, p + (r0 + q) * stride, n);
		__m512 tau, Z, S1, it;
		gsolve(g, G, am1, &tau, &Z, &S1, &it);
		float ts[GROWS], zs[GROWS], is[GROWS];
		_mm512_storeu_ps(ts, tau);
		_mm512_storeu_ps(zs, Z);
		_mm512_storeu_ps(is, it);
		for (int q = 0; q < G; q++)
			gfinish(&g[q], ts[q], zs[q], is[q], aux + 4 * (r0 + q));
	}
}

/* Exact backward (kb_entmax in attn_norm.c): q = d^(e-1) up to the forward's
 * 1/Z (1 on the support for e = 1, p/d otherwise), ds = q (dp - c) with
 * c = sum q dp / sum q, and d loss/d alpha = e sum_i dp_i (e (p_i - yq_i) -
 * (p_i log p_i - yq_i ent)), yq = q/Q, ent = sum p log p. The logarithms are
 * log2 (vlog2, no division), scaled by ln 2. ws: 2n floats. */
double sbv_entmax_bwd(float *ds, const float *p, const float *dp, const float *x, float tau, float m, int n, float am1,
                      int want_alpha, float *ws)
{
	enum emode mode = emode_of(am1);
	__m512 va = set1(am1), ym = set1(m * am1), vt = set1(tau), aq = _mm512_setzero_ps(), aqd = aq, ah = aq;
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 pv = _mm512_maskz_loadu_ps(k, p + i), q;
		__mmask16 in = _mm512_cmp_ps_mask(pv, _mm512_setzero_ps(), _CMP_GT_OQ);
		if (mode == E_ONE) {
			q = _mm512_maskz_mov_ps(in, set1(1.0f));
		} else {
			__m512 d = _mm512_sub_ps(vy(x, i, k, va, ym), vt);
			in &= _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_GT_OQ);
			q = _mm512_maskz_mov_ps(in, vdiv(pv, _mm512_mask_blend_ps(in, set1(1.0f), d)));
		}
		_mm512_mask_storeu_ps(ws + i, k, q);
		aq = _mm512_add_ps(aq, q);
		aqd = _mm512_fmadd_ps(q, _mm512_maskz_loadu_ps(k, dp + i), aqd);
		if (want_alpha) { /* p ln p (0 where p <= FLT_MIN), kept in ws[n..2n) for the second pass */
			__mmask16 pos = _mm512_cmp_ps_mask(pv, set1(FLT_MIN), _CMP_GT_OQ);
			__m512 lp = _mm512_mul_ps(vlog2(_mm512_mask_blend_ps(pos, set1(1.0f), pv)), set1(0.693147181f));
			__m512 plp = _mm512_maskz_mul_ps(pos, pv, lp);
			_mm512_mask_storeu_ps(ws + n + i, k, plp);
			ah = _mm512_add_ps(ah, plp);
		}
	}
	float Q = _mm512_reduce_add_ps(aq), QD = _mm512_reduce_add_ps(aqd), ent = _mm512_reduce_add_ps(ah);
	float e = 1.0f / am1;
	__m512 c = set1(QD / Q), vQ = set1(1.0f / Q), vent = set1(ent), ve = set1(e), acc = _mm512_setzero_ps();
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 q = _mm512_maskz_loadu_ps(k, ws + i), g = _mm512_maskz_loadu_ps(k, dp + i);
		if (want_alpha) { /* dp_i/dalpha = e (e (p - yq) - (p log p - yq ent)), yq = q/Q */
			__m512 pv = _mm512_maskz_loadu_ps(k, p + i), plp = _mm512_maskz_loadu_ps(k, ws + n + i);
			__m512 yq = _mm512_mul_ps(q, vQ);
			__m512 t =
			    _mm512_sub_ps(_mm512_mul_ps(ve, _mm512_sub_ps(pv, yq)), _mm512_fnmadd_ps(yq, vent, plp));
			acc = _mm512_fmadd_ps(g, t, acc);
		}
		_mm512_mask_storeu_ps(ds + i, k, _mm512_mul_ps(q, _mm512_sub_ps(g, c)));
	}
	return want_alpha ? (double)e * (double)_mm512_reduce_add_ps(acc) : 0.0;
}

/* sbv_entmax_bwd for G <= 16 rows at once (x + r stride, ...; aux: 4 floats per
 * row): the same arithmetic, with the rows' reductions done together (hsum16), so
 * one row's reductions and the next row's passes overlap. Returns the sum of the
 * rows' d loss/d alpha (each row's value as sbv_entmax_bwd returns it, added in
 * row order). ws: 2n floats per row. */
static double bwd_group(float *ds, const float *p, const float *dp, const float *x, const float *aux, int G,
                        long stride, int n, float am1, int want_alpha, float *ws)
{
	__m512 va = set1(am1), aq[GROWS], aqd[GROWS], ah[GROWS], acc[GROWS];
	for (int r = 0; r < GROWS; r++)
		aq[r] = aqd[r] = ah[r] = acc[r] = _mm512_setzero_ps();
	for (int r = 0; r < G; r++) {
		const float *pr = p + r * stride, *gr = dp + r * stride, *xr = x + r * stride;
		float *wq = ws + (size_t)r * 2 * n, *wl = wq + n;
		__m512 ym = set1(aux[4 * r + 1] * am1), vt = set1(aux[4 * r]), a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0;
		for (int i = 0; i < n; i += 16) {
			__mmask16 k = tm(n, i);
			__m512 pv = _mm512_maskz_loadu_ps(k, pr + i);
			__mmask16 in = _mm512_cmp_ps_mask(pv, _mm512_setzero_ps(), _CMP_GT_OQ);
			__m512 d = _mm512_sub_ps(vy(xr, i, k, va, ym), vt);
			in &= _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_GT_OQ);
			__m512 q = _mm512_maskz_mov_ps(in, vdiv(pv, _mm512_mask_blend_ps(in, set1(1.0f), d)));
			_mm512_mask_storeu_ps(wq + i, k, q);
			a0 = _mm512_add_ps(a0, q);
			a1 = _mm512_fmadd_ps(q, _mm512_maskz_loadu_ps(k, gr + i), a1);
			if (want_alpha) {
				__mmask16 pos = _mm512_cmp_ps_mask(pv, set1(FLT_MIN), _CMP_GT_OQ);
				__m512 lp =
				    _mm512_mul_ps(vlog2(_mm512_mask_blend_ps(pos, set1(1.0f), pv)), set1(0.693147181f));
				__m512 plp = _mm512_maskz_mul_ps(pos, pv, lp);
				_mm512_mask_storeu_ps(wl + i, k, plp);
				a2 = _mm512_add_ps(a2, plp);
			}
		}
		aq[r] = a0;
		aqd[r] = a1;
		ah[r] = a2;
	}
	__m512 Q = _mm512_mask_blend_ps((__mmask16)((1u << G) - 1u), set1(1.0f), hsum16(aq)), QD = hsum16(aqd);
	float cs[GROWS], iq[GROWS], ents[GROWS];
	_mm512_storeu_ps(cs, _mm512_div_ps(QD, Q));
	_mm512_storeu_ps(iq, _mm512_div_ps(set1(1.0f), Q));
	_mm512_storeu_ps(ents, hsum16(ah));
	float e = 1.0f / am1;
	__m512 ve = set1(e);
	for (int r = 0; r < G; r++) {
		const float *pr = p + r * stride, *gr = dp + r * stride, *wq = ws + (size_t)r * 2 * n, *wl = wq + n;
		float *dr = ds + r * stride;
		__m512 c = set1(cs[r]), vQ = set1(iq[r]), vent = set1(ents[r]), a = _mm512_setzero_ps();
		for (int i = 0; i < n; i += 16) {
			__mmask16 k = tm(n, i);
			__m512 q = _mm512_maskz_loadu_ps(k, wq + i), g = _mm512_maskz_loadu_ps(k, gr + i);
			if (want_alpha) {
				__m512 pv = _mm512_maskz_loadu_ps(k, pr + i), plp = _mm512_maskz_loadu_ps(k, wl + i);
				__m512 yq = _mm512_mul_ps(q, vQ);
				__m512 t = _mm512_sub_ps(_mm512_mul_ps(ve, _mm512_sub_ps(pv, yq)),
				                         _mm512_fnmadd_ps(yq, vent, plp));
				a = _mm512_fmadd_ps(g, t, a);
			}
			_mm512_mask_storeu_ps(dr + i, k, _mm512_mul_ps(q, _mm512_sub_ps(g, c)));
		}
		acc[r] = a;
	}
	if (!want_alpha)
		return 0.0;
	float das[GROWS];
	_mm512_storeu_ps(das, hsum16(acc));
	double da = 0;
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
		da += bwd_group(ds + r0 * stride, p + r0 * stride, dp + r0 * stride, x + r0 * stride, aux + 4 * r0, G,
		                stride, n, am1, want_alpha, ws);
	}
	return da;
}

/* --------------------------------------------------- the study's bisection */

/* first indices of the min and the max of y = x am1 - ym */
static void arg_minmax(const float *x, int n, __m512 am1, __m512 ym, int *amin, int *amax, float *ymin)
{
	__m512 lo = set1(INFINITY), hi = set1(-INFINITY);
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 y = vy(x, i, k, am1, ym);
		lo = _mm512_mask_min_ps(lo, k, lo, y);
		hi = _mm512_mask_max_ps(hi, k, hi, y);
	}
	float vlo = _mm512_reduce_min_ps(lo), vhi = _mm512_reduce_max_ps(hi);
	*ymin = vlo;
	*amin = *amax = -1;
	for (int i = 0; i < n && (*amin < 0 || *amax < 0); i += 16) {
		__mmask16 k = tm(n, i);
		__m512 y = vy(x, i, k, am1, ym);
		__mmask16 elo = _mm512_mask_cmp_ps_mask(k, y, set1(vlo), _CMP_EQ_OQ);
		__mmask16 ehi = _mm512_mask_cmp_ps_mask(k, y, set1(vhi), _CMP_EQ_OQ);
		if (*amin < 0 && elo)
			*amin = i + __builtin_ctz(elo);
		if (*amax < 0 && ehi)
			*amax = i + __builtin_ctz(ehi);
	}
	if (*amin < 0) /* not reached: y of a finite row */
		*amin = 0;
	if (*amax < 0)
		*amax = 0;
}

void sbv_unrolled(float *p, const float *x, int n, int dfull, float am1, float *aux, float *ws)
{
	enum emode mode = emode_of(am1);
	float e = 1.0f / am1, m = vmax_row(x, n), ymin;
	__m512 va = set1(am1), ym = set1(m * am1);
	int amin, amax;
	arg_minmax(x, n, va, ym, &amin, &amax, &ymin);
	float lo = ymin - 1.0f, c = spow((float)(1.0 / (double)dfull), am1), hi = 0.0f - c;
	/* the exact root and the slope of sum p there */
	float tstar, Z, S1;
	if (mode == E_GEN && ws) { /* the solver of the exact entmax */
		struct grow g;
		grow_init(&g, ws, x, p, n);
		__m512 vt, vz, vs, vi;
		gsolve(&g, 1, am1, &vt, &vz, &vs, &vi);
		tstar = _mm512_cvtss_f32(vt);
		Z = _mm512_cvtss_f32(vz);
		S1 = _mm512_cvtss_f32(vs);
	} else {
		newton(p, &tstar, &Z, &S1, x, n, am1, m, mode);
	}
	float slope = e * S1; /* -d(sum p)/dtau at tau* */
	float delta = 2.0f * (float)n * FLT_EPSILON * (Z > 1 ? Z : 1) / (slope > 0 ? slope : FLT_MIN) +
	              8.0f * FLT_EPSILON * (1.0f + fabsf(tstar));
	unsigned bits = 0;
	float dlo = tstar - delta, dhi = tstar + delta;
	for (int t = 0; t < 18; t++) {
		float tau = (lo + hi) / 2.0f;
		int ge = tau < tstar; /* branch-free: the decisions are coin flips */
		if (__builtin_expect(tau >= dlo && tau <= dhi, 0))
			ge = esum(NULL, NULL, x, n, va, ym, tau, mode, e) - 1.0f >= 0.0f;
		lo = ge ? tau : lo;
		hi = ge ? hi : tau;
		bits |= (unsigned)ge << t;
	}
	float z = esum(p, NULL, x, n, va, ym, hi, mode, e) + 1e-12f;
	__m512 vz = set1(z);
	int cnt = 0;
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(k, p + i), vz);
		_mm512_mask_storeu_ps(p + i, k, v);
		cnt += __builtin_popcount(_mm512_mask_cmp_ps_mask(k, v, _mm512_setzero_ps(), _CMP_GT_OQ));
	}
	aux[0] = hi;
	aux[1] = m;
	aux[2] = (float)bits;
	aux[3] = (float)cnt;
}

/* gradient of the unrolled graph (derivation: kb_unrolled in attn_norm.c);
 * ws: 2n floats */
double sbv_unrolled_bwd(float *ds, const float *dp, const float *x, const float *aux, int n, int dfull, float am1,
                        int want_alpha, float *ws)
{
	enum emode mode = emode_of(am1);
	float hi = aux[0], e = 1.0f / am1, m = vmax_row(x, n), ymin;
	unsigned bits = (unsigned)aux[2];
	__m512 va = set1(am1), ym = set1(m * am1), vhi = set1(hi), ve = set1(e);
	int amin, amax;
	arg_minmax(x, n, va, ym, &amin, &amax, &ymin);
	int need_log = want_alpha || mode == E_GEN;
	float c = spow((float)(1.0 / (double)dfull), am1);
	float *u = ws, *ld = ws + n;
	__m512 az = _mm512_setzero_ps(), ap = _mm512_setzero_ps();
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 d = _mm512_sub_ps(vy(x, i, k, va, ym), vhi), v;
		__mmask16 in = _mm512_cmp_ps_mask(d, set1(FLT_MIN), _CMP_GT_OQ);
		__m512 dc = _mm512_mask_blend_ps(in, set1(1.0f), d);
		__m512 l = need_log ? vlog(dc) : _mm512_setzero_ps();
		if (mode == E_ONE)
			v = _mm512_maskz_mov_ps(in, d);
		else if (mode == E_TWO)
			v = _mm512_maskz_mov_ps(in, _mm512_mul_ps(d, d));
		else
			v = _mm512_maskz_mov_ps(in, vexp(_mm512_mul_ps(ve, l)));
		_mm512_mask_storeu_ps(u + i, k, v);
		_mm512_mask_storeu_ps(ld + i, k, l);
		az = _mm512_add_ps(az, v);
		ap = _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(k, dp + i), ap);
	}
	float z = _mm512_reduce_add_ps(az) + 1e-12f;
	float P = _mm512_reduce_add_ps(ap) / z;
	__m512 vP = set1(P), vz = set1(z), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps();
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		__m512 d = _mm512_sub_ps(vy(x, i, k, va, ym), vhi), v = _mm512_maskz_loadu_ps(k, u + i);
		__mmask16 in = _mm512_cmp_ps_mask(d, set1(FLT_MIN), _CMP_GT_OQ) &
		               _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ);
		__m512 dv = _mm512_div_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + i), vP), vz);
		__m512 dd = _mm512_maskz_div_ps(in, _mm512_mul_ps(_mm512_mul_ps(dv, ve), v),
		                                _mm512_mask_blend_ps(in, set1(1.0f), d));
		_mm512_mask_storeu_ps(ds + i, k, dd);
		a1 = _mm512_add_ps(a1, dd);
		a2 = _mm512_fmadd_ps(_mm512_maskz_mul_ps(in, dv, v), _mm512_maskz_loadu_ps(k, ld + i), a2);
	}
	float dtau = -_mm512_reduce_add_ps(a1);
	double wlo = 1, whi = 0;
	for (int t = 0; t < 18; t++) {
		double a = 0.5 * (wlo + whi);
		if (bits >> t & 1u)
			wlo = a;
		else
			whi = a;
	}
	float dlo = (float)(whi * dtau), dhi = (float)((1 - whi) * dtau);
	ds[amin] += dlo;
	ds[amax] += dhi;
	double da = 0;
	if (want_alpha) {
		__m512 xm = set1(x[amax]), a3 = _mm512_setzero_ps();
		for (int i = 0; i < n; i += 16) {
			__mmask16 k = tm(n, i);
			__m512 xv = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), xm);
			a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, ds + i), _mm512_maskz_mov_ps(k, xv), a3);
		}
		da = (double)_mm512_reduce_add_ps(a3) + (double)dhi * c * log((double)dfull) -
		     (double)e * e * _mm512_reduce_add_ps(a2);
	}
	for (int i = 0; i < n; i += 16) {
		__mmask16 k = tm(n, i);
		_mm512_mask_storeu_ps(ds + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, ds + i), va));
	}
	return da;
}

#else
typedef int sb_attn_norm_avx512_unused; /* ISO C wants a declaration in every file */
#endif
