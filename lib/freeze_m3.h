/* freeze_m3.h — rule m3_confirmation (PROTOCOL A8 M3): the confirmation grid judged against
 * its switch map, as one piece of code for sb-freeze, which freezes by it, and sb-test, which
 * derives the selection again from the hashed logs and the hashed map before a read (guard
 * check selection-derivation), as freeze_cells.h is for rule topk_mean_val_acc.
 *
 * The cells are judged in the order of freeze_cells.h (the row filter, the later log wins on
 * (task, method, seed, arch, tier), the winner's integrity at its full budget); then each
 * winner is held against the map: its (task, arch, tier) group must be the map's, and a
 * switching cell's cell.json (beside its log) must carry the map's switch epoch. The test plan
 * is every group of the map x the four methods x every seed of the logs. The status is
 * SB_M3_AUTHORIZED when nothing is missing or mismatched, with the reasons otherwise. */
#ifndef SB_FREEZE_M3_H
#define SB_FREEZE_M3_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "hash.h"
#include "json.h"
#include "vallog.h"

#define SB_M3_AUTHORIZED "M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED"
#define SB_M3_INCOMPLETE "M3_VALIDATION_INCOMPLETE"
#define SB_M3_MISMATCH "M3_SWITCH_MAP_MISMATCH"

/* one line of the switch map: set when task=T arch=A tier=R method=M switch_epoch=N */
struct sb_m3_mapline {
	char task[64], arch[32], tier[32], method[64];
	int epoch;
};
struct sb_m3_map {
	struct sb_m3_mapline *l;
	size_t n;
	char simple[64]; /* the simple schedule the map names beside mechanistic_switch */
	char axis[64];   /* the simple schedule of its method line (when it has one) */
	char sha256[SB_SHA256_HEX];
	size_t size_bytes;
};

/* Read and check a switch map (docs/sb-freeze.md, "Rule m3_confirmation"); its SHA-256 into
 * m->sha256. SB_EDATA naming the file and line for a line that is not one. */
int sb_m3_map_read(const char *path, struct sb_m3_map *m, struct sb_err *err);
void sb_m3_map_free(struct sb_m3_map *m);

struct sb_m3_cell {
	const struct sb_val_cell *vc;
	int log, included, planned, switch_epoch, map_epoch;
	double acc;
	char reason[400];
};

/* What the rule gives on the logs and the map. The three JSON texts are the selection's
 * members "cells", "test_plan" and "test_plan_missing", written by sb_m3_derive for sb-freeze
 * to copy and sb-test to compare. */
struct sb_m3 {
	const char *methods[4]; /* softmax, topk_softmax_025, mechanistic_switch, the map's simple */
	struct sb_m3_cell *cells;
	size_t nc;
	int64_t *seeds; /* every seed of the logs, ascending */
	size_t nseeds;
	char **reasons; /* why the status is not SB_M3_AUTHORIZED */
	size_t nreasons;
	const char *status;
	size_t planned, plan_n, plan_missing, n_excluded;
	int *cells_used; /* per log */
	char **warnings; /* for stderr (sb-freeze): cells excluded, superseded, with null accuracies */
	size_t nwarnings;
	struct sb_jw cells_json, plan_json, missing_json;
};

/* Judge the cells of logs[0..n_logs) against MAP (expect_cells: the number of cells the
 * plan must have, 0 for no check). Cells excluded, superseded or with null validation
 * accuracies are noted in out->warnings (sb-freeze prints them; sb-test derives quietly).
 * Only memory can fail (SB_EINTERNAL); a mismatch or a gap is a status, not an error. */
int sb_m3_derive(const struct sb_vallog *logs, int n_logs, const struct sb_m3_map *map, long long expect_cells,
                 struct sb_m3 *out, struct sb_err *err);
void sb_m3_free(struct sb_m3 *m);

#endif
