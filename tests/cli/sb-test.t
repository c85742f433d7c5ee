# sb-test: the command line and the guard's first checks. The attacks on a frozen
# study are in tests/sh/guard_attacks.sh, the proof that nothing is read in
# tests/sh/guard_noread.sh.

%%% --help: synopsis, checks, records, exit status, examples
$ sb-test --help
~ Usage: sb-test -s selection.json [-d DATA_DIR] [-o OUT_DIR] [--reread REASON]
~   selection-hash     its payload hash recomputes (nobody edited it)
~   freeze-status      (a selection of rule m3_confirmation) its status is exactly
~   switch-map-hash    (the same) the switch map it names still has the SHA-256 it froze
~ Exit status: 0 read and recorded; 1 refused by a check above (nothing read)
~ Examples:
!! empty

%%% no selection: usage error
$ sb-test runs
? 2
! sb-test: no selection given (-s selection.json)
! Try 'sb-test --help'

%%% at least one RUNS_DIR
$ sb-test -s sel.json
? 2
! no RUNS_DIR given

%%% --reread needs a reason
$ sb-test -s sel.json --reread '' runs
? 2
! --reread needs a non-empty reason

%%% --reread needs a reason: a blank one is none
$ sb-test -s sel.json --reread '  ' runs
? 2
! --reread needs a non-empty reason

%%% a missing selection is refused, naming the check
$ mkdir runs
$ sb-test -s sel.json runs
? 1
! sb-test: sel.json: refused by the guard (selection-exists): cannot read the selection: No such file or directory

%%% a selection that is not one
$ mkdir runs
$ echo '{"kind":"run.meta","v":1}' >sel.json
$ sb-test -s sel.json runs
? 1
! refused by the guard (selection-format): not a selection

%%% a frozen study passes the guard (the read then fails on the stand-in checkpoints)
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkstudy s
$ sb-test -q -s s/selection.json -d s/data -o s/out s/runs 2>err || test $? -ne 1
$ ! grep -q "refused by the guard" err

%%% a planned cell's cell.json edited after the freeze (its fields no longer hash to its cell_id): bad input, named, refused before the read is recorded
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkstudy s
$ c=$(ls -d s/runs/guardtask.softmax.s0.*)
$ sed -i 's/"limit":0,/"limit":0,"dropout":0.2,/' $c/cell.json
$ sb-test -q -s s/selection.json -d s/data -o s/out s/runs || { rc=$?; test ! -e s/selection.reads.ndjson && test ! -e s/out/test.ndjson || exit 99; exit $rc; }
? 3
! sb-test: s/runs/guardtask.softmax.s0.plain.compact.
! /cell.json: cell_id 'guardtask.softmax.s0.plain.compact.
! ' is not the one its fields hash to (guardtask.softmax.s0.plain.compact.
