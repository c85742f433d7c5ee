#!/usr/bin/env bash
# cuda_emu_pipeline.sh — a device error in the real CUDA backend, end to end through the pipeline,
# on the host emulator (tests/cudaemu/, `make EMU=1`). pipeline_groups.sh checks the pipeline's
# retries with a lost device emulated above the backend (SB_TRAIN_DEVICE_ERROR); here a kernel
# of lib/cuda itself faults (CUDAEMU_FAULT: an illegal address, which poisons the context as on
# a GPU) in the middle of a group's training, and everything after it is the code that runs on
# a GPU: the backend notices the poisoned context, sb_cuda_device_lost and train/multicell.c
# classify every cell of the process as failed_device, sb-train records them and exits 5, the
# pipeline retries them in a new process, which resumes them on the CUDA backend from their
# last complete epoch to the same bits as a run without the fault. A fault in every process
# (the backend's SB_CUDA_FAULT hook this time) ends with FAILED cells, and the next make (no
# fault) completes them, again to the same bits.
# Also sb-eval on the emulated device (EVAL_DEVICE=cuda) against the CPU's evaluation, and
# the encoder's arena red zones (SB_ARENA_CHECK) checked on the device.
# Real programs (build/emu/bin), tiny generated data (tests/fixtures/m3/gen_data.py).
. "$(dirname "$0")/../shlib.sh"
cd "$TOP"
t_need_tools "the emulated build needs it" g++ perl
E="$TOP/build/emu"
make --no-print-directory -j"$(nproc)" EMU=1 build/emu/bin/sb-train build/emu/bin/sb-eval build/emu/bin/sb-freeze >"$T/make.log" 2>&1
t_result $? "make EMU=1 builds sb-train, sb-eval and sb-freeze with the emulated CUDA backend" \
	"$(tail -n 5 "$T/make.log" | tr '\n' ' ' | cut -c1-400)"
/usr/bin/python3 tests/fixtures/m3/gen_data.py "$T/data" ga
G="$T/gg.grid"
cp tests/fixtures/pipeline/gg.grid "$G"
gmake() {
	make -C "$TOP" --no-print-directory EXTRA_GRIDS="$G" SB_OUT="$T/out" SB_DATA="$T/data" \
		SB_BIN="$E/bin" SB_MIRRORS= SB_JOBS=2 DEVICE=cuda "$@"
}
B="$T/out/gg/main"
digest() { pipelines/stage.sh digest "$T/out/gg" -v | grep -v '"kind":"train.resume"' | sha256sum | cut -c1-16; }
processes() { find "$B/groups" -name 'train-*.log' 2>/dev/null | wc -l; }
# the k_attn_fwd runs of a cell: 2 layers x 3 steps per epoch (48 training examples, batch 16)
# plus the first step's recording; the 15th of the process falls in the second epoch of the
# first cells (DEVICE_CELLS=2: two at a time)
fault=k_attn_fwd:15

# reference: the group trained on the emulated device without a fault, with the encoder's
# arena red zones checked after every step (SB_ARENA_CHECK: a device kernel writing past
# one activation buffer into the next fails the cell); the runs below do without, and
# their digests must equal this one
SB_ARENA_CHECK=1 gmake gg >"$T/ref.log" 2>&1
rc=$?
t_result $rc "make gg DEVICE=cuda on the emulator, arena red zones checked (exit $rc; $(tail -n 1 "$T/ref.log"))"
grep -q 'group ga.plain.compact: 6 cell(s) in one process on cuda' "$T/ref.log"
t_result $? "the 6 cells trained in one sb-train process on cuda"
grep -q '"device":"cuda' "$B"/groups/ga.plain.compact/train-1.out
t_result $? "its run.meta names the emulated CUDA device"
ref=$(digest)
mkdir -p "$T/refval"
for c in "$B"/cells/*/; do cp "$c/val.ndjson" "$T/refval/$(basename "$c").ndjson"; done

# evaluation on the emulated device too (EVAL_DEVICE=cuda): every epoch's validation metrics
# as the CPU's evaluation of the same checkpoints gave them (sums in another order may flip a
# near-tie prediction; tests/gpu/cmp_eval.py, as tests/gpu/sbtrain_check.sh compares)
rm -rf "$T/out"
gmake gg EVAL_DEVICE=cuda >"$T/evald.log" 2>&1
rc=$?
t_result $rc "make gg DEVICE=cuda EVAL_DEVICE=cuda (exit $rc; $(tail -n 1 "$T/evald.log"))"
pairs=()
for f in "$T"/refval/*.ndjson; do
	c=$(basename "$f" .ndjson)
	pairs+=("$f" "$B/cells/$c/val.ndjson")
done
/usr/bin/python3 tests/gpu/cmp_eval.py --device cuda --epochs 18 "${pairs[@]}" >"$T/evald.cmp" 2>&1
t_result $? "sb-eval on the emulated device == on the CPU, 6 cells x 3 epochs: $(head -n 1 "$T/evald.cmp")" \
	"$(tail -n +2 "$T/evald.cmp" | tr '\n' ' ' | cut -c1-500)"

# one fault, in the first process only: the retry resumes every cell to the same bits
rm -rf "$T/out"
touch "$T/once"
CUDAEMU_FAULT="$fault:$T/once" gmake gg DEVICE_CELLS=2 >"$T/lost.log" 2>&1
rc=$?
t_result $rc "a kernel fault in the group's process: make gg still succeeds (exit $rc; $(tail -n 1 "$T/lost.log"))"
[ ! -e "$T/once" ] && grep -q 'a fault injected by CUDAEMU_FAULT (run 15 of a kernel named \*k_attn_fwd\*) (the context is now poisoned: cudaErrorIllegalAddress)' \
	"$B"/groups/ga.plain.compact/train-1.log
t_result $? "the fault fired in the first process (its log has the emulator's report)"
f=$B/groups/ga.plain.compact/train-1.out
nd=$(grep -c '"status":"failed_device"' "$f")
[ "$nd" = 6 ]; t_result $? "the first process recorded train.failed/failed_device for all 6 cells ($nd)"
grep '"status":"failed_device"' "$f" | grep -q 'an illegal memory access was encountered' &&
	grep -q 'not run: the device was lost by another cell of this process' "$f"
t_result $? "the running cells name the CUDA error; those not started say the device was lost" \
	"$(grep -o '"error":"[^"]*"' "$f" | sort | uniq -c | tr '\n' ' ' | cut -c1-600)"
n=$(grep -o '[0-9]* cell(s) ended with failed_device (sb-train exit 5); retrying them in a new process' "$T/lost.log" | head -n 1)
[ "${n%% *}" = 6 ]; t_result $? "the pipeline retried the 6 cells in a new process (${n:-no retry})"
nr=$(grep -c '"kind":"train.resume"' "$B/groups/ga.plain.compact/train-2.out" 2>/dev/null)
[ "${nr:-0}" -ge 1 ]; t_result $? "the second process resumed cells from their last complete epoch on cuda (${nr:-0} resumed)"
got=$(digest)
[ "$got" = "$ref" ]; t_result $? "records, checkpoints, validation and selection as without the fault (digest $got vs $ref)"

# a fault in every process, this time the backend's own testing hook (SB_CUDA_FAULT: after
# the process's 3rd recorded step, before any cell has finished an epoch, a kernel writes
# through a null pointer; what
# tests/gpu/loss_check.sh uses on a GPU): the retries end, every cell is FAILED; the next
# make completes them
rm -rf "$T/out"
SB_CUDA_FAULT=3 gmake -k gg-cells DEVICE_CELLS=2 DEVICE_RETRIES=1 >"$T/dead.log" 2>&1
rc=$?
nf=$(ls "$B"/cells/*/FAILED 2>/dev/null | wc -l)
[ $rc -ne 0 ] && [ "$nf" = 6 ] && [ "$(processes)" = 2 ] &&
	[ "$(cat "$B"/groups/ga.plain.compact/train-*.log | grep -c 'SB_CUDA_FAULT: a write through a null pointer after recorded step 3')" = 2 ] &&
	grep -q 'illegal address (nil) in k_fault' "$B"/groups/ga.plain.compact/train-1.log
t_result $? "SB_CUDA_FAULT in every process: make gg-cells fails, 6 of 6 cells FAILED after 2 processes (exit $rc; $nf FAILED; $(processes) processes)"
grep -q 'last record train.failed (status failed_device)' "$B/cells/ga.softmax.s0.plain.compact.e3/FAILED"
t_result $? "FAILED gives the status ($(sed -n 's/^error: //p' "$B/cells/ga.softmax.s0.plain.compact.e3/FAILED" | cut -c1-200))"
gmake gg >"$T/heal.log" 2>&1
rc=$?
t_result $rc "the next make, without the fault, succeeds (exit $rc; $(tail -n 1 "$T/heal.log"))"
got=$(digest)
[ "$got" = "$ref" ]; t_result $? "with the same results (digest $got vs $ref)"
t_done
