#!/usr/bin/env bash
# sb-freeze with reruns of the same cell in a later log (PROTOCOL A6 step 2: "Keep rows with
# status completed and a matching tier. For each (dataset, method, seed) the later file wins"):
# the row filter comes first, so a later run whose training did not complete displaces nothing;
# a later completed run still wins, even when its log cannot be used (an epoch not evaluated, no
# eval.done: integrity problems, the key is then left without a cell). Both rules; for
# m3_confirmation also a stale switching cell that a later run replaced, which must not be held
# against the switch map. Run directories come from tests/fixtures/guard/lib.sh (stand-in
# checkpoints in sb-eval's log format).
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/guard/lib.sh"
cd "$T"
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
# the entries of "cells" for METHOD, SEED: "RUNS:included:reason" in log order (RUNS: the runs
# directory of the cell's log, whose path is relative to the selection's directory)
cellsof() { # selection method seed
	field "$1" '" ".join("%s:%s:%s" % (d["validation_logs"][c["log"]]["path"].split("/")[1], c["included"],
	  (c["reason"] or "-").split(",")[0].replace(" ", "_")) for c in d["cells"] if c["method"] == sys.argv[3] and c["seed"] == int(sys.argv[4]))' "$2" "$3"
}
# the selection of task t: "METHOD MEAN SEEDS" (the mean to 6 significant digits)
sel() { field "$1" '"%s %.6g %s" % (d["selected"]["t"]["topk_method"], d["selected"]["t"]["val_accuracy"], d["selected"]["t"]["seeds"])'; }

# ---- rule topk_mean_val_acc: seeds 0-1, topk_softmax_025 at 0.8, topk_softmax_0125 at 0.7 ----
base() { # dir [status of topk_softmax_025 seed 1]
	mkcell "$1" t topk_softmax_025 0 "0.5 0.8" >/dev/null
	mkcell "$1" t topk_softmax_025 1 "0.5 0.8" "${2:-completed}" >/dev/null
	mkcell "$1" t topk_softmax_0125 0 "0.5 0.7" >/dev/null
	mkcell "$1" t topk_softmax_0125 1 "0.5 0.7" >/dev/null
}
freeze() { # dir logs...: freeze with --min-seeds 2 into dir/sel.json
	local d=$1
	shift
	mkdir -p "$d"
	sb-freeze -q --min-seeds 2 -o "$d/sel.json" "$@" >"$d/out" 2>"$d/err"
}

# 1. a later failed rerun does not displace the earlier completed run
base a1
mkcell a2 t topk_softmax_025 1 "0.5 0.3" failed_nonfinite_loss >/dev/null
freeze a a1/*/val.ndjson a2/*/val.ndjson
rc=$?
got=$(sel a/sel.json 2>&1) cs=$(cellsof a/sel.json topk_softmax_025 1 2>&1)
[ $rc -eq 0 ] && [ "$got" = "topk_softmax_025 0.8 [0, 1]" ] &&
	[ "$cs" = "a1:True:- a2:False:training_status_is_'failed_nonfinite_loss'" ] && ! grep -q superseded a/err
t_result $? "a later failed rerun of topk_softmax_025 seed 1: selected 'topk_softmax_025 0.8 [0, 1]' (the protocol's), got '$got'; seed 1's cells 'a1:True:- a2:False:training_status_is_...' got '$cs' (exit $rc)" "$(head -c 300 a/err)"
grep -q "a2/.*excluded: training status is 'failed_nonfinite_loss'" a/err &&
	[ "$(field a/sel.json '[l["cells_used"] for l in d["validation_logs"]]')" = "[1, 1, 1, 1, 0]" ]
t_result $? "and it is warned about as excluded for its status; cells_used 1,1,1,1 of a1, 0 of a2 (got $(field a/sel.json '[l["cells_used"] for l in d["validation_logs"]]'))"

# 2. a later completed rerun still supersedes the earlier completed run
base b1
mkcell b2 t topk_softmax_025 1 "0.5 0.5" >/dev/null
freeze b b1/*/val.ndjson b2/*/val.ndjson
rc=$?
got=$(sel b/sel.json 2>&1) cs=$(cellsof b/sel.json topk_softmax_025 1 2>&1)
m=$(field b/sel.json '"%.6g" % [c["val_accuracy"] for c in d["all_topk_validation"] if c["method"] == "topk_softmax_025"][0]' 2>&1)
[ $rc -eq 0 ] && [ "$got" = "topk_softmax_0125 0.7 [0, 1]" ] && [ "$m" = 0.65 ] &&
	[ "$cs" = "b1:False:superseded_by_cell_$(ls b2)_of_validation_logs[4]_(a_later_log) b2:True:-" ] &&
	[ "$(field b/sel.json 'd["validation_logs"][4]["path"]')" = "../b2/$(ls b2)/val.ndjson" ]
t_result $? "a later completed rerun (0.5) of topk_softmax_025 seed 1 supersedes the earlier (0.8): mean 0.65 (got $m), selected 'topk_softmax_0125 0.7 [0, 1]' got '$got'; cells '$cs' (exit $rc)" "$(head -c 300 b/err)"

# 3. a later failed rerun of a cell whose earlier run failed too: both excluded for their own
# status, neither superseded; topk_softmax_025 keeps one seed, under --min-seeds 2
base c1 failed_nonfinite_loss
mkcell c2 t topk_softmax_025 1 "0.5 0.3" incomplete >/dev/null
freeze c c1/*/val.ndjson c2/*/val.ndjson
rc=$?
got=$(sel c/sel.json 2>&1) cs=$(cellsof c/sel.json topk_softmax_025 1 2>&1)
ne=$(tail -n 1 c/out | grep -o '"n_excluded":[0-9]*')
[ $rc -eq 0 ] && [ "$got" = "topk_softmax_0125 0.7 [0, 1]" ] && [ "$ne" = '"n_excluded":2' ] &&
	[ "$cs" = "c1:False:training_status_is_'failed_nonfinite_loss' c2:False:training_status_is_'incomplete'" ] &&
	! grep -q superseded c/err
t_result $? "two failed runs of topk_softmax_025 seed 1: each excluded for its own status, not superseded: cells '$cs'; selected 'topk_softmax_0125 0.7 [0, 1]' got '$got'; $ne (want 2) (exit $rc)" "$(head -c 300 c/err)"

# 4. an earlier failed run, a later completed one: the later is used
base d1 failed_nonfinite_loss
mkcell d2 t topk_softmax_025 1 "0.5 0.9" >/dev/null
freeze d d1/*/val.ndjson d2/*/val.ndjson
rc=$?
got=$(sel d/sel.json 2>&1) cs=$(cellsof d/sel.json topk_softmax_025 1 2>&1)
[ $rc -eq 0 ] && [ "$got" = "topk_softmax_025 0.85 [0, 1]" ] &&
	[ "$cs" = "d1:False:training_status_is_'failed_nonfinite_loss' d2:True:-" ]
t_result $? "an earlier failed, a later completed run: the later is used, mean (0.8+0.9)/2: selected 'topk_softmax_025 0.85 [0, 1]' got '$got'; cells '$cs' (exit $rc)" "$(head -c 300 d/err)"

# 5. integrity problems of a later completed run keep it the winner (the key is left without a
# cell): an epoch not evaluated, and a log without eval.done (training status unknown)
base e1
id=$(mkcell e2 t topk_softmax_025 1 "0.5 0.9")
sed -i '$s/"epochs":2,/"epochs":3,/' e2/$id/val.ndjson
freeze e e1/*/val.ndjson e2/*/val.ndjson
rc=$?
got=$(sel e/sel.json 2>&1) cs=$(cellsof e/sel.json topk_softmax_025 1 2>&1)
[ $rc -eq 0 ] && [ "$got" = "topk_softmax_0125 0.7 [0, 1]" ] && [ "${cs%%_of_validation_logs*}" = "e1:False:superseded_by_cell_$id" ] &&
	[ "${cs##* }" = "e2:False:2_of_3_epochs_evaluated" ]
t_result $? "a later completed run with an epoch not evaluated still supersedes the earlier: cells '$cs'; topk_softmax_025 left with 1 seed, selected 'topk_softmax_0125 0.7 [0, 1]' got '$got' (exit $rc)" "$(head -c 300 e/err)"
base f1
id=$(mkcell f2 t topk_softmax_025 1 "0.5 0.9")
sed -i '$d' f2/$id/val.ndjson
freeze f f1/*/val.ndjson f2/*/val.ndjson
rc=$?
got=$(sel f/sel.json 2>&1) cs=$(cellsof f/sel.json topk_softmax_025 1 2>&1)
[ $rc -eq 0 ] && [ "$got" = "topk_softmax_0125 0.7 [0, 1]" ] && [ "${cs%%_of_validation_logs*}" = "f1:False:superseded_by_cell_$id" ] &&
	[ "${cs##* }" = "f2:False:the_log_has_no_eval.done_record_(sb-eval_did_not_finish)" ]
t_result $? "a later log without eval.done (status unknown) still supersedes the earlier: cells '$cs'; selected 'topk_softmax_0125 0.7 [0, 1]' got '$got' (exit $rc)" "$(head -c 300 f/err)"

# ---- rule m3_confirmation: one group t/plain/compact, seed 0, the four methods ----
{
	echo "method mechanistic_switch entropy_switch"
	echo "set when task=t arch=plain tier=compact method=mechanistic_switch switch_epoch=2"
	echo "set when task=t arch=plain tier=compact method=entropy_switch switch_epoch=3"
} >map.inc
swcell() { # dir method switch_epoch [status]: a switching cell whose cell.json has switch_epoch
	mkcell "$1" t "$2" 0 "0.5 0.6 0.7" "${4:-completed}" compact "$3" >/dev/null
}
m3base() { # dir
	mkcell "$1" t softmax 0 "0.5 0.6 0.7" >/dev/null
	mkcell "$1" t topk_softmax_025 0 "0.5 0.6 0.7" >/dev/null
	swcell "$1" mechanistic_switch 2
	swcell "$1" entropy_switch 3
}
m3freeze() { # dir logs...
	local d=$1
	shift
	mkdir -p "$d"
	sb-freeze -q --rule m3_confirmation --switch-map map.inc --expect-cells 4 -o "$d/sel.json" "$@" >"$d/out" 2>"$d/err"
}
m3status() { field "$1" '"%s %d reasons; plan %d, missing %d" % (d["status"], len(d["status_reasons"]), len(d["test_plan"]), len(d["test_plan_missing"]))'; }
AUTH="M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED 0 reasons; plan 4, missing 0"

m3base m1
swcell m0 mechanistic_switch 1 # an earlier run under an older map: switch epoch 1
m3freeze m m0/*/val.ndjson m1/*/val.ndjson
rc=$?
st=$(m3status m/sel.json 2>&1) cs=$(cellsof m/sel.json mechanistic_switch 0 2>&1)
[ $rc -eq 0 ] && [ "$st" = "$AUTH" ] && [ "${cs%%_of_validation_logs*}" = "m0:False:superseded_by_cell_$(ls m1 | grep mechanistic)" ] && [ "${cs##* }" = "m1:True:-" ]
t_result $? "m3: a stale switching cell (switch_epoch 1) replaced by a later one (2, the map's): want '$AUTH', got '$st'; cells '$cs' (exit $rc)" "$(field m/sel.json 'd["status_reasons"]' 2>&1 | head -c 300)"

m3base n1
mkcell n2 t softmax 0 "0.5 0.4 0.3" failed_nonfinite_loss >/dev/null
m3freeze n n1/*/val.ndjson n2/*/val.ndjson
rc=$?
st=$(m3status n/sel.json 2>&1) cs=$(cellsof n/sel.json softmax 0 2>&1)
[ $rc -eq 0 ] && [ "$st" = "$AUTH" ] && [ "$cs" = "n1:True:- n2:False:training_status_is_'failed_nonfinite_loss'" ]
t_result $? "m3: a later failed rerun of softmax seed 0 leaves the earlier completed run planned: want '$AUTH', got '$st'; cells '$cs' (exit $rc)" "$(field n/sel.json 'd["status_reasons"]' 2>&1 | head -c 300)"

m3base p1
swcell p2 entropy_switch 4 # a later completed run with a switch epoch that is not the map's
m3freeze p p1/*/val.ndjson p2/*/val.ndjson
rc=$?
st=$(m3status p/sel.json 2>&1)
n=$(field p/sel.json 'sum("switch_epoch 4, the switch map says 3" in r for r in d["status_reasons"])' 2>&1)
[ $rc -eq 0 ] && [ "${st%% *}" = M3_SWITCH_MAP_MISMATCH ] && [ "$n" = 1 ]
t_result $? "m3: the winner of its key is still held against the map: a later entropy_switch run with switch_epoch 4 gives M3_SWITCH_MAP_MISMATCH (got '$st'), 1 reason 'switch_epoch 4, the switch map says 3' (got $n)"
t_done
