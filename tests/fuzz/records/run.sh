#!/usr/bin/env bash
# tests/fuzz/records/run.sh [SECONDS] [TARGET...] — fuzz the readers of the records and cells
# that a user or an earlier stage hands in (cells of every family, validation logs, the
# selection and its guard, the test-read ledger, sha256 sidecars) with libFuzzer (clang from
# Debian) under AddressSanitizer and UBSan.
#
# The library is compiled once with the sanitizers and coverage into $FUZZ_OUT/san-lib.a
# (default build/fuzz/; tests/fuzz/common.sh, shared with the other suite); each target
# (targets.h: cell vallog selection ledger sidecar switchmap) starts from the seeds in seeds/TARGET
# (with the dictionary of dict/: cell.dict for cells, records.dict for the others) and runs for SECONDS (default 60).
# Inputs that crash, leak, hang (-timeout=10) or break an invariant are written to
# crashers/TARGET/; keep them there (committed): tests/unit/test_records_fuzz.c replays every
# file under crashers/ and seeds/ in `make check`. SECONDS 0: build the fuzzers only.
# To fuzz on past a reported bug not fixed yet, name its invariant (the text after "fuzz
# invariant broken: ") in SB_FUZZ_SKIP, several separated by ';' (targets.h, fz_skipped).
set -eu -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(cell vallog selection ledger sidecar switchmap)
. "$here/../common.sh"
export SB_TOP=$top
fz_lib
for t in "${targets[@]}"; do
	d=$here/dict/records.dict
	[ "$t" != cell ] || d=$here/dict/cell.dict
	fz_target records "$t" "$secs" "$d"
done
exit $fz_crashed # 1 when a target found a crash (its input is in crashers/)
