/* attn_norm_impl.h — internal to lib/attn_norm*.c: the vector row kernels.
 *
 * Each kernel handles one effective row x[0..n) (n >= 1, finite scores, no
 * padding needed: tails use masked loads and stores) and writes p[0..n).
 * They implement the same algorithms as the portable kernels in attn_norm.c
 * and are tested against the same double reference. ws is scratch of at
 * least n floats (and n int32 for the top-k keys).
 *
 * A build for AVX-512 (SB_NORM_AVX512) has kernels for every normaliser
 * (attn_norm_avx512.c); a build for AVX2 + FMA without AVX-512 (SB_NORM_AVX2:
 * -march=x86-64-v3, `make V3=1`) has them for general-alpha entmax only
 * (attn_norm_avx2.c: sbv_row_finite and the sbv_entmax_*rows* functions, same
 * contracts), and runs the portable kernels for the rest. SB_NORM_PORTABLE,
 * defined before including this header, selects the portable kernels for
 * everything (the tests of the portable kernels do that).
 */
#ifndef SB_ATTN_NORM_IMPL_H
#define SB_ATTN_NORM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#if defined(__AVX512F__) && !defined(SB_NORM_PORTABLE)
#define SB_NORM_AVX512 1

/* 1 when x[0..n) are all finite; *mn = their minimum */
int sbv_row_finite(const float *x, int n, float *mn);
/* bit g set when row g of x (x + g stride, length n) is all finite, g < rows <= 16 */
unsigned sbv_rows_finite(const float *x, int rows, long stride, int n);
/* aux[0..3] as documented in attn_norm.h */
void sbv_softmax(float *p, const float *x, int n, float *aux);
void sbv_softmax_bwd(float *ds, const float *p, const float *dp, int n);
/* the same for rows x + r stride, r < rows <= 16 (all finite, length n), bit for bit as
 * row by row; aux: 4 floats per row, [0] and [1] written */
void sbv_softmax_rows(float *p, const float *x, int rows, long stride, int n, float *aux);
void sbv_softmax_bwd_rows(float *ds, const float *p, const float *dp, int rows, long stride, int n);
/* top-k (largest = 1) or bottom-k of x, then softmax over the kept keys;
 * kws: 3 (n/16 + 1) int32 of scratch */
void sbv_topk(float *p, const float *x, int n, int k, int largest, int32_t *kws, float *aux);
void sbv_sparsemax(float *p, const float *x, int n, float *aux);
void sbv_sparsemax_bwd(float *ds, const float *p, const float *dp, int n);
/* exact alpha-entmax, am1 = alpha - 1 in [0.05, 1]; ws (may be NULL):
 * SBV_ENTMAX_WS(n) floats of scratch for the general-alpha path */
void sbv_entmax(float *p, const float *x, int n, float am1, float *aux, float *ws);
#define SBV_ENTMAX_WS(n) (4 * (2 * (size_t)(n) + 2 * (((size_t)(n) + 15) / 16) + 40))
/* the same for rows x + r stride, r < rows (all finite, length n), up to 16 at
 * once; aux: 4 floats per row; ws: ws_floats >= SBV_ENTMAX_WS(n) floats */
void sbv_entmax_rows(float *p, const float *x, int rows, long stride, int n, float am1, float *aux, float *ws,
                     size_t ws_floats);
/* how many rows of length n sbv_entmax_rows solves at once in ws_floats of ws */
int sbv_entmax_rows_fit(int n, size_t ws_floats);
/* returns d loss / d alpha of the row (0 unless want_alpha); tau = aux[0] and
 * m = aux[1] of the forward */
double sbv_entmax_bwd(float *ds, const float *p, const float *dp, const float *x, float tau, float m, int n, float am1,
                      int want_alpha, float *ws);
/* the same for rows x + r stride, r < rows, up to 16 at once (general alpha only:
 * am1 not 0.5 or 1); aux of the forward, 4 floats per row; returns the sum of
 * the rows' d loss / d alpha. ws: ws_floats >= 2n floats. */
double sbv_entmax_bwd_rows(float *ds, const float *p, const float *dp, const float *x, const float *aux, int rows,
                           long stride, int n, float am1, int want_alpha, float *ws, size_t ws_floats);
/* the study's 18-iteration bisection; dfull = T; ws as for sbv_entmax */
void sbv_unrolled(float *p, const float *x, int n, int dfull, float am1, float *aux, float *ws);
double sbv_unrolled_bwd(float *ds, const float *dp, const float *x, const float *aux, int n, int dfull, float am1,
                        int want_alpha, float *ws);

#elif defined(__AVX2__) && defined(__FMA__) && !defined(SB_NORM_PORTABLE)
#define SB_NORM_AVX2 1

/* as above (attn_norm_avx2.c): up to 8 rows at once; general alpha only */
int sbv_row_finite(const float *x, int n, float *mn);
void sbv_entmax_rows(float *p, const float *x, int rows, long stride, int n, float am1, float *aux, float *ws,
                     size_t ws_floats);
int sbv_entmax_rows_fit(int n, size_t ws_floats);
double sbv_entmax_bwd_rows(float *ds, const float *p, const float *dp, const float *x, const float *aux, int rows,
                           long stride, int n, float am1, int want_alpha, float *ws, size_t ws_floats);
#endif

#endif
