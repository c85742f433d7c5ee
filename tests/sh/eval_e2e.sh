#!/usr/bin/env bash
# End to end on a small real task, through every stage that makes a result auditable:
# sb-fetch (Fashion-MNIST from Debian's dataset-fashion-mnist mirror) -> sb-train
# (2 methods x 3 seeds x 3 epochs, batch 64, on a 2,000-example cap of the pool) -> sb-eval ->
# sb-freeze -> sb-test -> sb-stats. Checks the records against each other: split
# sizes, bitmaps against accuracies, the reuse of unchanged epochs, the selection,
# the single read, and that sb-stats reads what the guard wrote.
# Skipped (with a note) when sb-train or sb-fetch is not built, or the mirror is absent.
. "$(dirname "$0")/../shlib.sh"

MIRROR=${SB_FMNIST_MIRROR:-/usr/share/datasets/fashion-mnist}
for p in sb-fetch sb-train sb-eval sb-freeze sb-test; do
	if [ ! -x "$TOP/bin/$p" ]; then
		t_result 0 "# SKIP $p is not built in this tree (the end-to-end test needs every stage)"
		t_done
	fi
done
if [ ! -r "$MIRROR/train-images-idx3-ubyte.gz" ]; then
	t_result 0 "# SKIP no Fashion-MNIST mirror at $MIRROR (Debian package dataset-fashion-mnist)"
	t_done
fi
cd "$T"

# popcount of a bitmap file
popcount() { od -An -v -tu1 "$1" | tr -s ' ' '\n' | awk 'NF { n = $1; while (n) { c += n % 2; n = int(n / 2) } } END { print c + 0 }'; }

sb-fetch -q -m "$MIRROR" -o data fashion_mnist >fetch.out 2>fetch.err
t_result $? "sb-fetch fashion_mnist from the mirror ($(tail -c 200 fetch.err))"

for m in softmax topk_softmax_025; do
	for s in 0 1 2; do
		# batch 64: 25 steps an epoch on the 1,600 training examples, enough to learn something
		printf '{"task":"fashion_mnist","method":"%s","seed":%d,"epochs":3,"limit":2000,"batch":64}\n' "$m" "$s"
	done
done >cells.ndjson
sb-train -q -d data -o runs -j 2 cells.ndjson >train.out 2>train.err
t_result $? "sb-train: 6 cells ($(tail -c 300 train.err))"
n_runs=$(ls -d runs/*/ 2>/dev/null | wc -l)
[ "$n_runs" -eq 6 ]
t_result $? "six run directories ($n_runs)"

sb-eval -q -d data runs/*/ >eval.out 2>eval.err
t_result $? "sb-eval ($(tail -c 300 eval.err))"
python3 - runs <<'PY'
import hashlib, json, os, sys
runs = sys.argv[1]
bad = []
for d in sorted(os.listdir(runs)):
    rd = os.path.join(runs, d)
    cell = json.load(open(os.path.join(rd, "cell.json")))
    recs = [json.loads(l) for l in open(os.path.join(rd, "val.ndjson"))]
    if recs[0]["kind"] != "run.meta":
        bad.append("%s: run.meta not first" % d)
    ep = [r for r in recs if r["kind"] == "eval.epoch"]
    done = [r for r in recs if r["kind"] == "eval.done"]
    if [r["epoch"] for r in ep] != [0, 1, 2] or len(done) != 1 or done[0]["train_status"] != "completed":
        bad.append("%s: epochs %s, done %s" % (d, [r["epoch"] for r in ep], done))
    for r in ep:
        if r["n_val"] != 400:  # round(0.2 * 2000): the cap of 2,000, then the split
            bad.append("%s: n_val %s" % (d, r["n_val"]))
        b = open(os.path.join(rd, r["correct_bits"]), "rb").read()
        if hashlib.sha256(b).hexdigest() != r["correct_sha256"] or len(b) != 50:
            bad.append("%s: bitmap hash or size" % d)
        ones = sum(bin(x).count("1") for x in b)
        if abs(ones / 400 - r["val_accuracy"]) > 1e-12:
            bad.append("%s: %d bits set for accuracy %s" % (d, ones, r["val_accuracy"]))
        ck = open(os.path.join(rd, "epoch-%03d.safetensors" % r["epochs_completed"]), "rb").read()
        if hashlib.sha256(ck).hexdigest() != r["checkpoint_sha256"]:
            bad.append("%s: checkpoint hash" % d)
        # PROTOCOL A8 M1's probe (docs/sb-eval.md): 128 examples, 50 keys, k = 13
        pe, pm, pt, pg = (r.get(f) for f in ("probe_dense_entropy", "probe_boundary_margin",
                                               "probe_tail_mass", "probe_gradient_topk_share"))
        if r.get("probe_examples") != 128 or None in (pe, pm, pt, pg) or not (
                0 < pe <= __import__("math").log(50) + 1e-9 and pm >= 0 and 0 < pt < 1 and 0 < pg <= 1):
            bad.append("%s: probe fields %s" % (d, [r.get("probe_examples"), pe, pm, pt, pg]))
        if not (0 < r["attention_density"] <= 1) or r["attention_entropy"] is None:
            bad.append("%s: attention statistics %s %s" % (d, r["attention_density"], r["attention_entropy"]))
    # run.meta: every input with its true size (the pool and checkpoints were once 0)
    for i in recs[0]["inputs"]:
        if i["size_bytes"] != os.path.getsize(i["path"]):
            bad.append("%s: run.meta size_bytes %s of %s, the file has %s" % (d, i["size_bytes"], i["path"], os.path.getsize(i["path"])))
    if len(recs[0]["inputs"]) != 5:  # cell.json, the pool, three checkpoints
        bad.append("%s: run.meta inputs %s" % (d, [i["path"] for i in recs[0]["inputs"]]))
    if "n_val" in cell and cell["n_val"] != 400:
        bad.append("%s: cell.json n_val %s" % (d, cell["n_val"]))
    # softmax keeps every key (density 1 up to probabilities that underflow below 1e-7);
    # top-k 0.25 keeps ceil(0.25 * 50) = 13 of 50 keys per row: density at most 0.26
    if cell["method"] == "softmax" and any(r["attention_density"] < 0.99 for r in ep):
        bad.append("%s: softmax density %s" % (d, [r["attention_density"] for r in ep]))
    if cell["method"] == "topk_softmax_025" and any(not (0.2 < r["attention_density"] <= 13 / 50 + 1e-12) for r in ep):
        bad.append("%s: top-k density %s" % (d, [r["attention_density"] for r in ep]))
for b in bad:
    print("# " + b)
sys.exit(1 if bad else 0)
PY
t_result $? "val.ndjson: 3 epochs each, n_val 400, bitmaps agree with accuracies, checkpoint hashes, probe features, run.meta sizes"
python3 - <<'PY'
import glob, json, os, sys
m = json.loads(open("eval.out").readline())
v = json.loads(open(glob.glob("runs/*/val.ndjson")[0]).readline())
paths = [i["path"] for i in m["inputs"]]
want = len(glob.glob("runs/*/cell.json")) + 1 + len(glob.glob("runs/*/epoch-00?.safetensors"))  # the pool once
ok = (m["kind"] == "run.meta" and len(paths) == want == 6 + 1 + 18 and paths.count("data/fashion_mnist/pool.safetensors") == 1
      and all(i["size_bytes"] == os.path.getsize(i["path"]) for i in m["inputs"])
      and m["threads"] == v["threads"] and m["device"] == v["device"])
print("# stdout run.meta: %d inputs (want %d), threads %s (val.ndjson %s)" % (len(paths), want, m["threads"], v["threads"]))
sys.exit(0 if ok else 1)
PY
t_result $? "stdout's run.meta: each cell.json, the pool once, every checkpoint, with true sizes; the evaluation's device and threads"
stat -c %Y runs/*/val.ndjson >mtimes.before
sleep 1.1
strace_ok=0
if command -v strace >/dev/null && strace -f -qq -o /dev/null true 2>/dev/null; then strace_ok=1; fi
if [ $strace_ok -eq 1 ]; then
	strace -f -qq -e trace=%file -o eval.trace sb-eval -q -d data runs/*/ >/dev/null 2>&1
else
	sb-eval -q -d data runs/*/ >/dev/null 2>&1
fi
rc=$?
stat -c %Y runs/*/val.ndjson >mtimes.after
[ $rc -eq 0 ] && cmp -s mtimes.before mtimes.after && { [ $strace_ok -eq 0 ] || ! grep -v execve eval.trace | grep -q pool.safetensors; }
t_result $? "sb-eval again on unchanged runs: no file rewritten, no dataset opened (exit $rc)"

sleep 0.05
sb-freeze -q --min-seeds 3 -o study/selection.json runs/*/val.ndjson >freeze.out 2>freeze.err
t_result $? "sb-freeze ($(tail -c 300 freeze.err))"
python3 -c '
import json, sys
d = json.load(open("study/selection.json"))
assert d["selected"]["fashion_mnist"]["topk_method"] == "topk_softmax_025", d["selected"]
assert d["selected"]["fashion_mnist"]["n_seeds"] == 3
assert len(d["test_plan"]) == 6, len(d["test_plan"])   # softmax and the ratio, 3 seeds each
assert len(d["test_plan_missing"]) == 9                  # sparsemax, entmax15, HAE were not trained
'
t_result $? "selection: topk_softmax_025 (the only ratio), 6 planned cells, 9 missing"

# a planned cell's cell.json edited in a field its id does not cover: refused before the read
# counts (before, found when the model was built, after the ledger's "started")
cj=runs/$(python3 -c 'import json; print(json.load(open("study/selection.json"))["test_plan"][0]["cell_id"])')/cell.json
cp "$cj" cell.json.orig
python3 - "$cj" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["classes"] = 99
json.dump(c, open(sys.argv[1], "w"))
PY
sb-test -q -s study/selection.json -d data -o study/test-edited runs >/dev/null 2>err
rc=$?
[ $rc -eq 3 ] && grep -q "is not the cell.json its validation log was evaluated with" err && [ ! -e study/selection.reads.ndjson ] && [ ! -e study/test-edited ]
t_result $? "an edited cell.json (classes) is refused before the read: exit $rc, no ledger" "$(cat err)"
cp cell.json.orig "$cj"

# a selection frozen from sb-eval's stdout (one log of all six runs, whose run.meta lists each
# run's cell.json): each planned cell is compared with its own cell.json, not the first listed
mkdir -p study2
sb-freeze -q --min-seeds 3 -o study2/selection.json eval.out >/dev/null 2>err
t_result $? "sb-freeze of sb-eval's stdout (six runs in one log)" "$(cat err)"
python3 - "$cj" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["classes"] = 99
json.dump(c, open(sys.argv[1], "w"))
PY
sb-test -q -s study2/selection.json -d data -o study2/test-edited runs >/dev/null 2>err
rc=$?
[ $rc -eq 3 ] && grep -q "is not the cell.json its validation log was evaluated with" err && [ ! -e study2/selection.reads.ndjson ]
t_result $? "... an edited cell.json is still refused before the read: exit $rc" "$(cat err)"
cp cell.json.orig "$cj"
sb-test -q -s study2/selection.json -d data -o study2/test runs >/dev/null 2>err
rc=$?
t_result $rc "... and the selection is read (exit $rc; before: refused, another run's cell.json compared)" "$(cat err)"

sb-test -q -s study/selection.json -d data -o study/test runs >test.out 2>test.err
t_result $? "sb-test: the read ($(tail -c 300 test.err))"
python3 - <<'PY'
import hashlib, json, sys
sel = json.load(open("study/selection.json"))
recs = [json.loads(l) for l in open("study/test/test.ndjson")]
assert recs[0]["kind"] == "run.meta" and recs[1]["kind"] == "test.read", [r["kind"] for r in recs[:2]]
assert recs[1]["read"] == 1 and recs[1]["selection_sha256"] == sel["sha256"]
cells = [r for r in recs if r["kind"] == "test.cell"]
assert len(cells) == 6, len(cells)
for c in cells:
    assert c["n_test"] == 10000, c["n_test"]
    assert c["selection_sha256"] == sel["sha256"]
    b = open("study/test/" + c["correct_bits"], "rb").read()
    assert hashlib.sha256(b).hexdigest() == c["correct_sha256"]
    assert abs(sum(bin(x).count("1") for x in b) / 10000 - c["test_accuracy"]) < 1e-12
    assert 0.2 < c["test_accuracy"] <= 1, c["test_accuracy"]   # well above chance (0.1): the model learned
    assert c["checkpoint_sha256"] in {p["checkpoint_sha256"] for p in sel["test_plan"]}
led = [json.loads(l) for l in open("study/selection.reads.ndjson")]
assert [l["status"] for l in led] == ["started", "completed"], led
assert led[1]["output_sha256"] == hashlib.sha256(open("study/test/test.ndjson", "rb").read()).hexdigest()
PY
t_result $? "test.ndjson: test.read, 6 test.cell of 10,000 examples, bitmaps agree, ledger completed with the output's hash"
sb-test -q -s study/selection.json -d data -o study/test-again runs >/dev/null 2>err
rc=$?
[ $rc -eq 1 ] && grep -q "single-read" err && [ ! -e study/test-again ]
t_result $? "a second read is refused (exit $rc)"

if [ -x "$TOP/bin/sb-stats" ]; then
	sb-stats --min-seeds 3 runs/*/val.ndjson study/test/test.ndjson >stats.out 2>stats.err
	rc=$?
	grep -q '"kind":"stats.paired"' stats.out && grep -q '"test_read"' stats.out
	t_result $? "sb-stats reads the validation logs and the test read (exit $rc)"
fi

# a log made with --no-probe is evaluated again by a run that probes (its records lack the
# features sb-a8 m1 needs; they used to be reused as unchanged); and a --no-probe run reuses a
# probed log as it is
r=$(ls -d runs/*/ | head -n 1)
cp -r "$r" noprobe
rm -f noprobe/val.ndjson
sb-eval -q --no-probe -d data noprobe >/dev/null 2>&1 && ! grep -q '"probe_examples"' noprobe/val.ndjson &&
	sb-eval -q -d data noprobe >/dev/null 2>np.err &&
	[ "$(grep '"kind":"eval.epoch"' noprobe/val.ndjson | grep -c '"probe_examples":128')" = 3 ]
t_result $? "a --no-probe log, then sb-eval without it: every epoch gets its probe features ($(head -c 200 np.err))"
cp noprobe/val.ndjson np.keep
sb-eval -q --no-probe -d data noprobe >/dev/null 2>&1 && cmp -s np.keep noprobe/val.ndjson
t_result $? "a probed log, then sb-eval --no-probe: reused as it is"

# a checkpoint train.ndjson recorded, deleted: sb-eval says which epoch it cannot evaluate
r=$(ls -d runs/*/ | head -n 1)
cp -r "$r" lost
rm -f lost/val.ndjson lost/epoch-002.safetensors lost/epoch-002.safetensors.sha256
sb-eval -q -d data lost >lost.out 2>lost.err
rc=$?
[ $rc -eq 0 ] && grep -q "train.ndjson records epoch 2's checkpoint (epoch-002.safetensors), which is missing" lost.err &&
	[ "$(grep -c '"kind":"eval.epoch"' lost/val.ndjson)" = 2 ] && ! grep -q '"epoch":1,' lost/val.ndjson
t_result $? "a recorded checkpoint that is gone: sb-eval warns naming epoch 2, and evaluates epochs 1 and 3 (exit $rc: $(head -c 300 lost.err))"
rm -f lost/val.ndjson lost/train.ndjson
sb-eval -q -d data lost >lost.out 2>lost.err
rc=$?
[ $rc -eq 0 ] && grep -q "train.ndjson records no checkpoint hashes" lost.err
t_result $? "without train.ndjson: sb-eval warns that only the sidecars check the checkpoints (exit $rc: $(head -c 300 lost.err))"
# an evaluated run whose cell.json is edited (seed 0 -> 5; its epochs unchanged, so nothing
# would be evaluated): refused, naming the file, val.ndjson left as it was, no records
r0=$(ls -d runs/*.s0.*/ | head -n 1)
cp -r "$r0" edited
sed -i 's/"seed":0,/"seed":5,/' edited/cell.json
cp edited/val.ndjson edited.before
sb-eval -q -d data edited >edited.out 2>edited.err
rc=$?
[ $rc -eq 3 ] && grep -q "^sb-eval: edited/cell.json: cell_id '[^']*' is not the one its fields hash to" edited.err &&
	cmp -s edited.before edited/val.ndjson && ! grep -q '"kind":"eval' edited.out
t_result $? "an edited cell.json of an evaluated run: exit 3 naming edited/cell.json, val.ndjson unchanged, no records (exit $rc: $(head -c 300 edited.err))"
# the fields sb-train derived (parameter_count, seq_len, classes, n_train, modality) are checked
# too when the run is evaluated: each edit, on a run whose val.ndjson is gone, is exit 3 naming
# the field, and nothing is written
for edit in 's/"parameter_count":\([0-9]*\)/"parameter_count":1\1/' 's/"seq_len":\([0-9]*\)/"seq_len":9\1/' \
	's/"classes":10/"classes":11/' 's/"n_train":\([0-9]*\)/"n_train":1\1/' 's/"modality":"image"/"modality":"text"/'; do
	rm -rf derived && cp -r "$r0" derived && rm -f derived/val.ndjson derived/val-correct-*.bits
	sed -i "$edit" derived/cell.json
	field=$(printf '%s' "$edit" | sed 's/^s\/"\([a-z_]*\)".*/\1/')
	sb-eval -q -d data derived >derived.out 2>derived.err
	rc=$?
	[ $rc -eq 3 ] && grep -q "derived.*$field" derived.err && [ ! -e derived/val.ndjson ] && ! grep -q '"kind":"eval' derived.out
	t_result $? "an edited $field in cell.json: exit 3 naming it, nothing written (exit $rc: $(head -c 200 derived.err))"
done
# a run trained on its whole pool (val_fraction 0, which sb-train allows on a pool task):
# sb-eval says there is nothing to evaluate (exit 3), not that the cell is out of range
printf '{"task":"fashion_mnist","method":"softmax","seed":0,"epochs":1,"limit":64,"batch":32,"val_fraction":0}\n' >vf0.ndjson
sb-train -q -d data -o runs_vf0 -j 1 vf0.ndjson >/dev/null 2>vf0.err
sb-eval -q -d data runs_vf0/* >/dev/null 2>vf0.err
rc=$?
[ $rc -eq 3 ] && grep -q "no validation examples (val_fraction 0: the run trained on its whole pool): nothing to evaluate" vf0.err &&
	[ ! -e "$(ls -d runs_vf0/* | head -n 1)/val.ndjson" ]
t_result $? "a run with val_fraction 0: nothing to evaluate, said so (exit $rc: $(head -c 200 vf0.err))"
t_done
