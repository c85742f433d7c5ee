#!/usr/bin/env bash
# sb-stats against published values (published.value records): ours, the bootstrap interval,
# inside and the difference, recomputed by tests/golden/stats/published_ref.py (numpy and the
# replayed draws, not sb-stats' code) on the committed fixtures; the boundary of 'inside';
# values it cannot measure (and why); the Markdown table; malformed records refused with
# file:line and exit 3, nothing written; the repository's own published file.
# Under the sanitizers (tests/san.sh): SB_BIN=build/san/bin.
. "$(dirname "$0")/../shlib.sh"
BIN=${SB_BIN:-$TOP/bin}
case $BIN in /*) ;; *) BIN=$TOP/$BIN ;; esac
export PATH="$BIN:$PATH"
G=$TOP/tests/golden/stats
F=$G/fixtures
PY=/usr/bin/python3
JF='function jf(l, k,   m) { if (match(l, "\"" k "\":(\"[^\"]*\"|[^,}]*)")) { m = substr(l, RSTART + length(k) + 3, RLENGTH - length(k) - 3); gsub(/"/, "", m); return m } return "NA" }'

pub() { # task method quantity value [extra json]
	local m=""
	[ "$2" != - ] && m=",\"method\":\"$2\""
	printf '{"kind":"published.value","v":1,"task":"%s"%s,"quantity":"%s","value":%s%s,"source":"%s"}\n' \
		"$1" "$m" "$3" "$4" "${5:-}" "${SRC:-test A}"
}
{
	pub fashion_mnist softmax mean 0.5
	pub fashion_mnist topk_softmax_025 mean 0.6
	pub fashion_mnist topk_softmax_05 delta 0.01 ',"supported":true'
	pub fashion_mnist - best_delta 0
	pub cifar10 sparsemax delta -0.5
	pub cifar10 sparsemax delta -0.02 # the same key again: this value counts
	pub cifar10 sparsemax best_delta -0.03 ',"supported":false'
	SRC="test B" pub cifar10 softmax mean 0.4 # another source: a row of its own
	pub mnist softmax mean 0.9              # no mnist records: not compared
	pub fashion_mnist softmax delta 0.001   # the baseline: no paired difference
	pub fashion_mnist bottomk_softmax_025 delta 0.001 # no such runs
	pub fashion_mnist topk_softmax_05 budget_delta 0.02 ',"budget":3'
	pub fashion_mnist topk_softmax_05 budget_delta 0.01 ',"budget":8'
	pub cifar10 sparsemax budget_delta 0.01 ',"budget":20' # longer than the runs (8 epochs)
	pub fashion_mnist sparsemax delta 0.01 ',"patience":0' # read at another patience
	pub fashion_mnist sparsemax mean 0.5 ',"patience":5'   # the same patience: compared
} >"$T/pub.ndjson"

sb-stats -q --seed 7 --resamples 2000 "$F/val.ndjson" "$T/pub.ndjson" >"$T/out.ndjson" 2>"$T/out.err"
t_result $? "sb-stats reads published.value records beside eval.epoch records"

awk "$JF"' /"kind":"stats.published"/ && jf($0,"ours") != "null" {
	m = jf($0,"method"); if (m == "null") m = "-"
	q = jf($0,"quantity"); if (q == "budget_delta") q = q ":" jf($0,"budget_epochs")
	print jf($0,"task"), q, m, jf($0,"ours_method"), jf($0,"n"), jf($0,"ours"), jf($0,"ci_lo"), jf($0,"ci_hi"), jf($0,"inside"), jf($0,"diff"), jf($0,"source") }' \
	"$T/out.ndjson" | sort >"$T/got"
"$PY" "$G/published_ref.py" "$F/val.ndjson" "$T/pub.ndjson" 7 2000 5 | sort >"$T/want"
n=$(wc -l <"$T/want")
res=$(awk 'FNR == 1 { f++ }
	f == 1 { k = $1 " " $2 " " $3; got[k] = $0; next }
	{ k = $1 " " $2 " " $3; n++
	  if (!(k in got)) { print "missing:", k; bad++; next }
	  split(got[k], g, " ")
	  for (i = 4; i <= 10; i++) {
		if (i == 4 || i == 5 || i == 9) { if (g[i] != $i) { print k, "field", i, "got", g[i], "want", $i; bad++ } continue }
		d = g[i] - $i; if (d < 0) d = -d; s = $i < 0 ? -$i : $i
		if (d > 1e-12 * (s > 1e-3 ? s : 1e-3)) { print k, "field", i, "got", g[i], "want", $i; bad++ }
		if (d > mx) mx = d
	  } }
	END { printf "%d compared, max abs diff %.3g\n", n, mx; exit bad > 0 }' "$T/got" "$T/want")
rc=$?
[ $rc = 0 ] && [ "$n" = 10 ] && [ "$(wc -l <"$T/got")" = 10 ]
t_result $? "ours, n, bootstrap CI, inside and ours - published agree with published_ref.py (10 values expected, 2 of them budgets: $n; $res)" "$(head -3 "$T/got")"

grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"task":"cifar10"' | grep '"quantity":"delta"' | grep -q '"published":-0.02,'
t_result $? "a second record of the same task, method, quantity and source replaces the first"
[ "$(grep -c '"kind":"stats.published"' "$T/out.ndjson")" = 13 ]
t_result $? "one stats.published record per value of a task with records at this patience (13), none for mnist"
grep '"kind":"stats.summary"' "$T/out.ndjson" | grep -q '"published_values":15,"published_compared":13,"published_unmatched":1,"published_other_patience":1'
t_result $? "stats.summary counts the published values, those compared, those without records and those at another patience" \
	"$(grep -o '"published_[a-z]*":[0-9]*' "$T/out.ndjson" | tr '\n' ' ')"
grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"method":"softmax","quantity":"delta"' |
	grep -q '"ours":null.*"why":"the baseline has no paired difference"'
t_result $? "a delta of the baseline itself: ours null, with the reason"
grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"method":"bottomk_softmax_025"' | grep -q '"ours":null.*"why":"no paired comparison'
t_result $? "a delta of a method without runs: ours null, with the reason"
grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"quantity":"budget_delta","budget_epochs":20' | grep -q '"ours":null.*"why":"the runs are shorter than the budget"'
t_result $? "a budget longer than the runs: ours null, with the reason"
l=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"quantity":"best_delta"' | grep '"task":"cifar10"')
[ "$(echo "$l" | awk "$JF"'{ print jf($0,"published_supported") }')" = false ] &&
	echo "$l" | grep -q "\"record\":\"$T/pub.ndjson:7\""
t_result $? "best_delta keeps the published mark and names the record's file:line"
# ours_method of best_delta = stats.task's best_method of the same task
bm=$(grep '"kind":"stats.task"' "$T/out.ndjson" | grep '"split":"val"' | grep '"task":"fashion_mnist"' | awk "$JF"'{ print jf($0,"best_method") }')
om=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"quantity":"best_delta"' | grep '"task":"fashion_mnist"' | awk "$JF"'{ print jf($0,"ours_method") }')
[ -n "$bm" ] && [ "$bm" = "$om" ]
t_result $? "best_delta's method is the task's best method ($om, stats.task: $bm)"

# inside: the published value at our lower bound is inside, the next double below is not
lo=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"task":"fashion_mnist","arch":"plain","tier":"compact","method":"softmax","quantity":"mean"' | awk "$JF"'{ print jf($0,"ci_lo") }')
below=$("$PY" -c "import math, sys; print(repr(math.nextafter(float(sys.argv[1]), 0)))" "$lo")
{ pub fashion_mnist softmax mean "$lo"; SRC="test C" pub fashion_mnist softmax mean "$below"; } >"$T/edge.ndjson"
sb-stats -q --seed 7 --resamples 2000 "$F/val.ndjson" "$T/edge.ndjson" >"$T/edge.out" 2>/dev/null
ins=$(awk "$JF"' /"kind":"stats.published"/ { print jf($0,"source") "=" jf($0,"inside") }' "$T/edge.out" | tr '\n' ' ')
[ "$ins" = "test A=true test C=false " ]
t_result $? "inside at the interval's bound ($lo: true) and one ulp below ($below: false): $ins"

# the Markdown table
sb-stats -q --seed 7 --resamples 2000 --format md "$F/val.ndjson" "$T/pub.ndjson" >"$T/out.md" 2>/dev/null
grep -q '^### Against the published values: validation accuracy at the best epoch (patience 5)$' "$T/out.md" &&
	grep -q '^| F-MNIST | top-k 0.5 | delta | test A | +0.0100\* | [+-]0\.[0-9]\{4\}\*\{0,1\} | \[[+-]0\.[0-9]\{4\}, [+-]0\.[0-9]\{4\}\] | 5 | \(yes\|no\) | [+-]0\.[0-9]\{4\} |$' "$T/out.md" &&
	grep -q '^| CIFAR-10 | best of 6: [a-z0-9. -]* (published: sparsemax) | best_delta | test A | -0.0300 |' "$T/out.md" &&
	grep -q '^| F-MNIST | softmax | delta | test A | +0.0010 | — | the baseline has no paired difference | — | — | — |$' "$T/out.md"
t_result $? "the Markdown table: title, a delta row with both marks, best of six naming the published method, a reason" \
	"$(grep -A4 'Against' "$T/out.md" | tr '\n' ' ' | cut -c1-300)"
sb-stats -q -o "$T/o1" "$F/val.ndjson" "$T/pub.ndjson" >/dev/null 2>&1 && [ -s "$T/o1/published.md" ] && [ -s "$T/o1/published.csv" ] && [ -s "$T/o1/published.tex" ]
t_result $? "-o writes published.md, .csv and .tex"
sb-stats -q -o "$T/o2" "$F/val.ndjson" >/dev/null 2>&1 && [ ! -e "$T/o2/published.md" ]
t_result $? "no published records: no published table"

# the figure (-p): one row per measured value (a dot and a bar each), means and differences in
# two panels, well-formed XML; orange rows are exactly those whose interval misses the value
sb-stats -q --seed 7 --resamples 2000 -p "$T/fig" "$F/val.ndjson" "$T/pub.ndjson" >/dev/null 2>&1
nm=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep -vc '"ours":null')
nout=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep -c '"inside":false')
nc=$(grep -c '<circle' "$T/fig/published.svg")
no=$(grep -c '<circle[^>]*fill="#D55E00"' "$T/fig/published.svg")
"$PY" -c "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])" "$T/fig/published.svg" &&
	[ "$nc" = "$nm" ] && [ "$no" = "$nout" ] &&
	grep -q '>Mean validation accuracy of a method<' "$T/fig/published.svg" &&
	grep -q '>Differences between methods (paired over seeds)<' "$T/fig/published.svg" &&
	grep -q '>F-MNIST: top-k 0.5 − softmax within 3 epochs \[+0.0200\]<' "$T/fig/published.svg"
t_result $? "published.svg: $nc rows for $nm measured values, $no orange for $nout outside, two panels, valid XML"
sb-stats -q -p "$T/fig2" "$F/val.ndjson" >/dev/null 2>&1 && [ -s "$T/fig2/budget.svg" ] && [ ! -e "$T/fig2/published.svg" ]
t_result $? "no published records: no published figure"

# malformed published records: exit 3, FILE:LINE and the field named, nothing written
bad() { # name expected-text record
	printf '%s\n' '{"kind":"run.meta","v":1}' "$3" >"$T/bad.ndjson"
	rm -rf "$T/ob"
	sb-stats -q -o "$T/ob" "$F/val.ndjson" "$T/bad.ndjson" >/dev/null 2>"$T/bad.err"
	local rc=$?
	[ $rc = 3 ] && grep -q "bad.ndjson:2" "$T/bad.err" && grep -q "$2" "$T/bad.err" && [ "$(wc -l <"$T/bad.err")" = 1 ] && [ ! -e "$T/ob" ]
	t_result $? "refused with exit 3 and file:line ($1): $(cat "$T/bad.err")"
}
bad "unknown quantity" "quantity" '{"kind":"published.value","v":1,"task":"x","method":"softmax","quantity":"median","value":0.5,"source":"s"}'
bad "mean above 1" "value" '{"kind":"published.value","v":1,"task":"x","method":"softmax","quantity":"mean","value":1.5,"source":"s"}'
bad "delta below -1" "value" '{"kind":"published.value","v":1,"task":"x","method":"sparsemax","quantity":"delta","value":-2,"source":"s"}'
bad "supported not a boolean" "supported" '{"kind":"published.value","v":1,"task":"x","method":"softmax","quantity":"delta","value":0.1,"supported":"yes","source":"s"}'
bad "delta without a method" "method" '{"kind":"published.value","v":1,"task":"x","quantity":"delta","value":0.1,"source":"s"}'
bad "no source" "source" '{"kind":"published.value","v":1,"task":"x","method":"softmax","quantity":"mean","value":0.5}'
bad "value not a number" "value" '{"kind":"published.value","v":1,"task":"x","method":"softmax","quantity":"mean","value":"0.5","source":"s"}'
bad "empty method" "empty" '{"kind":"published.value","v":1,"task":"x","method":"","quantity":"mean","value":0.5,"source":"s"}'
bad "budget_delta without a budget" "budget" '{"kind":"published.value","v":1,"task":"x","method":"sparsemax","quantity":"budget_delta","value":0.1,"source":"s"}'
bad "budget 0" "budget" '{"kind":"published.value","v":1,"task":"x","method":"sparsemax","quantity":"budget_delta","budget":0,"value":0.1,"source":"s"}'
bad "a budget on a mean" "budget" '{"kind":"published.value","v":1,"task":"x","method":"softmax","quantity":"mean","budget":3,"value":0.5,"source":"s"}'
bad "negative patience" "patience" '{"kind":"published.value","v":1,"task":"x","method":"softmax","quantity":"mean","patience":-1,"value":0.5,"source":"s"}'
bad "version 2" "version" '{"kind":"published.value","v":2,"task":"x","method":"softmax","quantity":"mean","value":0.5,"source":"s"}'

# the repository's published file (pipelines/published/study.ndjson) is read whole: every
# record valid, one value per (task, method, quantity, source), the 13 tasks' best deltas
P=$TOP/pipelines/published/study.ndjson
sb-stats -q "$P" >"$T/p.out" 2>"$T/p.err"
rc=$?
s=$(grep '"kind":"stats.summary"' "$T/p.out")
nrec=$(grep -c . "$P")
[ $rc = 0 ] && echo "$s" | grep -q "\"published_values\":$nrec,\"published_compared\":0,\"published_unmatched\":$nrec"
t_result $? "pipelines/published/study.ndjson: $nrec records, all read, each a value of its own" "$(cat "$T/p.err") $s"
[ "$(grep -c '"quantity":"best_delta"' "$P")" = 13 ] &&
	[ "$(grep '"quantity":"best_delta"' "$P" | sed 's/.*"task":"\([^"]*\)".*/\1/' | sort -u | wc -l)" = 13 ]
t_result $? "it holds one best delta per task of the 13"
t_done
