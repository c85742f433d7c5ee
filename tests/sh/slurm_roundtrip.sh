#!/usr/bin/env bash
# make GRID SCHEDULER=slurm on a real Slurm: a one-node cluster on this machine
# (pipelines/slurm-local.sh: munged, slurmctld, slurmd; Debian's slurm-wlm and munge,
# installed here when missing and we are root). The test grid is submitted as a
# job array plus the freeze -> test -> final chain; the results must equal a local
# run's, a failed cell must be listed and resubmitted alone, and the daemons are
# stopped at the end. SB_SLURM_LOCAL_MODE=configless|file picks the munge setup.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"

skip() {
	echo "# SKIP slurm round trip: $*"
	t_result 0 "slurm round trip skipped: $*"
	t_done
}
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
	[ "$(id -u)" -eq 0 ] || skip "slurm-wlm and munge are not installed and we are not root to install them"
	SB_EXTRA_PKGS="slurm-wlm munge" "$TOP/scripts/deps.sh" >"$T/apt.log" 2>&1 ||
		skip "could not install slurm-wlm and munge: $(tail -n 1 "$T/apt.log")"
fi

C="$T/cluster"
cleanup() {
	"$TOP/pipelines/slurm-local.sh" stop "$C" 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT
if ! env_line=$("$TOP/pipelines/slurm-local.sh" start "$C" 2>"$T/start.log"); then
	cat "$T/start.log"
	for f in "$C"/log/*.log; do [ -f "$f" ] && { echo "== $f"; tail -n 5 "$f"; }; done
	t_result 1 "a one-node Slurm cluster starts here"
	t_done
fi
eval "$env_line"
t_result 0 "a one-node Slurm cluster starts ($(tail -n 1 "$T/start.log" | sed 's/^slurm-local: //'))"

# the reference: the same grid run locally
pmake pt >"$T/local.log" 2>&1
t_result $? "local reference run"
ref=$(digest)
rm -rf "$T/out" "$T/data"
reset_calls

export SB_SLURM_MEM=64M SB_SLURM_TIME=00:10:00 SB_SLURM_THROTTLE=3
pmake pt SCHEDULER=slurm >"$T/submit.log" 2>&1
t_result $? "make pt SCHEDULER=slurm submits ($(grep -m1 'submitted' "$T/submit.log"))"
S="$T/out/pt/.slurm/last"
# training outside a Slurm job would be the pipeline running the cells itself; the jobs
# may already have started training (a race the check must not lose)
nloc=$(grep '^sb-train ' "$STUB_LOG" 2>/dev/null | grep -vc ' slurm_job=[0-9]' || true)
[ "$nloc" = 0 ] && [ "$(wc -l <"$S/cells.txt")" = 16 ]
t_result $? "it submits the 16 cells instead of running them ($nloc trained outside Slurm jobs, $(wc -l <"$S/cells.txt") lines in cells.txt)"
grep -q -- '--array 0-15%3 ' "$S/sbatch.txt"; t_result $? "as one throttled job array (one cell per task, %3)"
grep -q 'sb-pt-freeze .*--dependency afterok:' "$S/sbatch.txt" && grep -q 'sb-pt-test .*--dependency afterok:' "$S/sbatch.txt" &&
	grep -q 'sb-pt-final .*--dependency afterany:' "$S/sbatch.txt"
t_result $? "with the freeze -> test -> final chain as dependencies"
"$TOP/pipelines/slurm.sh" wait "$T/out/pt" 240 >"$T/wait.log" 2>&1
t_result $? "every job completes ($(tr '\n' ' ' <"$T/wait.log"))"
[ "$(digest)" = "$ref" ]; t_result $? "the results are identical to the local run's"
n=$(grep -c '^sb-train .* slurm_job=[0-9]' "$STUB_LOG" || true)
[ "$n" = 16 ] && [ "$(ncalls sb-train)" = 16 ]; t_result $? "every cell was trained inside a Slurm job ($n of $(ncalls sb-train))"
grep -q '^sb-freeze .* slurm_job=' "$STUB_LOG" && grep -q '^sb-test .* slurm_job=' "$STUB_LOG" && grep -q '^sb-stats .* slurm_job=' "$STUB_LOG"
t_result $? "freeze, test read and statistics ran as Slurm jobs too"
[ -f "$T/out/pt/report.md" ]; t_result $? "the report was written"

reset_calls
pmake pt >"$T/after.log" 2>&1
[ $? -eq 0 ] && [ ! -s "$STUB_LOG" ]; t_result $? "a local make pt afterwards is a no-op"
pmake pt SCHEDULER=slurm >"$T/again.log" 2>&1
grep -q 'nothing to submit' "$T/again.log"; t_result $? "and a second submission submits nothing"

# a failing cell under Slurm: listed by the final job, resubmitted alone
rm -rf "$T/out"
reset_calls
STUB_CRASH='^t_b\.softmax\.s0$' pmake pt SCHEDULER=slurm >"$T/submit2.log" 2>&1
t_result $? "a grid with a failing cell is submitted"
"$TOP/pipelines/slurm.sh" wait "$T/out/pt" 240 >"$T/wait2.log" 2>&1
rc=$?
[ $rc -ne 0 ]; t_result $? "the wait reports failed jobs ($(tr '\n' ' ' <"$T/wait2.log"))"
grep -q 'FAILED main/t_b.softmax.s0.plain.compact.e3' "$T/out/pt/.slurm/last/logs/"final-*.log
t_result $? "the final job lists the failed cell"
[ -f "$T/out/pt/main/cells/t_b.softmax.s0.plain.compact.e3/FAILED" ]; t_result $? "its records are kept"
pmake pt SCHEDULER=slurm >"$T/submit3.log" 2>&1
t_result $? "resubmitting"
[ "$(wc -l <"$T/out/pt/.slurm/last/cells.txt")" = 1 ] && grep -q 't_b.softmax.s0.plain.compact.e3' "$T/out/pt/.slurm/last/cells.txt"
t_result $? "sends only the failed cell"
"$TOP/pipelines/slurm.sh" wait "$T/out/pt" 240 >"$T/wait3.log" 2>&1
t_result $? "which completes, with the rest of the chain"
[ "$(digest)" = "$ref" ]; t_result $? "and the results equal the local run's"

# on a GPU (DEVICE=cuda; here SB_TRAIN_GROUPS=1, which groups the same way on the CPU): one
# array task per sb-train process, i.e. per block, task, architecture and tier
rm -rf "$T/out"
reset_calls
SB_TRAIN_GROUPS=1 pmake pt SCHEDULER=slurm >"$T/submit4.log" 2>&1
t_result $? "grouped training is submitted ($(grep -m1 'submitted' "$T/submit4.log"))"
S="$T/out/pt/.slurm/last"
[ "$(wc -l <"$S/cells.txt")" = 3 ] && grep -q -- '--array 0-2%3 ' "$S/sbatch.txt" &&
	grep -q '^train,eval .*/main t_a.softmax.s0.plain.compact.e3,t_a.softmax.s1.plain.compact.e3,' "$S/cells.txt"
t_result $? "as three array tasks, one per group of cells (main: t_a, t_b; budget: t_a)"
"$TOP/pipelines/slurm.sh" wait "$T/out/pt" 240 >"$T/wait4.log" 2>&1
t_result $? "every job completes ($(tr '\n' ' ' <"$T/wait4.log"))"
n=$(grep -c '^sb-train .*--device cpu .* slurm_job=[0-9]' "$STUB_LOG" || true)
[ "$n" = 3 ]; t_result $? "three sb-train processes trained the 16 cells, inside Slurm jobs ($n)"
[ "$(digest)" = "$ref" ]; t_result $? "the results are identical to the local run's"

# a grid whose second block awaits a file that a stage of the first block writes (as the
# confirmation grid's switch block awaits the map its base block's sb-a8 m3map writes; here
# the stub sb-stats writes it): the final job submits the grid again once the file exists,
# and the wait follows that submission
cat >"$T/pw.grid" <<'GRID'
set batch=256 lr=0.001 weight_decay=0.0001
block first
task    t_a
method  softmax topk_softmax_025
seed    0
arch    plain
tier    compact
epochs  2
stage   stats baseline=softmax

block second
task    t_a
seed    1
arch    plain
tier    compact
epochs  2
await   pw-next.inc
GRID
pwmake() {
	make -C "$TOP" --no-print-directory EXTRA_GRIDS="$T/pw.grid" SB_OUT="$T/out" SB_DATA="$T/data" \
		SB_BIN="$FIX/stubs" SB_MIRRORS= "$@"
}
second_submitted() { # the last submission holds exactly the second block's 2 cells
	[ "$(wc -l <"$T/out/pw/.slurm/last/cells.txt")" = 2 ] && [ "$(grep -c '/pw/second ' "$T/out/pw/.slurm/last/cells.txt")" = 2 ]
}
export STUB_WRITE="sb-stats:$T/pw-next.inc=method softmax sparsemax"
pwmake pw >"$T/pw-local.log" 2>&1
t_result $? "the awaiting grid runs locally in one make (the reference)"
pwref=$(digest "$T/out/pw")
rm -rf "$T/out/pw" "$T/pw-next.inc"
reset_calls
pwmake pw SCHEDULER=slurm >"$T/pw-submit.log" 2>&1
grep -q 'then the final job submits make pw SCHEDULER=slurm once' "$T/pw-submit.log" && [ "$(wc -l <"$T/out/pw/.slurm/last/cells.txt")" = 2 ]
t_result $? "under Slurm the first submission sends the first block's 2 cells and says what follows"
first=$(readlink "$T/out/pw/.slurm/last")
"$TOP/pipelines/slurm.sh" wait "$T/out/pw" 240 >"$T/pw-wait.log" 2>&1
t_result $? "the wait completes ($(grep -c '^slurm: job' "$T/pw-wait.log") jobs)"
[ "$(readlink "$T/out/pw/.slurm/last")" != "$first" ] && grep -q 'waiting for it too' "$T/pw-wait.log" && second_submitted
t_result $? "the final job submitted the second block's 2 cells, and the wait followed them"
n=$(grep -c '^sb-train .* slurm_job=[0-9]' "$STUB_LOG" || true)
[ "$n" = 4 ] && [ "$(ncalls sb-train)" = 4 ]; t_result $? "all 4 cells trained inside Slurm jobs ($n of $(ncalls sb-train))"
[ "$(digest "$T/out/pw")" = "$pwref" ]; t_result $? "the results equal the local run's"

# the file there before the final job starts (here the cells write it): the final job must
# not train the waiting blocks itself, one after another, but submit them
rm -rf "$T/out/pw" "$T/pw-next.inc"
reset_calls
STUB_WRITE="sb-train:$T/pw-next.inc=method softmax sparsemax" pwmake pw SCHEDULER=slurm >"$T/pw-submit3.log" 2>&1
"$TOP/pipelines/slurm.sh" wait "$T/out/pw" 240 >"$T/pw-wait3.log" 2>&1
t_result $? "with the file written by the cells, the wait completes"
grep -q 'the awaited files exist already' "$T/out/pw/.slurm/"*/logs/final-*.log && second_submitted &&
	[ "$(grep -c '^sb-train .* slurm_job=[0-9]' "$STUB_LOG")" = 4 ] && [ "$(digest "$T/out/pw")" = "$pwref" ]
t_result $? "the final job submitted the waiting block instead of training it; same results"

# without the file: the final job fails saying so (the grid is incomplete), nothing more is submitted
rm -rf "$T/out/pw" "$T/pw-next.inc"
unset STUB_WRITE
pwmake pw SCHEDULER=slurm >"$T/pw-submit2.log" 2>&1
first=$(readlink "$T/out/pw/.slurm/last")
"$TOP/pipelines/slurm.sh" wait "$T/out/pw" 240 >"$T/pw-wait2.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ "$(readlink "$T/out/pw/.slurm/last")" = "$first" ] &&
	grep -q 'pw-next.inc was not written' "$T/out/pw/.slurm/last/logs/"final-*.log
t_result $? "without the awaited file the final job fails saying so, and nothing more is submitted (wait exit $rc)"

# the daemons go away
"$TOP/pipelines/slurm-local.sh" stop "$C"
left=0
for p in slurmctld slurmd munged; do st=$(ps -o stat= -p "$(cat "$C/$p.pid" 2>/dev/null || echo 0)" 2>/dev/null || true); case "$st" in "" | Z*) ;; *) left=1 ;; esac; done
[ $left = 0 ]; t_result $? "the daemons are stopped"
t_done
