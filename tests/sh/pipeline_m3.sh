#!/usr/bin/env bash
# PROTOCOL A8 M3 through make, with the real programs on tiny generated datasets
# (tests/fixtures/m3/gen_data.py: 60 pool / 30 test images of 8x8, 3 epochs of batch 16):
# a trajectory grid (sb-a8 m1), a switching grid (sb-a8 m2), then the confirmation chain as
# make confirmation runs it (pipelines/grids/confirmation.grid, reduced): confirm_base ->
# sb-a8 m3map writes the switch map (checked against NumPy) -> confirm_switch, which awaited
# it, runs with the map's epochs -> sb-freeze --rule m3_confirmation -> sb-test -> sb-a8 m3 ->
# the report; in one make. Also: a second make is a no-op; make -n confirmation on a fresh
# output tree runs nothing; make confirmation without the extension's records stops first.
. "$(dirname "$0")/../shlib.sh"
cd "$TOP"
for p in sb-train sb-eval sb-freeze sb-test sb-a8; do
	[ -x "bin/$p" ] || make --no-print-directory CUDA=0 "bin/$p" >/dev/null 2>&1
done
/usr/bin/python3 tests/fixtures/m3/gen_data.py "$T/data" da db ca
G1="$T/m3t.grid" G2="$T/m3s.grid" G3="$T/m3c.grid"
cat >"$G1" <<'GRID'
set batch=16 lr=0.001 weight_decay=0.0001 clip=5 dropout=0.1 val_fraction=0.2 schedule=constant limit=0
block trajectory
task    da db
method  softmax topk_softmax_025
seed    0
arch    plain local_hybrid
tier    compact
epochs  3
stage   a8 analysis=m1 switch_epochs=m3t-switching-epochs.inc
GRID
cat >"$G2" <<'GRID'
set batch=16 lr=0.001 weight_decay=0.0001 clip=5 dropout=0.1 val_fraction=0.2 schedule=constant limit=0
block switching
task    da db
method  softmax mechanistic_switch median_switch early_accuracy_switch entropy_switch
seed    5
arch    plain
tier    compact
epochs  3
include m3t-switching-epochs.inc
stage   a8 analysis=m2
GRID
# the confirmation grid, reduced: one task, 2 seeds, 2 architectures, one tier, 3 epochs
sed -e 's/^task .*/task    ca/' -e 's/^seed .*/seed    10 11/' -e 's/^tier .*/tier    compact/' -e 's/^epochs .*/epochs  3/' \
	-e 's/^set batch=256/set batch=16/' -e 's/confirmation-switch-map.inc/m3c-switch-map.inc/g' \
	-e 's/expect_cells=720/expect_cells=16/' -e 's#trajectory=extension/trajectory m2=switching/switching#trajectory=m3t/trajectory m2=m3s/switching#' \
	pipelines/grids/confirmation.grid >"$G3"
grep -q 'await   m3c-switch-map.inc' "$G3" && grep -q 'expect_cells=16' "$G3" && grep -q 'trajectory=m3t/trajectory' "$G3"
t_result $? "the reduced confirmation grid is pipelines/grids/confirmation.grid with smaller axes"
m3make() {
	make -C "$TOP" --no-print-directory EXTRA_GRIDS="$G1 $G2 $G3" SB_OUT="$T/out" SB_DATA="$T/data" \
		SB_BIN="$TOP/bin" SB_MIRRORS= SB_JOBS=2 "$@"
}
t0=$SECONDS
m3make m3t >"$T/m3t.log" 2>&1
t_result $? "make m3t: the trajectory grid and its m1 ($(tail -n 2 "$T/m3t.log" | tr '\n' ' '))"
m3make m3s >"$T/m3s.log" 2>&1
t_result $? "make m3s: the switching grid and its m2 ($(tail -n 2 "$T/m3s.log" | tr '\n' ' '))"
# before the confirmation: its grid waits for the switch map
m3make m3c-expand >/dev/null 2>&1
grep -q '^m3c.WAITING := confirm_switch' "$T/out/m3c/.grid/cells.mk" && ! grep -q '"block":"confirm_switch"' "$T/out/m3c/.grid/cells.ndjson"
t_result $? "without the switch map, confirm_switch waits (no cells)"
m3make m3c >"$T/m3c.log" 2>&1
rc=$?
t_result $rc "make m3c: base -> m3map -> switch -> freeze -> test -> m3 in one make (exit $rc; $(( SECONDS - t0 )) s so far)" \
	"$(tail -n 5 "$T/m3c.log" | tr '\n' ' ')"
MAP="$T/m3c-switch-map.inc"
C="$T/out/m3c"
[ -f "$MAP" ] && grep -q '^method mechanistic_switch [a-z_]*_switch$' "$MAP" && [ "$(grep -c '^set when task=ca ' "$MAP")" = 4 ]
t_result $? "the switch map beside the grid file: the method line and 2 groups x 2 methods"
/usr/bin/python3 tests/golden/a8/m3map_check.py "$T/out/m3t/trajectory/a8/a8.ndjson" "$T/out/m3s/switching/a8/a8.ndjson" "$MAP" \
	"$C"/confirm_base/cells/*/val.ndjson >"$T/np.out" 2>&1
t_result $? "the map agrees with NumPy (fit on all discovery groups, predict the confirmation groups) ($(tr '\n' ' ' <"$T/np.out"))"
sha=$(sha256sum <"$MAP" | cut -c1-64)
grep -q "\"switch_map_sha256\":\"$sha\"" "$C/confirm_base/a8/a8.ndjson"
t_result $? "sb-a8 m3map recorded the map's SHA-256"
simple=$(sed -n 's/^method mechanistic_switch //p' "$MAP")
python3 - "$C" "$MAP" <<'PY'
import glob, json, sys
C, M = sys.argv[1], sys.argv[2]
want = {}
for l in open(M):
    if l.startswith("set "):
        f = dict(kv.split("=") for kv in l.split()[2:])
        want[(f["task"], f["arch"], f["tier"], f["method"])] = int(f["switch_epoch"])
n = 0
for cj in glob.glob(C + "/confirm_switch/cells/*/cell.json"):
    c = json.load(open(cj))
    assert c["switch_epoch"] == want[(c["task"], c["arch"], c["tier"], c["method"])], cj
    n += 1
assert n == 8, n
sel = json.load(open(C + "/confirm_switch/selection.json"))
assert sel["status"] == "M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED", (sel["status"], sel["status_reasons"])
assert sel["rule"]["planned_cells"] == 16 and len(sel["test_plan"]) == 16 and not sel["test_plan_missing"]
assert len({(p["method"]) for p in sel["test_plan"]}) == 4
tc = [json.loads(l) for l in open(C + "/confirm_switch/test/test.ndjson") if '"test.cell"' in l]
assert len(tc) == 16, len(tc)
PY
t_result $? "the 8 switching cells ran with the map's epochs ($simple); the selection is authorised with 16 planned cells; 16 test cells read"
R="$C/report.md"
grep -q 'M3 switch map: SWITCH_MAP' "$R" && grep -q 'M3 verdict: \(CONFIRMED\|NOT_CONFIRMED\)' "$R" && grep -q 'Test read: `confirm_switch/test/test.ndjson`' "$R" &&
	grep -q '^- the test read requires freeze status M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED' "$R"
t_result $? "the report: the switch map, the test read, the M3 verdict under the criteria"
tail -n 1 "$C/confirm_switch/a8/a8.ndjson" | grep -q '"analysis":"m3".*"units":4,'
t_result $? "sb-a8 m3: 4 units (2 archs x 2 seeds) ($(tail -n 1 "$C/confirm_switch/a8/a8.ndjson" | cut -c1-160))"
# a second make: nothing to do
before=$(stat -c %Y "$R" "$C/confirm_switch/test/test.ndjson" "$MAP" | tr '\n' ' ')
nruns=$(ls -d "$C"/*/runs/* | wc -l)
m3make m3c >"$T/m3c2.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(stat -c %Y "$R" "$C/confirm_switch/test/test.ndjson" "$MAP" | tr '\n' ' ')" = "$before" ] &&
	[ "$(ls -d "$C"/*/runs/* | wc -l)" = "$nruns" ] && ! grep -q 'train \|freeze \|test read ' "$T/m3c2.log"
t_result $? "a second make m3c is a no-op (exit $rc)" "$(tail -n 3 "$T/m3c2.log" | tr '\n' ' ')"
# the real grid: make -n on a fresh output tree runs nothing; without make extension's records it stops first
make -C "$TOP" --no-print-directory -n confirmation SB_OUT="$T/fresh" SB_DATA="$T/nodata" >"$T/n.log" 2>&1
rc=$?
[ $rc -eq 0 ] && [ ! -e "$T/fresh/confirmation/confirm_base/runs" ] && [ ! -e "$T/nodata" ] && grep -q '360 cells' "$T/n.log" &&
	grep -q 'stage.sh train .*emnist_balanced.softmax.s10' "$T/n.log" && [ ! -e pipelines/grids/confirmation-switch-map.inc ]
t_result $? "make -n confirmation (fresh tree): lists the 360 base cells, trains and fetches nothing (exit $rc)" "$(tail -n 3 "$T/n.log" | tr '\n' ' ')"
make -C "$TOP" --no-print-directory confirmation SB_OUT="$T/fresh" SB_DATA="$T/nodata" SB_BIN="$TOP/bin" >"$T/x.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q 'make extension' "$T/x.log" && [ ! -e "$T/fresh/confirmation/confirm_base/runs" ] && [ ! -e "$T/nodata" ]
t_result $? "make confirmation without the extension's a8 records stops before any cell (exit $rc)" "$(tail -n 2 "$T/x.log" | tr '\n' ' ')"
echo "# $(( SECONDS - t0 )) s"
t_done
