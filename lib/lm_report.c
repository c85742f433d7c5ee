/* lm_report.c — the LM track's report (Markdown + SVG) from eval.ndjson. */
#include "lm_eval.h"

int sb_lm_report_write(const char *eval_path, const char *out_dir, struct sb_err *err)
{
	return SB_ERR(err, SB_EINTERNAL, "report: not yet");
}
