/* selftest.cu — the emulator's own checks (tests/sh/cuda_emu.sh runs them): that it
 * computes what a GPU computes for correct code (warp collectives with widths and
 * masks, barriers, graphs, stream order), and that each class of kernel bug it is
 * meant to expose is exposed. Compiled by tests/cudaemu/nvcc-emu like lib/cuda.
 *
 *   selftest CASE     exit 0 when CASE behaved as the emulator promises; a fault case
 *                     prints the emulator's report and the error the runtime returned
 *   selftest --list   the cases */
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define CHECK(cond, ...)                                                                                           \
	do {                                                                                                       \
		if (!(cond)) {                                                                                     \
			fprintf(stderr, "selftest: FAILED %s:%d: ", __FILE__, __LINE__);                           \
			fprintf(stderr, __VA_ARGS__);                                                              \
			fputc('\n', stderr);                                                                       \
			fails++;                                                                                   \
		}                                                                                                  \
	} while (0)

/* ---------------------------------------------------------------- correct code */

/* every collective, in 4 warps of 32 lanes: results written per thread */
__global__ void k_collectives(int *out, int width)
{
	int t = threadIdx.x, lane = t & 31;
	int v = 1000 * (t / 32) + lane;
	int *o = out + (size_t)t * 8;
	o[0] = __shfl_sync(0xffffffffu, v, 3, width);
	o[1] = __shfl_xor_sync(0xffffffffu, v, 1, width);
	o[2] = __shfl_down_sync(0xffffffffu, v, 2, width);
	o[3] = __shfl_up_sync(0xffffffffu, v, 2, width);
	o[4] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
	o[5] = __any_sync(0xffffffffu, lane == 17);
	o[6] = __all_sync(0xffffffffu, lane < 31);
	/* half-warps with their own masks, as lib/cuda/lanes.cuh does */
	unsigned hm = 0xFFFFu << (lane & 16);
	o[7] = __shfl_xor_sync(hm, v, 8, 16);
}

/* a block sum through shared memory with barriers, and a warp tree */
__global__ void k_blocksum(float *out, const float *x, int n)
{
	__shared__ float part[8];
	int t = threadIdx.x;
	float s = 0;
	for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x)
		s += x[i];
	for (int w = 16; w > 0; w >>= 1)
		s += __shfl_down_sync(0xffffffffu, s, w);
	if ((t & 31) == 0)
		part[t / 32] = s;
	__syncthreads();
	if (t == 0) {
		float a = 0;
		for (int k = 0; k < (int)blockDim.x / 32; k++)
			a += part[k];
		out[blockIdx.x] = a;
	}
}

__global__ void k_add(float *x, float c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] += c;
}

__global__ void k_dyn(float *out)
{
	extern __shared__ float dsm[];
	dsm[threadIdx.x] = (float)threadIdx.x;
	__syncthreads();
	out[threadIdx.x] = dsm[blockDim.x - 1 - threadIdx.x];
}

/* ---------------------------------------------------------------- bugs */

/* reads a neighbour's shared slot without a barrier between the write and the read */
__global__ void k_missing_barrier(float *out)
{
	extern __shared__ float sh[];
	int t = threadIdx.x;
	sh[t] = (float)t;
	out[t] = sh[(t + 1) % blockDim.x];
}

/* the last thread writes one element past the end */
__global__ void k_past_end(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i <= n)
		x[i] = 1.0f;
}

__global__ void k_read(float *out, const float *x) { out[threadIdx.x] = x[threadIdx.x]; }

/* a full-warp xor shuffle under a half-warp mask: lanes read lanes outside it */
__global__ void k_bad_mask(float *out)
{
	float v = (float)threadIdx.x;
	if (threadIdx.x < 16)
		v = __shfl_xor_sync(0xFFFFu, v, 16);
	out[threadIdx.x] = v;
}

/* lane 1 leaves; lane 0 shuffles with it */
__global__ void k_exited_lane(float *out)
{
	if (threadIdx.x == 0)
		out[0] = __shfl_sync(0x3u, 1.0f, 1);
}

/* lane 0 waits in a shuffle for lane 1, lane 1 at a barrier for lane 0 */
__global__ void k_deadlock(float *out)
{
	if (threadIdx.x == 0)
		out[0] = __shfl_sync(0x3u, 1.0f, 1);
	else
		__syncthreads();
}

/* half-warps that disagree on the mask of one shuffle */
__global__ void k_disagree(float *out)
{
	unsigned m = threadIdx.x == 0 ? 0x3u : 0xffffffffu;
	out[threadIdx.x] = __shfl_sync(m, 1.0f, 0);
}

__global__ void k_write_flag(int *flag, int v) { *flag = v; }

/* each half-warp votes under its own mask; out[t] = popc of the raw ballot, and of it
 * masked: only the masked count is what a GPU promises (a lane outside the mask that is
 * active, as the other half of a converged warp is, sets its bit too) */
__global__ void k_ballot_halves(int *out)
{
	unsigned hm = 0xFFFFu << (threadIdx.x & 16);
	unsigned b = __ballot_sync(hm, 1);
	out[2 * threadIdx.x] = __popc(b);
	out[2 * threadIdx.x + 1] = __popc(b & hm);
}

/* one float past the launch's dynamic shared memory */
__global__ void k_dyn_past_end(float *out)
{
	extern __shared__ float dsm[];
	dsm[threadIdx.x + 1] = 1.0f;
	out[threadIdx.x] = dsm[threadIdx.x];
}

/* ---------------------------------------------------------------- cases */

static float *dev_floats(int n)
{
	void *p = NULL;
	cudaError_t e = cudaMalloc(&p, (size_t)n * sizeof(float));
	CHECK(e == cudaSuccess && p, "cudaMalloc: %s", cudaGetErrorString(e));
	return (float *)p;
}

static int case_collectives(void)
{
	const int NT = 128;
	int widths[] = {32, 16, 8};
	for (int wi = 0; wi < 3; wi++) {
		int w = widths[wi];
		int *d = NULL;
		cudaMalloc((void **)&d, NT * 8 * sizeof(int));
		k_collectives<<<1, NT>>>(d, w);
		static int h[NT * 8];
		CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess, "copy");
		for (int t = 0; t < NT; t++) {
			int lane = t & 31, wb = 1000 * (t / 32), base = lane & ~(w - 1);
			int *o = h + t * 8;
			int e0 = wb + base + (3 & (w - 1));
			int e1 = wb + ((lane ^ 1) < base + w ? (lane ^ 1) : lane);
			int e2 = wb + (lane + 2 < base + w ? lane + 2 : lane);
			int e3 = wb + (lane - 2 >= base ? lane - 2 : lane);
			int e4 = (int)0x49249249u; /* lanes 0, 3, 6, ... 30 */
			int hb = lane & 16, e7 = wb + (((lane ^ 8) & 15) | hb);
			CHECK(o[0] == e0 && o[1] == e1 && o[2] == e2 && o[3] == e3,
			      "width %d thread %d: shfl %d (want %d), xor %d (%d), down %d (%d), up %d (%d)", w, t, o[0], e0,
			      o[1], e1, o[2], e2, o[3], e3);
			CHECK(o[4] == e4 && o[5] == 1 && o[6] == 0 && o[7] == e7,
			      "width %d thread %d: ballot %#x (want %#x), any %d, all %d, half-warp xor %d (want %d)", w, t,
			      o[4], e4, o[5], o[6], o[7], e7);
		}
		cudaFree(d);
	}
	return fails;
}

static int case_blocksum(void)
{
	const int n = 10000, nb = 7, nt = 256;
	float *x = (float *)malloc(n * sizeof(float)), out[nb];
	double want = 0;
	for (int i = 0; i < n; i++) {
		x[i] = (float)(i % 97) * 0.25f;
		want += x[i];
	}
	float *dx = dev_floats(n), *dout = dev_floats(nb);
	cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice);
	k_blocksum<<<nb, nt>>>(dout, dx, n);
	CHECK(cudaGetLastError() == cudaSuccess, "launch");
	CHECK(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost) == cudaSuccess, "copy");
	double got = 0;
	for (int b = 0; b < nb; b++)
		got += out[b];
	CHECK(fabs(got - want) < 1e-3 * want, "block sums total %.3f, want %.3f", got, want);
	/* dynamic shared memory: mirrored through a barrier */
	float *dd = dev_floats(64), hd[64];
	k_dyn<<<1, 64, 64 * sizeof(float)>>>(dd);
	cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost);
	for (int i = 0; i < 64; i++)
		CHECK(hd[i] == (float)(63 - i), "dynamic shared [%d] = %g", i, hd[i]);
	free(x);
	return fails;
}

/* a new stream with a kernel queued on it that writes 7 into mapped pinned memory (0
 * before it runs): the host's view of that memory */
static int *flag_written_on_stream(cudaStream_t *st)
{
	cudaStreamCreateWithFlags(st, cudaStreamNonBlocking);
	int *hflag = NULL, *dflag = NULL;
	cudaHostAlloc((void **)&hflag, sizeof(int), cudaHostAllocMapped);
	cudaHostGetDevicePointer((void **)&dflag, hflag, 0);
	*hflag = 0;
	k_write_flag<<<1, 1, 0, *st>>>(dflag, 7);
	return hflag;
}

/* stream order and laziness, graphs with frozen arguments, refusals while capturing */
static int case_streams(void)
{
	cudaStream_t st;
	int *hflag = flag_written_on_stream(&st);
	CHECK(*hflag == 0, "the kernel ran before the stream was synchronised (flag %d)", *hflag);
	cudaStreamSynchronize(st);
	CHECK(*hflag == 7, "after the synchronisation the flag is %d, not 7", *hflag);

	const int n = 300;
	float *dx = dev_floats(n), h[n];
	cudaMemsetAsync(dx, 0, n * sizeof(float), st);
	float c = 1.5f;
	CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
	k_add<<<2, 256, 0, st>>>(dx, c, n);
	c = 100.0f; /* the recording keeps 1.5 */
	cudaGraph_t g;
	CHECK(cudaStreamEndCapture(st, &g) == cudaSuccess && g, "end capture");
	cudaGraphExec_t x;
	CHECK(cudaGraphInstantiate(&x, g, 0) == cudaSuccess, "instantiate");
	cudaGraphDestroy(g);
	cudaGraphLaunch(x, st);
	cudaGraphLaunch(x, st);
	cudaGraphLaunch(x, st);
	cudaMemcpyAsync(h, dx, sizeof h, cudaMemcpyDeviceToHost, st); /* pageable: returns when done */
	for (int i = 0; i < n; i++)
		CHECK(h[i] == 4.5f, "after 3 replays x[%d] = %g, want 4.5", i, h[i]);
	cudaGraphExecDestroy(x);

	/* a synchronisation while capturing is refused and spoils the recording */
	cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
	CHECK(cudaStreamSynchronize(st) == cudaErrorStreamCaptureUnsupported, "sync while capturing not refused");
	CHECK(cudaStreamEndCapture(st, &g) == cudaErrorStreamCaptureInvalidated && !g, "spoilt capture not refused");
	cudaGetLastError();

	/* launch configurations */
	k_add<<<1, 2048, 0, st>>>(dx, c, n);
	CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "a block of 2048 threads was accepted");
	k_dyn<<<1, 64, 64 << 10, st>>>(dx);
	CHECK(cudaGetLastError() == cudaErrorInvalidValue, "64 KiB of dynamic shared memory without the attribute was accepted");
	CHECK(cudaFuncSetAttribute(k_dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10) == cudaSuccess,
	      "attribute");
	k_dyn<<<1, 64, 64 << 10, st>>>(dx);
	CHECK(cudaGetLastError() == cudaSuccess, "64 KiB with the attribute refused");
	CHECK(cudaStreamSynchronize(st) == cudaSuccess, "sync");
	return fails;
}

static int expect_fault(cudaError_t want, const char *what);

/* the bits of a ballot outside its mask are not promised to be 0: code that counts them
 * unmasked must get a count a GPU may give, not the one it hoped for */
static int case_ballot_outside(void)
{
	int *d = NULL, h[64];
	cudaMalloc((void **)&d, sizeof h);
	k_ballot_halves<<<1, 32>>>(d);
	CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess, "copy");
	int unmasked16 = 0;
	for (int t = 0; t < 32; t++) {
		CHECK(h[2 * t + 1] == 16, "thread %d: masked ballot counts %d lanes, want 16", t, h[2 * t + 1]);
		unmasked16 += h[2 * t] == 16;
	}
	printf("ballot outside the mask: %d of 32 threads counted 16 lanes without masking\n", unmasked16);
	CHECK(unmasked16 < 32, "an unmasked ballot count gave the hoped-for 16 on every lane: bits outside the mask are 0");
	cudaFree(d);
	return fails;
}

/* cudaDeviceSynchronize waits for every stream, and cudaFree for the work that uses the
 * buffer (it synchronises the device) */
static int case_device_sync(void)
{
	cudaStream_t st;
	int *hflag = flag_written_on_stream(&st);
	CHECK(cudaDeviceSynchronize() == cudaSuccess, "device sync");
	CHECK(*hflag == 7, "after cudaDeviceSynchronize the flag written on a stream is %d, not 7", *hflag);
	float *dx = dev_floats(256);
	cudaMemsetAsync(dx, 0, 256 * sizeof(float), st);
	k_add<<<1, 256, 0, st>>>(dx, 1.0f, 256);
	CHECK(cudaFree(dx) == cudaSuccess, "cudaFree");
	cudaError_t e = cudaStreamSynchronize(st);
	CHECK(e == cudaSuccess, "the stream's kernel ran after cudaFree freed its buffer: %s", cudaGetErrorName(e));
	return fails;
}

static int case_dyn_past_end(void)
{
	float *d = dev_floats(64);
	k_dyn_past_end<<<1, 64, 64 * sizeof(float)>>>(d);
	return expect_fault(cudaErrorIllegalAddress, "past the dynamic shared memory");
}

/* a memset queued on one stream, its buffer freed on another before it runs: the device
 * operation faults (a sticky cudaErrorIllegalAddress naming it), not the host */
static int case_memset_fault(void)
{
	cudaStream_t st;
	cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
	float *d = dev_floats(256);
	cudaMemsetAsync(d, 0, 256 * sizeof(float), st);
	cudaFreeAsync(d, 0);
	cudaStreamSynchronize(0); /* the free runs */
	cudaError_t e = cudaStreamSynchronize(st);
	CHECK(e == cudaErrorIllegalAddress, "the stream's memset: %s", cudaGetErrorName(e));
	return expect_fault(cudaErrorIllegalAddress, "memset of a freed buffer");
}

static int case_missing_barrier(void)
{
	float *d = dev_floats(64), h[64];
	k_missing_barrier<<<1, 64, 64 * sizeof(float)>>>(d);
	CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess, "copy");
	int wrong = 0;
	for (int t = 0; t < 64; t++)
		wrong += h[t] != (float)((t + 1) % 64);
	printf("missing barrier: %d of 64 threads read a slot not yet written\n", wrong);
	CHECK(wrong > 0, "the race did not show");
	return fails;
}

/* a fault case: the kernel, then a synchronisation that must return `want` */
static int expect_fault(cudaError_t want, const char *what)
{
	cudaError_t e = cudaDeviceSynchronize();
	printf("%s: %s\n", what, cudaGetErrorName(e));
	CHECK(e == want, "%s: got %s, want %s", what, cudaGetErrorName(e), cudaGetErrorName(want));
	/* the context stays poisoned */
	CHECK(cudaGetLastError() == want && cudaGetLastError() == want, "%s: the error is not sticky", what);
	return fails;
}

static int case_past_end(void)
{
	float *d = dev_floats(1000);
	k_past_end<<<4, 256>>>(d, 1000);
	return expect_fault(cudaErrorIllegalAddress, "past the end");
}

/* a kernel handed a host pointer (pageable memory): an illegal address on a GPU */
static int case_host_arg(void)
{
	static float host[64];
	float *o = dev_floats(64);
	k_read<<<1, 64>>>(o, host);
	return expect_fault(cudaErrorIllegalAddress, "host pointer argument");
}

static int case_after_free(void)
{
	float *d = dev_floats(64), *o = dev_floats(64);
	cudaFree(d);
	k_read<<<1, 64>>>(o, d);
	return expect_fault(cudaErrorIllegalAddress, "use after free");
}

/* one warp of a kernel that misuses a collective, and the fault it must give */
static int warp_fault(void (*k)(float *), cudaError_t want, const char *what)
{
	float *d = dev_floats(32);
	k<<<1, 32>>>(d);
	return expect_fault(want, what);
}

static int case_bad_mask(void) { return warp_fault(k_bad_mask, cudaErrorIllegalInstruction, "mask"); }
static int case_exited_lane(void) { return warp_fault(k_exited_lane, cudaErrorIllegalInstruction, "exited lane"); }
static int case_deadlock(void) { return warp_fault(k_deadlock, cudaErrorLaunchTimeout, "deadlock"); }
static int case_disagree(void) { return warp_fault(k_disagree, cudaErrorIllegalInstruction, "disagreeing masks"); }

/* host code that dereferences a device pointer dies (SIGSEGV), as on a GPU machine */
static int case_host_deref(void)
{
	float *d = dev_floats(64);
	cudaDeviceSynchronize();
	volatile float v = d[3];
	printf("host read %g from device memory: not caught\n", (double)v);
	return 1;
}

struct Case {
	const char *name;
	int (*fn)(void);
};
static const Case cases[] = {
	{"collectives", case_collectives}, {"blocksum", case_blocksum},     {"streams", case_streams},
	{"missing_barrier", case_missing_barrier}, {"past_end", case_past_end}, {"after_free", case_after_free},
	{"bad_mask", case_bad_mask},       {"exited_lane", case_exited_lane}, {"deadlock", case_deadlock},
	{"disagree", case_disagree},       {"host_deref", case_host_deref},
	{"ballot_outside", case_ballot_outside}, {"device_sync", case_device_sync},
	{"dyn_past_end", case_dyn_past_end}, {"memset_fault", case_memset_fault},
	{"host_arg", case_host_arg},
};

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: selftest CASE | --list\n");
		return 2;
	}
	for (const Case &c : cases) {
		if (!strcmp(argv[1], "--list"))
			printf("%s\n", c.name);
		else if (!strcmp(argv[1], c.name))
			return c.fn() ? 1 : 0;
	}
	if (!strcmp(argv[1], "--list"))
		return 0;
	fprintf(stderr, "selftest: no case '%s'\n", argv[1]);
	return 2;
}
