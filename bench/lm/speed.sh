#!/usr/bin/env bash
# bench/lm/speed.sh — training speed of the LM demo cell at one size and context:
# wall-clock and process CPU time (user + system) per step.
#
#   bench/lm/speed.sh D T WARM_STEPS STEPS [PATTERN]
#
# Trains the demo cell (pipelines/lm-track.mk: its corpora and mixture) with d = D,
# context T, the first WARM_STEPS steps at T = 64, STEPS steps in all, 2 threads, in a
# temporary directory, and prints one line: steps, wall s, CPU s, CPU s/step, wall s/step
# (the whole process, startup included, as /usr/bin/time measures it).
set -eu -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
D=$1 T=$2 WS=$3 S=$4 P=${5:-ACLACL}
shake=${LM_SHAKESPEARE:-/work/shared/data/tinyshakespeare/input.txt}
jargon=${LM_JARGON:-/usr/share/doc/jargon-text/jargon.txt.gz}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%s\n' '{"family":"lm","seed":0,"model":{"d":'"$D"',"pattern":"'"$P"'","heads":4,"lin_heads":4,"ffn":'$((4 * D))',"pos":"rope","conv_gate":0},"T":'"$T"',"batch":16,"steps":'"$S"',"warmup":100,"lr":0.003,"lr_min":0.0003,"warm_T":64,"warm_steps":'"$WS"',"log_every":5,"corpora":["tinyshakespeare='"$shake"'","jargon='"$jargon"'"],"mixture":"tinyshakespeare=0.2,jargon=0.1,kv_recall=0.4,qa_recall=0.1,retrieval=0.2","haystack":"tinyshakespeare"}' >"$out/cell.ndjson"
/usr/bin/time -o "$out/time" -f '%e %U %S' "$top/bin/sb-train" -q -j 2 -o "$out/runs" "$out/cell.ndjson" >/dev/null
read -r wall user sys <"$out/time"
awk -v n="$S" -v w="$wall" -v u="$user" -v s="$sys" -v d="$D" -v t="$T" -v ws="$WS" 'BEGIN {
	printf "d=%s T=%s warm_steps=%s steps=%d wall_s=%.2f cpu_s=%.2f cpu_s_per_step=%.3f wall_s_per_step=%.3f\n",
	       d, t, ws, n, w, u + s, (u + s) / n, w / n }'
