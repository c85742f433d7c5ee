/* attn_norm.h — attention normalisers (PROTOCOL.md A3), forward and exact backward.
 *
 * A normaliser maps each row of scores s[0..T) to a probability row p[0..T).
 * One call handles a block of `rows` contiguous rows that share the number of
 * valid keys `n_valid` (keys n_valid..T-1 are padding) and the entmax alpha.
 * In the encoder that is one (sample, head) block: rows = T queries.
 *
 * Padding (text tasks):
 *   SB_MASK_MARGIN   the study's rule: a padded key's score becomes
 *                    min(valid scores in the row) - 60 before normalising
 *                    (the gradient of that min is part of the exact backward).
 *   SB_MASK_EXCLUDE  padded keys are excluded (probability exactly 0).
 * n_valid < 1 is an error (SB_EDATA), never a NaN.
 *
 * Methods (names as PROTOCOL A3 / DESIGN §8):
 *   softmax; topk_softmax_{0125,025,05} (bare topk_softmax = 0.25);
 *   bottomk_softmax_{0125,025}; sparsemax; entmax15; entmax_bisect (alpha);
 *   headwise_adaptive_entmax (alpha per layer and head, supplied by the caller).
 *   Top-k: k = max(1, ceil(r * n_valid)); ties at the k-th score go to the lower
 *   key index; exactly k keys kept.
 *   `unrolled` selects the study's 18-iteration bisection and the gradient of
 *   its unrolled iterations (for side-by-side checks); default is exact.
 */
#ifndef SB_ATTN_NORM_H
#define SB_ATTN_NORM_H

#include "err.h"

enum sb_norm_kind {
	SB_NORM_SOFTMAX,
	SB_NORM_TOPK,
	SB_NORM_BOTTOMK,
	SB_NORM_SPARSEMAX,
	SB_NORM_ENTMAX15,
	SB_NORM_ENTMAX_BISECT,
	SB_NORM_ADAPTIVE
};

enum sb_mask_mode { SB_MASK_MARGIN = 0, SB_MASK_EXCLUDE = 1 };

#define SB_MASK_MARGIN_VALUE 60.0
#define SB_ALPHA_MIN 1.05
#define SB_ALPHA_MAX 2.0

struct sb_norm {
	enum sb_norm_kind kind;
	double ratio;           /* top-k / bottom-k ratio r */
	double alpha;           /* entmax_bisect fixed alpha (1.5 for entmax15) */
	int unrolled;           /* study's unrolled 18-iteration bisection */
	enum sb_mask_mode mask; /* padded keys: margin (default) or exclude */
};

/* Floats of per-row scratch that forward writes and backward reads. */
#define SB_NORM_AUX 4

/* Parse a method name ("topk_softmax_025", "entmax_bisect", ...). For
 * entmax_bisect the alpha is taken from `alpha` (clamped to [1.05, 2]).
 * Top-k and bottom-k take any ratio r in (0, 1]: topk_softmax_R / bottomk_softmax_R,
 * R = r's decimal digits without the point (0125 = 0.125, 0375 = 0.375, 1 = 1); the
 * bare names mean 0.25. The canonical name (sb_norm_name) drops trailing zeros
 * (topk_softmax_01250 -> topk_softmax_0125). */
int sb_norm_parse(const char *method, double alpha, struct sb_norm *out, struct sb_err *err);
/* The names sb_norm_parse accepts, for messages. */
#define SB_NORM_NAMES                                                                                      \
	"softmax, topk_softmax_R and bottomk_softmax_R (R: a ratio in (0, 1] as its digits without the point, " \
	"e.g. 0125, 025, 05, 1; bare topk_softmax and bottomk_softmax: 025), sparsemax, entmax15, "          \
	"entmax_bisect, headwise_adaptive_entmax"
/* Canonical method name, e.g. "topk_softmax_025". */
const char *sb_norm_name(const struct sb_norm *nm);
/* Number of keys kept per row by top-k / bottom-k for n_valid valid keys. */
int sb_norm_topk_k(double ratio, int n_valid);

/* p[rows*T] = normalise(s[rows*T]); aux[rows*SB_NORM_AUX] saved for backward.
 * alpha is used by entmax_bisect and headwise_adaptive_entmax (ignored otherwise). */
int sb_norm_forward(const struct sb_norm *nm, float *p, float *aux, const float *s, int rows, int T, int n_valid,
                    float alpha, struct sb_err *err);

/* ds = d loss / d s given dp = d loss / d p (ds may alias dp).
 * For headwise_adaptive_entmax and entmax_bisect, *dalpha (if not NULL) is
 * increased by d loss / d alpha summed over the rows. */
void sb_norm_backward(const struct sb_norm *nm, float *ds, double *dalpha, const float *dp, const float *p,
                      const float *aux, const float *s, int rows, int T, int n_valid, float alpha);

/* Attention statistics of a block (PROTOCOL A3): counts probabilities > 1e-7
 * among the valid keys (*nonzero += count, *valid_total += rows*n_valid) and
 * adds the sum over rows of -sum p log max(p, 1e-12) to *entropy_sum. */
void sb_norm_stats(const float *p, int rows, int T, int n_valid, double *nonzero, double *valid_total,
                   double *entropy_sum);

/* ---- Additions (norm branch): semantics made precise, references, test hooks ----
 *
 * alpha: entmax15 always uses 1.5; entmax_bisect and headwise_adaptive_entmax use
 *   the `alpha` argument of forward/backward (for entmax_bisect pass nm->alpha,
 *   which sb_norm_parse sets). alpha is clamped to [1.05f, 2] (the float32 bounds,
 *   as in the study's float32 torch.clamp); *dalpha only receives gradient when
 *   1.05f <= alpha <= 2 (torch.clamp's rule), otherwise 0. A NaN alpha gives NaN
 *   rows. sb_norm_backward called with arguments sb_norm_forward rejects writes NaN.
 *
 * Non-finite scores (among the valid keys of a row):
 *   NaN or +inf  the whole row of p is NaN (and its ds, and *dalpha becomes NaN):
 *                NaN propagates, as in torch, so a diverged model fails its
 *                non-finite loss check. Never a crash or an endless loop.
 *   -inf         the key is excluded: p = 0 and ds = 0 exactly; the row is
 *                normalised over its other keys (top-k still keeps
 *                k = ceil(r*n_valid) keys, fewer if fewer are finite). A row
 *                with no finite valid score is SB_EDATA ("row R: no finite score").
 * SB_MASK_MARGIN: the margin is taken below the minimum finite valid score; the
 *   whole margin gradient goes to that minimum (lowest index on ties). Padded keys
 *   always get ds = 0 (their input score is replaced).
 * Unrolled bisection: d (in tau_hi = max y - (1/d)^(alpha-1)) is always T, with
 *   either mask mode; with SB_MASK_EXCLUDE (which the study does not have) the
 *   bisection runs on the valid keys only. The gradient routes the bracket's
 *   min/max to the lowest index on ties.
 * Exact sparse methods (sparsemax, entmax) give padded keys exactly 0 under both
 *   mask modes (a margin of 60 is outside every support for alpha >= 1.05).
 *
 * aux (SB_NORM_AUX floats per row): the entmax backward reads [0] and [1], the
 * unrolled one [0] and [2]; aux = NULL (in forward and backward) makes backward
 * recompute them. The rest is diagnostics.
 *   [0] threshold tau on the y = (alpha-1)(s - max s) scale (entmax, sparsemax,
 *       unrolled: final tau_hi); softmax/top-k: the largest kept score.
 *   [1] the max of the effective row (top-k: the largest kept score);
 *   [2] passes (Newton/Halley/Michelot, top-k counting passes), or the unrolled branch
 *       decisions as an integer (bit t = 1: iteration t raised tau_lo);
 *   [3] support size (keys with p > 0).
 *
 * Implementation: lib/attn_norm.c (API, masks, the portable kernels),
 * lib/attn_norm_avx512.c (the kernels used when compiled with AVX-512),
 * lib/attn_norm_ref.c (the double reference).
 */

/* Double-precision references: plain loops, full sorts, bisection to double
 * precision; obviously correct and slow. Same semantics as the float API.
 * The reference backward recomputes its forward (no aux). */
int sb_norm_forward_ref_f64(const struct sb_norm *nm, double *p, const double *s, int rows, int T, int n_valid,
                            double alpha, struct sb_err *err);
int sb_norm_backward_ref_f64(const struct sb_norm *nm, double *ds, double *dalpha, const double *dp, const double *s,
                             int rows, int T, int n_valid, double alpha, struct sb_err *err);
/* One row of alpha-entmax in double by bisection, alpha in (1, 2] NOT clamped
 * (to test the alpha -> 1 limit); p[0..n) from s[0..n), all finite. */
void sb_norm_entmax_row_f64(double *p, const double *s, int n, double alpha);

/* Test hook: the float forward with a chosen algorithm.
 *   SB_NORM_ALGO_AUTO     what sb_norm_forward uses: the AVX-512 kernels when the
 *                         library was compiled with AVX-512, else ITERATE;
 *   SB_NORM_ALGO_PLAIN    full sort for top-k/bottom-k, the sort-based closed form for
 *                         sparsemax (and alpha = 2) and entmax15 (and alpha = 1.5),
 *                         bisection to float precision for other alpha;
 *   SB_NORM_ALGO_ITERATE  the portable O(T) paths: bisection over the scores' integer
 *                         images for top-k, Michelot for sparsemax, Newton for entmax15
 *                         (alpha = 1.5), Halley from Jensen's bound for other alpha. */
enum sb_norm_algo { SB_NORM_ALGO_AUTO = 0, SB_NORM_ALGO_PLAIN = 1, SB_NORM_ALGO_ITERATE = 2 };
int sb_norm_forward_algo(const struct sb_norm *nm, enum sb_norm_algo algo, float *p, float *aux, const float *s,
                         int rows, int T, int n_valid, float alpha, struct sb_err *err);

#endif
