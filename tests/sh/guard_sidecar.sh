#!/usr/bin/env bash
# The single read used up by a test file's sidecar (sb-test records "started" before opening a
# test file; what it can check before, it must). The read refuses a test file whose
# TEST.sha256 sidecar is not a sha256sum line naming test.safetensors, but found that only
# after the read counted: a sidecar regenerated as `sha256sum data/T/test.safetensors >
# data/T/test.safetensors.sha256` (which `sha256sum -c` run from the same place accepts) cost
# the read. Now the sidecar (not the test file) is read and checked before anything is recorded.
. "$(dirname "$0")/../shlib.sh"
. "$TOP/tests/fixtures/guard/lib.sh"

mkstudy "$T/pristine"
t_result $? "a study is frozen"
side=data/guardtask/test.safetensors.sha256
try() { # name: run sb-test on $T/s from inside it, expect a refusal before the read
	local name=$1
	(cd "$T/s" && sb-test -q -s selection.json -d data -o test runs >"$T/out" 2>"$T/err")
	local rc=$?
	{ [ $rc -eq 3 ] || [ $rc -eq 4 ]; } && grep -q "test.safetensors.sha256" "$T/err" && grep -q "nothing was read" "$T/err" &&
		[ ! -e "$T/s/selection.reads.ndjson" ] && [ ! -s "$T/out" ]
	t_result $? "$name: exit 3 or 4 before the read, the ledger unwritten (exit $rc: $(head -c 250 "$T/err"))"
}
rm -rf "$T/s" && cp -a "$T/pristine" "$T/s"
(cd "$T/s" && sha256sum data/guardtask/test.safetensors >"$side")
try "a sidecar naming the test file by its path from the study"
rm -rf "$T/s" && cp -a "$T/pristine" "$T/s"
: >"$T/s/$side"
try "an empty sidecar"
rm -rf "$T/s" && cp -a "$T/pristine" "$T/s"
rm "$T/s/$side" && mkdir "$T/s/$side"
try "a sidecar that is a directory"
rm -rf "$T/s" && cp -a "$T/pristine" "$T/s"
rm "$T/s/$side" && mkfifo "$T/s/$side"
(cd "$T/s" && timeout 20 sb-test -q -s selection.json -d data -o test runs >"$T/out" 2>"$T/err")
rc=$?
[ $rc -eq 4 ] && grep -q "test.safetensors.sha256: not a regular file" "$T/err" && grep -q "nothing was read" "$T/err" &&
	[ ! -e "$T/s/selection.reads.ndjson" ] && [ ! -s "$T/out" ]
t_result $? "a sidecar that is a FIFO without a writer: exit 4 naming it, the ledger unwritten (exit $rc: $(head -c 250 "$T/err"))"
# controls: a good sidecar, and none at all: the read is recorded (it then fails on the stand-in
# checkpoints, after the guard)
for how in good none; do
	rm -rf "$T/s" && cp -a "$T/pristine" "$T/s"
	[ $how = none ] && rm "$T/s/$side"
	(cd "$T/s" && sb-test -q -s selection.json -d data -o test runs >"$T/out" 2>"$T/err")
	rc=$?
	[ $rc -ne 1 ] && ! grep -q "sha256:1" "$T/err" && grep -q '"status":"started"' "$T/s/selection.reads.ndjson"
	t_result $? "control: sidecar $how: the read goes on (exit $rc: $(head -c 200 "$T/err"))"
done
t_done
