#!/usr/bin/env bash
# The test read once made is not lost or repeated by accident: newer timestamps alone (a
# touched or copied selection, a touched test file) leave the read standing; a re-read the
# guard refuses puts the previous read back; and a cell trained again after the freeze keeps
# the run the selection cites (runs.superseded/).
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"

pmake pt >"$T/ref.log" 2>&1
t_result $? "reference run"
M=$T/out/pt/main
ledger=$M/selection.reads.ndjson
reads() { grep -c '"kind":"test.read"' "$ledger"; }
tsha=$(sha256sum <"$M/test/test.ndjson")
[ "$(reads)" = 1 ]; t_result $? "one read in the ledger ($(reads))"

# a touched selection (same content): the read stands, nothing moved, no second read
sleep 1
touch "$M/selection.json"
reset_calls
pmake pt >"$T/touch.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(ncalls sb-test)" = 0 ] && [ "$(reads)" = 1 ] && ! ls -d "$M"/test.superseded.* >/dev/null 2>&1 &&
	[ "$(sha256sum <"$M/test/test.ndjson")" = "$tsha" ] && grep -q "it stands" "$T/touch.log"
t_result $? "a touched selection: the read stands (exit $rc, sb-test runs $(ncalls sb-test), reads $(reads))"
reset_calls
pmake pt >"$T/again.log" 2>&1
[ "$(ncalls sb-test)" = 0 ] && ! grep -q "it stands" "$T/again.log"
t_result $? "and the next make is quiet about it (timestamps settled)"

# a task of the block that the read did not read (not selected): its test file is not the
# read's to match; here t_b is taken out of the sealed read's test_files
cp -p "$M/test/test.ndjson" "$T/tn.orig" && cp -p "$M/test/test.ndjson.sha256" "$T/tnsha.orig"
sed -i 's/,{"task":"t_b","path":"[^"]*","sha256":"[0-9a-f]*"}//; s/{"task":"t_b","path":"[^"]*","sha256":"[0-9a-f]*"},//' "$M/test/test.ndjson"
(cd "$M/test" && sha256sum test.ndjson >test.ndjson.sha256)
sleep 1
touch "$M/selection.json" "$T/data/t_b/test.safetensors"
reset_calls
pmake pt >"$T/unsel.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(ncalls sb-test)" = 0 ] && ! grep -q '"task":"t_b"' "$M/test/test.ndjson" && grep -q "it stands" "$T/unsel.log"
t_result $? "a task the read did not read: its test file does not make the read stale (exit $rc, sb-test runs $(ncalls sb-test))"
cp -p "$T/tn.orig" "$M/test/test.ndjson" && cp -p "$T/tnsha.orig" "$M/test/test.ndjson.sha256"
touch "$M/test/test.ndjson"

# a touched test file (same content): the same
sleep 1
touch "$T/data/t_a/test.safetensors"
reset_calls
pmake pt >"$T/tf.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(ncalls sb-test)" = 0 ] && [ "$(reads)" = 1 ] && ! ls -d "$M"/test.superseded.* >/dev/null 2>&1
t_result $? "a touched test file: the read stands (exit $rc, sb-test runs $(ncalls sb-test))"

# a test file whose content changed: not the read's any more; refused without RETEST,
# naming why, and nothing moved
cp "$T/data/t_a/test.safetensors" "$T/tf.orig"
cp "$T/data/t_a/test.safetensors.sha256" "$T/tf.sha.orig"
echo more >>"$T/data/t_a/test.safetensors"
(cd "$T/data/t_a" && sha256sum test.safetensors >test.safetensors.sha256)
reset_calls
pmake pt >"$T/tfc.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "is not the sealed read of this selection and these test files" "$T/tfc.log" &&
	[ "$(ncalls sb-test)" = 0 ] && [ -f "$M/test/test.ndjson" ] && ! ls -d "$M"/test.superseded.* >/dev/null 2>&1
t_result $? "a changed test file: refused before sb-test, the read in place (exit $rc)"
cp "$T/tf.orig" "$T/data/t_a/test.safetensors"
cp "$T/tf.sha.orig" "$T/data/t_a/test.safetensors.sha256"

# RETEST asked for, but the guard refuses (here: a log hash the selection records, forged
# and the file resealed): the previous read is put back
cp -p "$M/selection.json" "$T/sel.orig" && cp -p "$M/selection.json.sha256" "$T/selsha.orig"
sleep 1
sed -i 's/"sha256":"[0-9a-f]\{64\}"/"sha256":"0000000000000000000000000000000000000000000000000000000000000000"/' "$M/selection.json"
(cd "$M" && sha256sum selection.json >selection.json.sha256)
reset_calls
pmake pt RETEST="a refused re-read" >"$T/ret.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ "$(ncalls sb-test)" = 1 ] && grep -q "stopped before the read was recorded; the previous read is back" "$T/ret.log" &&
	[ "$(sha256sum <"$M/test/test.ndjson")" = "$tsha" ] && ! ls -d "$M"/test.superseded.* >/dev/null 2>&1
t_result $? "a re-read refused by the guard: the previous read is back in test/ (exit $rc)"
cp -p "$T/sel.orig" "$M/selection.json" && cp -p "$T/selsha.orig" "$M/selection.json.sha256"

# a read killed outright (SIGKILL) leaves sb-test's temporary output; the read asked for
# again (RETEST) starts by removing it
printf 'half' >"$M/test/.test.ndjson.tmp.Ab12Cd"
rm -f "$M/test/test.ndjson" "$M/test/test.ndjson.sha256"
pmake pt RETEST="the read was killed" >"$T/killed.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ -f "$M/test/test.ndjson" ] && [ -z "$(find "$M/test" -name '.*.tmp.*')" ]
t_result $? "a killed read's temporary file is removed by the next read (exit $rc: $(find "$M/test" -name '.*.tmp.*'))"

# a dataset changed under finished cells fails them (FAILED); restored with its old time,
# make finds them up to date and their FAILED no longer applies: removed, the grid finishes
cp -p "$T/data/t_b/pool.safetensors" "$T/pool.orig"
sleep 1
printf 'x' | dd of="$T/data/t_b/pool.safetensors" bs=1 seek=100 conv=notrunc 2>/dev/null
pmake pt >"$T/bad.log" 2>&1
nf=$(find "$M/cells" -name FAILED | wc -l)
# the wrong content given the old time back: still FAILED (the pool does not hash as recorded)
touch -r "$T/pool.orig" "$T/data/t_b/pool.safetensors"
pmake pt >"$T/badtime.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ "$(find "$M/cells" -name FAILED | wc -l)" = "$nf" ]
t_result $? "the damaged pool with its old time: the FAILED stay (exit $rc, $(find "$M/cells" -name FAILED | wc -l) of $nf)"
cp -p "$T/pool.orig" "$T/data/t_b/pool.safetensors"
pmake pt >"$T/restored.log" 2>&1
rc=$?
[ "$nf" -gt 0 ] && [ $rc -eq 0 ] && [ "$(find "$M/cells" -name FAILED | wc -l)" = 0 ] &&
	grep -q "no longer applies: removed" "$T/restored.log" && grep -q "all 16 cells trained and evaluated" "$T/restored.log"
t_result $? "FAILED cells whose input was restored: up to date, their FAILED removed, exit $rc ($nf FAILED before)"

# a cell trained again after the freeze (a changed learning rate for one method): its old
# run is kept, not deleted
rm -rf "$T/out"
pmake pt >"$T/ref2.log" 2>&1
old=$(readlink "$M/cells/t_a.sparsemax.s0.plain.compact.e3/run")
old=${old#../../runs/}
sed -i '/^block main/a set when method=sparsemax lr=0.002' "$PT_GRID"
pmake pt >"$T/lr.log" 2>&1
new=$(readlink "$M/cells/t_a.sparsemax.s0.plain.compact.e3/run")
new=${new#../../runs/}
kept=$(ls -d "$M/runs.superseded/$old".* 2>/dev/null | head -n 1)
[ -n "$old" ] && [ "$new" != "$old" ] && [ -n "$kept" ] && [ -f "$kept/train.ndjson" ] && [ ! -e "$M/runs/$old" ]
t_result $? "a cell retrained after the freeze keeps its old run in runs.superseded ($old -> $new; kept: ${kept##*/})"
t_done
