#!/usr/bin/env bash
# make GRID-cells and GRID-final take the grid's lock as make GRID does: started while the other runs
# on the same output tree, either one refuses, saying so, instead of training the same
# cells at once (which failed cells and trained some twice); make -n GRID-cells (what
# pipelines/slurm.sh asks inside the lock) still lists the cells.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"

pmake pt-expand >"$T/expand.log" 2>&1
t_result $? "the grid expands"
wait_for_train() { # until the background make has started a cell, at most 20 s
	local i
	for i in $(seq 1 200); do
		grep -q '^sb-train ' "$STUB_LOG" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

for first in pt pt-cells; do
	second=$([ $first = pt ] && echo pt-cells || echo pt)
	rm -rf "$T/out" && pmake pt-expand >/dev/null 2>&1
	reset_calls
	STUB_SLEEP=0.3 pmake -j2 $first >"$T/first.log" 2>&1 &
	bg=$!
	wait_for_train
	pmake -j2 $second >"$T/second.log" 2>&1
	rc2=$?
	if [ $first = pt ]; then
		pmake -n -k pt-cells >"$T/dry.log" 2>/dev/null
		rcn=$?
	fi
	wait $bg
	rc1=$?
	[ $rc2 -ne 0 ] && grep -q "another make is working on $T/out/pt" "$T/second.log"
	t_result $? "make $second while make $first runs: refused, naming the tree (exit $rc2)" "$(tail -n 3 "$T/second.log" | tr '\n' ' ')"
	[ $rc1 = 0 ] && [ "$(ncalls sb-train)" = 16 ] && ! ls "$T"/out/pt/*/cells/*/FAILED >/dev/null 2>&1
	t_result $? "make $first finishes alone: 16 cells trained once, none failed (exit $rc1, $(ncalls sb-train) trains)" "$(grep FAILED "$T/first.log" | head -n 2 | tr '\n' ' ')"
	if [ $first = pt ]; then
		[ $rcn = 0 ] && grep -q '^pipelines/stage.sh train ' "$T/dry.log"
		t_result $? "make -n -k pt-cells meanwhile lists cells without the lock (exit $rcn)"
	fi
done

# make GRID-final (the stages and the report, training what they need) takes it too
rm -rf "$T/out" && pmake pt-expand >/dev/null 2>&1
reset_calls
STUB_SLEEP=0.3 pmake -j2 pt >"$T/first.log" 2>&1 &
bg=$!
wait_for_train
pmake -j2 pt-final >"$T/second.log" 2>&1
rc2=$?
wait $bg
rc1=$?
[ $rc2 -ne 0 ] && grep -q "another make is working on $T/out/pt" "$T/second.log"
t_result $? "make pt-final while make pt runs: refused, naming the tree (exit $rc2)" "$(tail -n 3 "$T/second.log" | tr '\n' ' ')"
[ $rc1 = 0 ] && [ "$(ncalls sb-train)" = 16 ] && [ -f "$T/out/pt/report.md" ]
t_result $? "make pt finishes alone: 16 cells trained once, the report written (exit $rc1, $(ncalls sb-train) trains)"
pmake pt-final >"$T/final.log" 2>&1
t_result $? "make pt-final afterwards: exit $?, under the lock, nothing left to do" "$(tail -n 3 "$T/final.log" | tr '\n' ' ')"
t_done
