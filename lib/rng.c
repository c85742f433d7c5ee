#include "rng.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline void philox_round(uint32_t c[4], const uint32_t k[2])
{
	uint64_t p0 = (uint64_t)PHILOX_M0 * c[0];
	uint64_t p1 = (uint64_t)PHILOX_M1 * c[2];
	uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
	uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
	uint32_t n0 = hi1 ^ c[1] ^ k[0];
	uint32_t n2 = hi0 ^ c[3] ^ k[1];
	c[0] = n0;
	c[1] = lo1;
	c[2] = n2;
	c[3] = lo0;
}

/* Philox-4x32-10 of the counter (c0, c1, c2, c3) under the key (k0, k1). The words are passed
 * as scalars: packing them from 64-bit values into an array let GCC 12 (-march=native, AVX-512)
 * build the array in a ymm register with an EVEX store and return without vzeroupper, which
 * left the upper halves dirty and made every SSE-encoded libm call after it (log, exp, cos)
 * about 25 times slower until the next vzeroupper. */
static inline void philox10(uint32_t out[4], uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
			    uint32_t k1)
{
	uint32_t c[4] = {c0, c1, c2, c3};
	uint32_t k[2] = {k0, k1};
	for (int i = 0; i < 10; i++) {
		if (i) {
			k[0] += PHILOX_W0;
			k[1] += PHILOX_W1;
		}
		philox_round(c, k);
	}
	out[0] = c[0];
	out[1] = c[1];
	out[2] = c[2];
	out[3] = c[3];
}

void sb_philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2])
{
	philox10(out, ctr[0], ctr[1], ctr[2], ctr[3], key[0], key[1]);
}

static void make_key(uint32_t key[2], uint64_t seed, uint32_t purpose)
{
	key[0] = (uint32_t)seed;
	key[1] = purpose ^ (uint32_t)(seed >> 32) * 0x9E3779B9u;
}

static void gen_block(uint32_t out[4], const uint32_t key[2], uint64_t stream, uint64_t block)
{
	philox10(out, (uint32_t)block, (uint32_t)(block >> 32), (uint32_t)stream, (uint32_t)(stream >> 32), key[0],
		 key[1]);
}

void sb_rng_init(struct sb_rng *r, uint64_t seed, uint32_t purpose, uint64_t stream)
{
	make_key(r->key, seed, purpose);
	r->stream = stream;
	r->block = 0;
	r->pos = 4;
}

uint32_t sb_rng_u32(struct sb_rng *r)
{
	if (r->pos >= 4) {
		gen_block(r->buf, r->key, r->stream, r->block++);
		r->pos = 0;
	}
	return r->buf[r->pos++];
}

uint64_t sb_rng_u64(struct sb_rng *r)
{
	uint64_t hi = sb_rng_u32(r);
	return (hi << 32) | sb_rng_u32(r);
}

float sb_rng_uniform_f(struct sb_rng *r) { return sb_rng_u32_to_unit_f(sb_rng_u32(r)); }

double sb_rng_uniform(struct sb_rng *r)
{
	return (double)(sb_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

double sb_rng_normal(struct sb_rng *r)
{
	/* u1 in (0,1] so log is finite */
	double u1 = 1.0 - sb_rng_uniform(r);
	double u2 = sb_rng_uniform(r);
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

uint64_t sb_rng_below(struct sb_rng *r, uint64_t n)
{
	if (n <= 1)
		return 0;
	if (n <= 0xFFFFFFFFull) {
		/* Lemire: multiply a 32-bit word by n, reject the biased low part. */
		uint32_t n32 = (uint32_t)n;
		uint64_t m = (uint64_t)sb_rng_u32(r) * n32;
		uint32_t lo = (uint32_t)m;
		if (lo < n32) {
			uint32_t t = (uint32_t)(-n32) % n32;
			while (lo < t) {
				m = (uint64_t)sb_rng_u32(r) * n32;
				lo = (uint32_t)m;
			}
		}
		return m >> 32;
	}
	/* 64-bit range: plain rejection on the smallest covering power of two. */
	uint64_t mask = n - 1;
	mask |= mask >> 1;
	mask |= mask >> 2;
	mask |= mask >> 4;
	mask |= mask >> 8;
	mask |= mask >> 16;
	mask |= mask >> 32;
	uint64_t v;
	do
		v = sb_rng_u64(r) & mask;
	while (v >= n);
	return v;
}

void sb_rng_permutation(struct sb_rng *r, uint32_t *perm, size_t n)
{
	for (size_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)sb_rng_below(r, i);
		uint32_t t = perm[i - 1];
		perm[i - 1] = perm[j];
		perm[j] = t;
	}
}

uint32_t sb_rng_word_at(uint64_t seed, uint32_t purpose, uint64_t stream, uint64_t i)
{
	uint32_t key[2], out[4];
	make_key(key, seed, purpose);
	gen_block(out, key, stream, i >> 2);
	return out[i & 3];
}
