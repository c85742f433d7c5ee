#!/usr/bin/env bash
# The demo's pipeline with the real programs, reduced to fit CI: pipelines/grids/demo.grid
# with Fashion-MNIST only (Debian's dataset-fashion-mnist as the mirror), all seven methods,
# 3 seeds, a 1,000-example cap and 2 epochs, through sb-eval, sb-freeze --min-seeds 3, the
# test read and sb-stats to a report with its tables and SVG figures; a second run is a
# no-op; every sidecar verifies. (The full demo, `make demo`, adds the synthetic marker
# task and larger sizes: docs/pipelines.md.) Skipped when the programs are not built.
. "$(dirname "$0")/../shlib.sh"
for p in sb-fetch sb-train sb-eval sb-freeze sb-test sb-stats; do
	if [ ! -x "$TOP/bin/$p" ]; then
		t_result 0 "# SKIP $p is not built in this tree (the demo needs every stage)"
		t_done
	fi
done
MIRROR=/usr/share/datasets/fashion-mnist
if [ ! -r "$MIRROR/train-images-idx3-ubyte.gz" ]; then
	t_result 0 "# SKIP no Fashion-MNIST mirror at $MIRROR (Debian package dataset-fashion-mnist)"
	t_done
fi
sed -e 's/^task    fashion_mnist synthetic_marker$/task    fashion_mnist/' \
	-e 's/^set when task=fashion_mnist limit=6000 epochs=4$/set when task=fashion_mnist limit=1000 epochs=2/' \
	"$TOP/pipelines/grids/demo.grid" >"$T/demo-ci.grid"
grep -q '^task    fashion_mnist$' "$T/demo-ci.grid" && grep -q 'limit=1000 epochs=2' "$T/demo-ci.grid"
t_result $? "the reduced grid is demo.grid with smaller sizes"
dm() { make -C "$TOP" --no-print-directory EXTRA_GRIDS="$T/demo-ci.grid" SB_OUT="$T/out" SB_DATA="$T/data" "$@"; }

t0=$SECONDS
dm demo-ci >"$T/run.log" 2>&1
rc=$?
t_result $rc "the demo pipeline runs to its report ($((SECONDS - t0)) s; $(tail -n 1 "$T/run.log"))"
[ $rc -eq 0 ] || { tail -n 30 "$T/run.log" | sed 's/^/# /'; }
O="$T/out/demo-ci"
grep -q '^fetch fashion_mnist ok' "$T/run.log" && grep -q '"origin":"mirror"' "$T/data/.logs/fetch-fashion_mnist.ndjson"
t_result $? "Fashion-MNIST came from the Debian mirror"
[ "$(ls "$O/main/runs" | wc -l)" = 21 ]; t_result $? "21 run directories (7 methods x 3 seeds)"
grep -q '"n_val":200' "$O/main/runs/fashion_mnist.softmax.s0.plain.compact."*/val.ndjson; t_result $? "the cap applies before the split (n_val 200)"
grep -q '"topk_method"' "$O/main/selection.json" && grep -q '"min_seeds": *3' "$O/main/selection.json"
t_result $? "the selection was frozen with --min-seeds 3"
n=$(grep -c '"kind":"test.cell"' "$O/main/test/test.ndjson")
[ "$n" = 15 ]; t_result $? "the test read covers the 5 test methods x 3 seeds ($n)"
grep -q '^## main' "$O/report.md" && grep -q '^### Table 2' "$O/report.md" && grep -q '\.svg)$' "$O/report.md"
t_result $? "report.md has Table 2 and figures"
for f in $(sed -n 's/^!\[.*\](\(.*\))$/\1/p' "$O/report.md"); do
	head -c 200 "$O/$f" | grep -q '<svg' || { t_result 1 "figure $f is an SVG"; }
done
t_result 0 "every figure the report names exists"
grep -q '^| F-MNIST |' "$O/main/stats/table2.md"; t_result $? "Table 2 has the task's row"

find "$T/out" "$T/data" -type f -printf '%p %T@\n' | sort >"$T/before"
dm demo-ci >"$T/again.log" 2>&1
t_result $? "a second run succeeds"
find "$T/out" "$T/data" -type f -printf '%p %T@\n' | sort >"$T/after"
cmp -s "$T/before" "$T/after"; t_result $? "and is a no-op: no file written ($(diff "$T/before" "$T/after" | head -n 3 | tr '\n' ' '))"
dm out-verify OUTTREE="$O" >"$T/verify.log" 2>&1
t_result $? "every sidecar of the output tree verifies ($(tail -n 1 "$T/verify.log"))"
t_done
