#!/usr/bin/env bash
# lm_import.sh — a pretrained decoder through the LM track (PROTOCOL C(b)): sb-lm import of a
# tiny Hugging Face Qwen2 with its byte-level BPE tokenizer (tests/fixtures/hf/qwen2_tok, made
# by gen.py), then sb-eval on the run directory: fidelity windows and probes in tokens, the
# records the trained runs write; the import's command-line contract and refusals.
. "$(dirname "$0")/../shlib.sh"
if ! command -v sb-lm >/dev/null; then
	t_result 1 "sb-lm is built (make)"
	t_done
fi
HF="$TOP/tests/fixtures/hf/qwen2_tok"
TXT="$TOP/tests/fixtures/lm/shakespeare-head.txt"
sb-lm import -q -o "$T/runs" --corpus "shakespeare=$TXT" --T 256 "$HF" >"$T/o" 2>"$T/e"; rc=$?
run=$(jq -r 'select(.kind == "lm.import") | .run_dir' "$T/o" 2>/dev/null)
[ $rc -eq 0 ] && [ "$(jq -r .status "$T/o")" = imported ] && [ -f "$run/cell.json" ] &&
	[ -f "$run/model.safetensors.sha256" ] && cmp -s "$run/tokenizer.json" "$HF/tokenizer.json"
t_result $? "import: exit $rc, one lm.import record, cell.json, checkpoint + sidecar, tokenizer copy ($(cat "$T/e"))"
jq -e '.source.format == "huggingface" and .source.model_type == "qwen2" and (.source.files | length) == 3
	and .tokenizer == "tokenizer.json" and .model.vocab == 832 and .model.attn_bias == 2 and .T == 256
	and (has("steps") | not)' "$run/cell.json" >/dev/null
t_result $? "cell.json: source (config, tokenizer, weights with SHA-256), the Qwen2 layout, no training fields"
want=$(sha256sum "$HF/model.safetensors" | cut -d' ' -f1)
jq -e --arg h "$want" '.source.files[] | select(.name == "model.safetensors") | .sha256 == $h' "$run/cell.json" >/dev/null
t_result $? "cell.json records the SHA-256 of the weights read"
sb-lm import -q -o "$T/runs" --corpus "shakespeare=$TXT" --T 256 "$HF" >"$T/o2" 2>/dev/null
[ "$(jq -r .status "$T/o2")" = existed ] && [ "$(jq -r .run_dir "$T/o2")" = "$run" ]
t_result $? "a second import keeps the run (status existed)"
# run.meta's argv is the command line as typed, the subcommand included (it can be replayed)
sb-lm eval -q -j 1 --probes 0 --windows 1 --masks dense --bench-reps 1 -o "$T/argv" "$run" >/dev/null 2>"$T/e"
[ "$(head -n 1 "$T/argv/eval.ndjson" | jq -c '.argv[1:4]')" = '["eval","-q","-j"]' ]
t_result $? "sb-lm eval's run.meta argv keeps the subcommand ($(head -n 1 "$T/argv/eval.ndjson" | jq -c '.argv[0:3]'))"
# degenerate settings are usage errors, not silent: no mask named, a mask parameter twice
for m in '' ';' 'recipe:s=4,s=5'; do
	sb-lm eval -q -j 1 --probes 0 --windows 1 --masks "$m" --bench-reps 1 -o "$T/deg" "$run" >/dev/null 2>"$T/e"
	rc=$?
	[ $rc -eq 2 ] && grep -q "no mask named\|given twice" "$T/e" && [ ! -e "$T/deg/eval.ndjson" ]
	t_result $? "--masks '$m': usage error (exit $rc: $(head -n 1 "$T/e"))"
done
# no windows: the fidelity means are null (nothing was measured), not 0 (one probe: windows 0
# with probes 0 is a usage error, lm_e2e.sh)
sb-lm eval -q -j 1 --probes 1 --tasks niah_single_1 --windows 0 --masks dense --bench-reps 1 -o "$T/w0" "$run" >/dev/null 2>"$T/e"
jq -e -s 'map(select(.kind == "lm.fidelity")) | length > 0 and
	all(.n_windows == 0 and .kl == null and .top1 == null and .corr == null and .ppl_dense == null)' "$T/w0/eval.ndjson" >/dev/null
t_result $? "--windows 0: lm.fidelity's means and perplexities are null, not 0 (ppl_dense not 1)" "$(head -n 2 "$T/e")"
# evaluation, through sb-eval's family dispatch
sb-eval -q --set probes=2 --set windows=4 --set tasks=niah_single_1,vt --set bench_reps=1 \
	--set 'masks=dense;recipe:s=4,w=16,k=8;struct_random;random' "$run" >"$T/ev" 2>"$T/e"; rc=$?
E="$run/eval.ndjson"
[ $rc -eq 0 ] && [ -s "$E" ]
t_result $? "sb-eval of the imported run: exit $rc ($(tail -c 300 "$T/e"))"
jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .units == "tokens" and .tokenizer == "tokenizer.json" and .T == 256
	and .source.model_type == "qwen2" and (.probe_len_bytes | length) == 2 and all(.probe_len_bytes[]; . > 256)
	and (has("train_steps") or has("train_batch") or has("mixture") | not)' "$E" >/dev/null
t_result $? "setup record: units tokens, the tokenizer, the source, probes longer in bytes than T tokens, no training fields"
n=$(jq -s '[.[] | select(.kind == "lm.fidelity.window")] | length' "$E")
[ "$n" -eq 16 ]
t_result $? "fidelity: 4 windows x 4 masks (got $n)"
jq -e -s '[.[] | select(.kind == "lm.fidelity.window" and .method == "dense")] |
	all(.kl == 0 and .top1 == 1 and .start_unit == "token")' "$E" >/dev/null
t_result $? "dense against itself: KL 0, top-1 1, window starts in tokens"
jq -e -s '[.[] | select(.kind == "lm.fidelity.window" and .method != "dense")] | any(.kl_tail > 0)' "$E" >/dev/null
t_result $? "a mask changes the logits past the recipe's budget (some KL > 0 in the tail)"
n=$(jq -s '[.[] | select(.kind == "probe.result")] | length' "$E")
[ "$n" -eq 16 ]
t_result $? "retrieval: 2 tasks x 2 probes x 4 masks probe.result records (got $n)"
# the same records when the dense logits are recomputed per mask instead of kept
# (SB_LM_DENSE_KEEP=0: the path of large vocabularies)
cp "$E" "$T/ev_keep.ndjson"
SB_LM_DENSE_KEEP=0 sb-eval -q --set probes=2 --set windows=4 --set tasks=niah_single_1,vt --set bench_reps=1 \
	--set 'masks=dense;recipe:s=4,w=16,k=8;struct_random;random' "$run" >/dev/null 2>&1
strip() { grep -E '"kind":"(probe.result|lm.fidelity|lm.fidelity.window|lm.budget|lm.retrieval|lm.retrieval.pair|lm.fidelity.pair)"' "$1"; }
[ "$(strip "$E" | wc -l)" -gt 30 ] && cmp -s <(strip "$T/ev_keep.ndjson") <(strip "$E")
t_result $? "dense logits recomputed per mask (SB_LM_DENSE_KEEP=0): the same records ($(strip "$E" | wc -l) compared)"
# the statistics read them as they read a trained run's
sb-stats --baseline dense "$E" >"$T/st" 2>"$T/e"; rc=$?
[ $rc -eq 0 ] && [ -s "$T/st" ]
t_result $? "sb-stats reads the records (exit $rc)"
# the report says what was evaluated, in tokens
sb-lm report -o "$T/rep" "$E" >/dev/null 2>"$T/e" && grep -q 'a pretrained `qwen2` decoder imported by `sb-lm import`' "$T/rep/lm-report.md" &&
	grep -q 'windows of T+1 tokens' "$T/rep/lm-report.md" && grep -q 'next token' "$T/rep/lm-report.md" &&
	grep -q "\`model.safetensors\` $(echo "$want" | cut -c1-12)" "$T/rep/lm-report.md"
t_result $? "sb-lm report: a pretrained qwen2, windows and perplexity in tokens, the weights' SHA-256 ($(cat "$T/e"))"
# a record the report reads with a field missing or of another type: refused naming FILE:LINE,
# not rendered as a blank (nan/2)
for case in 'lm.retrieval|"correct":[0-9]*,||missing field .correct.' 'lm.fidelity|"kl":[-0-9.e]*,|"kl":"oops",|field .kl. must be a number or null'; do
	IFS='|' read -r kind from to want <<<"$case"
	ln=$(grep -n "\"kind\":\"$kind\"" "$E" | head -n 1 | cut -d: -f1)
	sed "${ln}s/$from/$to/" "$E" >"$T/badrep.ndjson"
	sb-lm report -o "$T/badrep" "$T/badrep.ndjson" >/dev/null 2>"$T/e"
	rc=$?
	[ $rc -eq 3 ] && grep -q "badrep.ndjson:$ln: $kind: $want" "$T/e" && [ ! -e "$T/badrep" ]
	t_result $? "sb-lm report: a malformed $kind record is refused naming its line (exit $rc: $(head -n 1 "$T/e"))"
done
# the make pipeline: import, eval, report, stats; a second make does nothing (-o: the binaries
# under test are used as built, never relinked by the pipeline with another CUDA setting)
MK=(-s -C "$TOP" -o bin/sb-lm -o bin/sb-eval -o bin/sb-stats lm-pretrained LM_HF="$HF" LM_PT_OUT="$T/mk" LM_PT_T=256 LM_PT_CORPUS="shakespeare=$TXT"
	LM_EVAL_SET="probes=1 windows=2 tasks=vt bench_reps=1")
make "${MK[@]}" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 0 ] && [ -s "$T/mk/report/lm-report.md" ] && [ -d "$T/mk/stats" ]
t_result $? "make lm-pretrained: report and stats (exit $rc: $(tail -c 300 "$T/e"))"
before=$(stat -c %Y.%s "$T/mk/eval/eval.ndjson")
sleep 1
make "${MK[@]}" >/dev/null 2>&1
[ "$before" = "$(stat -c %Y.%s "$T/mk/eval/eval.ndjson")" ]
t_result $? "a second make lm-pretrained re-evaluates nothing"
make -s -C "$TOP" -o bin/sb-lm lm-pretrained LM_PT_OUT="$T/mk2" >/dev/null 2>"$T/e"; rc=$?
[ $rc -ne 0 ] && grep -q 'set LM_HF' "$T/e"
t_result $? "make lm-pretrained without LM_HF says what to set (exit $rc)"
# refusals
sb-lm import -q -o "$T/runs" "$HF" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q -- '--corpus' "$T/e"
t_result $? "no --corpus: usage error (exit $rc)"
sb-lm import -q -o "$T/runs" --corpus "x=$TXT" "$T/nope" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 4 ] && grep -q "$T/nope/config.json" "$T/e"
t_result $? "a missing directory: exit 4 naming config.json (got $rc)"
mkdir -p "$T/gpt2" && cp "$HF"/* "$T/gpt2/" &&
	jq '.model_type = "gpt2"' "$HF/config.json" >"$T/gpt2/config.json"
sb-lm import -q -o "$T/runs2" --corpus "x=$TXT" "$T/gpt2" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "model_type 'gpt2'" "$T/e" && [ ! -e "$T/runs2" ] || [ -z "$(ls -A "$T/runs2" 2>/dev/null)" ]
t_result $? "another model type: exit 3 naming it, no run left (got $rc)"
# refused before anything is written: a --haystack that names no corpus (it was recorded, and
# the evaluation quietly used the first corpus), a corpus that is not there (the failure came
# at sb-eval), a model of 832 ids without its tokenizer.json (evaluated as bytes read as ids)
noimp() { # NAME WANT_RC GREP ARGS...
	local name=$1 want=$2 pat=$3
	shift 3
	rm -rf "$T/runsx"
	sb-lm import -q -o "$T/runsx" "$@" >/dev/null 2>"$T/e"; local rc=$?
	[ $rc -eq "$want" ] && grep -q -- "$pat" "$T/e" && [ -z "$(ls -A "$T/runsx" 2>/dev/null)" ]
	t_result $? "import refused: $name: exit $rc (want $want), naming '$pat', no run left ($(head -c 200 "$T/e"))"
}
noimp "--haystack zz" 2 "haystack zz" --corpus "s=$TXT" --haystack zz --T 256 "$HF"
noimp "a corpus that is not there" 4 "$T/nope.txt" --corpus "s=$TXT" --corpus "t=$T/nope.txt" --T 256 "$HF"
mkdir -p "$T/notok" && cp "$HF"/config.json "$HF"/model.safetensors "$T/notok/"
noimp "832 ids, no tokenizer.json" 3 "no tokenizer.json, and the model's 832 ids are not bytes" --corpus "s=$TXT" --T 256 "$T/notok"
touch "$T/notok/tokenizer.model"
noimp "only a tokenizer.model" 3 "save_pretrained" --corpus "s=$TXT" --T 256 "$T/notok"
# a SentencePiece-style tokenizer (mistral_sp: llama2.json, Llama 2's legacy conversion, <s> as
# its BOS): the import and an evaluation in its tokens
SP="$TOP/tests/fixtures/hf/mistral_sp"
n=$(sb-lm tokenize --tokenizer "$SP/tokenizer.json" --bos "$SP/text.txt" | wc -l)
[ "$n" -eq 86 ] && [ "$(sb-lm tokenize --tokenizer "$SP/tokenizer.json" --bos "$SP/text.txt" | head -n 1)" -eq 1 ] &&
	sb-lm tokenize --tokenizer "$SP/tokenizer.json" "$SP/text.txt" | sb-lm tokenize --tokenizer "$SP/tokenizer.json" --decode |
	cmp -s - "$SP/text.txt"
t_result $? "SentencePiece-style tokenize: text.txt -> $n ids with <s> (HF gave 86), --decode gives the text back"
sb-lm import -q -o "$T/runsp" --corpus "shakespeare=$TXT" --T 256 "$SP" >"$T/osp" 2>"$T/e" &&
	rsp=$(jq -r .run_dir "$T/osp") &&
	sb-eval -q --set probes=2 --set windows=2 --set tasks=niah_single_1,vt --set bench_reps=1 \
		--set 'masks=dense;recipe:s=4,w=16,k=8' "$rsp" >/dev/null 2>>"$T/e" &&
	jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .units == "tokens" and .source.model_type == "mistral"
		and .T == 256' "$rsp/eval.ndjson" >/dev/null &&
	[ "$(jq -s '[.[] | select(.kind == "lm.fidelity.window")] | length' "$rsp/eval.ndjson")" -ge 2 ] &&
	[ "$(jq -s '[.[] | select(.kind == "probe.result")] | length' "$rsp/eval.ndjson")" -eq 8 ]
t_result $? "a Mistral with a SentencePiece-style tokenizer: imported and evaluated in its tokens (2 windows, 2 x 2 probes x 2 masks) ($(head -c 300 "$T/e"))"
# Gemma 3 (gemma3_mm: the multimodal layout of 4B-27B, S A S A, a vision tower beside the
# language model): imported and evaluated; the masks act on its global layers (1 and 3) only,
# the sliding-window layers run unchanged; a scaled SAS cell on it is refused (its layers are
# evaluation-only), naming why, with no run left
G3="$TOP/tests/fixtures/hf/gemma3_mm"
sb-lm import -q -o "$T/rung3" --corpus "shakespeare=$TXT" --T 256 "$G3" >"$T/og3" 2>"$T/e" &&
	rg3=$(jq -r .run_dir "$T/og3") &&
	sb-eval -q --set probes=2 --set windows=2 --set tasks=niah_single_1,vt --set bench_reps=1 \
		--set 'masks=dense;recipe:s=4,w=16,k=8;struct_random' "$rg3" >/dev/null 2>>"$T/e" &&
	jq -e '.source.model_type == "gemma3"' "$rg3/cell.json" >/dev/null &&
	jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .masked_layers == [1, 3]
		and .model.pattern == "SASA" and .model.window == 8 and .model.mlp == "geglu" and .model.sandwich == 1' \
		"$rg3/eval.ndjson" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "lm.budget")] | length == 6 and all([.layers[].layer] == [1, 3]) and
		all(.method == "dense" or .fraction < 0.25)' "$rg3/eval.ndjson" >/dev/null &&
	[ "$(jq -s '[.[] | select(.kind == "probe.result")] | length' "$rg3/eval.ndjson")" -eq 12 ]
t_result $? "Gemma 3 (multimodal layout): imported, evaluated; masks on layers 1 and 3 only, budget < 0.25 there, 12 probes ($(head -c 300 "$T/e"))"
# sas_on FIXTURE WHAT: a scaled SAS cell on the fixture imported at T 64 trains its selector
# (2 steps, through the training path) and sb-eval measures it
sas_on() {
	local rg R
	sb-lm import -q -o "$T/sasrun_$1" --corpus "shakespeare=$TXT" --T 64 "$TOP/tests/fixtures/hf/$1" >"$T/o_$1" 2>"$T/e" &&
		rg=$(jq -r .run_dir "$T/o_$1") &&
		printf '{"family":"sas","seed":0,"backbone":"%s","blocks":[8],"dsel":8,"sel_steps":2,"sel_batch":2,"windows":2,"probes":0,"budget":"recipe:s=2,w=8,k=8","masks":"recipe"}\n' \
			"$rg" >"$T/sas_$1.ndjson" &&
		sb-train -q -o "$T/sas_$1" "$T/sas_$1.ndjson" >/dev/null 2>>"$T/e" &&
		R=$(ls -d "$T/sas_$1"/*/ | head -n 1) &&
		[ "$(grep -c '"kind":"sas.scaled.step"' "$R/train.ndjson")" -eq 2 ] &&
		sb-eval -q "$R" >/dev/null 2>>"$T/e" &&
		grep '"kind":"sas.scaled.fidelity"' "$R/eval.ndjson" | grep -q '"method":"sas-b8"'
	t_result $? "a scaled SAS cell on $2 trains its selector (2 steps) and is evaluated ($(head -c 300 "$T/e"))"
}
# Gemma 3 (gemma3: S S A S A, head_dim 16): through sliding-window layers, sandwich norms, GeGLU
sas_on gemma3 "Gemma 3"
# Gemma 2 (S A S A as its config class derives it; soft-capping of scores at 2 and logits at 3):
# imported and evaluated, masks on the global layers 1 and 3 only, the capping in the cell, the
# records and the report
G2="$TOP/tests/fixtures/hf/gemma2"
sb-lm import -q -o "$T/rung2" --corpus "shakespeare=$TXT" --T 256 "$G2" >"$T/og2" 2>"$T/e" &&
	rg2=$(jq -r .run_dir "$T/og2") &&
	sb-eval -q --set probes=2 --set windows=2 --set tasks=niah_single_1,vt --set bench_reps=1 \
		--set 'masks=dense;recipe:s=4,w=16,k=8;struct_random' "$rg2" >/dev/null 2>>"$T/e" &&
	jq -e '.source.model_type == "gemma2" and .model.attn_softcap == 2 and .model.final_softcap == 3
		and (.model | has("qk_norm") | not) and (.model | has("rope_local_theta")) and .model.rope_local_theta == 0' \
		"$rg2/cell.json" >/dev/null &&
	jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .masked_layers == [1, 3] and .model.pattern == "SASA"
		and .model.attn_softcap == 2' "$rg2/eval.ndjson" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "lm.budget")] | length == 6 and all([.layers[].layer] == [1, 3])' \
		"$rg2/eval.ndjson" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "lm.fidelity.window" and .method == "dense")] | all(.kl == 0)' \
		"$rg2/eval.ndjson" >/dev/null &&
	[ "$(jq -s '[.[] | select(.kind == "probe.result")] | length' "$rg2/eval.ndjson")" -eq 12 ] &&
	sb-lm report -o "$T/g2rep" "$rg2/eval.ndjson" >/dev/null 2>>"$T/e" &&
	grep -q 'Soft-capping (cap tanh(x / cap)) of the attention scores at 2 and the logits at 3; the masks select among the capped scores' \
		"$T/g2rep/lm-report.md"
t_result $? "Gemma 2: imported, evaluated; soft-capping 2 / 3 in cell.json, the records and the report; masks on layers 1 and 3 only; 12 probes ($(head -c 300 "$T/e"))"
# and a scaled SAS cell on it: the selector trains through the soft-capped scores and logits
sas_on gemma2 "Gemma 2 (soft-capping 2 / 3)"
# OLMo 3 (S S S A S: Olmo3Config's every fourth layer global; no pre-norms): imported and
# evaluated, the masks on layer 3 alone; a scaled SAS cell on it trains (its selector through
# the post-norms and the q/k norms over all heads)
sb-lm import -q -o "$T/runo3" --corpus "shakespeare=$TXT" --T 256 "$TOP/tests/fixtures/hf/olmo3" >"$T/oo3" 2>"$T/e" &&
	ro3=$(jq -r .run_dir "$T/oo3") &&
	sb-eval -q --set probes=1 --set windows=2 --set tasks=vt --set bench_reps=1 \
		--set 'masks=dense;recipe:s=4,w=16,k=8' "$ro3" >/dev/null 2>>"$T/e" &&
	jq -e '.source.model_type == "olmo3" and .model.prenorm == 0 and .model.qk_norm == 2 and .model.sandwich == 1' \
		"$ro3/cell.json" >/dev/null &&
	jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .masked_layers == [3] and .model.pattern == "SSSAS"' \
		"$ro3/eval.ndjson" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "lm.budget")] | length > 0 and all([.layers[].layer] == [3])' "$ro3/eval.ndjson" >/dev/null
t_result $? "OLMo 3: imported, evaluated; no pre-norms, q/k norms over all heads; masks on layer 3 alone ($(head -c 300 "$T/e"))"
# EXAONE 4 (its global layer NoPE): the report says which layers take RoPE
sb-lm import -q -o "$T/rune4" --corpus "shakespeare=$TXT" --T 256 "$TOP/tests/fixtures/hf/exaone4" >"$T/oe4" 2>"$T/e" &&
	re4=$(jq -r .run_dir "$T/oe4") &&
	sb-eval -q --set probes=0 --set windows=2 --set bench_reps=1 --set 'masks=dense;recipe:s=4,w=16,k=8' "$re4" \
		>/dev/null 2>>"$T/e" &&
	sb-lm report -o "$T/e4rep" "$re4/eval.ndjson" >/dev/null 2>>"$T/e" &&
	grep -q 'RoPE by layer `11101` (0 = none: NoPE)' "$T/e4rep/lm-report.md" &&
	jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .masked_layers == [3] and .model.rope_layers == "11101"' \
		"$re4/eval.ndjson" >/dev/null
t_result $? "EXAONE 4: imported, evaluated (masks on its global layer 3); the report names the NoPE layer ($(head -c 300 "$T/e"))"
sas_on olmo3 "OLMo 3"
# Ministral (A S S A: full and sliding-window layers as layer_types says): the selector trains
# through its sliding layers, the masks on layers 0 and 3
sas_on ministral "Ministral"
# Cohere2 (S S S A S: sliding layers with RoPE, the global one NoPE; attention and MLP in parallel):
# imported and evaluated, the masks on layer 3 alone; a scaled SAS cell on it is refused
sb-lm import -q -o "$T/runc2" --corpus "shakespeare=$TXT" --T 256 "$TOP/tests/fixtures/hf/cohere2" >"$T/oc2" 2>"$T/e" &&
	rc2=$(jq -r .run_dir "$T/oc2") &&
	sb-eval -q --set probes=1 --set windows=2 --set tasks=vt --set bench_reps=1 \
		--set 'masks=dense;recipe:s=4,w=16,k=8' "$rc2" >/dev/null 2>>"$T/e" &&
	jq -e '.source.model_type == "cohere2" and .model.parallel_mlp == 1 and .model.norm_bias == 0
		and .model.rope_layers == "11101" and .model.logit_mult == 0.5' "$rc2/cell.json" >/dev/null &&
	jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .masked_layers == [3]' "$rc2/eval.ndjson" >/dev/null &&
	printf '{"family":"sas","seed":0,"backbone":"%s","blocks":[8],"dsel":8,"sel_steps":1,"sel_batch":1,"windows":1,"probes":0,"budget":"recipe:s=2,w=8,k=8","masks":"recipe"}\n' \
		"$rc2" >"$T/sas_c2.ndjson" &&
	! sb-train -q -o "$T/sas_c2" "$T/sas_c2.ndjson" >/dev/null 2>"$T/e2" && grep -q "a parallel MLP" "$T/e2"
t_result $? "Cohere2: imported, evaluated (masks on its global layer 3); a scaled SAS cell on it refused, naming why ($(head -c 300 "$T/e"))"
# Qwen3-MoE (experts in place of the MLP in layers 0 and 2, gates over all experts): imported,
# its experts kept apart in the run's checkpoint, evaluated; masks on every layer; the
# parameter count is the checkpoint's 34,832 (the experts included)
sb-lm import -q -o "$T/runqm" --corpus "shakespeare=$TXT" --T 256 "$TOP/tests/fixtures/hf/qwen3_moe" >"$T/oqm" 2>"$T/e" &&
	rqm=$(jq -r .run_dir "$T/oqm") &&
	sb-eval -q --set probes=1 --set windows=2 --set tasks=vt --set bench_reps=1 \
		--set 'masks=dense;recipe:s=4,w=16,k=8' "$rqm" >/dev/null 2>>"$T/e" &&
	jq -e '.source.model_type == "qwen3_moe" and .model.moe_experts == 4 and .model.moe_layers == "101"
		and .model.moe_dense == 0 and .model.moe_gate == 1' "$rqm/cell.json" >/dev/null &&
	jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .masked_layers == [0, 1, 2] and .parameter_count == 34832' \
		"$rqm/eval.ndjson" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "lm.fidelity.window" and .method != "dense")] | any(.kl_tail > 0)' "$rqm/eval.ndjson" >/dev/null
t_result $? "Qwen3-MoE: imported, evaluated; experts in layers 0 and 2, masks on every layer ($(head -c 300 "$T/e"))"
mkdir -p "$T/badtok" && cp "$HF"/* "$T/badtok/" && printf '{"model": {"type": "WordPiece"}}' >"$T/badtok/tokenizer.json"
noimp "a tokenizer the evaluation cannot read" 3 "$T/badtok/tokenizer.json: model.type: only \"BPE\"" --corpus "x=$TXT" --T 256 "$T/badtok"
sb-lm import --help | grep -q 'Usage: sb-lm import'
t_result $? "import --help"
# sb-lm tokenize: the run's tokenizer on text.txt gives the ids transformers' fixture holds
TOK="$HF/tokenizer.json"
sb-lm tokenize --tokenizer "$TOK" "$HF/text.txt" >"$T/ids" 2>"$T/e"; rc=$?
n=$(wc -l <"$T/ids")
[ $rc -eq 0 ] && [ "$n" -eq 70 ] && sb-lm tokenize --tokenizer "$TOK" --decode "$T/ids" | cmp -s - "$HF/text.txt"
t_result $? "tokenize: text.txt -> $n ids (HF gave 70), --decode gives the text back (exit $rc)"
printf 'ab\xffcd' | sb-lm tokenize --tokenizer "$TOK" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q 'byte 2\|offset 2' "$T/e"
t_result $? "tokenize: invalid UTF-8 is bad input naming the offset (exit $rc: $(cat "$T/e"))"
# NFC (the tokenizer's normalizer): decomposed e + U+0301, Hangul jamo, misordered marks are
# normalised, not refused: the ids of their NFC, which --decode gives back
printf 'cafe\xcc\x81 \xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab q\xcc\x87\xcc\xa3' >"$T/nonnfc"
printf 'caf\xc3\xa9 \xed\x95\x9c q\xcc\xa3\xcc\x87' >"$T/nfc"
sb-lm tokenize --tokenizer "$TOK" "$T/nonnfc" >"$T/ids_d" 2>"$T/e"; rc=$?
sb-lm tokenize --tokenizer "$TOK" "$T/nfc" >"$T/ids_c" 2>>"$T/e"
[ $rc -eq 0 ] && [ -s "$T/ids_c" ] && cmp -s "$T/ids_d" "$T/ids_c" &&
	sb-lm tokenize --tokenizer "$TOK" --decode "$T/ids_d" | cmp -s - "$T/nfc"
t_result $? "tokenize: text that is not NFC gets the ids of its NFC, which --decode gives back (exit $rc $(cat "$T/e"))"
echo 5 99999 | sb-lm tokenize --tokenizer "$TOK" --decode >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ]
t_result $? "tokenize --decode: an id outside the vocabulary is bad input (exit $rc: $(cat "$T/e"))"
echo hi | sb-lm tokenize >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q -- '--tokenizer' "$T/e"
t_result $? "tokenize without --tokenizer: usage error (exit $rc)"
# a non-ASCII text ("aé" x 3001): its valid part, bytes [8102, 8552), begins on é's second byte
# and ends after a lead byte, and the probes' essays are cut inside characters; the evaluation
# tokenizes whole characters (it failed as invalid UTF-8 in both)
for k in $(seq 3001); do printf 'a\303\251'; done >"$T/ae.txt"
sb-lm import -q -o "$T/runs-ae" --corpus "ae=$T/ae.txt" --T 64 "$HF" >"$T/o" 2>"$T/e"
rae=$(jq -r .run_dir "$T/o" 2>/dev/null)
sb-eval -q --set probes=1 --set windows=2 --set tasks=niah_single_1,niah_single_2 --set bench_reps=1 \
	--set 'masks=dense;recipe:s=2,w=16,k=16' "$rae" >/dev/null 2>>"$T/e"; rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '"kind":"probe.result"' "$rae/eval.ndjson")" -eq 4 ] &&
	jq -e -s 'map(select(.kind == "lm.fidelity" and .method == "dense"))[0].n_windows == 2' "$rae/eval.ndjson" >/dev/null
t_result $? "a valid part and essays cut inside characters: evaluated, 2 windows, 4 probes (exit $rc: $(tail -c 200 "$T/e"))"
# a tokenizer whose post-processor puts a BOS first (<|im_start|>, as Llama 3's puts
# <|begin_of_text|>): the same windows' starts and the same probes' lengths, but each window
# and probe begins with the BOS, so the dense loss of window 0 differs from the same model's
# without it (the ids would be the same if it were left out)
mkdir -p "$T/qbos"
cp "$HF/config.json" "$HF/model.safetensors" "$T/qbos/"
jq '.post_processor = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
	{"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [1],
	"tokens": ["<|im_start|>"]}}}' "$HF/tokenizer.json" >"$T/qbos/tokenizer.json"
for v in bos nobos; do
	if [ $v = bos ]; then d=$T/qbos; else d=$HF; fi
	sb-lm import -q -o "$T/runs-$v" --corpus "shakespeare=$TXT" --T 64 "$d" >"$T/o" 2>"$T/e"
	r=$(jq -r .run_dir "$T/o" 2>/dev/null)
	sb-lm eval -q -j 1 --probes 1 --tasks niah_single_1 --windows 2 --masks dense --bench-reps 1 -o "$T/ev-$v" "$r" >/dev/null 2>>"$T/e"
	jq -s -r '(map(select(.kind == "lm.fidelity.window" and .window == 1))[0].start | tostring) + " "
		+ (map(select(.kind == "lm.fidelity.window" and .window == 0))[0].nll | tostring)' "$T/ev-$v/eval.ndjson" >"$T/l-$v" 2>>"$T/e"
done
read -r s1 n1 <"$T/l-bos"
read -r s0 n0 <"$T/l-nobos"
[ -n "$n1" ] && [ "$n1" != null ] && [ "$s1" = "$s0" ] && [ "$n1" != "$n0" ]
t_result $? "a tokenizer with a BOS: the same window starts ($s1, $s0), another loss of window 0 ($n1 vs $n0) ($(head -c 200 "$T/e"))"
# a relative --corpus path is recorded absolute: the run is evaluated from another directory
mkdir -p "$T/rel/sub"
cp "$TXT" "$T/rel/sub/text.txt"
(cd "$T/rel" && sb-lm import -q -o runs --corpus "t=sub/text.txt" --corpus "u=./sub/text.txt" --T 64 "$HF") >"$T/o" 2>"$T/e"
rr=$T/rel/$(jq -r .run_dir "$T/o" 2>/dev/null)
[ "$(jq -c .corpora "$rr/cell.json" 2>/dev/null)" = "[\"t=$T/rel/sub/text.txt\",\"u=$T/rel/sub/text.txt\"]" ] &&
	(cd / && sb-lm eval -q -j 1 --probes 0 --windows 1 --masks dense --bench-reps 1 -o "$T/rel/ev" "$rr" >/dev/null 2>>"$T/e")
t_result $? "relative corpus paths recorded absolute ($(jq -c .corpora "$rr/cell.json" 2>/dev/null)); evaluated from / ($(head -c 200 "$T/e"))"
# the run's tokenizer copy is checked against the SHA-256 cell.json recorded at import: an
# edited one (still a valid tokenizer: one merge dropped) is refused by the evaluation and by a
# scaled SAS cell on it (exit 3, nothing written); it used to be used as it was
cp -r "$run" "$T/edited"
jq -c '.model.merges |= .[1:]' "$run/tokenizer.json" >"$T/edited/tokenizer.json"
sb-lm eval -q -j 1 --probes 0 --windows 1 --masks dense --bench-reps 1 -o "$T/ed" "$T/edited" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "edited/tokenizer.json: SHA-256 .* is not the .* cell.json recorded" "$T/e" && [ ! -e "$T/ed/eval.ndjson" ]
t_result $? "an edited tokenizer copy: the evaluation refuses it, exit 3 ($rc: $(head -c 200 "$T/e"))"
echo "{\"family\":\"sas\",\"seed\":1,\"id\":\"ed\",\"backbone\":\"$T/edited\",\"blocks\":[8],\"sel_steps\":1,\"sel_batch\":1,\"windows\":1,\"probes\":0,\"masks\":\"recipe\"}" >"$T/ed.ndjson"
sb-train -q -o "$T/sas-ed" "$T/ed.ndjson" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "is not the .* cell.json recorded" "$T/e" && [ ! -e "$T/sas-ed/ed" ]
t_result $? "an edited tokenizer copy: a scaled SAS cell on it is refused, exit 3, no run directory ($rc: $(head -c 200 "$T/e"))"
# a tokenizer of more tokens than the model's vocabulary (qwen2_tok's 802 beside qwen3's 128):
# refused by the import (the evaluation and SAS check it again, through sb_lm_run_tokenizer,
# which test_lm_import calls on a run directly)
mkdir -p "$T/vq"
cp "$TOP/tests/fixtures/hf/qwen3/config.json" "$TOP/tests/fixtures/hf/qwen3/model.safetensors" "$HF/tokenizer.json" "$T/vq/"
noimp "a tokenizer larger than the model's vocabulary" 3 "802 tokens, more than the model's vocabulary (128)" --corpus "t=$TXT" --T 64 "$T/vq"
t_done
