/* freeze_m3.c — rule m3_confirmation, derived from the logs and the switch map (freeze_m3.h). */
#include "freeze_m3.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "freeze_cells.h"
#include "io.h"
#include "runsel.h"
#include "train_cell.h"

int sb_m3_map_read(const char *path, struct sb_m3_map *m, struct sb_err *err)
{
	char *buf;
	size_t len;
	memset(m, 0, sizeof *m);
	struct stat st; /* a FIFO would block the read */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return SB_ERR(err, SB_EIO, "%s: not a regular file", path);
	SB_TRY(sb_read_file(path, &buf, &len, 16u << 20, err));
	sb_sha256_buf(buf, len, m->sha256);
	m->size_bytes = len;
	size_t cap = 0;
	int rc = 0, line = 0;
	for (size_t a = 0; a < len && !rc;) {
		size_t b = a;
		while (b < len && buf[b] != '\n')
			b++;
		char s[512];
		line++;
		if (b - a > 511) {
			rc = SB_ERR(err, SB_EDATA, "%s:%d: line longer than 511 bytes: not a switch map line", path, line);
			break;
		}
		if (memchr(buf + a, '\0', b - a)) { /* it would end the line early */
			rc = SB_ERR(err, SB_EDATA, "%s:%d: a NUL byte: not a switch map line", path, line);
			break;
		}
		snprintf(s, sizeof s, "%.*s", (int)(b - a), buf + a);
		a = b + 1;
		const char *p = s;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '#')
			continue;
		struct sb_m3_mapline ml;
		int used = 0;
		char m1[64], m2[64], ep[10];
		if (!strncmp(p, "method", 6) && (p[6] == ' ' || p[6] == '\t')) {
			/* the method axis of the block that includes the map: mechanistic_switch and one simple
			 * schedule */
			if (sscanf(p, "method %63[a-z0-9_] %63[a-z0-9_]%n", m1, m2, &used) != 2 || p[used] != '\0' ||
			    (strcmp(m1, "mechanistic_switch") && strcmp(m2, "mechanistic_switch")) || !strcmp(m1, m2) ||
			    m->axis[0]) {
				rc = SB_ERR(err, SB_EDATA,
				            "%s:%d: the method line must name mechanistic_switch and one simple "
				            "schedule, once",
				            path, line);
				break;
			}
			snprintf(m->axis, sizeof m->axis, "%s", strcmp(m1, "mechanistic_switch") ? m1 : m2);
			continue;
		}
		if (sscanf(p,
		           "set when task=%63[a-z0-9_] arch=%31[a-z0-9_] tier=%31[a-z0-9_] method=%63[a-z0-9_] "
		           "switch_epoch=%9[0-9]%n", /* digits, at most 9: %d overflows silently */
		           ml.task, ml.arch, ml.tier, ml.method, ep, &used) != 5 ||
		    p[used] != '\0' || (ml.epoch = atoi(ep)) < 1) {
			rc = SB_ERR(
			    err, SB_EDATA,
			    "%s:%d: not a switch map line (set when task=T arch=A tier=R method=M switch_epoch=N)",
			    path, line);
			break;
		}
		if (strcmp(ml.method, "mechanistic_switch")) {
			if (!m->simple[0])
				snprintf(m->simple, sizeof m->simple, "%s", ml.method);
			else if (strcmp(m->simple, ml.method)) {
				rc = SB_ERR(err, SB_EDATA,
				            "%s:%d: a third switching method '%s' (the map names %s and %s)", path,
				            line, ml.method, "mechanistic_switch", m->simple);
				break;
			}
		}
		for (size_t i = 0; i < m->n; i++)
			if (!strcmp(m->l[i].task, ml.task) && !strcmp(m->l[i].arch, ml.arch) &&
			    !strcmp(m->l[i].tier, ml.tier) && !strcmp(m->l[i].method, ml.method))
				rc = SB_ERR(err, SB_EDATA, "%s:%d: %s/%s/%s %s appears twice", path, line, ml.task,
				            ml.arch, ml.tier, ml.method);
		if (rc)
			break;
		if (m->n == cap) {
			cap = cap ? 2 * cap : 64;
			struct sb_m3_mapline *nl = realloc(m->l, cap * sizeof *nl);
			if (!nl) {
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
				break;
			}
			m->l = nl;
		}
		m->l[m->n++] = ml;
	}
	free(buf);
	if (!rc && m->axis[0] && m->simple[0] && strcmp(m->axis, m->simple))
		rc = SB_ERR(err, SB_EDATA, "%s: the method line names %s, the switch epochs are for %s", path, m->axis,
		            m->simple);
	if (!rc && (m->n == 0 || !m->simple[0]))
		rc = SB_ERR(err, SB_EDATA, "%s: the switch map names no %s", path,
		            m->n == 0 ? "switch epochs" : "simple schedule beside mechanistic_switch");
	if (rc) {
		free(m->l);
		m->l = NULL;
	}
	return rc;
}

/* the map's switch epoch of (task, arch, tier, method), or 0 */
static int map_epoch(const struct sb_m3_map *m, const char *task, const char *arch, const char *tier,
                     const char *method)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->l[i].task, task) && !strcmp(m->l[i].arch, arch) && !strcmp(m->l[i].tier, tier) &&
		    !strcmp(m->l[i].method, method))
			return m->l[i].epoch;
	return 0;
}

/* a (task, arch, tier) group of the map: its first line */
static int map_has_group(const struct sb_m3_map *m, const char *task, const char *arch, const char *tier)
{
	return map_epoch(m, task, arch, tier, "mechanistic_switch") || map_epoch(m, task, arch, tier, m->simple);
}

void sb_m3_map_free(struct sb_m3_map *m)
{
	free(m->l);
	m->l = NULL;
	m->n = 0;
}

/* The switch_epoch in the cell.json beside a validation log (the run directory's);
 * 0 with a reason when it cannot be read there. */
static int cell_switch_epoch(const char *log, const char *cell_id, char *why, size_t nwhy)
{
	char *dir = sb_path_dirname(log), *cj = dir ? sb_path_join(dir, "cell.json") : NULL;
	char *buf = NULL;
	size_t len;
	struct sb_err e = {0};
	struct sb_json *v = NULL;
	int64_t se = 0;
	struct stat st; /* a FIFO would block the read */
	if (!cj)
		snprintf(why, nwhy, "out of memory");
	else if (stat(cj, &st) == 0 && !S_ISREG(st.st_mode))
		snprintf(why, nwhy, "its cell.json is not a regular file");
	else if (sb_read_file(cj, &buf, &len, 1 << 20, &e) || sb_json_parse(buf, len, &v, &e))
		snprintf(why, nwhy, "its cell.json cannot be read: %s", e.msg);
	else if (strcmp(sb_json_str(sb_json_get(v, "cell_id"), ""), cell_id))
		snprintf(why, nwhy, "%s belongs to another cell (%s)", cj, sb_json_str(sb_json_get(v, "cell_id"), "?"));
	else if (sb_cell_json_check(v, cj, NULL, &e)) /* its fields, switch_epoch among them, hash to its id */
		snprintf(why, nwhy, "%s", e.msg);
	else if (sb_json_int64(sb_json_get(v, "switch_epoch"), &se) || se < 1)
		snprintf(why, nwhy, "%s has no switch_epoch", cj);
	free(dir);
	free(cj);
	free(buf);
	sb_json_free(v);
	return (int)se;
}

__attribute__((format(printf, 1, 2))) static char *fmt_dup(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
	if (s) {
		va_start(ap, fmt);
		vsnprintf(s, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	return s;
}

static int m3cell_cmp(int a, int b, void *cells)
{
	const struct sb_m3_cell *c = cells;
	return sb_fz_vc_cmp(c[a].vc, c[b].vc, 1);
}

/* LIST[N++] = the formatted text, or SB_EINTERNAL; WARN adds a warning, REASON a reason
 * for the status (and sets FLAG: mismatch or incomplete) */
#define PUSH(list, n, ...)                                                                                             \
	do {                                                                                                           \
		char *s_ = fmt_dup(__VA_ARGS__);                                                                       \
		if (!s_) {                                                                                             \
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");                                               \
			goto done;                                                                                     \
		}                                                                                                      \
		(list)[(n)++] = s_;                                                                                    \
	} while (0)
#define WARN(...) PUSH(out->warnings, out->nwarnings, __VA_ARGS__)
#define REASON(flag, ...)                                                                                              \
	do {                                                                                                           \
		PUSH(out->reasons, out->nreasons, __VA_ARGS__);                                                        \
		flag = 1;                                                                                              \
	} while (0)

int sb_m3_derive(const struct sb_vallog *logs, int n_logs, const struct sb_m3_map *map, long long expect_cells,
                 struct sb_m3 *out, struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	sb_jw_init(&out->cells_json, NULL);
	sb_jw_init(&out->plan_json, NULL);
	sb_jw_init(&out->missing_json, NULL);
	const char **methods = out->methods;
	methods[0] = "softmax";
	methods[1] = "topk_softmax_025";
	methods[2] = "mechanistic_switch";
	methods[3] = map->simple;
	size_t n_all = 0;
	for (int i = 0; i < n_logs; i++)
		n_all += logs[i].n_cells;
	int rc = 0, mismatch = 0, incomplete = 0;
	struct sb_runsel_item *rs = calloc(n_all ? n_all : 1, sizeof *rs);
	out->cells = calloc(n_all ? n_all : 1, sizeof *out->cells);
	out->cells_used = calloc(n_logs ? (size_t)n_logs : 1, sizeof *out->cells_used);
	out->seeds = calloc(n_all ? n_all : 1, sizeof *out->seeds);
	/* at most one reason per cell and per plan entry (4 methods x seeds per group), and per map line */
	out->reasons = calloc(4 * n_all + map->n + 8 + 4 * map->n * (n_all ? n_all : 1), sizeof *out->reasons);
	out->warnings = calloc(2 * n_all + 1, sizeof *out->warnings); /* at most two per cell */
	if (!rs || !out->cells || !out->cells_used || !out->seeds || !out->reasons || !out->warnings) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto done;
	}
	struct sb_m3_cell *cells = out->cells;
	size_t nc = 0;
	/* the rule's order (lib/runsel.h), as for rule topk_mean_val_acc: the row filter, then the
	 * later log wins on (task, method, seed, arch, tier), then the winners' integrity */
	for (int i = 0; i < n_logs; i++)
		for (size_t j = 0; j < logs[i].n_cells; j++) {
			const struct sb_val_cell *vc = &logs[i].cells[j];
			struct sb_m3_cell *ce = &cells[nc];
			ce->vc = vc;
			ce->log = i;
			size_t s = 0;
			while (s < out->nseeds && out->seeds[s] != vc->seed)
				s++;
			if (s == out->nseeds)
				out->seeds[out->nseeds++] = vc->seed;
			int64_t ep;
			rs[nc].completed = !sb_fz_row_filtered(vc, ce->reason, sizeof ce->reason);
			rs[nc].whole = rs[nc].completed &&
			               !sb_fz_cell_unusable(vc, 0, vc->epochs, &ce->acc, &ep, ce->reason, sizeof ce->reason);
			nc++;
		}
	out->nc = nc;
	int n_keys;
	if ((rc = sb_runsel_keys(rs, nc, m3cell_cmp, cells, &n_keys, err)) ||
	    (rc = sb_runsel_resolve(rs, nc, n_keys, NULL, err)))
		goto done;
	for (size_t k = 0; k < nc; k++)
		if (rs[k].supersedes >= 0) {
			struct sb_m3_cell *early = &cells[rs[k].supersedes];
			/* the later log by its index in validation_logs, never its path (freeze_cells.c) */
			snprintf(early->reason, sizeof early->reason,
			         "superseded by cell %s of validation_logs[%d] (a later log)", cells[k].vc->cell_id,
			         cells[k].log);
			WARN("%s: cell %s superseded by cell %s of the later log %s", logs[early->log].path,
			     early->vc->cell_id, cells[k].vc->cell_id, logs[cells[k].log].path);
		}
	int64_t *seeds = out->seeds;
	for (size_t a = 0; a < out->nseeds; a++) /* ascending */
		for (size_t b = a + 1; b < out->nseeds; b++)
			if (seeds[b] < seeds[a]) {
				int64_t t = seeds[a];
				seeds[a] = seeds[b];
				seeds[b] = t;
			}
	/* each cell: planned by the map? its switch epoch the map's? completed and evaluated? Only
	 * the cells that stand for their key (kept by the row filter, not superseded) are held
	 * against the map: a failed rerun, or an earlier run a later one replaced, is not what the
	 * test read would use. (Switch epochs are still read for every planned switching cell, for
	 * its entry in "cells".) */
	for (size_t k = 0; k < nc; k++) {
		struct sb_m3_cell *ce = &cells[k];
		const struct sb_val_cell *vc = ce->vc;
		int m = 0;
		while (m < 4 && strcmp(vc->method, methods[m]))
			m++;
		ce->planned = m < 4 && map_has_group(map, vc->task, vc->arch, vc->tier);
		char why[300] = "";
		if (ce->planned && m >= 2) {
			ce->map_epoch = map_epoch(map, vc->task, vc->arch, vc->tier, vc->method);
			ce->switch_epoch = cell_switch_epoch(logs[ce->log].path, vc->cell_id, why, sizeof why);
		}
		if (rs[k].disp == SB_RUNSEL_FILTERED)
			WARN("%s: cell %s excluded: %s", logs[ce->log].path, vc->cell_id, ce->reason);
		if (rs[k].disp == SB_RUNSEL_FILTERED || rs[k].disp == SB_RUNSEL_SUPERSEDED) {
			out->n_excluded++;
			continue;
		}
		if (!ce->planned) {
			REASON(mismatch, "cell %s (%s/%s/%s %s seed %lld) is not planned by the switch map",
			       vc->cell_id, vc->task, vc->arch, vc->tier, vc->method, (long long)vc->seed);
			snprintf(ce->reason, sizeof ce->reason, "not planned by the switch map");
			out->n_excluded++;
			continue;
		}
		if (m >= 2) {
			if (!ce->map_epoch)
				REASON(mismatch, "cell %s: the switch map has no switch epoch for %s/%s/%s %s",
				       vc->cell_id, vc->task, vc->arch, vc->tier, vc->method);
			else if (!ce->switch_epoch)
				REASON(mismatch, "cell %s: its switch epoch cannot be checked: %s", vc->cell_id, why);
			else if (ce->switch_epoch != ce->map_epoch)
				REASON(mismatch, "cell %s: switch_epoch %d, the switch map says %d", vc->cell_id,
				       ce->switch_epoch, ce->map_epoch);
		}
		if (rs[k].disp == SB_RUNSEL_WINNER_NOT_WHOLE) { /* ce->reason: cell_unusable's */
			out->n_excluded++;
			WARN("%s: cell %s excluded: %s", logs[ce->log].path, vc->cell_id, ce->reason);
		} else {
			ce->included = 1;
			out->cells_used[ce->log]++;
			char note[4600];
			if (sb_fz_null_epochs_note(logs[ce->log].path, vc, note, sizeof note))
				WARN("%s", note);
		}
	}
	/* the plan: every group of the map x the four methods x every seed of the logs */
	for (size_t i = 0; i < map->n; i++) {
		if (strcmp(map->l[i].method, "mechanistic_switch") &&
		    map_epoch(map, map->l[i].task, map->l[i].arch, map->l[i].tier, "mechanistic_switch"))
			continue; /* each group once (by its mechanistic line when it has one) */
		if (!map_epoch(map, map->l[i].task, map->l[i].arch, map->l[i].tier, "mechanistic_switch") ||
		    !map_epoch(map, map->l[i].task, map->l[i].arch, map->l[i].tier, map->simple))
			REASON(mismatch, "the switch map gives %s/%s/%s only one of mechanistic_switch and %s",
			       map->l[i].task, map->l[i].arch, map->l[i].tier, map->simple);
		out->planned += 4 * out->nseeds;
	}
	if (expect_cells && (long long)out->planned != expect_cells)
		REASON(incomplete,
		       "the switch map's groups x 4 methods x the %zu seeds of the logs plan %zu cells; "
		       "--expect-cells says %lld",
		       out->nseeds, out->planned, expect_cells);
	/* the test plan and what is missing from it */
	struct sb_jw *tp = &out->plan_json, *tm = &out->missing_json;
	sb_jw_arr(tp);
	sb_jw_arr(tm);
	for (size_t i = 0; i < map->n; i++) {
		const struct sb_m3_mapline *g = &map->l[i];
		if (strcmp(g->method, "mechanistic_switch") && map_epoch(map, g->task, g->arch, g->tier, "mechanistic_switch"))
			continue;
		for (int m = 0; m < 4; m++)
			for (size_t s = 0; s < out->nseeds; s++) {
				const struct sb_m3_cell *hit = NULL, *any = NULL;
				for (size_t k = 0; k < nc && !hit; k++) {
					const struct sb_val_cell *vc = cells[k].vc;
					if (vc->seed == seeds[s] && !strcmp(vc->task, g->task) &&
					    !strcmp(vc->arch, g->arch) && !strcmp(vc->tier, g->tier) &&
					    !strcmp(vc->method, methods[m])) {
						if (cells[k].included)
							hit = &cells[k];
						else
							any = &cells[k];
					}
				}
				const struct sb_val_epoch *full =
				    hit ? sb_val_cell_epoch(hit->vc, hit->vc->epochs) : NULL;
				struct sb_jw *w = full ? tp : tm;
				sb_jw_obj(w);
				sb_fz_key_cell(w, g->task, methods[m], seeds[s]);
				sb_jw_kstr(w, "arch", g->arch);
				sb_jw_kstr(w, "tier", g->tier);
				if (full) {
					sb_jw_kstr(w, "cell_id", hit->vc->cell_id);
					sb_jw_kint(w, "epochs", hit->vc->epochs);
					sb_jw_kstr(w, "checkpoint_sha256", full->checkpoint_sha256);
					out->plan_n++;
				} else {
					const char *why = any ? any->reason : "no validation log holds it";
					sb_jw_kstr(w, "reason", why);
					REASON(incomplete, "%s/%s/%s %s seed %lld: %s", g->task, g->arch, g->tier,
					       methods[m], (long long)seeds[s], why);
					out->plan_missing++;
				}
				sb_jw_obj_end(w);
			}
	}
	sb_jw_arr_end(tp);
	sb_jw_arr_end(tm);
	out->status = mismatch ? SB_M3_MISMATCH : incomplete ? SB_M3_INCOMPLETE : SB_M3_AUTHORIZED;
	/* the cells, each with its fate */
	struct sb_jw *w = &out->cells_json;
	sb_jw_arr(w);
	for (size_t k = 0; k < nc; k++) {
		const struct sb_m3_cell *ce = &cells[k];
		sb_jw_obj(w);
		sb_fz_cell_head(w, ce->vc, ce->included);
		if (ce->included) {
			sb_jw_knull(w, "reason");
			sb_jw_kf64(w, "val_accuracy", ce->acc);
		} else {
			sb_jw_kstr(w, "reason", ce->reason);
			sb_jw_knull(w, "val_accuracy");
		}
		if (ce->switch_epoch)
			sb_jw_kint(w, "switch_epoch", ce->switch_epoch);
		else
			sb_jw_knull(w, "switch_epoch");
		if (ce->map_epoch)
			sb_jw_kint(w, "map_switch_epoch", ce->map_epoch);
		else
			sb_jw_knull(w, "map_switch_epoch");
		sb_jw_kint(w, "log", ce->log);
		sb_jw_obj_end(w);
	}
	sb_jw_arr_end(w);
	if (out->cells_json.oom || tp->oom || tm->oom)
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
done:
	free(rs);
	return rc;
}
#undef REASON
#undef WARN
#undef PUSH

void sb_m3_free(struct sb_m3 *m)
{
	for (size_t i = 0; m->reasons && i < m->nreasons; i++)
		free(m->reasons[i]);
	free(m->reasons);
	for (size_t i = 0; m->warnings && i < m->nwarnings; i++)
		free(m->warnings[i]);
	free(m->warnings);
	free(m->cells);
	free(m->cells_used);
	free(m->seeds);
	sb_jw_free(&m->cells_json);
	sb_jw_free(&m->plan_json);
	sb_jw_free(&m->missing_json);
	memset(m, 0, sizeof *m);
}
