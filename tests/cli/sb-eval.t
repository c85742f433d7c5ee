# sb-eval: the command line, cell.json, checkpoints, reuse, and the refusal of test files.
# Run directories are stand-ins (tests/fixtures/guard/lib.sh); evaluations with a real
# engine are in tests/sh/eval_e2e.sh and tests/unit/test_guard_evalrun.c.

%%% --help: synopsis, options, records, exit status, examples
$ sb-eval --help
~ Usage: sb-eval [-d DATA_DIR] [--device cpu|cuda] [-j THREADS] [--no-probe] [-q] [--set KEY=VALUE]... RUN_DIR...
~ RUN_DIR/val.ndjson: run.meta, one eval.epoch per saved epoch
~ Exit status: 0 ok; 1 refused (a dataset file with split=test)
~ Examples:
!! empty

%%% no run directories: usage error
$ sb-eval
? 2
! sb-eval: no run directories given

%%% a missing run directory
$ sb-eval -q nosuch
? 4
! nosuch/cell.json: No such file or directory

%%% a malformed cell.json is bad data, named
$ mkdir r
$ echo '{"cell_id":"x","task":"t"}' >r/cell.json
$ sb-eval -q r
? 3
! r/cell.json: missing field 'method'

%%% a test file where the pool should be: refused by its metadata, nothing written
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs guardtask softmax 0 "0.5 0.6")
$ rm runs/$id/val.ndjson runs/$id/val-correct-*.bits
$ mkdir -p d/guardtask
$ cp "$TOP/tests/fixtures/guard/data/guardtask/test.safetensors" d/guardtask/pool.safetensors
$ sb-eval -q -d d runs/$id || { rc=$?; test ! -e runs/$id/val.ndjson || exit 99; exit $rc; }
? 1
! d/guardtask/pool.safetensors: refusing to read the test split (only sb-test reads test data, after the freeze)

%%% an unchanged run directory: no data read, val.ndjson left as it is, records on stdout
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs guardtask softmax 0 "0.5 0.6")
$ touch -d '2001-01-01' runs/$id/val.ndjson
$ sb-eval -q -d /nonexistent runs/$id | tail -n +2 | cut -c1-60
$ test "$(stat -c %Y runs/$id/val.ndjson)" = "$(date -d 2001-01-01 +%s)"
> {"kind":"eval.epoch","v":1,"cell_id":"guardtask.softmax.s0.p
> {"kind":"eval.epoch","v":1,"cell_id":"guardtask.softmax.s0.p
> {"kind":"eval.done","v":1,"cell_id":"guardtask.softmax.s0.pl

%%% a bad --device is a usage error at once, even where nothing would be evaluated
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs guardtask softmax 0 "0.5 0.6")
$ sb-eval -q -d /nonexistent --device gpu runs/$id
? 2
! sb-eval: unknown device 'gpu' (expected cpu or cuda[:N][,tf32])

%%% a bad CUDA device option is a usage error
$ sb-eval -q --device cuda,fp16 nosuch
? 2
! unknown option (expected tf32 or fp32)

%%% a changed checkpoint is evaluated again (here: no data directory, so exit 4 shows the attempt)
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs guardtask softmax 0 "0.5 0.6")
$ echo changed >>runs/$id/epoch-002.safetensors
$ sb-eval -q -d /nonexistent runs/$id
? 4
! /nonexistent/guardtask/pool.safetensors: No such file or directory

%%% a damaged correctness bitmap is evaluated again
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs guardtask softmax 0 "0.5 0.6")
$ printf '\002' >runs/$id/val-correct-001.bits
$ sb-eval -q -d /nonexistent runs/$id
? 4
! /nonexistent/guardtask/pool.safetensors

%%% a checkpoint that is not the one sb-train recorded
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs guardtask softmax 0 "0.5 0.6")
$ printf '{"kind":"train.epoch","v":1,"epochs_completed":2,"checkpoint_sha256":"%064d"}\n' 0 >>runs/$id/train.ndjson
$ sb-eval -q runs/$id
? 3
! epoch-002.safetensors: SHA-256
! differs from the one train.ndjson recorded

%%% a checkpoint beyond the cell's budget
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs guardtask softmax 0 "0.5 0.6")
$ echo x >runs/$id/epoch-003.safetensors
$ sb-eval -q runs/$id
? 3
! beyond the cell's 2 epochs

%%% every run directory is attempted; the status is the first failure's
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs guardtask softmax 0 "0.5 0.6")
$ sb-eval -q nosuch runs/$id | grep -c eval.epoch
? 4
~ 2
! nosuch/cell.json

%%% run.meta first; stdout checked at exit
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs guardtask softmax 0 "0.5 0.6")
$ sb-eval -q runs/$id >/dev/full
? 4
! write error

%%% an edited cell.json is refused though no epoch changed (nothing evaluated): exit 3 naming it, val.ndjson left as it is
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs guardtask softmax 0 "0.5 0.6")
$ cp runs/$id/val.ndjson before
$ sed -i 's/"seed":0,/"seed":5,/' runs/$id/cell.json
$ sb-eval -q -d /nonexistent runs/$id >out || { rc=$?; cmp before runs/$id/val.ndjson || exit 99; grep -c '"kind":"eval' out || true; exit $rc; }
? 3
> 0
! sb-eval: runs/guardtask.softmax.s0.plain.compact.
! /cell.json: cell_id 'guardtask.softmax.s0.plain.compact.
! ' is not the one its fields hash to (guardtask.softmax.s5.plain.compact.

%%% stdout's run.meta names what its records came from: cell.json, every checkpoint, the val.ndjson whose records were kept (SHA-256, size)
$ . "$TOP/tests/fixtures/guard/lib.sh"
$ id=$(mkcell runs guardtask softmax 0 "0.5 0.6")
$ for f in cell.json epoch-001.safetensors epoch-002.safetensors val.ndjson; do printf '{"path":"runs/%s/%s","sha256":"%s","size_bytes":%s}\n' "$id" "$f" "$(sha256sum <runs/$id/$f | cut -c1-64)" "$(stat -c %s runs/$id/$f)"; done >want
$ sb-eval -q -d /nonexistent runs/$id >out
$ head -n 1 out >meta
$ grep -o '{"path":[^}]*}' meta | diff want -
$ grep -o '"device":"[^"]*","threads":[0-9]*' meta
> "device":"cpu","threads":1

%%% a real evaluation (-j 2): the run.meta of val.ndjson and of stdout name the pool and each checkpoint with their true sizes, and the evaluation's threads
$ printf '{"task":"guardtask","method":"softmax","seed":0,"epochs":2,"batch":8}\n' >cells.ndjson
$ sb-train -q -d "$TOP/tests/fixtures/guard/data" -o runs -j 1 cells.ndjson >/dev/null
$ r=$(ls -d runs/*)
$ sizes() { grep -o '"path":"[^"]*","sha256":"[0-9a-f]*","size_bytes":[0-9]*' | sed 's/"path":"\([^"]*\)","sha256":"\([0-9a-f]*\)","size_bytes":/\1 \2 /'; }
$ truth() { while read -r p h s; do echo "$p $(sha256sum <"$p" | cut -c1-64) $(stat -c %s "$p")"; done; }
$ sb-eval -q -d "$TOP/tests/fixtures/guard/data" -j 2 "$r" >out
$ head -n 1 out >meta
$ head -n 1 "$r/val.ndjson" | sizes >v; sizes <meta >s
$ truth <v | diff v -; truth <s | diff s -; diff v s
$ grep -c 'pool.safetensors \|epoch-00[12].safetensors ' v
$ grep -o '"threads":[0-9]*' meta; head -n 1 "$r/val.ndjson" | grep -o '"threads":[0-9]*'
> 3
> "threads":2
> "threads":2
