#!/usr/bin/env bash
# sas_e2e.sh — make sas end to end (PROTOCOL B's full setting: 3 seeds, 30 + 24 steps,
# 12 evaluation windows; ~5 s) on a corpus made of this repository's documentation (so
# the test needs no download), then the records' fields, the retained fraction, the
# perplexity arithmetic, the report, make's idempotence and the error paths.
. "$(dirname "$0")/../shlib.sh"
for p in sb-train sb-eval; do
	command -v $p >/dev/null || { t_result 1 "$p is built (make)"; t_done; }
done
cat "$TOP"/README.md "$TOP"/docs/*.md >"$T/corpus.txt"
[ "$(wc -c <"$T/corpus.txt")" -gt 40000 ]
t_result $? "test corpus has > 40,000 bytes (train part >= 12,000, valid and test parts >= 769)"
make -s -C "$TOP" sas SAS_OUT="$T/sas" SAS_CORPUS="docs=$T/corpus.txt" >"$T/make.out" 2>&1
t_result $? "make sas runs ($(tail -n 3 "$T/make.out" | tr '\n' ' '))"
E=$T/sas/eval.ndjson
head -n 1 "$E" | grep -q '"kind":"run.meta"'
t_result $? "eval.ndjson starts with run.meta"
n=$(grep -c '"kind":"sas.eval"' "$E")
[ "$n" -eq 3 ]
t_result $? "one sas.eval record per seed (got $n)"
missing=""
for f in seed corpus corpus_note test_read parameter_count selector_parameter_count pretrain_loss_first \
	pretrain_loss_last selector_gradient_norm_mean dense_val_loss dense_val_ppl sas_val_loss sas_val_ppl \
	dense_test_loss dense_test_ppl sas_test_loss sas_test_ppl test_ppl_change_vs_dense_percent \
	retained_attention_fraction attention_positions_reduced_percent selector_gate_entropy; do
	c=$(grep '"kind":"sas.eval"' "$E" | grep -c "\"$f\":[-0-9\"]")
	[ "$c" -eq 3 ] || missing="$missing $f"
done
[ -z "$missing" ]
t_result $? "every published field present with a value in every record (missing:${missing:- none})"
grep '"kind":"sas.eval"' "$E" | grep -q '"corpus":"docs"' && grep -q '"corpus_note":"NOT WikiText-2' "$E"
t_result $? "the corpus is named and flagged as not WikiText-2"
bad=$(grep '"kind":"sas.eval"' "$E" | grep -vc '"retained_positions":13440,"causal_positions":24960')
[ "$bad" -eq 0 ]
t_result $? "retained positions 13440/24960 = 12 windows x 1120/2080 in every record ($bad differ)"
bad=$(grep '"kind":"sas.eval"' "$E" | awk '{
	match($0, /"retained_attention_fraction":[0-9.e-]+/); f = substr($0, RSTART + 30, RLENGTH - 30) + 0
	match($0, /"attention_positions_reduced_percent":[0-9.e-]+/); r = substr($0, RSTART + 38, RLENGTH - 38) + 0
	if (f != 1120 / 2080 || (r - 100 * (1 - 1120 / 2080)) ^ 2 > 1e-20) print }' | wc -l)
[ "$bad" -eq 0 ]
t_result $? "retained_attention_fraction = 1120/2080 exactly and reduced = 46.15...% ($bad records differ)"
bad=$(grep '"kind":"sas.eval"' "$E" | awk 'function g(k) { if (!match($0, "\"" k "\":[-0-9.eE+]+")) return -1e300
		return substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3) + 0 }
	{ for (i = 0; i < 4; i++) {
		split("dense_val dense_test sas_val sas_test", p, " "); k = p[i + 1]
		l = g(k "_loss"); q = g(k "_ppl"); w = exp(l < 20 ? l : 20)
		if ((q - w) ^ 2 > (1e-12 * w) ^ 2) print k, q, w }
	  c = 100 * (g("sas_test_ppl") - g("dense_test_ppl")) / g("dense_test_ppl")
	  if ((c - g("test_ppl_change_vs_dense_percent")) ^ 2 > 1e-18) print "change", c }' | wc -l)
[ "$bad" -eq 0 ]
t_result $? "ppl = exp(min(loss, 20)) and the change in percent recompute from the losses ($bad differ)"
grep '"kind":"sas.eval"' "$E" | grep -q '"parameter_count":23392,"selector_parameter_count":512'
t_result $? "parameter counts 23,392 and 512"
# the gradient norm is small but not zero; pretraining lowers the loss
bad=$(grep '"kind":"sas.eval"' "$E" | awk '{ match($0, /"selector_gradient_norm_mean":[-0-9.eE+]+/)
	g = substr($0, RSTART + 30, RLENGTH - 30) + 0
	match($0, /"pretrain_loss_first":[-0-9.eE+]+/); a = substr($0, RSTART + 22, RLENGTH - 22) + 0
	match($0, /"pretrain_loss_last":[-0-9.eE+]+/); b = substr($0, RSTART + 21, RLENGTH - 21) + 0
	if (!(g > 0 && g < 1 && a > 5 && b < a - 0.3)) print g, a, b }' | wc -l)
[ "$bad" -eq 0 ]
t_result $? "selector gradient norm in (0, 1), pretraining loss from > 5 down by > 0.3 ($bad records off)"
R=$T/sas/runs/sas-s42
# the evaluation's inputs (checkpoint, valid and test text): each file's SHA-256 and size
# (the sizes were 0)
bad=$(head -n 1 "$R/eval.ndjson" | jq -r '.inputs[] | "\(.path) \(.sha256) \(.size_bytes)"' | while read -r p h n; do
	[ "$h $n" = "$(sha256sum <"$p" | cut -c1-64) $(stat -c %s "$p")" ] || echo "$p:$h:$n"
done)
[ -z "$bad" ] && [ "$(head -n 1 "$R/eval.ndjson" | jq '.inputs | length')" -eq 3 ]
t_result $? "eval.ndjson's run.meta: three inputs, each with its file's SHA-256 and size (${bad:-all match})"
head -n 1 "$R/train.ndjson" | grep -q '"kind":"run.meta"' &&
	[ "$(grep -c '"kind":"sas.pretrain.step"' "$R/train.ndjson")" -eq 30 ] &&
	[ "$(grep -c '"kind":"sas.selector.step"' "$R/train.ndjson")" -eq 24 ] &&
	grep -q '"kind":"sas.train.done"' "$R/train.ndjson"
t_result $? "train.ndjson: run.meta, 30 pretraining steps, 24 selector steps, sas.train.done"
(cd "$R" && sha256sum -c model.safetensors.sha256 >/dev/null 2>&1)
t_result $? "the checkpoint's sidecar verifies with sha256sum -c"
grep -q 'NOT WikiText-2' "$T/sas/report.md" && grep -q '139.65 ± 2.81' "$T/sas/report.md" &&
	grep -q '+0.018 ± 0.017' "$T/sas/report.md" && grep -q '0.5385 (13440/24960 positions)' "$T/sas/report.md" &&
	[ "$(grep -c '^| 4[234] |' "$T/sas/report.md")" -eq 3 ]
t_result $? "report.md: the corpus warning, published numbers, our fraction and three seed rows"
grep -q '^| selector gradient norm (mean over steps) | [0-9.]*e-[0-9]* ± ' "$T/sas/report.md" && ! grep -q 'n/a' "$T/sas/report.md"
t_result $? "report.md: the selector gradient norm is a number when the selector trained"
# no selector step (sel_steps 0, the untrained selector as an ablation): its loss and gradient
# norm are null, not 0, and the report says n/a
printf '{"family":"sas","seed":42,"corpus":"docs=%s","id":"nosel","sel_steps":0}\n' "$T/corpus.txt" >"$T/nosel.ndjson"
sb-train -q -o "$T/ns" "$T/nosel.ndjson" >/dev/null 2>"$T/e" && sb-eval -q "$T/ns/nosel" >/dev/null 2>>"$T/e" &&
	jq -e -s 'map(select(.kind == "sas.train.done"))[0] | .selector_steps == 0 and .selector_gradient_norm_mean == null
		and .selector_loss_first == null and .selector_loss_last == null' "$T/ns/nosel/train.ndjson" >/dev/null &&
	pipelines/sas-report.sh "$T/ns/nosel/eval.ndjson" >"$T/ns.md" 2>>"$T/e" &&
	grep -q '^| selector gradient norm (mean over steps) | n/a (no selector step) |' "$T/ns.md" && grep -q '^| 42 | .* | n/a | ' "$T/ns.md"
t_result $? "sel_steps 0: the selector's losses and gradient norm are null (they read 0), the report says n/a ($(head -c 200 "$T/e"))"
# make is idempotent: nothing retrained
before=$(stat -c %Y.%s "$T/sas/train.ndjson")
sleep 1
make -s -C "$TOP" sas SAS_OUT="$T/sas" SAS_CORPUS="docs=$T/corpus.txt" >/dev/null 2>&1
[ "$before" = "$(stat -c %Y.%s "$T/sas/train.ndjson")" ]
t_result $? "a second make sas retrains nothing"
# programs are order-only, as in the grids: rebuilt programs (-W: as if newer) re-run nothing
ev_before=$(stat -c %Y.%s "$T/sas/eval.ndjson")
make -s -C "$TOP" -W bin/sb-train -W bin/sb-eval sas SAS_OUT="$T/sas" SAS_CORPUS="docs=$T/corpus.txt" >/dev/null 2>&1
[ "$before" = "$(stat -c %Y.%s "$T/sas/train.ndjson")" ] && [ "$ev_before" = "$(stat -c %Y.%s "$T/sas/eval.ndjson")" ]
t_result $? "make sas after the programs are rebuilt (make -W): nothing trained or evaluated again"
# determinism: training the same cell again gives the same checkpoint bits
head -n 1 "$T/sas/cells.ndjson" >"$T/one.ndjson"
sb-train -q -o "$T/again" "$T/one.ndjson" >/dev/null 2>&1 && cmp -s "$T/again/sas-s42/model.safetensors" "$R/model.safetensors"
t_result $? "retraining seed 42 reproduces the checkpoint bit for bit"
# the same cell into the same runs directory again: skipped (as a finished encoder or LM cell),
# the run untouched; a cell of the same id with another field trains again
before=$(stat -c %Y.%s "$T/again/sas-s42/model.safetensors")
sleep 1
sb-train -q -o "$T/again" "$T/one.ndjson" >"$T/skip.out" 2>/dev/null; rc=$?
[ $rc -eq 0 ] && grep -q '"kind":"sas.train".*"status":"skipped"' "$T/skip.out" &&
	[ "$before" = "$(stat -c %Y.%s "$T/again/sas-s42/model.safetensors")" ]
t_result $? "the same SAS cell again in the same runs directory: skipped, the run untouched (exit $rc)"
sed 's/}$/,"sel_steps":2}/' "$T/one.ndjson" >"$T/one2.ndjson"
sb-train -q -o "$T/again" "$T/one2.ndjson" >"$T/skip2.out" 2>/dev/null; rc=$?
[ $rc -eq 0 ] && grep -q '"status":"completed"' "$T/skip2.out"
t_result $? "the same id with another field trains again (exit $rc: $(head -c 150 "$T/skip2.out"))"
# error paths
cp -r "$R" "$T/tampered"
printf '\0' | dd of="$T/tampered/model.safetensors" bs=1 seek=2000 conv=notrunc 2>/dev/null
sb-eval -q "$T/tampered" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q 'SHA-256 mismatch' "$T/e"
t_result $? "a modified checkpoint is refused by sb-eval (exit $rc: $(head -c 200 "$T/e"))"
cp -r "$R" "$T/renamed" # a run directory whose cell.json names another cell than its checkpoint
sed -i 's/"id":"sas-s42"/"id":"sas-s99"/' "$T/renamed/cell.json"
sb-eval -q "$T/renamed" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "metadata names cell 'sas-s42', not this run's 'sas-s99'" "$T/e" && [ ! -e "$T/renamed/eval.ndjson.new" ]
t_result $? "a checkpoint of another cell is refused by sb-eval (exit $rc: $(head -c 300 "$T/e"))"
cp -r "$R" "$T/reseeded" # the same cell id, its seed edited after training
sed -i 's/"seed":\([0-9]*\)/"seed":1\1/' "$T/reseeded/cell.json"
sb-eval -q "$T/reseeded" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "trained with seed [0-9]* and steps [0-9+]*, but cell.json says seed 1[0-9]*" "$T/e"
t_result $? "a cell.json whose seed was edited after training is refused by sb-eval (exit $rc: $(head -c 300 "$T/e"))"
cp -r "$R" "$T/retopk" # the same cell id, its topk edited after training (the checkpoint's cell_sha256)
sed -i 's/"topk":2/"topk":3/' "$T/retopk/cell.json"
grep -q '"topk":3' "$T/retopk/cell.json" && sb-eval -q "$T/retopk" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "but cell.json now hashes to .*(a cell.json edited after training" "$T/e" &&
	{ [ ! -e "$R/eval.ndjson" ] || cmp -s "$R/eval.ndjson" "$T/retopk/eval.ndjson"; }
t_result $? "a cell.json whose topk was edited after training is refused by sb-eval (exit $rc: $(head -c 300 "$T/e"))"
off=$(od -An -t u8 -N 8 "$R/model.safetensors" | tr -d ' ')
head -c $((8 + off)) "$R/model.safetensors" | tail -c "$off" | grep -q '"cell_sha256":"'"$(tr -d '\n' <"$R/cell.json" | sha256sum | cut -c1-64)"'"'
t_result $? "the checkpoint's metadata holds the SHA-256 of its cell.json (without the newline)"
echo '{"family":"sas","seed":1,"corpus":"x","pre_stepz":3}' >"$T/bad.ndjson"
sb-train -q -o "$T/r2" "$T/bad.ndjson" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "bad.ndjson:1: unknown field 'pre_stepz'" "$T/e"
t_result $? "an unknown cell field: exit 3 naming file and line (exit $rc: $(cat "$T/e"))"
{ head -n 1 "$T/sas/cells.ndjson"; echo '{"task":"mnist","method":"softmax","seed":0}'; } >"$T/mixed.ndjson"
sb-train -q -d "$T/nodata" -o "$T/r3" "$T/mixed.ndjson" >"$T/mixed.out" 2>"$T/e"; rc=$?
# cells of every family may share a file (sb-train's family table): the encoder cell is
# taken as one, so its missing dataset is the error (exit 4), not the mixture
[ $rc -eq 4 ] && grep -q 'nodata/mnist/pool.safetensors' "$T/e"
t_result $? "a cells file mixing SAS and encoder cells: the encoder cell goes to the encoder trainer (exit $rc: $(head -c 300 "$T/e"))"
echo '{"family":"sas","seed":1,"corpus":"x=/nonexistent/c.txt"}' >"$T/nocorpus.ndjson"
sb-train -q -o "$T/r4" "$T/nocorpus.ndjson" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 4 ] && grep -q '/nonexistent/c.txt' "$T/e" && [ -z "$(ls -A "$T/r4" 2>/dev/null)" ]
t_result $? "a missing corpus: exit 4 naming the file, no run directory left (exit $rc: $(ls "$T/r4" 2>/dev/null))"
# two cells under one run id: the same cell (a default spelled out) is trained once; another
# cell would write over the first one's run (the id is sas-sSEED unless given): bad input
{ cat "$T/nocorpus.ndjson"; sed 's/}$/,"topk":2}/' "$T/nocorpus.ndjson"; } >"$T/twice.ndjson"
sb-train -q -o "$T/r4b" "$T/twice.ndjson" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 4 ] && grep -q "cell sas-x-s1 given twice: trained once" "$T/e" && [ "$(grep -c '/nonexistent/c.txt' "$T/e")" -eq 1 ]
t_result $? "the same SAS cell twice (a default spelled out): warned, tried once (exit $rc: $(head -c 300 "$T/e"))"
{ cat "$T/nocorpus.ndjson"; sed 's/}$/,"topk":1}/' "$T/nocorpus.ndjson"; } >"$T/clash.ndjson"
sb-train -q -o "$T/r4c" "$T/clash.ndjson" >"$T/o4c" 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "clash.ndjson:2: sas cell: run id 'sas-x-s1' is also line 1's, a cell with other fields" "$T/e" &&
	[ ! -e "$T/r4c" ] && [ ! -s "$T/o4c" ]
t_result $? "two SAS cells under one run id: exit 3 naming the line, nothing trained (exit $rc: $(head -c 300 "$T/e"))"
sed 's/}$/,"id":"short","train_bytes":10}/' "$T/nocorpus.ndjson" | sed "s|x=/nonexistent/c.txt|$(sed -n 's/.*"corpus":"\([^"]*\)".*/\1/p' "$R/cell.json")|" >"$T/short.ndjson"
sb-train -q -o "$T/r5" "$T/short.ndjson" >/dev/null 2>"$T/e"; rc=$?
[ $rc -eq 3 ] && grep -q "short.ndjson:1: sas cell: .*fewer than one window" "$T/e" && [ ! -e "$T/r5/short" ]
t_result $? "a training text shorter than one window: exit 3 naming FILE:LINE, no run directory (exit $rc: $(head -c 200 "$T/e"))"
# evaluation windows that eval_bytes, or the corpus's valid part, cannot hold: refused before
# training (sb-eval refused them, after a training that exited 0)
corp=$(sed -n 's/.*"corpus":"\([^"]*\)".*/\1/p' "$R/cell.json")
head -c 3000 "$T/corpus.txt" >"$T/tiny.txt"
for ev in '"eval_windows":100' '"eval_bytes":10' 'tiny'; do
	if [ "$ev" = tiny ]; then # 3000 bytes: a valid part of 150, fewer than 12 x 64 + 1
		printf '{"family":"sas","seed":1,"corpus":"t=%s","id":"ev","pre_steps":1,"sel_steps":1}\n' "$T/tiny.txt"
		want="the valid part has [0-9]* tokens, fewer than the 769 of eval_windows 12"
	else
		printf '{"family":"sas","seed":1,"corpus":"%s","id":"ev",%s}\n' "$corp" "$ev"
		want="eval_windows [0-9]* of T 64 need eval_bytes of at least [0-9]*"
	fi >"$T/ev.ndjson"
	rm -rf "$T/r7"
	sb-train -q -o "$T/r7" "$T/ev.ndjson" >/dev/null 2>"$T/e"; rc=$?
	[ $rc -eq 3 ] && grep -q "ev.ndjson:1: .*$want" "$T/e" && [ ! -e "$T/r7/ev" ]
	t_result $? "evaluation windows that cannot fit ($ev): refused before training, exit 3, no run directory (exit $rc: $(head -c 200 "$T/e"))"
done
sb-train -q -d "$T/nodata" -o "$T/r6" --device cuda "$T/mixed.ndjson" >"$T/o6" 2>"$T/e"; rc=$?
if grep -q "this build has no CUDA backend" "$T/e"; then # CUDA=0: --device itself is refused
	[ $rc -eq 2 ] && [ ! -e "$T/r6" ] && [ ! -s "$T/o6" ]
	t_result $? "# SKIP SAS cells under --device cuda: this build has no CUDA backend (a usage error before any cell: exit $rc, nothing written)"
else
	[ $rc -eq 2 ] && grep -q "mixed.ndjson:1: sas cells train on the CPU only (--device cpu), not on 'cuda'" "$T/e" &&
		[ ! -e "$T/r6" ] && [ ! -s "$T/o6" ]
	t_result $? "SAS cells under --device cuda: exit 2 naming the line before anything trains (exit $rc: $(head -n 1 "$T/e"))"
fi
t_done
