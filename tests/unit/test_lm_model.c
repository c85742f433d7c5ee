/* test_lm_model — the decoder's two paths and KV-cached decoding:
 *   - dense logits of the cached (evaluation) path equal the training path's to
 *     float tolerance, and the double reference's;
 *   - token-by-token decoding equals the full-sequence forward of the cached path
 *     bit for bit, dense and under every mask, and the per-step key selections
 *     equal the full-sequence mask (decode-time selection uses only keys that
 *     exist at that step);
 *   - chunked prefill equals one prefill; selections are causal (a later token
 *     never changes an earlier row's selection);
 *   - the recipe's selection equals an independent recomputation from the cached
 *     q and K (sinks, window, top-k of the free keys by q.k);
 *   - training: the loss falls, and results do not depend on the thread count;
 *     parameters round-trip through tensors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "backend.h"
#include "lm_mask.h"
#include "lm_model.h"
#include "ref_lm.h"
#include "rng.h"

/* the same tensors, bit for bit, in two buffers laid out by two models of one configuration
 * (whose offsets differ when one has SB_ARENA_CHECK's zones) */
static int same_tensors(const struct sb_lm_model *a, const float *pa, const struct sb_lm_model *b, const float *pb)
{
	if (a->n_params != b->n_params)
		return 0;
	for (int i = 0; i < a->n_params; i++)
		if (a->params[i].numel != b->params[i].numel ||
		    memcmp(pa + a->params[i].offset, pb + b->params[i].offset, a->params[i].numel * sizeof(float)))
			return 0;
	return 1;
}

static struct sb_lm_model *make_model(struct sb_backend *be, const char *const *kv, int n, uint64_t seed)
{
	struct sb_lm_cfg cfg;
	sb_lm_cfg_default(&cfg);
	cfg.d = 32;
	cfg.heads = 4;
	cfg.kv_heads = 2;
	cfg.lin_heads = 2;
	cfg.ffn = 48;
	cfg.max_T = 96;
	cfg.init_std = 0.2f;
	struct sb_err err = {0};
	for (int i = 0; i < n; i++)
		sb_lm_cfg_set(&cfg, kv[i], &err);
	struct sb_lm_model *m = NULL;
	if (sb_lm_model_new(be, &cfg, &m, &err) || sb_lm_model_init(m, seed, &err)) {
		SB_CHECK(0, "model: %s", err.msg);
		return NULL;
	}
	return m;
}

static void text(uint8_t *t, int n, uint64_t seed)
{
	/* a repetitive text, so that heads have structure to attend to */
	static const char *w[] = {"alpha ", "beta ", "gamma ", "delta ", "#key=123\n", "?key="};
	struct sb_rng r;
	sb_rng_init(&r, seed, SB_RNG_USER, 5);
	int i = 0;
	while (i < n) {
		const char *s = w[sb_rng_below(&r, 6)];
		for (int j = 0; s[j] && i < n; j++)
			t[i++] = (uint8_t)s[j];
	}
}

/* The logits of tok[0..T) by the training path (lt) and the cached path (lc), [T][vocab] */
static int both_paths(struct sb_backend *be, struct sb_lm_model *m, const uint8_t *tok, int T, float *lt, float *lc,
		      struct sb_err *err)
{
	struct sb_lm_train_opts o = {.B = 1, .T = T, .tile = 1};
	struct sb_lm_trainer *tr = NULL;
	struct sb_lm_cache *c = NULL;
	int rc = sb_lm_trainer_new(m, &o, &tr, err);
	if (!rc)
		rc = sb_lm_train_logits(tr, tok, lt, err);
	if (!rc)
		rc = sb_lm_cache_new(m, T, &c, err);
	if (!rc)
		rc = sb_lm_forward_cached(sb_be_main(be), m, c, tok, T, NULL, lc, 1, NULL, err);
	sb_lm_trainer_free(tr);
	sb_lm_cache_free(c);
	return rc;
}

/* the cached path's logits of tok[0..T) (host, [T][256]) */
static int cached(struct sb_backend *be, struct sb_lm_model *m, const uint8_t *tok, int T, float *out,
		  struct sb_err *err)
{
	struct sb_lm_cache *c = NULL;
	int rc = sb_lm_cache_new(m, T, &c, err);
	if (!rc)
		rc = sb_lm_forward_cached(sb_be_main(be), m, c, tok, T, NULL, out, 1, NULL, err);
	sb_lm_cache_free(c);
	return rc;
}

static double max_diff(const float *a, const float *b, size_t n)
{
	double d = 0;
	for (size_t i = 0; i < n; i++)
		d = fmax(d, fabs((double)a[i] - b[i]));
	return d;
}

/* Gemma's parts (their agreement with transformers is test_lm_import's; all of them train):
 * an S layer whose window covers every row is an A layer bit for bit (same tensors: the same
 * names, so the same initialisation), and a narrower window, its own RoPE base, the sandwich
 * norms and GeGLU each change the logits; the configuration checks and its JSON */
static void test_gemma_parts(struct sb_backend *be)
{
	enum { T = 40 };
	uint8_t tok[T + 1];
	text(tok, T + 1, 9);
	struct sb_err err = {0};
	size_t n = (size_t)T * 256;
	const char *a[] = {"pattern=AAA", "pos=rope", "norm=rmsnorm", "mlp=swiglu", "qk_norm=1", "window=3"};
	const char *v[][7] = {
		{"pattern=SAS", "pos=rope", "norm=rmsnorm", "mlp=swiglu", "qk_norm=1", "window=40"},
		{"pattern=SAS", "pos=rope", "norm=rmsnorm", "mlp=swiglu", "qk_norm=1", "window=3"},
		{"pattern=SAS", "pos=rope", "norm=rmsnorm", "mlp=swiglu", "qk_norm=1", "window=40", "rope_local_theta=500"},
		{"pattern=AAA", "pos=rope", "norm=rmsnorm", "mlp=swiglu", "qk_norm=1", "window=40", "rope_local_theta=500"},
		{"pattern=AAA", "pos=rope", "norm=rmsnorm", "mlp=swiglu", "qk_norm=1", "sandwich=1"},
		{"pattern=AAA", "pos=rope", "norm=rmsnorm", "mlp=geglu", "qk_norm=1"},
		{"pattern=AAA", "pos=rope", "norm=rmsnorm", "mlp=swiglu", "qk_norm=1", "attn_softcap=0.5"},
		{"pattern=AAA", "pos=rope", "norm=rmsnorm", "mlp=swiglu", "qk_norm=1", "final_softcap=0.5"},
		{"pattern=SAS", "pos=rope", "norm=rmsnorm", "mlp=swiglu", "qk_norm=1", "window=40", "attn_softcap=1e30"},
	};
	const char *what[] = {"S layers with a window of every row (40) vs A layers",
			      "S layers with a window of 3 vs A layers",
			      "S layers with rope_local_theta 500 vs A layers",
			      "rope_local_theta 500 without S layers vs none",
			      "sandwich norms (weights 1) vs none",
			      "GeGLU vs SwiGLU",
			      "attention soft-capping at 0.5 vs none",
			      "logit soft-capping at 0.5 vs none",
			      "attention soft-capping at 1e30 (tanh(s / cap) cap = s within rounding) on S and A layers"};
	/* same: 1 the same bits, 0 apart, 2 within 1e-5 but not the same bits */
	const int same[] = {1, 0, 0, 1, 0, 0, 0, 0, 2}, nkv[] = {6, 6, 7, 7, 6, 5, 6, 6, 7};
	float *la = malloc(n * sizeof *la), *lv = malloc(n * sizeof *lv);
	struct sb_lm_model *ma = make_model(be, a, 6, 4);
	int rc = ma ? cached(be, ma, tok, T, la, &err) : 1;
	for (size_t i = 0; i < sizeof v / sizeof v[0] && !rc; i++) {
		struct sb_lm_model *m = make_model(be, v[i], nkv[i], 4);
		int r2 = m ? cached(be, m, tok, T, lv, &err) : 1;
		double d = r2 ? -1 : max_diff(la, lv, n);
		SB_CHECK(!r2 && (same[i] == 1 ? d == 0 : same[i] == 2 ? d > 0 && d < 1e-5 : d > 1e-3),
			 "%s: max |diff| %.3g (want %s; %s)", what[i], d,
			 same[i] == 1 ? "0: the same bits" : same[i] == 2 ? "in (0, 1e-5)" : "> 1e-3", r2 ? err.msg : "ran");
		if (m && i == 7) { /* soft-capped logits lie inside (-cap, cap) */
			double mx = 0;
			for (size_t j = 0; j < n; j++)
				mx = fabs(lv[j]) > mx ? fabs(lv[j]) : mx;
			SB_CHECK(!r2 && mx <= 0.5 && mx > 0.4, "logit soft-capping at 0.5: max |logit| %.6f (want in (0.4, 0.5])",
				 mx);
		}
		if (m && (i == 1 || i == 2 || i == 4 || i == 5 || i == 6 || i == 7)) {
			/* S layers, sandwich norms, GeGLU and soft-capping train: the training path's
			 * logits are the cached path's */
			float *lt = malloc(n * sizeof *lt), *lc = malloc(n * sizeof *lc);
			int r3 = both_paths(be, m, tok, T, lt, lc, &err);
			double dt = r3 ? -1 : max_diff(lt, lc, n);
			SB_CHECK(!r3 && dt < 2e-5, "%s: the training path's logits vs the cached path's: max |diff| %.3g (%s)",
				 what[i], dt, r3 ? err.msg : "ran");
			free(lt);
			free(lc);
		}
		sb_lm_model_free(m);
	}
	sb_lm_model_free(ma);
	free(la);
	free(lv);
	/* the configuration's checks */
	static const struct {
		const char *kv[3];
		const char *msg;
	} bad[] = {{{"pattern=SA", "window=0", ""}, "S layers need a window >= 1"},
		   {{"pattern=SA", "window=4", "rope_local_theta=0.5"}, "rope_local_theta 0 or > 1"},
		   {{"sandwich=1", "norm=layernorm", ""}, "sandwich norms are RMSNorms"},
		   {{"sandwich=2", "norm=rmsnorm", ""}, "sandwich 0 or 1"},
		   {{"pattern=SX", "window=4", ""}, "layer kinds are A, C, D, L, M, S and V"},
		   {{"attn_softcap=-1", "", ""}, "attn_softcap and final_softcap must be >= 0"},
		   {{"final_softcap=-0.5", "", ""}, "attn_softcap and final_softcap must be >= 0"}};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct sb_lm_cfg c;
		sb_lm_cfg_default(&c);
		int r = 0;
		for (int k = 0; k < 3 && !r; k++)
			if (bad[i].kv[k][0])
				r = sb_lm_cfg_set(&c, bad[i].kv[k], &err);
		if (!r)
			r = sb_lm_cfg_check(&c, &err);
		SB_CHECK(r == SB_EUSAGE && strstr(err.msg, bad[i].msg), "%s %s %s refused: %s", bad[i].kv[0], bad[i].kv[1],
			 bad[i].kv[2], err.msg);
	}
	struct sb_lm_cfg c, back;
	sb_lm_cfg_default(&c);
	const char *g[] = {"pattern=SSA", "window=5", "rope_local_theta=500", "sandwich=1", "norm=rmsnorm", "mlp=geglu",
			   "attn_softcap=50", "final_softcap=30"};
	rc = 0;
	for (size_t k = 0; k < sizeof g / sizeof g[0] && !rc; k++)
		rc = sb_lm_cfg_set(&c, g[k], &err);
	if (!rc)
		rc = sb_lm_cfg_check(&c, &err);
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_lm_cfg_json(&w, &c);
	struct sb_json *jv = NULL;
	sb_lm_cfg_default(&back);
	if (!rc)
		rc = sb_json_parse(w.buf, w.len, &jv, &err);
	if (!rc)
		rc = sb_lm_cfg_from_json(&back, jv, &err);
	SB_CHECK(!rc && !strcmp(back.pattern, "SSA") && back.window == 5 && back.rope_local_theta == 500.0f &&
			 back.sandwich == 1 && back.swiglu == 2 && back.attn_softcap == 50.0f && back.final_softcap == 30.0f,
		 "S layers, window, rope_local_theta, sandwich, GeGLU and soft-capping round-trip through JSON (%.*s)",
		 (int)w.len, w.buf);
	sb_json_free(jv);
	sb_jw_free(&w);
}

/* Granite's four multipliers on a model with every trainable layer kind and learned positions:
 * the training path's logits equal the cached path's (their gradients are test_lm_grad's,
 * their logits against transformers' test_lm_import's), and each multiplier changes them */
static void test_multipliers(struct sb_backend *be)
{
	enum { T = 40 };
	uint8_t tok[T + 1];
	text(tok, T + 1, 8);
	struct sb_err err = {0};
	const char *base[] = {"pattern=CLA", "pos=learned", "emb_mult=2.5", "resid_mult=0.6", "attn_scale=0.3",
			      "logit_div=1.7"};
	const char *one[] = {"", "emb_mult=1", "resid_mult=1", "attn_scale=0", "logit_div=1"};
	float *lt = malloc((size_t)T * 256 * sizeof *lt), *lc = malloc((size_t)T * 256 * sizeof *lc);
	float *l0 = malloc((size_t)T * 256 * sizeof *l0);
	for (int k = 0; k < 5; k++) {
		/* k 0: all four; k 1..4: that one back to its neutral value */
		const char *kv[7];
		int n = 6;
		memcpy(kv, base, sizeof base);
		if (k)
			kv[n++] = one[k];
		struct sb_lm_model *m = make_model(be, kv, n, 9);
		if (!m)
			continue;
		int rc = both_paths(be, m, tok, T, lt, lc, &err);
		SB_CHECK(!rc, "multipliers (%s): both paths ran (%s)", k ? one[k] : "all four", rc ? err.msg : "ok");
		if (!rc && k == 0) {
			sb_check_closef("Granite's multipliers on C, L and A layers: logits, cached path vs training path", lc, lt,
					(size_t)T * 256, 2e-5, 1e-4);
			memcpy(l0, lt, (size_t)T * 256 * sizeof *l0);
		} else if (!rc) {
			double d = 0;
			for (size_t i = 0; i < (size_t)T * 256; i++)
				d = fmax(d, fabs(lt[i] - l0[i]));
			SB_CHECK(d > 1e-3, "%s in place of the model's multiplier changes the logits (max |diff| %.3g)", one[k],
				 d);
		}
		sb_lm_model_free(m);
	}
	free(lt);
	free(lc);
	free(l0);
}

/* A model of fewer than 256 ids (an import without tokenizer.json, whose ids are bytes): the
 * training path refuses a byte outside them, as input or as target, instead of indexing past
 * the embedding and the logits rows */
static void test_small_vocab(struct sb_backend *be)
{
	enum { T = 16 };
	const char *kv[] = {"pattern=CA", "vocab=128"};
	struct sb_lm_model *m = make_model(be, kv, 2, 4);
	if (!m)
		return;
	struct sb_err err = {0};
	struct sb_lm_train_opts o = {.B = 2, .T = T, .tile = 1};
	struct sb_lm_trainer *tr = NULL;
	uint8_t batch[2 * (T + 1)];
	float *lg = malloc((size_t)T * 128 * sizeof *lg);
	text(batch, 2 * (T + 1), 3);
	double loss;
	float *g;
	int rc = sb_lm_trainer_new(m, &o, &tr, &err);
	SB_CHECK(!rc && m->cfg.vocab == 128, "vocab 128: a trainer (%s)", rc ? err.msg : "ok");
	if (!rc) {
		rc = sb_lm_train_grad(tr, batch, &loss, &g, &err);
		SB_CHECK(!rc, "vocab 128, ASCII bytes: a gradient pass (%s)", rc ? err.msg : "ok");
		batch[T + 1 + T] = 130; /* the second sequence's last target */
		rc = sb_lm_train_grad(tr, batch, &loss, &g, &err);
		SB_CHECK(rc == SB_EDATA && strstr(err.msg, "byte 130 at sequence 1, position 16 is outside the model's vocabulary (128"),
			 "vocab 128: a target byte 130 is refused (rc %d: %s)", rc, err.msg);
		batch[T + 1 + T] = 'a';
		batch[5] = 200;
		rc = sb_lm_train_logits(tr, batch, lg, &err);
		SB_CHECK(rc == SB_EDATA && strstr(err.msg, "byte 200 at sequence 0, position 5"),
			 "vocab 128: an input byte 200 is refused by the logits (rc %d: %s)", rc, err.msg);
	}
	free(lg);
	sb_lm_trainer_free(tr);
	sb_lm_model_free(m);
}

/* RoPE's linear and YaRN scalings (transformers' rope types; their logits against
 * transformers' are test_lm_import's, their gradients test_lm_grad's): the frequencies, the
 * JSON round trip, the training path against the cached path, YaRN's attention factor on
 * both */
static void test_rope_scalings(struct sb_backend *be)
{
	enum { T = 40 };
	uint8_t tok[T + 1];
	text(tok, T + 1, 3);
	const char *lin[] = {"pattern=AA", "pos=rope", "rope_scaling=linear", "rope_factor=2"};
	const char *yarn[] = {"pattern=AA", "pos=rope", "rope_scaling=yarn", "rope_factor=4", "rope_orig_max=16",
			      "rope_beta_fast=4", "rope_beta_slow=1", "rope_attn=1"};
	const char *plain[] = {"pattern=AA", "pos=rope"};
	struct sb_lm_model *ml = make_model(be, lin, 4, 5), *my = make_model(be, yarn, 8, 5), *mp = make_model(be, plain, 2, 5);
	if (!ml || !my || !mp)
		return;
	int hd = mp->cfg.head_dim, half = hd / 2, lin_ok = 1, kept = 0, divided = 0, between = 0;
	for (int i = 0; i < half; i++) {
		lin_ok &= ml->rope_freq[i] == mp->rope_freq[i] / 2;
		kept += my->rope_freq[i] == mp->rope_freq[i];
		divided += my->rope_freq[i] == mp->rope_freq[i] / 4;
		between += my->rope_freq[i] < mp->rope_freq[i] && my->rope_freq[i] > mp->rope_freq[i] / 4;
	}
	/* head_dim 8, theta 10000, 16 positions: the ramp runs from index floor(-0.91) -> 0 (4
	 * turns) to ceil(0.40) = 1 (1 turn): index 0 kept, 1 to 3 divided */
	SB_CHECK(lin_ok && kept == 1 && divided == half - 1 && between == 0 && my->rope_freq[0] == mp->rope_freq[0],
		 "linear: every frequency halved; yarn: %d kept, %d divided by 4, %d between (of %d; want 1, %d, 0)", kept,
		 divided, between, half, half - 1);
	/* JSON round trip */
	struct sb_err err = {0};
	for (int k = 0; k < 2; k++) {
		const struct sb_lm_cfg *c = k ? &my->cfg : &ml->cfg;
		struct sb_jw w;
		sb_jw_init(&w, NULL);
		sb_lm_cfg_json(&w, c);
		struct sb_json *v = NULL;
		struct sb_lm_cfg back;
		sb_lm_cfg_default(&back);
		int rc = sb_json_parse(w.buf, w.len, &v, &err);
		if (!rc)
			rc = sb_lm_cfg_from_json(&back, v, &err);
		SB_CHECK(!rc && back.rope_scaling == c->rope_scaling && back.rope_factor == c->rope_factor &&
				 (!k || (back.rope_orig_max == 16 && back.rope_beta_fast == 4.0f && back.rope_beta_slow == 1.0f &&
					 back.rope_attn == 1.0f && back.rope_truncate == 1)),
			 "%s scaling round-trips through JSON (%.*s)", k ? "yarn" : "linear", (int)w.len, w.buf);
		sb_json_free(v);
		sb_jw_free(&w);
	}
	/* the training path and the cached path apply the same frequencies */
	struct sb_lm_model *ms[3] = {ml, my, mp};
	float *lt = malloc((size_t)T * 256 * sizeof *lt), *lc[3];
	for (int k = 0; k < 3; k++) {
		lc[k] = malloc((size_t)T * 256 * sizeof *lc[k]);
		int rc = both_paths(be, ms[k], tok, T, lt, lc[k], &err);
		char nm[160];
		snprintf(nm, sizeof nm, "%s: dense logits, cached path vs training path (rc %d)", k == 2 ? "no scaling" : k ? "yarn" : "linear", rc);
		sb_check_closef(nm, lc[k], lt, (size_t)T * 256, 2e-5, 1e-4);
	}
	double d0 = 0, d1 = 0;
	for (size_t i = 0; i < (size_t)T * 256; i++) {
		d0 = fmax(d0, fabs(lc[0][i] - lc[2][i]));
		d1 = fmax(d1, fabs(lc[1][i] - lc[2][i]));
	}
	SB_CHECK(d0 > 1e-3 && d1 > 1e-3, "the scalings change the logits (max |diff| to none: linear %.3g, yarn %.3g)", d0,
		 d1);
	/* YaRN's attention factor: both paths scale the scores by its square */
	const char *ya[] = {"pattern=AA", "pos=rope", "rope_scaling=yarn", "rope_factor=4", "rope_orig_max=16",
			    "rope_beta_fast=4", "rope_beta_slow=1", "rope_attn=1.2"};
	struct sb_lm_model *ma = make_model(be, ya, 8, 5);
	if (ma) {
		float *la = malloc((size_t)T * 256 * sizeof *la);
		int rc = both_paths(be, ma, tok, T, lt, la, &err);
		sb_check_closef("yarn with rope_attn 1.2: dense logits, cached path vs training path", la, lt,
				(size_t)T * 256, 2e-5, 1e-4);
		double d = 0;
		for (size_t i = 0; !rc && i < (size_t)T * 256; i++)
			d = fmax(d, fabs(la[i] - lc[1][i]));
		SB_CHECK(!rc && d > 1e-3, "rope_attn 1.2 changes the logits (max |diff| %.3g to rope_attn 1; %s)", d,
			 rc ? err.msg : "ran");
		free(la);
		sb_lm_model_free(ma);
	}
	for (int k = 0; k < 3; k++) {
		free(lc[k]);
		sb_lm_model_free(ms[k]);
	}
	free(lt);
}

int main(void)
{
	struct sb_backend *be;
	struct sb_err err = {0};
	if (sb_backend_open("cpu", 2, &be, &err)) {
		SB_CHECK(0, "backend: %s", err.msg);
		return sb_test_done();
	}
	struct sb_ctx *ctx = sb_be_main(be);
	enum { T = 80 };
	const char *cfgs[][8] = {{"pattern=CACLA", "pos=rope", "conv_gate=0"},
				 {"pattern=ACA", "pos=learned", "mlp=swiglu", "norm=rmsnorm", "tied=0", "bias=1"},
				 {"pattern=LAC", "kv_heads=4", "attn_bias=1"}};
	const int ncfg[] = {3, 6, 3};
	/* masks small enough to bite at T = 80 */
	const char *masks[] = {"dense", "recipe:s=2,w=8,k=5", "struct_random:s=2,w=8,k=5", "random:s=2,w=8,k=5",
			       "structure:s=2,w=8", "h2o:s=2,w=8,k=5", "block4:s=2,w=8,k=5", "block16:s=2,w=8,k=5"};
	const int nmask = 8;
	uint8_t tok[T + 1];
	text(tok, T + 1, 1);
	for (int ci = 0; ci < 3; ci++) {
		struct sb_lm_model *m = make_model(be, cfgs[ci], ncfg[ci], 7 + ci);
		if (!m)
			continue;
		const char *name = cfgs[ci][0];
		int V = m->cfg.vocab, L = m->cfg.n_layer, NH = m->cfg.heads;
		float *lt = malloc((size_t)T * V * sizeof *lt), *lc = malloc((size_t)T * V * sizeof *lc);
		float *ls = malloc((size_t)T * V * sizeof *ls);
		/* training path vs cached path, dense */
		struct sb_lm_train_opts o = {.B = 1, .T = T, .tile = 1};
		struct sb_lm_trainer *tr;
		sb_lm_trainer_new(m, &o, &tr, &err);
		sb_lm_train_logits(tr, tok, lt, &err);
		struct sb_lm_cache *c;
		sb_lm_cache_new(m, T, &c, &err);
		sb_lm_cache_reset(c, 0);
		sb_lm_forward_cached(ctx, m, c, tok, T, NULL, lc, 1, NULL, &err);
		char nm[200];
		snprintf(nm, sizeof nm, "%s: dense logits, cached path vs training path", name);
		sb_check_closef(nm, lc, lt, (size_t)T * V, 2e-5, 1e-4);
		/* double reference */
		double *P = malloc(m->n_floats * sizeof *P), *lr = malloc((size_t)T * V * sizeof *lr);
		for (size_t i = 0; i < m->n_floats; i++)
			P[i] = m->p[i];
		struct ref_model r;
		ref_from_model(&r, m, P);
		ref_model_loss(&r, tok, T, lr);
		double *lcd = malloc((size_t)T * V * sizeof *lcd);
		for (size_t i = 0; i < (size_t)T * V; i++)
			lcd[i] = lc[i];
		snprintf(nm, sizeof nm, "%s: dense logits, cached path vs double reference", name);
		sb_check_close(nm, lcd, lr, (size_t)T * V, 2e-5, 1e-4);
		free(P);
		free(lr);
		free(lcd);

		for (int mi = 0; mi < nmask; mi++) {
			struct sb_lm_mask mk;
			sb_lm_mask_parse(masks[mi], &mk, &err);
			/* full sequence, selections recorded */
			struct sb_lm_attn_obs *of = calloc((size_t)L, sizeof *of), *os = calloc((size_t)L, sizeof *os);
			int32_t *self = malloc((size_t)L * T * NH * T * 4), *seln = malloc((size_t)L * T * NH * 4);
			int32_t *sels = malloc((size_t)L * T * NH * T * 4), *selsn = malloc((size_t)L * T * NH * 4);
			for (int l = 0; l < L; l++) {
				of[l] = (struct sb_lm_attn_obs){.sel = self + (size_t)l * T * NH * T,
								.sel_n = seln + (size_t)l * T * NH, .cap = T};
			}
			sb_lm_cache_reset(c, 99);
			sb_lm_forward_cached(ctx, m, c, tok, T, &mk, lc, 1, of, &err);
			/* token by token */
			sb_lm_cache_reset(c, 99);
			int ok_bits = 1, ok_sel = 1, ok_exist = 1;
			for (int t = 0; t < T; t++) {
				for (int l = 0; l < L; l++)
					os[l] = (struct sb_lm_attn_obs){.sel = sels + ((size_t)l * T + t) * NH * T,
									.sel_n = selsn + ((size_t)l * T + t) * NH, .cap = T};
				sb_lm_forward_cached(ctx, m, c, tok + t, 1, &mk, ls + (size_t)t * V, 0, os, &err);
			}
			ok_bits = memcmp(ls, lc, (size_t)T * V * sizeof *ls) == 0;
			for (int l = 0; l < L; l++) {
				if (m->cfg.pattern[l] != 'A')
					continue;
				for (int t = 0; t < T; t++)
					for (int h = 0; h < NH; h++) {
						size_t at = ((size_t)l * T + t) * NH + h;
						int n1 = seln[at], n2 = selsn[at];
						if (n1 != n2 || memcmp(self + at * T, sels + at * T, (size_t)n1 * 4))
							ok_sel = 0;
						for (int i = 0; i < n2; i++)
							if (sels[at * T + i] > t)
								ok_exist = 0;
					}
			}
			SB_CHECK(ok_bits, "%s %s: token-by-token decoding gives the full-sequence logits bit for bit", name,
				 masks[mi]);
			SB_CHECK(ok_sel, "%s %s: decode-time selections equal the full-sequence mask, every layer/row/head",
				 name, masks[mi]);
			SB_CHECK(ok_exist, "%s %s: every decode-time selection uses only keys that exist at its step", name,
				 masks[mi]);
			/* chunked prefill (17 + 1 + 30 + rest) equals one prefill */
			sb_lm_cache_reset(c, 99);
			int cuts[] = {17, 1, 30, T - 48}, pos = 0;
			for (int k = 0; k < 4; k++) {
				sb_lm_forward_cached(ctx, m, c, tok + pos, cuts[k], &mk, ls + (size_t)pos * V, 1, NULL, &err);
				pos += cuts[k];
			}
			SB_CHECK(memcmp(ls, lc, (size_t)T * V * sizeof *ls) == 0,
				 "%s %s: prefill in chunks of 17, 1, 30, 32 equals one prefill bit for bit", name, masks[mi]);
			/* causality: another continuation after position 50 leaves rows < 50 unchanged */
			uint8_t tok2[T + 1];
			memcpy(tok2, tok, sizeof tok2);
			for (int t = 50; t < T; t++)
				tok2[t] = (uint8_t)('a' + (t * 7) % 26);
			for (int l = 0; l < L; l++)
				os[l] = (struct sb_lm_attn_obs){.sel = sels + (size_t)l * T * NH * T,
								.sel_n = selsn + (size_t)l * T * NH, .cap = T};
			sb_lm_cache_reset(c, 99);
			sb_lm_forward_cached(ctx, m, c, tok2, T, &mk, ls, 1, os, &err);
			int causal = memcmp(ls, lc, (size_t)50 * V * sizeof *ls) == 0;
			for (int l = 0; l < L; l++)
				if (m->cfg.pattern[l] == 'A')
					for (size_t at = (size_t)l * T * NH; at < (size_t)l * T * NH + 50 * (size_t)NH; at++)
						causal &= seln[at] == selsn[at] && !memcmp(self + at * T, sels + at * T, (size_t)seln[at] * 4);
			SB_CHECK(causal, "%s %s: a different future leaves earlier rows' logits and selections unchanged",
				 name, masks[mi]);
			/* the recipe against an independent recomputation from q and K */
			if (mk.kind == SB_LM_MASK_RECIPE) {
				int lA = -1;
				for (int l = 0; l < L && lA < 0; l++)
					if (m->cfg.pattern[l] == 'A')
						lA = l;
				int hd = m->cfg.head_dim, NKV = m->cfg.kv_heads;
				float *qc = malloc((size_t)T * NH * hd * sizeof *qc);
				sb_lm_cache_reset(c, 99);
				sb_lm_cache_capture_q(c, lA, qc);
				sb_lm_forward_cached(ctx, m, c, tok, T, &mk, NULL, 0, NULL, &err);
				sb_lm_cache_capture_q(c, -1, NULL);
				const float *K, *Vv;
				sb_lm_cache_kv(c, lA, &K, &Vv);
				int ok = 1, ties = 0;
				for (int t = 0; t < T; t++)
					for (int h = 0; h < NH; h++) {
						/* scores in double; expected set = sinks, window, top-k free */
						double sc[T];
						int want[T], nw = 0;
						for (int j = 0; j <= t; j++) {
							double s = 0;
							for (int e2 = 0; e2 < hd; e2++)
								s += (double)qc[((size_t)t * NH + h) * hd + e2] *
								     K[((size_t)j * NKV + h / (NH / NKV)) * hd + e2];
							sc[j] = s;
						}
						int isfree[T], nf = 0;
						for (int j = 0; j <= t; j++) {
							isfree[j] = !(j < mk.sinks || j > t - mk.window);
							nf += isfree[j];
							if (!isfree[j])
								want[nw++] = j;
						}
						int k = mk.topk < nf ? mk.topk : nf;
						for (int q = 0; q < k; q++) {
							int b = -1;
							for (int j = 0; j <= t; j++)
								if (isfree[j] && (b < 0 || sc[j] > sc[b]))
									b = j;
							/* a near tie with the runner-up is reported, not failed */
							isfree[b] = 0;
							want[nw++] = b;
						}
						if (k < nf) {
							double worst = INFINITY, best_out = -INFINITY;
							for (int q = nw - k; q < nw; q++)
								worst = sc[want[q]] < worst ? sc[want[q]] : worst;
							for (int j = 0; j <= t; j++)
								if (isfree[j])
									best_out = sc[j] > best_out ? sc[j] : best_out;
							if (worst - best_out < 1e-5)
								ties++;
						}
						size_t at = ((size_t)lA * T + t) * NH + h;
						if (seln[at] != nw)
							ok = 0;
						for (int q = 0; q < nw && ok; q++) {
							int found = 0;
							for (int i = 0; i < seln[at]; i++)
								found |= self[at * T + i] == want[q];
							if (!found && ties == 0)
								ok = 0;
						}
					}
				SB_CHECK(ok, "%s %s: selection = sinks + window + top-%d free keys by q.k recomputed in double (%d near ties)",
					 name, masks[mi], mk.topk, ties);
				free(qc);
			}
			free(of);
			free(os);
			free(self);
			free(seln);
			free(sels);
			free(selsn);
		}
		/* round trip through tensors */
		struct sb_tensors ts;
		sb_tensors_init(&ts);
		sb_lm_model_to_tensors(m, &ts, &err);
		struct sb_lm_model *m2 = NULL;
		sb_lm_model_new(be, &m->cfg, &m2, &err);
		int rt = sb_lm_model_from_tensors(m2, &ts, &err) == 0 && memcmp(m2->p, m->p, m->n_floats * 4) == 0;
		SB_CHECK(rt, "%s: parameters round-trip through named tensors (%s)", name, err.msg);
		/* an evaluation-only model from the same tensors: the cached path's copy alone,
		 * the same bits as the full model's (packed from the host buffer, not from p) */
		struct sb_lm_model *me = NULL;
		int ok = sb_lm_model_new_eval(be, &m->cfg, 0, &me, &err) == 0;
		uint8_t hello[5] = {'h', 'e', 'l', 'l', 'o'};
		int efail = ok && sb_lm_forward_cached(sb_be_main(be), me, c, hello, 1, NULL, NULL, 0, NULL, &err) ==
			    SB_EUSAGE;
		SB_CHECK(efail, "%s: an evaluation-only model refuses a forward pass before it is loaded", name);
		ok = ok && sb_lm_model_from_tensors(me, &ts, &err) == 0;
		sb_lm_model_prepare(m);
		size_t nt = m->n_floats + (m->cfg.tied ? (size_t)m->cfg.vocab * m->cfg.d : 0);
		SB_CHECK(ok && !me->p && same_tensors(me, me->pt, m, m->pt) &&
		             (!m->cfg.tied || !memcmp(me->wt.head, m->wt.head, (size_t)m->cfg.vocab * m->cfg.d * 4)),
			 "%s: an evaluation-only model holds no training copy and the same packed weights (%zu floats; %s)",
			 name, nt, ok ? "loaded" : err.msg);
		if (ok) {
			float lf[256], le[256];
			sb_lm_cache_reset(c, 0);
			int r1 = sb_lm_forward_cached(sb_be_main(be), m, c, hello, 5, NULL, lf, 0, NULL, &err);
			sb_lm_cache_reset(c, 0);
			int r2 = sb_lm_forward_cached(sb_be_main(be), me, c, hello, 5, NULL, le, 0, NULL, &err);
			SB_CHECK(!r1 && !r2 && memcmp(lf, le, sizeof lf) == 0,
				 "%s: the evaluation-only model's last logits equal the full model's bit for bit", name);
			struct sb_tensors t2;
			sb_tensors_init(&t2);
			struct sb_lm_trainer *tre = NULL;
			struct sb_lm_train_opts oe = {.B = 1, .T = 8, .tile = 1};
			SB_CHECK(sb_lm_model_to_tensors(me, &t2, &err) == SB_EUSAGE &&
					 sb_lm_model_init(me, 1, &err) == SB_EUSAGE &&
					 sb_lm_trainer_new(me, &oe, &tre, &err) == SB_EUSAGE && !tre,
				 "%s: an evaluation-only model refuses tensors, initialisation and training (%s)", name,
				 err.msg);
			sb_tensors_free(&t2);
			memset(&err, 0, sizeof err);
		}
		sb_lm_model_free(me);
		sb_tensors_free(&ts);
		sb_lm_model_free(m2);
		free(lt);
		free(lc);
		free(ls);
		sb_lm_cache_free(c);
		sb_lm_trainer_free(tr);
		sb_lm_model_free(m);
	}

	/* training: loss falls; the same bits for 1 and 2 threads */
	{
		enum { B = 4, TT = 48, STEPS = 30 };
		uint8_t batch[B * (TT + 1)];
		float *p1 = NULL;
		double first = 0, last = 0;
		for (int th = 1; th <= 2; th++) {
			struct sb_backend *b2;
			sb_backend_open("cpu", th, &b2, &err);
			const char *kv[] = {"pattern=CA", "d=32"};
			struct sb_lm_model *m = make_model(b2, kv, 2, 3);
			m->cfg.max_T = TT;
			struct sb_lm_train_opts o = {.B = B, .T = TT, .tile = 1, .b1 = 0.9f, .b2 = 0.99f, .eps = 1e-8f,
						     .wd = 0.0f, .clip = 1.0f};
			struct sb_lm_trainer *tr;
			sb_lm_trainer_new(m, &o, &tr, &err);
			for (int s = 0; s < STEPS; s++) {
				for (int b = 0; b < B; b++)
					text(batch + b * (TT + 1), TT + 1, (uint64_t)(s * B + b));
				double loss, gn;
				sb_lm_train_step(tr, batch, s + 1, 3e-3f, &loss, &gn, &err);
				if (s == 0)
					first = loss;
				last = loss;
			}
			if (th == 1) {
				p1 = malloc(m->n_floats * 4);
				memcpy(p1, m->p, m->n_floats * 4);
				SB_CHECK(last < 0.6 * first, "training on a repetitive text: loss %.4f -> %.4f in %d steps", first,
					 last, STEPS);
			} else {
				SB_CHECK(memcmp(p1, m->p, m->n_floats * 4) == 0,
					 "training gives the same parameters with 1 and 2 threads (bit for bit)");
			}
			sb_lm_trainer_free(tr);
			sb_lm_model_free(m);
			sb_backend_close(b2);
		}
		free(p1);
	}
	/* the short-context curriculum: a step at T/4 through the reshaped arena equals a step
	 * of a trainer built for T/4 (4x the sequences, 4x the tile), bit for bit */
	{
		enum { B = 2, TT = 64 };
		const char *kv[] = {"pattern=ACL", "d=32", "conv_gate=0", "pos=rope"};
		struct sb_lm_model *m1 = make_model(be, kv, 4, 5), *m2 = make_model(be, kv, 4, 5);
		m1->cfg.max_T = m2->cfg.max_T = TT;
		struct sb_lm_train_opts o1 = {.B = B, .T = TT, .tile = 1, .b1 = 0.9f, .b2 = 0.99f, .eps = 1e-8f, .clip = 1.0f};
		struct sb_lm_train_opts o2 = o1;
		o2.B = 4 * B;
		o2.T = TT / 4;
		o2.tile = 4;
		struct sb_lm_trainer *t1, *t2;
		sb_lm_trainer_new(m1, &o1, &t1, &err);
		sb_lm_trainer_new(m2, &o2, &t2, &err);
		uint8_t small[4 * B * (TT / 4 + 1)], big[B * (TT + 1)];
		text(small, (int)sizeof small, 3);
		text(big, (int)sizeof big, 4);
		double l1, l2, g1, g2;
		int rc = 0;
		rc |= sb_lm_train_step_len(t1, small, TT / 4, 1, 1e-3f, &l1, &g1, &err);
		rc |= sb_lm_train_step(t2, small, 1, 1e-3f, &l2, &g2, &err);
		SB_CHECK(!rc && l1 == l2 && g1 == g2 && memcmp(m1->p, m2->p, m1->n_floats * 4) == 0,
			 "a step at T/4 through the reshaped arena equals a trainer built for T/4 (loss %.9g vs %.9g)", l1, l2);
		rc = sb_lm_train_step_len(t1, big, TT, 2, 1e-3f, &l1, &g1, &err);
		SB_CHECK(!rc && isfinite(l1), "back to the full context after the curriculum (loss %.4f)", l1);
		SB_CHECK(sb_lm_train_step_len(t1, small, 24, 3, 1e-3f, &l1, &g1, &err) == SB_EUSAGE,
			 "a context that does not divide T is refused: %s", err.msg);
		sb_lm_trainer_free(t1);
		sb_lm_trainer_free(t2);
		sb_lm_model_free(m1);
		sb_lm_model_free(m2);
	}
	/* SB_ARENA_CHECK: red zones after every buffer of the trainer's arenas (laid out again
	 * for a shorter context) and of the decoding cache. With them the same bits; a float
	 * updated in place in a zone (as a kernel running past a buffer would) fails the next
	 * pass naming the buffer, and the pass succeeds again once it is restored. */
	{
		enum { B = 2, TT = 32 };
		char *saved = sb_test_env_set("SB_ARENA_CHECK", NULL);
		const char *kv[] = {"pattern=CALA", "mlp=swiglu"};
		struct sb_lm_model *mm[2];
		struct sb_lm_trainer *tt[2] = {NULL, NULL};
		struct sb_lm_cache *cc[2] = {NULL, NULL};
		struct sb_lm_train_opts o = {.B = B, .T = TT, .tile = 1, .b1 = 0.9f, .b2 = 0.99f, .eps = 1e-8f, .clip = 1.0f};
		for (int k = 0; k < 2; k++) {
			if (k)
				setenv("SB_ARENA_CHECK", "1", 1);
			else
				unsetenv("SB_ARENA_CHECK");
			mm[k] = make_model(be, kv, 2, 5);
			if (mm[k]) {
				sb_lm_trainer_new(mm[k], &o, &tt[k], &err);
				sb_lm_cache_new(mm[k], TT, &cc[k], &err);
			}
		}
		sb_test_env_restore("SB_ARENA_CHECK", saved);
		int nz = 0, nc = 0;
		while (tt[1] && sb_lm_trainer_zone(tt[1], 1, nz))
			nz++;
		while (cc[1] && sb_lm_cache_zone(cc[1], nc))
			nc++;
		SB_CHECK(tt[0] && tt[1] && cc[0] && cc[1] && !sb_lm_trainer_zone(tt[0], 0, 0) && !sb_lm_cache_zone(cc[0], 0) &&
		             nz > 40 && nc > 20,
		         "lm arena check: no red zones without SB_ARENA_CHECK; with it %d in a trainer worker's arena, %d "
		         "in the cache",
		         nz, nc);
		if (tt[0] && tt[1] && cc[0] && cc[1]) {
			uint8_t batch[4 * B * (TT / 4 + 1)];
			text(batch, (int)sizeof batch, 9);
			double l[2][3], g[2][3];
			float *lg[2];
			int rc = 0;
			for (int k = 0; k < 2; k++) {
				rc |= sb_lm_train_step(tt[k], batch, 1, 1e-3f, &l[k][0], &g[k][0], &err);
				rc |= sb_lm_train_step_len(tt[k], batch, TT / 4, 2, 1e-3f, &l[k][1], &g[k][1], &err);
				rc |= sb_lm_train_step_len(tt[k], batch, TT, 3, 1e-3f, &l[k][2], &g[k][2], &err);
				lg[k] = malloc((size_t)TT * mm[k]->cfg.vocab * sizeof(float));
				sb_lm_cache_reset(cc[k], 0);
				rc |= sb_lm_forward_cached(ctx, mm[k], cc[k], batch, TT, NULL, lg[k], 1, NULL, &err);
			}
			/* the table is laid out again (41664 floats, 42336 with the zones); the gradient
			 * norm is still the same bits (summed in the layout without the zones: the CPU's
			 * chunks of 32768 floats would otherwise end elsewhere, 1.5e-15 relative apart) */
			SB_CHECK(!rc && !memcmp(l[0], l[1], sizeof l[0]) && !memcmp(g[0], g[1], sizeof g[0]) &&
			             same_tensors(mm[0], mm[0]->p, mm[1], mm[1]->p) &&
			             !memcmp(lg[0], lg[1], (size_t)TT * mm[0]->cfg.vocab * sizeof(float)) &&
			             mm[1]->n_floats > mm[0]->n_floats,
			         "lm arena check: three steps (one at T/4 through the reshaped arena) and a cached pass give the "
			         "same losses, gradient norms (%.17g), parameters (tensor by tensor: the table is laid out "
			         "again, %zu floats for %zu) and logits with red zones as without (%s)",
			         g[1][0], mm[1]->n_floats, mm[0]->n_floats, rc ? err.msg : "ran");
			free(lg[0]);
			free(lg[1]);
			/* zones of worker 1's arena and of the cache: a float at the first aligned offset += 1 */
			int at[4] = {0, nz / 2, nz - 1, nc / 2};
			for (int j = 0; j < 4; j++) {
				char *z = j < 3 ? sb_lm_trainer_zone(tt[1], 1, at[j]) : sb_lm_cache_zone(cc[1], at[j]);
				z += (size_t)(-(uintptr_t)z & 3);
				float x, x0;
				memcpy(&x0, z, 4);
				volatile float one = 1.0f;
				x = x0 + one;
				memcpy(z, &x, 4);
				struct sb_err e1 = {0}, e2 = {0};
				double ls, gs;
				int r1, r2;
				if (j < 3) {
					r1 = sb_lm_train_step(tt[1], batch, 4, 1e-3f, &ls, &gs, &e1);
					memcpy(z, &x0, 4);
					r2 = sb_lm_train_step(tt[1], batch, 5, 1e-3f, &ls, &gs, &e2);
				} else {
					sb_lm_cache_reset(cc[1], 0);
					r1 = sb_lm_forward_cached(ctx, mm[1], cc[1], batch, TT, NULL, NULL, 0, NULL, &e1);
					memcpy(z, &x0, 4);
					sb_lm_cache_reset(cc[1], 0);
					r2 = sb_lm_forward_cached(ctx, mm[1], cc[1], batch, TT, NULL, NULL, 0, NULL, &e2);
				}
				const char *want = j < 3 ? "after a training pass: byte " : "after a cached forward pass: byte ";
				const char *who = j < 3 ? "(the trainer's worker 1)" : "(a decoding cache)";
				SB_CHECK(r1 == SB_EINTERNAL && strstr(e1.msg, want) && strstr(e1.msg, "-byte buffer of lib/lm_model.c:") &&
				             strstr(e1.msg, who) && r2 == 0,
				         "lm arena check: %s zone %d written: rc %d (%s); restored: rc %d", j < 3 ? "trainer" : "cache",
				         at[j], r1, e1.msg, r2);
			}
			/* the parameter table's zones (zero bytes): one after every tensor but a SwiGLU
			 * gate, in the parameters, their packed copy, the gradients, gradient slot 1 and
			 * both moments; a float written at the first, a middle and the last is reported
			 * naming the tensor and the buffer, and no longer once restored */
			int want_pz = 0, npz = 0;
			const char *pzname[64];
			for (int i = 0; i < mm[1]->n_params; i++)
				if (!strstr(mm[1]->params[i].name, "gate_proj") && want_pz < 64)
					pzname[want_pz++] = mm[1]->params[i].name;
			while (sb_lm_param_zone(tt[1], SB_LM_PZ_PARAMS, npz))
				npz++;
			SB_CHECK(npz == want_pz && !sb_lm_param_zone(tt[0], SB_LM_PZ_PARAMS, 0) &&
			             sb_lm_param_zone(tt[1], SB_LM_PZ_SLOT, 0) && !sb_lm_param_zone(tt[1], SB_LM_PZ_SLOT + 1, 0),
			         "lm arena check: %d zones in the parameter table (%d tensors, none after a SwiGLU gate), none "
			         "without SB_ARENA_CHECK; the trainer has gradient slot 1 and no slot 2",
			         npz, mm[1]->n_params);
			static const char *bname[] = {"the parameters", "the cached path's copy", "the gradients",
			                              "the first moments", "the second moments", "gradient slot 1"};
			int pat[3] = {0, npz / 2, npz - 1};
			for (int b = SB_LM_PZ_PARAMS; b <= SB_LM_PZ_SLOT && npz == want_pz; b++)
				for (int j = 0; j < 3; j++) {
					unsigned char *z = sb_lm_param_zone(tt[1], b, pat[j]), orig[4], bad[4];
					memcpy(orig, z, 4);
					sb_test_zone_hit(bad, orig, 1);
					memcpy(z, bad, 4);
					struct sb_err e1 = {0}, e2 = {0};
					int r1 = sb_lm_trainer_check(tt[1], "a test", &e1);
					memcpy(z, orig, 4);
					int r2 = sb_lm_trainer_check(tt[1], "a test", &e2);
					float x0;
					memcpy(&x0, orig, 4);
					char tail[160];
					snprintf(tail, sizeof tail, "-byte tensor %s (%s)", pzname[pat[j]], bname[b]);
					SB_CHECK(r1 == SB_EINTERNAL && strstr(e1.msg, "after a test: byte 2 past the end of the ") &&
					             strstr(e1.msg, tail) && x0 == 0.0f && r2 == 0,
					         "lm arena check: a float +1 in the zone after %s in %s is reported (rc %d: %s), and no "
					         "longer once restored (rc %d)",
					         pzname[pat[j]], bname[b], r1, e1.msg, r2);
				}
			/* through a training step: one in the first moments' zones fails the step's pass */
			if (npz == want_pz) {
				char *z = sb_lm_param_zone(tt[1], SB_LM_PZ_M, npz / 2);
				z[1] = 0x01;
				struct sb_err e1 = {0}, e2 = {0};
				double ls, gs;
				int r1 = sb_lm_train_step(tt[1], batch, 6, 1e-3f, &ls, &gs, &e1);
				z[1] = 0;
				int r2 = sb_lm_train_step(tt[1], batch, 7, 1e-3f, &ls, &gs, &e2);
				SB_CHECK(r1 == SB_EINTERNAL && strstr(e1.msg, "after a training pass: byte 1 past the end of ") &&
				             strstr(e1.msg, "(the first moments)") && r2 == 0,
				         "lm arena check: a byte in a first moment's zone fails the next step (rc %d: %s); restored, "
				         "the step runs (rc %d)",
				         r1, e1.msg, r2);
			}
		}
		for (int k = 0; k < 2; k++) {
			sb_lm_cache_free(cc[k]);
			sb_lm_trainer_free(tt[k]);
			sb_lm_model_free(mm[k]);
		}
	}
	test_rope_scalings(be);
	test_multipliers(be);
	test_gemma_parts(be);
	test_small_vocab(be);
	sb_backend_close(be);
	return sb_test_done();
}
