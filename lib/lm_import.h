/* lm_import.h — a pretrained decoder of the Llama/Qwen family, Liquid AI's hybrid LFM2,
 * IBM's hybrid Granite 4.0 or Google's Gemma 3 (PROTOCOL C(b)), from a Hugging Face model directory into a run directory that the LM
 * evaluation reads like a trained one (`sb-lm import`, docs/lm.md).
 *
 * The directory holds config.json, the weights (model.safetensors, or else the shards that
 * model.safetensors.index.json names; a tensor in two shards is refused) and, for text, tokenizer.json. Read:
 *   model_type  llama, mistral, qwen2 or qwen3 (architectures *ForCausalLM); hidden_act silu;
 *   vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
 *   num_key_value_heads (default: heads), head_dim (default: hidden / heads),
 *   rms_norm_eps, rope_theta (10000), rope_scaling (null, "default", "llama3", "linear"
 *   or "yarn", read as transformers 5 and vLLM read it: docs/lm.md), or the same in
 *   transformers 5's rope_parameters (both spellings given: they must agree),
 *   tie_word_embeddings (false), attention_bias / mlp_bias (llama, qwen3),
 *   max_position_embeddings; qwen2 always has q/k/v biases; qwen3 has q_norm/k_norm;
 *   mistral is llama's layout with a sliding_window (null, or at least the evaluation
 *   context T: within it the attention is full; a longer T is refused).
 * Refused, naming the field: other model types, activations, RoPE scalings (dynamic,
 * longrope, ...), partial_rotary_factor other than 1, sliding-window attention switched on, a tensor the layout does
 * not know (rotary inv_freq buffers and a tied model's lm_head copy are skipped), a
 * missing tensor or one of another shape, dtypes other than F32/BF16/F16.
 *
 * lfm2 (Lfm2ForCausalLM, transformers >= 4.54): a hybrid. The layers that layer_types
 * (or, in older configs, full_attn_idxs) names "full_attention" are GQA attention with
 * per-head q/k RMSNorm and RoPE ('A'); the "conv" layers are its gated short
 * convolution ('C' with conv_gate 1: in_proj d -> 3d giving (B, C, x), y = C *
 * conv_{conv_L_cache}(B * x), out_proj; conv_bias puts biases on the three). norm_eps,
 * rope_theta (or theta, or rope_parameters.rope_theta; 1e6), tie_word_embeddings (or
 * tie_embedding; true), max_position_embeddings (128000). The feed-forward width follows
 * transformers' rule: block_ff_dim (else intermediate_size); with block_auto_adjust_ff_dim
 * (true) int(2 F / 3), then with a block_ffn_dim_multiplier (1.0) int(multiplier F) rounded
 * up to block_multiple_of (256); the weights must have that width. Refused, naming the
 * field: another layer kind, layer_types and full_attn_idxs that disagree, block_use_swiglu
 * or use_pos_enc false, block_dim / conv_dim / conv_dim_out other than hidden_size,
 * num_heads other than num_attention_heads, block_norm_eps other than norm_eps, rope types
 * other than default.
 *
 * gemma3_text (Gemma3ForCausalLM) and gemma3 (Gemma3ForConditionalGeneration: its
 * text_config, fields left out taking Gemma3TextConfig's defaults; tensors language_model.* or
 * model.language_model.*, the vision tower skipped): layer_types (or every
 * sliding_window_pattern-th layer global) as S (sliding_window keys, rope_local_base_freq
 * unscaled) and A layers (rope_theta, rope_scaling); q/k norms, sandwich norms, GeGLU
 * (gelu_pytorch_tanh), embeddings times sqrt(hidden), scores times query_pre_attn_scalar^-1/2;
 * its (1 + w) norms written into the run as that multiplier (float32); soft-capping where the
 * config sets it (Gemma3TextConfig's default: none).
 *
 * gemma2 (Gemma2ForCausalLM): Gemma 3's layout without q/k norms, with one RoPE (rope_theta,
 * rope_scaling) for both kinds of layer, every other layer global (the first sliding) unless
 * layer_types says otherwise, and tanh soft-capping of the attention scores and the logits
 * (attn_logit_softcapping 50, final_logit_softcapping 30 when the config leaves them out;
 * null: none).
 *
 * Refused for both, naming the field: attention_bias, use_bidirectional_attention, another
 * activation or layer kind, rope_parameters. Both run the evaluation and the training path
 * (a scaled SAS backbone).
 *
 * olmo2 and olmo3 (Olmo2ForCausalLM, Olmo3ForCausalLM): Llama's fields, no pre-norms (prenorm 0),
 * post-norms (sandwich), q/k norms over all heads (qk_norm 2); olmo3's layer_types (else every
 * fourth layer global) as S (sliding_window keys, rope_theta unscaled) and A layers.
 *
 * smollm3 (SmolLM3ForCausalLM): Llama's fields, no_rope_layers (else every fourth layer NoPE) as
 * rope_layers. exaone4 (Exaone4ForCausalLM): OLMo's post-norms with per-head q/k norms; with a
 * sliding_window, S layers (the one rotary embedding) and NoPE A layers.
 *
 * bamba (BambaForCausalLM): Mamba2 layers and attention layers at attn_layer_indices, a SwiGLU
 * MLP in each, RoPE on the first int(head_dim * partial_rotary_factor) dimensions of a head
 * (rope_dim), BambaConfig's rope_theta 10000 and factor 0.5 unless config.json gives them.
 * phi3 (Phi3ForCausalLM): Mistral's reading, fused qkv_proj and gate_up_proj read as views of their
 * rows, RoPE on partial_rotary_factor of each head. ministral (MinistralForCausalLM): layer_types as
 * S and A layers (none: every layer slides, read as Mistral's window). granitemoe and
 * granitemoeshared: Granite 3 with Granite 4.0's stacked experts (and shared MLP).
 * qwen2_moe and olmoe: Qwen2's attention with a gated shared expert; OLMoE's q/k norms over all heads.
 * qwen3_moe and mixtral (Qwen3MoeForCausalLM, MixtralForCausalLM): Qwen3's and Mistral's layouts with
 * experts in place of the MLP (moe_dense 0; Qwen3-MoE's decoder_sparse_step and mlp_only_layers
 * as moe_layers, norm_topk_prob false as moe_gate 1), each expert's matrices one tensor (kept
 * apart in the run's checkpoint: info->moe_split).
 * jamba (JambaForCausalLM): Mamba (1) layers (V, with the inner norms of dt, B and C) and attention
 * layers without positions (every attn_layer_period-th from attn_layer_offset), experts in place of
 * the MLP every expert_layer_period-th layer from expert_layer_offset (gates over all experts, not
 * renormalised; one tensor per expert), Bamba's names.
 * cohere2 (Cohere2ForCausalLM: Command R7B, Command A): sliding-window layers with RoPE and global
 * NoPE layers (layer_types, else every sliding_window_pattern-th layer global), attention and MLP in
 * parallel on one LayerNorm without a bias (parallel_mlp, norm_bias 0), logit_scale; its
 * interleaved RoPE (pairs 2i, 2i+1) read as rotate-half by reordering each head's q_proj and
 * k_proj rows (even ones first) in the run's checkpoint.
 * qwen3_next (Qwen3NextForCausalLM): gated DeltaNet layers (D) and gated attention layers (A with
 * attn_gate; per-head q/k norms, RoPE on partial_rotary_factor of each head) as layer_types says
 * (else every full_attention_interval-th layer full), Qwen3-Next's (1 + w) RMSNorms written into
 * the run as that multiplier (the gated norm's weight as it is), experts with a shared expert
 * scaled by sigmoid(shared_expert_gate x) (moe_shared_gate), Qwen3-MoE's expert names.
 * falcon_h1 (FalconH1ForCausalLM): a parallel hybrid, attention and a Mamba2 mixer side by side in
 * every layer (parallel_ssm; the masks act on the attention), a SwiGLU MLP, Bamba's names; the
 * mixer's width mamba_d_ssm, its optional per-group gated norm (mamba_rms_norm,
 * mamba_norm_before_gate), in_proj's and out_proj's biases apart (mamba_proj_bias,
 * projectors_bias); its muP multipliers kept as the model's multiplier fields.
 *
 * granitemoehybrid (GraniteMoeHybridForCausalLM: IBM's Granite 4.0 hybrids, "h" models): layer_types ("mamba" | "attention"; null: every layer mamba) as M (Mamba2) and
 * A layers; every layer has the shared SwiGLU MLP (shared_intermediate_size). hidden_size,
 * num_attention_heads (head_dim = hidden / heads), num_key_value_heads, rms_norm_eps (1e-6),
 * attention_bias (q/k/v/o), tie_word_embeddings (false), max_position_embeddings (2048),
 * position_embedding_type (null or "nope": none; "rope": RoPE with rope_theta, rope_scaling
 * null or default, or a default rope_parameters agreeing with it), mamba_n_heads,
 * mamba_d_head ("auto" = mamba_expand hidden / heads),
 * mamba_d_state, mamba_n_groups, mamba_d_conv, mamba_expand, mamba_conv_bias (true),
 * mamba_proj_bias (false); embedding_multiplier, residual_multiplier, attention_multiplier
 * (the attention's scale, in place of 1 / sqrt(head_dim)) and logits_scaling (logits are
 * divided by it), all 1.0 by default; num_local_experts (8), num_experts_per_tok and
 * intermediate_size: the mixture of experts beside the shared MLP (0 experts: dense).
 * Refused, naming the field: another layer kind or position embedding type, a
 * mamba_d_head that does not fit.
 *
 * The masks act on the 'A' layers only: every layer of the Llama/Qwen layouts, LFM2's and
 * Granite's full-attention layers (their convolutions / Mamba2 mixers run unchanged). The
 * weights keep their dtype in RUN_DIR/model.safetensors (widened to float when loaded); the cell's "source" holds
 * the model type and the SHA-256 and size of every file read, and "tokenizer" the copy
 * of tokenizer.json in the run directory. Memory: the weight files are mapped read-only
 * (sb_st_map), not read, and model.safetensors is written from the mappings: no copy of
 * the weights is made (names, shapes and dtypes are checked against the layout; the
 * weights are widened to float only when the run is evaluated).
 */
#ifndef SB_LM_IMPORT_H
#define SB_LM_IMPORT_H

#include <stddef.h>

#include "backend.h"
#include "err.h"
#include "lm_model.h"
#include "lm_train.h"

struct sb_lm_import_opts {
	int T;                 /* evaluation context; 0 = min(max_position_embeddings, 512) */
	int n_corpora;         /* held-out text for the evaluation (NAME=PATH, as a cell's corpora) */
	char corpora[8][4200];
	char haystack[64];     /* the retrieval probes' essay corpus ("" = the first) */
};

/* What a config.json says besides the model configuration. */
struct sb_lm_hf_info {
	char model_type[32];
	int lfm2;            /* LFM2's tensor names (mapped onto the toolkit's when imported) */
	int granite;         /* Granite 4.0 hybrid's tensor names (shared_mlp.*, mapped when imported) */
	int bamba;           /* Bamba's tensor names (feed_forward.*, pre_ff_layernorm, final_layernorm) */
	int falcon_h1;       /* Falcon-H1: a parallel hybrid (parallel_ssm) with Bamba's tensor names */
	int jamba;           /* Jamba: Mamba (1) and attention layers, experts, Bamba's tensor names */
	int phi3;            /* Phi-3 / Phi-4: fused qkv_proj and gate_up_proj read as views of their rows */
	int granite_moe;     /* Granite 3's mixtures of experts (granitemoe, granitemoeshared): Granite
			      * 4.0's expert and shared_mlp names */
	int cohere2;         /* Cohere2: interleaved RoPE, q_proj / k_proj rows reordered when imported */
	int qwen3_next;      /* Qwen3-Next: gated DeltaNet and gated attention, (1 + w) norms, experts
			      * with a gated shared expert (mlp.shared_expert.*) */
	int moe_split;       /* experts kept apart in the checkpoint, one tensor per expert and matrix:
			      * 1 Qwen3-MoE's names (mlp.gate, mlp.experts.E.{gate,up,down}_proj), 2
			      * Mixtral's (block_sparse_moe.gate, .experts.E.{w1,w3,w2}), 3 Jamba's
			      * (feed_forward.router, feed_forward.experts.E.*); the run's checkpoint keeps
			      * them apart too, under the toolkit's names (sb_lm_expert_name) */
	int olmo;            /* OLMo 2/3: its post-norms' names mapped as Gemma's */
	int gemma;           /* 2: Gemma 2; 3: Gemma 3's text model (sandwich norms' names mapped, (1 + w) norms) */
	int gemma3_mm;       /* ... inside Gemma3ForConditionalGeneration (language_model.*, vision skipped) */
	int max_pos;         /* max_position_embeddings */
	int sliding_window;  /* Mistral's (0 = none) */
	char ffn_rule[320];  /* LFM2: how the feed-forward width follows from the config ("" otherwise) */
};

/* A Hugging Face config.json (text json[n], named `name` in messages) as a model
 * configuration, and *info. */
int sb_lm_hf_config(const char *json, size_t n, const char *name, struct sb_lm_cfg *cfg, struct sb_lm_hf_info *info,
		    struct sb_err *err);

/* LFM2's name of the toolkit's tensor `ours` (the same for the tensors whose names agree):
 * operator_norm, ffn_norm, self_attn.out_proj, self_attn.{q,k}_layernorm,
 * feed_forward.w1 / w3 / w2 and model.embedding_norm for input_layernorm,
 * post_attention_layernorm, self_attn.o_proj, self_attn.{q,k}_norm, mlp.gate_proj / up_proj /
 * down_proj and model.norm. */
void sb_lm_lfm2_name(const char *ours, char *out, size_t cap);

/* Gemma 3's name of the toolkit's tensor `ours`: post_attention_layernorm for
 * post_mixer_layernorm, pre_feedforward_layernorm for post_attention_layernorm; the other
 * names agree. */
void sb_lm_sandwich_name(const char *ours, char *out, size_t cap);
void sb_lm_bamba_name(const char *ours, char *out, size_t cap);

/* Granite's (granitemoehybrid's) name of the toolkit's tensor `ours`; *half: 0 the whole
 * tensor, 1 or 2 the first or second half of its rows (mlp.gate_proj / mlp.up_proj are the
 * halves of shared_mlp.input_linear [2F, d]); mlp.down_proj is shared_mlp.output_linear; the
 * other names agree. */
void sb_lm_granite_name(const char *ours, char *out, size_t cap, int *half);

/* The distinct weight files named by a model.safetensors.index.json (text json[n], named
 * `name` in messages), in order of first appearance in its weight_map: *files (malloc'd,
 * *nfiles entries) receives plain file names of the directory (no '/', no leading '.'). */
int sb_lm_hf_weight_map(const char *json, size_t n, const char *name, char (**files)[256], int *nfiles,
			struct sb_err *err);

/* Import hf_dir into runs_dir/CELL_ID (run_dir receives it, >= 4096 bytes). An existing
 * run directory of the same cell is left as it is (*existed = 1); the directory appears
 * whole or not at all (built as CELL_ID.partial, then renamed). */
int sb_lm_import(const char *hf_dir, const char *runs_dir, const struct sb_lm_import_opts *o, struct sb_lm_cell *cell,
		 char *run_dir, int *existed, struct sb_err *err);

/* The tokenizer of an imported run (cell->tokenizer in run_dir), loaded from the bytes whose
 * SHA-256 is checked against the one cell.json's source recorded for the file read at import,
 * with no more tokens than the model's vocab (SB_EDATA naming the file otherwise, or when no
 * SHA-256 is recorded). */
struct sb_tok;
int sb_lm_run_tokenizer(const char *run_dir, const struct sb_lm_cell *cell, int vocab, struct sb_tok **tok,
			struct sb_err *err);

/* `sb-lm import` and `sb-lm tokenize` (train/lm_cmds.c) */
int sb_lm_import_main(int argc, char **argv);
int sb_lm_tokenize_main(int argc, char **argv);

#endif
