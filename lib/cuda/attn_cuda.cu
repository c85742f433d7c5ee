/* attn_cuda.cu — attention on the GPU, fused per (sample, head) block: one
 * thread block loads the block's q, k, v (T x hd) into shared memory, forms the
 * scores, normalises each row on a half-warp (norm_rows.cuh), and mixes the
 * values; the backward does dP = dO V^T, dV = P^T dO, the normaliser's exact
 * backward per row, dQ = dS K, dK = dS^T Q in the same way.
 *
 * Sums follow the CPU backend's order (backend_cpu_attn.c) where it has one
 * order: score dot products as an fma chain over the head dimension; d loss/d
 * alpha summed over rows in order per block, then over samples in order per
 * head. Products with a probability (or its gradient), mix_sum below, take the
 * nonzero entries in column order with two alternating accumulators (head dims
 * that are multiples of 16; one fma chain over all entries otherwise): the CPU's
 * order for sparse rows, but not for dense ones (the CPU's rowmix runs blocks of
 * 4 rows more than half nonzero, e.g. softmax, with one fma chain), nor for dV
 * and dK (the CPU's GEMM). So S (and P, given the same scores; docs/cuda.md says
 * when) are the CPU's bits; out, dQ of dense rows, dV and dK agree within
 * rounding, not bit for bit (docs/cuda.md "Which results are the CPU's bits").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "norm_rows.cuh"

struct QkScale {
	float div, mul;
	int exact;
};

static QkScale qk_scale_of(int hd)
{
	QkScale s;
	double r = sqrt((double)hd);
	s.div = (float)r;
	s.mul = 1.0f / s.div;
	int e;
	s.exact = frexp(r, &e) == 0.5;
	return s;
}

struct AttnArgs {
	int B, T, d, NH, hd, hs, ss;
	int fast; /* hd % 16 == 0: the CPU's nonzero-list products */
	QkScale sc;
	NormP nm;
	float nm_alpha;
	int want_alpha;
	int *dflag;
};

__device__ inline float scale_score(float s, const QkScale &sc) { return sc.exact ? s * sc.mul : s / sc.div; }

__device__ inline void flag_error(int *dflag, int code, int a, int b, int c)
{
	if (atomicCAS(dflag, 0, code) == 0) {
		dflag[1] = a;
		dflag[2] = b;
		dflag[3] = c;
	}
}

/* o = sum_j a(j) y(j) over j < T: the CPU's rowmix (fast) or rowmix_plain */
template <class A, class Y> __device__ inline float mix_sum(int T, int fast, A a, Y y)
{
	if (fast) {
		float acc0 = 0.0f, acc1 = 0.0f;
		int q = 0;
		for (int j = 0; j < T; j++) {
			float aj = a(j);
			if (aj != 0.0f) {
				if (q & 1)
					acc1 = fmaf(aj, y(j), acc1);
				else
					acc0 = fmaf(aj, y(j), acc0);
				q++;
			}
		}
		return acc0 + acc1;
	}
	float s = 0.0f;
	for (int j = 0; j < T; j++)
		s = fmaf(a(j), y(j), s);
	return s;
}

/* The kernels come in two layouts, the same arithmetic in the same order:
 *   GL = false: the block's q, k, v (and dO) and its score rows live in shared memory
 *               (rows of stride ss = 16 mod 32); T <= 256 and what fits the device;
 *   GL = true:  q, k, v and dO are read in place from global memory, the score rows are
 *               the S / P outputs themselves (stride T), and the backward's dP rows a
 *               global scratch slot per resident block: any T up to 512, for rows that
 *               do not fit shared memory (T = 200 with hd = 32 needs 245600 bytes).
 * N: elements per lane of a row (a row of 16 N >= T keys on a half-warp). */
template <int N, bool GL>
__global__ void __launch_bounds__(256) k_attn_fwd(float *out, float *S, float *P, float *aux, const float *qkv,
						  const int32_t *nvalid, const float *alpha, AttnArgs a)
{
	extern __shared__ float sm[];
	const int T = a.T, hd = a.hd, d = a.d, d3 = 3 * d;
	const int blk = blockIdx.x, b = blk / a.NH, h = blk % a.NH;
	const size_t TT = (size_t)T * T;
	float *Sb = S + blk * TT, *Pb = P + blk * TT;
	int nv = nvalid ? nvalid[b] : T;
	if (nv < 1 || nv > T) {
		if (threadIdx.x == 0)
			flag_error(a.dflag, DFLAG_NVALID, b, 0, nv);
		return;
	}
	const float *q, *k, *v;
	float *Ps; /* scores, then probabilities: row i at Ps + i * ss */
	int qs, ss;
	if (GL) {
		q = qkv + (size_t)b * T * d3 + (size_t)h * hd;
		k = q + d;
		v = q + 2 * d;
		qs = d3;
		Ps = Pb;
		ss = T;
	} else {
		const int hs = a.hs;
		float *qq = sm, *kk = qq + T * hs, *vv = kk + T * hs;
		for (int e = threadIdx.x; e < T * hd; e += blockDim.x) {
			int t = e / hd, c = e % hd;
			size_t base = ((size_t)b * T + t) * d3 + (size_t)h * hd + c;
			qq[t * hs + c] = qkv[base];
			kk[t * hs + c] = qkv[base + d];
			vv[t * hs + c] = qkv[base + 2 * d];
		}
		q = qq;
		k = kk;
		v = vv;
		qs = hs;
		Ps = vv + T * hs;
		ss = a.ss;
		__syncthreads();
	}
	for (int e = threadIdx.x; e < T * T; e += blockDim.x) {
		int i = e / T, j = e % T;
		float s = 0.0f;
		for (int c = 0; c < hd; c++)
			s = fmaf(q[i * qs + c], k[j * qs + c], s);
		s = scale_score(s, a.sc);
		Sb[e] = s;
		if (!GL)
			Ps[i * ss + j] = s;
	}
	__syncthreads();
	const float *Srow = GL ? Sb : Ps; /* the row the normaliser reads (stride ss) */
	float al = alpha ? alpha[h] : a.nm_alpha;
	Grp G = grp_here();
	for (int r = threadIdx.x >> 4; r < T; r += 16) {
		Row<N> p;
		float ax[4];
		int rc = nr_forward<N>(G, a.nm, p, ax, Srow + (size_t)r * ss, T, nv, al);
		__syncwarp(G.mask);
		if (rc) {
			if (G.lane == 0)
				flag_error(a.dflag, DFLAG_NO_FINITE, blk, r, 0);
			continue;
		}
		KLOOP for (int kk = 0; kk < N; kk++)
		{
			int j = G.lane + 16 * kk;
			if (j < T) {
				if (!GL)
					Ps[r * ss + j] = p.at(G.lane, kk);
				Pb[(size_t)r * T + j] = p.at(G.lane, kk);
			}
		}
		if (G.lane < 4)
			aux[((size_t)blk * T + r) * 4 + G.lane] = G.lane == 0 ? ax[0] : G.lane == 1 ? ax[1] : G.lane == 2 ? ax[2] : ax[3];
	}
	__syncthreads();
	for (int e = threadIdx.x; e < T * hd; e += blockDim.x) {
		int i = e / hd, c = e % hd;
		const float *pr = Ps + (size_t)i * ss;
		float o = mix_sum(
			T, a.fast, [&](int j) { return pr[j]; }, [&](int j) { return v[(size_t)j * qs + c]; });
		out[((size_t)b * T + i) * d + (size_t)h * hd + c] = o;
	}
}

/* GL: a persistent grid (blocks loop over the (sample, head) pairs) so that the dP
 * scratch is one slot of T x T per resident block, not per pair. */
template <int N, bool GL>
__global__ void __launch_bounds__(256)
	k_attn_bwd(float *dqkv, double *dablk, float *dPscr, const float *dout, const float *qkv, const float *S,
		   const float *P, const float *aux, const int32_t *nvalid, const float *alpha, AttnArgs a)
{
	extern __shared__ float sm[];
	const int T = a.T, hd = a.hd, d = a.d, d3 = 3 * d;
	const size_t TT = (size_t)T * T;
	double *rowda = (double *)sm;
	const int nblk = a.B * a.NH;
	for (int blk = blockIdx.x; blk < nblk; blk += GL ? gridDim.x : nblk) {
		const int b = blk / a.NH, h = blk % a.NH;
		int nv = nvalid ? nvalid[b] : T;
		if (nv < 1 || nv > T) {
			if (threadIdx.x == 0)
				flag_error(a.dflag, DFLAG_NVALID, b, 0, nv);
			continue; /* uniform over the block */
		}
		const float *Sb = S + blk * TT, *Pb = P + blk * TT;
		const float *q, *k, *v, *go, *Ps;
		float *dP;
		int qs, gs, ss;
		if (GL) {
			q = qkv + (size_t)b * T * d3 + (size_t)h * hd;
			k = q + d;
			v = q + 2 * d;
			go = dout + (size_t)b * T * d + (size_t)h * hd;
			qs = d3;
			gs = d;
			Ps = Pb;
			dP = dPscr + (size_t)blockIdx.x * TT;
			ss = T;
		} else {
			const int hs = a.hs;
			float *qq = (float *)(rowda + ((T + 1) & ~1)), *kk = qq + T * hs, *vv = kk + T * hs, *gg = vv + T * hs;
			float *pp = gg + T * hs;
			ss = a.ss;
			dP = pp + T * ss;
			for (int e = threadIdx.x; e < T * hd; e += blockDim.x) {
				int t = e / hd, c = e % hd;
				size_t base = ((size_t)b * T + t) * d3 + (size_t)h * hd + c;
				qq[t * hs + c] = qkv[base];
				kk[t * hs + c] = qkv[base + d];
				vv[t * hs + c] = qkv[base + 2 * d];
				gg[t * hs + c] = dout[((size_t)b * T + t) * d + (size_t)h * hd + c];
			}
			for (int e = threadIdx.x; e < T * T; e += blockDim.x)
				pp[(e / T) * ss + e % T] = Pb[e];
			q = qq;
			k = kk;
			v = vv;
			go = gg;
			Ps = pp;
			qs = gs = hs;
			__syncthreads();
		}
		/* dP = dO V^T */
		for (int e = threadIdx.x; e < T * T; e += blockDim.x) {
			int i = e / T, j = e % T;
			float s = 0.0f;
			for (int c = 0; c < hd; c++)
				s = fmaf(go[(size_t)i * gs + c], v[(size_t)j * qs + c], s);
			dP[(size_t)i * ss + j] = s;
		}
		/* dV = P^T dO */
		for (int e = threadIdx.x; e < T * hd; e += blockDim.x) {
			int i = e / hd, c = e % hd;
			float o = mix_sum(
				T, a.fast, [&](int j) { return Ps[(size_t)j * ss + i]; },
				[&](int j) { return go[(size_t)j * gs + c]; });
			dqkv[((size_t)b * T + i) * d3 + 2 * (size_t)d + (size_t)h * hd + c] = o;
		}
		__syncthreads();
		float al = alpha ? alpha[h] : a.nm_alpha;
		int want = a.want_alpha && !(al < 1.05f) && !(al > 2.0f);
		Grp G = grp_here();
		for (int r = threadIdx.x >> 4; r < T; r += 16) {
			Row<N> p, g;
			KLOOP for (int kk = 0; kk < N; kk++)
			{
				int j = G.lane + 16 * kk;
				p.at(G.lane, kk) = j < T ? Ps[(size_t)r * ss + j] : 0.0f;
				g.at(G.lane, kk) = j < T ? dP[(size_t)r * ss + j] : 0.0f;
			}
			float tau = aux[((size_t)blk * T + r) * 4];
			double da = nr_backward<N>(G, a.nm, g, Sb + (size_t)r * T, p, g, tau, T, nv, al, want);
			__syncwarp(G.mask);
			KLOOP for (int kk = 0; kk < N; kk++)
			{
				int j = G.lane + 16 * kk;
				if (j < T)
					dP[(size_t)r * ss + j] = scale_score(g.at(G.lane, kk), a.sc);
			}
			if (G.lane == 0)
				rowda[r] = da;
		}
		__syncthreads();
		/* dQ = dS K, dK = dS^T Q */
		for (int e = threadIdx.x; e < T * hd; e += blockDim.x) {
			int i = e / hd, c = e % hd;
			size_t o = ((size_t)b * T + i) * d3 + (size_t)h * hd + c;
			dqkv[o] = mix_sum(
				T, a.fast, [&](int j) { return dP[(size_t)i * ss + j]; },
				[&](int j) { return k[(size_t)j * qs + c]; });
			dqkv[o + d] = mix_sum(
				T, a.fast, [&](int j) { return dP[(size_t)j * ss + i]; },
				[&](int j) { return q[(size_t)j * qs + c]; });
		}
		if (dablk && threadIdx.x == 0) {
			double s = 0;
			for (int r = 0; r < T; r++)
				s += rowda[r];
			dablk[blk] = s;
		}
		__syncthreads(); /* the next pair reuses rowda, dP and the shared rows */
	}
}

/* dalpha[h] += (float)da[b, h] over b in order (the CPU's order) */
__global__ void k_dalpha(float *dalpha, const double *dablk, int B, int NH)
{
	int h = blockIdx.x * blockDim.x + threadIdx.x;
	if (h >= NH)
		return;
	float v = dalpha[h];
	for (int b = 0; b < B; b++)
		v += (float)dablk[(size_t)b * NH + h];
	dalpha[h] = v;
}

#define SB_ATTN_MAX_T 512

/* lanes per row for a row of T keys: shared-memory kernels (T <= 256), global ones */
static int rows_n(int T)
{
	return T <= 16 ? 1 : T <= 32 ? 2 : T <= 64 ? 4 : T <= 80 ? 5 : T <= 112 ? 7 : T <= 128 ? 8 : T <= 256 ? 16 : 0;
}
static int rows_n_gl(int T) { return T <= 128 ? 8 : T <= 256 ? 16 : T <= SB_ATTN_MAX_T ? 32 : 0; }

static int setup(struct sb_ctx *ctx, AttnArgs *a, const struct sb_norm *nm, int B, int T, int d, int NH,
		 struct sb_err *err)
{
	a->B = B;
	a->T = T;
	a->d = d;
	a->NH = NH;
	a->hd = NH > 0 ? d / NH : 0;
	a->hs = a->hd + 1;
	a->ss = ((T + 16 + 31) / 32) * 32 - 16; /* = 16 mod 32: two half-warps' rows in different banks */
	if (a->ss < T)
		a->ss += 32;
	a->fast = a->hd % 16 == 0;
	a->sc = qk_scale_of(a->hd > 0 ? a->hd : 1);
	a->nm.kind = (int)nm->kind;
	a->nm.margin = nm->mask == SB_MASK_MARGIN;
	a->nm.unrolled = nm->unrolled;
	a->nm.ratio = nm->ratio;
	a->nm_alpha = (float)nm->alpha;
	a->want_alpha = 0;
	a->dflag = ctx->im->dflag_dev;
	/* what this backend cannot do is the caller's problem, not the device's: not sticky */
	if (NH < 1 || d % NH)
		return sb_cuda_refuse(ctx->im, err, SB_EDATA, __FILE__, __LINE__,
				      "attention: d = %d is not a multiple of the %d heads", d, NH);
	if (T < 1 || T > SB_ATTN_MAX_T)
		return sb_cuda_refuse(ctx->im, err, SB_EDATA, __FILE__, __LINE__,
				      "attention: rows of T = %d keys (the CUDA backend does 1..%d)", T, SB_ATTN_MAX_T);
	return 0;
}

static size_t fwd_smem(const AttnArgs &a) { return (3 * (size_t)a.T * a.hs + (size_t)a.T * a.ss) * sizeof(float); }
static size_t bwd_smem(const AttnArgs &a)
{
	return (size_t)((a.T + 1) & ~1) * sizeof(double) + (4 * (size_t)a.T * a.hs + 2 * (size_t)a.T * a.ss) * sizeof(float);
}
static size_t gl_smem(const AttnArgs &a) { return (size_t)((a.T + 1) & ~1) * sizeof(double) + 16; }

/* the shared-memory layout when it fits the device (its opt-in limit, read at open) */
static int use_shared_fwd(const struct cuda_impl *im, const AttnArgs &a)
{
	return rows_n(a.T) && (long)fwd_smem(a) <= im->max_smem;
}
static int use_shared_bwd(const struct cuda_impl *im, const AttnArgs &a)
{
	return rows_n(a.T) && (long)bwd_smem(a) <= im->max_smem;
}

#define DISPATCH_N(T, MACRO)                                                                                       \
	switch (rows_n(T)) {                                                                                       \
	case 1:                                                                                                    \
		MACRO(1, false);                                                                                   \
		break;                                                                                             \
	case 2:                                                                                                    \
		MACRO(2, false);                                                                                   \
		break;                                                                                             \
	case 4:                                                                                                    \
		MACRO(4, false);                                                                                   \
		break;                                                                                             \
	case 5:                                                                                                    \
		MACRO(5, false);                                                                                   \
		break;                                                                                             \
	case 7:                                                                                                    \
		MACRO(7, false);                                                                                   \
		break;                                                                                             \
	case 8:                                                                                                    \
		MACRO(8, false);                                                                                   \
		break;                                                                                             \
	default:                                                                                                   \
		MACRO(16, false);                                                                                  \
		break;                                                                                             \
	}
#define DISPATCH_GL(T, MACRO)                                                                                      \
	switch (rows_n_gl(T)) {                                                                                    \
	case 8:                                                                                                    \
		MACRO(8, true);                                                                                    \
		break;                                                                                             \
	case 16:                                                                                                   \
		MACRO(16, true);                                                                                   \
		break;                                                                                             \
	default:                                                                                                   \
		MACRO(32, true);                                                                                   \
		break;                                                                                             \
	}

/* Raise the dynamic shared-memory limit of every shared-layout kernel to the device's
 * opt-in maximum once at open (a recorded step must not change function attributes). */
int sb_cuda_attention_init(struct cuda_impl *im, struct sb_err *err)
{
	int mx = im->max_smem;
	if (mx <= 48 * 1024)
		return 0;
#define SETA(NN, GLL)                                                                                              \
	do {                                                                                                       \
		CU_RET(im, err, cudaFuncSetAttribute(k_attn_fwd<NN, GLL>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx)); \
		CU_RET(im, err, cudaFuncSetAttribute(k_attn_bwd<NN, GLL>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx)); \
	} while (0)
	SETA(1, false);
	SETA(2, false);
	SETA(4, false);
	SETA(5, false);
	SETA(7, false);
	SETA(8, false);
	SETA(16, false);
#undef SETA
	return 0;
}

int sb_cuda_attention_forward(struct sb_ctx *ctx, float *out, float *S, float *P, float *aux, const float *qkv,
			      const int32_t *nvalid, const float *alpha, const struct sb_norm *nm, int B, int T, int d,
			      int NH, struct sb_err *err)
{
	SB_TRY(sb_cuda_sticky(ctx->im, err));
	if (B <= 0)
		return 0;
	AttnArgs a;
	SB_TRY(setup(ctx, &a, nm, B, T, d, NH, err));
#define FWD(NN, GLL)                                                                                               \
	k_attn_fwd<NN, GLL><<<B * NH, 256, sm, ctx->st>>>(out, S, P, aux, qkv, nvalid, alpha, a)
	if (use_shared_fwd(ctx->im, a)) {
		size_t sm = fwd_smem(a);
		DISPATCH_N(T, FWD)
	} else {
		size_t sm = 0;
		DISPATCH_GL(T, FWD)
	}
#undef FWD
	LAUNCHED(ctx->im, "attention_forward");
	return sb_cuda_sticky(ctx->im, err);
}

void sb_cuda_attention_backward(struct sb_ctx *ctx, float *dqkv, float *dalpha, const float *dout, const float *qkv,
				const float *S, const float *P, const float *aux, const int32_t *nvalid,
				const float *alpha, const struct sb_norm *nm, int B, int T, int d, int NH)
{
	struct cuda_impl *im = ctx->im;
	if (im->failed || B <= 0)
		return;
	AttnArgs a;
	if (setup(ctx, &a, nm, B, T, d, NH, NULL))
		return;
	int has_alpha = nm->kind == SB_NORM_ADAPTIVE || nm->kind == SB_NORM_ENTMAX_BISECT;
	int shared = use_shared_bwd(im, a);
	int nblk = B * NH, grid = nblk;
	size_t TT = (size_t)T * T, off_dp = 0, need = 0;
	if (dalpha && has_alpha) {
		need = ((size_t)nblk * sizeof(double) + 255) & ~(size_t)255;
		a.want_alpha = 1;
	}
	if (!shared) { /* one dP slot per resident block: at most 8 per SM, within 512 MiB */
		int cap = im->sm_count > 0 ? 8 * im->sm_count : 1024;
		size_t slots_mem = ((size_t)512 << 20) / (TT * sizeof(float));
		if ((size_t)cap > slots_mem)
			cap = slots_mem > 0 ? (int)slots_mem : 1;
		grid = nblk < cap ? nblk : cap;
		off_dp = need;
		need += (size_t)grid * TT * sizeof(float);
	}
	char *scr = NULL;
	if (need) {
		scr = (char *)sb_cuda_scratch(im, need);
		if (!scr)
			return;
	}
	double *dablk = a.want_alpha ? (double *)scr : NULL;
	float *dPscr = shared ? NULL : (float *)(scr + off_dp);
#define BWD(NN, GLL)                                                                                               \
	k_attn_bwd<NN, GLL><<<grid, 256, sm, ctx->st>>>(dqkv, dablk, dPscr, dout, qkv, S, P, aux, nvalid, alpha, a)
	if (shared) {
		size_t sm = bwd_smem(a);
		DISPATCH_N(T, BWD)
	} else {
		size_t sm = gl_smem(a);
		DISPATCH_GL(T, BWD)
	}
#undef BWD
	LAUNCHED(im, "attention_backward");
	if (dablk) {
		k_dalpha<<<cdiv(NH, 64), 64, 0, ctx->st>>>(dalpha, dablk, B, NH); /* a thread per head */
		LAUNCHED(im, "attention_dalpha");
	}
}

/* per (sample, head) block: [nonzero, valid_total, entropy_sum] with rows in order */
__global__ void k_attn_stats(double *outb, const float *P, const int32_t *nvalid, int NH, int T)
{
	extern __shared__ double rs[]; /* [2][T] */
	int blk = blockIdx.x, b = blk / NH;
	int nv = nvalid ? nvalid[b] : T;
	if (nv > T)
		nv = T;
	const float *Pb = P + (size_t)blk * T * T;
	for (int r = threadIdx.x; r < T; r += blockDim.x) {
		const float *pr = Pb + (size_t)r * T;
		long cnt = 0;
		double hsum = 0;
		for (int j = 0; j < T; j++) {
			double v = pr[j];
			if (j < nv && v > 1e-7)
				cnt++;
			hsum -= v * log(v > 1e-12 ? v : 1e-12);
		}
		rs[r] = (double)cnt;
		rs[T + r] = hsum;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		double nz = 0, vt = 0, en = 0;
		for (int r = 0; r < T; r++) {
			nz += rs[r];
			vt += nv > 0 ? nv : 0;
			en += rs[T + r];
		}
		outb[(size_t)blk * 3] = nz;
		outb[(size_t)blk * 3 + 1] = vt;
		outb[(size_t)blk * 3 + 2] = en;
	}
}

void sb_cuda_attention_stats(struct sb_ctx *ctx, struct sb_attn_stats *st, const float *P, const int32_t *nvalid,
			     int B, int NH, int T)
{
	struct cuda_impl *im = ctx->im;
	if (im->failed || B <= 0)
		return;
	size_t nb = (size_t)B * NH;
	double *dev = (double *)sb_cuda_scratch(im, nb * 3 * sizeof(double));
	if (!dev) /* reported by sb_cuda_scratch */
		return;
	double *host = (double *)malloc(nb * 3 * sizeof(double));
	if (!host) { /* the host's memory, not the device's failure: pending */
		sb_cuda_refuse(im, NULL, SB_EINTERNAL, __FILE__, __LINE__, "attention_stats: out of host memory (%zu bytes)",
			       nb * 3 * sizeof(double));
		return;
	}
	k_attn_stats<<<(unsigned)nb, 128, 2 * (size_t)T * sizeof(double), ctx->st>>>(dev, P, nvalid, NH, T);
	LAUNCHED(im, "attention_stats");
	CU_NOTE(im, cudaMemcpyAsync(host, dev, nb * 3 * sizeof(double), cudaMemcpyDeviceToHost, ctx->st));
	if (!sb_cuda_sync(im, NULL)) {
		for (size_t i = 0; i < nb; i++) {
			st->nonzero += host[i * 3];
			st->valid_total += host[i * 3 + 1];
			st->entropy_sum += host[i * 3 + 2];
			st->rows += T;
		}
	}
	free(host);
}
