#!/usr/bin/env bash
# lm_cli.sh — sb-lm's command-line contract: help, version, usage errors (exit 2),
# bad input (exit 3), the probe printer.
. "$(dirname "$0")/../shlib.sh"
if ! command -v sb-lm >/dev/null; then
	t_result 1 "sb-lm is built (make)"
	t_done
fi
sb-lm --help >"$T/h" && grep -q 'Usage: sb-lm COMMAND' "$T/h"
t_result $? "--help prints the usage to stdout, exit 0"
sb-lm --version | grep -q '^sb-lm '
t_result $? "--version"
sb-lm >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q "Try 'sb-lm --help'" "$T/e"
t_result $? "no command: exit 2 with a hint (got $rc)"
sb-lm bogus >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ]
t_result $? "unknown command: exit 2 (got $rc)"
echo '{"family":"lm","model":{"pattern":"CXA"},"corpora":["x=/nonexistent"]}' >"$T/bad.json"
sb-lm train -q -o "$T/runs" "$T/bad.json" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "pattern 'CXA'" "$T/e"
t_result $? "a bad layer pattern is refused (exit $rc: $(cat "$T/e"))"
echo '{"family":"lm","stepz":3,"corpora":["x=/nonexistent"]}' >"$T/bad2.json"
sb-lm train -q -o "$T/runs" "$T/bad2.json" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "unknown field 'stepz'" "$T/e"
t_result $? "an unknown cell field is bad input (exit $rc)"
echo '{"family":"lm","corpora":["x=/nonexistent/file.txt"]}' >"$T/bad3.json"
sb-lm train -q -o "$T/runs" "$T/bad3.json" >"$T/o" 2>"$T/e"; rc=$?
[ $rc -eq 4 ] && grep -q '/nonexistent/file.txt' "$T/e"
t_result $? "a missing corpus is an I/O error naming the file (exit $rc)"
echo '{"family":"lm","corpora":["x=/dev/zero"]}' >"$T/bad4.json"
timeout 20 sb-lm train -q -o "$T/runs4" "$T/bad4.json" >"$T/o" 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q '/dev/zero: not a regular file' "$T/e"
t_result $? "a corpus that is a device (/dev/zero) is bad input, not an endless read (exit $rc: $(head -c 200 "$T/e"))"
sb-lm probe --task niah_single_1 --len 128 --index 3 >"$T/p" 2>"$T/e"
[ "$(wc -c <"$T/p")" -eq 128 ] && grep -q "answers: '" "$T/e"
t_result $? "probe prints exactly --len bytes and the answers on stderr"
grep -q '; depth 0\.[0-9]*$' "$T/e" &&
	sb-lm probe --task kv_recall --len 200 >/dev/null 2>"$T/e" && grep -q '; no haystack, no depth$' "$T/e" && ! grep -q nan "$T/e"
t_result $? "probe: a haystack task names its depth, kv_recall (no haystack) says it has none, not 'depth nan' ($(cat "$T/e"))"
sb-lm probe --task niah_multiquery --len 100 >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q 'at least 160' "$T/e"
t_result $? "a context too short for a task is a usage error (exit $rc)"
sb-lm eval "$T/nope" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 4 ]
t_result $? "eval of a missing run directory: exit 4 (got $rc)"
# sb-lm train --set writes the value into the cell before the cell is read: what it trains is
# the cell written with that value, whose derived fields (kv_heads = heads, head_dim =
# d / heads, max_T = T) are derived again unless the cell or a --set gives them (before, they
# kept the values of the cell as written: --set model.d=32 on d 16, heads 2 gave head_dim 8)
shk=$TOP/tests/fixtures/lm/shakespeare-head.txt
lmcell() { # FILE MODEL_FIELDS [T]: a cell of one training step
	printf '{"family":"lm","model":{%s,"pattern":"AC","ffn":32},"batch":2,"steps":1,"T":%s,"corpora":["s=%s"],"mixture":"s=1"}\n' \
		"$2" "${3:-32}" "$shk" >"$1"
}
built() { # RUNS: the cell trained there (id, attention shape, max_T, parameter count)
	grep -o '"heads":[0-9]*,"kv_heads":[0-9]*,"head_dim":[0-9]*\|"max_T":[0-9]*\|"T":[0-9]*\|"cell_id":"[^"]*"\|"parameter_count":[0-9]*' \
		"$1"/*/cell.json 2>/dev/null | tr '\n' ' '
}
setcase() { # NAME WRITTEN_MODEL WRITTEN_T BASE_MODEL WANT --set...: the base cell with the --set values
	local name=$1 wm=$2 wt=$3 bm=$4 want=$5 rc w s
	shift 5
	lmcell "$T/w_$name.json" "$wm" "$wt"
	lmcell "$T/b_$name.json" "$bm"
	sb-lm train -q -o "$T/rw_$name" "$T/w_$name.json" >/dev/null 2>"$T/e" &&
		sb-lm train -q -o "$T/rs_$name" "$@" "$T/b_$name.json" >/dev/null 2>>"$T/e"
	rc=$? w=$(built "$T/rw_$name") s=$(built "$T/rs_$name")
	[ $rc -eq 0 ] && [ -n "$w" ] && [ "$w" = "$s" ] && grep -q "$want" <<<"$s"
	t_result $? "train $* on {$bm} is the cell written {$wm}, T $wt ($want): set: $s; written: $w" "$(head -n 2 "$T/e")"
}
setcase d '"d":32,"heads":2' 32 '"d":16,"heads":2' '"head_dim":16 .*"parameter_count":20928' --set model.d=32
setcase heads '"d":16,"heads":4' 32 '"d":16,"heads":2' '"heads":4,"kv_heads":4,"head_dim":4 ' --set model.heads=4
setcase heads3 '"d":48,"heads":3' 32 '"d":16,"heads":2' '"heads":3,"kv_heads":3,"head_dim":16 ' \
	--set model.heads=3 --set model.d=48
setcase kv_kept '"d":16,"heads":4,"kv_heads":1' 32 '"d":16,"heads":2,"kv_heads":1' '"heads":4,"kv_heads":1,"head_dim":4 ' \
	--set model.heads=4
setcase kv_set '"d":16,"heads":4,"kv_heads":2' 32 '"d":16,"heads":2' '"heads":4,"kv_heads":2,"head_dim":4 ' \
	--set model.kv_heads=2 --set model.heads=4
setcase T '"d":16,"heads":2' 64 '"d":16,"heads":2' '"max_T":64 .*"T":64 ' --set T=64
lmcell "$T/b16.json" '"d":16,"heads":2'
sb-lm train -q -o "$T/rs_bad" --set model.heads=3 "$T/b16.json" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q "^sb-lm: $T/b16.json:1 with the --set values: model: d 16 is not a multiple of heads 3" "$T/e" &&
	[ -z "$(ls -A "$T/rs_bad" 2>/dev/null)" ]
t_result $? "train --set model.heads=3 on d 16: a usage error with the written cell's message, no run (exit $rc: $(head -n 1 "$T/e"))"
sb-lm train -q -o "$T/rs_bad" --set model.n_layer=3 "$T/b16.json" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q "^sb-lm: --set model.n_layer: derived from the other fields" "$T/e"
t_result $? "train --set of a derived field (model.n_layer) is a usage error (exit $rc: $(head -n 1 "$T/e"))"
# sb-lm eval --budgets: 1 to 8 numbers, as sb-eval --set budgets= (before, a ninth was dropped
# and ',,' evaluated no budget, exit 0)
run=$(ls -d "$T"/rw_d/*/)
run=${run%/}
for b in 1,2,3,4,5,6,7,8,9,10 ,, 8,; do
	sb-lm eval -q -o "$T/evb" --probes 0 --windows 1 --bench-reps 1 --masks dense,recipe --budgets "$b" "$run" >"$T/o" 2>"$T/e"
	rc=$?
	[ $rc -eq 2 ] && grep -q "^sb-lm: budgets '$b': 1 to 8 numbers, comma-separated" "$T/e" && [ ! -e "$T/evb" ] && [ ! -s "$T/o" ]
	t_result $? "eval --budgets $b: a usage error, as sb-eval's, nothing written (exit $rc: $(head -n 1 "$T/e"))"
done
sb-lm eval -q -o "$T/evb" --probes 0 --windows 1 --bench-reps 1 --masks dense,recipe --budgets 1,2,3,4,5,6,7,8 "$run" >/dev/null 2>"$T/e"
rc=$? n=$(grep -c '"kind":"lm.blocks"' "$T/evb/eval.ndjson" 2>/dev/null)
[ $rc -eq 0 ] && [ "$n" = 8 ]
t_result $? "eval --budgets of 8 numbers: 8 lm.blocks records (exit $rc, $n records)" "$(head -n 2 "$T/e")"
# a cell.json the LM reader refuses is named, RUN_DIR/cell.json, by sb-lm eval as by sb-eval
mkdir -p "$T/sasrun" "$T/nocorp"
echo '{"family":"sas","id":"sas-s1","seed":1}' >"$T/sasrun/cell.json"
echo '{"family":"lm","seed":1}' >"$T/nocorp/cell.json"
for c in "sasrun:unknown field 'id'" "nocorp:'corpora' must name at least one corpus"; do
	d=${c%%:*} want=${c#*:}
	sb-lm eval -q -o "$T/ev_$d" "$T/$d" >/dev/null 2>"$T/e"; rc=$?
	[ $rc -eq 3 ] && [ "$(wc -l <"$T/e")" -eq 1 ] && grep -q "^sb-lm: $T/$d/cell.json: cell: $want" "$T/e" && [ ! -e "$T/ev_$d" ]
	t_result $? "sb-lm eval of a run whose cell.json it refuses ($d) names RUN_DIR/cell.json (exit $rc: $(head -n 1 "$T/e"))"
done
if command -v sb-eval >/dev/null; then
	sb-eval -q "$T/nocorp" >/dev/null 2>"$T/e"; rc=$?
	[ $rc -eq 3 ] && grep -q "^sb-eval: $T/nocorp/cell.json: cell: 'corpora' must name at least one corpus" "$T/e"
	t_result $? "sb-eval names the same file, once (exit $rc: $(head -n 1 "$T/e"))"
fi
# sb-train and sb-eval hand "family": "lm" cells and run directories to the LM track
if command -v sb-train >/dev/null && command -v sb-eval >/dev/null; then
	echo '{"family":"lmx","seed":0}' >"$T/fam.json"
	sb-train -q -o "$T/runs" "$T/fam.json" >/dev/null 2>"$T/e"; rc=$?
	[ $rc -eq 3 ] && grep -q 'unknown family "lmx"' "$T/e"
	t_result $? "sb-train: an unknown family is bad input naming it (exit $rc)"
	sb-train -q -o "$T/runs" "$T/bad2.json" >/dev/null 2>"$T/e"; rc=$?
	[ $rc -eq 3 ] && grep -q "^sb-train: $T/bad2.json:1: lm cell: .*unknown field 'stepz'" "$T/e"
	t_result $? "sb-train: an LM cell's unknown field is bad input, named FILE:LINE (exit $rc: $(head -n 1 "$T/e"))"
	sb-train -q -o "$T/runs" "$T/bad3.json" >"$T/o" 2>"$T/e"; rc=$?
	[ $rc -eq 4 ] && grep -q '"kind":"lm.train".*"status":"failed"' "$T/o"
	t_result $? "sb-train: an LM cell whose corpus is missing fails with exit 4 and a failed lm.train record (exit $rc)"
	# a mixture that cannot make an example is bad input found before the run directory is
	# made (before: exit 2 at the first step, a run directory with train.failed left behind)
	head -c 200 "$TOP/tests/fixtures/lm/shakespeare-head.txt" >"$T/hay200.txt"
	cp "$TOP/tests/fixtures/lm/shakespeare-head.txt" "$T/shk.txt"
	m='"model":{"d":16,"pattern":"AC","heads":2,"ffn":32},"batch":2,"steps":3'
	for bad in "nofit:{\"family\":\"lm\",$m,\"T\":32,\"corpora\":[\"s=$T/shk.txt\"],\"mixture\":\"retrieval=1\"}:fits a context of 32" \
		"nofitwarm:{\"family\":\"lm\",$m,\"T\":64,\"warm_T\":16,\"warm_steps\":2,\"corpora\":[\"s=$T/shk.txt\"],\"mixture\":\"niah_single_1=1\"}:fits a context of 16" \
		"shorthay:{\"family\":\"lm\",$m,\"T\":256,\"corpora\":[\"h=$T/hay200.txt\"],\"mixture\":\"retrieval=1\"}:haystack corpus h has 180 bytes"; do
		name=${bad%%:*} rest=${bad#*:} want=${bad##*:}
		printf '%s\n' "${rest%:*}" >"$T/$name.json"
		sb-train -q -o "$T/runs_$name" "$T/$name.json" >/dev/null 2>"$T/e"; rc=$?
		[ $rc -eq 3 ] && [ "$(wc -l <"$T/e")" -eq 1 ] && grep -q "^sb-train: $T/$name.json:1: lm cell: .*$want" "$T/e" &&
			[ -z "$(ls -A "$T/runs_$name" 2>/dev/null)" ]
		t_result $? "sb-train: a mixture that cannot make an example ($name) is bad input, one line naming FILE:LINE, no run directory (exit $rc: $(head -n 2 "$T/e"))"
	done
	# AdamW's betas must be below 1 (torch.optim.AdamW refuses 1: the bias correction
	# 1 - beta^t is 0); before, such a cell ran, made NaN parameters and failed at step 2
	for b in b1 b2; do
		printf '{"family":"lm",%s,"T":32,"%s":1,"corpora":["s=%s"],"mixture":"s=1"}\n' "$m" $b "$T/shk.txt" >"$T/beta_$b.json"
		sb-train -q -o "$T/runs_beta_$b" "$T/beta_$b.json" >/dev/null 2>"$T/e"; rc=$?
		[ $rc -eq 3 ] && grep -q "^sb-train: $T/beta_$b.json:1: lm cell: .*'$b' must be a number in \[0, 1)" "$T/e" &&
			[ -z "$(ls -A "$T/runs_beta_$b" 2>/dev/null)" ]
		t_result $? "sb-train: $b = 1 is bad input naming the field, no run directory (exit $rc: $(head -n 1 "$T/e"))"
	done
	# a trained decoder reads bytes: a vocabulary below 256 is bad input (before, the cell
	# trained, its byte ids past the embedding table read and wrote other tensors' memory)
	printf '{"family":"lm","model":{"d":16,"pattern":"AC","heads":2,"ffn":32,"vocab":100},"batch":2,"steps":2,"T":32,"corpora":["s=%s"],"mixture":"s=1"}\n' "$T/shk.txt" >"$T/vocab.json"
	sb-train -q -o "$T/runs_vocab" "$T/vocab.json" >/dev/null 2>"$T/e"; rc=$?
	[ $rc -eq 3 ] && grep -q "^sb-train: $T/vocab.json:1: lm cell: .*vocab 100 is below 256" "$T/e" && [ -z "$(ls -A "$T/runs_vocab" 2>/dev/null)" ]
	t_result $? "sb-train: a byte decoder with vocab 100 is bad input, no run directory (exit $rc: $(head -n 1 "$T/e"))"
	sb-train --help | grep -q '"family": "lm"'
	t_result $? "sb-train --help names the lm family"
	mkdir -p "$T/lmrun" && cp "$T/bad3.json" "$T/lmrun/cell.json"
	sb-eval -q "$T/lmrun" >"$T/o" 2>"$T/e"; rc=$?
	[ $rc -eq 3 ] && grep -q 'cell_id .* does not match its content (lm\.dense\.s0\.CACA' "$T/e" &&
		! grep -q '"kind":"lm.eval"' "$T/o"
	t_result $? "sb-eval: an LM run directory goes to the LM evaluator (a cell.json without its LM cell_id: exit $rc)"
	# -0 and 0 are one setting: the id the evaluator computes for the cell is the same
	for z in 0 -0; do
		mkdir -p "$T/lmz$z"
		echo "{\"family\":\"lm\",\"corpora\":[\"x=/nonexistent/file.txt\"],\"weight_decay\":$z,\"lr_min\":$z.0}" >"$T/lmz$z/cell.json"
		sb-eval -q "$T/lmz$z" >/dev/null 2>"$T/ez$z"
	done
	id0=$(grep -o '(lm\.dense[^)]*)' "$T/ez0"); idm=$(grep -o '(lm\.dense[^)]*)' "$T/ez-0")
	[ -n "$id0" ] && [ "$id0" = "$idm" ]
	t_result $? "an LM cell's -0 and 0 give one cell id (0: '$id0', -0: '$idm')"
	rm -f "$T/lmrun/eval.ndjson"
	sb-eval -q --set probez=3 "$T/lmrun" >"$T/o" 2>"$T/e"; rc=$?
	[ $rc -eq 2 ] && grep -q "unknown evaluation setting 'probez'" "$T/e" && [ ! -s "$T/o" ] && [ ! -e "$T/lmrun/eval.ndjson" ]
	t_result $? "sb-eval: an unknown --set key is a usage error (exit $rc), with nothing on stdout ($(wc -c <"$T/o") bytes) and no eval.ndjson"
	sb-eval -q --set probes=x "$T/lmrun" "$T/nosuch" >"$T/o" 2>"$T/e"; rc=$?
	[ $rc -eq 2 ] && [ ! -s "$T/o" ] && grep -q "^sb-eval: invalid value for probes: 'x'" "$T/e" && ! grep -q nosuch "$T/e"
	t_result $? "sb-eval: a bad --set value is a usage error before any run is read (exit $rc, $(wc -c <"$T/o") bytes on stdout)" "$(cat "$T/e")"
	mkdir -p "$T/encrun" && echo '{"task":"x"}' >"$T/encrun/cell.json"
	sb-eval -q --set probes=3 "$T/encrun" >/dev/null 2>"$T/e"; rc=$?
	[ $rc -eq 2 ] && grep -q 'not to encoder runs' "$T/e"
	t_result $? "sb-eval: --set on an encoder run is a usage error (exit $rc)"
fi
# a hybrid of sliding-window (S) and global attention trained here: S layers train (window 8
# keys, their own RoPE base), the evaluation masks the A layer alone, the report names the S
# layers
printf '{"family":"lm","model":{"d":16,"heads":2,"pattern":"SAS","ffn":32,"pos":"rope","window":8,"rope_local_theta":1000},"batch":2,"steps":3,"T":32,"corpora":["s=%s"],"mixture":"s=1"}\n' \
	"$shk" >"$T/swa.json"
sb-lm train -q -o "$T/rswa" "$T/swa.json" >/dev/null 2>"$T/e"; rc=$?
rsw=$(ls -d "$T/rswa"/*/ 2>/dev/null | head -n 1)
[ $rc -eq 0 ] && [ -n "$rsw" ] && jq -e '.model.pattern == "SAS" and .model.window == 8 and .model.rope_local_theta == 1000' \
	"$rsw/cell.json" >/dev/null &&
	jq -e -s '[.[] | select(.kind == "train.done")] | length == 1 and .[0].steps_run == 3
		and (.[0].final_loss | . > 0 and . < 10)' "$rsw/train.ndjson" >/dev/null
t_result $? "a cell with S layers (pattern SAS, window 8, local RoPE base) trains: exit $rc, cell.json keeps them ($(head -c 200 "$T/e"))"
sb-lm eval -q --masks 'dense;recipe:s=2,w=4,k=4' --probes 0 --windows 2 --bench-reps 1 "$rsw" >/dev/null 2>"$T/e" &&
	jq -e -s 'map(select(.kind == "lm.eval.setup"))[0] | .masked_layers == [1]' "$rsw/eval.ndjson" >/dev/null &&
	sb-lm report -o "$T/swarep" "$rsw/eval.ndjson" >/dev/null 2>>"$T/e"
rc=$?
[ $rc -eq 0 ] && grep -q 'S = sliding-window attention (8 keys, RoPE base 1000)' "$T/swarep/lm-report.md"
t_result $? "its evaluation masks the A layer alone (masked_layers [1]); the report names the S layers (exit $rc $(head -c 200 "$T/e"))"
t_done
