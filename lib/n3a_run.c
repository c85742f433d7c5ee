/* n3a_run.c — N3-A cells and the block runner: the main trajectories D and S, the forks
 * from S into S/L/P/G/N, the S-replay check and the records (see n3a.h; spec §2.8-2.9). */
#include "n3a.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hash.h"
#include "io.h"
#include "record.h"

static const int REG_EVAL[] = {0, 32, 64, 128, 160, 256, 512, 768, 800, 1024};
static const int REG_PARENTS[] = {128, 768};

int sb_n3a_is_cell(const struct sb_json *obj)
{
	return obj && obj->type == SB_JSON_OBJECT && !strcmp(sb_json_str(sb_json_get(obj, "family"), ""), "n3a");
}

static int field_int(const struct sb_json *v, const char *key, int lo, int hi, int *out, struct sb_err *err)
{
	int64_t x;
	if (sb_json_int64(v, &x) || x < lo || x > hi)
		return SB_ERR(err, SB_EDATA, "n3a cell: field '%s': an integer in [%d, %d] expected", key, lo, hi);
	*out = (int)x;
	return 0;
}

static int field_pos(const struct sb_json *v, const char *key, double *out, struct sb_err *err)
{
	if (v->type != SB_JSON_NUMBER || !isfinite(v->number) || v->number < 0)
		return SB_ERR(err, SB_EDATA, "n3a cell: field '%s': a finite non-negative number expected", key);
	*out = v->number;
	return 0;
}

static int field_steps(const struct sb_json *v, const char *key, int *out, int *n, int cap, struct sb_err *err)
{
	if (v->type != SB_JSON_ARRAY || v->n < 1 || v->n > (size_t)cap)
		return SB_ERR(err, SB_EDATA, "n3a cell: field '%s': an array of 1 to %d integers expected", key, cap);
	for (size_t i = 0; i < v->n; i++) {
		SB_TRY(field_int(v->items[i], key, 0, 1 << 30, &out[i], err));
		if (i && out[i] <= out[i - 1])
			return SB_ERR(err, SB_EDATA, "n3a cell: field '%s': steps must increase", key);
	}
	*n = (int)v->n;
	return 0;
}

static int has_step(const struct sb_n3a_cell *c, int s)
{
	for (int i = 0; i < c->neval; i++)
		if (c->eval_steps[i] == s)
			return 1;
	return 0;
}

int sb_n3a_cell_parse(struct sb_n3a_cell *c, const struct sb_json *obj, struct sb_err *err)
{
	memset(c, 0, sizeof *c);
	if (!sb_n3a_is_cell(obj))
		return SB_ERR(err, SB_EDATA, "not an N3-A cell (\"family\": \"n3a\")");
	c->arch = -1;
	c->n = 32;
	c->k = 8;
	c->eps = -1;
	c->ntrain = 4096;
	c->nval = 2048;
	c->batch = 128;
	c->updates = 1024;
	c->fork_updates = 32;
	c->lr = 1e-3f;
	c->wd = 1e-4f;
	c->b1 = 0.9f;
	c->b2 = 0.999f;
	c->adam_eps = 1e-8f;
	int have_r = 0, have_seed = 0, have_eval = 0, have_par = 0;
	for (size_t i = 0; i < obj->n; i++) {
		const char *k = obj->keys[i];
		const struct sb_json *v = obj->items[i];
		double d = 0;
		int rc = 0;
		if (!strcmp(k, "family")) {
			continue;
		} else if (!strcmp(k, "arch")) {
			c->arch = sb_n3a_arch_parse(v->type == SB_JSON_STRING ? v->text : NULL);
			if (c->arch < 0)
				rc = SB_ERR(err, SB_EDATA, "n3a cell: field 'arch': \"query\" or \"transformer\" expected");
		} else if (!strcmp(k, "seed")) {
			int64_t s;
			if (sb_json_int64(v, &s) || s < 0)
				rc = SB_ERR(err, SB_EDATA, "n3a cell: field 'seed': a non-negative integer expected");
			c->seed = (uint64_t)s;
			have_seed = 1;
		} else if (!strcmp(k, "r")) {
			rc = field_int(v, k, 1, SB_N3A_MAXN, &c->r, err);
			have_r = 1;
		} else if (!strcmp(k, "n")) {
			rc = field_int(v, k, 2, SB_N3A_MAXN, &c->n, err);
		} else if (!strcmp(k, "k")) {
			rc = field_int(v, k, 1, SB_N3A_MAXN, &c->k, err);
		} else if (!strcmp(k, "epsilon")) {
			rc = field_pos(v, k, &c->eps, err);
			if (!rc && !(c->eps < 1))
				rc = SB_ERR(err, SB_EDATA, "n3a cell: field 'epsilon': in [0, 1) expected");
		} else if (!strcmp(k, "train")) {
			rc = field_int(v, k, 1, 1 << 24, &c->ntrain, err);
		} else if (!strcmp(k, "validation")) {
			rc = field_int(v, k, 1, 1 << 24, &c->nval, err);
		} else if (!strcmp(k, "batch")) {
			rc = field_int(v, k, 1, 1 << 16, &c->batch, err);
		} else if (!strcmp(k, "updates")) {
			rc = field_int(v, k, 1, 1 << 24, &c->updates, err);
		} else if (!strcmp(k, "fork_updates")) {
			rc = field_int(v, k, 1, 1 << 24, &c->fork_updates, err);
		} else if (!strcmp(k, "eval_steps")) {
			rc = field_steps(v, k, c->eval_steps, &c->neval, SB_N3A_MAXEVAL, err);
			have_eval = 1;
		} else if (!strcmp(k, "parents")) {
			rc = field_steps(v, k, c->parents, &c->nparents, SB_N3A_MAXPAR, err);
			have_par = 1;
		} else if (!strcmp(k, "lr") || !strcmp(k, "weight_decay") || !strcmp(k, "beta1") || !strcmp(k, "beta2") ||
			   !strcmp(k, "adam_eps")) {
			rc = field_pos(v, k, &d, err);
			float f = (float)d;
			if (!rc && !isfinite(f))
				rc = SB_ERR(err, SB_EDATA, "n3a cell: field '%s': %g is beyond float range", k, d);
			if (!rc && k[0] == 'b' && f >= 1) /* as torch.optim.AdamW: 0 <= beta < 1 */
				rc = SB_ERR(err, SB_EDATA, "n3a cell: field '%s': %g is not below 1", k, d);
			if (!strcmp(k, "lr"))
				c->lr = f;
			else if (!strcmp(k, "weight_decay"))
				c->wd = f;
			else if (!strcmp(k, "beta1"))
				c->b1 = f;
			else if (!strcmp(k, "beta2"))
				c->b2 = f;
			else
				c->adam_eps = f;
		} else {
			rc = SB_ERR(err, SB_EDATA, "n3a cell: unknown field '%s'", k);
		}
		if (rc)
			return rc;
	}
	if (c->arch < 0 || !have_r || !have_seed)
		return SB_ERR(err, SB_EDATA, "n3a cell: fields 'arch', 'r' and 'seed' are required");
	if (c->k >= c->n || c->r > c->n)
		return SB_ERR(err, SB_EDATA, "n3a cell: need k < n and r <= n (n %d, k %d, r %d)", c->n, c->k, c->r);
	if (c->eps < 0)
		c->eps = 1.0 / (c->k + 1);
	if (c->updates != 1024 && (!have_eval || !have_par))
		return SB_ERR(err, SB_EDATA, "n3a cell: with 'updates' other than 1024, give 'eval_steps' and 'parents'");
	if (!have_eval) {
		c->neval = (int)(sizeof REG_EVAL / sizeof REG_EVAL[0]);
		memcpy(c->eval_steps, REG_EVAL, sizeof REG_EVAL);
	}
	if (!have_par) {
		c->nparents = 2;
		memcpy(c->parents, REG_PARENTS, sizeof REG_PARENTS);
	}
	if (c->eval_steps[0] != 0 || c->eval_steps[c->neval - 1] > c->updates)
		return SB_ERR(err, SB_EDATA, "n3a cell: eval_steps must start at 0 and end at most at updates (%d)",
			      c->updates);
	for (int i = 0; i < c->nparents; i++) {
		int p = c->parents[i];
		if (!has_step(c, p) || p + c->fork_updates > c->updates || !has_step(c, p + c->fork_updates))
			return SB_ERR(err, SB_EDATA,
				      "n3a cell: parent %d: it and %d + fork_updates (%d) must be evaluation steps within "
				      "updates (%d)",
				      p, p, c->fork_updates, c->updates);
	}
	/* the id: from the filled cell's canonical JSON */
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_n3a_cell_json(&w, c);
	char hex[SB_SHA256_HEX];
	int rc = sb_sha256_json_canonical(&w, hex, err);
	sb_jw_free(&w);
	if (rc)
		return rc;
	snprintf(c->cell_id, sizeof c->cell_id, "n3a.%s.r%d.s%llu.%.8s", sb_n3a_arch_name(c->arch), c->r,
		 (unsigned long long)c->seed, hex);
	return 0;
}

void sb_n3a_cell_json(struct sb_jw *w, const struct sb_n3a_cell *c)
{
	sb_jw_obj(w);
	sb_jw_kstr(w, "family", "n3a");
	sb_jw_kstr(w, "arch", sb_n3a_arch_name(c->arch));
	sb_jw_kint(w, "r", c->r);
	sb_jw_kint(w, "seed", (int64_t)c->seed);
	sb_jw_kint(w, "n", c->n);
	sb_jw_kint(w, "k", c->k);
	sb_jw_kf64(w, "epsilon", c->eps);
	sb_jw_kint(w, "train", c->ntrain);
	sb_jw_kint(w, "validation", c->nval);
	sb_jw_kint(w, "batch", c->batch);
	sb_jw_kint(w, "updates", c->updates);
	sb_jw_key(w, "eval_steps");
	sb_jw_arr(w);
	for (int i = 0; i < c->neval; i++)
		sb_jw_int(w, c->eval_steps[i]);
	sb_jw_arr_end(w);
	sb_jw_key(w, "parents");
	sb_jw_arr(w);
	for (int i = 0; i < c->nparents; i++)
		sb_jw_int(w, c->parents[i]);
	sb_jw_arr_end(w);
	sb_jw_kint(w, "fork_updates", c->fork_updates);
	sb_jw_kf32(w, "lr", c->lr);
	sb_jw_kf32(w, "weight_decay", c->wd);
	sb_jw_kf32(w, "beta1", c->b1);
	sb_jw_kf32(w, "beta2", c->b2);
	sb_jw_kf32(w, "adam_eps", c->adam_eps);
	sb_jw_obj_end(w);
}

/* ------------------------------------------------------------------ the runner */

struct state { /* what a checkpoint holds: parameters, AdamW moments and step */
	float *p, *m, *v;
	int64_t t;
};

struct run {
	const struct sb_n3a_cell *c;
	struct sb_n3a_op op;
	struct sb_n3a_model *m;
	struct sb_n3a_data tr, va;
	uint32_t *sched, *perm;
	size_t np;
	float *m1, *m2; /* the live AdamW moments */
	int64_t t;
	struct sb_jw *w;
	struct sb_err *err;
	int units_done;
	int registered; /* every setting but arch, r and seed is the registered default */
	sb_n3a_progress_fn fn;
	void *arg;
	double t0;
};

static void params_sha(const struct run *R, const float *p, char hex[SB_SHA256_HEX])
{
	sb_sha256_buf(p, R->np * sizeof *p, hex);
}

/* SHA-256 of the live training state: parameters, AdamW moments and step */
static void state_sha(const struct run *R, char hex[SB_SHA256_HEX])
{
	struct sb_sha256 *h = sb_sha256_new();
	if (!h) {
		snprintf(hex, SB_SHA256_HEX, "%s", "");
		return;
	}
	sb_sha256_update(h, sb_n3a_model_params(R->m), R->np * sizeof(float));
	sb_sha256_update(h, R->m1, R->np * sizeof(float));
	sb_sha256_update(h, R->m2, R->np * sizeof(float));
	sb_sha256_update(h, &R->t, sizeof R->t);
	sb_sha256_final(h, hex);
}

static int state_new(struct state *s, size_t np)
{
	s->p = calloc(np, sizeof(float));
	s->m = calloc(np, sizeof(float));
	s->v = calloc(np, sizeof(float));
	s->t = 0;
	return s->p && s->m && s->v ? 0 : -1;
}

static void state_free(struct state *s)
{
	free(s->p);
	free(s->m);
	free(s->v);
}

static void state_save(struct run *R, struct state *s)
{
	memcpy(s->p, sb_n3a_model_params(R->m), R->np * sizeof(float));
	memcpy(s->m, R->m1, R->np * sizeof(float));
	memcpy(s->v, R->m2, R->np * sizeof(float));
	s->t = R->t;
}

static void state_load(struct run *R, const struct state *s)
{
	memcpy(sb_n3a_model_params(R->m), s->p, R->np * sizeof(float));
	memcpy(R->m1, s->m, R->np * sizeof(float));
	memcpy(R->m2, s->v, R->np * sizeof(float));
	R->t = s->t;
}

static int state_equal(struct run *R, const struct state *s)
{
	return !memcmp(sb_n3a_model_params(R->m), s->p, R->np * sizeof(float)) &&
	       !memcmp(R->m1, s->m, R->np * sizeof(float)) && !memcmp(R->m2, s->v, R->np * sizeof(float)) &&
	       R->t == s->t;
}

/* prefix a guard error with where it happened */
static int where(struct run *R, int rc, int arm, int parent, int step, const char *what)
{
	if (!rc)
		return 0;
	char unit[64];
	if (parent >= 0)
		snprintf(unit, sizeof unit, "fork %s at %d", sb_n3a_arm_name(arm), parent);
	else
		snprintf(unit, sizeof unit, "main %s", sb_n3a_arm_name(arm));
	sb_err_prefix(R->err, "%s: %s, %s %d", R->c->cell_id, unit, what, step);
	return rc;
}

static int evaluate(struct run *R, int arm, int parent, int step)
{
	struct sb_n3a_eval ev;
	SB_TRY(where(R, sb_n3a_model_eval(R->m, arm, &R->op, &R->va, &ev, R->err), arm, parent, step,
		     "evaluation at step"));
	const struct sb_n3a_cell *c = R->c;
	struct sb_jw *w = R->w;
	sb_jw_record(w, "n3a.eval", 1);
	sb_jw_kstr(w, "cell_id", c->cell_id);
	sb_jw_kstr(w, "arch", sb_n3a_arch_name(c->arch));
	sb_jw_kint(w, "r", c->r);
	sb_jw_kint(w, "seed", (int64_t)c->seed);
	sb_jw_kstr(w, "arm", sb_n3a_arm_name(arm));
	if (parent < 0)
		sb_jw_knull(w, "parent");
	else
		sb_jw_kint(w, "parent", parent);
	sb_jw_kint(w, "step", step);
	sb_jw_kf64(w, "validation_cross_entropy", ev.ce);
	sb_jw_kf64(w, "validation_accuracy", ev.accuracy);
	sb_jw_kf64(w, "mean_relevant_mass", ev.relevant_mass);
	sb_jw_kf64(w, "mean_entropy", ev.entropy);
	sb_jw_kf64(w, "mean_support", ev.support);
	sb_jw_kf64(w, "gamma", ev.gamma);
	sb_jw_kbool(w, "registered_settings", R->registered);
	sb_jw_obj_end(w);
	return sb_jw_line(w, R->err);
}

/* one update: the minibatch of schedule row `row` (0-based) */
static int update(struct run *R, int arm, int row, const uint32_t *perm, int parent, int step)
{
	double loss;
	const struct sb_n3a_cell *c = R->c;
	SB_TRY(where(R,
		     sb_n3a_model_forward(R->m, arm, &R->op, &R->tr, R->sched + (size_t)row * c->batch, c->batch, 1,
					  perm, &loss, NULL, NULL, R->err),
		     arm, parent, step, "update"));
	R->t++;
	sb_n3a_model_adamw(R->m, R->m1, R->m2, R->t, c->lr, c->b1, c->b2, c->adam_eps, c->wd);
	return 0;
}

static int unit_record(struct run *R, int arm, int parent, int updates, const char *start, const char *start_state,
		       const char *end)
{
	struct sb_jw *w = R->w;
	sb_jw_record(w, "n3a.unit", 1);
	sb_jw_kstr(w, "cell_id", R->c->cell_id);
	sb_jw_kstr(w, "arm", sb_n3a_arm_name(arm));
	if (parent < 0)
		sb_jw_knull(w, "parent");
	else
		sb_jw_kint(w, "parent", parent);
	sb_jw_kint(w, "updates", updates);
	sb_jw_kstr(w, "start_params_sha256", start);
	sb_jw_kstr(w, "start_state_sha256", start_state);
	sb_jw_kstr(w, "end_params_sha256", end);
	sb_jw_obj_end(w);
	SB_TRY(sb_jw_line(w, R->err));
	R->units_done++;
	if (R->fn) {
		char name[64];
		if (parent < 0)
			snprintf(name, sizeof name, "main %s", sb_n3a_arm_name(arm));
		else
			snprintf(name, sizeof name, "fork %s at %d", sb_n3a_arm_name(arm), parent);
		R->fn(R->arg, R->c->cell_id, name, R->units_done, 2 + 5 * R->c->nparents,
		      sb_monotonic_seconds() - R->t0);
	}
	return 0;
}

/* a main trajectory from the initial parameters p0; S saves its states at the parents
 * and at parent + fork_updates */
static int run_main(struct run *R, int arm, const float *p0, struct state *at_parent, struct state *at_end)
{
	const struct sb_n3a_cell *c = R->c;
	char start[SB_SHA256_HEX], start_state[SB_SHA256_HEX], end[SB_SHA256_HEX];
	memcpy(sb_n3a_model_params(R->m), p0, R->np * sizeof(float));
	memset(R->m1, 0, R->np * sizeof(float));
	memset(R->m2, 0, R->np * sizeof(float));
	R->t = 0;
	params_sha(R, p0, start);
	state_sha(R, start_state);
	SB_TRY(evaluate(R, arm, -1, 0));
	for (int i = 0; at_parent && i < c->nparents; i++) /* a parent at step 0: the initial state */
		if (c->parents[i] == 0)
			state_save(R, &at_parent[i]);
	for (int t = 1; t <= c->updates; t++) {
		SB_TRY(update(R, arm, t - 1, NULL, -1, t));
		if (has_step(c, t))
			SB_TRY(evaluate(R, arm, -1, t));
		for (int i = 0; at_parent && i < c->nparents; i++) {
			if (t == c->parents[i])
				state_save(R, &at_parent[i]);
			if (t == c->parents[i] + c->fork_updates)
				state_save(R, &at_end[i]);
		}
	}
	params_sha(R, sb_n3a_model_params(R->m), end);
	return unit_record(R, arm, -1, c->updates, start, start_state, end);
}

static int run_fork(struct run *R, int arm, int pi, const struct state *parent, const struct state *main_end,
		    int *replay_equal)
{
	const struct sb_n3a_cell *c = R->c;
	int p = c->parents[pi], F = c->fork_updates, nt = c->n - c->k;
	char start[SB_SHA256_HEX], start_state[SB_SHA256_HEX], end[SB_SHA256_HEX];
	state_load(R, parent);
	if (arm == SB_N3A_S && c->fault == SB_N3A_FAULT_REPLAY) /* tests: a replay that starts one ulp off */
		sb_n3a_model_params(R->m)[0] = nextafterf(parent->p[0], INFINITY);
	params_sha(R, parent->p, start);
	state_sha(R, start_state);
	SB_TRY(evaluate(R, arm, p, 0));
	for (int j = 1; j <= F; j++) {
		const uint32_t *perm = NULL;
		if (arm == SB_N3A_N) {
			sb_n3a_null_perms(sb_n3a_null_key(c->seed, sb_n3a_arch_name(c->arch), c->r, p, j), c->batch, nt,
					  R->perm);
			perm = R->perm;
		}
		SB_TRY(update(R, arm, p + j - 1, perm, p, j));
		if (j == 1 || j == F)
			SB_TRY(evaluate(R, arm, p, j));
	}
	if (arm == SB_N3A_S && !state_equal(R, main_end))
		*replay_equal = 0;
	params_sha(R, sb_n3a_model_params(R->m), end);
	return unit_record(R, arm, p, F, start, start_state, end);
}

/* does n3a.ndjson end with a completed n3a.done? */
static int finished(const char *path)
{
	if (!sb_file_exists(path))
		return 0;
	struct sb_ndjson_reader *rd;
	if (sb_ndjson_open(path, &rd, NULL))
		return 0;
	int done = 0;
	for (;;) {
		struct sb_json *v = NULL;
		if (sb_ndjson_next(rd, &v, NULL) || !v)
			break;
		done = !strcmp(sb_json_str(sb_json_get(v, "kind"), ""), "n3a.done") &&
		       !strcmp(sb_json_str(sb_json_get(v, "status"), ""), "completed");
		sb_json_free(v);
	}
	sb_ndjson_close(rd);
	return done;
}

static int write_cell_json(const struct sb_n3a_cell *c, const char *run_dir, struct sb_err *err)
{
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_n3a_cell_json(&w, c);
	/* sb_jw_line ends the value; sb_jw_raw would first write a ',' after it */
	int rc = sb_jw_line(&w, err);
	if (!rc) {
		char path[4200];
		snprintf(path, sizeof path, "%s/cell.json", run_dir);
		rc = sb_write_file_atomic(path, w.buf, w.len, err);
	}
	sb_jw_free(&w);
	return rc;
}

int sb_n3a_cell_registered(const struct sb_n3a_cell *c)
{
	/* the cell with only its arch, r and seed given: the same id iff every other setting
	 * is the registered default (the id hashes the filled cell) */
	char js[160];
	snprintf(js, sizeof js, "{\"family\":\"n3a\",\"arch\":\"%s\",\"r\":%d,\"seed\":%llu}",
		 sb_n3a_arch_name(c->arch), c->r, (unsigned long long)c->seed);
	struct sb_json *v;
	struct sb_err e = {0};
	if (sb_json_parse(js, strlen(js), &v, &e))
		return 0;
	struct sb_n3a_cell d;
	int same = !sb_n3a_cell_parse(&d, v, &e) && !strcmp(d.cell_id, c->cell_id);
	sb_json_free(v);
	return same;
}

int sb_n3a_run_cell(struct sb_backend *be, const struct sb_n3a_cell *c, const char *runs_dir, char *run_dir,
		    int *skipped, sb_n3a_progress_fn fn, void *arg, struct sb_err *err)
{
	*skipped = 0;
	snprintf(run_dir, 4096, "%s/%s", runs_dir, c->cell_id);
	char path[4200];
	snprintf(path, sizeof path, "%s/n3a.ndjson", run_dir);
	if (finished(path)) {
		*skipped = 1;
		return 0;
	}
	struct run R = {.c = c, .op = {c->n, c->k, c->eps, c->fault}, .err = err, .fn = fn, .arg = arg,
			.registered = sb_n3a_cell_registered(c)};
	struct state at_parent[SB_N3A_MAXPAR] = {{0}}, at_end[SB_N3A_MAXPAR] = {{0}};
	float *p0 = NULL;
	double t0 = sb_monotonic_seconds();
	clock_t c0 = clock();
	R.t0 = t0;
	int rc = sb_n3a_data_make(&R.tr, c->seed, c->r, "train", c->ntrain, c->n, err);
	if (!rc)
		rc = sb_n3a_data_make(&R.va, c->seed, c->r, "validation", c->nval, c->n, err);
	if (!rc)
		rc = sb_n3a_schedule(&R.sched, c->seed, c->r, c->ntrain, c->batch, c->updates, err);
	if (!rc)
		rc = sb_n3a_model_new(be, c->arch, c->n, c->r, c->batch, &R.m, err);
	if (!rc) {
		R.np = sb_n3a_model_nparams(R.m);
		R.m1 = calloc(R.np, sizeof(float));
		R.m2 = calloc(R.np, sizeof(float));
		p0 = malloc(R.np * sizeof(float));
		R.perm = malloc((size_t)c->batch * (c->n - c->k) * sizeof *R.perm);
		int oom = !R.m1 || !R.m2 || !p0 || !R.perm;
		for (int i = 0; i < c->nparents; i++)
			oom |= state_new(&at_parent[i], R.np) | state_new(&at_end[i], R.np);
		if (oom)
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	if (!rc)
		rc = sb_mkdir_p(run_dir, err);
	if (!rc)
		rc = write_cell_json(c, run_dir, err);
	struct sb_atomic a = {0};
	int opened = 0;
	if (!rc) {
		rc = sb_atomic_open(&a, path, err);
		opened = !rc;
	}
	struct sb_jw w;
	sb_jw_init(&w, opened ? a.f : NULL);
	R.w = &w;
	char init_sha[SB_SHA256_HEX] = "";
	if (!rc) {
		struct sb_run_meta meta = {.device = be->device, .threads = 1};
		rc = sb_record_run_meta(&w, &meta, err);
	}
	/* the 12 units; a failed guard stops the cell and is recorded */
	int replay_equal = 1, guard_rc = 0;
	if (!rc) {
		sb_n3a_model_init(R.m, c->seed);
		memcpy(p0, sb_n3a_model_params(R.m), R.np * sizeof(float));
		params_sha(&R, p0, init_sha);
		guard_rc = run_main(&R, SB_N3A_D, p0, NULL, NULL);
		if (!guard_rc)
			guard_rc = run_main(&R, SB_N3A_S, p0, at_parent, at_end);
		/* a failed S replay stops the cell there, as every guard does (the other arms of
		 * the parent are not run, so the failed cell's evaluations are never a full census) */
		for (int i = 0; i < c->nparents && !guard_rc; i++)
			for (int arm = SB_N3A_S; arm <= SB_N3A_N && !guard_rc; arm++) {
				guard_rc = run_fork(&R, arm, i, &at_parent[i], &at_end[i], &replay_equal);
				if (!guard_rc && !replay_equal)
					guard_rc = SB_ERR(err, SB_EVERDICT,
							  "%s: fork S at %d: WORKFLOW_NONDETERMINISTIC: its replay differs "
							  "from main S at %d",
							  c->cell_id, c->parents[i], c->parents[i] + c->fork_updates);
			}
		const char *reason = guard_rc ? sb_n3a_guard_name(err->msg) : NULL;
		if (guard_rc && (guard_rc != SB_EVERDICT || !reason)) {
			rc = guard_rc; /* not a guard (I/O, memory): nothing recorded */
		} else {
			sb_jw_record(&w, "n3a.done", 1);
			sb_jw_kstr(&w, "cell_id", c->cell_id);
			sb_jw_kstr(&w, "status", guard_rc ? "failed" : "completed");
			if (guard_rc) {
				sb_jw_kstr(&w, "reason", reason);
				sb_jw_kstr(&w, "error", err->msg);
			}
			sb_jw_kint(&w, "units", 2 + 5 * c->nparents);
			sb_jw_kint(&w, "units_completed", R.units_done);
			sb_jw_kbool(&w, "s_replay_equal", replay_equal);
			sb_jw_kstr(&w, "init_params_sha256", init_sha);
			sb_jw_kf64(&w, "train_seconds", sb_monotonic_seconds() - t0);
			sb_jw_kf64(&w, "cpu_seconds", (double)(clock() - c0) / CLOCKS_PER_SEC);
			sb_jw_obj_end(&w);
			struct sb_err werr = {0};
			rc = sb_jw_line(&w, &werr);
			if (!rc)
				rc = sb_atomic_commit(&a, &werr);
			if (rc)
				*err = werr;
			else
				rc = guard_rc;
			opened = 0;
		}
	}
	if (opened)
		sb_atomic_abort(&a);
	sb_jw_free(&w);
	for (int i = 0; i < SB_N3A_MAXPAR; i++) {
		state_free(&at_parent[i]);
		state_free(&at_end[i]);
	}
	free(p0);
	free(R.perm);
	free(R.m1);
	free(R.m2);
	free(R.sched);
	sb_n3a_model_free(R.m);
	sb_n3a_data_free(&R.tr);
	sb_n3a_data_free(&R.va);
	return rc;
}
