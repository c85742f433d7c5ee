/* train_n3a.h — sb-train's entry for N3-A cells ("family": "n3a"; lib/n3a.h, docs/n3a.md).
 *
 * A row of sb-train's family table (train/sb-train.c), with the signature of the LM and
 * SAS entries. */
#ifndef SB_TRAIN_N3A_H
#define SB_TRAIN_N3A_H

#include <stdio.h>

#include "backend.h"
#include "err.h"
#include "json.h"

/* Run one N3-A cell (one block arch x r x seed: main D and S, forks S/L/P/G/N from S at
 * each parent) into runs_dir/CELL_ID and write one {"kind":"n3a.train","v":1,"cell_id",
 * "run_dir","status"("completed"|"skipped"|"failed")[,"reason","error"]} line to out (may
 * be NULL). N3-A runs on the CPU with one thread (a CPU backend with more threads is
 * replaced by a 1-thread one; another device is a usage error); parallelism is across
 * cells (make -j). *skipped = 1 when the run directory holds the completed cell. A failed
 * guard is SB_EVERDICT (exit 1), recorded in RUN_DIR/n3a.ndjson.
 * Testing hook: SB_N3A_FAULT=g_no_renorm|l_tail|replay runs a deliberately broken
 * operator or replay (enum sb_n3a_fault), which the checks must catch. */
int sb_train_n3a_cell(const struct sb_json *cell, const char *runs_dir, struct sb_backend *be, FILE *out,
		      int *skipped, struct sb_err *err);

/* Parses the cell without training: sb-train's read-time check. */
/* Validates a cell when it is read; id (128 bytes) receives its run id, canon (SB_SHA256_HEX
 * bytes) the SHA-256 of the complete cell (defaults filled in). */
int sb_train_n3a_check(const struct sb_json *cell, char *id, char *canon, struct sb_err *err);

#endif
