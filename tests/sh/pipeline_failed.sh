#!/usr/bin/env bash
# Failed cells are kept with their records and listed at the end, never silently
# dropped; the next run retries only them. ACCEPT_FAILED=1 records a training
# failure (train.failed) as the cell's outcome instead, and the stages go on without it.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"

STUB_FAIL='^t_a\.sparsemax\.s1$' pmake -j2 pt >"$T/fail.log" 2>&1
rc=$?
[ $rc -ne 0 ]; t_result $? "a grid with a failing cell exits non-zero ($rc)"
grep -q '^  FAILED main/t_a.sparsemax.s1.plain.compact.e3: ' "$T/fail.log" && grep -q 'pt: 1 of 16 cells FAILED' "$T/fail.log"
t_result $? "the failed cell is listed at the end ($(grep -m1 'cells FAILED' "$T/fail.log"))"
d="$T/out/pt/main/cells/t_a.sparsemax.s1.plain.compact.e3"
[ -f "$d/FAILED" ] && ls "$d"/attempts/*/work/*/train.ndjson >/dev/null 2>&1 && grep -q '"kind":"train.failed"' "$d"/attempts/*/work/*/train.ndjson
t_result $? "its records are kept (FAILED, attempts/*/work/*/train.ndjson with train.failed)"
[ "$(ncalls sb-train)" = 16 ]; t_result $? "the other cells ran ($(ncalls sb-train) trains)"
[ ! -e "$T/out/pt/main/selection.json" ] && [ -e "$T/out/pt/budget/stats/stats.ndjson" ]
t_result $? "the freeze waits for the failed cell; the other block finished"

reset_calls
pmake pt >"$T/retry.log" 2>&1
t_result $? "the next make pt succeeds ($(tail -n 1 "$T/retry.log"))"
[ "$(ncalls sb-train)" = 1 ] && grep -q '^sb-train .*t_a.sparsemax.s1.plain.compact.e3' "$STUB_LOG"
t_result $? "retrying only the failed cell ($(ncalls sb-train) trains)"
[ ! -f "$d/FAILED" ] && [ -e "$d/val.ndjson" ] && [ -e "$T/out/pt/main/selection.json" ]
t_result $? "which then completes, and the freeze runs"
ls "$d"/attempts/*/work/*/train.ndjson >/dev/null 2>&1; t_result $? "the failed attempt's records are still kept"

# ACCEPT_FAILED=1: the failure is the cell's outcome
rm -rf "$T/out"
reset_calls
STUB_FAIL='^t_a\.sparsemax\.s1$' pmake pt ACCEPT_FAILED=1 >"$T/accept.log" 2>&1
t_result $? "with ACCEPT_FAILED=1 the grid finishes ($(tail -n 1 "$T/accept.log"))"
[ "$(cat "$d/OUTCOME")" = failed:failed_nonfinite_loss ]; t_result $? "the cell's outcome is recorded ($(cat "$d/OUTCOME" 2>/dev/null))"
grep -q 'accepted failure main/t_a.sparsemax.s1.plain.compact.e3' "$T/accept.log"; t_result $? "and listed at the end"
n=$(grep -o '"path"' "$T/out/pt/main/selection.json" | wc -l)
[ "$n" = 11 ]; t_result $? "the freeze read the 11 completed cells ($n)"
grep -q '11 completed, 1 failed' "$T/out/pt/report.md"; t_result $? "the report says so"
t_done
