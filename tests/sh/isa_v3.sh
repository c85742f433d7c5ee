#!/usr/bin/env bash
# isa_v3.sh — the x86-64-v3 (AVX2 + FMA, no AVX-512) build: the build AVX2-only machines run
# (AMD Zen 2/3, older Intel) and, with the portable normaliser kernels throughout, the one
# tests/gpu/bundle.sh ships to GPU hosts, whose CPU backend is the reference the CUDA checks
# compare against. `make V3=1` builds it into build/v3/; this
# script checks that it is an AVX2 build, that the numeric unit tests pass in it, and that it
# trains the same bits as the native build (`make`) where the engine promises that:
#  - the products, layer norm, GELU, dropout, attention, AdamW: every method but the
#    normaliser's own kernels; sparsemax's kernels are the same on every build, so its
#    checkpoints must be identical;
#  - a pretrained decoder's evaluation (sb-eval on an imported checkpoint: fidelity, retrieval,
#    budgets): the same records, timings aside;
#  - the other normalisers: identical when the native build has no AVX-512 either; with
#    AVX-512 its normaliser kernels round differently (docs/sb-train.md, "Timing fields"), so
#    their checkpoints differ in low bits: the training losses must then agree within 1e-6
#    relative (seen: 2e-9), or 1e-2 for top-k, whose selection flips at near-ties of the k-th
#    score when the rounding differs (docs/cuda.md, "Top-k and bottom-k"; seen: 7e-4).
. "$(dirname "$0")/../shlib.sh"
if ! grep -qw avx2 /proc/cpuinfo || ! grep -qw fma /proc/cpuinfo; then
	t_result 0 "# SKIP this CPU has no AVX2/FMA: it cannot run an x86-64-v3 build"
	t_done
fi
MIRROR=${SB_FMNIST_MIRROR:-/usr/share/datasets/fashion-mnist}
# test_attn_norm*: the library's normalisers, here the AVX2 kernels of general-alpha entmax
# (lib/attn_norm_avx2.c) and the portable kernels of the rest, against the double reference
UNITS="test_backend test_encoder test_encoder_grad test_encoder_golden test_attn_norm test_attn_norm_fd
	test_attn_norm_golden test_attn_norm_portable test_rng test_lm_model
	test_lm_grad test_lm_mamba2 test_n3a test_train"
targets="build/v3/bin/sb-train build/v3/bin/sb-eval"
for u in $UNITS; do targets+=" build/v3/tests/$u"; done
make --no-print-directory -C "$TOP" -j"$(nproc)" V3=1 $targets >"$T/make.log" 2>&1
t_result $? "make V3=1 builds sb-train and the numeric unit tests into build/v3/ ($(tail -n 3 "$T/make.log" | tr '\n' ' ' | cut -c1-300))"
V3="$TOP/build/v3"
# an AVX2 build: no 512-bit registers anywhere in the program, 256-bit ones in its products
n512=$(objdump -d --no-show-raw-insn "$V3/bin/sb-train" | grep -c '%zmm')
n256=$(objdump -d --no-show-raw-insn "$V3/bin/sb-train" | grep -c 'vfmadd...ps.*%ymm')
[ "$n512" -eq 0 ] && [ "$n256" -gt 0 ]
t_result $? "build/v3/bin/sb-train uses no zmm register ($n512 instructions) and has ymm FMAs ($n256)"
kern=0
for u in $UNITS; do
	out=$(cd "$TOP" && SB_TOP="$TOP" "$V3/tests/$u" 2>&1)
	rc=$?
	[ "$u" = test_attn_norm ] && kern=$(grep -c '^ok [0-9]* - general-alpha rows kernel == ' <<<"$out")
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n 1)
	[ $rc -eq 0 ] && [ -n "$line" ]
	t_result $? "build/v3/tests/$u: ${line:-no result} (exit $rc)" "$(grep '^not ok' <<<"$out" | head -n 3 | tr '\n' ' ')"
done
# the v3 build runs the AVX2 general-alpha kernels: the library has them (attn_norm_avx2.o) and
# test_attn_norm compared them with the library (test_entmax_rows_kernel, compiled only where
# they exist); a build fallen back to the portable kernels (-DSB_NORM_PORTABLE as the GPU bundle
# builds, or flags without FMA) passes every test above, so this is what notices it
nk=$(nm -A "$V3/libsparsebench.a" 2>/dev/null | grep -c 'attn_norm_avx2\.o:.* T sbv_entmax_rows$')
[ "$nk" -eq 1 ] && [ "$kern" -eq 1 ]
t_result $? "build/v3 has the AVX2 general-alpha kernels (sbv_entmax_rows in attn_norm_avx2.o: $nk) and test_attn_norm ran test_entmax_rows_kernel on them ($kern)"
# the CUDA row kernels (compiled for the host, lib/libsparsebench_cuda.a of the native CUDA build)
# against the v3 library, as an AVX2 machine's CUDA build runs test_cuda_host: the AVX2
# general-alpha kernels must agree with them within that test's tolerances (they once rounded y
# fused, which a backward handed their p recomputes unfused: ds 1e-3 apart near the support's edge)
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -f "$TOP/lib/libsparsebench_cuda.a" ] && [ -x "$nvcc_bin" ]; then
	cuda_home=$(dirname "$(dirname "$nvcc_bin")")
	# shellcheck disable=SC2046
	cc -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -O2 -march=x86-64-v3 -Wno-psabi -DSB_HAVE_CUDA=1 \
		-I"$TOP/lib" $(pkg-config --cflags yajl) -c "$TOP/tests/unit/test_cuda_host.c" -o "$T/tch.o" &&
		cc -pthread -o "$T/test_cuda_host_v3" "$T/tch.o" "$TOP/lib/libsparsebench_cuda.a" "$V3/libsparsebench.a" \
			-L"$cuda_home/lib64" -lcublas -lcudart_static -ldl -lrt -lstdc++ \
			$(pkg-config --libs yajl libarchive libcrypto openblas libcurl) -lm -lpthread 2>"$T/tch.err"
	rc=$?
	out=$( [ $rc -eq 0 ] && "$T/test_cuda_host_v3" 2>&1)
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' <<<"$out" | tail -n 1)
	[ $rc -eq 0 ] && [[ $line == *" 0 failed" ]] && [ "${line%% *}" -gt 1000 ]
	t_result $? "test_cuda_host against the v3 library (the CUDA host kernels vs the AVX2 build's normalisers): ${line:-not built: $(head -c 200 "$T/tch.err")}" \
		"$(grep '^not ok' <<<"$out" | head -n 3 | cut -c1-300 | tr '\n' ' ')"
else
	t_result 0 "# SKIP no native CUDA build (lib/libsparsebench_cuda.a): test_cuda_host against the v3 library not run"
fi
# the LM track: four imported fixtures (a Llama in bfloat16; LFM2's convolutions; Granite's Mamba2, and its
# bfloat16 experts) evaluated by both builds; the records without their timing fields must be identical
untimed() { jq -c 'walk(if type == "object" then with_entries(select(.key | test("ms_|_ms|seconds|per_s|time|speedup|^(argv|version|device|inputs|threads|host|start_unix_s|blas|blas_generic)$") | not)) else . end)' "$1"; }
for fx in llama_bf16 lfm2 granite_h granite_moe; do
	for b in nat v3; do
		sb-lm import -q -o "$T/lm-$b-$fx" --corpus "s=$TOP/tests/fixtures/lm/shakespeare-head.txt" --T 256 \
			"$TOP/tests/fixtures/hf/$fx" >/dev/null 2>"$T/imp.err" || t_result 1 "sb-lm import $fx" "$(cat "$T/imp.err")"
	done
	rn=$(ls -d "$T/lm-nat-$fx"/*/ | head -n 1) rv=$(ls -d "$T/lm-v3-$fx"/*/ | head -n 1)
	ev="--set probes=2 --set windows=3 --set tasks=niah_single_1,vt --set bench_reps=1"
	sb-eval -q $ev --set 'masks=dense;recipe:s=4,w=16,k=8;random' "$rn" >/dev/null 2>"$T/ev.err" &&
		"$V3/bin/sb-eval" -q $ev --set 'masks=dense;recipe:s=4,w=16,k=8;random' "$rv" >/dev/null 2>>"$T/ev.err"
	rc=$?
	untimed "$rn/eval.ndjson" >"$T/$fx.nat"
	untimed "$rv/eval.ndjson" >"$T/$fx.v3"
	n=$(wc -l <"$T/$fx.nat") nd=$(diff "$T/$fx.nat" "$T/$fx.v3" | grep -c '^<')
	[ $rc -eq 0 ] && [ "$n" -gt 20 ] && [ "$nd" -eq 0 ]
	t_result $? "sb-eval of the imported $fx: the native and the v3 build write the same $n records, timings aside ($nd differ; exit $rc)" \
		"$(diff "$T/$fx.nat" "$T/$fx.v3" | head -n 2 | cut -c1-300 | tr '\n' ' ')"
done
if [ ! -r "$MIRROR/train-images-idx3-ubyte.gz" ]; then
	t_result 0 "# SKIP no Fashion-MNIST mirror at $MIRROR (Debian package dataset-fashion-mnist): no training comparison"
	t_done
fi
sb-fetch -q -m "$MIRROR" -o "$T/data" fashion_mnist >/dev/null 2>"$T/fetch.err"
t_result $? "sb-fetch fashion_mnist ($(tail -c 200 "$T/fetch.err"))"
METHODS="softmax topk_softmax_0125 topk_softmax_025 topk_softmax_05 sparsemax entmax15 headwise_adaptive_entmax"
for m in $METHODS; do
	printf '{"task":"fashion_mnist","method":"%s","seed":3,"epochs":2,"limit":640,"batch":64}\n' "$m"
done >"$T/cells.ndjson"
sb-train -q -d "$T/data" -o "$T/nat" -j 2 "$T/cells.ndjson" >"$T/nat.out" 2>"$T/nat.err"
t_result $? "native sb-train: 7 cells, one per method ($(tail -c 200 "$T/nat.err"))"
"$V3/bin/sb-train" -q -d "$T/data" -o "$T/v3" -j 2 "$T/cells.ndjson" >"$T/v3.out" 2>"$T/v3.err"
t_result $? "build/v3 sb-train: the same 7 cells ($(tail -c 200 "$T/v3.err"))"
native_avx512=0
grep -q '"device":"cpu: [^"]*AVX-512' "$T/nat.out" && native_avx512=1
grep -q '"device":"cpu: [^"]*AVX2"' "$T/v3.out"
t_result $? "the v3 run's records name its instruction set (AVX2); the native build's: $(grep -o '"device":"[^"]*"' "$T/nat.out" | head -n 1)"
for m in $METHODS; do
	d=$(cd "$T/nat" && ls -d fashion_mnist."$m".s3.* 2>/dev/null | head -n 1)
	if [ -z "$d" ] || [ ! -d "$T/v3/$d" ]; then
		t_result 1 "$m: a run directory in both builds"
		continue
	fi
	a=$(cat "$T/nat/$d"/*.safetensors | sha256sum | cut -c1-16)
	b=$(cat "$T/v3/$d"/*.safetensors | sha256sum | cut -c1-16)
	if [ "$m" = sparsemax ] || [ $native_avx512 -eq 0 ]; then
		[ "$a" = "$b" ]
		t_result $? "$m: the checkpoints of the native and the v3 build are identical (sha256 $a / $b)"
	else
		# the per-step losses of the two runs, paired
		diff=$(paste <(jq -r 'select(.kind == "train.epoch") | .train_loss' "$T/nat/$d/train.ndjson") \
			<(jq -r 'select(.kind == "train.epoch") | .train_loss' "$T/v3/$d/train.ndjson") |
			awk 'NF == 2 { r = ($1 - $2) / $1; if (r < 0) r = -r; if (r > w) w = r; n++ } END { printf "%d %.3g", n, w }')
		n=${diff%% *} w=${diff#* } tol=1e-6
		[[ $m == topk_* ]] && tol=1e-2
		[ "$n" -gt 0 ] && awk -v w="$w" -v t=$tol 'BEGIN { exit !(w <= t) }'
		t_result $? "$m: AVX-512 normaliser kernels on the native build: training losses agree within $tol relative ($n epochs, worst $w; checkpoints $a / $b)"
	fi
done
t_done
