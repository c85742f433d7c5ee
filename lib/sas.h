/* sas.h — SAS: a trained block selector on a frozen decoder (PROTOCOL B).
 *
 * The backbone is the LM track's decoder (lib/lm_model.h) in the configuration of
 * PROTOCOL B: {"pattern":"A","d":32,"heads":4,"ffn":128,"pos":"learned","bias":1,
 * "max_T":64}, every Linear/Embedding weight N(0, 0.02^2) (PROTOCOL B; the LM track's
 * 0.02/sqrt(2L) for o_proj and down_proj is overridden), tied output. The selector adds
 * two bias-free Linear(d -> dsel) maps, selector_q and selector_k (512 parameters at
 * d 32, dsel 8), read from the LN1 output of the (one) attention layer:
 *
 *   qs_t = selector_q(LN1 x)_t,  ks_t = selector_k(LN1 x)_t,
 *   kb_c = mean of ks over block c (block size `block`),
 *   score(t, c) = qs_t . kb_c / sqrt(dsel), one score set shared by every head.
 *   For a query t in block c0 >= 1:
 *     g = softmax of score(t, .) over the historical blocks 0..c0-1;
 *     the k = min(topk, c0) blocks with the highest raw scores (ties: lower index)
 *     are kept, their keys get the additive bias log(max(g_c, 1e-12)) inside the
 *     attention softmax; the query's own block is kept up to t with bias 0; every
 *     other key gets -inf. Queries of block 0 attend causally within it.
 *   The selection is not differentiable: gradients reach the selector through log g.
 *
 * The forward and backward here are the plainest loops (float storage, double
 * accumulation), written for this tiny model on the host; the dense path is checked
 * against lm_model's training path (tests/unit/test_sas.c), the selector's gradient
 * against central finite differences of an independent double reference.
 *
 * Randomness (lib/rng.h): backbone initialisation as lm_model (SB_RNG_INIT, stream =
 * FNV-1a-64 of the tensor name), the selector's likewise; training windows
 * SB_RNG_DATA keyed by the seed, stream SB_SAS_STREAM_PRETRAIN or
 * SB_SAS_STREAM_SELECTOR (the published run's default_rng(seed) and
 * default_rng(seed + 17)). Our draws are our own: results compare with the published
 * ones as distributions over seeds, never seed by seed.
 */
#ifndef SB_SAS_H
#define SB_SAS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "err.h"
#include "json.h"
#include "lm_model.h"
#include "tensor.h"

#define SB_SAS_GATE_FLOOR 1e-12
#define SB_SAS_STREAM_PRETRAIN 0
#define SB_SAS_STREAM_SELECTOR 17

struct sb_sas_cfg {
	int T;     /* window length (inputs; a window is T+1 tokens): 64 */
	int block; /* selector block size: 8 (T must be a multiple) */
	int topk;  /* historical blocks kept: 2 */
	int dsel;  /* selector width: 8 */
};

void sb_sas_cfg_default(struct sb_sas_cfg *c);
/* The backbone configuration of PROTOCOL B with max_T = T. */
void sb_sas_backbone_cfg(struct sb_lm_cfg *lc, int T);

struct sb_sas_model {
	struct sb_lm_model *lm; /* the backbone; its parameters must be host memory (CPU backend) */
	struct sb_sas_cfg sc;
	float *sel;    /* selector_q.weight [dsel][d], then selector_k.weight [dsel][d] at sel_k */
	size_t n_sel;  /* the selector's parameters (2 dsel d) */
	size_t sel_k;  /* where selector_k.weight starts in sel: dsel d, or further with SB_ARENA_CHECK */
	size_t sel_len; /* sel's floats: n_sel, or with SB_ARENA_CHECK one zone of zero bytes more after
	                 * each matrix (redzone.h; `szones`), so that the selector's gradient and AdamW
	                 * moments, laid out the same, are checked after every selector step */
	struct sb_redzones *szones;
};

/* A model on backend be (the CPU backend: the loops here read lm->p on the host) with the
 * backbone configuration lc (NULL: sb_sas_backbone_cfg) — it must have one A layer. */
int sb_sas_model_new(struct sb_backend *be, const struct sb_sas_cfg *sc, const struct sb_lm_cfg *lc,
                     struct sb_sas_model **out, struct sb_err *err);
void sb_sas_model_free(struct sb_sas_model *m);
/* Every Linear/Embedding weight N(0, std^2) (std = the backbone's init_std), norms 1,
 * biases 0; selector likewise. */
int sb_sas_model_init(struct sb_sas_model *m, uint64_t seed, struct sb_err *err);
/* Backbone + selector parameters (23,392 for PROTOCOL B). */
size_t sb_sas_param_count(const struct sb_sas_model *m);
/* Checkpoint: the backbone's tensors plus selector_q.weight and selector_k.weight. */
int sb_sas_model_to_tensors(const struct sb_sas_model *m, struct sb_tensors *ts, struct sb_err *err);
int sb_sas_model_from_tensors(struct sb_sas_model *m, const struct sb_tensors *ts, struct sb_err *err);

enum sb_sas_mode { SB_SAS_DENSE = 0, SB_SAS_SPARSE = 1 };

/* Observations summed over forwards (reset by the caller). */
struct sb_sas_obs {
	double kept, causal; /* kept and causal (query, key) positions */
	double entropy_sum;  /* sum over queries with c0 >= 1 of the entropy of g (nats) */
	double entropy_n;    /* number of such queries */
};

struct sb_sas_ws;
int sb_sas_ws_new(const struct sb_sas_model *m, struct sb_sas_ws **out, struct sb_err *err);
void sb_sas_ws_free(struct sb_sas_ws *ws);
/* SB_ARENA_CHECK (redzone.h): with it set when the workspace was made, each of its buffers
 * (one allocation) is followed by a red zone; SB_EINTERNAL naming the buffer when one was
 * written (pretraining, selector training and evaluation check after every window), 0
 * otherwise or without the check. For tests: the address of zone i, NULL past the last. */
int sb_sas_ws_check(const struct sb_sas_ws *ws, const char *after, struct sb_err *err);
void *sb_sas_ws_zone(const struct sb_sas_ws *ws, int i);

/* Forward one window tokens[T+1] (inputs 0..T-1, targets 1..T): *loss = mean
 * cross-entropy over the T targets. obs (may be NULL) is added to. */
void sb_sas_forward(struct sb_sas_ws *ws, const struct sb_sas_model *m, const uint8_t *tokens, enum sb_sas_mode mode,
                    double *loss, struct sb_sas_obs *obs);
/* Backward of the last forward with dL/dloss = scale; gradients are ADDED to gback
 * (the backbone's n_floats, lm_model layout; NULL: not computed) and gsel (sel_len
 * floats laid out as sel; NULL: not computed; only in SB_SAS_SPARSE mode). */
void sb_sas_backward(struct sb_sas_ws *ws, const struct sb_sas_model *m, float scale, float *gback, float *gsel);
/* Of the last forward: logits [T][vocab]; the attention bias [T][T] (0 or log g kept,
 * -inf dropped); gates [T][T/block] (0 where not historical); selected flags likewise. */
const float *sb_sas_logits(const struct sb_sas_ws *ws);
const float *sb_sas_bias(const struct sb_sas_ws *ws);
const float *sb_sas_gates(const struct sb_sas_ws *ws);
const uint8_t *sb_sas_selected(const struct sb_sas_ws *ws);

/* AdamW as torch.optim.AdamW (decoupled decay on every parameter it updates:
 * p -= lr wd p, then the bias-corrected Adam step). */
struct sb_sas_adamw {
	float lr, b1, b2, eps, wd;
	int64_t t;
	float *m, *v;
	size_t n;
};
int sb_sas_adamw_init(struct sb_sas_adamw *o, size_t n, float lr, float wd, struct sb_err *err);
void sb_sas_adamw_free(struct sb_sas_adamw *o);
void sb_sas_adamw_step(struct sb_sas_adamw *o, float *p, const float *g);
/* L2 norm of g; when above clip (> 0), g is scaled to norm clip (torch.nn.utils.clip_grad_norm_). */
double sb_sas_clip(float *g, size_t n, double clip);

/* ---- the procedure of PROTOCOL B ---- */

struct sb_sas_proc {
	uint64_t seed;
	int pre_steps, pre_batch;       /* 30, 8 */
	float pre_lr, pre_wd, pre_clip; /* 8e-4, 0.01, 1.0 */
	int sel_steps, sel_batch;       /* 24, 8 */
	float sel_lr, sel_wd, sel_clip; /* 2e-3, 0.01, 1.0 */
	int eval_windows;               /* 12: starts 0, T, 2T, ... */
	size_t train_bytes, eval_bytes; /* 12000, 4096 */
};
void sb_sas_proc_default(struct sb_sas_proc *p);

/* Per-step callback: phase "pretrain" or "selector", step (1-based), loss before the
 * update, pre-clip gradient norm. */
typedef void (*sb_sas_step_fn)(void *arg, const char *phase, int step, double loss, double gnorm);

/* Window start of example i of a stream: uniform in [0, n - (T+1)]. */
size_t sb_sas_window_start(uint64_t seed, uint64_t stream, uint64_t i, size_t n, int T);
/* Dense pretraining of every backbone parameter (the selector is untouched). */
int sb_sas_pretrain(struct sb_sas_model *m, const uint8_t *text, size_t n, const struct sb_sas_proc *p,
                    sb_sas_step_fn fn, void *arg, struct sb_err *err);
/* Selector training on the frozen backbone; *gnorm_mean = mean pre-clip norm. */
int sb_sas_train_selector(struct sb_sas_model *m, const uint8_t *text, size_t n, const struct sb_sas_proc *p,
                          sb_sas_step_fn fn, void *arg, double *gnorm_mean, struct sb_err *err);

struct sb_sas_evalres {
	double loss, ppl; /* mean cross-entropy over the windows; exp(min(loss, 20)) */
	struct sb_sas_obs obs;
	int windows;
};
/* Windows starting at 0, T, 2T, ... (p->eval_windows of them), batch 1. */
int sb_sas_evaluate(const struct sb_sas_model *m, const uint8_t *text, size_t n, int windows, enum sb_sas_mode mode,
                    struct sb_sas_evalres *r, struct sb_err *err);

/* Retained fraction of the selector's mask at (T, block, topk) by counting (no data):
 * kept / causal pairs, as *kept and *causal. */
void sb_sas_budget(int T, int block, int topk, int64_t *kept, int64_t *causal);

#endif
