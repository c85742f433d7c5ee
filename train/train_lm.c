/* lm_train.c — sb-train's entry for LM cells (see train_lm.h). */
#include "train_lm.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "lm_train.h"

int sb_train_is_lm_cell(const struct sb_json *cell)
{
	return cell && cell->type == SB_JSON_OBJECT && strcmp(sb_json_str(sb_json_get(cell, "family"), ""), "lm") == 0;
}

static void on_step(void *arg, int64_t step, int64_t steps, double loss, double secs)
{
	const struct sb_train_lm_prog *p = arg;
	sb_progress(step == steps, "%s: step %lld/%lld loss %.4f (%.0f s)", p->cell_id, (long long)step,
		    (long long)steps, loss, secs);
	/* testing hook: die like kill -9 after this step's records and checkpoint */
	const char *stop = getenv("SB_TRAIN_STOP_AFTER_STEPS");
	if (stop && atoll(stop) > 0 && step >= atoll(stop)) {
		fflush(NULL);
		_exit(137);
	}
}

static void on_start(void *arg, const char *run_dir, int64_t from_step, int64_t steps)
{
	const struct sb_train_lm_prog *p = arg;
	static int warned; /* once per process: the kernel set is the process's */
	const char *note = sb_lm_train_blas_note(p->be);
	if (note && !warned && !sb_quiet) {
		sb_cli_warn("%s", note);
		warned = 1;
	}
	if (from_step > 0)
		sb_progress(1, "%s: resumed after step %lld/%lld (%s)", p->cell_id, (long long)from_step,
			    (long long)steps, run_dir);
}

struct sb_lm_progress sb_train_lm_progress(struct sb_train_lm_prog *p)
{
	struct sb_lm_progress prog = {on_step, p, on_start};
	return prog;
}

int sb_train_lm_cell(const struct sb_json *cell, const char *runs_dir, struct sb_backend *be, FILE *out, int *skipped,
		     struct sb_err *err)
{
	struct sb_lm_cell c;
	SB_TRY(sb_lm_cell_parse(&c, cell, err));
	SB_TRY(sb_lm_cell_id(&c, err));
	char run_dir[4096];
	struct sb_train_lm_prog tp = {c.cell_id, be};
	struct sb_lm_progress prog = sb_train_lm_progress(&tp);
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
