/* lm_import.c — a Hugging Face Llama/Qwen decoder as an LM run directory (see lm_import.h). */
#include "lm_import.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "io.h"
#include "json.h"
#include "tensor.h"
#include "tokenizer.h"

/* ---------------------------------------------------------------- config.json */

static int cfg_int(const struct sb_json *o, const char *name, const char *key, int lo, int hi, int def, int *out,
		   struct sb_err *err)
{
	const struct sb_json *v = sb_json_get(o, key);
	if (!v || v->type == SB_JSON_NULL) {
		if (def < lo)
			return SB_ERR(err, SB_EDATA, "%s: '%s' is missing", name, key);
		*out = def;
		return 0;
	}
	if (v->type != SB_JSON_NUMBER || v->number != floor(v->number) || v->number < lo || v->number > hi)
		return SB_ERR(err, SB_EDATA, "%s: '%s' must be an integer in [%d, %d]", name, key, lo, hi);
	*out = (int)v->number;
	return 0;
}

static int cfg_num(const struct sb_json *o, const char *name, const char *key, double def, double *out,
		   struct sb_err *err)
{
	const struct sb_json *v = sb_json_get(o, key);
	if (!v || v->type == SB_JSON_NULL) {
		if (isnan(def))
			return SB_ERR(err, SB_EDATA, "%s: '%s' is missing", name, key);
		*out = def;
		return 0;
	}
	if (v->type != SB_JSON_NUMBER || !(v->number > 0) || !isfinite(v->number))
		return SB_ERR(err, SB_EDATA, "%s: '%s' must be a positive number", name, key);
	*out = v->number;
	return 0;
}

static int cfg_bool(const struct sb_json *o, const char *name, const char *key, int def, int *out, struct sb_err *err)
{
	const struct sb_json *v = sb_json_get(o, key);
	if (!v || v->type == SB_JSON_NULL) {
		*out = def;
		return 0;
	}
	if (v->type != SB_JSON_BOOL)
		return SB_ERR(err, SB_EDATA, "%s: '%s' must be true or false", name, key);
	*out = v->boolean;
	return 0;
}

/* The RoPE scaling of a rope_scaling or rope_parameters object q (called sname) of the
 * Llama/Qwen family into r's rope_* fields, as transformers 5 and vLLM read it:
 *   default: none;
 *   llama3:  factor, low_freq_factor, high_freq_factor, original_max_position_embeddings;
 *   linear:  factor;
 *   yarn:    factor (absent: max_position_embeddings / original_max_position_embeddings),
 *            original_max_position_embeddings (absent: max_position_embeddings), beta_fast
 *            (32), beta_slow (1), truncate (true), attention_factor (absent: from mscale and
 *            mscale_all_dim when both are given and non-zero, else 0.1 ln(factor) + 1; 1 for a
 *            factor <= 1).
 * (Other transformers releases read it otherwise: 4.46 ignores
 * original_max_position_embeddings, and the 2025 releases before the fix of
 * huggingface/transformers#38224 replace a given factor by max_position_embeddings /
 * original_max_position_embeddings when the latter is given: docs/lm.md.) */
static int rope_spec(const struct sb_json *q, const char *name, const char *sname, int max_pos, struct sb_lm_cfg *r,
		     struct sb_err *err)
{
	const char *ty = sb_json_str(sb_json_get(q, "rope_type"), sb_json_str(sb_json_get(q, "type"), ""));
	double f = NAN, lo = NAN, hi = NAN, bf = 32, bs = 1, af = NAN;
	int orig = -1;
	r->rope_scaling = 0;
	if (!strcmp(ty, "default"))
		return 0;
	if (!strcmp(ty, "llama3")) {
		SB_TRY(cfg_num(q, name, "factor", NAN, &f, err));
		SB_TRY(cfg_num(q, name, "low_freq_factor", NAN, &lo, err));
		SB_TRY(cfg_num(q, name, "high_freq_factor", NAN, &hi, err));
		SB_TRY(cfg_int(q, name, "original_max_position_embeddings", 1, 1 << 24, -1, &orig, err));
		r->rope_scaling = 1;
		r->rope_low_freq = (float)lo;
		r->rope_high_freq = (float)hi;
		r->rope_orig_max = orig;
	} else if (!strcmp(ty, "linear")) {
		SB_TRY(cfg_num(q, name, "factor", NAN, &f, err));
		r->rope_scaling = 2;
	} else if (!strcmp(ty, "yarn")) {
		int trunc = 1;
		SB_TRY(cfg_int(q, name, "original_max_position_embeddings", 1, 1 << 24, max_pos, &orig, err));
		/* no factor: the two lengths' ratio, to a float as transformers' float32 product takes it */
		SB_TRY(cfg_num(q, name, "factor", (double)(float)((double)max_pos / orig), &f, err));
		SB_TRY(cfg_num(q, name, "beta_fast", 32, &bf, err));
		SB_TRY(cfg_num(q, name, "beta_slow", 1, &bs, err));
		SB_TRY(cfg_bool(q, name, "truncate", 1, &trunc, err));
		SB_TRY(cfg_num(q, name, "attention_factor", 0, &af, err));
		if (af == 0) { /* not given: YaRN's mscale rule */
			const struct sb_json *ms = sb_json_get(q, "mscale"), *ma = sb_json_get(q, "mscale_all_dim");
			double m1 = ms && ms->type == SB_JSON_NUMBER ? ms->number : 0;
			double m2 = ma && ma->type == SB_JSON_NUMBER ? ma->number : 0;
			if ((ms && ms->type != SB_JSON_NULL && ms->type != SB_JSON_NUMBER) ||
			    (ma && ma->type != SB_JSON_NULL && ma->type != SB_JSON_NUMBER) || !isfinite(m1) || !isfinite(m2))
				return SB_ERR(err, SB_EDATA, "%s: %s.mscale and mscale_all_dim must be numbers", name, sname);
			double l = f <= 1 ? 0 : 0.1 * log(f);
			af = m1 != 0 && m2 != 0 ? (m1 * l + 1) / (m2 * l + 1) : l + 1;
		}
		r->rope_scaling = 3;
		r->rope_orig_max = orig;
		r->rope_beta_fast = (float)bf;
		r->rope_beta_slow = (float)bs;
		r->rope_attn = (float)af;
		r->rope_truncate = trunc;
	} else {
		return SB_ERR(err, SB_EDATA, "%s: %s type '%s' is not implemented (none, default, llama3, linear, yarn)",
			      name, sname, ty);
	}
	if ((double)(float)f != f)
		return SB_ERR(err, SB_EDATA, "%s: %s.factor %.17g is not a float", name, sname, f);
	r->rope_factor = (float)f;
	return 0;
}

/* two readings of the RoPE scaling the same */
static int same_rope(const struct sb_lm_cfg *a, const struct sb_lm_cfg *b)
{
	if (a->rope_scaling != b->rope_scaling)
		return 0;
	if (!a->rope_scaling)
		return 1;
	return a->rope_factor == b->rope_factor && a->rope_orig_max == b->rope_orig_max &&
	       a->rope_low_freq == b->rope_low_freq && a->rope_high_freq == b->rope_high_freq &&
	       a->rope_beta_fast == b->rope_beta_fast && a->rope_beta_slow == b->rope_beta_slow &&
	       a->rope_attn == b->rope_attn && a->rope_truncate == b->rope_truncate;
}

static void rope_copy(struct sb_lm_cfg *c, const struct sb_lm_cfg *r)
{
	c->rope_scaling = r->rope_scaling;
	c->rope_factor = r->rope_factor;
	c->rope_low_freq = r->rope_low_freq;
	c->rope_high_freq = r->rope_high_freq;
	c->rope_orig_max = r->rope_orig_max;
	c->rope_beta_fast = r->rope_beta_fast;
	c->rope_beta_slow = r->rope_beta_slow;
	c->rope_attn = r->rope_attn;
	c->rope_truncate = r->rope_truncate;
}

/* the norms' epsilon (key: its name in config.json) as a float, within 1e-6 of the file's */
static int set_norm_eps(struct sb_lm_cfg *c, const char *name, const char *key, double eps, struct sb_err *err)
{
	if ((double)(float)eps != eps && fabs((double)(float)eps - eps) > 1e-6 * eps)
		return SB_ERR(err, SB_EDATA, "%s: %s %g", name, key, eps);
	c->norm_eps = (float)eps;
	return 0;
}

static int check_cfg(struct sb_lm_cfg *c, const char *name, struct sb_err *err)
{
	int rc = sb_lm_cfg_check(c, err);
	if (rc && err) {
		sb_err_prefix(err, "%s", name); /* its messages name no file */
		err->code = SB_EDATA;
	}
	return rc;
}

/* ---------------------------------------------------------------- LFM2 */

/* An optional field that must agree with one already read (a legacy alias or a
 * restatement that transformers does not read): absent or null is fine. */
static int lfm2_same_int(const struct sb_json *o, const char *name, const char *key, int want, const char *what,
			 struct sb_err *err)
{
	const struct sb_json *v = sb_json_get(o, key);
	if (!v || v->type == SB_JSON_NULL)
		return 0;
	if (v->type != SB_JSON_NUMBER || v->number != (double)want)
		return SB_ERR(err, SB_EDATA, "%s: '%s' must equal %s (%d) when given", name, key, what, want);
	return 0;
}

/* A boolean field whose only supported value is `want` (absent = supported). */
static int lfm2_must_bool(const struct sb_json *o, const char *name, const char *key, int want, const char *why,
			  struct sb_err *err)
{
	int b = want;
	SB_TRY(cfg_bool(o, name, key, want, &b, err));
	if (b != want)
		return SB_ERR(err, SB_EDATA, "%s: '%s' is %s (%s)", name, key, b ? "true" : "false", why);
	return 0;
}

/* RoPE's theta, which LFM2 configs spell three ways (transformers 4.54-4.57 read `theta`
 * before `rope_theta`; later releases rope_parameters.rope_theta): all that are given must
 * agree. The default is Lfm2Config's, 1e6. */
static int lfm2_theta(const struct sb_json *o, const char *name, double *theta, struct sb_err *err)
{
	const struct sb_json *rp = sb_json_get(o, "rope_parameters");
	if (rp && rp->type != SB_JSON_NULL && rp->type != SB_JSON_OBJECT)
		return SB_ERR(err, SB_EDATA, "%s: rope_parameters must be null or an object", name);
	const struct sb_json *per = rp && rp->type == SB_JSON_OBJECT ? sb_json_get(rp, "full_attention") : NULL;
	if (per && per->type == SB_JSON_OBJECT) /* keyed by layer type: the attention layers' */
		rp = per;
	const struct sb_json *rs = sb_json_get(o, "rope_scaling");
	if (rs && rs->type != SB_JSON_NULL && rs->type != SB_JSON_OBJECT)
		return SB_ERR(err, SB_EDATA, "%s: rope_scaling must be null or an object", name);
	const struct sb_json *typed[2] = {rp && rp->type == SB_JSON_OBJECT ? rp : NULL,
					  rs && rs->type == SB_JSON_OBJECT ? rs : NULL};
	const char *tname[2] = {"rope_parameters", "rope_scaling"};
	for (int i = 0; i < 2; i++) {
		if (!typed[i])
			continue;
		const char *ty = sb_json_str(sb_json_get(typed[i], "rope_type"),
					     sb_json_str(sb_json_get(typed[i], "type"), "default"));
		if (strcmp(ty, "default"))
			return SB_ERR(err, SB_EDATA, "%s: %s type '%s' is not implemented for lfm2 (default only)", name,
				      tname[i], ty);
	}
	const char *keys[3] = {"theta", "rope_theta", "rope_parameters.rope_theta"};
	const struct sb_json *src[3] = {o, o, typed[0]};
	const char *first = NULL;
	*theta = 1000000.0;
	for (int i = 0; i < 3; i++) {
		if (!src[i])
			continue;
		const char *key = i == 2 ? "rope_theta" : keys[i];
		const struct sb_json *v = sb_json_get(src[i], key);
		if (!v || v->type == SB_JSON_NULL)
			continue;
		double t;
		SB_TRY(cfg_num(src[i], name, key, 0, &t, err));
		if (first && t != *theta)
			return SB_ERR(err, SB_EDATA, "%s: '%s' %.17g disagrees with '%s' %.17g", name, keys[i], t, first,
				      *theta);
		if (!first)
			first = keys[i];
		*theta = t;
	}
	return 0;
}

/* The kind of each layer: layer_types ("conv" | "full_attention"), or the older
 * full_attn_idxs; both given must agree; neither: every layer attention (Lfm2Config's
 * default). */
static int lfm2_layers(const struct sb_json *o, const char *name, int layers, char *pattern, struct sb_err *err)
{
	const struct sb_json *lt = sb_json_get(o, "layer_types"), *fi = sb_json_get(o, "full_attn_idxs");
	if (lt && lt->type == SB_JSON_NULL)
		lt = NULL;
	if (fi && fi->type == SB_JSON_NULL)
		fi = NULL;
	memset(pattern, 'A', (size_t)layers);
	pattern[layers] = 0;
	if (lt) {
		if (lt->type != SB_JSON_ARRAY || lt->n != (size_t)layers)
			return SB_ERR(err, SB_EDATA, "%s: 'layer_types' must be an array of num_hidden_layers (%d) strings",
				      name, layers);
		for (int l = 0; l < layers; l++) {
			const char *k = sb_json_str(lt->items[l], NULL);
			if (k && !strcmp(k, "full_attention"))
				pattern[l] = 'A';
			else if (k && !strcmp(k, "conv"))
				pattern[l] = 'C';
			else
				return SB_ERR(err, SB_EDATA,
					      "%s: layer_types[%d] '%s' is not a layer kind read here (conv, full_attention)",
					      name, l, k ? k : "(not a string)");
		}
	}
	if (fi) {
		char p2[SB_LM_MAX_LAYERS + 1];
		memset(p2, 'C', (size_t)layers);
		p2[layers] = 0;
		if (fi->type != SB_JSON_ARRAY)
			return SB_ERR(err, SB_EDATA, "%s: 'full_attn_idxs' must be an array of layer indices", name);
		for (size_t i = 0; i < fi->n; i++) {
			const struct sb_json *v = fi->items[i];
			if (v->type != SB_JSON_NUMBER || v->number != floor(v->number) || v->number < 0 ||
			    v->number >= layers)
				return SB_ERR(err, SB_EDATA, "%s: full_attn_idxs[%zu] is not a layer index in [0, %d)", name,
					      i, layers);
			p2[(int)v->number] = 'A';
		}
		if (lt && strcmp(p2, pattern))
			return SB_ERR(err, SB_EDATA, "%s: 'full_attn_idxs' (%s) disagrees with 'layer_types' (%s)", name, p2,
				      pattern);
		memcpy(pattern, p2, (size_t)layers + 1);
	}
	return 0;
}

/* The feed-forward width, as Lfm2MLP computes it. */
static int lfm2_ffn(const struct sb_json *o, const char *name, int *F, char *rule, size_t cap, struct sb_err *err)
{
	int ff = 0, adjust = 1, mult_of = 256;
	const char *src = sb_json_get(o, "block_ff_dim") && sb_json_get(o, "block_ff_dim")->type != SB_JSON_NULL
				  ? "block_ff_dim"
				  : "intermediate_size";
	SB_TRY(cfg_int(o, name, src, 1, 1 << 20, -1, &ff, err));
	SB_TRY(cfg_bool(o, name, "block_auto_adjust_ff_dim", 1, &adjust, err));
	SB_TRY(cfg_int(o, name, "block_multiple_of", 1, 1 << 20, 256, &mult_of, err));
	const struct sb_json *mv = sb_json_get(o, "block_ffn_dim_multiplier");
	int has_mult = !mv || mv->type != SB_JSON_NULL; /* absent: 1.0; null: none */
	double mult = 1.0;
	if (mv && has_mult)
		SB_TRY(cfg_num(o, name, "block_ffn_dim_multiplier", 1.0, &mult, err));
	int n = snprintf(rule, cap, "%s %d", src, ff);
	long f = ff;
	if (adjust) {
		f = (long)(2.0 * (double)ff / 3.0); /* Python's int(2 * F / 3): truncation of the double quotient */
		n += snprintf(rule + n, cap - (size_t)n, ", block_auto_adjust_ff_dim: int(2*%d/3) = %ld", ff, f);
		if (has_mult) {
			double gd = mult * (double)f;
			if (!(gd < (double)(1 << 20)))
				return SB_ERR(err, SB_EDATA, "%s: block_ffn_dim_multiplier %g makes the feed-forward width %g",
					      name, mult, gd);
			long g = (long)gd;
			long r = (g + mult_of - 1) / mult_of * (long)mult_of;
			n += snprintf(rule + n, cap - (size_t)n,
				      ", int(block_ffn_dim_multiplier %g * %ld) = %ld, rounded up to block_multiple_of %d = %ld",
				      mult, f, g, mult_of, r);
			f = r;
		}
	} else
		snprintf(rule + n, cap - (size_t)n, ", block_auto_adjust_ff_dim false: taken as written");
	if (f < 1 || f > 1 << 20)
		return SB_ERR(err, SB_EDATA, "%s: the feed-forward width comes out as %ld (%s)", name, f, rule);
	*F = (int)f;
	return 0;
}

static int lfm2_config(const struct sb_json *o, const char *name, struct sb_lm_cfg *c, struct sb_lm_hf_info *info,
		       struct sb_err *err)
{
	int layers = 0, heads = 0, tied = -1, tied2 = -1, cbias = 0;
	double eps = 0, theta = 0, beps = 0;
	SB_TRY(cfg_int(o, name, "vocab_size", 2, 1 << 20, -1, &c->vocab, err));
	SB_TRY(cfg_int(o, name, "hidden_size", 2, 1 << 14, -1, &c->d, err));
	SB_TRY(cfg_int(o, name, "num_hidden_layers", 1, SB_LM_MAX_LAYERS, -1, &layers, err));
	SB_TRY(cfg_int(o, name, "num_attention_heads", 1, 1024, -1, &heads, err));
	SB_TRY(cfg_int(o, name, "num_key_value_heads", 1, 1024, 8, &c->kv_heads, err)); /* Lfm2Config's default */
	SB_TRY(cfg_int(o, name, "head_dim", 1, 1024, c->d % heads == 0 ? c->d / heads : -1, &c->head_dim, err));
	SB_TRY(cfg_num(o, name, "norm_eps", 1e-5, &eps, err));
	SB_TRY(cfg_int(o, name, "max_position_embeddings", 1, 1 << 24, 128000, &info->max_pos, err));
	SB_TRY(cfg_int(o, name, "conv_L_cache", 1, 64, 3, &c->conv_k, err));
	SB_TRY(cfg_bool(o, name, "conv_bias", 0, &cbias, err));
	/* tie_embedding (the original key) is read before tie_word_embeddings, as Lfm2Config does;
	 * both given must agree; neither: tied */
	SB_TRY(cfg_bool(o, name, "tie_embedding", -1, &tied, err));
	SB_TRY(cfg_bool(o, name, "tie_word_embeddings", -1, &tied2, err));
	if (tied >= 0 && tied2 >= 0 && tied != tied2)
		return SB_ERR(err, SB_EDATA, "%s: 'tie_embedding' disagrees with 'tie_word_embeddings'", name);
	tied = tied >= 0 ? tied : tied2 >= 0 ? tied2 : 1;
	SB_TRY(lfm2_theta(o, name, &theta, err));
	SB_TRY(lfm2_layers(o, name, layers, c->pattern, err));
	SB_TRY(lfm2_ffn(o, name, &c->ffn, info->ffn_rule, sizeof info->ffn_rule, err));
	/* restatements of the above in the original LFM2 configs: read by no one, but an
	 * architecture they describe otherwise is not the one built here */
	SB_TRY(lfm2_must_bool(o, name, "block_use_swiglu", 1, "only the SwiGLU feed-forward is read", err));
	SB_TRY(lfm2_must_bool(o, name, "use_pos_enc", 1, "the attention layers are read with RoPE", err));
	SB_TRY(lfm2_same_int(o, name, "block_dim", c->d, "hidden_size", err));
	SB_TRY(lfm2_same_int(o, name, "conv_dim", c->d, "hidden_size", err));
	SB_TRY(lfm2_same_int(o, name, "conv_dim_out", c->d, "hidden_size", err));
	SB_TRY(lfm2_same_int(o, name, "num_heads", heads, "num_attention_heads", err));
	SB_TRY(lfm2_same_int(o, name, "num_layers", layers, "num_hidden_layers", err));
	SB_TRY(cfg_num(o, name, "block_norm_eps", eps, &beps, err));
	if ((float)beps != (float)eps)
		return SB_ERR(err, SB_EDATA, "%s: 'block_norm_eps' %g must equal norm_eps %g when given", name, beps, eps);
	c->norm_eps = (float)eps;
	c->rope_theta = (float)theta;
	if ((double)c->rope_theta != theta)
		return SB_ERR(err, SB_EDATA, "%s: rope_theta %.17g is not exactly a float", name, theta);
	c->heads = heads;
	c->conv_gate = 1;
	c->conv_bias = cbias;
	c->qk_norm = 1;
	c->swiglu = 1;
	c->rmsnorm = 1;
	c->pos = SB_LM_POS_ROPE;
	c->tied = tied;
	c->max_T = info->max_pos;
	return check_cfg(c, name, err);
}

void sb_lm_lfm2_name(const char *ours, char *out, size_t cap)
{
	static const char *const map[][2] = {
		{"input_layernorm.weight", "operator_norm.weight"},
		{"post_attention_layernorm.weight", "ffn_norm.weight"},
		{"self_attn.o_proj.weight", "self_attn.out_proj.weight"},
		{"self_attn.q_norm.weight", "self_attn.q_layernorm.weight"},
		{"self_attn.k_norm.weight", "self_attn.k_layernorm.weight"},
		{"mlp.gate_proj.weight", "feed_forward.w1.weight"},
		{"mlp.up_proj.weight", "feed_forward.w3.weight"},
		{"mlp.down_proj.weight", "feed_forward.w2.weight"},
	};
	if (!strcmp(ours, "model.norm.weight")) {
		snprintf(out, cap, "model.embedding_norm.weight");
		return;
	}
	int l, at = 0;
	if (sscanf(ours, "model.layers.%d.%n", &l, &at) == 1 && at > 0)
		for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
			if (!strcmp(ours + at, map[i][0])) {
				snprintf(out, cap, "model.layers.%d.%s", l, map[i][1]);
				return;
			}
	snprintf(out, cap, "%s", ours);
}

/* ---------------------------------------------------------------- Granite 4.0 hybrid */

/* A number field that may be absent or null (def) and must be > 0 and exactly a float. */
static int granite_float(const struct sb_json *o, const char *name, const char *key, double def, float *out,
			 struct sb_err *err)
{
	double v = def;
	SB_TRY(cfg_num(o, name, key, def, &v, err)); /* (0 is refused: attn_scale 0 means 1 / sqrt(head_dim)) */
	*out = (float)v;
	if ((double)*out != v && fabs((double)*out - v) > 1e-6 * v)
		return SB_ERR(err, SB_EDATA, "%s: '%s' %.17g does not fit a float", name, key, v);
	return 0;
}

/* The Mamba2 mixers' fields (GraniteMoeHybridConfig's, BambaConfig's and FalconH1Config's, the
 * same mixer): heads, groups, state, convolution, expansion, biases, head width ("auto": the
 * mixer's width over the heads). The width is mamba_expand * hidden_size, or d_ssm when > 0
 * (Falcon-H1's mamba_d_ssm). */
static int mamba2_fields(const struct sb_json *o, const char *name, long d_ssm, struct sb_lm_cfg *c,
			 struct sb_err *err)
{
	int expand = 0;
	SB_TRY(cfg_int(o, name, "mamba_n_heads", 1, 1 << 16, 128, &c->ssm_heads, err));
	SB_TRY(cfg_int(o, name, "mamba_n_groups", 1, 1 << 16, 1, &c->ssm_groups, err));
	SB_TRY(cfg_int(o, name, "mamba_d_state", 1, 1 << 16, 256, &c->ssm_state, err));
	SB_TRY(cfg_int(o, name, "mamba_d_conv", 1, 64, 4, &c->conv_k, err));
	SB_TRY(cfg_int(o, name, "mamba_expand", 1, 64, 2, &expand, err));
	SB_TRY(cfg_bool(o, name, "mamba_conv_bias", 1, &c->ssm_conv_bias, err));
	SB_TRY(cfg_bool(o, name, "mamba_proj_bias", 0, &c->ssm_proj_bias, err));
	long inter = d_ssm > 0 ? d_ssm : (long)expand * c->d;
	const char *width = d_ssm > 0 ? "mamba_d_ssm" : "mamba_expand * hidden_size";
	const struct sb_json *dh = sb_json_get(o, "mamba_d_head");
	if (!dh || dh->type == SB_JSON_NULL || (dh->type == SB_JSON_STRING && !strcmp(dh->text, "auto"))) {
		if (inter % c->ssm_heads)
			return SB_ERR(err, SB_EDATA, "%s: 'mamba_n_heads' %d does not divide %s %ld", name, c->ssm_heads,
				      width, inter);
		c->ssm_head_dim = (int)(inter / c->ssm_heads);
	} else
		SB_TRY(cfg_int(o, name, "mamba_d_head", 1, 1 << 16, -1, &c->ssm_head_dim, err));
	if ((long)c->ssm_head_dim * c->ssm_heads != inter)
		return SB_ERR(err, SB_EDATA, "%s: 'mamba_d_head' %d times mamba_n_heads %d must equal %s %ld", name,
			      c->ssm_head_dim, c->ssm_heads, width, inter);
	if (c->ssm_heads % c->ssm_groups)
		return SB_ERR(err, SB_EDATA, "%s: 'mamba_n_groups' %d does not divide mamba_n_heads %d", name,
			      c->ssm_groups, c->ssm_heads);
	return 0;
}

static int granite_config(const struct sb_json *o, const char *name, struct sb_lm_cfg *c, struct sb_lm_hf_info *info,
			  struct sb_err *err)
{
	int layers = 0, heads = 0, experts = 0, abias = 0, tied = 0;
	double eps = 0, theta = 0;
	SB_TRY(cfg_int(o, name, "vocab_size", 2, 1 << 20, -1, &c->vocab, err));
	SB_TRY(cfg_int(o, name, "hidden_size", 2, 1 << 14, -1, &c->d, err));
	SB_TRY(cfg_int(o, name, "num_hidden_layers", 1, SB_LM_MAX_LAYERS, -1, &layers, err));
	SB_TRY(cfg_int(o, name, "num_attention_heads", 1, 1024, -1, &heads, err));
	SB_TRY(cfg_int(o, name, "num_key_value_heads", 1, 1024, heads, &c->kv_heads, err));
	SB_TRY(cfg_int(o, name, "shared_intermediate_size", 1, 1 << 17, 1024, &c->ffn, err));
	SB_TRY(cfg_int(o, name, "num_local_experts", 0, 1 << 12, 8, &experts, err));
	if (experts > 0) { /* every layer's MLP gets the experts beside it (GraniteMoeHybridMoE) */
		c->moe_experts = experts;
		SB_TRY(cfg_int(o, name, "num_experts_per_tok", 1, experts < 64 ? experts : 64, 2, &c->moe_topk, err));
		SB_TRY(cfg_int(o, name, "intermediate_size", 1, 1 << 17, 11008, &c->moe_ffn, err));
	}
	SB_TRY(cfg_num(o, name, "rms_norm_eps", 1e-6, &eps, err));
	SB_TRY(cfg_int(o, name, "max_position_embeddings", 1, 1 << 24, 2048, &info->max_pos, err));
	SB_TRY(cfg_bool(o, name, "tie_word_embeddings", 0, &tied, err));
	SB_TRY(cfg_bool(o, name, "attention_bias", 0, &abias, err));
	/* transformers' GraniteMoeHybridAttention takes head_dim = hidden / heads (a head_dim
	 * field is not read) and requires that it divides */
	if (c->d % heads)
		return SB_ERR(err, SB_EDATA, "%s: 'num_attention_heads' %d does not divide hidden_size %d", name, heads,
			      c->d);
	c->head_dim = c->d / heads;
	/* layers */
	const struct sb_json *lt = sb_json_get(o, "layer_types");
	memset(c->pattern, 'M', (size_t)layers); /* layers_block_type's default: every layer mamba */
	c->pattern[layers] = 0;
	if (lt && lt->type != SB_JSON_NULL) {
		if (lt->type != SB_JSON_ARRAY || lt->n != (size_t)layers)
			return SB_ERR(err, SB_EDATA, "%s: 'layer_types' must be an array of num_hidden_layers (%d) strings",
				      name, layers);
		for (int l = 0; l < layers; l++) {
			const char *k = sb_json_str(lt->items[l], NULL);
			if (k && !strcmp(k, "attention"))
				c->pattern[l] = 'A';
			else if (k && !strcmp(k, "mamba"))
				c->pattern[l] = 'M';
			else
				return SB_ERR(err, SB_EDATA,
					      "%s: layer_types[%d] '%s' is not a layer kind read here (mamba, attention)", name,
					      l, k ? k : "(not a string)");
		}
	}
	/* positions: transformers builds a rotary embedding only for "rope" */
	const char *pe = sb_json_str(sb_json_get(o, "position_embedding_type"), NULL);
	const struct sb_json *pev = sb_json_get(o, "position_embedding_type");
	if (pev && pev->type != SB_JSON_NULL && !pe)
		return SB_ERR(err, SB_EDATA, "%s: 'position_embedding_type' must be a string or null", name);
	if (!pe || !strcmp(pe, "nope"))
		c->pos = SB_LM_POS_NONE;
	else if (!strcmp(pe, "rope")) {
		c->pos = SB_LM_POS_ROPE;
		SB_TRY(cfg_num(o, name, "rope_theta", 10000.0, &theta, err));
		c->rope_theta = (float)theta;
		if ((double)c->rope_theta != theta)
			return SB_ERR(err, SB_EDATA, "%s: rope_theta %.17g is not exactly a float", name, theta);
		/* rope_scaling (transformers 4.x) or rope_parameters (later releases): default only;
		 * a rope_parameters.rope_theta must agree with rope_theta */
		const char *keys[2] = {"rope_scaling", "rope_parameters"};
		for (int i = 0; i < 2; i++) {
			const struct sb_json *rs = sb_json_get(o, keys[i]);
			if (!rs || rs->type == SB_JSON_NULL)
				continue;
			const char *ty = rs->type == SB_JSON_OBJECT ? sb_json_str(sb_json_get(rs, "rope_type"),
										     sb_json_str(sb_json_get(rs, "type"), "default"))
								    : "(not an object)";
			if (strcmp(ty, "default"))
				return SB_ERR(err, SB_EDATA,
					      "%s: %s type '%s' is not implemented for granitemoehybrid (null or default)", name,
					      keys[i], ty);
			const struct sb_json *rt = sb_json_get(rs, "rope_theta");
			if (i == 1 && rt && rt->type != SB_JSON_NULL) {
				double t2;
				const struct sb_json *top_t = sb_json_get(o, "rope_theta");
				SB_TRY(cfg_num(rs, name, "rope_theta", 0, &t2, err));
				if (top_t && top_t->type != SB_JSON_NULL && t2 != theta)
					return SB_ERR(err, SB_EDATA, "%s: rope_parameters.rope_theta %.17g disagrees with rope_theta %.17g",
						      name, t2, theta);
				theta = t2;
				c->rope_theta = (float)theta;
				if ((double)c->rope_theta != theta)
					return SB_ERR(err, SB_EDATA, "%s: rope_theta %.17g is not exactly a float", name, theta);
			}
		}
	} else
		return SB_ERR(err, SB_EDATA, "%s: 'position_embedding_type' '%s' is not read here (null, nope, rope)",
			      name, pe);
	SB_TRY(mamba2_fields(o, name, 0, c, err));
	/* Granite's multipliers */
	SB_TRY(granite_float(o, name, "embedding_multiplier", 1.0, &c->emb_mult, err));
	SB_TRY(granite_float(o, name, "residual_multiplier", 1.0, &c->resid_mult, err));
	SB_TRY(granite_float(o, name, "attention_multiplier", 1.0, &c->attn_scale, err));
	SB_TRY(granite_float(o, name, "logits_scaling", 1.0, &c->logit_div, err));
	SB_TRY(set_norm_eps(c, name, "rms_norm_eps", eps, err));
	c->heads = heads;
	c->attn_bias = abias;
	c->swiglu = 1;
	c->rmsnorm = 1;
	c->tied = tied;
	c->max_T = info->max_pos;
	return check_cfg(c, name, err);
}

void sb_lm_granite_name(const char *ours, char *out, size_t cap, int *half)
{
	int l, at = 0;
	*half = 0;
	if (sscanf(ours, "model.layers.%d.%n", &l, &at) == 1 && at > 0) {
		const char *rest = ours + at;
		if (!strcmp(rest, "mlp.gate_proj.weight") || !strcmp(rest, "mlp.up_proj.weight")) {
			*half = rest[4] == 'g' ? 1 : 2;
			snprintf(out, cap, "model.layers.%d.shared_mlp.input_linear.weight", l);
			return;
		}
		if (!strcmp(rest, "mlp.down_proj.weight")) {
			snprintf(out, cap, "model.layers.%d.shared_mlp.output_linear.weight", l);
			return;
		}
	}
	snprintf(out, cap, "%s", ours);
}

/* ---------------------------------------------------------------- Bamba */

/* IBM's Bamba (BambaForCausalLM, model_type bamba; read from transformers 4.57.1's
 * configuration_bamba.py / modeling_bamba.py): Mamba2 mixers (Granite 4.0's, the same code)
 * and attention layers at attn_layer_indices, a SwiGLU MLP after each, RMSNorms, no
 * multipliers; the attention's RoPE on the first partial_rotary_factor (0.5 unless the config
 * says) of each head, its frequencies over those dimensions. BambaConfig sets rope_theta
 * 10000, partial_rotary_factor 0.5, rope_scaling None, attention_bias and mlp_bias false
 * before it reads the other fields, so a config.json that gives one overrides it: read so
 * here. */
static int bamba_config(const struct sb_json *o, const char *name, struct sb_lm_cfg *c, struct sb_lm_hf_info *info,
			struct sb_err *err)
{
	int layers = 0, heads = 0, abias = 0, mbias = 0, tied = 0;
	double eps = 0, theta = 0, prf = 0;
	SB_TRY(cfg_int(o, name, "vocab_size", 2, 1 << 20, 128000, &c->vocab, err));
	SB_TRY(cfg_int(o, name, "hidden_size", 2, 1 << 14, 4096, &c->d, err));
	SB_TRY(cfg_int(o, name, "intermediate_size", 1, 1 << 17, 14336, &c->ffn, err));
	SB_TRY(cfg_int(o, name, "num_hidden_layers", 1, SB_LM_MAX_LAYERS, 32, &layers, err));
	SB_TRY(cfg_int(o, name, "num_attention_heads", 1, 1024, 32, &heads, err));
	SB_TRY(cfg_int(o, name, "num_key_value_heads", 1, 1024, 8, &c->kv_heads, err));
	if (c->d % heads && !sb_json_get(o, "head_dim"))
		return SB_ERR(err, SB_EDATA, "%s: 'num_attention_heads' %d does not divide hidden_size %d", name, heads,
			      c->d);
	SB_TRY(cfg_int(o, name, "head_dim", 1, 1024, c->d / heads, &c->head_dim, err));
	SB_TRY(cfg_num(o, name, "rms_norm_eps", 1e-5, &eps, err));
	SB_TRY(cfg_int(o, name, "max_position_embeddings", 1, 1 << 24, 262144, &info->max_pos, err));
	SB_TRY(cfg_bool(o, name, "tie_word_embeddings", 0, &tied, err));
	SB_TRY(cfg_bool(o, name, "attention_bias", 0, &abias, err));
	SB_TRY(cfg_bool(o, name, "mlp_bias", 0, &mbias, err));
	if (mbias)
		return SB_ERR(err, SB_EDATA, "%s: mlp_bias is true (not read here)", name);
	SB_TRY(cfg_num(o, name, "rope_theta", 10000.0, &theta, err));
	SB_TRY(cfg_num(o, name, "partial_rotary_factor", 0.5, &prf, err));
	if (prf > 1)
		return SB_ERR(err, SB_EDATA, "%s: 'partial_rotary_factor' %g is above 1", name, prf);
	/* transformers' dimension of the rotation: int(head_dim * factor), even */
	int rd = (int)(c->head_dim * prf);
	if (rd < 2 || rd % 2)
		return SB_ERR(err, SB_EDATA, "%s: head_dim %d times partial_rotary_factor %g gives %d rotated dimensions "
					     "(an even number >= 2 is needed)", name, c->head_dim, prf, rd);
	c->rope_dim = rd == c->head_dim ? 0 : rd;
	const struct sb_json *rs = sb_json_get(o, "rope_scaling");
	if (rs && rs->type != SB_JSON_NULL)
		return SB_ERR(err, SB_EDATA, "%s: rope_scaling is set (bamba: null only)", name);
	if (sb_json_get(o, "rope_parameters"))
		return SB_ERR(err, SB_EDATA, "%s: rope_parameters (transformers 5's spelling) is not read for bamba: give "
					     "rope_theta and partial_rotary_factor", name);
	/* layers: attention at attn_layer_indices, Mamba2 elsewhere (layers_block_type) */
	memset(c->pattern, 'M', (size_t)layers);
	c->pattern[layers] = 0;
	const struct sb_json *ai = sb_json_get(o, "attn_layer_indices");
	if (ai && ai->type != SB_JSON_NULL) {
		if (ai->type != SB_JSON_ARRAY)
			return SB_ERR(err, SB_EDATA, "%s: 'attn_layer_indices' must be an array of layer indices or null", name);
		for (size_t i = 0; i < ai->n; i++) {
			const struct sb_json *v = ai->items[i];
			if (v->type != SB_JSON_NUMBER || v->number != floor(v->number) || v->number < 0 || v->number >= layers)
				return SB_ERR(err, SB_EDATA, "%s: attn_layer_indices[%zu] is not a layer index (0..%d)", name, i,
					      layers - 1);
			c->pattern[(int)v->number] = 'A';
		}
	}
	SB_TRY(mamba2_fields(o, name, 0, c, err));
	SB_TRY(set_norm_eps(c, name, "rms_norm_eps", eps, err));
	c->rope_theta = (float)theta;
	if ((double)c->rope_theta != theta)
		return SB_ERR(err, SB_EDATA, "%s: rope_theta %.17g is not exactly a float", name, theta);
	c->heads = heads;
	c->attn_bias = abias;
	c->pos = SB_LM_POS_ROPE;
	c->swiglu = 1;
	c->rmsnorm = 1;
	c->tied = tied;
	c->max_T = info->max_pos;
	return check_cfg(c, name, err);
}

/* Bamba's name of the toolkit's tensor: feed_forward.* for mlp.*, pre_ff_layernorm for
 * post_attention_layernorm (the MLP's input norm), model.final_layernorm for model.norm; the
 * Mamba2 and attention tensors keep their names */
void sb_lm_bamba_name(const char *ours, char *out, size_t cap)
{
	int l, at = 0;
	if (!strcmp(ours, "model.norm.weight")) {
		snprintf(out, cap, "model.final_layernorm.weight");
		return;
	}
	if (sscanf(ours, "model.layers.%d.%n", &l, &at) == 1 && at > 0) {
		const char *rest = ours + at;
		if (!strncmp(rest, "mlp.", 4)) {
			snprintf(out, cap, "model.layers.%d.feed_forward.%s", l, rest + 4);
			return;
		}
		if (!strcmp(rest, "post_attention_layernorm.weight")) {
			snprintf(out, cap, "model.layers.%d.pre_ff_layernorm.weight", l);
			return;
		}
	}
	snprintf(out, cap, "%s", ours);
}

/* rope_scaling, null or an object read as Llama's (rope_spec); transformers 5's rope_parameters
 * is not read for this family (mt): refused, naming the fields to give instead */
static int rope_scaling_only(const struct sb_json *o, const char *name, const char *mt, const char *give, int max_pos,
			     struct sb_lm_cfg *c, struct sb_err *err)
{
	const struct sb_json *rs = sb_json_get(o, "rope_scaling");
	if (rs && rs->type != SB_JSON_NULL && rs->type != SB_JSON_OBJECT)
		return SB_ERR(err, SB_EDATA, "%s: rope_scaling must be null or an object", name);
	if (rs && rs->type == SB_JSON_OBJECT) {
		struct sb_lm_cfg r = *c;
		SB_TRY(rope_spec(rs, name, "rope_scaling", max_pos, &r, err));
		rope_copy(c, &r);
	}
	if (sb_json_get(o, "rope_parameters"))
		return SB_ERR(err, SB_EDATA, "%s: rope_parameters (transformers 5's spelling) is not read for %s: give %s",
			      name, mt, give);
	return 0;
}

/* ---------------------------------------------------------------- experts apart */

/* The mixture-of-experts fields of Qwen3-MoE (kind 1: num_experts 128, num_experts_per_tok 8,
 * moe_intermediate_size 768, norm_topk_prob false, decoder_sparse_step 1, mlp_only_layers
 * none: layer l has experts unless listed there, when (l + 1) is a multiple of the step; the
 * others keep the dense MLP of intermediate_size), Qwen3-Next (kind 4: the same fields, its
 * config class's defaults 512, 10, 512, true) and Mixtral (kind 2: num_local_experts 8,
 * num_experts_per_tok 2, every layer, experts of intermediate_size, the picked weights
 * renormalised); the experts replace the MLP (moe_dense 0) */
static int moe_fields(const struct sb_json *o, const char *name, int kind, int layers, struct sb_lm_cfg *c,
		      struct sb_err *err)
{
	int E = 0, K = 0, Fe = 0, norm = 1, step = 1, next = kind == 4;
	static const int defE[7] = {0, 128, 8, 0, 512, 60, 64}, defK[7] = {0, 8, 2, 0, 10, 4, 8};
	static const int defFe[7] = {0, 768, 0, 0, 512, 1408, 0};
	SB_TRY(cfg_int(o, name, kind == 2 ? "num_local_experts" : "num_experts", kind == 2 || kind == 6 ? 1 : 0, 1 << 12,
		       defE[kind], &E, err));
	SB_TRY(cfg_int(o, name, "num_experts_per_tok", 1, 64, defK[kind], &K, err));
	if (E && K > E)
		return SB_ERR(err, SB_EDATA, "%s: 'num_experts_per_tok' %d is more than the %d experts", name, K, E);
	if (kind == 2 || kind == 6) {
		c->moe_ffn = c->ffn; /* Mixtral's and OLMoE's experts are intermediate_size wide; no dense MLP */
		c->ffn = 0;
		if (kind == 6) /* OLMoE's norm_topk_prob (false) */
			SB_TRY(cfg_bool(o, name, "norm_topk_prob", 0, &norm, err));
	} else {
		SB_TRY(cfg_int(o, name, "moe_intermediate_size", 1, 1 << 17, defFe[kind], &Fe, err));
		SB_TRY(cfg_bool(o, name, "norm_topk_prob", next, &norm, err));
		SB_TRY(cfg_int(o, name, "decoder_sparse_step", 1, 1 << 20, 1, &step, err));
		c->moe_ffn = Fe;
	}
	c->moe_experts = E;
	c->moe_topk = K;
	c->moe_gate = !norm; /* without renormalisation: the softmax over every expert */
	c->moe_dense = 0;
	if (!E) /* Qwen3-MoE without experts: every layer dense */
		return 0;
	for (int l = 0; l < layers; l++)
		c->moe_layers[l] = (l + 1) % step ? '0' : '1';
	c->moe_layers[layers] = 0;
	const struct sb_json *only = kind != 2 && kind != 6 ? sb_json_get(o, "mlp_only_layers") : NULL;
	if (only && only->type != SB_JSON_NULL && only->type != SB_JSON_ARRAY)
		return SB_ERR(err, SB_EDATA, "%s: 'mlp_only_layers' must be an array of layer indices or null", name);
	for (size_t i = 0; only && only->type == SB_JSON_ARRAY && i < only->n; i++) {
		const struct sb_json *v = only->items[i];
		if (v->type != SB_JSON_NUMBER || v->number != floor(v->number) || v->number < 0 || v->number >= layers)
			return SB_ERR(err, SB_EDATA, "%s: mlp_only_layers[%zu] is not a layer index (0..%d)", name, i,
				      layers - 1);
		c->moe_layers[(int)v->number] = '0';
	}
	if (!strchr(c->moe_layers, '0'))
		c->moe_layers[0] = 0; /* every layer */
	return 0;
}

/* Granite 3's experts (GraniteMoeConfig, GraniteMoeSharedConfig): num_local_experts (8) of
 * intermediate_size stacked as Granite 4.0's (block_sparse_moe.input_linear / output_linear), the
 * top num_experts_per_tok (2), gates the softmax of the picked logits, in every layer; beside
 * them a shared MLP of shared_intermediate_size (granitemoeshared; 0 = none), unscaled */
static int granite_moe_fields(const struct sb_json *o, const char *name, struct sb_lm_cfg *c, struct sb_err *err)
{
	int E = 0, K = 0, Fs = 0;
	SB_TRY(cfg_int(o, name, "num_local_experts", 1, 1 << 12, 8, &E, err));
	SB_TRY(cfg_int(o, name, "num_experts_per_tok", 1, 64, 2, &K, err));
	if (K > E)
		return SB_ERR(err, SB_EDATA, "%s: 'num_experts_per_tok' %d is more than the %d experts", name, K, E);
	SB_TRY(cfg_int(o, name, "shared_intermediate_size", 0, 1 << 17, 0, &Fs, err));
	c->moe_experts = E;
	c->moe_topk = K;
	c->moe_ffn = c->ffn;
	c->ffn = Fs;
	c->moe_dense = Fs > 0;
	return 0;
}

/* A shared expert beside the experts (Qwen2-MoE's, Qwen3-Next's): the dense MLP of the experts'
 * layers, of shared_expert_intermediate_size (def when absent), scaled by sigmoid(
 * shared_expert_gate x); the layers without experts keep the MLP of intermediate_size (c->ffn on
 * entry): one width is read, so both kinds of layer with two widths are refused */
static int shared_expert(const struct sb_json *o, const char *name, int def, struct sb_lm_cfg *c, struct sb_err *err)
{
	int Fs = 0;
	SB_TRY(cfg_int(o, name, "shared_expert_intermediate_size", 1, 1 << 17, def, &Fs, err));
	if (strchr(c->moe_layers, '0') && Fs != c->ffn)
		return SB_ERR(err, SB_EDATA,
			      "%s: dense layers (intermediate_size %d) beside shared experts of another width (%d) are not "
			      "read here", name, c->ffn, Fs);
	c->ffn = Fs;
	c->moe_dense = 1;
	c->moe_shared_gate = 1;
	return 0;
}

/* The family's name (info->moe_split) of expert e's matrix `part` (0 gate, 1 up, 2 down) in
 * layer l, and of layer l's router */
static void expert_src(const struct sb_lm_hf_info *info, int l, int e, int part, char *out, size_t cap)
{
	static const char *const qwen[3] = {"gate_proj", "up_proj", "down_proj"}, *const mix[3] = {"w1", "w3", "w2"};
	if (info->moe_split == 2)
		snprintf(out, cap, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", l, e, mix[part]);
	else
		snprintf(out, cap, "model.layers.%d.%s.experts.%d.%s.weight", l,
			 info->moe_split == 3 ? "feed_forward" : "mlp", e, qwen[part]);
}

static void router_src(const struct sb_lm_hf_info *info, int l, char *out, size_t cap)
{
	snprintf(out, cap, "model.layers.%d.%s.weight", l,
		 info->moe_split == 2 ? "block_sparse_moe.gate" : info->moe_split == 3 ? "feed_forward.router" : "mlp.gate");
}

/* whether a checkpoint tensor is one of the experts' matrices the layout reads */
static int is_expert_src(const char *nm, const struct sb_lm_hf_info *info, const struct sb_lm_cfg *c)
{
	int l, e;
	const char *x = strstr(nm, ".experts.");
	char want[160];
	if (!info->moe_split || !x || sscanf(nm, "model.layers.%d.", &l) != 1 || sscanf(x, ".experts.%d.", &e) != 1 ||
	    l < 0 || l >= c->n_layer || !sb_lm_layer_moe(c, l) || e < 0 || e >= c->moe_experts)
		return 0;
	for (int part = 0; part < 3; part++) {
		expert_src(info, l, e, part, want, sizeof want);
		if (!strcmp(want, nm))
			return 1;
	}
	return 0;
}

/* ---------------------------------------------------------------- Cohere2 */

/* Cohere2 (Cohere2ForCausalLM, model_type cohere2: Command R7B, Command A), read from
 * transformers 4.57.1's configuration_cohere2.py and modeling_cohere2.py. Sliding-window layers
 * take the one rotary embedding (scaling included), the global ones none; attention and the
 * SwiGLU MLP read one LayerNorm (mean-centred, a weight, no bias) and both outputs are added;
 * the logits times logit_scale; head_dim is hidden / heads. */
static int cohere2_config(const struct sb_json *o, const char *name, struct sb_lm_cfg *c, struct sb_lm_hf_info *info,
			  struct sb_err *err)
{
	int layers = 0, heads = 0, tied = 0, abias = 0, every = 4;
	double eps = 0, theta = 0;
	SB_TRY(cfg_int(o, name, "vocab_size", 2, 1 << 20, 256000, &c->vocab, err));
	SB_TRY(cfg_int(o, name, "hidden_size", 2, 1 << 14, 8192, &c->d, err));
	SB_TRY(cfg_int(o, name, "intermediate_size", 1, 1 << 17, 22528, &c->ffn, err));
	SB_TRY(cfg_int(o, name, "num_hidden_layers", 1, SB_LM_MAX_LAYERS, 40, &layers, err));
	SB_TRY(cfg_int(o, name, "num_attention_heads", 1, 1024, 64, &heads, err));
	SB_TRY(cfg_int(o, name, "num_key_value_heads", 1, 1024, heads, &c->kv_heads, err));
	if (c->d % heads)
		return SB_ERR(err, SB_EDATA, "%s: 'num_attention_heads' %d does not divide hidden_size %d", name, heads,
			      c->d);
	c->head_dim = c->d / heads; /* Cohere2Config sets it so, whatever config.json says */
	SB_TRY(cfg_num(o, name, "layer_norm_eps", 1e-5, &eps, err));
	SB_TRY(cfg_int(o, name, "max_position_embeddings", 1, 1 << 24, 8192, &info->max_pos, err));
	SB_TRY(cfg_bool(o, name, "tie_word_embeddings", 1, &tied, err));
	SB_TRY(cfg_bool(o, name, "attention_bias", 0, &abias, err));
	SB_TRY(cfg_num(o, name, "rope_theta", 10000.0, &theta, err));
	SB_TRY(granite_float(o, name, "logit_scale", 0.0625, &c->logit_mult, err));
	SB_TRY(rope_scaling_only(o, name, "cohere2", "rope_theta and rope_scaling", info->max_pos, c, err));
	SB_TRY(cfg_int(o, name, "sliding_window", 1, 1 << 30, 4096, &c->window, err));
	const struct sb_json *lt = sb_json_get(o, "layer_types");
	if (!lt || lt->type == SB_JSON_NULL)
		SB_TRY(cfg_int(o, name, "sliding_window_pattern", 1, 1 << 20, 4, &every, err));
	else if (lt->type != SB_JSON_ARRAY || (int)lt->n != layers)
		return SB_ERR(err, SB_EDATA, "%s: layer_types must list num_hidden_layers (%d) kinds", name, layers);
	for (int l = 0; l < layers; l++) {
		const char *k = lt && lt->type == SB_JSON_ARRAY ? sb_json_str(lt->items[l], "")
				: (l + 1) % every ? "sliding_attention" : "full_attention";
		if (!strcmp(k, "sliding_attention"))
			c->pattern[l] = 'S';
		else if (!strcmp(k, "full_attention"))
			c->pattern[l] = 'A';
		else
			return SB_ERR(err, SB_EDATA, "%s: layer_types[%d] is '%s' (sliding_attention or full_attention)",
				      name, l, k);
		c->rope_layers[l] = c->pattern[l] == 'S' ? '1' : '0'; /* global layers: NoPE */
	}
	c->pattern[layers] = 0;
	c->rope_layers[layers] = 0;
	if (!strchr(c->rope_layers, '0'))
		c->rope_layers[0] = 0;
	SB_TRY(set_norm_eps(c, name, "layer_norm_eps", eps, err));
	c->rope_theta = (float)theta;
	if ((double)c->rope_theta != theta)
		return SB_ERR(err, SB_EDATA, "%s: rope_theta %.17g is not exactly a float", name, theta);
	c->rope_local_theta = 0; /* the sliding layers take the one rotary embedding, scaled */
	c->heads = heads;
	c->attn_bias = abias;
	c->pos = SB_LM_POS_ROPE;
	c->swiglu = 1;
	c->rmsnorm = 0;
	c->norm_bias = 0;
	c->parallel_mlp = 1;
	c->tied = tied;
	c->max_T = info->max_pos;
	return check_cfg(c, name, err);
}

/* ---------------------------------------------------------------- Qwen3-Next */

/* Qwen3-Next (Qwen3NextForCausalLM, model_type qwen3_next: Qwen3-Next-80B-A3B), read from
 * transformers 4.57.1's configuration_qwen3_next.py and modeling_qwen3_next.py (its CPU path, the
 * torch gated delta rule). Config defaults as Qwen3NextConfig's. The experts' layers (all, unless
 * mlp_only_layers or decoder_sparse_step say otherwise) have a shared expert of
 * shared_expert_intermediate_size, the dense ones an MLP of intermediate_size: one width is
 * read here, so a config with both kinds of layer and two widths is refused. */
static int qwen3_next_config(const struct sb_json *o, const char *name, struct sb_lm_cfg *c,
			     struct sb_lm_hf_info *info, struct sb_err *err)
{
	int layers = 0, heads = 0, tied = 0, abias = 0, every = 4, F = 0;
	double eps = 0, theta = 0, prf = 0;
	SB_TRY(cfg_int(o, name, "vocab_size", 2, 1 << 20, 151936, &c->vocab, err));
	SB_TRY(cfg_int(o, name, "hidden_size", 2, 1 << 14, 2048, &c->d, err));
	SB_TRY(cfg_int(o, name, "intermediate_size", 1, 1 << 17, 5632, &F, err));
	SB_TRY(cfg_int(o, name, "num_hidden_layers", 1, SB_LM_MAX_LAYERS, 48, &layers, err));
	SB_TRY(cfg_int(o, name, "num_attention_heads", 1, 1024, 16, &heads, err));
	SB_TRY(cfg_int(o, name, "num_key_value_heads", 1, 1024, 2, &c->kv_heads, err));
	SB_TRY(cfg_int(o, name, "head_dim", 1, 1024, 256, &c->head_dim, err));
	SB_TRY(cfg_num(o, name, "rms_norm_eps", 1e-6, &eps, err));
	SB_TRY(cfg_int(o, name, "max_position_embeddings", 1, 1 << 24, 32768, &info->max_pos, err));
	SB_TRY(cfg_bool(o, name, "tie_word_embeddings", 0, &tied, err));
	SB_TRY(cfg_bool(o, name, "attention_bias", 0, &abias, err));
	SB_TRY(cfg_num(o, name, "rope_theta", 10000.0, &theta, err));
	SB_TRY(cfg_num(o, name, "partial_rotary_factor", 0.25, &prf, err));
	SB_TRY(rope_scaling_only(o, name, "qwen3_next", "rope_theta, rope_scaling and partial_rotary_factor", info->max_pos, c,
				 err));
	int rd = (int)(c->head_dim * prf); /* transformers' int(head_dim * factor) */
	if (prf > 1 || rd < 2 || rd % 2)
		return SB_ERR(err, SB_EDATA, "%s: head_dim %d times partial_rotary_factor %g gives %d rotated dimensions (an "
					     "even number >= 2, at most head_dim, is needed)", name, c->head_dim, prf, rd);
	c->rope_dim = rd == c->head_dim ? 0 : rd;
	SB_TRY(cfg_int(o, name, "linear_conv_kernel_dim", 1, 64, 4, &c->conv_k, err));
	SB_TRY(cfg_int(o, name, "linear_key_head_dim", 1, 4096, 128, &c->gdn_kdim, err));
	SB_TRY(cfg_int(o, name, "linear_value_head_dim", 1, 4096, 128, &c->gdn_vdim, err));
	SB_TRY(cfg_int(o, name, "linear_num_key_heads", 1, 1024, 16, &c->gdn_kheads, err));
	SB_TRY(cfg_int(o, name, "linear_num_value_heads", 1, 1024, 32, &c->gdn_vheads, err));
	if (c->gdn_vheads % c->gdn_kheads)
		return SB_ERR(err, SB_EDATA, "%s: linear_num_value_heads %d is not a multiple of linear_num_key_heads %d",
			      name, c->gdn_vheads, c->gdn_kheads);
	/* the layers: layer_types, else every full_attention_interval-th layer full */
	const struct sb_json *lt = sb_json_get(o, "layer_types");
	if (!lt || lt->type == SB_JSON_NULL)
		SB_TRY(cfg_int(o, name, "full_attention_interval", 1, 1 << 20, 4, &every, err));
	else if (lt->type != SB_JSON_ARRAY || (int)lt->n != layers)
		return SB_ERR(err, SB_EDATA, "%s: layer_types must list num_hidden_layers (%d) kinds", name, layers);
	for (int l = 0; l < layers; l++) {
		const char *k = lt && lt->type == SB_JSON_ARRAY ? sb_json_str(lt->items[l], "")
				: (l + 1) % every ? "linear_attention" : "full_attention";
		if (!strcmp(k, "linear_attention"))
			c->pattern[l] = 'D';
		else if (!strcmp(k, "full_attention"))
			c->pattern[l] = 'A';
		else
			return SB_ERR(err, SB_EDATA, "%s: layer_types[%d] is '%s' (linear_attention or full_attention)", name,
				      l, k);
	}
	c->pattern[layers] = 0;
	/* the experts (Qwen3-MoE's fields and names), a gated shared expert beside them */
	c->ffn = F;
	SB_TRY(moe_fields(o, name, 4, layers, c, err));
	if (c->moe_experts)
		SB_TRY(shared_expert(o, name, 512, c, err));
	info->moe_split = 1;
	SB_TRY(set_norm_eps(c, name, "rms_norm_eps", eps, err));
	c->rope_theta = (float)theta;
	if ((double)c->rope_theta != theta)
		return SB_ERR(err, SB_EDATA, "%s: rope_theta %.17g is not exactly a float", name, theta);
	c->heads = heads;
	c->attn_bias = abias;
	c->attn_gate = 1;
	c->qk_norm = 1;
	c->pos = SB_LM_POS_ROPE;
	c->swiglu = 1;
	c->rmsnorm = 1;
	c->tied = tied;
	c->max_T = info->max_pos;
	return check_cfg(c, name, err);
}

/* ---------------------------------------------------------------- Jamba */

/* a layer period and its offset (JambaConfig: the offset below the period) */
static int jamba_period(const struct sb_json *o, const char *name, const char *pk, const char *ok, int pdef, int odef,
			int *period, int *offset, struct sb_err *err)
{
	SB_TRY(cfg_int(o, name, pk, 1, 1 << 20, pdef, period, err));
	SB_TRY(cfg_int(o, name, ok, 0, 1 << 20, odef, offset, err));
	if (*offset >= *period)
		return SB_ERR(err, SB_EDATA, "%s: '%s' %d must be below %s %d", name, ok, *offset, pk, *period);
	return 0;
}

/* AI21's Jamba (JambaForCausalLM, model_type jamba: Jamba-v0.1, Jamba 1.5 / 1.6 / 1.7 Mini and
 * Large, Jamba 2), read from transformers 4.57.1's configuration_jamba.py and modeling_jamba.py
 * (its CPU path, slow_forward): attention (no positions, no biases, GQA) every attn_layer_period-th
 * layer from attn_layer_offset, Mamba (1) mixers elsewhere with RMSNorms of dt, B and C; a SwiGLU
 * MLP of intermediate_size, or, with num_experts > 1, every expert_layer_period-th layer from
 * expert_layer_offset, num_experts experts of that width, the top num_experts_per_tok of the
 * softmax over all of them (not renormalised). mamba_dt_rank "auto" is ceil(hidden / 16). A
 * sliding_window (flash attention's only) is read as Mistral's. */
static int jamba_config(const struct sb_json *o, const char *name, struct sb_lm_cfg *c, struct sb_lm_hf_info *info,
			struct sb_err *err)
{
	int layers = 0, heads = 0, tied = 0, ap = 0, ao = 0, ep = 0, eo = 0, E = 0, K = 0, expand = 0, pbias = 0;
	double eps = 0;
	SB_TRY(cfg_int(o, name, "vocab_size", 2, 1 << 20, 65536, &c->vocab, err));
	SB_TRY(cfg_int(o, name, "hidden_size", 2, 1 << 14, 4096, &c->d, err));
	SB_TRY(cfg_int(o, name, "intermediate_size", 1, 1 << 17, 14336, &c->ffn, err));
	SB_TRY(cfg_int(o, name, "num_hidden_layers", 1, SB_LM_MAX_LAYERS, 32, &layers, err));
	SB_TRY(cfg_int(o, name, "num_attention_heads", 1, 1024, 32, &heads, err));
	const struct sb_json *kv = sb_json_get(o, "num_key_value_heads");
	SB_TRY(cfg_int(o, name, "num_key_value_heads", 1, 1024, kv && kv->type == SB_JSON_NULL ? heads : 8, &c->kv_heads,
		       err));
	if (c->d % heads) /* JambaAttention: hidden_size / heads, which must divide */
		return SB_ERR(err, SB_EDATA, "%s: 'num_attention_heads' %d does not divide hidden_size %d", name, heads,
			      c->d);
	c->head_dim = c->d / heads;
	SB_TRY(cfg_num(o, name, "rms_norm_eps", 1e-6, &eps, err));
	SB_TRY(cfg_int(o, name, "max_position_embeddings", 1, 1 << 24, 262144, &info->max_pos, err));
	SB_TRY(cfg_bool(o, name, "tie_word_embeddings", 0, &tied, err));
	const struct sb_json *sw = sb_json_get(o, "sliding_window");
	if (sw && sw->type != SB_JSON_NULL)
		SB_TRY(cfg_int(o, name, "sliding_window", 1, 1 << 30, 0, &info->sliding_window, err));
	SB_TRY(jamba_period(o, name, "attn_layer_period", "attn_layer_offset", 8, 4, &ap, &ao, err));
	SB_TRY(jamba_period(o, name, "expert_layer_period", "expert_layer_offset", 2, 1, &ep, &eo, err));
	SB_TRY(cfg_int(o, name, "num_experts", 1, 1 << 12, 16, &E, err));
	SB_TRY(cfg_int(o, name, "num_experts_per_tok", 1, 64, 2, &K, err));
	SB_TRY(cfg_int(o, name, "mamba_d_state", 1, 1 << 16, 16, &c->ssm_state, err));
	SB_TRY(cfg_int(o, name, "mamba_d_conv", 1, 64, 4, &c->conv_k, err));
	SB_TRY(cfg_int(o, name, "mamba_expand", 1, 64, 2, &expand, err));
	SB_TRY(cfg_bool(o, name, "mamba_conv_bias", 1, &c->ssm_conv_bias, err));
	SB_TRY(cfg_bool(o, name, "mamba_proj_bias", 0, &pbias, err));
	const struct sb_json *dr = sb_json_get(o, "mamba_dt_rank");
	if (!dr || dr->type == SB_JSON_NULL || (dr->type == SB_JSON_STRING && !strcmp(dr->text, "auto")))
		c->ssm_dt_rank = (c->d + 15) / 16;
	else
		SB_TRY(cfg_int(o, name, "mamba_dt_rank", 1, 1 << 16, -1, &c->ssm_dt_rank, err));
	if ((long)expand * c->d > 1 << 16)
		return SB_ERR(err, SB_EDATA, "%s: mamba_expand %d times hidden_size %d is too wide", name, expand, c->d);
	c->ssm_inner = expand * c->d;
	c->ssm_inner_norm = 1;
	c->ssm_proj_bias = pbias;
	for (int l = 0; l < layers; l++) {
		c->pattern[l] = l % ap == ao ? 'A' : 'V';
		c->moe_layers[l] = l % ep == eo ? '1' : '0';
	}
	c->pattern[layers] = 0;
	c->moe_layers[layers] = 0;
	if (E > 1) { /* layers_num_experts: the experts in place of the MLP there */
		if (K > E)
			return SB_ERR(err, SB_EDATA, "%s: 'num_experts_per_tok' %d is more than the %d experts", name, K, E);
		c->moe_experts = E;
		c->moe_topk = K;
		c->moe_ffn = c->ffn;
		c->moe_dense = 0;
		c->moe_gate = 1;
		if (!strchr(c->moe_layers, '0'))
			c->moe_layers[0] = 0;
		info->moe_split = 3;
	} else
		c->moe_layers[0] = 0;
	SB_TRY(set_norm_eps(c, name, "rms_norm_eps", eps, err));
	c->heads = heads;
	c->pos = SB_LM_POS_NONE;
	c->swiglu = 1;
	c->rmsnorm = 1;
	c->tied = tied;
	c->max_T = info->max_pos;
	return check_cfg(c, name, err);
}

/* ---------------------------------------------------------------- Falcon-H1 */

/* A list of n multipliers (Falcon-H1's mlp_multipliers, ssm_multipliers): absent or null, each 1
 * (FalconH1Config's default); else an array of n numbers, each fitting a float */
static int falcon_mults(const struct sb_json *o, const char *name, const char *key, int n, float *out,
			struct sb_err *err)
{
	const struct sb_json *v = sb_json_get(o, key);
	for (int i = 0; i < n; i++)
		out[i] = 1.0f;
	if (!v || v->type == SB_JSON_NULL)
		return 0;
	if (v->type != SB_JSON_ARRAY || (int)v->n != n)
		return SB_ERR(err, SB_EDATA, "%s: '%s' must be an array of %d numbers or null", name, key, n);
	for (int i = 0; i < n; i++) {
		const struct sb_json *x = v->items[i];
		if (x->type != SB_JSON_NUMBER || !(x->number > 0) || !isfinite((float)x->number) ||
		    fabs((double)(float)x->number - x->number) > 1e-6 * x->number)
			return SB_ERR(err, SB_EDATA, "%s: %s[%d] must be a positive number that fits a float", name, key, i);
		out[i] = (float)x->number;
	}
	return 0;
}

/* Falcon-H1 (FalconH1ForCausalLM, model_type falcon_h1; TII's 0.5B to 34B), read from
 * transformers 4.57.1's configuration_falcon_h1.py and modeling_falcon_h1.py: a parallel
 * hybrid, every layer attention and a Mamba2 mixer side by side on the same normed input
 * (parallel_ssm), then a SwiGLU MLP; Bamba's tensor names; the mixer's width mamba_d_ssm (1024;
 * null: mamba_expand * hidden_size), its gated norm optional (mamba_rms_norm false: y silu(z),
 * no weight) and per group (mamba_n_groups), before the gate or after it
 * (mamba_norm_before_gate); in_proj's bias mamba_proj_bias, out_proj's projectors_bias; the
 * muP multipliers where transformers applies them (FalconH1Config's defaults 1). FalconH1Config
 * sets attention_bias and mlp_bias false before PretrainedConfig reads the other keys, so a
 * config.json that gives them sets them: read so here. rope_theta is taken as a float (the
 * released configs' 1e11 is not one): transformers' frequencies are float32 powers of it, the
 * base rounded to float. */
static int falcon_h1_config(const struct sb_json *o, const char *name, struct sb_lm_cfg *c,
			    struct sb_lm_hf_info *info, struct sb_err *err)
{
	int layers = 0, heads = 0, abias = 0, mbias = 0, tied = 0, rmsn = 0, before = 1, pbias = 0, inb = 0;
	double eps = 0, theta = 0, dssm = 1024;
	SB_TRY(cfg_int(o, name, "vocab_size", 2, 1 << 20, 128000, &c->vocab, err));
	SB_TRY(cfg_int(o, name, "hidden_size", 2, 1 << 14, 4096, &c->d, err));
	SB_TRY(cfg_int(o, name, "intermediate_size", 1, 1 << 17, 14336, &c->ffn, err));
	SB_TRY(cfg_int(o, name, "num_hidden_layers", 1, SB_LM_MAX_LAYERS, 32, &layers, err));
	SB_TRY(cfg_int(o, name, "num_attention_heads", 1, 1024, 32, &heads, err));
	const struct sb_json *kv = sb_json_get(o, "num_key_value_heads");
	SB_TRY(cfg_int(o, name, "num_key_value_heads", 1, 1024, kv && kv->type == SB_JSON_NULL ? heads : 8, &c->kv_heads,
		       err));
	if (c->d % heads && !sb_json_get(o, "head_dim"))
		return SB_ERR(err, SB_EDATA, "%s: 'num_attention_heads' %d does not divide hidden_size %d", name, heads,
			      c->d);
	SB_TRY(cfg_int(o, name, "head_dim", 1, 1024, c->d / heads, &c->head_dim, err));
	SB_TRY(cfg_num(o, name, "rms_norm_eps", 1e-5, &eps, err));
	SB_TRY(cfg_int(o, name, "max_position_embeddings", 1, 1 << 24, 8192, &info->max_pos, err));
	SB_TRY(cfg_bool(o, name, "tie_word_embeddings", 0, &tied, err));
	SB_TRY(cfg_bool(o, name, "attention_bias", 0, &abias, err));
	SB_TRY(cfg_bool(o, name, "mlp_bias", 0, &mbias, err));
	SB_TRY(cfg_num(o, name, "rope_theta", 100000.0, &theta, err));
	SB_TRY(rope_scaling_only(o, name, "falcon_h1", "rope_theta and rope_scaling", info->max_pos, c, err));
	const struct sb_json *prf = sb_json_get(o, "partial_rotary_factor");
	if (prf && prf->type != SB_JSON_NULL && !(prf->type == SB_JSON_NUMBER && prf->number == 1.0))
		return SB_ERR(err, SB_EDATA, "%s: partial_rotary_factor other than 1 (falcon_h1 rotates whole heads)", name);
	/* the mixer */
	const struct sb_json *ds = sb_json_get(o, "mamba_d_ssm");
	if (ds && ds->type == SB_JSON_NULL)
		dssm = 0;
	else
		SB_TRY(cfg_num(o, name, "mamba_d_ssm", 1024, &dssm, err));
	if (dssm != floor(dssm) || dssm < 0 || dssm > 1 << 20)
		return SB_ERR(err, SB_EDATA, "%s: 'mamba_d_ssm' %g is not a width (or null)", name, dssm);
	SB_TRY(mamba2_fields(o, name, (long)dssm, c, err));
	SB_TRY(cfg_bool(o, name, "mamba_rms_norm", 0, &rmsn, err));
	SB_TRY(cfg_bool(o, name, "mamba_norm_before_gate", 1, &before, err));
	SB_TRY(cfg_bool(o, name, "projectors_bias", 0, &pbias, err));
	inb = c->ssm_proj_bias; /* mamba_proj_bias: in_proj's */
	c->ssm_proj_bias = inb && pbias ? 1 : inb ? 2 : pbias ? 3 : 0;
	c->ssm_norm = !rmsn ? 0 : before ? 2 : 1;
	c->ssm_norm_groups = rmsn ? c->ssm_groups : 1;
	c->parallel_ssm = 1;
	/* the multipliers */
	float mlp[2], ssm[5];
	SB_TRY(falcon_mults(o, name, "mlp_multipliers", 2, mlp, err));
	SB_TRY(falcon_mults(o, name, "ssm_multipliers", 5, ssm, err));
	c->mlp_gate_mult = mlp[0];
	c->mlp_down_mult = mlp[1];
	c->ssm_mult_z = ssm[0];
	c->ssm_mult_x = ssm[1];
	c->ssm_mult_b = ssm[2];
	c->ssm_mult_c = ssm[3];
	c->ssm_mult_dt = ssm[4];
	const struct {
		const char *key;
		float *to;
	} one[] = {{"embedding_multiplier", &c->emb_mult},     {"lm_head_multiplier", &c->logit_mult},
		   {"key_multiplier", &c->key_mult},             {"attention_in_multiplier", &c->attn_in_mult},
		   {"attention_out_multiplier", &c->attn_out_mult}, {"ssm_in_multiplier", &c->ssm_in_mult},
		   {"ssm_out_multiplier", &c->ssm_out_mult}};
	for (size_t i = 0; i < sizeof one / sizeof *one; i++) {
		const struct sb_json *v = sb_json_get(o, one[i].key); /* null: 1.0 (FalconH1Config) */
		if (v && v->type == SB_JSON_NULL)
			*one[i].to = 1.0f;
		else
			SB_TRY(granite_float(o, name, one[i].key, 1.0, one[i].to, err));
	}
	SB_TRY(set_norm_eps(c, name, "rms_norm_eps", eps, err));
	c->rope_theta = (float)theta;
	if (!isfinite(c->rope_theta) || fabs((double)c->rope_theta - theta) > 1e-6 * theta)
		return SB_ERR(err, SB_EDATA, "%s: rope_theta %.17g does not fit a float", name, theta);
	memset(c->pattern, 'A', (size_t)layers);
	c->pattern[layers] = 0;
	c->heads = heads;
	c->attn_bias = abias;
	c->bias = mbias;
	c->pos = SB_LM_POS_ROPE;
	c->swiglu = 1;
	c->rmsnorm = 1;
	c->tied = tied;
	c->max_T = info->max_pos;
	return check_cfg(c, name, err);
}

/* ---------------------------------------------------------------- Gemma 2 and 3 */

/* A soft-capping field of Gemma's config: absent, the config class's default (def; 0 = None);
 * null, none; else a positive number */
static int cfg_softcap(const struct sb_json *o, const char *name, const char *key, double def, float *out,
		       struct sb_err *err)
{
	const struct sb_json *v = sb_json_get(o, key);
	double x = def;
	if (v && v->type == SB_JSON_NULL)
		x = 0;
	else if (v && (v->type != SB_JSON_NUMBER || !(v->number > 0) || !isfinite(v->number) || v->number > 1e30))
		return SB_ERR(err, SB_EDATA, "%s: '%s' must be null or a positive number", name, key);
	else if (v)
		x = v->number;
	*out = (float)x;
	return 0;
}

/* Gemma 2 (Gemma2ForCausalLM, model_type gemma2) and Gemma 3's text model (Gemma3ForCausalLM,
 * model_type gemma3_text), read from transformers 4.57.1's configuration_gemma{2,3}.py and
 * modeling_gemma{2,3}.py: sliding-window layers (S) and global ones (A) as layer_types says,
 * else as the config class derives them (Gemma 2: every other layer global, the first
 * sliding; Gemma 3: every sliding_window_pattern-th global); sandwich norms, a GeGLU MLP,
 * embeddings times sqrt(hidden_size), scores times query_pre_attn_scalar^-1/2. Gemma 2 soft-caps
 * the attention scores and the logits (tanh; 50 and 30 unless the config says otherwise) and
 * has one RoPE for every layer; Gemma 3 has q/k norms, no soft-capping unless set, and the
 * local layers' own unscaled RoPE base. The RMSNorms multiply by (1 + w): the import adds the
 * 1 (sb_lm_import). `ver` is 2 or 3. */
static int gemma_config(const struct sb_json *o, const char *name, int ver, struct sb_lm_cfg *c,
			struct sb_lm_hf_info *info, struct sb_err *err)
{
	int layers = 0, heads = 0, tied = 1, flag = 0, every = 6, g3 = ver == 3;
	double eps = 0, theta = 0, ltheta = 0, qpas = 0;
	SB_TRY(cfg_int(o, name, "vocab_size", 2, 1 << 20, g3 ? 262208 : 256000, &c->vocab, err));
	SB_TRY(cfg_int(o, name, "hidden_size", 2, 1 << 14, 2304, &c->d, err));
	SB_TRY(cfg_int(o, name, "intermediate_size", 1, 1 << 17, 9216, &c->ffn, err));
	SB_TRY(cfg_int(o, name, "num_hidden_layers", 1, SB_LM_MAX_LAYERS, 26, &layers, err));
	SB_TRY(cfg_int(o, name, "num_attention_heads", 1, 1024, 8, &heads, err));
	SB_TRY(cfg_int(o, name, "num_key_value_heads", 1, 1024, 4, &c->kv_heads, err));
	SB_TRY(cfg_int(o, name, "head_dim", 1, 1024, 256, &c->head_dim, err));
	SB_TRY(cfg_num(o, name, "rms_norm_eps", 1e-6, &eps, err));
	SB_TRY(cfg_num(o, name, "rope_theta", g3 ? 1e6 : 1e4, &theta, err));
	if (g3)
		SB_TRY(cfg_num(o, name, "rope_local_base_freq", 1e4, &ltheta, err));
	SB_TRY(cfg_num(o, name, "query_pre_attn_scalar", 256, &qpas, err));
	SB_TRY(cfg_int(o, name, "sliding_window", 1, 1 << 30, 4096, &c->window, err));
	SB_TRY(cfg_int(o, name, "max_position_embeddings", 1, 1 << 24, g3 ? 131072 : 8192, &info->max_pos, err));
	SB_TRY(cfg_bool(o, name, "tie_word_embeddings", 1, &tied, err));
	const char *act = sb_json_str(sb_json_get(o, "hidden_activation"), "gelu_pytorch_tanh");
	if (strcmp(act, "gelu_pytorch_tanh"))
		return SB_ERR(err, SB_EDATA, "%s: hidden_activation '%s' (only gelu_pytorch_tanh, Gemma's)", name, act);
	static const char *const off[] = {"attention_bias", "use_bidirectional_attention"};
	for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
		SB_TRY(cfg_bool(o, name, off[i], 0, &flag, err));
		if (flag)
			return SB_ERR(err, SB_EDATA, "%s: %s is true (not read here)", name, off[i]);
	}
	SB_TRY(cfg_softcap(o, name, "attn_logit_softcapping", g3 ? 0 : 50, &c->attn_softcap, err));
	SB_TRY(cfg_softcap(o, name, "final_logit_softcapping", g3 ? 0 : 30, &c->final_softcap, err));
	/* RoPE scaling: Gemma 3's global layers' (4B and up: linear, factor 8), its local layers'
	 * always none; Gemma 2's (none in its releases) every layer's, as its one rotary
	 * embedding has it */
	const struct sb_json *rs = sb_json_get(o, "rope_scaling");
	if (rs && rs->type != SB_JSON_NULL && rs->type != SB_JSON_OBJECT)
		return SB_ERR(err, SB_EDATA, "%s: rope_scaling must be null or an object", name);
	if (rs && rs->type == SB_JSON_OBJECT) {
		struct sb_lm_cfg r = *c;
		SB_TRY(rope_spec(rs, name, "rope_scaling", info->max_pos, &r, err));
		rope_copy(c, &r);
	}
	if (sb_json_get(o, "rope_parameters"))
		return SB_ERR(err, SB_EDATA, "%s: rope_parameters (transformers 5's spelling) is not read for %s: "
					     "give rope_theta%s and rope_scaling", name, g3 ? "gemma3_text" : "gemma2",
			      g3 ? ", rope_local_base_freq" : "");
	/* layer kinds: layer_types, else the config class's rule */
	const struct sb_json *lt = sb_json_get(o, "layer_types");
	if (lt && lt->type != SB_JSON_NULL) {
		if (lt->type != SB_JSON_ARRAY || (int)lt->n != layers)
			return SB_ERR(err, SB_EDATA, "%s: layer_types must list num_hidden_layers (%d) kinds", name, layers);
		for (int l = 0; l < layers; l++) {
			const char *k = sb_json_str(lt->items[l], "");
			if (!strcmp(k, "sliding_attention"))
				c->pattern[l] = 'S';
			else if (!strcmp(k, "full_attention"))
				c->pattern[l] = 'A';
			else
				return SB_ERR(err, SB_EDATA,
					      "%s: layer_types[%d] is '%s' (sliding_attention or full_attention)", name, l, k);
		}
	} else {
		if (g3) {
			const char *key = sb_json_get(o, "sliding_window_pattern") ? "sliding_window_pattern"
										   : "_sliding_window_pattern";
			SB_TRY(cfg_int(o, name, key, 1, 1 << 20, 6, &every, err));
		} else
			every = 2; /* Gemma2Config: sliding if (i + 1) % 2 */
		for (int l = 0; l < layers; l++)
			c->pattern[l] = (l + 1) % every ? 'S' : 'A';
	}
	c->pattern[layers] = 0;
	SB_TRY(set_norm_eps(c, name, "rms_norm_eps", eps, err));
	c->rope_theta = (float)theta;
	c->rope_local_theta = (float)ltheta; /* Gemma 2: 0, the A layers' frequencies */
	if ((double)c->rope_theta != theta || (double)c->rope_local_theta != ltheta)
		return SB_ERR(err, SB_EDATA, "%s: rope_theta %.17g or rope_local_base_freq %.17g is not exactly a float",
			      name, theta, ltheta);
	c->heads = heads;
	c->swiglu = 2;
	c->sandwich = 1;
	c->rmsnorm = 1;
	c->qk_norm = g3;
	c->pos = SB_LM_POS_ROPE;
	c->tied = tied;
	c->max_T = info->max_pos;
	/* the scaled embedding's sqrt(hidden_size) (float32 in a float32 run) and the attention's
	 * query_pre_attn_scalar ** -0.5 */
	c->emb_mult = (float)sqrt((double)c->d);
	c->attn_scale = (float)(1.0 / sqrt(qpas));
	return check_cfg(c, name, err);
}

/* Gemma's (2 and 3) and OLMo's (2 and 3) name of the toolkit's tensor: the sandwich norms are post_attention_layernorm
 * (ours: post_mixer_layernorm) and pre_feedforward_layernorm (ours: post_attention_layernorm,
 * the MLP's input norm as in Llama); the other names agree */
void sb_lm_sandwich_name(const char *ours, char *out, size_t cap)
{
	int l, at = 0;
	if (sscanf(ours, "model.layers.%d.%n", &l, &at) == 1 && at > 0) {
		if (!strcmp(ours + at, "post_mixer_layernorm.weight")) {
			snprintf(out, cap, "model.layers.%d.post_attention_layernorm.weight", l);
			return;
		}
		if (!strcmp(ours + at, "post_attention_layernorm.weight")) {
			snprintf(out, cap, "model.layers.%d.pre_feedforward_layernorm.weight", l);
			return;
		}
	}
	snprintf(out, cap, "%s", ours);
}

int sb_lm_hf_config(const char *json, size_t n, const char *name, struct sb_lm_cfg *c, struct sb_lm_hf_info *info,
		    struct sb_err *err)
{
	struct sb_json *o;
	memset(info, 0, sizeof *info);
	int *max_pos = &info->max_pos, *sliding_window = &info->sliding_window;
	if (sb_json_parse(json, n, &o, err)) {
		sb_err_prefix(err, "%s", name);
		return SB_EDATA;
	}
	int rc = 0;
	if (o->type != SB_JSON_OBJECT) {
		rc = SB_ERR(err, SB_EDATA, "%s: expected a JSON object", name);
		goto out;
	}
	const char *mt = sb_json_str(sb_json_get(o, "model_type"), "");
	int mistral = !strcmp(mt, "mistral");
	/* Granite 3.x (GraniteForCausalLM): Llama's layout and names, with Granite's multipliers */
	int granite3 = !strcmp(mt, "granite");
	/* Granite 3's mixtures of experts (GraniteMoeForCausalLM, GraniteMoeSharedForCausalLM): its
	 * layout and multipliers, experts in place of the MLP (and a shared MLP beside them) */
	info->granite_moe = !strcmp(mt, "granitemoe") || !strcmp(mt, "granitemoeshared");
	granite3 = granite3 || info->granite_moe;
	int llama = !strcmp(mt, "llama") || mistral || granite3, qwen2 = !strcmp(mt, "qwen2"), qwen3 = !strcmp(mt, "qwen3");
	/* OLMo 2 and 3 (Olmo2ForCausalLM, Olmo3ForCausalLM): Llama's projections and MLP with no
	 * pre-norms, the mixer's and the MLP's outputs normalised, q and k each normalised over
	 * all heads of a position; OLMo 3 with sliding-window layers */
	int olmo3 = !strcmp(mt, "olmo3");
	info->olmo = !strcmp(mt, "olmo2") || olmo3;
	/* SmolLM3 (SmolLM3ForCausalLM): Llama's layout with NoPE layers (no_rope_layers);
	 * EXAONE 4 (Exaone4ForCausalLM): OLMo's post-norm layout with per-head q/k norms, and
	 * with a sliding_window, sliding layers (RoPE) and global ones (NoPE) */
	int smollm3 = !strcmp(mt, "smollm3"), exaone4 = !strcmp(mt, "exaone4");
	/* mixtures of experts in place of the MLP: Qwen3-MoE (Qwen3's attention) and Mixtral
	 * (Mistral's), their experts one tensor each */
	int qwen3_moe = !strcmp(mt, "qwen3_moe"), mixtral = !strcmp(mt, "mixtral");
	/* Qwen2-MoE (Qwen1.5-MoE, Qwen2-57B-A14B: Qwen2's attention, experts with a gated shared
	 * expert) and OLMoE (Llama's layout with q/k norms over all heads, experts in every layer) */
	int qwen2_moe = !strcmp(mt, "qwen2_moe"), olmoe = !strcmp(mt, "olmoe");
	/* Ministral (MinistralForCausalLM: Ministral-8B): Mistral's layout with sliding-window and
	 * full layers as layer_types says */
	int ministral = !strcmp(mt, "ministral");
	llama = llama || ministral;
	/* Phi-3 and Phi-4 (Phi3ForCausalLM): Mistral's reading with fused qkv_proj and gate_up_proj
	 * (views of their rows) and RoPE on partial_rotary_factor of each head */
	info->phi3 = !strcmp(mt, "phi3");
	mistral = mistral || info->phi3;
	llama = llama || info->phi3;
	qwen3 = qwen3 || qwen3_moe;
	mistral = mistral || mixtral;
	llama = llama || mixtral;
	info->moe_split = qwen3_moe || qwen2_moe || olmoe ? 1 : mixtral ? 2 : 0;
	info->olmo = info->olmo || exaone4; /* its post-norms' names are OLMo's */
	llama = llama || smollm3;
	info->lfm2 = !strcmp(mt, "lfm2");
	info->granite = !strcmp(mt, "granitemoehybrid");
	info->bamba = !strcmp(mt, "bamba");
	info->falcon_h1 = !strcmp(mt, "falcon_h1");
	info->jamba = !strcmp(mt, "jamba");
	info->qwen3_next = !strcmp(mt, "qwen3_next");
	info->cohere2 = !strcmp(mt, "cohere2");
	info->gemma3_mm = !strcmp(mt, "gemma3");
	info->gemma = !strcmp(mt, "gemma2") ? 2 : !strcmp(mt, "gemma3_text") || info->gemma3_mm ? 3 : 0;
	if (!llama && !qwen2 && !qwen3 && !info->lfm2 && !info->granite && !info->gemma && !info->bamba && !info->olmo &&
	    !info->falcon_h1 && !info->jamba && !info->qwen3_next && !qwen2_moe && !olmoe && !info->cohere2) {
		rc = SB_ERR(err, SB_EDATA,
			    "%s: model_type '%s' is not one of the layouts read here (llama, mistral, mixtral, granite, "
			    "granitemoe, granitemoeshared, ministral, phi3, qwen2, qwen2_moe, qwen3, qwen3_moe, qwen3_next, lfm2, "
			    "granitemoehybrid, bamba, falcon_h1, jamba, gemma2, gemma3_text, gemma3, cohere2, olmo2, olmo3, "
			    "olmoe, smollm3, exaone4)",
			    name, mt);
		goto out;
	}
	snprintf(info->model_type, sizeof info->model_type, "%s", mt);
	const struct sb_json *arch = sb_json_get(o, "architectures");
	if (arch && arch->type == SB_JSON_ARRAY)
		for (size_t i = 0; i < arch->n && !rc; i++) {
			const char *a = sb_json_str(arch->items[i], "");
			size_t la = strlen(a);
			if ((la < 11 || strcmp(a + la - 11, "ForCausalLM")) &&
			    !(info->gemma3_mm && !strcmp(a, "Gemma3ForConditionalGeneration")))
				rc = SB_ERR(err, SB_EDATA, "%s: architecture '%s' is not a causal LM", name, a);
		}
	sb_lm_cfg_default(c);
	if (info->gemma) { /* its activation is hidden_activation (transformers reads no hidden_act) */
		const struct sb_json *tc = o;
		if (!rc && info->gemma3_mm) {
			/* Gemma3ForConditionalGeneration (4B and up): the language model of text_config,
			 * its fields not given taking Gemma3TextConfig's defaults; the vision tower is not
			 * read (a text-only evaluation never runs it) */
			tc = sb_json_get(o, "text_config");
			const char *tmt = tc ? sb_json_str(sb_json_get(tc, "model_type"), "gemma3_text") : "";
			int t1 = 1, t2 = 1;
			if (!tc || tc->type != SB_JSON_OBJECT)
				rc = SB_ERR(err, SB_EDATA, "%s: model_type gemma3 without a text_config object", name);
			else if (strcmp(tmt, "gemma3_text"))
				rc = SB_ERR(err, SB_EDATA, "%s: text_config.model_type '%s' (gemma3_text)", name, tmt);
			else if (!(rc = cfg_bool(o, name, "tie_word_embeddings", 1, &t1, err)) &&
				 !(rc = cfg_bool(tc, name, "tie_word_embeddings", 1, &t2, err)) && t1 != t2)
				rc = SB_ERR(err, SB_EDATA, "%s: tie_word_embeddings differs between the config and its text_config",
					    name);
		}
		if (!rc)
			rc = gemma_config(tc, name, info->gemma, c, info, err);
		goto out;
	}
	const char *act = sb_json_str(sb_json_get(o, "hidden_act"), "silu");
	if (!rc && strcmp(act, "silu"))
		rc = SB_ERR(err, SB_EDATA, "%s: hidden_act '%s' (only silu, SwiGLU)", name, act);
	if (info->lfm2) {
		if (!rc)
			rc = lfm2_config(o, name, c, info, err);
		goto out;
	}
	if (info->granite) {
		if (!rc)
			rc = granite_config(o, name, c, info, err);
		goto out;
	}
	if (info->bamba) {
		if (!rc)
			rc = bamba_config(o, name, c, info, err);
		goto out;
	}
	if (info->falcon_h1) {
		if (!rc)
			rc = falcon_h1_config(o, name, c, info, err);
		goto out;
	}
	if (info->jamba) {
		if (!rc)
			rc = jamba_config(o, name, c, info, err);
		goto out;
	}
	if (info->qwen3_next) {
		if (!rc)
			rc = qwen3_next_config(o, name, c, info, err);
		goto out;
	}
	if (info->cohere2) {
		if (!rc)
			rc = cohere2_config(o, name, c, info, err);
		goto out;
	}
	int layers = 0, heads = 0, bias_attn = 0, bias_mlp = 0, tied = 0, sliding = 0;
	double eps = 0, theta = 0;
	if (!rc)
		rc = cfg_int(o, name, "vocab_size", 2, 1 << 20, -1, &c->vocab, err);
	if (!rc)
		rc = cfg_int(o, name, "hidden_size", 2, 1 << 14, -1, &c->d, err);
	if (!rc)
		rc = cfg_int(o, name, "intermediate_size", 1, 1 << 17, -1, &c->ffn, err);
	if (!rc)
		rc = cfg_int(o, name, "num_hidden_layers", 1, SB_LM_MAX_LAYERS, -1, &layers, err);
	if (!rc && info->moe_split)
		rc = moe_fields(o, name, qwen2_moe ? 5 : olmoe ? 6 : info->moe_split, layers, c, err);
	if (!rc && info->granite_moe)
		rc = granite_moe_fields(o, name, c, err);
	if (!rc && qwen2_moe && c->moe_experts)
		rc = shared_expert(o, name, 5632, c, err);
	if (!rc)
		rc = cfg_int(o, name, "num_attention_heads", 1, 1024, -1, &heads, err);
	if (!rc)
		rc = cfg_int(o, name, "num_key_value_heads", 1, 1024, heads, &c->kv_heads, err);
	if (!rc)
		rc = cfg_int(o, name, "head_dim", 1, 1024, heads && c->d % heads == 0 ? c->d / heads : -1, &c->head_dim,
			     err);
	/* transformers 4.x's GraniteAttention takes hidden / heads and reads no head_dim (later
	 * releases read one): a head_dim that says otherwise is read differently by the two */
	if (!rc && granite3 && c->head_dim * heads != c->d)
		rc = SB_ERR(err, SB_EDATA, "%s: granite with head_dim %d, not hidden_size / num_attention_heads (%d)", name,
			    c->head_dim, heads ? c->d / heads : 0);
	if (!rc)
		rc = cfg_num(o, name, "rms_norm_eps", 1e-6, &eps, err);
	if (!rc)
		rc = cfg_num(o, name, "rope_theta", 10000.0, &theta, err);
	/* transformers 5 writes RoPE's settings as rope_parameters {rope_type, rope_theta, the
	 * scaling fields} in place of rope_theta and rope_scaling (4.x reads only those two, and
	 * ignores rope_parameters): where both spellings are given they must agree */
	const struct sb_json *rp = sb_json_get(o, "rope_parameters");
	if (!rc && rp && rp->type != SB_JSON_NULL && rp->type != SB_JSON_OBJECT)
		rc = SB_ERR(err, SB_EDATA, "%s: rope_parameters must be null or an object", name);
	if (rp && rp->type != SB_JSON_OBJECT)
		rp = NULL;
	if (!rc && rp && sb_json_get(rp, "rope_theta") && sb_json_get(rp, "rope_theta")->type != SB_JSON_NULL) {
		double t2;
		const struct sb_json *top_t = sb_json_get(o, "rope_theta");
		rc = cfg_num(rp, name, "rope_theta", 0, &t2, err);
		if (!rc && top_t && top_t->type != SB_JSON_NULL && t2 != theta)
			rc = SB_ERR(err, SB_EDATA, "%s: rope_parameters.rope_theta %.17g disagrees with rope_theta %.17g",
				    name, t2, theta);
		theta = t2;
	}
	if (!rc)
		rc = cfg_int(o, name, "max_position_embeddings", 1, 1 << 24, 2048, max_pos, err);
	if (!rc) /* SmolLM3Config leaves it to PretrainedConfig: true (so save_pretrained omits it) */
		rc = cfg_bool(o, name, "tie_word_embeddings", smollm3, &tied, err);
	if (!rc)
		rc = cfg_bool(o, name, "attention_bias", 0, &bias_attn, err);
	if (!rc && !info->olmo) /* OLMo's MLP has no biases (Olmo2Config has no mlp_bias) */
		rc = cfg_bool(o, name, "mlp_bias", 0, &bias_mlp, err);
	if (!rc)
		rc = cfg_bool(o, name, "use_sliding_window", 0, &sliding, err);
	if (!rc && sliding)
		rc = SB_ERR(err, SB_EDATA, "%s: use_sliding_window is true (sliding-window layers are not read here)", name);
	/* Mistral's sliding window: full attention over contexts no longer than the window
	 * (sb_lm_import refuses a longer T); null = none */
	*sliding_window = 0;
	const struct sb_json *sw = sb_json_get(o, "sliding_window");
	if (!rc && mistral && !(sw && sw->type == SB_JSON_NULL))
		rc = cfg_int(o, name, "sliding_window", 1, 1 << 30, 0, sliding_window, err);
	if (!rc && qwen2 && bias_attn)
		rc = SB_ERR(err, SB_EDATA, "%s: qwen2 with attention_bias (its layout has q/k/v biases only)", name);
	int qkv_bias = 1;
	if (!rc && qwen2_moe) /* Qwen2MoeAttention: q/k/v biases when qkv_bias (true), o_proj none */
		rc = cfg_bool(o, name, "qkv_bias", 1, &qkv_bias, err);
	const struct sb_json *clip = olmoe ? sb_json_get(o, "clip_qkv") : NULL;
	if (!rc && clip && clip->type != SB_JSON_NULL)
		rc = SB_ERR(err, SB_EDATA, "%s: clip_qkv is set (the clamped q/k/v are not read here)", name);
	if (!rc && !llama && bias_mlp)
		rc = SB_ERR(err, SB_EDATA, "%s: mlp_bias on %s", name, mt);
	const struct sb_json *rs = sb_json_get(o, "rope_scaling");
	if (!rc && rs && rs->type != SB_JSON_NULL && rs->type != SB_JSON_OBJECT)
		rc = SB_ERR(err, SB_EDATA, "%s: rope_scaling must be null or an object", name);
	if (rs && rs->type != SB_JSON_OBJECT)
		rs = NULL;
	/* the scaling of each spelling given (rope_scaling first); a second must say the same */
	const struct sb_json *spec[2] = {rs, rp};
	const char *sname[2] = {"rope_scaling", "rope_parameters"};
	struct sb_lm_cfg got[2];
	int seen = -1;
	for (int i = 0; i < 2 && !rc; i++) {
		if (!spec[i])
			continue;
		got[i] = *c;
		if ((rc = rope_spec(spec[i], name, sname[i], *max_pos, &got[i], err)))
			break;
		if (seen >= 0 && !same_rope(&got[seen], &got[i])) {
			rc = SB_ERR(err, SB_EDATA, "%s: rope_parameters and rope_scaling describe different scalings", name);
			break;
		}
		seen = i;
	}
	if (!rc && seen >= 0)
		rope_copy(c, &got[seen]);
	/* RoPE over a part of each head: Phi-3's (int(head_dim * factor) dimensions); elsewhere not
	 * read here */
	if (!rc && info->phi3) {
		double prf = 1.0;
		rc = cfg_num(o, name, "partial_rotary_factor", 1.0, &prf, err);
		int rd = (int)(c->head_dim * prf);
		if (!rc && (prf > 1 || rd < 2 || rd % 2))
			rc = SB_ERR(err, SB_EDATA, "%s: head_dim %d times partial_rotary_factor %g gives %d rotated dimensions (an "
						   "even number >= 2, at most head_dim, is needed)", name, c->head_dim, prf, rd);
		if (!rc)
			c->rope_dim = rd == c->head_dim ? 0 : rd;
	}
	for (int i = 0; i < 2 && !rc && !info->phi3; i++) {
		const struct sb_json *src = i ? rp : o, *v = src ? sb_json_get(src, "partial_rotary_factor") : NULL;
		if (v && v->type != SB_JSON_NULL && !(v->type == SB_JSON_NUMBER && v->number == 1.0))
			rc = SB_ERR(err, SB_EDATA, "%s: %spartial_rotary_factor other than 1 (RoPE on part of each head) is "
						   "not implemented",
				    name, i ? "rope_parameters." : "");
	}
	if (rc)
		goto out;
	rc = set_norm_eps(c, name, "rms_norm_eps", eps, err);
	c->rope_theta = (float)theta;
	if (!rc && (double)c->rope_theta != theta)
		rc = SB_ERR(err, SB_EDATA, "%s: rope_theta %.17g is not exactly a float", name, theta);
	memset(c->pattern, 'A', (size_t)layers);
	c->pattern[layers] = 0;
	if (!rc && olmo3) { /* layer_types, else every fourth layer global (Olmo3Config) */
		rc = cfg_int(o, name, "sliding_window", 1, 1 << 30, 4096, &c->window, err);
		const struct sb_json *lt = sb_json_get(o, "layer_types");
		if (!rc && lt && lt->type != SB_JSON_NULL && (lt->type != SB_JSON_ARRAY || (int)lt->n != layers))
			rc = SB_ERR(err, SB_EDATA, "%s: layer_types must list num_hidden_layers (%d) kinds", name, layers);
		for (int l = 0; l < layers && !rc; l++) {
			const char *k = lt && lt->type == SB_JSON_ARRAY ? sb_json_str(lt->items[l], "")
					: (l + 1) % 4 ? "sliding_attention" : "full_attention";
			if (!strcmp(k, "sliding_attention"))
				c->pattern[l] = 'S';
			else if (strcmp(k, "full_attention"))
				rc = SB_ERR(err, SB_EDATA, "%s: layer_types[%d] is '%s' (sliding_attention or full_attention)",
					    name, l, k);
		}
		/* the sliding layers' RoPE: the default rotary embedding of rope_theta (no scaling) */
		c->rope_local_theta = (float)theta;
	}
	if (!rc && exaone4) { /* layer_types, else with a sliding_window every
			      * sliding_window_pattern-th layer global (Exaone4Config); global layers NoPE */
		const struct sb_json *swv = sb_json_get(o, "sliding_window"), *lt = sb_json_get(o, "layer_types");
		int every = 4, hybrid = !(swv && swv->type == SB_JSON_NULL);
		if (hybrid)
			rc = cfg_int(o, name, "sliding_window", 1, 1 << 30, 4096, &c->window, err);
		if (!rc && hybrid && !(lt && lt->type == SB_JSON_ARRAY))
			rc = cfg_int(o, name, "sliding_window_pattern", 1, 1 << 20, 4, &every, err);
		if (!rc && lt && lt->type != SB_JSON_NULL && (lt->type != SB_JSON_ARRAY || (int)lt->n != layers))
			rc = SB_ERR(err, SB_EDATA, "%s: layer_types must list num_hidden_layers (%d) kinds", name, layers);
		for (int l = 0; l < layers && !rc; l++) {
			const char *k = lt && lt->type == SB_JSON_ARRAY ? sb_json_str(lt->items[l], "")
					: hybrid && (l + 1) % every ? "sliding_attention" : "full_attention";
			if (!strcmp(k, "sliding_attention") && hybrid)
				c->pattern[l] = 'S';
			else if (strcmp(k, "full_attention"))
				rc = SB_ERR(err, SB_EDATA, "%s: layer_types[%d] is '%s' (sliding_attention or full_attention%s)",
					    name, l, k, hybrid ? "" : "; no sliding_window");
			/* "global NoPE for hybrid attention": with a sliding window the full layers
			 * take no RoPE; the sliding ones take the one rotary embedding, scaling included */
			c->rope_layers[l] = hybrid && c->pattern[l] == 'A' ? '0' : '1';
		}
		c->rope_layers[layers] = 0;
		if (!strchr(c->rope_layers, '0'))
			c->rope_layers[0] = 0;
	}
	if (!rc && ministral) { /* layer_types: S (sliding_window keys, the one RoPE) and A layers; without
				 * it every layer slides, read as Mistral's window (T within it: full) */
		const struct sb_json *lt = sb_json_get(o, "layer_types"), *swv = sb_json_get(o, "sliding_window");
		int win = 0;
		if (!(swv && swv->type == SB_JSON_NULL))
			rc = cfg_int(o, name, "sliding_window", 1, 1 << 30, 4096, &win, err);
		if (!rc && lt && lt->type != SB_JSON_NULL && (lt->type != SB_JSON_ARRAY || (int)lt->n != layers))
			rc = SB_ERR(err, SB_EDATA, "%s: layer_types must list num_hidden_layers (%d) kinds", name, layers);
		if (!rc && !(lt && lt->type == SB_JSON_ARRAY))
			*sliding_window = win;
		for (int l = 0; !rc && lt && lt->type == SB_JSON_ARRAY && l < layers; l++) {
			const char *k = sb_json_str(lt->items[l], "");
			if (!strcmp(k, "sliding_attention") && win > 0)
				c->pattern[l] = 'S';
			else if (strcmp(k, "full_attention") && strcmp(k, "sliding_attention"))
				rc = SB_ERR(err, SB_EDATA, "%s: layer_types[%d] is '%s' (sliding_attention or full_attention)",
					    name, l, k);
		}
		c->window = win;
		c->rope_local_theta = 0; /* the sliding layers take the one rotary embedding */
	}
	if (!rc && smollm3) { /* no_rope_layers: 1 = RoPE, 0 = NoPE; else every
			       * no_rope_layer_interval-th layer NoPE (SmolLM3Config) */
		const struct sb_json *nr = sb_json_get(o, "no_rope_layers");
		int every = 4;
		if (!nr || nr->type == SB_JSON_NULL)
			rc = cfg_int(o, name, "no_rope_layer_interval", 1, 1 << 20, 4, &every, err);
		else if (nr->type != SB_JSON_ARRAY || (int)nr->n != layers)
			rc = SB_ERR(err, SB_EDATA, "%s: no_rope_layers must list num_hidden_layers (%d) 0s and 1s", name, layers);
		for (int l = 0; l < layers && !rc; l++) {
			const struct sb_json *v = nr && nr->type == SB_JSON_ARRAY ? nr->items[l] : NULL;
			if (v && (v->type != SB_JSON_NUMBER || (v->number != 0 && v->number != 1)))
				rc = SB_ERR(err, SB_EDATA, "%s: no_rope_layers[%d] is not 0 or 1", name, l);
			c->rope_layers[l] = (v ? v->number == 1 : (l + 1) % every != 0) ? '1' : '0';
		}
		c->rope_layers[layers] = 0;
		if (!strchr(c->rope_layers, '0'))
			c->rope_layers[0] = 0;
	}
	if (info->olmo) {
		c->prenorm = 0;
		c->sandwich = 1;
		c->qk_norm = exaone4 ? 1 : 2;
	}
	c->heads = heads;
	c->swiglu = 1;
	c->rmsnorm = 1;
	c->pos = SB_LM_POS_ROPE;
	c->tied = tied;
	c->attn_bias = qwen2 ? 2 : qwen2_moe ? (qkv_bias ? 2 : 0) : bias_attn ? 1 : 0;
	c->bias = bias_mlp;
	if (!info->olmo)
		c->qk_norm = qwen3 ? 1 : olmoe ? 2 : 0; /* OLMoE's over all heads, before RoPE */
	c->max_T = *max_pos;
	if (granite3) { /* as GraniteConfig's defaults: each 1 (the attention multiplier too, not 1/sqrt(head_dim)) */
		if (!rc)
			rc = granite_float(o, name, "embedding_multiplier", 1.0, &c->emb_mult, err);
		if (!rc)
			rc = granite_float(o, name, "residual_multiplier", 1.0, &c->resid_mult, err);
		if (!rc)
			rc = granite_float(o, name, "attention_multiplier", 1.0, &c->attn_scale, err);
		if (!rc)
			rc = granite_float(o, name, "logits_scaling", 1.0, &c->logit_div, err);
	}
	if (!rc)
		rc = check_cfg(c, name, err);
out:
	sb_json_free(o);
	return rc ? SB_EDATA : 0;
}

/* ---------------------------------------------------------------- files */

struct src_file {
	char name[256];
	char sha[SB_SHA256_HEX];
	uint64_t size;
};

static int hash_file(const char *dir, const char *name, struct src_file *f, struct sb_err *err)
{
	char path[4600];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(f->name, sizeof f->name, "%s", name);
	return sb_sha256_file(path, f->sha, &f->size, err);
}

static int plain_name(const char *s)
{
	return s[0] && s[0] != '.' && !strchr(s, '/') && strlen(s) < 256;
}

int sb_lm_hf_weight_map(const char *json, size_t n, const char *name, char (**files)[256], int *nfiles,
			struct sb_err *err)
{
	*files = NULL;
	*nfiles = 0;
	struct sb_json *v;
	if (sb_json_parse(json, n, &v, err)) {
		sb_err_prefix(err, "%s", name);
		return SB_EDATA;
	}
	int rc = 0;
	const struct sb_json *map = sb_json_get(v, "weight_map");
	if (!map || map->type != SB_JSON_OBJECT || !map->n)
		rc = SB_ERR(err, SB_EDATA, "%s: 'weight_map' must be a non-empty object", name);
	if (!rc && !(*files = calloc(map->n, sizeof **files)))
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (size_t i = 0; !rc && i < map->n; i++) {
		const char *f = sb_json_str(map->items[i], "");
		if (!plain_name(f)) {
			rc = SB_ERR(err, SB_EDATA, "%s: weight_map['%s'] is not a file name in the directory", name,
				    map->keys[i]);
			break;
		}
		int seen = 0;
		for (int j = 0; j < *nfiles && !seen; j++)
			seen = !strcmp((*files)[j], f);
		if (!seen)
			snprintf((*files)[(*nfiles)++], 256, "%s", f);
	}
	sb_json_free(v);
	if (rc) {
		free(*files);
		*files = NULL;
		*nfiles = 0;
	}
	return rc;
}

/* The weight files: model.safetensors, or else the distinct files of the index's weight_map
 * (in order of first appearance); transformers (4.57.1, modeling_utils) looks for them in
 * that order too, so a directory holding both is read from model.safetensors. */
static int weight_files(const char *dir, char (**files)[256], int *nfiles, struct sb_err *err)
{
	char path[4600];
	snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
	*files = NULL;
	*nfiles = 0;
	char single[4600];
	snprintf(single, sizeof single, "%s/model.safetensors", dir);
	if (!sb_file_exists(path) || sb_file_exists(single)) {
		if (!sb_file_exists(single))
			return SB_ERR(err, SB_EIO, "%s: neither model.safetensors nor model.safetensors.index.json", dir);
		*files = calloc(1, sizeof **files);
		if (!*files)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		snprintf((*files)[0], 256, "model.safetensors");
		*nfiles = 1;
		return 0;
	}
	char *buf;
	size_t n;
	SB_TRY(sb_read_file(path, &buf, &n, 64u << 20, err));
	int rc = sb_lm_hf_weight_map(buf, n, path, files, nfiles, err);
	free(buf);
	return rc;
}

/* A tensor of the checkpoint that the layout does not need but may be skipped. */
static int skippable(const char *name, const struct sb_lm_cfg *c, const struct sb_lm_hf_info *info)
{
	/* Gemma 3's vision tower and projector (a text-only evaluation does not run them) */
	if (info->gemma3_mm && (!strncmp(name, "vision_tower.", 13) || !strncmp(name, "multi_modal_projector.", 22) ||
				!strncmp(name, "model.vision_tower.", 19) ||
				!strncmp(name, "model.multi_modal_projector.", 28)))
		return 1;
	if (info->gemma3_mm && c->tied &&
	    (!strcmp(name, "language_model.lm_head.weight") || !strcmp(name, "lm_head.weight")))
		return 1;
	size_t n = strlen(name);
	static const char inv[] = ".rotary_emb.inv_freq";
	if (n > sizeof inv - 1 && !strcmp(name + n - (sizeof inv - 1), inv))
		return 1;
	return c->tied && !strcmp(name, "lm_head.weight");
}

/* a Gemma3ForConditionalGeneration checkpoint's name of the language model's tensor NAME (the
 * text model's), in place: language_model.NAME, or the module tree's spelling when only that
 * is in the files (model.X -> model.language_model.X, lm_head.weight as it is) */
static void mm_name(char *name, size_t cap, const struct sb_tensors *shard, int nf)
{
	char a[256], b[256];
	snprintf(a, sizeof a, "language_model.%s", name);
	if (!strncmp(name, "model.", 6))
		snprintf(b, sizeof b, "model.language_model.%s", name + 6);
	else
		snprintf(b, sizeof b, "%s", name);
	int has_b = 0;
	for (int s = 0; s < nf; s++) {
		if (sb_tensors_find(&shard[s], a))
			break;
		has_b = has_b || sb_tensors_find(&shard[s], b);
	}
	snprintf(name, cap, "%s", has_b ? b : a);
}

/* an RMSNorm's weight (Gemma 3's are (1 + w)) */
static int is_norm(const char *name)
{
	size_t n = strlen(name);
	return (n > 12 && !strcmp(name + n - 12, "_norm.weight")) ||
	       (n > 16 && !strcmp(name + n - 16, "layernorm.weight")) || !strcmp(name, "model.norm.weight");
}

/* Gemma3RMSNorm multiplies by 1.0 + w.float(): the run's checkpoint holds that multiplier, in
 * float32, computed as transformers does (w widened, then 1 added in float32) */
static int add_plus_one(struct sb_tensors *out, const char *name, const struct sb_tensor *t, struct sb_err *err)
{
	size_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= (size_t)t->shape[i];
	float *w = malloc((n ? n : 1) * sizeof *w);
	if (!w)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (size_t i = 0; i < n; i++) {
		float v;
		if (t->dtype == SB_BF16)
			v = sb_bf16_to_f32(((const uint16_t *)t->data)[i]);
		else if (t->dtype == SB_F16)
			v = sb_f16_to_f32(((const uint16_t *)t->data)[i]);
		else
			memcpy(&v, (const char *)t->data + i * 4, 4);
		w[i] = 1.0f + v;
	}
	int rc = sb_tensors_add(out, name, SB_F32, t->ndim, t->shape, w, 0, err); /* copied */
	free(w);
	return rc;
}

/* Phi-3's name of the toolkit's tensor `ours` when it is a part of a fused tensor: q_proj, k_proj
 * and v_proj are rows of self_attn.qkv_proj (q, then k, then v), gate_proj and up_proj the halves
 * of mlp.gate_up_proj; *row0 and *rows the part's first row and the fused tensor's rows. 0 for the
 * other names (they agree). */
static int phi3_name(const struct sb_lm_cfg *c, const char *ours, char *out, size_t cap, int64_t *row0, int64_t *rows)
{
	int l, at = 0;
	if (sscanf(ours, "model.layers.%d.%n", &l, &at) != 1 || !at)
		return 0;
	const char *rest = ours + at;
	int64_t qd = (int64_t)c->heads * c->head_dim, kvd = (int64_t)c->kv_heads * c->head_dim, F = c->ffn;
	static const char *const att[3] = {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"};
	for (int k = 0; k < 3; k++)
		if (!strcmp(rest, att[k])) {
			snprintf(out, cap, "model.layers.%d.self_attn.qkv_proj.weight", l);
			*row0 = k == 0 ? 0 : k == 1 ? qd : qd + kvd;
			*rows = qd + 2 * kvd;
			return 1;
		}
	if (!strcmp(rest, "mlp.gate_proj.weight") || !strcmp(rest, "mlp.up_proj.weight")) {
		snprintf(out, cap, "model.layers.%d.mlp.gate_up_proj.weight", l);
		*row0 = rest[4] == 'g' ? 0 : F;
		*rows = 2 * F;
		return 1;
	}
	return 0;
}

/* Cohere2's interleaved RoPE rotates the pairs (2i, 2i + 1) of a head; rotate-half (the rope
 * op's) the pairs (i, i + hd / 2). Reordering each head's q_proj and k_proj rows (and biases),
 * even ones first then odd ones, makes the one the other: the scores q.k are unchanged by the
 * same reordering of q and k, v is not touched. Rows copied as they are (any dtype). */
static int add_deinterleaved(struct sb_tensors *out, const char *name, const struct sb_tensor *t, int hd,
			     struct sb_err *err)
{
	size_t rows = (size_t)t->shape[0], es = sb_dtype_size(t->dtype), rb = t->nbytes / (rows ? rows : 1);
	if (hd < 2 || hd % 2 || rows % (size_t)hd || rb * rows != t->nbytes || rb % es)
		return SB_ERR(err, SB_EDATA, "tensor '%s': %zu rows are not whole heads of %d", name, rows, hd);
	char *w = malloc(t->nbytes ? t->nbytes : 1);
	if (!w)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (size_t h = 0; h < rows / (size_t)hd; h++)
		for (size_t j = 0; j < (size_t)hd; j++) {
			size_t from = h * hd + (j < (size_t)hd / 2 ? 2 * j : 2 * (j - hd / 2) + 1);
			memcpy(w + (h * hd + j) * rb, (const char *)t->data + from * rb, rb);
		}
	int rc = sb_tensors_add(out, name, t->dtype, t->ndim, t->shape, w, 0, err); /* copied */
	free(w);
	return rc;
}

static int rm_partial(const char *dir, struct sb_err *err)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : SB_ERRNO(err, dir);
	struct dirent *e;
	char p[4700];
	int rc = 0;
	while ((e = readdir(d)) && !rc) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		if (unlink(p))
			rc = SB_ERRNO(err, p);
	}
	closedir(d);
	if (!rc && rmdir(dir))
		rc = SB_ERRNO(err, dir);
	return rc;
}

static int copy_file(const char *from, const char *to, struct sb_err *err)
{
	char *buf;
	size_t n;
	SB_TRY(sb_read_file(from, &buf, &n, 1u << 30, err));
	int rc = sb_write_file_atomic(to, buf, n, err);
	free(buf);
	return rc;
}

/* ---------------------------------------------------------------- import */

static int same_shape(const struct sb_tensor *t, const struct sb_lm_param *p)
{
	if (t->ndim != p->ndim)
		return 0;
	for (int k = 0; k < p->ndim; k++)
		if (t->shape[k] != p->shape[k])
			return 0;
	return 1;
}

static void shape_str(int ndim, const int64_t *shape, char *out, size_t cap)
{
	int n = snprintf(out, cap, "[");
	for (int k = 0; k < ndim && n > 0 && (size_t)n < cap; k++)
		n += snprintf(out + n, cap - (size_t)n, "%s%lld", k ? ", " : "", (long long)shape[k]);
	if (n > 0 && (size_t)n < cap)
		snprintf(out + n, cap - (size_t)n, "]");
}

/* An experts' stack (p: [E, 2 Fe, d] gate and up, or [E, d, Fe] down) from the family's tensors,
 * one per expert and matrix: each found in one shard, checked (F32/BF16/F16, its shape) and
 * added to out under the toolkit's name (sb_lm_expert_name), borrowed from the mapping */
static int add_experts(const struct sb_lm_hf_info *info, const struct sb_lm_param *p, const struct sb_tensors *shard,
		       int nf, char (*files)[256], const char *hf_dir, struct sb_tensors *out, struct sb_err *err)
{
	char probe[160];
	int l = -1, in = sb_lm_expert_name(p->name, 0, 0, probe, sizeof probe) == 0;
	if (sscanf(p->name, "model.layers.%d.", &l) != 1)
		return SB_ERR(err, SB_EINTERNAL, "experts' stack '%s' of no layer", p->name);
	int64_t rows = in ? p->shape[1] / 2 : p->shape[1], shape[2] = {rows, p->shape[2]};
	for (int64_t e = 0; e < p->shape[0]; e++)
		for (int k = in ? 0 : 2; k < (in ? 2 : 3); k++) {
			char src[160], ours[160];
			expert_src(info, l, (int)e, k, src, sizeof src);
			sb_lm_expert_name(p->name, (int)e, k, ours, sizeof ours);
			const struct sb_tensor *t = NULL;
			int ts = -1;
			for (int s = 0; s < nf; s++) {
				const struct sb_tensor *u = sb_tensors_find(&shard[s], src);
				if (u && t)
					return SB_ERR(err, SB_EDATA, "%s: tensor '%s' is in both %s and %s", hf_dir, src, files[ts],
						      files[s]);
				if (u) {
					t = u;
					ts = s;
				}
			}
			if (!t)
				return SB_ERR(err, SB_EDATA, "%s: the checkpoint lacks tensor '%s' (expert %lld of layer %d)",
					      hf_dir, src, (long long)e, l);
			if (t->dtype != SB_F32 && t->dtype != SB_BF16 && t->dtype != SB_F16)
				return SB_ERR(err, SB_EDATA, "%s: tensor '%s' is not F32, BF16 or F16", hf_dir, src);
			if (t->ndim != 2 || t->shape[0] != shape[0] || t->shape[1] != shape[1]) {
				char a[96];
				shape_str(t->ndim, t->shape, a, sizeof a);
				return SB_ERR(err, SB_EDATA,
					      "%s: checkpoint tensor '%s' has another shape: %s in the file, [%lld, %lld] from "
					      "config.json", hf_dir, src, a, (long long)shape[0], (long long)shape[1]);
			}
			SB_TRY(sb_tensors_add(out, ours, t->dtype, 2, t->shape, t->data, 1, err));
		}
	return 0;
}

int sb_lm_import(const char *hf_dir, const char *runs_dir, const struct sb_lm_import_opts *o, struct sb_lm_cell *cell,
		 char *run_dir, int *existed, struct sb_err *err)
{
	*existed = 0;
	char path[4600];
	struct sb_lm_hf_info info;
	int rc = 0;
	struct src_file cfg_f, tok_f = {{0}, {0}, 0};
	/* config */
	snprintf(path, sizeof path, "%s/config.json", hf_dir);
	char *buf;
	size_t n;
	SB_TRY(sb_read_file(path, &buf, &n, 16u << 20, err));
	sb_lm_cell_defaults(cell);
	rc = sb_lm_hf_config(buf, n, path, &cell->model, &info, err);
	const char *mt = info.model_type;
	int max_pos = info.max_pos, window = info.sliding_window;
	free(buf);
	if (rc)
		return rc;
	SB_TRY(hash_file(hf_dir, "config.json", &cfg_f, err));
	cell->T = o->T ? o->T : max_pos < 512 ? max_pos : 512;
	if (cell->T < 8 || cell->T > max_pos)
		return SB_ERR(err, SB_EUSAGE, "--T %d out of 8..%d (max_position_embeddings)", cell->T, max_pos);
	if (window && cell->T > window)
		return SB_ERR(err, SB_EUSAGE,
			      "--T %d exceeds the model's sliding_window %d (beyond it the model's attention is not full; "
			      "not read here)",
			      cell->T, window);
	if (o->n_corpora < 1)
		return SB_ERR(err, SB_EUSAGE, "no --corpus NAME=PATH (held-out text to evaluate on)");
	cell->n_corpora = o->n_corpora;
	memcpy(cell->corpora, o->corpora, sizeof cell->corpora);
	/* a relative PATH is made absolute: the run is evaluated from anywhere (sb-eval RUN_DIR,
	 * a scaled SAS cell on it), not only from the directory the import ran in */
	for (int i = 0; i < cell->n_corpora; i++) {
		char *eq = strchr(cell->corpora[i], '='), cwd[4096], abs_[sizeof cell->corpora[i]];
		const char *p = eq ? eq + 1 : cell->corpora[i];
		if (p[0] == '/' || !p[0])
			continue;
		if (!getcwd(cwd, sizeof cwd))
			return SB_ERRNO(err, "the current directory");
		int k = snprintf(abs_, sizeof abs_, "%.*s%s/%s", eq ? (int)(eq + 1 - cell->corpora[i]) : 0, cell->corpora[i],
				 cwd, p[0] == '.' && p[1] == '/' ? p + 2 : p);
		if (k < 0 || (size_t)k >= sizeof abs_)
			return SB_ERR(err, SB_EUSAGE, "--corpus %s: the path made absolute is too long", cell->corpora[i]);
		memcpy(cell->corpora[i], abs_, (size_t)k + 1);
	}
	snprintf(cell->haystack, sizeof cell->haystack, "%s", o->haystack);
	/* each corpus read now (its valid part, as the evaluation will): a missing file, a test
	 * file or an empty one is refused before anything is written; the haystack is one of them */
	int hay_found = !cell->haystack[0];
	for (int i = 0; i < cell->n_corpora; i++) {
		struct sb_lm_corpus c;
		SB_TRY(sb_lm_corpus_read(cell->corpora[i], "valid", &c, err));
		hay_found |= !strcmp(c.name, cell->haystack);
		sb_lm_corpus_free(&c);
	}
	if (!hay_found)
		return SB_ERR(err, SB_EUSAGE, "--haystack %s: not the name of a --corpus", cell->haystack);
	cell->seed = 0;
	cell->data_seed = 0;
	cell->mixture[0] = 0;
	/* tokenizer */
	snprintf(path, sizeof path, "%s/tokenizer.json", hf_dir);
	if (sb_file_exists(path)) {
		SB_TRY(hash_file(hf_dir, "tokenizer.json", &tok_f, err));
		snprintf(cell->tokenizer, sizeof cell->tokenizer, "tokenizer.json");
		/* read now as the evaluation will (docs/tokenizer.md), and within the model's ids: a
		 * tokenizer refused there, or larger than the vocabulary, is refused here, before
		 * anything is written (the evaluation and SAS check it again: sb_lm_run_tokenizer) */
		struct sb_tok *tk;
		SB_TRY(sb_tok_load(path, &tk, err));
		int ntok = sb_tok_vocab_size(tk);
		sb_tok_free(tk);
		if (ntok > cell->model.vocab)
			return SB_ERR(err, SB_EDATA, "%s: %d tokens, more than the model's vocabulary (%d)", path, ntok,
				      cell->model.vocab);
	} else if (cell->model.vocab > 256) {
		/* without it the evaluation would read bytes as the model's ids: a meaningless text */
		snprintf(path, sizeof path, "%s/tokenizer.model", hf_dir);
		return SB_ERR(err, SB_EDATA,
			      "%s: no tokenizer.json, and the model's %d ids are not bytes%s", hf_dir, cell->model.vocab,
			      sb_file_exists(path) ? " (only a SentencePiece tokenizer.model: write its tokenizer.json with "
						     "transformers, AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR))"
						   : "");
	}
	/* weights */
	char(*files)[256];
	int nf;
	SB_TRY(weight_files(hf_dir, &files, &nf, err));
	struct src_file *wf = calloc((size_t)nf, sizeof *wf);
	struct sb_tensors *shard = calloc((size_t)nf, sizeof *shard);
	/* the shards are mapped, not read: `out` borrows their tensors until it is written */
	struct sb_st_map *map = calloc((size_t)nf, sizeof *map);
	struct sb_lm_param *params = NULL;
	char(*src)[80] = NULL; /* the checkpoint's name of each parameter */
	int np = 0;
	size_t nfl = 0;
	struct sb_tensors out;
	sb_tensors_init(&out);
	char tmpdir[4200] = "";
	if (!wf || !shard || !map)
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int i = 0; i < nf && !rc; i++) { /* each hashed through its mapping: one read, of the bytes used */
		snprintf(path, sizeof path, "%s/%s", hf_dir, files[i]);
		rc = sb_st_map(path, NULL, &shard[i], &map[i], err);
		if (!rc) {
			snprintf(wf[i].name, sizeof wf[i].name, "%s", files[i]);
			sb_sha256_buf(map[i].addr, map[i].len, wf[i].sha);
			wf[i].size = map[i].len;
		}
	}
	/* the source and the cell id */
	if (!rc) {
		struct sb_jw w;
		sb_jw_init(&w, NULL);
		sb_jw_obj(&w);
		sb_jw_kstr(&w, "format", "huggingface");
		sb_jw_kstr(&w, "model_type", mt);
		sb_jw_key(&w, "files");
		sb_jw_arr(&w);
		struct src_file *all[1 + 1];
		all[0] = &cfg_f;
		all[1] = tok_f.name[0] ? &tok_f : NULL;
		for (int i = -2; i < nf; i++) {
			const struct src_file *f = i < 0 ? all[i + 2] : &wf[i];
			if (!f)
				continue;
			sb_jw_obj(&w);
			sb_jw_kstr(&w, "name", f->name);
			sb_jw_kstr(&w, "sha256", f->sha);
			sb_jw_kint(&w, "size_bytes", (int64_t)f->size);
			sb_jw_obj_end(&w);
		}
		sb_jw_arr_end(&w);
		sb_jw_obj_end(&w);
		struct sb_json *v = NULL;
		rc = w.oom ? SB_ERR(err, SB_EINTERNAL, "out of memory") : sb_json_parse(w.buf, w.len, &v, err);
		sb_jw_free(&w);
		if (!rc) {
			struct sb_jw cw;
			sb_jw_init(&cw, NULL);
			sb_jw_canonical(&cw, v);
			if (cw.oom || cw.len >= sizeof cell->source)
				rc = SB_ERR(err, SB_EDATA, "%s: too many weight files (%d) for the cell's source", hf_dir, nf);
			else
				snprintf(cell->source, sizeof cell->source, "%.*s", (int)cw.len, cw.buf);
			sb_jw_free(&cw);
		}
		sb_json_free(v);
	}
	if (!rc)
		rc = sb_lm_cell_id(cell, err);
	if (!rc) {
		snprintf(run_dir, 4096, "%s/%s", runs_dir, cell->cell_id);
		snprintf(path, sizeof path, "%s/cell.json", run_dir);
		if (sb_file_exists(path)) {
			*existed = 1;
			goto done;
		}
	}
	/* every tensor of the layout, and nothing else; LFM2's names are mapped onto ours (the
	 * run's checkpoint holds the toolkit's names) */
	if (!rc)
		rc = sb_lm_param_table(&cell->model, &params, &np, &nfl, err);
	if (!rc && !(src = calloc((size_t)np + 1, sizeof *src)))
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int i = 0; i < np && !rc; i++) {
		int half = 0, l = -1;
		int64_t prow0 = -1, prows = 0; /* Phi-3's fused qkv_proj / gate_up_proj: the rows read */
		if (info.moe_split && params[i].linear == 3) { /* the experts, one tensor each, kept apart */
			rc = add_experts(&info, &params[i], shard, nf, files, hf_dir, &out, err);
			snprintf(src[i], sizeof src[i], "%s", params[i].name);
			continue;
		}
		if (info.moe_split && sscanf(params[i].name, "model.layers.%d.", &l) == 1 &&
		    strstr(params[i].name, ".block_sparse_moe.router.layer.weight"))
			router_src(&info, l, src[i], sizeof src[i]);
		else if (info.lfm2)
			sb_lm_lfm2_name(params[i].name, src[i], sizeof src[i]);
		else if (info.granite || info.granite_moe)
			sb_lm_granite_name(params[i].name, src[i], sizeof src[i], &half);
		else if (cell->model.moe_shared_gate && strstr(params[i].name, ".mlp.") &&
			 sscanf(params[i].name, "model.layers.%d.", &l) == 1 && sb_lm_layer_moe(&cell->model, l) &&
			 !strstr(params[i].name, "shared_expert_gate"))
			/* the dense MLP beside the experts: its shared expert */
			snprintf(src[i], sizeof src[i], "model.layers.%d.mlp.shared_expert.%s", l,
				 strstr(params[i].name, ".mlp.") + 5);
		else if (info.phi3 && phi3_name(&cell->model, params[i].name, src[i], sizeof src[i], &prow0, &prows))
			; /* a part of a fused tensor */
		else if (info.bamba || info.falcon_h1 || info.jamba) /* Falcon-H1's and Jamba's names are Bamba's */
			sb_lm_bamba_name(params[i].name, src[i], sizeof src[i]);
		else if (info.gemma || info.olmo)
			sb_lm_sandwich_name(params[i].name, src[i], sizeof src[i]);
		else
			snprintf(src[i], sizeof src[i], "%s", params[i].name);
		if (info.gemma3_mm) /* the language model's tensors: language_model.NAME as the released
				     * checkpoints (and transformers 4.57's save_pretrained) write them, or
				     * model.language_model.* / lm_head as the 4.52+ module tree names them */
			mm_name(src[i], sizeof src[i], shard, nf);
		const struct sb_tensor *t = NULL;
		int ts = -1;
		for (int s = 0; s < nf && !rc; s++) {
			const struct sb_tensor *u = sb_tensors_find(&shard[s], src[i]);
			if (u && t) /* transformers would take the copy of the last shard in sorted order */
				rc = SB_ERR(err, SB_EDATA, "%s: tensor '%s' is in both %s and %s", hf_dir, src[i],
					    files[ts], files[s]);
			else if (u) {
				t = u;
				ts = s;
			}
		}
		if (rc)
			break;
		struct sb_tensor hv; /* a half of Granite's shared_mlp.input_linear: a view of its rows */
		if (t && half) {
			if (t->ndim != 2 || t->shape[0] != 2 * params[i].shape[0]) {
				char a[96];
				shape_str(t->ndim, t->shape, a, sizeof a);
				rc = SB_ERR(err, SB_EDATA,
					    "%s: checkpoint tensor '%s' has shape %s, not [2 shared_intermediate_size (%lld), "
					    "hidden_size]",
					    hf_dir, src[i], a, (long long)(2 * params[i].shape[0]));
				break;
			}
			hv = *t;
			hv.shape[0] = t->shape[0] / 2;
			hv.nbytes = t->nbytes / 2;
			if (half == 2)
				hv.data = (char *)t->data + hv.nbytes;
			t = &hv;
		}
		if (t && prow0 >= 0) { /* rows [prow0, prow0 + ours) of a fused [prows, in] tensor: a view */
			if (t->ndim != 2 || t->shape[0] != prows || t->shape[1] != params[i].shape[1]) {
				char a[96];
				shape_str(t->ndim, t->shape, a, sizeof a);
				rc = SB_ERR(err, SB_EDATA, "%s: checkpoint tensor '%s' has shape %s, not [%lld, %lld] from config.json",
					    hf_dir, src[i], a, (long long)prows, (long long)params[i].shape[1]);
				break;
			}
			size_t rb = t->nbytes / (size_t)prows;
			hv = *t;
			hv.shape[0] = params[i].shape[0];
			hv.nbytes = rb * (size_t)params[i].shape[0];
			hv.data = (char *)t->data + rb * (size_t)prow0;
			t = &hv;
		}
		if (!t)
			rc = SB_ERR(err, SB_EDATA, "%s: the checkpoint lacks tensor '%s' (model_type %s)", hf_dir, src[i],
				    mt);
		else if (t->dtype != SB_F32 && t->dtype != SB_BF16 && t->dtype != SB_F16)
			rc = SB_ERR(err, SB_EDATA, "%s: tensor '%s' is not F32, BF16 or F16", hf_dir, src[i]);
		else if (!same_shape(t, &params[i])) {
			char a[96], b[96];
			shape_str(t->ndim, t->shape, a, sizeof a);
			shape_str(params[i].ndim, params[i].shape, b, sizeof b);
			/* LFM2's feed-forward width is derived (lfm2_ffn): say how */
			int ffn = info.ffn_rule[0] && strstr(params[i].name, ".mlp.");
			rc = SB_ERR(err, SB_EDATA, "%s: checkpoint tensor '%s' has another shape: %s in the file, %s from config.json%s%s%s",
				    hf_dir, src[i], a, b, ffn ? " (feed-forward width: " : "", ffn ? info.ffn_rule : "",
				    ffn ? ")" : "");
		} else if (info.cohere2 && (strstr(params[i].name, "self_attn.q_proj.") ||
					    strstr(params[i].name, "self_attn.k_proj."))) /* its interleaved RoPE */
			rc = add_deinterleaved(&out, params[i].name, t, cell->model.head_dim, err);
		else if ((info.gemma || info.qwen3_next) && is_norm(params[i].name)) /* their (1 + w); OLMo's are w */
			rc = add_plus_one(&out, params[i].name, t, err);
		else
			rc = sb_tensors_add(&out, params[i].name, t->dtype, t->ndim, t->shape, t->data, 1, err);
	}
	for (int s = 0; s < nf && !rc; s++)
		for (size_t j = 0; j < shard[s].n && !rc; j++) {
			const char *nm = shard[s].t[j].name;
			int known = skippable(nm, &cell->model, &info) || is_expert_src(nm, &info, &cell->model);
			for (int i = 0; i < np && !known; i++)
				known = !strcmp(src[i], nm);
			if (!known)
				rc = SB_ERR(err, SB_EDATA, "%s/%s: tensor '%s' is not part of the %s layout read here", hf_dir,
					    files[s], nm, mt);
		}
	/* names and shapes checked: write (the weights are not widened here; sb_lm_run_open
	 * does that when the run is evaluated) */
	if (!rc)
		rc = sb_mkdir_p(runs_dir, err);
	if (!rc) {
		snprintf(tmpdir, sizeof tmpdir, "%s.partial", run_dir);
		rc = rm_partial(tmpdir, err);
		if (!rc && mkdir(tmpdir, 0777))
			rc = SB_ERRNO(err, tmpdir);
	}
	if (!rc) {
		char sha[SB_SHA256_HEX];
		snprintf(path, sizeof path, "%s/model.safetensors", tmpdir);
		rc = sb_lm_ckpt_write(path, &out, cell, 0, "source", cell->source, sha, err);
	}
	if (!rc && cell->tokenizer[0]) {
		char from[4600];
		snprintf(from, sizeof from, "%s/tokenizer.json", hf_dir);
		snprintf(path, sizeof path, "%s/%s", tmpdir, cell->tokenizer);
		rc = copy_file(from, path, err);
		char sha[SB_SHA256_HEX];
		if (!rc)
			rc = sb_sha256_file(path, sha, NULL, err);
		if (!rc && strcmp(sha, tok_f.sha))
			rc = SB_ERR(err, SB_EIO, "%s changed while it was copied", from);
	}
	if (!rc) /* cell.json, as sb-train writes it (no mixture: nothing was trained) */
		rc = sb_lm_cell_write(tmpdir, cell, (int64_t)nfl, NULL, err);
	if (!rc && rename(tmpdir, run_dir))
		rc = SB_ERRNO(err, run_dir);
	if (rc && tmpdir[0]) {
		struct sb_err e2 = {0};
		rm_partial(tmpdir, &e2);
	}
done:
	sb_tensors_free(&out);
	for (int i = 0; shard && map && i < nf; i++)
		sb_st_unmap(&shard[i], &map[i]);
	free(map);
	free(shard);
	free(wf);
	free(files);
	free(params);
	free(src);
	return rc;
}

int sb_lm_run_tokenizer(const char *run_dir, const struct sb_lm_cell *cell, int vocab, struct sb_tok **tok,
			struct sb_err *err)
{
	*tok = NULL;
	char path[4200], want[SB_SHA256_HEX] = "", got[SB_SHA256_HEX];
	snprintf(path, sizeof path, "%s/%s", run_dir, cell->tokenizer);
	struct sb_json *src = NULL;
	if (sb_json_parse(cell->source, strlen(cell->source), &src, err))
		return SB_ERR(err, SB_EDATA, "%s/cell.json: its source does not parse", run_dir);
	const struct sb_json *files = sb_json_get(src, "files");
	for (size_t i = 0; files && files->type == SB_JSON_ARRAY && i < files->n; i++)
		if (!strcmp(sb_json_str(sb_json_get(files->items[i], "name"), ""), "tokenizer.json"))
			snprintf(want, sizeof want, "%s", sb_json_str(sb_json_get(files->items[i], "sha256"), ""));
	sb_json_free(src);
	if (!want[0])
		return SB_ERR(err, SB_EDATA, "%s: cell.json's source records no tokenizer.json to check it against", path);
	char *buf;
	size_t n;
	SB_TRY(sb_read_file(path, &buf, &n, 1u << 30, err));
	sb_sha256_buf(buf, n, got);
	int rc = strcmp(got, want) ? SB_ERR(err, SB_EDATA,
					    "%s: SHA-256 %.16s... is not the %.16s... cell.json recorded for the tokenizer "
					    "imported",
					    path, got, want)
				   : sb_tok_load_mem(buf, n, path, tok, err);
	free(buf);
	if (!rc && sb_tok_vocab_size(*tok) > vocab) {
		rc = SB_ERR(err, SB_EDATA, "%s: %d tokens, more than the model's vocabulary (%d)", path,
			    sb_tok_vocab_size(*tok), vocab);
		sb_tok_free(*tok);
		*tok = NULL;
	}
	return rc;
}
