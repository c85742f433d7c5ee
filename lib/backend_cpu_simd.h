/* backend_cpu_simd.h — 16-lane float vectors for the CPU backend (private).
 *
 * GCC/Clang vector extensions, so the same source builds for any x86-64 level
 * (-march=native gives AVX-512 on the reference machine, AVX2 or SSE
 * elsewhere). FMA is explicit (vfma) where the target has it; the build keeps
 * -ffp-contract=off, so nothing else is contracted and a binary's results are
 * reproducible. Horizontal sums use a fixed tree order.
 */
#ifndef SB_BACKEND_CPU_SIMD_H
#define SB_BACKEND_CPU_SIMD_H

#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#define VL 16
typedef float vf __attribute__((vector_size(64), aligned(64)));
typedef float vfu __attribute__((vector_size(64), aligned(4), may_alias));
typedef int32_t vi __attribute__((vector_size(64), aligned(64)));
typedef int32_t viu __attribute__((vector_size(64), aligned(4), may_alias));
typedef uint32_t vu __attribute__((vector_size(64), aligned(64)));


static inline vf vload(const float *p)
{
	return *(const vfu *)p;
}
static inline void vstore(float *p, vf v)
{
	*(vfu *)p = v;
}
static inline vf vset1(float x) /* broadcast (no arithmetic: -0.0 stays -0.0) */
{
#if defined(__AVX512F__)
	return (vf)_mm512_set1_ps(x);
#else
	return (vf){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
#endif
}
static inline vf vzero(void)
{
	return (vf){0};
}

static inline vf vfma(vf a, vf b, vf c) /* a*b + c, fused where the target has FMA */
{
#if defined(__AVX512F__)
	return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__FMA__)
	union {
		vf v;
		__m256 h[2];
	} A = {a}, B = {b}, C = {c}, R;
	R.h[0] = _mm256_fmadd_ps(A.h[0], B.h[0], C.h[0]);
	R.h[1] = _mm256_fmadd_ps(A.h[1], B.h[1], C.h[1]);
	return R.v;
#else
	return a * b + c;
#endif
}

/* scalar fma consistent with vfma (fused where the target has FMA) */
static inline float sfma(float a, float b, float c)
{
#if defined(__FMA__) || defined(__AVX512F__)
	return __builtin_fmaf(a, b, c);
#else
	return a * b + c;
#endif
}

/* fixed-order tree sum of the 16 lanes: t[i] += t[i + w] for w = 8, 4, 2, 1 (with AVX-512
 * the same additions in registers: halves, quarters, then lanes 0+2, 1+3, then 0+1) */
static inline float vhsum(vf v)
{
#if defined(__AVX512F__)
	__m512 x = (__m512)v;
	__m256 h = _mm256_add_ps(_mm512_castps512_ps256(x), _mm256_castpd_ps(_mm512_extractf64x4_pd((__m512d)x, 1)));
	__m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
	q = _mm_add_ps(q, _mm_movehl_ps(q, q));
	return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
#else
	float t[16];
	memcpy(t, &v, sizeof t);
	for (int w = 8; w >= 1; w >>= 1)
		for (int i = 0; i < w; i++)
			t[i] += t[i + w];
	return t[0];
#endif
}

#if defined(__AVX512F__)
/* vhsum of 16 vectors at once: lane g of the result is vhsum(a[g]) bit for bit (the same
 * additions, same operands, same order), two rows per vector from the first step on */
static inline __m512 vhsum16(const __m512 a[16])
{
	__m512 s1[8], s2[4], s3[2];
	for (int k = 0; k < 8; k++) /* lanes i + (i + 8) of rows 2k, 2k+1 */
		s1[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x44),
		                      _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xee));
	for (int h = 0; h < 4; h++) /* + (i + 4): rows 4h..4h+3, one per 128-bit lane */
		s2[h] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * h], s1[2 * h + 1], 0x88),
		                      _mm512_shuffle_f32x4(s1[2 * h], s1[2 * h + 1], 0xdd));
	for (int k = 0; k < 2; k++) /* + (i + 2): lane q holds rows 8k+q and 8k+4+q */
		s3[k] = _mm512_add_ps(_mm512_shuffle_ps(s2[2 * k], s2[2 * k + 1], 0x44),
		                      _mm512_shuffle_ps(s2[2 * k], s2[2 * k + 1], 0xee));
	/* + (i + 1): element m of 128-bit lane q is row 4m + q */
	__m512 e = _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], 0x88), _mm512_shuffle_ps(s3[0], s3[1], 0xdd));
	const __m512i to_row = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	return _mm512_permutexvar_ps(to_row, e);
}
#endif

#if defined(__AVX512F__)
/* r[0..16) (16 rows of 16 floats) transposed in registers: afterwards lane j of r[c] is
 * what lane c of r[j] was (data movement only) */
static inline __attribute__((always_inline)) void vtranspose16(__m512 r[16])
{
	__m512 t[16], u[16];
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
	}
	for (int i = 0; i < 16; i += 4) {
		u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
		u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
		u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
		u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
	}
	for (int i = 0; i < 4; i++) {
		t[i] = _mm512_shuffle_f32x4(u[i], u[i + 4], 0x88);
		t[i + 4] = _mm512_shuffle_f32x4(u[i], u[i + 4], 0xdd);
		t[i + 8] = _mm512_shuffle_f32x4(u[i + 8], u[i + 12], 0x88);
		t[i + 12] = _mm512_shuffle_f32x4(u[i + 8], u[i + 12], 0xdd);
	}
	for (int i = 0; i < 4; i++) {
		r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
		r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
		r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
		r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
	}
}
#endif

/* ---- element-wise vectors
 *
 * Work in which each lane's result depends on that lane alone (GELU, e^x, dropout
 * scaling, the layer norm's affine step) runs on the target's own register width: VE
 * lanes of type ve. Reductions keep vf and VL = 16 lanes, whose fixed summation order
 * is part of the results. On AVX-512 (and on targets without AVX2) ve is vf. On AVX2
 * builds (x86-64-v3: tests/gpu/bundle.sh, AMD Zen 2/3) GCC 12 keeps 64-byte generic
 * vectors in memory, lowering every operation to loads and stores of halves; ve is then
 * one 8-lane register. Each lane computes the same operations either way, so the
 * results do not depend on VE (tests/sh/isa_v3.sh compares the builds). */
#if defined(__AVX2__) && !defined(__AVX512F__)
#define VE 8
typedef float ve __attribute__((vector_size(32), aligned(32)));
typedef float veu __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t vei __attribute__((vector_size(32), aligned(32)));

static inline ve vload_e(const float *p)
{
	return *(const veu *)p;
}
static inline void vstore_e(float *p, ve v)
{
	*(veu *)p = v;
}
static inline ve vset1_e(float x)
{
	return (ve)_mm256_set1_ps(x);
}
static inline ve vzero_e(void)
{
	return (ve){0};
}
static inline ve vfma_e(ve a, ve b, ve c)
{
#if defined(__FMA__)
	return (ve)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
	return a * b + c;
#endif
}
#else
#define VE VL
typedef vf ve;
typedef vi vei;
#define vload_e vload
#define vstore_e vstore
#define vset1_e vset1
#define vzero_e vzero
#define vfma_e vfma
#endif
typedef uint8_t vemask __attribute__((vector_size(VE), aligned(1), may_alias));

/* VE mask bytes (0/1) as floats times c */
static inline ve vmask_e(const uint8_t *m, float c)
{
	return __builtin_convertvector(*(const vemask *)m, ve) * c;
}
static inline ve vsel_e(vei m, ve a, ve b) /* m ? a : b, m lanes all-ones or zero */
{
	return (ve)(((vei)a & m) | ((vei)b & ~m));
}
static inline ve vmax_e(ve a, ve b)
{
	return vsel_e(a > b, a, b);
}
static inline ve vmin_e(ve a, ve b)
{
	return vsel_e(a < b, a, b);
}
static inline ve vabs_e(ve a)
{
	return (ve)((vei)a & 0x7fffffff);
}

/* 16-lane reductions on VE-lane registers: an accumulator of VL lanes is VP = VL / VE
 * registers, part h holding lanes [h VE, (h + 1) VE); the parts are added exactly as
 * vhsum adds the lanes (t[i] += t[i + 8], then + 4, + 2, + 1), so the sums are vhsum's on
 * every build. */
#define VP (VL / VE)
static inline float vhsum_parts(const ve *a)
{
#if VE == 8
	__m256 t = _mm256_add_ps((__m256)a[0], (__m256)a[1]);
	__m128 q = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
	q = _mm_add_ps(q, _mm_movehl_ps(q, q));
	return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
#else
	return vhsum(a[0]);
#endif
}

/* e^x for float vectors: n = round(x log2 e), r = x - n ln2 (two-part ln2), e^r by a
 * degree-6 polynomial (coefficients fitted for this code on [-ln2/2, ln2/2], max rel
 * error ~1e-7 in float), times 2^n through the exponent bits. x < -87.3 gives 0
 * (no denormals), x > 88.7 gives +inf, NaN propagates. */
static inline ve vexp(ve x)
{
	const ve lo = vset1_e(-87.33654475f), hi = vset1_e(88.72283905f);
	vei nan = x != x;
	vei under = x<lo, over = x> hi;
	ve xc = vmin_e(vmax_e(x, lo), hi);
	const ve magic = vset1_e(12582912.0f); /* 1.5 * 2^23: round to nearest integer */
	ve n = (vfma_e(xc, vset1_e(1.44269504089f), magic)) - magic;
	ve r = vfma_e(n, vset1_e(-0.693145751953125f), xc);
	r = vfma_e(n, vset1_e(-1.428606765330187e-06f), r);
	ve p = vset1_e(1.385929063e-03f);
	p = vfma_e(p, r, vset1_e(8.374763653e-03f));
	p = vfma_e(p, r, vset1_e(4.166772589e-02f));
	p = vfma_e(p, r, vset1_e(1.666642129e-01f));
	p = vfma_e(p, r, vset1_e(4.999999404e-01f));
	p = vfma_e(p, r, vset1_e(1.0f));
	p = vfma_e(p, r, vset1_e(1.0f));
	vei ni = __builtin_convertvector(n, vei);
	/* 2^n in two factors so that n = -126..128 stays in range */
	vei n1 = ni >> 1, n2 = ni - n1;
	ve s1 = (ve)((n1 + 127) << 23), s2 = (ve)((n2 + 127) << 23);
	ve res = p * s1 * s2;
	res = vsel_e(under, vzero_e(), res);
	res = vsel_e(over, vset1_e(__builtin_inff()), res);
	return vsel_e(nan, x, res);
}

/* erfc(u) e^{u^2} / t for u >= 0 with t = 1/(1 + u/2): a degree-10 polynomial in t
 * fitted (relative least squares, Chebyshev nodes, for this code) to the exact
 * function; max relative error 1.6e-7 in float evaluation. */
static inline ve verfcx_q(ve t)
{
	ve q = vset1_e(4.319543391e-02f);
	q = vfma_e(q, t, vset1_e(-2.347335964e-01f));
	q = vfma_e(q, t, vset1_e(4.936949313e-01f));
	q = vfma_e(q, t, vset1_e(-4.549739957e-01f));
	q = vfma_e(q, t, vset1_e(1.321770400e-01f));
	q = vfma_e(q, t, vset1_e(-5.921135843e-02f));
	q = vfma_e(q, t, vset1_e(9.346243739e-02f));
	q = vfma_e(q, t, vset1_e(1.753159761e-01f));
	q = vfma_e(q, t, vset1_e(2.468845695e-01f));
	q = vfma_e(q, t, vset1_e(2.820937634e-01f));
	q = vfma_e(q, t, vset1_e(2.820948064e-01f));
	return q;
}

/* Phi(x) (standard normal CDF) and phi(x) (density) of a vector:
 * u = |x|/sqrt2, E = e^{-u^2}, erfc(u) = E t Q(t); Phi = 1 - erfc/2 (x >= 0) or erfc/2.
 * u^2 = x^2/2 is formed exactly as (h + l)/2 with h = x*x, l = fma(x, x, -h), and
 * E = e^{-h/2} (1 - l/2): the rounding of x^2 would otherwise cost |x|^2 * 6e-8 of
 * relative accuracy (3.6e-6 at x = -11). */
static inline void vnormcdf(ve x, ve *Phi, ve *phi)
{
	ve u = vabs_e(x) * vset1_e(0.70710678118654752f);
	ve t = vset1_e(1.0f) / vfma_e(u, vset1_e(0.5f), vset1_e(1.0f));
	ve h = x * x;
	ve l = vfma_e(x, x, -h);
	ve E = vexp(h * vset1_e(-0.5f)) * vfma_e(l, vset1_e(-0.5f), vset1_e(1.0f));
	ve half_erfc = vset1_e(0.5f) * (E * (t * verfcx_q(t)));
	*Phi = vsel_e(x >= vzero_e(), vset1_e(1.0f) - half_erfc, half_erfc);
	*phi = E * vset1_e(0.39894228040143268f);
}

#endif
