#!/usr/bin/env bash
# cuda_emu.sh — the CUDA backend run on the host emulator (tests/cudaemu/, `make EMU=1`):
# lib/cuda's kernels and host code, compiled for the host with the emulator's runtime, against
# the CPU backend, on a machine without a GPU (and without nvcc: g++ and perl suffice).
#  1. the emulator's own checks (tests/cudaemu/selftest.cu): correct code gives a GPU's
#     results (collectives with widths and masks, barriers, stream order, graphs with frozen
#     arguments, launch limits), and each kind of bug it exists to expose is exposed with its
#     report: a missing barrier, a write past the end, a use after free, a shuffle under the
#     wrong mask, a lane that exited, a deadlock, lanes that disagree, a host dereference;
#  2. gpu_ops in full (every op on many shapes: both attention layouts, every method, tied
#     scores, NaN and infinite scores, recorded steps, errors that must not stick, scratch
#     regrown under a recording) with threads and blocks in order, and --quick (every kernel
#     once) in reverse order, so that a missing barrier shows in one of them;
#  3. tests/cudaemu/mutants.sh: seventeen small bugs put into copies of lib/cuda, each of which
#     gpu_ops on the emulator must catch (--quick; --errors for a bug in an error path; for
#     a write inside the encoder's activation arena, its parameter table, an allocation's
#     rounding or the scratch's spare room, sb-train with SB_ARENA_CHECK=1).
# What it cannot show (tests/cudaemu/README.md): speed, the device's own exp/log bits, TF32,
# races between blocks, and anything of the real driver; tests/gpu/run.sh on a GPU does.
. "$(dirname "$0")/../shlib.sh"
t_need_tools "the emulated build needs it" g++ perl
E="$TOP/build/emu"
make --no-print-directory -C "$TOP" -j"$(nproc)" EMU=1 build/emu/gpu/gpu_ops build/emu/cudaemu/selftest \
	build/emu/libsparsebench.a build/emu/libsparsebench_cuda.a build/emu/train/multicell.o \
	build/emu/tests/gpu/gpu_ops.o build/emu/bin/sb-train >"$T/make.log" 2>&1
t_result $? "make EMU=1 builds gpu_ops and the emulator's self-test into build/emu/" "$(tail -n 5 "$T/make.log" | tr '\n' ' ' | cut -c1-400)"

# 3. (started first, checked last) the mutants, in the background while 1 and 2 run: on two
# cores the whole takes about the mutants' time alone
bash "$TOP/tests/cudaemu/mutants.sh" >"$T/mutants.out" 2>&1 &
mutants_pid=$!

# 1. the emulator's own checks
declare -A want=(
	[collectives]="0|"
	[blocksum]="0|"
	[streams]="0|"
	[missing_barrier]="0|read a slot not yet written"
	[past_end]="0|0 bytes past the end of a device allocation of 4000 bytes"
	[after_free]="0|in a freed device allocation"
	[bad_mask]="0|reads lane 16, outside the mask 0xffff"
	[exited_lane]="0|lane 1 exits while lane 0 waits for it"
	[deadlock]="0|no thread can go on"
	[disagree]="0|lanes disagree"
	[host_deref]="139|host code touched"
	[ballot_outside]="0|"
	[device_sync]="0|"
	[dyn_past_end]="0|past the end of the dynamic shared memory"
	[memset_fault]="0|in cudaMemsetAsync"
	[host_arg]="0|argument 2 of k_read is a host pointer"
)
for c in $("$E/cudaemu/selftest" --list); do
	w=${want[$c]:-}
	if [ -z "$w" ]; then
		t_result 1 "selftest $c: a case this script does not know"
		continue
	fi
	rc_want=${w%%|*} msg=${w#*|}
	out=$(timeout 120 "$E/cudaemu/selftest" "$c" 2>&1)
	rc=$?
	ok=0
	[ "$rc" -eq "$rc_want" ] || ok=1
	[ -z "$msg" ] || grep -qF -- "$msg" <<<"$out" || ok=1
	t_result $ok "selftest $c: exit $rc (want $rc_want)${msg:+, report has '$msg'}" "$(tail -n 4 <<<"$out" | tr '\n' ' ' | cut -c1-500)"
done

# 2. the backend's ops against the CPU backend: the full op check (every op, many shapes)
# with threads and blocks in order, every kernel once (--quick) in reverse order
# (the two at once)
ops_pids=()
for run in "forward full" "reverse --quick"; do
	set -- $run
	args=(--device cuda --seed 11)
	[ "$2" = full ] || args+=("$2")
	(
		CUDAEMU_SCHEDULE=$1 timeout 900 "$E/gpu/gpu_ops" "${args[@]}" >"$T/ops.$1" 2>"$T/ops.$1.err"
		echo $? >"$T/ops.$1.rc"
	) &
	ops_pids+=($!)
done
wait "${ops_pids[@]}"
for run in "forward full 2000" "reverse --quick 300"; do
	set -- $run
	sched=$1 what=$2 least=$3
	rc=$(cat "$T/ops.$sched.rc")
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$T/ops.$sched" | tail -n 1)
	n=${line%% passed*}
	[ $rc -eq 0 ] && [ -n "$line" ] && [ "${n:-0}" -ge "$least" ] && ! grep -q '^cudaemu: ' "$T/ops.$sched.err"
	t_result $? "gpu_ops ($what) on the emulator, $sched schedule: ${line:-no result} (exit $rc; at least $least checks)" \
		"$( (grep -m3 '^not ok' "$T/ops.$sched"; grep -m2 '^cudaemu: ' "$T/ops.$sched.err") | tr '\n' ' ' | cut -c1-600)"
done
grep -q 'cudaemu (host emulation' "$T/ops.forward"
t_result $? "gpu_ops ran on the emulated device, not the CPU backend ($(grep -m1 '^# gpu:' "$T/ops.forward" | cut -c1-120))"

# 3. mutants
wait "$mutants_pid"
rc=$?
out=$(cat "$T/mutants.out")
while IFS= read -r l; do
	case $l in
	"ok - "*) t_result 0 "${l#ok - }" ;;
	"not ok - "*) t_result 1 "${l#not ok - }" ;;
	esac
done <<<"$out"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out")
[ $rc -eq 0 ] && [ "${line%% passed*}" -ge 17 ]
t_result $? "mutants.sh: ${line:-no result} (exit $rc; seventeen mutants)"
t_done
