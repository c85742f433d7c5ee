#!/usr/bin/env bash
# tests/run.sh — run every test and end with "N passed, N failed".
#
#   unit tests   build/tests/test_*        (C, TAP-like, built by make)
#   CLI tests    tests/cli/*.t             (data files, run by tests/cli/run-t.sh)
#   script tests tests/sh/*.sh             (bash, TAP-like, end with "N passed, N failed")
#
# Usage: tests/run.sh [PATTERN]   (only tests whose file name contains PATTERN)
# Exit status 1 when anything failed. Logs of failing tests go to build/test-logs/.
set -u
export LC_ALL=C
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export SB_TOP=$top
pat=${1:-}
mkdir -p build/test-logs
passed=0 failed=0 broken=()

run_one() { # name, command...
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
	passed=$((passed + p)); failed=$((failed + f))
	if [ "$f" -ne 0 ]; then
		broken+=("$name")
		grep -E '^not ok' "$log" | head -n 20 | sed "s|^|  $name: |"
		printf '%-40s %4d passed %4d failed  (%ds)  log: %s\n' "$name" "$p" "$f" $((SECONDS - t0)) "$log"
	else
		printf '%-40s %4d passed %4d failed  (%ds)\n' "$name" "$p" "$f" $((SECONDS - t0))
	fi
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
for t in tests/sh/*.sh; do
	[ -f "$t" ] || continue
	n=sh-$(basename "$t" .sh)
	[[ -z $pat || $n == *"$pat"* ]] || continue
	run_one "$n" bash "$t"
done

if [ ${#broken[@]} -gt 0 ]; then
	echo "failing: ${broken[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
