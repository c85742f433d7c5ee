/* eval_sas.c — sb-eval's entry for SAS run directories (see eval_sas.h). */
#include "eval_sas.h"

#include "backend.h"
#include "cli.h"
#include "sas_run.h"

int sb_eval_sas_is_run(const char *run_dir)
{
	return sb_sas_is_run(run_dir);
}

int sb_eval_sas(const char *run_dir, struct sb_jw *std, struct sb_err *err)
{
	struct sb_backend *be = NULL;
	SB_TRY(sb_backend_open("cpu", 1, &be, err));
	sb_progress(0, "%s: SAS evaluation", run_dir);
	int rc = sb_sas_eval_run(be, run_dir, std, err);
	sb_backend_close(be);
	return rc;
}
