#!/usr/bin/env bash
# scripts/manifest.sh — MANIFEST.csv: path,size_bytes,sha256 of every tracked file except itself.
#   scripts/manifest.sh write   regenerate MANIFEST.csv (atomically)
#   scripts/manifest.sh check   exit 1 (listing the differences) when MANIFEST.csv is stale
set -eu -o pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
gen() {
	echo "path,size_bytes,sha256"
	git ls-files -z | sort -z | while IFS= read -r -d '' f; do
		[ "$f" = MANIFEST.csv ] && continue
		[ -f "$f" ] || continue
		case "$f" in *,* | *'"'*) echo "manifest: unsupported file name: $f" >&2; exit 1 ;; esac
		printf '%s,%s,%s\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
	done
}
case "${1:-check}" in
write)
	gen >MANIFEST.csv.tmp && mv MANIFEST.csv.tmp MANIFEST.csv
	echo "MANIFEST.csv: $(($(wc -l <MANIFEST.csv) - 1)) files" >&2 ;;
check)
	if ! [ -f MANIFEST.csv ]; then echo "MANIFEST.csv missing: run 'make manifest'" >&2; exit 1; fi
	if ! diff <(gen) MANIFEST.csv >/tmp/manifest.diff.$$ 2>&1; then
		echo "MANIFEST.csv is stale (run 'make manifest' and commit it):" >&2
		head -n 20 /tmp/manifest.diff.$$ >&2
		rm -f /tmp/manifest.diff.$$
		exit 1
	fi
	rm -f /tmp/manifest.diff.$$
	echo "MANIFEST.csv matches $(($(wc -l <MANIFEST.csv) - 1)) tracked files" ;;
*) echo "usage: scripts/manifest.sh write|check" >&2; exit 2 ;;
esac
