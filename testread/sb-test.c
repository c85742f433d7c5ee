/* sb-test — the guarded single test read (PROTOCOL A6 "test", DESIGN §5).
 *
 * The story: parse options; run the guard (selection, its hash, the
 * validation logs, their hashes and times); refuse a second read; check that
 * every checkpoint of the test plan is still the one the validation logs
 * recorded; only then record the read as started, open the test files, and
 * evaluate each planned cell at its full-budget checkpoint; write
 * OUT_DIR/test.ndjson atomically and record the read as completed with the
 * hash of what it wrote. No test file is opened, and no path of one is built,
 * before every check has passed.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "cli.h"
#include "dataset.h"
#include "evalrun.h"
#include "freeze_cells.h"
#include "freeze_m3.h"
#include "guard.h"
#include "hash.h"
#include "io.h"
#include "json.h"
#include "record.h"
#include "version.h"

static const char usage_text[] =
    "Usage: sb-test -s selection.json [-d DATA_DIR] [-o OUT_DIR] [--reread REASON]\n"
    "               [--device cpu|cuda] [-j THREADS] [-q] RUNS_DIR...\n"
    "\n"
    "The single, guarded read of the test split (PROTOCOL A6). Before anything else it checks, and\n"
    "refuses with exit 1 and a message naming the failed check, unless:\n"
    "  selection-exists   the selection can be read\n"
    "  selection-format   it is a selection written by sb-freeze\n"
    "  selection-hash     its payload hash recomputes (nobody edited it)\n"
    "  log-present        every validation log it lists still exists\n"
    "  log-hash           each still has the SHA-256 recorded at the freeze\n"
    "  log-mtime          no validation log (listed, or any RUNS_DIR/*/val.ndjson) is newer than\n"
    "                     the freeze\n"
    "  freeze-status      (a selection of rule m3_confirmation) its status is exactly\n"
    "                     M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED\n"
    "  switch-map-hash    (the same) the switch map it names still has the SHA-256 it froze\n"
    "  selection-derivation the selection is what its rule gives on the logs it lists (and,\n"
    "                     m3_confirmation, its switch map): every cell's fate and value, each\n"
    "                     task's chosen ratio or the status, and the test plan (caught also\n"
    "                     when re-hashed by hand)\n"
    "  single-read        the selection was not read before (the ledger next to it,\n"
    "                     selection.reads.ndjson for selection.json, says; nor under another\n"
    "                     name beside it: the other *.reads.ndjson there), unless --reread\n"
    "  output-fresh       OUT_DIR/test.ndjson does not exist\n"
    "  checkpoint-present every cell of the frozen test plan has its full-budget checkpoint in\n"
    "                     RUNS_DIR/CELL_ID/ (the first RUNS_DIR that holds CELL_ID)\n"
    "  checkpoint-hash    and it still has the SHA-256 the validation log recorded\n"
    "No test file is opened before all of them pass. Then the read is recorded as started in the\n"
    "ledger, and it evaluates every cell of the frozen test plan (rule topk_mean_val_acc: the\n"
    "methods softmax, sparsemax, entmax15, headwise_adaptive_entmax and the selected top-k ratio, for\n"
    "the seeds of the selection; rule m3_confirmation: every confirmation cell) on\n"
    "DATA_DIR/TASK/test.safetensors at the full-budget checkpoint; the ledger then records the read\n"
    "as completed with the SHA-256 of OUT_DIR/test.ndjson (or as failed).\n"
    "\n"
    "Options:\n"
    "  -s FILE           the selection written by sb-freeze (required)\n"
    "  -d DATA_DIR       dataset directory (default data)\n"
    "  -o OUT_DIR        output directory (default test)\n"
    "  --reread REASON   allow another read of a selection already read; the reason is recorded\n"
    "  --device DEV      cpu (default) or cuda[:N][,tf32]\n"
    "  -j THREADS        CPU threads (default 0: all cores)\n"
    "  -q                no progress lines on stderr\n"
    "  --help            this text;  --version  the version\n"
    "\n"
    "Written: OUT_DIR/test.ndjson (atomically) and stdout: run.meta, then test.read {selection,\n"
    "  selection_sha256, read, reread_reason, started_at, test_files [{task, path, sha256}]}, then\n"
    "  one test.cell per planned cell {cell_id, task, method, seed, tier, arch, epochs, seq_len,\n"
    "  n_test, test_accuracy, test_macro_f1, test_loss, test_nonzero_ratio, test_attention_entropy,\n"
    "  test_alpha_mean, test_alpha_std, correct_bits, correct_sha256, checkpoint_sha256,\n"
    "  selection_sha256}; OUT_DIR/bits/CELL_ID.bits: one bit per test example (bit i of byte i/8,\n"
    "  least significant first), 1 = correct. The ledger gets test.read records {status \"started\" |\n"
    "  \"completed\" | \"failed\", read, time, program, version, argv, cwd, selection,\n"
    "  selection_sha256, out_dir, reread_reason, output, output_sha256, error}.\n"
    "\n"
    "Exit status: 0 read and recorded; 1 refused by a check above (nothing read); 2 usage; 3 bad\n"
    "input data (a malformed or edited cell.json, a test file that is not one, a checkpoint whose\n"
    "metadata names another cell, epoch or normaliser); 4 I/O error; 5 internal or device error.\n"
    "After the read is recorded as started, a failure is recorded as failed and still counts.\n"
    "\n"
    "Examples:\n"
    "  sb-test -s study/selection.json -d data -o study/test runs\n"
    "  sb-test -s study/selection.json -o study/test-2 --reread 'checkpoint copy was corrupt' runs\n";

static _Noreturn void usage(void)
{
	fputs(usage_text, stdout);
	exit(sb_cli_finish(0));
}

struct opts {
	const char *sel, *data_dir, *out_dir, *reread, *device;
	char **runs; /* RUNS_DIR... */
	int n_runs;
	long long threads;
};

/* One cell of the frozen test plan. */
struct plan {
	const char *task, *method, *cell_id, *sha;
	int64_t seed, epochs;
	char *run_dir, *checkpoint, *cell_path;
	struct sb_json *cell;
};

/* "PATH: refused by the guard (CHECK): detail", as lib/guard.c words its refusals */
__attribute__((format(printf, 4, 5))) static int refuse(struct sb_err *err, const char *path, const char *check,
                                                        const char *fmt, ...)
{
	char d[900];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d, sizeof d, fmt, ap);
	va_end(ap);
	return SB_ERR(err, SB_EVERDICT, "%s: refused by the guard (%s): %s", path, check, d);
}

/* selection-derivation helpers: a JSON number that must equal want exactly (the writer prints
 * doubles so that they read back to the same bits), an integer, a string */
static int same_num(const struct sb_json *v, double want)
{
	return v && v->type == SB_JSON_NUMBER && v->number == want;
}
static int same_int(const struct sb_json *v, int64_t want)
{
	int64_t x;
	return v && !sb_json_int64(v, &x) && x == want;
}
static int same_str(const struct sb_json *v, const char *want)
{
	return v && v->type == SB_JSON_STRING && strcmp(v->text, want) == 0;
}
/* a candidate's val_accuracy, n_seeds and seeds, as in 'selected' and 'all_topk_validation' */
static int same_mean_seeds(const struct sb_json *e, const struct sb_sel_cand *cd)
{
	const struct sb_json *seeds = sb_json_get(e, "seeds");
	int ok = same_num(sb_json_get(e, "val_accuracy"), cd->val_accuracy) &&
	         same_int(sb_json_get(e, "n_seeds"), cd->n_seeds) && seeds && seeds->type == SB_JSON_ARRAY &&
	         seeds->n == (size_t)cd->n_seeds;
	for (int i = 0; ok && i < cd->n_seeds; i++)
		ok = same_int(seeds->items[i], cd->seeds[i]);
	return ok;
}

/* The validation logs the selection lists, read again (their hashes were checked by the
 * guard; one that changed since is refused as log-hash). *logs (NULL when out of memory, rc
 * set) holds *n_read of them read, to be freed with free_logs. */
static int read_listed_logs(const struct sb_guarded *g, const char *sel, struct sb_vallog **logs_out, int *n_logs,
                            int *n_read_out, struct sb_err *err)
{
	const struct sb_json *lv = sb_json_get(g->sel, "validation_logs");
	int n = (int)lv->n, rc = 0, n_read = 0;
	struct sb_vallog *logs = calloc((size_t)n + 1, sizeof *logs);
	*logs_out = logs;
	*n_logs = n;
	*n_read_out = 0;
	if (!logs)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (; n_read < n && !rc; n_read++) {
		const char *rel = sb_json_str(sb_json_get(lv->items[n_read], "path"), "");
		char *path = rel[0] == '/' ? strdup(rel) : sb_path_join(g->sel_dir, rel);
		if (!path)
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		else if (sb_vallog_read(path, &logs[n_read], err))
			rc = refuse(err, sel, "selection-derivation", "%s", err->msg);
		else if (!same_str(sb_json_get(lv->items[n_read], "sha256"), logs[n_read].sha256))
			rc = refuse(err, sel, "log-hash", "%s changed while it was checked", path);
		else if (!same_int(sb_json_get(lv->items[n_read], "size_bytes"), (int64_t)logs[n_read].size_bytes))
			rc = refuse(err, sel, "selection-derivation", "validation_logs[%d]: size_bytes is not the log's (%llu)",
			            n_read, (unsigned long long)logs[n_read].size_bytes);
		free(path);
	}
	*n_read_out = n_read;
	return rc;
}

static void free_logs(struct sb_vallog *logs, int n_read)
{
	for (int i = 0; i < n_read; i++)
		sb_vallog_free(&logs[i]);
	free(logs);
}

/* validation_logs[i].cells_used is used[i] for every log: 1, else 0 */
static int same_cells_used(const struct sb_json *sel, const int *used, int n_logs)
{
	const struct sb_json *lv = sb_json_get(sel, "validation_logs");
	for (int i = 0; i < n_logs; i++)
		if (!same_int(sb_json_get(lv->items[i], "cells_used"), used[i]))
			return 0;
	return 1;
}

/* --expect-cells N of the recorded argv as sb-freeze's getopt_long read it: a long option by
 * any unambiguous prefix ("--expect 16"), its value after '=' or in the next argument, N as
 * sb_parse_int reads it ("016"); the values of the other options skipped, nothing after "--".
 * *n = N, 0 when absent; -1 when malformed (not an argv sb-freeze accepted). */
static int argv_expect_cells(const struct sb_json *sel, long long *n)
{
	static const struct {
		const char *name;
		int arg;
	} lo[] = {{"rule", 1},  {"min-seeds", 1},  {"patience", 1},     {"budget", 1}, {"tier", 1},   {"arch", 1},
	          {"force", 0}, {"switch-map", 1}, {"expect-cells", 1}, {"help", 0},   {"version", 0}}; /* sb-freeze's */
	const struct sb_json *av = sb_json_get(sel, "argv");
	*n = 0;
	if (!av || av->type != SB_JSON_ARRAY)
		return -1;
	for (size_t i = 1; i < av->n; i++) {
		const char *a = sb_json_str(av->items[i], NULL);
		if (!a)
			return -1;
		if (!strcmp(a, "--"))
			break;
		if (a[0] != '-' || !a[1])
			continue; /* a log */
		if (a[1] != '-') { /* -q, -o FILE, -oFILE, -qo FILE */
			const char *o = strchr(a + 1, 'o');
			i += o && !o[1];
			continue;
		}
		const char *name = a + 2, *eq = strchr(name, '='), *val = NULL;
		size_t len = eq ? (size_t)(eq - name) : strlen(name), hit = 0, nhit = 0;
		for (size_t k = 0; k < sizeof lo / sizeof *lo && nhit < 9; k++)
			if (len && !strncmp(lo[k].name, name, len)) {
				hit = k;
				nhit = strlen(lo[k].name) == len ? 9 : nhit + 1; /* an exact match wins */
			}
		if (nhit != 1 && nhit != 9)
			return -1;
		if (lo[hit].arg)
			val = eq ? eq + 1 : i + 1 < av->n ? sb_json_str(av->items[++i], NULL) : NULL;
		struct sb_err e = {0};
		if (!strcmp(lo[hit].name, "expect-cells") &&
		    (!val || sb_parse_int("--expect-cells", val, 1, 100000000, n, &e)))
			return -1;
	}
	return 0;
}

/* the last two components of a path ("DIR/FILE"), or all of it */
static const char *tail2(const char *p)
{
	const char *last = strrchr(p, '/'), *prev = last;
	if (!last)
		return p;
	while (prev > p && prev[-1] != '/')
		prev--;
	return prev > p ? prev : p;
}

/* A cell's recorded reason REC against the derived WANT. Before 2026-12-06 sb-freeze named a
 * superseded cell's later log by the path it was given ("superseded by cell X in PATH (a later
 * log)"), which sb-test cannot see; that form is accepted for the derived "superseded by cell X
 * of validation_logs[N] (a later log)" when PATH ends in the run directory and file name of
 * validation_logs[N]'s path. */
static int same_reason(const struct sb_json *sel, const struct sb_json *rec, const char *want)
{
	if (!want)
		return rec && rec->type == SB_JSON_NULL;
	if (same_str(rec, want))
		return 1;
	char id[200], head[260];
	int n, used = 0;
	if (!rec || rec->type != SB_JSON_STRING ||
	    sscanf(want, "superseded by cell %199s of validation_logs[%d] (a later log)%n", id, &n, &used) != 2 ||
	    want[used])
		return 0;
	const struct sb_json *lv = sb_json_get(sel, "validation_logs");
	const char *lp = n >= 0 && lv && (size_t)n < lv->n ? sb_json_str(sb_json_get(lv->items[n], "path"), NULL) : NULL;
	snprintf(head, sizeof head, "superseded by cell %s in ", id);
	const char *t = rec->text, *end = " (a later log)";
	size_t lt = strlen(t), lh = strlen(head), le = strlen(end);
	if (!lp || lt <= lh + le || strncmp(t, head, lh) || strcmp(t + lt - le, end))
		return 0;
	char path[4200];
	snprintf(path, sizeof path, "%.*s", (int)(lt - lh - le), t + lh);
	return strcmp(tail2(path), tail2(lp)) == 0;
}

/* the selection's "cells" equal the derived JSON text of them, each reason by same_reason: 1,
 * else 0 with *at the first entry that differs (-1 when the lists differ in length) */
static int same_cells(const struct sb_json *sel, const struct sb_jw *derived, long *at)
{
	struct sb_json *d = NULL;
	struct sb_err e = {0};
	const struct sb_json *v = sb_json_get(sel, "cells");
	*at = -1;
	if (sb_json_parse(derived->buf, derived->len, &d, &e))
		return 0;
	int ok = v && v->type == SB_JSON_ARRAY && d->type == SB_JSON_ARRAY && v->n == d->n;
	for (size_t i = 0; ok && i < d->n; i++) {
		const struct sb_json *r = v->items[i], *w = d->items[i];
		int same = r && r->type == SB_JSON_OBJECT && r->n == w->n;
		for (size_t k = 0; same && k < w->n; k++)
			same = strcmp(w->keys[k], "reason")
			           ? sb_json_equal(sb_json_get(r, w->keys[k]), w->items[k])
			           : same_reason(sel, sb_json_get(r, "reason"), sb_json_str(w->items[k], NULL));
		if (!same) {
			*at = (long)i;
			ok = 0;
		}
	}
	sb_json_free(d);
	return ok;
}

/* member KEY of the selection equals the JSON text derived[0..len): 1, or 0 with *at set to
 * the first index of an array where they differ (-1 when the lengths or types differ) */
static int same_json_text(const struct sb_json *sel, const char *key, const struct sb_jw *derived, long *at)
{
	struct sb_json *d = NULL;
	struct sb_err e = {0};
	const struct sb_json *v = sb_json_get(sel, key);
	*at = -1;
	if (sb_json_parse(derived->buf, derived->len, &d, &e))
		return 0;
	int ok = sb_json_equal(v, d);
	if (!ok && v && v->type == SB_JSON_ARRAY && d->type == SB_JSON_ARRAY && v->n == d->n)
		for (size_t i = 0; i < v->n && *at < 0; i++)
			if (!sb_json_equal(v->items[i], d->items[i]))
				*at = (long)i;
	sb_json_free(d);
	return ok;
}

/* Rule m3_confirmation: the selection must be what the rule gives on the logs it lists and
 * its switch map (both hashed by the guard): the status and its reasons, the seeds and the
 * number of planned cells, every cell's fate, value and switch epochs, and the test plan
 * with its missing cells. sb_m3_derive (lib/freeze_m3.h) is the code sb-freeze froze with;
 * it reads the switching cells' cell.json again too, so a switch epoch edited since the
 * freeze is refused here. Reads the selection, the logs, the map and those cell.json. */
static int m3_derive_check(const struct sb_guarded *g, const char *sel, struct sb_err *err)
{
	const char *check = "selection-derivation";
	const struct sb_json *rule = sb_json_get(g->sel, "rule"), *sm = sb_json_get(g->sel, "switch_map");
	const struct sb_json *ev = sb_json_get(rule, "expected_cells");
	int64_t expect = 0;
	if (!ev || (ev->type != SB_JSON_NULL && (sb_json_int64(ev, &expect) || expect < 1)))
		return refuse(err, sel, check, "the rule's expected_cells is malformed (a count or null)");
	/* the count is an input of the freeze, not of the logs: it must be the one its command
	 * line gave (both are in the hashed payload; a reseal must then change both) */
	long long given;
	int bad = argv_expect_cells(g->sel, &given);
	if (bad || given != expect) {
		char want[32] = "null", gv[32] = "malformed";
		if (expect)
			snprintf(want, sizeof want, "%lld", (long long)expect);
		if (!bad && given)
			snprintf(gv, sizeof gv, "%lld", given);
		else if (!bad)
			snprintf(gv, sizeof gv, "none");
		return refuse(err, sel, check, "the rule's expected_cells (%s) is not the --expect-cells of its argv (%s)",
		              want, gv);
	}
	struct sb_vallog *logs;
	int n_logs, n_read, rc = read_listed_logs(g, sel, &logs, &n_logs, &n_read, err);
	if (!logs)
		return rc;
	struct sb_m3_map map = {0};
	struct sb_m3 d = {0};
	struct sb_err e2 = {0};
	char *mp = sb_guard_resolve(g, sb_json_str(sb_json_get(sm, "path"), ""));
	if (!rc && !mp)
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	else if (!rc && sb_m3_map_read(mp, &map, &e2))
		rc = refuse(err, sel, check, "its switch map cannot be read: %s", e2.msg);
	else if (!rc && !same_str(sb_json_get(sm, "sha256"), map.sha256))
		rc = refuse(err, mp, "switch-map-hash", "the switch map changed while it was checked");
	else if (!rc)
		rc = sb_m3_derive(logs, n_logs, &map, expect, &d, err);
	long at = -1;
	const struct sb_json *reasons = sb_json_get(g->sel, "status_reasons"), *seeds = sb_json_get(rule, "seeds");
	if (!rc && !same_str(sb_json_get(g->sel, "status"), d.status))
		rc = refuse(err, sel, check, "the rule on its logs and switch map gives status %s (%zu reason(s); the "
		            "first: %s), not what 'status' says",
		            d.status, d.nreasons, d.nreasons ? d.reasons[0] : "-");
	int ok = reasons && reasons->type == SB_JSON_ARRAY && reasons->n == d.nreasons;
	for (size_t i = 0; !rc && ok && i < d.nreasons; i++)
		ok = same_str(reasons->items[i], d.reasons[i]);
	if (!rc && !ok)
		rc = refuse(err, sel, check, "status_reasons are not the %zu the rule gives on its logs", d.nreasons);
	ok = seeds && seeds->type == SB_JSON_ARRAY && seeds->n == d.nseeds &&
	     same_int(sb_json_get(rule, "planned_cells"), (int64_t)d.planned);
	for (size_t i = 0; !rc && ok && i < d.nseeds; i++)
		ok = same_int(seeds->items[i], d.seeds[i]);
	if (!rc && !ok)
		rc = refuse(err, sel, check, "the rule's seeds or planned_cells are not the logs' (%zu seeds, %zu cells)",
		            d.nseeds, d.planned);
	const struct sb_json *methods = sb_json_get(rule, "methods");
	ok = methods && methods->type == SB_JSON_ARRAY && methods->n == 4;
	for (size_t i = 0; !rc && ok && i < 4; i++)
		ok = same_str(methods->items[i], d.methods[i]);
	ok = ok && same_int(sb_json_get(sm, "lines"), (int64_t)map.n) &&
	     same_str(sb_json_get(sm, "simple_schedule"), map.simple);
	if (!rc && !ok)
		rc = refuse(err, sel, check, "the rule's methods or the switch map's lines and simple schedule are not "
		            "the map's (%zu lines, %s)",
		            map.n, map.simple);
	if (!rc && !same_cells_used(g->sel, d.cells_used, n_logs))
		rc = refuse(err, sel, check, "validation_logs' cells_used are not the cells the rule uses of each");
	if (!rc && !same_cells(g->sel, &d.cells_json, &at)) {
		if (at >= 0) {
			const struct sb_m3_cell *c = &d.cells[at];
			rc = refuse(err, sel, check,
			            "cells[%ld] is not what the rule gives on its logs and switch map: cell %s of log %d, "
			            "%s",
			            at, c->vc->cell_id, c->log, c->included ? "included" : c->reason);
		} else {
			rc = refuse(err, sel, check, "'cells' does not list the %zu cells of its logs", d.nc);
		}
	}
	if (!rc && !same_json_text(g->sel, "test_plan", &d.plan_json, &at))
		rc = refuse(err, sel, check, "test_plan is not what the rule gives on its logs and switch map (%zu cells; "
		            "the first that differs: %ld)",
		            d.plan_n, at);
	if (!rc && !same_json_text(g->sel, "test_plan_missing", &d.missing_json, &at))
		rc = refuse(err, sel, check, "test_plan_missing is not what the rule gives on its logs and switch map (%zu "
		            "cells; the first that differs: %ld)",
		            d.plan_missing, at);
	free(mp);
	sb_m3_free(&d);
	sb_m3_map_free(&map);
	free_logs(logs, n_read);
	return rc;
}

/* Rule topk_mean_val_acc: the selection must be what the rule gives on the logs it lists (hashed
 * by the guard): the cells' fates and values, the chosen ratio of every task, and the test plan.
 * sb_fz_* (lib/freeze_cells.h) is the code sb-freeze froze with, so an edit that was re-hashed
 * by hand (a ratio swapped, a cell dropped or its value changed, a plan entry added) is refused
 * here, before the read is recorded. Reads the selection and the validation logs only. */
static int derive_check(const struct sb_guarded *g, const char *sel, struct sb_err *err)
{
	const struct sb_json *rule = sb_json_get(g->sel, "rule");
	const char *check = "selection-derivation";
	/* the rules sb-freeze writes: m3_confirmation (m3_derive_check) and topk_mean_val_acc
	 * (derived here); any other name, or none, is not a selection sb-freeze wrote */
	if (same_str(sb_json_get(rule, "name"), "m3_confirmation"))
		return m3_derive_check(g, sel, err);
	if (!same_str(sb_json_get(rule, "name"), "topk_mean_val_acc"))
		return refuse(err, sel, "selection-format", "its rule is not one sb-freeze writes (topk_mean_val_acc or "
		                                            "m3_confirmation)");
	int64_t min_seeds, patience = 0, budget = 0;
	const struct sb_json *pv = sb_json_get(rule, "patience"), *bv = sb_json_get(rule, "budget_epochs");
	const struct sb_json *tv = sb_json_get(rule, "tier"), *av = sb_json_get(rule, "arch");
	/* exactly one basis, as sb-freeze writes it: a patience and a null budget, or the reverse */
	int by_budget = same_str(sb_json_get(rule, "basis"), "fixed_budget");
	int basis_ok = by_budget ? !sb_json_int64(bv, &budget) && budget >= 1 && budget <= 1000000 && pv &&
	                               pv->type == SB_JSON_NULL
	                         : same_str(sb_json_get(rule, "basis"), "best_epoch_patience") &&
	                               !sb_json_int64(pv, &patience) && patience >= 0 && patience <= 1000000 && bv &&
	                               bv->type == SB_JSON_NULL;
	if (sb_json_int64(sb_json_get(rule, "min_seeds"), &min_seeds) || min_seeds < 1 || min_seeds > 1000000 ||
	    !basis_ok || (tv && tv->type != SB_JSON_STRING && tv->type != SB_JSON_NULL) ||
	    (av && av->type != SB_JSON_STRING && av->type != SB_JSON_NULL))
		return refuse(err, sel, check,
		              "the rule's min_seeds, basis (patience or budget_epochs), tier or arch is malformed");
	const char *tier = tv && tv->type == SB_JSON_STRING ? tv->text : NULL;
	const char *arch = av && av->type == SB_JSON_STRING ? av->text : NULL;
	struct sb_vallog *logs;
	int n_logs, n_read, rc = read_listed_logs(g, sel, &logs, &n_logs, &n_read, err);
	struct sb_fz_cell *cells = NULL;
	size_t nc = 0;
	struct sb_selection picked = {0};
	if (!logs)
		return rc;
	if (!rc && (rc = sb_fz_topk_cells(logs, n_logs, tier, arch, (int)patience, budget, &cells, &nc, err)) == 0)
		rc = sb_fz_topk_select(cells, nc, (int)min_seeds, &picked, err);
	if (rc == SB_EDATA)
		rc = refuse(err, sel, check, "the listed logs cannot be selected from: %s", err->msg);
	/* the cells: every one, in order, with its fate and value; and how many of each log it used */
	const struct sb_json *cv = sb_json_get(g->sel, "cells");
	if (!rc && (!cv || cv->type != SB_JSON_ARRAY || cv->n != nc))
		rc = refuse(err, sel, check, "it lists %zu cells; the rule on its logs judges %zu", cv ? cv->n : 0, nc);
	if (!rc) {
		int *used = calloc((size_t)n_logs + 1, sizeof *used);
		for (size_t k = 0; used && k < nc; k++)
			used[cells[k].log] += cells[k].included;
		if (!used)
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		else if (!same_cells_used(g->sel, used, n_logs))
			rc = refuse(err, sel, check, "validation_logs' cells_used are not the cells the rule uses of each");
		free(used);
	}
	for (size_t k = 0; !rc && k < nc; k++) {
		const struct sb_json *c = cv->items[k];
		const struct sb_fz_cell *f = &cells[k];
		const struct sb_json *inc = sb_json_get(c, "included");
		int ok = same_str(sb_json_get(c, "cell_id"), f->vc->cell_id) && same_int(sb_json_get(c, "log"), f->log) &&
		         inc && inc->type == SB_JSON_BOOL && inc->boolean == f->included;
		const struct sb_json *why = sb_json_get(c, "reason");
		if (ok && f->included)
			ok = same_int(sb_json_get(c, "selected_epoch"), f->epoch) &&
			     same_num(sb_json_get(c, "val_accuracy"), f->acc) && why && why->type == SB_JSON_NULL;
		else if (ok) /* its reason names no path, so it reads the same wherever the logs are */
			ok = same_reason(g->sel, why, f->reason);
		if (!ok && f->included)
			rc = refuse(err, sel, check,
			            "cells[%zu] is not what the rule gives on its logs: cell %s of log %d, included, "
			            "epoch %lld, validation accuracy %.17g",
			            k, f->vc->cell_id, f->log, (long long)f->epoch, f->acc);
		else if (!ok)
			rc = refuse(err, sel, check,
			            "cells[%zu] is not what the rule gives on its logs: cell %s of log %d, excluded (%s)", k,
			            f->vc->cell_id, f->log, f->reason);
	}
	/* and every member of each, as sb-freeze writes it (task, method, seed, tier, arch, epochs;
	 * nothing more), and the rule's competing ratios */
	if (!rc) {
		struct sb_jw dj;
		long at = -1;
		sb_jw_init(&dj, NULL);
		sb_jw_arr(&dj);
		for (size_t k = 0; k < nc; k++)
			sb_fz_topk_cell_write(&dj, &cells[k]);
		sb_jw_arr_end(&dj);
		if (dj.oom)
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		else if (!same_cells(g->sel, &dj, &at))
			rc = refuse(err, sel, check,
			            "cells[%ld] is not what the rule gives on its logs: cell %s of log %d, %s %s seed %lld, "
			            "tier %s, arch %s, %lld epochs",
			            at, at >= 0 ? cells[at].vc->cell_id : "-", at >= 0 ? cells[at].log : -1,
			            at >= 0 ? cells[at].vc->task : "-", at >= 0 ? cells[at].vc->method : "-",
			            at >= 0 ? (long long)cells[at].vc->seed : -1LL, at >= 0 ? cells[at].vc->tier : "-",
			            at >= 0 ? cells[at].vc->arch : "-", at >= 0 ? (long long)cells[at].vc->epochs : -1LL);
		sb_jw_free(&dj);
	}
	const struct sb_json *rm = sb_json_get(rule, "methods");
	int methods_ok = rm && rm->type == SB_JSON_ARRAY && rm->n == 3;
	for (size_t i = 0; methods_ok && i < 3; i++)
		methods_ok = same_str(rm->items[i], sb_topk_methods[i]);
	if (!rc && !methods_ok)
		rc = refuse(err, sel, check, "the rule's methods are not the top-k ratios it compares (%s, %s, %s)",
		            sb_topk_methods[0], sb_topk_methods[1], sb_topk_methods[2]);
	/* every candidate (task, ratio) with its mean, seeds and eligibility, and the tasks left
	 * unselected with their reason */
	const struct sb_json *av2 = sb_json_get(g->sel, "all_topk_validation");
	if (!rc && (!av2 || av2->type != SB_JSON_ARRAY || av2->n != picked.n_cands))
		rc = refuse(err, sel, check, "all_topk_validation lists %zu candidates; the rule on its logs has %zu",
		            av2 && av2->type == SB_JSON_ARRAY ? av2->n : 0, picked.n_cands);
	for (size_t i = 0; !rc && i < picked.n_cands; i++) {
		const struct sb_sel_cand *cd = &picked.cands[i];
		const struct sb_json *e = av2->items[i], *el = sb_json_get(e, "eligible");
		int ok = same_str(sb_json_get(e, "task"), cd->task) && same_str(sb_json_get(e, "method"), cd->method) &&
		         same_mean_seeds(e, cd) && el && el->type == SB_JSON_BOOL && el->boolean == cd->eligible;
		if (!ok)
			rc = refuse(err, sel, check,
			            "all_topk_validation[%zu] is not what the rule gives on its logs: %s %s, mean %.17g over "
			            "%d seeds",
			            i, cd->task, cd->method, cd->val_accuracy, cd->n_seeds);
	}
	const struct sb_json *uv = sb_json_get(g->sel, "unselected");
	size_t n_uns = 0;
	for (size_t t = 0; !rc && t < picked.n_tasks; t++) {
		if (picked.tasks[t].chosen >= 0)
			continue;
		const struct sb_json *e = uv && uv->type == SB_JSON_ARRAY && n_uns < uv->n ? uv->items[n_uns] : NULL;
		n_uns++;
		if (!same_str(sb_json_get(e, "task"), picked.tasks[t].task) ||
		    !same_str(sb_json_get(e, "reason"), picked.tasks[t].reason))
			rc = refuse(err, sel, check, "task %s: unselected by the rule on its logs (%s), not as 'unselected' says",
			            picked.tasks[t].task, picked.tasks[t].reason);
	}
	if (!rc && (!uv || uv->type != SB_JSON_ARRAY || uv->n != n_uns))
		rc = refuse(err, sel, check, "'unselected' names %zu task(s); the rule on its logs leaves %zu",
		            uv && uv->type == SB_JSON_ARRAY ? uv->n : 0, n_uns);
	/* the chosen ratio of every task */
	const struct sb_json *sv = sb_json_get(g->sel, "selected");
	size_t n_chosen = 0;
	for (size_t t = 0; !rc && t < picked.n_tasks; t++) {
		if (picked.tasks[t].chosen < 0)
			continue;
		n_chosen++;
		const struct sb_sel_cand *cd = &picked.cands[picked.tasks[t].chosen];
		const struct sb_json *e = sb_json_get(sv, cd->task);
		int ok = same_str(sb_json_get(e, "topk_method"), cd->method) && same_mean_seeds(e, cd);
		if (!ok)
			rc = refuse(err, sel, check,
			            "task %s: the rule on its logs chooses %s (mean validation accuracy %.17g over %d "
			            "seeds), not what 'selected' says",
			            cd->task, cd->method, cd->val_accuracy, cd->n_seeds);
	}
	if (!rc && (!sv || sv->type != SB_JSON_OBJECT || sv->n != n_chosen))
		rc = refuse(err, sel, check, "'selected' names %zu task(s); the rule on its logs chooses %zu",
		            sv && sv->type == SB_JSON_OBJECT ? sv->n : 0, n_chosen);
	/* the test plan: PROTOCOL A6's methods plus the chosen ratio, for the chosen ratio's seeds */
	const struct sb_json *tp = sb_json_get(g->sel, "test_plan"), *tm = sb_json_get(g->sel, "test_plan_missing");
	size_t at = 0, at_missing = 0;
	for (size_t t = 0; !rc && t < picked.n_tasks; t++) {
		if (picked.tasks[t].chosen < 0)
			continue;
		const struct sb_sel_cand *cd = &picked.cands[picked.tasks[t].chosen];
		for (int m = 0; !rc && m < 5; m++) {
			const char *method = m < 4 ? sb_test_methods[m] : cd->method;
			for (int s = 0; !rc && s < cd->n_seeds; s++) {
				const struct sb_val_epoch *full;
				const struct sb_fz_cell *hit = sb_fz_plan_cell(cells, nc, cd->task, method, cd->seeds[s], &full);
				if (!hit || !full) {
					const struct sb_json *e = tm && tm->type == SB_JSON_ARRAY && at_missing < tm->n
					                              ? tm->items[at_missing]
					                              : NULL;
					at_missing++;
					if (!(same_str(sb_json_get(e, "task"), cd->task) &&
					      same_str(sb_json_get(e, "method"), method) &&
					      same_int(sb_json_get(e, "seed"), cd->seeds[s])))
						rc = refuse(err, sel, check,
						            "test_plan_missing[%zu] is not what the rule gives on its logs: %s %s "
						            "seed %lld",
						            at_missing - 1, cd->task, method, (long long)cd->seeds[s]);
					continue;
				}
				const struct sb_json *e = tp && tp->type == SB_JSON_ARRAY && at < tp->n ? tp->items[at] : NULL;
				at++;
				if (!(same_str(sb_json_get(e, "task"), cd->task) && same_str(sb_json_get(e, "method"), method) &&
				      same_int(sb_json_get(e, "seed"), cd->seeds[s]) &&
				      same_str(sb_json_get(e, "cell_id"), hit->vc->cell_id) &&
				      same_int(sb_json_get(e, "epochs"), hit->vc->epochs) &&
				      same_str(sb_json_get(e, "checkpoint_sha256"), full->checkpoint_sha256)))
					rc = refuse(err, sel, check,
					            "test_plan[%zu] is not what the rule gives on its logs: %s %s seed %lld, "
					            "cell %s",
					            at - 1, cd->task, method, (long long)cd->seeds[s], hit->vc->cell_id);
			}
		}
	}
	if (!rc && (!tp || tp->type != SB_JSON_ARRAY || tp->n != at))
		rc = refuse(err, sel, check, "test_plan holds %zu cells; the rule on its logs plans %zu",
		            tp && tp->type == SB_JSON_ARRAY ? tp->n : 0, at);
	if (!rc && (!tm || tm->type != SB_JSON_ARRAY || tm->n != at_missing))
		rc = refuse(err, sel, check, "test_plan_missing holds %zu cells; the rule on its logs misses %zu",
		            tm && tm->type == SB_JSON_ARRAY ? tm->n : 0, at_missing);
	sb_selection_free(&picked);
	free(cells);
	free_logs(logs, n_read);
	return rc;
}

/* Validation logs under a RUNS_DIR that the selection does not list were not seen by the
 * freeze (a seed left out of it, or a block sharing the directory): said on stderr, once per
 * RUNS_DIR, with the first of them. Reads names only. */
static void warn_unlisted(const struct sb_guarded *g, const char *runs_dir)
{
	const struct sb_json *lv = sb_json_get(g->sel, "validation_logs");
	size_t n = lv ? lv->n : 0, unlisted = 0;
	char **listed = calloc(n + 1, sizeof *listed), first[4400] = "";
	for (size_t i = 0; listed && i < n; i++) {
		const char *rel = sb_json_str(sb_json_get(lv->items[i], "path"), "");
		char *p = rel[0] == '/' ? strdup(rel) : sb_path_join(g->sel_dir, rel);
		listed[i] = p ? realpath(p, NULL) : NULL;
		free(p);
	}
	DIR *dir = listed ? opendir(runs_dir) : NULL;
	struct dirent *de;
	while (dir && (de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		char log[4400];
		snprintf(log, sizeof log, "%s/%s/val.ndjson", runs_dir, de->d_name);
		char *real = realpath(log, NULL);
		if (!real)
			continue;
		int found = 0;
		for (size_t i = 0; i < n && !found; i++)
			found = listed[i] && !strcmp(listed[i], real);
		if (!found && !unlisted++)
			snprintf(first, sizeof first, "%s", log);
		free(real);
	}
	if (dir)
		closedir(dir);
	for (size_t i = 0; listed && i < n; i++)
		free(listed[i]);
	free(listed);
	if (unlisted)
		sb_cli_warn("%s: %zu validation log(s) the selection does not list, so the freeze did not see them "
		            "(the first: %s)",
		            runs_dir, unlisted, first);
}

/* A selection of rule m3_confirmation (or one carrying its status or switch map):
 * freeze-status, then switch-map-hash. Reads the selection and the switch map only. */
static int m3_checks(const struct sb_guarded *g, const char *sel, struct sb_err *err)
{
	const struct sb_json *st = sb_json_get(g->sel, "status"), *sm = sb_json_get(g->sel, "switch_map");
	const char *rule = sb_json_str(sb_json_get(sb_json_get(g->sel, "rule"), "name"), "");
	if (strcmp(rule, "m3_confirmation") && !st && !sm)
		return 0;
	const char *status = sb_json_str(st, NULL);
	if (!status || strcmp(status, SB_M3_AUTHORIZED))
		return refuse(err, sel, "freeze-status",
		              "the selection's status is %s, not %s: the confirmation grid was not frozen complete and "
		              "matching its switch map (its status_reasons say why)",
		              status ? status : "missing", SB_M3_AUTHORIZED);
	const char *path = sb_json_str(sb_json_get(sm, "path"), NULL),
	           *hash = sb_json_str(sb_json_get(sm, "sha256"), NULL);
	if (!path || !hash || !sb_is_sha256_hex(hash))
		return refuse(err, sel, "switch-map-hash", "the selection names no switch map {path, sha256}");
	char *p = sb_guard_resolve(g, path), hex[SB_SHA256_HEX];
	if (!p)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	struct sb_err e2 = {0};
	int rc = 0;
	struct stat mst; /* a FIFO would block the hash */
	if (stat(p, &mst) == 0 && !S_ISREG(mst.st_mode))
		rc = refuse(err, p, "switch-map-hash", "the switch map the selection froze is not a regular file");
	else if (sb_sha256_file(p, hex, NULL, &e2))
		rc = refuse(err, p, "switch-map-hash", "the switch map the selection froze cannot be read: %s", e2.msg);
	else if (strcmp(hex, hash))
		rc = refuse(err, p, "switch-map-hash",
		            "the switch map now hashes to %s, the selection froze %s: it changed after the freeze", hex,
		            hash);
	free(p);
	return rc;
}

/* The test plan, resolved against the RUNS_DIRs and checked: no dataset is touched. */
/* The SHA-256 of cell.json that the validation log of CELL_ID recorded when it was evaluated
 * (sb-eval's run.meta lists it among its inputs; the log itself is pinned by the guard's
 * log-hash), copied to want; 0 when found, -1 when the log records none (a log of another
 * origin), else an error code. A log of several runs (sb-eval's stdout for RUN_DIR...) lists
 * one cell.json per run: the one in a directory named CELL_ID is this cell's; a log of this
 * cell alone may name its one cell.json by any path. */
static int logged_cell_sha(const struct sb_guarded *g, const char *cell_id, char want[SB_SHA256_HEX],
                           struct sb_err *err)
{
	const struct sb_json *cells = sb_json_get(g->sel, "cells"), *logs = sb_json_get(g->sel, "validation_logs");
	int64_t li = -1, l2;
	for (size_t i = 0; cells && cells->type == SB_JSON_ARRAY && i < cells->n && li < 0; i++)
		if (same_str(sb_json_get(cells->items[i], "cell_id"), cell_id))
			sb_json_int64(sb_json_get(cells->items[i], "log"), &li);
	if (li < 0 || !logs || logs->type != SB_JSON_ARRAY || (size_t)li >= logs->n)
		return -1;
	size_t n_cells_of_log = 0; /* the cells the selection found in this log */
	for (size_t i = 0; i < cells->n; i++)
		n_cells_of_log += !sb_json_int64(sb_json_get(cells->items[i], "log"), &l2) && l2 == li;
	char *path = sb_guard_resolve(g, sb_json_str(sb_json_get(logs->items[li], "path"), ""));
	if (!path)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	struct sb_ndjson_reader *rd = NULL;
	struct sb_json *meta = NULL;
	int rc = sb_ndjson_open(path, &rd, err);
	if (!rc)
		rc = sb_ndjson_next(rd, &meta, err);
	sb_ndjson_close(rd);
	free(path);
	if (rc)
		return rc;
	const struct sb_json *in = meta && same_str(sb_json_get(meta, "kind"), "run.meta") ? sb_json_get(meta, "inputs")
	                                                                                    : NULL;
	int found = -1;
	size_t n_cj = 0, idl = strlen(cell_id);
	const char *only = NULL;
	for (size_t i = 0; in && in->type == SB_JSON_ARRAY && i < in->n && found; i++) {
		const char *ip = sb_json_str(sb_json_get(in->items[i], "path"), "");
		const char *sha = sb_json_str(sb_json_get(in->items[i], "sha256"), "");
		size_t l = strlen(ip);
		if (l >= 9 && !strcmp(ip + l - 9, "cell.json") && (l == 9 || ip[l - 10] == '/') &&
		    strlen(sha) == SB_SHA256_HEX - 1) {
			n_cj++;
			only = sha;
			/* DIR/CELL_ID/cell.json (or CELL_ID/cell.json) */
			if (l >= idl + 10 && !strncmp(ip + l - 10 - idl, cell_id, idl) &&
			    (l == idl + 10 || ip[l - 11 - idl] == '/')) {
				memcpy(want, sha, SB_SHA256_HEX);
				found = 0;
			}
		}
	}
	if (found && n_cj == 1 && n_cells_of_log == 1) {
		memcpy(want, only, SB_SHA256_HEX);
		found = 0;
	}
	sb_json_free(meta);
	return found;
}

static int load_plan(const struct sb_guarded *g, char **runs_dirs, int n_runs, struct plan **out, size_t *n_out,
                     struct sb_err *err)
{
	const struct sb_json *sel = g->sel;
	const struct sb_json *tp = sb_json_get(sel, "test_plan");
	if (!tp || tp->type != SB_JSON_ARRAY || tp->n == 0)
		return SB_ERR(err, SB_EDATA, "the selection has an empty test plan");
	struct plan *p = calloc(tp->n, sizeof *p);
	if (!p)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	*out = p;
	*n_out = tp->n;
	for (size_t i = 0; i < tp->n; i++) {
		const struct sb_json *e = tp->items[i];
		struct plan *q = &p[i];
		if (sb_json_req_str(e, "task", &q->task, err) || sb_json_req_str(e, "method", &q->method, err) ||
		    sb_json_req_str(e, "cell_id", &q->cell_id, err) ||
		    sb_json_req_str(e, "checkpoint_sha256", &q->sha, err) ||
		    sb_json_req_int(e, "seed", &q->seed, err) || sb_json_req_int(e, "epochs", &q->epochs, err)) {
			sb_err_prefix(err, "test_plan[%zu]", i);
			return err->code;
		}
		if (strchr(q->cell_id, '/') || strcmp(q->cell_id, "..") == 0 || strchr(q->task, '/') || q->epochs < 1 ||
		    q->epochs > 999999)
			return SB_ERR(err, SB_EDATA, "test_plan[%zu]: bad cell_id, task or epochs", i);
		/* the first RUNS_DIR that holds the cell (the first when none does) */
		for (int r = 0; r < n_runs; r++) {
			free(q->run_dir);
			q->run_dir = sb_path_join(runs_dirs[r], q->cell_id);
			if (!q->run_dir || sb_file_exists(q->run_dir))
				break;
		}
		if (!q->run_dir || !sb_file_exists(q->run_dir)) {
			free(q->run_dir);
			q->run_dir = sb_path_join(runs_dirs[0], q->cell_id);
		}
		char ck[32];
		snprintf(ck, sizeof ck, "epoch-%03lld.safetensors", (long long)q->epochs);
		q->checkpoint = q->run_dir ? sb_path_join(q->run_dir, ck) : NULL;
		char *cj = q->run_dir ? sb_path_join(q->run_dir, "cell.json") : NULL;
		if (!q->checkpoint || !cj) {
			free(cj);
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		}
		char *buf;
		size_t len;
		struct sb_err e2 = {0};
		struct stat st; /* a FIFO would block the read */
		if (stat(cj, &st) == 0 && !S_ISREG(st.st_mode)) {
			int rc = SB_ERR(err, SB_EIO, "%s: not a regular file", cj);
			free(cj);
			return rc;
		}
		if (sb_read_file(cj, &buf, &len, 1 << 20, &e2)) {
			free(cj);
			return refuse(err, q->run_dir, "checkpoint-present",
			              "the run directory of a planned cell is missing: %s", e2.msg);
		}
		int rc = sb_json_parse(buf, len, &q->cell, &e2);
		free(buf);
		if (rc) {
			rc = SB_ERR(err, SB_EDATA, "%s: %s", cj, e2.msg);
			free(cj);
			return rc;
		}
		const char *id = sb_json_str(sb_json_get(q->cell, "cell_id"), "");
		const char *task = sb_json_str(sb_json_get(q->cell, "task"), "");
		const char *method = sb_json_str(sb_json_get(q->cell, "method"), "");
		int64_t seed = -1;
		sb_json_int64(sb_json_get(q->cell, "seed"), &seed);
		if (strcmp(id, q->cell_id) || strcmp(task, q->task) || strcmp(method, q->method) || seed != q->seed) {
			rc = SB_ERR(err, SB_EDATA,
			            "%s: cell_id, task, method or seed differ from the selection's test plan", cj);
			free(cj);
			return rc;
		}
		/* an edited cell.json (its fields no longer hash to its cell_id) is bad input, refused
		 * here, before the read counts, not when the model is built from it */
		if ((rc = sb_evalrun_cell_check(q->cell, cj, err))) {
			free(cj);
			return rc;
		}
		/* and so is one edited in a field the id does not cover (classes, seq_len, ...: found
		 * only when the model is built, after the read counts): it must be the cell.json its
		 * validation log was evaluated with */
		char want[SB_SHA256_HEX], have[SB_SHA256_HEX];
		rc = logged_cell_sha(g, q->cell_id, want, err);
		if (rc == 0 && (rc = sb_sha256_file(cj, have, NULL, err)) == 0 && strcmp(have, want))
			rc = SB_ERR(err, SB_EDATA,
			            "%s: SHA-256 %.16s... is not the cell.json its validation log was evaluated with "
			            "(%.16s...): edited since; nothing was read",
			            cj, have, want);
		if (rc > 0) {
			free(cj);
			return rc;
		}
		q->cell_path = cj;
		if (!sb_file_exists(q->checkpoint))
			return refuse(err, q->checkpoint, "checkpoint-present",
			              "the full-budget checkpoint of a planned cell is missing");
		/* a FIFO would block the hash */
		if (stat(q->checkpoint, &st) == 0 && !S_ISREG(st.st_mode))
			return refuse(err, q->checkpoint, "checkpoint-present",
			              "the full-budget checkpoint of a planned cell is not a regular file");
		char hex[SB_SHA256_HEX];
		if (sb_sha256_file(q->checkpoint, hex, NULL, err))
			return err->code;
		if (strcmp(hex, q->sha) != 0)
			return refuse(err, q->checkpoint, "checkpoint-hash",
			              "the checkpoint hashes to %s, the validation log recorded %s at the freeze", hex,
			              q->sha);
	}
	return 0;
}

static void free_plan(struct plan *p, size_t n)
{
	for (size_t i = 0; p && i < n; i++) {
		free(p[i].run_dir);
		free(p[i].checkpoint);
		free(p[i].cell_path);
		sb_json_free(p[i].cell);
	}
	free(p);
}

/* A test.read record for the ledger (without the trailing newline). */
static void ledger_record(struct sb_jw *w, const char *status, int read, const struct opts *o, const char *sha,
                          const char *output, const char *output_sha, const char *error)
{
	char t[32], cwd[4096];
	double now;
	sb_time_rfc3339(t, &now);
	if (!getcwd(cwd, sizeof cwd))
		strcpy(cwd, "?");
	sb_jw_reset(w);
	sb_jw_record(w, "test.read", 1);
	sb_jw_kstr(w, "status", status);
	sb_jw_kint(w, "read", read);
	sb_jw_kstr(w, "time", t);
	sb_jw_kf64(w, "time_unix_s", now);
	sb_jw_kstr(w, "program", sb_prog);
	sb_jw_kstr(w, "version", SB_VERSION);
	sb_jw_key(w, "argv");
	sb_jw_arr(w);
	for (int i = 0; i < sb_cli_argc; i++)
		sb_jw_str(w, sb_cli_argv[i]);
	sb_jw_arr_end(w);
	sb_jw_kstr(w, "cwd", cwd);
	sb_jw_kstr(w, "selection", o->sel);
	sb_jw_kstr(w, "selection_sha256", sha);
	sb_jw_kstr(w, "out_dir", o->out_dir);
	if (o->reread)
		sb_jw_kstr(w, "reread_reason", o->reread);
	else
		sb_jw_knull(w, "reread_reason");
	if (output) {
		sb_jw_kstr(w, "output", output);
		sb_jw_kstr(w, "output_sha256", output_sha);
	}
	if (error)
		sb_jw_kstr(w, "error", error);
	sb_jw_obj_end(w);
}

static char *test_file_path(const char *data_dir, const char *task)
{
	char *tdir = sb_path_join(data_dir, task);
	char *tpath = tdir ? sb_path_join(tdir, "test.safetensors") : NULL;
	free(tdir);
	return tpath;
}

/* Before the read is recorded: each task's test file exists and can be opened for reading
 * (its contents are read only by the read itself), and its sidecar, if any, is well formed.
 * SB_EIO (SB_EDATA for a sidecar) naming the first that is not. */
static int check_test_files(const struct opts *o, const struct plan *plan, size_t n_plan, struct sb_err *err)
{
	for (size_t i = 0; i < n_plan; i++) {
		char *tpath = test_file_path(o->data_dir, plan[i].task);
		if (!tpath)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		struct stat st;
		int rc = 0;
		if (stat(tpath, &st) != 0 || access(tpath, R_OK) != 0)
			rc = SB_ERR(err, SB_EIO, "%s: %s (the test file of task '%s'; -d names the data directory, now "
			                         "'%s'); nothing was read",
			            tpath, strerror(errno), plan[i].task, o->data_dir);
		else if (!S_ISREG(st.st_mode))
			rc = SB_ERR(err, SB_EIO, "%s: not a regular file; nothing was read", tpath);
		/* its sidecar, when there is one, must be one the read will accept (a sha256sum line
		 * naming test.safetensors; not, say, `sha256sum data/T/test.safetensors` run from the
		 * data directory's parent): the read refuses any other after it counts. Only the
		 * sidecar is read, never the test file. */
		char *side = rc ? NULL : malloc(strlen(tpath) + 8);
		if (side) {
			sprintf(side, "%s.sha256", tpath);
			char hex[SB_SHA256_HEX];
			struct sb_err e2 = {0};
			struct stat sst; /* a FIFO would block the read */
			if (stat(side, &sst) == 0 && !S_ISREG(sst.st_mode))
				rc = SB_ERR(err, SB_EIO,
				            "%s: not a regular file (the SHA-256 sidecar of task '%s''s test file, which the "
				            "read checks); nothing was read",
				            side, plan[i].task);
			else if (sb_file_exists(side) && sb_sidecar_read(tpath, hex, &e2))
				rc = SB_ERR(err, e2.code ? e2.code : SB_EDATA,
				            "%s (the SHA-256 sidecar of task '%s''s test file, which the read checks); "
				            "nothing was read",
				            e2.msg, plan[i].task);
			free(side);
		} else if (!rc)
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		free(tpath);
		if (rc)
			return rc;
	}
	return 0;
}

/* Before the read is recorded: OUT_DIR and OUT_DIR/bits made and writable, so that an -o under
 * a file or in a read-only place is found while nothing counts. SB_EIO naming the directory. */
static int out_dir_ready(const struct opts *o, struct sb_err *err)
{
	char *bits_dir = sb_path_join(o->out_dir, "bits");
	if (!bits_dir)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	const char *bad = NULL;
	int rc = sb_mkdir_p(bits_dir, err);
	if (!rc && access(o->out_dir, W_OK | X_OK) != 0)
		bad = o->out_dir;
	else if (!rc && access(bits_dir, W_OK | X_OK) != 0)
		bad = bits_dir;
	if (bad)
		rc = SB_ERR(err, SB_EIO, "%s: %s", bad, strerror(errno));
	if (rc)
		snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
		         " (the output directory, -o %s); nothing was read", o->out_dir);
	free(bits_dir);
	return rc;
}

/* One sb-test at a time per directory of selections: the single-read check and the "started"
 * record are then one step (two runs started together both found no earlier read, and both
 * read). An exclusive flock on the ledger's directory, held until the process ends; a second
 * run waits for it, then finds the first one's read in the ledger. */
static int lock_ledger_dir(const char *ledger, struct sb_err *err)
{
	char *dir = sb_path_dirname(ledger);
	if (!dir)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = 0, fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		rc = SB_ERRNO(err, dir);
	else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno != EWOULDBLOCK) {
			/* no flock here (NFS emulates it with byte-range locks, which a directory opened
			 * read-only cannot take): the read goes on, unserialised, and says so */
			sb_cli_warn("%s: cannot lock the directory (%s): sb-test runs started together on its "
			            "selections are not serialised",
			            dir, strerror(errno));
		} else {
			sb_progress(1, "waiting for another sb-test reading a selection in %s", dir);
			while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR)
				;
			if (rc)
				rc = SB_ERRNO(err, dir);
		}
	}
	/* fd stays open: the lock is released when the process ends */
	free(dir);
	return rc;
}

/* Check single-read, under the lock of the selection's directory (held from here to the end):
 * the ledger beside the selection file itself (a symbolic link is followed to it), the other
 * ledgers of its directory, where the same selection read under another name (a link, a
 * copy) left its reads, and the ledger beside a link (where sb-test wrote before it followed
 * links). *ledger: the ledger to append to (newly allocated); *n_reads: the reads counted. */
static int single_read(const struct opts *o, const struct sb_guarded *g, char **ledger, int *n_reads,
                       struct sb_err *err)
{
	char *real_sel = realpath(o->sel, NULL);
	*ledger = sb_guard_ledger_path(real_sel ? real_sel : o->sel);
	free(real_sel);
	if (!*ledger)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int n_same, n_other = 0, rc;
	char *first = NULL, *other = NULL;
	SB_TRY(lock_ledger_dir(*ledger, err));
	SB_TRY(sb_guard_reads(*ledger, g->sha256, n_reads, &n_same, &first, err));
	rc = sb_guard_reads_beside(*ledger, g->sha256, &n_other, &other, err);
	char *link_ledger = rc ? NULL : sb_guard_ledger_path(o->sel);
	/* the ledger beside the path as given is the one beside the real file when they are one
	 * file: a relative -s (the README's "-s selection.json", the pipelines' "-s out/...") names
	 * the same ledger by another string, whose reads were counted twice (the second read was
	 * numbered 3, and refused as read "under another name") */
	struct stat la, lb;
	int same_ledger = link_ledger && (!strcmp(link_ledger, *ledger) ||
					  (stat(link_ledger, &la) == 0 && stat(*ledger, &lb) == 0 &&
					   la.st_dev == lb.st_dev && la.st_ino == lb.st_ino));
	if (link_ledger && !same_ledger && !other) {
		int nl = 0, sl = 0;
		rc = sb_guard_reads(link_ledger, g->sha256, &nl, &sl, &other, err);
		n_other += sl;
	}
	free(link_ledger);
	*n_reads += n_other;
	if (!rc && n_other > 0 && !o->reread)
		rc = refuse(err, o->sel, "single-read",
		            "this selection was already read under another name in its directory (%d time(s); %s); "
		            "pass --reread REASON to read it again",
		            n_other, other ? other : "?");
	else if (!rc && *n_reads > 0 && !o->reread)
		rc = refuse(err, o->sel, "single-read",
		            n_same > 0 ? "this selection was already read (%d time(s); first %s); pass --reread REASON to "
		                         "read it again"
		                       : "a selection at this path was already read (%d time(s); first %s) and then "
		                         "replaced with --force; pass --reread REASON to read again",
		            n_same > 0 ? n_same : *n_reads, first ? first : "?");
	free(first);
	free(other);
	return rc;
}

/* The read itself: open the test files, evaluate, write. Returns 0 or an error. */
static int do_read(const struct opts *o, const struct sb_guarded *g, struct plan *plan, size_t n_plan, int read_no,
                   const char *out_path, char out_sha[SB_SHA256_HEX], struct sb_err *err, struct sb_err *std_err)
{
	char *bits_dir = sb_path_join(o->out_dir, "bits");
	if (!bits_dir)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	struct sb_atomic a;
	int rc = sb_mkdir_p(bits_dir, err);
	if (!rc)
		rc = sb_atomic_open(&a, out_path, err);
	if (rc) {
		free(bits_dir);
		return rc;
	}
	/* stdout gets its copy only once OUT_DIR/test.ndjson is committed: a stdout that fails
	 * (/dev/full, a closed pipe: `| head`) must not lose a read that counts already */
	struct sb_jw file, std;
	sb_jw_init(&file, a.f);
	char *sbuf = NULL;
	size_t slen = 0;
	FILE *smem = open_memstream(&sbuf, &slen);
	if (!smem) {
		sb_atomic_abort(&a);
		free(bits_dir);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	sb_jw_init(&std, smem);
	/* the selection as the guard hashed it (not hashed again: what was checked is what is cited) */
	struct sb_input in = {.path = o->sel};
	memcpy(in.sha256, g->file_sha256, SB_SHA256_HEX);
	struct stat sst;
	if (stat(o->sel, &sst) == 0)
		in.size_bytes = (uint64_t)sst.st_size;
	struct sb_run_meta meta = {.device = o->device, .threads = (int)o->threads, .inputs = &in, .n_inputs = 1};
	/* one run.meta, the same bytes in the file and on stdout */
	if ((rc = sb_record_run_meta(&std, &meta, err)))
		goto out;
	if (fflush(smem) != 0) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto out;
	}
	if (slen && fwrite(sbuf, 1, slen, a.f) != slen) {
		rc = SB_ERRNO(err, out_path);
		goto out;
	}

	/* the distinct tasks of the plan, in plan order; their test files opened one at a time */
	char started[32];
	sb_time_rfc3339(started, NULL);
	struct sb_jw rec;
	sb_jw_init(&rec, NULL);
	struct sb_jw files; /* the test.read record's test_files, filled as the files are read */
	sb_jw_init(&files, NULL);
	/* the test.cell lines, kept until every cell is done (then written after test.read) */
	char *cbuf = NULL;
	size_t clen = 0;
	FILE *cmem = open_memstream(&cbuf, &clen);
	struct sb_jw cells;
	sb_jw_init(&cells, cmem);
	if (!cmem)
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	sb_jw_arr(&files);
	for (size_t i = 0; i < n_plan && !rc; i++) {
		int first = 1;
		for (size_t j = 0; j < i; j++)
			if (strcmp(plan[j].task, plan[i].task) == 0)
				first = 0;
		if (!first)
			continue;
		char *tpath = test_file_path(o->data_dir, plan[i].task);
		if (!tpath) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			break;
		}
		sb_progress(1, "reading %s", tpath);
		struct sb_dataset ds;
		rc = sb_dataset_read(tpath, 1, &ds, err);
		if (!rc && strcmp(ds.split, "test") != 0)
			rc = SB_ERR(err, SB_EDATA, "%s: metadata says split=%s, not test", tpath, ds.split);
		if (!rc && strcmp(ds.task, plan[i].task) != 0)
			rc =
			    SB_ERR(err, SB_EDATA, "%s: a dataset of task '%s', not '%s'", tpath, ds.task, plan[i].task);
		if (rc) {
			free(tpath);
			break;
		}
		sb_jw_obj(&files);
		sb_jw_kstr(&files, "task", ds.task);
		sb_jw_kstr(&files, "path", tpath);
		sb_jw_kstr(&files, "sha256", ds.sha256);
		sb_jw_obj_end(&files);
		for (size_t j = i; j < n_plan && !rc; j++) {
			struct plan *q = &plan[j];
			if (strcmp(q->task, plan[i].task) != 0)
				continue;
			uint32_t *idx = NULL;
			int64_t n = 0;
			struct sb_evalrun *er = NULL;
			struct sb_evalrun_result res;
			uint8_t *bits = NULL;
			struct sb_evalrun_opts eo = {
			    .device = o->device, .threads = (int)o->threads, .cell_path = q->cell_path};
			if ((rc = sb_split_test(&ds, (uint64_t)q->seed, &idx, &n, err)))
				break;
			bits = calloc((size_t)(n + 7) / 8 + 1, 1);
			if (!bits)
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			if (!rc)
				rc = sb_evalrun_open(q->cell, &ds, &eo, &er, err);
			if (!rc)
				rc = sb_evalrun_checkpoint(er, q->checkpoint, q->sha, (int)q->epochs, idx, n, &res,
				                           bits, err);
			sb_evalrun_close(er);
			free(idx);
			char bname[300], bhex[SB_SHA256_HEX];
			snprintf(bname, sizeof bname, "bits/%s.bits", q->cell_id);
			char *bpath = sb_path_join(o->out_dir, bname);
			if (!rc)
				rc = bpath ? sb_write_file_atomic(bpath, bits, (size_t)(n + 7) / 8, err)
				           : SB_ERR(err, SB_EINTERNAL, "out of memory");
			if (!rc)
				sb_sha256_buf(bits, (size_t)(n + 7) / 8, bhex);
			free(bpath);
			free(bits);
			if (rc)
				break;
			sb_jw_record(&cells, "test.cell", 1);
			sb_jw_kstr(&cells, "cell_id", q->cell_id);
			sb_jw_kstr(&cells, "task", q->task);
			sb_jw_kstr(&cells, "method", q->method);
			sb_jw_kint(&cells, "seed", q->seed);
			sb_jw_kstr(&cells, "tier", sb_json_str(sb_json_get(q->cell, "tier"), "compact"));
			sb_jw_kstr(&cells, "arch", sb_json_str(sb_json_get(q->cell, "arch"), "plain"));
			sb_jw_kint(&cells, "epochs", q->epochs);
			const struct sb_json *sl = sb_json_get(q->cell, "seq_len");
			if (sl && sl->type == SB_JSON_NUMBER)
				sb_jw_kint(&cells, "seq_len", (int64_t)sl->number);
			else
				sb_jw_knull(&cells, "seq_len");
			sb_jw_kint(&cells, "n_test", n);
			sb_jw_kf64(&cells, "test_accuracy", res.accuracy);
			sb_jw_kf64(&cells, "test_macro_f1", res.macro_f1);
			sb_jw_kf64(&cells, "test_loss", res.loss);
			sb_jw_kf64(&cells, "test_nonzero_ratio", res.attention_density);
			sb_jw_kf64(&cells, "test_attention_entropy", res.attention_entropy);
			sb_jw_kf64(&cells, "test_alpha_mean", res.alpha_mean);
			sb_jw_kf64(&cells, "test_alpha_std", res.alpha_std);
			sb_jw_kstr(&cells, "correct_bits", bname);
			sb_jw_kstr(&cells, "correct_sha256", bhex);
			sb_jw_kstr(&cells, "checkpoint_sha256", q->sha);
			sb_jw_kstr(&cells, "selection_sha256", g->sha256);
			sb_jw_obj_end(&cells);
			if ((rc = sb_jw_line(&cells, err)))
				break;
			sb_progress(0, "%s %s seed %lld: test accuracy %.4f", q->task, q->method, (long long)q->seed,
			            res.accuracy);
		}
		sb_dataset_free(&ds);
		free(tpath);
	}
	sb_jw_arr_end(&files);
	if (!rc) {
		sb_jw_record(&rec, "test.read", 1);
		sb_jw_kstr(&rec, "selection", o->sel);
		sb_jw_kstr(&rec, "selection_sha256", g->sha256);
		sb_jw_kint(&rec, "read", read_no);
		if (o->reread)
			sb_jw_kstr(&rec, "reread_reason", o->reread);
		else
			sb_jw_knull(&rec, "reread_reason");
		sb_jw_kstr(&rec, "started_at", started);
		sb_jw_key(&rec, "test_files");
		sb_jw_raw(&rec, files.buf, files.len);
		sb_jw_obj_end(&rec);
		if (rec.oom || files.oom)
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		if (!rc)
			rc = sb_jw_line(&rec, err);
	}
	if (cmem && fclose(cmem) != 0 && !rc)
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	/* test.read, then the cells: to the file (and, once it is committed, to stdout) */
	const char *parts[3] = {NULL, rec.buf, cbuf};
	size_t lens[3] = {0, rec.len, clen};
	for (int k = 1; k < 3 && !rc; k++)
		if (lens[k] && fwrite(parts[k], 1, lens[k], a.f) != lens[k])
			rc = SB_ERRNO(err, out_path);
	if (!rc)
		rc = sb_atomic_commit(&a, err);
	else
		sb_atomic_abort(&a);
	if (!rc)
		rc = sb_sha256_file(out_path, out_sha, NULL, err);
	if (!rc) {
		/* the read is complete and recorded in OUT_DIR: a stdout error now is reported (exit 4)
		 * but does not make the read a failed one. A closed pipe is an error, not a SIGPIPE. */
		void (*old)(int) = signal(SIGPIPE, SIG_IGN);
		sb_jw_free(&std);
		if (fclose(smem) != 0)
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		smem = NULL;
		parts[0] = sbuf;
		lens[0] = slen;
		for (int k = 0; k < 3 && !rc; k++)
			if (lens[k] && (fwrite(parts[k], 1, lens[k], stdout) != lens[k] || fflush(stdout) != 0)) {
				SB_ERRNO(std_err, "write error: stdout");
				break;
			}
		if (!std_err->code && fflush(stdout) != 0)
			SB_ERRNO(std_err, "write error: stdout");
		signal(SIGPIPE, old);
	}
	free(cbuf);
	sb_jw_free(&rec);
	sb_jw_free(&files);
	sb_jw_free(&cells);
out: /* (after a commit or an abort, sb_atomic_abort does nothing) */
	sb_jw_free(&file);
	sb_jw_free(&std);
	if (smem)
		fclose(smem);
	free(sbuf);
	free(bits_dir);
	sb_atomic_abort(&a);
	return rc;
}

int main(int argc, char **argv)
{
	sb_cli_init("sb-test", argc, argv);
	struct opts o = {.data_dir = "data", .out_dir = "test", .device = "cpu"};
	struct sb_err err = {0};
	enum { O_REREAD = 256, O_DEVICE, O_HELP, O_VERSION };
	static const struct option lo[] = {{"reread", 1, 0, O_REREAD},
	                                   {"device", 1, 0, O_DEVICE},
	                                   {"help", 0, 0, O_HELP},
	                                   {"version", 0, 0, O_VERSION},
	                                   {0, 0, 0, 0}};
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:d:o:j:q", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			o.sel = optarg;
			break;
		case 'd':
			o.data_dir = optarg;
			break;
		case 'o':
			o.out_dir = optarg;
			break;
		case 'j':
			if (sb_parse_int("-j", optarg, 0, 4096, &o.threads, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case 'q':
			sb_quiet = 1;
			break;
		case O_REREAD:
			if (!optarg[strspn(optarg, " \t\n\r\f\v")]) /* blank is no reason either */
				sb_cli_usage_error("--reread needs a non-empty reason");
			o.reread = optarg;
			break;
		case O_DEVICE:
			o.device = optarg;
			if (sb_device_check(optarg, &err))
				sb_cli_usage_error("%s", err.msg);
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
	if (!o.sel)
		sb_cli_usage_error("no selection given (-s selection.json)");
	if (argc - optind < 1)
		sb_cli_usage_error("no RUNS_DIR given");
	o.runs = argv + optind;
	o.n_runs = argc - optind;

	/* 1. the guard: selection, its hash, the validation logs (of every RUNS_DIR); for
	 * rule m3_confirmation, the freeze status and the switch map */
	struct sb_guarded g;
	if (sb_guard_check(o.sel, o.runs[0], &g, &err))
		sb_cli_die(&err);
	for (int r = 1; r < o.n_runs; r++)
		if (sb_guard_check_runs(&g, o.runs[r], &err))
			sb_cli_die(&err);
	if (m3_checks(&g, o.sel, &err) || derive_check(&g, o.sel, &err))
		sb_cli_die(&err);
	for (int r = 0; r < o.n_runs; r++)
		warn_unlisted(&g, o.runs[r]);
	/* 2. one read per selection */
	char *ledger = NULL;
	int n_reads = 0;
	if (single_read(&o, &g, &ledger, &n_reads, &err))
		sb_cli_die(&err);
	char *out_path = sb_path_join(o.out_dir, "test.ndjson");
	if (!out_path) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		sb_cli_die(&err);
	}
	if (sb_file_exists(out_path)) {
		refuse(&err, out_path, "output-fresh",
		       "exists (an earlier test read?); choose another output directory");
		sb_cli_die(&err);
	}
	/* 3. the frozen plan's checkpoints */
	struct plan *plan = NULL;
	size_t n_plan = 0;
	if (load_plan(&g, o.runs, o.n_runs, &plan, &n_plan, &err))
		sb_cli_die(&err);
	/* 4. something to evaluate with, and every test file where it should be: otherwise stop
	 * before the read counts (a typo in --device or -d must not use the read up) */
	if (sb_evalrun_available(o.device, (int)o.threads, &err) || check_test_files(&o, plan, n_plan, &err) ||
	    out_dir_ready(&o, &err))
		sb_cli_die(&err);

	/* (a test hook: the time between the single-read check and the record, made long) */
	const char *hold = getenv("SB_TEST_HOLD_BEFORE_READ_MS");
	if (hold)
		usleep((useconds_t)(atoi(hold) * 1000));
	/* 5. the read: recorded as started before the first test file is opened */
	struct sb_jw lw;
	sb_jw_init(&lw, NULL);
	int read_no = n_reads + 1;
	ledger_record(&lw, "started", read_no, &o, g.sha256, NULL, NULL, NULL);
	if (sb_guard_ledger_append(ledger, lw.buf, lw.len, &err))
		sb_cli_die(&err);
	if (sb_mkdir_p(o.out_dir, &err))
		goto failed;
	char out_sha[SB_SHA256_HEX];
	struct sb_err std_err = {0};
	if (do_read(&o, &g, plan, n_plan, read_no, out_path, out_sha, &err, &std_err))
		goto failed;
	ledger_record(&lw, "completed", read_no, &o, g.sha256, out_path, out_sha, NULL);
	if (sb_guard_ledger_append(ledger, lw.buf, lw.len, &err))
		sb_cli_die(&err);
	if (std_err.code) {
		sb_err_prefix(&std_err, "the test read %d is complete and recorded in %s (SHA-256 %.16s...), but its copy "
		                        "to stdout failed",
		              read_no, out_path, out_sha);
		sb_cli_die(&std_err);
	}
	if (!sb_quiet)
		fprintf(stderr, "sb-test: test read %d of selection %.16s... written to %s (SHA-256 %.16s...)\n",
		        read_no, g.sha256, out_path, out_sha);
	sb_jw_free(&lw);
	free_plan(plan, n_plan);
	free(out_path);
	free(ledger);
	sb_guarded_free(&g);
	return sb_cli_finish(0);
failed : {
	struct sb_err e2 = {0};
	ledger_record(&lw, "failed", read_no, &o, g.sha256, NULL, NULL, err.msg);
	if (sb_guard_ledger_append(ledger, lw.buf, lw.len, &e2))
		sb_cli_warn("could not record the failed read in %s: %s", ledger, e2.msg);
	sb_cli_die(&err);
}
}
