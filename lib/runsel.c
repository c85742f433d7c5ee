/* runsel.c — the run-selection rule (see runsel.h). */
#include "runsel.h"

#include <limits.h>
#include <stdlib.h>

int sb_runsel_resolve(struct sb_runsel_item *items, size_t n, int n_keys, int *key_run, struct sb_err *err)
{
	if (n > INT_MAX || n_keys < 0)
		return SB_ERR(err, SB_EINTERNAL, "run selection: %zu runs, %d keys", n, n_keys);
	/* last[k]: the latest completed run of key k so far, or -1 */
	int *last = key_run ? key_run : malloc((size_t)(n_keys ? n_keys : 1) * sizeof *last);
	if (!last)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int k = 0; k < n_keys; k++)
		last[k] = -1;
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		struct sb_runsel_item *it = &items[i];
		if (it->key < 0 || it->key >= n_keys) {
			rc = SB_ERR(err, SB_EINTERNAL, "run selection: run %zu has key %d, not in 0..%d", i, it->key,
			            n_keys - 1);
			break;
		}
		it->supersedes = -1;
		if (!it->completed) { /* 1. dropped first; displaces nothing */
			it->disp = SB_RUNSEL_FILTERED;
			continue;
		}
		int p = last[it->key]; /* 2. the later completed run wins */
		if (p >= 0)
			items[p].disp = SB_RUNSEL_SUPERSEDED;
		it->supersedes = p;
		it->disp = it->whole ? SB_RUNSEL_WINNER : SB_RUNSEL_WINNER_NOT_WHOLE; /* 3. as it stands */
		last[it->key] = (int)i;
	}
	if (key_run && !rc)
		for (int k = 0; k < n_keys; k++)
			if (key_run[k] >= 0 && items[key_run[k]].disp != SB_RUNSEL_WINNER)
				key_run[k] = -1; /* 3. a winner not whole: the key has no run */
	if (!key_run)
		free(last);
	return rc;
}

/* merge the sorted runs a[lo..mid) and a[mid..hi) into b[lo..hi), stably */
static void merge(const int *a, int *b, size_t lo, size_t mid, size_t hi, int (*cmp)(int, int, void *), void *ctx)
{
	size_t i = lo, j = mid, o = lo;
	while (i < mid && j < hi)
		b[o++] = cmp(a[j], a[i], ctx) < 0 ? a[j++] : a[i++];
	while (i < mid)
		b[o++] = a[i++];
	while (j < hi)
		b[o++] = a[j++];
}

int sb_runsel_keys(struct sb_runsel_item *items, size_t n, int (*cmp)(int a, int b, void *ctx), void *ctx, int *n_keys,
                   struct sb_err *err)
{
	*n_keys = 0;
	if (n > INT_MAX)
		return SB_ERR(err, SB_EINTERNAL, "run selection: %zu runs", n);
	if (n == 0)
		return 0;
	int *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
	if (!a || !b) {
		free(a);
		free(b);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		a[i] = (int)i;
	/* bottom-up merge sort: stable, so equal items stay in input order and the first of each
	 * run of equals is the key's first item */
	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			merge(a, b, lo, mid, hi, cmp, ctx);
		}
		int *t = a;
		a = b;
		b = t;
	}
	/* b[i]: the first item equal to item i; then keys in the order of the first items */
	for (size_t s = 0, first = 0; s < n; s++) {
		if (s > 0 && cmp(a[s - 1], a[s], ctx) != 0)
			first = s;
		b[a[s]] = a[first];
	}
	for (size_t i = 0; i < n; i++)
		items[i].key = b[i] == (int)i ? (*n_keys)++ : items[b[i]].key;
	free(a);
	free(b);
	return 0;
}
