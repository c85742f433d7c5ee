#!/usr/bin/env bash
# The guard attacked through the programs (DESIGN §5, PROTOCOL A6): each attack
# on a fresh copy of a frozen study must be refused by sb-test with exit 1 and a
# message naming the check, leaving the ledger unwritten; sb-freeze must refuse
# to freeze twice; sb-eval must refuse a test file. Each refusal has a control
# (the untouched copy) that gets past the guard, so a refusal is not vacuous.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/guard/lib.sh"

mkstudy "$T/pristine"
t_result $? "a study is frozen"

fresh() { rm -rf "$T/s"; cp -a "$T/pristine" "$T/s"; }
# attack NAME CHECK [extra sb-test args]: run sb-test on $T/s, expect exit 1 naming CHECK
attack() {
	local name=$1 check=$2
	shift 2
	sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/test" "$@" "$T/s/runs" >"$T/out" 2>"$T/err"
	local rc=$?
	[ $rc -eq 1 ] && grep -q "refused by the guard ($check)" "$T/err" && [ ! -s "$T/out" ] &&
		[ ! -e "$T/s/selection.reads.ndjson" ] && [ ! -e "$T/s/test" ]
	t_result $? "$name: exit 1, check $check, nothing written (exit $rc: $(head -c 300 "$T/err"))"
}
# control: the untouched study gets past every check (it then fails on the stand-in checkpoints, exit 3)
control() {
	local name=$1
	shift
	sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/test" "$@" "$T/s/runs" >"$T/out" 2>"$T/err"
	local rc=$?
	[ $rc -ne 1 ] && [ $rc -ne 2 ] && ! grep -q "refused by the guard" "$T/err"
	t_result $? "control: $name passes the guard (exit $rc: $(head -c 200 "$T/err"))"
}

fresh; control "the untouched study"

fresh
sed -i 's/"min_seeds": 3/"min_seeds": 2/' "$T/s/selection.json"
attack "selection.json edited (min_seeds 3 -> 2)" selection-hash
fresh
python3 - "$T/s/selection.json" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d["selected"]["guardtask"]["topk_method"] = "topk_softmax_05"
json.dump(d, open(p, "w"), indent=2)
PY
attack "selection.json: the selected ratio swapped, old hash kept" selection-hash
fresh
reseal_selection "$T/s/selection.json" 'd["frozen_at_unix_s"] += 3600'
# a resealed selection with a later freeze time passes the hash check (that is what a hash can do);
# what it cannot hide is the validation logs: they must still hash as recorded
control "a selection resealed by hand (the hash recomputes)"
# what a resealed selection cannot change either is what the rule gives on those logs:
# sb-test derives it again (lib/freeze_cells.h, the code sb-freeze froze with)
# reseal EXPR: apply the python statement EXPR to the selection d, recompute its hash
reseal() { reseal_selection "$T/s/selection.json" "$1"; } # tests/fixtures/guard/lib.sh
fresh
reseal 'd["selected"]["guardtask"]["topk_method"] = "topk_softmax_05"'
attack "resealed: the selected ratio swapped" selection-derivation
fresh
reseal 'd["selected"]["guardtask"]["val_accuracy"] += 0.01'
attack "resealed: the selected ratio's mean changed" selection-derivation
fresh
reseal 'c = [c for c in d["cells"] if c["included"]][0]; c["val_accuracy"] -= 0.05'
attack "resealed: an included cell's validation accuracy changed" selection-derivation
fresh
reseal 'c = [c for c in d["cells"] if c["included"]][0]; c["included"] = False; c["reason"] = "dropped"; c["selected_epoch"] = None; c["val_accuracy"] = None'
attack "resealed: an included cell marked excluded" selection-derivation
fresh
reseal 'd["cells"].pop()'
attack "resealed: a cell removed from the list" selection-derivation
fresh
reseal 'd["test_plan"].pop()'
attack "resealed: a test-plan entry dropped" selection-derivation
fresh
reseal 'd["test_plan"].append(dict(d["test_plan"][0]))'
attack "resealed: a test-plan entry repeated" selection-derivation
fresh
reseal 'd["test_plan"][0]["seed"] = 9'
attack "resealed: a test-plan entry's seed changed" selection-derivation
fresh
reseal 'd["selected"]["other"] = dict(d["selected"]["guardtask"])'
attack "resealed: a task added to the selection" selection-derivation
fresh
reseal 'c = [c for c in d["cells"] if c["included"]][0]; c["seed"] = 7'
attack "resealed: a cell's seed changed in the list" selection-derivation
fresh
reseal 'd["cells"][0]["tier"] = "base"'
attack "resealed: a cell's tier changed in the list" selection-derivation
fresh
reseal 'd["cells"][0]["note"] = "added"'
attack "resealed: a member added to a cell" selection-derivation
fresh
reseal 'd["rule"]["methods"] = ["topk_softmax_025"]'
attack "resealed: the rule's competing ratios narrowed" selection-derivation
fresh
reseal 'd["rule"]["min_seeds"] = 99'
attack "resealed: min_seeds raised past the seeds there are" selection-derivation
fresh
reseal 'd["all_topk_validation"][0]["val_accuracy"] += 0.01'
attack "resealed: a candidate's mean changed in all_topk_validation" selection-derivation
fresh
reseal 'd["unselected"].append({"task": "other", "reason": "made up"})'
attack "resealed: an unselected task added" selection-derivation
fresh
reseal 'd["test_plan_missing"].append({"task": "guardtask", "method": "softmax", "seed": 9})'
attack "resealed: a missing plan cell added" selection-derivation
fresh
reseal 'd["validation_logs"][0]["cells_used"] = 0'
attack "resealed: a log's cells_used changed" selection-derivation
fresh
reseal 'd["validation_logs"][0]["size_bytes"] -= 1'
attack "resealed: a log's recorded size changed" selection-derivation
fresh
reseal 'd["rule"]["name"] = "x"; d["selected"]["guardtask"]["topk_method"] = "topk_softmax_05"'
attack "resealed: the rule renamed (so that no derivation applies) and the ratio swapped" selection-format
fresh
reseal 'del d["rule"]'
attack "resealed: the rule removed" selection-format
fresh
reseal 'd["rule"]["budget_epochs"] = 2'
attack "resealed: a budget beside the patience (two bases)" selection-derivation
fresh
reseal 'd["rule"]["patience"] = 2**32 + 5'
attack "resealed: a patience beyond any budget (it once wrapped to 5)" selection-derivation
# the largest patience and budget sb-freeze takes (1000000) are valid selections
fresh
rm "$T/s/selection.json"
sb-freeze -q --min-seeds 3 --patience 1000000 -o "$T/s/selection.json" "$T"/s/runs/*/val.ndjson >/dev/null 2>&1
t_result $? "frozen with --patience 1000000"
control "a selection frozen with --patience 1000000"
fresh
printf 'not json\n' >"$T/s/selection.json"
attack "selection.json replaced by garbage" selection-format
fresh
rm "$T/s/selection.json"
attack "selection.json deleted" selection-exists

log=$(ls "$T"/s/runs/*/val.ndjson | head -n 1)
fresh
cat "$log" | tail -n 2 | head -n 1 >>"$log"
attack "a validation log appended to after the freeze" log-hash
fresh
touch -d "@$(($(date +%s) + 5))" "$log" # beyond PROTOCOL A6's 1.0 s allowance, however soon after the freeze
attack "a validation log touched after the freeze" log-mtime
fresh
rm "$log"
attack "a validation log deleted" log-present
fresh
id7=$(mkcell "$T/s/runs" guardtask softmax 7 "0.9 0.95 0.99")
touch -d "@$(($(date +%s) + 5))" "$T/s/runs/$id7/val.ndjson"
attack "an unlisted validation log added after the freeze" log-mtime
# an unlisted log older than the freeze (left out of it): the read goes on, with a warning naming it
fresh
id8=$(mkcell "$T/s/runs" guardtask softmax 8 "0.9 0.95 0.99")
touch -d "@$(($(date +%s) - 3600))" "$T/s/runs/$id8/val.ndjson"
control "an unlisted validation log from before the freeze"
grep -q "1 validation log(s) the selection does not list, so the freeze did not see them (the first: $T/s/runs/$id8/val.ndjson)" "$T/err"
t_result $? "and sb-test warns that the freeze did not see it ($(grep -m1 'does not list' "$T/err" | cut -c1-160))"
fresh; sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/test" "$T/s/runs" >/dev/null 2>"$T/err"
! grep -q "does not list" "$T/err"; t_result $? "no such warning when every log is listed"

# excluded cells and their reasons: a study with a cell superseded by a rerun in a later log
# and a failed cell; the guard compares each excluded cell's reason as well as its fate
mkdir -p "$T/x/runs"
cp -r "$TOP/tests/fixtures/guard/data" "$T/x/data"
mkgrid "$T/x/runs" guardtask "$ALL_METHODS" "0 1 2" _study_acc
early=$(ls -d "$T"/x/runs/guardtask.topk_softmax_0125.s0.*)
late=$(mkcell "$T/x/rerun" guardtask topk_softmax_0125 0 "0.45 0.55 0.65")
mkcell "$T/x/runs" guardtask sparsemax 3 "0.5 0.6 0.7" failed_nonfinite_loss >/dev/null
sleep 0.05
(cd "$T/x" && sb-freeze -q --min-seeds 3 -o selection.json runs/*/val.ndjson rerun/*/val.ndjson >/dev/null 2>&1)
t_result $? "a study with a superseded and a failed cell is frozen"
python3 - "$T/x/selection.json" "${early##*/}" "$late" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cells = {(c["cell_id"], c["log"]): c for c in d["cells"]}
ex = [c for c in d["cells"] if not c["included"]]
assert len(ex) == 2, ex
sup = [c for c in ex if c["cell_id"] == sys.argv[2]][0]
k = int(sup["reason"].split("validation_logs[")[1].split("]")[0])
assert sup["reason"] == "superseded by cell %s of validation_logs[%d] (a later log)" % (sys.argv[3], k), sup
assert d["validation_logs"][k]["path"] == "rerun/%s/val.ndjson" % sys.argv[3], d["validation_logs"][k]
failed = [c for c in ex if c["method"] == "sparsemax"][0]
assert failed["reason"] == "training status is 'failed_nonfinite_loss', not 'completed'", failed
assert all(c["reason"] is None for c in d["cells"] if c["included"])
PY
t_result $? "the superseded cell's reason names the later log by its index in validation_logs, not by a path"
# the study moved elsewhere and read from another directory: the reasons derive the same
cp -a "$T/x" "$T/moved"
(cd / && sb-test -q -s "$T/moved/selection.json" -d "$T/moved/data" -o "$T/moved/test" "$T/moved/runs" \
	>"$T/out" 2>"$T/err")
rc=$?
[ $rc -ne 1 ] && [ $rc -ne 2 ] && ! grep -q "refused by the guard" "$T/err"
t_result $? "control: the moved study with excluded cells passes the guard (exit $rc: $(head -c 200 "$T/err"))"
xattack() {
	rm -rf "$T/s"
	cp -a "$T/x" "$T/s"
	reseal_selection "$T/s/selection.json" "$2"
	attack "$1" selection-derivation
}
# a selection frozen before 2026-12-06 named the later log by the path sb-freeze was given:
# accepted when that path ends in the listed log's run directory and file name
rm -rf "$T/s" && cp -a "$T/x" "$T/s"
reseal_selection "$T/s/selection.json" 'c = [c for c in d["cells"] if c["reason"] and c["reason"].startswith("superseded")][0]
i = int(c["reason"].split("validation_logs[")[1].split("]")[0])
c["reason"] = "superseded by cell %s in /elsewhere/%s (a later log)" % (c["reason"].split()[3], d["validation_logs"][i]["path"].split("/", 1)[1])'
grep -q '"superseded by cell [^"]* in /elsewhere/' "$T/s/selection.json" &&
	sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/test" "$T/s/runs" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -ne 1 ] && [ $rc -ne 2 ] && ! grep -q "refused by the guard" "$T/err"
t_result $? "control: a superseded cell's reason in the old form (the later log by path) passes (exit $rc: $(head -c 200 "$T/err"))"
xattack "resealed: an old-form reason naming another run directory" \
	'c = [c for c in d["cells"] if c["reason"] and c["reason"].startswith("superseded")][0]; c["reason"] = "superseded by cell %s in /elsewhere/rerun/other/val.ndjson (a later log)" % c["reason"].split()[3]'
xattack "resealed: a superseded cell's reason changed" \
	'c = [c for c in d["cells"] if c["reason"] and c["reason"].startswith("superseded")][0]; c["reason"] = "dropped by hand"'
xattack "resealed: a failed cell's reason changed" \
	'c = [c for c in d["cells"] if c["method"] == "sparsemax" and not c["included"]][0]; c["reason"] = "superseded"'
xattack "resealed: an included cell given a reason" \
	'c = [c for c in d["cells"] if c["included"]][0]; c["reason"] = "kept"'

# the frozen checkpoints
fresh
ck=$(ls "$T"/s/runs/guardtask.softmax.s1.*/epoch-003.safetensors)
echo tampered >>"$ck"
attack "a planned full-budget checkpoint replaced" checkpoint-hash
fresh
rm "$(ls "$T"/s/runs/guardtask.sparsemax.s2.*/epoch-003.safetensors)"
attack "a planned full-budget checkpoint deleted" checkpoint-present
fresh
rm -r "$(ls -d "$T"/s/runs/guardtask.entmax15.s0.*)"
attack "a planned run directory deleted (its validation log with it)" log-present

# the single read: a read that started (even if it never finished) counts
fresh
sha=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sha256"])' "$T/s/selection.json")
printf '{"kind":"test.read","v":1,"status":"started","read":1,"time":"2026-01-01T00:00:00.000Z","argv":["sb-test","-s","selection.json","runs"],"selection_sha256":"%s","out_dir":"test","reread_reason":null}\n' "$sha" >"$T/s/selection.reads.ndjson"
cp "$T/s/selection.reads.ndjson" "$T/ledger.before"
sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/elsewhere" "$T/s/runs" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "refused by the guard (single-read)" "$T/err" && grep -q -- "--reread" "$T/err" &&
	cmp -s "$T/ledger.before" "$T/s/selection.reads.ndjson" && [ ! -e "$T/s/elsewhere" ]
t_result $? "a second read into another directory: exit 1, single-read, ledger unchanged (exit $rc: $(head -c 300 "$T/err"))"
control "a second read with --reread REASON" --reread "testing the reread path"
sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/x" --reread "" "$T/s/runs" >/dev/null 2>"$T/err"
[ $? -eq 2 ]
t_result $? "--reread needs a reason (exit 2)"
fresh
printf '{"kind":"test.read",\n' >"$T/s/selection.reads.ndjson"
sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/test" "$T/s/runs" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "refused by the guard (single-read)" "$T/err" && grep -q damaged "$T/err" && [ ! -e "$T/s/test" ]
t_result $? "a damaged ledger: exit 1, single-read (exit $rc: $(head -c 200 "$T/err"))"
fresh
mkdir -p "$T/s/test"
echo '{}' >"$T/s/test/test.ndjson"
sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/test" "$T/s/runs" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "refused by the guard (output-fresh)" "$T/err" && [ "$(cat "$T/s/test/test.ndjson")" = "{}" ]
t_result $? "an existing output is never overwritten (exit $rc)"

# freezing twice
fresh
before=$(sha256sum <"$T/s/selection.json")
sb-freeze -q --min-seeds 3 -o "$T/s/selection.json" "$T"/s/runs/*/val.ndjson >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "already exists" "$T/err" && grep -q -- "--force" "$T/err" && [ ! -s "$T/out" ] &&
	[ "$(sha256sum <"$T/s/selection.json")" = "$before" ]
t_result $? "freeze twice: exit 1, selection unchanged (exit $rc: $(head -c 200 "$T/err"))"
old_file=$(sha256sum "$T/s/selection.json" | cut -c1-64)
old_sha=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sha256"])' "$T/s/selection.json")
sb-freeze -q --force --min-seeds 3 -o "$T/s/selection.json" "$T"/s/runs/*/val.ndjson >"$T/out" 2>"$T/err"
rc=$?
python3 - "$T/s/selection.json" "$old_file" "$old_sha" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["forced"] is True, d["forced"]
assert d["replaced"]["file_sha256"] == sys.argv[2], d["replaced"]
assert d["replaced"]["sha256"] == sys.argv[3], d["replaced"]
assert d["replaced"]["test_reads"] == 0, d["replaced"]
assert "--force" in d["argv"]
PY
[ $rc -eq 0 ] && [ $? -eq 0 ]
t_result $? "freeze --force: exit 0, records forced and the replaced selection's hashes (exit $rc)"
control "the forced selection"
# a forced re-freeze after a test read does not reset the single read
fresh
printf '{"kind":"test.read","v":1,"status":"started","read":1,"time":"T","argv":["sb-test"],"selection_sha256":"%s","out_dir":"test"}\n' "$sha" >"$T/s/selection.reads.ndjson"
sb-freeze -q --force --min-seeds 3 -o "$T/s/selection.json" "$T"/s/runs/*/val.ndjson >/dev/null 2>&1
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["replaced"]["test_reads"] == 1' "$T/s/selection.json"
t_result $? "a forced freeze records that the replaced selection was read"
sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/t2" "$T/s/runs" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "refused by the guard (single-read)" "$T/err" && grep -q "replaced with --force" "$T/err"
t_result $? "re-freezing after a read does not allow a fresh read (exit $rc: $(head -c 200 "$T/err"))"

# two reads started together: one reads, the other waits for it and is refused (before, both
# found no earlier read in the ledger and both read: SB_TEST_HOLD_BEFORE_READ_MS holds the
# first between its single-read check and its "started" record)
fresh
SB_TEST_HOLD_BEFORE_READ_MS=1500 sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/ta" "$T/s/runs" >/dev/null 2>"$T/err.a" &
pa=$!
sleep 0.4
sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/tb" "$T/s/runs" >/dev/null 2>"$T/err.b"
rcb=$?
wait $pa
rca=$?
nstart=$(grep -c '"status":"started"' "$T/s/selection.reads.ndjson")
# (either may come first on a loaded machine: one reads, the other is refused)
{ { [ $rcb -eq 1 ] && grep -q "refused by the guard (single-read)" "$T/err.b" && [ $rca -ne 1 ]; } ||
	{ [ $rca -eq 1 ] && grep -q "refused by the guard (single-read)" "$T/err.a" && [ $rcb -ne 1 ]; }; } && [ "$nstart" = 1 ]
t_result $? "two sb-test started together: one read, the other refused single-read (exits $rca, $rcb); $nstart read(s) in the ledger" "$(head -c 300 "$T/err.b")"

# where flock is not supported (NFS: an exclusive lock needs a file opened for writing), the
# read goes on, unserialised, with a warning (it failed, exit 4, so no read was possible there).
# flock is made to fail by a preloaded stand-in (not under ASan, which must be loaded first).
if command -v cc >/dev/null && ! ldd "$(command -v sb-test)" 2>/dev/null | grep -q libasan; then
	printf '#include <errno.h>\nint flock(int fd, int op) { (void)fd; (void)op; errno = ENOLCK; return -1; }\n' >"$T/noflock.c"
	cc -shared -fPIC -o "$T/noflock.so" "$T/noflock.c"
	fresh
	LD_PRELOAD="$T/noflock.so" sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/tn" "$T/s/runs" >/dev/null 2>"$T/err"
	rc=$?
	[ $rc -ne 1 ] && [ $rc -ne 4 ] && grep -q "cannot lock the directory (No locks available): sb-test runs started together" "$T/err" &&
		grep -q '"status":"started"' "$T/s/selection.reads.ndjson"
	t_result $? "no flock on the selection's directory: a warning, and the read goes on (exit $rc)" "$(head -c 300 "$T/err")"
else
	t_result 0 "# SKIP no cc, or a sanitizer build (the flock stand-in cannot be preloaded)"
fi

# sb-eval pointed at a test file
fresh
run=$(ls -d "$T"/s/runs/guardtask.softmax.s0.*)
rm "$run/val.ndjson"
mkdir -p "$T/bad/guardtask"
cp "$T/s/data/guardtask/test.safetensors" "$T/bad/guardtask/pool.safetensors"
sb-eval -q -d "$T/bad" "$run" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "refusing to read the test split" "$T/err" && [ ! -e "$run/val.ndjson" ] &&
	[ "$(grep -c '"kind"' "$T/out")" = 1 ]
t_result $? "sb-eval on a test file renamed pool: exit 1, no val.ndjson (exit $rc: $(head -c 200 "$T/err"))"
rm "$T/bad/guardtask/pool.safetensors"*
ln -s "$T/s/data/guardtask/test.safetensors" "$T/bad/guardtask/pool.safetensors"
sb-eval -q -d "$T/bad" "$run" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "refusing to read the test split" "$T/err"
t_result $? "sb-eval on a symlink to a test file: exit 1 (exit $rc)"
sb-eval -q -d "$T/s/data" "$run" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -ne 1 ] && ! grep -q "refusing" "$T/err"
t_result $? "control: sb-eval on the real pool is not refused (exit $rc: $(head -c 200 "$T/err"))"

t_done
