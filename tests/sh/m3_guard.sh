#!/usr/bin/env bash
# PROTOCOL A8 M3's freeze and guarded test read with the real programs (sb-train, sb-eval,
# sb-freeze --rule m3_confirmation, sb-test, sb-a8 m3) on a tiny generated task
# (tests/fixtures/m3/gen_data.py): 4 methods x 2 seeds x 2 architectures, 3 epochs, and a
# switch map written here. Checks: the authorised status when complete and matching; each
# other status (an expected count not met, a missing cell, a switch epoch not the map's, a
# cell the map does not plan); the payload hash (Python); sb-test refusing a wrong status
# (edited and re-hashed, so that only the status check can catch it), an edited or deleted
# switch map, each before any test file is opened (a FIFO in place of the test file, and
# strace when it works); sb-test refusing a selection that is not what the rule gives on its
# logs and map (resealed edits of the plan, the cells, the seeds, the reasons; a switching
# cell's cell.json edited); the read accepted when all is in order; sb-a8 m3 on the read.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/guard/lib.sh"
cd "$T"
/usr/bin/python3 "$TOP/tests/fixtures/m3/gen_data.py" data cx
for a in plain local_hybrid; do
	for s in 10 11; do
		for m in softmax topk_softmax_025; do
			printf '{"task":"cx","method":"%s","seed":%d,"epochs":3,"arch":"%s","batch":16}\n' $m $s $a
		done
		printf '{"task":"cx","method":"mechanistic_switch","switch_epoch":2,"seed":%d,"epochs":3,"arch":"%s","batch":16}\n' $s $a
		printf '{"task":"cx","method":"entropy_switch","switch_epoch":3,"seed":%d,"epochs":3,"arch":"%s","batch":16}\n' $s $a
	done
done >cells.ndjson
sb-train -q -d data -o runs -j 1 cells.ndjson >train.out 2>train.err && sb-eval -q -d data runs/*/ >eval.out 2>eval.err
t_result $? "16 real cells trained and evaluated ($(tail -c 200 train.err eval.err | tr '\n' ' '))"
{
	echo "# a switch map, in sb-a8 m3map's format"
	echo "method mechanistic_switch entropy_switch"
	for a in plain local_hybrid; do
		echo "set when task=cx arch=$a tier=compact method=mechanistic_switch switch_epoch=2"
		echo "set when task=cx arch=$a tier=compact method=entropy_switch switch_epoch=3"
	done
} >map.inc
sleep 0.05
freeze() { # dir [options] [logs...]: freeze into dir/selection.json
	local d=$1
	shift
	mkdir -p "$d"
	sb-freeze -q --rule m3_confirmation --switch-map map.inc -o "$d/selection.json" "$@" >"$d/freeze.out" 2>"$d/freeze.err"
}
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

freeze ok --expect-cells 16 runs/*/val.ndjson
rc=$?
[ $rc -eq 0 ] && [ "$(field ok/selection.json 'd["status"]')" = M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED ] &&
	[ "$(field ok/selection.json 'len(d["test_plan"])')" = 16 ] && [ "$(field ok/selection.json 'len(d["status_reasons"])')" = 0 ] &&
	[ "$(field ok/selection.json 'd["switch_map"]["sha256"]')" = "$(sha256sum <map.inc | cut -c1-64)" ] &&
	[ "$(field ok/selection.json 'd["switch_map"]["path"]')" = ../map.inc ] &&
	[ "$(field ok/selection.json 'sorted({p["method"] for p in d["test_plan"]})')" = "['entropy_switch', 'mechanistic_switch', 'softmax', 'topk_softmax_025']" ]
t_result $? "complete and matching: M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED, 16 planned cells of 4 methods, the map's path and SHA-256 (exit $rc)" "$(cat ok/freeze.err)"
python3 - ok/selection.json <<'PY'
import hashlib, json, sys
d = json.load(open(sys.argv[1]))
h = d.pop("sha256")
assert h == hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
assert d["rule"]["name"] == "m3_confirmation" and d["rule"]["planned_cells"] == 16 and d["rule"]["expected_cells"] == 16
assert {"status", "status_reasons", "switch_map"} <= set(d)
PY
t_result $? "the payload hash is json.dumps(payload, sort_keys=True) of the parsed file, status and switch map inside it"

# the other statuses: the selection is still written, with the reasons
status_case() { # name want-status want-reason-substring dir
	local st n
	st=$(field "$4/selection.json" 'd["status"]' 2>/dev/null)
	n=$(field "$4/selection.json" 'sum(sys.argv[3] in r for r in d["status_reasons"])' "$3" 2>/dev/null)
	[ "$st" = "$2" ] && [ "${n:-0}" -ge 1 ] && grep -q "status $2: the test read will be refused" "$4/freeze.err"
	t_result $? "$1: $2, reason '$3' ($st; $(head -c 200 "$4/freeze.err"))"
}
freeze c1 --expect-cells 20 runs/*/val.ndjson
status_case "an expected count not met" M3_VALIDATION_INCOMPLETE "--expect-cells says 20" c1
freeze c2 --expect-cells 16 $(ls runs/*/val.ndjson | grep -v 'entropy_switch.s11.local_hybrid')
status_case "a missing cell" M3_VALIDATION_INCOMPLETE "entropy_switch seed 11: no validation log holds it" c2
[ "$(field c2/selection.json 'len(d["test_plan"]), len(d["test_plan_missing"])')" = "(15, 1)" ]
t_result $? "a missing cell: 15 planned cells in the test plan, 1 in test_plan_missing"
sed 's/tier=compact method=entropy_switch switch_epoch=3/tier=compact method=entropy_switch switch_epoch=4/' map.inc >map2.inc
mkdir -p c3 && sb-freeze -q --rule m3_confirmation --switch-map map2.inc -o c3/selection.json runs/*/val.ndjson >c3/freeze.out 2>c3/freeze.err
status_case "a switch epoch that is not the map's" M3_SWITCH_MAP_MISMATCH "switch_epoch 3, the switch map says 4" c3
grep -v 'arch=local_hybrid' map.inc >map3.inc
mkdir -p c4 && sb-freeze -q --rule m3_confirmation --switch-map map3.inc -o c4/selection.json runs/*/val.ndjson >c4/freeze.out 2>c4/freeze.err
status_case "cells the map does not plan" M3_SWITCH_MAP_MISMATCH "is not planned by the switch map" c4
cp -a runs runs5
sed -i 's/"train_status":"completed"/"train_status":"failed_nonfinite_loss"/' "$(ls runs5/*/val.ndjson | grep 'softmax.s10.plain' | head -n 1)"
freeze c5 runs5/*/val.ndjson
status_case "a cell whose training did not complete" M3_VALIDATION_INCOMPLETE "training status is 'failed_nonfinite_loss'" c5
mkdir -p c6 && sb-freeze -q --rule m3_confirmation --switch-map map.inc --tier compact -o c6/selection.json runs/*/val.ndjson 2>c6/err
[ $? -eq 2 ] && grep -q "belong to rule topk_mean_val_acc" c6/err && [ ! -e c6/selection.json ]
t_result $? "topk_mean_val_acc's options with m3_confirmation: usage error, nothing written"
sb-freeze -q --rule m3_confirmation -o c6/selection.json runs/*/val.ndjson 2>c6/err
[ $? -eq 2 ] && grep -q "needs --switch-map" c6/err
t_result $? "m3_confirmation without --switch-map: usage error"
printf 'set when task=cx arch=plain tier=compact method=mechanistic_switch switch_epoch=two\n' >bad.inc
sb-freeze -q --rule m3_confirmation --switch-map bad.inc -o c6/selection.json runs/*/val.ndjson 2>c6/err
[ $? -eq 3 ] && grep -q "bad.inc:1: not a switch map line" c6/err
t_result $? "a malformed switch map: exit 3, file and line"
# indented so that its first 511 bytes end in "switch_epoch=5" and the line in "...=50": read
# truncated, it would be a valid line with the wrong epoch
core='set when task=cx arch=plain tier=compact method=mechanistic_switch switch_epoch=5'
{ printf 'method mechanistic_switch median_switch\n'; printf '%*s%s0\n' $((511 - ${#core})) '' "$core"; } >long.inc
sb-freeze -q --rule m3_confirmation --switch-map long.inc -o c6/selection.json runs/*/val.ndjson 2>c6/err
[ $? -eq 3 ] && grep -q "long.inc:2: line longer than 511 bytes" c6/err && [ ! -e c6/selection.json ]
t_result $? "a switch map line longer than 511 bytes is refused, not read truncated: exit 3, file and line"

# a switch map of many groups against logs of one cell: one reason per missing plan entry
# (120 here); sb-freeze once had room for 4 per cell plus one per map line, and overran it
mkdir -p big
(cd big && mkcell runs t softmax 0 "0.5 0.6" >/dev/null)
{
	echo "method mechanistic_switch entropy_switch"
	for i in $(seq 1 30); do
		echo "set when task=g$i arch=plain tier=compact method=mechanistic_switch switch_epoch=2"
		echo "set when task=g$i arch=plain tier=compact method=entropy_switch switch_epoch=3"
	done
} >big/map.inc
sb-freeze -q --rule m3_confirmation --switch-map big/map.inc -o big/selection.json big/runs/*/val.ndjson >big/out 2>big/err
rc=$?
[ $rc -eq 0 ] && [ "$(field big/selection.json 'd["status"], len(d["status_reasons"]), len(d["test_plan_missing"])')" = \
	"('M3_SWITCH_MAP_MISMATCH', 121, 120)" ] && grep -q "\"size_bytes\":$(wc -c <big/map.inc)" big/out
t_result $? "30 groups, one cell: M3_SWITCH_MAP_MISMATCH with 121 reasons, 120 plan entries missing, the map's size in run.meta (exit $rc: $(head -c 200 big/err))"

# ---- sb-test ----
fresh() { rm -rf s; mkdir s; cp -a ok/selection.json s/; }
sbtest() { sb-test -q -s s/selection.json -d data -o s/test runs >s/out 2>s/err; }
refused() { # name check
	local rc=$1
	[ $rc -eq 1 ] && grep -q "refused by the guard ($3)" s/err && [ ! -e s/selection.reads.ndjson ] && [ ! -e s/test ]
	t_result $? "$2: exit 1, check $3, no ledger, no output (exit $rc: $(head -c 250 s/err))"
}
reseal() { reseal_selection s/selection.json "$1"; } # tests/fixtures/guard/lib.sh
fresh; reseal 'd["status"] = "M3_VALIDATION_INCOMPLETE"'; sbtest; refused $? "status M3_VALIDATION_INCOMPLETE, re-hashed (only the status check can catch it)" freeze-status
fresh; reseal 'del d["status"]'; sbtest; refused $? "the status removed, re-hashed" freeze-status
fresh; reseal 'd["status"] = "M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED "'; sbtest; refused $? "a status that is almost the authorised one" freeze-status
rm -rf s && mkdir s && cp c3/selection.json s/; sbtest; refused $? "a frozen M3_SWITCH_MAP_MISMATCH" freeze-status
cp map.inc map.keep
fresh; echo '# edited' >>map.inc; sbtest; refused $? "the switch map edited after the freeze (a comment appended)" switch-map-hash; cp map.keep map.inc
fresh; sed -i 's/switch_epoch=2/switch_epoch=5/' map.inc; sbtest; refused $? "the switch map's epochs changed after the freeze" switch-map-hash; cp map.keep map.inc
fresh; rm map.inc; sbtest; refused $? "the switch map deleted" switch-map-hash; cp map.keep map.inc
fresh; reseal 'd["switch_map"]["sha256"] = "0" * 64'; sbtest; refused $? "the recorded map hash replaced, re-hashed" switch-map-hash
# resealed edits that keep the authorised status and the map: sb-test derives the selection
# again from its logs and switch map (lib/freeze_m3.h, the code sb-freeze froze with)
fresh; reseal 'd["test_plan"].pop()'; sbtest; refused $? "resealed: a test-plan entry dropped" selection-derivation
fresh; reseal 'a, b = d["test_plan"][0], d["test_plan"][1]; a["cell_id"], b["cell_id"] = b["cell_id"], a["cell_id"]; a["checkpoint_sha256"], b["checkpoint_sha256"] = b["checkpoint_sha256"], a["checkpoint_sha256"]'
sbtest; refused $? "resealed: two test-plan entries' cells and checkpoints swapped" selection-derivation
fresh; reseal 'd["test_plan_missing"].append(d["test_plan"].pop())'; sbtest; refused $? "resealed: a planned cell moved to test_plan_missing" selection-derivation
fresh; reseal 'c = [c for c in d["cells"] if c["included"]][0]; c["val_accuracy"] -= 0.05'; sbtest; refused $? "resealed: an included cell's validation accuracy changed" selection-derivation
fresh; reseal 'c = [c for c in d["cells"] if c["included"]][0]; c["included"] = False; c["reason"] = "dropped"; c["val_accuracy"] = None'
sbtest; refused $? "resealed: an included cell marked excluded" selection-derivation
fresh; reseal 'c = [c for c in d["cells"] if c["switch_epoch"]][0]; c["switch_epoch"] += 1'; sbtest; refused $? "resealed: a cell's recorded switch epoch changed" selection-derivation
fresh; reseal 'd["cells"].pop()'; sbtest; refused $? "resealed: a cell removed from the list" selection-derivation
fresh; reseal 'd["rule"]["seeds"] = [10]'; sbtest; refused $? "resealed: a seed dropped from the rule" selection-derivation
fresh; reseal 'd["rule"]["planned_cells"] = 8'; sbtest; refused $? "resealed: planned_cells changed" selection-derivation
fresh; reseal 'd["status_reasons"] = ["made up"]'; sbtest; refused $? "resealed: a status reason added" selection-derivation
fresh; reseal 'd["rule"]["expected_cells"] = 20'; sbtest; refused $? "resealed: expected_cells changed (the rule then gives M3_VALIDATION_INCOMPLETE)" selection-derivation
fresh; reseal 'd["rule"]["expected_cells"] = "16"'; sbtest; refused $? "resealed: expected_cells not a number" selection-derivation
fresh; reseal 'd["rule"]["methods"][3] = "median_switch"'; sbtest; refused $? "resealed: the rule's simple schedule renamed" selection-derivation
fresh; reseal 'd["switch_map"]["lines"] = 3'; sbtest; refused $? "resealed: the switch map's line count changed" selection-derivation
fresh; reseal 'd["validation_logs"][0]["cells_used"] = 0'; sbtest; refused $? "resealed: a log's cells_used changed" selection-derivation
fresh; reseal 'd["validation_logs"][0]["size_bytes"] += 1'; sbtest; refused $? "resealed: a log's size changed" selection-derivation
# the expected count is an input of the freeze: a selection frozen INCOMPLETE under --expect-cells 20,
# resealed authorised without the count, still says 20 in its argv
rm -rf s && mkdir s && cp c1/selection.json s/
reseal 'd["rule"]["expected_cells"] = None; d["status"] = "M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED"; d["status_reasons"] = []'
sbtest; refused $? "resealed: --expect-cells 20's shortfall hidden (expected_cells null, status authorised)" selection-derivation
grep -q "expected_cells (null) is not the --expect-cells of its argv (20)" s/err
t_result $? "and the refusal names the argv's count ($(grep -o 'expected_cells ([^)]*) is not[^(]*([^)]*)' s/err))"
# a forged run directory: the mismatched selection c3 (the map says entropy_switch epoch 4, the
# cells have 3) resealed authorised, listing copies of the entropy_switch logs (bytes and times
# kept) beside a two-field cell.json with the map's epoch: its fields do not hash to its id
rm -rf s shadow && mkdir s && cp c3/selection.json s/
for d in runs/cx.entropy_switch.*; do
	mkdir -p "shadow/${d##*/}" && cp -p "$d/val.ndjson" "shadow/${d##*/}/"
	printf '{"cell_id":"%s","switch_epoch":4}\n' "${d##*/}" >"shadow/${d##*/}/cell.json"
done
reseal 'for l in d["validation_logs"]:
    l["path"] = l["path"].replace("/runs/cx.entropy_switch.", "/shadow/cx.entropy_switch.")
d["status"] = "M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED"
d["status_reasons"] = []
for c in d["cells"]:
    if c["method"] == "entropy_switch": c["switch_epoch"] = 4'
[ "$(grep -c '"path": "../shadow/' s/selection.json)" = 4 ] && sbtest
refused $? "resealed: a mismatch hidden behind forged cell.json files beside copied logs" selection-derivation
grep -q "gives status M3_SWITCH_MAP_MISMATCH" s/err
t_result $? "and the rule on the copies gives the mismatch ($(grep -o 'gives status [A-Z_0-9]*' s/err))"
# a switching cell's cell.json edited after the freeze: its switch epoch no longer the map's
cj=$(ls runs/cx.mechanistic_switch.s10.plain.*/cell.json)
cp "$cj" cj.keep
fresh; sed -i 's/"switch_epoch":2/"switch_epoch":3/' "$cj"; grep -q '"switch_epoch":3' "$cj" && sbtest
refused $? "a switching cell's cell.json edited after the freeze (switch epoch 2 -> 3)" selection-derivation
cp cj.keep "$cj"
grep -q "gives status M3_SWITCH_MAP_MISMATCH" s/err
t_result $? "and the refusal names the status the rule gives now ($(grep -o 'gives status [A-Z_0-9]*' s/err))"
# nothing under the data directory is opened: the test file is a FIFO (an open would hang)
mv data/cx/test.safetensors test.keep
mkfifo data/cx/test.safetensors
fifo_case() { # name setup-expr restore-expr
	fresh
	eval "$2"
	timeout 20 sb-test -q -s s/selection.json -d data -o s/test runs >s/out 2>s/err
	local rc=$?
	eval "$3"
	[ $rc -eq 1 ] && grep -q "refused by the guard" s/err
	t_result $? "FIFO: $1 refused at once (exit $rc; 124 would mean the test file was opened)"
}
fifo_case "a wrong status" 'reseal "d[\"status\"] = \"M3_VALIDATION_INCOMPLETE\""' :
fifo_case "an edited switch map" 'echo "# x" >>map.inc' 'cp map.keep map.inc'
fifo_case "a deleted switch map" 'rm map.inc' 'cp map.keep map.inc'
# and a FIFO where the guard reads: the switch map, a switching cell's cell.json (they hung)
fifo_case "a switch map that is a FIFO" 'rm map.inc; mkfifo map.inc' 'rm map.inc; cp map.keep map.inc'
fifo_case "a switching cell's cell.json that is a FIFO" 'rm "$cj"; mkfifo "$cj"' 'rm "$cj"; cp cj.keep "$cj"'
if command -v strace >/dev/null && strace -f -qq -o /dev/null true 2>/dev/null; then
	for c in status map; do
		fresh
		if [ $c = status ]; then reseal 'd["status"] = "M3_VALIDATION_INCOMPLETE"'; else echo '# x' >>map.inc; fi
		strace -f -qq -e trace=%file -o trace sb-test -q -s s/selection.json -d data -o s/test runs >/dev/null 2>s/err
		rc=$?
		cp map.keep map.inc
		n=$(grep -v execve trace | grep -c "$T/data\|\"data/")
		[ $rc -eq 1 ] && [ "$n" -eq 0 ]
		t_result $? "strace: the $c refusal makes no file call under the data directory ($n)"
	done
else
	echo "ok - # SKIP strace unavailable: the FIFO method ran"
fi
rm data/cx/test.safetensors
mv test.keep data/cx/test.safetensors
# a run's val.ndjson may be a link into a log store: the selection lists it where it was named
# (beside its cell.json), and sb-test reads the same switch epochs as sb-freeze did
rm -rf lk && mkdir -p lk/logstore && cp -a runs lk/runs
for d in lk/runs/*/; do
	id=$(basename "$d")
	mv "$d/val.ndjson" "lk/logstore/$id.val.ndjson" && ln -s "../../logstore/$id.val.ndjson" "$d/val.ndjson"
done
mkdir -p lk/sel && sb-freeze -q --rule m3_confirmation --switch-map map.inc --expect-cells 16 -o lk/sel/selection.json \
	lk/runs/*/val.ndjson >lk/freeze.out 2>lk/freeze.err
rc=$?
st=$(field lk/sel/selection.json 'd["status"]' 2>/dev/null)
mv data/cx/test.safetensors test.keep2 && mkfifo data/cx/test.safetensors
timeout 20 sb-test -q -s lk/sel/selection.json -d data -o lk/sel/test lk/runs >lk/out 2>lk/err
rc2=$?
rm data/cx/test.safetensors && mv test.keep2 data/cx/test.safetensors
[ $rc -eq 0 ] && [ "$st" = M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED ] &&
	[ "$(field lk/sel/selection.json 'd["validation_logs"][0]["path"].startswith("../runs/")')" = True ] &&
	! grep -q "refused by the guard" lk/err && [ $rc2 -ne 1 ] && [ $rc2 -ne 2 ]
t_result $? "linked val.ndjson files: authorised, listed in their run directories, past the guard (freeze exit $rc, $st; sb-test exit $rc2: $(head -c 200 lk/err))"
# --expect-cells as sb-freeze's getopt_long reads it: abbreviated, with '=', a leading zero
# (16); the guard reads the recorded argv the same way (it once refused these as
# selection-derivation, comparing the text "016" with 16)
for form in "--expect=016" "--expect-c 16"; do
	rm -rf ab && mkdir -p ab/sel
	# shellcheck disable=SC2086
	sb-freeze -q --rule m3_confirmation --switch-map map.inc $form -o ab/sel/selection.json runs/*/val.ndjson \
		>ab/freeze.out 2>ab/freeze.err
	rc=$?
	st=$(field ab/sel/selection.json 'd["status"], d["rule"]["expected_cells"]' 2>/dev/null)
	mv data/cx/test.safetensors test.keep2 && mkfifo data/cx/test.safetensors
	timeout 20 sb-test -q -s ab/sel/selection.json -d data -o ab/sel/test runs >ab/out 2>ab/err
	rc2=$?
	rm data/cx/test.safetensors && mv test.keep2 data/cx/test.safetensors
	[ $rc -eq 0 ] && [ "$st" = "('M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED', 16)" ] &&
		! grep -q "refused by the guard" ab/err && [ $rc2 -ne 1 ] && [ $rc2 -ne 2 ]
	t_result $? "sb-freeze $form: authorised with expected_cells 16, past the guard (freeze exit $rc, $st; sb-test exit $rc2: $(head -c 200 ab/err))"
done
# accepted when all is in order: the real read of the 16 cells
fresh
sbtest
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '"kind":"test.cell"' s/test/test.ndjson)" = 16 ] && grep -q '"status":"completed"' s/selection.reads.ndjson
t_result $? "all in order: sb-test reads the 16 planned cells (exit $rc; $(head -c 200 s/err))"
sbtest
refused_second=$?
[ $refused_second -eq 1 ] && grep -q "single-read\|output-fresh" s/err
t_result $? "and a second read is refused as before (exit $refused_second)"
# sb-a8 m3 on the read
sb-a8 -q m3 --md m3.md runs/*/val.ndjson s/test/test.ndjson >m3.out 2>m3.err
rc=$?
tail -n 1 m3.out | grep -q '"analysis":"m3","verdict":"\(CONFIRMED\|NOT_CONFIRMED:[a-z -]*\)","units":4,' && grep -q "M3 verdict" m3.md &&
	[ "$(grep -c '"kind":"a8.m3.test"' m3.out)" = 12 ]
t_result $? "sb-a8 m3 on the read: 4 units, a verdict, 12 a8.m3.test means (4 methods x (all + 2 archs)) (exit $rc; $(head -c 200 m3.err))"
t_done
