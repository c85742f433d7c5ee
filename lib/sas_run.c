/* sas_run.c — SAS cells, run directories and records (see sas_run.h). */
#include "sas_run.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hash.h"
#include "io.h"
#include "record.h"

int sb_sas_is_cell(const struct sb_json *obj)
{
	return obj && obj->type == SB_JSON_OBJECT && strcmp(sb_json_str(sb_json_get(obj, "family"), ""), "sas") == 0;
}

int sb_sas_field_int(const struct sb_json *v, const char *key, int lo, int hi, int *out, struct sb_err *err)
{
	int64_t x;
	if (sb_json_int64(v, &x) || x < lo || x > hi)
		return SB_ERR(err, SB_EDATA, "field '%s': an integer in [%d, %d] expected", key, lo, hi);
	*out = (int)x;
	return 0;
}

int sb_sas_field_num(const struct sb_json *v, const char *key, float *out, struct sb_err *err)
{
	if (v->type != SB_JSON_NUMBER || !(v->number >= 0) || !isfinite((float)v->number))
		return SB_ERR(err, SB_EDATA, "field '%s': a non-negative number in float range expected", key);
	*out = (float)v->number;
	return 0;
}

int sb_sas_cell_parse(struct sb_sas_cell *c, const struct sb_json *obj, struct sb_err *err)
{
	memset(c, 0, sizeof *c);
	sb_sas_cfg_default(&c->sc);
	sb_sas_proc_default(&c->proc);
	if (!sb_sas_is_cell(obj))
		return SB_ERR(err, SB_EDATA, "not a SAS cell (\"family\": \"sas\")");
	if (sb_json_get(obj, "backbone")) {
		c->scaled = 1;
		SB_TRY(sb_sas_scaled_parse(&c->sx, obj, err));
		snprintf(c->cell_id, sizeof c->cell_id, "%s", c->sx.cell_id);
		return 0;
	}
	const char *corpus = NULL, *id = NULL;
	for (size_t i = 0; i < obj->n; i++) {
		const char *k = obj->keys[i];
		const struct sb_json *v = obj->items[i];
		int rc = 0, iv;
		size_t zv;
		if (!strcmp(k, "family")) {
			continue;
		} else if (!strcmp(k, "id")) {
			if (v->type != SB_JSON_STRING || v->len >= sizeof c->cell_id || !sb_sas_id_ok(v->text, v->len))
				rc = SB_ERR(err, SB_EDATA, "field 'id': a directory name expected (no '/', not '.' or '..')");
			id = v->text;
		} else if (!strcmp(k, "corpus")) {
			if (v->type != SB_JSON_STRING || !v->len || v->len >= sizeof c->corpus)
				rc = SB_ERR(err, SB_EDATA, "field 'corpus': a path or NAME=PATH expected");
			corpus = v->text;
		} else if (!strcmp(k, "seed")) {
			int64_t s;
			if (sb_json_int64(v, &s) || s < 0)
				rc = SB_ERR(err, SB_EDATA, "field 'seed': a non-negative integer expected");
			c->proc.seed = (uint64_t)s;
		}
#define IFIELD(name, dst, lo, hi) else if (!strcmp(k, name)) rc = sb_sas_field_int(v, k, lo, hi, &dst, err);
#define FFIELD(name, dst) else if (!strcmp(k, name)) rc = sb_sas_field_num(v, k, &dst, err);
#define ZFIELD(name, dst)                                                                                              \
	else if (!strcmp(k, name))                                                                                     \
	{                                                                                                              \
		rc = sb_sas_field_int(v, k, 1, 1 << 30, &iv, err);                                                              \
		zv = (size_t)iv;                                                                                       \
		dst = zv;                                                                                              \
	}
		IFIELD("T", c->sc.T, 1, 4096)
		IFIELD("block", c->sc.block, 1, 4096)
		IFIELD("topk", c->sc.topk, 0, 4096)
		IFIELD("dsel", c->sc.dsel, 1, 1024)
		IFIELD("pre_steps", c->proc.pre_steps, 0, 1000000)
		IFIELD("pre_batch", c->proc.pre_batch, 1, 4096)
		IFIELD("sel_steps", c->proc.sel_steps, 0, 1000000)
		IFIELD("sel_batch", c->proc.sel_batch, 1, 4096)
		IFIELD("eval_windows", c->proc.eval_windows, 1, 1000000)
		FFIELD("pre_lr", c->proc.pre_lr)
		FFIELD("pre_wd", c->proc.pre_wd)
		FFIELD("pre_clip", c->proc.pre_clip)
		FFIELD("sel_lr", c->proc.sel_lr)
		FFIELD("sel_wd", c->proc.sel_wd)
		FFIELD("sel_clip", c->proc.sel_clip)
		ZFIELD("train_bytes", c->proc.train_bytes)
		ZFIELD("eval_bytes", c->proc.eval_bytes)
#undef IFIELD
#undef FFIELD
#undef ZFIELD
		else rc = SB_ERR(err, SB_EDATA, "unknown field '%s' in a SAS cell", k);
		if (rc)
			return rc;
	}
	if (!corpus)
		return SB_ERR(err, SB_EDATA, "missing field 'corpus'");
	if (!sb_json_get(obj, "seed"))
		return SB_ERR(err, SB_EDATA, "missing field 'seed'");
	if (c->sc.T % c->sc.block || c->sc.T / c->sc.block > 64)
		return SB_ERR(err, SB_EDATA, "T (%d) must be a multiple of block (%d), with at most 64 blocks", c->sc.T,
		              c->sc.block);
	/* the evaluation's windows must fit in eval_bytes of each part: refused here, before a
	 * training whose evaluation could never run (sb-eval refused it, after the training) */
	size_t need = (size_t)c->proc.eval_windows * (size_t)c->sc.T + 1;
	if (c->proc.eval_bytes < need)
		return SB_ERR(err, SB_EDATA,
		              "eval_windows %d of T %d need eval_bytes of at least %zu (windows x T + 1), not %zu",
		              c->proc.eval_windows, c->sc.T, need, c->proc.eval_bytes);
	snprintf(c->corpus, sizeof c->corpus, "%s", corpus);
	if (id) {
		snprintf(c->cell_id, sizeof c->cell_id, "%s", id);
	} else {
		/* sas-NAME-sSEED, NAME the corpus name (before '=') or the file's base name up to
		 * its first '.' */
		char name[64];
		const char *eq = strchr(corpus, '='), *b = strrchr(corpus, '/');
		const char *from = eq ? corpus : b && b[1] ? b + 1 : corpus;
		size_t L = eq ? (size_t)(eq - corpus) : strlen(from);
		const char *dot = eq ? NULL : memchr(from, '.', L);
		if (dot && dot != from)
			L = (size_t)(dot - from);
		if (L >= sizeof name) /* cut, two corpora could share a run directory */
			return SB_ERR(err, SB_EDATA,
			              "field 'corpus': its name is %zu bytes, longer than the default id sas-NAME-sSEED "
			              "takes (%zu): give the cell an 'id'",
			              L, sizeof name - 1);
		memcpy(name, from, L);
		name[L] = 0;
		for (char *p = name; *p; p++)
			if (*p == '/' || *p == ' ')
				*p = '_';
		snprintf(c->cell_id, sizeof c->cell_id, "sas-%s-s%llu", name, (unsigned long long)c->proc.seed);
	}
	return 0;
}

void sb_sas_cell_json(struct sb_jw *w, const struct sb_sas_cell *c)
{
	const struct sb_sas_proc *p = &c->proc;
	sb_jw_obj(w);
	sb_jw_kstr(w, "family", "sas");
	sb_jw_kstr(w, "id", c->cell_id);
	sb_jw_kint(w, "seed", (int64_t)p->seed);
	sb_jw_kstr(w, "corpus", c->corpus);
	sb_jw_kint(w, "T", c->sc.T);
	sb_jw_kint(w, "block", c->sc.block);
	sb_jw_kint(w, "topk", c->sc.topk);
	sb_jw_kint(w, "dsel", c->sc.dsel);
	sb_jw_kint(w, "pre_steps", p->pre_steps);
	sb_jw_kint(w, "pre_batch", p->pre_batch);
	sb_jw_kf32(w, "pre_lr", p->pre_lr);
	sb_jw_kf32(w, "pre_wd", p->pre_wd);
	sb_jw_kf32(w, "pre_clip", p->pre_clip);
	sb_jw_kint(w, "sel_steps", p->sel_steps);
	sb_jw_kint(w, "sel_batch", p->sel_batch);
	sb_jw_kf32(w, "sel_lr", p->sel_lr);
	sb_jw_kf32(w, "sel_wd", p->sel_wd);
	sb_jw_kf32(w, "sel_clip", p->sel_clip);
	sb_jw_kint(w, "eval_windows", p->eval_windows);
	sb_jw_kint(w, "train_bytes", (int64_t)p->train_bytes);
	sb_jw_kint(w, "eval_bytes", (int64_t)p->eval_bytes);
	sb_jw_obj_end(w);
}

/* ---------------------------------------------------------------- corpora */

static int read_test_part(const char *spec, struct sb_lm_corpus *c, struct sb_err *err)
{
	const char *eq = strchr(spec, '=');
	const char *path = eq ? eq + 1 : spec;
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		/* sb-fetch's corpus directory: DIR/test.safetensors */
		char p[4200];
		snprintf(p, sizeof p, "%s/test.safetensors", path);
		char sha[65];
		struct sb_tensors ts;
		SB_TRY(sb_st_read_checked(p, 0, sha, &ts, err));
		const struct sb_tensor *t = sb_tensors_find(&ts, "bytes");
		const char *fmt = sb_tensors_meta(&ts, "format"), *sp = sb_tensors_meta(&ts, "split");
		int rc = 0;
		if (!fmt || strcmp(fmt, "sparsebench.corpus") || !t || t->dtype != SB_U8 || t->ndim != 1)
			rc = SB_ERR(err, SB_EDATA, "%s: not a sparsebench corpus (format, tensor 'bytes' U8 [n])", p);
		else if (!sp || strcmp(sp, "test"))
			rc = SB_ERR(err, SB_EDATA, "%s: metadata says split '%s', expected 'test'", p, sp ? sp : "");
		else
			rc = sb_lm_corpus_from(c, "", t->data, (size_t)t->shape[0], err);
		sb_tensors_free(&ts);
		if (!rc) {
			snprintf(c->path, sizeof c->path, "%s", p);
			memcpy(c->sha256, sha, sizeof c->sha256);
			c->file_bytes = sb_file_size(p);
		}
		return rc;
	}
	/* one text: the part after floor(0.95 n), as sb-fetch cuts it */
	struct sb_lm_corpus all;
	SB_TRY(sb_lm_corpus_read(spec, "all", &all, err));
	size_t a = (size_t)floor(SB_LM_SPLIT_VALID * (double)all.total);
	int rc = sb_lm_corpus_from(c, all.name, all.bytes + a, all.n - a, err);
	if (!rc) {
		snprintf(c->path, sizeof c->path, "%s", all.path);
		memcpy(c->sha256, all.sha256, sizeof c->sha256);
		c->file_bytes = all.file_bytes;
		c->total = all.total;
		c->offset = a;
	}
	sb_lm_corpus_free(&all);
	return rc;
}

int sb_sas_corpus_part(const char *spec, const char *part, size_t limit, struct sb_lm_corpus *c, struct sb_err *err)
{
	int rc;
	if (!strcmp(part, "test"))
		rc = read_test_part(spec, c, err);
	else
		rc = sb_lm_corpus_read(spec, part, c, err);
	if (rc)
		return rc;
	/* name as sb_lm_corpus_read names it */
	if (!c->name[0]) {
		struct sb_lm_corpus tmp;
		if (!sb_lm_corpus_read(spec, "valid", &tmp, NULL)) {
			snprintf(c->name, sizeof c->name, "%s", tmp.name);
			sb_lm_corpus_free(&tmp);
		}
	}
	snprintf(c->split, sizeof c->split, "%s", part);
	if (c->n > limit)
		c->n = limit;
	return 0;
}

const char *sb_sas_corpus_note(const char *name)
{
	if (!strncmp(name, "wikitext2", 9) || !strncmp(name, "wikitext-2", 10))
		return "";
	return "NOT WikiText-2: this corpus stands in for it (WikiText-2 is not available offline here; "
	       "sb-fetch wikitext2 fetches it where the network allows). Perplexities do not compare "
	       "with the published WikiText-2 numbers in level, only in the SAS-vs-dense change.";
}

static void corpus_json(struct sb_jw *w, const char *key, const struct sb_lm_corpus *c)
{
	sb_jw_key(w, key);
	sb_jw_obj(w);
	sb_jw_kstr(w, "name", c->name);
	sb_jw_kstr(w, "path", c->path);
	sb_jw_kstr(w, "part", c->split);
	sb_jw_kint(w, "offset", (int64_t)c->offset);
	sb_jw_kint(w, "tokens", (int64_t)c->n);
	sb_jw_kstr(w, "file_sha256", c->sha256);
	sb_jw_obj_end(w);
}

/* ---------------------------------------------------------------- training */

struct step_log {
	struct sb_jw *w;
	int rc;
	struct sb_err *err;
	double first, last, sel_first, sel_last;
	sb_sas_progress_fn fn;
	void *arg;
	int pre_steps, sel_steps;
};

static void on_step(void *arg, const char *phase, int step, double loss, double gnorm)
{
	struct step_log *L = arg;
	int pre = !strcmp(phase, "pretrain");
	if (pre) {
		if (step == 1)
			L->first = loss;
		L->last = loss;
	} else {
		if (step == 1)
			L->sel_first = loss;
		L->sel_last = loss;
	}
	sb_jw_record(L->w, pre ? "sas.pretrain.step" : "sas.selector.step", 1);
	sb_jw_kint(L->w, "step", step);
	sb_jw_kf64(L->w, "loss", loss);
	sb_jw_kf64(L->w, "grad_norm", gnorm);
	sb_jw_obj_end(L->w);
	if (!L->rc)
		L->rc = sb_jw_line(L->w, L->err);
	if (L->fn)
		L->fn(L->arg, phase, step, pre ? L->pre_steps : L->sel_steps, loss);
}

struct scaled_prog {
	sb_sas_progress_fn fn;
	void *arg;
};

static void scaled_progress(void *arg, const char *what, int done, int total, double value)
{
	struct scaled_prog *p = arg;
	if (p->fn)
		p->fn(p->arg, what, done, total, value);
}

/* the SHA-256 of the cell as cell.json holds it (sb_sas_cell_json, without the newline): in the
 * checkpoint's metadata, so that sb-eval notices a cell.json edited after training in any field */
static int cell_hash(const struct sb_sas_cell *c, char hex[SB_SHA256_HEX], struct sb_err *err)
{
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_sas_cell_json(&w, c);
	int oom = w.oom;
	if (!oom)
		sb_sha256_buf(w.buf, w.len, hex);
	sb_jw_free(&w);
	return oom ? SB_ERR(err, SB_EINTERNAL, "out of memory") : 0;
}

int sb_sas_cell_finished(const struct sb_sas_cell *c, const char *runs_dir)
{
	if (c->scaled) /* the same checks, on its selectors (lib/sas_scaled.c) */
		return sb_sas_scaled_finished(&c->sx, runs_dir);
	char path[4200], hex[SB_SHA256_HEX];
	struct sb_err e = {0};
	char *buf = NULL;
	size_t n = 0;
	int finished = 0;
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_sas_cell_json(&w, c);
	snprintf(path, sizeof path, "%s/%s/cell.json", runs_dir, c->cell_id);
	if (w.oom || sb_read_file(path, &buf, &n, 1 << 20, &e) || n != w.len + 1 || memcmp(buf, w.buf, w.len) ||
	    buf[w.len] != '\n')
		goto out;
	free(buf);
	buf = NULL;
	snprintf(path, sizeof path, "%s/%s/train.ndjson", runs_dir, c->cell_id);
	if (sb_read_file(path, &buf, &n, 0, &e) || n < 2)
		goto out;
	size_t end = n; /* the last line */
	while (end > 0 && buf[end - 1] == '\n')
		end--;
	size_t start = end;
	while (start > 0 && buf[start - 1] != '\n')
		start--;
	struct sb_json *done = NULL;
	if (sb_json_parse(buf + start, end - start, &done, &e))
		goto out;
	const char *kind = sb_json_str(sb_json_get(done, "kind"), "");
	const char *want = sb_json_str(sb_json_get(done, "checkpoint_sha256"), "");
	snprintf(path, sizeof path, "%s/%s/model.safetensors", runs_dir, c->cell_id);
	finished = !strcmp(kind, "sas.train.done") && want[0] && !sb_sha256_file(path, hex, NULL, &e) &&
	           !strcmp(hex, want);
	sb_json_free(done);
	/* and that checkpoint is this cell's: an interrupted retrain of an edited cell (same id)
	 * leaves the new cell.json beside the previous cell's train.ndjson and checkpoint */
	if (finished) {
		struct sb_tensors meta;
		const char *mh;
		finished = !sb_st_read_meta(path, &meta, &e) && (mh = sb_tensors_meta(&meta, "cell_sha256")) &&
		           !cell_hash(c, hex, &e) && !strcmp(mh, hex);
		sb_tensors_free(&meta);
	}
out:
	free(buf);
	sb_jw_free(&w);
	return finished;
}

int sb_sas_train_cell(struct sb_backend *be, const struct sb_sas_cell *c, const char *runs_dir, char *run_dir,
                      sb_sas_progress_fn fn, void *arg, struct sb_err *err)
{
	if (c->scaled) {
		struct scaled_prog p = {fn, arg};
		return sb_sas_scaled_train(&c->sx, runs_dir, run_dir, scaled_progress, &p, err);
	}
	snprintf(run_dir, 4096, "%s/%s", runs_dir, c->cell_id);
	/* the corpus first, so that a cell that cannot train leaves no run directory behind */
	struct sb_lm_corpus tr;
	SB_TRY(sb_sas_corpus_part(c->corpus, "train", c->proc.train_bytes, &tr, err));
	if (tr.n < (size_t)c->sc.T + 1) {
		int n = (int)tr.n;
		sb_lm_corpus_free(&tr);
		return SB_ERR(err, SB_EDATA, "sas: the training text has %d tokens, fewer than one window of %d", n,
		              c->sc.T + 1);
	}
	/* and the valid part holds the evaluation's windows (the test part is sb-eval's to read) */
	struct sb_lm_corpus va;
	int rc = sb_sas_corpus_part(c->corpus, "valid", c->proc.eval_bytes, &va, err);
	size_t need = (size_t)c->proc.eval_windows * (size_t)c->sc.T + 1, have = rc ? 0 : va.n;
	if (!rc)
		sb_lm_corpus_free(&va);
	if (!rc && have < need)
		rc = SB_ERR(err, SB_EDATA, "sas: %s: the valid part has %zu tokens, fewer than the %zu of eval_windows %d",
		            c->corpus, have, need, c->proc.eval_windows);
	if (rc) {
		sb_lm_corpus_free(&tr);
		return rc;
	}
	rc = sb_mkdir_p(run_dir, err);
	if (rc) {
		sb_lm_corpus_free(&tr);
		return rc;
	}
	struct sb_sas_model *m = NULL;
	rc = sb_sas_model_new(be, &c->sc, NULL, &m, err);
	if (!rc)
		rc = sb_sas_model_init(m, c->proc.seed, err);
	char path[4200];
	/* cell.json */
	if (!rc) {
		struct sb_jw w;
		sb_jw_init(&w, NULL);
		sb_sas_cell_json(&w, c);
		char *text = malloc(w.len + 2);
		if (!text || w.oom) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		} else {
			memcpy(text, w.buf, w.len);
			text[w.len] = '\n';
			snprintf(path, sizeof path, "%s/cell.json", run_dir);
			rc = sb_write_file_atomic(path, text, w.len + 1, err);
		}
		free(text);
		sb_jw_free(&w);
	}
	struct sb_atomic a;
	snprintf(path, sizeof path, "%s/train.ndjson", run_dir);
	if (!rc)
		rc = sb_atomic_open(&a, path, err);
	if (rc) {
		sb_sas_model_free(m);
		sb_lm_corpus_free(&tr);
		return rc;
	}
	struct sb_jw w;
	sb_jw_init(&w, a.f);
	struct sb_input in = {.path = tr.path, .size_bytes = tr.file_bytes};
	memcpy(in.sha256, tr.sha256, sizeof in.sha256);
	struct sb_run_meta meta = {.device = be->device, .threads = 1, .inputs = &in, .n_inputs = 1};
	rc = sb_record_run_meta(&w, &meta, err);
	struct step_log L = {&w, 0, err, 0, 0, 0, 0, fn, arg, c->proc.pre_steps, c->proc.sel_steps};
	double t0 = sb_monotonic_seconds(), gmean = 0;
	if (!rc)
		rc = sb_sas_pretrain(m, tr.bytes, tr.n, &c->proc, on_step, &L, err);
	if (!rc)
		rc = L.rc;
	double t1 = sb_monotonic_seconds();
	if (!rc)
		rc = sb_sas_train_selector(m, tr.bytes, tr.n, &c->proc, on_step, &L, &gmean, err);
	if (!rc)
		rc = L.rc;
	double t2 = sb_monotonic_seconds();
	char sha[65] = "";
	snprintf(path, sizeof path, "%s/model.safetensors", run_dir);
	if (!rc) {
		struct sb_tensors ts;
		sb_tensors_init(&ts);
		char seed[32], steps[64], cell_sha[SB_SHA256_HEX];
		snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->proc.seed);
		snprintf(steps, sizeof steps, "%d+%d", c->proc.pre_steps, c->proc.sel_steps);
		rc = sb_sas_model_to_tensors(m, &ts, err);
		if (!rc)
			rc = cell_hash(c, cell_sha, err);
		if (!rc)
			rc = sb_tensors_set_metas(&ts, (const char *const[][2]){
			                           {"format", "sparsebench.sas"},
			                           {"family", "sas"},
			                           {"cell_id", c->cell_id},
			                           {"seed", seed},
			                           {"steps", steps},
			                           {"cell_sha256", cell_sha}},
			                          6, err);
		if (!rc)
			rc = sb_st_write(path, &ts, err);
		sb_tensors_free(&ts);
		if (!rc)
			rc = sb_sha256_file(path, sha, NULL, err);
		if (!rc)
			rc = sb_sidecar_write(path, sha, err);
	}
	if (!rc) {
		sb_jw_record(&w, "sas.train.done", 1);
		sb_jw_kstr(&w, "cell_id", c->cell_id);
		sb_jw_kint(&w, "seed", (int64_t)c->proc.seed);
		sb_jw_kstr(&w, "status", "completed");
		sb_jw_kstr(&w, "corpus", tr.name);
		sb_jw_kstr(&w, "corpus_note", sb_sas_corpus_note(tr.name));
		corpus_json(&w, "train_text", &tr);
		sb_jw_kint(&w, "parameter_count", (int64_t)sb_sas_param_count(m));
		sb_jw_kint(&w, "selector_parameter_count", (int64_t)m->n_sel);
		sb_jw_kint(&w, "pretrain_steps", c->proc.pre_steps);
		sb_jw_kint(&w, "selector_steps", c->proc.sel_steps);
		sb_jw_kf64(&w, "pretrain_loss_first", L.first);
		sb_jw_kf64(&w, "pretrain_loss_last", L.last);
		int sel = c->proc.sel_steps > 0; /* no selector step: no loss or gradient (null; they read 0) */
		sb_jw_kf64(&w, "selector_loss_first", sel ? L.sel_first : NAN);
		sb_jw_kf64(&w, "selector_loss_last", sel ? L.sel_last : NAN);
		sb_jw_kf64(&w, "selector_gradient_norm_mean", sel ? gmean : NAN);
		sb_jw_kf64(&w, "pretrain_seconds", t1 - t0);
		sb_jw_kf64(&w, "selector_seconds", t2 - t1);
		sb_jw_kstr(&w, "checkpoint", "model.safetensors");
		sb_jw_kstr(&w, "checkpoint_sha256", sha);
		sb_jw_obj_end(&w);
		rc = sb_jw_line(&w, err);
	}
	sb_jw_free(&w);
	if (!rc)
		rc = sb_atomic_commit(&a, err);
	else
		sb_atomic_abort(&a);
	sb_sas_model_free(m);
	sb_lm_corpus_free(&tr);
	return rc;
}

/* ---------------------------------------------------------------- evaluation */

static int read_json_file(const char *path, struct sb_json **v, struct sb_err *err)
{
	char *buf;
	size_t n;
	SB_TRY(sb_read_file(path, &buf, &n, 1 << 24, err));
	int rc = sb_json_parse(buf, n, v, err);
	free(buf);
	if (rc)
		sb_err_prefix(err, "%s", path);
	return rc;
}

int sb_sas_is_run(const char *run_dir)
{
	char path[4600];
	snprintf(path, sizeof path, "%s/cell.json", run_dir);
	struct sb_json *v = NULL;
	if (!sb_file_exists(path) || read_json_file(path, &v, NULL))
		return 0;
	int r = sb_sas_is_cell(v);
	sb_json_free(v);
	return r;
}

/* the sas.train.done record of train.ndjson (owned copy) */
static int read_done(const char *run_dir, struct sb_json **done, struct sb_err *err)
{
	char path[4600];
	snprintf(path, sizeof path, "%s/train.ndjson", run_dir);
	struct sb_ndjson_reader *rd;
	*done = NULL;
	SB_TRY(sb_ndjson_open(path, &rd, err));
	int rc = 0;
	for (;;) {
		struct sb_json *v = NULL;
		rc = sb_ndjson_next(rd, &v, err);
		if (rc || !v)
			break;
		if (!strcmp(sb_json_str(sb_json_get(v, "kind"), ""), "sas.train.done")) {
			sb_json_free(*done);
			*done = v;
		} else {
			sb_json_free(v);
		}
	}
	sb_ndjson_close(rd); /* an error of the reader names the file and line already */
	if (rc) { /* a record read before the bad line is not returned */
		sb_json_free(*done);
		*done = NULL;
	}
	if (!rc && !*done)
		rc = SB_ERR(err, SB_EDATA, "%s: no sas.train.done record (training did not finish)", path);
	return rc;
}

static void copy_field(struct sb_jw *w, const struct sb_json *rec, const char *key)
{
	const struct sb_json *v = sb_json_get(rec, key);
	sb_jw_key(w, key);
	if (v)
		sb_jw_value(w, v);
	else
		sb_jw_null(w);
}

static void evalres_json(struct sb_jw *w, const char *prefix, const char *split, const struct sb_sas_evalres *r)
{
	char k[64];
	snprintf(k, sizeof k, "%s_%s_loss", prefix, split);
	sb_jw_kf64(w, k, r->loss);
	snprintf(k, sizeof k, "%s_%s_ppl", prefix, split);
	sb_jw_kf64(w, k, r->ppl);
}

int sb_sas_eval_run(struct sb_backend *be, const char *run_dir, struct sb_jw *out, struct sb_err *err)
{
	char path[4600];
	snprintf(path, sizeof path, "%s/cell.json", run_dir);
	struct sb_json *cj = NULL, *done = NULL;
	struct sb_sas_cell c;
	SB_TRY(read_json_file(path, &cj, err));
	int rc = sb_sas_cell_parse(&c, cj, err);
	sb_json_free(cj);
	if (rc) {
		sb_err_prefix(err, "%s", path);
		return rc;
	}
	if (c.scaled)
		return sb_sas_scaled_eval(run_dir, out, NULL, NULL, err);
	SB_TRY(read_done(run_dir, &done, err));
	char mp[4600], sha[65];
	snprintf(mp, sizeof mp, "%s/model.safetensors", run_dir);
	struct sb_tensors ts;
	rc = sb_st_read_checked(mp, 1, sha, &ts, err);
	if (!rc && strcmp(sha, sb_json_str(sb_json_get(done, "checkpoint_sha256"), "")))
		rc = SB_ERR(err, SB_EDATA, "%s: SHA-256 %s is not the one train.ndjson recorded", mp, sha);
	struct sb_sas_model *m = NULL;
	if (!rc)
		rc = sb_sas_model_new(be, &c.sc, NULL, &m, err);
	if (!rc) { /* the checkpoint names its cell (written by the training, sb_sas_train_cell) */
		const char *mid = sb_tensors_meta(&ts, "cell_id");
		const char *ms = sb_tensors_meta(&ts, "seed"), *mst = sb_tensors_meta(&ts, "steps");
		char seed[32], steps[64];
		snprintf(seed, sizeof seed, "%llu", (unsigned long long)c.proc.seed);
		snprintf(steps, sizeof steps, "%d+%d", c.proc.pre_steps, c.proc.sel_steps);
		if (!mid || strcmp(mid, c.cell_id))
			rc = SB_ERR(err, SB_EDATA, "%s: metadata names cell '%s', not this run's '%s'", mp, mid ? mid : "(none)",
			            c.cell_id);
		else if ((ms && strcmp(ms, seed)) || (mst && strcmp(mst, steps)))
			rc = SB_ERR(err, SB_EDATA,
			            "%s: trained with seed %s and steps %s, but cell.json says seed %s and steps %s "
			            "(an edited cell.json)",
			            mp, ms ? ms : "?", mst ? mst : "?", seed, steps);
		/* the whole cell (checkpoints since cell_sha256 was added; older ones lack it) */
		const char *mh = sb_tensors_meta(&ts, "cell_sha256");
		char hex[SB_SHA256_HEX];
		if (!rc && mh && !(rc = cell_hash(&c, hex, err)) && strcmp(mh, hex))
			rc = SB_ERR(err, SB_EDATA,
			            "%s: trained for a cell of SHA-256 %.16s..., but cell.json now hashes to %.16s... (a "
			            "cell.json edited after training: corpus, topk or another field)",
			            mp, mh, hex);
	}
	if (!rc)
		rc = sb_sas_model_from_tensors(m, &ts, err);
	if (rc && !strstr(err->msg, mp))
		sb_err_prefix(err, "%s", mp);
	sb_tensors_free(&ts);
	struct sb_lm_corpus va = {0}, te = {0};
	if (!rc)
		rc = sb_sas_corpus_part(c.corpus, "valid", c.proc.eval_bytes, &va, err);
	if (!rc)
		rc = sb_sas_corpus_part(c.corpus, "test", c.proc.eval_bytes, &te, err);
	struct sb_sas_evalres dv, sv, dt, st;
	int W = c.proc.eval_windows;
	if (!rc)
		rc = sb_sas_evaluate(m, va.bytes, va.n, W, SB_SAS_DENSE, &dv, err);
	if (!rc)
		rc = sb_sas_evaluate(m, va.bytes, va.n, W, SB_SAS_SPARSE, &sv, err);
	if (!rc)
		rc = sb_sas_evaluate(m, te.bytes, te.n, W, SB_SAS_DENSE, &dt, err);
	if (!rc)
		rc = sb_sas_evaluate(m, te.bytes, te.n, W, SB_SAS_SPARSE, &st, err);
	struct sb_atomic a;
	snprintf(path, sizeof path, "%s/eval.ndjson", run_dir);
	if (!rc)
		rc = sb_atomic_open(&a, path, err);
	if (rc) {
		sb_json_free(done);
		sb_sas_model_free(m);
		sb_lm_corpus_free(&va);
		sb_lm_corpus_free(&te);
		return rc;
	}
	struct sb_jw w;
	sb_jw_init(&w, a.f);
	struct sb_input in[3] = {{.path = mp, .size_bytes = sb_file_size(mp)},
				 {.path = va.path, .size_bytes = va.file_bytes},
				 {.path = te.path, .size_bytes = te.file_bytes}};
	memcpy(in[0].sha256, sha, sizeof sha);
	memcpy(in[1].sha256, va.sha256, sizeof va.sha256);
	memcpy(in[2].sha256, te.sha256, sizeof te.sha256);
	struct sb_run_meta meta = {.device = be->device, .threads = 1, .inputs = in, .n_inputs = 3};
	rc = sb_record_run_meta(&w, &meta, err);
	int64_t kept, causal;
	sb_sas_budget(c.sc.T, c.sc.block, c.sc.topk, &kept, &causal);
	double frac = st.obs.kept / st.obs.causal;
	for (int pass = 0; pass < 2 && !rc; pass++) {
		struct sb_jw *o = pass ? out : &w;
		if (!o)
			break;
		sb_jw_record(o, "sas.eval", 1);
		sb_jw_kstr(o, "cell_id", c.cell_id);
		sb_jw_kint(o, "seed", (int64_t)c.proc.seed);
		sb_jw_kstr(o, "corpus", va.name);
		sb_jw_kstr(o, "corpus_note", sb_sas_corpus_note(va.name));
		corpus_json(o, "val_text", &va);
		corpus_json(o, "test_text", &te);
		sb_jw_kstr(o, "test_read", "protocol_b_fixed_procedure");
		sb_jw_kint(o, "T", c.sc.T);
		sb_jw_kint(o, "block", c.sc.block);
		sb_jw_kint(o, "topk", c.sc.topk);
		sb_jw_kint(o, "eval_windows", W);
		sb_jw_kint(o, "parameter_count", (int64_t)sb_sas_param_count(m));
		sb_jw_kint(o, "selector_parameter_count", (int64_t)m->n_sel);
		copy_field(o, done, "pretrain_loss_first");
		copy_field(o, done, "pretrain_loss_last");
		copy_field(o, done, "selector_gradient_norm_mean");
		evalres_json(o, "dense", "val", &dv);
		evalres_json(o, "sas", "val", &sv);
		evalres_json(o, "dense", "test", &dt);
		evalres_json(o, "sas", "test", &st);
		sb_jw_kf64(o, "val_ppl_change_vs_dense_percent", 100.0 * (sv.ppl - dv.ppl) / dv.ppl);
		sb_jw_kf64(o, "test_ppl_change_vs_dense_percent", 100.0 * (st.ppl - dt.ppl) / dt.ppl);
		sb_jw_kf64(o, "retained_attention_fraction", frac);
		sb_jw_kf64(o, "attention_positions_reduced_percent", 100.0 * (1.0 - frac));
		sb_jw_kint(o, "retained_positions", (int64_t)st.obs.kept);
		sb_jw_kint(o, "causal_positions", (int64_t)st.obs.causal);
		sb_jw_kf64(o, "retained_attention_fraction_expected", (double)kept / (double)causal);
		sb_jw_kf64(o, "selector_gate_entropy", st.obs.entropy_sum / st.obs.entropy_n);
		sb_jw_kf64(o, "selector_gate_entropy_val", sv.obs.entropy_sum / sv.obs.entropy_n);
		sb_jw_kstr(o, "checkpoint_sha256", sha);
		sb_jw_obj_end(o);
		rc = sb_jw_line(o, err);
	}
	sb_jw_free(&w);
	if (!rc)
		rc = sb_atomic_commit(&a, err);
	else
		sb_atomic_abort(&a);
	sb_json_free(done);
	sb_sas_model_free(m);
	sb_lm_corpus_free(&va);
	sb_lm_corpus_free(&te);
	return rc;
}
