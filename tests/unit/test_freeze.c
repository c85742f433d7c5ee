/* test_freeze — the pieces of the selection freeze: best epoch under patience
 * (PROTOCOL A4), the top-k ratio rule with its tie-break and seed floor
 * (PROTOCOL A6), the canonical-JSON hash (checked against a digest computed
 * with Python's json + hashlib), the indented writer, sealing, relative paths,
 * and the validation-log reader. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../harness.h"
#include "guard.h"
#include "io.h"
#include "select.h"
#include "vallog.h"

static void best_epoch(void)
{
	struct sb_err err = {0};
	int best = -9, run = -9, rc;
	/* each call comes before its check: the argument order of SB_CHECK is unspecified */
	/* monotone: the last epoch */
	double a1[] = {0.1, 0.2, 0.3, 0.4};
	rc = sb_select_best_epoch(a1, 4, 5, &best, &run, &err);
	SB_CHECK(rc == 0 && best == 3 && run == 4, "increasing accuracies: best 3, 4 run (got %d, %d)", best, run);
	/* ties are not improvements: the earliest of the maximum */
	double a2[] = {0.5, 0.7, 0.7, 0.6, 0.7};
	rc = sb_select_best_epoch(a2, 5, 5, &best, &run, &err);
	SB_CHECK(rc == 0 && best == 1 && run == 5, "equal later maxima keep the first (got %d, %d)", best, run);
	/* the stop: 5 epochs without strict improvement end the run before a later maximum */
	double a3[] = {0.5, 0.6, 0.59, 0.6, 0.55, 0.58, 0.6, 0.9};
	rc = sb_select_best_epoch(a3, 8, 5, &best, &run, &err);
	SB_CHECK(rc == 0 && best == 1 && run == 7,
	         "patience 5 stops after epoch 6: best 1, 7 run, the 0.9 of epoch 7 is never seen (got %d, %d)", best,
	         run);
	/* one short of the stop: the later maximum counts */
	double a4[] = {0.5, 0.6, 0.59, 0.6, 0.55, 0.58, 0.9};
	rc = sb_select_best_epoch(a4, 7, 5, &best, &run, &err);
	SB_CHECK(rc == 0 && best == 6 && run == 7, "4 epochs without improvement do not stop (got %d, %d)", best, run);
	/* patience 0: no stopping */
	rc = sb_select_best_epoch(a3, 8, 0, &best, &run, &err);
	SB_CHECK(rc == 0 && best == 7 && run == 8, "patience 0 reads every epoch (got %d, %d)", best, run);
	/* patience 1: stops at the first non-improvement */
	rc = sb_select_best_epoch(a2, 5, 1, &best, &run, &err);
	SB_CHECK(rc == 0 && best == 1 && run == 3, "patience 1 stops at epoch 2 (got %d, %d)", best, run);
	/* NaN never improves, and counts towards the patience */
	double a5[] = {NAN, 0.2, NAN, 0.1};
	rc = sb_select_best_epoch(a5, 4, 5, &best, &run, &err);
	SB_CHECK(rc == 0 && best == 1, "NaN epochs are skipped (got %d)", best);
	double a6[] = {NAN, NAN};
	rc = sb_select_best_epoch(a6, 2, 5, &best, &run, &err);
	SB_CHECK(rc == SB_EDATA, "all NaN is an error (%s)", err.msg);
	rc = sb_select_best_epoch(a1, 0, 5, &best, &run, &err);
	SB_CHECK(rc == SB_EDATA, "no epochs is an error (%s)", err.msg);
	/* zero accuracy is still an epoch (best_acc starts at -1, as the study's loop) */
	double a7[] = {0.0, 0.0};
	rc = sb_select_best_epoch(a7, 2, 5, &best, &run, &err);
	SB_CHECK(rc == 0 && best == 0, "zero accuracy: epoch 0 (got %d)", best);
}

static void rule(void)
{
	struct sb_err err = {0};
	struct sb_selection s;
	/* task a: 0125 and 025 tie exactly (0.75), 05 lower -> 0125 (earlier).
	 * task b: 05 is best but has only 2 seeds (min 3) -> 025.
	 * task c: nothing has 3 seeds -> unselected.
	 * softmax cells are ignored by the rule. */
	struct sb_sel_cell c[] = {
	    {"a", "topk_softmax_025", 0, 0.5},
	    {"a", "topk_softmax_025", 1, 1.0},
	    {"a", "topk_softmax_025", 2, 0.75},
	    {"a", "topk_softmax_0125", 2, 0.75},
	    {"a", "topk_softmax_0125", 0, 0.75},
	    {"a", "topk_softmax_0125", 1, 0.75},
	    {"a", "topk_softmax_05", 0, 0.7},
	    {"a", "topk_softmax_05", 1, 0.7},
	    {"a", "topk_softmax_05", 2, 0.7},
	    {"b", "topk_softmax_025", 0, 0.6},
	    {"b", "topk_softmax_025", 1, 0.6},
	    {"b", "topk_softmax_025", 5, 0.6},
	    {"b", "topk_softmax_05", 0, 0.9},
	    {"b", "topk_softmax_05", 1, 0.9},
	    {"b", "softmax", 0, 1.0},
	    {"c", "topk_softmax_05", 0, 0.9},
	    {"a", "softmax", 0, 1.0},
	};
	int rc = sb_select_topk(c, sizeof c / sizeof *c, sb_topk_methods, 3, 3, &s, &err);
	SB_CHECK(rc == 0 && s.n_tasks == 3, "three tasks (rc %d, %zu, %s)", rc, s.n_tasks, err.msg);
	if (rc || s.n_tasks != 3)
		return;
	SB_CHECK(strcmp(s.tasks[0].task, "a") == 0 && s.tasks[0].chosen >= 0 &&
	             strcmp(s.cands[s.tasks[0].chosen].method, "topk_softmax_0125") == 0,
	         "a tie goes to the earlier ratio (chose %s)",
	         s.tasks[0].chosen >= 0 ? s.cands[s.tasks[0].chosen].method : "none");
	SB_CHECK(s.tasks[1].chosen >= 0 && strcmp(s.cands[s.tasks[1].chosen].method, "topk_softmax_025") == 0,
	         "a better ratio with too few seeds is not eligible (chose %s)",
	         s.tasks[1].chosen >= 0 ? s.cands[s.tasks[1].chosen].method : "none");
	SB_CHECK(s.tasks[2].chosen == -1 && s.tasks[2].reason, "a task without an eligible ratio is unselected (%s)",
	         s.tasks[2].reason ? s.tasks[2].reason : "");
	SB_CHECK(s.n_cands == 6, "candidates: 3 for a, 2 for b, 1 for c (got %zu)", s.n_cands);
	const struct sb_sel_cand *b05 = &s.cands[4];
	SB_CHECK(strcmp(b05->task, "b") == 0 && strcmp(b05->method, "topk_softmax_05") == 0 && b05->n_seeds == 2 &&
	             !b05->eligible && fabs(b05->val_accuracy - 0.9) < 1e-15,
	         "candidate listed with n_seeds 2, not eligible, mean 0.9");
	const struct sb_sel_cand *b025 = &s.cands[3];
	SB_CHECK(b025->n_seeds == 3 && b025->seeds[0] == 0 && b025->seeds[1] == 1 && b025->seeds[2] == 5,
	         "seeds listed in ascending order");
	/* the mean is the plain mean summed in seed order */
	SB_CHECK(s.cands[1].val_accuracy == (0.5 + 1.0 + 0.75) / 3, "mean of a/025 is %.17g", s.cands[1].val_accuracy);
	sb_selection_free(&s);
	/* min_seeds 1: b's 0.5 ratio wins */
	rc = sb_select_topk(c, sizeof c / sizeof *c, sb_topk_methods, 3, 1, &s, &err);
	SB_CHECK(rc == 0 && strcmp(s.cands[s.tasks[1].chosen].method, "topk_softmax_05") == 0 && s.tasks[2].chosen >= 0,
	         "with min_seeds 1 the 2-seed ratio wins and task c is selected");
	sb_selection_free(&s);
	/* a repeated cell is an error: the caller resolves duplicates */
	struct sb_sel_cell d[] = {{"a", "topk_softmax_025", 0, 0.5}, {"a", "topk_softmax_025", 0, 0.6}};
	rc = sb_select_topk(d, 2, sb_topk_methods, 3, 1, &s, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "two cells"), "duplicate (task, method, seed) refused (%s)",
	         err.msg);
	/* strictly greater later: the later ratio wins */
	struct sb_sel_cell e[] = {{"a", "topk_softmax_0125", 0, 0.5}, {"a", "topk_softmax_05", 0, 0.5000000001}};
	rc = sb_select_topk(e, 2, sb_topk_methods, 3, 1, &s, &err);
	SB_CHECK(rc == 0 && strcmp(s.cands[s.tasks[0].chosen].method, "topk_softmax_05") == 0,
	         "a strictly greater later ratio wins");
	sb_selection_free(&s);
}

static void canonical(void)
{
	struct sb_err err = {0};
	/* digest from: python3 -c 'import json,hashlib; d=json.loads(S); d.pop("sha256");
	 *   print(hashlib.sha256(json.dumps(d,sort_keys=True,separators=(",",":")).encode()).hexdigest())' */
	const char *s =
	    "{\"b\":[1,2.5,{\"z\":null,\"a\":\"x\\u00e9\\n\"}],\"a\":true,\"sha256\":\"ignored\",\"c\":-1e-05}";
	struct sb_json *v;
	SB_CHECK(sb_json_parse(s, strlen(s), &v, &err) == 0, "parse the sample");
	char hex[SB_SHA256_HEX];
	SB_CHECK(sb_json_canonical_sha256(v, "sha256", hex, &err) == 0 &&
	             strcmp(hex, "c70e1d67519c5938142bb2a83c882c5fb5f22775b994b3884ebdc697581be030") == 0,
	         "canonical hash without 'sha256' equals Python's (%s)", hex);
	char hex2[SB_SHA256_HEX];
	sb_json_canonical_sha256(v, NULL, hex2, &err);
	SB_CHECK(strcmp(hex, hex2) != 0, "omitting the key changes the hash");
	/* pretty text parses back to the same canonical form */
	char *p = sb_json_pretty(s, strlen(s), 2);
	struct sb_json *v2;
	SB_CHECK(p && sb_json_parse(p, strlen(p), &v2, &err) == 0, "indented text parses (%s)", err.msg);
	char hex3[SB_SHA256_HEX];
	sb_json_canonical_sha256(v2, "sha256", hex3, &err);
	SB_CHECK(strcmp(hex, hex3) == 0, "indenting does not change the hash");
	SB_CHECK(strstr(p, "\n  \"b\": [\n    1,") != NULL, "two-space indent, one item per line");
	free(p);
	sb_json_free(v2);
	sb_json_free(v);
	/* strings holding JSON punctuation are copied as they are */
	const char *t = "{\"k\":\"a,b:{c}[d] \\\"q\\\" \\\\\",\"e\":{},\"f\":[]}";
	p = sb_json_pretty(t, strlen(t), 2);
	SB_CHECK(p && sb_json_parse(p, strlen(p), &v, &err) == 0 &&
	             strcmp(sb_json_str(sb_json_get(v, "k"), ""), "a,b:{c}[d] \"q\" \\") == 0,
	         "punctuation inside strings survives indenting");
	SB_CHECK(p && strstr(p, "\"e\": {},") && strstr(p, "\"f\": []"), "empty containers stay on one line");
	sb_json_free(v);
	free(p);
	/* sealing: the file's sha256 member is the canonical hash of the rest */
	const char *payload = "{\"kind\":\"freeze.selection\",\"v\":1,\"x\":[1.5,\"\\u00fc\"]}";
	char *out;
	size_t n;
	SB_CHECK(sb_selection_seal(payload, strlen(payload), &out, &n, hex, &err) == 0, "seal (%s)", err.msg);
	SB_CHECK(sb_json_parse(out, n, &v, &err) == 0, "sealed text parses");
	sb_json_canonical_sha256(v, "sha256", hex2, &err);
	SB_CHECK(strcmp(hex2, hex) == 0 && strcmp(sb_json_str(sb_json_get(v, "sha256"), ""), hex) == 0,
	         "sealed sha256 recomputes from the file");
	SB_CHECK(v->n == 4 && strcmp(v->keys[3], "sha256") == 0, "sha256 is the last member");
	sb_json_free(v);
	free(out);
	const char *bad = "{\"sha256\":\"x\"}";
	SB_CHECK(sb_selection_seal(bad, strlen(bad), &out, &n, hex, &err) != 0, "a payload holding sha256 is refused");
}

static void paths(void)
{
	struct sb_err err = {0};
	char tmpl[] = "/tmp/sbfreezeXXXXXX";
	char *d = mkdtemp(tmpl);
	SB_CHECK(d != NULL, "temporary directory");
	char a[512], b[512], f[600];
	snprintf(a, sizeof a, "%s/study", d);
	snprintf(b, sizeof b, "%s/runs/cell", d);
	sb_mkdir_p(a, &err);
	sb_mkdir_p(b, &err);
	snprintf(f, sizeof f, "%s/val.ndjson", b);
	sb_write_file_atomic(f, "x", 1, &err);
	/* (the call comes first: the argument order of SB_CHECK is unspecified) */
	char *r = NULL;
	int rc = sb_path_relative(a, f, &r, &err);
	SB_CHECK(rc == 0 && strcmp(r, "../runs/cell/val.ndjson") == 0, "sibling directory: %s", rc ? err.msg : r);
	free(r);
	rc = sb_path_relative(d, f, &r, &err);
	SB_CHECK(rc == 0 && strcmp(r, "runs/cell/val.ndjson") == 0, "below: %s", rc ? err.msg : r);
	free(r);
	rc = sb_path_relative(b, b, &r, &err);
	SB_CHECK(rc == 0 && strcmp(r, ".") == 0, "itself: %s", rc ? err.msg : r);
	free(r);
	snprintf(f, sizeof f, "%s/runs", d);
	snprintf(a, sizeof a, "%s/run", d); /* a prefix that is not a component */
	sb_mkdir_p(a, &err);
	rc = sb_path_relative(a, f, &r, &err);
	SB_CHECK(rc == 0 && strcmp(r, "../runs") == 0, "shared name prefix: %s", rc ? err.msg : r);
	free(r);
	rc = sb_path_relative("/", f, &r, &err);
	SB_CHECK(rc == 0 && r[0] != '/' && strstr(r, "runs"), "from the root: %s", rc ? err.msg : r);
	free(r);
	rc = sb_path_relative(a, "/nonexistent/x", &r, &err);
	SB_CHECK(rc == SB_EIO, "missing target is an error (%s)", err.msg);
	/* a symbolic link as the last component keeps its name (the run directory's val.ndjson
	 * linking into a log store); one in a directory component is resolved */
	char store[600], link[700], ldir[600];
	snprintf(store, sizeof store, "%s/store.ndjson", d);
	snprintf(link, sizeof link, "%s/runs/cell/linked.ndjson", d);
	snprintf(ldir, sizeof ldir, "%s/runs-link", d);
	sb_write_file_atomic(store, "y", 1, &err);
	int lk = symlink(store, link) == 0 && symlink(b, ldir) == 0;
	rc = sb_path_relative(d, link, &r, &err);
	SB_CHECK(lk && rc == 0 && strcmp(r, "runs/cell/linked.ndjson") == 0, "a linked file keeps its name: %s",
	         rc ? err.msg : r);
	free(r);
	snprintf(link, sizeof link, "%s/runs-link/val.ndjson", d);
	rc = sb_path_relative(d, link, &r, &err);
	SB_CHECK(rc == 0 && strcmp(r, "runs/cell/val.ndjson") == 0, "a linked directory is resolved: %s",
	         rc ? err.msg : r);
	free(r);
	snprintf(link, sizeof link, "%s/runs/cell/dangling.ndjson", d);
	lk = symlink("/nonexistent/y", link) == 0;
	rc = sb_path_relative(d, link, &r, &err);
	SB_CHECK(lk && rc == SB_EIO, "a dangling link is a missing target (%s)", err.msg);
	char *dn = sb_path_dirname("a/b/c.json");
	SB_CHECK(strcmp(dn, "a/b") == 0, "dirname a/b/c.json = %s", dn);
	free(dn);
	dn = sb_path_dirname("c.json");
	SB_CHECK(strcmp(dn, ".") == 0, "dirname of a bare name is .");
	free(dn);
	char *lp = sb_guard_ledger_path("study/selection.json");
	SB_CHECK(strcmp(lp, "study/selection.reads.ndjson") == 0, "ledger of selection.json: %s", lp);
	free(lp);
	lp = sb_guard_ledger_path("sel");
	SB_CHECK(strcmp(lp, "sel.reads.ndjson") == 0, "ledger of a name without .json: %s", lp);
	free(lp);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
	SB_CHECK(system(cmd) == 0, "cleanup");
}

static char *epoch_line(int e, const char *acc)
{
	static char buf[1024];
	snprintf(buf, sizeof buf,
	         "{\"kind\":\"eval.epoch\",\"v\":1,\"cell_id\":\"c1\",\"task\":\"t\",\"method\":\"softmax\",\"seed\":3,"
	         "\"tier\":\"compact\",\"arch\":\"plain\",\"epoch\":%d,\"epochs_completed\":%d,\"n_val\":10,"
	         "\"val_accuracy\":%s,\"val_macro_f1\":0.5,\"val_loss\":1,\"correct_bits\":\"b\",\"correct_sha256\":\"%"
	         "064d\","
	         "\"checkpoint_sha256\":\"%064d\"}\n",
	         e, e + 1, acc, 0, e);
	return buf;
}

static const char *done_line(int epochs, int evaluated, const char *status)
{
	static char buf[512];
	snprintf(
	    buf, sizeof buf,
	    "{\"kind\":\"eval.done\",\"v\":1,\"cell_id\":\"c1\",\"task\":\"t\",\"method\":\"softmax\",\"seed\":3,"
	    "\"tier\":\"compact\",\"arch\":\"plain\",\"epochs\":%d,\"epochs_evaluated\":%d,\"train_status\":\"%s\"}\n",
	    epochs, evaluated, status);
	return buf;
}

static int parse(const char *text, struct sb_vallog *v, struct sb_err *err)
{
	return sb_vallog_parse(text, strlen(text), "val.ndjson", v, err);
}

static void vallog(void)
{
	struct sb_err err = {0};
	struct sb_vallog v;
	char text[8192];
	/* epochs out of order, a run.meta and an unknown kind: fine */
	snprintf(text, sizeof text, "{\"kind\":\"run.meta\",\"v\":1}\n");
	strcat(text, epoch_line(1, "0.7"));
	strcat(text, "{\"kind\":\"future.thing\",\"v\":9}\n");
	strcat(text, epoch_line(0, "0.6"));
	strcat(text, epoch_line(2, "null"));
	strcat(text, done_line(3, 3, "completed"));
	int rc = parse(text, &v, &err);
	SB_CHECK(rc == 0 && v.n_cells == 1 && v.cells[0].n_ep == 3, "valid log read (%s)", err.msg);
	if (rc)
		return;
	const struct sb_val_cell *c = &v.cells[0];
	SB_CHECK(c->ep[0].epoch == 0 && c->ep[1].epoch == 1 && c->ep[2].epoch == 2, "epochs sorted");
	SB_CHECK(isnan(c->ep[2].val_accuracy), "null accuracy reads as NaN");
	SB_CHECK(c->epochs == 3 && strcmp(c->train_status, "completed") == 0 && c->seed == 3, "eval.done read");
	double acc;
	int64_t ep;
	SB_CHECK(sb_val_cell_value(c, 5, 0, &acc, &ep, &err) == 0 && ep == 1 && acc == 0.7, "best epoch 1 (0.7)");
	SB_CHECK(sb_val_cell_value(c, 0, 1, &acc, &ep, &err) == 0 && ep == 0 && acc == 0.6, "budget 1: epoch 0 (0.6)");
	SB_CHECK(sb_val_cell_value(c, 0, 3, &acc, &ep, &err) == SB_EDATA, "budget 3: NaN accuracy refused (%s)",
	         err.msg);
	SB_CHECK(sb_val_cell_value(c, 0, 4, &acc, &ep, &err) == SB_EDATA, "budget beyond the log refused (%s)",
	         err.msg);
	SB_CHECK(sb_val_cell_epoch(c, 2) == &c->ep[1], "epoch lookup by epochs_completed");
	sb_vallog_free(&v);

	/* a gap: the best epoch cannot be read */
	snprintf(text, sizeof text, "%s", epoch_line(0, "0.6"));
	strcat(text, epoch_line(2, "0.7"));
	SB_CHECK(parse(text, &v, &err) == 0, "a log with a gap parses");
	SB_CHECK(sb_val_cell_value(&v.cells[0], 5, 0, &acc, &ep, &err) == SB_EDATA && strstr(err.msg, "epoch 1"),
	         "a gap refuses the best epoch (%s)", err.msg);
	sb_vallog_free(&v);

	/* errors name the line */
	snprintf(text, sizeof text, "%s", epoch_line(0, "0.6"));
	strcat(text, epoch_line(0, "0.6"));
	SB_CHECK(parse(text, &v, &err) == SB_EDATA && strstr(err.msg, "val.ndjson:2") && strstr(err.msg, "twice"),
	         "repeated epoch (%s)", err.msg);
	snprintf(text, sizeof text, "%s", "{\"kind\":\"eval.epoch\",\"v\":1,\"cell_id\":\"c1\"}\n");
	SB_CHECK(parse(text, &v, &err) == SB_EDATA && strstr(err.msg, "val.ndjson:1") && strstr(err.msg, "task"),
	         "missing field named (%s)", err.msg);
	snprintf(text, sizeof text, "%s%s", done_line(3, 0, "completed"), epoch_line(0, "0.5"));
	SB_CHECK(parse(text, &v, &err) == SB_EDATA && strstr(err.msg, "after eval.done"), "epoch after done (%s)",
	         err.msg);
	snprintf(text, sizeof text, "%s%s", epoch_line(0, "0.5"), done_line(3, 2, "completed"));
	SB_CHECK(parse(text, &v, &err) == SB_EDATA && strstr(err.msg, "epochs evaluated"),
	         "eval.done count differs from the log (%s)", err.msg);
	snprintf(text, sizeof text, "%s", epoch_line(0, "1.5"));
	SB_CHECK(parse(text, &v, &err) == SB_EDATA && strstr(err.msg, "outside"), "accuracy above 1 (%s)", err.msg);
	snprintf(text, sizeof text, "{\"kind\":\"eval.epoch\",\"v\":2}\n");
	SB_CHECK(parse(text, &v, &err) == SB_EDATA && strstr(err.msg, "version 2"), "unknown version (%s)", err.msg);
	snprintf(text, sizeof text, "%s", epoch_line(0, "0.5"));
	char *p = strstr(text, "\"seed\":3");
	p[7] = '4';
	strcat(text, epoch_line(1, "0.5"));
	SB_CHECK(parse(text, &v, &err) == SB_EDATA && strstr(err.msg, "differ"), "one cell_id, two seeds (%s)",
	         err.msg);
	snprintf(text, sizeof text, "%s", epoch_line(0, "0.5"));
	text[strlen(text) - 3] = 'x';
	SB_CHECK(parse(text, &v, &err) == SB_EDATA, "bad checkpoint hash (%s)", err.msg);
	SB_CHECK(parse("", &v, &err) == 0 && v.n_cells == 0, "empty log: no cells");
	sb_vallog_free(&v);
	/* reading a file hashes exactly the bytes parsed */
	char tmpl[] = "/tmp/sbvallogXXXXXX";
	char *d = mkdtemp(tmpl);
	char path[300];
	snprintf(path, sizeof path, "%s/val.ndjson", d);
	snprintf(text, sizeof text, "%s%s", epoch_line(0, "0.5"), done_line(1, 1, "completed"));
	sb_write_file_atomic(path, text, strlen(text), &err);
	char want[SB_SHA256_HEX];
	sb_sha256_buf(text, strlen(text), want);
	SB_CHECK(sb_vallog_read(path, &v, &err) == 0 && strcmp(v.sha256, want) == 0 && v.size_bytes == strlen(text) &&
	             v.mtime > 0,
	         "file read: hash, size and mtime (%s)", err.msg);
	sb_vallog_free(&v);
	unlink(path);
	rmdir(d);
	SB_CHECK(sb_vallog_read(path, &v, &err) == SB_EIO, "missing file is an I/O error (%s)", err.msg);
}

int main(void)
{
	best_epoch();
	rule();
	canonical();
	paths();
	vallog();
	return sb_test_done();
}
