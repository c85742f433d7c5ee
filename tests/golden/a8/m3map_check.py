#!/usr/bin/env python3
"""tests/golden/a8/m3map_check.py — an independent NumPy computation of sb-a8 m3map's switch
map (docs/sb-a8.md), for the tests: the M1 predictors fitted on ALL discovery groups (sb-a8
m1's a8.m1.group records) and applied to the confirmation groups' features, computed here
from their validation logs.

Usage: m3map_check.py TRAJ_A8.ndjson M2_A8.ndjson MAP.inc VAL.ndjson...
Checks every line of MAP.inc (exactly), prints one "# ..." line per problem and the number
of groups checked; exit 1 on any difference.
"""
import json
import math
import sys

import numpy as np

PROBES = ["probe_dense_entropy", "probe_boundary_margin", "probe_tail_mass", "probe_gradient_topk_share"]
CLASSES = {"cifar100": 100, "twenty_news": 20, "emnist_balanced": 47, "emnist_letters": 26, "k49": 49}
TEXT = {"twenty_news", "synthetic_marker"}
SIMPLE = {"median_switch": None, "early_accuracy_switch": "dense_val_accuracy_e3", "entropy_switch": "dense_attention_entropy_e3"}


def meta(task, arch, tier, n_val):
    return [float(arch == "local_hybrid"), float(tier == "deep"), float(tier == "wide"),
            math.log(CLASSES.get(task, 10)), float(task in TEXT), math.log(n_val) if n_val > 0 else 0.0]


def fit_predict(X, y, Xn, lam=1.0):
    mu = X.mean(axis=0)
    sd = X.std(axis=0)
    sd[sd == 0] = 1.0
    Z = (X - mu) / sd
    yb = y.mean()
    beta = np.linalg.solve(Z.T @ Z + lam * np.eye(X.shape[1]), Z.T @ (y - yb))
    return yb + ((Xn - mu) / sd) @ beta


def rint(v):
    return int(np.clip(np.rint(v), 3, 30))


traj, m2, mapf, logs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
T = [json.loads(l) for l in open(traj) if '"a8.m1.group"' in l]
X = np.array([[r[p + "_e3"] for p in PROBES] + [r[p + "_d13"] for p in PROBES] + meta(r["task"], r["arch"], r["tier"], r["n_val"]) for r in T])
y = np.array([float(r["target_switch_epoch"]) for r in T])
simple = [json.loads(l) for l in open(m2) if '"a8.verdict"' in l][-1]["strongest_simple"]
# the confirmation runs: (task, arch, tier, method, seed) -> {epoch: record}
runs, nval = {}, {}
for f in logs:
    for l in open(f):
        r = json.loads(l)
        if r["kind"] == "eval.epoch":
            runs.setdefault((r["task"], r["arch"], r["tier"], r["method"], r["seed"]), {})[r["epoch"]] = r
            if r.get("n_val", 0) > 0:
                nval.setdefault(r["task"], r["n_val"])
groups = sorted({k[:3] for k in runs})
want = {}
rows, dense = [], []
for g in groups:
    seeds = [k[4] for k in runs if k[:4] == g + ("topk_softmax_025",) and g + ("softmax", k[4]) in runs]
    if not seeds:
        continue
    tk = [runs[g + ("topk_softmax_025", s)] for s in seeds]
    dn = [runs[g + ("softmax", s)] for s in seeds]
    e3 = [np.mean([t[2][p] for t in tk]) for p in PROBES]
    e1 = [np.mean([t[0][p] for t in tk]) for p in PROBES]
    rows.append(e3 + [a - b for a, b in zip(e3, e1)] + meta(g[0], g[1], g[2], nval.get(g[0], 0)))
    dense.append({"dense_val_accuracy_e3": np.mean([d[2]["val_accuracy"] for d in dn]),
                  "dense_attention_entropy_e3": np.mean([d[2]["attention_entropy"] for d in dn])})
    want[g] = None
Xn = np.array(rows)
pm = fit_predict(X, y, Xn)
feat = SIMPLE[simple]
if feat is None:
    ps = [float(np.median(y))] * len(rows)
else:
    ps = fit_predict(np.array([[r[feat]] for r in T]), y, np.array([[d[feat]] for d in dense]))
for (g, a, b) in zip(list(want), pm, ps):
    want[g] = {"mechanistic_switch": rint(a), simple: rint(b)}
got = {}
for l in open(mapf):
    if not l.startswith("set "):
        continue
    f = dict(kv.split("=") for kv in l.split()[2:])
    got[(f["task"], f["arch"], f["tier"], f["method"])] = int(f["switch_epoch"])
bad = 0
for g, w in want.items():
    for m, e in w.items():
        v = got.pop(g + (m,), None)
        if v != e:
            bad += 1
            print("# %s %s: map %s, NumPy %d" % (g, m, v, e))
for k in got:
    bad += 1
    print("# %s: in the map, not computed here" % (k,))
axis = [l.split()[1:] for l in open(mapf) if l.startswith("method ")]
if axis != [["mechanistic_switch", simple]]:
    bad += 1
    print("# the method line: %s, want mechanistic_switch %s" % (axis, simple))
print("# %d groups checked, %d discovery groups, simple schedule %s" % (len(want), len(T), simple))
sys.exit(1 if bad or not want else 0)
