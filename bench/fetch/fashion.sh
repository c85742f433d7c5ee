#!/usr/bin/env bash
# bench/fetch/fashion.sh [RUNS] — time sb-fetch on the real Fashion-MNIST (Debian's
# dataset-fashion-mnist as the mirror) on one core, and record it in
# bench/fetch/RESULTS.md. The target: fetch + verify + decode + write under 5 s.
#
# Each run starts from an empty data directory (the mirror is read, not copied):
# it hashes the four .gz files, decompresses them and checks the decompressed
# SHA-256s (Debian re-gzipped them), decodes the IDX files, writes both
# safetensors files and their sidecars (fsync) and reads them back with
# sb_dataset_read. Also timed: the no-op re-run, which re-verifies sources and
# outputs. Pinned to CPU 0 with taskset; wall time from bash's EPOCHREALTIME.
set -eu -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-5}
mirror=/usr/share/datasets/fashion-mnist
[ -f $mirror/train-images-idx3-ubyte.gz ] || { echo "needs Debian's dataset-fashion-mnist" >&2; exit 1; }
make -C "$top" --no-print-directory bin/sb-fetch >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pin=(taskset -c 0)
command -v taskset >/dev/null || pin=()
t() { local a=$EPOCHREALTIME; "$@" >/dev/null; local b=$EPOCHREALTIME; echo "$a $b" | awk '{printf "%.3f\n", $2 - $1}'; }
fresh=() again=()
for i in $(seq "$runs"); do
	rm -rf "$tmp/data"
	fresh+=("$(t "${pin[@]}" "$top/bin/sb-fetch" -q -m $mirror -c "$tmp/cache" -o "$tmp/data" fashion_mnist)")
	again+=("$(t "${pin[@]}" "$top/bin/sb-fetch" -q -m $mirror -c "$tmp/cache" -o "$tmp/data" fashion_mnist)")
done
stats() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "min %.3f s, median %.3f s, max %.3f s", a[1], a[int((NR+1)/2)], a[NR]}'; }
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
rev=$(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)
line="| $(date -u +%Y-%m-%d) | $rev | $cpu | $runs | $(stats "${fresh[@]}") | $(stats "${again[@]}") |"
echo "fresh fetch+decode: $(stats "${fresh[@]}")"
echo "no-op re-run:       $(stats "${again[@]}")"
res=$top/bench/fetch/RESULTS.md
if [ ! -f "$res" ]; then
	cat >"$res" <<'MD'
# sb-fetch benchmark: real Fashion-MNIST on one core

`bench/fetch/fashion.sh` runs `sb-fetch -m /usr/share/datasets/fashion-mnist fashion_mnist`
pinned to one CPU (taskset -c 0), from an empty data directory each time: hash the four
Debian .gz files, decompress them, check the decompressed SHA-256s of DATASETS.md, decode
the IDX files, write pool.safetensors and test.safetensors with their sidecars (fsync), and
read both back with `sb_dataset_read`. "no-op" is the re-run right after, which re-verifies
the sources and the outputs and writes nothing. Target: under 5 s for the fresh run.

| date | commit | CPU | runs | fresh fetch + decode (wall) | no-op re-run (wall) |
| --- | --- | --- | --- | --- | --- |
MD
fi
echo "$line" >>"$res"
echo "recorded in $res"
