#!/usr/bin/env bash
# tests/gpu/run.sh --dry-run: the device check's plumbing without a GPU (every program of it
# run with --device cpu, CPU against CPU: gpu_ops, gpu_train, sb-train's multi-cell path,
# the lost-device pipeline check (emulated above the backend), gpu_bench, the summary). A GPU session has minutes; a script that breaks there wastes them,
# so make check runs it. Skipped when the tree was built without CUDA (no build/gpu/) or
# there is no nvcc.
. "$(dirname "$0")/../shlib.sh"
for b in build/gpu/gpu_ops build/gpu/gpu_train build/gpu/gpu_bench build/tests/test_cuda_host; do
	if [ ! -x "$TOP/$b" ]; then
		t_result 0 "# SKIP $b is not built (make CUDA=1 builds the device check)"
		t_done
	fi
done
# its build section runs make CUDA=1: without nvcc (found as the Makefile finds it) there is
# nothing to check (the CPU build never needs CUDA)
nv=${NVCC-$(command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })}
if [ -z "$nv" ]; then
	t_result 0 "# SKIP no nvcc: the dry run builds with CUDA=1"
	t_done
fi
before=$(git -C "$TOP" status --porcelain 2>/dev/null)
SB_GPU_JOBS=2 bash "$TOP/tests/gpu/run.sh" --dry-run "$T/gpu" >"$T/out" 2>"$T/err"
rc=$?
t_result $rc "tests/gpu/run.sh --dry-run exits 0 ($(tail -n 3 "$T/err" | tr '\n' ' '))"
want="build host-checks ops train sbtrain loss bench-single bench-multi bench-multi-plain bench-multi-cifar bench-multi-text bench-profile torch-syntax quick-ops"
got=$(cut -f1 "$T/gpu/sections.tsv" | paste -sd' ' -)
[ "$got" = "$want" ]; t_result $? "every section ran ($got)"
bad=$(awk -F'\t' '$2 != "ok" { print $1 "=" $2 }' "$T/gpu/sections.tsv" | paste -sd' ' -)
[ -z "$bad" ]; t_result $? "every section ok (${bad:-all ok})"
grep -qE $'^ops\tok\t[0-9]+\texit 0\t[0-9]+ passed, 0 failed' "$T/gpu/sections.tsv" &&
	grep -qE $'^train\tok\t[0-9]+\texit 0\t[0-9]+ passed, 0 failed' "$T/gpu/sections.tsv" &&
	grep -qE $'^sbtrain\tok\t[0-9]+\texit 0\t[0-9]+ passed, 0 failed' "$T/gpu/sections.tsv" &&
	grep -qE $'^loss\tok\t[0-9]+\texit 0\t10 passed, 0 failed' "$T/gpu/sections.tsv"
t_result $? "ops, train, sbtrain and loss report their counts with none failed ($(cut -f1,5 "$T/gpu/sections.tsv" | grep -E '^(ops|train|sbtrain|loss)' | tr '\t\n' ': '))"
grep -q '"kind":"bench.multi"' "$T/gpu/bench.ndjson" && grep -q '"kind":"bench.profile_total"' "$T/gpu/bench.ndjson" &&
	grep -q '"shape":"cifar"' "$T/gpu/bench.ndjson" && grep -q '"shape":"text"' "$T/gpu/bench.ndjson" &&
	grep -q 'Projection from the measured rates of the three shapes' "$T/gpu/summary.txt" &&
	grep -q '<!-- cuda:end -->' "$T/gpu/summary.txt"
t_result $? "the benchmark records (all three shapes) and the summary block with the measured projection are written"
[ "$(git -C "$TOP" status --porcelain 2>/dev/null)" = "$before" ]; t_result $? "the dry run leaves the working tree as it was (bench/RESULTS.md untouched)"
t_done
