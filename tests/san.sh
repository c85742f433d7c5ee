#!/usr/bin/env bash
# tests/san.sh — the hostile-input sweep and the readers' unit tests under AddressSanitizer
# and UndefinedBehaviorSanitizer (make SAN=1: build/san/, never mixed with the normal build),
# and the statistics, analyses and N3-A runner unit tests with them.
# Opt-in (not part of make check); .ci/run calls it after make check. About 2 minutes on
# two cores: the sanitizer build, then tests/sh/hostile_inputs.sh against build/san/bin (in
# the background, its two halves at once) while the unit tests and two script tests run.
# Ends with "N passed, N failed"; exit 1 on any failure or sanitizer report.
set -u -o pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
mkdir -p build
make --no-print-directory -j"$(nproc)" SAN=1 all >build/san.log 2>&1 || {
	tail -n 30 build/san.log
	echo "0 passed, 1 failed"
	exit 1
}
export ASAN_OPTIONS=exitcode=99:detect_leaks=1 UBSAN_OPTIONS=exitcode=99:print_stacktrace=1:halt_on_error=1
export SB_TOP=$PWD
passed=0 failed=0
# a script test under the sanitizer build, its output into FILE (and a last line "# exit RC
# seconds N"); script_report then shows its failures and sanitizer reports and adds
# its counts to passed/failed (a run without a count, or a failing exit, counts as failed)
script_run() { # script file
	local t0=$SECONDS rc
	SB_BIN=build/san/bin SB_TESTBIN=build/san/tests SB_TEST_BIN="$PWD/build/san/bin" bash "$1" >"$2" 2>&1
	rc=$?
	echo "# exit $rc seconds $((SECONDS - t0))" >>"$2"
}
script_report() { # file name
	local out rc line p f
	out=$(cat "$1")
	rc=$(sed -n 's/^# exit \([0-9]*\) seconds.*/\1/p' <<<"$out" | tail -n 1)
	grep -E '^not ok|^# cases|Sanitizer|runtime error:' <<<"$out" | head -n 20
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n 1)
	echo "$2 under the sanitizers: ${line:-no result} in $(sed -n 's/^# exit .* seconds //p' <<<"$out" | tail -n 1) s"
	p=${line%% passed*} f=${line#*, }
	f=${f%% failed}
	[ -n "$line" ] || { p=0 f=1; }
	[ "${rc:-1}" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	passed=$((passed + p)) failed=$((failed + f))
}
script_test() { # script name: run and report
	script_run "$1" build/san-script.out
	script_report build/san-script.out "$2"
}
# the hostile-input sweep (the longest part; its two halves at once) in the background while
# the unit tests and the other script tests run
script_run tests/sh/hostile_inputs.sh build/san-hostile.out &
hostile=$!
for t in test_json test_tensor test_dataset test_io test_fetch_fuzz test_lm_fuzz test_records_fuzz test_fetch_formats test_tokenizer test_unicode_nfc test_lm_import \
	test_stats test_sign test_a8 test_a8_n3a test_runsel test_n3a; do
	out=$(build/san/tests/$t 2>&1)
	rc=$?
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n 1)
	if [ $rc -eq 0 ] && [ -n "$line" ] && ! grep -qE 'Sanitizer|runtime error:' <<<"$out"; then
		passed=$((passed + 1))
		echo "ok - build/san/tests/$t ($line)"
	else
		failed=$((failed + 1))
		echo "not ok - build/san/tests/$t (exit $rc)"
		grep -E 'not ok|Sanitizer|runtime error:|^    #' <<<"$out" | head -n 20 | sed 's/^/#   /'
	fi
done
# sb-stats' published values (analysis, tables and figure, not only the readers)
script_test tests/sh/stats_published.sh stats_published.sh
# the guard: every refusal (a resealed selection derived again, unlisted logs) on the sanitizer
# build's sb-freeze and sb-test (not guard_noread.sh: LeakSanitizer cannot run under its strace)
script_test tests/sh/guard_attacks.sh guard_attacks.sh
wait $hostile
script_report build/san-hostile.out hostile_inputs.sh
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
