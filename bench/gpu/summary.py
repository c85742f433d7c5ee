#!/usr/bin/env python3
"""summary.py OUTDIR [--apply RESULTS.md] [--meta KEY=VALUE ...]

The closing table of tests/gpu/run.sh, from OUTDIR/bench.ndjson (gpu_bench and
torch_bench records) and OUTDIR/sections.tsv: written to OUTDIR/summary.txt as the
Markdown block of bench/RESULTS.md's CUDA section (between the markers
<!-- cuda:begin --> and <!-- cuda:end -->), and printed. With --apply the block
replaces the one in RESULTS.md (or is appended when the markers are missing), so
the lead can run `python3 bench/gpu/summary.py OUTDIR --apply bench/RESULTS.md`
on the fetched OUTDIR. The block's header (command, git, date, device) comes from the
bench.meta record run.sh writes into bench.ndjson; --meta KEY=VALUE adds or overrides.
"""
import json
import os
import sys

STUDY_CELLS, EPOCHS, N_TRAIN, N_VAL = 910, 30, 48000, 12000
# PROTOCOL A1's 13 tasks, 70 cells each (7 methods x 10 seeds); their sizes and token
# counts come from sb-fetch's registry
STUDY_TASKS = ["mnist", "fashion_mnist", "kmnist", "cifar10", "cifar100", "twenty_news", "synthetic_marker",
               "emnist_balanced", "emnist_letters", "emnist_digits", "k49", "svhn", "usps"]
REGISTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fetch", "registry.json")
METHODS = ["softmax", "topk_softmax_0125", "topk_softmax_025", "topk_softmax_05", "sparsemax", "entmax15",
           "headwise_adaptive_entmax"]
BEGIN, END = "<!-- cuda:begin -->", "<!-- cuda:end -->"


def load(out):
    recs = []
    p = os.path.join(out, "bench.ndjson")
    if os.path.exists(p):
        for line in open(p):
            line = line.strip()
            if line.startswith("{"):
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
    return recs


def flops_per_sample(T, P, d=64, layers=2, classes=10):
    """compact tier: multiply-adds x 2 of the matrix products, training = forward x 3 (the
    model of bench/train/run.py); P = patch dimension (0 for text: an embedding lookup)"""
    ff = 4 * d
    macs = (T - 1) * P * d + layers * (T * d * 3 * d + 2 * T * T * d + T * d * d + 2 * T * d * ff) + d * classes
    return 3 * 2 * macs


def study_workload(registry=REGISTRY):
    """The 910-cell study in Fashion-MNIST-sample equivalents: per task, 70 cells x 30 epochs x
    (train + validation / 3) samples of the PROTOCOL A1 split (validation = round(0.2 n_pool);
    the synthetic task's generator sizes), each weighted by its model FLOPs per sample relative
    to Fashion-MNIST's. Returns (equivalent samples, [(task, samples, weight, shape family)]),
    or None. The families are gpu_bench's --shape: fmnist (50 tokens), cifar (65 tokens: CIFAR,
    SVHN, and USPS, whose 2 x 2 patches make its embedding cheaper), text (97 tokens)."""
    try:
        tasks = {t["task"]: t for t in json.load(open(registry))["tasks"]}
        ref = flops_per_sample(50, 16)
        rows, total = [], 0.0
        for name in STUDY_TASKS:
            t = tasks[name]
            if "generator" in t:
                n_train, n_val = t["generator"]["n_train"], t["generator"]["n_val"]
            else:
                n_val = int(round(0.2 * t["n_pool"]))
                n_train = t["n_pool"] - n_val
            P = 0 if t["modality"] == "text" else t["shape"][0] * t["patch"] ** 2
            w = flops_per_sample(t["tokens"], P, classes=t["classes"]) / ref
            n = 70 * EPOCHS * (n_train + n_val / 3.0)
            family = "text" if t["modality"] == "text" else ("fmnist" if t["tokens"] == 50 else "cifar")
            rows.append((name, n, w, family))
            total += n * w
        return total, rows
    except (OSError, ValueError, KeyError, TypeError):
        return None


def fmt_x(a, b):
    return ("%.1fx" % (a / b)) if a and b else "n/a"


def block(out, cli_meta):
    recs = load(out)
    meta = {}
    for r in recs:  # {"kind": "bench.meta", ...} written by run.sh
        if r.get("kind") == "bench.meta":
            meta.update({k: str(v) for k, v in r.items() if k != "kind"})
    meta.update(cli_meta)
    single = {}
    for r in recs:
        if r.get("kind") == "bench.single":
            single[(r.get("method"), r.get("mode", "plain"))] = r
    torch = {r["method"]: r for r in recs if r.get("kind") == "bench.torch" and "method" in r}
    # keyed by (shape, mode, cells, tf32): the 70-cell rows, the 140-cell row, the TF32 row and
    # the other task families' shapes
    # rows run with fewer hardware queues than the backend asks for (32; the driver's default
    # is 8) are kept apart: they answer "do the queues matter?", not the targets
    multi = {(r.get("shape", "fmnist"), r.get("mode", "plain"), r.get("cells", 0),
              "tf32" in str(r.get("device", ""))): r for r in recs
             if r.get("kind") == "bench.multi" and r.get("connections", 32) in (0, 32)}
    fewq = [r for r in recs if r.get("kind") == "bench.multi" and r.get("connections", 32) not in (0, 32)]
    prof = [r for r in recs if r.get("kind") == "bench.profile"]
    ptot = {r["method"]: r for r in recs if r.get("kind") == "bench.profile_total"}
    # the GPU's name as PyTorch reports it, else run.sh's (a dry or emulated run has no torch records)
    dev = next((r.get("device") for r in recs if r.get("kind") == "bench.torch" and r.get("device")),
               meta.get("device", "?"))
    L = [BEGIN, "## CUDA backend vs PyTorch eager (latest GPU check)", ""]
    for k in ("command", "git", "date", "device"):
        if k in meta:
            L.append("- %s: %s" % (k, meta[k]))
    for k, v in meta.items():
        if k not in ("command", "git", "date", "device"):
            L.append("- %s: %s" % (k, v))
    L.append("")
    sec = os.path.join(out, "sections.tsv")
    if os.path.exists(sec):
        L.append("| section | status | seconds | detail |")
        L.append("| --- | --- | ---: | --- |")
        for line in open(sec):
            f = line.rstrip("\n").split("\t")
            if len(f) >= 4:
                L.append("| %s | %s | %s | %s |" % (f[0], f[1], f[2], "; ".join(f[3:]).replace("|", "/")))
        L.append("")
    L.append("Throughput, compact Fashion-MNIST cell (T=50, d=64, batch 256, fp32), samples/s on %s; "
             "ours: steps queued as sb-train queues them, recorded once and replayed (graph) or issued op by op "
             "(plain)" % dev)
    L.append("")
    L.append("| method | ours, graph | ms/step | ours, plain | ms/step | PyTorch eager | graph vs PyTorch "
             "(target >= 5x) | plain vs PyTorch |")
    L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    inv = 0.0
    have_all = True
    for m in METHODS:
        g = single.get((m, "graph"), {})
        p = single.get((m, "plain"), {})
        t = torch.get(m, {}).get("samples_per_s", 0) or 0
        gs, ps = g.get("samples_per_s", 0) or 0, p.get("samples_per_s", 0) or 0
        note = ""
        if g and not g.get("replayed"):
            note = " (no graph ops)" if g.get("device") == "cpu" else " (NOT replayed)"
        L.append("| %s | %.0f%s | %.3f | %.0f | %.3f | %.0f | %s | %s |" % (
            m, gs, note, g.get("ms_per_step", 0) or 0, ps, p.get("ms_per_step", 0) or 0, t, fmt_x(gs, t),
            fmt_x(ps, t)))
        if t:
            inv += 1.0 / t
        else:
            have_all = False
    seq = len(METHODS) / inv if have_all and inv > 0 else 0  # every method once, one after another
    if multi:
        L.append("")
        L.append("| many cells (7 methods x N seeds), one process | cells | samples/s | vs sequential PyTorch "
                 "(target >= 20x) | projected 910-cell study (target < 1 h) |")
        L.append("| --- | ---: | ---: | ---: | ---: |")
        flat = STUDY_CELLS * EPOCHS * (N_TRAIN + N_VAL / 3.0)
        wl = study_workload()
        samples = wl[0] if wl else flat
        shapes = {"fmnist": 0, "cifar": 1, "text": 2}
        for key in sorted(multi, key=lambda k: (shapes.get(k[0], 3), k[3], k[1] != "graph", k[2])):
            shape, mode, cells, tf32 = key
            r = multi[key]
            mc = r.get("samples_per_s", 0) or 0
            label = "recorded steps (graphs)" if mode == "graph" else "op by op"
            if tf32:
                label += ", TF32 (opt-in, not the fp32 default)"
            if shape != "fmnist":  # PyTorch was measured on Fashion-MNIST's shape only
                label += ", %s shape (%s tokens)" % (shape, {"cifar": "65", "text": "97"}.get(shape, "?"))
                L.append("| sparsebench, %s | %d (%d ok) | %.0f | n/a (other shape) | (below) |" % (
                    label, r.get("cells", 0), r.get("cells_ok", 0), mc))
                continue
            L.append("| sparsebench, %s | %d (%d ok) | %.0f | %s | %s |" % (
                label, r.get("cells", 0),
                r.get("cells_ok", 0), mc, fmt_x(mc, seq), ("%.2f h" % (samples / mc / 3600.0)) if mc else "n/a"))
        for r in fewq:
            mc = r.get("samples_per_s", 0) or 0
            L.append("| sparsebench, %s, %d hardware queues (CUDA_DEVICE_MAX_CONNECTIONS; the backend's is 32) "
                     "| %d (%d ok) | %.0f | %s | n/a |" % (
                         "recorded steps (graphs)" if r.get("mode") == "graph" else "op by op",
                         r.get("connections", 0), r.get("cells", 0), r.get("cells_ok", 0), mc, fmt_x(mc, seq)))
        if seq:
            L.append("| PyTorch eager, cells one after another (harmonic mean of the methods) | 1 at a time | %.0f "
                     "| 1.0x | %.2f h |" % (seq, samples / seq / 3600.0))
        L.append("")
        if wl:
            L.append("Projection: the 13 tasks of PROTOCOL A1 at their own sizes, 70 cells x %d epochs x (train + "
                     "validation / 3) samples each (validation costs about a third of a training sample), weighted "
                     "by model FLOPs per sample relative to Fashion-MNIST (more tokens: CIFAR, SVHN, USPS 65, text "
                     "97), at the measured Fashion-MNIST many-cell rate: %.3g Fashion-MNIST-sample equivalents, "
                     "%.2fx the %d x %d x (%d + %d / 3) of a study whose every cell were Fashion-MNIST-sized. "
                     "Per task (samples, weight): %s." % (
                         EPOCHS, samples, samples / flat, STUDY_CELLS, EPOCHS, N_TRAIN, N_VAL,
                         ", ".join("%s %.3g x %.2f" % r[:3] for r in wl[1])))
            # measured instead of FLOPs-weighted: each task at the graph rate of its shape, with the
            # same number of cells for the three (70 on a device run)
            common = set.intersection(*[{k[2] for k in multi if k[0] == sh and k[1] == "graph" and not k[3]}
                                        for sh in ("fmnist", "cifar", "text")])
            nc = max(common) if common else 0
            rate = {sh: (multi.get((sh, "graph", nc, False)) or {}).get("samples_per_s", 0) or 0
                    for sh in ("fmnist", "cifar", "text")}
            if nc and all(rate.values()):
                hours = {sh: sum(r[1] for r in wl[1] if r[3] == sh) / rate[sh] / 3600.0 for sh in rate}
                L.append("")
                L.append("**Projection from the measured rates of the three shapes** (%d cells, recorded steps, "
                         "fp32; each task's samples at the rate of its shape, no FLOPs model): %.2f h (target "
                         "< 1 h): Fashion-MNIST shape %.2f h at %.0f samples/s, CIFAR shape %.2f h at %.0f, text "
                         "%.2f h at %.0f." % (nc, sum(hours.values()), hours["fmnist"], rate["fmnist"],
                                             hours["cifar"], rate["cifar"], hours["text"], rate["text"]))
        else:
            L.append("Projection: %d cells x %d epochs x (%d train + %d val / 3) samples, every cell "
                     "Fashion-MNIST-sized (fetch/registry.json not found: the tasks' own sizes are not used), at "
                     "the measured many-cell rate." % (STUDY_CELLS, EPOCHS, N_TRAIN, N_VAL))
    if prof:
        L.append("")
        L.append("Device time per op (gpu_bench --profile: each op of one plain step repeated %s times between "
                 "two waits); the 12 largest per method:" % (prof[0].get("repeats", "?")))
        for m in [m for m in METHODS if m in ptot]:
            rows = sorted([r for r in prof if r.get("method") == m], key=lambda r: -(r.get("us_per_step") or 0))
            t = ptot[m]
            L.append("")
            L.append("%s: %d ops, %d calls, sum of op times %.0f us vs a plain step of %.0f us (the rest: gaps "
                     "between launches and waits)" % (m, t.get("ops", 0), t.get("calls", 0),
                                                       t.get("us_sum_of_ops", 0), t.get("us_plain_step", 0)))
            L.append("")
            L.append("| op | calls | us/call | us/step |")
            L.append("| --- | ---: | ---: | ---: |")
            for r in rows[:12]:
                L.append("| %s | %d | %.1f | %.1f |" % (r.get("op"), r.get("calls", 0), r.get("us_per_call", 0),
                                                       r.get("us_per_step", 0)))
    data = {r.get("data") for r in recs if r.get("data")}
    if data:
        L.append("")
        L.append("Data: %s (throughput does not depend on pixel values)." % ", ".join(sorted(data)))
    L.append(END)
    return "\n".join(L) + "\n"


def apply(path, text):
    old = open(path).read() if os.path.exists(path) else ""
    if BEGIN in old and END in old:
        a = old.index(BEGIN)
        b = old.index(END) + len(END)
        new = old[:a] + text.rstrip("\n") + old[b:]
    else:
        new = old.rstrip("\n") + "\n\n" + text
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, path)


def main(argv):
    if not argv or argv[0].startswith("-"):
        sys.stderr.write(__doc__)
        return 2
    out = argv[0]
    target = None
    meta = {}
    i = 1
    while i < len(argv):
        if argv[i] == "--apply" and i + 1 < len(argv):
            target = argv[i + 1]
            i += 2
        elif argv[i] == "--meta" and i + 1 < len(argv) and "=" in argv[i + 1]:
            k, v = argv[i + 1].split("=", 1)
            meta[k] = v
            i += 2
        else:
            sys.stderr.write(__doc__)
            return 2
    text = block(out, meta)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    if target:
        apply(target, text)
        sys.stderr.write("summary.py: the CUDA block of %s replaced\n" % target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
