/* attn_cuda.cu — attention on the GPU, fused per (sample, head) block: one
 * thread block loads the block's q, k, v (T x hd) into shared memory, forms the
 * scores, normalises each row on a half-warp (norm_rows.cuh), and mixes the
 * values; the backward does dP = dO V^T, dV = P^T dO, the normaliser's exact
 * backward per row, dQ = dS K, dK = dS^T Q in the same way.
 *
 * Every sum is taken in the CPU backend's order (backend_cpu_attn.c): score
 * dot products as an fma chain over the head dimension; products with a
 * probability (or its gradient) over the nonzero entries in column order with
 * two alternating accumulators (head dims that are multiples of 16; one fma
 * chain over all entries otherwise); d loss/d alpha summed over rows in order
 * per block, then over samples in order per head. So the GPU reproduces the
 * CPU's bits for S, P, out and the gradients (the tests say where it does).
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

template <int N>
__global__ void __launch_bounds__(256) k_attn_fwd(float *out, float *S, float *P, float *aux, const float *qkv,
						  const int32_t *nvalid, const float *alpha, AttnArgs a)
{
	extern __shared__ float sm[];
	int T = a.T, hd = a.hd, hs = a.hs, ss = a.ss, d = a.d, d3 = 3 * d;
	int blk = blockIdx.x, b = blk / a.NH, h = blk % a.NH;
	float *q = sm, *k = q + T * hs, *v = k + T * hs, *Ps = v + T * hs;
	int nv = nvalid ? nvalid[b] : T;
	if (nv < 1 || nv > T) {
		if (threadIdx.x == 0)
			flag_error(a.dflag, DFLAG_NVALID, b, 0, nv);
		return;
	}
	for (int e = threadIdx.x; e < T * hd; e += blockDim.x) {
		int t = e / hd, c = e % hd;
		size_t base = ((size_t)b * T + t) * d3 + (size_t)h * hd + c;
		q[t * hs + c] = qkv[base];
		k[t * hs + c] = qkv[base + d];
		v[t * hs + c] = qkv[base + 2 * d];
	}
	__syncthreads();
	size_t TT = (size_t)T * T;
	float *Sb = S + blk * TT, *Pb = P + blk * TT;
	for (int e = threadIdx.x; e < T * T; e += blockDim.x) {
		int i = e / T, j = e % T;
		float s = 0.0f;
		for (int c = 0; c < hd; c++)
			s = fmaf(q[i * hs + c], k[j * hs + c], s);
		s = scale_score(s, a.sc);
		Sb[e] = s;
		Ps[i * ss + j] = s;
	}
	__syncthreads();
	float al = alpha ? alpha[h] : a.nm_alpha;
	Grp G = grp_here();
	for (int r = threadIdx.x >> 4; r < T; r += 16) {
		Row<N> p;
		float ax[4];
		int rc = nr_forward<N>(G, a.nm, p, ax, Ps + r * ss, T, nv, al);
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
		const float *pr = Ps + i * ss;
		float o = mix_sum(
			T, a.fast, [&](int j) { return pr[j]; }, [&](int j) { return v[j * hs + c]; });
		out[((size_t)b * T + i) * d + (size_t)h * hd + c] = o;
	}
}

template <int N>
__global__ void __launch_bounds__(256)
	k_attn_bwd(float *dqkv, double *dablk, const float *dout, const float *qkv, const float *S, const float *P,
		   const float *aux, const int32_t *nvalid, const float *alpha, AttnArgs a)
{
	extern __shared__ float sm[];
	int T = a.T, hd = a.hd, hs = a.hs, ss = a.ss, d = a.d, d3 = 3 * d;
	int blk = blockIdx.x, b = blk / a.NH, h = blk % a.NH;
	double *rowda = (double *)sm;
	float *q = (float *)(rowda + ((T + 1) & ~1)), *k = q + T * hs, *v = k + T * hs, *go = v + T * hs;
	float *Ps = go + T * hs, *dP = Ps + T * ss;
	int nv = nvalid ? nvalid[b] : T;
	if (nv < 1 || nv > T) {
		if (threadIdx.x == 0)
			flag_error(a.dflag, DFLAG_NVALID, b, 0, nv);
		return;
	}
	size_t TT = (size_t)T * T;
	const float *Sb = S + blk * TT, *Pb = P + blk * TT;
	for (int e = threadIdx.x; e < T * hd; e += blockDim.x) {
		int t = e / hd, c = e % hd;
		size_t base = ((size_t)b * T + t) * d3 + (size_t)h * hd + c;
		q[t * hs + c] = qkv[base];
		k[t * hs + c] = qkv[base + d];
		v[t * hs + c] = qkv[base + 2 * d];
		go[t * hs + c] = dout[((size_t)b * T + t) * d + (size_t)h * hd + c];
	}
	for (int e = threadIdx.x; e < T * T; e += blockDim.x)
		Ps[(e / T) * ss + e % T] = Pb[e];
	__syncthreads();
	/* dP = dO V^T */
	for (int e = threadIdx.x; e < T * T; e += blockDim.x) {
		int i = e / T, j = e % T;
		float s = 0.0f;
		for (int c = 0; c < hd; c++)
			s = fmaf(go[i * hs + c], v[j * hs + c], s);
		dP[i * ss + j] = s;
	}
	/* dV = P^T dO */
	for (int e = threadIdx.x; e < T * hd; e += blockDim.x) {
		int i = e / hd, c = e % hd;
		float o = mix_sum(
			T, a.fast, [&](int j) { return Ps[j * ss + i]; }, [&](int j) { return go[j * hs + c]; });
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
			p.at(G.lane, kk) = j < T ? Ps[r * ss + j] : 0.0f;
			g.at(G.lane, kk) = j < T ? dP[r * ss + j] : 0.0f;
		}
		float tau = aux[((size_t)blk * T + r) * 4];
		double da = nr_backward<N>(G, a.nm, g, Sb + (size_t)r * T, p, g, tau, T, nv, al, want);
		__syncwarp(G.mask);
		KLOOP for (int kk = 0; kk < N; kk++)
		{
			int j = G.lane + 16 * kk;
			if (j < T)
				dP[r * ss + j] = scale_score(g.at(G.lane, kk), a.sc);
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
			T, a.fast, [&](int j) { return dP[i * ss + j]; }, [&](int j) { return k[j * hs + c]; });
		dqkv[o + d] = mix_sum(
			T, a.fast, [&](int j) { return dP[j * ss + i]; }, [&](int j) { return q[j * hs + c]; });
	}
	if (dablk && threadIdx.x == 0) {
		double s = 0;
		for (int r = 0; r < T; r++)
			s += rowda[r];
		dablk[blk] = s;
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

/* lanes per row for a row of T keys */
static int rows_n(int T)
{
	return T <= 16 ? 1 : T <= 32 ? 2 : T <= 64 ? 4 : T <= 80 ? 5 : T <= 112 ? 7 : T <= 128 ? 8 : T <= 256 ? 16 : 0;
}

static int setup(struct sb_ctx *ctx, AttnArgs *a, const struct sb_norm *nm, int B, int T, int d, int NH,
		 struct sb_err *err)
{
	a->B = B;
	a->T = T;
	a->d = d;
	a->NH = NH;
	a->hd = d / NH;
	a->hs = a->hd + 1;
	a->ss = ((T + 16 + 31) / 32) * 32 - 16; /* = 16 mod 32: two half-warps' rows in different banks */
	if (a->ss < T)
		a->ss += 32;
	a->fast = a->hd % 16 == 0;
	a->sc = qk_scale_of(a->hd);
	a->nm.kind = (int)nm->kind;
	a->nm.margin = nm->mask == SB_MASK_MARGIN;
	a->nm.unrolled = nm->unrolled;
	a->nm.ratio = nm->ratio;
	a->nm_alpha = (float)nm->alpha;
	a->want_alpha = 0;
	a->dflag = ctx->im->dflag_dev;
	if (d % NH || !rows_n(T))
		return sb_cuda_fail(ctx->im, err, "attention",
				    T > 256 ? "more than 256 tokens is not supported by the CUDA backend"
					    : "d is not a multiple of the number of heads",
				    0, __FILE__, __LINE__);
	return 0;
}

static size_t fwd_smem(const AttnArgs &a) { return (3 * (size_t)a.T * a.hs + (size_t)a.T * a.ss) * sizeof(float); }
static size_t bwd_smem(const AttnArgs &a)
{
	return (size_t)((a.T + 1) & ~1) * sizeof(double) + (4 * (size_t)a.T * a.hs + 2 * (size_t)a.T * a.ss) * sizeof(float);
}

template <class K> static int prep_smem(struct sb_ctx *ctx, K kern, size_t bytes, struct sb_err *err)
{
	if ((long)bytes > ctx->im->max_smem) {
		char msg[160];
		snprintf(msg, sizeof msg, "a block needs %zu bytes of shared memory, the device allows %d", bytes,
			 ctx->im->max_smem);
		return sb_cuda_fail(ctx->im, err, "attention", msg, 0, __FILE__, __LINE__);
	}
	if (bytes > 48 * 1024)
		CU_RET(ctx->im, err, cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
	return 0;
}

#define DISPATCH_N(T, MACRO)                                                                                       \
	switch (rows_n(T)) {                                                                                       \
	case 1:                                                                                                    \
		MACRO(1);                                                                                          \
		break;                                                                                             \
	case 2:                                                                                                    \
		MACRO(2);                                                                                          \
		break;                                                                                             \
	case 4:                                                                                                    \
		MACRO(4);                                                                                          \
		break;                                                                                             \
	case 5:                                                                                                    \
		MACRO(5);                                                                                          \
		break;                                                                                             \
	case 7:                                                                                                    \
		MACRO(7);                                                                                          \
		break;                                                                                             \
	case 8:                                                                                                    \
		MACRO(8);                                                                                          \
		break;                                                                                             \
	default:                                                                                                   \
		MACRO(16);                                                                                         \
		break;                                                                                             \
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
	size_t sm = fwd_smem(a);
#define FWD(NN)                                                                                                    \
	do {                                                                                                       \
		SB_TRY(prep_smem(ctx, k_attn_fwd<NN>, sm, err));                                                   \
		k_attn_fwd<NN><<<B * NH, 256, sm, ctx->st>>>(out, S, P, aux, qkv, nvalid, alpha, a);               \
	} while (0)
	DISPATCH_N(T, FWD)
#undef FWD
	LAUNCHED(ctx->im, "attention_forward");
	return sb_cuda_sticky(ctx->im, err);
}

void sb_cuda_attention_backward(struct sb_ctx *ctx, float *dqkv, float *dalpha, const float *dout, const float *qkv,
				const float *S, const float *P, const float *aux, const int32_t *nvalid,
				const float *alpha, const struct sb_norm *nm, int B, int T, int d, int NH)
{
	if (ctx->im->failed || B <= 0)
		return;
	AttnArgs a;
	if (setup(ctx, &a, nm, B, T, d, NH, NULL))
		return;
	int has_alpha = nm->kind == SB_NORM_ADAPTIVE || nm->kind == SB_NORM_ENTMAX_BISECT;
	double *dablk = NULL;
	if (dalpha && has_alpha) {
		dablk = (double *)sb_cuda_scratch(ctx->im, (size_t)B * NH * sizeof(double));
		if (!dablk)
			return;
		a.want_alpha = 1;
	}
	size_t sm = bwd_smem(a);
#define BWD(NN)                                                                                                    \
	do {                                                                                                       \
		if (prep_smem(ctx, k_attn_bwd<NN>, sm, NULL))                                                      \
			return;                                                                                    \
		k_attn_bwd<NN><<<B * NH, 256, sm, ctx->st>>>(dqkv, dablk, dout, qkv, S, P, aux, nvalid, alpha, a); \
	} while (0)
	DISPATCH_N(T, BWD)
#undef BWD
	LAUNCHED(ctx->im, "attention_backward");
	if (dablk) {
		k_dalpha<<<1, 64, 0, ctx->st>>>(dalpha, dablk, B, NH);
		LAUNCHED(ctx->im, "attention_dalpha");
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
	double *host = (double *)malloc(nb * 3 * sizeof(double));
	if (!dev || !host) {
		free(host);
		if (!im->failed)
			sb_cuda_fail(im, NULL, "attention_stats", "out of memory", 0, __FILE__, __LINE__);
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
