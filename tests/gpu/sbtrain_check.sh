#!/usr/bin/env bash
# tests/gpu/sbtrain_check.sh DEVICE TMPDIR — sb-train's multi-cell path on a GPU:
# four cells of one grid row (one task, architecture and tier) trained in one
# process, where they run at once through train/multicell.c, against each cell
# trained alone: the same records (timing fields aside) and byte-identical
# checkpoints. On the CPU (dry run) SB_TRAIN_GROUPS=1 forces the same grouping. The cells
# alone run with SB_ARENA_CHECK=1 (red zones after every activation buffer and parameter
# tensor, checked after each step: a kernel writing past a buffer's end fails the cell
# naming it), so the comparison also shows the zones change nothing. Then
# sb-eval of those runs on DEVICE against sb-eval on the CPU (every epoch's metrics).
# SB_CHECK_LIMIT: examples per cell's pool (default 3000: 10 steps of 256 per epoch).
# SB_GPU_BIN, SB_GPU_PROGS: where sb-train/sb-eval and gpu_bench are (default bin/ and
# build/gpu/; tests/gpu/run.sh --emulate names build/emu's).
# TAP-like lines; ends with "N passed, N failed"; exit 1 on any failure.
set -u
export LC_ALL=C
dev=$1
tmp=$2
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${SB_GPU_BIN:-$top/bin}
progs=${SB_GPU_PROGS:-$top/build/gpu}
pass=0 fail=0
check() { # ok description
	if [ "$1" -eq 0 ]; then pass=$((pass + 1)); echo "ok $((pass + fail)) - $2"; else fail=$((fail + 1)); echo "not ok $((pass + fail)) - $2"; fi
}
rm -rf "$tmp" && mkdir -p "$tmp/data/fashion_mnist" || exit 4
"$progs/gpu_bench" --make-data "$tmp/data/fashion_mnist/pool.safetensors" 2>/dev/null
check $? "a synthetic dataset of Fashion-MNIST's shape (gpu_bench --make-data)"
grp=()
[ "$dev" = cpu ] && grp=(env SB_TRAIN_GROUPS=1)
cells=$tmp/cells.ndjson
: >"$cells"
i=0
for m in softmax sparsemax topk_softmax_025 headwise_adaptive_entmax; do
	echo "{\"task\":\"fashion_mnist\",\"method\":\"$m\",\"seed\":$i,\"epochs\":2,\"limit\":${SB_CHECK_LIMIT:-3000}}" >>"$cells"
	i=$((i + 1))
done
t0=$SECONDS
"${grp[@]}" "$bin/sb-train" -q --device "$dev" -d "$tmp/data" -o "$tmp/runsM" "$cells" >"$tmp/M.out" 2>"$tmp/M.err"
rc=$?
check $rc "four cells in one process on $dev (exit $rc, $((SECONDS - t0)) s)$( [ $rc -ne 0 ] && echo ": $(tail -n 2 "$tmp/M.err" | tr '\n' ' ')")"
n=0
while read -r line; do
	echo "$line" >"$tmp/one.ndjson"
	SB_ARENA_CHECK=1 "$bin/sb-train" -q --device "$dev" -d "$tmp/data" -o "$tmp/runsA" "$tmp/one.ndjson" \
		>>"$tmp/A.out" 2>>"$tmp/A.err" || n=$((n + 1))
done <"$cells"
check $n "each cell alone on $dev with the arena check ($n failed)$(grep -m1 -o 'arena check (SB_ARENA_CHECK).*' "$tmp/A.err" | cut -c1-200 | sed 's/^/: /')"
python3 - "$tmp" <<'EOF'
import json, os, sys, filecmp
tmp = sys.argv[1]
TIMING = ("seconds", "samples_per_s", "train_seconds", "wall_seconds", "peak_memory_mb", "time")
def recs(path):
    out = []
    for line in open(path):
        r = json.loads(line)
        if r.get("kind") in ("run.meta", "train.resume"):
            continue
        for k in TIMING:
            r.pop(k, None)
        out.append(r)
    return out
bad = []
ids = sorted(os.listdir(os.path.join(tmp, "runsA")))
for cid in ids:
    a, m = os.path.join(tmp, "runsA", cid), os.path.join(tmp, "runsM", cid)
    if not os.path.isdir(m):
        bad.append(cid + ": missing in the multi-cell run")
        continue
    if recs(os.path.join(a, "train.ndjson")) != recs(os.path.join(m, "train.ndjson")):
        bad.append(cid + ": train.ndjson records differ")
    for f in sorted(os.listdir(a)):
        if f.endswith(".safetensors") and not filecmp.cmp(os.path.join(a, f), os.path.join(m, f), shallow=False):
            bad.append(cid + ": " + f + " differs")
done = sum(1 for cid in ids for r in recs(os.path.join(tmp, "runsM", cid, "train.ndjson")) if r.get("kind") == "train.done") if ids else 0
print("# %d cells compared, %d finished in the multi-cell run" % (len(ids), done))
for b in bad:
    print("# " + b)
sys.exit(0 if ids and not bad and done == len(ids) else 1)
EOF
check $? "multi-cell sb-train == each cell alone: records (timing aside) and checkpoints identical"

# sb-eval on the device against sb-eval on the CPU, on copies of the multi-cell runs
# (what a pipeline with EVAL_DEVICE=cuda evaluates): every epoch's validation metrics;
# products summed in another order may flip near-tie predictions, hence the tolerances
cp -r "$tmp/runsM" "$tmp/evalD" && cp -r "$tmp/runsM" "$tmp/evalC"
t0=$SECONDS
"$bin/sb-eval" -q --device "$dev" -d "$tmp/data" -j 4 "$tmp"/evalD/*/ >"$tmp/evalD.out" 2>"$tmp/evalD.err"
rc=$?
check $rc "sb-eval --device $dev on the four runs (exit $rc, $((SECONDS - t0)) s)$( [ $rc -ne 0 ] && echo ": $(tail -n 2 "$tmp/evalD.err" | tr '\n' ' ')")"
t0=$SECONDS
"$bin/sb-eval" -q --device cpu -d "$tmp/data" -j 4 "$tmp"/evalC/*/ >"$tmp/evalC.out" 2>"$tmp/evalC.err"
rc=$?
check $rc "sb-eval --device cpu on the same runs (exit $rc, $((SECONDS - t0)) s)"
pairs=()
for d in "$tmp"/evalC/*/; do
	c=$(basename "$d")
	pairs+=("$d/val.ndjson" "$tmp/evalD/$c/val.ndjson")
done
python3 "$top/tests/gpu/cmp_eval.py" "${pairs[@]}" | sed 's/^/# /'
[ "${PIPESTATUS[0]}" -eq 0 ]
check $? "sb-eval on $dev == on cpu: accuracy within 3 predictions per epoch, loss and attention statistics within 1e-4 relative"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
