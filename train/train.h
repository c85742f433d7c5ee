/* train.h — sb-train internals: running one cell into its run directory. */
#ifndef SB_TRAIN_H
#define SB_TRAIN_H

#include <pthread.h>
#include <stdio.h>

#include "backend.h"
#include "dataset.h"
#include "json.h"
#include "record.h"
#include "train_cell.h"

/* What every cell runner shares: the output stream and the run.meta of the process. */
struct train_env {
	const char *runs_dir;
	FILE *out;               /* records (stdout) */
	pthread_mutex_t *out_mu; /* one record line at a time; progress lines too */
	const struct sb_run_meta *meta;
	int ncells;
	int64_t stop_after_steps; /* testing hook (SB_TRAIN_STOP_AFTER_STEPS): exit(137) after so many steps */
	int64_t nan_at_step; /* testing hook (SB_TRAIN_NAN_AT_STEP=k): step k's loss reads as NaN (k >= 1: step k-1) */
};

/* Outcome of one cell. */
enum cell_status { CELL_COMPLETED, CELL_SKIPPED, CELL_FAILED_NONFINITE, CELL_FAILED };

/* Train (or resume, or skip) one cell. Writes RUNS_DIR/CELL_ID/ and the cell's records
 * (also to env->out). Any failure after the run directory exists is recorded as
 * train.failed there and on env->out; the return value is then the error's code. */
int train_cell(const struct sb_cell *cell, int index, const struct sb_dataset *ds, struct sb_backend *be,
               const struct train_env *env, enum cell_status *status, struct sb_err *err);

#endif
