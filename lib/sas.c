/* sas.c — SAS on the tiny decoder of PROTOCOL B (see sas.h). */
#include "sas.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "redzone.h"
#include "rng.h"

void sb_sas_cfg_default(struct sb_sas_cfg *c)
{
	c->T = 64;
	c->block = 8;
	c->topk = 2;
	c->dsel = 8;
}

void sb_sas_backbone_cfg(struct sb_lm_cfg *lc, int T)
{
	sb_lm_cfg_default(lc);
	snprintf(lc->pattern, sizeof lc->pattern, "A");
	lc->d = 32;
	lc->heads = 4;
	lc->ffn = 128;
	lc->pos = SB_LM_POS_LEARNED;
	lc->bias = 1;
	lc->attn_bias = 0;
	lc->tied = 1;
	lc->max_T = T;
	lc->init_std = 0.02f;
}

static uint64_t fnv1a64(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 1099511628211ull;
	}
	return h;
}

static const char *sel_name[2] = {"selector_q.weight", "selector_k.weight"};

/* SB_ARENA_CHECK: the selector's two matrices each followed by a zone of zero bytes (its
 * rounding to 16 floats and 16 floats more, as lib/lm_model.c's table), in sel and in the
 * gradient and AdamW moments of selector training, laid out the same. Clipping's sum of
 * squares and AdamW leave zero bytes as they are, so the results are the same bits. */
static int selector_zones(struct sb_sas_model *m)
{
	struct sb_redzones *rz = calloc(1, sizeof *rz);
	if (!rz)
		return -1;
	*rz = (struct sb_redzones){.on = 1, .zero = 1, .file = "lib/sas.c"};
	m->szones = rz;
	size_t half = m->n_sel / 2, off = 0;
	for (int s = 0; s < 2; s++) {
		if (s)
			m->sel_k = off;
		if (sb_redzone_push_floats(rz, &off, half, sel_name[s]))
			return -1;
	}
	m->sel_len = off;
	return 0;
}

int sb_sas_model_new(struct sb_backend *be, const struct sb_sas_cfg *sc, const struct sb_lm_cfg *lc0,
                     struct sb_sas_model **out, struct sb_err *err)
{
	*out = NULL;
	struct sb_lm_cfg lc;
	if (lc0)
		lc = *lc0;
	else
		sb_sas_backbone_cfg(&lc, sc->T);
	SB_TRY(sb_lm_cfg_check(&lc, err));
	if (strcmp(lc.pattern, "A") != 0 || lc.swiglu || lc.rmsnorm || lc.pos != SB_LM_POS_LEARNED || lc.attn_bias ||
	    lc.kv_heads != lc.heads || !lc.tied || lc.ffn < 1)
		return SB_ERR(err, SB_EUSAGE,
		              "sas: the backbone must be one 'A' layer, LayerNorm, GELU MLP, learned positions, tied "
		              "output, no attention biases, no GQA");
	if (sc->T < 1 || sc->block < 1 || sc->T % sc->block || sc->topk < 0 || sc->dsel < 1 || sc->T > lc.max_T)
		return SB_ERR(err, SB_EUSAGE,
		              "sas: bad T %d, block %d, topk %d or dsel %d (T a multiple of block, <= max_T %d)", sc->T,
		              sc->block, sc->topk, sc->dsel, lc.max_T);
	if (strcmp(be->name, "cpu") != 0)
		return SB_ERR(err, SB_EUSAGE, "sas: runs on the CPU backend only (got %s)", be->name);
	struct sb_sas_model *m = calloc(1, sizeof *m);
	if (!m)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	m->sc = *sc;
	int rc = sb_lm_model_new(be, &lc, &m->lm, err);
	if (rc) {
		free(m);
		return rc;
	}
	m->n_sel = 2 * (size_t)sc->dsel * (size_t)lc.d;
	m->sel_k = m->n_sel / 2;
	m->sel_len = m->n_sel;
	if (sb_redzone_wanted() && selector_zones(m)) {
		sb_sas_model_free(m);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	m->sel = calloc(m->sel_len, sizeof *m->sel);
	if (!m->sel) {
		sb_sas_model_free(m);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	*out = m;
	return 0;
}

void sb_sas_model_free(struct sb_sas_model *m)
{
	if (!m)
		return;
	sb_lm_model_free(m->lm);
	free(m->sel);
	if (m->szones)
		sb_redzone_free(m->szones);
	free(m->szones);
	free(m);
}

int sb_sas_model_init(struct sb_sas_model *m, uint64_t seed, struct sb_err *err)
{
	float std = m->lm->cfg.init_std;
	/* PROTOCOL B: every Linear/Embedding weight N(0, 0.02^2), the residual-writing
	 * projections included (the LM track scales those by 1/sqrt(2L)). */
	for (int i = 0; i < m->lm->n_params; i++)
		if (m->lm->params[i].init == SB_LM_INIT_NORMAL)
			m->lm->params[i].a = std;
	SB_TRY(sb_lm_model_init(m->lm, seed, err));
	size_t half = m->n_sel / 2;
	for (int s = 0; s < 2; s++) {
		struct sb_rng r;
		sb_rng_init(&r, seed, SB_RNG_INIT, fnv1a64(sel_name[s]));
		for (size_t j = 0; j < half; j++)
			m->sel[s * m->sel_k + j] = (float)(std * sb_rng_normal(&r));
	}
	return 0;
}

size_t sb_sas_param_count(const struct sb_sas_model *m)
{
	/* the tensors' elements (n_floats counts the layout's 16-float alignment too; the two
	 * agree for PROTOCOL B's backbone, whose every tensor is a multiple of 16) */
	size_t n = m->n_sel;
	for (int i = 0; i < m->lm->n_params; i++)
		n += m->lm->params[i].numel;
	return n;
}

int sb_sas_model_to_tensors(const struct sb_sas_model *m, struct sb_tensors *ts, struct sb_err *err)
{
	SB_TRY(sb_lm_model_to_tensors(m->lm, ts, err));
	int64_t shape[2] = {m->sc.dsel, m->lm->cfg.d};
	for (int s = 0; s < 2; s++)
		SB_TRY(sb_tensors_add(ts, sel_name[s], SB_F32, 2, shape, m->sel + s * m->sel_k, 0, err));
	return 0;
}

int sb_sas_model_from_tensors(struct sb_sas_model *m, const struct sb_tensors *ts, struct sb_err *err)
{
	/* the backbone reader matches names and shapes of its own table: give it a view
	 * without the selector's tensors */
	struct sb_tensors bb;
	sb_tensors_init(&bb);
	int rc = 0;
	size_t half = m->n_sel / 2;
	int found[2] = {0, 0};
	for (size_t i = 0; i < ts->n && !rc; i++) {
		const struct sb_tensor *t = &ts->t[i];
		int s = !strcmp(t->name, sel_name[0]) ? 0 : !strcmp(t->name, sel_name[1]) ? 1 : -1;
		if (s < 0) {
			rc = sb_tensors_add(&bb, t->name, t->dtype, t->ndim, t->shape, t->data, 1, err);
			continue;
		}
		if (t->dtype != SB_F32 || t->ndim != 2 || t->shape[0] != m->sc.dsel || t->shape[1] != m->lm->cfg.d)
			rc = SB_ERR(err, SB_EDATA, "tensor %s: expected F32 [%d, %d]", t->name, m->sc.dsel,
			            m->lm->cfg.d);
		else {
			memcpy(m->sel + s * m->sel_k, t->data, half * sizeof(float));
			found[s] = 1;
		}
	}
	if (!rc && !(found[0] && found[1]))
		rc = SB_ERR(err, SB_EDATA, "checkpoint has no %s", found[0] ? sel_name[1] : sel_name[0]);
	if (!rc)
		rc = sb_lm_model_from_tensors(m->lm, &bb, err);
	sb_tensors_free(&bb);
	return rc;
}

/* ---------------------------------------------------------------- workspace */

struct sb_sas_ws {
	int T, d, H, hd, F, V, nb, B, ds;
	enum sb_sas_mode mode;
	uint8_t *tok;                       /* T+1 */
	float *x0, *h1, *mu1, *rs1;         /* [T][d], [T] */
	float *q, *k, *v, *o, *x1;          /* [T][d] */
	float *bias, *p;                    /* [T][T], [H][T][T] */
	float *h2, *mu2, *rs2, *u, *a, *x2; /* [T][d], [T], [T][F] */
	float *hf, *muf, *rsf, *logits;     /* [T][d], [T], [T][V] (logits, then probabilities in probs) */
	float *probs;                       /* [T][V] */
	float *qs, *ks, *kb, *g;            /* [T][ds], [T][ds], [nb][ds], [T][nb] */
	uint8_t *sel;                       /* [T][nb] */
	/* backward scratch */
	float *dx, *dh, *dq, *dk, *dv, *dout, *du, *dbias, *dqs, *dkb; /* */
	void *mem;
	struct sb_redzones rz; /* SB_ARENA_CHECK: a zone after each buffer of mem (redzone.h) */
};

/* the buffers of mem, in layout order (for the arena check's reports) */
static const char *const ws_names[] = {
    "x0",   "h1", "mu1",    "rs1",   "q",  "k",  "v",  "o",  "x1",   "bias", "p",  "h2",
    "mu2",  "rs2", "u",     "a",     "x2", "hf", "muf", "rsf", "logits", "probs", "qs", "ks",
    "kb",   "g",  "dx",     "dh",    "dq", "dk", "dv", "dout", "du", "dbias", "dqs", "dkb"};

int sb_sas_ws_new(const struct sb_sas_model *m, struct sb_sas_ws **out, struct sb_err *err)
{
	*out = NULL;
	struct sb_sas_ws *w = calloc(1, sizeof *w);
	if (!w)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	const struct sb_lm_cfg *c = &m->lm->cfg;
	w->T = m->sc.T;
	w->d = c->d;
	w->H = c->heads;
	w->hd = c->head_dim;
	w->F = c->ffn;
	w->V = c->vocab;
	w->B = m->sc.block;
	w->nb = m->sc.T / m->sc.block;
	w->ds = m->sc.dsel;
	size_t T = (size_t)w->T, d = (size_t)w->d, F = (size_t)w->F, V = (size_t)w->V, nb = (size_t)w->nb,
	       ds = (size_t)w->ds, H = (size_t)w->H;
	size_t sizes[] = {
	    T * d,  T * d,     T,       T,                    /* x0 h1 mu1 rs1 */
	    T * d,  T * d,     T * d,   T * d,  T * d,        /* q k v o x1 */
	    T * T,  H * T * T,                                /* bias p */
	    T * d,  T,         T,       T * F,  T * F, T * d, /* h2 mu2 rs2 u a x2 */
	    T * d,  T,         T,       T * V,  T * V,        /* hf muf rsf logits probs */
	    T * ds, T * ds,    nb * ds, T * nb,               /* qs ks kb g */
	    T * d,  T * d,     T * d,   T * d,  T * d, T * d, T * F, T * T, T * ds, nb * ds, /* backward */
	};
	float **ptrs[] = {&w->x0,   &w->h1,  &w->mu1,    &w->rs1,   &w->q,    &w->k,  &w->v,     &w->o,   &w->x1,
	                  &w->bias, &w->p,   &w->h2,     &w->mu2,   &w->rs2,  &w->u,  &w->a,     &w->x2,  &w->hf,
	                  &w->muf,  &w->rsf, &w->logits, &w->probs, &w->qs,   &w->ks, &w->kb,    &w->g,   &w->dx,
	                  &w->dh,   &w->dq,  &w->dk,     &w->dv,    &w->dout, &w->du, &w->dbias, &w->dqs, &w->dkb};
	size_t n = sizeof sizes / sizeof sizes[0], total = 0;
	_Static_assert(sizeof sizes / sizeof sizes[0] == sizeof ws_names / sizeof ws_names[0], "a name per buffer");
	/* packed; with SB_ARENA_CHECK each buffer is followed by a red zone (64-byte steps) */
	w->rz = (struct sb_redzones){.on = sb_redzone_wanted(), .file = "lib/sas.c", .noun = "buffer"};
	for (size_t i = 0; i < n; i++)
		if (w->rz.on)
			sb_redzone_take(&w->rz, &total, sizes[i] * sizeof(float), 0);
		else
			total += sizes[i] * sizeof(float);
	w->mem = calloc(total ? total : 1, 1);
	w->tok = calloc(T + 1, 1);
	w->sel = calloc(T * nb, 1);
	if (!w->mem || !w->tok || !w->sel || sb_redzone_alloc(&w->rz)) {
		sb_sas_ws_free(w);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		if (w->rz.on) {
			*ptrs[i] = (float *)((char *)w->mem + sb_redzone_take(&w->rz, &off, sizes[i] * sizeof(float), 0));
			w->rz.z[w->rz.n - 1].what = ws_names[i];
		} else {
			*ptrs[i] = (float *)((char *)w->mem + off);
			off += sizes[i] * sizeof(float);
		}
	}
	SB_TRY(sb_redzone_fill(NULL, w->mem, &w->rz, err));
	*out = w;
	return 0;
}

int sb_sas_ws_check(const struct sb_sas_ws *ws, const char *after, struct sb_err *err)
{
	return sb_redzone_check(NULL, ws->mem, &ws->rz, after, "the SAS workspace", err);
}

void *sb_sas_ws_zone(const struct sb_sas_ws *ws, int i)
{
	return sb_redzone_at(ws->mem, &ws->rz, i);
}

void sb_sas_ws_free(struct sb_sas_ws *ws)
{
	if (!ws)
		return;
	free(ws->mem);
	sb_redzone_free(&ws->rz);
	free(ws->tok);
	free(ws->sel);
	free(ws);
}

const float *sb_sas_logits(const struct sb_sas_ws *ws)
{
	return ws->logits;
}
const float *sb_sas_bias(const struct sb_sas_ws *ws)
{
	return ws->bias;
}
const float *sb_sas_gates(const struct sb_sas_ws *ws)
{
	return ws->g;
}
const uint8_t *sb_sas_selected(const struct sb_sas_ws *ws)
{
	return ws->sel;
}

/* ---------------------------------------------------------------- plain ops */

/* out[t][o] = sum_i x[t][i] W[o][i] (+ b[o]) */
static void linear(float *out, const float *x, const float *W, const float *b, int T, int in, int outn)
{
	for (int t = 0; t < T; t++)
		for (int o = 0; o < outn; o++) {
			double s = b ? b[o] : 0.0;
			const float *xr = x + (size_t)t * in, *wr = W + (size_t)o * in;
			for (int i = 0; i < in; i++)
				s += (double)xr[i] * wr[i];
			out[(size_t)t * outn + o] = (float)s;
		}
}

/* dx[t][i] += sum_o dout[t][o] W[o][i]; dW[o][i] += sum_t dout[t][o] x[t][i]; db[o] += sum_t dout */
static void linear_back(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W, int T,
                        int in, int outn)
{
	if (dx)
		for (int t = 0; t < T; t++)
			for (int i = 0; i < in; i++) {
				double s = 0;
				for (int o = 0; o < outn; o++)
					s += (double)dout[(size_t)t * outn + o] * W[(size_t)o * in + i];
				dx[(size_t)t * in + i] += (float)s;
			}
	if (dW)
		for (int o = 0; o < outn; o++)
			for (int i = 0; i < in; i++) {
				double s = 0;
				for (int t = 0; t < T; t++)
					s += (double)dout[(size_t)t * outn + o] * x[(size_t)t * in + i];
				dW[(size_t)o * in + i] += (float)s;
			}
	if (db)
		for (int o = 0; o < outn; o++) {
			double s = 0;
			for (int t = 0; t < T; t++)
				s += dout[(size_t)t * outn + o];
			db[o] += (float)s;
		}
}

#define LN_EPS 1e-5

static void layernorm(float *out, float *mu, float *rs, const float *x, const float *w, const float *b, int T, int d)
{
	for (int t = 0; t < T; t++) {
		const float *xr = x + (size_t)t * d;
		double m = 0, v = 0;
		for (int i = 0; i < d; i++)
			m += xr[i];
		m /= d;
		for (int i = 0; i < d; i++)
			v += (xr[i] - m) * (xr[i] - m);
		v /= d;
		double r = 1.0 / sqrt(v + LN_EPS);
		mu[t] = (float)m;
		rs[t] = (float)r;
		for (int i = 0; i < d; i++)
			out[(size_t)t * d + i] = (float)((xr[i] - m) * r * w[i] + b[i]);
	}
}

/* dx += LN backward of dout; dw, db accumulate (may be NULL) */
static void layernorm_back(float *dx, float *dw, float *db, const float *dout, const float *x, const float *mu,
                           const float *rs, const float *w, int T, int d)
{
	for (int t = 0; t < T; t++) {
		const float *xr = x + (size_t)t * d, *gr = dout + (size_t)t * d;
		double s1 = 0, s2 = 0;
		for (int i = 0; i < d; i++) {
			double xh = (xr[i] - mu[t]) * (double)rs[t];
			double gx = (double)gr[i] * w[i];
			s1 += gx;
			s2 += gx * xh;
			if (dw)
				dw[i] += (float)(gr[i] * xh);
			if (db)
				db[i] += gr[i];
		}
		s1 /= d;
		s2 /= d;
		for (int i = 0; i < d; i++) {
			double xh = (xr[i] - mu[t]) * (double)rs[t];
			double gx = (double)gr[i] * w[i];
			dx[(size_t)t * d + i] += (float)(rs[t] * (gx - s1 - xh * s2));
		}
	}
}

static double gelu(double x)
{
	return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}
static double gelu_d(double x)
{
	return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

/* ---------------------------------------------------------------- the selector's mask */

static void selector_bias(struct sb_sas_ws *w, const struct sb_sas_model *m, struct sb_sas_obs *obs)
{
	int T = w->T, d = w->d, ds = w->ds, B = w->B, nb = w->nb;
	const float *Wq = m->sel, *Wk = m->sel + m->sel_k;
	linear(w->qs, w->h1, Wq, NULL, T, d, ds);
	linear(w->ks, w->h1, Wk, NULL, T, d, ds);
	for (int c = 0; c < nb; c++)
		for (int e = 0; e < ds; e++) {
			double s = 0;
			for (int j = c * B; j < (c + 1) * B; j++)
				s += w->ks[(size_t)j * ds + e];
			w->kb[(size_t)c * ds + e] = (float)(s / B);
		}
	double inv = 1.0 / sqrt((double)ds);
	memset(w->g, 0, (size_t)T * nb * sizeof *w->g);
	memset(w->sel, 0, (size_t)T * nb);
	for (int t = 0; t < T; t++) {
		float *br = w->bias + (size_t)t * T;
		int c0 = t / B;
		for (int j = 0; j < T; j++)
			br[j] = -INFINITY;
		for (int j = c0 * B; j <= t; j++)
			br[j] = 0.0f;
		double kept = t - c0 * B + 1;
		if (c0 >= 1) {
			/* raw scores into g's row first, then the softmax in double */
			float *gr = w->g + (size_t)t * nb;
			uint8_t *sr = w->sel + (size_t)t * nb;
			double mx = -INFINITY;
			for (int c = 0; c < c0; c++) {
				double s = 0;
				for (int e = 0; e < ds; e++)
					s += (double)w->qs[(size_t)t * ds + e] * w->kb[(size_t)c * ds + e];
				s *= inv;
				gr[c] = (float)s;
				if (s > mx)
					mx = s;
			}
			/* hard top-k on the raw scores: repeated arg-max, ties to the lower index */
			int k = m->sc.topk < c0 ? m->sc.topk : c0;
			for (int r = 0; r < k; r++) {
				int best = -1;
				for (int c = 0; c < c0; c++)
					if (!sr[c] && (best < 0 || gr[c] > gr[best]))
						best = c;
				sr[best] = 1;
			}
			double z = 0;
			for (int c = 0; c < c0; c++)
				z += exp((double)gr[c] - mx);
			double ent = 0;
			for (int c = 0; c < c0; c++) {
				double g = exp((double)gr[c] - mx) / z;
				gr[c] = (float)g;
				if (g > 0)
					ent -= g * log(g);
			}
			for (int c = 0; c < c0; c++)
				if (sr[c]) {
					float lb = (float)log(fmax((double)gr[c], SB_SAS_GATE_FLOOR));
					for (int j = c * B; j < (c + 1) * B; j++)
						br[j] = lb;
					kept += B;
				}
			if (obs) {
				obs->entropy_sum += ent;
				obs->entropy_n += 1;
			}
		}
		if (obs) {
			obs->kept += kept;
			obs->causal += t + 1;
		}
	}
}

/* ---------------------------------------------------------------- forward */

void sb_sas_forward(struct sb_sas_ws *w, const struct sb_sas_model *m, const uint8_t *tokens, enum sb_sas_mode mode,
                    double *loss, struct sb_sas_obs *obs)
{
	const struct sb_lm_ptrs *P = &m->lm->w;
	const struct sb_lm_layer *L = &P->layer[0];
	int T = w->T, d = w->d, H = w->H, hd = w->hd, F = w->F, V = w->V;
	w->mode = mode;
	memcpy(w->tok, tokens, (size_t)T + 1);
	for (int t = 0; t < T; t++)
		for (int i = 0; i < d; i++)
			w->x0[(size_t)t * d + i] = P->embed[(size_t)tokens[t] * d + i] + P->pos[(size_t)t * d + i];
	layernorm(w->h1, w->mu1, w->rs1, w->x0, L->ln1_w, L->ln1_b, T, d);
	linear(w->q, w->h1, L->q_w, NULL, T, d, d);
	linear(w->k, w->h1, L->k_w, NULL, T, d, d);
	linear(w->v, w->h1, L->v_w, NULL, T, d, d);
	if (mode == SB_SAS_SPARSE) {
		selector_bias(w, m, obs);
	} else {
		for (int t = 0; t < T; t++)
			for (int j = 0; j < T; j++)
				w->bias[(size_t)t * T + j] = j <= t ? 0.0f : -INFINITY;
		if (obs) {
			obs->kept += (double)T * (T + 1) / 2;
			obs->causal += (double)T * (T + 1) / 2;
		}
	}
	double sc = 1.0 / sqrt((double)hd);
	memset(w->o, 0, (size_t)T * d * sizeof *w->o);
	for (int h = 0; h < H; h++)
		for (int t = 0; t < T; t++) {
			float *pr = w->p + ((size_t)h * T + t) * T;
			const float *br = w->bias + (size_t)t * T;
			double mx = -INFINITY;
			for (int j = 0; j <= t; j++) {
				if (br[j] == -INFINITY) {
					pr[j] = -INFINITY;
					continue;
				}
				double s = 0;
				for (int e = 0; e < hd; e++)
					s +=
					    (double)w->q[(size_t)t * d + h * hd + e] * w->k[(size_t)j * d + h * hd + e];
				s = s * sc + br[j];
				pr[j] = (float)s;
				if (s > mx)
					mx = s;
			}
			double z = 0;
			for (int j = 0; j <= t; j++)
				if (pr[j] != -INFINITY)
					z += exp((double)pr[j] - mx);
			for (int j = 0; j < T; j++)
				pr[j] = (j <= t && pr[j] != -INFINITY) ? (float)(exp((double)pr[j] - mx) / z) : 0.0f;
			for (int e = 0; e < hd; e++) {
				double s = 0;
				for (int j = 0; j <= t; j++)
					s += (double)pr[j] * w->v[(size_t)j * d + h * hd + e];
				w->o[(size_t)t * d + h * hd + e] = (float)s;
			}
		}
	linear(w->x1, w->o, L->o_w, NULL, T, d, d);
	for (size_t i = 0; i < (size_t)T * d; i++)
		w->x1[i] += w->x0[i];
	layernorm(w->h2, w->mu2, w->rs2, w->x1, L->ln2_w, L->ln2_b, T, d);
	linear(w->u, w->h2, L->up_w, L->up_b, T, d, F);
	for (size_t i = 0; i < (size_t)T * F; i++)
		w->a[i] = (float)gelu(w->u[i]);
	linear(w->x2, w->a, L->down_w, L->down_b, T, F, d);
	for (size_t i = 0; i < (size_t)T * d; i++)
		w->x2[i] += w->x1[i];
	layernorm(w->hf, w->muf, w->rsf, w->x2, P->lnf_w, P->lnf_b, T, d);
	linear(w->logits, w->hf, P->head, NULL, T, d, V);
	double tot = 0;
	for (int t = 0; t < T; t++) {
		const float *lr = w->logits + (size_t)t * V;
		float *pr = w->probs + (size_t)t * V;
		double mx = -INFINITY, z = 0;
		for (int i = 0; i < V; i++)
			if (lr[i] > mx)
				mx = lr[i];
		for (int i = 0; i < V; i++)
			z += exp((double)lr[i] - mx);
		for (int i = 0; i < V; i++)
			pr[i] = (float)(exp((double)lr[i] - mx) / z);
		tot += -((double)lr[tokens[t + 1]] - mx - log(z));
	}
	*loss = tot / T;
}

/* ---------------------------------------------------------------- backward */

void sb_sas_backward(struct sb_sas_ws *w, const struct sb_sas_model *m, float scale, float *gback, float *gsel)
{
	const struct sb_lm_ptrs *P = &m->lm->w;
	const struct sb_lm_layer *L = &P->layer[0];
	struct sb_lm_ptrs G;
	struct sb_lm_layer *GL = NULL;
	if (gback) {
		sb_lm_ptrs_at(m->lm, gback, &G);
		GL = &G.layer[0];
	}
	int T = w->T, d = w->d, H = w->H, hd = w->hd, F = w->F, V = w->V, ds = w->ds, B = w->B, nb = w->nb;
	size_t Td = (size_t)T * d;
	/* dlogits, in place of the probabilities (a backward consumes its forward) */
	float *dlog = w->probs;
	float sc = scale / (float)T;
	for (int t = 0; t < T; t++) {
		float *pr = dlog + (size_t)t * V;
		for (int i = 0; i < V; i++)
			pr[i] = pr[i] * sc;
		pr[w->tok[t + 1]] -= sc;
	}
	/* head (tied): dhf = dlog E; dE += dlog^T hf */
	memset(w->dh, 0, Td * sizeof(float));
	linear_back(w->dh, gback ? G.head : NULL, NULL, dlog, w->hf, P->head, T, d, V);
	/* final norm -> dx (= dx2) */
	memset(w->dx, 0, Td * sizeof(float));
	layernorm_back(w->dx, gback ? G.lnf_w : NULL, gback ? G.lnf_b : NULL, w->dh, w->x2, w->muf, w->rsf, P->lnf_w, T,
	               d);
	/* MLP: dx1 = dx2 + LN2 back(up back(gelu back(down back(dx2)))) */
	memset(w->du, 0, (size_t)T * F * sizeof(float));
	linear_back(w->du, gback ? GL->down_w : NULL, gback ? GL->down_b : NULL, w->dx, w->a, L->down_w, T, F, d);
	for (size_t i = 0; i < (size_t)T * F; i++)
		w->du[i] = (float)(w->du[i] * gelu_d(w->u[i]));
	memset(w->dh, 0, Td * sizeof(float));
	linear_back(w->dh, gback ? GL->up_w : NULL, gback ? GL->up_b : NULL, w->du, w->h2, L->up_w, T, d, F);
	layernorm_back(w->dx, gback ? GL->ln2_w : NULL, gback ? GL->ln2_b : NULL, w->dh, w->x1, w->mu2, w->rs2,
	               L->ln2_w, T, d);
	/* attention output: dO = dx1 Wo; dWo += dx1^T o */
	memset(w->dout, 0, Td * sizeof(float));
	linear_back(w->dout, gback ? GL->o_w : NULL, NULL, w->dx, w->o, L->o_w, T, d, d);
	memset(w->dq, 0, Td * sizeof(float));
	memset(w->dk, 0, Td * sizeof(float));
	memset(w->dv, 0, Td * sizeof(float));
	memset(w->dbias, 0, (size_t)T * T * sizeof(float));
	double isq = 1.0 / sqrt((double)hd);
	for (int h = 0; h < H; h++)
		for (int t = 0; t < T; t++) {
			const float *pr = w->p + ((size_t)h * T + t) * T;
			const float *dor = w->dout + (size_t)t * d + h * hd;
			double dpp = 0;
			for (int j = 0; j <= t; j++) {
				if (pr[j] == 0.0f)
					continue;
				double s = 0;
				for (int e = 0; e < hd; e++)
					s += (double)dor[e] * w->v[(size_t)j * d + h * hd + e];
				dpp += pr[j] * s;
			}
			for (int j = 0; j <= t; j++) {
				if (pr[j] == 0.0f)
					continue;
				double s = 0;
				for (int e = 0; e < hd; e++) {
					s += (double)dor[e] * w->v[(size_t)j * d + h * hd + e];
					w->dv[(size_t)j * d + h * hd + e] += pr[j] * dor[e];
				}
				double dsj = pr[j] * (s - dpp);
				w->dbias[(size_t)t * T + j] += (float)dsj;
				for (int e = 0; e < hd; e++) {
					w->dq[(size_t)t * d + h * hd + e] +=
					    (float)(dsj * isq * w->k[(size_t)j * d + h * hd + e]);
					w->dk[(size_t)j * d + h * hd + e] +=
					    (float)(dsj * isq * w->q[(size_t)t * d + h * hd + e]);
				}
			}
		}
	/* the selector: through log g only */
	int want_sel = w->mode == SB_SAS_SPARSE && (gsel || gback);
	if (want_sel) {
		double inv = 1.0 / sqrt((double)ds);
		memset(w->dqs, 0, (size_t)T * ds * sizeof(float));
		memset(w->dkb, 0, (size_t)nb * ds * sizeof(float));
		for (int t = 0; t < T; t++) {
			int c0 = t / B;
			if (c0 < 1)
				continue;
			const float *gr = w->g + (size_t)t * nb;
			const uint8_t *sr = w->sel + (size_t)t * nb;
			double dg[64], sum = 0; /* nb <= 64 is checked below */
			for (int c = 0; c < c0; c++) {
				dg[c] = 0;
				if (sr[c] && (double)gr[c] > SB_SAS_GATE_FLOOR) {
					double G = 0;
					for (int j = c * B; j < (c + 1) * B; j++)
						G += w->dbias[(size_t)t * T + j];
					dg[c] = G / gr[c];
				}
				sum += gr[c] * dg[c];
			}
			for (int c = 0; c < c0; c++) {
				double dsc = gr[c] * (dg[c] - sum) * inv;
				for (int e = 0; e < ds; e++) {
					w->dqs[(size_t)t * ds + e] += (float)(dsc * w->kb[(size_t)c * ds + e]);
					w->dkb[(size_t)c * ds + e] += (float)(dsc * w->qs[(size_t)t * ds + e]);
				}
			}
		}
		/* dks_j = dkb_{block of j} / B, into ks's scratch (ks is not needed any more) */
		float *dks = w->ks;
		for (int j = 0; j < T; j++)
			for (int e = 0; e < ds; e++)
				dks[(size_t)j * ds + e] = w->dkb[(size_t)(j / B) * ds + e] / (float)B;
		const float *Wq = m->sel, *Wk = m->sel + m->sel_k;
		float *gq = gsel, *gk = gsel ? gsel + m->sel_k : NULL;
		memset(w->dh, 0, Td * sizeof(float));
		linear_back(gback ? w->dh : NULL, gq, NULL, w->dqs, w->h1, Wq, T, d, ds);
		linear_back(gback ? w->dh : NULL, gk, NULL, dks, w->h1, Wk, T, d, ds);
	} else {
		memset(w->dh, 0, Td * sizeof(float));
	}
	if (!gback)
		return;
	/* dh1 = dq Wq + dk Wk + dv Wv (+ the selector's part, already in dh) */
	linear_back(w->dh, GL->q_w, NULL, w->dq, w->h1, L->q_w, T, d, d);
	linear_back(w->dh, GL->k_w, NULL, w->dk, w->h1, L->k_w, T, d, d);
	linear_back(w->dh, GL->v_w, NULL, w->dv, w->h1, L->v_w, T, d, d);
	/* dx0 = dx1 + LN1 back(dh1) */
	layernorm_back(w->dx, GL->ln1_w, GL->ln1_b, w->dh, w->x0, w->mu1, w->rs1, L->ln1_w, T, d);
	for (int t = 0; t < T; t++)
		for (int i = 0; i < d; i++) {
			G.embed[(size_t)w->tok[t] * d + i] += w->dx[(size_t)t * d + i];
			G.pos[(size_t)t * d + i] += w->dx[(size_t)t * d + i];
		}
}

/* ---------------------------------------------------------------- optimiser */

int sb_sas_adamw_init(struct sb_sas_adamw *o, size_t n, float lr, float wd, struct sb_err *err)
{
	memset(o, 0, sizeof *o);
	o->lr = lr;
	o->wd = wd;
	o->b1 = 0.9f;
	o->b2 = 0.999f;
	o->eps = 1e-8f;
	o->n = n;
	o->m = calloc(n ? n : 1, sizeof *o->m);
	o->v = calloc(n ? n : 1, sizeof *o->v);
	if (!o->m || !o->v) {
		sb_sas_adamw_free(o);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	return 0;
}

void sb_sas_adamw_free(struct sb_sas_adamw *o)
{
	free(o->m);
	free(o->v);
	o->m = o->v = NULL;
}

void sb_sas_adamw_step(struct sb_sas_adamw *o, float *p, const float *g)
{
	o->t++;
	double bc1 = 1.0 - pow(o->b1, (double)o->t), bc2 = 1.0 - pow(o->b2, (double)o->t);
	for (size_t i = 0; i < o->n; i++) {
		p[i] -= o->lr * o->wd * p[i];
		o->m[i] = o->b1 * o->m[i] + (1 - o->b1) * g[i];
		o->v[i] = o->b2 * o->v[i] + (1 - o->b2) * g[i] * g[i];
		double mh = o->m[i] / bc1, vh = o->v[i] / bc2;
		p[i] -= (float)(o->lr * mh / (sqrt(vh) + o->eps));
	}
}

double sb_sas_clip(float *g, size_t n, double clip)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)g[i] * g[i];
	double norm = sqrt(s);
	if (clip > 0 && norm > clip) {
		float f = (float)(clip / (norm + 1e-6)); /* torch: clip_coef = max_norm / (total_norm + 1e-6) */
		for (size_t i = 0; i < n; i++)
			g[i] *= f;
	}
	return norm;
}

/* ---------------------------------------------------------------- procedure */

void sb_sas_proc_default(struct sb_sas_proc *p)
{
	memset(p, 0, sizeof *p);
	p->seed = 42;
	p->pre_steps = 30;
	p->pre_batch = 8;
	p->pre_lr = 8e-4f;
	p->pre_wd = 0.01f;
	p->pre_clip = 1.0f;
	p->sel_steps = 24;
	p->sel_batch = 8;
	p->sel_lr = 2e-3f;
	p->sel_wd = 0.01f;
	p->sel_clip = 1.0f;
	p->eval_windows = 12;
	p->train_bytes = 12000;
	p->eval_bytes = 4096;
}

size_t sb_sas_window_start(uint64_t seed, uint64_t stream, uint64_t i, size_t n, int T)
{
	struct sb_rng r;
	sb_rng_init(&r, seed, SB_RNG_DATA, stream);
	/* example i is block i of the stream: two words (a 64-bit draw) per example, by position */
	r.block = i;
	return (size_t)sb_rng_below(&r, (uint64_t)(n - (size_t)T - 1) + 1);
}

static int check_text(size_t n, int T, struct sb_err *err)
{
	if (n < (size_t)T + 1)
		return SB_ERR(err, SB_EDATA, "sas: the text has %zu tokens, fewer than one window of %d", n, T + 1);
	return 0;
}

/* SB_ARENA_CHECK: the zones of the backbone's parameter table (lib/lm_model.c's, zero bytes)
 * in its parameters and in pretraining's gradient and moments, laid out the same */
static int pretrain_zones_check(const struct sb_sas_model *m, const float *g, const struct sb_sas_adamw *opt,
                                const char *after, struct sb_err *err)
{
	const struct sb_redzones *rz = m->lm->pzones;
	if (!rz)
		return 0;
	SB_TRY(sb_redzone_check(NULL, g, rz, after, "the backbone's gradient (SAS pretraining)", err));
	SB_TRY(sb_redzone_check(NULL, opt->m, rz, after, "the backbone's first moments (SAS pretraining)", err));
	SB_TRY(sb_redzone_check(NULL, opt->v, rz, after, "the backbone's second moments (SAS pretraining)", err));
	return sb_redzone_check(m->lm->be, m->lm->p, rz, after, "the backbone's parameters", err);
}

int sb_sas_pretrain(struct sb_sas_model *m, const uint8_t *text, size_t n, const struct sb_sas_proc *p,
                    sb_sas_step_fn fn, void *arg, struct sb_err *err)
{
	int T = m->sc.T;
	SB_TRY(check_text(n, T, err));
	size_t nf = m->lm->n_floats;
	struct sb_sas_ws *ws = NULL;
	struct sb_sas_adamw opt;
	float *g = calloc(nf, sizeof *g);
	if (!g)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = sb_sas_ws_new(m, &ws, err);
	if (!rc)
		rc = sb_sas_adamw_init(&opt, nf, p->pre_lr, p->pre_wd, err);
	if (rc) {
		free(g);
		sb_sas_ws_free(ws);
		return rc;
	}
	for (int s = 1; s <= p->pre_steps && !rc; s++) {
		memset(g, 0, nf * sizeof *g);
		double lsum = 0;
		for (int b = 0; b < p->pre_batch; b++) {
			uint64_t idx = (uint64_t)(s - 1) * (uint64_t)p->pre_batch + (uint64_t)b;
			size_t st = sb_sas_window_start(p->seed, SB_SAS_STREAM_PRETRAIN, idx, n, T);
			double loss;
			sb_sas_forward(ws, m, text + st, SB_SAS_DENSE, &loss, NULL);
			sb_sas_backward(ws, m, 1.0f / (float)p->pre_batch, g, NULL);
			lsum += loss;
			if ((rc = sb_sas_ws_check(ws, "a pretraining forward and backward pass", err)))
				break;
		}
		if (rc)
			break;
		double loss = lsum / p->pre_batch;
		double gn = sb_sas_clip(g, nf, p->pre_clip);
		if (!isfinite(loss) || !isfinite(gn)) {
			rc = SB_ERR(err, SB_EINTERNAL, "sas pretraining: non-finite loss or gradient at step %d", s);
			break;
		}
		sb_sas_adamw_step(&opt, m->lm->p, g);
		if ((rc = pretrain_zones_check(m, g, &opt, "a pretraining step", err)))
			break;
		if (fn)
			fn(arg, "pretrain", s, loss, gn);
	}
	sb_sas_adamw_free(&opt);
	sb_sas_ws_free(ws);
	free(g);
	return rc;
}

/* SB_ARENA_CHECK: the selector's zones in its gradient, AdamW moments and parameters */
static int selector_zones_check(const struct sb_sas_model *m, const float *g, const struct sb_sas_adamw *opt,
                                const char *after, struct sb_err *err)
{
	if (!m->szones)
		return 0;
	SB_TRY(sb_redzone_check(NULL, g, m->szones, after, "the selector's gradient", err));
	SB_TRY(sb_redzone_check(NULL, opt->m, m->szones, after, "the selector's first moments", err));
	SB_TRY(sb_redzone_check(NULL, opt->v, m->szones, after, "the selector's second moments", err));
	return sb_redzone_check(NULL, m->sel, m->szones, after, "the selector's parameters", err);
}

int sb_sas_train_selector(struct sb_sas_model *m, const uint8_t *text, size_t n, const struct sb_sas_proc *p,
                          sb_sas_step_fn fn, void *arg, double *gnorm_mean, struct sb_err *err)
{
	int T = m->sc.T;
	*gnorm_mean = 0;
	SB_TRY(check_text(n, T, err));
	if (m->sc.T / m->sc.block > 64)
		return SB_ERR(err, SB_EUSAGE, "sas: at most 64 blocks per window (got %d)", m->sc.T / m->sc.block);
	struct sb_sas_ws *ws = NULL;
	struct sb_sas_adamw opt;
	float *g = calloc(m->sel_len, sizeof *g);
	if (!g)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = sb_sas_ws_new(m, &ws, err);
	if (!rc)
		rc = sb_sas_adamw_init(&opt, m->sel_len, p->sel_lr, p->sel_wd, err);
	if (rc) {
		free(g);
		sb_sas_ws_free(ws);
		return rc;
	}
	double gsum = 0;
	for (int s = 1; s <= p->sel_steps && !rc; s++) {
		memset(g, 0, m->sel_len * sizeof *g);
		double lsum = 0;
		for (int b = 0; b < p->sel_batch; b++) {
			uint64_t idx = (uint64_t)(s - 1) * (uint64_t)p->sel_batch + (uint64_t)b;
			size_t st = sb_sas_window_start(p->seed, SB_SAS_STREAM_SELECTOR, idx, n, T);
			double loss;
			sb_sas_forward(ws, m, text + st, SB_SAS_SPARSE, &loss, NULL);
			/* the backbone is frozen: no gradient buffer for it at all */
			sb_sas_backward(ws, m, 1.0f / (float)p->sel_batch, NULL, g);
			lsum += loss;
			if ((rc = sb_sas_ws_check(ws, "a selector forward and backward pass", err)))
				break;
		}
		if (rc)
			break;
		double loss = lsum / p->sel_batch;
		double gn = sb_sas_clip(g, m->sel_len, p->sel_clip);
		if (!isfinite(loss) || !isfinite(gn)) {
			rc = SB_ERR(err, SB_EINTERNAL, "sas selector training: non-finite loss or gradient at step %d",
			            s);
			break;
		}
		gsum += gn;
		sb_sas_adamw_step(&opt, m->sel, g);
		if ((rc = selector_zones_check(m, g, &opt, "a selector step", err)))
			break;
		if (fn)
			fn(arg, "selector", s, loss, gn);
	}
	if (!rc && p->sel_steps > 0)
		*gnorm_mean = gsum / p->sel_steps;
	sb_sas_adamw_free(&opt);
	sb_sas_ws_free(ws);
	free(g);
	return rc;
}

int sb_sas_evaluate(const struct sb_sas_model *m, const uint8_t *text, size_t n, int windows, enum sb_sas_mode mode,
                    struct sb_sas_evalres *r, struct sb_err *err)
{
	memset(r, 0, sizeof *r);
	int T = m->sc.T;
	if (windows < 1)
		return SB_ERR(err, SB_EUSAGE, "sas: evaluation needs at least one window");
	if ((size_t)(windows - 1) * (size_t)T + (size_t)T + 1 > n)
		return SB_ERR(err, SB_EDATA,
		              "sas: %d windows of %d tokens at stride %d need %zu tokens, the text has %zu", windows,
		              T + 1, T, (size_t)(windows - 1) * T + T + 1, n);
	struct sb_sas_ws *ws;
	SB_TRY(sb_sas_ws_new(m, &ws, err));
	double tot = 0;
	int rc = 0;
	for (int i = 0; i < windows && !rc; i++) {
		double loss;
		sb_sas_forward(ws, m, text + (size_t)i * T, mode, &loss, &r->obs);
		tot += loss;
		rc = sb_sas_ws_check(ws, "an evaluation forward pass", err);
	}
	sb_sas_ws_free(ws);
	if (rc)
		return rc;
	r->windows = windows;
	r->loss = tot / windows;
	r->ppl = exp(fmin(r->loss, 20.0));
	if (!isfinite(r->loss))
		return SB_ERR(err, SB_EINTERNAL, "sas evaluation: non-finite loss");
	return 0;
}

void sb_sas_budget(int T, int block, int topk, int64_t *kept, int64_t *causal)
{
	int64_t k = 0, c = 0;
	for (int t = 0; t < T; t++) {
		int c0 = t / block;
		int sel = topk < c0 ? topk : c0;
		k += (t - c0 * block + 1) + (int64_t)sel * block;
		c += t + 1;
	}
	*kept = k;
	*causal = c;
}
