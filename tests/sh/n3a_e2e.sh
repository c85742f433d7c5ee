#!/usr/bin/env bash
# n3a_e2e.sh — N3-A end to end (docs/n3a.md, docs/sb-a8.md; ~20 s): `make n3a n3a-verdict`
# on one seed of the registered schedule (1,024 updates, parents 128 and 768) with tiny
# splits and batches — 2 archs x 4 r = 8 cells of real runs — and the analysis of what the
# runner wrote: the census is complete (400 evaluations per seed, 160 of them used), the verdict record says
# the design is not the registered one (1 seed, and cells with other settings), and the
# report is written. The registered grid itself is 512 cells of hours (docs/n3a.md).
. "$(dirname "$0")/../shlib.sh"
command -v sb-train >/dev/null && command -v sb-a8 >/dev/null || { t_result 1 "sb-train and sb-a8 are built"; t_done; }

EXTRA=',"train":32,"validation":16,"batch":2'
mk() { make -s -C "$TOP" -o bin/sb-train -o bin/sb-a8 N3A_OUT="$T/n3a" N3A_SEEDS=64000 N3A_CELL_EXTRA="$EXTRA" "$@"; }
mk -j2 n3a >"$T/mk.out" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '"status":"completed"' "$T/n3a/n3a-train.ndjson")" -eq 8 ]
t_result $? "make n3a: 8 cells (query and transformer x r 1, 4, 16, 24) on the registered schedule (exit $rc; $(tail -n 2 "$T/mk.out" | tr '\n' ' '))"
mk n3a-verdict >"$T/v.out" 2>&1
rc=$?
v=$T/n3a/n3a-verdict.ndjson
field() { sed -n "s/.*\"kind\":\"a8.verdict\".*\"$1\":\([^,}]*\).*/\1/p" "$v"; }
[ $rc -eq 0 ] && [ -s "$v" ] && [ "$(grep -c '"kind":"a8.n3a.component"' "$v")" -eq 20 ]
t_result $? "make n3a-verdict: sb-a8 n3a reads the runner's records, 20 components (exit $rc; $(tr '\n' ' ' <"$T/v.out"))"
[ "$(field n_seeds)" = 1 ] && [ "$(field evals_counted)" = 400 ] && [ "$(field registered_design)" = false ] &&
	[ "$(field evals_nonregistered_settings)" = 400 ] && [ "$(field evals_superseded)" = 0 ]
t_result $? "the census: all 400 evaluations of one seed (160 of them required), none superseded; not the registered design (n_seeds $(field n_seeds), counted $(field evals_counted), non-registered settings $(field evals_nonregistered_settings))"
grep -q '"verdict":"\(BACKWARD_SUPPORTED_SYNTHETIC\|FORWARD_ONLY_SUPPORTED_SYNTHETIC\|KILLED_FOR_REGISTERED_EPSILON\|INCONCLUSIVE\)"' "$v" &&
	grep -q 'Not the registered design' "$T/n3a/n3a-verdict.md"
t_result $? "a verdict ($(grep -o '"verdict":"[A-Z_]*"' "$v")) and the report, which says the design is not the registered one"
# make n3a-interim: the same components as the analysis's, not a decision
mk n3a-interim >"$T/i.out" 2>&1
rc=$?
i=$T/n3a/n3a-interim.ndjson
[ $rc -eq 0 ] && [ "$(grep -c '"kind":"a8.n3a.interim"' "$i")" -eq 20 ] && grep -q '"kind":"a8.interim".*"verdict":null' "$i" &&
	diff <(grep '"kind":"a8.n3a.interim"' "$i" | sed 's/"kind":"[^"]*"//') <(grep '"kind":"a8.n3a.component"' "$v" | sed 's/"kind":"[^"]*"//') >/dev/null &&
	grep -q 'an interim look (no decision)' "$T/n3a/n3a-interim.md"
t_result $? "make n3a-interim: the 20 components of the analysis as a8.n3a.interim, verdict null, its report (exit $rc; $(tr '\n' ' ' <"$T/i.out"))"
# a cell whose fork S replay fails (SB_N3A_FAULT=replay) is a workflow failure: it stops
# there, so its records never complete the census and the analysis gives no decision
# (docs/n3a-spec.md 3); it ran every other fork on and left all 50 evaluations before
cq=$(ls "$T"/n3a/cells/query-r16-s64000.ndjson)
SB_N3A_FAULT=replay sb-train -q -o "$T/fault" "$cq" >"$T/f.out" 2>&1
frc=$?
good=$(ls "$T"/n3a/runs/*/n3a.ndjson | grep -v '/n3a\.query\.r16\.')
sb-a8 -q n3a $good "$T"/fault/*/n3a.ndjson >"$T/fa.out" 2>"$T/fa.err"
rc=$?
[ $frc -eq 1 ] && [ "$(echo "$good" | wc -l)" -eq 7 ] && tail -n 1 "$T"/fault/*/n3a.ndjson | grep -q '"reason":"WORKFLOW_NONDETERMINISTIC".*"units_completed":3,' &&
	[ $rc -eq 3 ] && grep -q "no decision: census incomplete: 9 of 160 required evaluations missing for the 1 seed(s) present; the first: arch query, r 16, seed 64000, arm L, parent 128, step 32" "$T/fa.err" &&
	! [ -s "$T/fa.out" ]
t_result $? "a cell whose S replay fails stops after fork S at 128 (3 units): with it the census is incomplete, no decision (sb-train exit $frc, sb-a8 exit $rc: $(tr '\n' ' ' <"$T/fa.err"))"
touch "$T/marker"
sleep 0.01
mk n3a-verdict >"$T/v2.out" 2>&1 && [ -z "$(find "$T/n3a" -type f -newer "$T/marker")" ]
t_result $? "a second make n3a-verdict reruns nothing ($(find "$T/n3a" -type f -newer "$T/marker" | tr '\n' ' '))"
t_done
