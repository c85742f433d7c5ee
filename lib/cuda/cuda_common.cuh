/* cuda_common.cuh — private to lib/cuda/: the CUDA backend's context, its
 * error handling (check macros that fill struct sb_err, a sticky error that
 * every later fallible call returns) and launch helpers. */
#ifndef SB_CUDA_COMMON_CUH
#define SB_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "backend.h"
#include "err.h"
#include "redzone.h" /* struct sb_scratch_tail and its inline functions only */
}
#include "backend_cuda.h"

/* The CUDA library fills struct sb_err itself rather than through lib/err.c:
 * programs link it after lib/libsparsebench.a, so it must not call back into
 * that archive (an err.o not yet pulled in would be left unresolved). */
int sb_cuda_err_setf(struct sb_err *err, int code, const char *src, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
#undef SB_ERR
#define SB_ERR(err, code, ...) sb_cuda_err_setf((err), (code), __FILE__, __LINE__, __VA_ARGS__)
#define sb_err_setf sb_cuda_err_setf
#define sb_err_clear(e) memset((e), 0, sizeof *(e))

/* device-side data errors (written by kernels into host-mapped memory, read at
 * the next synchronisation) */
enum { DFLAG_NONE = 0, DFLAG_NO_FINITE = 1, DFLAG_NVALID = 2 };

struct cuda_impl;

struct sb_ctx {
	struct sb_backend *be;
	struct cuda_impl *im;
	cudaStream_t st;
	cublasHandle_t blas;
};

#define SB_RING 4                 /* pinned staging slots for small uploads */
#define SB_RING_SLOT (64 << 10)   /* bytes per slot */

struct cuda_impl {
	int dev;
	struct sb_ctx ctx;
	int tf32;
	/* Errors. A failure that poisons the CUDA context (illegal address, launch failure...)
	 * is sticky: every later fallible call returns it. Any other failure (a bad launch
	 * configuration, out of memory, a cuBLAS status, a shape this backend does not
	 * support, a data error found by a kernel) is pending: the next fallible call returns
	 * it once and the backend stays usable. */
	int failed;          /* sticky */
	struct sb_err err;   /* the sticky error */
	int pending;
	struct sb_err pend;  /* the pending error */
	int cuda_errs;       /* CUDA/cuBLAS failures seen (sb_cuda_failed) */
	int capturing;       /* between graph_begin and graph_end */
	int capture_bad;     /* something during the recording failed or was refused */
	/* small uploads go through pinned slots, so that they never wait for the device */
	unsigned char *ring_host;
	cudaEvent_t ring_ev[SB_RING];
	int ring_used[SB_RING];
	int ring_next;
	int *dflag_host;     /* pinned, mapped: [0] code, [1] block, [2] row, [3] value */
	int *dflag_dev;
	double *red_host;    /* pinned, mapped: sumsq result */
	double *red_dev;
	void *workspace;     /* cuBLAS workspace (own per handle: reproducible) */
	size_t workspace_n;
	/* scratch grown on first use (the first step), never during a recording */
	float *ones;
	size_t ones_n;
	void *scr;
	size_t scr_n;
	struct sb_scratch_tail tail; /* SB_ARENA_CHECK: the zone after the last request (redzone.h) */
	/* A recorded step (CUDA graph) names the scratch and ones buffers it was recorded
	 * with. Ops issued one by one between replays (statistics steps, evaluation) may
	 * grow them; while any recording exists the old buffer is retired, not freed, so a
	 * replay never writes to memory the pool has handed to someone else. Retired
	 * buffers are freed (stream-ordered, after every replay queued) when the last
	 * recording is freed, and at destroy. */
	int graphs_live;     /* recordings instantiated by graph_end and not yet freed */
	struct retired_buf *retired;
	size_t retired_n;    /* bytes held by retired buffers */
	int max_smem;
	int sm_count;
	size_t bytes_now, bytes_peak;
};

/* a failed CUDA or cuBLAS call (code: the cudaError_t, 0 for cuBLAS): into err when
 * given, else pending; sticky when it poisons the context; returns SB_EINTERNAL */
int sb_cuda_fail(struct cuda_impl *im, struct sb_err *err, const char *what, const char *detail, int code,
		 const char *file, int line);
/* a request this backend refuses (unsupported shape, a wait while recording...):
 * into err when given, else pending; never sticky; returns code */
int sb_cuda_refuse(struct cuda_impl *im, struct sb_err *err, int code, const char *file, int line, const char *fmt,
		   ...) __attribute__((format(printf, 6, 7)));
/* the sticky error, else the pending one (cleared), into err; its code or 0 */
int sb_cuda_sticky(struct cuda_impl *im, struct sb_err *err);
/* synchronise the stream, then report a CUDA error or a device-side data error */
int sb_cuda_sync(struct cuda_impl *im, struct sb_err *err);
/* scratch of at least `bytes` on the device (grows; NULL on failure, recorded); with the
 * backend's tails (SB_ARENA_CHECK) a red zone right after the bytes, reported with the
 * request's file:line (redzone.h's scratch tails), except while recording */
void *sb_cuda_scratch_at(struct cuda_impl *im, size_t bytes, const char *file, int line);
#define sb_cuda_scratch(im, bytes) sb_cuda_scratch_at((im), (bytes), __FILE__, __LINE__)

#define CU_RET(im, err, call)                                                                                      \
	do {                                                                                                       \
		cudaError_t e_ = (call);                                                                           \
		if (e_ != cudaSuccess)                                                                             \
			return sb_cuda_fail((im), (err), #call, cudaGetErrorString(e_), (int)e_, __FILE__, __LINE__);      \
	} while (0)

#define CU_NOTE(im, call)                                                                                          \
	do {                                                                                                       \
		cudaError_t e_ = (call);                                                                           \
		if (e_ != cudaSuccess)                                                                             \
			sb_cuda_fail((im), NULL, #call, cudaGetErrorString(e_), (int)e_, __FILE__, __LINE__);              \
	} while (0)

const char *sb_cublas_status_name(cublasStatus_t s);

#define CB_NOTE(im, call)                                                                                          \
	do {                                                                                                       \
		cublasStatus_t s_ = (call);                                                                        \
		if (s_ != CUBLAS_STATUS_SUCCESS)                                                                   \
			sb_cuda_fail((im), NULL, #call, sb_cublas_status_name(s_), 0, __FILE__, __LINE__);           \
	} while (0)

#define CB_RET(im, err, call)                                                                                      \
	do {                                                                                                       \
		cublasStatus_t s_ = (call);                                                                        \
		if (s_ != CUBLAS_STATUS_SUCCESS)                                                                   \
			return sb_cuda_fail((im), (err), #call, sb_cublas_status_name(s_), 0, __FILE__, __LINE__);   \
	} while (0)

/* after every kernel launch */
#define LAUNCHED(im, name)                                                                                         \
	do {                                                                                                       \
		cudaError_t e_ = cudaGetLastError();                                                               \
		if (e_ != cudaSuccess)                                                                             \
			sb_cuda_fail((im), NULL, "launch " name, cudaGetErrorString(e_), (int)e_, __FILE__, __LINE__);     \
	} while (0)

static inline unsigned cdiv(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

/* attn_cuda.cu */
/* at open: let the attention kernels use the device's shared memory (before any recording) */
int sb_cuda_attention_init(struct cuda_impl *im, struct sb_err *err);
int sb_cuda_attention_forward(struct sb_ctx *ctx, float *out, float *S, float *P, float *aux, const float *qkv,
			      const int32_t *nvalid, const float *alpha, const struct sb_norm *nm, int B, int T, int d,
			      int NH, struct sb_err *err);
void sb_cuda_attention_backward(struct sb_ctx *ctx, float *dqkv, float *dalpha, const float *dout, const float *qkv,
				const float *S, const float *P, const float *aux, const int32_t *nvalid,
				const float *alpha, const struct sb_norm *nm, int B, int T, int d, int NH);
void sb_cuda_attention_stats(struct sb_ctx *ctx, struct sb_attn_stats *st, const float *P, const int32_t *nvalid,
			     int B, int NH, int T);

/* mixer_cuda.cu */
void sb_cuda_localmix_forward(struct sb_ctx *ctx, float *out, float *y, float *z, float *mean, float *rstd,
			      const float *x, const int32_t *nvalid, const float *lnw, const float *lnb, const float *cw,
			      const float *cb, const float *scale, int B, int T, int d, int G);
void sb_cuda_localmix_backward(struct sb_ctx *ctx, float *dx, float *dlnw, float *dlnb, float *dcw, float *dcb,
			       float *dscale, const float *dout, const float *x, const float *y, const float *z,
			       const float *mean, const float *rstd, const int32_t *nvalid, const float *lnw,
			       const float *cw, const float *scale, int B, int T, int d, int G);

/* backend_cuda.cu: shared pieces */
void sb_cuda_ln_forward(struct sb_ctx *ctx, float *out, float *r, float *mean, float *rstd, uint8_t *mask,
			const float *x, const float *y, const float *w, const float *b, const struct sb_dropout *drop,
			int M, int d, int row_stride_in, int row_stride_out);
void sb_cuda_gelu_rows(struct sb_ctx *ctx, float *out, float *dgelu, const float *x, size_t n);

#endif
