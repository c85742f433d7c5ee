#!/usr/bin/env bash
# run-t.sh — run one CLI test data file.
#
# A .t file is a list of cases. Each case starts with a line "%%% name" and may hold:
#   $ COMMAND        a shell line (several $ lines form one script, run with bash -eu -o pipefail)
#   ? N              the expected exit status (default 0)
#   > TEXT           an expected stdout line; if any are given, stdout must equal them exactly
#   ~ TEXT           stdout must contain TEXT (fixed string)
#   ! TEXT           stderr must contain TEXT (fixed string)
#   !! empty         stderr must be empty
#   # ...            a comment
# The command runs in a fresh temporary directory ($T) with bin/ first on PATH;
# $TOP is the repository, $DATA the shared fixtures (tests/data).
set -u
export LC_ALL=C
top=$(cd "$(dirname "$0")/../.." && pwd)
file=$1
export TOP=$top DATA=$top/tests/data PATH="$top/bin:$PATH"
n=0 fail=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run_case() {
	[ -n "$name" ] || return 0
	n=$((n + 1))
	local T="$work/c$n"
	mkdir -p "$T"
	printf '%s\n' "${script[@]}" >"$T/.script"
	(cd "$T" && T="$T" bash -eu -o pipefail "$T/.script" >"$T/.out" 2>"$T/.err")
	local rc=$? ok=1 why=""
	if [ "$rc" != "$want_rc" ]; then ok=0; why="exit $rc, want $want_rc"; fi
	if [ $have_out -eq 1 ] && ! diff -u <(printf '%s' "$want_out") "$T/.out" >"$T/.diff" 2>&1; then
		ok=0; why="$why; stdout differs"
	fi
	local s
	for s in "${want_sub[@]}"; do grep -qF -- "$s" "$T/.out" || { ok=0; why="$why; stdout lacks '$s'"; }; done
	for s in "${want_err[@]}"; do grep -qF -- "$s" "$T/.err" || { ok=0; why="$why; stderr lacks '$s'"; }; done
	if [ $want_empty_err -eq 1 ] && [ -s "$T/.err" ]; then ok=0; why="$why; stderr not empty"; fi
	if [ $ok -eq 1 ]; then
		echo "ok $n - $name"
	else
		fail=$((fail + 1))
		echo "not ok $n - $name: ${why#; }"
		sed 's/^/#   cmd: /' "$T/.script"
		head -c 2000 "$T/.out" | sed 's/^/#   out: /'
		head -c 2000 "$T/.err" | sed 's/^/#   err: /'
		[ -s "$T/.diff" ] && head -n 40 "$T/.diff" | sed 's/^/#   /'
	fi
}

name="" script=() want_rc=0 want_out="" have_out=0 want_sub=() want_err=() want_empty_err=0
while IFS= read -r line || [ -n "$line" ]; do
	case "$line" in
	'%%% '*)
		run_case
		name=${line#%%% } script=() want_rc=0 want_out="" have_out=0 want_sub=() want_err=() want_empty_err=0 ;;
	'$ '*) script+=("${line#\$ }") ;;
	'? '*) want_rc=${line#? } ;;
	'> '*) want_out+="${line#> }"$'\n'; have_out=1 ;;
	'>') want_out+=$'\n'; have_out=1 ;;
	'~ '*) want_sub+=("${line#\~ }") ;;
	'!! empty') want_empty_err=1 ;;
	'! '*) want_err+=("${line#! }") ;;
	'#'* | '') ;;
	*) echo "not ok - $file: cannot parse line: $line"; fail=$((fail + 1)); n=$((n + 1)) ;;
	esac
done <"$file"
run_case
echo "$((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]
