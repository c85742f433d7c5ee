/* ref_encoder.h — a double-precision reference of the encoder (tests only).
 *
 * Plain loops, one layer at a time over the whole batch, no fusion, no tiles:
 * written to be obviously right and independent of lib/backend_cpu*.c. The
 * normalisers are the double references of lib/attn_norm (attn_norm_ref.c).
 * Every backward here is itself checked against central finite differences
 * (test_encoder_grad.c); the float engine is checked against this
 * (test_backend.c op by op, test_encoder.c for the whole model).
 *
 * Parameters are a double vector laid out like the float model's (m->pinfo).
 */
#ifndef SB_REF_ENCODER_H
#define SB_REF_ENCODER_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn_norm.h"
#include "encoder.h"
#include "rng.h"

#define REF_LN_EPS 1e-5

static double *ref_alloc(size_t n)
{
	double *p = calloc(n ? n : 1, sizeof *p);
	if (!p)
		abort();
	return p;
}

/* ---------------------------------------------------------------- ops */

/* out[M,N] = inp[M,K] w[N,K]^T + b */
static void ref_linear(double *out, const double *inp, const double *w, const double *b, int M, int K, int N)
{
	for (int i = 0; i < M; i++)
		for (int o = 0; o < N; o++) {
			double s = b ? b[o] : 0;
			for (int k = 0; k < K; k++)
				s += inp[(size_t)i * K + k] * w[(size_t)o * K + k];
			out[(size_t)i * N + o] = s;
		}
}

/* dinp (+= when acc) , dw +=, db += */
static void ref_linear_bwd(double *dinp, double *dw, double *db, const double *dout, const double *inp, const double *w,
                           int M, int K, int N, int acc)
{
	for (int i = 0; i < M; i++) {
		if (dinp)
			for (int k = 0; k < K; k++) {
				double s = 0;
				for (int o = 0; o < N; o++)
					s += dout[(size_t)i * N + o] * w[(size_t)o * K + k];
				dinp[(size_t)i * K + k] = (acc ? dinp[(size_t)i * K + k] : 0) + s;
			}
		for (int o = 0; o < N; o++) {
			double g = dout[(size_t)i * N + o];
			if (db)
				db[o] += g;
			if (dw)
				for (int k = 0; k < K; k++)
					dw[(size_t)o * K + k] += g * inp[(size_t)i * K + k];
		}
	}
}

static void ref_ln(double *out, double *mean, double *rstd, const double *x, const double *w, const double *b, int M,
                   int d)
{
	for (int i = 0; i < M; i++) {
		const double *r = x + (size_t)i * d;
		double mu = 0, var = 0;
		for (int c = 0; c < d; c++)
			mu += r[c];
		mu /= d;
		for (int c = 0; c < d; c++)
			var += (r[c] - mu) * (r[c] - mu);
		var /= d;
		double rs = 1.0 / sqrt(var + REF_LN_EPS);
		mean[i] = mu;
		rstd[i] = rs;
		for (int c = 0; c < d; c++)
			out[(size_t)i * d + c] = (r[c] - mu) * rs * w[c] + b[c];
	}
}

static void ref_ln_bwd(double *dx, double *dw, double *db, const double *dout, const double *x, const double *mean,
                       const double *rstd, const double *w, int M, int d, int acc)
{
	for (int i = 0; i < M; i++) {
		const double *r = x + (size_t)i * d, *g = dout + (size_t)i * d;
		double s1 = 0, s2 = 0;
		for (int c = 0; c < d; c++) {
			double xh = (r[c] - mean[i]) * rstd[i];
			s1 += g[c] * w[c];
			s2 += g[c] * w[c] * xh;
			dw[c] += g[c] * xh;
			db[c] += g[c];
		}
		for (int c = 0; c < d; c++) {
			double xh = (r[c] - mean[i]) * rstd[i];
			double v = rstd[i] * (g[c] * w[c] - s1 / d - xh * s2 / d);
			dx[(size_t)i * d + c] = (acc ? dx[(size_t)i * d + c] : 0) + v;
		}
	}
}

/* gelu(x) = x Phi(x), Phi(x) = erfc(-x/sqrt2)/2 (erfc keeps its relative accuracy where
 * 1 + erf(x/sqrt2) would cancel, x < -5) */
static double ref_gelu(double x)
{
	return 0.5 * x * erfc(-x / sqrt(2.0));
}
static double ref_gelu_d(double x)
{
	return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

/* dropout mask of the engine's rule (lib/backend.h): element i of (seed, stream) */
static int ref_keep(double p, uint64_t seed, uint64_t stream, uint64_t i)
{
	if (p <= 0)
		return 1;
	return sb_rng_u32_to_unit_f(sb_rng_word_at(seed, SB_RNG_DROPOUT, stream, i)) >= (float)p;
}

/* attention: qkv [B,T,3d] -> out [B,T,d]; saves S, P [B,NH,T,T] */
static int ref_attention(double *out, double *S, double *P, const double *qkv, const int32_t *nvalid,
                         const double *alpha, const struct sb_norm *nm, int B, int T, int d, int NH)
{
	int hd = d / NH, d3 = 3 * d;
	double sc = sqrt((double)hd);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++) {
			double *Sb = S + ((size_t)b * NH + h) * T * T, *Pb = P + ((size_t)b * NH + h) * T * T;
			for (int i = 0; i < T; i++)
				for (int j = 0; j < T; j++) {
					double s = 0;
					for (int c = 0; c < hd; c++)
						s += qkv[((size_t)b * T + i) * d3 + h * hd + c] *
						     qkv[((size_t)b * T + j) * d3 + d + h * hd + c];
					Sb[(size_t)i * T + j] = s / sc;
				}
			struct sb_err e = {0};
			double a = alpha ? alpha[h] : nm->alpha;
			if (sb_norm_forward_ref_f64(nm, Pb, Sb, T, T, nvalid ? nvalid[b] : T, a, &e))
				return e.code;
			for (int i = 0; i < T; i++)
				for (int c = 0; c < hd; c++) {
					double s = 0;
					for (int j = 0; j < T; j++)
						s += Pb[(size_t)i * T + j] *
						     qkv[((size_t)b * T + j) * d3 + 2 * d + h * hd + c];
					out[((size_t)b * T + i) * d + h * hd + c] = s;
				}
		}
	return 0;
}

static void ref_attention_bwd(double *dqkv, double *dalpha, const double *dout, const double *qkv, const double *S,
                              const double *P, const int32_t *nvalid, const double *alpha, const struct sb_norm *nm,
                              int B, int T, int d, int NH)
{
	int hd = d / NH, d3 = 3 * d;
	double sc = sqrt((double)hd);
	double *dP = ref_alloc((size_t)T * T), *dS = ref_alloc((size_t)T * T);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < NH; h++) {
			const double *Sb = S + ((size_t)b * NH + h) * T * T, *Pb = P + ((size_t)b * NH + h) * T * T;
#define Q(i, c) qkv[((size_t)b * T + (i)) * d3 + h * hd + (c)]
#define K(i, c) qkv[((size_t)b * T + (i)) * d3 + d + h * hd + (c)]
#define V(i, c) qkv[((size_t)b * T + (i)) * d3 + 2 * d + h * hd + (c)]
#define GO(i, c) dout[((size_t)b * T + (i)) * d + h * hd + (c)]
#define DQ(i, c) dqkv[((size_t)b * T + (i)) * d3 + h * hd + (c)]
#define DK(i, c) dqkv[((size_t)b * T + (i)) * d3 + d + h * hd + (c)]
#define DV(i, c) dqkv[((size_t)b * T + (i)) * d3 + 2 * d + h * hd + (c)]
			for (int i = 0; i < T; i++)
				for (int j = 0; j < T; j++) {
					double s = 0;
					for (int c = 0; c < hd; c++)
						s += GO(i, c) * V(j, c);
					dP[(size_t)i * T + j] = s;
				}
			for (int j = 0; j < T; j++)
				for (int c = 0; c < hd; c++) {
					double s = 0;
					for (int i = 0; i < T; i++)
						s += Pb[(size_t)i * T + j] * GO(i, c);
					DV(j, c) = s;
				}
			double da = 0, a = alpha ? alpha[h] : nm->alpha;
			struct sb_err e = {0};
			sb_norm_backward_ref_f64(nm, dS, dalpha ? &da : NULL, dP, Sb, T, T, nvalid ? nvalid[b] : T, a,
			                         &e);
			if (dalpha)
				dalpha[h] += da;
			for (int i = 0; i < T; i++)
				for (int c = 0; c < hd; c++) {
					double sq = 0, sk = 0;
					for (int j = 0; j < T; j++) {
						sq += dS[(size_t)i * T + j] * K(j, c);
						sk += dS[(size_t)j * T + i] * Q(j, c);
					}
					DQ(i, c) = sq / sc;
					DK(i, c) = sk / sc;
				}
#undef Q
#undef K
#undef V
#undef GO
#undef DQ
#undef DK
#undef DV
		}
	free(dP);
	free(dS);
}

static int ref_mix_nbr(int t, int k, int G, int L)
{
	if (G > 0) {
		int r = t / G + k / 3 - 1, c = t % G + k % 3 - 1;
		return (r < 0 || r >= G || c < 0 || c >= G) ? -1 : r * G + c;
	}
	int s = t + k - 1;
	return s < 0 || s >= L ? -1 : s;
}

/* local mixer on x [B,T,d] -> out; saves y, z [B,L,d], mean, rstd [B,L] */
static void ref_localmix(double *out, double *y, double *z, double *mean, double *rstd, const double *x,
                         const int32_t *nvalid, const double *lnw, const double *lnb, const double *cw,
                         const double *cb, double scale, int B, int T, int d, int G)
{
	int L = T - 1, KK = G > 0 ? 9 : 3;
	for (int b = 0; b < B; b++) {
		const double *xb = x + (size_t)b * T * d;
		double *yb = y + (size_t)b * L * d, *zb = z + (size_t)b * L * d, *ob = out + (size_t)b * T * d;
		for (int c = 0; c < d; c++)
			ob[c] = xb[c];
		ref_ln(yb, mean + (size_t)b * L, rstd + (size_t)b * L, xb + d, lnw, lnb, L, d);
		for (int t = 0; t < L; t++)
			if (nvalid && t >= nvalid[b] - 1)
				for (int c = 0; c < d; c++)
					yb[(size_t)t * d + c] = 0;
		for (int t = 0; t < L; t++)
			for (int c = 0; c < d; c++) {
				double s = cb[c];
				for (int k = 0; k < KK; k++) {
					int n = ref_mix_nbr(t, k, G, L);
					if (n >= 0)
						s += cw[(size_t)c * KK + k] * yb[(size_t)n * d + c];
				}
				zb[(size_t)t * d + c] = s;
			}
		for (int t = 0; t < L; t++) {
			int valid = !nvalid || t < nvalid[b] - 1;
			for (int c = 0; c < d; c++)
				ob[(size_t)(t + 1) * d + c] =
				    valid ? xb[(size_t)(t + 1) * d + c] + scale * ref_gelu(zb[(size_t)t * d + c]) : 0.0;
		}
	}
}

static void ref_localmix_bwd(double *dx, double *dlnw, double *dlnb, double *dcw, double *dcb, double *dscale,
                             const double *dout, const double *x, const double *y, const double *z, const double *mean,
                             const double *rstd, const int32_t *nvalid, const double *lnw, const double *cw,
                             double scale, int B, int T, int d, int G)
{
	int L = T - 1, KK = G > 0 ? 9 : 3;
	double *dz = ref_alloc((size_t)L * d), *dy = ref_alloc((size_t)L * d);
	for (int b = 0; b < B; b++) {
		const double *gb = dout + (size_t)b * T * d, *yb = y + (size_t)b * L * d, *zb = z + (size_t)b * L * d;
		double *dxb = dx + (size_t)b * T * d;
		for (int c = 0; c < d; c++)
			dxb[c] = gb[c];
		for (int t = 0; t < L; t++) {
			int valid = !nvalid || t < nvalid[b] - 1;
			for (int c = 0; c < d; c++) {
				double g = valid ? gb[(size_t)(t + 1) * d + c] : 0.0, zz = zb[(size_t)t * d + c];
				dxb[(size_t)(t + 1) * d + c] = g;
				*dscale += g * ref_gelu(zz);
				dz[(size_t)t * d + c] = scale * g * ref_gelu_d(zz);
			}
		}
		memset(dy, 0, (size_t)L * d * sizeof *dy);
		for (int t = 0; t < L; t++)
			for (int c = 0; c < d; c++) {
				double g = dz[(size_t)t * d + c];
				dcb[c] += g;
				for (int k = 0; k < KK; k++) {
					int n = ref_mix_nbr(t, k, G, L);
					if (n < 0)
						continue;
					dcw[(size_t)c * KK + k] += g * yb[(size_t)n * d + c];
					dy[(size_t)n * d + c] += g * cw[(size_t)c * KK + k];
				}
			}
		for (int t = 0; t < L; t++)
			if (nvalid && t >= nvalid[b] - 1)
				for (int c = 0; c < d; c++)
					dy[(size_t)t * d + c] = 0;
		ref_ln_bwd(dxb + d, dlnw, dlnb, dy, x + (size_t)b * T * d + d, mean + (size_t)b * L,
		           rstd + (size_t)b * L, lnw, L, d, 1);
	}
	free(dz);
	free(dy);
}

/* ---------------------------------------------------------------- the model */

struct ref_layer_ptrs {
	const double *mix_lnw, *mix_lnb, *mix_cw, *mix_cb, *mix_scale;
	const double *qkv_w, *qkv_b, *out_w, *out_b, *alpha_raw;
	const double *ln1_w, *ln1_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b, *ln2_w, *ln2_b;
};
struct ref_ptrs {
	const double *embed_w, *embed_b, *cls, *pos, *head_w, *head_b;
	struct ref_layer_ptrs l[SB_ENCODER_MAX_LAYERS];
};

/* the double pointer set with the float model's offsets */
static void ref_ptrs_of(const struct sb_encoder *m, const double *base, struct ref_ptrs *r)
{
	struct sb_model_ptrs f;
	sb_encoder_ptrs(m, m->params, &f); /* offsets relative to the float buffer */
#define OFF(p) ((p) ? base + ((p) - (const float *)m->params) : NULL)
	r->embed_w = OFF(f.embed_w);
	r->embed_b = OFF(f.embed_b);
	r->cls = OFF(f.cls);
	r->pos = OFF(f.pos);
	r->head_w = OFF(f.head_w);
	r->head_b = OFF(f.head_b);
	for (int l = 0; l < m->cfg.layers; l++) {
		const struct sb_layer_ptrs *a = &f.l[l];
		struct ref_layer_ptrs *b = &r->l[l];
		b->mix_lnw = OFF(a->mix_lnw);
		b->mix_lnb = OFF(a->mix_lnb);
		b->mix_cw = OFF(a->mix_cw);
		b->mix_cb = OFF(a->mix_cb);
		b->mix_scale = OFF(a->mix_scale);
		b->qkv_w = OFF(a->qkv_w);
		b->qkv_b = OFF(a->qkv_b);
		b->out_w = OFF(a->out_w);
		b->out_b = OFF(a->out_b);
		b->alpha_raw = OFF(a->alpha_raw);
		b->ln1_w = OFF(a->ln1_w);
		b->ln1_b = OFF(a->ln1_b);
		b->fc1_w = OFF(a->fc1_w);
		b->fc1_b = OFF(a->fc1_b);
		b->fc2_w = OFF(a->fc2_w);
		b->fc2_b = OFF(a->fc2_b);
		b->ln2_w = OFF(a->ln2_w);
		b->ln2_b = OFF(a->ln2_b);
	}
#undef OFF
}

/* inputs of a batch: images (u8 [n,C,H,W]) or tokens, with labels, and dropout */
struct ref_input {
	int B;
	const uint8_t *images;
	const int32_t *tokens, *len;
	const int32_t *labels;
	const uint32_t *idx;
	double dropout;
	uint64_t seed;
	int64_t step;
	double **keep_datt; /* not NULL: ref_backward copies layer l's d loss / d attention output [B,T,d] here */
};

struct ref_layer_cache {
	double *x, *xm, *my, *mz, *mmean, *mrstd, *qkv, *S, *P, *att, *proj, *r1, *mean1, *rstd1, *x1, *h, *g, *f, *r2,
	    *mean2, *rstd2;
	uint8_t *k1, *kh, *k2;
};
struct ref_cache {
	int B;
	double *patches, *emb, *x0, *xout, *cls, *logits, *alpha;
	int32_t *ids, *nvalid;
	struct ref_layer_cache l[SB_ENCODER_MAX_LAYERS];
};

static __attribute__((unused)) void ref_cache_free(struct ref_cache *c)
{
	free(c->patches);
	free(c->emb);
	free(c->x0);
	free(c->xout);
	free(c->cls);
	free(c->logits);
	free(c->alpha);
	free(c->ids);
	free(c->nvalid);
	for (int l = 0; l < SB_ENCODER_MAX_LAYERS; l++) {
		struct ref_layer_cache *a = &c->l[l];
		double **ds[] = {&a->x,  &a->xm, &a->my,  &a->mz,   &a->mmean, &a->mrstd, &a->qkv,
		                 &a->S,  &a->P,  &a->att, &a->proj, &a->r1,    &a->mean1, &a->rstd1,
		                 &a->x1, &a->h,  &a->g,   &a->f,    &a->r2,    &a->mean2, &a->rstd2};
		for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
			free(*ds[i]);
		free(a->k1);
		free(a->kh);
		free(a->k2);
	}
	memset(c, 0, sizeof *c);
}

/* Forward: returns the mean loss; fills c (caller frees with ref_cache_free).
 * Returns NAN and sets *rc on a normaliser error. */
static __attribute__((unused)) double ref_forward(const struct sb_encoder *m, const double *params,
                                                  const struct ref_input *in, struct ref_cache *c, int *rc)
{
	const struct sb_encoder_cfg *cf = &m->cfg;
	struct ref_ptrs p;
	ref_ptrs_of(m, params, &p);
	int B = in->B, T = m->T, L = m->L, d = cf->d, NH = cf->heads, ff = m->ff, n = B * T;
	memset(c, 0, sizeof *c);
	c->B = B;
	*rc = 0;
	c->emb = ref_alloc((size_t)B * L * d);
	c->nvalid = NULL;
	if (cf->modality == SB_IMAGE) {
		int Pd = m->P, p_ = cf->patch, gw = cf->width / p_;
		c->patches = ref_alloc((size_t)B * L * Pd);
		for (int b = 0; b < B; b++) {
			const uint8_t *im = in->images + (size_t)in->idx[b] * cf->channels * cf->height * cf->width;
			for (int t = 0; t < L; t++) {
				int pr = t / gw, pc = t % gw, e = 0;
				for (int ch = 0; ch < cf->channels; ch++)
					for (int i = 0; i < p_; i++)
						for (int j = 0; j < p_; j++)
							c->patches[((size_t)b * L + t) * Pd + e++] =
							    (double)(float)(im[(size_t)ch * cf->height * cf->width +
							                       (size_t)(pr * p_ + i) * cf->width +
							                       pc * p_ + j] /
							                    255.0f);
			}
		}
		ref_linear(c->emb, c->patches, p.embed_w, p.embed_b, B * L, Pd, d);
	} else {
		c->ids = calloc((size_t)B * L, sizeof *c->ids);
		c->nvalid = calloc((size_t)B, sizeof *c->nvalid);
		for (int b = 0; b < B; b++) {
			memcpy(c->ids + (size_t)b * L, in->tokens + (size_t)in->idx[b] * L, (size_t)L * sizeof *c->ids);
			c->nvalid[b] = 1 + (in->len ? in->len[in->idx[b]] : L);
			for (int t = 0; t < L; t++)
				memcpy(c->emb + ((size_t)b * L + t) * d,
				       p.embed_w + (size_t)c->ids[(size_t)b * L + t] * d, (size_t)d * sizeof(double));
		}
	}
	c->x0 = ref_alloc((size_t)n * d);
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int k = 0; k < d; k++)
				c->x0[((size_t)b * T + t) * d + k] =
				    (t == 0 ? p.cls[k] : c->emb[((size_t)b * L + t - 1) * d + k]) +
				    p.pos[(size_t)t * d + k];
	c->alpha = ref_alloc((size_t)cf->layers * NH);
	const double *x = c->x0;
	for (int l = 0; l < cf->layers; l++) {
		struct ref_layer_cache *a = &c->l[l];
		const struct ref_layer_ptrs *lp = &p.l[l];
		if (l == 0) {
			a->x = ref_alloc((size_t)n * d);
			memcpy(a->x, x, (size_t)n * d * sizeof *a->x);
		} /* else: set by the previous layer */
		const double *xm = a->x;
		if (cf->arch == SB_ARCH_LOCAL_HYBRID) {
			a->xm = ref_alloc((size_t)n * d);
			a->my = ref_alloc((size_t)B * L * d);
			a->mz = ref_alloc((size_t)B * L * d);
			a->mmean = ref_alloc((size_t)B * L);
			a->mrstd = ref_alloc((size_t)B * L);
			ref_localmix(a->xm, a->my, a->mz, a->mmean, a->mrstd, a->x, c->nvalid, lp->mix_lnw, lp->mix_lnb,
			             lp->mix_cw, lp->mix_cb, lp->mix_scale[0], B, T, d, m->G);
			xm = a->xm;
		}
		a->qkv = ref_alloc((size_t)n * 3 * d);
		ref_linear(a->qkv, xm, lp->qkv_w, lp->qkv_b, n, d, 3 * d);
		a->S = ref_alloc((size_t)B * NH * T * T);
		a->P = ref_alloc((size_t)B * NH * T * T);
		a->att = ref_alloc((size_t)n * d);
		double *al = NULL;
		if (cf->norm.kind == SB_NORM_ADAPTIVE) {
			al = c->alpha + (size_t)l * NH;
			for (int h = 0; h < NH; h++)
				al[h] = 1.05 + 0.90 / (1.0 + exp(-lp->alpha_raw[h]));
		}
		*rc = ref_attention(a->att, a->S, a->P, a->qkv, c->nvalid, al, &cf->norm, B, T, d, NH);
		if (*rc)
			return NAN;
		a->proj = ref_alloc((size_t)n * d);
		ref_linear(a->proj, a->att, lp->out_w, lp->out_b, n, d, d);
		double p_ = in->dropout, sc = p_ > 0 ? (double)(1.0f / (1.0f - (float)p_)) : 1.0;
		a->k1 = calloc((size_t)n * d, 1);
		a->r1 = ref_alloc((size_t)n * d);
		for (size_t i = 0; i < (size_t)n * d; i++) {
			a->k1[i] = ref_keep(p_, in->seed, SB_DROPOUT_STREAM(in->step, 3 * l), i);
			a->r1[i] = xm[i] + (a->k1[i] ? a->proj[i] * sc : 0.0);
		}
		a->mean1 = ref_alloc(n);
		a->rstd1 = ref_alloc(n);
		a->x1 = ref_alloc((size_t)n * d);
		ref_ln(a->x1, a->mean1, a->rstd1, a->r1, lp->ln1_w, lp->ln1_b, n, d);
		a->h = ref_alloc((size_t)n * ff);
		ref_linear(a->h, a->x1, lp->fc1_w, lp->fc1_b, n, d, ff);
		a->g = ref_alloc((size_t)n * ff);
		a->kh = calloc((size_t)n * ff, 1);
		for (size_t i = 0; i < (size_t)n * ff; i++) {
			a->kh[i] = ref_keep(p_, in->seed, SB_DROPOUT_STREAM(in->step, 3 * l + 1), i);
			a->g[i] = a->kh[i] ? ref_gelu(a->h[i]) * sc : 0.0;
		}
		a->f = ref_alloc((size_t)n * d);
		ref_linear(a->f, a->g, lp->fc2_w, lp->fc2_b, n, ff, d);
		a->k2 = calloc((size_t)n * d, 1);
		a->r2 = ref_alloc((size_t)n * d);
		for (size_t i = 0; i < (size_t)n * d; i++) {
			a->k2[i] = ref_keep(p_, in->seed, SB_DROPOUT_STREAM(in->step, 3 * l + 2), i);
			a->r2[i] = a->x1[i] + (a->k2[i] ? a->f[i] * sc : 0.0);
		}
		a->mean2 = ref_alloc(n);
		a->rstd2 = ref_alloc(n);
		double *xo = ref_alloc((size_t)n * d);
		ref_ln(xo, a->mean2, a->rstd2, a->r2, lp->ln2_w, lp->ln2_b, n, d);
		x = xo;
		if (l + 1 == cf->layers)
			c->xout = xo;
		else
			c->l[l + 1].x = xo;
	}
	c->cls = ref_alloc((size_t)B * d);
	for (int b = 0; b < B; b++)
		memcpy(c->cls + (size_t)b * d, c->xout + (size_t)b * T * d, (size_t)d * sizeof(double));
	c->logits = ref_alloc((size_t)B * cf->classes);
	ref_linear(c->logits, c->cls, p.head_w, p.head_b, B, d, cf->classes);
	double loss = 0;
	for (int b = 0; b < B; b++) {
		const double *lg = c->logits + (size_t)b * cf->classes;
		double mx = lg[0], s = 0;
		for (int k = 1; k < cf->classes; k++)
			mx = lg[k] > mx ? lg[k] : mx;
		for (int k = 0; k < cf->classes; k++)
			s += exp(lg[k] - mx);
		loss += log(s) + mx - lg[in->labels[in->idx[b]]];
	}
	return loss / B;
}

/* Backward of the mean loss: grads (laid out like params) += gradient. */
static __attribute__((unused)) void ref_backward(const struct sb_encoder *m, const double *params,
                                                 const struct ref_input *in, const struct ref_cache *c, double *grads)
{
	const struct sb_encoder_cfg *cf = &m->cfg;
	struct ref_ptrs p, g;
	ref_ptrs_of(m, params, &p);
	ref_ptrs_of(m, grads, &g);
	int B = in->B, T = m->T, L = m->L, d = cf->d, NH = cf->heads, ff = m->ff, n = B * T, C = cf->classes;
	double *dlog = ref_alloc((size_t)B * C), *dcls = ref_alloc((size_t)B * d);
	for (int b = 0; b < B; b++) {
		const double *lg = c->logits + (size_t)b * C;
		double mx = lg[0], s = 0;
		for (int k = 1; k < C; k++)
			mx = lg[k] > mx ? lg[k] : mx;
		for (int k = 0; k < C; k++)
			s += exp(lg[k] - mx);
		for (int k = 0; k < C; k++)
			dlog[(size_t)b * C + k] = (exp(lg[k] - mx) / s - (k == in->labels[in->idx[b]])) / B;
	}
	ref_linear_bwd(dcls, (double *)g.head_w, (double *)g.head_b, dlog, c->cls, p.head_w, B, d, C, 0);
	double *dx = ref_alloc((size_t)n * d), *da = ref_alloc((size_t)n * d), *db = ref_alloc((size_t)n * d);
	double *df = ref_alloc((size_t)n * d), *dh = ref_alloc((size_t)n * ff), *datt = ref_alloc((size_t)n * d);
	double *dqkv = ref_alloc((size_t)n * 3 * d), *dproj = ref_alloc((size_t)n * d);
	for (int b = 0; b < B; b++)
		memcpy(dx + (size_t)b * T * d, dcls + (size_t)b * d, (size_t)d * sizeof(double));
	double p_ = in->dropout, sc = p_ > 0 ? (double)(1.0f / (1.0f - (float)p_)) : 1.0;
	for (int l = cf->layers - 1; l >= 0; l--) {
		const struct ref_layer_cache *a = &c->l[l];
		const struct ref_layer_ptrs *lp = &p.l[l];
		struct ref_layer_ptrs *lg = &g.l[l];
		const double *xm = cf->arch == SB_ARCH_LOCAL_HYBRID ? a->xm : a->x;
		ref_ln_bwd(da, (double *)lg->ln2_w, (double *)lg->ln2_b, dx, a->r2, a->mean2, a->rstd2, lp->ln2_w, n, d,
		           0);
		for (size_t i = 0; i < (size_t)n * d; i++)
			df[i] = a->k2[i] ? da[i] * sc : 0.0;
		ref_linear_bwd(dh, (double *)lg->fc2_w, (double *)lg->fc2_b, df, a->g, lp->fc2_w, n, ff, d, 0);
		for (size_t i = 0; i < (size_t)n * ff; i++)
			dh[i] = a->kh[i] ? dh[i] * sc * ref_gelu_d(a->h[i]) : 0.0;
		ref_linear_bwd(da, (double *)lg->fc1_w, (double *)lg->fc1_b, dh, a->x1, lp->fc1_w, n, d, ff, 1);
		ref_ln_bwd(db, (double *)lg->ln1_w, (double *)lg->ln1_b, da, a->r1, a->mean1, a->rstd1, lp->ln1_w, n, d,
		           0);
		for (size_t i = 0; i < (size_t)n * d; i++)
			dproj[i] = a->k1[i] ? db[i] * sc : 0.0;
		ref_linear_bwd(datt, (double *)lg->out_w, (double *)lg->out_b, dproj, a->att, lp->out_w, n, d, d, 0);
		if (in->keep_datt)
			memcpy(in->keep_datt[l], datt, (size_t)n * d * sizeof *datt);
		double dal[64] = {0};
		int adaptive = cf->norm.kind == SB_NORM_ADAPTIVE;
		ref_attention_bwd(dqkv, adaptive ? dal : NULL, datt, a->qkv, a->S, a->P, c->nvalid,
		                  adaptive ? c->alpha + (size_t)l * NH : NULL, &cf->norm, B, T, d, NH);
		if (adaptive)
			for (int h = 0; h < NH; h++) {
				double s = 1.0 / (1.0 + exp(-lp->alpha_raw[h]));
				((double *)lg->alpha_raw)[h] += dal[h] * 0.90 * s * (1 - s);
			}
		ref_linear_bwd(db, (double *)lg->qkv_w, (double *)lg->qkv_b, dqkv, xm, lp->qkv_w, n, d, 3 * d, 1);
		if (cf->arch == SB_ARCH_LOCAL_HYBRID) {
			ref_localmix_bwd(dx, (double *)lg->mix_lnw, (double *)lg->mix_lnb, (double *)lg->mix_cw,
			                 (double *)lg->mix_cb, (double *)lg->mix_scale, db, a->x, a->my, a->mz,
			                 a->mmean, a->mrstd, c->nvalid, lp->mix_lnw, lp->mix_cw, lp->mix_scale[0], B, T,
			                 d, m->G);
		} else {
			memcpy(dx, db, (size_t)n * d * sizeof *dx);
		}
	}
	/* embedding */
	double *demb = ref_alloc((size_t)B * L * d);
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int k = 0; k < d; k++) {
				double v = dx[((size_t)b * T + t) * d + k];
				((double *)g.pos)[(size_t)t * d + k] += v;
				if (t == 0)
					((double *)g.cls)[k] += v;
				else
					demb[((size_t)b * L + t - 1) * d + k] = v;
			}
	if (cf->modality == SB_IMAGE) {
		ref_linear_bwd(NULL, (double *)g.embed_w, (double *)g.embed_b, demb, c->patches, p.embed_w, B * L, m->P,
		               d, 0);
	} else {
		for (int i = 0; i < B * L; i++)
			if (c->ids[i] != 0)
				for (int k = 0; k < d; k++)
					((double *)g.embed_w)[(size_t)c->ids[i] * d + k] += demb[(size_t)i * d + k];
	}
	free(demb);
	free(dlog);
	free(dcls);
	free(dx);
	free(da);
	free(db);
	free(df);
	free(dh);
	free(datt);
	free(dqkv);
	free(dproj);
}

#endif
