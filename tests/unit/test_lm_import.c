/* test_lm_import.c — pretrained Llama/Qwen decoders and the hybrid LFM2 (PROTOCOL C(b)):
 * sb_lm_import of the tiny Hugging Face directories in tests/fixtures/hf (gen.py), then the
 * cached path's logits against the logits transformers computed for the same ids (Qwen3:
 * gen.py's torch transcription, itself checked against transformers' Llama and Qwen2; LFM2:
 * transformers 4.57's own Lfm2ForCausalLM); prefill against token-by-token and chunked
 * decoding; on LFM2, masks acting on its attention layers only; the run directory and its
 * cell; refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../harness.h"
#include "backend.h"
#include "backend_cpu.h"
#include "hash.h"
#include "io.h"
#include "json.h"
#include "lm_import.h"
#include "lm_mask.h"
#include "lm_model.h"
#include "lm_train.h"
#include "tensor.h"
#include "tokenizer.h"

static char top[4096], tmp[64];

static void cp(const char *from, const char *to)
{
	char *buf;
	size_t n;
	struct sb_err e = {0};
	if (sb_read_file(from, &buf, &n, 0, &e) || sb_write_file_atomic(to, buf, n, &e))
		fprintf(stderr, "copy %s -> %s: %s\n", from, to, e.msg);
	else
		free(buf);
}

static void put(const char *path, const char *text)
{
	struct sb_err e = {0};
	if (sb_write_file_atomic(path, text, strlen(text), &e))
		fprintf(stderr, "%s\n", e.msg);
}

/* Tolerance of the logits: our products and norms run in float32 (FMA chains in a fixed
 * order), transformers' in float32 with its own order; RoPE angles are computed in double
 * here and in float32 there (at positions < 70 that differs by < 70 * 2^-24 rad). The
 * logits are O(3); the differences seen are 1.5e-6 to 3.6e-6 (printed), 7.9e-6 for the
 * five-layer LFM2 over 70 positions (transformers' own logits there are 6.5e-6 from gen.py's
 * float64 transcription); 2e-5 is 2.5x the largest. */
#define LOGIT_ATOL 2e-5

/* A hybrid (LFM2): under a mask, decoding equals the prefill bit for bit, the mask changes
 * the logits past its budget, and it acts on the attention layers alone (the conv layers'
 * observation entries stay untouched; every A layer keeps fewer pairs than causal). */
static void check_hybrid_masks(struct sb_lm_model *m, struct sb_lm_cache *c, const int32_t *ids, int T,
			       const float *dense, const char *name)
{
	const char *specs[] = {"recipe:s=2,w=4,k=4", "struct_random:s=2,w=4,k=4", "h2o:s=2,w=4,k=4"};
	int L = m->cfg.n_layer, V = m->cfg.vocab;
	struct sb_ctx *ctx = sb_be_main(m->be);
	float *full = malloc((size_t)T * V * sizeof *full), *step = malloc((size_t)T * V * sizeof *step);
	struct sb_lm_attn_obs *obs = calloc((size_t)L, sizeof *obs);
	struct sb_err err = {0};
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		struct sb_lm_mask mk;
		int rc = sb_lm_mask_parse(specs[i], &mk, &err);
		memset(obs, 0, (size_t)L * sizeof *obs);
		sb_lm_cache_reset(c, 7);
		if (!rc)
			rc = sb_lm_forward_cached_ids(ctx, m, c, ids, T, &mk, full, 1, obs, &err);
		sb_lm_cache_reset(c, 7);
		for (int t = 0; t < T && !rc; t++)
			rc = sb_lm_forward_cached_ids(ctx, m, c, ids + t, 1, &mk, step + (size_t)t * V, 0, NULL, &err);
		SB_CHECK(!rc && !memcmp(step, full, (size_t)T * V * sizeof *step),
			 "%s %s: token-by-token decoding gives the prefill's logits bit for bit (%s)", name, specs[i],
			 rc ? err.msg : "compared");
		/* rows 0..10 hold every causal key (2 + 4 + 4 = 10 >= t + 1): dense there, changed later */
		size_t head = (size_t)10 * V, all = (size_t)T * V;
		SB_CHECK(!rc && !memcmp(full, dense, head * sizeof *full) &&
				 memcmp(full + head, dense + head, (all - head) * sizeof *full),
			 "%s %s: the logits equal dense's within the budget and differ past it", name, specs[i]);
		int where = 1, nA = 0;
		for (int l = 0; l < L; l++) {
			if (m->cfg.pattern[l] == 'A') {
				nA++;
				where &= obs[l].causal > 0 && obs[l].kept > 0 && obs[l].kept < obs[l].causal;
			} else
				where &= obs[l].causal == 0 && obs[l].kept == 0 && obs[l].rows == 0;
		}
		SB_CHECK(!rc && where && nA > 0,
			 "%s %s: the mask acts on the %d attention layers of '%s' only (the other layers unobserved)", name,
			 specs[i], nA, m->cfg.pattern);
	}
	free(full);
	free(step);
	free(obs);
}

static void check_model(struct sb_backend *be, const char *name)
{
	char dir[4600], runs[128], run_dir[4096], path[4700];
	snprintf(dir, sizeof dir, "%s/tests/fixtures/hf/%s", top, name);
	snprintf(runs, sizeof runs, "%s/runs", tmp);
	struct sb_lm_import_opts o;
	memset(&o, 0, sizeof o);
	o.n_corpora = 1;
	snprintf(o.corpora[0], sizeof o.corpora[0], "text=%s/tests/fixtures/lm/shakespeare-head.txt", top);
	o.T = 64;
	struct sb_lm_cell cell;
	int existed = -1;
	struct sb_err err = {0};
	int rc = sb_lm_import(dir, runs, &o, &cell, run_dir, &existed, &err);
	if (!SB_CHECK(rc == 0 && existed == 0, "%s: imported (%s)", name, rc ? err.msg : run_dir))
		return;
	char want_id[64];
	snprintf(want_id, sizeof want_id, "lm.pretrained.L%d.d32.", cell.model.n_layer);
	SB_CHECK(!strncmp(cell.cell_id, want_id, strlen(want_id)), "%s: cell id %s", name, cell.cell_id);
	/* the run opens as an LM run: cell.json, checkpoint hash and cell id */
	struct sb_lm_cell c2;
	struct sb_lm_model *m = NULL;
	char sha[SB_SHA256_HEX];
	rc = sb_lm_run_open(be, run_dir, 1, &c2, &m, sha, &err);
	if (!SB_CHECK(rc == 0, "%s: sb_lm_run_open (%s)", name, rc ? err.msg : "ok"))
		return;
	SB_CHECK(!strcmp(c2.cell_id, cell.cell_id) && c2.T == 64 && c2.source[0] == '{',
		 "%s: cell.json round trip (%s, T %d)", name, c2.cell_id, c2.T);
	/* expected logits */
	snprintf(path, sizeof path, "%s/logits.safetensors", dir);
	struct sb_tensors ts;
	if (!SB_CHECK(!sb_st_read(path, &ts, &err), "%s: read %s", name, path)) {
		sb_lm_model_free(m);
		return;
	}
	const struct sb_tensor *ti = sb_tensors_find(&ts, "ids"), *tl = sb_tensors_find(&ts, "logits");
	int T = (int)ti->shape[0], V = m->cfg.vocab;
	const int32_t *ids = ti->data;
	const float *want = tl->data;
	struct sb_lm_cache *c;
	float *got = malloc((size_t)T * V * sizeof *got), *step = malloc((size_t)V * sizeof *step);
	sb_lm_cache_new(m, T, &c, &err);
	struct sb_ctx *ctx = sb_be_main(be);
	rc = sb_lm_forward_cached_ids(ctx, m, c, ids, T, NULL, got, 1, NULL, &err);
	SB_CHECK(rc == 0, "%s: prefill of %d ids", name, T);
	double worst = 0;
	int wt = 0, wv = 0;
	for (int t = 0; t < T; t++)
		for (int v = 0; v < V; v++) {
			double d = fabs((double)got[(size_t)t * V + v] - want[(size_t)t * V + v]);
			if (d > worst || isnan(d)) {
				worst = isnan(d) ? INFINITY : d;
				wt = t;
				wv = v;
			}
		}
	SB_CHECK(worst <= LOGIT_ATOL, "%s: logits of %d positions x %d vs the reference: max |diff| %.3g at (%d, %d) "
				      "(got %.6f, want %.6f; tolerance %.0e)",
		 name, T, V, worst, wt, wv, got[(size_t)wt * V + wv], want[(size_t)wt * V + wv], LOGIT_ATOL);
	/* a fixture with a tokenizer: the run's copy encodes text.txt into the ids HF's tokenizers gave
	 * (with its BOS when the post-processor has one) */
	snprintf(path, sizeof path, "%s/text.txt", dir);
	if (!access(path, F_OK)) {
		char *text, tp[4700];
		size_t n;
		struct sb_tok *tok = NULL;
		int32_t *mine = NULL;
		size_t nm = 0;
		snprintf(tp, sizeof tp, "%s/%s", run_dir, c2.tokenizer);
		rc = sb_read_file(path, &text, &n, 0, &err);
		if (!rc)
			rc = sb_tok_load(tp, &tok, &err);
		if (!rc)
			rc = sb_tok_encode_clean(tok, (const uint8_t *)text, n, 1, &mine, &nm, &err); /* BOS first, as
				* HF's add_special_tokens puts it (mistral_sp: <s>; the others have none) */
		int first = -1;
		for (size_t i = 0; !rc && i < nm && i < (size_t)T && first < 0; i++)
			if (mine[i] != ids[i])
				first = (int)i;
		SB_CHECK(!rc && nm == (size_t)T && first < 0 && !strcmp(c2.tokenizer, "tokenizer.json"),
			 "%s: the run's tokenizer encodes text.txt as HF did (%zu ids, want %d; first difference at %d; %s)",
			 name, nm, T, first, rc ? err.msg : "ok");
		free(mine);
		free(text);
		sb_tok_free(tok);
		/* the check the evaluation and SAS make (sb_lm_run_tokenizer): the copy against the
		 * SHA-256 cell.json recorded, and within the model's vocabulary (the import refuses a
		 * larger tokenizer; a run imported before that is refused here) */
		struct sb_tok *t1 = NULL, *t2 = NULL;
		struct sb_err e1 = {0}, e2 = {0};
		int r1 = sb_lm_run_tokenizer(run_dir, &c2, c2.model.vocab, &t1, &e1);
		int r2 = sb_lm_run_tokenizer(run_dir, &c2, 128, &t2, &e2);
		SB_CHECK(r1 == 0 && t1 && r2 == SB_EDATA && !t2 && strstr(e2.msg, "more than the model's vocabulary (128)"),
			 "%s: sb_lm_run_tokenizer loads the run's copy for a vocabulary of %d (%s) and refuses it for 128 "
			 "(%s)",
			 name, c2.model.vocab, r1 ? e1.msg : "ok", r2 ? e2.msg : "loaded");
		sb_tok_free(t1);
		sb_tok_free(t2);
	}
	/* token by token: the same bits */
	sb_lm_cache_reset(c, 0);
	int same = 1;
	for (int t = 0; t < T && same; t++) {
		rc = sb_lm_forward_cached_ids(ctx, m, c, ids + t, 1, NULL, step, 0, NULL, &err);
		same = !rc && !memcmp(step, got + (size_t)t * V, (size_t)V * sizeof *step);
	}
	SB_CHECK(same, "%s: %d single-token steps give the prefill's logits bit for bit", name, T);
	/* a prefill in chunks of 5 (a conv layer's history carried across chunks): the same bits */
	sb_lm_cache_reset(c, 0);
	float *chunk = malloc((size_t)T * V * sizeof *chunk);
	rc = 0;
	for (int t = 0; t < T && !rc; t += 5)
		rc = sb_lm_forward_cached_ids(ctx, m, c, ids + t, T - t < 5 ? T - t : 5, NULL, chunk + (size_t)t * V, 1,
					      NULL, &err);
	SB_CHECK(!rc && !memcmp(chunk, got, (size_t)T * V * sizeof *chunk),
		 "%s: a prefill in chunks of 5 gives the whole prefill's logits bit for bit", name);
	free(chunk);
	if (strchr(m->cfg.pattern, 'C') || strchr(m->cfg.pattern, 'M') || strchr(m->cfg.pattern, 'S') ||
	    strchr(m->cfg.pattern, 'V') || strchr(m->cfg.pattern, 'D') || m->cfg.parallel_ssm)
		check_hybrid_masks(m, c, ids, T, got, name);
	/* a BF16 checkpoint is evaluated from packed bfloat16 weights (half the memory), with the
	 * bits of the same model in float: open the checkpoint again as a float model */
	int want16 = !strcmp(name, "llama_bf16") || !strcmp(name, "qwen3") || !strcmp(name, "qwen2_tok") ||
		     !strcmp(name, "mistral") || !strcmp(name, "lfm2") || !strcmp(name, "granite_h") ||
		     !strcmp(name, "granite_moe") || !strcmp(name, "llama_linear") || !strcmp(name, "llama_yarn") ||
		     !strcmp(name, "qwen3_yarn") || !strcmp(name, "granite3") || !strcmp(name, "gemma3") ||
		     !strcmp(name, "gemma3_mm") || !strcmp(name, "gemma2") || !strcmp(name, "bamba") ||
		     !strcmp(name, "olmo2") || !strcmp(name, "smollm3") || !strcmp(name, "falcon_h1") ||
		     !strcmp(name, "falcon_h1_gate") || !strcmp(name, "qwen3_moe") || !strcmp(name, "jamba") ||
		     !strcmp(name, "qwen3_next") || !strcmp(name, "qwen2_moe") || !strcmp(name, "cohere2") ||
		     !strcmp(name, "granitemoe") || !strcmp(name, "ministral") || !strcmp(name, "phi3");
	SB_CHECK(m->bf16 == want16, "%s: Linear weights kept as %s (%s checkpoint)", name,
		 m->bf16 ? "bfloat16" : "float", want16 ? "a BF16" : "an F32/F16");
	if (m->bf16) {
		/* every Linear weight, the experts' stacks included (linear 3), takes half the
		 * floats of its numel in the model's memory: held as bfloat16 */
		int half = 1, experts = 0;
		for (int i = 0; i < m->n_params; i++) {
			const struct sb_lm_param *p = &m->params[i];
			if (p->linear != 1 && p->linear != 3)
				continue;
			size_t end = i + 1 < m->n_params ? m->params[i + 1].offset : m->n_floats;
			half = half && end - p->offset == (((p->numel + 1) / 2 + 15) & ~(size_t)15);
			experts += p->linear == 3;
		}
		int moe_layers = 0;
		for (int l = 0; l < m->cfg.n_layer; l++)
			moe_layers += sb_lm_layer_moe(&m->cfg, l);
		SB_CHECK(half && experts == 2 * moe_layers,
			 "%s: the Linear weights (%d expert stacks among them) held as bfloat16, 2 bytes each", name,
			 experts);
		struct sb_tensors ck;
		struct sb_lm_model *mf = NULL;
		float *gf = malloc((size_t)T * V * sizeof *gf);
		snprintf(path, sizeof path, "%s/model.safetensors", run_dir);
		rc = sb_st_read(path, &ck, &err);
		if (!rc)
			rc = sb_lm_model_new_eval(be, &c2.model, 0, &mf, &err);
		if (!rc)
			rc = sb_lm_model_from_tensors(mf, &ck, &err);
		if (!rc) {
			sb_lm_cache_reset(c, 0);
			rc = sb_lm_forward_cached_ids(ctx, mf, c, ids, T, NULL, gf, 1, NULL, &err);
		}
		SB_CHECK(!rc && !mf->bf16 && !memcmp(gf, got, (size_t)T * V * sizeof *gf),
			 "%s: the bfloat16 model's logits equal the float model's bit for bit (%s)", name,
			 rc ? err.msg : "compared");
		if (!rc)
			sb_tensors_free(&ck);
		sb_lm_model_free(mf);
		free(gf);
	}
	/* the training path (a scaled SAS selector trains through it) on the same weights, where
	 * the layout has it (not Mamba2 layers or experts): the same logits as the reference, to
	 * the same tolerance */
	int eval_only = strchr(m->cfg.pattern, 'M') || strchr(m->cfg.pattern, 'V') || strchr(m->cfg.pattern, 'D') ||
			m->cfg.moe_experts || m->cfg.parallel_ssm || m->cfg.attn_gate || m->cfg.parallel_mlp;
	if (!eval_only) {
		struct sb_lm_cell c3;
		struct sb_lm_model *mt = NULL;
		struct sb_lm_trainer *tr = NULL;
		float *lt = malloc((size_t)T * V * sizeof *lt);
		uint8_t *tok = malloc((size_t)T + 1);
		int fits = V <= 256; /* ids within bytes: the bytes' entry point too */
		for (int t = 0; t < T; t++)
			tok[t] = (uint8_t)ids[t];
		tok[T] = 0;
		struct sb_lm_train_opts o = {.B = 1, .T = T, .tile = 1};
		rc = sb_lm_run_open(be, run_dir, 0, &c3, &mt, sha, &err);
		if (!rc)
			rc = sb_lm_trainer_new(mt, &o, &tr, &err);
		if (!rc) /* the ids (a tokenizer's, up to 831 here) */
			rc = sb_lm_train_logits_ids(tr, ids, lt, &err);
		double tw = 0;
		for (size_t i = 0; !rc && i < (size_t)T * V; i++)
			tw = fmax(tw, fabs((double)lt[i] - want[i]));
		SB_CHECK(!rc && tw <= LOGIT_ATOL,
			 "%s: the training path's logits vs the reference: max |diff| %.3g (tolerance %.0e; %s)", name, tw,
			 LOGIT_ATOL, rc ? err.msg : "trained model");
		if (fits && !rc) {
			float *lb = malloc((size_t)T * V * sizeof *lb);
			rc = sb_lm_train_logits(tr, tok, lb, &err);
			SB_CHECK(!rc && !memcmp(lb, lt, (size_t)T * V * sizeof *lb),
				 "%s: the training path on the same ids as bytes: the same logits bit for bit (%s)", name,
				 rc ? err.msg : "compared");
			free(lb);
		}
		sb_lm_trainer_free(tr);
		sb_lm_model_free(mt);
		free(lt);
		free(tok);
	}
	/* an id outside the vocabulary */
	sb_lm_cache_reset(c, 0);
	int32_t bad[2] = {1, V};
	rc = sb_lm_forward_cached_ids(ctx, m, c, bad, 2, NULL, NULL, 0, NULL, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "outside the vocabulary"), "%s: id %d refused (%s)", name, V,
		 err.msg);
	/* importing again keeps the run */
	char rd2[4096];
	rc = sb_lm_import(dir, runs, &o, &cell, rd2, &existed, &err);
	SB_CHECK(rc == 0 && existed == 1 && !strcmp(rd2, run_dir), "%s: a second import keeps the run (existed %d)",
		 name, existed);
	snprintf(path, sizeof path, "%s.partial", run_dir);
	SB_CHECK(access(path, F_OK) != 0, "%s: no .partial directory left", name);
	free(got);
	free(step);
	sb_lm_cache_free(c);
	sb_tensors_free(&ts);
	sb_lm_model_free(m);
}

/* A copy of a fixture with config.json replaced (or a file removed/added) must be
 * refused with SB_EDATA (or SB_EIO) naming `want`, leaving nothing behind. */
static void refuse(struct sb_backend *be, const char *name, const char *what, const char *config, const char *extra,
		   int want_rc, const char *want)
{
	char src[4600], dir[256], path[4700], runs[256];
	snprintf(src, sizeof src, "%s/tests/fixtures/hf/%s", top, name);
	snprintf(dir, sizeof dir, "%s/bad", tmp);
	snprintf(runs, sizeof runs, "%s/badruns", tmp);
	mkdir(dir, 0777);
	snprintf(path, sizeof path, "%s/model.safetensors", src);
	char to[4700];
	snprintf(to, sizeof to, "%s/model.safetensors", dir);
	if (extra && !strcmp(extra, "no-weights"))
		unlink(to);
	else
		cp(path, to);
	snprintf(to, sizeof to, "%s/config.json", dir);
	put(to, config);
	/* the fixture's tokenizer (a model of more than 256 ids is refused without one) */
	snprintf(path, sizeof path, "%s/tokenizer.json", src);
	snprintf(to, sizeof to, "%s/tokenizer.json", dir);
	unlink(to);
	if (access(path, F_OK) == 0)
		cp(path, to);
	if (extra && !strcmp(extra, "module-tree")) {
		/* Gemma3ForConditionalGeneration's tensors as its 4.52+ module tree names them:
		 * model.language_model.X for language_model.model.X */
		struct sb_tensors ts, out;
		struct sb_err e = {0};
		snprintf(path, sizeof path, "%s/model.safetensors", src);
		sb_st_read(path, &ts, &e);
		sb_tensors_init(&out);
		for (size_t i = 0; i < ts.n; i++) {
			char nm[300];
			const struct sb_tensor *t = &ts.t[i];
			if (!strncmp(t->name, "language_model.model.", 21))
				snprintf(nm, sizeof nm, "model.language_model.%s", t->name + 21);
			else
				snprintf(nm, sizeof nm, "%s", t->name);
			sb_tensors_add(&out, nm, t->dtype, t->ndim, t->shape, t->data, 1, &e);
		}
		snprintf(to, sizeof to, "%s/model.safetensors", dir);
		sb_st_write(to, &out, &e);
		sb_tensors_free(&out);
		sb_tensors_free(&ts);
	}
	if (extra && !strcmp(extra, "extra-tensor")) {
		/* a checkpoint with one tensor more */
		struct sb_tensors ts;
		struct sb_err e = {0};
		snprintf(path, sizeof path, "%s/model.safetensors", src);
		sb_st_read(path, &ts, &e);
		float z[4] = {0};
		int64_t shp[1] = {4};
		sb_tensors_add(&ts, "model.layers.0.mlp.gate_proj.scale", SB_F32, 1, shp, z, 0, &e);
		snprintf(to, sizeof to, "%s/model.safetensors", dir);
		sb_st_write(to, &ts, &e);
		sb_tensors_free(&ts);
	}
	struct sb_lm_import_opts o;
	memset(&o, 0, sizeof o);
	o.n_corpora = 1;
	snprintf(o.corpora[0], sizeof o.corpora[0], "text=%s/tests/fixtures/lm/shakespeare-head.txt", top);
	struct sb_lm_cell cell;
	char run_dir[4096] = "";
	int existed = 0;
	struct sb_err err = {0};
	int rc = sb_lm_import(dir, runs, &o, &cell, run_dir, &existed, &err);
	SB_CHECK(rc == want_rc && strstr(err.msg, want), "refused: %s (rc %d, want %d; '%s')", what, rc, want_rc,
		 err.msg);
	struct stat st;
	int left = 0;
	if (run_dir[0])
		left = stat(run_dir, &st) == 0;
	if (want_rc)
		SB_CHECK(!left, "refused: %s leaves no run directory", what);
	else
		SB_CHECK(left, "%s: the run directory is there", what);
}

static char *cfg_with(const char *base, const char *from, const char *to)
{
	static char out[8192];
	const char *p = strstr(base, from);
	if (!p) {
		snprintf(out, sizeof out, "%s", base);
		return out;
	}
	snprintf(out, sizeof out, "%.*s%s%s", (int)(p - base), base, to, p + strlen(from));
	return out;
}

/* two edits: cfg_with's result edited again (its own buffer, so the second reads a copy) */
static char *cfg_with2(const char *base, const char *from1, const char *to1, const char *from2, const char *to2)
{
	char *once = strdup(cfg_with(base, from1, to1));
	char *out = cfg_with(once ? once : base, from2, to2);
	free(once);
	return out;
}

/* Which weight files are read when a directory holds more than one set (transformers 4.57.1,
 * modeling_utils: model.safetensors before model.safetensors.index.json), and a tensor that
 * two shards both hold (transformers loads every shard's tensors in sorted file order, so the
 * later copy would silently win over the one read first): refused. Built from llama_bias's two
 * shards in a directory of their own. */
static void check_weight_files(void)
{
	char src[4600], dir[256], runs[256], from[4700], to[4700], run_dir[4096];
	snprintf(src, sizeof src, "%s/tests/fixtures/hf/llama_bias", top);
	const char *names[4] = {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
				"model-00002-of-00002.safetensors"};
	struct sb_lm_import_opts o;
	memset(&o, 0, sizeof o);
	o.n_corpora = 1;
	snprintf(o.corpora[0], sizeof o.corpora[0], "text=%s/tests/fixtures/lm/shakespeare-head.txt", top);
	o.T = 64;
	struct sb_lm_cell cell;
	struct sb_err err = {0};
	int existed = 0, rc;
	for (int pass = 0; pass < 2; pass++) {
		snprintf(dir, sizeof dir, "%s/wf%d", tmp, pass);
		snprintf(runs, sizeof runs, "%s/wfruns%d", tmp, pass);
		mkdir(dir, 0777);
		for (int i = 0; i < 4; i++) {
			snprintf(from, sizeof from, "%s/%s", src, names[i]);
			snprintf(to, sizeof to, "%s/%s", dir, names[i]);
			cp(from, to);
		}
		/* both shards' tensors as one file */
		struct sb_tensors a, b;
		struct sb_err e = {0};
		snprintf(from, sizeof from, "%s/%s", src, names[2]);
		sb_st_read(from, &a, &e);
		snprintf(from, sizeof from, "%s/%s", src, names[3]);
		sb_st_read(from, &b, &e);
		if (pass == 0) { /* model.safetensors beside the index: the one transformers reads */
			for (size_t j = 0; j < b.n; j++)
				sb_tensors_add(&a, b.t[j].name, b.t[j].dtype, b.t[j].ndim, b.t[j].shape, b.t[j].data, 0, &e);
			snprintf(to, sizeof to, "%s/model.safetensors", dir);
		} else { /* shard 1 also holds shard 2's model.norm.weight */
			const struct sb_tensor *t = sb_tensors_find(&b, "model.norm.weight");
			if (t)
				sb_tensors_add(&a, t->name, t->dtype, t->ndim, t->shape, t->data, 0, &e);
			snprintf(to, sizeof to, "%s/%s", dir, names[2]);
		}
		rc = sb_st_write(to, &a, &e);
		sb_tensors_free(&a);
		sb_tensors_free(&b);
		if (!SB_CHECK(rc == 0, "weight files: wrote %s (%s)", to, rc ? e.msg : "ok"))
			return;
		memset(&err, 0, sizeof err);
		run_dir[0] = 0;
		rc = sb_lm_import(dir, runs, &o, &cell, run_dir, &existed, &err);
		if (pass == 0)
			SB_CHECK(rc == 0 && strstr(cell.source, "\"model.safetensors\"") && !strstr(cell.source, "model-0000"),
				 "weight files: model.safetensors beside an index is read, not the shards, as transformers "
				 "does (rc %d: %s; source %.120s)",
				 rc, rc ? err.msg : "ok", rc ? "" : cell.source);
		else
			SB_CHECK(rc == SB_EDATA && strstr(err.msg, "'model.norm.weight'") &&
					 strstr(err.msg, "model-00001-of-00002.safetensors") &&
					 strstr(err.msg, "model-00002-of-00002.safetensors"),
				 "weight files: a tensor in two shards is refused, naming both (rc %d: %s)", rc, err.msg);
	}
}

/* Granite 4.0 hybrids: the fields read, and what is refused (one change at a time) */
static void check_granite_refusals(struct sb_backend *be)
{
	char path[4700], *base, *rope;
	size_t n;
	struct sb_err err = {0};
	snprintf(path, sizeof path, "%s/tests/fixtures/hf/granite_h/config.json", top);
	if (sb_read_file(path, &base, &n, 0, &err)) {
		SB_CHECK(0, "%s", err.msg);
		return;
	}
	snprintf(path, sizeof path, "%s/tests/fixtures/hf/granite_h_rope/config.json", top);
	if (sb_read_file(path, &rope, &n, 0, &err)) {
		SB_CHECK(0, "%s", err.msg);
		free(base);
		return;
	}
	/* the layout read */
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	int rc = sb_lm_hf_config(rope, strlen(rope), "granite_h_rope", &c, &info, &err);
	SB_CHECK(!rc && info.granite && !strcmp(c.pattern, "AMMA") && c.ssm_heads == 4 && c.ssm_head_dim == 16 &&
			 c.ssm_state == 16 && c.ssm_groups == 2 && c.conv_k == 3 && c.ssm_conv_bias == 1 &&
			 c.ssm_proj_bias == 1 && c.ffn == 48 && c.pos == SB_LM_POS_ROPE && c.emb_mult == 12.0f &&
			 c.resid_mult == 0.22f && c.attn_scale == 0.25f && c.logit_div == 4.0f && !c.tied &&
			 c.head_dim == 8,
		 "granite_h_rope: read as %s, ssm %d x %d, state %d, groups %d, conv %d, ffn %d, multipliers %g %g %g %g "
		 "(%s)", c.pattern, c.ssm_heads, c.ssm_head_dim, c.ssm_state, c.ssm_groups, c.conv_k, c.ffn, c.emb_mult,
		 c.resid_mult, c.attn_scale, c.logit_div, rc ? err.msg : "ok");
	refuse(be, "granite_h", "granite_h: unchanged copy imports", base, NULL, 0, "");
	/* granite_h says num_experts_per_tok 0: experts without any picked is refused */
	refuse(be, "granite_h", "granite_h: num_local_experts 8 with num_experts_per_tok 0",
	       cfg_with(base, "\"num_local_experts\": 0", "\"num_local_experts\": 8"), NULL, SB_EDATA,
	       "'num_experts_per_tok' must be an integer in [1, 8]");
	refuse(be, "granite_h", "granite_h: num_local_experts absent (GraniteMoeHybridConfig's default 8)",
	       cfg_with(base, "\"num_local_experts\": 0,", ""), NULL, SB_EDATA,
	       "'num_experts_per_tok' must be an integer in [1, 8]");
	refuse(be, "granite_h", "granite_h: a layer kind it does not have",
	       cfg_with(base, "\"mamba\",\n    \"attention\"", "\"mamba\",\n    \"conv\""), NULL, SB_EDATA,
	       "layer_types[2] 'conv' is not a layer kind read here");
	refuse(be, "granite_h", "granite_h: position_embedding_type alibi",
	       cfg_with(base, "\"position_embedding_type\": \"nope\"", "\"position_embedding_type\": \"alibi\""), NULL,
	       SB_EDATA, "'position_embedding_type' 'alibi'");
	refuse(be, "granite_h", "granite_h: position_embedding_type null (no positions) imports",
	       cfg_with(base, "\"position_embedding_type\": \"nope\"", "\"position_embedding_type\": null"), NULL, 0, "");
	refuse(be, "granite_h", "granite_h: mamba_d_head that does not fit",
	       cfg_with(base, "\"mamba_d_head\": 16", "\"mamba_d_head\": 8"), NULL, SB_EDATA,
	       "'mamba_d_head' 8 times mamba_n_heads 4 must equal");
	refuse(be, "granite_h", "granite_h: mamba_d_head auto imports",
	       cfg_with(base, "\"mamba_d_head\": 16", "\"mamba_d_head\": \"auto\""), NULL, 0, "");
	refuse(be, "granite_h", "granite_h: mamba_n_groups not dividing mamba_n_heads",
	       cfg_with(base, "\"mamba_n_groups\": 1", "\"mamba_n_groups\": 3"), NULL, SB_EDATA,
	       "'mamba_n_groups' 3 does not divide");
	refuse(be, "granite_h", "granite_h: another mamba_d_state than the weights'",
	       cfg_with(base, "\"mamba_d_state\": 16", "\"mamba_d_state\": 8"), NULL, SB_EDATA,
	       "'model.layers.0.mamba.in_proj.weight' has another shape");
	refuse(be, "granite_h", "granite_h: mamba_proj_bias without the biases",
	       cfg_with(base, "\"mamba_proj_bias\": false", "\"mamba_proj_bias\": true"), NULL, SB_EDATA,
	       "lacks tensor 'model.layers.0.mamba.in_proj.bias'");
	refuse(be, "granite_h", "granite_h: another shared_intermediate_size than the weights'",
	       cfg_with(base, "\"shared_intermediate_size\": 48", "\"shared_intermediate_size\": 40"), NULL, SB_EDATA,
	       "shared_mlp.input_linear.weight' has shape [96, 32], not [2 shared_intermediate_size (80)");
	refuse(be, "granite_h", "granite_h: a negative residual_multiplier",
	       cfg_with(base, "\"residual_multiplier\": 0.22", "\"residual_multiplier\": -0.22"), NULL, SB_EDATA,
	       "'residual_multiplier' must be a positive number");
	refuse(be, "granite_h", "granite_h: a tensor the layout does not know", base, "extra-tensor", SB_EDATA,
	       "'model.layers.0.mlp.gate_proj.scale' is not part of the granitemoehybrid layout");
	refuse(be, "granite_h_rope", "granite_h_rope: unchanged copy imports", rope, NULL, 0, "");
	refuse(be, "granite_h_rope", "granite_h_rope: a yarn rope_scaling",
	       cfg_with(rope, "\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}"),
	       NULL, SB_EDATA, "rope_scaling type 'yarn' is not implemented for granitemoehybrid");
	refuse(be, "granite_h_rope", "granite_h_rope: rope_parameters agreeing with rope_theta imports",
	       cfg_with(rope, "\"rope_scaling\": null",
			"\"rope_scaling\": null, \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}"),
	       NULL, 0, "");
	refuse(be, "granite_h_rope", "granite_h_rope: rope_parameters.rope_theta disagreeing with rope_theta",
	       cfg_with(rope, "\"rope_scaling\": null",
			"\"rope_scaling\": null, \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}"),
	       NULL, SB_EDATA, "rope_parameters.rope_theta 1000000 disagrees with rope_theta 10000");
	refuse(be, "granite_h_rope", "granite_h_rope: a yarn rope_parameters",
	       cfg_with(rope, "\"rope_scaling\": null", "\"rope_scaling\": null, \"rope_parameters\": {\"rope_type\": \"yarn\"}"),
	       NULL, SB_EDATA, "rope_parameters type 'yarn' is not implemented for granitemoehybrid");
	refuse(be, "granite_h_rope", "granite_h_rope: tie_word_embeddings true imports (lm_head.weight skipped: transformers ties it)",
	       cfg_with(rope, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true"), NULL, 0, "");
	free(base);
	free(rope);
	/* the mixture of experts */
	snprintf(path, sizeof path, "%s/tests/fixtures/hf/granite_moe/config.json", top);
	if (sb_read_file(path, &base, &n, 0, &err)) {
		SB_CHECK(0, "%s", err.msg);
		return;
	}
	rc = sb_lm_hf_config(base, strlen(base), "granite_moe", &c, &info, &err);
	SB_CHECK(!rc && c.moe_experts == 4 && c.moe_topk == 2 && c.moe_ffn == 24 && c.ffn == 48 &&
			 !strcmp(c.pattern, "MAMA"),
		 "granite_moe: read as %s, %d experts of %d, top %d, shared ffn %d (%s)", c.pattern, c.moe_experts,
		 c.moe_ffn, c.moe_topk, c.ffn, rc ? err.msg : "ok");
	refuse(be, "granite_moe", "granite_moe: another number of experts than the weights'",
	       cfg_with(base, "\"num_local_experts\": 4", "\"num_local_experts\": 3"), NULL, SB_EDATA,
	       "'model.layers.0.block_sparse_moe.router.layer.weight' has another shape");
	refuse(be, "granite_moe", "granite_moe: another expert width (intermediate_size) than the weights'",
	       cfg_with(base, "\"intermediate_size\": 24", "\"intermediate_size\": 16"), NULL, SB_EDATA,
	       "'model.layers.0.block_sparse_moe.input_linear.weight' has another shape");
	refuse(be, "granite_moe", "granite_moe: num_experts_per_tok above num_local_experts",
	       cfg_with(base, "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 5"), NULL, SB_EDATA,
	       "'num_experts_per_tok' must be an integer in [1, 4]");
	refuse(be, "granite_moe", "granite_moe: dense config over an MoE checkpoint",
	       cfg_with(base, "\"num_local_experts\": 4", "\"num_local_experts\": 0"), NULL, SB_EDATA,
	       "tensor 'model.layers.0.block_sparse_moe");
	free(base);
	/* Granite 3.x (model_type granite): Llama's layout with the four multipliers */
	snprintf(path, sizeof path, "%s/tests/fixtures/hf/granite3/config.json", top);
	if (sb_read_file(path, &base, &n, 0, &err)) {
		SB_CHECK(0, "%s", err.msg);
		return;
	}
	rc = sb_lm_hf_config(base, strlen(base), "granite3", &c, &info, &err);
	SB_CHECK(!rc && !info.granite && !strcmp(c.pattern, "AA") && c.emb_mult == 12.0f && c.resid_mult == 0.22f &&
			 c.attn_scale == 0.125f && c.logit_div == 8.0f && c.tied && c.head_dim == 8 && c.kv_heads == 2 &&
			 c.rope_theta == 1e7f && c.pos == SB_LM_POS_ROPE && c.swiglu && c.rmsnorm,
		 "granite3: read as %s, multipliers %g %g %g %g, head_dim %d, kv_heads %d, theta %g (%s)", c.pattern,
		 c.emb_mult, c.resid_mult, c.attn_scale, c.logit_div, c.head_dim, c.kv_heads, (double)c.rope_theta,
		 rc ? err.msg : "ok");
	/* GraniteConfig's defaults: each multiplier 1, the attention's too (not 1/sqrt(head_dim)) */
	char *nomult = cfg_with(base, "\"attention_multiplier\": 0.125,", "");
	rc = sb_lm_hf_config(nomult, strlen(nomult), "granite3", &c, &info, &err);
	SB_CHECK(!rc && c.attn_scale == 1.0f, "granite3: attention_multiplier absent reads as 1 (got %g; %s)",
		 c.attn_scale, rc ? err.msg : "ok");
	/* changed one field at a time: refused (exit 3) naming it, or imported */
	static const struct {
		const char *what, *from, *to, *want;
		int rc;
	} g3[] = {
		{"attention_multiplier 0 (it would read as 1/sqrt(head_dim))", "\"attention_multiplier\": 0.125",
		 "\"attention_multiplier\": 0", "'attention_multiplier' must be a positive number", SB_EDATA},
		{"logits_scaling null reads as 1 and imports", "\"logits_scaling\": 8.0", "\"logits_scaling\": null", "", 0},
		{"a head_dim other than hidden / heads (releases read it differently)", "\"hidden_size\": 32,",
		 "\"hidden_size\": 32, \"head_dim\": 16,", "granite with head_dim 16, not hidden_size / num_attention_heads (8)",
		 SB_EDATA},
		{"head_dim equal to hidden / heads imports", "\"hidden_size\": 32,", "\"hidden_size\": 32, \"head_dim\": 8,", "",
		 0},
		{"a dense Granite 3 checkpoint declared granitemoe: its experts are not there", "\"model_type\": \"granite\"",
		 "\"model_type\": \"granitemoe\"", "lacks tensor 'model.layers.0.block_sparse_moe.router.layer.weight'",
		 SB_EDATA},
	};
	for (size_t i = 0; i < sizeof g3 / sizeof g3[0]; i++) {
		char what[160];
		snprintf(what, sizeof what, "granite3: %s", g3[i].what);
		refuse(be, "granite3", what, cfg_with(base, g3[i].from, g3[i].to), NULL, g3[i].rc, g3[i].want);
	}
	free(base);
}

/* config.json of tests/fixtures/hf/NAME as text (malloc'd; NULL, a failed check, when it cannot
 * be read) */
static char *fixture_json(const char *name)
{
	char path[4700], *buf = NULL;
	size_t n;
	struct sb_err err = {0};
	snprintf(path, sizeof path, "%s/tests/fixtures/hf/%s/config.json", top, name);
	if (sb_read_file(path, &buf, &n, 0, &err)) {
		SB_CHECK(0, "%s", err.msg);
		return NULL;
	}
	return buf;
}

/* config.json of tests/fixtures/hf/NAME as sb_lm_hf_config reads it */
static int fixture_config(const char *name, struct sb_lm_cfg *c, struct sb_lm_hf_info *info, struct sb_err *err)
{
	char path[4700], *buf;
	size_t n;
	snprintf(path, sizeof path, "%s/tests/fixtures/hf/%s/config.json", top, name);
	int rc = sb_read_file(path, &buf, &n, 0, err);
	if (!rc) {
		rc = sb_lm_hf_config(buf, n, path, c, info, err);
		free(buf);
	}
	return rc;
}

/* LFM2: the layout read from each fixture's config */
/* Gemma 3: the configuration as read, and what is refused */
static void check_gemma3(struct sb_backend *be)
{
	static const struct {
		const char *name, *pattern;
		int tied, scaling;
		float eps;
	} want[] = {{"gemma3", "SSASA", 1, 2, 1e-6f}, {"gemma3_pattern", "SSASSA", 0, 0, 1e-5f}};
	char path[4700], *base = NULL;
	size_t n;
	struct sb_err err = {0};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		struct sb_lm_cfg c;
		struct sb_lm_hf_info info;
		int rc = fixture_config(want[i].name, &c, &info, &err);
		SB_CHECK(!rc && info.gemma == 3 && !strcmp(c.pattern, want[i].pattern) && c.window == 8 && c.ffn == 48 &&
				 c.heads == 4 && c.kv_heads == 2 && c.head_dim == 16 && c.qk_norm == 1 && c.sandwich == 1 &&
				 c.swiglu == 2 && c.rmsnorm && c.tied == want[i].tied && c.rope_theta == 1e6f &&
				 c.rope_local_theta == 1e4f && c.rope_scaling == want[i].scaling &&
				 c.emb_mult == (float)sqrt(32.0) && c.attn_scale == (float)(1.0 / sqrt(24.0)) &&
				 c.norm_eps == want[i].eps && c.max_T == 256 && info.sliding_window == 0,
			 "%s: config read as pattern %s (want %s), window %d, sandwich %d, mlp %d, scaling %d, emb_mult %g, "
			 "attn_scale %g (%s)",
			 want[i].name, rc ? "?" : c.pattern, want[i].pattern, c.window, c.sandwich, c.swiglu, c.rope_scaling,
			 (double)c.emb_mult, (double)c.attn_scale, rc ? err.msg : "read");
	}
	/* the run's checkpoint holds the norms' multipliers 1 + w (float32), the rest as stored */
	{
		struct sb_tensors src, run;
		char rp[4700];
		snprintf(path, sizeof path, "%s/tests/fixtures/hf/gemma3/model.safetensors", top);
		int rc = sb_st_read(path, &src, &err), ok = 0, nn = 0;
		const struct sb_tensor *a = NULL, *b = NULL;
		if (!rc) { /* the run check_model("gemma3") imported: importing again names it */
			char dir[4600], runs[128], rd[4096];
			struct sb_lm_import_opts o;
			struct sb_lm_cell cell;
			int existed = -1;
			memset(&o, 0, sizeof o);
			o.n_corpora = 1;
			snprintf(o.corpora[0], sizeof o.corpora[0], "text=%s/tests/fixtures/lm/shakespeare-head.txt", top);
			o.T = 64;
			snprintf(dir, sizeof dir, "%s/tests/fixtures/hf/gemma3", top);
			snprintf(runs, sizeof runs, "%s/runs", tmp);
			rc = sb_lm_import(dir, runs, &o, &cell, rd, &existed, &err);
			snprintf(rp, sizeof rp, "%s/model.safetensors", rd);
			if (!rc)
				rc = sb_st_read(rp, &run, &err);
			if (rc)
				sb_tensors_free(&src);
		}
		if (!rc) {
			a = sb_tensors_find(&src, "model.layers.2.pre_feedforward_layernorm.weight");
			b = sb_tensors_find(&run, "model.layers.2.post_attention_layernorm.weight");
			ok = a && b && a->dtype == SB_BF16 && b->dtype == SB_F32 && a->shape[0] == 32 && b->shape[0] == 32;
			for (int j = 0; ok && j < 32; j++) {
				float w = sb_bf16_to_f32(((const uint16_t *)a->data)[j]), got;
				memcpy(&got, (const char *)b->data + 4 * j, 4);
				ok = got == 1.0f + w;
				nn += ok;
			}
			const struct sb_tensor *q = sb_tensors_find(&src, "model.layers.0.self_attn.q_proj.weight"),
					       *q2 = sb_tensors_find(&run, "model.layers.0.self_attn.q_proj.weight");
			ok = ok && q && q2 && q2->dtype == SB_BF16 && q->nbytes == q2->nbytes &&
			     !memcmp(q->data, q2->data, q->nbytes);
			sb_tensors_free(&src);
			sb_tensors_free(&run);
		}
		SB_CHECK(!rc && ok,
			 "gemma3: the run holds pre_feedforward_layernorm as our post_attention_layernorm, 1 + w in float32 "
			 "(%d of 32 equal), and q_proj's BF16 bytes unchanged (%s)",
			 nn, rc ? err.msg : "compared");
	}
	snprintf(path, sizeof path, "%s/tests/fixtures/hf/gemma3/config.json", top);
	if (sb_read_file(path, &base, &n, 0, &err)) {
		SB_CHECK(0, "%s", err.msg);
		return;
	}
	refuse(be, "gemma3", "gemma3: unchanged copy imports", base, NULL, 0, "");
	/* soft-capping where a Gemma 3 config sets it (Gemma3TextConfig's default: none) */
	{
		struct sb_lm_cfg c;
		struct sb_lm_hf_info info;
		const char *j = cfg_with(base, "\"final_logit_softcapping\": null", "\"final_logit_softcapping\": 30.0");
		int rc = sb_lm_hf_config(j, strlen(j), "gemma3/config.json", &c, &info, &err);
		float f = c.final_softcap, a = c.attn_softcap;
		j = cfg_with(base, "\"attn_logit_softcapping\": null", "\"attn_logit_softcapping\": 50.0");
		int rc2 = sb_lm_hf_config(j, strlen(j), "gemma3/config.json", &c, &info, &err);
		SB_CHECK(!rc && !rc2 && f == 30.0f && a == 0.0f && c.attn_softcap == 50.0f && c.final_softcap == 0.0f,
			 "gemma3: final_logit_softcapping 30 read as final_softcap %g (attn %g); attn_logit_softcapping 50 "
			 "as attn_softcap %g (final %g); null: none (%s)",
			 (double)f, (double)a, (double)c.attn_softcap, (double)c.final_softcap, rc || rc2 ? err.msg : "read");
	}
	refuse(be, "gemma3", "gemma3: final_logit_softcapping set imports",
	       cfg_with(base, "\"final_logit_softcapping\": null", "\"final_logit_softcapping\": 30.0"), NULL, 0, "");
	refuse(be, "gemma3", "gemma3: hidden_activation other than gelu_pytorch_tanh",
	       cfg_with(base, "\"gelu_pytorch_tanh\"", "\"silu\""), NULL, SB_EDATA, "hidden_activation 'silu'");
	refuse(be, "gemma3", "gemma3: use_bidirectional_attention (EmbeddingGemma's)",
	       cfg_with(base, "\"use_bidirectional_attention\": false", "\"use_bidirectional_attention\": true"), NULL,
	       SB_EDATA, "use_bidirectional_attention is true");
	refuse(be, "gemma3", "gemma3: a layer kind it does not have",
	       cfg_with(base, "\"full_attention\"", "\"chunked_attention\""), NULL, SB_EDATA,
	       "'chunked_attention' (sliding_attention or full_attention)");
	refuse(be, "gemma3", "gemma3: another sliding_window imports (the window is the config's)",
	       cfg_with(base, "\"sliding_window\": 8", "\"sliding_window\": 16"), NULL, 0, "");
	refuse(be, "gemma3", "gemma3: sliding_window 0",
	       cfg_with(base, "\"sliding_window\": 8", "\"sliding_window\": 0"), NULL, SB_EDATA,
	       "'sliding_window' must be an integer in [1,");
	refuse(be, "gemma3", "gemma3: model_type gemma3 (the multimodal layout) without its text_config",
	       cfg_with(base, "\"gemma3_text\"", "\"gemma3\""), NULL, SB_EDATA, "model_type gemma3 without a text_config");
	refuse(be, "gemma3", "gemma3: rope_parameters (transformers 5's spelling) refused by name",
	       cfg_with(base, "\"rope_scaling\": {", "\"rope_parameters\": {\"rope_type\": \"default\"}, \"rope_scaling\": {"),
	       NULL, SB_EDATA, "rope_parameters (transformers 5's spelling) is not read for gemma3_text");
	free(base);
	/* the multimodal layout: its text_config, defaults where it is silent, the vision tower
	 * skipped */
	{
		struct sb_lm_cfg c;
		struct sb_lm_hf_info info;
		snprintf(path, sizeof path, "%s/tests/fixtures/hf/gemma3_mm/config.json", top);
		int rc = sb_read_file(path, &base, &n, 0, &err);
		if (rc) {
			SB_CHECK(0, "%s", err.msg);
			return;
		}
		rc = sb_lm_hf_config(base, n, path, &c, &info, &err);
		SB_CHECK(!rc && info.gemma == 3 && info.gemma3_mm && !strcmp(c.pattern, "SASA") && c.head_dim == 256 &&
				 c.heads == 2 && c.kv_heads == 1 && c.attn_scale == 1.0f / 16 && c.rope_theta == 1e6f &&
				 c.rope_local_theta == 1e4f && c.norm_eps == 1e-6f && c.tied && c.vocab == 128 &&
				 !strcmp(info.model_type, "gemma3"),
			 "gemma3_mm: text_config read with Gemma3TextConfig's defaults: pattern %s, head_dim %d, attn_scale %g, "
			 "theta %g / %g (%s)",
			 rc ? "?" : c.pattern, c.head_dim, (double)c.attn_scale, (double)c.rope_theta,
			 (double)c.rope_local_theta, rc ? err.msg : "read");
		refuse(be, "gemma3_mm", "gemma3_mm: unchanged copy imports", base, NULL, 0, "");
		refuse(be, "gemma3_mm", "gemma3_mm: tensors named model.language_model.* (the module tree's spelling) import",
		       base, "module-tree", 0, "");
		refuse(be, "gemma3_mm", "gemma3_mm: text_config of another model type",
		       cfg_with(base, "\"model_type\": \"gemma3_text\"", "\"model_type\": \"siglip_text_model\""), NULL,
		       SB_EDATA, "text_config.model_type 'siglip_text_model'");
		refuse(be, "gemma3_mm", "gemma3_mm: tie_word_embeddings false at the top, true in text_config",
		       cfg_with(base, "\"model_type\": \"gemma3\"", "\"model_type\": \"gemma3\", \"tie_word_embeddings\": false"),
		       NULL, SB_EDATA, "tie_word_embeddings differs");
		refuse(be, "gemma3_mm", "gemma3_mm: an architecture other than Gemma3ForConditionalGeneration",
		       cfg_with(base, "Gemma3ForConditionalGeneration", "Gemma3ForImageTextToText"), NULL, SB_EDATA,
		       "architecture 'Gemma3ForImageTextToText' is not a causal LM");
		refuse(be, "gemma3_mm", "gemma3_mm: a tensor outside the language model and the vision tower", base,
		       "extra-tensor", SB_EDATA, "is not part of the gemma3 layout");
		free(base);
	}
}

static void check_lfm2_layout(void)
{
	static const struct {
		const char *name, *pattern;
		int ffn, conv_k, conv_bias, tied, heads, kv_heads, head_dim;
		float theta;
	} want[] = {{"lfm2", "CCACA", 48, 3, 0, 1, 4, 2, 8, 1e6f}, {"lfm2_bias", "CACA", 48, 4, 1, 0, 4, 4, 16, 1e4f}};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		char path[4700], *buf;
		size_t n;
		struct sb_err err = {0};
		struct sb_lm_cfg c;
		struct sb_lm_hf_info info;
		snprintf(path, sizeof path, "%s/tests/fixtures/hf/%s/config.json", top, want[i].name);
		int rc = sb_read_file(path, &buf, &n, 0, &err);
		if (!rc) {
			rc = sb_lm_hf_config(buf, n, path, &c, &info, &err);
			free(buf);
		}
		SB_CHECK(!rc && info.lfm2 && !strcmp(c.pattern, want[i].pattern) && c.ffn == want[i].ffn &&
				 c.conv_k == want[i].conv_k && c.conv_gate == 1 && c.conv_bias == want[i].conv_bias &&
				 c.bias == 0 && c.attn_bias == 0 && c.qk_norm == 1 && c.tied == want[i].tied &&
				 c.heads == want[i].heads && c.kv_heads == want[i].kv_heads &&
				 c.head_dim == want[i].head_dim && c.rope_theta == want[i].theta && c.rmsnorm && c.swiglu &&
				 c.pos == SB_LM_POS_ROPE && c.norm_eps == 1e-5f,
			 "%s: config read as pattern %s (want %s), ffn %d (want %d), conv_k %d, conv_bias %d, tied %d, "
			 "heads %d/%d of %d, theta %g (%s)",
			 want[i].name, rc ? "?" : c.pattern, want[i].pattern, rc ? -1 : c.ffn, want[i].ffn, c.conv_k,
			 c.conv_bias, c.tied, c.heads, c.kv_heads, c.head_dim, (double)c.rope_theta,
			 rc ? err.msg : info.ffn_rule);
	}
}

/* LFM2 configs refused (naming the field) or accepted, on copies of the fixtures */
static void check_lfm2_refusals(struct sb_backend *be)
{
	char path[4700], *base, *bias;
	size_t n;
	struct sb_err err = {0};
	snprintf(path, sizeof path, "%s/tests/fixtures/hf/lfm2/config.json", top);
	if (sb_read_file(path, &base, &n, 0, &err)) {
		SB_CHECK(0, "%s", err.msg);
		return;
	}
	snprintf(path, sizeof path, "%s/tests/fixtures/hf/lfm2_bias/config.json", top);
	if (sb_read_file(path, &bias, &n, 0, &err)) {
		SB_CHECK(0, "%s", err.msg);
		free(base);
		return;
	}
	static char b2[8192];
	refuse(be, "lfm2", "lfm2: unchanged copy imports", base, NULL, 0, "");
	refuse(be, "lfm2", "lfm2: a layer kind it does not have",
	       cfg_with(base, "\"full_attention\",\n    \"conv\"", "\"sliding_attention\",\n    \"conv\""), NULL, SB_EDATA,
	       "layer_types[2] 'sliding_attention' is not a layer kind read here");
	refuse(be, "lfm2", "lfm2: layer_types of another length",
	       cfg_with(base, "\"conv\",\n    \"conv\",", "\"conv\","), NULL, SB_EDATA,
	       "'layer_types' must be an array of num_hidden_layers (5)");
	refuse(be, "lfm2", "lfm2: full_attn_idxs disagreeing with layer_types",
	       cfg_with(base, "\"layer_types\"", "\"full_attn_idxs\": [2, 3],\n  \"layer_types\""), NULL, SB_EDATA,
	       "'full_attn_idxs' (CCAAC) disagrees with 'layer_types' (CCACA)");
	refuse(be, "lfm2", "lfm2: full_attn_idxs agreeing with layer_types imports",
	       cfg_with(base, "\"layer_types\"", "\"full_attn_idxs\": [2, 4],\n  \"layer_types\""), NULL, 0, "");
	refuse(be, "lfm2", "lfm2: block_use_swiglu false",
	       cfg_with(base, "\"block_use_swiglu\": true", "\"block_use_swiglu\": false"), NULL, SB_EDATA,
	       "'block_use_swiglu' is false");
	refuse(be, "lfm2", "lfm2: use_pos_enc false", cfg_with(base, "\"use_pos_enc\": true", "\"use_pos_enc\": false"),
	       NULL, SB_EDATA, "'use_pos_enc' is false");
	refuse(be, "lfm2", "lfm2: conv_dim other than hidden_size", cfg_with(base, "\"conv_dim\": 32", "\"conv_dim\": 64"),
	       NULL, SB_EDATA, "'conv_dim' must equal hidden_size (32)");
	refuse(be, "lfm2", "lfm2: num_heads other than num_attention_heads",
	       cfg_with(base, "\"num_heads\": 4", "\"num_heads\": 8"), NULL, SB_EDATA,
	       "'num_heads' must equal num_attention_heads (4)");
	refuse(be, "lfm2", "lfm2: block_norm_eps other than norm_eps",
	       cfg_with(base, "\"block_norm_eps\": 1e-05", "\"block_norm_eps\": 1e-06"), NULL, SB_EDATA,
	       "'block_norm_eps' 1e-06 must equal norm_eps 1e-05");
	refuse(be, "lfm2", "lfm2: theta disagreeing with rope_theta",
	       cfg_with(base, "\"rope_theta\"", "\"theta\": 10000.0,\n  \"rope_theta\""), NULL, SB_EDATA,
	       "'rope_theta' 1000000 disagrees with 'theta' 10000");
	refuse(be, "lfm2", "lfm2: rope_parameters in place of rope_theta imports",
	       cfg_with(base, "\"rope_theta\": 1000000.0",
			"\"rope_parameters\": {\"rope_theta\": 1000000.0, \"rope_type\": \"default\"}"),
	       NULL, 0, "");
	refuse(be, "lfm2", "lfm2: a yarn rope_parameters",
	       cfg_with(base, "\"rope_theta\": 1000000.0",
			"\"rope_parameters\": {\"rope_theta\": 1000000.0, \"rope_type\": \"yarn\", \"factor\": 4.0}"),
	       NULL, SB_EDATA, "rope_parameters type 'yarn' is not implemented for lfm2");
	refuse(be, "lfm2", "lfm2: tie_embedding disagreeing with tie_word_embeddings",
	       cfg_with(base, "\"use_cache\"", "\"tie_embedding\": false, \"tie_word_embeddings\": true,\n  \"use_cache\""),
	       NULL, SB_EDATA, "'tie_embedding' disagrees with 'tie_word_embeddings'");
	refuse(be, "lfm2", "lfm2: untied (tie_embedding false alone) without lm_head",
	       cfg_with(base, "\"use_cache\"", "\"tie_embedding\": false,\n  \"use_cache\""), NULL, SB_EDATA,
	       "lacks tensor 'lm_head.weight'");
	/* the feed-forward width: the weights hold 48 = roundup16(int(2*70/3) = 46) */
	refuse(be, "lfm2", "lfm2: a block_multiple_of that gives another width",
	       cfg_with(base, "\"block_multiple_of\": 16", "\"block_multiple_of\": 32"), NULL, SB_EDATA,
	       "'model.layers.0.feed_forward.w1.weight' has another shape: [48, 32] in the file, [64, 32] from "
	       "config.json (feed-forward width: block_ff_dim 70, block_auto_adjust_ff_dim: int(2*70/3) = 46, "
	       "int(block_ffn_dim_multiplier 1 * 46) = 46, rounded up to block_multiple_of 32 = 64)");
	refuse(be, "lfm2", "lfm2: no auto-adjustment: the width taken as written",
	       cfg_with(base, "\"block_auto_adjust_ff_dim\": true", "\"block_auto_adjust_ff_dim\": false"), NULL, SB_EDATA,
	       "[48, 32] in the file, [70, 32] from config.json (feed-forward width: block_ff_dim 70, "
	       "block_auto_adjust_ff_dim false");
	/* block_ff_dim wins over intermediate_size (Lfm2Config): without it, 70 -> 48 still */
	snprintf(b2, sizeof b2, "%s", cfg_with(base, "\"block_ff_dim\": 70,", ""));
	refuse(be, "lfm2", "lfm2: intermediate_size alone (no block_ff_dim) imports", b2, NULL, 0, "");
	refuse(be, "lfm2", "lfm2: block_ff_dim read before intermediate_size",
	       cfg_with(base, "\"intermediate_size\": 70", "\"intermediate_size\": 48"), NULL, 0, "");
	refuse(be, "lfm2", "lfm2: a null multiplier: no rounding (46)",
	       cfg_with(base, "\"block_ffn_dim_multiplier\": 1.0", "\"block_ffn_dim_multiplier\": null"), NULL, SB_EDATA,
	       "[46, 32] from config.json");
	refuse(be, "lfm2", "lfm2: conv_bias without the biases",
	       cfg_with(base, "\"conv_bias\": false", "\"conv_bias\": true"), NULL, SB_EDATA,
	       "lacks tensor 'model.layers.0.conv.in_proj.bias'");
	refuse(be, "lfm2", "lfm2: another conv_L_cache than the weights'",
	       cfg_with(base, "\"conv_L_cache\": 3", "\"conv_L_cache\": 4"), NULL, SB_EDATA,
	       "'model.layers.0.conv.conv.weight' has another shape: [32, 1, 3] in the file, [32, 1, 4]");
	refuse(be, "lfm2", "lfm2: a tensor the layout does not know", base, "extra-tensor", SB_EDATA,
	       "'model.layers.0.mlp.gate_proj.scale' is not part of the lfm2 layout");
	refuse(be, "lfm2", "lfm2_moe is another model type", cfg_with(base, "\"lfm2\"", "\"lfm2_moe\""), NULL, SB_EDATA,
	       "model_type 'lfm2_moe'");
	/* lfm2_bias: the older full_attn_idxs form */
	refuse(be, "lfm2_bias", "lfm2_bias: unchanged copy imports", bias, NULL, 0, "");
	refuse(be, "lfm2_bias", "lfm2_bias: a full_attn_idxs index out of range",
	       cfg_with(bias, "\"full_attn_idxs\": [\n    1,\n    3\n  ]", "\"full_attn_idxs\": [1, 4]"), NULL, SB_EDATA,
	       "full_attn_idxs[1] is not a layer index in [0, 4)");
	refuse(be, "lfm2_bias", "lfm2_bias: neither layer_types nor full_attn_idxs (every layer attention)",
	       cfg_with(bias, "\"full_attn_idxs\": [\n    1,\n    3\n  ],", ""), NULL, SB_EDATA,
	       "lacks tensor 'model.layers.0.self_attn.q_proj.weight'");
	free(base);
	free(bias);
}

/* The configs of released LFM2 checkpoints, as public code quotes them (LFM2-350M's
 * config.json, layer_types form; an LFM2-1.2B config.json quoted verbatim by a converter's
 * tests, full_attn_idxs form, with intermediate_size 8192 beside block_ff_dim 12288, which
 * Lfm2Config reads first): the layer kinds, and the feed-forward widths their weights have
 * (350M: block_ff_dim 6656 -> 4608; 1.2B: 12288 -> 8192). No weights are read. */
static void check_lfm2_configs(void)
{
	static const char *const cfgs[] = {
		"{\"architectures\": [\"Lfm2ForCausalLM\"], \"block_auto_adjust_ff_dim\": true, \"block_dim\": 1024, "
		"\"block_ff_dim\": 6656, \"block_ffn_dim_multiplier\": 1.0, \"block_mlp_init_scale\": 1.0, "
		"\"block_multiple_of\": 256, \"block_norm_eps\": 1e-05, \"block_out_init_scale\": 1.0, "
		"\"block_use_swiglu\": true, \"block_use_xavier_init\": true, \"bos_token_id\": 1, \"conv_L_cache\": 3, "
		"\"conv_bias\": false, \"conv_dim\": 1024, \"conv_dim_out\": 1024, \"conv_use_xavier_init\": true, "
		"\"eos_token_id\": 7, \"hidden_size\": 1024, \"initializer_range\": 0.02, \"intermediate_size\": 6656, "
		"\"layer_types\": [\"conv\", \"conv\", \"full_attention\", \"conv\", \"conv\", \"full_attention\", \"conv\", "
		"\"conv\", \"full_attention\", \"conv\", \"full_attention\", \"conv\", \"full_attention\", \"conv\", "
		"\"full_attention\", \"conv\"], \"max_position_embeddings\": 128000, \"model_type\": \"lfm2\", "
		"\"norm_eps\": 1e-05, \"num_attention_heads\": 16, \"num_heads\": 16, \"num_hidden_layers\": 16, "
		"\"num_key_value_heads\": 8, \"pad_token_id\": 0, \"rope_theta\": 1000000.0, \"torch_dtype\": \"bfloat16\", "
		"\"transformers_version\": \"4.54.0.dev0\", \"use_cache\": true, \"use_pos_enc\": true, "
		"\"vocab_size\": 65536}",
		"{\"architectures\": [\"Lfm2ForCausalLM\"], \"block_auto_adjust_ff_dim\": true, \"block_dim\": 2048, "
		"\"block_ff_dim\": 12288, \"block_ffn_dim_multiplier\": 1.0, \"block_mlp_init_scale\": 1.0, "
		"\"block_multiple_of\": 256, \"block_norm_eps\": 1e-05, \"block_out_init_scale\": 1.0, "
		"\"block_use_swiglu\": true, \"block_use_xavier_init\": true, \"bos_token_id\": 1, \"conv_L_cache\": 3, "
		"\"conv_bias\": false, \"conv_dim\": 2048, \"conv_dim_out\": 2048, \"conv_use_xavier_init\": true, "
		"\"eos_token_id\": 7, \"intermediate_size\": 8192, \"full_attn_idxs\": [2, 5, 8, 10, 12, 14], "
		"\"hidden_size\": 2048, \"initializer_range\": 0.02, \"max_position_embeddings\": 128000, "
		"\"model_type\": \"lfm2\", \"norm_eps\": 1e-05, \"num_attention_heads\": 32, \"head_dim\": 64, "
		"\"num_heads\": 32, \"num_hidden_layers\": 16, \"num_key_value_heads\": 8, \"pad_token_id\": 0, "
		"\"rope_theta\": 1000000.0, \"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"use_pos_enc\": true, "
		"\"vocab_size\": 65536}",
	};
	static const int ffn[] = {4608, 8192}, d[] = {1024, 2048}, heads[] = {16, 32};
	for (int i = 0; i < 2; i++) {
		struct sb_lm_cfg c;
		struct sb_lm_hf_info info;
		struct sb_err err = {0};
		int rc = sb_lm_hf_config(cfgs[i], strlen(cfgs[i]), "config.json", &c, &info, &err);
		SB_CHECK(!rc && !strcmp(c.pattern, "CCACCACCACACACAC") && c.ffn == ffn[i] && c.d == d[i] &&
				 c.heads == heads[i] && c.kv_heads == 8 && c.head_dim == 64 && c.conv_k == 3 && c.tied &&
				 c.vocab == 65536 && info.max_pos == 128000,
			 "a released LFM2 config (d %d): pattern %s, ffn %d (want %d; %s), heads %d/%d of %d", d[i],
			 rc ? "?" : c.pattern, rc ? -1 : c.ffn, ffn[i], rc ? err.msg : info.ffn_rule, c.heads, c.kv_heads,
			 c.head_dim);
	}
	/* the multiplier's rule: int(2*2048/3) = 1365, int(1.5 * 1365) = 2047, up to 256: 2048 */
	const char *mul = "{\"model_type\": \"lfm2\", \"vocab_size\": 64, \"hidden_size\": 64, \"num_hidden_layers\": 2, "
			  "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"block_ff_dim\": 2048, "
			  "\"block_ffn_dim_multiplier\": 1.5, \"layer_types\": [\"conv\", \"full_attention\"]}";
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	struct sb_err err = {0};
	int rc = sb_lm_hf_config(mul, strlen(mul), "config.json", &c, &info, &err);
	SB_CHECK(!rc && c.ffn == 2048 && strstr(info.ffn_rule, "int(block_ffn_dim_multiplier 1.5 * 1365) = 2047"),
		 "block_ffn_dim_multiplier 1.5: ffn %d (%s)", rc ? -1 : c.ffn, rc ? err.msg : info.ffn_rule);
}

/* Gemma 2: the configuration as read (soft-capping's defaults, the derived layer kinds, one
 * RoPE), and what is refused */
static void check_gemma2(struct sb_backend *be)
{
	static const struct {
		const char *name, *pattern;
		int tied, scaling;
		float acap, fcap, eps;
	} want[] = {{"gemma2", "SASA", 1, 0, 2.0f, 3.0f, 1e-6f}, {"gemma2_nocap", "ASSAS", 0, 2, 0.0f, 0.0f, 1e-5f}};
	char *base = NULL;
	struct sb_err err = {0};
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int rc = fixture_config(want[i].name, &c, &info, &err);
		SB_CHECK(!rc && info.gemma == 2 && !info.gemma3_mm && !strcmp(c.pattern, want[i].pattern) &&
				 c.window == 8 && c.ffn == 48 && c.heads == 4 && c.kv_heads == 2 && c.head_dim == 16 &&
				 c.qk_norm == 0 && c.sandwich == 1 && c.swiglu == 2 && c.rmsnorm && c.tied == want[i].tied &&
				 c.rope_theta == 1e4f && c.rope_local_theta == 0.0f && c.rope_scaling == want[i].scaling &&
				 c.attn_softcap == want[i].acap && c.final_softcap == want[i].fcap &&
				 c.emb_mult == (float)sqrt(32.0) && c.attn_scale == (float)(1.0 / sqrt(24.0)) &&
				 c.norm_eps == want[i].eps && c.max_T == 256,
			 "%s: config read as pattern %s (want %s), qk_norm %d, local theta %g (0: the global RoPE), scaling "
			 "%d, soft-capping %g / %g (want %g / %g) (%s)",
			 want[i].name, rc ? "?" : c.pattern, want[i].pattern, c.qk_norm, (double)c.rope_local_theta,
			 c.rope_scaling, (double)c.attn_softcap, (double)c.final_softcap, (double)want[i].acap,
			 (double)want[i].fcap, rc ? err.msg : "read");
	}
	if (!(base = fixture_json("gemma2")))
		return;
	/* Gemma2Config's defaults where the config is silent: soft-capping 50 and 30, every
	 * other layer global from the second, head_dim 256 */
	{
		static char j[8192];
		snprintf(j, sizeof j, "%s", cfg_with(base, "\"attn_logit_softcapping\": 2.0,", ""));
		snprintf(j, sizeof j, "%s", cfg_with(j, "\"final_logit_softcapping\": 3.0,", ""));
		snprintf(j, sizeof j, "%s", cfg_with(j, "\"num_hidden_layers\": 4,", "\"num_hidden_layers\": 5,"));
		snprintf(j, sizeof j, "%s", cfg_with(j, "\"head_dim\": 16,", ""));
		int rc = sb_lm_hf_config(j, strlen(j), "gemma2/config.json", &c, &info, &err);
		SB_CHECK(!rc && c.attn_softcap == 50.0f && c.final_softcap == 30.0f && !strcmp(c.pattern, "SASAS") &&
				 c.head_dim == 256,
			 "gemma2: Gemma2Config's defaults where the config is silent: soft-capping %g / %g (want 50 / 30), "
			 "pattern %s (want SASAS), head_dim %d (%s)",
			 (double)c.attn_softcap, (double)c.final_softcap, rc ? "?" : c.pattern, c.head_dim,
			 rc ? err.msg : "read");
	}
	refuse(be, "gemma2", "gemma2: unchanged copy imports", base, NULL, 0, "");
	refuse(be, "gemma2", "gemma2: attn_logit_softcapping 0",
	       cfg_with(base, "\"attn_logit_softcapping\": 2.0", "\"attn_logit_softcapping\": 0"), NULL, SB_EDATA,
	       "'attn_logit_softcapping' must be null or a positive number");
	refuse(be, "gemma2", "gemma2: final_logit_softcapping negative",
	       cfg_with(base, "\"final_logit_softcapping\": 3.0", "\"final_logit_softcapping\": -30"), NULL, SB_EDATA,
	       "'final_logit_softcapping' must be null or a positive number");
	refuse(be, "gemma2", "gemma2: final_logit_softcapping a string",
	       cfg_with(base, "\"final_logit_softcapping\": 3.0", "\"final_logit_softcapping\": \"30\""), NULL,
	       SB_EDATA, "'final_logit_softcapping' must be null or a positive number");
	refuse(be, "gemma2", "gemma2: a tensor the layout does not know", base, "extra-tensor", SB_EDATA,
	       "is not part of the gemma2 layout");
	refuse(be, "gemma2", "gemma2: rope_parameters (transformers 5's spelling) refused by name",
	       cfg_with(base, "\"rope_theta\"", "\"rope_parameters\": {\"rope_type\": \"default\"}, \"rope_theta\""),
	       NULL, SB_EDATA, "rope_parameters (transformers 5's spelling) is not read for gemma2");
	refuse(be, "gemma2", "gemma2: a layer kind it does not have",
	       cfg_with(base, "\"model_type\": \"gemma2\"",
			"\"model_type\": \"gemma2\", \"layer_types\": [\"sliding_attention\", \"full_attention\", "
			"\"sliding_attention\", \"linear_attention\"]"),
	       NULL, SB_EDATA, "layer_types[3] is 'linear_attention'");
	refuse(be, "gemma2", "gemma2: hidden_activation other than gelu_pytorch_tanh",
	       cfg_with(base, "\"gelu_pytorch_tanh\"", "\"gelu\""), NULL, SB_EDATA, "hidden_activation 'gelu'");
	free(base);
	/* Gemma 3's weights under a gemma2 config: its q/k norms are not Gemma 2's */
	if (!(base = fixture_json("gemma3")))
		return;
	refuse(be, "gemma3", "gemma2: a checkpoint with q/k norms (Gemma 3's) is refused",
	       cfg_with(base, "\"gemma3_text\"", "\"gemma2\""), NULL, SB_EDATA,
	       "self_attn.k_norm.weight' is not part of the gemma2 layout");
	free(base);
}

/* Qwen3-MoE, Mixtral, Qwen2-MoE and OLMoE: the experts' configuration as read (which layers, the gates, no dense
 * MLP beside them), the run's checkpoint holding every expert apart under the toolkit's names,
 * and what is refused */
static void check_moe_split(struct sb_backend *be)
{
	static const struct {
		const char *name, *layers;
		int split, E, K, Fe, ffn, gate, dense, shared, abias, qk;
	} want[] = {{"qwen3_moe", "101", 1, 4, 2, 16, 48, 1, 0, 0, 0, 1}, {"mixtral", "", 2, 4, 2, 48, 0, 0, 0, 0, 0, 0},
		    {"qwen2_moe", "011", 1, 4, 2, 16, 24, 1, 1, 1, 2, 0}, {"olmoe", "", 1, 4, 3, 48, 0, 1, 0, 0, 0, 2}};
	struct sb_err err = {0};
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int rc = fixture_config(want[i].name, &c, &info, &err);
		SB_CHECK(!rc && info.moe_split == want[i].split && c.moe_experts == want[i].E && c.moe_topk == want[i].K &&
				 c.moe_ffn == want[i].Fe && c.ffn == want[i].ffn && c.moe_gate == want[i].gate &&
				 c.moe_dense == want[i].dense && c.moe_shared_gate == want[i].shared &&
				 c.attn_bias == want[i].abias && c.qk_norm == want[i].qk && !strcmp(c.moe_layers, want[i].layers),
			 "%s: experts read as %d of %d, top %d, layers '%s' (want '%s'), gates over %s, dense MLP %d (%s)",
			 want[i].name, c.moe_experts, c.moe_ffn, c.moe_topk, c.moe_layers, want[i].layers,
			 c.moe_gate ? "all" : "the picked", c.ffn, rc ? err.msg : "read");
	}
	/* Granite 3's experts: stacked (no split), in every layer, a shared MLP beside them or none */
	static const struct {
		const char *name;
		int ffn, dense;
	} gm[] = {{"granitemoe", 0, 0}, {"granitemoeshared", 24, 1}};
	for (size_t i = 0; i < sizeof gm / sizeof gm[0]; i++) {
		int rc = fixture_config(gm[i].name, &c, &info, &err);
		SB_CHECK(!rc && info.granite_moe && !info.moe_split && c.moe_experts == 4 && c.moe_topk == 2 &&
				 c.moe_ffn == 16 && c.ffn == gm[i].ffn && c.moe_dense == gm[i].dense && c.moe_gate == 0 &&
				 !c.moe_layers[0] && c.emb_mult == 3.0f && c.resid_mult == 0.5f && c.logit_div == 2.0f,
			 "%s: experts read as 4 of %d, top %d, shared MLP %d, multipliers %g %g %g (%s)", gm[i].name, c.moe_ffn,
			 c.moe_topk, c.ffn, (double)c.emb_mult, (double)c.resid_mult, (double)c.logit_div,
			 rc ? err.msg : "read");
	}
	{ /* the run's checkpoint: each expert's matrices apart, under the toolkit's names */
		char dir[4600], runs[128], rd[4096], path[4700];
		snprintf(dir, sizeof dir, "%s/tests/fixtures/hf/mixtral", top);
		snprintf(runs, sizeof runs, "%s/runs", tmp);
		struct sb_lm_import_opts o;
		memset(&o, 0, sizeof o);
		o.n_corpora = 1;
		snprintf(o.corpora[0], sizeof o.corpora[0], "text=%s/tests/fixtures/lm/shakespeare-head.txt", top);
		struct sb_lm_cell cell;
		int existed = 0, rc = sb_lm_import(dir, runs, &o, &cell, rd, &existed, &err);
		struct sb_tensors ts;
		snprintf(path, sizeof path, "%s/model.safetensors", rd);
		if (!rc)
			rc = sb_st_read(path, &ts, &err);
		int n_exp = 0, stacked = 0;
		for (size_t j = 0; !rc && j < ts.n; j++) {
			n_exp += strstr(ts.t[j].name, ".block_sparse_moe.experts.") != NULL;
			stacked += strstr(ts.t[j].name, "input_linear") || strstr(ts.t[j].name, "output_linear");
		}
		SB_CHECK(!rc && n_exp == 2 * 4 * 3 && !stacked &&
				 sb_tensors_find(&ts, "model.layers.1.block_sparse_moe.experts.3.up_proj.weight") &&
				 sb_tensors_find(&ts, "model.layers.0.block_sparse_moe.router.layer.weight"),
			 "mixtral: the run's checkpoint holds the %d experts' matrices apart under the toolkit's names (%d "
			 "of 24; %d stacks; %s)", n_exp, n_exp, stacked, rc ? err.msg : "read");
		if (!rc)
			sb_tensors_free(&ts);
		/* opened as a full model (the experts widened into the parameters at their stacks'
		 * places) and as an evaluation model (packed expert by expert): the same logits */
		struct sb_lm_cell c1, c2;
		struct sb_lm_model *mf = NULL, *me = NULL;
		struct sb_lm_cache *kf = NULL, *ke = NULL;
		char sha[SB_SHA256_HEX];
		int32_t ids[16];
		float *lf = malloc(16 * 128 * sizeof *lf), *le = malloc(16 * 128 * sizeof *le);
		for (int t = 0; t < 16; t++)
			ids[t] = (t * 37 + 5) % 128;
		if (!rc)
			rc = sb_lm_run_open(be, rd, 0, &c1, &mf, sha, &err);
		if (!rc)
			rc = sb_lm_run_open(be, rd, 1, &c2, &me, sha, &err);
		if (!rc)
			rc = sb_lm_cache_new(mf, 16, &kf, &err);
		if (!rc)
			rc = sb_lm_cache_new(me, 16, &ke, &err);
		if (!rc)
			rc = sb_lm_forward_cached_ids(sb_be_main(be), mf, kf, ids, 16, NULL, lf, 1, NULL, &err);
		if (!rc)
			rc = sb_lm_forward_cached_ids(sb_be_main(be), me, ke, ids, 16, NULL, le, 1, NULL, &err);
		SB_CHECK(!rc && !memcmp(lf, le, 16 * 128 * sizeof *lf),
			 "mixtral: its run opened as a full model and as an evaluation model gives the same logits bit for "
			 "bit (%s)", rc ? err.msg : "compared");
		sb_lm_cache_free(kf);
		sb_lm_cache_free(ke);
		sb_lm_model_free(mf);
		sb_lm_model_free(me);
		free(lf);
		free(le);
	}
	char *base = fixture_json("qwen3_moe");
	if (!base)
		return;
	refuse(be, "qwen3_moe", "qwen3_moe: unchanged copy imports", base, NULL, 0, "");
	refuse(be, "qwen3_moe", "qwen3_moe: mlp_only_layers past the last layer",
	       cfg_with(base, "\"mlp_only_layers\": [", "\"mlp_only_layers\": [5, "), NULL, SB_EDATA,
	       "mlp_only_layers[0] is not a layer index (0..2)");
	refuse(be, "qwen3_moe", "qwen3_moe: more experts per token than experts",
	       cfg_with(base, "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 5"), NULL, SB_EDATA,
	       "'num_experts_per_tok' 5 is more than the 4 experts");
	refuse(be, "qwen3_moe", "qwen3_moe: more experts in the config than in the checkpoint (the router's rows)",
	       cfg_with(base, "\"num_experts\": 4", "\"num_experts\": 5"), NULL, SB_EDATA,
	       "tensor 'model.layers.0.mlp.gate.weight' has another shape: [4, 32] in the file, [5, 32]");
	refuse(be, "qwen3_moe", "qwen3_moe: an expert width the weights do not have",
	       cfg_with(base, "\"moe_intermediate_size\": 16", "\"moe_intermediate_size\": 32"), NULL, SB_EDATA,
	       "'model.layers.0.mlp.experts.0.gate_proj.weight' has another shape: [16, 32] in the file, [32, 32]");
	refuse(be, "qwen3_moe", "qwen3_moe: layer 1 no longer dense: its router is not in the checkpoint",
	       cfg_with(base, "\"mlp_only_layers\": [", "\"mlp_only_layers\": [], \"x\": ["), NULL, SB_EDATA,
	       "lacks tensor 'model.layers.1.mlp.gate.weight'");
	free(base);
}

/* Phi-3: the rotated dimensions as read; the fused tensors of another shape refused */
static void check_phi3(struct sb_backend *be)
{
	struct sb_err err = {0};
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	int rc = fixture_config("phi3_partial", &c, &info, &err);
	SB_CHECK(!rc && info.phi3 && c.rope_dim == 6 && c.head_dim == 8 && info.sliding_window == 64 && c.kv_heads == 1,
		 "phi3_partial: rope_dim %d (want 6 of 8), window %d (%s)", c.rope_dim, info.sliding_window,
		 rc ? err.msg : "read");
	char *base = fixture_json("phi3");
	if (!base)
		return;
	refuse(be, "phi3", "phi3: unchanged copy imports", base, NULL, 0, "");
	refuse(be, "phi3", "phi3: more kv heads than the fused qkv_proj holds",
	       cfg_with(base, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4"), NULL, SB_EDATA,
	       "'model.layers.0.self_attn.qkv_proj.weight' has shape [64, 32], not [96, 32]");
	refuse(be, "phi3", "phi3: a longrope scaling",
	       cfg_with(base, "\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1], "
			"\"long_factor\": [1]}"), NULL, SB_EDATA, "type 'longrope' is not implemented");
	free(base);
}

/* Ministral: layer_types as S and A layers; without them every layer slides, read as Mistral's
 * window (a T past it refused) */
static void check_ministral(struct sb_backend *be)
{
	struct sb_err err = {0};
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	int rc = fixture_config("ministral", &c, &info, &err);
	SB_CHECK(!rc && !strcmp(c.pattern, "ASSA") && c.window == 8 && c.rope_local_theta == 0.0f && !info.sliding_window &&
			 c.head_dim == 16,
		 "ministral: layers %s (want ASSA), window %d (%s)", c.pattern, c.window, rc ? err.msg : "read");
	char *base = fixture_json("ministral");
	if (!base)
		return;
	const char *j = cfg_with(base, "\"layer_types\": [", "\"layer_types\": null, \"x\": [");
	rc = sb_lm_hf_config(j, strlen(j), "ministral/config.json", &c, &info, &err);
	SB_CHECK(!rc && !strcmp(c.pattern, "AAAA") && info.sliding_window == 8,
		 "ministral without layer_types: every layer slides, read as Mistral's window (layers %s, window %d; %s)",
		 c.pattern, info.sliding_window, rc ? err.msg : "read");
	refuse(be, "ministral", "ministral: unchanged copy imports", base, NULL, 0, "");
	refuse(be, "ministral", "ministral: a layer kind it does not have",
	       cfg_with(base, "\"sliding_attention\"", "\"linear_attention\""), NULL, SB_EDATA,
	       "layer_types[1] is 'linear_attention'");
	free(base);
}

/* Cohere2: the layers (sliding with RoPE, global NoPE), the parallel MLP, the bias-free LayerNorms
 * and logit_scale as read; each head's q/k rows reordered (even ones first) in the run's
 * checkpoint, v's as they are; what is refused */
static void check_cohere2(struct sb_backend *be)
{
	static const struct {
		const char *name, *pattern, *rope;
		int window, abias, tied;
		float logit;
	} want[] = {{"cohere2", "SSSAS", "11101", 8, 0, 1, 0.5f}, {"cohere2_bias", "ASS", "011", 6, 1, 0, 0.25f}};
	struct sb_err err = {0};
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int rc = fixture_config(want[i].name, &c, &info, &err);
		SB_CHECK(!rc && info.cohere2 && !strcmp(c.pattern, want[i].pattern) && !strcmp(c.rope_layers, want[i].rope) &&
				 c.window == want[i].window && c.attn_bias == want[i].abias && c.tied == want[i].tied &&
				 c.logit_mult == want[i].logit && c.parallel_mlp == 1 && c.norm_bias == 0 && c.rmsnorm == 0 &&
				 c.rope_local_theta == 0.0f && c.head_dim == 8,
			 "%s: config read as layers %s (want %s), RoPE by layer %s, window %d, logit_mult %g (%s)", want[i].name,
			 c.pattern, want[i].pattern, c.rope_layers, c.window, (double)c.logit_mult, rc ? err.msg : "read");
	}
	{ /* q_proj's rows of head 1 in the run: the file's rows 8, 10, 12, 14, 9, 11, 13, 15 */
		char dir[4600], runs[128], rd[4096], path[4700];
		snprintf(dir, sizeof dir, "%s/tests/fixtures/hf/cohere2_bias", top);
		snprintf(runs, sizeof runs, "%s/runs", tmp);
		struct sb_lm_import_opts o;
		memset(&o, 0, sizeof o);
		o.n_corpora = 1;
		snprintf(o.corpora[0], sizeof o.corpora[0], "text=%s/tests/fixtures/lm/shakespeare-head.txt", top);
		struct sb_lm_cell cell;
		struct sb_tensors src, run;
		int existed = 0, rc = sb_lm_import(dir, runs, &o, &cell, rd, &existed, &err), same = 0;
		snprintf(path, sizeof path, "%s/model.safetensors", dir);
		if (!rc)
			rc = sb_st_read(path, &src, &err);
		snprintf(path, sizeof path, "%s/model.safetensors", rd);
		if (!rc && (rc = sb_st_read(path, &run, &err)))
			sb_tensors_free(&src);
		if (!rc) {
			const struct sb_tensor *a = sb_tensors_find(&src, "model.layers.1.self_attn.q_proj.weight");
			const struct sb_tensor *b = sb_tensors_find(&run, "model.layers.1.self_attn.q_proj.weight");
			const struct sb_tensor *va = sb_tensors_find(&src, "model.layers.1.self_attn.v_proj.weight");
			const struct sb_tensor *vb = sb_tensors_find(&run, "model.layers.1.self_attn.v_proj.weight");
			const struct sb_tensor *ba = sb_tensors_find(&src, "model.layers.1.self_attn.k_proj.bias");
			const struct sb_tensor *bb = sb_tensors_find(&run, "model.layers.1.self_attn.k_proj.bias");
			static const int from[8] = {8, 10, 12, 14, 9, 11, 13, 15};
			same = a && b && va && vb && ba && bb && !memcmp(va->data, vb->data, va->nbytes);
			for (int j = 0; same && j < 8; j++)
				same = !memcmp((const float *)b->data + (size_t)(8 + j) * 32, (const float *)a->data + (size_t)from[j] * 32,
					       32 * sizeof(float)) &&
				       ((const float *)bb->data)[8 + j] == ((const float *)ba->data)[from[j]];
			sb_tensors_free(&src);
			sb_tensors_free(&run);
		}
		SB_CHECK(!rc && same, "cohere2_bias: head 1's q_proj rows and k_proj biases reordered even-first in the run, "
				      "v_proj's as in the file (%s)", rc ? err.msg : "compared");
	}
	char *base = fixture_json("cohere2");
	if (!base)
		return;
	refuse(be, "cohere2", "cohere2: unchanged copy imports", base, NULL, 0, "");
	refuse(be, "cohere2", "cohere2: a layer kind it does not have",
	       cfg_with(base, "\"sliding_attention\"", "\"chunked_attention\""), NULL, SB_EDATA,
	       "layer_types[0] is 'chunked_attention'");
	refuse(be, "cohere2", "cohere2: a layer_norm_eps no float holds",
	       cfg_with(base, "\"layer_norm_eps\": 1e-05", "\"layer_norm_eps\": 1e-300"), NULL, SB_EDATA,
	       "layer_norm_eps 1e-300");
	refuse(be, "cohere2", "cohere2: heads that do not divide hidden_size",
	       cfg_with(base, "\"num_attention_heads\": 4", "\"num_attention_heads\": 5"), NULL, SB_EDATA,
	       "'num_attention_heads' 5 does not divide hidden_size 32");
	free(base);
}

/* Qwen3-Next: the layers, the DeltaNet heads, the gated attention, the experts with their gated
 * shared expert as read; the (1 + w) norms written as that multiplier, the gated norm's weight
 * as it is; what is refused */
static void check_qwen3_next(struct sb_backend *be)
{
	static const struct {
		const char *name, *pattern;
		int E, ffn, kh, vh, kd, vd, rope_dim, conv_k, tied;
	} want[] = {{"qwen3_next", "DDDA", 4, 24, 2, 4, 8, 8, 4, 4, 0}, {"qwen3_next_dense", "ADD", 0, 48, 2, 2, 16, 16, 8, 3, 1}};
	struct sb_err err = {0};
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int rc = fixture_config(want[i].name, &c, &info, &err);
		SB_CHECK(!rc && info.qwen3_next && !strcmp(c.pattern, want[i].pattern) && c.moe_experts == want[i].E &&
				 c.ffn == want[i].ffn && c.gdn_kheads == want[i].kh && c.gdn_vheads == want[i].vh &&
				 c.gdn_kdim == want[i].kd && c.gdn_vdim == want[i].vd && c.rope_dim == want[i].rope_dim &&
				 c.conv_k == want[i].conv_k && c.tied == want[i].tied && c.attn_gate == 1 && c.qk_norm == 1 &&
				 c.head_dim == 16 && (!c.moe_experts || (c.moe_dense == 1 && c.moe_shared_gate == 1 &&
				 c.moe_gate == 0 && c.moe_ffn == 16 && !c.moe_layers[0])),
			 "%s: config read as layers %s (want %s), experts %d, ffn %d, DeltaNet %d/%d heads of %d/%d, rope_dim %d "
			 "(%s)", want[i].name, c.pattern, want[i].pattern, c.moe_experts, c.ffn, c.gdn_kheads, c.gdn_vheads,
			 c.gdn_kdim, c.gdn_vdim, c.rope_dim, rc ? err.msg : "read");
	}
	{ /* the run's checkpoint: 1 + w for the zero-centred norms, w for the DeltaNet's gated norm */
		char dir[4600], runs[128], rd[4096], path[4700];
		snprintf(dir, sizeof dir, "%s/tests/fixtures/hf/qwen3_next_dense", top);
		snprintf(runs, sizeof runs, "%s/runs", tmp);
		struct sb_lm_import_opts o;
		memset(&o, 0, sizeof o);
		o.n_corpora = 1;
		snprintf(o.corpora[0], sizeof o.corpora[0], "text=%s/tests/fixtures/lm/shakespeare-head.txt", top);
		struct sb_lm_cell cell;
		struct sb_tensors src, run;
		int existed = 0, rc = sb_lm_import(dir, runs, &o, &cell, rd, &existed, &err), ok = 0, nrm = 0;
		snprintf(path, sizeof path, "%s/model.safetensors", dir);
		if (!rc)
			rc = sb_st_read(path, &src, &err);
		snprintf(path, sizeof path, "%s/model.safetensors", rd);
		if (!rc && (rc = sb_st_read(path, &run, &err)))
			sb_tensors_free(&src);
		const char *names[] = {"model.layers.0.self_attn.q_norm.weight", "model.layers.1.input_layernorm.weight",
				       "model.norm.weight", "model.layers.2.linear_attn.norm.weight"};
		for (int k = 0; !rc && k < 4; k++) {
			const struct sb_tensor *a = sb_tensors_find(&src, names[k]), *b = sb_tensors_find(&run, names[k]);
			if (!a || !b || a->dtype != SB_F32 || b->dtype != SB_F32 || a->nbytes != b->nbytes)
				break;
			const float *x = a->data, *y2 = b->data;
			int same = 1;
			for (size_t j = 0; j < a->nbytes / 4 && same; j++)
				same = y2[j] == (k < 3 ? 1.0f + x[j] : x[j]);
			nrm += same;
		}
		ok = nrm == 4;
		SB_CHECK(!rc && ok, "qwen3_next_dense: the run holds 1 + w for q_norm, the layer norms and model.norm, w for "
				    "the gated norm (%d of 4; %s)", nrm, rc ? err.msg : "read");
		if (!rc) {
			sb_tensors_free(&src);
			sb_tensors_free(&run);
		}
	}
	char *base = fixture_json("qwen3_next");
	if (!base)
		return;
	refuse(be, "qwen3_next", "qwen3_next: unchanged copy imports", base, NULL, 0, "");
	refuse(be, "qwen3_next", "qwen3_next: a layer kind it does not have",
	       cfg_with(base, "\"linear_attention\"", "\"sliding_attention\""), NULL, SB_EDATA,
	       "layer_types[0] is 'sliding_attention' (linear_attention or full_attention)");
	refuse(be, "qwen3_next", "qwen3_next: value heads not a multiple of the key heads",
	       cfg_with(base, "\"linear_num_value_heads\": 4", "\"linear_num_value_heads\": 3"), NULL, SB_EDATA,
	       "linear_num_value_heads 3 is not a multiple of linear_num_key_heads 2");
	refuse(be, "qwen3_next", "qwen3_next: an odd number of rotated dimensions",
	       cfg_with(base, "\"partial_rotary_factor\": 0.25", "\"partial_rotary_factor\": 0.3125"), NULL, SB_EDATA,
	       "gives 5 rotated dimensions");
	refuse(be, "qwen3_next", "qwen3_next: a dense layer beside shared experts of another width",
	       cfg_with2(base, "\"intermediate_size\": 24", "\"intermediate_size\": 40", "\"mlp_only_layers\": []",
			 "\"mlp_only_layers\": [1]"),
	       NULL, SB_EDATA, "dense layers (intermediate_size 40) beside shared experts of another width (24)");
	free(base);
}

/* Jamba: the layers, experts and Mamba (1) fields as read, and what is refused */
static void check_jamba(struct sb_backend *be)
{
	static const struct {
		const char *name, *pattern, *moe;
		int E, inner, rank, conv_k, pbias, cbias, tied;
	} want[] = {{"jamba", "VVAVV", "01010", 4, 64, 2, 4, 0, 1, 0}, {"jamba_dense", "AVV", "", 0, 96, 5, 3, 1, 0, 1}};
	struct sb_err err = {0};
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int rc = fixture_config(want[i].name, &c, &info, &err);
		SB_CHECK(!rc && info.jamba && !strcmp(c.pattern, want[i].pattern) && !strcmp(c.moe_layers, want[i].moe) &&
				 c.moe_experts == want[i].E && c.ssm_inner == want[i].inner && c.ssm_dt_rank == want[i].rank &&
				 c.conv_k == want[i].conv_k && c.ssm_proj_bias == want[i].pbias &&
				 c.ssm_conv_bias == want[i].cbias && c.tied == want[i].tied && c.ssm_inner_norm == 1 &&
				 c.pos == SB_LM_POS_NONE && c.ssm_state == 8 && (!c.moe_experts || (c.moe_gate == 1 &&
				 c.moe_dense == 0 && c.moe_ffn == 48 && c.moe_topk == 2)),
			 "%s: config read as layers %s (want %s), experts %d in '%s', inner %d, dt rank %d, conv %d (%s)",
			 want[i].name, c.pattern, want[i].pattern, c.moe_experts, c.moe_layers, c.ssm_inner, c.ssm_dt_rank,
			 c.conv_k, rc ? err.msg : "read");
	}
	char *base = fixture_json("jamba");
	if (!base)
		return;
	refuse(be, "jamba", "jamba: unchanged copy imports", base, NULL, 0, "");
	refuse(be, "jamba", "jamba: attn_layer_offset not below the period",
	       cfg_with(base, "\"attn_layer_offset\": 2", "\"attn_layer_offset\": 4"), NULL, SB_EDATA,
	       "'attn_layer_offset' 4 must be below attn_layer_period 4");
	refuse(be, "jamba", "jamba: another attention layer: its Mamba tensors are not in the checkpoint",
	       cfg_with(base, "\"attn_layer_offset\": 2", "\"attn_layer_offset\": 1"), NULL, SB_EDATA,
	       "lacks tensor 'model.layers.1.self_attn.q_proj.weight'");
	refuse(be, "jamba", "jamba: another dt rank than the weights'",
	       cfg_with(base, "\"mamba_dt_rank\": 2", "\"mamba_dt_rank\": 3"), NULL, SB_EDATA,
	       "'model.layers.0.mamba.x_proj.weight' has another shape: [18, 64] in the file, [19, 64]");
	refuse(be, "jamba", "jamba: experts every layer (expert_layer_period 1): layer 0's are not in the checkpoint",
	       cfg_with2(base, "\"expert_layer_period\": 2", "\"expert_layer_period\": 1", "\"expert_layer_offset\": 1",
			 "\"expert_layer_offset\": 0"),
	       NULL, SB_EDATA, "lacks tensor 'model.layers.0.feed_forward.router.weight'");
	free(base);
}

/* Falcon-H1: the configuration as read (the gated norm's three forms, the two projection
 * biases, the multipliers, rope_theta 1e11 as a float), what is refused, and that training
 * refuses the parallel mixers */
static void check_falcon_h1(struct sb_backend *be)
{
	static const struct {
		const char *name;
		int layers, kv, hd, sh, sp, norm, ngroups, pbias, abias, bias, tied, scaling;
		float theta, emb, key, logit, ssm_z;
	} want[] = {
		{"falcon_h1", 3, 2, 8, 6, 8, 0, 1, 0, 0, 0, 0, 0, 1e11f, 5.656854249492381f, 0.390625f, 0.0390625f,
		 0.3535533905932738f},
		{"falcon_h1_norm", 2, 1, 8, 4, 16, 2, 2, 1, 1, 1, 1, 2, 1e4f, 2.0f, 0.75f, 0.5f, 0.6f},
		{"falcon_h1_gate", 2, 2, 8, 4, 8, 1, 2, 0, 0, 0, 0, 0, 1e5f, 1.0f, 1.0f, 1.0f, 1.5f},
	};
	char *base = NULL;
	struct sb_err err = {0};
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int rc = fixture_config(want[i].name, &c, &info, &err);
		SB_CHECK(!rc && info.falcon_h1 && c.parallel_ssm == 1 && c.n_layer == want[i].layers &&
				 strspn(c.pattern, "A") == (size_t)want[i].layers && c.kv_heads == want[i].kv &&
				 c.head_dim == want[i].hd && c.ssm_heads == want[i].sh && c.ssm_head_dim == want[i].sp &&
				 c.ssm_norm == want[i].norm && c.ssm_norm_groups == want[i].ngroups &&
				 c.ssm_proj_bias == want[i].pbias && c.attn_bias == want[i].abias && c.bias == want[i].bias &&
				 c.tied == want[i].tied && c.rope_scaling == want[i].scaling && c.rope_theta == want[i].theta &&
				 c.emb_mult == want[i].emb && c.key_mult == want[i].key && c.logit_mult == want[i].logit &&
				 c.ssm_mult_z == want[i].ssm_z && c.logit_div == 1.0f && c.swiglu == 1 && c.ffn == 48,
			 "%s: config read as %d parallel layers, ssm %d x %d, gated norm %d over %d groups, biases %d/%d/%d, "
			 "theta %g, multipliers emb %g key %g logit %g z %g (%s)",
			 want[i].name, c.n_layer, c.ssm_heads, c.ssm_head_dim, c.ssm_norm, c.ssm_norm_groups, c.ssm_proj_bias,
			 c.attn_bias, c.bias, (double)c.rope_theta, (double)c.emb_mult, (double)c.key_mult,
			 (double)c.logit_mult, (double)c.ssm_mult_z, rc ? err.msg : "read");
	}
	{ /* the configuration, as written into cell.json, reads back the same, field for field
	   * (falcon_h1_norm: every new field away from its default) */
		struct sb_jw w;
		struct sb_json *v = NULL;
		struct sb_lm_cfg back;
		int rc = fixture_config("falcon_h1_norm", &c, &info, &err);
		sb_jw_init(&w, NULL);
		if (!rc) {
			sb_lm_cfg_json(&w, &c);
			rc = sb_json_parse(w.buf, w.len, &v, &err);
		}
		sb_lm_cfg_default(&back);
		if (!rc)
			rc = sb_lm_cfg_from_json(&back, v, &err);
		SB_CHECK(!rc && !memcmp(&back, &c, sizeof c) && back.parallel_ssm == 1 && back.ssm_norm == 2 &&
				 back.ssm_norm_groups == 2 && back.ssm_mult_dt == 0.5f && back.mlp_down_mult == 0.7f,
			 "falcon_h1_norm: the configuration round-trips through JSON bit for bit (%.*s)", (int)w.len,
			 w.buf ? w.buf : "");
		sb_json_free(v);
		sb_jw_free(&w);
	}
	if (!(base = fixture_json("falcon_h1")))
		return;
	{ /* FalconH1Config's defaults where the config is silent, and null multipliers: 1 */
		const char *j = cfg_with2(base, "\"key_multiplier\": 0.390625", "\"key_multiplier\": null",
					  "\"mlp_multipliers\": [", "\"mlp_multipliers\": null, \"x\": [");
		int rc = sb_lm_hf_config(j, strlen(j), "falcon_h1/config.json", &c, &info, &err);
		SB_CHECK(!rc && c.key_mult == 1.0f && c.mlp_gate_mult == 1.0f && c.mlp_down_mult == 1.0f &&
				 c.attn_out_mult == 0.9375f,
			 "falcon_h1: null multipliers read as 1 (key %g, mlp %g %g; %s)", (double)c.key_mult,
			 (double)c.mlp_gate_mult, (double)c.mlp_down_mult, rc ? err.msg : "read");
	}
	refuse(be, "falcon_h1", "falcon_h1: unchanged copy imports", base, NULL, 0, "");
	refuse(be, "falcon_h1", "falcon_h1: partial_rotary_factor 0.5",
	       cfg_with(base, "\"model_type\": \"falcon_h1\"",
			"\"model_type\": \"falcon_h1\", \"partial_rotary_factor\": 0.5"),
	       NULL, SB_EDATA, "partial_rotary_factor other than 1");
	refuse(be, "falcon_h1", "falcon_h1: rope_parameters",
	       cfg_with(base, "\"model_type\": \"falcon_h1\"",
			"\"model_type\": \"falcon_h1\", \"rope_parameters\": {\"rope_type\": \"default\"}"),
	       NULL, SB_EDATA, "rope_parameters");
	refuse(be, "falcon_h1", "falcon_h1: mlp_multipliers of three",
	       cfg_with(base, "\"mlp_multipliers\": [", "\"mlp_multipliers\": [1.0, "), NULL, SB_EDATA,
	       "'mlp_multipliers' must be an array of 2 numbers");
	refuse(be, "falcon_h1", "falcon_h1: a negative ssm multiplier",
	       cfg_with(base, "\"ssm_multipliers\": [", "\"ssm_multipliers\": [-1.0, 1.0, 1.0, 1.0, 1.0], \"x\": ["), NULL,
	       SB_EDATA, "ssm_multipliers[0] must be a positive number");
	refuse(be, "falcon_h1", "falcon_h1: mamba_d_ssm that mamba_d_head times mamba_n_heads does not make",
	       cfg_with(base, "\"mamba_d_ssm\": 48", "\"mamba_d_ssm\": 40"), NULL, SB_EDATA,
	       "'mamba_d_head' 8 times mamba_n_heads 6 must equal mamba_d_ssm 40");
	refuse(be, "falcon_h1", "falcon_h1: mamba_rms_norm true: the gated norm's weight is not in the checkpoint",
	       cfg_with(base, "\"mamba_rms_norm\": false", "\"mamba_rms_norm\": true"), NULL, SB_EDATA,
	       "lacks tensor 'model.layers.0.mamba.norm.weight'");
	refuse(be, "falcon_h1", "falcon_h1: projectors_bias true: out_proj's bias is not in the checkpoint",
	       cfg_with(base, "\"projectors_bias\": false", "\"projectors_bias\": true"), NULL, SB_EDATA,
	       "lacks tensor 'model.layers.0.mamba.out_proj.bias'");
	refuse(be, "falcon_h1", "falcon_h1: a tensor the layout does not know", base, "extra-tensor", SB_EDATA,
	       "is not part of the falcon_h1 layout");
	refuse(be, "falcon_h1", "falcon_h1: an rms_norm_eps no float holds",
	       cfg_with(base, "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": 1e-300"), NULL, SB_EDATA, "rms_norm_eps 1e-300");
	free(base);
	/* the parallel mixers and the multipliers are evaluation-only: training refuses them */
	struct sb_lm_model *m = NULL;
	struct sb_lm_trainer *tr = NULL;
	int rc = fixture_config("falcon_h1", &c, &info, &err);
	if (!rc)
		rc = sb_lm_model_new(be, &c, &m, &err);
	struct sb_lm_train_opts o = {.B = 1, .T = 8, .tile = 1};
	if (!rc)
		rc = sb_lm_trainer_new(m, &o, &tr, &err);
	SB_CHECK(rc == SB_EUSAGE && strstr(err.msg, "parallel Mamba2 mixers"), "falcon_h1: training refused (%s)",
		 rc ? err.msg : "trained");
	sb_lm_trainer_free(tr);
	sb_lm_model_free(m);
	c.parallel_ssm = 0;
	c.pattern[0] = 'C'; /* no M mixer now: the multipliers alone are refused */
	m = NULL;
	tr = NULL;
	rc = sb_lm_model_new(be, &c, &m, &err);
	if (!rc)
		rc = sb_lm_trainer_new(m, &o, &tr, &err);
	SB_CHECK(rc == SB_EUSAGE && strstr(err.msg, "Falcon-H1's multipliers are evaluation-only"),
		 "falcon_h1: training with its multipliers alone refused (%s)", rc ? err.msg : "trained");
	sb_lm_trainer_free(tr);
	sb_lm_model_free(m);
}

/* Bamba: the configuration as read (BambaConfig's own rope_theta and partial rotary factor
 * where config.json is silent, the config's where it speaks), and what is refused */
static void check_bamba(struct sb_backend *be)
{
	static const struct {
		const char *name, *pattern;
		int tied, hd, rd, kv, groups, abias;
		float theta;
	} want[] = {{"bamba", "MMAMA", 1, 8, 4, 2, 1, 0, 1e4f}, {"bamba_rope", "AMMA", 0, 16, 4, 1, 2, 1, 5e5f}};
	char *base = NULL;
	struct sb_err err = {0};
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int rc = fixture_config(want[i].name, &c, &info, &err);
		SB_CHECK(!rc && info.bamba && !strcmp(c.pattern, want[i].pattern) && c.head_dim == want[i].hd &&
				 c.rope_dim == want[i].rd && c.kv_heads == want[i].kv && c.ssm_groups == want[i].groups &&
				 c.attn_bias == want[i].abias && c.rope_theta == want[i].theta && c.tied == want[i].tied &&
				 c.swiglu == 1 && c.ffn == 48 && c.ssm_heads == 4 && c.ssm_head_dim == 16 &&
				 c.pos == SB_LM_POS_ROPE && c.emb_mult == 1.0f && c.logit_div == 1.0f,
			 "%s: config read as pattern %s (want %s), head_dim %d, rope_dim %d (want %d), theta %g (want %g), "
			 "groups %d (%s)",
			 want[i].name, rc ? "?" : c.pattern, want[i].pattern, c.head_dim, c.rope_dim, want[i].rd,
			 (double)c.rope_theta, (double)want[i].theta, c.ssm_groups, rc ? err.msg : "read");
	}
	if (!(base = fixture_json("bamba")))
		return;
	{ /* a factor of 1: every dimension rotated (rope_dim 0) */
		const char *j = cfg_with(base, "\"model_type\": \"bamba\"",
					 "\"model_type\": \"bamba\", \"partial_rotary_factor\": 1.0");
		int rc = sb_lm_hf_config(j, strlen(j), "bamba/config.json", &c, &info, &err);
		SB_CHECK(!rc && c.rope_dim == 0, "bamba: partial_rotary_factor 1 rotates every dimension (rope_dim %d; %s)",
			 c.rope_dim, rc ? err.msg : "read");
	}
	refuse(be, "bamba", "bamba: unchanged copy imports", base, NULL, 0, "");
	refuse(be, "bamba", "bamba: another partial_rotary_factor imports (the weights do not depend on it)",
	       cfg_with(base, "\"model_type\": \"bamba\"", "\"model_type\": \"bamba\", \"partial_rotary_factor\": 0.25"),
	       NULL, 0, "");
	refuse(be, "bamba", "bamba: a partial rotary factor that rotates an odd number of dimensions",
	       cfg_with(base, "\"model_type\": \"bamba\"", "\"model_type\": \"bamba\", \"partial_rotary_factor\": 0.375"),
	       NULL, SB_EDATA, "gives 3 rotated dimensions");
	refuse(be, "bamba", "bamba: rope_scaling set",
	       cfg_with(base, "\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0}"),
	       NULL, SB_EDATA, "rope_scaling is set (bamba: null only)");
	refuse(be, "bamba", "bamba: an attention layer index past the last layer",
	       cfg_with(base, "\"attn_layer_indices\": [", "\"attn_layer_indices\": [7, "), NULL, SB_EDATA,
	       "attn_layer_indices[0] is not a layer index (0..4)");
	refuse(be, "bamba", "bamba: mlp_bias true",
	       cfg_with(base, "\"mlp_bias\": false", "\"mlp_bias\": true"), NULL, SB_EDATA, "mlp_bias is true");
	refuse(be, "bamba", "bamba: attn_layer_indices null (every layer Mamba2): layer 2's mixer is not in the checkpoint",
	       cfg_with(base, "\"attn_layer_indices\": [", "\"attn_layer_indices\": null, \"x\": ["), NULL, SB_EDATA,
	       "lacks tensor 'model.layers.2.mamba.in_proj.weight'");
	refuse(be, "bamba", "bamba: a tensor the layout does not know", base, "extra-tensor", SB_EDATA,
	       "is not part of the bamba layout");
	free(base);
}

/* OLMo 2 and 3: the configuration as read (no pre-norms, post-norms, q/k norms over all heads;
 * OLMo 3's layer kinds by Olmo3Config's rule, its sliding layers on the unscaled RoPE), and
 * what is refused */
static void check_olmo(struct sb_backend *be)
{
	struct sb_err err = {0};
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	int rc = fixture_config("olmo2", &c, &info, &err);
	SB_CHECK(!rc && info.olmo && !strcmp(c.pattern, "AAA") && c.prenorm == 0 && c.sandwich == 1 && c.qk_norm == 2 &&
			 c.rope_theta == 5e5f && c.tied == 1 && c.kv_heads == 2,
		 "olmo2: config read as pattern %s, prenorm %d, sandwich %d, qk_norm %d (%s)", rc ? "?" : c.pattern,
		 c.prenorm, c.sandwich, c.qk_norm, rc ? err.msg : "read");
	rc = fixture_config("olmo3", &c, &info, &err);
	SB_CHECK(!rc && info.olmo && !strcmp(c.pattern, "SSSAS") && c.window == 8 && c.rope_local_theta == 1e4f &&
			 c.rope_scaling == 2 && c.prenorm == 0 && c.qk_norm == 2 && c.tied == 0 && c.kv_heads == 1,
		 "olmo3: config read as pattern %s (want SSSAS: every fourth layer global), window %d, local theta %g, "
		 "scaling %d (%s)",
		 rc ? "?" : c.pattern, c.window, (double)c.rope_local_theta, c.rope_scaling, rc ? err.msg : "read");
	char *base = NULL;
	if (!(base = fixture_json("olmo3")))
		return;
	refuse(be, "olmo3", "olmo3: unchanged copy imports", base, NULL, 0, "");
	refuse(be, "olmo3", "olmo3: a layer kind it does not have",
	       cfg_with(base, "\"model_type\": \"olmo3\"",
			"\"model_type\": \"olmo3\", \"layer_types\": [\"sliding_attention\", \"full_attention\", "
			"\"sliding_attention\", \"chunked_attention\", \"full_attention\"]"),
	       NULL, SB_EDATA, "layer_types[3] is 'chunked_attention'");
	refuse(be, "olmo3", "olmo3: layer_types of another length",
	       cfg_with(base, "\"model_type\": \"olmo3\"",
			"\"model_type\": \"olmo3\", \"layer_types\": [\"full_attention\"]"),
	       NULL, SB_EDATA, "layer_types must list num_hidden_layers (5) kinds");
	refuse(be, "olmo3", "olmo3: sliding_window 0",
	       cfg_with(base, "\"sliding_window\": 8", "\"sliding_window\": 0"), NULL, SB_EDATA,
	       "'sliding_window' must be an integer in [1,");
	refuse(be, "olmo3", "olmo3: a partial rotary factor",
	       cfg_with(base, "\"model_type\": \"olmo3\"", "\"model_type\": \"olmo3\", \"partial_rotary_factor\": 0.5"),
	       NULL, SB_EDATA, "partial_rotary_factor other than 1");
	free(base);
	/* OLMo 2's weights under a llama config: its post-norms and q/k norms are not Llama's */
	if (!(base = fixture_json("olmo2")))
		return;
	refuse(be, "olmo2", "olmo2: the checkpoint read as a llama lacks Llama's pre-norms",
	       cfg_with(base, "\"olmo2\"", "\"llama\""), NULL, SB_EDATA,
	       "lacks tensor 'model.layers.0.input_layernorm.weight'");
	free(base);
}

/* SmolLM3 and EXAONE 4: their NoPE layers as read (rope_layers), and what is refused */
static void check_nope(struct sb_backend *be)
{
	struct sb_err err = {0};
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	int rc = fixture_config("smollm3", &c, &info, &err);
	SB_CHECK(!rc && !strcmp(c.pattern, "AAAAA") && !strcmp(c.rope_layers, "11101") && c.prenorm == 1 && c.tied == 1,
		 "smollm3: config read as pattern %s, rope_layers %s (want 11101: every fourth layer NoPE), tied %d (%s)",
		 rc ? "?" : c.pattern, c.rope_layers, c.tied, rc ? err.msg : "read");
	rc = fixture_config("exaone4", &c, &info, &err);
	SB_CHECK(!rc && !strcmp(c.pattern, "SSSAS") && !strcmp(c.rope_layers, "11101") && c.prenorm == 0 &&
			 c.qk_norm == 1 && c.sandwich == 1 && c.window == 8 && c.rope_local_theta == 0.0f && c.rope_scaling == 2,
		 "exaone4: config read as pattern %s, rope_layers %s (want 11101: the global layer NoPE), qk_norm %d, local "
		 "theta %g (0: the one rotary embedding) (%s)",
		 rc ? "?" : c.pattern, c.rope_layers, c.qk_norm, (double)c.rope_local_theta, rc ? err.msg : "read");
	char *base = NULL;
	if (!(base = fixture_json("smollm3")))
		return;
	{ /* an explicit list; a list without a NoPE layer is plain RoPE */
		const char *j = cfg_with(base, "\"no_rope_layer_interval\": 4",
					 "\"no_rope_layers\": [0, 1, 1, 1, 0]");
		rc = sb_lm_hf_config(j, strlen(j), "smollm3/config.json", &c, &info, &err);
		int ok1 = !rc && !strcmp(c.rope_layers, "01110");
		j = cfg_with(base, "\"no_rope_layer_interval\": 4", "\"no_rope_layers\": [1, 1, 1, 1, 1]");
		rc = sb_lm_hf_config(j, strlen(j), "smollm3/config.json", &c, &info, &err);
		SB_CHECK(ok1 && !rc && !c.rope_layers[0],
			 "smollm3: no_rope_layers [0,1,1,1,0] read as 01110; all 1: every layer RoPE (rope_layers '%s'; %s)",
			 c.rope_layers, rc ? err.msg : "read");
	}
	refuse(be, "smollm3", "smollm3: a no_rope_layers entry other than 0 or 1",
	       cfg_with(base, "\"no_rope_layer_interval\": 4", "\"no_rope_layers\": [1, 1, 2, 1, 1]"), NULL, SB_EDATA,
	       "no_rope_layers[2] is not 0 or 1");
	refuse(be, "smollm3", "smollm3: no_rope_layers of another length",
	       cfg_with(base, "\"no_rope_layer_interval\": 4", "\"no_rope_layers\": [1, 0]"), NULL, SB_EDATA,
	       "no_rope_layers must list num_hidden_layers (5)");
	refuse(be, "smollm3", "smollm3: use_sliding_window true",
	       cfg_with(base, "\"use_sliding_window\": false", "\"use_sliding_window\": true"), NULL, SB_EDATA,
	       "use_sliding_window is true");
	free(base);
	if (!(base = fixture_json("exaone4")))
		return;
	{ /* no sliding window: every layer global, every layer RoPE (EXAONE 4.0 1.2B) */
		const char *j = cfg_with(base, "\"sliding_window\": 8", "\"sliding_window\": null");
		rc = sb_lm_hf_config(j, strlen(j), "exaone4/config.json", &c, &info, &err);
		SB_CHECK(!rc && !strcmp(c.pattern, "AAAAA") && !c.rope_layers[0],
			 "exaone4: sliding_window null: every layer global with RoPE (pattern %s, rope_layers '%s'; %s)",
			 rc ? "?" : c.pattern, c.rope_layers, rc ? err.msg : "read");
	}
	refuse(be, "exaone4", "exaone4: unchanged copy imports", base, NULL, 0, "");
	refuse(be, "exaone4", "exaone4: a layer kind it does not have",
	       cfg_with(base, "\"model_type\": \"exaone4\"",
			"\"model_type\": \"exaone4\", \"layer_types\": [\"sliding_attention\", \"sliding_attention\", "
			"\"linear_attention\", \"full_attention\", \"sliding_attention\"]"),
	       NULL, SB_EDATA, "layer_types[2] is 'linear_attention'");
	free(base);
}

int main(void)
{
	snprintf(top, sizeof top, "%s", getenv("SB_TOP") ? getenv("SB_TOP") : ".");
	snprintf(tmp, sizeof tmp, "/tmp/sbimport.XXXXXX");
	if (!mkdtemp(tmp)) {
		SB_CHECK(0, "mkdtemp");
		return sb_test_done();
	}
	struct sb_backend *be;
	struct sb_err err = {0};
	if (sb_backend_cpu_open(1, &be, &err)) {
		SB_CHECK(0, "cpu backend: %s", err.msg);
		return sb_test_done();
	}
	check_model(be, "llama_bf16");
	check_model(be, "llama_bias");
	check_model(be, "qwen2_f16");
	check_model(be, "qwen3");
	check_model(be, "qwen2_tok");
	check_model(be, "mistral");
	check_model(be, "mistral_sp"); /* a SentencePiece-style tokenizer (llama2.json), BOS first */
	check_model(be, "lfm2");
	check_model(be, "lfm2_bias");
	check_model(be, "granite_h");
	check_model(be, "granite_h_rope");
	check_model(be, "granite_moe");
	check_model(be, "llama_linear");
	check_model(be, "qwen2_yarn");
	check_model(be, "llama_yarn");
	check_model(be, "granite3");
	check_model(be, "granite3_bias");
	check_model(be, "qwen3_yarn");
	check_lfm2_layout();
	check_model(be, "gemma3");
	check_model(be, "gemma3_pattern");
	check_model(be, "gemma3_mm");
	check_gemma3(be);
	check_model(be, "gemma2");
	check_model(be, "gemma2_nocap");
	check_gemma2(be);
	check_model(be, "bamba");
	check_model(be, "bamba_rope");
	check_bamba(be);
	check_model(be, "falcon_h1");
	check_model(be, "falcon_h1_norm");
	check_model(be, "falcon_h1_gate");
	check_falcon_h1(be);
	check_model(be, "qwen3_moe");
	check_model(be, "mixtral");
	check_model(be, "qwen2_moe");
	check_model(be, "olmoe");
	check_model(be, "granitemoe");
	check_model(be, "granitemoeshared");
	check_moe_split(be);
	check_model(be, "jamba");
	check_model(be, "jamba_dense");
	check_jamba(be);
	check_model(be, "qwen3_next");
	check_model(be, "qwen3_next_dense");
	check_qwen3_next(be);
	check_model(be, "cohere2");
	check_model(be, "cohere2_bias");
	check_cohere2(be);
	check_model(be, "ministral");
	check_ministral(be);
	check_model(be, "phi3");
	check_model(be, "phi3_partial");
	check_phi3(be);
	check_model(be, "olmo2");
	check_model(be, "olmo3");
	check_olmo(be);
	check_model(be, "smollm3");
	check_model(be, "exaone4");
	check_nope(be);
	{ /* Mistral beyond its sliding window: the attention is no longer full, refused */
		char dir[4600], runs[128], rd[4096];
		snprintf(dir, sizeof dir, "%s/tests/fixtures/hf/mistral", top);
		snprintf(runs, sizeof runs, "%s/runs-mistral", tmp);
		struct sb_lm_import_opts o;
		memset(&o, 0, sizeof o);
		o.n_corpora = 1;
		snprintf(o.corpora[0], sizeof o.corpora[0], "text=%s/tests/fixtures/lm/shakespeare-head.txt", top);
		o.T = 65;
		struct sb_lm_cell cell;
		int existed = 0;
		int rc = sb_lm_import(dir, runs, &o, &cell, rd, &existed, &err);
		SB_CHECK(rc == SB_EUSAGE && strstr(err.msg, "sliding_window 64"),
			 "mistral: T 65 beyond its sliding window 64 is refused (rc %d: %s)", rc, err.msg);
	}

	{ /* Mistral with sliding_window null (as Mistral 7B v0.2 and later write it): no window,
	   * full attention at any T (the default T here, 256, is past the fixture's window 64) */
		char mp[4700], *mbase;
		size_t mn;
		snprintf(mp, sizeof mp, "%s/tests/fixtures/hf/mistral/config.json", top);
		if (!sb_read_file(mp, &mbase, &mn, 0, &err)) {
			SB_CHECK(strstr(mbase, "\"sliding_window\": 64") != NULL, "mistral: the fixture's window is 64");
			refuse(be, "mistral", "sliding_window null imports",
			       cfg_with(mbase, "\"sliding_window\": 64", "\"sliding_window\": null"), NULL, 0, "");
			free(mbase);
		} else
			SB_CHECK(0, "%s", err.msg);
	}
	check_weight_files();

	/* refusals: a Qwen3 base, changed one field at a time */
	char path[4700], *base;
	size_t n;
	snprintf(path, sizeof path, "%s/tests/fixtures/hf/qwen3/config.json", top);
	if (sb_read_file(path, &base, &n, 0, &err)) {
		SB_CHECK(0, "%s", err.msg);
		return sb_test_done();
	}
	refuse(be, "qwen3", "unchanged copy imports", base, NULL, 0, "");
	refuse(be, "qwen3", "model_type gpt2", cfg_with(base, "\"qwen3\"", "\"gpt2\""), NULL, SB_EDATA,
	       "model_type 'gpt2'");
	refuse(be, "qwen3", "hidden_act gelu", cfg_with(base, "\"silu\"", "\"gelu\""), NULL, SB_EDATA,
	       "hidden_act 'gelu'");
	/* RoPE scalings and partial rotation: each in place of "rope_scaling": null */
	static const struct {
		const char *what, *with;
		int rc;
		const char *want;
	} rope_bad[] = {
	    {"rope_scaling dynamic", "\"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 4.0}", SB_EDATA,
	     "rope_scaling type 'dynamic' is not implemented (none, default, llama3, linear, yarn)"},
	    {"rope_scaling yarn with a factor below 1", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 0.5}",
	     SB_EDATA, "yarn RoPE scaling needs a finite rope_factor >= 1"},
	    {"rope_scaling linear without its factor", "\"rope_scaling\": {\"rope_type\": \"linear\"}", SB_EDATA,
	     "'factor' is missing"},
	    {"rope_scaling yarn with a negative attention_factor",
	     "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"attention_factor\": -1}", SB_EDATA,
	     "'attention_factor' must be a positive number"},
	    {"rope_scaling yarn with a string mscale",
	     "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"mscale\": \"1\", \"mscale_all_dim\": 1}",
	     SB_EDATA, "rope_scaling.mscale and mscale_all_dim must be numbers"},
	    {"partial_rotary_factor 0.5", "\"rope_scaling\": null, \"partial_rotary_factor\": 0.5", SB_EDATA,
	     "partial_rotary_factor other than 1 (RoPE on part of each head) is not implemented"},
	    {"partial_rotary_factor 1 imports", "\"rope_scaling\": null, \"partial_rotary_factor\": 1.0", 0, ""},
	};
	for (size_t i = 0; i < sizeof rope_bad / sizeof rope_bad[0]; i++)
		refuse(be, "qwen3", rope_bad[i].what, cfg_with(base, "\"rope_scaling\": null", rope_bad[i].with), NULL,
		       rope_bad[i].rc, rope_bad[i].want);
	/* YaRN's readings (rope_spec): the defaults, the factor from the two lengths, mscale */
	{
		static const char *head =
		    "{\"model_type\": \"qwen2\", \"architectures\": [\"Qwen2ForCausalLM\"], \"vocab_size\": 256, "
		    "\"hidden_size\": 32, \"intermediate_size\": 48, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
		    "\"max_position_embeddings\": 4096, \"rope_scaling\": ";
		struct {
			const char *rs;
			float factor, attn, bf, bs;
			int orig, trunc;
		} y[] = {
		    {"{\"rope_type\": \"yarn\", \"factor\": 4.0}", 4.0f, (float)(0.1 * log(4.0) + 1), 32, 1, 4096, 1},
		    {"{\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 1024, \"beta_fast\": 8, "
		     "\"beta_slow\": 0.5, \"truncate\": false}",
		     4.0f, (float)(0.1 * log(4.0) + 1), 8, 0.5f, 1024, 0},
		    /* no factor: the two lengths' ratio */
		    {"{\"type\": \"yarn\", \"original_max_position_embeddings\": 1024}", 4.0f, (float)(0.1 * log(4.0) + 1), 32,
		     1, 1024, 1},
		    /* a ratio that is not a float: rounded to one (4096 / 3000) */
		    {"{\"type\": \"yarn\", \"original_max_position_embeddings\": 3000}", (float)(4096.0 / 3000),
		     (float)(0.1 * log((float)(4096.0 / 3000)) + 1), 32, 1, 3000, 1},
		    /* mscale and mscale_all_dim (DeepSeek): their ratio of 0.1 m ln(factor) + 1 */
		    {"{\"rope_type\": \"yarn\", \"factor\": 40, \"mscale\": 1.0, \"mscale_all_dim\": 0.5}", 40.0f,
		     (float)((0.1 * log(40.0) + 1) / (0.05 * log(40.0) + 1)), 32, 1, 4096, 1},
		    /* equal ones: 1 */
		    {"{\"rope_type\": \"yarn\", \"factor\": 40, \"mscale\": 0.707, \"mscale_all_dim\": 0.707}", 40.0f, 1.0f, 32,
		     1, 4096, 1},
		    {"{\"rope_type\": \"yarn\", \"factor\": 2.0, \"attention_factor\": 1.5}", 2.0f, 1.5f, 32, 1, 4096, 1},
		};
		for (size_t i = 0; i < sizeof y / sizeof y[0]; i++) {
			char js[1024];
			snprintf(js, sizeof js, "%s%s}", head, y[i].rs);
			struct sb_lm_cfg c;
			struct sb_lm_hf_info info;
			struct sb_err e = {0};
			int r = sb_lm_hf_config(js, strlen(js), "yarn.json", &c, &info, &e);
			SB_CHECK(!r && c.rope_scaling == 3 && c.rope_factor == y[i].factor && c.rope_attn == y[i].attn &&
					 c.rope_beta_fast == y[i].bf && c.rope_beta_slow == y[i].bs &&
					 c.rope_orig_max == y[i].orig && c.rope_truncate == y[i].trunc,
				 "yarn %s: factor %g attention %.9g betas %g/%g orig %d truncate %d (want %g %.9g %g/%g %d %d; %s)",
				 y[i].rs, (double)c.rope_factor, (double)c.rope_attn, (double)c.rope_beta_fast,
				 (double)c.rope_beta_slow, c.rope_orig_max, c.rope_truncate, (double)y[i].factor,
				 (double)y[i].attn, (double)y[i].bf, (double)y[i].bs, y[i].orig, y[i].trunc,
				 r ? e.msg : "read");
		}
	}
	/* transformers 5's rope_parameters in place of rope_theta and rope_scaling: the same model
	 * (it was ignored: theta 10000 and no scaling, a silent misread) */
	{
		static const char *v4 =
		    "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"hidden_act\": \"silu\", "
		    "\"vocab_size\": 256, \"hidden_size\": 32, \"intermediate_size\": 48, \"num_hidden_layers\": 2, "
		    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-5, "
		    "\"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
		    "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}}";
		static const char *v5 =
		    "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"hidden_act\": \"silu\", "
		    "\"vocab_size\": 256, \"hidden_size\": 32, \"intermediate_size\": 48, \"num_hidden_layers\": 2, "
		    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-5, "
		    "\"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 500000.0, \"factor\": 8.0, "
		    "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}}";
		struct sb_lm_cfg c4, c5;
		struct sb_lm_hf_info i4, i5;
		struct sb_err e4 = {0}, e5 = {0};
		int r4 = sb_lm_hf_config(v4, strlen(v4), "v4.json", &c4, &i4, &e4);
		int r5 = sb_lm_hf_config(v5, strlen(v5), "v5.json", &c5, &i5, &e5);
		SB_CHECK(!r4 && !r5 && c5.rope_theta == 500000.0f && c5.rope_scaling == 1 && c5.rope_factor == 8.0f &&
				 c5.rope_low_freq == 1.0f && c5.rope_high_freq == 4.0f && c5.rope_orig_max == 64 &&
				 c4.rope_theta == c5.rope_theta && c4.rope_scaling == c5.rope_scaling &&
				 c4.rope_factor == c5.rope_factor && c4.rope_orig_max == c5.rope_orig_max,
			 "rope_parameters (transformers 5) read as rope_theta + rope_scaling: theta %g/%g, scaling %d/%d, "
			 "factor %g, orig %d (%s%s)",
			 (double)c4.rope_theta, (double)c5.rope_theta, c4.rope_scaling, c5.rope_scaling,
			 (double)c5.rope_factor, c5.rope_orig_max, e4.msg, e5.msg);
		char both[2048];
		snprintf(both, sizeof both, "%.*s, \"rope_theta\": 10000.0}", (int)strlen(v5) - 1, v5);
		struct sb_err eb = {0};
		int rb = sb_lm_hf_config(both, strlen(both), "both.json", &c5, &i5, &eb);
		SB_CHECK(rb == SB_EDATA && strstr(eb.msg, "rope_parameters.rope_theta 500000 disagrees with rope_theta 10000"),
			 "rope_parameters.rope_theta disagreeing with rope_theta refused (%d: %s)", rb, eb.msg);
		snprintf(both, sizeof both, "%.*s, \"rope_scaling\": {\"rope_type\": \"default\"}}", (int)strlen(v5) - 1,
			 v5);
		rb = sb_lm_hf_config(both, strlen(both), "both.json", &c5, &i5, &eb);
		SB_CHECK(rb == SB_EDATA && strstr(eb.msg, "describe different scalings"),
			 "rope_parameters and rope_scaling disagreeing refused (%d: %s)", rb, eb.msg);
	}
	refuse(be, "qwen3", "sliding window on", cfg_with(base, "\"use_sliding_window\": false", "\"use_sliding_window\": true"),
	       NULL, SB_EDATA, "use_sliding_window");
	refuse(be, "qwen3", "a wider model than the weights", cfg_with(base, "\"intermediate_size\": 48",
									"\"intermediate_size\": 64"),
	       NULL, SB_EDATA, "has another shape: ");
	refuse(be, "qwen3", "a missing head_dim (d/heads = 8, weights have 16)", cfg_with(base, "\"head_dim\": 16,", ""),
	       NULL, SB_EDATA, "has another shape: ");
	refuse(be, "qwen3", "untied model without lm_head", cfg_with(base, "\"tie_word_embeddings\": true",
								      "\"tie_word_embeddings\": false"),
	       NULL, SB_EDATA, "lacks tensor 'lm_head.weight'");
	refuse(be, "qwen3", "a tensor the layout does not know", base, "extra-tensor", SB_EDATA,
	       "'model.layers.0.mlp.gate_proj.scale' is not part of the qwen3 layout");
	refuse(be, "qwen3", "no weights", base, "no-weights", SB_EIO, "neither model.safetensors");
	refuse(be, "qwen3", "vocab_size a string", cfg_with(base, "\"vocab_size\": 128", "\"vocab_size\": \"128\""), NULL,
	       SB_EDATA, "'vocab_size' must be an integer");
	refuse(be, "qwen3", "truncated config.json", "{\"model_type\": \"qwen3\", ", NULL, SB_EDATA, "config.json");
	/* strings no field reads must still be UTF-8 (sb_json_parse; yajl alone took these) */
	refuse(be, "qwen3", "an overlong UTF-8 form in config.json",
	       cfg_with(base, "\"model_type\": \"qwen3\"", "\"model_type\": \"qwen3\", \"note\": \"\xc0\xaf\""), NULL,
	       SB_EDATA, "config.json: line 5, column 35: invalid UTF-8");
	refuse(be, "qwen3", "an escaped lone surrogate in config.json",
	       cfg_with(base, "\"model_type\": \"qwen3\"", "\"model_type\": \"qwen3\", \"note\": \"\\udfff\""), NULL,
	       SB_EDATA, "\\udfff is a lone UTF-16 surrogate");
	free(base);
	check_lfm2_refusals(be);
	check_lfm2_configs();
	check_granite_refusals(be);
	sb_backend_close(be);
	char cmd[200];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (!getenv("SB_KEEP") && system(cmd))
		fprintf(stderr, "could not remove %s\n", tmp);
	return sb_test_done();
}
