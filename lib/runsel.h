/* runsel.h — which run counts for a key: the run-selection rule of PROTOCOL A6 step 2 and A7
 * (docs/sb-freeze.md, "Which cells take part"), shared by sb-freeze, sb-stats and sb-a8.
 *
 * The runs are items in input order, each with a key (task, method, seed, ... as the caller
 * defines it, numbered 0..n_keys-1), and two facts the caller decides from its own records:
 *   completed  training completed, or the records do not say (no eval.done);
 *   whole      the run can be read whole (every epoch evaluated, a value under the rule).
 * The rule:
 *   1. a run whose training did not complete is dropped first and supersedes nothing (a
 *      failed rerun leaves the earlier completed run in use);
 *   2. among the other runs of a key, the later one in input order wins, the earlier ones are
 *      superseded;
 *   3. a winner that is not whole leaves its key without a run: it is the run the protocol
 *      counts and it cannot be read, so the earlier run it superseded is not used instead.
 * Only the ordering lives here; what "completed" and "whole" mean, the counters and the
 * messages stay with each program.
 */
#ifndef SB_RUNSEL_H
#define SB_RUNSEL_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

enum sb_runsel_disp {
	SB_RUNSEL_FILTERED = 1,    /* training did not complete: dropped, supersedes nothing */
	SB_RUNSEL_SUPERSEDED,      /* completed, and a later completed run of its key wins */
	SB_RUNSEL_WINNER,          /* the run that counts for its key */
	SB_RUNSEL_WINNER_NOT_WHOLE /* the key's last completed run, not whole: the key has no run */
};

struct sb_runsel_item {
	/* set by the caller */
	int key; /* 0 <= key < n_keys */
	bool completed;
	bool whole;
	/* set by sb_runsel_resolve */
	enum sb_runsel_disp disp;
	int supersedes; /* the earlier completed run of the key that this one displaced (it is then
	                 * SB_RUNSEL_SUPERSEDED), or -1; each superseded run is named by exactly one
	                 * later run, so the displacements can be reported in input order */
};

/* Apply the rule to ITEMS[0..n-1] (in input order): sets each item's disp and supersedes, and,
 * when KEY_RUN is not NULL, KEY_RUN[k] for k < n_keys: the item that counts for key k
 * (disposition SB_RUNSEL_WINNER), or -1 when the key has none (only runs that did not
 * complete, or a winner that is not whole). Linear time. Fails (SB_EINTERNAL) on a key out of
 * range or out of memory. */
int sb_runsel_resolve(struct sb_runsel_item *items, size_t n, int n_keys, int *key_run, struct sb_err *err);

/* Dense keys for ITEMS[0..n-1]: items that CMP says are equal (0) get the same key; keys are
 * numbered from 0 in the order of each key's first item. CMP is a total order on the items by
 * index (like a qsort comparator, with CTX passed through). Sets each item's key and *N_KEYS.
 * O(n log n) comparisons (a stable merge sort of the indices). Fails (SB_EINTERNAL) out of
 * memory. */
int sb_runsel_keys(struct sb_runsel_item *items, size_t n, int (*cmp)(int a, int b, void *ctx), void *ctx, int *n_keys,
                   struct sb_err *err);

#endif
