/* vallog.h — validation logs (RUN_DIR/val.ndjson, written by sb-eval; read by
 * sb-eval itself to skip unchanged epochs, by sb-freeze and by sb-test).
 *
 * A validation log is NDJSON: run.meta, one eval.epoch per evaluated epoch
 * (docs/records.md), and a closing eval.done:
 *   {"kind":"eval.done","v":1,"cell_id","task","method","seed","tier","arch",
 *    "epochs" (the cell's budget), "epochs_evaluated", "train_status"}
 * train_status is the status of sb-train's train.done ("completed", ...) or
 * "incomplete" when the run directory had none. Other kinds are ignored.
 *
 * The reader takes the file into memory once, hashes those bytes and parses
 * the same bytes, so the hash it reports is the hash of what it read.
 */
#ifndef SB_VALLOG_H
#define SB_VALLOG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "hash.h"
#include "json.h"

struct sb_val_epoch {
	int64_t epoch;            /* 0-based */
	int64_t epochs_completed; /* epoch + 1 */
	int64_t n_val;
	double val_accuracy; /* NaN when the record holds null */
	double val_macro_f1, val_loss;
	char checkpoint_sha256[SB_SHA256_HEX];
	char correct_sha256[SB_SHA256_HEX];
	const char *correct_bits; /* borrowed from rec */
	struct sb_json *rec;      /* the whole record, owned */
};

struct sb_val_cell {
	char *cell_id, *task, *method, *tier, *arch; /* owned copies */
	int64_t seed;
	int64_t epochs;           /* the budget from eval.done, -1 when there is no eval.done */
	int64_t epochs_evaluated; /* from eval.done, -1 without */
	const char *train_status; /* from eval.done, NULL without */
	struct sb_val_epoch *ep;  /* ascending epoch */
	size_t n_ep, cap_ep;
	struct sb_json *done; /* the eval.done record, owned (or NULL) */
};

struct sb_vallog {
	char *path;
	char sha256[SB_SHA256_HEX];
	uint64_t size_bytes;
	double mtime;              /* seconds since the epoch, with nanoseconds */
	struct sb_val_cell *cells; /* in order of first appearance */
	size_t n_cells;
};

/* Read, hash and validate a validation log. SB_EDATA names file:line for a
 * malformed record, a missing field, a repeated epoch or an eval.done that
 * contradicts the epochs. SB_EIO when it cannot be read. */
int sb_vallog_read(const char *path, struct sb_vallog *out, struct sb_err *err);
/* The same from bytes already in memory (path for messages; no hash, no mtime). */
int sb_vallog_parse(const char *buf, size_t len, const char *path, struct sb_vallog *out, struct sb_err *err);
void sb_vallog_free(struct sb_vallog *v);

/* The epoch record with epochs_completed == e, or NULL. */
const struct sb_val_epoch *sb_val_cell_epoch(const struct sb_val_cell *c, int64_t epochs_completed);

/* A cell's validation accuracy for the rule:
 *   budget > 0: the accuracy of the epoch with epochs_completed == budget
 *               (*epoch its 0-based index);
 *   budget == 0: the accuracy at the best epoch under `patience`
 *               (sb_select_best_epoch) over epochs 0..n-1, which must all be present.
 * SB_EDATA with a reason when the cell lacks what is needed. */
int sb_val_cell_value(const struct sb_val_cell *c, int patience, int64_t budget, double *acc, int64_t *epoch,
                      struct sb_err *err);

#endif
