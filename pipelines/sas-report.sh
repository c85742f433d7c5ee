#!/usr/bin/env bash
# sas-report.sh EVAL.ndjson — the SAS reproduction's report (Markdown, stdout) from the
# sas.eval records sb-eval wrote (one per seed): per-seed values, mean and sample sd
# (n-1) over seeds, next to PROTOCOL B's published numbers. The published numbers are
# printed, never computed with. Exit 3 when the file holds no sas.eval record.
set -eu -o pipefail
export LC_ALL=C
in=${1:?usage: sas-report.sh EVAL.ndjson}
[ -r "$in" ] || { echo "sas-report.sh: $in: cannot read" >&2; exit 4; }
grep -q '"kind":"sas.eval"' "$in" || { echo "sas-report.sh: $in: no sas.eval records" >&2; exit 3; }
awk '
function num(line, key,    m) {
	# the writer is ours: "key":NUMBER or "key":null, keys unique in a record
	if (match(line, "\"" key "\":-?[0-9.eE+-]+")) {
		m = substr(line, RSTART, RLENGTH); sub(/^"[^"]*":/, "", m); return m + 0
	}
	if (index(line, "\"" key "\":null")) { nulls[key] = 1; isnull[key, n] = 1; return 0 } # undefined (no selector step)
	bad = bad " " key; return "nan"
}
function str(line, key,    m) {
	if (match(line, "\"" key "\":\"[^\"]*\"")) {
		m = substr(line, RSTART, RLENGTH); sub(/^"[^"]*":"/, "", m); sub(/"$/, "", m); return m
	}
	return ""
}
function add(key, v) { val[key, n] = v }
function mean(key,    i, s) { s = 0; for (i = 1; i <= n; i++) s += val[key, i]; return s / n }
function sd(key,    i, s, m) {
	if (n < 2) return 0
	m = mean(key); s = 0
	for (i = 1; i <= n; i++) s += (val[key, i] - m) ^ 2
	return sqrt(s / (n - 1))
}
BEGIN { n = 0; bad = "" }
/"kind":"sas.eval"/ {
	n++
	seed[n] = num($0, "seed")
	corpus = str($0, "corpus"); note = str($0, "corpus_note")
	split("dense_val_ppl sas_val_ppl dense_test_ppl sas_test_ppl dense_test_loss sas_test_loss " \
	      "test_ppl_change_vs_dense_percent val_ppl_change_vs_dense_percent retained_attention_fraction " \
	      "attention_positions_reduced_percent selector_gate_entropy selector_gradient_norm_mean " \
	      "pretrain_loss_first pretrain_loss_last parameter_count selector_parameter_count " \
	      "retained_positions causal_positions", keys, " ")
	for (k in keys) add(keys[k], num($0, keys[k]))
}
END {
	if (bad != "") { print "sas-report.sh: fields missing from a sas.eval record:" bad > "/dev/stderr"; exit 3 }
	print "# SAS reproduction (PROTOCOL B): ours next to the published numbers"
	print ""
	printf "Corpus: **%s**; seeds:", corpus
	for (i = 1; i <= n; i++) printf " %d", seed[i]
	print "; tiny decoder (d 32, 4 heads, one block, T 64), bytes as tokens."
	if (note != "") { print ""; print "> **" note "**" }
	print ""
	print "Our random numbers are our own (Philox, lib/rng.h): seeds compare as distributions, not one by one."
	print "Mean and sample sd (n-1) over seeds. The published run is WikiText-2 with PyTorch; published values are shown, never used."
	print ""
	print "| quantity | ours (mean ± sd) | published |"
	print "|---|---|---|"
	printf "| dense test perplexity | %.2f ± %.2f | 139.65 ± 2.81 |\n", mean("dense_test_ppl"), sd("dense_test_ppl")
	printf "| SAS test perplexity | %.2f ± %.2f | 139.68 ± 2.80 |\n", mean("sas_test_ppl"), sd("sas_test_ppl")
	printf "| test perplexity change vs dense (%%) | %+.4f ± %.4f | +0.018 ± 0.017 |\n", mean("test_ppl_change_vs_dense_percent"), sd("test_ppl_change_vs_dense_percent")
	printf "| dense / SAS validation perplexity | %.2f / %.2f | — |\n", mean("dense_val_ppl"), mean("sas_val_ppl")
	printf "| validation perplexity change (%%) | %+.4f ± %.4f | — |\n", mean("val_ppl_change_vs_dense_percent"), sd("val_ppl_change_vs_dense_percent")
	printf "| retained attention fraction | %.4f (%d/%d positions) | 0.5385 (1120/2080) |\n", mean("retained_attention_fraction"), val["retained_positions", 1], val["causal_positions", 1]
	printf "| attention positions reduced (%%) | %.2f | 46.15 |\n", mean("attention_positions_reduced_percent")
	if ("selector_gradient_norm_mean" in nulls) print "| selector gradient norm (mean over steps) | n/a (no selector step) | ~4.6e-5 |"
	else printf "| selector gradient norm (mean over steps) | %.2e ± %.1e | ~4.6e-5 |\n", mean("selector_gradient_norm_mean"), sd("selector_gradient_norm_mean")
	printf "| selector gate entropy (nats; test windows) | %.4f ± %.4f | — |\n", mean("selector_gate_entropy"), sd("selector_gate_entropy")
	printf "| pretraining loss, step 1 → step 30 | %.2f → %.2f | ~5.5 → 4.9 |\n", mean("pretrain_loss_first"), mean("pretrain_loss_last")
	printf "| parameters (selector) | %d (%d) | 23,392 (512) |\n", val["parameter_count", 1], val["selector_parameter_count", 1]
	print ""
	print "## Per seed"
	print ""
	print "| seed | dense test ppl | SAS test ppl | change (%) | dense val ppl | SAS val ppl | retained | gate entropy | grad norm mean | pretrain loss |"
	print "|---|---|---|---|---|---|---|---|---|---|"
	for (i = 1; i <= n; i++)
		printf "| %d | %.3f | %.3f | %+.4f | %.3f | %.3f | %.4f | %.4f | %s | %.3f → %.3f |\n", seed[i],
		       val["dense_test_ppl", i], val["sas_test_ppl", i], val["test_ppl_change_vs_dense_percent", i],
		       val["dense_val_ppl", i], val["sas_val_ppl", i], val["retained_attention_fraction", i],
		       val["selector_gate_entropy", i],
		       isnull["selector_gradient_norm_mean", i] ? "n/a" : sprintf("%.2e", val["selector_gradient_norm_mean", i]),
		       val["pretrain_loss_first", i], val["pretrain_loss_last", i]
	print ""
	print "Records: eval.ndjson (sas.eval per seed), runs/sas-sSEED/{cell.json,train.ndjson,model.safetensors}. docs/sas.md says what each field means."
}' "$in"
