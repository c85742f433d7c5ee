#!/usr/bin/env bash
# lm_import_granite.sh — a pretrained Mamba2 HYBRID decoder through the LM track (PROTOCOL C(b)):
# sb-lm import of the tiny Granite 4.0 hybrid of tests/fixtures/hf/granite_h (made by transformers'
# own GraniteMoeHybridForCausalLM, gen.py granite; layers M M A M A: Mamba2 mixers and GQA
# attention without positions, Granite's multipliers), then sb-eval, sb-stats and the report: the
# masks act on its two attention layers only, the Mamba2 layers run unchanged, and every
# measurement (fidelity, retrieval by greedy decoding, budgets, efficiency) runs.
. "$(dirname "$0")/../shlib.sh"
if ! command -v sb-lm >/dev/null; then
	t_result 1 "sb-lm is built (make)"
	t_done
fi
HF="$TOP/tests/fixtures/hf/granite_h"
TXT="$TOP/tests/fixtures/lm/shakespeare-head.txt"
sb-lm import -q -o "$T/runs" --corpus "shakespeare=$TXT" --T 256 "$HF" >"$T/o" 2>"$T/e"; rc=$?
run=$(jq -r 'select(.kind == "lm.import") | .run_dir' "$T/o" 2>/dev/null)
[ $rc -eq 0 ] && [ "$(jq -r .status "$T/o")" = imported ] && [ -f "$run/cell.json" ]
t_result $? "import of a Granite 4.0 hybrid: exit $rc, one lm.import record, cell.json ($(cat "$T/e"))"
jq -e '.source.model_type == "granitemoehybrid" and .model.pattern == "MMAMA" and .model.ssm_heads == 4
	and .model.ssm_head_dim == 16 and .model.ssm_state == 16 and .model.ssm_groups == 1 and .model.conv_k == 4
	and .model.ffn == 48 and .model.kv_heads == 2 and .model.tied == 1 and .model.pos == "none"
	and .model.emb_mult == 12 and .model.resid_mult == 0.22 and .model.attn_scale == 0.25 and .model.logit_div == 4
	and .T == 256' "$run/cell.json" >/dev/null
t_result $? "cell.json: the hybrid's layers (MMAMA), the Mamba2 shape, no positions, Granite's multipliers"
# the run's checkpoint holds the toolkit's names (shared_mlp's halves mapped when imported)
head -c 20000 "$run/model.safetensors" | grep -q 'model.layers.2.mlp.gate_proj.weight' &&
	head -c 20000 "$run/model.safetensors" | grep -q 'model.layers.0.mamba.A_log' &&
	! head -c 20000 "$run/model.safetensors" | grep -q 'shared_mlp'
t_result $? "model.safetensors: the toolkit's tensor names (mlp.gate_proj / up_proj / down_proj, mamba.*)"
sb-eval -q --set probes=2 --set windows=4 --set tasks=niah_single_1,vt --set bench_reps=1 \
	--set 'masks=dense;recipe:s=4,w=16,k=8;struct_random;random' "$run" >"$T/ev" 2>"$T/e"; rc=$?
E="$run/eval.ndjson"
[ $rc -eq 0 ] && [ -s "$E" ]
t_result $? "sb-eval of the imported Granite hybrid: exit $rc ($(tail -c 300 "$T/e"))"
jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .units == "tokens" and .source.model_type == "granitemoehybrid"
	and .model.pattern == "MMAMA" and .masked_layers == [2, 4]' "$E" >/dev/null
t_result $? "setup record: units tokens, model type granitemoehybrid, masked_layers [2, 4] (the attention layers)"
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
t_result $? "efficiency: measured on the first attention layer (2), not on a Mamba2 layer"
sb-stats --baseline dense "$E" >"$T/st" 2>"$T/e"; rc=$?
[ $rc -eq 0 ] && [ -s "$T/st" ]
t_result $? "sb-stats reads the records (exit $rc)"
sb-lm report -o "$T/rep" "$E" >/dev/null 2>"$T/e"; rc=$?
R="$T/rep/lm-report.md"
[ $rc -eq 0 ] && grep -q 'a pretrained `granitemoehybrid` decoder imported by `sb-lm import` (PROTOCOL C(b); a hybrid, layers `MMAMA`: A = full attention, M = Mamba2 mixer' "$R" &&
	grep -q 'The masks act on the 2 attention layers (2, 4) only; the 3 Mamba2/convolution layers (0, 1, 3) run unchanged' "$R"
t_result $? "sb-lm report: a Granite hybrid, its attention layers masked, its Mamba2 layers unchanged (exit $rc $(cat "$T/e"))"
# refusals through the command line: exit 3 naming the field, nothing left behind
mkdir -p "$T/bad" && cp "$HF"/* "$T/bad/" &&
	jq '.layer_types[1] = "conv"' "$HF/config.json" >"$T/bad/config.json"
sb-lm import -q -o "$T/runs2" --corpus "x=$TXT" "$T/bad" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "layer_types\[1\] 'conv'" "$T/e" && [ -z "$(ls -A "$T/runs2" 2>/dev/null)" ]
t_result $? "an unsupported layer kind: exit 3 naming layer_types[1] (got $rc: $(cat "$T/e"))"
jq '.num_local_experts = 4 | .num_experts_per_tok = 2' "$HF/config.json" >"$T/bad/config.json"
sb-lm import -q -o "$T/runs2" --corpus "x=$TXT" "$T/bad" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "lacks tensor 'model.layers.0.block_sparse_moe.router.layer.weight'" "$T/e"
t_result $? "experts in the config, none in the checkpoint: exit 3 naming the router's tensor (got $rc)"
t_done
