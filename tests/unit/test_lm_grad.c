/* test_lm_grad — gradient checks of the LM track's layers and of the whole
 * decoder: the CPU backend's float backward against central finite differences
 * of an independent double-precision reference (tests/unit/ref_lm.h).
 *
 * Tolerances: the analytic gradient is computed in float, the finite difference
 * in double with h = 1e-6 (truncation error ~h^2, rounding ~1e-16/h = 1e-10), so
 * the difference is dominated by float rounding of the forward and backward:
 * ~1e-6 relative per operation. We allow |got - want| <= 1e-4 max|want| + 1e-3 |want|
 * (layer checks) and 5e-4 max|want| + 5e-3 |want| (whole models, whose gradients
 * pass through a dozen operations). A wrong term in a backward misses by O(1). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "backend.h"
#include "lm_model.h"
#include "ref_lm.h"
#include "rng.h"

static struct sb_rng R;
static double rnd(double s) { return s * sb_rng_normal(&R); }

static void to_f(float *f, const double *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		f[i] = (float)x[i];
}

/* compare a float gradient with a double reference, scale-aware */
static int check_grad(const char *name, const float *got, const double *want, size_t n, double ascale, double rtol)
{
	double mx = 0;
	for (size_t i = 0; i < n; i++)
		mx = fabs(want[i]) > mx ? fabs(want[i]) : mx;
	double *g = malloc(n * sizeof *g);
	for (size_t i = 0; i < n; i++)
		g[i] = got[i];
	int r = sb_check_close(name, g, want, n, ascale * (mx > 0 ? mx : 1), rtol);
	free(g);
	return r;
}

typedef void (*fwd_fn)(double *out, const double *in, void *ctx);

/* FD of L(in) = sum fwd(in) . Rw wrt in[0..n) */
static void fd(double *grad, double *in, size_t n, size_t nout, const double *Rw, fwd_fn f, void *ctx)
{
	double *o = malloc(nout * sizeof *o);
	const double h = 1e-6;
	for (size_t i = 0; i < n; i++) {
		double x0 = in[i], lp = 0, lm = 0;
		in[i] = x0 + h;
		f(o, in, ctx);
		for (size_t j = 0; j < nout; j++)
			lp += o[j] * Rw[j];
		in[i] = x0 - h;
		f(o, in, ctx);
		for (size_t j = 0; j < nout; j++)
			lm += o[j] * Rw[j];
		in[i] = x0;
		grad[i] = (lp - lm) / (2 * h);
	}
	free(o);
}

/* ---- layer wrappers: in = all differentiable inputs packed ---- */
struct conv_ctx {
	int T, d, K, bias;
};
static void conv_fwd(double *out, const double *in, void *vc)
{
	struct conv_ctx *c = vc;
	const double *bch = in, *w = in + (size_t)c->T * 3 * c->d, *b = w + (size_t)c->d * c->K;
	ref_conv(out, bch, w, c->bias ? b : NULL, c->T, c->d, c->K);
}

static void dwconv_fwd(double *out, const double *in, void *vc)
{
	struct conv_ctx *c = vc;
	const double *x = in, *w = in + (size_t)c->T * c->d, *b = w + (size_t)c->d * c->K;
	ref_dwconv(out, x, w, c->bias ? b : NULL, c->T, c->d, c->K);
}

struct lin_ctx {
	int T, NH, hd;
};
static void lin_fwd(double *out, const double *in, void *vc)
{
	struct lin_ctx *c = vc;
	size_t n = (size_t)c->T * c->NH * c->hd;
	ref_linattn(out, in, in + n, in + 2 * n, c->T, c->NH, c->hd);
}

struct att_ctx {
	int T, NH, NKV, hd;
};
static void att_fwd(double *out, const double *in, void *vc)
{
	struct att_ctx *c = vc;
	size_t nq = (size_t)c->T * c->NH * c->hd, nk = (size_t)c->T * c->NKV * c->hd;
	ref_attn(out, in, in + nq, in + nq + nk, c->T, c->NH, c->NKV, c->hd);
}

struct norm_ctx {
	int M, d, rms;
};
static void norm_fwd(double *out, const double *in, void *vc)
{
	struct norm_ctx *c = vc;
	size_t n = (size_t)c->M * c->d;
	ref_norm(out, in, in + n, c->rms ? NULL : in + n + c->d, c->M, c->d, 1e-5, c->rms);
}

struct rope_ctx {
	int T, nh, hd;
};
static void rope_fwd(double *out, const double *in, void *vc)
{
	struct rope_ctx *c = vc;
	memcpy(out, in, (size_t)c->T * c->nh * c->hd * sizeof *out);
	ref_rope(out, c->T, c->nh, c->hd, 10000.0);
}

struct swi_ctx {
	int M, F;
};
static void swi_fwd(double *out, const double *in, void *vc)
{
	struct swi_ctx *c = vc;
	for (int i = 0; i < c->M; i++)
		for (int j = 0; j < c->F; j++)
			out[(size_t)i * c->F + j] =
				ref_silu(in[(size_t)i * 2 * c->F + j]) * in[(size_t)i * 2 * c->F + c->F + j];
}

static void layer_checks(struct sb_backend *be)
{
	const struct sb_backend_lm_ops *lo = sb_backend_lm(be);
	struct sb_ctx *ctx = sb_be_main(be);
	/* ---- gated short conv: T = 7, d = 5, K = 3 and 4, with and without bias ---- */
	for (int K = 3; K <= 4; K++) {
		struct conv_ctx c = {7, 5, K, K == 4};
		size_t nb = (size_t)c.T * 3 * c.d, nw = (size_t)c.d * K, nin = nb + nw + c.d, nout = (size_t)c.T * c.d;
		double *in = malloc(nin * sizeof *in), *Rw = malloc(nout * sizeof *Rw), *g = malloc(nin * sizeof *g);
		double *ref = malloc(nout * sizeof *ref);
		for (size_t i = 0; i < nin; i++)
			in[i] = rnd(1);
		for (size_t i = 0; i < nout; i++)
			Rw[i] = rnd(1);
		float *fin = malloc(nin * sizeof *fin), *fy = malloc(nout * sizeof *fy), *fz = malloc(nout * sizeof *fz);
		float *fR = malloc(nout * sizeof *fR), *fdb = calloc(nb, sizeof *fdb), *fdw = calloc(nw + c.d, sizeof *fdw);
		to_f(fin, in, nin);
		to_f(fR, Rw, nout);
		lo->conv_forward(ctx, fy, fz, fin, fin + nb, c.bias ? fin + nb + nw : NULL, 1, c.T, c.d, K);
		conv_fwd(ref, in, &c);
		char nm[96];
		snprintf(nm, sizeof nm, "conv K=%d bias=%d forward vs reference", K, c.bias);
		check_grad(nm, fy, ref, nout, 1e-6, 1e-5);
		lo->conv_backward(ctx, fdb, fdw, c.bias ? fdw + nw : NULL, fR, fin, fz, fin + nb, 1, c.T, c.d, K);
		fd(g, in, nin, nout, Rw, conv_fwd, &c);
		snprintf(nm, sizeof nm, "conv K=%d bias=%d d/d(b,c,h) vs finite differences", K, c.bias);
		check_grad(nm, fdb, g, nb, 1e-4, 1e-3);
		snprintf(nm, sizeof nm, "conv K=%d bias=%d d/d(weight%s) vs finite differences", K, c.bias, c.bias ? ", bias" : "");
		check_grad(nm, fdw, g + nb, nw + (c.bias ? c.d : 0), 1e-4, 1e-3);
		/* the rows op equals the training op, row by row, prefill or one at a time */
		float *hist = calloc((size_t)(K - 1) * c.d + 1, sizeof *hist), *yr = malloc(nout * sizeof *yr);
		for (int t = 0; t < c.T; t++)
			lo->conv_rows(ctx, yr + (size_t)t * c.d, fin + (size_t)t * 3 * c.d, hist, fin + nb,
				      c.bias ? fin + nb + nw : NULL, 1, c.d, K);
		SB_CHECK(memcmp(yr, fy, nout * sizeof *yr) == 0, "conv K=%d: the decoding op gives the training op's bits", K);
		free(hist);
		free(yr);
		free(in);
		free(Rw);
		free(g);
		free(ref);
		free(fin);
		free(fy);
		free(fz);
		free(fR);
		free(fdb);
		free(fdw);
	}
	/* ---- plain depthwise conv: T = 7, d = 5, K = 4 with bias ---- */
	{
		int T = 7, d = 5, K = 4;
		size_t nx = (size_t)T * d, nw = (size_t)d * K, nin = nx + nw + d, nout = nx;
		double *in = malloc(nin * sizeof *in), *Rw = malloc(nout * sizeof *Rw), *g = malloc(nin * sizeof *g),
		       *ref = malloc(nout * sizeof *ref);
		for (size_t i = 0; i < nin; i++)
			in[i] = rnd(1);
		for (size_t i = 0; i < nout; i++)
			Rw[i] = rnd(1);
		float *fin = malloc(nin * sizeof *fin), *fy = malloc(nout * sizeof *fy), *fR = malloc(nout * sizeof *fR);
		float *fdx = malloc(nx * sizeof *fdx), *fdw = calloc(nw + d, sizeof *fdw);
		to_f(fin, in, nin);
		to_f(fR, Rw, nout);
		lo->dwconv_forward(ctx, fy, fin, fin + nx, fin + nx + nw, 1, T, d, K);
		struct conv_ctx cc = {T, d, K, 1};
		(void)cc;
		ref_dwconv(ref, in, in + nx, in + nx + nw, T, d, K);
		check_grad("plain conv forward vs reference", fy, ref, nout, 1e-6, 1e-5);
		lo->dwconv_backward(ctx, fdx, fdw, fdw + nw, fR, fin, fin + nx, 1, T, d, K);
		fd(g, in, nin, nout, Rw, dwconv_fwd, &cc);
		check_grad("plain conv dx vs finite differences", fdx, g, nx, 1e-4, 1e-3);
		check_grad("plain conv d(weight, bias) vs finite differences", fdw, g + nx, nw + d, 1e-4, 1e-3);
		float *hist = calloc((size_t)(K - 1) * d, sizeof *hist), *yr = malloc(nout * sizeof *yr);
		for (int t = 0; t < T; t++)
			lo->dwconv_rows(ctx, yr + (size_t)t * d, fin + (size_t)t * d, hist, fin + nx, fin + nx + nw, 1, d, K);
		SB_CHECK(memcmp(yr, fy, nout * sizeof *yr) == 0, "plain conv: the decoding op gives the training op's bits");
		free(hist);
		free(yr);
		free(in);
		free(Rw);
		free(g);
		free(ref);
		free(fin);
		free(fy);
		free(fR);
		free(fdx);
		free(fdw);
	}
	/* ---- linear attention: T = 6, 2 heads of 3 ---- */
	{
		struct lin_ctx c = {6, 2, 3};
		size_t n = (size_t)c.T * c.NH * c.hd, nin = 3 * n;
		double *in = malloc(nin * sizeof *in), *Rw = malloc(n * sizeof *Rw), *g = malloc(nin * sizeof *g),
		       *ref = malloc(n * sizeof *ref);
		for (size_t i = 0; i < nin; i++)
			in[i] = rnd(1);
		for (size_t i = 0; i < n; i++)
			Rw[i] = rnd(1);
		float *fin = malloc(nin * sizeof *fin), *fo = malloc(n * sizeof *fo), *fden = malloc((size_t)c.T * c.NH * 4);
		float *fR = malloc(n * sizeof *fR), *fg = malloc(nin * sizeof *fg);
		to_f(fin, in, nin);
		to_f(fR, Rw, n);
		lo->linattn_forward(ctx, fo, fden, fin, fin + n, fin + 2 * n, 1, c.T, c.NH, c.hd);
		lin_fwd(ref, in, &c);
		check_grad("linear attention forward vs reference", fo, ref, n, 1e-6, 1e-5);
		lo->linattn_backward(ctx, fg, fg + n, fg + 2 * n, fR, fo, fden, fin, fin + n, fin + 2 * n, 1, c.T, c.NH, c.hd);
		fd(g, in, nin, n, Rw, lin_fwd, &c);
		check_grad("linear attention dq vs finite differences", fg, g, n, 1e-4, 1e-3);
		check_grad("linear attention dk vs finite differences", fg + n, g + n, n, 1e-4, 1e-3);
		check_grad("linear attention dv vs finite differences", fg + 2 * n, g + 2 * n, n, 1e-4, 1e-3);
		/* recurrent rows vs quadratic form */
		float *S = calloc((size_t)c.NH * c.hd * c.hd, sizeof *S), *z = calloc((size_t)c.NH * c.hd, sizeof *z);
		float *orow = malloc(n * sizeof *orow);
		size_t ld = (size_t)c.NH * c.hd;
		for (int t = 0; t < c.T; t++)
			lo->linattn_rows(ctx, orow + t * ld, fin + t * ld, fin + n + t * ld, fin + 2 * n + t * ld, S, z, 1,
					 c.NH, c.hd);
		check_grad("linear attention: recurrent decoding form vs reference", orow, ref, n, 1e-6, 1e-5);
		free(S);
		free(z);
		free(orow);
		free(in);
		free(Rw);
		free(g);
		free(ref);
		free(fin);
		free(fo);
		free(fden);
		free(fR);
		free(fg);
	}
	/* ---- causal attention with GQA: T = 5, 4 heads of 3 over 2 kv heads ---- */
	for (int NKV = 1; NKV <= 4; NKV *= 2) {
		struct att_ctx c = {5, 4, NKV, 3};
		size_t nq = (size_t)c.T * c.NH * c.hd, nk = (size_t)c.T * c.NKV * c.hd, nin = nq + 2 * nk;
		double *in = malloc(nin * sizeof *in), *Rw = malloc(nq * sizeof *Rw), *g = malloc(nin * sizeof *g),
		       *ref = malloc(nq * sizeof *ref);
		for (size_t i = 0; i < nin; i++)
			in[i] = rnd(1);
		for (size_t i = 0; i < nq; i++)
			Rw[i] = rnd(1);
		float *fin = malloc(nin * sizeof *fin), *fo = malloc(nq * sizeof *fo), *P = malloc((size_t)c.NH * c.T * c.T * 4);
		float *fR = malloc(nq * sizeof *fR), *fg = malloc(nin * sizeof *fg);
		to_f(fin, in, nin);
		to_f(fR, Rw, nq);
		lo->attn_forward(ctx, fo, P, fin, fin + nq, fin + nq + nk, 1, c.T, c.NH, c.NKV, c.hd, 0.0f);
		att_fwd(ref, in, &c);
		char nm[96];
		snprintf(nm, sizeof nm, "attention (kv heads %d) forward vs reference", NKV);
		check_grad(nm, fo, ref, nq, 1e-6, 1e-5);
		lo->attn_backward(ctx, fg, fg + nq, fg + nq + nk, fR, P, fin, fin + nq, fin + nq + nk, 1, c.T, c.NH, c.NKV,
				  c.hd, 0.0f);
		fd(g, in, nin, nq, Rw, att_fwd, &c);
		snprintf(nm, sizeof nm, "attention (kv heads %d) dq, dk, dv vs finite differences", NKV);
		check_grad(nm, fg, g, nin, 1e-4, 1e-3);
		/* evaluation rows, dense, equal the reference */
		float *orow = malloc(nq * sizeof *orow);
		struct sb_err err = {0};
		lo->attn_rows(ctx, orow, fin, fin + nq, fin + nq + nk, NULL, c.T, 0, c.T, c.NH, c.NKV, c.hd, 0.0f, NULL, 0, NULL,
			      &err);
		snprintf(nm, sizeof nm, "attention rows (kv heads %d, dense) vs reference", NKV);
		check_grad(nm, orow, ref, nq, 1e-6, 1e-5);
		free(orow);
		free(in);
		free(Rw);
		free(g);
		free(ref);
		free(fin);
		free(fo);
		free(P);
		free(fR);
		free(fg);
	}
	/* ---- norms ---- */
	for (int rms = 0; rms <= 1; rms++) {
		struct norm_ctx c = {4, 19, rms};
		size_t n = (size_t)c.M * c.d, nin = n + 2 * (size_t)c.d;
		double *in = malloc(nin * sizeof *in), *Rw = malloc(n * sizeof *Rw), *g = malloc(nin * sizeof *g),
		       *ref = malloc(n * sizeof *ref);
		for (size_t i = 0; i < nin; i++)
			in[i] = rnd(1) + (i >= n && i < n + c.d ? 1 : 0);
		for (size_t i = 0; i < n; i++)
			Rw[i] = rnd(1);
		float *fin = malloc(nin * sizeof *fin), *fo = malloc(n * sizeof *fo), *mean = malloc((size_t)c.M * 4),
		      *rstd = malloc((size_t)c.M * 4), *fR = malloc(n * sizeof *fR), *fg = calloc(nin, sizeof *fg);
		to_f(fin, in, nin);
		to_f(fR, Rw, n);
		lo->norm_forward(ctx, fo, mean, rstd, fin, fin + n, rms ? NULL : fin + n + c.d, c.M, c.d, 1e-5f, rms);
		norm_fwd(ref, in, &c);
		check_grad(rms ? "RMSNorm forward vs reference" : "LayerNorm forward vs reference", fo, ref, n, 1e-6, 1e-5);
		lo->norm_backward(ctx, fg, fg + n, rms ? NULL : fg + n + c.d, fR, fin, mean, rstd, fin + n, c.M, c.d, rms);
		fd(g, in, nin, n, Rw, norm_fwd, &c);
		check_grad(rms ? "RMSNorm dx, dw vs finite differences" : "LayerNorm dx, dw, db vs finite differences", fg,
			   g, rms ? n + c.d : nin, 1e-4, 1e-3);
		free(in);
		free(Rw);
		free(g);
		free(ref);
		free(fin);
		free(fo);
		free(mean);
		free(rstd);
		free(fR);
		free(fg);
	}
	/* ---- RoPE: forward vs reference, inverse = backward ---- */
	{
		struct rope_ctx c = {9, 2, 6};
		size_t n = (size_t)c.T * c.nh * c.hd;
		double *in = malloc(n * sizeof *in), *Rw = malloc(n * sizeof *Rw), *g = malloc(n * sizeof *g),
		       *ref = malloc(n * sizeof *ref);
		for (size_t i = 0; i < n; i++) {
			in[i] = rnd(1);
			Rw[i] = rnd(1);
		}
		float *f = malloc(n * sizeof *f), *fR = malloc(n * sizeof *fR);
		to_f(f, in, n);
		to_f(fR, Rw, n);
		double freq[16];
		for (int i = 0; i < c.hd / 2; i++)
			freq[i] = pow(10000.0, -2.0 * i / c.hd);
		lo->rope(ctx, f, 1, c.T, 0, c.nh, c.hd, c.hd, freq, 0);
		rope_fwd(ref, in, &c);
		check_grad("RoPE forward vs reference", f, ref, n, 1e-6, 1e-5);
		lo->rope(ctx, fR, 1, c.T, 0, c.nh, c.hd, c.hd, freq, 1);
		fd(g, in, n, n, Rw, rope_fwd, &c);
		check_grad("RoPE backward (inverse rotation) vs finite differences", fR, g, n, 1e-4, 1e-3);
		/* rows at an offset equal the whole-sequence op */
		float *f2 = malloc(n * sizeof *f2);
		to_f(f2, in, n);
		for (int t = 0; t < c.T; t++)
			lo->rope(ctx, f2 + (size_t)t * c.nh * c.hd, 1, 1, t, c.nh, c.hd, c.hd, freq, 0);
		SB_CHECK(memcmp(f, f2, n * sizeof *f) == 0, "RoPE one row at a time at its position equals the whole sequence");
		free(f2);
		free(in);
		free(Rw);
		free(g);
		free(ref);
		free(f);
		free(fR);
	}
	/* ---- SwiGLU ---- */
	{
		struct swi_ctx c = {3, 7};
		size_t nin = (size_t)c.M * 2 * c.F, n = (size_t)c.M * c.F;
		double *in = malloc(nin * sizeof *in), *Rw = malloc(n * sizeof *Rw), *g = malloc(nin * sizeof *g),
		       *ref = malloc(n * sizeof *ref);
		for (size_t i = 0; i < nin; i++)
			in[i] = rnd(1.5);
		for (size_t i = 0; i < n; i++)
			Rw[i] = rnd(1);
		float *fin = malloc(nin * sizeof *fin), *fo = malloc(n * sizeof *fo), *fR = malloc(n * sizeof *fR),
		      *fg = malloc(nin * sizeof *fg);
		to_f(fin, in, nin);
		to_f(fR, Rw, n);
		lo->swiglu_forward(ctx, fo, fin, c.M, c.F);
		swi_fwd(ref, in, &c);
		check_grad("SwiGLU forward vs reference", fo, ref, n, 1e-6, 1e-5);
		lo->swiglu_backward(ctx, fg, fR, fin, c.M, c.F);
		fd(g, in, nin, n, Rw, swi_fwd, &c);
		check_grad("SwiGLU backward vs finite differences", fg, g, nin, 1e-4, 1e-3);
		free(in);
		free(Rw);
		free(g);
		free(ref);
		free(fin);
		free(fo);
		free(fR);
		free(fg);
	}
	/* ---- row-deterministic matmul: any M, same bits per row; equals the reference. The
	 * weights are packed in panels of 48 columns (pack_rows): 53 = one panel and a last one
	 * of 5 scalar columns; 1005 = 20 panels in two column tiles (K x 18 panels within 1 MiB)
	 * and a last one of 2 vectors and 13 scalar columns; 96 = panels only; 40 = a last
	 * panel only (2 vectors, 8 scalar columns); M leaves 1-3 rows after the 4-row blocks,
	 * or none ---- */
	static const int mm_shape[4][3] = {{11, 37, 53}, {13, 300, 1005}, {8, 64, 96}, {6, 17, 40}};
	for (int sh = 0; sh < 4; sh++) {
		int M = mm_shape[sh][0], K = mm_shape[sh][1], N = mm_shape[sh][2];
		char what[96];
		float *A = malloc((size_t)M * K * 4), *W = malloc((size_t)N * K * 4), *Wt = malloc((size_t)N * K * 4),
		      *b = malloc((size_t)N * 4), *O = malloc((size_t)M * N * 4), *o1 = malloc((size_t)N * 4);
		double *dA = malloc((size_t)M * K * 8), *dW = malloc((size_t)N * K * 8), *db = malloc((size_t)N * 8),
		       *dO = malloc((size_t)M * N * 8);
		for (int i = 0; i < M * K; i++)
			A[i] = (float)(dA[i] = (float)rnd(1));
		for (int i = 0; i < N * K; i++)
			W[i] = (float)(dW[i] = (float)rnd(1));
		for (int i = 0; i < N; i++)
			b[i] = (float)(db[i] = (float)rnd(1));
		lo->pack_rows(ctx, Wt, W, N, K);
		lo->matmul_rows(ctx, O, A, Wt, b, M, K, N);
		ref_matmul(dO, dA, dW, db, M, K, N);
		snprintf(what, sizeof what, "matmul_rows vs reference (M=%d, K=%d, N=%d)", M, K, N);
		check_grad(what, O, dO, (size_t)M * N, 1e-6, 1e-5);
		int same = 1;
		for (int i = 0; i < M; i++) {
			lo->matmul_rows(ctx, o1, A + (size_t)i * K, Wt, b, 1, K, N);
			same &= memcmp(o1, O + (size_t)i * N, (size_t)N * 4) == 0;
		}
		SB_CHECK(same, "matmul_rows: each row alone gives the same bits as in a block of %d (K=%d, N=%d)", M, K, N);
		/* every element is the FMA chain over k in order from 0, then + bias (the bits the
		 * evaluation records depend on; fused as the backend's sfma where the target has FMA) */
		size_t off = 0, bad = 0;
		for (int i = 0; i < M; i++)
			for (int n = 0; n < N; n++) {
				float acc = 0;
				for (int k = 0; k < K; k++)
#if defined(__FMA__) || defined(__AVX512F__)
					acc = fmaf(A[(size_t)i * K + k], W[(size_t)n * K + k], acc);
#else
					acc = A[(size_t)i * K + k] * W[(size_t)n * K + k] + acc;
#endif
				acc = acc + b[n];
				if (memcmp(&acc, &O[(size_t)i * N + n], 4) && !bad++)
					off = (size_t)i * N + n;
			}
		SB_CHECK(!bad, "matmul_rows (M=%d, K=%d, N=%d): every element is the in-order FMA chain plus bias: %zu of %d "
			       "differ (first [%zu])", M, K, N, bad, M * N, off);
		/* bfloat16 weights: the same results as matmul_rows on the widened weights, bit for bit,
		 * for a block and for each row alone */
		{
			uint16_t *H = malloc((size_t)N * K * 2), *Hp = malloc((size_t)N * K * 2);
			float *Wb = malloc((size_t)N * K * 4), *Ob = malloc((size_t)M * N * 4), *Of = malloc((size_t)M * N * 4);
			for (size_t j = 0; j < (size_t)N * K; j++) {
				uint32_t u;
				memcpy(&u, &W[j], 4);
				H[j] = (uint16_t)(u >> 16); /* truncated: any bf16 value will do */
				u = (uint32_t)H[j] << 16;
				memcpy(&Wb[j], &u, 4);
			}
			lo->pack_rows(ctx, Wt, Wb, N, K);
			lo->matmul_rows(ctx, Of, A, Wt, b, M, K, N);
			lo->pack_rows_bf16(ctx, Hp, H, N, K);
			lo->matmul_rows_bf16(ctx, Ob, A, Hp, b, M, K, N);
			int same16 = memcmp(Ob, Of, (size_t)M * N * 4) == 0;
			for (int i = 0; i < M; i++) {
				lo->matmul_rows_bf16(ctx, o1, A + (size_t)i * K, Hp, NULL, 1, K, N);
				lo->matmul_rows(ctx, Of, A + (size_t)i * K, Wt, NULL, 1, K, N);
				same16 &= memcmp(o1, Of, (size_t)N * 4) == 0;
			}
			SB_CHECK(same16, "matmul_rows_bf16 (M=%d, K=%d, N=%d): the bits of matmul_rows on the widened weights, "
					 "with and without bias, in a block and row by row", M, K, N);
			free(H);
			free(Hp);
			free(Wb);
			free(Ob);
			free(Of);
		}
		free(A);
		free(W);
		free(Wt);
		free(b);
		free(O);
		free(o1);
		free(dA);
		free(dW);
		free(db);
		free(dO);
	}
}

/* ---- whole model ---- */

static void model_check(struct sb_backend *be, const char *name, const char *const *kv, int nkv)
{
	struct sb_lm_cfg cfg;
	sb_lm_cfg_default(&cfg);
	cfg.d = 8;
	cfg.heads = 2;
	cfg.kv_heads = 2;
	cfg.lin_heads = 2;
	cfg.ffn = 12;
	cfg.conv_k = 3;
	cfg.vocab = 256;
	cfg.max_T = 16;
	cfg.init_std = 0.3f; /* large weights: every path contributes visibly */
	struct sb_err err = {0};
	for (int i = 0; i < nkv; i++)
		if (sb_lm_cfg_set(&cfg, kv[i], &err)) {
			SB_CHECK(0, "%s: config %s: %s", name, kv[i], err.msg);
			return;
		}
	struct sb_lm_model *m;
	if (sb_lm_model_new(be, &cfg, &m, &err) || sb_lm_model_init(m, 3, &err)) {
		SB_CHECK(0, "%s: model: %s", name, err.msg);
		return;
	}
	/* biases and norm weights away from their init, so their gradients are generic */
	for (int i = 0; i < m->n_params; i++) {
		const struct sb_lm_param *p = &m->params[i];
		if (p->init == SB_LM_INIT_ZERO || p->init == SB_LM_INIT_ONE)
			for (size_t j = 0; j < p->numel; j++)
				m->p[p->offset + j] += (float)rnd(0.2);
	}
	int T = 7, B = 2;
	struct sb_lm_train_opts o = {.B = B, .T = T, .tile = 1};
	struct sb_lm_trainer *tr;
	if (sb_lm_trainer_new(m, &o, &tr, &err)) {
		SB_CHECK(0, "%s: trainer: %s", name, err.msg);
		return;
	}
	uint8_t batch[2 * 8];
	for (int i = 0; i < B * (T + 1); i++)
		batch[i] = (uint8_t)sb_rng_below(&R, 256);
	batch[3] = 0; /* byte 0 is an ordinary token */
	double loss;
	float *g;
	sb_lm_train_grad(tr, batch, &loss, &g, &err);
	double *P = malloc(m->n_floats * sizeof *P), *fdg = calloc(m->n_floats, sizeof *fdg);
	for (size_t i = 0; i < m->n_floats; i++)
		P[i] = m->p[i];
	struct ref_model r;
	ref_from_model(&r, m, P);
	double lref = 0.5 * (ref_model_loss(&r, batch, T, NULL) + ref_model_loss(&r, batch + T + 1, T, NULL));
	SB_CHECK(fabs(lref - loss) < 1e-5 * fabs(lref), "%s: loss float %.9g vs double reference %.12g", name, loss, lref);
	const double h = 1e-6;
	for (size_t i = 0; i < m->n_floats; i++) {
		double x0 = P[i];
		P[i] = x0 + h;
		double lp = 0.5 * (ref_model_loss(&r, batch, T, NULL) + ref_model_loss(&r, batch + T + 1, T, NULL));
		P[i] = x0 - h;
		double lm = 0.5 * (ref_model_loss(&r, batch, T, NULL) + ref_model_loss(&r, batch + T + 1, T, NULL));
		P[i] = x0;
		fdg[i] = (lp - lm) / (2 * h);
	}
	char nm[160];
	snprintf(nm, sizeof nm, "%s: all %zu parameter gradients vs finite differences of the double reference", name,
		 m->n_floats);
	check_grad(nm, g, fdg, m->n_floats, 5e-4, 5e-3);
	free(P);
	free(fdg);
	sb_lm_trainer_free(tr);
	sb_lm_model_free(m);
}

int main(void)
{
	sb_rng_init(&R, 2026, SB_RNG_USER, 1);
	struct sb_backend *be;
	struct sb_err err = {0};
	if (sb_backend_cpu_open(2, &be, &err)) {
		SB_CHECK(0, "CPU backend: %s", err.msg);
		return sb_test_done();
	}
	layer_checks(be);
	const char *k1[] = {"pattern=CAL"};
	model_check(be, "CAL, GELU, LayerNorm, no positions, tied", k1, 1);
	const char *k2[] = {"pattern=ACL", "mlp=swiglu", "norm=rmsnorm", "pos=rope", "kv_heads=1", "tied=0",
			    "bias=1", "attn_bias=1", "heads=2", "head_dim=4"};
	model_check(be, "ACL, SwiGLU, RMSNorm, RoPE, GQA, biases, untied", k2, 10);
	const char *k3[] = {"pattern=LCA", "pos=learned", "bias=1", "conv_k=4"};
	model_check(be, "LCA, learned positions, biases", k3, 4);
	const char *k4[] = {"pattern=A", "ffn=0"};
	model_check(be, "one attention layer without MLP", k4, 2);
	const char *k5[] = {"pattern=CACL", "conv_gate=0", "bias=1", "pos=rope"};
	model_check(be, "CACL with plain convolutions, biases, RoPE", k5, 4);
	/* GQA with groups of two over two kv heads (kv_heads=1 above maps every head to kv head
	 * 0, so the head-to-group index was unchecked), q/k/v biases without an o bias */
	const char *k6[] = {"pattern=ACA", "heads=4",    "kv_heads=2",   "head_dim=2", "pos=rope",
			    "mlp=swiglu",  "attn_bias=2", "norm=rmsnorm", "tied=0"};
	model_check(be, "ACA, GQA 4 heads over 2 kv heads, q/k/v biases, RoPE", k6, 9);
	/* YaRN: its frequencies and its attention factor on the queries after RoPE */
	const char *k7[] = {"pattern=AA", "pos=rope", "head_dim=8", "rope_scaling=yarn", "rope_factor=4",
			    "rope_orig_max=8", "rope_beta_fast=4", "rope_attn=1.3"};
	model_check(be, "AA, RoPE with YaRN (attention factor 1.3)", k7, 8);
	/* each query and key head's RMSNorm before RoPE (Qwen3, LFM2), GQA */
	const char *k8[] = {"pattern=CA", "pos=rope", "qk_norm=1", "heads=4", "kv_heads=2", "head_dim=4",
			    "mlp=swiglu", "norm=rmsnorm"};
	model_check(be, "CA, q/k RMSNorm per head, GQA, RoPE", k8, 8);
	/* Granite's four multipliers: on the embedding (before learned positions), on every
	 * branch of the residual stream (attention, convolution, linear attention, MLP), on the
	 * scores, on the logits; and without an MLP (the mixer's branch alone) */
	const char *k9[] = {"pattern=CLA", "pos=learned", "emb_mult=3", "resid_mult=0.4", "attn_scale=0.7",
			    "logit_div=2.5"};
	model_check(be, "CLA, Granite's multipliers, learned positions", k9, 6);
	const char *k10[] = {"pattern=AA", "ffn=0", "pos=rope", "mlp=swiglu", "norm=rmsnorm", "emb_mult=1.5",
			     "resid_mult=1.7", "attn_scale=0.25", "logit_div=0.6"};
	model_check(be, "AA without MLP, Granite's multipliers, RoPE", k10, 9);
	/* sliding-window attention layers (window 3 within 7 positions) on their own RoPE base,
	 * beside a global layer with YaRN (whose factor the S layers do not take) */
	const char *k11[] = {"pattern=SAS", "pos=rope", "window=3", "rope_local_theta=50", "head_dim=4", "heads=2",
			     "kv_heads=1", "rope_scaling=yarn", "rope_factor=4", "rope_orig_max=8", "rope_attn=1.3",
			     "mlp=swiglu", "norm=rmsnorm", "qk_norm=1"};
	model_check(be, "SAS, sliding window 3, local RoPE base, YaRN on the A layer, GQA, q/k norms", k11, 14);
	const char *k12[] = {"pattern=ASC", "pos=rope", "window=2", "head_dim=4", "rope_scaling=yarn",
			     "rope_factor=4", "rope_orig_max=8", "rope_attn=1.3"};
	model_check(be, "ASC, sliding window 2 on the A layers' RoPE (YaRN's factor too)", k12, 8);
	/* Gemma 3's layout: S and A layers, sandwich norms, GeGLU, q/k norms, its embedding and
	 * attention scales; and the sandwich norm of the mixer alone (no MLP) */
	const char *k13[] = {"pattern=SSA",	  "pos=rope",	"window=3", "rope_local_theta=50", "head_dim=4",
			     "heads=2",		  "kv_heads=1", "mlp=geglu", "norm=rmsnorm",	    "qk_norm=1",
			     "sandwich=1",	  "tied=1",	"emb_mult=2.8", "attn_scale=0.4"};
	model_check(be, "SSA, Gemma 3's layout: sandwich norms, GeGLU, q/k norms, window 3, scales", k13, 14);
	const char *k14[] = {"pattern=AS", "ffn=0", "pos=rope", "window=2", "norm=rmsnorm", "sandwich=1"};
	model_check(be, "AS without MLP, the mixer's sandwich norm", k14, 6);
	/* Gemma 2's layout: soft-capping of the scores (S and A layers) and of the logits, caps
	 * inside their range so that tanh bends them */
	const char *k15[] = {"pattern=SAS", "pos=rope", "window=3", "head_dim=4", "heads=2", "kv_heads=1",
			     "mlp=geglu", "norm=rmsnorm", "sandwich=1", "emb_mult=2.8", "attn_scale=0.4",
			     "attn_softcap=0.8", "final_softcap=1.5"};
	model_check(be, "SAS, Gemma 2's layout: soft-capping of scores (0.8) and logits (1.5), sandwich, GeGLU", k15, 13);
	/* RoPE on half of each head (Bamba's partial_rotary_factor 0.5), with YaRN over the
	 * rotated dimensions, and on a sliding-window layer */
	const char *k16[] = {"pattern=AS",	  "pos=rope",	   "head_dim=8",     "rope_dim=4",     "window=3",
			     "rope_scaling=yarn", "rope_factor=4", "rope_orig_max=8", "rope_attn=1.3"};
	model_check(be, "AS, RoPE on 4 of 8 dimensions (a partial rotary factor 0.5), YaRN", k16, 9);
	/* OLMo 2/3's layout: no pre-norms (the mixer and the MLP read the residual stream), their
	 * outputs normalised, q and k each normalised over all heads of a position */
	const char *k17[] = {"pattern=SSA", "pos=rope",  "window=3",    "rope_local_theta=10000", "head_dim=4",
			     "heads=2",	    "kv_heads=1", "mlp=swiglu", "norm=rmsnorm",	       "sandwich=1",
			     "prenorm=0",   "qk_norm=2",  "tied=0"};
	model_check(be, "SSA, OLMo 3's layout: no pre-norms, post-norms, q/k norms over all heads", k17, 13);
	/* NoPE layers among RoPE ones (SmolLM3's every fourth; EXAONE 4's global layers) */
	const char *k18[] = {"pattern=SAA", "pos=rope", "window=3", "rope_layers=101", "head_dim=4", "mlp=swiglu",
			     "norm=rmsnorm", "qk_norm=1", "rope_scaling=yarn", "rope_factor=4", "rope_orig_max=8",
			     "rope_attn=1.3"};
	model_check(be, "SAA, a NoPE layer (rope_layers 101), YaRN on the others", k18, 12);
	sb_backend_close(be);
	return sb_test_done();
}
