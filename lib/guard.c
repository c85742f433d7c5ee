/* guard.c — sealing and checking selection.json, and the test-read ledger
 * (see guard.h). */
#include "guard.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "io.h"
#include "record.h"
#include "select.h"

#define SELECTION_LIMIT (256u << 20)

int sb_selection_seal(const char *payload, size_t len, char **out, size_t *out_len, char hex[SB_SHA256_HEX],
                      struct sb_err *err)
{
	struct sb_json *v;
	if (sb_json_parse(payload, len, &v, err))
		return SB_ERR(err, SB_EINTERNAL, "selection payload is not valid JSON: %s", err->msg);
	if (v->type != SB_JSON_OBJECT || sb_json_get(v, "sha256")) {
		sb_json_free(v);
		return SB_ERR(err, SB_EINTERNAL, "selection payload must be an object without 'sha256'");
	}
	int rc = sb_json_canonical_sha256(v, NULL, hex, err);
	sb_json_free(v);
	if (rc)
		return rc;
	/* payload text minus its closing brace, then ,"sha256":"..."} */
	size_t end = len;
	while (end > 0 && payload[end - 1] != '}')
		end--;
	if (end == 0)
		return SB_ERR(err, SB_EINTERNAL, "selection payload must be an object");
	size_t n = end - 1 + 80 + 2;
	char *flat = malloc(n);
	if (!flat)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int empty = end >= 2 && payload[end - 2] == '{';
	int w = snprintf(flat, n, "%.*s%s\"sha256\":\"%s\"}", (int)(end - 1), payload, empty ? "" : ",", hex);
	*out = sb_json_pretty(flat, (size_t)w, 2);
	free(flat);
	if (!*out)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	*out_len = strlen(*out);
	return 0;
}

void sb_guarded_free(struct sb_guarded *g)
{
	if (!g)
		return;
	sb_json_free(g->sel);
	free(g->sel_dir);
	memset(g, 0, sizeof *g);
}

char *sb_guard_resolve(const struct sb_guarded *g, const char *recorded)
{
	if (recorded[0] == '/' || !g->sel_dir || strcmp(g->sel_dir, ".") == 0)
		return strdup(recorded);
	return sb_path_join(g->sel_dir, recorded);
}

/* "PATH: detail" -> "detail" */
static const char *strip_path(const char *msg, const char *path)
{
	size_t n = strlen(path);
	if (strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
		return msg + n + 2;
	return msg;
}

static void fmt_time(char buf[40], double t)
{
	struct tm tm;
	/* years 0 to 9999 only: beyond them a time_t may not hold the value, nor %04d the year */
	if (!(t >= -62167219200.0 && t < 253402300800.0)) {
		snprintf(buf, 40, "%.17g s", t);
		return;
	}
	time_t s = (time_t)floor(t);
	if (!gmtime_r(&s, &tm)) {
		snprintf(buf, 40, "%.17g s", t);
		return;
	}
	int ms = (int)floor((t - (double)s) * 1000.0);
	if (ms > 999)
		ms = 999;
	snprintf(buf, 40, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
	         tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

#define REFUSE(err, path, check, ...) refuse((err), (path), (check), __FILE__, __LINE__, __VA_ARGS__)

__attribute__((format(printf, 6, 7))) static int refuse(struct sb_err *err, const char *path, const char *check,
                                                        const char *src, int line, const char *fmt, ...)
{
	char detail[900];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	return sb_err_setf(err, SB_EVERDICT, src, line, "%s: refused by the guard (%s): %s", path, check, detail);
}

/* PROTOCOL A6: every log's mtime <= frozen_at + 1.0 s (the study's allowance, which absorbs
 * clocks that differ by a little between the machines of a cluster sharing the runs; a log's
 * content is held by its hash anyway) */
#define MTIME_ALLOWANCE_S 1.0

static int check_mtime(const char *path, double frozen_at, const char *what, struct sb_err *err)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return REFUSE(err, path, "log-present", "%s", strerror(errno));
	double m = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
	if (m > frozen_at + MTIME_ALLOWANCE_S) {
		char a[40], b[40];
		fmt_time(a, m);
		fmt_time(b, frozen_at);
		return REFUSE(err, path, "log-mtime", "%s modified at %s, after the freeze at %s (+%.1f s allowed)", what,
		              a, b, MTIME_ALLOWANCE_S);
	}
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int scan_runs(const char *runs_dir, double frozen_at, struct sb_err *err)
{
	DIR *d = opendir(runs_dir);
	if (!d)
		return SB_ERR(err, SB_EIO, "%s: %s", runs_dir, strerror(errno));
	/* sorted, so that the first offender reported does not depend on the directory order */
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			char **nn = realloc(names, cap * sizeof *nn);
			if (!nn) {
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
				break;
			}
			names = nn;
		}
		if (!(names[n++] = strdup(e->d_name))) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			break;
		}
	}
	closedir(d);
	if (!rc && n)
		qsort(names, n, sizeof *names, cmp_str);
	for (size_t i = 0; !rc && i < n; i++) {
		char *dir = sb_path_join(runs_dir, names[i]);
		char *p = dir ? sb_path_join(dir, "val.ndjson") : NULL;
		if (!p)
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		else if (sb_file_exists(p))
			rc = check_mtime(p, frozen_at, "validation log", err);
		free(dir);
		free(p);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

int sb_guard_check(const char *selection, const char *runs_dir, struct sb_guarded *out, struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	/* selection-exists */
	char *buf;
	size_t len;
	struct sb_err e2 = {0};
	struct stat st; /* a FIFO would block the read */
	if (stat(selection, &st) == 0 && !S_ISREG(st.st_mode))
		return REFUSE(err, selection, "selection-exists", "cannot read the selection: not a regular file");
	if (sb_read_file(selection, &buf, &len, SELECTION_LIMIT, &e2))
		return REFUSE(err, selection, "selection-exists", "cannot read the selection: %s",
		              strip_path(e2.msg, selection));
	sb_sha256_buf(buf, len, out->file_sha256);
	/* selection-format */
	struct sb_json *v;
	int rc = sb_json_parse(buf, len, &v, &e2);
	free(buf);
	if (rc)
		return REFUSE(err, selection, "selection-format", "not valid JSON: %s", e2.msg);
	out->sel = v;
	const char *kind = sb_json_str(sb_json_get(v, "kind"), NULL);
	const char *recorded = sb_json_str(sb_json_get(v, "sha256"), NULL);
	int64_t schema = 0;
	const struct sb_json *fz = sb_json_get(v, "frozen_at_unix_s");
	const struct sb_json *logs = sb_json_get(v, "validation_logs");
	if (v->type != SB_JSON_OBJECT || !kind || strcmp(kind, "freeze.selection") != 0) {
		rc = REFUSE(err, selection, "selection-format", "not a selection (kind \"freeze.selection\")");
		goto fail;
	}
	if (sb_json_int64(sb_json_get(v, "schema"), &schema) || schema != 1) {
		rc = REFUSE(err, selection, "selection-format", "schema must be 1");
		goto fail;
	}
	if (!recorded || !sb_is_sha256_hex(recorded)) {
		rc = REFUSE(err, selection, "selection-format", "no payload hash (\"sha256\")");
		goto fail;
	}
	if (!fz || fz->type != SB_JSON_NUMBER || !isfinite(fz->number)) {
		rc = REFUSE(err, selection, "selection-format", "no freeze time (\"frozen_at_unix_s\")");
		goto fail;
	}
	if (!(fz->number >= 0 && fz->number < 253402300800.0)) { /* 1970 to the end of 9999 */
		rc = REFUSE(err, selection, "selection-format", "freeze time \"frozen_at_unix_s\" %.17g is not a time "
		                                                "from 1970 to 9999",
		            fz->number);
		goto fail;
	}
	if (!logs || logs->type != SB_JSON_ARRAY) {
		rc = REFUSE(err, selection, "selection-format", "no list of validation logs (\"validation_logs\")");
		goto fail;
	}
	/* selection-hash */
	if ((rc = sb_json_canonical_sha256(v, "sha256", out->sha256, err)))
		goto fail;
	if (strcmp(out->sha256, recorded) != 0) {
		rc = REFUSE(err, selection, "selection-hash",
		            "the payload hashes to %s but the selection records %s: it was edited after the freeze",
		            out->sha256, recorded);
		goto fail;
	}
	out->frozen_at = fz->number;
	out->sel_dir = sb_path_dirname(selection);
	if (!out->sel_dir) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto fail;
	}
	/* log-present, log-hash, log-mtime for the listed logs */
	for (size_t i = 0; i < logs->n; i++) {
		const struct sb_json *l = logs->items[i];
		const char *lp = sb_json_str(sb_json_get(l, "path"), NULL);
		const char *lh = sb_json_str(sb_json_get(l, "sha256"), NULL);
		if (!lp || !lh || !sb_is_sha256_hex(lh)) {
			rc = REFUSE(err, selection, "selection-format",
			            "validation_logs[%zu] lacks a path or a SHA-256", i);
			goto fail;
		}
		char *path = sb_guard_resolve(out, lp);
		if (!path) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			goto fail;
		}
		char *data;
		size_t n;
		char hex[SB_SHA256_HEX];
		struct stat st; /* a FIFO would block the read */
		if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
			rc = REFUSE(err, path, "log-present", "a validation log the selection lists is not a regular file");
			free(path);
			goto fail;
		}
		if (sb_read_file(path, &data, &n, 0, &e2)) {
			rc = REFUSE(err, path, "log-present", "a validation log the selection lists cannot be read: %s",
			            strip_path(e2.msg, path));
			free(path);
			goto fail;
		}
		sb_sha256_buf(data, n, hex);
		free(data);
		if (strcmp(hex, lh) != 0) {
			rc = REFUSE(err, path, "log-hash",
			            "the validation log now hashes to %s, the selection recorded %s: it changed after "
			            "the freeze",
			            hex, lh);
			free(path);
			goto fail;
		}
		rc = check_mtime(path, out->frozen_at, "validation log listed in the selection", err);
		free(path);
		if (rc)
			goto fail;
	}
	out->n_logs = logs->n;
	/* log-mtime for every validation log under the runs directory */
	if (runs_dir && (rc = scan_runs(runs_dir, out->frozen_at, err)))
		goto fail;
	return 0;
fail:
	sb_guarded_free(out);
	return rc;
}

int sb_guard_check_runs(const struct sb_guarded *g, const char *runs_dir, struct sb_err *err)
{
	return scan_runs(runs_dir, g->frozen_at, err);
}

char *sb_guard_ledger_path(const char *selection)
{
	size_t n = strlen(selection);
	char *p = malloc(n + 16);
	if (!p)
		return NULL;
	if (n > 5 && strcmp(selection + n - 5, ".json") == 0 && selection[n - 6] != '/')
		snprintf(p, n + 16, "%.*s.reads.ndjson", (int)(n - 5), selection);
	else
		snprintf(p, n + 16, "%s.reads.ndjson", selection);
	return p;
}

int sb_guard_reads(const char *ledger, const char *sha256, int *n_reads, int *n_same, char **first, struct sb_err *err)
{
	*n_reads = *n_same = 0;
	if (first)
		*first = NULL;
	struct stat st;
	if (stat(ledger, &st) != 0 && errno == ENOENT)
		return 0;
	struct sb_ndjson_reader *r;
	struct sb_err e2 = {0};
	if (stat(ledger, &st) == 0 && !S_ISREG(st.st_mode)) /* a FIFO would block the read */
		return REFUSE(err, ledger, "single-read", "the test-read ledger is not a regular file");
	if (sb_ndjson_open(ledger, &r, &e2))
		return REFUSE(err, ledger, "single-read", "the test-read ledger cannot be read: %s", e2.msg);
	int rc = 0;
	for (;;) {
		struct sb_json *rec;
		if (sb_ndjson_next(r, &rec, &e2)) {
			rc = REFUSE(err, ledger, "single-read", "the test-read ledger is damaged: %s", e2.msg);
			break;
		}
		if (!rec)
			break;
		const char *kind = sb_json_str(sb_json_get(rec, "kind"), NULL);
		const char *status = sb_json_str(sb_json_get(rec, "status"), NULL);
		const char *ssha = sb_json_str(sb_json_get(rec, "selection_sha256"), NULL);
		/* only sb-test writes here: a record it would not write (not an object, another kind,
		 * another status, a mistyped hash) is damage, not something to pass over, since a
		 * "started" record among them would go uncounted */
		if (!kind || strcmp(kind, "test.read") || !status ||
		    (strcmp(status, "started") && strcmp(status, "completed") && strcmp(status, "failed")) || !ssha ||
		    !sb_is_sha256_hex(ssha)) {
			sb_json_free(rec);
			rc = REFUSE(err, ledger, "single-read",
			            "the test-read ledger is damaged: line %ld is not a test.read record of sb-test "
			            "(kind, status started/completed/failed, selection_sha256)",
			            sb_ndjson_line(r));
			break;
		}
		if (strcmp(status, "started") == 0) {
			++*n_reads;
			const char *s = sb_json_str(sb_json_get(rec, "selection_sha256"), "");
			if (strcmp(s, sha256) == 0)
				++*n_same;
			if (first && !*first) {
				struct sb_jw w;
				sb_jw_init(&w, NULL);
				sb_jw_value(&w, sb_json_get(rec, "argv"));
				const char *t = sb_json_str(sb_json_get(rec, "time"), "?");
				const char *o = sb_json_str(sb_json_get(rec, "out_dir"), "?");
				size_t n = w.len + strlen(t) + strlen(o) + 64;
				*first = malloc(n);
				if (*first)
					snprintf(*first, n, "at %s by %.*s into %s", t, (int)w.len, w.buf ? w.buf : "",
					         o);
				sb_jw_free(&w);
			}
		}
		sb_json_free(rec);
	}
	sb_ndjson_close(r);
	if (rc && first) {
		free(*first);
		*first = NULL;
	}
	return rc;
}

int sb_guard_reads_beside(const char *ledger, const char *sha256, int *n_same, char **where, struct sb_err *err)
{
	*n_same = 0;
	if (where)
		*where = NULL;
	char *dir = sb_path_dirname(ledger);
	if (!dir)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	const char *slash = strrchr(ledger, '/'), *self = slash ? slash + 1 : ledger;
	static const char suffix[] = ".reads.ndjson";
	const size_t ls = sizeof suffix - 1;
	DIR *d = opendir(dir);
	if (!d) {
		int rc = REFUSE(err, dir, "single-read", "the directory of the test-read ledgers cannot be read: %s",
		                strerror(errno));
		free(dir);
		return rc;
	}
	int rc = 0;
	struct dirent *e;
	while (!rc && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n <= ls || strcmp(e->d_name + n - ls, suffix) != 0 || strcmp(e->d_name, self) == 0)
			continue;
		char *p = strcmp(dir, ".") == 0 ? strdup(e->d_name) : sb_path_join(dir, e->d_name);
		if (!p) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			break;
		}
		struct stat st;
		int nr = 0, ns = 0;
		char *first = NULL;
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
			rc = sb_guard_reads(p, sha256, &nr, &ns, where && !*where ? &first : NULL, err);
			if (!rc && ns > 0) {
				*n_same += ns;
				if (where && !*where) {
					size_t m = strlen(p) + (first ? strlen(first) : 1) + 16;
					*where = malloc(m);
					if (*where)
						snprintf(*where, m, "%s: %s", p, first ? first : "?");
				}
			}
		}
		free(first);
		free(p);
	}
	closedir(d);
	free(dir);
	if (rc && where) {
		free(*where);
		*where = NULL;
	}
	return rc;
}

int sb_guard_ledger_append(const char *ledger, const char *record, size_t len, struct sb_err *err)
{
	char *old = NULL;
	size_t n = 0;
	if (sb_file_exists(ledger))
		SB_TRY(sb_read_file(ledger, &old, &n, 0, err));
	struct sb_atomic a;
	int rc = sb_atomic_open(&a, ledger, err);
	if (rc) {
		free(old);
		return rc;
	}
	int bad = (n && fwrite(old, 1, n, a.f) != n) || (n && old[n - 1] != '\n' && fputc('\n', a.f) == EOF) ||
	          fwrite(record, 1, len, a.f) != len || fputc('\n', a.f) == EOF;
	free(old);
	if (bad) {
		rc = SB_ERRNO(err, ledger);
		sb_atomic_abort(&a);
		return rc;
	}
	return sb_atomic_commit(&a, err);
}
