#!/usr/bin/env bash
# make GRID-adopt FROM=DIR: the finished cells of another grid's tree that are the same
# cells (the same cell.json) are taken, verified, so that make trains only the others,
# and the results equal a run that trained every cell. A cell whose record was altered,
# or that was trained on another pool file, is refused (exit 3) and left to train.
# Stub stages; about 20 s.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"
# a smaller grid with 4 of pt.grid's cells (the same set lines: the same cell.json)
cat >"$T/sub.grid" <<'G'
set batch=256 lr=0.001 weight_decay=0.0001
set when task=t_b limit=100
block first
task    t_a t_b
method  softmax
seed    0..1
arch    plain
tier    compact
epochs  3
G
gmake() { # OUT make-args...
	local out=$1
	shift
	make -C "$TOP" --no-print-directory EXTRA_GRIDS="$PT_GRID $T/sub.grid" SB_OUT="$out" SB_DATA="$T/data" \
		SB_BIN="$FIX/stubs" SB_MIRRORS= "$@"
}

# the reference: pt trained whole
gmake "$T/ref" pt >"$T/ref.log" 2>&1
t_result $? "reference: make pt ($(tail -n 1 "$T/ref.log"))"
# (the block's results: report.md differs, as it says which cells were adopted)
ref=$(digest "$T/ref/pt/main")

gmake "$T/out" sub >"$T/sub.log" 2>&1
t_result $? "make sub: 4 cells ($(tail -n 1 "$T/sub.log"))"
# FROM: the whole output tree, which holds pt's own tree too (passed over)
gmake "$T/out" pt-expand >/dev/null 2>&1
gmake "$T/out" pt-adopt FROM="$T/out" >"$T/adopt.log" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "adopt pt: 4 of 16 cells taken from $T/out (0 had a run already, 12 not finished there or not the same cell, 0 refused)" "$T/adopt.log"
t_result $? "make pt-adopt FROM=out (the tree of both grids) takes sub's 4 cells (exit $rc: $(tail -n 1 "$T/adopt.log"))"
d=$T/out/pt/main/cells/t_a.softmax.s0.plain.compact.e3
[ -f "$d/ADOPTED" ] && grep -q "^from: $T/out/sub/first/cells/t_a.softmax.s0.plain.compact.e3$" "$d/ADOPTED" &&
	[ "$(readlink "$d/train.ndjson")" = "$(readlink "$T/out/sub/first/cells/t_a.softmax.s0.plain.compact.e3/train.ndjson")" ] &&
	[ "$(stat -c %i "$d/run/epoch-003.safetensors")" = "$(stat -c %i "$T/out/sub/first/runs/$(basename "$(readlink "$d/run")")/epoch-003.safetensors")" ]
t_result $? "an adopted cell: ADOPTED names its source, the same run id, its checkpoints hard-linked"

reset_calls
gmake "$T/out" pt >"$T/pt.log" 2>&1
t_result $? "make pt after the adoption ($(tail -n 1 "$T/pt.log"))"
[ "$(ncalls sb-train)" = 12 ] && [ "$(ncalls sb-eval)" = 12 ]
t_result $? "make pt trains and evaluates only the 12 other cells (sb-train $(ncalls sb-train), sb-eval $(ncalls sb-eval); 12 expected)"
[ "$(digest "$T/out/pt/main")" = "$ref" ]
t_result $? "its results equal the reference's, which trained all 16 (digest of the block: cells, selection, test read, statistics)"
grep -q "^Of these, 4 were trained by another grid and adopted (\`make pt-adopt\`; \`cells/KEY/ADOPTED\`), from: \`$T/out/sub\` (4)\.$" "$T/out/pt/report.md" &&
	[ "$(grep -c '^Of these' "$T/out/pt/report.md")" = 1 ]
t_result $? "the report says which cells were adopted, and from where ($(grep '^Of these' "$T/out/pt/report.md"))"
gmake "$T/out" pt-adopt FROM="$T/out/sub" >"$T/adopt2.log" 2>&1 &&
	grep -q "adopt pt: 0 of 16 cells taken from $T/out/sub (16 had a run already" "$T/adopt2.log"
t_result $? "adopting again takes nothing ($(tail -n 1 "$T/adopt2.log"))"

# refusals: an altered record (its sidecar no longer matches), and a run trained on another
# pool file (its record re-sealed, so only the recorded SHA-256 tells)
cp -a "$T/out/sub" "$T/bad"
rm -rf "$T/bad/.grid"
b=$T/bad/first/cells
echo ' ' >>"$b/t_a.softmax.s0.plain.compact.e3/val.ndjson"
tn=$b/t_b.softmax.s1.plain.compact.e3/train.ndjson
sed --follow-symlinks -i '1s/"sha256":"[0-9a-f]*"/"sha256":"'"$(printf '0%.0s' $(seq 64))"'"/' "$tn"
"$TOP/pipelines/stage.sh" seal "$tn"
gmake "$T/out2" pt-expand >/dev/null 2>&1
gmake "$T/out2" pt-adopt FROM="$T/bad/first" >"$T/adopt3.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "adopt pt: 2 of 16 cells taken from $T/bad/first (0 had a run already, 12 not finished there or not the same cell, 2 refused)" "$T/adopt3.log" &&
	grep -q "main/t_a.softmax.s0.plain.compact.e3: refused: .*val.ndjson: SHA-256 mismatch" "$T/adopt3.log" &&
	grep -q "main/t_b.softmax.s1.plain.compact.e3: refused: .*train.ndjson: made from a pool file with SHA-256 0000" "$T/adopt3.log" &&
	[ ! -e "$T/out2/pt/main/cells/t_a.softmax.s0.plain.compact.e3/train.ndjson" ] &&
	[ ! -e "$T/out2/pt/main/cells/t_b.softmax.s1.plain.compact.e3/train.ndjson" ] &&
	[ -z "$(find "$T/out2" -name '*.tmp')" ]
t_result $? "FROM a block's directory: an altered record and a run on another pool file are refused (exit $rc), the 2 others taken" "$(grep -v '^grid:' "$T/adopt3.log" | head -n 3 | tr '\n' ' ')"
reset_calls
gmake "$T/out2" pt >"$T/pt2.log" 2>&1 && [ "$(ncalls sb-train)" = 14 ] && [ "$(digest "$T/out2/pt/main")" = "$ref" ]
t_result $? "make pt then trains the 2 refused cells with the 12 others (sb-train $(ncalls sb-train)); results equal the reference's"

# not the same cell any more: the source's cell.json rewritten (its grid re-expanded with
# another lr) but not trained again, so its run is the old cell's; and a checkpoint edited
# and re-sealed (only train.ndjson's checkpoint_sha256 tells); both refused, and a cell
# adopted and then trained here again is no longer counted as adopted
cp -a "$T/out/sub" "$T/stale"
rm -rf "$T/stale/.grid"
b=$T/stale/first/cells
c=$b/t_a.softmax.s0.plain.compact.e3
sed -i 's/"lr":0.001,/"lr":0.002,/' "$c/cell.json"
ck=$(readlink -f "$b/t_b.softmax.s0.plain.compact.e3/run")/epoch-002.safetensors
rm -f "$ck" && echo edited >"$ck" && "$TOP/pipelines/stage.sh" seal "$ck"
sed 's/^set batch=256 lr=0.001 /set batch=256 lr=0.002 /' "$PT_GRID" >"$T/pt2.grid"
make -C "$TOP" --no-print-directory EXTRA_GRIDS="$PT_GRID $T/sub.grid $T/pt2.grid" SB_OUT="$T/out3" SB_DATA="$T/data" \
	SB_BIN="$FIX/stubs" SB_MIRRORS= pt2-expand >/dev/null 2>&1
cmp -s "$c/cell.json" "$T/out3/pt2/main/cells/t_a.softmax.s0.plain.compact.e3/cell.json"
t_result $? "the stale source cell.json is byte for byte the lr=0.002 grid's"
gmake "$T/out3" pt-expand >/dev/null 2>&1
make -C "$TOP" --no-print-directory EXTRA_GRIDS="$PT_GRID $T/sub.grid $T/pt2.grid" SB_OUT="$T/out3" SB_DATA="$T/data" \
	SB_BIN="$FIX/stubs" SB_MIRRORS= pt2-adopt FROM="$T/stale/first" >"$T/adopt5.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "adopt pt2: 0 of 16 cells taken from $T/stale/first (0 had a run already, 15 not finished there or not the same cell, 1 refused)" "$T/adopt5.log" &&
	grep -q "main/t_a.softmax.s0.plain.compact.e3: refused: .*was not made from this cell.json" "$T/adopt5.log" &&
	[ ! -e "$T/out3/pt2/main/cells/t_a.softmax.s0.plain.compact.e3/train.ndjson" ]
t_result $? "a source cell.json changed after its run (the same bytes as ours, another run) is refused (exit $rc)" "$(grep -v '^grid:' "$T/adopt5.log" | head -n 3 | tr '\n' ' ')"
gmake "$T/out3" pt-adopt FROM="$T/stale/first" >"$T/adopt6.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "adopt pt: 2 of 16 cells taken from $T/stale/first (0 had a run already, 13 not finished there or not the same cell, 1 refused)" "$T/adopt6.log" &&
	grep -q "main/t_b.softmax.s0.plain.compact.e3: refused: .*epoch-002.safetensors: SHA-256 [0-9a-f]*, train.ndjson records" "$T/adopt6.log" &&
	[ ! -e "$T/out3/pt/main/cells/t_b.softmax.s0.plain.compact.e3/train.ndjson" ]
t_result $? "a checkpoint edited and re-sealed is refused (exit $rc), the 2 intact cells taken" "$(grep -v '^grid:' "$T/adopt6.log" | head -n 3 | tr '\n' ' ')"
touch "$T/out3/pt/main/cells/t_b.softmax.s1.plain.compact.e3/cell.json"
gmake "$T/out3" pt >/dev/null 2>&1 && [ ! -e "$T/out3/pt/main/cells/t_b.softmax.s1.plain.compact.e3/ADOPTED" ] &&
	grep -q "^Of these, 1 were trained by another grid and adopted" "$T/out3/pt/report.md"
t_result $? "a cell adopted, then trained here again (its cell.json newer): not counted as adopted ($(grep '^Of these' "$T/out3/pt/report.md"))"

# a failure the source grid accepted (ACCEPT_FAILED=1) is not taken: the cell trains here
STUB_CRASH='t_a.softmax.s1' gmake "$T/acc" sub ACCEPT_FAILED=1 >"$T/acc.log" 2>&1
gmake "$T/out4" pt-expand >/dev/null 2>&1
gmake "$T/out4" pt-adopt FROM="$T/acc" >"$T/adopt7.log" 2>&1
rc=$?
[ "$(cat "$T/acc/sub/first/cells/t_a.softmax.s1.plain.compact.e3/OUTCOME" 2>/dev/null)" = failed:failed ] && [ $rc -eq 0 ] &&
	grep -q "adopt pt: 3 of 16 cells taken from $T/acc" "$T/adopt7.log" &&
	[ ! -e "$T/out4/pt/main/cells/t_a.softmax.s1.plain.compact.e3/train.ndjson" ]
t_result $? "a failure accepted in the source (ACCEPT_FAILED=1) is not taken, the 3 others are (exit $rc)" "$(grep -v '^grid:' "$T/adopt7.log" | head -n 3 | tr '\n' ' ')"

gmake "$T/out2" pt-adopt >"$T/adopt4.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "FROM=DIR is needed" "$T/adopt4.log"
t_result $? "without FROM: exit $rc, one line that says what is needed ($(grep FROM "$T/adopt4.log" | head -n 1))"
t_done
