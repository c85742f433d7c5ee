/* lm_train.c — sb-train's entry for LM cells (see train_lm.h). */
#include "train_lm.h"

#include <string.h>

#include "cli.h"
#include "lm_train.h"

int sb_train_is_lm_cell(const struct sb_json *cell)
{
	return cell && cell->type == SB_JSON_OBJECT && strcmp(sb_json_str(sb_json_get(cell, "family"), ""), "lm") == 0;
}

static void on_step(void *arg, int64_t step, int64_t steps, double loss, double secs)
{
	sb_progress(step == steps, "%s: step %lld/%lld loss %.4f (%.0f s)", (const char *)arg, (long long)step,
		    (long long)steps, loss, secs);
}

int sb_train_lm_cell(const struct sb_json *cell, const char *runs_dir, struct sb_backend *be, FILE *out, int *skipped,
		     struct sb_err *err)
{
	struct sb_lm_cell c;
	SB_TRY(sb_lm_cell_parse(&c, cell, err));
	SB_TRY(sb_lm_cell_id(&c, err));
	char run_dir[4096];
	struct sb_lm_progress prog = {on_step, c.cell_id};
	int rc = sb_lm_train_cell(be, &c, runs_dir, run_dir, skipped, &prog, err);
	if (out) {
		struct sb_jw w;
		struct sb_err e2 = {0};
		sb_jw_init(&w, out);
		sb_jw_record(&w, "lm.train", 1);
		sb_jw_kstr(&w, "cell_id", c.cell_id);
		sb_jw_kstr(&w, "run_dir", run_dir);
		sb_jw_kstr(&w, "status", rc ? "failed" : *skipped ? "skipped" : "completed");
		if (rc)
			sb_jw_kstr(&w, "error", err->msg);
		sb_jw_obj_end(&w);
		int r2 = sb_jw_line(&w, &e2);
		sb_jw_free(&w);
		if (!rc && r2) {
			*err = e2;
			rc = r2;
		}
	}
	return rc;
}
