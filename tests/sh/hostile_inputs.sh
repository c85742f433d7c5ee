#!/usr/bin/env bash
# hostile_inputs.sh — bad input never crashes, hangs or corrupts (DESIGN.md §8).
#
# A sweep of hostile inputs over sb-fetch (registry, mirror files, the idx decoder),
# sb-train (cells on stdin and in files, flags, a dataset file, a checkpoint to resume
# from), sb-eval (run directories: cell.json, train.ndjson, checkpoints), sb-stats
# (records), sb-attn (rows, options), sb-lm, sb-a8 (every analysis' records,
# --trajectory, --m2; --md and --switch-epochs watched), sb-freeze (validation logs,
# --switch-map, -o) and sb-test (the selection, valid JSON of the wrong structure
# included, its ledger, RUNS_DIR, -d, -o), and through them lib's readers (JSON,
# safetensors, dataset, records): empty files, truncations at many offsets, a FIFO
# without a writer (a short limit: it must not block), /dev/zero, a
# directory where a file is expected, a missing file, binary garbage, a 10 MB line, a
# line over the 64 MiB limit, deep nesting, wrong JSON types, numbers out of range,
# duplicate keys, invalid UTF-8 (overlong forms, escaped lone surrogates), escaped NULs,
# safetensors headers claiming sizes beyond the file, a checkpoint of another shape,
# a dataset whose sidecar does not match.
#
# Each case passes when: no signal, no timeout, no sanitizer report; the exit status is
# in the case's documented set; stderr is exactly ONE line (zero for the few cases where
# the documented behaviour is to carry on) that names the file (and the line or offset
# where the case says so); and nothing new is left in the output location except what
# the case allows. Every case prints what it compared.
#
# Normal build (make check): bin/ and build/tests/. Sanitizer build:
#   make SAN=1 && SB_BIN=build/san/bin SB_TESTBIN=build/san/tests bash tests/sh/hostile_inputs.sh
# (tests/san.sh does both). SB_TIMEOUT (default 20 s) is the per-case limit.
#
# The cases come in two parts of about the same time, each with its own fixtures and
# directory: a (sb-attn, sb-stats, sb-train, sb-eval, sb-lm, sb-fetch) and b (sb-a8,
# sb-freeze, sb-test). SB_HOSTILE_PART=a or b runs one; without it the script runs both, at
# once when there are two cores or more (SB_HOSTILE_JOBS, default the cores; 1: one after the
# other in this process), part a's lines first, and its count is theirs together.
if [ -z "${SB_HOSTILE_PART:-}" ] && [ "${SB_HOSTILE_JOBS:-$(nproc)}" -gt 1 ]; then
	set -u
	d=$(mktemp -d /tmp/sbhostile.XXXXXX)
	trap 'rm -rf "$d"' EXIT
	for p in a b; do
		SB_HOSTILE_PART=$p bash "$0" >"$d/$p.out" 2>&1 &
	done
	wait
	passed=0 failed=0
	for p in a b; do
		sed "s/^\(not \)\{0,1\}ok \([0-9]*\) /\1ok $p\2 /" "$d/$p.out" | grep -Ev '^[0-9]+ passed, [0-9]+ failed$'
		line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$d/$p.out" | tail -n 1)
		if [ -z "$line" ]; then # a part that ended without its count fails
			echo "not ok - part $p ended without its 'N passed, N failed' line"
			failed=$((failed + 1))
			continue
		fi
		passed=$((passed + ${line%% passed*}))
		line=${line#*, }
		failed=$((failed + ${line%% failed}))
	done
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit $?
fi
. "$(dirname "$0")/../shlib.sh"
part() { [ -z "${SB_HOSTILE_PART:-}" ] || [ "$SB_HOSTILE_PART" = "$1" ]; }
BIN=${SB_BIN:-$TOP/bin}
TB=${SB_TESTBIN:-$TOP/build/tests}
case $BIN in /*) ;; *) BIN=$TOP/$BIN ;; esac
case $TB in /*) ;; *) TB=$TOP/$TB ;; esac
TO=${SB_TIMEOUT:-20}
export PATH="$BIN:$PATH"
# A sanitizer report (LeakSanitizer's included) must fail the case: exit 99 and text on
# stderr. (Memory still held by main() when a program exits with an error is reachable,
# not a leak.)
export ASAN_OPTIONS=${ASAN_OPTIONS:-exitcode=99:detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-exitcode=99:print_stacktrace=1:halt_on_error=1}
unset SB_MIRROR SB_CACHE SB_DATA http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy
W=$T/w
mkdir -p "$W"
t0=$SECONDS
declare -A per_prog=() per_ms=()

# ---------------------------------------------------------------- the case runner
# hc NAME CODES NEEDLE WATCH CMD...
#   CODES   allowed exit statuses, e.g. "3" or "3 4"
#   NEEDLE  fixed text stderr must contain (the file, with its line or offset), "" = none
#   WATCH   the output location: nothing may appear there ("" = none watched)
# Options through variables, reset after each case:
#   IN=FILE      stdin (default /dev/null)
#   NLW=N      stderr lines wanted (default 1; 0 for a documented carry-on;
#                "auto": 0 when the exit status is 0, else 1)
#   ALLOW=REGEX  new paths under WATCH that the docs allow (egrep on the path)
#   POS=TEXT     stderr must also contain this (fixed text), e.g. "FILE:LINE"
#   SAME=FILE    a file that must be left byte for byte as it was (a ledger, an output)
IN=/dev/null NLW=1 ALLOW='' POS='' SAME=''
snap() { [ -n "$1" ] && [ -e "$1" ] && find "$1" -mindepth 0 | LC_ALL=C sort; true; }
hc() {
	local name=$1 codes=$2 needle=$3 watch=$4
	shift 4
	local before after new rc ok=0 why="" nl
	local c0=$EPOCHREALTIME
	before=$(snap "$watch")
	[ -n "$SAME" ] && { cp "$SAME" "$W/.same" 2>/dev/null || : >"$W/.same"; }
	timeout -k 5 "$TO" "$@" <"$IN" >"$W/.out" 2>"$W/.err"
	rc=$?
	after=$(snap "$watch")
	new=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | sed '/^$/d')
	[ -n "$ALLOW" ] && new=$(printf '%s\n' "$new" | grep -Ev -- "$ALLOW" | sed '/^$/d')
	# stderr lines (a last line without a newline counts too); after a usage error
	# (exit 2) the "Try 'PROG --help'" hint is the contract's second line, not counted
	nl=$(grep -c '' "$W/.err")
	[ $rc -eq 2 ] && [ "$nl" -ge 2 ] && tail -n 1 "$W/.err" | grep -q "^Try '.* --help'" && nl=$((nl - 1))
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then ok=1; why="timeout (${TO}s)"; fi
	if [ $rc -gt 128 ] && [ $rc -ne 137 ]; then ok=1; why="$why; killed by signal $((rc - 128))"; fi
	if grep -qE 'Sanitizer|runtime error:|LeakSanitizer' "$W/.err"; then ok=1; why="$why; sanitizer report"; fi
	[[ " $codes " == *" $rc "* ]] || { ok=1; why="$why; exit $rc not in {$codes}"; }
	[ "$NLW" = auto ] && { NLW=1; [ $rc -eq 0 ] && NLW=0; }
	[ "$nl" -eq "$NLW" ] || { ok=1; why="$why; $nl stderr lines, want $NLW"; }
	# (a documented silent carry-on has no line to name anything)
	[ $rc -eq 0 ] && [ "$NLW" -eq 0 ] && needle='' POS=''
	if [ -n "$needle" ] && ! grep -qF -- "$needle" "$W/.err"; then ok=1; why="$why; stderr lacks '$needle'"; fi
	if [ -n "$POS" ] && ! grep -qF -- "$POS" "$W/.err"; then ok=1; why="$why; stderr lacks the position '$POS'"; fi
	[ -z "$new" ] || { ok=1; why="$why; left behind: $(printf '%s' "$new" | tr '\n' ' ' | head -c 300)"; }
	[ -n "$SAME" ] && ! cmp -s "$SAME" "$W/.same" && { ok=1; why="$why; $SAME changed"; }
	local prog=${name%%:*}
	per_prog[$prog]=$((${per_prog[$prog]:-0} + 1))
	local c1=$EPOCHREALTIME
	per_ms[$prog]=$((${per_ms[$prog]:-0} + (${c1/./} - ${c0/./}) / 1000))
	local desc="$name: exit $rc in {$codes}, stderr $nl line(s) (want $NLW)${needle:+ naming '$needle'}${POS:+ at '$POS'}, leftovers ${new:+yes}${new:-none}"
	if [ $ok -eq 0 ]; then
		t_result 0 "$desc"
	else
		t_result 1 "$desc" "${why#; }; stderr: $(head -c 600 "$W/.err" | tr '\n' '|')"
	fi
	IN=/dev/null NLW=1 ALLOW='' POS='' SAME=''
}

# deterministic binary garbage (no NUL-free guarantee: it has every byte value)
garbage() { # N FILE
	awk -v n="$1" 'BEGIN { x = 12345; for (i = 0; i < n; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%c", int(x / 65536) % 256 } }' >"$2"
}
# ten million 'a's
tenmb() { head -c 10000000 /dev/zero | tr '\0' a; }
# FILE truncated to N bytes
cut_to() { head -c "$2" "$1" >"$3"; }
# offsets at which to cut a file of size S: the first bytes, around 8 (safetensors'
# length prefix), quarters, and the last bytes
offsets() {
	local s=$1
	local o
	for o in 0 1 4 7 8 9 16 $((s / 4)) $((s / 2)) $((3 * s / 4)) $((s - 9)) $((s - 1)); do
		[ "$o" -ge 0 ] && [ "$o" -lt "$s" ] && echo "$o"
	done | sort -un
}
LC_ALL=C
export LC_ALL

# ---------------------------------------------------------------- fixtures
"$TB/test_train" --fixtures "$W" >/dev/null 2>&1
[ -f "$W/data/img/pool.safetensors" ]
t_result $? "fixtures: test_train --fixtures wrote img, txt and tst datasets"
D=$W/data
good_cell='{"task":"img","method":"softmax","seed":0,"epochs":1,"batch":16,"limit":48}'
printf '%s\n' '{"task":"img","method":"softmax","seed":0,"epochs":2,"batch":16,"limit":48}' >"$W/base.ndjson"
sb-train -q -d "$D" -o "$W/base" "$W/base.ndjson" >/dev/null 2>"$W/base.err"
RUN=$(ls -d "$W"/base/img.* 2>/dev/null | head -n 1)
[ -n "$RUN" ] && [ -f "$RUN/epoch-002.safetensors" ]
t_result $? "fixtures: a real 2-epoch run directory" "$(head -c 300 "$W/base.err")"
CK=$RUN/epoch-001.safetensors
CKS=$(stat -c %s "$CK")

if part a; then
# ================================================================ sb-attn
hd=sb-attn
mk() { printf '%b' "$2" >"$W/$1"; }
mk a_empty ''
NLW=0
hc "$hd: empty input, no stderr" "0" "" "" sb-attn -m softmax "$W/a_empty"
hc "$hd: missing file" "4" "$W/nosuch" "" sb-attn -m softmax "$W/nosuch"
hc "$hd: a directory" "4" "$W" "" sb-attn -m softmax "$W"
garbage 4096 "$W/a_garbage"
hc "$hd: binary garbage" "3" "a_garbage:1" "" sb-attn -m softmax "$W/a_garbage"
mk a_trunc '[1,2,3]\n[1,2'
POS='a_trunc:2'
hc "$hd: truncated row" "3" "a_trunc" "" sb-attn -m softmax "$W/a_trunc"
mk a_str '["a",1]\n'
hc "$hd: a string in a row" "3" "a_str:1" "" sb-attn -m softmax "$W/a_str"
mk a_obj '{"scores":[1]}\n'
hc "$hd: an object without --backward" "3" "a_obj:1" "" sb-attn -m softmax "$W/a_obj"
mk a_nest '[[1,2]]\n'
hc "$hd: a nested array" "3" "a_nest:1" "" sb-attn -m softmax "$W/a_nest"
mk a_empty_row '[]\n'
hc "$hd: an empty row" "0 3" "" "" sb-attn -m softmax "$W/a_empty_row"
awk 'BEGIN { s = ""; for (i = 0; i < 100000; i++) s = s "["; print s }' >"$W/a_deep"
hc "$hd: 100000 nested arrays" "3" "a_deep:1" "" sb-attn -m softmax "$W/a_deep"
mk a_big '[1e999,1]\n'
# documented: a score may be inf; 1e999 is read as +inf (as Python's json reads it)
NLW=0
hc "$hd: 1e999 in a row is +inf, a valid score" "0" "" "" sb-attn -m softmax "$W/a_big"
mk a_nan '[NaN,1]\n'
hc "$hd: bare NaN" "3" "a_nan:1" "" sb-attn -m softmax "$W/a_nan"
mk a_utf '["\xff"]\n'
hc "$hd: invalid UTF-8" "3" "a_utf:1" "" sb-attn -m softmax "$W/a_utf"
mk a_nul '[1,\x00 2]\n'
hc "$hd: a NUL byte" "3" "a_nul:1" "" sb-attn -m softmax "$W/a_nul"
mk a_bw_dup '{"scores":[1,2],"grad":[1,1],"scores":[1,2,3]}\n'
hc "$hd: --backward, duplicate key" "3" "a_bw_dup:1" "" sb-attn -m softmax --backward "$W/a_bw_dup"
mk a_bw_len '{"scores":[1,2],"grad":[1]}\n'
hc "$hd: --backward, grad of another length" "3" "a_bw_len:1" "" sb-attn -m softmax --backward "$W/a_bw_len"
mk a_bw_type '{"scores":"x","grad":[1]}\n'
hc "$hd: --backward, scores a string" "3" "a_bw_type:1" "" sb-attn -m softmax --backward "$W/a_bw_type"
mk a_bw_arr '[1,2]\n'
hc "$hd: --backward, an array" "3" "a_bw_arr:1" "" sb-attn -m softmax --backward "$W/a_bw_arr"
awk 'BEGIN { printf "["; for (i = 0; i < 1000000; i++) printf "%s%d", (i ? "," : ""), i % 7; print "]" }' >"$W/a_long"
NLW=0
hc "$hd: a 6 MB row (1e6 scores) is a row" "0" "" "" sb-attn -m sparsemax "$W/a_long"
{ printf '%s' '"'; tenmb; printf '%s\n' '"'; } >"$W/a_10mb"
hc "$hd: a 10 MB string line" "3" "a_10mb:1" "" sb-attn -m softmax "$W/a_10mb"
# one byte over the 64 MiB line limit (lib/json.h): refused before it is parsed
{ printf '"'; head -c $(((64 << 20) - 1)) /dev/zero | tr '\0' a; printf '"\n'; } >"$W/a_64mb"
POS='a_64mb:1: line longer than 64 MiB'
hc "$hd: a line of 64 MiB + 1 byte" "3" "a_64mb:1" "" sb-attn -m softmax "$W/a_64mb"
rm -f "$W/a_64mb"
mk a_lone '["x\\uD800"]\n'
POS='a_lone:1: column 4: \uD800 is a lone UTF-16 surrogate'
hc "$hd: an escaped lone surrogate" "3" "a_lone:1" "" sb-attn -m softmax "$W/a_lone"
for opt in "--ratio 0" "--ratio -1" "--ratio 1e999" "--ratio nan" "--alpha nan" "--alpha 1e999" "--n-valid -1" \
	"--n-valid 18446744073709551616" "--mask nope" "--ratio 0.5x"; do
	IN=$W/a_trunc
	hc "$hd: option $opt" "2" "" "" sb-attn -m topk_softmax $opt
done
mk a_ok '[1,2,3]\n'
IN=$W/a_ok
hc "$hd: --n-valid beyond the row" "3" "<stdin>:1" "" sb-attn -m softmax --n-valid 9

# ================================================================ sb-stats
hd=sb-stats
S=$TOP/tests/golden/stats/fixtures/val.ndjson
head -n 40 "$S" >"$W/s_good"
sb-stats -q --resamples 10 "$W/s_good" >/dev/null 2>"$W/s.err"
t_result $? "sb-stats accepts the first 40 lines of the golden fixture" "$(head -c 300 "$W/s.err")"
mkdir -p "$W/s_out"
st() { # name codes needle file  (stats into $W/s_out)
	hc "$hd: $1" "$2" "$3" "$W/s_out" sb-stats -q --resamples 10 --format md -o "$W/s_out" "$4"
}
: >"$W/s_empty"
# no records: a warning, exit 0, the (empty) outputs written
ALLOW='s_out/stats'
st "empty file" "0 3" "" "$W/s_empty"
st "missing file" "4" "$W/nosuch" "$W/nosuch"
st "a directory" "3 4" "$W/s_out" "$W/s_out"
garbage 3000 "$W/s_garbage"
st "binary garbage" "3" "s_garbage:1" "$W/s_garbage"
ss=$(stat -c %s "$W/s_good")
for o in 10 100 $((ss / 3)) $((ss / 2)) $((ss - 2)); do
	cut_to "$W/s_good" "$o" "$W/s_cut$o"
	st "cut at byte $o" "3" "s_cut$o:" "$W/s_cut$o"
done
ep='{"kind":"eval.epoch","v":1,"cell_id":"c1","task":"usps","method":"softmax","seed":0,"epoch":0,"val_accuracy":0.5}'
badrec() { # name json-line
	{ head -n 3 "$W/s_good"; printf '%s\n' "$2"; } >"$W/s_$1"
	POS="s_$1:4"
	st "record: $1" "3" "s_$1" "$W/s_$1"
}
declare -A epv=([task]=usps [method]=softmax [cell_id]=c1)
for f in task method cell_id; do
	for v in 1 null '[]' '{}' true; do badrec "${f}_$v" "${ep/\"$f\":\"${epv[$f]}\"/\"$f\":$v}"; done
done
badrec seed_str "${ep/\"seed\":0/\"seed\":\"0\"}"
badrec seed_264 "${ep/\"seed\":0/\"seed\":18446744073709551616}"
badrec seed_frac "${ep/\"seed\":0/\"seed\":0.5}"
badrec epoch_neg "${ep/\"epoch\":0/\"epoch\":-1}"
badrec epoch_big "${ep/\"epoch\":0/\"epoch\":1e999}"
badrec epoch_str "${ep/\"epoch\":0/\"epoch\":\"0\"}"
badrec acc_big "${ep/\"val_accuracy\":0.5/\"val_accuracy\":1e999}"
badrec acc_neg "${ep/\"val_accuracy\":0.5/\"val_accuracy\":-0.5}"
badrec acc_null "${ep/\"val_accuracy\":0.5/\"val_accuracy\":null}"
badrec acc_str "${ep/\"val_accuracy\":0.5/\"val_accuracy\":\"0.5\"}"
badrec v_two "${ep/\"v\":1/\"v\":2}"
badrec v_str "${ep/\"v\":1/\"v\":\"1\"}"
badrec kind_num "${ep/\"kind\":\"eval.epoch\"/\"kind\":7}"
badrec no_kind '{"v":1}'
badrec array '[1,2]'
badrec dup_key "${ep/\"seed\":0/\"seed\":0,\"seed\":1}"
badrec utf8 "${ep/usps/us$'\xff'ps}"
badrec nan "${ep/0.5/NaN}"
# published values (published.value): every field mistyped or out of range
pv='{"kind":"published.value","v":1,"task":"usps","method":"softmax","quantity":"mean","value":0.5,"supported":true,"source":"s"}'
for f in task method quantity source; do
	for v in 1 null '[]' '{}'; do badrec "pub_${f}_$v" "$(sed "s/\"$f\":\"[^\"]*\"/\"$f\":$v/" <<<"$pv")"; done
done
badrec pub_value_null "${pv/\"value\":0.5/\"value\":null}"
badrec pub_value_big "${pv/\"value\":0.5/\"value\":1e999}"
badrec pub_value_str "${pv/\"value\":0.5/\"value\":\"0.5\"}"
badrec pub_supported_num "${pv/\"supported\":true/\"supported\":1}"
badrec pub_quantity_other "${pv/\"quantity\":\"mean\"/\"quantity\":\"ratio\"}"
badrec pub_empty_task "${pv/\"task\":\"usps\"/\"task\":\"\"}"
pd='{"kind":"published.value","v":1,"task":"usps","method":"sparsemax","quantity":"delta","baseline":"softmax","value":0.01,"source":"s"}'
for v in 1 null '[]' '""'; do badrec "pub_baseline_$v" "${pd/\"baseline\":\"softmax\"/\"baseline\":$v}"; done
badrec pub_budget_str "${pd/\"quantity\":\"delta\"/\"quantity\":\"budget_delta\",\"budget\":\"3\"}"
badrec pub_patience_frac "${pd/\"value\"/\"patience\":2.5,\"value\"}"
# an escaped NUL would cut a C string short ("usps\u0000x" read as "usps"): refused, with its column
nulrec() { # name json-line column
	{ head -n 3 "$W/s_good"; printf '%s\n' "$2"; } >"$W/s_$1"
	POS="s_$1:4: column $3: \u0000 (NUL) is not allowed in a string or key"
	st "record: $1" "3" "s_$1" "$W/s_$1"
}
nulrec nul_value "${ep/usps/usps\\u0000x}" 55
nulrec nul_key "${ep/\"seed\"/\"seed\\u0000x\"}" 81
badrec deep "$(awk 'BEGIN { s = ""; for (i = 0; i < 5000; i++) s = s "{\"a\":"; print s }')"
{ printf '%s' '{"kind":"x","v":1,"pad":"'; tenmb; printf '%s\n' '"}'; } >"$W/s_10mb"
ALLOW='s_out/stats'
st "a 10 MB record of an unknown kind (ignored; the no-records warning)" "0" "records" "$W/s_10mb"

# ================================================================ sb-train
hd=sb-train
mkdir -p "$W/tr_runs"
trn() { # name codes needle  (cells on stdin from $IN or a file arg)
	local name=$1 codes=$2 needle=$3
	shift 3
	hc "$hd: $name" "$codes" "$needle" "$W/tr_runs" sb-train -q -d "$D" -o "$W/tr_runs" "$@"
}
cells() { # name codes line  (as a file and on stdin)
	printf '%s\n' "$3" >"$W/c_$1"
	POS="c_$1:1"
	trn "cells file: $1" "$2" "c_$1" "$W/c_$1"
	case $1 in cut* | dup_key | utf8 | deep | array | seed_264 | lr_inf) ;; *) return 0 ;; esac
	IN=$W/c_$1 POS='<stdin>:1'
	trn "cells stdin: $1" "$2" "<stdin>" -
}
: >"$W/c_empty"
trn "empty cells file" "0 2 3" "c_empty" "$W/c_empty"
trn "missing cells file" "4" "$W/nosuch" "$W/nosuch"
trn "cells file is a directory" "3 4" "$W/tr_runs" "$W/tr_runs"
garbage 2000 "$W/c_garbage"
POS='c_garbage:1'
trn "binary garbage cells" "3" "c_garbage" "$W/c_garbage"
gl=${#good_cell}
for o in 1 10 30 $((gl - 1)); do
	cells "cut$o" 3 "${good_cell:0:$o}"
done
setf() { # field value -> good_cell with field replaced or added
	local f=$1 v=$2
	if [[ $good_cell == *"\"$f\":"* ]]; then
		printf '%s' "$good_cell" | sed -E "s/\"$f\":(\"[^\"]*\"|[^,}]*)/\"$f\":$(printf '%s' "$v" | sed 's/[&/\]/\\&/g')/"
	else
		printf '%s' "${good_cell%\}},\"$f\":$v}"
	fi
}
for f in task method arch tier schedule mask; do
	for v in 1 null '[]' '{}' true; do cells "${f}_$v" 3 "$(setf $f "$v")"; done
done
for f in seed epochs batch limit lr weight_decay clip val_fraction alpha dropout switch_epoch; do
	for v in '"1"' null '{}'; do cells "${f}_$v" 3 "$(setf $f "$v")"; done
done
cells seed_264 3 "$(setf seed 18446744073709551616)"
cells seed_neg 3 "$(setf seed -1)"
cells seed_frac 3 "$(setf seed 0.5)"
cells epochs_neg 3 "$(setf epochs -1)"
cells epochs_zero 3 "$(setf epochs 0)"
cells epochs_big 3 "$(setf epochs 1e999)"
cells batch_zero 3 "$(setf batch 0)"
cells batch_neg 3 "$(setf batch -16)"
cells batch_264 3 "$(setf batch 18446744073709551616)"
cells lr_inf 3 "$(setf lr 1e999)"
cells lr_ninf 3 "$(setf lr -1e999)"
cells lr_nan 3 "$(setf lr NaN)"
cells lr_neg 3 "$(setf lr -0.001)"
cells clip_neg 3 "$(setf clip -1)"
NLW=0 ALLOW='tr_runs/img'
trn "val_fraction 0 is valid (no validation part)" 0 "" <(setf val_fraction 0)
rm -rf "$W/tr_runs"/img.*
cells vf_one 3 "$(setf val_fraction 1)"
cells vf_big 3 "$(setf val_fraction 2)"
cells dropout_one 3 "$(setf dropout 1)"
cells dropout_neg 3 "$(setf dropout -0.1)"
cells limit_neg 3 "$(setf limit -5)"
cells alpha_inf 3 "$(setf alpha 1e999)"
cells wd_nan 3 "$(setf weight_decay -1e999)"
cells dup_key 3 "$(setf seed '0,"seed":1')"
cells utf8 3 "$(setf task $'"im\xffg"')"
cells array 3 '[1,2,3]'
cells string 3 '"cell"'
cells deep 3 "$(awk 'BEGIN { s = ""; for (i = 0; i < 5000; i++) s = s "["; print s }')"
# documented: a missing dataset is an I/O error (exit 4) naming the file
printf '%s\n' "$(setf task '"nosuchtask"')" >"$W/c_unknown_task"
trn "cells file: a task without a dataset" 4 "nosuchtask/pool.safetensors" "$W/c_unknown_task"
cells family_num 3 "$(setf family 1)"
{ printf '%s' '{"task":"'; tenmb; printf '%s\n' '","method":"softmax","seed":0}'; } >"$W/c_10mb"
POS='c_10mb:1'
trn "a 10 MB cell line" "3 4" "c_10mb" "$W/c_10mb"
# flags
for fl in "--epochs -1" "--epochs 0" "--epochs 1e999" "--seed 18446744073709551616" "--seed -1" "--batch 0" \
	"--lr nan" "--lr 1e999" "--lr -1" "--val-fraction 1" "--limit -1" "--dropout 2" "--alpha inf" "--epochs 1x"; do
	trn "flags: $fl" "2" "" --task img --method softmax --seed 0 --limit 48 $fl
done
trn "-j -1" "2" "" -j -1 --task img --method softmax --seed 0 --epochs 1 --limit 48
trn "-j 18446744073709551616" "2" "" -j 18446744073709551616 --task img --method softmax --seed 0 --epochs 1 --limit 48

# the dataset file
dsrun() { # name codes needle datadir
	hc "$hd: dataset: $1" "$2" "$3" "$W/tr_runs" sb-train -q -d "$4" -o "$W/tr_runs" --task img --method softmax \
		--seed 0 --epochs 1 --batch 16 --limit 48
}
P=$D/img/pool.safetensors
PS=$(stat -c %s "$P")
mkds() { rm -rf "$W/ds"; mkdir -p "$W/ds/img"; }
mkds; : >"$W/ds/img/pool.safetensors"
dsrun "empty pool file" 3 "pool.safetensors" "$W/ds"
mkds; mkdir "$W/ds/img/pool.safetensors"
dsrun "pool is a directory" "3 4" "pool.safetensors" "$W/ds"
mkds; garbage 5000 "$W/ds/img/pool.safetensors"
dsrun "binary garbage pool" 3 "pool.safetensors" "$W/ds"
for o in $(offsets "$PS"); do
	mkds; cut_to "$P" "$o" "$W/ds/img/pool.safetensors"
	dsrun "pool cut at byte $o of $PS" 3 "pool.safetensors" "$W/ds"
done
# a header claiming more bytes than the file holds; a header length of 2^63
mkds; { printf '\xff\xff\xff\xff\xff\xff\xff\x7f'; tail -c +9 "$P"; } >"$W/ds/img/pool.safetensors"
dsrun "header length 2^63-1" 3 "pool.safetensors" "$W/ds"
hl=$(od -An -tu8 -N8 "$P" | tr -d ' ')
hdr=$(tail -c +9 "$P" | head -c "$hl")
mkst() { # header-json out   (pads to the original length with spaces, keeps the data)
	local h=$1 out=$2 n=${#1}
	{
		printf "$(printf '\\x%02x' $((n & 255)) $(((n >> 8) & 255)) 0 0 0 0 0 0)"
		printf '%s' "$h"
		tail -c +$((9 + hl)) "$P"
	} >"$out"
}
last=$(printf '%s' "$hdr" | grep -o '"data_offsets":\[[0-9]*,[0-9]*\]' | tail -n 1)
endo=$(printf '%s' "$last" | grep -o '[0-9]*\]' | tr -d ']')
mkds; mkst "${hdr/"$last"/"${last/",$endo]"/",$((endo + 4096))]"}"}" "$W/ds/img/pool.safetensors"
dsrun "a tensor's data_offsets beyond the file" 3 "pool.safetensors" "$W/ds"
mkds; mkst "${hdr/"$last"/"${last/",$endo]"/",18446744073709551615]"}"}" "$W/ds/img/pool.safetensors"
dsrun "data_offsets end 2^64-1" 3 "pool.safetensors" "$W/ds"
mkds; mkst "$(printf '%s' "$hdr" | sed -E 's/"shape":\[[0-9]+/"shape":[4611686018427387904/')" "$W/ds/img/pool.safetensors"
dsrun "a shape of 2^62 rows" 3 "pool.safetensors" "$W/ds"
mkds; mkst "$(printf '%s' "$hdr" | sed -E 's/"shape":\[[0-9]+/"shape":[-1/')" "$W/ds/img/pool.safetensors"
dsrun "a negative shape" 3 "pool.safetensors" "$W/ds"
mkds; mkst "$(printf '%s' "$hdr" | sed -E 's/"dtype":"[A-Z0-9]+"/"dtype":"F99"/')" "$W/ds/img/pool.safetensors"
dsrun "an unknown dtype" 3 "pool.safetensors" "$W/ds"
mkds; mkst "$(printf '%s' "$hdr" | sed -E 's/"dtype":"[A-Z0-9]+"/"dtype":7/')" "$W/ds/img/pool.safetensors"
dsrun "a dtype that is a number" 3 "pool.safetensors" "$W/ds"
mkds; mkst "$(printf '%s' "$hdr" | sed -E 's/"format":"[^"]*"/"format":1/')" "$W/ds/img/pool.safetensors"
dsrun "a metadata value that is a number" 3 "pool.safetensors" "$W/ds"
mkds; mkst "$(printf '%s' "$hdr" | sed -E 's/"classes":"[^"]*"/"classes":"1e999"/')" "$W/ds/img/pool.safetensors"
dsrun "classes 1e999" 3 "pool.safetensors" "$W/ds"
mkds; mkst "$(printf '%s' "$hdr" | sed -E 's/"classes":"[^"]*"/"classes":"-3"/')" "$W/ds/img/pool.safetensors"
dsrun "classes -3" 3 "pool.safetensors" "$W/ds"
mkds; mkst "$(printf '%s' "$hdr" | sed -E 's/"__metadata__":\{/"__metadata__":{"split":"pool",/')" "$W/ds/img/pool.safetensors"
dsrun "a duplicate metadata key" 3 "pool.safetensors" "$W/ds"
mkds; mkst "$(printf '%s' "$hdr" | sed -E 's/^\{/{"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},/')" "$W/ds/img/pool.safetensors"
dsrun "overlapping tensors" 3 "pool.safetensors" "$W/ds"
mkds; mkst "$(printf '%s' "$hdr" | sed -E 's/"task":"img"/"task":"im\xffg"/')" "$W/ds/img/pool.safetensors"
dsrun "invalid UTF-8 in the header" 3 "pool.safetensors" "$W/ds"
mkds; cp "$P" "$W/ds/img/pool.safetensors"
printf '%064d  pool.safetensors\n' 0 >"$W/ds/img/pool.safetensors.sha256"
dsrun "a sidecar that does not match" 3 "pool.safetensors" "$W/ds"
mkds; cp "$P" "$W/ds/img/pool.safetensors"
printf 'garbage\n' >"$W/ds/img/pool.safetensors.sha256"
dsrun "a malformed sidecar" 3 "pool.safetensors" "$W/ds"
mkds
dsrun "no dataset file" 4 "pool.safetensors" "$W/ds"

# a checkpoint to resume from: a run killed after epoch 1, then its state damaged
mkres() {
	rm -rf "$W/res"
	mkdir -p "$W/res"
	printf '%s\n' '{"task":"img","method":"softmax","seed":0,"epochs":2,"batch":16,"limit":48}' >"$W/res.ndjson"
	SB_TRAIN_STOP_AFTER_STEPS=4 sb-train -q -d "$D" -o "$W/res" "$W/res.ndjson" >/dev/null 2>&1
	R=$(ls -d "$W"/res/img.* | head -n 1)
}
resrun() { # name codes needle
	# documented: a missing or stale state means a fresh start (exit 0, new epochs);
	# a damaged one is bad data (exit 3) naming the file, the run directory kept as it was
	# (nothing new in it)
	NLW=auto ALLOW=''
	hc "$hd: resume: $1" "$2" "$3" "$W/res" sb-train -q -d "$D" -o "$W/res" "$W/res.ndjson"
}
mkres
if [ -f "$R/epoch-001.optim.safetensors" ]; then
	O=$R/epoch-001.optim.safetensors
	OS=$(stat -c %s "$O")
	for o in 0 8 100 $((OS / 2)) $((OS - 1)); do
		mkres; cut_to "$O" "$o" "$O.x"; mv "$O.x" "$O"
		resrun "optimiser state cut at $o" 3 "epoch-001.optim.safetensors"
	done
	mkres; garbage 4096 "$O"
	resrun "optimiser state garbage" 3 "epoch-001.optim.safetensors"
	mkres; rm "$O"; mkdir "$O"
	resrun "optimiser state is a directory" "3 4" "epoch-001.optim.safetensors"
	# the base run is the same cell: its epoch 1 is the same bits, so the resume goes on
	mkres; cp "$RUN/epoch-001.safetensors" "$R/epoch-001.safetensors"
	NLW=0 ALLOW='epoch-002|train.ndjson'
	hc "$hd: resume: the same cell's checkpoint from another run directory (the same bits)" 0 "" "$W/res" \
		sb-train -q -d "$D" -o "$W/res" "$W/res.ndjson"
	mkres; cp "$RUN/epoch-002.safetensors" "$R/epoch-001.safetensors"
	resrun "another epoch's checkpoint" 3 "epoch-001.safetensors"
fi

# ================================================================ sb-eval
hd=sb-eval
mkev() { # copy the base run to $W/ev/RUN
	rm -rf "$W/ev"
	mkdir -p "$W/ev"
	cp -r "$RUN" "$W/ev/"
	rm -f "$W/ev"/*/val*
	E=$W/ev/$(basename "$RUN")
}
ev() { # name codes needle
	ALLOW=${ALLOW:-'val'}
	hc "$hd: $1" "$2" "$3" "$W/ev" sb-eval -q -d "$D" "$E"
}
mkev
NLW=0 ALLOW='val'
ev "the base run evaluates" 0 ""
mkev
hc "$hd: missing run directory" 4 "$W/ev/nosuch" "$W/ev" sb-eval -q -d "$D" "$W/ev/nosuch"
: >"$W/ev/afile"
hc "$hd: a file as the run directory" "3 4" "afile" "$W/ev" sb-eval -q -d "$D" "$W/ev/afile"
# documented: a run without train.ndjson records is evaluated without recorded hashes, with
# one warning saying so
mkev; : >"$E/train.ndjson"
NLW=1
ev "empty train.ndjson (no recorded hashes: evaluated, one warning)" 0 "train.ndjson records no checkpoint hashes"
mkev; rm "$E/train.ndjson"
NLW=1
ev "train.ndjson missing (no recorded hashes: evaluated, one warning)" 0 "train.ndjson records no checkpoint hashes"
for what in cell.json train.ndjson; do
	if [ $what = cell.json ]; then
		mkev; : >"$E/$what"
		ev "empty $what" 3 "$what"
		mkev; rm "$E/$what"
		ev "$what missing" "3 4" "$what"
	fi
	mkev; rm "$E/$what"; mkdir "$E/$what"
	ev "$what is a directory" "3 4" "$what"
	mkev; garbage 3000 "$E/$what"
	ev "$what binary garbage" 3 "$what"
	s=$(stat -c %s "$RUN/$what")
	for o in 5 $((s / 2)) $((s - 2)); do
		mkev; cut_to "$RUN/$what" "$o" "$E/$what"
		ev "$what cut at byte $o" 3 "$what"
	done
done
cj=$(cat "$RUN/cell.json")
cjset() { # field value
	printf '%s' "$cj" | sed -E "s/\"$1\":(\"[^\"]*\"|[^,}]*)/\"$1\":$(printf '%s' "$2" | sed 's/[&/\]/\\&/g')/"
}
for f in task method seed epochs batch cell_id val_fraction limit n_val dataset_sha256; do
	for v in '"x"' null '[]' -1 1e999; do
		mkev; cjset "$f" "$v" >"$E/cell.json"
		cmp -s "$E/cell.json" "$RUN/cell.json" && continue
		if [ "$f" = dataset_sha256 ] && [ "$v" = '"x"' ]; then
			ev "cell.json $f=$v (not the pool's hash)" "3" "pool.safetensors"
		else
			ev "cell.json $f=$v" "3" "cell.json"
		fi
	done
done
# a cell whose dataset is missing (its cell.json intact): an I/O error, exit 4, naming the pool
mkev
hc "$hd: no such dataset" 4 "nosuch/img/pool.safetensors" "$W/ev" sb-eval -q -d "$W/nosuch" "$E"
mkev; printf '%s' "${cj/\"seed\":0/\"seed\":0,\"seed\":1}" >"$E/cell.json"
ev "cell.json duplicate key" 3 "cell.json"
mkev; printf '%s' "${cj/softmax/soft$'\xff'max}" >"$E/cell.json"
ev "cell.json invalid UTF-8" 3 "cell.json"
mkev; printf '%s' "${cj/softmax/soft$'\xc0\xaf'max}" >"$E/cell.json"
POS='invalid UTF-8'
ev "cell.json an overlong UTF-8 form" 3 "cell.json"
mkev; printf '%s' "$cj" | sed 's/softmax/soft\\udc00max/' >"$E/cell.json"
POS='\udc00 is a lone UTF-16 surrogate'
ev "cell.json an escaped lone surrogate" 3 "cell.json"
mkev; printf '%s' "$cj" | sed 's/softmax/softmax\\u0000x/' >"$E/cell.json"
POS='\u0000 (NUL) is not allowed in a string or key'
ev "cell.json an escaped NUL" 3 "cell.json"
mkev; awk 'BEGIN { s = ""; for (i = 0; i < 5000; i++) s = s "{\"a\":"; print s }' >"$E/cell.json"
ev "cell.json nested 5000 deep" 3 "cell.json"
mkev; { printf '%s' '{"task":"'; tenmb; printf '%s\n' '"}'; } >"$E/cell.json"
ev "cell.json a 10 MB line" 3 "cell.json"
# train.ndjson: an epoch record with wrong types
tl=$(grep -m 1 '"kind":"train.epoch"' "$RUN/train.ndjson")
for f in epochs_completed checkpoint_sha256; do
	for v in '"x"' null -1 1e999 '[]'; do
		mkev
		new=$(printf '%s' "$tl" | sed -E "s/\"$f\":(\"[^\"]*\"|[^,}]*)/\"$f\":$v/")
		{ grep -v '"kind":"train.epoch"' "$RUN/train.ndjson" | head -n 1; printf '%s\n' "$new";
			grep '"kind":"train.epoch"' "$RUN/train.ndjson" | tail -n +2; grep '"kind":"train.done"' "$RUN/train.ndjson"; } >"$E/train.ndjson"
		cmp -s "$E/train.ndjson" "$RUN/train.ndjson" && continue
		ev "train.ndjson $f=$v" "3" "train.ndjson"
	done
done
# checkpoints
for o in $(offsets "$CKS"); do
	mkev; cut_to "$CK" "$o" "$E/epoch-001.safetensors"; rm -f "$E/epoch-001.safetensors.sha256"
	ev "checkpoint cut at byte $o of $CKS" 3 "epoch-001.safetensors"
done
mkev; rm "$E/epoch-001.safetensors"; mkdir "$E/epoch-001.safetensors"
ev "checkpoint is a directory" "3 4" "epoch-001.safetensors"
mkev; rm "$E/epoch-001.safetensors"
# an epoch without its checkpoint is not evaluated (the saved epochs are), with one warning
NLW=1 ALLOW=val
ev "checkpoint missing (the other epoch is evaluated, one warning)" "0" "epoch-001.safetensors"
mkev; printf 'garbage\n' >"$E/epoch-001.safetensors.sha256"
ev "checkpoint sidecar malformed" 3 "epoch-001.safetensors"
mkev; printf '%064d  epoch-001.safetensors\n' 0 >"$E/epoch-001.safetensors.sha256"
ev "checkpoint sidecar mismatch" 3 "epoch-001.safetensors"
# a checkpoint of another shape, recorded as if it were this run's (hashes consistent)
printf '%s\n' '{"task":"img","method":"softmax","seed":0,"epochs":1,"batch":16,"limit":48,"tier":"wide"}' >"$W/wide.ndjson"
sb-train -q -d "$D" -o "$W/wide" "$W/wide.ndjson" >/dev/null 2>&1
WCK=$(ls "$W"/wide/img.*/epoch-001.safetensors 2>/dev/null | head -n 1)
if [ -n "$WCK" ]; then
	mkev; cp "$WCK" "$E/epoch-001.safetensors"; rm -f "$E/epoch-001.safetensors.sha256"
	ws=$(sha256sum "$WCK" | cut -c1-64)
	os=$(sha256sum "$CK" | cut -c1-64)
	sed -i "s/$os/$ws/g" "$E/train.ndjson"
	ev "a checkpoint of another shape (wide tier)" 3 "epoch-001.safetensors"
fi

# ================================================================ sb-lm
hd=sb-lm
mkdir -p "$W/lm_runs"
lmt() { # name codes needle file
	hc "$hd: $1" "$2" "$3" "$W/lm_runs" sb-lm train -q -o "$W/lm_runs" "$4"
}
: >"$W/l_empty"
NLW=0
lmt "empty cells file (nothing to do)" "0" "" "$W/l_empty"
lmt "missing cells file" 4 "$W/nosuch" "$W/nosuch"
garbage 1000 "$W/l_garbage"
lmt "binary garbage" 3 "l_garbage:1" "$W/l_garbage"
corpus=$TOP/tests/fixtures/lm/shakespeare-head.txt
lmc='{"family":"lm","seed":1,"model":{"d":16,"pattern":"CA","heads":2,"ffn":32},"T":64,"batch":2,"steps":1,"warmup":1,"lr":0.003,"log_every":50,"corpora":["s='$corpus'"]}'
lmset() { printf '%s' "$lmc" | sed -E "s/\"$1\":(\"[^\"]*\"|\{[^}]*\}|\[[^]]*\]|[^,}]*)/\"$1\":$(printf '%s' "$2" | sed 's/[&/\]/\\&/g')/"; }
for f in seed T batch steps warmup lr log_every corpora model; do
	for v in '"x"' null -1 1e999 18446744073709551616 '[]'; do
		lmset "$f" "$v" >"$W/l_$f"
		cmp -s "$W/l_$f" <(printf '%s' "$lmc") && continue
		POS="l_$f:1"
		lmt "cell $f=$v" 3 "l_$f" "$W/l_$f"
	done
done
printf '%s\n' "${lmc/\"seed\":1/\"seed\":1,\"seed\":2}" >"$W/l_dup"
lmt "duplicate key" 3 "l_dup:1" "$W/l_dup"
printf '%s\n' "$(lmset model '{"d":16,"pattern":"CA","heads":3,"ffn":32}')" >"$W/l_heads"
lmt "d not a multiple of heads" 3 "l_heads:1" "$W/l_heads"
printf '%s\n' "$(lmset model '{"d":0,"pattern":"CA","heads":2,"ffn":32}')" >"$W/l_d0"
lmt "d 0" 3 "l_d0:1" "$W/l_d0"
# RoPE scalings: an unknown one and a bad YaRN field are bad cells (3); an evaluation-only
# field (experts: pretrained layouts) is refused by the trainer (2), before the run
# directory is made
printf '%s\n' "$(lmset model '{"d":16,"pattern":"CA","heads":2,"ffn":32,"pos":"rope","rope_scaling":"dynamic"}')" >"$W/l_rdyn"
lmt "rope_scaling dynamic" 3 "l_rdyn:1" "$W/l_rdyn"
printf '%s\n' "$(lmset model '{"d":16,"pattern":"CA","heads":2,"ffn":32,"pos":"rope","rope_scaling":"yarn","rope_attn":-1}')" >"$W/l_rattn"
lmt "yarn rope_attn -1" 3 "l_rattn:1" "$W/l_rattn"
printf '%s\n' "$(lmset model '{"d":16,"pattern":"CA","heads":2,"ffn":32,"moe_experts":2,"moe_topk":1,"moe_ffn":8}')" >"$W/l_moe"
lmt "moe_experts (evaluation-only)" 2 "mixtures of experts are evaluation-only" "$W/l_moe"
printf '%s\n' "$(lmset corpora '["s='"$W"'"]')" >"$W/l_cdir"
# a directory is an sb-fetch corpus directory: its train part is missing (exit 4)
lmt "a corpus that is a directory" "3 4" "$W/train.safetensors" "$W/l_cdir"
: >"$W/l_ce.txt"
printf '%s\n' "$(lmset corpora '["s='"$W"'/l_ce.txt"]')" >"$W/l_cempty"
lmt "an empty corpus" "3" "l_ce.txt" "$W/l_cempty"
hc "$hd: eval of a file" "3 4" "l_empty" "" sb-lm eval -q "$W/l_empty"
# sb-lm import of a damaged Hugging Face directory (copies of tests/fixtures/hf/gemma3, gemma2,
# bamba, falcon_h1, jamba, qwen3_moe, qwen3_next, mixtral, olmoe, granitemoeshared, cohere2, ministral, phi3, olmo3, smollm3, exaone4 and qwen3, config.json or the weights broken): one line naming the file, exit 3 (4 for a
# missing file), nothing under the runs directory
mkdir -p "$W/imp_runs"
imp() { # name codes needle fixture edit: a copy of the fixture, edit run in it, imported
	local d="$W/hf_$RANDOM$RANDOM"
	mkdir -p "$d" && cp "$TOP/tests/fixtures/hf/$4"/*.json "$TOP/tests/fixtures/hf/$4"/model.safetensors "$d/"
	(cd "$d" && eval "$5")
	hc "$hd: import, $1" "$2" "$3" "$W/imp_runs" sb-lm import -q -o "$W/imp_runs" --corpus "s=$corpus" --T 64 "$d"
}
imp "config.json truncated" 3 "config.json: line" gemma3 'head -c 300 config.json >c && mv c config.json'
imp "config.json binary" 3 "config.json" gemma3 'head -c 400 /dev/urandom >config.json'
imp "config.json an array" 3 "config.json: expected a JSON object" gemma3 'echo "[1,2]" >config.json'
imp "config.json missing" 4 "config.json" gemma3 'rm config.json'
imp "gemma3 layer_types shorter than the layers" 3 "layer_types must list num_hidden_layers" gemma3 \
	"jq '.layer_types |= .[1:]' config.json >c && mv c config.json"
imp "gemma3 sliding_window a string" 3 "'sliding_window' must be an integer" gemma3 \
	"jq '.sliding_window = \"8\"' config.json >c && mv c config.json"
imp "gemma3 head_dim not the weights'" 3 "has another shape" gemma3 \
	"jq '.head_dim = 8' config.json >c && mv c config.json"
imp "gemma3 text_config null (model_type gemma3)" 3 "without a text_config object" gemma3 \
	"jq '.model_type = \"gemma3\" | .text_config = null' config.json >c && mv c config.json"
imp "gemma2 attn_logit_softcapping a string" 3 "'attn_logit_softcapping' must be null or a positive number" gemma2 \
	"jq '.attn_logit_softcapping = \"50\"' config.json >c && mv c config.json"
imp "gemma2 final_logit_softcapping 0" 3 "'final_logit_softcapping' must be null or a positive number" gemma2 \
	"jq '.final_logit_softcapping = 0' config.json >c && mv c config.json"
imp "bamba attn_layer_indices a string" 3 "'attn_layer_indices' must be an array of layer indices or null" bamba \
	"jq '.attn_layer_indices = \"2,4\"' config.json >c && mv c config.json"
imp "falcon_h1 mlp_multipliers a number" 3 "'mlp_multipliers' must be an array of 2 numbers or null" falcon_h1 \
	"jq '.mlp_multipliers = 0.5' config.json >c && mv c config.json"
imp "falcon_h1 mamba_d_ssm a string" 3 "'mamba_d_ssm'" falcon_h1 \
	"jq '.mamba_d_ssm = \"48\"' config.json >c && mv c config.json"
imp "falcon_h1 key_multiplier too large for a float" 3 "'key_multiplier'" falcon_h1 \
	"jq '.key_multiplier = 1e300' config.json >c && mv c config.json"
imp "qwen3_moe mlp_only_layers a string" 3 "'mlp_only_layers' must be an array of layer indices or null" qwen3_moe \
	"jq '.mlp_only_layers = \"1\"' config.json >c && mv c config.json"
imp "mixtral num_local_experts 0" 3 "'num_local_experts' must be an integer" mixtral \
	"jq '.num_local_experts = 0' config.json >c && mv c config.json"
imp "jamba mamba_dt_rank a string other than auto" 3 "'mamba_dt_rank' must be an integer" jamba \
	"jq '.mamba_dt_rank = \"four\"' config.json >c && mv c config.json"
imp "jamba attn_layer_period 0" 3 "'attn_layer_period'" jamba \
	"jq '.attn_layer_period = 0' config.json >c && mv c config.json"
imp "qwen3_next layer_types of numbers" 3 "layer_types[0] is ''" qwen3_next \
	"jq '.layer_types = [1, 2, 3, 4]' config.json >c && mv c config.json"
imp "qwen3_next linear_num_key_heads 0" 3 "'linear_num_key_heads'" qwen3_next \
	"jq '.linear_num_key_heads = 0' config.json >c && mv c config.json"
imp "olmoe clip_qkv set" 3 "clip_qkv is set" olmoe \
	"jq '.clip_qkv = 8' config.json >c && mv c config.json"
imp "cohere2 logit_scale a string" 3 "'logit_scale'" cohere2 \
	"jq '.logit_scale = \"0.5\"' config.json >c && mv c config.json"
imp "granitemoeshared shared_intermediate_size negative" 3 "'shared_intermediate_size'" granitemoeshared \
	"jq '.shared_intermediate_size = -1' config.json >c && mv c config.json"
imp "ministral layer_types shorter than the layers" 3 "layer_types must list num_hidden_layers" ministral \
	"jq '.layer_types |= .[1:]' config.json >c && mv c config.json"
imp "phi3 partial_rotary_factor a string" 3 "'partial_rotary_factor'" phi3 \
	"jq '.partial_rotary_factor = \"0.75\"' config.json >c && mv c config.json"
imp "olmo3 layer_types a string" 3 "layer_types must list num_hidden_layers" olmo3 \
	"jq '.layer_types = \"SSSAS\"' config.json >c && mv c config.json"
imp "smollm3 no_rope_layers of strings" 3 "no_rope_layers[0] is not 0 or 1" smollm3 \
	"jq '.no_rope_layers = [\"1\", \"1\", \"1\", \"0\", \"1\"]' config.json >c && mv c config.json"
imp "exaone4 sliding_window_pattern 0" 3 "'sliding_window_pattern' must be an integer" exaone4 \
	"jq '.sliding_window_pattern = 0' config.json >c && mv c config.json"
imp "weights truncated" 3 "model.safetensors" gemma3 'head -c 5000 model.safetensors >m && mv m model.safetensors'
imp "weights empty" 3 "model.safetensors" qwen3 ': >model.safetensors'
imp "weights garbage" 3 "model.safetensors" qwen3 'head -c 3000 /dev/urandom >model.safetensors'
imp "weights missing" "3 4" "safetensors" qwen3 'rm model.safetensors'
hc "$hd: report of garbage" "3" "l_garbage:1" "" sb-lm report -o "$W/lm_rep" "$W/l_garbage"
hc "$hd: probe --len -1" 2 "" "" sb-lm probe --task niah_single_1 --len -1
hc "$hd: probe --len 18446744073709551616" 2 "" "" sb-lm probe --task niah_single_1 --len 18446744073709551616
hc "$hd: probe --index -5" 2 "" "" sb-lm probe --task niah_single_1 --len 128 --index -5
hc "$hd: probe --corpus a directory" "3 4" "$W" "" sb-lm probe --task niah_single_1 --len 128 --corpus "$W"

# ================================================================ sb-fetch
hd=sb-fetch
fx=$W/fx
mkdir -p "$fx/m/tiny"
idx() { # magic-type ndim dims... ; data from stdin
	local t=$1 nd=$2
	shift 2
	printf "\\x00\\x00\\x$t\\x0$nd"
	local d
	for d in "$@"; do printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((d >> 24 & 255)) $((d >> 16 & 255)) $((d >> 8 & 255)) $((d & 255)))"; done
	cat
}
head -c $((4 * 784)) /dev/zero | idx 08 3 4 28 28 | gzip -n >"$fx/m/tiny/pool-images.gz"
printf '\x01\x02\x03\x04' | idx 08 1 4 | gzip -n >"$fx/m/tiny/pool-labels.gz"
head -c $((2 * 784)) /dev/zero | idx 08 3 2 28 28 | gzip -n >"$fx/m/tiny/test-images.gz"
printf '\x05\x06' | idx 08 1 2 | gzip -n >"$fx/m/tiny/test-labels.gz"
mkreg() { # mirror-dir out
	local m=$1 out=$2 f sep=""
	{
		printf '{"registry":"sparsebench.registry","registry_version":"1","files":{'
		for f in pool-images pool-labels test-images test-labels; do
			if [ -f "$m/tiny/$f.gz" ]; then
				printf '%s"tiny/%s.gz":{"urls":[],"size":%d,"sha256":"%s"}' "$sep" "$f" "$(stat -c %s "$m/tiny/$f.gz")" \
					"$(sha256sum "$m/tiny/$f.gz" | cut -c1-64)"
			else
				printf '%s"tiny/%s.gz":{"urls":[],"size":10,"sha256":"%064d"}' "$sep" "$f" 0
			fi
			sep=,
		done
		printf '},"tasks":[{"task":"tiny","modality":"image","decoder":"idx","classes":10,"shape":[1,28,28],"patch":4,"tokens":50,"n_pool":4,"n_test":2,'
		printf '"pool":{"images":"tiny/pool-images.gz","labels":"tiny/pool-labels.gz"},"test":{"images":"tiny/test-images.gz","labels":"tiny/test-labels.gz"},"license":"test","homepage":"none","citation":"none"}]}\n'
	} >"$out"
}
mkreg "$fx/m" "$fx/reg.json"
mkdir -p "$fx/out"
sb-fetch -q --offline --registry "$fx/reg.json" -m "$fx/m" -c "$fx/cache" -o "$fx/good" tiny >/dev/null 2>"$fx/good.err"
[ -f "$fx/good/tiny/pool.safetensors" ]
t_result $? "sb-fetch: the tiny idx fixture decodes" "$(head -c 300 "$fx/good.err")"
fe() { # name codes needle registry mirror   (fresh cache and output each time)
	rm -rf "$fx/out" "$fx/cache"
	mkdir -p "$fx/out"
	# DATA_DIR/.TASK.lock is documented (docs/sb-fetch.md: outputs are produced under it)
	ALLOW=${ALLOW:-'/\.tiny\.lock$'}
	hc "$hd: $1" "$2" "$3" "$fx/out" sb-fetch -q --offline --registry "$4" -m "$5" -c "$fx/cache" -o "$fx/out" tiny
}
: >"$fx/r_empty"
fe "empty registry" 3 "r_empty" "$fx/r_empty" "$fx/m"
fe "missing registry" 4 "$fx/nosuch" "$fx/nosuch" "$fx/m"
fe "registry is a directory" "3 4" "$fx/m" "$fx/m" "$fx/m"
garbage 2000 "$fx/r_garbage"
fe "binary garbage registry" 3 "r_garbage" "$fx/r_garbage" "$fx/m"
rs=$(stat -c %s "$fx/reg.json")
for o in 1 50 $((rs / 2)) $((rs - 3)); do
	cut_to "$fx/reg.json" "$o" "$fx/r_cut$o"
	fe "registry cut at byte $o" 3 "r_cut$o" "$fx/r_cut$o" "$fx/m"
done
awk 'BEGIN { s = ""; for (i = 0; i < 100000; i++) s = s "["; print s }' >"$fx/r_deep"
fe "registry nested 100000 deep" 3 "r_deep" "$fx/r_deep" "$fx/m"
regset() { sed -E "s/\"$1\":(\"[^\"]*\"|\[[^]]*\]|[^,}]*)/\"$1\":$(printf '%s' "$2" | sed 's/[&/\]/\\&/g')/" "$fx/reg.json" >"$fx/r_x"; }
for f in decoder classes shape patch n_pool n_test task modality tasks files sha256 size urls; do
	for v in '"x"' null -1 '[]' 18446744073709551616; do
		# documented: a null sha256 is pinned on first fetch, a null size unpublished,
		# null counts unchecked
		[ "$v" = null ] && [[ " sha256 size n_pool n_test " == *" $f "* ]] && continue
		regset "$f" "$v"
		cmp -s "$fx/r_x" "$fx/reg.json" && continue
		if [ "$f" = task ] && [ "$v" = '"x"' ]; then
			fe "registry $f=$v: TASK is then unknown (usage)" 2 "unknown task 'tiny'" "$fx/r_x" "$fx/m"
			continue
		fi
		cp "$fx/r_x" "$fx/r_$f"
		fe "registry $f=$v" "3 4" "" "$fx/r_$f" "$fx/m"
	done
done
sed 's/"task":"tiny",/"task":"tiny","task":"tiny2",/' "$fx/reg.json" >"$fx/r_dup"
fe "registry duplicate key" 3 "r_dup" "$fx/r_dup" "$fx/m"
# the idx decoder: files that verify (the registry holds their hash) but are broken
bad_mirror() { rm -rf "$fx/b"; cp -r "$fx/m" "$fx/b"; }
gi=$fx/m/tiny/pool-images.gz
gs=$(stat -c %s "$gi")
for o in 0 5 10 $((gs / 2)) $((gs - 4)) $((gs - 1)); do
	bad_mirror; cut_to "$gi" "$o" "$fx/b/tiny/pool-images.gz"; mkreg "$fx/b" "$fx/r_b"
	fe "pool-images.gz cut at byte $o" 3 "pool-images.gz" "$fx/r_b" "$fx/b"
done
raw=$fx/raw
gzip -dc "$gi" >"$raw"
rsz=$(stat -c %s "$raw")
for o in 0 3 4 8 15 16 $((rsz / 2)) $((rsz - 1)); do
	bad_mirror; head -c "$o" "$raw" | gzip -n >"$fx/b/tiny/pool-images.gz"; mkreg "$fx/b" "$fx/r_b"
	fe "IDX images cut at byte $o" 3 "pool-images.gz" "$fx/r_b" "$fx/b"
done
bad_mirror; head -c 784 /dev/zero | idx 08 3 2147483647 28 28 | gzip -n >"$fx/b/tiny/pool-images.gz"; mkreg "$fx/b" "$fx/r_b"
fe "IDX claims 2^31-1 images" 3 "pool-images.gz" "$fx/r_b" "$fx/b"
bad_mirror; head -c 784 /dev/zero | idx 08 3 65536 65536 65536 | gzip -n >"$fx/b/tiny/pool-images.gz"; mkreg "$fx/b" "$fx/r_b"
fe "IDX dimensions whose product overflows 32 bits" 3 "pool-images.gz" "$fx/r_b" "$fx/b"
bad_mirror; printf '\x01\x02\x03\x0b' | idx 08 1 4 | gzip -n >"$fx/b/tiny/pool-labels.gz"; mkreg "$fx/b" "$fx/r_b"
fe "a label beyond the classes" 3 "pool-labels.gz" "$fx/r_b" "$fx/b"
bad_mirror; printf '\x01\x02\x03' | idx 08 1 3 | gzip -n >"$fx/b/tiny/pool-labels.gz"; mkreg "$fx/b" "$fx/r_b"
fe "fewer labels than images" 3 "pool-labels.gz" "$fx/r_b" "$fx/b"
bad_mirror; garbage 3000 "$fx/b/tiny/pool-images.gz"; mkreg "$fx/b" "$fx/r_b"
fe "garbage instead of gzip" 3 "pool-images.gz" "$fx/r_b" "$fx/b"
bad_mirror; : >"$fx/b/tiny/pool-images.gz"; mkreg "$fx/b" "$fx/r_b"
fe "an empty archive" 3 "pool-images.gz" "$fx/r_b" "$fx/b"
bad_mirror; rm "$fx/b/tiny/pool-images.gz"; mkdir "$fx/b/tiny/pool-images.gz"
fe "a directory where the archive should be" "3 4" "pool-images.gz" "$fx/reg.json" "$fx/b"
bad_mirror; printf 'x' >>"$fx/b/tiny/pool-images.gz"
fe "an archive whose hash differs" 3 "pool-images.gz" "$fx/reg.json" "$fx/b"
for fl in "--seeds 18446744073709551616" "--seeds -1" "--seeds 5-2" "--retries -1" "--timeout -1" "--timeout 1e999"; do
	hc "$hd: option $fl" 2 "" "" sb-fetch -q --offline -o "$fx/out" $fl synthetic_marker
done

fi # part a
if part b; then
# ================================================================ sb-a8
hd=sb-a8
A8R=$TOP/tests/fixtures/a8/run.sh
mkdir -p "$W/a8o"
# valid inputs of every analysis (docs/sb-a8.md; tests/cli/sb-a8.t, tests/sh/a8_m3.sh)
for m in softmax topk_softmax_025; do for s in 0 1; do "$A8R" cifar10 $m $s 3 0.5$s; done; done >"$W/a8_bottomk"
"$TOP/tests/fixtures/a8/ld_grid.sh" >"$W/a8_lineardecay"
for m in softmax topk_softmax_025; do for t in mnist usps; do "$A8R" -p $t $m 0 4 0.5; done; done >"$W/a8_m1"
for m in softmax mechanistic_switch median_switch early_accuracy_switch entropy_switch; do
	for s in 0 1; do "$A8R" t $m $s 4 0.5$s; done
done >"$W/a8_m2"
{ grep -v 'early_accuracy_switch\|entropy_switch' "$W/a8_m2"; for m in softmax mechanistic_switch median_switch; do for s in 0 1; do
	printf '{"kind":"test.cell","v":1,"cell_id":"t.%s.s%d.plain.compact.e4","task":"t","method":"%s","seed":%d,"test_accuracy":0.5}\n' $m $s $m $s
done; done; } >"$W/a8_m3"
for m in softmax topk_softmax_025; do "$A8R" -p svhn $m 0 4 0.5; done >"$W/a8_m3map"
gzip -dc "$TOP/tests/fixtures/a8/n3a/killed.ndjson.gz" >"$W/a8_n3a"
sb-a8 -q m1 --resamples 100 "$W/a8_m1" >"$W/a8_traj" 2>"$W/a8.err"
printf '%s\n' '{"kind":"a8.verdict","v":1,"analysis":"m2","strongest_simple":"median_switch"}' >"$W/a8_m2v"
ok=0
for a in m1 m2 m3 bottomk lineardecay n3a; do
	sb-a8 -q $a --resamples 100 "$W/a8_$a" >/dev/null 2>>"$W/a8.err" || sb-a8 -q $a "$W/a8_$a" >/dev/null 2>>"$W/a8.err" || ok=1
done
sb-a8 -q m3map --trajectory "$W/a8_traj" --m2 "$W/a8_m2v" "$W/a8_m3map" >/dev/null 2>>"$W/a8.err" || ok=1
t_result $ok "fixtures: every sb-a8 analysis computes on its valid records" "$(head -c 300 "$W/a8.err")"
# a8 NAME CODES NEEDLE ANALYSIS FILE...: --md (and --switch-epochs where the analysis has it)
# into $W/a8o, which must stay empty: an error writes neither
a8() {
	local name=$1 codes=$2 needle=$3 a=$4
	shift 4
	local o=(--md "$W/a8o/r.md")
	case $a in m1 | m2 | m3) o+=(--resamples 100) ;; esac
	case $a in m1) o+=(--switch-epochs "$W/a8o/sw.inc") ;; esac
	case $a in m3map) o+=(--switch-epochs "$W/a8o/sw.inc" --trajectory "${TRAJ:-$W/a8_traj}" --m2 "${M2V:-$W/a8_m2v}") ;; esac
	rm -f "$W/a8o"/*
	hc "$hd: $a: $name" "$codes" "$needle" "$W/a8o" sb-a8 -q "$a" "${o[@]}" "$@"
	TRAJ='' M2V=''
}
TRAJ='' M2V=''
mkfifo "$W/a8_fifo"
# cut FILE at offset O or a little later, so that the cut falls inside a line (a cut at a
# line's end leaves valid records: a shorter input, not a malformed one)
cut_mid() { # file offset out
	local o=$2
	while [ "$o" -gt 0 ] && [ -z "$(tail -c +"$o" "$1" | head -c 1 | tr '\n' ' ' | tr -d ' ')" ]; do o=$((o + 1)); done
	head -c "$o" "$1" >"$3"
}
# the line number of byte offset O (1-based) in FILE
line_at() { head -c "$2" "$1" | grep -c ''; }
for a in m1 m2 m3 bottomk lineardecay n3a m3map; do
	f=$W/a8_$a
	: >"$W/a8e_$a"
	# no records: insufficient input (3); n3a: no decision; lineardecay: the INCOMPLETE
	# verdict (exit 0, said on stderr)
	[ $a = lineardecay ] && ALLOW='r\.md$'
	a8 "empty file" "$([ $a = lineardecay ] && echo 0 || echo 3)" "" $a "$W/a8e_$a"
	a8 "missing file" 4 "$W/nosuch" $a "$W/nosuch"
	a8 "a directory" "3 4" "$W/a8o" $a "$W/a8o"
	TO=5 a8 "a FIFO without a writer" "3 4" "a8_fifo" $a "$W/a8_fifo"
	garbage 3000 "$W/a8g_$a"
	POS="a8g_$a:"
	a8 "binary garbage" 3 "a8g_$a" $a "$W/a8g_$a"
	s=$(stat -c %s "$f")
	for o in 1 17 $((s / 3)) $((s / 2)) $((s - 2)); do
		cut_mid "$f" "$o" "$W/a8c_$a"
		POS="a8c_$a:$(line_at "$W/a8c_$a" "$(stat -c %s "$W/a8c_$a")")"
		a8 "cut at byte $o of $s" 3 "a8c_$a" $a "$W/a8c_$a"
	done
	{ head -n 2 "$f"; printf '%s' '{"kind":"x","v":1,"pad":"'; tenmb; printf '%s\n' '"'; } >"$W/a8t_$a"
	POS="a8t_$a:3"
	a8 "a 10 MB line, unterminated string" 3 "a8t_$a" $a "$W/a8t_$a"
	{ head -n 2 "$f"; awk 'BEGIN { s = ""; for (i = 0; i < 100000; i++) s = s "[" ; print s }'; } >"$W/a8d_$a"
	POS="a8d_$a:3"
	a8 "nested 100000 deep" 3 "a8d_$a" $a "$W/a8d_$a"
	l1=$(head -n 1 "$f")
	{ printf '%s\n' "${l1/\"kind\":/\"kind\":\"x\",\"kind\":}"; tail -n +2 "$f"; } >"$W/a8k_$a"
	POS="a8k_$a:1"
	a8 "a duplicate key" 3 "a8k_$a" $a "$W/a8k_$a"
	{ printf '%s\n' "${l1/\"v\":1/\"v\":1,\"x\":\"\\u0000\"}"; tail -n +2 "$f"; } >"$W/a8n_$a"
	POS="a8n_$a:1: column"
	a8 "an escaped NUL" 3 "a8n_$a" $a "$W/a8n_$a"
	{ printf '%s\n' "${l1/\"v\":1/\"v\":1,\"x\":\"\\udc00\"}"; tail -n +2 "$f"; } >"$W/a8s_$a"
	POS="a8s_$a:1: column"
	a8 "an escaped lone surrogate" 3 "a8s_$a" $a "$W/a8s_$a"
	{ printf '%s\n' "${l1/\"v\":1/\"v\":1,\"x\":\"$'\xc0\xaf'\"}"; tail -n +2 "$f"; } >"$W/a8u_$a"
	POS="a8u_$a:1"
	a8 "invalid UTF-8 (an overlong form)" 3 "a8u_$a" $a "$W/a8u_$a"
	{ head -n 2 "$f"; printf '[1,2]\n'; } >"$W/a8r_$a"
	POS="a8r_$a:3"
	a8 "a line that is an array" 3 "a8r_$a" $a "$W/a8r_$a"
done
# a line one byte over the 64 MiB limit (lib/json.h), after valid records
{ head -n 2 "$W/a8_bottomk"; printf '{"kind":"x","pad":"'; head -c $(((64 << 20) - 19)) /dev/zero | tr '\0' a; printf '"}\n'; } >"$W/a8_64mb"
POS='a8_64mb:3: line longer than 64 MiB'
a8 "a line of 64 MiB + 1 byte" 3 "a8_64mb" bottomk "$W/a8_64mb"
rm -f "$W/a8_64mb"
# records: every field of eval.epoch / eval.done mistyped or out of range
ep=$(head -n 1 "$W/a8_bottomk")
dn=$(grep -m 1 '"kind":"eval.done"' "$W/a8_bottomk")
a8rec() { # name line(s) ...: the bottomk fixture with its first line replaced
	{ printf '%s\n' "$2"; tail -n +2 "$W/a8_bottomk"; } >"$W/a8x_$1"
	POS="a8x_$1:1"
	a8 "record: $1" 3 "a8x_$1" bottomk "$W/a8x_$1"
}
a8set() { printf '%s' "$1" | sed -E "s/\"$2\":(\"[^\"]*\"|[^,}]*)/\"$2\":$(printf '%s' "$3" | sed 's/[&/\]/\\&/g')/"; }
for f in task method; do
	for v in 1 null '[]' '{}' true; do a8rec "${f}_$v" "$(a8set "$ep" $f "$v")"; done
done
for f in seed epoch; do
	for v in '"0"' null 1e999 -1e999 9223372036854775808 18446744073709551616 0.5 '[]'; do a8rec "${f}_$v" "$(a8set "$ep" $f "$v")"; done
done
a8rec epoch_neg "$(a8set "$ep" epoch -1)"
a8rec epoch_big "$(a8set "$ep" epoch 100000)"
for v in '"0.5"' 1e999 -0.5 1.5 '[]' '{}'; do a8rec "val_accuracy_$v" "$(a8set "$ep" val_accuracy "$v")"; done
for v in 2 '"1"' 1e999 null; do a8rec "v_$v" "$(a8set "$ep" v "$v")"; done
a8rec "n_val_1e999" "$(a8set "$ep" n_val 1e999)"
a8rec "n_val_neg0" "$(a8set "$ep" n_val -0)"
a8rec "cell_id_num" "$(a8set "$ep" cell_id 7)"
a8rec "arch_num" "$(a8set "$ep" arch 7)"
# the first run's eval.done at line 1, its epochs after it
for v in 0 -0 '"3"' null 1e999 9223372036854775808 -1 2147483648; do a8rec "done_epochs_$v" "$(a8set "$dn" epochs "$v")"; done
for v in null 1 '[]'; do a8rec "done_train_status_$v" "$(a8set "$dn" train_status "$v")"; done
for v in '"3"' 1e999 -0.5; do a8rec "done_epochs_evaluated_$v" "$(a8set "$dn" epochs_evaluated "$v")"; done
# m3: test.cell records
tc=$(grep -m 1 '"kind":"test.cell"' "$W/a8_m3")
for v in '"0.5"' null 1e999 -0 -0.1 2; do
	{ printf '%s\n' "$(a8set "$tc" test_accuracy "$v")"; cat "$W/a8_m3"; } >"$W/a8x_tc"
	POS="a8x_tc:1" NLW=auto ALLOW='r\.md$'
	a8 "test.cell test_accuracy=$v" "0 3" "a8x_tc" m3 "$W/a8x_tc"
done
# n3a: every field of n3a.eval mistyped or out of range
n3=$(head -n 1 "$W/a8_n3a")
for f in arch r seed arm parent step validation_cross_entropy v registered_settings; do
	for v in '"x"' '[]' 1e999 -0 9223372036854775808 -1; do
		nl=$(a8set "$n3" $f "$v")
		[ "$nl" = "$n3" ] && continue
		{ printf '%s\n' "$nl"; tail -n +2 "$W/a8_n3a"; } >"$W/a8x_n3a"
		case $f=$v in
		seed=-0 | seed=-1 | step=-0 | validation_cross_entropy=-0 | validation_cross_entropy=-1)
			# valid in the record (a seed is any integer, -0 is 0): the analysis' "no decision"
			# (a census without that seed's other evaluations, a CE that is no denominator)
			a8 "n3a.eval $f=$v (no decision)" 3 "no decision" n3a "$W/a8x_n3a" ;;
		validation_cross_entropy=9223372036854775808)
			# a finite CE: computed (the fixture's one warning: 10 seeds, not the registered 64)
			ALLOW='r\.md$'
			a8 "n3a.eval $f=$v (a finite CE)" 0 "not the registered design" n3a "$W/a8x_n3a" ;;
		*)
			POS="a8x_n3a:1"
			a8 "n3a.eval $f=$v" 3 "a8x_n3a" n3a "$W/a8x_n3a" ;;
		esac
	done
done
# m3map's --trajectory (sb-a8 m1's a8.m1.group records) and --m2 (its a8.verdict)
for which in TRAJ M2V; do
	if [ $which = TRAJ ]; then f=$W/a8_traj opt=trajectory; else f=$W/a8_m2v opt=m2; fi
	: >"$W/a8e_$which"
	printf -v "$which" '%s' "$W/a8e_$which"
	a8 "--$opt empty" 3 "a8e_$which" m3map "$W/a8_m3map"
	printf -v "$which" '%s' "$W/nosuch"
	a8 "--$opt missing" 4 "$W/nosuch" m3map "$W/a8_m3map"
	printf -v "$which" '%s' "$W/a8o"
	a8 "--$opt a directory" "3 4" "$W/a8o" m3map "$W/a8_m3map"
	printf -v "$which" '%s' "$W/a8_fifo"
	TO=5 a8 "--$opt a FIFO without a writer" "3 4" "a8_fifo" m3map "$W/a8_m3map"
	garbage 2000 "$W/a8g_$which"
	printf -v "$which" '%s' "$W/a8g_$which"
	POS="a8g_$which:1"
	a8 "--$opt binary garbage" 3 "a8g_$which" m3map "$W/a8_m3map"
	s=$(stat -c %s "$f")
	for o in 1 30 $((s / 2)) $((s - 2)); do
		cut_mid "$f" "$o" "$W/a8c_$which"
		printf -v "$which" '%s' "$W/a8c_$which"
		POS="a8c_$which:$(line_at "$W/a8c_$which" "$(stat -c %s "$W/a8c_$which")")"
		a8 "--$opt cut at byte $o of $s" 3 "a8c_$which" m3map "$W/a8_m3map"
	done
done
gr=$(grep -m 1 '"kind":"a8.m1.group"' "$W/a8_traj")
for f in task target_switch_epoch n_val probe_tail_mass_e3 pred_mechanistic; do
	for v in null '"x"' 1e999 -0 9223372036854775808 '[]'; do
		nl=$(a8set "$gr" $f "$v")
		[ "$nl" = "$gr" ] || [ "$f=$v" = 'task="x"' ] && continue
		grep -v '"kind":"a8.m1.group"' "$W/a8_traj" >"$W/a8x_traj"
		{ printf '%s\n' "$nl"; grep '"kind":"a8.m1.group"' "$W/a8_traj" | tail -n +2; } >>"$W/a8x_traj"
		# a value m3map does not use (a prediction), or -0 read as 0: the map is computed
		TRAJ=$W/a8x_traj POS="a8x_traj:" NLW=auto ALLOW='(r\.md|sw\.inc)$'
		a8 "--trajectory a8.m1.group $f=$v" "0 3" "a8x_traj" m3map "$W/a8_m3map"
	done
done
for v in null 7 '""' '"softmax"' '[]'; do
	printf '{"kind":"a8.verdict","v":1,"analysis":"m2","strongest_simple":%s}\n' "$v" >"$W/a8x_m2v"
	M2V=$W/a8x_m2v
	a8 "--m2 strongest_simple=$v" 3 "a8x_m2v" m3map "$W/a8_m3map"
done
printf '{"kind":"a8.verdict","v":1,"analysis":"m2","strongest_simple":"median_switch","strongest_simple":"entropy_switch"}\n' >"$W/a8x_m2v"
M2V=$W/a8x_m2v POS="a8x_m2v:1"
a8 "--m2 a duplicate key" 3 "a8x_m2v" m3map "$W/a8_m3map"
# the outputs: --md and --switch-epochs where a directory is, or in a missing directory
mkdir -p "$W/a8d/r.md" "$W/a8d/sw.inc"
hc "$hd: --md is a directory" 4 "r.md" "$W/a8o" sb-a8 -q bottomk --md "$W/a8d/r.md" "$W/a8_bottomk"
hc "$hd: --md in a missing directory" 4 "nosuch" "$W/a8o" sb-a8 -q bottomk --md "$W/nosuch/r.md" "$W/a8_bottomk"
hc "$hd: --switch-epochs is a directory" 4 "sw.inc" "$W/a8o" sb-a8 -q m1 --resamples 100 --switch-epochs "$W/a8d/sw.inc" "$W/a8_m1"
# an existing --switch-epochs is read to see whether its content changes: a FIFO there is
# replaced (written atomically), never opened
NLW=0
TO=5 hc "$hd: --switch-epochs is a FIFO (replaced, never read)" 0 "" "$W/a8o" sb-a8 -q m1 --resamples 100 --switch-epochs "$W/a8_fifo" "$W/a8_m1"
[ -p "$W/a8_fifo" ] || { rm -f "$W/a8_fifo"; mkfifo "$W/a8_fifo"; }
hc "$hd: --switch-epochs in a missing directory" 4 "nosuch" "$W/a8o" sb-a8 -q m1 --resamples 100 --switch-epochs "$W/nosuch/sw.inc" "$W/a8_m1"
for opt in "--seed -1" "--seed 1e999" "--seed 18446744073709551616" "--resamples 0" "--resamples -0" "--resamples 1e999"; do
	hc "$hd: option $opt" 2 "" "$W/a8o" sb-a8 -q m1 $opt "$W/a8_m1"
done

# ================================================================ sb-freeze
hd=sb-freeze
. "$TOP/tests/fixtures/guard/lib.sh"
FZ=$W/fz
mkdir -p "$FZ/runs" "$FZ/out"
_fz_acc() { echo "0.5 0.6 0.7"; }
mkgrid "$FZ/runs" t "$ALL_METHODS" "0 1" _fz_acc
FL=$(grep -l '"method":"topk_softmax_025","seed":0' "$FZ"/runs/*/val.ndjson)
FLS=$(ls "$FZ"/runs/*/val.ndjson | grep -v "$FL")
printf '%s\n' '# switch map' 'method mechanistic_switch median_switch' \
	'set when task=t arch=plain tier=compact method=mechanistic_switch switch_epoch=2' \
	'set when task=t arch=plain tier=compact method=median_switch switch_epoch=3' >"$FZ/map.inc"
sb-freeze -q --min-seeds 1 -o "$FZ/good.json" "$FL" $FLS >/dev/null 2>"$FZ/err" &&
	sb-freeze -q --rule m3_confirmation --switch-map "$FZ/map.inc" -o "$FZ/good_m3.json" "$FL" $FLS >/dev/null 2>>"$FZ/err"
t_result $? "fixtures: sb-freeze freezes the fixture logs (both rules)" "$(head -c 300 "$FZ/err")"
# fz NAME CODES NEEDLE LOG: the fixture's other logs and LOG, into $FZ/out (nothing may appear)
fz() {
	rm -f "$FZ/out"/*
	hc "$hd: $1" "$2" "$3" "$FZ/out" sb-freeze -q --min-seeds 1 -o "$FZ/out/sel.json" $FLS "$4"
}
fzm() { # NAME CODES NEEDLE MAP: rule m3_confirmation with MAP
	rm -f "$FZ/out"/*
	hc "$hd: $1" "$2" "$3" "$FZ/out" sb-freeze -q --rule m3_confirmation --switch-map "$4" -o "$FZ/out/sel.json" "$FL" $FLS
}
mkfifo "$FZ/fifo"
: >"$FZ/l_empty"
# an empty log holds no cells: the others are frozen (documented: a selection is written)
NLW=auto ALLOW='sel\.json$'
fz "an empty log (no cells)" "0 3" "l_empty" "$FZ/l_empty"
rm -f "$FZ/out"/*
fz "a missing log" 4 "$W/nosuch" "$W/nosuch"
fz "a log that is a directory" "3 4" "$FZ/runs" "$FZ/runs"
TO=5 fz "a log that is a FIFO without a writer" "3 4" "fifo" "$FZ/fifo"
garbage 3000 "$FZ/l_garbage"
POS="l_garbage:1"
fz "binary garbage" 3 "l_garbage" "$FZ/l_garbage"
s=$(stat -c %s "$FL")
for o in 1 17 $((s / 4)) $((s / 2)) $((3 * s / 4)) $((s - 2)); do
	cut_mid "$FL" "$o" "$FZ/l_cut"
	POS="l_cut:$(line_at "$FZ/l_cut" "$(stat -c %s "$FZ/l_cut")")"
	fz "a log cut at byte $o of $s" 3 "l_cut" "$FZ/l_cut"
done
{ head -n 2 "$FL"; printf '%s' '{"kind":"x","v":1,"pad":"'; tenmb; printf '%s\n' '"}'; tail -n +3 "$FL"; } >"$FZ/l_10mb"
# a 10 MB record of an unknown kind is a record (under the 64 MiB limit): frozen
NLW=0 ALLOW='sel\.json$'
fz "a 10 MB line of an unknown kind" "0" "" "$FZ/l_10mb"
rm -f "$FZ/out"/* "$FZ/l_10mb"
{ head -n 2 "$FL"; printf '%s' '{"kind":"x","v":1,"pad":"'; tenmb; printf '%s\n' '"'; } >"$FZ/l_10mbu"
POS="l_10mbu:3"
fz "a 10 MB line, unterminated string" 3 "l_10mbu" "$FZ/l_10mbu"
{ head -n 2 "$FL"; printf '{"kind":"x","pad":"'; head -c $(((64 << 20) - 19)) /dev/zero | tr '\0' a; printf '"}\n'; } >"$FZ/l_64mb"
POS='l_64mb:3: line longer than 64 MiB'
fz "a line of 64 MiB + 1 byte" 3 "l_64mb" "$FZ/l_64mb"
rm -f "$FZ/l_64mb"
{ head -n 2 "$FL"; awk 'BEGIN { s = ""; for (i = 0; i < 100000; i++) s = s "{\"a\":"; print s }'; } >"$FZ/l_deep"
POS="l_deep:3"
fz "nested 100000 deep" 3 "l_deep" "$FZ/l_deep"
ep=$(sed -n 2p "$FL")
dn=$(grep '"kind":"eval.done"' "$FL")
fzrec() { # name line [LINE]: the log with its first eval.epoch (line 2) replaced; the error
	# at LINE (default 2)
	{ head -n 1 "$FL"; printf '%s\n' "$2"; tail -n +3 "$FL"; } >"$FZ/l_$1"
	POS="l_$1:${3:-2}"
	fz "eval.epoch: $1" 3 "l_$1" "$FZ/l_$1"
}
fzdone() { # name line: the log with its eval.done replaced
	{ grep -v '"kind":"eval.done"' "$FL"; printf '%s\n' "$2"; } >"$FZ/l_$1"
	POS="l_$1:$(grep -c '' "$FZ/l_$1")"
	fz "eval.done: $1" 3 "l_$1" "$FZ/l_$1"
}
fzset() { printf '%s' "$1" | sed -E "s/\"$2\":(\"[^\"]*\"|[^,}]*)/\"$2\":$(printf '%s' "$3" | sed 's/[&/\]/\\&/g')/"; }
for f in cell_id task method tier arch; do
	for v in 1 null '[]' '{}'; do fzrec "${f}_$v" "$(fzset "$ep" $f "$v")"; done
done
for f in seed epoch epochs_completed; do
	for v in '"1"' null 1e999 -1 9223372036854775808 18446744073709551616 0.5; do
		# seed -1 is an integer: the next record of the cell contradicts it
		fzrec "${f}_$v" "$(fzset "$ep" $f "$v")" "$([ "$f$v" = seed-1 ] && echo 3 || echo 2)"
	done
done
for v in '"0.5"' 1e999 -1e999 -0.5 1.5 '[]'; do fzrec "val_accuracy_$v" "$(fzset "$ep" val_accuracy "$v")"; done
for v in 2 '"1"' 1e999; do fzrec "v_$v" "$(fzset "$ep" v "$v")"; done
fzrec dup_key "${ep/\"seed\":0/\"seed\":0,\"seed\":1}"
fzrec nul "$(printf '%s' "$ep" | sed 's/"task":"t"/"task":"t\\u0000x"/')"
fzrec surrogate "$(printf '%s' "$ep" | sed 's/"task":"t"/"task":"t\\ud800"/')"
fzrec overlong "${ep/\"task\":\"t\"/\"task\":\"t$'\xc0\xaf'\"}"
fzrec array '[1,2]'
for v in 0 -1 '"3"' null 1e999 9223372036854775808; do fzdone "epochs_$v" "$(fzset "$dn" epochs "$v")"; done
for v in -1 '"3"' 1e999 4; do fzdone "epochs_evaluated_$v" "$(fzset "$dn" epochs_evaluated "$v")"; done
for v in 1 null '[]'; do fzdone "train_status_$v" "$(fzset "$dn" train_status "$v")"; done
# --switch-map (rule m3_confirmation): read before any log is judged
: >"$FZ/m_empty"
fzm "--switch-map empty" "3" "m_empty" "$FZ/m_empty"
fzm "--switch-map missing" 4 "$W/nosuch" "$W/nosuch"
fzm "--switch-map a directory" "3 4" "$FZ/runs" "$FZ/runs"
TO=5 fzm "--switch-map a FIFO without a writer" "3 4" "fifo" "$FZ/fifo"
garbage 2000 "$FZ/m_garbage"
POS="m_garbage:1"
fzm "--switch-map binary garbage" 3 "m_garbage" "$FZ/m_garbage"
s=$(stat -c %s "$FZ/map.inc")
for o in 20 $((s / 2)) $((s - 2)); do
	cut_mid "$FZ/map.inc" "$o" "$FZ/m_cut"
	POS="m_cut:$(line_at "$FZ/m_cut" "$(stat -c %s "$FZ/m_cut")")"
	fzm "--switch-map cut at byte $o of $s" 3 "m_cut" "$FZ/m_cut"
done
{ head -n 2 "$FZ/map.inc"; tenmb; echo; } >"$FZ/m_10mb"
POS="m_10mb:3"
fzm "--switch-map a 10 MB line" 3 "m_10mb" "$FZ/m_10mb"
head -c $(((16 << 20) + 1)) /dev/zero | tr '\0' '#' >"$FZ/m_big"
fzm "--switch-map over 16 MiB" 3 "m_big" "$FZ/m_big"
rm -f "$FZ/m_big"
mapl='set when task=t arch=plain tier=compact method=mechanistic_switch switch_epoch='
for v in 0 -0 -1 1e999 2.5 9223372036854775808 4294967298 18446744073709551618 '2 x'; do
	{ head -n 2 "$FZ/map.inc"; printf '%s%s\n' "$mapl" "$v"; tail -n 1 "$FZ/map.inc"; } >"$FZ/m_x"
	POS="m_x:3"
	fzm "--switch-map switch_epoch=$v" 3 "m_x" "$FZ/m_x"
done
{ head -n 2 "$FZ/map.inc"; printf '%s2\0 x\n' "$mapl"; tail -n 1 "$FZ/map.inc"; } >"$FZ/m_nul"
POS="m_nul:3"
fzm "--switch-map a NUL byte in a line" 3 "m_nul" "$FZ/m_nul"
{ head -n 2 "$FZ/map.inc"; printf '%s2\n' "${mapl/task=t/task=t$'\xff'}"; tail -n 1 "$FZ/map.inc"; } >"$FZ/m_utf"
POS="m_utf:3"
fzm "--switch-map invalid UTF-8" 3 "m_utf" "$FZ/m_utf"
{ cat "$FZ/map.inc"; printf 'method mechanistic_switch entropy_switch\n'; } >"$FZ/m_axis2"
POS="m_axis2:5"
fzm "--switch-map a second method line" 3 "m_axis2" "$FZ/m_axis2"
# the output: -o where a directory is, under a file, in a new directory (made), and an
# existing one replaced with --force that is a FIFO, garbage, or whose ledger is damaged
mkdir -p "$FZ/out/d.json"
hc "$hd: -o is a directory" "1 4" "d.json" "$FZ/out" sb-freeze -q --min-seeds 1 -o "$FZ/out/d.json" "$FL" $FLS
hc "$hd: -o is a directory, --force" "4" "d.json" "$FZ/out" sb-freeze -q --force --min-seeds 1 -o "$FZ/out/d.json" "$FL" $FLS
rmdir "$FZ/out/d.json"
: >"$FZ/afile"
hc "$hd: -o under a file" 4 "afile" "$FZ/out" sb-freeze -q --min-seeds 1 -o "$FZ/afile/sel.json" "$FL" $FLS
mkfifo "$FZ/out/f.json"
hc "$hd: -o is a FIFO (refused: it exists)" 1 "f.json" "$FZ/out" sb-freeze -q --min-seeds 1 -o "$FZ/out/f.json" "$FL" $FLS
TO=5 hc "$hd: -o is a FIFO, --force" "3 4" "f.json" "$FZ/out" sb-freeze -q --force --min-seeds 1 -o "$FZ/out/f.json" "$FL" $FLS
rm -f "$FZ/out/f.json"
# documented: a damaged selection is replaced too, its file hash recorded; a damaged ledger
# is recorded as reads unknown (-1)
garbage 1000 "$FZ/out/g.json"
NLW=0 ALLOW='g\.json$'
hc "$hd: --force over binary garbage (replaced)" 0 "" "$FZ/out" sb-freeze -q --force --min-seeds 1 -o "$FZ/out/g.json" "$FL" $FLS
cp "$FZ/good.json" "$FZ/out/h.json"
garbage 1000 "$FZ/out/h.reads.ndjson"
NLW=0 ALLOW='h\.json$'
hc "$hd: --force, the old ledger binary garbage (reads unknown)" 0 "" "$FZ/out" sb-freeze -q --force --min-seeds 1 -o "$FZ/out/h.json" "$FL" $FLS
rm -f "$FZ/out/h.reads.ndjson"
mkfifo "$FZ/out/h.reads.ndjson"
NLW=0 ALLOW='h\.json$'
TO=5 hc "$hd: --force, the old ledger a FIFO (reads unknown)" 0 "" "$FZ/out" sb-freeze -q --force --min-seeds 1 -o "$FZ/out/h.json" "$FL" $FLS
rm -f "$FZ/out"/*
# an existing selection without --force is refused and left as it was
cp "$FZ/good.json" "$FZ/out/k.json"
SAME=$FZ/out/k.json
hc "$hd: -o exists, no --force: left as it was" 1 "k.json" "$FZ/out" sb-freeze -q --min-seeds 1 -o "$FZ/out/k.json" "$FL" $FLS
SAME=$FZ/out/k.json
hc "$hd: -o exists, --force, a malformed log: left as it was" 3 "l_garbage" "$FZ/out" sb-freeze -q --force --min-seeds 1 -o "$FZ/out/k.json" "$FL" "$FZ/l_garbage"
rm -f "$FZ/out"/*
for opt in "--min-seeds -1" "--min-seeds 1e999" "--min-seeds 18446744073709551616" "--patience -1" "--budget 0" "--budget 9223372036854775808" "--expect-cells -1"; do
	hc "$hd: option $opt" 2 "" "$FZ/out" sb-freeze -q $opt -o "$FZ/out/sel.json" "$FL"
done

# ================================================================ sb-test
hd=sb-test
# a frozen study (tests/fixtures/guard/lib.sh), copied afresh (mtimes kept) for each case
# that changes it; the guard refuses (1) before anything is written, so nothing may appear
# in the study directory (the ledger, -o) and an existing ledger stays byte for byte
mkstudy "$W/st0" >/dev/null 2>&1
[ -f "$W/st0/selection.json" ]
t_result $? "fixtures: mkstudy froze a study for sb-test"
ST=$W/st
fresh() { rm -rf "$ST"; cp -a "$W/st0" "$ST"; }
fresh
# stt NAME CODES NEEDLE SELECTION [RUNS_DIR...]: into $ST/test, data $ST/data
stt() {
	local name=$1 codes=$2 needle=$3 sel=$4
	shift 4
	[ $# -gt 0 ] || set -- "$ST/runs"
	hc "$hd: $name" "$codes" "$needle" "$ST" sb-test -q -s "$sel" -d "$ST/data" -o "$ST/test" "$@"
}
mkfifo "$W/st_fifo"
: >"$ST/s_empty.json"
stt "selection empty" 1 "s_empty.json" "$ST/s_empty.json"
stt "selection missing" 1 "$ST/nosuch.json" "$ST/nosuch.json"
stt "selection a directory" 1 "$ST/runs" "$ST/runs"
TO=5 stt "selection a FIFO without a writer" 1 "st_fifo" "$W/st_fifo"
POS='selection-exists'
stt "selection /dev/zero (over the 256 MiB limit)" 1 "/dev/zero" /dev/zero
garbage 3000 "$ST/s_garbage.json"
POS='selection-format'
stt "selection binary garbage" 1 "s_garbage.json" "$ST/s_garbage.json"
SEL=$ST/selection.json
s=$(stat -c %s "$SEL")
for o in 1 9 $((s / 4)) $((s / 2)) $((3 * s / 4)) $((s - 2)); do
	cut_to "$SEL" "$o" "$ST/s_cut.json"
	POS='selection-format'
	stt "selection cut at byte $o of $s" 1 "s_cut.json" "$ST/s_cut.json"
done
{ printf '{"pad":"'; tenmb; printf '",'; tail -c +2 "$SEL"; } >"$ST/s_10mb.json"
stt "selection with a 10 MB member (the hash differs)" 1 "s_10mb.json" "$ST/s_10mb.json"
rm -f "$ST/s_10mb.json"
awk 'BEGIN { s = ""; for (i = 0; i < 100000; i++) s = s "[" ; print s }' >"$ST/s_deep.json"
POS='selection-format'
stt "selection nested 100000 deep" 1 "s_deep.json" "$ST/s_deep.json"
stsel() { # name sed-expression: the selection edited (not resealed: its hash no longer holds)
	sed -E "$2" "$SEL" >"$ST/s_$1.json"
	cmp -s "$SEL" "$ST/s_$1.json" && { t_result 1 "$hd: selection $1: the edit changed nothing"; return; }
	stt "selection $1" 1 "s_$1.json" "$ST/s_$1.json"
}
stsel dup_key '0,/"kind": /s//"kind": "x", "kind": /'
stsel nul '0,/"freeze.selection"/s//"freeze.selection\\u0000x"/'
stsel surrogate '0,/"freeze.selection"/s//"freeze.selection\\udc00"/'
stsel utf8 "0,/\"freeze.selection\"/s//\"freeze.selection$(printf '\xc0\xaf')\"/"
stsel kind_num '0,/"freeze.selection"/s//7/'
stsel schema_str '0,/"schema": 1/s//"schema": "1"/'
for v in 1e999 -0 9223372036854775808 '"x"' null -1e999; do
	stsel "frozen_at_unix_s_$v" "0,/\"frozen_at_unix_s\": [0-9.]+/s//\"frozen_at_unix_s\": $v/"
done
stsel sha256_num '$,/"sha256": "[0-9a-f]+"/s//"sha256": 7/'
for v in '[]' '{}' null '"x"' 1e999 true; do
	printf '%s\n' "$v" >"$ST/s_top.json"
	POS='selection-format'
	stt "selection that is $v" 1 "s_top.json" "$ST/s_top.json"
done
# valid JSON of the wrong structure, resealed (the hash holds): refused by a later check,
# never read
if command -v python3 >/dev/null; then
	reseal() { # name python-statement
		cp "$SEL" "$ST/r_$1.json"
		reseal_selection "$ST/r_$1.json" "$2"
		stt "selection resealed: $1" 1 "r_$1.json" "$ST/r_$1.json"
	}
	reseal "validation_logs an object" 'd["validation_logs"] = {}'
	reseal "validation_logs empty" 'd["validation_logs"] = []'
	reseal "a log path a number" 'd["validation_logs"][0]["path"] = 7'
	rsl() { cp "$SEL" "$ST/r_x.json"; reseal_selection "$ST/r_x.json" "$2"; POS=$3; stt "selection resealed: $1" 1 "$4" "$ST/r_x.json"; }
	# a log path that names no log: refused naming the path it resolves to
	rsl "a log path that is empty" 'd["validation_logs"][0]["path"] = ""' log-present "$ST/"
	rsl "a log path outside the study" 'd["validation_logs"][0]["path"] = "../../../../etc/passwd"' log-hash /etc/passwd
	reseal "a log sha256 of 1e999" 'd["validation_logs"][0]["sha256"] = float("1e300") * 10'
	reseal "test_plan an object" 'd["test_plan"] = {}'
	reseal "test_plan null" 'd["test_plan"] = None'
	reseal "a test_plan cell_id that escapes RUNS_DIR" 'd["test_plan"][0]["cell_id"] = "../../x"'
	reseal "a test_plan epochs of 2^63" 'd["test_plan"][0]["epochs"] = 2**63'
	reseal "cells missing" 'd.pop("cells")'
	reseal "rule a string" 'd["rule"] = "topk_mean_val_acc"'
	reseal "rule.patience a string" 'd["rule"]["patience"] = "5"'
	reseal "rule.patience 2^64" 'd["rule"]["patience"] = 2**64'
	reseal "selected a list" 'd["selected"] = []'
	reseal "frozen_at_unix_s -1" 'd["frozen_at_unix_s"] = -1'
	reseal "frozen_at_unix_s 1e300" 'd["frozen_at_unix_s"] = 1e300'
	reseal "schema 2" 'd["schema"] = 2'
	reseal "status of rule m3 on a topk selection" 'd["status"] = "M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED"'
	reseal "switch_map a number" 'd["switch_map"] = 7'
fi
# the ledger next to the selection: damaged in each way, left as it was
LG=$ST/selection.reads.ndjson
ledger() { # name codes needle  (the ledger already written as the case wants)
	SAME=$LG
	stt "ledger $1" "$2" "$3" "$SEL"
	fresh
}
rec='{"kind":"test.read","v":1,"status":"started","read":1,"selection_sha256":"0000000000000000000000000000000000000000000000000000000000000000","argv":["sb-test"],"time":"t","out_dir":"o"}'
garbage 2000 "$LG"
POS='single-read'
ledger "binary garbage" 1 "selection.reads.ndjson:1"
for o in 5 30 $((${#rec} - 1)); do
	printf '%s' "${rec:0:$o}" >"$LG"
	POS='single-read'
	ledger "cut at byte $o (one earlier read)" 1 "selection.reads.ndjson:1"
done
{ printf '%s\n' "$rec"; printf '{"kind":"test.read","pad":"'; tenmb; printf '"\n'; } >"$LG"
ledger "a 10 MB line, unterminated" 1 "selection.reads.ndjson:2"
awk 'BEGIN { s = ""; for (i = 0; i < 100000; i++) s = s "[" ; print s }' >"$LG"
ledger "nested 100000 deep" 1 "selection.reads.ndjson:1"
printf '%s\n' "${rec/\"v\":1/\"v\":1,\"v\":2}" >"$LG"
ledger "a duplicate key" 1 "selection.reads.ndjson:1"
printf '%s\n' "${rec/\"o\"/\"o\\u0000x\"}" >"$LG"
ledger "an escaped NUL" 1 "selection.reads.ndjson:1"
printf '%s\n' "${rec/\"o\"/\"o$'\xff'\"}" >"$LG"
ledger "invalid UTF-8" 1 "selection.reads.ndjson:1"
printf '%s\n' '[1,2]' "$rec" >"$LG"
# a line sb-test would not write (not a test.read record) is damage, named by its line; the
# fields sb-test does not count on are passed over: the earlier read is found all the same
# (the refusal names the selection)
POS='single-read'
ledger "an array, then an earlier read" 1 "selection.reads.ndjson"
for v in 1e999 -0 9223372036854775808 '"1"' null; do
	printf '%s\n' "${rec/\"read\":1/\"read\":$v}" >"$LG"
	POS='single-read'
	ledger "read=$v (an earlier read all the same)" 1 "selection.json"
done
rm -f "$LG"; mkdir "$LG"
stt "ledger a directory" "1 4" "selection.reads.ndjson" "$SEL"
fresh; mkfifo "$LG"
TO=5 stt "ledger a FIFO without a writer" "1 4" "selection.reads.ndjson" "$SEL"
fresh
# RUNS_DIR and what is in it
stt "RUNS_DIR missing" "1 4" "$W/nosuch" "$SEL" "$W/nosuch"
stt "RUNS_DIR a file" "1 4" "selection.json" "$SEL" "$SEL"
c0=$(sed -n 's/.*"cell_id": "\([^"]*topk_softmax_025[^"]*\)".*/\1/p' "$SEL" | head -n 1)
L0=$ST/runs/$c0/val.ndjson
for what in fifo dir garbage cut; do
	fresh
	m=$(stat -c %y "$L0")
	case $what in
	fifo) rm "$L0"; mkfifo "$L0" ;;
	dir) rm "$L0"; mkdir "$L0" ;;
	garbage) garbage 500 "$L0" ;;
	cut) cut_to "$W/st0/runs/$c0/val.ndjson" 100 "$L0" ;;
	esac
	touch -h -d "$m" "$L0"
	TO=5 stt "a listed log replaced by a $what (its old mtime)" 1 "$c0/val.ndjson" "$SEL"
done
fresh
mkdir -p "$ST/runs/extra.cell"
mkfifo "$ST/runs/extra.cell/val.ndjson"
TO=5 stt "an unlisted log that is a FIFO (newer than the freeze)" 1 "extra.cell/val.ndjson" "$SEL"
CJ=$ST/runs/$c0/cell.json
for what in fifo dir garbage empty 10mb dup nul; do
	fresh
	case $what in
	fifo) rm "$CJ"; mkfifo "$CJ" ;;
	dir) rm "$CJ"; mkdir "$CJ" ;;
	garbage) garbage 500 "$CJ" ;;
	empty) : >"$CJ" ;;
	10mb) { printf '{"pad":"'; tenmb; printf '"}\n'; } >"$CJ" ;;
	dup) sed -i 's/"seed":0/"seed":0,"seed":1/' "$CJ" ;;
	nul) sed -i 's/"task":"guardtask"/"task":"guardtask\\u0000x"/' "$CJ" ;;
	esac
	TO=5 stt "a planned cell's cell.json: $what" "1 3 4" "$c0/cell.json" "$SEL"
done
CK=$ST/runs/$c0/epoch-003.safetensors
for what in fifo dir empty garbage; do
	fresh
	case $what in
	fifo) rm "$CK"; mkfifo "$CK" ;;
	dir) rm "$CK"; mkdir "$CK" ;;
	empty) : >"$CK" ;;
	garbage) garbage 500 "$CK" ;;
	esac
	TO=5 stt "a planned checkpoint: $what" "1 3 4" "$c0/epoch-003.safetensors" "$SEL"
done
# -d and -o (checked after the guard passes, before the read is recorded)
fresh
hc "$hd: -d missing" 4 "$W/nosuch" "$ST" sb-test -q -s "$SEL" -d "$W/nosuch" -o "$ST/test" "$ST/runs"
hc "$hd: -d a file" 4 "selection.json" "$ST" sb-test -q -s "$SEL" -d "$SEL" -o "$ST/test" "$ST/runs"
hc "$hd: -d ''" "2 4" "" "$ST" sb-test -q -s "$SEL" -d "" -o "$ST/test" "$ST/runs"
for what in dir fifo empty; do
	fresh
	T0=$ST/data/guardtask/test.safetensors
	case $what in
	dir) rm "$T0"; mkdir "$T0" ;;
	fifo) rm "$T0"; mkfifo "$T0" ;;
	empty) : >"$T0" ;;
	esac
	# an empty test file is a regular file: found unreadable only by the read, after 'started'
	[ $what = empty ] && continue
	TO=5 hc "$hd: -d: the test file a $what" 4 "test.safetensors" "$ST" sb-test -q -s "$SEL" -d "$ST/data" -o "$ST/test" "$ST/runs"
done
fresh
hc "$hd: -o a file" 4 "selection.json" "$ST" sb-test -q -s "$SEL" -d "$ST/data" -o "$SEL" "$ST/runs"
hc "$hd: -o under a file" 4 "selection.json" "$ST" sb-test -q -s "$SEL" -d "$ST/data" -o "$SEL/t" "$ST/runs"
mkdir -p "$ST/t2"; : >"$ST/t2/test.ndjson"
hc "$hd: -o holds a test.ndjson (output-fresh)" 1 "test.ndjson" "$ST" sb-test -q -s "$SEL" -d "$ST/data" -o "$ST/t2" "$ST/runs"
for opt in "-j -1" "-j 18446744073709551616" "--device nope" "--reread ''"; do
	eval "hc \"\$hd: option \$opt\" 2 \"\" \"\$ST\" sb-test -q -s \"\$SEL\" -d \"\$ST/data\" -o \"\$ST/test\" $opt \"\$ST/runs\""
done
fresh

fi # part b

summary=""
for p in "${!per_prog[@]}"; do summary="$summary $p=${per_prog[$p]} ($((${per_ms[$p]} / 1000)) s)"; done
echo "# cases per program${SB_HOSTILE_PART:+ (part $SB_HOSTILE_PART)}:$summary; $((SECONDS - t0)) s with $BIN"
t_done
