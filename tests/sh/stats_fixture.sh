#!/usr/bin/env bash
# sb-stats on the committed fixtures against the values gen_fixtures.py computed with
# numpy/scipy/statsmodels (tests/golden/stats/expected/). p-values, Holm-adjusted values and
# means must agree to 1e-10 relative; bootstrap CIs (replayed in Python with the same
# Philox draws) to 1e-12; budgets, sign changes and switch epochs exactly.
. "$(dirname "$0")/../shlib.sh"
G=$TOP/tests/golden/stats
F=$G/fixtures
E=$G/expected
run() { sb-stats -q --seed 7 --resamples 2000 "$@"; }

# compare FILE_GOT FILE_WANT: both "key... value..." lines; numeric fields within tolerance
compare() { # name got want keys rtol
	awk -v name="$1" -v keys="$4" -v rtol="$5" '
	function abs(x) { return x < 0 ? -x : x }
	FNR == 1 { f++ }
	/^#/ { next }
	f == 1 { k = ""; for (i = 1; i <= keys; i++) k = k " " $i; got[k] = $0; next }
	f == 2 {
		k = ""; for (i = 1; i <= keys; i++) k = k " " $i
		n++
		if (!(k in got)) { print "missing in sb-stats output:" k; bad++; next }
		split(got[k], g, " ")
		for (i = keys + 1; i <= NF; i++) {
			a = g[i] + 0; b = $i + 0
			d = abs(a - b); tol = rtol * (abs(b) > 1e-300 ? abs(b) : 1e-300)
			if (d > tol && d > 1e-15) { printf "%s: field %d of%s: got %s want %s\n", name, i, k, g[i], $i; bad++ }
			if (abs(b) > 0 && d / abs(b) > maxrel) maxrel = d / abs(b)
		}
	}
	END { printf "# %s: %d rows, max rel error %.3g\n", name, n, maxrel; exit bad > 0 || n == 0 }' "$2" "$3"
}

# field extraction from NDJSON: jf(line, key) -> value (strings unquoted)
JF='function jf(l, k,   m) { if (match(l, "\"" k "\":(\"[^\"]*\"|[^,}]*)")) { m = substr(l, RSTART + length(k) + 3, RLENGTH - length(k) - 3); gsub(/"/, "", m); return m } return "NA" }'

run "$F/val.ndjson" >"$T/val.ndjson"
t_result $? "sb-stats runs on fixtures/val.ndjson"
awk "$JF"' /"kind":"stats.paired"/ { print jf($0,"task"), jf($0,"method"), jf($0,"n"), jf($0,"mean_diff"), jf($0,"p_t"), jf($0,"p_holm"), jf($0,"p_wilcoxon"), jf($0,"ci_lo"), jf($0,"ci_hi") }' \
	"$T/val.ndjson" | sort >"$T/got_paired"
awk '!/^#/ { print $1, $2, $3, $4, $5, $6, $7, $8, $9 }' "$E/val_paired.tsv" | sort >"$T/want_paired"
out=$(compare val-paired "$T/got_paired" "$T/want_paired" 2 1e-10); rc=$?
echo "$out" | grep '^#'
t_result $rc "validation: mean, p (t), p (Holm), p (Wilcoxon), bootstrap CI agree with scipy/statsmodels" "$(echo "$out" | grep -v '^#' | head -3)"

awk "$JF"' /"kind":"stats.sign_change"/ { print jf($0,"task"), jf($0,"method"), jf($0,"sign_change"), jf($0,"sign_change_ci_lo"), jf($0,"sign_change_ci_hi"), jf($0,"first_negative"), jf($0,"switch_epoch"), jf($0,"switch_epoch_ci_lo"), jf($0,"switch_epoch_ci_hi") }' \
	"$T/val.ndjson" | sort >"$T/got_sc"
awk '!/^#/ { print $1, $2, $10, $11, $12, $13, $14, $15, $16 }' "$E/val_paired.tsv" | sort >"$T/want_sc"
out=$(compare sign-change "$T/got_sc" "$T/want_sc" 2 0); rc=$?
echo "$out" | grep '^#'
t_result $rc "budgets: sign change, first negative, A8 switch epoch and their bootstrap CIs" "$(echo "$out" | grep -v '^#' | head -3)"

run "$F/test.ndjson" >"$T/test.ndjson"
awk "$JF"' /"kind":"stats.paired"/ && /"split":"test"/ { print jf($0,"task"), jf($0,"method"), jf($0,"n"), jf($0,"mean_diff"), jf($0,"p_t"), jf($0,"p_holm"), jf($0,"p_wilcoxon"), jf($0,"ci_lo"), jf($0,"ci_hi") }' \
	"$T/test.ndjson" | sort >"$T/got_test"
grep -v '^#' "$E/test_paired.tsv" | sort >"$T/want_test"
out=$(compare test-paired "$T/got_test" "$T/want_test" 2 1e-10); rc=$?
echo "$out" | grep '^#'
t_result $rc "test reads: paired statistics agree with scipy/statsmodels" "$(echo "$out" | grep -v '^#' | head -3)"

run --baseline dense "$F/probes.ndjson" >"$T/probes.ndjson"
awk "$JF"' /"kind":"stats.probe_rate"/ { print jf($0,"model"), jf($0,"task"), jf($0,"method"), jf($0,"correct"), jf($0,"n"), jf($0,"ci_lo"), jf($0,"ci_hi") }' \
	"$T/probes.ndjson" | sort >"$T/got_rates"
grep -v '^#' "$E/probe_rates.tsv" | sort >"$T/want_rates"
out=$(compare probe-rates "$T/got_rates" "$T/want_rates" 3 1e-12); rc=$?
echo "$out" | grep '^#'
t_result $rc "probes: Wilson intervals agree with statsmodels" "$(echo "$out" | grep -v '^#' | head -3)"
awk "$JF"' /"kind":"stats.probe_paired"/ { print jf($0,"model"), jf($0,"method_a"), jf($0,"method_b"), jf($0,"both_correct"), jf($0,"a_only"), jf($0,"b_only"), jf($0,"both_wrong"), jf($0,"diff"), jf($0,"ci_lo"), jf($0,"ci_hi"), jf($0,"p_mcnemar"), jf($0,"p_holm") }' \
	"$T/probes.ndjson" | sort >"$T/got_pairs"
grep -v '^#' "$E/probe_pairs.tsv" | sort >"$T/want_pairs"
out=$(compare probe-pairs "$T/got_pairs" "$T/want_pairs" 3 1e-10); rc=$?
echo "$out" | grep '^#'
t_result $rc "probes: paired counts, Newcombe CI, exact McNemar and Holm agree" "$(echo "$out" | grep -v '^#' | head -3)"

for fx in rule_ok rule_fail; do
	run --rule "$F/$fx.ndjson" >"$T/$fx.ndjson" 2>"$T/$fx.err"
	rc=$?
	awk "$JF"' /"kind":"stats.power"/ { l = jf($0,"n_labelled") } /"kind":"stats.rule"/ { print "'$fx'", l, jf($0,"mean_gain"), jf($0,"wins"), jf($0,"losses"), jf($0,"non_softmax"), (jf($0,"success") == "true") }' \
		"$T/$fx.ndjson" >"$T/got_rule"
	grep "^$fx " "$E/rule.tsv" >"$T/want_rule"
	out=$(compare "$fx" "$T/got_rule" "$T/want_rule" 1 1e-12); crc=$?
	echo "$out" | grep '^#'
	t_result $crc "$fx: labels, mean gain, wins, losses, decisions, success agree" "$(echo "$out" | grep -v '^#' | head -3)"
	want=$([ "$(awk '{print $7}' "$T/want_rule")" = 1 ] && echo 0 || echo 3)
	[ "$rc" = "$want" ]
	t_result $? "$fx: exit status $rc (want $want)"
done
t_done
