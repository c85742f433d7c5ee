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
# Tests run SB_TEST_JOBS at a time (default: the cores), each in its own temporary
# directory; their lines are printed in order all the same (those in `alone`, then unit,
# CLI and script tests). Those in `alone` run first, before any other: they build into the
# tree (make EMU=1, V3=1), keep most of the cores busy themselves, or compare the working
# tree as a whole (git status, MANIFEST.csv). They run in two lanes at once, each lane's
# tests one after another: the emulator's tests (`emu_lane`, which share build/emu) and the
# others (neither keeps two cores busy all the time: on two cores the two lanes take 315 s
# where the five took 360 s one after another). The other tests start when the second lane
# is done (nothing compares the tree after that), beside the emulator's lane if it is still
# running, which counts as one of the SB_TEST_JOBS (build/emu is its own: no other test
# builds there). SB_TEST_JOBS=1 runs everything one after another.
set -u
export LC_ALL=C
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
export SB_TOP=$top
pat=${1:-}
jobs_max=${SB_TEST_JOBS:-$(nproc)}
alone=" sh-cuda_emu sh-cuda_emu_pipeline sh-gpu_dryrun sh-isa_v3 sh-manifest "
emu_lane=" sh-cuda_emu sh-cuda_emu_pipeline "
# the queue's longest tests (over a minute each on two cores), started first so that none
# of them is left running alone at the end; their lines still come in the usual order
first=" sh-slurm_roundtrip sh-readme_example sh-hostile_inputs sh-arena_check sh-pipeline_a8 sh-pipeline_demo "
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

# the tests: name, then how to run the file (unit: itself; cli: run-t.sh; sh: bash)
names=() runs=() files=()
add() { # name how file
	[[ -z $pat || $1 == *"$pat"* ]] || return 0
	names+=("$1") runs+=("$2") files+=("$3")
}
for t in build/tests/test_*; do
	[ -x "$t" ] && add "$(basename "$t")" unit "$t"
done
for t in tests/cli/*.t; do
	[ -f "$t" ] && add "cli-$(basename "$t" .t)" cli "$t"
done
for t in tests/sh/*.sh; do
	[ -f "$t" ] && add "sh-$(basename "$t" .sh)" sh "$t"
done
run_test() { # index: one's result for test i
	case ${runs[$1]} in
	unit) one "${names[$1]}" "${files[$1]}" ;;
	cli) one "${names[$1]}" tests/cli/run-t.sh "${files[$1]}" ;;
	sh) one "${names[$1]}" bash "${files[$1]}" ;;
	esac
}
# those in `alone` first (in two lanes), the others after them (queue); lines in that order
solo=() queue=()
for i in "${!names[@]}"; do
	if [[ $alone == *" ${names[$i]} "* ]]; then solo+=("$i"); else queue+=("$i"); fi
done
order=("${solo[@]}" "${queue[@]}")
# each result is printed once those before it are
next=0
flush() {
	local n
	while [ "$next" -lt ${#order[@]} ]; do
		n=${names[${order[$next]}]}
		[ -f "build/test-logs/$n.res" ] || break
		take "build/test-logs/$n.res"
		rm -f "build/test-logs/$n.res"
		next=$((next + 1))
	done
}
rm -f build/test-logs/*.res build/test-logs/*.res.tmp
lane() { # 0 (emu_lane), 1 (the other alone tests) or all: those tests, one after another
	local i l r
	for i in "${solo[@]}"; do
		l=1
		[[ $emu_lane == *" ${names[$i]} "* ]] && l=0
		[ "$1" = all ] || [ "$1" = $l ] || continue
		r="build/test-logs/${names[$i]}.res"
		run_test "$i" >"$r.tmp" && mv "$r.tmp" "$r"
	done
}
if [ ${#solo[@]} -gt 0 ]; then
	if [ "$jobs_max" -ge 2 ]; then
		lane 0 &
		lane 1 &
		other=$!
		while kill -0 "$other" 2>/dev/null; do # their lines as they come
			sleep 1
			flush
		done
		wait "$other"
	else
		lane all
	fi
	flush
fi
launch=()
for i in "${queue[@]}"; do [[ $first == *" ${names[$i]} "* ]] && launch+=("$i"); done
for i in "${queue[@]}"; do [[ $first == *" ${names[$i]} "* ]] || launch+=("$i"); done
for i in "${launch[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
		wait -n
		flush
	done
	r="build/test-logs/${names[$i]}.res"
	(run_test "$i" >"$r.tmp" && mv "$r.tmp" "$r") &
	flush
done
wait
flush
while [ "$next" -lt ${#order[@]} ]; do # a job that ended without its result, and those after it
	n=${names[${order[$next]}]}
	if [ -f "build/test-logs/$n.res" ]; then
		take "build/test-logs/$n.res"
		rm -f "build/test-logs/$n.res"
	else
		echo "not ok - $n: no result (its job ended without one); see build/test-logs/$n.log"
		failed=$((failed + 1))
		broken+=("$n")
	fi
	next=$((next + 1))
done

if [ ${#broken[@]} -gt 0 ]; then
	echo "failing: ${broken[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
