/* sb-eval — validation-split evaluation of every saved epoch of run directories
 * (DESIGN §3, PROTOCOL A4).
 *
 * The story, per RUN_DIR: read cell.json; list the saved checkpoints
 * (epoch-NNN.safetensors) and hash them; keep the records of the existing
 * val.ndjson whose checkpoint hash and correctness bitmap are unchanged; for
 * the other epochs read the pool (refusing a file whose metadata says
 * split=test), carve the validation split exactly as sb-train did
 * (sb_split_carve with the cell's seed, val_fraction and limit), evaluate each
 * checkpoint (evaluate_epoch: the one call into the engine), and write the
 * bitmap of per-example correctness; then write val.ndjson atomically — only
 * when its records changed, so that re-running on an unchanged run directory
 * reads no data and leaves the file (and the freeze that hashed it) alone.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "attn_norm.h"
#include "backend.h"
#include "cli.h"
#include "dataset.h"
#include "eval_lm.h"
#include "eval_sas.h"
#include "evalrun.h"
#include "hash.h"
#include "io.h"
#include "json.h"
#include "record.h"
#include "vallog.h"

static const char usage_text[] =
    "Usage: sb-eval [-d DATA_DIR] [--device cpu|cuda] [-j THREADS] [--no-probe] [-q] [--set KEY=VALUE]... RUN_DIR...\n"
    "\n"
    "Evaluate every saved epoch of each run directory written by sb-train on the validation split:\n"
    "accuracy, macro-F1, loss, attention density and entropy, alpha mean and sd (PROTOCOL A3/A4),\n"
    "and which validation examples each checkpoint gets right. The validation split is carved from\n"
    "DATA_DIR/TASK/pool.safetensors exactly as sb-train carved it, from cell.json's seed,\n"
    "val_fraction and limit. A dataset file whose metadata says split=test is refused: only sb-test\n"
    "reads test data. Epochs whose checkpoint still has the SHA-256 recorded in val.ndjson (and whose\n"
    "bitmap is intact) are not evaluated again; when nothing changed, no data is read and val.ndjson\n"
    "is left as it is.\n"
    "A run directory whose cell.json says \"family\": \"sas\" is a SAS run (PROTOCOL B, docs/sas.md):\n"
    "dense and SAS loss and perplexity on the corpus's validation and test parts, written to\n"
    "RUN_DIR/eval.ndjson (run.meta, sas.eval) and stdout.\n"
    "\n"
    "Options:\n"
    "  -d DATA_DIR     dataset directory (default data)\n"
    "  --device DEV    cpu (default) or cuda[:N][,tf32]\n"
    "  -j THREADS      CPU threads (default 0: all cores)\n"
    "  --no-probe      without the probe features (PROTOCOL A8 M1; docs/sb-eval.md)\n"
    "  -q              no progress lines on stderr\n"
    "  --set KEY=VALUE an evaluation setting of LM runs (repeatable): probes=N, windows=N,\n"
    "                  masks=LIST, tasks=LIST, bench_reps=N, budgets=K,K,..., seed=N (docs/lm.md)\n"
    "                  (windows=0 or probes=0 alone: retrieval or fidelity only; both: exit 2)\n"
    "  --help          this text;  --version  the version\n"
    "\n"
    "Written, per RUN_DIR (atomically):\n"
    "  RUN_DIR/val.ndjson: run.meta, one eval.epoch per saved epoch {cell_id, task, method, seed, tier,\n"
    "    arch, epoch (0-based), epochs_completed, n_val, val_accuracy, val_macro_f1, val_loss,\n"
    "    attention_density, attention_entropy, alpha_mean, alpha_std, correct_bits, correct_sha256,\n"
    "    checkpoint, checkpoint_sha256}, then eval.done {cell_id, task, method, seed, tier, arch,\n"
    "    epochs (the cell's budget), epochs_evaluated, train_status (from train.ndjson, or\n"
    "    \"incomplete\")}\n"
    "  RUN_DIR/val-correct-NNN.bits: one bit per validation example in split order (bit i of byte\n"
    "    i/8, least significant first), 1 = correct\n"
    "stdout: run.meta (inputs: each run's cell.json, the pools read, every checkpoint, and the\n"
    "  val.ndjson whose records were kept; docs/sb-eval.md), then the eval.epoch and eval.done\n"
    "  records of every run directory.\n"
    "\n"
    "Exit status: 0 ok; 1 refused (a dataset file with split=test); 2 usage; 3 bad input (malformed\n"
    "cell.json, a checkpoint that differs from train.ndjson's hash, a pool that is not the one the\n"
    "cell was trained on, a cell.json whose fields do not hash to its cell_id, a checkpoint whose\n"
    "metadata names another cell, epoch or normaliser); 4 I/O error; 5 internal or device error.\n"
    "Every RUN_DIR is attempted; the status is that of the first failure.\n"
    "\n"
    "A RUN_DIR whose cell.json says \"family\": \"lm\" (a decoder of PROTOCOL C, trained by sb-train or a\n"
    "pretrained Llama/Qwen brought in by sb-lm import, evaluated in its tokenizer's tokens) is\n"
    "evaluated by the LM track instead: fidelity of every mask, the 13-task retrieval battery, budgets\n"
    "and kernel timings into RUN_DIR/eval.ndjson (docs/lm.md); stdout gets one lm.eval record\n"
    "{run_dir, records, status}. -d is not used for it (the corpora are named in cell.json).\n"
    "\n"
    "Examples:\n"
    "  sb-eval -d data runs/*/\n"
    "  sb-eval -q -d data runs/fashion_mnist.softmax.s0.plain.compact.1a2b3c4d\n";

static _Noreturn void usage(void)
{
	fputs(usage_text, stdout);
	exit(sb_cli_finish(0));
}

struct opts {
	const char *data_dir, *device;
	long long threads;
	int no_probe;
	char **settings; /* --set KEY=VALUE: evaluation settings of family runs (argv's strings) */
	int n_settings;
};

/* The pool last read, kept for the next run directory of the same task (a grid
 * evaluates many cells of one task; re-reading a large pool for each is waste).
 * Reused only while the file is the same one: path, device, inode, size, mtime. */
static struct {
	int valid;
	char path[4096];
	struct stat st;
	struct sb_dataset ds;
} pool_cache;

static int same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The pool of a task, refused when its metadata says split=test (sb_dataset_read with allow_test 0). */
static int read_pool(const char *path, const struct sb_dataset **out, struct sb_err *err)
{
	struct stat st;
	if (pool_cache.valid && strcmp(pool_cache.path, path) == 0 && stat(path, &st) == 0 &&
	    same_file(&st, &pool_cache.st)) {
		*out = &pool_cache.ds;
		return 0;
	}
	if (pool_cache.valid)
		sb_dataset_free(&pool_cache.ds);
	pool_cache.valid = 0;
	if (stat(path, &st) != 0)
		return SB_ERRNO(err, path);
	SB_TRY(sb_dataset_read(path, 0, &pool_cache.ds, err));
	pool_cache.valid = 1;
	pool_cache.st = st;
	snprintf(pool_cache.path, sizeof pool_cache.path, "%s", path);
	*out = &pool_cache.ds;
	return 0;
}

/* What stdout's run.meta says (DESIGN §4), known only when every run directory is
 * done (the records wait in a temporary file until then): the files the records on
 * stdout were made from, as they were hashed, and the device and threads of the first
 * evaluation that opened a backend. */
struct std_meta {
	struct sb_input *in; /* paths owned */
	size_t n;
	char device[256];
	int threads; /* 0: no backend opened */
};

static int std_input(struct std_meta *m, const char *path, const char *sha, uint64_t size, struct sb_err *err)
{
	for (size_t i = 0; i < m->n; i++) /* a pool shared by several runs is listed once */
		if (strcmp(m->in[i].path, path) == 0 && strcmp(m->in[i].sha256, sha) == 0)
			return 0;
	struct sb_input *n2 = realloc(m->in, (m->n + 1) * sizeof *n2);
	if (n2)
		m->in = n2;
	char *p = strdup(path);
	if (!n2 || !p) {
		free(p);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	memset(&m->in[m->n], 0, sizeof *m->in);
	m->in[m->n].path = p;
	snprintf(m->in[m->n].sha256, sizeof m->in[m->n].sha256, "%s", sha);
	m->in[m->n].size_bytes = size;
	m->n++;
	return 0;
}

static void std_backend(struct std_meta *m, const char *device, int threads)
{
	if (m->threads)
		return;
	snprintf(m->device, sizeof m->device, "%s", device);
	m->threads = threads;
}

static void std_meta_free(struct std_meta *m)
{
	for (size_t i = 0; i < m->n; i++)
		free((char *)m->in[i].path);
	free(m->in);
}

struct ckpt {
	int64_t e; /* epochs_completed */
	char name[64];
	char *path;
	char sha[SB_SHA256_HEX];
	uint64_t size;                  /* bytes hashed */
	const struct sb_val_epoch *old; /* reusable record, or NULL */
	struct sb_json *rec;            /* the record of this run (owned), when evaluated */
};

static int cmp_ckpt(const void *a, const void *b)
{
	const struct ckpt *x = a, *y = b;
	return (x->e > y->e) - (x->e < y->e);
}

/* epoch-NNN.safetensors with NNN >= 1 digits; returns NNN or -1 */
static int64_t ckpt_epoch(const char *name)
{
	const char *p = name + 6;
	if (strncmp(name, "epoch-", 6) != 0)
		return -1;
	int64_t v = 0;
	int digits = 0;
	while (*p >= '0' && *p <= '9' && digits < 9) {
		v = v * 10 + (*p++ - '0');
		digits++;
	}
	if (!digits || strcmp(p, ".safetensors") != 0 || v < 1)
		return -1;
	return v;
}

struct cell {
	struct sb_json *json;
	const char *cell_id, *task, *method, *tier, *arch, *dataset_sha256;
	int64_t seed, epochs, limit, n_val;
	double val_fraction;
};

static int read_cell(const char *run, struct cell *c, struct sb_err *err)
{
	memset(c, 0, sizeof *c);
	char *p = sb_path_join(run, "cell.json");
	char *buf;
	size_t n;
	int rc = p ? sb_read_file(p, &buf, &n, 1 << 20, err) : SB_ERR(err, SB_EINTERNAL, "out of memory");
	if (rc) {
		free(p);
		return rc;
	}
	rc = sb_json_parse(buf, n, &c->json, err);
	free(buf);
	if (!rc && c->json->type != SB_JSON_OBJECT)
		rc = SB_ERR(err, SB_EDATA, "not a JSON object");
	if (!rc && !(rc = sb_json_req_str(c->json, "cell_id", &c->cell_id, err)) &&
	    !(rc = sb_json_req_str(c->json, "task", &c->task, err)) &&
	    !(rc = sb_json_req_str(c->json, "method", &c->method, err)) &&
	    !(rc = sb_json_req_int(c->json, "seed", &c->seed, err)) &&
	    !(rc = sb_json_req_int(c->json, "epochs", &c->epochs, err))) {
		c->tier = sb_json_str(sb_json_get(c->json, "tier"), "compact");
		c->arch = sb_json_str(sb_json_get(c->json, "arch"), "plain");
		c->dataset_sha256 = NULL; /* optional; when present, a string */
		if (sb_json_get(c->json, "dataset_sha256"))
			rc = sb_json_req_str(c->json, "dataset_sha256", &c->dataset_sha256, err);
		c->val_fraction = sb_json_num(sb_json_get(c->json, "val_fraction"), 0.2);
		c->limit = 0;
		c->n_val = -1;
		const struct sb_json *l = sb_json_get(c->json, "limit");
		if (!rc && l && sb_json_int64(l, &c->limit))
			rc = SB_ERR(err, SB_EDATA, "field 'limit' must be an integer");
		const struct sb_json *nv = sb_json_get(c->json, "n_val");
		if (!rc && nv && (sb_json_int64(nv, &c->n_val) || c->n_val < 0))
			rc = SB_ERR(err, SB_EDATA, "field 'n_val' must be an integer >= 0");
		if (!rc &&
		    (c->seed < 0 || c->epochs < 1 || c->limit < 0 || !(c->val_fraction >= 0 && c->val_fraction < 1)))
			rc = SB_ERR(err, SB_EDATA, "seed, epochs, limit or val_fraction out of range");
		if (!rc && (strchr(c->task, '/') || !c->task[0]))
			rc = SB_ERR(err, SB_EDATA, "bad task name '%s'", c->task);
	}
	if (rc)
		sb_err_prefix(err, "%s", p);
	/* an edited cell.json is refused here, whether or not any epoch is evaluated again
	 * (sb_evalrun_open checks it too, but is not called when nothing changed) */
	else
		rc = sb_evalrun_cell_check(c->json, p, err);
	if (rc) {
		sb_json_free(c->json);
		c->json = NULL;
	}
	free(p);
	return rc;
}

/* Status and checkpoint hashes from train.ndjson (missing file: "incomplete", no hashes). */
struct train_info {
	char status[64];
	int64_t *e;
	char (*sha)[SB_SHA256_HEX];
	size_t n;
};

static int read_train(const char *run, struct train_info *t, struct sb_err *err)
{
	memset(t, 0, sizeof *t);
	strcpy(t->status, "incomplete");
	char *p = sb_path_join(run, "train.ndjson");
	if (!p)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	if (!sb_file_exists(p)) {
		free(p);
		return 0;
	}
	struct sb_ndjson_reader *r;
	int rc = sb_ndjson_open(p, &r, err);
	while (!rc) {
		struct sb_json *rec;
		if ((rc = sb_ndjson_next(r, &rec, err)) || !rec)
			break;
		const char *kind = sb_json_str(sb_json_get(rec, "kind"), "");
		if (strcmp(kind, "train.done") == 0 || strcmp(kind, "train.failed") == 0) {
			snprintf(t->status, sizeof t->status, "%s", sb_json_str(sb_json_get(rec, "status"), "failed"));
		} else if (strcmp(kind, "train.epoch") == 0) {
			int64_t e;
			const struct sb_json *ev = sb_json_get(rec, "epochs_completed");
			const struct sb_json *sv = sb_json_get(rec, "checkpoint_sha256");
			const char *s = sb_json_str(sv, NULL);
			/* an epoch record names the hash of its checkpoint: a malformed one is bad
			 * data (skipping it would evaluate that checkpoint unchecked) */
			if ((ev && (sb_json_int64(ev, &e) || e < 1)) || (sv && !(s && sb_is_sha256_hex(s)))) {
				rc = SB_ERR(err, SB_EDATA, "%s:%ld: train.epoch: 'epochs_completed' must be an integer >= 1 "
				            "and 'checkpoint_sha256' 64 hex digits", p, sb_ndjson_line(r));
				sb_json_free(rec);
				break;
			}
			if (ev && s) {
				int64_t *ne = realloc(t->e, (t->n + 1) * sizeof *ne);
				char(*ns)[SB_SHA256_HEX] = realloc(t->sha, (t->n + 1) * sizeof *ns);
				if (ne)
					t->e = ne;
				if (ns)
					t->sha = ns;
				if (!ne || !ns) {
					sb_json_free(rec);
					rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
					break;
				}
				t->e[t->n] = e;
				memcpy(t->sha[t->n++], s, SB_SHA256_HEX); /* a later record for the same epoch wins */
			}
		}
		sb_json_free(rec);
	}
	if (r)
		sb_ndjson_close(r);
	free(p);
	return rc;
}

static const char *train_sha(const struct train_info *t, int64_t e)
{
	const char *s = NULL;
	for (size_t i = 0; i < t->n; i++)
		if (t->e[i] == e)
			s = t->sha[i];
	return s;
}

/* The one call into the engine: evaluate a checkpoint on the validation examples. */
static int evaluate_epoch(struct sb_evalrun *er, const struct ckpt *ck, const struct sb_split *split,
                          struct sb_evalrun_result *res, uint8_t *bits, struct sb_err *err)
{
	return sb_evalrun_checkpoint(er, ck->path, ck->sha, (int)ck->e, split->val, split->n_val, res, bits, err);
}

static void ident(struct sb_jw *w, const struct cell *c)
{
	sb_jw_kstr(w, "cell_id", c->cell_id);
	sb_jw_kstr(w, "task", c->task);
	sb_jw_kstr(w, "method", c->method);
	sb_jw_kint(w, "seed", c->seed);
	sb_jw_kstr(w, "tier", c->tier);
	sb_jw_kstr(w, "arch", c->arch);
}

/* Was the log written by a run with --no-probe (its first line a run.meta whose argv has it)? */
static int old_noprobe(const char *buf, size_t len)
{
	const char *nl = memchr(buf, '\n', len);
	struct sb_json *m = NULL;
	struct sb_err e = {0};
	int yes = 0;
	if (sb_json_parse(buf, nl ? (size_t)(nl - buf) : len, &m, &e) == 0 && m->type == SB_JSON_OBJECT &&
	    !strcmp(sb_json_str(sb_json_get(m, "kind"), ""), "run.meta")) {
		const struct sb_json *a = sb_json_get(m, "argv");
		for (size_t i = 0; a && a->type == SB_JSON_ARRAY && i < a->n && !yes; i++)
			yes = !strcmp(sb_json_str(a->items[i], ""), "--no-probe");
	}
	sb_json_free(m);
	return yes;
}

/* Records after the first run.meta line of an existing file, for the unchanged test. */
static const char *body_after_meta(const char *buf, size_t n, size_t *len)
{
	const char *nl = memchr(buf, '\n', n);
	if (!nl || strncmp(buf, "{\"kind\":\"run.meta\"", 18) != 0) {
		*len = n;
		return buf;
	}
	*len = n - (size_t)(nl + 1 - buf);
	return nl + 1;
}

static int eval_run(const char *run, const struct opts *o, struct sb_jw *std, struct std_meta *sm, struct sb_err *err)
{
	struct cell c;
	SB_TRY(read_cell(run, &c, err));
	int rc = 0;
	struct train_info ti = {0};
	struct ckpt *ck = NULL;
	size_t nck = 0;
	struct sb_vallog old = {0};
	int have_old = 0;
	char *val_path = sb_path_join(run, "val.ndjson");
	char *old_buf = NULL;
	size_t old_len = 0;
	const struct sb_dataset *ds = NULL;
	struct sb_split split = {0};
	struct sb_evalrun *er = NULL;
	struct sb_input *inputs = NULL;
	size_t n_inputs = 0;
	struct sb_jw body;
	sb_jw_init(&body, NULL);
	if (!val_path) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto out;
	}
	if ((rc = read_train(run, &ti, err)))
		goto out;

	/* the saved checkpoints, hashed (against their sidecar, and train.ndjson's record) */
	DIR *d = opendir(run);
	if (!d) {
		rc = SB_ERRNO(err, run);
		goto out;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		int64_t e = ckpt_epoch(de->d_name);
		if (e < 0)
			continue;
		struct ckpt *n2 = realloc(ck, (nck + 1) * sizeof *n2);
		if (!n2) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			break;
		}
		ck = n2;
		memset(&ck[nck], 0, sizeof *ck);
		ck[nck].e = e;
		snprintf(ck[nck].name, sizeof ck[nck].name, "%s", de->d_name);
		ck[nck].path = sb_path_join(run, de->d_name);
		nck++;
	}
	closedir(d);
	if (rc)
		goto out;
	qsort(ck, nck, sizeof *ck, cmp_ckpt);
	for (size_t i = 0; i < nck; i++) {
		if (i && ck[i].e == ck[i - 1].e) {
			rc = SB_ERR(err, SB_EDATA, "%s: two checkpoints of epoch %lld (%s, %s)", run,
			            (long long)ck[i].e, ck[i - 1].name, ck[i].name);
			goto out;
		}
		if (ck[i].e > c.epochs) {
			rc = SB_ERR(err, SB_EDATA, "%s: checkpoint %s beyond the cell's %lld epochs", run, ck[i].name,
			            (long long)c.epochs);
			goto out;
		}
		char side[4200], want[SB_SHA256_HEX];
		snprintf(side, sizeof side, "%s.sha256", ck[i].path);
		if ((rc = sb_sha256_file(ck[i].path, ck[i].sha, &ck[i].size, err)))
			goto out;
		if (sb_file_exists(side)) {
			if ((rc = sb_sidecar_read(ck[i].path, want, err)))
				goto out;
			if (strcmp(want, ck[i].sha) != 0) {
				rc = SB_ERR(err, SB_EDATA, "%s: SHA-256 mismatch: expected %s, actual %s", ck[i].path,
				            want, ck[i].sha);
				goto out;
			}
		}
		const char *ts = train_sha(&ti, ck[i].e);
		if (ts && strcmp(ts, ck[i].sha) != 0) {
			rc = SB_ERR(err, SB_EDATA, "%s: SHA-256 %s differs from the one train.ndjson recorded (%s)",
			            ck[i].path, ck[i].sha, ts);
			goto out;
		}
	}
	if (nck == 0)
		sb_cli_warn("%s: no saved checkpoints (epoch-NNN.safetensors)", run);
	else if (ti.n == 0)
		sb_cli_warn("%s: train.ndjson records no checkpoint hashes (missing or empty): the checkpoints are "
		            "evaluated against their sidecars only",
		            run);
	/* an epoch train.ndjson recorded whose checkpoint is gone is not evaluated: say so (the
	 * log then lacks that epoch, and sb-freeze leaves the cell out) */
	for (size_t i = 0; i < ti.n; i++) {
		int found = 0, again = 0;
		for (size_t j = 0; j < nck && !found; j++)
			found = ck[j].e == ti.e[i];
		for (size_t j = 0; j < i && !again; j++)
			again = ti.e[j] == ti.e[i];
		if (!found && !again)
			sb_cli_warn("%s: train.ndjson records epoch %lld's checkpoint (epoch-%03lld.safetensors), which is "
			            "missing: that epoch is not evaluated",
			            run, (long long)ti.e[i], (long long)ti.e[i]);
	}

	/* reusable records of the existing log */
	if (sb_file_exists(val_path)) {
		struct sb_err e2 = {0};
		if (sb_read_file(val_path, &old_buf, &old_len, 0, &e2) ||
		    sb_vallog_parse(old_buf, old_len, val_path, &old, &e2)) {
			sb_cli_warn("%s: ignoring the existing log: %s", val_path, e2.msg);
		} else {
			have_old = 1;
			const struct sb_val_cell *oc = NULL;
			for (size_t i = 0; i < old.n_cells; i++)
				if (strcmp(old.cells[i].cell_id, c.cell_id) == 0)
					oc = &old.cells[i];
			/* a record of a --no-probe run (its run.meta's argv says so) is not reused by a run
			 * that probes (sb-a8 m1 needs the features), unless the method has none (headwise
			 * adaptive entmax); logs of other origins (an sb-eval before the probe existed) are
			 * reused as before, so that their hashes, which a freeze may hold, stay */
			struct sb_norm nm;
			struct sb_err e4 = {0};
			int want_probe = !o->no_probe && old_noprobe(old_buf, old_len) &&
			                 (sb_norm_parse(c.method, 1.5, &nm, &e4) || nm.kind != SB_NORM_ADAPTIVE);
			for (size_t i = 0; oc && i < nck; i++) {
				const struct sb_val_epoch *oe = sb_val_cell_epoch(oc, ck[i].e);
				if (!oe || strcmp(oe->checkpoint_sha256, ck[i].sha) != 0 ||
				    strchr(oe->correct_bits, '/'))
					continue;
				if (want_probe && !sb_json_get(oe->rec, "probe_examples"))
					continue;
				char *bp = sb_path_join(run, oe->correct_bits);
				struct sb_err e3 = {0};
				if (bp && sb_sha256_verify_file(bp, oe->correct_sha256, &e3) == 0)
					ck[i].old = oe;
				free(bp);
			}
		}
	}
	size_t todo = 0;
	for (size_t i = 0; i < nck; i++)
		todo += !ck[i].old;

	/* the data, only when something is to be evaluated */
	inputs = calloc(nck + 3, sizeof *inputs);
	if (!inputs) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto out;
	}
	char *cell_path = sb_path_join(run, "cell.json");
	if (!cell_path || (rc = sb_input_hash(&inputs[n_inputs++], cell_path, err))) {
		free(cell_path);
		rc = rc ? rc : SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto out;
	}
	char *pool_path = NULL;
	if (todo) {
		char *tdir = sb_path_join(o->data_dir, c.task);
		pool_path = tdir ? sb_path_join(tdir, "pool.safetensors") : NULL;
		free(tdir);
		if (!pool_path) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			goto out_paths;
		}
		/* allow_test = 0: a file whose metadata says split=test is refused before its data is read */
		if ((rc = read_pool(pool_path, &ds, err)))
			goto out_paths;
		if (strcmp(ds->task, c.task) != 0) {
			rc = SB_ERR(err, SB_EDATA, "%s: a dataset of task '%s', but the cell's task is '%s'", pool_path,
			            ds->task, c.task);
			goto out_paths;
		}
		if (c.dataset_sha256 && strcmp(c.dataset_sha256, ds->sha256) != 0) {
			rc = SB_ERR(err, SB_EDATA, "%s: SHA-256 %s is not the pool the cell was trained on (%s)",
			            pool_path, ds->sha256, c.dataset_sha256);
			goto out_paths;
		}
		inputs[n_inputs].path = pool_path;
		memcpy(inputs[n_inputs].sha256, ds->sha256, SB_SHA256_HEX);
		inputs[n_inputs].size_bytes = ds->size_bytes;
		n_inputs++;
		if ((rc = sb_split_carve(ds, (uint64_t)c.seed, c.val_fraction, c.limit, &split, err)))
			goto out_paths;
		if (split.n_val == 0) {
			rc = SB_ERR(err, SB_EDATA,
			            "%s: no validation examples (val_fraction %g: the run trained on its whole pool): "
			            "nothing to evaluate",
			            run, c.val_fraction);
			goto out_paths;
		}
		if (c.n_val >= 0 && c.n_val != split.n_val) {
			rc = SB_ERR(err, SB_EDATA,
			            "%s: the validation split has %lld examples, cell.json says n_val %lld", run,
			            (long long)split.n_val, (long long)c.n_val);
			goto out_paths;
		}
		const struct sb_json *nt = sb_json_get(c.json, "n_train");
		int64_t n_train;
		if (nt && (sb_json_int64(nt, &n_train) || n_train != split.n_train)) {
			rc = SB_ERR(err, SB_EDATA, "%s: the training split has %lld examples, cell.json says n_train %s",
			            run, (long long)split.n_train, nt->type == SB_JSON_NUMBER ? nt->text : "(not a number)");
			goto out_paths;
		}
		struct sb_evalrun_opts eo = {
		    .device = o->device, .threads = (int)o->threads, .probe = !o->no_probe, .cell_path = cell_path};
		if ((rc = sb_evalrun_open(c.json, ds, &eo, &er, err)))
			goto out_paths;
	}

	/* evaluate what changed; keep what did not */
	size_t done = 0;
	for (size_t i = 0; i < nck && !rc; i++) {
		if (ck[i].old)
			continue;
		struct sb_evalrun_result res;
		size_t nb = (size_t)(split.n_val + 7) / 8;
		uint8_t *bits = calloc(nb + 1, 1);
		if (!bits) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			break;
		}
		sb_progress(0, "%s: epoch %lld (%zu/%zu)", c.cell_id, (long long)ck[i].e, done + 1, todo);
		if ((rc = evaluate_epoch(er, &ck[i], &split, &res, bits, err))) {
			free(bits);
			break;
		}
		char bname[64], bhex[SB_SHA256_HEX];
		snprintf(bname, sizeof bname, "val-correct-%03lld.bits", (long long)ck[i].e);
		char *bpath = sb_path_join(run, bname);
		rc = bpath ? sb_write_file_atomic(bpath, bits, nb, err) : SB_ERR(err, SB_EINTERNAL, "out of memory");
		sb_sha256_buf(bits, nb, bhex);
		free(bpath);
		free(bits);
		if (rc)
			break;
		struct sb_jw w;
		sb_jw_init(&w, NULL);
		sb_jw_record(&w, "eval.epoch", 1);
		ident(&w, &c);
		sb_jw_kint(&w, "epoch", ck[i].e - 1);
		sb_jw_kint(&w, "epochs_completed", ck[i].e);
		sb_jw_kint(&w, "n_val", split.n_val);
		sb_jw_kf64(&w, "val_accuracy", res.accuracy);
		sb_jw_kf64(&w, "val_macro_f1", res.macro_f1);
		sb_jw_kf64(&w, "val_loss", res.loss);
		sb_jw_kf64(&w, "attention_density", res.attention_density);
		sb_jw_kf64(&w, "attention_entropy", res.attention_entropy);
		sb_jw_kf64(&w, "alpha_mean", res.alpha_mean);
		sb_jw_kf64(&w, "alpha_std", res.alpha_std);
		sb_probe_write(&w, &res.probe);
		sb_jw_kstr(&w, "correct_bits", bname);
		sb_jw_kstr(&w, "correct_sha256", bhex);
		sb_jw_kstr(&w, "checkpoint", ck[i].name);
		sb_jw_kstr(&w, "checkpoint_sha256", ck[i].sha);
		sb_jw_obj_end(&w);
		if (w.oom)
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		else if (sb_json_parse(w.buf, w.len, &ck[i].rec, err))
			rc = SB_ERR(err, SB_EINTERNAL, "eval.epoch record does not parse back: %s", err->msg);
		sb_jw_free(&w);
		done++;
	}
	if (rc)
		goto out_paths;
	if (todo)
		sb_progress(1, "%s: %zu epoch(s) evaluated, %zu unchanged", c.cell_id, todo, nck - todo);

	/* the records, in epoch order, then eval.done */
	for (size_t i = 0; i < nck; i++) {
		sb_jw_value(&body, ck[i].old ? ck[i].old->rec : ck[i].rec);
		if ((rc = sb_jw_line(&body, err)))
			goto out_paths;
		if (!ck[i].old) {
			inputs[n_inputs].path = ck[i].path;
			memcpy(inputs[n_inputs].sha256, ck[i].sha, SB_SHA256_HEX);
			inputs[n_inputs].size_bytes = ck[i].size;
			n_inputs++;
		}
	}
	sb_jw_record(&body, "eval.done", 1);
	ident(&body, &c);
	sb_jw_kint(&body, "epochs", c.epochs);
	sb_jw_kint(&body, "epochs_evaluated", (int64_t)nck);
	sb_jw_kstr(&body, "train_status", ti.status);
	sb_jw_obj_end(&body);
	if ((rc = sb_jw_line(&body, err)))
		goto out_paths;

	/* write val.ndjson only when its records changed */
	size_t ob_len = 0;
	const char *ob = have_old ? body_after_meta(old_buf, old_len, &ob_len) : NULL;
	if (!(ob && ob_len == body.len && memcmp(ob, body.buf, body.len) == 0)) {
		struct sb_atomic a;
		if ((rc = sb_atomic_open(&a, val_path, err)))
			goto out_paths;
		struct sb_jw mw;
		sb_jw_init(&mw, a.f);
		struct sb_run_meta meta = {.device = er ? sb_evalrun_device(er) : "cpu",
		                           .threads = er ? sb_evalrun_threads(er) : 1,
		                           .inputs = inputs,
		                           .n_inputs = (int)n_inputs};
		rc = sb_record_run_meta(&mw, &meta, err);
		sb_jw_free(&mw);
		if (!rc && fwrite(body.buf, 1, body.len, a.f) != body.len)
			rc = SB_ERRNO(err, val_path);
		if (rc)
			sb_atomic_abort(&a);
		else
			rc = sb_atomic_commit(&a, err);
	} else if (!todo) {
		sb_progress(1, "%s: unchanged (%zu epoch(s))", c.cell_id, nck);
	}
	/* and the records to stdout, with what they were made from: cell.json, the pool (when
	 * read), every checkpoint (all hashed above), the old val.ndjson (when records of it
	 * were kept) */
	if (!rc && (fwrite(body.buf, 1, body.len, std->out) != body.len || fflush(std->out) != 0))
		rc = SB_ERRNO(err, "write error: stdout (its temporary file)");
	if (!rc)
		rc = std_input(sm, inputs[0].path, inputs[0].sha256, inputs[0].size_bytes, err); /* cell.json */
	if (!rc && pool_path)
		rc = std_input(sm, pool_path, ds->sha256, ds->size_bytes, err);
	int kept = 0;
	for (size_t i = 0; i < nck && !rc; i++) {
		kept |= ck[i].old != NULL;
		rc = std_input(sm, ck[i].path, ck[i].sha, ck[i].size, err);
	}
	if (!rc && kept) {
		char hex[SB_SHA256_HEX];
		sb_sha256_buf(old_buf, old_len, hex);
		rc = std_input(sm, val_path, hex, old_len, err);
	}
	if (!rc && er)
		std_backend(sm, sb_evalrun_device(er), sb_evalrun_threads(er));
out_paths:
	free(cell_path);
	free(pool_path);
out:
	sb_evalrun_close(er);
	sb_split_free(&split);
	for (size_t i = 0; i < nck; i++) {
		free(ck[i].path);
		sb_json_free(ck[i].rec);
	}
	free(ck);
	free(inputs);
	free(ti.e);
	free(ti.sha);
	sb_vallog_free(&old);
	free(old_buf);
	free(val_path);
	sb_jw_free(&body);
	sb_json_free(c.json);
	return rc;
}

/* ---------------------------------------------------------------- other families */

/* A run directory whose cell.json says "family": NAME is evaluated by NAME's evaluator,
 * which writes its own records (RUN_DIR/eval.ndjson); stdout gets one NAME.eval record.
 * Encoder runs carry no family. To add a family, add a row. */
typedef int (*family_eval_fn)(const char *run_dir, struct sb_backend *be, const char *const *settings, int n_settings,
                              struct sb_err *err);
static const struct {
	const char *name;
	family_eval_fn eval;
} FAMILIES[] = {
	{"lm", sb_eval_lm_run_set}, /* evalsel/eval_lm.h: lib/lm_eval.h, docs/lm.md */
};

/* The family of RUN_DIR/cell.json: an index in FAMILIES, -1 for an encoder run (no
 * family), -2 when cell.json cannot be read or parsed (eval_run reports on it). */
static int run_family(const char *run)
{
	char *path = sb_path_join(run, "cell.json");
	char *buf = NULL;
	size_t n = 0;
	struct sb_err e = {0};
	struct sb_json *v = NULL;
	int family = -2;
	if (path && !sb_read_file(path, &buf, &n, 1 << 24, &e) && !sb_json_parse(buf, n, &v, &e)) {
		family = -1;
		const char *name = sb_json_str(sb_json_get(v, "family"), "");
		for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++)
			if (!strcmp(name, FAMILIES[i].name))
				family = (int)i;
	}
	sb_json_free(v);
	free(buf);
	free(path);
	return family;
}

static int eval_family_run(const char *run, int family, const struct opts *o, struct sb_jw *std, struct std_meta *sm,
                           struct sb_err *err)
{
	struct sb_backend *be = NULL;
	SB_TRY(sb_backend_open(o->device, (int)o->threads, &be, err));
	int rc = FAMILIES[family].eval(run, be, (const char *const *)o->settings, o->n_settings, err);
	if (!rc)
		std_backend(sm, be->device, be->threads);
	sb_backend_close(be);
	if (rc)
		return rc;
	char *path = sb_path_join(run, "eval.ndjson");
	if (!path)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	char kind[64];
	snprintf(kind, sizeof kind, "%s.eval", FAMILIES[family].name);
	sb_jw_record(std, kind, 1);
	sb_jw_kstr(std, "run_dir", run);
	sb_jw_kstr(std, "records", path);
	sb_jw_kstr(std, "status", "completed");
	sb_jw_obj_end(std);
	free(path);
	return sb_jw_line(std, err);
}

int main(int argc, char **argv)
{
	sb_cli_init("sb-eval", argc, argv);
	struct opts o = {.data_dir = "data", .device = "cpu"};
	struct sb_err err = {0};
	enum { O_DEVICE = 256, O_SET, O_HELP, O_VERSION, O_NO_PROBE };
	static const struct option lo[] = {{"device", 1, 0, O_DEVICE},      {"set", 1, 0, O_SET},
	                                   {"help", 0, 0, O_HELP},          {"version", 0, 0, O_VERSION},
	                                   {"no-probe", 0, 0, O_NO_PROBE},  {0, 0, 0, 0}};
	o.settings = calloc((size_t)argc, sizeof *o.settings);
	if (!o.settings) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		sb_cli_die(&err);
	}
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":d:j:q", lo, NULL)) != -1) {
		switch (ch) {
		case 'd':
			o.data_dir = optarg;
			break;
		case 'j':
			if (sb_parse_int("-j", optarg, 0, 4096, &o.threads, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case 'q':
			sb_quiet = 1;
			break;
		case O_DEVICE:
			o.device = optarg;
			if (sb_device_check(optarg, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case O_SET:
			/* the LM family is the only one with settings: checked now, before any output */
			if (sb_eval_lm_check_set(optarg, &err))
				sb_cli_usage_error("%s", err.msg);
			o.settings[o.n_settings++] = optarg;
			break;
		case O_NO_PROBE:
			o.no_probe = 1;
			break;
		case O_HELP:
			usage();
		case O_VERSION:
			sb_cli_version();
		case ':':
			sb_cli_bad_option(argv, 1);
		default:
			sb_cli_bad_option(argv, 0);
		}
	}
	if (optind >= argc)
		sb_cli_usage_error("no run directories given");
	/* settings that only together say nothing is measured (windows=0 probes=0) */
	if (o.n_settings && sb_eval_lm_check_settings((const char *const *)o.settings, o.n_settings, &err))
		sb_cli_usage_error("%s", err.msg);

	/* the records go to a temporary file first: stdout's run.meta, which comes first, names
	 * inputs known only when every run directory is done */
	FILE *tmp = tmpfile();
	if (!tmp) {
		SB_ERRNO(&err, "a temporary file for stdout's records");
		sb_cli_die(&err);
	}
	struct sb_jw std;
	sb_jw_init(&std, tmp);
	struct std_meta sm = {0};
	int status = 0;
	for (int i = optind; i < argc; i++) {
		struct sb_err e = {0};
		/* SAS runs first: their sas.eval records go to stdout whole (the report reads them
		 * there), not as the family table's summary record */
		int family = sb_eval_sas_is_run(argv[i]) ? -3 : run_family(argv[i]);
		int rc;
		if (family == -3)
			rc = o.n_settings ? SB_ERR(&e, SB_EUSAGE, "--set applies to lm runs, not to SAS runs")
			                  : sb_eval_sas(argv[i], &std, &e);
		else if (family >= 0)
			rc = eval_family_run(argv[i], family, &o, &std, &sm, &e);
		else if (o.n_settings && family == -1)
			rc = SB_ERR(&e, SB_EUSAGE, "--set applies to the runs of other families (lm), not to encoder runs");
		else
			rc = eval_run(argv[i], &o, &std, &sm, &e);
		if (rc) {
			/* messages name the file; add the run directory when they do not */
			if (!strstr(e.msg, argv[i]))
				sb_err_prefix(&e, "%s", argv[i]);
			fprintf(stderr, "%s: %s\n", sb_prog, e.msg);
			if (!status)
				status = rc;
		}
	}
	sb_jw_free(&std);
	/* stdout: run.meta, then the records */
	struct sb_jw mw;
	sb_jw_init(&mw, stdout);
	struct sb_run_meta meta = {.device = sm.threads ? sm.device : o.device,
	                           .threads = sm.threads ? sm.threads : 1,
	                           .inputs = sm.in,
	                           .n_inputs = (int)sm.n};
	int rc = sb_record_run_meta(&mw, &meta, &err);
	sb_jw_free(&mw);
	char buf[1 << 16];
	size_t got;
	if (!rc && (fflush(tmp) != 0 || fseek(tmp, 0, SEEK_SET) != 0))
		rc = SB_ERRNO(&err, "stdout's records (their temporary file)");
	/* a failed write to stdout is reported by sb_cli_finish (ferror) */
	while (!rc && (got = fread(buf, 1, sizeof buf, tmp)) > 0 && fwrite(buf, 1, got, stdout) == got)
		;
	if (!rc && ferror(tmp))
		rc = SB_ERRNO(&err, "stdout's records (their temporary file)");
	if (rc) {
		fprintf(stderr, "%s: %s\n", sb_prog, err.msg);
		if (!status)
			status = rc;
	}
	fclose(tmp);
	std_meta_free(&sm);
	if (pool_cache.valid)
		sb_dataset_free(&pool_cache.ds);
	free(o.settings);
	return sb_cli_finish(status);
}
