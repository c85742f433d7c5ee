#!/usr/bin/env bash
# Proof that a refused test read reads nothing: no test file is opened (nor
# stat'ed, nor anything else under the data directory touched) when the guard
# refuses. Two independent methods, each with a positive control showing it
# would have caught an open:
#   1. strace -f -e trace=%file: no file system call names a path under the
#      data directory (control: the same trace of sb-eval shows its pool);
#   2. the test file replaced by a FIFO: opening a FIFO with no writer blocks,
#      so a program that opened it would hang until `timeout` kills it (124);
#      a refusal comes back at once with exit 1 (control: sb-eval on a FIFO
#      pool hangs).
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/guard/lib.sh"

mkstudy "$T/pristine"
t_result $? "a study is frozen"
fresh() { rm -rf "$T/s"; cp -a "$T/pristine" "$T/s"; }
sha=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sha256"])' "$T/pristine/selection.json")

# the attacks, as functions run on a fresh copy in $T/s
a_edit() { sed -i 's/"min_seeds": 3/"min_seeds": 2/' "$T/s/selection.json"; }
a_append() { head -n 2 "$(ls "$T"/s/runs/*/val.ndjson | head -n 1)" | tail -n 1 >>"$(ls "$T"/s/runs/*/val.ndjson | head -n 1)"; }
a_touch() { touch -d "@$(($(date +%s) + 5))" "$(ls "$T"/s/runs/*/val.ndjson | tail -n 1)"; } # beyond the 1.0 s allowance
a_delete() { rm "$(ls "$T"/s/runs/*/val.ndjson | tail -n 1)"; }
a_reread() {
	printf '{"kind":"test.read","v":1,"status":"started","read":1,"time":"T","argv":["sb-test"],"selection_sha256":"%s","out_dir":"test"}\n' \
		"$sha" >"$T/s/selection.reads.ndjson"
}
a_checkpoint() { echo x >>"$(ls "$T"/s/runs/guardtask.softmax.s0.*/epoch-003.safetensors)"; }
attacks="a_edit a_append a_touch a_delete a_reread a_checkpoint"

sbtest() { sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/out" "$T/s/runs"; }

# ---- method 1: strace ----
if command -v strace >/dev/null && strace -f -qq -o /dev/null true 2>/dev/null; then
	traced() { strace -f -qq -e trace=%file -o "$T/trace" "$@"; }
	# controls: the trace sees a dataset open, by path, under the data directory
	fresh
	run=$(ls -d "$T"/s/runs/guardtask.softmax.s0.*)
	rm "$run/val.ndjson"
	traced sb-eval -q -d "$T/s/data" "$run" >/dev/null 2>&1
	grep -q "\"$T/s/data/guardtask/pool.safetensors\"" "$T/trace"
	t_result $? "strace control: sb-eval's open of the pool is seen"
	traced head -c 1 "$T/s/data/guardtask/test.safetensors" >/dev/null
	grep -q "\"$T/s/data/guardtask/test.safetensors\"" "$T/trace"
	t_result $? "strace control: an open of the test file is seen"
	for a in $attacks; do
		fresh
		$a
		traced sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/out" "$T/s/runs" >/dev/null 2>"$T/err"
		rc=$?
		n=$(grep -v execve "$T/trace" | grep -c "$T/s/data")
		[ $rc -eq 1 ] && grep -q "refused by the guard" "$T/err" && [ "$n" -eq 0 ]
		t_result $? "strace: $a refused (exit $rc) with no file call under the data directory (execve of the argv aside) ($n)"
	done
	# a live control: the guard passing, sb-test records the read, then opens the test file (and
	# fails on the stand-in checkpoints, which are not models: exit 3, recorded as failed)
	fresh
	traced sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/out" "$T/s/runs" >/dev/null 2>"$T/err"
	rc=$?
	grep -q "\"$T/s/data/guardtask/test.safetensors\"" "$T/trace" && grep -q '"status":"started"' "$T/s/selection.reads.ndjson" &&
		grep -q '"status":"failed"' "$T/s/selection.reads.ndjson"
	t_result $? "strace: the guard passing, sb-test records the read and opens the test file (exit $rc)"
else
	echo "ok - # SKIP strace unavailable (ptrace not permitted or not installed): method 2 still runs"
fi

# ---- method 2: the test file is a FIFO ----
fifo_data() {
	rm -f "$T/s/data/guardtask/test.safetensors" "$T/s/data/guardtask/test.safetensors.sha256"
	mkfifo "$T/s/data/guardtask/test.safetensors"
}
fresh
run=$(ls -d "$T"/s/runs/guardtask.softmax.s0.*)
rm "$run/val.ndjson"
rm -f "$T/s/data/guardtask/pool.safetensors"*
mkfifo "$T/s/data/guardtask/pool.safetensors"
timeout 3 sb-eval -q -d "$T/s/data" "$run" >/dev/null 2>&1
rc=$?
[ $rc -eq 124 ]
t_result $? "FIFO control: a program that opens the FIFO hangs until timeout (exit $rc)"
for a in $attacks; do
	fresh
	fifo_data
	$a
	timeout 20 sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/out" "$T/s/runs" >/dev/null 2>"$T/err"
	rc=$?
	[ $rc -eq 1 ] && grep -q "refused by the guard" "$T/err"
	t_result $? "FIFO: $a refused at once (exit $rc, 124 would mean it opened the test file)"
done

# ---- set-up errors are found before the read is recorded (no ledger line, so no read used up) ----
# the guard passes in each case; only the device or the data directory is wrong
noledger() { [ ! -e "$T/s/selection.reads.ndjson" ]; }
fresh
sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/out" --device tpu "$T/s/runs" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 2 ] && grep -q "unknown device 'tpu'" "$T/err" && noledger && [ ! -e "$T/s/out" ]
t_result $? "--device tpu: usage error (exit $rc), no read recorded, no output directory"
fresh
sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/out" --device cuda:x "$T/s/runs" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 2 ] && grep -q "cuda:x" "$T/err" && noledger
t_result $? "--device cuda:x: usage error (exit $rc), no read recorded"
fresh
sb-test -q -s "$T/s/selection.json" -d "$T/nonexist" -o "$T/s/out" "$T/s/runs" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 4 ] && grep -q "$T/nonexist/guardtask/test.safetensors: No such file" "$T/err" && grep -q "nothing was read" "$T/err" &&
	noledger && [ ! -e "$T/s/out" ]
t_result $? "-d a missing directory: exit $rc naming the test file, no read recorded ($(head -c 200 "$T/err"))"
fresh
rm -f "$T/s/data/guardtask/test.safetensors" && mkdir "$T/s/data/guardtask/test.safetensors"
sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/out" "$T/s/runs" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 4 ] && grep -q "not a regular file" "$T/err" && noledger
t_result $? "the test file a directory: exit $rc, no read recorded"
fresh
touch "$T/s/afile"
sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/afile/test" "$T/s/runs" >/dev/null 2>"$T/err"
rc=$?
[ $rc -eq 4 ] && grep -q "$T/s/afile.*nothing was read" "$T/err" && noledger
t_result $? "-o under a file: exit $rc naming it, no read recorded ($(head -c 200 "$T/err"))"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
	fresh
	sb-test -q -s "$T/s/selection.json" -d "$T/s/data" -o "$T/s/out" --device cuda "$T/s/runs" >/dev/null 2>"$T/err"
	rc=$?
	[ $rc -eq 5 ] || [ $rc -eq 2 ] # 5: no GPU; 2: a build without the CUDA backend
	ok=$?
	[ $ok -eq 0 ] && noledger
	t_result $? "--device cuda without a GPU: exit $rc, no read recorded"
else
	echo "ok - # SKIP a GPU is present: --device cuda would read"
fi

t_done
