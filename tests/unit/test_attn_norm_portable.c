/* test_attn_norm_portable.c — test_attn_norm.c again, on the portable kernels.
 *
 * On a machine with AVX-512 the library uses lib/attn_norm_avx512.c; this
 * program compiles lib/attn_norm.c itself with SB_NORM_PORTABLE, so that the
 * portable (plain C, auto-vectorised) kernels every other machine runs are
 * tested here too, against the same double reference and the same tolerances.
 * (Its own definitions of the sb_norm_* functions take precedence over the
 * library's, which the linker then does not pull in.)
 */
#define SB_NORM_PORTABLE 1
#include "../../lib/attn_norm.c"
#include "test_attn_norm.c"
