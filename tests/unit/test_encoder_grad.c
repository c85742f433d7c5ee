/* test_encoder_grad.c — every backward of the double-precision reference
 * (tests/unit/ref_encoder.h) against central finite differences.
 *
 * Each layer: loss = sum_i w_i out_i with random w; the analytic gradient (from
 * the layer's backward with dout = w) is compared with (f(x+h) - f(x-h)) / 2h,
 * h = 1e-5, coordinate by coordinate. The error measure of a coordinate is
 * |fd - an| / max(|fd|, |an|, 1e-5 * max_j |an_j|, 1e-5) (the floor keeps FD rounding
 * noise on near-zero coordinates, ~1e-16 |f| / h, from counting); the check passes when the
 * largest is <= 1e-5. Central differences in double have truncation error
 * ~h^2 f''' ~ 1e-12 and rounding ~1e-16/h ~ 1e-10, so smooth layers land near
 * 1e-8; the tolerance leaves room for the steep alpha = 1.05 entmax rows, and a
 * wrong gradient misses by O(1). Piecewise-smooth normalisers (top-k, sparsemax,
 * entmax supports) are tested on random rows whose kinks are far from h away.
 * Ties: duplicated keys give exactly tied scores; those tests perturb q and v
 * only (ties persist, the kept set is fixed by the lower-index rule).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "ref_encoder.h"

#define FD_H 1e-5
#define FD_TOL 1e-5

static double urand(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(*s >> 11) / 9007199254740992.0;
}
static void fill(double *x, size_t n, double lo, double hi, uint64_t *s)
{
	for (size_t i = 0; i < n; i++)
		x[i] = lo + (hi - lo) * urand(s);
}

/* ---- generic FD check over a set of coordinates of x ---- */
typedef double (*fd_fn)(void *ctx);
struct fd_stats {
	double max_err;
	int n;
};
static void fd_check(const char *name, double *x, size_t n, const double *an, fd_fn f, void *ctx, size_t stride,
                     struct fd_stats *acc)
{
	double amax = 0;
	for (size_t i = 0; i < n; i++)
		amax = fmax(amax, fabs(an[i]));
	double worst = 0, fd_w = 0, an_w = 0;
	size_t wi = 0;
	int cnt = 0;
	for (size_t i = 0; i < n; i += stride ? stride : 1) {
		double x0 = x[i];
		x[i] = x0 + FD_H;
		double fp = f(ctx);
		x[i] = x0 - FD_H;
		double fm = f(ctx);
		x[i] = x0;
		double fd = (fp - fm) / (2 * FD_H);
		double den = fmax(fmax(fabs(fd), fabs(an[i])), fmax(1e-5 * amax, 1e-5));
		double e = den > 0 ? fabs(fd - an[i]) / den : 0;
		if (!(e <= worst) || isnan(e)) {
			worst = isnan(e) ? INFINITY : e;
			wi = i;
			fd_w = fd;
			an_w = an[i];
		}
		cnt++;
	}
	if (acc) {
		acc->max_err = fmax(acc->max_err, worst);
		acc->n += cnt;
	}
	SB_CHECK(worst <= FD_TOL,
	         "%s: %d coords, max rel err %.2e (tol %.0e; worst [%zu] fd %.10g analytic %.10g, |g|max %.3g)", name,
	         cnt, worst, FD_TOL, wi, fd_w, an_w, amax);
}

/* ---------------------------------------------------------------- layers */

struct lin_ctx {
	double *x, *w, *b, *wt, *out;
	int M, K, N;
};
static double lin_f(void *p)
{
	struct lin_ctx *c = p;
	ref_linear(c->out, c->x, c->w, c->b, c->M, c->K, c->N);
	double s = 0;
	for (int i = 0; i < c->M * c->N; i++)
		s += c->wt[i] * c->out[i];
	return s;
}
static void test_linear(uint64_t *rs)
{
	struct lin_ctx c = {.M = 5, .K = 7, .N = 3};
	c.x = ref_alloc(35);
	c.w = ref_alloc(21);
	c.b = ref_alloc(3);
	c.wt = ref_alloc(15);
	c.out = ref_alloc(15);
	fill(c.x, 35, -1, 1, rs);
	fill(c.w, 21, -1, 1, rs);
	fill(c.b, 3, -1, 1, rs);
	fill(c.wt, 15, -1, 1, rs);
	double *dx = ref_alloc(35), *dw = ref_alloc(21), *db = ref_alloc(3);
	ref_linear_bwd(dx, dw, db, c.wt, c.x, c.w, c.M, c.K, c.N, 0);
	fd_check("linear d/dx", c.x, 35, dx, lin_f, &c, 1, NULL);
	fd_check("linear d/dw", c.w, 21, dw, lin_f, &c, 1, NULL);
	fd_check("linear d/db", c.b, 3, db, lin_f, &c, 1, NULL);
	free(c.x), free(c.w), free(c.b), free(c.wt), free(c.out), free(dx), free(dw), free(db);
}

struct ln_ctx {
	double *x, *y, *w, *b, *wt, *out, *mean, *rstd, *r;
	uint8_t *keep;
	double sc;
	int M, d;
};
static double ln_f(void *p)
{
	struct ln_ctx *c = p;
	for (int i = 0; i < c->M * c->d; i++)
		c->r[i] = c->x[i] + (c->y ? (c->keep[i] ? c->y[i] * c->sc : 0.0) : 0.0);
	ref_ln(c->out, c->mean, c->rstd, c->r, c->w, c->b, c->M, c->d);
	double s = 0;
	for (int i = 0; i < c->M * c->d; i++)
		s += c->wt[i] * c->out[i];
	return s;
}
static void test_layernorm(uint64_t *rs)
{
	for (int with_res = 0; with_res < 2; with_res++) {
		struct ln_ctx c = {.M = 4, .d = 9, .sc = 1.0 / 0.9};
		size_t n = 36;
		c.x = ref_alloc(n), c.w = ref_alloc(9), c.b = ref_alloc(9), c.wt = ref_alloc(n), c.out = ref_alloc(n);
		c.mean = ref_alloc(4), c.rstd = ref_alloc(4), c.r = ref_alloc(n);
		c.keep = calloc(n, 1);
		fill(c.x, n, -2, 2, rs);
		fill(c.w, 9, 0.5, 1.5, rs);
		fill(c.b, 9, -1, 1, rs);
		fill(c.wt, n, -1, 1, rs);
		if (with_res) {
			c.y = ref_alloc(n);
			fill(c.y, n, -1, 1, rs);
			for (size_t i = 0; i < n; i++)
				c.keep[i] = urand(rs) > 0.3;
		}
		ln_f(&c);
		double *dr = ref_alloc(n), *dw = ref_alloc(9), *db = ref_alloc(9), *dy = ref_alloc(n);
		ref_ln_bwd(dr, dw, db, c.wt, c.r, c.mean, c.rstd, c.w, c.M, c.d, 0);
		for (size_t i = 0; i < n; i++)
			dy[i] = c.keep[i] ? dr[i] * c.sc : 0.0;
		fd_check(with_res ? "residual+dropout+layernorm d/dx" : "layernorm d/dx", c.x, n, dr, ln_f, &c, 1,
		         NULL);
		fd_check(with_res ? "residual+dropout+layernorm d/dw" : "layernorm d/dw", c.w, 9, dw, ln_f, &c, 1,
		         NULL);
		fd_check(with_res ? "residual+dropout+layernorm d/db" : "layernorm d/db", c.b, 9, db, ln_f, &c, 1,
		         NULL);
		if (with_res)
			fd_check("residual+dropout+layernorm d/dy (dropped entries 0)", c.y, n, dy, ln_f, &c, 1, NULL);
		free(c.x), free(c.y), free(c.w), free(c.b), free(c.wt), free(c.out), free(c.mean), free(c.rstd),
		    free(c.r);
		free(c.keep), free(dr), free(dw), free(db), free(dy);
	}
}

struct gelu_ctx {
	double *x, *wt;
	int n;
};
static double gelu_f(void *p)
{
	struct gelu_ctx *c = p;
	double s = 0;
	for (int i = 0; i < c->n; i++)
		s += c->wt[i] * ref_gelu(c->x[i]);
	return s;
}
static void test_gelu(uint64_t *rs)
{
	struct gelu_ctx c = {.n = 41};
	c.x = ref_alloc(41), c.wt = ref_alloc(41);
	for (int i = 0; i < 41; i++)
		c.x[i] = -8 + 0.4 * i;
	fill(c.wt, 41, -1, 1, rs);
	double *dx = ref_alloc(41);
	for (int i = 0; i < 41; i++)
		dx[i] = c.wt[i] * ref_gelu_d(c.x[i]);
	fd_check("gelu (exact erf) d/dx on [-8, 8]", c.x, 41, dx, gelu_f, &c, 1, NULL);
	free(c.x), free(c.wt), free(dx);
}

struct ce_ctx {
	double *l;
	int *y;
	int B, C;
};
static double ce_f(void *p)
{
	struct ce_ctx *c = p;
	double loss = 0;
	for (int b = 0; b < c->B; b++) {
		double mx = -INFINITY, s = 0;
		for (int k = 0; k < c->C; k++)
			mx = fmax(mx, c->l[b * c->C + k]);
		for (int k = 0; k < c->C; k++)
			s += exp(c->l[b * c->C + k] - mx);
		loss += log(s) + mx - c->l[b * c->C + c->y[b]];
	}
	return loss / c->B;
}
static void test_ce(uint64_t *rs)
{
	struct ce_ctx c = {.B = 3, .C = 5};
	int y[3] = {0, 4, 2};
	c.y = y;
	c.l = ref_alloc(15);
	fill(c.l, 15, -3, 3, rs);
	double *g = ref_alloc(15);
	for (int b = 0; b < 3; b++) {
		double mx = -INFINITY, s = 0;
		for (int k = 0; k < 5; k++)
			mx = fmax(mx, c.l[b * 5 + k]);
		for (int k = 0; k < 5; k++)
			s += exp(c.l[b * 5 + k] - mx);
		for (int k = 0; k < 5; k++)
			g[b * 5 + k] = (exp(c.l[b * 5 + k] - mx) / s - (k == y[b])) / 3;
	}
	fd_check("cross-entropy (mean) d/dlogits", c.l, 15, g, ce_f, &c, 1, NULL);
	free(c.l), free(g);
}

/* ---- attention with a normaliser ---- */
struct att_ctx {
	double *qkv, *out, *S, *P, *wt, *alpha_raw, *alpha;
	int32_t *nvalid;
	struct sb_norm nm;
	int B, T, d, NH, adaptive;
};
static double att_f(void *p)
{
	struct att_ctx *c = p;
	if (c->adaptive)
		for (int h = 0; h < c->NH; h++)
			c->alpha[h] = 1.05 + 0.90 / (1.0 + exp(-c->alpha_raw[h]));
	int rc = ref_attention(c->out, c->S, c->P, c->qkv, c->nvalid, c->adaptive ? c->alpha : NULL, &c->nm, c->B, c->T,
	                       c->d, c->NH);
	if (rc)
		return NAN;
	double s = 0;
	for (int i = 0; i < c->B * c->T * c->d; i++)
		s += c->wt[i] * c->out[i];
	return s;
}

static void attention_case(const char *label, const char *method, double alpha, enum sb_mask_mode mask,
                           const int32_t *nvalid, int ties, double raw0, uint64_t *rs, struct fd_stats *acc)
{
	struct att_ctx c = {.B = 3, .T = 7, .d = 8, .NH = 2};
	struct sb_err e = {0};
	if (sb_norm_parse(method, alpha, &c.nm, &e)) {
		SB_CHECK(0, "%s: parse %s: %s", label, method, e.msg);
		return;
	}
	c.nm.mask = mask;
	c.adaptive = c.nm.kind == SB_NORM_ADAPTIVE;
	int n = c.B * c.T, d3 = 3 * c.d;
	c.qkv = ref_alloc((size_t)n * d3), c.out = ref_alloc((size_t)n * c.d), c.wt = ref_alloc((size_t)n * c.d);
	c.S = ref_alloc((size_t)c.B * c.NH * c.T * c.T), c.P = ref_alloc((size_t)c.B * c.NH * c.T * c.T);
	c.alpha_raw = ref_alloc(c.NH), c.alpha = ref_alloc(c.NH);
	c.nvalid = (int32_t *)nvalid;
	fill(c.qkv, (size_t)n * d3, -1.5, 1.5, rs);
	fill(c.wt, (size_t)n * c.d, -1, 1, rs);
	for (int h = 0; h < c.NH; h++)
		c.alpha_raw[h] = raw0 + 0.3 * h;
	if (ties) /* keys 2 and 5 (and 1 and 3) equal in every sample: exact score ties */
		for (int b = 0; b < c.B; b++)
			for (int k = 0; k < c.d; k++) {
				c.qkv[((size_t)b * c.T + 5) * d3 + c.d + k] =
				    c.qkv[((size_t)b * c.T + 2) * d3 + c.d + k];
				c.qkv[((size_t)b * c.T + 3) * d3 + c.d + k] =
				    c.qkv[((size_t)b * c.T + 1) * d3 + c.d + k];
			}
	double f0 = att_f(&c);
	if (isnan(f0)) {
		SB_CHECK(0, "%s: forward failed", label);
		return;
	}
	double *dqkv = ref_alloc((size_t)n * d3), dal[8] = {0};
	ref_attention_bwd(dqkv, c.adaptive || c.nm.kind == SB_NORM_ENTMAX_BISECT ? dal : NULL, c.wt, c.qkv, c.S, c.P,
	                  c.nvalid, c.adaptive ? c.alpha : NULL, &c.nm, c.B, c.T, c.d, c.NH);
	char nm[256];
	if (!ties) {
		snprintf(nm, sizeof nm, "attention %s d/dqkv", label);
		fd_check(nm, c.qkv, (size_t)n * d3, dqkv, att_f, &c, 1, acc);
	} else {
		/* q and v columns only (k perturbations would break the ties) */
		double *an = ref_alloc((size_t)n * d3);
		memcpy(an, dqkv, (size_t)n * d3 * sizeof *an);
		for (int i = 0; i < n; i++) {
			snprintf(nm, sizeof nm, "attention %s d/dq row %d", label, i);
			if (i == 0 || i == n - 1)
				fd_check(nm, c.qkv + (size_t)i * d3, c.d, an + (size_t)i * d3, att_f, &c, 1, acc);
		}
		/* all q and v coordinates, one check */
		double worst = 0;
		for (int i = 0; i < n; i++)
			for (int k = 0; k < d3; k++) {
				if (k >= c.d && k < 2 * c.d)
					continue;
				size_t j = (size_t)i * d3 + k;
				double x0 = c.qkv[j];
				c.qkv[j] = x0 + FD_H;
				double fp = att_f(&c);
				c.qkv[j] = x0 - FD_H;
				double fm = att_f(&c);
				c.qkv[j] = x0;
				double fd = (fp - fm) / (2 * FD_H), den = fmax(fmax(fabs(fd), fabs(an[j])), 1e-5);
				worst = fmax(worst, fabs(fd - an[j]) / den);
			}
		acc->max_err = fmax(acc->max_err, worst);
		SB_CHECK(worst <= FD_TOL, "attention %s d/dq, d/dv with tied keys: max rel err %.2e (tol %.0e)", label,
		         worst, FD_TOL);
		free(an);
	}
	if (c.adaptive) {
		double dr[8];
		for (int h = 0; h < c.NH; h++) {
			double s = 1.0 / (1.0 + exp(-c.alpha_raw[h]));
			dr[h] = dal[h] * 0.90 * s * (1 - s);
		}
		snprintf(nm, sizeof nm, "attention %s d/dalpha_raw (alpha %.4f, %.4f)", label, c.alpha[0], c.alpha[1]);
		fd_check(nm, c.alpha_raw, c.NH, dr, att_f, &c, 1, acc);
	}
	free(c.qkv), free(c.out), free(c.wt), free(c.S), free(c.P), free(c.alpha_raw), free(c.alpha), free(dqkv);
}

static void test_attention(uint64_t *rs)
{
	static const char *methods[] = {"softmax",         "topk_softmax_0125",       "topk_softmax_025",
	                                "topk_softmax_05", "bottomk_softmax_025",     "sparsemax",
	                                "entmax15",        "headwise_adaptive_entmax"};
	const int32_t nv_mixed[3] = {7, 4, 1}; /* full, padded, CLS only */
	struct fd_stats acc = {0};
	for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
		char lab[128];
		snprintf(lab, sizeof lab, "%s unmasked", methods[i]);
		attention_case(lab, methods[i], 1.5, SB_MASK_MARGIN, NULL, 0, 0.0, rs, &acc);
		if (strncmp(methods[i], "bottomk", 7)) { /* bottom-k picks padded keys: not used on masked tasks */
			snprintf(lab, sizeof lab, "%s masked margin n_valid {7,4,1}", methods[i]);
			attention_case(lab, methods[i], 1.5, SB_MASK_MARGIN, nv_mixed, 0, 0.0, rs, &acc);
			snprintf(lab, sizeof lab, "%s masked exclude n_valid {7,4,1}", methods[i]);
			attention_case(lab, methods[i], 1.5, SB_MASK_EXCLUDE, nv_mixed, 0, 0.0, rs, &acc);
		}
		snprintf(lab, sizeof lab, "%s ties", methods[i]);
		attention_case(lab, methods[i], 1.5, SB_MASK_MARGIN, NULL, 1, 0.0, rs, &acc);
	}
	/* entmax_bisect at and near the bounds of alpha, HAE with alpha near both bounds */
	attention_case("entmax_bisect alpha 1.05", "entmax_bisect", 1.05, SB_MASK_MARGIN, NULL, 0, 0, rs, &acc);
	attention_case("entmax_bisect alpha 1.2", "entmax_bisect", 1.2, SB_MASK_MARGIN, NULL, 0, 0, rs, &acc);
	attention_case("entmax_bisect alpha 2.0", "entmax_bisect", 2.0, SB_MASK_MARGIN, NULL, 0, 0, rs, &acc);
	attention_case("HAE alpha near 1.05 (raw -6)", "headwise_adaptive_entmax", 0, SB_MASK_MARGIN, NULL, 0, -6.0, rs,
	               &acc);
	attention_case("HAE alpha near 1.95 (raw +6)", "headwise_adaptive_entmax", 0, SB_MASK_MARGIN, NULL, 0, 6.0, rs,
	               &acc);
	attention_case("HAE masked margin, alpha near 1.95", "headwise_adaptive_entmax", 0, SB_MASK_MARGIN, nv_mixed, 0,
	               5.0, rs, &acc);
	printf("# attention: %d FD coordinates, max rel err %.2e\n", acc.n, acc.max_err);
}

/* ---- local mixer ---- */
struct mix_ctx {
	double *x, *out, *y, *z, *mean, *rstd, *lnw, *lnb, *cw, *cb, *scale, *wt;
	int32_t *nvalid;
	int B, T, d, G;
};
static double mix_f(void *p)
{
	struct mix_ctx *c = p;
	ref_localmix(c->out, c->y, c->z, c->mean, c->rstd, c->x, c->nvalid, c->lnw, c->lnb, c->cw, c->cb, c->scale[0],
	             c->B, c->T, c->d, c->G);
	double s = 0;
	for (int i = 0; i < c->B * c->T * c->d; i++)
		s += c->wt[i] * c->out[i];
	return s;
}
static void test_localmix(uint64_t *rs)
{
	for (int twod = 1; twod >= 0; twod--) {
		int32_t nv[2] = {6, 10};
		struct mix_ctx c = {.B = 2, .T = 10, .d = 5, .G = twod ? 3 : 0, .nvalid = twod ? NULL : nv};
		int L = 9, KK = twod ? 9 : 3, n = c.B * c.T * c.d;
		c.x = ref_alloc(n), c.out = ref_alloc(n), c.wt = ref_alloc(n);
		c.y = ref_alloc((size_t)c.B * L * c.d), c.z = ref_alloc((size_t)c.B * L * c.d);
		c.mean = ref_alloc((size_t)c.B * L), c.rstd = ref_alloc((size_t)c.B * L);
		c.lnw = ref_alloc(c.d), c.lnb = ref_alloc(c.d), c.cw = ref_alloc((size_t)c.d * KK),
		c.cb = ref_alloc(c.d);
		c.scale = ref_alloc(1);
		fill(c.x, n, -2, 2, rs);
		fill(c.wt, n, -1, 1, rs);
		fill(c.lnw, c.d, 0.5, 1.5, rs);
		fill(c.lnb, c.d, -0.5, 0.5, rs);
		fill(c.cw, (size_t)c.d * KK, -0.6, 0.6, rs);
		fill(c.cb, c.d, -0.3, 0.3, rs);
		c.scale[0] = 0.7;
		mix_f(&c);
		double *dx = ref_alloc(n), *dlnw = ref_alloc(c.d), *dlnb = ref_alloc(c.d),
		       *dcw = ref_alloc((size_t)c.d * KK), *dcb = ref_alloc(c.d), ds = 0;
		ref_localmix_bwd(dx, dlnw, dlnb, dcw, dcb, &ds, c.wt, c.x, c.y, c.z, c.mean, c.rstd, c.nvalid, c.lnw,
		                 c.cw, c.scale[0], c.B, c.T, c.d, c.G);
		const char *k = twod ? "local mixer 3x3 grid" : "local mixer 1-D, masked n_valid {6,10}";
		char nm[128];
		snprintf(nm, sizeof nm, "%s d/dx", k);
		fd_check(nm, c.x, n, dx, mix_f, &c, 1, NULL);
		snprintf(nm, sizeof nm, "%s d/dln.weight", k);
		fd_check(nm, c.lnw, c.d, dlnw, mix_f, &c, 1, NULL);
		snprintf(nm, sizeof nm, "%s d/dln.bias", k);
		fd_check(nm, c.lnb, c.d, dlnb, mix_f, &c, 1, NULL);
		snprintf(nm, sizeof nm, "%s d/dconv.weight", k);
		fd_check(nm, c.cw, (size_t)c.d * KK, dcw, mix_f, &c, 1, NULL);
		snprintf(nm, sizeof nm, "%s d/dconv.bias", k);
		fd_check(nm, c.cb, c.d, dcb, mix_f, &c, 1, NULL);
		snprintf(nm, sizeof nm, "%s d/dscale", k);
		fd_check(nm, c.scale, 1, &ds, mix_f, &c, 1, NULL);
		free(c.x), free(c.out), free(c.wt), free(c.y), free(c.z), free(c.mean), free(c.rstd), free(c.lnw);
		free(c.lnb), free(c.cw), free(c.cb), free(c.scale), free(dx), free(dlnw), free(dlnb), free(dcw),
		    free(dcb);
	}
}

/* ---------------------------------------------------------------- whole model */

struct model_ctx {
	const struct sb_encoder *m;
	double *params;
	struct ref_input in;
};
static double model_f(void *p)
{
	struct model_ctx *c = p;
	struct ref_cache cache;
	int rc;
	double l = ref_forward(c->m, c->params, &c->in, &cache, &rc);
	ref_cache_free(&cache);
	return l;
}

static void model_case(const char *label, int text, const char *method, const char *arch, enum sb_mask_mode mask,
                       double dropout, uint64_t *rs)
{
	struct sb_backend *be = NULL;
	struct sb_err e = {0};
	if (sb_backend_cpu_open(1, &be, &e)) {
		SB_CHECK(0, "backend: %s", e.msg);
		return;
	}
	struct sb_encoder_cfg cfg = {0};
	cfg.modality = text ? SB_TEXT : SB_IMAGE;
	cfg.channels = 2, cfg.height = 6, cfg.width = 7, cfg.patch = 3; /* crop 7 -> 6: 2x2 grid */
	cfg.seq_len = 5, cfg.vocab = 11;
	cfg.classes = 3, cfg.layers = 2, cfg.d = 8, cfg.heads = 2;
	sb_encoder_arch_parse(arch, &cfg.arch);
	sb_norm_parse(method, 1.5, &cfg.norm, &e);
	cfg.norm.mask = mask;
	cfg.dropout = (float)dropout;
	struct sb_encoder *m = NULL;
	if (sb_encoder_new(&cfg, be, 4, &m, &e)) {
		SB_CHECK(0, "%s: model: %s", label, e.msg);
		sb_backend_close(be);
		return;
	}
	int n = 6;
	uint8_t img[6 * 2 * 6 * 7];
	int32_t tok[6 * 5], len[6] = {5, 3, 0, 1, 4, 2}, lab[6] = {0, 2, 1, 1, 0, 2};
	for (size_t i = 0; i < sizeof img; i++)
		img[i] = (uint8_t)(urand(rs) * 256);
	for (int i = 0; i < 6 * 5; i++)
		tok[i] = (i % 5) < len[i / 5] ? 2 + (int)(urand(rs) * 9) : 0;
	tok[7] = 1; /* the reserved marker id */
	uint32_t idx[4] = {4, 1, 2, 0};
	struct model_ctx c = {m, NULL, {4, img, tok, len, lab, idx, dropout, 7, 3, NULL}};
	(void)n;
	c.params = ref_alloc(m->pstride);
	/* parameters: the model's initialisation, then perturbed so that nothing is at a
	 * symmetric point (LN weights 1, biases 0, alpha_raw 0) */

	float *fp = malloc(m->pstride * sizeof *fp);
	sb_encoder_init(m, 11, &e);
	be->ops->download(be, fp, m->params, m->pstride * sizeof *fp, &e);
	for (size_t i = 0; i < m->pstride; i++)
		c.params[i] = fp[i] + 0.05 * (urand(rs) - 0.5);
	if (text) /* padding row stays 0, as the model keeps it */
		for (int k = 0; k < cfg.d; k++)
			c.params[m->pinfo[0].offset + k] = 0;
	double *g = ref_alloc(m->pstride);
	struct ref_cache cache;
	int rc;
	double loss = ref_forward(m, c.params, &c.in, &cache, &rc);
	SB_CHECK(rc == 0 && isfinite(loss), "%s: reference forward (loss %.6f)", label, loss);
	ref_backward(m, c.params, &c.in, &cache, g);
	ref_cache_free(&cache);
	struct fd_stats acc = {0};
	for (int t = 0; t < m->ntensors; t++) {
		const struct sb_param_info *q = &m->pinfo[t];
		char nm[192];
		snprintf(nm, sizeof nm, "model %s: d/d%s", label, q->name);
		size_t stride = q->numel > 64 ? q->numel / 48 + 1 : 1;
		fd_check(nm, c.params + q->offset, q->numel, g + q->offset, model_f, &c, stride, &acc);
	}
	printf("# model %s: %zu parameters, %d FD coordinates, max rel err %.2e\n", label, sb_encoder_param_count(m),
	       acc.n, acc.max_err);
	free(fp);
	free(g);
	free(c.params);
	sb_encoder_free(m);
	sb_backend_close(be);
}

int main(void)
{
	uint64_t rs = 12345;
	test_linear(&rs);
	test_layernorm(&rs);
	test_gelu(&rs);
	test_ce(&rs);
	test_localmix(&rs);
	test_attention(&rs);
	model_case("image plain softmax", 0, "softmax", "plain", SB_MASK_MARGIN, 0.0, &rs);
	model_case("image plain softmax dropout 0.3", 0, "softmax", "plain", SB_MASK_MARGIN, 0.3, &rs);
	model_case("image local_hybrid topk_softmax_05", 0, "topk_softmax_05", "local_hybrid", SB_MASK_MARGIN, 0.1,
	           &rs);
	model_case("image plain HAE", 0, "headwise_adaptive_entmax", "plain", SB_MASK_MARGIN, 0.0, &rs);
	model_case("text plain sparsemax margin", 1, "sparsemax", "plain", SB_MASK_MARGIN, 0.0, &rs);
	model_case("text local_hybrid entmax15 exclude", 1, "entmax15", "local_hybrid", SB_MASK_EXCLUDE, 0.1, &rs);
	model_case("text plain softmax margin", 1, "softmax", "plain", SB_MASK_MARGIN, 0.0, &rs);
	return sb_test_done();
}
