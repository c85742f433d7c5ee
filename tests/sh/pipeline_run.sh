#!/usr/bin/env bash
# The make pipeline end to end on the test grid with stub stages: a full run, a
# second run that does nothing, make -j2 giving the same results, make -n listing
# every cell, and the output manifest (out-manifest / out-verify).
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"

pmake pt >"$T/run1.log" 2>&1
t_result $? "make pt runs the 16-cell test grid to its report (log: $(tail -n 2 "$T/run1.log" | tr '\n' ' '))"
[ "$(ncalls sb-train)" = 16 ] && [ "$(ncalls sb-eval)" = 16 ]
t_result $? "each cell trained and evaluated once ($(ncalls sb-train) trains, $(ncalls sb-eval) evals)"
[ "$(ncalls sb-fetch)" = 2 ]; t_result $? "each task fetched once ($(ncalls sb-fetch))"
[ -f "$T/out/pt/report.md" ] && grep -q '^## main' "$T/out/pt/report.md" && grep -q '^| t_a | softmax' "$T/out/pt/report.md"
t_result $? "report.md has the blocks and the tables"
grep -q 'all 16 cells trained and evaluated' "$T/run1.log"; t_result $? "the run ends with the cell summary on stderr"
grep -q '^train pt/main t_a.softmax.s0.plain.compact.e3 ok' "$T/run1.log"; t_result $? "progress lines on stderr"
ref=$(digest)

reset_calls
pmake pt >"$T/run2.log" 2>&1
t_result $? "a second make pt succeeds"
[ ! -s "$STUB_LOG" ]; t_result $? "and runs no stage program (a no-op; ran: $(sort -u "$STUB_LOG" | cut -d' ' -f1 | tr '\n' ' '))"

# make -n lists every cell without running anything
rm -rf "$T/out"
reset_calls
pmake -n pt >"$T/dry.log" 2>&1
t_result $? "make -n pt succeeds"
[ "$(grep -c 'stage.sh train ' "$T/dry.log")" = 16 ] && [ "$(grep -c 'stage.sh eval ' "$T/dry.log")" = 16 ]
t_result $? "make -n pt lists the 16 cells ($(grep -c 'stage.sh train ' "$T/dry.log") train lines)"
[ ! -s "$STUB_LOG" ] && [ ! -e "$T/out/pt/main/runs" ]; t_result $? "make -n runs no stage"

# -j2 on a fresh tree: the same results
pmake -j2 pt >"$T/j2.log" 2>&1
t_result $? "make -j2 pt succeeds"
[ "$(digest)" = "$ref" ]; t_result $? "make -j2 gives the same results as make -j1 (digest $(digest | cut -c1-12) vs ${ref:0:12})"
[ "$(ncalls sb-train)" = 16 ]; t_result $? "-j2 trains each cell once ($(ncalls sb-train))"
ls "$T/out/pt/main/runs" | grep -c . | grep -qx 12; t_result $? "one run directory per cell in main/runs"

# output manifest
pmake out-manifest OUTTREE="$T/out/pt" >"$T/man.log" 2>&1
t_result $? "make out-manifest writes OUTTREE/MANIFEST.csv"
head -n 1 "$T/out/pt/MANIFEST.csv" | grep -qx 'path,size_bytes,sha256'; t_result $? "MANIFEST.csv has PROTOCOL A5's columns"
grep -q '^main/selection.json,[0-9]*,[0-9a-f]\{64\}$' "$T/out/pt/MANIFEST.csv"; t_result $? "MANIFEST.csv lists the selection"
pmake out-verify OUTTREE="$T/out/pt" >"$T/ver.log" 2>&1
t_result $? "make out-verify passes on an untouched tree ($(tail -n 1 "$T/ver.log"))"
echo "# tampered" >>"$T/out/pt/main/stats/table2.md"
pmake out-verify OUTTREE="$T/out/pt" >"$T/ver2.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q 'main/stats/table2.md: SHA-256 mismatch' "$T/ver2.log"
t_result $? "make out-verify fails and names a changed output (exit $rc)"
# the same tree under a directory named work (as /work/out): every sidecar is still checked
# (the cells' own work/ and attempts/ are what is passed over), and the change is found
n1=$(sed -n 's/.*: \([0-9]*\) sidecars checked$/\1/p' "$T/ver.log")
mkdir -p "$T/work"
cp -a "$T/out/pt" "$T/work/pt"
pmake out-verify OUTTREE="$T/work/pt" >"$T/ver3.log" 2>&1
rc=$?
n2=$(sed -n 's/.*: \([0-9]*\) sidecars checked$/\1/p' "$T/ver3.log")
[ $rc -ne 0 ] && [ -n "$n1" ] && [ "$n1" -gt 0 ] && [ "$n2" = "$n1" ] && grep -q 'main/stats/table2.md: SHA-256 mismatch' "$T/ver3.log"
t_result $? "out-verify of a tree under a directory named work checks the same $n1 sidecars ($n2) and finds the change (exit $rc)"
t_done
