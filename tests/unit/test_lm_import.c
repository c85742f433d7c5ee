/* test_lm_import.c — pretrained Llama/Qwen decoders (PROTOCOL C(b)): sb_lm_import of the
 * tiny Hugging Face directories in tests/fixtures/hf (gen.py), then the cached path's
 * logits against the logits transformers computed for the same ids (Qwen3: gen.py's
 * torch transcription, itself checked against transformers' Llama and Qwen2); prefill
 * against token-by-token decoding; the run directory and its cell; refusals. */
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
 * here and in float32 there (at positions < 48 that differs by < 48 * 2^-24 rad). The
 * logits are O(3); the differences seen are 1.5e-6 to 3.2e-6 (printed); 2e-5 is ~6x that. */
#define LOGIT_ATOL 2e-5

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
	SB_CHECK(!strncmp(cell.cell_id, "lm.pretrained.L2.d32.", 21), "%s: cell id %s", name, cell.cell_id);
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
	/* a fixture with a tokenizer: the run's copy encodes text.txt into the ids HF's tokenizers gave */
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
			rc = sb_tok_encode(tok, text, n, &mine, &nm, &err);
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
	}
	/* token by token: the same bits */
	sb_lm_cache_reset(c, 0);
	int same = 1;
	for (int t = 0; t < T && same; t++) {
		rc = sb_lm_forward_cached_ids(ctx, m, c, ids + t, 1, NULL, step, 0, NULL, &err);
		same = !rc && !memcmp(step, got + (size_t)t * V, (size_t)V * sizeof *step);
	}
	SB_CHECK(same, "%s: %d single-token steps give the prefill's logits bit for bit", name, T);
	/* a BF16 checkpoint is evaluated from packed bfloat16 weights (half the memory), with the
	 * bits of the same model in float: open the checkpoint again as a float model */
	int want16 = !strcmp(name, "llama_bf16") || !strcmp(name, "qwen3") || !strcmp(name, "qwen2_tok") ||
		     !strcmp(name, "mistral");
	SB_CHECK(m->bf16 == want16, "%s: Linear weights kept as %s (%s checkpoint)", name,
		 m->bf16 ? "bfloat16" : "float", want16 ? "a BF16" : "an F32/F16");
	if (m->bf16) {
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
	snprintf(o.corpora[0], sizeof o.corpora[0], "text=x.txt");
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
	{ /* Mistral beyond its sliding window: the attention is no longer full, refused */
		char dir[4600], runs[128], rd[4096];
		snprintf(dir, sizeof dir, "%s/tests/fixtures/hf/mistral", top);
		snprintf(runs, sizeof runs, "%s/runs-mistral", tmp);
		struct sb_lm_import_opts o;
		memset(&o, 0, sizeof o);
		o.n_corpora = 1;
		snprintf(o.corpora[0], sizeof o.corpora[0], "text=x.txt");
		o.T = 65;
		struct sb_lm_cell cell;
		int existed = 0;
		int rc = sb_lm_import(dir, runs, &o, &cell, rd, &existed, &err);
		SB_CHECK(rc == SB_EUSAGE && strstr(err.msg, "sliding_window 64"),
			 "mistral: T 65 beyond its sliding window 64 is refused (rc %d: %s)", rc, err.msg);
	}

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
	refuse(be, "qwen3", "rope_scaling yarn", cfg_with(base, "\"rope_scaling\": null",
							  "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}"),
	       NULL, SB_EDATA, "'yarn' is not implemented");
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
	       SB_EDATA, "config.json: column");
	refuse(be, "qwen3", "an escaped lone surrogate in config.json",
	       cfg_with(base, "\"model_type\": \"qwen3\"", "\"model_type\": \"qwen3\", \"note\": \"\\udfff\""), NULL,
	       SB_EDATA, "\\udfff is a lone UTF-16 surrogate");
	free(base);
	sb_backend_close(be);
	char cmd[200];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
	if (!getenv("SB_KEEP") && system(cmd))
		fprintf(stderr, "could not remove %s\n", tmp);
	return sb_test_done();
}
