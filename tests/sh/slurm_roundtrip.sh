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
[ "$(ncalls sb-train)" = 0 ] && [ "$(wc -l <"$S/cells.txt")" = 16 ]
t_result $? "it submits the 16 cells instead of running them"
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

# the daemons go away
"$TOP/pipelines/slurm-local.sh" stop "$C"
left=0
for p in slurmctld slurmd munged; do st=$(ps -o stat= -p "$(cat "$C/$p.pid" 2>/dev/null || echo 0)" 2>/dev/null || true); case "$st" in "" | Z*) ;; *) left=1 ;; esac; done
[ $left = 0 ]; t_result $? "the daemons are stopped"
t_done
