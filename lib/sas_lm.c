/* sas_lm.c — SAS on an LM-track decoder (see sas_lm.h). */
#include "sas_lm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redzone.h"
#include "rng.h"
#include "sas.h"

struct sas_layer {
	float *qs, *ks, *kb, *g; /* [T][ds], [T][ds], [nb][ds], [T][nb] */
	uint8_t *sel;            /* [T][nb] */
	double ent_sum, ent_n;
};

struct sb_sas_lm {
	struct sb_lm_model *m;
	struct sb_sas_lm_cfg c;
	int T, nb, ds, NH, NKV, hd, n_a;
	struct sb_lm_trainer *tr;
	struct sb_backend_lm_ops ops; /* the backend's, with our attention */
	const struct sb_backend_lm_ops *orig;
	float *sel, *grad; /* selector parameters and gradient */
	const float *bg;   /* the backbone's gradient of the last pass (the trainer's; unused) */
	size_t n_sel;      /* the selector's parameters */
	size_t per_layer;  /* an A layer's part of sel: Sq, then Sk at k_off */
	size_t k_off;
	size_t sel_len;    /* sel's floats: n_sel, more with SB_ARENA_CHECK's zones (sel_zones) */
	float *am, *av;    /* AdamW moments */
	struct sb_redzones *rz; /* SB_ARENA_CHECK: a zone of zero bytes after each matrix */
	char (*zname)[48];      /* the matrices' names, for its reports */
	struct sas_layer *L;
	float *bias, *dbias, *dqs, *dkb, *row; /* [T][T], [T][T], [T][ds], [nb][ds], [T] */
	struct sb_lm_mask_scratch scr;
	int32_t *idx;
	/* the call in progress */
	enum sb_sas_lm_mode mode;
	struct sb_lm_mask mask;
	struct sb_lm_budget *budget;
	int fwd_layer, bwd_layer;
	double last_entropy;
	int nogate;
};

static struct sb_sas_lm *cur; /* the SAS state of the call in progress (see sas_lm.h) */

/* ---------------------------------------------------------------- selection */

static int matched_blocks(const struct sb_sas_lm *x, int t)
{
	int B = x->c.block, c0 = t / B, own = t - c0 * B + 1;
	int n = sb_lm_mask_recipe_count(&x->c.budget, t);
	int m = (int)ceil((double)(n - own) / B - 0.5); /* round half down */
	return m < 0 ? 0 : m > c0 ? c0 : m;
}

/* gates, selection and the bias matrix of one sequence at A layer li */
static void sas_select(struct sb_sas_lm *x, int li, const float *q, const float *k)
{
	int T = x->T, B = x->c.block, nb = x->nb, ds = x->ds, qd = x->NH * x->hd, kd = x->NKV * x->hd;
	struct sas_layer *L = &x->L[li];
	const float *Sq = x->sel + (size_t)li * x->per_layer, *Sk = Sq + x->k_off;
	for (int t = 0; t < T; t++)
		for (int e = 0; e < ds; e++) {
			double a = 0, b = 0;
			for (int i = 0; i < qd; i++)
				a += (double)Sq[(size_t)e * qd + i] * q[(size_t)t * qd + i];
			for (int i = 0; i < kd; i++)
				b += (double)Sk[(size_t)e * kd + i] * k[(size_t)t * kd + i];
			L->qs[(size_t)t * ds + e] = (float)a;
			L->ks[(size_t)t * ds + e] = (float)b;
		}
	for (int c = 0; c < nb; c++)
		for (int e = 0; e < ds; e++) {
			double s = 0;
			for (int j = c * B; j < (c + 1) * B && j < T; j++)
				s += L->ks[(size_t)j * ds + e];
			L->kb[(size_t)c * ds + e] = (float)(s / B);
		}
	memset(L->g, 0, (size_t)T * nb * sizeof *L->g);
	memset(L->sel, 0, (size_t)T * nb);
	L->ent_sum = L->ent_n = 0;
	double inv = 1.0 / sqrt((double)ds);
	for (int t = 0; t < T; t++) {
		float *br = x->bias + (size_t)t * T;
		int c0 = t / B;
		for (int j = 0; j < T; j++)
			br[j] = (j >= c0 * B && j <= t) ? 0.0f : -INFINITY;
		if (c0 < 1)
			continue;
		float *gr = L->g + (size_t)t * nb;
		uint8_t *sr = L->sel + (size_t)t * nb;
		double mx = -INFINITY;
		for (int c = 0; c < c0; c++) {
			double s = 0;
			for (int e = 0; e < ds; e++)
				s += (double)L->qs[(size_t)t * ds + e] * L->kb[(size_t)c * ds + e];
			gr[c] = (float)(s * inv);
			mx = fmax(mx, (double)gr[c]);
		}
		int kk = matched_blocks(x, t);
		for (int r = 0; r < kk; r++) {
			int best = -1;
			for (int c = 0; c < c0; c++)
				if (!sr[c] && (best < 0 || gr[c] > gr[best]))
					best = c;
			sr[best] = 1;
		}
		double z = 0, ent = 0;
		for (int c = 0; c < c0; c++)
			z += exp((double)gr[c] - mx);
		for (int c = 0; c < c0; c++) {
			double g = exp((double)gr[c] - mx) / z;
			gr[c] = (float)g;
			if (g > 0)
				ent -= g * log(g);
		}
		L->ent_sum += ent;
		L->ent_n += 1;
		for (int c = 0; c < c0; c++)
			if (sr[c]) {
				float lb = x->nogate ? 0.0f : (float)log(fmax((double)gr[c], SB_SAS_GATE_FLOOR));
				for (int j = c * B; j < (c + 1) * B; j++)
					br[j] = lb;
			}
	}
}

/* ---------------------------------------------------------------- attention ops */

static void sas_attn_forward(struct sb_ctx *ctx, float *out, float *P, const float *q, const float *k, const float *v,
                             int Bt, int T, int NH, int NKV, int hd, float softcap)
{
	struct sb_sas_lm *x = cur;
	int li = x->fwd_layer;
	x->fwd_layer = (x->fwd_layer + 1) % x->n_a;
	if (x->mode == SB_SAS_LM_DENSE) {
		x->orig->attn_forward(ctx, out, P, q, k, v, Bt, T, NH, NKV, hd, softcap);
		if (x->budget) {
			double c = (double)Bt * NH * T * (T + 1) / 2.0;
			x->budget->kept += c;
			x->budget->causal += c;
		}
		return;
	}
	int qd = NH * hd, kd = NKV * hd, grp = NH / NKV, B = x->mask.block;
	double sc = 1.0 / sqrt((double)hd);
	for (int b = 0; b < Bt; b++) {
		const float *qb = q + (size_t)b * T * qd, *kb = k + (size_t)b * T * kd, *vb = v + (size_t)b * T * kd;
		if (x->mode == SB_SAS_LM_SAS)
			sas_select(x, li, qb, kb);
		for (int h = 0; h < NH; h++) {
			int kh = h / grp;
			for (int t = 0; t < T; t++) {
				float *pr = P + (((size_t)b * NH + h) * T + t) * T;
				const float *qt = qb + (size_t)t * qd + (size_t)h * hd;
				for (int j = 0; j <= t; j++) {
					double s = 0;
					const float *kj = kb + (size_t)j * kd + (size_t)kh * hd;
					for (int e = 0; e < hd; e++)
						s += (double)qt[e] * kj[e];
					x->row[j] = (float)(s * sc);
					if (softcap > 0.0f) /* Gemma 2's, before the gate bias and the masks */
						x->row[j] = tanhf(x->row[j] / softcap) * softcap;
				}
				/* which keys: idx[0..n) */
				int n = 0;
				if (x->mode == SB_SAS_LM_SAS) {
					const float *br = x->bias + (size_t)t * T;
					for (int j = 0; j <= t; j++)
						if (br[j] != -INFINITY) {
							x->row[j] += br[j];
							x->idx[n++] = j;
						}
				} else {
					float *bs = NULL;
					if (sb_lm_mask_needs_blocks(&x->mask)) {
						/* q_t . mean(k over block c) / sqrt(hd) for complete blocks c < t/B */
						bs = x->dqs; /* scratch of >= T floats */
						for (int c = 0; c < t / B; c++) {
							double s = 0;
							for (int e = 0; e < hd; e++) {
								double mk = 0;
								for (int j = c * B; j < (c + 1) * B; j++)
									mk += kb[(size_t)j * kd + (size_t)kh * hd + e];
								s += (double)qt[e] * (mk / B);
							}
							bs[c] = (float)(s * sc);
						}
					}
					n = sb_lm_mask_row(&x->mask, li, h, t, x->row, NULL, bs, x->idx, &x->scr);
				}
				double mx = -INFINITY, z = 0;
				for (int i = 0; i < n; i++)
					mx = fmax(mx, (double)x->row[x->idx[i]]);
				for (int j = 0; j < T; j++)
					pr[j] = 0.0f;
				for (int i = 0; i < n; i++)
					z += exp((double)x->row[x->idx[i]] - mx);
				for (int i = 0; i < n; i++)
					pr[x->idx[i]] = (float)(exp((double)x->row[x->idx[i]] - mx) / z);
				float *o = out + ((size_t)b * T + t) * qd + (size_t)h * hd;
				for (int e = 0; e < hd; e++) {
					double s = 0;
					for (int i = 0; i < n; i++)
						s += (double)pr[x->idx[i]] *
						     vb[(size_t)x->idx[i] * kd + (size_t)kh * hd + e];
					o[e] = (float)s;
				}
				if (x->budget) {
					x->budget->kept += n;
					x->budget->causal += t + 1;
				}
			}
		}
	}
	if (li == 0)
		x->last_entropy = x->L[0].ent_n > 0 ? x->L[0].ent_sum / x->L[0].ent_n : 0;
}

static void sas_attn_backward(struct sb_ctx *ctx, float *dq, float *dk, float *dv, const float *dout, const float *P,
                              const float *q, const float *k, const float *v, int Bt, int T, int NH, int NKV, int hd,
                              float softcap)
{
	struct sb_sas_lm *x = cur;
	x->bwd_layer = (x->bwd_layer + x->n_a - 1) % x->n_a;
	int li = x->bwd_layer;
	if (x->mode == SB_SAS_LM_DENSE) {
		x->orig->attn_backward(ctx, dq, dk, dv, dout, P, q, k, v, Bt, T, NH, NKV, hd, softcap);
		return;
	}
	/* SAS (the training mode; masks are evaluation only) */
	int qd = NH * hd, kd = NKV * hd, grp = NH / NKV, B = x->c.block, nb = x->nb, ds = x->ds;
	double sc = 1.0 / sqrt((double)hd);
	memset(dq, 0, (size_t)Bt * T * qd * sizeof(float));
	memset(dk, 0, (size_t)Bt * T * kd * sizeof(float));
	memset(dv, 0, (size_t)Bt * T * kd * sizeof(float));
	struct sas_layer *L = &x->L[li];
	float *gq = x->grad + (size_t)li * x->per_layer, *gk = gq + x->k_off;
	for (int b = 0; b < Bt; b++) {
		const float *qb = q + (size_t)b * T * qd, *kb = k + (size_t)b * T * kd, *vb = v + (size_t)b * T * kd;
		const float *dob = dout + (size_t)b * T * qd;
		if (Bt > 1) /* the gates of this sequence (the forward kept only the last one's) */
			sas_select(x, li, qb, kb);
		memset(x->dbias, 0, (size_t)T * T * sizeof(float));
		for (int h = 0; h < NH; h++) {
			int kh = h / grp;
			for (int t = 0; t < T; t++) {
				const float *pr = P + (((size_t)b * NH + h) * T + t) * T;
				const float *dot = dob + (size_t)t * qd + (size_t)h * hd;
				double dpp = 0;
				for (int j = 0; j <= t; j++) {
					if (pr[j] == 0.0f)
						continue;
					double s = 0;
					for (int e = 0; e < hd; e++)
						s += (double)dot[e] * vb[(size_t)j * kd + (size_t)kh * hd + e];
					x->row[j] = (float)s;
					dpp += pr[j] * s;
				}
				for (int j = 0; j <= t; j++) {
					if (pr[j] == 0.0f)
						continue;
					double dsj = pr[j] * (x->row[j] - dpp);
					x->dbias[(size_t)t * T + j] += (float)dsj;
					float *dqt = dq + ((size_t)b * T + t) * qd + (size_t)h * hd;
					float *dkj = dk + ((size_t)b * T + j) * kd + (size_t)kh * hd;
					float *dvj = dv + ((size_t)b * T + j) * kd + (size_t)kh * hd;
					const float *qt = qb + (size_t)t * qd + (size_t)h * hd;
					const float *kj = kb + (size_t)j * kd + (size_t)kh * hd;
					if (softcap > 0.0f) { /* through the cap: the score again, as the forward */
						double s = 0;
						for (int e = 0; e < hd; e++)
							s += (double)qt[e] * kj[e];
						float th = tanhf((float)(s * sc) / softcap);
						dsj *= 1.0 - (double)th * th;
					}
					for (int e = 0; e < hd; e++) {
						dqt[e] += (float)(dsj * sc * kj[e]);
						dkj[e] += (float)(dsj * sc * qt[e]);
						dvj[e] += pr[j] * dot[e];
					}
				}
			}
		}
		/* the selector, through log g only; its inputs q, k are detached */
		double inv = 1.0 / sqrt((double)ds);
		memset(x->dqs, 0, (size_t)T * ds * sizeof(float));
		memset(x->dkb, 0, (size_t)nb * ds * sizeof(float));
		for (int t = 0; t < T; t++) {
			int c0 = t / B;
			if (c0 < 1)
				continue;
			const float *gr = L->g + (size_t)t * nb;
			const uint8_t *sr = L->sel + (size_t)t * nb;
			double sum = 0;
			for (int c = 0; c < c0; c++) {
				double dg = 0;
				if (sr[c] && (double)gr[c] > SB_SAS_GATE_FLOOR) {
					double G = 0;
					for (int j = c * B; j < (c + 1) * B; j++)
						G += x->dbias[(size_t)t * T + j];
					dg = G / gr[c];
				}
				x->row[c] = (float)dg;
				sum += gr[c] * dg;
			}
			for (int c = 0; c < c0; c++) {
				double dsc = gr[c] * (x->row[c] - sum) * inv;
				for (int e = 0; e < ds; e++) {
					x->dqs[(size_t)t * ds + e] += (float)(dsc * L->kb[(size_t)c * ds + e]);
					x->dkb[(size_t)c * ds + e] += (float)(dsc * L->qs[(size_t)t * ds + e]);
				}
			}
		}
		for (int e = 0; e < ds; e++) {
			for (int i = 0; i < qd; i++) {
				double s = 0;
				for (int t = 0; t < T; t++)
					s += (double)x->dqs[(size_t)t * ds + e] * qb[(size_t)t * qd + i];
				gq[(size_t)e * qd + i] += (float)s;
			}
			for (int i = 0; i < kd; i++) {
				double s = 0;
				for (int j = 0; j < T; j++)
					s += (double)x->dkb[(size_t)(j / B) * ds + e] / B * kb[(size_t)j * kd + i];
				gk[(size_t)e * kd + i] += (float)s;
			}
		}
	}
}

/* ---------------------------------------------------------------- lifecycle */

/* The selector's layout: per A layer Sq [ds][qd], then Sk [ds][kd]. With SB_ARENA_CHECK each
 * matrix is followed by a zone of zero bytes (its rounding to 16 floats and 16 floats more,
 * as lib/lm_model.c's table), in the parameters, the gradient and both AdamW moments, which
 * are checked after every gradient pass and step; clipping's sum of squares and AdamW leave
 * zero bytes as they are, so the results are the same bits. -1: out of memory. */
static int sel_layout(struct sb_sas_lm *x)
{
	size_t qn = (size_t)x->ds * x->NH * x->hd, kn = (size_t)x->ds * x->NKV * x->hd;
	x->n_sel = (qn + kn) * (size_t)x->n_a;
	x->k_off = qn;
	x->per_layer = qn + kn;
	x->sel_len = x->n_sel;
	if (!sb_redzone_wanted())
		return 0;
	x->rz = calloc(1, sizeof *x->rz);
	x->zname = calloc(2 * (size_t)x->n_a, sizeof *x->zname);
	if (!x->rz || !x->zname)
		return -1;
	*x->rz = (struct sb_redzones){.on = 1, .zero = 1, .file = "lib/sas_lm.c"};
	size_t off = 0;
	for (int l = 0; l < x->n_a; l++)
		for (int s = 0; s < 2; s++) {
			snprintf(x->zname[2 * l + s], sizeof x->zname[0], "selector.A%d.%s", l, s ? "Sk" : "Sq");
			if (sb_redzone_push_floats(x->rz, &off, s ? kn : qn, x->zname[2 * l + s]))
				return -1;
			if (!l && !s)
				x->k_off = off;
		}
	x->per_layer = off / (size_t)x->n_a;
	x->sel_len = off;
	return 0;
}

/* where parameter i (the packed order: a checkpoint's) is in sel */
static size_t sel_at(const struct sb_sas_lm *x, size_t i)
{
	size_t qn = (size_t)x->ds * x->NH * x->hd, lay = x->n_sel / (size_t)x->n_a;
	size_t l = i / lay, r = i % lay;
	return l * x->per_layer + (r < qn ? r : x->k_off + (r - qn));
}

/* SB_ARENA_CHECK: the zones of the selector's buffers */
static int sel_zones_check(const struct sb_sas_lm *x, int moments, const char *after, struct sb_err *err)
{
	if (!x->rz)
		return 0;
	SB_TRY(sb_redzone_check(NULL, x->grad, x->rz, after, "the selector's gradient", err));
	if (moments) {
		SB_TRY(sb_redzone_check(NULL, x->am, x->rz, after, "the selector's first moments", err));
		SB_TRY(sb_redzone_check(NULL, x->av, x->rz, after, "the selector's second moments", err));
	}
	return sb_redzone_check(NULL, x->sel, x->rz, after, "the selector's parameters", err);
}

int sb_sas_lm_new(struct sb_lm_model *m, const struct sb_sas_lm_cfg *c, int T, uint64_t seed, struct sb_sas_lm **out,
                  struct sb_err *err)
{
	*out = NULL;
	if (strcmp(m->be->name, "cpu") || m->be->threads != 1)
		return SB_ERR(err, SB_EUSAGE, "sas-lm: needs a 1-thread CPU backend (got %s, %d threads)", m->be->name,
		              m->be->threads);
	if (c->block < 1 || c->dsel < 1 || c->batch < 1 || T < 1 || T > m->cfg.max_T || T % c->block)
		return SB_ERR(err, SB_EUSAGE,
		              "sas-lm: bad block %d, dsel %d, batch %d or T %d (max_T %d; T a multiple of block)",
		              c->block, c->dsel, c->batch, T, m->cfg.max_T);
	struct sb_sas_lm *x = calloc(1, sizeof *x);
	if (!x)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	x->m = m;
	x->c = *c;
	x->T = T;
	x->nb = T / c->block;
	x->ds = c->dsel;
	x->NH = m->cfg.heads;
	x->NKV = m->cfg.kv_heads;
	x->hd = m->cfg.head_dim;
	for (int l = 0; l < m->cfg.n_layer; l++)
		x->n_a += m->cfg.pattern[l] == 'A';
	x->orig = m->lo;
	x->ops = *m->lo;
	x->ops.attn_forward = sas_attn_forward;
	x->ops.attn_backward = sas_attn_backward;
	x->mask = c->budget;
	int rc = 0;
	if (x->n_a == 0)
		rc = SB_ERR(err, SB_EUSAGE, "sas-lm: the decoder has no A layer");
	struct sb_lm_train_opts o = {.B = c->batch, .T = T, .tile = 1, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f};
	if (!rc)
		rc = sb_lm_trainer_new(m, &o, &x->tr, err);
	if (rc) {
		free(x);
		return rc;
	}
	int qd = x->NH * x->hd, kd = x->NKV * x->hd;
	size_t Tz = (size_t)T, nb = (size_t)x->nb, ds = (size_t)x->ds;
	int ok = !sel_layout(x);
	if (ok) {
		x->sel = calloc(x->sel_len, sizeof(float));
		x->grad = calloc(x->sel_len, sizeof(float));
		x->am = calloc(x->sel_len, sizeof(float));
		x->av = calloc(x->sel_len, sizeof(float));
	}
	x->L = calloc((size_t)x->n_a, sizeof *x->L);
	x->bias = calloc(Tz * Tz, sizeof(float));
	x->dbias = calloc(Tz * Tz, sizeof(float));
	x->dqs = calloc(Tz * ds + Tz, sizeof(float));
	x->dkb = calloc(nb * ds, sizeof(float));
	x->row = calloc(Tz, sizeof(float));
	x->idx = calloc(Tz, sizeof(int32_t));
	ok = ok && x->sel && x->grad && x->am && x->av && x->L && x->bias && x->dbias && x->dqs && x->dkb && x->row &&
	         x->idx && !sb_lm_mask_scratch_init(&x->scr, T);
	for (int l = 0; ok && l < x->n_a; l++) {
		struct sas_layer *L = &x->L[l];
		L->qs = calloc(Tz * ds, sizeof(float));
		L->ks = calloc(Tz * ds, sizeof(float));
		L->kb = calloc(nb * ds, sizeof(float));
		L->g = calloc(Tz * nb, sizeof(float));
		L->sel = calloc(Tz * nb, 1);
		ok = L->qs && L->ks && L->kb && L->g && L->sel;
	}
	if (!ok) {
		sb_sas_lm_free(x);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	/* Xavier-uniform, as the released router; stream per (layer, matrix) */
	for (int l = 0; l < x->n_a; l++)
		for (int s = 0; s < 2; s++) {
			int in = s ? kd : qd;
			float *w = x->sel + (size_t)l * x->per_layer + (s ? x->k_off : 0);
			double bound = sqrt(6.0 / (double)(in + x->ds));
			struct sb_rng r;
			sb_rng_init(&r, seed, SB_RNG_INIT, 0x5a5000ull + (uint64_t)l * 2 + (uint64_t)s);
			for (size_t i = 0; i < (size_t)x->ds * in; i++)
				w[i] = (float)(bound * (2.0 * sb_rng_uniform(&r) - 1.0));
		}
	*out = x;
	return 0;
}

void sb_sas_lm_free(struct sb_sas_lm *x)
{
	if (!x)
		return;
	sb_lm_trainer_free(x->tr);
	for (int l = 0; x->L && l < x->n_a; l++) {
		free(x->L[l].qs);
		free(x->L[l].ks);
		free(x->L[l].kb);
		free(x->L[l].g);
		free(x->L[l].sel);
	}
	free(x->L);
	sb_lm_mask_scratch_free(&x->scr);
	free(x->sel);
	if (x->rz)
		sb_redzone_free(x->rz);
	free(x->rz);
	free(x->zname);
	free(x->grad);
	free(x->am);
	free(x->av);
	free(x->bias);
	free(x->dbias);
	free(x->dqs);
	free(x->dkb);
	free(x->row);
	free(x->idx);
	free(x);
}

size_t sb_sas_lm_n_params(const struct sb_sas_lm *x)
{
	return x->n_sel;
}

float *sb_sas_lm_param(struct sb_sas_lm *x, size_t i)
{
	return x->sel + sel_at(x, i);
}

void *sb_sas_lm_zone(struct sb_sas_lm *x, int i)
{
	return x->rz ? sb_redzone_at(x->sel, x->rz, i) : NULL;
}

void sb_sas_lm_params_get(const struct sb_sas_lm *x, float *out)
{
	for (size_t i = 0; i < x->n_sel; i++)
		out[i] = x->sel[sel_at(x, i)];
}

void sb_sas_lm_params_set(struct sb_sas_lm *x, const void *in)
{
	for (size_t i = 0; i < x->n_sel; i++)
		memcpy(x->sel + sel_at(x, i), (const char *)in + i * sizeof(float), sizeof(float));
}

int sb_sas_lm_n_layers(const struct sb_sas_lm *x)
{
	return x->n_a;
}
double sb_sas_lm_gate_entropy(const struct sb_sas_lm *x)
{
	return x->last_entropy;
}
void sb_sas_lm_set_gate(struct sb_sas_lm *x, int gate)
{
	x->nogate = !gate;
}

/* run fn with our ops installed */
static void begin(struct sb_sas_lm *x, enum sb_sas_lm_mode mode, const struct sb_lm_mask *mask,
                  struct sb_lm_budget *budget)
{
	x->mode = mode;
	x->mask = mask ? *mask : x->c.budget;
	if (mode == SB_SAS_LM_SAS)
		x->mask.block = x->c.block;
	x->budget = budget;
	x->fwd_layer = 0;
	x->bwd_layer = 0;
	cur = x;
	x->m->lo = &x->ops;
}

static void end(struct sb_sas_lm *x)
{
	x->m->lo = x->orig;
	cur = NULL;
}

/* bytes (tokens) or ids (ids, when not NULL) */
static int logits_of(struct sb_sas_lm *x, const uint8_t *tokens, const int32_t *ids, enum sb_sas_lm_mode mode,
                     const struct sb_lm_mask *mask, float *logits, struct sb_lm_budget *budget, struct sb_err *err)
{
	if (mode == SB_SAS_LM_MASK && (!mask || sb_lm_mask_needs_acc(mask)))
		return SB_ERR(err, SB_EUSAGE, "sas-lm: masks with accumulated attention (h2o) are not supported here");
	begin(x, mode, mask, budget);
	int rc = ids ? sb_lm_train_logits_ids(x->tr, ids, logits, err) : sb_lm_train_logits(x->tr, tokens, logits, err);
	end(x);
	return rc;
}

int sb_sas_lm_logits(struct sb_sas_lm *x, const uint8_t *tokens, enum sb_sas_lm_mode mode,
                     const struct sb_lm_mask *mask, float *logits, struct sb_lm_budget *budget, struct sb_err *err)
{
	return logits_of(x, tokens, NULL, mode, mask, logits, budget, err);
}

int sb_sas_lm_logits_ids(struct sb_sas_lm *x, const int32_t *ids, enum sb_sas_lm_mode mode,
                         const struct sb_lm_mask *mask, float *logits, struct sb_lm_budget *budget, struct sb_err *err)
{
	return logits_of(x, NULL, ids, mode, mask, logits, budget, err);
}

static int grad_of(struct sb_sas_lm *x, const uint8_t *batch, const int32_t *ids, double *loss, float *g,
                   struct sb_err *err)
{
	memset(x->grad, 0, x->sel_len * sizeof(float));
	begin(x, SB_SAS_LM_SAS, NULL, NULL);
	float *bg = NULL; /* the backbone's, discarded (kept for sb_sas_lm_backbone_grad) */
	int rc = ids ? sb_lm_train_grad_ids(x->tr, ids, loss, &bg, err) : sb_lm_train_grad(x->tr, batch, loss, &bg, err);
	x->bg = rc ? NULL : bg;
	end(x);
	if (!rc)
		rc = sel_zones_check(x, 0, "a selector gradient pass", err);
	for (size_t i = 0; !rc && g && i < x->n_sel; i++)
		g[i] = x->grad[sel_at(x, i)];
	return rc;
}

const float *sb_sas_lm_backbone_grad(const struct sb_sas_lm *x) { return x->bg; }

int sb_sas_lm_grad(struct sb_sas_lm *x, const uint8_t *batch, double *loss, float *g, struct sb_err *err)
{
	return grad_of(x, batch, NULL, loss, g, err);
}

int sb_sas_lm_grad_ids(struct sb_sas_lm *x, const int32_t *batch, double *loss, float *g, struct sb_err *err)
{
	return grad_of(x, NULL, batch, loss, g, err);
}

static int step_of(struct sb_sas_lm *x, const uint8_t *batch, const int32_t *ids, int64_t step, float lr, float wd,
                   float clip, double *loss, double *gnorm, struct sb_err *err)
{
	SB_TRY(grad_of(x, batch, ids, loss, NULL, err));
	*gnorm = sb_sas_clip(x->grad, x->sel_len, clip);
	if (!isfinite(*loss) || !isfinite(*gnorm))
		return SB_ERR(err, SB_EINTERNAL, "sas-lm: non-finite loss or gradient at step %lld", (long long)step);
	struct sb_sas_adamw o = {.lr = lr,
	                         .b1 = 0.9f,
	                         .b2 = 0.999f,
	                         .eps = 1e-8f,
	                         .wd = wd,
	                         .t = step - 1,
	                         .m = x->am,
	                         .v = x->av,
	                         .n = x->sel_len};
	sb_sas_adamw_step(&o, x->sel, x->grad);
	return sel_zones_check(x, 1, "a selector step", err);
}

int sb_sas_lm_step(struct sb_sas_lm *x, const uint8_t *batch, int64_t step, float lr, float wd, float clip,
                   double *loss, double *gnorm, struct sb_err *err)
{
	return step_of(x, batch, NULL, step, lr, wd, clip, loss, gnorm, err);
}

int sb_sas_lm_step_ids(struct sb_sas_lm *x, const int32_t *batch, int64_t step, float lr, float wd, float clip,
                       double *loss, double *gnorm, struct sb_err *err)
{
	return step_of(x, NULL, batch, step, lr, wd, clip, loss, gnorm, err);
}
