/* lanes.cuh — a 16-lane "row vector" that runs as a half-warp on the GPU and as
 * a plain loop over 16 lanes on the host (private to lib/cuda/).
 *
 * Why: the CPU code this backend must match (lib/attn_norm.c, the CPU layer
 * norm) keeps every row reduction in 16 lane accumulators (element j goes to
 * lane j % 16, in order) combined by a fixed tree. A half-warp whose lane l owns
 * the elements j = l + 16 k does the same additions in the same order, with
 * shuffles for the tree, so the GPU gives the CPU's bits (the build disables
 * FMA contraction, -fmad=false, and uses fmaf exactly where the CPU does).
 * The same source compiled for the host (no __CUDA_ARCH__) loops over the 16
 * lanes: that is what tests/unit/test_cuda_host.c runs against the CPU backend,
 * so the arithmetic of every row kernel is checked without a GPU.
 *
 * Rules for code written on these types:
 *   - per-lane state is an LV<T>; per-element state a Row<N> (16*N elements);
 *   - per-lane work goes inside FOR_LANES(G, l) { ... } and touches only
 *     lane l's values (x.at(l, k), a[l]); element index j = l + 16*k;
 *   - cross-lane operations (lsum, lmax, bcast, ...) are called by all 16
 *     lanes of a group with uniform control flow (their results are uniform).
 */
#ifndef SB_CUDA_LANES_CUH
#define SB_CUDA_LANES_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SB_HD __host__ __device__
#else
#define SB_HD
#endif
#define SB_HDI SB_HD inline

#define SB_VW 16

/* Device lanes in the device compilation pass; host lanes otherwise, and in both
 * passes of a file that defines SB_LANES_HOST (host_cuda.cu): nvcc parses every
 * function in both passes, so the layout must not depend on the pass there. */
#if defined(__CUDA_ARCH__) && !defined(SB_LANES_HOST)
#define SB_LANES_DEV 1
#else
#define SB_LANES_DEV 0
#endif

/* unroll the loops over a lane's elements on the GPU (register arrays must be
 * indexed by compile-time constants) */
#if SB_LANES_DEV
#define KLOOP _Pragma("unroll")
#else
#define KLOOP
#endif

/* a group of 16 lanes: on the GPU a half-warp (mask, lane); on the host nothing */
struct Grp {
	unsigned mask; /* device: this half-warp's lanes */
	int lane;      /* device: 0..15 */
};

#if SB_LANES_DEV
#define FOR_LANES(G, l) for (int l = (G).lane, l##_once_ = 1; l##_once_; l##_once_ = 0)
#else
#define FOR_LANES(G, l) for (int l = 0; l < SB_VW; l++)
#endif
#ifdef __CUDACC__
__device__ inline Grp grp_here()
{
	Grp g;
	int t = threadIdx.x & 31;
	g.lane = t & 15;
	g.mask = 0xFFFFu << (t & 16);
	return g;
}
#endif
SB_HDI Grp grp_host()
{
	Grp g;
	g.mask = 0;
	g.lane = 0;
	return g;
}

template <class T> struct LV {
#if SB_LANES_DEV
	T v;
	SB_HD T &operator[](int) { return v; }
	SB_HD const T &operator[](int) const { return v; }
#else
	T v[SB_VW];
	SB_HD T &operator[](int l) { return v[l]; }
	SB_HD const T &operator[](int l) const { return v[l]; }
#endif
	SB_HD void fill(T x)
	{
#if SB_LANES_DEV
		v = x;
#else
		for (int l = 0; l < SB_VW; l++)
			v[l] = x;
#endif
	}
};

template <int N> struct Row {
#if SB_LANES_DEV
	float v[N];
	SB_HD float &at(int, int k) { return v[k]; }
	SB_HD const float &at(int, int k) const { return v[k]; }
#else
	float v[SB_VW][N];
	SB_HD float &at(int l, int k) { return v[l][k]; }
	SB_HD const float &at(int l, int k) const { return v[l][k]; }
#endif
};

template <int N> struct IRow {
#if SB_LANES_DEV
	int32_t v[N];
	SB_HD int32_t &at(int, int k) { return v[k]; }
#else
	int32_t v[SB_VW][N];
	SB_HD int32_t &at(int l, int k) { return v[l][k]; }
#endif
};

/* ---------------------------------------------------------------- float bits */

SB_HDI float sb_f_from_bits(int32_t i)
{
	float f;
	memcpy(&f, &i, sizeof f);
	return f;
}
SB_HDI int32_t sb_f_bits(float f)
{
	int32_t i;
	memcpy(&i, &f, sizeof i);
	return i;
}
SB_HDI int sb_isnan(float x) { return x != x; }

/* ---------------------------------------------------------------- reductions */

/* lane tree sum, CPU's lanes_sum: a[l] += a[l + w] for w = 8, 4, 2, 1 */
SB_HDI float lsum(const Grp &G, const LV<float> &a)
{
#if SB_LANES_DEV
	float x = a.v;
	for (int w = 8; w >= 1; w >>= 1) {
		float o = __shfl_down_sync(G.mask, x, w, 16);
		if (G.lane < w)
			x = x + o;
	}
	return __shfl_sync(G.mask, x, 0, 16);
#else
	float t[SB_VW];
	for (int l = 0; l < SB_VW; l++)
		t[l] = a.v[l];
	for (int w = SB_VW / 2; w >= 1; w /= 2)
		for (int l = 0; l < w; l++)
			t[l] += t[l + w];
	return t[0];
#endif
}

/* CPU's lanes_max: a[l] = a[l + w] > a[l] ? a[l + w] : a[l] */
SB_HDI float lmax(const Grp &G, const LV<float> &a)
{
#if SB_LANES_DEV
	float x = a.v;
	for (int w = 8; w >= 1; w >>= 1) {
		float o = __shfl_down_sync(G.mask, x, w, 16);
		if (G.lane < w)
			x = o > x ? o : x;
	}
	return __shfl_sync(G.mask, x, 0, 16);
#else
	float t[SB_VW];
	for (int l = 0; l < SB_VW; l++)
		t[l] = a.v[l];
	for (int w = SB_VW / 2; w >= 1; w /= 2)
		for (int l = 0; l < w; l++)
			t[l] = t[l + w] > t[l] ? t[l + w] : t[l];
	return t[0];
#endif
}

/* integer sum (order-free) */
SB_HDI int32_t lisum(const Grp &G, const LV<int32_t> &a)
{
#if SB_LANES_DEV
	int32_t x = a.v;
	for (int w = 8; w >= 1; w >>= 1)
		x += __shfl_xor_sync(G.mask, x, w, 16);
	return x;
#else
	int32_t s = 0;
	for (int l = 0; l < SB_VW; l++)
		s += a.v[l];
	return s;
#endif
}

SB_HDI int32_t limax(const Grp &G, const LV<int32_t> &a)
{
#if SB_LANES_DEV
	int32_t x = a.v;
	for (int w = 8; w >= 1; w >>= 1) {
		int32_t o = __shfl_xor_sync(G.mask, x, w, 16);
		x = o > x ? o : x;
	}
	return x;
#else
	int32_t s = a.v[0];
	for (int l = 1; l < SB_VW; l++)
		s = a.v[l] > s ? a.v[l] : s;
	return s;
#endif
}

SB_HDI int32_t limin(const Grp &G, const LV<int32_t> &a)
{
#if SB_LANES_DEV
	int32_t x = a.v;
	for (int w = 8; w >= 1; w >>= 1) {
		int32_t o = __shfl_xor_sync(G.mask, x, w, 16);
		x = o < x ? o : x;
	}
	return x;
#else
	int32_t s = a.v[0];
	for (int l = 1; l < SB_VW; l++)
		s = a.v[l] < s ? a.v[l] : s;
	return s;
#endif
}

/* any lane true */
SB_HDI int lany(const Grp &G, const LV<int> &a)
{
#if SB_LANES_DEV
	return __any_sync(G.mask, a.v) != 0;
#else
	for (int l = 0; l < SB_VW; l++)
		if (a.v[l])
			return 1;
	return 0;
#endif
}

/* element j of a row, on every lane (j uniform) */
template <int N> SB_HDI float rget(const Grp &G, const Row<N> &x, int j)
{
#if SB_LANES_DEV
	int k = j >> 4;
	float t = 0;
#pragma unroll
	for (int kk = 0; kk < N; kk++)
		if (kk == k)
			t = x.v[kk];
	return __shfl_sync(G.mask, t, j & 15, 16);
#else
	return x.v[j & 15][j >> 4];
#endif
}

/* x[j] += a (j, a uniform) */
template <int N> SB_HDI void radd(const Grp &G, Row<N> &x, int j, float a)
{
#if SB_LANES_DEV
	int k = j >> 4;
	if (G.lane == (j & 15)) {
#pragma unroll
		for (int kk = 0; kk < N; kk++)
			if (kk == k)
				x.v[kk] += a;
	}
#else
	x.v[j & 15][j >> 4] += a;
#endif
}

/* x[j] = a (j, a uniform) */
template <int N> SB_HDI void rset(const Grp &G, Row<N> &x, int j, float a)
{
#if SB_LANES_DEV
	int k = j >> 4;
	if (G.lane == (j & 15)) {
#pragma unroll
		for (int kk = 0; kk < N; kk++)
			if (kk == k)
				x.v[kk] = a;
	}
#else
	x.v[j & 15][j >> 4] = a;
#endif
}

/* number of elements j' < j (j' over the whole row) with flag set, given per-element
 * flags; used to keep the lowest-index ties. Returns the count for element (l, k)
 * in cnt.at(l, k) and the total. */
template <int N> SB_HDI int32_t rprefix(const Grp &G, IRow<N> &cnt, const IRow<N> &flag_in)
{
	IRow<N> &flag = const_cast<IRow<N> &>(flag_in);
#if SB_LANES_DEV
	int32_t base = 0;
	unsigned below = (1u << G.lane) - 1u;
	int shift = (threadIdx.x & 16);
#pragma unroll
	for (int k = 0; k < N; k++) {
		unsigned b = ((__ballot_sync(G.mask, flag.v[k] != 0) & G.mask) >> shift) & 0xFFFFu;
		cnt.v[k] = base + __popc(b & below);
		base += __popc(b);
	}
	return base;
#else
	int32_t c = 0;
	for (int k = 0; k < N; k++)
		for (int l = 0; l < SB_VW; l++) {
			cnt.v[l][k] = c;
			c += flag.v[l][k] != 0;
		}
	return c;
#endif
}

/* ---------------------------------------------------------------- element functions */

/* attn_norm_vec.h's exp_v, log_pos_v and powpos_v for one lane, operation by operation
 * (tests/unit/test_cuda_host_portable.c holds the row kernels to the portable bits) */
SB_HDI float sb_exp_f(float x)
{
	float xc = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
	float t = xc * 1.44269504088896341f + 12582912.0f;
	float n = t - 12582912.0f;
	float r = xc - n * 0.693359375f;
	r = r - n * -2.12194440054690583e-4f;
	float q = 1.0f / 5040.0f;
	q = q * r + 1.0f / 720.0f;
	q = q * r + 1.0f / 120.0f;
	q = q * r + 1.0f / 24.0f;
	q = q * r + 1.0f / 6.0f;
	q = q * r + 0.5f;
	q = q * r + 1.0f;
	q = q * r + 1.0f;
	int32_t ni = sb_f_bits(t) - 0x4B400000;
	float scale = sb_f_from_bits((ni + 127) << 23);
	float e = q * scale;
	e = x > 88.0f ? INFINITY : e;
	return x < -87.0f ? 0.0f : e;
}

SB_HDI float sb_log_pos(float x)
{
	int32_t i = sb_f_bits(x);
	int32_t k = ((i >> 23) & 0xff) - 127;
	float m = sb_f_from_bits((i & 0x007fffff) | 0x3f800000);
	int big = m > 1.41421356f;
	m = big ? m * 0.5f : m;
	k = big ? k + 1 : k;
	float u = (m - 1.0f) / (m + 1.0f);
	float u2 = u * u;
	float q = 1.0f / 9.0f;
	q = q * u2 + 1.0f / 7.0f;
	q = q * u2 + 1.0f / 5.0f;
	q = q * u2 + 1.0f / 3.0f;
	q = q * u2 + 1.0f;
	float lm = 2.0f * u * q;
	float kf = (float)k;
	return kf * 0.693359375f + (lm + kf * -2.12194440054690583e-4f);
}

#define SB_FLT_MIN 1.17549435082228750797e-38f

SB_HDI float sb_powpos(float d, float e)
{
	float dc = d > SB_FLT_MIN ? d : 1.0f;
	float u = sb_exp_f(e * sb_log_pos(dc));
	return d > SB_FLT_MIN ? u : 0.0f;
}

/* ---- the CPU backend's vector exp and normal CDF (backend_cpu_simd.h), per element ---- */

SB_HDI float sb_vexp1(float x)
{
	const float lo = -87.33654475f, hi = 88.72283905f;
	int nan = x != x;
	int under = x < lo, over = x > hi;
	float xc = x > lo ? x : lo;
	xc = xc < hi ? xc : hi;
	const float magic = 12582912.0f;
	float n = fmaf(xc, 1.44269504089f, magic) - magic;
	float r = fmaf(n, -0.693145751953125f, xc);
	r = fmaf(n, -1.428606765330187e-06f, r);
	float p = 1.385929063e-03f;
	p = fmaf(p, r, 8.374763653e-03f);
	p = fmaf(p, r, 4.166772589e-02f);
	p = fmaf(p, r, 1.666642129e-01f);
	p = fmaf(p, r, 4.999999404e-01f);
	p = fmaf(p, r, 1.0f);
	p = fmaf(p, r, 1.0f);
	int32_t ni = (int32_t)n;
	int32_t n1 = ni >> 1, n2 = ni - n1;
	float s1 = sb_f_from_bits((n1 + 127) << 23), s2 = sb_f_from_bits((n2 + 127) << 23);
	float res = p * s1 * s2;
	res = under ? 0.0f : res;
	res = over ? INFINITY : res;
	return nan ? x : res;
}

SB_HDI float sb_verfcx_q(float t)
{
	float q = 4.319543391e-02f;
	q = fmaf(q, t, -2.347335964e-01f);
	q = fmaf(q, t, 4.936949313e-01f);
	q = fmaf(q, t, -4.549739957e-01f);
	q = fmaf(q, t, 1.321770400e-01f);
	q = fmaf(q, t, -5.921135843e-02f);
	q = fmaf(q, t, 9.346243739e-02f);
	q = fmaf(q, t, 1.753159761e-01f);
	q = fmaf(q, t, 2.468845695e-01f);
	q = fmaf(q, t, 2.820937634e-01f);
	q = fmaf(q, t, 2.820948064e-01f);
	return q;
}

/* Phi(x), phi(x) as vnormcdf, with its exact u^2 = (h + l)/2: h = x*x, l = fma(x, x, -h),
 * E = e^{-h/2} (1 - l/2) */
SB_HDI void sb_normcdf1(float x, float *Phi, float *phi)
{
	float u = fabsf(x) * 0.70710678118654752f;
	float t = 1.0f / fmaf(u, 0.5f, 1.0f);
	float h = x * x;
	float l = fmaf(x, x, -h);
	float E = sb_vexp1(h * -0.5f) * fmaf(l, -0.5f, 1.0f);
	float half_erfc = 0.5f * (E * (t * sb_verfcx_q(t)));
	*Phi = x >= 0.0f ? 1.0f - half_erfc : half_erfc;
	*phi = E * 0.39894228040143268f;
}

SB_HDI float sb_gelu1(float x)
{
	float Phi, phi;
	sb_normcdf1(x, &Phi, &phi);
	return x * Phi;
}

SB_HDI float sb_dgelu1(float x)
{
	float Phi, phi;
	sb_normcdf1(x, &Phi, &phi);
	return fmaf(x, phi, Phi);
}

/* ---- Philox-4x32-10 (lib/rng.c) ---- */

SB_HDI void sb_philox(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2])
{
	uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
	uint32_t k0 = key[0], k1 = key[1];
	for (int i = 0; i < 10; i++) {
		if (i) {
			k0 += 0x9E3779B9u;
			k1 += 0xBB67AE85u;
		}
		uint64_t p0 = (uint64_t)0xD2511F53u * c0;
		uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
		uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
		uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
		uint32_t n0 = hi1 ^ c1 ^ k0;
		uint32_t n2 = hi0 ^ c3 ^ k1;
		c0 = n0;
		c1 = lo1;
		c2 = n2;
		c3 = lo0;
	}
	out[0] = c0;
	out[1] = c1;
	out[2] = c2;
	out[3] = c3;
}

/* the key of (seed, purpose) as lib/rng.c's make_key */
SB_HDI void sb_rng_key(uint32_t key[2], uint64_t seed, uint32_t purpose)
{
	key[0] = (uint32_t)seed;
	key[1] = purpose ^ (uint32_t)(seed >> 32) * 0x9E3779B9u;
}

/* sb_rng_word_at with a precomputed key */
SB_HDI uint32_t sb_word_at(const uint32_t key[2], uint64_t stream, uint64_t i)
{
	uint64_t blk = i >> 2;
	uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)(blk >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
	uint32_t out[4];
	sb_philox(out, ctr, key);
	return out[i & 3];
}

/* keep threshold: kept when word >> 8 >= thr (backend_cpu.c's drop_threshold) */
static inline uint32_t sb_drop_threshold(float p)
{
	double t = ceil((double)p * 16777216.0);
	return t > 16777216.0 ? 16777217u : (uint32_t)t;
}

/* ---- AdamW, one element, as backend_cpu.c's adam_chunk ---- */

struct sb_adam_k {
	float decay, b1, omb1, b2, omb2, step_size, bc2_sqrt, eps;
};

SB_HDI void sb_adamw1(float *pp, float *mp, float *vp, float g, const struct sb_adam_k *a)
{
	float p = *pp * a->decay;
	float m = *mp * a->b1 + g * a->omb1;
	float v = *vp * a->b2 + a->omb2 * (g * g);
	float denom = sqrtf(v) / a->bc2_sqrt + a->eps;
	p = p + (-a->step_size) * (m / denom);
	*pp = p;
	*mp = m;
	*vp = v;
}

static inline struct sb_adam_k sb_adam_consts(float lr, float b1, float b2, float eps, float wd, int64_t t)
{
	double bc1 = 1.0 - pow((double)b1, (double)t), bc2 = 1.0 - pow((double)b2, (double)t);
	struct sb_adam_k a;
	a.decay = (float)(1.0 - (double)lr * (double)wd);
	a.b1 = b1;
	a.omb1 = (float)(1.0 - (double)b1);
	a.b2 = b2;
	a.omb2 = (float)(1.0 - (double)b2);
	a.step_size = (float)((double)lr / bc1);
	a.bc2_sqrt = (float)sqrt(bc2);
	a.eps = eps;
	return a;
}

#endif
