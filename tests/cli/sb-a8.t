# sb-a8: the command line and its refusals; the analyses themselves are tested in
# tests/unit/test_a8.c (arithmetic, verdict fixtures) and tests/sh/pipeline_a8.sh (the chain).

%%% --help: synopsis, analyses, options, exit status
$ sb-a8 --help
~ Usage: sb-a8 m1|m2|bottomk|lineardecay|m3|m3map [--md FILE] [--switch-epochs FILE] [--seed N]
~ --switch-epochs FILE  (m1, m3map) the switch epochs
~   m3map        M3's switch map
~ Exit status: 0 computed (whatever the verdict)
!! empty

%%% no analysis: usage error
$ sb-a8
? 2
! sb-a8: no analysis given (m1, m2, bottomk, lineardecay, m3map or m3)

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
$ for m in softmax topk_softmax_025; do for t in t1 t2; do for e in 0 1 2 3; do printf '{"kind":"eval.epoch","v":1,"task":"%s","method":"%s","seed":0,"epoch":%d,"val_accuracy":0.5}\n' $t $m $e; done; done; done >v.ndjson
$ sb-a8 m1 v.ndjson
? 3
! the early probe features are missing

%%% the bottom-k guard from the records: GUARD_FAILED under 0.60, with the published readout
$ for m in softmax topk_softmax_025; do for s in 0 1; do for e in 0 1 2; do printf '{"kind":"eval.epoch","v":1,"task":"cifar10","method":"%s","seed":%d,"epoch":%d,"val_accuracy":0.5%d}\n' $m $s $e $e; done; done; done >v.ndjson
$ sb-a8 bottomk --md r.md v.ndjson | tail -n 1 | cut -c1-90
$ grep -c 'published patience-5' r.md
> {"kind":"a8.verdict","v":1,"analysis":"bottomk","verdict":"GUARD_FAILED","dense_mean":0.52
> 1
