/* test_sas_lm — SAS on an LM-track decoder (lib/sas_lm.h).
 *
 *  - dense mode reproduces lm_model's training-path logits bit for bit (it calls the
 *    backend's own attention);
 *  - mask mode (recipe, block) against lm_model's cached evaluation path with the same
 *    mask, an independent implementation (tolerance 2e-4 absolute on logits of size ~1:
 *    float products in another order, through a few layers);
 *  - SAS mode: the budget counted by the kernel equals own block + m(t) B per row and
 *    head, m(t) recomputed here from the recipe's count; causal (a different future
 *    leaves the logits of earlier positions bit-identical);
 *  - the selector's gradient against central differences of the float loss, with a
 *    budget that keeps every earlier block (so no top-k boundary is crossed), on the
 *    last A layer's selector (the inputs are detached, see test_grad): the directional
 *    derivative along the gradient and the 16 largest coordinates, tolerance 1%
 *    (h = 1e-2: the loss changes by ~1e-3 and is rounded at ~1e-6; measured 6e-4), and
 *    every coordinate, absolute tolerance 1e-4 (measured 6.1e-6);
 *  - without the gates and with every earlier block kept, SAS equals dense attention;
 *  - selector steps leave the backbone bit-identical and lower the training loss;
 *  - SB_ARENA_CHECK's zones after the selector's matrices change no result and are checked. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "backend.h"
#include "lm_model.h"
#include "rng.h"
#include "sas_lm.h"

static struct sb_backend *be;

static struct sb_lm_model *decoder_w(const char *pattern, int T, double boost, int window, float softcap)
{
	struct sb_lm_cfg c;
	sb_lm_cfg_default(&c);
	snprintf(c.pattern, sizeof c.pattern, "%s", pattern);
	c.window = window;
	c.rope_local_theta = window ? 100.0f : 0.0f;
	c.attn_softcap = softcap;
	c.d = 32;
	c.heads = 4;
	c.kv_heads = 2;
	c.ffn = 64;
	c.pos = SB_LM_POS_ROPE;
	c.max_T = T;
	c.conv_gate = 0;
	struct sb_err err = {0};
	struct sb_lm_model *m = NULL;
	if (sb_lm_model_new(be, &c, &m, &err) || sb_lm_model_init(m, 7, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	for (size_t i = 0; i < m->n_floats; i++)
		if (m->params[0].offset <= i) /* scale every parameter but norms (ones) alike: fine for a test */
			m->p[i] *= (float)boost;
	sb_lm_model_prepare(m);
	return m;
}

static struct sb_lm_model *decoder(const char *pattern, int T, double boost)
{
	return decoder_w(pattern, T, boost, 0, 0.0f);
}

static void tokens(uint8_t *t, int n, uint64_t seed)
{
	struct sb_rng r;
	sb_rng_init(&r, seed, SB_RNG_USER, 3);
	for (int i = 0; i < n; i++)
		t[i] = (uint8_t)('a' + sb_rng_below(&r, 10));
}

static void cfg(struct sb_sas_lm_cfg *c, int block, int batch, const char *budget)
{
	memset(c, 0, sizeof *c);
	c->block = block;
	c->dsel = 8;
	c->batch = batch;
	struct sb_err err = {0};
	sb_lm_mask_parse(budget, &c->budget, &err);
}

static void test_paths(void)
{
	int T = 48, V = 256;
	struct sb_lm_model *m = decoder("ACA", T, 3.0);
	struct sb_sas_lm_cfg c;
	cfg(&c, 4, 2, "recipe:s=2,w=8,k=8");
	struct sb_sas_lm *x = NULL;
	struct sb_err err = {0};
	if (sb_sas_lm_new(m, &c, T, 1, &x, &err)) {
		SB_CHECK(0, "sb_sas_lm_new: %s", err.msg);
		return;
	}
	uint8_t tok[49];
	tokens(tok, T + 1, 5);
	float *a = malloc((size_t)T * V * sizeof *a), *b = malloc((size_t)T * V * sizeof *b);
	/* dense: the backend's own op through our hook, vs a plain trainer */
	struct sb_lm_trainer *tr = NULL;
	struct sb_lm_train_opts o = {.B = 1, .T = T, .tile = 1, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f};
	sb_lm_trainer_new(m, &o, &tr, &err);
	sb_lm_train_logits(tr, tok, a, &err);
	sb_sas_lm_logits(x, tok, SB_SAS_LM_DENSE, NULL, b, NULL, &err);
	SB_CHECK(!memcmp(a, b, (size_t)T * V * sizeof *a), "dense mode = lm_model's training path, bit for bit");
	sb_lm_trainer_free(tr);
	/* masks: our kernel vs lm_model's cached path */
	const char *masks[] = {"recipe:s=2,w=8,k=8", "block4:s=2,w=8,k=8", "block8:s=2,w=8,k=8", "dense"};
	struct sb_lm_cache *cache = NULL;
	sb_lm_cache_new(m, T, &cache, &err);
	for (int i = 0; i < 4; i++) {
		struct sb_lm_mask mk;
		sb_lm_mask_parse(masks[i], &mk, &err);
		sb_lm_cache_reset(cache, 0);
		int rc = sb_lm_forward_cached(sb_be_main(be), m, cache, tok, T, &mk, a, 1, NULL, &err);
		rc |= sb_sas_lm_logits(x, tok, SB_SAS_LM_MASK, &mk, b, NULL, &err);
		char name[96];
		snprintf(name, sizeof name, "mask %s: our kernel vs lm_model's cached path (rc %d)", masks[i], rc);
		sb_check_closef(name, b, a, (size_t)T * V, 2e-4, 1e-4);
		if (i < 3) { /* and the mask matters here (else the comparison above proves little) */
			float *dn = malloc((size_t)T * V * sizeof *dn);
			sb_sas_lm_logits(x, tok, SB_SAS_LM_DENSE, NULL, dn, NULL, &err);
			double md = 0;
			for (size_t j = 0; j < (size_t)T * V; j++)
				md = fmax(md, fabs(dn[j] - b[j]));
			SB_CHECK(md > 1e-2, "mask %s changes the logits vs dense (max |diff| %.3g)", masks[i], md);
			free(dn);
		}
	}
	sb_lm_cache_free(cache);
	/* SAS budget: own block + m(t) blocks per row and head, in each of the 2 A layers */
	struct sb_lm_budget bud = {0};
	sb_sas_lm_logits(x, tok, SB_SAS_LM_SAS, NULL, a, &bud, &err);
	double kept = 0, causal = 0;
	for (int t = 0; t < T; t++) {
		int B = 4, c0 = t / B, own = t - c0 * B + 1;
		int n = t + 1 < 2 + 8 + 8 ? t + 1 : 2 + 8 + 8; /* recipe s=2, w=8, k=8 */
		double mm = (double)(n - own) / B;
		int k = (int)ceil(mm - 0.5);
		k = k < 0 ? 0 : k > c0 ? c0 : k;
		kept += own + k * B;
		causal += t + 1;
	}
	kept *= 4 * 2; /* heads x A layers */
	causal *= 4 * 2;
	SB_CHECK(bud.kept == kept && bud.causal == causal, "SAS budget counted %.0f/%.0f, want %.0f/%.0f", bud.kept,
	         bud.causal, kept, causal);
	/* causality: change the last 10 tokens, earlier logits unchanged */
	uint8_t tok2[49];
	memcpy(tok2, tok, sizeof tok);
	for (int i = T - 10; i < T; i++)
		tok2[i] = (uint8_t)('z' - (tok2[i] - 'a'));
	sb_sas_lm_logits(x, tok2, SB_SAS_LM_SAS, NULL, b, NULL, &err);
	SB_CHECK(!memcmp(a, b, (size_t)(T - 10) * V * sizeof *a), "SAS is causal: logits before the change identical");
	free(a);
	free(b);
	sb_sas_lm_free(x);
	sb_lm_model_free(m);
}

static void test_grad(void)
{
	int T = 32;
	struct sb_lm_model *m = decoder("AA", T, 3.0);
	struct sb_sas_lm_cfg c;
	/* a budget that keeps every earlier block (m(t) = t/B): the loss is then smooth in the
	 * selector's weights (no top-k boundary to cross), and the gradient through log g is
	 * checked alone; the selection itself is checked by the budget and causality tests */
	cfg(&c, 4, 2, "recipe:s=2,w=64,k=8");
	struct sb_sas_lm *x = NULL;
	struct sb_err err = {0};
	if (sb_sas_lm_new(m, &c, T, 3, &x, &err)) {
		SB_CHECK(0, "sb_sas_lm_new: %s", err.msg);
		return;
	}
	uint8_t batch[2 * 33];
	tokens(batch, 2 * (T + 1), 11);
	/* without the gates and with every earlier block kept, SAS is dense attention */
	{
		float *a = malloc((size_t)T * 256 * sizeof *a), *b = malloc((size_t)T * 256 * sizeof *b);
		sb_sas_lm_logits(x, batch, SB_SAS_LM_DENSE, NULL, a, NULL, &err);
		sb_sas_lm_set_gate(x, 0);
		sb_sas_lm_logits(x, batch, SB_SAS_LM_SAS, NULL, b, NULL, &err);
		sb_sas_lm_set_gate(x, 1);
		sb_check_closef("SAS without gates, all blocks kept = dense", b, a, (size_t)T * 256, 2e-4, 1e-4);
		sb_sas_lm_logits(x, batch, SB_SAS_LM_SAS, NULL, b, NULL, &err);
		double md = 0;
		for (size_t j = 0; j < (size_t)T * 256; j++)
			md = fmax(md, fabs(a[j] - b[j]));
		SB_CHECK(md > 1e-2, "with the gates it is not (max |diff| %.3g)", md);
		free(a);
		free(b);
	}
	size_t n = sb_sas_lm_n_params(x);
	float *g = malloc(n * sizeof *g), *w0 = malloc(n * sizeof *w0);
	sb_sas_lm_params_get(x, w0);
	double loss;
	sb_sas_lm_grad(x, batch, &loss, g, &err);
	{ /* the same batch as ids (the entry points of a backbone with a tokenizer): the same bits,
	   * logits of each mode, loss and gradient */
		int32_t ids[2 * 33];
		for (int i = 0; i < 2 * (T + 1); i++)
			ids[i] = batch[i];
		float *g2 = malloc(n * sizeof *g2), *a = malloc((size_t)T * 256 * sizeof *a),
		      *b = malloc((size_t)T * 256 * sizeof *b);
		double loss2 = -1;
		int rc = sb_sas_lm_grad_ids(x, ids, &loss2, g2, &err);
		SB_CHECK(!rc && loss2 == loss && !memcmp(g2, g, n * sizeof *g),
			 "ids: the loss and the selector's gradient of the bytes, bit for bit (%.9g vs %.9g; %s)", loss2, loss,
			 rc ? err.msg : "ok");
		int same = 1;
		for (int mo = 0; mo < 2 && same; mo++) {
			enum sb_sas_lm_mode md = mo ? SB_SAS_LM_SAS : SB_SAS_LM_DENSE;
			rc = sb_sas_lm_logits(x, batch, md, NULL, a, NULL, &err) || sb_sas_lm_logits_ids(x, ids, md, NULL, b, NULL, &err);
			same = !rc && !memcmp(a, b, (size_t)T * 256 * sizeof *a);
		}
		SB_CHECK(same, "ids: dense and SAS logits of the bytes, bit for bit");
		ids[7] = 256; /* one past a byte model's vocabulary */
		rc = sb_sas_lm_grad_ids(x, ids, &loss2, NULL, &err);
		SB_CHECK(rc == SB_EDATA && strstr(err.msg, "token id 256 at sequence 0, position 7"),
			 "ids: one outside the vocabulary is refused (%s)", err.msg);
		free(g2);
		free(a);
		free(b);
	}
	/* The selector's inputs are detached (sas_lm.h): layer 0's selector reaches the loss
	 * also through layer 1's selector inputs, a path the gradient leaves out by design
	 * and finite differences do not. So the check is on the last A layer's selector,
	 * whose gradient is complete; the first layer's is compared for the record only. */
	size_t lo = n / 2, hi = n; /* two A layers, equal halves */
	/* every coordinate of the last layer against central differences, absolutely: the top 16
	 * below are checked relatively, but a wrong small coordinate (a write past one matrix's
	 * gradient into the next one's first float, say) hides from those and from the
	 * directional derivative. FD noise here: max 6.1e-6 over the 384 (|g| 0.057); tolerance
	 * 1e-4. */
	{
		double worst = 0, lp, lm;
		size_t at = lo;
		for (size_t i = lo; i < hi; i++) {
			double hh = 1e-2;
			*sb_sas_lm_param(x, i) = (float)(w0[i] + hh);
			sb_sas_lm_grad(x, batch, &lp, NULL, &err);
			*sb_sas_lm_param(x, i) = (float)(w0[i] - hh);
			sb_sas_lm_grad(x, batch, &lm, NULL, &err);
			*sb_sas_lm_param(x, i) = w0[i];
			double e = fabs((lp - lm) / (2 * hh) - g[i]);
			if (e > worst) {
				worst = e;
				at = i;
			}
		}
		SB_CHECK(worst <= 1e-4,
		         "last layer: all %zu selector coordinates vs central FD: max abs error %.3g at %zu (g %.3g; tol "
		         "1e-4)",
		         hi - lo, worst, at, g[at]);
	}
	double gn = 0;
	for (size_t i = lo; i < hi; i++)
		gn += (double)g[i] * g[i];
	gn = sqrt(gn);
	SB_CHECK(gn > 1e-4, "last layer's selector gradient is not trivially small: |g| = %.3g", gn);
	/* directional derivative along g/|g| (last layer) */
	double h = 1e-2, lp, lm;
	for (size_t i = lo; i < hi; i++)
		*sb_sas_lm_param(x, i) = (float)(w0[i] + h * g[i] / gn);
	sb_sas_lm_grad(x, batch, &lp, NULL, &err);
	for (size_t i = lo; i < hi; i++)
		*sb_sas_lm_param(x, i) = (float)(w0[i] - h * g[i] / gn);
	sb_sas_lm_grad(x, batch, &lm, NULL, &err);
	sb_sas_lm_params_set(x, w0);
	double dd = (lp - lm) / (2 * h);
	SB_CHECK(fabs(dd - gn) <= 0.01 * gn, "directional derivative along g: FD %.6g vs |g| %.6g (rel %.2g, tol 0.01)",
	         dd, gn, fabs(dd - gn) / gn);
	/* the 16 largest coordinates of each layer */
	for (int layer = 1; layer >= 0; layer--) {
		size_t a0 = layer ? lo : 0, a1 = layer ? hi : lo;
		int bad = 0;
		double worst = 0;
		for (int r = 0; r < 16; r++) {
			size_t best = a0;
			for (size_t i = a0; i < a1; i++)
				if (fabs(g[i]) > fabs(g[best]))
					best = i;
			double gi = g[best], hh = 1e-2;
			*sb_sas_lm_param(x, best) = (float)(w0[best] + hh);
			sb_sas_lm_grad(x, batch, &lp, NULL, &err);
			*sb_sas_lm_param(x, best) = (float)(w0[best] - hh);
			sb_sas_lm_grad(x, batch, &lm, NULL, &err);
			*sb_sas_lm_param(x, best) = w0[best];
			double fd = (lp - lm) / (2 * hh), rel = fabs(fd - gi) / fabs(gi);
			worst = fmax(worst, rel);
			bad += rel > 0.01;
			g[best] = 0; /* next largest */
		}
		if (layer)
			SB_CHECK(bad == 0,
			         "last layer: 16 largest selector coordinates vs central FD: worst rel error %.3g (tol "
			         "0.01)",
			         worst);
		else
			printf("# first layer (detached inputs, not a check): worst rel difference to FD %.3g\n",
			       worst);
	}
	/* steps: backbone untouched, loss goes down on a fixed batch */
	float *p0 = malloc(m->n_floats * sizeof *p0);
	memcpy(p0, m->p, m->n_floats * sizeof *p0);
	double l0 = 0, l1 = 0, gnorm;
	for (int s = 1; s <= 30; s++) {
		double l;
		sb_sas_lm_step(x, batch, s, 1e-2f, 0.0f, 1.0f, &l, &gnorm, &err);
		if (s == 1)
			l0 = l;
	}
	sb_sas_lm_grad(x, batch, &l1, NULL, &err);
	SB_CHECK(!memcmp(p0, m->p, m->n_floats * sizeof *p0), "selector steps leave the backbone bit-identical");
	SB_CHECK(l1 < l0, "30 selector steps lower the loss on a fixed batch: %.5f -> %.5f", l0, l1);
	free(p0);
	free(g);
	free(w0);
	sb_sas_lm_free(x);
	sb_lm_model_free(m);
}

/* SB_ARENA_CHECK: the selector's matrices each followed by a zone of zero bytes, in its
 * parameters, gradient and moments (lib/sas_lm.c). Three steps give the same losses,
 * gradient norms and parameters as without; a float in a zone of the parameters fails the
 * next step (at its gradient pass) naming the matrix, and the step runs once it is restored. */
static void test_zones(void)
{
	int T = 48;
	struct sb_lm_model *m = decoder("ACA", T, 3.0);
	struct sb_sas_lm_cfg c;
	cfg(&c, 4, 2, "recipe:s=2,w=8,k=8");
	struct sb_sas_lm *x[2] = {NULL, NULL};
	struct sb_err err = {0};
	char *saved = sb_test_env_set("SB_ARENA_CHECK", NULL);
	int rc = sb_sas_lm_new(m, &c, T, 1, &x[0], &err);
	setenv("SB_ARENA_CHECK", "1", 1);
	if (!rc)
		rc = sb_sas_lm_new(m, &c, T, 1, &x[1], &err);
	sb_test_env_restore("SB_ARENA_CHECK", saved);
	if (rc) {
		SB_CHECK(0, "sb_sas_lm_new: %s", err.msg);
		return;
	}
	uint8_t batch[2 * 49];
	tokens(batch, 2 * (T + 1), 11);
	double loss[2][3], gn[2][3];
	for (int k = 0; k < 2 && !rc; k++)
		for (int s = 1; s <= 3 && !rc; s++)
			rc = sb_sas_lm_step(x[k], batch, s, 1e-2f, 0.01f, 1.0f, &loss[k][s - 1], &gn[k][s - 1], &err);
	size_t n = sb_sas_lm_n_params(x[0]);
	float *p0 = malloc(n * sizeof *p0), *p1 = malloc(n * sizeof *p1);
	sb_sas_lm_params_get(x[0], p0);
	sb_sas_lm_params_get(x[1], p1);
	int nz = 0;
	while (sb_sas_lm_zone(x[1], nz))
		nz++;
	SB_CHECK(rc == 0 && !sb_sas_lm_zone(x[0], 0) && nz == 4 && sb_sas_lm_n_params(x[1]) == n &&
	             !memcmp(loss[0], loss[1], sizeof loss[0]) && !memcmp(gn[0], gn[1], sizeof gn[0]) &&
	             !memcmp(p0, p1, n * sizeof *p0),
	         "sas-lm zones: %d for 2 A layers, none without the check; 3 steps give the same losses, gradient "
	         "norms and %zu parameters as without (%s)",
	         nz, n, rc ? err.msg : "ran");
	static const char *const names[4] = {"selector.A0.Sq", "selector.A0.Sk", "selector.A1.Sq", "selector.A1.Sk"};
	for (int i = 0; i < nz && i < 4; i++) {
		unsigned char *z = sb_sas_lm_zone(x[1], i), orig[4], bad[4];
		memcpy(orig, z, 4);
		sb_test_zone_hit(bad, orig, 1);
		memcpy(z, bad, 4);
		struct sb_err e1 = {0}, e2 = {0};
		double l, g;
		int r1 = sb_sas_lm_step(x[1], batch, 4, 1e-2f, 0.01f, 1.0f, &l, &g, &e1);
		memcpy(z, orig, 4);
		int r2 = sb_sas_lm_step(x[1], batch, 5, 1e-2f, 0.01f, 1.0f, &l, &g, &e2);
		char want[96];
		snprintf(want, sizeof want, "-byte tensor %s (the selector's parameters)", names[i]);
		/* (the pass before the update finds it: it checks the parameters' zones too) */
		SB_CHECK(r1 == SB_EINTERNAL && strstr(e1.msg, "after a selector gradient pass: byte ") &&
		             strstr(e1.msg, want) &&
		             r2 == 0,
		         "sas-lm zones: a float in the zone after %s fails the step (rc %d: %s); restored, it runs (rc %d)",
		         names[i], r1, e1.msg, r2);
	}
	free(p0);
	free(p1);
	sb_sas_lm_free(x[0]);
	sb_sas_lm_free(x[1]);
	sb_lm_model_free(m);
}

/* A decoder with sliding-window (S) layers: SAS's hooks see its A layer alone (the S layers
 * run the backend's window op), so dense mode is the training path bit for bit, a mask acts
 * on the A layer only (as on the cached path), and SAS's budget counts the A layer's pairs */
static void test_swa(void)
{
	int T = 48, V = 256;
	struct sb_lm_model *m = decoder_w("SAS", T, 3.0, 6, 0.0f);
	struct sb_sas_lm_cfg c;
	cfg(&c, 4, 2, "recipe:s=2,w=8,k=8");
	struct sb_sas_lm *x = NULL;
	struct sb_err err = {0};
	if (sb_sas_lm_new(m, &c, T, 1, &x, &err)) {
		SB_CHECK(0, "SAS with S layers: sb_sas_lm_new: %s", err.msg);
		sb_lm_model_free(m);
		return;
	}
	uint8_t tok[49];
	tokens(tok, T + 1, 6);
	float *a = malloc((size_t)T * V * sizeof *a), *b = malloc((size_t)T * V * sizeof *b);
	struct sb_lm_trainer *tr = NULL;
	struct sb_lm_train_opts o = {.B = 1, .T = T, .tile = 1, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f};
	int rc = sb_lm_trainer_new(m, &o, &tr, &err);
	rc |= sb_lm_train_logits(tr, tok, a, &err);
	rc |= sb_sas_lm_logits(x, tok, SB_SAS_LM_DENSE, NULL, b, NULL, &err);
	SB_CHECK(!rc && !memcmp(a, b, (size_t)T * V * sizeof *a),
		 "SAS with S layers: dense mode = lm_model's training path, bit for bit (%s)", rc ? err.msg : "ran");
	sb_lm_trainer_free(tr);
	struct sb_lm_mask mk;
	sb_lm_mask_parse("recipe:s=2,w=8,k=8", &mk, &err);
	struct sb_lm_cache *cache = NULL;
	rc = sb_lm_cache_new(m, T, &cache, &err);
	rc |= sb_lm_forward_cached(sb_be_main(be), m, cache, tok, T, &mk, a, 1, NULL, &err);
	rc |= sb_sas_lm_logits(x, tok, SB_SAS_LM_MASK, &mk, b, NULL, &err);
	SB_CHECK(!rc, "SAS with S layers: masked logits (%s)", rc ? err.msg : "ran");
	sb_check_closef("SAS with S layers: recipe mask on the A layer: our kernel vs lm_model's cached path", b, a,
			(size_t)T * V, 2e-4, 1e-4);
	sb_lm_cache_free(cache);
	struct sb_lm_budget bud = {0};
	rc = sb_sas_lm_logits(x, tok, SB_SAS_LM_SAS, NULL, a, &bud, &err);
	SB_CHECK(!rc && bud.causal == 4.0 * T * (T + 1) / 2 && bud.kept > 0 && bud.kept < bud.causal,
		 "SAS with S layers: the budget counts the one A layer's pairs (%.0f of %.0f causal; want %d)", bud.kept,
		 bud.causal, 4 * T * (T + 1) / 2);
	free(a);
	free(b);
	sb_sas_lm_free(x);
	sb_lm_model_free(m);
}

/* SAS's attention backward (the backbone's dq, dk, dv, which carry the gradient to earlier
 * layers' selectors) equals the backbone's own where SAS is dense attention: no gates, every
 * earlier block kept. With and without Gemma 2's soft-capping of the scores (cap 1.5, inside
 * their range), whose factor 1 - tanh^2 both backwards apply. */
static void test_backbone_grad(void)
{
	int T = 32;
	for (int cap = 0; cap < 2; cap++) {
		float softcap = cap ? 1.5f : 0.0f;
		struct sb_lm_model *m = decoder_w("AA", T, 3.0, 0, softcap);
		struct sb_sas_lm_cfg c;
		cfg(&c, 4, 2, "recipe:s=2,w=64,k=8");
		struct sb_sas_lm *x = NULL;
		struct sb_err err = {0};
		if (sb_sas_lm_new(m, &c, T, 3, &x, &err)) {
			SB_CHECK(0, "sb_sas_lm_new: %s", err.msg);
			sb_lm_model_free(m);
			return;
		}
		uint8_t batch[2 * 33];
		tokens(batch, 2 * (T + 1), 12);
		sb_sas_lm_set_gate(x, 0);
		double loss = 0, l2 = 0;
		int rc = sb_sas_lm_grad(x, batch, &loss, NULL, &err);
		const float *gs = sb_sas_lm_backbone_grad(x);
		size_t n = m->n_floats;
		float *gcopy = malloc(n * sizeof *gcopy);
		if (!rc && gs)
			memcpy(gcopy, gs, n * sizeof *gcopy);
		struct sb_lm_trainer *tr = NULL;
		struct sb_lm_train_opts o = {.B = 2, .T = T, .tile = 1, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f};
		float *gd = NULL;
		if (!rc)
			rc = sb_lm_trainer_new(m, &o, &tr, &err);
		if (!rc)
			rc = sb_lm_train_grad(tr, batch, &l2, &gd, &err);
		char nm[160];
		snprintf(nm, sizeof nm,
			 "soft-capping %g: the backbone's gradient through SAS's attention (no gates, every block kept) vs "
			 "the backbone's own (loss %.7g vs %.7g; %s)",
			 (double)softcap, loss, l2, rc ? err.msg : "ran");
		SB_CHECK(!rc && gs && fabs(loss - l2) < 1e-5 * fabs(l2), "%s", nm);
		if (!rc && gs)
			sb_check_closef(nm, gcopy, gd, n, 1e-4, 1e-3);
		free(gcopy);
		sb_lm_trainer_free(tr);
		sb_sas_lm_free(x);
		sb_lm_model_free(m);
	}
}

int main(void)
{
	struct sb_err err = {0};
	if (sb_backend_cpu_open(1, &be, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	test_paths();
	test_swa();
	test_backbone_grad();
	test_grad();
	test_zones();
	sb_backend_close(be);
	return sb_test_done();
}
