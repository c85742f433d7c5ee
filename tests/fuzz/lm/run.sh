#!/usr/bin/env bash
# tests/fuzz/lm/run.sh [SECONDS] [TARGET...] — fuzz the parsers of user-supplied LM files
# (tokenizer.json and text, config.json, model.safetensors.index.json, safetensors, JSON,
# NDJSON) with libFuzzer (clang from Debian) under AddressSanitizer and UBSan.
#
# The library is compiled once with the sanitizers and coverage into $FUZZ_OUT/lm-lib.a
# (default build/fuzz/); each target (targets.h: tok toktext hfconfig hfindex safetensors
# json ndjson) starts from the seeds in seeds/TARGET (with the dictionary of dict/ for the
# JSON files the loaders read) and runs for SECONDS (default 60).
# Inputs that crash, leak, hang (-timeout=10) or break an invariant are written to
# crashers/TARGET/; keep them there (committed): tests/unit/test_lm_fuzz.c replays every
# file under crashers/ and seeds/ in `make check`.
set -eu -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tok toktext hfconfig hfindex safetensors json ndjson)
out=${FUZZ_OUT:-$top/build/fuzz}
cc=${FUZZ_CC:-clang}
mkdir -p "$out/lm-obj"
san=(-g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
cflags=(-std=c11 -Wno-psabi -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -pthread -I"$top/lib"
	$(pkg-config --cflags yajl libarchive libcrypto openblas libcurl zlib))
libs=($(pkg-config --libs yajl libarchive libcrypto openblas libcurl zlib) -lm -lpthread)
lib=$out/lm-lib.a
if [ ! -f "$lib" ] || [ -n "$(find "$top/lib" -maxdepth 1 -name '*.[ch]' -newer "$lib" | head -n 1)" ]; then
	echo "== compiling lib/*.c with the sanitizers and coverage into $lib"
	rm -f "$lib" "$out"/lm-obj/*.o
	for s in "$top"/lib/*.c; do
		"$cc" "${san[@]}" -fsanitize=fuzzer-no-link "${cflags[@]}" -c "$s" -o "$out/lm-obj/$(basename "${s%.c}").o" &
		while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
	done
	wait
	ar rcs "$lib" "$out"/lm-obj/*.o
fi
export SB_TOP=$top
for t in "${targets[@]}"; do
	bin=$out/fuzz_lm_$t
	"$cc" "${san[@]}" -fsanitize=fuzzer "${cflags[@]}" -DFZ_TARGET=fz_$t "$here/fuzz.c" "$lib" "${libs[@]}" -o "$bin"
	mkdir -p "$out/corpus-lm/$t" "$here/crashers/$t"
	cp -n "$here/seeds/$t"/* "$out/corpus-lm/$t/" 2>/dev/null || true
	dict=()
	case $t in
	tok) dict=(-dict="$here/dict/tok.dict") ;;
	hfconfig | hfindex) dict=(-dict="$here/dict/hf.dict") ;;
	safetensors) dict=(-dict="$here/dict/st.dict") ;;
	esac
	echo "== fuzzing $t for ${secs}s"
	(cd "$out" && "$bin" "${dict[@]}" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
		-artifact_prefix="$here/crashers/$t/" -print_final_stats=1 "$out/corpus-lm/$t" >"$out/fuzz_lm_$t.log" 2>&1) || {
		tail -n 60 "$out/fuzz_lm_$t.log"
		echo "== $t: crash found, see $here/crashers/$t/ and $out/fuzz_lm_$t.log"
	}
	grep -E '(INITED|DONE) +cov|^stat::|^Done ' "$out/fuzz_lm_$t.log" || true
done
