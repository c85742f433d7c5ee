#!/usr/bin/env bash
# sas_scaled.sh — the scaled SAS comparison end to end on a tiny LM-track decoder
# (trained here for 40 steps at T = 128; ~20 s): sb-train with a "backbone" cell,
# sb-eval, the records and the tables of pipelines/sas-scaled-report.sh, the budget
# matching, a finished cell skipped, an edited cell.json refused, the error paths.
. "$(dirname "$0")/../shlib.sh"
for p in sb-train sb-eval sb-lm; do
	command -v $p >/dev/null || { t_result 1 "$p is built (make)"; t_done; }
done
cat "$TOP"/README.md "$TOP"/docs/*.md >"$T/corpus.txt"
cat >"$T/lm.ndjson" <<CELL
{"family":"lm","seed":1,"model":{"d":32,"pattern":"ACA","heads":4,"kv_heads":2,"ffn":64,"pos":"rope","conv_gate":0},"T":128,"batch":4,"steps":40,"warmup":5,"lr":0.003,"log_every":20,"corpora":["docs=$T/corpus.txt"],"mixture":"docs=0.6,retrieval=0.4"}
CELL
sb-lm train -q -j 1 -o "$T/lm" "$T/lm.ndjson" >"$T/lm.out" 2>"$T/lm.err"
run=$(sed -n 's/.*"kind":"lm.train".*"run_dir":"\([^"]*\)".*/\1/p' "$T/lm.out")
[ -n "$run" ] && [ -f "$run/model.safetensors" ]
t_result $? "a tiny LM-track decoder trains ($(tail -c 200 "$T/lm.err"))"
echo "{\"family\":\"sas\",\"seed\":3,\"backbone\":\"$run\",\"blocks\":[8,32],\"dsel\":8,\"sel_steps\":3,\"sel_batch\":2,\"windows\":3,\"probes\":1,\"tasks\":[\"niah_single_1\",\"niah_multikey_2\"],\"budget\":\"recipe:s=2,w=16,k=16\",\"masks\":\"recipe;block16:s=2,w=16,k=16\"}" >"$T/cell.ndjson"
sb-train -q -o "$T/runs" "$T/cell.ndjson" >"$T/train.out" 2>"$T/e"
t_result $? "sb-train runs the scaled cell ($(cat "$T/e"))"
R=$T/runs/sas-scaled-s3
[ "$(grep -c '"kind":"sas.scaled.step"' "$R/train.ndjson")" -eq 6 ] && [ "$(grep -c '"kind":"sas.scaled.block"' "$R/train.ndjson")" -eq 2 ] &&
	grep -q '"kind":"sas.scaled.done"' "$R/train.ndjson" && (cd "$R" && sha256sum -c --quiet selector-b8.safetensors.sha256 selector-b32.safetensors.sha256) &&
	[ "$(jq -r 'select(.kind == "sas.scaled.done") | .mixture' "$R/train.ndjson")" = "$(jq -r .mixture "$run/cell.json")" ]
t_result $? "train.ndjson: 3 steps x 2 block sizes, sas.scaled.block, done (with the backbone's own training mixture); selector checkpoints verify"
sb-eval -q "$R" >"$T/eval.out" 2>"$T/e"
t_result $? "sb-eval evaluates the scaled run ($(cat "$T/e"))"
E=$R/eval.ndjson
head -n 1 "$E" | grep -q '"kind":"run.meta"'
t_result $? "eval.ndjson starts with run.meta"
# its input, the backbone's checkpoint, with that file's SHA-256 and size (the size was 0)
want="$run/model.safetensors $(sha256sum <"$run/model.safetensors" | cut -c1-64) $(stat -c %s "$run/model.safetensors")"
for f in "$E" "$R/train.ndjson"; do
	got=$(head -n 1 "$f" | jq -r '.inputs[0] | "\(.path) \(.sha256) \(.size_bytes)"')
	[ "$got" = "$want" ]
	t_result $? "$(basename "$f")'s run.meta names the backbone's checkpoint, its SHA-256 and size (got $got)"
done
methods=$(grep '"kind":"sas.scaled.fidelity"' "$E" | sed 's/.*"method":"\([^"]*\)".*/\1/' | tr '\n' ' ')
[ "$methods" = "dense recipe:s=2,w=16,k=16 block16:s=2,w=16,k=16 sas-b8 sas-b32 sas-b8-nogate sas-b32-nogate sas-b8-untrained sas-b32-untrained " ]
t_result $? "fidelity for dense, both masks (a mask without numbers runs at the cell's budget), both SAS variants, without gates, untrained (got: $methods)"
[ "$(grep -c '"kind":"sas.scaled.fidelity.window"' "$E")" -eq 27 ]
t_result $? "one fidelity.window record per window and method (3 x 9)"
grep '"kind":"sas.scaled.fidelity"' "$E" | grep '"method":"dense"' | grep -q '"budget_fraction":1,"kl":0,'
t_result $? "dense against itself: budget 1, KL 0"
# SAS budgets are matched row by row to the recipe: within a few percent of its fraction
bad=$(grep '"kind":"sas.scaled.fidelity"' "$E" | awk '{ match($0, /"budget_fraction":[0-9.e-]+/); f = substr($0, RSTART + 18, RLENGTH - 18) + 0
	match($0, /"method":"[^"]*"/); m = substr($0, RSTART + 10, RLENGTH - 11)
	if (m ~ /^recipe/) r = f; else if (m ~ /^sas/) s[m] = f }
	END { for (m in s) if ((s[m] - r) ^ 2 > (0.1 * r) ^ 2) print m, s[m], r }' | wc -l)
[ "$bad" -eq 0 ]
t_result $? "SAS kept fractions within 10% of the recipe's ($bad off)"
[ "$(grep -c '"kind":"probe.result"' "$E")" -eq 18 ] && [ "$(grep -c '"kind":"sas.scaled.retrieval.pair"' "$E")" -eq 16 ]
t_result $? "probe.result per probe and method (2 x 9), trained-SAS retrieval pairs (2 x 8)"
pipelines/sas-scaled-report.sh "$E" "$R/train.ndjson" >"$T/report.md" && grep -q '^| sas-b32 | recipe:s=2,w=16,k=16 |' "$T/report.md" &&
	grep -q '^## Retrieval' "$T/report.md"
t_result $? "the report's tables"
grep -q '^| 8 | 3 | [0-9.]* → [0-9.]* | ' "$T/report.md"
t_result $? "the report's selector row: 3 steps, the loss from first to last"
# no selector step (sel_steps 0: the untrained selector): its block record's losses and gradient
# norm are null, not 0, and the report's row says n/a
sed 's/"sel_steps":3/"sel_steps":0,"id":"ns0"/; s/"blocks":\[8,32\]/"blocks":[8]/' "$T/cell.ndjson" >"$T/ns0.ndjson"
sb-train -q -o "$T/runs" "$T/ns0.ndjson" >/dev/null 2>"$T/e" && sb-eval -q "$T/runs/ns0" >/dev/null 2>>"$T/e" &&
	jq -e -s 'map(select(.kind == "sas.scaled.block"))[0] | .steps == 0 and .loss_first == null and .loss_last == null
		and .selector_gradient_norm_mean == null' "$T/runs/ns0/train.ndjson" >/dev/null &&
	pipelines/sas-scaled-report.sh "$T/runs/ns0/eval.ndjson" "$T/runs/ns0/train.ndjson" | grep -q '^| 8 | 0 | n/a | n/a | '
t_result $? "sel_steps 0: the block's losses and gradient norm are null (they read 0), the report says n/a ($(head -c 200 "$T/e"))"
# its header names the cell's budget and the units (it said sinks 4, window 64, 32 free keys
# whatever the cell's budget was)
grep -q '^Backbone `.*`, T = 128 bytes; .* matched row by row to the recipe `recipe:s=2,w=16,k=16`' "$T/report.md"
t_result $? "the report's header: T in bytes, the cell's budget ($(sed -n 3p "$T/report.md" | cut -c1-200))"
sb-stats -q "$E" >"$T/stats.out" 2>"$T/e" && grep -q '"kind":"stats.probe_rate"' "$T/stats.out"
t_result $? "sb-stats reads the probe.result records ($(head -c 200 "$T/e"))"
# a finished cell is skipped, as a toy SAS cell is (its records ended in sas.scaled.done, which
# the check did not know: every block size trained again, "completed", "0 skipped"): nothing in
# the run directory is rewritten (train.ndjson's seconds would differ)
(cd "$R" && sha256sum ./*) >"$T/before"
sb-train -o "$T/runs" "$T/cell.ndjson" >"$T/rerun.out" 2>"$T/e"; rc=$?
[ $rc -eq 0 ] && [ "$(jq -r 'select(.kind == "sas.train") | .status' "$T/rerun.out")" = skipped ] &&
	grep -q "1 cell: 0 completed, 1 skipped" "$T/e" && ! grep -q "selector b" "$T/e" &&
	(cd "$R" && sha256sum ./*) | cmp -s - "$T/before"
t_result $? "rerunning the finished cell: skipped, nothing retrained, the run directory byte-identical (exit $rc: $(tail -c 200 "$T/e"))"
# the selectors' metadata holds the SHA-256 of the cell (cell.json without its newline), as the
# toy's checkpoint does: a cell.json edited after training (evaluating selectors trained at one
# budget or on one set of windows at another) is refused (it was evaluated, exit 0); put back,
# it evaluates again
cp -r "$R" "$T/edited"
for ed in 's/"windows":3,/"windows":2,/' 's/k=16"/k=8"/g'; do
	sed "$ed" "$R/cell.json" >"$T/edited/cell.json"
	sb-eval -q "$T/edited" >/dev/null 2>"$T/e"; rc=$?
	cp "$R/cell.json" "$T/edited/cell.json"
	sb-eval -q "$T/edited" >/dev/null 2>>"$T/e"; rc2=$?
	! cmp -s "$R/cell.json" <(sed "$ed" "$R/cell.json") && [ $rc -eq 3 ] && [ $rc2 -eq 0 ] &&
		grep -q "^sb-eval: $T/edited/selector-b8.safetensors: trained for a cell of SHA-256 [0-9a-f]*\.\.\., but $T/edited/cell.json now hashes to" "$T/e"
	t_result $? "cell.json edited after training ($ed): refused naming the file (exit $rc), the original evaluates (exit $rc2: $(head -c 300 "$T/e"))"
done
# an interrupted retrain of an edited cell (same id: its cell.json written, the previous
# cell's train.ndjson and selectors still there) trains again, and is then skipped; so does a
# run whose train.ndjson does not end in sas.scaled.done
mkdir "$T/ri2" && cp -r "$R" "$T/ri2/sas-scaled-s3"
sed 's/"windows":3,/"windows":2,/' "$R/cell.json" >"$T/ri2/sas-scaled-s3/cell.json"
sed 's/"windows":3,/"windows":2,/' "$T/cell.ndjson" >"$T/cell2.ndjson"
for step in edited unfinished; do
	if [ $step = unfinished ]; then
		sed -i '$d' "$T/ri2/sas-scaled-s3/train.ndjson"
	fi
	sb-train -q -o "$T/ri2" "$T/cell2.ndjson" >"$T/a.out" 2>"$T/e" && sb-train -q -o "$T/ri2" "$T/cell2.ndjson" >"$T/b.out" 2>>"$T/e"
	rc=$?
	a=$(jq -r 'select(.kind == "sas.train") | .status' "$T/a.out")
	b=$(jq -r 'select(.kind == "sas.train") | .status' "$T/b.out")
	[ $rc -eq 0 ] && [ "$a $b" = "completed skipped" ] && tail -n 1 "$T/ri2/sas-scaled-s3/train.ndjson" | grep -q '"kind":"sas.scaled.done"'
	t_result $? "$step run directory: trained again, then skipped (got '$a $b', exit $rc: $(head -c 200 "$T/e"))"
done
# selector checkpoints swapped between block sizes (sidecars remade, so only the metadata tells)
cp -r "$R" "$T/swapped"
(cd "$T/swapped" && mv selector-b8.safetensors x && mv selector-b32.safetensors selector-b8.safetensors &&
	mv x selector-b32.safetensors && sha256sum selector-b8.safetensors >selector-b8.safetensors.sha256 &&
	sha256sum selector-b32.safetensors >selector-b32.safetensors.sha256)
sb-eval -q "$T/swapped" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "a selector for block 32, not 8" "$T/e"
t_result $? "selectors swapped between block sizes are refused naming both (exit $rc: $(cat "$T/e"))"
echo "{\"family\":\"sas\",\"seed\":3,\"backbone\":\"$T/nope\"}" >"$T/bad.ndjson"
sb-train -q -o "$T/r2" "$T/bad.ndjson" >/dev/null 2>"$T/e"; rc=$?
[ $rc -ne 0 ] && grep -q "$T/nope" "$T/e" && [ ! -e "$T/r2/sas-scaled-s3" ]
t_result $? "a missing backbone fails naming it, no run directory left (exit $rc)"
# a block size or task given twice (it ran twice under one name): bad input
for f in '"blocks":[8,16,8]' '"tasks":["niah_single_1","niah_single_1"]'; do
	echo "{\"family\":\"sas\",\"seed\":3,\"backbone\":\"$run\",$f}" >"$T/dupf.ndjson"
	sb-train -q -o "$T/r8" "$T/dupf.ndjson" >/dev/null 2>"$T/e"; rc=$?
	[ $rc -eq 3 ] && grep -q "dupf.ndjson:1: .*given twice" "$T/e" && [ ! -e "$T/r8" ]
	t_result $? "$f: exit 3, given twice, nothing trained (exit $rc: $(head -c 200 "$T/e"))"
done
# a block size that does not divide the backbone's T (128): bad input, and nothing left behind
for b in 7 256; do
	echo "{\"family\":\"sas\",\"seed\":3,\"backbone\":\"$run\",\"blocks\":[8,$b]}" >"$T/badb.ndjson"
	sb-train -q -o "$T/r7" "$T/badb.ndjson" >/dev/null 2>"$T/e"; rc=$?
	[ $rc -eq 3 ] && grep -q "field 'blocks': $b does not divide the backbone's T 128" "$T/e" && [ ! -e "$T/r7/sas-scaled-s3" ]
	t_result $? "blocks [8,$b] on a T 128 backbone: exit 3 naming the field, no run directory (exit $rc: $(head -c 200 "$T/e"))"
done
echo "{\"family\":\"sas\",\"seed\":3,\"backbone\":\"$run\",\"blocks\":[8],\"sel_stepz\":3}" >"$T/bad2.ndjson"
sb-train -q -o "$T/r3" "$T/bad2.ndjson" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "bad2.ndjson:1: unknown field 'sel_stepz'" "$T/e"
t_result $? "an unknown scaled-cell field: exit 3 with file:line (exit $rc)"
echo "{\"family\":\"sas\",\"seed\":3,\"backbone\":\"$run\",\"blocks\":[8],\"budget\":\"recipe:s=2,w=16,k=16\",\"masks\":\"recipe;block16:s=2,w=16,k=8\"}" >"$T/bad3.ndjson"
sb-train -q -o "$T/r4" "$T/bad3.ndjson" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "'block16:s=2,w=16,k=8' does not run at the cell's budget 'recipe:s=2,w=16,k=16'" "$T/e"
t_result $? "a mask at another budget than the cell's is refused, naming both (exit $rc: $(head -c 300 "$T/e"))"
# every mask of "masks" is evaluated (up to 8, SB_SAS_SCALED_MAXMASK); more, or one the kernel cannot
# run (h2o), is bad input: before, the 8th and later and any h2o were dropped without a word
m8="recipe;block2;block4;block8;block16;block32;block64;block128"
echo "{\"family\":\"sas\",\"seed\":3,\"id\":\"m8\",\"backbone\":\"$run\",\"blocks\":[8],\"sel_steps\":1,\"windows\":1,\"probes\":0,\"untrained\":0,\"nogate\":0,\"masks\":\"$m8\"}" >"$T/m8.ndjson"
sb-train -q -o "$T/r5" "$T/m8.ndjson" >/dev/null 2>"$T/e" && sb-eval -q "$T/r5/m8" >/dev/null 2>>"$T/e" &&
	grep -q '"methods":\["dense","recipe","block2","block4","block8","block16","block32","block64","block128","sas-b8"\]' "$T/r5/m8/eval.ndjson"
t_result $? "eight masks: every one evaluated ($(grep -o '"methods":[^]]*]' "$T/r5/m8/eval.ndjson" 2>/dev/null; head -c 200 "$T/e"))"
# a mask given twice (at the cell's budget: block16 and block16:s=4,w=64,k=32 are one mask) would be
# evaluated twice under one method name (two sas.scaled.fidelity records of it): bad input
for m in "$m8;struct_random" "recipe;h2o" "recipe;block16;recipe" "block16;block16:s=4,w=64,k=32"; do
	echo "{\"family\":\"sas\",\"seed\":3,\"backbone\":\"$run\",\"blocks\":[8],\"masks\":\"$m\"}" >"$T/bad4.ndjson"
	sb-train -q -o "$T/r6" "$T/bad4.ndjson" >/dev/null 2>"$T/e"; rc=$?
	[ $rc -eq 3 ] && grep -q "bad4.ndjson:1: field 'masks'" "$T/e" && [ ! -e "$T/r6" ]
	t_result $? "masks '$m': refused as bad input, nothing trained (exit $rc: $(head -c 200 "$T/e"))"
done
# dense is always evaluated first: named in the list it takes none of the eight places
echo "{\"family\":\"sas\",\"seed\":3,\"id\":\"m8d\",\"backbone\":\"$run\",\"blocks\":[8],\"sel_steps\":1,\"windows\":1,\"probes\":0,\"untrained\":0,\"nogate\":0,\"masks\":\"dense;$m8\"}" >"$T/m8d.ndjson"
sb-train -q -o "$T/r5" "$T/m8d.ndjson" >/dev/null 2>"$T/e" && sb-eval -q "$T/r5/m8d" >/dev/null 2>>"$T/e" &&
	grep -q '"methods":\["dense","recipe","block2","block4","block8","block16","block32","block64","block128","sas-b8"\]' "$T/r5/m8d/eval.ndjson"
t_result $? "dense and eight masks: accepted, dense once ($(grep -o '"methods":[^]]*]' "$T/r5/m8d/eval.ndjson" 2>/dev/null; head -c 200 "$T/e"))"
# imported backbones (sb-lm import of tests/fixtures/hf, vocabulary 128 and no tokenizer: their
# ids are bytes, so the text is ASCII): Qwen3 (each head's q/k RMSNorm), LFM2 (its gated
# convolutions too), Qwen2 with YaRN (its attention factor) and Granite 3 (its four
# multipliers) train a selector through the training path and are evaluated; Granite 4.0's
# Mamba2 layers are evaluation-only: refused (exit 2) before anything is written
LC_ALL=C tr -cd '\11\12\40-\176' <"$T/corpus.txt" >"$T/ascii.txt"
sas_import() { # fixture corpus-file id: imports, writes $T/i.ndjson for cell id, sets bb
	sb-lm import -q -o "$T/imp" --corpus "docs=$2" --T 64 "$TOP/tests/fixtures/hf/$1" >"$T/imp.out" 2>"$T/e"
	bb=$(sed -n 's/.*"run_dir":"\([^"]*\)".*/\1/p' "$T/imp.out")
	echo "{\"family\":\"sas\",\"seed\":3,\"id\":\"$3\",\"backbone\":\"$bb\",\"blocks\":[8],\"sel_steps\":2,\"sel_batch\":2,\"windows\":1,\"probes\":1,\"tasks\":[\"niah_single_1\"],\"budget\":\"recipe:s=2,w=16,k=16\",\"masks\":\"recipe\"}" >"$T/i.ndjson"
}
# a task of four turns (niah_multiquery, at least 160 bytes: qwen3 imported at T 192) beside a
# single-turn one: decoded turn by turn (the probe must fit all four turns and answers), one
# probe.result per probe and method, `expected` the first turn's answer (the random fixture
# answers none right, so which turns were scored is not seen here: the loop follows
# lib/lm_eval.c's run_probe)
sb-lm import -q -o "$T/impmq" --corpus "docs=$T/ascii.txt" --T 192 "$TOP/tests/fixtures/hf/qwen3" >"$T/imp.out" 2>"$T/e"
bb=$(sed -n 's/.*"run_dir":"\([^"]*\)".*/\1/p' "$T/imp.out")
echo "{\"family\":\"sas\",\"seed\":3,\"id\":\"mq\",\"backbone\":\"$bb\",\"blocks\":[8],\"sel_steps\":0,\"windows\":1,\"probes\":1,\"tasks\":[\"niah_single_1\",\"niah_multiquery\"],\"budget\":\"recipe:s=2,w=16,k=16\",\"masks\":\"recipe\"}" >"$T/mq.ndjson"
sb-train -q -o "$T/ri" "$T/mq.ndjson" >/dev/null 2>>"$T/e" && sb-eval -q "$T/ri/mq" >/dev/null 2>>"$T/e" &&
	jq -e -s '[.[] | select(.kind == "probe.result" and .task == "niah_multiquery")] | length == 5 and
		all(.expected | length > 0)' "$T/ri/mq/eval.ndjson" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "sas.scaled.retrieval" and .subset == "niah_multiquery")] | length == 5 and all(.n == 1)' \
		"$T/ri/mq/eval.ndjson" >/dev/null
t_result $? "niah_multiquery (four turns): evaluated, one probe.result per method (5), expected the first turn's answer ($(head -c 200 "$T/e"))"
for fx in qwen3 lfm2_bias qwen2_yarn granite3 granite_h_rope; do
	sas_import $fx "$T/ascii.txt" "i-$fx"
	sb-train -q -o "$T/ri" "$T/i.ndjson" >/dev/null 2>"$T/e"; rc=$?
	if [ $fx = granite_h_rope ]; then
		[ $rc -eq 2 ] && grep -q "M (Mamba2), V (Mamba) and D (gated DeltaNet) layers" "$T/e" && grep -q "mixtures of experts are evaluation-only" "$T/e" && [ ! -e "$T/ri/i-$fx" ]
		t_result $? "a Granite 4.0 hybrid backbone (Mamba2 layers): refused, exit 2, no run directory (exit $rc: $(head -c 200 "$T/e"))"
		continue
	fi
	[ $rc -eq 0 ] && sb-eval -q "$T/ri/i-$fx" >/dev/null 2>>"$T/e" &&
		[ "$(grep -c '"kind":"sas.scaled.step"' "$T/ri/i-$fx/train.ndjson")" -eq 2 ] &&
		grep -q '"kind":"sas.scaled.fidelity".*"method":"sas-b8"' "$T/ri/i-$fx/eval.ndjson"
	t_result $? "an imported $fx backbone: a selector trains (2 steps) and is evaluated (exit $rc: $(head -c 200 "$T/e"))"
done
# an import whose ids are a tokenizer's (qwen2_tok: tokenizer.json, 832 ids): training samples,
# fidelity windows and probes go through its tokenizer (they used to be bytes read as its ids):
# the records say so, the fidelity text is as many tokens as `sb-lm tokenize` makes of the
# valid part (bytes [0.90 n, 0.95 n) of the file), the outputs are valid UTF-8; a Granite 4.0
# hybrid with a tokenizer is still refused for its Mamba2 layers
sas_import qwen2_tok "$T/corpus.txt" "tok-qwen2_tok"
sb-train -q -o "$T/ri" "$T/i.ndjson" >/dev/null 2>"$T/e" && sb-eval -q "$T/ri/tok-qwen2_tok" >/dev/null 2>>"$T/e"
rc=$?
TE=$T/ri/tok-qwen2_tok/eval.ndjson
n=$(wc -c <"$T/corpus.txt")
a=$(awk -v n="$n" 'BEGIN { printf "%d", n * 0.90 }')
b=$(awk -v n="$n" 'BEGIN { printf "%d", n * 0.95 }')
tail -c +$((a + 1)) "$T/corpus.txt" | head -c $((b - a)) >"$T/valid.txt"
want=$(sb-lm tokenize --tokenizer "$TOP/tests/fixtures/hf/qwen2_tok/tokenizer.json" "$T/valid.txt" | wc -l)
got=$(jq -r 'select(.kind == "sas.scaled.setup") | "\(.ids) \(.fidelity_tokens)"' "$TE" 2>/dev/null)
[ $rc -eq 0 ] && [ "$got" = "tokenizer $want" ] &&
	grep -q '"kind":"sas.scaled.done".*"ids":"tokenizer","bytes_per_token":' "$T/ri/tok-qwen2_tok/train.ndjson" &&
	[ "$(grep -c '"kind":"sas.scaled.step"' "$T/ri/tok-qwen2_tok/train.ndjson")" -eq 2 ] &&
	[ "$(grep -c '"kind":"probe.result"' "$TE")" -eq 5 ] && iconv -f UTF-8 -t UTF-8 "$TE" >/dev/null 2>&1
t_result $? "an imported qwen2_tok backbone (a tokenizer): trains and is evaluated in its tokens (exit $rc; ids and fidelity tokens '$got', want 'tokenizer $want'; $(head -c 200 "$T/e"))"
# an import was never trained (its cell holds the LM default, retrieval alone): its selector
# trains on its corpus's train part and retrieval sequences, half each (it trained on
# retrieval sequences alone, where the fidelity it is measured on is text)
mx=$(jq -r 'select(.kind == "sas.scaled.done") | .mixture' "$T/ri/tok-qwen2_tok/train.ndjson")
[ "$mx" = "docs=0.5,retrieval=0.5" ]
t_result $? "an imported backbone's selector trains on its corpus's text and retrieval, half each (mixture '$mx')"
pipelines/sas-scaled-report.sh "$TE" "$T/ri/tok-qwen2_tok/train.ndjson" | grep -q '^Backbone `.*`, T = 64 tokens (of the backbone tokenizer);'
t_result $? "its report counts T in tokens"
# its valid part cut inside a character at both ends ("aé" x 3001: bytes [8102, 8552) start on
# é's second byte and end after a lead byte): whole characters are tokenized (it failed as
# invalid UTF-8)
for k in $(seq 3001); do printf 'a\303\251'; done >"$T/ae.txt"
sas_import qwen2_tok "$T/ae.txt" "tok-ae"
sb-train -q -o "$T/ri" "$T/i.ndjson" >/dev/null 2>"$T/e" && sb-eval -q "$T/ri/tok-ae" >/dev/null 2>>"$T/e"
rc=$?
[ $rc -eq 0 ] && grep -q '"kind":"sas.scaled.fidelity.window"' "$T/ri/tok-ae/eval.ndjson"
t_result $? "a tokenized backbone whose valid part is cut inside characters: trained and evaluated (exit $rc: $(head -c 200 "$T/e"))"
# a tokenizer with a BOS (its post-processor puts <|im_start|> first, as Llama 3's puts
# <|begin_of_text|>): the same model, text and windows (the LM track's starts) as without it,
# but each window and training example begins with the BOS, so the dense loss of the first
# window and the first step's loss differ from the run without it (every id would be the same
# if the BOS were left out)
mkdir -p "$T/qbos"
cp "$TOP/tests/fixtures/hf/qwen2_tok/config.json" "$TOP/tests/fixtures/hf/qwen2_tok/model.safetensors" "$T/qbos/"
jq '.post_processor = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
	{"Sequence": {"id": "A", "type_id": 0}}], "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
	"special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [1], "tokens": ["<|im_start|>"]}}}' \
	"$TOP/tests/fixtures/hf/qwen2_tok/tokenizer.json" >"$T/qbos/tokenizer.json"
for v in bos nobos; do
	if [ $v = bos ]; then fx_dir=$T/qbos; else fx_dir=$TOP/tests/fixtures/hf/qwen2_tok; fi
	sb-lm import -q -o "$T/imp" --corpus "docs=$T/ascii.txt" --T 64 "$fx_dir" >"$T/imp.out" 2>"$T/e"
	bb=$(jq -r .run_dir "$T/imp.out")
	echo "{\"family\":\"sas\",\"seed\":3,\"id\":\"w-$v\",\"backbone\":\"$bb\",\"blocks\":[8],\"sel_steps\":1,\"sel_batch\":2,\"windows\":2,\"probes\":0,\"budget\":\"recipe:s=2,w=16,k=16\",\"masks\":\"recipe\"}" >"$T/w.ndjson"
	sb-train -q -o "$T/ri" "$T/w.ndjson" >/dev/null 2>>"$T/e" && sb-eval -q "$T/ri/w-$v" >/dev/null 2>>"$T/e"
	jq -s -r '(map(select(.kind == "sas.scaled.setup"))[0].fidelity_tokens | tostring) + " "
		+ (map(select(.kind == "sas.scaled.fidelity.window" and .method == "dense" and .window == 1))[0].start | tostring) + " "
		+ (map(select(.kind == "sas.scaled.fidelity.window" and .method == "dense" and .window == 0))[0].nll | tostring)' \
		"$T/ri/w-$v/eval.ndjson" >"$T/w-$v.txt" 2>>"$T/e"
	jq -r 'select(.kind == "sas.scaled.step") | .loss' "$T/ri/w-$v/train.ndjson" >>"$T/w-$v.txt" 2>>"$T/e"
done
read -r nv1 st1 nll1 <"$T/w-bos.txt"
read -r nv0 st0 nll0 <"$T/w-nobos.txt"
[ "$nv1" = "$nv0" ] && [ "$st1" = "$st0" ] && [ "$st1" = "$((nv1 - 65))" ] && [ -n "$nll1" ] && [ "$nll1" != "$nll0" ] &&
	[ "$(sed -n 2p "$T/w-bos.txt")" != "$(sed -n 2p "$T/w-nobos.txt")" ]
t_result $? "a tokenizer with a BOS: the same windows (last start $st1 of $nv1 tokens), another first-window loss ($nll1 vs $nll0) and first step loss ($(sed -n 2p "$T/w-bos.txt") vs $(sed -n 2p "$T/w-nobos.txt")) ($(head -c 200 "$T/e"))"
sas_import granite_h "$T/ascii.txt" "tok-granite_h"
sb-train -q -o "$T/ri" "$T/i.ndjson" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q "M (Mamba2), V (Mamba)" "$T/e" && [ ! -e "$T/ri/tok-granite_h" ]
t_result $? "an imported granite_h (a tokenizer, Mamba2 layers): refused, exit 2, no run directory (exit $rc: $(head -c 200 "$T/e"))"
# bytes outside a backbone's 128 ids: in the training text refused before the run directory is
# made (exit 3, naming the file, byte and offset); in the evaluation text (the valid part, past
# 90% of the file) refused by sb-eval (exit 3; the indexing past the embedding and the logits
# rows they used to cause is gone)
sas_import qwen3 "$T/corpus.txt" "utf8-train"
sb-train -q -o "$T/ri" "$T/i.ndjson" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "corpus.txt: byte [0-9]* at offset [0-9]* of its train part is outside the backbone's vocabulary (128 ids" "$T/e" && [ ! -e "$T/ri/utf8-train" ]
t_result $? "UTF-8 bytes in the training text of a 128-id backbone: refused, exit 3, no run directory (exit $rc: $(head -c 250 "$T/e"))"
n=$(wc -c <"$T/ascii.txt")
{ head -c $((n * 92 / 100)) "$T/ascii.txt"; printf 'caf\303\251 '; tail -c +$((n * 92 / 100 + 1)) "$T/ascii.txt"; } >"$T/valid8.txt"
sas_import qwen3 "$T/valid8.txt" "utf8-valid"
sb-train -q -o "$T/ri" "$T/i.ndjson" >/dev/null 2>"$T/e" && rc=0 || rc=$?
sb-eval -q "$T/ri/utf8-valid" >/dev/null 2>>"$T/e"; rc2=$?
[ $rc -eq 0 ] && [ $rc2 -eq 3 ] && grep -q "valid8.txt: byte 195 at offset [0-9]* of its valid part is outside" "$T/e" && [ ! -e "$T/ri/utf8-valid/eval.ndjson" ]
t_result $? "a UTF-8 byte in the evaluation text only: trains (exit $rc), sb-eval refuses it, exit 3, no eval.ndjson (exit $rc2: $(head -c 250 "$T/e"))"
t_done
