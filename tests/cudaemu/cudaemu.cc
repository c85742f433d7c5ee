/* cudaemu.cc — the CUDA runtime and cuBLAS calls of lib/cuda, emulated on the host
 * (tests/cudaemu/README.md says what it checks and what it cannot).
 *
 * Kernels: every thread of a block runs as a fiber (a thread that never waits shares
 * its stack with the next); one runs at a time until it reaches __syncthreads, a warp collective (shuffle, ballot, any,
 * __syncwarp) or its end, and the scheduler then runs the next. A collective completes
 * when every lane of its mask has arrived with the same operation and mask; a lane
 * that names a lane outside its mask, lanes that disagree, and a wait that can never
 * end (a lane that exited, a barrier some threads never reach) are faults reported
 * with the kernel, block, warp and lanes. Blocks run one after another; the order of
 * blocks and of threads within a block is set by CUDAEMU_SCHEDULE (forward, reverse,
 * random[:SEED]), so that a missing barrier shows as results that depend on it.
 *
 * Memory: device allocations are mappings of their own, ending at a guard page (a
 * write or read past the end faults), poisoned with 0xFF bytes (NaN floats) when
 * allocated, never reused once freed (a use after free faults), and inaccessible to
 * the host except while a device operation runs (host code that dereferences a device
 * pointer faults). A fault inside a device operation is the device's
 * cudaErrorIllegalAddress: reported on stderr, sticky as a poisoned context is.
 *
 * Streams run in order and lazily: an operation runs at the stream's next
 * synchronisation (stream, event, a copy to pageable memory), so host code that reads
 * results without one sees stale data as it might on a GPU. A copy from pageable host
 * memory takes its data when called (as the runtime's staging does). Capture records
 * the stream's operations with their arguments; a graph launch replays them.
 *
 * cuBLAS: cublasSgemm and cublasSgemv through OpenBLAS's column-major cblas. */
#include "cublas_v2.h"
#include "cuda_runtime.h"

#include <cblas.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xmmintrin.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

struct CUstream_st {
	std::deque<std::function<void()>> q;
	unsigned long long queued = 0, done = 0;
	bool capturing = false, cap_invalid = false;
	std::vector<std::function<void()>> cap;
};
struct CUevent_st {
	cudaStream_t st = nullptr;
	unsigned long long target = 0;
};
struct CUgraph_st {
	std::vector<std::function<void()>> ops;
};
struct CUgraphExec_st {
	std::vector<std::function<void()>> ops;
};
struct cublasContext {
	cudaStream_t st = nullptr;
	int math = 0;
};

namespace cudaemu {

static std::recursive_mutex mu;
#define LOCK std::lock_guard<std::recursive_mutex> lk_(mu)
static cudaError_t sticky = cudaSuccess;
static thread_local cudaError_t last_err = cudaSuccess;
static CUstream_st legacy_stream;
static std::vector<CUstream_st *> streams; /* created and not destroyed, oldest first */
static long pagesz;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("cudaemu: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static cudaError_t ret(cudaError_t e)
{
	if (e != cudaSuccess)
		last_err = e;
	return e;
}

static CUstream_st *S(cudaStream_t st) { return st ? st : &legacy_stream; }

/* ---------------------------------------------------------------- memory */

struct Alloc {
	char *base;    /* the mapping */
	size_t maplen; /* data pages + guard page */
	size_t size;   /* bytes asked for */
	bool device, freed;
};
static std::map<uintptr_t, Alloc> allocs; /* by user address */
static std::set<Alloc *> live_dev;         /* the device allocations not freed */
static std::deque<uintptr_t> quarantine;  /* freed device allocations, oldest first */
static const size_t QUARANTINE = 8192;    /* kept inaccessible; older ones are unmapped
					      * (each mapping costs the process map entries) */
static int dev_access;                    /* >0 while a device operation runs */
static bool protect = true;

static void set_prot(Alloc &a, int prot) { mprotect(a.base, a.maplen - (size_t)pagesz, prot); }
static void devmem_open(void)
{
	if (dev_access++ == 0 && protect)
		for (Alloc *a : live_dev)
			set_prot(*a, PROT_READ | PROT_WRITE);
}
static void devmem_close(void)
{
	if (--dev_access == 0 && protect)
		for (Alloc *a : live_dev)
			set_prot(*a, PROT_NONE);
}

static void *map_alloc(size_t bytes, bool device)
{
	size_t r8 = (bytes + 7) & ~(size_t)7;
	size_t data = (r8 + (size_t)pagesz - 1) / (size_t)pagesz * (size_t)pagesz;
	if (data == 0)
		data = (size_t)pagesz;
	size_t len = data + (size_t)pagesz;
	char *base = (char *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return nullptr;
	mprotect(base + data, (size_t)pagesz, PROT_NONE);
	char *p = base + data - r8;
	if (device)
		memset(p, 0xFF, r8);
	Alloc a = {base, len, bytes, device, false};
	Alloc &na = allocs[(uintptr_t)p] = a;
	if (device) {
		live_dev.insert(&na);
		if (protect && dev_access == 0)
			set_prot(na, PROT_NONE);
	}
	return p;
}

/* the allocation holding addr (a freed one too), or null */
static Alloc *find_alloc(uintptr_t addr, uintptr_t *start)
{
	auto it = allocs.upper_bound(addr);
	while (it != allocs.begin()) {
		--it;
		Alloc &a = it->second;
		if (addr >= (uintptr_t)a.base && addr < (uintptr_t)a.base + a.maplen) {
			*start = it->first;
			return &a;
		}
		if ((uintptr_t)a.base + a.maplen <= addr)
			break;
	}
	return nullptr;
}

static bool is_pinned(const void *p, size_t n)
{
	uintptr_t s;
	Alloc *a = find_alloc((uintptr_t)p, &s);
	return a && !a->device && !a->freed && (uintptr_t)p + n <= s + a->size;
}

static void free_alloc(void *p, bool device)
{
	auto it = allocs.find((uintptr_t)p);
	if (it == allocs.end() || it->second.freed || it->second.device != device)
		return;
	Alloc &a = it->second;
	munmap(a.base, a.maplen);
	if (!device) {
		allocs.erase(it);
		return;
	}
	/* keep the addresses reserved and inaccessible: a later use faults */
	mmap(a.base, a.maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	a.freed = true;
	live_dev.erase(&a);
	quarantine.push_back(it->first);
	if (quarantine.size() > QUARANTINE) {
		auto old = allocs.find(quarantine.front());
		quarantine.pop_front();
		if (old != allocs.end()) {
			munmap(old->second.base, old->second.maplen);
			allocs.erase(old);
		}
	}
}

/* ---------------------------------------------------------------- device operations */

/* what runs now, for fault reports; volatile: the SIGSEGV handler reads it, and without it
 * the compiler drops `op_name = ...` before a memset or memcpy that it knows cannot read it
 * (a fault in cudaMemsetAsync was then reported as host code's and killed the process) */
static const char *volatile op_name;
static bool in_kernel;
static sigjmp_buf op_jmp;
static std::string fault_msg;

/* the launch's dynamic shared memory: its end (rounded up to 16 bytes) at a guard page */
static char *dsm_map, *dsm_ptr;
static size_t dsm_maplen, dsm_bytes;

static void describe_addr(uintptr_t addr, char *buf, size_t n)
{
	uintptr_t s;
	Alloc *a = find_alloc(addr, &s);
	if (!a && dsm_map && addr >= (uintptr_t)dsm_map && addr < (uintptr_t)dsm_map + dsm_maplen)
		snprintf(buf, n, "%ld bytes past the end of the dynamic shared memory (%zu bytes)",
			 (long)(addr - (uintptr_t)dsm_ptr - dsm_bytes), dsm_bytes);
	else if (!a)
		snprintf(buf, n, "not in any allocation");
	else if (a->freed)
		snprintf(buf, n, "in a freed %s allocation of %zu bytes at %#lx (offset %ld)",
			 a->device ? "device" : "pinned host", a->size, (unsigned long)s, (long)(addr - s));
	else if (addr >= s + a->size)
		snprintf(buf, n, "%ld bytes past the end of a %s allocation of %zu bytes at %#lx",
			 (long)(addr - s - a->size), a->device ? "device" : "pinned host", a->size, (unsigned long)s);
	else if (addr < s)
		snprintf(buf, n, "%ld bytes before a %s allocation of %zu bytes at %#lx", (long)(s - addr),
			 a->device ? "device" : "pinned host", a->size, (unsigned long)s);
	else
		snprintf(buf, n, "inside a device allocation of %zu bytes at %#lx (offset %ld), while no device operation runs",
			 a->size, (unsigned long)s, (long)(addr - s));
}

static void where(char *buf, size_t n);

static void on_fault(int sig, siginfo_t *si, void *)
{
	char what[256], at[200];
	describe_addr((uintptr_t)si->si_addr, what, sizeof what);
	if (!op_name) {
		fprintf(stderr, "cudaemu: host code touched %p (%s): a device pointer dereferenced on the host?\n",
			si->si_addr, what);
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	where(at, sizeof at);
	char msg[600];
	snprintf(msg, sizeof msg, "illegal address %p in %s%s: %s", si->si_addr, op_name, at, what);
	fault_msg = msg;
	siglongjmp(op_jmp, (int)cudaErrorIllegalAddress);
}

/* a fault found by the emulator itself (a deadlock, a collective misused) */
static void kernel_fault(cudaError_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void kernel_fault(cudaError_t code, const char *fmt, ...)
{
	char msg[1200], at[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	where(at, sizeof at);
	fault_msg = std::string(op_name ? op_name : "?") + at + ": " + msg;
	siglongjmp(op_jmp, (int)code);
}

static void init_once(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	pagesz = sysconf(_SC_PAGESIZE);
	const char *p = getenv("CUDAEMU_PROTECT");
	protect = !(p && !strcmp(p, "0"));
	static char altstack[1 << 16];
	stack_t ss;
	memset(&ss, 0, sizeof ss);
	ss.ss_sp = altstack;
	ss.ss_size = sizeof altstack;
	sigaltstack(&ss, nullptr);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
	sigaction(SIGSEGV, &sa, nullptr);
	sigaction(SIGBUS, &sa, nullptr);
}

/* queue (or record, while capturing) one operation */
static cudaError_t enqueue(cudaStream_t st, std::function<void()> f)
{
	CUstream_st *s = S(st);
	if (sticky != cudaSuccess)
		return ret(sticky);
	if (s->capturing)
		s->cap.push_back(std::move(f));
	else {
		s->q.push_back(std::move(f));
		s->queued++;
	}
	return cudaSuccess;
}

static cudaError_t capture_refuse(CUstream_st *s)
{
	s->cap_invalid = true;
	return ret(cudaErrorStreamCaptureUnsupported);
}

/* ---------------------------------------------------------------- the block scheduler */

/* A runner is a stack on which threads run: it runs the next thread not yet started,
 * and when that one ends without waiting, the next, so a kernel without barriers or
 * collectives costs a function call per thread. A thread that waits keeps its runner;
 * the scheduler starts another for the threads after it. A switch saves the System V
 * x86-64 callee-saved registers on the stack it leaves and restores them from the one
 * it enters (MXCSR and the x87 control word are the same on every runner). */
extern "C" void cudaemu_switch(void **save_sp, void *to_sp);
asm(".text\n"
    ".globl cudaemu_switch\n"
    ".type cudaemu_switch, @function\n"
    "cudaemu_switch:\n"
    "\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
    "\tmovq %rsp, (%rdi)\n"
    "\tmovq %rsi, %rsp\n"
    "\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
    "\tret\n"
    ".size cudaemu_switch, .-cudaemu_switch\n");

struct Runner {
	void *sp; /* saved while it waits */
	char *stack;
	bool busy;
};

/* one thread of the block */
struct Fiber {
	Runner *rn; /* while started and not done */
	uint3 tid;
	int warp, lane;
	bool started, done;
	/* a pending warp collective */
	bool waiting;
	int kind, arg, width;
	unsigned mask;
	uint64_t val, res;
	/* at __syncthreads */
	bool at_bar;
};

static const size_t STACK = 256 << 10;
static std::vector<Fiber> fib;
static std::vector<Runner *> runners;
static Runner *cur_runner; /* the runner being started */
static Fiber *cur;
static void *sched_sp;
static std::vector<unsigned> warp_arrived, warp_done; /* lanes waiting in a collective; lanes exited */
static const std::vector<int> *g_order;
static size_t next_pos; /* the next position of g_order to start */
static unsigned long long progress;
static int live, arrived, nthreads;
static unsigned bar_gen;
static std::function<void()> *body;
static const char *kname;
static std::string sched_mode = "forward";
static std::mt19937_64 rng(1);

static const char *coll_name(int k)
{
	static const char *n[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
				  "__ballot_sync", "__any_sync", "__all_sync", "__syncwarp"};
	return k >= 0 && k < 8 ? n[k] : "?";
}

static void where(char *buf, size_t n)
{
	if (in_kernel && cur)
		snprintf(buf, n, " (block %u,%u,%u of %u,%u,%u; thread %u,%u,%u, warp %d lane %d)", blockIdx.x, blockIdx.y,
			 blockIdx.z, gridDim.x, gridDim.y, gridDim.z, cur->tid.x, cur->tid.y, cur->tid.z, cur->warp,
			 cur->lane);
	else if (in_kernel)
		snprintf(buf, n, " (block %u,%u,%u)", blockIdx.x, blockIdx.y, blockIdx.z);
	else
		buf[0] = 0;
}

static void yield(void) { cudaemu_switch(&cur->rn->sp, sched_sp); }

static void bar_release_if_complete(void)
{
	if (arrived > 0 && arrived == live) {
		arrived = 0;
		bar_gen++;
		progress++;
	}
}

static void thread_exit(void)
{
	cur->done = true;
	warp_done[cur->warp] |= 1u << cur->lane;
	/* a lane of this warp waiting for this one in a collective would wait forever */
	for (unsigned w = warp_arrived[cur->warp]; w; w &= w - 1) {
		int l = __builtin_ctz(w);
		Fiber &f = fib[(size_t)cur->warp * 32 + l];
		if (f.mask >> cur->lane & 1)
			kernel_fault(cudaErrorIllegalInstruction, "lane %d exits while lane %d waits for it in a %s with mask %#x",
				     cur->lane, l, coll_name(f.kind), f.mask);
	}
	live--;
	progress++;
	bar_release_if_complete();
}

/* the next thread of the order not yet started, or -1 */
static int claim(void)
{
	while (next_pos < g_order->size() && fib[(*g_order)[next_pos]].started)
		next_pos++;
	if (next_pos >= g_order->size())
		return -1;
	int i = (*g_order)[next_pos++];
	fib[i].started = true;
	return i;
}

static void runner_main(void)
{
	Runner *me = cur_runner;
	for (;;) {
		int i = claim();
		if (i < 0)
			break;
		Fiber &f = fib[i];
		f.rn = me;
		cur = &f;
		threadIdx = f.tid;
		(*body)();
		thread_exit();
		f.rn = nullptr;
	}
	me->busy = false;
	void *dead;
	cudaemu_switch(&dead, sched_sp); /* never comes back: the runner is started afresh */
	__builtin_unreachable();
}

static Runner *get_runner(void)
{
	for (Runner *r : runners)
		if (!r->busy)
			return r;
	char *s = (char *)mmap(nullptr, STACK + (size_t)pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			       -1, 0);
	if (s == MAP_FAILED)
		return nullptr;
	mprotect(s, (size_t)pagesz, PROT_NONE); /* a stack overflow faults */
	Runner *r = new Runner;
	r->stack = s + pagesz;
	r->busy = false;
	runners.push_back(r);
	return r;
}

void *dyn_smem(void) { return dsm_ptr; }

static bool dsm_open(size_t sm)
{
	size_t r16 = (sm + 15) & ~(size_t)15;
	size_t data = (r16 + (size_t)pagesz - 1) / (size_t)pagesz * (size_t)pagesz;
	if (data == 0)
		data = (size_t)pagesz;
	dsm_maplen = data + (size_t)pagesz;
	dsm_map = (char *)mmap(nullptr, dsm_maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (dsm_map == MAP_FAILED) {
		dsm_map = dsm_ptr = nullptr;
		return false;
	}
	mprotect(dsm_map + data, (size_t)pagesz, PROT_NONE);
	dsm_ptr = dsm_map + data - r16;
	dsm_bytes = sm;
	return true;
}

static void dsm_close(void)
{
	if (dsm_map)
		munmap(dsm_map, dsm_maplen);
	dsm_map = dsm_ptr = nullptr;
}

/* static shared arrays poisoned in this block (cleared when a block starts) */
static std::vector<void *> smem_seen;

void smem_touch(void *p, size_t bytes)
{
	if (std::find(smem_seen.begin(), smem_seen.end(), p) != smem_seen.end())
		return;
	smem_seen.push_back(p);
	memset(p, 0xFF, bytes);
}

void syncthreads(void)
{
	if (!in_kernel || !cur)
		kernel_fault(cudaErrorIllegalInstruction, "__syncthreads outside a kernel");
	unsigned g = bar_gen;
	arrived++;
	progress++;
	cur->at_bar = true;
	bar_release_if_complete();
	while (bar_gen == g)
		yield();
	cur->at_bar = false;
}

static Fiber &lane_fiber(int warp, int lane) { return fib[(size_t)warp * 32 + lane]; }

static unsigned warp_exists(int warp)
{
	int n = nthreads - warp * 32;
	return n >= 32 ? 0xffffffffu : (1u << n) - 1;
}

static void try_complete(int warp, unsigned mask)
{
	if (mask & warp_done[warp])
		kernel_fault(cudaErrorIllegalInstruction, "warp %d: a %s with mask %#x waits for lane %d, which has exited", warp,
			     coll_name(cur->kind), mask, __builtin_ctz(mask & warp_done[warp]));
	if ((warp_arrived[warp] & mask) != mask)
		return;
	Fiber &me = *cur;
	for (int l = 0; l < 32; l++)
		if (mask >> l & 1) {
			Fiber &f = lane_fiber(warp, l);
			if (f.kind != me.kind || f.mask != me.mask || f.width != me.width)
				kernel_fault(cudaErrorIllegalInstruction,
					     "warp %d: lanes disagree: lane %d calls %s (mask %#x, width %d), lane %d %s (mask %#x, width %d)",
					     warp, me.lane, coll_name(me.kind), me.mask, me.width, l, coll_name(f.kind), f.mask,
					     f.width);
		}
	uint64_t ballot = 0;
	for (int l = 0; l < 32; l++)
		if (mask >> l & 1)
			ballot |= (uint64_t)(lane_fiber(warp, l).val != 0) << l;
	for (int l = 0; l < 32; l++) {
		if (!(mask >> l & 1))
			continue;
		Fiber &f = lane_fiber(warp, l);
		int w = f.width, base = l & ~(w - 1), src = l;
		switch (f.kind) {
		case C_SHFL:
			src = base + (f.arg & (w - 1));
			break;
		case C_SHFL_UP:
			src = l - f.arg < base ? l : l - f.arg;
			break;
		case C_SHFL_DOWN:
			src = l + f.arg >= base + w ? l : l + f.arg;
			break;
		case C_SHFL_XOR:
			src = (l ^ f.arg) >= base + w ? l : (l ^ f.arg);
			break;
		default:
			break;
		}
		if (f.kind <= C_SHFL_XOR) {
			if (src < 0 || src > 31 || !(mask >> src & 1))
				kernel_fault(cudaErrorIllegalInstruction, "warp %d: lane %d's %s (arg %d, width %d) reads lane %d, outside the mask %#x",
					     warp, l, coll_name(f.kind), f.arg, w, src, mask);
			f.res = lane_fiber(warp, src).val;
		} else if (f.kind == C_BALLOT)
			/* a lane outside the mask that has not exited may be active (the other half
			 * of a converged warp) and set its bit: the guide promises only the mask's
			 * bits, so those read as set here and code that forgets `& mask` shows */
			f.res = (ballot & mask) | (warp_exists(warp) & ~mask & ~warp_done[warp]);
		else if (f.kind == C_ANY)
			f.res = (ballot & mask) != 0;
		else if (f.kind == C_ALL)
			f.res = (ballot & mask) == mask;
		else
			f.res = 0;
	}
	for (int l = 0; l < 32; l++)
		if (mask >> l & 1)
			lane_fiber(warp, l).waiting = false;
	warp_arrived[warp] &= ~mask;
	progress++;
}

uint64_t collective(int kind, unsigned mask, uint64_t value, int arg, int width)
{
	if (!in_kernel || !cur)
		kernel_fault(cudaErrorIllegalInstruction, "%s outside a kernel", coll_name(kind));
	Fiber &me = *cur;
	if (!(mask >> me.lane & 1))
		kernel_fault(cudaErrorIllegalInstruction, "%s: the mask %#x leaves out the calling lane %d", coll_name(kind),
			     mask, me.lane);
	if (mask & ~warp_exists(me.warp))
		kernel_fault(cudaErrorIllegalInstruction, "%s: the mask %#x names lanes the block does not have (%d threads)",
			     coll_name(kind), mask, nthreads);
	if (width < 1 || width > 32 || (width & (width - 1)))
		kernel_fault(cudaErrorIllegalInstruction, "%s: width %d is not a power of 2 up to 32", coll_name(kind), width);
	me.kind = kind;
	me.mask = mask;
	me.val = value;
	me.arg = arg;
	me.width = width;
	me.waiting = true;
	warp_arrived[me.warp] |= 1u << me.lane;
	progress++;
	try_complete(me.warp, mask);
	while (cur->waiting)
		yield();
	return cur->res;
}

static void deadlock(void)
{
	std::string d;
	int shown = 0;
	for (auto &f : fib) {
		if (f.done || shown >= 6)
			continue;
		char b[200];
		if (f.at_bar)
			snprintf(b, sizeof b, "; thread %u (warp %d lane %d) at __syncthreads", f.tid.x, f.warp, f.lane);
		else if (f.waiting) {
			unsigned missing = 0;
			for (int l = 0; l < 32; l++)
				if ((f.mask >> l & 1) && !lane_fiber(f.warp, l).waiting)
					missing |= 1u << l;
			snprintf(b, sizeof b, "; thread %u (warp %d lane %d) at %s mask %#x, lanes %#x not there", f.tid.x,
				 f.warp, f.lane, coll_name(f.kind), f.mask, missing);
		} else
			continue;
		d += b;
		shown++;
	}
	cur = nullptr;
	kernel_fault(cudaErrorLaunchTimeout, "no thread can go on (%d of %d live, %d at the barrier)%s", live, nthreads,
		     arrived, d.c_str());
}

static void run_block(const std::vector<int> &order)
{
	for (int i = 0; i < nthreads; i++) {
		Fiber &f = fib[i];
		f.rn = nullptr;
		f.tid.x = (unsigned)i % blockDim.x;
		f.tid.y = (unsigned)i / blockDim.x % blockDim.y;
		f.tid.z = (unsigned)i / (blockDim.x * blockDim.y);
		f.warp = i / 32;
		f.lane = i % 32;
		f.started = f.done = f.waiting = f.at_bar = false;
	}
	for (Runner *r : runners)
		r->busy = false;
	warp_arrived.assign((size_t)(nthreads + 31) / 32, 0);
	warp_done.assign((size_t)(nthreads + 31) / 32, 0);
	g_order = &order;
	next_pos = 0;
	live = nthreads;
	arrived = 0;
	while (live > 0) {
		unsigned long long p0 = progress;
		for (int i : order) {
			Fiber &f = fib[i];
			if (f.done)
				continue;
			if (!f.started) { /* a runner for it and the threads after it */
				Runner *r = get_runner();
				if (!r)
					kernel_fault(cudaErrorLaunchOutOfResources, "no memory for a thread stack");
				r->busy = true;
				/* a fresh stack whose first switch returns into runner_main: six saved
				 * registers, then runner_main's address, then a slot for its own return
				 * address (so that it starts with the stack aligned as after a call) */
				void **top = (void **)(r->stack + STACK);
				top[-1] = nullptr;
				top[-2] = (void *)runner_main;
				for (int k = 3; k <= 8; k++)
					top[-k] = nullptr;
				cur_runner = r;
				cudaemu_switch(&sched_sp, (void *)(top - 8));
			} else {
				cur = &f;
				threadIdx = f.tid;
				cudaemu_switch(&sched_sp, f.rn->sp);
			}
			cur = nullptr;
		}
		if (live > 0 && progress == p0)
			deadlock();
	}
}

/* run one device operation; a fault poisons the context (sticky) */
static void exec_op(std::function<void()> &f)
{
	if (sticky != cudaSuccess)
		return;
	/* the signal stack is per thread */
	static thread_local bool alt;
	if (!alt) {
		alt = true;
		stack_t ss;
		memset(&ss, 0, sizeof ss);
		ss.ss_size = 1 << 16;
		ss.ss_sp = malloc(ss.ss_size);
		sigaltstack(&ss, nullptr);
	}
	unsigned csr = _mm_getcsr();
	_mm_setcsr(csr | 0x8040); /* nvcc -ftz=true: flush-to-zero and denormals-are-zero */
	int code = sigsetjmp(op_jmp, 1);
	if (code == 0)
		f();
	else {
		sticky = (cudaError_t)code;
		note("%s (the context is now poisoned: %s)", fault_msg.c_str(), cudaGetErrorName((cudaError_t)code));
	}
	_mm_setcsr(csr);
	in_kernel = false;
	op_name = nullptr;
	cur = nullptr;
}

static void flush(CUstream_st *s, unsigned long long upto = ~0ull)
{
	if (s->q.empty() || s->done >= upto)
		return;
	devmem_open();
	while (!s->q.empty() && s->done < upto) {
		std::function<void()> f = std::move(s->q.front());
		s->q.pop_front();
		s->done++;
		exec_op(f);
	}
	if (sticky != cudaSuccess) { /* a poisoned context runs nothing more */
		s->done += s->q.size();
		s->q.clear();
	}
	devmem_close();
}

static std::map<const void *, int> smem_attr;
static const int SMEM_DEFAULT = 48 << 10;
static int smem_optin = 232448; /* an H100's opt-in maximum (227 KiB) */
static int sm_count = 132;

/* CUDAEMU_FAULT=NAME[:N[:FILE]]: the Nth run (default the first) of a kernel whose name
 * contains NAME faults as an illegal address does on a GPU, poisoning the context; runs
 * are counted in the process, launched or replayed from a graph. With FILE it fires only
 * if it can remove FILE, so of several processes (a pipeline's retries) one faults. */
static struct {
	std::string name, file;
	unsigned long long n = 1, seen = 0;
	bool on = false;
} inject;

static void inject_from_env(const char *v)
{
	std::string s = v;
	size_t c1 = s.find(':');
	inject.name = s.substr(0, c1);
	if (c1 != std::string::npos) {
		size_t c2 = s.find(':', c1 + 1);
		std::string n = s.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1);
		char *end;
		inject.n = strtoull(n.c_str(), &end, 10);
		if (n.empty() || *end || inject.n == 0) {
			note("CUDAEMU_FAULT=%s: N must be a count from 1; no fault will be injected", v);
			return;
		}
		if (c2 != std::string::npos)
			inject.file = s.substr(c2 + 1);
	}
	if (inject.name.empty()) {
		note("CUDAEMU_FAULT=%s: no kernel name; no fault will be injected", v);
		return;
	}
	inject.on = true;
}

static void run_kernel(const char *name, dim3 g, dim3 b, size_t sm, std::function<void()> &fn)
{
	op_name = name;
	kname = name;
	if (inject.on && strstr(name, inject.name.c_str()) && ++inject.seen == inject.n &&
	    (inject.file.empty() || unlink(inject.file.c_str()) == 0))
		kernel_fault(cudaErrorIllegalAddress, "a fault injected by CUDAEMU_FAULT (run %llu of a kernel named *%s*)",
			     inject.n, inject.name.c_str());
	gridDim = g;
	blockDim = b;
	nthreads = (int)(b.x * b.y * b.z);
	if (fib.size() < (size_t)nthreads)
		fib.resize(nthreads);
	body = &fn;
	std::vector<int> order(nthreads);
	for (int i = 0; i < nthreads; i++)
		order[i] = i;
	size_t nblk = (size_t)g.x * g.y * g.z;
	std::vector<size_t> border;
	bool rev = sched_mode == "reverse", rnd = sched_mode.compare(0, 6, "random") == 0;
	if (rev || rnd) {
		border.resize(nblk);
		for (size_t i = 0; i < nblk; i++)
			border[i] = rev ? nblk - 1 - i : i;
		if (rnd)
			std::shuffle(border.begin(), border.end(), rng);
		if (rev)
			std::reverse(order.begin(), order.end());
	}
	dsm_close(); /* a launch that faulted left its own */
	if (!dsm_open(sm))
		kernel_fault(cudaErrorLaunchOutOfResources, "no memory for %zu bytes of dynamic shared memory", sm);
	in_kernel = true;
	for (size_t k = 0; k < nblk; k++) {
		size_t bi = border.empty() ? k : border[k];
		blockIdx.x = (unsigned)(bi % g.x);
		blockIdx.y = (unsigned)(bi / g.x % g.y);
		blockIdx.z = (unsigned)(bi / ((size_t)g.x * g.y));
		memset(dsm_ptr, 0xFF, sm); /* uninitialised shared memory reads as NaN */
		smem_seen.clear();
		if (rnd)
			std::shuffle(order.begin(), order.end(), rng);
		run_block(order);
	}
	dsm_close();
	in_kernel = false;
	op_name = nullptr;
}

/* a kernel's pointer argument that is neither null nor in device or pinned memory (a
 * freed allocation counts as device memory: its use faults by itself) */
static int host_pointer_arg(const std::vector<const void *> &ptrs)
{
	for (size_t i = 0; i < ptrs.size(); i++) {
		if (!ptrs[i])
			continue;
		uintptr_t s;
		if (!find_alloc((uintptr_t)ptrs[i], &s))
			return (int)i;
	}
	return -1;
}

static void config_from_env(void);

void Launch::submit(const char *name, const void *fn, std::function<void()> body_fn, std::vector<const void *> ptrs)
{
	LOCK;
	config_from_env();
	if (sticky != cudaSuccess) {
		ret(sticky);
		return;
	}
	unsigned long nt = (unsigned long)b.x * b.y * b.z;
	int lim = SMEM_DEFAULT;
	auto it = smem_attr.find(fn);
	if (it != smem_attr.end())
		lim = it->second;
	const char *bad = nullptr;
	if (nt == 0 || nt > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64)
		bad = "block dimensions";
	else if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 || g.z > 65535)
		bad = "grid dimensions";
	if (bad) {
		note("%s:%d: launch of %s: invalid %s (grid %u,%u,%u, block %u,%u,%u)", file, line, name, bad, g.x, g.y, g.z,
		     b.x, b.y, b.z);
		ret(cudaErrorInvalidConfiguration);
		return;
	}
	if (sm > (size_t)lim) {
		note("%s:%d: launch of %s: %zu bytes of dynamic shared memory, over the function's limit of %d", file, line,
		     name, sm, lim);
		ret(cudaErrorInvalidValue);
		return;
	}
	std::string nm = name;
	dim3 g0 = g, b0 = b;
	size_t sm0 = sm;
	auto bf = std::make_shared<std::function<void()>>(std::move(body_fn));
	int hp = host_pointer_arg(ptrs);
	if (hp >= 0) { /* faults when it runs, as the kernel's first touch of it would on a GPU */
		char msg[300];
		snprintf(msg, sizeof msg, "%s:%d: argument %d of %s is a host pointer (%p), not device or pinned memory",
			 file, line, hp + 1, name, ptrs[hp]);
		std::string m = msg;
		enqueue(st, [nm, m]() {
			op_name = nm.c_str();
			fault_msg = m;
			siglongjmp(op_jmp, (int)cudaErrorIllegalAddress);
		});
		return;
	}
	enqueue(st, [nm, g0, b0, sm0, bf]() { run_kernel(nm.c_str(), g0, b0, sm0, *bf); });
}

cudaError_t func_set_attribute(const void *fn, cudaFuncAttribute attr, int value)
{
	LOCK;
	if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > smem_optin)
		return ret(cudaErrorInvalidValue);
	smem_attr[fn] = value;
	return cudaSuccess;
}

static void config_from_env(void)
{
	static bool done;
	if (done)
		return;
	done = true;
	init_once();
	const char *s = getenv("CUDAEMU_SCHEDULE");
	if (s && *s) {
		sched_mode = s;
		const char *c = strchr(s, ':');
		rng.seed(c ? strtoull(c + 1, nullptr, 10) : 1);
		if (sched_mode != "forward" && sched_mode != "reverse" && sched_mode.compare(0, 6, "random")) {
			note("CUDAEMU_SCHEDULE=%s: not forward, reverse or random[:SEED]; forward used", s);
			sched_mode = "forward";
		}
	}
	const char *o = getenv("CUDAEMU_SMEM_OPTIN");
	if (o && *o)
		smem_optin = atoi(o);
	const char *m = getenv("CUDAEMU_SMS");
	if (m && *m)
		sm_count = atoi(m);
	const char *f = getenv("CUDAEMU_FAULT");
	if (f && *f)
		inject_from_env(f);
}

} // namespace cudaemu

using namespace cudaemu;

/* ---------------------------------------------------------------- the runtime API */

const char *cudaGetErrorName(cudaError_t e)
{
	switch (e) {
#define N(x)                                                                                                       \
	case x:                                                                                                    \
		return #x;
		N(cudaSuccess) N(cudaErrorInvalidValue) N(cudaErrorMemoryAllocation) N(cudaErrorInitializationError)
		N(cudaErrorInvalidConfiguration) N(cudaErrorInvalidDevicePointer) N(cudaErrorInvalidMemcpyDirection)
		N(cudaErrorDevicesUnavailable) N(cudaErrorNoDevice) N(cudaErrorInvalidDevice) N(cudaErrorECCUncorrectable)
		N(cudaErrorInvalidResourceHandle) N(cudaErrorNotReady) N(cudaErrorIllegalAddress)
		N(cudaErrorLaunchOutOfResources) N(cudaErrorLaunchTimeout) N(cudaErrorContextIsDestroyed)
		N(cudaErrorHardwareStackError) N(cudaErrorIllegalInstruction) N(cudaErrorMisalignedAddress)
		N(cudaErrorInvalidAddressSpace) N(cudaErrorInvalidPc) N(cudaErrorLaunchFailure) N(cudaErrorNotSupported)
		N(cudaErrorStreamCaptureUnsupported) N(cudaErrorStreamCaptureInvalidated)
		N(cudaErrorStreamCaptureWrongThread) N(cudaErrorUnknown)
#undef N
	}
	return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
	switch (e) {
	case cudaSuccess:
		return "no error";
	case cudaErrorInvalidValue:
		return "invalid argument";
	case cudaErrorMemoryAllocation:
		return "out of memory";
	case cudaErrorInvalidConfiguration:
		return "invalid configuration argument";
	case cudaErrorIllegalAddress:
		return "an illegal memory access was encountered";
	case cudaErrorIllegalInstruction:
		return "an illegal instruction was encountered";
	case cudaErrorLaunchTimeout:
		return "the launch timed out and was terminated";
	case cudaErrorStreamCaptureUnsupported:
		return "operation not permitted when stream is capturing";
	case cudaErrorStreamCaptureInvalidated:
		return "operation failed due to a previous error during capture";
	default:
		return cudaGetErrorName(e);
	}
}

cudaError_t cudaGetLastError(void)
{
	LOCK;
	cudaError_t e = last_err;
	last_err = cudaSuccess;
	return sticky != cudaSuccess ? sticky : e;
}

cudaError_t cudaPeekAtLastError(void)
{
	LOCK;
	return sticky != cudaSuccess ? sticky : last_err;
}

cudaError_t cudaGetDeviceCount(int *n)
{
	LOCK;
	config_from_env();
	const char *e = getenv("CUDAEMU_DEVICES");
	*n = e && *e ? atoi(e) : 1;
	return *n > 0 ? cudaSuccess : ret(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int dev)
{
	int n = 0;
	cudaGetDeviceCount(&n);
	return dev >= 0 && dev < n ? cudaSuccess : ret(cudaErrorInvalidDevice);
}

cudaError_t cudaSetDeviceFlags(unsigned) { return cudaSuccess; }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev)
{
	LOCK;
	config_from_env();
	if (cudaSetDevice(dev) != cudaSuccess)
		return ret(cudaErrorInvalidDevice);
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "cudaemu (host emulation, H100 limits)");
	p->totalGlobalMem = (size_t)80 << 30;
	p->sharedMemPerBlock = 48 << 10;
	p->sharedMemPerBlockOptin = (size_t)smem_optin;
	p->regsPerBlock = 65536;
	p->warpSize = 32;
	p->maxThreadsPerBlock = 1024;
	p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
	p->maxThreadsDim[2] = 64;
	p->maxGridSize[0] = 2147483647;
	p->maxGridSize[1] = p->maxGridSize[2] = 65535;
	p->major = 9;
	p->minor = 0;
	p->multiProcessorCount = sm_count;
	p->canMapHostMemory = 1;
	return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
	*v = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int)
{
	static int dummy;
	*pool = (cudaMemPool_t)&dummy;
	return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void *) { return cudaSuccess; }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned)
{
	LOCK;
	config_from_env();
	*st = new CUstream_st;
	streams.push_back(*st);
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t st)
{
	LOCK;
	if (!st)
		return ret(cudaErrorInvalidResourceHandle);
	flush(st); /* the work queued still runs (as the runtime completes it) */
	streams.erase(std::remove(streams.begin(), streams.end(), st), streams.end());
	delete st;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
	LOCK;
	CUstream_st *s = S(st);
	if (s->capturing)
		return capture_refuse(s);
	flush(s);
	return ret(sticky);
}

/* waits for the work of every stream of the device (cudaFree too, which synchronises
 * the device): the legacy stream's, then each stream's in the order they were created */
cudaError_t cudaDeviceSynchronize(void)
{
	LOCK;
	flush(&legacy_stream);
	for (CUstream_st *s : streams)
		flush(s);
	return ret(sticky);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned)
{
	*ev = new CUevent_st;
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
	delete ev;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t st)
{
	LOCK;
	CUstream_st *s = S(st);
	if (s->capturing) { /* an event node: nothing to wait for when replayed here */
		s->cap.push_back([]() {});
		return cudaSuccess;
	}
	ev->st = s;
	ev->target = s->queued;
	return ret(sticky);
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
	LOCK;
	if (ev->st) {
		if (ev->st->capturing)
			return capture_refuse(ev->st);
		flush(ev->st, ev->target);
	}
	return ret(sticky);
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
	LOCK;
	init_once();
	if (sticky != cudaSuccess)
		return ret(sticky);
	*p = bytes ? map_alloc(bytes, true) : nullptr;
	return bytes && !*p ? ret(cudaErrorMemoryAllocation) : cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
	LOCK;
	cudaDeviceSynchronize();
	if (p)
		free_alloc(p, true);
	return ret(sticky);
}

cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t st)
{
	LOCK;
	if (S(st)->capturing) /* the backend never allocates while recording; no allocation nodes here */
		return capture_refuse(S(st));
	return cudaMalloc(p, bytes);
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t st)
{
	LOCK;
	if (S(st)->capturing)
		return capture_refuse(S(st));
	if (!p)
		return cudaSuccess;
	uintptr_t s;
	Alloc *a = find_alloc((uintptr_t)p, &s);
	if (!a || !a->device || a->freed || s != (uintptr_t)p)
		return ret(cudaErrorInvalidValue);
	if (sticky != cudaSuccess) { /* nothing runs any more: free now */
		free_alloc(p, true);
		return ret(sticky);
	}
	/* stream-ordered: freed once the work queued before it has run */
	return enqueue(st, [p]() { free_alloc(p, true); });
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned)
{
	LOCK;
	init_once();
	*p = map_alloc(bytes ? bytes : 1, false);
	return *p ? cudaSuccess : ret(cudaErrorMemoryAllocation);
}

cudaError_t cudaFreeHost(void *p)
{
	LOCK;
	if (p)
		free_alloc(p, false);
	return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned)
{
	LOCK;
	if (!is_pinned(h, 1))
		return ret(cudaErrorInvalidValue);
	*d = h;
	return cudaSuccess;
}

/* is [p, p+n) inside one live device allocation */
static bool dev_range(const void *p, size_t n)
{
	uintptr_t s;
	Alloc *a = find_alloc((uintptr_t)p, &s);
	return a && a->device && !a->freed && (uintptr_t)p >= s && (uintptr_t)p + n <= s + a->size;
}

static cudaError_t copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
			  cudaMemcpyKind kind, cudaStream_t st, const char *what)
{
	LOCK;
	init_once();
	CUstream_st *s = S(st);
	if (sticky != cudaSuccess)
		return ret(sticky);
	if (width == 0 || height == 0)
		return cudaSuccess;
	if (dpitch < width || spitch < width)
		return ret(cudaErrorInvalidValue);
	size_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
	bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
	bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
	if (kind == cudaMemcpyDefault || kind == cudaMemcpyHostToHost) {
		note("%s: kind %d is not one lib/cuda uses", what, (int)kind);
		return ret(cudaErrorInvalidMemcpyDirection);
	}
	/* the runtime checks the pointers it knows (unified addressing) */
	if ((dst_dev && !dev_range(dst, dspan)) || (src_dev && !dev_range(src, sspan)) ||
	    (!dst_dev && dev_range(dst, 1)) || (!src_dev && dev_range(src, 1))) {
		note("%s: a pointer is not of the kind %d names, or the span runs past its allocation (dst %p, %zu bytes; src %p, %zu bytes)",
		     what, (int)kind, dst, dspan, src, sspan);
		return ret(cudaErrorInvalidValue);
	}
	std::string nm = what;
	auto op = [=](const unsigned char *from) {
		op_name = nm.c_str();
		for (size_t r = 0; r < height; r++)
			memcpy((char *)dst + r * dpitch, from + r * spitch, width);
		op_name = nullptr;
	};
	if (!src_dev && !is_pinned(src, sspan)) { /* pageable source: taken now (staged) */
		if (s->capturing)
			return capture_refuse(s);
		auto snap = std::make_shared<std::vector<unsigned char>>((const unsigned char *)src,
									  (const unsigned char *)src + sspan);
		return enqueue(st, [op, snap]() { op(snap->data()); });
	}
	if (!dst_dev && !is_pinned(dst, dspan)) { /* pageable destination: the call returns when done */
		if (s->capturing)
			return capture_refuse(s);
		cudaError_t e = enqueue(st, [op, src]() { op((const unsigned char *)src); });
		if (e != cudaSuccess)
			return e;
		flush(s);
		return ret(sticky);
	}
	return enqueue(st, [op, src]() { op((const unsigned char *)src); });
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t st)
{
	return copy2d(dst, bytes, src, bytes, bytes, 1, kind, st, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
	LOCK;
	cudaError_t e = copy2d(dst, bytes, src, bytes, bytes, 1, kind, nullptr, "cudaMemcpy");
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	return e;
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
			      cudaMemcpyKind kind, cudaStream_t st)
{
	return copy2d(dst, dpitch, src, spitch, width, height, kind, st, "cudaMemcpy2DAsync");
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t st)
{
	LOCK;
	init_once();
	if (sticky != cudaSuccess)
		return ret(sticky);
	if (!bytes)
		return cudaSuccess;
	if (!dev_range(p, bytes)) {
		note("cudaMemsetAsync: %p + %zu bytes is not inside one device allocation", p, bytes);
		return ret(cudaErrorInvalidValue);
	}
	return enqueue(st, [p, value, bytes]() {
		op_name = "cudaMemsetAsync";
		memset(p, value, bytes);
		op_name = nullptr;
	});
}

cudaError_t cudaStreamBeginCapture(cudaStream_t st, cudaStreamCaptureMode)
{
	LOCK;
	CUstream_st *s = S(st);
	if (!st || s->capturing)
		return ret(cudaErrorInvalidValue);
	if (sticky != cudaSuccess)
		return ret(sticky);
	s->capturing = true;
	s->cap_invalid = false;
	s->cap.clear();
	return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g)
{
	LOCK;
	CUstream_st *s = S(st);
	*g = nullptr;
	if (!s->capturing)
		return ret(cudaErrorInvalidValue);
	s->capturing = false;
	if (s->cap_invalid) {
		s->cap.clear();
		return ret(cudaErrorStreamCaptureInvalidated);
	}
	CUgraph_st *gr = new CUgraph_st;
	gr->ops.swap(s->cap);
	*g = gr;
	return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long)
{
	LOCK;
	if (!g)
		return ret(cudaErrorInvalidValue);
	*x = new CUgraphExec_st;
	(*x)->ops = g->ops;
	return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
	delete g;
	return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t st)
{
	LOCK;
	if (!x)
		return ret(cudaErrorInvalidValue);
	for (auto &f : x->ops) {
		cudaError_t e = enqueue(st, f);
		if (e != cudaSuccess)
			return e;
	}
	return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
	delete x; /* queued replays hold their own copies of the operations */
	return cudaSuccess;
}

/* ---------------------------------------------------------------- cuBLAS */

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
	*h = new cublasContext;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
	delete h;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t st)
{
	h->st = st;
	return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t) { return CUBLAS_STATUS_SUCCESS; }

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
	h->math = (int)mode; /* TF32 is not emulated: products stay fp32 */
	return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t blas_enqueue(cublasHandle_t h, std::function<void()> f)
{
	LOCK;
	cudaError_t e = enqueue(h->st, std::move(f));
	if (e == cudaSuccess)
		return CUBLAS_STATUS_SUCCESS;
	return e == cudaErrorStreamCaptureUnsupported ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_EXECUTION_FAILED;
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
			   const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
			   float *C, int ldc)
{
	int ar = ta == CUBLAS_OP_N ? m : k, br = tb == CUBLAS_OP_N ? k : n;
	if (m < 0 || n < 0 || k < 0 || lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) || ldc < (m > 1 ? m : 1))
		return CUBLAS_STATUS_INVALID_VALUE;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	float al = *alpha, be = *beta;
	return blas_enqueue(h, [=]() {
		op_name = "cublasSgemm";
		if (be == 0.0f) /* cuBLAS does not read C when beta is 0 (it may hold NaN) */
			for (int j = 0; j < n; j++)
				memset(C + (size_t)j * ldc, 0, (size_t)m * sizeof(float));
		cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
			    tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, k, al, A, lda, B, ldb, be == 0.0f ? 1.0f : be,
			    C, ldc);
		op_name = nullptr;
	});
}

cublasStatus_t cublasSgemv(cublasHandle_t h, cublasOperation_t t, int m, int n, const float *alpha, const float *A,
			   int lda, const float *x, int incx, const float *beta, float *y, int incy)
{
	if (m < 0 || n < 0 || lda < (m > 1 ? m : 1) || incx == 0 || incy == 0)
		return CUBLAS_STATUS_INVALID_VALUE;
	if (m == 0 || n == 0)
		return CUBLAS_STATUS_SUCCESS;
	float al = *alpha, be = *beta;
	int ylen = t == CUBLAS_OP_N ? m : n;
	return blas_enqueue(h, [=]() {
		op_name = "cublasSgemv";
		if (be == 0.0f)
			for (int i = 0; i < ylen; i++)
				y[(size_t)i * (incy > 0 ? incy : -incy)] = 0.0f;
		cblas_sgemv(CblasColMajor, t == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, m, n, al, A, lda, x, incx,
			    be == 0.0f ? 1.0f : be, y, incy);
		op_name = nullptr;
	});
}
