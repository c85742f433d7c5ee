/* test_rng — Philox-4x32-10 known answers (Random123 kat_vectors) and the
 * derived draws: uniformity, permutation validity, no modulo bias. */
#include <stdint.h>

#include "../harness.h"
#include "rng.h"

static int kat(const uint32_t ctr[4], const uint32_t key[2], const uint32_t want[4], const char *name)
{
	uint32_t out[4];
	sb_philox4x32_10(out, ctr, key);
	int ok = out[0] == want[0] && out[1] == want[1] && out[2] == want[2] && out[3] == want[3];
	return SB_CHECK(ok, "philox4x32-10 KAT %s: got %08x %08x %08x %08x want %08x %08x %08x %08x", name, out[0],
			out[1], out[2], out[3], want[0], want[1], want[2], want[3]);
}

int main(void)
{
	/* Random123 kat_vectors, philox4x32 10: counter[4] key[2] -> output[4] */
	kat((uint32_t[]){0, 0, 0, 0}, (uint32_t[]){0, 0}, (uint32_t[]){0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
	    "zeros");
	kat((uint32_t[]){~0u, ~0u, ~0u, ~0u}, (uint32_t[]){~0u, ~0u},
	    (uint32_t[]){0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}, "ones");
	kat((uint32_t[]){0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, (uint32_t[]){0xa4093822, 0x299f31d0},
	    (uint32_t[]){0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}, "pi");

	/* the cursor yields the same words as the stateless accessor */
	struct sb_rng r;
	sb_rng_init(&r, 42, SB_RNG_DROPOUT, 7);
	int same = 1;
	for (uint64_t i = 0; i < 1000; i++)
		same &= sb_rng_u32(&r) == sb_rng_word_at(42, SB_RNG_DROPOUT, 7, i);
	SB_CHECK(same, "cursor words equal sb_rng_word_at for 1000 positions");

	/* different purposes / streams / seeds differ */
	SB_CHECK(sb_rng_word_at(1, SB_RNG_SPLIT, 0, 0) != sb_rng_word_at(1, SB_RNG_SHUFFLE, 0, 0), "purposes differ");
	SB_CHECK(sb_rng_word_at(1, SB_RNG_SPLIT, 0, 0) != sb_rng_word_at(1, SB_RNG_SPLIT, 1, 0), "streams differ");
	SB_CHECK(sb_rng_word_at(1, SB_RNG_SPLIT, 0, 0) != sb_rng_word_at(2, SB_RNG_SPLIT, 0, 0), "seeds differ");
	SB_CHECK(sb_rng_word_at(1, SB_RNG_SPLIT, 0, 0) != sb_rng_word_at(1ull << 32 | 1, SB_RNG_SPLIT, 0, 0),
		 "seeds above 2^32 differ from their low word");

	/* uniform: mean and variance of 1e6 draws within 5 sigma */
	sb_rng_init(&r, 3, SB_RNG_USER, 0);
	double s = 0, s2 = 0, mn = 1, mx = 0;
	int n = 1000000;
	for (int i = 0; i < n; i++) {
		double u = sb_rng_uniform(&r);
		s += u;
		s2 += u * u;
		if (u < mn)
			mn = u;
		if (u > mx)
			mx = u;
	}
	double mean = s / n, var = s2 / n - mean * mean;
	SB_CHECK(fabs(mean - 0.5) < 5 * sqrt(1.0 / 12 / n), "uniform mean %.6f (want 0.5 +- %.6f)", mean, 5 * sqrt(1.0 / 12 / n));
	SB_CHECK(fabs(var - 1.0 / 12) < 0.002, "uniform variance %.6f (want %.6f)", var, 1.0 / 12);
	SB_CHECK(mn >= 0 && mx < 1, "uniform in [0,1): min %.3g max %.9f", mn, mx);

	/* float uniform never reaches 1 */
	int bad = 0;
	for (int i = 0; i < 100000; i++) {
		float u = sb_rng_uniform_f(&r);
		bad += !(u >= 0.0f && u < 1.0f);
	}
	SB_CHECK(bad == 0, "float uniform in [0,1) (%d bad)", bad);

	/* normal: mean 0, variance 1 */
	s = s2 = 0;
	for (int i = 0; i < n; i++) {
		double z = sb_rng_normal(&r);
		s += z;
		s2 += z * z;
	}
	mean = s / n;
	var = s2 / n - mean * mean;
	SB_CHECK(fabs(mean) < 5.0 / sqrt(n), "normal mean %.5f", mean);
	SB_CHECK(fabs(var - 1) < 0.01, "normal variance %.5f", var);

	/* below(n): unbiased — a range of 3 over 3e5 draws, chi-square with 2 dof < 20 */
	long cnt[3] = {0};
	for (int i = 0; i < 300000; i++)
		cnt[sb_rng_below(&r, 3)]++;
	double chi = 0;
	for (int k = 0; k < 3; k++)
		chi += (cnt[k] - 100000.0) * (cnt[k] - 100000.0) / 100000.0;
	SB_CHECK(chi < 20, "below(3) chi-square %.2f over counts %ld %ld %ld", chi, cnt[0], cnt[1], cnt[2]);
	/* a range near 2^32 where modulo reduction would be visibly biased:
	 * n = 3*2^30; values >= 2^31 must be 1/3 of the draws, modulo would give 1/4 */
	uint64_t big = 3ull << 30;
	long hi = 0;
	for (int i = 0; i < 300000; i++)
		hi += sb_rng_below(&r, big) >= (1ull << 31);
	SB_CHECK(fabs(hi / 300000.0 - 1.0 / 3) < 0.005, "below(3*2^30) upper third frequency %.4f (want 0.3333)", hi / 300000.0);
	bad = 0;
	for (int i = 0; i < 10000; i++)
		bad += sb_rng_below(&r, 1ull << 40 | 12345) >= (1ull << 40 | 12345);
	SB_CHECK(bad == 0, "below(64-bit n) in range");
	SB_CHECK(sb_rng_below(&r, 1) == 0 && sb_rng_below(&r, 0) == 0, "below(1) == below(0) == 0");

	/* permutations: valid, and position frequencies uniform */
	uint32_t perm[10];
	long pos0[10] = {0};
	int valid = 1;
	for (int t = 0; t < 100000; t++) {
		sb_rng_permutation(&r, perm, 10);
		int seen[10] = {0};
		for (int i = 0; i < 10; i++)
			seen[perm[i]]++;
		for (int i = 0; i < 10; i++)
			valid &= seen[i] == 1;
		pos0[perm[0]]++;
	}
	chi = 0;
	for (int k = 0; k < 10; k++)
		chi += (pos0[k] - 10000.0) * (pos0[k] - 10000.0) / 10000.0;
	SB_CHECK(valid, "permutation of 10 is a permutation");
	SB_CHECK(chi < 40, "permutation first-element chi-square %.2f (9 dof)", chi);

	/* reproducible */
	uint32_t a[100], b[100];
	sb_rng_init(&r, 9, SB_RNG_SPLIT, 0);
	sb_rng_permutation(&r, a, 100);
	sb_rng_init(&r, 9, SB_RNG_SPLIT, 0);
	sb_rng_permutation(&r, b, 100);
	SB_CHECK(memcmp(a, b, sizeof a) == 0, "same seed, same permutation");
	return sb_test_done();
}
