/* host_cuda.cu — the row kernels of the CUDA backend compiled for the host
 * (the same templates as the device code, with lanes.cuh's host lanes), so
 * tests/unit/test_cuda_host.c can check their arithmetic against the CPU
 * backend on a machine without a GPU. Needs no device and no driver. */
#define SB_LANES_HOST 1 /* host lanes in both nvcc passes */
#include <math.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "attn_norm.h"
#include "backend.h"
#include "err.h"
#include "rng.h"
}
#include "backend_cuda.h"
#include "cuda_common.cuh" /* SB_ERR without lib/err.c */
#include "ln_rows.cuh"
#include "norm_rows.cuh"

static NormP normp_of(const struct sb_norm *nm)
{
	NormP p;
	p.kind = (int)nm->kind;
	p.margin = nm->mask == SB_MASK_MARGIN;
	p.unrolled = nm->unrolled;
	p.ratio = nm->ratio;
	return p;
}

template <int N>
static int fwd_rows(const NormP &nm, float *p, float *aux, const float *s, int rows, int T, int n_valid, float alpha,
		    struct sb_err *err)
{
	Grp G = grp_host();
	for (int r = 0; r < rows; r++) {
		Row<N> pr;
		float ax[4];
		int rc = nr_forward<N>(G, nm, pr, ax, s + (size_t)r * T, T, n_valid, alpha);
		if (rc)
			return SB_ERR(err, SB_EDATA, "attn_norm: row %d: no finite score among its %d valid keys", r,
				      n_valid);
		for (int j = 0; j < T; j++)
			p[(size_t)r * T + j] = pr.v[j & 15][j >> 4];
		if (aux)
			for (int i = 0; i < 4; i++)
				aux[(size_t)r * 4 + i] = ax[i];
	}
	return 0;
}

template <int N>
static double bwd_rows(const NormP &nm, float *ds, const float *dp, const float *p, const float *aux, const float *s,
		       int rows, int T, int n_valid, float alpha, int want)
{
	Grp G = grp_host();
	double da = 0;
	for (int r = 0; r < rows; r++) {
		Row<N> pr, g;
		for (int l = 0; l < 16; l++)
			for (int k = 0; k < N; k++) {
				int j = l + 16 * k;
				pr.v[l][k] = j < T ? p[(size_t)r * T + j] : 0.0f;
				g.v[l][k] = j < T ? dp[(size_t)r * T + j] : 0.0f;
			}
		double d = nr_backward<N>(G, nm, g, s + (size_t)r * T, pr, g, aux[(size_t)r * 4], T, n_valid, alpha, want);
		if (isnan(d))
			da = NAN;
		else
			da += d;
		for (int j = 0; j < T; j++)
			ds[(size_t)r * T + j] = g.v[j & 15][j >> 4];
	}
	return da;
}

static int rows_n(int T)
{
	return T <= 16 ? 1 : T <= 32 ? 2 : T <= 64 ? 4 : T <= 80 ? 5 : T <= 112 ? 7 : T <= 128 ? 8 : T <= 256 ? 16 : 0;
}

static int check_args(const struct sb_norm *nm, int rows, int T, int n_valid, struct sb_err *err)
{
	if (!nm)
		return SB_ERR(err, SB_EINTERNAL, "attn_norm: no normaliser");
	if (rows < 0 || T < 1)
		return SB_ERR(err, SB_EDATA, "attn_norm: bad block shape rows=%d T=%d", rows, T);
	if (n_valid < 1 || n_valid > T)
		return SB_ERR(err, SB_EDATA, "attn_norm: n_valid = %d outside 1..%d", n_valid, T);
	if (!rows_n(T))
		return SB_ERR(err, SB_EINTERNAL, "attn_norm (cuda): T = %d > 256", T);
	return 0;
}

#define DISPATCH(T, CALL)                                                                                          \
	switch (rows_n(T)) {                                                                                       \
	case 1:                                                                                                    \
		CALL(1);                                                                                           \
		break;                                                                                             \
	case 2:                                                                                                    \
		CALL(2);                                                                                           \
		break;                                                                                             \
	case 4:                                                                                                    \
		CALL(4);                                                                                           \
		break;                                                                                             \
	case 5:                                                                                                    \
		CALL(5);                                                                                           \
		break;                                                                                             \
	case 7:                                                                                                    \
		CALL(7);                                                                                           \
		break;                                                                                             \
	case 8:                                                                                                    \
		CALL(8);                                                                                           \
		break;                                                                                             \
	default:                                                                                                   \
		CALL(16);                                                                                          \
		break;                                                                                             \
	}

extern "C" int sb_cuda_host_norm_forward(const struct sb_norm *nm, float *p, float *aux, const float *s, int rows,
					 int T, int n_valid, float alpha, struct sb_err *err)
{
	SB_TRY(check_args(nm, rows, T, n_valid, err));
	NormP np = normp_of(nm);
	int rc = 0;
#define F(NN) rc = fwd_rows<NN>(np, p, aux, s, rows, T, n_valid, alpha, err)
	DISPATCH(T, F)
#undef F
	return rc;
}

extern "C" void sb_cuda_host_norm_backward(const struct sb_norm *nm, float *ds, double *dalpha, const float *dp,
					   const float *p, const float *aux, const float *s, int rows, int T,
					   int n_valid, float alpha)
{
	if (check_args(nm, rows, T, n_valid, NULL) || !aux) {
		for (size_t i = 0; T > 0 && rows > 0 && i < (size_t)rows * T; i++)
			ds[i] = NAN;
		if (dalpha && nm && nr_uses_alpha((int)nm->kind))
			*dalpha = NAN;
		return;
	}
	NormP np = normp_of(nm);
	int ua = nr_uses_alpha(np.kind);
	int want = dalpha && ua && !(alpha < 1.05f) && !(alpha > 2.0f);
	double da = 0;
#define B_(NN) da = bwd_rows<NN>(np, ds, dp, p, aux, s, rows, T, n_valid, alpha, want)
	DISPATCH(T, B_)
#undef B_
	if (want || (dalpha && ua && isnan(da)))
		*dalpha += da;
}

static int lanes_d(int d) { return d <= 16 ? 1 : d <= 32 ? 2 : d <= 64 ? 4 : d <= 128 ? 8 : 16; }

template <int N>
static void ln_fwd_rows(float *out, float *r, float *mean, float *rstd, uint8_t *mask, const float *x, const float *y,
			const float *w, const float *b, const struct sb_dropout *drop, int M, int d)
{
	Grp G = grp_host();
	LnDrop dr;
	memset(&dr, 0, sizeof dr);
	dr.on = y && drop && drop->p > 0;
	if (dr.on) {
		dr.sc = 1.0f / (1.0f - drop->p);
		sb_rng_key(dr.key, drop->seed, SB_RNG_DROPOUT);
		dr.stream = drop->stream;
		dr.thr = sb_drop_threshold(drop->p);
	}
	for (int i = 0; i < M; i++) {
		dr.first = (dr.on ? drop->offset : 0) + (uint64_t)i * d;
		ln_row_fwd<N>(G, out + (size_t)i * d, r + (size_t)i * d, mean + i, rstd + i,
			      mask ? mask + (size_t)i * d : NULL, x + (size_t)i * d, y ? y + (size_t)i * d : NULL, w, b,
			      &dr, d);
	}
}

template <int N>
static void ln_bwd_rows(float *dx, float *dy, float *dw, float *db, const float *dout, const float *r,
			const float *mean, const float *rstd, const uint8_t *mask, const float *w, float p, int M, int d)
{
	Grp G = grp_host();
	for (int i = 0; i < M; i++) {
		Row<N> pw, pb;
		for (int l = 0; l < 16; l++)
			for (int k = 0; k < N; k++) {
				int c = l + 16 * k;
				pw.v[l][k] = c < d ? dw[c] : 0.0f;
				pb.v[l][k] = c < d ? db[c] : 0.0f;
			}
		ln_row_bwd<N>(G, dx + (size_t)i * d, dy ? dy + (size_t)i * d : NULL, pw, pb, dout + (size_t)i * d,
			      r + (size_t)i * d, mean[i], rstd[i], p > 0 ? mask + (size_t)i * d : NULL, w, p, d);
		for (int c = 0; c < d; c++) {
			dw[c] = pw.v[c & 15][c >> 4];
			db[c] = pb.v[c & 15][c >> 4];
		}
	}
}

extern "C" void sb_cuda_host_residual_ln_forward(float *out, float *r, float *mean, float *rstd, uint8_t *mask,
						 const float *x, const float *y, const float *w, const float *b,
						 const struct sb_dropout *drop, int M, int d)
{
	switch (lanes_d(d)) {
	case 1:
		ln_fwd_rows<1>(out, r, mean, rstd, mask, x, y, w, b, drop, M, d);
		break;
	case 2:
		ln_fwd_rows<2>(out, r, mean, rstd, mask, x, y, w, b, drop, M, d);
		break;
	case 4:
		ln_fwd_rows<4>(out, r, mean, rstd, mask, x, y, w, b, drop, M, d);
		break;
	case 8:
		ln_fwd_rows<8>(out, r, mean, rstd, mask, x, y, w, b, drop, M, d);
		break;
	default:
		ln_fwd_rows<16>(out, r, mean, rstd, mask, x, y, w, b, drop, M, d);
		break;
	}
}

extern "C" void sb_cuda_host_residual_ln_backward(float *dx, float *dy, float *dw, float *db, const float *dout,
						  const float *r, const float *mean, const float *rstd,
						  const uint8_t *mask, const float *w, float p, int M, int d)
{
	switch (lanes_d(d)) {
	case 1:
		ln_bwd_rows<1>(dx, dy, dw, db, dout, r, mean, rstd, mask, w, p, M, d);
		break;
	case 2:
		ln_bwd_rows<2>(dx, dy, dw, db, dout, r, mean, rstd, mask, w, p, M, d);
		break;
	case 4:
		ln_bwd_rows<4>(dx, dy, dw, db, dout, r, mean, rstd, mask, w, p, M, d);
		break;
	case 8:
		ln_bwd_rows<8>(dx, dy, dw, db, dout, r, mean, rstd, mask, w, p, M, d);
		break;
	default:
		ln_bwd_rows<16>(dx, dy, dw, db, dout, r, mean, rstd, mask, w, p, M, d);
		break;
	}
}

extern "C" void sb_cuda_host_gelu(float *out, float *dgelu, const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (out)
			out[i] = sb_gelu1(x[i]);
		if (dgelu)
			dgelu[i] = sb_dgelu1(x[i]);
	}
}

extern "C" void sb_cuda_host_dropout_mask(uint8_t *mask, size_t n, const struct sb_dropout *dr)
{
	uint32_t key[2];
	sb_rng_key(key, dr->seed, SB_RNG_DROPOUT);
	uint32_t thr = sb_drop_threshold(dr->p);
	for (size_t i = 0; i < n; i++)
		mask[i] = (uint8_t)ln_keep(key, dr->stream, dr->offset + i, thr);
}

extern "C" void sb_cuda_host_philox(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2])
{
	sb_philox(out, ctr, key);
}

extern "C" void sb_cuda_host_adamw(float *p, float *m, float *v, const float *g, size_t n, float lr, float b1,
				   float b2, float eps, float wd, int64_t t)
{
	struct sb_adam_k a = sb_adam_consts(lr, b1, b2, eps, wd, t);
	for (size_t i = 0; i < n; i++)
		sb_adamw1(p + i, m + i, v + i, g[i], &a);
}
