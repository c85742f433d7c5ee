/* eval_lm.h — the LM track's entry for sb-eval: a run directory whose cell.json
 * has "family": "lm".
 *
 * The lead's dispatch in evalsel/sb-eval.c is one test per RUN_DIR:
 *   if (sb_eval_is_lm_run(run_dir)) rc = sb_eval_lm_run(run_dir, be, &err);
 * It writes RUN_DIR/eval.ndjson (atomically): run.meta, then the records of
 * lib/lm_eval.h (lm.eval.setup, lm.budget, lm.fidelity.window, lm.fidelity,
 * lm.fidelity.pair, probe.result, lm.retrieval, lm.retrieval.pair, lm.efficiency,
 * lm.blocks) with the default evaluation (9 masks, 32 windows, 40 probes per task). */
#ifndef SB_EVAL_LM_H
#define SB_EVAL_LM_H

#include "backend.h"
#include "err.h"

int sb_eval_is_lm_run(const char *run_dir);
int sb_eval_lm_run(const char *run_dir, struct sb_backend *be, struct sb_err *err);
/* The same with evaluation settings KEY=VALUE (sb_lm_eval_set: probes=N, windows=N,
 * masks=LIST, tasks=LIST, bench_reps=N, budgets=LIST, seed=N) over the defaults. */
int sb_eval_lm_run_set(const char *run_dir, struct sb_backend *be, const char *const *settings, int n_settings,
		       struct sb_err *err);
/* Is SETTING one sb_eval_lm_run_set accepts? sb-eval checks --set while it reads its options,
 * so that a typo is a usage error before anything is evaluated or written. */
int sb_eval_lm_check_set(const char *setting, struct sb_err *err);
/* All the --set values together (sb_lm_eval_check: windows=0 with probes=0 is refused),
 * once sb-eval has read its options. */
int sb_eval_lm_check_settings(const char *const *settings, int n_settings, struct sb_err *err);

#endif
