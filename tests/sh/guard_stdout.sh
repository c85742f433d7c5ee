#!/usr/bin/env bash
# A read used up by stdout (PROTOCOL A6: the test split is read once). sb-test wrote each line
# to OUT_DIR/test.ndjson and to stdout together, and a stdout error (stdout on /dev/full or
# closed) aborted the output file: the read was recorded as started and failed, and its
# results were lost, for an error that has nothing to do with the read. Now test.ndjson is
# committed first, the ledger records the read completed, and the stdout error is exit 4.
# A small real study (Fashion-MNIST from the mirror; skipped without it).
. "$(dirname "$0")/../shlib.sh"

MIRROR=${SB_FMNIST_MIRROR:-/usr/share/datasets/fashion-mnist}
if [ ! -r "$MIRROR/train-images-idx3-ubyte.gz" ] || [ ! -x "$TOP/bin/sb-train" ]; then
	t_result 0 "# SKIP no Fashion-MNIST mirror at $MIRROR, or sb-train not built"
	t_done
fi
cd "$T" || exit 1
sb-fetch -q -m "$MIRROR" -o p/data fashion_mnist >/dev/null 2>"$T/err"
t_result $? "sb-fetch fashion_mnist ($(tail -c 200 "$T/err"))"
for m in softmax topk_softmax_0125 topk_softmax_025 topk_softmax_05 sparsemax entmax15 headwise_adaptive_entmax; do
	printf '{"task":"fashion_mnist","method":"%s","seed":0,"epochs":1,"limit":300,"batch":64}\n' "$m"
done >cells.ndjson
(cd p && sb-train -q -d data -o runs -j 2 ../cells.ndjson >/dev/null 2>"$T/err" && sb-eval -q -d data runs/*/ >/dev/null 2>>"$T/err" &&
	sleep 0.05 && sb-freeze -q --min-seeds 1 -o study/selection.json runs/*/val.ndjson >/dev/null 2>>"$T/err")
t_result $? "a one-seed study trained, evaluated and frozen ($(tail -c 200 "$T/err"))"

# read REDIR NAME: a read of a fresh copy with stdout redirected as REDIR says
check_read() {
	local how=$1 name=$2 rc
	rm -rf s && cp -a p s
	case $how in
	full) (cd s && sb-test -q -s study/selection.json -d data -o study/test runs >/dev/full 2>"$T/err") ;;
	closed) (cd s && sb-test -q -s study/selection.json -d data -o study/test runs >&- 2>"$T/err") ;;
	esac
	rc=$?
	local f=s/study/test/test.ndjson
	[ $rc -eq 4 ] && grep -q "complete and recorded in study/test/test.ndjson" "$T/err" && [ -s "$f" ] &&
		[ "$(grep -c '"kind":"test.cell"' "$f")" = 5 ] &&
		grep -q '"status":"completed".*"output_sha256":"'"$(sha256sum <"$f" | cut -c1-64)"'"' s/study/selection.reads.ndjson &&
		! grep -q '"status":"failed"' s/study/selection.reads.ndjson
	t_result $? "stdout $name: exit 4, test.ndjson kept (5 cells), the ledger says completed with its hash (exit $rc: $(head -c 300 "$T/err"))"
}
check_read full "on /dev/full"
check_read closed "closed"
# control: the stdout copy is the file, line for line
rm -rf s && cp -a p s
(cd s && sb-test -q -s study/selection.json -d data -o study/test runs >"$T/stdout" 2>"$T/err")
rc=$?
[ $rc -eq 0 ] && cmp -s "$T/stdout" s/study/test/test.ndjson
t_result $? "control: a read to a good stdout: exit 0, stdout = test.ndjson (exit $rc: $(head -c 200 "$T/err"))"
t_done
