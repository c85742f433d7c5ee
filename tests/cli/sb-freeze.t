# sb-freeze: the command line, the rule's options, refusals. Run directories are
# built with tests/fixtures/guard/lib.sh (stand-in checkpoints, sb-eval's log format).

%%% --help: synopsis, options, records, exit status, examples
$ sb-freeze --help
~ Usage: sb-freeze [--rule NAME] [--min-seeds N] [--patience N | --budget E]
~ Exit status: 0 frozen; 1 refused
~ Examples:
!! empty

%%% no logs: usage error
$ sb-freeze
? 2
! sb-freeze: no validation logs given
! Try 'sb-freeze --help'

%%% --patience and --budget exclude each other
$ sb-freeze --patience 3 --budget 2 x.ndjson
? 2
! exclude each other

%%% unknown rule
$ sb-freeze --rule best_ever x.ndjson
? 2
! unknown rule 'best_ever'

%%% bad --min-seeds
$ sb-freeze --min-seeds 0 x.ndjson
? 2
! invalid value for --min-seeds

%%% stdin cannot be a validation log
$ sb-freeze -
? 2
! must be files

%%% a missing log: I/O error, nothing written
$ sb-freeze -o sel.json nosuch.ndjson
$ echo unreachable
? 4
! nosuch.ndjson: No such file or directory

%%% a malformed log: bad data, named by file and line
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs t topk_softmax_025 0 "0.5 0.6")
$ sed -i '3s/"epoch":1,/"epoch":"one",/' runs/$id/val.ndjson
$ sb-freeze -q --min-seeds 1 -o sel.json runs/*/val.ndjson || { rc=$?; test ! -e sel.json || exit 99; exit $rc; }
? 3
! val.ndjson:3: field 'epoch' must be an integer

%%% one tier unless --tier says which
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkcell runs t topk_softmax_025 0 "0.5 0.6" completed compact >/dev/null
$ mkcell runs t topk_softmax_025 1 "0.5 0.6" completed deep >/dev/null
$ sb-freeze -q --min-seeds 1 -o sel.json runs/*/val.ndjson
? 2
! hold cells of tier 'compact' and 'deep': choose one with --tier

%%% --tier filters
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkcell runs t topk_softmax_025 0 "0.5 0.6" completed compact >/dev/null
$ mkcell runs t topk_softmax_05 1 "0.5 0.9" completed deep >/dev/null
$ sb-freeze -q --tier compact --min-seeds 1 -o sel.json runs/*/val.ndjson | tail -n 1
$ test "$(grep -c '"tier": "compact"' sel.json)" = 2
~ "selected":{"t":"topk_softmax_025"}
~ "n_cells":1

%%% too few seeds: refused, nothing written
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkcell runs t topk_softmax_025 0 "0.5 0.6" >/dev/null
$ sb-freeze -q -o sel.json runs/*/val.ndjson || { rc=$?; test ! -e sel.json || exit 99; exit $rc; }
? 1
! no task has a top-k ratio with at least 10 seeds

%%% patience (default 5) vs a fixed budget
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkcell runs t topk_softmax_025 0 "0.5 0.9 0.6" >/dev/null
$ mkcell runs t topk_softmax_05 0 "0.5 0.6 0.8" >/dev/null
$ sb-freeze -q --min-seeds 1 -o best.json runs/*/val.ndjson | tail -n 1
$ sb-freeze -q --min-seeds 1 --budget 3 -o budget.json runs/*/val.ndjson | tail -n 1
$ grep -h '"basis"' best.json budget.json
~ {"t":"topk_softmax_025"}
~ {"t":"topk_softmax_05"}
~ "basis": "best_epoch_patience",
~ "basis": "fixed_budget",

%%% a log modified in the future is named, with how far ahead it is; nothing written
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkcell runs t topk_softmax_025 0 "0.5 0.6" >/dev/null
$ id=$(mkcell runs t topk_softmax_05 0 "0.5 0.6")
$ touch -d '+1 hour' runs/$id/val.ndjson
$ sb-freeze -q --min-seeds 1 -o sel.json runs/*/val.ndjson || { rc=$?; test ! -e sel.json || exit 99; exit $rc; }
? 3
! /val.ndjson: modified 3
! s in the future (clock skew?; 1 log(s) ahead of the clock): cannot freeze

%%% a null validation accuracy at an epoch the rule does not use counts as no improvement, with a warning naming the log and cell
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkcell runs t topk_softmax_025 0 "0.5 0.6 0.7" >/dev/null
$ id=$(mkcell runs t topk_softmax_05 0 "0.5 0.9 0.8")
$ sed -i '3s/"val_accuracy":0.9,/"val_accuracy":null,/' runs/$id/val.ndjson
$ sb-freeze --min-seeds 1 -o sel.json runs/*/val.ndjson >/dev/null
$ grep -m1 -A10 '"cell_id": "'$id'"' sel.json | grep -o '"selected_epoch": [0-9]*\|"val_accuracy": [0-9.]*'
> "selected_epoch": 2
> "val_accuracy": 0.8
! runs/t.topk_softmax_05.s0
! : 1 null validation accuracy(s), the first after epoch 2: counted as no improvement

%%% patience 1 stops early
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkcell runs t topk_softmax_025 0 "0.5 0.4 0.9" >/dev/null
$ mkcell runs t topk_softmax_05 0 "0.6 0.6 0.6" >/dev/null
$ sb-freeze -q --min-seeds 1 --patience 1 -o p1.json runs/*/val.ndjson | tail -n 1
$ sb-freeze -q --min-seeds 1 --patience 0 -o p0.json runs/*/val.ndjson | tail -n 1
~ {"t":"topk_softmax_05"}
~ {"t":"topk_softmax_025"}

%%% incomplete training and unevaluated epochs are excluded, with the reason
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkcell runs t topk_softmax_025 0 "0.5 0.9" failed_nonfinite_loss >/dev/null
$ mkcell runs t topk_softmax_05 0 "0.5 0.6" >/dev/null
$ sb-freeze -q --min-seeds 1 -o sel.json runs/*/val.ndjson | tail -n 1
$ grep -q "training status is 'failed_nonfinite_loss'" sel.json
~ "selected":{"t":"topk_softmax_05"}
~ "n_excluded":1
! excluded: training status is 'failed_nonfinite_loss'

%%% the same cell in two logs: the later on the command line wins
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ a=$(mkcell r1 t topk_softmax_025 0 "0.5 0.9")
$ b=$(mkcell r2 t topk_softmax_025 0 "0.5 0.4")
$ mkcell r2 t topk_softmax_05 0 "0.5 0.6" >/dev/null
$ sb-freeze -q --min-seeds 1 -o sel.json r1/*/val.ndjson r2/*/val.ndjson | tail -n 1
~ "selected":{"t":"topk_softmax_05"}
! superseded by cell

%%% an existing selection is never replaced silently (exit 1; the study used 2)
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkcell runs t topk_softmax_025 0 "0.5 0.6" >/dev/null
$ sb-freeze -q --min-seeds 1 -o sel.json runs/*/val.ndjson >/dev/null
$ cp sel.json before.json
$ sb-freeze -q --min-seeds 1 -o sel.json runs/*/val.ndjson || { rc=$?; cmp sel.json before.json || exit 99; exit $rc; }
? 1
! sel.json: a selection already exists; refusing to replace it (pass --force

%%% --force replaces and says so
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkcell runs t topk_softmax_025 0 "0.5 0.6" >/dev/null
$ sb-freeze -q --min-seeds 1 -o sel.json runs/*/val.ndjson >/dev/null
$ sb-freeze -q --force --min-seeds 1 -o sel.json runs/*/val.ndjson | tail -n 1
$ grep -q '"forced": true' sel.json
$ grep -q '"file_sha256": "' sel.json
~ "forced":true

%%% run.meta first on stdout, with the logs' hashes
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs t topk_softmax_025 0 "0.5 0.6")
$ sb-freeze -q --min-seeds 1 -o sel.json runs/*/val.ndjson >out
$ head -n 1 out | grep -c "\"sha256\":\"$(sha256sum <runs/$id/val.ndjson | cut -c1-64)\""
> 1

%%% a write error on stdout is exit 4
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ mkcell runs t topk_softmax_025 0 "0.5 0.6" >/dev/null
$ sb-freeze -q --min-seeds 1 -o sel.json runs/*/val.ndjson >/dev/full
? 4
! write error
