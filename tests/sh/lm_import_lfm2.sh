#!/usr/bin/env bash
# lm_import_lfm2.sh — a pretrained HYBRID decoder through the LM track (PROTOCOL C(b)): sb-lm import
# of the tiny LFM2 of tests/fixtures/hf/lfm2 (made by transformers' own Lfm2ForCausalLM, gen.py;
# layers C C A C A: gated short convolutions and GQA attention), then sb-eval, sb-stats and the
# report: the masks act on its two attention layers only, the convolutions run unchanged, and
# every measurement (fidelity, retrieval by greedy decoding, budgets, efficiency) runs.
. "$(dirname "$0")/../shlib.sh"
if ! command -v sb-lm >/dev/null; then
	t_result 1 "sb-lm is built (make)"
	t_done
fi
HF="$TOP/tests/fixtures/hf/lfm2"
TXT="$TOP/tests/fixtures/lm/shakespeare-head.txt"
sb-lm import -q -o "$T/runs" --corpus "shakespeare=$TXT" --T 256 "$HF" >"$T/o" 2>"$T/e"; rc=$?
run=$(jq -r 'select(.kind == "lm.import") | .run_dir' "$T/o" 2>/dev/null)
[ $rc -eq 0 ] && [ "$(jq -r .status "$T/o")" = imported ] && [ -f "$run/cell.json" ]
t_result $? "import of an LFM2: exit $rc, one lm.import record, cell.json ($(cat "$T/e"))"
jq -e '.source.model_type == "lfm2" and .model.pattern == "CCACA" and .model.conv_gate == 1 and .model.conv_k == 3
	and .model.qk_norm == 1 and .model.ffn == 48 and .model.kv_heads == 2 and .model.tied == 1
	and (.model | has("conv_bias") | not) and .T == 256' "$run/cell.json" >/dev/null
t_result $? "cell.json: the hybrid's layers (CCACA), gated convolutions of 3, q/k norms, the derived ffn 48"
# the run's checkpoint holds the toolkit's names (LFM2's mapped when imported)
head -c 20000 "$run/model.safetensors" | grep -q 'model.layers.2.self_attn.o_proj.weight' &&
	! head -c 20000 "$run/model.safetensors" | grep -q 'feed_forward\|operator_norm\|embedding_norm'
t_result $? "model.safetensors: the toolkit's tensor names (o_proj, mlp.*, input_layernorm, model.norm)"
sb-eval -q --set probes=2 --set windows=4 --set tasks=niah_single_1,vt --set bench_reps=1 \
	--set 'masks=dense;recipe:s=4,w=16,k=8;struct_random;random' "$run" >"$T/ev" 2>"$T/e"; rc=$?
E="$run/eval.ndjson"
[ $rc -eq 0 ] && [ -s "$E" ]
t_result $? "sb-eval of the imported LFM2: exit $rc ($(tail -c 300 "$T/e"))"
jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .units == "tokens" and .source.model_type == "lfm2"
	and .model.pattern == "CCACA" and .masked_layers == [2, 4]' "$E" >/dev/null
t_result $? "setup record: units tokens, model type lfm2, masked_layers [2, 4] (the attention layers)"
jq -e -s '[.[] | select(.kind == "lm.budget")] | length > 0 and all(([.layers[].layer]) == [2, 4])' "$E" >/dev/null
t_result $? "budgets: every lm.budget record counts the attention layers 2 and 4 only"
jq -e -s '[.[] | select(.kind == "lm.budget" and .method != "dense")] | all(.fraction > 0 and .fraction < 1)' "$E" >/dev/null
t_result $? "budgets: the masks keep a fraction of the causal pairs of those layers"
n=$(jq -s '[.[] | select(.kind == "lm.fidelity.window")] | length' "$E")
jq -e -s '[.[] | select(.kind == "lm.fidelity.window" and .method == "dense")] | all(.kl == 0 and .top1 == 1)' "$E" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "lm.fidelity.window" and .method != "dense")] | any(.kl_tail > 0)' "$E" >/dev/null &&
	[ "$n" -eq 16 ]
t_result $? "fidelity: 4 windows x 4 masks ($n); dense KL 0; a mask changes the logits past its budget"
n=$(jq -s '[.[] | select(.kind == "probe.result")] | length' "$E")
[ "$n" -eq 16 ]
t_result $? "retrieval: 2 tasks x 2 probes x 4 masks probe.result records by greedy decoding (got $n)"
jq -e -s '[.[] | select(.kind == "lm.efficiency")] | length > 0 and all(.layer == 2)' "$E" >/dev/null
t_result $? "efficiency: measured on the first attention layer (2), not on a convolution"
sb-stats --baseline dense "$E" >"$T/st" 2>"$T/e"; rc=$?
[ $rc -eq 0 ] && [ -s "$T/st" ]
t_result $? "sb-stats reads the records (exit $rc)"
sb-lm report -o "$T/rep" "$E" >/dev/null 2>"$T/e"; rc=$?
R="$T/rep/lm-report.md"
[ $rc -eq 0 ] && grep -q 'a pretrained `lfm2` decoder imported by `sb-lm import` (PROTOCOL C(b); a hybrid, layers `CCACA`' "$R" &&
	grep -q 'The masks act on the 2 attention layers (2, 4) only; the 3 convolution layers (0, 1, 3) run unchanged' "$R"
t_result $? "sb-lm report: an LFM2 hybrid, its attention layers masked, its convolutions unchanged (exit $rc $(cat "$T/e"))"
# refusals through the command line: exit 3 naming the field, nothing left behind
mkdir -p "$T/bad" && cp "$HF"/* "$T/bad/" &&
	jq '.layer_types[1] = "sliding_attention"' "$HF/config.json" >"$T/bad/config.json"
sb-lm import -q -o "$T/runs2" --corpus "x=$TXT" "$T/bad" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "layer_types\[1\] 'sliding_attention'" "$T/e" && [ -z "$(ls -A "$T/runs2" 2>/dev/null)" ]
t_result $? "an unsupported layer kind: exit 3 naming layer_types[1] (got $rc: $(cat "$T/e"))"
jq '.block_use_swiglu = false' "$HF/config.json" >"$T/bad/config.json"
sb-lm import -q -o "$T/runs2" --corpus "x=$TXT" "$T/bad" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "block_use_swiglu" "$T/e"
t_result $? "block_use_swiglu false: exit 3 naming it (got $rc)"
jq '.block_multiple_of = 32' "$HF/config.json" >"$T/bad/config.json"
sb-lm import -q -o "$T/runs2" --corpus "x=$TXT" "$T/bad" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "feed_forward.w1.weight' has another shape: \[48, 32\] in the file, \[64, 32\]" "$T/e" &&
	grep -q "rounded up to block_multiple_of 32 = 64" "$T/e"
t_result $? "a feed-forward width the weights do not have: exit 3, the rule spelled out (got $rc)"
t_done
