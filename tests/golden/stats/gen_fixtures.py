#!/usr/bin/python3
"""Fixture records for sb-stats' CLI tests and the values sb-stats must report on them,
computed here independently of the C code (numpy, scipy 1.10, statsmodels; the
bootstrap replayed with philox.py).

    /usr/bin/python3 tests/golden/stats/gen_fixtures.py    # rewrites fixtures/ and expected/

fixtures/val.ndjson       eval.epoch: 3 tasks x 7 methods x 5 seeds x 8 epochs (one sparse-helps task)
fixtures/test.ndjson      test.cell: 2 tasks x 5 methods x 5 seeds
fixtures/probes.ndjson    probe.result: 1 model x 2 tasks x 20 probes x 4 methods
fixtures/rule_ok.ndjson   eval.epoch for the A7 rule: 6 tasks x softmax + the six sparse methods,
                          3 sparse-helps, separable -> success
fixtures/rule_fail.ndjson the same tasks with labels no single threshold separates -> failure
expected/table2_rows.md   Table 2 (validation, patience 5) as Markdown table lines
expected/test_rows.md     the test table as Markdown table lines
expected/val_paired.tsv   per comparison: mean_diff p_t p_holm p_wilcoxon ci_lo ci_hi and the
                          budget statistics (sign change, first negative, switch epoch, CIs)
expected/test_paired.tsv  per comparison: mean_diff p_t p_holm p_wilcoxon ci_lo ci_hi
expected/probe_rates.tsv, expected/probe_pairs.tsv, expected/rule.tsv
sb-stats is run with --seed 7 --resamples 2000 in the tests.
"""
import json
import os
import sys

import numpy as np
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from philox import bootstrap_indices  # noqa: E402
from refstats import a7_ttest, best_epoch, exact_signed_rank, rule_ref  # noqa: E402

SEED, RESAMPLES, LEVEL = 7, 2000, 0.95
FIX = os.path.join(HERE, "fixtures")
EXP = os.path.join(HERE, "expected")
os.makedirs(FIX, exist_ok=True)
os.makedirs(EXP, exist_ok=True)
rng = np.random.default_rng(4242)
NVAL = 2000
METHODS = ["softmax", "topk_softmax_0125", "topk_softmax_025", "topk_softmax_05", "sparsemax", "entmax15",
           "headwise_adaptive_entmax"]
DISPLAY = {"fashion_mnist": "F-MNIST", "cifar10": "CIFAR-10", "usps": "USPS", "mnist": "MNIST",
           "kmnist": "KMNIST", "cifar100": "CIFAR-100", "twenty_news": "20NG"}
THRESH = {"fashion_mnist": "0.85", "cifar10": "0.60", "mnist": "0.95", "kmnist": "0.88", "cifar100": "0.25",
          "twenty_news": "0.55"}
DASH = "\u2014"


def r(x):
    return repr(float(x))


def write_ndjson(name, recs):
    with open(os.path.join(FIX, name), "w") as f:
        for rec in recs:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")


def acc_of(x):
    return int(np.clip(round(x * NVAL), 0, NVAL)) / NVAL


# ---------------------------------------------------------------- validation fixture
LEVELS = {"fashion_mnist": 0.88, "cifar10": 0.66, "usps": 0.957}
EFFECT = {  # (early, late) effect of each method per task; interpolated over epochs
    "fashion_mnist": {"topk_softmax_0125": (0.004, 0.003), "topk_softmax_025": (0.005, 0.004),
                      "topk_softmax_05": (0.004, 0.004), "sparsemax": (0.002, 0.002), "entmax15": (0.001, 0.001),
                      "headwise_adaptive_entmax": (0.0, 0.0)},
    "cifar10": {"topk_softmax_0125": (0.03, -0.032), "topk_softmax_025": (0.02, -0.018),
                "topk_softmax_05": (0.01, -0.005), "sparsemax": (-0.02, -0.033), "entmax15": (-0.01, -0.019),
                "headwise_adaptive_entmax": (-0.01, -0.017)},
    "usps": {"topk_softmax_0125": (0.006, 0.004), "topk_softmax_025": (0.015, 0.0126),
             "topk_softmax_05": (0.005, 0.003), "sparsemax": (0.0, -0.002), "entmax15": (0.001, 0.0),
             "headwise_adaptive_entmax": (0.0, 0.001)},
}
EPOCHS, SEEDS = 8, [0, 1, 2, 3, 4]
cells = {}  # (task, method, seed) -> list of accuracies
recs = [{"kind": "run.meta", "v": 1, "program": "gen_fixtures.py"}]
for task in ["fashion_mnist", "cifar10", "usps"]:
    for method in METHODS:
        for seed in SEEDS:
            eff = EFFECT[task].get(method, (0.0, 0.0))
            sd = rng.normal(0, 0.003)
            accs = []
            for e in range(EPOCHS):
                w = e / (EPOCHS - 1)
                x = LEVELS[task] * (1 - 0.35 * np.exp(-1.2 * e)) + (1 - w) * eff[0] + w * eff[1] + sd \
                    + rng.normal(0, 0.0015)
                accs.append(acc_of(x))
            if task == "fashion_mnist" and method == "sparsemax" and seed == 1:
                # patience 5 stops after epoch 6: the later, higher epoch 7 is never reached
                accs = [0.80, 0.885, 0.884, 0.883, 0.885, 0.880, 0.882, 0.899]
            cells[(task, method, seed)] = accs
            for e, a in enumerate(accs):
                rec = {"kind": "eval.epoch", "v": 1, "task": task, "method": method, "seed": seed, "epoch": e,
                       "val_accuracy": a}
                if task == "usps" and method == "softmax" and seed == 0:  # the rerun that supersedes
                    rec.update({"cell_id": "usps.softmax.s0.plain.compact.new00000", "tier": "compact",
                                "arch": "plain", "attention_entropy": None})
                recs.append(rec)
# a superseded run: an earlier cell of usps/softmax seed 0 with another cell_id, read first
early = [{"kind": "eval.epoch", "v": 1, "cell_id": "usps.softmax.s0.plain.compact.old00000", "task": "usps",
          "method": "softmax", "seed": 0, "epoch": e, "val_accuracy": 0.5} for e in range(EPOCHS)]
recs = recs[:1] + early + recs[1:]
recs.append({"kind": "train.epoch", "v": 1, "note": "ignored kind"})
write_ndjson("val.ndjson", recs)


def percentile(x, q):
    return float(np.percentile(np.array(x), q))


IDX = {}


def boot_idx(n):
    if n not in IDX:
        IDX[n] = np.array(bootstrap_indices(SEED, n, RESAMPLES))
    return IDX[n]


def boot_means(d):
    d = np.asarray(d, float)
    n = len(d)
    out = []
    for row in boot_idx(n):
        s = 0.0
        for i in row:
            s += d[i]
        out.append(s / n)
    return out


def sign_change(delta):
    K = len(delta)
    E = K + 1
    while E > 1 and delta[E - 2] < 0:
        E -= 1
    return E


def first_negative(delta):
    for e, v in enumerate(delta):
        if v < 0:
            return e + 1
    return len(delta) + 1


def switch_epoch(delta):
    K = len(delta)
    if (delta[0] + delta[1] + delta[2]) / 3.0 <= 0:
        return 3
    for e in range(4, K - 1):
        if delta[e - 1] <= 0 and delta[e] <= 0 and delta[e + 1] <= 0:
            return e
    return K + 1


def wilcoxon_p(d):
    rd = np.round(np.asarray(d) / 1e-9) * 1e-9
    return exact_signed_rank(rd)[1]


def paired(task, method, values, budgets=None):
    """values: dict seed -> (baseline value, method value)."""
    seeds = sorted(values)
    d = np.array([values[s][1] - values[s][0] for s in seeds])
    out = {"task": task, "method": method, "n": len(d), "mean_diff": float(np.mean(d)), "p_t": a7_ttest(d),
           "p_w": wilcoxon_p(d)}
    bm = boot_means(d)
    out["ci_lo"], out["ci_hi"] = percentile(bm, 2.5), percentile(bm, 97.5)
    if budgets is not None:
        mat = np.array([budgets[s] for s in seeds])  # n x K
        K = mat.shape[1]
        delta = [sum(mat[:, e]) / len(seeds) for e in range(K)]
        delta = [float(np.sum(mat[:, e]) / len(seeds)) for e in range(K)]
        out["sc"], out["fn"], out["sw"] = sign_change(delta), first_negative(delta), switch_epoch(delta)
        scs, sws = [], []
        for row in boot_idx(len(seeds)):
            dl = []
            for e in range(K):
                s = 0.0
                for i in row:
                    s += mat[i, e]
                dl.append(s / len(seeds))
            scs.append(sign_change(dl))
            sws.append(switch_epoch(dl))
        out["sc_lo"], out["sc_hi"] = percentile(scs, 2.5), percentile(scs, 97.5)
        out["sw_lo"], out["sw_hi"] = percentile(sws, 2.5), percentile(sws, 97.5)
    return out


def holm(rows):
    adj = multipletests([x["p_t"] for x in rows], method="holm")[1]
    for x, a in zip(rows, adj):
        x["p_holm"] = float(a)


def table_rows(rows_by_task, base_means, with_threshold):
    head = ["Dataset"] + (["Threshold"] if with_threshold else []) + ["softmax", "top-k 0.125", "top-k 0.25",
                                                                      "top-k 0.5", "sparsemax", "entmax-1.5",
                                                                      "HAE"]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "".join(" --- |" if i == 0 else " ---: |" for i in range(len(head)))]
    for task, rows in rows_by_task:
        cells_ = [DISPLAY[task]]
        if with_threshold:
            cells_.append(THRESH.get(task, DASH))
        cells_.append(f"{base_means[task]:.4f}")
        bym = {x["method"]: x for x in rows}
        for m in METHODS[1:]:
            if m in bym:
                x = bym[m]
                cells_.append(f"{x['mean_diff']:+.4f}" + ("*" if x["p_holm"] < 0.05 else ""))
            else:
                cells_.append(DASH)
        lines.append("| " + " | ".join(cells_) + " |")
    return "\n".join(lines) + "\n"


val_rows, base_means, by_task = [], {}, []
for task in ["fashion_mnist", "cifar10", "usps"]:
    base = {s: cells[(task, "softmax", s)] for s in SEEDS}
    base_means[task] = float(np.mean([base[s][best_epoch(base[s], 5)] for s in SEEDS]))
    rows = []
    for m in METHODS[1:]:
        vals, budgets = {}, {}
        for s in SEEDS:
            a, b = base[s], cells[(task, m, s)]
            vals[s] = (a[best_epoch(a, 5)], b[best_epoch(b, 5)])
            budgets[s] = [max(b[:E]) - max(a[:E]) for E in range(1, EPOCHS + 1)]
        rows.append(paired(task, m, vals, budgets))
    holm(rows)
    val_rows += rows
    by_task.append((task, rows))
with open(os.path.join(EXP, "table2_rows.md"), "w") as f:
    f.write(table_rows(by_task, base_means, True))
with open(os.path.join(EXP, "val_paired.tsv"), "w") as f:
    f.write("# task method n mean_diff p_t p_holm p_wilcoxon ci_lo ci_hi sign_change sc_lo sc_hi first_negative "
            "switch_epoch sw_lo sw_hi\n")
    for x in val_rows:
        f.write(" ".join(str(v) for v in [x["task"], x["method"], x["n"], r(x["mean_diff"]), r(x["p_t"]),
                                          r(x["p_holm"]), r(x["p_w"]), r(x["ci_lo"]), r(x["ci_hi"]), x["sc"],
                                          r(x["sc_lo"]), r(x["sc_hi"]), x["fn"], x["sw"], r(x["sw_lo"]),
                                          r(x["sw_hi"])]) + "\n")

# ---------------------------------------------------------------- test fixture
TEST_METHODS = ["softmax", "topk_softmax_025", "sparsemax", "entmax15", "headwise_adaptive_entmax"]
TEST_EFF = {"cifar10": {"topk_softmax_025": -0.018, "sparsemax": -0.031, "entmax15": -0.021,
                        "headwise_adaptive_entmax": -0.002},
            "usps": {"topk_softmax_025": 0.011, "sparsemax": 0.0, "entmax15": 0.001,
                     "headwise_adaptive_entmax": 0.0005}}
trecs, tvals = [], {}
for task, level in [("cifar10", 0.664), ("usps", 0.95)]:
    for m in TEST_METHODS:
        for s in SEEDS:
            a = int(round((level + TEST_EFF[task].get(m, 0) + rng.normal(0, 0.004)) * 10000)) / 10000
            tvals[(task, m, s)] = a
            trecs.append({"kind": "test.cell", "v": 1, "cell_id": f"{task}.{m}.s{s}", "task": task, "method": m,
                          "seed": s, "tier": "compact", "arch": "plain", "epochs": 30, "n_test": 10000,
                          "test_accuracy": a})
write_ndjson("test.ndjson", trecs)
test_rows_all, tby = [], []
tbase = {}
for task in ["cifar10", "usps"]:
    tbase[task] = float(np.mean([tvals[(task, "softmax", s)] for s in SEEDS]))
    rows = [paired(task, m, {s: (tvals[(task, "softmax", s)], tvals[(task, m, s)]) for s in SEEDS})
            for m in ["topk_softmax_025", "sparsemax", "entmax15", "headwise_adaptive_entmax"]]
    holm(rows)
    test_rows_all += rows
    tby.append((task, rows))
with open(os.path.join(EXP, "test_rows.md"), "w") as f:
    f.write(table_rows(tby, tbase, False))
with open(os.path.join(EXP, "test_paired.tsv"), "w") as f:
    f.write("# task method n mean_diff p_t p_holm p_wilcoxon ci_lo ci_hi\n")
    for x in test_rows_all:
        f.write(" ".join(str(v) for v in [x["task"], x["method"], x["n"], r(x["mean_diff"]), r(x["p_t"]),
                                          r(x["p_holm"]), r(x["p_w"]), r(x["ci_lo"]), r(x["ci_hi"])]) + "\n")

# ---------------------------------------------------------------- probes
PMETHODS = {"dense": 0.9, "recipe": 0.88, "random_struct": 0.45, "window_only": 0.05}
precs, outcome = [], {}
for task in ["niah_single", "variable_tracking"]:
    for pid in range(20):
        hard = rng.uniform() < 0.2
        for m, p in PMETHODS.items():
            c = int(rng.uniform() < (p * (0.5 if hard else 1.0)))
            outcome[(task, pid, m)] = c
            precs.append({"kind": "probe.result", "v": 1, "model": "tiny-hybrid", "task": task, "method": m,
                          "probe_id": f"{task}-{pid:02d}" if task == "niah_single" else pid,
                          "correct": bool(c) if pid % 2 else c})
write_ndjson("probes.ndjson", precs)
with open(os.path.join(EXP, "probe_rates.tsv"), "w") as f:
    f.write("# model task method correct n ci_lo ci_hi\n")
    for m in PMETHODS:
        for task in ["all", "niah_single", "variable_tracking"]:
            ks = [v for (t, _, mm), v in outcome.items() if mm == m and (task == "all" or t == task)]
            lo, hi = proportion_confint(sum(ks), len(ks), alpha=1 - LEVEL, method="wilson")
            f.write(f"tiny-hybrid {task} {m} {sum(ks)} {len(ks)} {r(lo)} {r(hi)}\n")
pairs = []
for m in ["recipe", "random_struct", "window_only"]:
    n11 = n10 = n01 = n00 = 0
    for (t, pid, mm), v in outcome.items():
        if mm != m:
            continue
        b = outcome[(t, pid, "dense")]
        n11 += v and b
        n10 += v and not b
        n01 += (not v) and b
        n00 += (not v) and not b
    n = n11 + n10 + n01 + n00
    p1, p2 = (n11 + n10) / n, (n11 + n01) / n
    l1, u1 = proportion_confint(n11 + n10, n, alpha=1 - LEVEL, method="wilson")
    l2, u2 = proportion_confint(n11 + n01, n, alpha=1 - LEVEL, method="wilson")
    den = (n11 + n10) * (n01 + n00) * (n11 + n01) * (n10 + n00)
    phi = (n11 * n00 - n10 * n01) / np.sqrt(den) if den > 0 else 0.0
    dl = np.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0))
    du = np.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0))
    diff = (n10 - n01) / n
    pm = mcnemar(np.array([[n11, n10], [n01, n00]]), exact=True).pvalue
    pairs.append([m, "dense", n11, n10, n01, n00, diff, diff - dl, diff + du, pm])
ph = multipletests([p[-1] for p in pairs], method="holm")[1]
with open(os.path.join(EXP, "probe_pairs.tsv"), "w") as f:
    f.write("# model a b n11 n10 n01 n00 diff ci_lo ci_hi p_mcnemar p_holm\n")
    for p, h in zip(pairs, ph):
        f.write("tiny-hybrid " + " ".join(str(v) if isinstance(v, (str, int)) else r(v) for v in p) + f" {r(h)}\n")


# ---------------------------------------------------------------- rule fixtures
# PROTOCOL A7: the rule needs all six sparse methods per task (one Holm family, m = 6); top-k
# 0.25 carries the designed effect, the other five a clearly negative one
RULE_SIX = ["topk_softmax_0125", "topk_softmax_025", "topk_softmax_05", "sparsemax", "entmax15",
            "headwise_adaptive_entmax"]
RULE_OTHER = {"topk_softmax_0125": -0.006, "topk_softmax_05": -0.007, "sparsemax": -0.008, "entmax15": -0.009,
              "headwise_adaptive_entmax": -0.010}


def rule_fixture(name, spec):
    """spec: task -> (level at epoch 3, gain at epoch 0 -> 3, entropy at 3, effect of top-k 0.25)."""
    recs, tasks = [], []
    for task, (lev, rise, ent, eff) in spec.items():
        for m in ["softmax"] + RULE_SIX:
            em = eff if m == "topk_softmax_025" else RULE_OTHER.get(m, 0.0)
            for s in [0, 1, 2, 3]:
                noise = rng.normal(0, 0.002)
                accs = []
                for e in range(5):
                    base = lev - rise * (3 - e) / 3 if e <= 3 else lev + 0.002
                    accs.append(acc_of(base + noise + (em + rng.normal(0, 0.0015) if m != "softmax" else 0)))
                for e, a in enumerate(accs):
                    recs.append({"kind": "eval.epoch", "v": 1, "task": task, "method": m, "seed": s, "epoch": e,
                                 "val_accuracy": a, "attention_entropy": round(ent + 0.01 * s - 0.02 * e, 4)})
                cells[(name, task, m, s)] = (accs, [round(ent + 0.01 * s - 0.02 * e, 4) for e in range(5)])
        tasks.append(task)
    write_ndjson(name + ".ndjson", recs)
    x, label, best = [], [], []
    for task in tasks:
        b = [cells[(name, task, "softmax", s)] for s in range(4)]
        acc_k = float(np.mean([c[0][3] for c in b]))
        d_acc = acc_k - float(np.mean([c[0][0] for c in b]))
        ent_k = float(np.mean([c[1][3] for c in b]))
        x.append([acc_k, d_acc, ent_k])
        rows = []
        for m in RULE_SIX:
            vals = {}
            for s in range(4):
                a, t = cells[(name, task, "softmax", s)][0], cells[(name, task, m, s)][0]
                vals[s] = (a[best_epoch(a, 5)], t[best_epoch(t, 5)])
            rows.append(paired(task, m, vals))
        adj = multipletests([row["p_t"] for row in rows], method="holm")[1]  # m = 6
        label.append(int(any(row["mean_diff"] > 0 and h < 0.05 for row, h in zip(rows, adj))))
        best.append(max(row["mean_diff"] for row in rows))
    mean, wins, losses, nons, succ, preds = rule_ref(np.array(x), label, best)
    return [name, sum(label), r(mean), wins, losses, nons, succ]


ok = rule_fixture("rule_ok", {"mnist": (0.95, 0.05, 1.2, -0.004), "kmnist": (0.90, 0.10, 1.4, -0.003),
                              "cifar10": (0.55, 0.15, 2.1, 0.02), "cifar100": (0.30, 0.10, 2.6, 0.025),
                              "twenty_news": (0.50, 0.20, 2.3, 0.015), "usps": (0.93, 0.08, 1.3, -0.002)})
fail = rule_fixture("rule_fail", {"mnist": (0.95, 0.05, 1.2, 0.02), "kmnist": (0.90, 0.10, 1.4, -0.02),
                                  "cifar10": (0.55, 0.15, 2.1, 0.02), "cifar100": (0.30, 0.10, 2.6, -0.02),
                                  "twenty_news": (0.50, 0.20, 2.3, 0.015), "usps": (0.93, 0.08, 1.3, -0.02)})
with open(os.path.join(EXP, "rule.tsv"), "w") as f:
    f.write("# fixture labelled mean_gain wins losses non_softmax success\n")
    for row in (ok, fail):
        f.write(" ".join(str(v) for v in row) + "\n")
print("rule fixtures:", ok, fail)
