/* test_sas — SAS on the tiny decoder of PROTOCOL B (lib/sas.h).
 *
 * Checks, each able to fail:
 *  - the parameter count of PROTOCOL B (23,392, the selector 512), computed from the table;
 *  - the dense path against lm_model's training path (logits and every backbone gradient);
 *  - the mask: causal, own block with bias 0, selected blocks = top-k of an independent
 *    double recomputation of the scores; retained fraction counted from the bias matrix
 *    of a forward = 1120/2080 at T 64, block 8, top-2 (and the counting function at
 *    other shapes against brute force);
 *  - the loss against an independent double reference (tensors read by name);
 *  - the selector's gradient (through log g only) against central finite differences
 *    of that reference, with the selection checked unchanged under each perturbation;
 *  - gate entropy against a direct computation from the reference's gates;
 *  - selector training leaves every backbone bit unchanged, and changes the selector;
 *  - checkpoint round trip.
 *
 * Tolerances: the float loss against the double reference 1e-5 relative (float
 * storage between ~15 plain ops with double accumulation: ~1e-6 relative); the
 * gradient check as test_lm_grad: |got - want| <= 5e-4 max|want| + 5e-3 |want|
 * (FD in double with h 1e-5: truncation ~1e-10, rounding ~1e-11/h). A wrong term in a
 * backward misses by O(1) relative. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "redzone.h"
#include "backend.h"
#include "lm_model.h"
#include "rng.h"
#include "sas.h"
#include "sas_run.h"

/* ---------------------------------------------------------------- double reference */

struct ref {
	int T, d, H, hd, F, V, B, ds, topk;
	double *E, *P, *ln1w, *ln1b, *Wq, *Wk, *Wv, *Wo, *ln2w, *ln2b, *Wu, *bu, *Wd, *bd, *lnfw, *lnfb, *Sq, *Sk;
	/* outputs of the last run */
	double *g;    /* [T][nb] */
	uint8_t *sel; /* [T][nb] */
	double entropy_mean;
};

static double *tens(const struct sb_tensors *ts, const char *name)
{
	const struct sb_tensor *t = sb_tensors_find(ts, name);
	if (!t) {
		fprintf(stderr, "missing tensor %s\n", name);
		exit(1);
	}
	size_t n = (size_t)sb_tensor_numel(t);
	double *x = malloc(n * sizeof *x);
	for (size_t i = 0; i < n; i++)
		x[i] = ((const float *)t->data)[i];
	return x;
}

static void ref_load(struct ref *r, const struct sb_sas_model *m)
{
	struct sb_tensors ts;
	struct sb_err err = {0};
	sb_tensors_init(&ts);
	if (sb_sas_model_to_tensors(m, &ts, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	r->T = m->sc.T;
	r->d = m->lm->cfg.d;
	r->H = m->lm->cfg.heads;
	r->hd = r->d / r->H;
	r->F = m->lm->cfg.ffn;
	r->V = m->lm->cfg.vocab;
	r->B = m->sc.block;
	r->ds = m->sc.dsel;
	r->topk = m->sc.topk;
	r->E = tens(&ts, "model.embed_tokens.weight");
	r->P = tens(&ts, "model.embed_positions.weight");
	r->ln1w = tens(&ts, "model.layers.0.input_layernorm.weight");
	r->ln1b = tens(&ts, "model.layers.0.input_layernorm.bias");
	r->Wq = tens(&ts, "model.layers.0.self_attn.q_proj.weight");
	r->Wk = tens(&ts, "model.layers.0.self_attn.k_proj.weight");
	r->Wv = tens(&ts, "model.layers.0.self_attn.v_proj.weight");
	r->Wo = tens(&ts, "model.layers.0.self_attn.o_proj.weight");
	r->ln2w = tens(&ts, "model.layers.0.post_attention_layernorm.weight");
	r->ln2b = tens(&ts, "model.layers.0.post_attention_layernorm.bias");
	r->Wu = tens(&ts, "model.layers.0.mlp.up_proj.weight");
	r->bu = tens(&ts, "model.layers.0.mlp.up_proj.bias");
	r->Wd = tens(&ts, "model.layers.0.mlp.down_proj.weight");
	r->bd = tens(&ts, "model.layers.0.mlp.down_proj.bias");
	r->lnfw = tens(&ts, "model.norm.weight");
	r->lnfb = tens(&ts, "model.norm.bias");
	r->Sq = tens(&ts, "selector_q.weight");
	r->Sk = tens(&ts, "selector_k.weight");
	int nb = r->T / r->B;
	r->g = calloc((size_t)r->T * nb, sizeof *r->g);
	r->sel = calloc((size_t)r->T * nb, 1);
	sb_tensors_free(&ts);
}

static void ref_free(struct ref *r)
{
	double *a[] = {r->E,  r->P,  r->ln1w, r->ln1b, r->Wq,   r->Wk,   r->Wv, r->Wo, r->ln2w, r->ln2b,
	               r->Wu, r->bu, r->Wd,   r->bd,   r->lnfw, r->lnfb, r->Sq, r->Sk, r->g};
	for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
		free(a[i]);
	free(r->sel);
}

static void ln(double *y, const double *x, const double *w, const double *b, int d)
{
	double m = 0, v = 0;
	for (int i = 0; i < d; i++)
		m += x[i];
	m /= d;
	for (int i = 0; i < d; i++)
		v += (x[i] - m) * (x[i] - m);
	v /= d;
	for (int i = 0; i < d; i++)
		y[i] = (x[i] - m) / sqrt(v + 1e-5) * w[i] + b[i];
}

static void mv(double *y, const double *W, const double *x, const double *b, int out, int in)
{
	for (int o = 0; o < out; o++) {
		double s = b ? b[o] : 0;
		for (int i = 0; i < in; i++)
			s += W[(size_t)o * in + i] * x[i];
		y[o] = s;
	}
}

/* mean cross-entropy of one window; sparse: the selector's mask */
static double ref_loss(struct ref *r, const uint8_t *tok, int sparse)
{
	int T = r->T, d = r->d, H = r->H, hd = r->hd, F = r->F, V = r->V, B = r->B, ds = r->ds, nb = T / B;
	double *x = calloc((size_t)T * d, sizeof *x), *h = calloc((size_t)T * d, sizeof *h);
	double *q = calloc((size_t)T * d, sizeof *q), *k = calloc((size_t)T * d, sizeof *k),
	       *v = calloc((size_t)T * d, sizeof *v);
	double *qs = calloc((size_t)T * ds, sizeof *qs), *ks = calloc((size_t)T * ds, sizeof *ks),
	       *kb = calloc((size_t)nb * ds, sizeof *kb);
	double *bias = calloc((size_t)T * T, sizeof *bias);
	for (int t = 0; t < T; t++)
		for (int i = 0; i < d; i++)
			x[t * d + i] = r->E[tok[t] * d + i] + r->P[t * d + i];
	for (int t = 0; t < T; t++) {
		ln(h + t * d, x + t * d, r->ln1w, r->ln1b, d);
		mv(q + t * d, r->Wq, h + t * d, NULL, d, d);
		mv(k + t * d, r->Wk, h + t * d, NULL, d, d);
		mv(v + t * d, r->Wv, h + t * d, NULL, d, d);
		mv(qs + t * ds, r->Sq, h + t * d, NULL, ds, d);
		mv(ks + t * ds, r->Sk, h + t * d, NULL, ds, d);
	}
	for (int c = 0; c < nb; c++)
		for (int e = 0; e < ds; e++) {
			double s = 0;
			for (int j = 0; j < B; j++)
				s += ks[(c * B + j) * ds + e];
			kb[c * ds + e] = s / B;
		}
	for (int i = 0; i < T * nb; i++) {
		r->g[i] = 0;
		r->sel[i] = 0;
	}
	double ent = 0;
	int nent = 0;
	for (int t = 0; t < T; t++) {
		for (int j = 0; j < T; j++)
			bias[t * T + j] = j <= t ? 0 : -INFINITY;
		if (!sparse)
			continue;
		int c0 = t / B;
		for (int j = 0; j < c0 * B; j++)
			bias[t * T + j] = -INFINITY;
		if (c0 == 0)
			continue;
		double sc[64], mx = -INFINITY, z = 0;
		for (int c = 0; c < c0; c++) {
			double s = 0;
			for (int e = 0; e < ds; e++)
				s += qs[t * ds + e] * kb[c * ds + e];
			sc[c] = s / sqrt((double)ds);
			mx = fmax(mx, sc[c]);
		}
		for (int c = 0; c < c0; c++)
			z += exp(sc[c] - mx);
		double e1 = 0;
		for (int c = 0; c < c0; c++) {
			double g = exp(sc[c] - mx) / z;
			r->g[t * nb + c] = g;
			if (g > 0)
				e1 -= g * log(g);
		}
		ent += e1;
		nent++;
		/* top-k by rank: block c is kept when fewer than k blocks beat it (ties: lower index wins) */
		int kk = r->topk < c0 ? r->topk : c0;
		for (int c = 0; c < c0; c++) {
			int better = 0;
			for (int c2 = 0; c2 < c0; c2++)
				if (sc[c2] > sc[c] || (sc[c2] == sc[c] && c2 < c))
					better++;
			if (better < kk) {
				r->sel[t * nb + c] = 1;
				for (int j = c * B; j < (c + 1) * B; j++)
					bias[t * T + j] = log(fmax(r->g[t * nb + c], 1e-12));
			}
		}
	}
	r->entropy_mean = nent ? ent / nent : 0;
	/* attention */
	double *att = calloc((size_t)T * d, sizeof *att), *o = calloc((size_t)d, sizeof *o);
	for (int t = 0; t < T; t++) {
		double a[1024];
		for (int hh = 0; hh < H; hh++) {
			double mx = -INFINITY, z = 0;
			for (int j = 0; j <= t; j++) {
				double s = 0;
				for (int e = 0; e < hd; e++)
					s += q[t * d + hh * hd + e] * k[j * d + hh * hd + e];
				a[j] = s / sqrt((double)hd) + bias[t * T + j];
				mx = fmax(mx, a[j]);
			}
			for (int j = 0; j <= t; j++) {
				a[j] = exp(a[j] - mx);
				z += a[j];
			}
			for (int e = 0; e < hd; e++) {
				double s = 0;
				for (int j = 0; j <= t; j++)
					s += a[j] / z * v[j * d + hh * hd + e];
				att[t * d + hh * hd + e] = s;
			}
		}
	}
	double loss = 0;
	double *u = calloc((size_t)F, sizeof *u), *y = calloc((size_t)d, sizeof *y),
	       *hf = calloc((size_t)d, sizeof *hf), *lg = calloc((size_t)V, sizeof *lg);
	for (int t = 0; t < T; t++) {
		mv(o, r->Wo, att + t * d, NULL, d, d);
		double x1[256], h2[256];
		for (int i = 0; i < d; i++)
			x1[i] = x[t * d + i] + o[i];
		ln(h2, x1, r->ln2w, r->ln2b, d);
		mv(u, r->Wu, h2, r->bu, F, d);
		for (int i = 0; i < F; i++)
			u[i] = 0.5 * u[i] * (1 + erf(u[i] / sqrt(2.0)));
		mv(y, r->Wd, u, r->bd, d, F);
		for (int i = 0; i < d; i++)
			x1[i] += y[i];
		ln(hf, x1, r->lnfw, r->lnfb, d);
		mv(lg, r->E, hf, NULL, V, d);
		double mx = -INFINITY, z = 0;
		for (int i = 0; i < V; i++)
			mx = fmax(mx, lg[i]);
		for (int i = 0; i < V; i++)
			z += exp(lg[i] - mx);
		loss += -(lg[tok[t + 1]] - mx - log(z));
	}
	free(x), free(h), free(q), free(k), free(v), free(qs), free(ks), free(kb), free(bias), free(att), free(o);
	free(u), free(y), free(hf), free(lg);
	return loss / T;
}

/* ---------------------------------------------------------------- helpers */

static struct sb_backend *be;

static struct sb_sas_model *model(uint64_t seed, double boost_backbone, double sel_std)
{
	struct sb_sas_cfg sc;
	sb_sas_cfg_default(&sc);
	struct sb_sas_model *m = NULL;
	struct sb_err err = {0};
	if (sb_sas_model_new(be, &sc, NULL, &m, &err) || sb_sas_model_init(m, seed, &err)) {
		fprintf(stderr, "model: %s\n", err.msg);
		exit(1);
	}
	/* larger weights than the 0.02 initialisation make attention and gates far from
	 * uniform, so that a wrong gradient term shows */
	if (boost_backbone != 1.0)
		for (size_t i = 0; i < m->lm->n_floats; i++)
			m->lm->p[i] *= (float)boost_backbone;
	if (sel_std > 0) {
		struct sb_rng r;
		sb_rng_init(&r, seed, SB_RNG_USER, 7);
		for (size_t i = 0; i < m->n_sel; i++) /* selector_k from sel_k (zones: sas.h) */
			m->sel[i < m->n_sel / 2 ? i : m->sel_k + i - m->n_sel / 2] = (float)(sel_std * sb_rng_normal(&r));
	}
	return m;
}

static void random_tokens(uint8_t *tok, int n, uint64_t seed)
{
	struct sb_rng r;
	sb_rng_init(&r, seed, SB_RNG_USER, 1);
	/* a small alphabet so that tokens repeat and attention has something to find */
	for (int i = 0; i < n; i++)
		tok[i] = (uint8_t)('a' + sb_rng_below(&r, 12));
}

/* ---------------------------------------------------------------- tests */

static void test_count(void)
{
	struct sb_sas_model *m = model(42, 1.0, 0);
	size_t n = sb_sas_param_count(m);
	SB_CHECK(n == 23392, "parameter count of PROTOCOL B: got %zu, want 23392", n);
	SB_CHECK(m->n_sel == 512, "selector parameters: got %zu, want 512", m->n_sel);
	/* (with SB_ARENA_CHECK the table is longer by its zones: plain_n is its length without) */
	size_t nf = m->lm->pzones ? m->lm->plain_n : m->lm->n_floats;
	SB_CHECK(nf == 22880, "backbone parameters: got %zu, want 22880", nf);
	/* every Linear/Embedding weight N(0, 0.02^2): the o_proj's sd is 0.02, not 0.02/sqrt(2) */
	const float *o = m->lm->w.layer[0].o_w;
	double s = 0;
	for (int i = 0; i < 32 * 32; i++)
		s += (double)o[i] * o[i];
	double sd = sqrt(s / 1024);
	SB_CHECK(fabs(sd - 0.02) < 0.002, "o_proj init sd %.5f, want 0.02 +- 0.002 (1024 draws: se 0.00044)", sd);
	sb_sas_model_free(m);
}

static void test_dense_vs_lm(void)
{
	struct sb_sas_model *m = model(3, 4.0, 0);
	int T = m->sc.T, V = 256;
	uint8_t tok[65];
	random_tokens(tok, T + 1, 5);
	struct sb_err err = {0};
	struct sb_lm_train_opts o = {.B = 1, .T = T, .tile = 1, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f};
	struct sb_lm_trainer *tr = NULL;
	if (sb_lm_trainer_new(m->lm, &o, &tr, &err)) {
		SB_CHECK(0, "lm trainer: %s", err.msg);
		return;
	}
	float *want = malloc((size_t)T * V * sizeof *want);
	sb_lm_train_logits(tr, tok, want, &err);
	struct sb_sas_ws *ws;
	sb_sas_ws_new(m, &ws, &err);
	double loss;
	sb_sas_forward(ws, m, tok, SB_SAS_DENSE, &loss, NULL);
	sb_check_closef("dense logits vs lm_model's training path", sb_sas_logits(ws), want, (size_t)T * V, 1e-4, 1e-4);
	double lw;
	float *glm;
	sb_lm_train_grad(tr, tok, &lw, &glm, &err);
	SB_CHECK(fabs(lw - loss) <= 1e-5 * fabs(lw), "dense loss vs lm_model: %.9g vs %.9g", loss, lw);
	float *g = calloc(m->lm->n_floats, sizeof *g);
	sb_sas_backward(ws, m, 1.0f, g, NULL);
	double mx = 0;
	for (size_t i = 0; i < m->lm->n_floats; i++)
		mx = fmax(mx, fabs(glm[i]));
	sb_check_closef("dense backbone gradient vs lm_model's backward", g, glm, m->lm->n_floats, 1e-4 * mx, 1e-3);
	free(g);
	free(want);
	sb_sas_ws_free(ws);
	sb_lm_trainer_free(tr);
	sb_sas_model_free(m);
}

static void test_mask(void)
{
	struct sb_sas_model *m = model(11, 4.0, 0.2);
	int T = m->sc.T, B = m->sc.block, nb = T / B;
	uint8_t tok[65];
	random_tokens(tok, T + 1, 9);
	struct sb_err err = {0};
	struct sb_sas_ws *ws;
	sb_sas_ws_new(m, &ws, &err);
	struct sb_sas_obs obs = {0};
	double loss;
	sb_sas_forward(ws, m, tok, SB_SAS_SPARSE, &loss, &obs);
	const float *bias = sb_sas_bias(ws);
	int future = 0, own = 0;
	int64_t kept = 0, causal = 0;
	for (int t = 0; t < T; t++)
		for (int j = 0; j < T; j++) {
			float b = bias[t * T + j];
			if (j > t && b != -INFINITY)
				future++;
			if (j / B == t / B && j <= t && b != 0.0f)
				own++;
			if (j <= t) {
				causal++;
				kept += b != -INFINITY;
			}
		}
	SB_CHECK(future == 0, "mask is causal: %d future keys kept", future);
	SB_CHECK(own == 0, "own block kept up to t with bias 0: %d exceptions", own);
	SB_CHECK(kept == 1120 && causal == 2080, "retained positions counted from the mask: %lld/%lld, want 1120/2080",
	         (long long)kept, (long long)causal);
	SB_CHECK(obs.kept == 1120 && obs.causal == 2080, "observed budget %.0f/%.0f, want 1120/2080", obs.kept,
	         obs.causal);
	double frac = (double)kept / (double)causal;
	SB_CHECK(fabs(frac - 0.5385) < 5e-5, "retained fraction %.6f (published 0.5385)", frac);
	/* the counting function against brute force on other shapes */
	int bad = 0;
	for (int TT = 8; TT <= 96; TT += 8)
		for (int bb = 1; bb <= 8; bb *= 2)
			for (int kk = 0; kk <= 4; kk++) {
				if (TT % bb)
					continue;
				int64_t k1, c1, k2 = 0, c2 = 0;
				sb_sas_budget(TT, bb, kk, &k1, &c1);
				/* enumerate the positions: j <= t in the query's block, or in one of
				 * `sel` complete historical blocks (which ones does not change the count) */
				for (int t = 0; t < TT; t++) {
					int c0 = t / bb, sel = kk < c0 ? kk : c0;
					for (int j = 0; j <= t; j++) {
						c2++;
						k2 += j / bb == c0 || j / bb < sel;
					}
				}
				bad += k1 != k2 || c1 != c2;
			}
	SB_CHECK(bad == 0, "sb_sas_budget against brute-force counts over 60 shapes: %d differ", bad);
	/* selection and gates against the independent double reference */
	struct ref r;
	ref_load(&r, m);
	double lref = ref_loss(&r, tok, 1);
	SB_CHECK(fabs(lref - loss) <= 1e-5 * fabs(lref), "sparse loss vs double reference: %.9g vs %.9g (rel %.2g)",
	         loss, lref, fabs(lref - loss) / fabs(lref));
	int seldiff = 0;
	const uint8_t *sel = sb_sas_selected(ws);
	const float *g = sb_sas_gates(ws);
	double gerr = 0;
	for (int i = 0; i < T * nb; i++) {
		seldiff += sel[i] != r.sel[i];
		gerr = fmax(gerr, fabs(g[i] - r.g[i]));
	}
	SB_CHECK(seldiff == 0, "selected blocks = top-2 of the reference's scores: %d of %d differ", seldiff, T * nb);
	SB_CHECK(gerr < 1e-5, "gates vs reference: max abs error %.2g (tolerance 1e-5)", gerr);
	double ent = obs.entropy_sum / obs.entropy_n;
	SB_CHECK(fabs(ent - r.entropy_mean) < 1e-5 && obs.entropy_n == T - B,
	         "gate entropy %.9f vs direct computation %.9f over %.0f queries (want %d)", ent, r.entropy_mean,
	         obs.entropy_n, T - B);
	/* non-uniform gates here (else a bug that only shows off-uniform would pass): below
	 * the mean of ln(c0), the entropy of uniform gates */
	double hu = 0;
	for (int t = B; t < T; t++)
		hu += log((double)(t / B));
	hu /= T - B;
	SB_CHECK(ent > 0 && ent < hu - 0.05, "gates are not uniform: entropy %.4f < %.4f (uniform) - 0.05", ent, hu);
	double dl = ref_loss(&r, tok, 0);
	double dloss;
	sb_sas_forward(ws, m, tok, SB_SAS_DENSE, &dloss, NULL);
	SB_CHECK(fabs(dl - dloss) <= 1e-5 * fabs(dl), "dense loss vs double reference: %.9g vs %.9g", dloss, dl);
	ref_free(&r);
	sb_sas_ws_free(ws);
	sb_sas_model_free(m);
}

static void test_selector_fd(void)
{
	struct sb_sas_model *m = model(21, 4.0, 0.2);
	int T = m->sc.T;
	uint8_t tok[65];
	random_tokens(tok, T + 1, 13);
	struct sb_err err = {0};
	struct sb_sas_ws *ws;
	sb_sas_ws_new(m, &ws, &err);
	double loss;
	sb_sas_forward(ws, m, tok, SB_SAS_SPARSE, &loss, NULL);
	size_t ns = m->n_sel;
	float *g = calloc(m->sel_len, sizeof *g);
	sb_sas_backward(ws, m, 1.0f, NULL, g);
	struct ref r;
	ref_load(&r, m);
	double *want = calloc(ns, sizeof *want), *got = calloc(ns, sizeof *got);
	uint8_t *sel0 = malloc((size_t)T * (T / m->sc.block));
	size_t nsel = (size_t)T * (T / m->sc.block);
	ref_loss(&r, tok, 1);
	memcpy(sel0, r.sel, nsel);
	const double h = 1e-5;
	int flips = 0;
	size_t half = ns / 2, n = 0;
	for (size_t i = 0; i < ns; i++) {
		double *w = i < half ? &r.Sq[i] : &r.Sk[i - half];
		double w0 = *w;
		*w = w0 + h;
		double lp = ref_loss(&r, tok, 1);
		int f = memcmp(r.sel, sel0, nsel) != 0;
		*w = w0 - h;
		double lm = ref_loss(&r, tok, 1);
		f |= memcmp(r.sel, sel0, nsel) != 0;
		*w = w0;
		if (f) { /* the selection moved: the loss is not differentiable here */
			flips++;
			continue;
		}
		want[n] = (lp - lm) / (2 * h);
		got[n] = g[i < half ? i : m->sel_k + i - half];
		n++;
	}
	double mx = 0;
	for (size_t i = 0; i < n; i++)
		mx = fmax(mx, fabs(want[i]));
	SB_CHECK(flips <= 5, "finite differences: %d of %zu perturbations moved the selection (skipped)", flips, ns);
	SB_CHECK(mx > 1e-4, "the selector gradient is not trivially small here (max |dL/dw| %.3g)", mx);
	sb_check_close("selector gradient vs central FD of the double reference", got, want, n, 5e-4 * mx, 5e-3);
	/* dense mode: the selector gets no gradient */
	float *g2 = calloc(m->sel_len, sizeof *g2);
	sb_sas_forward(ws, m, tok, SB_SAS_DENSE, &loss, NULL);
	sb_sas_backward(ws, m, 1.0f, NULL, g2);
	int nz = 0;
	for (size_t i = 0; i < m->sel_len; i++)
		nz += g2[i] != 0.0f;
	SB_CHECK(nz == 0, "dense mode leaves the selector's gradient zero (%d non-zero)", nz);
	free(g2);
	free(sel0);
	free(want);
	free(got);
	free(g);
	ref_free(&r);
	sb_sas_ws_free(ws);
	sb_sas_model_free(m);
}

static void test_frozen(void)
{
	struct sb_sas_model *m = model(42, 1.0, 0);
	int n = 2000;
	uint8_t *text = malloc((size_t)n);
	random_tokens(text, n, 17);
	struct sb_sas_proc p;
	sb_sas_proc_default(&p);
	p.pre_steps = 5;
	p.sel_steps = 6;
	struct sb_err err = {0};
	int rc = sb_sas_pretrain(m, text, (size_t)n, &p, NULL, NULL, &err);
	SB_CHECK(rc == 0, "pretraining runs (%s)", rc ? err.msg : "ok");
	size_t nb = m->lm->n_floats * sizeof(float);
	size_t sb = m->sel_len * sizeof(float);
	float *before = malloc(nb), *sel0 = malloc(sb);
	memcpy(before, m->lm->p, nb);
	memcpy(sel0, m->sel, sb);
	double gmean;
	rc = sb_sas_train_selector(m, text, (size_t)n, &p, NULL, NULL, &gmean, &err);
	SB_CHECK(rc == 0, "selector training runs (%s)", rc ? err.msg : "ok");
	size_t diff = 0;
	const unsigned char *a = (const unsigned char *)before, *b = (const unsigned char *)m->lm->p;
	for (size_t i = 0; i < nb; i++)
		diff += a[i] != b[i];
	SB_CHECK(diff == 0, "selector training leaves the backbone bit-identical: %zu of %zu bytes differ", diff, nb);
	int moved = 0;
	for (size_t i = 0; i < m->sel_len; i++)
		moved += sel0[i] != m->sel[i];
	SB_CHECK(moved > (int)m->n_sel / 2, "selector training moves the selector: %d of %zu weights changed", moved,
	         m->n_sel);
	SB_CHECK(gmean > 0 && isfinite(gmean), "mean selector gradient norm is finite and positive: %.3g", gmean);
	/* checkpoint round trip */
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	struct sb_sas_model *m2 = model(1, 1.0, 0);
	rc = sb_sas_model_to_tensors(m, &ts, &err);
	if (!rc)
		rc = sb_sas_model_from_tensors(m2, &ts, &err);
	SB_CHECK(rc == 0 && !memcmp(m->lm->p, m2->lm->p, nb) && !memcmp(m->sel, m2->sel, sb),
	         "checkpoint round trip is bit-exact (%s)", rc ? err.msg : "ok");
	sb_tensors_free(&ts);
	sb_sas_model_free(m2);
	free(before);
	free(sel0);
	free(text);
	sb_sas_model_free(m);
}

static void test_pretrain_learns(void)
{
	/* a periodic text: 30 steps at lr 8e-4 must lower the loss */
	struct sb_sas_model *m = model(42, 1.0, 0);
	int n = 3000;
	uint8_t *text = malloc((size_t)n);
	const char *s = "the cat sat on the mat. ";
	for (int i = 0; i < n; i++)
		text[i] = (uint8_t)s[i % (int)strlen(s)];
	struct sb_sas_proc p;
	sb_sas_proc_default(&p);
	struct sb_err err = {0};
	struct sb_sas_evalres r0, r1;
	sb_sas_evaluate(m, text, (size_t)n, 12, SB_SAS_DENSE, &r0, &err);
	sb_sas_pretrain(m, text, (size_t)n, &p, NULL, NULL, &err);
	sb_sas_evaluate(m, text, (size_t)n, 12, SB_SAS_DENSE, &r1, &err);
	SB_CHECK(r1.loss < r0.loss - 0.3, "30 pretraining steps lower the loss: %.4f -> %.4f (want a drop > 0.3)",
	         r0.loss, r1.loss);
	SB_CHECK(fabs(r0.loss - log(256.0)) < 0.05, "loss at initialisation near ln 256 = 5.545: %.4f", r0.loss);
	free(text);
	sb_sas_model_free(m);
}

static int write_part(const char *dir, const char *split, const char *meta_split, const uint8_t *b, size_t n)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s.safetensors", dir, split);
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	struct sb_err err = {0};
	int64_t shape[1] = {(int64_t)n};
	int rc = sb_tensors_add(&ts, "bytes", SB_U8, 1, shape, b, 0, &err);
	rc |= sb_tensors_set_meta(&ts, "format", "sparsebench.corpus", &err);
	rc |= sb_tensors_set_meta(&ts, "split", meta_split, &err);
	rc |= sb_st_write(path, &ts, &err);
	sb_tensors_free(&ts);
	return rc;
}

static void test_corpus_parts(void)
{
	char dir[] = "/tmp/sbsasXXXXXX";
	if (!mkdtemp(dir)) {
		SB_CHECK(0, "mkdtemp");
		return;
	}
	uint8_t b[3][300];
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < 300; i++)
			b[k][i] = (uint8_t)('a' + (i + 7 * k) % 26);
	const char *sp[3] = {"train", "valid", "test"};
	int rc = 0;
	for (int k = 0; k < 3; k++)
		rc |= write_part(dir, sp[k], sp[k], b[k], 300);
	struct sb_err err = {0};
	int ok = !rc;
	for (int k = 0; k < 3 && ok; k++) {
		struct sb_lm_corpus c;
		char spec[600];
		snprintf(spec, sizeof spec, "wt=%s", dir);
		if (sb_sas_corpus_part(spec, sp[k], 100, &c, &err)) {
			ok = 0;
			break;
		}
		ok = c.n == 100 && !memcmp(c.bytes, b[k], 100) && !strcmp(c.split, sp[k]);
		sb_lm_corpus_free(&c);
	}
	SB_CHECK(ok, "corpus directory: train, valid and test parts, first 100 bytes each (%s)", ok ? "ok" : err.msg);
	/* a test file whose metadata names another split is refused */
	write_part(dir, "test", "valid", b[2], 300);
	struct sb_lm_corpus c;
	char spec[600];
	snprintf(spec, sizeof spec, "wt=%s", dir);
	rc = sb_sas_corpus_part(spec, "test", 100, &c, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "expected 'test'"), "a mislabelled test part is refused (%s)",
	         err.msg);
	/* one text: the test part is the last 5% (from floor(0.95 n)) */
	char file[600];
	snprintf(file, sizeof file, "%s/one.txt", dir);
	FILE *f = fopen(file, "wb");
	uint8_t t[1000];
	for (int i = 0; i < 1000; i++)
		t[i] = (uint8_t)('A' + i % 26);
	fwrite(t, 1, 1000, f);
	fclose(f);
	rc = sb_sas_corpus_part(file, "test", 4096, &c, &err);
	SB_CHECK(!rc && c.n == 50 && c.offset == 950 && !memcmp(c.bytes, t + 950, 50),
	         "one text: the test part is bytes 950..1000 (got %zu bytes at %zu)", rc ? 0 : c.n, rc ? 0 : c.offset);
	if (!rc)
		sb_lm_corpus_free(&c);
	rc = sb_sas_corpus_part(file, "valid", 4096, &c, &err);
	SB_CHECK(!rc && c.n == 50 && c.offset == 900, "one text: the valid part is bytes 900..950");
	if (!rc)
		sb_lm_corpus_free(&c);
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "# could not remove %s\n", dir);
}

/* An interrupted retrain of an edited cell (same id) leaves the new cell.json beside the
 * previous run's train.ndjson and checkpoint: that run is not this cell's, so it must not
 * count as finished (before, sb-train skipped it and sb-eval then refused the run). */
static void test_resume_stale(void)
{
	char dir[] = "/tmp/sbsasrXXXXXX";
	if (!mkdtemp(dir)) {
		SB_CHECK(0, "mkdtemp");
		return;
	}
	char file[600], spec[700];
	snprintf(file, sizeof file, "%s/text.txt", dir);
	FILE *f = fopen(file, "wb");
	for (int i = 0; f && i < 20000; i++)
		fputc('a' + (i * 7 + i / 13) % 26, f);
	if (f)
		fclose(f);
	snprintf(spec, sizeof spec, "t=%s", file);
	struct sb_sas_cell c1, c2;
	memset(&c1, 0, sizeof c1);
	sb_sas_cfg_default(&c1.sc);
	sb_sas_proc_default(&c1.proc);
	snprintf(c1.cell_id, sizeof c1.cell_id, "r");
	snprintf(c1.corpus, sizeof c1.corpus, "%s", spec);
	c1.proc.pre_steps = 1;
	c1.proc.sel_steps = 1;
	c2 = c1;
	c2.proc.sel_steps = 2; /* the same id, another field */
	char run_dir[4096];
	struct sb_err err = {0};
	int rc = sb_sas_train_cell(be, &c1, dir, run_dir, NULL, NULL, &err);
	SB_CHECK(rc == 0 && sb_sas_cell_finished(&c1, dir), "a trained cell counts as finished (%s)",
	         rc ? err.msg : "ok");
	/* what sb_sas_train_cell(c2) leaves when killed after writing cell.json */
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_sas_cell_json(&w, &c2);
	char path[4200];
	snprintf(path, sizeof path, "%s/cell.json", run_dir);
	f = fopen(path, "wb");
	if (f) {
		fwrite(w.buf, 1, w.len, f);
		fputc('\n', f);
		fclose(f);
	}
	sb_jw_free(&w);
	SB_CHECK(!sb_sas_cell_finished(&c2, dir),
	         "an edited cell whose retraining was interrupted is not finished (the checkpoint is the old cell's)");
	rc = sb_sas_train_cell(be, &c2, dir, run_dir, NULL, NULL, &err);
	SB_CHECK(rc == 0 && sb_sas_cell_finished(&c2, dir), "retrained, it is (%s)", rc ? err.msg : "ok");
	/* a malformed train.ndjson: one message naming the file and line once */
	snprintf(path, sizeof path, "%s/train.ndjson", run_dir);
	f = fopen(path, "ab");
	if (f) {
		fputs("{\"kind\":\n", f);
		fclose(f);
	}
	char where[4300];
	snprintf(where, sizeof where, "%s/train.ndjson:", run_dir);
	rc = sb_sas_eval_run(be, run_dir, NULL, &err);
	const char *at = rc ? strstr(err.msg, where) : NULL;
	SB_CHECK(rc == SB_EDATA && at && !strstr(at + 1, where), "a malformed train.ndjson: exit 3, named once (%s)",
	         rc ? err.msg : "ok");
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "# could not remove %s\n", dir);
}

/* SB_ARENA_CHECK: a red zone after each of the workspace's 36 buffers (one allocation).
 * Without the variable there are none; with it a sparse forward and backward pass gives
 * the same logits and gradients, and an evaluation (which checks after every window) the
 * same loss and statistics; a byte or an in-place float update in a zone (the first, a
 * middle and the last) is reported naming the buffer, and no longer once restored. */
static void test_arena_check(void)
{
	struct sb_sas_model *m = model(11, 4.0, 0.2);
	int T = m->sc.T;
	uint8_t tok[65];
	random_tokens(tok, T + 1, 9);
	struct sb_err err = {0};
	char *saved = sb_test_env_set("SB_ARENA_CHECK", NULL);
	struct sb_sas_ws *ws[2] = {NULL, NULL};
	uint8_t text[64 * 12 + 1];
	random_tokens(text, (int)sizeof text, 4);
	struct sb_sas_evalres ev[2];
	int rc0 = sb_sas_ws_new(m, &ws[0], &err);
	int re0 = sb_sas_evaluate(m, text, sizeof text, 12, SB_SAS_SPARSE, &ev[0], &err);
	setenv("SB_ARENA_CHECK", "1", 1);
	int rc1 = sb_sas_ws_new(m, &ws[1], &err);
	int re1 = sb_sas_evaluate(m, text, sizeof text, 12, SB_SAS_SPARSE, &ev[1], &err);
	sb_test_env_restore("SB_ARENA_CHECK", saved);
	SB_CHECK(rc0 == 0 && rc1 == 0, "sas arena check: two workspaces (%s)", err.msg);
	if (rc0 || rc1)
		return;
	SB_CHECK(re0 == 0 && re1 == 0 && ev[0].loss == ev[1].loss && !memcmp(&ev[0].obs, &ev[1].obs, sizeof ev[0].obs),
	         "sas arena check: 12 evaluation windows give the same loss (%.9g, %.9g) and statistics with the zones "
	         "checked after each as without (rc %d, %d)",
	         ev[0].loss, ev[1].loss, re0, re1);
	int nz = 0;
	while (sb_sas_ws_zone(ws[1], nz))
		nz++;
	SB_CHECK(!sb_sas_ws_zone(ws[0], 0) && nz == 36, "sas arena check: no zones without SB_ARENA_CHECK, 36 with it (%d)",
	         nz);
	size_t ng = m->lm->n_floats;
	float *g[2] = {calloc(ng, sizeof(float)), calloc(ng, sizeof(float))};
	float *gs[2] = {calloc(m->sel_len, sizeof(float)), calloc(m->sel_len, sizeof(float))};
	double loss[2];
	int same = 1;
	for (int k = 0; k < 2; k++) {
		sb_sas_forward(ws[k], m, tok, SB_SAS_SPARSE, &loss[k], NULL);
		sb_sas_backward(ws[k], m, 1.0f, g[k], gs[k]);
	}
	same = loss[0] == loss[1] && !memcmp(sb_sas_logits(ws[0]), sb_sas_logits(ws[1]), (size_t)T * 256 * sizeof(float)) &&
	       !memcmp(g[0], g[1], ng * sizeof(float)) && !memcmp(gs[0], gs[1], m->sel_len * sizeof(float));
	int rc = sb_sas_ws_check(ws[1], "a test pass", &err);
	SB_CHECK(same && rc == 0,
	         "sas arena check: a sparse forward and backward pass gives the same loss, logits and gradients with the "
	         "zones as without, and leaves them intact (rc %d %s)",
	         rc, rc ? err.msg : "");
	static const char *const names[3] = {"x0", "logits", "dkb"};
	int at[3] = {0, 20, 35};
	for (int j = 0; j < 3; j++)
		for (int kind = 0; kind < 2; kind++) {
			unsigned char *z = sb_sas_ws_zone(ws[1], at[j]);
			size_t skip = kind ? (size_t)(-(uintptr_t)z & 3) : 0;
			unsigned char orig[4], bad[4];
			memcpy(orig, z + skip, 4);
			sb_test_zone_hit(bad, orig, kind);
			memcpy(z + skip, bad, 4);
			struct sb_err e1 = {0}, e2 = {0};
			int r1 = sb_sas_ws_check(ws[1], "a test pass", &e1);
			memcpy(z + skip, orig, 4);
			int r2 = sb_sas_ws_check(ws[1], "a test pass", &e2);
			char want[120];
			snprintf(want, sizeof want, "byte %zu past the end of the ", skip + (kind ? 2 : 0));
			char wb[60];
			snprintf(wb, sizeof wb, "-byte buffer %s (the SAS workspace)", names[j]);
			SB_CHECK(r1 == SB_EINTERNAL && strstr(e1.msg, want) && strstr(e1.msg, wb) && r2 == 0,
			         "sas arena check: %s the zone after %s is reported (rc %d: %s), and no longer once restored "
			         "(rc %d)",
			         kind ? "a float updated in place (+= 1) in" : "a byte changed in", names[j], r1, e1.msg, r2);
		}
	for (int k = 0; k < 2; k++) {
		free(g[k]);
		free(gs[k]);
		sb_sas_ws_free(ws[k]);
	}
	sb_sas_model_free(m);
}

struct pre_log {
	int n;
	double loss[8], gn[8];
};
static void pre_cb(void *arg, const char *phase, int step, double loss, double gnorm)
{
	struct pre_log *l = arg;
	if (l->n < 8) {
		l->loss[l->n] = loss;
		l->gn[l->n++] = gnorm;
	}
}

/* SB_ARENA_CHECK: the backbone's parameter table (lib/lm_model.c) is laid out with a zone of
 * zero bytes after its tensors, and SAS's pretraining, whose gradient and AdamW moments are
 * laid out the same, checks them with the parameters' after every step; so does selector
 * training the selector's two matrices, each followed by a zone (lib/sas.c). Three steps of
 * each give the same losses, gradient norms and tensors as without; a float in a zone of the
 * parameters fails the next step naming the tensor, and the step runs once it is restored. */
static void test_train_zones(void)
{
	char *saved = sb_test_env_set("SB_ARENA_CHECK", NULL);
	struct sb_sas_model *m0 = model(5, 1.0, 0);
	setenv("SB_ARENA_CHECK", "1", 1);
	struct sb_sas_model *m1 = model(5, 1.0, 0);
	sb_test_env_restore("SB_ARENA_CHECK", saved);
	int n = 1500;
	uint8_t *text = malloc((size_t)n);
	random_tokens(text, n, 23);
	struct sb_sas_proc p;
	sb_sas_proc_default(&p);
	p.pre_steps = 3;
	struct pre_log l0 = {0}, l1 = {0};
	struct sb_err err = {0};
	int rc0 = sb_sas_pretrain(m0, text, (size_t)n, &p, pre_cb, &l0, &err);
	int rc1 = sb_sas_pretrain(m1, text, (size_t)n, &p, pre_cb, &l1, &err);
	int same = m0->lm->n_params == m1->lm->n_params;
	for (int i = 0; same && i < m0->lm->n_params; i++)
		same = !memcmp(m0->lm->p + m0->lm->params[i].offset, m1->lm->p + m1->lm->params[i].offset,
		               m0->lm->params[i].numel * sizeof(float));
	int nz = 0;
	while (m1->lm->pzones && sb_redzone_at(m1->lm->p, m1->lm->pzones, nz))
		nz++;
	SB_CHECK(rc0 == 0 && rc1 == 0 && !m0->lm->pzones && nz > 10 && l0.n == 3 && l1.n == 3 &&
	             !memcmp(l0.loss, l1.loss, sizeof l0.loss) && !memcmp(l0.gn, l1.gn, sizeof l0.gn) && same,
	         "sas pretraining zones: %d in the backbone's table (%zu floats for %zu), none without the check; 3 steps "
	         "give the same losses, gradient norms and backbone tensors as without (%s)",
	         nz, m1->lm->n_floats, m0->lm->n_floats, rc0 || rc1 ? err.msg : "ran");
	/* selector training on the two pretrained models */
	p.sel_steps = 3;
	struct pre_log s0 = {0}, s1 = {0};
	double gm0, gm1;
	rc0 = sb_sas_train_selector(m0, text, (size_t)n, &p, pre_cb, &s0, &gm0, &err);
	rc1 = sb_sas_train_selector(m1, text, (size_t)n, &p, pre_cb, &s1, &gm1, &err);
	size_t half = m0->n_sel / 2;
	same = m1->n_sel == m0->n_sel && !memcmp(m0->sel, m1->sel, half * sizeof(float)) &&
	       !memcmp(m0->sel + m0->sel_k, m1->sel + m1->sel_k, half * sizeof(float));
	int ns = 0;
	while (m1->szones && sb_redzone_at(m1->sel, m1->szones, ns))
		ns++;
	SB_CHECK(rc0 == 0 && rc1 == 0 && !m0->szones && m0->sel_len == m0->n_sel && ns == 2 &&
	             m1->sel_k == half + 16 && m1->sel_len == m1->n_sel + 32 && s0.n == 3 && s1.n == 3 &&
	             !memcmp(s0.loss, s1.loss, sizeof s0.loss) && !memcmp(s0.gn, s1.gn, sizeof s0.gn) && gm0 == gm1 &&
	             same,
	         "sas selector zones: %d (selector_k at %zu, %zu floats for %zu), none without the check; 3 steps give "
	         "the same losses, gradient norms and selector tensors as without (%s)",
	         ns, m1->sel_k, m1->sel_len, m1->n_sel, rc0 || rc1 ? err.msg : "ran");
	for (int i = 0; i < ns; i++) {
		unsigned char *z = sb_redzone_at(m1->sel, m1->szones, i), orig[4], bad[4];
		memcpy(orig, z + 4 * i, 4);
		sb_test_zone_hit(bad, orig, 1);
		memcpy(z + 4 * i, bad, 4);
		struct sb_err e1 = {0}, e2 = {0};
		p.sel_steps = 1;
		int r1 = sb_sas_train_selector(m1, text, (size_t)n, &p, NULL, NULL, &gm1, &e1);
		memcpy(z + 4 * i, orig, 4);
		int r2 = sb_sas_train_selector(m1, text, (size_t)n, &p, NULL, NULL, &gm1, &e2);
		char want[96];
		snprintf(want, sizeof want, "-byte tensor %s (the selector's parameters)",
		         i ? "selector_k.weight" : "selector_q.weight");
		SB_CHECK(r1 == SB_EINTERNAL && strstr(e1.msg, "after a selector step: byte ") && strstr(e1.msg, want) &&
		             r2 == 0,
		         "sas selector zones: a float in zone %d of the parameters fails the step (rc %d: %s); restored, "
		         "it runs (rc %d)",
		         i, r1, e1.msg, r2);
	}
	if (nz > 1) {
		unsigned char *z = sb_redzone_at(m1->lm->p, m1->lm->pzones, nz / 2), orig[4], bad[4];
		memcpy(orig, z, 4);
		sb_test_zone_hit(bad, orig, 1);
		memcpy(z, bad, 4);
		struct sb_err e1 = {0}, e2 = {0};
		p.pre_steps = 1;
		int r1 = sb_sas_pretrain(m1, text, (size_t)n, &p, NULL, NULL, &e1);
		memcpy(z, orig, 4);
		int r2 = sb_sas_pretrain(m1, text, (size_t)n, &p, NULL, NULL, &e2);
		/* (the step's weight decay has moved the float: which byte is reported first varies) */
		SB_CHECK(r1 == SB_EINTERNAL && strstr(e1.msg, "after a pretraining step: byte ") &&
		             strstr(e1.msg, "-byte tensor model.") &&
		             strstr(e1.msg, "(the backbone's parameters)") && r2 == 0,
		         "sas pretraining zones: a float in a parameter zone fails the step (rc %d: %s); restored, it runs "
		         "(rc %d)",
		         r1, e1.msg, r2);
	}
	free(text);
	sb_sas_model_free(m0);
	sb_sas_model_free(m1);
}

int main(void)
{
	struct sb_err err = {0};
	if (sb_backend_cpu_open(1, &be, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	test_count();
	test_dense_vs_lm();
	test_mask();
	test_arena_check();
	test_train_zones();
	test_selector_fd();
	test_frozen();
	test_pretrain_learns();
	test_corpus_parts();
	test_resume_stale();
	sb_backend_close(be);
	return sb_test_done();
}
