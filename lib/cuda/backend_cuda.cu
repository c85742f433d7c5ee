/* backend_cuda.cu — the CUDA backend (lib/backend.h): device memory and the
 * stream, cuBLAS products, and the element-wise, layer-norm, embedding, loss
 * and optimiser kernels. Attention is in attn_cuda.cu, the local mixer in
 * mixer_cuda.cu, host builds of the row kernels for tests in host_cuda.cu.
 *
 * Conventions. One stream per backend; every op is queued on it and returns
 * at once, except download / sumsq / attention_stats, which synchronise.
 * Kernels are the plainest correct mapping (a thread per element, a half-warp
 * per row through lanes.cuh where the CPU keeps 16 lane sums, so the bits
 * match); reductions that the CPU does serially over many rows (bias and
 * layer-norm parameter gradients, sums of squares) are two-pass with fixed
 * chunks, so results are deterministic (same bits on every run) but not the
 * CPU's bits. Every CUDA/cuBLAS call goes through CU_NOTE/CU_RET/CB_NOTE and
 * every launch through LAUNCHED: a failure is recorded, sticky when it poisons the
 * context and pending otherwise (cuda_common.cuh); shapes and requests this backend
 * refuses go through sb_cuda_refuse (pending, never counted as a device failure).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_common.cuh"
#include "ln_rows.cuh"
#include "norm_rows.cuh"
extern "C" {
#include "device_name.h"
#include "rng.h"
}

static_assert(NK_SOFTMAX == (int)SB_NORM_SOFTMAX && NK_ADAPTIVE == (int)SB_NORM_ADAPTIVE, "norm kinds");

/* ================================================================ errors */

int sb_cuda_err_setf(struct sb_err *err, int code, const char *src, int line, const char *fmt, ...)
{
	if (!err)
		return code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	err->code = code;
	err->src = src;
	err->src_line = line;
	return code;
}

const char *sb_cublas_status_name(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_SUCCESS:
		return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED:
		return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_ALLOC_FAILED:
		return "CUBLAS_STATUS_ALLOC_FAILED";
	case CUBLAS_STATUS_INVALID_VALUE:
		return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_ARCH_MISMATCH:
		return "CUBLAS_STATUS_ARCH_MISMATCH";
	case CUBLAS_STATUS_MAPPING_ERROR:
		return "CUBLAS_STATUS_MAPPING_ERROR";
	case CUBLAS_STATUS_EXECUTION_FAILED:
		return "CUBLAS_STATUS_EXECUTION_FAILED";
	case CUBLAS_STATUS_INTERNAL_ERROR:
		return "CUBLAS_STATUS_INTERNAL_ERROR";
	case CUBLAS_STATUS_NOT_SUPPORTED:
		return "CUBLAS_STATUS_NOT_SUPPORTED";
	default:
		return "CUBLAS_STATUS_(other)";
	}
}

static int lost_code(cudaError_t e)
{
	switch (e) {
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchFailure:
	case cudaErrorHardwareStackError:
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorECCUncorrectable:
	case cudaErrorLaunchTimeout:
	case cudaErrorUnknown:
	case cudaErrorDevicesUnavailable:
	case cudaErrorNoDevice:
	case cudaErrorContextIsDestroyed:
		return 1;
	default:
		return 0;
	}
}

static int g_device_lost; /* some backend in the process saw a context-poisoning error */

int sb_cuda_fail(struct cuda_impl *im, struct sb_err *err, const char *what, const char *detail, int code,
		 const char *file, int line)
{
	/* a poisoned context also shows as the error of the next runtime call */
	int lost = (code > 0 && lost_code((cudaError_t)code)) || lost_code(cudaPeekAtLastError());
	if (lost)
		g_device_lost = 1;
	if (im) {
		if (im->capturing) /* a failed recording is refused at graph_end, not the device's failure */
			im->capture_bad = 1;
		else
			im->cuda_errs++;
		if (lost && !im->failed) {
			im->failed = 1;
			sb_err_setf(&im->err, SB_EINTERNAL, file, line, "cuda: %s: %s", what, detail);
		} else if (!lost && !err && !im->pending) {
			im->pending = 1;
			sb_err_setf(&im->pend, SB_EINTERNAL, file, line, "cuda: %s: %s", what, detail);
		}
	}
	if (err) {
		if (im && im->failed)
			*err = im->err;
		else
			sb_err_setf(err, SB_EINTERNAL, file, line, "cuda: %s: %s", what, detail);
	}
	return SB_EINTERNAL;
}

int sb_cuda_refuse(struct cuda_impl *im, struct sb_err *err, int code, const char *file, int line, const char *fmt,
		   ...)
{
	char msg[sizeof err->msg];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (im && im->capturing)
		im->capture_bad = 1;
	if (err)
		sb_err_setf(err, code, file, line, "cuda: %s", msg);
	else if (im && !im->pending) {
		im->pending = 1;
		sb_err_setf(&im->pend, code, file, line, "cuda: %s", msg);
	}
	return code;
}

int sb_cuda_sticky(struct cuda_impl *im, struct sb_err *err)
{
	if (im->failed) {
		if (err)
			*err = im->err;
		return im->err.code ? im->err.code : SB_EINTERNAL;
	}
	if (im->pending) {
		if (err) { /* reported once, to a caller that receives it */
			im->pending = 0;
			*err = im->pend;
		}
		return im->pend.code ? im->pend.code : SB_EINTERNAL;
	}
	return 0;
}

int sb_cuda_sync(struct cuda_impl *im, struct sb_err *err)
{
	if (im->failed)
		return sb_cuda_sticky(im, err);
	if (im->capturing)
		return sb_cuda_refuse(im, err, SB_EINTERNAL, __FILE__, __LINE__, "a wait for the device while recording a step");
	CU_RET(im, err, cudaStreamSynchronize(im->ctx.st));
	int code = im->dflag_host[0];
	if (code) { /* a data error found by a kernel: the cell's, not the device's */
		struct sb_err e;
		sb_err_clear(&e);
		if (code == DFLAG_NO_FINITE)
			sb_err_setf(&e, SB_EDATA, __FILE__, __LINE__,
				    "attention (block %d, row %d): attn_norm: no finite score among the valid keys",
				    im->dflag_host[1], im->dflag_host[2]);
		else
			sb_err_setf(&e, SB_EDATA, __FILE__, __LINE__,
				    "attention (sample %d): attn_norm: n_valid = %d outside 1..T", im->dflag_host[1],
				    im->dflag_host[3]);
		memset(im->dflag_host, 0, 4 * sizeof(int));
		if (im->pending) /* an earlier error waits: the first one is reported, as everywhere */
			return sb_cuda_sticky(im, err);
		if (err)
			*err = e;
		else {
			im->pending = 1;
			im->pend = e;
		}
		return SB_EDATA;
	}
	return sb_cuda_sticky(im, err);
}

struct retired_buf {
	void *p;
	size_t n;
	struct retired_buf *next;
};

/* Give back a scratch or ones buffer being replaced. While a recorded step exists it may
 * name this buffer (replays run between op-by-op steps that grow it): keep it until the
 * last recording is freed. A node we cannot allocate leaks the buffer rather than free
 * it under a recording. */
static void drop_buffer(struct cuda_impl *im, void *p, size_t n)
{
	if (!p)
		return;
	if (im->graphs_live > 0 || im->capturing) {
		struct retired_buf *r = (struct retired_buf *)malloc(sizeof *r);
		if (r) {
			r->p = p;
			r->n = n;
			r->next = im->retired;
			im->retired = r;
			im->retired_n += n;
		}
		return;
	}
	CU_NOTE(im, cudaFreeAsync(p, im->ctx.st));
}

/* free the retired buffers, ordered on the stream after every replay queued so far */
static void free_retired(struct cuda_impl *im, int check)
{
	while (im->retired) {
		struct retired_buf *r = im->retired;
		im->retired = r->next;
		if (check)
			CU_NOTE(im, cudaFreeAsync(r->p, im->ctx.st));
		else
			cudaFreeAsync(r->p, im->ctx.st);
		free(r);
	}
	im->retired_n = 0;
}

/* ---- SB_ARENA_CHECK's scratch tail (redzone.h): the zone after the last request, read
 * back once the ops queued before have run (a copy and a wait on the stream: the check's
 * cost, not the run's). A failed copy is recorded as any CUDA failure is. */
static int scr_zone_read(struct cuda_impl *im, unsigned char *got)
{
	cudaError_t e = cudaMemcpyAsync(got, im->tail.now.at, SB_SCRATCH_TAIL, cudaMemcpyDeviceToHost, im->ctx.st);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(im->ctx.st);
	if (e != cudaSuccess)
		return sb_cuda_fail(im, NULL, "reading back the scratch's red zone", cudaGetErrorString(e), (int)e, __FILE__,
				    __LINE__), -1;
	return 0;
}

/* the last request's zone checked (a written one becomes the tail's hit) and dropped:
 * before a new request, a recording or a replay, which may write there legitimately */
static void scr_tail_retire(struct cuda_impl *im)
{
	struct sb_scratch_tail *t = &im->tail;
	unsigned char got[SB_SCRATCH_TAIL];
	if (t->now.at && !t->hit.at && !im->failed && !scr_zone_read(im, got) && !sb_scratch_intact(got)) {
		t->hit = t->now;
		memcpy(t->got, got, sizeof got);
	}
	t->now.at = NULL;
}

#define PAT4 0xA5, 0xA5, 0xA5, 0x7F
#define PAT16 PAT4, PAT4, PAT4, PAT4
static const unsigned char scr_pattern[SB_SCRATCH_TAIL] = {PAT16, PAT16, PAT16, PAT16}; /* sb_scratch_fill's */
#undef PAT16
#undef PAT4

static void scr_tail_set(struct cuda_impl *im, size_t bytes, const char *file, int line)
{
	char *at = (char *)im->scr + bytes;
	cudaError_t e = cudaMemcpyAsync(at, scr_pattern, SB_SCRATCH_TAIL, cudaMemcpyHostToDevice, im->ctx.st);
	if (e != cudaSuccess) {
		sb_cuda_fail(im, NULL, "writing the scratch's red zone", cudaGetErrorString(e), (int)e, __FILE__, __LINE__);
		return;
	}
	im->tail.now = (struct sb_scratch_zone){at, bytes, file, line};
}

void *sb_cuda_scratch_at(struct cuda_impl *im, size_t bytes, const char *file, int line)
{
	size_t tl = im->ctx.be && im->ctx.be->tails && !im->capturing ? SB_SCRATCH_TAIL : 0;
	if (tl)
		scr_tail_retire(im);
	if (bytes + tl <= im->scr_n) {
		if (tl)
			scr_tail_set(im, bytes, file, line);
		return im->scr;
	}
	if (im->capturing) { /* a recording must not allocate: the step ran op by op first */
		sb_cuda_refuse(im, NULL, SB_EINTERNAL, __FILE__, __LINE__, "scratch of %zu bytes needed while recording",
			       bytes);
		return NULL;
	}
	drop_buffer(im, im->scr, im->scr_n);
	im->scr = NULL;
	im->scr_n = 0;
	size_t n = bytes + bytes / 4 + 4096; /* more than bytes + SB_SCRATCH_TAIL */
	void *p = NULL;
	cudaError_t e = cudaMallocAsync(&p, n, im->ctx.st);
	if (e != cudaSuccess) {
		sb_cuda_fail(im, NULL, "cudaMallocAsync(scratch)", cudaGetErrorString(e), (int)e, __FILE__, __LINE__);
		return NULL;
	}
	im->scr = p;
	im->scr_n = n;
	if (tl)
		scr_tail_set(im, bytes, file, line);
	return p;
}

/* scratch_tail: the stream's one (nothing to read while recording or once failed) */
static int cu_scratch_tail(struct sb_backend *be, int i, const struct sb_scratch_tail **t, unsigned char *got,
			   char *owner, size_t owner_n)
{
	struct cuda_impl *im = (struct cuda_impl *)be->impl;
	if (i > 0 || im->failed || im->capturing)
		return 0;
	*t = &im->tail;
	snprintf(owner, owner_n, "the cuda backend's scratch");
	if (im->tail.now.at && !im->tail.hit.at && scr_zone_read(im, got))
		return -1;
	return 1;
}

static struct cuda_impl *IM(struct sb_backend *be) { return (struct cuda_impl *)be->impl; }

/* ================================================================ memory */

struct blk {
	void *p;
	size_t n;
	struct blk *next;
};
static pthread_mutex_t blk_mu = PTHREAD_MUTEX_INITIALIZER;
static struct blk *blk_list;

static void *cu_alloc(struct sb_backend *be, size_t bytes)
{
	struct cuda_impl *im = IM(be);
	if (im->failed)
		return NULL;
	if (im->capturing) { /* it would become an allocation node of the recording */
		sb_cuda_refuse(im, NULL, SB_EINTERNAL, __FILE__, __LINE__, "an allocation of %zu bytes while recording a step",
			       bytes);
		return NULL;
	}
	if (bytes == 0)
		bytes = 64;
	bytes = (bytes + 255) & ~(size_t)255;
	void *p = NULL;
	cudaError_t e = cudaMallocAsync(&p, bytes, im->ctx.st);
	if (e != cudaSuccess) {
		sb_cuda_fail(im, NULL, "cudaMallocAsync", cudaGetErrorString(e), (int)e, __FILE__, __LINE__);
		return NULL;
	}
	CU_NOTE(im, cudaMemsetAsync(p, 0, bytes, im->ctx.st));
	struct blk *b = (struct blk *)malloc(sizeof *b);
	if (b) {
		b->p = p;
		b->n = bytes;
		pthread_mutex_lock(&blk_mu);
		b->next = blk_list;
		blk_list = b;
		pthread_mutex_unlock(&blk_mu);
	}
	im->bytes_now += bytes;
	if (im->bytes_now > im->bytes_peak)
		im->bytes_peak = im->bytes_now;
	return p;
}

static void cu_free(struct sb_backend *be, void *p)
{
	struct cuda_impl *im = IM(be);
	pthread_mutex_lock(&blk_mu);
	for (struct blk **b = &blk_list; *b; b = &(*b)->next)
		if ((*b)->p == p) {
			struct blk *d = *b;
			*b = d->next;
			im->bytes_now -= d->n;
			free(d);
			break;
		}
	pthread_mutex_unlock(&blk_mu);
	if (im->capturing) { /* not a free node of the recording: freed later, and the recording refused */
		sb_cuda_refuse(im, NULL, SB_EINTERNAL, __FILE__, __LINE__, "a free while recording a step");
		drop_buffer(im, p, 0);
		return;
	}
	cudaFreeAsync(p, im->ctx.st); /* errors here are not worth failing a cell for */
}

/* Small uploads (a step's state and indices) are copied into one of SB_RING pinned
 * slots and sent from there: the call returns at once and never waits for the device
 * unless the slot's previous copy (SB_RING uploads ago) has not run yet. Large ones
 * go from pageable memory (staged by the driver). Either way src may be reused at once. */
static int cu_upload(struct sb_backend *be, void *dst, const void *src, size_t bytes, struct sb_err *err)
{
	struct cuda_impl *im = IM(be);
	SB_TRY(sb_cuda_sticky(im, err));
	if (im->capturing)
		return sb_cuda_refuse(im, err, SB_EINTERNAL, __FILE__, __LINE__, "an upload while recording a step");
	if (!bytes)
		return 0;
	if (bytes <= SB_RING_SLOT && im->ring_host) {
		int k = im->ring_next;
		im->ring_next = (k + 1) % SB_RING;
		if (im->ring_used[k])
			CU_RET(im, err, cudaEventSynchronize(im->ring_ev[k]));
		unsigned char *slot = im->ring_host + (size_t)k * SB_RING_SLOT;
		memcpy(slot, src, bytes);
		CU_RET(im, err, cudaMemcpyAsync(dst, slot, bytes, cudaMemcpyHostToDevice, im->ctx.st));
		CU_RET(im, err, cudaEventRecord(im->ring_ev[k], im->ctx.st));
		im->ring_used[k] = 1;
		return 0;
	}
	CU_RET(im, err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, im->ctx.st));
	return 0;
}

static int cu_download(struct sb_backend *be, void *dst, const void *src, size_t bytes, struct sb_err *err)
{
	struct cuda_impl *im = IM(be);
	SB_TRY(sb_cuda_sticky(im, err));
	if (im->capturing)
		return sb_cuda_refuse(im, err, SB_EINTERNAL, __FILE__, __LINE__, "a download while recording a step");
	if (bytes)
		CU_RET(im, err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, im->ctx.st));
	return sb_cuda_sync(im, err);
}

static struct sb_ctx *cu_main_ctx(struct sb_backend *be) { return &IM(be)->ctx; }

static __thread int tl_dev = -1; /* this thread's current device, as far as we set it */

static int cu_run(struct sb_backend *be, int ntasks, sb_task_fn fn, void *arg, struct sb_err *err)
{
	struct cuda_impl *im = IM(be);
	SB_TRY(sb_cuda_sticky(im, err));
	if (tl_dev != im->dev) {
		CU_RET(im, err, cudaSetDevice(im->dev));
		tl_dev = im->dev;
	}
	int rc = 0;
	for (int t = 0; t < ntasks; t++) {
		struct sb_err e;
		sb_err_clear(&e);
		int r = fn(&im->ctx, 0, t, arg, &e);
		if (r && !rc) {
			rc = r;
			if (err)
				*err = e;
		}
	}
	if (rc)
		return rc;
	return sb_cuda_sticky(im, err);
}

static void cu_zero(struct sb_ctx *ctx, void *p, size_t bytes)
{
	if (bytes)
		CU_NOTE(ctx->im, cudaMemsetAsync(p, 0, bytes, ctx->st));
}

static void cu_copy(struct sb_ctx *ctx, void *dst, const void *src, size_t bytes)
{
	if (bytes && dst != src)
		CU_NOTE(ctx->im, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx->st));
}

/* ================================================================ embedding */

__global__ void k_patchify(float *out, const uint8_t *images, const uint32_t *idx, int B, int Ch, int H, int W, int p,
			   int gw, int L)
{
	int P = Ch * p * p;
	size_t n = (size_t)B * L * P;
	for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
		int b = (int)(e / ((size_t)L * P));
		int rem = (int)(e % ((size_t)L * P));
		int t = rem / P, q = rem % P;
		int c = q / (p * p), i = (q / p) % p, j = q % p;
		int pr = t / gw, pc = t % gw;
		const uint8_t *im = images + (size_t)idx[b] * Ch * H * W;
		out[e] = (float)im[(size_t)c * H * W + (size_t)(pr * p + i) * W + pc * p + j] / 255.0f;
	}
}

static void cu_patchify(struct sb_ctx *ctx, float *out, const uint8_t *images, const uint32_t *idx, int B, int Ch,
			int H, int W, int p)
{
	int gh = H / p, gw = W / p, L = gh * gw;
	size_t n = (size_t)B * L * Ch * p * p;
	if (!n)
		return;
	k_patchify<<<cdiv(n, 256) < 65535 ? cdiv(n, 256) : 65535, 256, 0, ctx->st>>>(out, images, idx, B, Ch, H, W, p,
										      gw, L);
	LAUNCHED(ctx->im, "patchify");
}

__global__ void k_gather_tokens(int32_t *ids, int32_t *nvalid, const int32_t *tokens, const int32_t *len,
				const uint32_t *idx, int B, int L)
{
	size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (e >= (size_t)B * L)
		return;
	int b = (int)(e / L), t = (int)(e % L);
	ids[e] = tokens[(size_t)idx[b] * L + t];
	if (t == 0 && nvalid)
		nvalid[b] = 1 + (len ? len[idx[b]] : L);
}

static void cu_gather_tokens(struct sb_ctx *ctx, int32_t *ids, int32_t *nvalid, const int32_t *tokens,
			     const int32_t *len, const uint32_t *idx, int B, int L)
{
	if (B * L <= 0)
		return;
	k_gather_tokens<<<cdiv((size_t)B * L, 256), 256, 0, ctx->st>>>(ids, nvalid, tokens, len, idx, B, L);
	LAUNCHED(ctx->im, "gather_tokens");
}

__global__ void k_gather_i32(int32_t *out, const int32_t *src, const uint32_t *idx, int B)
{
	int b = blockIdx.x * blockDim.x + threadIdx.x;
	if (b < B)
		out[b] = src[idx[b]];
}

static void cu_gather_i32(struct sb_ctx *ctx, int32_t *out, const int32_t *src, const uint32_t *idx, int B)
{
	if (B <= 0)
		return;
	k_gather_i32<<<cdiv(B, 256), 256, 0, ctx->st>>>(out, src, idx, B);
	LAUNCHED(ctx->im, "gather_i32");
}

__global__ void k_embedding_fwd(float *out, const int32_t *ids, const float *table, int n, int d)
{
	size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (e < (size_t)n * d)
		out[e] = table[(size_t)ids[e / d] * d + e % d];
}

static void cu_embedding_forward(struct sb_ctx *ctx, float *out, const int32_t *ids, const float *table, int n, int d)
{
	if ((size_t)n * d == 0)
		return;
	k_embedding_fwd<<<cdiv((size_t)n * d, 256), 256, 0, ctx->st>>>(out, ids, table, n, d);
	LAUNCHED(ctx->im, "embedding_forward");
}

/* dtable[ids[i]] += dout[i] in index order (the CPU's order, so the same bits):
 * block = a partition of the table's rows (id % NP), thread = a column */
#define EMB_NP 256
__global__ void k_embedding_bwd(float *dtable, const float *dout, const int32_t *ids, int n, int d)
{
	__shared__ int32_t sid[1024];
	int part = blockIdx.x;
	for (int i0 = 0; i0 < n; i0 += 1024) {
		int m = n - i0 < 1024 ? n - i0 : 1024;
		__syncthreads();
		for (int t = threadIdx.x; t < m; t += blockDim.x)
			sid[t] = ids[i0 + t];
		__syncthreads();
		for (int c = threadIdx.x; c < d; c += blockDim.x)
			for (int t = 0; t < m; t++) {
				int id = sid[t];
				if (id != 0 && id % EMB_NP == part)
					dtable[(size_t)id * d + c] += dout[(size_t)(i0 + t) * d + c];
			}
	}
}

static void cu_embedding_backward(struct sb_ctx *ctx, float *dtable, const float *dout, const int32_t *ids, int n,
				  int d)
{
	if (n <= 0)
		return;
	k_embedding_bwd<<<EMB_NP, d < 128 ? 64 : 128, 0, ctx->st>>>(dtable, dout, ids, n, d);
	LAUNCHED(ctx->im, "embedding_backward");
}

__global__ void k_assemble_fwd(float *x, const float *emb, const float *cls, const float *pos, int B, int T, int d)
{
	size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (e >= (size_t)B * T * d)
		return;
	int b = (int)(e / ((size_t)T * d));
	int t = (int)(e / d % T), c = (int)(e % d);
	x[e] = t == 0 ? cls[c] + pos[c] : emb[((size_t)b * (T - 1) + t - 1) * d + c] + pos[(size_t)t * d + c];
}

static void cu_assemble_forward(struct sb_ctx *ctx, float *x, const float *emb, const float *cls, const float *pos,
				int B, int T, int d)
{
	size_t n = (size_t)B * T * d;
	if (!n)
		return;
	k_assemble_fwd<<<cdiv(n, 256), 256, 0, ctx->st>>>(x, emb, cls, pos, B, T, d);
	LAUNCHED(ctx->im, "assemble_forward");
}

/* dpos[t, c] (and dcls[c] for t = 0) += sum over b of dx[b, t, c]. A block owns 32
 * columns e = t d + c; its 8 rows of threads sum the samples b = y, y + 8, ... in order,
 * then the 8 partial sums are added in a fixed tree: deterministic, all samples in
 * flight at once (the plain loop over b in the CPU's order ran a few thousand threads
 * through B dependent loads). */
#define ASM_COLS 32
#define ASM_ROWS 8
__global__ void __launch_bounds__(ASM_COLS *ASM_ROWS) k_assemble_bwd(float *dcls, float *dpos, const float *dx, int B,
								     int T, int d)
{
	__shared__ float part[ASM_ROWS][ASM_COLS];
	int cx = threadIdx.x % ASM_COLS, ry = threadIdx.x / ASM_COLS;
	size_t n = (size_t)T * d;
	size_t e = (size_t)blockIdx.x * ASM_COLS + cx;
	float s = 0.0f;
	if (e < n)
		for (int b = ry; b < B; b += ASM_ROWS)
			s += dx[(size_t)b * n + e];
	part[ry][cx] = s;
	__syncthreads();
	if (ry == 0 && e < n) {
		float a0 = part[0][cx] + part[1][cx], a1 = part[2][cx] + part[3][cx];
		float a2 = part[4][cx] + part[5][cx], a3 = part[6][cx] + part[7][cx];
		float v = (a0 + a1) + (a2 + a3);
		dpos[e] += v;
		if (e < (size_t)d)
			dcls[e] += v;
	}
}

static void cu_assemble_backward(struct sb_ctx *ctx, float *demb, float *dcls, float *dpos, const float *dx, int B,
				 int T, int d)
{
	if (B <= 0)
		return;
	k_assemble_bwd<<<cdiv((size_t)T * d, ASM_COLS), ASM_COLS * ASM_ROWS, 0, ctx->st>>>(dcls, dpos, dx, B, T, d);
	LAUNCHED(ctx->im, "assemble_backward");
	if (demb && T > 1)
		CU_NOTE(ctx->im, cudaMemcpy2DAsync(demb, (size_t)(T - 1) * d * sizeof(float), dx + d,
						   (size_t)T * d * sizeof(float), (size_t)(T - 1) * d * sizeof(float), B,
						   cudaMemcpyDeviceToDevice, ctx->st));
}

/* ================================================================ dense */

__global__ void k_add_bias(float *out, const float *bias, size_t M, int N)
{
	size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (e < M * N)
		out[e] += bias[e % N];
}

static const float F_ONE = 1.0f, F_ZERO = 0.0f;

static void cu_matmul_forward(struct sb_ctx *ctx, float *out, const float *inp, const float *w, const float *bias,
			      int M, int K, int N)
{
	if (M <= 0 || N <= 0)
		return;
	CB_NOTE(ctx->im, cublasSgemm(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &F_ONE, w, K, inp, K, &F_ZERO, out, N));
	if (bias) {
		k_add_bias<<<cdiv((size_t)M * N, 256), 256, 0, ctx->st>>>(out, bias, (size_t)M, N);
		LAUNCHED(ctx->im, "add_bias");
	}
}

static const float *ones_of(struct sb_ctx *ctx, int M);

static void cu_matmul_backward(struct sb_ctx *ctx, float *dinp, float *dw, float *dbias, const float *dout,
			       const float *inp, const float *w, int M, int K, int N, int accumulate)
{
	if (M <= 0)
		return;
	if (dinp)
		CB_NOTE(ctx->im, cublasSgemm(ctx->blas, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, &F_ONE, w, K, dout, N,
					     accumulate ? &F_ONE : &F_ZERO, dinp, K));
	if (dw)
		CB_NOTE(ctx->im,
			cublasSgemm(ctx->blas, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, &F_ONE, inp, K, dout, N, &F_ONE, dw, K));
	if (dbias) {
		const float *ones = ones_of(ctx, M);
		if (ones)
			CB_NOTE(ctx->im,
				cublasSgemv(ctx->blas, CUBLAS_OP_N, N, M, &F_ONE, dout, N, ones, 1, &F_ONE, dbias, 1));
	}
}

__global__ void k_fill(float *p, float v, size_t n)
{
	size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (e < n)
		p[e] = v;
}

static const float *ones_of(struct sb_ctx *ctx, int M)
{
	struct cuda_impl *im = ctx->im;
	if ((size_t)M <= im->ones_n)
		return im->ones;
	if (im->capturing) {
		sb_cuda_refuse(im, NULL, SB_EINTERNAL, __FILE__, __LINE__, "a ones vector needed while recording");
		return NULL;
	}
	drop_buffer(im, im->ones, im->ones_n * sizeof(float));
	im->ones = NULL;
	im->ones_n = 0;
	size_t n = (size_t)M < ((size_t)1 << 16) ? ((size_t)1 << 16) : (size_t)M * 2;
	void *p = NULL;
	cudaError_t e = cudaMallocAsync(&p, n * sizeof(float), ctx->st);
	if (e != cudaSuccess) {
		sb_cuda_fail(im, NULL, "cudaMallocAsync(ones)", cudaGetErrorString(e), (int)e, __FILE__, __LINE__);
		return NULL;
	}
	k_fill<<<cdiv(n, 256), 256, 0, ctx->st>>>((float *)p, 1.0f, n);
	LAUNCHED(im, "fill");
	im->ones = (float *)p;
	im->ones_n = n;
	return im->ones;
}

static void cu_gather_cls(struct sb_ctx *ctx, float *out, const float *x, int B, int T, int d)
{
	if (B <= 0)
		return;
	CU_NOTE(ctx->im, cudaMemcpy2DAsync(out, (size_t)d * sizeof(float), x, (size_t)T * d * sizeof(float),
					   (size_t)d * sizeof(float), B, cudaMemcpyDeviceToDevice, ctx->st));
}

static void cu_scatter_cls(struct sb_ctx *ctx, float *dx, const float *dcls, int B, int T, int d)
{
	if (B <= 0)
		return;
	CU_NOTE(ctx->im, cudaMemsetAsync(dx, 0, (size_t)B * T * d * sizeof(float), ctx->st));
	CU_NOTE(ctx->im, cudaMemcpy2DAsync(dx, (size_t)T * d * sizeof(float), dcls, (size_t)d * sizeof(float),
					   (size_t)d * sizeof(float), B, cudaMemcpyDeviceToDevice, ctx->st));
}

/* ================================================================ layer norm */

static LnDrop make_drop(const struct sb_dropout *drop, int use)
{
	LnDrop dr;
	memset(&dr, 0, sizeof dr);
	dr.on = use;
	if (use) {
		dr.sc = 1.0f / (1.0f - drop->p);
		sb_rng_key(dr.key, drop->seed, SB_RNG_DROPOUT);
		dr.stream = drop->stream;
		dr.step = drop->step;
		dr.first = drop->offset;
		dr.thr = sb_drop_threshold(drop->p);
	}
	return dr;
}

/* a half-warp per row; 16 rows per 256-thread block */
template <int N>
__global__ void k_ln_fwd(float *out, float *r, float *mean, float *rstd, uint8_t *mask, const float *x, const float *y,
			 const float *w, const float *b, LnDrop dr, int M, int d, int sin, int sout)
{
	int row = blockIdx.x * 16 + (threadIdx.x >> 4);
	if (row >= M)
		return;
	Grp G = grp_here();
	LnDrop d2 = dr;
	d2.first = dr.first + (uint64_t)row * d;
	if (dr.on) {
		d2.stream = ln_stream(&dr);
		d2.step = NULL;
	}
	ln_row_fwd<N>(G, out + (size_t)row * sout, r + (size_t)row * d, mean + row, rstd + row,
		      mask ? mask + (size_t)row * d : NULL, x + (size_t)row * sin, y ? y + (size_t)row * d : NULL, w, b,
		      &d2, d);
	(void)G;
}

static int lanes_for(int d) { return d <= 16 ? 1 : d <= 32 ? 2 : d <= 64 ? 4 : d <= 128 ? 8 : d <= 256 ? 16 : 0; }

void sb_cuda_ln_forward(struct sb_ctx *ctx, float *out, float *r, float *mean, float *rstd, uint8_t *mask,
			const float *x, const float *y, const float *w, const float *b, const struct sb_dropout *drop,
			int M, int d, int sin, int sout)
{
	if (M <= 0)
		return;
	int use = y && drop && drop->p > 0;
	LnDrop dr = make_drop(drop, use);
	unsigned g = cdiv(M, 16);
	switch (lanes_for(d)) {
	case 1:
		k_ln_fwd<1><<<g, 256, 0, ctx->st>>>(out, r, mean, rstd, mask, x, y, w, b, dr, M, d, sin, sout);
		break;
	case 2:
		k_ln_fwd<2><<<g, 256, 0, ctx->st>>>(out, r, mean, rstd, mask, x, y, w, b, dr, M, d, sin, sout);
		break;
	case 4:
		k_ln_fwd<4><<<g, 256, 0, ctx->st>>>(out, r, mean, rstd, mask, x, y, w, b, dr, M, d, sin, sout);
		break;
	case 8:
		k_ln_fwd<8><<<g, 256, 0, ctx->st>>>(out, r, mean, rstd, mask, x, y, w, b, dr, M, d, sin, sout);
		break;
	case 16:
		k_ln_fwd<16><<<g, 256, 0, ctx->st>>>(out, r, mean, rstd, mask, x, y, w, b, dr, M, d, sin, sout);
		break;
	default:
		/* a shape this backend refuses: pending, not the device's failure */
		sb_cuda_refuse(ctx->im, NULL, SB_EDATA, __FILE__, __LINE__,
			       "layer norm: width d = %d (the CUDA backend does 1..256)", d);
		return;
	}
	LAUNCHED(ctx->im, "ln_forward");
}

static void cu_residual_ln_forward(struct sb_ctx *ctx, float *out, float *r, float *mean, float *rstd, uint8_t *mask,
				   const float *x, const float *y, const float *w, const float *b,
				   const struct sb_dropout *drop, int M, int d)
{
	sb_cuda_ln_forward(ctx, out, r, mean, rstd, mask, x, y, w, b, drop, M, d, d, d);
}

#define LN_RPB 64 /* rows per block in the backward (one partial of dw, db per block) */

template <int N>
__global__ void k_ln_bwd(float *dx, float *dy, float *part, const float *dout, const float *r, const float *mean,
			 const float *rstd, const uint8_t *mask, const float *w, float p, int M, int d)
{
	__shared__ float red[16][2][16 * N];
	Grp G = grp_here();
	int hw = threadIdx.x >> 4;
	Row<N> pw, pb;
	KLOOP for (int k = 0; k < N; k++)
	{
		pw.at(G.lane, k) = 0.0f;
		pb.at(G.lane, k) = 0.0f;
	}
	int r0 = blockIdx.x * LN_RPB;
	for (int row = r0 + hw; row < r0 + LN_RPB && row < M; row += 16)
		ln_row_bwd<N>(G, dx + (size_t)row * d, dy ? dy + (size_t)row * d : NULL, pw, pb, dout + (size_t)row * d,
			      r + (size_t)row * d, mean[row], rstd[row], mask ? mask + (size_t)row * d : NULL, w, p, d);
	KLOOP for (int k = 0; k < N; k++)
	{
		red[hw][0][G.lane + 16 * k] = pw.at(G.lane, k);
		red[hw][1][G.lane + 16 * k] = pb.at(G.lane, k);
	}
	__syncthreads();
	for (int e = threadIdx.x; e < 2 * d; e += blockDim.x) {
		int which = e / d, c = e % d;
		float s = 0;
		for (int h = 0; h < 16; h++)
			s += red[h][which][c];
		part[((size_t)blockIdx.x * 2 + which) * d + c] = s;
	}
}

/* the layer norm's dw (columns c < d) and db (c >= d) from the blocks' partials [nchunk][2][d] */
__global__ void k_sum_partials2(float *dw, float *db, const float *part, int nchunk, int d)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= 2 * d)
		return;
	float s = 0;
	for (int k = 0; k < nchunk; k++)
		s += part[(size_t)k * 2 * d + c];
	if (c < d)
		dw[c] += s;
	else
		db[c - d] += s;
}

static void cu_residual_ln_backward(struct sb_ctx *ctx, float *dx, float *dy, float *dw, float *db, const float *dout,
				    const float *r, const float *mean, const float *rstd, const uint8_t *mask,
				    const float *w, float p, int M, int d)
{
	if (M <= 0)
		return;
	unsigned nb = cdiv(M, LN_RPB);
	float *part = (float *)sb_cuda_scratch(ctx->im, (size_t)nb * 2 * d * sizeof(float));
	if (!part)
		return;
	const uint8_t *mk = p > 0 ? mask : NULL;
	switch (lanes_for(d)) {
	case 1:
		k_ln_bwd<1><<<nb, 256, 0, ctx->st>>>(dx, dy, part, dout, r, mean, rstd, mk, w, p, M, d);
		break;
	case 2:
		k_ln_bwd<2><<<nb, 256, 0, ctx->st>>>(dx, dy, part, dout, r, mean, rstd, mk, w, p, M, d);
		break;
	case 4:
		k_ln_bwd<4><<<nb, 256, 0, ctx->st>>>(dx, dy, part, dout, r, mean, rstd, mk, w, p, M, d);
		break;
	case 8:
		k_ln_bwd<8><<<nb, 256, 0, ctx->st>>>(dx, dy, part, dout, r, mean, rstd, mk, w, p, M, d);
		break;
	case 16:
		k_ln_bwd<16><<<nb, 256, 0, ctx->st>>>(dx, dy, part, dout, r, mean, rstd, mk, w, p, M, d);
		break;
	default:
		/* a shape this backend refuses: pending, not the device's failure */
		sb_cuda_refuse(ctx->im, NULL, SB_EDATA, __FILE__, __LINE__,
			       "layer norm: width d = %d (the CUDA backend does 1..256)", d);
		return;
	}
	LAUNCHED(ctx->im, "ln_backward");
	k_sum_partials2<<<cdiv(2 * (size_t)d, 128), 128, 0, ctx->st>>>(dw, db, part, (int)nb, d);
	LAUNCHED(ctx->im, "ln_backward_sums");
}

/* ================================================================ GELU */

/* thread per Philox block (4 consecutive flat indices) */
/* dg (may be x itself: each thread reads its x[i] before writing dg[i]) = gelu'(x) when not NULL */
__global__ void k_gelu_fwd(float *out, uint8_t *mask, float *dg, const float *x, size_t n, LnDrop dr)
{
	uint64_t q0 = dr.first >> 2;
	uint64_t q = q0 + blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
	uint64_t end = dr.first + n;
	if (q * 4 >= end)
		return;
	uint32_t words[4] = {0, 0, 0, 0};
	if (dr.on) {
		uint64_t stream = ln_stream(&dr);
		uint32_t ctr[4] = {(uint32_t)q, (uint32_t)(q >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
		sb_philox(words, ctr, dr.key);
	}
	for (int e = 0; e < 4; e++) {
		uint64_t gi = q * 4 + e;
		if (gi < dr.first || gi >= end)
			continue;
		size_t i = (size_t)(gi - dr.first);
		float xi = x[i], Phi, phi;
		sb_normcdf1(xi, &Phi, &phi); /* sb_gelu1 and sb_dgelu1 at once */
		float o = xi * Phi;
		if (dg)
			dg[i] = fmaf(xi, phi, Phi);
		if (dr.on) {
			int keep = (words[e] >> 8) >= dr.thr;
			mask[i] = (uint8_t)keep;
			o = keep ? o * dr.sc : 0.0f;
		}
		out[i] = o;
	}
}

static void cu_gelu_forward(struct sb_ctx *ctx, float *out, uint8_t *mask, float *dgelu, const float *inp,
			    const struct sb_dropout *drop, size_t n)
{
	if (!n)
		return;
	int use = drop && drop->p > 0;
	LnDrop dr = make_drop(drop, use);
	if (!use)
		dr.first = 0;
	uint64_t nq = ((dr.first + n + 3) >> 2) - (dr.first >> 2);
	k_gelu_fwd<<<cdiv(nq, 256), 256, 0, ctx->st>>>(out, mask, dgelu, inp, n, dr);
	LAUNCHED(ctx->im, "gelu_forward");
}

__global__ void k_gelu_bwd(float *dinp, const float *dout, const float *dg, const uint8_t *mask, float p, float sc,
			   size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	float g = p > 0 ? (mask[i] ? dout[i] * sc : 0.0f) : dout[i];
	dinp[i] = dg[i] * g;
}

static void cu_gelu_backward(struct sb_ctx *ctx, float *dinp, const float *dout, const float *dgelu,
			     const uint8_t *mask, float p, size_t n)
{
	if (!n)
		return;
	float sc = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
	k_gelu_bwd<<<cdiv(n, 256), 256, 0, ctx->st>>>(dinp, dout, dgelu, mask, p, sc, n);
	LAUNCHED(ctx->im, "gelu_backward");
}

__global__ void k_gelu_rows(float *out, float *dg, const float *x, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	float Phi, phi;
	sb_normcdf1(x[i], &Phi, &phi);
	if (out)
		out[i] = x[i] * Phi;
	if (dg)
		dg[i] = fmaf(x[i], phi, Phi);
}

void sb_cuda_gelu_rows(struct sb_ctx *ctx, float *out, float *dgelu, const float *x, size_t n)
{
	if (!n)
		return;
	k_gelu_rows<<<cdiv(n, 256), 256, 0, ctx->st>>>(out, dgelu, x, n);
	LAUNCHED(ctx->im, "gelu");
}

/* ================================================================ HAE alpha */

__global__ void k_hae_alpha(float *alpha, const float *raw, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		float s = 1.0f / (1.0f + expf(-raw[i]));
		alpha[i] = 1.05f + 0.90f * s;
	}
}

__global__ void k_hae_alpha_bwd(float *draw, const float *dalpha, const float *raw, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		float s = 1.0f / (1.0f + expf(-raw[i]));
		draw[i] += dalpha[i] * 0.90f * s * (1.0f - s);
	}
}

static void cu_hae_alpha(struct sb_ctx *ctx, float *alpha, const float *raw, int n)
{
	if (n <= 0)
		return;
	k_hae_alpha<<<cdiv(n, 64), 64, 0, ctx->st>>>(alpha, raw, n);
	LAUNCHED(ctx->im, "hae_alpha");
}

static void cu_hae_alpha_backward(struct sb_ctx *ctx, float *draw, const float *dalpha, const float *raw, int n)
{
	if (n <= 0)
		return;
	k_hae_alpha_bwd<<<cdiv(n, 64), 64, 0, ctx->st>>>(draw, dalpha, raw, n);
	LAUNCHED(ctx->im, "hae_alpha_backward");
}

/* ================================================================ loss */

__global__ void k_cross_entropy(float *losses, int32_t *pred, float *dlogits, const float *logits,
				const int32_t *labels, int B, int C, float dscale)
{
	int b = blockIdx.x * blockDim.x + threadIdx.x;
	if (b >= B)
		return;
	const float *l = logits + (size_t)b * C;
	float mx = l[0];
	int am = 0; /* sb_argmax (backend.h): the lowest index on ties, the first NaN above all */
	bool nan = isnan(mx);
	for (int c = 1; c < C; c++) {
		float v = l[c];
		if (!nan && isnan(v)) {
			nan = true;
			am = c;
		} else if (v > mx) {
			mx = v;
			if (!nan)
				am = c;
		}
	}
	double s = 0;
	for (int c = 0; c < C; c++)
		s += exp((double)l[c] - mx);
	double lse = log(s) + mx;
	int y = labels[b];
	losses[b] = (float)(lse - l[y]);
	if (pred)
		pred[b] = am;
	if (dlogits) {
		float *g = dlogits + (size_t)b * C;
		for (int c = 0; c < C; c++) {
			double pc = exp((double)l[c] - lse);
			g[c] = (float)((pc - (c == y)) * dscale);
		}
	}
}

static void cu_cross_entropy(struct sb_ctx *ctx, float *losses, int32_t *pred, float *dlogits, const float *logits,
			     const int32_t *labels, int B, int C, float dscale)
{
	if (B <= 0)
		return;
	k_cross_entropy<<<cdiv(B, 128), 128, 0, ctx->st>>>(losses, pred, dlogits, logits, labels, B, C, dscale);
	LAUNCHED(ctx->im, "cross_entropy");
}

/* ================================================================ optimiser */

__global__ void k_reduce_slots(float *dst, const float *src, int nslots, size_t stride, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	float s = src[i];
	for (int k = 1; k < nslots; k++)
		s += src[(size_t)k * stride + i];
	dst[i] = s;
}

static void cu_reduce_slots(struct sb_ctx *ctx, float *dst, const float *src, int nslots, size_t stride, size_t n)
{
	if (!n || (nslots == 1 && dst == src))
		return;
	k_reduce_slots<<<cdiv(n, 256), 256, 0, ctx->st>>>(dst, src, nslots, stride, n);
	LAUNCHED(ctx->im, "reduce_slots");
}

#define SQ_THREADS 256
#define SQ_MAXBLK 512

/* fixed grid for a given n: deterministic */
static unsigned sq_blocks(size_t n)
{
	unsigned b = cdiv(n, (size_t)SQ_THREADS * 16);
	return b < 1 ? 1 : b > SQ_MAXBLK ? SQ_MAXBLK : b;
}

__global__ void k_sumsq1(double *part, const float *x, size_t n)
{
	__shared__ double sh[SQ_THREADS];
	double s = 0;
	for (size_t i = blockIdx.x * (size_t)SQ_THREADS + threadIdx.x; i < n; i += (size_t)gridDim.x * SQ_THREADS)
		s += (double)x[i] * x[i];
	sh[threadIdx.x] = s;
	__syncthreads();
	for (int w = SQ_THREADS / 2; w >= 1; w >>= 1) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		part[blockIdx.x] = sh[0];
}

__global__ void k_sumsq2(double *out, const double *part, int nb)
{
	if (threadIdx.x == 0 && blockIdx.x == 0) {
		double s = 0;
		for (int i = 0; i < nb; i++)
			s += part[i];
		*out = s;
	}
}

static double cu_sumsq(struct sb_ctx *ctx, const float *x, size_t n)
{
	struct cuda_impl *im = ctx->im;
	if (im->failed)
		return NAN;
	if (im->capturing) {
		sb_cuda_refuse(im, NULL, SB_EINTERNAL, __FILE__, __LINE__, "sumsq waits for the device: not while recording");
		return NAN;
	}
	unsigned nb = sq_blocks(n);
	double *part = (double *)sb_cuda_scratch(im, nb * sizeof(double));
	if (!part)
		return NAN;
	k_sumsq1<<<nb, SQ_THREADS, 0, ctx->st>>>(part, x, n);
	LAUNCHED(im, "sumsq1");
	k_sumsq2<<<1, 32, 0, ctx->st>>>(im->red_dev, part, (int)nb);
	LAUNCHED(im, "sumsq2");
	if (sb_cuda_sync(im, NULL))
		return NAN;
	return *(volatile double *)im->red_host;
}

__global__ void k_scale(float *x, float c, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= c;
}

static void cu_scale(struct sb_ctx *ctx, float *x, float c, size_t n)
{
	if (!n)
		return;
	k_scale<<<cdiv(n, 256), 256, 0, ctx->st>>>(x, c, n);
	LAUNCHED(ctx->im, "scale");
}

__global__ void k_adamw(float *p, float *m, float *v, const float *g, size_t n, struct sb_adam_k a)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		sb_adamw1(p + i, m + i, v + i, g[i], &a);
}

static void cu_adamw(struct sb_ctx *ctx, float *p, float *m, float *v, const float *g, size_t n, float lr, float b1,
		     float b2, float eps, float wd, int64_t t)
{
	if (!n)
		return;
	struct sb_adam_k a = sb_adam_consts(lr, b1, b2, eps, wd, t);
	k_adamw<<<cdiv(n, 256), 256, 0, ctx->st>>>(p, m, v, g, n, a);
	LAUNCHED(ctx->im, "adamw");
}

/* ================================================================ the step without host round trips */

/* The batch's losses summed in order in double by one thread (the host loop this
 * replaces), after the block has brought them into shared memory. */
#define LA_CHUNK 1024
__global__ void k_loss_accum(struct sb_step_acc *acc, const float *losses, int B, const struct sb_step_state *st)
{
	__shared__ float buf[LA_CHUNK];
	double s = 0;
	for (int i0 = 0; i0 < B; i0 += LA_CHUNK) {
		int m = B - i0 < LA_CHUNK ? B - i0 : LA_CHUNK;
		__syncthreads();
		for (int i = threadIdx.x; i < m; i += blockDim.x)
			buf[i] = losses[i0 + i];
		__syncthreads();
		if (threadIdx.x == 0)
			for (int i = 0; i < m; i++)
				s += buf[i];
	}
	if (threadIdx.x == 0) {
		double mean = s / B;
		acc->last_loss = mean;
		if (isfinite(mean)) {
			acc->loss_sum += mean;
			acc->steps++;
		} else if (acc->first_bad < 0) {
			acc->first_bad = st->step;
			acc->bad_loss = mean;
		}
	}
}

static void cu_loss_accum(struct sb_ctx *ctx, struct sb_step_acc *acc, const float *losses, int B,
			  const struct sb_step_state *st)
{
	if (B <= 0)
		return;
	k_loss_accum<<<1, 256, 0, ctx->st>>>(acc, losses, B, st);
	LAUNCHED(ctx->im, "loss_accum");
}

/* the partial sums of k_sumsq1 in order, the norm and torch's clipping coefficient */
__global__ void k_clip_coef(struct sb_step_acc *acc, const double *part, int nb, float max_norm)
{
	if (threadIdx.x == 0 && blockIdx.x == 0) {
		double s = 0;
		for (int i = 0; i < nb; i++)
			s += part[i];
		double norm = sqrt(s);
		acc->grad_norm = norm;
		acc->clipped = 0;
		acc->coef = 1.0f;
		if (max_norm > 0) {
			double coef = (double)max_norm / (norm + 1e-6);
			if (coef < 1.0) {
				acc->coef = (float)coef;
				acc->clipped = 1;
			}
		}
	}
}

static void cu_clip_coef(struct sb_ctx *ctx, struct sb_step_acc *acc, const float *g, size_t n, float max_norm)
{
	struct cuda_impl *im = ctx->im;
	unsigned nb = sq_blocks(n);
	double *part = (double *)sb_cuda_scratch(im, nb * sizeof(double));
	if (!part)
		return;
	k_sumsq1<<<nb, SQ_THREADS, 0, ctx->st>>>(part, g, n);
	LAUNCHED(im, "clip_coef sumsq");
	k_clip_coef<<<1, 32, 0, ctx->st>>>(acc, part, (int)nb, max_norm);
	LAUNCHED(im, "clip_coef");
}

__global__ void k_adamw_dev(float *p, float *m, float *v, const float *g, size_t n, const struct sb_step_acc *acc,
			    const struct sb_step_state *st)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= n || !isfinite(acc->last_loss))
		return;
	float gi = g[i];
	if (acc->clipped)
		gi = gi * acc->coef;
	struct sb_adam_k a;
	a.decay = st->k.decay;
	a.b1 = st->k.b1;
	a.omb1 = st->k.omb1;
	a.b2 = st->k.b2;
	a.omb2 = st->k.omb2;
	a.step_size = st->k.step_size;
	a.bc2_sqrt = st->k.bc2_sqrt;
	a.eps = st->k.eps;
	sb_adamw1(p + i, m + i, v + i, gi, &a);
}

static void cu_adamw_dev(struct sb_ctx *ctx, float *p, float *m, float *v, const float *g, size_t n,
			 const struct sb_step_acc *acc, const struct sb_step_state *st)
{
	if (!n)
		return;
	k_adamw_dev<<<cdiv(n, 256), 256, 0, ctx->st>>>(p, m, v, g, n, acc, st);
	LAUNCHED(ctx->im, "adamw_dev");
}

/* ================================================================ recorded steps (CUDA graphs) */

/* Ops between graph_begin and graph_end are captured on the backend's stream
 * (thread-local capture mode: other threads' cells go on). Nothing in a recorded
 * step may wait for the device or allocate: sb_cuda_sync, uploads, downloads,
 * sumsq and scratch growth refuse while capturing, which fails the recording
 * (graph_end returns the first refusal) and leaves the backend usable. */
static int cu_graph_begin(struct sb_backend *be, struct sb_err *err)
{
	struct cuda_impl *im = IM(be);
	SB_TRY(sb_cuda_sticky(im, err));
	const char *env = getenv("SB_CUDA_GRAPHS");
	if (env && !strcmp(env, "0"))
		return sb_cuda_refuse(im, err, SB_EINTERNAL, __FILE__, __LINE__, "recorded steps disabled (SB_CUDA_GRAPHS=0)");
	if (im->capturing)
		return sb_cuda_refuse(im, err, SB_EINTERNAL, __FILE__, __LINE__, "graph_begin while recording");
	im->capture_bad = 0;
	if (be->tails) /* the recording's ops may write past the last request's bytes */
		scr_tail_retire(im);
	CU_RET(im, err, cudaStreamBeginCapture(im->ctx.st, cudaStreamCaptureModeThreadLocal));
	im->capturing = 1;
	return 0;
}

static int cu_graph_end(struct sb_backend *be, void **graph, struct sb_err *err)
{
	struct cuda_impl *im = IM(be);
	*graph = NULL;
	if (!im->capturing)
		return sb_cuda_refuse(im, err, SB_EINTERNAL, __FILE__, __LINE__, "graph_end without graph_begin");
	cudaGraph_t g = NULL;
	cudaError_t e = cudaStreamEndCapture(im->ctx.st, &g);
	im->capturing = 0;
	int bad = im->capture_bad;
	im->capture_bad = 0;
	if (!im->graphs_live)
		free_retired(im, 1); /* anything retired during a failed recording */
	if (e != cudaSuccess || bad || im->failed) {
		if (g)
			cudaGraphDestroy(g);
		cudaGetLastError(); /* an invalidated capture is not an error of the context */
		if (e != cudaSuccess && !bad)
			return sb_cuda_refuse(im, err, SB_EINTERNAL, __FILE__, __LINE__, "recording the step: %s",
					      cudaGetErrorString(e));
		int rc = sb_cuda_sticky(im, err); /* the refusal or failure that spoilt it */
		return rc ? rc : sb_cuda_refuse(im, err, SB_EINTERNAL, __FILE__, __LINE__, "recording the step failed");
	}
	cudaGraphExec_t x = NULL;
	e = cudaGraphInstantiate(&x, g, 0);
	cudaGraphDestroy(g);
	if (e != cudaSuccess) {
		cudaGetLastError();
		return sb_cuda_refuse(im, err, SB_EINTERNAL, __FILE__, __LINE__, "cudaGraphInstantiate: %s",
				      cudaGetErrorString(e));
	}
	*graph = (void *)x;
	im->graphs_live++;
	return 0;
}

/* SB_CUDA_FAULT=N[:FILE] (testing; docs/sb-train.md): after the process's Nth launch of a
 * recorded step, a kernel writes through a null pointer, which poisons the context as a
 * real illegal access does (cudaErrorIllegalAddress), on a GPU or on the emulator. With
 * FILE it fires only if it can remove FILE: of a pipeline's processes one faults and the
 * retry does not (tests/gpu/loss_check.sh). */
__global__ void k_fault(float *p) { p[threadIdx.x] = 1.0f; }

static long long fault_at; /* 0: off */
static char fault_file[512];
static long long graph_launches;
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static void fault_config(void)
{
	const char *v = getenv("SB_CUDA_FAULT");
	if (!v || !*v)
		return;
	char *end;
	long long n = strtoll(v, &end, 10);
	if (n < 1 || (*end && *end != ':') || strlen(end) >= sizeof fault_file + 1) {
		fprintf(stderr, "SB_CUDA_FAULT=%s: not N or N:FILE with N >= 1; no fault will be injected\n", v);
		return;
	}
	if (*end == ':')
		strcpy(fault_file, end + 1);
	fault_at = n;
}

static int cu_graph_launch(struct sb_backend *be, void *graph, struct sb_err *err)
{
	struct cuda_impl *im = IM(be);
	SB_TRY(sb_cuda_sticky(im, err));
	if (be->tails) /* the replay's ops may write past the last request's bytes */
		scr_tail_retire(im);
	CU_RET(im, err, cudaGraphLaunch((cudaGraphExec_t)graph, im->ctx.st));
	pthread_once(&fault_once, fault_config);
	if (fault_at > 0 && __atomic_add_fetch(&graph_launches, 1, __ATOMIC_SEQ_CST) == fault_at &&
	    (!fault_file[0] || unlink(fault_file) == 0)) {
		fprintf(stderr, "sb-cuda: SB_CUDA_FAULT: a write through a null pointer after recorded step %lld\n",
			fault_at);
		k_fault<<<1, 32, 0, im->ctx.st>>>((float *)0);
		LAUNCHED(im, "fault (SB_CUDA_FAULT)");
	}
	return 0;
}

static void cu_graph_free(struct sb_backend *be, void *graph)
{
	struct cuda_impl *im = IM(be);
	if (!graph)
		return;
	cudaGraphExecDestroy((cudaGraphExec_t)graph); /* one in flight is destroyed when it completes */
	if (im->graphs_live > 0 && --im->graphs_live == 0)
		free_retired(im, 1);
}

/* ================================================================ open / close */

static void cu_destroy(struct sb_backend *be);

static const struct sb_backend_ops cuda_ops = {
	/* .name = */ "cuda",
	/* .destroy = */ cu_destroy,
	/* .alloc = */ cu_alloc,
	/* .free = */ cu_free,
	/* .upload = */ cu_upload,
	/* .download = */ cu_download,
	/* .main_ctx = */ cu_main_ctx,
	/* .run = */ cu_run,
	/* .zero = */ cu_zero,
	/* .copy = */ cu_copy,
	/* .patchify = */ cu_patchify,
	/* .gather_tokens = */ cu_gather_tokens,
	/* .gather_i32 = */ cu_gather_i32,
	/* .embedding_forward = */ cu_embedding_forward,
	/* .embedding_backward = */ cu_embedding_backward,
	/* .assemble_forward = */ cu_assemble_forward,
	/* .assemble_backward = */ cu_assemble_backward,
	/* .matmul_forward = */ cu_matmul_forward,
	/* .matmul_backward = */ cu_matmul_backward,
	/* .gather_cls = */ cu_gather_cls,
	/* .scatter_cls = */ cu_scatter_cls,
	/* .residual_ln_forward = */ cu_residual_ln_forward,
	/* .residual_ln_backward = */ cu_residual_ln_backward,
	/* .gelu_forward = */ cu_gelu_forward,
	/* .gelu_backward = */ cu_gelu_backward,
	/* .attention_forward = */ sb_cuda_attention_forward,
	/* .attention_backward = */ sb_cuda_attention_backward,
	/* .attention_stats = */ sb_cuda_attention_stats,
	/* .hae_alpha = */ cu_hae_alpha,
	/* .hae_alpha_backward = */ cu_hae_alpha_backward,
	/* .localmix_forward = */ sb_cuda_localmix_forward,
	/* .localmix_backward = */ sb_cuda_localmix_backward,
	/* .cross_entropy = */ cu_cross_entropy,
	/* .reduce_slots = */ cu_reduce_slots,
	/* .sumsq = */ cu_sumsq,
	/* .scale = */ cu_scale,
	/* .loss_accum = */ cu_loss_accum,
	/* .clip_coef = */ cu_clip_coef,
	/* .adamw_dev = */ cu_adamw_dev,
	/* .graph_begin = */ cu_graph_begin,
	/* .graph_end = */ cu_graph_end,
	/* .graph_launch = */ cu_graph_launch,
	/* .graph_free = */ cu_graph_free,
	/* .adamw = */ cu_adamw,
	/* .scratch_tail = */ cu_scratch_tail,
};

static pthread_once_t flags_once = PTHREAD_ONCE_INIT;
/* Once per process, before the driver's first call (cudaSetDeviceFlags below starts it). */
static void set_flags(void)
{
	/* One process trains many cells, each on its own stream (train/multicell.c). The
	 * driver maps streams onto CUDA_DEVICE_MAX_CONNECTIONS hardware work queues, 8
	 * unless the environment says otherwise, and kernels of streams sharing a queue
	 * run one after another (false dependencies): with 70 cells, about 9 cells per
	 * queue. Ask for the most the driver offers (32) unless the user chose a value;
	 * tests/gpu/run.sh measures 70 cells with 8 too. The variable is read when the
	 * driver starts, so it is set here, under the once, before any CUDA call. */
	setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
	const char *m = getenv("SB_CUDA_SYNC");
	unsigned f = cudaDeviceScheduleYield;
	if (m && !strcmp(m, "spin"))
		f = cudaDeviceScheduleSpin;
	else if (m && !strcmp(m, "block"))
		f = cudaDeviceScheduleBlockingSync;
	cudaSetDeviceFlags(f | cudaDeviceMapHost);
	cudaGetLastError(); /* an active context keeps its flags: not an error */
}

static int parse_device(const char *device, int *dev, int *tf32, struct sb_err *err)
{
	int cuda, named;
	*dev = 0;
	*tf32 = 0;
	SB_TRY(sb_device_parse(device, &cuda, dev, &named, err));
	if (!cuda)
		return SB_ERR(err, SB_EUSAGE, "not a CUDA device name: '%s'", device ? device : "(null)");
	const char *e = getenv("SB_CUDA_TF32");
	*tf32 = named >= 0 ? named : (e && *e && strcmp(e, "0") ? 1 : 0);
	return 0;
}

int sb_cuda_device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	return n;
}

extern "C" int sb_backend_cuda_open(const char *device, int threads, struct sb_backend **out, struct sb_err *err)
{
	int dev, tf32;
	pthread_once(&flags_once, set_flags); /* first: it may set the environment (above) */
	SB_TRY(parse_device(device, &dev, &tf32, err));
	int ndev = sb_cuda_device_count();
	if (ndev < 1)
		return SB_ERR(err, SB_EINTERNAL, "device '%s': no CUDA device is available (driver or GPU missing)",
			      device);
	if (dev >= ndev)
		return SB_ERR(err, SB_EUSAGE, "device '%s': only %d CUDA device(s)", device, ndev);
	struct sb_backend *be = (struct sb_backend *)calloc(1, sizeof *be);
	struct cuda_impl *im = (struct cuda_impl *)calloc(1, sizeof *im);
	if (!be || !im) {
		free(be);
		free(im);
		return SB_ERR(err, SB_EINTERNAL, "out of memory opening the CUDA backend");
	}
	be->ops = &cuda_ops;
	be->impl = im;
	snprintf(be->name, sizeof be->name, "cuda");
	be->threads = 1; /* one stream: ops are queued in order */
	be->tile = 0;    /* the whole batch is one tile */
	be->slots = 1;
	im->dev = dev;
	im->tf32 = tf32;
	im->ctx.be = be;
	im->ctx.im = im;
	int rc = 0;
	cudaDeviceProp prop;
	memset(&prop, 0, sizeof prop);
#define OPEN_TRY(call)                                                                                             \
	do {                                                                                                       \
		cudaError_t e_ = (call);                                                                           \
		if (e_ != cudaSuccess) {                                                                           \
			rc = sb_cuda_fail(im, err, #call, cudaGetErrorString(e_), (int)e_, __FILE__, __LINE__);            \
			goto fail;                                                                                 \
		}                                                                                                  \
	} while (0)
	OPEN_TRY(cudaSetDevice(dev));
	OPEN_TRY(cudaGetDeviceProperties(&prop, dev));
	OPEN_TRY(cudaStreamCreateWithFlags(&im->ctx.st, cudaStreamNonBlocking));
	{
		cudaMemPool_t pool;
		if (cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess) {
			uint64_t thr = UINT64_MAX; /* keep freed memory in the pool: no implicit syncs */
			cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr);
		}
		cudaGetLastError();
	}
	OPEN_TRY(cudaHostAlloc((void **)&im->dflag_host, 4 * sizeof(int), cudaHostAllocMapped));
	OPEN_TRY(cudaHostGetDevicePointer((void **)&im->dflag_dev, im->dflag_host, 0));
	OPEN_TRY(cudaHostAlloc((void **)&im->red_host, sizeof(double), cudaHostAllocMapped));
	OPEN_TRY(cudaHostGetDevicePointer((void **)&im->red_dev, im->red_host, 0));
	memset(im->dflag_host, 0, 4 * sizeof(int));
	OPEN_TRY(cudaHostAlloc((void **)&im->ring_host, (size_t)SB_RING * SB_RING_SLOT, cudaHostAllocDefault));
	for (int k = 0; k < SB_RING; k++)
		OPEN_TRY(cudaEventCreateWithFlags(&im->ring_ev[k], cudaEventDisableTiming | cudaEventBlockingSync));
	im->workspace_n = (size_t)32 << 20;
	/* stream-ordered, as every allocation of a backend: no device-wide synchronisation
	 * when cells open and close while others record their steps */
	OPEN_TRY(cudaMallocAsync(&im->workspace, im->workspace_n, im->ctx.st));
	{
		cublasStatus_t s = cublasCreate(&im->ctx.blas);
		if (s != CUBLAS_STATUS_SUCCESS) {
			rc = sb_cuda_fail(im, err, "cublasCreate", sb_cublas_status_name(s), 0, __FILE__, __LINE__);
			im->ctx.blas = NULL;
			goto fail;
		}
		s = cublasSetStream(im->ctx.blas, im->ctx.st);
		if (s == CUBLAS_STATUS_SUCCESS)
			s = cublasSetWorkspace(im->ctx.blas, im->workspace, im->workspace_n);
		if (s == CUBLAS_STATUS_SUCCESS)
			s = cublasSetMathMode(im->ctx.blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
		if (s != CUBLAS_STATUS_SUCCESS) {
			rc = sb_cuda_fail(im, err, "cublas set-up", sb_cublas_status_name(s), 0, __FILE__, __LINE__);
			goto fail;
		}
	}
	im->sm_count = prop.multiProcessorCount;
	im->max_smem = (int)prop.sharedMemPerBlockOptin;
	tl_dev = dev;
	if ((rc = sb_cuda_attention_init(im, err)))
		goto fail;
	{
		int rt = 0;
		cudaRuntimeGetVersion(&rt);
		snprintf(be->device, sizeof be->device, "cuda:%d %.60s (%d SMs, cc %d.%d), CUDA %d.%d, matmul %s", dev,
			 prop.name, prop.multiProcessorCount, prop.major, prop.minor, rt / 1000, rt % 1000 / 10,
			 tf32 ? "tf32" : "fp32");
	}
	*out = be;
	return 0;
fail:
	cu_destroy(be);
	return rc ? rc : SB_EINTERNAL;
#undef OPEN_TRY
}

static void cu_destroy(struct sb_backend *be)
{
	if (!be)
		return;
	struct cuda_impl *im = IM(be);
	if (im) {
		if (im->ctx.st)
			cudaStreamSynchronize(im->ctx.st);
		if (im->scr)
			cudaFreeAsync(im->scr, im->ctx.st);
		if (im->ones)
			cudaFreeAsync(im->ones, im->ctx.st);
		free_retired(im, 0);
		if (im->ctx.st)
			cudaStreamSynchronize(im->ctx.st);
		if (im->ctx.blas)
			cublasDestroy(im->ctx.blas);
		if (im->workspace && im->ctx.st) {
			cudaFreeAsync(im->workspace, im->ctx.st);
			cudaStreamSynchronize(im->ctx.st);
		}
		if (im->dflag_host)
			cudaFreeHost(im->dflag_host);
		if (im->red_host)
			cudaFreeHost(im->red_host);
		if (im->ring_host)
			cudaFreeHost(im->ring_host);
		for (int k = 0; k < SB_RING; k++)
			if (im->ring_ev[k])
				cudaEventDestroy(im->ring_ev[k]);
		if (im->ctx.st)
			cudaStreamDestroy(im->ctx.st);
		cudaGetLastError();
		free(im);
	}
	free(be);
}

/* ================================================================ queries */

extern "C" int sb_cuda_failed(struct sb_backend *be)
{
	return be && be->ops == &cuda_ops && (IM(be)->failed || IM(be)->cuda_errs > 0);
}

extern "C" int sb_cuda_device_lost(struct sb_backend *be)
{
	(void)be;
	return g_device_lost;
}

extern "C" size_t sb_cuda_bytes_peak(struct sb_backend *be)
{
	return be && be->ops == &cuda_ops ? IM(be)->bytes_peak : 0;
}

extern "C" size_t sb_cuda_retired_bytes(struct sb_backend *be)
{
	return be && be->ops == &cuda_ops ? IM(be)->retired_n : 0;
}
