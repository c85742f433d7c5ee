# tests/fuzz/common.sh — sourced by the lm and records suites' run.sh: the library compiled
# once with the sanitizers and coverage, and one suite's target built and fuzzed.
#
#   fz_lib                       $out/san-lib.a from lib/*.c (again when a lib/*.[ch] is newer);
#                                under a lock, so suites run at once share one build
#   fz_target SUITE T SECS [DICT]  build $out/fuzz_SUITE_T from fuzz.c (FZ_TARGET=fz_T), seed
#                                its corpus from seeds/T, fuzz it SECS seconds (0: build only);
#                                crashers go to crashers/T/, the log to $out/fuzz_SUITE_T.log;
#                                a crash sets fz_crashed=1
# The caller sets here (its directory) and top (the repository).
out=${FUZZ_OUT:-$top/build/fuzz}
cc=${FUZZ_CC:-clang}
san=(-g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
cflags=(-std=c11 -Wno-psabi -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -pthread -I"$top/lib"
	$(pkg-config --cflags yajl libarchive libcrypto openblas libcurl zlib))
libs=($(pkg-config --libs yajl libarchive libcrypto openblas libcurl zlib) -lm -lpthread)
lib=$out/san-lib.a
fz_crashed=0 # set when a target found a crash: run.sh then exits 1 (after fuzzing every target)

fz_lib() {
	mkdir -p "$out/san-obj"
	exec 9>"$out/san-lib.lock"
	flock 9
	if [ ! -f "$lib" ] || [ -n "$(find "$top/lib" -maxdepth 1 -name '*.[ch]' -newer "$lib" | head -n 1)" ]; then
		echo "== compiling lib/*.c with the sanitizers and coverage into $lib"
		rm -f "$lib" "$out"/san-obj/*.o
		local s
		for s in "$top"/lib/*.c; do
			"$cc" "${san[@]}" -fsanitize=fuzzer-no-link "${cflags[@]}" -c "$s" -o "$out/san-obj/$(basename "${s%.c}").o" &
			while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
		done
		wait
		ar rcs "$lib" "$out"/san-obj/*.o
	fi
	exec 9>&-
}

fz_target() {
	local suite=$1 t=$2 secs=$3 bin=$out/fuzz_$1_$2 log=$out/fuzz_$1_$2.log
	local dict=()
	[ -z "${4:-}" ] || dict=(-dict="$4")
	"$cc" "${san[@]}" -fsanitize=fuzzer "${cflags[@]}" -DFZ_TARGET=fz_$t "$here/fuzz.c" "$lib" "${libs[@]}" -o "$bin"
	mkdir -p "$out/corpus-$suite/$t" "$here/crashers/$t"
	cp -n "$here/seeds/$t"/* "$out/corpus-$suite/$t/" 2>/dev/null || true
	[ "$secs" != 0 ] || return 0
	echo "== fuzzing $t for ${secs}s"
	(cd "$out" && "$bin" "${dict[@]}" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
		-artifact_prefix="$here/crashers/$t/" -print_final_stats=1 "$out/corpus-$suite/$t" >"$log" 2>&1) || {
		tail -n 60 "$log"
		echo "== $t: crash found, see $here/crashers/$t/ and $log"
		fz_crashed=1
	}
	grep -E '(INITED|DONE) +cov|^stat::|^Done ' "$log" || true
}
