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
	pub fashion_mnist topk_softmax_025 mean 0.6 ',"patience":0' # another patience: kept apart, not compared
	pub fashion_mnist topk_softmax_05 delta 0.01 ',"supported":true'
	pub fashion_mnist - best_delta 0
	pub cifar10 sparsemax delta -0.5 ',"supported":true'
	pub cifar10 sparsemax delta -0.02 ',"supported":false' # the same key again: this one counts
	pub cifar10 sparsemax best_delta -0.03 ',"supported":false'
	pub cifar10 - best_delta -0.03      # no method named: a value of its own
	SRC="test B" pub cifar10 softmax mean 0.4 # another source: a row of its own
	pub mnist softmax mean 0.9          # no mnist records: not compared
	pub kmnist softmax mean 0.9         # kmnist has test reads only: not compared
	pub fashion_mnist softmax delta 0.001 # the baseline: no paired difference
	pub fashion_mnist bottomk_softmax_0125 delta 0.001 # no such runs
	pub fashion_mnist topk_softmax_05 budget_delta 0.02 ',"budget":3,"patience":0' # budgets have no patience
	pub fashion_mnist topk_softmax_05 budget_delta 0.01 ',"budget":8'
	pub cifar10 sparsemax budget_delta 0.01 ',"budget":20' # longer than the runs (8 epochs)
	pub fashion_mnist sparsemax delta 0.01 ',"patience":0' # read at another patience
	pub fashion_mnist sparsemax mean 0.5 ',"patience":5'   # the same patience: compared
	pub fashion_mnist sparsemax delta 0.01 ',"baseline":"topk_softmax_025"' # another baseline
	pub cifar10 softmax mean 0.65 ',"arch":"local_hybrid"'
	pub cifar10 sparsemax delta -0.02 ',"arch":"local_hybrid"'
	pub fashion_mnist bottomk_softmax_025 delta 0.05 # outside the six, with runs: compared
	pub cifar10 sparsemax test_mean 0.66 ',"patience":0' # test reads: no patience, compared
	pub kmnist softmax test_mean 0.91   # test reads only: a test mean is compared
	pub fashion_mnist softmax test_mean 0.9 # no test reads of fashion_mnist: not compared
} >"$T/pub.ndjson"
# the records: the fixture's usps runs as they are, the others in reverse order (so that a
# mean's seeds must be sorted), a method outside the six that beats them all (bottom-k 0.25 =
# top-k 0.25 + 0.05: the best delta stays the best of six), cifar10 again as local_hybrid,
# test reads alone for kmnist, and the fixture's test reads (cifar10, usps; reversed)
"$PY" - "$F/val.ndjson" "$T/val.ndjson" "$F/test.ndjson" <<'PYEOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
tests = open(sys.argv[3]).read().splitlines()[::-1]
usps = [l for l in lines if '"task":"usps"' in l]
other = [l for l in lines if '"task":"usps"' not in l]
out = usps + other[::-1]
for l in lines:
    r = json.loads(l)
    if r.get("kind") != "eval.epoch":
        continue
    if r["task"] == "fashion_mnist" and r["method"] == "topk_softmax_025":
        r2 = dict(r, method="bottomk_softmax_025", val_accuracy=round(min(1.0, r["val_accuracy"] + 0.05), 4))
        out.append(json.dumps(r2, separators=(",", ":")))
    if r["task"] == "cifar10":
        r2 = dict(r, arch="local_hybrid", val_accuracy=round(r["val_accuracy"] * 0.99, 4))
        out.append(json.dumps(r2, separators=(",", ":")))
for s in range(3):
    out.append(json.dumps({"kind": "test.cell", "v": 1, "task": "kmnist", "method": "softmax", "seed": s,
                           "test_accuracy": 0.9 + 0.01 * s}, separators=(",", ":")))
out += tests
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PYEOF

sb-stats -q --seed 7 --resamples 2000 "$T/val.ndjson" "$T/pub.ndjson" >"$T/out.ndjson" 2>"$T/out.err"
t_result $? "sb-stats reads published.value records beside eval.epoch records" "$(cat "$T/out.err")"

awk "$JF"' /"kind":"stats.published"/ && jf($0,"ours") != "null" {
	m = jf($0,"method"); if (m == "null") m = "-"
	q = jf($0,"quantity"); if (q == "budget_delta") q = q ":" jf($0,"budget")
	print jf($0,"task") "@" jf($0,"arch") "@" jf($0,"tier"), q, m, jf($0,"ours_method"), jf($0,"n"), jf($0,"ours"), jf($0,"ci_lo"), jf($0,"ci_hi"), jf($0,"inside"), jf($0,"diff"), jf($0,"source") }' \
	"$T/out.ndjson" | sort >"$T/got"
"$PY" "$G/published_ref.py" "$T/val.ndjson" "$T/pub.ndjson" 7 2000 5 | sort >"$T/want"
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
[ $rc = 0 ] && [ "$n" = 16 ] && [ "$(wc -l <"$T/got")" = 16 ]
t_result $? "ours, n, bootstrap CI, inside and ours - published agree with published_ref.py (16 values expected, budgets, local_hybrid and test means among them: $n; $res)" "$(head -3 "$T/got")"

l=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"task":"cifar10","arch":"plain"' | grep '"quantity":"delta"')
echo "$l" | grep -q '"published":-0.02,' && echo "$l" | grep -q '"published_supported":false'
t_result $? "a second record of the same key replaces the first, its value and its mark"
[ "$(grep -c '"kind":"stats.published"' "$T/out.ndjson")" = 19 ]
t_result $? "one stats.published record per value of a task with records to measure it on, at this patience and baseline (19)"
grep '"kind":"stats.summary"' "$T/out.ndjson" | grep -q '"published_values":25,"published_compared":19,"published_unmatched":3,"published_other_patience":2,"published_other_baseline":1'
t_result $? "stats.summary counts the values, those compared, without records (3: a validation mean where only test reads are, a test mean where none are), at another patience (2), from another baseline (1)" \
	"$(grep -o '"published_[a-z_]*":[0-9]*' "$T/out.ndjson" | tr '\n' ' ')"
# the summary's measured and inside counts are the records'
nme=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep -vc '"ours":null')
nin=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep -c '"inside":true')
grep '"kind":"stats.summary"' "$T/out.ndjson" | grep -q "\"published_measured\":$nme,\"published_inside\":$nin[,}]" && [ "$nme" = 16 ]
t_result $? "stats.summary: published_measured $nme (16) and published_inside $nin, as the records say"
# our Holm mark is the paired comparison's
sp=$(grep '"kind":"stats.paired"' "$T/out.ndjson" | grep '"split":"val","task":"cifar10","arch":"plain"' | grep '"method":"sparsemax"' | awk "$JF"'{ print jf($0,"supported") }')
os=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"task":"cifar10","arch":"plain"' | grep '"method":"sparsemax","quantity":"delta"' | awk "$JF"'{ print jf($0,"ours_supported") }')
[ -n "$sp" ] && [ "$sp" = "$os" ]
t_result $? "ours_supported is the comparison's Holm mark ($os; stats.paired: $sp)"
# the best of six, not of every method: bottom-k 0.25 (outside the six) beats them all
l=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"task":"fashion_mnist"' | grep '"quantity":"best_delta"')
echo "$l" | grep -q '"best_of":6,' && ! echo "$l" | grep -q '"ours_method":"bottomk'
t_result $? "best_delta is the best of the six sparse methods (best_of 6), not of every method compared"
grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"method":"softmax","quantity":"delta"' |
	grep -q '"ours":null.*"why":"the baseline has no paired difference"'
t_result $? "a delta of the baseline itself: ours null, with the reason"
grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"method":"bottomk_softmax_0125"' | grep -q '"ours":null.*"why":"no paired comparison'
t_result $? "a delta of a method without runs: ours null, with the reason"
grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"quantity":"budget_delta","budget":20' | grep -q '"ours":null.*"why":"the runs are shorter than the budget"'
t_result $? "a budget longer than the runs: ours null, with the reason"
l=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"quantity":"best_delta"' | grep '"task":"cifar10","arch":"plain"' | grep '"method":"sparsemax"')
[ "$(echo "$l" | awk "$JF"'{ print jf($0,"published_supported") }')" = false ] &&
	echo "$l" | grep -q "\"record\":\"$T/pub.ndjson:8\""
t_result $? "best_delta keeps the published mark and names the record's file:line"
# ours_method of best_delta = stats.task's best_method of the same task
bm=$(grep '"kind":"stats.task"' "$T/out.ndjson" | grep '"split":"val"' | grep '"task":"fashion_mnist"' | awk "$JF"'{ print jf($0,"best_method") }')
om=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"quantity":"best_delta"' | grep '"task":"fashion_mnist"' | awk "$JF"'{ print jf($0,"ours_method") }')
[ -n "$bm" ] && [ "$bm" = "$om" ]
t_result $? "best_delta's method is the task's best method ($om, stats.task: $bm)"

# inside: the published value at our lower bound is inside, the next double below is not
lo=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"task":"fashion_mnist","arch":"plain","tier":"compact","method":"softmax","quantity":"mean"' | awk "$JF"'{ print jf($0,"ci_lo") }')
below=$("$PY" -c "import math, sys; print(repr(math.nextafter(float(sys.argv[1]), 0)))" "$lo")
hi=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep '"task":"fashion_mnist","arch":"plain","tier":"compact","method":"softmax","quantity":"mean"' | awk "$JF"'{ print jf($0,"ci_hi") }')
above=$("$PY" -c "import math, sys; print(repr(math.nextafter(float(sys.argv[1]), 2)))" "$hi")
{
	pub fashion_mnist softmax mean "$lo"
	SRC="test C" pub fashion_mnist softmax mean "$below"
	SRC="test D" pub fashion_mnist softmax mean "$hi"
	SRC="test E" pub fashion_mnist softmax mean "$above"
} >"$T/edge.ndjson"
sb-stats -q --seed 7 --resamples 2000 "$T/val.ndjson" "$T/edge.ndjson" >"$T/edge.out" 2>/dev/null
ins=$(awk "$JF"' /"kind":"stats.published"/ { print jf($0,"source") "=" jf($0,"inside") }' "$T/edge.out" | tr '\n' ' ')
[ "$ins" = "test A=true test C=false test D=true test E=false " ]
t_result $? "inside at the interval's bounds ($lo, $hi: true) and one ulp outside ($below, $above: false): $ins"

# --min-seeds above the seeds run: a mean is not measured, and says why
sb-stats -q --seed 7 --resamples 200 --min-seeds 6 "$T/val.ndjson" "$T/pub.ndjson" >"$T/ms.out" 2>/dev/null
grep '"kind":"stats.published"' "$T/ms.out" | grep '"quantity":"mean"' | grep -q '"ours":null.*"why":"fewer seeds than --min-seeds"' &&
	! grep '"kind":"stats.published"' "$T/ms.out" | grep '"quantity":"mean"' | grep -q '"ours":[0-9]'
t_result $? "--min-seeds 6 over 5 seeds: no mean measured, the reason given"
# another baseline: no difference is compared (the published ones are from softmax), means are
sb-stats -q --seed 7 --resamples 200 --baseline sparsemax "$T/val.ndjson" "$T/pub.ndjson" >"$T/bl.out" 2>/dev/null
nd=$(grep '"kind":"stats.published"' "$T/bl.out" | grep -v '"quantity":"mean"' | grep -vc '"quantity":"test_mean"')
nb=$(grep -o '"published_other_baseline":[0-9]*' "$T/bl.out" | cut -d: -f2)
nme=$(grep '"kind":"stats.published"' "$T/bl.out" | grep -c '"quantity":"mean"')
[ "$nd" = 0 ] && [ "$nb" = 13 ] && [ "$nme" = 5 ] && [ "$(grep '"kind":"stats.published"' "$T/bl.out" | grep -c '"quantity":"test_mean"')" = 2 ]
t_result $? "--baseline sparsemax: $nd differences compared, $nb counted as from another baseline (13; one more is at another patience), $nme means (5), the 2 test means"

# the Markdown table
sb-stats -q --seed 7 --resamples 2000 --format md "$T/val.ndjson" "$T/pub.ndjson" >"$T/out.md" 2>/dev/null
grep -q '^### Against the published values: validation accuracy at the best epoch (patience 5), and test reads$' "$T/out.md" &&
	grep -q "^$nin of the 16 published values measured lie inside our interval\. " "$T/out.md" &&
	grep -q '^| F-MNIST | top-k 0.5 | delta | test A | +0.0100\* | [+-]0\.[0-9]\{4\}\*\{0,1\} | \[[+-]0\.[0-9]\{4\}, [+-]0\.[0-9]\{4\}\] | 5 | \(yes\|no\) | [+-]0\.[0-9]\{4\} |$' "$T/out.md" &&
	grep -q '^| CIFAR-10 | best of 6: [a-z0-9. -]* (published: sparsemax) | best_delta | test A | -0.0300 |' "$T/out.md" &&
	grep -q '^| F-MNIST | softmax | delta | test A | +0.0010 | — | the baseline has no paired difference | — | — | — |$' "$T/out.md"
t_result $? "the Markdown table: title, a delta row with both marks, best of six naming the published method, a reason" \
	"$(grep -A4 'Against' "$T/out.md" | tr '\n' ' ' | cut -c1-300)"
sb-stats -q -o "$T/o1" "$T/val.ndjson" "$T/pub.ndjson" >/dev/null 2>&1 && [ -s "$T/o1/published.md" ] && [ -s "$T/o1/published.csv" ] && [ -s "$T/o1/published.tex" ]
t_result $? "-o writes published.md, .csv and .tex"
sb-stats -q -o "$T/o2" "$F/val.ndjson" >/dev/null 2>&1 && [ ! -e "$T/o2/published.md" ]
t_result $? "no published records: no published table"

# the figure (-p): one row per measured value (a dot and a bar each), means and differences in
# two panels, well-formed XML; orange rows are exactly those whose interval misses the value
sb-stats -q --seed 7 --resamples 2000 -p "$T/fig" "$T/val.ndjson" "$T/pub.ndjson" >/dev/null 2>&1
nm=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep -vc '"ours":null')
nout=$(grep '"kind":"stats.published"' "$T/out.ndjson" | grep -c '"inside":false')
nc=$(grep -c '<circle' "$T/fig/published.svg")
no=$(grep -c '<circle[^>]*fill="#D55E00"' "$T/fig/published.svg")
"$PY" -c "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])" "$T/fig/published.svg" &&
	[ "$nc" = "$nm" ] && [ "$no" = "$nout" ] &&
	grep -q '>Mean accuracy of a method (validation; test reads)<' "$T/fig/published.svg" &&
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
bad "a baseline on a mean" "baseline" '{"kind":"published.value","v":1,"task":"x","method":"softmax","quantity":"mean","baseline":"softmax","value":0.5,"source":"s"}'
bad "an empty baseline" "baseline" '{"kind":"published.value","v":1,"task":"x","method":"sparsemax","quantity":"delta","baseline":"","value":0.1,"source":"s"}'
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
