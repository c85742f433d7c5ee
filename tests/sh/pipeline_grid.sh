#!/usr/bin/env bash
# Grids as data (scripts/grid): the study's 910 cells (make -n study lists them), the
# extension and demo grids, the fields the protocol fixes per task, the format's
# errors (naming file and line), include and criterion, and parameter files that are
# rewritten only when their content changes.
. "$(dirname "$0")/../shlib.sh"
G="$TOP/scripts/grid"
cd "$TOP"

# make -n study: 910 cells, nothing run
make --no-print-directory -n study SB_OUT="$T/out" SB_DATA="$T/data" >"$T/study-n.log" 2>&1
rc=$?
n=$(grep -c '^pipelines/stage.sh train ' "$T/study-n.log")
e=$(grep -c '^pipelines/stage.sh eval ' "$T/study-n.log")
[ $rc -eq 0 ] && [ "$n" = 910 ] && [ "$e" = 910 ]; t_result $? "make -n study lists 910 cells (train $n, eval $e, exit $rc)"
grep -q '^pipelines/stage.sh freeze ' "$T/study-n.log" && grep -q '^pipelines/stage.sh test ' "$T/study-n.log" &&
	grep -q '^pipelines/stage.sh stats ' "$T/study-n.log" && grep -q '^pipelines/stage.sh report ' "$T/study-n.log"
t_result $? "then the freeze, the test read, the statistics and the report"
[ "$(grep -c '^pipelines/stage.sh fetch ' "$T/study-n.log")" = 13 ]; t_result $? "and fetches the 13 tasks"
[ ! -e "$T/out/study/main/runs" ] && [ ! -e "$T/data" ]; t_result $? "make -n runs nothing"
keys=$(sed -n 's/^pipelines\/stage.sh train [^ ]* //p' "$T/study-n.log" | sort -u | wc -l)
[ "$keys" = 910 ]; t_result $? "910 distinct cell keys"
for m in softmax topk_softmax_0125 topk_softmax_025 topk_softmax_05 sparsemax entmax15 headwise_adaptive_entmax; do
	c=$(grep -c "^pipelines/stage.sh train .* [a-z_0-9]*\.$m\.s[0-9]\.plain\.compact\.e30$" "$T/study-n.log")
	[ "$c" = 130 ] || { t_result 1 "method $m has 130 cells ($c)"; }
done
t_result 0 "every method has 13 tasks x 10 seeds"

# the study's cells carry the protocol's fields
c="$T/out/study/main/cells"
grep -q '"limit":60000' "$c/usps.topk_softmax_025.s3.plain.compact.e30/cell.json" &&
	grep -q '"limit":0' "$c/cifar10.softmax.s0.plain.compact.e30/cell.json" &&
	grep -q '"mask":"margin"' "$c/twenty_news.sparsemax.s9.plain.compact.e30/cell.json" &&
	! grep -q '"mask"' "$c/mnist.sparsemax.s9.plain.compact.e30/cell.json" &&
	grep -q '"batch":256,"lr":0.001,"weight_decay":0.0001,"clip":5' "$c/mnist.sparsemax.s9.plain.compact.e30/cell.json"
t_result $? "cells carry PROTOCOL A1/A4 fields (E5-B limit 60000, the text mask, batch 256, ...)"
grep -qx 'min_seeds=10' "$T/out/study/main/params/freeze"; t_result $? "the freeze needs 10 seeds per ratio"

# the other grids
[ "$($G count pipelines/grids/extension.grid | tr '\n' ' ')" = "trajectory 600 bottomk 50 lineardecay 210 total 860 " ]
t_result $? "extension: trajectory 600, bottom-k 50, linear decay 210 ($($G count pipelines/grids/extension.grid | tr '\n' ' '))"
[ "$($G count pipelines/grids/demo.grid | tail -n 1)" = "total 42" ]; t_result $? "demo: 2 tasks x 7 methods x 3 seeds"
printf 'set when task=mnist arch=plain tier=compact method=median_switch switch_epoch=7\n' >"$T/switching-epochs.inc"
sed 's/^include switching-epochs.inc$/include '"${T//\//\\/}"'\/switching-epochs.inc/' pipelines/grids/switching.grid >"$T/switching.grid"
[ "$($G count "$T/switching.grid" | tail -n 1)" = "total 2400" ]; t_result $? "switching: 2,400 runs"
$G list "$T/switching.grid" | grep -q '^switching mnist.median_switch.s5.plain.compact.e30 .*"switch_epoch":7}$'
t_result $? "switch epochs come from the included file"
$G count pipelines/grids/switching.grid >/dev/null 2>"$T/sw.err"
[ $? -eq 2 ] && grep -q 'switching.grid:[0-9]*: include: .*switching-epochs.inc: no such file' "$T/sw.err"
t_result $? "without it the switching grid stops, naming the include ($(cat "$T/sw.err"))"

# the format's errors name the file and line
bad() { # name expected-message grid-text
	printf '%s\n' "$3" >"$T/bad.grid"
	$G count "$T/bad.grid" >/dev/null 2>"$T/bad.err"
	local rc=$?
	[ $rc -eq 2 ] && grep -q "$2" "$T/bad.err"
	t_result $? "$1 ($(cat "$T/bad.err"))"
}
base=$'task a\nmethod m\nseed 0\narch plain\ntier compact\nepochs 1'
bad "an unknown directive" "bad.grid:3: unknown directive frobnicate" $'block b\n'"task a"$'\nfrobnicate x'
bad "a missing axis" "bad.grid:.*block b does not declare the axis epochs" $'block b\ntask a\nmethod m\nseed 0\narch plain\ntier compact'
bad "a set of an axis" "bad.grid:2: set cannot change the axis task" $'block b\nset task=x\n'"$base"
bad "a bad seed" "bad.grid:4: seed must be a non-negative integer: x" $'block b\ntask a\nmethod m\nseed x'
bad "a bad value" "bad.grid:2: task value must match" $'block b\ntask A-b'
bad "a duplicate block" "bad.grid:8: block b declared twice" $'block b\n'"$base"$'\nblock b'
bad "identical cells" "are identical" $'variant v method=m\nblock b\ntask a\nmethod m v\nseed 0\narch plain\ntier compact\nepochs 1'
bad "an empty range" "empty range 3..1" $'block b\ntask a\nmethod m\nseed 3..1'
bad "a seed given twice" "bad.grid:4: seed value 2 given twice" $'block b\ntask a\nmethod m\nseed 0..3 2\narch plain\ntier compact\nepochs 1'

# include, criterion, when, variants
mkdir -p "$T/g/inc"
printf 'set when seed=1 lr=2\n' >"$T/g/inc/more.inc"
printf 'set lr=1\nvariant v method=m2 switch_epoch=4\nblock b\n%s\nset when method=v lr=3\ncriterion guard: x >= 0.6\ninclude inc/more.inc\n' \
	"$(printf '%s' "$base" | sed 's/^method m$/method m v/; s/^seed 0$/seed 0..1/')" >"$T/g/ok.grid"
$G list "$T/g/ok.grid" >"$T/ok.list" 2>&1
grep -q '^b a.m.s1.plain.compact.e1 .*"lr":2}$' "$T/ok.list" && grep -q '^b a.v.s0.plain.compact.e1 {"task":"a","method":"m2",.*"lr":3,"switch_epoch":4}$' "$T/ok.list"
t_result $? "when, variants and include apply in order ($(tr '\n' ' ' <"$T/ok.list"))"
printf 'foo\n' >>"$T/g/inc/more.inc"
$G count "$T/g/ok.grid" >/dev/null 2>"$T/inc.err"
grep -q 'inc/more.inc:2: unknown directive foo' "$T/inc.err"; t_result $? "errors in an included file name that file"
sed -i '$d' "$T/g/inc/more.inc"

# parameter files: rewritten only when their content changes
$G expand "$T/g/ok.grid" "$T/x" 2>/dev/null
grep -qx 'guard: x >= 0.6' "$T/x/b/params/criteria"; t_result $? "criteria are written to the block's parameter files"
grep -q "cells.mk: .*inc/more.inc" "$T/x/.grid/cells.mk"; t_result $? "the expansion depends on included files"
sleep 1
find "$T/x" -name cell.json -printf '%p %T@\n' | sort >"$T/t1"
$G expand "$T/g/ok.grid" "$T/x" 2>/dev/null
find "$T/x" -name cell.json -printf '%p %T@\n' | sort >"$T/t2"
cmp -s "$T/t1" "$T/t2"; t_result $? "expanding again rewrites no parameter file"
printf 'set when seed=1 lr=5\n' >"$T/g/inc/more.inc"
$G expand "$T/g/ok.grid" "$T/x" 2>/dev/null
find "$T/x" -name cell.json -printf '%p %T@\n' | sort >"$T/t3"
[ "$(diff "$T/t2" "$T/t3" | grep -c '^>')" = 2 ]; t_result $? "a changed value rewrites exactly the cells it touches ($(diff "$T/t2" "$T/t3" | grep -c '^>'))"

# concurrent expansions (make -j) are serialised
rm -rf "$T/y"
$G expand "$T/g/ok.grid" "$T/y" 2>/dev/null & $G expand "$T/g/ok.grid" "$T/y" 2>/dev/null & wait
[ "$(find "$T/y" -name cell.json | wc -l)" = 4 ] && [ -s "$T/y/.grid/cells.mk" ] && ! ls "$T/y/.grid/"*.tmp >/dev/null 2>&1
t_result $? "two concurrent expansions leave one consistent tree"

# fmnist_check.grid (the CPU-sized check against Table 2's Fashion-MNIST row) and
# fmnist_row.grid and synthetic_row.grid (full rows) run study cells: the same cell.json files, byte for byte,
# so the same cell ids; the full rows also have the study's freeze, test and stats parameters
$G expand pipelines/grids/study.grid "$T/gs" 2>/dev/null
# expand GRID into DIR; n: its cells, same: those whose cell.json is the study's
study_cells() { # grid dir
	$G expand "$1" "$2" 2>/dev/null
	n=0 same=0
	for d in "$2"/main/cells/*/; do
		n=$((n + 1))
		cmp -s "$d/cell.json" "$T/gs/main/cells/$(basename "$d")/cell.json" && same=$((same + 1))
	done
}
study_cells pipelines/grids/fmnist_check.grid "$T/gf"
[ $n = 20 ] && [ $same = 20 ] && [ "$(ls "$T/gf/main/cells" | grep -c '^fashion_mnist\.\(softmax\|topk_softmax_025\)\.s[0-9]\.plain\.compact\.e30$')" = 20 ]
t_result $? "fmnist_check's cells are study cells: $same of $n identical cell.json (20 expected: softmax and top-k 0.25, seeds 0-9)"
study_cells pipelines/grids/fmnist_row.grid "$T/gr"
[ $n = 70 ] && [ $same = 70 ] && [ "$(ls "$T/gr/main/cells" | grep -c '^fashion_mnist\..*\.s[0-9]\.plain\.compact\.e30$')" = 70 ]
t_result $? "fmnist_row's cells are study cells: $same of $n identical cell.json (70 expected: 7 methods, seeds 0-9)"
diff -r -x cells "$T/gs/main/params" "$T/gr/main/params" >/dev/null && [ "$(ls "$T/gr/main/params" | grep -vcx cells)" = 4 ]
t_result $? "fmnist_row's criteria, freeze, test and stats parameter files are study's (the cell lists aside; $(ls "$T/gr/main/params" | tr '\n' ' '))"
study_cells pipelines/grids/synthetic_row.grid "$T/gy"
[ $n = 70 ] && [ $same = 70 ] && [ "$(ls "$T/gy/main/cells" | grep -c '^synthetic_marker\..*\.s[0-9]\.plain\.compact\.e30$')" = 70 ]
t_result $? "synthetic_row's cells are study cells: $same of $n identical cell.json (70 expected: 7 methods, seeds 0-9)"
diff -r -x cells "$T/gs/main/params" "$T/gy/main/params" >/dev/null && [ "$(ls "$T/gy/main/params" | grep -vcx cells)" = 4 ]
t_result $? "synthetic_row's criteria, freeze, test and stats parameter files are study's (the cell lists aside; $(ls "$T/gy/main/params" | tr '\n' ' '))"
# make help names every grid with its cells and the first sentence of its comment
help=$(make -C "$TOP" --no-print-directory help 2>&1)
ok=0 ng=0
for g in "$TOP"/pipelines/grids/*.grid; do
	ng=$((ng + 1))
	n=$(basename "$g" .grid)
	printf '%s\n' "$help" | grep -q "^  $n  *[0-9?][0-9+]* cells  ." && ok=$((ok + 1))
done
[ $ok = $ng ] && printf '%s\n' "$help" | grep -q '^  study  *910 cells  the Sparse Normalizer Benchmark main grid' &&
	printf '%s\n' "$help" | grep -q 'GRID-adopt FROM=DIR'
t_result $? "make help lists the $ng grids ($ok with a cell count and a description; study 910) and the targets"
# the cells are checked by sb-train --ids at expansion, before anything trains: a bad field,
# value or method is named once with its block and key (it used to fail every cell at run time)
if [ -x "$TOP/bin/sb-train" ]; then
	for bad in "set lrr=0.001|unknown cell field 'lrr'" "set limit=abc|field 'limit' must be an integer" \
		"set alpha=1.3|main/t_a.softmax" "method softmax sofmax|unknown normaliser method 'sofmax'"; do
		line=${bad%%|*} want=${bad#*|}
		{
			printf 'block main\ntask t_a\n'
			case $line in method*) echo "$line" ;; *) echo "method softmax" ;; esac
			printf 'seed 0\narch plain\ntier compact\nepochs 1\n'
			case $line in set*) echo "$line" ;; esac
		} >"$T/bad.grid"
		rm -rf "$T/badout"
		SB_GRID_CHECK="$TOP/bin/sb-train" "$TOP/scripts/grid" expand "$T/bad.grid" "$T/badout" >/dev/null 2>"$T/bad.err"
		rc=$?
		[ $rc -eq 2 ] && grep -q "^grid: $T/bad.grid: cell main/t_a\." "$T/bad.err" && grep -qF "$want" "$T/bad.err" &&
			[ ! -e "$T/badout/main/cells" ] || [ -z "$(ls "$T/badout/main/cells" 2>/dev/null)" ]
		t_result $? "grid '$line': refused at expansion naming the cell (exit $rc: $(head -c 200 "$T/bad.err"))"
	done
	# a stage option the program does not take (a prefix getopt would have accepted, a typo)
	for st in "freeze min_seed=1" "stats baselin=softmax"; do
		printf 'block main\ntask t_a\nmethod softmax\nseed 0\narch plain\ntier compact\nepochs 1\nstage %s\n' "$st" >"$T/bad.grid"
		rm -rf "$T/badout"
		SB_GRID_CHECK="$TOP/bin/sb-train" "$TOP/scripts/grid" expand "$T/bad.grid" "$T/badout" >/dev/null 2>"$T/bad.err"
		rc=$?
		[ $rc -eq 2 ] && grep -q "^grid: $T/bad.grid: block main: stage ${st%% *}: unknown option '${st#* }'" "$T/bad.err" 2>/dev/null ||
			grep -q "unknown option '$(printf '%s' "${st#* }" | cut -d= -f1)'" "$T/bad.err"
		t_result $? "grid 'stage $st': refused at expansion naming the option (exit $rc: $(head -c 200 "$T/bad.err"))"
	done
else
	echo "ok - # SKIP bin/sb-train not built: the expansion's cell check is not exercised"
fi
t_done
