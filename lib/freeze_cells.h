/* freeze_cells.h — which cells of the validation logs take part in a freeze, and with what
 * value (docs/sb-freeze.md, "Which cells take part"), as one piece of code for sb-freeze, which
 * freezes by it, and sb-test, which derives the selection again from the hashed logs before a
 * read (guard check selection-derivation).
 *
 * The order in which cells are judged, both rules:
 *   1. the row filter of PROTOCOL A6 step 2 ("keep rows with status completed and a matching
 *      tier"): a cell of another tier or architecture (rule topk_mean_val_acc), or one whose
 *      eval.done gives a training status other than 'completed' (sb_fz_row_filtered), is
 *      dropped first and supersedes nothing: a failed rerun leaves the earlier completed run in
 *      use;
 *   2. among the cells kept, the later log wins on the cell's key ("the later file wins");
 *   3. the winner is then checked for integrity (sb_fz_cell_unusable: eval.done present, every
 *      epoch evaluated, a value under the rule). A winner that fails these is excluded and the
 *      key is left without a cell: the later run's status is completed (or unknown, without
 *      eval.done), so by the protocol it is the row that counts, and we cannot read it; falling
 *      back to the earlier run would hide that.
 * The order itself is lib/runsel.h's (sb-stats and sb-a8 use it too). */
#ifndef SB_FREEZE_CELLS_H
#define SB_FREEZE_CELLS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "json.h"
#include "runsel.h"
#include "select.h"
#include "vallog.h"

/* Why a cell is dropped by the protocol's row filter (written to buf, which is returned), or
 * NULL when it is kept: its eval.done says training did not complete. A log without eval.done
 * does not say; it is kept here and excluded by sb_fz_cell_unusable after supersession. */
const char *sb_fz_row_filtered(const struct sb_val_cell *vc, char *buf, size_t n);

/* Why a cell kept by the row filter cannot enter a selection should it win its key (written
 * to buf, which is returned), or NULL when it can: its value, the best validation accuracy
 * under patience within budget epochs (sb_val_cell_value), then in *acc and *epoch. */
const char *sb_fz_cell_unusable(const struct sb_val_cell *vc, int patience, int64_t budget, double *acc,
                                int64_t *epoch, char *buf, size_t n);

/* The cells' keys: (task, method, seed), and with FULL (arch, tier) too. */
int sb_fz_vc_cmp(const struct sb_val_cell *a, const struct sb_val_cell *b, int full);

/* One cell of the logs under rule topk_mean_val_acc, after the tier/arch filter. */
struct sb_fz_cell {
	const struct sb_val_cell *vc;
	int log;                   /* index of its log */
	enum sb_runsel_disp disp;  /* lib/runsel.h */
	int superseded_by;         /* for SB_RUNSEL_SUPERSEDED: the cell that displaced it, else -1 */
	int supersedes;            /* the earlier cell this one displaced, else -1 (runsel's order) */
	int included;              /* disp == SB_RUNSEL_WINNER */
	const char *reason;        /* why not included (NULL when included) */
	char reason_buf[300];
	double acc;                /* included: the value under the rule, and its epoch (0-based) */
	int64_t epoch;
};

/* The cells of logs[0..n_logs) of tier and arch (NULL: any), judged as above with patience
 * (budget 0) or at a fixed budget: *out (caller frees) in log order, *n of them. */
int sb_fz_topk_cells(const struct sb_vallog *logs, int n_logs, const char *tier, const char *arch, int patience,
                     int64_t budget, struct sb_fz_cell **out, size_t *n, struct sb_err *err);

/* Rule topk_mean_val_acc on the included cells (sb_select_topk over sb_topk_methods). */
int sb_fz_topk_select(const struct sb_fz_cell *cells, size_t n, int min_seeds, struct sb_selection *out,
                      struct sb_err *err);

/* The test plan's entry for (task, method, seed): the included cell, or NULL (then the plan
 * names it as missing); with its full-budget epoch in *full (NULL when the log lacks it). */
const struct sb_fz_cell *sb_fz_plan_cell(const struct sb_fz_cell *cells, size_t n, const char *task,
                                         const char *method, int64_t seed, const struct sb_val_epoch **full);

/* The members every entry of a selection's "cells" starts with, both rules: identity, tier,
 * arch, budget (null when unknown), included; and the (task, method, seed) of a plan entry. */
void sb_fz_cell_head(struct sb_jw *w, const struct sb_val_cell *vc, int included);
void sb_fz_key_cell(struct sb_jw *w, const char *task, const char *method, int64_t seed);

/* A cell's entry in "cells" under rule topk_mean_val_acc, whole: the head, reason,
 * selected_epoch, val_accuracy and log (sb-freeze writes it; sb-test compares with it). */
void sb_fz_topk_cell_write(struct sb_jw *w, const struct sb_fz_cell *ce);

/* An included cell whose log (PATH) holds a null validation accuracy (sb-eval writes null for
 * a non-finite one) at an epoch the rule did not use: the null counts as no improvement (the
 * study's `acc > best` is false for NaN), which is allowed but said (sb-freeze warns), once
 * per cell: the warning's text in buf (returned), or NULL when the cell has no null. */
const char *sb_fz_null_epochs_note(const char *path, const struct sb_val_cell *vc, char *buf, size_t n);

#endif
