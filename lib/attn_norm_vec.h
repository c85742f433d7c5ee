/* attn_norm_vec.h — internal to lib/attn_norm*.c: vectorised row loops.
 *
 * At -O2 GCC 12 vectorises only loops whose vector code replaces the scalar
 * loop entirely ("very cheap" cost model), and never reassociates a float
 * reduction without -ffast-math. So every kernel works on buffers whose length
 * `np` is a multiple of VW, filled past the row with a neutral value, with inner
 * loops of exactly VW iterations over restrict-qualified pointers and
 * reductions kept in VW lane accumulators that are combined in a fixed tree
 * order at the end (deterministic: the same result for the same input).
 * Loops that call the element functions below are written on ve registers
 * instead (VP of them per VW-lane block, lane l in part l / VE), with the same
 * per-lane accumulators and the same tree (parts_sum).
 *
 * The element functions (exp of a non-positive number, log of a positive
 * normal number) are derived here from the textbook series, not copied:
 *   exp:  x = n ln2 + r, |r| <= ln2/2, e^r by its Taylor polynomial of degree 7
 *         (truncation < 6e-9 relative), 2^n put into the exponent bits.
 *   log:  x = 2^k m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(u),
 *         u = (m-1)/(m+1), |u| <= 0.1716, series to u^9 (truncation < 2e-10).
 */
#ifndef SB_ATTN_NORM_VEC_H
#define SB_ATTN_NORM_VEC_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend_cpu_simd.h"

#define VW 16
_Static_assert(VW == VL, "a VW-lane block is VP registers of VE lanes");

static inline int vw_round_up(int n)
{
	return (n + VW - 1) / VW * VW;
}

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

/* The element functions run on the target's register width (backend_cpu_simd.h: ve,
 * VE = 16 lanes with AVX-512, 8 with AVX2). GCC would vectorise scalar versions only
 * with AVX-512's masked operations: with AVX2 it hoists, sinks and threads their
 * selects into branches ("control flow in loop") and runs them one lane at a time.
 * Written on ve, each lane does exactly the scalar operations (multiplies and adds
 * apart: the build does not contract them), so the results are the same on every
 * build, and the CUDA kernels (lib/cuda/lanes.cuh) repeat them. */

/* e^x for x in [-87, 88]; 0 below (e^x < 1.7e-38 there, or x = -inf), +inf above. */
static inline ve exp_v(ve x)
{
	const ve lo = vset1_e(-87.0f), hi = vset1_e(88.0f);
	vei under = x < lo, over = x > hi;
	ve xc = vsel_e(under, lo, vsel_e(over, hi, x));
	ve t = xc * 1.44269504088896341f + 12582912.0f; /* 1.5*2^23: round to integer */
	ve n = t - 12582912.0f;
	ve r = xc - n * 0.693359375f;      /* ln2 high part, 9 bits: n*hi is exact */
	r = r - n * -2.12194440054690583e-4f; /* ln2 low part */
	ve q = vset1_e(1.0f / 5040.0f);
	q = q * r + 1.0f / 720.0f;
	q = q * r + 1.0f / 120.0f;
	q = q * r + 1.0f / 24.0f;
	q = q * r + 1.0f / 6.0f;
	q = q * r + 0.5f;
	q = q * r + 1.0f;
	q = q * r + 1.0f;
	vei ni = (vei)t - 0x4B400000; /* n as an integer, -126..127 */
	ve e = q * (ve)((ni + 127) << 23);
	e = vsel_e(over, vset1_e(INFINITY), e);
	return vsel_e(under, vzero_e(), e);
}

/* log x for x a positive normal float (callers clamp below at FLT_MIN). */
static inline ve log_pos_v(ve x)
{
	vei i = (vei)x;
	vei k = ((i >> 23) & 0xff) - 127;
	ve m = (ve)((i & 0x007fffff) | 0x3f800000); /* [1, 2) */
	vei big = m > 1.41421356f;
	m = vsel_e(big, m * 0.5f, m);
	k = k - big; /* big lanes are -1: k + 1 */
	ve u = (m - 1.0f) / (m + 1.0f);
	ve u2 = u * u;
	ve q = vset1_e(1.0f / 9.0f);
	q = q * u2 + 1.0f / 7.0f;
	q = q * u2 + 1.0f / 5.0f;
	q = q * u2 + 1.0f / 3.0f;
	q = q * u2 + 1.0f;
	ve lm = 2.0f * u * q;
	ve kf = __builtin_convertvector(k, ve);
	return kf * 0.693359375f + (lm + kf * -2.12194440054690583e-4f);
}

/* [d]_+^e for the exponents the methods use: 1, 2, or any e via exp(e log d).
 * d <= 1 in the exact paths (y <= 0, tau >= -1); the study's bisection may
 * start with d > 1 (its lower bracket is min y - 1), where d^e can overflow to
 * inf, as it does in float32 torch. */
static inline ve powpos_v(ve d, ve e)
{
	vei in = d > FLT_MIN;
	ve dc = vsel_e(in, d, vset1_e(1.0f));
	ve u = exp_v(e * log_pos_v(dc));
	return vsel_e(in, u, vzero_e());
}

/* Lane reductions in a fixed tree order. */
static inline float lanes_sum(float *a)
{
	for (int w = VW / 2; w >= 1; w /= 2)
		for (int l = 0; l < w; l++)
			a[l] += a[l + w];
	return a[0];
}

/* lanes_sum of VW lanes held as VP registers (lane l in part l / VE, lane l % VE) */
static inline float parts_sum(const ve *a)
{
	float t[VW];
	for (int h = 0; h < VP; h++)
		vstore_e(t + h * VE, a[h]);
	return lanes_sum(t);
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
