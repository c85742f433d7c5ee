#!/usr/bin/env bash
# tests/gpu/loss_check.sh DEVICE TMPDIR — a device lost in the middle of a grid row's
# training, through the pipeline (`make GRID DEVICE=cuda`): six cells of one row train in one
# sb-train process (two at a time), and after the process's 10th recorded step a kernel
# writes through a null pointer (SB_CUDA_FAULT, lib/cuda/backend_cuda.cu), which poisons the CUDA context as a real
# illegal access does. Then: every cell of the process ends failed_device (the running ones
# naming the CUDA error, those not started saying the device was lost), sb-train exits 5, the
# pipeline retries the six cells in a new process, which resumes them from their last complete
# epoch, and the records, checkpoints, validation and selection equal those of a run without
# the fault. On a GPU this is the driver's own poisoned context; with DEVICE cpu (the dry run)
# the loss is emulated above the backend instead (SB_TRAIN_DEVICE_ERROR, SB_TRAIN_GROUPS=1).
# SB_GPU_BIN: where sb-train, sb-eval and sb-freeze are (default bin/). Tiny generated data
# (tests/fixtures/m3/gen_data.py); about 30 s on a GPU, 20 s on the emulator.
# TAP-like lines; ends with "N passed, N failed"; exit 1 on any failure.
set -u
export LC_ALL=C
dev=$1
tmp=$2
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${SB_GPU_BIN:-$top/bin}
case $bin in /*) ;; *) bin=$top/$bin ;; esac
pass=0 fail=0
check() { # status description [detail]
	if [ "$1" -eq 0 ]; then
		pass=$((pass + 1))
		echo "ok $((pass + fail)) - $2"
	else
		fail=$((fail + 1))
		echo "not ok $((pass + fail)) - $2${3:+: $3}"
	fi
}
rm -rf "$tmp" && mkdir -p "$tmp" || exit 4
python3 "$top/tests/fixtures/m3/gen_data.py" "$tmp/data" ga
check $? "tiny dataset (8x8 images, 60 examples)"
cp "$top/tests/fixtures/pipeline/gg.grid" "$tmp/gg.grid" || exit 4
if [ "$dev" = cpu ]; then # sb-train groups the row's cells as on a GPU; the loss is emulated
	export SB_TRAIN_GROUPS=1
	fault_var=SB_TRAIN_DEVICE_ERROR at=5 # a cell's 5th step (global: over its epochs)
	err_text='device lost after step 5 (SB_TRAIN_DEVICE_ERROR)'
	devvar=()
else
	fault_var=SB_CUDA_FAULT at=10 # the process's 10th recorded step (2 of a cell's first epoch, 3 of each later one)
	err_text='an illegal memory access was encountered'
	devvar=(DEVICE="$dev")
fi
gmake() {
	make -C "$top" --no-print-directory EXTRA_GRIDS="$tmp/gg.grid" SB_OUT="$tmp/out" SB_DATA="$tmp/data" \
		SB_BIN="$bin" SB_MIRRORS= SB_JOBS=2 "${devvar[@]}" "$@"
}
B=$tmp/out/gg/main
digest() { (cd "$top" && pipelines/stage.sh digest "$tmp/out/gg" -v) | grep -v '"kind":"train.resume"' | sha256sum | cut -c1-16; }

t0=$SECONDS
gmake gg >"$tmp/ref.log" 2>&1
rc=$?
check $rc "reference: make gg ${devvar[*]:-(grouped on the cpu)} (exit $rc, $((SECONDS - t0)) s; $(tail -n 1 "$tmp/ref.log"))"
grep -q "group ga.plain.compact: 6 cell(s) in one process on $dev" "$tmp/ref.log"
check $? "the row's 6 cells trained in one sb-train process on $dev"
ref=$(digest)

rm -rf "$tmp/out"
touch "$tmp/once"
t0=$SECONDS
(export "$fault_var=$at:$tmp/once" && gmake gg DEVICE_CELLS=2) >"$tmp/lost.log" 2>&1
rc=$?
check $rc "a device lost ($fault_var=$at): make gg still succeeds (exit $rc, $((SECONDS - t0)) s; $(tail -n 1 "$tmp/lost.log"))"
[ ! -e "$tmp/once" ]
check $? "the fault fired once"
f=$B/groups/ga.plain.compact/train-1.out
nd=$(grep -c '"status":"failed_device"' "$f" 2>/dev/null)
[ "${nd:-0}" = 6 ]
check $? "the first process recorded train.failed/failed_device for all 6 cells (${nd:-0})"
grep '"status":"failed_device"' "$f" 2>/dev/null | grep -q "$err_text" &&
	grep -q 'not run: the device was lost by another cell of this process' "$f"
check $? "the running cells name the device error; those not started say the device was lost" \
	"$(grep -o '"error":"[^"]*"' "$f" 2>/dev/null | sort | uniq -c | tr '\n' ' ' | cut -c1-500)"
n=$(grep -o '[0-9]* cell(s) ended with failed_device (sb-train exit 5); retrying them in a new process' "$tmp/lost.log" | head -n 1)
[ "${n%% *}" = 6 ]
check $? "the pipeline retried the 6 cells in a new process (${n:-no retry})"
nr=$(grep -c '"kind":"train.resume"' "$B/groups/ga.plain.compact/train-2.out" 2>/dev/null)
[ "${nr:-0}" -ge 1 ]
check $? "the new process resumed cells from their last complete epoch (${nr:-0} resumed)"
got=$(digest)
[ "$got" = "$ref" ]
check $? "records, checkpoints, validation and selection as without the fault (digest $got vs $ref)"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
