/* train_cell.c — cells, cell ids, schedules and run-directory paths. */
#include "train_cell.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "io.h"
#include "tensor.h"

static const char *switch_methods[] = {"median_switch", "early_accuracy_switch", "entropy_switch",
                                       "mechanistic_switch"};

static int is_switch(const char *m)
{
	for (size_t i = 0; i < sizeof switch_methods / sizeof switch_methods[0]; i++)
		if (!strcmp(m, switch_methods[i]))
			return 1;
	return 0;
}

void sb_cell_defaults(struct sb_cell *c)
{
	memset(c, 0, sizeof *c);
	c->epochs = 30;
	c->batch = 256;
	c->lr = 1e-3;
	c->weight_decay = 1e-4;
	c->clip = 5.0;
	snprintf(c->tier, sizeof c->tier, "compact");
	snprintf(c->arch, sizeof c->arch, "plain");
	c->limit = 0;
	c->val_fraction = 0.2;
	snprintf(c->schedule, sizeof c->schedule, "constant");
	c->alpha = 1.5;
	snprintf(c->mask, sizeof c->mask, "margin");
	c->dropout = 0.1;
}

static int get_str(const struct sb_json *v, const char *key, char *dst, size_t n, struct sb_err *err)
{
	if (v->type != SB_JSON_STRING)
		return SB_ERR(err, SB_EDATA, "field '%s' must be a string", key);
	if (v->len == 0 || v->len >= n)
		return SB_ERR(err, SB_EDATA, "field '%s' must be a non-empty string of at most %zu bytes", key, n - 1);
	for (size_t i = 0; i < v->len; i++) {
		char ch = v->text[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
		      ch == '-'))
			return SB_ERR(err, SB_EDATA, "field '%s': '%s' may only hold letters, digits, '_' and '-'", key,
			              v->text);
	}
	memcpy(dst, v->text, v->len + 1);
	return 0;
}

/* The numeric fields and their ranges (docs/sb-train.md). */
static const struct sb_cell_range ranges[] = {
	{"seed", 1, 0, 0, INT64_MAX, 0, 0},
	{"epochs", 1, 0, 1, 100000, 0, 0},
	{"batch", 1, 0, 1, 1 << 20, 0, 0},
	{"switch_epoch", 1, 0, 1, 100000, 0, 0},
	{"limit", 1, 0, 0, INT64_MAX, 0, 0},
	{"lr", 0, 0, 0, 0, 0, 10},
	{"weight_decay", 0, 0, 0, 0, 0, 10},
	{"clip", 0, 0, 0, 0, 0, 1e30},
	{"val_fraction", 0, 1, 0, 0, 0, 1}, /* the split needs a training part (sb_split_carve) */
	{"alpha", 0, 0, 0, 0, SB_ALPHA_MIN, SB_ALPHA_MAX}, /* entmax_bisect's alpha, unclamped */
	{"dropout", 0, 0, 0, 0, 0, 0.99},
};

const struct sb_cell_range *sb_cell_range(const char *key)
{
	for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
		if (!strcmp(key, ranges[i].key))
			return &ranges[i];
	return NULL;
}

void sb_cell_range_text(const struct sb_cell_range *r, char *buf, size_t n)
{
	if (r->integer)
		snprintf(buf, n, "an integer in [%lld, %lld]", (long long)r->ilo, (long long)r->ihi);
	else
		snprintf(buf, n, "a number in [%g, %g%c", r->lo, r->hi, r->hi_open ? ')' : ']');
}

int sb_cell_range_check(const struct sb_cell_range *r, double v)
{
	return isfinite(v) && v >= r->lo && (r->hi_open ? v < r->hi : v <= r->hi);
}

static int range_error(const struct sb_cell_range *r, struct sb_err *err)
{
	char what[96];
	sb_cell_range_text(r, what, sizeof what);
	return SB_ERR(err, SB_EDATA, "field '%s' must be %s", r->key, what);
}

static int get_int(const struct sb_json *v, const char *key, int64_t *out, struct sb_err *err)
{
	const struct sb_cell_range *r = sb_cell_range(key);
	int64_t x;
	if (sb_json_int64(v, &x) || x < r->ilo || x > r->ihi)
		return range_error(r, err);
	*out = x;
	return 0;
}

static int get_num(const struct sb_json *v, const char *key, double *out, struct sb_err *err)
{
	const struct sb_cell_range *r = sb_cell_range(key);
	if (v->type != SB_JSON_NUMBER || !sb_cell_range_check(r, v->number))
		return range_error(r, err);
	*out = v->number;
	return 0;
}

/* Does the method take the cell's alpha? Only entmax_bisect does: entmax15 fixes it at
 * 1.5, headwise_adaptive_entmax learns one per head, cosine_alpha schedules it. */
static int takes_alpha(const char *method)
{
	struct sb_norm nm;
	struct sb_err e = {0};
	return !is_switch(method) && strcmp(method, "cosine_alpha") && !sb_norm_parse(method, 1.5, &nm, &e) &&
	       nm.kind == SB_NORM_ENTMAX_BISECT;
}

int sb_cell_from_json(const struct sb_json *obj, int strict, struct sb_cell *c, struct sb_err *err)
{
	if (!obj || obj->type != SB_JSON_OBJECT)
		return SB_ERR(err, SB_EDATA, "a cell must be a JSON object");
	sb_cell_defaults(c);
	int have_task = 0, have_method = 0, have_seed = 0, have_switch = 0, have_alpha = 0;
	for (size_t i = 0; i < obj->n; i++) {
		const char *k = obj->keys[i];
		const struct sb_json *v = obj->items[i];
		int64_t x = 0;
		if (!strcmp(k, "task")) {
			SB_TRY(get_str(v, k, c->task, sizeof c->task, err));
			have_task = 1;
		} else if (!strcmp(k, "method")) {
			SB_TRY(get_str(v, k, c->method, sizeof c->method, err));
			have_method = 1;
		} else if (!strcmp(k, "seed")) {
			SB_TRY(get_int(v, k, &x, err));
			c->seed = (uint64_t)x;
			have_seed = 1;
		} else if (!strcmp(k, "epochs")) {
			SB_TRY(get_int(v, k, &x, err));
			c->epochs = (int)x;
		} else if (!strcmp(k, "batch")) {
			SB_TRY(get_int(v, k, &x, err));
			c->batch = (int)x;
		} else if (!strcmp(k, "switch_epoch")) {
			SB_TRY(get_int(v, k, &x, err));
			c->switch_epoch = (int)x;
			have_switch = 1;
		} else if (!strcmp(k, "limit")) {
			SB_TRY(get_int(v, k, &x, err));
			c->limit = x;
		} else if (!strcmp(k, "lr")) {
			SB_TRY(get_num(v, k, &c->lr, err));
		} else if (!strcmp(k, "weight_decay")) {
			SB_TRY(get_num(v, k, &c->weight_decay, err));
		} else if (!strcmp(k, "clip")) {
			SB_TRY(get_num(v, k, &c->clip, err));
		} else if (!strcmp(k, "val_fraction")) {
			SB_TRY(get_num(v, k, &c->val_fraction, err));
		} else if (!strcmp(k, "alpha")) {
			/* a run's cell.json (not strict) holds alpha for every method, and earlier
			 * versions took any alpha in [1, 10] (clamped to [1.05, 2] in training) */
			if (strict)
				SB_TRY(get_num(v, k, &c->alpha, err));
			else if (v->type != SB_JSON_NUMBER || !isfinite(v->number) || v->number < 1 || v->number > 10)
				return SB_ERR(err, SB_EDATA, "field 'alpha' must be a number in [1, 10]");
			else
				c->alpha = v->number;
			have_alpha = 1;
		} else if (!strcmp(k, "dropout")) {
			SB_TRY(get_num(v, k, &c->dropout, err));
		} else if (!strcmp(k, "tier")) {
			SB_TRY(get_str(v, k, c->tier, sizeof c->tier, err));
		} else if (!strcmp(k, "arch")) {
			SB_TRY(get_str(v, k, c->arch, sizeof c->arch, err));
		} else if (!strcmp(k, "schedule")) {
			SB_TRY(get_str(v, k, c->schedule, sizeof c->schedule, err));
		} else if (!strcmp(k, "mask")) {
			SB_TRY(get_str(v, k, c->mask, sizeof c->mask, err));
		} else if (strict) {
			return SB_ERR(err, SB_EDATA, "unknown cell field '%s'", k);
		}
	}
	if (!have_task)
		return SB_ERR(err, SB_EDATA, "missing field 'task'");
	if (!have_method)
		return SB_ERR(err, SB_EDATA, "missing field 'method'");
	if (!have_seed)
		return SB_ERR(err, SB_EDATA, "missing field 'seed'");
	if (have_switch && !is_switch(c->method))
		return SB_ERR(err, SB_EDATA, "field 'switch_epoch' is only for the switching methods");
	SB_TRY(sb_cell_finish(c, err));
	if (strict && have_alpha && !takes_alpha(c->method))
		return SB_ERR(err, SB_EDATA, "field 'alpha' is only for entmax_bisect (method '%s' does not use it)",
		              c->method);
	return 0;
}

int sb_cell_norm_base(const struct sb_cell *c, struct sb_norm *out, struct sb_err *err)
{
	return sb_cell_norm_at(c, 0, out, err); /* every epoch's normaliser has the same parameters */
}

int sb_cell_norm_at(const struct sb_cell *c, int epoch, struct sb_norm *out, struct sb_err *err)
{
	int e = epoch + 1; /* PROTOCOL A8 numbers epochs 1..E */
	int rc;
	if (is_switch(c->method)) {
		rc = sb_norm_parse(e < c->switch_epoch ? "topk_softmax_025" : "softmax", 1.5, out, err);
	} else if (!strcmp(c->method, "cosine_alpha")) {
		double a = 1.0 + 0.25 * (1.0 - cos(M_PI * (e - 1) / 29.0));
		rc = sb_norm_parse("entmax_bisect", a < 1.05 ? 1.05 : a, out, err);
	} else {
		rc = sb_norm_parse(c->method, c->alpha, out, err);
	}
	if (rc)
		return rc;
	out->mask = strcmp(c->mask, "exclude") ? SB_MASK_MARGIN : SB_MASK_EXCLUDE;
	return 0;
}

double sb_cell_lr_at(const struct sb_cell *c, int64_t t, int64_t T)
{
	if (!strcmp(c->schedule, "linear_decay") && T > 0)
		return c->lr * (1.0 - (double)t / (double)T);
	return c->lr;
}

static void canon_num(struct sb_jw *w, const char *key, double v)
{
	char buf[40];
	sb_fmt_f64(buf, v);
	sb_jw_key(w, key);
	sb_jw_raw(w, buf, strlen(buf));
}

void sb_cell_canonical(const struct sb_cell *c, struct sb_jw *w)
{
	/* keys in sorted (byte) order */
	sb_jw_obj(w);
	canon_num(w, "alpha", c->alpha);
	sb_jw_kstr(w, "arch", c->arch);
	sb_jw_kint(w, "batch", c->batch);
	canon_num(w, "clip", c->clip);
	canon_num(w, "dropout", c->dropout);
	sb_jw_kint(w, "epochs", c->epochs);
	sb_jw_kint(w, "limit", c->limit);
	canon_num(w, "lr", c->lr);
	sb_jw_kstr(w, "mask", c->mask);
	sb_jw_kstr(w, "method", c->method);
	sb_jw_kstr(w, "schedule", c->schedule);
	sb_jw_kint(w, "seed", (int64_t)c->seed);
	if (is_switch(c->method))
		sb_jw_kint(w, "switch_epoch", c->switch_epoch);
	sb_jw_kstr(w, "task", c->task);
	sb_jw_kstr(w, "tier", c->tier);
	canon_num(w, "val_fraction", c->val_fraction);
	canon_num(w, "weight_decay", c->weight_decay);
	sb_jw_obj_end(w);
}

void sb_cell_write_fields(const struct sb_cell *c, struct sb_jw *w)
{
	sb_jw_kstr(w, "cell_id", c->cell_id);
	sb_jw_kstr(w, "task", c->task);
	sb_jw_kstr(w, "method", c->method);
	sb_jw_kint(w, "seed", (int64_t)c->seed);
	sb_jw_kint(w, "epochs", c->epochs);
	sb_jw_kint(w, "batch", c->batch);
	sb_jw_kf64(w, "lr", c->lr);
	sb_jw_kf64(w, "weight_decay", c->weight_decay);
	sb_jw_kf64(w, "clip", c->clip);
	sb_jw_kstr(w, "tier", c->tier);
	sb_jw_kstr(w, "arch", c->arch);
	sb_jw_kint(w, "limit", c->limit);
	sb_jw_kf64(w, "val_fraction", c->val_fraction);
	sb_jw_kstr(w, "schedule", c->schedule);
	sb_jw_kf64(w, "alpha", c->alpha);
	sb_jw_kstr(w, "mask", c->mask);
	sb_jw_kf64(w, "dropout", c->dropout);
	if (is_switch(c->method))
		sb_jw_kint(w, "switch_epoch", c->switch_epoch);
}

int sb_cell_finish(struct sb_cell *c, struct sb_err *err)
{
	int l, d, h;
	/* -0 and 0 are one setting: the id must not tell them apart (nor cell.json) */
	double *const nums[] = {&c->lr, &c->weight_decay, &c->clip, &c->val_fraction, &c->alpha, &c->dropout};
	sb_unsign_zeros(nums, sizeof nums / sizeof nums[0]);
	if (sb_encoder_tier(c->tier, &l, &d, &h))
		return SB_ERR(err, SB_EDATA, "field 'tier': unknown tier '%s' (compact, medium, deep, wide)", c->tier);
	enum sb_arch a;
	if (sb_encoder_arch_parse(c->arch, &a))
		return SB_ERR(err, SB_EDATA, "field 'arch': unknown architecture '%s' (plain, local_hybrid)", c->arch);
	snprintf(c->arch, sizeof c->arch, "%s", sb_encoder_arch_name(a)); /* plain_transformer -> plain */
	if (strcmp(c->schedule, "constant") && strcmp(c->schedule, "linear_decay"))
		return SB_ERR(err, SB_EDATA, "field 'schedule': '%s' (constant, linear_decay)", c->schedule);
	if (strcmp(c->mask, "margin") && strcmp(c->mask, "exclude"))
		return SB_ERR(err, SB_EDATA, "field 'mask': '%s' (margin, exclude)", c->mask);
	if (is_switch(c->method) && c->switch_epoch < 1)
		return SB_ERR(err, SB_EDATA, "method '%s' needs 'switch_epoch' (an integer >= 1)", c->method);
	if (!is_switch(c->method) && strcmp(c->method, "cosine_alpha")) {
		struct sb_norm nm;
		struct sb_err e2 = {0};
		int rc = sb_norm_parse(c->method, c->alpha, &nm, &e2);
		if (rc && strncmp(e2.msg, "unknown ", 8))
			return SB_ERR(err, SB_EDATA, "field 'method': %s", e2.msg);
		if (rc)
			return SB_ERR(err, SB_EDATA,
			              "field 'method': unknown method '%s' (normalisers: " SB_NORM_NAMES
			              "; schedules: median_switch, early_accuracy_switch, entropy_switch, "
			              "mechanistic_switch, cosine_alpha)",
			              c->method);
		/* canonical method name ("topk_softmax" -> "topk_softmax_025") */
		snprintf(c->method, sizeof c->method, "%s", sb_norm_name(&nm));
	}
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_cell_canonical(c, &w);
	if (w.oom) {
		sb_jw_free(&w);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	char hex[SB_SHA256_HEX];
	sb_sha256_buf(w.buf, w.len, hex);
	sb_jw_free(&w);
	snprintf(c->cell_id, sizeof c->cell_id, "%s.%s.s%llu.%s.%s.%.8s", c->task, c->method,
	         (unsigned long long)c->seed, c->arch, c->tier, hex);
	return 0;
}

int sb_cell_model_cfg(const struct sb_cell *c, const struct sb_dataset *ds, struct sb_encoder_cfg *cfg,
                      struct sb_err *err)
{
	struct sb_norm nm;
	SB_TRY(sb_cell_norm_base(c, &nm, err));
	SB_TRY(sb_encoder_cfg_from_dataset(cfg, ds, c->tier, c->arch, &nm, err));
	cfg->dropout = (float)c->dropout;
	return 0;
}

int sb_cell_read(const char *run_dir, struct sb_cell *c, struct sb_err *err)
{
	char *path = sb_path_join(run_dir, "cell.json");
	if (!path)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	char *buf = NULL;
	size_t n = 0;
	int rc = sb_read_file(path, &buf, &n, 1 << 20, err);
	struct sb_json *v = NULL;
	if (!rc) {
		rc = sb_json_parse(buf, n, &v, err);
		if (!rc) {
			char want[sizeof c->cell_id];
			const char *id = sb_json_str(sb_json_get(v, "cell_id"), "");
			snprintf(want, sizeof want, "%s", id);
			rc = sb_cell_from_json(v, 0, c, err);
			if (!rc && strcmp(want, c->cell_id))
				rc = SB_ERR(err, SB_EDATA, "cell_id '%s' does not match the cell's fields (%s)", want,
				            c->cell_id);
		}
		if (rc)
			sb_err_prefix(err, "%s", path);
	}
	sb_json_free(v);
	free(buf);
	free(path);
	return rc;
}

void sb_run_checkpoint_path(char *buf, size_t n, const char *run_dir, int epochs_completed)
{
	snprintf(buf, n, "%s/epoch-%03d.safetensors", run_dir, epochs_completed);
}

void sb_run_optim_path(char *buf, size_t n, const char *run_dir, int epochs_completed)
{
	snprintf(buf, n, "%s/epoch-%03d.optim.safetensors", run_dir, epochs_completed);
}

int sb_run_open_model(const char *run_dir, int epochs_completed, const struct sb_dataset *ds, struct sb_backend *be,
                      int max_batch, struct sb_cell *cell, struct sb_encoder **out, struct sb_err *err)
{
	*out = NULL;
	SB_TRY(sb_cell_read(run_dir, cell, err));
	if (strcmp(ds->task, cell->task))
		return SB_ERR(err, SB_EDATA, "%s: dataset of task '%s' given for a '%s' run", run_dir, ds->task,
		              cell->task);
	if (epochs_completed < 1 || epochs_completed > cell->epochs)
		return SB_ERR(err, SB_EUSAGE, "%s: no epoch %d (the cell trains %d)", run_dir, epochs_completed,
		              cell->epochs);
	char path[4200];
	sb_run_checkpoint_path(path, sizeof path, run_dir, epochs_completed);
	struct sb_tensors meta;
	SB_TRY(sb_st_read_meta(path, &meta, err));
	const char *id = sb_tensors_meta(&meta, "cell_id");
	int rc = 0;
	if (!id || strcmp(id, cell->cell_id))
		rc = SB_ERR(err, SB_EDATA, "%s: checkpoint of cell '%s', run directory of '%s'", path,
		            id ? id : "(none)", cell->cell_id);
	sb_tensors_free(&meta);
	if (rc)
		return rc;
	struct sb_encoder_cfg cfg;
	struct sb_norm nm;
	struct sb_encoder *m = NULL;
	if ((rc = sb_cell_model_cfg(cell, ds, &cfg, err)) ||
	    (rc = sb_encoder_new(&cfg, be, max_batch > 0 ? max_batch : cell->batch, &m, err)) ||
	    (rc = sb_cell_norm_at(cell, epochs_completed - 1, &nm, err)) || (rc = sb_encoder_set_norm(m, &nm, err)) ||
	    (rc = sb_encoder_load_checkpoint(m, path, err))) {
		sb_encoder_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

int sb_cell_json_check(const struct sb_json *cell, const char *path, struct sb_cell *c, struct sb_err *err)
{
	struct sb_cell own;
	if (!c)
		c = &own;
	if (!path)
		path = "cell.json";
	struct sb_err e2 = {0};
	int rc = sb_cell_from_json(cell, 0, c, &e2);
	if (rc)
		return SB_ERR(err, rc == SB_EUSAGE ? SB_EDATA : rc, "%s: %s", path, e2.msg);
	const char *id = sb_json_str(sb_json_get(cell, "cell_id"), NULL);
	if (!id || strcmp(id, c->cell_id) != 0)
		return SB_ERR(err, SB_EDATA, "%s: cell_id '%s' is not the one its fields hash to (%s)", path,
		              id ? id : "(none)", c->cell_id);
	return 0;
}
