#!/usr/bin/env bash
# lm_train_kill.sh — LM training killed mid-way (docs/lm.md, "Run directory"): train.ndjson
# is rewritten whole after every record, so a killed run leaves whole records and no
# train.done; a rerun resumes from the newest checkpoint with its optimiser state and gives
# the bits of a run never stopped; the resume refuses changed corpora; the evaluation says
# whether the training finished and refuses a model its train.done does not name. Also the
# OpenBLAS kernel set of the training: warned about on stderr when generic, recorded.
# About 15 s on two cores.
. "$(dirname "$0")/../shlib.sh"
if ! command -v sb-lm >/dev/null || ! command -v sb-train >/dev/null || ! command -v jq >/dev/null; then
	t_result 1 "sb-lm, sb-train (make) and jq are there"
	t_done
fi
cp "$TOP/tests/fixtures/lm/shakespeare-head.txt" "$T/corpus.txt"
cell() { # steps ckpt_every log_every corpus (checkpoints off the log steps: the loss window is carried)
	printf '{"family":"lm","seed":3,"model":{"d":16,"pattern":"CACL","heads":2,"ffn":32},"T":64,"batch":4,"steps":%d,"warmup":4,"lr":0.003,"ckpt_every":%d,"log_every":%d,"warm_T":32,"warm_steps":30,"corpora":["shakespeare=%s"],"mixture":"shakespeare=0.5,retrieval=0.5"}\n' "$@"
}
cell 120 40 3 "$T/corpus.txt" >"$T/cell.json"
# every line of a train.ndjson a whole JSON object with a kind
whole() { [ -s "$1" ] && jq -e -s 'all(type == "object" and (.kind | type) == "string")' "$1" >/dev/null 2>&1; }
# the records without their timing fields (and the resume marker)
untimed() { jq -c 'select(.kind != "run.meta" and .kind != "train.resume") | del(.seconds, .cpu_seconds, .tokens_per_s, .train_seconds, .train_cpu_seconds, .peak_memory_mb)' "$1"; }

# the reference: one run, never stopped
sb-lm train -q -j 1 -o "$T/ref" "$T/cell.json" >"$T/ref.out" 2>"$T/ref.err"
t_result $? "a tiny decoder, 120 steps, a checkpoint every 40" "$(tail -n 2 "$T/ref.err")"
ref=$(jq -r .run_dir "$T/ref.out" | tail -n 1)
[ -f "$ref/model.safetensors" ] || t_done
id=$(basename "$ref")
# the default probes do not fit T 64: a usage error before any forward pass, saying what to set
sb-eval -q --set windows=1 --set bench_reps=1 "$ref" >"$T/e64.out" 2>"$T/e64.err"; rc=$?
[ $rc -eq 2 ] && [ ! -e "$ref/eval.ndjson" ] && grep -q "a run with T 64: set tasks=LIST to tasks that fit, or probes=0 for none; sb-lm eval: --tasks, --probes)" "$T/e64.err"
t_result $? "sb-eval of a T 64 run with the default tasks: exit $rc, naming tasks=LIST and probes=0" "$(cat "$T/e64.err")"
sb-eval -q --set windows=1 --set bench_reps=1 --set probes=0 "$ref" >/dev/null 2>"$T/e64.err" && [ -s "$ref/eval.ndjson" ]
t_result $? "the same with --set probes=0 evaluates" "$(cat "$T/e64.err")"
rm -f "$ref/eval.ndjson"
ls "$ref" | grep -q optim
t_result $((!$?)) "a finished run keeps no optimiser state"

# 1. killed (SB_TRAIN_STOP_AFTER_STEPS: _exit(137) after step 51's records, as kill -9)
SB_TRAIN_STOP_AFTER_STEPS=51 sb-train -q -j 1 -o "$T/runs" "$T/cell.json" >"$T/k.out" 2>"$T/k.err"
rc=$?
run=$T/runs/$id
[ $rc -eq 137 ] && [ -d "$run" ]
t_result $? "sb-train killed after step 51 (exit $rc)" "$(tail -n 2 "$T/k.err")"
tr=$run/train.ndjson
whole "$tr" && [ "$(jq -r .kind "$tr" | head -n 1)" = run.meta ] && [ "$(jq -r 'select(.kind == "train.step") | .step' "$tr" | tail -n 1)" = 51 ]
t_result $? "train.ndjson of the killed run: whole records, run.meta first, the last train.step is step 51"
! grep -q '"kind":"train.done"' "$tr" && [ ! -e "$run/model.safetensors" ]
t_result $? "the killed run has no train.done and no model.safetensors: nothing looks finished"
[ -f "$run/step-000040.optim.safetensors" ] && [ "$(ls "$run" | grep -c 'optim')" = 1 ] &&
	[ "$(jq -r 'select(.kind == "train.checkpoint") | .step' "$tr" | tr '\n' ' ')" = "40 " ]
t_result $? "the newest checkpoint (step 40) has its record and its optimiser state, and only it"
sb-lm eval -q -j 1 --masks dense --tasks kv_recall --probes 1 --windows 1 --bench-reps 1 -o "$T/ek" "$run" >/dev/null 2>"$T/ek.err"
rc=$?
[ $rc -ne 0 ] && [ ! -e "$T/ek/eval.ndjson" ]
t_result $? "sb-lm eval refuses the killed run (exit $rc: $(tail -n 1 "$T/ek.err"))"

# 2. the rerun resumes after step 40 and ends with the reference's bits
sb-train -j 1 -o "$T/runs" "$T/cell.json" >"$T/r.out" 2>"$T/r.err"
rc=$?
[ $rc -eq 0 ] && grep -q '"kind":"lm.train".*"status":"completed"' "$T/r.out" && grep -q 'resumed after step 40/120' "$T/r.err"
t_result $? "the rerun resumes after step 40 and completes (exit $rc)" "$(tail -n 2 "$T/r.err")"
[ "$(jq -c 'select(.kind == "train.resume") | .step' "$tr")" = 40 ] && whole "$tr" &&
	[ "$(jq -r .kind "$tr" | tail -n 1)" = train.done ]
t_result $? "train.ndjson: one train.resume (step 40), then train.done last"
cmp -s "$ref/model.safetensors" "$run/model.safetensors" && cmp -s "$ref/step-000080.safetensors" "$run/step-000080.safetensors"
t_result $? "model.safetensors and step-000080.safetensors byte-identical to the run never stopped"
cmp -s <(untimed "$ref/train.ndjson") <(untimed "$tr")
t_result $? "every record identical to the run never stopped (timings aside; the steps 41-51 of the killed run dropped)"
sha=$(sha256sum <"$run/model.safetensors" | cut -d' ' -f1)
[ "$(jq -r 'select(.kind == "train.done") | .checkpoint_sha256' "$tr")" = "$sha" ] && (cd "$run" && sha256sum -c --quiet model.safetensors.sha256) &&
	! ls "$run" | grep -q optim
t_result $? "train.done names model.safetensors's SHA-256, the sidecar agrees, no optimiser state is left"
sb-lm train -q -j 1 -o "$T/runs" "$T/cell.json" >"$T/s.out" 2>&1
[ "$(jq -r .status "$T/s.out" | tail -n 1)" = skipped ]
t_result $? "a third run skips the finished cell"

# 2b. a damaged optimiser state (one byte of its moments changed, the file still whole) is
# never resumed from: train.checkpoint records its SHA-256, and the rerun ends with the
# reference's bits (before, it resumed with the damaged moments and finished with other bits)
SB_TRAIN_STOP_AFTER_STEPS=51 sb-train -q -j 1 -o "$T/runsd" "$T/cell.json" >/dev/null 2>&1
op=$T/runsd/$id/step-000040.optim.safetensors
[ -f "$op" ] && [ "$(jq -r 'select(.kind == "train.checkpoint") | .optim_sha256' "$T/runsd/$id/train.ndjson")" = "$(sha256sum <"$op" | cut -d' ' -f1)" ]
t_result $? "train.checkpoint names the SHA-256 of the optimiser state beside it"
sz=$(stat -c %s "$op")
printf '\x7f' | dd of="$op" bs=1 seek=$((sz - 100)) conv=notrunc 2>/dev/null
sb-train -q -j 1 -o "$T/runsd" "$T/cell.json" >/dev/null 2>"$T/d.err"
rc=$?
[ $rc -eq 0 ] && cmp -s "$ref/model.safetensors" "$T/runsd/$id/model.safetensors" &&
	cmp -s <(untimed "$ref/train.ndjson") <(untimed "$T/runsd/$id/train.ndjson")
t_result $? "a damaged optimiser state is not resumed from: the rerun (exit $rc) ends with the reference's model and records" "$(cat "$T/d.err")"

# 3. killed by a real SIGKILL as soon as the first train.step is written; then rerun
rm -rf "$T/runs2"
sb-lm train -q -j 1 -o "$T/runs2" "$T/cell.json" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 400); do
	grep -qs '"kind":"train.step"' "$T/runs2/$id/train.ndjson" && break
	sleep 0.02
done
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
rc=$?
tr2=$T/runs2/$id/train.ndjson
if [ $rc -ne 137 ]; then
	t_result 0 "# SKIP the run finished before the kill (exit $rc)"
else
	whole "$tr2" && { ! grep -q '"kind":"train.done"' "$tr2" ||
		[ "$(jq -r 'select(.kind == "train.done") | .checkpoint_sha256' "$tr2")" = "$(sha256sum <"$T/runs2/$id/model.safetensors" | cut -d' ' -f1)" ]; }
	t_result $? "SIGKILL at step $(jq -r 'select(.kind == "train.step") | .step' "$tr2" | tail -n 1): whole records, and no train.done unless its checkpoint is there"
fi
sb-lm train -q -j 1 -o "$T/runs2" "$T/cell.json" >/dev/null 2>&1 && cmp -s "$ref/model.safetensors" "$T/runs2/$id/model.safetensors" &&
	cmp -s <(untimed "$ref/train.ndjson") <(untimed "$tr2")
t_result $? "the rerun completes with the reference's model and records"

# 4. a resume goes on only with the corpora the run started on
cp "$T/corpus.txt" "$T/corpus2.txt"
cell 120 40 3 "$T/corpus2.txt" >"$T/cell2.json"
SB_TRAIN_STOP_AFTER_STEPS=45 sb-lm train -q -j 1 -o "$T/runs3" "$T/cell2.json" >/dev/null 2>&1
id2=$(ls "$T/runs3")
cp "$T/runs3/$id2/train.ndjson" "$T/before.ndjson"
echo 'one more line' >>"$T/corpus2.txt"
sb-lm train -q -j 1 -o "$T/runs3" "$T/cell2.json" >/dev/null 2>"$T/c.err"
rc=$?
[ $rc -eq 3 ] && grep -q 'the run started on a corpus with SHA-256' "$T/c.err" && cmp -s "$T/before.ndjson" "$T/runs3/$id2/train.ndjson" &&
	[ ! -e "$T/runs3/$id2/model.safetensors" ]
t_result $? "a changed corpus refuses the resume (exit $rc), the run directory left as it was" "$(cat "$T/c.err")"

# 5. the evaluation: a model train.done does not name is refused; a log without train.done is "incomplete"
cp -r "$run" "$T/tamper"
cp "$T/tamper/step-000080.safetensors" "$T/tamper/model.safetensors"
(cd "$T/tamper" && sha256sum model.safetensors >model.safetensors.sha256)
ev() { sb-lm eval -q -j 1 --masks dense --tasks kv_recall --probes 1 --windows 1 --bench-reps 1 -o "$2" "$1"; }
ev "$T/tamper" "$T/et" >/dev/null 2>"$T/et.err"
rc=$?
[ $rc -eq 3 ] && grep -q 'the model and the training log disagree' "$T/et.err" && [ ! -e "$T/et/eval.ndjson" ]
t_result $? "sb-lm eval refuses a model.safetensors that train.done does not name (exit $rc)" "$(cat "$T/et.err")"
ev "$run" "$T/e1" >/dev/null 2>"$T/e1.err" &&
	[ "$(jq -r 'select(.kind == "lm.eval.setup") | .train_status' "$T/e1/eval.ndjson")" = completed ]
t_result $? "a finished run is evaluated with train_status completed" "$(tail -n 1 "$T/e1.err")"
cp -r "$run" "$T/unfin"
grep -v '"kind":"train.done"' "$run/train.ndjson" >"$T/unfin/train.ndjson"
ev "$T/unfin" "$T/e2" >/dev/null 2>&1 && [ "$(jq -r 'select(.kind == "lm.eval.setup") | .train_status' "$T/e2/eval.ndjson")" = incomplete ] &&
	sb-lm report -o "$T/rep2" "$T/e2/eval.ndjson" >/dev/null 2>&1 && grep -q 'The training did not finish' "$T/rep2/lm-report.md"
t_result $? "a run whose train.ndjson lacks train.done: train_status incomplete, and the report says so"
# docs/lm.md's recipe for one checkpoint: cell.json, the step as the model, its sidecar again
mkdir "$T/ck" && cp "$run/cell.json" "$T/ck/" && cp "$run/step-000080.safetensors" "$T/ck/model.safetensors" &&
	(cd "$T/ck" && sha256sum model.safetensors >model.safetensors.sha256)
ev "$T/ck" "$T/eck" >/dev/null 2>"$T/eck.err" &&
	[ "$(jq -r 'select(.kind == "lm.eval.setup") | .train_status' "$T/eck/eval.ndjson")" = no_log ] &&
	sb-lm report -o "$T/repck" "$T/eck/eval.ndjson" >/dev/null 2>&1 && grep -q 'no train.ndjson' "$T/repck/lm-report.md" &&
	! grep -q 'does not end in train.done' "$T/repck/lm-report.md"
t_result $? "docs/lm.md's checkpoint recipe: evaluated with train_status no_log, and the report says the model is a checkpoint on its own ($(head -c 200 "$T/eck.err"))"
printf '{"kind":"train.step",\n' >>"$T/unfin/train.ndjson"
ev "$T/unfin" "$T/e3" >/dev/null 2>"$T/e3.err"
rc=$?
[ $rc -eq 3 ] && grep -q 'train.ndjson:' "$T/e3.err"
t_result $? "a malformed train.ndjson line is bad data (exit $rc: $(tail -n 1 "$T/e3.err"))"

# 6. OpenBLAS's kernel set: recorded in run.meta and train.resume; a generic (pre-AVX2) set on
# an AVX2 CPU, which OpenBLAS runs when it does not know the model, is said once on stderr
[ "$(jq -c 'select(.kind == "run.meta") | [.blas, .blas_generic] | map(type)' "$tr")" = '["string","boolean"]' ] &&
	[ "$(jq -c 'select(.kind == "train.resume") | [.blas, .blas_generic]' "$tr")" = "$(jq -c 'select(.kind == "run.meta") | [.blas, .blas_generic]' "$tr")" ]
t_result $? "run.meta and train.resume record the kernel set ($(jq -c 'select(.kind == "run.meta") | {blas, blas_generic}' "$tr"))"
cell 4 0 2 "$T/corpus.txt" >"$T/small.json"
if grep -qw avx2 /proc/cpuinfo; then
	for prog_core in "sb-lm train:Prescott" sb-train:Prescott "sb-lm train:Haswell"; do
		prog=${prog_core%%:*} core=${prog_core#*:}
		out=$T/blas_${prog// /_}_$core
		OPENBLAS_CORETYPE=$core $prog -j 1 -o "$out" "$T/small.json" >"$out.out" 2>"$out.err"
		rc=$?
		meta=$(jq -c 'select(.kind == "run.meta") | [.blas, .blas_generic]' "$out"/*/train.ndjson 2>/dev/null)
		blas=$(jq -r 'select(.kind == "run.meta") | .blas // empty' "$out"/*/train.ndjson 2>/dev/null)
		note=$(grep -c "generic 'Prescott' kernels.*LM training.*set OPENBLAS_CORETYPE" "$out.err")
		if [ $rc -eq 0 ] && [ -n "$blas" ] && [ "$blas" != "$core" ]; then
			t_result 0 "# SKIP OpenBLAS ignored OPENBLAS_CORETYPE=$core ($meta): not a DYNAMIC_ARCH build"
			continue
		elif [ $core = Prescott ]; then
			[ $rc -eq 0 ] && [ "$note" = 1 ] && [ "$meta" = '["Prescott",true]' ]
		else
			[ $rc -eq 0 ] && [ "$note" = 0 ] && [ "$meta" = '["Haswell",false]' ]
		fi
		t_result $? "$prog, OPENBLAS_CORETYPE=$core: exit $rc, stderr warning $note, run.meta $meta"
	done
	OPENBLAS_CORETYPE=Prescott sb-lm train -q -j 1 -o "$T/blas_q" "$T/small.json" >/dev/null 2>"$T/blas_q.err"
	! grep -q Prescott "$T/blas_q.err"
	t_result $? "-q silences the warning"
else
	t_result 0 "# SKIP this CPU has no AVX2: no OpenBLAS kernel set counts as a fallback here"
fi
t_done
