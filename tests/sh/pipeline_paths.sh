#!/usr/bin/env bash
# Paths make cannot carry (whitespace, ':', '#', ..., or empty) in SB_OUT, SB_DATA, SB_BIN (LM_HF: when
# set): refused
# up front with one message naming the variable, before any stage runs or any file is
# written; the same directories reached through a symbolic link work.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"

mkdir -p "$T/a b"
for v in "SB_OUT=$T/a b/out" "SB_DATA=$T/a b/data" "SB_OUT=$T/a:b" "SB_OUT=$T/a#b" "SB_BIN=$T/a b" "LM_HF=$T/a b"; do
	reset_calls
	rm -rf "$T/out" "$T/data"
	pmake "$v" pt >"$T/bad.log" 2>&1
	rc=$?
	name=${v%%=*}
	[ $rc -ne 0 ] && grep -q "\*\*\* $name='${v#*=}': make cannot work with this path" "$T/bad.log" &&
		[ "$(grep -c . "$T/bad.log")" = 1 ]
	t_result $? "make pt with $v: refused up front with one message naming $name (exit $rc)" "$(head -n 3 "$T/bad.log" | tr '\n' ' ')"
	[ ! -s "$STUB_LOG" ] && [ ! -e "$T/out" ] && [ ! -e "$T/data" ] && [ -z "$(ls -A "$T/a b")" ]
	t_result $? "make pt with $v: no stage ran and nothing was written" "$(ls -A "$T/a b" "$T" | tr '\n' ' ')"
done

# an empty SB_OUT (before: the grid ran into /pt); checked with a goal that writes nothing
pmake SB_OUT= out-verify >"$T/empty.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "\*\*\* SB_OUT='': make cannot work with this path" "$T/empty.log"
t_result $? "an empty SB_OUT is refused up front, naming it (exit $rc)" "$(head -n 3 "$T/empty.log" | tr '\n' ' ')"

# the same directories through a link without the space
ln -s "$T/a b" "$T/ab"
reset_calls
pmake SB_OUT="$T/ab/out" SB_DATA="$T/ab/data" pt >"$T/link.log" 2>&1
t_result $? "make pt with SB_OUT and SB_DATA under a symbolic link to a directory with a space" "$(tail -n 3 "$T/link.log" | tr '\n' ' ')"
[ -f "$T/a b/out/pt/report.md" ] && [ "$(ncalls sb-train)" = 16 ]; t_result $? "the report is made there, 16 cells trained ($(ncalls sb-train))"
reset_calls
pmake SB_OUT="$T/ab/out" SB_DATA="$T/ab/data" pt >"$T/link2.log" 2>&1
t_result $? "a second make pt through the link succeeds"
[ ! -s "$STUB_LOG" ]; t_result $? "and runs no stage program"
# SB_CACHE is only ever passed quoted to sb-fetch: a space in it is fine
rm -rf "$T/data"
pmake SB_CACHE="$T/a b/cache" pt-data >"$T/cache.log" 2>&1
t_result $? "SB_CACHE with a space is accepted: make pt-data fetches" "$(tail -n 3 "$T/cache.log" | tr '\n' ' ')"
[ -d "$T/a b/cache" ] && [ -f "$T/data/t_a/pool.safetensors" ]; t_result $? "with the cache there"
# SB_OUT moves every pipeline's outputs, the LM track's and N3-A's too (they stayed in ./out)
for t in lm lm-pretrained n3a sas; do
	v=$(make -s -C "$TOP" -n -o bin/sb-train -o bin/sb-eval -o bin/sb-lm -o bin/sb-a8 -o bin/sb-stats "$t" SB_OUT="$T/moved" LM_HF="$T/nohf" 2>&1 | grep -c "$T/moved/$t")
	[ "$v" -gt 0 ]; t_result $? "make -n $t SB_OUT=DIR writes under DIR/$t ($v mentions)"
done
t_done
