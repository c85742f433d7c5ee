#!/usr/bin/env bash
# n3a_train.sh — sb-train on small N3-A cells ("family": "n3a", docs/n3a.md; ~2 s): the run
# directory and its records (the n3a.eval schema the analysis reads), the fork S replay
# equal to main S bit for bit, D and S from identical parameters, the skip on a rerun,
# determinism, the guards through deliberately broken operators (SB_N3A_FAULT), and bad cells.
. "$(dirname "$0")/../shlib.sh"
command -v sb-train >/dev/null || { t_result 1 "sb-train is built (make)"; t_done; }
command -v python3 >/dev/null || { t_result 1 "python3 (scripts/deps.sh) for the record checks"; t_done; }

SMALL='"train":256,"validation":96,"batch":32,"updates":16,"eval_steps":[0,2,4,6,8,12,16],"parents":[4,8],"fork_updates":4'
echo "{\"family\":\"n3a\",\"arch\":\"query\",\"r\":16,\"seed\":64000,$SMALL}" >"$T/q.ndjson"
echo "{\"family\":\"n3a\",\"arch\":\"transformer\",\"r\":4,\"seed\":64001,$SMALL}" >"$T/t.ndjson"

sb-train -q -o "$T/runs" "$T/q.ndjson" >"$T/q.out" 2>"$T/q.err"
t_result $? "a small query cell runs ($(tr '\n' ' ' <"$T/q.err"))"
grep -q '"kind":"n3a.train","v":1,"cell_id":"n3a.query.r16.s64000.[0-9a-f]\{8\}","run_dir":"[^"]*","status":"completed"' "$T/q.out"
t_result $? "stdout: an n3a.train record, status completed ($(cat "$T/q.out"))"
D=$(ls -d "$T"/runs/n3a.query.r16.s64000.*)
[ -f "$D/cell.json" ] && [ -f "$D/n3a.ndjson" ] && [ -z "$(ls -A "$D" | grep -v '^cell.json$\|^n3a.ndjson$')" ]
t_result $? "the run directory holds cell.json and n3a.ndjson only (no temporary files left)"
grep -q '"epsilon":0.1111111111111111' "$D/cell.json" && grep -q '"lr":0.001' "$D/cell.json" &&
	grep -q '"n":32,"k":8' "$D/cell.json"
t_result $? "cell.json has the registered defaults filled in (n 32, k 8, epsilon 1/9, lr 1e-3)"
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); sys.exit(0 if c.get("family") == "n3a" else 1)' \
	"$D/cell.json" 2>"$T/cj.err"
t_result $? "cell.json is one JSON object (no trailing comma) ($(tr '\n' ' ' <"$T/cj.err" | tail -c 200))"

# the records, checked in Python (exact field sets, counts, bitwise equalities as written)
cat >"$T/check.py" <<'EOF'
import json, sys
path, neval, nparents = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
recs = [json.loads(l) for l in open(path)]
fails = []
def check(cond, what):
    print(("ok" if cond else "FAIL") + " " + what)
    if not cond: fails.append(what)
check(recs[0]["kind"] == "run.meta", "run.meta first")
check(recs[-1]["kind"] == "n3a.done", "n3a.done last")
ev = [r for r in recs if r["kind"] == "n3a.eval"]
FIELDS = {"kind", "v", "cell_id", "arch", "r", "seed", "arm", "parent", "step", "validation_cross_entropy",
          "validation_accuracy", "mean_relevant_mass", "mean_entropy", "mean_support", "gamma",
          "registered_settings"}
check(all(set(r) == FIELDS for r in ev), "every n3a.eval has exactly the fixed schema's fields")
check(all(r["registered_settings"] is False for r in ev), "a small trial cell says registered_settings false")
num = ["validation_cross_entropy", "validation_accuracy", "mean_relevant_mass", "mean_entropy", "mean_support", "gamma"]
check(all(isinstance(r[f], float) or isinstance(r[f], int) for r in ev for f in num), "metrics are numbers")
check(all(r["v"] == 1 and isinstance(r["step"], int) and r["arm"] in "DSLPGN" for r in ev), "v 1, integer steps, arms")
main = {(r["arm"], r["step"]): r for r in ev if r["parent"] is None}
fork = {(r["arm"], r["parent"], r["step"]): r for r in ev if r["parent"] is not None}
check(len(main) == 2 * neval and {a for a, _ in main} == {"D", "S"}, "main: D and S at every evaluation step (%d)" % len(main))
check(len(fork) == 15 * nparents and {a for a, _, _ in fork} == set("SLPGN"), "forks: S/L/P/G/N at relative 0, 1, F (%d)" % len(fork))
done = recs[-1]
check(done["status"] == "completed" and done["units"] == 12 and done["units_completed"] == 12, "done: completed, 12 units")
check(done["s_replay_equal"] is True, "done: s_replay_equal true")
F = max(s for _, _, s in fork)
parents = sorted({p for _, p, _ in fork})
same = lambda a, b: all(a[f] == b[f] for f in num)
check(all(same(fork[("S", p, F)], main[("S", p + F)]) for p in parents),
      "fork S at relative F equals main S at parent + F in every metric (bit for bit as written)")
check(all(same(fork[(a, p, 0)], main[("S", p)]) for p in parents for a in "SGN"),
      "forks S, G, N at relative 0 equal main S at the parent (same state, same forward)")
check(all(not same(fork[(a, p, 0)], main[("S", p)]) for p in parents for a in "LP"),
      "forks L, P at relative 0 differ from S (their own forward)")
check(all(main[(a, 0)]["validation_cross_entropy"] > 0 for a in "DS") and
      main[("D", 0)]["mean_support"] == 32 and main[("S", 0)]["mean_support"] == 8,
      "step 0: D's support 32, S's 8")
check(all(abs(fork[("L", p, s)]["mean_support"] - 32) < 1e-12 and fork[("P", p, s)]["mean_support"] == 8
          for p in parents for s in (0, 1, F)), "L's support 32, P's 8")
units = [r for r in recs if r["kind"] == "n3a.unit"]
check(all(set(u) == {"kind", "v", "cell_id", "arm", "parent", "updates", "start_params_sha256", "start_state_sha256",
                     "end_params_sha256"} for u in units), "every n3a.unit has exactly the documented fields")
check(set(done) == {"kind", "v", "cell_id", "status", "units", "units_completed", "s_replay_equal", "init_params_sha256",
                    "train_seconds", "cpu_seconds"}, "n3a.done (completed) has exactly the documented fields")
start = {(u["arm"], u["parent"]): u["start_params_sha256"] for u in units}
check(len(units) == 12 and start[("D", None)] == start[("S", None)] == done["init_params_sha256"],
      "D and S start from identical parameters (the same SHA-256)")
sstate = {(u["arm"], u["parent"]): u["start_state_sha256"] for u in units}
check(sstate[("D", None)] == sstate[("S", None)], "D and S start from identical parameters, AdamW moments and step")
check(all(len({sstate[(a, p)] for a in "SLPGN"}) == 1 for p in parents), "the five forks of a parent start from one state")
check(any(fork[("G", p, F)]["validation_cross_entropy"] != fork[("N", p, F)]["validation_cross_entropy"] for p in parents),
      "G and N train differently (the null permutes)")
sys.exit(1 if fails else 0)
EOF
python3 "$T/check.py" "$D/n3a.ndjson" 7 2 >"$T/check.out" 2>&1
t_result $? "query records: $(grep -c '^ok' "$T/check.out") checks passed; failed: $(grep FAIL "$T/check.out" | tr '\n' ';')"

sum1=$(sha256sum <"$D/n3a.ndjson")
sb-train -q -o "$T/runs" "$T/q.ndjson" >"$T/q2.out" 2>&1
[ $? -eq 0 ] && grep -q '"status":"skipped"' "$T/q2.out" && [ "$(sha256sum <"$D/n3a.ndjson")" = "$sum1" ]
t_result $? "a rerun skips the finished cell and leaves n3a.ndjson untouched ($(cat "$T/q2.out"))"

sb-train -q -o "$T/runs2" "$T/q.ndjson" >/dev/null 2>&1
D2=$(ls -d "$T"/runs2/n3a.query.r16.s64000.*)
cmp -s <(grep -v '"kind":"run.meta"\|"kind":"n3a.done"' "$D/n3a.ndjson") \
	<(grep -v '"kind":"run.meta"\|"kind":"n3a.done"' "$D2/n3a.ndjson")
t_result $? "a second run elsewhere writes the same n3a.eval and n3a.unit records, byte for byte"

sb-train -q -o "$T/runs" "$T/t.ndjson" >"$T/t.out" 2>"$T/t.err"
t_result $? "a small transformer cell runs ($(tr '\n' ' ' <"$T/t.err"))"
DT=$(ls -d "$T"/runs/n3a.transformer.r4.s64001.*)
python3 "$T/check.py" "$DT/n3a.ndjson" 7 2 >"$T/checkt.out" 2>&1
t_result $? "transformer records: $(grep -c '^ok' "$T/checkt.out") checks passed; failed: $(grep FAIL "$T/checkt.out" | tr '\n' ';')"

# the guards: deliberately broken operators must fail the cell with the guard's name
SB_N3A_FAULT=g_no_renorm sb-train -q -o "$T/fault" "$T/q.ndjson" >"$T/f.out" 2>"$T/f.err"
rc=$?
DF=$(ls -d "$T"/fault/n3a.query.r16.s64000.*)
[ $rc -eq 1 ] && grep -q '"status":"failed","reason":"INVALID_CONTROL"' "$T/f.out" &&
	tail -n 1 "$DF/n3a.ndjson" | grep -q '"kind":"n3a.done".*"status":"failed","reason":"INVALID_CONTROL".*"units_completed":5'
t_result $? "a G backward without the S-norm rescale: exit 1 (got $rc), INVALID_CONTROL, recorded after 5 units ($(tail -n 1 "$T/f.err"))"
grep -q 'fork G at 4, update 1' "$T/f.out"
t_result $? "... and the message says where: fork G at parent 4, update 1"
SB_N3A_FAULT=g_no_renorm sb-train -q -o "$T/fault" "$T/q.ndjson" >"$T/f2.out" 2>&1
[ $? -eq 1 ] && ! grep -q skipped "$T/f2.out"
t_result $? "a failed cell is not skipped on a rerun (it fails again)"
SB_N3A_FAULT=l_tail sb-train -q -o "$T/fault2" "$T/q.ndjson" >"$T/f3.out" 2>&1
[ $? -eq 1 ] && grep -q '"reason":"INVALID_CONTROL".*fork L at 4, evaluation at step 0: .*INVALID_CONTROL: L sum' "$T/f3.out"
t_result $? "an L with 2 eps on the tail: INVALID_CONTROL at its first evaluation"
SB_N3A_FAULT=replay sb-train -q -o "$T/fault3" "$T/q.ndjson" >"$T/f4.out" 2>&1
rc=$?
DF=$(ls -d "$T"/fault3/n3a.query.r16.s64000.*)
[ $rc -eq 1 ] && grep -q '"reason":"WORKFLOW_NONDETERMINISTIC"' "$T/f4.out" &&
	tail -n 1 "$DF/n3a.ndjson" | grep -q '"s_replay_equal":false'
t_result $? "a fork S replay one ulp off its parent: WORKFLOW_NONDETERMINISTIC, s_replay_equal false"
SB_N3A_FAULT=bogus sb-train -q -o "$T/fault4" "$T/q.ndjson" >/dev/null 2>&1
t_result $(($? == 2 ? 0 : 1)) "an unknown SB_N3A_FAULT is a usage error (exit 2)"

# make n3a on a 2 x 1 x 2 grid of tiny cells (bin/sb-train taken as built: -o)
EXTRA=',"train":64,"validation":32,"batch":16,"updates":4,"eval_steps":[0,2,4],"parents":[2],"fork_updates":2'
mk() { make -s -C "$TOP" -o bin/sb-train n3a N3A_OUT="$T/mk" N3A_RS=4 N3A_SEEDS="1 2" N3A_CELL_EXTRA="$EXTRA" "$@"; }
mk -j2 >"$T/mk.out" 2>&1
[ $? -eq 0 ] && [ "$(grep -c '"status":"completed"' "$T/mk/n3a-train.ndjson")" -eq 4 ] &&
	[ "$(ls "$T"/mk/runs/*/n3a.ndjson | wc -l)" -eq 4 ]
t_result $? "make n3a runs the grid's 4 cells into N3A_OUT/runs ($(tr '\n' ' ' <"$T/mk.out"))"
touch "$T/marker"
sleep 0.01
mk >"$T/mk2.out" 2>&1 && [ -z "$(find "$T/mk" -type f -newer "$T/marker")" ]
t_result $? "a second make n3a rewrites nothing ($(find "$T/mk" -type f -newer "$T/marker" | tr '\n' ' '))"

# a parent at step 0 (an evaluation step, so accepted): its forks start from the initial
# state; they started from all-zero parameters (the parent state was saved only after an
# update), so the S replay failed with WORKFLOW_NONDETERMINISTIC
echo '{"family":"n3a","arch":"query","r":4,"seed":1,"train":64,"validation":32,"batch":16,"updates":4,"eval_steps":[0,2,4],"parents":[0],"fork_updates":2}' >"$T/p0.ndjson"
sb-train -q -o "$T/p0runs" "$T/p0.ndjson" >"$T/p0.out" 2>&1
rc=$?
P0=$(ls "$T"/p0runs/*/n3a.ndjson)
[ $rc -eq 0 ] && tail -n 1 "$P0" | grep -q '"status":"completed".*"s_replay_equal":true' &&
	[ "$(grep '"arm":"S","parent":null,"step":0,' "$P0" | sed 's/.*"validation_cross_entropy"://')" = \
	  "$(grep '"arm":"G","parent":0,"step":0,' "$P0" | sed 's/.*"validation_cross_entropy"://')" ]
t_result $? "parent 0: the forks start from the initial state, the S replay equals main S (exit $rc: $(head -c 300 "$T/p0.out"))"

# bad cells: refused at read time naming FILE:LINE, nothing trained
bad() { # name cell-json
	printf '%s\n' "$2" >"$T/bad.ndjson"
	sb-train -q -o "$T/badruns" "$T/bad.ndjson" >/dev/null 2>"$T/bad.err"
	local rc=$?
	[ $rc -eq 3 ] && grep -q 'bad.ndjson:1' "$T/bad.err" && [ ! -e "$T/badruns" ]
	t_result $? "$1: exit 3 naming the line, nothing written (rc $rc: $(head -c 200 "$T/bad.err"))"
}
bad "an unknown field" '{"family":"n3a","arch":"query","r":16,"seed":1,"epochs":3}'
bad "an unknown arch" '{"family":"n3a","arch":"mlp","r":16,"seed":1}'
bad "updates without eval_steps" '{"family":"n3a","arch":"query","r":16,"seed":1,"updates":64}'
bad "a parent whose replay step is not evaluated" \
	'{"family":"n3a","arch":"query","r":4,"seed":1,"updates":16,"eval_steps":[0,4,16],"parents":[4],"fork_updates":4}'
bad "k >= n" '{"family":"n3a","arch":"query","r":4,"seed":1,"n":8,"k":8}'
bad "beta2 of 1" '{"family":"n3a","arch":"query","r":4,"seed":1,"beta2":1}'
bad "beta1 above 1" '{"family":"n3a","arch":"query","r":4,"seed":1,"beta1":1.5}'
# N3-A cells train on the CPU only: under another --device they are refused before anything
# trains (an encoder cell in the same file included), naming the line; it was a usage error
# after the encoder cells, with no record
printf '{"task":"img","method":"softmax","seed":0}\n%s\n' "$(cat "$T/q.ndjson")" >"$T/mixed.ndjson"
for dev in cuda cuda:1; do
	sb-train -q -o "$T/devruns" --device $dev "$T/mixed.ndjson" >"$T/dev.out" 2>"$T/dev.err"; rc=$?
	if grep -q "this build has no CUDA backend" "$T/dev.err"; then # CUDA=0: --device itself is refused
		[ $rc -eq 2 ] && [ ! -e "$T/devruns" ] && [ ! -s "$T/dev.out" ]
		t_result $? "# SKIP --device $dev: this build has no CUDA backend (a usage error before any cell: exit $rc, nothing written)"
		continue
	fi
	[ $rc -eq 2 ] && grep -q "mixed.ndjson:2: n3a cells train on the CPU only (--device cpu), not on '$dev'" "$T/dev.err" &&
		[ ! -e "$T/devruns" ] && [ ! -s "$T/dev.out" ]
	t_result $? "--device $dev: exit 2 naming line 2 before anything trains (rc $rc: $(head -c 200 "$T/dev.err"))"
done
t_done
