#!/usr/bin/env bash
# Cells removed from a block (a seed dropped from the grid) are a change of the inputs of
# the block's freeze, statistics and report: make runs them again over the cells that are
# left (after a test read the freeze refuses until REFREEZE=1, as for changed records),
# and only in that block. A tree expanded before the blocks' cell lists existed re-runs
# nothing when they are first written.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"

pmake pt >"$T/ref.log" 2>&1
t_result $? "reference run"

# block main: seeds 0..1 -> 0 (12 -> 6 cells); block budget unchanged
sed -i 's/^seed    0\.\.1$/seed    0/' "$PT_GRID"
reset_calls
pmake pt >"$T/shrink.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "refusing to re-freeze" "$T/shrink.log" && [ "$(ncalls sb-train)" = 0 ] && [ "$(ncalls sb-freeze)" = 0 ]
t_result $? "after a test read, a block with fewer cells is not left on its old selection silently: the freeze refuses (exit $rc)" "$(grep -v '^train\|^eval' "$T/shrink.log" | tail -n 3 | tr '\n' ' ')"
[ "$(ncalls sb-stats)" = 0 ]; t_result $? "and the unchanged block's statistics do not run ($(ncalls sb-stats))"

reset_calls
pmake pt REFREEZE=1 >"$T/refreeze.log" 2>&1
t_result $? "REFREEZE=1: freeze, test read and statistics over the cells that are left"
nv=$(grep '^sb-freeze ' "$STUB_LOG" | grep -o 'val\.ndjson' | wc -l)
[ "$(ncalls sb-train)" = 0 ] && [ "$(ncalls sb-freeze)" = 1 ] && [ "$nv" = 6 ] && [ "$(ncalls sb-test)" = 1 ] && [ "$(ncalls sb-stats)" = 1 ]
t_result $? "nothing trained; the freeze read the 6 validation logs left ($nv), one test read, one statistics run"
grep -q '^6 cells, all completed' "$T/out/pt/report.md" && grep -q '^4 cells, all completed' "$T/out/pt/report.md"
t_result $? "the report says 6 cells for main, 4 for budget" "$(grep 'cells' "$T/out/pt/report.md" | tr '\n' ' ')"
reset_calls
pmake pt >"$T/noop.log" 2>&1
t_result $? "make pt again succeeds"
[ ! -s "$STUB_LOG" ]; t_result $? "and runs nothing"

# a block without a test read: its statistics run again at once
sed -i 's/^epochs  2 4$/epochs  2/' "$PT_GRID"
reset_calls
pmake pt >"$T/budget.log" 2>&1
t_result $? "budget block 4 -> 2 cells: make pt succeeds"
[ "$(ncalls sb-stats)" = 1 ] && [ "$(ncalls sb-freeze)" = 0 ] && [ "$(ncalls sb-train)" = 0 ] && grep -q '^2 cells, all completed' "$T/out/pt/report.md"
t_result $? "its statistics and the report run again, nothing else ($(ncalls sb-stats) stats, $(ncalls sb-freeze) freeze)"

# a tree expanded before the cell lists existed (as after an upgrade): nothing re-runs
rm -f "$T/out/pt"/*/params/cells
touch -d '-1 hour' "$T/out/pt/.grid/cells.mk"
reset_calls
pmake pt >"$T/upgrade.log" 2>&1
t_result $? "without params/cells, make pt succeeds"
[ -f "$T/out/pt/main/params/cells" ] && [ ! -s "$STUB_LOG" ]
t_result $? "writes the cell lists and runs nothing" "$(cut -d' ' -f1 "$STUB_LOG" | tr '\n' ' ')"
t_done
