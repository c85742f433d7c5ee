#!/usr/bin/env bash
# bench/lm/run.sh — the LM track's kernel timings on a trained run, and the training
# throughput of its cell, recorded in bench/lm/results.md.
#
#   bench/lm/run.sh RUN_DIR [REPS]
#
# Prints the run's training time per curriculum phase (wall-clock and process CPU time,
# from RUN_DIR/train.ndjson), then runs `sb-lm eval` with no probes and one window (only
# the efficiency part matters here) and prints the lm.efficiency / lm.blocks records. Timings are minimum over
# REPS (default 21) repetitions, wall-clock and thread CPU time, one thread.
set -eu -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
run=$1
reps=${2:-21}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$top/bin/sb-lm" eval -q -j 1 --probes 0 --windows 1 --bench-reps "$reps" -o "$out" "$run" >/dev/null
python3 - "$out/eval.ndjson" "$run/train.ndjson" <<'PY'
import json, sys
# training: per context length (the curriculum's phases), steps, wall-clock and CPU time
tr = [json.loads(l) for l in open(sys.argv[2])]
steps = [r for r in tr if r["kind"] == "train.step"]
done = [r for r in tr if r["kind"] == "train.done"]
meta = [r for r in tr if r["kind"] == "run.meta"]
if meta:
    print(f'Training device: {meta[0]["device"]}')
    print()
print("| phase | context T | steps | bytes/step | wall s | CPU s (user+sys) | CPU s/step | wall s/step |")
print("|---|---|---|---|---|---|---|---|")
prev = {"step": 0, "seconds": 0.0, "cpu_seconds": 0.0}
phase = None
rows = []
for r in steps:
    if phase is None or r["T"] != phase["T"]:
        phase = {"T": r["T"], "first": prev, "last": r}
        rows.append(phase)
    phase["last"] = r
    prev = r
for i, ph in enumerate(rows):
    a, b = ph["first"], ph["last"]
    n = b["step"] - a["step"]
    w = b["seconds"] - a["seconds"]
    c = b.get("cpu_seconds", float("nan")) - a.get("cpu_seconds", 0.0)
    bps = b["tokens_per_s"] * b["seconds"] / b["step"] if b["step"] else 0
    print(f'| {i + 1} | {ph["T"]} | {n} | {bps:.0f} | {w:.0f} | {c:.0f} | {c / n:.3f} | {w / n:.3f} |')
for d in done:
    print(f'\nWhole run: {d["steps_run"]} steps, {d["train_seconds"]:.0f} s wall-clock, '
          f'{d.get("train_cpu_seconds", float("nan")):.0f} s CPU time; final loss {d["final_loss"]:.4f}; '
          f'{d["parameter_count"]} parameters; peak memory {d["peak_memory_mb"]:.0f} MB.')
print()
recs = [json.loads(l) for l in open(sys.argv[1])]
print("| method | kernel | wall ms | CPU ms | speed-up vs dense (CPU) | keys scored/row | keys kept/row |")
print("|---|---|---|---|---|---|---|")
for r in recs:
    if r["kind"] == "lm.efficiency":
        print(f'| {r["method"]} | {r["kernel"]} | {r["ms_min"]:.3f} | {r["cpu_ms_min"]:.3f} | '
              f'{r["cpu_speedup_vs_dense_gemm"]:.2f}x | {r["keys_scored_per_row"]:.1f} | {r["keys_kept_per_row"]:.1f} |')
print()
print("| budget | keys kept/row | B | blocks/row | covered fraction | block-sparse CPU ms | speed-up vs dense (CPU) |")
print("|---|---|---|---|---|---|---|")
for r in recs:
    if r["kind"] == "lm.blocks":
        for b in r["block"]:
            print(f'| k={r["topk"]} | {r["keys_kept_per_row"]:.1f} | {b["B"]} | {b["blocks_per_row"]:.2f} | '
                  f'{b["covered_fraction"]:.3f} | {b["cpu_ms_min"]:.3f} | {b["cpu_speedup_vs_dense_gemm"]:.2f}x |')
PY
