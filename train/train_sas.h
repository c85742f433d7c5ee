/* train_sas.h — sb-train's entry for SAS cells ("family": "sas"; lib/sas_run.h).
 *
 * sb-train's dispatch is at the point where cells are read: read_cells hands every
 * cell to sb_train_sas_take first, which keeps the SAS ones; main then runs them
 * with sb_train_sas_run (a cells file holds SAS cells or others, not both). */
#ifndef SB_TRAIN_SAS_H
#define SB_TRAIN_SAS_H

#include <stdio.h>

#include "err.h"
#include "json.h"
#include "sas_run.h"

struct sb_train_sas_cells {
	struct sb_sas_cell *c;
	int n, cap;
};

/* *taken = 1 when cell is a SAS cell (parsed and queued; a malformed one is an
 * SB_EDATA error), 0 when it is not one (left to the caller). */
int sb_train_sas_take(struct sb_train_sas_cells *q, const struct sb_json *cell, int *taken, struct sb_err *err);
void sb_train_sas_free(struct sb_train_sas_cells *q);

/* Train the queued cells into runs_dir (CPU only). n_other: the other cells read
 * (must be 0). Writes run.meta and one sas.train record per cell to out; a failing
 * cell is reported on stderr and the others go on. Returns 0, or the first failing
 * cell's code (err holds its message). */
int sb_train_sas_run(struct sb_train_sas_cells *q, int n_other, const char *runs_dir, const char *device, FILE *out,
                     struct sb_err *err);

#endif
