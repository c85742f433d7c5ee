#!/usr/bin/env bash
# lm_import_hybrid.sh — pretrained HYBRID decoders through the LM track (PROTOCOL C(b)): sb-lm import
# of four tiny hybrids made by transformers' own classes (gen.py), then sb-eval, sb-stats and the
# report. Each has layers ? ? A ? A: the masks act on its two attention layers only, the other
# mixers run unchanged, and every measurement (fidelity, retrieval by greedy decoding, budgets,
# efficiency) runs.
#   tests/fixtures/hf/lfm2       Lfm2ForCausalLM: gated short convolutions and GQA attention (CCACA)
#   tests/fixtures/hf/granite_h  GraniteMoeHybridForCausalLM: Mamba2 mixers and GQA attention
#                                without positions, Granite's multipliers (MMAMA)
#   tests/fixtures/hf/gemma3     Gemma3ForCausalLM: sliding-window (local) and global attention (SSASA)
#   tests/fixtures/hf/bamba      BambaForCausalLM: Mamba2 mixers and attention with RoPE on half of
#                                each head (MMAMA)
#   tests/fixtures/hf/falcon_h1  FalconH1ForCausalLM: attention and a Mamba2 mixer in parallel in every
#                                layer (AAA, parallel_ssm), muP multipliers
#   tests/fixtures/hf/jamba      JambaForCausalLM: Mamba (1) mixers and attention without positions
#                                (VVAVV), experts in layers 1 and 3
#   tests/fixtures/hf/qwen3_next Qwen3NextForCausalLM: gated DeltaNet and gated attention (DDDA),
#                                experts with a gated shared expert
. "$(dirname "$0")/../shlib.sh"
if ! command -v sb-lm >/dev/null; then
	t_result 1 "sb-lm is built (make)"
	t_done
fi
TXT="$TOP/tests/fixtures/lm/shakespeare-head.txt"

# hybrid FIXTURE NAME MODEL_TYPE PATTERN OTHER CELL_JQ HAS_NAME LACKS_NAME
#   NAME: how the checks call the model; OTHER: what its non-attention layers are;
#   CELL_JQ: a jq test of cell.json beyond the pattern; HAS_NAME / LACKS_NAME: a tensor name the
#   run's checkpoint must hold (the toolkit's) and a regular expression of names it must not.
# Sets $HF (the fixture) and $T/$1/bad (a copy of it, for the refusals).
hybrid() {
	local fix=$1 name=$2 type=$3 pat=$4 other=$5 celljq=$6 has=$7 lacks=$8 d="$T/$1" rc run E n units=bytes
	HF="$TOP/tests/fixtures/hf/$fix"
	[ -f "$HF/tokenizer.json" ] && units=tokens # else its ids are bytes (a vocabulary of 256 or fewer)
	mkdir -p "$d"
	sb-lm import -q -o "$d/runs" --corpus "shakespeare=$TXT" --T 256 "$HF" >"$d/o" 2>"$d/e"; rc=$?
	run=$(jq -r 'select(.kind == "lm.import") | .run_dir' "$d/o" 2>/dev/null)
	[ $rc -eq 0 ] && [ "$(jq -r .status "$d/o")" = imported ] && [ -f "$run/cell.json" ]
	t_result $? "$fix: import of $name: exit $rc, one lm.import record, cell.json ($(cat "$d/e"))"
	jq -e --arg type "$type" --arg pat "$pat" \
		".source.model_type == \$type and .model.pattern == \$pat and .T == 256 and ($celljq)" "$run/cell.json" >/dev/null
	t_result $? "$fix: cell.json: model type $type, the hybrid's layers ($pat), $celljq"
	# the run's checkpoint holds the toolkit's names (the family's mapped when imported)
	head -c 20000 "$run/model.safetensors" | grep -q "$has" &&
		! head -c 20000 "$run/model.safetensors" | grep -q -E "$lacks"
	t_result $? "$fix: model.safetensors: the toolkit's tensor names ($has; none matching $lacks)"
	sb-eval -q --set probes=2 --set windows=4 --set tasks=niah_single_1,vt --set bench_reps=1 \
		--set 'masks=dense;recipe:s=4,w=16,k=8;struct_random;random' "$run" >"$d/ev" 2>"$d/e"; rc=$?
	E="$run/eval.ndjson"
	[ $rc -eq 0 ] && [ -s "$E" ]
	t_result $? "$fix: sb-eval of the imported $name: exit $rc ($(tail -c 300 "$d/e"))"
	jq -e -s --arg type "$type" --arg pat "$pat" --arg units "$units" 'map(select(.kind == "lm.eval.setup"))[0]
		| (.units // "bytes") == $units and .source.model_type == $type and .model.pattern == $pat and .masked_layers == [2, 4]' "$E" >/dev/null
	t_result $? "$fix: setup record: units $units, model type $type, masked_layers [2, 4] (the attention layers)"
	jq -e -s '[.[] | select(.kind == "lm.budget")] | length > 0 and all(([.layers[].layer]) == [2, 4])' "$E" >/dev/null
	t_result $? "$fix: budgets: every lm.budget record counts the attention layers 2 and 4 only"
	jq -e -s '[.[] | select(.kind == "lm.budget" and .method != "dense")] | all(.fraction > 0 and .fraction < 1)' "$E" >/dev/null
	t_result $? "$fix: budgets: the masks keep a fraction of the causal pairs of those layers"
	n=$(jq -s '[.[] | select(.kind == "lm.fidelity.window")] | length' "$E")
	jq -e -s '[.[] | select(.kind == "lm.fidelity.window" and .method == "dense")] | all(.kl == 0 and .top1 == 1)' "$E" >/dev/null &&
		jq -e -s '[.[] | select(.kind == "lm.fidelity.window" and .method != "dense")] | any(.kl_tail > 0)' "$E" >/dev/null &&
		[ "$n" -eq 16 ]
	t_result $? "$fix: fidelity: 4 windows x 4 masks ($n); dense KL 0; a mask changes the logits past its budget"
	n=$(jq -s '[.[] | select(.kind == "probe.result")] | length' "$E")
	[ "$n" -eq 16 ]
	t_result $? "$fix: retrieval: 2 tasks x 2 probes x 4 masks probe.result records by greedy decoding (got $n)"
	jq -e -s '[.[] | select(.kind == "lm.efficiency")] | length > 0 and all(.layer == 2)' "$E" >/dev/null
	t_result $? "$fix: efficiency: measured on the first attention layer (2), not on a $other layer"
	sb-stats --baseline dense "$E" >"$d/st" 2>"$d/e"; rc=$?
	[ $rc -eq 0 ] && [ -s "$d/st" ]
	t_result $? "$fix: sb-stats reads the records (exit $rc)"
	sb-lm report -o "$d/rep" "$E" >/dev/null 2>"$d/e"; rc=$?
	[ $rc -eq 0 ] &&
		grep -q "a pretrained \`$type\` decoder imported by \`sb-lm import\` (PROTOCOL C(b); a hybrid, layers \`$pat\`" "$d/rep/lm-report.md" &&
		grep -q "The masks act on the 2 attention layers (2, 4) only; the 3 $other layers (0, 1, 3) run unchanged" "$d/rep/lm-report.md"
	t_result $? "$fix: sb-lm report: $name, its attention layers masked, its $other layers unchanged (exit $rc $(cat "$d/e"))"
	mkdir -p "$d/bad" && cp "$HF"/* "$d/bad/"
}

# refused FIXTURE JQ_EDIT WHAT GREP...: the fixture with its config edited is refused with exit 3,
# stderr holding every GREP (fixed strings), and nothing left in the output directory.
refused() {
	local fix=$1 edit=$2 what=$3 d="$T/$1" rc ok=0 g
	shift 3
	jq "$edit" "$TOP/tests/fixtures/hf/$fix/config.json" >"$d/bad/config.json"
	rm -rf "$d/runs2"
	sb-lm import -q -o "$d/runs2" --corpus "x=$TXT" "$d/bad" >/dev/null 2>"$d/e"; rc=$?
	[ $rc -eq 3 ] || ok=1
	for g in "$@"; do grep -q -F -- "$g" "$d/e" || ok=1; done
	[ -z "$(ls -A "$d/runs2" 2>/dev/null)" ] || ok=1
	t_result $ok "$fix: $what: exit 3 naming it, nothing left behind (got $rc: $(cat "$d/e"))"
}

hybrid lfm2 "an LFM2" lfm2 CCACA convolution \
	'.model.conv_gate == 1 and .model.conv_k == 3 and .model.qk_norm == 1 and .model.ffn == 48
	 and .model.kv_heads == 2 and .model.tied == 1 and (.model | has("conv_bias") | not)' \
	'model.layers.2.self_attn.o_proj.weight' 'feed_forward|operator_norm|embedding_norm'
refused lfm2 '.layer_types[1] = "sliding_attention"' "an unsupported layer kind" "layer_types[1] 'sliding_attention'"
refused lfm2 '.block_use_swiglu = false' "block_use_swiglu false" "block_use_swiglu"
refused lfm2 '.block_multiple_of = 32' "a feed-forward width the weights do not have (the rule spelled out)" \
	"feed_forward.w1.weight' has another shape: [48, 32] in the file, [64, 32]" "rounded up to block_multiple_of 32 = 64"

hybrid granite_h "a Granite 4.0 hybrid" granitemoehybrid MMAMA Mamba2/convolution \
	'.model.ssm_heads == 4 and .model.ssm_head_dim == 16 and .model.ssm_state == 16 and .model.ssm_groups == 1
	 and .model.conv_k == 4 and .model.ffn == 48 and .model.kv_heads == 2 and .model.tied == 1 and .model.pos == "none"
	 and .model.emb_mult == 12 and .model.resid_mult == 0.22 and .model.attn_scale == 0.25 and .model.logit_div == 4' \
	'model.layers.0.mamba.A_log' 'shared_mlp'
head -c 20000 "$T/granite_h/runs"/*/model.safetensors | grep -q 'model.layers.2.mlp.gate_proj.weight'
t_result $? "granite_h: model.safetensors: shared_mlp's halves mapped to mlp.gate_proj / up_proj"
refused granite_h '.layer_types[1] = "conv"' "an unsupported layer kind" "layer_types[1] 'conv'"

# Bamba: Granite 4.0's Mamba2 mixers without its multipliers, RoPE on half of each head
hybrid bamba "a Bamba" bamba MMAMA Mamba2/convolution \
	'.model.ssm_heads == 4 and .model.ssm_head_dim == 16 and .model.ssm_groups == 1 and .model.conv_k == 4
	 and .model.ffn == 48 and .model.kv_heads == 2 and .model.tied == 1 and .model.pos == "rope"
	 and .model.head_dim == 8 and .model.rope_dim == 4 and .model.rope_theta == 10000' \
	'model.layers.2.mlp.gate_proj.weight' 'feed_forward|pre_ff_layernorm|final_layernorm'
refused bamba '.attn_layer_indices = [2, 9]' "an attention layer past the last" "attn_layer_indices[1] is not a layer index"

# Falcon-H1: a parallel hybrid, every layer attention and a Mamba2 mixer side by side; the
# masks act on every layer's attention, the mixers run unchanged; muP multipliers
d="$T/falcon_h1"
mkdir -p "$d"
sb-lm import -q -o "$d/runs" --corpus "shakespeare=$TXT" --T 256 "$TOP/tests/fixtures/hf/falcon_h1" >"$d/o" 2>"$d/e"; rc=$?
run=$(jq -r 'select(.kind == "lm.import") | .run_dir' "$d/o" 2>/dev/null)
[ $rc -eq 0 ] && jq -e '.source.model_type == "falcon_h1" and .model.pattern == "AAA" and .model.parallel_ssm == 1
	and .model.ssm_heads == 6 and .model.ssm_head_dim == 8 and .model.ssm_norm == 0 and .model.key_mult == 0.390625
	and .model.logit_mult == 0.0390625 and .model.ssm_mult_dt > 0.353 and .model.ssm_mult_dt < 0.354' "$run/cell.json" >/dev/null
t_result $? "falcon_h1: import (exit $rc): cell.json has the parallel mixers, no gated norm and the multipliers ($(cat "$d/e"))"
head -c 20000 "$run/model.safetensors" | grep -q 'model.layers.1.mamba.in_proj.weight' &&
	! head -c 20000 "$run/model.safetensors" | grep -q -E 'feed_forward|pre_ff_layernorm|final_layernorm|mamba.norm'
t_result $? "falcon_h1: model.safetensors: each layer's mixer under the toolkit's names, no gated norm"
sb-eval -q --set probes=2 --set windows=4 --set tasks=niah_single_1 --set bench_reps=1 \
	--set 'masks=dense;recipe:s=4,w=16,k=8;struct_random' "$run" >"$d/ev" 2>"$d/e"; rc=$?
E="$run/eval.ndjson"
[ $rc -eq 0 ] && jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .masked_layers == [0, 1, 2]' "$E" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "lm.budget" and .method != "dense")] | length > 0 and
		all(([.layers[].layer]) == [0, 1, 2] and .fraction > 0 and .fraction < 1)' "$E" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "lm.fidelity.window" and .method != "dense")] | any(.kl_tail > 0)' "$E" >/dev/null
t_result $? "falcon_h1: sb-eval (exit $rc): every layer's attention masked, budgets over layers 0-2, a mask moves the logits ($(tail -c 300 "$d/e"))"
sb-lm report -o "$d/rep" "$E" >/dev/null 2>"$d/e"; rc=$?
[ $rc -eq 0 ] && grep -q "a parallel hybrid: every layer attention and a Mamba2 mixer side by side" "$d/rep/lm-report.md" &&
	grep -q "The masks act on the attention of every layer (0, 1, 2); the Mamba2 mixers beside it run unchanged" "$d/rep/lm-report.md"
t_result $? "falcon_h1: sb-lm report names the parallel mixers and what the masks act on (exit $rc $(cat "$d/e"))"
mkdir -p "$d/bad" && cp "$TOP/tests/fixtures/hf/falcon_h1"/* "$d/bad/"
refused falcon_h1 '.ssm_multipliers = [1, 1, 1]' "ssm_multipliers of three" "'ssm_multipliers' must be an array of 5 numbers"
printf '{"family":"sas","seed":0,"backbone":"%s","blocks":[8],"dsel":8,"sel_steps":1,"sel_batch":1,"windows":1,"probes":0,"budget":"recipe:s=2,w=8,k=8","masks":"recipe"}\n' \
	"$run" >"$d/sas.ndjson"
sb-train -q -o "$d/sas" "$d/sas.ndjson" >"$d/so" 2>"$d/e"; rc=$?
[ $rc -ne 0 ] && grep -q "parallel Mamba2 mixers" "$d/e"
t_result $? "falcon_h1: a scaled SAS cell on it is refused, naming why (evaluation only; exit $rc: $(head -c 300 "$d/e"))"

# Jamba: Mamba (1) mixers (V) and one attention layer without positions (V V A V V), experts
# in place of the MLP in layers 1 and 3: the masks act on layer 2 alone
d="$T/jamba"
mkdir -p "$d"
sb-lm import -q -o "$d/runs" --corpus "shakespeare=$TXT" --T 256 "$TOP/tests/fixtures/hf/jamba" >"$d/o" 2>"$d/e"; rc=$?
run=$(jq -r 'select(.kind == "lm.import") | .run_dir' "$d/o" 2>/dev/null)
[ $rc -eq 0 ] && jq -e '.source.model_type == "jamba" and .model.pattern == "VVAVV" and .model.ssm_inner == 64
	and .model.ssm_dt_rank == 2 and .model.ssm_inner_norm == 1 and .model.moe_layers == "01010" and .model.pos == "none"' \
	"$run/cell.json" >/dev/null &&
	head -c 30000 "$run/model.safetensors" | grep -q 'model.layers.3.block_sparse_moe.experts.1.down_proj.weight' &&
	! head -c 30000 "$run/model.safetensors" | grep -q -E 'feed_forward|pre_ff_layernorm|final_layernorm'
t_result $? "jamba: import (exit $rc): its Mamba layers, experts kept apart under the toolkit's names ($(cat "$d/e"))"
sb-eval -q --set probes=2 --set windows=4 --set tasks=niah_single_1 --set bench_reps=1 \
	--set 'masks=dense;recipe:s=4,w=16,k=8;struct_random' "$run" >"$d/ev" 2>"$d/e"; rc=$?
E="$run/eval.ndjson"
[ $rc -eq 0 ] && jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .masked_layers == [2]' "$E" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "lm.budget" and .method != "dense")] | length > 0 and
		all(([.layers[].layer]) == [2] and .fraction > 0 and .fraction < 1)' "$E" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "lm.fidelity.window" and .method != "dense")] | any(.kl_tail > 0)' "$E" >/dev/null &&
	[ "$(jq -s '[.[] | select(.kind == "probe.result")] | length' "$E")" -eq 6 ]
t_result $? "jamba: sb-eval (exit $rc): the masks on layer 2 alone, budgets there, a mask moves the logits, 6 probes ($(tail -c 300 "$d/e"))"
sb-lm report -o "$d/rep" "$E" >/dev/null 2>"$d/e"; rc=$?
[ $rc -eq 0 ] && grep -q 'a hybrid, layers `VVAVV`: A = full attention, V = Mamba (1) mixer' "$d/rep/lm-report.md" &&
	grep -q "The masks act on the 1 attention layers (2) only; the 4 Mamba layers (0, 1, 3, 4) run unchanged" "$d/rep/lm-report.md"
t_result $? "jamba: sb-lm report names its Mamba layers, unchanged under the masks (exit $rc $(cat "$d/e"))"
mkdir -p "$d/bad" && cp "$TOP/tests/fixtures/hf/jamba"/* "$d/bad/"
refused jamba '.mamba_d_state = 4' "a state size the weights do not have" "mamba.x_proj.weight' has another shape"

# Qwen3-Next: gated DeltaNet layers (D) and one gated attention layer (D D D A), experts with a
# gated shared expert: the masks act on layer 3 alone
d="$T/qwen3_next"
mkdir -p "$d"
sb-lm import -q -o "$d/runs" --corpus "shakespeare=$TXT" --T 256 "$TOP/tests/fixtures/hf/qwen3_next" >"$d/o" 2>"$d/e"; rc=$?
run=$(jq -r 'select(.kind == "lm.import") | .run_dir' "$d/o" 2>/dev/null)
[ $rc -eq 0 ] && jq -e '.source.model_type == "qwen3_next" and .model.pattern == "DDDA" and .model.attn_gate == 1
	and .model.gdn_vheads == 4 and .model.moe_shared_gate == 1 and .model.rope_dim == 4' "$run/cell.json" >/dev/null &&
	sb-eval -q --set probes=2 --set windows=4 --set tasks=niah_single_1 --set bench_reps=1 \
		--set 'masks=dense;recipe:s=4,w=16,k=8;struct_random' "$run" >"$d/ev" 2>>"$d/e" &&
	jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .masked_layers == [3]' "$run/eval.ndjson" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "lm.budget" and .method != "dense")] | length > 0 and
		all(([.layers[].layer]) == [3] and .fraction > 0 and .fraction < 1)' "$run/eval.ndjson" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "lm.fidelity.window" and .method != "dense")] | any(.kl_tail > 0)' "$run/eval.ndjson" >/dev/null &&
	sb-lm report -o "$d/rep" "$run/eval.ndjson" >/dev/null 2>>"$d/e" &&
	grep -q 'a hybrid, layers `DDDA`: A = full attention, D = gated DeltaNet' "$d/rep/lm-report.md" &&
	grep -q "The masks act on the 1 attention layers (3) only; the 3 gated DeltaNet layers (0, 1, 2) run unchanged" "$d/rep/lm-report.md"
t_result $? "qwen3_next: imported (exit $rc), evaluated with the masks on layer 3 alone, the report names its DeltaNet layers ($(head -c 300 "$d/e"))"

# Gemma 3 (the 270M/1B text layout): sliding-window attention layers (window 8 here) run
# unchanged, the global ones are masked; the sandwich norms mapped onto the toolkit's names
hybrid gemma3 "a Gemma 3" gemma3_text SSASA sliding-window \
	'.model.window == 8 and .model.rope_local_theta == 10000 and .model.rope_theta == 1000000 and .model.sandwich == 1
	 and .model.mlp == "geglu" and .model.qk_norm == 1 and .model.head_dim == 16 and .model.kv_heads == 2
	 and .model.rope_scaling == "linear" and .model.tied == 1' \
	'model.layers.2.post_mixer_layernorm.weight' 'pre_feedforward_layernorm'
grep -q 'S = sliding-window attention (8 keys)' "$T/gemma3/rep/lm-report.md"
t_result $? "gemma3: the report's legend names the sliding-window layers and their window"
refused gemma3 '.use_bidirectional_attention = true' "EmbeddingGemma's bidirectional attention" \
	"use_bidirectional_attention is true"
refused granite_h '.num_local_experts = 4 | .num_experts_per_tok = 2' "experts in the config, none in the checkpoint" \
	"lacks tensor 'model.layers.0.block_sparse_moe.router.layer.weight'"
t_done
