#!/usr/bin/env bash
# sas-scaled-report.sh EVAL.ndjson TRAIN.ndjson — the scaled SAS comparison's tables
# (Markdown, stdout) from sb-eval's sas.scaled.* records and sb-train's sas.scaled.block
# records (lib/sas_scaled.h). Exit 3 when the records are missing.
set -eu -o pipefail
export LC_ALL=C
ev=${1:?usage: sas-scaled-report.sh EVAL.ndjson TRAIN.ndjson}
tr=${2:?usage: sas-scaled-report.sh EVAL.ndjson TRAIN.ndjson}
for f in "$ev" "$tr"; do [ -r "$f" ] || { echo "sas-scaled-report.sh: $f: cannot read" >&2; exit 4; }; done
grep -q '"kind":"sas.scaled.fidelity"' "$ev" || { echo "sas-scaled-report.sh: $ev: no sas.scaled.fidelity records" >&2; exit 3; }
cat "$tr" "$ev" | awk '
function num(key,    m) {
	if (match($0, "\"" key "\":-?[0-9.eE+-]+")) { m = substr($0, RSTART, RLENGTH); sub(/^"[^"]*":/, "", m); return m + 0 }
	return "nan"
}
function str(key,    m) {
	if (match($0, "\"" key "\":\"[^\"]*\"")) { m = substr($0, RSTART, RLENGTH); sub(/^"[^"]*":"/, "", m); sub(/"$/, "", m); return m }
	return ""
}
/"kind":"sas.scaled.block"/ { nb++; blk[nb] = num("steps") > 0 ? sprintf("| %d | %d | %.4f → %.4f | %.3g | %.0f |", num("block"), num("steps"), num("loss_first"), num("loss_last"), num("selector_gradient_norm_mean"), num("seconds")) : sprintf("| %d | 0 | n/a | n/a | %.0f |", num("block"), num("seconds")) }
/"kind":"sas.scaled.setup"/ { T = num("T"); tail = num("tail_from"); W = num("n_windows"); P = num("probes_per_task"); bb = str("backbone"); hay = str("haystack"); corp = str("fidelity_corpus"); bud = str("budget"); ids = str("ids") }
/"kind":"sas.scaled.fidelity"/ && !/fidelity\.(window|pair)/ { nf++; fid[nf] = sprintf("| %s | %.4f | %.4f [%.4f, %.4f] | %.4f [%.4f, %.4f] | %.4f | %.4f | %.3f | %+.2f |", str("method"), num("budget_fraction"), num("kl"), num("kl_lo"), num("kl_hi"), num("kl_tail"), num("kl_tail_lo"), num("kl_tail_hi"), num("top1"), num("top1_tail"), num("ppl"), num("ppl_change_pct")) }
/"kind":"sas.scaled.fidelity.pair"/ { np++; pair[np] = sprintf("| %s | %s | %+.4f [%+.4f, %+.4f] | %.2g | %.2g | %+.2f |", str("method_a"), str("method_b"), num("mean_diff"), num("ci_lo"), num("ci_hi"), num("p_t"), num("p_wilcoxon"), num("cohen_dz")) }
/"kind":"sas.scaled.retrieval"/ && !/retrieval\.pair/ { nr++; ret[nr] = sprintf("| %s | %s | %d/%d | %.3f | [%.3f, %.3f] |", str("method"), str("subset"), num("correct"), num("n"), num("accuracy"), num("wilson_lo"), num("wilson_hi")) }
/"kind":"sas.scaled.retrieval.pair"/ { nq++; rp[nq] = sprintf("| %s | %s | %d | %d | %d | %+.3f [%+.3f, %+.3f] | %.3g |", str("method_a"), str("method_b"), num("n"), num("n10"), num("n01"), num("diff"), num("ci_lo"), num("ci_hi"), num("mcnemar_p")) }
END {
	if (!nf) { print "sas-scaled-report.sh: no fidelity records" > "/dev/stderr"; exit 3 }
	print "# SAS beyond the toy: trained block selectors on a frozen LM-track decoder"
	print ""
	# (records before the budget and ids were written: the default recipe, bytes)
	if (bud == "") bud = "recipe:s=4,w=64,k=32"
	units = ids == "tokenizer" ? "tokens (of the backbone tokenizer)" : "bytes"
	printf "Backbone `%s`, T = %d %s; fidelity on %d windows of %s (valid part), tail from t = %d; %d probes per retrieval task (haystack %s). Selector budgets are matched row by row to the recipe `%s` (sinks, window, free keys).\n", bb, T, units, W, corp, tail, P, hay, bud
	print ""
	print "## Selector training"
	print ""
	print "| block | steps | training loss (first → last step) | mean pre-clip grad norm | seconds |"
	print "|---|---|---|---|---|"
	for (i = 1; i <= nb; i++) print blk[i]
	print ""
	print "## Fidelity against dense (mean over windows, 95% bootstrap CI)"
	print ""
	print "| method | kept fraction | KL(dense‖m) | KL tail | top-1 | top-1 tail | ppl | ppl change % |"
	print "|---|---|---|---|---|---|---|---|"
	for (i = 1; i <= nf; i++) print fid[i]
	print ""
	print "## Paired over windows: KL tail of SAS minus the other method (negative: SAS closer to dense)"
	print ""
	print "| SAS | vs | mean diff [95% CI] | p (t) | p (Wilcoxon) | dz |"
	print "|---|---|---|---|---|---|"
	for (i = 1; i <= np; i++) print pair[i]
	print ""
	print "## Retrieval (exact match, greedy decoding)"
	print ""
	print "| method | subset | correct | accuracy | Wilson 95% |"
	print "|---|---|---|---|---|"
	for (i = 1; i <= nr; i++) print ret[i]
	print ""
	print "| SAS | vs | probes | SAS only | other only | diff [95% CI] | McNemar p |"
	print "|---|---|---|---|---|---|---|"
	for (i = 1; i <= nq; i++) print rp[i]
}'
