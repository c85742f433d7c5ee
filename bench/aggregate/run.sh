#!/usr/bin/env bash
# bench/aggregate/run.sh — time the aggregate stage (sb-freeze, sb-stats, sb-a8) on synthetic
# validation logs (bench/aggregate/gen.py) at several sizes, to find super-linear behaviour.
#
#   bench/aggregate/run.sh [-r REPEATS] [-s "SCALES"] [-x] [-p "SCALES"] [-k] [-o TSV]
#
#   -r N        runs of each command (default 3); the table shows the smallest wall and CPU
#               time and the largest peak RSS of the N (the machine may be busy: CPU time,
#               user + system, is the steadier number)
#   -s SCALES   scales of the cell count (default "0.25 0.5 1 2"; 1 = the study's 910 cells)
#   -x          also the other axes at the study's 13 tasks: 20 and 40 seeds, 60 epochs
#   -p SCALES   also sb-stats on probe.result records (gen.py --grid probes; 1 = 40 probes per
#               task and method, 3120 records), e.g. -p "12.5 25 50 100"
#   -k          keep the working directory (printed): the last size's generated data and
#               outputs; else it is removed
#   -o TSV      also write the table as tab-separated values
#
# Sizes (gen.py --scale): study and trajectory grids scale their task axis (13 and 10 tasks
# at 1; copies TASK_r2... beyond), bottomk and lineardecay their seeds (10 at 1).
# The commands are the pipeline's (pipelines/stage.sh, pipelines/grids/{study,extension}.grid):
#   freeze       sb-freeze -q --rule topk_mean_val_acc --min-seeds 10 --patience 5 -o SEL LOGS
#   stats        sb-stats -q --baseline softmax --patience 5 --min-seeds 10 --rule -o S -p S
#                        LOGS test/test.ndjson pipelines/published/study.ndjson
#                (exit 2 or 3 of --rule are results, as the pipeline takes them, when sb-stats
#                says so on stderr: an exit 3 for malformed input is a failure)
#   m1           sb-a8 -q m1 --md MD --switch-epochs INC LOGS      (the study's logs)
#   m1-traj      the same on the trajectory grid (600 cells at 1)
#   bottomk      sb-a8 -q bottomk --md MD LOGS                       (bottomk grid, 50 at 1)
#   lineardecay  sb-a8 -q lineardecay --md MD LOGS                   (lineardecay grid, 210 at 1)
# Every command runs under nice. SB_BIN (default bin/) names the programs.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${SB_BIN:-$TOP/bin}
GEN=$TOP/bench/aggregate/gen.py
PUB=$TOP/pipelines/published/study.ndjson
REPEATS=3 SCALES="0.25 0.5 1 2" EXTRA=0 KEEP=0 TSV="" PSCALES=""
while getopts "r:s:xp:ko:" o; do
	case $o in
	r) REPEATS=$OPTARG ;; s) SCALES=$OPTARG ;; x) EXTRA=1 ;; p) PSCALES=$OPTARG ;; k) KEEP=1 ;; o) TSV=$OPTARG ;;
	*) sed -n '2,16p' "$0" >&2; exit 2 ;;
	esac
done
for p in sb-freeze sb-stats sb-a8; do
	[ -x "$BIN/$p" ] || { echo "run.sh: $BIN/$p is missing (make -j2)" >&2; exit 2; }
done
W=$(mktemp -d "${TMPDIR:-/tmp}/sb-aggbench.XXXXXX")
[ $KEEP = 1 ] && echo "run.sh: data in $W" >&2 || trap 'rm -rf "$W"' EXIT
ROWS=$W/rows.tsv
: >"$ROWS"

# timeit NAME SIZE CELLS INPUT_MB OKCODES CMD... : REPEATS runs; a row: min wall, min cpu, max RSS
timeit() {
	local name=$1 size=$2 cells=$3 mb=$4 ok=$5 i rc wall=999999 cpu=999999 rss=0 w u s m
	shift 5
	for ((i = 0; i < REPEATS; i++)); do
		rm -rf "$W/o" && mkdir -p "$W/o"
		rc=0
		/usr/bin/time -f '%e %U %S %M' -o "$W/time" nice "$@" >"$W/o/stdout" 2>"$W/o/stderr" || rc=$?
		# a non-zero code allowed is --rule's result (sb-stats says which), not a refusal of
		# the input (exit 3 is also malformed input)
		if ! [[ " $ok " == *" $rc "* ]] ||
			{ [ "$rc" -ne 0 ] && ! grep -qE 'power condition not met|rule (succeeded|failed):' "$W/o/stderr"; }; then
			echo "run.sh: $name at $size: exit $rc:" >&2
			tail -n 5 "$W/o/stderr" >&2
			echo -e "$name\t$size\t$cells\t$mb\tFAILED(exit $rc)\t-\t-" >>"$ROWS"
			return 0
		fi
		read -r w u s m < <(tail -n 1 "$W/time")
		wall=$(awk -v a="$wall" -v b="$w" 'BEGIN{print (b<a)?b:a}')
		cpu=$(awk -v a="$cpu" -v b="$u" -v c="$s" 'BEGIN{x=b+c; print (x<a)?x:a}')
		rss=$((m > rss ? m : rss))
	done
	echo -e "$name\t$size\t$cells\t$mb\t$wall\t$cpu\t$((rss / 1024))" >>"$ROWS"
	echo "  $name $size: wall ${wall}s cpu ${cpu}s rss $((rss / 1024))MB" >&2
}

# a size's data, removed once timed (with -k kept: each size overwrites the previous one's)
drop() { [ $KEEP = 1 ] || rm -rf "$@"; }

# gen GRID DIR ARGS... -> prints "CELLS MB"
gen() {
	local grid=$1 d=$2
	shift 2
	rm -rf "$d"
	nice python3 "$GEN" --grid "$grid" "$@" "$d" 2>/dev/null
	echo "$(wc -l <"$d/vals.txt") $(du -sm --apparent-size "$d" | cut -f1)"
}

bench_size() { # LABEL SCALE [gen args for the study grid]
	local label=$1 sc=$2 n mb logs
	shift 2
	echo "size $label ..." >&2
	local D=$W/study
	read -r n mb < <(gen study "$D" --scale "$sc" "$@")
	mapfile -t logs <"$D/vals.txt"
	timeit freeze "$label" "$n" "$mb" 0 "$BIN/sb-freeze" -q --rule topk_mean_val_acc --min-seeds 10 --patience 5 \
		-o "$W/o/selection.json" "${logs[@]}"
	timeit stats "$label" "$n" "$mb" "0 2 3" "$BIN/sb-stats" -q --baseline softmax --patience 5 --min-seeds 10 --rule \
		-o "$W/o/stats" -p "$W/o/stats" "${logs[@]}" "$D/test/test.ndjson" "$PUB"
	timeit m1 "$label" "$n" "$mb" 0 "$BIN/sb-a8" -q m1 --md "$W/o/a8.md" --switch-epochs "$W/o/sw.inc" "${logs[@]}"
	[ $# -eq 0 ] || { drop "$D"; return 0; } # the other axes: the study grid only
	D=$W/traj
	read -r n mb < <(gen trajectory "$D" --scale "$sc")
	mapfile -t logs <"$D/vals.txt"
	timeit m1-traj "$label" "$n" "$mb" 0 "$BIN/sb-a8" -q m1 --md "$W/o/a8.md" --switch-epochs "$W/o/sw.inc" "${logs[@]}"
	local g
	for g in bottomk lineardecay; do
		D=$W/$g
		read -r n mb < <(gen $g "$D" --scale "$sc")
		mapfile -t logs <"$D/vals.txt"
		timeit $g "$label" "$n" "$mb" 0 "$BIN/sb-a8" -q $g --md "$W/o/a8.md" "${logs[@]}"
	done
	drop "$W/study" "$W/traj" "$W/bottomk" "$W/lineardecay"
}

for sc in $SCALES; do bench_size "x$sc" "$sc"; done
if [ $EXTRA = 1 ]; then
	bench_size "seeds20" 1 --seeds 20
	bench_size "seeds40" 1 --seeds 40
	bench_size "epochs60" 1 --epochs 60
fi
for sc in $PSCALES; do
	echo "probes x$sc ..." >&2
	read -r n mb < <(gen probes "$W/probes" --scale "$sc")
	n=$(wc -l <"$W/probes/probes.ndjson")
	timeit stats-probes "x$sc" "$n" "$mb" 0 "$BIN/sb-stats" -q --baseline dense -o "$W/o/stats" "$W/probes/probes.ndjson"
	drop "$W/probes"
done

# the table; "growth" = CPU time ratio / cell-count ratio against the program's previous row
# of the same axis (1 = linear; 2 = quadratic when the cells double); "cells" counts records
# for stats-probes
{
	printf '| program | size | cells | input MB | wall s | CPU s | peak RSS MB | growth |\n'
	printf '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n'
	sort -s -t$'\t' -k1,1 "$ROWS" | awk -F'\t' '
		{ axis = ($2 ~ /^x/) ? "x" : $2
		  g = "";
		  if ($1 == prev && axis == "x" && paxis == "x" && pcpu > 0 && $6 ~ /^[0-9.]+$/)
		      g = sprintf("%.2f", ($6 / pcpu) / ($3 / pcells));
		  printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, g;
		  prev = $1; paxis = axis; pcpu = $6; pcells = $3 }'
} | tee "$W/table.md"
[ -z "$TSV" ] || cp "$ROWS" "$TSV"
