/* lm_model.h — the causal decoder LM of the LM track (PROTOCOL C; and the tiny
 * decoder of PROTOCOL B), one code path on any backend with the LM ops
 * (lib/backend.h, struct sb_backend_lm_ops).
 *
 * Model (pre-norm):
 *   x = embed_tokens[ids] (+ embed_positions[t] when pos = learned)
 *   per layer l, kind pattern[l]:
 *     x += Mixer(Norm1(x));  x += MLP(Norm2(x))      (MLP omitted when ffn = 0)
 *     A  full causal softmax attention: q/k/v/o projections, heads of head_dim,
 *        kv_heads <= heads (GQA), RoPE when pos = rope, scores q.k / sqrt(head_dim).
 *        The sparse masks (lib/lm_mask.h) act here, and only here.
 *     S  sliding-window causal attention (Gemma's local layers; trains): A's
 *        projections and norms, each query attending to its `window` most recent keys
 *        (itself included), RoPE with rope_local_theta's frequencies (no scaling; 0 = the
 *        A layers'). Masks never touch it: it runs unchanged, as a hybrid's other layers.
 *     C  causal depthwise short convolution of kernel conv_K, gated as LFM2's conv
 *        block (conv_gate = 1): (b, c, h) = in_proj(x) (d -> 3d), y = c * conv_K(b * h),
 *        out_proj (d -> d); or plain (conv_gate = 0): y = conv_K(in_proj(x)) (d -> d),
 *        out_proj. The plain form trains far faster from a small initialisation (the
 *        gated form's signal is a product of three small projections).
 *     L  causal linear attention, phi = elu + 1, lin_heads heads of d / lin_heads:
 *        o_t = sum_{j<=t} (phi(q_t).phi(k_j)) v_j / (sum_{j<=t} phi(q_t).phi(k_j) + 1e-6).
 *     M  Mamba2 mixer (evaluation only; Granite 4.0's hybrid layers), I = ssm_heads *
 *        ssm_head_dim, N = ssm_state, G = ssm_groups, conv kernel conv_k:
 *        (z, xBC, dt) = in_proj(x) (d -> I + (I + 2GN) + ssm_heads);
 *        xBC = silu(causal depthwise conv_k(xBC) + conv bias); (x, B, C) = xBC (I, GN, GN);
 *        per head h (group g = h / (ssm_heads / G)): dt = softplus(dt_h + dt_bias_h),
 *        S_h = exp(-dt exp(A_log_h)) S_h + dt x_h B_g^T, y_h = S_h C_g + D_h x_h (sequential,
 *        exact recurrence); y = RMSNorm(y * silu(z)) over all I channels (transformers'
 *        GraniteMoeHybridRMSNormGated; ssm_norm and ssm_norm_groups give Falcon-H1's
 *        variants), out_proj (I -> d).
 *     V  Mamba (1) selective-scan mixer (evaluation only; Jamba's layers), I = ssm_inner,
 *        N = ssm_state, R = ssm_dt_rank, conv kernel conv_k: (x, z) = in_proj(x) (d -> 2I);
 *        u = silu(causal depthwise conv_k(x) + conv bias); (dt, B, C) = x_proj(u) (I -> R + 2N),
 *        each RMS-normalised when ssm_inner_norm (Jamba's dt/b/c_layernorm); dt = softplus(
 *        dt_proj(dt) + its bias) (R -> I); per channel i, S_i = exp(-dt_i exp(A_log_i)) S_i +
 *        dt_i u_i B (A_log [I, N]), y_i = S_i.C + D_i u_i; y * silu(z), out_proj (I -> d).
 *     D  gated DeltaNet (evaluation only; Qwen3-Next's linear attention layers): gdn_kheads key
 *        heads and gdn_vheads value heads of gdn_kdim and gdn_vdim (gdn_vheads a multiple of
 *        gdn_kheads, r their ratio); per key head g, in_proj_qkvz gives q, k (gdn_kdim each), v
 *        and z (r gdn_vdim each), in_proj_ba gives b and a (r each); (q | k | v) = silu(causal
 *        depthwise conv_k(q | k | v)) (no bias); q and k L2-normalised (eps 1e-6), q scaled by
 *        gdn_kdim^-1/2; per value head h (key head h / r): beta = sigmoid(b), g = -exp(A_log)
 *        softplus(a + dt_bias); S = exp(g) S; S += k (beta (v - S^T k))^T; o = S^T q;
 *        o = RMSNorm(o) (weight [gdn_vdim]) silu(z); out_proj.
 *     A with attn_gate (Qwen3-Next): q_proj gives each head its query and a gate of head_dim;
 *        the attention's output is multiplied by sigmoid(gate) before o_proj.
 *     A with parallel_ssm (Falcon-H1; evaluation only): attention and an M mixer side by side
 *        on the same normed input, their outputs added: x += Attn(n) + Mamba2(n).
 *     MLP  GELU: down(gelu(up x));  SwiGLU: down(silu(gate x) * up x); GeGLU (evaluation
 *          only; Gemma's): down(gelu_tanh(gate x) * up x); with moe_experts, plus Granite's
 *          mixture of experts on the same input (below).
 *   sandwich = 1 (Gemma 2/3's; trains): the mixer's and the MLP's outputs are
 *     normalised before they are added, x += Norm3(Mixer(Norm1(x))), x += Norm4(MLP(Norm2(x))).
 *   logits = lm_head(Norm_f(x)), lm_head tied to embed_tokens or not.
 *   Granite's multipliers (1 = none): x = emb_mult embed_tokens[ids];
 *   x += resid_mult Mixer(..), x += resid_mult MLP(..); attention scores q.k attn_scale
 *   (0 = 1 / sqrt(head_dim)); logits / logit_div. Falcon-H1's muP multipliers (below).
 *   Norm is LayerNorm (weight and bias) or RMSNorm (weight), eps norm_eps.
 *   `bias` adds biases to the MLP and conv projections and the conv, `conv_bias` to
 *   the conv projections and the conv alone (LFM2), `attn_bias` to the q/k/v/o
 *   projections of A and L layers (Qwen2 has q/k/v biases).
 *
 * Parameter names follow the Llama/Qwen safetensors layout where one exists
 * (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight,
 * .input_layernorm, .post_attention_layernorm, .mlp.{gate,up,down}_proj,
 * model.norm.weight, lm_head.weight), so a pretrained checkpoint maps onto the
 * table by name; conv and linear-attention layers use model.layers.N.conv.* (LFM2's
 * names: in_proj, conv, out_proj) and model.layers.N.linear_attn.*, Mamba2 layers
 * Granite's model.layers.N.mamba.{in_proj, conv1d, dt_bias, A_log, D, norm, out_proj}.
 * LFM2's and Granite's other names are mapped when imported (lib/lm_import.h,
 * sb_lm_lfm2_name, sb_lm_granite_name).
 *
 * Initialisation (drawn from SB_RNG_INIT, stream = FNV-1a-64 of the tensor name,
 * elements in row-major order): Linear weights and embeddings N(0, init_std^2);
 * the projections that write into the residual stream (o_proj, out_proj,
 * down_proj) N(0, (init_std / sqrt(2 n_layer))^2); conv weight and bias
 * U(-1/sqrt(K), 1/sqrt(K)) (PyTorch's Conv1d default for groups = d); norm
 * weights 1; biases 0.
 *
 * Two forward paths:
 *   training  whole sequences of a tile, OpenBLAS products, exact backward;
 *   cached    the evaluation path: rows of one sequence appended to a cache
 *             (KV caches for A, the short history for C, the state for L) with
 *             row-deterministic products; any mask applies to A layers; a prefill
 *             of n tokens and n single-token steps give the same bits.
 * Dense logits of the two paths agree to float tolerance (tested).
 */
#ifndef SB_LM_MODEL_H
#define SB_LM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "err.h"
#include "json.h"
#include "lm_mask.h"
#include "tensor.h"

#define SB_LM_MAX_LAYERS 128

enum sb_lm_pos { SB_LM_POS_NONE = 0, SB_LM_POS_LEARNED = 1, SB_LM_POS_ROPE = 2 };

struct sb_lm_cfg {
	int vocab;      /* 256 (bytes) */
	int d;
	char pattern[SB_LM_MAX_LAYERS + 1]; /* e.g. "CCACCA" */
	int n_layer;    /* strlen(pattern) */
	int heads, kv_heads, head_dim; /* A layers; kv_heads 0 = heads; head_dim 0 = d / heads */
	int lin_heads;  /* L layers (width d / lin_heads) */
	int conv_k;     /* 4 */
	int conv_gate;  /* 1: gated short conv (LFM2's block); 0: plain depthwise conv */
	int ffn;        /* MLP hidden width; 0 = no MLP */
	int swiglu;     /* 0 GELU, 1 SwiGLU, 2 GeGLU with tanh GELU (Gemma's) */
	int sandwich;   /* 1: norms on the mixer's and MLP's outputs too (Gemma's) */
	int window;     /* S layers: keys per query row (the query included) */
	float rope_local_theta; /* S layers' RoPE base, unscaled; 0 = the A layers' frequencies */
	/* with pos rope: which attention layers rotate, one character a layer ('1' RoPE, '0' none:
	 * a NoPE layer, SmolLM3's every fourth, EXAONE 4's global ones); "" = every layer */
	char rope_layers[SB_LM_MAX_LAYERS + 1];
	int rope_dim;   /* RoPE on the first rope_dim dimensions of each head (even; 0 = head_dim):
			 * transformers' partial_rotary_factor (Bamba's 0.5), frequencies over rope_dim */
	/* Gemma 2's soft-capping (0 = none; both paths): every attention score s of the A
	 * and S layers becomes attn_softcap tanh(s / attn_softcap) before the mask and softmax,
	 * every output logit z final_softcap tanh(z / final_softcap) */
	float attn_softcap, final_softcap;
	int rmsnorm;    /* 0 LayerNorm, 1 RMSNorm */
	float norm_eps; /* 1e-5 */
	int bias;
	int attn_bias;  /* 0 none, 1 q/k/v/o, 2 q/k/v only (Qwen2) */
	int qk_norm;    /* before RoPE, 1: RMSNorm of every query and key head (weight [head_dim]; Qwen3,
			 * LFM2, Gemma 3); 2: of all the queries and all the keys of a position
			 * together (weights [heads * head_dim] and [kv_heads * head_dim]; OLMo 2/3) */
	int prenorm;    /* 1: the mixer's and the MLP's input norms (Norm1, Norm2); 0: none, OLMo 2/3's
			 * post-norm layout, x += Norm3(Mixer(x)), x += Norm4(MLP(x)) (needs sandwich) */
	int conv_bias;  /* biases on the C layers' in_proj, conv and out_proj alone (LFM2's conv_bias;
	                 * `bias` puts them there and on the MLP) */
	int tied;
	enum sb_lm_pos pos;
	float rope_theta; /* 10000 */
	/* RoPE frequency scaling (transformers' rope types; sb_lm_rope_freqs):
	 *   0 none;
	 *   1 "llama3" (Llama 3.1+): wavelengths above rope_orig_max / rope_low_freq are divided
	 *     by rope_factor, below rope_orig_max / rope_high_freq kept, smoothly between;
	 *   2 "linear": every frequency divided by rope_factor;
	 *   3 "yarn" (YaRN, NTK-by-parts): dimensions that turn fewer than rope_beta_slow times
	 *     over rope_orig_max positions are divided by rope_factor, those that turn more than
	 *     rope_beta_fast times kept, linearly in the dimension's index between (the bounds
	 *     rounded outwards when rope_truncate); cos and sin are multiplied by rope_attn, so
	 *     scores by rope_attn^2 (folded into the queries after RoPE, on both paths) */
	int rope_scaling;
	float rope_factor, rope_low_freq, rope_high_freq;
	int rope_orig_max;
	float rope_beta_fast, rope_beta_slow, rope_attn; /* 32, 1, 1 */
	int rope_truncate;                               /* 1 */
	/* M layers (Mamba2): heads, head width, state size, groups of B and C; biases of the
	 * conv (default 1) and of the projections: ssm_proj_bias 0 none (default), 1 in_proj and
	 * out_proj (Granite's mamba_proj_bias), 2 in_proj only, 3 out_proj only (Falcon-H1's
	 * mamba_proj_bias and projectors_bias are two switches) */
	int ssm_heads, ssm_head_dim, ssm_state, ssm_groups, ssm_conv_bias, ssm_proj_bias;
	/* the Mamba2 mixer's gated norm (weight [I], mamba.norm.weight): 1 RMSNorm(y silu(z))
	 * (Granite's, Bamba's; default), 2 RMSNorm(y) silu(z) (Falcon-H1's mamba_norm_before_gate),
	 * 0 none: y silu(z), no weight (Falcon-H1's mamba_rms_norm false); each RMSNorm over
	 * groups of I / ssm_norm_groups channels (1: all; Falcon-H1's mamba_n_groups) */
	int ssm_norm, ssm_norm_groups;
	/* V layers (Mamba 1): the inner width I, the rank of dt's projection, the RMSNorms of dt,
	 * B and C (Jamba's; eps norm_eps); ssm_state, conv_k, ssm_conv_bias and ssm_proj_bias
	 * (1: in_proj's and out_proj's) as for M layers */
	int ssm_inner, ssm_dt_rank, ssm_inner_norm;
	/* D layers (gated DeltaNet, Qwen3-Next): key and value heads, their widths; conv_k */
	int gdn_kheads, gdn_vheads, gdn_kdim, gdn_vdim;
	int attn_gate; /* 1: Qwen3-Next's output gate of the attention (q_proj [2 heads head_dim, d]) */
	/* Cohere2's (evaluation only): parallel_mlp 1, the MLP reads the mixer's normed input
	 * (no Norm2), x += Mixer(n) then x += MLP(n); norm_bias 0, LayerNorms without a bias */
	int parallel_mlp, norm_bias;
	/* Falcon-H1's parallel hybrid (evaluation only): every A layer also has a Mamba2 mixer
	 * (the M layers' parameters and names, model.layers.N.mamba.*) on the same normed input,
	 * x += Attention(n) + Mamba2(n) with n = Norm1(x). The masks act on the attention alone. */
	int parallel_ssm;
	/* Falcon-H1's muP multipliers (1 = none; evaluation only, applied where transformers
	 * applies them): attention input (before q/k/v), keys (after k_proj, before RoPE),
	 * attention output (after o_proj); Mamba2 input (before in_proj), in_proj's output parts
	 * z, x, B, C and dt (its mup_vector), Mamba2 output (after out_proj); the MLP's gate
	 * projection (before the activation) and output (after down_proj); the logits */
	float attn_in_mult, key_mult, attn_out_mult, ssm_in_mult, ssm_out_mult;
	float ssm_mult_z, ssm_mult_x, ssm_mult_b, ssm_mult_c, ssm_mult_dt;
	float mlp_gate_mult, mlp_down_mult, logit_mult;
	/* Granite's mixture of experts beside the MLP (evaluation only; 0 experts = none): a
	 * router [E, d] picks the top moe_topk experts of a row (ties: the lower index), their
	 * gates the softmax of the picked router logits; expert e is a SwiGLU of width moe_ffn
	 * (input_linear [E, 2 moe_ffn, d]: gate rows then up rows; output_linear [E, d, moe_ffn]);
	 * the MLP's output becomes the gated sum of the picked experts' plus the MLP's own */
	int moe_experts, moe_topk, moe_ffn;
	/* which layers have the experts (one character a layer, '1' experts, '0' none: Jamba's every
	 * other layer, Qwen3-MoE's mlp_only_layers; "" = every layer); moe_dense 1: the dense MLP
	 * runs beside them (Granite's shared MLP; default), 0: the experts replace it in their layers
	 * (Mixtral, Qwen3-MoE, Jamba; the other layers keep the dense MLP of width ffn); moe_gate 0:
	 * the gates are the softmax of the picked logits (Granite's, Mixtral's, norm_topk_prob), 1:
	 * the softmax over every expert's logit, the picked ones not renormalised (Jamba's, OLMoE's) */
	char moe_layers[SB_LM_MAX_LAYERS + 1];
	int moe_dense, moe_gate;
	/* moe_shared_gate 1: the dense MLP beside the experts (a shared expert) is scaled by
	 * sigmoid(shared_expert_gate x) (weight [1, d]; Qwen2-MoE's, Qwen3-Next's) */
	int moe_shared_gate;
	/* Granite's multipliers: 1, 1, 0 (= 1/sqrt(head_dim)), 1 when unused */
	float emb_mult, resid_mult, attn_scale, logit_div;
	int max_T;        /* longest sequence (learned positions) */
	float init_std;   /* 0.02 */
};

/* Defaults: vocab 256, d 64, "CACA", 4 heads, kv heads = heads (0), lin 4, conv 4, ffn 4d, GELU,
 * LayerNorm 1e-5, no biases, tied, pos none, theta 10000, max_T 256, std 0.02. */
void sb_lm_cfg_default(struct sb_lm_cfg *c);
/* Fill from a JSON object (missing fields keep their current values) and check. */
int sb_lm_cfg_from_json(struct sb_lm_cfg *c, const struct sb_json *obj, struct sb_err *err);
/* Set one field from "key=value" (the same keys as the JSON form). */
int sb_lm_cfg_set(struct sb_lm_cfg *c, const char *kv, struct sb_err *err);
int sb_lm_cfg_check(struct sb_lm_cfg *c, struct sb_err *err); /* also fills n_layer, head_dim */
/* whether attention layer l takes RoPE */
static inline int sb_lm_layer_rope(const struct sb_lm_cfg *c, int l)
{
	return c->pos == SB_LM_POS_ROPE && (!c->rope_layers[0] || c->rope_layers[l] == '1');
}
/* whether layer l has the experts */
static inline int sb_lm_layer_moe(const struct sb_lm_cfg *c, int l)
{
	return c->moe_experts && (!c->moe_layers[0] || c->moe_layers[l] == '1');
}
/* whether layer l runs the dense MLP (of width ffn) */
static inline int sb_lm_layer_mlp(const struct sb_lm_cfg *c, int l)
{
	return c->ffn > 0 && (c->moe_dense || !sb_lm_layer_moe(c, l));
}
/* The name of one expert's matrix in a checkpoint that keeps the experts apart (an import of
 * Mixtral, Qwen3-MoE or Jamba: model.layers.N.block_sparse_moe.experts.E.{gate,up,down}_proj.weight)
 * for the stacked parameter `stacked` (block_sparse_moe.input_linear.weight: part 0 gate, 1 up;
 * output_linear.weight: part 2 down); 0, or -1 when `stacked` is not an experts' stack */
int sb_lm_expert_name(const char *stacked, int e, int part, char *out, size_t cap);
/* the rotated dimensions of a head: rope_dim, or head_dim when 0 */
static inline int sb_lm_rope_dim(const struct sb_lm_cfg *c) { return c->rope_dim ? c->rope_dim : c->head_dim; }
void sb_lm_cfg_json(struct sb_jw *w, const struct sb_lm_cfg *c); /* an object value */

enum sb_lm_init { SB_LM_INIT_NORMAL, SB_LM_INIT_UNIFORM, SB_LM_INIT_ONE, SB_LM_INIT_ZERO };

struct sb_redzones; /* redzone.h */

struct sb_lm_param {
	char name[80];
	int ndim;
	int64_t shape[3];
	size_t offset, numel; /* floats */
	enum sb_lm_init init;
	float a;        /* std or bound */
	int decay;      /* weight decay applies (matrices and the conv weight) */
	int linear;     /* a Linear weight [out, in]: packed for the cached path (pack_rows); 2: a
	                 * SwiGLU gate, packed with the up projection after it; 3: a stack of
	                 * experts [E, out, in], each packed on its own (moe_rows) */
};

struct sb_lm_layer {
	char kind; /* 'A', 'C', 'D', 'L', 'M', 'S', 'V' */
	float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
	float *ln3_w, *ln4_w; /* sandwich: the mixer's and the MLP's output norms */
	float *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *o_w, *o_b; /* A, S and L */
	float *qn_w, *kn_w;                                   /* A and S with qk_norm */
	float *in_w, *in_b, *cw, *cb, *out_w, *out_b;        /* C and M */
	float *dt_bias, *A_log, *Dskip, *gn_w;               /* M: per head; the gated norm's weight [I] */
	float *xp_w, *dtp_w, *dtp_b, *dtn_w, *bn_w, *cn_w;   /* V: x_proj, dt_proj, the inner norms */
	float *ba_w;                                         /* D: in_proj_ba (in_w: in_proj_qkvz) */
	float *sg_w;                                         /* the shared expert's gate [1, d] */
	float *up_w, *up_b, *down_w, *down_b;                /* MLP; SwiGLU: up_w = [gate; up] (2F rows) */
	float *moe_r, *moe_in, *moe_out;                     /* MoE: router [E, d], [E, 2Fe, d], [E, d, Fe]
	                                                      * (in pt: packed expert by expert, as the
	                                                      * other Linear weights: bfloat16 in bf16) */
};

struct sb_lm_ptrs {
	float *embed, *pos, *lnf_w, *lnf_b, *head;
	struct sb_lm_layer layer[SB_LM_MAX_LAYERS];
};

struct sb_lm_model {
	struct sb_lm_cfg cfg;
	struct sb_backend *be;
	const struct sb_backend_lm_ops *lo;
	struct sb_lm_param *params;
	int n_params;
	size_t n_floats;
	float *p;            /* parameters (device); NULL in an evaluation-only model */
	struct sb_lm_ptrs w; /* into p (into pt in an evaluation-only model: the Linear
	                      * weights then hold their packed copies, read by no one) */
	double *rope_freq;   /* RoPE: head_dim / 2 angular frequencies (host), scaling applied */
	double *rope_freq_local; /* S layers': rope_local_theta's, unscaled (or rope_freq) */
	float *pt;           /* the cached path's copy: Linear weights packed for matmul_rows */
	struct sb_lm_ptrs wt;
	int pt_valid;
	int bf16;            /* evaluation-only, Linear weights (and the head) in pt as packed
	                      * bfloat16 (pack_rows_bf16; wt's Linear pointers address them), the
	                      * embedding table as bfloat16 rows */
	struct sb_redzones *pzones; /* SB_ARENA_CHECK, a trainable model: the zones after its
	                      * tensors in every buffer laid out like p (NULL without) */
	size_t *plain_off;   /* with pzones: each tensor's offset without them, */
	size_t plain_n;      /* and n_floats without them */
};

/* RoPE's angular frequencies of a configuration: out[i] = theta^(-2i / head_dim), i < head_dim / 2
 * (in double), then the configured scaling. */
void sb_lm_rope_freqs(const struct sb_lm_cfg *c, double *out);

/* The parameter table of a configuration (owned array). */
int sb_lm_param_table(const struct sb_lm_cfg *c, struct sb_lm_param **out, int *n, size_t *n_floats,
		      struct sb_err *err);
/* Pointers of every tensor into a buffer laid out by the table. */
void sb_lm_ptrs_at(const struct sb_lm_model *m, float *base, struct sb_lm_ptrs *out);

int sb_lm_model_new(struct sb_backend *be, const struct sb_lm_cfg *cfg, struct sb_lm_model **out, struct sb_err *err);
/* An evaluation-only model: the cached path's copy alone (every parameter once, the
 * Linear weights packed), half the memory of sb_lm_model_new's; loaded by
 * sb_lm_model_from_tensors, read by sb_lm_forward_cached*. Initialisation, training and
 * sb_lm_model_to_tensors are refused (SB_EUSAGE). */
int sb_lm_model_new_eval(struct sb_backend *be, const struct sb_lm_cfg *cfg, int bf16, struct sb_lm_model **out,
			 struct sb_err *err);
/* bf16 = 1: the Linear weights (and the head) are kept as packed bfloat16 and the
 * embedding table as bfloat16, half their memory and read traffic, with the same results
 * bit for bit (widening is exact); the checkpoint's Linear tensors and embedding must then
 * be BF16: sb_lm_tensors_bf16 says whether they all are. */
int sb_lm_tensors_bf16(const struct sb_lm_cfg *cfg, const struct sb_tensors *ts);
void sb_lm_model_free(struct sb_lm_model *m);
/* Random initialisation from seed (see above). */
int sb_lm_model_init(struct sb_lm_model *m, uint64_t seed, struct sb_err *err);
/* Parameters as named tensors (host copies), and back (names and shapes must match). */
int sb_lm_model_to_tensors(const struct sb_lm_model *m, struct sb_tensors *ts, struct sb_err *err);
/* from_tensors also takes BF16 and F16 tensors (pretrained checkpoints), widened exactly. */
int sb_lm_model_from_tensors(struct sb_lm_model *m, const struct sb_tensors *ts, struct sb_err *err);
float sb_bf16_to_f32(uint16_t h);
float sb_f16_to_f32(uint16_t h);
/* Refresh the cached path's packed weights (after training or loading). */
void sb_lm_model_prepare(struct sb_lm_model *m);

/* ---- training ---- */

struct sb_lm_train_opts {
	int B, T;       /* sequences per step, tokens per sequence */
	int tile;       /* sequences per tile (default 1) */
	float b1, b2, eps, wd, clip;
};

struct sb_lm_trainer;
int sb_lm_trainer_new(struct sb_lm_model *m, const struct sb_lm_train_opts *o, struct sb_lm_trainer **out,
		      struct sb_err *err);
void sb_lm_trainer_free(struct sb_lm_trainer *tr);
/* One step on batch[B][T+1] bytes (inputs 0..T-1, targets 1..T): loss (mean per
 * token, before the update), gradient norm (before clipping); AdamW step `step`
 * (1-based) with learning rate lr. */
int sb_lm_train_step(struct sb_lm_trainer *tr, const uint8_t *batch, int64_t step, float lr, double *loss,
		     double *gnorm, struct sb_err *err);
/* The same on a shorter context: batch[B'][T'+1] with T' dividing T and B' = B T / T'
 * (the same tokens per step; tiles hold tile T / T' sequences): the arena is laid out
 * again for (B', T'), allocating nothing. */
int sb_lm_train_step_len(struct sb_lm_trainer *tr, const uint8_t *batch, int Tp, int64_t step, float lr, double *loss,
			 double *gnorm, struct sb_err *err);
/* Loss and gradient only (no update): the gradient (reduced over slots) is left in
 * *grad (n_floats floats on the device, owned by the trainer). */
int sb_lm_train_grad(struct sb_lm_trainer *tr, const uint8_t *batch, double *loss, float **grad, struct sb_err *err);
/* sb_lm_train_step, _grad and _logits on token ids (a tokenizer's: an imported model's)
 * in place of bytes; every id in [0, vocab), else SB_EDATA naming it. */
int sb_lm_train_step_ids(struct sb_lm_trainer *tr, const int32_t *batch, int64_t step, float lr, double *loss,
			 double *gnorm, struct sb_err *err);
int sb_lm_train_grad_ids(struct sb_lm_trainer *tr, const int32_t *batch, double *loss, float **grad,
			 struct sb_err *err);
int sb_lm_train_logits_ids(struct sb_lm_trainer *tr, const int32_t *ids, float *out, struct sb_err *err);
/* Optimiser state as tensors ("adam_m.NAME", "adam_v.NAME") and back. */
int sb_lm_trainer_state_to(const struct sb_lm_trainer *tr, struct sb_tensors *ts, struct sb_err *err);
int sb_lm_trainer_state_from(struct sb_lm_trainer *tr, const struct sb_tensors *ts, struct sb_err *err);
/* Logits of the training path for one sequence of T tokens (tests): out[T][vocab] (host). */
int sb_lm_train_logits(struct sb_lm_trainer *tr, const uint8_t *tokens, float *out, struct sb_err *err);

/* ---- the cached (evaluation) path ---- */

struct sb_lm_cache;
int sb_lm_cache_new(const struct sb_lm_model *m, int Tcap, struct sb_lm_cache **out, struct sb_err *err);
void sb_lm_cache_free(struct sb_lm_cache *c);
/* With SB_ARENA_CHECK set (not "0") when they were made, a trainer's per-worker activation
 * arenas and a cache hold a red zone after every buffer (redzone.h), checked after every
 * training pass, sb_lm_train_logits and cached forward pass (SB_EINTERNAL naming the
 * buffer). For tests: the address of zone i, NULL past the last or without red zones. */
void *sb_lm_trainer_zone(const struct sb_lm_trainer *tr, int worker, int i);
void *sb_lm_cache_zone(const struct sb_lm_cache *c, int i);
/* With SB_ARENA_CHECK set when a trainable model is made, its parameter table is laid out
 * with a zone of zero bytes after every tensor (its rounding to 16 floats and 16 floats
 * more; none between a SwiGLU gate and its up projection, one product), in the parameters,
 * the cached path's copy, every gradient slot and both moments, checked after every
 * training pass and AdamW step and (the copy) every cached pass: a write of anything but
 * +0.0 names the tensor and the buffer. n_floats then counts the zones. For tests: zone i
 * in buffer b (SB_LM_PZ_*, or SB_LM_PZ_SLOT + s for gradient slot s >= 1), NULL past the
 * last or without zones. */
enum { SB_LM_PZ_PARAMS, SB_LM_PZ_PACKED, SB_LM_PZ_GRADS, SB_LM_PZ_M, SB_LM_PZ_V, SB_LM_PZ_SLOT };
void *sb_lm_param_zone(const struct sb_lm_trainer *tr, int b, int i);
/* For tests: the trainer's checks as after a pass (arenas, the table's zones, the
 * backend's tails), now; 0 when all hold or there are none. */
int sb_lm_trainer_check(struct sb_lm_trainer *tr, const char *after, struct sb_err *err);
/* Empty the cache (position 0); mask_seed keys the random controls of this text. */
void sb_lm_cache_reset(struct sb_lm_cache *c, uint64_t mask_seed);
int sb_lm_cache_pos(const struct sb_lm_cache *c);
/* Copy the post-RoPE queries of A layer `layer` into buf[Tcap][heads*head_dim]
 * (rows at their positions) during later forwards; buf NULL stops. */
void sb_lm_cache_capture_q(struct sb_lm_cache *c, int layer, float *buf);
/* The KV cache of an A layer: K, V [Tcap][kv_heads*head_dim] (NULL for other layers). */
void sb_lm_cache_kv(const struct sb_lm_cache *c, int layer, const float **K, const float **V);
/* Feed n tokens at positions pos..pos+n-1 under `mask` (NULL = dense) on context
 * ctx. logits (host, may be NULL): all n rows ([n][vocab]) when all_rows, else the
 * last row only. obs (may be NULL): one struct sb_lm_attn_obs per layer
 * (entries of non-A layers are untouched). */
int sb_lm_forward_cached(struct sb_ctx *ctx, struct sb_lm_model *m, struct sb_lm_cache *c, const uint8_t *tokens,
			 int n, const struct sb_lm_mask *mask, float *logits, int all_rows,
			 struct sb_lm_attn_obs *obs, struct sb_err *err);
/* The same on token ids (vocabularies beyond bytes): an id outside [0, vocab) is SB_EDATA. The
 * byte form above feeds its tokens through this one, 256 at a time (same bits). */
int sb_lm_forward_cached_ids(struct sb_ctx *ctx, struct sb_lm_model *m, struct sb_lm_cache *c, const int32_t *tokens,
			     int n, const struct sb_lm_mask *mask, float *logits, int all_rows,
			     struct sb_lm_attn_obs *obs, struct sb_err *err);

#endif
