#!/usr/bin/env python3
"""bench/aggregate/gen.py — synthetic validation logs and test records for timing the
aggregate stage (sb-freeze, sb-stats, sb-a8) at the study's size.

    gen.py [--grid study|trajectory|bottomk|lineardecay] [--scale F] [--seeds N]
           [--epochs N] [--seed S] [--no-test] OUTDIR

Writes the layout the pipeline uses (docs/pipelines.md, "What is made, and where"):

    OUTDIR/runs/CELL_ID/cell.json      the complete cell (cell_id = the hash sb-train gives)
    OUTDIR/runs/CELL_ID/val.ndjson     run.meta, one eval.epoch per epoch, eval.done
                                       (the fields sb-eval writes, docs/records.md; probe
                                       features for every method but headwise_adaptive_entmax)
    OUTDIR/test/test.ndjson            (grid study) run.meta, test.read and one test.cell per
                                       cell of the test plan sb-freeze would write
                                       (topk_mean_val_acc, patience 5, min_seeds = seeds)
    OUTDIR/vals.txt                    the validation logs, one per line, in the pipeline's order

Grids (pipelines/grids/study.grid, extension.grid):
  study        13 tasks x 7 methods x 10 seeds x 30 epochs = 910 cells (the default)
  trajectory   10 tasks x {softmax, topk_softmax_025} x 5 seeds x 2 archs x 3 tiers = 600
  bottomk      cifar10 x 5 methods x 10 seeds = 50
  lineardecay  cifar10 x 3 methods x 10 seeds x budgets 3..30 = 210
  probes       OUTDIR/probes.ndjson only: probe.result records (docs/sb-stats.md) of one model,
               13 tasks x 6 methods x 40 probes (the LM track's 40 per task and method) = 3120

--scale F scales the number of cells: for study/trajectory the task axis (round(F x tasks);
beyond the 13 PROTOCOL A1 tasks, copies named TASK_rN), for bottomk/lineardecay the seeds,
for probes the probes per task.
--seeds and --epochs override the grid's seeds and budget (study, trajectory, bottomk).
Everything is deterministic in --seed (default 1). Python 3 standard library only.
"""
import argparse
import hashlib
import json
import math
import os
import random
import sys

TASKS = [  # PROTOCOL A1's 13, in its order: (task, n_val, base accuracy, limit)
    ("mnist", 12000, 0.975, 0),
    ("fashion_mnist", 12000, 0.89, 0),
    ("kmnist", 12000, 0.90, 0),
    ("cifar10", 10000, 0.64, 0),
    ("cifar100", 10000, 0.33, 0),
    ("twenty_news", 2263, 0.60, 0),
    ("synthetic_marker", 4000, 0.93, 0),
    ("emnist_balanced", 12000, 0.82, 60000),
    ("emnist_letters", 12000, 0.88, 60000),
    ("emnist_digits", 12000, 0.985, 60000),
    ("k49", 12000, 0.86, 60000),
    ("svhn", 12000, 0.82, 60000),
    ("usps", 1458, 0.95, 60000),
]
STUDY_METHODS = ["softmax", "topk_softmax_0125", "topk_softmax_025", "topk_softmax_05", "sparsemax", "entmax15",
                 "headwise_adaptive_entmax"]
TOPK = ["topk_softmax_0125", "topk_softmax_025", "topk_softmax_05"]
TEST_METHODS = ["softmax", "sparsemax", "entmax15", "headwise_adaptive_entmax"]
DENSITY = {"softmax": 1.0, "topk_softmax_0125": 0.14, "topk_softmax_025": 0.26, "topk_softmax_05": 0.5,
           "sparsemax": 0.18, "entmax15": 0.42, "headwise_adaptive_entmax": 0.72, "bottomk_softmax_0125": 0.14,
           "bottomk_softmax_025": 0.26}
OFFSET = {"softmax": 0.0, "topk_softmax_0125": -0.012, "topk_softmax_025": -0.006, "topk_softmax_05": -0.002,
          "sparsemax": -0.004, "entmax15": 0.001, "headwise_adaptive_entmax": 0.0, "bottomk_softmax_0125": -0.35,
          "bottomk_softmax_025": -0.33}


def num(v):
    """a float as sb_fmt_f64 writes it (shortest round trip, no trailing .0)"""
    r = repr(float(v))
    return r[:-2] if r.endswith(".0") else r


def cell_id(c):
    """TASK.METHOD.sSEED.ARCH.TIER.HASH8 (docs/records.md; lib/train_cell.c sb_cell_canonical)"""
    s = ('{"alpha":%s,"arch":"%s","batch":%d,"clip":%s,"dropout":%s,"epochs":%d,"limit":%d,"lr":%s,'
         '"mask":"%s","method":"%s","schedule":"%s","seed":%d,"task":"%s","tier":"%s","val_fraction":%s,'
         '"weight_decay":%s}') % (num(c["alpha"]), c["arch"], c["batch"], num(c["clip"]), num(c["dropout"]),
                                  c["epochs"], c["limit"], num(c["lr"]), c["mask"], c["method"], c["schedule"],
                                  c["seed"], c["task"], c["tier"], num(c["val_fraction"]), num(c["weight_decay"]))
    h = hashlib.sha256(s.encode()).hexdigest()[:8]
    return "%s.%s.s%d.%s.%s.%s" % (c["task"], c["method"], c["seed"], c["arch"], c["tier"], h)


def make_cell(task, method, seed, epochs, arch="plain", tier="compact", limit=0, schedule="constant"):
    c = {"task": task, "method": method, "seed": seed, "epochs": epochs, "batch": 256, "lr": 0.001,
         "weight_decay": 0.0001, "clip": 5.0, "tier": tier, "arch": arch, "limit": limit, "val_fraction": 0.2,
         "schedule": schedule, "alpha": 1.5, "mask": "margin", "dropout": 0.1}
    c["cell_id"] = cell_id(c)
    return c


def fake_sha(*parts):
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()


def f(v):
    """a JSON number field value as our writers print it (repr round-trips)"""
    return repr(float(v))


def nonfinite_nan(key):
    return '"%s":null,"%s_nonfinite":"nan"' % (key, key)


def best_epoch(acc, patience):
    """sb_select_best_epoch (docs/sb-freeze.md): the first epoch of maximal accuracy before the stop"""
    best, best_i, count = -1.0, 0, 0
    for i, a in enumerate(acc):
        if a > best:
            best, best_i, count = a, i, 0
        else:
            count += 1
        if patience and count >= patience:
            break
    return best_i


def accuracies(rng, base, n_val, method, epochs, budget_scale=1.0, helps=False):
    """a plausible curve: rises towards base + method offset + seed noise, with epoch noise,
    rounded to multiples of 1/n_val; HELPS: the sparse methods beat softmax (so that some tasks
    carry sb-stats' sparse-helps label and --rule fits)"""
    off = OFFSET.get(method, 0.0)
    if helps and method != "softmax" and not method.startswith("bottomk"):
        off = -off + 0.012
    top = min(0.999, max(0.02, base + off + rng.gauss(0, 0.004)))
    start = max(0.01, top - rng.uniform(0.08, 0.25))
    tau = rng.uniform(2.0, 6.0) * budget_scale
    out = []
    for e in range(epochs):
        a = top - (top - start) * math.exp(-e / tau) + rng.gauss(0, 0.003)
        a = min(1.0, max(0.0, a))
        out.append(round(a * n_val) / n_val)
    return out


RUN_META_TMPL = ('{"kind":"run.meta","v":1,"program":"sb-eval","version":"bench-gen","argv":["bin/sb-eval","-q",'
                 '"-d","data","-j","1","%s"],"inputs":[%s],"device":"cpu: bench, 1 thread","threads":1,'
                 '"start_time":"2026-12-01T00:00:00.000Z","start_unix_s":1796083200.0,"host":"bench"}\n')


def write_cell(runs, c, n_val, accs, rng, probe_all=False):
    cid = c["cell_id"]
    d = os.path.join(runs, cid)
    os.makedirs(d, exist_ok=True)
    cj = json.dumps(dict([("cell_id", cid)] + [(k, v) for k, v in c.items() if k != "cell_id"] +
                         [("parameter_count", 104586), ("seq_len", 50), ("classes", 10),
                          ("n_train", n_val * 4), ("n_val", n_val),
                          ("dataset_sha256", fake_sha("pool", c["task"]))]), separators=(",", ":"))
    with open(os.path.join(d, "cell.json"), "w") as fh:
        fh.write(cj + "\n")
    rundir = "out/study/main/runs/" + cid
    E = c["epochs"]
    inputs = ['{"path":"%s/cell.json","sha256":"%s","size_bytes":%d}' % (rundir, fake_sha(cid, "cell"), len(cj) + 1),
              '{"path":"data/%s/pool.safetensors","sha256":"%s","size_bytes":47281176}' %
              (c["task"], fake_sha("pool", c["task"]))]
    ck = [fake_sha(cid, "ck", e) for e in range(E)]
    inputs += ['{"path":"%s/epoch-%03d.safetensors","sha256":"%s","size_bytes":422488}' % (rundir, e + 1, ck[e])
               for e in range(E)]
    lines = [RUN_META_TMPL % (rundir, ",".join(inputs))]
    m = c["method"]
    hae = m == "headwise_adaptive_entmax"
    dens0 = DENSITY.get(m, 0.5)
    for e in range(E):
        a = accs[e]
        ent = 3.49 * dens0 ** 0.3 - 0.01 * e + rng.gauss(0, 0.01)
        rec = ('{"kind":"eval.epoch","v":1,"cell_id":"%s","task":"%s","method":"%s","seed":%d,"tier":"%s",'
               '"arch":"%s","epoch":%d,"epochs_completed":%d,"n_val":%d,"val_accuracy":%s,"val_macro_f1":%s,'
               '"val_loss":%s,"attention_density":%s,"attention_entropy":%s,') % (
            cid, c["task"], m, c["seed"], c["tier"], c["arch"], e, e + 1, n_val, f(a),
            f(max(0.0, a - rng.uniform(0, 0.01))), f(0.3 + (1 - a) * 2 + rng.uniform(0, 0.05)),
            f(min(1.0, dens0 + rng.gauss(0, 0.001))), f(ent))
        if hae:
            rec += '"alpha_mean":%s,"alpha_std":%s,' % (f(1.5 + 0.002 * e), f(0.0035 + 0.0001 * e))
        else:
            rec += nonfinite_nan("alpha_mean") + "," + nonfinite_nan("alpha_std") + ","
        if not hae or probe_all:
            rec += ('"probe_examples":128,"probe_dense_entropy":%s,"probe_boundary_margin":%s,"probe_tail_mass":%s,'
                    '"probe_gradient_topk_share":%s,') % (
                f(3.6 - 0.02 * e + rng.gauss(0, 0.02)), f(0.055 + 0.001 * e + rng.gauss(0, 0.002)),
                f(0.56 - 0.005 * e + rng.gauss(0, 0.01)), f(0.63 + 0.008 * e + rng.gauss(0, 0.01)))
        rec += ('"correct_bits":"val-correct-%03d.bits","correct_sha256":"%s","checkpoint":"epoch-%03d.safetensors",'
                '"checkpoint_sha256":"%s"}\n') % (e + 1, fake_sha(cid, "bits", e), e + 1, ck[e])
        lines.append(rec)
    lines.append('{"kind":"eval.done","v":1,"cell_id":"%s","task":"%s","method":"%s","seed":%d,"tier":"%s",'
                 '"arch":"%s","epochs":%d,"epochs_evaluated":%d,"train_status":"completed"}\n' %
                 (cid, c["task"], m, c["seed"], c["tier"], c["arch"], E, E))
    p = os.path.join(d, "val.ndjson")
    with open(p, "w") as fh:
        fh.writelines(lines)
    return p


def task_list(n):
    """the first n tasks: PROTOCOL A1's 13, then copies TASK_r2, TASK_r3, ..."""
    out = []
    for i in range(n):
        t, nv, base, lim = TASKS[i % 13]
        r = i // 13
        out.append((t if r == 0 else "%s_r%d" % (t, r + 1), nv, base, lim))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--grid", default="study", choices=["study", "trajectory", "bottomk", "lineardecay", "probes"])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seeds", type=int)
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-test", action="store_true", help="(study) no test records")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    if a.grid == "probes":
        os.makedirs(a.outdir, exist_ok=True)
        n = max(1, int(round(40 * a.scale)))
        methods = ["dense", "topk_softmax_025", "sparsemax", "entmax15", "headwise_adaptive_entmax", "softmax"]
        with open(os.path.join(a.outdir, "probes.ndjson"), "w") as fh:
            for t in range(13):
                for m in methods:
                    for p in range(n):
                        fh.write('{"kind":"probe.result","v":1,"model":"bench-lm","task":"niah_%d","method":"%s",'
                                 '"probe_id":%d,"correct":%s}\n' % (t, m, p, "true" if rng.random() < 0.6 else "false"))
        with open(os.path.join(a.outdir, "vals.txt"), "w") as fh:
            fh.write(os.path.join(a.outdir, "probes.ndjson") + "\n")
        print("gen.py: probes: %d probe.result records -> %s" % (13 * len(methods) * n, a.outdir), file=sys.stderr)
        return
    runs = os.path.join(a.outdir, "runs")
    os.makedirs(runs, exist_ok=True)
    cells = []  # (cell, n_val, accs)
    if a.grid in ("study", "trajectory"):
        ntask = 13 if a.grid == "study" else 10
        nt = max(1, int(round(ntask * a.scale)))
        tasks = task_list(nt)
        if a.grid == "trajectory":  # the trajectory block's ten tasks
            keep = ["mnist", "fashion_mnist", "kmnist", "cifar10", "cifar100", "twenty_news", "synthetic_marker",
                    "emnist_letters", "emnist_digits", "usps"]
            pool = [t for t in task_list(13 * (1 + nt // 10)) if t[0].split("_r")[0] in keep]
            tasks = pool[:nt]
        methods = STUDY_METHODS if a.grid == "study" else ["softmax", "topk_softmax_025"]
        seeds = a.seeds if a.seeds else (10 if a.grid == "study" else 5)
        epochs = a.epochs if a.epochs else 30
        archs = ["plain"] if a.grid == "study" else ["plain", "local_hybrid"]
        tiers = ["compact"] if a.grid == "study" else ["compact", "deep", "wide"]
        for ti_, (t, nv, base, lim) in enumerate(tasks):
            helps = ti_ % 3 == 1  # a third of the tasks: sparse helps
            for m in methods:
                for s in range(seeds):
                    for ar in archs:
                        for ti in tiers:
                            c = make_cell(t, m, s, epochs, ar, ti, lim)
                            cells.append((c, nv, accuracies(rng, base, nv, m, epochs, helps=helps)))
    else:
        seeds = a.seeds if a.seeds else max(1, int(round(10 * a.scale)))
        if a.grid == "bottomk":
            methods, budgets, sched = (["softmax", "topk_softmax_0125", "topk_softmax_025", "bottomk_softmax_0125",
                                        "bottomk_softmax_025"], [a.epochs or 30], "constant")
        else:
            methods, budgets, sched = (["softmax", "topk_softmax_0125", "topk_softmax_025"],
                                       [3, 6, 9, 12, 18, 24, 30], "linear_decay")
        for m in methods:
            for s in range(seeds):
                for E in budgets:
                    c = make_cell("cifar10", m, s, E, schedule=sched)
                    cells.append((c, 10000, accuracies(rng, 0.64, 10000, m, E, E / 30.0)))
    vals = []
    for c, nv, accs in cells:
        vals.append(write_cell(runs, c, nv, accs, rng))
    # the pipeline passes the logs as runs/*/val.ndjson would list them (sorted cell ids)
    vals.sort()
    with open(os.path.join(a.outdir, "vals.txt"), "w") as fh:
        fh.write("\n".join(vals) + "\n")
    n_test = 0
    if a.grid == "study" and not a.no_test:
        n_test = write_tests(a.outdir, cells, seeds)
    print("gen.py: %s: %d cells, %d validation records, %d test.cell records -> %s" %
          (a.grid, len(cells), sum(len(x[2]) + 1 for x in cells), n_test, a.outdir), file=sys.stderr)


def write_tests(outdir, cells, min_seeds, patience=5):
    """test.ndjson as sb-test writes it, for the test plan of topk_mean_val_acc (patience 5)"""
    by = {}
    for c, nv, accs in cells:
        by[(c["task"], c["method"], c["seed"])] = (c, nv, accs)
    tasks = []
    for c, _, _ in cells:
        if c["task"] not in tasks:
            tasks.append(c["task"])
    rng = random.Random(7)
    sel_sha = fake_sha("selection")
    recs = ['{"kind":"run.meta","v":1,"program":"sb-test","version":"bench-gen","argv":["bin/sb-test","-q","-s",'
            '"out/study/main/selection.json"],"inputs":[{"path":"out/study/main/selection.json","sha256":"%s",'
            '"size_bytes":1}],"device":"cpu: bench","threads":1,"start_time":"2026-12-02T00:00:00.000Z",'
            '"start_unix_s":1796169600.0,"host":"bench"}\n' % fake_sha("selfile")]
    files = ",".join('{"task":"%s","path":"data/%s/test.safetensors","sha256":"%s"}' % (t, t, fake_sha("test", t))
                     for t in tasks)
    recs.append('{"kind":"test.read","v":1,"selection":"out/study/main/selection.json","selection_sha256":"%s",'
                '"read":1,"reread_reason":null,"started_at":"2026-12-02T00:00:00.000Z","test_files":[%s]}\n' %
                (sel_sha, files))
    n = 0
    for t in tasks:
        best, best_mean = None, None
        for m in TOPK:
            seeds = sorted(s for (tt, mm, s) in by if tt == t and mm == m)
            if len(seeds) < min_seeds:
                continue
            tot = 0.0
            for s in seeds:
                accs = by[(t, m, s)][2]
                tot += accs[best_epoch(accs, patience)]
            mean = tot / len(seeds)
            if best is None or mean > best_mean:
                best, best_mean, best_seeds = m, mean, seeds
        if best is None:
            continue
        for m in TEST_METHODS + [best]:
            for s in best_seeds:
                if (t, m, s) not in by:
                    continue
                c, nv, accs = by[(t, m, s)]
                ta = min(1.0, max(0.0, accs[-1] + rng.gauss(0, 0.004)))
                n_test = nv // 2 if t != "twenty_news" else 7532
                ta = round(ta * n_test) / n_test
                hae = m == "headwise_adaptive_entmax"
                alpha = ('"test_alpha_mean":%s,"test_alpha_std":%s' % (f(1.55), f(0.004)) if hae else
                         nonfinite_nan("test_alpha_mean") + "," + nonfinite_nan("test_alpha_std"))
                recs.append(
                    '{"kind":"test.cell","v":1,"cell_id":"%s","task":"%s","method":"%s","seed":%d,"tier":"%s",'
                    '"arch":"%s","epochs":%d,"seq_len":50,"n_test":%d,"test_accuracy":%s,"test_macro_f1":%s,'
                    '"test_loss":%s,"test_nonzero_ratio":%s,"test_attention_entropy":%s,%s,'
                    '"correct_bits":"bits/%s.bits","correct_sha256":"%s","checkpoint_sha256":"%s",'
                    '"selection_sha256":"%s"}\n' %
                    (c["cell_id"], t, m, s, c["tier"], c["arch"], c["epochs"], n_test, f(ta), f(max(0.0, ta - 0.003)),
                     f(0.3 + (1 - ta) * 2), f(DENSITY[m]), f(3.2), alpha, c["cell_id"],
                     fake_sha(c["cell_id"], "tbits"), fake_sha(c["cell_id"], "ck", c["epochs"] - 1), sel_sha))
                n += 1
    os.makedirs(os.path.join(outdir, "test"), exist_ok=True)
    with open(os.path.join(outdir, "test", "test.ndjson"), "w") as fh:
        fh.writelines(recs)
    return n


if __name__ == "__main__":
    main()
