#!/usr/bin/env bash
# sb-freeze checked by an independent reader (Python's json + hashlib): the payload
# hash is SHA-256 of json.dumps(payload, sort_keys=True, separators=(",",":")) as in
# PROTOCOL A6 (with a non-ASCII path, so the ASCII escapes matter); every recorded log
# path resolves against the selection's directory and hashes as recorded; the times
# agree; and the rule, recomputed in Python from the logs (best epoch under patience,
# mean over seeds, earlier ratio on ties), gives the same selection and means.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/guard/lib.sh"
command -v python3 >/dev/null || { echo "ok - # SKIP python3 missing"; t_done; }

study="$T/études"
mkdir -p "$study/runs"
# task a: 025 best at its best epoch; 05 would win at the last epoch (patience matters);
# task b: 0125 and 025 tie exactly -> 0125; task c: the best ratio has 2 seeds only
acc() {
	case "$TASK/$1" in
	a/topk_softmax_025) echo "0.5 0.9 0.6 0.6 0.6 0.6 0.6 0.6" ;;
	a/topk_softmax_05) echo "0.5 0.6 0.6 0.6 0.6 0.6 0.6 0.95" ;;
	b/topk_softmax_0125 | b/topk_softmax_025) echo "0.25 0.75 0.5 0.5 0.5 0.5 0.5 0.5" ;;
	c/topk_softmax_025) echo "0.5 0.55 0.6 0.6 0.6 0.6 0.6 0.6" ;;
	c/topk_softmax_05) echo "0.9 0.9 0.9 0.9 0.9 0.9 0.9 0.9" ;;
	*) echo "0.1 0.2 0.3 0.4 0.4 0.4 0.4 0.45" ;;
	esac
}
TASK=a mkgrid "$study/runs" a "$ALL_METHODS" "0 1 2" acc
TASK=b mkgrid "$study/runs" b "$ALL_METHODS" "0 1 2" acc
TASK=c mkgrid "$study/runs" c "softmax sparsemax entmax15 headwise_adaptive_entmax topk_softmax_0125 topk_softmax_025" "0 1 2" acc
TASK=c mkgrid "$study/runs" c "topk_softmax_05" "0 1" acc
sleep 0.02
mkdir -p "$study/frozen"
sb-freeze -q --min-seeds 3 -o "$study/frozen/selection.json" "$study"/runs/*/val.ndjson >"$T/out" 2>"$T/err"
t_result $? "sb-freeze ran ($(head -c 300 "$T/err"))"

python3 - "$study/frozen/selection.json" "$T/out" <<'PY'
import datetime, glob, hashlib, json, os, sys

path, out = sys.argv[1], sys.argv[2]
raw = open(path, "rb").read()
sel = json.loads(raw)
n = 0
fails = 0


def check(cond, name):
    global n, fails
    n += 1
    if not cond:
        fails += 1
    print(("ok" if cond else "not ok") + " - python: " + name)


recorded = sel.pop("sha256")
canon = json.dumps(sel, sort_keys=True, separators=(",", ":"))
check(all(ord(ch) < 128 for ch in canon), "the canonical form is ASCII")
check(hashlib.sha256(canon.encode()).hexdigest() == recorded, "payload hash = SHA-256 of json.dumps(sort_keys, separators)")
check("\\u00e9" in canon and "études" in json.dumps(sel, ensure_ascii=False), "the non-ASCII path is escaped as \\u00e9")
stdout = [json.loads(l) for l in open(out)]
check(stdout[0]["kind"] == "run.meta" and stdout[1]["kind"] == "freeze.selection", "stdout: run.meta first, then freeze.selection")
check(stdout[1]["sha256"] == recorded and stdout[1]["file_sha256"] == hashlib.sha256(raw).hexdigest(), "stdout reports both hashes")
base = os.path.dirname(path)
logs = sel["validation_logs"]
check(len(logs) == len(glob.glob(os.path.join(base, "..", "runs", "*", "val.ndjson"))), "every log is listed")
ok = True
for l in logs:
    p = os.path.normpath(os.path.join(base, l["path"]))
    ok &= not os.path.isabs(l["path"]) and l["path"].startswith("../runs/")
    ok &= hashlib.sha256(open(p, "rb").read()).hexdigest() == l["sha256"] and os.path.getsize(p) == l["size_bytes"]
    ok &= abs(os.stat(p).st_mtime - l["mtime_unix_s"]) < 1e-6 and l["mtime_unix_s"] <= sel["frozen_at_unix_s"]
check(ok, "log paths are relative to the selection and hash, size and mtime as recorded")
t = datetime.datetime.strptime(sel["frozen_at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
check(abs(t.timestamp() - sel["frozen_at_unix_s"]) < 0.002, "frozen_at (RFC 3339) matches frozen_at_unix_s")
check(sel["newest_validation_log_mtime_unix_s"] == max(l["mtime_unix_s"] for l in logs), "newest log mtime")

# the rule, recomputed
def best(acc, patience):
    b, ba, wait = -1, -1.0, 0
    for e, a in enumerate(acc):
        if a > ba:
            b, ba, wait = e, a, 0
        else:
            wait += 1
        if patience and wait >= patience:
            break
    return acc[b]

cells = {}
for l in logs:
    recs = [json.loads(x) for x in open(os.path.normpath(os.path.join(base, l["path"])))]
    ep = sorted((r for r in recs if r["kind"] == "eval.epoch"), key=lambda r: r["epoch"])
    r = ep[0]
    cells[(r["task"], r["method"], r["seed"])] = best([x["val_accuracy"] for x in ep], 5)
ratios = ["topk_softmax_0125", "topk_softmax_025", "topk_softmax_05"]
want = {}
means = {}
for task in sorted({k[0] for k in cells}):
    bestm, bestv = None, float("-inf")
    for m in ratios:
        seeds = sorted(s for (t, mm, s) in cells if t == task and mm == m)
        if not seeds:
            continue
        v = 0.0
        for s in seeds:
            v += cells[(task, m, s)]
        v /= len(seeds)
        means[(task, m)] = (v, len(seeds))
        if len(seeds) >= 3 and v > bestv:
            bestm, bestv = m, v
    if bestm:
        want[task] = (bestm, bestv)
got = {t: (v["topk_method"], v["val_accuracy"]) for t, v in sel["selected"].items()}
check(got == want, "selection recomputed in Python: %s" % got)
check(got.get("a", [""])[0] == "topk_softmax_025", "task a: the best epoch under patience decides (not the last epoch)")
check(got.get("b", [""])[0] == "topk_softmax_0125", "task b: an exact tie goes to the earlier ratio")
check(got.get("c", [""])[0] == "topk_softmax_025", "task c: a ratio with 2 < 3 seeds is not eligible")
allv = {(c["task"], c["method"]): (c["val_accuracy"], c["n_seeds"]) for c in sel["all_topk_validation"]}
check(allv == means, "all_topk_validation: every ratio's mean and n_seeds")
plan = sel["test_plan"]
check(len(plan) == 3 * 5 * 3 and not sel["test_plan_missing"], "test plan: 3 tasks x 5 methods x 3 seeds")
check({p["method"] for p in plan if p["task"] == "c"} == {"softmax", "sparsemax", "entmax15", "headwise_adaptive_entmax", "topk_softmax_025"},
      "test plan methods: the four baselines and the selected ratio")
print("# python: %d passed, %d failed" % (n - fails, fails))
sys.exit(1 if fails else 0)
PY
t_result $? "the Python checks"
t_done
