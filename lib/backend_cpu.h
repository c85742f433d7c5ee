/* backend_cpu.h — private declarations shared by lib/backend_cpu*.c. */
#ifndef SB_BACKEND_CPU_H
#define SB_BACKEND_CPU_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "redzone.h"

/* Samples per tile and gradient slots of the CPU backend. Results depend on
 * these constants (the order of gradient sums), never on the thread count. */
#define SB_CPU_TILE 8
#define SB_CPU_SLOTS 16
#define SB_CPU_SCRATCH_DEFAULT ((size_t)1 << 20)

struct pool;

struct sb_ctx {
	struct sb_backend *be;
	struct pool *pool;
	int worker;
	int in_task;
	void *scratch;
	size_t scratch_bytes;
	struct sb_scratch_tail tail; /* SB_ARENA_CHECK: the zone after the last request */
	struct sb_err err;
};

struct cpu_block {
	void *p;
	size_t bytes;
	struct cpu_block *next;
};

struct cpu_impl {
	struct pool *pool;
	pthread_mutex_t mem_mu, run_mu;
	size_t bytes_now, bytes_peak;
	struct cpu_block *blocks;
};

/* per-worker scratch of at least `bytes` (64-byte aligned); NULL on failure; with the
 * backend's tails (SB_ARENA_CHECK) a red zone right after the bytes, reported with the
 * request's file:line (redzone.h's scratch tails) */
void *sb_cpu_scratch_at(struct sb_ctx *ctx, size_t bytes, const char *file, int line);
#define sb_cpu_scratch(ctx, bytes) sb_cpu_scratch_at((ctx), (bytes), __FILE__, __LINE__)
void sb_cpu_dropout_mask(uint8_t *mask, size_t n, const struct sb_dropout *dr);
void sb_cpu_gelu_vec(float *out, float *dgelu, const float *x, size_t n);
void sb_cpu_layernorm_rows(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b, int M,
                           int d);
void sb_cpu_layernorm_rows_backward(float *dx, float *dw, float *db, const float *dout, const float *x,
                                    const float *mean, const float *rstd, const float *w, int M, int d, int acc);

/* backend_cpu_dense.c */
/* C[i][j] (= or += when acc) sum_k A[i*ars + k*acs] B[k*ldb + j] (+ bias[j] when not acc),
 * i < M, j < N, k < K; one FMA chain per element in increasing k */
void sb_cpu_gemm(float *C, int ldc, const float *A, long ars, long acs, const float *B, int ldb, int M, int N, int K,
                 const float *bias, int acc);
void sb_cpu_blas_single_thread(void);
void sb_cpu_describe(char *buf, size_t n, int threads);
/* OpenBLAS's kernel set ("SkylakeX", "Haswell", ...; "unknown" without OpenBLAS), and whether
 * it is a pre-AVX2 fallback on a CPU with AVX2 (products far slower than the CPU allows:
 * OPENBLAS_CORETYPE chooses the set); sb_blas_core_generic is the rule */
const char *sb_cpu_blas_core(void);
int sb_cpu_blas_generic(void);
int sb_blas_core_generic(const char *core, int cpu_has_avx2);
void sb_cpu_matmul_forward(struct sb_ctx *ctx, float *out, const float *inp, const float *w, const float *bias, int M,
                           int K, int N);
void sb_cpu_matmul_backward(struct sb_ctx *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                            const float *inp, const float *w, int M, int K, int N, int accumulate);
void sb_cpu_localmix_forward(struct sb_ctx *ctx, float *out, float *y, float *z, float *mean, float *rstd,
                             const float *x, const int32_t *nvalid, const float *lnw, const float *lnb, const float *cw,
                             const float *cb, const float *scale, int B, int T, int d, int G);
void sb_cpu_localmix_backward(struct sb_ctx *ctx, float *dx, float *dlnw, float *dlnb, float *dcw, float *dcb,
                              float *dscale, const float *dout, const float *x, const float *y, const float *z,
                              const float *mean, const float *rstd, const int32_t *nvalid, const float *lnw,
                              const float *cw, const float *scale, int B, int T, int d, int G);

/* backend_cpu_attn.c */
int sb_cpu_attention_forward(struct sb_ctx *ctx, float *out, float *S, float *P, float *aux, const float *qkv,
                             const int32_t *nvalid, const float *alpha, const struct sb_norm *nm, int B, int T, int d,
                             int NH, struct sb_err *err);
void sb_cpu_attention_backward(struct sb_ctx *ctx, float *dqkv, float *dalpha, const float *dout, const float *qkv,
                               const float *S, const float *P, const float *aux, const int32_t *nvalid,
                               const float *alpha, const struct sb_norm *nm, int B, int T, int d, int NH);
void sb_cpu_attention_stats(struct sb_ctx *ctx, struct sb_attn_stats *st, const float *P, const int32_t *nvalid, int B,
                            int NH, int T);

#endif
