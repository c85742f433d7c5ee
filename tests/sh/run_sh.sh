#!/usr/bin/env bash
# run_sh.sh — tests/run.sh itself, on a tree of its own: two unit tests, a CLI test and five
# script tests that pass, fail, end without their count and finish out of order. Whatever
# the number of jobs, the lines come in order (unit, CLI, script tests; the slow first script
# before the quick one after it), the counts are the sum, a test without its closing line
# counts as one failure, a test whose job ended without its result is one failure and those
# after it are still read, the failing ones are listed, and the exit status is 1; a test of
# run.sh's list `first` runs before the others; the `alone` tests run before all others, the
# two lanes at once with two jobs or more, the emulator's lane one test after the other, the
# others starting when the second lane is done, beside the emulator's lane;
# PATTERN selects by name.
. "$(dirname "$0")/../shlib.sh"
W=$T/tree
mkdir -p "$W/tests/sh" "$W/tests/cli" "$W/build/tests"
cp "$TOP/tests/run.sh" "$W/tests/"
unit() { # name body
	printf '#!/usr/bin/env bash\n%s\n' "$2" >"$W/build/tests/$1"
	chmod +x "$W/build/tests/$1"
}
unit test_one 'echo "ok 1 - a"; echo "1 passed, 0 failed"'
unit test_two 'echo "ok 1 - a"; echo "not ok 2 - b: wrong"; echo "1 passed, 1 failed"; exit 1'
# a CLI test: run-t.sh is replaced by a stand-in that reports the file it was given
printf '#!/usr/bin/env bash\necho "ok 1 - cli $(basename "$1")"; echo "3 passed, 0 failed"\n' >"$W/tests/cli/run-t.sh"
chmod +x "$W/tests/cli/run-t.sh"
: >"$W/tests/cli/tool.t"
# each script test notes that it started (run.sh runs them from the tree's top)
printf '%s\n' 'echo a_slow >>started; sleep 2; echo "2 passed, 0 failed"' >"$W/tests/sh/a_slow.sh"
printf '%s\n' 'echo b_fail >>started; echo "not ok 1 - x"; echo "0 passed, 1 failed"; exit 1' >"$W/tests/sh/b_fail.sh"
printf '%s\n' 'echo c_nocount >>started; echo "ok 1 - started"; exit 3' >"$W/tests/sh/c_nocount.sh"
printf '%s\n' 'echo d_quick >>started; echo "5 passed, 0 failed"' >"$W/tests/sh/d_quick.sh"
# one of the long tests run.sh starts first (its list `first`), last in the usual order
printf '%s\n' 'echo readme_example >>started; echo "1 passed, 0 failed"' >"$W/tests/sh/readme_example.sh"
# a test whose job (run.sh's subshell) ends before its result is written
printf '%s\n' 'echo e_orphan >>started; kill -9 $PPID; sleep 1; echo "1 passed, 0 failed"' >"$W/tests/sh/e_orphan.sh"
# three of run.sh's `alone` tests: two of the emulator's lane, one of the other lane
printf '%s\n' 'echo cuda_emu >>started; sleep 3; echo cuda_emu_end >>started; echo "1 passed, 0 failed"' >"$W/tests/sh/cuda_emu.sh"
printf '%s\n' 'echo cuda_emu_pipeline >>started; echo "1 passed, 0 failed"' >"$W/tests/sh/cuda_emu_pipeline.sh"
printf '%s\n' 'echo isa_v3 >>started; sleep 1; echo isa_v3_end >>started; echo "1 passed, 0 failed"' >"$W/tests/sh/isa_v3.sh"
order='sh-cuda_emu sh-cuda_emu_pipeline sh-isa_v3 test_one test_two cli-tool sh-a_slow sh-b_fail sh-c_nocount sh-d_quick sh-readme_example'
for jobs in 1 2 4; do
	rm -f "$W/started"
	(cd "$W" && SB_TEST_JOBS=$jobs bash tests/run.sh) >"$T/out$jobs" 2>&1
	rc=$?
	got=$(grep -oE '^(test_|cli-|sh-)[a-z0-9_]+ ' "$T/out$jobs" | tr -d ' ' | tr '\n' ' ')
	[ "$got" = "$order " ]
	t_result $? "SB_TEST_JOBS=$jobs: one line per test, in order" "got: $got"
	started=$(tr '\n' ' ' <"$W/started")
	if [ $jobs -eq 1 ]; then # (with more jobs the first few start at once, in any order)
		[ "$started" = "cuda_emu cuda_emu_end cuda_emu_pipeline isa_v3 isa_v3_end readme_example a_slow b_fail c_nocount d_quick e_orphan " ]
		t_result $? "SB_TEST_JOBS=1: the alone tests first, then a test of the list \`first\`, then the others (started: $started)"
	else
		# the lanes at once: isa_v3 started while cuda_emu ran; cuda_emu_pipeline after cuda_emu
		# ended; no other test before the second lane (isa_v3) ended, and the others beside the
		# emulator's lane (readme_example, the first of `first`, before cuda_emu ended)
		[[ $started == "cuda_emu isa_v3 isa_v3_end "* || $started == "isa_v3 cuda_emu isa_v3_end "* ]] &&
			[[ $started == *"cuda_emu_end cuda_emu_pipeline "* ]] &&
			[[ $started == *" isa_v3_end readme_example "*" cuda_emu_end "* ]]
		t_result $? "SB_TEST_JOBS=$jobs: the two lanes of alone tests at once, the emulator's one after the other; the others after the second lane, beside the emulator's (started: $started)"
	fi
	[ $rc -eq 1 ] && [ "$(tail -n 1 "$T/out$jobs")" = "16 passed, 4 failed" ]
	t_result $? "SB_TEST_JOBS=$jobs: 1+1+1+1+1+3+2+0+0+5+1 passed, 1+1+1+1 failed (no count, no result: one failure each), exit 1" \
		"exit $rc, last line: $(tail -n 1 "$T/out$jobs")"
	grep -q "^not ok - sh-c_nocount: no closing 'N passed, N failed' line (exit 3)" "$T/out$jobs" &&
		grep -q '^not ok - sh-e_orphan: no result (its job ended without one)' "$T/out$jobs" &&
		grep -q '^  test_two: not ok 2 - b: wrong' "$T/out$jobs" &&
		grep -q '^failing: test_two sh-b_fail sh-c_nocount sh-e_orphan$' "$T/out$jobs"
	t_result $? "SB_TEST_JOBS=$jobs: the failures' lines shown, the failing tests listed" "$(grep -E 'not ok|failing' "$T/out$jobs" | tr '\n' '|')"
done
# the quick script test ran before the slow one ended when there were jobs to spare
[ -f "$W/build/test-logs/sh-d_quick.log" ] && [ -f "$W/build/test-logs/sh-a_slow.log" ] &&
	[ "$W/build/test-logs/sh-d_quick.log" -ot "$W/build/test-logs/sh-a_slow.log" ]
t_result $? "SB_TEST_JOBS=4: the quick test's log is older than the slow one's (they ran at once)"
(cd "$W" && bash tests/run.sh _slow) >"$T/pat" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c passed "$T/pat")" -eq 2 ] && grep -q '^sh-a_slow ' "$T/pat" && [ "$(tail -n 1 "$T/pat")" = "2 passed, 0 failed" ]
t_result $? "PATTERN _slow: that test alone, exit 0" "exit $rc: $(tr '\n' '|' <"$T/pat")"
t_done
