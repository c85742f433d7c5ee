#!/usr/bin/env python3
"""summary.py OUTDIR — the short table tests/gpu/run.sh prints last, from
OUTDIR/bench.ndjson (gpu_bench and torch_bench records) and OUTDIR/sections.tsv.
Also writes it to OUTDIR/summary.txt, ready to paste into bench/RESULTS.md."""
import json
import os
import sys

STUDY_CELLS, EPOCHS, N_TRAIN, N_VAL = 910, 30, 48000, 12000
METHODS = ["softmax", "topk_softmax_0125", "topk_softmax_025", "topk_softmax_05", "sparsemax", "entmax15",
           "headwise_adaptive_entmax"]


def main(out):
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
    ours = {r["method"]: r for r in recs if r.get("kind") == "bench.single"}
    torch = {r["method"]: r for r in recs if r.get("kind") == "bench.torch" and "method" in r}
    multi = [r for r in recs if r.get("kind") == "bench.multi"]
    L = []
    sec = os.path.join(out, "sections.tsv")
    if os.path.exists(sec):
        L.append("section            status  seconds  detail")
        for line in open(sec):
            f = line.rstrip("\n").split("\t")
            if len(f) >= 4:
                L.append("%-18s %-7s %7s  %s" % (f[0], f[1], f[2], "; ".join(f[3:])))
        L.append("")
    dev = next((r.get("device") for r in recs if r.get("kind") == "bench.torch" and r.get("device")), "?")
    L.append("Throughput, compact Fashion-MNIST cell (T=50, d=64, batch 256), samples/s on %s" % dev)
    L.append("| method | sparsebench 1 cell | PyTorch eager 1 cell | speed-up (target >= 5x) |")
    L.append("| --- | ---: | ---: | ---: |")
    inv = 0.0
    have_all = True
    for m in METHODS:
        o = ours.get(m, {}).get("samples_per_s", 0) or 0
        t = torch.get(m, {}).get("samples_per_s", 0) or 0
        L.append("| %s | %.0f | %.0f | %s |" % (m, o, t, ("%.1fx" % (o / t)) if o and t else "n/a"))
        if t:
            inv += 1.0 / t
        else:
            have_all = False
    if multi:
        r = multi[-1]
        mc = r.get("samples_per_s", 0) or 0
        L.append("")
        L.append("| many cells | cells | samples/s |")
        L.append("| --- | ---: | ---: |")
        L.append("| sparsebench, one process | %d (%d ok) | %.0f |" % (r.get("cells", 0), r.get("cells_ok", 0), mc))
        if have_all and inv > 0:
            seq = len(METHODS) / inv  # cells of every method, one after another (harmonic mean)
            L.append("| PyTorch eager, cells one after another | %d | %.0f |" % (r.get("cells", 0), seq))
            L.append("")
            L.append("multi-cell speed-up over sequential PyTorch: %.1fx (target >= 20x)" % (mc / seq if seq else 0))
        if mc > 0:
            # eval of the validation split costs about a third of a training step per sample
            samples = STUDY_CELLS * EPOCHS * (N_TRAIN + N_VAL / 3.0)
            hours = samples / mc / 3600.0
            L.append("projected full study (%d cells x %d epochs x (%d train + %d val/3) samples, all cells "
                     "Fashion-MNIST-sized) on this GPU: %.2f h (target < 1 h)" % (STUDY_CELLS, EPOCHS, N_TRAIN, N_VAL,
                                                                                   hours))
    data = {r.get("data") for r in recs if r.get("data")}
    if data:
        L.append("data: %s (throughput does not depend on pixel values)" % ", ".join(sorted(data)))
    text = "\n".join(L) + "\n"
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
