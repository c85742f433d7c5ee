/* norm_rows.cuh — one attention row through a normaliser, forward and exact
 * backward, on a 16-lane group (lanes.cuh): a half-warp on the GPU, a loop on
 * the host (the host build is what tests/unit/test_cuda_host.c checks against
 * lib/attn_norm.c). Private to lib/cuda/.
 *
 * This is lib/attn_norm.c's AUTO path, pass by pass and lane by lane (see that
 * file for the mathematics). The one structural difference: attn_norm.c first
 * builds an "effective row" (finite valid scores, then margin pads) and
 * scatters back; here the row stays in place, with every key that is not in
 * the effective row set to -inf (the value attn_norm.c pads its buffers with)
 * and kept out of the selection counts and of the argmin/argmax. For rows whose
 * valid keys are all finite (every row in training, barring overflow) the
 * element-to-lane assignment is the same as attn_norm.c's, so the results are
 * bit-identical; a row with a -inf valid key is normalised exactly but with its
 * sums in another order. Sparsemax rows that need more than 64 Michelot passes
 * (attn_norm.c then switches to a sort) keep iterating to the same threshold.
 *
 * Errors are data, not aborts: status 2 = "no finite score among the valid
 * keys" (attn_norm.c's SB_EDATA), reported through the caller's error flag.
 */
#ifndef SB_CUDA_NORM_ROWS_CUH
#define SB_CUDA_NORM_ROWS_CUH

#include "lanes.cuh"
#include "../entmax_step.h"

/* mirrors enum sb_norm_kind / sb_mask_mode (static_assert in the .cu files) */
enum { NK_SOFTMAX, NK_TOPK, NK_BOTTOMK, NK_SPARSEMAX, NK_ENTMAX15, NK_ENTMAX_BISECT, NK_ADAPTIVE };

struct NormP {
	int kind;
	int margin;   /* 1: SB_MASK_MARGIN, 0: SB_MASK_EXCLUDE */
	int unrolled; /* study's 18-iteration bisection */
	double ratio; /* top-k ratio */
};

#define NR_MARGIN 60.0f
#define NR_UNROLL 18

SB_HDI int nr_uses_alpha(int kind) { return kind == NK_ENTMAX_BISECT || kind == NK_ADAPTIVE; }

/* sb_norm_topk_k */
SB_HDI int nr_topk_k(double ratio, int n_valid)
{
	if (n_valid < 1)
		return 0;
	double c = ceil(ratio * (double)n_valid);
	return c < 1 ? 1 : c > n_valid ? n_valid : (int)c;
}

/* method_am1: alpha - 1 after the clamp (NaN stays NaN) */
SB_HDI float nr_am1(int kind, float alpha)
{
	if (kind == NK_ENTMAX15)
		return 0.5f;
	if (sb_isnan(alpha))
		return alpha;
	float a = alpha < 1.05f ? 1.05f : alpha > 2.0f ? 2.0f : alpha;
	return a - 1.0f;
}

enum { EM_ONE, EM_TWO, EM_GEN };
SB_HDI int nr_emode(float am1) { return am1 == 1.0f ? EM_ONE : am1 == 0.5f ? EM_TWO : EM_GEN; }

struct RowInfo {
	int n;      /* keys in the effective row */
	int bad;    /* 1: NaN/+inf valid score (NaN row); 2: no finite valid score */
	int npads;  /* margin pads at [n_valid, T) */
	int argmin; /* position of the min finite valid score (margin gradient) */
};

/* (value, index) extremum over the keys with x != -inf (lowest index on ties) */
template <int N> SB_HDI int nr_argext(const Grp &G, const Row<N> &x, int limit, int want_min)
{
	LV<float> bv;
	LV<int32_t> bi;
	FOR_LANES(G, l)
	{
		bv[l] = 0.0f;
		bi[l] = 0x7fffffff;
		KLOOP for (int k = 0; k < N; k++) {
			int j = l + 16 * k;
			float v = x.at(l, k);
			if (j >= limit || v == -INFINITY)
				continue;
			int better = bi[l] == 0x7fffffff || (want_min ? v < bv[l] : v > bv[l]);
			if (better) {
				bv[l] = v;
				bi[l] = j;
			}
		}
	}
#if SB_LANES_DEV
	float v = bv.v;
	int32_t i = bi.v;
	for (int w = 8; w >= 1; w >>= 1) {
		float ov = __shfl_xor_sync(G.mask, v, w, 16);
		int32_t oi = __shfl_xor_sync(G.mask, i, w, 16);
		int take;
		if (oi == 0x7fffffff)
			take = 0;
		else if (i == 0x7fffffff)
			take = 1;
		else
			take = (want_min ? ov < v : ov > v) || (ov == v && oi < i);
		if (take) {
			v = ov;
			i = oi;
		}
	}
	return i;
#else
	float v = 0;
	int32_t i = 0x7fffffff;
	for (int l = 0; l < SB_VW; l++) {
		if (bi.v[l] == 0x7fffffff)
			continue;
		int take = i == 0x7fffffff || (want_min ? bv.v[l] < v : bv.v[l] > v) || (bv.v[l] == v && bi.v[l] < i);
		if (take) {
			v = bv.v[l];
			i = bi.v[l];
		}
	}
	return i;
#endif
}

/* attn_norm.c's row_build, in place: x[j] = s[j] for valid keys, pads at
 * [n_valid, T) (margin) or -inf (exclusion), -inf past T. */
template <int N>
SB_HDI void nr_build(const Grp &G, Row<N> &x, RowInfo *ri, const float *s, int T, int n_valid, int margin)
{
	LV<int> badv;
	LV<int32_t> cnt;
	FOR_LANES(G, l)
	{
		badv[l] = 0;
		cnt[l] = 0;
		KLOOP for (int k = 0; k < N; k++) {
			int j = l + 16 * k;
			float v = -INFINITY;
			if (j < n_valid) {
				v = s[j];
				if (sb_isnan(v) || v == INFINITY)
					badv[l] = 1;
				cnt[l] += v != -INFINITY;
			}
			x.at(l, k) = v;
		}
	}
	ri->bad = 0;
	ri->npads = 0;
	ri->argmin = -1;
	ri->n = 0;
	if (lany(G, badv)) {
		ri->bad = 1;
		return;
	}
	int nv = lisum(G, cnt);
	if (nv == 0) {
		ri->bad = 2;
		return;
	}
	if (margin && n_valid < T) {
		int am = nr_argext(G, x, n_valid, 1);
		float pad = rget(G, x, am) - NR_MARGIN;
		ri->argmin = am;
		ri->npads = T - n_valid;
		FOR_LANES(G, l)
		KLOOP for (int k = 0; k < N; k++) {
			int j = l + 16 * k;
			if (j >= n_valid && j < T)
				x.at(l, k) = pad;
		}
	}
	ri->n = nv + ri->npads;
}

template <int N> SB_HDI float nr_vmax(const Grp &G, const Row<N> &x)
{
	LV<float> acc;
	FOR_LANES(G, l)
	{
		acc[l] = x.at(l, 0);
		KLOOP for (int k = 1; k < N; k++)
			acc[l] = x.at(l, k) > acc[l] ? x.at(l, k) : acc[l];
	}
	return lmax(G, acc);
}

/* ---------------------------------------------------------------- forward pieces */

template <int N> SB_HDI void nr_softmax(const Grp &G, Row<N> &p, const Row<N> &x, float *aux)
{
	float m = nr_vmax(G, x);
	LV<float> acc;
	FOR_LANES(G, l)
	{
		acc[l] = 0.0f;
		KLOOP for (int k = 0; k < N; k++) {
			float e = sb_exp_f(x.at(l, k) - m);
			p.at(l, k) = e;
			acc[l] += e;
		}
	}
	float z = lsum(G, acc);
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++)
		p.at(l, k) = p.at(l, k) / z;
	aux[0] = m;
	aux[1] = m;
}

SB_HDI int32_t nr_sort_key(float f)
{
	int32_t b = sb_f_bits(f + 0.0f);
	return b ^ ((b >> 31) & 0x7fffffff);
}

/* select_k_iter: keep (1/0) the kk largest (or smallest) keys, ties to the lower index */
template <int N>
SB_HDI int nr_select_k(const Grp &G, Row<N> &keep, const Row<N> &x, int n, int kk, int largest)
{
	IRow<N> key;
	int32_t flip = largest ? 0 : -1;
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++) {
		float v = x.at(l, k);
		key.at(l, k) = v == -INFINITY ? (int32_t)INT32_MIN : (nr_sort_key(v) ^ flip);
	}
	if (kk >= n) {
		FOR_LANES(G, l)
		KLOOP for (int k = 0; k < N; k++)
			keep.at(l, k) = key.at(l, k) != (int32_t)INT32_MIN ? 1.0f : 0.0f;
		return 0;
	}
	LV<int32_t> kmn, kmx;
	FOR_LANES(G, l)
	{
		kmn[l] = INT32_MAX;
		kmx[l] = INT32_MIN;
		KLOOP for (int k = 0; k < N; k++) {
			int32_t v = key.at(l, k);
			kmx[l] = v > kmx[l] ? v : kmx[l];
			v = v == (int32_t)INT32_MIN ? INT32_MAX : v;
			kmn[l] = v < kmn[l] ? v : kmn[l];
		}
	}
	int32_t mn = limin(G, kmn), mx = limax(G, kmx);
	int64_t lo = mn, hi = (int64_t)mx + 1;
	int clo = n, chi = 0, passes = 0;
	while (hi - lo > 1 && clo != kk) {
		int32_t mid = (int32_t)(lo + (hi - lo) / 2);
		LV<int32_t> c;
		FOR_LANES(G, l)
		{
			c[l] = 0;
			KLOOP for (int k = 0; k < N; k++)
				c[l] += key.at(l, k) >= mid;
		}
		int cc = lisum(G, c);
		passes++;
		if (cc >= kk) {
			lo = mid;
			clo = cc;
		} else {
			hi = mid;
			chi = cc;
		}
	}
	int32_t t = (int32_t)lo;
	if (clo == kk) {
		FOR_LANES(G, l)
		KLOOP for (int k = 0; k < N; k++)
			keep.at(l, k) = key.at(l, k) >= t ? 1.0f : 0.0f;
	} else {
		IRow<N> tie, before;
		FOR_LANES(G, l)
		KLOOP for (int k = 0; k < N; k++)
			tie.at(l, k) = key.at(l, k) == t;
		rprefix(G, before, tie);
		int need = kk - chi;
		FOR_LANES(G, l)
		KLOOP for (int k = 0; k < N; k++) {
			int32_t v = key.at(l, k);
			keep.at(l, k) = (v > t || (v == t && before.at(l, k) < need)) ? 1.0f : 0.0f;
		}
	}
	return passes;
}

template <int N>
SB_HDI void nr_softmax_kept(const Grp &G, Row<N> &p, const Row<N> &x, const Row<N> &keep, float *aux)
{
	LV<float> mx;
	FOR_LANES(G, l)
	{
		mx[l] = -INFINITY;
		KLOOP for (int k = 0; k < N; k++) {
			float v = keep.at(l, k) != 0 ? x.at(l, k) : -INFINITY;
			mx[l] = v > mx[l] ? v : mx[l];
		}
	}
	float m = lmax(G, mx);
	LV<float> acc;
	FOR_LANES(G, l)
	{
		acc[l] = 0.0f;
		KLOOP for (int k = 0; k < N; k++) {
			float e = sb_exp_f(x.at(l, k) - m);
			e = keep.at(l, k) != 0 ? e : 0.0f;
			p.at(l, k) = e;
			acc[l] += e;
		}
	}
	float z = lsum(G, acc);
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++)
		p.at(l, k) = p.at(l, k) / z;
	aux[0] = m;
}

/* sum of v over the keys with key > t, in the lanes' order; *count = their number */
template <int N> SB_HDI float nr_sum_where(const Grp &G, const Row<N> &key, float t, const Row<N> &v, int *count)
{
	LV<float> acc;
	LV<int32_t> cnt;
	FOR_LANES(G, l)
	{
		acc[l] = 0.0f;
		cnt[l] = 0;
		KLOOP for (int k = 0; k < N; k++) {
			int in = key.at(l, k) > t;
			acc[l] += in ? v.at(l, k) : 0.0f;
			cnt[l] += in;
		}
	}
	*count = lisum(G, cnt);
	return lsum(G, acc);
}

/* Michelot's passes (sparsemax_tau_iter); cap 64 as attn_norm.c, then (where
 * attn_norm.c sorts) more passes to the same fixed point. */
template <int N> SB_HDI int nr_sparsemax_tau(const Grp &G, float *tau_out, const Row<N> &y)
{
	float tau = -1.0f;
	int kprev = -1;
	for (int it = 1; it <= 64 + 16 * N + 2; it++) {
		int k;
		float sum = nr_sum_where(G, y, tau, y, &k);
		float tn = (sum - 1.0f) / (float)k;
		if (k == kprev) {
			*tau_out = tn;
			return it <= 64 ? it : -1;
		}
		kprev = k;
		tau = tn > tau ? tn : tau;
	}
	*tau_out = tau;
	return -1;
}

template <int N> SB_HDI void nr_sparsemax(const Grp &G, Row<N> &p, Row<N> &y, const Row<N> &x, float *aux)
{
	float m = nr_vmax(G, x);
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++)
		y.at(l, k) = x.at(l, k) - m;
	float tau;
	int it = nr_sparsemax_tau(G, &tau, y);
	LV<int32_t> cnt;
	FOR_LANES(G, l)
	{
		cnt[l] = 0;
		KLOOP for (int k = 0; k < N; k++) {
			float d = y.at(l, k) - tau;
			p.at(l, k) = d > 0 ? d : 0.0f;
			cnt[l] += d > 0;
		}
	}
	aux[0] = tau;
	aux[1] = m;
	aux[2] = (float)it;
	aux[3] = (float)lisum(G, cnt);
}

/* y = x (alpha-1) - max(x)(alpha-1); returns max x */
template <int N> SB_HDI float nr_entmax_y(const Grp &G, Row<N> &y, const Row<N> &x, float am1)
{
	float m = nr_vmax(G, x);
	float ym = m * am1;
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++)
		y.at(l, k) = x.at(l, k) * am1 - ym;
	return m;
}

template <int N>
SB_HDI float nr_entmax_sum(const Grp &G, Row<N> &u, const Row<N> &y, float tau, float e, int mode)
{
	LV<float> acc;
	FOR_LANES(G, l)
	{
		acc[l] = 0.0f;
		KLOOP for (int k = 0; k < N; k++) {
			float v;
			if (mode == EM_ONE) {
				float d = y.at(l, k) - tau;
				v = d > 0 ? d : 0.0f;
			} else if (mode == EM_TWO) {
				float d = y.at(l, k) - tau;
				d = d > 0 ? d : 0.0f;
				v = d * d;
			} else {
				v = sb_powpos(y.at(l, k) - tau, e);
			}
			u.at(l, k) = v;
			acc[l] += v;
		}
	}
	return lsum(G, acc);
}

/* attn_norm.c's entmax15_newton: alpha = 1.5 */
template <int N> SB_HDI int nr_entmax15_newton(const Grp &G, Row<N> &p, float *tau_out, float *Z, const Row<N> &y)
{
	float tau = -1.0f;
	int it;
	for (it = 1; it <= 100; it++) {
		LV<float> a0, a1;
		FOR_LANES(G, l)
		{
			a0[l] = 0.0f;
			a1[l] = 0.0f;
			KLOOP for (int k = 0; k < N; k++) {
				float d = y.at(l, k) - tau;
				d = d > 0 ? d : 0.0f;
				p.at(l, k) = d * d;
				a0[l] += d * d;
				a1[l] += d;
			}
		}
		float se = lsum(G, a0), se1 = lsum(G, a1);
		*Z = se;
		float tn = tau + (se - sqrtf(se)) / se1;
		if (!(tn > tau))
			break;
		tau = tn;
	}
	*tau_out = tau;
	return it;
}

/* attn_norm.c's entmax_tau0: Jensen's lower bound on the root, general alpha */
template <int N> SB_HDI float nr_entmax_tau0(const Grp &G, const Row<N> &y, float am1)
{
	const float thr[4] = {-1.0f, -0.5f, -0.25f, -0.125f};
	float t0 = -1.0f;
	for (int t = 0; t < 4; t++) {
		int k;
		float sum = nr_sum_where(G, y, thr[t], y, &k);
		float kf = (float)k;
		float bound = sum / kf - sb_powpos(kf, -am1);
		t0 = bound > t0 ? bound : t0;
	}
	return sb_entmax_tau0_backoff(t0);
}

/* attn_norm.c's entmax_halley: Halley from Jensen's bound, general alpha */
template <int N>
SB_HDI int nr_entmax_halley(const Grp &G, Row<N> &p, float *tau_out, float *Z, const Row<N> &y, float am1)
{
	float e = 1.0f / am1, em1 = e - 1.0f;
	float tau = nr_entmax_tau0(G, y, am1), last = INFINITY;
	int it;
	for (it = 1;; it++) {
		LV<float> a0, a1, a2;
		FOR_LANES(G, l)
		{
			a0[l] = 0.0f;
			a1[l] = 0.0f;
			a2[l] = 0.0f;
			KLOOP for (int k = 0; k < N; k++) {
				float d = y.at(l, k) - tau;
				float u = sb_powpos(d, e);
				float r = 1.0f / (d > SB_FLT_MIN ? d : 1.0f);
				float w = u * r;
				p.at(l, k) = u;
				a0[l] += u;
				a1[l] += w;
				a2[l] += w * r;
			}
		}
		float F = lsum(G, a0), S1 = lsum(G, a1), S2 = lsum(G, a2), tn;
		*Z = F;
		if (!sb_entmax_halley_step(&tn, &last, tau, F, S1, S2, am1, em1, it))
			break;
		tau = tn;
	}
	*tau_out = tau;
	return it;
}

template <int N>
SB_HDI void nr_entmax(const Grp &G, Row<N> &p, Row<N> &y, const Row<N> &x, float am1, float *aux)
{
	int mode = nr_emode(am1);
	if (mode == EM_ONE) {
		nr_sparsemax(G, p, y, x, aux);
		return;
	}
	float m = nr_entmax_y(G, y, x, am1);
	float tau, Z;
	int it = mode == EM_GEN ? nr_entmax_halley(G, p, &tau, &Z, y, am1) : nr_entmax15_newton(G, p, &tau, &Z, y);
	LV<int32_t> cnt;
	FOR_LANES(G, l)
	{
		cnt[l] = 0;
		KLOOP for (int k = 0; k < N; k++) {
			p.at(l, k) = p.at(l, k) / Z;
			cnt[l] += p.at(l, k) > 0;
		}
	}
	aux[0] = tau;
	aux[1] = m;
	aux[2] = (float)it;
	aux[3] = (float)lisum(G, cnt);
}

struct NrUnrolled {
	float lo0, hi0, hi, c, Z, e;
	int amin, amax;
	unsigned bits;
};

template <int N>
SB_HDI void nr_unrolled_run(const Grp &G, NrUnrolled *st, Row<N> &u, Row<N> &y, const Row<N> &x, int T, float am1)
{
	int mode = nr_emode(am1);
	float e = 1.0f / am1;
	nr_entmax_y(G, y, x, am1);
	int amin = nr_argext(G, y, 16 * N, 1), amax = nr_argext(G, y, 16 * N, 0);
	float lo = rget(G, y, amin) - 1.0f;
	float c = powf((float)(1.0 / (double)T), am1);
	float hi = rget(G, y, amax) - c;
	st->lo0 = lo;
	st->hi0 = hi;
	st->c = c;
	st->bits = 0;
	for (int t = 0; t < NR_UNROLL; t++) {
		float tau = (lo + hi) / 2.0f;
		float s = nr_entmax_sum(G, u, y, tau, e, mode);
		if (s - 1.0f >= 0.0f) {
			lo = tau;
			st->bits |= 1u << t;
		} else {
			hi = tau;
		}
	}
	st->hi = hi;
	st->Z = nr_entmax_sum(G, u, y, hi, e, mode);
	st->e = e;
	st->amin = amin;
	st->amax = amax;
}

template <int N>
SB_HDI void nr_unrolled(const Grp &G, Row<N> &p, Row<N> &y, const Row<N> &x, int T, float am1, float *aux)
{
	NrUnrolled st;
	nr_unrolled_run(G, &st, p, y, x, T, am1);
	float z = st.Z + 1e-12f;
	LV<int32_t> cnt;
	FOR_LANES(G, l)
	{
		cnt[l] = 0;
		KLOOP for (int k = 0; k < N; k++) {
			p.at(l, k) = p.at(l, k) / z;
			cnt[l] += p.at(l, k) > 0;
		}
	}
	aux[0] = st.hi;
	aux[1] = rget(G, x, st.amax);
	aux[2] = (float)st.bits;
	aux[3] = (float)lisum(G, cnt);
}

/* ---------------------------------------------------------------- forward */

/* Normalise the row s[0..T) (n_valid valid keys). p gets the probabilities for
 * j < T (zeros past T); aux[0..3] as sb_norm_forward's (uniform). Returns 0, or
 * 2 when the row has no finite valid score (p untouched). */
template <int N>
SB_HDI int nr_forward(const Grp &G, const NormP &nm, Row<N> &p, float *aux, const float *s, int T, int n_valid,
		      float alpha)
{
	Row<N> x, y;
	RowInfo ri;
	aux[0] = aux[1] = aux[2] = aux[3] = 0.0f;
	nr_build(G, x, &ri, s, T, n_valid, nm.margin);
	if (ri.bad == 2)
		return 2;
	float am1 = nr_am1(nm.kind, alpha);
	if (ri.bad || (nr_uses_alpha(nm.kind) && sb_isnan(am1))) {
		FOR_LANES(G, l)
		KLOOP for (int k = 0; k < N; k++)
			p.at(l, k) = l + 16 * k < T ? NAN : 0.0f;
		aux[3] = NAN;
		return 0;
	}
	int n = ri.n;
	switch (nm.kind) {
	case NK_SOFTMAX:
		nr_softmax(G, p, x, aux);
		aux[3] = (float)n;
		break;
	case NK_TOPK:
	case NK_BOTTOMK: {
		int k = nr_topk_k(nm.ratio, n_valid);
		int kk = k < n ? k : n;
		aux[2] = (float)nr_select_k(G, y, x, n, kk, nm.kind == NK_TOPK);
		nr_softmax_kept(G, p, x, y, aux);
		aux[1] = aux[0]; /* the largest kept score, as the CPU's (lib/attn_norm.h); for
				  * bottom-k that is not the row's maximum */
		aux[3] = (float)kk;
		break;
	}
	case NK_SPARSEMAX:
		nr_sparsemax(G, p, y, x, aux);
		break;
	default: /* entmax15, entmax_bisect, adaptive */
		if (nm.unrolled)
			nr_unrolled(G, p, y, x, T, am1, aux);
		else
			nr_entmax(G, p, y, x, am1, aux);
		break;
	}
	/* keys outside the effective row get exactly 0 */
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++)
		if (x.at(l, k) == -INFINITY)
			p.at(l, k) = 0.0f;
	return 0;
}

/* ---------------------------------------------------------------- backward pieces */

template <int N> SB_HDI void nr_kb_softmax(const Grp &G, Row<N> &de, const Row<N> &pe, const Row<N> &ge)
{
	LV<float> acc;
	FOR_LANES(G, l)
	{
		acc[l] = 0.0f;
		KLOOP for (int k = 0; k < N; k++)
			acc[l] += pe.at(l, k) * ge.at(l, k);
	}
	float d = lsum(G, acc);
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++)
		de.at(l, k) = pe.at(l, k) * (ge.at(l, k) - d);
}

template <int N> SB_HDI void nr_kb_sparsemax(const Grp &G, Row<N> &de, const Row<N> &pe, const Row<N> &ge)
{
	int k;
	float sum = nr_sum_where(G, pe, 0.0f, ge, &k);
	float mean = k ? sum / (float)k : 0.0f;
	FOR_LANES(G, l)
	KLOOP for (int kk = 0; kk < N; kk++) {
		float g = ge.at(l, kk) - mean;
		de.at(l, kk) = pe.at(l, kk) > 0 ? g : 0.0f;
	}
}

template <int N>
SB_HDI double nr_kb_entmax(const Grp &G, Row<N> &de, Row<N> &q, const Row<N> &pe, const Row<N> &ge,
			   const Row<N> &x, float tau, float am1, int want_alpha)
{
	int mode = nr_emode(am1);
	if (mode == EM_ONE) {
		FOR_LANES(G, l)
		KLOOP for (int k = 0; k < N; k++)
			q.at(l, k) = pe.at(l, k) > 0 ? 1.0f : 0.0f;
	} else {
		float m = nr_vmax(G, x), ym = m * am1;
		FOR_LANES(G, l)
		KLOOP for (int k = 0; k < N; k++) {
			float d = (x.at(l, k) * am1 - ym) - tau;
			float pv = pe.at(l, k);
			int in = pv > 0 && d > 0;
			float r = (in ? pv : 0.0f) / (in ? d : 1.0f);
			q.at(l, k) = r;
		}
	}
	LV<float> a0, a1;
	FOR_LANES(G, l)
	{
		a0[l] = 0.0f;
		a1[l] = 0.0f;
		KLOOP for (int k = 0; k < N; k++) {
			a0[l] += q.at(l, k);
			a1[l] += q.at(l, k) * ge.at(l, k);
		}
	}
	float Q = lsum(G, a0), QD = lsum(G, a1);
	float c = QD / Q;
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++)
		de.at(l, k) = q.at(l, k) * (ge.at(l, k) - c);
	if (!want_alpha)
		return 0;
	float e = 1.0f / am1;
	LV<float> h;
	FOR_LANES(G, l)
	{
		h[l] = 0.0f;
		KLOOP for (int k = 0; k < N; k++) {
			float pv = pe.at(l, k);
			float lp = sb_log_pos(pv > SB_FLT_MIN ? pv : 1.0f);
			h[l] += pv * lp;
		}
	}
	float ent = lsum(G, h);
	LV<float> acc;
	FOR_LANES(G, l)
	{
		acc[l] = 0.0f;
		KLOOP for (int k = 0; k < N; k++) {
			float pv = pe.at(l, k);
			float yq = q.at(l, k) / Q;
			float lp = sb_log_pos(pv > SB_FLT_MIN ? pv : 1.0f);
			float plp = pv * lp;
			float t = e * (pv - yq) - (plp - yq * ent);
			acc[l] += ge.at(l, k) * t;
		}
	}
	return (double)e * (double)lsum(G, acc);
}

template <int N>
SB_HDI double nr_kb_unrolled(const Grp &G, Row<N> &de, Row<N> &u, Row<N> &y, const Row<N> &ge, const Row<N> &x,
			     int T, float am1, int want_alpha)
{
	NrUnrolled st;
	nr_unrolled_run(G, &st, u, y, x, T, am1);
	float z = st.Z + 1e-12f, e = st.e;
	LV<float> a0;
	FOR_LANES(G, l)
	{
		a0[l] = 0.0f;
		KLOOP for (int k = 0; k < N; k++)
			a0[l] += ge.at(l, k) * (u.at(l, k) / z);
	}
	float P = lsum(G, a0);
	LV<float> a1, a2;
	FOR_LANES(G, l)
	{
		a1[l] = 0.0f;
		a2[l] = 0.0f;
		KLOOP for (int k = 0; k < N; k++) {
			float d = y.at(l, k) - st.hi;
			float dv = (ge.at(l, k) - P) / z;
			float uv = u.at(l, k);
			int in = d > SB_FLT_MIN && uv > 0;
			uv = in ? uv : 0.0f;
			float dc = in ? d : 1.0f;
			float dd = dv * e * (uv / dc);
			de.at(l, k) = dd;
			a1[l] += dd;
			a2[l] += dv * uv * sb_log_pos(dc);
		}
	}
	float dtau = -lsum(G, a1);
	double wlo = 1, whi = 0;
	for (int t = 0; t < NR_UNROLL; t++) {
		double a = 0.5 * (wlo + whi);
		if (st.bits >> t & 1u)
			wlo = a;
		else
			whi = a;
	}
	double w = whi;
	float dlo = (float)(w * dtau), dhi = (float)((1 - w) * dtau);
	radd(G, de, st.amin, dlo);
	radd(G, de, st.amax, dhi);
	double da = 0;
	if (want_alpha) {
		float xm = rget(G, x, st.amax);
		LV<float> a3;
		FOR_LANES(G, l)
		{
			a3[l] = 0.0f;
			KLOOP for (int k = 0; k < N; k++) {
				float xv = x.at(l, k) - xm;
				xv = x.at(l, k) != -INFINITY ? xv : 0.0f;
				a3[l] += de.at(l, k) * xv;
			}
		}
		float s3 = lsum(G, a3), s2 = lsum(G, a2);
		da = (double)s3 + (double)dhi * st.c * log((double)T) - (double)e * e * s2;
	}
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++)
		de.at(l, k) *= am1;
	return da;
}

/* ---------------------------------------------------------------- backward */

/* ds (j < T) from dp = g, the forward's p and tau = aux[0]; returns d loss/d alpha
 * of the row (0 unless want_alpha; NaN for a NaN row). ds may be the same Row as g. */
template <int N>
SB_HDI double nr_backward(const Grp &G, const NormP &nm, Row<N> &ds, const float *s, const Row<N> &p, const Row<N> &g,
			  float tau, int T, int n_valid, float alpha, int want_alpha)
{
	Row<N> x, pe, ge, y;
	RowInfo ri;
	nr_build(G, x, &ri, s, T, n_valid, nm.margin);
	float am1 = nr_am1(nm.kind, alpha);
	if (ri.bad || (nr_uses_alpha(nm.kind) && sb_isnan(am1))) {
		FOR_LANES(G, l)
		KLOOP for (int k = 0; k < N; k++)
			ds.at(l, k) = l + 16 * k < T ? NAN : 0.0f;
		return NAN;
	}
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++) {
		int in = x.at(l, k) != -INFINITY;
		pe.at(l, k) = in ? p.at(l, k) : 0.0f;
		ge.at(l, k) = in ? g.at(l, k) : 0.0f;
	}
	double da = 0;
	switch (nm.kind) {
	case NK_SOFTMAX:
	case NK_TOPK:
	case NK_BOTTOMK:
		nr_kb_softmax(G, ds, pe, ge);
		break;
	case NK_SPARSEMAX:
		nr_kb_sparsemax(G, ds, pe, ge);
		break;
	default:
		if (nm.unrolled)
			da = nr_kb_unrolled(G, ds, pe, y, ge, x, T, am1, want_alpha);
		else
			da = nr_kb_entmax(G, ds, y, pe, ge, x, tau, am1, want_alpha);
		break;
	}
	/* row_scatter_grad: pads' gradient to the minimum they copy; excluded keys 0 */
	float route = 0;
	for (int j = T - ri.npads; j < T; j++)
		route += rget(G, ds, j);
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++) {
		int j = l + 16 * k;
		int keep = j < T - ri.npads && x.at(l, k) != -INFINITY;
		ds.at(l, k) = keep ? ds.at(l, k) : 0.0f;
	}
	if (ri.npads)
		radd(G, ds, ri.argmin, route);
	return da;
}

#endif
