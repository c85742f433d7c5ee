/* mixer_cuda.cu — the local mixer of local_hybrid (PROTOCOL A2) on the GPU:
 * y = LN(x_c) * valid; z = depthwise conv(y) + cb; x_c' = (x_c + scale gelu(z)) * valid.
 * Per-element work in the CPU's order (conv taps in tap order with fma; the
 * transposed conv of the backward in the CPU's token order; the scale
 * gradient summed per token, then over tokens in double, in order); parameter
 * gradients summed over tokens in fixed chunks (deterministic, not the CPU's
 * order). */
#include <stdlib.h>

#include "cuda_common.cuh"
#include "ln_rows.cuh"

__device__ inline int mix_nbr(int t, int k, int G, int L)
{
	if (G > 0) {
		int r = t / G, c = t % G;
		int rr = r + k / 3 - 1, cc = c + k % 3 - 1;
		if (rr < 0 || rr >= G || cc < 0 || cc >= G)
			return -1;
		return rr * G + cc;
	}
	int s = t + k - 1;
	return s < 0 || s >= L ? -1 : s;
}

__device__ inline int mix_valid(const int32_t *nvalid, int b, int t) { return !nvalid || t < nvalid[b] - 1; }

/* LN of the content rows (a half-warp per row), zero rows for padded tokens */
template <int N>
__global__ void k_mix_ln(float *y, float *mean, float *rstd, const float *x, const int32_t *nvalid, const float *w,
			 const float *b, int B, int T, int d)
{
	int L = T - 1;
	int row = blockIdx.x * 16 + (threadIdx.x >> 4);
	if (row >= B * L)
		return;
	int bb = row / L, t = row % L;
	Grp G = grp_here();
	LnDrop dr;
	dr.on = 0;
	float *yr = y + (size_t)row * d;
	ln_row_fwd<N>(G, yr, NULL, mean + row, rstd + row, NULL,
		      x + ((size_t)bb * T + 1 + t) * d, NULL, w, b, &dr, d);
	__syncwarp(G.mask);
	if (!mix_valid(nvalid, bb, t))
		for (int c = G.lane; c < d; c += 16)
			yr[c] = 0.0f;
}

/* z = cb + taps, out = x + scale gelu(z) on valid tokens (0 on padded); CLS copied */
__global__ void k_mix_conv(float *out, float *z, const float *y, const float *x, const int32_t *nvalid,
			   const float *cw, const float *cb, const float *scale, int B, int T, int d, int G)
{
	int L = T - 1, KK = G > 0 ? 9 : 3;
	size_t n = (size_t)B * T * d;
	size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (e >= n)
		return;
	int b = (int)(e / ((size_t)T * d)), tt = (int)(e / d % T), c = (int)(e % d);
	if (tt == 0) {
		out[e] = x[e];
		return;
	}
	int t = tt - 1;
	const float *yb = y + (size_t)b * L * d;
	float zz = cb[c];
	for (int k = 0; k < KK; k++) {
		int s = mix_nbr(t, k, G, L);
		if (s >= 0)
			zz = fmaf(cw[(size_t)c * KK + k], yb[(size_t)s * d + c], zz);
	}
	z[((size_t)b * L + t) * d + c] = zz;
	out[e] = mix_valid(nvalid, b, t) ? fmaf(scale[0], sb_gelu1(zz), x[e]) : 0.0f;
}

static int lanes_d(int d) { return d <= 16 ? 1 : d <= 32 ? 2 : d <= 64 ? 4 : d <= 128 ? 8 : d <= 256 ? 16 : 0; }

void sb_cuda_localmix_forward(struct sb_ctx *ctx, float *out, float *y, float *z, float *mean, float *rstd,
			      const float *x, const int32_t *nvalid, const float *lnw, const float *lnb, const float *cw,
			      const float *cb, const float *scale, int B, int T, int d, int G)
{
	int L = T - 1;
	if (B <= 0 || L <= 0)
		return;
	unsigned g = cdiv((size_t)B * L, 16);
	switch (lanes_d(d)) {
	case 1:
		k_mix_ln<1><<<g, 256, 0, ctx->st>>>(y, mean, rstd, x, nvalid, lnw, lnb, B, T, d);
		break;
	case 2:
		k_mix_ln<2><<<g, 256, 0, ctx->st>>>(y, mean, rstd, x, nvalid, lnw, lnb, B, T, d);
		break;
	case 4:
		k_mix_ln<4><<<g, 256, 0, ctx->st>>>(y, mean, rstd, x, nvalid, lnw, lnb, B, T, d);
		break;
	case 8:
		k_mix_ln<8><<<g, 256, 0, ctx->st>>>(y, mean, rstd, x, nvalid, lnw, lnb, B, T, d);
		break;
	case 16:
		k_mix_ln<16><<<g, 256, 0, ctx->st>>>(y, mean, rstd, x, nvalid, lnw, lnb, B, T, d);
		break;
	default:
		/* a shape this backend refuses: pending, not the device's failure */
		sb_cuda_refuse(ctx->im, NULL, SB_EDATA, __FILE__, __LINE__,
			       "local mixer: width d = %d (the CUDA backend does 1..256)", d);
		return;
	}
	LAUNCHED(ctx->im, "localmix_ln");
	size_t n = (size_t)B * T * d;
	k_mix_conv<<<cdiv(n, 256), 256, 0, ctx->st>>>(out, z, y, x, nvalid, cw, cb, scale, B, T, d, G);
	LAUNCHED(ctx->im, "localmix_conv");
}

/* dz = scale g gelu'(z) (valid tokens), dx = g (CLS and valid content), 0 on padded */
__global__ void k_mix_dz(float *dx, float *dz, const float *g, const float *z, const int32_t *nvalid,
			 const float *scale, int B, int T, int d)
{
	int L = T - 1;
	size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (e >= (size_t)B * T * d)
		return;
	int b = (int)(e / ((size_t)T * d)), tt = (int)(e / d % T), c = (int)(e % d);
	if (tt == 0) {
		dx[e] = g[e];
		return;
	}
	int t = tt - 1;
	size_t zi = ((size_t)b * L + t) * d + c;
	if (!mix_valid(nvalid, b, t)) {
		dx[e] = 0.0f;
		dz[zi] = 0.0f;
		return;
	}
	dx[e] = g[e];
	dz[zi] = (scale[0] * g[e]) * sb_dgelu1(z[zi]);
}

/* per token: sum_c g gelu(z) as an fma chain (the CPU's per-token acc) */
__global__ void k_mix_tok(float *tokacc, const float *g, const float *z, const int32_t *nvalid, int B, int T, int d)
{
	int L = T - 1;
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= B * L)
		return;
	int b = i / L, t = i % L;
	float acc = 0;
	if (mix_valid(nvalid, b, t)) {
		const float *gt = g + ((size_t)b * T + t + 1) * d;
		const float *zt = z + (size_t)i * d;
		for (int c = 0; c < d; c++)
			acc = fmaf(gt[c], sb_gelu1(zt[c]), acc);
	}
	tokacc[i] = acc;
}

/* dscale += (float)(sum over tokens in order, in double) */
__global__ void k_mix_dscale(float *dscale, const float *tokacc, const int32_t *nvalid, int B, int L)
{
	if (threadIdx.x || blockIdx.x)
		return;
	double ds = 0;
	for (int i = 0; i < B * L; i++)
		if (mix_valid(nvalid, i / L, i % L))
			ds += tokacc[i];
	dscale[0] += (float)ds;
}

/* dy[s] = sum over taps (t ascending) of w dz[t]: the transposed conv */
__global__ void k_mix_dy(float *dy, const float *dz, const float *cw, const int32_t *nvalid, int B, int T, int d,
			 int G)
{
	int L = T - 1, KK = G > 0 ? 9 : 3;
	size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (e >= (size_t)B * L * d)
		return;
	int b = (int)(e / ((size_t)L * d)), s = (int)(e / d % L), c = (int)(e % d);
	if (!mix_valid(nvalid, b, s)) {
		dy[e] = 0.0f;
		return;
	}
	const float *dzb = dz + (size_t)b * L * d;
	float acc = 0.0f;
	for (int k = KK - 1; k >= 0; k--) {
		int off = G > 0 ? (k / 3 - 1) * G + (k % 3 - 1) : k - 1;
		int t = s - off;
		if (t < 0 || t >= L || mix_nbr(t, k, G, L) != s)
			continue;
		acc = fmaf(cw[(size_t)c * KK + k], dzb[(size_t)t * d + c], acc);
	}
	dy[e] = acc;
}

#define MIX_CHUNK 64

/* partial sums over chunks of tokens: [chunk][KK+1][d]: taps (dz * y[nbr]) then dz */
__global__ void k_mix_wpart(float *part, const float *dz, const float *y, int B, int T, int d, int G)
{
	int L = T - 1, KK = G > 0 ? 9 : 3;
	int nt = B * L, t0 = blockIdx.x * MIX_CHUNK;
	for (int e = threadIdx.x; e < (KK + 1) * d; e += blockDim.x) {
		int k = e / d, c = e % d;
		float s = 0;
		for (int i = t0; i < t0 + MIX_CHUNK && i < nt; i++) {
			float dzv = dz[(size_t)i * d + c];
			if (k == KK) {
				s += dzv;
			} else {
				int b = i / L, t = i % L;
				int src = mix_nbr(t, k, G, L);
				if (src >= 0)
					s = fmaf(dzv, y[((size_t)b * L + src) * d + c], s);
			}
		}
		part[(size_t)blockIdx.x * (KK + 1) * d + e] = s;
	}
}

/* dcw[c, k] += sum_chunks part[k][c]; dcb[c] += sum_chunks part[KK][c] */
__global__ void k_mix_wsum(float *dcw, float *dcb, const float *part, int nchunk, int d, int KK)
{
	int e = blockIdx.x * blockDim.x + threadIdx.x;
	if (e >= (KK + 1) * d)
		return;
	int k = e / d, c = e % d;
	float s = 0;
	for (int ch = 0; ch < nchunk; ch++)
		s += part[(size_t)ch * (KK + 1) * d + e];
	if (k == KK)
		dcb[c] += s;
	else
		dcw[(size_t)c * KK + k] += s;
}

/* LN backward (the CPU's scalar loop) per content row: dx += */
__global__ void k_mix_lnb(float *dx, const float *dy, const float *x, const float *mean, const float *rstd,
			  const float *w, int B, int T, int d)
{
	int L = T - 1;
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= B * L)
		return;
	int b = i / L, t = i % L;
	size_t xr = ((size_t)b * T + 1 + t) * d;
	ln_row_bwd_plain(dx + xr, NULL, NULL, dy + (size_t)i * d, x + xr, mean[i], rstd[i], w, d, 1);
}

/* dlnw, dlnb partials per chunk of rows: [chunk][2][d] */
__global__ void k_mix_lnpart(float *part, const float *dy, const float *x, const float *mean, const float *rstd,
			     int B, int T, int d)
{
	int L = T - 1, nt = B * L, r0 = blockIdx.x * MIX_CHUNK;
	for (int c = threadIdx.x; c < d; c += blockDim.x) {
		float pw = 0, pb = 0;
		for (int i = r0; i < r0 + MIX_CHUNK && i < nt; i++) {
			int b = i / L, t = i % L;
			float g = dy[(size_t)i * d + c];
			float xh = (x[((size_t)b * T + 1 + t) * d + c] - mean[i]) * rstd[i];
			pw = fmaf(g, xh, pw);
			pb += g;
		}
		part[((size_t)blockIdx.x * 2) * d + c] = pw;
		part[((size_t)blockIdx.x * 2 + 1) * d + c] = pb;
	}
}

__global__ void k_mix_lnsum(float *dw, float *db, const float *part, int nchunk, int d)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= d)
		return;
	float sw = 0, sb = 0;
	for (int ch = 0; ch < nchunk; ch++) {
		sw += part[((size_t)ch * 2) * d + c];
		sb += part[((size_t)ch * 2 + 1) * d + c];
	}
	dw[c] += sw;
	db[c] += sb;
}

void sb_cuda_localmix_backward(struct sb_ctx *ctx, float *dx, float *dlnw, float *dlnb, float *dcw, float *dcb,
			       float *dscale, const float *dout, const float *x, const float *y, const float *z,
			       const float *mean, const float *rstd, const int32_t *nvalid, const float *lnw,
			       const float *cw, const float *scale, int B, int T, int d, int G)
{
	int L = T - 1, KK = G > 0 ? 9 : 3;
	if (B <= 0 || L <= 0)
		return;
	size_t nt = (size_t)B * L, Ld = nt * d;
	unsigned nch = cdiv(nt, MIX_CHUNK);
	size_t need = (2 * Ld + nt + (size_t)nch * (KK + 1) * d + (size_t)nch * 2 * d) * sizeof(float);
	float *dz = (float *)sb_cuda_scratch(ctx->im, need);
	if (!dz)
		return;
	float *dy = dz + Ld, *tokacc = dy + Ld, *wpart = tokacc + nt, *lpart = wpart + (size_t)nch * (KK + 1) * d;
	k_mix_dz<<<cdiv((size_t)B * T * d, 256), 256, 0, ctx->st>>>(dx, dz, dout, z, nvalid, scale, B, T, d);
	LAUNCHED(ctx->im, "localmix_dz");
	k_mix_tok<<<cdiv(nt, 128), 128, 0, ctx->st>>>(tokacc, dout, z, nvalid, B, T, d);
	LAUNCHED(ctx->im, "localmix_tok");
	k_mix_dscale<<<1, 32, 0, ctx->st>>>(dscale, tokacc, nvalid, B, L);
	LAUNCHED(ctx->im, "localmix_dscale");
	k_mix_dy<<<cdiv(Ld, 256), 256, 0, ctx->st>>>(dy, dz, cw, nvalid, B, T, d, G);
	LAUNCHED(ctx->im, "localmix_dy");
	k_mix_wpart<<<nch, 128, 0, ctx->st>>>(wpart, dz, y, B, T, d, G);
	LAUNCHED(ctx->im, "localmix_wpart");
	k_mix_wsum<<<cdiv((size_t)(KK + 1) * d, 128), 128, 0, ctx->st>>>(dcw, dcb, wpart, (int)nch, d, KK);
	LAUNCHED(ctx->im, "localmix_wsum");
	k_mix_lnb<<<cdiv(nt, 128), 128, 0, ctx->st>>>(dx, dy, x, mean, rstd, lnw, B, T, d);
	LAUNCHED(ctx->im, "localmix_lnb");
	k_mix_lnpart<<<nch, 128, 0, ctx->st>>>(lpart, dy, x, mean, rstd, B, T, d);
	LAUNCHED(ctx->im, "localmix_lnpart");
	k_mix_lnsum<<<cdiv(d, 128), 128, 0, ctx->st>>>(dlnw, dlnb, lpart, (int)nch, d);
	LAUNCHED(ctx->im, "localmix_lnsum");
}
