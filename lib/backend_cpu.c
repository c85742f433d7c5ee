/* backend_cpu.c — the CPU backend: workers, memory and the element-wise,
 * normalisation, embedding, loss and optimiser ops. Matrix products, attention
 * and the local mixer are in backend_cpu_dense.c / backend_cpu_attn.c.
 *
 * Workers: the calling thread plus threads-1 pthreads. sb_be_run hands out
 * task indices; each task runs on one worker with that worker's context and
 * scratch. OpenBLAS is set to one thread: every product runs inside a task,
 * so the parallelism (and hence the bits) never depend on OpenBLAS's threads.
 */
#include "backend_cpu.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_cpu_simd.h"
#include "redzone.h"
#include "device_name.h"
#include "rng.h"

/* ---------------------------------------------------------------- workers */

/* Denormals: every op of this backend runs with flush-to-zero and
 * denormals-are-zero (MXCSR FTZ|DAZ): products of tiny gradients (AdamW's g*g,
 * exp of large negative scores) otherwise fall into microcoded slow paths and a
 * training run slows down several-fold as it converges. Values below 1.2e-38 then
 * read and write as 0; results stay deterministic. The caller's MXCSR is restored
 * after each run. */
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define FTZ_ON()                                                                                                       \
	unsigned sb_csr_ = _mm_getcsr();                                                                               \
	_mm_setcsr(sb_csr_ | 0x8040u)
#define FTZ_OFF() _mm_setcsr(sb_csr_)
#else
#define FTZ_ON()                                                                                                       \
	do {                                                                                                           \
	} while (0)
#define FTZ_OFF()                                                                                                      \
	do {                                                                                                           \
	} while (0)
#endif

struct pool {
	int n; /* workers including the caller */
	pthread_t *th;
	pthread_mutex_t mu;
	pthread_cond_t cv_go, cv_done;
	uint64_t gen;
	int running; /* helper threads still working on this generation */
	int stop;
	int ntasks;
	atomic_int next;
	sb_task_fn fn;
	void *arg;
	int err_task; /* lowest failing task index (deterministic error choice) */
	struct sb_err err;
	struct sb_ctx *ctx; /* [n] */
	struct sb_backend *be;
};

/* the context of the task this thread runs (NULL outside tasks): cpu_scratch_tail's */
static _Thread_local struct sb_ctx *tl_task_ctx;

static void pool_work(struct pool *pl, struct sb_ctx *ctx)
{
	for (;;) {
		int t = atomic_fetch_add(&pl->next, 1);
		if (t >= pl->ntasks)
			break;
		ctx->in_task = 1;
		sb_err_clear(&ctx->err);
		struct sb_ctx *outer = tl_task_ctx;
		tl_task_ctx = ctx;
		int rc = pl->fn(ctx, ctx->worker, t, pl->arg, &ctx->err);
		tl_task_ctx = outer;
		ctx->in_task = 0;
		if (rc) {
			pthread_mutex_lock(&pl->mu);
			if (pl->err_task < 0 || t < pl->err_task) {
				pl->err_task = t;
				pl->err = ctx->err;
				pl->err.code = rc;
			}
			pthread_mutex_unlock(&pl->mu);
			sb_err_clear(&ctx->err);
		}
	}
}

static void *pool_thread(void *p)
{
	struct sb_ctx *ctx = p;
	struct pool *pl = ctx->pool;
	uint64_t seen = 0;
	FTZ_ON();
	(void)sb_csr_;
	for (;;) {
		pthread_mutex_lock(&pl->mu);
		while (pl->gen == seen && !pl->stop)
			pthread_cond_wait(&pl->cv_go, &pl->mu);
		if (pl->stop) {
			pthread_mutex_unlock(&pl->mu);
			return NULL;
		}
		seen = pl->gen;
		pthread_mutex_unlock(&pl->mu);
		pool_work(pl, ctx);
		pthread_mutex_lock(&pl->mu);
		if (--pl->running == 0)
			pthread_cond_signal(&pl->cv_done);
		pthread_mutex_unlock(&pl->mu);
	}
}

static int cpu_run(struct sb_backend *be, int ntasks, sb_task_fn fn, void *arg, struct sb_err *err)
{
	struct cpu_impl *im = be->impl;
	struct pool *pl = im->pool;
	if (ntasks <= 0)
		return 0;
	pthread_mutex_lock(&im->run_mu); /* one run at a time per backend */
	pl->fn = fn;
	pl->arg = arg;
	pl->ntasks = ntasks;
	pl->err_task = -1;
	sb_err_clear(&pl->err);
	atomic_store(&pl->next, 0);
	int helpers = pl->n - 1;
	if (helpers > ntasks - 1)
		helpers = ntasks - 1;
	if (helpers > 0) {
		pthread_mutex_lock(&pl->mu);
		pl->running = pl->n - 1;
		pl->gen++;
		pthread_cond_broadcast(&pl->cv_go);
		pthread_mutex_unlock(&pl->mu);
	}
	{
		FTZ_ON();
		pool_work(pl, &pl->ctx[0]);
		FTZ_OFF();
	}
	if (helpers > 0) {
		pthread_mutex_lock(&pl->mu);
		while (pl->running > 0)
			pthread_cond_wait(&pl->cv_done, &pl->mu);
		pthread_mutex_unlock(&pl->mu);
	}
	int rc = 0;
	if (pl->err_task >= 0) {
		rc = pl->err.code ? pl->err.code : SB_EINTERNAL;
		if (err)
			*err = pl->err;
	}
	pthread_mutex_unlock(&im->run_mu);
	return rc;
}

/* Parallel loop over fixed chunks for main-context ops: the chunking depends on n
 * only, so results do not depend on the number of workers. */
struct chunk_job {
	void (*fn)(void *arg, size_t lo, size_t hi, int chunk);
	void *arg;
	size_t n, chunk;
};

static int chunk_task(struct sb_ctx *ctx, int worker, int t, void *p, struct sb_err *err)
{
	struct chunk_job *j = p;
	size_t lo = (size_t)t * j->chunk, hi = lo + j->chunk;
	if (hi > j->n)
		hi = j->n;
	j->fn(j->arg, lo, hi, t);
	return 0;
}

#define CHUNK ((size_t)1 << 15)

static int nchunks(size_t n)
{
	return (int)((n + CHUNK - 1) / CHUNK);
}

static void par_chunks(struct sb_ctx *ctx, size_t n, void (*fn)(void *, size_t, size_t, int), void *arg)
{
	struct chunk_job j = {fn, arg, n, CHUNK};
	int nt = nchunks(n);
	if (ctx->worker == 0 && !ctx->in_task && ctx->pool->n > 1 && nt > 1) {
		ctx->in_task = 1;
		cpu_run(ctx->be, nt, chunk_task, &j, NULL);
		ctx->in_task = 0;
	} else {
		FTZ_ON();
		for (int t = 0; t < nt; t++)
			chunk_task(ctx, ctx->worker, t, &j, NULL);
		FTZ_OFF();
	}
}

/* ---------------------------------------------------------------- memory */

static void *cpu_alloc(struct sb_backend *be, size_t bytes)
{
	void *p = NULL;
	if (bytes == 0)
		bytes = 64;
	bytes = (bytes + 63) & ~(size_t)63;
	if (posix_memalign(&p, 64, bytes))
		return NULL;
	memset(p, 0, bytes);
	struct cpu_impl *im = be->impl;
	pthread_mutex_lock(&im->mem_mu);
	im->bytes_now += bytes;
	if (im->bytes_now > im->bytes_peak)
		im->bytes_peak = im->bytes_now;
	pthread_mutex_unlock(&im->mem_mu);
	/* remember the size in a small header table: keep it simple with a side list */
	struct cpu_block *b = malloc(sizeof *b);
	if (!b) {
		free(p);
		return NULL;
	}
	b->p = p;
	b->bytes = bytes;
	pthread_mutex_lock(&im->mem_mu);
	b->next = im->blocks;
	im->blocks = b;
	pthread_mutex_unlock(&im->mem_mu);
	return p;
}

static void cpu_free(struct sb_backend *be, void *p)
{
	struct cpu_impl *im = be->impl;
	pthread_mutex_lock(&im->mem_mu);
	for (struct cpu_block **b = &im->blocks; *b; b = &(*b)->next) {
		if ((*b)->p == p) {
			struct cpu_block *d = *b;
			im->bytes_now -= d->bytes;
			*b = d->next;
			free(d);
			break;
		}
	}
	pthread_mutex_unlock(&im->mem_mu);
	free(p);
}

static int cpu_copy(struct sb_backend *be, void *dst, const void *src, size_t bytes, struct sb_err *err)
{
	if (bytes)
		memmove(dst, src, bytes);
	return 0;
}

static struct sb_ctx *cpu_main_ctx(struct sb_backend *be)
{
	struct cpu_impl *im = be->impl;
	return &im->pool->ctx[0];
}

static void cpu_zero(struct sb_ctx *ctx, void *p, size_t bytes)
{
	memset(p, 0, bytes);
}
static void cpu_copy_dev(struct sb_ctx *ctx, void *dst, const void *src, size_t bytes)
{
	if (bytes)
		memmove(dst, src, bytes);
}

void *sb_cpu_scratch_at(struct sb_ctx *ctx, size_t bytes, const char *file, int line)
{
	size_t tl = ctx->be && ctx->be->tails ? SB_SCRATCH_TAIL : 0;
	if (tl)
		sb_scratch_tail_move(&ctx->tail, NULL, 0, NULL, 0); /* the last op's zone, before any free */
	if (bytes + tl > ctx->scratch_bytes) {
		/* grows at most a few times, during the first step (open reserves SB_CPU_SCRATCH_DEFAULT) */
		free(ctx->scratch);
		ctx->scratch = NULL;
		ctx->scratch_bytes = 0;
		void *p = NULL;
		if (posix_memalign(&p, 64, bytes + tl))
			return NULL;
		ctx->scratch = p;
		ctx->scratch_bytes = bytes + tl;
	}
	if (tl)
		sb_scratch_tail_move(&ctx->tail, ctx->scratch, bytes, file, line);
	return ctx->scratch;
}

/* scratch_tail: one per worker, all idle between runs; called inside a task (a cached
 * forward pass of sb-eval's workers checks as it ends), only that task's own worker's, as
 * the others may be in the middle of an op using their scratch */
static int cpu_scratch_tail(struct sb_backend *be, int i, const struct sb_scratch_tail **t, unsigned char *got,
                            char *owner, size_t owner_n)
{
	struct pool *pl = ((struct cpu_impl *)be->impl)->pool;
	const struct sb_ctx *self = tl_task_ctx;
	if (self ? i > 0 || self->be != be : i >= pl->n)
		return 0;
	const struct sb_ctx *c = self ? self : &pl->ctx[i];
	i = c->worker;
	*t = &c->tail;
	snprintf(owner, owner_n, "worker %d's scratch (the cpu backend)", i);
	if (c->tail.now.at)
		memcpy(got, c->tail.now.at, SB_SCRATCH_TAIL);
	return 1;
}

/* ---------------------------------------------------------------- embedding */

static float u8_unit[256];
static pthread_once_t u8_once = PTHREAD_ONCE_INIT;
static void u8_table_init(void)
{
	for (int i = 0; i < 256; i++)
		u8_unit[i] = (float)i / 255.0f; /* as torch: uint8 -> float32, then / 255 */
}

static void cpu_patchify(struct sb_ctx *ctx, float *out, const uint8_t *images, const uint32_t *idx, int B, int Ch,
                         int H, int W, int p)
{
	int gh = H / p, gw = W / p, P = Ch * p * p;
	size_t img = (size_t)Ch * H * W;
	for (int b = 0; b < B; b++) {
		const uint8_t *im = images + (size_t)idx[b] * img;
		for (int pr = 0; pr < gh; pr++)
			for (int pc = 0; pc < gw; pc++) {
				float *o = out + ((size_t)b * gh * gw + (size_t)pr * gw + pc) * P;
				for (int c = 0; c < Ch; c++)
					for (int i = 0; i < p; i++) {
						const uint8_t *row =
						    im + (size_t)c * H * W + (size_t)(pr * p + i) * W + pc * p;
						for (int j = 0; j < p; j++)
							*o++ = u8_unit[row[j]];
					}
			}
	}
}

static void cpu_gather_tokens(struct sb_ctx *ctx, int32_t *ids, int32_t *nvalid, const int32_t *tokens,
                              const int32_t *len, const uint32_t *idx, int B, int L)
{
	for (int b = 0; b < B; b++) {
		memcpy(ids + (size_t)b * L, tokens + (size_t)idx[b] * L, (size_t)L * sizeof *ids);
		if (nvalid)
			nvalid[b] = 1 + (len ? len[idx[b]] : L);
	}
}

static void cpu_gather_i32(struct sb_ctx *ctx, int32_t *out, const int32_t *src, const uint32_t *idx, int B)
{
	for (int b = 0; b < B; b++)
		out[b] = src[idx[b]];
}

static void cpu_embedding_forward(struct sb_ctx *ctx, float *out, const int32_t *ids, const float *table, int n, int d)
{
	for (int i = 0; i < n; i++)
		memcpy(out + (size_t)i * d, table + (size_t)ids[i] * d, (size_t)d * sizeof *out);
}

static void cpu_embedding_backward(struct sb_ctx *ctx, float *dtable, const float *dout, const int32_t *ids, int n,
                                   int d)
{
	for (int i = 0; i < n; i++) {
		if (ids[i] == 0)
			continue;
		float *g = dtable + (size_t)ids[i] * d;
		const float *s = dout + (size_t)i * d;
		for (int c = 0; c < d; c++)
			g[c] += s[c];
	}
}

static void cpu_assemble_forward(struct sb_ctx *ctx, float *x, const float *emb, const float *cls, const float *pos,
                                 int B, int T, int d)
{
	for (int b = 0; b < B; b++) {
		float *xb = x + (size_t)b * T * d;
		for (int c = 0; c < d; c++)
			xb[c] = cls[c] + pos[c];
		for (int t = 1; t < T; t++) {
			const float *e = emb + ((size_t)b * (T - 1) + t - 1) * d;
			const float *ps = pos + (size_t)t * d;
			float *o = xb + (size_t)t * d;
			for (int c = 0; c < d; c++)
				o[c] = e[c] + ps[c];
		}
	}
}

static void cpu_assemble_backward(struct sb_ctx *ctx, float *demb, float *dcls, float *dpos, const float *dx, int B,
                                  int T, int d)
{
	for (int b = 0; b < B; b++) {
		const float *g = dx + (size_t)b * T * d;
		for (int c = 0; c < d; c++)
			dcls[c] += g[c];
		for (int t = 0; t < T; t++) {
			float *dp = dpos + (size_t)t * d;
			const float *gt = g + (size_t)t * d;
			for (int c = 0; c < d; c++)
				dp[c] += gt[c];
		}
		if (demb)
			memcpy(demb + (size_t)b * (T - 1) * d, g + d, (size_t)(T - 1) * d * sizeof *demb);
	}
}

static void cpu_gather_cls(struct sb_ctx *ctx, float *out, const float *x, int B, int T, int d)
{
	for (int b = 0; b < B; b++)
		memcpy(out + (size_t)b * d, x + (size_t)b * T * d, (size_t)d * sizeof *out);
}

static void cpu_scatter_cls(struct sb_ctx *ctx, float *dx, const float *dcls, int B, int T, int d)
{
	memset(dx, 0, (size_t)B * T * d * sizeof *dx);
	for (int b = 0; b < B; b++)
		memcpy(dx + (size_t)b * T * d, dcls + (size_t)b * d, (size_t)d * sizeof *dx);
}

/* ---------------------------------------------------------------- dropout */

/* keep[i] = word(offset + i) >> 8 >= ceil(p * 2^24): exactly the test
 * sb_rng_u32_to_unit_f(word) >= p, since both sides are exact in float. */
static uint32_t drop_threshold(float p)
{
	double t = ceil((double)p * 16777216.0);
	return t > 16777216.0 ? 16777217u : (uint32_t)t;
}

void sb_cpu_dropout_mask(uint8_t *mask, size_t n, const struct sb_dropout *drop)
{
	struct sb_dropout d0 = *drop; /* the stream from the device step when one is given */
	d0.stream = sb_dropout_stream(drop);
	const struct sb_dropout *dr = &d0;
	uint32_t thr = drop_threshold(dr->p);
	uint32_t key[2];
	/* reproduce sb_rng_word_at: the key of (seed, purpose), counter (block, stream) */
	struct sb_rng r;
	sb_rng_init(&r, dr->seed, SB_RNG_DROPOUT, dr->stream);
	key[0] = r.key[0];
	key[1] = r.key[1];
	uint64_t i0 = dr->offset, i = i0, end = i0 + n;
	/* leading partial block */
	while (i < end && (i & 3)) {
		uint32_t w = sb_rng_word_at(dr->seed, SB_RNG_DROPOUT, dr->stream, i);
		mask[i - i0] = (w >> 8) >= thr;
		i++;
	}
	uint32_t ctr[4] = {0, 0, (uint32_t)dr->stream, (uint32_t)(dr->stream >> 32)};
	uint32_t out[4];
#if defined(__AVX512F__)
	/* 16 Philox blocks at once: 32x32->64 products with vpmuludq on even lanes */
	while (end - i >= 64) {
		uint64_t blk = i >> 2;
		__m512i c0, c1, c2, c3;
		{
			uint32_t a0[16], a1[16];
			for (int l = 0; l < 16; l++) {
				a0[l] = (uint32_t)(blk + (uint64_t)l);
				a1[l] = (uint32_t)((blk + (uint64_t)l) >> 32);
			}
			c0 = _mm512_loadu_si512(a0);
			c1 = _mm512_loadu_si512(a1);
			c2 = _mm512_set1_epi32((int)ctr[2]);
			c3 = _mm512_set1_epi32((int)ctr[3]);
		}
		uint32_t k0 = key[0], k1 = key[1];
		const __m512i M0 = _mm512_set1_epi64(0xD2511F53u), M1 = _mm512_set1_epi64(0xCD9E8D57u);
		for (int rd = 0; rd < 10; rd++) {
			if (rd) {
				k0 += 0x9E3779B9u;
				k1 += 0xBB67AE85u;
			}
			/* products of even and odd 32-bit lanes separately */
			__m512i p0e = _mm512_mul_epu32(c0, M0), p0o = _mm512_mul_epu32(_mm512_srli_epi64(c0, 32), M0);
			__m512i p1e = _mm512_mul_epu32(c2, M1), p1o = _mm512_mul_epu32(_mm512_srli_epi64(c2, 32), M1);
			/* hi and lo words back into 32-bit lanes */
			__m512i hi0 =
			    _mm512_or_si512(_mm512_srli_epi64(p0e, 32),
			                    _mm512_and_si512(p0o, _mm512_set1_epi64((long long)0xFFFFFFFF00000000ull)));
			__m512i lo0 = _mm512_or_si512(_mm512_and_si512(p0e, _mm512_set1_epi64(0xFFFFFFFFll)),
			                              _mm512_slli_epi64(p0o, 32));
			__m512i hi1 =
			    _mm512_or_si512(_mm512_srli_epi64(p1e, 32),
			                    _mm512_and_si512(p1o, _mm512_set1_epi64((long long)0xFFFFFFFF00000000ull)));
			__m512i lo1 = _mm512_or_si512(_mm512_and_si512(p1e, _mm512_set1_epi64(0xFFFFFFFFll)),
			                              _mm512_slli_epi64(p1o, 32));
			__m512i n0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32((int)k0));
			__m512i n2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32((int)k1));
			c0 = n0;
			c1 = lo1;
			c2 = n2;
			c3 = lo0;
		}
		uint8_t *m = mask + (i - i0);
#if defined(__AVX512BW__) && defined(__BMI2__)
		/* element 4 l + q of the chunk is word q of lane l: interleave the four lane masks */
		const __m512i tv = _mm512_set1_epi32((int)thr);
		uint64_t k0m = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(c0, 8), tv);
		uint64_t k1m = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(c1, 8), tv);
		uint64_t k2m = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(c2, 8), tv);
		uint64_t k3m = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(c3, 8), tv);
		uint64_t bits = _pdep_u64(k0m, 0x1111111111111111ull) | _pdep_u64(k1m, 0x2222222222222222ull) |
		                _pdep_u64(k2m, 0x4444444444444444ull) | _pdep_u64(k3m, 0x8888888888888888ull);
		_mm512_storeu_si512(m, _mm512_maskz_set1_epi8(bits, 1));
#else
		uint32_t w[4][16];
		_mm512_storeu_si512(w[0], c0);
		_mm512_storeu_si512(w[1], c1);
		_mm512_storeu_si512(w[2], c2);
		_mm512_storeu_si512(w[3], c3);
		for (int l = 0; l < 16; l++)
			for (int q = 0; q < 4; q++)
				m[l * 4 + q] = (w[q][l] >> 8) >= thr;
#endif
		i += 64;
	}
#elif defined(__AVX2__)
	/* 8 Philox blocks at once: the rounds above on 256-bit registers */
	const __m256i M0 = _mm256_set1_epi64x(0xD2511F53u), M1 = _mm256_set1_epi64x(0xCD9E8D57u);
	const __m256i LO = _mm256_set1_epi64x(0xFFFFFFFFll), HI = _mm256_set1_epi64x((long long)0xFFFFFFFF00000000ull);
	/* (w >> 8) < 2^24, so a signed compare against thr - 1 (-1 when thr is 0) is (w >> 8) >= thr */
	const __m256i tv = _mm256_set1_epi32((int)thr - 1);
	/* byte 4 q + l of a 128-bit lane after the packs (word q of block l) to byte 4 l + q */
	const __m256i to_block = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12,
	                                          1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	while (end - i >= 32) {
		uint64_t blk = i >> 2;
		uint32_t a0[8], a1[8];
		for (int l = 0; l < 8; l++) {
			a0[l] = (uint32_t)(blk + (uint64_t)l);
			a1[l] = (uint32_t)((blk + (uint64_t)l) >> 32);
		}
		__m256i c0 = _mm256_loadu_si256((const __m256i *)a0), c1 = _mm256_loadu_si256((const __m256i *)a1);
		__m256i c2 = _mm256_set1_epi32((int)ctr[2]), c3 = _mm256_set1_epi32((int)ctr[3]);
		uint32_t k0 = key[0], k1 = key[1];
		for (int rd = 0; rd < 10; rd++) {
			if (rd) {
				k0 += 0x9E3779B9u;
				k1 += 0xBB67AE85u;
			}
			__m256i p0e = _mm256_mul_epu32(c0, M0), p0o = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), M0);
			__m256i p1e = _mm256_mul_epu32(c2, M1), p1o = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), M1);
			__m256i hi0 = _mm256_or_si256(_mm256_srli_epi64(p0e, 32), _mm256_and_si256(p0o, HI));
			__m256i lo0 = _mm256_or_si256(_mm256_and_si256(p0e, LO), _mm256_slli_epi64(p0o, 32));
			__m256i hi1 = _mm256_or_si256(_mm256_srli_epi64(p1e, 32), _mm256_and_si256(p1o, HI));
			__m256i lo1 = _mm256_or_si256(_mm256_and_si256(p1e, LO), _mm256_slli_epi64(p1o, 32));
			__m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
			__m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
			c0 = n0;
			c1 = lo1;
			c2 = n2;
			c3 = lo0;
		}
		/* 0 / -1 per word, packed to bytes (per 128-bit lane: words 0..3 of its 4 blocks, word
		 * by word), put in block order, as 0 / 1 */
		__m256i g0 = _mm256_cmpgt_epi32(_mm256_srli_epi32(c0, 8), tv);
		__m256i g1 = _mm256_cmpgt_epi32(_mm256_srli_epi32(c1, 8), tv);
		__m256i g2 = _mm256_cmpgt_epi32(_mm256_srli_epi32(c2, 8), tv);
		__m256i g3 = _mm256_cmpgt_epi32(_mm256_srli_epi32(c3, 8), tv);
		__m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(g0, g1), _mm256_packs_epi32(g2, g3));
		bytes = _mm256_and_si256(_mm256_shuffle_epi8(bytes, to_block), _mm256_set1_epi8(1));
		_mm256_storeu_si256((__m256i *)(mask + (i - i0)), bytes);
		i += 32;
	}
#endif
	while (end - i >= 4) {
		uint64_t blk = i >> 2;
		ctr[0] = (uint32_t)blk;
		ctr[1] = (uint32_t)(blk >> 32);
		sb_philox4x32_10(out, ctr, key);
		for (int q = 0; q < 4; q++)
			mask[i - i0 + q] = (out[q] >> 8) >= thr;
		i += 4;
	}
	while (i < end) {
		uint32_t w = sb_rng_word_at(dr->seed, SB_RNG_DROPOUT, dr->stream, i);
		mask[i - i0] = (w >> 8) >= thr;
		i++;
	}
}

static inline float drop_scale(float p)
{
	return 1.0f / (1.0f - p);
}

/* ---------------------------------------------------------------- layer norm */

#define LN_EPS 1e-5f

/* mean and rstd of a row: two passes, vector partial sums in a fixed order */
static void row_moments(const float *r, int d, float *mean, float *rstd)
{
	float s = 0;
	int c = 0;
	if (d >= VL) {
		ve a[VP];
		for (int h = 0; h < VP; h++)
			a[h] = vzero_e();
		for (; c + VL <= d; c += VL)
			for (int h = 0; h < VP; h++)
				a[h] += vload_e(r + c + h * VE);
		s = vhsum_parts(a);
	}
	for (; c < d; c++)
		s += r[c];
	float mu = s / (float)d;
	float q = 0;
	c = 0;
	if (d >= VL) {
		ve a[VP], m = vset1_e(mu);
		for (int h = 0; h < VP; h++)
			a[h] = vzero_e();
		for (; c + VL <= d; c += VL)
			for (int h = 0; h < VP; h++) {
				ve t = vload_e(r + c + h * VE) - m;
				a[h] = vfma_e(t, t, a[h]);
			}
		q = vhsum_parts(a);
	}
	for (; c < d; c++) {
		float t = r[c] - mu;
		q = sfma(t, t, q);
	}
	*mean = mu;
	*rstd = 1.0f / sqrtf(q / (float)d + LN_EPS);
}

static void cpu_residual_ln_forward(struct sb_ctx *ctx, float *out, float *r, float *mean, float *rstd, uint8_t *mask,
                                    const float *x, const float *y, const float *w, const float *b,
                                    const struct sb_dropout *drop, int M, int d)
{
	int use_drop = y && drop && drop->p > 0;
	float sc = use_drop ? drop_scale(drop->p) : 1.0f;
	if (use_drop)
		sb_cpu_dropout_mask(mask, (size_t)M * d, drop);
	for (int i = 0; i < M; i++) {
		const float *xi = x + (size_t)i * d;
		float *ri = r + (size_t)i * d, *oi = out + (size_t)i * d;
		if (!y) {
			if (ri != xi)
				memcpy(ri, xi, (size_t)d * sizeof *ri);
		} else if (use_drop) {
			const float *yi = y + (size_t)i * d;
			const uint8_t *mi = mask + (size_t)i * d;
			int c = 0;
			for (; c + VE <= d; c += VE)
				vstore_e(ri + c, vload_e(xi + c) + vload_e(yi + c) * vmask_e(mi + c, sc));
			for (; c < d; c++)
				ri[c] = xi[c] + yi[c] * (mi[c] ? sc : 0.0f);
		} else {
			const float *yi = y + (size_t)i * d;
			for (int c = 0; c < d; c++)
				ri[c] = xi[c] + yi[c];
		}
		float mu, rs;
		row_moments(ri, d, &mu, &rs);
		mean[i] = mu;
		rstd[i] = rs;
		int c = 0;
		for (; c + VE <= d; c += VE) {
			ve xh = (vload_e(ri + c) - mu) * rs;
			vstore_e(oi + c, vfma_e(xh, vload_e(w + c), vload_e(b + c)));
		}
		for (; c < d; c++)
			oi[c] = sfma((ri[c] - mu) * rs, w[c], b[c]);
	}
}

static void cpu_residual_ln_backward(struct sb_ctx *ctx, float *dx, float *dy, float *dw, float *db, const float *dout,
                                     const float *r, const float *mean, const float *rstd, const uint8_t *mask,
                                     const float *w, float p, int M, int d)
{
	float sc = p > 0 ? drop_scale(p) : 1.0f;
	for (int i = 0; i < M; i++) {
		const float *g = dout + (size_t)i * d, *ri = r + (size_t)i * d;
		float *dxi = dx + (size_t)i * d;
		float mu = mean[i], rs = rstd[i];
		/* sums of dxhat and dxhat * xhat */
		float s1 = 0, s2 = 0;
		int c = 0;
		if (d >= VL) {
			ve a1[VP], a2[VP], m = vset1_e(mu), vr = vset1_e(rs);
			for (int h = 0; h < VP; h++)
				a1[h] = a2[h] = vzero_e();
			for (; c + VL <= d; c += VL)
				for (int h = 0; h < VP; h++) {
					int ch = c + h * VE;
					ve xh = (vload_e(ri + ch) - m) * vr;
					ve gg = vload_e(g + ch);
					ve dxh = gg * vload_e(w + ch);
					a1[h] += dxh;
					a2[h] = vfma_e(dxh, xh, a2[h]);
					vstore_e(dw + ch, vfma_e(gg, xh, vload_e(dw + ch)));
					vstore_e(db + ch, vload_e(db + ch) + gg);
				}
			s1 = vhsum_parts(a1);
			s2 = vhsum_parts(a2);
		}
		for (; c < d; c++) {
			float xh = (ri[c] - mu) * rs;
			float dxh = g[c] * w[c];
			s1 += dxh;
			s2 = sfma(dxh, xh, s2);
			dw[c] = sfma(g[c], xh, dw[c]);
			db[c] += g[c];
		}
		float m1 = s1 / (float)d, m2 = s2 / (float)d;
		c = 0;
		for (; c + VE <= d; c += VE) {
			ve xh = (vload_e(ri + c) - mu) * rs;
			ve dxh = vload_e(g + c) * vload_e(w + c);
			vstore_e(dxi + c, (dxh - m1 - xh * m2) * rs);
		}
		for (; c < d; c++) {
			float xh = (ri[c] - mu) * rs;
			float dxh = g[c] * w[c];
			dxi[c] = (dxh - m1 - xh * m2) * rs;
		}
		if (dy) {
			float *dyi = dy + (size_t)i * d;
			if (p > 0) {
				const uint8_t *mi = mask + (size_t)i * d;
				int cc = 0;
				for (; cc + VE <= d; cc += VE)
					vstore_e(dyi + cc, vload_e(dxi + cc) * vmask_e(mi + cc, sc));
				for (; cc < d; cc++)
					dyi[cc] = dxi[cc] * (mi[cc] ? sc : 0.0f);
			} else {
				memcpy(dyi, dxi, (size_t)d * sizeof *dyi);
			}
		}
	}
}

/* plain layer norm (local mixer): out = LN(x) */
void sb_cpu_layernorm_rows(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b, int M,
                           int d)
{
	for (int i = 0; i < M; i++) {
		const float *ri = x + (size_t)i * d;
		float *oi = out + (size_t)i * d;
		float mu, rs;
		row_moments(ri, d, &mu, &rs);
		mean[i] = mu;
		rstd[i] = rs;
		int c = 0;
		for (; c + VE <= d; c += VE) {
			ve xh = (vload_e(ri + c) - mu) * rs;
			vstore_e(oi + c, vfma_e(xh, vload_e(w + c), vload_e(b + c)));
		}
		for (; c < d; c++)
			oi[c] = sfma((ri[c] - mu) * rs, w[c], b[c]);
	}
}

/* dx (+= when acc) from dout of out = LN(x); dw, db += */
void sb_cpu_layernorm_rows_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                                    const float *mean, const float *rstd, const float *w, int M, int d, int acc)
{
	for (int i = 0; i < M; i++) {
		const float *g = dout + (size_t)i * d, *ri = x + (size_t)i * d;
		float *dxi = dx + (size_t)i * d;
		float mu = mean[i], rs = rstd[i];
		float s1 = 0, s2 = 0;
		for (int c = 0; c < d; c++) {
			float xh = (ri[c] - mu) * rs;
			float dxh = g[c] * w[c];
			s1 += dxh;
			s2 = sfma(dxh, xh, s2);
			dw[c] = sfma(g[c], xh, dw[c]);
			db[c] += g[c];
		}
		float m1 = s1 / (float)d, m2 = s2 / (float)d;
		for (int c = 0; c < d; c++) {
			float xh = (ri[c] - mu) * rs;
			float v = (g[c] * w[c] - m1 - xh * m2) * rs;
			dxi[c] = acc ? dxi[c] + v : v;
		}
	}
}

/* ---------------------------------------------------------------- GELU */

/* gelu(x) = x Phi(x) with the vector erfc; gelu'(x) = Phi(x) + x phi(x) */
void sb_cpu_gelu_vec(float *out, float *dgelu, const float *x, size_t n)
{
	size_t i = 0;
	for (; i + VE <= n; i += VE) {
		ve v = vload_e(x + i), Phi, phi;
		vnormcdf(v, &Phi, &phi);
		if (out)
			vstore_e(out + i, v * Phi);
		if (dgelu)
			vstore_e(dgelu + i, vfma_e(v, phi, Phi));
	}
	if (i < n) {
		float tmp[VE] = {0};
		memcpy(tmp, x + i, (n - i) * sizeof *tmp);
		ve v = vload_e(tmp), Phi, phi;
		vnormcdf(v, &Phi, &phi);
		float o[VE], g[VE];
		vstore_e(o, v * Phi);
		vstore_e(g, vfma_e(v, phi, Phi));
		if (out)
			memcpy(out + i, o, (n - i) * sizeof *o);
		if (dgelu)
			memcpy(dgelu + i, g, (n - i) * sizeof *g);
	}
}

void sb_cpu_normcdf(float *out, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i += VE) {
		float tmp[VE] = {0}, o[VE];
		size_t m = n - i < VE ? n - i : VE;
		memcpy(tmp, x + i, m * sizeof *tmp);
		ve Phi, phi;
		vnormcdf(vload_e(tmp), &Phi, &phi);
		vstore_e(o, Phi);
		memcpy(out + i, o, m * sizeof *o);
	}
}

void sb_cpu_exp(float *out, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i += VE) {
		float tmp[VE] = {0}, o[VE];
		size_t m = n - i < VE ? n - i : VE;
		memcpy(tmp, x + i, m * sizeof *tmp);
		vstore_e(o, vexp(vload_e(tmp)));
		memcpy(out + i, o, m * sizeof *o);
	}
}

void sb_cpu_gelu_ref_f(float *out, const float *x, size_t n)
{
	sb_cpu_gelu_vec(out, NULL, x, n);
}

static void cpu_gelu_forward(struct sb_ctx *ctx, float *out, uint8_t *mask, float *dgelu, const float *inp,
                             const struct sb_dropout *drop, size_t n)
{
	int use = drop && drop->p > 0;
	float sc = use ? drop_scale(drop->p) : 1.0f;
	if (use)
		sb_cpu_dropout_mask(mask, n, drop);
	size_t i = 0;
	for (; i + VE <= n; i += VE) {
		ve v = vload_e(inp + i), Phi, phi;
		vnormcdf(v, &Phi, &phi);
		ve o = v * Phi;
		vstore_e(out + i, use ? o * vmask_e(mask + i, sc) : o);
		if (dgelu) /* after the load: dgelu may be inp */
			vstore_e(dgelu + i, vfma_e(v, phi, Phi));
	}
	if (i < n) { /* tail through a padded copy */
		float xb[VE] = {0}, o[VE], g[VE];
		uint8_t mb[VE] = {0};
		memcpy(xb, inp + i, (n - i) * sizeof *xb);
		if (use)
			memcpy(mb, mask + i, n - i);
		ve v = vload_e(xb), Phi, phi;
		vnormcdf(v, &Phi, &phi);
		ve r = v * Phi;
		vstore_e(o, use ? r * vmask_e(mb, sc) : r);
		memcpy(out + i, o, (n - i) * sizeof *o);
		if (dgelu) {
			vstore_e(g, vfma_e(v, phi, Phi));
			memcpy(dgelu + i, g, (n - i) * sizeof *g);
		}
	}
}

/* dinp = dgelu * drop backward (dout); dinp may alias dout */
static void cpu_gelu_backward(struct sb_ctx *ctx, float *dinp, const float *dout, const float *dgelu,
                              const uint8_t *mask, float p, size_t n)
{
	int use = p > 0;
	float sc = use ? drop_scale(p) : 1.0f;
	size_t i = 0;
	for (; i + VE <= n; i += VE) {
		ve g = vload_e(dout + i);
		if (use)
			g = g * vmask_e(mask + i, sc);
		vstore_e(dinp + i, vload_e(dgelu + i) * g);
	}
	for (; i < n; i++) {
		float g = dout[i];
		if (use)
			g = g * (mask[i] ? sc : 0.0f); /* as vmask_e: a dropped -g gives -0 */
		dinp[i] = dgelu[i] * g;
	}
}

/* ---------------------------------------------------------------- HAE alpha */

static void cpu_hae_alpha(struct sb_ctx *ctx, float *alpha, const float *raw, int n)
{
	for (int i = 0; i < n; i++) {
		float s = 1.0f / (1.0f + expf(-raw[i]));
		alpha[i] = 1.05f + 0.90f * s;
	}
}

static void cpu_hae_alpha_backward(struct sb_ctx *ctx, float *draw, const float *dalpha, const float *raw, int n)
{
	for (int i = 0; i < n; i++) {
		float s = 1.0f / (1.0f + expf(-raw[i]));
		draw[i] += dalpha[i] * 0.90f * s * (1.0f - s);
	}
}

/* ---------------------------------------------------------------- loss */

static void cpu_cross_entropy(struct sb_ctx *ctx, float *losses, int32_t *pred, float *dlogits, const float *logits,
                              const int32_t *labels, int B, int C, float dscale)
{
	for (int b = 0; b < B; b++) {
		const float *l = logits + (size_t)b * C;
		float mx = l[0];
		for (int c = 1; c < C; c++)
			if (l[c] > mx)
				mx = l[c];
		double s = 0;
		for (int c = 0; c < C; c++)
			s += exp((double)l[c] - mx);
		double lse = log(s) + mx;
		losses[b] = (float)(lse - l[labels[b]]);
		if (pred)
			pred[b] = sb_argmax(l, C);
		if (dlogits) {
			float *g = dlogits + (size_t)b * C;
			for (int c = 0; c < C; c++) {
				double pc = exp((double)l[c] - lse);
				g[c] = (float)((pc - (c == labels[b])) * dscale);
			}
		}
	}
}

/* ---------------------------------------------------------------- optimiser */

struct red_arg {
	float *dst;
	const float *src;
	int nslots;
	size_t stride;
};
static void red_chunk(void *p, size_t lo, size_t hi, int ch)
{
	struct red_arg *a = p;
	for (size_t i = lo; i < hi; i++) {
		float s = a->src[i];
		for (int k = 1; k < a->nslots; k++)
			s += a->src[(size_t)k * a->stride + i];
		a->dst[i] = s;
	}
}
static void cpu_reduce_slots(struct sb_ctx *ctx, float *dst, const float *src, int nslots, size_t stride, size_t n)
{
	struct red_arg a = {dst, src, nslots, stride};
	par_chunks(ctx, n, red_chunk, &a);
}

struct sq_arg {
	const float *x;
	double *part;
};
static void sq_chunk(void *p, size_t lo, size_t hi, int ch)
{
	struct sq_arg *a = p;
	double s = 0;
	for (size_t i = lo; i < hi; i++)
		s += (double)a->x[i] * a->x[i];
	a->part[ch] = s;
}
static double cpu_sumsq(struct sb_ctx *ctx, const float *x, size_t n)
{
	int nc = nchunks(n);
	double stackpart[64], *part = nc <= 64 ? stackpart : malloc((size_t)nc * sizeof *part);
	if (!part)
		return NAN;
	struct sq_arg a = {x, part};
	par_chunks(ctx, n, sq_chunk, &a);
	double s = 0;
	for (int i = 0; i < nc; i++)
		s += part[i];
	if (part != stackpart)
		free(part);
	return s;
}

struct scale_arg {
	float *x;
	float c;
};
static void scale_chunk(void *p, size_t lo, size_t hi, int ch)
{
	struct scale_arg *a = p;
	for (size_t i = lo; i < hi; i++)
		a->x[i] *= a->c;
}
static void cpu_scale(struct sb_ctx *ctx, float *x, float c, size_t n)
{
	struct scale_arg a = {x, c};
	par_chunks(ctx, n, scale_chunk, &a);
}

struct adam_arg {
	float *p, *m, *v;
	const float *g;
	float decay, b1, omb1, b2, omb2, step_size, bc2_sqrt, eps;
};
static void adam_chunk(void *pp, size_t lo, size_t hi, int ch)
{
	struct adam_arg *a = pp;
	/* torch.optim.AdamW (1.13, single-tensor path), operation by operation in float */
	for (size_t i = lo; i < hi; i++) {
		float p = a->p[i] * a->decay;
		float g = a->g[i];
		float m = a->m[i] * a->b1 + g * a->omb1;
		float v = a->v[i] * a->b2 + a->omb2 * (g * g);
		float denom = sqrtf(v) / a->bc2_sqrt + a->eps;
		p = p + (-a->step_size) * (m / denom);
		a->p[i] = p;
		a->m[i] = m;
		a->v[i] = v;
	}
}
static void cpu_adamw(struct sb_ctx *ctx, float *p, float *m, float *v, const float *g, size_t n, float lr, float b1,
                      float b2, float eps, float wd, int64_t t)
{
	double bc1 = 1.0 - pow((double)b1, (double)t), bc2 = 1.0 - pow((double)b2, (double)t);
	struct adam_arg a = {p,
	                     m,
	                     v,
	                     g,
	                     (float)(1.0 - (double)lr * (double)wd),
	                     b1,
	                     (float)(1.0 - (double)b1),
	                     b2,
	                     (float)(1.0 - (double)b2),
	                     (float)((double)lr / bc1),
	                     (float)sqrt(bc2),
	                     eps};
	par_chunks(ctx, n, adam_chunk, &a);
}

/* ---------------------------------------------------------------- the step without host round trips */

/* the host code the encoder ran before these ops, operation by operation */
static void cpu_loss_accum(struct sb_ctx *ctx, struct sb_step_acc *acc, const float *losses, int B,
                           const struct sb_step_state *state)
{
	double s = 0;
	for (int i = 0; i < B; i++)
		s += losses[i];
	double mean = s / B;
	acc->last_loss = mean;
	if (isfinite(mean)) {
		acc->loss_sum += mean;
		acc->steps++;
	} else if (acc->first_bad < 0) {
		acc->first_bad = state->step;
		acc->bad_loss = mean;
	}
}

static void cpu_clip_coef(struct sb_ctx *ctx, struct sb_step_acc *acc, const float *g, size_t n, float max_norm)
{
	double norm = sqrt(cpu_sumsq(ctx, g, n));
	acc->grad_norm = norm;
	acc->clipped = 0;
	acc->coef = 1.0f;
	if (max_norm > 0) {
		/* torch.nn.utils.clip_grad_norm_: coef = max_norm / (total_norm + 1e-6), applied when < 1 */
		double coef = (double)max_norm / (norm + 1e-6);
		if (coef < 1.0) {
			acc->coef = (float)coef;
			acc->clipped = 1;
		}
	}
}

struct adamd_arg {
	struct adam_arg a;
	float coef;
	int clipped;
};
static void adamd_chunk(void *pp, size_t lo, size_t hi, int ch)
{
	struct adamd_arg *d = pp;
	struct adam_arg *a = &d->a;
	for (size_t i = lo; i < hi; i++) {
		float g = a->g[i];
		if (d->clipped)
			g *= d->coef; /* what scale did to the gradient buffer */
		float p = a->p[i] * a->decay;
		float m = a->m[i] * a->b1 + g * a->omb1;
		float v = a->v[i] * a->b2 + a->omb2 * (g * g);
		float denom = sqrtf(v) / a->bc2_sqrt + a->eps;
		p = p + (-a->step_size) * (m / denom);
		a->p[i] = p;
		a->m[i] = m;
		a->v[i] = v;
	}
}
static void cpu_adamw_dev(struct sb_ctx *ctx, float *p, float *m, float *v, const float *g, size_t n,
                          const struct sb_step_acc *acc, const struct sb_step_state *st)
{
	if (!isfinite(acc->last_loss))
		return;
	const struct sb_adamw_k *k = &st->k;
	struct adamd_arg d = {{p, m, v, g, k->decay, k->b1, k->omb1, k->b2, k->omb2, k->step_size, k->bc2_sqrt, k->eps},
	                      acc->coef,
	                      acc->clipped};
	par_chunks(ctx, n, adamd_chunk, &d);
}

/* ---------------------------------------------------------------- open / close */

static void cpu_destroy(struct sb_backend *be);

static const struct sb_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .main_ctx = cpu_main_ctx,
    .run = cpu_run,
    .zero = cpu_zero,
    .copy = cpu_copy_dev,
    .patchify = cpu_patchify,
    .gather_tokens = cpu_gather_tokens,
    .gather_i32 = cpu_gather_i32,
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .assemble_forward = cpu_assemble_forward,
    .assemble_backward = cpu_assemble_backward,
    .matmul_forward = sb_cpu_matmul_forward,
    .matmul_backward = sb_cpu_matmul_backward,
    .gather_cls = cpu_gather_cls,
    .scatter_cls = cpu_scatter_cls,
    .residual_ln_forward = cpu_residual_ln_forward,
    .residual_ln_backward = cpu_residual_ln_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .attention_forward = sb_cpu_attention_forward,
    .attention_backward = sb_cpu_attention_backward,
    .attention_stats = sb_cpu_attention_stats,
    .hae_alpha = cpu_hae_alpha,
    .hae_alpha_backward = cpu_hae_alpha_backward,
    .localmix_forward = sb_cpu_localmix_forward,
    .localmix_backward = sb_cpu_localmix_backward,
    .cross_entropy = cpu_cross_entropy,
    .reduce_slots = cpu_reduce_slots,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .loss_accum = cpu_loss_accum,
    .clip_coef = cpu_clip_coef,
    .adamw_dev = cpu_adamw_dev,
    .adamw = cpu_adamw,
    .scratch_tail = cpu_scratch_tail,
};

static int ncores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : (int)n;
}

int sb_backend_cpu_open(int threads, struct sb_backend **out, struct sb_err *err)
{
	pthread_once(&u8_once, u8_table_init);
	sb_cpu_blas_single_thread();
	if (threads <= 0)
		threads = ncores();
	if (threads > 256)
		threads = 256;
	struct sb_backend *be = calloc(1, sizeof *be);
	struct cpu_impl *im = calloc(1, sizeof *im);
	struct pool *pl = calloc(1, sizeof *pl);
	if (!be || !im || !pl)
		goto oom;
	be->ops = &cpu_ops;
	snprintf(be->name, sizeof be->name, "cpu");
	be->threads = threads;
	be->tile = SB_CPU_TILE;
	be->slots = SB_CPU_SLOTS;
	be->impl = im;
	im->pool = pl;
	pthread_mutex_init(&im->mem_mu, NULL);
	pthread_mutex_init(&im->run_mu, NULL);
	sb_cpu_describe(be->device, sizeof be->device, threads);
	pl->n = threads;
	pl->be = be;
	pthread_mutex_init(&pl->mu, NULL);
	pthread_cond_init(&pl->cv_go, NULL);
	pthread_cond_init(&pl->cv_done, NULL);
	pl->ctx = calloc((size_t)threads, sizeof *pl->ctx);
	pl->th = calloc((size_t)threads, sizeof *pl->th);
	if (!pl->ctx || !pl->th)
		goto oom;
	for (int i = 0; i < threads; i++) {
		pl->ctx[i].be = be;
		pl->ctx[i].pool = pl;
		pl->ctx[i].worker = i;
		/* scratch for every tier's ops (largest: the packed w^T of medium's fc2, 256 KiB);
		 * it grows on first use beyond that, so a training step normally allocates nothing */
		if (!sb_cpu_scratch(&pl->ctx[i], SB_CPU_SCRATCH_DEFAULT))
			goto oom;
	}
	for (int i = 1; i < threads; i++) {
		int rc = pthread_create(&pl->th[i], NULL, pool_thread, &pl->ctx[i]);
		if (rc) {
			pl->n = i;
			be->threads = i;
			break;
		}
	}
	*out = be;
	return 0;
oom:
	free(be);
	free(im);
	free(pl);
	return SB_ERR(err, SB_EINTERNAL, "out of memory opening the CPU backend");
}

static void cpu_destroy(struct sb_backend *be)
{
	struct cpu_impl *im = be->impl;
	struct pool *pl = im->pool;
	pthread_mutex_lock(&pl->mu);
	pl->stop = 1;
	pthread_cond_broadcast(&pl->cv_go);
	pthread_mutex_unlock(&pl->mu);
	for (int i = 1; i < pl->n; i++)
		pthread_join(pl->th[i], NULL);
	for (int i = 0; i < pl->n; i++)
		free(pl->ctx[i].scratch);
	free(pl->ctx);
	free(pl->th);
	while (im->blocks) {
		struct cpu_block *b = im->blocks;
		im->blocks = b->next;
		free(b->p);
		free(b);
	}
	free(pl);
	free(im);
	free(be);
}

size_t sb_cpu_bytes_peak(struct sb_backend *be)
{
	struct cpu_impl *im = be->impl;
	return im->bytes_peak;
}

int sb_device_check(const char *device, struct sb_err *err)
{
	int cuda, index, tf32;
	SB_TRY(sb_device_parse(device, &cuda, &index, &tf32, err));
	if (cuda && !sb_backend_cuda_open)
		return SB_ERR(err, SB_EUSAGE, "device '%s': this build has no CUDA backend (build with CUDA=1)",
		              device);
	return 0;
}

int sb_backend_open(const char *device, int threads, struct sb_backend **out, struct sb_err *err)
{
	SB_TRY(sb_device_check(device, err));
	int rc = !device || !strcmp(device, "cpu") ? sb_backend_cpu_open(threads, out, err)
	                                           : sb_backend_cuda_open(device, threads, out, err);
	if (!rc && sb_redzone_wanted() && sb_be_tails_enable(*out)) {
		sb_backend_close(*out);
		*out = NULL;
		return SB_ERR(err, SB_EINTERNAL, "out of memory (SB_ARENA_CHECK)");
	}
	return rc;
}

void sb_backend_close(struct sb_backend *be)
{
	if (!be)
		return;
	sb_be_tails_free(be);
	be->ops->destroy(be);
}
