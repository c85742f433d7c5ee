/* ln_rows.cuh — one layer-norm row (with the residual and dropout of
 * residual_ln_forward/backward) on a 16-lane group, as lib/backend_cpu.c
 * computes it: columns c < d - d%16 in 16 lanes (lane l owns c = l + 16 k),
 * combined by the lane tree, the rest added one by one; FMA where the CPU uses
 * vfma/sfma. Private to lib/cuda/; the host build is tested against the CPU
 * backend by tests/unit/test_cuda_host.c.
 */
#ifndef SB_CUDA_LN_ROWS_CUH
#define SB_CUDA_LN_ROWS_CUH

#include "lanes.cuh"

#define SB_LN_EPS 1e-5f

/* the dropout keep bit of flat element i */
SB_HDI int ln_keep(const uint32_t key[2], uint64_t stream, uint64_t i, uint32_t thr)
{
	return (sb_word_at(key, stream, i) >> 8) >= thr;
}

struct LnDrop {
	int on;        /* y given and p > 0 */
	float sc;      /* 1/(1-p) */
	uint32_t key[2];
	uint64_t stream;
	uint64_t first; /* flat index of this row's element 0 in the batch tensor */
	uint32_t thr;
};

/* r = x + drop(y) (y may be NULL; r NULL: not stored), out = LN(r) w + b; mean/rstd returned;
 * mask (when drop->on) written for the row. d <= 16 N. */
template <int N>
SB_HDI void ln_row_fwd(const Grp &G, float *out, float *r, float *mean, float *rstd, uint8_t *mask, const float *x,
		       const float *y, const float *w, const float *b, const LnDrop *dr, int d)
{
	Row<N> rv;
	int d16 = d >= 16 ? d - d % 16 : 0;
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++)
	{
		int c = l + 16 * k;
		float v = 0.0f;
		if (c < d) {
			float xv = x[c];
			if (!y) {
				v = xv;
			} else if (dr->on) {
				int keep = ln_keep(dr->key, dr->stream, dr->first + (uint64_t)c, dr->thr);
				mask[c] = (uint8_t)keep;
				v = xv + (keep ? y[c] * dr->sc : 0.0f);
			} else {
				v = xv + y[c];
			}
			if (r)
				r[c] = v;
		}
		rv.at(l, k) = v;
	}
	/* mean */
	float s = 0;
	if (d16) {
		LV<float> a;
		FOR_LANES(G, l)
		{
			a[l] = 0.0f;
			KLOOP for (int k = 0; k < N; k++) if (l + 16 * k < d16) a[l] = a[l] + rv.at(l, k);
		}
		s = lsum(G, a);
	}
	for (int c = d16; c < d; c++)
		s += rget(G, rv, c);
	float mu = s / (float)d;
	float q = 0;
	if (d16) {
		LV<float> a;
		FOR_LANES(G, l)
		{
			a[l] = 0.0f;
			KLOOP for (int k = 0; k < N; k++) if (l + 16 * k < d16)
			{
				float t = rv.at(l, k) - mu;
				a[l] = fmaf(t, t, a[l]);
			}
		}
		q = lsum(G, a);
	}
	for (int c = d16; c < d; c++) {
		float t = rget(G, rv, c) - mu;
		q = fmaf(t, t, q);
	}
	float rs = 1.0f / sqrtf(q / (float)d + SB_LN_EPS);
	*mean = mu;
	*rstd = rs;
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++)
	{
		int c = l + 16 * k;
		if (c < d)
			out[c] = fmaf((rv.at(l, k) - mu) * rs, w[c], b[c]);
	}
}

/* dx = LN backward of g (row), dy = drop backward of dx (dy may be NULL); the
 * row's contributions to dw (g xh, fused) and db (g) are added to the lane
 * partials pw, pb (element (l, k) = column l + 16 k). */
template <int N>
SB_HDI void ln_row_bwd(const Grp &G, float *dx, float *dy, Row<N> &pw, Row<N> &pb, const float *g, const float *r,
		       float mu, float rs, const uint8_t *mask, const float *w, float p, int d)
{
	float sc = p > 0 ? 1.0f / (1.0f - p) : 1.0f;
	int d16 = d >= 16 ? d - d % 16 : 0;
	Row<N> xh, dxh;
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++)
	{
		int c = l + 16 * k;
		float a = 0, bb = 0;
		if (c < d) {
			a = (r[c] - mu) * rs;
			bb = g[c] * w[c];
			pw.at(l, k) = fmaf(g[c], a, pw.at(l, k));
			pb.at(l, k) = pb.at(l, k) + g[c];
		}
		xh.at(l, k) = a;
		dxh.at(l, k) = bb;
	}
	float s1 = 0, s2 = 0;
	if (d16) {
		LV<float> a1, a2;
		FOR_LANES(G, l)
		{
			a1[l] = 0.0f;
			a2[l] = 0.0f;
			KLOOP for (int k = 0; k < N; k++) if (l + 16 * k < d16)
			{
				a1[l] = a1[l] + dxh.at(l, k);
				a2[l] = fmaf(dxh.at(l, k), xh.at(l, k), a2[l]);
			}
		}
		s1 = lsum(G, a1);
		s2 = lsum(G, a2);
	}
	for (int c = d16; c < d; c++) {
		float a = rget(G, dxh, c), bx = rget(G, xh, c);
		s1 += a;
		s2 = fmaf(a, bx, s2);
	}
	float m1 = s1 / (float)d, m2 = s2 / (float)d;
	FOR_LANES(G, l)
	KLOOP for (int k = 0; k < N; k++)
	{
		int c = l + 16 * k;
		if (c < d) {
			float v = (dxh.at(l, k) - m1 - xh.at(l, k) * m2) * rs;
			dx[c] = v;
			if (dy)
				dy[c] = p > 0 ? (mask[c] ? v * sc : 0.0f) : v;
		}
	}
}

/* sb_cpu_layernorm_rows_backward, one row, serial (the CPU loop is scalar):
 * dx (= or += when acc); the row's dw, db contributions added to pw, pb[c]. */
SB_HDI void ln_row_bwd_plain(float *dx, float *pw, float *pb, const float *g, const float *x, float mu, float rs,
			     const float *w, int d, int acc)
{
	float s1 = 0, s2 = 0;
	for (int c = 0; c < d; c++) {
		float xh = (x[c] - mu) * rs;
		float dxh = g[c] * w[c];
		s1 += dxh;
		s2 = fmaf(dxh, xh, s2);
		if (pw) {
			pw[c] = fmaf(g[c], xh, pw[c]);
			pb[c] += g[c];
		}
	}
	float m1 = s1 / (float)d, m2 = s2 / (float)d;
	for (int c = 0; c < d; c++) {
		float xh = (x[c] - mu) * rs;
		float v = (g[c] * w[c] - m1 - xh * m2) * rs;
		dx[c] = acc ? dx[c] + v : v;
	}
}

#endif
