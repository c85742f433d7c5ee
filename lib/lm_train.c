/* lm_train.c — one LM training cell (see lm_train.h). */
#include "lm_train.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "backend_cpu.h"
#include "hash.h"
#include "io.h"
#include "record.h"

void sb_lm_cell_defaults(struct sb_lm_cell *c)
{
	memset(c, 0, sizeof *c);
	sb_lm_cfg_default(&c->model);
	c->T = 256;
	c->model.max_T = 256;
	c->batch = 16;
	c->steps = 1000;
	c->warmup = 50;
	c->tile = 1;
	c->log_every = 25;
	c->lr = 2e-3;
	c->lr_min = 1e-4;
	c->weight_decay = 0.1;
	c->clip = 1.0;
	c->b1 = 0.9;
	c->b2 = 0.95;
	c->eps = 1e-8;
	snprintf(c->mixture, sizeof c->mixture, "retrieval=0.5");
}

static int get_int(const struct sb_json *v, const char *key, int lo, int hi, int *out, struct sb_err *err)
{
	int64_t x;
	if (sb_json_int64(v, &x) || x < lo || x > hi)
		return SB_ERR(err, SB_EDATA, "cell: '%s' must be an integer in [%d, %d]", key, lo, hi);
	*out = (int)x;
	return 0;
}

static int get_num(const struct sb_json *v, const char *key, double lo, double hi, double *out, struct sb_err *err)
{
	if (!v || v->type != SB_JSON_NUMBER || !(v->number >= lo && v->number <= hi))
		return SB_ERR(err, SB_EDATA, "cell: '%s' must be a number in [%g, %g]", key, lo, hi);
	*out = v->number;
	return 0;
}

int sb_lm_cell_parse(struct sb_lm_cell *c, const struct sb_json *obj, struct sb_err *err)
{
	sb_lm_cell_defaults(c);
	if (!obj || obj->type != SB_JSON_OBJECT)
		return SB_ERR(err, SB_EDATA, "cell: expected a JSON object");
	int have_max_T = 0;
	const struct sb_json *model = sb_json_get(obj, "model");
	if (model && model->type == SB_JSON_OBJECT && sb_json_get(model, "max_T"))
		have_max_T = 1;
	for (size_t i = 0; i < obj->n; i++) {
		const char *k = obj->keys[i];
		const struct sb_json *v = obj->items[i];
		int64_t x;
		if (!strcmp(k, "family") || !strcmp(k, "task") || !strcmp(k, "method") || !strcmp(k, "cell_id") ||
		    !strcmp(k, "parameter_count") || !strcmp(k, "model") || !strcmp(k, "mixture_used"))
			continue;
		if (!strcmp(k, "seed") || !strcmp(k, "data_seed")) {
			if (sb_json_int64(v, &x) || x < 0)
				return SB_ERR(err, SB_EDATA, "cell: '%s' must be a non-negative integer", k);
			if (!strcmp(k, "seed"))
				c->seed = (uint64_t)x;
			else
				c->data_seed = (uint64_t)x;
		} else if (!strcmp(k, "T"))
			SB_TRY(get_int(v, k, 8, 1 << 16, &c->T, err));
		else if (!strcmp(k, "batch"))
			SB_TRY(get_int(v, k, 1, 1 << 16, &c->batch, err));
		else if (!strcmp(k, "steps"))
			SB_TRY(get_int(v, k, 0, 1 << 30, &c->steps, err));
		else if (!strcmp(k, "warmup"))
			SB_TRY(get_int(v, k, 0, 1 << 30, &c->warmup, err));
		else if (!strcmp(k, "tile"))
			SB_TRY(get_int(v, k, 1, 1 << 16, &c->tile, err));
		else if (!strcmp(k, "log_every"))
			SB_TRY(get_int(v, k, 1, 1 << 30, &c->log_every, err));
		else if (!strcmp(k, "ckpt_every"))
			SB_TRY(get_int(v, k, 0, 1 << 30, &c->ckpt_every, err));
		else if (!strcmp(k, "warm_T"))
			SB_TRY(get_int(v, k, 0, 1 << 16, &c->warm_T, err));
		else if (!strcmp(k, "warm_steps"))
			SB_TRY(get_int(v, k, 0, 1 << 30, &c->warm_steps, err));
		else if (!strcmp(k, "lr"))
			SB_TRY(get_num(v, k, 0, 10, &c->lr, err));
		else if (!strcmp(k, "lr_min"))
			SB_TRY(get_num(v, k, 0, 10, &c->lr_min, err));
		else if (!strcmp(k, "weight_decay"))
			SB_TRY(get_num(v, k, 0, 10, &c->weight_decay, err));
		else if (!strcmp(k, "clip"))
			SB_TRY(get_num(v, k, 0, 1e9, &c->clip, err));
		else if (!strcmp(k, "b1") || !strcmp(k, "b2")) {
			/* [0, 1) as torch.optim.AdamW: at 1 the bias correction 1 - beta^t is 0 */
			double b = 0;
			if (get_num(v, k, 0, 1, &b, err) || b == 1)
				return SB_ERR(err, SB_EDATA, "cell: '%s' must be a number in [0, 1)", k);
			*(!strcmp(k, "b1") ? &c->b1 : &c->b2) = b;
		} else if (!strcmp(k, "eps"))
			SB_TRY(get_num(v, k, 0, 1, &c->eps, err));
		else if (!strcmp(k, "mixture") || !strcmp(k, "haystack")) {
			size_t cap = !strcmp(k, "mixture") ? sizeof c->mixture : sizeof c->haystack;
			if (v->type != SB_JSON_STRING || v->len >= cap || strlen(v->text) != v->len)
				return SB_ERR(err, SB_EDATA, "cell: '%s' must be a string of at most %zu bytes", k, cap - 1);
			if (!strcmp(k, "mixture"))
				snprintf(c->mixture, sizeof c->mixture, "%s", v->text);
			else
				snprintf(c->haystack, sizeof c->haystack, "%s", v->text);
		} else if (!strcmp(k, "source")) {
			if (v->type != SB_JSON_OBJECT)
				return SB_ERR(err, SB_EDATA, "cell: 'source' must be an object");
			struct sb_jw cw;
			sb_jw_init(&cw, NULL);
			sb_jw_canonical(&cw, v);
			int fits = !cw.oom && cw.len < sizeof c->source;
			if (fits)
				snprintf(c->source, sizeof c->source, "%.*s", (int)cw.len, cw.buf);
			sb_jw_free(&cw);
			if (!fits)
				return SB_ERR(err, SB_EDATA, "cell: 'source' longer than %zu bytes", sizeof c->source - 1);
		} else if (!strcmp(k, "tokenizer")) {
			if (v->type != SB_JSON_STRING || !v->text[0] || v->len >= sizeof c->tokenizer ||
			    strchr(v->text, '/') || v->text[0] == '.')
				return SB_ERR(err, SB_EDATA, "cell: 'tokenizer' must be a file name in the run directory");
			snprintf(c->tokenizer, sizeof c->tokenizer, "%s", v->text);
		} else if (!strcmp(k, "corpora")) {
			if (v->type != SB_JSON_ARRAY || v->n > 8)
				return SB_ERR(err, SB_EDATA, "cell: 'corpora' must be an array of at most 8 strings");
			c->n_corpora = (int)v->n;
			for (size_t j = 0; j < v->n; j++) {
				if (v->items[j]->type != SB_JSON_STRING || v->items[j]->len >= sizeof c->corpora[0])
					return SB_ERR(err, SB_EDATA, "cell: 'corpora' must hold strings NAME=PATH");
				snprintf(c->corpora[j], sizeof c->corpora[j], "%s", v->items[j]->text);
			}
		} else
			return SB_ERR(err, SB_EDATA, "cell: unknown field '%s'", k);
	}
	if (model)
		SB_TRY(sb_lm_cfg_from_json(&c->model, model, err));
	if (!have_max_T)
		c->model.max_T = c->T;
	SB_TRY(sb_lm_cfg_check(&c->model, err));
	if (!c->source[0] && c->model.vocab < 256) /* the training path indexes by byte, unchecked */
		return SB_ERR(err, SB_EDATA, "cell: model vocab %d is below 256: a trained decoder reads bytes (0..255)",
			      c->model.vocab);
	if (c->T > c->model.max_T)
		return SB_ERR(err, SB_EDATA, "cell: T %d exceeds the model's max_T %d", c->T, c->model.max_T);
	if (c->batch % c->tile)
		return SB_ERR(err, SB_EDATA, "cell: batch %d is not a multiple of tile %d", c->batch, c->tile);
	if (c->warm_steps && (c->warm_T < 8 || c->warm_T > c->T || c->T % c->warm_T))
		return SB_ERR(err, SB_EDATA, "cell: warm_T %d must divide T %d", c->warm_T, c->T);
	if (c->n_corpora < 1)
		return SB_ERR(err, SB_EDATA, "cell: 'corpora' must name at least one corpus (NAME=PATH)");
	if (!obj || !sb_json_get(obj, "data_seed"))
		c->data_seed = c->seed;
	return 0;
}

void sb_lm_cell_fields(struct sb_jw *w, const struct sb_lm_cell *c)
{
	sb_jw_kstr(w, "family", "lm");
	sb_jw_kstr(w, "task", "lm");
	sb_jw_kstr(w, "method", "dense");
	sb_jw_kint(w, "seed", (int64_t)c->seed);
	sb_jw_kint(w, "data_seed", (int64_t)c->data_seed);
	sb_jw_key(w, "model");
	sb_lm_cfg_json(w, &c->model);
	sb_jw_kint(w, "T", c->T);
	if (c->source[0]) { /* imported: no training fields */
		sb_jw_key(w, "source");
		sb_jw_raw(w, c->source, strlen(c->source));
		if (c->tokenizer[0])
			sb_jw_kstr(w, "tokenizer", c->tokenizer);
		sb_jw_key(w, "corpora");
		sb_jw_arr(w);
		for (int i = 0; i < c->n_corpora; i++)
			sb_jw_str(w, c->corpora[i]);
		sb_jw_arr_end(w);
		sb_jw_kstr(w, "haystack", c->haystack);
		return;
	}
	sb_jw_kint(w, "batch", c->batch);
	sb_jw_kint(w, "steps", c->steps);
	sb_jw_kint(w, "warmup", c->warmup);
	sb_jw_kint(w, "tile", c->tile);
	sb_jw_kint(w, "log_every", c->log_every);
	if (c->ckpt_every) /* written only when set, so older cells keep their ids */
		sb_jw_kint(w, "ckpt_every", c->ckpt_every);
	if (c->warm_steps) {
		sb_jw_kint(w, "warm_T", c->warm_T);
		sb_jw_kint(w, "warm_steps", c->warm_steps);
	}
	sb_jw_kf64(w, "lr", c->lr);
	sb_jw_kf64(w, "lr_min", c->lr_min);
	sb_jw_kf64(w, "weight_decay", c->weight_decay);
	sb_jw_kf64(w, "clip", c->clip);
	sb_jw_kf64(w, "b1", c->b1);
	sb_jw_kf64(w, "b2", c->b2);
	sb_jw_kf64(w, "eps", c->eps);
	sb_jw_key(w, "corpora");
	sb_jw_arr(w);
	for (int i = 0; i < c->n_corpora; i++)
		sb_jw_str(w, c->corpora[i]);
	sb_jw_arr_end(w);
	sb_jw_kstr(w, "mixture", c->mixture);
	sb_jw_kstr(w, "haystack", c->haystack);
}

void sb_lm_cell_json(struct sb_jw *w, const struct sb_lm_cell *c)
{
	sb_jw_obj(w);
	sb_lm_cell_fields(w, c);
	sb_jw_obj_end(w);
}

int sb_lm_cell_id(struct sb_lm_cell *c, struct sb_err *err)
{
	/* -0 and 0 are one setting: the id must not tell them apart (nor cell.json) */
	double *const nums[] = {&c->lr, &c->lr_min, &c->weight_decay, &c->clip, &c->b1, &c->b2, &c->eps};
	sb_unsign_zeros(nums, sizeof nums / sizeof nums[0]);
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_lm_cell_json(&w, c);
	char hex[SB_SHA256_HEX];
	int rc = sb_sha256_json_canonical(&w, hex, err);
	sb_jw_free(&w);
	if (rc)
		return rc;
	if (c->source[0])
		snprintf(c->cell_id, sizeof c->cell_id, "lm.pretrained.L%d.d%d.%.8s", c->model.n_layer, c->model.d, hex);
	else
		snprintf(c->cell_id, sizeof c->cell_id, "lm.dense.s%llu.%s.d%d.%.8s", (unsigned long long)c->seed,
			 c->model.pattern, c->model.d, hex);
	return 0;
}

int sb_lm_ckpt_write(const char *path, struct sb_tensors *ts, const struct sb_lm_cell *c, int64_t steps,
		     const char *key, const char *value, char *sha, struct sb_err *err)
{
	struct sb_jw mj;
	sb_jw_init(&mj, NULL);
	sb_lm_cfg_json(&mj, &c->model);
	char *mjs = strndup(mj.buf ? mj.buf : "{}", mj.len), st[32];
	sb_jw_free(&mj);
	snprintf(st, sizeof st, "%lld", (long long)steps);
	int rc = mjs ? 0 : SB_ERR(err, SB_EINTERNAL, "out of memory");
	if (!rc)
		rc = sb_tensors_set_metas(ts, (const char *const[][2]){
		                           {"format", "sparsebench.checkpoint"},
		                           {"family", "lm"},
		                           {"cell_id", c->cell_id},
		                           {"steps", st},
		                           {"model", mjs},
		                           {key, value}},
		                          6, err);
	free(mjs);
	if (!rc)
		rc = sb_st_write(path, ts, err);
	if (!rc)
		rc = sb_sha256_file(path, sha, NULL, err);
	if (!rc)
		rc = sb_sidecar_write(path, sha, err);
	return rc;
}

int sb_lm_cell_write(const char *run_dir, const struct sb_lm_cell *c, int64_t parameter_count,
		     const struct sb_lm_mix *mix, struct sb_err *err)
{
	struct sb_jw cj;
	sb_jw_init(&cj, NULL);
	sb_jw_obj(&cj);
	sb_lm_cell_fields(&cj, c);
	sb_jw_kstr(&cj, "cell_id", c->cell_id);
	sb_jw_kint(&cj, "parameter_count", parameter_count);
	if (mix) {
		sb_jw_key(&cj, "mixture_used");
		sb_lm_mix_json(&cj, mix);
	}
	sb_jw_obj_end(&cj);
	char path[4600], *line = cj.oom ? NULL : malloc(cj.len + 1);
	int rc;
	snprintf(path, sizeof path, "%s/cell.json", run_dir);
	if (!line)
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	else {
		memcpy(line, cj.buf, cj.len);
		line[cj.len] = '\n';
		rc = sb_write_file_atomic(path, line, cj.len + 1, err);
		free(line);
	}
	sb_jw_free(&cj);
	return rc;
}

double sb_lm_lr(const struct sb_lm_cell *c, int64_t s)
{
	if (c->warmup > 0 && s < c->warmup)
		return c->lr * (double)(s + 1) / c->warmup;
	int64_t span = c->steps - c->warmup - 1;
	if (span <= 0)
		return c->lr;
	double f = (double)(s - c->warmup) / (double)span;
	if (f > 1)
		f = 1;
	return c->lr_min + 0.5 * (c->lr - c->lr_min) * (1 + cos(M_PI * f));
}

/* CPU time of the process (user + system, every thread), in seconds: with one cell
 * training at a time, the training's CPU time, honest on a shared machine. */
static double process_cpu_seconds(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru))
		return NAN;
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec * 1e-6;
}

/* ---------------------------------------------------------------- train.ndjson
 *
 * As the classifier's (train/train_run.c, docs/sb-train.md): the records are held in
 * memory (struct sb_lines) and the whole file is rewritten atomically (temporary file,
 * fsync, rename) after each one, so train.ndjson is always a complete prefix of the run's records, never
 * a torn line; the run is finished when, and only when, it ends in train.done. */

/* The record built in w (an in-memory writer) becomes the log's last line, and the file
 * is rewritten. */
static int tlog_emit(struct sb_lines *L, struct sb_jw *w, const char *path, struct sb_err *err)
{
	sb_jw_obj_end(w);
	int rc = sb_jw_line(w, err);
	if (!rc)
		rc = sb_lines_add(L, w->buf, w->len, err);
	sb_jw_reset(w);
	if (!rc)
		rc = sb_lines_write(L, path, err);
	return rc;
}

static void step_path(char *buf, size_t n, const char *run_dir, int64_t step, int optim)
{
	snprintf(buf, n, "%s/step-%06lld%s.safetensors", run_dir, (long long)step, optim ? ".optim" : "");
}

/* Remove the optimiser states step-NNNNNN.optim.safetensors of run_dir but keep's
 * (keep < 0: all of them). Only the newest is ever needed to resume. */
static void prune_optim(const char *run_dir, int64_t keep)
{
	DIR *d = opendir(run_dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		long long st;
		char canon[64];
		if (sscanf(e->d_name, "step-%6lld.optim.safetensors", &st) != 1 || st < 0 || st == keep)
			continue;
		snprintf(canon, sizeof canon, "step-%06lld.optim.safetensors", st);
		if (!strcmp(canon, e->d_name)) { /* exactly our name, nothing else */
			char p[4600];
			snprintf(p, sizeof p, "%s/%s", run_dir, e->d_name);
			unlink(p);
		}
	}
	closedir(d);
}

/* What an earlier run of the cell left: finished, or the newest checkpoint it can resume
 * from (its train.checkpoint record, the checkpoint with that SHA-256 and the optimiser
 * state beside it), with the records up to it. */
struct prior {
	int done;
	int64_t resume;      /* steps of that checkpoint; 0: start over */
	double secs, cpu;    /* training time up to it, summed over the runs before */
	struct sb_lines keep;
};

static int scan_prior(const char *path, const char *run_dir, const struct sb_lm_cell *c, struct prior *p,
		      struct sb_err *err)
{
	memset(p, 0, sizeof *p);
	if (!sb_file_exists(path))
		return 0;
	struct sb_ndjson_reader *rd;
	SB_TRY(sb_ndjson_open(path, &rd, err));
	struct sb_lines all = {0};
	size_t keep_upto = 0;
	int rc = 0;
	for (;;) {
		const char *line;
		size_t len;
		struct sb_err e2 = {0};
		if (sb_ndjson_next_line(rd, &line, &len, &e2) || !line)
			break;
		struct sb_json *v = NULL;
		if (sb_json_parse(line, len, &v, &e2))
			break; /* written atomically, so never torn: stop at anything odd */
		const char *kind = sb_json_str(sb_json_get(v, "kind"), "");
		int mine = !strcmp(sb_json_str(sb_json_get(v, "cell_id"), ""), c->cell_id);
		if (strcmp(kind, "run.meta"))
			p->done = !strcmp(kind, "train.done") && mine;
		if ((rc = sb_lines_add(&all, line, len, err))) {
			sb_json_free(v);
			break;
		}
		int64_t st = 0;
		if (!strcmp(kind, "train.checkpoint") && mine && all.n > 1 && c->ckpt_every > 0 &&
		    !sb_json_int64(sb_json_get(v, "step"), &st) && st > 0 && st < c->steps && st % c->ckpt_every == 0) {
			char ck[4700], op[4700], hex[SB_SHA256_HEX];
			step_path(ck, sizeof ck, run_dir, st, 0);
			step_path(op, sizeof op, run_dir, st, 1);
			struct sb_err e3 = {0};
			/* the optimiser state's SHA-256 is checked too when the record has it (runs
			 * before 2026-12-06 recorded none): damaged moments would end the run
			 * without the bits of one never stopped */
			const char *osha = sb_json_str(sb_json_get(v, "optim_sha256"), NULL);
			char ohex[SB_SHA256_HEX];
			if (sb_file_exists(op) && !sb_sha256_file(ck, hex, NULL, &e3) &&
			    !strcmp(hex, sb_json_str(sb_json_get(v, "checkpoint_sha256"), "")) &&
			    (!osha || (!sb_sha256_file(op, ohex, NULL, &e3) && !strcmp(ohex, osha)))) {
				p->resume = st;
				p->secs = sb_json_num(sb_json_get(v, "seconds"), 0);
				p->cpu = sb_json_num(sb_json_get(v, "cpu_seconds"), 0);
				keep_upto = all.n;
			}
		}
		sb_json_free(v);
	}
	sb_ndjson_close(rd);
	if (!rc && !p->done && p->resume > 0)
		for (size_t i = 0; i < keep_upto && !rc; i++)
			rc = sb_lines_add(&p->keep, all.l[i], strlen(all.l[i]), err);
	sb_lines_free(&all);
	if (rc)
		sb_lines_free(&p->keep);
	return rc;
}

/* A resumed run goes on with the corpora it started on (the kept run.meta's inputs):
 * steps on two texts under one cell would look like a clean run on the second. */
static int check_resume_corpora(const struct prior *p, const struct sb_lm_corpus *corp, int n, const char *path,
				const char *run_dir, struct sb_err *err)
{
	struct sb_json *v = NULL;
	struct sb_err e2 = {0};
	const struct sb_json *in = NULL;
	if (p->keep.n && !sb_json_parse(p->keep.l[0], strlen(p->keep.l[0]), &v, &e2))
		in = sb_json_get(v, "inputs");
	int rc = 0;
	if (!in || in->type != SB_JSON_ARRAY || (int)in->n != n)
		rc = SB_ERR(err, SB_EDATA, "%s: its run.meta does not name the %d corpora the cell reads: remove %s to "
					   "start the cell over", path, n, run_dir);
	for (int i = 0; !rc && i < n; i++) {
		const char *was = sb_json_str(sb_json_get(in->items[i], "sha256"), "");
		if (strcmp(was, corp[i].sha256))
			rc = SB_ERR(err, SB_EDATA,
				    "%s: the run started on a corpus with SHA-256 %.12s..., not on %s (%.12s...): resume it "
				    "with the files it started on, or remove %s to start the cell over",
				    path, *was ? was : "(none)", corp[i].path, corp[i].sha256, run_dir);
	}
	sb_json_free(v);
	return rc;
}

/* The optimiser state after `steps` steps: AdamW's moments, and the mean-loss window of
 * the next train.step record (its sum, as text that reads back to the same double). */
static int save_optim(const struct sb_lm_trainer *tr, const struct sb_lm_cell *c, const char *path, int64_t steps,
		      double win_loss, int win_n, char *sha, struct sb_err *err)
{
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	char st[32], wl[40], wn[32];
	snprintf(st, sizeof st, "%lld", (long long)steps);
	sb_fmt_f64(wl, win_loss);
	snprintf(wn, sizeof wn, "%d", win_n);
	int rc = sb_lm_trainer_state_to(tr, &ts, err);
	if (!rc)
		rc = sb_tensors_set_metas(&ts, (const char *const[][2]){
		                           {"format", "sparsebench.optim"},
		                           {"family", "lm"},
		                           {"cell_id", c->cell_id},
		                           {"steps", st},
		                           {"window_loss_sum", wl},
		                           {"window_steps", wn}},
		                          6, err);
	if (!rc)
		rc = sb_st_write(path, &ts, err);
	if (!rc)
		rc = sb_sha256_file(path, sha, NULL, err);
	sb_tensors_free(&ts);
	return rc;
}

/* A checkpoint or optimiser state of this cell after `steps` steps (metadata checked). */
static int read_state(const char *path, const struct sb_lm_cell *c, int64_t steps, struct sb_tensors *ts,
		      struct sb_err *err)
{
	SB_TRY(sb_st_read(path, ts, err));
	const char *id = sb_tensors_meta(ts, "cell_id"), *st = sb_tensors_meta(ts, "steps");
	char want[32];
	snprintf(want, sizeof want, "%lld", (long long)steps);
	if (!id || strcmp(id, c->cell_id) || !st || strcmp(st, want)) {
		sb_tensors_free(ts);
		return SB_ERR(err, SB_EDATA, "%s: not the state of cell %s after %lld steps (resume)", path, c->cell_id,
			      (long long)steps);
	}
	return 0;
}

/* Parameters and optimiser state after p->resume steps, and the loss window. */
static int load_resume(struct sb_lm_model *m, struct sb_lm_trainer *tr, const struct sb_lm_cell *c,
		       const char *run_dir, int64_t steps, double *win_loss, int *win_n, struct sb_err *err)
{
	char path[4700];
	struct sb_tensors ts;
	step_path(path, sizeof path, run_dir, steps, 0);
	SB_TRY(read_state(path, c, steps, &ts, err));
	int rc = sb_lm_model_from_tensors(m, &ts, err);
	sb_tensors_free(&ts);
	if (rc) {
		sb_err_prefix(err, "%s", path);
		return rc;
	}
	step_path(path, sizeof path, run_dir, steps, 1);
	SB_TRY(read_state(path, c, steps, &ts, err));
	rc = sb_lm_trainer_state_from(tr, &ts, err);
	const char *wl = sb_tensors_meta(&ts, "window_loss_sum"), *wn = sb_tensors_meta(&ts, "window_steps");
	char *e1 = NULL, *e2 = NULL;
	double l = wl ? strtod(wl, &e1) : NAN;
	long n = wn ? strtol(wn, &e2, 10) : -1;
	if (!rc && (!wl || *e1 || !isfinite(l) || !wn || *e2 || n < 0 || n > c->log_every))
		rc = SB_ERR(err, SB_EDATA, "optimiser state without a valid loss window (window_loss_sum, window_steps)");
	sb_tensors_free(&ts);
	if (rc) {
		sb_err_prefix(err, "%s", path);
		return rc;
	}
	*win_loss = l;
	*win_n = (int)n;
	return 0;
}

/* Write the parameters to path (+ sidecar) with the checkpoint metadata. */
static int save_params(const struct sb_lm_model *m, const struct sb_lm_cell *c, const struct sb_lm_mix *mix,
		       const char *path, int64_t steps_done, char *sha, struct sb_err *err)
{
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	int rc = sb_lm_model_to_tensors(m, &ts, err);
	struct sb_jw xj;
	sb_jw_init(&xj, NULL);
	sb_lm_mix_json(&xj, mix);
	char *xjs = strndup(xj.buf ? xj.buf : "{}", xj.len);
	if (!rc && !xjs)
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	if (!rc)
		rc = sb_lm_ckpt_write(path, &ts, c, steps_done, "mixture", xjs, sha, err);
	free(xjs);
	sb_jw_free(&xj);
	sb_tensors_free(&ts);
	return rc;
}

static int is_cpu(const struct sb_backend *be)
{
	return !strcmp(be->name, "cpu");
}

const char *sb_lm_train_blas_note(const struct sb_backend *be)
{
	static char line[320];
	if (!is_cpu(be) || !sb_cpu_blas_generic())
		return NULL;
	snprintf(line, sizeof line,
		 "OpenBLAS runs its generic '%s' kernels on this CPU (it does not know the model): LM training's "
		 "attention products run several times slower than the CPU allows; set OPENBLAS_CORETYPE (SkylakeX on "
		 "AVX-512, Haswell on AVX2; the floats then differ from this kernel set's)",
		 sb_cpu_blas_core());
	return line;
}

int sb_lm_train_cell(struct sb_backend *be, struct sb_lm_cell *c, const char *runs_dir, char *run_dir, int *skipped,
		     const struct sb_lm_progress *prog, struct sb_err *err)
{
	*skipped = 0;
	if (c->source[0])
		return SB_ERR(err, SB_EDATA, "cell: an imported pretrained decoder (it has a 'source') is not trained here; "
					     "evaluate its run directory (sb-lm import, docs/lm.md)");
	SB_TRY(sb_lm_cell_id(c, err));
	snprintf(run_dir, 4096, "%s/%s", runs_dir, c->cell_id);
	char path[4600];
	snprintf(path, sizeof path, "%s/train.ndjson", run_dir);
	struct prior pr;
	SB_TRY(scan_prior(path, run_dir, c, &pr, err));
	if (pr.done) {
		prune_optim(run_dir, -1); /* a kill between train.done and the clean-up */
		*skipped = 1;
		return 0;
	}
	/* data first: a cell whose corpora or mixture cannot be read leaves no run directory */
	struct sb_lm_corpus corp[8];
	memset(corp, 0, sizeof corp);
	int rc = 0;
	for (int i = 0; i < c->n_corpora && !rc; i++)
		rc = sb_lm_corpus_read(c->corpora[i], "train", &corp[i], err);
	struct sb_lm_mix mix;
	if (!rc)
		rc = sb_lm_mix_parse(&mix, c->mixture, corp, c->n_corpora, c->haystack[0] ? c->haystack : NULL,
				     c->data_seed, c->T, err);
	if (!rc && c->warm_steps > 0) /* the curriculum's shorter context too */
		rc = sb_lm_mix_check_len(&mix, c->warm_T, c->mixture, err);
	if (rc == SB_EUSAGE) /* the corpora and mixture were written in a cell: bad input data */
		rc = err ? (err->code = SB_EDATA) : SB_EDATA;
	/* a resumed run: the same corpora, or nothing in the run directory is touched */
	if (!rc && pr.resume)
		rc = check_resume_corpora(&pr, corp, c->n_corpora, path, run_dir, err);
	int logging = 0; /* train.ndjson holds this run's records (a failure is recorded there) */
	struct sb_lm_model *m = NULL;
	struct sb_lm_trainer *tr = NULL;
	uint8_t *batch = NULL;
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	struct sb_lines log = pr.keep; /* the records up to the checkpoint resumed from, or none */
	memset(&pr.keep, 0, sizeof pr.keep);
	if (!rc)
		rc = sb_lm_model_new(be, &c->model, &m, err);
	if (!rc)
		rc = sb_lm_model_init(m, c->seed, err);
	struct sb_lm_train_opts o = {.B = c->batch, .T = c->T, .tile = c->tile, .b1 = (float)c->b1, .b2 = (float)c->b2,
				     .eps = (float)c->eps, .wd = (float)c->weight_decay, .clip = (float)c->clip};
	if (!rc)
		rc = sb_lm_trainer_new(m, &o, &tr, err);
	/* the run directory once the model and its trainer are made: a model the trainer
	 * refuses (an evaluation-only field) leaves none either */
	if (!rc)
		rc = sb_mkdir_p(run_dir, err);
	double win_loss = 0;
	int win_n = 0;
	if (!rc && pr.resume)
		rc = load_resume(m, tr, c, run_dir, pr.resume, &win_loss, &win_n, err);
	if (!rc && !(batch = malloc((size_t)c->batch * (c->T + 1) * (c->warm_steps ? (size_t)(c->T / c->warm_T) : 1))))
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	size_t nparam = 0;
	if (m)
		for (int i = 0; i < m->n_params; i++)
			nparam += m->params[i].numel;
	/* cell.json */
	if (!rc)
		rc = sb_lm_cell_write(run_dir, c, (int64_t)nparam, &mix, err);
	const char *blas = is_cpu(be) ? sb_cpu_blas_core() : NULL;
	int blas_generic = blas ? sb_cpu_blas_generic() : 0;
	if (!rc && pr.resume) { /* go on after the kept records */
		logging = 1;
		char t[32];
		double us;
		sb_time_rfc3339(t, &us);
		sb_jw_record(&w, "train.resume", 1);
		sb_jw_kstr(&w, "cell_id", c->cell_id);
		sb_jw_kint(&w, "step", pr.resume);
		sb_jw_kstr(&w, "time", t);
		sb_jw_kstr(&w, "device", be->device);
		sb_jw_kint(&w, "threads", be->threads);
		if (blas) {
			sb_jw_kstr(&w, "blas", blas);
			sb_jw_kbool(&w, "blas_generic", blas_generic);
		}
		rc = tlog_emit(&log, &w, path, err);
		prune_optim(run_dir, pr.resume);
	} else if (!rc) { /* a fresh start: a new train.ndjson, this process's run.meta first */
		logging = 1;
		struct sb_input in[8];
		for (int i = 0; i < c->n_corpora; i++) {
			in[i].path = corp[i].path;
			memcpy(in[i].sha256, corp[i].sha256, 65);
			in[i].size_bytes = corp[i].file_bytes;
		}
		struct sb_run_meta meta = {.device = be->device, .threads = be->threads, .inputs = in,
					   .n_inputs = c->n_corpora, .blas = blas, .blas_generic = blas_generic};
		rc = sb_record_run_meta(&w, &meta, err);
		if (!rc)
			rc = sb_lines_add(&log, w.buf, w.len, err);
		sb_jw_reset(&w);
		if (!rc)
			rc = sb_lines_write(&log, path, err);
	}
	if (!rc && prog && prog->start)
		prog->start(prog->arg, run_dir, pr.resume, c->steps);
	double t_start = sb_monotonic_seconds(), cpu_start = process_cpu_seconds(), loss = NAN, gnorm = 0;
	int nonfinite = 0;
	int64_t step = pr.resume;
	for (; !rc && step < c->steps; step++) {
		int Tp = step < c->warm_steps ? c->warm_T : c->T, Bp = c->batch * (c->T / Tp);
		/* example indices: the step's first example is step * batch * (T / T'), so that
		 * a curriculum never reuses an example */
		uint64_t base = (uint64_t)step * c->batch * (uint64_t)(c->warm_steps && c->warm_T ? c->T / c->warm_T : 1);
		for (int b = 0; b < Bp && !rc; b++)
			rc = sb_lm_mix_sample_len(&mix, base + (uint64_t)b, Tp, batch + (size_t)b * (Tp + 1), NULL, err);
		if (rc)
			break;
		double lr = sb_lm_lr(c, step);
		rc = sb_lm_train_step_len(tr, batch, Tp, step + 1, (float)lr, &loss, &gnorm, err);
		if (rc && !isfinite(loss))
			nonfinite = 1;
		if (rc)
			break;
		win_loss += loss;
		win_n++;
		double secs = pr.secs + (sb_monotonic_seconds() - t_start);
		double cpus = pr.cpu + (process_cpu_seconds() - cpu_start);
		if ((step + 1) % c->log_every == 0 || step + 1 == c->steps) {
			sb_jw_record(&w, "train.step", 1);
			sb_jw_kstr(&w, "cell_id", c->cell_id);
			sb_jw_kint(&w, "step", step + 1);
			sb_jw_kint(&w, "T", Tp);
			sb_jw_kf64(&w, "train_loss", win_loss / win_n);
			sb_jw_kf64(&w, "last_loss", loss);
			sb_jw_kf64(&w, "grad_norm", gnorm);
			sb_jw_kf64(&w, "lr", lr);
			sb_jw_kf64(&w, "seconds", secs);
			sb_jw_kf64(&w, "cpu_seconds", cpus);
			sb_jw_kf64(&w, "tokens_per_s", (double)(step + 1) * c->batch * c->T / (secs > 0 ? secs : 1));
			rc = tlog_emit(&log, &w, path, err);
			win_loss = 0;
			win_n = 0;
		}
		/* an intermediate checkpoint, the optimiser state beside it, then its record (a run
		 * killed later resumes from here); then the previous state is removed */
		if (!rc && c->ckpt_every && (step + 1) % c->ckpt_every == 0 && step + 1 < c->steps) {
			char p2[4700], p3[4700], hx[SB_SHA256_HEX], ohx[SB_SHA256_HEX];
			step_path(p2, sizeof p2, run_dir, step + 1, 0);
			step_path(p3, sizeof p3, run_dir, step + 1, 1);
			rc = save_params(m, c, &mix, p2, step + 1, hx, err);
			if (!rc)
				rc = save_optim(tr, c, p3, step + 1, win_loss, win_n, ohx, err);
			if (!rc) {
				sb_jw_record(&w, "train.checkpoint", 1);
				sb_jw_kstr(&w, "cell_id", c->cell_id);
				sb_jw_kint(&w, "step", step + 1);
				snprintf(p2, sizeof p2, "step-%06lld.safetensors", (long long)(step + 1));
				sb_jw_kstr(&w, "checkpoint", p2);
				sb_jw_kstr(&w, "checkpoint_sha256", hx);
				sb_jw_kstr(&w, "optim_sha256", ohx);
				sb_jw_kf64(&w, "seconds", secs);
				sb_jw_kf64(&w, "cpu_seconds", cpus);
				rc = tlog_emit(&log, &w, path, err);
			}
			if (!rc)
				prune_optim(run_dir, step + 1);
		}
		if (prog && prog->fn)
			prog->fn(prog->arg, step + 1, c->steps, loss, secs);
	}
	double train_s = pr.secs + (sb_monotonic_seconds() - t_start);
	double train_cpu_s = pr.cpu + (process_cpu_seconds() - cpu_start);
	/* the final checkpoint, then the record that names it: train.done is written last */
	char sha[SB_SHA256_HEX] = "";
	if (!rc) {
		char p2[4600];
		snprintf(p2, sizeof p2, "%s/model.safetensors", run_dir);
		rc = save_params(m, c, &mix, p2, step, sha, err);
	}
	if (logging) {
		struct sb_err e2 = {0};
		sb_jw_reset(&w);
		sb_jw_record(&w, rc ? "train.failed" : "train.done", 1);
		sb_jw_kstr(&w, "cell_id", c->cell_id);
		sb_jw_kstr(&w, "status", !rc ? "completed" : nonfinite ? "failed_nonfinite_loss" : "failed");
		sb_jw_kint(&w, "steps_run", step);
		sb_jw_kf64(&w, "final_loss", loss);
		sb_jw_kf64(&w, "train_seconds", train_s);
		sb_jw_kf64(&w, "train_cpu_seconds", train_cpu_s);
		sb_jw_kint(&w, "parameter_count", (int64_t)nparam);
		sb_jw_kf64(&w, "peak_memory_mb", (double)sb_cpu_bytes_peak(be) / (1024.0 * 1024.0));
		if (rc)
			sb_jw_kstr(&w, "error", err->msg);
		else {
			sb_jw_kstr(&w, "checkpoint", "model.safetensors");
			sb_jw_kstr(&w, "checkpoint_sha256", sha);
		}
		int r2 = tlog_emit(&log, &w, path, &e2);
		if (!rc && r2) {
			*err = e2;
			rc = r2;
		}
		if (!rc)
			prune_optim(run_dir, -1); /* finished: nothing resumes from it */
	}
	sb_lines_free(&log);
	sb_jw_free(&w);
	free(batch);
	sb_lm_trainer_free(tr);
	sb_lm_model_free(m);
	for (int i = 0; i < c->n_corpora; i++)
		sb_lm_corpus_free(&corp[i]);
	return rc;
}

int sb_lm_run_open(struct sb_backend *be, const char *run_dir, int eval_only, struct sb_lm_cell *cell,
		   struct sb_lm_model **model, char *model_sha256, struct sb_err *err)
{
	char path[4600];
	snprintf(path, sizeof path, "%s/cell.json", run_dir);
	char *buf;
	size_t n;
	SB_TRY(sb_read_file(path, &buf, &n, 1 << 24, err));
	struct sb_json *v;
	int rc = sb_json_parse(buf, n, &v, err);
	free(buf);
	if (rc) {
		sb_err_prefix(err, "%s", path);
		return rc;
	}
	/* cell.json carries extra fields (cell_id, parameter_count, mixture_used): skipped; a
	 * field the cell's reader refuses is named with the file it is in (a SAS run's cell.json
	 * given to the LM evaluator said only "cell: unknown field 'id'") */
	rc = sb_lm_cell_parse(cell, v, err);
	if (rc)
		sb_err_prefix(err, "%s", path);
	const char *id = sb_json_str(sb_json_get(v, "cell_id"), "");
	if (!rc)
		rc = sb_lm_cell_id(cell, err);
	if (!rc && strcmp(id, cell->cell_id))
		rc = SB_ERR(err, SB_EDATA, "%s: cell_id %s does not match its content (%s)", path, id, cell->cell_id);
	sb_json_free(v);
	if (rc)
		return rc;
	snprintf(path, sizeof path, "%s/model.safetensors", run_dir);
	/* mapped, not read: the weights are copied once, into the model; the sidecar's hash is
	 * checked on the mapped bytes, so the file verified is the file used */
	SB_TRY(sb_sidecar_read(path, model_sha256, err));
	struct sb_tensors ts;
	struct sb_st_map map;
	SB_TRY(sb_st_map(path, model_sha256, &ts, &map, err));
	const char *cid = sb_tensors_meta(&ts, "cell_id");
	if (!cid || strcmp(cid, cell->cell_id)) {
		sb_st_unmap(&ts, &map);
		return SB_ERR(err, SB_EDATA, "%s: checkpoint of another cell (%s)", path, cid ? cid : "none");
	}
	/* evaluation: a checkpoint whose Linear weights are all bfloat16 keeps them so */
	if (eval_only)
		rc = sb_lm_model_new_eval(be, &cell->model, sb_lm_tensors_bf16(&cell->model, &ts), model, err);
	else
		rc = sb_lm_model_new(be, &cell->model, model, err);
	if (!rc)
		rc = sb_lm_model_from_tensors(*model, &ts, err);
	sb_st_unmap(&ts, &map);
	if (rc && *model) {
		sb_lm_model_free(*model);
		*model = NULL;
	}
	return rc;
}
