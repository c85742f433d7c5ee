/* train_sas.h — sb-train's entry for SAS cells ("family": "sas"; lib/sas_run.h).
 *
 * A row of sb-train's family table (train/sb-train.c): the same signature as the LM
 * track's sb_train_lm_cell. */
#ifndef SB_TRAIN_SAS_H
#define SB_TRAIN_SAS_H

#include <stdio.h>

#include "backend.h"
#include "err.h"
#include "json.h"

/* Train one SAS cell (PROTOCOL B's tiny decoder, or a selector on a frozen LM-track
 * backbone) into runs_dir/CELL_ID and write one {"kind":"sas.train","v":1,"cell_id",
 * "run_dir","status"[,"error"]} line to out (may be NULL). SAS runs on the CPU with one
 * thread (lib/sas_lm.h): a CPU backend with more threads is replaced by a 1-thread one
 * for the cell; another device is a usage error. *skipped is always 0 (a SAS cell
 * retrains: it takes seconds). */
int sb_train_sas_cell(const struct sb_json *cell, const char *runs_dir, struct sb_backend *be, FILE *out,
                      int *skipped, struct sb_err *err);

/* Parses the cell (unknown fields, ranges) without training: sb-train's read-time check. */
/* Validates a cell when it is read; id (128 bytes) receives its run id, canon (SB_SHA256_HEX
 * bytes) the SHA-256 of the complete cell (defaults filled in). */
int sb_train_sas_check(const struct sb_json *cell, char *id, char *canon, struct sb_err *err);

#endif
