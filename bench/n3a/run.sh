#!/usr/bin/env bash
# bench/n3a/run.sh [--quick] [--arch query|transformer] [R [SEED]] — one N3-A cell (PROTOCOL A8,
# docs/n3a.md) in sb-train against the same cell in PyTorch (bench/n3a/torch_cell.py: the
# study's code path, plain torch), one thread each, one after the other, for each arch (default
# both; r 16, seed 64000: a registered cell). --quick: 128 updates instead of 1,024 (evaluations
# at 0, 32, 64, 96, 128, forks from 32 and 96), to try the script; the registered cell is the
# benchmark. Prints, per arch, the work done on both sides (checked equal: updates,
# evaluations, forks, S replay), the validation CE of each unit's last evaluation side by side
# (different random draws: the same range, not equal values), the times and the ratios.
# Keeps both sides' records in build/bench-n3a/ (ours: RUNS/CELL_ID/n3a.ndjson; torch: ARCH.json).
set -eu -o pipefail
cd "$(dirname "$0")/../.."
QUICK=0 ARCHS="query transformer"
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1; shift ;;
	--arch) ARCHS=$2; shift 2 ;;
	-*) echo "usage: bench/n3a/run.sh [--quick] [--arch query|transformer] [R [SEED]]" >&2; exit 2 ;;
	*) break ;;
	esac
done
R=${1:-16} SEED=${2:-64000}
make -s bin/sb-train >/dev/null
# PyTorch's products go through OpenBLAS, which falls back to generic pre-AVX kernels on a CPU
# it does not know (this VM: 'Prescott'): name the kernels for the CPU's vector width unless
# the caller did, so that the reference is fair (as bench/lm/pretrained.sh).
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
	if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
	elif grep -q avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
fi
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
OUT=build/bench-n3a
rm -rf "$OUT"
mkdir -p "$OUT"
extra=
[ "$QUICK" = 1 ] && extra=',"updates":128,"eval_steps":[0,32,64,96,128],"parents":[32,96]'
echo "git $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- lib train bench/n3a || echo ' (modified)'), $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(getconf _NPROCESSORS_ONLN) cores; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-} (PyTorch's BLAS kernels)"
for arch in $ARCHS; do
	cell="{\"family\":\"n3a\",\"arch\":\"$arch\",\"r\":$R,\"seed\":$SEED$extra}"
	echo "$cell" >"$OUT/$arch.cell.ndjson"
	l0=$(cut -d' ' -f1-3 /proc/loadavg)
	bin/sb-train -q -j 1 -o "$OUT/runs" "$OUT/$arch.cell.ndjson" >"$OUT/$arch.train.ndjson"
	l1=$(cut -d' ' -f1-3 /proc/loadavg)
	/usr/bin/python3 bench/n3a/torch_cell.py "$cell" >"$OUT/$arch.json"
	l2=$(cut -d' ' -f1-3 /proc/loadavg)
	run_dir=$(/usr/bin/python3 -c 'import json,sys; print([json.loads(l) for l in sys.stdin][-1]["run_dir"])' \
		<"$OUT/$arch.train.ndjson")
	/usr/bin/python3 - "$run_dir/n3a.ndjson" "$OUT/$arch.json" "$l0" "$l1" "$l2" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
t = json.load(open(sys.argv[2]))
done = [r for r in recs if r["kind"] == "n3a.done"][-1]
units = [r for r in recs if r["kind"] == "n3a.unit"]
ev = [r for r in recs if r["kind"] == "n3a.eval"]
ours = dict(updates=sum(u["updates"] for u in units), evaluations=len(ev),
            forks=sum(u["parent"] is not None for u in units), units=len(units), s_replay_equal=done["s_replay_equal"])
ref = {k: t[k] for k in ours}
print(f"== {t['arch']} r {t['r']} seed {t['seed']} ({done['cell_id']}); load average before ours {sys.argv[3]}, "
      f"before PyTorch {sys.argv[4]}, after {sys.argv[5]}")
print(f"work: ours {ours}")
print(f"      torch {ref} ({t['parameters']} parameters in {t['tensors']} tensors; shapes {t['shapes']})")
if ours != ref or done["status"] != "completed":
    sys.exit(f"bench/n3a: the two sides did not do the same work (or ours failed: {done['status']})")
last = {}
for r in ev:
    last[(r["arm"], r["parent"])] = (r["step"], r["validation_cross_entropy"])
tl = {}
for arm, parent, step, ce in t["evals"]:
    tl[(arm, parent)] = (step, ce)
print("validation CE at each unit's last evaluation (different draws: same range expected):")
print("  " + "  ".join(f"{a}{'' if p is None else '@' + str(p)} {last[(a, p)][1]:.3f}/{tl[(a, p)][1]:.3f}"
                       for a, p in last))
ce_o = [r["validation_cross_entropy"] for r in ev]
ce_t = [e[3] for e in t["evals"]]
print(f"  all {len(ce_o)} evaluations: ours CE {min(ce_o):.3f}..{max(ce_o):.3f}, torch {min(ce_t):.3f}..{max(ce_t):.3f}")
ph = t["phases_cpu_seconds"]
print(f"torch CPU seconds by phase: setup {ph['setup']:.1f}, main D {ph['main_D']:.1f}, main S {ph['main_S']:.1f}, "
      f"forks {ph['forks']:.1f}; updates {ph['update']:.1f}, evaluations {ph['evaluation']:.1f}")
print(f"time: ours {done['cpu_seconds']:.1f} CPU-s ({done['train_seconds']:.1f} s wall), torch {t['cpu_seconds']:.1f} CPU-s "
      f"({t['seconds']:.1f} s wall); ours/torch CPU time {done['cpu_seconds'] / t['cpu_seconds']:.2f}, "
      f"wall {done['train_seconds'] / t['seconds']:.2f}")
PY
done
