# sb-a8: the command line and its refusals, which runs count (training status, finished
# evaluation, later run wins) and the linear-decay budgets; the analyses' arithmetic is tested
# in tests/unit/test_a8.c (verdict fixtures), tests/sh/a8_m3.sh and tests/sh/pipeline_a8.sh (the
# chain). Fixtures: tests/fixtures/a8/run.sh (one run's records), ld_grid.sh (a linear-decay grid).

%%% --help: synopsis, analyses, options, exit status
$ sb-a8 --help
~ Usage: sb-a8 m1|m2|bottomk|lineardecay|m3|m3map|n3a [--md FILE] [--switch-epochs FILE] [--seed N]
~   n3a          N3-A's inference
~ --switch-epochs FILE  (m1, m3map) the switch epochs
~   m3map        M3's switch map
~ Exit status: 0 computed (whatever the verdict)
!! empty

%%% no analysis: usage error
$ sb-a8
? 2
! sb-a8: no analysis given (m1, m2, bottomk, lineardecay, m3map, m3 or n3a)

%%% an unknown analysis
$ sb-a8 m4 x.ndjson
? 2
! sb-a8: unknown analysis 'm4'

%%% --switch-epochs belongs to m1 and m3map
$ sb-a8 m2 --switch-epochs s.inc x.ndjson
? 2
! --switch-epochs is an output of m1 and m3map only

%%% m3map needs the trajectory and switching records
$ sb-a8 m3map --trajectory t.ndjson x.ndjson
? 2
! m3map needs --trajectory

%%% --trajectory and --m2 belong to m3map
$ sb-a8 m3 --m2 m.ndjson x.ndjson
? 2
! --trajectory and --m2 are inputs of m3map only

%%% m3map: a missing trajectory file is an I/O error
$ echo '{"kind":"run.meta","v":1}' >x.ndjson
$ sb-a8 m3map --trajectory nosuch.ndjson --m2 x.ndjson x.ndjson
? 4
! nosuch.ndjson

%%% a missing file
$ sb-a8 bottomk nosuch.ndjson
? 4
! nosuch.ndjson

%%% a malformed record names file and line
$ printf '{"kind":"run.meta","v":1}\n{"kind":"eval.epoch","v":1,"task":"t"}\n' >v.ndjson
$ sb-a8 bottomk v.ndjson
? 3
! v.ndjson:2:

%%% m1 refuses records without the probe features, saying why
$ for m in softmax topk_softmax_025; do for t in t1 t2; do for e in 0 1 2 3; do printf '{"kind":"eval.epoch","v":1,"task":"%s","method":"%s","seed":0,"epoch":%d,"val_accuracy":0.5}\n' $t $m $e; done; printf '{"kind":"eval.done","v":1,"task":"%s","method":"%s","seed":0,"epochs":4,"epochs_evaluated":4,"train_status":"completed"}\n' $t $m; done; done >v.ndjson
$ sb-a8 m1 v.ndjson
? 3
! the early probe features are missing

%%% the bottom-k guard from the records: GUARD_FAILED under 0.60, with the published readout
$ for m in softmax topk_softmax_025; do for s in 0 1; do for e in 0 1 2; do printf '{"kind":"eval.epoch","v":1,"task":"cifar10","method":"%s","seed":%d,"epoch":%d,"val_accuracy":0.5%d}\n' $m $s $e $e; done; printf '{"kind":"eval.done","v":1,"task":"cifar10","method":"%s","seed":%d,"epochs":3,"epochs_evaluated":3,"train_status":"completed"}\n' $m $s; done; done >v.ndjson
$ sb-a8 bottomk --md r.md v.ndjson | tail -n 1 | grep -o '"verdict":"[^"]*"\|"runs_used":[0-9]*\|"dense_mean":[0-9.]*\|"published_outcome":"[^"]*"'
$ grep -c 'published patience-5' r.md
$ grep -o 'Bottom-k verdict: GUARD_FAILED\*\* (published: GUARD_MET' r.md
> "verdict":"GUARD_FAILED"
> "dense_mean":0.52
> "published_outcome":"GUARD_MET"
> "runs_used":4
> 1
> Bottom-k verdict: GUARD_FAILED** (published: GUARD_MET

%%% a run whose training failed is left out: the bottom-k verdict is the one without it, counted
$ R=$TOP/tests/fixtures/a8/run.sh
$ for s in 0 1; do $R cifar10 softmax $s 4 0.70; $R cifar10 topk_softmax_025 $s 4 0.68; done >ok.ndjson
$ { cat ok.ndjson; $R -s failed_nonfinite_loss -n 2 cifar10 softmax 2 4 0.10; } >v.ndjson
$ sb-a8 bottomk ok.ndjson | tail -n 1 | grep -o '"verdict":"[^"]*"\|"runs_used":[0-9]*\|"dense_mean":[0-9.]*'
$ sb-a8 bottomk --md r.md v.ndjson | tail -n 1 | grep -o '"verdict":"[^"]*"\|"runs_excluded_status":[0-9]*\|"dense_mean":[0-9.]*'
$ grep -c '1 with a training status other than `completed`' r.md
> "verdict":"GUARD_MET"
> "dense_mean":0.7
> "runs_used":4
> "verdict":"GUARD_MET"
> "dense_mean":0.7
> "runs_excluded_status":1
> 1
! 1 run(s) left out: training status not 'completed' (e.g. cifar10.softmax.s2.plain.compact.e4: failed_nonfinite_loss)

%%% runs without eval.done (evaluation unfinished) or not evaluated at every epoch are left out, counted
$ R=$TOP/tests/fixtures/a8/run.sh
$ for s in 0 1; do $R cifar10 softmax $s 4 0.70; done >v.ndjson
$ $R -D cifar10 softmax 2 4 0.10 >>v.ndjson
$ $R -n 3 cifar10 softmax 3 4 0.10 >>v.ndjson
$ sb-a8 bottomk v.ndjson | tail -n 1 | grep -o '"verdict":"[^"]*"\|"runs_[a-z_]*":[0-9]*\|"dense_mean":[0-9.]*'
> "verdict":"GUARD_MET"
> "dense_mean":0.7
> "runs_used":2
> "runs_excluded_status":0
> "runs_excluded_no_eval_done":1
> "runs_excluded_partial":1
> "runs_superseded":0
! 1 run(s) left out: no eval.done record
! 1 run(s) left out: not evaluated at every epoch of the budget

%%% an eval.done without the budget or the training status is malformed
$ printf '{"kind":"eval.done","v":1,"task":"t","method":"softmax","seed":0,"train_status":"completed"}\n' >v.ndjson
$ sb-a8 bottomk v.ndjson
? 3
! v.ndjson:1: eval.done:

%%% duplicate runs: the later completed run of the same cell wins (a later failed one does not), counted
$ R=$TOP/tests/fixtures/a8/run.sh
$ $R -i first cifar10 softmax 0 4 0.50 >v.ndjson
$ $R -i second cifar10 softmax 0 4 0.70 >>v.ndjson
$ $R -i third cifar10 softmax 1 4 0.70 >>v.ndjson
$ $R -i fourth -s failed_nonfinite_loss cifar10 softmax 1 4 0.10 >>v.ndjson
$ sb-a8 bottomk v.ndjson | grep -o '"method":"softmax","runs":[0-9]*\|"runs_[a-z_]*":[0-9]*\|"dense_mean":[0-9.]*'
> "method":"softmax","runs":2
> "dense_mean":0.7
> "runs_used":2
> "runs_excluded_status":1
> "runs_excluded_no_eval_done":0
> "runs_excluded_partial":0
> "runs_superseded":1
! 1 run(s) superseded by a later run of the same task/method/seed/arch/tier/epochs (e.g. first)

%%% the same cell_id rerun in a later file (cell_ids hash the settings, so a rerun carries its original's): the later completed run wins, a later failed one displaces nothing
$ R=$TOP/tests/fixtures/a8/run.sh
$ $R -i same0 cifar10 softmax 0 4 0.50 >v.ndjson
$ $R -i same1 cifar10 softmax 1 4 0.70 >>v.ndjson
$ $R -i same0 cifar10 softmax 0 4 0.70 >rerun.ndjson
$ $R -i same1 -s failed_nonfinite_loss cifar10 softmax 1 4 0.10 >>rerun.ndjson
$ sb-a8 bottomk v.ndjson rerun.ndjson | grep -o '"method":"softmax","runs":[0-9]*\|"runs_[a-z_]*":[0-9]*\|"dense_mean":[0-9.]*'
> "method":"softmax","runs":2
> "dense_mean":0.7
> "runs_used":2
> "runs_excluded_status":1
> "runs_excluded_no_eval_done":0
> "runs_excluded_partial":0
> "runs_superseded":1
! 1 run(s) superseded by a later run of the same task/method/seed/arch/tier/epochs (e.g. same0)

%%% the same, appended to one stream after each run's eval.done: the same result
$ R=$TOP/tests/fixtures/a8/run.sh
$ { $R -i same0 cifar10 softmax 0 4 0.50; $R -i same1 cifar10 softmax 1 4 0.70; $R -i same0 cifar10 softmax 0 4 0.70; $R -i same1 -s failed_nonfinite_loss cifar10 softmax 1 4 0.10; } >v.ndjson
$ sb-a8 bottomk v.ndjson | grep -o '"dense_mean":[0-9.]*\|"runs_superseded":[0-9]*\|"runs_excluded_status":[0-9]*'
> "dense_mean":0.7
> "runs_excluded_status":1
> "runs_superseded":1
! 1 run(s) superseded by a later run of the same task/method/seed/arch/tier/epochs (e.g. same0)

%%% a later completed run that was not evaluated at every epoch wins and leaves its seed out (as sb-freeze, sb-stats)
$ R=$TOP/tests/fixtures/a8/run.sh
$ $R -i whole cifar10 softmax 0 4 0.50 >v.ndjson
$ $R -i part -n 2 cifar10 softmax 0 4 0.90 >>v.ndjson
$ $R cifar10 softmax 1 4 0.70 >>v.ndjson
$ sb-a8 bottomk v.ndjson | grep -o '"method":"softmax","runs":[0-9]*\|"runs_[a-z_]*":[0-9]*\|"dense_mean":[0-9.]*'
> "method":"softmax","runs":1
> "dense_mean":0.7
> "runs_used":1
> "runs_excluded_status":0
> "runs_excluded_no_eval_done":0
> "runs_excluded_partial":1
> "runs_superseded":1

%%% duplicate runs in m1: the later top-k run is the group's, its seed counted once
$ R=$TOP/tests/fixtures/a8/run.sh
$ $R -p -i early t1 topk_softmax_025 0 4 0.6 >v.ndjson
$ for m in softmax topk_softmax_025; do for t in t1 t2; do $R -p $t $m 0 4 0.5; done; done >>v.ndjson
$ sb-a8 m1 --resamples 100 v.ndjson | grep -o '"task":"t1","arch":"plain","tier":"compact","n_seeds":[0-9]*\|"target_switch_epoch":[0-9]*\|"runs_superseded":[0-9]*'
> "task":"t1","arch":"plain","tier":"compact","n_seeds":1
> "target_switch_epoch":3
> "target_switch_epoch":3
> "runs_superseded":1

%%% m1: a group outside the design (tier medium) is left out with a warning, not counted as compact
$ R=$TOP/tests/fixtures/a8/run.sh
$ for m in softmax topk_softmax_025; do for t in t1 t2; do $R -p $t $m 0 4 0.5; $R -p -t medium $t $m 0 4 0.5; done; done >v.ndjson
$ sb-a8 m1 --resamples 100 v.ndjson >out.txt 2>err.txt
$ ! grep -q '"tier":"medium"' out.txt
$ grep -o 'm1: 2 group(s) left out: architecture or tier outside the design.*' err.txt
> m1: 2 group(s) left out: architecture or tier outside the design (plain, local_hybrid x compact, deep, wide; e.g. t1 plain medium)

%%% linear-decay: the clean grid (E = 3, 9, 30) persists for both ratios
$ $TOP/tests/fixtures/a8/ld_grid.sh >v.ndjson
$ sb-a8 lineardecay v.ndjson | tail -n 1 | grep -o '"verdict":"[^"]*"\|"[a-z_]*budget":[0-9]*\|"persists_[0-9]*":[a-z]*\|"missing":null'
> "verdict":"PERSISTS_BOTH"
> "first_budget":3
> "last_budget":30
> "persists_0125":true
> "persists_025":true
> "missing":null

%%% linear-decay: a failed E = 30 run (2 epochs evaluated) is left out, the verdict stays PERSISTS_BOTH at E = 3 and 30
$ R=$TOP/tests/fixtures/a8/run.sh
$ { $TOP/tests/fixtures/a8/ld_grid.sh; $R cifar10 softmax 2 30 0.55; $R -s failed_nonfinite_loss -n 2 cifar10 topk_softmax_025 2 30 0.90; } >v.ndjson
$ sb-a8 lineardecay v.ndjson | tail -n 1 | grep -o '"verdict":"[^"]*"\|"runs_excluded_status":[0-9]*\|"[a-z_]*budget":[0-9]*'
> "verdict":"PERSISTS_BOTH"
> "first_budget":3
> "last_budget":30
> "runs_excluded_status":1

%%% linear-decay: without E = 3 runs the verdict is INCOMPLETE, naming the budget and the methods (never E = 9 in its place)
$ $TOP/tests/fixtures/a8/ld_grid.sh 9 30 >v.ndjson
$ sb-a8 lineardecay --md r.md v.ndjson | tail -n 1 | grep -o '"verdict":"[^"]*"\|"persists_[0-9]*":[a-z]*'
$ grep -c 'Linear-decay verdict: INCOMPLETE' r.md
> "verdict":"INCOMPLETE: no complete paired runs of topk_softmax_0125 at E = 3; topk_softmax_025 at E = 3"
> "persists_0125":null
> "persists_025":null
> 1
! linear-decay control: INCOMPLETE: no complete paired runs of topk_softmax_0125 at E = 3; topk_softmax_025 at E = 3

%%% linear-decay: one ratio's E = 30 runs failed: INCOMPLETE, naming it (not PERSISTS_025)
$ R=$TOP/tests/fixtures/a8/run.sh
$ $TOP/tests/fixtures/a8/ld_grid.sh | grep -v 'topk_softmax_0125.s[01].plain.compact.e30"' >v.ndjson
$ for s in 0 1; do $R -s failed_nonfinite_loss -n 2 cifar10 topk_softmax_0125 $s 30 0.40; done >>v.ndjson
$ sb-a8 lineardecay v.ndjson | tail -n 1 | grep -o '"verdict":"[^"]*"\|"persists_[0-9]*":[a-z]*'
> "verdict":"INCOMPLETE: no complete paired runs of topk_softmax_0125 at E = 30"
> "persists_0125":null
> "persists_025":true

%%% linear-decay: a duplicate top-k run is counted once (the later one)
$ R=$TOP/tests/fixtures/a8/run.sh
$ { $R -i early cifar10 topk_softmax_025 0 3 0.50; $TOP/tests/fixtures/a8/ld_grid.sh; } >v.ndjson
$ sb-a8 lineardecay v.ndjson | grep '"method":"topk_softmax_025","budget_epochs":3,' | grep -o '"pairs":[0-9]*,"correct_diff":-\{0,1\}[0-9]*'
> "pairs":2,"correct_diff":10

%%% a malformed line: one clear message naming file, line and column (the message used to be formatted over itself)
$ printf '{"kind":"run.meta","v":1}\n{"kind":"eval.epoch", bad\n' >bad.ndjson
$ sb-a8 m1 bad.ndjson
? 3
! sb-a8: bad.ndjson:2: column 23: invalid JSON: lexical error: invalid char in json text.

%%% '-' reads the records from stdin (once): the same verdict as from the file
$ R=$TOP/tests/fixtures/a8/run.sh
$ for s in 0 1; do $R cifar10 softmax $s 4 0.7; $R cifar10 topk_softmax_025 $s 4 0.6; done >v.ndjson
$ sb-a8 bottomk v.ndjson | grep '"kind":"a8.verdict"' >f.out
$ sb-a8 bottomk - <v.ndjson | grep '"kind":"a8.verdict"' >s.out
$ cmp f.out s.out && grep -c verdict s.out
$ sb-a8 bottomk - <v.ndjson >all.out
$ sed -n 1p all.out | grep -o '"path":"-","sha256":"[0-9a-f]*"' | grep -c "$(sha256sum <v.ndjson | cut -c1-64)"
> 1
> 1

%%% n3a: eval.epoch records are not N3-A's: no decision, exit 3
$ R=$TOP/tests/fixtures/a8/run.sh
$ $R cifar10 softmax 0 4 0.7 >v.ndjson
$ sb-a8 n3a v.ndjson
? 3
! sb-a8: N3-A: no decision: no n3a.eval records

%%% n3a: the planted backward fixture (tests/sh/a8_n3a.sh has the others)
$ gzip -dc $TOP/tests/fixtures/a8/n3a/backward.ndjson.gz >b.ndjson
$ sb-a8 n3a b.ndjson | tail -n 1 | grep -o '"verdict":"[^"]*"\|"registered_design":[a-z]*\|"n_seeds":[0-9]*'
> "verdict":"BACKWARD_SUPPORTED_SYNTHETIC"
> "n_seeds":10
> "registered_design":false
! not the registered design

%%% n3a: the example of docs/sb-a8.md (the planted KILLED fixture from stdin)
$ gzip -dc $TOP/tests/fixtures/a8/n3a/killed.ndjson.gz | sb-a8 -q n3a --md n3a.md - | tail -n 1 | grep -o '"verdict":"[^"]*"\|"registered_design":[a-z]*'
$ grep -c 'N3-A verdict: KILLED_FOR_REGISTERED_EPSILON' n3a.md
> "verdict":"KILLED_FOR_REGISTERED_EPSILON"
> "registered_design":false
> 1

%%% '-' twice is a usage error
$ sb-a8 bottomk - - </dev/null
? 2
! '-' (stdin) given twice

%%% lineardecay counts correct examples as round(accuracy x n_val): a run without n_val is bad input, named
$ R=$TOP/tests/fixtures/a8/run.sh
$ for s in 0 1; do for m in softmax topk_softmax_0125 topk_softmax_025; do $R -s completed cifar10 $m $s 3 0.5; done; done | sed 's/"n_val":100,//' >v.ndjson
$ sb-a8 -q lineardecay v.ndjson
? 3
! its eval.epoch records give no n_val >= 1

%%% a data error found in the analysis leaves stdout empty (no run.meta, no half of the records)
$ R=$TOP/tests/fixtures/a8/run.sh
$ for s in 0 1; do for m in softmax topk_softmax_0125 topk_softmax_025; do $R -s completed cifar10 $m $s 3 0.5; done; done | sed 's/"n_val":100,//' >v.ndjson
$ sb-a8 -q lineardecay v.ndjson >out.ndjson || echo "exit $?"
$ wc -c <out.ndjson
> exit 3
> 0

%%% an n_val of 0 or below is malformed, named by FILE:LINE
$ R=$TOP/tests/fixtures/a8/run.sh
$ $R cifar10 softmax 0 3 0.5 | sed 's/"n_val":100/"n_val":0/' >v.ndjson
$ sb-a8 -q bottomk v.ndjson
? 3
! v.ndjson:1: n_val must be an integer >= 1

%%% an evaluation record of another version is refused, named by FILE:LINE
$ R=$TOP/tests/fixtures/a8/run.sh
$ $R cifar10 softmax 0 3 0.5 | sed '2s/"v":1/"v":2/' >v.ndjson
$ sb-a8 -q bottomk v.ndjson
? 3
! v.ndjson:2: eval.epoch record version 2 not supported (this program reads 1)

%%% bottomk and lineardecay are one group's controls (PROTOCOL A8: CIFAR-10): runs of two tasks are refused, not pooled
$ R=$TOP/tests/fixtures/a8/run.sh
$ { $R cifar10 softmax 0 3 0.7; $R mnist softmax 0 3 0.4; } >v.ndjson
$ sb-a8 -q bottomk v.ndjson
? 3
! bottomk reads the runs of one task, architecture and tier (PROTOCOL A8: CIFAR-10); got cifar10/plain/compact and mnist/plain/compact

%%% run.meta's argv is the command line as typed (getopt permutes argv; the record does not)
$ R=$TOP/tests/fixtures/a8/run.sh
$ $R cifar10 softmax 0 3 0.7 >v.ndjson
$ sb-a8 -q bottomk --md x.md v.ndjson >out.ndjson
$ sed -n 1p out.ndjson | grep -o '"argv":\[[^]]*\]' | sed 's/"[^"]*sb-a8"/"sb-a8"/'
> "argv":["sb-a8","-q","bottomk","--md","x.md","v.ndjson"]

%%% m1: a task outside PROTOCOL A1's 13 is taken as a 10-class image task, and said (once)
$ R=$TOP/tests/fixtures/a8/run.sh
$ for t in mnist mytask; do for m in softmax topk_softmax_025; do $R -p $t $m 0 4 0.5; done; done >v.ndjson
$ sb-a8 -q m1 --resamples 100 v.ndjson >/dev/null
$ sb-a8 -q m1 --resamples 100 v.ndjson 2>&1 >/dev/null | grep -c "task 'mytask' is not one of PROTOCOL A1's 13"
> 1
! task 'mytask' is not one of PROTOCOL A1's 13: m1's features take it as a 10-class image task

%%% --md into a directory that cannot be written: exit 4 before any analysis (nothing on stdout)
$ R=$TOP/tests/fixtures/a8/run.sh
$ $R cifar10 softmax 0 3 0.7 >v.ndjson
$ sb-a8 -q bottomk --md nosuch/x.md v.ndjson >out.ndjson || echo "exit $?"
$ wc -c <out.ndjson
> exit 4
> 0
! --md nosuch/x.md: its directory nosuch cannot be written

%%% --seed and --resamples belong to the analyses with a bootstrap (m1, m2, m3): elsewhere a usage error
$ sb-a8 bottomk --seed 3 x.ndjson
? 2
! --seed is an option of m1, m2 and m3 (their bootstraps); bottomk has none

%%% m1: probe features present but no attention_entropy: refused naming the group and the field, not a ridge failure
$ R=$TOP/tests/fixtures/a8/run.sh
$ for t in mnist kmnist; do for m in softmax topk_softmax_025; do $R -p $t $m 0 4 0.5; done; done | sed 's/"attention_entropy":[0-9.]*,//' >v.ndjson
$ sb-a8 -q m1 --resamples 100 v.ndjson
? 3
! mnist/plain/compact: the dense run's validation accuracy or attention_entropy of epoch 3 is missing

%%% a line that is not a JSON object is malformed input, named by FILE:LINE (it was skipped)
$ R=$TOP/tests/fixtures/a8/run.sh
$ { $R cifar10 softmax 0 3 0.7; echo '[1,2]'; } >v.ndjson
$ sb-a8 -q bottomk v.ndjson
? 3
! v.ndjson:5: record is not a JSON object

%%% a name longer than sb-a8 holds is refused naming the line (it was cut, and two runs could merge)
$ t=$(printf 'x%.0s' $(seq 70)); printf '{"kind":"eval.epoch","v":1,"task":"%s","method":"softmax","seed":0,"epoch":0,"val_accuracy":0.5}\n' "$t" >long.ndjson
$ sb-a8 bottomk long.ndjson
? 3
! long.ndjson:1: a task or method of 64 or more bytes

%%% a seed beyond int is refused naming the line (it was cut to an int)
$ printf '{"kind":"eval.epoch","v":1,"task":"cifar10","method":"softmax","seed":4294967296,"epoch":0,"val_accuracy":0.5}\n' >seed.ndjson
$ sb-a8 bottomk seed.ndjson
? 3
! seed.ndjson:1: a task or method
