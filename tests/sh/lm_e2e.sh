#!/usr/bin/env bash
# lm_e2e.sh — the LM track end to end on a tiny hybrid decoder (PROTOCOL C): train a few
# hundred steps on a Tiny Shakespeare slice + the retrieval mixture (sb-train, a cell with
# "family": "lm"), evaluate every mask (sb-eval: fidelity, retrieval battery, budgets,
# timings; sb-lm eval must give the same records), write the report; check the records.
# About 15 s on two cores.
. "$(dirname "$0")/../shlib.sh"
if ! command -v sb-lm >/dev/null || ! command -v sb-train >/dev/null || ! command -v sb-eval >/dev/null; then
	t_result 1 "sb-lm, sb-train and sb-eval are built (make)"
	t_done
fi
corpus=$TOP/tests/fixtures/lm/shakespeare-head.txt
cat >"$T/cell.json" <<JSON
{"family":"lm","seed":1,"model":{"d":32,"pattern":"CACA","heads":2,"ffn":64},"T":256,"batch":8,"steps":300,"warmup":30,"lr":0.003,"log_every":50,"corpora":["shakespeare=$corpus"],"mixture":"shakespeare=0.5,retrieval=0.5"}
JSON
sb-train -q -j 2 -o "$T/runs" "$T/cell.json" >"$T/train1.out" 2>"$T/train1.err"
t_result $? "sb-train: a tiny CACA decoder (\"family\": \"lm\"), 300 steps" "$(tail -n 3 "$T/train1.err")"
[ $_t_fail -eq 0 ] || t_done
head -n 1 "$T/train1.out" | grep -q '"kind":"run.meta".*"program":"sb-train"' &&
	grep -q '"kind":"lm.train".*"status":"completed"' "$T/train1.out"
t_result $? "sb-train writes run.meta and an lm.train record, completed"
sb-lm train -q -j 2 -o "$T/runs" "$T/cell.json" >"$T/train2.out" 2>&1
grep -q '"status":"skipped"' "$T/train2.out"
t_result $? "sb-lm train skips the cell sb-train finished (same run directory)"
sb-train -q -j 2 -o "$T/runs" "$T/cell.json" >"$T/train3.out" 2>&1
grep -q '"kind":"lm.train".*"status":"skipped"' "$T/train3.out"
t_result $? "sb-train skips a finished cell on a rerun"
run=$(sed -n 's/.*"run_dir":"\([^"]*\)".*/\1/p' "$T/train2.out")
tr=$run/train.ndjson
grep -q '"kind":"train.done".*"status":"completed"' "$tr"
t_result $? "train.ndjson ends in train.done, completed"
cpu=$(sed -n 's/.*"kind":"train.done".*"train_cpu_seconds":\([0-9.e+-]*\),.*/\1/p' "$tr")
wall=$(sed -n 's/.*"kind":"train.done".*"train_seconds":\([0-9.e+-]*\),.*/\1/p' "$tr")
awk -v c="$cpu" -v w="$wall" 'BEGIN { exit !(c > 0 && w > 0 && c < 2.5 * w + 1) }'
t_result $? "train.done records wall-clock and process CPU seconds (wall $wall, CPU $cpu)"
first=$(grep '"kind":"train.step"' "$tr" | head -n 1 | sed 's/.*"train_loss":\([0-9.e-]*\).*/\1/')
last=$(grep '"kind":"train.step"' "$tr" | tail -n 1 | sed 's/.*"train_loss":\([0-9.e-]*\).*/\1/')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }'
t_result $? "the training loss falls by more than a nat: $first -> $last"
(cd "$run" && sha256sum -c model.safetensors.sha256 >/dev/null 2>&1)
t_result $? "the checkpoint matches its sidecar"
grep -q '"mixture_used"' "$run/cell.json" && grep -q '"sha256"' "$run/cell.json"
t_result $? "cell.json records the mixture with the corpus hashes"

sb-eval -q -j 2 --set probes=4 --set windows=4 --set bench_reps=2 "$run" >"$T/eval.out" 2>"$T/eval.err"
t_result $? "sb-eval on the LM run: 9 masks, 4 windows, 4 probes per task" "$(tail -n 3 "$T/eval.err")"
[ -s "$run/eval.ndjson" ] || t_done
grep -q '"kind":"lm.eval".*"status":"completed"' "$T/eval.out"
t_result $? "sb-eval's stdout has the lm.eval record"
grep '"kind":"lm.eval.setup"' "$run/eval.ndjson" | grep -q '"train_status":"completed","train_done":{"kind":"train.done"'
t_result $? "lm.eval.setup says the training finished (train_status completed) and carries its train.done"
mkdir -p "$T/ev" && cp "$run/eval.ndjson" "$T/ev/eval.ndjson"
ev=$T/ev/eval.ndjson
n=$(grep -c '"kind":"probe.result"' "$ev")
[ "$n" -eq $((9 * 13 * 4)) ]
t_result $? "one probe.result per (method, task, probe): $n = 9 x 13 x 4"
for m in dense recipe struct_random random structure h2o block16 block64 block128; do
	grep -q "\"kind\":\"lm.fidelity\",\"v\":1,\"cell_id\":\"[^\"]*\",\"method\":\"$m\"" "$ev" &&
		grep -q "\"kind\":\"lm.efficiency\",.*\"method\":\"$m\",\"kernel\":\"rows\"" "$ev" &&
		grep -q "\"kind\":\"lm.retrieval\",.*\"method\":\"$m\",\"subset\":\"all\"" "$ev"
	t_result $? "fidelity, retrieval and timing records for $m"
done
grep '"kind":"lm.fidelity",' "$ev" | grep '"method":"dense"' | grep -q '"kl":0,.*"top1":1,"corr":1'
t_result $? "dense against itself: KL 0, top-1 1, correlation 1"
# budgets on the text windows: recipe keeps min(t+1, 100) keys per row: (5050 + 156*100) / (256*257/2)
frac() { grep "\"kind\":\"lm.budget\",.*\"method\":\"$1\",\"source\":\"text\"" "$ev" | sed 's/.*"kept":\([0-9.e+]*\),"causal":\([0-9.e+]*\),"fraction".*/\1 \2/'; }
read -r k c <<<"$(frac recipe)"
awk -v k="$k" -v c="$c" 'BEGIN { exit !(k / c > 0.62773 && k / c < 0.62774) }'
t_result $? "recipe kept fraction on text = 20650/32896 (got $k/$c)"
for m in struct_random random h2o; do
	[ "$(frac $m)" = "$(frac recipe)" ]
	t_result $? "$m keeps exactly the recipe's pairs: $(frac $m)"
done
read -r ks cs <<<"$(frac structure)"
awk -v a="$ks" -v b="$k" 'BEGIN { exit !(a < b) }'
t_result $? "structure (sinks + window) keeps fewer pairs than the recipe ($ks < $k)"
[ "$(grep -c '"kind":"lm.blocks"' "$ev")" -eq 5 ]
t_result $? "block-granularity records for 5 budgets"
grep -q '"kind":"lm.fidelity.pair".*"method_a":"recipe","method_b":"struct_random","metric":"corr"' "$ev"
t_result $? "the paired fidelity gain of the recipe over struct_random is recorded"
grep -q '"kind":"lm.retrieval.pair".*"method_a":"recipe","method_b":"struct_random".*"mcnemar_p"' "$ev"
t_result $? "recipe vs struct_random on the same probes: McNemar"

# sb-lm eval with one thread gives the same records (timings and run.meta aside)
sb-lm eval -q -j 1 --probes 4 --windows 4 --bench-reps 1 -o "$T/ev1" "$run" >/dev/null 2>&1
strip() { grep -E '"kind":"(probe.result|lm.fidelity|lm.fidelity.window|lm.budget|lm.retrieval)"' "$1"; }
cmp -s <(strip "$ev") <(strip "$T/ev1/eval.ndjson")
t_result $? "evaluation records identical: sb-eval with 2 threads, sb-lm eval with 1"

# the efficiency baseline's OpenBLAS kernel set is recorded; a pre-AVX2 fallback on an AVX2 CPU
# (OpenBLAS not knowing the model) is said on stderr, in the record and in the report
grep '"kind":"lm.efficiency"' "$ev" | grep '"kernel":"dense_gemm"' | grep -qE '"blas":"[A-Za-z0-9_]+","blas_generic":(true|false)'
t_result $? "the dense_gemm record names OpenBLAS's kernel set ($(grep -o '"blas":"[^"]*","blas_generic":[a-z]*' "$ev" | head -n 1))"
if grep -qw avx2 /proc/cpuinfo; then
	for core in Prescott Haswell; do
		OPENBLAS_CORETYPE=$core sb-lm eval -j 2 --masks dense,recipe --tasks kv_recall --probes 1 --windows 1 --bench-reps 1 -o "$T/ev_$core" "$run" \
			>/dev/null 2>"$T/ev_$core.err"
		rc=$?
		sb-lm report -o "$T/rep_$core" "$T/ev_$core/eval.ndjson" >/dev/null 2>&1
		note=$(grep -c "generic 'Prescott' kernels" "$T/ev_$core.err")
		rec=$(grep -o '"blas":"[^"]*","blas_generic":[a-z]*' "$T/ev_$core/eval.ndjson")
		warn=$(grep -c 'speed-up against .dense_gemm. is overstated' "$T/rep_$core/lm-report.md")
		if [ $rc -eq 0 ] && [ -n "$rec" ] && [ "${rec#\"blas\":\"$core\"}" = "$rec" ]; then
			t_result 0 "# SKIP OpenBLAS ignored OPENBLAS_CORETYPE=$core ($rec): not a DYNAMIC_ARCH build"
			continue
		elif [ $core = Prescott ]; then
			[ $rc -eq 0 ] && [ "$note" = 1 ] && [ "$rec" = '"blas":"Prescott","blas_generic":true' ] && [ "$warn" = 1 ]
		else
			[ $rc -eq 0 ] && [ "$note" = 0 ] && [ "$rec" = '"blas":"Haswell","blas_generic":false' ] && [ "$warn" = 0 ]
		fi
		t_result $? "OPENBLAS_CORETYPE=$core: exit $rc, stderr note $note, record $rec, report warning $warn"
	done
else
	t_result 0 "# SKIP this CPU has no AVX2: no OpenBLAS kernel set counts as a fallback here"
fi

t_check "sb-lm report" sb-lm report -o "$T/rep" "$ev"
for f in lm-report.md lm-retrieval.svg lm-fidelity.svg lm-blocks.svg; do
	[ -s "$T/rep/$f" ]
	t_result $? "report file $f written"
done
for s in '<svg' '</svg>'; do
	grep -q "$s" "$T/rep/lm-retrieval.svg"
	t_result $? "lm-retrieval.svg holds $s"
done
grep -q 'The three findings' "$T/rep/lm-report.md" && grep -q '+0.016 to +0.057' "$T/rep/lm-report.md" &&
	grep -q '44/45' "$T/rep/lm-report.md"
t_result $? "the report sets the study's findings beside ours"
if command -v sb-stats >/dev/null; then
	sb-stats -q --baseline dense -f md "$ev" >"$T/stats.md" 2>"$T/stats.err"
	t_result $? "sb-stats reads the probe.result records ($(tail -n 1 "$T/stats.err"))"
fi
t_done
