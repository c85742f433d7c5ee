/* test_lm_eval_turns — the probe loop of sb_lm_eval_run on a multi-turn probe
 * (niah_multiquery, four turns), against a model whose greedy answers are known:
 *
 * an "oracle" decoder (one A layer whose every weight is zero, so that the residual
 * stream is the learned position vector alone; position t's vector points at the byte
 * text[t+1] of the probe and the untied head reads it back), which therefore writes the
 * probe's own text. Every turn is then right, and the probe.result record must say so
 * with output equal to expected (turn 0's answer, docs/lm.md: "`expected` and `output`
 * show the first turn while `correct` requires every turn"). With the oracle broken at
 * turn 1's first answer byte, correct must be false and output still turn 0's answer.
 * Before the fix, output was the last turn's (all right) or the first wrong turn's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../harness.h"
#include "backend.h"
#include "hash.h"
#include "json.h"
#include "lm_data.h"
#include "lm_eval.h"
#include "lm_model.h"
#include "lm_probe.h"
#include "lm_train.h"
#include "rng.h"
#include "tensor.h"

enum { T = 192 };

/* Write RUN_DIR for the cell with the oracle of `text` (T bytes); a byte `wrong` >= 0 is
 * predicted at position `at` instead of text[at + 1]. */
static int write_run(struct sb_backend *be, struct sb_lm_cell *cell, const char *run_dir, const uint8_t *text,
		     int at, int wrong, struct sb_err *err)
{
	struct sb_lm_model *m = NULL;
	SB_TRY(sb_lm_model_new(be, &cell->model, &m, err));
	memset(m->p, 0, m->n_floats * sizeof *m->p);
	int d = m->cfg.d;
	for (int j = 0; j < d; j++)
		m->w.lnf_w[j] = 1.0f;
	for (int v = 0; v < 256; v++) /* head: logit v reads coordinate v */
		m->w.head[(size_t)v * d + v] = 1.0f;
	for (int t = 0; t + 1 < T; t++)
		m->w.pos[(size_t)t * d + (t == at && wrong >= 0 ? wrong : text[t + 1])] = 10.0f;
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	char path[4300], sha[SB_SHA256_HEX];
	snprintf(path, sizeof path, "%s/model.safetensors", run_dir);
	int rc = sb_lm_model_to_tensors(m, &ts, err);
	if (!rc)
		rc = sb_lm_ckpt_write(path, &ts, cell, 0, "mixture", "oracle", sha, err);
	if (!rc)
		rc = sb_lm_cell_write(run_dir, cell, (int64_t)m->n_floats, NULL, err);
	sb_tensors_free(&ts);
	sb_lm_model_free(m);
	return rc;
}

/* Evaluate RUN_DIR (dense, niah_multiquery, one probe) and return its probe.result. */
static struct sb_json *eval_probe(struct sb_backend *be, const char *run_dir, struct sb_err *err)
{
	struct sb_lm_eval_opts o;
	sb_lm_eval_defaults(&o);
	const char *set[] = {"masks=dense", "tasks=niah_multiquery", "probes=1", "windows=1", "bench_reps=1",
			     "budgets=8"};
	for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
		if (sb_lm_eval_set(&o, set[i], err))
			return NULL;
	FILE *f = tmpfile();
	if (!f)
		return NULL;
	struct sb_jw w;
	sb_jw_init(&w, f);
	int rc = sb_lm_eval_run(be, run_dir, &o, &w, err);
	sb_jw_free(&w);
	struct sb_json *res = NULL;
	rewind(f);
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while (!rc && !res && (n = getline(&line, &cap, f)) > 0) {
		struct sb_json *v;
		if (sb_json_parse(line, (size_t)n, &v, err))
			break;
		if (!strcmp(sb_json_str(sb_json_get(v, "kind"), ""), "probe.result"))
			res = v;
		else
			sb_json_free(v);
	}
	free(line);
	fclose(f);
	return res;
}

int main(void)
{
	struct sb_backend *be;
	struct sb_err err = {0};
	if (sb_backend_cpu_open(1, &be, &err)) {
		SB_CHECK(0, "backend: %s", err.msg);
		return sb_test_done();
	}
	const char *top = getenv("SB_TOP");
	char corpus[4200];
	snprintf(corpus, sizeof corpus, "%s/tests/fixtures/lm/shakespeare-head.txt", top ? top : ".");
	char dir[] = "/tmp/sblmturns.XXXXXX";
	if (!mkdtemp(dir)) {
		SB_CHECK(0, "mkdtemp");
		return sb_test_done();
	}
	/* the cell: one A layer, learned positions, an untied head, d = 256 (one coordinate per byte) */
	char js[5000];
	snprintf(js, sizeof js,
		 "{\"family\":\"lm\",\"seed\":0,\"model\":{\"d\":256,\"pattern\":\"A\",\"heads\":4,\"ffn\":16,"
		 "\"pos\":\"learned\",\"tied\":0},\"T\":%d,\"corpora\":[\"shake=%s\"]}",
		 T, corpus);
	struct sb_json *cj = NULL;
	struct sb_lm_cell cell;
	int rc = sb_json_parse(js, strlen(js), &cj, &err);
	if (!rc)
		rc = sb_lm_cell_parse(&cell, cj, &err);
	if (!rc)
		rc = sb_lm_cell_id(&cell, &err);
	sb_json_free(cj);
	char run_dir[4300];
	snprintf(run_dir, sizeof run_dir, "%s/%s", dir, cell.cell_id);
	if (!rc && mkdir(run_dir, 0777))
		rc = SB_ERR(&err, SB_EIO, "mkdir %s", run_dir);
	/* the probe the evaluation makes: seed 0, index 0 of 1, depth 0.5, the haystack's valid part */
	struct sb_lm_corpus hay = {0};
	struct sb_lm_probe p = {0};
	if (!rc)
		rc = sb_lm_corpus_read(cell.corpora[0], "valid", &hay, &err);
	if (!rc)
		rc = sb_lm_probe_make(SB_LM_NIAH_MULTIQUERY, T, hay.bytes, hay.n, 0, SB_RNG_SYNTH, 0,
				      sb_lm_probe_depth(0, 1), &p, &err);
	SB_CHECK(!rc && p.n_turns == 4, "a niah_multiquery probe of %d bytes, 4 turns (%s)", T, err.msg);
	if (!rc) {
		char want0[64];
		snprintf(want0, sizeof want0, "%.*s", p.answer_end[0] - p.answer_beg[0] - 1,
			 (const char *)p.text + p.answer_beg[0]);
		/* 1. the oracle: every turn right */
		struct sb_json *r = NULL;
		rc = write_run(be, &cell, run_dir, p.text, -1, -1, &err);
		if (!rc)
			r = eval_probe(be, run_dir, &err);
		SB_CHECK(r != NULL, "evaluated the oracle (%s)", err.msg);
		if (r) {
			const char *ex = sb_json_str(sb_json_get(r, "expected"), "?");
			const char *out = sb_json_str(sb_json_get(r, "output"), "?");
			SB_CHECK(sb_json_bool(sb_json_get(r, "correct"), 0) == 1,
				 "the oracle answers all 4 turns right: correct true (output '%s')", out);
			SB_CHECK(!strcmp(ex, want0), "expected is turn 0's answer: '%s' (want '%s')", ex, want0);
			SB_CHECK(!strcmp(out, ex), "a correct probe's output equals its expected: output '%s', expected '%s'",
				 out, ex);
			sb_json_free(r);
		}
		/* 2. the oracle wrong at turn 1's first answer byte */
		r = NULL;
		char sha_path[4400];
		snprintf(sha_path, sizeof sha_path, "%s/model.safetensors", run_dir);
		remove(sha_path);
		rc = write_run(be, &cell, run_dir, p.text, p.answer_beg[1] - 1, p.text[p.answer_beg[1]] == '1' ? '2' : '1',
			       &err);
		if (!rc)
			r = eval_probe(be, run_dir, &err);
		SB_CHECK(r != NULL, "evaluated the broken oracle (%s)", err.msg);
		if (r) {
			const char *ex = sb_json_str(sb_json_get(r, "expected"), "?");
			const char *out = sb_json_str(sb_json_get(r, "output"), "?");
			SB_CHECK(sb_json_bool(sb_json_get(r, "correct"), 1) == 0, "turn 1 wrong: correct false");
			SB_CHECK(!strcmp(out, want0) && !strcmp(ex, want0),
				 "output is turn 0's output, beside turn 0's expected: output '%s', expected '%s' (want '%s')",
				 out, ex, want0);
			sb_json_free(r);
		}
	}
	sb_lm_probe_free(&p);
	sb_lm_corpus_free(&hay);
	char cmd[4400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd)) {
	}
	sb_backend_close(be);
	return sb_test_done();
}
