/* targets.h — the readers of the records and cells that a user or an earlier stage hands in,
 * fuzzed by tests/fuzz/records/fuzz.c and replayed (with the kept crashers and seeds) by
 * tests/unit/test_records_fuzz.c:
 *   cell       one JSON value, read by every cell parser:
 *              - sb_cell_from_json (lib/train_cell.h), strict (a cell given to sb-train) and
 *                not (a run's cell.json): a strict cell is a valid cell.json with the same
 *                cell_id; cell_id is TASK.METHOD.sSEED.ARCH.TIER.HASH8; sb_cell_finish again
 *                changes nothing; the canonical method names the normaliser the input named;
 *                the derived settings exist (normaliser of every epoch, learning rate in
 *                [0, lr]); the fields written by sb_cell_write_fields read back, as a value
 *                and as RUN_DIR/cell.json (sb_cell_read), as the same cell, which sb-eval's
 *                check (sb_evalrun_cell_check) accepts; the input itself passes that check
 *                exactly when its cell_id is the one its fields hash to;
 *              - sb_sas_cell_parse (lib/sas_run.h; scaled cells: lib/sas_scaled.h),
 *                sb_n3a_cell_parse (lib/n3a.h) and sb_lm_cell_parse + sb_lm_cell_id
 *                (lib/lm_train.h): the cell as written back (sb_sas_cell_json,
 *                sb_sas_scaled_json, sb_n3a_cell_json, sb_lm_cell_json; for LM also
 *                cell.json as sb_lm_cell_write writes it) parses again to the same cell_id
 *                and writes the same bytes; a SAS id names a directory under RUNS (no '/',
 *                not "." or "..") and is UTF-8, and its float settings are finite; an N3-A
 *                cell keeps the ranges its runner indexes with and finite float settings; an
 *                LM cell keeps its strings whole and finite model settings
 *   vallog     sb_vallog_read (lib/vallog.h) on the bytes as a file; a form feed byte
 *              splits them into two logs, the second read after the first. A refusal is
 *              SB_EDATA naming the file, and sb_vallog_parse of the same bytes agrees; a log
 *              read has the hash and size of the bytes, each cell ascending distinct epochs
 *              with epochs_completed = epoch + 1 and accuracies in [0, 1] or NaN, and an
 *              eval.done that agrees with them; sb_val_cell_value's values are accuracies of
 *              its epochs. Then the freeze's cells (lib/freeze_cells.h, lib/runsel.h) over
 *              the logs: at most one included cell per (task, method, seed), included
 *              exactly when it is its key's winner, supersession links that agree both ways,
 *              sb_fz_topk_select accepts the included cells, sb_fz_plan_cell finds each
 *   selection  sb_guard_check (lib/guard.h), as sb-test runs it, on the bytes as
 *              selection.json in a temporary directory with no logs but one, empty, of 1970
 *              (runs-1970/r1/val.ndjson; runs/r0/ has none): a refusal is SB_EVERDICT naming
 *              the check; a selection passed has the file's hash and its logs, passes
 *              sb_guard_check_runs on runs/ and on an empty directory, and on runs-1970/
 *              exactly when it was frozen after 1970 (less the allowance of 1 s); the
 *              test-read ledger next to it has no reads. Then
 *              the same object sealed again (sb_selection_seal of its members but "sha256",
 *              as sb-freeze writes it): the sealed text parses to the payload, and the guard
 *              never refuses it at selection-hash (relative log paths without ".." only:
 *              the guard reads what a sealed selection names)
 *   ledger     sb_guard_reads on the bytes as a test-read ledger: a refusal is SB_EVERDICT
 *              (check single-read); counts are consistent; after sb_guard_ledger_append of a
 *              "started" record a ledger that was read reads again with one read more
 *   sidecar    sb_sidecar_read (lib/hash.h) on the bytes as PATH.sha256: the digest read is
 *              64 lowercase hex digits, the first of the file
 *   switchmap  sb_m3_map_read (lib/freeze_m3.h) on the bytes up to a form feed as a switch
 *              map, the rest (when there is a form feed) a validation log: a refused map is
 *              SB_EDATA naming the file; a map read has the bytes' hash and size, at least one
 *              line, a simple schedule that is not mechanistic_switch (and is its method line's
 *              when it has one), every line of one of the two methods with an epoch >= 1, no
 *              line twice. Then sb_m3_derive over the log (or none): no error; the status
 *              authorised exactly when there is no reason; the plan and what is missing from it
 *              make the planned cells; its three JSON texts are arrays of the cells, the plan
 *              entries and the missing ones; the included cells are the cells used
 * Each takes arbitrary bytes and returns an error code or 0 without crashing, leaking,
 * reading out of bounds or taking long; a broken invariant calls abort() (unless named in
 * $SB_FUZZ_SKIP, see fz_skipped). Files go to one temporary directory per process (under
 * /dev/shm when writable), removed at exit and before an abort() of a check here. */
#ifndef SB_RECORDS_FUZZ_TARGETS_H
#define SB_RECORDS_FUZZ_TARGETS_H

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "attn_norm.h"
#include "evalrun.h"
#include "freeze_cells.h"
#include "freeze_m3.h"
#include "guard.h"
#include "hash.h"
#include "io.h"
#include "json.h"
#include "lm_train.h"
#include "n3a.h"
#include "sas_run.h"
#include "sas_scaled.h"
#include "select.h"
#include "train_cell.h"
#include "vallog.h"

/* Is the check `what` named in $SB_FUZZ_SKIP (messages separated by ';')? Then a broken
 * invariant is only printed: to fuzz on past a reported bug that is not fixed yet (run.sh
 * and the replay test see the variable; `make check` runs without it). A sanitizer's report
 * from lib/ cannot be skipped; the checks whose calls lead to one can ("an empty runs
 * directory passes", "a log of 1970 is refused exactly after the freeze"). */
static int fz_skipped(const char *what)
{
	static const char *skip;
	if (!skip)
		skip = getenv("SB_FUZZ_SKIP") ? getenv("SB_FUZZ_SKIP") : "";
	size_t n = strlen(what);
	for (const char *s = strstr(skip, what); s; s = strstr(s + 1, what))
		if ((s == skip || s[-1] == ';') && (s[n] == 0 || s[n] == ';'))
			return 1;
	return 0;
}

/* ---------------------------------------------------------------- the temporary directory */

static char fz_dir[64];

static void fz_rm_tree(const char *dir, int depth)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char p[4200];
			struct stat st;
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && depth < 4)
				fz_rm_tree(p, depth + 1);
			else
				unlink(p);
		}
		closedir(d);
	}
	rmdir(dir);
}

static void fz_cleanup(void)
{
	if (fz_dir[0])
		fz_rm_tree(fz_dir, 0);
	fz_dir[0] = 0;
}

static void fz_check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz invariant broken: %s\n", what);
		if (!fz_skipped(what)) {
			fz_cleanup(); /* abort() runs no atexit handler */
			abort();
		}
	}
}

/* FZ_DIR/rel, the directory created (with run/, runs/, sel/, ledger/, side/) on first use */
static void fz_path(char *buf, size_t n, const char *rel)
{
	if (!fz_dir[0]) {
		snprintf(fz_dir, sizeof fz_dir, "%s/sb-fuzz-records-XXXXXX",
		         access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		if (!mkdtemp(fz_dir)) {
			perror("fuzz: mkdtemp");
			abort();
		}
		static const char *sub[] = {"run",         "sel",           "sel/runs",
		                            "sel/runs/r0", "sel/runs-1970", "sel/runs-1970/r1",
		                            "sel/empty",   "ledger",        "side"};
		char p[128];
		for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
			snprintf(p, sizeof p, "%s/%s", fz_dir, sub[i]);
			fz_check(mkdir(p, 0755) == 0, "mkdir in the temporary directory");
		}
		/* runs directories: a run without a log (runs), a run with an empty log of 1970
		 * (runs-1970), none (empty) */
		snprintf(p, sizeof p, "%s/sel/runs-1970/r1/val.ndjson", fz_dir);
		FILE *f = fopen(p, "wb");
		struct timeval old[2] = {{0, 0}, {0, 0}};
		fz_check(f && fclose(f) == 0 && utimes(p, old) == 0, "an old empty log");
		atexit(fz_cleanup);
	}
	snprintf(buf, n, "%s/%s", fz_dir, rel);
}

static void fz_put(const char *path, const void *d, size_t n)
{
	FILE *f = fopen(path, "wb");
	fz_check(f && (n == 0 || fwrite(d, 1, n, f) == n) && fclose(f) == 0, "write a temporary file");
}

/* the bytes of a writer w as text (w->buf is NULL when nothing was written) */
static int fz_same_text(const struct sb_jw *a, const struct sb_jw *b)
{
	return !a->oom && !b->oom && a->len == b->len && (!a->len || !memcmp(a->buf, b->buf, a->len));
}

static struct sb_json *fz_parse_writer(const struct sb_jw *w, const char *what)
{
	struct sb_json *v = NULL;
	struct sb_err e = {0};
	fz_check(!w->oom && sb_json_parse(w->buf, w->len, &v, &e) == 0, what);
	return v;
}

/* ---------------------------------------------------------------- cell */

/* Do two method names give the same normaliser (kind and ratio)? */
static int fz_norm_same(const char *a, const char *b, double alpha)
{
	struct sb_norm x, y;
	struct sb_err e = {0};
	if (sb_norm_parse(a, alpha, &x, &e) || sb_norm_parse(b, alpha, &y, &e))
		return 0;
	return x.kind == y.kind && x.ratio == y.ratio;
}

/* an encoder cell (sb-train, sb-eval, sb-test) */
static int fz_cell_encoder(const struct sb_json *v)
{
	struct sb_cell s, c, r;
	struct sb_err e = {0};
	int rs = sb_cell_from_json(v, 1, &s, &e);
	fz_check(!rs || (rs == SB_EDATA && e.msg[0]), "a refused cell is SB_EDATA with a message");
	int rc = sb_cell_from_json(v, 0, &c, &e);
	if (rc) {
		fz_check(rc == SB_EDATA && e.msg[0], "a refused cell.json is SB_EDATA with a message");
		fz_check(rs != 0, "a cell sb-train accepts is a valid cell.json");
		return rc;
	}
	if (!rs)
		fz_check(!strcmp(s.cell_id, c.cell_id), "a cell and its cell.json reading have one cell_id");
	char want[256];
	snprintf(want, sizeof want, "%s.%s.s%llu.%s.%s.", c.task, c.method, (unsigned long long)c.seed, c.arch, c.tier);
	size_t nw = strlen(want);
	fz_check(strlen(c.cell_id) == nw + 8 && !strncmp(c.cell_id, want, nw) &&
	             strspn(c.cell_id + nw, "0123456789abcdef") == 8,
	         "cell_id is TASK.METHOD.sSEED.ARCH.TIER.HASH8");
	r = c;
	int same = sb_cell_finish(&r, &e) == 0 && !strcmp(r.cell_id, c.cell_id);
	fz_check(same, "sb_cell_finish again keeps the cell");
	/* a normaliser's name is made canonical ("topk_softmax" -> "topk_softmax_025"): the
	 * same normaliser */
	const char *m = sb_json_str(sb_json_get(v, "method"), "");
	struct sb_norm nm;
	if (!sb_norm_parse(m, c.alpha, &nm, &e)) {
		int named = fz_norm_same(m, c.method, c.alpha);
		fz_check(named, "the canonical method names the normaliser asked for");
		same &= named;
	}
	if (!same) /* (a check skipped) */
		return 0;
	/* the settings training derives from the cell */
	fz_check(sb_cell_norm_base(&c, &nm, &e) == 0, "a cell has a normaliser");
	for (int ep = 0; ep < c.epochs && ep < 40; ep++)
		fz_check(sb_cell_norm_at(&c, ep, &nm, &e) == 0, "a cell has a normaliser in every epoch");
	fz_check(sb_cell_norm_at(&c, c.epochs - 1, &nm, &e) == 0, "a cell has a normaliser in its last epoch");
	for (int64_t t = 0; t < 1000; t += 333) {
		double lr = sb_cell_lr_at(&c, t, 1000);
		fz_check(isfinite(lr) && lr >= 0 && lr <= c.lr, "the learning rate stays in [0, lr]");
	}
	/* written back (cell.json's fields), read again */
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_jw_obj(&w);
	sb_cell_write_fields(&c, &w);
	sb_jw_obj_end(&w);
	struct sb_json *back = fz_parse_writer(&w, "the fields a cell writes are JSON");
	fz_check(sb_cell_from_json(back, 0, &r, &e) == 0 && !strcmp(r.cell_id, c.cell_id),
	         "a cell written back reads as the same cell");
	fz_check(sb_evalrun_cell_check(back, "fuzz", &e) == 0, "sb-eval accepts the cell.json a cell writes");
	char dir[128], path[160];
	fz_path(dir, sizeof dir, "run");
	fz_path(path, sizeof path, "run/cell.json");
	fz_put(path, w.buf, w.len);
	fz_check(sb_cell_read(dir, &r, &e) == 0 && !strcmp(r.cell_id, c.cell_id),
	         "RUN_DIR/cell.json reads as the same cell");
	sb_json_free(back);
	sb_jw_free(&w);
	const char *id = sb_json_str(sb_json_get(v, "cell_id"), NULL);
	int ok = sb_evalrun_cell_check(v, "fuzz", &e) == 0;
	fz_check(ok == (id && !strcmp(id, c.cell_id)),
	         "sb-eval accepts a cell.json exactly when its cell_id hashes right");
	if (!ok)
		fz_check(e.code == SB_EDATA && strncmp(e.msg, "fuzz: ", 6) == 0, "sb-eval's refusal names the file");
	return 0;
}

static int fz_cell_sas(const struct sb_json *v)
{
	struct sb_sas_cell *c = calloc(1, sizeof *c), *r = calloc(1, sizeof *r);
	fz_check(c && r, "out of memory");
	struct sb_err e = {0};
	int rc = sb_sas_cell_parse(c, v, &e);
	if (rc) {
		fz_check(e.msg[0] != 0, "a refused SAS cell has a message");
	} else {
		fz_check(c->cell_id[0] && !strchr(c->cell_id, '/') && strcmp(c->cell_id, ".") &&
		             strcmp(c->cell_id, ".."),
		         "a SAS cell's id names a directory under RUNS");
		int utf8 = sb_utf8_check(c->cell_id, strlen(c->cell_id)) == (size_t)-1;
		fz_check(utf8, "a SAS cell's id is UTF-8");
		const struct sb_sas_proc *p = &c->proc;
		int finite = c->scaled ? isfinite(c->sx.sel_lr) && isfinite(c->sx.sel_wd) && isfinite(c->sx.sel_clip)
		                       : isfinite(p->pre_lr) && isfinite(p->pre_wd) && isfinite(p->pre_clip) &&
		                             isfinite(p->sel_lr) && isfinite(p->sel_wd) && isfinite(p->sel_clip);
		fz_check(finite, "a SAS cell's float settings are finite");
		if (!utf8 || !finite) /* (a check skipped) */
			goto out;
		struct sb_jw w, w2;
		sb_jw_init(&w, NULL);
		sb_jw_init(&w2, NULL);
		if (c->scaled)
			sb_sas_scaled_json(&w, &c->sx);
		else
			sb_sas_cell_json(&w, c);
		struct sb_json *back = fz_parse_writer(&w, "a SAS cell writes JSON");
		fz_check(sb_sas_cell_parse(r, back, &e) == 0 && !strcmp(r->cell_id, c->cell_id) &&
		             r->scaled == c->scaled,
		         "a SAS cell written back reads as the same cell");
		if (r->scaled)
			sb_sas_scaled_json(&w2, &r->sx);
		else
			sb_sas_cell_json(&w2, r);
		fz_check(fz_same_text(&w, &w2), "a SAS cell written back writes the same bytes");
		sb_json_free(back);
		sb_jw_free(&w);
		sb_jw_free(&w2);
	}
out:
	free(c);
	free(r);
	return rc;
}

static int fz_cell_n3a(const struct sb_json *v)
{
	struct sb_n3a_cell c, r;
	struct sb_err e = {0};
	int rc = sb_n3a_cell_parse(&c, v, &e);
	if (rc) {
		fz_check(rc == SB_EDATA && e.msg[0], "a refused N3-A cell is SB_EDATA with a message");
		return rc;
	}
	fz_check(c.arch >= 0 && c.n <= SB_N3A_MAXN && c.k >= 1 && c.k < c.n && c.r >= 1 && c.r <= c.n && c.eps >= 0 &&
	             c.eps < 1,
	         "an N3-A cell has 1 <= k < n <= 64, 1 <= r <= n, 0 <= epsilon < 1");
	fz_check(c.neval >= 1 && c.neval <= SB_N3A_MAXEVAL && c.eval_steps[0] == 0 &&
	             c.eval_steps[c.neval - 1] <= c.updates && c.nparents >= 1 && c.nparents <= SB_N3A_MAXPAR,
	         "an N3-A cell's eval_steps start at 0 and end within updates");
	for (int i = 1; i < c.neval; i++)
		fz_check(c.eval_steps[i] > c.eval_steps[i - 1], "an N3-A cell's eval_steps increase");
	int finite = isfinite(c.lr) && isfinite(c.wd) && isfinite(c.b1) && isfinite(c.b2) && isfinite(c.adam_eps);
	fz_check(finite, "an N3-A cell's float settings are finite");
	if (!finite) /* (the check skipped) */
		return 0;
	char want[128];
	snprintf(want, sizeof want, "n3a.%s.r%d.s%llu.", sb_n3a_arch_name(c.arch), c.r, (unsigned long long)c.seed);
	size_t nw = strlen(want);
	fz_check(strlen(c.cell_id) == nw + 8 && !strncmp(c.cell_id, want, nw) &&
	             strspn(c.cell_id + nw, "0123456789abcdef") == 8,
	         "an N3-A cell_id is n3a.ARCH.rR.sSEED.HASH8");
	struct sb_jw w, w2;
	sb_jw_init(&w, NULL);
	sb_jw_init(&w2, NULL);
	sb_n3a_cell_json(&w, &c);
	struct sb_json *back = fz_parse_writer(&w, "an N3-A cell writes JSON");
	fz_check(sb_n3a_cell_parse(&r, back, &e) == 0 && !strcmp(r.cell_id, c.cell_id),
	         "an N3-A cell written back reads as the same cell");
	sb_n3a_cell_json(&w2, &r);
	fz_check(fz_same_text(&w, &w2), "an N3-A cell written back writes the same bytes");
	(void)sb_n3a_cell_registered(&c);
	sb_json_free(back);
	sb_jw_free(&w);
	sb_jw_free(&w2);
	return 0;
}

/* the string member key of v, or NULL */
static const char *fz_str(const struct sb_json *v, const char *key)
{
	return sb_json_str(sb_json_get(v, key), NULL);
}

static int fz_cell_lm(const struct sb_json *v)
{
	struct sb_lm_cell *c = calloc(1, sizeof *c), *r = calloc(1, sizeof *r);
	fz_check(c && r, "out of memory");
	struct sb_err e = {0};
	int rc = sb_lm_cell_parse(c, v, &e);
	if (rc) {
		fz_check(rc == SB_EDATA && e.msg[0], "a refused LM cell is SB_EDATA with a message");
		goto out;
	}
	if ((rc = sb_lm_cell_id(c, &e))) {
		fz_check(rc == SB_EDATA && e.msg[0], "an LM cell without an id is SB_EDATA with a message");
		goto out;
	}
	/* (with a check skipped, a string cut short may end inside a UTF-8 sequence: the cell
	 * is not written back then) */
	const char *s;
	int whole = 1, w1;
	if ((s = fz_str(v, "mixture"))) {
		fz_check(w1 = !strcmp(s, c->mixture), "an LM cell keeps its mixture whole");
		whole &= w1;
	}
	if ((s = fz_str(v, "haystack"))) {
		fz_check(w1 = !strcmp(s, c->haystack), "an LM cell keeps its haystack whole");
		whole &= w1;
	}
	const struct sb_json *cp = sb_json_get(v, "corpora");
	for (size_t j = 0; cp && j < cp->n && (int)j < c->n_corpora; j++) {
		fz_check(w1 = !strcmp(sb_json_str(cp->items[j], ""), c->corpora[j]),
		         "an LM cell keeps its corpora whole");
		whole &= w1;
	}
	const struct sb_lm_cfg *mc = &c->model;
	int finite = isfinite(mc->norm_eps) && isfinite(mc->rope_theta) && isfinite(mc->init_std) &&
	             isfinite(mc->rope_factor) && isfinite(mc->rope_low_freq) && isfinite(mc->rope_high_freq) &&
	             isfinite(mc->emb_mult) && isfinite(mc->resid_mult) && isfinite(mc->attn_scale) &&
	             isfinite(mc->logit_div);
	fz_check(finite, "an LM cell's model settings are finite");
	if (!whole || !finite)
		goto out;
	struct sb_jw w, w2;
	sb_jw_init(&w, NULL);
	sb_jw_init(&w2, NULL);
	sb_lm_cell_json(&w, c);
	struct sb_json *back = fz_parse_writer(&w, "an LM cell writes JSON");
	fz_check(sb_lm_cell_parse(r, back, &e) == 0 && sb_lm_cell_id(r, &e) == 0 && !strcmp(r->cell_id, c->cell_id),
	         "an LM cell written back reads as the same cell");
	sb_lm_cell_json(&w2, r);
	fz_check(fz_same_text(&w, &w2), "an LM cell written back writes the same bytes");
	sb_json_free(back);
	/* RUN_DIR/cell.json as sb-train writes it, read as sb_lm_run_open reads it */
	char dir[128], path[160];
	fz_path(dir, sizeof dir, "run");
	fz_path(path, sizeof path, "run/cell.json");
	fz_check(sb_lm_cell_write(dir, c, 1234, NULL, &e) == 0, "sb_lm_cell_write");
	char *buf = NULL;
	size_t n = 0;
	fz_check(sb_read_file(path, &buf, &n, 0, &e) == 0 && sb_json_parse(buf, n, &back, &e) == 0,
	         "an LM cell.json is JSON");
	fz_check(sb_lm_cell_parse(r, back, &e) == 0 && sb_lm_cell_id(r, &e) == 0 && !strcmp(r->cell_id, c->cell_id) &&
	             !strcmp(fz_str(back, "cell_id"), c->cell_id),
	         "an LM cell.json reads as the same cell");
	free(buf);
	sb_json_free(back);
	sb_jw_free(&w);
	sb_jw_free(&w2);
out:
	free(c);
	free(r);
	return rc;
}

/* 0 when some parser took the value as a cell */
static int fz_cell(const uint8_t *d, size_t n)
{
	struct sb_json *v;
	struct sb_err e = {0};
	int rc = sb_json_parse((const char *)d, n, &v, &e);
	if (rc)
		return rc;
	int a = fz_cell_encoder(v), b = fz_cell_sas(v), c = fz_cell_n3a(v), l = fz_cell_lm(v);
	sb_json_free(v);
	return a && b && c && l ? SB_EDATA : 0;
}

/* ---------------------------------------------------------------- vallog */

static void fz_vallog_check(const struct sb_vallog *lg, const uint8_t *d, size_t n)
{
	char hex[SB_SHA256_HEX];
	sb_sha256_buf(d, n, hex);
	fz_check(lg->size_bytes == n && !strcmp(lg->sha256, hex), "a log's hash and size are those of its bytes");
	for (size_t i = 0; i < lg->n_cells; i++) {
		const struct sb_val_cell *c = &lg->cells[i];
		fz_check(c->cell_id && c->task && c->method && c->tier && c->arch, "a cell's identity");
		for (size_t j = 0; j < lg->n_cells; j++)
			fz_check(i == j || strcmp(c->cell_id, lg->cells[j].cell_id), "one entry per cell_id");
		for (size_t k = 0; k < c->n_ep; k++) {
			const struct sb_val_epoch *ep = &c->ep[k];
			fz_check(ep->epoch >= 0 && ep->epochs_completed == ep->epoch + 1,
			         "epochs_completed = epoch + 1");
			fz_check(!k || ep->epoch > c->ep[k - 1].epoch, "epochs ascend, each once");
			fz_check(isnan(ep->val_accuracy) || (ep->val_accuracy >= 0 && ep->val_accuracy <= 1),
			         "an accuracy is in [0, 1] or NaN");
			fz_check(sb_is_sha256_hex(ep->checkpoint_sha256) && sb_is_sha256_hex(ep->correct_sha256) &&
			             ep->correct_bits && ep->rec,
			         "an epoch's hashes and bits");
			fz_check(sb_val_cell_epoch(c, ep->epochs_completed) == ep,
			         "sb_val_cell_epoch finds each epoch");
			if (c->done)
				fz_check(ep->epochs_completed <= c->epochs, "no epoch beyond eval.done's budget");
		}
		if (c->done)
			fz_check(c->train_status && c->epochs >= 1 && c->epochs_evaluated >= 0 &&
			             c->epochs_evaluated <= c->epochs && (size_t)c->epochs_evaluated == c->n_ep,
			         "eval.done agrees with the epochs");
		else
			fz_check(c->epochs == -1 && c->epochs_evaluated == -1 && !c->train_status,
			         "no eval.done, no counts");
		for (int64_t budget = 0; budget <= 2; budget++)
			for (int patience = 0; patience <= 2; patience++) {
				double acc;
				int64_t epoch;
				struct sb_err e = {0};
				if (sb_val_cell_value(c, patience, budget, &acc, &epoch, &e) == 0) {
					const struct sb_val_epoch *ep = sb_val_cell_epoch(c, epoch + 1);
					fz_check(ep && ep->val_accuracy == acc && acc >= 0 && acc <= 1,
					         "a cell's value is the accuracy of one of its epochs");
					fz_check(!budget || epoch + 1 == budget, "a budget's value is of that epoch");
				} else
					fz_check(e.code == SB_EDATA && e.msg[0], "a cell without a value: SB_EDATA");
			}
	}
}

/* the freeze's cells over logs[0..n_logs) */
static void fz_vallog_freeze(const struct sb_vallog *logs, int n_logs, int patience, int64_t budget, const char *tier,
                             const char *arch)
{
	struct sb_fz_cell *cells = NULL;
	size_t nc = 0, n_all = 0;
	struct sb_err e = {0};
	fz_check(sb_fz_topk_cells(logs, n_logs, tier, arch, patience, budget, &cells, &nc, &e) == 0,
	         "sb_fz_topk_cells takes logs that read");
	for (int i = 0; i < n_logs; i++)
		n_all += logs[i].n_cells;
	fz_check(tier || arch || nc == n_all, "every cell judged");
	for (size_t k = 0; k < nc; k++) {
		const struct sb_fz_cell *c = &cells[k];
		char buf[300];
		fz_check(c->included == (c->disp == SB_RUNSEL_WINNER) && c->included == !c->reason,
		         "included exactly when the winner, with no reason");
		fz_check(!sb_fz_row_filtered(c->vc, buf, sizeof buf) || c->disp == SB_RUNSEL_FILTERED,
		         "a row filtered out is dropped first");
		if (c->included)
			fz_check(c->acc >= 0 && c->acc <= 1 && c->epoch >= 0,
			         "an included cell's value is an accuracy");
		if (c->supersedes >= 0)
			fz_check((size_t)c->supersedes < k && cells[c->supersedes].superseded_by == (int)k &&
			             cells[c->supersedes].disp == SB_RUNSEL_SUPERSEDED &&
			             !sb_fz_vc_cmp(c->vc, cells[c->supersedes].vc, 0),
			         "supersession links agree and join one key");
		if (c->superseded_by >= 0)
			fz_check((size_t)c->superseded_by < nc && (size_t)c->superseded_by > k &&
			             cells[c->superseded_by].supersedes == (int)k,
			         "superseded_by agrees with supersedes");
		for (size_t j = 0; c->included && j < k; j++)
			fz_check(!cells[j].included || sb_fz_vc_cmp(c->vc, cells[j].vc, 0),
			         "at most one included cell per (task, method, seed)");
		if (c->included) {
			const struct sb_val_epoch *full;
			fz_check(sb_fz_plan_cell(cells, nc, c->vc->task, c->vc->method, c->vc->seed, &full) == c,
			         "sb_fz_plan_cell finds an included cell");
			fz_check(full == sb_val_cell_epoch(c->vc, c->vc->epochs), "the plan's full-budget epoch");
		}
	}
	struct sb_selection sel = {0};
	for (int min_seeds = 1; min_seeds <= 2; min_seeds++) {
		fz_check(sb_fz_topk_select(cells, nc, min_seeds, &sel, &e) == 0, "the rule takes the included cells");
		for (size_t t = 0; t < sel.n_tasks; t++)
			fz_check(sel.tasks[t].chosen < (int)sel.n_cands &&
			             (sel.tasks[t].chosen >= 0 || sel.tasks[t].reason),
			         "a task's choice is a candidate or has a reason");
		sb_selection_free(&sel);
	}
	free(cells);
}

static int fz_vallog(const uint8_t *d, size_t n)
{
	const uint8_t *ff = memchr(d, '\f', n);
	size_t n1 = ff ? (size_t)(ff - d) : n;
	const uint8_t *part[2] = {d, ff ? ff + 1 : NULL};
	size_t len[2] = {n1, ff ? n - n1 - 1 : 0};
	int n_logs = ff ? 2 : 1;
	struct sb_vallog logs[2];
	int rc = 0, k;
	for (k = 0; k < n_logs; k++) {
		char path[128];
		fz_path(path, sizeof path, k ? "run/val2.ndjson" : "run/val.ndjson");
		fz_put(path, part[k], len[k]);
		struct sb_err e = {0}, e2 = {0};
		rc = sb_vallog_read(path, &logs[k], &e);
		struct sb_vallog again;
		int rc2 = sb_vallog_parse((const char *)part[k], len[k], path, &again, &e2);
		fz_check(rc == rc2 && !strcmp(e.msg, e2.msg), "sb_vallog_parse agrees with sb_vallog_read");
		if (rc) {
			fz_check(rc == SB_EDATA && !strncmp(e.msg, path, strlen(path)),
			         "a refused log is SB_EDATA naming it");
			break;
		}
		fz_check(again.n_cells == logs[k].n_cells, "sb_vallog_parse finds the same cells");
		sb_vallog_free(&again);
		fz_vallog_check(&logs[k], part[k], len[k]);
	}
	if (!rc) {
		const char *tier = NULL, *arch = NULL;
		if (logs[0].n_cells) {
			tier = logs[0].cells[0].tier;
			arch = logs[0].cells[0].arch;
		}
		fz_vallog_freeze(logs, n_logs, 0, 0, NULL, NULL);
		fz_vallog_freeze(logs, n_logs, 2, 0, tier, arch);
		fz_vallog_freeze(logs, n_logs, 0, 2, NULL, arch);
	}
	for (int i = 0; i < k; i++)
		sb_vallog_free(&logs[i]);
	return rc;
}

/* ---------------------------------------------------------------- selection */

static int fz_guard(const char *sel, const char *runs, const uint8_t *d, size_t n, struct sb_err *e)
{
	struct sb_guarded g;
	int rc = sb_guard_check(sel, runs, &g, e);
	if (rc) {
		fz_check(rc == SB_EVERDICT && strstr(e->msg, ": refused by the guard ("),
		         "a refusal is the guard's, naming its check");
		fz_check(!g.sel && !g.sel_dir, "a refusal returns nothing");
		return rc;
	}
	char hex[SB_SHA256_HEX];
	sb_sha256_buf(d, n, hex);
	const struct sb_json *logs = sb_json_get(g.sel, "validation_logs");
	fz_check(!strcmp(g.file_sha256, hex) && sb_is_sha256_hex(g.sha256) && isfinite(g.frozen_at) && g.sel_dir &&
	             logs && g.n_logs == logs->n,
	         "a selection passed has its file's hash, its payload hash, its time and its logs");
	fz_check(!strcmp(g.sha256, sb_json_str(sb_json_get(g.sel, "sha256"), "")),
	         "the payload hash is the recorded one");
	for (size_t i = 0; i < logs->n; i++) {
		char *p = sb_guard_resolve(&g, sb_json_str(sb_json_get(logs->items[i], "path"), ""));
		fz_check(p != NULL, "sb_guard_resolve");
		free(p);
	}
	char *ledger = sb_guard_ledger_path(sel);
	int nr = -1, ns = -1;
	char *first = NULL;
	fz_check(ledger && sb_guard_reads(ledger, g.sha256, &nr, &ns, &first, e) == 0 && nr == 0 && ns == 0 && !first,
	         "no ledger: no reads");
	free(ledger);
	fz_check(sb_guard_check_runs(&g, runs, e) == 0, "the runs directory passes again");
	char dir[128];
	fz_path(dir, sizeof dir, "sel/runs-1970");
	if (!fz_skipped("a log of 1970 is refused exactly after the freeze")) {
		rc = sb_guard_check_runs(&g, dir, e);
		fz_check(rc ? rc == SB_EVERDICT && strstr(e->msg, ": refused by the guard (log-mtime): ") &&
		                  g.frozen_at < -1
		            : g.frozen_at >= -1,
		         "a log of 1970 is refused exactly after the freeze");
	}
	fz_path(dir, sizeof dir, "sel/empty");
	if (!fz_skipped("an empty runs directory passes"))
		fz_check(sb_guard_check_runs(&g, dir, e) == 0, "an empty runs directory passes");
	sb_guarded_free(&g);
	return 0;
}

static int fz_selection(const uint8_t *d, size_t n)
{
	char sel[128], runs[128];
	fz_path(sel, sizeof sel, "sel/selection.json");
	fz_path(runs, sizeof runs, "sel/runs");
	fz_put(sel, d, n);
	struct sb_err e = {0};
	int rc = fz_guard(sel, runs, d, n, &e);
	/* sealed again, as sb-freeze seals it */
	struct sb_json *v = NULL;
	if (sb_json_parse((const char *)d, n, &v, &e) || v->type != SB_JSON_OBJECT) {
		sb_json_free(v);
		return rc;
	}
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_jw_obj(&w);
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->keys[i], "sha256")) {
			sb_jw_key(&w, v->keys[i]);
			sb_jw_value(&w, v->items[i]);
		}
	sb_jw_obj_end(&w);
	struct sb_json *payload = fz_parse_writer(&w, "a payload written back is JSON");
	char *text = NULL, hex[SB_SHA256_HEX];
	size_t tn = 0;
	fz_check(sb_selection_seal(w.buf, w.len, &text, &tn, hex, &e) == 0, "sb_selection_seal takes a payload");
	struct sb_json *sealed = NULL;
	fz_check(sb_json_parse(text, tn, &sealed, &e) == 0, "a sealed selection is JSON");
	char h1[SB_SHA256_HEX], h2[SB_SHA256_HEX];
	fz_check(sb_json_canonical_sha256(payload, NULL, h1, &e) == 0 &&
	             sb_json_canonical_sha256(sealed, "sha256", h2, &e) == 0 && !strcmp(h1, h2) && !strcmp(h1, hex) &&
	             !strcmp(sb_json_str(sb_json_get(sealed, "sha256"), ""), hex),
	         "a sealed selection is its payload plus the payload's hash");
	/* the guard reads the logs a selection names: only those under the directory */
	int inside = 1;
	const struct sb_json *logs = sb_json_get(v, "validation_logs");
	for (size_t i = 0; logs && logs->type == SB_JSON_ARRAY && i < logs->n; i++) {
		const char *p = sb_json_str(sb_json_get(logs->items[i], "path"), "");
		inside &= p[0] != '/' && !strstr(p, "..");
	}
	if (inside) {
		fz_put(sel, text, tn);
		struct sb_err e2 = {0};
		/* the selection-hash refusal names the selection (a log's refusal names the log,
		 * whose path may hold any text) */
		char hash_refused[256];
		snprintf(hash_refused, sizeof hash_refused, "%s: refused by the guard (selection-hash): ", sel);
		if (fz_guard(sel, runs, (const uint8_t *)text, tn, &e2))
			fz_check(strncmp(e2.msg, hash_refused, strlen(hash_refused)) != 0,
			         "a sealed selection passes selection-hash");
	}
	free(text);
	sb_json_free(sealed);
	sb_json_free(payload);
	sb_json_free(v);
	sb_jw_free(&w);
	return rc;
}

/* ---------------------------------------------------------------- ledger */

#define FZ_SEL_SHA "fd4f00d5fbb463c0780135411cefed7da8029c7c7d0c990d53a0aea83cc2719b"

static int fz_ledger(const uint8_t *d, size_t n)
{
	char path[128];
	fz_path(path, sizeof path, "ledger/selection.reads.ndjson");
	fz_put(path, d, n);
	struct sb_err e = {0};
	int nr = -1, ns = -1;
	char *first = NULL;
	int rc = sb_guard_reads(path, FZ_SEL_SHA, &nr, &ns, &first, &e);
	if (rc) {
		fz_check(rc == SB_EVERDICT && strstr(e.msg, "refused by the guard (single-read)") && !first,
		         "a damaged ledger is refused (single-read)");
	} else {
		fz_check(nr >= 0 && ns >= 0 && ns <= nr && (nr > 0) == (first != NULL),
		         "read counts and the first read");
		if (first)
			fz_check(!strncmp(first, "at ", 3), "the first read is described");
	}
	static const char rec[] = "{\"kind\":\"test.read\",\"v\":1,\"status\":\"started\",\"read\":2,\"time\":\"t\","
	                          "\"argv\":[\"sb-test\"],\"selection_sha256\":\"" FZ_SEL_SHA "\",\"out_dir\":\"o\"}";
	fz_check(sb_guard_ledger_append(path, rec, sizeof rec - 1, &e) == 0, "a record is appended");
	int nr2 = -1, ns2 = -1;
	char *first2 = NULL;
	int rc2 = sb_guard_reads(path, FZ_SEL_SHA, &nr2, &ns2, &first2, &e);
	if (!rc)
		fz_check(!rc2 && nr2 == nr + 1 && ns2 == ns + 1 && (!first || !strcmp(first, first2)),
		         "a ledger read, with a read appended, reads with one read more");
	free(first);
	free(first2);
	return rc;
}

/* ---------------------------------------------------------------- sidecar */

static int fz_sidecar(const uint8_t *d, size_t n)
{
	char path[128], side[160], hex[SB_SHA256_HEX] = "";
	fz_path(path, sizeof path, "side/model.safetensors");
	fz_path(side, sizeof side, "side/model.safetensors.sha256");
	fz_put(side, d, n);
	struct sb_err e = {0};
	int rc = sb_sidecar_read(path, hex, &e);
	if (rc)
		fz_check(rc == SB_EDATA && strstr(e.msg, "model.safetensors.sha256"),
		         "a refused sidecar is SB_EDATA naming it");
	else
		fz_check(sb_is_sha256_hex(hex) && n >= 64 && !memcmp(hex, d, 64),
		         "the digest is the file's first 64 bytes");
	return rc;
}

/* ---------------------------------------------------------------- switchmap */

/* the JSON text of w is an array of n items */
static int fz_array_of(const struct sb_jw *w, size_t n)
{
	struct sb_json *v = NULL;
	struct sb_err e = {0};
	int ok = w->buf && !sb_json_parse(w->buf, w->len, &v, &e) && v->type == SB_JSON_ARRAY && v->n == n;
	sb_json_free(v);
	return ok;
}

static int fz_switchmap(const uint8_t *d, size_t n)
{
	const uint8_t *ff = memchr(d, '\f', n);
	size_t n1 = ff ? (size_t)(ff - d) : n;
	char path[128], lpath[128];
	fz_path(path, sizeof path, "run/map.inc");
	fz_put(path, d, n1);
	struct sb_m3_map map;
	struct sb_err e = {0};
	int rc = sb_m3_map_read(path, &map, &e);
	if (rc) {
		fz_check(rc == SB_EDATA && !strncmp(e.msg, path, strlen(path)), "a refused switch map is SB_EDATA naming it");
		return rc;
	}
	char hex[SB_SHA256_HEX];
	sb_sha256_buf(d, n1, hex);
	fz_check(!strcmp(hex, map.sha256) && map.size_bytes == n1, "a switch map read has the bytes' hash and size");
	fz_check(map.n >= 1 && map.simple[0] && strcmp(map.simple, "mechanistic_switch") &&
	             (!map.axis[0] || !strcmp(map.axis, map.simple)),
	         "a switch map read has lines and one simple schedule, its method line's");
	for (size_t i = 0; i < map.n; i++) {
		const struct sb_m3_mapline *l = &map.l[i];
		fz_check(l->epoch >= 1 && (!strcmp(l->method, "mechanistic_switch") || !strcmp(l->method, map.simple)),
		         "every map line is of one of the two switching methods, with an epoch >= 1");
		for (size_t j = 0; j < i; j++)
			fz_check(strcmp(l->task, map.l[j].task) || strcmp(l->arch, map.l[j].arch) ||
			             strcmp(l->tier, map.l[j].tier) || strcmp(l->method, map.l[j].method),
			         "no map line twice");
	}
	struct sb_vallog log;
	int n_logs = 0;
	if (ff) {
		fz_path(lpath, sizeof lpath, "run/m3val.ndjson");
		fz_put(lpath, ff + 1, n - n1 - 1);
		struct sb_err e2 = {0};
		n_logs = sb_vallog_read(lpath, &log, &e2) == 0;
	}
	struct sb_m3 m3;
	struct sb_err e3 = {0};
	int drc = sb_m3_derive(&log, n_logs, &map, 0, &m3, &e3);
	fz_check(drc == 0, "sb_m3_derive judges any logs against any map read");
	if (!drc) {
		int authorised = !strcmp(m3.status, SB_M3_AUTHORIZED);
		fz_check(authorised == (m3.nreasons == 0) &&
		             (authorised || !strcmp(m3.status, SB_M3_MISMATCH) || !strcmp(m3.status, SB_M3_INCOMPLETE)),
		         "the status is authorised exactly when there is no reason");
		fz_check(m3.plan_n + m3.plan_missing == m3.planned, "the plan and what is missing make the planned cells");
		fz_check(fz_array_of(&m3.cells_json, m3.nc) && fz_array_of(&m3.plan_json, m3.plan_n) &&
		             fz_array_of(&m3.missing_json, m3.plan_missing),
		         "cells, test_plan and test_plan_missing are arrays of the cells and entries");
		size_t inc = 0, used = 0;
		for (size_t k = 0; k < m3.nc; k++)
			inc += m3.cells[k].included;
		for (int i = 0; i < n_logs; i++)
			used += (size_t)m3.cells_used[i];
		fz_check(inc == used && m3.plan_n <= inc, "the included cells are the cells used, and cover the plan");
	}
	sb_m3_free(&m3);
	if (n_logs)
		sb_vallog_free(&log);
	sb_m3_map_free(&map);
	return 0;
}

struct fz_target {
	const char *name;
	int (*fn)(const uint8_t *, size_t);
};

static const struct fz_target fz_targets[] = {
    {"cell", fz_cell},     {"vallog", fz_vallog},   {"selection", fz_selection},
    {"ledger", fz_ledger}, {"sidecar", fz_sidecar}, {"switchmap", fz_switchmap}, {NULL, NULL},
};

#endif
