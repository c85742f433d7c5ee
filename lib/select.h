/* select.h — the selection rule of PROTOCOL A4/A6 and the helpers around it,
 * shared by sb-freeze and sb-test (and usable by sb-stats):
 *
 *   - the best epoch under early stopping with patience (PROTOCOL A4);
 *   - the top-k ratio rule: per task, the ratio with the highest mean
 *     validation accuracy over at least min_seeds seeds, the earlier ratio
 *     on ties (strict >), PROTOCOL A6 step 3;
 *   - the SHA-256 of the canonical JSON of an object (PROTOCOL A6 step 5);
 *   - relative paths (a selection names its validation logs relative to
 *     its own directory, so a study directory can move as a whole).
 */
#ifndef SB_SELECT_H
#define SB_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "hash.h"
#include "json.h"

/* Early stopping read off per-epoch validation accuracies acc[0..n) (epoch
 * 0-based), exactly as the study's training loop: best_acc starts at -1; an
 * epoch whose accuracy is strictly greater than best_acc becomes the best and
 * resets the counter, any other epoch (equal, lower or NaN) increments it;
 * training stops after the epoch at which the counter reaches `patience`.
 * patience 0 disables stopping (all n epochs count).
 * *best = the best epoch (first epoch of maximal accuracy among those run),
 * *epochs_run = the number of epochs before the stop (<= n).
 * Returns 0, or SB_EDATA when n < 1 or no accuracy is a finite number >= 0. */
int sb_select_best_epoch(const double *acc, int n, int patience, int *best, int *epochs_run, struct sb_err *err);

/* One cell's validation accuracy (at its best epoch, or at a fixed budget). */
struct sb_sel_cell {
	const char *task;
	const char *method;
	int64_t seed;
	double val_accuracy;
};

/* One (task, method) candidate of the rule. */
struct sb_sel_cand {
	char *task;
	char *method;
	int n_seeds;
	int64_t *seeds;      /* ascending */
	double val_accuracy; /* mean over the seeds, summed in seed order */
	int eligible;        /* n_seeds >= min_seeds */
};

/* Per task: the candidate chosen, or -1 with the reason. */
struct sb_sel_task {
	char *task;
	int chosen;         /* index into cands, or -1 */
	const char *reason; /* static text when chosen == -1 */
};

struct sb_selection {
	struct sb_sel_cand *cands; /* tasks in byte order of their names, then methods in rule order */
	size_t n_cands;
	struct sb_sel_task *tasks; /* byte order of the names */
	size_t n_tasks;
};

/* Apply the rule to the cells whose method is one of methods[0..n_methods)
 * (other cells are ignored). A repeated (task, method, seed) is SB_EDATA: the
 * caller resolves duplicates first. A task with no eligible candidate gets
 * chosen = -1 (it is still listed). */
int sb_select_topk(const struct sb_sel_cell *cells, size_t n, const char *const *methods, int n_methods, int min_seeds,
                   struct sb_selection *out, struct sb_err *err);
void sb_selection_free(struct sb_selection *s);

/* The three top-k ratios of PROTOCOL A3/A6, in tie-breaking order. */
extern const char *const sb_topk_methods[3];
/* The dense and sparse baselines the test read evaluates beside the chosen
 * top-k ratio (PROTOCOL A6 "test"). */
extern const char *const sb_test_methods[4];

/* SHA-256 of the canonical JSON (lib/json.h sb_jw_canonical: sorted keys, no
 * spaces, ASCII escapes, numbers as written) of v. When v is an object and
 * omit_key is not NULL, members named omit_key are left out (the hash of a
 * payload computed "before the sha256 key is added"). */
int sb_json_canonical_sha256(const struct sb_json *v, const char *omit_key, char hex[SB_SHA256_HEX],
                             struct sb_err *err);

/* Indent compact JSON text (as written by struct sb_jw) with `indent` spaces
 * per level, one member or item per line, ": " after keys; a newly allocated
 * string (NULL on allocation failure). Strings are copied byte for byte, so
 * parsing the result gives the same value. */
char *sb_json_pretty(const char *json, size_t len, int indent);

/* Path of `target` relative to directory `base_dir`, both made absolute and
 * canonical with realpath(3) (they must exist), except that target's last component
 * stays as named: a symbolic link there is not followed (a run's val.ndjson that links
 * elsewhere is recorded in its run directory, where its cell.json is). Newly allocated. */
int sb_path_relative(const char *base_dir, const char *target, char **out, struct sb_err *err);
/* Directory part of a path ("." for a bare name); newly allocated. */
char *sb_path_dirname(const char *path);

#endif
