/* lm_model.c — the decoder LM: configuration, parameter table, training path
 * (forward and exact backward over tiles, gradient slots, AdamW) and the cached
 * evaluation path (see lm_model.h). */
#include "lm_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redzone.h"
#include "rng.h"

/* ================================================================ configuration */

void sb_lm_cfg_default(struct sb_lm_cfg *c)
{
	memset(c, 0, sizeof *c);
	c->vocab = 256;
	c->d = 64;
	snprintf(c->pattern, sizeof c->pattern, "CACA");
	c->heads = 4;
	c->kv_heads = 0; /* = heads */
	c->lin_heads = 4;
	c->conv_k = 4;
	c->conv_gate = 1;
	c->ffn = 256;
	c->norm_eps = 1e-5f;
	c->tied = 1;
	c->pos = SB_LM_POS_NONE;
	c->rope_theta = 10000.0f;
	c->rope_factor = 8.0f;
	c->rope_low_freq = 1.0f;
	c->rope_high_freq = 4.0f;
	c->rope_orig_max = 8192;
	c->rope_beta_fast = 32.0f;
	c->rope_beta_slow = 1.0f;
	c->rope_attn = 1.0f;
	c->rope_truncate = 1;
	c->ssm_groups = 1;
	c->ssm_conv_bias = 1;
	c->ssm_norm = 1;
	c->ssm_norm_groups = 1;
	c->moe_dense = 1;
	c->norm_bias = 1;
	c->attn_in_mult = c->key_mult = c->attn_out_mult = c->ssm_in_mult = c->ssm_out_mult = 1.0f;
	c->ssm_mult_z = c->ssm_mult_x = c->ssm_mult_b = c->ssm_mult_c = c->ssm_mult_dt = 1.0f;
	c->mlp_gate_mult = c->mlp_down_mult = c->logit_mult = 1.0f;
	c->emb_mult = 1.0f;
	c->resid_mult = 1.0f;
	c->logit_div = 1.0f;
	c->prenorm = 1;
	c->max_T = 256;
	c->init_std = 0.02f;
}

int sb_lm_cfg_check(struct sb_lm_cfg *c, struct sb_err *err)
{
	c->n_layer = (int)strlen(c->pattern);
	if (c->n_layer < 1 || c->n_layer > SB_LM_MAX_LAYERS)
		return SB_ERR(err, SB_EUSAGE, "model: pattern '%s' must have 1..%d layers", c->pattern, SB_LM_MAX_LAYERS);
	int nA = 0, nL = 0, nM = 0, nS = 0, nV = 0, nD = 0;
	for (int i = 0; i < c->n_layer; i++) {
		char k = c->pattern[i];
		if (!strchr("ACDLMSV", k) || !k)
			return SB_ERR(err, SB_EUSAGE, "model: pattern '%s': layer kinds are A, C, D, L, M, S and V", c->pattern);
		nV += k == 'V';
		nD += k == 'D';
		nA += k == 'A' || k == 'S';
		nS += k == 'S';
		nL += k == 'L';
		nM += k == 'M';
	}
	if (c->vocab < 2 || c->vocab > 1 << 20 || c->d < 2 || c->d > 1 << 14)
		return SB_ERR(err, SB_EUSAGE, "model: bad vocab %d or d %d", c->vocab, c->d);
	if (c->kv_heads == 0)
		c->kv_heads = c->heads;
	if (nA) {
		if (c->heads < 1 || c->kv_heads < 1 || c->heads % c->kv_heads)
			return SB_ERR(err, SB_EUSAGE, "model: heads %d must be a positive multiple of kv_heads %d", c->heads,
				      c->kv_heads);
		if (c->head_dim == 0) {
			if (c->d % c->heads)
				return SB_ERR(err, SB_EUSAGE, "model: d %d is not a multiple of heads %d", c->d, c->heads);
			c->head_dim = c->d / c->heads;
		}
		if (c->pos == SB_LM_POS_ROPE && c->head_dim % 2)
			return SB_ERR(err, SB_EUSAGE, "model: RoPE needs an even head_dim (%d)", c->head_dim);
		if (c->rope_dim < 0 || c->rope_dim % 2 || c->rope_dim > c->head_dim)
			return SB_ERR(err, SB_EUSAGE, "model: rope_dim %d must be even and at most head_dim %d (0: all)",
				      c->rope_dim, c->head_dim);
	}
	if (nS && (c->window < 1 || (c->rope_local_theta != 0.0f && !(c->rope_local_theta > 1)) ||
		   !isfinite(c->rope_local_theta)))
		return SB_ERR(err, SB_EUSAGE, "model: S layers need a window >= 1 (got %d) and rope_local_theta 0 or > 1",
			      c->window);
	if (!(c->attn_softcap >= 0) || !(c->final_softcap >= 0) || !isfinite(c->attn_softcap) ||
	    !isfinite(c->final_softcap))
		return SB_ERR(err, SB_EUSAGE, "model: attn_softcap and final_softcap must be >= 0 (0: none)");
	if (c->swiglu < 0 || c->swiglu > 2 || c->sandwich < 0 || c->sandwich > 1)
		return SB_ERR(err, SB_EUSAGE, "model: mlp is gelu, swiglu or geglu; sandwich 0 or 1");
	if (c->sandwich && !c->rmsnorm)
		return SB_ERR(err, SB_EUSAGE, "model: sandwich norms are RMSNorms (norm rmsnorm)");
	if (nL && (c->lin_heads < 1 || c->d % c->lin_heads))
		return SB_ERR(err, SB_EUSAGE, "model: d %d is not a multiple of lin_heads %d", c->d, c->lin_heads);
	if (c->mlp_gate_mult != 1.0f && !c->swiglu)
		return SB_ERR(err, SB_EUSAGE, "model: mlp_gate_mult scales a gated MLP's gate (mlp swiglu or geglu)");
	if (c->parallel_ssm < 0 || c->parallel_ssm > 1 || (c->parallel_ssm && !strchr(c->pattern, 'A')))
		return SB_ERR(err, SB_EUSAGE, "model: parallel_ssm is 0 or 1 (1: a Mamba2 mixer beside each A layer's "
					      "attention; the pattern needs A layers)");
	nM += c->parallel_ssm;
	if (nM && (c->ssm_heads < 1 || c->ssm_head_dim < 1 || c->ssm_state < 1 || c->ssm_groups < 1 ||
		   c->ssm_heads % c->ssm_groups || (int64_t)c->ssm_heads * c->ssm_head_dim > 1 << 16 ||
		   (int64_t)c->ssm_groups * c->ssm_state > 1 << 16))
		return SB_ERR(err, SB_EUSAGE,
			      "model: M layers need ssm_heads, ssm_head_dim, ssm_state >= 1 and ssm_groups >= 1 dividing "
			      "ssm_heads (got %d, %d, %d, %d)", c->ssm_heads, c->ssm_head_dim, c->ssm_state, c->ssm_groups);
	if (c->moe_experts < 0 || c->moe_experts > 1 << 12 ||
	    (c->moe_experts && (c->moe_topk < 1 || c->moe_topk > c->moe_experts || c->moe_topk > 64 || c->moe_ffn < 1 ||
				 (c->moe_dense && c->ffn < 1))))
		return SB_ERR(err, SB_EUSAGE,
			      "model: moe_experts %d needs 1 <= moe_topk (%d) <= min(moe_experts, 64), moe_ffn >= 1 (%d) and, "
			      "with moe_dense, an MLP (ffn %d)", c->moe_experts, c->moe_topk, c->moe_ffn, c->ffn);
	if (c->moe_dense < 0 || c->moe_dense > 1 || c->moe_gate < 0 || c->moe_gate > 1)
		return SB_ERR(err, SB_EUSAGE, "model: moe_dense and moe_gate are 0 or 1");
	if (c->moe_layers[0] && (strlen(c->moe_layers) != (size_t)c->n_layer ||
				 strspn(c->moe_layers, "01") != strlen(c->moe_layers) || !c->moe_experts))
		return SB_ERR(err, SB_EUSAGE, "model: moe_layers '%s' must give each of the %d layers 0 or 1 (and "
					      "moe_experts)", c->moe_layers, c->n_layer);
	for (int l = 0; l < c->n_layer && !c->moe_dense && c->ffn < 1; l++)
		if (!sb_lm_layer_moe(c, l))
			return SB_ERR(err, SB_EUSAGE, "model: layer %d has no experts and needs the dense MLP (ffn %d)", l,
				      c->ffn);
	if (nD && (c->gdn_kheads < 1 || c->gdn_vheads < 1 || c->gdn_vheads % c->gdn_kheads || c->gdn_kdim < 1 ||
		   c->gdn_vdim < 1 || (int64_t)c->gdn_vheads * c->gdn_vdim > 1 << 16 ||
		   (int64_t)c->gdn_kheads * c->gdn_kdim > 1 << 16))
		return SB_ERR(err, SB_EUSAGE,
			      "model: D layers need gdn_kheads, gdn_vheads (a multiple of gdn_kheads), gdn_kdim and gdn_vdim "
			      ">= 1 (got %d, %d, %d, %d)", c->gdn_kheads, c->gdn_vheads, c->gdn_kdim, c->gdn_vdim);
	if (c->parallel_mlp < 0 || c->parallel_mlp > 1 || c->norm_bias < 0 || c->norm_bias > 1 ||
	    (c->parallel_mlp && (!c->prenorm || c->sandwich)))
		return SB_ERR(err, SB_EUSAGE, "model: parallel_mlp and norm_bias are 0 or 1; parallel_mlp needs prenorm 1 and "
					      "sandwich 0");
	if (c->attn_gate < 0 || c->attn_gate > 1 || c->moe_shared_gate < 0 || c->moe_shared_gate > 1 ||
	    (c->moe_shared_gate && (!c->moe_experts || !c->moe_dense)))
		return SB_ERR(err, SB_EUSAGE, "model: attn_gate and moe_shared_gate are 0 or 1; moe_shared_gate gates the "
					      "dense MLP beside the experts (moe_experts, moe_dense 1)");
	if (nV && (c->ssm_inner < 1 || c->ssm_inner > 1 << 16 || c->ssm_dt_rank < 1 || c->ssm_dt_rank > 1 << 16 ||
		   c->ssm_state < 1 || c->ssm_state > 1 << 16 || c->ssm_inner_norm < 0 || c->ssm_inner_norm > 1))
		return SB_ERR(err, SB_EUSAGE,
			      "model: V layers need ssm_inner, ssm_dt_rank and ssm_state >= 1, ssm_inner_norm 0 or 1 (got %d, "
			      "%d, %d, %d)", c->ssm_inner, c->ssm_dt_rank, c->ssm_state, c->ssm_inner_norm);
	if (c->ssm_conv_bias < 0 || c->ssm_conv_bias > 1 || c->ssm_proj_bias < 0 || c->ssm_proj_bias > 3)
		return SB_ERR(err, SB_EUSAGE, "model: ssm_conv_bias is 0 or 1; ssm_proj_bias 0 (none), 1 (in_proj and "
					      "out_proj), 2 (in_proj) or 3 (out_proj)");
	if (c->ssm_norm < 0 || c->ssm_norm > 2 || c->ssm_norm_groups < 1 ||
	    (nM && (c->ssm_heads * c->ssm_head_dim) % c->ssm_norm_groups))
		return SB_ERR(err, SB_EUSAGE, "model: ssm_norm is 0 (none), 1 (after the gate) or 2 (before it); "
					      "ssm_norm_groups (%d) must divide ssm_heads * ssm_head_dim", c->ssm_norm_groups);
	const float mup[] = {c->attn_in_mult, c->key_mult,   c->attn_out_mult, c->ssm_in_mult,   c->ssm_out_mult,
			     c->ssm_mult_z,   c->ssm_mult_x, c->ssm_mult_b,    c->ssm_mult_c,    c->ssm_mult_dt,
			     c->mlp_gate_mult, c->mlp_down_mult, c->logit_mult};
	for (size_t i = 0; i < sizeof mup / sizeof *mup; i++)
		if (!(mup[i] > 0) || !isfinite(mup[i]))
			return SB_ERR(err, SB_EUSAGE, "model: Falcon-H1's multipliers (attn_in_mult ... logit_mult) must be "
						      "finite and > 0");
	if (!(c->emb_mult > 0) || !(c->resid_mult > 0) || !(c->attn_scale >= 0) || !(c->logit_div > 0) ||
	    !isfinite(c->emb_mult) || !isfinite(c->resid_mult) || !isfinite(c->attn_scale) || !isfinite(c->logit_div))
		return SB_ERR(err, SB_EUSAGE, "model: emb_mult, resid_mult and logit_div must be > 0, attn_scale >= 0");
	if (c->conv_k < 1 || c->conv_k > 64)
		return SB_ERR(err, SB_EUSAGE, "model: conv_k %d out of 1..64", c->conv_k);
	if (c->ffn < 0 || c->max_T < 1 || !(c->norm_eps > 0) || !(c->init_std > 0) || !(c->rope_theta > 1))
		return SB_ERR(err, SB_EUSAGE, "model: bad ffn, max_T, norm_eps, init_std or rope_theta");
	if (c->attn_bias < 0 || c->attn_bias > 2 || c->qk_norm < 0 || c->qk_norm > 2 || c->conv_bias < 0 ||
	    c->conv_bias > 1)
		return SB_ERR(err, SB_EUSAGE,
			      "model: attn_bias is 0, 1 (q/k/v/o) or 2 (q/k/v); qk_norm 0, 1 (per head) or 2 (all heads); "
			      "conv_bias 0 or 1");
	if (c->rope_layers[0] && (strlen(c->rope_layers) != (size_t)c->n_layer ||
				  strspn(c->rope_layers, "01") != strlen(c->rope_layers) || c->pos != SB_LM_POS_ROPE))
		return SB_ERR(err, SB_EUSAGE, "model: rope_layers '%s' must give each of the %d layers 0 or 1 (and pos "
					      "rope)", c->rope_layers, c->n_layer);
	if (c->prenorm < 0 || c->prenorm > 1 || (!c->prenorm && (!c->sandwich || !c->rmsnorm)))
		return SB_ERR(err, SB_EUSAGE, "model: prenorm is 0 or 1; 0 (OLMo's post-norm layout) needs sandwich 1 and "
					      "norm rmsnorm");
	if (c->rope_scaling < 0 || c->rope_scaling > 3)
		return SB_ERR(err, SB_EUSAGE, "model: rope_scaling is none, llama3, linear or yarn");
	if (c->rope_scaling == 1 && (!(c->rope_factor >= 1) || !(c->rope_low_freq > 0) ||
				     !(c->rope_high_freq > c->rope_low_freq) || c->rope_orig_max < 1))
		return SB_ERR(err, SB_EUSAGE,
			      "model: llama3 RoPE scaling needs rope_factor >= 1, 0 < rope_low_freq < rope_high_freq and "
			      "rope_orig_max >= 1");
	if (c->rope_scaling >= 2 && (!(c->rope_factor >= 1) || !isfinite(c->rope_factor)))
		return SB_ERR(err, SB_EUSAGE, "model: %s RoPE scaling needs a finite rope_factor >= 1",
			      c->rope_scaling == 2 ? "linear" : "yarn");
	if (c->rope_scaling == 3 &&
	    (c->rope_orig_max < 1 || !(c->rope_beta_fast > 0) || !(c->rope_beta_slow > 0) || !isfinite(c->rope_beta_fast) ||
	     !isfinite(c->rope_beta_slow) || !(c->rope_attn > 0) || !isfinite(c->rope_attn) || c->rope_truncate < 0 ||
	     c->rope_truncate > 1))
		return SB_ERR(err, SB_EUSAGE,
			      "model: yarn RoPE scaling needs rope_orig_max >= 1, finite rope_beta_fast, rope_beta_slow and "
			      "rope_attn > 0, rope_truncate 0 or 1");
	return 0;
}

static const char *const rope_scaling_name[4] = {"none", "llama3", "linear", "yarn"};

static const char *pos_name(enum sb_lm_pos p) { return p == SB_LM_POS_LEARNED ? "learned" : p == SB_LM_POS_ROPE ? "rope" : "none"; }

static int set_kv(struct sb_lm_cfg *c, const char *key, const char *sval, double num, int is_num, struct sb_err *err)
{
#define INT_FIELD(NAME)                                                                                            \
	if (strcmp(key, #NAME) == 0) {                                                                             \
		if (!is_num || num != floor(num) || fabs(num) > 1e9)                                               \
			return SB_ERR(err, SB_EUSAGE, "model: '%s' must be an integer", key);                      \
		c->NAME = (int)num;                                                                                \
		return 0;                                                                                          \
	}
#define FLT_FIELD(NAME)                                                                                            \
	if (strcmp(key, #NAME) == 0) {                                                                             \
		if (!is_num || !isfinite((float)num))                                                              \
			return SB_ERR(err, SB_EUSAGE, "model: '%s' must be a number in float range", key);         \
		c->NAME = (float)num;                                                                              \
		return 0;                                                                                          \
	}
	INT_FIELD(vocab)
	INT_FIELD(d)
	INT_FIELD(heads)
	INT_FIELD(kv_heads)
	INT_FIELD(head_dim)
	INT_FIELD(lin_heads)
	INT_FIELD(conv_k)
	INT_FIELD(conv_gate)
	INT_FIELD(ffn)
	INT_FIELD(bias)
	INT_FIELD(attn_bias)
	INT_FIELD(conv_bias)
	INT_FIELD(qk_norm)
	INT_FIELD(prenorm)
	INT_FIELD(sandwich)
	INT_FIELD(window)
	FLT_FIELD(rope_local_theta)
	INT_FIELD(rope_dim)
	FLT_FIELD(attn_softcap)
	FLT_FIELD(final_softcap)
	INT_FIELD(tied)
	INT_FIELD(rope_orig_max)
	FLT_FIELD(rope_factor)
	FLT_FIELD(rope_low_freq)
	FLT_FIELD(rope_high_freq)
	FLT_FIELD(rope_beta_fast)
	FLT_FIELD(rope_beta_slow)
	FLT_FIELD(rope_attn)
	INT_FIELD(rope_truncate)
	INT_FIELD(ssm_heads)
	INT_FIELD(ssm_head_dim)
	INT_FIELD(ssm_state)
	INT_FIELD(ssm_groups)
	INT_FIELD(ssm_conv_bias)
	INT_FIELD(ssm_proj_bias)
	INT_FIELD(ssm_norm)
	INT_FIELD(ssm_inner)
	INT_FIELD(ssm_dt_rank)
	INT_FIELD(ssm_inner_norm)
	INT_FIELD(gdn_kheads)
	INT_FIELD(gdn_vheads)
	INT_FIELD(gdn_kdim)
	INT_FIELD(gdn_vdim)
	INT_FIELD(attn_gate)
	INT_FIELD(parallel_mlp)
	INT_FIELD(norm_bias)
	INT_FIELD(moe_shared_gate)
	INT_FIELD(ssm_norm_groups)
	INT_FIELD(parallel_ssm)
	FLT_FIELD(attn_in_mult)
	FLT_FIELD(key_mult)
	FLT_FIELD(attn_out_mult)
	FLT_FIELD(ssm_in_mult)
	FLT_FIELD(ssm_out_mult)
	FLT_FIELD(ssm_mult_z)
	FLT_FIELD(ssm_mult_x)
	FLT_FIELD(ssm_mult_b)
	FLT_FIELD(ssm_mult_c)
	FLT_FIELD(ssm_mult_dt)
	FLT_FIELD(mlp_gate_mult)
	FLT_FIELD(mlp_down_mult)
	FLT_FIELD(logit_mult)
	INT_FIELD(moe_experts)
	INT_FIELD(moe_topk)
	INT_FIELD(moe_ffn)
	INT_FIELD(moe_dense)
	INT_FIELD(moe_gate)
	FLT_FIELD(emb_mult)
	FLT_FIELD(resid_mult)
	FLT_FIELD(attn_scale)
	FLT_FIELD(logit_div)
	INT_FIELD(max_T)
	FLT_FIELD(norm_eps)
	FLT_FIELD(rope_theta)
	FLT_FIELD(init_std)
#undef INT_FIELD
#undef FLT_FIELD
	if (!sval)
		return SB_ERR(err, SB_EUSAGE, "model: '%s' must be a string (or is unknown)", key);
	if (strcmp(key, "pattern") == 0) {
		if (strlen(sval) >= sizeof c->pattern)
			return SB_ERR(err, SB_EUSAGE, "model: pattern too long");
		snprintf(c->pattern, sizeof c->pattern, "%s", sval);
		return 0;
	}
	if (strcmp(key, "moe_layers") == 0) {
		if (strlen(sval) >= sizeof c->moe_layers)
			return SB_ERR(err, SB_EUSAGE, "model: moe_layers too long");
		snprintf(c->moe_layers, sizeof c->moe_layers, "%s", sval);
		return 0;
	}
	if (strcmp(key, "rope_layers") == 0) {
		if (strlen(sval) >= sizeof c->rope_layers)
			return SB_ERR(err, SB_EUSAGE, "model: rope_layers too long");
		snprintf(c->rope_layers, sizeof c->rope_layers, "%s", sval);
		return 0;
	}
	if (strcmp(key, "mlp") == 0) {
		if (strcmp(sval, "gelu") && strcmp(sval, "swiglu") && strcmp(sval, "geglu"))
			return SB_ERR(err, SB_EUSAGE, "model: mlp is gelu, swiglu or geglu");
		c->swiglu = !strcmp(sval, "swiglu") ? 1 : !strcmp(sval, "geglu") ? 2 : 0;
		return 0;
	}
	if (strcmp(key, "norm") == 0) {
		if (strcmp(sval, "layernorm") && strcmp(sval, "rmsnorm"))
			return SB_ERR(err, SB_EUSAGE, "model: norm is layernorm or rmsnorm");
		c->rmsnorm = strcmp(sval, "rmsnorm") == 0;
		return 0;
	}
	if (strcmp(key, "rope_scaling") == 0) {
		for (int i = 0; i < 4; i++)
			if (!strcmp(sval, rope_scaling_name[i])) {
				c->rope_scaling = i;
				return 0;
			}
		return SB_ERR(err, SB_EUSAGE, "model: rope_scaling is none, llama3, linear or yarn");
	}
	if (strcmp(key, "pos") == 0) {
		if (strcmp(sval, "none") == 0)
			c->pos = SB_LM_POS_NONE;
		else if (strcmp(sval, "learned") == 0)
			c->pos = SB_LM_POS_LEARNED;
		else if (strcmp(sval, "rope") == 0)
			c->pos = SB_LM_POS_ROPE;
		else
			return SB_ERR(err, SB_EUSAGE, "model: pos is none, learned or rope");
		return 0;
	}
	return SB_ERR(err, SB_EUSAGE, "model: unknown field '%s'", key);
}

int sb_lm_cfg_set(struct sb_lm_cfg *c, const char *kv, struct sb_err *err)
{
	const char *eq = strchr(kv, '=');
	if (!eq || eq == kv)
		return SB_ERR(err, SB_EUSAGE, "model: expected key=value, got '%s'", kv);
	char key[64];
	snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
	char *end;
	double num = strtod(eq + 1, &end);
	int is_num = end != eq + 1 && *end == 0;
	return set_kv(c, key, eq + 1, num, is_num, err);
}

int sb_lm_cfg_from_json(struct sb_lm_cfg *c, const struct sb_json *obj, struct sb_err *err)
{
	if (!obj || obj->type != SB_JSON_OBJECT)
		return SB_ERR(err, SB_EDATA, "model: expected a JSON object");
	for (size_t i = 0; i < obj->n; i++) {
		const struct sb_json *v = obj->items[i];
		if (strcmp(obj->keys[i], "n_layer") == 0 || strcmp(obj->keys[i], "parameter_count") == 0)
			continue; /* derived */
		int rc = 0;
		if (v->type == SB_JSON_NUMBER)
			rc = set_kv(c, obj->keys[i], NULL, v->number, 1, err);
		else if (v->type == SB_JSON_STRING)
			rc = set_kv(c, obj->keys[i], v->text, 0, 0, err);
		else if (v->type == SB_JSON_BOOL)
			rc = set_kv(c, obj->keys[i], NULL, v->boolean, 1, err);
		else
			rc = SB_ERR(err, SB_EDATA, "model: field '%s' has the wrong type", obj->keys[i]);
		if (rc) /* a model read from data: bad data, not misuse */
			return err ? (err->code = SB_EDATA) : SB_EDATA;
	}
	int rc = sb_lm_cfg_check(c, err);
	if (rc && err)
		err->code = SB_EDATA;
	return rc ? SB_EDATA : 0;
}

void sb_lm_cfg_json(struct sb_jw *w, const struct sb_lm_cfg *c)
{
	sb_jw_obj(w);
	sb_jw_kint(w, "vocab", c->vocab);
	sb_jw_kint(w, "d", c->d);
	sb_jw_kstr(w, "pattern", c->pattern);
	sb_jw_kint(w, "n_layer", c->n_layer);
	sb_jw_kint(w, "heads", c->heads);
	sb_jw_kint(w, "kv_heads", c->kv_heads);
	sb_jw_kint(w, "head_dim", c->head_dim);
	sb_jw_kint(w, "lin_heads", c->lin_heads);
	sb_jw_kint(w, "conv_k", c->conv_k);
	sb_jw_kint(w, "conv_gate", c->conv_gate);
	sb_jw_kint(w, "ffn", c->ffn);
	sb_jw_kstr(w, "mlp", c->swiglu == 2 ? "geglu" : c->swiglu ? "swiglu" : "gelu");
	sb_jw_kstr(w, "norm", c->rmsnorm ? "rmsnorm" : "layernorm");
	sb_jw_kf32(w, "norm_eps", c->norm_eps);
	sb_jw_kint(w, "bias", c->bias);
	sb_jw_kint(w, "attn_bias", c->attn_bias);
	sb_jw_kint(w, "tied", c->tied);
	sb_jw_kstr(w, "pos", pos_name(c->pos));
	if (c->rope_layers[0])
		sb_jw_kstr(w, "rope_layers", c->rope_layers);
	sb_jw_kf32(w, "rope_theta", c->rope_theta);
	/* the fields of pretrained layouts only when used (cells of the trained models keep their ids) */
	if (c->qk_norm)
		sb_jw_kint(w, "qk_norm", c->qk_norm);
	if (!c->prenorm)
		sb_jw_kint(w, "prenorm", c->prenorm);
	if (c->conv_bias)
		sb_jw_kint(w, "conv_bias", c->conv_bias);
	if (c->sandwich)
		sb_jw_kint(w, "sandwich", c->sandwich);
	if (strchr(c->pattern, 'S')) {
		sb_jw_kint(w, "window", c->window);
		sb_jw_kf32(w, "rope_local_theta", c->rope_local_theta);
	}
	if (c->rope_dim)
		sb_jw_kint(w, "rope_dim", c->rope_dim);
	if (c->attn_softcap != 0.0f)
		sb_jw_kf32(w, "attn_softcap", c->attn_softcap);
	if (c->final_softcap != 0.0f)
		sb_jw_kf32(w, "final_softcap", c->final_softcap);
	if (c->rope_scaling) {
		sb_jw_kstr(w, "rope_scaling", rope_scaling_name[c->rope_scaling]);
		sb_jw_kf32(w, "rope_factor", c->rope_factor);
	}
	if (c->rope_scaling == 1) {
		sb_jw_kf32(w, "rope_low_freq", c->rope_low_freq);
		sb_jw_kf32(w, "rope_high_freq", c->rope_high_freq);
	}
	if (c->rope_scaling == 1 || c->rope_scaling == 3)
		sb_jw_kint(w, "rope_orig_max", c->rope_orig_max);
	if (c->rope_scaling == 3) {
		sb_jw_kf32(w, "rope_beta_fast", c->rope_beta_fast);
		sb_jw_kf32(w, "rope_beta_slow", c->rope_beta_slow);
		sb_jw_kf32(w, "rope_attn", c->rope_attn);
		sb_jw_kint(w, "rope_truncate", c->rope_truncate);
	}
	if (c->parallel_ssm)
		sb_jw_kint(w, "parallel_ssm", c->parallel_ssm);
	if (strchr(c->pattern, 'D')) {
		sb_jw_kint(w, "gdn_kheads", c->gdn_kheads);
		sb_jw_kint(w, "gdn_vheads", c->gdn_vheads);
		sb_jw_kint(w, "gdn_kdim", c->gdn_kdim);
		sb_jw_kint(w, "gdn_vdim", c->gdn_vdim);
	}
	if (c->attn_gate)
		sb_jw_kint(w, "attn_gate", c->attn_gate);
	if (c->parallel_mlp)
		sb_jw_kint(w, "parallel_mlp", c->parallel_mlp);
	if (!c->norm_bias)
		sb_jw_kint(w, "norm_bias", c->norm_bias);
	if (strchr(c->pattern, 'V')) {
		sb_jw_kint(w, "ssm_inner", c->ssm_inner);
		sb_jw_kint(w, "ssm_dt_rank", c->ssm_dt_rank);
		sb_jw_kint(w, "ssm_inner_norm", c->ssm_inner_norm);
		if (!strchr(c->pattern, 'M') && !c->parallel_ssm) {
			sb_jw_kint(w, "ssm_state", c->ssm_state);
			sb_jw_kint(w, "ssm_conv_bias", c->ssm_conv_bias);
			sb_jw_kint(w, "ssm_proj_bias", c->ssm_proj_bias);
		}
	}
	if (strchr(c->pattern, 'M') || c->parallel_ssm) {
		sb_jw_kint(w, "ssm_heads", c->ssm_heads);
		sb_jw_kint(w, "ssm_head_dim", c->ssm_head_dim);
		sb_jw_kint(w, "ssm_state", c->ssm_state);
		sb_jw_kint(w, "ssm_groups", c->ssm_groups);
		sb_jw_kint(w, "ssm_conv_bias", c->ssm_conv_bias);
		sb_jw_kint(w, "ssm_proj_bias", c->ssm_proj_bias);
		if (c->ssm_norm != 1)
			sb_jw_kint(w, "ssm_norm", c->ssm_norm);
		if (c->ssm_norm_groups != 1)
			sb_jw_kint(w, "ssm_norm_groups", c->ssm_norm_groups);
	}
	if (c->moe_experts) {
		sb_jw_kint(w, "moe_experts", c->moe_experts);
		sb_jw_kint(w, "moe_topk", c->moe_topk);
		sb_jw_kint(w, "moe_ffn", c->moe_ffn);
		if (c->moe_layers[0])
			sb_jw_kstr(w, "moe_layers", c->moe_layers);
		if (!c->moe_dense)
			sb_jw_kint(w, "moe_dense", c->moe_dense);
		if (c->moe_gate)
			sb_jw_kint(w, "moe_gate", c->moe_gate);
		if (c->moe_shared_gate)
			sb_jw_kint(w, "moe_shared_gate", c->moe_shared_gate);
	}
	if (c->emb_mult != 1.0f)
		sb_jw_kf32(w, "emb_mult", c->emb_mult);
	if (c->resid_mult != 1.0f)
		sb_jw_kf32(w, "resid_mult", c->resid_mult);
	if (c->attn_scale != 0.0f)
		sb_jw_kf32(w, "attn_scale", c->attn_scale);
	if (c->logit_div != 1.0f)
		sb_jw_kf32(w, "logit_div", c->logit_div);
	const struct {
		const char *key;
		float v;
	} mup[] = {{"attn_in_mult", c->attn_in_mult},   {"key_mult", c->key_mult},
		   {"attn_out_mult", c->attn_out_mult}, {"ssm_in_mult", c->ssm_in_mult},
		   {"ssm_out_mult", c->ssm_out_mult},   {"ssm_mult_z", c->ssm_mult_z},
		   {"ssm_mult_x", c->ssm_mult_x},       {"ssm_mult_b", c->ssm_mult_b},
		   {"ssm_mult_c", c->ssm_mult_c},       {"ssm_mult_dt", c->ssm_mult_dt},
		   {"mlp_gate_mult", c->mlp_gate_mult}, {"mlp_down_mult", c->mlp_down_mult},
		   {"logit_mult", c->logit_mult}};
	for (size_t i = 0; i < sizeof mup / sizeof *mup; i++)
		if (mup[i].v != 1.0f)
			sb_jw_kf32(w, mup[i].key, mup[i].v);
	sb_jw_kint(w, "max_T", c->max_T);
	sb_jw_kf32(w, "init_std", c->init_std);
	sb_jw_obj_end(w);
}

/* ================================================================ parameter table */

struct table {
	struct sb_lm_param *p;
	int n, cap;
	size_t total;
	int oom;
};

static void tadd(struct table *t, const char *name, int ndim, int64_t s0, int64_t s1, int64_t s2, enum sb_lm_init init,
		 float a, int decay, int linear)
{
	if (t->oom)
		return;
	if (t->n == t->cap) {
		int cap = t->cap ? 2 * t->cap : 64;
		void *q = realloc(t->p, (size_t)cap * sizeof *t->p);
		if (!q) {
			t->oom = 1;
			return;
		}
		t->p = q;
		t->cap = cap;
	}
	struct sb_lm_param *p = &t->p[t->n++];
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "%s", name);
	p->ndim = ndim;
	p->shape[0] = s0;
	p->shape[1] = s1;
	p->shape[2] = s2;
	p->numel = (size_t)s0 * (size_t)(ndim > 1 ? s1 : 1) * (size_t)(ndim > 2 ? s2 : 1);
	p->offset = t->total;
	/* keep every tensor 16-float aligned (vector loads), except a SwiGLU gate, which
	 * must be followed directly by its up projection (one [2F, d] product) */
	t->total += strstr(name, "gate_proj") ? p->numel : (p->numel + 15) & ~(size_t)15;
	p->init = init;
	p->a = a;
	p->decay = decay;
	p->linear = linear;
}

/* A Mamba2 mixer's tensors in layer l: Granite's names (model.layers.N.mamba.*); the
 * initialisation is only a placeholder (evaluation-only: a checkpoint is loaded) */
static void mamba_params(struct table *t, const struct sb_lm_cfg *c, int l, float std, float ostd, float cb)
{
	char nm[80];
	int d = c->d, I = c->ssm_heads * c->ssm_head_dim, GN = c->ssm_groups * c->ssm_state, H = c->ssm_heads;
	int cd = I + 2 * GN, bin = c->ssm_proj_bias == 1 || c->ssm_proj_bias == 2;
	int bout = c->ssm_proj_bias == 1 || c->ssm_proj_bias == 3;
#define NM(fmt) (snprintf(nm, sizeof nm, "model.layers.%d." fmt, l), nm)
	tadd(t, NM("mamba.in_proj.weight"), 2, I + cd + H, d, 0, SB_LM_INIT_NORMAL, std, 1, 1);
	if (bin)
		tadd(t, NM("mamba.in_proj.bias"), 1, I + cd + H, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
	tadd(t, NM("mamba.conv1d.weight"), 3, cd, 1, c->conv_k, SB_LM_INIT_UNIFORM, cb, 1, 0);
	if (c->ssm_conv_bias)
		tadd(t, NM("mamba.conv1d.bias"), 1, cd, 0, 0, SB_LM_INIT_UNIFORM, cb, 0, 0);
	tadd(t, NM("mamba.dt_bias"), 1, H, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
	tadd(t, NM("mamba.A_log"), 1, H, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
	tadd(t, NM("mamba.D"), 1, H, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
	if (c->ssm_norm)
		tadd(t, NM("mamba.norm.weight"), 1, I, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
	tadd(t, NM("mamba.out_proj.weight"), 2, d, I, 0, SB_LM_INIT_NORMAL, ostd, 1, 1);
	if (bout)
		tadd(t, NM("mamba.out_proj.bias"), 1, d, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
#undef NM
}

/* A Mamba (1) mixer's tensors in layer l (Jamba's names, model.layers.N.mamba.*; a placeholder
 * initialisation: evaluation only) */
static void mamba1_params(struct table *t, const struct sb_lm_cfg *c, int l, float std, float ostd, float cb)
{
	char nm[80];
	int d = c->d, I = c->ssm_inner, N = c->ssm_state, R = c->ssm_dt_rank;
	int bin = c->ssm_proj_bias == 1 || c->ssm_proj_bias == 2, bout = c->ssm_proj_bias == 1 || c->ssm_proj_bias == 3;
#define NM(fmt) (snprintf(nm, sizeof nm, "model.layers.%d." fmt, l), nm)
	tadd(t, NM("mamba.in_proj.weight"), 2, 2 * I, d, 0, SB_LM_INIT_NORMAL, std, 1, 1);
	if (bin)
		tadd(t, NM("mamba.in_proj.bias"), 1, 2 * I, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
	tadd(t, NM("mamba.conv1d.weight"), 3, I, 1, c->conv_k, SB_LM_INIT_UNIFORM, cb, 1, 0);
	if (c->ssm_conv_bias)
		tadd(t, NM("mamba.conv1d.bias"), 1, I, 0, 0, SB_LM_INIT_UNIFORM, cb, 0, 0);
	tadd(t, NM("mamba.x_proj.weight"), 2, R + 2 * N, I, 0, SB_LM_INIT_NORMAL, std, 1, 1);
	tadd(t, NM("mamba.dt_proj.weight"), 2, I, R, 0, SB_LM_INIT_NORMAL, std, 1, 1);
	tadd(t, NM("mamba.dt_proj.bias"), 1, I, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
	tadd(t, NM("mamba.A_log"), 2, I, N, 0, SB_LM_INIT_ZERO, 0, 0, 0);
	tadd(t, NM("mamba.D"), 1, I, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
	if (c->ssm_inner_norm) {
		tadd(t, NM("mamba.dt_layernorm.weight"), 1, R, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
		tadd(t, NM("mamba.b_layernorm.weight"), 1, N, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
		tadd(t, NM("mamba.c_layernorm.weight"), 1, N, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
	}
	tadd(t, NM("mamba.out_proj.weight"), 2, d, I, 0, SB_LM_INIT_NORMAL, ostd, 1, 1);
	if (bout)
		tadd(t, NM("mamba.out_proj.bias"), 1, d, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
#undef NM
}

int sb_lm_param_table(const struct sb_lm_cfg *c, struct sb_lm_param **out, int *n, size_t *n_floats,
		      struct sb_err *err)
{
	struct table t = {0};
	int d = c->d, V = c->vocab, F = c->ffn, L = c->n_layer;
	int qd = c->heads * c->head_dim, kvd = c->kv_heads * c->head_dim;
	float std = c->init_std, ostd = c->init_std / sqrtf(2.0f * (float)L), cb = 1.0f / sqrtf((float)c->conv_k);
	char nm[80];
	tadd(&t, "model.embed_tokens.weight", 2, V, d, 0, SB_LM_INIT_NORMAL, std, 1, 0);
	if (c->pos == SB_LM_POS_LEARNED)
		tadd(&t, "model.embed_positions.weight", 2, c->max_T, d, 0, SB_LM_INIT_NORMAL, std, 1, 0);
	for (int l = 0; l < L; l++) {
		char k = c->pattern[l];
#define NM(fmt) (snprintf(nm, sizeof nm, "model.layers.%d." fmt, l), nm)
		if (c->prenorm)
			tadd(&t, NM("input_layernorm.weight"), 1, d, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
		if (c->prenorm && !c->rmsnorm && c->norm_bias)
			tadd(&t, NM("input_layernorm.bias"), 1, d, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
		if (k == 'A' || k == 'S' || k == 'L') {
			int att = k != 'L';
			const char *pre = att ? "self_attn" : "linear_attn";
			int qo = att ? qd : d, ko = att ? kvd : d;
			int qrows = att && c->attn_gate ? 2 * qd : qo; /* Qwen3-Next: each head's query, then its gate */
			const char *proj[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
			int outs[4] = {qrows, ko, ko, d}, ins[4] = {d, d, d, qo};
			for (int i = 0; i < 4; i++) {
				snprintf(nm, sizeof nm, "model.layers.%d.%s.%s.weight", l, pre, proj[i]);
				tadd(&t, nm, 2, outs[i], ins[i], 0, SB_LM_INIT_NORMAL, i == 3 ? ostd : std, 1, 1);
				if (c->attn_bias == 1 || (c->attn_bias == 2 && i < 3)) {
					snprintf(nm, sizeof nm, "model.layers.%d.%s.%s.bias", l, pre, proj[i]);
					tadd(&t, nm, 1, outs[i], 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
				}
			}
			if (att && c->qk_norm) { /* per head, or over all heads (2) */
				tadd(&t, NM("self_attn.q_norm.weight"), 1, c->qk_norm == 2 ? qd : c->head_dim, 0, 0,
				     SB_LM_INIT_ONE, 0, 0, 0);
				tadd(&t, NM("self_attn.k_norm.weight"), 1, c->qk_norm == 2 ? kvd : c->head_dim, 0, 0,
				     SB_LM_INIT_ONE, 0, 0, 0);
			}
			if (att && k == 'A' && c->parallel_ssm) /* Falcon-H1: a mixer beside the attention */
				mamba_params(&t, c, l, std, ostd, cb);
		} else if (k == 'M') {
			mamba_params(&t, c, l, std, ostd, cb);
		} else if (k == 'V') {
			mamba1_params(&t, c, l, std, ostd, cb);
		} else if (k == 'D') { /* Qwen3-Next's names (linear_attn.*); evaluation only */
			int Kd = c->gdn_kheads * c->gdn_kdim, Vd = c->gdn_vheads * c->gdn_vdim;
			tadd(&t, NM("linear_attn.in_proj_qkvz.weight"), 2, 2 * Kd + 2 * Vd, d, 0, SB_LM_INIT_NORMAL, std, 1, 1);
			tadd(&t, NM("linear_attn.in_proj_ba.weight"), 2, 2 * c->gdn_vheads, d, 0, SB_LM_INIT_NORMAL, std, 1, 1);
			tadd(&t, NM("linear_attn.conv1d.weight"), 3, 2 * Kd + Vd, 1, c->conv_k, SB_LM_INIT_UNIFORM, cb, 1, 0);
			tadd(&t, NM("linear_attn.dt_bias"), 1, c->gdn_vheads, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
			tadd(&t, NM("linear_attn.A_log"), 1, c->gdn_vheads, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
			tadd(&t, NM("linear_attn.norm.weight"), 1, c->gdn_vdim, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
			tadd(&t, NM("linear_attn.out_proj.weight"), 2, d, Vd, 0, SB_LM_INIT_NORMAL, ostd, 1, 1);
		} else {
			int gi = c->conv_gate ? 3 : 1, cbias = c->bias || c->conv_bias;
			tadd(&t, NM("conv.in_proj.weight"), 2, gi * d, d, 0, SB_LM_INIT_NORMAL, std, 1, 1);
			if (cbias)
				tadd(&t, NM("conv.in_proj.bias"), 1, gi * d, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
			tadd(&t, NM("conv.conv.weight"), 3, d, 1, c->conv_k, SB_LM_INIT_UNIFORM, cb, 1, 0);
			if (cbias)
				tadd(&t, NM("conv.conv.bias"), 1, d, 0, 0, SB_LM_INIT_UNIFORM, cb, 0, 0);
			tadd(&t, NM("conv.out_proj.weight"), 2, d, d, 0, SB_LM_INIT_NORMAL, ostd, 1, 1);
			if (cbias)
				tadd(&t, NM("conv.out_proj.bias"), 1, d, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
		}
		if (c->sandwich)
			tadd(&t, NM("post_mixer_layernorm.weight"), 1, d, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
		int dense = sb_lm_layer_mlp(c, l), moe = sb_lm_layer_moe(c, l);
		if ((dense || moe) && !c->parallel_mlp) { /* parallel_mlp: the MLP reads the mixer's input */
			if (c->prenorm)
				tadd(&t, NM("post_attention_layernorm.weight"), 1, d, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
			if (c->prenorm && !c->rmsnorm && c->norm_bias)
				tadd(&t, NM("post_attention_layernorm.bias"), 1, d, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
		}
		if (dense) {
			if (c->swiglu) {
				/* gate and up adjacent: one [2F, d] product (linear = 2: packed together) */
				tadd(&t, NM("mlp.gate_proj.weight"), 2, F, d, 0, SB_LM_INIT_NORMAL, std, 1, 2);
				tadd(&t, NM("mlp.up_proj.weight"), 2, F, d, 0, SB_LM_INIT_NORMAL, std, 1, 0);
				if (c->bias) {
					tadd(&t, NM("mlp.gate_proj.bias"), 1, F, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
					tadd(&t, NM("mlp.up_proj.bias"), 1, F, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
				}
			} else {
				tadd(&t, NM("mlp.up_proj.weight"), 2, F, d, 0, SB_LM_INIT_NORMAL, std, 1, 1);
				if (c->bias)
					tadd(&t, NM("mlp.up_proj.bias"), 1, F, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
			}
			tadd(&t, NM("mlp.down_proj.weight"), 2, d, F, 0, SB_LM_INIT_NORMAL, ostd, 1, 1);
			if (c->bias)
				tadd(&t, NM("mlp.down_proj.bias"), 1, d, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
		}
		if (moe) { /* Granite's names; the router float, unpacked (dot products); the experts'
			    * stacks packed expert by expert (linear = 3) */
			int E = c->moe_experts, Fe = c->moe_ffn;
			tadd(&t, NM("block_sparse_moe.router.layer.weight"), 2, E, d, 0, SB_LM_INIT_NORMAL, std, 1, 0);
			tadd(&t, NM("block_sparse_moe.input_linear.weight"), 3, E, 2 * Fe, d, SB_LM_INIT_NORMAL, std, 1, 3);
			tadd(&t, NM("block_sparse_moe.output_linear.weight"), 3, E, d, Fe, SB_LM_INIT_NORMAL, ostd, 1, 3);
			if (c->moe_shared_gate)
				tadd(&t, NM("mlp.shared_expert_gate.weight"), 2, 1, d, 0, SB_LM_INIT_NORMAL, std, 1, 0);
		}
		if (dense || moe) {
			if (c->sandwich)
				tadd(&t, NM("post_feedforward_layernorm.weight"), 1, d, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
		}
#undef NM
	}
	tadd(&t, "model.norm.weight", 1, d, 0, 0, SB_LM_INIT_ONE, 0, 0, 0);
	if (!c->rmsnorm && c->norm_bias)
		tadd(&t, "model.norm.bias", 1, d, 0, 0, SB_LM_INIT_ZERO, 0, 0, 0);
	if (!c->tied)
		tadd(&t, "lm_head.weight", 2, V, d, 0, SB_LM_INIT_NORMAL, std, 1, 1);
	if (t.oom) {
		free(t.p);
		return SB_ERR(err, SB_EINTERNAL, "out of memory (parameter table)");
	}
	/* SwiGLU: gate/up biases must be adjacent too (they are, when present) */
	*out = t.p;
	*n = t.n;
	*n_floats = t.total;
	return 0;
}

static const struct sb_lm_param *find_param(const struct sb_lm_model *m, const char *name)
{
	for (int i = 0; i < m->n_params; i++)
		if (strcmp(m->params[i].name, name) == 0)
			return &m->params[i];
	return NULL;
}

static float *at(const struct sb_lm_model *m, float *base, const char *name)
{
	const struct sb_lm_param *p = find_param(m, name);
	return p ? base + p->offset : NULL;
}

void sb_lm_ptrs_at(const struct sb_lm_model *m, float *base, struct sb_lm_ptrs *o)
{
	memset(o, 0, sizeof *o);
	char nm[96];
	o->embed = at(m, base, "model.embed_tokens.weight");
	o->pos = at(m, base, "model.embed_positions.weight");
	o->lnf_w = at(m, base, "model.norm.weight");
	o->lnf_b = at(m, base, "model.norm.bias");
	o->head = m->cfg.tied ? o->embed : at(m, base, "lm_head.weight");
	for (int l = 0; l < m->cfg.n_layer; l++) {
		struct sb_lm_layer *y = &o->layer[l];
		y->kind = m->cfg.pattern[l];
#define P(field, fmt)                                                                                              \
	do {                                                                                                       \
		snprintf(nm, sizeof nm, "model.layers.%d." fmt, l);                                                \
		y->field = at(m, base, nm);                                                                        \
	} while (0)
		P(ln1_w, "input_layernorm.weight");
		P(ln1_b, "input_layernorm.bias");
		P(ln2_w, "post_attention_layernorm.weight");
		P(ln2_b, "post_attention_layernorm.bias");
		P(ln3_w, "post_mixer_layernorm.weight");
		P(ln4_w, "post_feedforward_layernorm.weight");
		if (y->kind == 'A' || y->kind == 'S') {
			P(q_w, "self_attn.q_proj.weight");
			P(q_b, "self_attn.q_proj.bias");
			P(k_w, "self_attn.k_proj.weight");
			P(k_b, "self_attn.k_proj.bias");
			P(v_w, "self_attn.v_proj.weight");
			P(v_b, "self_attn.v_proj.bias");
			P(o_w, "self_attn.o_proj.weight");
			P(o_b, "self_attn.o_proj.bias");
			P(qn_w, "self_attn.q_norm.weight");
			P(kn_w, "self_attn.k_norm.weight");
		}
		P(sg_w, "mlp.shared_expert_gate.weight");
		if (y->kind == 'D') {
			P(in_w, "linear_attn.in_proj_qkvz.weight");
			P(ba_w, "linear_attn.in_proj_ba.weight");
			P(cw, "linear_attn.conv1d.weight");
			P(dt_bias, "linear_attn.dt_bias");
			P(A_log, "linear_attn.A_log");
			P(gn_w, "linear_attn.norm.weight");
			P(out_w, "linear_attn.out_proj.weight");
		} else if (y->kind == 'L') {
			P(q_w, "linear_attn.q_proj.weight");
			P(q_b, "linear_attn.q_proj.bias");
			P(k_w, "linear_attn.k_proj.weight");
			P(k_b, "linear_attn.k_proj.bias");
			P(v_w, "linear_attn.v_proj.weight");
			P(v_b, "linear_attn.v_proj.bias");
			P(o_w, "linear_attn.o_proj.weight");
			P(o_b, "linear_attn.o_proj.bias");
		} else if (y->kind == 'M' || (y->kind == 'A' && m->cfg.parallel_ssm)) {
			P(in_w, "mamba.in_proj.weight");
			P(in_b, "mamba.in_proj.bias");
			P(cw, "mamba.conv1d.weight");
			P(cb, "mamba.conv1d.bias");
			P(dt_bias, "mamba.dt_bias");
			P(A_log, "mamba.A_log");
			P(Dskip, "mamba.D");
			P(gn_w, "mamba.norm.weight");
			P(out_w, "mamba.out_proj.weight");
			P(out_b, "mamba.out_proj.bias");
		} else if (y->kind == 'V') {
			P(in_w, "mamba.in_proj.weight");
			P(in_b, "mamba.in_proj.bias");
			P(cw, "mamba.conv1d.weight");
			P(cb, "mamba.conv1d.bias");
			P(xp_w, "mamba.x_proj.weight");
			P(dtp_w, "mamba.dt_proj.weight");
			P(dtp_b, "mamba.dt_proj.bias");
			P(A_log, "mamba.A_log");
			P(Dskip, "mamba.D");
			P(dtn_w, "mamba.dt_layernorm.weight");
			P(bn_w, "mamba.b_layernorm.weight");
			P(cn_w, "mamba.c_layernorm.weight");
			P(out_w, "mamba.out_proj.weight");
			P(out_b, "mamba.out_proj.bias");
		} else if (y->kind == 'C') {
			P(in_w, "conv.in_proj.weight");
			P(in_b, "conv.in_proj.bias");
			P(cw, "conv.conv.weight");
			P(cb, "conv.conv.bias");
			P(out_w, "conv.out_proj.weight");
			P(out_b, "conv.out_proj.bias");
		}
		if (m->cfg.swiglu) {
			P(up_w, "mlp.gate_proj.weight");
			P(up_b, "mlp.gate_proj.bias");
		} else {
			P(up_w, "mlp.up_proj.weight");
			P(up_b, "mlp.up_proj.bias");
		}
		P(down_w, "mlp.down_proj.weight");
		P(down_b, "mlp.down_proj.bias");
		P(moe_r, "block_sparse_moe.router.layer.weight");
		P(moe_in, "block_sparse_moe.input_linear.weight");
		P(moe_out, "block_sparse_moe.output_linear.weight");
#undef P
	}
}

/* ================================================================ model */

/* YaRN's factor on cos and sin, so on q and on k: scores scale by its square, folded into
 * the queries after RoPE (1: none) */
static float yarn_qscale(const struct sb_lm_cfg *c)
{
	return c->rope_scaling == 3 ? (float)((double)c->rope_attn * c->rope_attn) : 1.0f;
}

/* The factor on the queries after RoPE, on every path (attn_forward and attn_rows score
 * q.k / sqrt(head_dim)): YaRN's, times another attention scale (Granite's
 * attention_multiplier) over 1 / sqrt(head_dim); 1: neither */
static float query_scale_noyarn(const struct sb_lm_cfg *c)
{
	return c->attn_scale != 0.0f ? (float)(c->attn_scale * sqrt((double)c->head_dim)) : 1.0f;
}

static float query_scale(const struct sb_lm_cfg *c) { return query_scale_noyarn(c) * yarn_qscale(c); }

/* YaRN's bound: the (fractional) dimension index whose frequency turns `turns` times over
 * n positions (transformers' find_correction_dim) */
static double yarn_dim(double turns, int hd, double theta, double n)
{
	return hd * log(n / (turns * 6.283185307179586)) / (2.0 * log(theta));
}

void sb_lm_rope_freqs(const struct sb_lm_cfg *c, double *out)
{
	int hd = sb_lm_rope_dim(c), half = hd / 2; /* the rotated dimensions (all but a partial factor's rest) */
	double lo = 0, hi = 1;
	if (c->rope_scaling == 3) { /* the ramp's bounds: from beta_fast turns up to beta_slow turns */
		lo = yarn_dim(c->rope_beta_fast, hd, c->rope_theta, c->rope_orig_max);
		hi = yarn_dim(c->rope_beta_slow, hd, c->rope_theta, c->rope_orig_max);
		if (c->rope_truncate) {
			lo = floor(lo);
			hi = ceil(hi);
		}
		lo = fmax(lo, 0.0);
		hi = fmin(hi, hd - 1.0);
		if (lo == hi)
			hi += 0.001; /* as transformers: no division by zero */
	}
	for (int i = 0; i < half; i++) {
		double f = pow((double)c->rope_theta, -2.0 * i / hd);
		if (c->rope_scaling == 2)
			f /= c->rope_factor;
		if (c->rope_scaling == 3) { /* ramp 0: kept (extrapolated), 1: divided (interpolated) */
			double r = fmin(fmax((i - lo) / (hi - lo), 0.0), 1.0);
			f = (f / c->rope_factor) * r + f * (1.0 - r);
		}
		if (c->rope_scaling == 1) {
			/* Llama 3.1's rule: long wavelengths slowed by factor, short ones kept,
			 * linear in 1/wavelength between */
			double wl = 6.283185307179586 / f, orig = c->rope_orig_max;
			double lo_wl = orig / c->rope_low_freq, hi_wl = orig / c->rope_high_freq;
			if (wl > lo_wl)
				f /= c->rope_factor;
			else if (!(wl < hi_wl)) {
				double s = (orig / wl - c->rope_low_freq) / (c->rope_high_freq - c->rope_low_freq);
				f = (1.0 - s) * f / c->rope_factor + s * f;
			}
		}
		out[i] = f;
	}
}

/* An evaluation-only model's layout with its Linear weights and embedding table in
 * bfloat16: each such region holds numel bfloat16 (half its floats, 16-float aligned);
 * gate and up, packed together, share the gate's region; the rest as before. n_floats
 * becomes the new size. */
static void layout_bf16(struct sb_lm_model *m)
{
	size_t off = 0;
	for (int i = 0; i < m->n_params; i++) {
		struct sb_lm_param *p = &m->params[i];
		size_t nf;
		if (p->linear == 2) { /* gate, then up: 2 numel bfloat16 = numel floats */
			nf = (p->numel + 15) & ~(size_t)15;
			p->offset = off;
			m->params[i + 1].offset = off; /* up: inside the gate's region (never addressed alone) */
			off += nf;
			i++;
			continue;
		}
		int half = p->linear || !strcmp(p->name, "model.embed_tokens.weight");
		nf = half ? (p->numel + 1) / 2 : p->numel;
		p->offset = off;
		off += (nf + 15) & ~(size_t)15;
	}
	m->n_floats = off;
}

/* SB_ARENA_CHECK, a trainable model: the table laid out again with a zone of zero bytes
 * after every tensor (its rounding to 16 floats and 16 floats more; 124 bytes at most),
 * except after a SwiGLU gate's weight or bias, which the up projection's must follow
 * directly (one [2F, d] product, packed as one); recorded in m->pzones. Zero bytes, as
 * in the encoder's table (redzone.h): the flat ops over a buffer laid out like p (a slot's
 * zeroing, the slots' sum, clipping's sum of squares and scale, SAS's AdamW) leave them so. */
static int layout_zones(struct sb_lm_model *m)
{
	struct sb_redzones *rz = calloc(1, sizeof *rz);
	if (!rz)
		return -1;
	*rz = (struct sb_redzones){.on = 1, .zero = 1, .file = "lib/lm_model.c"};
	if (!(m->plain_off = malloc((size_t)m->n_params * sizeof *m->plain_off))) {
		free(rz);
		return -1;
	}
	m->plain_n = m->n_floats;
	size_t off = 0;
	for (int i = 0; i < m->n_params; i++) {
		struct sb_lm_param *p = &m->params[i];
		m->plain_off[i] = p->offset;
		p->offset = off;
		if (strstr(p->name, "gate_proj")) { /* as sb_lm_param_table */
			off += p->numel;
			continue;
		}
		if (sb_redzone_push_floats(rz, &off, p->numel, p->name)) {
			sb_redzone_free(rz);
			free(rz);
			return -1;
		}
	}
	m->n_floats = off;
	m->pzones = rz;
	return 0;
}

/* SB_ARENA_CHECK: the zones of a buffer laid out like p (what: which) */
static int pzones_check(const struct sb_lm_model *m, const float *base, const char *after, const char *what,
                        struct sb_err *err)
{
	return m->pzones && base ? sb_redzone_check(m->be, base, m->pzones, after, what, err) : 0;
}

static int model_new(struct sb_backend *be, const struct sb_lm_cfg *cfg, int eval_only, int bf16,
		     struct sb_lm_model **out, struct sb_err *err)
{
	const struct sb_backend_lm_ops *lo = sb_backend_lm(be);
	if (!lo)
		return SB_ERR(err, SB_EUSAGE, "backend '%s' lacks the LM ops (ported to the CPU backend only)", be->name);
	struct sb_lm_model *m = calloc(1, sizeof *m);
	if (!m)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	m->cfg = *cfg;
	m->be = be;
	m->lo = lo;
	int rc = sb_lm_cfg_check(&m->cfg, err);
	if (!rc)
		rc = sb_lm_param_table(&m->cfg, &m->params, &m->n_params, &m->n_floats, err);
	if (rc) {
		free(m);
		return rc;
	}
	m->bf16 = eval_only && bf16;
	if (m->bf16)
		layout_bf16(m);
	if (!eval_only && sb_redzone_wanted() && layout_zones(m)) {
		sb_lm_model_free(m);
		return SB_ERR(err, SB_EINTERNAL, "out of memory (SB_ARENA_CHECK)");
	}
	size_t extra = m->cfg.tied ? (size_t)m->cfg.vocab * m->cfg.d : 0;
	if (m->bf16)
		extra = (extra + 1) / 2;
	m->p = eval_only ? NULL : sb_be_alloc(be, m->n_floats * sizeof(float));
	m->pt = sb_be_alloc(be, (m->n_floats + extra) * sizeof(float));
	if ((!eval_only && !m->p) || !m->pt) {
		sb_lm_model_free(m);
		return SB_ERR(err, SB_EINTERNAL, "out of memory (parameters: %zu floats%s)", m->n_floats,
			      eval_only ? "" : ", twice");
	}
	sb_lm_ptrs_at(m, eval_only ? m->pt : m->p, &m->w);
	sb_lm_ptrs_at(m, m->pt, &m->wt);
	if (m->cfg.tied)
		m->wt.head = m->pt + m->n_floats;
	int half = m->cfg.head_dim > 1 ? m->cfg.head_dim / 2 : 1;
	if (!(m->rope_freq = malloc((size_t)half * sizeof *m->rope_freq)) ||
	    !(m->rope_freq_local = malloc((size_t)half * sizeof *m->rope_freq))) {
		sb_lm_model_free(m);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	sb_lm_rope_freqs(&m->cfg, m->rope_freq);
	struct sb_lm_cfg lc = m->cfg; /* S layers: their own base, no scaling */
	if (lc.rope_local_theta != 0.0f) {
		lc.rope_theta = lc.rope_local_theta;
		lc.rope_scaling = 0;
	}
	sb_lm_rope_freqs(&lc, m->rope_freq_local);
	*out = m;
	return 0;
}

int sb_lm_model_new(struct sb_backend *be, const struct sb_lm_cfg *cfg, struct sb_lm_model **out, struct sb_err *err)
{
	return model_new(be, cfg, 0, 0, out, err);
}

int sb_lm_model_new_eval(struct sb_backend *be, const struct sb_lm_cfg *cfg, int bf16, struct sb_lm_model **out,
			 struct sb_err *err)
{
	return model_new(be, cfg, 1, bf16, out, err);
}

static int expert_parts(const struct sb_tensors *ts, const struct sb_lm_param *p, int64_t e,
			const struct sb_tensor **t, int *nt, struct sb_err *err);

int sb_lm_tensors_bf16(const struct sb_lm_cfg *cfg, const struct sb_tensors *ts)
{
	struct sb_lm_cfg c = *cfg;
	struct sb_lm_param *ps;
	int n, all = 1;
	size_t nf;
	struct sb_err e = {0};
	if (sb_lm_cfg_check(&c, &e) || sb_lm_param_table(&c, &ps, &n, &nf, &e))
		return 0;
	for (int i = 0; i < n && all; i++) {
		int lin = ps[i].linear || (i > 0 && ps[i - 1].linear == 2) ||
			  !strcmp(ps[i].name, "model.embed_tokens.weight");
		const struct sb_tensor *t = lin ? sb_tensors_find(ts, ps[i].name) : NULL, *te[2];
		int nt;
		if (lin && !t && ps[i].linear == 3) /* the experts kept apart: the first expert's dtype */
			t = expert_parts(ts, &ps[i], 0, te, &nt, &e) ? NULL : te[0];
		all = !lin || (t && t->dtype == SB_BF16);
	}
	free(ps);
	return all;
}

static int refuse_eval_only(const struct sb_lm_model *m, const char *what, struct sb_err *err)
{
	return m->p ? 0 : SB_ERR(err, SB_EUSAGE, "%s: an evaluation-only model (sb_lm_model_new_eval) has no training "
					       "weights", what);
}

void sb_lm_model_free(struct sb_lm_model *m)
{
	if (!m)
		return;
	sb_be_free(m->be, m->p);
	sb_be_free(m->be, m->pt);
	free(m->rope_freq);
	free(m->rope_freq_local);
	free(m->params);
	if (m->pzones)
		sb_redzone_free(m->pzones);
	free(m->pzones);
	free(m->plain_off);
	free(m);
}

static uint64_t fnv1a64(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 1099511628211ull;
	}
	return h;
}

int sb_lm_model_init(struct sb_lm_model *m, uint64_t seed, struct sb_err *err)
{
	SB_TRY(refuse_eval_only(m, "initialisation", err));
	float *host = malloc(m->n_floats * sizeof *host);
	if (!host)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	memset(host, 0, m->n_floats * sizeof *host);
	for (int i = 0; i < m->n_params; i++) {
		const struct sb_lm_param *p = &m->params[i];
		float *x = host + p->offset;
		struct sb_rng r;
		sb_rng_init(&r, seed, SB_RNG_INIT, fnv1a64(p->name));
		for (size_t j = 0; j < p->numel; j++) {
			switch (p->init) {
			case SB_LM_INIT_NORMAL: x[j] = (float)(p->a * sb_rng_normal(&r)); break;
			case SB_LM_INIT_UNIFORM: x[j] = (float)(p->a * (2.0 * sb_rng_uniform(&r) - 1.0)); break;
			case SB_LM_INIT_ONE: x[j] = 1.0f; break;
			case SB_LM_INIT_ZERO: x[j] = 0.0f; break;
			}
		}
	}
	int rc = m->be->ops->upload(m->be, m->p, host, m->n_floats * sizeof *host, err);
	free(host);
	if (!rc)
		sb_lm_model_prepare(m);
	return rc;
}

int sb_lm_model_to_tensors(const struct sb_lm_model *m, struct sb_tensors *ts, struct sb_err *err)
{
	SB_TRY(refuse_eval_only(m, "parameters as tensors", err));
	float *host = malloc(m->n_floats * sizeof *host);
	if (!host)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = m->be->ops->download(m->be, host, m->p, m->n_floats * sizeof *host, err);
	for (int i = 0; i < m->n_params && !rc; i++) {
		const struct sb_lm_param *p = &m->params[i];
		rc = sb_tensors_add(ts, p->name, SB_F32, p->ndim, p->shape, host + p->offset, 0, err);
	}
	free(host);
	return rc;
}

float sb_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

float sb_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023u, u;
	if (e == 31)
		u = sign | 0x7f800000u | (m << 13); /* inf, NaN (payload kept) */
	else if (e)
		u = sign | ((e + 112) << 23) | (m << 13);
	else if (!m)
		u = sign;
	else { /* subnormal: m 2^-24, exact in float */
		float f = (float)m * 5.9604644775390625e-8f;
		memcpy(&u, &f, sizeof u);
		u |= sign;
	}
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static void prepare_from(struct sb_lm_model *m, const float *src);

/* numel values of tensor t (checked against p) from its value at, widened to float at dst */
static void widen(float *dst, const struct sb_tensor *t, size_t at, size_t numel)
{
	if (t->dtype == SB_F32)
		memcpy(dst, (const float *)t->data + at, numel * sizeof *dst);
	else
		for (size_t j = 0; j < numel; j++) {
			uint16_t h;
			memcpy(&h, (const char *)t->data + 2 * (at + j), 2);
			dst[j] = t->dtype == SB_BF16 ? sb_bf16_to_f32(h) : sb_f16_to_f32(h);
		}
}

int sb_lm_expert_name(const char *stacked, int e, int part, char *out, size_t cap)
{
	const char *tail = part < 2 ? ".block_sparse_moe.input_linear.weight" : ".block_sparse_moe.output_linear.weight";
	size_t n = strlen(stacked), nt = strlen(tail);
	if (n < nt || strcmp(stacked + n - nt, tail) || part < 0 || part > 2)
		return -1;
	static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};
	snprintf(out, cap, "%.*s.block_sparse_moe.experts.%d.%s.weight", (int)(n - nt), stacked, e, proj[part]);
	return 0;
}

/* An experts' stack kept apart in the checkpoint: expert e's parts (gate and up of
 * input_linear, down of output_linear), each [N, K] of the stack's [E, N, K] (gate and up
 * [N / 2, K] each); NULL, with the reason in err, when one is missing or of another shape */
static int expert_parts(const struct sb_tensors *ts, const struct sb_lm_param *p, int64_t e,
			const struct sb_tensor **t, int *nt, struct sb_err *err)
{
	char nm[160];
	int in = sb_lm_expert_name(p->name, 0, 0, nm, sizeof nm) == 0;
	*nt = in ? 2 : 1;
	for (int k = 0; k < *nt; k++) {
		sb_lm_expert_name(p->name, (int)e, in ? k : 2, nm, sizeof nm);
		t[k] = sb_tensors_find(ts, nm);
		int64_t rows = in ? p->shape[1] / 2 : p->shape[1];
		if (!t[k])
			return SB_ERR(err, SB_EDATA, "checkpoint lacks tensor '%s' (or the stack '%s')", nm, p->name);
		if ((t[k]->dtype != SB_F32 && t[k]->dtype != SB_BF16 && t[k]->dtype != SB_F16) || t[k]->ndim != 2 ||
		    t[k]->shape[0] != rows || t[k]->shape[1] != p->shape[2] || (k && t[k]->dtype != t[0]->dtype))
			return SB_ERR(err, SB_EDATA, "checkpoint tensor '%s' has another dtype or shape", nm);
	}
	return 0;
}

/* An experts' stack from its experts' tensors, expert by expert: widened into the full
 * model's host buffer at the stack's place, or packed into pt as a stack's expert is (the
 * bfloat16 ones copied as they are); host holds at least one expert's matrix */
static int load_experts(struct sb_lm_model *m, const struct sb_lm_param *p, const struct sb_tensors *ts, float *host,
			struct sb_err *err)
{
	size_t one = p->numel / (size_t)p->shape[0];
	uint16_t *h16 = (uint16_t *)(void *)host;
	for (int64_t e = 0; e < p->shape[0]; e++) {
		const struct sb_tensor *t[2];
		int nt;
		SB_TRY(expert_parts(ts, p, e, t, &nt, err));
		size_t part = one / (size_t)nt;
		if (m->bf16 && t[0]->dtype != SB_BF16)
			return SB_ERR(err, SB_EDATA, "checkpoint tensor of expert %lld of '%s' is not bfloat16 (the model was "
						     "opened for bfloat16 weights)", (long long)e, p->name);
		for (int k = 0; k < nt; k++)
			if (m->p)
				widen(host + p->offset + one * (size_t)e + part * (size_t)k, t[k], 0, part);
			else if (m->bf16)
				memcpy(h16 + part * (size_t)k, t[k]->data, part * 2);
			else
				widen(host + part * (size_t)k, t[k], 0, part);
		if (m->p)
			continue;
		if (m->bf16)
			m->lo->pack_rows_bf16(sb_be_main(m->be), (uint16_t *)(void *)(m->pt + p->offset) + one * (size_t)e,
					      h16, (int)p->shape[1], (int)p->shape[2]);
		else
			m->lo->pack_rows(sb_be_main(m->be), m->pt + p->offset + one * (size_t)e, host, (int)p->shape[1],
					 (int)p->shape[2]);
	}
	return 0;
}

int sb_lm_model_from_tensors(struct sb_lm_model *m, const struct sb_tensors *ts, struct sb_err *err)
{
	/* a full model: every tensor widened into one host buffer, uploaded to p, then the
	 * cached path's copy made from p; an evaluation-only model: straight into pt, each
	 * Linear weight through a buffer of its own size (the peak is pt and the largest
	 * Linear, not a second copy of the model) */
	size_t big = 0;
	for (int i = 0; i < m->n_params; i++)
		if (m->params[i].linear) { /* experts (linear 3): one at a time */
			const struct sb_lm_param *p = &m->params[i];
			size_t numel = p->linear == 3 ? p->numel / (size_t)p->shape[0] : p->numel * (p->linear == 2 ? 2 : 1);
			big = numel > big ? numel : big;
		}
	float *host = m->p ? calloc(m->n_floats, sizeof *host) : malloc((big ? big : 1) * sizeof *host);
	if (!host)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	uint16_t *h16 = (uint16_t *)(void *)host; /* bfloat16 weights, copied aligned */
	int rc = 0;
	for (int i = 0; i < m->n_params && !rc; i++) {
		const struct sb_lm_param *p = &m->params[i];
		const struct sb_tensor *t = sb_tensors_find(ts, p->name);
		if (!t && p->linear == 3) { /* the experts kept apart (an import of Mixtral, Qwen3-MoE, Jamba) */
			rc = load_experts(m, p, ts, host, err);
			continue;
		}
		if (!t) {
			rc = SB_ERR(err, SB_EDATA, "checkpoint lacks tensor '%s'", p->name);
			break;
		}
		int same = (t->dtype == SB_F32 || t->dtype == SB_BF16 || t->dtype == SB_F16) && t->ndim == p->ndim;
		for (int k = 0; k < p->ndim && same; k++)
			same = t->shape[k] == p->shape[k];
		if (!same) {
			rc = SB_ERR(err, SB_EDATA, "checkpoint tensor '%s' has another dtype or shape", p->name);
			break;
		}
		int emb = p->offset == (size_t)(m->wt.embed - m->pt), lin = p->linear || emb;
		if (m->bf16 && lin && t->dtype != SB_BF16) {
			rc = SB_ERR(err, SB_EDATA, "checkpoint tensor '%s' is not bfloat16 (the model was opened for "
						   "bfloat16 weights)", p->name);
			break;
		}
		if (m->p)
			widen(host + p->offset, t, 0, p->numel);
		else if (m->bf16 && p->linear == 1) {
			memcpy(h16, t->data, p->numel * 2);
			m->lo->pack_rows_bf16(sb_be_main(m->be), (uint16_t *)(void *)(m->pt + p->offset), h16,
					      (int)p->shape[0], (int)p->shape[1]);
		} else if (p->linear == 1) {
			widen(host, t, 0, p->numel);
			m->lo->pack_rows(sb_be_main(m->be), m->pt + p->offset, host, (int)p->shape[0], (int)p->shape[1]);
		} else if (p->linear == 2) { /* gate, then up: the next parameter (the table keeps them adjacent) */
			const struct sb_lm_param *u = i + 1 < m->n_params ? &m->params[i + 1] : NULL;
			const struct sb_tensor *tu = u ? sb_tensors_find(ts, u->name) : NULL;
			if (!u || !strstr(u->name, "mlp.up_proj.weight") || !tu || tu->dtype != t->dtype || tu->ndim != u->ndim ||
			    tu->shape[0] != u->shape[0] || tu->shape[1] != u->shape[1]) {
				rc = SB_ERR(err, SB_EDATA, "checkpoint tensor '%s' lacks its up projection", p->name);
				break;
			}
			if (m->bf16) {
				if (tu->dtype != SB_BF16) {
					rc = SB_ERR(err, SB_EDATA, "checkpoint tensor '%s' is not bfloat16 (the model was "
								   "opened for bfloat16 weights)", u->name);
					break;
				}
				memcpy(h16, t->data, p->numel * 2);
				memcpy(h16 + p->numel, tu->data, u->numel * 2);
				m->lo->pack_rows_bf16(sb_be_main(m->be), (uint16_t *)(void *)(m->pt + p->offset), h16,
						      (int)(2 * p->shape[0]), (int)p->shape[1]);
			} else {
				widen(host, t, 0, p->numel);
				widen(host + p->numel, tu, 0, u->numel);
				m->lo->pack_rows(sb_be_main(m->be), m->pt + p->offset, host, (int)(2 * p->shape[0]),
						 (int)p->shape[1]);
			}
			i++; /* up is packed with gate */
		} else if (p->linear == 3) { /* experts [E, N, K]: each [N, K] packed on its own */
			size_t one = p->numel / (size_t)p->shape[0];
			for (int64_t e = 0; e < p->shape[0]; e++)
				if (m->bf16) {
					memcpy(h16, (const char *)t->data + 2 * one * (size_t)e, one * 2);
					m->lo->pack_rows_bf16(sb_be_main(m->be),
							      (uint16_t *)(void *)(m->pt + p->offset) + one * (size_t)e, h16,
							      (int)p->shape[1], (int)p->shape[2]);
				} else {
					widen(host, t, one * (size_t)e, one);
					m->lo->pack_rows(sb_be_main(m->be), m->pt + p->offset + one * (size_t)e, host,
							 (int)p->shape[1], (int)p->shape[2]);
				}
		} else if (m->bf16 && emb) { /* the table as bfloat16; tied: packed as the head too */
			memcpy(m->pt + p->offset, t->data, p->numel * 2);
			if (m->cfg.tied)
				m->lo->pack_rows_bf16(sb_be_main(m->be), (uint16_t *)(void *)m->wt.head,
						      (const uint16_t *)(const void *)(m->pt + p->offset), m->cfg.vocab,
						      m->cfg.d);
		} else
			widen(m->pt + p->offset, t, 0, p->numel);
	}
	if (!rc && m->p) {
		rc = m->be->ops->upload(m->be, m->p, host, m->n_floats * sizeof *host, err);
		if (!rc)
			prepare_from(m, m->p);
	} else if (!rc) {
		if (m->cfg.tied && !m->bf16) /* the head: the embedding, packed */
			m->lo->pack_rows(sb_be_main(m->be), m->wt.head, m->wt.embed, m->cfg.vocab, m->cfg.d);
		m->pt_valid = 1;
	}
	free(host);
	return rc;
}

/* the cached path's copy from the parameters at src (m->p) */
static void prepare_from(struct sb_lm_model *m, const float *src)
{
	struct sb_ctx *ctx = sb_be_main(m->be);
	m->be->ops->copy(ctx, m->pt, src, m->n_floats * sizeof(float));
	for (int i = 0; i < m->n_params; i++) {
		const struct sb_lm_param *p = &m->params[i];
		if (p->linear == 1)
			m->lo->pack_rows(ctx, m->pt + p->offset, src + p->offset, (int)p->shape[0], (int)p->shape[1]);
		else if (p->linear == 2) /* gate and up: one [2F, d] matrix (the table keeps them adjacent) */
			m->lo->pack_rows(ctx, m->pt + p->offset, src + p->offset, (int)(2 * p->shape[0]),
					 (int)p->shape[1]);
		else if (p->linear == 3) { /* experts: each [N, K] on its own */
			size_t one = p->numel / (size_t)p->shape[0];
			for (int64_t e = 0; e < p->shape[0]; e++)
				m->lo->pack_rows(ctx, m->pt + p->offset + one * (size_t)e, src + p->offset + one * (size_t)e,
						 (int)p->shape[1], (int)p->shape[2]);
		}
	}
	if (m->cfg.tied) /* the embedding (not a Linear) is at the same offset in src and pt */
		m->lo->pack_rows(ctx, m->wt.head, src + (m->wt.embed - m->pt), m->cfg.vocab, m->cfg.d);
	m->pt_valid = 1;
}

void sb_lm_model_prepare(struct sb_lm_model *m)
{
	if (m->p) /* an evaluation-only model's copy is made once, when it is loaded */
		prepare_from(m, m->p);
}

/* ================================================================ training path */

struct lm_act {
	int32_t *ids, *tgt;
	float *x[SB_LM_MAX_LAYERS + 1], *xmid[SB_LM_MAX_LAYERS];
	float *n1[SB_LM_MAX_LAYERS], *mean1[SB_LM_MAX_LAYERS], *rstd1[SB_LM_MAX_LAYERS];
	float *n2[SB_LM_MAX_LAYERS], *mean2[SB_LM_MAX_LAYERS], *rstd2[SB_LM_MAX_LAYERS];
	float *q[SB_LM_MAX_LAYERS], *k[SB_LM_MAX_LAYERS], *v[SB_LM_MAX_LAYERS], *P[SB_LM_MAX_LAYERS];
	/* qk_norm: q and k before their per-head RMSNorm, its rstd; the gradients before it */
	float *qpre[SB_LM_MAX_LAYERS], *kpre[SB_LM_MAX_LAYERS], *qr[SB_LM_MAX_LAYERS], *kr[SB_LM_MAX_LAYERS];
	float *dqn, *dkn;
	float *att[SB_LM_MAX_LAYERS], *den[SB_LM_MAX_LAYERS];
	float *bch[SB_LM_MAX_LAYERS], *z[SB_LM_MAX_LAYERS], *cy[SB_LM_MAX_LAYERS];
	float *h[SB_LM_MAX_LAYERS], *a[SB_LM_MAX_LAYERS];
	/* sandwich norms: the mixer's and the MLP's outputs before their norms, the norms' rstd,
	 * and the gradient before a norm */
	float *ym[SB_LM_MAX_LAYERS], *r3[SB_LM_MAX_LAYERS], *yf[SB_LM_MAX_LAYERS], *r4[SB_LM_MAX_LAYERS], *dsw;
	float *nf, *meanf, *rstdf, *logits, *losses;
	float *dx, *dn, *dy, *dq, *dk, *dv, *datt, *dh, *da, *dlogits;
	size_t bytes;
	void *base;
};

/* bump allocation of nfloats at *off (base NULL: count), with a red zone after it when
 * rz->on (SB_ARENA_CHECK, redzone.h) */
static float *take(char *base, size_t *off, struct sb_redzones *rz, size_t nfloats, int line)
{
	size_t o = sb_redzone_take(rz, off, nfloats * sizeof(float), line);
	return base ? (float *)(base + o) : NULL;
}
#define TAKE(n) take(cur, &off, rz, (n), __LINE__)

/* Lay out the activations of a tile of Bt sequences of T tokens at base (NULL: count). */
static size_t act_layout(const struct sb_lm_cfg *c, int Bt, int T, void *base, struct lm_act *a, struct sb_redzones *rz)
{
	char *cur = base;
	size_t off = 0;
	size_t M = (size_t)Bt * T, d = (size_t)c->d, F = (size_t)c->ffn, V = (size_t)c->vocab;
	size_t qd = (size_t)c->heads * c->head_dim, kvd = (size_t)c->kv_heads * c->head_dim;
	size_t wide = 3 * d;
	if (qd > wide)
		wide = qd;
	if (2 * F > wide)
		wide = 2 * F;
	memset(a, 0, sizeof *a);
	a->ids = (int32_t *)TAKE(M);
	a->tgt = (int32_t *)TAKE(M);
	for (int l = 0; l <= c->n_layer; l++)
		a->x[l] = TAKE(M * d);
	for (int l = 0; l < c->n_layer; l++) {
		char k = c->pattern[l];
		a->xmid[l] = TAKE(M * d);
		a->n1[l] = TAKE(M * d);
		a->mean1[l] = TAKE(M);
		a->rstd1[l] = TAKE(M);
		if (k == 'A' || k == 'S') {
			a->q[l] = TAKE(M * qd);
			a->k[l] = TAKE(M * kvd);
			a->v[l] = TAKE(M * kvd);
			a->P[l] = TAKE((size_t)Bt * c->heads * T * T);
			a->att[l] = TAKE(M * qd);
			if (c->qk_norm) {
				a->qpre[l] = TAKE(M * qd);
				a->kpre[l] = TAKE(M * kvd);
				a->qr[l] = TAKE(M * c->heads);
				a->kr[l] = TAKE(M * c->kv_heads);
			}
		} else if (k == 'L') {
			a->q[l] = TAKE(M * d);
			a->k[l] = TAKE(M * d);
			a->v[l] = TAKE(M * d);
			a->den[l] = TAKE((size_t)Bt * c->lin_heads * T);
			a->att[l] = TAKE(M * d);
		} else {
			a->bch[l] = TAKE(M * 3 * d);
			a->z[l] = TAKE(M * d);
			a->cy[l] = TAKE(M * d);
		}
		if (c->sandwich) {
			a->ym[l] = TAKE(M * d);
			a->r3[l] = TAKE(M);
			if (F) {
				a->yf[l] = TAKE(M * d);
				a->r4[l] = TAKE(M);
			}
		}
		if (F) {
			a->n2[l] = TAKE(M * d);
			a->mean2[l] = TAKE(M);
			a->rstd2[l] = TAKE(M);
			a->h[l] = TAKE(M * F * (c->swiglu ? 2 : 1));
			a->a[l] = TAKE(M * F);
		}
	}
	a->nf = TAKE(M * d);
	a->meanf = TAKE(M);
	a->rstdf = TAKE(M);
	a->logits = TAKE(M * V);
	a->losses = TAKE(M);
	a->dx = TAKE(M * d);
	a->dn = TAKE(M * d);
	a->dy = TAKE(M * d);
	a->dq = TAKE(M * wide);
	a->dk = TAKE(M * (kvd > d ? kvd : d));
	a->dv = TAKE(M * (kvd > d ? kvd : d));
	a->datt = TAKE(M * wide);
	a->dh = TAKE(M * (2 * F > 1 ? 2 * F : 1));
	a->da = TAKE(M * (F > 0 ? F : 1));
	a->dlogits = TAKE(M * V);
	if (c->qk_norm) {
		a->dqn = TAKE(M * qd);
		a->dkn = TAKE(M * kvd);
	}
	if (c->sandwich)
		a->dsw = TAKE(M * d);
	return off;
}

struct sb_lm_trainer {
	struct sb_lm_model *m;
	struct sb_lm_train_opts o;   /* the current shape (B, T, tile) */
	struct sb_lm_train_opts o0;  /* the shape the arena was sized for */
	int ntiles, nslots;
	size_t stride;       /* floats per gradient slot */
	float *grad;         /* [nslots][stride] */
	float *adam_m, *adam_v;
	float *plain;        /* SB_ARENA_CHECK: the gradient laid out without the zones (grad_sumsq) */
	struct lm_act *act;  /* per worker */
	struct sb_redzones *rz; /* per worker: SB_ARENA_CHECK's red zones in its arena */
	int nworkers;
	double *tile_loss;
	const uint8_t *batch;   /* the pass's sequences: bytes, */
	const int32_t *batch32; /* or ids (the _ids entry points; NULL otherwise) */
	float dscale;
	int want_grad_only;
};

static const struct sb_dropout no_drop = {0};

/* forward of one tile: sets a->losses and a->dlogits (scaled by dscale) */
static void tile_forward(struct sb_ctx *ctx, struct sb_lm_model *m, struct lm_act *a, int Bt, int T, float dscale,
			 int want_dlogits)
{
	const struct sb_lm_cfg *c = &m->cfg;
	const struct sb_backend_ops *op = m->be->ops;
	const struct sb_backend_lm_ops *lo = m->lo;
	const struct sb_lm_ptrs *w = &m->w;
	int M = Bt * T, d = c->d, F = c->ffn, hd = c->head_dim, NH = c->heads, NKV = c->kv_heads;
	int qd = NH * hd, kvd = NKV * hd, rms = c->rmsnorm;
	float qs = query_scale(c), rm = c->resid_mult;
	float qs_s = c->rope_local_theta != 0.0f ? query_scale_noyarn(c) : qs; /* S layers: no YaRN factor */
	op->embedding_forward(ctx, a->x[0], a->ids, w->embed, M, d);
	if (c->emb_mult != 1.0f) /* Granite's embedding_multiplier */
		op->scale(ctx, a->x[0], c->emb_mult, (size_t)M * d);
	if (c->pos == SB_LM_POS_LEARNED)
		lo->pos_forward(ctx, a->x[0], w->pos, Bt, T, 0, d);
	for (int l = 0; l < c->n_layer; l++) {
		const struct sb_lm_layer *y = &w->layer[l];
		if (c->prenorm)
			lo->norm_forward(ctx, a->n1[l], a->mean1[l], a->rstd1[l], a->x[l], y->ln1_w, y->ln1_b, M, d,
					 c->norm_eps, rms);
		else /* OLMo: the mixer reads the residual stream itself */
			op->copy(ctx, a->n1[l], a->x[l], (size_t)M * d * sizeof(float));
		float *out = a->dy; /* mixer output, before the residual */
		if (y->kind == 'A' || y->kind == 'S') {
			/* S: sliding-window attention, its own RoPE base (rope_local_theta), no YaRN
			 * factor; with qk_norm the products go to qpre/kpre, then each head's RMSNorm
			 * (Qwen3, LFM2) */
			int loc = y->kind == 'S';
			const double *freq = loc ? m->rope_freq_local : m->rope_freq;
			float qsl = !sb_lm_layer_rope(c, l) ? query_scale_noyarn(c) : loc ? qs_s : qs; /* NoPE: no YaRN factor */
			float *qp = c->qk_norm ? a->qpre[l] : a->q[l], *kp = c->qk_norm ? a->kpre[l] : a->k[l];
			op->matmul_forward(ctx, qp, a->n1[l], y->q_w, y->q_b, M, d, qd);
			op->matmul_forward(ctx, kp, a->n1[l], y->k_w, y->k_b, M, d, kvd);
			op->matmul_forward(ctx, a->v[l], a->n1[l], y->v_w, y->v_b, M, d, kvd);
			if (c->qk_norm == 2) { /* OLMo: over all heads of a position */
				lo->norm_forward(ctx, a->q[l], NULL, a->qr[l], qp, y->qn_w, NULL, M, qd, c->norm_eps, 1);
				lo->norm_forward(ctx, a->k[l], NULL, a->kr[l], kp, y->kn_w, NULL, M, kvd, c->norm_eps, 1);
			} else if (c->qk_norm) {
				lo->norm_forward(ctx, a->q[l], NULL, a->qr[l], qp, y->qn_w, NULL, M * NH, hd, c->norm_eps, 1);
				lo->norm_forward(ctx, a->k[l], NULL, a->kr[l], kp, y->kn_w, NULL, M * NKV, hd, c->norm_eps, 1);
			}
			if (sb_lm_layer_rope(c, l)) {
				lo->rope(ctx, a->q[l], Bt, T, 0, NH, hd, sb_lm_rope_dim(c), freq, 0);
				lo->rope(ctx, a->k[l], Bt, T, 0, NKV, hd, sb_lm_rope_dim(c), freq, 0);
			}
			if (qsl != 1.0f)
				op->scale(ctx, a->q[l], qsl, (size_t)M * qd);
			if (loc)
				lo->swa_forward(ctx, a->att[l], a->P[l], a->q[l], a->k[l], a->v[l], Bt, T, NH, NKV, hd,
						c->window, c->attn_softcap);
			else
				lo->attn_forward(ctx, a->att[l], a->P[l], a->q[l], a->k[l], a->v[l], Bt, T, NH, NKV, hd,
						 c->attn_softcap);
			op->matmul_forward(ctx, out, a->att[l], y->o_w, y->o_b, M, qd, d);
		} else if (y->kind == 'L') {
			op->matmul_forward(ctx, a->q[l], a->n1[l], y->q_w, y->q_b, M, d, d);
			op->matmul_forward(ctx, a->k[l], a->n1[l], y->k_w, y->k_b, M, d, d);
			op->matmul_forward(ctx, a->v[l], a->n1[l], y->v_w, y->v_b, M, d, d);
			lo->linattn_forward(ctx, a->att[l], a->den[l], a->q[l], a->k[l], a->v[l], Bt, T, c->lin_heads,
					    d / c->lin_heads);
			op->matmul_forward(ctx, out, a->att[l], y->o_w, y->o_b, M, d, d);
		} else {
			if (c->conv_gate) {
				op->matmul_forward(ctx, a->bch[l], a->n1[l], y->in_w, y->in_b, M, d, 3 * d);
				lo->conv_forward(ctx, a->cy[l], a->z[l], a->bch[l], y->cw, y->cb, Bt, T, d, c->conv_k);
			} else {
				op->matmul_forward(ctx, a->bch[l], a->n1[l], y->in_w, y->in_b, M, d, d);
				lo->dwconv_forward(ctx, a->cy[l], a->bch[l], y->cw, y->cb, Bt, T, d, c->conv_k);
			}
			op->matmul_forward(ctx, out, a->cy[l], y->out_w, y->out_b, M, d, d);
		}
		if (c->sandwich) { /* Gemma's norm of the mixer's output (its input kept for the backward) */
			op->copy(ctx, a->ym[l], out, (size_t)M * d * sizeof(float));
			lo->norm_forward(ctx, out, NULL, a->r3[l], a->ym[l], y->ln3_w, NULL, M, d, c->norm_eps, 1);
		}
		if (rm != 1.0f) /* Granite's residual_multiplier, on the mixer and the MLP */
			op->scale(ctx, out, rm, (size_t)M * d);
		float *xm = F ? a->xmid[l] : a->x[l + 1];
		op->copy(ctx, xm, a->x[l], (size_t)M * d * sizeof(float));
		lo->add(ctx, xm, out, (size_t)M * d);
		if (F) {
			if (c->prenorm)
				lo->norm_forward(ctx, a->n2[l], a->mean2[l], a->rstd2[l], xm, y->ln2_w, y->ln2_b, M, d,
						 c->norm_eps, rms);
			else
				op->copy(ctx, a->n2[l], xm, (size_t)M * d * sizeof(float));
			op->matmul_forward(ctx, a->h[l], a->n2[l], y->up_w, y->up_b, M, d, c->swiglu ? 2 * F : F);
			if (c->swiglu == 2)
				lo->geglu_forward(ctx, a->a[l], a->h[l], M, F);
			else if (c->swiglu)
				lo->swiglu_forward(ctx, a->a[l], a->h[l], M, F);
			else
				/* training keeps gelu'(h) in h for the backward (nothing else reads it) */
				op->gelu_forward(ctx, a->a[l], NULL, want_dlogits ? a->h[l] : NULL, a->h[l], &no_drop,
						 (size_t)M * F);
			op->matmul_forward(ctx, out, a->a[l], y->down_w, y->down_b, M, F, d);
			if (c->sandwich) {
				op->copy(ctx, a->yf[l], out, (size_t)M * d * sizeof(float));
				lo->norm_forward(ctx, out, NULL, a->r4[l], a->yf[l], y->ln4_w, NULL, M, d, c->norm_eps, 1);
			}
			if (rm != 1.0f)
				op->scale(ctx, out, rm, (size_t)M * d);
			op->copy(ctx, a->x[l + 1], xm, (size_t)M * d * sizeof(float));
			lo->add(ctx, a->x[l + 1], out, (size_t)M * d);
		}
	}
	int L = c->n_layer;
	lo->norm_forward(ctx, a->nf, a->meanf, a->rstdf, a->x[L], w->lnf_w, w->lnf_b, M, d, c->norm_eps, rms);
	op->matmul_forward(ctx, a->logits, a->nf, w->head, NULL, M, d, c->vocab);
	if (c->logit_div != 1.0f) /* Granite's logits_scaling */
		op->scale(ctx, a->logits, 1.0f / c->logit_div, (size_t)M * c->vocab);
	if (c->final_softcap != 0.0f) /* Gemma 2's, as the cached path: z / cap, tanh, times cap */
		for (size_t i = 0; i < (size_t)M * c->vocab; i++)
			a->logits[i] = tanhf(a->logits[i] / c->final_softcap) * c->final_softcap;
	op->cross_entropy(ctx, a->losses, NULL, want_dlogits ? a->dlogits : NULL, a->logits, a->tgt, M, c->vocab, dscale);
}

static void tile_backward(struct sb_ctx *ctx, struct sb_lm_model *m, struct lm_act *a, const struct sb_lm_ptrs *g,
			  int Bt, int T)
{
	const struct sb_lm_cfg *c = &m->cfg;
	const struct sb_backend_ops *op = m->be->ops;
	const struct sb_backend_lm_ops *lo = m->lo;
	const struct sb_lm_ptrs *w = &m->w;
	int M = Bt * T, d = c->d, F = c->ffn, hd = c->head_dim, NH = c->heads, NKV = c->kv_heads;
	int qd = NH * hd, kvd = NKV * hd, rms = c->rmsnorm, L = c->n_layer;
	float qs = query_scale(c), rm = c->resid_mult;
	float qs_s = c->rope_local_theta != 0.0f ? query_scale_noyarn(c) : qs;
	if (c->final_softcap != 0.0f) /* z' = cap tanh(z / cap): dz = dz' (1 - (z' / cap)^2) */
		for (size_t i = 0; i < (size_t)M * c->vocab; i++) {
			float th = a->logits[i] / c->final_softcap;
			a->dlogits[i] *= 1.0f - th * th;
		}
	if (c->logit_div != 1.0f) /* the logits were divided after the head */
		op->scale(ctx, a->dlogits, 1.0f / c->logit_div, (size_t)M * c->vocab);
	op->matmul_backward(ctx, a->dn, g->head, NULL, a->dlogits, a->nf, w->head, M, d, c->vocab, 0);
	op->zero(ctx, a->dx, (size_t)M * d * sizeof(float));
	lo->norm_backward(ctx, a->dx, g->lnf_w, g->lnf_b, a->dn, a->x[L], a->meanf, a->rstdf, w->lnf_w, M, d, rms);
	for (int l = L - 1; l >= 0; l--) {
		const struct sb_lm_layer *y = &w->layer[l], *gy = &g->layer[l];
		const float *xm = F ? a->xmid[l] : a->x[l + 1];
		/* the gradient of a branch's output: dx, times the residual multiplier (in dy) */
		float *dout = a->dx;
		if (rm != 1.0f) {
			dout = a->dy;
			op->copy(ctx, dout, a->dx, (size_t)M * d * sizeof(float));
			op->scale(ctx, dout, rm, (size_t)M * d);
		}
		if (F) {
			/* x[l+1] = xm + rm N4(down(act(up(norm2(xm))))) (N4 with sandwich norms) */
			const float *dmlp = dout;
			if (c->sandwich) {
				op->zero(ctx, a->dsw, (size_t)M * d * sizeof(float));
				lo->norm_backward(ctx, a->dsw, gy->ln4_w, NULL, dout, a->yf[l], NULL, a->r4[l], y->ln4_w, M, d,
						  1);
				dmlp = a->dsw;
			}
			op->matmul_backward(ctx, a->da, gy->down_w, gy->down_b, dmlp, a->a[l], y->down_w, M, F, d, 0);
			if (c->swiglu == 2)
				lo->geglu_backward(ctx, a->dh, a->da, a->h[l], M, F);
			else if (c->swiglu)
				lo->swiglu_backward(ctx, a->dh, a->da, a->h[l], M, F);
			else
				op->gelu_backward(ctx, a->dh, a->da, a->h[l] /* gelu'(h) */, NULL, 0.0f, (size_t)M * F);
			op->matmul_backward(ctx, a->dn, gy->up_w, gy->up_b, a->dh, a->n2[l], y->up_w, M, d,
					    c->swiglu ? 2 * F : F, 0);
			if (c->prenorm)
				lo->norm_backward(ctx, a->dx, gy->ln2_w, gy->ln2_b, a->dn, xm, a->mean2[l], a->rstd2[l],
						  y->ln2_w, M, d, rms);
			else
				lo->add(ctx, a->dx, a->dn, (size_t)M * d);
		}
		/* xm = x[l] + rm N3(mixer(norm1(x[l]))): dx is d xm (N3 with sandwich norms) */
		if (rm != 1.0f && F) {
			op->copy(ctx, dout, a->dx, (size_t)M * d * sizeof(float));
			op->scale(ctx, dout, rm, (size_t)M * d);
		}
		if (c->sandwich) {
			op->zero(ctx, a->dsw, (size_t)M * d * sizeof(float));
			lo->norm_backward(ctx, a->dsw, gy->ln3_w, NULL, dout, a->ym[l], NULL, a->r3[l], y->ln3_w, M, d, 1);
			dout = a->dsw;
		}
		if (y->kind == 'A' || y->kind == 'S') {
			int loc = y->kind == 'S';
			const double *freq = loc ? m->rope_freq_local : m->rope_freq;
			float qsl = !sb_lm_layer_rope(c, l) ? query_scale_noyarn(c) : loc ? qs_s : qs; /* NoPE: no YaRN factor */
			op->matmul_backward(ctx, a->datt, gy->o_w, gy->o_b, dout, a->att[l], y->o_w, M, qd, d, 0);
			if (loc)
				lo->swa_backward(ctx, a->dq, a->dk, a->dv, a->datt, a->P[l], a->q[l], a->k[l], a->v[l], Bt,
						 T, NH, NKV, hd, c->attn_softcap);
			else
				lo->attn_backward(ctx, a->dq, a->dk, a->dv, a->datt, a->P[l], a->q[l], a->k[l], a->v[l], Bt,
						  T, NH, NKV, hd, c->attn_softcap);
			if (qsl != 1.0f) /* the queries were scaled after RoPE */
				op->scale(ctx, a->dq, qsl, (size_t)M * qd);
			if (sb_lm_layer_rope(c, l)) {
				lo->rope(ctx, a->dq, Bt, T, 0, NH, hd, sb_lm_rope_dim(c), freq, 1);
				lo->rope(ctx, a->dk, Bt, T, 0, NKV, hd, sb_lm_rope_dim(c), freq, 1);
			}
			float *dqp = a->dq, *dkp = a->dk;
			if (c->qk_norm) { /* through each head's RMSNorm (its backward adds into dx) */
				dqp = a->dqn;
				dkp = a->dkn;
				op->zero(ctx, dqp, (size_t)M * qd * sizeof(float));
				op->zero(ctx, dkp, (size_t)M * kvd * sizeof(float));
				int full = c->qk_norm == 2; /* OLMo's: one norm over all heads of a position */
				lo->norm_backward(ctx, dqp, gy->qn_w, NULL, a->dq, a->qpre[l], NULL, a->qr[l], y->qn_w,
						  full ? M : M * NH, full ? qd : hd, 1);
				lo->norm_backward(ctx, dkp, gy->kn_w, NULL, a->dk, a->kpre[l], NULL, a->kr[l], y->kn_w,
						  full ? M : M * NKV, full ? kvd : hd, 1);
			}
			op->matmul_backward(ctx, a->dn, gy->q_w, gy->q_b, dqp, a->n1[l], y->q_w, M, d, qd, 0);
			op->matmul_backward(ctx, a->dn, gy->k_w, gy->k_b, dkp, a->n1[l], y->k_w, M, d, kvd, 1);
			op->matmul_backward(ctx, a->dn, gy->v_w, gy->v_b, a->dv, a->n1[l], y->v_w, M, d, kvd, 1);
		} else if (y->kind == 'L') {
			op->matmul_backward(ctx, a->datt, gy->o_w, gy->o_b, dout, a->att[l], y->o_w, M, d, d, 0);
			lo->linattn_backward(ctx, a->dq, a->dk, a->dv, a->datt, a->att[l], a->den[l], a->q[l], a->k[l],
					     a->v[l], Bt, T, c->lin_heads, d / c->lin_heads);
			op->matmul_backward(ctx, a->dn, gy->q_w, gy->q_b, a->dq, a->n1[l], y->q_w, M, d, d, 0);
			op->matmul_backward(ctx, a->dn, gy->k_w, gy->k_b, a->dk, a->n1[l], y->k_w, M, d, d, 1);
			op->matmul_backward(ctx, a->dn, gy->v_w, gy->v_b, a->dv, a->n1[l], y->v_w, M, d, d, 1);
		} else {
			op->matmul_backward(ctx, a->datt, gy->out_w, gy->out_b, dout, a->cy[l], y->out_w, M, d, d, 0);
			if (c->conv_gate) {
				lo->conv_backward(ctx, a->dq, gy->cw, gy->cb, a->datt, a->bch[l], a->z[l], y->cw, Bt, T, d,
						  c->conv_k);
				op->matmul_backward(ctx, a->dn, gy->in_w, gy->in_b, a->dq, a->n1[l], y->in_w, M, d, 3 * d, 0);
			} else {
				lo->dwconv_backward(ctx, a->dq, gy->cw, gy->cb, a->datt, a->bch[l], y->cw, Bt, T, d, c->conv_k);
				op->matmul_backward(ctx, a->dn, gy->in_w, gy->in_b, a->dq, a->n1[l], y->in_w, M, d, d, 0);
			}
		}
		if (c->prenorm)
			lo->norm_backward(ctx, a->dx, gy->ln1_w, gy->ln1_b, a->dn, a->x[l], a->mean1[l], a->rstd1[l],
					  y->ln1_w, M, d, rms);
		else
			lo->add(ctx, a->dx, a->dn, (size_t)M * d);
	}
	if (c->pos == SB_LM_POS_LEARNED)
		lo->pos_backward(ctx, g->pos, a->dx, Bt, T, 0, d);
	if (c->emb_mult != 1.0f) /* x[0] = emb_mult embed[ids] (+ pos) */
		op->scale(ctx, a->dx, c->emb_mult, (size_t)M * d);
	lo->embedding_backward(ctx, g->embed, a->dx, a->ids, M, d);
}

int sb_lm_trainer_new(struct sb_lm_model *m, const struct sb_lm_train_opts *o, struct sb_lm_trainer **out,
		      struct sb_err *err)
{
	SB_TRY(refuse_eval_only(m, "training", err));
	if (o->B < 1 || o->T < 1 || o->T > m->cfg.max_T)
		return SB_ERR(err, SB_EUSAGE, "training: B %d, T %d (max_T %d)", o->B, o->T, m->cfg.max_T);
	if (strchr(m->cfg.pattern, 'M') || strchr(m->cfg.pattern, 'V') || strchr(m->cfg.pattern, 'D') ||
	    m->cfg.moe_experts || m->cfg.parallel_ssm || m->cfg.attn_gate || m->cfg.parallel_mlp || !m->cfg.norm_bias)
		return SB_ERR(err, SB_EUSAGE, "training: M (Mamba2), V (Mamba) and D (gated DeltaNet) layers, parallel Mamba2 "
					      "mixers, the attention's output gate, a parallel MLP, LayerNorms without a bias and "
					      "mixtures of experts are evaluation-only (pretrained layouts); the training path "
					      "does not have them");
	const struct sb_lm_cfg *fc = &m->cfg;
	if (fc->attn_in_mult != 1.0f || fc->key_mult != 1.0f || fc->attn_out_mult != 1.0f || fc->mlp_gate_mult != 1.0f ||
	    fc->mlp_down_mult != 1.0f || fc->logit_mult != 1.0f)
		return SB_ERR(err, SB_EUSAGE, "training: Falcon-H1's multipliers are evaluation-only; the training path "
					      "does not have them");
	struct sb_lm_trainer *tr = calloc(1, sizeof *tr);
	if (!tr)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	tr->m = m;
	tr->o = *o;
	if (tr->o.tile < 1)
		tr->o.tile = 1;
	if (tr->o.tile > o->B)
		tr->o.tile = o->B;
	if (o->B % tr->o.tile) {
		int tile = tr->o.tile;
		free(tr);
		return SB_ERR(err, SB_EUSAGE, "training: batch %d is not a multiple of the tile %d", o->B, tile);
	}
	tr->o0 = tr->o;
	tr->ntiles = o->B / tr->o.tile;
	tr->nslots = tr->ntiles < m->be->slots ? tr->ntiles : m->be->slots;
	if (tr->nslots < 1)
		tr->nslots = 1;
	tr->stride = (m->n_floats + 15) & ~(size_t)15;
	tr->grad = sb_be_alloc(m->be, (size_t)tr->nslots * tr->stride * sizeof(float));
	tr->adam_m = sb_be_alloc(m->be, m->n_floats * sizeof(float));
	tr->adam_v = sb_be_alloc(m->be, m->n_floats * sizeof(float));
	if (m->pzones && !(tr->plain = sb_be_alloc(m->be, m->plain_n * sizeof(float))))
		goto oom;
	tr->nworkers = m->be->threads;
	tr->act = calloc((size_t)tr->nworkers, sizeof *tr->act);
	tr->rz = calloc((size_t)tr->nworkers, sizeof *tr->rz);
	tr->tile_loss = calloc((size_t)tr->ntiles, sizeof *tr->tile_loss);
	if (!tr->grad || !tr->adam_m || !tr->adam_v || !tr->act || !tr->rz || !tr->tile_loss)
		goto oom;
	struct lm_act tmp;
	struct sb_redzones count = {.on = sb_redzone_wanted()};
	size_t bytes = act_layout(&m->cfg, tr->o.tile, o->T, NULL, &tmp, &count);
	for (int wk = 0; wk < tr->nworkers; wk++) {
		void *base = sb_be_alloc(m->be, bytes);
		struct sb_redzones *rz = &tr->rz[wk];
		*rz = (struct sb_redzones){.on = count.on, .n = count.n, .file = "lib/lm_model.c"};
		if (!base || sb_redzone_alloc(rz)) {
			sb_be_free(m->be, base);
			goto oom;
		}
		act_layout(&m->cfg, tr->o.tile, o->T, base, &tr->act[wk], rz);
		tr->act[wk].base = base;
		tr->act[wk].bytes = bytes;
		struct sb_err e = {0};
		if (sb_redzone_fill(m->be, base, rz, &e))
			goto oom;
	}
	*out = tr;
	return 0;
oom:
	sb_lm_trainer_free(tr);
	return SB_ERR(err, SB_EINTERNAL, "out of memory (trainer)");
}

void sb_lm_trainer_free(struct sb_lm_trainer *tr)
{
	if (!tr)
		return;
	struct sb_backend *be = tr->m->be;
	sb_be_free(be, tr->grad);
	sb_be_free(be, tr->adam_m);
	sb_be_free(be, tr->adam_v);
	sb_be_free(be, tr->plain);
	if (tr->act)
		for (int i = 0; i < tr->nworkers; i++)
			sb_be_free(be, tr->act[i].base);
	if (tr->rz)
		for (int i = 0; i < tr->nworkers; i++)
			sb_redzone_free(&tr->rz[i]);
	free(tr->act);
	free(tr->rz);
	free(tr->tile_loss);
	free(tr);
}

/* sequences first_seq.. of T+1 bytes (batch) or ids (batch32, when not NULL) */
static void fill_ids(struct lm_act *a, const uint8_t *batch, const int32_t *batch32, int first_seq, int Bt, int T)
{
	/* the CPU backend's memory is the host's; a device backend would upload here */
	for (int b = 0; b < Bt; b++) {
		size_t at = (size_t)(first_seq + b) * (T + 1);
		for (int t = 0; t < T; t++) {
			a->ids[(size_t)b * T + t] = batch32 ? batch32[at + t] : batch[at + t];
			a->tgt[(size_t)b * T + t] = batch32 ? batch32[at + t + 1] : batch[at + t + 1];
		}
	}
}

static int slot_task(struct sb_ctx *ctx, int worker, int slot, void *arg, struct sb_err *err)
{
	struct sb_lm_trainer *tr = arg;
	struct sb_lm_model *m = tr->m;
	struct lm_act *a = &tr->act[worker];
	float *g = tr->grad + (size_t)slot * tr->stride;
	m->be->ops->zero(ctx, g, m->n_floats * sizeof(float));
	struct sb_lm_ptrs gp;
	sb_lm_ptrs_at(m, g, &gp);
	int t0 = (int)((int64_t)slot * tr->ntiles / tr->nslots), t1 = (int)((int64_t)(slot + 1) * tr->ntiles / tr->nslots);
	int Bt = tr->o.tile, T = tr->o.T;
	for (int tile = t0; tile < t1; tile++) {
		fill_ids(a, tr->batch, tr->batch32, tile * Bt, Bt, T);
		tile_forward(ctx, m, a, Bt, T, tr->dscale, 1);
		double s = 0;
		for (int i = 0; i < Bt * T; i++)
			s += a->losses[i];
		tr->tile_loss[tile] = s;
		tile_backward(ctx, m, a, &gp, Bt, T);
	}
	return 0;
}

void *sb_lm_trainer_zone(const struct sb_lm_trainer *tr, int worker, int i)
{
	if (worker < 0 || worker >= tr->nworkers)
		return NULL;
	return sb_redzone_at(tr->act[worker].base, &tr->rz[worker], i);
}

/* the base of buffer b laid out like p (sb_lm_param_zone's numbering), NULL past the last;
 * its name in reports */
static float *pz_buffer(const struct sb_lm_trainer *tr, int b, char *name, size_t n)
{
	static const char *fixed[] = {"the parameters", "the cached path's copy", "the gradients",
	                              "the first moments", "the second moments"};
	float *base[] = {tr->m->p, tr->m->pt, tr->grad, tr->adam_m, tr->adam_v};
	if (b < 0 || b >= SB_LM_PZ_SLOT + tr->nslots - 1)
		return NULL;
	if (b < SB_LM_PZ_SLOT) {
		snprintf(name, n, "%s", fixed[b]);
		return base[b];
	}
	int s = b - SB_LM_PZ_SLOT + 1;
	snprintf(name, n, "gradient slot %d", s);
	return tr->grad + (size_t)s * tr->stride;
}

void *sb_lm_param_zone(const struct sb_lm_trainer *tr, int b, int i)
{
	char name[40];
	float *base = pz_buffer(tr, b, name, sizeof name);
	return base && tr->m->pzones ? sb_redzone_at(base, tr->m->pzones, i) : NULL;
}

/* SB_ARENA_CHECK: the parameter table's zones, in the order a stray write spreads (the
 * slots, the gradients, AdamW's moments, the parameters, then their copy), so that the
 * first reported is where it was made */
static int trainer_pz_check(struct sb_lm_trainer *tr, const char *after, struct sb_err *err)
{
	if (!tr->m->pzones)
		return 0;
	int order[] = {SB_LM_PZ_GRADS, SB_LM_PZ_M, SB_LM_PZ_V, SB_LM_PZ_PARAMS, SB_LM_PZ_PACKED};
	for (int s = 1; s < tr->nslots; s++) {
		char name[40];
		float *base = pz_buffer(tr, SB_LM_PZ_SLOT + s - 1, name, sizeof name);
		SB_TRY(pzones_check(tr->m, base, after, name, err));
	}
	for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
		char name[40];
		float *base = pz_buffer(tr, order[k], name, sizeof name);
		SB_TRY(pzones_check(tr->m, base, after, name, err));
	}
	return 0;
}

/* SB_ARENA_CHECK: every worker's red zones still hold their pattern, and the table's */
static int trainer_rz_check(struct sb_lm_trainer *tr, const char *after, struct sb_err *err)
{
	for (int wk = 0; wk < tr->nworkers; wk++) {
		char owner[64];
		snprintf(owner, sizeof owner, "the trainer's worker %d", wk);
		SB_TRY(sb_redzone_check(tr->m->be, tr->act[wk].base, &tr->rz[wk], after, owner, err));
	}
	SB_TRY(trainer_pz_check(tr, after, err));
	return sb_be_tails_check(tr->m->be, after, err);
}

int sb_lm_trainer_check(struct sb_lm_trainer *tr, const char *after, struct sb_err *err)
{
	return trainer_rz_check(tr, after, err);
}

/* The training path's ids are bytes, and its embedding and cross-entropy index by them
 * unchecked: a model whose vocabulary is below 256 (an import without tokenizer.json, whose
 * ids are bytes) must not be given a byte outside it. n sequences of len bytes, at stride. */
static int check_bytes(const struct sb_lm_model *m, const uint8_t *b, int n, int len, size_t stride,
		       struct sb_err *err)
{
	int V = m->cfg.vocab;
	if (V >= 256)
		return 0;
	for (int i = 0; i < n; i++)
		for (int t = 0; t < len; t++)
			if (b[(size_t)i * stride + t] >= V)
				return SB_ERR(err, SB_EDATA,
					      "byte %d at sequence %d, position %d is outside the model's vocabulary (%d ids): the "
					      "training path reads bytes as ids",
					      b[(size_t)i * stride + t], i, t, V);
	return 0;
}

/* ids of a tokenizer (or bytes as int32): each in [0, vocab) */
static int check_ids(const struct sb_lm_model *m, const int32_t *b, int n, int len, size_t stride, struct sb_err *err)
{
	for (int i = 0; i < n; i++)
		for (int t = 0; t < len; t++)
			if (b[(size_t)i * stride + t] < 0 || b[(size_t)i * stride + t] >= m->cfg.vocab)
				return SB_ERR(err, SB_EDATA,
					      "token id %ld at sequence %d, position %d is outside the model's vocabulary (%d ids)",
					      (long)b[(size_t)i * stride + t], i, t, m->cfg.vocab);
	return 0;
}

static int grad_pass(struct sb_lm_trainer *tr, const uint8_t *batch, const int32_t *batch32, double *loss,
		     struct sb_err *err)
{
	struct sb_lm_model *m = tr->m;
	if (batch32)
		SB_TRY(check_ids(m, batch32, tr->o.B, tr->o.T + 1, (size_t)tr->o.T + 1, err));
	else
		SB_TRY(check_bytes(m, batch, tr->o.B, tr->o.T + 1, (size_t)tr->o.T + 1, err));
	tr->batch = batch;
	tr->batch32 = batch32;
	tr->dscale = 1.0f / (float)((double)tr->o.B * tr->o.T);
	SB_TRY(m->be->ops->run(m->be, tr->nslots, slot_task, tr, err));
	struct sb_ctx *ctx = sb_be_main(m->be);
	if (tr->nslots > 1)
		m->be->ops->reduce_slots(ctx, tr->grad, tr->grad, tr->nslots, tr->stride, m->n_floats);
	double s = 0;
	for (int i = 0; i < tr->ntiles; i++)
		s += tr->tile_loss[i];
	*loss = s / ((double)tr->o.B * tr->o.T);
	return trainer_rz_check(tr, "a training pass", err);
}

int sb_lm_train_grad(struct sb_lm_trainer *tr, const uint8_t *batch, double *loss, float **grad, struct sb_err *err)
{
	SB_TRY(grad_pass(tr, batch, NULL, loss, err));
	*grad = tr->grad;
	return 0;
}
int sb_lm_train_grad_ids(struct sb_lm_trainer *tr, const int32_t *batch, double *loss, float **grad,
			 struct sb_err *err)
{
	SB_TRY(grad_pass(tr, NULL, batch, loss, err));
	*grad = tr->grad;
	return 0;
}

/* Lay the arenas out for sequences of Tp tokens (Tp dividing the original T). */
static int reshape(struct sb_lm_trainer *tr, int Tp, struct sb_err *err)
{
	const struct sb_lm_train_opts *o0 = &tr->o0;
	if (Tp == tr->o.T)
		return 0;
	if (Tp < 1 || Tp > o0->T || o0->T % Tp)
		return SB_ERR(err, SB_EUSAGE, "training: a context of %d does not divide %d", Tp, o0->T);
	int f = o0->T / Tp;
	struct sb_lm_train_opts o = *o0;
	o.T = Tp;
	o.B = o0->B * f;
	o.tile = o0->tile * f;
	for (int wk = 0; wk < tr->nworkers; wk++) {
		struct lm_act dry;
		void *base = tr->act[wk].base;
		size_t bytes = tr->act[wk].bytes;
		struct sb_redzones *rz = &tr->rz[wk], count = {.on = rz->on};
		size_t need = act_layout(&tr->m->cfg, o.tile, Tp, NULL, &dry, &count);
		if (need > bytes)
			return SB_ERR(err, SB_EINTERNAL, "training: the arena (%zu bytes) cannot hold T=%d (%zu)", bytes,
				      Tp, need);
		rz->n = 0; /* the same buffers, so as many zones, in new places */
		act_layout(&tr->m->cfg, o.tile, Tp, base, &tr->act[wk], rz);
		tr->act[wk].base = base;
		tr->act[wk].bytes = bytes;
		SB_TRY(sb_redzone_fill(tr->m->be, base, rz, err));
	}
	tr->o = o;
	tr->ntiles = o.B / o.tile; /* unchanged: B/tile */
	return 0;
}

int sb_lm_train_step_len(struct sb_lm_trainer *tr, const uint8_t *batch, int Tp, int64_t step, float lr, double *loss,
			 double *gnorm, struct sb_err *err)
{
	SB_TRY(reshape(tr, Tp, err));
	return sb_lm_train_step(tr, batch, step, lr, loss, gnorm, err);
}

/* The gradient's sum of squares. The backend sums the flat buffer in chunks (the CPU's of
 * 32768 floats), whose ends SB_ARENA_CHECK's zones would move, and with them the double's
 * last bits: with the zones, the tensors are first copied into the layout without them
 * (zeros between, as there), so that the norm, and the records, are the same bits. */
static double grad_sumsq(struct sb_lm_trainer *tr)
{
	struct sb_lm_model *m = tr->m;
	struct sb_ctx *ctx = sb_be_main(m->be);
	if (!tr->plain)
		return m->be->ops->sumsq(ctx, tr->grad, m->n_floats);
	for (int i = 0; i < m->n_params; i++)
		m->be->ops->copy(ctx, tr->plain + m->plain_off[i], tr->grad + m->params[i].offset,
		                 m->params[i].numel * sizeof(float));
	return m->be->ops->sumsq(ctx, tr->plain, m->plain_n);
}

static int step_pass(struct sb_lm_trainer *tr, const uint8_t *batch, const int32_t *batch32, int64_t step, float lr,
		     double *loss, double *gnorm, struct sb_err *err);
int sb_lm_train_step(struct sb_lm_trainer *tr, const uint8_t *batch, int64_t step, float lr, double *loss,
		     double *gnorm, struct sb_err *err)
{
	return step_pass(tr, batch, NULL, step, lr, loss, gnorm, err);
}
int sb_lm_train_step_ids(struct sb_lm_trainer *tr, const int32_t *batch, int64_t step, float lr, double *loss,
			 double *gnorm, struct sb_err *err)
{
	return step_pass(tr, NULL, batch, step, lr, loss, gnorm, err);
}
static int step_pass(struct sb_lm_trainer *tr, const uint8_t *batch, const int32_t *batch32, int64_t step, float lr,
		     double *loss, double *gnorm, struct sb_err *err)
{
	struct sb_lm_model *m = tr->m;
	SB_TRY(grad_pass(tr, batch, batch32, loss, err));
	if (!isfinite(*loss))
		return SB_ERR(err, SB_EDATA, "non-finite training loss at step %lld", (long long)step);
	struct sb_ctx *ctx = sb_be_main(m->be);
	double gn = sqrt(grad_sumsq(tr));
	*gnorm = gn;
	if (tr->o.clip > 0 && gn > tr->o.clip)
		m->be->ops->scale(ctx, tr->grad, (float)(tr->o.clip / gn), m->n_floats);
	for (int i = 0; i < m->n_params; i++) {
		const struct sb_lm_param *p = &m->params[i];
		m->be->ops->adamw(ctx, m->p + p->offset, tr->adam_m + p->offset, tr->adam_v + p->offset,
				  tr->grad + p->offset, p->numel, lr, tr->o.b1, tr->o.b2, tr->o.eps,
				  p->decay ? tr->o.wd : 0.0f, step);
	}
	m->pt_valid = 0;
	return trainer_pz_check(tr, "an AdamW step", err);
}

/* the logits of one sequence of T bytes (tokens) or ids (ids, when not NULL) */
static int logits_pass(struct sb_lm_trainer *tr, const uint8_t *tokens, const int32_t *ids, float *out,
		       struct sb_err *err)
{
	struct sb_lm_model *m = tr->m;
	struct lm_act *a = &tr->act[0];
	int T = tr->o.T;
	if (ids)
		SB_TRY(check_ids(m, ids, 1, T, (size_t)T, err));
	else
		SB_TRY(check_bytes(m, tokens, 1, T, (size_t)T, err));
	/* a tile of tr->o.tile sequences: the sequence repeated, with a target 0 after it */
	int Bt = tr->o.tile;
	int32_t *b = malloc((size_t)Bt * (T + 1) * sizeof *b);
	if (!b)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int i = 0; i < Bt; i++) {
		for (int t = 0; t < T; t++)
			b[(size_t)i * (T + 1) + t] = ids ? ids[t] : tokens[t];
		b[(size_t)i * (T + 1) + T] = 0;
	}
	fill_ids(a, NULL, b, 0, Bt, T);
	tile_forward(sb_be_main(m->be), m, a, Bt, T, 1.0f, 0);
	int rc = m->be->ops->download(m->be, out, a->logits, (size_t)T * m->cfg.vocab * sizeof(float), err);
	free(b);
	return rc ? rc : trainer_rz_check(tr, "a forward pass", err);
}
int sb_lm_train_logits(struct sb_lm_trainer *tr, const uint8_t *tokens, float *out, struct sb_err *err)
{
	return logits_pass(tr, tokens, NULL, out, err);
}
int sb_lm_train_logits_ids(struct sb_lm_trainer *tr, const int32_t *ids, float *out, struct sb_err *err)
{
	return logits_pass(tr, NULL, ids, out, err);
}

int sb_lm_trainer_state_to(const struct sb_lm_trainer *tr, struct sb_tensors *ts, struct sb_err *err)
{
	const struct sb_lm_model *m = tr->m;
	float *host = malloc(2 * m->n_floats * sizeof *host);
	if (!host)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = m->be->ops->download(m->be, host, tr->adam_m, m->n_floats * sizeof *host, err);
	if (!rc)
		rc = m->be->ops->download(m->be, host + m->n_floats, tr->adam_v, m->n_floats * sizeof *host, err);
	char nm[128];
	for (int i = 0; i < m->n_params && !rc; i++) {
		const struct sb_lm_param *p = &m->params[i];
		snprintf(nm, sizeof nm, "adam_m.%s", p->name);
		rc = sb_tensors_add(ts, nm, SB_F32, p->ndim, p->shape, host + p->offset, 0, err);
		snprintf(nm, sizeof nm, "adam_v.%s", p->name);
		if (!rc)
			rc = sb_tensors_add(ts, nm, SB_F32, p->ndim, p->shape, host + m->n_floats + p->offset, 0, err);
	}
	free(host);
	return rc;
}

int sb_lm_trainer_state_from(struct sb_lm_trainer *tr, const struct sb_tensors *ts, struct sb_err *err)
{
	const struct sb_lm_model *m = tr->m;
	float *host = calloc(2 * m->n_floats, sizeof *host);
	if (!host)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	char nm[128];
	int rc = 0;
	for (int i = 0; i < m->n_params && !rc; i++) {
		const struct sb_lm_param *p = &m->params[i];
		for (int k = 0; k < 2 && !rc; k++) {
			snprintf(nm, sizeof nm, "%s.%s", k ? "adam_v" : "adam_m", p->name);
			const struct sb_tensor *t = sb_tensors_find(ts, nm);
			if (!t || t->dtype != SB_F32 || (size_t)sb_tensor_numel(t) != p->numel)
				rc = SB_ERR(err, SB_EDATA, "optimiser state lacks '%s' or has another shape", nm);
			else
				memcpy(host + (size_t)k * m->n_floats + p->offset, t->data, p->numel * sizeof *host);
		}
	}
	if (!rc)
		rc = m->be->ops->upload(m->be, tr->adam_m, host, m->n_floats * sizeof *host, err);
	if (!rc)
		rc = m->be->ops->upload(m->be, tr->adam_v, host + m->n_floats, m->n_floats * sizeof *host, err);
	free(host);
	return rc;
}

/* ================================================================ cached path */

struct sb_lm_cache {
	const struct sb_lm_model *m;
	int Tcap, pos;
	uint64_t mask_seed;
	float *K[SB_LM_MAX_LAYERS], *V[SB_LM_MAX_LAYERS], *acc[SB_LM_MAX_LAYERS]; /* A */
	float *hist[SB_LM_MAX_LAYERS];                                           /* C */
	float *S[SB_LM_MAX_LAYERS], *z[SB_LM_MAX_LAYERS];                        /* L */
	float *mhist[SB_LM_MAX_LAYERS], *mS[SB_LM_MAX_LAYERS];                   /* M: xBC history, state */
	/* row buffers for up to Tcap rows */
	int32_t *ids;
	float *x, *nrm, *mean, *rstd, *qkr, *q, *k, *v, *att, *y, *h, *a, *logits;
	float *moe; /* the MoE op's scratch for Tcap rows (SB_LM_MOE_SCRATCH) */
	float *vscr; /* V layers' rows: x, u, dt, y [Tcap, I], x_proj's [Tcap, R + 2N], dt, B, C apart */
	float *dscr; /* D layers' rows: in_proj_qkvz's, in_proj_ba's, q|k|v, its conv, b, a, z, y */
	float *qg;   /* attn_gate: q_proj's rows (each head's query and gate), then the gates */
	void *base;
	size_t bytes;
	struct sb_redzones rz; /* SB_ARENA_CHECK */
	float *qcap;
	int qcap_layer;
};

static size_t cache_layout(const struct sb_lm_cfg *c, int Tc, void *base, struct sb_lm_cache *k, struct sb_redzones *rz)
{
	char *cur = base;
	size_t off = 0;
	size_t d = (size_t)c->d, F = (size_t)c->ffn, T = (size_t)Tc;
	size_t kvd = (size_t)c->kv_heads * c->head_dim, qd = (size_t)c->heads * c->head_dim;
	size_t wide = 3 * d > qd ? 3 * d : qd;
	size_t mI = (size_t)c->ssm_heads * c->ssm_head_dim, mCD = mI + 2 * (size_t)c->ssm_groups * c->ssm_state;
	size_t mwide = 0; /* M layers (and Falcon-H1's parallel mixers): in_proj's rows */
	if (strchr(c->pattern, 'M') || c->parallel_ssm) {
		mwide = mI + mCD + (size_t)c->ssm_heads;
		wide = mwide > wide ? mwide : wide;
	}
	if (strchr(c->pattern, 'V')) /* in_proj's (x | z) rows */
		wide = 2 * (size_t)c->ssm_inner > wide ? 2 * (size_t)c->ssm_inner : wide;
	size_t attw = qd > d ? qd : d;
	attw = mwide && mI > attw ? mI : attw;
	for (int l = 0; l < c->n_layer; l++) {
		char kind = c->pattern[l];
		if (kind == 'A' || kind == 'S') {
			k->K[l] = TAKE(T * kvd);
			k->V[l] = TAKE(T * kvd);
			if (kind == 'A') /* S layers take no mask: no accumulated attention */
				k->acc[l] = TAKE((size_t)c->heads * T);
		}
		if (kind == 'M' || (kind == 'A' && c->parallel_ssm)) {
			k->mhist[l] = TAKE((size_t)(c->conv_k > 1 ? c->conv_k - 1 : 1) * mCD);
			k->mS[l] = TAKE(mI * (size_t)c->ssm_state);
		} else if (kind == 'D') { /* gated DeltaNet: the conv's history of q|k|v, the state [Hv, dk, dv] */
			size_t cd = 2 * (size_t)c->gdn_kheads * c->gdn_kdim + (size_t)c->gdn_vheads * c->gdn_vdim;
			k->mhist[l] = TAKE((size_t)(c->conv_k > 1 ? c->conv_k - 1 : 1) * cd);
			k->mS[l] = TAKE((size_t)c->gdn_vheads * c->gdn_kdim * c->gdn_vdim);
		} else if (kind == 'V') { /* Mamba (1): the conv's history of x, the state [I, N] */
			k->mhist[l] = TAKE((size_t)(c->conv_k > 1 ? c->conv_k - 1 : 1) * (size_t)c->ssm_inner);
			k->mS[l] = TAKE((size_t)c->ssm_inner * (size_t)c->ssm_state);
		}
		if (kind == 'C') {
			k->hist[l] = TAKE((size_t)(c->conv_k > 1 ? c->conv_k - 1 : 1) * d);
		} else if (kind == 'L') {
			size_t e = d / (size_t)c->lin_heads;
			k->S[l] = TAKE((size_t)c->lin_heads * e * e);
			k->z[l] = TAKE((size_t)c->lin_heads * e);
		}
	}
	k->ids = (int32_t *)TAKE(T);
	k->x = TAKE(T * d);
	k->nrm = TAKE(T * d);
	k->mean = TAKE(T);
	k->rstd = TAKE(T);
	k->qkr = TAKE(c->qk_norm ? T * (size_t)c->heads : 1);
	k->q = TAKE(T * wide);
	k->k = TAKE(T * d);
	k->v = TAKE(T * d);
	k->att = TAKE(T * attw);
	k->y = TAKE(T * d);
	k->h = TAKE(T * (F ? F * (c->swiglu ? 2 : 1) : 1));
	k->a = TAKE(T * (F ? F : 1));
	k->logits = TAKE(T * (size_t)c->vocab);
	k->moe = TAKE(c->moe_experts ? SB_LM_MOE_SCRATCH(Tc, d, c->moe_experts, c->moe_topk, c->moe_ffn) : 1);
	size_t vr = (size_t)c->ssm_dt_rank + 2 * (size_t)c->ssm_state;
	k->vscr = TAKE(strchr(c->pattern, 'V') ? T * (4 * (size_t)c->ssm_inner + 2 * vr) : 1);
	size_t gK = (size_t)c->gdn_kheads * c->gdn_kdim, gV = (size_t)c->gdn_vheads * c->gdn_vdim;
	size_t gH = (size_t)c->gdn_vheads;
	k->dscr = TAKE(strchr(c->pattern, 'D') ? T * ((2 * gK + 2 * gV) + 2 * gH + 2 * (2 * gK + gV) + 2 * gH + 2 * gV) : 1);
	k->qg = TAKE(c->attn_gate ? T * 3 * qd : 1);
	return off;
}

int sb_lm_cache_new(const struct sb_lm_model *m, int Tcap, struct sb_lm_cache **out, struct sb_err *err)
{
	if (Tcap < 1 || (m->cfg.pos == SB_LM_POS_LEARNED && Tcap > m->cfg.max_T))
		return SB_ERR(err, SB_EUSAGE, "cache of %d positions (model max_T %d)", Tcap, m->cfg.max_T);
	struct sb_lm_cache *k = calloc(1, sizeof *k);
	if (!k)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	k->m = m;
	k->Tcap = Tcap;
	k->rz = (struct sb_redzones){.on = sb_redzone_wanted(), .file = "lib/lm_model.c"};
	k->bytes = cache_layout(&m->cfg, Tcap, NULL, k, &k->rz);
	k->base = sb_be_alloc(m->be, k->bytes);
	if (!k->base) {
		size_t bytes = k->bytes;
		free(k);
		return SB_ERR(err, SB_EINTERNAL, "out of memory (cache of %zu bytes)", bytes);
	}
	if (sb_redzone_alloc(&k->rz)) {
		sb_lm_cache_free(k);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	cache_layout(&m->cfg, Tcap, k->base, k, &k->rz);
	int rc = sb_redzone_fill(m->be, k->base, &k->rz, err);
	if (rc) {
		sb_lm_cache_free(k);
		return rc;
	}
	sb_lm_cache_reset(k, 0);
	*out = k;
	return 0;
}

void sb_lm_cache_free(struct sb_lm_cache *c)
{
	if (!c)
		return;
	sb_be_free(c->m->be, c->base);
	sb_redzone_free(&c->rz);
	free(c);
}

void sb_lm_cache_reset(struct sb_lm_cache *c, uint64_t mask_seed)
{
	const struct sb_lm_cfg *cf = &c->m->cfg;
	struct sb_ctx *ctx = sb_be_main(c->m->be);
	for (int l = 0; l < cf->n_layer; l++) {
		if (c->acc[l])
			c->m->be->ops->zero(ctx, c->acc[l], (size_t)cf->heads * c->Tcap * sizeof(float));
		if (c->hist[l])
			c->m->be->ops->zero(ctx, c->hist[l],
					    (size_t)(cf->conv_k > 1 ? cf->conv_k - 1 : 1) * cf->d * sizeof(float));
		if (c->mS[l]) { /* M: history of xBC, state [I, N]; V: history of x, state [I, N]; D:
				 * history of q|k|v, state [Hv, dk, dv] */
			char kd = cf->pattern[l];
			size_t mI = (size_t)cf->ssm_heads * cf->ssm_head_dim, mCD = mI + 2 * (size_t)cf->ssm_groups * cf->ssm_state;
			size_t st = mI * (size_t)cf->ssm_state;
			if (kd == 'V') {
				mCD = (size_t)cf->ssm_inner;
				st = mCD * (size_t)cf->ssm_state;
			} else if (kd == 'D') {
				mCD = 2 * (size_t)cf->gdn_kheads * cf->gdn_kdim + (size_t)cf->gdn_vheads * cf->gdn_vdim;
				st = (size_t)cf->gdn_vheads * cf->gdn_kdim * cf->gdn_vdim;
			}
			c->m->be->ops->zero(ctx, c->mhist[l], (size_t)(cf->conv_k > 1 ? cf->conv_k - 1 : 1) * mCD * sizeof(float));
			c->m->be->ops->zero(ctx, c->mS[l], st * sizeof(float));
		}
		if (c->S[l]) {
			size_t e = (size_t)cf->d / cf->lin_heads;
			c->m->be->ops->zero(ctx, c->S[l], (size_t)cf->lin_heads * e * e * sizeof(float));
			c->m->be->ops->zero(ctx, c->z[l], (size_t)cf->lin_heads * e * sizeof(float));
		}
	}
	c->pos = 0;
	c->mask_seed = mask_seed;
}

int sb_lm_cache_pos(const struct sb_lm_cache *c) { return c->pos; }

void *sb_lm_cache_zone(const struct sb_lm_cache *c, int i) { return sb_redzone_at(c->base, &c->rz, i); }

void sb_lm_cache_capture_q(struct sb_lm_cache *c, int layer, float *buf)
{
	c->qcap = buf;
	c->qcap_layer = layer;
}

void sb_lm_cache_kv(const struct sb_lm_cache *c, int layer, const float **K, const float **V)
{
	*K = layer >= 0 && layer < c->m->cfg.n_layer ? c->K[layer] : NULL;
	*V = layer >= 0 && layer < c->m->cfg.n_layer ? c->V[layer] : NULL;
}

static int forward_rows_run(struct sb_ctx *ctx, struct sb_lm_model *m, struct sb_lm_cache *c, int n,
			    const struct sb_lm_mask *mask, float *logits, int all_rows, struct sb_lm_attn_obs *obs,
			    struct sb_err *err);

/* the rows, then (SB_ARENA_CHECK) the cache's red zones */
static int forward_rows(struct sb_ctx *ctx, struct sb_lm_model *m, struct sb_lm_cache *c, int n,
			const struct sb_lm_mask *mask, float *logits, int all_rows, struct sb_lm_attn_obs *obs,
			struct sb_err *err)
{
	SB_TRY(forward_rows_run(ctx, m, c, n, mask, logits, all_rows, obs, err));
	SB_TRY(sb_redzone_check(m->be, c->base, &c->rz, "a cached forward pass", "a decoding cache", err));
	SB_TRY(pzones_check(m, m->pt, "a cached forward pass", "the cached path's copy", err));
	return sb_be_tails_check(m->be, "a cached forward pass", err);
}

int sb_lm_forward_cached(struct sb_ctx *ctx, struct sb_lm_model *m, struct sb_lm_cache *c, const uint8_t *tokens,
			 int n, const struct sb_lm_mask *mask, float *logits, int all_rows,
			 struct sb_lm_attn_obs *obs, struct sb_err *err)
{
	if (n > 0 && c->pos + n <= c->Tcap)
		for (int i = 0; i < n; i++)
			c->ids[i] = tokens[i];
	return forward_rows(ctx, m, c, n, mask, logits, all_rows, obs, err);
}

int sb_lm_forward_cached_ids(struct sb_ctx *ctx, struct sb_lm_model *m, struct sb_lm_cache *c, const int32_t *tokens,
			     int n, const struct sb_lm_mask *mask, float *logits, int all_rows,
			     struct sb_lm_attn_obs *obs, struct sb_err *err)
{
	if (n > 0 && c->pos + n <= c->Tcap)
		for (int i = 0; i < n; i++) {
			if (tokens[i] < 0 || tokens[i] >= m->cfg.vocab)
				return SB_ERR(err, SB_EDATA, "token id %d at position %d is outside the vocabulary (%d)",
					      (int)tokens[i], c->pos + i, m->cfg.vocab);
			c->ids[i] = tokens[i];
		}
	return forward_rows(ctx, m, c, n, mask, logits, all_rows, obs, err);
}

/* a product of the cached path: the packed weights wp are float, or bfloat16 in a model
 * loaded with them (the same bits either way: widening a bfloat16 is exact) */
static void mm_rows(const struct sb_lm_model *m, struct sb_ctx *ctx, float *out, const float *inp, const float *wp,
		    const float *bias, int M, int K, int N)
{
	if (m->bf16)
		m->lo->matmul_rows_bf16(ctx, out, inp, (const uint16_t *)(const void *)wp, bias, M, K, N);
	else
		m->lo->matmul_rows(ctx, out, inp, wp, bias, M, K, N);
}

/* dst[0..n) = src * f (an elementwise product, as transformers' multipliers), or nothing when
 * f is 1; returns the scaled rows (src itself when f is 1) */
static const float *scaled(float *dst, const float *src, float f, size_t n)
{
	if (f == 1.0f)
		return src;
	for (size_t i = 0; i < n; i++)
		dst[i] = src[i] * f;
	return dst;
}

static inline float silu_scalar(float x) { return x / (1.0f + expf(-x)); }

/* A Mamba2 mixer on the n normed rows c->nrm into out[n, d] (layer l's M mixer, or an A
 * layer's parallel one): Falcon-H1's input multiplier (into c->k), in_proj (into c->q), its
 * mup_vector over (z | x | B | C | dt), the recurrence (c->att), the gated norm as ssm_norm
 * says, out_proj and the output multiplier */
static void mamba_mixer(struct sb_lm_model *m, struct sb_ctx *ctx, struct sb_lm_cache *c, int l, float *out, int n)
{
	const struct sb_lm_cfg *cf = &m->cfg;
	const struct sb_backend_lm_ops *lo = m->lo;
	const struct sb_lm_layer *y = &m->w.layer[l], *yt = &m->wt.layer[l];
	int d = cf->d, H = cf->ssm_heads, P = cf->ssm_head_dim, I = H * P, GN = cf->ssm_groups * cf->ssm_state;
	int ld = I + (I + 2 * GN) + H;
	const float *in = scaled(c->k, c->nrm, cf->ssm_in_mult, (size_t)n * d);
	mm_rows(m, ctx, c->q, in, yt->in_w, y->in_b, n, d, ld);
	const float mup[5] = {cf->ssm_mult_z, cf->ssm_mult_x, cf->ssm_mult_b, cf->ssm_mult_c, cf->ssm_mult_dt};
	const int end[5] = {I, 2 * I, 2 * I + GN, 2 * I + 2 * GN, ld};
	for (int p = 0, j0 = 0; p < 5; j0 = end[p++])
		if (mup[p] != 1.0f)
			for (int i = 0; i < n; i++)
				scaled(c->q + (size_t)i * ld + j0, c->q + (size_t)i * ld + j0, mup[p], (size_t)(end[p] - j0));
	/* y = S C + D x, times silu(z) unless the norm comes before the gate */
	lo->mamba2_rows(ctx, c->att, c->q, c->mhist[l], c->mS[l], y->cw, y->cb, y->dt_bias, y->A_log, y->Dskip, n, H, P,
			cf->ssm_state, cf->ssm_groups, cf->conv_k, cf->ssm_norm != 2);
	if (cf->ssm_norm) { /* RMSNorm (in place) over all I channels, or over each group's */
		int G = cf->ssm_norm_groups, gs = I / G;
		if (G == 1)
			lo->norm_forward(ctx, c->att, NULL, c->rstd, c->att, y->gn_w, NULL, n, I, cf->norm_eps, 1);
		else
			for (int i = 0; i < n; i++)
				for (int g = 0; g < G; g++) {
					float *r = c->att + (size_t)i * I + (size_t)g * gs;
					lo->norm_forward(ctx, r, NULL, c->rstd, r, y->gn_w + (size_t)g * gs, NULL, 1, gs,
							 cf->norm_eps, 1);
				}
	}
	if (cf->ssm_norm == 2) /* Falcon-H1's norm before the gate: times silu(z) */
		for (int i = 0; i < n; i++) {
			float *r = c->att + (size_t)i * I;
			const float *z = c->q + (size_t)i * ld;
			for (int j = 0; j < I; j++)
				r[j] *= silu_scalar(z[j]);
		}
	mm_rows(m, ctx, out, c->att, yt->out_w, y->out_b, n, I, d);
	scaled(out, out, cf->ssm_out_mult, (size_t)n * d);
}

/* columns [j0, j0 + w) of n rows of width ld into dst[n, w] */
static void take_cols(float *dst, const float *src, int n, size_t ld, size_t j0, size_t w)
{
	for (int i = 0; i < n; i++)
		memcpy(dst + (size_t)i * w, src + (size_t)i * ld + j0, w * sizeof *dst);
}

/* A Mamba (1) mixer (layer l, kind V) on the n normed rows c->nrm into out[n, d]: in_proj into
 * c->q (x | z), the causal conv of x (its history carried) and SiLU, x_proj, the inner RMSNorms
 * of dt, B and C (Jamba's), dt_proj with its bias, the scan (mamba1_rows: softplus, the state,
 * D and the gate), out_proj */
static void mamba1_mixer(struct sb_lm_model *m, struct sb_ctx *ctx, struct sb_lm_cache *c, int l, float *out, int n)
{
	const struct sb_lm_cfg *cf = &m->cfg;
	const struct sb_backend_lm_ops *lo = m->lo;
	const struct sb_lm_layer *y = &m->w.layer[l], *yt = &m->wt.layer[l];
	size_t I = (size_t)cf->ssm_inner, N = (size_t)cf->ssm_state, R = (size_t)cf->ssm_dt_rank, nn = (size_t)n;
	float *x = c->vscr, *u = x + nn * I, *dt = u + nn * I, *ys = dt + nn * I, *dbc = ys + nn * I;
	float *dtn = dbc + nn * (R + 2 * N), *Bn = dtn + nn * R, *Cn = Bn + nn * N;
	int d = cf->d;
	mm_rows(m, ctx, c->q, c->nrm, yt->in_w, y->in_b, n, d, (int)(2 * I));
	take_cols(x, c->q, n, 2 * I, 0, I);
	lo->dwconv_rows(ctx, u, x, c->mhist[l], y->cw, y->cb, n, (int)I, cf->conv_k);
	for (size_t i = 0; i < nn * I; i++)
		u[i] = silu_scalar(u[i]);
	mm_rows(m, ctx, dbc, u, yt->xp_w, NULL, n, (int)I, (int)(R + 2 * N));
	take_cols(dtn, dbc, n, R + 2 * N, 0, R);
	take_cols(Bn, dbc, n, R + 2 * N, R, N);
	take_cols(Cn, dbc, n, R + 2 * N, R + N, N);
	if (cf->ssm_inner_norm) { /* Jamba's dt_layernorm, b_layernorm, c_layernorm (in place) */
		lo->norm_forward(ctx, dtn, NULL, c->rstd, dtn, y->dtn_w, NULL, n, (int)R, cf->norm_eps, 1);
		lo->norm_forward(ctx, Bn, NULL, c->rstd, Bn, y->bn_w, NULL, n, (int)N, cf->norm_eps, 1);
		lo->norm_forward(ctx, Cn, NULL, c->rstd, Cn, y->cn_w, NULL, n, (int)N, cf->norm_eps, 1);
	}
	mm_rows(m, ctx, dt, dtn, yt->dtp_w, y->dtp_b, n, (int)R, (int)I);
	take_cols(x, c->q, n, 2 * I, I, I); /* x's place now holds the gate z */
	lo->mamba1_rows(ctx, ys, u, dt, Bn, Cn, x, c->mS[l], y->A_log, y->Dskip, n, (int)I, (int)N);
	mm_rows(m, ctx, out, ys, yt->out_w, y->out_b, n, (int)I, d);
}

/* A gated DeltaNet mixer (layer l, kind D) on the n normed rows c->nrm into out[n, d]:
 * in_proj_qkvz and in_proj_ba, their per-key-head groups taken apart into (q | k | v), z, b
 * and a; the causal conv of q|k|v (its history carried) and SiLU; the recurrence
 * (deltanet_rows); the gated norm, RMSNorm per value head then silu(z); out_proj */
static void deltanet_mixer(struct sb_lm_model *m, struct sb_ctx *ctx, struct sb_lm_cache *c, int l, float *out, int n)
{
	const struct sb_lm_cfg *cf = &m->cfg;
	const struct sb_backend_lm_ops *lo = m->lo;
	const struct sb_lm_layer *y = &m->w.layer[l], *yt = &m->wt.layer[l];
	size_t Hk = (size_t)cf->gdn_kheads, Hv = (size_t)cf->gdn_vheads, dk = (size_t)cf->gdn_kdim;
	size_t dv = (size_t)cf->gdn_vdim, r = Hv / Hk, Kd = Hk * dk, Vd = Hv * dv, cd = 2 * Kd + Vd, nn = (size_t)n;
	size_t wq = 2 * Kd + 2 * Vd, gw = 2 * dk + 2 * r * dv; /* a key head's group in qkvz: q k v z */
	float *qkvz = c->dscr, *ba = qkvz + nn * wq, *qkv = ba + nn * 2 * Hv, *cv = qkv + nn * cd;
	float *b = cv + nn * cd, *a = b + nn * Hv, *z = a + nn * Hv, *ys = z + nn * Vd;
	int d = cf->d;
	mm_rows(m, ctx, qkvz, c->nrm, yt->in_w, NULL, n, d, (int)wq);
	mm_rows(m, ctx, ba, c->nrm, yt->ba_w, NULL, n, d, (int)(2 * Hv));
	for (size_t i = 0; i < nn; i++)
		for (size_t g = 0; g < Hk; g++) {
			const float *src = qkvz + i * wq + g * gw, *bs = ba + i * 2 * Hv + g * 2 * r;
			float *row = qkv + i * cd;
			memcpy(row + g * dk, src, dk * sizeof *src);                      /* q */
			memcpy(row + Kd + g * dk, src + dk, dk * sizeof *src);            /* k */
			memcpy(row + 2 * Kd + g * r * dv, src + 2 * dk, r * dv * sizeof *src); /* v */
			memcpy(z + i * Vd + g * r * dv, src + 2 * dk + r * dv, r * dv * sizeof *src);
			memcpy(b + i * Hv + g * r, bs, r * sizeof *bs);
			memcpy(a + i * Hv + g * r, bs + r, r * sizeof *bs);
		}
	lo->dwconv_rows(ctx, cv, qkv, c->mhist[l], y->cw, NULL, n, (int)cd, cf->conv_k);
	for (size_t i = 0; i < nn * cd; i++)
		cv[i] = silu_scalar(cv[i]);
	lo->deltanet_rows(ctx, ys, cv, b, a, c->mS[l], y->A_log, y->dt_bias, n, (int)Hk, (int)Hv, (int)dk, (int)dv);
	/* the gated norm: RMSNorm of each value head (one weight for all), then silu(z) */
	lo->norm_forward(ctx, ys, NULL, c->rstd, ys, y->gn_w, NULL, (int)(nn * Hv), (int)dv, cf->norm_eps, 1);
	for (size_t i = 0; i < nn * Vd; i++)
		ys[i] *= silu_scalar(z[i]);
	mm_rows(m, ctx, out, ys, yt->out_w, NULL, n, (int)Vd, d);
}

/* The rows c->ids[0..n) at positions pos..pos+n-1 */
static int forward_rows_run(struct sb_ctx *ctx, struct sb_lm_model *m, struct sb_lm_cache *c, int n,
			    const struct sb_lm_mask *mask, float *logits, int all_rows, struct sb_lm_attn_obs *obs,
			    struct sb_err *err)
{
	const struct sb_lm_cfg *cf = &m->cfg;
	const struct sb_backend_ops *op = m->be->ops;
	const struct sb_backend_lm_ops *lo = m->lo;
	if (n < 1)
		return 0;
	if (c->pos + n > c->Tcap)
		return SB_ERR(err, SB_EUSAGE, "cache full: %d + %d tokens > %d", c->pos, n, c->Tcap);
	if (!m->pt_valid && !m->p)
		return SB_ERR(err, SB_EUSAGE, "an evaluation-only model has no parameters until loaded");
	if (!m->pt_valid)
		sb_lm_model_prepare(m);
	int t0 = c->pos, d = cf->d, F = cf->ffn, hd = cf->head_dim, NH = cf->heads, NKV = cf->kv_heads;
	int qd = NH * hd, kvd = NKV * hd, rms = cf->rmsnorm;
	const struct sb_lm_ptrs *w = &m->w, *wt = &m->wt;
	struct sb_lm_mask mk;
	if (mask) {
		mk = *mask;
		mk.seed = c->mask_seed;
	}
	if (m->bf16) /* the table in bfloat16: rows widened (exactly) */
		for (int i = 0; i < n; i++) {
			const uint16_t *row = (const uint16_t *)(const void *)w->embed + (size_t)c->ids[i] * d;
			uint32_t *o = (uint32_t *)(void *)(c->x + (size_t)i * d);
			for (int j = 0; j < d; j++)
				o[j] = (uint32_t)row[j] << 16;
		}
	else
		op->embedding_forward(ctx, c->x, c->ids, w->embed, n, d);
	if (cf->emb_mult != 1.0f) /* Granite's embedding_multiplier */
		for (size_t i = 0; i < (size_t)n * d; i++)
			c->x[i] *= cf->emb_mult;
	if (cf->pos == SB_LM_POS_LEARNED)
		lo->pos_forward(ctx, c->x, w->pos, 1, n, t0, d);
	float qscale = query_scale(cf); /* YaRN's, Granite's attention_multiplier */
	/* S layers: no YaRN factor (their RoPE is unscaled); the sliding window as a mask of
	 * the window alone (no sinks) */
	float qscale_s = cf->rope_local_theta != 0.0f ? query_scale_noyarn(cf) : qscale;
	struct sb_lm_mask swin = {.kind = SB_LM_MASK_STRUCTURE, .sinks = 0, .window = cf->window};
	for (int l = 0; l < cf->n_layer; l++) {
		const struct sb_lm_layer *y = &w->layer[l], *yt = &wt->layer[l];
		if (cf->prenorm)
			lo->norm_forward(ctx, c->nrm, c->mean, c->rstd, c->x, y->ln1_w, y->ln1_b, n, d, cf->norm_eps, rms);
		else /* OLMo: the mixer reads the residual stream itself */
			op->copy(ctx, c->nrm, c->x, (size_t)n * d * sizeof(float));
		if (y->kind == 'A' || y->kind == 'S') {
			int loc = y->kind == 'S';
			float *Kn = c->K[l] + (size_t)t0 * kvd, *Vn = c->V[l] + (size_t)t0 * kvd;
			const double *freq = loc ? m->rope_freq_local : m->rope_freq;
			float qs = !sb_lm_layer_rope(cf, l) ? query_scale_noyarn(cf) : loc ? qscale_s : qscale;
			const float *ain = scaled(c->k, c->nrm, cf->attn_in_mult, (size_t)n * d); /* Falcon-H1's */
			if (cf->attn_gate) { /* Qwen3-Next: each head's query, then its gate */
				float *g = c->qg + (size_t)n * 2 * qd;
				mm_rows(m, ctx, c->qg, ain, yt->q_w, y->q_b, n, d, 2 * qd);
				for (int i = 0; i < n; i++)
					for (int h = 0; h < NH; h++) {
						const float *src = c->qg + (size_t)i * 2 * qd + (size_t)h * 2 * hd;
						memcpy(c->q + (size_t)i * qd + (size_t)h * hd, src, (size_t)hd * sizeof *src);
						memcpy(g + (size_t)i * qd + (size_t)h * hd, src + hd, (size_t)hd * sizeof *src);
					}
			} else
				mm_rows(m, ctx, c->q, ain, yt->q_w, y->q_b, n, d, qd);
			mm_rows(m, ctx, Kn, ain, yt->k_w, y->k_b, n, d, kvd);
			mm_rows(m, ctx, Vn, ain, yt->v_w, y->v_b, n, d, kvd);
			scaled(Kn, Kn, cf->key_mult, (size_t)n * kvd);
			if (cf->qk_norm == 2) { /* over all heads of a position, in place (OLMo) */
				lo->norm_forward(ctx, c->q, NULL, c->qkr, c->q, y->qn_w, NULL, n, qd, cf->norm_eps, 1);
				lo->norm_forward(ctx, Kn, NULL, c->qkr, Kn, y->kn_w, NULL, n, kvd, cf->norm_eps, 1);
			} else if (cf->qk_norm) { /* per head, in place (Qwen3) */
				lo->norm_forward(ctx, c->q, NULL, c->qkr, c->q, y->qn_w, NULL, n * NH, hd, cf->norm_eps, 1);
				lo->norm_forward(ctx, Kn, NULL, c->qkr, Kn, y->kn_w, NULL, n * NKV, hd, cf->norm_eps, 1);
			}
			if (sb_lm_layer_rope(cf, l)) {
				lo->rope(ctx, c->q, 1, n, t0, NH, hd, sb_lm_rope_dim(cf), freq, 0);
				lo->rope(ctx, Kn, 1, n, t0, NKV, hd, sb_lm_rope_dim(cf), freq, 0);
			}
			if (qs != 1.0f)
				for (size_t i = 0; i < (size_t)n * qd; i++)
					c->q[i] *= qs;
			if (c->qcap && c->qcap_layer == l)
				op->copy(ctx, c->qcap + (size_t)t0 * qd, c->q, (size_t)n * qd * sizeof(float));
			if (loc)
				SB_TRY(lo->attn_rows(ctx, c->att, c->q, c->K[l], c->V[l], NULL, c->Tcap, t0, n, NH, NKV, hd,
						     cf->attn_softcap, &swin, l, NULL, err));
			else
				SB_TRY(lo->attn_rows(ctx, c->att, c->q, c->K[l], c->V[l], c->acc[l], c->Tcap, t0, n, NH, NKV,
						     hd, cf->attn_softcap, mask ? &mk : NULL, l, obs ? &obs[l] : NULL, err));
			if (cf->attn_gate) { /* the output times sigmoid(gate) */
				const float *g = c->qg + (size_t)n * 2 * qd;
				for (size_t i = 0; i < (size_t)n * qd; i++)
					c->att[i] *= 1.0f / (1.0f + expf(-g[i]));
			}
			mm_rows(m, ctx, c->y, c->att, yt->o_w, y->o_b, n, qd, d);
			scaled(c->y, c->y, cf->attn_out_mult, (size_t)n * d);
			if (y->kind == 'A' && cf->parallel_ssm) { /* Falcon-H1: + Mamba2(the same input) */
				mamba_mixer(m, ctx, c, l, c->v, n);
				lo->add(ctx, c->y, c->v, (size_t)n * d);
			}
		} else if (y->kind == 'L') {
			mm_rows(m, ctx, c->q, c->nrm, yt->q_w, y->q_b, n, d, d);
			mm_rows(m, ctx, c->k, c->nrm, yt->k_w, y->k_b, n, d, d);
			mm_rows(m, ctx, c->v, c->nrm, yt->v_w, y->v_b, n, d, d);
			lo->linattn_rows(ctx, c->att, c->q, c->k, c->v, c->S[l], c->z[l], n, cf->lin_heads, d / cf->lin_heads);
			mm_rows(m, ctx, c->y, c->att, yt->o_w, y->o_b, n, d, d);
		} else if (y->kind == 'M') {
			mamba_mixer(m, ctx, c, l, c->y, n);
		} else if (y->kind == 'V') {
			mamba1_mixer(m, ctx, c, l, c->y, n);
		} else if (y->kind == 'D') {
			deltanet_mixer(m, ctx, c, l, c->y, n);
		} else {
			if (cf->conv_gate) {
				mm_rows(m, ctx, c->q, c->nrm, yt->in_w, y->in_b, n, d, 3 * d);
				lo->conv_rows(ctx, c->att, c->q, c->hist[l], y->cw, y->cb, n, d, cf->conv_k);
			} else {
				mm_rows(m, ctx, c->q, c->nrm, yt->in_w, y->in_b, n, d, d);
				lo->dwconv_rows(ctx, c->att, c->q, c->hist[l], y->cw, y->cb, n, d, cf->conv_k);
			}
			mm_rows(m, ctx, c->y, c->att, yt->out_w, y->out_b, n, d, d);
		}
		if (cf->sandwich) /* Gemma's norm of the mixer's output, in place */
			lo->norm_forward(ctx, c->y, NULL, c->rstd, c->y, y->ln3_w, NULL, n, d, cf->norm_eps, 1);
		if (cf->resid_mult != 1.0f) /* Granite's residual_multiplier */
			for (size_t i = 0; i < (size_t)n * d; i++)
				c->y[i] *= cf->resid_mult;
		lo->add(ctx, c->x, c->y, (size_t)n * d);
		int dense = sb_lm_layer_mlp(cf, l), moe = sb_lm_layer_moe(cf, l);
		if (dense || moe) {
			if (cf->parallel_mlp)
				; /* Cohere2: c->nrm still holds the mixer's normed input */
			else if (cf->prenorm)
				lo->norm_forward(ctx, c->nrm, c->mean, c->rstd, c->x, y->ln2_w, y->ln2_b, n, d, cf->norm_eps,
						 rms);
			else
				op->copy(ctx, c->nrm, c->x, (size_t)n * d * sizeof(float));
			if (!dense) /* the experts alone (Mixtral's, Jamba's MoE layers): added to zeros */
				op->zero(ctx, c->y, (size_t)n * d * sizeof(float));
		}
		if (dense) {
			mm_rows(m, ctx, c->h, c->nrm, yt->up_w, y->up_b, n, d, cf->swiglu ? 2 * F : F);
			if (cf->mlp_gate_mult != 1.0f) /* Falcon-H1's: the gate projection's output (SwiGLU) */
				for (int i = 0; i < n; i++)
					scaled(c->h + (size_t)i * 2 * F, c->h + (size_t)i * 2 * F, cf->mlp_gate_mult, (size_t)F);
			if (cf->swiglu == 2)
				lo->geglu_forward(ctx, c->a, c->h, n, F);
			else if (cf->swiglu)
				lo->swiglu_forward(ctx, c->a, c->h, n, F);
			else
				op->gelu_forward(ctx, c->a, NULL, NULL, c->h, &no_drop, (size_t)n * F);
			mm_rows(m, ctx, c->y, c->a, yt->down_w, y->down_b, n, F, d);
			scaled(c->y, c->y, cf->mlp_down_mult, (size_t)n * d);
			if (moe && cf->moe_shared_gate) /* the shared expert times sigmoid(its gate . x) */
				for (int i = 0; i < n; i++) {
					float gsum = 0;
					const float *xi = c->nrm + (size_t)i * d;
					for (int j = 0; j < d; j++)
						gsum = fmaf(y->sg_w[j], xi[j], gsum);
					scaled(c->y + (size_t)i * d, c->y + (size_t)i * d, 1.0f / (1.0f + expf(-gsum)), (size_t)d);
				}
		}
		if (moe && m->bf16) /* the experts, added to the dense MLP's output (Granite's) or to zeros */
			lo->moe_rows_bf16(ctx, c->y, c->nrm, yt->moe_r, (const uint16_t *)(const void *)yt->moe_in,
					  (const uint16_t *)(const void *)yt->moe_out, c->moe, n, d, cf->moe_experts,
					  cf->moe_topk, cf->moe_ffn, cf->moe_gate);
		else if (moe)
			lo->moe_rows(ctx, c->y, c->nrm, yt->moe_r, yt->moe_in, yt->moe_out, c->moe, n, d, cf->moe_experts,
				     cf->moe_topk, cf->moe_ffn, cf->moe_gate);
		if (dense || moe) {
			if (cf->sandwich)
				lo->norm_forward(ctx, c->y, NULL, c->rstd, c->y, y->ln4_w, NULL, n, d, cf->norm_eps, 1);
			if (cf->resid_mult != 1.0f)
				for (size_t i = 0; i < (size_t)n * d; i++)
					c->y[i] *= cf->resid_mult;
			lo->add(ctx, c->x, c->y, (size_t)n * d);
		}
	}
	c->pos += n;
	if (!logits)
		return 0;
	int r0 = all_rows ? 0 : n - 1, nr = all_rows ? n : 1;
	lo->norm_forward(ctx, c->nrm, c->mean, c->rstd, c->x + (size_t)r0 * d, w->lnf_w, w->lnf_b, nr, d, cf->norm_eps,
			 rms);
	mm_rows(m, ctx, c->logits, c->nrm, wt->head, NULL, nr, d, cf->vocab);
	if (cf->logit_div != 1.0f) /* Granite's logits_scaling */
		for (size_t i = 0; i < (size_t)nr * cf->vocab; i++)
			c->logits[i] /= cf->logit_div;
	scaled(c->logits, c->logits, cf->logit_mult, (size_t)nr * cf->vocab); /* Falcon-H1's lm_head_multiplier */
	if (cf->final_softcap != 0.0f) /* Gemma 2's: as transformers computes it, z / cap, tanh, times cap */
		for (size_t i = 0; i < (size_t)nr * cf->vocab; i++)
			c->logits[i] = tanhf(c->logits[i] / cf->final_softcap) * cf->final_softcap;
	return op->download(m->be, logits, c->logits, (size_t)nr * cf->vocab * sizeof(float), err);
}
