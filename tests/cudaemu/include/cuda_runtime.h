/* cuda_runtime.h of cudaemu — the CUDA runtime as the CUDA backend (lib/cuda/) uses
 * it, emulated on the host so that its kernels and its host code run on a machine
 * without a GPU (tests/cudaemu/README.md). Not NVIDIA's header: only the subset that
 * lib/cuda needs, with the same names, values and semantics, and the device built-ins
 * (threadIdx, __syncthreads, warp shuffles...) that the emulator's scheduler serves.
 *
 * Device code is compiled by g++ as C++17 after tests/cudaemu/nvcc-emu has rewritten
 * each launch `k<<<g, b, sm, st>>>(args)` into `::cudaemu::Launch(...).go("k", k, args)`
 * and each `extern __shared__ T name[];` into a pointer to the launch's dynamic
 * shared memory. */
#ifndef CUDAEMU_CUDA_RUNTIME_H
#define CUDAEMU_CUDA_RUNTIME_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#define CUDAEMU 1
#define CUDART_VERSION 12040
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
/* a kernel's static shared memory: blocks run one at a time, so one static copy
 * serves every block (its contents are not kept from block to block on a GPU either) */
#define __shared__ static

typedef enum cudaError {
	cudaSuccess = 0,
	cudaErrorInvalidValue = 1,
	cudaErrorMemoryAllocation = 2,
	cudaErrorInitializationError = 3,
	cudaErrorInvalidConfiguration = 9,
	cudaErrorInvalidDevicePointer = 17,
	cudaErrorInvalidMemcpyDirection = 21,
	cudaErrorDevicesUnavailable = 46,
	cudaErrorNoDevice = 100,
	cudaErrorInvalidDevice = 101,
	cudaErrorECCUncorrectable = 214,
	cudaErrorInvalidResourceHandle = 400,
	cudaErrorNotReady = 600,
	cudaErrorIllegalAddress = 700,
	cudaErrorLaunchOutOfResources = 701,
	cudaErrorLaunchTimeout = 702,
	cudaErrorContextIsDestroyed = 709,
	cudaErrorHardwareStackError = 714,
	cudaErrorIllegalInstruction = 715,
	cudaErrorMisalignedAddress = 716,
	cudaErrorInvalidAddressSpace = 717,
	cudaErrorInvalidPc = 718,
	cudaErrorLaunchFailure = 719,
	cudaErrorNotSupported = 801,
	cudaErrorStreamCaptureUnsupported = 900,
	cudaErrorStreamCaptureInvalidated = 901,
	cudaErrorStreamCaptureWrongThread = 908,
	cudaErrorUnknown = 999
} cudaError_t;

struct dim3 {
	unsigned x, y, z;
	constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct uint3 {
	unsigned x, y, z;
};

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef struct CUmemPoolHandle_st *cudaMemPool_t;

enum cudaMemcpyKind {
	cudaMemcpyHostToHost = 0,
	cudaMemcpyHostToDevice = 1,
	cudaMemcpyDeviceToHost = 2,
	cudaMemcpyDeviceToDevice = 3,
	cudaMemcpyDefault = 4
};
enum cudaStreamCaptureMode {
	cudaStreamCaptureModeGlobal = 0,
	cudaStreamCaptureModeThreadLocal = 1,
	cudaStreamCaptureModeRelaxed = 2
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold = 4 };

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaDeviceScheduleAuto 0x00
#define cudaDeviceScheduleSpin 0x01
#define cudaDeviceScheduleYield 0x02
#define cudaDeviceScheduleBlockingSync 0x04
#define cudaDeviceMapHost 0x08

struct cudaDeviceProp {
	char name[256];
	size_t totalGlobalMem;
	size_t sharedMemPerBlock;
	size_t sharedMemPerBlockOptin;
	int regsPerBlock;
	int warpSize;
	int maxThreadsPerBlock;
	int maxThreadsDim[3];
	int maxGridSize[3];
	int major, minor;
	int multiProcessorCount;
	int canMapHostMemory;
};

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaSetDeviceFlags(unsigned flags);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int dev);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int dev);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void *value);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t st);
cudaError_t cudaStreamSynchronize(cudaStream_t st);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t ev);
cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st);
cudaError_t cudaEventSynchronize(cudaEvent_t ev);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t st);
cudaError_t cudaFreeAsync(void *p, cudaStream_t st);
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned flags);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t st);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
			      cudaMemcpyKind kind, cudaStream_t st);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t st);
cudaError_t cudaStreamBeginCapture(cudaStream_t st, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t st);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x);

namespace cudaemu {
cudaError_t func_set_attribute(const void *fn, cudaFuncAttribute attr, int value);
}
template <class F> cudaError_t cudaFuncSetAttribute(F *fn, cudaFuncAttribute attr, int value)
{
	return ::cudaemu::func_set_attribute((const void *)fn, attr, value);
}

/* ---------------------------------------------------------------- device side */

extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
static constexpr int warpSize = 32;

namespace cudaemu {
enum Coll { C_SHFL, C_SHFL_UP, C_SHFL_DOWN, C_SHFL_XOR, C_BALLOT, C_ANY, C_ALL, C_SYNCWARP };
uint64_t collective(int kind, unsigned mask, uint64_t value, int arg, int width);
void syncthreads(void);
void *dyn_smem(void);
/* a static __shared__ array reached in this block: filled with 0xFF bytes the first time */
void smem_touch(void *p, size_t bytes);

template <class T> T shfl(int kind, unsigned mask, T v, int arg, int width)
{
	static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "a shuffle moves at most 8 bytes");
	uint64_t u = 0;
	memcpy(&u, &v, sizeof v);
	u = collective(kind, mask, u, arg, width);
	T r;
	memcpy(&r, &u, sizeof r);
	return r;
}

/* a kernel launch: the configuration is checked when go() is called (cudaGetLastError
 * reports it), the arguments are copied then, and the kernel runs in stream order */
typedef void (*Body)(void *);
struct Launch {
	const char *file;
	int line;
	dim3 g, b;
	size_t sm;
	cudaStream_t st;
	Launch(const char *f, int l, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = 0)
		: file(f), line(l), g(grid), b(block), sm(smem), st(stream)
	{
	}
	template <class... P, class... A> void go(const char *name, void (*k)(P...), A &&...a)
	{
		static_assert(sizeof...(P) == sizeof...(A), "a launch passes every parameter");
		auto args = std::make_shared<std::tuple<typename std::decay<P>::type...>>(std::forward<A>(a)...);
		/* every pointer argument must be null or name device or pinned memory: a host
		 * pointer a kernel dereferences faults on a GPU (checked when the kernel runs) */
		std::vector<const void *> ptrs;
		std::apply([&ptrs](const auto &...x) { (note_ptr(ptrs, x), ...); }, *args);
		submit(name, (const void *)k, [k, args]() { std::apply(k, *args); }, std::move(ptrs));
	}
	template <class T> static void note_ptr(std::vector<const void *> &ptrs, const T &x)
	{
		if constexpr (std::is_pointer<T>::value)
			ptrs.push_back((const void *)x);
		else
			ptrs.push_back(nullptr);
	}
	void submit(const char *name, const void *fn, std::function<void()> body, std::vector<const void *> ptrs);
};
} // namespace cudaemu

static inline void __syncthreads(void) { ::cudaemu::syncthreads(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { ::cudaemu::collective(::cudaemu::C_SYNCWARP, mask, 0, 0, 32); }
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
	return ::cudaemu::shfl(::cudaemu::C_SHFL, mask, v, src, width);
}
template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	return ::cudaemu::shfl(::cudaemu::C_SHFL_UP, mask, v, (int)delta, width);
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
	return ::cudaemu::shfl(::cudaemu::C_SHFL_DOWN, mask, v, (int)delta, width);
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32)
{
	return ::cudaemu::shfl(::cudaemu::C_SHFL_XOR, mask, v, lane_mask, width);
}
static inline unsigned __ballot_sync(unsigned mask, int pred)
{
	return (unsigned)::cudaemu::collective(::cudaemu::C_BALLOT, mask, pred != 0, 0, 32);
}
static inline int __any_sync(unsigned mask, int pred)
{
	return (int)::cudaemu::collective(::cudaemu::C_ANY, mask, pred != 0, 0, 32);
}
static inline int __all_sync(unsigned mask, int pred)
{
	return (int)::cudaemu::collective(::cudaemu::C_ALL, mask, pred != 0, 0, 32);
}
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
/* one thread runs at a time (the scheduler switches only at barriers, collectives
 * and exits), so read-modify-write is atomic as written */
static inline int atomicCAS(int *p, int cmp, int v)
{
	int o = *p;
	if (o == cmp)
		*p = v;
	return o;
}
static inline unsigned atomicCAS(unsigned *p, unsigned cmp, unsigned v)
{
	unsigned o = *p;
	if (o == cmp)
		*p = v;
	return o;
}
static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long cmp, unsigned long long v)
{
	unsigned long long o = *p;
	if (o == cmp)
		*p = v;
	return o;
}
template <class T> static inline T atomicAdd(T *p, T v)
{
	T o = *p;
	*p = o + v;
	return o;
}
template <class T> static inline T atomicMax(T *p, T v)
{
	T o = *p;
	if (v > o)
		*p = v;
	return o;
}
template <class T> static inline T atomicMin(T *p, T v)
{
	T o = *p;
	if (v < o)
		*p = v;
	return o;
}

#endif
