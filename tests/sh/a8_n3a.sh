#!/usr/bin/env bash
# sb-a8 n3a — N3-A's inference (docs/sb-a8.md, "N3-A"; docs/n3a-spec.md 3) on record fixtures:
# the study's three planted verdict scenarios and two of ours (tests/fixtures/a8/n3a/gen.py,
# committed as SCENARIO.ndjson.gz, 10 seeds), the registered 64-seed design and a 3-seed one,
# reruns (the later record wins), and every "no decision" refusal (exit 3, naming the first
# missing or bad evaluation): a missing fork, a missing main step, a stray seed, a non-finite
# CE, a non-positive parent CE, malformed records, no records.
. "$(dirname "$0")/../shlib.sh"
FX=$TOP/tests/fixtures/a8/n3a
cd "$T"
field() { # FILE KEY: the value of KEY in the last record
	tail -n 1 "$1" | sed -n "s/.*\"$2\":\(\"[^\"]*\"\|[^,}]*\).*/\1/p"
}
for s in backward killed nocontext forward inconclusive; do gzip -dc "$FX/$s.ndjson.gz" >"$s.ndjson"; done

# the committed fixtures are gen.py's output
ok=0
for s in backward killed nocontext forward inconclusive; do
	/usr/bin/python3 "$FX/gen.py" "$s" | cmp -s - "$s.ndjson" || ok=1
done
t_result $ok "the committed fixtures equal gen.py's output (5 scenarios)"

verdict() { # SCENARIO VERDICT CONTEXT_PASS
	sb-a8 -q n3a --md "$1.md" "$1.ndjson" >"$1.out" 2>"$1.err"
	local rc=$? v c
	v=$(field "$1.out" verdict) c=$(field "$1.out" context_pass)
	[ $rc -eq 0 ] && [ "$v" = "\"$2\"" ] && [ "$c" = "$3" ] && grep -q "N3-A verdict: $2\*\*" "$1.md"
	t_result $? "$1: verdict $2, context_pass $3, exit 0 (got $v, $c, exit $rc)" "$(tail -c 300 "$1.err")"
}
verdict backward BACKWARD_SUPPORTED_SYNTHETIC true
verdict killed KILLED_FOR_REGISTERED_EPSILON true
verdict nocontext KILLED_FOR_REGISTERED_EPSILON false
verdict forward FORWARD_ONLY_SUPPORTED_SYNTHETIC true
verdict inconclusive INCONCLUSIVE true

# the records: 20 components, 2 + 6 family members, one verdict with the fixed fields
/usr/bin/python3 - backward.out killed.out nocontext.out <<'PY'
import json, sys
b, k, n = ([json.loads(l) for l in open(f)] for f in sys.argv[1:])
comp = [r for r in b if r["kind"] == "a8.n3a.component"]
fam = [r for r in b if r["kind"] == "a8.n3a.family"]
v = b[-1]
assert b[0]["kind"] == "run.meta" and len(comp) == 20 and len(fam) == 8 and len(b) == 30, len(b)
assert [c["component"] for c in comp[:4]] == ["early_benefit", "late_cost"] * 2 and comp[0]["r"] == 16 and comp[4]["r"] == 24
assert [c["hypothesis"] for c in comp[8:]] == ["H%d" % (i // 2 + 1) for i in range(12)]
assert [c["arch"] for c in comp[8:10]] == ["query", "transformer"] and comp[12]["r"] is None and comp[12]["component"] == "I_B"
c = comp[8]  # H1 query: B(768) at r 16 = (1 - 0.96) / 1.02 for all 10 seeds
assert c["n"] == 10 and c["above_margin"] == 10 and c["p"] == 2 ** -10 and c["interval_rank"] == 1 and not c["excluded"]
assert abs(c["median"] - 0.04 / 1.02) < 1e-15 and c["interval_lo"] == c["interval_hi"] == c["median"]
assert [f["member"] for f in fam] == ["r16", "r24", "H1", "H2", "H3", "H4", "H5", "H6"]
assert fam[0]["holm_p"] == 2 * 2 ** -10 and fam[2]["holm_p"] == 6 * 2 ** -10 and all(f["significant"] for f in fam)
assert v["analysis"] == "n3a" and v["published_outcome"] == "KILLED_FOR_REGISTERED_EPSILON"
assert v["mechanism_manuscript_eligible"] is False and v["real_transfer_still_required"] is True
assert v["registered_design"] is False and v["n_seeds"] == 10 and v["seed_min"] == 64000 and v["seed_max"] == 64009
assert v["evals_read"] == 1840 and v["evals_counted"] == 1840 and v["evals_superseded"] == 0  # seed 64000 has every step
assert v["margin"] == 0.005 and v["interval_alpha"] == 0.0025 and v["interval_rank"] == 1
kv = k[-1]  # killed: both mechanism branches excluded (3b), the context not (3a)
assert kv["clause_killed_mechanism_branches"] and not kv["clause_killed_context_gates"], kv
kc = [r for r in k if r["kind"] == "a8.n3a.component"][8]
assert kc["above_margin"] == 0 and kc["p"] == 1 and kc["excluded"] and kc["interval_hi"] < 0
nv = n[-1]  # all CE 1: every contrast 0 <= 0.005, both context gates excluded, density Holm 1
assert nv["clause_killed_context_gates"] and nv["density_holm_r16"] == 1 and nv["context_pass"] is False
PY
t_result $? "records: 20 components in the fixed order, 8 family members with Holm p's, the verdict's fields"
grep -qF '**Not the registered design**: 10 seed(s)' backward.md && grep -qF '| 16 | query | early benefit | 0.02 | [0.02, 0.02] | 10/10 |' backward.md &&
	grep -q 'published: KILLED_FOR_REGISTERED_EPSILON' backward.md && grep -q '1 - 3.8e-11' backward.md
t_result $? "report: not the registered design, the computed rows beside the published ones"
grep -q "not the registered design (64 seeds 64000..64063)" backward.err
t_result $? "stderr says the design is not the registered one"

# the registered design (64 seeds 64000..64063) and a 3-seed one
/usr/bin/python3 "$FX/gen.py" backward 64 >reg.ndjson
sb-a8 -q n3a --md reg.md reg.ndjson >reg.out 2>reg.err
rc=$?
[ $rc -eq 0 ] && [ "$(field reg.out registered_design)" = true ] && [ "$(field reg.out n_seeds)" = 64 ] &&
	[ "$(field reg.out interval_rank)" = 20 ] && [ "$(field reg.out h1_holm)" = 3.2526065174565133e-19 ] &&
	[ "$(field reg.out verdict)" = '"BACKWARD_SUPPORTED_SYNTHETIC"' ] && grep -q '"p":5.421010862427522e-20' reg.out &&
	grep -q 'The registered design: 64 seeds' reg.md && ! [ -s reg.err ]
t_result $? "64 seeds 64000..64063: registered, rank 20, p 2^-64, Holm 6 x 2^-64 = 3.2526e-19, silent (exit $rc)"
# the same records, one of them from a cell with other settings: not the registered design
sed '0,/"registered_settings":true/s//"registered_settings":false/' reg.ndjson >reg1.ndjson
sb-a8 -q n3a reg1.ndjson >reg1.out 2>reg1.err
rc=$?
[ $rc -eq 0 ] && [ "$(field reg1.out registered_design)" = false ] &&
	[ "$(field reg1.out evals_nonregistered_settings)" = 1 ] && grep -q "settings are not the registered ones" reg1.err
t_result $? "64 seeds, one evaluation with registered_settings false: not the registered design, said (exit $rc)"
/usr/bin/python3 "$FX/gen.py" backward 3 >s3.ndjson
sb-a8 -q n3a --md s3.md s3.ndjson >s3.out 2>/dev/null
[ "$(field s3.out verdict)" = '"INCONCLUSIVE"' ] && [ "$(field s3.out registered_design)" = false ] &&
	[ "$(field s3.out n_seeds)" = 3 ] && grep -q '"interval_lo":null,"interval_hi":null,"interval_rank":0' s3.out &&
	grep -q '(-inf, inf)' s3.md && grep -qF '**Not the registered design**: 3 seed(s)' s3.md
t_result $? "3 seeds: intervals null (no finite rank), p = 1/8, INCONCLUSIVE, not the registered design"

# '-' reads stdin: the same records
sb-a8 -q n3a - <killed.ndjson 2>/dev/null | tail -n 1 >stdin.out
tail -n 1 killed.out | cmp -s - stdin.out
t_result $? "'-' (stdin) gives the same verdict record"

# reruns: of the records of one (arch, r, seed, arm, parent, step) the later in input order wins
grep '"arch":"query","r":16,"seed":64000,"arm":"G","parent":768,"step":32,' backward.ndjson | sed 's/"validation_cross_entropy":0.96/"validation_cross_entropy":1.0/' >rerun.ndjson
[ "$(wc -l <rerun.ndjson)" = 1 ]
sb-a8 -q n3a backward.ndjson rerun.ndjson >late.out 2>late.err
rc=$?
h1q() { sed -n '/"hypothesis":"H1","arch":"query"/s/.*"above_margin":\([0-9]*\).*/\1/p' "$1"; }
[ $rc -eq 0 ] && [ "$(h1q late.out)" = 9 ] && [ "$(field late.out evals_superseded)" = 1 ] &&
	grep -q "1 evaluation(s) superseded by a later record.*backward.ndjson:[0-9]* by rerun.ndjson:1" late.err
t_result $? "a later rerun record wins (H1 query 9/10 above the margin), counted and named on stderr (exit $rc)" "$(cat late.err)"
sb-a8 -q n3a rerun.ndjson backward.ndjson >early.out 2>/dev/null
[ "$(h1q early.out)" = 10 ] && [ "$(field early.out evals_superseded)" = 1 ]
t_result $? "the same record given first is superseded by the fixture's (10/10)"

# no decision: exit 3 and one line naming the first missing or bad evaluation
refuse() { # NAME EXPECTED-STDERR FILE...
	local name=$1 want=$2
	shift 2
	sb-a8 -q n3a "$@" >no.out 2>no.err
	local rc=$?
	[ $rc -eq 3 ] && grep -qF -- "$want" no.err && [ "$(wc -l <no.err)" -le 2 ] && ! grep -q a8.verdict no.out
	t_result $? "$name: exit 3 ($rc), '$want'" "$(cat no.err)"
}
grep -v '"arch":"transformer","r":24,"seed":64003,"arm":"G","parent":768,"step":32,' killed.ndjson >nofork.ndjson
refuse "a missing fork" "census incomplete: 1 of 1600 required evaluations missing for the 10 seed(s) present; the first: arch transformer, r 24, seed 64003, arm G, parent 768, step 32" nofork.ndjson
grep -v '"arch":"query","r":4,"seed":64007,"arm":"S","parent":null,"step":1024,' killed.ndjson >nomain.ndjson
refuse "a missing main step" "the first: arch query, r 4, seed 64007, arm S, main, step 1024" nomain.ndjson
{ cat killed.ndjson; echo '{"kind":"n3a.eval","v":1,"arch":"query","r":1,"seed":64100,"arm":"D","parent":null,"step":32,"validation_cross_entropy":1}'; } >stray.ndjson
refuse "a stray seed" "159 of 1760 required evaluations missing for the 11 seed(s) present; the first: arch query, r 1, seed 64100, arm D, main, step 64" stray.ndjson
sed '/"arch":"query","r":16,"seed":64002,"arm":"P","parent":128,"step":32,/s/"validation_cross_entropy":1.0/"validation_cross_entropy":null,"validation_cross_entropy_reason":"nan"/' killed.ndjson >nan.ndjson
refuse "a non-finite (null) CE" "nan.ndjson:" nan.ndjson
refuse "a non-finite (null) CE, named" "non-finite validation CE (arch query, r 16, seed 64002, arm P, parent 128, step 32)" nan.ndjson
sed '/"arch":"query","r":1,"seed":64005,"arm":"S","parent":null,"step":768,/s/"validation_cross_entropy":1.02/"validation_cross_entropy":0/' killed.ndjson >zero.ndjson
refuse "a zero parent CE" "non-positive validation CE 0 (arch query, r 1, seed 64005, arm S, step 768): the forks' parent denominator" zero.ndjson
sed '/"arch":"query","r":1,"seed":64005,"arm":"D","parent":null,"step":32,/s/"validation_cross_entropy":1.0/"validation_cross_entropy":-1/' killed.ndjson >negd.ndjson
refuse "a negative Stage-1 denominator" "non-positive validation CE -1 (arch query, r 1, seed 64005, arm D, step 32)" negd.ndjson
one='{"kind":"n3a.eval","v":1,"arch":"query","r":1,"seed":64000,"arm":"D","parent":null,"step":32,"validation_cross_entropy":1}'
bad() { # NAME SED-EXPRESSION EXPECTED-STDERR
	{ echo '{"kind":"run.meta","v":1}'; echo "$one" | sed "$2"; } >bad.ndjson
	refuse "$1" "$3" bad.ndjson
}
bad "an unknown arch" 's/"query"/"mlp"/' "bad.ndjson:2: n3a.eval: arch 'mlp' is not query or transformer"
bad "an unknown r" 's/"r":1/"r":8/' "bad.ndjson:2: n3a.eval: r 8 is not 1, 4, 16 or 24"
bad "a fork arm on a main trajectory" 's/"arm":"D"/"arm":"G"/' "arm 'G' is not one of D, S (main)"
bad "D on a fork" 's/"parent":null/"parent":128/' "arm 'D' is not one of S, L, P, G, N (fork)"
bad "an unknown parent" 's/"parent":null/"parent":100/' "parent 100 is not null, 128 or 768"
bad "no parent field" 's/"parent":null,//' "missing field 'parent'"
bad "a step that is not evaluated" 's/"step":32/"step":33/' "step 33 is not an evaluation step of a main trajectory"
bad "a fork step that is not evaluated" 's/"parent":null/"parent":768/; s/"arm":"D"/"arm":"N"/; s/"step":32/"step":64/' "step 64 is not an evaluation step of a fork (relative 0, 1, 32)"
bad "no CE" 's/,"validation_cross_entropy":1//' "validation_cross_entropy missing or not a number"
bad "a CE string" 's/"validation_cross_entropy":1/"validation_cross_entropy":"1"/' "validation_cross_entropy missing or not a number"
bad "no seed" 's/"seed":64000,//' "bad.ndjson:2: n3a.eval: missing field 'seed'"
bad "another record version" 's/"v":1/"v":2/' "bad.ndjson:2: n3a.eval record version 2 not supported (this program reads 1)"
# a line that is JSON but not an object is not a record: malformed (it was skipped, and the
# rest gave a verdict)
{ head -n 3 killed.ndjson; echo '[1,2]'; tail -n +4 killed.ndjson; } >notobj.ndjson
refuse "a line that is not a JSON object" "notobj.ndjson:4: record is not a JSON object" notobj.ndjson
echo '{"kind":"run.meta","v":1}' >empty.ndjson
refuse "no n3a.eval records" "N3-A: no decision: no n3a.eval records" empty.ndjson
# --interim: each arch's components over the seeds complete for it; no families, no verdict
sb-a8 -q n3a --interim --md int.md backward.ndjson >int.out 2>int.err
rc=$?
/usr/bin/python3 - int.out backward.out <<'PY'
import json, sys
i, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:])
ic = [r for r in i if r["kind"] == "a8.n3a.interim"]
bc = [r for r in b if r["kind"] == "a8.n3a.component"]
assert len(i) == 22 and i[-1]["kind"] == "a8.interim" and len(ic) == 20, len(i)
strip = lambda r: {k: v for k, v in r.items() if k != "kind"}
assert [strip(r) for r in ic] == [strip(r) for r in bc], "the interim components differ from the analysis's"
v = i[-1]
assert v["verdict"] is None and v["seeds_complete_query"] == 10 and v["seeds_complete_transformer"] == 10
assert v["verdict_if_completed"] == "BACKWARD_SUPPORTED_SYNTHETIC" and v["context_pass_possible"] is True, v
assert v["evals_missing"] == 0 and v["evals_required"] == 1600 and not any(r["kind"].endswith(("family", "verdict")) for r in i)
PY
[ $? -eq 0 ] && [ $rc -eq 0 ] && grep -q "an interim look, not a decision: 10 of 10 seed(s) complete for query, 10 for transformer" int.err &&
	grep -qF '### N3-A: an interim look (no decision)' int.md && grep -qF '| context | early_benefit | 16 | query | 10 | 0.02 | [0.02, 0.02] | 10 |' int.md
t_result $? "--interim on a complete census: the analysis's 20 components as a8.n3a.interim, no families or verdict (exit $rc)" "$(cat int.err)"
# one transformer fork missing: query over 10 seeds, transformer over the 9 complete ones,
# each equal to the full analysis of those seeds
sb-a8 -q n3a --interim nofork.ndjson >int2.out 2>/dev/null
rc=$?
grep -v '"seed":64003,' killed.ndjson >no64003.ndjson
sb-a8 -q n3a no64003.ndjson >no64003.out 2>/dev/null
/usr/bin/python3 - int2.out killed.out no64003.out <<'PY'
import json, sys
i, k, k9 = ([json.loads(l) for l in open(f)] for f in sys.argv[1:])
strip = lambda r: {x: v for x, v in r.items() if x != "kind"}
ic = [strip(r) for r in i if r["kind"] == "a8.n3a.interim"]
kc = [strip(r) for r in k if r["kind"] == "a8.n3a.component"]
k9c = [strip(r) for r in k9 if r["kind"] == "a8.n3a.component"]
assert len(ic) == 20
for a, c, c9 in zip(ic, kc, k9c):
    want = c if a["arch"] == "query" else c9
    assert a == want, (a, want)
assert {a["n"] for a in ic if a["arch"] == "query"} == {10} and {a["n"] for a in ic if a["arch"] == "transformer"} == {9}
v = i[-1]
assert v["seeds_complete_query"] == 10 and v["seeds_complete_transformer"] == 9 and v["evals_missing"] == 1, v
assert v["verdict_if_completed"] is None and v["context_pass_possible"] is None, v  # 9 of 10 seeds: not said
PY
t_result $? "--interim, one transformer fork missing: query over 10 seeds, transformer over the 9 complete ones, as their full analyses (exit $rc)"
grep '"arch":"query"' killed.ndjson >qonly.ndjson
sb-a8 -q n3a --interim qonly.ndjson >int3.out 2>/dev/null
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '"kind":"a8.n3a.interim"' int3.out)" = 10 ] && ! grep -q '"kind":"a8.n3a.interim".*"arch":"transformer"' int3.out &&
	[ "$(field int3.out seeds_complete_transformer)" = 0 ] && [ "$(field int3.out verdict_if_completed)" = '"KILLED_FOR_REGISTERED_EPSILON"' ] &&
	[ "$(field int3.out context_pass_possible)" = true ]
t_result $? "--interim, query records only: the 10 query components, none of the transformer; KILLED whatever the transformer gives (B and F excluded) (exit $rc)"
grep -v '"step":1024,' killed.ndjson >nolate.ndjson
sb-a8 -q n3a --interim nolate.ndjson >no.out 2>no.err
rc=$?
[ $rc -eq 3 ] && grep -qF "N3-A: interim: no seed has every evaluation of either architecture (160 of 1600 missing; the first: arch query, r 1, seed 64000, arm D, main, step 1024)" no.err && ! grep -q '"kind":"a8' no.out
t_result $? "--interim with no complete seed: exit 3 ($rc), naming the first missing evaluation" "$(cat no.err)"
sb-a8 -q m2 --interim backward.ndjson >/dev/null 2>no.err
rc=$?
[ $rc -eq 2 ] && grep -q "interim is an option of n3a only" no.err
t_result $? "--interim with another analysis: usage error, exit 2 ($rc)"
t_done
