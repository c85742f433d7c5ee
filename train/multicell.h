/* multicell.h — train many cells of one task and architecture in one process
 * (DESIGN §6 "Throughput", "Failure isolation"; docs/cuda.md says why this design).
 *
 * Each cell gets its own backend (on CUDA: its own stream, cuBLAS handle,
 * workspace and memory) and its own host thread; up to max_active cells run at
 * once and share the device, which overlaps their kernels. A cell's arithmetic
 * does not depend on what runs beside it, so its results are bit-identical to
 * training it alone (tests/gpu checks this).
 *
 * The caller's per-cell work is a function fn(be, cell, err): it builds the
 * model on `be`, trains, writes its records, and returns 0 or an sb_code. The
 * driver classifies the outcome:
 *   SB_MC_OK             fn returned 0
 *   SB_MC_FAILED         fn failed with the backend still healthy (bad data,
 *                        I/O): the cell's own failure
 *   SB_MC_FAILED_DEVICE  the backend failed (a CUDA or cuBLAS error), or the
 *                        device context was lost by any cell, or the backend
 *                        could not be opened: the caller writes a train.failed
 *                        record with status "failed_device" and the pipeline
 *                        retries the cell in a new process
 *   SB_MC_NOT_RUN        not started because the device was already lost
 *                        (also "failed_device" for the records)
 * Once a context-poisoning error is seen, cells not yet started are not run.
 */
#ifndef SB_MULTICELL_H
#define SB_MULTICELL_H

#include "backend.h"
#include "err.h"

enum sb_mc_status { SB_MC_PENDING = 0, SB_MC_OK, SB_MC_FAILED, SB_MC_FAILED_DEVICE, SB_MC_NOT_RUN };

struct sb_mc_cell {
	const char *id; /* for messages */
	void *arg;      /* the caller's cell */
	/* filled by sb_multicell_run */
	enum sb_mc_status status;
	struct sb_err err;
	double seconds; /* wall time of fn */
};

typedef int (*sb_mc_cell_fn)(struct sb_backend *be, struct sb_mc_cell *cell, struct sb_err *err);

struct sb_mc_opts {
	const char *device; /* "cuda", "cuda:1,tf32", "cpu" */
	int threads;        /* per backend (CPU: worker threads; CUDA: ignored) */
	int max_active;     /* cells at once (0: all) */
	/* optional: called (under a lock) when a cell finishes */
	void (*done)(struct sb_mc_cell *cell, void *ctx);
	void *done_ctx;
};

/* Runs fn on every cell. Returns 0 when every cell is SB_MC_OK, SB_EINTERNAL when
 * any cell failed on the device (exit code 5), else the code of the first failed
 * cell. err gets a summary. */
int sb_multicell_run(const struct sb_mc_opts *o, struct sb_mc_cell *cells, int n, sb_mc_cell_fn fn,
		     struct sb_err *err);

const char *sb_mc_status_name(enum sb_mc_status s);

#endif
