#!/usr/bin/env bash
# bench/lm/pretrained.sh [N [D]] — the LM evaluation path on a Qwen2.5-0.5B-shaped decoder
# (what `sb-lm import` + sb-eval run on a pretrained model), one thread, against PyTorch
# eager on the same shapes (Debian's python3-torch): a prefill of N tokens with all logits
# (a fidelity window; default 256) and D decoding steps (a probe's answer; default 32).
# Needs ~6 GB of memory. Prints both JSON lines and the ratios, then the products alone
# (bench_matmul.c: matmul_rows against OpenBLAS's SGEMM on the model's shapes).
set -eu -o pipefail
cd "$(dirname "$0")/../.."
N=${1:-256} D=${2:-32}
make -s lib/libsparsebench.a >/dev/null
mkdir -p build
cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -march=native -Ilib bench/lm/bench_pretrained.c lib/libsparsebench.a \
	-L/usr/lib/x86_64-linux-gnu/openblas-pthread/ -lopenblas -lyajl -larchive -lcrypto -lcurl -lz -lm -lpthread \
	-o build/bench_pretrained
cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -march=native -Ilib bench/lm/bench_matmul.c lib/libsparsebench.a \
	-L/usr/lib/x86_64-linux-gnu/openblas-pthread/ -lopenblas -lyajl -larchive -lcrypto -lcurl -lz -lm -lpthread \
	-o build/bench_matmul
# PyTorch's products go through OpenBLAS, which falls back to generic pre-AVX kernels on a
# CPU it does not know (this VM: 'Prescott', 18 GFLOP/s instead of 103 for a 1024^3 SGEMM):
# name the kernel for the CPU's vector width unless the caller did, so the reference is fair.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
	if grep -q avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
	elif grep -q avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
fi
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-} (PyTorch's BLAS kernels)"
ours=$(OPENBLAS_NUM_THREADS=1 build/bench_pretrained "$N" "$D")
ref=$(OMP_NUM_THREADS=1 /usr/bin/python3 bench/lm/torch_pretrained.py "$N" "$D")
# the products alone, ours against OpenBLAS's SGEMM with the same kernels as PyTorch's
mm=$(OPENBLAS_NUM_THREADS=1 build/bench_matmul "$N" 5; OPENBLAS_NUM_THREADS=1 build/bench_matmul 1 20)
echo "sparsebench: $ours"
echo "pytorch:     $ref"
/usr/bin/python3 - "$ours" "$ref" "$mm" <<'PY'
import json, sys
o, r = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for line in sys.argv[3].splitlines():
    m = json.loads(line)
    print(f"product {m['shape']:8s} {m['M']}x{m['K']}x{m['N']}: ours {m['ours_gflops']:.0f} GFLOP/s, "
          f"OpenBLAS ({m['openblas_core']}) {m['openblas_gflops']:.0f} GFLOP/s, "
          f"ours/OpenBLAS time {m['openblas_gflops'] / m['ours_gflops']:.2f}; "
          f"ours on bfloat16 weights {m['ours_bf16_gflops']:.0f} GFLOP/s")
print(f"prefill {o['prefill_tokens']} tokens: ours {o['dense_prefill_s']:.2f} s, torch {r['dense_prefill_s']:.2f} s, "
      f"ours/torch time {o['dense_prefill_s'] / r['dense_prefill_s']:.2f}")
print(f"decode: ours {o['dense_decode_ms_per_token']:.0f} ms/token, torch {r['dense_decode_ms_per_token']:.0f} ms/token, "
      f"ours/torch time {o['dense_decode_ms_per_token'] / r['dense_decode_ms_per_token']:.2f}")
print(f"recipe mask: prefill {o['recipe_prefill_s']:.2f} s, decode {o['recipe_decode_ms_per_token']:.0f} ms/token")
print(f"bfloat16 weights (a BF16 checkpoint; logits equal to float: {o['bf16_logits_equal']}): prefill "
      f"{o['bf16_dense_prefill_s']:.2f} s, decode {o['bf16_dense_decode_ms_per_token']:.0f} ms/token "
      f"(ours/torch time {o['bf16_dense_prefill_s'] / r['dense_prefill_s']:.2f} and "
      f"{o['bf16_dense_decode_ms_per_token'] / r['dense_decode_ms_per_token']:.2f}); recipe mask "
      f"{o['bf16_recipe_prefill_s']:.2f} s, {o['bf16_recipe_decode_ms_per_token']:.0f} ms/token")
PY
