#!/usr/bin/env bash
# An interrupted grid resumes: make -j2 is killed with SIGKILL (the whole process
# group: make, the recipes, the trainers) in the middle of cells; the next make
# redoes neither the finished cells nor trusts the half-written ones (their
# directories are set aside), and the results equal an uninterrupted run's.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/pipeline/lib.sh"

# reference: an uninterrupted run
pmake pt >"$T/ref.log" 2>&1
t_result $? "reference run"
ref=$(digest)
rm -rf "$T/out"
reset_calls

# the interrupted run: slow epochs, killed once at least 4 cells are trained and
# two are in the middle of training
export STUB_SLEEP=0.4
setsid bash -c 'exec "$@"' _ make -C "$TOP" --no-print-directory -j2 EXTRA_GRIDS="$PT_GRID" SB_OUT="$T/out" \
	SB_DATA="$T/data" SB_BIN="$FIX/stubs" SB_MIRRORS= pt >"$T/killed.log" 2>&1 &
pg=$!
ready=0
for _ in $(seq 1 300); do
	n=$(find "$T/out/pt/main/cells" -maxdepth 2 -name train.ndjson -type l -xtype f 2>/dev/null | wc -l)
	w=$(find "$T/out/pt" -path '*/cells/*/work/*/epoch-001.safetensors' 2>/dev/null | wc -l)
	if [ "$n" -ge 4 ] && [ "$w" -ge 1 ]; then ready=1; break; fi
	sleep 0.1
done
kill -KILL -- -"$pg" 2>/dev/null
wait "$pg" 2>/dev/null
unset STUB_SLEEP
[ $ready = 1 ]; t_result $? "the run was killed mid-grid ($n cells trained, $w in training)"
done_before=$(find "$T/out/pt" -path '*/cells/*' -name train.ndjson -type l -xtype f | wc -l)
half=$(find "$T/out/pt" -path '*/cells/*/work' -type d | wc -l)
[ "$half" -ge 1 ]; t_result $? "half-written cells were left behind ($half work directories)"
trained_before=$(ncalls sb-train)

# resume
reset_calls
pmake pt >"$T/resume.log" 2>&1
t_result $? "make pt after the kill finishes the grid ($(tail -n 1 "$T/resume.log"))"
[ "$(ncalls sb-train)" -eq $((16 - done_before)) ]
t_result $? "only unfinished cells were trained again ($(ncalls sb-train) = 16 - $done_before finished)"
grep -q 'set aside an unfinished attempt' "$T/resume.log"
t_result $? "half-written cells were set aside, not trusted"
n=$(find "$T/out/pt" -path '*/attempts/*/work' -type d | wc -l)
[ "$n" -eq "$half" ]; t_result $? "their records are kept under cells/KEY/attempts ($n)"
[ "$(digest)" = "$ref" ]; t_result $? "the resumed results equal the uninterrupted run's"
[ "$(ls "$T/out/pt/main/runs" | wc -l)" -eq 12 ]; t_result $? "no stray run directories"
reset_calls
pmake pt >"$T/again.log" 2>&1
[ ! -s "$STUB_LOG" ]; t_result $? "a further make pt is a no-op"
t_done
