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
 * entmax_bisect the alpha is taken from `alpha` (clamped to [1.05, 2]). */
int sb_norm_parse(const char *method, double alpha, struct sb_norm *out, struct sb_err *err);
/* Canonical method name, e.g. "topk_softmax_025". */
const char *sb_norm_name(const struct sb_norm *nm);
/* Number of keys kept per row by top-k / bottom-k for n_valid valid keys. */
int sb_norm_topk_k(double ratio, int n_valid);

/* p[rows*T] = normalise(s[rows*T]); aux[rows*SB_NORM_AUX] saved for backward.
 * alpha is used by entmax_bisect and headwise_adaptive_entmax (ignored otherwise). */
int sb_norm_forward(const struct sb_norm *nm, float *p, float *aux, const float *s, int rows, int T,
		    int n_valid, float alpha, struct sb_err *err);

/* ds = d loss / d s given dp = d loss / d p (ds may alias dp).
 * For headwise_adaptive_entmax and entmax_bisect, *dalpha (if not NULL) is
 * increased by d loss / d alpha summed over the rows. */
void sb_norm_backward(const struct sb_norm *nm, float *ds, double *dalpha, const float *dp,
		      const float *p, const float *aux, const float *s, int rows, int T, int n_valid,
		      float alpha);

/* Attention statistics of a block (PROTOCOL A3): counts probabilities > 1e-7
 * among the valid keys (*nonzero += count, *valid_total += rows*n_valid) and
 * adds the sum over rows of -sum p log max(p, 1e-12) to *entropy_sum. */
void sb_norm_stats(const float *p, int rows, int T, int n_valid, double *nonzero,
		   double *valid_total, double *entropy_sum);

#endif
