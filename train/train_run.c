/* train_run.c — one cell: run directory, resume, the epoch loop, checkpoints and records.
 *
 * Files of RUNS_DIR/CELL_ID/ (docs/records.md), every one written atomically:
 *   cell.json                      the complete cell and derived fields
 *   epoch-NNN.safetensors (+.sha256)   parameters after NNN epochs (never rewritten)
 *   epoch-NNN.optim.safetensors    parameters, AdamW moments and step after NNN epochs:
 *                                  only for the newest epoch (the previous one is removed
 *                                  once the newer one and its record are written); its
 *                                  metadata pair it with its checkpoint and hash its data
 *   train.ndjson                   run.meta, train.epoch per epoch, train.done | train.failed
 *                                  (train.resume where a run was resumed)
 *
 * Order per epoch: checkpoint, optimiser state, train.ndjson (with the new train.epoch),
 * then the previous optimiser state is removed. A killed run therefore always finds the
 * optimiser state of the last epoch its train.ndjson records, and resumes from there:
 * data order (SB_RNG_SHUFFLE, stream = epoch), dropout (stream = global step) and the
 * optimiser state depend only on (seed, epoch, step), so the result is bit-identical.
 * A present checkpoint or optimiser state that is damaged fails the cell (SB_EDATA)
 * instead of being resumed from or started over (scan_existing, load_optim).
 */
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "encoder.h"
#include "hash.h"
#include "io.h"
#include "rng.h"
#include "tensor.h"

/* ---------------------------------------------------------------- a cell run
 * (train.ndjson is held in memory, struct sb_lines, and rewritten after each record) */

struct run {
	const struct sb_cell *c;
	const struct train_env *env;
	int index;
	char dir[4096], ndjson[4200];
	struct sb_lines lines;
	int to_dir; /* records go to train.ndjson too: the run's log is r->lines (not before) */
	struct sb_jw w;
	double t_wall0, train_seconds;
	size_t nparams;
};

/* Emit the record built in r->w on the output stream and, once the run's log is settled
 * (r->to_dir), into train.ndjson (rewritten). Until then (the run directory is being
 * looked at: a skip, or a resume state or dataset found wrong) the directory is left as
 * it was. */
static int emit(struct run *r, struct sb_err *err)
{
	struct sb_jw *w = &r->w;
	sb_jw_obj_end(w);
	int rc = sb_jw_line(w, err); /* in memory: appends '\n' */
	if (rc)
		return rc;
	size_t n = w->len;
	while (n && w->buf[n - 1] == '\n')
		n--;
	if (r->to_dir) {
		rc = sb_lines_add(&r->lines, w->buf, n, err);
		if (!rc)
			rc = sb_lines_write(&r->lines, r->ndjson, err);
	}
	pthread_mutex_lock(r->env->out_mu);
	if (fwrite(w->buf, 1, w->len, r->env->out) != w->len || fflush(r->env->out))
		if (!rc)
			rc = SB_ERRNO(err, "write error on the output");
	pthread_mutex_unlock(r->env->out_mu);
	sb_jw_reset(w);
	w->depth = 0;
	w->need_comma[0] = 0;
	return rc;
}

static void rec_start(struct run *r, const char *kind)
{
	sb_jw_reset(&r->w);
	r->w.depth = 0;
	r->w.need_comma[0] = 0;
	sb_jw_record(&r->w, kind, 1);
	sb_jw_kstr(&r->w, "cell_id", r->c->cell_id);
}

static double peak_mb(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru))
		return NAN;
	return ru.ru_maxrss / 1024.0; /* kilobytes on Linux */
}

static int record_failed(struct run *r, const char *status, const char *msg, int epoch, int64_t step, int sie,
                         struct sb_err *err)
{
	rec_start(r, "train.failed");
	struct sb_jw *w = &r->w;
	sb_jw_kstr(w, "task", r->c->task);
	sb_jw_kstr(w, "method", r->c->method);
	sb_jw_kint(w, "seed", (int64_t)r->c->seed);
	sb_jw_kstr(w, "status", status);
	sb_jw_kstr(w, "error", msg);
	if (epoch >= 0) {
		sb_jw_kint(w, "epoch", epoch);
		sb_jw_kint(w, "step", step);
		sb_jw_kint(w, "step_in_epoch", sie);
	}
	int done = 0;
	for (size_t i = 0; i < r->lines.n; i++)
		done += strstr(r->lines.l[i], "\"kind\":\"train.epoch\"") != NULL;
	sb_jw_kint(w, "epochs_run", done);
	sb_jw_kf64(w, "train_seconds", r->train_seconds);
	sb_jw_kf64(w, "wall_seconds", sb_monotonic_seconds() - r->t_wall0);
	sb_jw_kf64(w, "peak_memory_mb", peak_mb());
	sb_jw_kint(w, "parameter_count", (int64_t)r->nparams);
	return emit(r, err);
}

static void progress(const struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(const struct run *r, const char *fmt, ...)
{
	if (sb_quiet)
		return;
	char line[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(r->env->out_mu);
	sb_progress(0, "cell %d/%d %s: %s", r->index + 1, r->env->ncells, r->c->cell_id, line);
	pthread_mutex_unlock(r->env->out_mu);
}

/* ---------------------------------------------------------------- resume */

/* Look at an existing train.ndjson: *done = 1 when the cell already finished
 * (completed, or failed with a non-finite loss, which would fail again); else the
 * newest epoch whose record, checkpoint and optimiser state are all present, with the
 * records up to it kept in r->lines and its checkpoint's SHA-256 in resume_sha256 (0:
 * none, a fresh start). Every checkpoint that a train.epoch record names and that is
 * present must hash as recorded: one that does not is damaged, SB_EDATA (it is neither
 * rewritten nor the cell started over in silence). */
struct epoch_rec {
	int ec;                  /* epochs_completed */
	char sha[SB_SHA256_HEX]; /* checkpoint_sha256 as recorded */
	size_t keep_n;           /* lines up to and with this record */
	double secs;             /* training seconds up to it */
};

static int scan_existing(struct run *r, int *done, int *resume_epochs, char resume_sha256[SB_SHA256_HEX],
                         double *prev_seconds, struct sb_err *err)
{
	*done = 0;
	*resume_epochs = 0;
	*prev_seconds = 0;
	resume_sha256[0] = 0;
	if (!sb_file_exists(r->ndjson))
		return 0;
	struct sb_ndjson_reader *rd = NULL;
	SB_TRY(sb_ndjson_open(r->ndjson, &rd, err));
	struct sb_lines keep = {0};
	struct epoch_rec *ep = NULL;
	size_t nep = 0, capep = 0, keep_upto = 0;
	double secs = 0, secs_upto = 0;
	int rc = 0;
	for (;;) {
		const char *line;
		size_t len;
		rc = sb_ndjson_next_line(rd, &line, &len, err);
		if (rc || !line)
			break;
		struct sb_json *v = NULL;
		struct sb_err e2 = {0};
		if (sb_json_parse(line, len, &v, &e2)) {
			break; /* a torn last line cannot happen (atomic writes); stop at anything odd */
		}
		const char *kind = sb_json_str(sb_json_get(v, "kind"), "");
		if (!strcmp(kind, "train.done")) {
			*done = 1;
		} else if (!strcmp(kind, "train.failed") &&
		           !strcmp(sb_json_str(sb_json_get(v, "status"), ""), "failed_nonfinite_loss")) {
			*done = 1;
		}
		if ((rc = sb_lines_add(&keep, line, len, err))) {
			sb_json_free(v);
			break;
		}
		if (!strcmp(kind, "train.epoch")) {
			int64_t ec = 0;
			sb_json_int64(sb_json_get(v, "epochs_completed"), &ec);
			secs += sb_json_num(sb_json_get(v, "seconds"), 0);
			if (nep == capep) {
				size_t cap = capep ? 2 * capep : 32;
				void *p = realloc(ep, cap * sizeof *ep);
				if (!p) {
					rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
					sb_json_free(v);
					break;
				}
				ep = p;
				capep = cap;
			}
			struct epoch_rec *e = &ep[nep++];
			e->ec = ec > 0 && ec <= 100000 ? (int)ec : 0;
			snprintf(e->sha, sizeof e->sha, "%s", sb_json_str(sb_json_get(v, "checkpoint_sha256"), ""));
			e->keep_n = keep.n;
			e->secs = secs;
		}
		sb_json_free(v);
	}
	sb_ndjson_close(rd);
	for (size_t i = 0; !rc && !*done && i < nep; i++) {
		char ck[4300], op[4300], hex[SB_SHA256_HEX];
		if (ep[i].ec < 1)
			continue;
		sb_run_checkpoint_path(ck, sizeof ck, r->dir, ep[i].ec);
		sb_run_optim_path(op, sizeof op, r->dir, ep[i].ec);
		if (!sb_file_exists(ck))
			continue; /* missing: not a state to resume from */
		if ((rc = sb_sha256_file(ck, hex, NULL, err)))
			break;
		if (strcmp(hex, ep[i].sha)) {
			rc = SB_ERR(err, SB_EDATA,
			            "%s: damaged: its SHA-256 is %.12s..., train.ndjson recorded %.12s... for epoch %d: "
			            "restore it, or remove %s to start the cell over",
			            ck, hex, *ep[i].sha ? ep[i].sha : "(none)", ep[i].ec, r->dir);
			break;
		}
		if (sb_file_exists(op)) {
			*resume_epochs = ep[i].ec;
			memcpy(resume_sha256, hex, SB_SHA256_HEX);
			keep_upto = ep[i].keep_n;
			secs_upto = ep[i].secs;
		}
	}
	if (!rc && !*done && *resume_epochs > 0) {
		for (size_t i = 0; i < keep_upto && !rc; i++)
			rc = sb_lines_add(&r->lines, keep.l[i], strlen(keep.l[i]), err);
		*prev_seconds = secs_upto;
	}
	if (rc)
		*resume_epochs = 0;
	free(ep);
	sb_lines_free(&keep);
	return rc;
}

/* ---------------------------------------------------------------- checkpoints */

/* The SHA-256 of an optimiser state's data: its tensors' bytes in order, which is the
 * file's data section (sb_st_write writes them in order, unpadded). */
static int optim_data_sha256(const struct sb_tensors *ts, char hex[SB_SHA256_HEX], struct sb_err *err)
{
	struct sb_sha256 *h = sb_sha256_new();
	if (!h)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (size_t i = 0; i < ts->n; i++)
		sb_sha256_update(h, ts->t[i].data, ts->t[i].nbytes);
	sb_sha256_final(h, hex);
	return 0;
}

static int write_checkpoint(struct run *r, struct sb_encoder *m, int epochs_completed, const struct sb_norm *nm,
                            char hex[SB_SHA256_HEX], struct sb_err *err)
{
	char path[4300], buf[32];
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	int rc = sb_encoder_to_tensors(m, &ts, 0, err);
	snprintf(buf, sizeof buf, "%d", epochs_completed);
	if (!rc)
		rc = sb_tensors_set_metas(&ts, (const char *const[][2]){
		                           {"format", "sparsebench.checkpoint"},
		                           {"cell_id", r->c->cell_id},
		                           {"epochs_completed", buf},
		                           {"norm", sb_norm_name(nm)}},
		                          4, err);
	sb_run_checkpoint_path(path, sizeof path, r->dir, epochs_completed);
	if (!rc)
		rc = sb_st_write(path, &ts, err);
	sb_tensors_free(&ts);
	if (!rc)
		rc = sb_sha256_file(path, hex, NULL, err);
	if (!rc)
		rc = sb_sidecar_write(path, hex, err);
	if (rc)
		return rc;
	/* optimiser state of this epoch, with what a resume checks (load_optim): the SHA-256
	 * of its own data (the tensors' bytes in file order), of the checkpoint it pairs
	 * with, and the step count */
	sb_tensors_init(&ts);
	rc = sb_encoder_to_tensors(m, &ts, 1, err);
	char data_hex[SB_SHA256_HEX], step[32];
	if (!rc)
		rc = optim_data_sha256(&ts, data_hex, err);
	snprintf(step, sizeof step, "%lld", (long long)m->adam_t);
	if (!rc)
		rc = sb_tensors_set_metas(&ts, (const char *const[][2]){
		                           {"format", "sparsebench.optimizer"},
		                           {"cell_id", r->c->cell_id},
		                           {"epochs_completed", buf},
		                           {"checkpoint_sha256", hex},
		                           {"step", step},
		                           {"data_sha256", data_hex}},
		                          6, err);
	sb_run_optim_path(path, sizeof path, r->dir, epochs_completed);
	if (!rc)
		rc = sb_st_write(path, &ts, err);
	sb_tensors_free(&ts);
	return rc;
}

/* Load the optimiser state of epoch `epochs_completed` into m, refusing one that is not
 * intact: the cell's, of that epoch, after `step` optimiser steps, paired with the
 * checkpoint train.ndjson recorded (ck_sha256), its data hashing as its metadata says.
 * A state written before these checks existed (no data_sha256) is accepted when its
 * parameters are the checkpoint's and its step is right (its moments cannot be
 * checked: a warning says so). Any failure is SB_EDATA naming the file. */
static int load_optim(struct run *r, struct sb_encoder *m, int epochs_completed, int64_t step, const char *ck_sha256,
                      struct sb_err *err)
{
	char path[4300], ck[4300], want[32];
	sb_run_optim_path(path, sizeof path, r->dir, epochs_completed);
	sb_run_checkpoint_path(ck, sizeof ck, r->dir, epochs_completed);
	struct sb_tensors ts, cts;
	sb_tensors_init(&ts);
	sb_tensors_init(&cts);
	char *buf = NULL;
	size_t n = 0;
	int rc = sb_read_file(path, &buf, &n, 0, err);
	if (!rc)
		rc = sb_st_parse(buf, n, path, &ts, err); /* SB_EDATA naming the file */
	const char *why = NULL, *format = sb_tensors_meta(&ts, "format"), *id = sb_tensors_meta(&ts, "cell_id");
	const char *ec = sb_tensors_meta(&ts, "epochs_completed"), *data = sb_tensors_meta(&ts, "data_sha256");
	const char *pair = sb_tensors_meta(&ts, "checkpoint_sha256"), *st = sb_tensors_meta(&ts, "step");
	char hex[SB_SHA256_HEX];
	int legacy = 0;
	snprintf(want, sizeof want, "%d", epochs_completed);
	if (rc) {
		/* the reader's message names the file: cut, garbage, not a file */
	} else if (!format || strcmp(format, "sparsebench.optimizer")) {
		why = "not an optimiser state (metadata format)";
	} else if (!id || strcmp(id, r->c->cell_id)) {
		why = "the state of another cell (metadata cell_id)";
	} else if (!ec || strcmp(ec, want)) {
		why = "the state of another epoch (metadata epochs_completed)";
	} else if (data) {
		snprintf(want, sizeof want, "%lld", (long long)step);
		rc = optim_data_sha256(&ts, hex, err);
		if (!rc && strcmp(hex, data))
			why = "its data do not hash as its metadata says (data_sha256)";
		else if (!rc && (!pair || strcmp(pair, ck_sha256)))
			why = "it does not pair with the checkpoint train.ndjson records (checkpoint_sha256)";
		else if (!rc && (!st || strcmp(st, want)))
			why = "wrong step count (metadata step)";
	} else if (!(rc = sb_st_read(ck, &cts, err))) { /* written by an earlier sb-train */
		legacy = 1;
		for (size_t i = 0; !why && i < cts.n; i++) {
			const struct sb_tensor *a = &cts.t[i], *b = sb_tensors_find(&ts, a->name);
			if (!b || b->nbytes != a->nbytes || memcmp(a->data, b->data, a->nbytes))
				why = "its parameters are not those of the checkpoint of its epoch";
		}
	}
	if (!rc && !why && (rc = sb_encoder_from_tensors(m, &ts, 1, err)))
		sb_err_prefix(err, "%s", path);
	if (!rc && !why && m->adam_t != step)
		why = "wrong step count (tensor step)";
	if (why) {
		rc = SB_ERR(err, SB_EDATA, "%s: damaged: %s: restore it, or remove %s to start the cell over", path, why,
		            r->dir);
	} else if (!rc && legacy) {
		pthread_mutex_lock(r->env->out_mu);
		sb_cli_warn("%s: written without a checksum (by an earlier sb-train): resumed after checking its "
		            "parameters against %s and its step; its moments are not checked",
		            path, strrchr(ck, '/') + 1);
		pthread_mutex_unlock(r->env->out_mu);
	}
	sb_tensors_free(&cts);
	sb_tensors_free(&ts);
	free(buf);
	return rc;
}

/* ---------------------------------------------------------------- the cell */
/* A resumed run must go on with the dataset file it started on (PROTOCOL A4's resume rule:
 * the same data and patch, which the pool's hash covers): its cell.json names that file's
 * SHA-256. Epochs of two pools in one run would look like a clean run on the second. */
static int check_resume_pool(const struct run *r, const struct sb_dataset *ds, struct sb_err *err)
{
	char *path = sb_path_join(r->dir, "cell.json"), *buf = NULL;
	size_t n = 0;
	struct sb_json *v = NULL;
	if (!path)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = 0;
	if (!sb_file_exists(path))
		rc = SB_ERR(err, SB_EDATA, "%s: missing, so the dataset file the run started on is unknown: remove %s to "
		                           "start the cell over",
		            path, r->dir);
	else if (!(rc = sb_read_file(path, &buf, &n, 1 << 20, err)) && !(rc = sb_json_parse(buf, n, &v, err))) {
		const char *was = sb_json_str(sb_json_get(v, "dataset_sha256"), "");
		if (strcmp(was, ds->sha256) != 0)
			rc = SB_ERR(err, SB_EDATA,
			            "%s: the run started on the dataset file with SHA-256 %.12s..., not on %s (%.12s...): "
			            "resume it with the file it started on, or remove %s to start the cell over",
			            path, *was ? was : "(none)", ds->path, ds->sha256, r->dir);
	} else if (rc) {
		sb_err_prefix(err, "%s", path);
	}
	sb_json_free(v);
	free(buf);
	free(path);
	return rc;
}


static int write_cell_json(struct run *r, const struct sb_dataset *ds, const struct sb_encoder *m,
                           const struct sb_split *sp, struct sb_err *err)
{
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_jw_obj(&w);
	sb_cell_write_fields(r->c, &w);
	sb_jw_kint(&w, "parameter_count", (int64_t)sb_encoder_param_count(m));
	sb_jw_kint(&w, "seq_len", m->T);
	sb_jw_kint(&w, "classes", ds->classes);
	sb_jw_kint(&w, "n_train", sp->n_train);
	sb_jw_kint(&w, "n_val", sp->n_val);
	sb_jw_kstr(&w, "dataset_sha256", ds->sha256);
	sb_jw_kstr(&w, "modality", ds->modality == SB_IMAGE ? "image" : "text");
	sb_jw_obj_end(&w);
	int rc = sb_jw_line(&w, err);
	char *path = sb_path_join(r->dir, "cell.json");
	if (!rc && !path)
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	if (!rc)
		rc = sb_write_file_atomic(path, w.buf, w.len, err);
	free(path);
	sb_jw_free(&w);
	return rc;
}

/* Attention statistics of train.epoch: PROTOCOL A3's per-batch density (probabilities
 * > 1e-7 over valid keys) and entropy (mean over rows) of the training forward pass
 * (training mode: dropout on), averaged unweighted over the sampled batches of the
 * epoch, as sb-eval averages its batches. Sampled: every STATS_EVERY-th batch
 * (steps s with (s + 1) % STATS_EVERY == 0) and the epoch's last batch. Every batch
 * would cost about 13% of the step on the CPU (a double log per probability); this
 * sample costs under 1% and spans the epoch. */
#define STATS_EVERY 16

struct epoch_stats {
	double density, entropy;
	int batches;
};

static void epoch_stats_add(struct epoch_stats *es, const struct sb_attn_stats *st)
{
	if (st->valid_total > 0 && st->rows > 0) {
		es->density += st->nonzero / st->valid_total;
		es->entropy += st->entropy_sum / st->rows;
		es->batches++;
	}
}

static int attention_fields(struct sb_jw *w, struct sb_encoder *m, const struct epoch_stats *es, struct sb_err *err)
{
	sb_jw_kf64(w, "attention_density", es->batches ? es->density / es->batches : NAN);
	sb_jw_kf64(w, "attention_entropy", es->batches ? es->entropy / es->batches : NAN);
	sb_jw_kint(w, "attention_batches", es->batches);
	float al[SB_ENCODER_MAX_LAYERS * 64];
	int na = m->cfg.layers * m->cfg.heads <= (int)(sizeof al / sizeof al[0]) ? sb_encoder_alphas(m, al, err) : 0;
	if (na < 0)
		return -na;
	double mu = NAN, sd = NAN;
	if (na > 0) {
		double s = 0, q = 0;
		for (int i = 0; i < na; i++)
			s += al[i];
		mu = s / na;
		for (int i = 0; i < na; i++)
			q += (al[i] - mu) * (al[i] - mu);
		sd = na > 1 ? sqrt(q / (na - 1)) : NAN;
	}
	sb_jw_kf64(w, "alpha_mean", mu);
	sb_jw_kf64(w, "alpha_std", sd);
	return 0;
}

/* a cell's run in the runs directory of env */
static void run_init(struct run *r, const struct sb_cell *cell, int index, const struct train_env *env)
{
	r->c = cell;
	r->env = env;
	r->index = index;
	r->t_wall0 = sb_monotonic_seconds();
	sb_jw_init(&r->w, NULL);
	snprintf(r->dir, sizeof r->dir, "%s/%s", env->runs_dir, cell->cell_id);
	snprintf(r->ndjson, sizeof r->ndjson, "%s/train.ndjson", r->dir);
}

/* a fresh start: the log's lines begin again with this process's run.meta */
static int start_log(struct run *r, struct sb_err *err)
{
	sb_lines_free(&r->lines);
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	int rc = sb_record_run_meta(&w, r->env->meta, err);
	size_t n = w.len;
	while (n && w.buf[n - 1] == '\n')
		n--;
	if (!rc)
		rc = sb_lines_add(&r->lines, w.buf, n, err);
	sb_jw_free(&w);
	return rc;
}

int train_cell_unrun(const struct sb_cell *cell, int index, const struct train_env *env, const char *status,
                     const char *msg, struct sb_err *err)
{
	struct run R = {0};
	struct run *r = &R;
	run_init(r, cell, index, env);
	int done = 0, resume = 0;
	double prev_seconds = 0;
	char sha[SB_SHA256_HEX];
	int rc = sb_mkdir_p(r->dir, err);
	if (!rc)
		rc = scan_existing(r, &done, &resume, sha, &prev_seconds, err);
	if (!rc && done) { /* finished before: nothing to say (train_cell would skip it) */
		sb_lines_free(&r->lines);
		sb_jw_free(&r->w);
		return 0;
	}
	if (!rc && resume == 0)
		rc = start_log(r, err);
	r->to_dir = !rc; /* else (a damaged state, say) the record goes to the output only */
	r->train_seconds = prev_seconds;
	struct sb_err e2 = {0};
	int rc2 = record_failed(r, status, msg, -1, 0, 0, &e2);
	if (!rc && rc2) {
		rc = rc2;
		*err = e2;
	}
	sb_lines_free(&r->lines);
	sb_jw_free(&r->w);
	return rc;
}

int sb_train_device_lost(const struct train_env *env)
{
	return env->device_lost && atomic_load(env->device_lost);
}

/* The testing hook SB_TRAIN_DEVICE_ERROR (train.h): a lost device, emulated on any backend. */
static int device_error_hook(const struct train_env *env, int64_t step, struct sb_err *err)
{
	if (!env->device_lost)
		return 0;
	if (atomic_load(env->device_lost))
		return SB_ERR(err, SB_EINTERNAL, "device lost (SB_TRAIN_DEVICE_ERROR, by another cell of this process)");
	if (env->device_error_at_step <= 0 || step + 1 < env->device_error_at_step)
		return 0;
	if (env->device_error_once && unlink(env->device_error_once) != 0)
		return 0; /* fired already (in this process or an earlier one) */
	atomic_store(env->device_lost, 1);
	return SB_ERR(err, SB_EINTERNAL, "device lost after step %lld (SB_TRAIN_DEVICE_ERROR)", (long long)step + 1);
}

int train_cell(const struct sb_cell *cell, int index, const struct sb_dataset *ds, struct sb_backend *be,
               const struct train_env *env, enum cell_status *status, struct sb_err *err)
{
	struct run R = {0};
	struct run *r = &R;
	run_init(r, cell, index, env);
	*status = CELL_FAILED;
	struct sb_split sp = {0};
	struct sb_encoder *m = NULL;
	struct sb_encoder_data data = {0};
	uint32_t *perm = NULL;
	/* Until the run's log is settled (a fresh start, or a resume state found intact),
	 * records go to the output only (r->to_dir 0): a failure then leaves the run
	 * directory as it was, and is still recorded. */
	int done = 0, resume = 0;
	double prev_seconds = 0;
	char resume_sha256[SB_SHA256_HEX];
	int rc = sb_mkdir_p(r->dir, err);
	if (rc)
		goto fail;
	rc = scan_existing(r, &done, &resume, resume_sha256, &prev_seconds, err);
	if (rc)
		goto fail;
	if (done) {
		*status = CELL_SKIPPED;
		rec_start(r, "train.skip");
		sb_jw_kstr(&r->w, "reason",
		           "already finished (train.ndjson has train.done or a non-finite-loss failure)");
		sb_jw_kstr(&r->w, "run_dir", r->dir);
		rc = emit(r, err); /* the output only: the run directory is left untouched */
		goto out_noreport;
	}
	r->train_seconds = prev_seconds;
	if (resume > 0 && (rc = check_resume_pool(r, ds, err)))
		goto fail;
	if (resume == 0) { /* a fresh start: a new train.ndjson */
		if ((rc = start_log(r, err)))
			goto fail;
		r->to_dir = 1;
	}
	rc = sb_split_carve(ds, cell->seed, cell->val_fraction, cell->limit, &sp, err);
	if (rc)
		goto fail;
	if (sp.n_train < 1) {
		rc = SB_ERR(err, SB_EDATA, "the training split of %s is empty", ds->path);
		goto fail;
	}
	struct sb_encoder_cfg cfg;
	if ((rc = sb_cell_model_cfg(cell, ds, &cfg, err)))
		goto fail;
	if ((rc = sb_encoder_new(&cfg, be, cell->batch, &m, err)))
		goto fail;
	r->nparams = sb_encoder_param_count(m);
	if ((rc = sb_encoder_init(m, cell->seed, err)))
		goto fail;
	if (resume > 0) {
		int64_t spe = (sp.n_train + cell->batch - 1) / cell->batch;
		if ((rc = load_optim(r, m, resume, spe * resume, resume_sha256, err)))
			goto fail;
		r->to_dir = 1;
	}
	if ((rc = write_cell_json(r, ds, m, &sp, err)))
		goto fail;
	if (resume > 0) {
		rec_start(r, "train.resume");
		sb_jw_kint(&r->w, "epochs_completed", resume);
		char t[32];
		double us;
		sb_time_rfc3339(t, &us);
		sb_jw_kstr(&r->w, "time", t);
		if ((rc = emit(r, err)))
			goto fail;
	} else {
		if ((rc = sb_lines_write(&r->lines, r->ndjson, err)))
			goto fail;
	}
	if ((rc = sb_encoder_data_open(be, ds, &data, err)))
		goto fail;
	perm = malloc((size_t)sp.n_train * sizeof *perm);
	if (!perm) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto fail;
	}
	int64_t spe = (sp.n_train + cell->batch - 1) / cell->batch, T = spe * cell->epochs;
	struct sb_step_opts o;
	sb_step_opts_default(&o);
	o.seed = cell->seed;
	o.dropout = (float)cell->dropout;
	o.weight_decay = (float)cell->weight_decay;
	o.clip = (float)cell->clip;
	/* The steps are queued without reading anything back (sb_encoder_step); the loss
	 * stays in the model's device-side accumulator, read at the end of each epoch on a
	 * GPU (one wait per epoch) and after every step on the CPU (a memory copy there).
	 * A non-finite loss is found there, with the step where it first happened. */
	int64_t read_every = strcmp(be->name, "cpu") ? spe : 1;
	for (int epoch = resume; epoch < cell->epochs; epoch++) {
		struct sb_norm nm;
		if ((rc = sb_cell_norm_at(cell, epoch, &nm, err)) || (rc = sb_encoder_set_norm(m, &nm, err)))
			goto fail;
		struct sb_rng rng;
		sb_rng_init(&rng, cell->seed, SB_RNG_SHUFFLE, (uint64_t)epoch);
		sb_rng_permutation(&rng, perm, (size_t)sp.n_train);
		for (int64_t i = 0; i < sp.n_train; i++)
			perm[i] = sp.train[perm[i]];
		double t0 = sb_monotonic_seconds(), loss_sum = 0, lr0 = sb_cell_lr_at(cell, epoch * spe, T);
		double lr1 = sb_cell_lr_at(cell, epoch * spe + spe - 1, T);
		struct epoch_stats es = {0};
		struct sb_step_acc acc;
		sb_step_acc_reset(&acc);
		if ((rc = sb_encoder_acc_read(m, &acc, 1, err)))
			goto fail;
		for (int64_t s = 0; s < spe; s++) {
			int64_t b0 = s * cell->batch;
			int B = sp.n_train - b0 < cell->batch ? (int)(sp.n_train - b0) : cell->batch;
			o.step = epoch * spe + s;
			o.lr = (float)sb_cell_lr_at(cell, o.step, T);
			o.stats = (s + 1) % STATS_EVERY == 0 || s == spe - 1;
			struct sb_attn_stats st = {0};
			if ((rc = sb_encoder_step(m, &data, perm + b0, B, &o, &st, err)))
				goto fail;
			if (o.stats)
				epoch_stats_add(&es, &st);
			int last = s == spe - 1;
			if (last || (s + 1) % read_every == 0) {
				if ((rc = sb_encoder_acc_read(m, &acc, 0, err)))
					goto fail;
				int64_t bad = acc.first_bad;
				double badv = acc.bad_loss;
				int64_t hook = env->nan_at_step - 1; /* testing hook: that step's loss reads as NaN */
				if (env->nan_at_step > 0 && hook >= epoch * spe && hook <= o.step && (bad < 0 || hook < bad)) {
					bad = hook;
					badv = NAN;
				}
				if (bad >= 0) {
					char msg[200];
					snprintf(msg, sizeof msg, "non-finite training loss (%s) at epoch %d, step %lld",
					         isnan(badv) ? "nan" : "inf", epoch, (long long)bad);
					r->train_seconds += sb_monotonic_seconds() - t0;
					rc = record_failed(r, "failed_nonfinite_loss", msg, epoch, bad, (int)(bad - epoch * spe),
					                   err);
					*status = CELL_FAILED_NONFINITE;
					goto out_noreport;
				}
				loss_sum = acc.loss_sum;
			}
			if (env->stop_after_steps > 0 && o.step + 1 >= env->stop_after_steps) {
				fflush(NULL);
				_exit(137); /* testing hook: die like kill -9 mid-epoch */
			}
			if ((rc = device_error_hook(env, o.step, err)))
				goto fail;
			if (read_every == 1)
				progress(r, "epoch %d/%d step %lld/%lld loss %.4f", epoch + 1, cell->epochs,
				         (long long)s + 1, (long long)spe, acc.last_loss);
			else
				progress(r, "epoch %d/%d step %lld/%lld", epoch + 1, cell->epochs, (long long)s + 1,
				         (long long)spe);
		}
		double secs = sb_monotonic_seconds() - t0;
		r->train_seconds += secs;
		char hex[SB_SHA256_HEX], ck[4300];
		if ((rc = write_checkpoint(r, m, epoch + 1, &nm, hex, err)))
			goto fail;
		sb_run_checkpoint_path(ck, sizeof ck, r->dir, epoch + 1);
		rec_start(r, "train.epoch");
		struct sb_jw *w = &r->w;
		sb_jw_kstr(w, "task", cell->task);
		sb_jw_kstr(w, "method", cell->method);
		sb_jw_kint(w, "seed", (int64_t)cell->seed);
		sb_jw_kstr(w, "tier", cell->tier);
		sb_jw_kstr(w, "arch", cell->arch);
		sb_jw_kint(w, "epoch", epoch);
		sb_jw_kint(w, "epochs_completed", epoch + 1);
		sb_jw_kf64(w, "train_loss", loss_sum / (double)spe);
		sb_jw_kf64(w, "seconds", secs);
		sb_jw_kf64(w, "samples_per_s", secs > 0 ? sp.n_train / secs : NAN);
		sb_jw_kf64(w, "lr", lr0);
		sb_jw_kf64(w, "lr_end", lr1);
		sb_jw_kstr(w, "norm", sb_norm_name(&nm));
		if (nm.kind == SB_NORM_ENTMAX_BISECT)
			sb_jw_kf64(w, "norm_alpha", nm.alpha);
		if ((rc = attention_fields(w, m, &es, err)))
			goto fail;
		sb_jw_kstr(w, "checkpoint", strrchr(ck, '/') + 1);
		sb_jw_kstr(w, "checkpoint_sha256", hex);
		if ((rc = emit(r, err)))
			goto fail;
		if (epoch > 0) {
			char op[4300];
			sb_run_optim_path(op, sizeof op, r->dir, epoch);
			if (unlink(op) && errno != ENOENT) {
				rc = SB_ERRNO(err, op);
				goto fail;
			}
		}
		pthread_mutex_lock(env->out_mu);
		if (!sb_quiet)
			sb_progress(1, "cell %d/%d %s: epoch %d/%d train loss %.4f, %.0f samples/s", index + 1,
			            env->ncells, cell->cell_id, epoch + 1, cell->epochs, loss_sum / (double)spe,
			            secs > 0 ? sp.n_train / secs : 0.0);
		pthread_mutex_unlock(env->out_mu);
	}
	rec_start(r, "train.done");
	sb_jw_kstr(&r->w, "task", cell->task);
	sb_jw_kstr(&r->w, "method", cell->method);
	sb_jw_kint(&r->w, "seed", (int64_t)cell->seed);
	sb_jw_kstr(&r->w, "status", "completed");
	sb_jw_kint(&r->w, "epochs_run", cell->epochs);
	sb_jw_kf64(&r->w, "train_seconds", r->train_seconds);
	sb_jw_kf64(&r->w, "wall_seconds", sb_monotonic_seconds() - r->t_wall0);
	sb_jw_kf64(&r->w, "peak_memory_mb", peak_mb());
	sb_jw_kint(&r->w, "parameter_count", (int64_t)r->nparams);
	if ((rc = emit(r, err)))
		goto fail;
	/* the newest optimiser state stays: a later run with more epochs could continue from it */
	*status = CELL_COMPLETED;
	goto out_noreport;
fail:
	if (rc) {
		struct sb_err e2 = {0};
		int dev = rc == SB_EINTERNAL && (strcmp(be->name, "cpu") != 0 || sb_train_device_lost(env));
		record_failed(r, dev ? "failed_device" : "failed", err->msg, -1, 0, 0, &e2);
		*status = CELL_FAILED;
	}
out_noreport:
	free(perm);
	sb_encoder_data_close(be, &data);
	sb_encoder_free(m);
	sb_split_free(&sp);
	sb_lines_free(&r->lines);
	sb_jw_free(&r->w);
	return rc;
}
