/* evalrun.h — evaluate one saved checkpoint of a run directory on a set of
 * examples: the one place where sb-eval and sb-test call the compute engine
 * (lib/encoder.h, lib/train_cell.h).
 *
 * A struct sb_evalrun holds what stays the same across the checkpoints of a
 * run (the parsed cell, the backend, a model built from the cell's
 * configuration exactly as sb-train builds it), so that the epochs of a cell
 * are evaluated without rebuilding it.
 */
#ifndef SB_EVALRUN_H
#define SB_EVALRUN_H

#include <stdint.h>

#include "dataset.h"
#include "err.h"
#include "json.h"
#include "probe_feat.h"

struct sb_evalrun_opts {
	const char *device; /* "cpu" (default) or "cuda[:N]" */
	int threads;        /* 0 = all cores */
	int batch;          /* 0 = the cell's batch */
	int probe;          /* 1: also the probe features of PROTOCOL A8 M1 (lib/probe_feat.h) */
	const char *cell_path; /* the file the cell was read from, for messages (NULL: "cell.json") */
};

struct sb_evalrun_result {
	int64_t n, correct;
	double accuracy, macro_f1, loss;
	double attention_density, attention_entropy;
	double alpha_mean, alpha_std; /* NaN unless headwise_adaptive_entmax */
	struct sb_probe_feat probe;   /* with opts.probe: on the first examples of idx (probe.n 0 otherwise) */
};

struct sb_evalrun;

/* Can this process evaluate on device (NULL: "cpu") with threads workers? The backend is
 * opened and closed again, so that a missing GPU or a device name this build cannot use is
 * found before any data is read (sb-test: before the read is recorded). */
int sb_evalrun_available(const char *device, int threads, struct sb_err *err);

/* Check a cell (the parsed cell.json of a run directory, read from path; NULL:
 * "cell.json"): valid for the engine's cell layer (sb_cell_from_json), and its
 * cell_id the one its fields hash to. SB_EDATA otherwise, "PATH: ..." (an edited
 * cell.json). Callers that may skip sb_evalrun_open (sb-eval, when every epoch is
 * unchanged; sb-test, before the read) call it themselves. */
int sb_evalrun_cell_check(const struct sb_json *cell, const char *path, struct sb_err *err);

/* Build the model a cell (the parsed cell.json of a run directory) describes,
 * for dataset ds (the pool or the test file of the cell's task). The cell is
 * validated by the engine's cell layer (sb_cell_from_json) and its cell_id must
 * be the one its fields hash to (SB_EDATA otherwise: an edited cell.json; as
 * sb_evalrun_cell_check, naming o->cell_path). */
int sb_evalrun_open(const struct sb_json *cell, const struct sb_dataset *ds, const struct sb_evalrun_opts *o,
                    struct sb_evalrun **out, struct sb_err *err);

/* Load the checkpoint saved after `epochs_completed` epochs and evaluate
 * examples idx[0..n) of ds (PROTOCOL A4 evaluate): metrics, attention
 * statistics, and one correctness bit per example in idx order (bit i of byte
 * i/8, least significant first) into correct[(n+7)/8].
 *   - The file is read once; when expect_sha256 is not NULL its bytes must hash
 *     to it (SB_EDATA otherwise): what is evaluated is what the caller verified.
 *   - Its metadata must say format "sparsebench.checkpoint", this cell's cell_id
 *     and this epochs_completed (SB_EDATA otherwise).
 *   - The normaliser is the one in effect in that epoch (schedules of PROTOCOL A8
 *     switch it), and must be the one the checkpoint's metadata names. */
int sb_evalrun_checkpoint(struct sb_evalrun *r, const char *checkpoint, const char *expect_sha256, int epochs_completed,
                          const uint32_t *idx, int64_t n, struct sb_evalrun_result *res, uint8_t *correct,
                          struct sb_err *err);

/* Human-readable description of the device ("cpu", "cuda:0 NVIDIA ..."). */
const char *sb_evalrun_device(const struct sb_evalrun *r);
int sb_evalrun_threads(const struct sb_evalrun *r);
void sb_evalrun_close(struct sb_evalrun *r);

#endif
