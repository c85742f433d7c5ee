/* attn_norm_vec.h — internal to lib/attn_norm*.c: loops that GCC vectorises.
 *
 * At -O2 GCC 12 vectorises only loops whose vector code replaces the scalar
 * loop entirely ("very cheap" cost model), and never reassociates a float
 * reduction without -ffast-math. So every kernel works on buffers whose length
 * `np` is a multiple of VW, filled past the row with a neutral value, with inner
 * loops of exactly VW iterations over restrict-qualified pointers and
 * reductions kept in VW lane accumulators that are combined in a fixed tree
 * order at the end (deterministic: the same result for the same input).
 *
 * The element functions (exp of a non-positive number, log of a positive
 * normal number) are written branch-free so that they vectorise; they are
 * derived here from the textbook series, not copied:
 *   exp:  x = n ln2 + r, |r| <= ln2/2, e^r by its Taylor polynomial of degree 7
 *         (truncation < 6e-9 relative), 2^n put into the exponent bits.
 *   log:  x = 2^k m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(u),
 *         u = (m-1)/(m+1), |u| <= 0.1716, series to u^9 (truncation < 2e-10).
 */
#ifndef SB_ATTN_NORM_VEC_H
#define SB_ATTN_NORM_VEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define VW 16

static inline int vw_round_up(int n) { return (n + VW - 1) / VW * VW; }

static inline float f_from_bits(int32_t i)
{
	union {
		int32_t i;
		float f;
	} u = {.i = i};
	return u.f;
}

static inline int32_t f_bits(float f)
{
	union {
		float f;
		int32_t i;
	} u = {.f = f};
	return u.i;
}

/* e^x for x in [-87, 88]; 0 below (e^x < 1.7e-38 there, or x = -inf), +inf above. */
static inline float exp_f(float x)
{
	float xc = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
	float t = xc * 1.44269504088896341f + 12582912.0f; /* 1.5*2^23: round to integer */
	float n = t - 12582912.0f;
	float r = xc - n * 0.693359375f;     /* ln2 high part, 9 bits: n*hi is exact */
	r = r - n * -2.12194440054690583e-4f; /* ln2 low part */
	float q = 1.0f / 5040.0f;
	q = q * r + 1.0f / 720.0f;
	q = q * r + 1.0f / 120.0f;
	q = q * r + 1.0f / 24.0f;
	q = q * r + 1.0f / 6.0f;
	q = q * r + 0.5f;
	q = q * r + 1.0f;
	q = q * r + 1.0f;
	int32_t ni = f_bits(t) - 0x4B400000; /* n as an integer, -126..127 */
	float scale = f_from_bits((ni + 127) << 23);
	float e = q * scale;
	e = x > 88.0f ? INFINITY : e;
	return x < -87.0f ? 0.0f : e;
}

/* log x for x a positive normal float (callers clamp below at FLT_MIN). */
static inline float log_pos(float x)
{
	int32_t i = f_bits(x);
	int32_t k = ((i >> 23) & 0xff) - 127;
	float m = f_from_bits((i & 0x007fffff) | 0x3f800000); /* [1, 2) */
	int big = m > 1.41421356f;
	m = big ? m * 0.5f : m;
	k = big ? k + 1 : k;
	float u = (m - 1.0f) / (m + 1.0f);
	float u2 = u * u;
	float q = 1.0f / 9.0f;
	q = q * u2 + 1.0f / 7.0f;
	q = q * u2 + 1.0f / 5.0f;
	q = q * u2 + 1.0f / 3.0f;
	q = q * u2 + 1.0f;
	float lm = 2.0f * u * q;
	float kf = (float)k;
	return kf * 0.693359375f + (lm + kf * -2.12194440054690583e-4f);
}

/* Lane reductions in a fixed tree order. */
static inline float lanes_sum(float *a)
{
	for (int w = VW / 2; w >= 1; w /= 2)
		for (int l = 0; l < w; l++)
			a[l] += a[l + w];
	return a[0];
}

static inline float lanes_max(float *a)
{
	for (int w = VW / 2; w >= 1; w /= 2)
		for (int l = 0; l < w; l++)
			a[l] = a[l + w] > a[l] ? a[l + w] : a[l];
	return a[0];
}

static inline float lanes_min(float *a)
{
	for (int w = VW / 2; w >= 1; w /= 2)
		for (int l = 0; l < w; l++)
			a[l] = a[l + w] < a[l] ? a[l + w] : a[l];
	return a[0];
}

static inline int32_t lanes_isum(int32_t *a)
{
	int32_t s = 0;
	for (int l = 0; l < VW; l++)
		s += a[l];
	return s;
}

/* max of x[0..np) (np a multiple of VW; pad with -inf). */
static inline float v_max(const float *restrict x, int np)
{
	float acc[VW];
	for (int l = 0; l < VW; l++)
		acc[l] = x[l];
	for (int b = VW; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			acc[l] = x[b + l] > acc[l] ? x[b + l] : acc[l];
	return lanes_max(acc);
}

/* sum of x[0..np) (pad with 0). */
static inline float v_sum(const float *restrict x, int np)
{
	float acc[VW] = {0};
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			acc[l] += x[b + l];
	return lanes_sum(acc);
}

/* sum of x[i]*y[i] (pad either with 0). */
static inline float v_dot(const float *restrict x, const float *restrict y, int np)
{
	float acc[VW] = {0};
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			acc[l] += x[b + l] * y[b + l];
	return lanes_sum(acc);
}

static inline void v_scale(float *restrict x, float a, int np)
{
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			x[b + l] *= a;
}

#endif
