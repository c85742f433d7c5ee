#!/usr/bin/env bash
# tests/run.sh — run every test and end with "N passed, N failed".
#
#   unit tests   build/tests/test_*        (C, TAP-like, built by make)
#   CLI tests    tests/cli/*.t             (data files, run by tests/cli/run-t.sh)
#   script tests tests/sh/*.sh             (bash, TAP-like, end with "N passed, N failed")
#
# Usage: tests/run.sh [PATTERN]   (only tests whose file name contains PATTERN)
# Exit status 1 when anything failed. Logs of failing tests go to build/test-logs/.
#
# Script tests run SB_TEST_JOBS at a time (default: the cores), each in its own temporary
# directory; their lines are printed in order all the same. Those in `alone` run first, one
# at a time: they build into the tree (make EMU=1, V3=1), keep every core busy themselves,
# or compare the working tree as a whole (git status, MANIFEST.csv). SB_TEST_JOBS=1 runs
# everything one after another.
set -u
export LC_ALL=C
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export SB_TOP=$top
pat=${1:-}
jobs_max=${SB_TEST_JOBS:-$(nproc)}
alone=" sh-cuda_emu sh-cuda_emu_pipeline sh-gpu_dryrun sh-isa_v3 sh-manifest "
mkdir -p build/test-logs
passed=0 failed=0 broken=()

one() { # name, command...: the test's line(s), then "#counts PASSED FAILED NAME"
	local name=$1; shift
	local log="build/test-logs/$name.log"
	local t0=$SECONDS
	"$@" >"$log" 2>&1
	local rc=$?
	local line p f
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
	if [ -z "$line" ]; then
		p=0 f=1
		echo "not ok - $name: no closing 'N passed, N failed' line (exit $rc); see $log"
	else
		p=${line%% passed*}; f=${line#*, }; f=${f%% failed}
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	fi
	if [ "$f" -ne 0 ]; then
		grep -E '^not ok' "$log" | head -n 20 | sed "s|^|  $name: |"
		printf '%-40s %4d passed %4d failed  (%ds)  log: %s\n' "$name" "$p" "$f" $((SECONDS - t0)) "$log"
	else
		printf '%-40s %4d passed %4d failed  (%ds)\n' "$name" "$p" "$f" $((SECONDS - t0))
	fi
	echo "#counts $p $f $name"
}

take() { # a result file of one(): its lines printed, its counts added
	local l c
	while IFS= read -r l; do
		case $l in
		"#counts "*)
			read -r -a c <<<"${l#\#counts }"
			passed=$((passed + c[0])); failed=$((failed + c[1]))
			[ "${c[1]}" -eq 0 ] || broken+=("${c[2]}")
			;;
		*) printf '%s\n' "$l" ;;
		esac
	done <"$1"
}

run_one() { # name, command...: now
	local res="build/test-logs/$1.res"
	one "$@" >"$res"
	take "$res"
	rm -f "$res"
}

for t in build/tests/test_*; do
	[ -x "$t" ] || continue
	n=$(basename "$t")
	[[ -z $pat || $n == *"$pat"* ]] || continue
	run_one "$n" "$t"
done
for t in tests/cli/*.t; do
	[ -f "$t" ] || continue
	n=cli-$(basename "$t" .t)
	[[ -z $pat || $n == *"$pat"* ]] || continue
	run_one "$n" tests/cli/run-t.sh "$t"
done
names=() files=()
for t in tests/sh/*.sh; do
	[ -f "$t" ] || continue
	n=sh-$(basename "$t" .sh)
	[[ -z $pat || $n == *"$pat"* ]] || continue
	if [[ $alone == *" $n "* || $jobs_max -le 1 ]]; then
		run_one "$n" bash "$t"
	else
		names+=("$n") files+=("$t")
	fi
done
# the others, jobs_max at a time; each result is printed once those before it are
next=0
flush() {
	while [ "$next" -lt ${#names[@]} ] && [ -f "build/test-logs/${names[$next]}.res" ]; do
		take "build/test-logs/${names[$next]}.res"
		rm -f "build/test-logs/${names[$next]}.res"
		next=$((next + 1))
	done
}
rm -f build/test-logs/*.res build/test-logs/*.res.tmp
for i in "${!names[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
		wait -n
		flush
	done
	r="build/test-logs/${names[$i]}.res"
	(one "${names[$i]}" bash "${files[$i]}" >"$r.tmp" && mv "$r.tmp" "$r") &
	flush
done
wait
flush
for ((; next < ${#names[@]}; next++)); do # a job that ended without its result
	echo "not ok - ${names[$next]}: no result (its job ended without one); see build/test-logs/${names[$next]}.log"
	failed=$((failed + 1))
	broken+=("${names[$next]}")
done

if [ ${#broken[@]} -gt 0 ]; then
	echo "failing: ${broken[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
