/* train_cell.h — training cells and run directories (docs/records.md), shared by
 * sb-train, sb-eval and sb-test.
 *
 * A cell is one JSON object: task, method, seed (required) and epochs, batch, lr,
 * weight_decay, clip, tier, arch, limit, val_fraction, schedule, alpha, mask,
 * dropout, switch_epoch with the protocol's defaults (PROTOCOL A4): epochs 30,
 * batch 256, lr 1e-3, weight_decay 1e-4, clip 5.0, tier compact, arch plain,
 * limit 0, val_fraction 0.2, schedule constant, alpha 1.5, mask margin, dropout 0.1.
 *
 * method: a normaliser (attn_norm.h names), or a normaliser schedule (PROTOCOL A8,
 * epochs counted e = 1..E, i.e. e = epoch + 1):
 *   median_switch, early_accuracy_switch, entropy_switch, mechanistic_switch
 *       topk_softmax_025 while e < switch_epoch, then softmax (switch_epoch required);
 *   cosine_alpha
 *       entmax_bisect with alpha = max(1.05, 1 + 0.25 (1 - cos(pi (e - 1) / 29))).
 * schedule (learning rate): constant, or linear_decay: lr_t = lr (1 - t / T) at the
 * 0-based optimiser step t, T = steps_per_epoch * epochs.
 *
 * cell_id = TASK.METHOD.sSEED.ARCH.TIER.HASH8, HASH8 = the first 8 hex digits of the
 * SHA-256 of the canonical JSON of the complete cell: every field above (switch_epoch
 * only for switching methods), sorted keys, no spaces, integers as integers, other
 * numbers as sb_fmt_f64 writes them: C's "%.15g", else "%.16g", else "%.17g", the first
 * that reads back as the same double (so 1e-7 is "1e-07", 1e30 "1e+30"). So "lr": 0.001
 * and "lr": 1e-3 name the same cell, and so do -0 and 0 (a negative zero is stored and
 * hashed as 0).
 */
#ifndef SB_TRAIN_CELL_H
#define SB_TRAIN_CELL_H

#include <stddef.h>
#include <stdint.h>

#include "attn_norm.h"
#include "dataset.h"
#include "encoder.h"
#include "err.h"
#include "json.h"

struct sb_cell {
	char task[64], method[64], tier[16], arch[32], schedule[32], mask[16];
	uint64_t seed;
	int epochs, batch, switch_epoch;
	int64_t limit;
	double lr, weight_decay, clip, val_fraction, alpha, dropout;
	char cell_id[192];
};

void sb_cell_defaults(struct sb_cell *c);
/* Parse a cell object. strict: unknown keys are an error (cells given to sb-train);
 * otherwise the derived fields of cell.json are accepted too. Validates every value
 * and computes cell_id. alpha (strict): in [1.05, 2] and only for entmax_bisect, as
 * switch_epoch is only for the switching methods; a run's cell.json (not strict) has
 * alpha for every method, and one in [1, 10] is read as earlier versions wrote it. */
int sb_cell_from_json(const struct sb_json *obj, int strict, struct sb_cell *c, struct sb_err *err);
/* A run's cell.json (parsed; read from path, NULL: "cell.json"): valid for the cell layer
 * (sb_cell_from_json, not strict) and its cell_id the one its fields hash to, the cell in *c
 * (may be NULL). SB_EDATA otherwise, "PATH: ..." (an edited cell.json). */
int sb_cell_json_check(const struct sb_json *cell, const char *path, struct sb_cell *c, struct sb_err *err);
/* The range of a numeric cell field, as sb_cell_from_json checks it (sb-train's flags
 * check the same): an integer in [ilo, ihi], or a number in [lo, hi] ([lo, hi) with
 * hi_open). NULL for a key that is not a numeric field. */
struct sb_cell_range {
	const char *key;
	int integer, hi_open;
	int64_t ilo, ihi;
	double lo, hi;
};
const struct sb_cell_range *sb_cell_range(const char *key);
/* "an integer in [1, 100000]", "a number in [0, 1)" */
void sb_cell_range_text(const struct sb_cell_range *r, char *buf, size_t n);
/* Is v a finite number in the range of a non-integer field? */
int sb_cell_range_check(const struct sb_cell_range *r, double v);
/* Validate and compute cell_id (after filling fields by hand). */
int sb_cell_finish(struct sb_cell *c, struct sb_err *err);
/* The canonical JSON of the complete cell (the text that is hashed). */
void sb_cell_canonical(const struct sb_cell *c, struct sb_jw *w);
/* Write the cell's fields as members of an open object (not canonical order). */
void sb_cell_write_fields(const struct sb_cell *c, struct sb_jw *w);

/* The normaliser in effect in 0-based epoch `epoch` (mask mode from the cell). */
int sb_cell_norm_at(const struct sb_cell *c, int epoch, struct sb_norm *out, struct sb_err *err);
/* The normaliser of the model's parameter table (HAE or not) for sb_encoder_new. */
int sb_cell_norm_base(const struct sb_cell *c, struct sb_norm *out, struct sb_err *err);
/* The learning rate of 0-based optimiser step t of T. */
double sb_cell_lr_at(const struct sb_cell *c, int64_t t, int64_t T);
/* Model configuration for the cell on a dataset (shapes, tier, arch, normaliser). */
int sb_cell_model_cfg(const struct sb_cell *c, const struct sb_dataset *ds, struct sb_encoder_cfg *cfg,
                      struct sb_err *err);

/* The model of a run directory after `epochs_completed` epochs, ready for
 * sb_encoder_evaluate / sb_encoder_forward (what sb-eval and sb-test need): reads
 * RUN_DIR/cell.json into *cell, builds the model for ds on be (batches up to
 * max_batch; 0 = the cell's batch), sets the normaliser in effect in that epoch
 * (schedules), loads RUN_DIR/epoch-NNN.safetensors (verified against its .sha256
 * sidecar and its cell_id metadata). ds must be the cell's task (pool or test file). */
int sb_run_open_model(const char *run_dir, int epochs_completed, const struct sb_dataset *ds, struct sb_backend *be,
                      int max_batch, struct sb_cell *cell, struct sb_encoder **out, struct sb_err *err);

/* Read RUN_DIR/cell.json. */
int sb_cell_read(const char *run_dir, struct sb_cell *c, struct sb_err *err);
/* "RUN_DIR/epoch-NNN.safetensors" (NNN = epochs_completed, at least 3 digits). */
void sb_run_checkpoint_path(char *buf, size_t n, const char *run_dir, int epochs_completed);
/* "RUN_DIR/epoch-NNN.optim.safetensors": the optimiser state of the newest epoch. */
void sb_run_optim_path(char *buf, size_t n, const char *run_dir, int epochs_completed);

#endif
