/* train_sas.c — sb-train's entry for SAS cells (see train_sas.h). */
#include "train_sas.h"

#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cli.h"
#include "io.h"
#include "record.h"

int sb_train_sas_take(struct sb_train_sas_cells *q, const struct sb_json *cell, int *taken, struct sb_err *err)
{
	*taken = 0;
	if (!sb_sas_is_cell(cell))
		return 0;
	*taken = 1;
	if (q->n == q->cap) {
		int cap = q->cap ? 2 * q->cap : 8;
		struct sb_sas_cell *c = realloc(q->c, (size_t)cap * sizeof *c);
		if (!c)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		q->c = c;
		q->cap = cap;
	}
	SB_TRY(sb_sas_cell_parse(&q->c[q->n], cell, err));
	for (int i = 0; i < q->n; i++)
		if (!strcmp(q->c[i].cell_id, q->c[q->n].cell_id))
			return SB_ERR(err, SB_EDATA, "SAS cell '%s' given twice", q->c[i].cell_id);
	q->n++;
	return 0;
}

void sb_train_sas_free(struct sb_train_sas_cells *q)
{
	free(q->c);
	memset(q, 0, sizeof *q);
}

static void progress(void *arg, const char *phase, int step, int steps, double loss)
{
	sb_progress(step == steps && strncmp(phase, "pretrain", 8), "%s: %s step %d/%d loss %.4f", (const char *)arg,
	            phase, step, steps, loss);
}

int sb_train_sas_run(struct sb_train_sas_cells *q, int n_other, const char *runs_dir, const char *device, FILE *out,
                     struct sb_err *err)
{
	if (n_other)
		return SB_ERR(err, SB_EUSAGE, "a cells file mixes %d SAS cell%s with %d other%s: train them separately",
		              q->n, q->n == 1 ? "" : "s", n_other, n_other == 1 ? "" : "s");
	if (strcmp(device, "cpu"))
		return SB_ERR(err, SB_EUSAGE, "SAS cells run on the CPU (--device cpu), not '%s'", device);
	struct sb_backend *be = NULL;
	SB_TRY(sb_backend_open("cpu", 1, &be, err));
	int rc = sb_mkdir_p(runs_dir, err);
	struct sb_jw w;
	sb_jw_init(&w, out);
	struct sb_run_meta meta = {.device = be->device, .threads = 1};
	if (!rc)
		rc = sb_record_run_meta(&w, &meta, err);
	int first = 0;
	for (int i = 0; i < q->n && !rc; i++) {
		struct sb_err e = {0};
		char run_dir[4096];
		int r = sb_sas_train_cell(be, &q->c[i], runs_dir, run_dir, progress, q->c[i].cell_id, &e);
		if (r) {
			sb_cli_warn("cell %s failed: %s", q->c[i].cell_id, e.msg);
			if (!first) {
				first = r;
				*err = e;
			}
		}
		sb_jw_record(&w, "sas.train", 1);
		sb_jw_kstr(&w, "cell_id", q->c[i].cell_id);
		sb_jw_kstr(&w, "run_dir", run_dir);
		sb_jw_kstr(&w, "status", r ? "failed" : "completed");
		if (r)
			sb_jw_kstr(&w, "error", e.msg);
		sb_jw_obj_end(&w);
		rc = sb_jw_line(&w, err);
	}
	sb_jw_free(&w);
	sb_backend_close(be);
	return rc ? rc : first;
}
