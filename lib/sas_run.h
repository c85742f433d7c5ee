/* sas_run.h — SAS cells, run directories and records (PROTOCOL B; lib/sas.h).
 *
 * A cell is a JSON object with "family": "sas":
 *   {"family":"sas","seed":42,"corpus":"tinyshakespeare=/path/input.txt"}
 * optional: "id" (default sas-CORPUS-sSEED), T, block, topk, dsel, pre_steps,
 * pre_batch, pre_lr, pre_wd, pre_clip, sel_steps, sel_batch, sel_lr, sel_wd, sel_clip,
 * eval_windows, train_bytes, eval_bytes (defaults: PROTOCOL B). An unknown key is an
 * error (a typo must not silently fall back to a default). A cell with "backbone" is
 * the scaled comparison instead (lib/sas_scaled.h, its own fields).
 *
 * The corpus is sb-fetch's corpus directory (DIR/{train,valid,test}.safetensors) or
 * one text file cut at floor(0.9 n) and floor(0.95 n) (lib/lm_data.h). Tokens are
 * bytes. Training reads the first train_bytes of the train part; evaluation the first
 * eval_bytes of the valid and of the test part.
 *
 * The test part. PROTOCOL B reports test perplexity from one fixed procedure (no
 * hyper-parameter, epoch or method is chosen on validation), and the issue asks
 * sb-eval to report it. So sb-eval reads the test part of a SAS run's corpus here,
 * and only here; every record that carries a test number says so
 * ("test_read": "protocol_b_fixed_procedure"). sb-train never opens it.
 *
 * Run directory RUNS/CELL_ID:
 *   cell.json             the cell with every default filled in
 *   train.ndjson          run.meta, sas.pretrain.step / sas.selector.step {step, loss,
 *                         grad_norm}, sas.train.done (see sb_sas_train_cell)
 *   model.safetensors     backbone + selector after selector training (+ .sha256)
 *   eval.ndjson           (sb-eval) run.meta, sas.eval
 */
#ifndef SB_SAS_RUN_H
#define SB_SAS_RUN_H

#include <stdio.h>

#include "backend.h"
#include "err.h"
#include "json.h"
#include "lm_data.h"
#include "sas.h"
#include "sas_scaled.h"

struct sb_sas_cell {
	char cell_id[128];
	char corpus[4096]; /* NAME=PATH or PATH */
	struct sb_sas_cfg sc;
	struct sb_sas_proc proc;
	int scaled; /* a "backbone" cell: the scaled comparison (lib/sas_scaled.h) */
	struct sb_sas_scaled sx;
};

/* Is this JSON object a SAS cell ("family": "sas")? */
int sb_sas_is_cell(const struct sb_json *obj);
/* A cell field: an integer in [lo, hi] / a finite non-negative number (SB_EDATA naming
 * the field otherwise); shared by the two kinds of SAS cells. */
int sb_sas_field_int(const struct sb_json *v, const char *key, int lo, int hi, int *out, struct sb_err *err);
int sb_sas_field_num(const struct sb_json *v, const char *key, float *out, struct sb_err *err);
int sb_sas_cell_parse(struct sb_sas_cell *c, const struct sb_json *obj, struct sb_err *err);
void sb_sas_cell_json(struct sb_jw *w, const struct sb_sas_cell *c); /* an object value */

/* The first `limit` bytes of a corpus part ("train", "valid" or "test"; see above). */
int sb_sas_corpus_part(const char *spec, const char *part, size_t limit, struct sb_lm_corpus *c, struct sb_err *err);
/* "Tiny Shakespeare stands in for WikiText-2 ..." when the corpus is not WikiText-2, else "". */
const char *sb_sas_corpus_note(const char *corpus_name);

/* Progress of a long step (may be NULL). */
typedef void (*sb_sas_progress_fn)(void *arg, const char *phase, int step, int steps, double loss);

/* Is the cell finished in RUNS_DIR/ID: its cell.json the one this cell
 * writes, byte for byte, train.ndjson ending in sas.train.done, and model.safetensors the
 * checkpoint that record names, its metadata's cell_sha256 this cell's? Then sb-train skips it, as it skips a finished encoder or LM
 * cell (a SAS id is given, not a hash of the cell, so the file is compared). A scaled cell:
 * the same checks on its selectors (sb_sas_scaled_finished). */
int sb_sas_cell_finished(const struct sb_sas_cell *c, const char *runs_dir);
/* Train one cell into runs_dir/CELL_ID: dense pretraining, then the selector on the
 * frozen backbone. run_dir receives the directory (4096 bytes). meta: the run.meta of
 * train.ndjson. Writes train.ndjson and model.safetensors (+ .sha256) atomically. */
int sb_sas_train_cell(struct sb_backend *be, const struct sb_sas_cell *c, const char *runs_dir, char *run_dir,
                      sb_sas_progress_fn fn, void *arg, struct sb_err *err);

/* Is RUN_DIR a SAS run (cell.json says "family": "sas")? */
int sb_sas_is_run(const char *run_dir);
/* Evaluate a run directory: writes RUN_DIR/eval.ndjson (run.meta, sas.eval) atomically
 * and, when out is not NULL, the sas.eval record to it too. */
int sb_sas_eval_run(struct sb_backend *be, const char *run_dir, struct sb_jw *out, struct sb_err *err);

#endif
