#!/usr/bin/env bash
# tests/sh/readme_example.sh — the README's "A pipeline by hand" block, run as written.
# The block between <!-- example:begin --> and <!-- example:end --> is extracted, run in a
# fresh directory with bin/ on the PATH, and its outputs are checked: if the README's
# commands or the programs' interfaces drift apart, this fails.
. "$(dirname "$0")/../shlib.sh"
mir=/usr/share/datasets/fashion-mnist
if [ ! -d "$mir" ]; then
	echo "not ok 1 - $mir is missing (scripts/deps.sh installs dataset-fashion-mnist)"
	t_done
fi
sed -n '/<!-- example:begin -->/,/<!-- example:end -->/p' "$TOP/README.md" |
	sed '1,/^```sh$/d; /^```$/,$d' >"$T/example.sh"
lines=$(grep -c . "$T/example.sh")
[ "$lines" -ge 5 ]
t_result $? "the README's example block was found ($lines lines)"
cd "$T" || exit 1
bash -eu -o pipefail example.sh >example.out 2>example.err
rc=$?
t_result $rc "the example runs to the end (exit $rc)" "$(tail -n 3 example.err | tr '\n' ' ')"
n=$(ls -d runs/*/ 2>/dev/null | wc -l)
[ "$n" -eq 9 ]
t_result $? "nine run directories (got $n)"
n=$(grep -c '"kind":"train.done"' train.ndjson)
[ "$n" -eq 9 ]
t_result $? "nine train.done records (got $n)"
want=$(jq -r .sha256 selection.json 2>/dev/null)   # the canonical hash (docs/sb-freeze.md)
got=$(jq -r 'select(.kind == "test.read") | .selection_sha256' test/test.ndjson 2>/dev/null)
[ -n "$want" ] && [ "$got" = "$want" ]
t_result $? "the test read names the frozen selection's SHA-256" "selection.json ${want:-missing}, test.read ${got:-none}"
n=$(grep -c '"kind":"test.cell"' test/test.ndjson 2>/dev/null)
[ "${n:-0}" -ge 6 ]
t_result $? "the test read covers the selected cells (got ${n:-0} test.cell records, want >= 6)"
grep -q '^| F-MNIST ' tables.md
t_result $? "sb-stats wrote a Markdown table with an F-MNIST row"
n=$(awk -F'\t' 'NF == 4 && $4 >= 0 && $4 <= 1' example.out | wc -l)
[ "$n" -eq 18 ]
t_result $? "the jq line prints 18 rows (9 cells x 2 epochs) of method, seed, epoch, accuracy (got $n)"
# The README's one-cell command, as written (issue 4's "works from the README's
# instructions"), on the data the example fetched: 2 epochs of the full 48,000-example split.
cmd=$(grep -o '`sb-train --task fashion_mnist --method sparsemax --seed 0 --epochs 2`' "$TOP/README.md" | tr -d '`')
[ -n "$cmd" ]
t_result $? "the README's one-cell sb-train command was found"
if [ -n "$cmd" ]; then
	$cmd -q >one.ndjson 2>one.err
	rc=$?
	t_result $rc "'$cmd' runs (exit $rc)" "$(tail -n 3 one.err | tr '\n' ' ')"
	n=$(jq -r 'select(.kind == "train.done") | "\(.method) \(.seed) \(.epochs_run) \(.status)"' one.ndjson 2>/dev/null)
	[ "$n" = "sparsemax 0 2 completed" ]
	t_result $? "it trains the cell of the README: sparsemax, seed 0, 2 epochs, completed (got '$n')"
fi
t_done
