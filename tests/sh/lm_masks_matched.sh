#!/usr/bin/env bash
# lm_masks_matched.sh — controls at the recipe's budget (PROTOCOL C, "controls at matched
# budget, row by row") through sb-lm eval on a tiny decoder trained for a few steps:
# controls written without parameters take the recipe's (equal kept counts), pair records
# compare a recipe only with dense and controls of its parameters, and an ambiguous or
# unmatched control is a usage error (exit 2) that writes nothing. About 10 s on two cores.
. "$(dirname "$0")/../shlib.sh"
if ! command -v sb-lm >/dev/null; then
	t_result 1 "sb-lm is built (make)"
	t_done
fi
corpus=$TOP/tests/fixtures/lm/shakespeare-head.txt
cat >"$T/cell.json" <<JSON
{"family":"lm","seed":1,"model":{"d":32,"pattern":"CACA","heads":2,"ffn":64},"T":256,"batch":4,"steps":10,"warmup":2,"lr":0.003,"log_every":5,"corpora":["shakespeare=$corpus"],"mixture":"shakespeare=0.5,retrieval=0.5"}
JSON
sb-lm train -q -j 2 -o "$T/runs" "$T/cell.json" >"$T/train.out" 2>"$T/train.err"
t_result $? "sb-lm train: a tiny CACA decoder, 10 steps" "$(tail -n 3 "$T/train.err")"
run=$(sed -n 's/.*"run_dir":"\([^"]*\)".*/\1/p' "$T/train.out")
[ -n "$run" ] && [ -s "$run/model.safetensors" ] || t_done
ev() { # OUT_DIR MASKS
	sb-lm eval -q -j 2 --masks "$2" --tasks kv_recall,niah_single_1 --probes 2 --windows 2 --bench-reps 1 --budgets 16 \
		-o "$1" "$run" >"$1.out" 2>"$1.err"
}
# kept pairs on the text windows of the first method whose name starts with $2
kept() { grep "\"kind\":\"lm.budget\",.*\"method\":\"$2[^\"]*\",\"source\":\"text\"" "$1" | head -n 1 | sed 's/.*"kept":\([0-9.e+]*\),"causal".*/\1/'; }
# pair records: "method_a method_b", one per line, without repeats
pairs() { grep -E "\"kind\":\"$2\"" "$1" | sed 's/.*"method_a":"\([^"]*\)","method_b":"\([^"]*\)".*/\1 \2/' | sort -u; }
# every pair is (recipe[:P], dense) or (recipe[:P], control[:P]) with the same P
matched() { awk '{ pa = index($1, ":") ? substr($1, index($1, ":")) : ""; pb = index($2, ":") ? substr($2, index($2, ":")) : "";
	if ($1 !~ /^recipe/ || ($2 != "dense" && pa != pb)) bad = 1 } END { exit bad }'; }

# the audit's reproduction: a recipe with k = 16 and controls written without parameters
ev "$T/e1" 'recipe:s=4,w=64,k=16;struct_random;random;h2o'
rc=$?
t_result $rc "sb-lm eval --masks 'recipe:s=4,w=64,k=16;struct_random;random;h2o' exits 0" "$(tail -n 2 "$T/e1.err")"
e1=$T/e1/eval.ndjson
kr=$(kept "$e1" recipe) ks=$(kept "$e1" struct_random) ku=$(kept "$e1" random) kh=$(kept "$e1" h2o)
[ -n "$kr" ] && [ "$kr" = "$ks" ] && [ "$kr" = "$ku" ] && [ "$kr" = "$kh" ]
t_result $? "matched budgets: kept pairs recipe $kr, struct_random $ks, random $ku, h2o $kh"
# a training-only task asked for has its own lm.retrieval record, as each battery task has
# (one per method: dense and the four masks)
[ "$(grep '"kind":"lm.retrieval"' "$e1" | grep -c '"subset":"kv_recall"')" -eq 5 ] &&
	[ "$(grep '"kind":"lm.retrieval"' "$e1" | grep -c '"subset":"niah_single_1"')" -eq 5 ]
t_result $? "lm.retrieval per method for kv_recall and niah_single_1 ($(grep '"kind":"lm.retrieval"' "$e1" | grep -o '"subset":"[a-z_0-9]*"' | sort | uniq -c | tr '\n' ' '))"
grep -q '"kind":"lm.budget",.*"method":"struct_random:s=4,w=64,k=16","source":"text"' "$e1"
t_result $? "the inherited control's name shows its parameters (struct_random:s=4,w=64,k=16)"
p=$(pairs "$e1" lm.fidelity.pair)
[ "$p" = "recipe:s=4,w=64,k=16 struct_random:s=4,w=64,k=16" ]
t_result $? "lm.fidelity.pair: the recipe against its own struct_random ($(echo $p))"
pairs "$e1" lm.retrieval.pair >"$T/rp1"
[ "$(wc -l <"$T/rp1")" -eq 4 ] && matched <"$T/rp1"
t_result $? "lm.retrieval.pair: the recipe against dense and the 3 matched controls ($(tr '\n' ';' <"$T/rp1"))"

# a sweep: each control gives the parameters of its recipe; pairs never cross recipes
ev "$T/e2" 'recipe:k=16;recipe;struct_random:k=16;struct_random:k=32;random:k=16'
t_result $? "a sweep of two recipes with explicitly matched controls is accepted" "$(tail -n 2 "$T/e2.err")"
e2=$T/e2/eval.ndjson
p=$(pairs "$e2" lm.fidelity.pair | tr '\n' ';')
[ "$p" = "recipe struct_random;recipe:s=4,w=64,k=16 struct_random:s=4,w=64,k=16;" ]
t_result $? "sweep: one fidelity pair per recipe, each with its own struct_random ($p)"
pairs "$e2" lm.retrieval.pair >"$T/rp2"
[ "$(wc -l <"$T/rp2")" -eq 5 ] && matched <"$T/rp2"
t_result $? "sweep: retrieval pairs only between a recipe and dense or its own controls ($(tr '\n' ';' <"$T/rp2"))"

# refusals: usage errors (exit 2) naming both specs, no evaluation written
ev "$T/e3" 'recipe:k=16;recipe;struct_random'
rc=$?
[ $rc -eq 2 ] && grep -q "'struct_random'" "$T/e3.err" && grep -q "'recipe:k=16'" "$T/e3.err" && [ ! -e "$T/e3/eval.ndjson" ]
t_result $? "a control without parameters among two recipes: ambiguous, exit $rc: $(head -n 1 "$T/e3.err")"
ev "$T/e4" 'recipe:s=4,w=64,k=16;struct_random:k=32'
rc=$?
[ $rc -eq 2 ] && grep -q "'struct_random:k=32'" "$T/e4.err" && grep -q "'recipe:s=4,w=64,k=16'" "$T/e4.err" &&
	[ ! -e "$T/e4/eval.ndjson" ]
t_result $? "a control of other parameters than the recipe's: unmatched, exit $rc: $(head -n 1 "$T/e4.err")"

# --seed reaches the random controls' fidelity draws (it used to reach the probes only):
# another seed changes struct_random's and random's fidelity, never the recipe's
for s in 0 1; do
	sb-lm eval -q -j 2 --masks 'recipe;struct_random;random' --tasks niah_single_1 --probes 1 --windows 2 \
		--bench-reps 1 --budgets 16 --seed $s -o "$T/s$s" "$run" >/dev/null 2>"$T/s$s.err"
done
fid() { grep '"kind":"lm.fidelity",' "$1" | grep "\"method\":\"$2\"" | sed 's/"seconds":[^,]*,//'; }
[ "$(fid "$T/s0/eval.ndjson" recipe)" = "$(fid "$T/s1/eval.ndjson" recipe)" ] && [ -n "$(fid "$T/s0/eval.ndjson" recipe)" ] &&
	[ "$(fid "$T/s0/eval.ndjson" struct_random)" != "$(fid "$T/s1/eval.ndjson" struct_random)" ] &&
	[ "$(fid "$T/s0/eval.ndjson" random)" != "$(fid "$T/s1/eval.ndjson" random)" ]
t_result $? "--seed 1: the recipe's fidelity as with --seed 0, struct_random's and random's other draws" "$(cat "$T/s1.err")"
t_done
