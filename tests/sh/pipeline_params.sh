#!/usr/bin/env bash
# Parameters live in files rewritten only when their content changes, so a changed
# parameter re-runs exactly the cells (and stages) it affects: a field changed for
# one method, a stage option, and the freeze guard after a test read.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"

pmake pt >"$T/ref.log" 2>&1
t_result $? "reference run"
stamp() { find "$T/out/pt" -path '*/cells/*/cell.json' -printf '%p %T@\n' | sort; }
stamp >"$T/before"

# one field for one method: 2 tasks x 2 seeds of sparsemax in block main
sed -i '/^set when task=t_b limit=100$/a set when method=sparsemax lr=0.002' "$PT_GRID"
reset_calls
pmake pt >"$T/lr.log" 2>&1
rc=$?
stamp >"$T/after"
changed=$(diff "$T/before" "$T/after" | grep -c '^>' || true)
[ "$changed" = 4 ]; t_result $? "exactly 4 cell.json files were rewritten ($changed)"
diff "$T/before" "$T/after" | grep '^>' | grep -qv sparsemax; [ $? -ne 0 ]; t_result $? "all of them sparsemax cells"
grep -q '"lr":0.002' "$T/out/pt/main/cells/t_a.sparsemax.s0.plain.compact.e3/cell.json"; t_result $? "with the new value"
[ "$(ncalls sb-train)" = 4 ] && [ "$(ncalls sb-eval)" = 4 ]
t_result $? "exactly those 4 cells were trained and evaluated again ($(ncalls sb-train)/$(ncalls sb-eval))"
[ $rc -ne 0 ] && grep -q "refusing to re-freeze" "$T/lr.log" && [ "$(ncalls sb-freeze)" = 0 ]
t_result $? "after a test read, changed validation records do not re-freeze silently (exit $rc)"
[ "$(ls "$T/out/pt/main/runs" | wc -l)" = 12 ]
t_result $? "the superseded run directories were replaced, not accumulated"

reset_calls
pmake pt REFREEZE=1 >"$T/refreeze.log" 2>&1
t_result $? "REFREEZE=1 re-freezes, reads the test split for the new selection, and finishes"
[ "$(ncalls sb-train)" = 0 ] && [ "$(ncalls sb-freeze)" = 1 ] && [ "$(ncalls sb-test)" = 1 ]
t_result $? "without training anything ($(ncalls sb-train) trains, $(ncalls sb-freeze) freeze, $(ncalls sb-test) test read)"
grep -q -- '--force' "$STUB_LOG" && grep -q '"forced":true' "$T/out/pt/main/selection.json"
t_result $? "the forced freeze is recorded in the selection"
ls -d "$T/out/pt/main/test.superseded."* >/dev/null 2>&1; t_result $? "the previous test read is kept"

# a stage option: only that stage runs again
sed -i 's/^stage   stats baseline=softmax$/stage   stats baseline=sparsemax/' "$PT_GRID"
reset_calls
pmake pt >"$T/stats.log" 2>&1
t_result $? "a changed stats option re-runs"
[ "$(ncalls sb-train)" = 0 ] && [ "$(ncalls sb-freeze)" = 0 ] && [ "$(ncalls sb-stats)" -ge 1 ]
t_result $? "only the statistics ($(ncalls sb-stats) sb-stats calls, no training or freeze)"
grep -q 'baseline sparsemax' "$T/out/pt/main/stats/table2.md" && grep -q 'baseline sparsemax' "$T/out/pt/budget/stats/table2.md"
t_result $? "of both blocks, with the new option"

# published=FILE (beside the grid file): read by sb-stats with the records, its table in the
# report; the statistics (only they) depend on the file; a missing one is named
printf '%s\n' '{"kind":"published.value","v":1,"task":"t_a","method":"softmax","quantity":"mean","value":0.5,"source":"test"}' >"$T/pub.ndjson"
sed -i '0,/^stage   stats baseline=sparsemax$/s//stage   stats baseline=sparsemax published=pub.ndjson/' "$PT_GRID"
reset_calls
pmake pt >"$T/pub.log" 2>&1
t_result $? "a stats stage with published=pub.ndjson runs" "$(tail -3 "$T/pub.log" | tr '\n' ' ')"
[ "$(ncalls sb-train)" = 0 ] && [ "$(ncalls sb-stats)" = 1 ] && grep "^sb-stats " "$STUB_LOG" | grep -q " $T/pub.ndjson"
t_result $? "only that block's statistics ran again, with the published file among their inputs ($(ncalls sb-stats) sb-stats calls)"
grep -q "^| published values read |" "$T/out/pt/report.md" && [ -f "$T/out/pt/main/stats/published.md.sha256" ]
t_result $? "the report shows the published table (sealed with the other tables)"
sleep 1.1
printf '%s\n' '{"kind":"published.value","v":1,"task":"t_a","method":"softmax","quantity":"mean","value":0.6,"source":"test"}' >>"$T/pub.ndjson"
reset_calls
pmake pt >"$T/pub2.log" 2>&1
[ $? = 0 ] && [ "$(ncalls sb-train)" = 0 ] && [ "$(ncalls sb-stats)" = 1 ] && [ "$(ncalls sb-freeze)" = 0 ] && [ "$(ncalls sb-test)" = 0 ]
t_result $? "a changed published file re-runs those statistics alone ($(ncalls sb-stats) sb-stats calls)"
sed -i 's/published=pub.ndjson/published=nowhere.ndjson/' "$PT_GRID"
reset_calls
pmake pt >"$T/pub3.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "$T/nowhere.ndjson" "$T/pub3.log" && [ "$(ncalls sb-stats)" = 0 ]
t_result $? "a published file that is not there stops the statistics, named by make (exit $rc)" "$(grep nowhere "$T/pub3.log" | head -2)"
# with rule=true, exit 3 is a result (the rule failed) only when sb-stats wrote its outputs;
# malformed input (also exit 3, nothing written) stops the stage
printf '%s\n' '{"stub":"malformed"}' >"$T/bad.ndjson"
sed -i 's/published=nowhere.ndjson/rule=true published=bad.ndjson/' "$PT_GRID"
pmake pt >"$T/pub5.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "stats pt/main failed (exit 3" "$T/pub5.log" && [ ! -e "$T/out/pt/main/stats/rule-exit" ]
t_result $? "rule=true and malformed input (exit 3, no outputs): the stage fails, no rule exit recorded (exit $rc)" "$(grep -i 'stats' "$T/pub5.log" | tail -2)"
printf '%s\n' '{"stub":"rule_failed"}' >"$T/bad.ndjson"
pmake pt >"$T/pub6.log" 2>&1
rc=$?
[ $rc = 0 ] && [ "$(cat "$T/out/pt/main/stats/rule-exit" 2>/dev/null)" = 3 ]
t_result $? "rule=true and a failed rule (exit 3 after the outputs): recorded in rule-exit, the stage goes on (exit $rc)"
sed -i 's/ rule=true published=bad.ndjson//' "$PT_GRID"
pmake pt >"$T/pub4.log" 2>&1
t_result $? "without the options the statistics run again"

# an unchanged grid file that is merely touched re-runs nothing
touch "$PT_GRID"
reset_calls
pmake pt >"$T/touch.log" 2>&1
[ ! -s "$STUB_LOG" ]; t_result $? "touching the grid file without changing it re-runs nothing"
t_done
