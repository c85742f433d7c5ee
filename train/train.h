/* train.h — sb-train internals: running one cell into its run directory. */
#ifndef SB_TRAIN_H
#define SB_TRAIN_H

#include <pthread.h>
#include <stdatomic.h>
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
	/* testing hook (SB_TRAIN_DEVICE_ERROR=N[:FILE]): after step N a cell fails as if its device
	 * context were lost; with FILE, only when this process removes FILE (once in all). The
	 * process's other cells then fail at their next step, and cells not started are not run,
	 * as on a GPU whose context is poisoned. */
	int64_t device_error_at_step;
	const char *device_error_once;
	atomic_int *device_lost; /* set once the (emulated) device is lost; NULL: no hook */
};

/* Outcome of one cell. */
enum cell_status { CELL_COMPLETED, CELL_SKIPPED, CELL_FAILED_NONFINITE, CELL_FAILED };

/* Train (or resume, or skip) one cell. Writes RUNS_DIR/CELL_ID/ and the cell's records
 * (also to env->out). Every failure is recorded as train.failed on env->out, and in the
 * run's train.ndjson once its log is settled (a fresh start, or a resume state found
 * intact): a failure before that (no run directory, a damaged checkpoint or optimiser
 * state, a dataset file other than the run's) leaves the run directory as it was. The
 * return value is then the error's code. */
int train_cell(const struct sb_cell *cell, int index, const struct sb_dataset *ds, struct sb_backend *be,
               const struct train_env *env, enum cell_status *status, struct sb_err *err);

/* Whether the emulated device of SB_TRAIN_DEVICE_ERROR has been lost in this process. */
int sb_train_device_lost(const struct train_env *env);

/* A cell that could not run (its device was lost before it started, or no backend could
 * be opened for it): its run directory gets run.meta (fresh runs) and a train.failed
 * record with status (e.g. "failed_device") and msg, also written to env->out (only
 * there when its run directory cannot be read or its resume state is damaged); a cell
 * that already finished is left alone. Resume state is kept. */
int train_cell_unrun(const struct sb_cell *cell, int index, const struct train_env *env, const char *status,
                     const char *msg, struct sb_err *err);

#endif
