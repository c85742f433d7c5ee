#!/usr/bin/env bash
# Training on a GPU through make (DEVICE=cuda; tested on the CPU with SB_TRAIN_GROUPS=1,
# which makes sb-train group cells exactly as on a GPU): the encoder cells of a block that
# share task, architecture and tier train in one sb-train process, with the same results
# as one process per cell; a lost device context (emulated: SB_TRAIN_DEVICE_ERROR) ends
# every cell of its process with failed_device, and the pipeline retries them in a new
# process, which resumes them to the same bits; a cell that keeps failing is marked
# FAILED once, its group's other cells are published and evaluated, and the next make
# retries only it. Real programs, tiny generated data (tests/fixtures/m3/gen_data.py).
. "$(dirname "$0")/../shlib.sh"
cd "$TOP"
for p in sb-train sb-eval sb-freeze; do
	[ -x "bin/$p" ] || make --no-print-directory CUDA=0 "bin/$p" >/dev/null 2>&1
done
/usr/bin/python3 tests/fixtures/m3/gen_data.py "$T/data" ga gb
G="$T/gg.grid"
cat >"$G" <<'GRID'
set batch=16 lr=0.001 weight_decay=0.0001 clip=5 dropout=0.1 val_fraction=0.2 schedule=constant limit=0
block main
task    ga gb
method  softmax sparsemax topk_softmax_025
seed    0 1
arch    plain
tier    compact
epochs  3
stage   freeze min_seeds=2
GRID
gmake() {
	make -C "$TOP" --no-print-directory EXTRA_GRIDS="$G" SB_OUT="$T/out" SB_DATA="$T/data" \
		SB_BIN="$TOP/bin" SB_MIRRORS= SB_JOBS=2 "$@"
}
B="$T/out/gg/main"
digest() { pipelines/stage.sh digest "$T/out/gg" -v | grep -v '"kind":"train.resume"' | sha256sum | cut -c1-16; }
processes() { # sb-train processes that trained a group: its logs
	find "$B/groups" -name 'train-*.log' 2>/dev/null | wc -l
}

# reference: one process per cell (the CPU path)
gmake gg >"$T/ref.log" 2>&1
t_result $? "make gg, one sb-train process per cell ($(tail -n 1 "$T/ref.log"))"
ref=$(digest)
[ ! -d "$B/groups" ]; t_result $? "without DEVICE no group process ran"

# the cells of a grid row in one process
rm -rf "$T/out"
SB_TRAIN_GROUPS=1 gmake gg >"$T/grp.log" 2>&1
t_result $? "SB_TRAIN_GROUPS=1 make gg ($(tail -n 1 "$T/grp.log"))"
[ "$(processes)" = 2 ] && grep -q 'group ga.plain.compact: 6 cell(s) in one process on cpu' "$T/grp.log" &&
	grep -q 'group gb.plain.compact: 6 cell(s) in one process on cpu' "$T/grp.log"
t_result $? "two processes of 6 cells each, one per (task, arch, tier) ($(processes) processes)"
[ "$(grep -c '"kind":"train.done"' "$B"/groups/ga.plain.compact/train-1.out)" = 6 ]
t_result $? "the group's process wrote train.done for its 6 cells"
got=$(digest)
[ "$got" = "$ref" ]; t_result $? "records, checkpoints, validation and selection as with one process per cell (digest $got vs $ref)"
# every cell of the group says so in its log (written by the group's recipe; whether make then
# runs the other cells' recipes, which only find their cells made, depends on its scheduling)
n=$(grep -l 'trained with its group ga.plain.compact in one sb-train process' "$B"/cells/ga.*/train.log 2>/dev/null | wc -l)
[ "$n" = 6 ]; t_result $? "each of the group's 6 cells is logged as trained with its group ($n)"
reset_log=$(processes)
SB_TRAIN_GROUPS=1 gmake gg >"$T/grp2.log" 2>&1
[ $? = 0 ] && [ "$(processes)" = "$reset_log" ] && ! grep -q 'in one process' "$T/grp2.log"
t_result $? "a second make is a no-op"

# a lost device: every cell of the process fails with failed_device; a new process resumes them
rm -rf "$T/out"
touch "$T/once"
SB_TRAIN_GROUPS=1 SB_TRAIN_DEVICE_ERROR="5:$T/once" gmake gg DEVICE_CELLS=2 >"$T/lost.log" 2>&1
rc=$?
t_result $rc "a device lost in one group's process: make gg still succeeds (exit $rc; $(tail -n 1 "$T/lost.log"))"
[ ! -e "$T/once" ]; t_result $? "the emulated device error fired"
n=$(grep -o '[0-9]* cell(s) ended with failed_device (sb-train exit 5); retrying them in a new process' "$T/lost.log" | head -n 1)
[ -n "$n" ] && [ "${n%% *}" = 6 ]; t_result $? "all 6 cells of that process were retried in a new process ($n)"
f=$(grep -l '"status":"failed_device"' "$B"/groups/*/train-1.out | head -n 1)
[ -n "$f" ] && grep -q 'device lost after step 5 (SB_TRAIN_DEVICE_ERROR)' "$f" &&
	grep -q 'not run: the device was lost by another cell of this process' "$f" &&
	grep -q 'device lost (SB_TRAIN_DEVICE_ERROR, by another cell of this process)' "$f"
t_result $? "the first process recorded train.failed/failed_device for the failing cell, the running ones and those not started"
[ -f "$(dirname "$f")/train-2.out" ] && [ "$(grep -c '"kind":"train.resume"' "$(dirname "$f")/train-2.out")" -ge 1 ]
t_result $? "the second process resumed the cells from their last complete epoch ($(grep -c '"kind":"train.resume"' "$(dirname "$f")/train-2.out" 2>/dev/null) resumed)"
got=$(digest)
[ "$got" = "$ref" ]; t_result $? "the same results as the uninterrupted run (digest $got vs $ref; train.resume lines aside)"

# a device error that does not go away: the retries end, the cell is marked FAILED once,
# the group's other cells are published and evaluated; the next make retries only it
rm -rf "$T/out"
SB_TRAIN_GROUPS=1 SB_TRAIN_DEVICE_ERROR=5 gmake -k gg-cells DEVICE_RETRIES=1 >"$T/dead.log" 2>&1
rc=$?
[ $rc -ne 0 ]; t_result $? "a device error in every process: make gg-cells fails (exit $rc)"
nf=$(ls "$B"/cells/*/FAILED 2>/dev/null | wc -l)
[ "$nf" = 12 ]; t_result $? "every cell has its FAILED file ($nf of 12)"
grep -q 'run: ' "$B/cells/ga.softmax.s0.plain.compact.e3/FAILED" && grep -q 'last record train.failed (status failed_device)' "$B/cells/ga.softmax.s0.plain.compact.e3/FAILED"
t_result $? "FAILED names the make run and the status ($(sed -n 's/^error: //p' "$B/cells/ga.softmax.s0.plain.compact.e3/FAILED"))"
[ "$(processes)" = 4 ]; t_result $? "two attempts per group, not one per cell recipe ($(processes) processes for 2 groups)"
ls "$B"/cells/ga.softmax.s0.plain.compact.e3/attempts/*/work/*/train.ndjson >/dev/null 2>&1
t_result $? "the failed attempt's records are kept (attempts/*/work/*/train.ndjson)"
SB_TRAIN_GROUPS=1 gmake gg >"$T/heal.log" 2>&1
t_result $? "the next make (device healthy) succeeds ($(tail -n 1 "$T/heal.log"))"
got=$(digest)
[ "$got" = "$ref" ]; t_result $? "with the same results (digest $got vs $ref)"

# a process that dies by a signal (SB_TRAIN_STOP_AFTER_STEPS: _exit(137) mid-epoch, as
# after kill -9) has its unfinished cells retried too; here every process dies, so the
# retries run out and the cells fail with their records kept
rm -rf "$T/out"
SB_TRAIN_GROUPS=1 SB_TRAIN_STOP_AFTER_STEPS=5 gmake -k gg-cells DEVICE_RETRIES=1 >"$T/killed.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q 'the process died (exit 137, signal 9); retrying its 6 unfinished cell(s) in a new process' "$T/killed.log" &&
	[ "$(processes)" = 4 ]
t_result $? "a process killed mid-epoch: its cells are retried in a new process ($(processes) processes; exit $rc)" \
	"$(grep -m2 'died\|FAILED' "$T/killed.log")"
SB_TRAIN_GROUPS=1 gmake gg >"$T/killed2.log" 2>&1
t_result $? "and the next make completes them ($(tail -n 1 "$T/killed2.log"))"
got=$(digest)
[ "$got" = "$ref" ]; t_result $? "with the same results (digest $got vs $ref)"

# one cell fails for good (not the device: where its first checkpoint goes there is a
# directory); the others of its group are published and evaluated in the same make
rm -rf "$T/out"
gmake gg-expand >/dev/null 2>&1
bad="$B/cells/gb.sparsemax.s1.plain.compact.e3"
id=$(bin/sb-train --ids "$bad/cell.json")
mkdir -p "$bad/work/$id"
cp "$bad/cell.json" "$bad/work/.cell.json"
mkdir -p "$bad/work/$id/epoch-001.safetensors/in-the-way"
SB_TRAIN_GROUPS=1 gmake gg >"$T/one.log" 2>&1
rc=$?
nv=$(ls "$B"/cells/*/val.ndjson 2>/dev/null | wc -l)
[ $rc -ne 0 ] && [ -f "$bad/FAILED" ] && [ "$nv" = 11 ] && [ "$(processes)" = 2 ]
t_result $? "a cell that cannot train fails alone, not retried; its 11 neighbours are trained and evaluated (exit $rc, $nv evaluated, $(processes) processes)" \
	"$(grep -m3 -i 'failed' "$T/one.log")"
grep -q "1 of 12 cells FAILED" "$T/one.log"; t_result $? "and it is listed at the end ($(grep -m1 'cells FAILED' "$T/one.log"))"
t_done
