#!/usr/bin/env bash
# sb-a8 m3's verdict (docs/sb-a8.md) on fixtures: validation logs and a test.ndjson written
# here with chosen times to target and test accuracies, for 24 units (2 architectures x 3
# tiers x 4 seeds): one that confirms, and one failing each clause alone (the verdict must
# name exactly that clause). Also sb-a8 m3map's refusals and its map against NumPy on
# fixture records (tests/golden/a8/m3map_check.py).
. "$(dirname "$0")/../shlib.sh"
cd "$T"
# fix CASE: writes CASE.val.ndjson and CASE.test.ndjson. Per unit: dense, mech and simple
# times to target (accuracy 0.5 before, 0.9 from that epoch on; K = 10 epochs; dense
# reaches 0.95 x 0.9 at its time) and the test accuracies.
fix() {
	python3 - "$1" <<'PY'
import json, sys
case = sys.argv[1]
val, test = open(case + ".val.ndjson", "w"), open(case + ".test.ndjson", "w")
K = 10
def run(task, arch, tier, method, seed, ttt, tacc):
    cid = "%s.%s.s%d.%s.%s" % (task, method, seed, arch, tier)
    for e in range(K):
        val.write(json.dumps({"kind": "eval.epoch", "v": 1, "cell_id": cid, "task": task, "method": method, "seed": seed,
                              "arch": arch, "tier": tier, "epoch": e, "n_val": 100, "val_accuracy": 0.9 if e + 1 >= ttt else 0.5}) + "\n")
    val.write(json.dumps({"kind": "eval.done", "v": 1, "cell_id": cid, "task": task, "method": method, "seed": seed,
                          "arch": arch, "tier": tier, "epochs": K, "epochs_evaluated": K, "train_status": "completed"}) + "\n")
    test.write(json.dumps({"kind": "test.cell", "v": 1, "cell_id": cid, "task": task, "method": method, "seed": seed,
                           "arch": arch, "tier": tier, "test_accuracy": tacc}) + "\n")
i = 0
for arch in ("plain", "local_hybrid"):
    for tier in ("compact", "deep", "wide"):
        for seed in (10, 11, 12, 13):
            d, m, s, td, tm = 8, 4, 6, 0.80, 0.801
            if case == "median":       # half the units gain nothing: median reduction 0
                m, s = (8 if i % 2 else 7), 8
            if case == "simple":       # the simple schedule reaches the target first
                s = 3
            if case == "final":        # mechanistic 0.01 below softmax on the test read
                tm = 0.79
            if case == "benefit":      # no benefit in local_hybrid
                m, s = (8 if arch == "local_hybrid" else 4), 8
            run("t", arch, tier, "softmax", seed, d, td)
            run("t", arch, tier, "topk_softmax_025", seed, d, td)
            run("t", arch, tier, "mechanistic_switch", seed, m, tm)
            run("t", arch, tier, "median_switch", seed, s, td)
            i += 1
PY
}
verdict() { # case want
	fix "$1"
	sb-a8 -q m3 --resamples 2000 "$1.val.ndjson" "$1.test.ndjson" >"$1.out" 2>"$1.err"
	local rc=$? v
	v=$(tail -n 1 "$1.out" | sed -n 's/.*"verdict":"\([^"]*\)".*/\1/p')
	[ $rc -eq 0 ] && [ "$v" = "$2" ]
	t_result $? "$1: verdict '$v' (want '$2', exit $rc)" "$(tail -c 300 "$1.err")"
}
verdict confirm "CONFIRMED"
verdict median "NOT_CONFIRMED: median-reduction"
verdict simple "NOT_CONFIRMED: bootstrap-lower-bounds"
verdict final "NOT_CONFIRMED: final-test-accuracy"
verdict benefit "NOT_CONFIRMED: benefit-archs-tiers"
python3 - confirm.out <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
v = recs[-1]
assert v["units"] == 24 and v["simple_schedule"] == "median_switch" and v["bootstrap_seed"] == 260827, v
assert abs(v["median_reduction"] - 0.5) < 1e-12 and abs(v["final_test_accuracy_diff"] - 0.001) < 1e-12, v
assert "ours" in v["verdict_rule"]
assert "published_outcome" in v and v["published_outcome"] is None, v  # PROTOCOL A8 reports no M3 outcome
t = {(r["method"], r["arch"], r["tier"]): r for r in recs if r["kind"] == "a8.m3.test"}
assert t[("mechanistic_switch", "all", "all")]["runs"] == 24 and abs(t[("mechanistic_switch", "all", "all")]["mean_test_accuracy"] - 0.801) < 1e-12
assert t[("softmax", "plain", "deep")]["runs"] == 4 and len(t) == 4 * 7, len(t)
PY
t_result $? "confirm: 24 units, median reduction 0.5, test difference +0.001, test means per method, arch and tier, no published outcome"
# without the test read, or with two simple schedules: refused, saying why
sb-a8 -q m3 confirm.val.ndjson >/dev/null 2>err; rc=$?
[ $rc -eq 3 ] && grep -q "with their test accuracies" err; t_result $? "m3 without test.cell records: exit 3 ($rc)"
sed 's/median_switch/entropy_switch/g' confirm.val.ndjson | grep entropy_switch >two.ndjson
sb-a8 -q m3 confirm.val.ndjson two.ndjson confirm.test.ndjson >/dev/null 2>err; rc=$?
[ $rc -eq 3 ] && grep -q "two simple schedules" err; t_result $? "m3 with runs of two simple schedules: exit 3 ($rc)"

# a rerun of every cell (its logs again, in a later file): the test accuracies belong to the
# latest runs whatever the order of the files, test.ndjson first or last
cp confirm.val.ndjson rerun.val.ndjson
sb-a8 -q m3 --resamples 2000 confirm.val.ndjson rerun.val.ndjson confirm.test.ndjson >last.out 2>last.err; rc1=$?
sb-a8 -q m3 --resamples 2000 confirm.test.ndjson confirm.val.ndjson rerun.val.ndjson >first.out 2>first.err; rc2=$?
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && grep -q '"verdict":"CONFIRMED"' first.out &&
	cmp -s <(grep -v '"kind":"run.meta"' last.out) <(grep -v '"kind":"run.meta"' first.out)
t_result $? "m3 with reruns: the same records with test.ndjson first or last (exit $rc1/$rc2: $(tail -c 200 first.err))"

# ---- m3map ----
python3 - <<'PY'
import json, random
random.seed(3)
def recs(f, tasks, archs, tiers, seeds, K):
    for t in tasks:
        for a in archs:
            for ti in tiers:
                for m in ("softmax", "topk_softmax_025"):
                    for s in seeds:
                        for e in range(K):
                            f.write(json.dumps(dict(kind="eval.epoch", v=1, task=t, method=m, seed=s, arch=a, tier=ti, epoch=e,
                                n_val=700 + 100 * len(t), val_accuracy=random.random(), attention_entropy=random.random(),
                                **{p: random.random() * 3 for p in ("probe_dense_entropy", "probe_boundary_margin", "probe_tail_mass", "probe_gradient_topk_share")})) + "\n")
                        f.write(json.dumps(dict(kind="eval.done", v=1, task=t, method=m, seed=s, arch=a, tier=ti, epochs=K,
                                                epochs_evaluated=K, train_status="completed")) + "\n")
recs(open("traj.ndjson", "w"), ["mnist", "usps", "cifar100", "twenty_news", "kmnist"], ["plain", "local_hybrid"], ["compact", "deep", "wide"], [0, 1], 8)
recs(open("conf.ndjson", "w"), ["emnist_balanced", "k49", "svhn"], ["plain", "local_hybrid"], ["compact", "deep", "wide"], [10, 11, 12], 5)
PY
sb-a8 -q m1 traj.ndjson >m1.ndjson
for s in median_switch early_accuracy_switch entropy_switch; do
	printf '{"kind":"a8.verdict","v":1,"analysis":"m2","strongest_simple":"%s"}\n' $s >m2.ndjson
	sb-a8 -q m3map --trajectory m1.ndjson --m2 m2.ndjson --switch-epochs map.inc conf.ndjson >map.out 2>map.err
	rc=$?
	/usr/bin/python3 "$TOP/tests/golden/a8/m3map_check.py" m1.ndjson m2.ndjson map.inc conf.ndjson >np.out 2>&1
	[ $rc -eq 0 ] && [ $? -eq 0 ] && grep -q '# 18 groups checked, 30 discovery groups' np.out
	t_result $? "m3map with $s: 18 confirmation groups from 30 discovery groups agree with NumPy (exit $rc; $(tr '\n' ' ' <np.out | head -c 300))"
done
sha=$(sha256sum <map.inc | cut -c1-64)
t0=$(stat -c %Y.%y map.inc)
sleep 0.01
sb-a8 -q m3map --trajectory m1.ndjson --m2 m2.ndjson --switch-epochs map.inc conf.ndjson >map2.out
tail -n 1 map2.out | grep -q "\"verdict\":\"SWITCH_MAP_UNCHANGED\".*\"switch_map_sha256\":\"$sha\",\"switch_map_rewritten\":false,\"published_outcome\":null" && [ "$(stat -c %Y.%y map.inc)" = "$t0" ]
t_result $? "m3map again: the map unchanged and not rewritten, its SHA-256 recorded"
sb-a8 -q m3map --trajectory m1.ndjson --m2 m2.ndjson traj.ndjson >/dev/null 2>err; rc=$?
[ $rc -eq 3 ] && grep -q "is a discovery task" err; t_result $? "m3map refuses confirmation tasks that are discovery tasks (exit $rc)"
grep -v '"n_val"' m1.ndjson >/dev/null; sed 's/"n_val":[0-9]*,//' m1.ndjson >old-m1.ndjson
sb-a8 -q m3map --trajectory old-m1.ndjson --m2 m2.ndjson conf.ndjson >/dev/null 2>err; rc=$?
[ $rc -eq 3 ] && grep -q "run sb-a8 m1 again" err; t_result $? "m3map refuses m1 records without n_val (exit $rc)"
echo '{"kind":"a8.verdict","v":1,"analysis":"m2","strongest_simple":""}' >m2none.ndjson
sb-a8 -q m3map --trajectory m1.ndjson --m2 m2none.ndjson conf.ndjson >/dev/null 2>err; rc=$?
[ $rc -eq 3 ] && grep -q "strongest simple schedule" err; t_result $? "m3map refuses an m2 record without a strongest simple schedule (exit $rc)"
t_done
