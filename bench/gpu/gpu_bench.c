/* gpu_bench — training throughput (samples/s) of the compact Fashion-MNIST cell
 * (PROTOCOL A2 compact tier, patch 4 -> 50 tokens, batch 256, dropout 0.1,
 * AdamW, clipping at 5): one cell per method (recorded steps, i.e. CUDA graphs,
 * and op by op), then many cells at once (the methods x seeds of a grid row)
 * through train/multicell.c, then a per-op profile of one step.
 *
 *   gpu_bench --make-data PATH          write a synthetic dataset of Fashion-MNIST's shape
 *   gpu_bench [--device D] [--data PATH | --shape fmnist|cifar|text] [--steps S] [--warmup W]
 *             [--single] [--plain] [--multi SEEDS] [--profile METHODS]
 *
 * Steps are queued as sb-train queues them (sb_encoder_step, the loss read once at
 * the end). --single times every method twice, recorded and op by op (--plain: op
 * by op only). --profile runs one step of each named method (comma-separated) with
 * every op repeated R times between two waits: device time per op call.
 * Without --data the examples are synthetic (60000 x 1 x 28 x 28 u8, 10 classes):
 * throughput does not depend on the pixel values. --shape cifar (50000 x 3 x 32 x 32,
 * patch 4: 65 tokens) and --shape text (20000 x 96 tokens, vocabulary 20000: 97 tokens)
 * measure the other task families' shapes, for the study projection (bench/gpu/summary.py);
 * every record carries "shape". Output: one NDJSON record per
 * measurement on stdout ("kind": "bench.single" / "bench.multi" / "bench.profile"),
 * progress on stderr.
 */
#include <pthread.h>

#include "../../tests/gpu/gpu_common.h"
#include "../../tests/gpu/train_common.h"
#include "../../train/multicell.h"
#include "tensor.h"

static const char *METHODS[] = {"softmax",   "topk_softmax_0125", "topk_softmax_025",        "topk_softmax_05",
				"sparsemax", "entmax15",          "headwise_adaptive_entmax"};
enum { NMETH = 7, BATCH = 256 };
static int STEPS = 40, WARMUP = 5;

/* the hardware work queues the cells' streams share: CUDA_DEVICE_MAX_CONNECTIONS as the
 * driver read it (the CUDA backend sets 32 unless the environment chose; 8 is the
 * driver's own default; 0 on the CPU) */
static int connections(const char *device)
{
	if (strncmp(device, "cuda", 4))
		return 0; /* no queues on the CPU */
	const char *e = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
	return e && *e ? atoi(e) : 8;
}

/* a barrier that gives up after a while (a cell that never arrives must not hang the run) */
struct tbar {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int need, have;
};
static void tbar_wait(struct tbar *b)
{
	pthread_mutex_lock(&b->mu);
	if (++b->have >= b->need)
		pthread_cond_broadcast(&b->cv);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 120;
	while (b->have < b->need)
		if (pthread_cond_timedwait(&b->cv, &b->mu, &ts))
			break;
	pthread_mutex_unlock(&b->mu);
}

struct cellarg {
	const struct sb_dataset *ds;
	const char *method;
	uint64_t seed;
	int graphs;       /* record steps where the backend can */
	struct tbar *bar; /* multi: all cells start timing together */
	double t_start, t_end;
	double last_loss;
	int64_t replayed, issued;
	char note[200];
	int rc;
};

static int cell_fn(struct sb_backend *be, struct sb_mc_cell *cell, struct sb_err *err)
{
	struct cellarg *a = cell->arg;
	struct sb_norm nm;
	struct sb_encoder_cfg cfg;
	struct sb_encoder *m = NULL;
	struct sb_encoder_data data;
	int rc = sb_norm_parse(a->method, 1.5, &nm, err);
	if (!rc)
		rc = sb_encoder_cfg_from_dataset(&cfg, a->ds, "compact", "plain", &nm, err);
	if (!rc)
		rc = sb_encoder_new(&cfg, be, BATCH, &m, err);
	if (!rc)
		rc = sb_encoder_init(m, a->seed, err);
	int have_data = 0;
	if (!rc)
		have_data = !(rc = sb_encoder_data_open(be, a->ds, &data, err));
	uint32_t *perm = malloc((size_t)a->ds->n * 4);
	struct sb_rng r;
	sb_rng_init(&r, a->seed, SB_RNG_SHUFFLE, 0);
	sb_rng_permutation(&r, perm, (size_t)a->ds->n);
	struct sb_step_opts o;
	sb_step_opts_default(&o);
	o.seed = a->seed;
	if (m)
		m->use_graphs = a->graphs;
	int64_t nb = a->ds->n / BATCH;
	struct sb_step_acc acc;
	for (int s = 0; !rc && s < WARMUP; s++) {
		o.step = s;
		rc = sb_encoder_step(m, &data, perm + (s % nb) * BATCH, BATCH, &o, NULL, err);
	}
	if (!rc) /* the warm-up's work is done before the clock starts */
		rc = sb_encoder_acc_read(m, &acc, 1, err);
	if (a->bar)
		tbar_wait(a->bar);
	a->t_start = g_now();
	for (int s = WARMUP; !rc && s < WARMUP + STEPS; s++) {
		o.step = s;
		rc = sb_encoder_step(m, &data, perm + (s % nb) * BATCH, BATCH, &o, NULL, err);
	}
	if (!rc) /* as sb-train: the losses are read once, at the end */
		rc = sb_encoder_acc_read(m, &acc, 0, err);
	a->t_end = g_now();
	if (!rc)
		a->last_loss = acc.last_loss;
	if (m) {
		a->replayed = m->steps_replayed;
		a->issued = m->steps_issued;
		snprintf(a->note, sizeof a->note, "%s", m->graph_note);
	}
	free(perm);
	if (have_data)
		sb_encoder_data_close(be, &data);
	sb_encoder_free(m);
	return a->rc = rc;
}

static int make_data(const char *path)
{
	struct sb_dataset ds;
	synth_dataset(&ds, 0, 60000, 2026);
	struct sb_tensors ts;
	struct sb_err err = {0};
	sb_tensors_init(&ts);
	int64_t sx[4] = {60000, 1, 28, 28}, sy[1] = {60000};
	int rc = sb_tensors_add(&ts, "x", SB_U8, 4, sx, ds.x_u8, 1, &err);
	if (!rc)
		rc = sb_tensors_add(&ts, "y", SB_I32, 1, sy, ds.y, 1, &err);
	const char *kv[][2] = {{"format", "sparsebench.dataset"}, {"format_version", "1"}, {"task", "fashion_mnist"},
			       {"split", "pool"},    {"modality", "image"},          {"classes", "10"},
			       {"patch", "4"},       {"presplit", "0"},              {"registry_version", "0"},
			       {"sources", "[]"},
			       {"generator", "{\"name\":\"gpu_bench synthetic: random pixels of Fashion-MNIST's shape (throughput only)\"}"},
			       {"license", "synthetic"}};
	for (size_t i = 0; !rc && i < sizeof kv / sizeof kv[0]; i++)
		rc = sb_tensors_set_meta(&ts, kv[i][0], kv[i][1], &err);
	if (!rc)
		rc = sb_st_write(path, &ts, &err);
	if (rc)
		fprintf(stderr, "gpu_bench: %s\n", err.msg);
	else
		fprintf(stderr, "gpu_bench: wrote %s (synthetic, 60000 x 1 x 28 x 28 u8, 10 classes, patch 4)\n", path);
	sb_tensors_free(&ts);
	synth_free(&ds);
	return rc ? 4 : 0;
}

/* ---------------------------------------------------------------- per-op profile
 * One step with every op of the backend called PROF_R times in a row between two
 * waits for the device: (elapsed - the cost of the waits) / PROF_R is the op's device
 * time per call when the device is the bottleneck (launches overlap the previous
 * call's execution). Ops that accumulate (+=) then hold garbage: the model is thrown
 * away after the profiled step. */
#define PROF_MAX 160
#define PROF_R 20
struct prof_ent {
	char key[112];
	int calls;
	double sec; /* per call, summed over calls */
};
static struct prof_ent PROF[PROF_MAX];
static int NPROF;
static const struct sb_backend_ops *REAL;
static struct sb_backend_ops PROF_OPS;
static struct sb_backend *PBE;
static float *PSYNC;
static double PROF_WAIT; /* seconds of one wait (the one inside each timed region) */

static void psync(void)
{
	float t;
	struct sb_err e = {0};
	REAL->download(PBE, &t, PSYNC, 4, &e);
}

static void prof_add(const char *key, double sec)
{
	int i;
	for (i = 0; i < NPROF; i++)
		if (!strcmp(PROF[i].key, key))
			break;
	if (i == NPROF) {
		if (NPROF == PROF_MAX)
			return;
		snprintf(PROF[NPROF].key, sizeof PROF[NPROF].key, "%s", key);
		NPROF++;
	}
	PROF[i].calls++;
	PROF[i].sec += sec;
}

#define TIMED(call, ...)                                                                                           \
	do {                                                                                                       \
		char k_[112];                                                                                      \
		snprintf(k_, sizeof k_, __VA_ARGS__);                                                              \
		psync();                                                                                           \
		double t0_ = g_now();                                                                              \
		for (int r_ = 0; r_ < PROF_R; r_++) {                                                              \
			call;                                                                                      \
		}                                                                                                  \
		psync();                                                                                           \
		double dt_ = (g_now() - t0_ - PROF_WAIT) / PROF_R;                                                 \
		prof_add(k_, dt_ > 0 ? dt_ : 0);                                                                   \
	} while (0)

static void p_patchify(struct sb_ctx *c, float *o, const uint8_t *im, const uint32_t *ix, int B, int Ch, int H, int W,
		       int p)
{
	TIMED(REAL->patchify(c, o, im, ix, B, Ch, H, W, p), "patchify B=%d %dx%dx%d p=%d", B, Ch, H, W, p);
}
static void p_gather_tokens(struct sb_ctx *c, int32_t *ids, int32_t *nv, const int32_t *t, const int32_t *l,
			    const uint32_t *ix, int B, int L)
{
	TIMED(REAL->gather_tokens(c, ids, nv, t, l, ix, B, L), "gather_tokens B=%d L=%d", B, L);
}
static void p_gather_i32(struct sb_ctx *c, int32_t *o, const int32_t *s, const uint32_t *ix, int B)
{
	TIMED(REAL->gather_i32(c, o, s, ix, B), "gather_i32 B=%d", B);
}
static void p_embedding_forward(struct sb_ctx *c, float *o, const int32_t *ids, const float *t, int n, int d)
{
	TIMED(REAL->embedding_forward(c, o, ids, t, n, d), "embedding_forward n=%d d=%d", n, d);
}
static void p_embedding_backward(struct sb_ctx *c, float *dt, const float *g, const int32_t *ids, int n, int d)
{
	TIMED(REAL->embedding_backward(c, dt, g, ids, n, d), "embedding_backward n=%d d=%d", n, d);
}
static void p_assemble_forward(struct sb_ctx *c, float *x, const float *e, const float *cls, const float *pos, int B,
			       int T, int d)
{
	TIMED(REAL->assemble_forward(c, x, e, cls, pos, B, T, d), "assemble_forward B=%d T=%d d=%d", B, T, d);
}
static void p_assemble_backward(struct sb_ctx *c, float *de, float *dc, float *dp, const float *dx, int B, int T, int d)
{
	TIMED(REAL->assemble_backward(c, de, dc, dp, dx, B, T, d), "assemble_backward B=%d T=%d d=%d", B, T, d);
}
static void p_matmul_forward(struct sb_ctx *c, float *o, const float *in, const float *w, const float *b, int M, int K,
			     int N)
{
	TIMED(REAL->matmul_forward(c, o, in, w, b, M, K, N), "matmul_forward M=%d K=%d N=%d%s", M, K, N,
	      b ? " +bias" : "");
}
static void p_matmul_backward(struct sb_ctx *c, float *di, float *dw, float *db, const float *g, const float *in,
			      const float *w, int M, int K, int N, int acc)
{
	TIMED(REAL->matmul_backward(c, di, dw, db, g, in, w, M, K, N, acc), "matmul_backward M=%d K=%d N=%d%s%s", M, K,
	      N, di ? " dinp" : "", db ? " dbias" : "");
}
static void p_gather_cls(struct sb_ctx *c, float *o, const float *x, int B, int T, int d)
{
	TIMED(REAL->gather_cls(c, o, x, B, T, d), "gather_cls B=%d", B);
}
static void p_scatter_cls(struct sb_ctx *c, float *dx, const float *dc, int B, int T, int d)
{
	TIMED(REAL->scatter_cls(c, dx, dc, B, T, d), "scatter_cls B=%d", B);
}
static void p_residual_ln_forward(struct sb_ctx *c, float *o, float *r, float *mu, float *rs, uint8_t *mk, const float *x,
				  const float *y, const float *w, const float *b, const struct sb_dropout *dr, int M, int d)
{
	TIMED(REAL->residual_ln_forward(c, o, r, mu, rs, mk, x, y, w, b, dr, M, d), "residual_ln_forward M=%d d=%d", M, d);
}
static void p_residual_ln_backward(struct sb_ctx *c, float *dx, float *dy, float *dw, float *db, const float *g,
				   const float *r, const float *mu, const float *rs, const uint8_t *mk, const float *w,
				   float p, int M, int d)
{
	TIMED(REAL->residual_ln_backward(c, dx, dy, dw, db, g, r, mu, rs, mk, w, p, M, d),
	      "residual_ln_backward M=%d d=%d", M, d);
}
static void p_gelu_forward(struct sb_ctx *c, float *o, uint8_t *mk, float *dg, const float *in,
			   const struct sb_dropout *dr, size_t n)
{
	TIMED(REAL->gelu_forward(c, o, mk, dg, in, dr, n), "gelu_forward n=%zu", n);
}
static void p_gelu_backward(struct sb_ctx *c, float *di, const float *g, const float *dg, const uint8_t *mk, float p,
			    size_t n)
{
	TIMED(REAL->gelu_backward(c, di, g, dg, mk, p, n), "gelu_backward n=%zu", n);
}
static int p_attention_forward(struct sb_ctx *c, float *o, float *S, float *P, float *aux, const float *qkv,
			       const int32_t *nv, const float *al, const struct sb_norm *nm, int B, int T, int d, int NH,
			       struct sb_err *err)
{
	int rc = 0;
	TIMED(rc |= REAL->attention_forward(c, o, S, P, aux, qkv, nv, al, nm, B, T, d, NH, err),
	      "attention_forward B=%d T=%d d=%d NH=%d", B, T, d, NH);
	return rc;
}
static void p_attention_backward(struct sb_ctx *c, float *dq, float *da, const float *g, const float *qkv, const float *S,
				 const float *P, const float *aux, const int32_t *nv, const float *al,
				 const struct sb_norm *nm, int B, int T, int d, int NH)
{
	TIMED(REAL->attention_backward(c, dq, da, g, qkv, S, P, aux, nv, al, nm, B, T, d, NH),
	      "attention_backward B=%d T=%d d=%d NH=%d", B, T, d, NH);
}
static void p_hae_alpha(struct sb_ctx *c, float *a, const float *r, int n)
{
	TIMED(REAL->hae_alpha(c, a, r, n), "hae_alpha n=%d", n);
}
static void p_hae_alpha_backward(struct sb_ctx *c, float *dr, const float *da, const float *r, int n)
{
	TIMED(REAL->hae_alpha_backward(c, dr, da, r, n), "hae_alpha_backward n=%d", n);
}
static void p_localmix_forward(struct sb_ctx *c, float *o, float *y, float *z, float *mu, float *rs, const float *x,
			       const int32_t *nv, const float *lw, const float *lb, const float *cw, const float *cb,
			       const float *sc, int B, int T, int d, int G)
{
	TIMED(REAL->localmix_forward(c, o, y, z, mu, rs, x, nv, lw, lb, cw, cb, sc, B, T, d, G),
	      "localmix_forward B=%d T=%d d=%d", B, T, d);
}
static void p_localmix_backward(struct sb_ctx *c, float *dx, float *dlw, float *dlb, float *dcw, float *dcb, float *ds,
				const float *g, const float *x, const float *y, const float *z, const float *mu,
				const float *rs, const int32_t *nv, const float *lw, const float *cw, const float *sc, int B,
				int T, int d, int G)
{
	TIMED(REAL->localmix_backward(c, dx, dlw, dlb, dcw, dcb, ds, g, x, y, z, mu, rs, nv, lw, cw, sc, B, T, d, G),
	      "localmix_backward B=%d T=%d d=%d", B, T, d);
}
static void p_cross_entropy(struct sb_ctx *c, float *l, int32_t *pr, float *dl, const float *lg, const int32_t *lab,
			    int B, int C, float ds)
{
	TIMED(REAL->cross_entropy(c, l, pr, dl, lg, lab, B, C, ds), "cross_entropy B=%d C=%d", B, C);
}
static void p_reduce_slots(struct sb_ctx *c, float *dst, const float *src, int ns, size_t st, size_t n)
{
	TIMED(REAL->reduce_slots(c, dst, src, ns, st, n), "reduce_slots n=%zu slots=%d", n, ns);
}
static void p_zero(struct sb_ctx *c, void *p, size_t bytes)
{
	TIMED(REAL->zero(c, p, bytes), "zero bytes=%zu", bytes);
}
static void p_copy(struct sb_ctx *c, void *d, const void *s, size_t bytes)
{
	TIMED(REAL->copy(c, d, s, bytes), "copy bytes=%zu", bytes);
}
static void p_loss_accum(struct sb_ctx *c, struct sb_step_acc *a, const float *l, int B, const struct sb_step_state *st)
{
	TIMED(REAL->loss_accum(c, a, l, B, st), "loss_accum B=%d", B);
}
static void p_clip_coef(struct sb_ctx *c, struct sb_step_acc *a, const float *g, size_t n, float mx)
{
	TIMED(REAL->clip_coef(c, a, g, n, mx), "clip_coef n=%zu", n);
}
static void p_adamw_dev(struct sb_ctx *c, float *p, float *m, float *v, const float *g, size_t n,
			const struct sb_step_acc *a, const struct sb_step_state *st)
{
	TIMED(REAL->adamw_dev(c, p, m, v, g, n, a, st), "adamw_dev n=%zu", n);
}

static int cmp_prof(const void *a, const void *b)
{
	const struct prof_ent *x = a, *y = b;
	double u = x->sec, v = y->sec;
	return u < v ? 1 : u > v ? -1 : 0;
}

/* profile one step of a method (after warm-up steps): NDJSON records on stdout */
static int profile(const char *device, const struct sb_dataset *ds, const char *method, const char *what)
{
	struct sb_err err = {0};
	struct sb_backend *be = NULL;
	struct sb_norm nm;
	struct sb_encoder_cfg cfg;
	struct sb_encoder *m = NULL;
	struct sb_encoder_data data;
	int have = 0;
	int rc = sb_backend_open(device, 0, &be, &err);
	if (!rc)
		rc = sb_norm_parse(method, 1.5, &nm, &err);
	if (!rc)
		rc = sb_encoder_cfg_from_dataset(&cfg, ds, "compact", "plain", &nm, &err);
	if (!rc)
		rc = sb_encoder_new(&cfg, be, BATCH, &m, &err);
	if (!rc)
		rc = sb_encoder_init(m, 1, &err);
	if (!rc)
		have = !(rc = sb_encoder_data_open(be, ds, &data, &err));
	uint32_t *perm = malloc((size_t)ds->n * 4);
	struct sb_rng r;
	sb_rng_init(&r, 1, SB_RNG_SHUFFLE, 0);
	sb_rng_permutation(&r, perm, (size_t)ds->n);
	struct sb_step_opts o;
	sb_step_opts_default(&o);
	o.seed = 1;
	struct sb_step_acc acc;
	double t_step = 0;
	if (!rc) {
		m->use_graphs = 0;
		for (int s = 0; !rc && s < 4; s++) {
			o.step = s;
			rc = sb_encoder_step(m, &data, perm + s * BATCH, BATCH, &o, NULL, &err);
		}
		if (!rc)
			rc = sb_encoder_acc_read(m, &acc, 0, &err);
		/* one plain step, timed between two waits */
		double t0 = g_now();
		o.step = 4;
		if (!rc)
			rc = sb_encoder_step(m, &data, perm + 4 * BATCH, BATCH, &o, NULL, &err);
		if (!rc)
			rc = sb_encoder_acc_read(m, &acc, 0, &err);
		t_step = g_now() - t0;
	}
	if (!rc) {
		PBE = be;
		REAL = be->ops;
		PSYNC = sb_be_alloc(be, 64);
		PROF_OPS = *REAL;
		PROF_OPS.patchify = p_patchify;
		PROF_OPS.gather_tokens = p_gather_tokens;
		PROF_OPS.gather_i32 = p_gather_i32;
		PROF_OPS.embedding_forward = p_embedding_forward;
		PROF_OPS.embedding_backward = p_embedding_backward;
		PROF_OPS.assemble_forward = p_assemble_forward;
		PROF_OPS.assemble_backward = p_assemble_backward;
		PROF_OPS.matmul_forward = p_matmul_forward;
		PROF_OPS.matmul_backward = p_matmul_backward;
		PROF_OPS.gather_cls = p_gather_cls;
		PROF_OPS.scatter_cls = p_scatter_cls;
		PROF_OPS.residual_ln_forward = p_residual_ln_forward;
		PROF_OPS.residual_ln_backward = p_residual_ln_backward;
		PROF_OPS.gelu_forward = p_gelu_forward;
		PROF_OPS.gelu_backward = p_gelu_backward;
		PROF_OPS.attention_forward = p_attention_forward;
		PROF_OPS.attention_backward = p_attention_backward;
		PROF_OPS.hae_alpha = p_hae_alpha;
		PROF_OPS.hae_alpha_backward = p_hae_alpha_backward;
		PROF_OPS.localmix_forward = p_localmix_forward;
		PROF_OPS.localmix_backward = p_localmix_backward;
		PROF_OPS.cross_entropy = p_cross_entropy;
		PROF_OPS.reduce_slots = p_reduce_slots;
		PROF_OPS.zero = p_zero;
		PROF_OPS.copy = p_copy;
		if (REAL->loss_accum) {
			PROF_OPS.loss_accum = p_loss_accum;
			PROF_OPS.clip_coef = p_clip_coef;
			PROF_OPS.adamw_dev = p_adamw_dev;
		}
		/* the cost of one wait, subtracted from every measurement */
		PROF_WAIT = 0;
		psync();
		double w0 = g_now();
		for (int i = 0; i < 20; i++)
			psync();
		PROF_WAIT = (g_now() - w0) / 20;
		NPROF = 0;
		be->ops = &PROF_OPS;
		o.step = 5;
		rc = sb_encoder_step(m, &data, perm + 5 * BATCH, BATCH, &o, NULL, &err);
		be->ops = REAL;
		if (!rc)
			rc = sb_encoder_acc_read(m, &acc, 0, &err);
		sb_be_free(be, PSYNC);
	}
	if (!rc) {
		qsort(PROF, (size_t)NPROF, sizeof PROF[0], cmp_prof);
		double sum = 0;
		int calls = 0;
		for (int i = 0; i < NPROF; i++) {
			sum += PROF[i].sec;
			calls += PROF[i].calls;
			printf("{\"kind\":\"bench.profile\",\"device\":\"%s\",\"method\":\"%s\",\"op\":\"%s\",\"calls\":%d,"
			       "\"us_per_call\":%.2f,\"us_per_step\":%.2f,\"repeats\":%d}\n",
			       device, method, PROF[i].key, PROF[i].calls, 1e6 * PROF[i].sec / PROF[i].calls, 1e6 * PROF[i].sec,
			       PROF_R);
		}
		printf("{\"kind\":\"bench.profile_total\",\"device\":\"%s\",\"method\":\"%s\",\"ops\":%d,\"calls\":%d,"
		       "\"us_sum_of_ops\":%.1f,\"us_plain_step\":%.1f,\"us_wait\":%.1f,\"data\":\"%s\"}\n",
		       device, method, NPROF, calls, 1e6 * sum, 1e6 * t_step, 1e6 * PROF_WAIT, what);
		fflush(stdout);
	} else {
		fprintf(stderr, "gpu_bench: profile %s: %s\n", method, err.msg);
	}
	free(perm);
	if (have)
		sb_encoder_data_close(be, &data);
	sb_encoder_free(m);
	sb_backend_close(be);
	return rc;
}

int main(int argc, char **argv)
{
	const char *device = "cuda", *data = NULL, *prof = NULL, *shape = "fmnist";
	int single = 0, seeds = 0, plain_only = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--make-data") && i + 1 < argc)
			return make_data(argv[++i]);
		else if (!strcmp(argv[i], "--device") && i + 1 < argc)
			device = argv[++i];
		else if (!strcmp(argv[i], "--data") && i + 1 < argc)
			data = argv[++i];
		else if (!strcmp(argv[i], "--shape") && i + 1 < argc)
			shape = argv[++i];
		else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			STEPS = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
			WARMUP = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--single"))
			single = 1;
		else if (!strcmp(argv[i], "--plain"))
			plain_only = 1;
		else if (!strcmp(argv[i], "--multi") && i + 1 < argc)
			seeds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--profile") && i + 1 < argc)
			prof = argv[++i];
		else {
			fprintf(stderr, "usage: gpu_bench --make-data PATH | [--device D] [--data PATH | --shape "
					"fmnist|cifar|text] [--steps S] [--warmup W] [--single] [--plain] [--multi SEEDS] "
					"[--profile METHODS]\n");
			return 2;
		}
	}
	if (strcmp(shape, "fmnist") && strcmp(shape, "cifar") && strcmp(shape, "text")) {
		fprintf(stderr, "gpu_bench: --shape %s: expected fmnist, cifar or text\n", shape);
		return 2;
	}
	if (WARMUP < 2)
		WARMUP = 2; /* the second step is the one recorded */
	struct sb_err err = {0};
	struct sb_dataset ds;
	int synthetic = data == NULL;
	if (data) {
		if (sb_dataset_read(data, 0, &ds, &err)) {
			fprintf(stderr, "gpu_bench: %s\n", err.msg);
			return 3;
		}
	} else if (!strcmp(shape, "fmnist")) {
		synth_dataset(&ds, 0, 60000, 2026);
	} else {
		synth_shape(&ds, shape, !strcmp(shape, "text") ? 20000 : 50000, 2026);
	}
	const char *what = !synthetic && strstr(ds.task, "fashion") ? "dataset file" : !strcmp(shape, "text") && synthetic ? "synthetic tokens" : "synthetic pixels";
	int rc_all = 0;
	struct sb_mc_opts mo = {device, 0, 0, NULL, NULL};
	if (single) {
		for (int mi = 0; mi < NMETH; mi++)
			for (int graphs = plain_only ? 0 : 1; graphs >= 0; graphs--) {
				struct cellarg a;
				memset(&a, 0, sizeof a);
				a.ds = &ds;
				a.method = METHODS[mi];
				a.seed = 1;
				a.graphs = graphs;
				struct sb_mc_cell c = {METHODS[mi], &a, 0, {0}, 0};
				int rc = sb_multicell_run(&mo, &c, 1, cell_fn, &err);
				double sps = rc ? 0 : (double)STEPS * BATCH / (a.t_end - a.t_start);
				printf("{\"kind\":\"bench.single\",\"device\":\"%s\",\"shape\":\"%s\",\"method\":\"%s\",\"mode\":\"%s\",\"cells\":1,"
				       "\"batch\":%d,\"steps\":%d,\"samples_per_s\":%.1f,\"ms_per_step\":%.4f,\"replayed\":%lld,"
				       "\"issued\":%lld,\"data\":\"%s\",\"status\":\"%s\"%s%s%s}\n",
				       device, shape, METHODS[mi], graphs ? "graph" : "plain", BATCH, STEPS, sps,
				       rc ? 0 : 1e3 * (a.t_end - a.t_start) / STEPS, (long long)a.replayed, (long long)a.issued,
				       what, sb_mc_status_name(c.status), rc ? ",\"error\":\"" : "", rc ? "see stderr" : "",
				       rc ? "\"" : "");
				if (rc)
					fprintf(stderr, "gpu_bench: %s: %s\n", METHODS[mi], c.err.msg);
				if (a.note[0])
					fprintf(stderr, "gpu_bench: %s: %s\n", METHODS[mi], a.note);
				fflush(stdout);
				rc_all |= rc;
			}
	}
	if (seeds > 0) {
		int n = NMETH * seeds;
		struct cellarg *a = calloc((size_t)n, sizeof *a);
		struct sb_mc_cell *c = calloc((size_t)n, sizeof *c);
		char (*ids)[48] = calloc((size_t)n, 48);
		struct tbar bar = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, n, 0};
		for (int i = 0; i < n; i++) {
			a[i].ds = &ds;
			a[i].method = METHODS[i % NMETH];
			a[i].seed = (uint64_t)(i / NMETH);
			a[i].graphs = !plain_only;
			a[i].bar = &bar;
			snprintf(ids[i], 48, "%s/seed%d", a[i].method, i / NMETH);
			c[i].id = ids[i];
			c[i].arg = &a[i];
		}
		double t0 = g_now();
		int rc = sb_multicell_run(&mo, c, n, cell_fn, &err);
		double wall = g_now() - t0;
		double ts = 1e300, te = 0;
		int ok = 0;
		long long rep = 0;
		for (int i = 0; i < n; i++)
			if (c[i].status == SB_MC_OK) {
				ok++;
				ts = a[i].t_start < ts ? a[i].t_start : ts;
				te = a[i].t_end > te ? a[i].t_end : te;
				rep += a[i].replayed;
			}
		double sps = ok ? (double)ok * STEPS * BATCH / (te - ts) : 0;
		printf("{\"kind\":\"bench.multi\",\"device\":\"%s\",\"shape\":\"%s\",\"mode\":\"%s\",\"cells\":%d,\"cells_ok\":%d,\"batch\":%d,"
		       "\"steps\":%d,\"samples_per_s\":%.1f,\"timed_s\":%.3f,\"wall_s\":%.3f,\"replayed\":%lld,\"data\":\"%s\","
		       "\"connections\":%d}\n",
		       device, shape, plain_only ? "plain" : "graph", n, ok, BATCH, STEPS, sps, ok ? te - ts : 0, wall, rep, what,
		       connections(device));
		if (rc)
			fprintf(stderr, "gpu_bench: multi: %s\n", err.msg);
		rc_all |= rc;
		free(a);
		free(c);
		free(ids);
	}
	if (prof) {
		char buf[512];
		snprintf(buf, sizeof buf, "%s", prof);
		for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv))
			rc_all |= profile(device, &ds, t, what);
	}
	if (synthetic)
		synth_free(&ds);
	else
		sb_dataset_free(&ds);
	return rc_all ? 5 : 0;
}
