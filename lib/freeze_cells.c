/* freeze_cells.c — the cells that take part in a freeze (freeze_cells.h). */
#include "freeze_cells.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sb_fz_row_filtered(const struct sb_val_cell *vc, char *buf, size_t n)
{
	if (!vc->done || strcmp(vc->train_status, "completed") == 0)
		return NULL;
	snprintf(buf, n, "training status is '%s', not 'completed'", vc->train_status);
	return buf;
}

const char *sb_fz_cell_unusable(const struct sb_val_cell *vc, int patience, int64_t budget, double *acc,
                                int64_t *epoch, char *buf, size_t n)
{
	struct sb_err e = {0};
	if (!vc->done)
		snprintf(buf, n, "the log has no eval.done record (sb-eval did not finish)");
	else if (sb_fz_row_filtered(vc, buf, n))
		return buf; /* the callers filter first; so that this function alone never accepts one */
	else if (vc->epochs_evaluated != vc->epochs || vc->n_ep != (size_t)vc->epochs)
		snprintf(buf, n, "%zu of %lld epochs evaluated", vc->n_ep, (long long)vc->epochs);
	else if (sb_val_cell_value(vc, patience, budget, acc, epoch, &e))
		snprintf(buf, n, "%s", e.msg);
	else
		return NULL;
	return buf;
}

int sb_fz_vc_cmp(const struct sb_val_cell *a, const struct sb_val_cell *b, int full)
{
	int c = strcmp(a->task, b->task);
	if (!c)
		c = strcmp(a->method, b->method);
	if (!c)
		c = (a->seed > b->seed) - (a->seed < b->seed);
	if (!c && full)
		c = strcmp(a->arch, b->arch);
	if (!c && full)
		c = strcmp(a->tier, b->tier);
	return c;
}

static int fz_cmp(int a, int b, void *cells)
{
	const struct sb_fz_cell *c = cells;
	return sb_fz_vc_cmp(c[a].vc, c[b].vc, 0);
}

int sb_fz_topk_cells(const struct sb_vallog *logs, int n_logs, const char *tier, const char *arch, int patience,
                     int64_t budget, struct sb_fz_cell **out, size_t *n, struct sb_err *err)
{
	*out = NULL;
	*n = 0;
	size_t n_all = 0;
	for (int i = 0; i < n_logs; i++)
		n_all += logs[i].n_cells;
	struct sb_fz_cell *cells = calloc(n_all ? n_all : 1, sizeof *cells);
	struct sb_runsel_item *rs = calloc(n_all ? n_all : 1, sizeof *rs);
	if (!cells || !rs) {
		free(cells);
		free(rs);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	size_t nc = 0;
	for (int i = 0; i < n_logs; i++)
		for (size_t j = 0; j < logs[i].n_cells; j++) {
			const struct sb_val_cell *vc = &logs[i].cells[j];
			if ((tier && strcmp(vc->tier, tier) != 0) || (arch && strcmp(vc->arch, arch) != 0))
				continue;
			struct sb_fz_cell *ce = &cells[nc];
			ce->vc = vc;
			ce->log = i;
			ce->superseded_by = -1;
			ce->reason = sb_fz_row_filtered(vc, ce->reason_buf, sizeof ce->reason_buf);
			rs[nc].completed = !ce->reason;
			rs[nc].whole = !ce->reason && !sb_fz_cell_unusable(vc, budget ? 0 : patience, budget, &ce->acc,
			                                                   &ce->epoch, ce->reason_buf,
			                                                   sizeof ce->reason_buf);
			nc++;
		}
	int n_keys, rc;
	if ((rc = sb_runsel_keys(rs, nc, fz_cmp, cells, &n_keys, err)) ||
	    (rc = sb_runsel_resolve(rs, nc, n_keys, NULL, err))) {
		free(cells);
		free(rs);
		return rc;
	}
	for (size_t k = 0; k < nc; k++) {
		struct sb_fz_cell *ce = &cells[k];
		ce->disp = rs[k].disp;
		int p = ce->supersedes = rs[k].supersedes;
		if (p >= 0) {
			struct sb_fz_cell *early = &cells[p];
			early->superseded_by = (int)k;
			/* the later log by its index in the selection's validation_logs, not by its path:
			 * the reason must read the same wherever sb-test finds the logs (it compares it) */
			snprintf(early->reason_buf, sizeof early->reason_buf,
			         "superseded by cell %s of validation_logs[%d] (a later log)", ce->vc->cell_id, ce->log);
			early->reason = early->reason_buf;
		}
	}
	for (size_t k = 0; k < nc; k++) {
		struct sb_fz_cell *ce = &cells[k];
		if (ce->disp == SB_RUNSEL_WINNER_NOT_WHOLE)
			ce->reason = ce->reason_buf; /* sb_fz_cell_unusable's */
		ce->included = ce->disp == SB_RUNSEL_WINNER;
		if (ce->included)
			ce->reason = NULL;
	}
	free(rs);
	*out = cells;
	*n = nc;
	return 0;
}

int sb_fz_topk_select(const struct sb_fz_cell *cells, size_t n, int min_seeds, struct sb_selection *out,
                      struct sb_err *err)
{
	struct sb_sel_cell *sc = calloc(n ? n : 1, sizeof *sc);
	if (!sc)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	size_t ns = 0;
	for (size_t k = 0; k < n; k++)
		if (cells[k].included)
			sc[ns++] = (struct sb_sel_cell){cells[k].vc->task, cells[k].vc->method, cells[k].vc->seed,
			                                cells[k].acc};
	int rc = sb_select_topk(sc, ns, sb_topk_methods, 3, min_seeds, out, err);
	free(sc);
	return rc;
}

const struct sb_fz_cell *sb_fz_plan_cell(const struct sb_fz_cell *cells, size_t n, const char *task,
                                         const char *method, int64_t seed, const struct sb_val_epoch **full)
{
	*full = NULL;
	for (size_t k = 0; k < n; k++) {
		const struct sb_fz_cell *c = &cells[k];
		if (c->included && c->vc->seed == seed && strcmp(c->vc->task, task) == 0 &&
		    strcmp(c->vc->method, method) == 0) {
			*full = sb_val_cell_epoch(c->vc, c->vc->epochs);
			return c;
		}
	}
	return NULL;
}

void sb_fz_key_cell(struct sb_jw *w, const char *task, const char *method, int64_t seed)
{
	sb_jw_kstr(w, "task", task);
	sb_jw_kstr(w, "method", method);
	sb_jw_kint(w, "seed", seed);
}

void sb_fz_cell_head(struct sb_jw *w, const struct sb_val_cell *vc, int included)
{
	sb_jw_kstr(w, "cell_id", vc->cell_id);
	sb_fz_key_cell(w, vc->task, vc->method, vc->seed);
	sb_jw_kstr(w, "tier", vc->tier);
	sb_jw_kstr(w, "arch", vc->arch);
	if (vc->epochs > 0)
		sb_jw_kint(w, "epochs", vc->epochs);
	else
		sb_jw_knull(w, "epochs");
	sb_jw_kbool(w, "included", included);
}

void sb_fz_topk_cell_write(struct sb_jw *w, const struct sb_fz_cell *ce)
{
	sb_jw_obj(w);
	sb_fz_cell_head(w, ce->vc, ce->included);
	if (ce->included) {
		sb_jw_knull(w, "reason");
		sb_jw_kint(w, "selected_epoch", ce->epoch);
		sb_jw_kf64(w, "val_accuracy", ce->acc);
	} else {
		sb_jw_kstr(w, "reason", ce->reason);
		sb_jw_knull(w, "selected_epoch");
		sb_jw_knull(w, "val_accuracy");
	}
	sb_jw_kint(w, "log", ce->log);
	sb_jw_obj_end(w);
}

const char *sb_fz_null_epochs_note(const char *path, const struct sb_val_cell *vc, char *buf, size_t n)
{
	size_t nn = 0, first = 0;
	for (size_t i = 0; i < vc->n_ep; i++)
		if (isnan(vc->ep[i].val_accuracy) && !nn++)
			first = i;
	if (!nn)
		return NULL;
	snprintf(buf, n, "%s: cell %s: %zu null validation accuracy(s), the first after epoch %lld: counted as no "
	         "improvement",
	         path, vc->cell_id, nn, (long long)vc->ep[first].epochs_completed);
	return buf;
}
