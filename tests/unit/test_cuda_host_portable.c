/* test_cuda_host_portable.c — the CUDA row kernels (compiled for the host) against the
 * portable normaliser kernels, bit for bit.
 *
 * test_cuda_host.c compares them with the library's normalisers, which on an AVX-512
 * machine are lib/attn_norm_avx512.c's (other exp and pow forms, other orders), so it
 * can only hold them to tolerances. The CUDA kernels were written to repeat the
 * portable kernels' operations (lib/cuda/lanes.cuh), and the portable kernels are
 * what the GPU bundle's CPU build runs (tests/gpu/bundle.sh builds x86-64-v3 with
 * -DSB_NORM_PORTABLE). Here
 * lib/attn_norm.c is compiled with SB_NORM_PORTABLE into this program (its sb_norm_*
 * definitions take precedence over the library's, as in test_attn_norm_portable.c),
 * and every normaliser case of test_cuda_host.c must agree in every bit: p, the four
 * aux values, ds and d alpha. Rows with -inf keys keep their tolerance (the GPU
 * normalises them in another order, docs/cuda.md). Skipped in a CUDA=0 build.
 */
#define SB_NORM_PORTABLE 1
#define CUDA_HOST_EXACT 1
#include "../../lib/attn_norm.c"
#include "test_cuda_host.c"
