/* backend.h — the compute engine's device interface (DESIGN §6).
 *
 * The model code (lib/encoder.c) is one code path written against these ops;
 * a backend (CPU here, CUDA later) implements them. Conventions (llm.c style):
 *   - outputs first, inputs next, sizes last;
 *   - every pointer argument is a DEVICE pointer of the backend (host memory for
 *     the CPU backend), allocated with sb_be_alloc; nothing host-side touches
 *     elements inside an op;
 *   - activations are row-major [rows, width]; a sequence tensor is [B, T, C]
 *     with rows = B*T; Linear weights are PyTorch's [out, in];
 *   - gradients of parameters ACCUMULATE (+=) into their buffers; gradients of
 *     activations overwrite unless an op says otherwise;
 *   - an op that can fail (bad data such as n_valid < 1) returns an sb_code and
 *     fills err; the others cannot fail.
 *
 * Parallelism and determinism. A training step is cut into fixed tiles of
 * `be->tile` samples (whole batch when 0); tiles are grouped into at most
 * `be->slots` gradient slots, each of which accumulates its tiles in order into
 * its own gradient buffer; slots are then summed in slot order. sb_be_run runs
 * independent tasks (the slots) on the backend's workers. Because the
 * decomposition depends on the backend's tile and slot constants and never on
 * the number of threads, results are bit-identical for any thread count (and a
 * cell gives the same bits alone or beside other cells in one process).
 *
 * Dropout. Element i of a dropout site's batch tensor is kept when
 * sb_rng_u32_to_unit_f(sb_rng_word_at(seed, SB_RNG_DROPOUT, stream, i)) >= p,
 * and scaled by 1/(1-p); i is the flat index in the whole batch's [B, T, width]
 * tensor (ops take the tile's offset), so every backend draws the same masks.
 */
#ifndef SB_BACKEND_H
#define SB_BACKEND_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "attn_norm.h"
#include "err.h"

struct sb_backend;
struct sb_scratch_tail; /* SB_ARENA_CHECK: a scratch buffer's red zone (redzone.h) */
struct sb_ctx; /* one worker's execution context (a CPU thread, a CUDA stream) with its scratch */

/* Dropout masks are one byte per element: 1 = kept. */
struct sb_dropout {
	float p;         /* drop probability; 0 disables (no mask is read) */
	uint64_t seed;   /* the cell's seed */
	uint64_t stream; /* SB_DROPOUT_STREAM(step, site) */
	uint64_t offset; /* flat index of the first element of this call in the batch tensor */
	/* optional (NULL: unused): a device int64 holding the step, read when the op
	 * executes; the stream used is then SB_DROPOUT_STREAM(*step, stream & 0xff). Lets a
	 * recorded step (a CUDA graph) be replayed for every step. */
	const int64_t *step;
};
#define SB_DROPOUT_STREAM(step, site) (((uint64_t)(step) << 8) | (uint64_t)(site))
/* the stream a dropout site uses (host code; device code does the same with its own read) */
static inline uint64_t sb_dropout_stream(const struct sb_dropout *d)
{
	return d->step ? SB_DROPOUT_STREAM(*d->step, d->stream & 0xff) : d->stream;
}

/* Device-resident state of a training step (the "step without host round trips",
 * ops loss_accum, clip_coef, adamw_dev below). All three structs live in device
 * memory; the host writes sb_step_state with upload before a step and reads
 * sb_step_acc with download when it wants the numbers (once per epoch). */
struct sb_adamw_k { /* torch.optim.AdamW's per-step constants, as adamw computes them */
	float decay, b1, omb1, b2, omb2, step_size, bc2_sqrt, eps;
};
struct sb_step_state {
	int64_t step;        /* global step index (dropout streams; the acc's first_bad) */
	int64_t t;           /* AdamW step (1-based) */
	struct sb_adamw_k k; /* this step's AdamW constants (sb_adamw_consts) */
	int64_t pad;         /* 64 bytes */
};
struct sb_step_acc {
	double loss_sum;   /* sum over steps of the batch-mean loss (finite ones only) */
	double last_loss;  /* the latest step's batch-mean loss */
	double bad_loss;   /* the first non-finite batch-mean loss */
	double grad_norm;  /* the latest step's global gradient norm (before clipping) */
	int64_t steps;     /* finite steps summed in loss_sum */
	int64_t first_bad; /* step of the first non-finite loss, -1 when none */
	float coef;        /* the latest step's clip coefficient (applied when clipped) */
	int32_t clipped;   /* 1 when the latest step was clipped */
	int64_t pad;       /* 64 bytes */
};
/* AdamW constants of step t (1-based), in double then rounded, as adamw does */
static inline void sb_adamw_consts(struct sb_adamw_k *k, float lr, float b1, float b2, float eps, float wd,
                                   int64_t t)
{
	double bc1 = 1.0 - pow((double)b1, (double)t), bc2 = 1.0 - pow((double)b2, (double)t);
	k->decay = (float)(1.0 - (double)lr * (double)wd);
	k->b1 = b1;
	k->omb1 = (float)(1.0 - (double)b1);
	k->b2 = b2;
	k->omb2 = (float)(1.0 - (double)b2);
	k->step_size = (float)((double)lr / bc1);
	k->bc2_sqrt = (float)sqrt(bc2);
	k->eps = eps;
}
/* an accumulator with nothing summed */
static inline void sb_step_acc_reset(struct sb_step_acc *a)
{
	memset(a, 0, sizeof *a);
	a->first_bad = -1;
	a->coef = 1.0f;
}

/* Attention statistics accumulators (PROTOCOL A3), summed in a fixed order. */
struct sb_attn_stats {
	double nonzero;     /* probabilities > 1e-7 among valid keys */
	double valid_total; /* number of (row, valid key) pairs */
	double entropy_sum; /* sum over rows of -sum p log max(p, 1e-12) */
	double rows;        /* number of rows */
};

typedef int (*sb_task_fn)(struct sb_ctx *ctx, int worker, int task, void *arg, struct sb_err *err);

struct sb_backend_ops {
	const char *name;
	void (*destroy)(struct sb_backend *be);
	/* memory: zeroed, aligned to 64 bytes; NULL on failure */
	void *(*alloc)(struct sb_backend *be, size_t bytes);
	void (*free)(struct sb_backend *be, void *p);
	int (*upload)(struct sb_backend *be, void *dst, const void *src, size_t bytes, struct sb_err *err);
	int (*download)(struct sb_backend *be, void *dst, const void *src, size_t bytes, struct sb_err *err);
	/* the main context (outside tasks); ops called with it may use every worker */
	struct sb_ctx *(*main_ctx)(struct sb_backend *be);
	/* run fn(ctx, worker, task, arg, err) for task = 0..ntasks-1 on the workers (worker
	 * = 0..threads-1 identifies the context's worker, for per-worker buffers); a task
	 * fails by returning non-zero with its err filled; the error of the lowest failing
	 * task is returned (the others run to completion) */
	int (*run)(struct sb_backend *be, int ntasks, sb_task_fn fn, void *arg, struct sb_err *err);
	void (*zero)(struct sb_ctx *ctx, void *p, size_t bytes);
	void (*copy)(struct sb_ctx *ctx, void *dst, const void *src, size_t bytes); /* device to device */

	/* ---- embedding ---- */
	/* out[B, L, Ch*p*p] = patches of images u8[.., Ch, H, W] selected by idx[B],
	 * /255, cropped to a multiple of p; patches row-major, each (channel, row, col) */
	void (*patchify)(struct sb_ctx *ctx, float *out, const uint8_t *images, const uint32_t *idx, int B, int Ch,
	                 int H, int W, int p);
	/* ids[B, L] = tokens[idx[b]], nvalid[B] = 1 + len[idx[b]] (CLS counts) */
	void (*gather_tokens)(struct sb_ctx *ctx, int32_t *ids, int32_t *nvalid, const int32_t *tokens,
	                      const int32_t *len, const uint32_t *idx, int B, int L);
	/* out[b] = src[idx[b]] (labels) */
	void (*gather_i32)(struct sb_ctx *ctx, int32_t *out, const int32_t *src, const uint32_t *idx, int B);
	/* out[n, d] = table[ids[i]] */
	void (*embedding_forward)(struct sb_ctx *ctx, float *out, const int32_t *ids, const float *table, int n, int d);
	/* dtable[ids[i]] += dout[i] for ids[i] != 0 (padding row never updated), in index order */
	void (*embedding_backward)(struct sb_ctx *ctx, float *dtable, const float *dout, const int32_t *ids, int n,
	                           int d);
	/* x[b, 0] = cls + pos[0]; x[b, t] = emb[b, t-1] + pos[t] (t = 1..T-1) */
	void (*assemble_forward)(struct sb_ctx *ctx, float *x, const float *emb, const float *cls, const float *pos,
	                         int B, int T, int d);
	/* demb = dx[:, 1:]; dcls += sum_b dx[b, 0]; dpos += sum_b dx[b] */
	void (*assemble_backward)(struct sb_ctx *ctx, float *demb, float *dcls, float *dpos, const float *dx, int B,
	                          int T, int d);

	/* ---- dense ---- */
	/* out[M, N] = inp[M, K] w[N, K]^T + bias[N] (bias may be NULL) */
	void (*matmul_forward)(struct sb_ctx *ctx, float *out, const float *inp, const float *w, const float *bias,
	                       int M, int K, int N);
	/* dinp[M, K] (= or += when accumulate; NULL to skip) = dout w; dw[N, K] += dout^T inp;
	 * dbias[N] += column sums of dout (NULL to skip) */
	void (*matmul_backward)(struct sb_ctx *ctx, float *dinp, float *dw, float *dbias, const float *dout,
	                        const float *inp, const float *w, int M, int K, int N, int accumulate);
	/* out[b, :] = x[b, 0, :] (the CLS rows) */
	void (*gather_cls)(struct sb_ctx *ctx, float *out, const float *x, int B, int T, int d);
	/* dx[b, 0, :] = dcls[b, :], other rows 0 */
	void (*scatter_cls)(struct sb_ctx *ctx, float *dx, const float *dcls, int B, int T, int d);

	/* ---- normalisation and activations ---- */
	/* r = x + drop(y) (y may be NULL: r = x); out = LN(r) with w, b, eps 1e-5;
	 * saves r, mean, rstd and the dropout mask (when drop->p > 0) */
	void (*residual_ln_forward)(struct sb_ctx *ctx, float *out, float *r, float *mean, float *rstd, uint8_t *mask,
	                            const float *x, const float *y, const float *w, const float *b,
	                            const struct sb_dropout *drop, int M, int d);
	/* dr = LN backward of dout (written to dx); dy = drop backward of dr (NULL to skip);
	 * dw, db += */
	void (*residual_ln_backward)(struct sb_ctx *ctx, float *dx, float *dy, float *dw, float *db, const float *dout,
	                             const float *r, const float *mean, const float *rstd, const uint8_t *mask,
	                             const float *w, float p, int M, int d);
	/* out = drop(gelu(inp)), gelu exact (erf); saves the mask; dgelu = gelu'(inp) for the
	 * backward when not NULL (it may be inp itself: a training pass keeps gelu' in place of
	 * the pre-activation, which nothing else reads) */
	void (*gelu_forward)(struct sb_ctx *ctx, float *out, uint8_t *mask, float *dgelu, const float *inp,
	                     const struct sb_dropout *drop, size_t n);
	/* dinp = dgelu * drop backward (dout), dgelu from gelu_forward; dinp may be dout */
	void (*gelu_backward)(struct sb_ctx *ctx, float *dinp, const float *dout, const float *dgelu,
	                      const uint8_t *mask, float p, size_t n);

	/* ---- attention ---- */
	/* qkv[B, T, 3d] (q | k | v, head h at columns h*hd..), scores S = q k^T / sqrt(hd),
	 * P = normaliser(S) per (sample, head) block with n_valid = nvalid[b] (all T when
	 * nvalid is NULL) and alpha = alpha[h] (when alpha is not NULL, else nm->alpha);
	 * out[B, T, d] = P v. Saves S, P [B, NH, T, T] and aux [B, NH, T, SB_NORM_AUX]. */
	int (*attention_forward)(struct sb_ctx *ctx, float *out, float *S, float *P, float *aux, const float *qkv,
	                         const int32_t *nvalid, const float *alpha, const struct sb_norm *nm, int B, int T,
	                         int d, int NH, struct sb_err *err);
	/* dqkv = gradient of out wrt qkv; dalpha[h] += d loss / d alpha_h (NULL to skip) */
	void (*attention_backward)(struct sb_ctx *ctx, float *dqkv, float *dalpha, const float *dout, const float *qkv,
	                           const float *S, const float *P, const float *aux, const int32_t *nvalid,
	                           const float *alpha, const struct sb_norm *nm, int B, int T, int d, int NH);
	/* statistics of P (evaluation) accumulated into st in block order */
	void (*attention_stats)(struct sb_ctx *ctx, struct sb_attn_stats *st, const float *P, const int32_t *nvalid,
	                        int B, int NH, int T);
	/* alpha[i] = 1.05 + 0.90 sigmoid(raw[i]) */
	void (*hae_alpha)(struct sb_ctx *ctx, float *alpha, const float *raw, int n);
	/* draw[i] += dalpha[i] * 0.90 sigmoid'(raw[i]) */
	void (*hae_alpha_backward)(struct sb_ctx *ctx, float *draw, const float *dalpha, const float *raw, int n);

	/* ---- local mixer (local_hybrid, PROTOCOL A2) on the content tokens x[:, 1:] ----
	 * y = LN(x_c) * valid; z = depthwise conv(y) + cb (grid G x G with k=3 pad 1 when
	 * G > 0, else 1-D k=3 pad 1 along the L tokens); x_c' = (x_c + scale * gelu(z)) * valid.
	 * valid[b, t] = t < nvalid[b] - 1 (all when nvalid is NULL). out may not alias x.
	 * Saves y, z [B, L, d], mean, rstd [B, L]. cw is PyTorch's [d, 1, k(, k)] */
	void (*localmix_forward)(struct sb_ctx *ctx, float *out, float *y, float *z, float *mean, float *rstd,
	                         const float *x, const int32_t *nvalid, const float *lnw, const float *lnb,
	                         const float *cw, const float *cb, const float *scale, int B, int T, int d, int G);
	/* dx = gradient wrt x (all rows); parameter gradients += */
	void (*localmix_backward)(struct sb_ctx *ctx, float *dx, float *dlnw, float *dlnb, float *dcw, float *dcb,
	                          float *dscale, const float *dout, const float *x, const float *y, const float *z,
	                          const float *mean, const float *rstd, const int32_t *nvalid, const float *lnw,
	                          const float *cw, const float *scale, int B, int T, int d, int G);

	/* ---- loss ---- */
	/* losses[b] = -log softmax(logits[b])[labels[b]]; pred[b] = argmax as sb_argmax (lowest
	 * index on ties, a NaN above every number; NULL to skip); dlogits (NULL to skip) =
	 * (softmax - onehot) * dscale */
	void (*cross_entropy)(struct sb_ctx *ctx, float *losses, int32_t *pred, float *dlogits, const float *logits,
	                      const int32_t *labels, int B, int C, float dscale);

	/* ---- optimiser (main context; may use every worker) ---- */
	/* dst[i] = sum over s (in order) of src[s * stride + i]; when dst aliases src
	 * (slot 0) it is updated in place */
	void (*reduce_slots)(struct sb_ctx *ctx, float *dst, const float *src, int nslots, size_t stride, size_t n);
	/* sum of squares in double, in a fixed order */
	double (*sumsq)(struct sb_ctx *ctx, const float *x, size_t n);
	void (*scale)(struct sb_ctx *ctx, float *x, float c, size_t n);

	/* ---- the step without host round trips (optional: all NULL or all set) ----
	 * What the encoder's step needs so that the host reads nothing back inside a step:
	 * the loss and the clipping decision stay on the device (struct sb_step_acc). The
	 * arithmetic is that of the ops above: a backend gives the same bits either way. */
	/* acc->last_loss = (sum of losses[0..B) in order, in double) / B; when finite
	 * acc->loss_sum += it and acc->steps++; else, for the first such step,
	 * acc->first_bad = state->step and acc->bad_loss = it */
	void (*loss_accum)(struct sb_ctx *ctx, struct sb_step_acc *acc, const float *losses, int B,
	                   const struct sb_step_state *state);
	/* acc->grad_norm = sqrt(sumsq(g, n)); torch's clip_grad_norm_: coef = max_norm /
	 * (norm + 1e-6) in double, clipped = max_norm > 0 and coef < 1, acc->coef = (float)coef */
	void (*clip_coef)(struct sb_ctx *ctx, struct sb_step_acc *acc, const float *g, size_t n, float max_norm);
	/* adamw with the constants state->k, on g[i] * acc->coef (rounded to float, as scale)
	 * when acc->clipped, else g[i]; nothing is updated when acc->last_loss is not finite */
	void (*adamw_dev)(struct sb_ctx *ctx, float *p, float *m, float *v, const float *g, size_t n,
	                  const struct sb_step_acc *acc, const struct sb_step_state *state);
	/* Recording a step for replay (optional; CUDA graphs). Between graph_begin and
	 * graph_end the ops of the main context are recorded, not run; graph_launch runs
	 * the recording (which reads the device memory it names at replay time). A failed
	 * recording returns an error and leaves the backend usable. */
	int (*graph_begin)(struct sb_backend *be, struct sb_err *err);
	int (*graph_end)(struct sb_backend *be, void **graph, struct sb_err *err);
	int (*graph_launch)(struct sb_backend *be, void *graph, struct sb_err *err);
	void (*graph_free)(struct sb_backend *be, void *graph);

	/* torch.optim.AdamW step t (1-based) on n parameters:
	 * p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
	 * p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps) */
	void (*adamw)(struct sb_ctx *ctx, float *p, float *m, float *v, const float *g, size_t n, float lr, float b1,
	              float b2, float eps, float wd, int64_t t);

	/* SB_ARENA_CHECK (optional): the backend's scratch tail i (redzone.h), for
	 * sb_be_tails_check between ops: 1 with *t, owner named and, when t->now.at, the last
	 * request's zone read back into got (SB_SCRATCH_TAIL bytes); 0 past the last; -1 when
	 * the zone could not be read back */
	int (*scratch_tail)(struct sb_backend *be, int i, const struct sb_scratch_tail **t, unsigned char *got,
	                    char *owner, size_t owner_n);
};

struct sb_be_tails; /* SB_ARENA_CHECK: a red zone after every allocation (redzone.h) */

struct sb_backend {
	const struct sb_backend_ops *ops;
	char name[16];    /* "cpu", "cuda" */
	char device[128]; /* human-readable device description */
	int threads;      /* workers */
	int tile;         /* samples per tile in a step (0 = whole batch) */
	int slots;        /* maximum number of gradient slots */
	void *impl;
	struct sb_be_tails *tails; /* NULL unless sb_backend_open saw SB_ARENA_CHECK */
};

/* A device name as lib/device_name.h parses it, and SB_EUSAGE for a CUDA name in a build without the CUDA backend: what
 * the programs check while reading their options, before any work or guarded read. */
int sb_device_check(const char *device, struct sb_err *err);
/* Open a backend: device "cpu" (threads: 0 = all cores) or "cuda[:N]" when built with CUDA. */
int sb_backend_open(const char *device, int threads, struct sb_backend **out, struct sb_err *err);
void sb_backend_close(struct sb_backend *be);

/* The CPU backend (lib/backend_cpu.c). */
int sb_backend_cpu_open(int threads, struct sb_backend **out, struct sb_err *err);
/* The CUDA backend (lib/cuda/, CUDA=1 builds): a weak reference, NULL when not linked. */
int sb_backend_cuda_open(const char *device, int threads, struct sb_backend **out, struct sb_err *err)
    __attribute__((weak));
/* Bytes currently allocated through the CPU backend, and their peak. */
size_t sb_cpu_bytes_peak(struct sb_backend *be);

/* ---- LM track ops (decoder of PROTOCOL B/C) --------------------------------
 * Added by the LM track, additively: a second op table, so that the encoder's
 * table above is untouched. The CPU implementation is lib/backend_cpu_lm.c;
 * sb_backend_lm() returns NULL for a backend without these ops (the CUDA
 * backend until they are ported). Conventions as above (outputs first, sizes
 * last, parameter gradients accumulate). Shapes: a sequence tensor is
 * [B, T, width]; attention heads are column blocks of width hd (q: NH heads,
 * k/v: NKV heads, head h reads kv head h / (NH / NKV)).
 *
 * The "rows" ops are the evaluation path (no backward): they process rows
 * t0..t0+n-1 of ONE sequence against a cache of earlier rows, and are
 * row-deterministic: row t's result is the same bits whatever n (prefill of a
 * whole prompt or one decoding step), which makes KV-cached decoding exact
 * against the full-sequence forward of the same path. */
struct sb_lm_mask;     /* lib/lm_mask.h */
struct sb_lm_attn_obs; /* lib/lm_mask.h */

struct sb_backend_lm_ops {
	/* dtable[ids[i]] += dout[i] for every i (no padding id: byte 0 is a token) */
	void (*embedding_backward)(struct sb_ctx *ctx, float *dtable, const float *dout, const int32_t *ids, int n,
				   int d);
	/* x[b, t] += pos[t0 + t];  dpos[t0 + t] += sum_b dx[b, t] */
	void (*pos_forward)(struct sb_ctx *ctx, float *x, const float *pos, int B, int T, int t0, int d);
	void (*pos_backward)(struct sb_ctx *ctx, float *dpos, const float *dx, int B, int T, int t0, int d);
	/* out = LayerNorm(x) * w + b (b may be NULL), or RMSNorm (rms = 1: x * rstd * w,
	 * mean unused and may be NULL); saves mean, rstd */
	void (*norm_forward)(struct sb_ctx *ctx, float *out, float *mean, float *rstd, const float *x, const float *w,
			     const float *b, int M, int d, float eps, int rms);
	/* dx += d(out)/dx^T dout; dw += ; db += (NULL to skip) */
	void (*norm_backward)(struct sb_ctx *ctx, float *dx, float *dw, float *db, const float *dout, const float *x,
			      const float *mean, const float *rstd, const float *w, int M, int d, int rms);
	/* x += y */
	void (*add)(struct sb_ctx *ctx, float *x, const float *y, size_t n);
	/* wp = w[N, K] in the layout matmul_rows reads (the backend's; as many floats as w) */
	void (*pack_rows)(struct sb_ctx *ctx, float *wp, const float *w, int N, int K);
	/* out[M, N] = inp[M, K] w[N, K]^T + bias[N] (bias may be NULL) from wp = pack_rows(w),
	 * row-deterministic */
	void (*matmul_rows)(struct sb_ctx *ctx, float *out, const float *inp, const float *wp, const float *bias, int M,
			    int K, int N);
	/* the same from bfloat16 weights (w[N, K] bf16 packed by pack_rows_bf16; half the
	 * memory): the results of matmul_rows on the widened weights, bit for bit */
	void (*pack_rows_bf16)(struct sb_ctx *ctx, uint16_t *wp, const uint16_t *w, int N, int K);
	void (*matmul_rows_bf16)(struct sb_ctx *ctx, float *out, const float *inp, const uint16_t *wp,
				 const float *bias, int M, int K, int N);
	/* SwiGLU: out[M, F] = silu(gu[:, 0:F]) * gu[:, F:2F]; dgu from dout */
	void (*swiglu_forward)(struct sb_ctx *ctx, float *out, const float *gu, int M, int F);
	void (*swiglu_backward)(struct sb_ctx *ctx, float *dgu, const float *dout, const float *gu, int M, int F);
	/* GeGLU (Gemma's MLP): out[M, F] = gelu_tanh(gu[:, 0:F]) * gu[:, F:2F],
	 * gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (torch's approximate="tanh");
	 * backward overwrites dgu[M, 2F] */
	void (*geglu_forward)(struct sb_ctx *ctx, float *out, const float *gu, int M, int F);
	void (*geglu_backward)(struct sb_ctx *ctx, float *dgu, const float *dout, const float *gu, int M, int F);
	/* rotary position embedding in place on x[B, T, nh*hd] at positions t0 + t, on the
	 * first rd (even, <= hd; rd = hd: all) dimensions of each head: rotate-half pairs
	 * (i, i + rd/2), angle (t0+t) freq[i], freq[rd/2] in double (the model's frequencies,
	 * lib/lm_model.h sb_lm_rope_freqs); the other hd - rd pass unchanged (a partial rotary
	 * factor); inverse = 1 rotates back (the backward of a gradient) */
	void (*rope)(struct sb_ctx *ctx, float *x, int B, int T, int t0, int nh, int hd, int rd, const double *freq,
		     int inverse);
	/* causal softmax attention, training path: out[B, T, NH*hd], saves P[B, NH, T, T]
	 * (scores q.k / sqrt(hd); softcap > 0: each score s becomes softcap tanh(s / softcap)
	 * first, Gemma 2's; 0 none); backward writes dq, dk, dv (overwrite) */
	void (*attn_forward)(struct sb_ctx *ctx, float *out, float *P, const float *q, const float *k, const float *v,
			     int B, int T, int NH, int NKV, int hd, float softcap);
	void (*attn_backward)(struct sb_ctx *ctx, float *dq, float *dk, float *dv, const float *dout, const float *P,
			      const float *q, const float *k, const float *v, int B, int T, int NH, int NKV, int hd,
			      float softcap);
	/* sliding-window attention, training path (S layers): as attn_forward with query t
	 * attending to keys t - window + 1 .. t only (P zero elsewhere); its backward is
	 * attn_backward's (P's zeros carry the window). Separate entries, so that a wrapper of
	 * attn_forward / attn_backward (SAS's, lib/sas_lm.c) sees the A layers alone. */
	void (*swa_forward)(struct sb_ctx *ctx, float *out, float *P, const float *q, const float *k, const float *v,
			    int B, int T, int NH, int NKV, int hd, int window, float softcap);
	void (*swa_backward)(struct sb_ctx *ctx, float *dq, float *dk, float *dv, const float *dout, const float *P,
			     const float *q, const float *k, const float *v, int B, int T, int NH, int NKV, int hd,
			     float softcap);
	/* evaluation path: query rows t0..t0+n-1 (q[n, NH*hd]) of one sequence against keys
	 * 0..t (k, v [>= t0+n, NKV*hd], the KV cache) under a mask (lib/lm_mask.h; NULL =
	 * dense), selection per head; acc[NH, Tcap] is the accumulated attention of the
	 * heavy-hitter mask (updated; NULL otherwise); obs (may be NULL) counts kept pairs,
	 * causal pairs, blocks touched, and can record the selections; softcap > 0 maps every
	 * score s to softcap tanh(s / softcap) before the selection and softmax (Gemma 2's; 0:
	 * none) */
	int (*attn_rows)(struct sb_ctx *ctx, float *out, const float *q, const float *k, const float *v, float *acc,
			 int Tcap, int t0, int n, int NH, int NKV, int hd, float softcap, const struct sb_lm_mask *mask,
			 int layer, struct sb_lm_attn_obs *obs, struct sb_err *err);
	/* gated causal depthwise convolution (short conv): bch[B, T, 3d] = (b | c | h),
	 * u = b * h, z = bias + sum_i w[ch, i] u[t-K+1+i] (zero before the start),
	 * y = c * z; saves z. w is PyTorch's Conv1d weight [d, 1, K]. */
	void (*conv_forward)(struct sb_ctx *ctx, float *y, float *z, const float *bch, const float *w, const float *bias,
			     int B, int T, int d, int K);
	void (*conv_backward)(struct sb_ctx *ctx, float *dbch, float *dw, float *dbias, const float *dy,
			      const float *bch, const float *z, const float *w, int B, int T, int d, int K);
	/* evaluation path: n rows of one sequence; hist[K-1, d] holds u of the K-1
	 * previous rows (oldest first, zeros at the start) and is updated */
	void (*conv_rows)(struct sb_ctx *ctx, float *y, const float *bch, float *hist, const float *w, const float *bias,
			  int n, int d, int K);
	/* plain causal depthwise convolution: y = bias + sum_i w[ch, i] x[t-K+1+i] (zero
	 * before the start); backward writes dx (overwrite), dw and dbias += */
	void (*dwconv_forward)(struct sb_ctx *ctx, float *y, const float *x, const float *w, const float *bias, int B,
			       int T, int d, int K);
	void (*dwconv_backward)(struct sb_ctx *ctx, float *dx, float *dw, float *dbias, const float *dy, const float *x,
				const float *w, int B, int T, int d, int K);
	/* evaluation path: n rows, hist[K-1, d] = x of the K-1 previous rows (updated) */
	void (*dwconv_rows)(struct sb_ctx *ctx, float *y, const float *x, float *hist, const float *w, const float *bias,
			    int n, int d, int K);
	/* causal linear attention with phi(x) = elu(x) + 1 per head of width hd:
	 * out_t = sum_{j<=t} (phi(q_t).phi(k_j)) v_j / (sum_{j<=t} phi(q_t).phi(k_j) + 1e-6);
	 * training path (quadratic form), saves den[B, NH, T]; backward overwrites dq, dk, dv */
	void (*linattn_forward)(struct sb_ctx *ctx, float *out, float *den, const float *q, const float *k,
				const float *v, int B, int T, int NH, int hd);
	void (*linattn_backward)(struct sb_ctx *ctx, float *dq, float *dk, float *dv, const float *dout,
				 const float *out, const float *den, const float *q, const float *k, const float *v,
				 int B, int T, int NH, int hd);
	/* evaluation path (recurrent form): state S[NH, hd, hd] = sum phi(k) v^T and
	 * z[NH, hd] = sum phi(k), updated */
	void (*linattn_rows)(struct sb_ctx *ctx, float *out, const float *q, const float *k, const float *v, float *S,
			     float *z, int n, int NH, int hd);
	/* Mamba2 mixer, evaluation path only (lib/lm_model.h, kind M): n rows of one
	 * sequence, proj[n, I + CD + H] = (z | xBC | dt) with I = H P, CD = I + 2 G N;
	 * xBC = silu(conv_K(xBC) + cb) (cw [CD, 1, K], cb may be NULL), hist[K-1, CD] the
	 * previous xBC rows (updated); per head dt = softplus(dt + dt_bias), S[H, P, N] =
	 * exp(-dt exp(A_log)) S + dt x B^T (updated), y[n, I] = (S C + D x) * silu(z), or without
	 * the gate when gate is 0 (Falcon-H1's norm before the gate) */
	void (*mamba2_rows)(struct sb_ctx *ctx, float *y, const float *proj, float *hist, float *S, const float *cw,
			    const float *cb, const float *dt_bias, const float *A_log, const float *D, int n, int H,
			    int P, int N, int G, int K, int gate);
	/* Mamba (1)'s selective scan, evaluation path only (lib/lm_model.h, kind V): n rows of one
	 * sequence, u[n, I] (the convolution's output after SiLU), dt[n, I] (dt_proj's, before
	 * softplus), B and C [n, N], z[n, I] the gate; per channel i with S[I, N] (updated):
	 * dt = softplus(dt), S_i = exp(-dt exp(A_log_i)) S_i + dt u_i B, y_i = (S_i.C + D_i u_i)
	 * silu(z_i); A_log [I, N], D [I] */
	void (*mamba1_rows)(struct sb_ctx *ctx, float *y, const float *u, const float *dt, const float *B,
			    const float *C, const float *z, float *S, const float *A_log, const float *D, int n, int nI,
			    int N);
	/* gated DeltaNet's recurrence, evaluation path only (lib/lm_model.h, kind D): n rows of one
	 * sequence, qkv[n, 2 Hk dk + Hv dv] the convolution's output after SiLU (q, k per key head,
	 * v per value head), b and a [n, Hv]; per value head h (key head h / (Hv / Hk)) with
	 * S[Hv, dk, dv] (updated): q, k L2-normalised (eps 1e-6), q times dk^-1/2, beta = sigmoid(b),
	 * g = -exp(A_log) softplus(a + dt_bias), S = exp(g) S, S += k (beta (v - S^T k))^T,
	 * y[n, Hv dv] = S^T q */
	void (*deltanet_rows)(struct sb_ctx *ctx, float *y, const float *qkv, const float *b, const float *a, float *S,
			      const float *A_log, const float *dt_bias, int n, int Hk, int Hv, int dk, int dv);
	/* Granite's mixture of experts, evaluation path only (lib/lm_model.h, moe_experts): per
	 * row, router logits r[E, d] x (float, unpacked), the top K (ties: the lower index,
	 * K <= 64), gates their softmax (gate_all 1: the softmax over all E logits, the picked
	 * ones not renormalised; Jamba's, OLMoE's), expert e a SwiGLU (wi [E, 2Fe, d]: gate rows then up
	 * rows; wo [E, d, Fe]); out[n, d] += the gated sum in expert order. Each expert's two
	 * matrices are packed by pack_rows on their own (expert e's at wi + e 2Fe d, wo + e d Fe)
	 * and run batched over the rows routed to it with matmul_rows's chains, so a row's bits
	 * do not depend on the other rows. scr: SB_LM_MOE_SCRATCH(n, d, E, K, Fe) floats */
	void (*moe_rows)(struct sb_ctx *ctx, float *out, const float *x, const float *r, const float *wi,
			 const float *wo, float *scr, int n, int d, int E, int K, int Fe, int gate_all);
	/* the same from bfloat16 experts packed by pack_rows_bf16 (half the memory): the
	 * results of moe_rows on the widened weights, bit for bit */
	void (*moe_rows_bf16)(struct sb_ctx *ctx, float *out, const float *x, const float *r, const uint16_t *wi,
			      const uint16_t *wo, float *scr, int n, int d, int E, int K, int Fe, int gate_all);
};

/* moe_rows's scratch for n rows, in floats: router logits, picks and gates, row indices,
 * then the gathered rows, the experts' hidden and gated rows, their outputs and the sums */
#define SB_LM_MOE_SCRATCH(n, d, E, K, Fe)                                                                 \
	((size_t)(n) * ((size_t)(E) + 2 * (size_t)(K) + 1 + 3 * (size_t)(d) + 3 * (size_t)(Fe)))

/* The LM op table of a backend, or NULL. */
const struct sb_backend_lm_ops *sb_backend_lm(const struct sb_backend *be);

/* Convenience wrappers. */
/* The index of the largest of l[0..n-1] (n >= 1), the lowest on ties, where a NaN counts as
 * larger than every number (the first NaN wins): torch.argmax's rule, so that a row of logits
 * with a NaN predicts what the study's PyTorch code predicts. */
static inline int sb_argmax(const float *l, int n)
{
	int a = 0;
	if (isnan(l[0]))
		return 0;
	for (int c = 1; c < n; c++) {
		if (isnan(l[c]))
			return c;
		if (l[c] > l[a])
			a = c;
	}
	return a;
}

/* with be->tails: 64 bytes more, a red zone after the bytes asked for, reported with the
 * caller's file and line (redzone.c) */
void *sb_be_alloc_tailed(struct sb_backend *be, size_t bytes, const char *file, int line);
void sb_be_free_tailed(struct sb_backend *be, void *p);
static inline void *sb_be_alloc_at(struct sb_backend *be, size_t bytes, const char *file, int line)
{
	return be->tails ? sb_be_alloc_tailed(be, bytes, file, line) : be->ops->alloc(be, bytes);
}
#define sb_be_alloc(be, bytes) sb_be_alloc_at((be), (bytes), __FILE__, __LINE__)
static inline void sb_be_free(struct sb_backend *be, void *p)
{
	if (p && be->tails)
		sb_be_free_tailed(be, p);
	else if (p)
		be->ops->free(be, p);
}
static inline struct sb_ctx *sb_be_main(struct sb_backend *be)
{
	return be->ops->main_ctx(be);
}

/* Fast GELU pieces exposed for tests: Phi(x) = P(X <= x) for a standard normal,
 * computed with the CPU backend's vectorisable erfc (|rel err| ~ 1e-7). */
void sb_cpu_gelu_ref_f(float *out, const float *x, size_t n);
void sb_cpu_normcdf(float *out, const float *x, size_t n);
void sb_cpu_exp(float *out, const float *x, size_t n);

#endif
