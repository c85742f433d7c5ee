#!/usr/bin/env bash
# Failed cells are kept with their records and listed at the end, never silently
# dropped; the next run retries only them. A non-finite loss (sb-train exit 0 with
# train.failed, PROTOCOL A4) is a result: recorded as the cell's outcome, not
# retried; ACCEPT_FAILED=1 records any training failure that way.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"

STUB_CRASH='^t_a\.sparsemax\.s1$' pmake -j2 pt >"$T/fail.log" 2>&1
rc=$?
[ $rc -ne 0 ]; t_result $? "a grid with a crashing cell exits non-zero ($rc)"
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

# a non-finite loss is a result
rm -rf "$T/out"
reset_calls
STUB_FAIL='^t_a\.sparsemax\.s1$' pmake pt >"$T/nonfinite.log" 2>&1
t_result $? "a non-finite loss does not fail the grid ($(tail -n 1 "$T/nonfinite.log"))"
[ "$(cat "$d/OUTCOME" 2>/dev/null)" = failed:failed_nonfinite_loss ]; t_result $? "the cell's outcome is recorded ($(cat "$d/OUTCOME" 2>/dev/null))"
grep -q 'recorded failure main/t_a.sparsemax.s1.plain.compact.e3' "$T/nonfinite.log"; t_result $? "and listed at the end"
[ -L "$d/val.ndjson" ] && grep -q '"train_status":"failed_nonfinite_loss"' "$d/val.ndjson"
t_result $? "its completed epochs are evaluated (eval.done says how training ended)"
grep -q '"n_included":11' "$T/out/pt/main/selection.json"; t_result $? "the freeze uses the 11 completed cells"
grep -q '11 completed, 1 failed' "$T/out/pt/report.md"; t_result $? "the report says so"
reset_calls
STUB_FAIL='^t_a\.sparsemax\.s1$' pmake pt >"$T/nonfinite2.log" 2>&1
[ ! -s "$STUB_LOG" ]; t_result $? "and it is not retried"

# ACCEPT_FAILED=1: any training failure becomes the outcome
rm -rf "$T/out"
reset_calls
STUB_CRASH='^t_a\.sparsemax\.s1$' pmake pt ACCEPT_FAILED=1 >"$T/accept.log" 2>&1
t_result $? "with ACCEPT_FAILED=1 a crashing cell does not stop the grid ($(tail -n 1 "$T/accept.log"))"
[ "$(cat "$d/OUTCOME" 2>/dev/null)" = failed:failed ]; t_result $? "the failure is the cell's recorded outcome ($(cat "$d/OUTCOME" 2>/dev/null))"
t_done
