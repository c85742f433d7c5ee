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

t_done
