/* attn_norm_poly.h — internal to lib/attn_norm_avx*.c: the polynomial fits of
 * log2 and 2^x that the vector entmax kernels (AVX-512 and AVX2) evaluate.
 *
 *   log2 m = f P(f), f = m - 1, m in [0.75, 1.5): P of degree 9, fitted for
 *            minimax relative error on [-0.25, 0.5] (1.6e-8 with float
 *            coefficients); Estrin's scheme pairs them as (c0 + c1 f) etc.
 *   2^r, r in [-0.5, 0.5]: degree 6, 1.6e-8 relative with float coefficients.
 *
 * Both kernels evaluate them with the macros below, in the same order, so for the
 * same f or r they give the same bits (the reductions to f and r differ only in
 * instructions). */
#ifndef SB_ATTN_NORM_POLY_H
#define SB_ATTN_NORM_POLY_H

/* log2 m = f (L0 + L1 f + ... + L9 f^9): Estrin pairs (L0 + L1 f), (L2 + L3 f), ... */
#define SB_LOG2_L0 1.44269503f
#define SB_LOG2_L1 (-0.721347537f)
#define SB_LOG2_L2 0.480900772f
#define SB_LOG2_L3 (-0.360674854f)
#define SB_LOG2_L4 0.288384036f
#define SB_LOG2_L5 (-0.240148223f)
#define SB_LOG2_L6 0.209101045f
#define SB_LOG2_L7 (-0.190278398f)
#define SB_LOG2_L8 0.150666606f
#define SB_LOG2_L9 (-0.0643438415f)

/* 2^r = E0 + E1 r + ... + E6 r^6 */
#define SB_EXP2_E0 1.0f
#define SB_EXP2_E1 0.693147206f
#define SB_EXP2_E2 0.240226469f
#define SB_EXP2_E3 0.0555032878f
#define SB_EXP2_E4 0.00961848897f
#define SB_EXP2_E5 0.00133999312f
#define SB_EXP2_E6 0.000153458095f

/* The evaluations, written once for both vector widths: FMA(a, b, c) = a b + c,
 * MUL(a, b), SET1(x) a broadcast; f2 = f f, f4 = f2 f2 (log2), r2 = r r (2^r). */
#define SB_LOG2_POLY(FMA, MUL, SET1, f, f2, f4)                                                                 \
	FMA(FMA(SET1(SB_LOG2_L9), f, SET1(SB_LOG2_L8)), MUL(f4, f4),                                             \
	    FMA(FMA(FMA(SET1(SB_LOG2_L7), f, SET1(SB_LOG2_L6)), f2, FMA(SET1(SB_LOG2_L5), f, SET1(SB_LOG2_L4))), \
	        f4, FMA(FMA(SET1(SB_LOG2_L3), f, SET1(SB_LOG2_L2)), f2, FMA(SET1(SB_LOG2_L1), f, SET1(SB_LOG2_L0)))))
#define SB_EXP2_POLY(FMA, MUL, SET1, r, r2)                                                                     \
	FMA(FMA(SET1(SB_EXP2_E6), r2, FMA(SET1(SB_EXP2_E5), r, SET1(SB_EXP2_E4))), MUL(r2, r2),                  \
	    FMA(FMA(SET1(SB_EXP2_E3), r, SET1(SB_EXP2_E2)), r2, FMA(SET1(SB_EXP2_E1), r, SET1(SB_EXP2_E0))))

#endif
