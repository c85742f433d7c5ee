/* backend_cpu_dense.c — CPU matrix products (OpenBLAS, single-threaded per
 * call: the parallelism is the backend's tasks) and the local mixer. */
#include <cblas.h>
#include <stdio.h>
#include <string.h>

#include "backend_cpu.h"
#include "backend_cpu_simd.h"

/* OpenBLAS's own threads would make the bits depend on its thread count and fight
 * the backend's workers for the cores: always one. */
extern void openblas_set_num_threads(int);
extern char *openblas_get_corename(void);

void sb_cpu_blas_single_thread(void) { openblas_set_num_threads(1); }

void sb_cpu_describe(char *buf, size_t n, int threads)
{
	char model[96] = "cpu";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[256];
		while (fgets(line, sizeof line, f)) {
			if (!strncmp(line, "model name", 10)) {
				char *c = strchr(line, ':');
				if (c) {
					c++;
					while (*c == ' ')
						c++;
					c[strcspn(c, "\n")] = 0;
					snprintf(model, sizeof model, "%s", c);
				}
				break;
			}
		}
		fclose(f);
	}
	snprintf(buf, n, "cpu: %s, %d thread%s, OpenBLAS %s", model, threads, threads == 1 ? "" : "s",
		 openblas_get_corename());
}

/* out[M, N] = inp[M, K] w[N, K]^T + bias */
void sb_cpu_matmul_forward(struct sb_ctx *ctx, float *out, const float *inp, const float *w, const float *bias, int M,
			   int K, int N)
{
	if (M <= 0 || N <= 0)
		return;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, inp, K, w, K, 0.0f, out, N);
	if (bias) {
		for (int i = 0; i < M; i++) {
			float *o = out + (size_t)i * N;
			int c = 0;
			for (; c + VL <= N; c += VL)
				vstore(o + c, vload(o + c) + vload(bias + c));
			for (; c < N; c++)
				o[c] += bias[c];
		}
	}
}

void sb_cpu_matmul_backward(struct sb_ctx *ctx, float *dinp, float *dw, float *dbias, const float *dout,
			    const float *inp, const float *w, int M, int K, int N, int accumulate)
{
	if (M <= 0)
		return;
	if (dinp)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, dout, N, w, K,
			    accumulate ? 1.0f : 0.0f, dinp, K);
	if (dw)
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, dout, N, inp, K, 1.0f, dw, K);
	if (dbias) {
		for (int i = 0; i < M; i++) {
			const float *g = dout + (size_t)i * N;
			int c = 0;
			for (; c + VL <= N; c += VL)
				vstore(dbias + c, vload(dbias + c) + vload(g + c));
			for (; c < N; c++)
				dbias[c] += g[c];
		}
	}
}

/* ---------------------------------------------------------------- local mixer */

/* neighbour of content token t through tap k (k = 0..8 for 3x3, 0..2 for 1-D), or -1 */
static inline int mix_nbr(int t, int k, int G, int L)
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

static inline int mix_valid(const int32_t *nvalid, int b, int t) { return !nvalid || t < nvalid[b] - 1; }

void sb_cpu_localmix_forward(struct sb_ctx *ctx, float *out, float *y, float *z, float *mean, float *rstd,
			     const float *x, const int32_t *nvalid, const float *lnw, const float *lnb, const float *cw,
			     const float *cb, const float *scale, int B, int T, int d, int G)
{
	int L = T - 1, KK = G > 0 ? 9 : 3;
	float *gz = sb_cpu_scratch(ctx, (size_t)L * d * sizeof(float) + (size_t)KK * d * sizeof(float) + 64);
	float *wt = gz + (size_t)L * d; /* taps transposed: wt[k][c] */
	for (int c = 0; c < d; c++)
		for (int k = 0; k < KK; k++)
			wt[(size_t)k * d + c] = cw[(size_t)c * KK + k];
	float s = scale[0];
	for (int b = 0; b < B; b++) {
		const float *xb = x + (size_t)b * T * d;
		float *ob = out + (size_t)b * T * d;
		float *yb = y + (size_t)b * L * d, *zb = z + (size_t)b * L * d;
		memcpy(ob, xb, (size_t)d * sizeof *ob); /* CLS untouched */
		sb_cpu_layernorm_rows(yb, mean + (size_t)b * L, rstd + (size_t)b * L, xb + d, lnw, lnb, L, d);
		for (int t = 0; t < L; t++)
			if (!mix_valid(nvalid, b, t))
				memset(yb + (size_t)t * d, 0, (size_t)d * sizeof *yb);
		for (int t = 0; t < L; t++) {
			float *zt = zb + (size_t)t * d;
			memcpy(zt, cb, (size_t)d * sizeof *zt);
			for (int k = 0; k < KK; k++) {
				int sidx = mix_nbr(t, k, G, L);
				if (sidx < 0)
					continue;
				const float *ys = yb + (size_t)sidx * d, *wk = wt + (size_t)k * d;
				for (int c = 0; c < d; c++)
					zt[c] = sfma(wk[c], ys[c], zt[c]);
			}
		}
		sb_cpu_gelu_vec(gz, NULL, zb, (size_t)L * d);
		for (int t = 0; t < L; t++) {
			const float *xt = xb + (size_t)(t + 1) * d, *gt = gz + (size_t)t * d;
			float *ot = ob + (size_t)(t + 1) * d;
			if (mix_valid(nvalid, b, t))
				for (int c = 0; c < d; c++)
					ot[c] = sfma(s, gt[c], xt[c]);
			else
				memset(ot, 0, (size_t)d * sizeof *ot);
		}
	}
}

void sb_cpu_localmix_backward(struct sb_ctx *ctx, float *dx, float *dlnw, float *dlnb, float *dcw, float *dcb,
			      float *dscale, const float *dout, const float *x, const float *y, const float *z,
			      const float *mean, const float *rstd, const int32_t *nvalid, const float *lnw,
			      const float *cw, const float *scale, int B, int T, int d, int G)
{
	int L = T - 1, KK = G > 0 ? 9 : 3;
	size_t Ld = (size_t)L * d;
	float *gz = sb_cpu_scratch(ctx, (3 * Ld + 2 * (size_t)KK * d) * sizeof(float) + 64);
	float *dg = gz + Ld, *dy = dg + Ld, *wt = dy + Ld, *dwt = wt + (size_t)KK * d;
	for (int c = 0; c < d; c++)
		for (int k = 0; k < KK; k++)
			wt[(size_t)k * d + c] = cw[(size_t)c * KK + k];
	memset(dwt, 0, (size_t)KK * d * sizeof *dwt);
	float s = scale[0];
	double ds = 0;
	for (int b = 0; b < B; b++) {
		const float *gb = dout + (size_t)b * T * d;
		float *dxb = dx + (size_t)b * T * d;
		const float *yb = y + (size_t)b * Ld, *zb = z + (size_t)b * Ld;
		memcpy(dxb, gb, (size_t)d * sizeof *dxb);
		sb_cpu_gelu_vec(gz, dg, zb, Ld); /* gz = gelu(z), dg = gelu'(z) */
		/* dz (in dg) = scale * g * gelu'(z) on valid tokens; residual to dx */
		for (int t = 0; t < L; t++) {
			const float *gt = gb + (size_t)(t + 1) * d;
			float *dxt = dxb + (size_t)(t + 1) * d, *dzt = dg + (size_t)t * d;
			const float *gzt = gz + (size_t)t * d;
			if (!mix_valid(nvalid, b, t)) {
				memset(dxt, 0, (size_t)d * sizeof *dxt);
				memset(dzt, 0, (size_t)d * sizeof *dzt);
				continue;
			}
			float acc = 0;
			for (int c = 0; c < d; c++) {
				acc = sfma(gt[c], gzt[c], acc);
				dxt[c] = gt[c];
				dzt[c] = (s * gt[c]) * dzt[c];
			}
			ds += acc;
		}
		/* conv backward: bias, taps, and the input gradient (transposed conv) */
		memset(dy, 0, Ld * sizeof *dy);
		for (int t = 0; t < L; t++) {
			const float *dzt = dg + (size_t)t * d;
			for (int c = 0; c < d; c++)
				dcb[c] += dzt[c];
			for (int k = 0; k < KK; k++) {
				int sidx = mix_nbr(t, k, G, L);
				if (sidx < 0)
					continue;
				const float *ys = yb + (size_t)sidx * d, *wk = wt + (size_t)k * d;
				float *dws = dwt + (size_t)k * d, *dys = dy + (size_t)sidx * d;
				for (int c = 0; c < d; c++) {
					dws[c] = sfma(dzt[c], ys[c], dws[c]);
					dys[c] = sfma(wk[c], dzt[c], dys[c]);
				}
			}
		}
		for (int t = 0; t < L; t++)
			if (!mix_valid(nvalid, b, t))
				memset(dy + (size_t)t * d, 0, (size_t)d * sizeof *dy);
		sb_cpu_layernorm_rows_backward(dxb + d, dlnw, dlnb, dy, x + (size_t)b * T * d + d, mean + (size_t)b * L,
					       rstd + (size_t)b * L, lnw, L, d, 1);
	}
	for (int c = 0; c < d; c++)
		for (int k = 0; k < KK; k++)
			dcw[(size_t)c * KK + k] += dwt[(size_t)k * d + c];
	dscale[0] += (float)ds;
}
