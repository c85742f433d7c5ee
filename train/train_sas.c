/* train_sas.c — sb-train's entry for SAS cells (see train_sas.h). */
#include "train_sas.h"

#include <string.h>

#include "cli.h"
#include "hash.h"
#include "sas_run.h"

static void progress(void *arg, const char *phase, int step, int steps, double loss)
{
	sb_progress(step == steps && strncmp(phase, "pretrain", 8), "%s: %s step %d/%d loss %.4f", (const char *)arg,
	            phase, step, steps, loss);
}

int sb_train_sas_check(const struct sb_json *cell, char *id, char *canon, struct sb_err *err)
{
	struct sb_sas_cell c;
	SB_TRY(sb_sas_cell_parse(&c, cell, err));
	snprintf(id, 128, "%s", c.scaled ? c.sx.cell_id : c.cell_id);
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	if (c.scaled)
		sb_sas_scaled_json(&w, &c.sx);
	else
		sb_sas_cell_json(&w, &c);
	int rc = sb_sha256_json_canonical(&w, canon, err);
	sb_jw_free(&w);
	return rc;
}

int sb_train_sas_cell(const struct sb_json *cell, const char *runs_dir, struct sb_backend *be, FILE *out,
                      int *skipped, struct sb_err *err)
{
	*skipped = 0;
	if (strcmp(be->name, "cpu"))
		return SB_ERR(err, SB_EUSAGE, "SAS cells run on the CPU (--device cpu), not '%s'", be->name);
	struct sb_sas_cell c;
	SB_TRY(sb_sas_cell_parse(&c, cell, err));
	if (sb_sas_cell_finished(&c, runs_dir)) { /* as a finished encoder or LM cell is */
		*skipped = 1;
		if (out) {
			struct sb_jw w;
			sb_jw_init(&w, out);
			sb_jw_record(&w, "sas.train", 1);
			sb_jw_kstr(&w, "cell_id", c.cell_id);
			char run_dir[4200];
			snprintf(run_dir, sizeof run_dir, "%s/%s", runs_dir, c.cell_id);
			sb_jw_kstr(&w, "run_dir", run_dir);
			sb_jw_kstr(&w, "status", "skipped");
			sb_jw_obj_end(&w);
			int wr = sb_jw_line(&w, err);
			sb_jw_free(&w);
			return wr;
		}
		return 0;
	}
	struct sb_backend *one = NULL;
	if (be->threads != 1)
		SB_TRY(sb_backend_open("cpu", 1, &one, err));
	char run_dir[4096] = "";
	int rc = sb_sas_train_cell(one ? one : be, &c, runs_dir, run_dir, progress, c.cell_id, err);
	sb_backend_close(one);
	if (out) {
		struct sb_err werr = {0};
		struct sb_jw w;
		sb_jw_init(&w, out);
		sb_jw_record(&w, "sas.train", 1);
		sb_jw_kstr(&w, "cell_id", c.cell_id);
		sb_jw_kstr(&w, "run_dir", run_dir);
		sb_jw_kstr(&w, "status", rc ? "failed" : "completed");
		if (rc)
			sb_jw_kstr(&w, "error", err->msg);
		sb_jw_obj_end(&w);
		int wr = sb_jw_line(&w, &werr);
		sb_jw_free(&w);
		if (wr && !rc) {
			*err = werr;
			rc = wr;
		}
	}
	return rc;
}
