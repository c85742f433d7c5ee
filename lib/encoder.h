/* encoder.h — the compact encoder classifier of PROTOCOL A2 (SequenceClassifier),
 * training with exact gradients and evaluation, on any backend (lib/backend.h).
 *
 * Model (post-norm, ViT-style):
 *   tokens: images -> patches (p x p, (channel, row, col) order, row-major, cropped to a
 *           multiple of p) -> Linear(P, d); text -> Embedding(V, d, padding_idx=0)
 *   x = [CLS; tokens] + pos          (CLS and pos (L+1, d) ~ N(0, 0.02^2))
 *   per block: [local_hybrid: LocalMixer on the content tokens]
 *              x = LN1(x + Drop(Attn(x)));  x = LN2(x + Drop(FF(x)))
 *              Attn: fused Linear(d, 3d) with bias, heads of d/h, scores q k^T / sqrt(d/h),
 *                    the normaliser per (sample, head) with n_valid, Linear(d, d)
 *              FF: Linear(d, 4d) -> GELU (exact, erf) -> Dropout -> Linear(4d, d)
 *   logits = Linear(d, C)(x[:, 0]); no final norm. Dropout 0.1 in training only.
 *
 * Initialisation (PyTorch defaults, drawn from SB_RNG_INIT with stream =
 * FNV-1a-64 of the tensor name, element by element in row-major order, so that
 * every method and architecture built from one seed shares the tensors it has in
 * common, as in the study where creating a zero-initialised alpha consumes no draws):
 *   Linear weight and bias  U(-1/sqrt(fan_in), 1/sqrt(fan_in))   (kaiming_uniform(a=sqrt 5))
 *   LayerNorm               weight 1, bias 0
 *   Embedding               N(0, 1), padding row 0 zero
 *   depthwise Conv (groups=d) weight and bias U(-1/sqrt(k*k), 1/sqrt(k*k)) (k for Conv1d)
 *   CLS, pos                N(0, 0.02^2);  mixer scale 0.1;  HAE alpha_raw 0
 *
 * Parameters, gradients, the AdamW moments each live in one device buffer laid
 * out by the parameter table (sb_encoder_params); activations in one arena per
 * worker sized for a tile at creation: a training step allocates nothing.
 */
#ifndef SB_ENCODER_H
#define SB_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "attn_norm.h"
#include "backend.h"
#include "dataset.h"
#include "err.h"
#include "tensor.h"

enum sb_arch { SB_ARCH_PLAIN = 0, SB_ARCH_LOCAL_HYBRID = 1 };

struct sb_encoder_cfg {
	enum sb_modality modality;          /* SB_IMAGE or SB_TEXT */
	int channels, height, width, patch; /* images */
	int seq_len, vocab;                 /* text: L tokens per example, vocabulary V */
	int classes;
	int layers, d, heads;
	enum sb_arch arch;
	struct sb_norm norm; /* SB_NORM_ADAPTIVE adds alpha_raw [heads] per layer */
	float dropout;       /* 0.1 */
};

/* Tiers (PROTOCOL A2): compact (2,64,4), medium (4,128,4), deep (4,64,4), wide (2,128,4). */
int sb_encoder_tier(const char *name, int *layers, int *d, int *heads);
int sb_encoder_arch_parse(const char *name, enum sb_arch *out);
const char *sb_encoder_arch_name(enum sb_arch a);
/* Shapes and classes from a dataset, then tier, architecture and normaliser. */
int sb_encoder_cfg_from_dataset(struct sb_encoder_cfg *cfg, const struct sb_dataset *ds, const char *tier,
                                const char *arch, const struct sb_norm *nm, struct sb_err *err);

/* One parameter tensor of the table. */
enum sb_init { SB_INIT_UNIFORM, SB_INIT_NORMAL, SB_INIT_CONST, SB_INIT_EMBEDDING };
struct sb_param_info {
	char name[64];
	int ndim;
	int64_t shape[4];
	size_t offset, numel; /* in floats */
	enum sb_init init;
	float a; /* uniform bound, normal std, or constant */
};

struct sb_layer_ptrs {
	float *mix_lnw, *mix_lnb, *mix_cw, *mix_cb, *mix_scale; /* local_hybrid */
	float *qkv_w, *qkv_b, *out_w, *out_b, *alpha_raw;       /* alpha_raw: HAE */
	float *ln1_w, *ln1_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b, *ln2_w, *ln2_b;
};
#define SB_ENCODER_MAX_LAYERS 16
struct sb_model_ptrs {
	float *embed_w, *embed_b; /* images: [d, P], [d]; text: embed_w is [V, d] */
	float *cls, *pos;
	struct sb_layer_ptrs l[SB_ENCODER_MAX_LAYERS];
	float *head_w, *head_b;
};

/* The data a model reads, as device pointers (the CPU backend borrows the dataset's arrays). */
struct sb_encoder_data {
	int64_t n;
	const uint8_t *images; /* [n, C, H, W] */
	const int32_t *tokens; /* [n, L] */
	const int32_t *len;    /* [n] */
	const int32_t *labels; /* [n] */
	int owned;
};
int sb_encoder_data_open(struct sb_backend *be, const struct sb_dataset *ds, struct sb_encoder_data *out,
                         struct sb_err *err);
void sb_encoder_data_close(struct sb_backend *be, struct sb_encoder_data *d);

struct sb_encoder_arena; /* per-worker activations (encoder.c) */
struct sb_redzones;      /* redzone.h */

struct sb_encoder {
	struct sb_encoder_cfg cfg;
	int L, T, P, G, ff; /* content tokens, tokens with CLS, patch dim, mixer grid (0 = 1-D), 4d */
	struct sb_backend *be;
	int max_batch, tile, ntiles_max, nslots_max;
	struct sb_param_info *pinfo;
	int ntensors;
	size_t nparams, pstride;       /* floats; padded size of params, grads, m, v */
	size_t dense_n, dstride;       /* the part held by gradient slots (all but a text token table), slot stride */
	float *params, *slots, *m, *v; /* device */
	float *grads;
	struct sb_model_ptrs p, g;        /* pointers into params and into slot 0 */
	float *alpha;                     /* device [layers * heads] (HAE) */
	struct sb_step_state *state_dev;  /* device: the step's state, then idx_dev (one upload per step) */
	uint32_t *idx_dev;                /* device [max_batch] (inside state_dev's allocation) */
	struct sb_step_acc *acc_dev;      /* device: loss and clipping bookkeeping of sb_encoder_step */
	void *stage;                      /* host: the state and indices of the next step */
	float *demb_all;                  /* text: [max_batch * L * d] embedding gradients of the batch */
	int32_t *ids_all;                 /* text: [max_batch * L] */
	float *out_loss;                  /* device [max_batch] per-example losses */
	int32_t *out_pred;                /* device [max_batch] */
	int32_t *out_labels;              /* device [max_batch] */
	float *out_logits;                /* device [max_batch * classes] */
	struct sb_attn_stats *tile_stats; /* host [ntiles_max] */
	float *host_loss;                 /* host [max_batch] */
	int nworkers;
	struct sb_encoder_arena **arena; /* [nworkers] */
	int64_t adam_t;                  /* optimiser steps taken */
	/* recorded steps (CUDA graphs; DESIGN §6): on a backend with graph ops the second
	 * step of one shape is recorded and later steps replay the recording */
	int use_graphs;       /* 1 (default); 0: every step is issued op by op */
	void *graph;          /* the recording, NULL when none */
	int graph_warm;       /* a step with the current key ran op by op (buffers sized) */
	int graph_failed;     /* recording failed once: op by op from then on (graph_note says why) */
	char graph_note[200];
	unsigned char graph_key[128];
	int64_t steps_replayed, steps_issued; /* counts, for benchmarks and tests */
	float *keep_datt; /* device [layers * tile * T * d] or NULL: see sb_encoder_keep_grads */
	int arena_check;  /* SB_ARENA_CHECK: red zones after the arena's buffers, checked after each pass */
	struct sb_redzones *pzones; /* and between the parameter table's tensors (NULL without the check) */
	int pzones_dense;           /* how many of those are the dense tensors' (the gradient slots') */
	size_t *plain_off;          /* with pzones: each tensor's offset in the layout without them, */
	size_t plain_stride;        /* that layout's pstride, */
	float *plain;               /* and the gradients copied into it, for their norm (norm_src) */
};

int sb_encoder_new(const struct sb_encoder_cfg *cfg, struct sb_backend *be, int max_batch, struct sb_encoder **out,
                   struct sb_err *err);
void sb_encoder_free(struct sb_encoder *m);
/* With SB_ARENA_CHECK set (not "0") when the model was made, every activation buffer of a
 * worker's arena is followed by a red zone of a known pattern, and sb_encoder_step,
 * sb_encoder_forward_backward and sb_encoder_forward fail (SB_EINTERNAL, naming the buffer)
 * when a zone was written. For tests: the device address of zone i of a worker's arena
 * (in layout order), NULL past the last or without red zones. */
void *sb_encoder_arena_zone(const struct sb_encoder *m, int worker, int i);
/* The same check between the tensors of the parameter table: with SB_ARENA_CHECK each tensor
 * is followed by a zone of zero bytes (its rounding to 16 floats and 16 floats more) in the
 * parameters, the gradients, each gradient slot and both moments, checked at the same points.
 * For tests: the address of zone i (after the i-th tensor) in `buffer`, one of those (a slot:
 * the dense tensors' zones only), NULL past the last or without the check. */
void *sb_encoder_param_zone(const struct sb_encoder *m, const float *buffer, int i);
/* Change the normaliser (switching schedules); the parameter table must not change. */
int sb_encoder_set_norm(struct sb_encoder *m, const struct sb_norm *nm, struct sb_err *err);
/* Initialise the parameters from seed and zero the optimiser state. */
int sb_encoder_init(struct sb_encoder *m, uint64_t seed, struct sb_err *err);
size_t sb_encoder_param_count(const struct sb_encoder *m);
/* Pointers into any buffer laid out like the parameters. */
void sb_encoder_ptrs(const struct sb_encoder *m, float *base, struct sb_model_ptrs *out);

struct sb_step_opts {
	uint64_t seed; /* dropout key (the cell's seed) */
	int64_t step;  /* global step index (0-based): dropout stream */
	float dropout; /* 0 disables */
	int stats;     /* collect attention statistics */
	/* optimiser */
	float lr, weight_decay, clip, beta1, beta2, eps;
};
void sb_step_opts_default(struct sb_step_opts *o);

struct sb_step_result {
	double loss;      /* mean cross-entropy over the batch */
	double grad_norm; /* global L2 norm before clipping */
	int clipped;
	struct sb_attn_stats stats; /* when opts->stats */
};

/* Gradients of the mean loss over the batch idx[0..B) (host indices into data) into
 * m->grads; no update. A non-finite loss is reported in res->loss (not an error). */
int sb_encoder_forward_backward(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int B,
                                const struct sb_step_opts *o, struct sb_step_result *res, struct sb_err *err);
/* Global-norm clipping (torch clip_grad_norm_ semantics) and one AdamW step. */
int sb_encoder_update(struct sb_encoder *m, const struct sb_step_opts *o, struct sb_step_result *res,
                      struct sb_err *err);
/* forward_backward, then update when the loss is finite (sb_encoder_step, then a wait
 * for its numbers: one device round trip per step). */
int sb_encoder_train_step(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int B,
                          const struct sb_step_opts *o, struct sb_step_result *res, struct sb_err *err);

/* One training step (as sb_encoder_train_step) queued without reading anything back:
 * the batch-mean loss, its finiteness and the clipping stay in the model's device-side
 * accumulator (struct sb_step_acc), read by sb_encoder_acc_read (once per epoch is
 * enough). An update is skipped for a step whose loss is not finite; the accumulator
 * keeps the first such step's index (o->step). With o->stats the step also collects
 * attention statistics into *stats (and then waits for the device). On a backend with
 * graph ops, steps of one shape (batch size, normaliser, options) are recorded once
 * and replayed; results are the same bits either way. */
int sb_encoder_step(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int B,
                    const struct sb_step_opts *o, struct sb_attn_stats *stats, struct sb_err *err);
/* Wait for the queued steps, copy the accumulator to *out; reset: then clear it. */
int sb_encoder_acc_read(struct sb_encoder *m, struct sb_step_acc *out, int reset, struct sb_err *err);
/* Drop the recorded step (the next steps record again). */
void sb_encoder_graph_reset(struct sb_encoder *m);

/* Testing: the saved attention scores S and probabilities P [B, NH, T, T] of layer l of
 * the last pass, copied to host arrays (NULL to skip), when that pass was one tile (the
 * whole batch in worker 0's activations); returns the number of samples, or -code. */
int sb_encoder_saved_attention(struct sb_encoder *m, int layer, int B, float *S, float *P, struct sb_err *err);
/* Probes (lib/probe_feat.h): with on, the backward of sb_encoder_forward_backward keeps each
 * layer's gradient wrt the attention output (before the output projection) of a one-tile
 * pass; sb_encoder_saved_grads copies layer l's qkv [B, T, 3d] and that gradient [B, T, d]
 * of the last such pass to host arrays (NULL to skip). Same conventions as saved_attention. */
int sb_encoder_keep_grads(struct sb_encoder *m, int on, struct sb_err *err);
int sb_encoder_saved_grads(struct sb_encoder *m, int layer, int B, float *qkv, float *datt, struct sb_err *err);

/* Forward pass in evaluation mode (no dropout) of idx[0..B): per-example logits
 * [B, classes], losses and predictions to host arrays (each may be NULL); attention
 * statistics added into *stats when not NULL. */
int sb_encoder_forward(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int B,
                       float *logits, float *losses, int32_t *pred, struct sb_attn_stats *stats, struct sb_err *err);

/* Evaluation of examples idx[0..n) in batches of `batch` (PROTOCOL A4 evaluate):
 * accuracy, macro-F1 over all classes (0 for an undefined class F1), loss = unweighted
 * mean of per-batch mean cross-entropy, attention density and entropy (per batch, then
 * unweighted over batches), alpha mean and std (n-1) over HAE heads (NaN otherwise).
 * correct (optional) receives one bit per example in idx order (bit i of byte i/8, LSB first). */
struct sb_eval_result {
	int64_t n, correct;
	double accuracy, macro_f1, loss;
	double attention_density, attention_entropy;
	double alpha_mean, alpha_std;
};
int sb_encoder_evaluate(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int64_t n,
                        int batch, struct sb_eval_result *res, uint8_t *correct, struct sb_err *err);

/* alpha of every (layer, head) for HAE (host, [layers*heads]); returns the count (0 for other
 * methods), or minus the error code when the download fails (err says why). */
int sb_encoder_alphas(struct sb_encoder *m, float *out, struct sb_err *err);

/* Parameters (and with_optim: "adam_m." / "adam_v." tensors) as named tensors,
 * PyTorch layouts. */
int sb_encoder_to_tensors(struct sb_encoder *m, struct sb_tensors *ts, int with_optim, struct sb_err *err);
/* Load parameters (and with_optim: the moments) from named tensors; shapes must match. */
int sb_encoder_from_tensors(struct sb_encoder *m, const struct sb_tensors *ts, int with_optim, struct sb_err *err);
/* Read a checkpoint file's parameters into m (verifies PATH.sha256 when present). */
int sb_encoder_load_checkpoint(struct sb_encoder *m, const char *path, struct sb_err *err);

#endif
