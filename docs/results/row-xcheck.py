#!/usr/bin/python3
"""row-xcheck.py — an independent check of sb-stats on a grid block of one Table 2 row
(fmnist-check.md): a block whose cells are one task's, as in fmnist_row or synthetic_row.

Reads only the block's val.ndjson files (runs/*/val.ndjson) and its single test read
(test/test.ndjson), and recomputes with scipy, not with sparsebench's code:
  - per method: the best validation accuracy under patience 5 (strict >, earliest on ties),
    its mean, the paired difference to softmax over the seeds both have, the two-sided paired
    t test, Holm over the methods present, the exact Wilcoxon signed-rank p (zeros dropped),
    and how many seeds are above softmax;
  - the same for the test accuracies.
scipy's Wilcoxon p differs from sb-stats' where the differences contain a zero (scipy then
approximates) or ties (scipy uses the untied distribution; sb-stats the exact conditional one
over mid-ranks); the --enumerate option prints the exact conditional p by enumerating all
sign flips, to settle those cases.

Usage: /usr/bin/python3 docs/results/row-xcheck.py [--enumerate] BLOCK_DIR
       (BLOCK_DIR: e.g. out/fmnist_row/main)
"""
import glob
import itertools
import json
import os
import sys

from scipy import stats


def best_under_patience(by_epoch, patience=5):
    best, best_epoch, since = -1.0, -1, 0
    for e in sorted(by_epoch):
        if by_epoch[e] > best:
            best, best_epoch, since = by_epoch[e], e, 0
        else:
            since += 1
            if since >= patience:
                break
    return best, best_epoch


def exact_conditional_wilcoxon(d):
    nz = [round(x, 12) for x in d if round(x, 12) != 0]  # accuracies are counts / n: equal up to rounding
    ranks = stats.rankdata([abs(x) for x in nz])
    mu = sum(ranks) / 2
    w = sum(r for r, x in zip(ranks, nz) if x > 0)
    n = extreme = 0
    for signs in itertools.product((0, 1), repeat=len(nz)):
        n += 1
        if abs(sum(r for r, s in zip(ranks, signs) if s) - mu) >= abs(w - mu) - 1e-9:
            extreme += 1
    return extreme / n


def compare(title, score, enumerate_flips):
    """score: {(method, seed): value}; prints softmax and each method's paired comparison"""
    base = {s: v for (m, s), v in score.items() if m == "softmax"}
    if not base:
        sys.exit("%s: no softmax cells" % title)
    vals = list(base.values())
    print("%s: softmax mean %.4f sd %.4f n %d" % (title, sum(vals) / len(vals), stats.tstd(vals), len(vals)))
    rows = []
    for m in sorted({m for m, _ in score if m != "softmax"}):
        seeds = sorted(s for mm, s in score if mm == m and s in base)
        d = [score[(m, s)] - base[s] for s in seeds]
        t = stats.ttest_1samp(d, 0.0)
        w = stats.wilcoxon(d, zero_method="wilcox").pvalue
        mean = sum(score[(m, s)] for s in seeds) / len(seeds)
        rows.append([m, len(d), mean, sum(d) / len(d), t.statistic, t.pvalue, w, sum(x > 0 for x in d), d])
    running = 0.0
    for rank, row in enumerate(sorted(rows, key=lambda r: r[5])):
        running = max(running, min(1.0, (len(rows) - rank) * row[5]))
        row.append(running)
    for m, n, mean, delta, t, p, w, pos, d, holm in rows:
        extra = " exact-conditional %.4f" % exact_conditional_wilcoxon(d) if enumerate_flips else ""
        print("  %-26s n %d mean %.4f delta %+.4f t %.3f p %.4f holm %.4f wilcoxon %.4f%s positive %d/%d"
              % (m, n, mean, delta, t, p, holm, w, extra, pos, n))


def main():
    args = sys.argv[1:]
    enumerate_flips = "--enumerate" in args
    args = [a for a in args if a != "--enumerate"]
    if len(args) != 1:
        sys.exit(__doc__.split("\n\n")[-1].strip())
    block = args[0]
    val, tasks = {}, set()
    for path in glob.glob(os.path.join(block, "runs", "*", "val.ndjson")):
        for line in open(path):
            r = json.loads(line)
            if r.get("kind") == "eval.epoch":
                tasks.add((r["task"], r.get("arch", "plain"), r.get("tier", "compact")))
                val.setdefault((r["method"], r["seed"]), {})[r["epoch"]] = r["val_accuracy"]
    if not val:
        sys.exit("%s: no runs/*/val.ndjson with eval.epoch records" % block)
    if len(tasks) != 1:
        sys.exit("%s: the cells are of %d tasks (task, arch, tier); this check takes one: %s"
                 % (block, len(tasks), sorted(tasks)))
    print("%s: %s (%s/%s)" % (block, *next(iter(tasks))))
    compare("validation (best epoch, patience 5)", {k: best_under_patience(v)[0] for k, v in val.items()},
            enumerate_flips)
    test_path = os.path.join(block, "test", "test.ndjson")
    if os.path.exists(test_path):
        test = {}
        for line in open(test_path):
            r = json.loads(line)
            if r.get("kind") == "test.cell":
                test[(r["method"], r["seed"])] = r["test_accuracy"]
        compare("test (single read)", test, enumerate_flips)


if __name__ == "__main__":
    main()
