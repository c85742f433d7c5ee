#!/usr/bin/env bash
# bench/lm/run.sh — the LM track's kernel timings on a trained run, and the training
# throughput of its cell, recorded in bench/lm/results.md.
#
#   bench/lm/run.sh RUN_DIR [REPS]
#
# Runs `sb-lm eval` with no probes and one window (only the efficiency part matters here)
# and prints the lm.efficiency / lm.blocks records as a table. Timings are minimum over
# REPS (default 21) repetitions, wall-clock and thread CPU time, one thread.
set -eu -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
run=$1
reps=${2:-21}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$top/bin/sb-lm" eval -q -j 1 --probes 0 --windows 1 --bench-reps "$reps" -o "$out" "$run" >/dev/null
python3 - "$out/eval.ndjson" <<'PY'
import json, sys
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
