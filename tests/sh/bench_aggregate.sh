#!/usr/bin/env bash
# bench_aggregate.sh — bench/aggregate/run.sh at a quarter of the study's size (~5 s): the
# generated logs, test records and probes are accepted by every aggregate program (the
# benchmark's numbers are not checked: these machines are shared; bench/aggregate/RESULTS.md).
. "$(dirname "$0")/../shlib.sh"
command -v python3 >/dev/null || { t_result 1 "python3 (scripts/deps.sh) for the generator"; t_done; }
SB_BIN="$TOP/bin" bash "$TOP/bench/aggregate/run.sh" -r 1 -s 0.25 -p 1 -o "$T/rows.tsv" >"$T/table.md" 2>"$T/err"
t_result $? "run.sh exits 0 ($(tail -n 2 "$T/err" | tr '\n' ' '))"
for p in freeze stats m1 m1-traj bottomk lineardecay stats-probes; do
	row=$(awk -F'\t' -v p="$p" '$1 == p' "$T/rows.tsv")
	[ -n "$row" ] && ! grep -q FAILED <<<"$row"
	t_result $? "$p ran on the generated input ($row)"
done
# exit 3 is --rule's failed rule only when sb-stats says so: an sb-stats that refuses the
# input (exit 3, FILE:LINE) fails its row
mkdir -p "$T/bin"
ln -s "$TOP/bin/sb-freeze" "$TOP/bin/sb-a8" "$T/bin/"
cat >"$T/bin/sb-stats" <<'EOF'
#!/bin/sh
echo "sb-stats: x.ndjson:1: field 'seed' must be an integer" >&2
exit 3
EOF
chmod +x "$T/bin/sb-stats"
SB_BIN="$T/bin" bash "$TOP/bench/aggregate/run.sh" -r 1 -s 0.25 -o "$T/rows3.tsv" >/dev/null 2>"$T/err3"
row=$(awk -F'\t' '$1 == "stats"' "$T/rows3.tsv")
grep -q 'FAILED(exit 3)' <<<"$row"
t_result $? "an sb-stats exit 3 for malformed input is a failed row, not a rule's result ($row)"
t_done
