# sb-train: the command-line contract (DESIGN §8), cells and records.
# Datasets: build/tests/test_train --fixtures writes img (images 1x12x12, patch 4),
# txt (text, L 10), tst (a split=test file) and pre (pre-split text, seeds 0 and 1, 30
# training and 10 validation examples each) under $T/data.

%%% --help is complete: synopsis, options, records, exit status, examples
$ sb-train --help
~ Usage: sb-train [OPTIONS] [CELLS.ndjson | -]
~   -d, --data DIR
~   -j, --threads N
~ Records (stdout): run.meta
~ Exit status: 0
~ Examples:
!! empty

%%% --version
$ sb-train --version | grep -q '^sb-train '

%%% no cells: usage error with a hint
$ sb-train -o x
? 2
! sb-train: no cells
! Try 'sb-train --help' for more information.

%%% cell options need --task
$ sb-train --method softmax --seed 0
? 2
! need --task

%%% a cells file and flags together
$ sb-train --task img --method softmax --seed 0 cells.ndjson
? 2
! not both

%%% bad option value
$ sb-train -j many --task img --method softmax --seed 0
? 2
! invalid value for --threads

%%% unknown method from flags is a usage error
$ $TOP/build/tests/test_train --fixtures $T
$ sb-train -d $T/data -o $T/runs --task img --method softmaxx --seed 0
? 2
! softmaxx

%%% unknown field in a cells file names the line
$ $TOP/build/tests/test_train --fixtures $T
$ printf '{"task":"img","method":"softmax","seed":0,"epochs":1}\n{"task":"img","method":"softmax","seed":1,"epoch":1}\n' > $T/c.ndjson
$ sb-train -q -d $T/data -o $T/runs $T/c.ndjson
? 3
! c.ndjson:2: unknown cell field 'epoch'

%%% missing dataset
$ sb-train -q -d $T/nodata -o $T/runs --task img --method softmax --seed 0 --epochs 1
? 4
! nodata/img/pool.safetensors

%%% a test split is refused
$ $TOP/build/tests/test_train --fixtures $T
$ sb-train -q -d $T/data -o $T/runs --task tst --method softmax --seed 0 --epochs 1
? 1
! refusing to read the test split

%%% a pool whose metadata names another task is refused before anything trains (as sb-eval refuses it)
$ $TOP/build/tests/test_train --fixtures $T
$ mkdir -p $T/data/img2 && cp $T/data/img/pool.safetensors $T/data/img2/
$ sb-train -q -d $T/data -o $T/runs --task img2 --method softmax --seed 0 --epochs 1
? 3
! a dataset of task 'img', but the cell's task is 'img2'
$ test ! -e $T/runs/img2.softmax.s0.plain.compact.*/epoch-001.safetensors

%%% a cell from flags: run.meta first, train.epoch per epoch, train.done
$ $TOP/build/tests/test_train --fixtures $T
$ sb-train -q -d $T/data -o $T/runs --task img --method sparsemax --seed 0 --epochs 2 --batch 32 > $T/out
$ head -n 1 $T/out | grep -q '"kind":"run.meta"'
$ test $(grep -c '"kind":"train.epoch"' $T/out) = 2
$ grep '"kind":"train.done"' $T/out | grep -q '"status":"completed"'
$ ls $T/runs/img.sparsemax.s0.plain.compact.*/ | tr '\n' ' '
~ cell.json epoch-001.safetensors epoch-001.safetensors.sha256 epoch-002.optim.safetensors epoch-002.safetensors epoch-002.safetensors.sha256 train.ndjson
!! empty

%%% train.epoch: attention statistics averaged over every 16th batch and the last; lr of the epoch's first and last steps
$ $TOP/build/tests/test_train --fixtures $T
$ sb-train -q -d $T/data -o $T/runs --task img --method softmax --seed 4 --epochs 1 --batch 3 --schedule linear_decay > $T/out
$ grep -q '"n_train":128,' $T/runs/img.softmax.s4.*/cell.json
$ grep '"kind":"train.epoch"' $T/out | grep -q '"attention_batches":3,'
$ grep '"kind":"train.epoch"' $T/out | grep -q '"lr":0.001,"lr_end":2.32558139534'
$ grep '"kind":"train.epoch"' $T/out | grep -q '"attention_density":1,"attention_entropy":2.'

%%% checkpoints hash as their sidecars and as the records say
$ $TOP/build/tests/test_train --fixtures $T
$ sb-train -q -d $T/data -o $T/runs --task img --method softmax --seed 1 --epochs 1 --batch 64 > $T/out
$ cd $T/runs/img.softmax.s1.*/ && sha256sum -c epoch-001.safetensors.sha256
$ h=$(sha256sum $T/runs/img.softmax.s1.*/epoch-001.safetensors | cut -c1-64); grep -q "\"checkpoint_sha256\":\"$h\"" $T/out

%%% the cell id is stable and names the same cell for equal values written differently
$ $TOP/build/tests/test_train --fixtures $T
$ printf '{"task":"img","method":"topk_softmax","seed":2,"epochs":1,"batch":64,"lr":1e-3}\n' > $T/a.ndjson
$ printf '{"seed":2,"batch":64,"epochs":1,"lr":0.001,"method":"topk_softmax_025","task":"img","tier":"compact"}\n' > $T/b.ndjson
$ sb-train -q -d $T/data -o $T/runs $T/a.ndjson > $T/a.out
$ sb-train -q -d $T/data -o $T/runs $T/b.ndjson > $T/b.out
$ grep -q '"kind":"train.done"' $T/a.out
$ grep -q '"kind":"train.skip"' $T/b.out
$ ls $T/runs
> img.topk_softmax_025.s2.plain.compact.39c400cb

%%% cells from stdin; text task with masks excluded; HAE records alpha statistics
$ $TOP/build/tests/test_train --fixtures $T
$ printf '{"task":"txt","method":"headwise_adaptive_entmax","seed":0,"epochs":1,"batch":50,"mask":"exclude"}\n' | sb-train -q -d $T/data -o $T/runs - > $T/out
$ grep '"kind":"train.epoch"' $T/out | grep -q '"alpha_mean":1.'
$ grep -q '"modality":"text"' $T/runs/txt.*/cell.json

%%% a progress line on stderr unless -q
$ $TOP/build/tests/test_train --fixtures $T
$ sb-train -d $T/data -o $T/runs --task img --method softmax --seed 3 --epochs 1 --batch 64 > /dev/null
! sb-train: cell 1/1 img.softmax.s3.plain.compact.
! epoch 1/1 train loss

%%% an unavailable device is a usage error
$ $TOP/build/tests/test_train --fixtures $T
$ sb-train -q -d $T/data -o $T/runs --device tpu --task img --method softmax --seed 0
? 2
! unknown device 'tpu'

%%% a bad --device is a usage error before anything else is looked at (--ids)
$ printf '{"task":"img","method":"softmax","seed":0}\n' > cells.ndjson
$ sb-train --ids --device gpu cells.ndjson
? 2
! unknown device 'gpu'

%%% a bad --device with a missing data directory: still the usage error, not the I/O error
$ sb-train -q -d /nonexistent -o runs --device gpu --task img --method softmax --seed 0
? 2
! unknown device 'gpu'

%%% a CUDA index out of range is a usage error
$ sb-train -q -d /nonexistent -o runs --device cuda:256 --task img --method softmax --seed 0
? 2
! N in [0, 255]

%%% a CUDA index is digits only: a tab, a space or a sign before it is a usage error
$ for d in "$(printf 'cuda:\t1')" 'cuda: 1' 'cuda:+1' 'cuda:-0' 'cuda:'; do e=$(sb-train -q -d /nonexistent -o runs --device "$d" --task img --method softmax --seed 0 2>&1 >/dev/null || echo "exit $?"); grep -c 'N in \[0, 255\]' <<<"$e"; grep -c '^exit 2$' <<<"$e"; done
> 1
> 1
> 1
> 1
> 1
> 1
> 1
> 1
> 1
> 1

%%% alpha outside [1.05, 2] is a bad cell value (it was clamped: alpha 10 and 2 trained the same model under two ids)
$ printf '{"task":"img","method":"entmax_bisect","seed":0,"alpha":2}\n{"task":"img","method":"entmax_bisect","seed":0,"alpha":10}\n' > $T/c.ndjson
$ sb-train --ids $T/c.ndjson
? 3
! c.ndjson:2: field 'alpha' must be a number in [1.05, 2]

%%% alpha below 1.05 from a flag is a usage error stating the range
$ sb-train --ids --task img --method entmax_bisect --seed 0 --alpha 1.01
? 2
! invalid value for --alpha: '1.01' (a number in [1.05, 2])

%%% alpha for a method that does not take it is refused, as switch_epoch is (cell file: exit 3, FILE:LINE)
$ printf '{"task":"img","method":"softmax","seed":0,"alpha":1.5}\n' > $T/c.ndjson
$ sb-train --ids $T/c.ndjson
? 3
! c.ndjson:1: field 'alpha' is only for entmax_bisect (method 'softmax' does not use it)

%%% alpha for cosine_alpha (scheduled), entmax15 or HAE (learned) from flags: usage errors
$ for m in cosine_alpha entmax15 headwise_adaptive_entmax; do sb-train --ids --task img --method $m --seed 0 --alpha 1.5 2>&1 | grep -c "is only for entmax_bisect" || true; done
> 1
> 1
> 1

%%% entmax_bisect's alpha at the ends of its range: accepted, ids unchanged
$ sb-train --ids --task img --method entmax_bisect --seed 0 --alpha 2
$ sb-train --ids --task img --method entmax_bisect --seed 0 --alpha 1.05
> img.entmax_bisect.s0.plain.compact.f91765aa
> img.entmax_bisect.s0.plain.compact.d9847686

%%% -0 and 0 are one setting: one cell id (flags and cell fields), and cell.json writes 0 (below)
$ for v in 0 -0 -0.0 0e5; do sb-train --ids --task img --method softmax --seed 0 --weight-decay $v --dropout $v --val-fraction $v; done
> img.softmax.s0.plain.compact.26ef3306
> img.softmax.s0.plain.compact.26ef3306
> img.softmax.s0.plain.compact.26ef3306
> img.softmax.s0.plain.compact.26ef3306
$ printf '{"task":"img","method":"softmax","seed":0,"weight_decay":-0,"clip":-0.0,"val_fraction":0}\n{"task":"img","method":"softmax","seed":0,"weight_decay":0,"clip":0,"val_fraction":-0}\n' | sb-train --ids - 2>&1
> sb-train: cell img.softmax.s0.plain.compact.aa87df97 given twice: trained once
> img.softmax.s0.plain.compact.aa87df97

%%% range errors state the documented ranges (flags and cell fields)
$ for f in "--val-fraction -0.1" "--val-fraction 1" "--epochs -1" "--epochs 0" "--batch 0" "--dropout 1" "--lr 11" "--seed -1"; do sb-train --ids --task img --method softmax --seed 0 $f 2>&1 | head -n 1 || true; done
> sb-train: invalid value for --val-fraction: '-0.1' (a number in [0, 1))
> sb-train: invalid value for --val-fraction: '1' (a number in [0, 1))
> sb-train: invalid value for --epochs: '-1' (an integer in [1, 100000])
> sb-train: invalid value for --epochs: '0' (an integer in [1, 100000])
> sb-train: invalid value for --batch: '0' (an integer in [1, 1048576])
> sb-train: invalid value for --dropout: '1' (a number in [0, 0.99])
> sb-train: invalid value for --lr: '11' (a number in [0, 10])
> sb-train: invalid value for --seed: '-1' (an integer in [0, 9223372036854775807])
$ printf '{"task":"img","method":"softmax","seed":0,"val_fraction":-0.1}\n' | sb-train --ids -
? 3
! <stdin>:1: field 'val_fraction' must be a number in [0, 1)

%%% val_fraction 0 on a pool: no validation part, every example (of the limit) trains
$ $TOP/build/tests/test_train --fixtures $T
$ sb-train -q -d $T/data -o $T/runs --task img --method softmax --seed 0 --epochs 1 --batch 32 --limit 60 --val-fraction 0 > $T/out
$ grep -q '"n_train":60,"n_val":0,' $T/runs/img.softmax.s0.*/cell.json
$ grep -q '"kind":"train.done"' $T/out

%%% a negative zero is written to cell.json as 0 (the value the id hashes)
$ $TOP/build/tests/test_train --fixtures $T
$ sb-train -q -d $T/data -o $T/runs0 --task img --method softmax --seed 0 --epochs 1 --batch 32 --limit 60 --weight-decay -0 --val-fraction 0 > $T/out
$ grep -c '"weight_decay":0,' $T/runs0/img.softmax.s0.*/cell.json
> 1

%%% val_fraction 0 with a limit on a pre-split task is refused before anything trains, naming FILE:LINE
$ $TOP/build/tests/test_train --fixtures $T
$ printf '{"task":"pre","method":"softmax","seed":0,"epochs":1,"limit":20}\n{"task":"pre","method":"softmax","seed":0,"epochs":1,"limit":20,"val_fraction":0}\n' > $T/c.ndjson
$ sb-train -q -d $T/data -o $T/runs $T/c.ndjson > $T/out 2> $T/err || echo "exit $?"
$ wc -c < $T/out; test -e $T/runs || echo "no run directory"
$ grep -c "c.ndjson:2: cell pre.softmax.s0.plain.compact.[0-9a-f]*: val_fraction 0 with a limit on a pre-split task" $T/err
> exit 3
> 0
> no run directory
> 1

%%% ... from flags: a usage error; without a limit (its own validation part) or with val_fraction > 0 it trains
$ $TOP/build/tests/test_train --fixtures $T
$ sb-train -q -d $T/data -o $T/runs --task pre --method softmax --seed 1 --epochs 1 --limit 20 --val-fraction 0 2> $T/err || echo "exit $?"
$ grep -c "val_fraction 0 with a limit on a pre-split task" $T/err
$ sb-train -q -d $T/data -o $T/runs --task pre --method softmax --seed 1 --epochs 1 --val-fraction 0 > /dev/null
$ sb-train -q -d $T/data -o $T/runs --task pre --method softmax --seed 1 --epochs 1 --limit 20 > /dev/null
$ cat $T/runs/pre.*/cell.json | grep -o '"limit":[0-9]*,"val_fraction":[0-9.]*\|"n_train":[0-9]*,"n_val":[0-9]*' | paste -d ' ' - - | sort
> exit 2
> 1
> "limit":0,"val_fraction":0 "n_train":30,"n_val":10
> "limit":20,"val_fraction":0.2 "n_train":16,"n_val":4

# Resume: a run killed in epoch 2 (4 steps an epoch) leaves epoch 1, its optimiser state and
# its record; flip() changes one byte of a file (FILE OFFSET, negative: from the end).

%%% a damaged optimiser state to resume from: exit 3 naming it, train.failed on stdout, the run directory as it was
$ $TOP/build/tests/test_train --fixtures $T
$ flip() { local o=$2; [ "$o" -lt 0 ] && o=$(( $(stat -c %s "$1") + o )); local b=$(od -An -tu1 -j "$o" -N1 "$1" | tr -d ' '); printf "$(printf '\\%03o' $((b ^ 64)))" | dd of="$1" bs=1 seek="$o" conv=notrunc status=none; }
$ C="--task img --method softmax --seed 0 --epochs 2 --batch 32"
$ SB_TRAIN_STOP_AFTER_STEPS=6 sb-train -q -d $T/data -o $T/runs $C > /dev/null || echo "killed $?"
$ R=$(ls -d $T/runs/img.*); flip $R/epoch-001.optim.safetensors -5000; md5sum $R/* > $T/before
$ sb-train -q -d $T/data -o $T/runs $C > $T/out 2> $T/err || echo "exit $?"
$ md5sum --quiet -c $T/before && echo "run directory unchanged"
$ grep -c 'epoch-001.optim.safetensors: damaged: its data do not hash as its metadata says' $T/err
$ grep '"kind":"train.failed"' $T/out | grep -c 'epoch-001.optim.safetensors: damaged'
> killed 137
> exit 3
> run directory unchanged
> 1
> 1

%%% a damaged checkpoint to resume from: exit 3 naming it; not started over, epoch-001 not rewritten
$ $TOP/build/tests/test_train --fixtures $T
$ flip() { local o=$2; [ "$o" -lt 0 ] && o=$(( $(stat -c %s "$1") + o )); local b=$(od -An -tu1 -j "$o" -N1 "$1" | tr -d ' '); printf "$(printf '\\%03o' $((b ^ 64)))" | dd of="$1" bs=1 seek="$o" conv=notrunc status=none; }
$ C="--task img --method softmax --seed 0 --epochs 2 --batch 32"
$ SB_TRAIN_STOP_AFTER_STEPS=6 sb-train -q -d $T/data -o $T/runs $C > /dev/null || echo "killed $?"
$ R=$(ls -d $T/runs/img.*); flip $R/epoch-001.safetensors -5000; md5sum $R/* > $T/before
$ sb-train -q -d $T/data -o $T/runs $C > $T/out 2> $T/err || echo "exit $?"
$ md5sum --quiet -c $T/before && echo "run directory unchanged"
$ grep -c "epoch-001.safetensors: damaged: its SHA-256 is [0-9a-f]*..., train.ndjson recorded [0-9a-f]*... for epoch 1" $T/err
$ grep '"kind":"train.failed"' $T/out | grep -c 'epoch-001.safetensors: damaged'
> killed 137
> exit 3
> run directory unchanged
> 1
> 1

%%% a missing optimiser state means a fresh start (documented), with the same bits
$ $TOP/build/tests/test_train --fixtures $T
$ C="--task img --method softmax --seed 0 --epochs 2 --batch 32"
$ SB_TRAIN_STOP_AFTER_STEPS=6 sb-train -q -d $T/data -o $T/runs $C > /dev/null || echo "killed $?"
$ R=$(ls -d $T/runs/img.*); rm $R/epoch-001.optim.safetensors; md5sum $R/epoch-001.safetensors > $T/before
$ sb-train -q -d $T/data -o $T/runs $C > $T/out
$ md5sum --quiet -c $T/before && echo "epoch 1 the same"
$ grep -c '"kind":"train.resume"' $T/out || true
$ grep -c '"kind":"train.epoch"' $T/out
> killed 137
> epoch 1 the same
> 0
> 2

%%% an optimiser state written before the checksums (no data_sha256): resumed, with a warning, to the same bits
$ $TOP/build/tests/test_train --fixtures $T
$ C="--task img --method softmax --seed 0 --epochs 2 --batch 32"
$ sb-train -q -d $T/data -o $T/whole $C > /dev/null
$ SB_TRAIN_STOP_AFTER_STEPS=6 sb-train -q -d $T/data -o $T/runs $C > /dev/null || echo "killed $?"
$ O=$(ls $T/runs/img.*/epoch-001.optim.safetensors); n=$(od -An -tu8 -N8 $O | tr -d ' '); h=$(dd if=$O bs=1 skip=8 count=$n status=none)
$ pre=${h%%,\"checkpoint_sha256\"*}; rest=${h#*\"data_sha256\":\"}; rest=${rest:65}; pad=$(printf "%$(( ${#h} - ${#pre} - ${#rest} ))s" "")
$ printf '%s' "$pre$pad$rest" | dd of=$O bs=1 seek=8 conv=notrunc status=none; grep -c data_sha256 $O || true
$ sb-train -q -d $T/data -o $T/runs $C > /dev/null 2> $T/err
$ grep -c 'epoch-001.optim.safetensors: written without a checksum (by an earlier sb-train)' $T/err
$ cd $T/whole/img.*/ && for f in epoch-00*.safetensors; do cmp $f $T/runs/img.*/$f && echo "$f the same"; done
> killed 137
> 0
> 1
> epoch-001.safetensors the same
> epoch-002.optim.safetensors the same
> epoch-002.safetensors the same

%%% resumed on another dataset file: exit 3 naming both, a train.failed record, the other cells go on
$ $TOP/build/tests/test_train --fixtures $T
$ printf '{"task":"img","method":"softmax","seed":0,"epochs":2,"batch":32}\n{"task":"img","method":"softmax","seed":1,"epochs":1,"batch":32}\n' > $T/c.ndjson
$ SB_TRAIN_STOP_AFTER_STEPS=6 sb-train -q -j 1 -d $T/data -o $T/runs $T/c.ndjson > /dev/null || echo "killed $?"
$ mkdir -p $T/data2/img && cp $T/data/img/pool.safetensors $T/data2/img/ && printf 'x' >> $T/data2/img/pool.safetensors
$ R=$(ls -d $T/runs/img.softmax.s0.*); md5sum $R/* > $T/before
$ sb-train -q -j 1 -d $T/data2 -o $T/runs $T/c.ndjson > $T/out 2> $T/err || echo "exit $?"
$ md5sum --quiet -c $T/before && echo "run directory unchanged"
$ grep '"kind":"train.failed"' $T/out | grep -c '"cell_id":"img.softmax.s0.*the run started on the dataset file with SHA-256'
$ grep -c '"kind":"train.done","v":1,"cell_id":"img.softmax.s1' $T/out
$ grep -c "data2/img/pool.safetensors" $T/err
> killed 137
> exit 3
> run directory unchanged
> 1
> 1
> 1

%%% cell id numbers: C's %.15g (else %.16g, %.17g), so lr 1e-7 is hashed as 1e-07 (docs/sb-train.md)
$ sb-train --ids --task img --method softmax --seed 0 --lr 1e-7 --clip 1e30 | sed 's/.*\.//'
$ printf '%s' '{"alpha":1.5,"arch":"plain","batch":256,"clip":1e+30,"dropout":0.1,"epochs":30,"limit":0,"lr":1e-07,"mask":"margin","method":"softmax","schedule":"constant","seed":0,"task":"img","tier":"compact","val_fraction":0.2,"weight_decay":0.0001}' | sha256sum | cut -c1-8
$ sb-train --ids --task img --method softmax --seed 0 --lr 0.30000000000000004 | sed 's/.*\.//'
$ printf '%s' '{"alpha":1.5,"arch":"plain","batch":256,"clip":5,"dropout":0.1,"epochs":30,"limit":0,"lr":0.30000000000000004,"mask":"margin","method":"softmax","schedule":"constant","seed":0,"task":"img","tier":"compact","val_fraction":0.2,"weight_decay":0.0001}' | sha256sum | cut -c1-8
> 29864435
> 29864435
> 6af4cf5c
> 6af4cf5c

%%% an unknown method lists what is accepted: any top-k / bottom-k ratio and the schedules
$ sb-train --ids --task img --method topk_softmax_x --seed 0
? 2
! field 'method': unknown method 'topk_softmax_x' (normalisers: softmax, topk_softmax_R and bottomk_softmax_R (R: a ratio in (0, 1] as its digits without the point, e.g. 0125, 025, 05, 1; bare topk_softmax and bottomk_softmax: 025), sparsemax, entmax15, entmax_bisect, headwise_adaptive_entmax; schedules: median_switch, early_accuracy_switch, entropy_switch, mechanistic_switch, cosine_alpha)

%%% top-k and bottom-k ratios: the canonical name drops trailing zeros; bottomk_softmax_05 and other ratios are accepted
$ sb-train --ids --task img --method topk_softmax_0250 --seed 0 | cut -d. -f2
$ sb-train --ids --task img --method bottomk_softmax_05 --seed 0 | cut -d. -f2
$ sb-train --ids --task img --method topk_softmax_0375 --seed 0 | cut -d. -f2
> topk_softmax_025
> bottomk_softmax_05
> topk_softmax_0375
