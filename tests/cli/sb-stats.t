# sb-stats: command line, tables, power floor, rule exit codes, malformed input.
# Fixtures and expected values: tests/golden/stats/ (gen_fixtures.py, scipy/statsmodels).

%%% --help is complete and goes to stdout
$ sb-stats --help
~ Usage: sb-stats [OPTIONS] RECORDS...
~ eval.epoch
~ probe.result
~ --patience N
~ --rule
~ Records written
~ stats.paired
~ Exit status:
~ 3  malformed input
!! empty

%%% --version
$ sb-stats --version | grep -q '^sb-stats '

%%% no input is a usage error
$ sb-stats
? 2
! sb-stats: no RECORDS given
! Try 'sb-stats --help'

%%% a bad --format is a usage error
$ sb-stats --format html x.ndjson
? 2
! invalid value for --format: 'html'

%%% a bad --patience is a usage error
$ sb-stats --patience soon x.ndjson
? 2
! invalid value for --patience

%%% stdin given twice is a usage error
$ sb-stats - - </dev/null
? 2
! '-' (stdin) given more than once

%%% a missing input file is an I/O error
$ sb-stats no-such-file.ndjson
? 4
! no-such-file.ndjson

%%% Table 2 (Markdown) equals the table computed with numpy/scipy/statsmodels
$ sb-stats -q --seed 7 --resamples 2000 --format md $TOP/tests/golden/stats/fixtures/val.ndjson >out.md
$ awk '/^### /{n++} n==1 && /^\| /' out.md >rows.md
$ diff rows.md $TOP/tests/golden/stats/expected/table2_rows.md
$ head -n 1 out.md
> ### Table 2: validation accuracy at the best epoch (patience 5): softmax mean and paired delta (method - softmax) over seeds

%%% Table 2 as CSV
$ sb-stats -q --seed 7 --resamples 2000 --format csv $TOP/tests/golden/stats/fixtures/val.ndjson | head -n 4 | tr -d '\r'
> Dataset,Threshold,softmax,top-k 0.125,top-k 0.25,top-k 0.5,sparsemax,entmax-1.5,HAE
> F-MNIST,0.85,0.8835,+0.0004,+0.0025,+0.0020,-0.0006,-0.0009,-0.0020
> CIFAR-10,0.60,0.6614,-0.0038,-0.0009,+0.0004,-0.0331*,-0.0173*,-0.0175*
> USPS,—,0.9582,+0.0054,+0.0122*,+0.0040*,-0.0027,-0.0006,+0.0038*

%%% Table 2 as LaTeX
$ sb-stats -q --seed 7 --resamples 2000 --format tex $TOP/tests/golden/stats/fixtures/val.ndjson | sed -n '2,7p'
> \begin{tabular}{lrrrrrrrr}
> \hline
> Dataset & Threshold & softmax & top-k 0.125 & top-k 0.25 & top-k 0.5 & sparsemax & entmax-1.5 & HAE \\
> \hline
> F-MNIST & 0.85 & 0.8835 & +0.0004 & +0.0025 & +0.0020 & $-$0.0006 & $-$0.0009 & $-$0.0020 \\
> CIFAR-10 & 0.60 & 0.6614 & $-$0.0038 & $-$0.0009 & +0.0004 & $-$0.0331$^{*}$ & $-$0.0173$^{*}$ & $-$0.0175$^{*}$ \\

%%% records start with run.meta naming the input and its hash; a superseded run is counted
$ f=$TOP/tests/golden/stats/fixtures/val.ndjson
$ sb-stats -q $f --resamples 100 >out.ndjson 2>err
$ head -n 1 out.ndjson | grep -q '"kind":"run.meta"'
$ head -n 1 out.ndjson | grep -qF "\"sha256\":\"$(sha256sum $f | cut -c1-64)\""
$ grep -c '"kind":"stats.paired"' out.ndjson
$ grep -c '"kind":"stats.budget"' out.ndjson
$ grep -o '"superseded_cells":[0-9]*' out.ndjson
$ tail -n 1 out.ndjson | grep -q '"kind":"stats.summary"'
$ cat err
> 18
> 144
> "superseded_cells":1
> sb-stats: 1 cell(s) superseded by a later run of the same task/arch/tier/method/seed

%%% PROTOCOL A6/A7: runs whose eval.done says the training did not complete are excluded before the later run wins
# softmax seeds 0-3 (0.50..0.53); top-k seeds 0-2 first (0.60..0.62); then a failed rerun of
# seed 1 (0.95: must not count nor displace the completed run), a completed rerun of seed 2
# (0.72: supersedes), and seed 3 with its epoch not evaluated (excluded: no pair for seed 3;
# its log has no eval.epoch, as sb-eval writes it)
$ e() { printf '{"kind":"eval.epoch","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epoch":0,"val_accuracy":%s}\n' "$@"; }
$ d() { printf '{"kind":"eval.done","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epochs":1,"epochs_evaluated":%s,"train_status":"%s"}\n' "$@"; }
$ for s in 0 1 2 3; do e s$s softmax $s 0.5$s; d s$s softmax $s 1 completed; done >v.ndjson
$ for s in 0 1 2; do e a$s topk_softmax_025 $s 0.6$s; d a$s topk_softmax_025 $s 1 completed; done >>v.ndjson
$ { e b1 topk_softmax_025 1 0.95; d b1 topk_softmax_025 1 1 failed_nonfinite_loss; e b2 topk_softmax_025 2 0.72; d b2 topk_softmax_025 2 1 completed; d b3 topk_softmax_025 3 0 completed; } >>v.ndjson
$ sb-stats -q --resamples 100 v.ndjson >out.ndjson 2>err
$ grep '"kind":"stats.paired"' out.ndjson | grep -o '"n":[0-9]*,"seeds":[^]]*]'
$ grep '"kind":"stats.paired"' out.ndjson | grep -o '"mean_method":[0-9.]*'
$ grep -o '"superseded_cells":[0-9]*,"excluded_cells":[0-9]*' out.ndjson
$ cat err
> "n":3,"seeds":[0,1,2]
> "mean_method":0.6433333333333333
> "superseded_cells":1,"excluded_cells":2
> sb-stats: 2 run(s) excluded: their eval.done says the training did not complete, or (for the run that counts) not every epoch was evaluated (PROTOCOL A7); first: v.ndjson:15: t/topk_softmax_025 seed 1: training status 'failed_nonfinite_loss', not 'completed'
> sb-stats: 1 cell(s) superseded by a later run of the same task/arch/tier/method/seed

%%% an eval.done whose count of evaluated epochs is not its log's is a damaged log: bad input, as sb-freeze says (it was excluded as "1 of 1 epochs evaluated")
$ e() { printf '{"kind":"eval.epoch","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epoch":0,"val_accuracy":%s}\n' "$@"; }
$ d() { printf '{"kind":"eval.done","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epochs":1,"epochs_evaluated":%s,"train_status":"%s"}\n' "$@"; }
$ { e s0 softmax 0 0.5; d s0 softmax 0 1 completed; e b3 topk_softmax_025 3 0.9; d b3 topk_softmax_025 3 0 completed; } >v.ndjson
$ sb-stats -q v.ndjson
! sb-stats: v.ndjson:4: eval.done says 0 epochs evaluated, the run's eval.epoch records are 1
? 3

%%% the study's "topk_softmax" is topk_softmax_025 (one method: one comparison, one Holm member; a rerun under the other name supersedes)
$ e() { printf '{"kind":"eval.epoch","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epoch":0,"val_accuracy":%s}\n' "$@"; }
$ for s in 0 1 2; do e s$s softmax $s 0.5$s; e a$s topk_softmax_025 $s 0.6$s; e m$s sparsemax $s 0.4$s; done >v.ndjson
$ e b2 topk_softmax 2 0.72 >>v.ndjson
$ sb-stats -q --resamples 100 v.ndjson >out.ndjson 2>err
$ grep -c '"kind":"stats.paired"' out.ndjson
$ grep '"method":"topk_softmax_025"' out.ndjson | grep '"kind":"stats.paired"' | grep -o '"mean_method":[0-9.]*,\|"holm_m":[0-9]*' | tr -d ','
$ ! grep -q '"method":"topk_softmax"' out.ndjson
$ grep -o '"superseded_cells":[0-9]*' out.ndjson
> 2
> "mean_method":0.6433333333333333
> "holm_m":2
> "superseded_cells":1

%%% --baseline topk_softmax is the same baseline as topk_softmax_025 (it found none before)
$ e() { printf '{"kind":"eval.epoch","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epoch":0,"val_accuracy":%s}\n' "$@"; }
$ for s in 0 1 2; do e s$s softmax $s 0.5$s; e a$s topk_softmax_025 $s 0.6$s; e m$s sparsemax $s 0.4$s; done >v.ndjson
$ sb-stats -q --resamples 100 -b topk_softmax_025 v.ndjson | grep -v '"kind":"run.meta"' >a.ndjson
$ sb-stats -q --resamples 100 -b topk_softmax v.ndjson | grep -v '"kind":"run.meta"' >b.ndjson
$ grep -c '"kind":"stats.paired"' b.ndjson
$ cmp a.ndjson b.ndjson && echo same
> 2
> same

%%% a later completed rerun with an epoch not evaluated wins, and leaves its seed without a run (as sb-freeze)
$ e() { printf '{"kind":"eval.epoch","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epoch":0,"val_accuracy":%s}\n' "$@"; }
$ d() { printf '{"kind":"eval.done","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epochs":1,"epochs_evaluated":%s,"train_status":"%s"}\n' "$@"; }
$ for s in 0 1 2; do e s$s softmax $s 0.5$s; d s$s softmax $s 1 completed; e a$s sparsemax $s 0.6$s; d a$s sparsemax $s 1 completed; done >v.ndjson
$ d c0 sparsemax 0 0 completed >>v.ndjson
$ sb-stats -q --resamples 100 v.ndjson 2>err | grep '"kind":"stats.paired"' | grep -o '"n":[0-9]*,"seeds":[^]]*]'
$ grep -o 'first: .*' err
> "n":2,"seeds":[1,2]
> first: v.ndjson:13: t/sparsemax seed 0: 0 of 1 epochs evaluated

%%% a rerun of the same cell carries the same cell_id (a hash of its settings): in a later file it is a new run, and the later one wins, as in sb-freeze
$ e() { printf '{"kind":"eval.epoch","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epoch":0,"val_accuracy":%s}\n' "$@"; }
$ d() { printf '{"kind":"eval.done","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epochs":1,"epochs_evaluated":1,"train_status":"completed"}\n' "$@"; }
$ for s in 0 1 2; do e s$s softmax $s 0.5$s; d s$s softmax $s; e a$s sparsemax $s 0.6$s; d a$s sparsemax $s; done >v.ndjson
$ { e a1 sparsemax 1 0.91; d a1 sparsemax 1; } >rerun.ndjson
$ sb-stats -q --resamples 100 v.ndjson rerun.ndjson >out.ndjson
$ grep '"kind":"stats.paired"' out.ndjson | grep -o '"mean_method":[0-9.]*'
$ grep -o '"superseded_cells":[0-9]*' out.ndjson
> "mean_method":0.71
> "superseded_cells":1

%%% the same rerun appended to one stream (after its eval.done) is a rerun too: cat-ing the logs gives what the files give
$ e() { printf '{"kind":"eval.epoch","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epoch":0,"val_accuracy":%s}\n' "$@"; }
$ d() { printf '{"kind":"eval.done","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epochs":1,"epochs_evaluated":1,"train_status":"completed"}\n' "$@"; }
$ for s in 0 1 2; do e s$s softmax $s 0.5$s; d s$s softmax $s; e a$s sparsemax $s 0.6$s; d a$s sparsemax $s; done >v.ndjson
$ { e a1 sparsemax 1 0.91; d a1 sparsemax 1; } >rerun.ndjson
$ sb-stats -q --resamples 100 v.ndjson rerun.ndjson | grep -v '"kind":"run.meta"' >files.ndjson
$ cat v.ndjson rerun.ndjson | sb-stats -q --resamples 100 - | grep -v '"kind":"run.meta"' >stream.ndjson
$ cmp files.ndjson stream.ndjson && echo same
> same

%%% without the eval.done between them, the same cell_id in one file is one run (an epoch given twice: the later value)
$ e() { printf '{"kind":"eval.epoch","v":1,"cell_id":"%s","task":"t","method":"%s","seed":%s,"epoch":%s,"val_accuracy":%s}\n' "$@"; }
$ { e x softmax 0 0 0.5; e x softmax 0 1 0.6; e x softmax 0 1 0.7; } >v.ndjson
$ sb-stats -q --resamples 100 --min-seeds 1 v.ndjson | grep -o '"superseded_cells":[0-9]*'
> "superseded_cells":0

%%% stdin gives the same table as the file
$ sb-stats -q --seed 7 --resamples 2000 --format md - <$TOP/tests/golden/stats/fixtures/val.ndjson | awk '/^### /{n++} n==1 && /^\| /' >rows.md
$ diff rows.md $TOP/tests/golden/stats/expected/table2_rows.md

%%% the test-read table (no Threshold column)
$ sb-stats -q --seed 7 --resamples 2000 --format md $TOP/tests/golden/stats/fixtures/test.ndjson | awk '/^### /{n++} n==1 && /^\| /' >rows.md
$ diff rows.md $TOP/tests/golden/stats/expected/test_rows.md

%%% the tables' notes say what a dash is: too few paired seeds (and, for the test read, a ratio not kept)
$ sb-stats -q --resamples 200 --min-seeds 3 --out res $TOP/tests/golden/stats/fixtures/val.ndjson $TOP/tests/golden/stats/fixtures/test.ndjson >/dev/null 2>&1
$ grep -c '^Cells: .* — = no paired comparison: fewer than 3 seeds present in both arms\. Threshold' res/table2.md
$ grep -c '^Cells: .* — = no paired comparison: fewer than 3 seeds present in both arms (a top-k ratio the frozen selection did not keep has no test read)\.$' res/test.md
> 1
> 1

%%% --out writes the records and every table, atomically named
$ sb-stats -q --resamples 200 --out res $TOP/tests/golden/stats/fixtures/val.ndjson $TOP/tests/golden/stats/fixtures/test.ndjson >/dev/null 2>&1
$ ls res | tr '\n' ' '; echo
> budget.csv budget.md budget.tex detail.csv detail.md detail.tex stats.ndjson table2.csv table2.md table2.tex test.csv test.md test.tex test_detail.csv test_detail.md test_detail.tex 

%%% --plot writes two SVG figures
$ sb-stats -q --resamples 200 --plot fig $TOP/tests/golden/stats/fixtures/val.ndjson >/dev/null 2>&1
$ ls fig | tr '\n' ' '; echo
$ tail -n 1 fig/budget.svg
$ grep -c '<polygon' fig/budget.svg
> budget.svg curves.svg 
> </svg>
> 18

%%% --plot FILE.svg (DESIGN's synopsis): the budget figure there, the others beside it
$ sb-stats -q --resamples 200 --plot figs/main.svg $TOP/tests/golden/stats/fixtures/val.ndjson >/dev/null 2>&1
$ sb-stats -q --resamples 200 --plot fig $TOP/tests/golden/stats/fixtures/val.ndjson >/dev/null 2>&1
$ ls figs | tr '\n' ' '; echo
$ grep -c '<polygon' figs/main.svg
$ cmp figs/main.svg fig/budget.svg && cmp figs/main-curves.svg fig/curves.svg && echo same
> main-curves.svg main.svg 
> 18
> same

%%% the power floor: one sparse-helps task, --rule exits 2 and says why
$ sb-stats -q --resamples 200 --rule $TOP/tests/golden/stats/fixtures/val.ndjson >out.ndjson
? 2
! power condition not met: 1 task(s) carry the sparse-helps label, at least 3 are needed; no rule fitted

%%% without --rule the power floor is only reported
$ sb-stats -q --resamples 200 $TOP/tests/golden/stats/fixtures/val.ndjson | grep '"kind":"stats.power"' | grep -o '"n_labelled":1,"labelled":\["usps"\],"min_labelled":3,"met":false'
> "n_labelled":1,"labelled":["usps"],"min_labelled":3,"met":false

%%% the rule succeeds: exit 0
$ sb-stats -q --resamples 200 --rule $TOP/tests/golden/stats/fixtures/rule_ok.ndjson >/dev/null
! rule succeeded: mean gain +0.010521, wins 3, losses 0, non-softmax decisions 3 of 6

%%% the rule fails: exit 3
$ sb-stats -q --resamples 200 --rule $TOP/tests/golden/stats/fixtures/rule_fail.ndjson >/dev/null
? 3
! rule failed: mean gain -0.003250, wins 0, losses 3, non-softmax decisions 3 of 6

%%% PROTOCOL A7: a task without all six sparse methods is left out of the rule (and of the power floor)
# cifar10 is one of the three sparse-helps tasks of rule_ok; without its HAE runs 2 labelled tasks remain
$ grep -v '"task":"cifar10","method":"headwise_adaptive_entmax"' $TOP/tests/golden/stats/fixtures/rule_ok.ndjson >r.ndjson
$ sb-stats -q --resamples 200 --rule r.ndjson | grep '"kind":"stats.power"' | grep -o '"n_tasks":[0-9]*,"n_labelled":[0-9]*'
? 2
> "n_tasks":5,"n_labelled":2
! 1 task(s) left out of the rule: PROTOCOL A7 needs all six sparse methods, each with at least --min-seeds paired seeds (first: cifar10 has 5 of the six sparse methods with enough paired seeds)
! power condition not met: 2 task(s) carry the sparse-helps label

%%% Holm's family is the six sparse methods (m = 6): another method in the records forms its own family
# a bottom-k copy of top-k 0.25 added to every task: the six keep m = 6 and their adjusted p-values
$ f=$TOP/tests/golden/stats/fixtures/val.ndjson
$ sb-stats -q --resamples 100 $f | grep '"kind":"stats.paired"' | grep -o '"method":"[a-z_0-9]*".*"p_holm":[^,]*,"holm_m":[0-9]*' | sed 's/"method":"\([a-z_0-9]*\)".*\("p_holm".*\)/\1 \2/' >six
$ { cat $f; grep '"method":"topk_softmax_025"' $f | sed 's/topk_softmax_025/bottomk_softmax_025/'; } >vb.ndjson
$ sb-stats -q --resamples 100 vb.ndjson | grep '"kind":"stats.paired"' | grep -o '"method":"[a-z_0-9]*".*"p_holm":[^,]*,"holm_m":[0-9]*' | sed 's/"method":"\([a-z_0-9]*\)".*\("p_holm".*\)/\1 \2/' >withb
$ grep -v bottomk withb | diff - six && grep -c '"holm_m":6' six && grep bottomk withb | grep -c '"holm_m":1'
> 18
> 3

%%% probes: Wilson intervals and paired McNemar against the baseline
$ sb-stats -q --baseline dense --format md $TOP/tests/golden/stats/fixtures/probes.ndjson >out.md
$ grep -c '^| tiny-hybrid' out.md
$ grep '^| tiny-hybrid | window_only | dense' out.md | cut -d'|' -f5-9
> 15
>  40 | 3 | 0 | 29 | 8 

%%% probes: --all-pairs compares every pair
$ sb-stats -q --baseline dense --all-pairs $TOP/tests/golden/stats/fixtures/probes.ndjson | grep -c '"kind":"stats.probe_paired"'
> 6

%%% probes: a probe given again (a later record of the same model, task, method and probe_id) replaces the earlier one, and is counted
$ F=$TOP/tests/golden/stats/fixtures/probes.ndjson
$ { cat $F; grep '"method":"dense","probe_id":"niah_single-00"' $F | sed 's/"correct":1/"correct":0/'; } >p2.ndjson
$ sb-stats -q --baseline dense p2.ndjson >out.ndjson
$ grep -o '"superseded_probes":[0-9]*' out.ndjson
$ grep -o '"task":"[a-z_]*","method":"dense","correct":[0-9]*,"n":[0-9]*' out.ndjson
> "superseded_probes":1
> "task":"all","method":"dense","correct":31,"n":40
> "task":"niah_single","method":"dense","correct":15,"n":20
> "task":"variable_tracking","method":"dense","correct":16,"n":20

%%% --min-seeds above the seeds available skips every comparison, with a warning
$ sb-stats -q --min-seeds 6 --format md $TOP/tests/golden/stats/fixtures/val.ndjson
! 18 comparison(s) skipped: fewer than 6 paired seed(s)

%%% unknown kinds are ignored
$ printf '%s\n' '{"kind":"run.meta","v":1}' '{"kind":"train.epoch","v":7,"x":1}' >in.ndjson
$ sb-stats -q in.ndjson | grep -o '"records":2,"ignored_records":2'
> "records":2,"ignored_records":2
! no eval.epoch, test.cell or probe.result records in the input

%%% malformed JSON: exit 3 naming file and line
$ printf '%s\n' '{"kind":"eval.epoch","v":1,"task":"mnist","method":"softmax","seed":0,"epoch":0,"val_accuracy":0.5}' '{"kind":"eval.epoch",' >bad.ndjson
$ sb-stats bad.ndjson
? 3
! sb-stats: bad.ndjson:2:

%%% a missing field: exit 3 naming file, line and field
$ printf '%s\n' '{"kind":"run.meta","v":1}' '{"kind":"eval.epoch","v":1,"task":"mnist","method":"softmax","seed":0,"epoch":0,"val_accuracy":0.5}' '{"kind":"eval.epoch","v":1,"task":"mnist","method":"softmax","epoch":1,"val_accuracy":0.5}' >bad.ndjson
$ sb-stats bad.ndjson
? 3
! sb-stats: bad.ndjson:3: missing field 'seed'

%%% an accuracy outside [0, 1]: exit 3
$ printf '%s\n' '{"kind":"eval.epoch","v":1,"task":"mnist","method":"softmax","seed":0,"epoch":0,"val_accuracy":1.5}' >bad.ndjson
$ sb-stats bad.ndjson
? 3
! bad.ndjson:1: field 'val_accuracy' must lie in [0, 1] (got 1.5)

%%% a null accuracy: exit 3
$ printf '%s\n' '{"kind":"eval.epoch","v":1,"task":"mnist","method":"softmax","seed":0,"epoch":0,"val_accuracy":null,"val_accuracy_nonfinite":"nan"}' >bad.ndjson
$ sb-stats bad.ndjson
? 3
! bad.ndjson:1: field 'val_accuracy' must be a number

%%% a gap in the epochs: exit 3, named at the record after the gap (it was named at the run's first record)
$ for e in 0 1 3; do printf '{"kind":"eval.epoch","v":1,"task":"mnist","method":"softmax","seed":0,"epoch":%d,"val_accuracy":0.5}\n' $e; done >gap.ndjson
$ sb-stats gap.ndjson
? 3
! gap.ndjson:3: cell mnist/softmax seed 0: epoch 2 missing

%%% an unsupported record version: exit 3
$ printf '%s\n' '{"kind":"test.cell","v":2,"task":"mnist","method":"softmax","seed":0,"test_accuracy":0.5}' >bad.ndjson
$ sb-stats bad.ndjson
? 3
! bad.ndjson:1: test.cell record version 2 not supported

%%% a write error on stdout is exit 4
$ sb-stats -q --resamples 100 $TOP/tests/golden/stats/fixtures/test.ndjson >/dev/full
? 4
! write error

%%% probes: a model without records of the baseline method is compared pairwise, with a warning naming it
$ p() { printf '{"kind":"probe.result","v":1,"model":"%s","task":"t","method":"%s","probe_id":%s,"correct":%s}\n' "$@"; }
$ for i in 0 1 2 3; do p m1 dense $i 1; p m1 recipe $i $((i % 2)); p m1 random $i 0; p m2 softmax $i 1; p m2 recipe $i 0; done >p.ndjson
$ sb-stats -q p.ndjson | grep '"kind":"stats.probe_paired"' | grep -o '"model":"[^"]*","method_a":"[^"]*","method_b":"[^"]*"' | sort
> "model":"m1","method_a":"dense","method_b":"random"
> "model":"m1","method_a":"dense","method_b":"recipe"
> "model":"m1","method_a":"recipe","method_b":"random"
> "model":"m2","method_a":"recipe","method_b":"softmax"
! sb-stats: model m1 has no probe records of the baseline 'softmax' (--baseline): its 3 methods are compared pairwise, every pair in one Holm family (as --all-pairs)
