#!/usr/bin/env bash
# tests/cudaemu/mutants.sh — does the emulator catch bugs in lib/cuda? Each mutant is one
# small edit of a copy of lib/cuda (a barrier removed, a shuffle's width, tree or ballot wrong, a
# synchronisation dropped, scratch freed under a recording); the copy's changed objects
# replace the emulated build's in a copy of its archive, gpu_ops is linked against it and
# run with --quick (or --errors), and it must fail (a "not ok" line or an emulator fault), where the
# unmutated build passes; an arena mutant links sb-train instead, whose arena check must fail. Needs `make EMU=1` first; run by tests/sh/cuda_emu.sh.
#
#   tests/cudaemu/mutants.sh [NAME...]    default: every mutant; MUTANT_JOBS at a time (default: the cores)
set -u -o pipefail
export LC_ALL=C
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 2
B=${CUDAEMU_BUILD:-build/emu} # (another build directory of make EMU=1 B=...)
# sb-train's objects (for the arena mutants): its main and train/'s other files, as the Makefile links it
train_objs="$B/train/sb-train.o"
for c in train/*.c; do
	case ${c##*/} in sb-*) ;; *) train_objs+=" $B/train/$(basename "$c" .c).o" ;; esac
done
for f in $B/libsparsebench_cuda.a $B/libsparsebench.a $B/tests/gpu/gpu_ops.o $B/train/multicell.o $train_objs; do
	[ -f "$f" ] || { echo "mutants.sh: $f missing: run make EMU=1 first" >&2; exit 2; }
done
libs="$(pkg-config --libs yajl libarchive libcrypto openblas libcurl zlib) -lm -lpthread"
# the mutated objects unoptimised: the emulator's checks do not depend on the optimisation
# (every mutant is caught the same way, with the same counts of failed checks, as at the
# build's -O2), and each compiles in a quarter of the time (attn_cuda.cu: 2.1 s for 8.8 s):
# the seventeen took 125 s of CPU here instead of about 240
flags="-O0 -g -Ilib $(pkg-config --cflags yajl libarchive libcrypto openblas libcurl zlib)"

# name | file under lib/cuda | perl -0 substitution (must change the file) | what it breaks
#   [| errors: run gpu_ops --errors (the deliberate device errors, which --quick leaves out)
#    | arena[:METHOD]: link sb-train instead and train a tiny cell (softmax, or METHOD) with
#      SB_ARENA_CHECK=1, which must fail naming the arena check (lib/encoder.c's red zones
#      between activation buffers and parameter tensors, and after every allocation)]
mutants=(
	"attn_fwd_barrier|attn_cuda.cu|s/(\t\}\n)\t__syncthreads\(\);\n(\tconst float \*Srow)/\$1\$2/|k_attn_fwd: no barrier between the score rows and the normaliser that reads them"
	"attn_fwd_barrier2|attn_cuda.cu|s/\t__syncthreads\(\);\n(\tfor \(int e = threadIdx.x; e < T \* hd;)/\$1/|k_attn_fwd: no barrier between the probabilities and the output that mixes them"
	"lsum_width|lanes.cuh|s/(float o = __shfl_down_sync\(G.mask, x, w, )16(\);\n\t\tif \(G.lane < w\)\n\t\t\tx = x \+ o;)/\${1}32\$2/|lanes.cuh lsum: a full-warp shuffle width under a half-warp mask reads lanes outside the mask (undefined in CUDA; the lanes that do discard the value, so a GPU may well still sum right: this one is an undefined read the emulator reports, not a wrong result)"
	"lsum_tree|lanes.cuh|s/(\tfloat x = a.v;\n\tfor \(int w = )8(; w >= 1; w >>= 1\) \{\n\t\tfloat o = __shfl_down_sync\(G.mask, x, w, 16\);\n\t\tif \(G.lane < w\)\n\t\t\tx = x \+ o;)/\${1}4\$2/|lanes.cuh lsum: the device tree leaves out lanes 8-15 (the host lanes are right)"
	"any_all|lanes.cuh|s/return __any_sync\(G.mask, a.v\) != 0;/return __all_sync(G.mask, a.v) != 0;/|lanes.cuh lany: the half-warp vote that finds a NaN or +inf score asks all lanes, not any"
	"bcast_off|lanes.cuh|s/return __shfl_sync\(G.mask, t, j & 15, 16\);/return __shfl_sync(G.mask, t, (j + 1) & 15, 16);/|lanes.cuh rget: an element read from the next lane"
	"ballot_shift|lanes.cuh|s/(__ballot_sync\(G.mask, flag.v\[k\] != 0\) & G.mask\)) >> shift\)/\$1)/|lanes.cuh prefix count: the upper half-warp reads the lower half's ballot bits"
	"ln_bwd_barrier|backend_cuda.cu|s/(red\[hw\]\[1\]\[G.lane \+ 16 \* k\] = pb.at\(G.lane, k\);\n\t\}\n)\t__syncthreads\(\);\n/\$1/|k_ln_bwd: no barrier before the partial sums are read"
	"emb_bwd_barrier|backend_cuda.cu|s/(sid\[t\] = ids\[i0 \+ t\];\n)\t\t__syncthreads\(\);\n/\$1/|k_embedding_bwd: no barrier after the ids are staged"
	"sync_dropped|backend_cuda.cu|s/\tCU_RET\(im, err, cudaStreamSynchronize\(im->ctx.st\)\);\n(\tint code = im->dflag_host\[0\];)/\$1/|sb_cuda_sync: the kernels' data-error flags read without waiting for the stream"
	"flag_code|attn_cuda.cu|s/flag_error\(a.dflag, DFLAG_NO_FINITE, blk, r, 0\)/flag_error(a.dflag, DFLAG_NVALID, blk, r, 0)/|k_attn_fwd: a row with no finite score reported as a bad n_valid|errors"
	"retire_dropped|backend_cuda.cu|s/if \(im->graphs_live > 0 \x7c\x7c im->capturing\) \{/if (0) {/|drop_buffer: scratch freed while a recorded step still names it"
	"argmax_nan|backend_cuda.cu|s/if \(!nan && isnan\(v\)\) \{/if (0) {/|k_cross_entropy: a NaN logit after the first is passed over by the prediction (torch.argmax, and the CPU, take the first NaN)"
	"bias_past_end|backend_cuda.cu|s/if \(e < M \* N\)\n\t\tout\[e\] \+= bias\[e % N\];/if (e < M * N + 3)\n\t\tout[e] += bias[e % N];/|k_add_bias: the last block's spare threads add a bias to 3 floats past the product (inside the encoder's arena, where no guard page is: gpu_ops cannot see it; sb-train with SB_ARENA_CHECK must)|arena"
	"cls_past_end|backend_cuda.cu|s/if \(e < \(size_t\)d\)\n\t\t\tdcls\[e\] \+= v;/if (e <= (size_t)d)\n\t\t\tdcls[e] += v;/|k_assemble_bwd: the CLS token's gradient takes one column too many; in training that float is the next tensor's (pos) gradient, a silent change (loss 1.2267670 for 1.2267589 after 2 epochs of this cell, inside gpu_train's 1e-4); gpu_ops sees it only because its 64-float CLS gradient ends at a guard page; sb-train with SB_ARENA_CHECK must, in the parameter table's zone after cls|arena"
	"alpha_past_end|backend_cuda.cu|s/if \(i < n\) \{\n\t\tfloat s = 1.0f \/ \(1.0f \+ expf\(-raw\[i\]\)\);\n\t\talpha\[i\]/if (i <= n) {\n\t\tfloat s = 1.0f \/ (1.0f + expf(-raw[i]));\n\t\talpha[i]/|k_hae_alpha: one thread too many; the last layer's writes one float past the 32-byte alpha buffer, inside the CUDA backend's 256-byte rounding (no guard page near: nothing else sees it); sb-train with SB_ARENA_CHECK must, in the zone after the allocation (sb_be_alloc's tails)|arena:headwise_adaptive_entmax"
	"sumsq_past_end|backend_cuda.cu|s/(\t\tpart\[blockIdx.x\] = sh\[0\];\n)/\$1\tif (threadIdx.x == 0 \&\& blockIdx.x == gridDim.x - 1)\n\t\tpart[gridDim.x] = 0;\n/|k_sumsq1: the last block also clears the partial after the last (an off-by-one), a double past what clipping's sum of squares asked of the scratch, inside the room the scratch is grown with (no guard page near, no result changed: nothing else sees it); sb-train with SB_ARENA_CHECK must, in the zone after the request (the scratch tails)|arena"
)

want=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# one mutant (its line of the table): its result line on stdout
one_mutant() {
	local name file subst what mode w ok srcs s p pids method rc rep args nbad fault first
	IFS='|' read -r name file subst what mode <<<"$1"
	w=$tmp/$name
	mkdir -p "$w/lib"
	cp -r lib/cuda "$w/lib/cuda"
	cp lib/*.h "$w/lib/"
	perl -0pi -e "$subst" "$w/lib/cuda/$file"
	if cmp -s "lib/cuda/$file" "$w/lib/cuda/$file"; then
		echo "not ok - mutant $name: the edit did not apply to lib/cuda/$file (the mutant is stale)"
		return
	fi
	# the objects the edit reaches: the file itself, or every .cu that includes the header,
	# compiled side by side (host_cuda.cu is the host lanes' build, which gpu_ops does not run)
	case $file in
	*.cu) srcs=$file ;;
	*) srcs=$(cd "$w/lib/cuda" && grep -l '#include' *.cu | grep -v '^host_cuda.cu$') ;;
	esac
	cp $B/libsparsebench_cuda.a "$w/cuda.a"
	ok=1
	pids=()
	for s in $srcs; do
		tests/cudaemu/nvcc-emu $flags -I"$w/lib" -c "$w/lib/cuda/$s" -o "$w/${s%.cu}.o" 2>"$w/cc.$s.log" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || ok=0; done
	cat "$w"/cc.*.log >"$w/cc.log" 2>/dev/null
	if [ $ok -eq 1 ]; then
		for s in $srcs; do ar r "$w/cuda.a" "$w/${s%.cu}.o" 2>>"$w/cc.log" || ok=0; done
	fi
	method=softmax
	case ${mode:-} in arena:*) method=${mode#arena:} mode=arena ;; esac
	if [ $ok -eq 1 ] && [ "${mode:-}" = arena ]; then
		cc -pthread -o "$w/sb-train" $train_objs $B/libsparsebench.a "$w/cuda.a" \
			-Wl,-u,sb_backend_cuda_open -lstdc++ $libs 2>>"$w/cc.log" || ok=0
	elif [ $ok -eq 1 ]; then
		cc -pthread -o "$w/gpu_ops" $B/tests/gpu/gpu_ops.o $B/train/multicell.o $B/libsparsebench.a "$w/cuda.a" \
			-Wl,-u,sb_backend_cuda_open -lstdc++ $libs 2>>"$w/cc.log" || ok=0
	fi
	if [ $ok -eq 0 ]; then
		echo "not ok - mutant $name: did not build ($(head -c 300 "$w/cc.log" | tr '\n' ' '))"
		return
	fi
	if [ "${mode:-}" = arena ]; then
		# 8x8 images, 4-pixel patches: T = 5; batch 25 makes the bias of the QKV product
		# (25 * 5 rows of 192) end 192 floats into a 256-thread block
		SB_ARENA_CHECK=1 timeout 600 "$w/sb-train" -q --device cuda -d "$tmp/data" -o "$w/runs" --task ga \
			--method "$method" --seed 0 --epochs 1 --batch 25 >"$w/out" 2>"$w/err"
		rc=$?
		rep=$(grep -m1 -o 'arena check (SB_ARENA_CHECK) after .*' "$w/err" | cut -c1-220)
		if [ $rc -ne 0 ] && [ -n "$rep" ]; then
			echo "ok - mutant $name caught ($what): sb-train exit $rc; $rep"
		else
			echo "not ok - mutant $name NOT caught ($what): sb-train exit $rc; $(grep -v '^cudaemu: note' "$w/err" | head -c 300 | tr '\n' ' ')"
		fi
		rm -rf "$w"
		return
	fi
	args=(--device cuda --seed 1)
	if [ "${mode:-}" = errors ]; then args+=(--errors); else args+=(--quick); fi
	timeout 600 "$w/gpu_ops" "${args[@]}" >"$w/out" 2>"$w/err"
	rc=$?
	nbad=$(grep -c '^not ok' "$w/out")
	fault=$(grep -m1 '^cudaemu: ' "$w/err" | cut -c1-220)
	first=$(grep -m1 '^not ok' "$w/out" | cut -c1-160)
	if [ $rc -ne 0 ] && { [ "$nbad" -gt 0 ] || [ -n "$fault" ]; }; then
		echo "ok - mutant $name caught ($what): exit $rc, $nbad checks failed${fault:+; $fault}${first:+; first: $first}"
	else
		echo "not ok - mutant $name NOT caught ($what): exit $rc, $nbad checks failed"
	fi
	rm -rf "$w"
}

# the mutants chosen, MUTANT_JOBS (default: the cores) at a time, each in its own copy; their
# lines in the table's order
sel=()
for m in "${mutants[@]}"; do
	IFS='|' read -r name _ <<<"$m"
	if [ ${#want[@]} -eq 0 ] || printf '%s\n' "${want[@]}" | grep -qx "$name"; then
		sel+=("$m")
	fi
done
# the arena mutants' tiny dataset, made once
if printf '%s\n' "${sel[@]}" | grep -q '|arena'; then
	/usr/bin/python3 tests/fixtures/m3/gen_data.py "$tmp/data" ga >/dev/null
fi
jobs_max=${MUTANT_JOBS:-$(nproc)}
for i in "${!sel[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
	one_mutant "${sel[$i]}" >"$tmp/result.$i" 2>&1 &
done
wait
pass=0 fail=0
for i in "${!sel[@]}"; do
	cat "$tmp/result.$i"
	if grep -q '^ok - ' "$tmp/result.$i"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
