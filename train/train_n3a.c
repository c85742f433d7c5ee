/* train_n3a.c — sb-train's entry for N3-A cells (see train_n3a.h). */
#include "train_n3a.h"

#include <stdio.h>

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hash.h"
#include "n3a.h"

static void progress(void *arg, const char *cell_id, const char *unit, int done, int units, double secs)
{
	sb_progress(done == units, "%s: %s done (%d/%d units, %.0f s)", cell_id, unit, done, units, secs);
}

int sb_train_n3a_check(const struct sb_json *cell, char *id, char *canon, struct sb_err *err)
{
	struct sb_n3a_cell c;
	SB_TRY(sb_n3a_cell_parse(&c, cell, err));
	snprintf(id, 128, "%s", c.cell_id);
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_n3a_cell_json(&w, &c);
	int rc = sb_sha256_json_canonical(&w, canon, err);
	sb_jw_free(&w);
	return rc;
}

static int fault_of(const char *s, int *fault, struct sb_err *err)
{
	*fault = SB_N3A_FAULT_NONE;
	if (!s || !*s)
		return 0;
	if (!strcmp(s, "g_no_renorm"))
		*fault = SB_N3A_FAULT_G_NO_RENORM;
	else if (!strcmp(s, "l_tail"))
		*fault = SB_N3A_FAULT_L_TAIL;
	else if (!strcmp(s, "replay"))
		*fault = SB_N3A_FAULT_REPLAY;
	else
		return SB_ERR(err, SB_EUSAGE, "SB_N3A_FAULT: unknown fault '%s'", s);
	return 0;
}

int sb_train_n3a_cell(const struct sb_json *cell, const char *runs_dir, struct sb_backend *be, FILE *out,
		      int *skipped, struct sb_err *err)
{
	*skipped = 0;
	if (strcmp(be->name, "cpu"))
		return SB_ERR(err, SB_EUSAGE, "N3-A cells run on the CPU (--device cpu), not '%s'", be->name);
	struct sb_n3a_cell c;
	SB_TRY(sb_n3a_cell_parse(&c, cell, err));
	SB_TRY(fault_of(getenv("SB_N3A_FAULT"), &c.fault, err));
	struct sb_backend *one = NULL;
	if (be->threads != 1)
		SB_TRY(sb_backend_open("cpu", 1, &one, err));
	char run_dir[4096] = "";
	int rc = sb_n3a_run_cell(one ? one : be, &c, runs_dir, run_dir, skipped, progress, NULL, err);
	sb_backend_close(one);
	if (out) {
		struct sb_err werr = {0};
		struct sb_jw w;
		sb_jw_init(&w, out);
		sb_jw_record(&w, "n3a.train", 1);
		sb_jw_kstr(&w, "cell_id", c.cell_id);
		sb_jw_kstr(&w, "run_dir", run_dir);
		sb_jw_kstr(&w, "status", rc ? "failed" : *skipped ? "skipped" : "completed");
		if (rc) {
			const char *reason = sb_n3a_guard_name(err->msg);
			if (reason)
				sb_jw_kstr(&w, "reason", reason);
			sb_jw_kstr(&w, "error", err->msg);
		}
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
