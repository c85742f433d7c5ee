/* test_guard — the guard in front of the test data (lib/guard.h), attacked:
 * an edited selection, a malformed one, a missing one, a validation log
 * appended to, touched, deleted, an unlisted log written after the freeze;
 * and the ledger that makes a test read single. Each attack must be refused
 * with SB_EVERDICT and a message naming the check; the untouched study must
 * pass (so that the refusals are not vacuous). */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"
#include "guard.h"
#include "io.h"
#include "json.h"

static char dir[256], sel[512], vlog1[512], vlog2[512], runs[512];
static char vlog1_text[] = "{\"kind\":\"eval.epoch\",\"v\":1,\"val_accuracy\":0.5}\n";
static char vlog2_text[] = "{\"kind\":\"eval.epoch\",\"v\":1,\"val_accuracy\":0.7}\n";

static void set_mtime(const char *path, double t)
{
	struct timespec ts[2];
	ts[0].tv_sec = ts[1].tv_sec = (time_t)t;
	ts[0].tv_nsec = ts[1].tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
	utimensat(AT_FDCWD, path, ts, 0);
}

static double frozen;

/* a study: two logs, a selection naming them (relative paths), frozen 10 s after they were written */
static void build(void)
{
	struct sb_err err = {0};
	char p[600];
	snprintf(runs, sizeof runs, "%s/runs", dir);
	snprintf(p, sizeof p, "%s/c1", runs);
	sb_mkdir_p(p, &err);
	snprintf(p, sizeof p, "%s/c2", runs);
	sb_mkdir_p(p, &err);
	snprintf(vlog1, sizeof vlog1, "%s/c1/val.ndjson", runs);
	snprintf(vlog2, sizeof vlog2, "%s/c2/val.ndjson", runs);
	sb_write_file_atomic(vlog1, vlog1_text, strlen(vlog1_text), &err);
	sb_write_file_atomic(vlog2, vlog2_text, strlen(vlog2_text), &err);
	double now = sb_now_seconds();
	set_mtime(vlog1, now - 20);
	set_mtime(vlog2, now - 20);
	frozen = now - 10;
	char h1[SB_SHA256_HEX], h2[SB_SHA256_HEX];
	sb_sha256_buf(vlog1_text, strlen(vlog1_text), h1);
	sb_sha256_buf(vlog2_text, strlen(vlog2_text), h2);
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_jw_record(&w, "freeze.selection", 1);
	sb_jw_kint(&w, "schema", 1);
	sb_jw_kf64(&w, "frozen_at_unix_s", frozen);
	sb_jw_kint(&w, "min_seeds", 3);
	sb_jw_key(&w, "validation_logs");
	sb_jw_arr(&w);
	sb_jw_obj(&w);
	sb_jw_kstr(&w, "path", "runs/c1/val.ndjson");
	sb_jw_kstr(&w, "sha256", h1);
	sb_jw_obj_end(&w);
	sb_jw_obj(&w);
	sb_jw_kstr(&w, "path", vlog2); /* absolute paths work too */
	sb_jw_kstr(&w, "sha256", h2);
	sb_jw_obj_end(&w);
	sb_jw_arr_end(&w);
	sb_jw_obj_end(&w);
	char *text, hex[SB_SHA256_HEX];
	size_t n;
	sb_selection_seal(w.buf, w.len, &text, &n, hex, &err);
	snprintf(sel, sizeof sel, "%s/selection.json", dir);
	sb_write_file_atomic(sel, text, n, &err);
	free(text);
	sb_jw_free(&w);
}

/* run the guard; returns its status, message in msg */
static int guard(const char *runs_dir, char *msg)
{
	struct sb_err err = {0};
	struct sb_guarded g;
	int rc = sb_guard_check(sel, runs_dir, &g, &err);
	snprintf(msg, 1024, "%s", err.msg);
	if (!rc)
		sb_guarded_free(&g);
	return rc;
}

static int refused(int rc, const char *msg, const char *check)
{
	char want[64];
	snprintf(want, sizeof want, "refused by the guard (%s)", check);
	return rc == SB_EVERDICT && strstr(msg, want) != NULL;
}

static char *slurp(const char *path, size_t *n)
{
	char *b;
	struct sb_err err = {0};
	if (sb_read_file(path, &b, n, 0, &err))
		return NULL;
	return b;
}

static void attacks(void)
{
	char msg[1024];
	struct sb_err err = {0};
	build();
	int rc = guard(runs, msg);
	SB_CHECK(rc == 0, "the untouched study passes the guard (%s)", msg);
	struct sb_guarded g;
	rc = sb_guard_check(sel, runs, &g, &err);
	SB_CHECK(rc == 0 && g.n_logs == 2 && g.frozen_at == frozen && sb_is_sha256_hex(g.sha256),
	         "the guard reports the payload hash, the freeze time and the logs");
	if (!rc)
		sb_guarded_free(&g);

	/* the selection edited: one number changed, layout kept */
	size_t n;
	char *orig = slurp(sel, &n);
	char *edit = strdup(orig);
	char *p = strstr(edit, "\"min_seeds\": 3");
	p[13] = '9';
	sb_write_file_atomic(sel, edit, n, &err);
	rc = guard(runs, msg);
	SB_CHECK(refused(rc, msg, "selection-hash") && strstr(msg, "edited"), "edited selection refused: %s", msg);
	/* ... and its sha256 rewritten to a made-up value */
	strcpy(edit, orig);
	p = strstr(edit, "\"sha256\": \"") + 11;
	p[0] = p[0] == 'a' ? 'b' : 'a';
	sb_write_file_atomic(sel, edit, n, &err);
	rc = guard(runs, msg);
	SB_CHECK(refused(rc, msg, "selection-hash"), "edited hash refused: %s", msg);
	/* reformatting alone (compact instead of indented) is not an edit */
	struct sb_json *v;
	sb_json_parse(orig, n, &v, &err);
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_jw_value(&w, v);
	sb_write_file_atomic(sel, w.buf, w.len, &err);
	rc = guard(runs, msg);
	SB_CHECK(rc == 0, "the same payload without indentation passes (%s)", msg);
	sb_jw_free(&w);
	sb_json_free(v);
	/* malformed, wrong kind, no hash, missing */
	sb_write_file_atomic(sel, "{\"kind\":", 8, &err);
	rc = guard(runs, msg);
	SB_CHECK(refused(rc, msg, "selection-format") && strstr(msg, "JSON"), "truncated selection refused: %s", msg);
	strcpy(edit, orig);
	p = strstr(edit, "freeze.selection");
	memcpy(p, "freeze.selectiom", 16);
	sb_write_file_atomic(sel, edit, n, &err);
	rc = guard(runs, msg);
	SB_CHECK(refused(rc, msg, "selection-format"), "another kind refused: %s", msg);
	strcpy(edit, orig);
	p = strstr(edit, ",\n  \"sha256\"");
	strcpy(p, "\n}\n");
	sb_write_file_atomic(sel, edit, strlen(edit), &err);
	rc = guard(runs, msg);
	SB_CHECK(refused(rc, msg, "selection-format") && strstr(msg, "sha256"), "selection without hash refused: %s",
	         msg);
	unlink(sel);
	rc = guard(runs, msg);
	SB_CHECK(refused(rc, msg, "selection-exists") && strstr(msg, "No such file"), "missing selection refused: %s",
	         msg);
	sb_write_file_atomic(sel, orig, n, &err);
	SB_CHECK(guard(runs, msg) == 0, "restored selection passes");
	free(edit);
	free(orig);

	/* a log appended to after the freeze (its old mtime put back, so only the hash can tell) */
	struct stat st;
	stat(vlog1, &st);
	FILE *f = fopen(vlog1, "ab");
	fputs("{\"kind\":\"eval.epoch\",\"v\":1,\"val_accuracy\":0.99}\n", f);
	fclose(f);
	set_mtime(vlog1, frozen - 10);
	rc = guard(runs, msg);
	SB_CHECK(refused(rc, msg, "log-hash") && strstr(msg, "c1/val.ndjson"), "appended log refused: %s", msg);
	/* ... and with the mtime it really has */
	set_mtime(vlog1, sb_now_seconds());
	rc = guard(runs, msg);
	SB_CHECK(refused(rc, msg, "log-hash"), "appended log (fresh mtime) refused: %s", msg);
	sb_write_file_atomic(vlog1, vlog1_text, strlen(vlog1_text), &err);
	set_mtime(vlog1, frozen - 10);
	SB_CHECK(guard(runs, msg) == 0, "restored log passes (%s)", msg);

	/* touched: same bytes, newer than the freeze by more than PROTOCOL A6's 1.0 s */
	set_mtime(vlog2, frozen + 1.01);
	rc = guard(runs, msg);
	SB_CHECK(refused(rc, msg, "log-mtime") && strstr(msg, "after the freeze"), "touched log refused: %s", msg);
	set_mtime(vlog2, frozen + 0.99);
	SB_CHECK(guard(runs, msg) == 0, "a log 0.99 s newer than the freeze passes (PROTOCOL A6: <= frozen_at + 1.0 s) (%s)",
	         msg);
	set_mtime(vlog2, frozen);
	SB_CHECK(guard(runs, msg) == 0, "a log exactly as old as the freeze passes (%s)", msg);

	/* deleted */
	char aside[600];
	snprintf(aside, sizeof aside, "%s.aside", vlog1);
	rename(vlog1, aside);
	rc = guard(runs, msg);
	SB_CHECK(refused(rc, msg, "log-present") && strstr(msg, "No such file"), "deleted log refused: %s", msg);
	rename(aside, vlog1);
	SB_CHECK(guard(runs, msg) == 0, "log put back passes");

	/* a log the selection does not list, written after the freeze, in the runs directory */
	char p3[600], vlog3[620];
	snprintf(p3, sizeof p3, "%s/c3", runs);
	sb_mkdir_p(p3, &err);
	snprintf(vlog3, sizeof vlog3, "%s/val.ndjson", p3);
	sb_write_file_atomic(vlog3, "{}\n", 3, &err);
	set_mtime(vlog3, frozen + 5);
	rc = guard(runs, msg);
	SB_CHECK(refused(rc, msg, "log-mtime") && strstr(msg, "c3/val.ndjson"), "unlisted newer log refused: %s", msg);
	SB_CHECK(guard(NULL, msg) == 0, "without a runs directory only the listed logs count");
	set_mtime(vlog3, frozen - 1);
	SB_CHECK(guard(runs, msg) == 0, "an unlisted log older than the freeze passes (%s)", msg);
	rc = guard("/nonexistent-runs", msg);
	SB_CHECK(rc == SB_EIO, "a missing runs directory is an I/O error (%s)", msg);

	/* the study moved as a whole: relative paths still resolve */
	char moved[300], cmd[700];
	snprintf(moved, sizeof moved, "%s-moved", dir);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp -a '%s/runs' '%s/selection.json' '%s/'", moved, dir, dir, moved);
	SB_CHECK(system(cmd) == 0, "copy the study");
	snprintf(sel, sizeof sel, "%s/selection.json", moved);
	char mruns[400];
	snprintf(mruns, sizeof mruns, "%s/runs", moved);
	rc = guard(mruns, msg);
	/* vlog2 is recorded with an absolute path into the original study: still there, still verified */
	SB_CHECK(rc == 0, "a moved study passes (relative log paths resolve against the selection) (%s)", msg);
	snprintf(cmd, sizeof cmd, "rm -f '%s/c1/val.ndjson'", runs);
	SB_CHECK(system(cmd) == 0 && refused(guard(mruns, msg), msg, "log-hash") == 0 && guard(mruns, msg) == 0,
	         "the moved selection reads the moved logs, not the originals");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", moved);
	SB_CHECK(system(cmd) == 0, "remove the copy");
	snprintf(sel, sizeof sel, "%s/selection.json", dir);
}

static void ledger(void)
{
	struct sb_err err = {0};
	char lp[600];
	snprintf(lp, sizeof lp, "%s/ledger.reads.ndjson", dir);
	const char *sha = "0123456789012345678901234567890123456789012345678901234567890123";
	int nr = -1, ns = -1;
	char *first = NULL;
	SB_CHECK(sb_guard_reads(lp, sha, &nr, &ns, &first, &err) == 0 && nr == 0 && ns == 0 && !first,
	         "no ledger: no reads");
	const char *rec = "{\"kind\":\"test.read\",\"v\":1,\"status\":\"started\",\"time\":\"T1\",\"argv\":[\"sb-"
	                  "test\",\"-s\",\"x\"],"
	                  "\"selection_sha256\":\"0123456789012345678901234567890123456789012345678901234567890123\","
	                  "\"out_dir\":\"o\"}";
	SB_CHECK(sb_guard_ledger_append(lp, rec, strlen(rec), &err) == 0, "append a started read");
	const char *done = "{\"kind\":\"test.read\",\"v\":1,\"status\":\"completed\",\"selection_sha256\":"
	                   "\"0123456789012345678901234567890123456789012345678901234567890123\"}";
	SB_CHECK(sb_guard_ledger_append(lp, done, strlen(done), &err) == 0, "append its completion");
	SB_CHECK(sb_guard_reads(lp, sha, &nr, &ns, &first, &err) == 0 && nr == 1 && ns == 1 && first &&
	             strstr(first, "T1") && strstr(first, "sb-test"),
	         "one read of this selection, described (%s)", first ? first : "");
	free(first);
	SB_CHECK(sb_guard_reads(lp, "ffff", &nr, &ns, NULL, &err) == 0 && nr == 1 && ns == 0,
	         "a read of another selection at this path is counted apart");
	size_t n;
	char *text = slurp(lp, &n);
	int lines = 0;
	for (size_t i = 0; i < n; i++)
		lines += text[i] == '\n';
	SB_CHECK(lines == 2 && text[n - 1] == '\n', "the ledger holds two lines (%d)", lines);
	free(text);
	/* a damaged ledger refuses */
	FILE *f = fopen(lp, "ab");
	fputs("{\"kind\":\"test.read\",\n", f);
	fclose(f);
	int rc = sb_guard_reads(lp, sha, &nr, &ns, NULL, &err);
	SB_CHECK(refused(rc, err.msg, "single-read") && strstr(err.msg, "damaged"), "damaged ledger refused: %s",
	         err.msg);
	/* so does a whole line sb-test would not write: a started read with a mistyped status or
	 * hash, or not a test.read record (it was passed over, so a read could go uncounted) */
	static const char *bad[] = {
	    "{\"kind\":\"test.read\",\"status\":[\"started\"],\"selection_sha256\":\"0123456789012345678901234567890123456789012345678901234567890123\"}",
	    "{\"kind\":\"test.read\",\"status\":\"started\",\"selection_sha256\":7}",
	    "{\"kind\":\"test.reads\",\"status\":\"started\",\"selection_sha256\":\"0123456789012345678901234567890123456789012345678901234567890123\"}",
	    "[1,2]"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		f = fopen(lp, "wb");
		fprintf(f, "%s\n", bad[i]);
		fclose(f);
		struct sb_err e3 = {0};
		rc = sb_guard_reads(lp, sha, &nr, &ns, NULL, &e3);
		SB_CHECK(refused(rc, e3.msg, "single-read") && strstr(e3.msg, "damaged") && strstr(e3.msg, "line 1"),
		         "a ledger line sb-test would not write is damage (%s): %s", bad[i], e3.msg);
	}
}

int main(void)
{
	snprintf(dir, sizeof dir, "/tmp/sbguardXXXXXX");
	if (!mkdtemp(dir))
		return 1;
	attacks();
	ledger();
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	SB_CHECK(system(cmd) == 0, "cleanup");
	return sb_test_done();
}
