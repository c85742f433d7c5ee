#!/usr/bin/env bash
# PROTOCOL A8's computed verdicts through the pipeline (docs/sb-a8.md, pipelines/extension.mk):
# a small extension-like grid (trajectory block with "stage a8 analysis=m1", bottom-k and
# linear-decay blocks) run with the stub stages and the real sb-a8; the report carries
# each verdict beside the block's criteria; the m1 targets agree with an independent
# Python computation from the validation logs; switching-epochs.inc is written beside
# the grid file, and a switching grid that includes it then runs, with its m2 verdict;
# a second make is a no-op.
. "$(dirname "$0")/../shlib.sh"
cd "$TOP"
. "$TOP/tests/fixtures/pipeline/lib.sh"
[ -x bin/sb-a8 ] || make --no-print-directory CUDA=0 bin/sb-a8 >/dev/null 2>&1
A8T="$T/a8t.grid" A8S="$T/a8s.grid"
cat >"$A8T" <<'GRID'
set batch=256 lr=0.001 weight_decay=0.0001
block trajectory
task    t_a t_b t_c t_d
method  softmax topk_softmax_025
seed    0
arch    plain local_hybrid
tier    compact deep
epochs  5
stage   stats baseline=softmax patience=0
stage   a8 analysis=m1 switch_epochs=switching-epochs.inc
criterion PASS needs: macro-MAE improvement >= 10% over the strongest baseline

block bottomk
task    t_a
method  softmax topk_softmax_0125 topk_softmax_025 bottomk_softmax_0125 bottomk_softmax_025
seed    0..1
arch    plain
tier    compact
epochs  4
stage   a8 analysis=bottomk
criterion guard: dense (softmax) mean best validation accuracy >= 0.60

block lineardecay
task    t_a
method  softmax topk_softmax_0125 topk_softmax_025
seed    0..1
arch    plain
tier    compact
epochs  3 30
set     schedule=linear_decay
stage   a8 analysis=lineardecay
criterion persists: the summed correct-count difference (top-k - softmax) is > 0 at E = 3 and < 0 at E = 30
GRID
cat >"$A8S" <<'GRID'
set batch=256 lr=0.001 weight_decay=0.0001
block switching
task    t_a t_b
method  softmax mechanistic_switch median_switch early_accuracy_switch entropy_switch
seed    5
arch    plain local_hybrid
tier    compact
epochs  5
include switching-epochs.inc
stage   a8 analysis=m2
criterion median time-to-target reduction vs dense >= 10%
GRID
amake() {
	make -C "$TOP" --no-print-directory EXTRA_GRIDS="$A8T $A8S" SB_OUT="$T/out" SB_DATA="$T/data" \
		SB_BIN="$FIX/stubs" SB_MIRRORS= "$@"
}
reset_calls
amake a8t >"$T/a8t.log" 2>&1
t_result $? "make a8t (54 cells, three a8 stages) ($(tail -n 3 "$T/a8t.log" | tr '\n' ' '))"
R="$T/out/a8t/report.md"
for v in "M1 verdict: \*\*\|\*\*M1 verdict: " "Bottom-k verdict: " "Linear-decay verdict: "; do
	grep -q "$v" "$R"; t_result $? "report.md has the computed '$v'"
done
# the linear-decay verdict is decided at E = 3 and 30 from all 12 runs (the stub logs' eval.done
# carry the budget and the training status, as sb-eval's)
grep -q 'Linear-decay verdict: PERSISTS_' "$R" && tail -n 1 "$T/out/a8t/lineardecay/a8/a8.ndjson" | grep -q '"runs_used":12,"runs_excluded_status":0'
t_result $? "the linear-decay verdict is decided, from all 12 runs ($(grep -o 'Linear-decay verdict: [^*]*' "$R"))"
# each verdict sits after its block's criteria
awk '/^## trajectory/{b=1} /^- PASS needs: macro-MAE/{if(b==1)c=1} /M1 verdict:/{if(c==1)ok=1} END{exit !ok}' "$R"
t_result $? "the M1 verdict follows the trajectory block's predeclared criterion"
for b in trajectory bottomk lineardecay; do
	f="$T/out/a8t/$b/a8/a8.ndjson"
	[ "$(tail -n 1 "$f" | sed -n 's/^{"kind":"\([^"]*\)".*/\1/p')" = a8.verdict ] && pipelines/stage.sh check "$f" "${f%.ndjson}.md"
	t_result $? "$b: a8.ndjson ends with a8.verdict; sidecars verify"
done
INC="$T/switching-epochs.inc"
n=$(grep -c '^set when task=t_[a-d] arch=[a-z_]* tier=[a-z]* method=[a-z_]*switch switch_epoch=[0-9]*$' "$INC")
[ "$n" = 64 ]; t_result $? "switching-epochs.inc beside the grid file: 16 groups x 4 methods ($n lines)"
# the m1 targets, independently from the validation logs
python3 - "$T/out/a8t/trajectory" <<'PY'
import glob, json, os, statistics, sys
B = sys.argv[1]
acc = {}
for f in glob.glob(os.path.join(B, "cells", "*", "val.ndjson")):
    for l in open(f):
        r = json.loads(l)
        if r["kind"] == "eval.epoch":
            acc.setdefault((r["task"], r["arch"], r["tier"], r["method"], r["seed"]), {})[r["epoch"] + 1] = r["val_accuracy"]
bad, n = [], 0
for l in open(os.path.join(B, "a8", "a8.ndjson")):
    r = json.loads(l)
    if r["kind"] != "a8.m1.group":
        continue
    g = (r["task"], r["arch"], r["tier"])
    d = [statistics.fmean(acc[g + ("topk_softmax_025", s)][e] - acc[g + ("softmax", s)][e] for s in (0,)) for e in range(1, 6)]
    K = 5
    t = 3 if sum(d[:3]) / 3 <= 0 else next((e for e in range(4, K - 1) if max(d[e - 1:e + 2]) <= 0), K + 1)
    n += 1
    if t != r["target_switch_epoch"]:
        bad.append("%s: target %s, Python %s (deltas %s)" % (g, r["target_switch_epoch"], t, d))
    if not all(3 <= r["pred_" + p] <= 30 for p in ("mechanistic", "constant_median", "early_accuracy", "entropy", "metadata")):
        bad.append("%s: a prediction outside [3, 30]" % (g,))
for b in bad:
    print("# " + b)
print("# %d groups checked" % n)
sys.exit(1 if bad or n != 16 else 0)
PY
t_result $? "m1 targets of the 16 groups agree with Python; predictions in [3, 30]"
# nothing to do the second time
reset_calls
amake a8t >"$T/a8t2.log" 2>&1
[ $? -eq 0 ] && [ "$(ncalls sb-a8)" = 0 ] && [ "$(ncalls sb-train)" = 0 ]
t_result $? "a second make a8t runs nothing (sb-a8 $(ncalls sb-a8), sb-train $(ncalls sb-train))"
# the switching grid now runs, with its m2 verdict
amake a8s >"$T/a8s.log" 2>&1
t_result $? "make a8s runs once switching-epochs.inc exists ($(tail -n 2 "$T/a8s.log" | tr '\n' ' '))"
c=$(ls "$T/out/a8s/switching/cells" | grep -c 'mechanistic_switch')
grep -q '"switch_epoch":[0-9]' "$T"/out/a8s/switching/cells/t_a.median_switch.*/cell.json && [ "$c" = 4 ]
t_result $? "the switching cells carry their predicted switch_epoch ($c mechanistic cells)"
grep -q 'M2 verdict: ' "$T/out/a8s/report.md"; t_result $? "the switching report has the M2 verdict"
# one make does both, as make extension does (sb_after.extension, pipelines/extension.mk):
# with neither the switch epochs nor the switching outputs, the trajectory analysis writes
# the file during the run and a new make then loads and runs the switching grid
rm -rf "$INC" "$T/out/a8s" "$T/out/a8t/trajectory/a8"
amake sb_after.a8t=a8s a8t >"$T/a8ts.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ -f "$INC" ] && grep -q 'M2 verdict: ' "$T/out/a8s/report.md" 2>/dev/null
t_result $? "one make: the trajectory analysis writes the switch epochs, then the switching grid runs (exit $rc)" \
	"$(tail -n 3 "$T/a8ts.log" | tr '\n' ' ')"
t_done
