#!/usr/bin/python3
"""make_seeds.py — write the small seed inputs of each fuzz target into seeds/TARGET/ from what
the programs write (bin/ must be built: make): a small frozen study made with the builders of
tests/fixtures/guard/lib.sh (cell.json and val.ndjson as sb-train --ids and sb-eval's format
give them), frozen by sb-freeze, then read by sb-test, whose read fails on the stand-in
checkpoints and is recorded in the ledger; an LM run directory from sb-lm import of
tests/fixtures/hf/qwen2_tok (cell.json, model.safetensors.sha256); the encoder cells of
tests/cli/sb-train.t and the SAS, N3-A and LM cells of tests/sh/ and docs/. Every seed is
under 8 KiB."""
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
LIMIT = 8192


def put(t, name, data):
    os.makedirs(os.path.join(HERE, "seeds", t), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    assert len(data) < LIMIT, (t, name, len(data))
    open(os.path.join(HERE, "seeds", t, name), "wb").write(data)


def dumps(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def seal(d):
    """the payload hash as sb-freeze computes it (tests/fixtures/guard/lib.sh reseal_selection)"""
    d = dict(d)
    d.pop("sha256", None)
    d["sha256"] = hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return json.dumps(d, indent=2) + "\n"


tmp = tempfile.mkdtemp(prefix="sb-records-seeds-")
env = dict(os.environ, PATH=os.path.join(TOP, "bin") + ":" + os.environ["PATH"], TOP=TOP, LC_ALL="C")
try:
    # a frozen study: four methods (the three top-k ratios and softmax) of task guardtask, seed 0,
    # three epochs; seed 1 of topk_softmax_025 twice, the rerun failed (sb-freeze keeps the first)
    script = r'''
set -eu
. "$TOP/tests/fixtures/guard/lib.sh"
mkdir -p runs
cp -r "$TOP/tests/fixtures/guard/data" data
acc() { case $1 in topk_softmax_025) echo "0.5 0.7 0.8" ;; topk_softmax_05) echo "0.5 0.6 0.7" ;; *) echo "0.4 0.5 0.6" ;; esac; }
mkgrid runs guardtask "softmax topk_softmax_0125 topk_softmax_025 topk_softmax_05" "0" acc
mkcell runs guardtask topk_softmax_025 1 "0.5 0.6 0.9" >/dev/null
mkcell runs guardtask median_switch 0 "0.4 0.6 0.7" completed compact 2 >/dev/null
mkcell runs guardtask sparsemax 0 "0.3 0.2" failed deep >/dev/null
sleep 0.05
sb-freeze -q --min-seeds 1 -o selection.json runs/*.compact.*/val.ndjson >freeze.out 2>&1
sleep 0.05
sb-test -q -s selection.json -d data -o out runs >/dev/null 2>&1 || true
sb-lm import -q -o lmruns --corpus "shakespeare=$TOP/tests/fixtures/lm/shakespeare-head.txt" --T 64 \
	"$TOP/tests/fixtures/hf/qwen2_tok" >/dev/null
'''
    subprocess.run(["bash", "-c", script], cwd=tmp, env=env, check=True)

    # ---- cell: cell.json of the study's runs, sb-train.t's cells, the other families
    runs = sorted(glob.glob(os.path.join(tmp, "runs", "*")))
    for r in runs:
        put("cell", "celljson-" + os.path.basename(r).split(".")[1], open(os.path.join(r, "cell.json"), "rb").read())
    lm = glob.glob(os.path.join(tmp, "lmruns", "*", "cell.json"))[0]
    put("cell", "lm-imported-celljson", open(lm, "rb").read())
    seen = 0
    for line in open(os.path.join(TOP, "tests", "cli", "sb-train.t"), encoding="utf-8"):
        m = re.match(r"^\$ printf '(\{.*\})\\n'", line)
        if not m or "%" in m.group(1):
            continue
        for j, c in enumerate(m.group(1).split("\\n")):
            seen += 1
            put("cell", "sb-train-t-%02d" % seen, c)
    put("cell", "encoder-all-fields", dumps({
        "task": "img", "method": "entmax_bisect", "seed": 3, "epochs": 2, "batch": 64, "lr": 3e-4,
        "weight_decay": 0, "clip": 1e30, "tier": "wide", "arch": "local_hybrid", "limit": 100,
        "val_fraction": 0.1, "schedule": "linear_decay", "alpha": 1.25, "mask": "exclude", "dropout": 0}))
    put("cell", "encoder-cosine-alpha", '{"task":"txt","method":"cosine_alpha","seed":1,"epochs":30}')
    put("cell", "encoder-bottomk", '{"task":"txt","method":"bottomk_softmax_0375","seed":1,"tier":"medium"}')
    # tests/sh/sas_e2e.sh, docs/sas.md, tests/sh/sas_scaled.sh
    put("cell", "sas-toy", '{"family":"sas","seed":42,"corpus":"tinyshakespeare=data/tinyshakespeare/input.txt"}')
    put("cell", "sas-all-fields", dumps({
        "family": "sas", "id": "sas-s1", "seed": 1, "corpus": "/tmp/input.txt", "T": 32, "block": 8, "topk": 2,
        "dsel": 8, "pre_steps": 4, "pre_batch": 2, "pre_lr": 8e-4, "pre_wd": 0.01, "pre_clip": 1,
        "sel_steps": 3, "sel_batch": 2, "sel_lr": 2e-3, "sel_wd": 0.01, "sel_clip": 1, "eval_windows": 2,
        "train_bytes": 4000, "eval_bytes": 1000}))
    put("cell", "sas-scaled", dumps({
        "family": "sas", "id": "sas-scaled", "seed": 0, "backbone": "out/lm/runs/lm.dense.s0.ACAC.d64.12345678",
        "blocks": [8, 16], "dsel": 16, "sel_steps": 2, "sel_batch": 2, "windows": 2, "probes": 1,
        "tasks": ["niah_single_1", "niah_multikey_1"], "masks": "recipe;block16;struct_random",
        "budget": "recipe:s=4,w=16,k=8", "untrained": 0, "nogate": 1}))
    # tests/sh/n3a_train.sh, docs/n3a.md
    put("cell", "n3a-registered", '{"family":"n3a","arch":"query","r":16,"seed":64000}')
    put("cell", "n3a-small", '{"family":"n3a","arch":"transformer","r":4,"seed":1,"updates":16,'
        '"eval_steps":[0,4,16],"parents":[4],"fork_updates":4,"n":8,"k":2,"epsilon":0.25,"train":64,'
        '"validation":32,"batch":8,"lr":0.001,"weight_decay":0.0001,"beta1":0.9,"beta2":0.999,"adam_eps":1e-8}')
    # tests/sh/lm_cli.sh, tests/sh/lm_train_kill.sh, pipelines/lm-track.mk
    put("cell", "lm-small", '{"family":"lm","seed":1,"model":{"d":32,"pattern":"ACA","heads":4,"kv_heads":2,'
        '"ffn":64,"pos":"rope","conv_gate":0},"T":128,"batch":4,"steps":40,"warmup":5,"lr":0.003,'
        '"log_every":20,"corpora":["docs=/tmp/corpus.txt"],"mixture":"docs=0.6,retrieval=0.4"}')
    put("cell", "lm-curriculum", '{"family":"lm","seed":3,"model":{"d":16,"pattern":"CACL","heads":2,"ffn":32},'
        '"T":64,"batch":4,"steps":60,"warmup":4,"lr":0.003,"ckpt_every":20,"log_every":10,"warm_T":32,'
        '"warm_steps":30,"corpora":["shakespeare=/tmp/s.txt"],"mixture":"shakespeare=0.5,retrieval=0.5",'
        '"haystack":"shakespeare"}')

    # ---- vallog: sb-eval's logs (through lib.sh), alone, two cells, a rerun after a form feed
    logs = {os.path.basename(r).split(".")[1] + "-s" + os.path.basename(r).split(".")[2][1:] + "-"
            + os.path.basename(r).split(".")[4]: open(os.path.join(r, "val.ndjson"), "rb").read() for r in runs}
    for k in ("softmax-s0-compact", "median_switch-s0-compact", "sparsemax-s0-deep"):
        put("vallog", k, logs[k])
    a, b = logs["topk_softmax_025-s0-compact"], logs["topk_softmax_025-s1-compact"]
    body = [l for l in a.split(b"\n") if l]
    put("vallog", "two-cells", a + b"\n".join(l for l in b.split(b"\n") if l and b"run.meta" not in l) + b"\n")
    put("vallog", "no-eval-done", b"\n".join(body[:-1]) + b"\n")
    put("vallog", "rerun-formfeed", a + b"\f" + a)
    put("vallog", "nan-accuracy", b"\n".join(body[:2]).replace(b'"val_accuracy":0.5', b'"val_accuracy":null,'
                                                               b'"val_accuracy_nonfinite":"nan"') + b"\n")
    put("vallog", "empty", b"")

    # ---- selection: sb-freeze's (listing logs that are not there), one sealed with no logs,
    # one that is not a selection
    sel = open(os.path.join(tmp, "selection.json"), "rb").read()
    put("selection", "sb-freeze", sel)
    d = json.loads(sel)
    for k in ("argv", "cells", "all_topk_validation"):
        d[k] = d[k][:2]
    put("selection", "sb-freeze-cut-resealed", seal(d))
    d["validation_logs"] = []
    put("selection", "no-logs", seal(d))
    put("selection", "minimal", seal({"kind": "freeze.selection", "schema": 1, "frozen_at_unix_s": 1e9,
                                      "validation_logs": []}))
    put("selection", "not-a-selection", '{"kind":"run.meta","v":1}\n')

    # ---- ledger: sb-test's (started, then failed), a first line only, an empty one
    led = open(os.path.join(tmp, "selection.reads.ndjson"), "rb").read()
    put("ledger", "sb-test", led)
    put("ledger", "started-only", led.split(b"\n")[0] + b"\n")
    put("ledger", "crlf-no-final-newline", led.replace(b"\n", b"\r\n").rstrip(b"\r\n"))
    put("ledger", "empty", b"")

    # ---- sidecar: sb-lm import's model.safetensors.sha256, in binary mode, another file's
    side = open(glob.glob(os.path.join(tmp, "lmruns", "*", "model.safetensors.sha256"))[0], "rb").read()
    put("sidecar", "sb-lm-import", side)
    put("sidecar", "binary-mode", side[:64] + b" *model.safetensors\n")
    put("sidecar", "no-newline", side.rstrip(b"\n"))
    put("sidecar", "other-file", open(os.path.join(TOP, "tests", "fixtures", "guard", "data", "guardtask",
                                                   "pool.safetensors.sha256"), "rb").read())

    # ---- switchmap: a map in sb-a8 m3map's format (tests/sh/m3_guard.sh's), then after a form
    # feed a validation log of the study (a median_switch cell whose group the map plans)
    m3map = ("# a switch map, in sb-a8 m3map's format\nmethod mechanistic_switch median_switch\n"
             "set when task=guardtask arch=plain tier=compact method=mechanistic_switch switch_epoch=2\n"
             "set when task=guardtask arch=plain tier=compact method=median_switch switch_epoch=2\n")
    put("switchmap", "m3map", m3map)
    put("switchmap", "m3map-log", m3map.encode() + b"\f" + logs["median_switch-s0-compact"])
    put("switchmap", "m3map-softmax-log", m3map.encode() + b"\f" + logs["softmax-s0-compact"])
    put("switchmap", "one-method-only", "set when task=t arch=a tier=r method=entropy_switch switch_epoch=3\n")
    put("switchmap", "not-a-map", "switch_epoch=2\n")
finally:
    shutil.rmtree(tmp)
