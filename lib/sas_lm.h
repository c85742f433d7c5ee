/* sas_lm.h — SAS on an LM-track decoder (issue 9, "beyond the published toy").
 *
 * A trained block selector per full-attention (A) layer of a frozen lm_model decoder
 * (any pattern; RoPE, GQA), trained with the language-model loss, evaluated next to
 * dense attention and the LM track's training-free masks (lib/lm_mask.h) on the same
 * windows and probes, through one full-sequence attention kernel.
 *
 * The selector of A layer l, adapted from the released full-scale router (PROTOCOL B,
 * "Full-scale SAS router"): its inputs are the layer's queries and keys as the attention
 * receives them (after RoPE), detached (no gradient into the backbone or into earlier
 * selectors' inputs):
 *   qs_t = Sq q_t  (Linear(heads*hd -> dsel), no bias),  ks_j = Sk k_j  (Linear(kv_heads*hd -> dsel)),
 *   kb_c = mean of ks over block c (B keys), score(t, c) = qs_t . kb_c / sqrt(dsel), shared by heads;
 *   g = softmax over the complete earlier blocks c < t/B; the m(t) highest raw scores are
 *   kept with bias log(max(g, 1e-12)) inside every head's softmax; the own block up to t
 *   with bias 0; all else -inf. m(t) matches the recipe's budget row by row as the LM
 *   track's blockB mask does: m(t) = round((n(t) - own)/B) (half down) clamped to
 *   [0, t/B], n(t) the recipe's kept count, own = t - B floor(t/B) + 1.
 * Differences from the released router (said in docs/sas.md): mean pooling after the
 * projection, no RMSNorm or RoPE of its own (it reads post-RoPE q/k), head-shared gates,
 * softmax and top-k over historical blocks only, Xavier-uniform init from SB_RNG_INIT.
 *
 * Mechanism: the decoder's own training path (sb_lm_train_grad / sb_lm_train_logits)
 * runs with a copy of the backend's LM ops whose attn_forward / attn_backward are ours
 * (dense calls the original). The ops carry no user argument, so the current SAS state
 * is a process-wide pointer set for the duration of a call: one sb_sas_lm works at a
 * time, on a 1-thread CPU backend (checked).
 */
#ifndef SB_SAS_LM_H
#define SB_SAS_LM_H

#include <stdint.h>

#include "err.h"
#include "lm_mask.h"
#include "lm_model.h"

struct sb_sas_lm_cfg {
	int block;                /* 8, 16, 64 */
	int dsel;                 /* selector width (32) */
	int batch;                /* sequences per selector step */
	struct sb_lm_mask budget; /* the recipe whose per-row count m(t) is matched */
};

enum sb_sas_lm_mode { SB_SAS_LM_DENSE, SB_SAS_LM_MASK, SB_SAS_LM_SAS };

struct sb_sas_lm;

/* m: a trained decoder on a 1-thread CPU backend (borrowed, never modified). T: window. */
int sb_sas_lm_new(struct sb_lm_model *m, const struct sb_sas_lm_cfg *c, int T, uint64_t seed, struct sb_sas_lm **out,
                  struct sb_err *err);
void sb_sas_lm_free(struct sb_sas_lm *x);
/* The selector's parameters, n of them, in their packed order (a checkpoint's): per A layer
 * Sq [dsel][heads*hd], then Sk [dsel][kv*hd]. In memory SB_ARENA_CHECK puts a red zone after
 * each matrix, so they are read and written through these: all of them (out, in: n floats),
 * or parameter i in place. */
size_t sb_sas_lm_n_params(const struct sb_sas_lm *x);
void sb_sas_lm_params_get(const struct sb_sas_lm *x, float *out);
void sb_sas_lm_params_set(struct sb_sas_lm *x, const void *in); /* n floats, any alignment */
float *sb_sas_lm_param(struct sb_sas_lm *x, size_t i);
/* For tests: the red zone i of the parameters (after matrix i: Sq, Sk of each A layer in
 * turn), NULL past the last or without SB_ARENA_CHECK. */
void *sb_sas_lm_zone(struct sb_sas_lm *x, int i);
int sb_sas_lm_n_layers(const struct sb_sas_lm *x); /* A layers */

/* Logits [T][vocab] of tokens[0..T) under dense, a training-free mask, or SAS.
 * budget (may be NULL): kept/causal (query, key) pairs over heads and A layers, added. */
int sb_sas_lm_logits(struct sb_sas_lm *x, const uint8_t *tokens, enum sb_sas_lm_mode mode,
                     const struct sb_lm_mask *mask, float *logits, struct sb_lm_budget *budget, struct sb_err *err);
/* Loss and the selector's gradient (into g, n floats in the packed order; not accumulated) on
 * batch[batch][T+1]. With SB_ARENA_CHECK, SB_EINTERNAL when a zone was written (so too for a
 * step: its gradient, moments or parameters). */
int sb_sas_lm_grad(struct sb_sas_lm *x, const uint8_t *batch, double *loss, float *g, struct sb_err *err);
/* The backbone's gradient of the last sb_sas_lm_grad pass (the model's n_floats, in its
 * layout; NULL before one): computed through SAS's attention and discarded by training, it
 * lets a test compare SAS's backward with the backbone's own where they must agree. */
const float *sb_sas_lm_backbone_grad(const struct sb_sas_lm *x);
/* One AdamW step (torch semantics) of the selector on batch: loss before the update,
 * pre-clip norm. step is 1-based. */
int sb_sas_lm_step(struct sb_sas_lm *x, const uint8_t *batch, int64_t step, float lr, float wd, float clip,
                   double *loss, double *gnorm, struct sb_err *err);
/* The three on token ids (a tokenizer's: an imported backbone's) in place of bytes. */
int sb_sas_lm_logits_ids(struct sb_sas_lm *x, const int32_t *ids, enum sb_sas_lm_mode mode,
                         const struct sb_lm_mask *mask, float *logits, struct sb_lm_budget *budget, struct sb_err *err);
int sb_sas_lm_grad_ids(struct sb_sas_lm *x, const int32_t *batch, double *loss, float *g, struct sb_err *err);
int sb_sas_lm_step_ids(struct sb_sas_lm *x, const int32_t *batch, int64_t step, float lr, float wd, float clip,
                       double *loss, double *gnorm, struct sb_err *err);
/* gate 0: the selected blocks keep their scores (bias 0 instead of log g): the trained
 * selection without the gates' reweighting (an ablation; default 1). */
void sb_sas_lm_set_gate(struct sb_sas_lm *x, int gate);
/* Mean entropy of the gates (nats) over the rows with at least one earlier block, of the
 * last SAS forward's first A layer. */
double sb_sas_lm_gate_entropy(const struct sb_sas_lm *x);

#endif
