#!/usr/bin/env bash
# bench/gpu/summary.py, the closing table of tests/gpu/run.sh, on fixture records: device
# time is scarce (minutes per session), so the arithmetic and layout of the report are
# checked here, without a GPU. Every number below is computed independently from the
# fixture (awk/python), then looked for in the table.
. "$(dirname "$0")/../shlib.sh"
O="$T/gpu"
mkdir -p "$O"
methods="softmax topk_softmax_0125 topk_softmax_025 topk_softmax_05 sparsemax entmax15 headwise_adaptive_entmax"
{
	echo '{"kind":"bench.meta","command":"tests/gpu/run.sh OUTDIR","git":"abc1234","date":"2026-11-30","device":"NVIDIA H200","total_seconds":99}'
	i=0
	for m in $methods; do
		i=$((i + 1))
		# ours, graph: 200000 + 1000 i; plain: 150000 + 1000 i; PyTorch: 40000 + 500 i
		printf '{"kind":"bench.single","device":"cuda","method":"%s","mode":"graph","cells":1,"batch":256,"steps":60,"samples_per_s":%d,"ms_per_step":1.0,"replayed":59,"data":"synthetic"}\n' "$m" $((200000 + 1000 * i))
		printf '{"kind":"bench.single","device":"cuda","method":"%s","mode":"plain","cells":1,"batch":256,"steps":60,"samples_per_s":%d,"ms_per_step":1.5,"replayed":0,"data":"synthetic"}\n' "$m" $((150000 + 1000 * i))
		printf '{"kind":"bench.torch","device":"NVIDIA H200","method":"%s","samples_per_s":%d}\n' "$m" $((40000 + 500 * i))
	done
	echo '{"kind":"bench.multi","device":"cuda","mode":"graph","cells":70,"cells_ok":70,"batch":256,"steps":60,"samples_per_s":600000.0,"timed_s":1,"wall_s":1,"replayed":1,"data":"synthetic"}'
	echo '{"kind":"bench.multi","device":"cuda","mode":"plain","cells":70,"cells_ok":70,"batch":256,"steps":60,"samples_per_s":300000.0,"timed_s":1,"wall_s":1,"replayed":0,"data":"synthetic"}'
	echo '{"kind":"bench.multi","device":"cuda","mode":"graph","cells":140,"cells_ok":139,"batch":256,"steps":60,"samples_per_s":700000.0,"timed_s":1,"wall_s":1,"replayed":1,"data":"synthetic"}'
	echo '{"kind":"bench.multi","device":"cuda,tf32","mode":"graph","cells":70,"cells_ok":70,"batch":256,"steps":60,"samples_per_s":800000.0,"timed_s":1,"wall_s":1,"replayed":1,"data":"synthetic"}'
	echo '{"kind":"bench.multi","device":"cuda","shape":"cifar","mode":"graph","cells":70,"cells_ok":70,"batch":256,"steps":60,"samples_per_s":450000.0,"timed_s":1,"wall_s":1,"replayed":1,"data":"synthetic"}'
	echo '{"kind":"bench.multi","device":"cuda","mode":"graph","cells":70,"cells_ok":70,"batch":256,"steps":60,"samples_per_s":420000.0,"timed_s":1,"wall_s":1,"replayed":1,"data":"synthetic","connections":8}'
	echo '{"kind":"bench.multi","device":"cuda","shape":"text","mode":"graph","cells":70,"cells_ok":70,"batch":256,"steps":60,"samples_per_s":250000.0,"timed_s":1,"wall_s":1,"replayed":1,"data":"synthetic"}'
} >"$O/bench.ndjson"
printf 'build\tok\t2\tprebuilt abc1234\nops\tFAIL\t5\texit 1\t10 passed, 2 failed\n' >"$O/sections.tsv"

python3 "$TOP/bench/gpu/summary.py" "$O" >"$T/out.md" 2>"$T/err"
t_result $? "summary.py runs on the fixture ($(head -c 200 "$T/err"))"
cmp -s "$T/out.md" "$O/summary.txt"; t_result $? "stdout and OUTDIR/summary.txt are the same block"
head -n 1 "$T/out.md" | grep -qx '<!-- cuda:begin -->' && tail -n 1 "$T/out.md" | grep -qx '<!-- cuda:end -->'
t_result $? "the block is between the cuda markers"
grep -q -- '- git: abc1234' "$T/out.md" && grep -q -- '- device: NVIDIA H200' "$T/out.md"
t_result $? "the header carries bench.meta's git and device"
grep -q '| ops | FAIL | 5 | exit 1; 10 passed, 2 failed |' "$T/out.md"; t_result $? "sections.tsv becomes the section table (a failed section shown as FAIL)"

# single cell: graph / PyTorch per method, to one decimal
bad=0 i=0
for m in $methods; do
	i=$((i + 1))
	want=$(awk -v g=$((200000 + 1000 * i)) -v p=$((150000 + 1000 * i)) -v t=$((40000 + 500 * i)) \
		'BEGIN { printf "| %d | 1.000 | %d | 1.500 | %d | %.1fx | %.1fx |", g, p, t, g / t, p / t }')
	grep -qF "| $m $want" "$T/out.md" || { bad=1; echo "# missing: | $m $want"; }
done
[ $bad = 0 ]; t_result $? "one row per method: samples/s, ms/step and the speed-ups over PyTorch (graph and plain)"

# many cells: against the harmonic mean of PyTorch's methods (every method once, one after another);
# the projection: PROTOCOL A1's 13 tasks at their sizes (fetch/registry.json), 70 cells x 30
# epochs x (train + val / 3), each weighted by its compact model's matrix-product FLOPs per
# sample relative to Fashion-MNIST's, written out here term by term
read -r seq h70 h140 htf hpl x70 x140 xtf factor hmeas <<<"$(python3 - "$TOP/fetch/registry.json" <<'PY'
import json, sys
t = [40000 + 500 * i for i in range(1, 8)]
seq = len(t) / sum(1 / x for x in t)
reg = {x["task"]: x for x in json.load(open(sys.argv[1]))["tasks"]}
def macs(T, P, C):  # embedding of T-1 patches, 2 layers of (QKV, scores + mix, out, FF 4d), head
    return (T - 1) * P * 64 + 2 * (T * 64 * 192 + 2 * T * T * 64 + T * 64 * 64 + 2 * T * 64 * 256) + 64 * C
ref = macs(50, 16, 10)
samples = 0.0
fam = {"fmnist": 0.0, "cifar": 0.0, "text": 0.0}  # unweighted samples per shape family
for name in ["mnist", "fashion_mnist", "kmnist", "cifar10", "cifar100", "twenty_news", "synthetic_marker",
             "emnist_balanced", "emnist_letters", "emnist_digits", "k49", "svhn", "usps"]:
    x = reg[name]
    if name == "synthetic_marker":
        tr, va = 20000, 4000
    else:
        va = round(0.2 * x["n_pool"])
        tr = x["n_pool"] - va
    P = 0 if x["modality"] == "text" else x["shape"][0] * x["patch"] ** 2
    samples += 70 * 30 * (tr + va / 3) * macs(x["tokens"], P, x["classes"]) / ref
    fam["text" if x["modality"] == "text" else ("fmnist" if x["tokens"] == 50 else "cifar")] += 70 * 30 * (tr + va / 3)
h = lambda r: "%.2f" % (samples / r / 3600)
print("%.0f" % seq, h(600000), h(700000), h(800000), h(300000), "%.1f" % (600000 / seq), "%.1f" % (700000 / seq),
      "%.1f" % (800000 / seq), "%.2f" % (samples / (910 * 30 * (48000 + 12000 / 3))),
      "%.2f" % ((fam["fmnist"] / 600000 + fam["cifar"] / 450000 + fam["text"] / 250000) / 3600))
PY
)"
grep -qF "| sparsebench, recorded steps (graphs) | 70 (70 ok) | 600000 | ${x70}x | $h70 h |" "$T/out.md"
t_result $? "70 cells, graphs: ${x70}x sequential PyTorch ($seq samples/s), projection $h70 h"
grep -qF "| sparsebench, recorded steps (graphs) | 140 (139 ok) | 700000 | ${x140}x | $h140 h |" "$T/out.md"
t_result $? "140 cells: its own row (${x140}x, $h140 h), not merged with the 70-cell one"
grep -qF "| sparsebench, recorded steps (graphs), TF32 (opt-in, not the fp32 default) | 70 (70 ok) | 800000 | ${xtf}x | $htf h |" "$T/out.md"
t_result $? "the TF32 row is labelled as the opt-in (${xtf}x)"
grep -qF "| sparsebench, op by op | 70 (70 ok) | 300000 |" "$T/out.md" && grep -qF "| PyTorch eager, cells one after another (harmonic mean of the methods) | 1 at a time | $seq | 1.0x |" "$T/out.md"
t_result $? "the op-by-op row and the sequential PyTorch row"
rows=$(grep -E '^\| sparsebench, ' "$T/out.md" | sed -E 's/^\| sparsebench, ([^|]*) \| ([0-9]+) .*/\1 \2/' | paste -sd';' -)
[ "$rows" = "recorded steps (graphs) 70;recorded steps (graphs) 140;op by op 70;recorded steps (graphs), TF32 (opt-in, not the fp32 default) 70;recorded steps (graphs), cifar shape (65 tokens) 70;recorded steps (graphs), text shape (97 tokens) 70;recorded steps (graphs), 8 hardware queues (CUDA_DEVICE_MAX_CONNECTIONS; the backend's is 32) 70" ]
t_result $? "row order: fp32 graphs by cells, op by op, TF32, then the other shapes ($rows)"
x8=$(awk -v s="$seq" 'BEGIN { printf "%.1f", 420000 / s }')
grep -qF "| sparsebench, recorded steps (graphs), 8 hardware queues (CUDA_DEVICE_MAX_CONNECTIONS; the backend's is 32) | 70 (70 ok) | 420000 | ${x8}x | n/a |" "$T/out.md"
t_result $? "70 cells with the driver's default of 8 hardware queues: their own row (${x8}x), no projection, and the 70-cell row above is still the 32-queue one"
grep -q "the 13 tasks of PROTOCOL A1 at their own sizes" "$T/out.md" && grep -qF "${factor}x the 910 x 30" "$T/out.md"
t_result $? "the projection uses every task's own size: ${factor}x a study of Fashion-MNIST-sized cells"
grep -qF "**Projection from the measured rates of the three shapes** (70 cells, recorded steps, fp32; each task's samples at the rate of its shape, no FLOPs model): $hmeas h" "$T/out.md"
t_result $? "with the CIFAR- and text-shaped rates measured, the projection from the three measured rates: $hmeas h"
grep -qF "| sparsebench, recorded steps (graphs), cifar shape (65 tokens) | 70 (70 ok) | 450000 | n/a (other shape) |" "$T/out.md" &&
	grep -qF "| sparsebench, recorded steps (graphs), text shape (97 tokens) | 70 (70 ok) | 250000 | n/a (other shape) |" "$T/out.md"
t_result $? "the other shapes' rows are not compared with PyTorch's Fashion-MNIST-shaped cells"

# --apply replaces only the block
printf '# Results\n\nbefore\n<!-- cuda:begin -->\nold block\n<!-- cuda:end -->\nafter\n' >"$T/R.md"
python3 "$TOP/bench/gpu/summary.py" "$O" --apply "$T/R.md" >/dev/null 2>&1
[ "$(head -n 3 "$T/R.md")" = "$(printf '# Results\n\nbefore')" ] && [ "$(tail -n 1 "$T/R.md")" = after ] &&
	! grep -q 'old block' "$T/R.md" && grep -qF "| 600000 | ${x70}x |" "$T/R.md"
t_result $? "--apply replaces the block between the markers and keeps the rest"
t_done
