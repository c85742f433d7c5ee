#!/usr/bin/env bash
# The command-line contract of every program (DESIGN.md §8): --help to stdout and
# exit 0, --version, a bad option exits 2 with a one-line hint on stderr, and a
# write error on stdout (/dev/full) exits 4 with a message.
. "$(dirname "$0")/../shlib.sh"
shopt -s nullglob
progs=("$TOP"/bin/sb-*)
[ ${#progs[@]} -gt 0 ]; t_result $? "programs are built (${#progs[@]} in bin/)"
for p in "${progs[@]}"; do
	n=$(basename "$p")
	out=$("$p" --help 2>"$T/err"); rc=$?
	[ $rc -eq 0 ] && [ -n "$out" ] && [ ! -s "$T/err" ] && grep -q "Usage: $n" <<<"$out"
	t_result $? "$n --help: usage on stdout, exit 0 (exit $rc)"
	out=$("$p" --version 2>&1); rc=$?
	[ $rc -eq 0 ] && [[ $out == "$n "* ]]; t_result $? "$n --version prints '$n VERSION' ($out)"
	"$p" --no-such-option >"$T/out" 2>"$T/err"; rc=$?
	[ $rc -eq 2 ] && grep -q "Try '$n --help'" "$T/err" && [ ! -s "$T/out" ] && [ "$(wc -l <"$T/err")" -eq 2 ] &&
		grep -q "^$n: .*--no-such-option" "$T/err"
	t_result $? "$n --no-such-option: exit 2, one line naming the option and the hint (exit $rc: $(head -c 300 "$T/err"))"
	"$p" --help >/dev/full 2>"$T/err"; rc=$?
	[ $rc -eq 4 ] && grep -qi "write error" "$T/err"
	t_result $? "$n --help >/dev/full: exit 4 with a message (exit $rc: $(head -c 200 "$T/err"))"
done
# options of sb-lm's subcommands, and a missing value, the same way
for args in "sb-lm train --no-such-option" "sb-lm eval --no-such-option" "sb-lm train -o" "sb-train -j"; do
	$TOP/bin/$args >"$T/out" 2>"$T/err"; rc=$?
	[ $rc -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 2 ] && grep -q "Try '${args%% *} --help'" "$T/err"
	t_result $? "$args: exit 2, one line and the hint (exit $rc: $(head -c 300 "$T/err"))"
done
# sb-lm's common options are every command's, as its --help says (before, probe and tokenize
# refused -j and -q, report -j, and no command took --version)
lm=$TOP/bin/sb-lm
if [ -x "$lm" ]; then
	"$lm" --help >"$T/h"
	cmds=$(sed -n '/^Commands:/,/^$/s/^  \([a-z]\{1,\}\) .*/\1/p' "$T/h" | tr '\n' ' ')
	grep -q '^Common options (every command' "$T/h" && [ "$cmds" = "train eval report probe import tokenize " ]
	t_result $? "sb-lm --help: the commands ($cmds) and the options common to every command"
	for c in $cmds; do
		out=$("$lm" $c -q -j 1 --threads 2 --quiet --help 2>"$T/err"); rc=$?
		[ $rc -eq 0 ] && [ -n "$out" ] && [ ! -s "$T/err" ]
		t_result $? "sb-lm $c takes -q, -j N, --threads N, --quiet and --help (exit $rc: $(head -c 200 "$T/err"))"
		out=$("$lm" $c --version 2>&1); rc=$?
		[ $rc -eq 0 ] && [[ $out == "sb-lm "* ]]
		t_result $? "sb-lm $c --version prints 'sb-lm VERSION' (exit $rc: $out)"
		"$lm" $c -j x >"$T/out" 2>"$T/err"; rc=$?
		[ $rc -eq 2 ] && grep -q "^sb-lm: invalid value for --threads: 'x'" "$T/err" && [ ! -s "$T/out" ]
		t_result $? "sb-lm $c -j x: a usage error naming --threads (exit $rc: $(head -c 200 "$T/err"))"
	done
	# the short options a command takes are in its help; exit 1 where a split=test file is refused
	"$lm" tokenize --help >"$T/th"
	grep -q -- '-t|--tokenizer' "$T/th" && grep -q -- '-d|--decode' "$T/th" && grep -q -- '-d, --decode' "$T/th" &&
		grep -q -- '-t|--tokenizer TOKENIZER.json \[--bos\] \[-d|--decode\]' "$T/h"
	t_result $? "sb-lm tokenize's -t and -d are in its help and sb-lm --help"
	"$lm" import --help | grep -q -- '-c, --corpus NAME=PATH' && grep -q -- 'import \[-o RUNS_DIR\] -c|--corpus' "$T/h"
	t_result $? "sb-lm import's -c is in its help and sb-lm --help"
	grep -q '^Exit status: 0 ok; 1 refused: a corpus or text' "$T/h" && grep -q 'Exit status: 0 ok, 1 refused (FILE' "$T/th" &&
		"$lm" eval --help | grep -q 'Exit status: 0 ok, 1 refused'
	t_result $? "sb-lm --help, tokenize --help and eval --help list exit 1 (a split=test file refused)"
fi
# the programs that never open a compute backend (Makefile HOST_STAGES) do not load the CUDA
# backend or cuBLAS: they run where the CUDA libraries are not installed
if command -v readelf >/dev/null; then
	for n in sb-fetch sb-freeze sb-stats sb-a8; do
		[ -x "$TOP/bin/$n" ] || continue
		needed=$(readelf -d "$TOP/bin/$n" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')
		! grep -q 'cublas\|cudart' <<<"$needed" && ! nm "$TOP/bin/$n" | grep -q ' sb_backend_cuda_open$'
		t_result $? "$n: linked without the CUDA backend and cuBLAS (needs: $needed)"
	done
fi
t_done
