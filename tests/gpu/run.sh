#!/usr/bin/env bash
# tests/gpu/run.sh — the one GPU check: build, host checks, every op against the
# CPU backend (attention rows up to T = 512, errors that must not stick, recorded
# steps), training on both backends (teacher-forced, with top-k selection flips
# counted), recorded (CUDA-graph) steps against op-by-op steps, the multi-cell
# driver and sb-train's multi-cell path, a device lost mid-training through the
# pipeline (a poisoned context, its cells retried in a new process), the benchmark (graph and plain steps, 70
# cells at once, 140 cells, TF32, the CIFAR- and text-shaped cells for the study
# projection, a per-op device-time profile) against PyTorch eager; the CUDA block
# of bench/RESULTS.md (OUTDIR/summary.txt); last, every kernel under compute-sanitizer
# (memcheck, racecheck, synccheck) where the machine has it; details in OUTDIR.
#
#   tests/gpu/run.sh OUTDIR             on a machine with a CUDA GPU (about 2 min on an H200
#                                       with a prebuilt bundle)
#   tests/gpu/run.sh --dry-run OUTDIR   here, without a GPU: the build, the host checks, and
#                                       every program run with --device cpu (CPU against CPU:
#                                       checks the plumbing, not the GPU), a tiny benchmark
#   tests/gpu/run.sh --emulate OUTDIR   here, without a GPU: `make EMU=1` and every program
#                                       run with --device cuda on the host emulator
#                                       (tests/cudaemu/): lib/cuda's own code against the CPU
#                                       backend; sb-train at the dry run's size and one
#                                       step of each benchmark path, whose times are not
#                                       GPU numbers (about 25 min on two cores)
#
# Each section has its own time limit, reports, and the script goes on; the
# exit status is 1 when any section failed. Files written (at most 8, flat):
#   OUTDIR/run.log        environment, build, host checks, every section's stderr
#   OUTDIR/ops.log        gpu_ops: one line per check      OUTDIR/ops.tsv   the same as a table
#   OUTDIR/train.log      gpu_train: CPU vs CUDA training, multi-cell == single cell
#   OUTDIR/bench.ndjson   gpu_bench and torch_bench records (and a bench.meta record)
#   OUTDIR/sections.tsv   section, status, seconds, detail
#   OUTDIR/summary.txt    the CUDA block of bench/RESULTS.md (also printed, and applied to
#                         bench/RESULTS.md of this tree; on a fetched OUTDIR elsewhere:
#                         python3 bench/gpu/summary.py OUTDIR --apply bench/RESULTS.md)
# Environment: SB_GPU_DEVICE (default cuda), SB_GPU_JOBS (make -j, default 16),
#   SB_GPU_DATA (a dataset file for the benchmark; default synthetic pixels).
set -u
export LC_ALL=C
dry=0 emu=0
if [ "${1:-}" = "--dry-run" ]; then
	dry=1
	shift
elif [ "${1:-}" = "--emulate" ]; then
	emu=1
	shift
fi
small=$((dry | emu)) # no GPU: small sizes, no numbers for bench/RESULTS.md
if [ $# -ne 1 ]; then
	echo "usage: tests/gpu/run.sh [--dry-run | --emulate] OUTDIR" >&2
	exit 2
fi
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 4
OUT=$1
mkdir -p "$OUT" || exit 4
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/run.log
SEC=$OUT/sections.tsv
: >"$LOG"
: >"$SEC"
: >"$OUT/bench.ndjson"
jobs=${SB_GPU_JOBS:-16}
dev=${SB_GPU_DEVICE:-cuda}
[ $dry -eq 1 ] && dev=cpu
# the programs: build/gpu, bin and build/tests, or the emulated build's
G=build/gpu BINDIR=bin TB=build/tests
if [ $emu -eq 1 ]; then
	G=build/emu/gpu BINDIR=build/emu/bin TB=build/emu/tests
	export CUDAEMU_SCHEDULE=${CUDAEMU_SCHEDULE:-forward}
fi
failed=0
T0=$SECONDS

log() { echo "$*" | tee -a "$LOG" >&2; }

# section NAME TIMEOUT_S COMMAND...: runs, records status and time, never stops the script
section() {
	local name=$1 lim=$2
	shift 2
	[ $dry -eq 1 ] && lim=$((lim * 4)) # the limits are for the GPU machine; a dry run trains on this CPU
	[ $emu -eq 1 ] && lim=$((lim * 10)) # the emulator runs the device code one thread at a time
	local t=$SECONDS rc
	log "=== $name (limit ${lim}s): $*"
	timeout --kill-after=10 "$lim" "$@"
	rc=$?
	local st=ok
	[ $rc -ne 0 ] && st=FAIL && failed=1
	[ $rc -eq 124 ] && st=TIMEOUT
	printf '%s\t%s\t%d\t%s\n' "$name" "$st" $((SECONDS - t)) "${DETAIL:-exit $rc}" >>"$SEC"
	DETAIL=
	log "=== $name: $st (exit $rc, $((SECONDS - t)) s)"
	return 0
}

# the closing "N passed, N failed" of a log, for the section table
counts() { grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" 2>/dev/null | tail -n 1; }

log "sparsebench GPU check $( [ $dry -eq 1 ] && echo '(DRY RUN: no GPU, programs run with --device cpu)')$( [ $emu -eq 1 ] && echo "(EMULATED: no GPU, lib/cuda on the host emulator, schedule $CUDAEMU_SCHEDULE)")"
log "date: $(date -u +%FT%TZ)  host: $(uname -n)  git: $(git describe --always --dirty 2>/dev/null)"
{
	echo "--- nvidia-smi"
	nvidia-smi -L 2>&1 || echo "(no nvidia-smi)"
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | head -3
	echo "--- nvcc"; nvcc --version 2>&1 | tail -2 || echo "(no nvcc)"
	echo "--- cc"; ${CC:-cc} --version 2>&1 | head -1
	echo "--- python"; python3 -c 'import torch,sys; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1
	echo "--- cpu"; grep -m1 'model name' /proc/cpuinfo; nproc
} >>"$LOG" 2>&1

# --- programs: a prebuilt bundle (tests/gpu/bundle.sh; for a machine without the
# -dev packages), or a build here
if [ -n "${SB_GPU_PREBUILT:-}" ] && [ -f "$SB_GPU_PREBUILT" ]; then
	t=$SECONDS
	mkdir -p bin build/gpu build/tests .gpubundle
	tar -C .gpubundle -xJf "$SB_GPU_PREBUILT" 2>>"$LOG" ||
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$SB_GPU_PREBUILT" .gpubundle
	cp .gpubundle/bin/* bin/ && cp .gpubundle/gpu/* build/gpu/ && cp .gpubundle/tests/* build/tests/
	export LD_LIBRARY_PATH="$top/.gpubundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	# cuBLAS: the programs look in /usr/local/cuda/lib64 (rpath); elsewhere, find it
	if ! ldd build/gpu/gpu_ops | grep -q 'libcublas.so.13 => /'; then
		for d in /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cublas", "lib") for p in nvidia.__path__))' 2>/dev/null); do
			[ -e "$d/libcublas.so.13" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d" && break
		done
	fi
	log "prebuilt bundle $(cat .gpubundle/VERSION) unpacked in $((SECONDS - t)) s; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
	ldd build/gpu/gpu_ops >>"$LOG" 2>&1
	printf 'build\tok\t%d\tprebuilt %s\n' $((SECONDS - t)) "$(cat .gpubundle/VERSION)" >>"$SEC"
else
	missing=()
	for p in yajl libarchive libcrypto openblas libcurl; do
		pkg-config --exists "$p" 2>/dev/null || missing+=("$p")
	done
	if [ ${#missing[@]} -ne 0 ]; then
		log "WARNING: pkg-config does not find: ${missing[*]} (the build needs their -dev packages;"
		log "         use SB_GPU_PREBUILT with a bundle from tests/gpu/bundle.sh)"
	fi
	# as tests/gpu/bundle.sh builds: the portable normaliser kernels (-DSB_NORM_PORTABLE),
	# whose operations the CUDA rows repeat; gpu_ops compares P and aux with the CPU's at
	# TOL_EX, and the AVX-512 and AVX2 kernels count other passes in aux[2] (NMSE 0.04 to
	# 0.19 for top-k, entmax15 and adaptive entmax rows). A dry run builds this tree as it is.
	mk=(make CUDA=1 -j"$jobs")
	[ $dry -eq 0 ] && [ $emu -eq 0 ] && mk+=(OPT="-O2 -march=native -DSB_NORM_PORTABLE")
	[ $emu -eq 1 ] && mk=(make EMU=1 -j"$jobs") # its OPT has -DSB_NORM_PORTABLE already
	DETAIL="${mk[*]}"
	section build 420 "${mk[@]}" >>"$LOG" 2>&1
fi
for b in $G/gpu_ops $G/gpu_train $G/gpu_bench $TB/test_cuda_host $BINDIR/sb-train; do
	[ -x "$b" ] || log "missing after the build: $b"
done
if [ -f build/lib/cuda/attn_cuda.o ] && command -v cuobjdump >/dev/null 2>&1; then
	{
		echo "--- cuobjdump -lelf lib/libsparsebench_cuda.a (machine code embedded)"
		cuobjdump -lelf lib/libsparsebench_cuda.a 2>&1 | sort | uniq -c | head -20
	} >>"$LOG"
fi

# --- host checks of the row kernels (no GPU needed)
section host-checks 60 bash -c "./$TB/test_cuda_host > '$OUT/host.tmp' 2>&1; rc=\$?; cat '$OUT/host.tmp' >> '$LOG'; tail -n 1 '$OUT/host.tmp' >&2; rm -f '$OUT/host.tmp'; exit \$rc"

# --- every op against the CPU backend
section ops 150 ./$G/gpu_ops --device "$dev" --tsv "$OUT/ops.tsv" >"$OUT/ops.log" 2>>"$LOG"
sed -i "\$s/\$/	$(counts "$OUT/ops.log")/" "$SEC" 2>/dev/null
grep -E '^not ok' "$OUT/ops.log" | head -n 20 | tee -a "$LOG" >&2

# --- training on both backends, multi-cell == single cell, isolation
section train 150 ./$G/gpu_train --device "$dev" --tsv "$OUT/train.tsv" >"$OUT/train.log" 2>>"$LOG"
sed -i "\$s/\$/	$(counts "$OUT/train.log")/" "$SEC" 2>/dev/null
grep -E '^not ok' "$OUT/train.log" | head -n 20 | tee -a "$LOG" >&2
# train.tsv is folded into train.log (8-file limit)
if [ -f "$OUT/train.tsv" ]; then
	{ echo "--- train.tsv"; cat "$OUT/train.tsv"; } >>"$OUT/train.log"
	rm -f "$OUT/train.tsv"
fi

# --- sb-train on the device: cells of one grid row at once (multicell) == each alone
section sbtrain 120 env SB_CHECK_LIMIT=$([ $small -eq 1 ] && echo 800 || echo 3000) SB_GPU_BIN="$top/$BINDIR" SB_GPU_PROGS="$top/$G" bash -c "tests/gpu/sbtrain_check.sh '$dev' '$OUT/sbtrain.tmp' > '$OUT/sbtrain.log' 2>&1; rc=\$?; cat '$OUT/sbtrain.log' >> '$LOG'; grep -E '^not ok' '$OUT/sbtrain.log' >&2; rm -rf '$OUT/sbtrain.tmp'; exit \$rc"
sed -i "\$s/\$/	$(counts "$OUT/sbtrain.log")/" "$SEC" 2>/dev/null
rm -f "$OUT/sbtrain.log"

# --- a device lost mid-training through the pipeline (SB_CUDA_FAULT poisons the context
# after a recorded step): the process's cells end failed_device, the retry resumes them, and
# the results equal a run without the fault
section loss 120 env SB_GPU_BIN="$top/$BINDIR" bash -c "bash tests/gpu/loss_check.sh '$dev' '$OUT/loss.tmp' > '$OUT/loss.log' 2>&1; rc=\$?; cat '$OUT/loss.log' >> '$LOG'; grep -E '^not ok' '$OUT/loss.log' >&2; rm -rf '$OUT/loss.tmp'; exit \$rc"
sed -i "\$s/\$/	$(counts "$OUT/loss.log")/" "$SEC" 2>/dev/null
rm -f "$OUT/loss.log"

# --- benchmark: one cell per method (recorded and op by op), 7 methods x 10 seeds at
# once (recorded, then op by op), a per-op profile
data_args=()
if [ -n "${SB_GPU_DATA:-}" ] && [ -f "$SB_GPU_DATA" ]; then
	data_args=(--data "$SB_GPU_DATA")
	log "benchmark data: $SB_GPU_DATA"
else
	log "benchmark data: synthetic pixels of Fashion-MNIST's shape (60000 x 1 x 28 x 28 u8, 10 classes, patch 4);"
	log "                throughput does not depend on pixel values"
fi
if [ $small -eq 1 ]; then # no GPU (plumbing, no numbers): one step and one warm-up of each
	steps=(--steps 1 --warmup 1)
	seeds=1
	prof=softmax
else
	steps=(--steps 60 --warmup 8)
	seeds=10
	prof=softmax,entmax15,headwise_adaptive_entmax
fi
section bench-single 120 ./$G/gpu_bench --device "$dev" "${data_args[@]}" "${steps[@]}" --single >>"$OUT/bench.ndjson" 2>>"$LOG"
section bench-multi 120 ./$G/gpu_bench --device "$dev" "${data_args[@]}" "${steps[@]}" --multi "$seeds" >>"$OUT/bench.ndjson" 2>>"$LOG"
[ $emu -eq 0 ] && section bench-multi-plain 120 ./$G/gpu_bench --device "$dev" "${data_args[@]}" "${steps[@]}" --plain --multi "$seeds" >>"$OUT/bench.ndjson" 2>>"$LOG"
# the other task families' shapes (CIFAR/SVHN/USPS: 65 tokens; text: 97), for the study projection
[ $emu -eq 0 ] && section bench-multi-cifar 120 ./$G/gpu_bench --device "$dev" --shape cifar "${steps[@]}" --multi "$seeds" >>"$OUT/bench.ndjson" 2>>"$LOG"
[ $emu -eq 0 ] && section bench-multi-text 120 ./$G/gpu_bench --device "$dev" --shape text "${steps[@]}" --multi "$seeds" >>"$OUT/bench.ndjson" 2>>"$LOG"
# what more concurrency, fewer hardware queues and the TF32 option (opt-in; fp32 is the default and the target) give
if [ $small -eq 0 ]; then
	section bench-multi-20 120 ./$G/gpu_bench --device "$dev" "${data_args[@]}" "${steps[@]}" --multi 20 >>"$OUT/bench.ndjson" 2>>"$LOG"
	# the driver's default of 8 hardware queues for the 70 streams (the backend asks for 32)
	section bench-multi-q8 120 env CUDA_DEVICE_MAX_CONNECTIONS=8 ./$G/gpu_bench --device "$dev" "${data_args[@]}" "${steps[@]}" --multi "$seeds" >>"$OUT/bench.ndjson" 2>>"$LOG"
	section bench-multi-tf32 120 ./$G/gpu_bench --device "$dev,tf32" "${data_args[@]}" "${steps[@]}" --multi "$seeds" >>"$OUT/bench.ndjson" 2>>"$LOG"
fi
[ $emu -eq 0 ] && section bench-profile 90 ./$G/gpu_bench --device "$dev" "${data_args[@]}" --profile "$prof" >>"$OUT/bench.ndjson" 2>>"$LOG"

# --- PyTorch eager on the same GPU
if [ $small -eq 1 ]; then
	section torch-syntax 60 python3 -m py_compile bench/gpu/torch_bench.py bench/gpu/summary.py
else
	section torch 150 python3 bench/gpu/torch_bench.py --steps 30 --warmup 5 >>"$OUT/bench.ndjson" 2>>"$LOG"
fi

log "total: $((SECONDS - T0)) s"
# the header of the RESULTS.md block: a bench.meta record
gitv=$(cat .gpubundle/VERSION 2>/dev/null || git describe --always --dirty 2>/dev/null || echo unknown)
if [ $dry -eq 1 ]; then
	cmdv="tests/gpu/run.sh --dry-run OUTDIR (CPU against CPU: plumbing only, not GPU numbers)"
elif [ $emu -eq 1 ]; then
	cmdv="tests/gpu/run.sh --emulate OUTDIR (lib/cuda on the host emulator: correctness, not GPU numbers)"
elif [ -n "${SB_GPU_PREBUILT:-}" ] && [ -f "$SB_GPU_PREBUILT" ]; then
	cmdv="SB_GPU_PREBUILT=$SB_GPU_PREBUILT tests/gpu/run.sh OUTDIR"
else
	cmdv="tests/gpu/run.sh OUTDIR"
fi
devv=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
[ $emu -eq 1 ] && devv="cudaemu (host emulation)"
python3 -c 'import json, sys; print(json.dumps({"kind": "bench.meta", "command": sys.argv[1], "git": sys.argv[2], "date": sys.argv[3], "device": sys.argv[4], "total_seconds": int(sys.argv[5])}))' \
	"$cmdv" "$gitv" "$(date -u +%F)" "${devv:-$dev}" "$((SECONDS - T0))" >>"$OUT/bench.ndjson"
echo
if [ $small -eq 1 ]; then
	python3 bench/gpu/summary.py "$OUT" 2>>"$LOG" || cat "$SEC"
	echo "($( [ $emu -eq 1 ] && echo emulated || echo dry) run: bench/RESULTS.md left alone)"
elif python3 bench/gpu/summary.py "$OUT" --apply bench/RESULTS.md 2>>"$LOG"; then
	echo "(this block is $OUT/summary.txt; bench/RESULTS.md of this tree now holds it)"
else
	cat "$SEC"
fi

# --- last (the summary above is written whatever happens here): every kernel once under
# compute-sanitizer's memory, race and synchronisation checkers (gpu_ops --quick: no
# deliberate device errors), which the host checks and the op comparisons cannot see: an
# out-of-bounds access, a shared-memory hazard, a shuffle whose mask the lanes disagree on
san=$(command -v compute-sanitizer 2>/dev/null || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
if [ $dry -eq 1 ]; then
	DETAIL="gpu_ops --quick on the CPU backend (plumbing; the checkers need a GPU)"
	section quick-ops 60 ./$G/gpu_ops --device cpu --quick >>"$LOG" 2>&1
elif [ $emu -eq 1 ]; then
	DETAIL="gpu_ops --quick on the emulator, threads and blocks in reverse order (a missing barrier shows)"
	section quick-ops 60 env CUDAEMU_SCHEDULE=reverse ./$G/gpu_ops --device cuda --quick >>"$LOG" 2>&1
elif [ -z "$san" ]; then
	log "compute-sanitizer not found: the memory, race and synchronisation checks are skipped"
	printf 'sanitize\tskipped\t0\tno compute-sanitizer\n' >>"$SEC"
else
	for tool in memcheck racecheck synccheck; do
		DETAIL="compute-sanitizer --tool $tool gpu_ops --quick"
		section "sanitize-$tool" 100 "$san" --tool "$tool" --error-exitcode 97 --print-limit 20 \
			./$G/gpu_ops --device "$dev" --quick --tsv /dev/null >>"$LOG" 2>&1
	done
	grep -E '(ERROR SUMMARY|RACECHECK SUMMARY|hazard|Invalid|========= [A-Z])' "$LOG" | tail -n 12 >&2
fi
echo "sanitizers: $(awk -F'\t' '$1 ~ /^sanitize|^quick-ops/ { printf "%s %s (%s s); ", $1, $2, $3 }' "$SEC")"
echo "details: $OUT/{run.log,ops.log,ops.tsv,train.log,bench.ndjson,sections.tsv,summary.txt}"
exit $failed
