/* test_encoder.c — the float engine (CPU backend) against the double reference
 * (ref_encoder.h, itself checked by finite differences in test_encoder_grad.c)
 * for the whole model: logits, loss and every parameter gradient, for each
 * normaliser, both architectures, images and text (margin and exclusion masks),
 * with dropout on (the same masks: the reference draws the batch-level mask, the
 * engine draws it tile by tile with offsets). Also: parameter counts recorded
 * by the study, bit-identical results for 1, 2 and 3 threads, training steps.
 *
 * Tolerances: float32 forward/backward through 2 layers differs from double by
 * rounding only, ~1e-6 relative per op; a gradient tensor passes when every
 * element is within 1e-5 * max|g| (of its tensor) + 1e-6 * max|g| (of the model)
 * + 1e-4 * |g| of the reference (measured worst: ~0.2 of that). A wrong
 * gradient (a missing term, a wrong scale, a mask offset) misses by O(1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "ref_encoder.h"

static uint64_t rs = 99;
static double urand(void)
{
	rs = rs * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(rs >> 11) / 9007199254740992.0;
}

struct fixture {
	struct sb_encoder_cfg cfg;
	int n;
	uint8_t *img;
	int32_t *tok, *len, *lab;
	struct sb_encoder_data data;
};

static void fixture_make(struct fixture *f, int text, int n)
{
	struct sb_encoder_cfg *c = &f->cfg;
	memset(f, 0, sizeof *f);
	c->modality = text ? SB_TEXT : SB_IMAGE;
	c->channels = 3, c->height = 9, c->width = 10, c->patch = 3; /* crop 10 -> 9: 3x3 grid, T = 10 */
	c->seq_len = 9, c->vocab = 23;
	c->classes = 4, c->layers = 2, c->d = 32, c->heads = 2; /* hd 16: the vector attention path */
	c->dropout = 0.1f;
	f->n = n;
	f->img = malloc((size_t)n * 3 * 9 * 10);
	f->tok = malloc((size_t)n * 9 * sizeof *f->tok);
	f->len = malloc((size_t)n * sizeof *f->len);
	f->lab = malloc((size_t)n * sizeof *f->lab);
	for (int i = 0; i < n * 270; i++)
		f->img[i] = (uint8_t)(urand() * 256);
	for (int i = 0; i < n; i++) {
		f->len[i] = i % 7 == 3 ? 0 : (int)(urand() * 10); /* some empty texts: n_valid = 1 */
		f->lab[i] = (int)(urand() * 4);
		for (int t = 0; t < 9; t++)
			f->tok[i * 9 + t] = t < f->len[i] ? 1 + (int)(urand() * 22) : 0;
	}
	f->data.n = n;
	f->data.images = f->img;
	f->data.tokens = f->tok;
	f->data.len = f->len;
	f->data.labels = f->lab;
}

static void fixture_free(struct fixture *f)
{
	free(f->img);
	free(f->tok);
	free(f->len);
	free(f->lab);
}

static void perturb_params(struct sb_encoder *m)
{
	/* move LN weights, alpha_raw and the mixer off their symmetric initial values */
	for (int t = 0; t < m->ntensors; t++) {
		const struct sb_param_info *q = &m->pinfo[t];
		if (q->init == SB_INIT_CONST)
			for (size_t e = 0; e < q->numel; e++)
				m->params[q->offset + e] += (float)(0.2 * (urand() - 0.5));
	}
}

static void compare_case(const char *label, int text, const char *method, const char *arch, enum sb_mask_mode mask,
                         float dropout)
{
	struct fixture f;
	fixture_make(&f, text, 40);
	struct sb_err e = {0};
	struct sb_backend *be = NULL;
	sb_backend_open("cpu", 2, &be, &e);
	sb_norm_parse(method, 1.5, &f.cfg.norm, &e);
	f.cfg.norm.mask = mask;
	sb_encoder_arch_parse(arch, &f.cfg.arch);
	struct sb_encoder *m = NULL;
	if (sb_encoder_new(&f.cfg, be, 32, &m, &e)) {
		SB_CHECK(0, "%s: %s", label, e.msg);
		return;
	}
	sb_encoder_init(m, 5, &e);
	perturb_params(m);
	int B = 20; /* three tiles of 8, 8, 4 in three slots */
	uint32_t idx[20];
	for (int i = 0; i < B; i++)
		idx[i] = (uint32_t)((i * 7 + 3) % f.n);
	struct sb_step_opts o;
	sb_step_opts_default(&o);
	o.dropout = dropout;
	o.seed = 17;
	o.step = 5;
	struct sb_step_result res;
	int rc = sb_encoder_forward_backward(m, &f.data, idx, B, &o, &res, &e);
	SB_CHECK(rc == 0, "%s: engine forward/backward (%s)", label, rc ? e.msg : "ok");
	/* reference in double from the same float parameters */
	double *pd = ref_alloc(m->pstride), *gd = ref_alloc(m->pstride);
	for (size_t i = 0; i < m->pstride; i++)
		pd[i] = m->params[i];
	struct ref_input in = {B, f.img, f.tok, f.len, f.lab, idx, dropout, 17, 5, NULL};
	struct ref_cache cache;
	int rrc;
	double loss = ref_forward(m, pd, &in, &cache, &rrc);
	ref_backward(m, pd, &in, &cache, gd);
	char nm[256];
	snprintf(nm, sizeof nm, "%s: loss (engine %.9g, reference %.12g)", label, res.loss, loss);
	sb_check_close(nm, &res.loss, &loss, 1, 0, 2e-6);
	/* logits in evaluation mode (no dropout) */
	if (dropout == 0) {
		float *lg = malloc((size_t)B * f.cfg.classes * sizeof *lg);
		double *lgd = malloc((size_t)B * f.cfg.classes * sizeof *lgd);
		sb_encoder_forward(m, &f.data, idx, B, lg, NULL, NULL, NULL, &e);
		for (int i = 0; i < B * f.cfg.classes; i++)
			lgd[i] = lg[i];
		snprintf(nm, sizeof nm, "%s: logits", label);
		sb_check_close(nm, lgd, cache.logits, (size_t)B * f.cfg.classes, 2e-5, 2e-5);
		free(lg);
		free(lgd);
	}
	ref_cache_free(&cache);
	double worst = 0, gmax = 0;
	int bad = 0;
	for (size_t i = 0; i < m->pstride; i++)
		gmax = fmax(gmax, fabs(gd[i]));
	for (int t = 0; t < m->ntensors; t++) {
		const struct sb_param_info *q = &m->pinfo[t];
		double amax = 0, err = 0;
		for (size_t i = 0; i < q->numel; i++)
			amax = fmax(amax, fabs(gd[q->offset + i]));
		for (size_t i = 0; i < q->numel; i++) {
			double d = fabs(m->grads[q->offset + i] - gd[q->offset + i]);
			double tol = 1e-5 * amax + 1e-6 * gmax + 1e-4 * fabs(gd[q->offset + i]);
			err = fmax(err, d / tol);
			if (d > tol) {
				if (bad < 5)
					printf("#   %s %s[%zu]: engine %.9g reference %.9g\n", label, q->name, i,
					       m->grads[q->offset + i], gd[q->offset + i]);
				bad++;
			}
		}
		worst = fmax(worst, err);
	}
	double *ge = ref_alloc(m->pstride);
	for (size_t i = 0; i < m->pstride; i++)
		ge[i] = m->grads[i];
	double num = 0, den = 0;
	for (size_t i = 0; i < m->pstride; i++) {
		num += (ge[i] - gd[i]) * (ge[i] - gd[i]);
		den += gd[i] * gd[i];
	}
	SB_CHECK(bad == 0,
	         "%s: all %zu gradients within 1e-5 max|g_tensor| + 1e-6 max|g| + 1e-4 |g| of the reference (worst at "
	         "%.3g of its tolerance; NMSE %.2e)",
	         label, m->nparams, worst, den > 0 ? num / den : num);
	free(ge);
	free(pd);
	free(gd);
	sb_encoder_free(m);
	sb_backend_close(be);
	fixture_free(&f);
}

static size_t count_params(int C, int H, int W, int p, int classes, const char *method, const char *tier,
                           const char *arch)
{
	struct sb_err e = {0};
	struct sb_backend *be = NULL;
	sb_backend_open("cpu", 1, &be, &e);
	struct sb_encoder_cfg c = {0};
	c.modality = SB_IMAGE;
	c.channels = C, c.height = H, c.width = W, c.patch = p, c.classes = classes;
	sb_encoder_tier(tier, &c.layers, &c.d, &c.heads);
	sb_encoder_arch_parse(arch, &c.arch);
	sb_norm_parse(method, 1.5, &c.norm, &e);
	struct sb_encoder *m = NULL;
	size_t n = 0;
	if (!sb_encoder_new(&c, be, 8, &m, &e))
		n = sb_encoder_param_count(m);
	sb_encoder_free(m);
	sb_backend_close(be);
	return n;
}

static void test_param_counts(void)
{
	size_t n;
	n = count_params(3, 32, 32, 4, 10, "softmax", "compact", "plain");
	SB_CHECK(n == 107978, "CIFAR-10 compact parameter count %zu (study: 107,978)", n);
	n = count_params(1, 16, 16, 2, 10, "softmax", "compact", "plain");
	SB_CHECK(n == 105162, "USPS compact parameter count %zu (study: 105,162)", n);
	n = count_params(3, 32, 32, 4, 10, "headwise_adaptive_entmax", "compact", "plain");
	SB_CHECK(n == 107978 + 8, "CIFAR-10 compact HAE parameter count %zu (study: +8 = 107,986)", n);
	n = count_params(1, 16, 16, 2, 10, "headwise_adaptive_entmax", "compact", "plain");
	SB_CHECK(n == 105162 + 8, "USPS compact HAE parameter count %zu (study: +8 = 105,170)", n);
	n = count_params(1, 28, 28, 4, 10, "softmax", "compact", "plain");
	SB_CHECK(n == 105162 - 320 + (16 * 64 + 64) - 65 * 64 + 50 * 64, "Fashion-MNIST compact parameter count %zu",
	         n);
	/* local_hybrid adds per layer LN (2d), conv 9d + d, scale 1 */
	n = count_params(3, 32, 32, 4, 10, "softmax", "compact", "local_hybrid");
	SB_CHECK(n == 107978 + 2 * (2 * 64 + 9 * 64 + 64 + 1), "CIFAR-10 compact local_hybrid parameter count %zu", n);
}

/* the same step with 1, 2 and 3 threads gives the same bits */
static void test_threads(void)
{
	struct fixture f;
	fixture_make(&f, 0, 300);
	struct sb_err e = {0};
	sb_norm_parse("sparsemax", 1.5, &f.cfg.norm, &e);
	float *ref = NULL;
	size_t np = 0;
	double ref_loss = 0;
	for (int th = 1; th <= 3; th++) {
		struct sb_backend *be = NULL;
		sb_backend_open("cpu", th, &be, &e);
		struct sb_encoder *m = NULL;
		sb_encoder_new(&f.cfg, be, 256, &m, &e);
		sb_encoder_init(m, 3, &e);
		uint32_t idx[250];
		for (int i = 0; i < 250; i++)
			idx[i] = (uint32_t)((i * 37) % 300);
		struct sb_step_opts o;
		sb_step_opts_default(&o);
		o.seed = 3;
		struct sb_step_result r;
		double l = 0;
		for (int s = 0; s < 3; s++) {
			o.step = s;
			sb_encoder_train_step(m, &f.data, idx + 10 * s, 240 - 40 * s, &o, &r, &e);
			l += r.loss;
		}
		if (th == 1) {
			np = m->pstride;
			ref = malloc(np * 2 * sizeof *ref);
			memcpy(ref, m->params, np * sizeof *ref);
			memcpy(ref + np, m->grads, np * sizeof *ref);
			ref_loss = l;
		} else {
			SB_CHECK(!memcmp(ref, m->params, np * sizeof *ref) &&
			             !memcmp(ref + np, m->grads, np * sizeof *ref) && l == ref_loss,
			         "3 training steps with %d threads: parameters, gradients and losses bit-identical to "
			         "1 thread",
			         th);
		}
		sb_encoder_free(m);
		sb_backend_close(be);
	}
	free(ref);
	fixture_free(&f);
}

/* a device error while sb_encoder_evaluate downloads HAE's alphas (its last download) is an
 * error of the evaluation, not alpha statistics read from an unwritten buffer */
static const struct sb_backend_ops *real_ops;
static int downloads, fail_at;
static int failing_download(struct sb_backend *be, void *dst, const void *src, size_t n, struct sb_err *err)
{
	if (++downloads == fail_at)
		return SB_ERR(err, SB_EINTERNAL, "injected download failure");
	return real_ops->download(be, dst, src, n, err);
}

static void test_alpha_download_error(void)
{
	if (getenv("SB_ARENA_CHECK")) /* its count of downloads would include the red zones' */
		return;
	struct fixture f;
	fixture_make(&f, 1, 12);
	struct sb_err e = {0};
	sb_norm_parse("headwise_adaptive_entmax", 1.5, &f.cfg.norm, &e);
	struct sb_backend *be = NULL;
	struct sb_encoder *m = NULL;
	sb_backend_open("cpu", 1, &be, &e);
	sb_encoder_new(&f.cfg, be, 4, &m, &e);
	sb_encoder_init(m, 5, &e);
	uint32_t idx[12];
	for (int i = 0; i < 12; i++)
		idx[i] = (uint32_t)i;
	struct sb_backend_ops ops = *be->ops;
	real_ops = be->ops;
	ops.download = failing_download;
	be->ops = &ops;
	struct sb_eval_result r;
	downloads = 0, fail_at = -1;
	int ok_rc = sb_encoder_evaluate(m, &f.data, idx, 12, 4, &r, NULL, &e);
	int n_dl = downloads;
	downloads = 0, fail_at = n_dl; /* the last: the alphas */
	struct sb_err e2 = {0};
	int rc = sb_encoder_evaluate(m, &f.data, idx, 12, 4, &r, NULL, &e2);
	be->ops = real_ops;
	SB_CHECK(ok_rc == 0 && rc != 0 && strstr(e2.msg, "injected download failure"),
	         "a failed alpha download fails the evaluation (rc %d after %d downloads: %s), not alpha_mean %g",
	         rc, n_dl, e2.msg, r.alpha_mean);
	sb_encoder_free(m);
	sb_backend_close(be);
	fixture_free(&f);
}

/* The parameter table's zones (sb_encoder_param_zone): none without the check; one per
 * tensor with it, zero, in the parameters, gradients, both moments and each gradient slot
 * (the dense tensors' only); a float written in one (at the first, a middle and the last
 * tensor's zone) fails the next pass naming the tensor and the buffer, and no longer once
 * restored. m0 was made without the check, m1 with it. */
static void param_zone_cases(struct sb_encoder *m0, struct sb_encoder *m1, struct sb_backend *be,
                             struct fixture *f, const uint32_t *idx)
{
	int nt = m1->ntensors, dense = m1->pzones_dense;
	int nzone = 0;
	while (sb_encoder_param_zone(m1, m1->params, nzone))
		nzone++;
	int nslot = 0;
	if (m1->slots != m1->grads)
		while (sb_encoder_param_zone(m1, m1->slots + m1->dstride, nslot))
			nslot++;
	/* text: the token table is the last tensor, outside the slots */
	SB_CHECK(!sb_encoder_param_zone(m0, m0->params, 0) && nzone == nt && dense == nt - 1 &&
	             m1->nslots_max > 1 && nslot == dense,
	         "arena check: no parameter zones without SB_ARENA_CHECK; with it one per tensor (%d of %d) in the "
	         "parameters, %d in each of the %d gradient slots (the dense tensors': %d)",
	         nzone, nt, nslot, m1->nslots_max, dense);
	struct {
		float *base;
		const char *name;
		int n;
	} buf[] = {{m1->params, "(the parameters)", nt},
	           {m1->grads, "(the gradients)", nt},
	           {m1->m, "(the first moments)", nt},
	           {m1->v, "(the second moments)", nt},
	           {m1->slots + m1->dstride, "(gradient slot 1)", dense}};
	for (size_t k = 0; k < sizeof buf / sizeof buf[0]; k++) {
		int at[3] = {0, buf[k].n / 2, buf[k].n - 1};
		for (int j = 0; j < 3; j++) {
			char *z = sb_encoder_param_zone(m1, buf[k].base, at[j]);
			struct sb_err e1 = {0}, e2 = {0};
			float orig = 0, bad = 1.0f / 1024; /* a small gradient's worth, as a kernel one too far adds */
			if (!z) {
				SB_CHECK(0, "arena check: zone %d of %s", at[j], buf[k].name);
				continue;
			}
			be->ops->download(be, &orig, z + 4, 4, &e1);
			be->ops->upload(be, z + 4, &bad, 4, &e1);
			int rc = sb_encoder_forward(m1, &f->data, idx, 24, NULL, NULL, NULL, NULL, &e1);
			be->ops->upload(be, z + 4, &orig, 4, &e2);
			int rc2 = sb_encoder_forward(m1, &f->data, idx, 24, NULL, NULL, NULL, NULL, &e2);
			char want[160];
			/* 1/1024 = 0x3A800000: its first nonzero byte is the third */
			snprintf(want, sizeof want, "after a forward pass: byte 6 past the end of the %zu-byte tensor %s %s",
			         m1->pinfo[at[j]].numel * sizeof(float), m1->pinfo[at[j]].name, buf[k].name);
			SB_CHECK(rc == SB_EINTERNAL && strstr(e1.msg, want) && orig == 0.0f && rc2 == 0,
			         "arena check: a float written after tensor %d (%s) in %s is reported (rc %d: %s), and no "
			         "longer once restored (rc %d)",
			         at[j], m1->pinfo[at[j]].name, buf[k].name, rc, e1.msg, rc2);
		}
	}
}

/* The zones make the parameter table longer, and the CPU sums the gradient's squares in
 * chunks of 32768 floats, whose ends they would move (so would CUDA's grid): the norm is
 * taken in the layout without the zones (encoder.c's norm_src), so that clipping, and the
 * norm, are the same bits. Here 3 layers of d 48: the table is over 32768 floats. */
static void test_arena_norm(void)
{
	struct fixture f;
	fixture_make(&f, 1, 40);
	f.cfg.layers = 3;
	f.cfg.d = 48;
	f.cfg.heads = 3;
	struct sb_err e = {0};
	struct sb_backend *be = NULL;
	sb_backend_open("cpu", 2, &be, &e);
	sb_norm_parse("entmax15", 1.5, &f.cfg.norm, &e);
	char *saved = sb_test_env_set("SB_ARENA_CHECK", NULL);
	struct sb_encoder *m[2] = {NULL, NULL};
	int rc = sb_encoder_new(&f.cfg, be, 32, &m[0], &e);
	setenv("SB_ARENA_CHECK", "1", 1);
	rc |= sb_encoder_new(&f.cfg, be, 32, &m[1], &e);
	sb_test_env_restore("SB_ARENA_CHECK", saved);
	if (SB_CHECK(!rc, "arena norm: two models (%s)", e.msg)) {
		uint32_t idx[24];
		for (int i = 0; i < 24; i++)
			idx[i] = (uint32_t)((i * 5 + 1) % f.n);
		struct sb_step_opts o;
		sb_step_opts_default(&o);
		o.clip = 0.5f; /* clipped at every step */
		double gn[2][3];
		int bad = 0, clipped = 0;
		for (int k = 0; k < 2; k++) {
			sb_encoder_init(m[k], 9, &e);
			struct sb_step_result r;
			for (int s = 0; s < 3; s++) {
				o.step = s;
				bad |= sb_encoder_train_step(m[k], &f.data, idx, 24, &o, &r, &e) != 0;
				gn[k][s] = r.grad_norm;
				clipped += r.clipped;
			}
		}
		int same = 1;
		for (int i = 0; i < m[0]->ntensors; i++)
			same &= !memcmp(m[0]->params + m[0]->pinfo[i].offset, m[1]->params + m[1]->pinfo[i].offset,
			                m[0]->pinfo[i].numel * sizeof(float));
		SB_CHECK(!bad && m[0]->pstride > 32768 && m[1]->pstride > m[0]->pstride && !memcmp(gn[0], gn[1], sizeof gn[0]) &&
		             same && clipped == 6,
		         "arena norm: a table of %zu floats (%zu with the zones), clipped at %d of 6 steps: the same "
		         "gradient norms (%.17g, %.17g, %.17g) and parameters with the zones as without (%s)",
		         m[0]->pstride, m[1]->pstride, clipped, gn[1][0], gn[1][1], gn[1][2], bad ? e.msg : "ran");
	}
	sb_encoder_free(m[0]);
	sb_encoder_free(m[1]);
	sb_backend_close(be);
	fixture_free(&f);
}

/* SB_ARENA_CHECK: red zones after the activation buffers of each worker's arena. Without
 * the variable there are none; with it, training steps and passes give the same bits; a
 * byte written into a zone (as a kernel running past a buffer's end would) fails the next
 * pass, naming the buffer and the worker, and the pass succeeds again once it is restored. */
static void test_arena_check(void)
{
	struct fixture f;
	fixture_make(&f, 1, 40);
	struct sb_err e = {0};
	struct sb_backend *be = NULL;
	sb_backend_open("cpu", 2, &be, &e);
	sb_norm_parse("sparsemax", 1.5, &f.cfg.norm, &e);
	f.cfg.arch = SB_ARCH_LOCAL_HYBRID;
	char *saved = sb_test_env_set("SB_ARENA_CHECK", NULL);
	struct sb_encoder *m[2] = {NULL, NULL};
	int rc0 = sb_encoder_new(&f.cfg, be, 32, &m[0], &e);
	setenv("SB_ARENA_CHECK", "1", 1);
	int rc1 = sb_encoder_new(&f.cfg, be, 32, &m[1], &e);
	sb_test_env_restore("SB_ARENA_CHECK", saved);
	SB_CHECK(rc0 == 0 && rc1 == 0, "arena check: two models (%s)", e.msg);
	if (rc0 || rc1)
		return;
	int nz[2] = {0, 0};
	for (int w = 0; w < 2; w++)
		while (sb_encoder_arena_zone(m[1], w, nz[w]))
			nz[w]++;
	/* text, local_hybrid, 2 layers: 9 buffers before the layers, 23 per layer, 10 after */
	SB_CHECK(!sb_encoder_arena_zone(m[0], 0, 0) && nz[0] == 65 && nz[1] == 65,
	         "arena check: no red zones without SB_ARENA_CHECK, 65 per worker with it (%d, %d)", nz[0], nz[1]);
	uint32_t idx[24];
	for (int i = 0; i < 24; i++)
		idx[i] = (uint32_t)((i * 7 + 3) % f.n);
	struct sb_step_opts o;
	sb_step_opts_default(&o);
	o.dropout = 0.1f;
	o.seed = 17;
	float lg[2][24 * 4];
	double gn[2][3];
	int bad = 0;
	for (int k = 0; k < 2; k++) {
		sb_encoder_init(m[k], 5, &e);
		struct sb_step_result r;
		for (int s = 0; s < 3; s++) {
			o.step = s;
			bad |= sb_encoder_train_step(m[k], &f.data, idx, 24 - 4 * s, &o, &r, &e) != 0;
			gn[k][s] = r.grad_norm;
		}
		bad |= sb_encoder_forward_backward(m[k], &f.data, idx, 24, &o, &r, &e) != 0;
		bad |= sb_encoder_forward(m[k], &f.data, idx, 24, lg[k], NULL, NULL, NULL, &e) != 0;
	}
	/* tensor by tensor: with the check each is followed by its zone, so offsets differ */
	int same = m[0]->ntensors == m[1]->ntensors, moved = 0;
	for (int i = 0; same && i < m[0]->ntensors; i++) {
		const struct sb_param_info *q0 = &m[0]->pinfo[i], *q1 = &m[1]->pinfo[i];
		size_t nb = q0->numel * sizeof(float);
		moved += q0->offset != q1->offset;
		same = q0->numel == q1->numel && !memcmp(m[0]->params + q0->offset, m[1]->params + q1->offset, nb) &&
		       !memcmp(m[0]->grads + q0->offset, m[1]->grads + q1->offset, nb) &&
		       !memcmp(m[0]->m + q0->offset, m[1]->m + q1->offset, nb) &&
		       !memcmp(m[0]->v + q0->offset, m[1]->v + q1->offset, nb);
	}
	SB_CHECK(!bad && same && moved == m[0]->ntensors - 1 && !memcmp(lg[0], lg[1], sizeof lg[0]) &&
	             !memcmp(gn[0], gn[1], sizeof gn[0]),
	         "arena check: three steps, a forward/backward pass and a forward pass give the same parameters, "
	         "gradients, moments, gradient norms and logits with red zones as without (%s; %d of %d tensors moved by the "
	         "parameter zones)",
	         bad ? e.msg : "ran", moved, m[0]->ntensors);
	param_zone_cases(m[0], m[1], be, &f, idx);
	for (int w = 0; w < 2; w++) {
		int at[3] = {0, nz[w] / 2, nz[w] - 1};
		for (int j = 0; j < 3; j++) {
			/* a byte changed at the zone's start; then, at its first 4-byte-aligned offset,
			 * a float updated in place (x += 1, as a kernel adding a bias one element too
			 * far would: the zone must not be a pattern that such an update keeps) */
			for (int kind = 0; kind < 2; kind++) {
				char *z = sb_encoder_arena_zone(m[1], w, at[j]);
				size_t skip = kind ? (size_t)(-(uintptr_t)z & 3) : 0;
				struct sb_err e1 = {0}, e2 = {0};
				unsigned char orig[4], bad[4];
				be->ops->download(be, orig, z + skip, 4, &e1);
				sb_test_zone_hit(bad, orig, kind);
				be->ops->upload(be, z + skip, bad, 4, &e1);
				int rc = sb_encoder_forward(m[1], &f.data, idx, 24, NULL, NULL, NULL, NULL, &e1);
				be->ops->upload(be, z + skip, orig, 4, &e2);
				int rc2 = sb_encoder_forward(m[1], &f.data, idx, 24, NULL, NULL, NULL, NULL, &e2);
				char want[80];
				/* the first byte that differs: x += 1 makes the signalling NaN quiet (bit 22) */
				snprintf(want, sizeof want, "after a forward pass: byte %zu past the end of the ",
				         skip + (kind ? 2 : 0));
				char wk[40];
				snprintf(wk, sizeof wk, "(worker %d's arena)", w);
				SB_CHECK(rc == SB_EINTERNAL && strstr(e1.msg, want) &&
				             strstr(e1.msg, "-byte buffer of lib/encoder.c:") && strstr(e1.msg, wk) &&
				             memcmp(orig, bad, 4) && rc2 == 0,
				         "arena check: %s zone %d of worker %d is reported (rc %d: %s), and no longer once "
				         "restored (rc %d)",
				         kind ? "a float updated in place (+= 1) in" : "a byte changed in", at[j], w, rc, e1.msg,
				         rc2);
			}
		}
	}
	sb_encoder_free(m[0]);
	sb_encoder_free(m[1]);
	sb_backend_close(be);
	fixture_free(&f);
}

int main(void)
{
	test_param_counts();
	test_arena_check();
	test_arena_norm();
	test_alpha_download_error();
	static const char *methods[] = {"softmax",         "topk_softmax_0125",       "topk_softmax_025",
	                                "topk_softmax_05", "bottomk_softmax_025",     "sparsemax",
	                                "entmax15",        "headwise_adaptive_entmax"};
	for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
		char lab[160];
		snprintf(lab, sizeof lab, "image plain %s", methods[i]);
		compare_case(lab, 0, methods[i], "plain", SB_MASK_MARGIN, 0.0f);
		snprintf(lab, sizeof lab, "image local_hybrid %s dropout", methods[i]);
		compare_case(lab, 0, methods[i], "local_hybrid", SB_MASK_MARGIN, 0.1f);
		if (strncmp(methods[i], "bottomk", 7)) {
			snprintf(lab, sizeof lab, "text plain %s margin dropout", methods[i]);
			compare_case(lab, 1, methods[i], "plain", SB_MASK_MARGIN, 0.1f);
			snprintf(lab, sizeof lab, "text local_hybrid %s exclude", methods[i]);
			compare_case(lab, 1, methods[i], "local_hybrid", SB_MASK_EXCLUDE, 0.0f);
		}
	}
	test_threads();
	return sb_test_done();
}
