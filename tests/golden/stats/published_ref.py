#!/usr/bin/python3
"""What sb-stats must report for published.value records, computed here without its code:
for each published value whose task has validation records, ours (the method's mean
best-epoch validation accuracy over its seeds, or the mean paired difference method -
softmax), the percentile bootstrap interval (the draws replayed by philox.py), inside and
ours - published. Used by tests/sh/stats_published.sh.

    published_ref.py VAL_NDJSON PUBLISHED_NDJSON SEED RESAMPLES PATIENCE

prints one line per compared value: task quantity method ours_method n ours ci_lo ci_hi
inside diff (method '-' when the record names none; quantity budget_delta is followed by
':E', the budget). Values read at another patience than PATIENCE are not compared
(budget_delta has none: the best within the first E epochs). The eval.epoch records are read as
sb-stats reads them for one run per (task, method, seed): the last cell_id wins."""
import json
import sys

import numpy as np

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from philox import bootstrap_indices  # noqa: E402

SIX = ["topk_softmax_0125", "topk_softmax_025", "topk_softmax_05", "sparsemax", "entmax15",
       "headwise_adaptive_entmax"]


def best_epoch(acc, patience):
    best, since = 0, 0
    for e in range(1, len(acc)):
        if acc[e] > acc[best]:
            best, since = e, 0
        else:
            since += 1
            if patience > 0 and since >= patience:
                break
    return best


def main():
    val, pub, seed, resamples, patience = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    runs = {}  # (task, method, seed) -> (cell_id, {epoch: acc})
    for line in open(val):
        r = json.loads(line)
        if r.get("kind") != "eval.epoch":
            continue
        key = (r["task"], r["method"], r["seed"])
        cid = r.get("cell_id")
        if key not in runs or runs[key][0] != cid:
            runs[key] = (cid, {})
        runs[key][1][r["epoch"]] = r["val_accuracy"]
    best = {}
    for (t, m, s), (_, ep) in runs.items():
        acc = [ep[e] for e in range(len(ep))]
        best[(t, m, s)] = acc[best_epoch(acc, patience)]

    def ci(values):
        n = len(values)
        means = [sum(values[i] for i in row) / n for row in bootstrap_indices(seed, n, resamples)]
        return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))

    def seeds_of(t, m):
        return sorted(s for (tt, mm, s) in best if tt == t and mm == m)

    def delta(t, m):
        ss = [s for s in seeds_of(t, "softmax") if (t, m, s) in best]
        d = [best[(t, m, s)] - best[(t, "softmax", s)] for s in ss]
        return d

    def within(t, m, s, E):  # best validation accuracy within the first E epochs
        ep = runs[(t, m, s)][1]
        return max(ep[e] for e in range(E))

    def budget_delta(t, m, E):
        ss = [s for s in seeds_of(t, "softmax") if (t, m, s) in best]
        if min(len(runs[(t, mm, s)][1]) for s in ss for mm in (m, "softmax")) < E:
            return None
        return [within(t, m, s, E) - within(t, "softmax", s, E) for s in ss]

    pubs = {}
    for line in open(pub):
        r = json.loads(line)
        key = (r["task"], r["quantity"], r.get("method"), r.get("budget"), r["source"])
        pubs.pop(key, None)  # a later record of the same key replaces it, keeping its value
        pubs[key] = r
    # sb-stats keeps the first record's place; order does not matter here (the test sorts)
    tasks = {t for (t, _, _) in best}
    for (t, q, m, E, src), r in pubs.items():
        if t not in tasks:
            continue
        if q != "budget_delta" and r.get("patience", patience) != patience:
            continue  # read at another patience: not compared
        v = r["value"]
        if q == "mean":
            ss = seeds_of(t, m)
            if not ss:
                continue
            x = [best[(t, m, s)] for s in ss]
            ours, om = sum(x) / len(x), m
        else:
            if q in ("delta", "budget_delta"):
                if m == "softmax" or not seeds_of(t, m):
                    continue
                om = m
            else:
                om = max(SIX, key=lambda mm: (np.mean(delta(t, mm)), -SIX.index(mm)))
            x = budget_delta(t, om, E) if q == "budget_delta" else delta(t, om)
            if x is None:
                continue
            ours = sum(x) / len(x)
        lo, hi = ci(x)
        print(t, q + (":%d" % E if E else ""), m or "-", om, len(x), repr(ours), repr(lo), repr(hi),
              "true" if lo <= v <= hi else "false", repr(ours - v))


main()
