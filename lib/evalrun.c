/* evalrun.c — the evaluation call of sb-eval and sb-test (see evalrun.h), on
 * the engine: the cell parsed and checked by lib/train_cell.h, the model built
 * by sb_cell_model_cfg + sb_encoder_new as sb-train builds it, each checkpoint
 * read and hashed once, checked against its metadata, loaded, and evaluated by
 * sb_encoder_evaluate with the normaliser of its epoch. */
#include "evalrun.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_norm.h"
#include "backend.h"
#include "encoder.h"
#include "hash.h"
#include "io.h"
#include "tensor.h"
#include "train_cell.h"

struct sb_evalrun {
	struct sb_cell cell;
	struct sb_backend *be;
	struct sb_encoder *m;
	struct sb_encoder_data data;
	int have_data;
	int batch;
	int probe;
	const struct sb_dataset *ds;
};

int sb_evalrun_available(const char *device, int threads, struct sb_err *err)
{
	struct sb_backend *be = NULL;
	SB_TRY(sb_backend_open(device ? device : "cpu", threads, &be, err));
	sb_backend_close(be);
	return 0;
}

void sb_evalrun_close(struct sb_evalrun *r)
{
	if (!r)
		return;
	if (r->have_data)
		sb_encoder_data_close(r->be, &r->data);
	sb_encoder_free(r->m);
	sb_backend_close(r->be);
	free(r);
}

/* The fields sb-train derived from the cell, the dataset and the model (train/train_run.c
 * write_cell_json), where cell.json has them: an edit to one is an edited cell.json too. */
static int check_derived(const struct sb_json *cell, const char *path, const struct sb_dataset *ds,
                         const struct sb_encoder *m, struct sb_err *err)
{
	const struct {
		const char *key;
		int64_t want;
	} f[] = {{"parameter_count", (int64_t)sb_encoder_param_count(m)},
	         {"seq_len", m->T},
	         {"classes", ds->classes}};
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		const struct sb_json *v = sb_json_get(cell, f[i].key);
		int64_t got;
		if (!v)
			continue;
		if (sb_json_int64(v, &got))
			return SB_ERR(err, SB_EDATA, "%s: field '%s' must be an integer", path, f[i].key);
		if (got != f[i].want)
			return SB_ERR(err, SB_EDATA, "%s: %s %lld, but the cell's model and dataset give %lld", path,
			              f[i].key, (long long)got, (long long)f[i].want);
	}
	const struct sb_json *mo = sb_json_get(cell, "modality");
	const char *want = ds->modality == SB_IMAGE ? "image" : "text";
	if (mo && (mo->type != SB_JSON_STRING || strcmp(mo->text, want) != 0))
		return SB_ERR(err, SB_EDATA, "%s: field 'modality' must be \"%s\", the dataset's", path, want);
	return 0;
}

int sb_evalrun_cell_check(const struct sb_json *cell, const char *path, struct sb_err *err)
{
	struct sb_cell c;
	return sb_cell_json_check(cell, path, &c, err);
}

int sb_evalrun_open(const struct sb_json *cell, const struct sb_dataset *ds, const struct sb_evalrun_opts *o,
                    struct sb_evalrun **out, struct sb_err *err)
{
	*out = NULL;
	struct sb_evalrun *r = calloc(1, sizeof *r);
	if (!r)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = sb_cell_json_check(cell, o ? o->cell_path : NULL, &r->cell, err);
	if (rc) {
		free(r);
		return rc;
	}
	if (strcmp(ds->task, r->cell.task) != 0) {
		rc = SB_ERR(err, SB_EDATA, "%s: a dataset of task '%s', the cell's task is '%s'", ds->path, ds->task,
		            r->cell.task);
		free(r);
		return rc;
	}
	r->batch = o && o->batch > 0 ? o->batch : r->cell.batch;
	r->probe = o ? o->probe : 0;
	r->ds = ds;
	struct sb_encoder_cfg cfg;
	if ((rc = sb_cell_model_cfg(&r->cell, ds, &cfg, err)) ||
	    (rc = sb_backend_open(o && o->device ? o->device : "cpu", o ? o->threads : 0, &r->be, err)) ||
	    (rc = sb_encoder_new(&cfg, r->be, r->batch, &r->m, err)) ||
	    (rc = check_derived(cell, o && o->cell_path ? o->cell_path : "cell.json", ds, r->m, err)) ||
	    (rc = sb_encoder_data_open(r->be, ds, &r->data, err))) {
		sb_evalrun_close(r);
		return rc;
	}
	r->have_data = 1;
	*out = r;
	return 0;
}

int sb_evalrun_checkpoint(struct sb_evalrun *r, const char *checkpoint, const char *expect_sha256, int epochs_completed,
                          const uint32_t *idx, int64_t n, struct sb_evalrun_result *res, uint8_t *correct,
                          struct sb_err *err)
{
	char *buf;
	size_t len;
	SB_TRY(sb_read_file(checkpoint, &buf, &len, 0, err));
	if (expect_sha256) {
		char hex[SB_SHA256_HEX];
		sb_sha256_buf(buf, len, hex);
		if (strcmp(hex, expect_sha256) != 0) {
			free(buf);
			return SB_ERR(err, SB_EDATA, "%s: SHA-256 mismatch: expected %s, actual %s", checkpoint,
			              expect_sha256, hex);
		}
	}
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	int rc = sb_st_parse(buf, len, checkpoint, &ts, err);
	struct sb_norm nm;
	if (!rc) {
		const char *fmt = sb_tensors_meta(&ts, "format");
		const char *id = sb_tensors_meta(&ts, "cell_id");
		const char *ec = sb_tensors_meta(&ts, "epochs_completed");
		const char *norm = sb_tensors_meta(&ts, "norm");
		char want[16];
		snprintf(want, sizeof want, "%d", epochs_completed);
		if (!fmt || strcmp(fmt, "sparsebench.checkpoint") != 0)
			rc = SB_ERR(err, SB_EDATA, "%s: not a sparsebench checkpoint (metadata 'format')", checkpoint);
		else if (!id || strcmp(id, r->cell.cell_id) != 0)
			rc = SB_ERR(err, SB_EDATA, "%s: a checkpoint of cell '%s', not of '%s'", checkpoint,
			            id ? id : "?", r->cell.cell_id);
		else if (!ec || strcmp(ec, want) != 0)
			rc = SB_ERR(err, SB_EDATA, "%s: metadata says %s epochs completed, expected %d", checkpoint,
			            ec ? ec : "?", epochs_completed);
		else if (!(rc = sb_cell_norm_at(&r->cell, epochs_completed - 1, &nm, err)) && norm &&
		         strcmp(norm, sb_norm_name(&nm)) != 0)
			rc = SB_ERR(err, SB_EDATA, "%s: trained with normaliser '%s', the cell's schedule says '%s'",
			            checkpoint, norm, sb_norm_name(&nm));
	}
	if (!rc && (rc = sb_encoder_from_tensors(r->m, &ts, 0, err)))
		sb_err_prefix(err, "%s", checkpoint);
	sb_tensors_free(&ts);
	free(buf);
	if (!rc)
		rc = sb_encoder_set_norm(r->m, &nm, err);
	if (rc)
		return rc;
	struct sb_eval_result e;
	if ((rc = sb_encoder_evaluate(r->m, &r->data, idx, n, r->batch, &e, correct, err)))
		return rc;
	res->n = e.n;
	res->correct = e.correct;
	res->accuracy = e.accuracy;
	res->macro_f1 = e.macro_f1;
	res->loss = e.loss;
	res->attention_density = e.attention_density;
	res->attention_entropy = e.attention_entropy;
	res->alpha_mean = e.alpha_mean;
	res->alpha_std = e.alpha_std;
	if (r->probe)
		return sb_probe_features(r->m, &r->data, r->ds, idx, n, &res->probe, err);
	res->probe.n = 0;
	return 0;
}

const char *sb_evalrun_device(const struct sb_evalrun *r)
{
	return r ? r->be->device : "cpu";
}
int sb_evalrun_threads(const struct sb_evalrun *r)
{
	return r ? r->be->threads : 1;
}
