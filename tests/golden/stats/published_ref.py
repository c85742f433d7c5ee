#!/usr/bin/python3
"""What sb-stats must report for published.value records, computed here without its code:
for each published value whose task (arch, tier) has validation records, at the patience and
baseline of the run, ours (the method's mean best-epoch validation accuracy over its seeds,
the mean paired difference method - softmax, the best of the six sparse methods' differences,
the difference of the best accuracies within the first E epochs, or the mean test accuracy of
a method's test reads), the percentile bootstrap
interval (the draws replayed by philox.py), inside and ours - published. Used by
tests/sh/stats_published.sh.

    published_ref.py VAL_NDJSON PUBLISHED_NDJSON SEED RESAMPLES PATIENCE

prints one line per compared value: task@arch@tier quantity method ours_method n ours ci_lo
ci_hi inside diff (method '-' when the record names none; quantity budget_delta is followed by
':E', the budget). Values read at another patience than PATIENCE are not compared (budgets
and test means have none), nor differences from another baseline than softmax. The eval.epoch records are
read as sb-stats reads them for one run per (task, arch, tier, method, seed): the last
cell_id wins."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from philox import bootstrap_indices  # noqa: E402
from refstats import best_epoch  # noqa: E402

SIX = ["topk_softmax_0125", "topk_softmax_025", "topk_softmax_05", "sparsemax", "entmax15",
       "headwise_adaptive_entmax"]
BASE = "softmax"


def main():
    val, pub, seed, resamples, patience = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    runs = {}  # (group, method, seed) -> (cell_id, {epoch: acc}); group = task@arch@tier
    tests = {}  # (group, method, seed) -> test accuracy (the last read wins)
    for line in open(val):
        r = json.loads(line)
        if r.get("kind") == "test.cell":
            g = "%s@%s@%s" % (r["task"], r.get("arch", "plain"), r.get("tier", "compact"))
            tests[(g, r["method"], r["seed"])] = r["test_accuracy"]
            continue
        if r.get("kind") != "eval.epoch":
            continue
        g = "%s@%s@%s" % (r["task"], r.get("arch", "plain"), r.get("tier", "compact"))
        key = (g, r["method"], r["seed"])
        cid = r.get("cell_id")
        if key not in runs or runs[key][0] != cid:
            runs[key] = (cid, {})
        runs[key][1][r["epoch"]] = r["val_accuracy"]
    acc = {k: [ep[e] for e in range(len(ep))] for k, (_, ep) in runs.items()}
    best = {k: a[best_epoch(a, patience)] for k, a in acc.items()}

    def ci(values):
        n = len(values)
        means = [sum(values[i] for i in row) / n for row in bootstrap_indices(seed, n, resamples)]
        return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))

    def seeds_of(g, m):
        return sorted(s for (gg, mm, s) in best if gg == g and mm == m)

    def paired(g, m):
        return [s for s in seeds_of(g, BASE) if (g, m, s) in best]

    def delta(g, m):
        return [best[(g, m, s)] - best[(g, BASE, s)] for s in paired(g, m)]

    def budget_delta(g, m, E):
        ss = paired(g, m)
        if min(len(acc[(g, mm, s)]) for s in ss for mm in (m, BASE)) < E:
            return None
        return [max(acc[(g, m, s)][:E]) - max(acc[(g, BASE, s)][:E]) for s in ss]

    pubs = {}
    for line in open(pub):
        r = json.loads(line)
        key = (r["task"], r.get("arch", "plain"), r.get("tier", "compact"), r["quantity"], r.get("method"),
               r.get("budget"), r.get("patience"), r.get("baseline", BASE), r["source"])
        pubs[key] = r  # a later record of the same key replaces it
    groups = {g for (g, _, _) in best}
    tgroups = {g for (g, _, _) in tests}
    for (t, ar, ti, q, m, E, pat, base, src), r in pubs.items():
        g = "%s@%s@%s" % (t, ar, ti)
        if g not in (tgroups if q == "test_mean" else groups):
            continue
        if q not in ("budget_delta", "test_mean") and pat is not None and pat != patience:
            continue  # read at another patience: not compared
        if q not in ("mean", "test_mean") and base != BASE:
            continue  # a difference from another baseline: not compared
        v = r["value"]
        if q == "test_mean":
            ss = sorted(s for (gg, mm, s) in tests if gg == g and mm == m)
            if not ss:
                continue
            x = [tests[(g, m, s)] for s in ss]
            om = m
        elif q == "mean":
            ss = seeds_of(g, m)
            if not ss:
                continue
            x = [best[(g, m, s)] for s in ss]
            om = m
        else:
            if q in ("delta", "budget_delta"):
                if m == BASE or not paired(g, m):
                    continue
                om = m
            else:
                om = max((mm for mm in SIX if paired(g, mm)),
                         key=lambda mm: (np.mean(delta(g, mm)), -SIX.index(mm)))
            x = budget_delta(g, om, E) if q == "budget_delta" else delta(g, om)
            if x is None:
                continue
        ours = sum(x) / len(x)
        lo, hi = ci(x)
        print(g, q + (":%d" % E if E else ""), m or "-", om, len(x), repr(ours), repr(lo), repr(hi),
              "true" if lo <= v <= hi else "false", repr(ours - v))


main()
