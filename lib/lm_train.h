/* lm_train.h — one LM training cell (PROTOCOL C): a decoder trained on the
 * corpus + retrieval mixture, written as a run directory.
 *
 * A cell is one JSON object with "family": "lm" (fields and defaults in
 * docs/lm.md; every default is filled in before the cell is hashed):
 *   seed, model {lib/lm_model.h}, T, batch, steps, warmup, lr, lr_min,
 *   weight_decay, clip, b1, b2, eps, tile, corpora ["NAME=PATH", ...],
 *   mixture "NAME=W,...", haystack, data_seed, log_every, ckpt_every (0 = only the
 *   final checkpoint; N = also step-NNNNNN.safetensors every N steps, parameters only,
 *   each a point a killed run resumes from),
 *   warm_T and warm_steps (a short-context curriculum: the first warm_steps steps train
 *   on contexts of warm_T bytes, batch * T / warm_T of them per step; 0 = none).
 * cell_id = "lm.dense.sSEED.PATTERN.dD.HASH8", HASH8 = the first 8 hex digits of
 * the SHA-256 of the canonical JSON of the complete cell. An imported pretrained decoder
 * (fields "source" and "tokenizer"; no training fields) is "lm.pretrained.LnL.dD.HASH8".
 *
 * RUNS_DIR/CELL_ID/ (docs/lm.md), every file written atomically:
 *   cell.json        the complete cell, cell_id, parameter_count, the mixture as
 *                    used (items, weights, seed, corpora with split offsets and SHA-256)
 *   train.ndjson     run.meta, train.step every log_every steps, train.checkpoint after
 *                    each intermediate checkpoint, train.resume where a killed run went on,
 *                    then train.done or train.failed. Rewritten whole (atomically) after
 *                    every record, as the classifier's: the run is finished when, and only
 *                    when, it ends in train.done, written after the checkpoint it names.
 *   model.safetensors (+ .sha256) the trained parameters; metadata: format
 *                    "sparsebench.checkpoint", cell_id, steps, model (JSON), mixture (JSON)
 *   step-NNNNNN.safetensors (+ .sha256) with ckpt_every: the parameters after NNNNNN steps
 *   step-NNNNNN.optim.safetensors  AdamW's moments after NNNNNN steps, for the newest
 *                    checkpoint only and only while the run is unfinished
 * A cell whose train.ndjson already ends in train.done with the same cell_id is
 * not run again (*skipped = 1). Otherwise a run resumes from the newest checkpoint whose
 * train.checkpoint record, file (SHA-256 checked) and optimiser state are all there,
 * dropping the records after it, and gives the same bits as a run that was never
 * stopped; without one (ckpt_every 0, or killed before the first) it starts over.
 */
#ifndef SB_LM_TRAIN_H
#define SB_LM_TRAIN_H

#include <stdint.h>

#include "backend.h"
#include "err.h"
#include "json.h"
#include "lm_data.h"
#include "lm_model.h"

struct sb_lm_cell {
	uint64_t seed, data_seed;
	struct sb_lm_cfg model;
	int T, batch, steps, warmup, tile, log_every, ckpt_every;
	int warm_T, warm_steps; /* curriculum: the first warm_steps steps on contexts of warm_T
				 * (dividing T), batch * T / warm_T sequences (the same tokens) */
	double lr, lr_min, weight_decay, clip, b1, b2, eps;
	int n_corpora;
	char corpora[8][4200]; /* NAME=PATH */
	char mixture[1024];
	char haystack[64];
	/* a pretrained decoder (sb-lm import, lib/lm_import.h): the canonical JSON of its source
	 * (format, model_type, the files read with their SHA-256), "" for a trained cell; and
	 * the tokenizer file in the run directory ("" = bytes) */
	char source[8192];
	char tokenizer[64];
	char cell_id[128];
};

/* Every field at its default (docs/lm.md). */
void sb_lm_cell_defaults(struct sb_lm_cell *c);
/* Defaults, then the fields of obj (unknown fields are an error). */
int sb_lm_cell_parse(struct sb_lm_cell *c, const struct sb_json *obj, struct sb_err *err);
/* The complete cell as a JSON object (without cell_id). */
void sb_lm_cell_json(struct sb_jw *w, const struct sb_lm_cell *c);
/* Its fields only (inside an object the caller opens: cell.json adds cell_id, ...). */
void sb_lm_cell_fields(struct sb_jw *w, const struct sb_lm_cell *c);
/* An LM checkpoint: PATH (+ .sha256; sha receives the hex) from the tensors ts, with the
 * metadata format, family, cell_id, steps, model and KEY = VALUE (a trained run's mixture,
 * an imported run's source). */
int sb_lm_ckpt_write(const char *path, struct sb_tensors *ts, const struct sb_lm_cell *c, int64_t steps,
		     const char *key, const char *value, char *sha, struct sb_err *err);
/* RUN_DIR/cell.json (atomically): the cell's fields, cell_id, parameter_count and, when mix
 * is not NULL, mixture_used (the mixture as used). */
int sb_lm_cell_write(const char *run_dir, const struct sb_lm_cell *c, int64_t parameter_count,
		     const struct sb_lm_mix *mix, struct sb_err *err);
/* Fill c->cell_id from the canonical JSON. */
int sb_lm_cell_id(struct sb_lm_cell *c, struct sb_err *err);

/* The learning rate at 0-based step s: linear warmup over `warmup` steps, then
 * cosine from lr to lr_min at the last step. */
double sb_lm_lr(const struct sb_lm_cell *c, int64_t s);

struct sb_lm_progress {
	/* called after every step (may be NULL) */
	void (*fn)(void *arg, int64_t step, int64_t steps, double loss, double seconds);
	void *arg;
	/* called once before the first step (may be NULL): from_step > 0 when resumed */
	void (*start)(void *arg, const char *run_dir, int64_t from_step, int64_t steps);
};

/* A warning line when LM training on be runs OpenBLAS's generic pre-AVX2 kernels on an
 * AVX2 CPU (OpenBLAS does not know the model), naming the fix; NULL otherwise. The
 * kernel set is recorded in train.ndjson (run.meta and train.resume: blas, blas_generic). */
const char *sb_lm_train_blas_note(const struct sb_backend *be);

/* Train one cell into runs_dir/cell_id (created). run_dir (>= 4096 bytes) receives
 * the directory. */
int sb_lm_train_cell(struct sb_backend *be, struct sb_lm_cell *c, const char *runs_dir, char *run_dir, int *skipped,
		     const struct sb_lm_progress *prog, struct sb_err *err);

/* Open a trained (or imported) run: the cell, the model (parameters loaded, on be);
 * eval_only: an evaluation-only model (sb_lm_model_new_eval: half the memory). */
int sb_lm_run_open(struct sb_backend *be, const char *run_dir, int eval_only, struct sb_lm_cell *cell,
		   struct sb_lm_model **model, char *model_sha256, struct sb_err *err);

#endif
