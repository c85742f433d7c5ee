/* test_guard_evalrun — the evaluation call of sb-eval and sb-test (lib/evalrun.h)
 * against the engine's own evaluation: a model of the tiny guard fixture task is
 * initialised, trained a few steps and saved as a checkpoint; evaluating that file
 * through sb_evalrun must give exactly the metrics and correctness bits of
 * sb_encoder_evaluate on the model in memory (same code path, same bits: any
 * difference means the checkpoint round trip or the cell's configuration is wrong).
 * A checkpoint whose bytes do not match the expected SHA-256 must be refused. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "../harness.h"

#if defined(__has_include)
#if __has_include("encoder.h")
#define HAVE_ENGINE 1
#endif
#endif

#ifndef HAVE_ENGINE
int main(void)
{
	/* before the engine is merged there is nothing to compare against */
	SB_CHECK(1, "# SKIP no engine in this build (lib/encoder.h absent)");
	return sb_test_done();
}
#else

#include "encoder.h"
#include "evalrun.h"
#include "hash.h"
#include "io.h"

static void one(const char *method, const char *pool)
{
	struct sb_err err = {0};
	struct sb_dataset ds;
	if (sb_dataset_read(pool, 0, &ds, &err)) {
		SB_CHECK(0, "read %s (%s)", pool, err.msg);
		return;
	}
	struct sb_split split;
	sb_split_carve(&ds, 0, 0.2, 0, &split, &err);
	struct sb_norm nm;
	sb_norm_parse(method, 1.5, &nm, &err);
	struct sb_encoder_cfg cfg;
	sb_encoder_cfg_from_dataset(&cfg, &ds, "compact", "plain", &nm, &err);
	struct sb_backend *be;
	struct sb_encoder *m;
	struct sb_encoder_data data;
	int rc = sb_backend_open("cpu", 2, &be, &err);
	rc = rc ? rc : sb_encoder_new(&cfg, be, 16, &m, &err);
	rc = rc ? rc : sb_encoder_init(m, 0, &err);
	rc = rc ? rc : sb_encoder_data_open(be, &ds, &data, &err);
	SB_CHECK(rc == 0, "%s: model built (%s)", method, err.msg);
	if (rc)
		return;
	struct sb_step_opts so;
	sb_step_opts_default(&so);
	for (int s = 0; s < 5; s++) {
		struct sb_step_result sr;
		so.step = s;
		sb_encoder_train_step(m, &data, split.train + (s * 8) % 40, 8, &so, &sr, &err);
	}
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	char dir[] = "/tmp/sbevalrunXXXXXX", path[300];
	mkdtemp(dir);
	snprintf(path, sizeof path, "%s/epoch-001.safetensors", dir);
	rc = sb_encoder_to_tensors(m, &ts, 0, &err);
	rc = rc ? rc : sb_st_write(path, &ts, &err);
	sb_tensors_free(&ts);
	SB_CHECK(rc == 0, "%s: checkpoint written (%s)", method, err.msg);
	struct sb_eval_result want;
	uint8_t wbits[64] = {0}, gbits[64] = {0};
	sb_encoder_evaluate(m, &data, split.val, split.n_val, 16, &want, wbits, &err);

	char hex[SB_SHA256_HEX];
	sb_sha256_file(path, hex, NULL, &err);
	char cell_text[256];
	snprintf(cell_text, sizeof cell_text,
	         "{\"method\":\"%s\",\"tier\":\"compact\",\"arch\":\"plain\",\"batch\":16}", method);
	struct sb_json *cell;
	sb_json_parse(cell_text, strlen(cell_text), &cell, &err);
	struct sb_evalrun *er;
	struct sb_evalrun_opts eo = {.device = "cpu", .threads = 1};
	struct sb_evalrun_result got;
	rc = sb_evalrun_open(cell, &ds, &eo, &er, &err);
	rc = rc ? rc : sb_evalrun_checkpoint(er, path, hex, split.val, split.n_val, &got, gbits, &err);
	SB_CHECK(rc == 0, "%s: evaluated through evalrun (%s)", method, err.msg);
	SB_CHECK(got.n == want.n && got.correct == want.correct && got.accuracy == want.accuracy &&
	             got.macro_f1 == want.macro_f1 && got.loss == want.loss &&
	             got.attention_density == want.attention_density &&
	             got.attention_entropy == want.attention_entropy &&
	             (got.alpha_mean == want.alpha_mean || (isnan(got.alpha_mean) && isnan(want.alpha_mean))),
	         "%s: metrics identical to the engine's (acc %.9g vs %.9g, loss %.9g vs %.9g)", method, got.accuracy,
	         want.accuracy, got.loss, want.loss);
	SB_CHECK(memcmp(gbits, wbits, sizeof gbits) == 0, "%s: correctness bits identical", method);
	int pop = 0;
	for (int64_t i = 0; i < split.n_val; i++)
		pop += (gbits[i / 8] >> (i % 8)) & 1;
	SB_CHECK(pop == got.correct, "%s: bits set = correct count (%d vs %lld)", method, pop, (long long)got.correct);
	SB_CHECK(!strcmp(method, "headwise_adaptive_entmax") ? isfinite(got.alpha_mean) : isnan(got.alpha_mean),
	         "%s: alpha statistics only for HAE", method);
	char bad[SB_SHA256_HEX];
	memcpy(bad, hex, sizeof bad);
	bad[0] = bad[0] == '0' ? '1' : '0';
	rc = sb_evalrun_checkpoint(er, path, bad, split.val, split.n_val, &got, gbits, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "mismatch"), "%s: a checkpoint with other bytes is refused (%s)",
	         method, err.msg);
	sb_evalrun_close(er);
	sb_json_free(cell);
	unlink(path);
	rmdir(dir);
	sb_encoder_data_close(be, &data);
	sb_encoder_free(m);
	sb_backend_close(be);
	sb_split_free(&split);
	sb_dataset_free(&ds);
}

int main(void)
{
	const char *top = getenv("SB_TOP") ? getenv("SB_TOP") : ".";
	char pool[1024];
	snprintf(pool, sizeof pool, "%s/tests/fixtures/guard/data/guardtask/pool.safetensors", top);
	one("softmax", pool);
	one("topk_softmax_025", pool);
	one("headwise_adaptive_entmax", pool);
	struct sb_err err = {0};
	struct sb_json *cell;
	const char *bad = "{\"method\":\"no_such_method\"}";
	sb_json_parse(bad, strlen(bad), &cell, &err);
	struct sb_dataset ds;
	sb_dataset_read(pool, 0, &ds, &err);
	struct sb_evalrun *er;
	int rc = sb_evalrun_open(cell, &ds, NULL, &er, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "no_such_method"), "an unknown method in cell.json is bad data (%s)",
	         err.msg);
	sb_json_free(cell);
	sb_dataset_free(&ds);
	return sb_test_done();
}

#endif
