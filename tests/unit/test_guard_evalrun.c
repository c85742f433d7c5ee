/* test_guard_evalrun — the evaluation call of sb-eval and sb-test (lib/evalrun.h)
 * against the engine's own evaluation. For several methods (and a switching
 * schedule), a model of the tiny guard fixture task is built from a cell as
 * sb-train builds it, trained a few steps and saved as sb-train saves a
 * checkpoint (metadata: format, cell_id, epochs_completed, norm). Evaluating that
 * file through sb_evalrun must give exactly the metrics and correctness bits of
 * sb_encoder_evaluate on the model in memory with the epoch's normaliser (same
 * code path, so any difference means the checkpoint round trip, the cell's
 * configuration or the normaliser is wrong). Then every way the file can fail to
 * be the cell's checkpoint of that epoch is refused: other bytes than the
 * expected SHA-256, another cell_id, another epoch, another normaliser, and a
 * cell.json whose fields do not hash to its cell_id. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "../harness.h"
#include "encoder.h"
#include "evalrun.h"
#include "hash.h"
#include "io.h"
#include "train_cell.h"

static char pool[1024], dir[64];

/* Save the model as sb-train does, with the given metadata. */
static int save(struct sb_encoder *m, const char *path, const char *cell_id, const char *epochs, const char *norm,
                struct sb_err *err)
{
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	int rc = sb_encoder_to_tensors(m, &ts, 0, err);
	rc = rc ? rc : sb_tensors_set_meta(&ts, "format", "sparsebench.checkpoint", err);
	rc = rc ? rc : sb_tensors_set_meta(&ts, "cell_id", cell_id, err);
	rc = rc ? rc : sb_tensors_set_meta(&ts, "epochs_completed", epochs, err);
	rc = rc ? rc : sb_tensors_set_meta(&ts, "norm", norm, err);
	rc = rc ? rc : sb_st_write(path, &ts, err);
	sb_tensors_free(&ts);
	return rc;
}

/* The cell as cell.json holds it: its fields and cell_id. */
static struct sb_json *cell_json(const struct sb_cell *c, const char *cell_id)
{
	struct sb_jw w;
	struct sb_err err = {0};
	/* the fields with the given cell_id (sb_cell_write_fields writes cell_id itself:
	 * writing it here too made a key twice, which the JSON reader now refuses) */
	struct sb_cell cc = *c;
	snprintf(cc.cell_id, sizeof cc.cell_id, "%s", cell_id);
	sb_jw_init(&w, NULL);
	sb_jw_obj(&w);
	sb_cell_write_fields(&cc, &w);
	sb_jw_obj_end(&w);
	struct sb_json *v = NULL;
	sb_json_parse(w.buf, w.len, &v, &err);
	sb_jw_free(&w);
	return v;
}

static void one(const char *method, int switch_epoch, int epochs_completed)
{
	struct sb_err err = {0};
	struct sb_dataset ds;
	if (sb_dataset_read(pool, 0, &ds, &err)) {
		SB_CHECK(0, "read %s (%s)", pool, err.msg);
		return;
	}
	struct sb_cell c;
	sb_cell_defaults(&c);
	snprintf(c.task, sizeof c.task, "%s", ds.task);
	snprintf(c.method, sizeof c.method, "%s", method);
	c.seed = 3;
	c.epochs = 3;
	c.batch = 16;
	c.switch_epoch = switch_epoch;
	int rc = sb_cell_finish(&c, &err);
	SB_CHECK(rc == 0, "%s: cell %s (%s)", method, c.cell_id, err.msg);
	struct sb_split split;
	sb_split_carve(&ds, c.seed, c.val_fraction, c.limit, &split, &err);
	struct sb_encoder_cfg cfg;
	struct sb_backend *be = NULL;
	struct sb_encoder *m = NULL;
	struct sb_encoder_data data;
	struct sb_norm nm;
	rc = sb_cell_model_cfg(&c, &ds, &cfg, &err);
	rc = rc ? rc : sb_backend_open("cpu", 2, &be, &err);
	rc = rc ? rc : sb_encoder_new(&cfg, be, 16, &m, &err);
	rc = rc ? rc : sb_encoder_init(m, c.seed, &err);
	rc = rc ? rc : sb_encoder_data_open(be, &ds, &data, &err);
	rc = rc ? rc : sb_cell_norm_at(&c, epochs_completed - 1, &nm, &err);
	rc = rc ? rc : sb_encoder_set_norm(m, &nm, &err);
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
	char path[300], ec[16];
	snprintf(path, sizeof path, "%s/epoch-%03d.safetensors", dir, epochs_completed);
	snprintf(ec, sizeof ec, "%d", epochs_completed);
	rc = save(m, path, c.cell_id, ec, sb_norm_name(&nm), &err);
	SB_CHECK(rc == 0, "%s: checkpoint written (%s)", method, err.msg);
	struct sb_eval_result want;
	uint8_t wbits[64] = {0}, gbits[64] = {0};
	sb_encoder_evaluate(m, &data, split.val, split.n_val, 16, &want, wbits, &err);

	char hex[SB_SHA256_HEX];
	sb_sha256_file(path, hex, NULL, &err);
	struct sb_json *cell = cell_json(&c, c.cell_id);
	struct sb_evalrun *er = NULL;
	struct sb_evalrun_opts eo = {.device = "cpu", .threads = 1};
	struct sb_evalrun_result got;
	rc = sb_evalrun_open(cell, &ds, &eo, &er, &err);
	if (!rc)
		rc = sb_evalrun_checkpoint(er, path, hex, epochs_completed, split.val, split.n_val, &got, gbits, &err);
	SB_CHECK(rc == 0, "%s: evaluated through evalrun (%s)", method, err.msg);
	if (rc)
		return;
	SB_CHECK(got.n == want.n && got.correct == want.correct && got.accuracy == want.accuracy &&
	             got.macro_f1 == want.macro_f1 && got.loss == want.loss &&
	             got.attention_density == want.attention_density &&
	             got.attention_entropy == want.attention_entropy &&
	             (got.alpha_mean == want.alpha_mean || (isnan(got.alpha_mean) && isnan(want.alpha_mean))),
	         "%s (epoch %d, %s): metrics identical to the engine's (acc %.9g vs %.9g, loss %.9g vs %.9g, density "
	         "%.9g vs %.9g)",
	         method, epochs_completed, sb_norm_name(&nm), got.accuracy, want.accuracy, got.loss, want.loss,
	         got.attention_density, want.attention_density);
	SB_CHECK(memcmp(gbits, wbits, sizeof gbits) == 0, "%s: correctness bits identical", method);
	int pop = 0;
	for (int64_t i = 0; i < split.n_val; i++)
		pop += (gbits[i / 8] >> (i % 8)) & 1;
	SB_CHECK(pop == got.correct, "%s: bits set = correct count (%d vs %lld)", method, pop, (long long)got.correct);
	SB_CHECK(!strcmp(method, "headwise_adaptive_entmax") ? isfinite(got.alpha_mean) : isnan(got.alpha_mean),
	         "%s: alpha statistics only for HAE", method);

	/* what must be refused */
	char bad[SB_SHA256_HEX];
	memcpy(bad, hex, sizeof bad);
	bad[0] = bad[0] == '0' ? '1' : '0';
	rc = sb_evalrun_checkpoint(er, path, bad, epochs_completed, split.val, split.n_val, &got, gbits, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "mismatch"), "%s: other bytes than expected refused (%s)", method,
	         err.msg);
	rc = sb_evalrun_checkpoint(er, path, NULL, epochs_completed + 1, split.val, split.n_val, &got, gbits, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "epochs completed"), "%s: another epoch refused (%s)", method,
	         err.msg);
	save(m, path, "t.softmax.s0.plain.compact.00000000", ec, sb_norm_name(&nm), &err);
	rc = sb_evalrun_checkpoint(er, path, NULL, epochs_completed, split.val, split.n_val, &got, gbits, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "a checkpoint of cell"),
	         "%s: another cell's checkpoint refused (%s)", method, err.msg);
	save(m, path, c.cell_id, ec, strcmp(sb_norm_name(&nm), "sparsemax") ? "sparsemax" : "softmax", &err);
	rc = sb_evalrun_checkpoint(er, path, NULL, epochs_completed, split.val, split.n_val, &got, gbits, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "normaliser"), "%s: another normaliser refused (%s)", method,
	         err.msg);
	sb_evalrun_close(er);
	sb_json_free(cell);
	/* a cell.json edited after training: its fields no longer hash to its cell_id */
	struct sb_cell c2 = c;
	c2.seed = 4;
	cell = cell_json(&c2, c.cell_id);
	rc = sb_evalrun_open(cell, &ds, &eo, &er, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "hash to"), "%s: an edited cell.json refused (%s)", method, err.msg);
	if (!rc)
		sb_evalrun_close(er);
	/* named by the path it was read from, by the check alone (what sb-eval and sb-test call
	 * before anything is evaluated) and by sb_evalrun_open */
	rc = sb_evalrun_cell_check(cell, "runs/x/cell.json", &err);
	SB_CHECK(rc == SB_EDATA && strncmp(err.msg, "runs/x/cell.json: cell_id '", 27) == 0 &&
	             strstr(err.msg, "hash to"),
	         "%s: sb_evalrun_cell_check names the file (%s)", method, err.msg);
	struct sb_evalrun_opts eo2 = eo;
	eo2.cell_path = "runs/x/cell.json";
	er = NULL;
	rc = sb_evalrun_open(cell, &ds, &eo2, &er, &err);
	SB_CHECK(rc == SB_EDATA && strncmp(err.msg, "runs/x/cell.json: ", 18) == 0,
	         "%s: sb_evalrun_open names opts.cell_path (%s)", method, err.msg);
	if (!rc)
		sb_evalrun_close(er);
	struct sb_json *good = cell_json(&c, c.cell_id);
	rc = sb_evalrun_cell_check(good, "runs/x/cell.json", &err);
	SB_CHECK(rc == 0, "%s: the unedited cell.json passes the check (%s)", method, rc ? err.msg : "ok");
	sb_json_free(good);
	sb_json_free(cell);
	unlink(path);
	sb_encoder_data_close(be, &data);
	sb_encoder_free(m);
	sb_backend_close(be);
	sb_split_free(&split);
	sb_dataset_free(&ds);
}

int main(void)
{
	const char *top = getenv("SB_TOP") ? getenv("SB_TOP") : ".";
	snprintf(pool, sizeof pool, "%s/tests/fixtures/guard/data/guardtask/pool.safetensors", top);
	snprintf(dir, sizeof dir, "/tmp/sbevalrunXXXXXX");
	if (!mkdtemp(dir))
		return 1;
	one("softmax", 0, 2);
	one("topk_softmax_025", 0, 3);
	one("headwise_adaptive_entmax", 0, 1);
	one("mechanistic_switch", 2, 1); /* epoch 1 of a switch at 2: still top-k */
	one("mechanistic_switch", 2, 3); /* after the switch: softmax */
	rmdir(dir);
	return sb_test_done();
}
