#!/usr/bin/env bash
# tests/fuzz/fetch/run.sh [SECONDS] [TARGET...] — fuzz sb-fetch's decoders with
# libFuzzer (clang from Debian) under AddressSanitizer and UBSan.
#
# Each target (targets.h: idx npy mat libsvm cifar news archive) starts from the
# seeds in seeds/TARGET and runs for SECONDS (default 60). Inputs that crash are
# written to crashers/TARGET/; keep them there (committed): tests/unit/
# test_fetch_fuzz.c replays every file under crashers/ and seeds/ in `make check`.
set -eu -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(idx npy mat libsvm cifar news archive)
out=${FUZZ_OUT:-$top/build/fuzz}
mkdir -p "$out"
cflags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -std=c11
	-D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I"$top/lib")
srcs=("$top"/lib/fetch_archive.c "$top"/lib/fetch_formats.c "$top"/lib/fetch_mat.c "$top"/lib/fetch_news.c
	"$top"/lib/err.c "$top"/lib/rng.c)
libs=($(pkg-config --libs libarchive zlib) -lm)
crashed=0
for t in "${targets[@]}"; do
	bin=$out/fuzz_$t
	clang "${cflags[@]}" -DFZ_TARGET=fz_$t "$here/fuzz.c" "${srcs[@]}" "${libs[@]}" -o "$bin"
	mkdir -p "$out/corpus/$t" "$here/crashers/$t"
	cp -n "$here/seeds/$t"/* "$out/corpus/$t/" 2>/dev/null || true
	echo "== fuzzing $t for ${secs}s"
	(cd "$out" && "$bin" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
		-artifact_prefix="$here/crashers/$t/" -print_final_stats=1 "$out/corpus/$t" 2>&1 | tail -n 12) || {
		echo "== $t: crash found, see $here/crashers/$t/"
		crashed=1
	}
done
exit $crashed # 1 when a target found a crash (its input is in crashers/)
