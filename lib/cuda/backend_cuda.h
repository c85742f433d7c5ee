/* backend_cuda.h — what the CUDA backend adds to lib/backend.h (C API; the
 * library is lib/libsparsebench_cuda.a, built when CUDA=1).
 *
 * Opening: sb_backend_open("cuda[:N][,tf32]", ...) or sb_backend_cuda_open.
 *   One backend = one device, one CUDA stream, one cuBLAS handle with its own
 *   workspace, one execution context: ops are queued on the stream in call
 *   order; download, sumsq and attention_stats synchronise it. A process may
 *   open many (one per cell): they share the device and run concurrently.
 *   ",tf32" (or SB_CUDA_TF32=1 in the environment) lets cuBLAS use TF32 tensor
 *   cores for the dense products; it is off by default and, when on, recorded
 *   in be->device ("... matmul tf32"), which run.meta and cell records carry.
 *   SB_CUDA_SYNC=spin|yield|block chooses how a synchronising host thread
 *   waits (default: yield; block for many cells on few cores); it applies to
 *   the whole process and is set by the first open.
 *
 * Errors (docs/cuda.md "Errors"): a failure that poisons the device context
 * (illegal address, launch failure...) is sticky: every later upload, download,
 * run, attention_forward and sumsq (NaN) reports it, and sb_cuda_device_lost says
 * so; every backend in the process is then unusable and the caller should end its
 * cells with status failed_device for a retry in a new process. Any other failure
 * (a CUDA or cuBLAS error, a shape this backend refuses, a wait or an allocation
 * while recording) is pending: the op that can report it returns it, else the next
 * fallible call, once; the first one is kept until reported. sb_cuda_failed says
 * whether a CUDA or cuBLAS call itself failed. Data errors found on the device
 * (n_valid outside 1..T, a row with no finite score) are reported at the next
 * synchronisation as SB_EDATA.
 */
#ifndef SB_BACKEND_CUDA_H
#define SB_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "attn_norm.h"
#include "backend.h"
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when be is a CUDA backend on which a CUDA or cuBLAS call failed outside a
 * recording (a refused shape, a refusal while recording or a data error does not count) */
int sb_cuda_failed(struct sb_backend *be);
/* 1 when that failure is one that poisons the device context for the process */
int sb_cuda_device_lost(struct sb_backend *be);
/* number of CUDA devices (0 when none or no driver); never fails */
int sb_cuda_device_count(void);
/* bytes allocated through this backend now, and their peak */
size_t sb_cuda_bytes_peak(struct sb_backend *be);
/* bytes of scratch buffers replaced while a recorded step existed and kept (not freed)
 * because a replay may still use them; freed when the backend's last recording is
 * freed (tests: a replay after the scratch grew must not use freed memory) */
size_t sb_cuda_retired_bytes(struct sb_backend *be);

/* ---- host builds of the row kernels, for tests without a GPU ----
 * The same source as the device code (lib/cuda/ *.cuh) compiled for the host. */

/* which lane layout the two functions below use: 0 = the shared-memory attention
 * kernels' (fewest lanes that hold T), 1 = the global-memory kernels' (8, 16 or 32 per lane) */
void sb_cuda_host_set_layout(int global);
/* sb_norm_forward / sb_norm_backward semantics, rows of one block (T <= 512) */
int sb_cuda_host_norm_forward(const struct sb_norm *nm, float *p, float *aux, const float *s, int rows, int T,
			      int n_valid, float alpha, struct sb_err *err);
void sb_cuda_host_norm_backward(const struct sb_norm *nm, float *ds, double *dalpha, const float *dp,
				const float *p, const float *aux, const float *s, int rows, int T, int n_valid,
				float alpha);
/* residual_ln_forward / residual_ln_backward of the CPU backend (dw, db +=, in row order) */
void sb_cuda_host_residual_ln_forward(float *out, float *r, float *mean, float *rstd, uint8_t *mask, const float *x,
				      const float *y, const float *w, const float *b, const struct sb_dropout *drop,
				      int M, int d);
void sb_cuda_host_residual_ln_backward(float *dx, float *dy, float *dw, float *db, const float *dout,
				       const float *r, const float *mean, const float *rstd, const uint8_t *mask,
				       const float *w, float p, int M, int d);
/* gelu and gelu' per element */
void sb_cuda_host_gelu(float *out, float *dgelu, const float *x, size_t n);
/* dropout keep mask of n elements at dr->offset */
void sb_cuda_host_dropout_mask(uint8_t *mask, size_t n, const struct sb_dropout *dr);
/* Philox-4x32-10 block */
void sb_cuda_host_philox(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]);
/* AdamW step on n elements */
void sb_cuda_host_adamw(float *p, float *m, float *v, const float *g, size_t n, float lr, float b1, float b2,
			float eps, float wd, int64_t t);

#ifdef __cplusplus
}
#endif

#endif
