#!/usr/bin/env bash
# A recipe verifies the SHA-256 sidecars of its inputs first: an upstream file that
# changed without its target being rebuilt is refused, naming the file, and nothing
# downstream is made from it.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"

pmake pt >"$T/ref.log" 2>&1
t_result $? "reference run"
sel=$(sha256sum <"$T/out/pt/main/selection.json")

# a validation log edited after the fact: the freeze refuses it
c="$T/out/pt/main/cells/t_a.softmax.s1.plain.compact.e3"
v=$(readlink -f "$c/val.ndjson")
cp "$v" "$T/val.orig"
sleep 1
sed -i 's/"val_accuracy":0\.[0-9]*/"val_accuracy":0.9999/' "$v"
reset_calls
pmake pt >"$T/val.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "pipeline: $c/val.ndjson: SHA-256 mismatch" "$T/val.log"
t_result $? "a tampered validation log is refused, naming it (exit $rc: $(grep -m1 'mismatch' "$T/val.log"))"
grep -q "links to $v" "$T/val.log"; t_result $? "the message also names the file the link points to"
[ "$(ncalls sb-freeze)" = 0 ] && [ "$(sha256sum <"$T/out/pt/main/selection.json")" = "$sel" ]
t_result $? "sb-freeze did not run and the selection is unchanged"
cp "$T/val.orig" "$v"

# the same log edited through its cell's name with sed -i, which replaces the link by a file:
# refused too (it was once taken for a failure marker and silently left out of the freeze)
lnk=$(readlink "$c/val.ndjson")
sleep 1
sed -i 's/"val_accuracy":0\.[0-9]*/"val_accuracy":0.9999/' "$c/val.ndjson"
[ ! -L "$c/val.ndjson" ] || t_result 1 "sed -i replaced the link by a file"
reset_calls
pmake pt >"$T/val2.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "pipeline: $c/val.ndjson: SHA-256 mismatch" "$T/val2.log" && [ "$(ncalls sb-freeze)" = 0 ] &&
	[ "$(sha256sum <"$T/out/pt/main/selection.json")" = "$sel" ]
t_result $? "a log edited in place through its link (now a file) is refused, the freeze not run (exit $rc: $(grep -m1 'pipeline:' "$T/val2.log"))"
# a file that is not a marker, even with a matching sidecar: refused as such
sha256sum "$c/val.ndjson" | sed "s|  .*|  val.ndjson|" >"$c/val.ndjson.sha256"
reset_calls
pmake pt >"$T/val3.log" 2>&1
rc=$?
[ $rc -eq 3 ] || [ $rc -eq 2 ]
ok=$?
[ $ok -eq 0 ] && grep -q "pipeline: $c/val.ndjson: a file where the link to its run's val.ndjson should be" "$T/val3.log" &&
	[ "$(ncalls sb-freeze)" = 0 ]
t_result $? "a file with a resealed sidecar in place of the link is refused as not a failure marker (exit $rc)"
rm -f "$c/val.ndjson" && ln -s "$lnk" "$c/val.ndjson"
sha256sum "$v" | sed "s|  .*|  val.ndjson|" >"$c/val.ndjson.sha256"

# a dataset changed under finished cells: every cell of that task refuses it
p="$T/data/t_b/pool.safetensors"
echo "extra bytes" >>"$p"
reset_calls
pmake pt REFREEZE=1 >"$T/data.log" 2>&1
rc=$?
n=$(grep -c "pipeline: $p: SHA-256 mismatch" "$T/data.log")
[ $rc -ne 0 ] && [ "$n" -ge 1 ]; t_result $? "a tampered dataset is refused by the cells that use it (exit $rc, $n refusals)"
[ "$(ncalls sb-train)" = 0 ]; t_result $? "no cell trained on it ($(ncalls sb-train))"
grep -q "not finished" "$T/data.log"; t_result $? "the run ends listing the unfinished cells"

# a selection edited after the freeze: the test read refuses it
rm -rf "$T/out" "$T/data"
pmake pt >"$T/ref2.log" 2>&1
# a statistics table edited after sb-stats wrote it: the report refuses to quote it, and
# the report in place is not replaced
t2=$(ls "$T"/out/pt/*/stats/table2.md 2>/dev/null | head -n 1)
if [ -n "$t2" ] && [ -f "$T/out/pt/report.md" ]; then
	rep=$(sha256sum <"$T/out/pt/report.md")
	cp "$t2" "$T/t2.orig"
	echo "| forged | row |" >>"$t2"
	bash "$TOP/pipelines/stage.sh" report "$T/out/pt" >"$T/rep.log" 2>&1
	rc=$?
	[ $rc -eq 3 ] && grep -q "pipeline: $t2: SHA-256 mismatch" "$T/rep.log" &&
		[ "$(sha256sum <"$T/out/pt/report.md")" = "$rep" ] && ! ls "$T"/out/pt/.report.md.tmp >/dev/null 2>&1
	t_result $? "a tampered statistics table is refused by the report (exit $rc: $(grep -m1 mismatch "$T/rep.log")), report.md unchanged"
	cp "$T/t2.orig" "$t2"
else
	t_result 1 "the reference run has a statistics table and a report ($t2)"
fi

s="$T/out/pt/main/selection.json"
sleep 1
sed -i 's/topk_softmax_025/topk_softmax_05/g' "$s"
reset_calls
pmake pt >"$T/sel.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "pipeline: $s: SHA-256 mismatch" "$T/sel.log" && [ "$(ncalls sb-test)" = 0 ]
t_result $? "a tampered selection is refused before the test read (exit $rc)"

# a half-written output without its sidecar is not trusted either
rm -f "$T/out/pt/budget/cells/t_a.softmax.s0.plain.compact.e2/val.ndjson.sha256"
touch -h "$T/out/pt/budget/cells/t_a.softmax.s0.plain.compact.e2/val.ndjson"
touch "$(readlink -f "$T/out/pt/budget/cells/t_a.softmax.s0.plain.compact.e2/val.ndjson")"
pmake "$T/out/pt/budget/stats/stats.ndjson" >"$T/side.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "no SHA-256 sidecar" "$T/side.log"
t_result $? "an input without its sidecar is refused (exit $rc)"
t_done
