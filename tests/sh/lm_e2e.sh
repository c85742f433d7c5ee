#!/usr/bin/env bash
# lm_e2e.sh — the LM track end to end on a tiny hybrid decoder (PROTOCOL C): train a few
# hundred steps on a Tiny Shakespeare slice + the retrieval mixture (sb-train, a cell with
# "family": "lm"), evaluate every mask (sb-eval: fidelity, retrieval battery, budgets,
# timings; sb-lm eval must give the same records), write the report; check the records;
# retrieval only (windows 0), fidelity only (probes 0): nulls, not 0 or 1. About 20 s on two cores.
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

# retrieval only (windows 0) and fidelity only (probes 0) are evaluations; a statistic of no
# observations is null, not 0 or 1 (before: ppl_dense 1, budget fraction 0 of 0 causal pairs,
# paired p = 1 over 0 windows, and a report of "+nan ... (paired t p = 1)"); both 0 is a
# usage error (nothing would be measured)
few=(-q -j 2 --masks dense,recipe,struct_random --tasks niah_single_1 --bench-reps 1)
rec() { grep "\"kind\":\"$2\",.*$3" "$1"; } # FILE KIND PATTERN: the records of KIND matching PATTERN
sb-lm eval "${few[@]}" --windows 0 --probes 2 -o "$T/w0" "$run" >/dev/null 2>"$T/w0.err"
rc=$? w0=$T/w0/eval.ndjson
f=$(rec "$w0" lm.fidelity '"method":"dense"')
[ $rc -eq 0 ] && grep -q '"n_windows":0,' <<<"$f" && grep -q '"ppl_dense":null,"ppl_dense_nonfinite":"nan","ppl":null,' <<<"$f" &&
	grep -q '"ppl_dense_tail":null' <<<"$f" && [ "$(rec "$w0" probe.result . | wc -l)" -eq 6 ]
t_result $? "eval --windows 0: exit $rc, retrieval evaluated (6 probe.result), lm.fidelity n_windows 0 with ppl_dense null, not 1: $(grep -o '"ppl_dense":[^,]*' <<<"$f")" "$(head -n 2 "$T/w0.err")"
b=$(rec "$w0" lm.budget '"method":"recipe","source":"text"')
grep -q '"layers":\[{"layer":1,"kept":0,"causal":0,"fraction":null,' <<<"$b" &&
	grep -q '"kept":0,"causal":0,"fraction":null,"fraction_nonfinite":"nan","keys_per_row":null,.*"blocks128_per_row":null' <<<"$b" &&
	rec "$w0" lm.budget '"method":"recipe","source":"probes"' | grep -q '"fraction":0\.[0-9]*,"keys_per_row":[0-9]'
t_result $? "eval --windows 0: the text budget counts 0 of 0 pairs, its fraction and per-row ratios null (the probes' measured): $(grep -o '"kept":0,"causal":0,"fraction":[^,]*' <<<"$b" | tail -n 1)"
p=$(rec "$w0" lm.fidelity.pair '"metric":"corr","positions":"all"')
grep -q '"n_windows":0,"mean_diff":null,.*"p_t":null,"p_t_nonfinite":"nan","p_wilcoxon":null,"p_wilcoxon_nonfinite":"nan","cohen_dz":null' <<<"$p" &&
	[ "$(rec "$w0" lm.fidelity.pair '"p_[tw][a-z]*":[0-9]' | wc -l)" -eq 0 ]
t_result $? "eval --windows 0: every lm.fidelity.pair over 0 windows has p_t and p_wilcoxon null, not 1: $(grep -o '"p_t":[^,]*,' <<<"$p")"
sb-lm report -o "$T/rw0" "$w0" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 0 ] && grep -q '| 1\. fidelity gain .* | n/a (0 windows) |$' "$T/rw0/lm-report.md" &&
	grep -q '^n/a (0 windows): no held-out text was evaluated' "$T/rw0/lm-report.md" &&
	grep -q '| 3\. the efficiency boundary .* | n/a (0 windows) |$' "$T/rw0/lm-report.md" &&
	grep -q '| recipe | n/a | n/a | n/a | n/a | n/a | 0\.[0-9]* |' "$T/rw0/lm-report.md" &&
	! grep -qi 'nan' "$T/rw0"/lm-report.md "$T/rw0"/*.svg
t_result $? "report of --windows 0: fidelity and timings n/a (0 windows), text budgets n/a, no nan (exit $rc: $(grep -o '| 1\. fidelity gain.*' "$T/rw0/lm-report.md" | sed 's/.*| //'))" "$(cat "$T/e")"
sb-lm eval "${few[@]}" --windows 2 --probes 0 -o "$T/p0" "$run" >/dev/null 2>"$T/p0.err"
rc=$? p0=$T/p0/eval.ndjson
b=$(rec "$p0" lm.budget '"method":"recipe","source":"probes"')
[ $rc -eq 0 ] && grep -q '"kept":0,"causal":0,"fraction":null,"fraction_nonfinite":"nan","keys_per_row":null,' <<<"$b" &&
	! grep -q '"kind":"\(probe.result\|lm.retrieval\|lm.retrieval.pair\)"' "$p0" &&
	rec "$p0" lm.fidelity '"method":"dense"' | grep -q '"n_windows":2,.*"ppl_dense":[0-9]' &&
	rec "$p0" lm.fidelity.pair '"positions":"all"' | grep -q '"n_windows":2,.*"p_t":[0-9]'
t_result $? "eval --probes 0: exit $rc, fidelity over 2 windows, no retrieval records, the probes' budget 0 of 0 pairs with fraction null: $(grep -o '"kept":0,"causal":0,"fraction":[^,]*' <<<"$b" | tail -n 1)" "$(head -n 2 "$T/p0.err")"
sb-lm report -o "$T/rp0" "$p0" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 0 ] && grep -q '| 2\. retrieval: .* | n/a (0 probes) |$' "$T/rp0/lm-report.md" &&
	grep -q '^n/a (0 probes): no retrieval probe was evaluated' "$T/rp0/lm-report.md" &&
	grep -q '| recipe | 0\.[0-9]* | [0-9.]* | [0-9.]* | [0-9.]* | [0-9.]* | n/a | L1 ' "$T/rp0/lm-report.md" &&
	! grep -qi 'nan' "$T/rp0"/lm-report.md "$T/rp0"/*.svg
t_result $? "report of --probes 0: retrieval n/a (0 probes), the probes' budget n/a, no nan (exit $rc)" "$(cat "$T/e")"
sb-lm eval "${few[@]}" --windows 0 --probes 0 -o "$T/wp0" "$run" >"$T/o" 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q '^sb-lm: windows 0 and probes 0: nothing to evaluate' "$T/e" && [ ! -e "$T/wp0" ] && [ ! -s "$T/o" ]
t_result $? "eval --windows 0 --probes 0: a usage error, nothing written (exit $rc: $(head -n 1 "$T/e"))"
cp "$run/eval.ndjson" "$T/run_eval.ndjson"
sb-eval -q -j 2 --set windows=0 --set probes=0 "$run" >"$T/o" 2>"$T/e"; rc=$?
[ $rc -eq 2 ] && grep -q '^sb-eval: windows 0 and probes 0: nothing to evaluate' "$T/e" && [ ! -s "$T/o" ] &&
	cmp -s "$run/eval.ndjson" "$T/run_eval.ndjson"
t_result $? "sb-eval --set windows=0 --set probes=0: a usage error before any run is read, eval.ndjson untouched (exit $rc: $(head -n 1 "$T/e"))"
sb-eval -q -j 2 --set masks=dense,recipe,struct_random --set tasks=niah_single_1 --set bench_reps=1 --set windows=0 \
	--set probes=2 "$run" >/dev/null 2>"$T/e"; rc=$?
strip() { grep -E '"kind":"(lm.budget|lm.fidelity|lm.fidelity.pair|probe.result|lm.retrieval|lm.retrieval.pair)"' "$1"; }
[ $rc -eq 0 ] && cmp -s <(strip "$w0") <(strip "$run/eval.ndjson") && grep -q '"ppl_dense":null' "$run/eval.ndjson"
t_result $? "sb-eval --set windows=0 writes sb-lm eval --windows 0's records, nulls included (exit $rc)" "$(head -n 2 "$T/e")"
t_done
