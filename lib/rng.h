/* rng.h — counter-based random numbers (Philox-4x32-10).
 *
 * Every random draw in sparsebench is a pure function of (seed, purpose,
 * stream, position): the key is (seed, purpose), the counter is
 * (position_lo, position_hi, stream_lo, stream_hi). Nothing depends on what
 * else ran before, so a cell's draws are the same alone or in a multi-cell
 * process, on the CPU or on the GPU (the CUDA kernels use the same function).
 *
 * A struct sb_rng is a cursor over one (seed, purpose, stream): it yields the
 * words of blocks 0, 1, 2, ... in order.
 */
#ifndef SB_RNG_H
#define SB_RNG_H

#include <stddef.h>
#include <stdint.h>

/* What a draw is for: part of the key, so streams for different purposes never collide. */
enum sb_rng_purpose {
	SB_RNG_SPLIT = 1,    /* validation split of the pool */
	SB_RNG_CAP = 2,      /* optional cap of the pool before the split */
	SB_RNG_INIT = 3,     /* parameter initialisation; stream = parameter index */
	SB_RNG_SHUFFLE = 4,  /* batch order; stream = epoch */
	SB_RNG_DROPOUT = 5,  /* dropout masks; stream = (step, site) */
	SB_RNG_SYNTH = 6,    /* synthetic data generators */
	SB_RNG_BOOTSTRAP = 7,/* bootstrap resampling in statistics */
	SB_RNG_MASK = 8,     /* random attention masks (LM controls) */
	SB_RNG_DATA = 9,     /* LM data windows and mixtures */
	SB_RNG_USER = 100    /* first free value */
};

/* One Philox-4x32-10 block: out = philox(ctr, key). */
void sb_philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]);

struct sb_rng {
	uint32_t key[2];
	uint64_t stream;
	uint64_t block;  /* next block to generate */
	uint32_t buf[4];
	int pos;         /* next unread word of buf; 4 = empty */
};

/* Start a cursor at block 0 of (seed, purpose, stream). Seeds above 2^32-1
 * are folded into the purpose word (seed_hi is xor-ed into key[1]'s upper half). */
void sb_rng_init(struct sb_rng *r, uint64_t seed, uint32_t purpose, uint64_t stream);

uint32_t sb_rng_u32(struct sb_rng *r);
uint64_t sb_rng_u64(struct sb_rng *r);
/* Uniform in [0, 1): 24 random bits (float), 53 random bits (double). */
float sb_rng_uniform_f(struct sb_rng *r);
double sb_rng_uniform(struct sb_rng *r);
/* Standard normal (Box-Muller on two 53-bit uniforms; the second value is not cached,
 * so each call consumes exactly 4 words and the sequence stays position-addressable). */
double sb_rng_normal(struct sb_rng *r);
/* Uniform integer in [0, n), n >= 1, without modulo bias (Lemire's method with rejection). */
uint64_t sb_rng_below(struct sb_rng *r, uint64_t n);
/* Fill perm[0..n) with a uniformly random permutation of 0..n-1 (Fisher-Yates). */
void sb_rng_permutation(struct sb_rng *r, uint32_t *perm, size_t n);

/* Stateless: word `i` of (seed, purpose, stream), for element-wise draws such as
 * dropout masks (word i is word i%4 of block i/4). */
uint32_t sb_rng_word_at(uint64_t seed, uint32_t purpose, uint64_t stream, uint64_t i);
/* Stateless uniform in [0,1) with 24 bits from word i (the dropout draw). */
static inline float sb_rng_u32_to_unit_f(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

#endif
