#!/bin/sh
# bench/norm/run.sh [SIGMA] [MIN_ROWS] [TRIALS] — build and run the normaliser benchmark (no Makefile).
set -eu
cd "$(dirname "$0")/../.."
mkdir -p build
gcc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -march=native -Ilib \
	bench/norm/bench_norm.c lib/attn_norm.c lib/attn_norm_avx512.c lib/attn_norm_avx2.c lib/attn_norm_ref.c lib/err.c lib/rng.c \
	-lm -o build/bench_norm
exec build/bench_norm "$@"
