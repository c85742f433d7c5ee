/* test_attn_norm_bits.c — the portable kernels' exact bits, pinned.
 *
 * lib/attn_norm.c's portable kernels (the ones every machine without AVX-512 runs, but
 * for general-alpha entmax on AVX2, and every build with -DSB_NORM_PORTABLE; compiled
 * here with SB_NORM_PORTABLE as in test_attn_norm_portable.c) promise more
 * than accuracy: their results are the same bits on every build (VE = 8 or 16 lanes,
 * any -O level), the CUDA kernels in lib/cuda/ repeat them operation for operation
 * (tests/gpu/run.sh compares them on a GPU host against the bundle's x86-64-v3 build,
 * made with -DSB_NORM_PORTABLE), and
 * sparsemax checkpoints are byte-identical across builds (tests/sh/isa_v3.sh). Accuracy
 * tests (test_attn_norm*.c) would not notice a rewrite that moves an output by an ulp;
 * this one does.
 *
 * For each method (top-k twice, the bisection methods also unrolled), both mask modes
 * and the three algorithms, it runs forward, backward (with and without the forward's
 * aux) and the statistics over fixed rows (test_attn_norm_util.h's seven variants: ties,
 * huge and tiny scores, -inf keys; lengths 1 to 513), and hashes every output byte
 * (FNV-1a, 64 bits). The pinned hashes were computed from the scalar kernels of
 * b50f5c2, before the element functions moved to vectors (attn_norm_vec.h); those of
 * entmax_bisect and headwise_adaptive_entmax (not unrolled) again when general alpha
 * moved from Newton from -1 to Halley from Jensen's bound (entmax_halley), the same
 * on the native and the x86-64-v3 build; entmax_bisect's again when the iteration
 * learned to stop at its noise floor (a step no smaller than the last within 16 ulps:
 * lib/entmax_step.h, shared with the CUDA rows; headwise adaptive entmax's rows here
 * never stall, so its pin stayed).
 *
 * A mismatch means the bits changed. If that is intended (a better algorithm), the
 * CUDA kernels must change with them and the GPU checks must be run again; then
 * update the pin from this program's output. libm's pow, powf and log enter the
 * entmax paths (the Newton step's exponent, the bisection's bracket), so another libm
 * version may move those hashes alone; the report names the method.
 */
#define SB_NORM_PORTABLE 1
#include "../../lib/attn_norm.c"
#include "test_attn_norm_util.h"

#include <inttypes.h>

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++) {
		h ^= c[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

struct pin {
	const char *method;
	int unrolled;
	uint64_t hash;
};

static const struct pin pins[] = {
	{"softmax", 0, 0x39ed61e30eeaa9e6ull},
	{"topk_softmax_025", 0, 0xef120648ec435162ull},
	{"topk_softmax_0125", 0, 0xb05884df7872bb86ull},
	{"bottomk_softmax_05", 0, 0xb4f0bf21d27e5cddull},
	{"sparsemax", 0, 0x494307a8dcfc8b0dull},
	{"entmax15", 0, 0xb8afe1a6a2c97f71ull},
	{"entmax_bisect", 0, 0x8dd6b21a62712176ull},
	{"entmax_bisect", 1, 0xe4923f229c6b88b6ull},
	{"headwise_adaptive_entmax", 0, 0xccc587f446ddc42eull},
	{"headwise_adaptive_entmax", 1, 0x1bf5588a989a2ceaull},
};

static const int sizes[] = {1, 3, 7, 31, 50, 65, 128, 513};

/* all outputs of one method over fixed rows (its own stream); *cases counts the calls */
static uint64_t method_hash(const struct pin *pn, uint64_t stream, long *cases)
{
	uint64_t h = 0xcbf29ce484222325ull;
	struct sb_rng r;
	sb_rng_init(&r, 20261202, SB_RNG_USER, stream);
	const int rows = 3;
	for (int mask = 0; mask < 2; mask++)
		for (int algo = 0; algo < 3; algo++)
			for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
				for (int v = 0; v < N_VARIANTS; v++) {
					int T = sizes[si], nvs[2] = {T, T / 2 + 1};
					for (int k = 0; k < (T > 1 ? 2 : 1); k++) {
						struct sb_norm nm;
						struct sb_err e = {0};
						double alpha = 1.05 + 0.95 * sb_rng_uniform(&r);
						if (sb_norm_parse(pn->method, alpha, &nm, &e)) {
							SB_CHECK(0, "%s parses (%s)", pn->method, e.msg);
							return 0;
						}
						nm.unrolled = pn->unrolled;
						nm.mask = mask;
						int n = rows * T;
						float *s = malloc(sizeof(float) * n), *p = malloc(sizeof(float) * n);
						float *g = malloc(sizeof(float) * n), *ds = malloc(sizeof(float) * n);
						float aux[3 * SB_NORM_AUX] = {0};
						double da[3];
						for (int i = 0; i < rows; i++)
							gen_row(&r, s + i * T, T, v);
						for (int i = 0; i < n; i++)
							g[i] = (float)sb_rng_normal(&r);
						int rc = sb_norm_forward_algo(&nm, (enum sb_norm_algo)algo, p, aux, s, rows, T,
						                              nvs[k], (float)alpha, &e);
						h = fnv(h, &rc, sizeof rc);
						if (!rc) {
							h = fnv(h, p, sizeof(float) * n);
							h = fnv(h, aux, sizeof aux);
							for (int wa = 0; wa < 2; wa++) {
								memset(da, 0, sizeof da);
								sb_norm_backward(&nm, ds, da, g, p, wa ? NULL : aux, s, rows, T,
								                 nvs[k], (float)alpha);
								h = fnv(h, ds, sizeof(float) * n);
								h = fnv(h, da, sizeof da);
							}
							double st[3] = {0};
							sb_norm_stats(p, rows, T, nvs[k], &st[0], &st[1], &st[2]);
							h = fnv(h, st, sizeof st);
						}
						(*cases)++;
						free(s);
						free(p);
						free(g);
						free(ds);
					}
				}
	return h;
}

int main(void)
{
	for (size_t i = 0; i < sizeof pins / sizeof *pins; i++) {
		long cases = 0;
		uint64_t h = method_hash(&pins[i], i, &cases);
		SB_CHECK(h == pins[i].hash, "portable bits of %s%s over %ld cases: FNV-1a %016" PRIx64 " (pinned %016" PRIx64 ")",
		         pins[i].method, pins[i].unrolled ? " (unrolled)" : "", cases, h, pins[i].hash);
	}
	return sb_test_done();
}
