#!/usr/bin/env python3
"""tests/gpu/cmp_eval.py [--device PREFIX] [--epochs N] CPU_VAL DEV_VAL [CPU_VAL DEV_VAL ...]

sb-eval's validation records of the same checkpoints evaluated on the CPU and on the device
(CUDA), pair by pair: every epoch's val_accuracy within 3 flipped predictions (products
summed in another order may flip a near-tie prediction), val_loss, attention_density and
attention_entropy within 1e-4 relative. --device: the device's run.meta must name a device
starting with PREFIX; --epochs: exactly N epochs compared in all. Prints one summary line
(then the first differences); exit 1 on any difference. Standard library only."""
import json
import sys

KEYS = ("val_accuracy", "val_loss", "attention_density", "attention_entropy")


def read(path):
    meta, ep = None, {}
    for line in open(path):
        r = json.loads(line)
        if r.get("kind") == "run.meta":
            meta = r
        elif r.get("kind") == "eval.epoch":
            ep[r["epoch"]] = r
    return meta, ep


def main(argv):
    prefix, want = None, None
    while argv and argv[0].startswith("--"):
        opt, val = argv[0], argv[1]
        argv = argv[2:]
        if opt == "--device":
            prefix = val
        elif opt == "--epochs":
            want = int(val)
        else:
            sys.exit("cmp_eval.py: unknown option " + opt)
    if not argv or len(argv) % 2:
        sys.exit("usage: cmp_eval.py [--device PREFIX] [--epochs N] CPU_VAL DEV_VAL ...")
    n, bad, worst = 0, [], dict.fromkeys(KEYS, 0.0)
    for cpath, dpath in zip(argv[0::2], argv[1::2]):
        _, c = read(cpath)
        meta, d = read(dpath)
        if prefix and not str((meta or {}).get("device", "")).startswith(prefix):
            bad.append("%s: evaluated on %s" % (dpath, meta and meta.get("device")))
        if sorted(c) != sorted(d) or not c:
            bad.append("%s: epochs %s vs %s" % (dpath, sorted(d), sorted(c)))
            continue
        for e in c:
            n += 1
            for k in KEYS:
                a, b = c[e].get(k), d[e].get(k)
                if a is None or b is None:
                    if (a is None) != (b is None):
                        bad.append("%s epoch %d: %s %s vs %s" % (dpath, e, k, b, a))
                    continue
                diff = abs(a - b) * c[e]["n_val"] if k == "val_accuracy" else abs(a - b) / max(abs(a), 1e-12)
                worst[k] = max(worst[k], diff)
                if diff > (3.5 if k == "val_accuracy" else 1e-4):
                    bad.append("%s epoch %d: %s %.8g vs %.8g" % (dpath, e, k, b, a))
    if want is not None and n != want:
        bad.append("%d epochs compared, not %d" % (n, want))
    print("%d epochs compared; worst: flipped predictions %d, relative loss %.3g, density %.3g, entropy %.3g"
          % (n, round(worst["val_accuracy"]), worst["val_loss"], worst["attention_density"],
             worst["attention_entropy"]))
    for b in bad[:10]:
        print(b)
    return 0 if n and not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
