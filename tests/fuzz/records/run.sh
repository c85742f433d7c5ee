#!/usr/bin/env bash
# tests/fuzz/records/run.sh [SECONDS] [TARGET...] — fuzz the readers of the records and cells
# that a user or an earlier stage hands in (cells of every family, validation logs, the
# selection and its guard, the test-read ledger, sha256 sidecars) with libFuzzer (clang from
# Debian) under AddressSanitizer and UBSan.
#
# The library is compiled once with the sanitizers and coverage into $FUZZ_OUT/records-lib.a
# (default build/fuzz/); each target (targets.h: cell vallog selection ledger sidecar) starts
# from the seeds in seeds/TARGET (with the dictionary of dict/: cell.dict for cells,
# records.dict for the others) and runs for SECONDS (default 60).
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
[ ${#targets[@]} -gt 0 ] || targets=(cell vallog selection ledger sidecar)
out=${FUZZ_OUT:-$top/build/fuzz}
cc=${FUZZ_CC:-clang}
mkdir -p "$out/records-obj"
san=(-g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
cflags=(-std=c11 -Wno-psabi -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -pthread -I"$top/lib"
	$(pkg-config --cflags yajl libarchive libcrypto openblas libcurl zlib))
libs=($(pkg-config --libs yajl libarchive libcrypto openblas libcurl zlib) -lm -lpthread)
lib=$out/records-lib.a
if [ ! -f "$lib" ] || [ -n "$(find "$top/lib" -maxdepth 1 -name '*.[ch]' -newer "$lib" | head -n 1)" ]; then
	echo "== compiling lib/*.c with the sanitizers and coverage into $lib"
	rm -f "$lib" "$out"/records-obj/*.o
	for s in "$top"/lib/*.c; do
		"$cc" "${san[@]}" -fsanitize=fuzzer-no-link "${cflags[@]}" -c "$s" -o "$out/records-obj/$(basename "${s%.c}").o" &
		while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
	done
	wait
	ar rcs "$lib" "$out"/records-obj/*.o
fi
for t in "${targets[@]}"; do
	bin=$out/fuzz_records_$t
	"$cc" "${san[@]}" -fsanitize=fuzzer "${cflags[@]}" -DFZ_TARGET=fz_$t "$here/fuzz.c" "$lib" "${libs[@]}" -o "$bin"
	mkdir -p "$out/corpus-records/$t" "$here/crashers/$t"
	cp -n "$here/seeds/$t"/* "$out/corpus-records/$t/" 2>/dev/null || true
	[ "$secs" != 0 ] || continue
	dict=(-dict="$here/dict/records.dict")
	[ "$t" != cell ] || dict=(-dict="$here/dict/cell.dict")
	echo "== fuzzing $t for ${secs}s"
	(cd "$out" && "$bin" "${dict[@]}" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
		-artifact_prefix="$here/crashers/$t/" -print_final_stats=1 "$out/corpus-records/$t" >"$out/fuzz_records_$t.log" 2>&1) || {
		tail -n 60 "$out/fuzz_records_$t.log"
		echo "== $t: crash found, see $here/crashers/$t/ and $out/fuzz_records_$t.log"
	}
	grep -E '(INITED|DONE) +cov|^stat::|^Done ' "$out/fuzz_records_$t.log" || true
done
