/* eval_sas.h — sb-eval's entry for SAS run directories (cell.json "family": "sas").
 *
 * sb-eval's dispatch is one test per RUN_DIR:
 *   rc = sb_eval_sas_is_run(dir) ? sb_eval_sas(dir, &std, &e) : eval_run(...);
 * It writes RUN_DIR/eval.ndjson (run.meta, sas.eval; lib/sas_run.h) and the
 * sas.eval record to sb-eval's stdout. */
#ifndef SB_EVAL_SAS_H
#define SB_EVAL_SAS_H

#include "err.h"
#include "json.h"

int sb_eval_sas_is_run(const char *run_dir);
int sb_eval_sas(const char *run_dir, struct sb_jw *std, struct sb_err *err);

#endif
