/* train_lm.h — the LM track's entry for sb-train: a cell with "family": "lm".
 *
 * The lead's dispatch in train/sb-train.c is one test per cell:
 *   if (sb_train_is_lm_cell(cell)) rc = sb_train_lm_cell(cell, runs_dir, be, stdout, &skipped, &err);
 * (threads and the backend are sb-train's; cells of the LM family need the LM ops,
 * today the CPU backend). */
#ifndef SB_TRAIN_LM_H
#define SB_TRAIN_LM_H

#include <stdio.h>

#include "backend.h"
#include "err.h"
#include "json.h"
#include "lm_train.h"

/* Is this cell JSON object an LM cell ("family": "lm")? */
int sb_train_is_lm_cell(const struct sb_json *cell);

/* Train one LM cell into runs_dir/CELL_ID (lib/lm_train.h) and write one
 * {"kind":"lm.train","v":1,"cell_id":..,"run_dir":..,"status":..} line to out (may be
 * NULL). *skipped = 1 when the run directory already holds the finished cell. */
int sb_train_lm_cell(const struct sb_json *cell, const char *runs_dir, struct sb_backend *be, FILE *out, int *skipped,
		     struct sb_err *err);

/* The progress of LM training for sb-train and sb-lm train: a progress line per step; at
 * the start, the OpenBLAS warning (sb_lm_train_blas_note, once per process, not with -q)
 * and a line when the cell resumed; SB_TRAIN_STOP_AFTER_STEPS=N (testing) makes the
 * process _exit(137) after step N's records and checkpoint, as kill -9 would. */
struct sb_train_lm_prog {
	const char *cell_id;
	const struct sb_backend *be;
};
struct sb_lm_progress sb_train_lm_progress(struct sb_train_lm_prog *p);

#endif
