#!/usr/bin/env bash
# tests/fuzz/lm/run.sh [SECONDS] [TARGET...] — fuzz the parsers of user-supplied LM files
# (tokenizer.json and text, config.json, model.safetensors.index.json, safetensors, JSON,
# NDJSON) with libFuzzer (clang from Debian) under AddressSanitizer and UBSan.
#
# The library is compiled once with the sanitizers and coverage into $FUZZ_OUT/san-lib.a
# (default build/fuzz/; tests/fuzz/common.sh, shared with the other suite); each target
# (targets.h: tok toktext hfconfig hfindex safetensors json ndjson) starts from the seeds in seeds/TARGET (with the dictionary of dict/ for the
# JSON files the loaders read) and runs for SECONDS (default 60).
# Inputs that crash, leak, hang (-timeout=10) or break an invariant are written to
# crashers/TARGET/; keep them there (committed): tests/unit/test_lm_fuzz.c replays every
# file under crashers/ and seeds/ in `make check`. SECONDS 0: build the fuzzers only.
set -eu -o pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tok toktext hfconfig hfindex safetensors json ndjson)
. "$here/../common.sh"
export SB_TOP=$top
fz_lib
for t in "${targets[@]}"; do
	d=""
	case $t in
	tok) d=$here/dict/tok.dict ;;
	hfconfig | hfindex) d=$here/dict/hf.dict ;;
	safetensors) d=$here/dict/st.dict ;;
	esac
	fz_target lm "$t" "$secs" "$d"
done
exit $fz_crashed # 1 when a target found a crash (its input is in crashers/)
