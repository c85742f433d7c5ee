/* test_attn_norm_golden_portable.c — the PyTorch golden test on the portable
 * kernels (see test_attn_norm_portable.c for how). */
#define SB_NORM_PORTABLE 1
#include "../../lib/attn_norm.c"
#include "test_attn_norm_golden.c"
