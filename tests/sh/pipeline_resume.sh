#!/usr/bin/env bash
# An interrupted grid resumes: make -j2 is killed with SIGKILL (the whole process
# group: make, the recipes, the trainers) in the middle of cells; the next make
# does not redo finished cells and does not trust half-written ones: nothing is
# published before it is complete, and an interrupted cell resumes from its last
# epoch whose checkpoint still hashes as recorded (RESUME=0: set aside, redone).
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
# meanwhile a second make on the same tree refuses instead of racing the first
pmake pt >"$T/second.log" 2>&1
rc2=$?
kill -KILL -- -"$pg" 2>/dev/null
{ wait "$pg"; } 2>/dev/null
unset STUB_SLEEP
[ $ready = 1 ]; t_result $? "the run was killed mid-grid ($n cells trained, $w in training)"
[ $rc2 -ne 0 ] && grep -q 'another make is working on' "$T/second.log"
t_result $? "a second make during the run refuses (exit $rc2: $(tail -n 1 "$T/second.log"))"
done_before=$(find "$T/out/pt" -path '*/cells/*' -name train.ndjson -type l -xtype f | wc -l)
half=$(find "$T/out/pt" -path '*/cells/*/work' -type d | wc -l)
[ "$half" -ge 1 ]; t_result $? "half-written cells were left behind ($half work directories)"

# not trusting a half-written attempt: damage the newest checkpoint of one
# interrupted cell; sb-train must resume from the epoch before it
victim=$(find "$T/out/pt" -path '*/cells/*/work/*/epoch-*.safetensors' | sort | tail -n 1)
vid=$(basename "$(dirname "$victim")")
ve=$(basename "$victim" .safetensors); ve=$((10#${ve#epoch-}))
echo "torn" >>"$victim"

reset_calls
pmake pt >"$T/resume.log" 2>&1
t_result $? "make pt after the kill finishes the grid ($(tail -n 1 "$T/resume.log"))"
[ "$(ncalls sb-train)" -eq $((16 - done_before)) ]
t_result $? "finished cells were not trained again ($(ncalls sb-train) calls = 16 - $done_before finished)"
grep -q 'resuming an interrupted attempt' "$T/resume.log"
t_result $? "interrupted cells resume"
grep -q "^sb-train-resume $vid $((ve - 1))\$" "$STUB_LOG"
t_result $? "from their last intact epoch: the damaged epoch $ve of $vid was redone ($(grep "$vid" "$STUB_LOG" | grep resume))"
[ "$(digest)" = "$ref" ]; t_result $? "the resumed results equal the uninterrupted run's"
[ "$(ls "$T/out/pt/main/runs" | wc -l)" -eq 12 ] && [ -z "$(find "$T/out/pt" -name work -type d)" ]
t_result $? "no stray run or work directories"
reset_calls
pmake pt >"$T/again.log" 2>&1
[ ! -s "$STUB_LOG" ]; t_result $? "a further make pt is a no-op"

# RESUME=0: an interrupted attempt is set aside and the cell starts afresh
c="$T/out/pt/budget/cells/t_a.softmax.s0.plain.compact.e4"
rm -f "$c/train.ndjson" "$c/val.ndjson"
mkdir -p "$c/work/x" && cp "$c/cell.json" "$c/work/.cell.json" && echo partial >"$c/work/x/train.ndjson"
reset_calls
pmake pt RESUME=0 >"$T/noresume.log" 2>&1
t_result $? "RESUME=0 run"
grep -q 'set aside an unfinished attempt' "$T/noresume.log" && [ -f "$c"/attempts/*/work/x/train.ndjson ]
t_result $? "RESUME=0 sets the attempt aside, keeping it"
[ "$(digest)" = "$ref" ]; t_result $? "and the results are unchanged"

# SIGKILL between sb-freeze's write of selection.json and its seal: the next make freezes
# again (a selection without its sidecar was never sealed, so never read) and ends with the
# uninterrupted run's results, instead of every later make refusing the unsealed selection
rm -rf "$T/out" "$T/ks" && cp -r "$FIX/stubs" "$T/ks" && mv "$T/ks/sb-freeze" "$T/ks/sb-freeze.real"
cat >"$T/ks/sb-freeze" <<'EOS'
#!/usr/bin/env bash
"$(dirname "$0")/sb-freeze.real" "$@" || exit
case " $* " in *" -o "*) kill -KILL 0 ;; esac
EOS
chmod +x "$T/ks/sb-freeze"
{ setsid make -C "$TOP" --no-print-directory EXTRA_GRIDS="$PT_GRID" SB_OUT="$T/out" SB_DATA="$T/data" \
	SB_BIN="$T/ks" SB_MIRRORS= pt >"$T/fkill.log" 2>&1; } 2>/dev/null
[ -f "$T/out/pt/main/selection.json" ] && [ ! -e "$T/out/pt/main/selection.json.sha256" ]
t_result $? "killed between the freeze's write and its seal"
pmake pt >"$T/fresume.log" 2>&1
t_result $? "the next make finishes ($(grep -m1 'pipeline:' "$T/fresume.log"))"
[ "$(digest)" = "$ref" ]; t_result $? "with the uninterrupted run's results"
t_done
