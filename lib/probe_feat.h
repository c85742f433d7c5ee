/* probe_feat.h — PROTOCOL A8 M1's per-epoch probe features of a checkpoint
 * (docs/sb-eval.md, "Probe features", defines every number exactly).
 *
 * The probe runs the checkpoint's model with softmax in place of its normaliser
 * (the dense counterfactual; same masking of padded keys), in evaluation mode (no
 * dropout), on the first SB_PROBE_EXAMPLES validation examples, and summarises, per
 * valid query row of every (example, layer, head), the dense attention row p, its
 * scores s and the gradient g = d loss / d s of that example's cross-entropy:
 *   dense_entropy          -sum p log max(p, 1e-12) over the valid keys
 *   boundary_margin        (s_(k) - s_(k+1)) / sd(s), k = ceil(0.25 n_valid)
 *   tail_mass              the mass of the valid keys outside the top k
 *   gradient_topk_share    |g on the top k|^2 / |g|^2
 * averaged over the rows of each (example, layer, head), then over those triples.
 */
#ifndef SB_PROBE_FEAT_H
#define SB_PROBE_FEAT_H

#include <stdint.h>

#include "dataset.h"
#include "encoder.h"
#include "err.h"
#include "json.h"

#define SB_PROBE_EXAMPLES 128
#define SB_PROBE_RATIO 0.25

struct sb_probe_feat {
	int64_t n; /* examples probed; 0: no probe (the other fields are NaN) */
	double dense_entropy, boundary_margin, tail_mass, gradient_topk_share;
};

/* Per-row sums of one (example, layer, head) block, accumulated by sb_probe_block. */
struct sb_probe_acc {
	double sum[4];   /* of the per-triple means, in the order of struct sb_probe_feat */
	int64_t cnt[4];  /* triples with at least one counted row */
};

/* One (example, layer, head) block: S, P, G are [T, T] (query rows, keys) in float,
 * the first nvalid keys and query rows valid. Adds the block's row means into acc. */
void sb_probe_block(struct sb_probe_acc *acc, const float *S, const float *P, const double *G, int T, int nvalid);
/* The features from the accumulated blocks (NaN for a feature with no counted block). */
void sb_probe_finish(const struct sb_probe_acc *acc, int64_t n, struct sb_probe_feat *out);

/* Probe model m (its parameters loaded) on examples idx[0..n) of data (n is capped at
 * SB_PROBE_EXAMPLES); ds is the host dataset (text lengths). The model's normaliser is
 * restored before returning. HAE models cannot swap their normaliser: out->n = 0. */
int sb_probe_features(struct sb_encoder *m, const struct sb_encoder_data *data, const struct sb_dataset *ds,
                      const uint32_t *idx, int64_t n, struct sb_probe_feat *out, struct sb_err *err);
/* The fields probe_examples, probe_dense_entropy, probe_boundary_margin, probe_tail_mass,
 * probe_gradient_topk_share of an eval.epoch record (nothing when pf->n is 0). */
void sb_probe_write(struct sb_jw *w, const struct sb_probe_feat *pf);

#endif
