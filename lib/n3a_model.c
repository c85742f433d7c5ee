/* n3a_model.c — N3-A's synthetic task, batch schedule, readout and loss, and the two
 * routers (query, transformer) on the CPU backend's ops (see n3a.h; spec §2.4-2.5).
 *
 * Precision as in the study: parameters, inputs and the routers' activations float32;
 * the scores are cast to float64 for the operator, the readout and the loss; the score
 * gradient is cast back to float32. */
#include "n3a.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu_simd.h" /* the CPU backend's vectors: N3-A runs on it only */
#include "redzone.h"
#include "rng.h"

/* ------------------------------------------------------------------ task */

static uint64_t stream_key(uint64_t seed, int r, const char *split, const char *what)
{
	char s[32], rs[16];
	snprintf(s, sizeof s, "%llu", (unsigned long long)seed);
	snprintf(rs, sizeof rs, "%d", r);
	const char *p4[] = {s, rs, split, what};
	const char *p3[] = {s, rs, what};
	return split ? sb_n3a_stable_seed(p4, 4) : sb_n3a_stable_seed(p3, 3);
}

void sb_n3a_data_free(struct sb_n3a_data *d)
{
	if (!d)
		return;
	free(d->x);
	free(d->v);
	free(d->z);
	free(d->y);
	memset(d, 0, sizeof *d);
}

int sb_n3a_data_make(struct sb_n3a_data *d, uint64_t seed, int r, const char *split, int N, int n,
		     struct sb_err *err)
{
	memset(d, 0, sizeof *d);
	if (N < 1 || n < 1 || n > SB_N3A_MAXN || r < 1 || r > n)
		return SB_ERR(err, SB_EUSAGE, "n3a data: N %d, n %d, r %d out of range", N, n, r);
	d->N = N;
	d->n = n;
	d->r = r;
	d->x = malloc((size_t)N * n * SB_N3A_FEAT * sizeof *d->x);
	d->v = malloc((size_t)N * n * sizeof *d->v);
	d->z = malloc((size_t)N * n);
	d->y = malloc((size_t)N * sizeof *d->y);
	if (!d->x || !d->v || !d->z || !d->y) {
		sb_n3a_data_free(d);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	struct sb_rng sup, mark, val, nui;
	sb_rng_init(&sup, stream_key(seed, r, split, "support"), SB_N3A_RNG_SUPPORT, 0);
	sb_rng_init(&mark, stream_key(seed, r, split, "marker_noise"), SB_N3A_RNG_MARKER, 0);
	sb_rng_init(&val, stream_key(seed, r, split, "values"), SB_N3A_RNG_VALUES, 0);
	sb_rng_init(&nui, stream_key(seed, r, split, "nuisance"), SB_N3A_RNG_NUISANCE, 0);
	double u[SB_N3A_MAXN];
	int idx[SB_N3A_MAXN];
	for (int e = 0; e < N; e++) {
		uint8_t *z = d->z + (size_t)e * n;
		float *x = d->x + (size_t)e * n * SB_N3A_FEAT, *v = d->v + (size_t)e * n;
		/* relevant set: the r smallest of n uniforms (stable ascending order) */
		for (int i = 0; i < n; i++) {
			u[i] = sb_rng_uniform(&sup);
			int j = i;
			while (j > 0 && u[idx[j - 1]] > u[i]) {
				idx[j] = idx[j - 1];
				j--;
			}
			idx[j] = i;
		}
		memset(z, 0, (size_t)n);
		for (int j = 0; j < r; j++)
			z[idx[j]] = 1;
		for (int i = 0; i < n; i++)
			x[i * SB_N3A_FEAT] = (float)((double)z[i] + sb_rng_normal(&mark));
		for (int i = 0; i < n; i++)
			for (int f = 1; f < SB_N3A_FEAT; f++)
				x[i * SB_N3A_FEAT + f] = (float)sb_rng_normal(&nui);
		double sum = 0;
		for (int i = 0; i < n; i++) {
			v[i] = (float)sb_rng_normal(&val);
			if (z[i])
				sum += (double)v[i];
		}
		d->y[e] = sum / sqrt((double)r) >= 0 ? 1.0f : 0.0f;
	}
	return 0;
}

int sb_n3a_schedule(uint32_t **sched, uint64_t seed, int r, int ntrain, int batch, int updates, struct sb_err *err)
{
	*sched = NULL;
	if (ntrain < 1 || batch < 1 || updates < 1)
		return SB_ERR(err, SB_EUSAGE, "n3a schedule: ntrain %d, batch %d, updates %d", ntrain, batch, updates);
	size_t total = (size_t)batch * updates;
	uint32_t *s = malloc(total * sizeof *s), *perm = malloc((size_t)ntrain * sizeof *perm);
	if (!s || !perm) {
		free(s);
		free(perm);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	struct sb_rng rng;
	sb_rng_init(&rng, stream_key(seed, r, NULL, "batch_schedule"), SB_N3A_RNG_SCHEDULE, 0);
	for (size_t at = 0; at < total;) {
		sb_rng_permutation(&rng, perm, (size_t)ntrain);
		size_t m = total - at < (size_t)ntrain ? total - at : (size_t)ntrain;
		memcpy(s + at, perm, m * sizeof *s);
		at += m;
	}
	free(perm);
	*sched = s;
	return 0;
}

/* ------------------------------------------------------------------ readout and loss */

static double softplus(double x)
{
	return x > 30 ? x : log1p(exp(x));
}

static double sigmoid(double x)
{
	if (x >= 0)
		return 1 / (1 + exp(-x));
	double e = exp(x);
	return e / (1 + e);
}

int sb_n3a_readout(int arm, const struct sb_n3a_op *op, int r, const double *s, const float *v, const float *y, int B,
		   double rho, double bias, const uint32_t *perm, double *w, struct sb_n3a_row *st, double *logit,
		   double *loss, double *ds, double *drho, double *dbias, struct sb_err *err)
{
	int n = op->n, nt = op->n - op->k;
	double gam = softplus(rho), sr = sqrt((double)r), lsum = 0;
	for (int b = 0; b < B; b++) {
		int rc = sb_n3a_row_forward(arm, op, s + (size_t)b * n, w + (size_t)b * n, &st[b], err);
		if (rc) {
			sb_err_prefix(err, "example %d of %d", b, B);
			return rc;
		}
		double dot = 0;
		for (int i = 0; i < n; i++)
			dot += w[(size_t)b * n + i] * (double)v[(size_t)b * n + i];
		double x = gam * sr * dot + bias;
		logit[b] = x;
		lsum += (x > 0 ? x : 0) - x * (double)y[b] + log1p(exp(-fabs(x)));
	}
	*loss = lsum / B;
	if (!ds)
		return 0;
	double dgam = 0, db = 0, g[SB_N3A_MAXN];
	for (int b = 0; b < B; b++) {
		double dl = (sigmoid(logit[b]) - (double)y[b]) / B;
		const double *wb = w + (size_t)b * n;
		const float *vb = v + (size_t)b * n;
		double dot = 0;
		for (int i = 0; i < n; i++)
			dot += wb[i] * (double)vb[i];
		dgam += dl * sr * dot;
		db += dl;
		for (int i = 0; i < n; i++)
			g[i] = dl * gam * sr * (double)vb[i];
		int rc = sb_n3a_row_backward(arm, op, g, wb, &st[b], perm ? perm + (size_t)b * nt : NULL,
					     ds + (size_t)b * n, err);
		if (rc) {
			sb_err_prefix(err, "example %d of %d", b, B);
			return rc;
		}
	}
	*drho = dgam * sigmoid(rho);
	*dbias = db;
	return 0;
}

/* ------------------------------------------------------------------ routers */

const char *sb_n3a_arch_name(int arch)
{
	return arch == SB_N3A_QUERY ? "query" : arch == SB_N3A_TRANSFORMER ? "transformer" : "?";
}

int sb_n3a_arch_parse(const char *s)
{
	if (s && !strcmp(s, "query"))
		return SB_N3A_QUERY;
	if (s && !strcmp(s, "transformer"))
		return SB_N3A_TRANSFORMER;
	return -1;
}

enum init_kind { I_LINW, I_LINB, I_XAVIER, I_ZERO, I_ONE, I_NORMAL, I_RHO, I_COPY };

struct layer { /* pointers into an arena: parameters or gradients */
	float *ln1w, *ln1b, *inw, *inb, *outw, *outb, *ln2w, *ln2b, *ff1w, *ff1b, *ff2w, *ff2b;
};
struct params {
	float *W1, *b1, *W2, *b2;  /* query */
	float *Win, *bin;          /* transformer */
	struct layer L[SB_N3A_LAYERS];
	float *q, *rho, *bias;
};

struct lacts { /* one encoder layer's saved activations */
	float *a, *mean1, *rstd1, *qkv, *S, *P, *aux, *att, *u1, *c, *mean2, *rstd2, *fpre, *f;
};

/* The transformer runs its layers on chunks of N3A_CHUNK examples (all layers for one
 * chunk, then the next), so that what one op writes and the next reads (qkv, scores,
 * probabilities, the feed-forward activations; in the backward the gradient scratch)
 * stays in L2 instead of going through L3 for the whole batch. Every forward op is
 * row by row (a product's element is a chain over its inputs, attention is per example,
 * LayerNorm per row), and in the backward each parameter gradient is still one chain
 * over the batch rows in order, chunk after chunk (a product's weight gradient and bias
 * sum, LayerNorm's dw and db: each pass continues the stored float), so the results are
 * those of one pass over the batch bit for bit. */
#define N3A_CHUNK 16
#define N3A_ZMAX 64 /* allocations with a red zone (SB_ARENA_CHECK): 45 in a transformer */

struct sb_n3a_model {
	struct sb_backend *be;
	const struct sb_backend_lm_ops *lm;
	struct sb_ctx *ctx;
	int arch, n, r, bmax;
	size_t np;
	int nt;
	struct sb_n3a_tensor t[SB_N3A_MAXT];
	enum init_kind kind[SB_N3A_MAXT];
	int fan_in[SB_N3A_MAXT], fan_out[SB_N3A_MAXT], copy_of[SB_N3A_MAXT];
	float *p, *g;
	struct params P, G;
	struct sb_norm softmax;
	/* activations [bmax n, ...] */
	float *x, *v, *y, *s, *ds_f;
	float *h1, *g1, *h2;          /* query: pre-activations (gelu' after a training forward) */
	float *U[SB_N3A_LAYERS + 1];  /* transformer residual stream */
	struct lacts A[SB_N3A_LAYERS];
	float *h;                     /* the representation scored (query: gelu(h2); transformer: U[L]) */
	float *dh, *da, *dc, *df, *dqkv, *datt, *dg; /* backward scratch (transformer: one chunk) */
	/* float64 readout */
	double *s64, *w, *ds, *logit;
	struct sb_n3a_row *st;
	/* SB_ARENA_CHECK (redzone.h): the 64-byte slack after each allocation above holds a
	 * red zone, checked after every forward (and backward) pass */
	struct sb_redzones rz;
	char zname[N3A_ZMAX][32];
};

static void add_tensor(struct sb_n3a_model *m, const char *name, size_t size, enum init_kind k, int fan_in,
		       int fan_out, int copy_of)
{
	struct sb_n3a_tensor *t = &m->t[m->nt];
	snprintf(t->name, sizeof t->name, "%s", name);
	t->off = m->np;
	t->size = size;
	m->kind[m->nt] = k;
	m->fan_in[m->nt] = fan_in;
	m->fan_out[m->nt] = fan_out;
	m->copy_of[m->nt] = copy_of;
	m->nt++;
	m->np += (size + 15) & ~(size_t)15; /* 64-byte aligned tensors */
}

static void build_table(struct sb_n3a_model *m)
{
	const int D = SB_N3A_WIDTH, F = SB_N3A_FF;
	if (m->arch == SB_N3A_QUERY) {
		add_tensor(m, "W1", (size_t)D * SB_N3A_FEAT, I_LINW, SB_N3A_FEAT, D, -1);
		add_tensor(m, "b1", D, I_LINB, SB_N3A_FEAT, D, -1);
		add_tensor(m, "W2", (size_t)D * D, I_LINW, D, D, -1);
		add_tensor(m, "b2", D, I_LINB, D, D, -1);
	} else {
		add_tensor(m, "in.weight", (size_t)D * SB_N3A_FEAT, I_LINW, SB_N3A_FEAT, D, -1);
		add_tensor(m, "in.bias", D, I_LINB, SB_N3A_FEAT, D, -1);
		int first = m->nt;
		for (int l = 0; l < SB_N3A_LAYERS; l++) {
			char nm[32];
#define T(suffix, size, kind, fi, fo)                                                                                  \
	snprintf(nm, sizeof nm, "layers.%d.%s", l, suffix);                                                            \
	add_tensor(m, nm, size, l ? I_COPY : kind, fi, fo, l ? first + (m->nt - first) % 12 : -1);
			T("in_proj.weight", (size_t)3 * D * D, I_XAVIER, D, 3 * D)
			T("in_proj.bias", (size_t)3 * D, I_ZERO, 0, 0)
			T("out_proj.weight", (size_t)D * D, I_LINW, D, D)
			T("out_proj.bias", D, I_ZERO, 0, 0)
			T("linear1.weight", (size_t)F * D, I_LINW, D, F)
			T("linear1.bias", F, I_LINB, D, F)
			T("linear2.weight", (size_t)D * F, I_LINW, F, D)
			T("linear2.bias", D, I_LINB, F, D)
			T("norm1.weight", D, I_ONE, 0, 0)
			T("norm1.bias", D, I_ZERO, 0, 0)
			T("norm2.weight", D, I_ONE, 0, 0)
			T("norm2.bias", D, I_ZERO, 0, 0)
#undef T
		}
	}
	add_tensor(m, "q", D, I_NORMAL, 0, 0, -1);
	add_tensor(m, "rho", 1, I_RHO, 0, 0, -1);
	add_tensor(m, "bias", 1, I_ZERO, 0, 0, -1);
}

static void set_ptrs(const struct sb_n3a_model *m, float *base, struct params *P)
{
	memset(P, 0, sizeof *P);
	int i = 0;
#define NEXT (base + m->t[i++].off)
	if (m->arch == SB_N3A_QUERY) {
		P->W1 = NEXT;
		P->b1 = NEXT;
		P->W2 = NEXT;
		P->b2 = NEXT;
	} else {
		P->Win = NEXT;
		P->bin = NEXT;
		for (int l = 0; l < SB_N3A_LAYERS; l++) {
			struct layer *L = &P->L[l];
			L->inw = NEXT;
			L->inb = NEXT;
			L->outw = NEXT;
			L->outb = NEXT;
			L->ff1w = NEXT;
			L->ff1b = NEXT;
			L->ff2w = NEXT;
			L->ff2b = NEXT;
			L->ln1w = NEXT;
			L->ln1b = NEXT;
			L->ln2w = NEXT;
			L->ln2b = NEXT;
		}
	}
	P->q = NEXT;
	P->rho = NEXT;
	P->bias = NEXT;
#undef NEXT
}

float *sb_n3a_model_params(struct sb_n3a_model *m)
{
	return m->p;
}
float *sb_n3a_model_grads(struct sb_n3a_model *m)
{
	return m->g;
}
size_t sb_n3a_model_nparams(const struct sb_n3a_model *m)
{
	return m->np;
}
const struct sb_n3a_tensor *sb_n3a_model_tensors(const struct sb_n3a_model *m, int *ntensors)
{
	*ntensors = m->nt;
	return m->t;
}

void sb_n3a_model_free(struct sb_n3a_model *m)
{
	if (!m)
		return;
	sb_redzone_free(&m->rz);
	if (m->arch == SB_N3A_TRANSFORMER)
		m->h = NULL; /* an alias of U[LAYERS] */
	float **fl[] = {&m->p, &m->g, &m->x, &m->v, &m->y, &m->s, &m->ds_f, &m->h1, &m->g1, &m->h2, &m->h,
			&m->dh, &m->da, &m->dc, &m->df, &m->dqkv, &m->datt, &m->dg};
	for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++)
		sb_be_free(m->be, *fl[i]);
	for (int l = 0; l <= SB_N3A_LAYERS; l++)
		sb_be_free(m->be, m->U[l]);
	for (int l = 0; l < SB_N3A_LAYERS; l++) {
		struct lacts *a = &m->A[l];
		float **al[] = {&a->a, &a->mean1, &a->rstd1, &a->qkv, &a->S, &a->P, &a->aux, &a->att,
				&a->u1, &a->c, &a->mean2, &a->rstd2, &a->fpre, &a->f};
		for (size_t i = 0; i < sizeof al / sizeof al[0]; i++)
			sb_be_free(m->be, *al[i]);
	}
	free(m->s64);
	free(m->w);
	free(m->ds);
	free(m->logit);
	free(m->st);
	free(m);
}

/* One buffer of count floats and 64 bytes of slack, which holds a red zone with the check
 * (named after the field, "layer L's" for a layer's). */
static int al(struct sb_n3a_model *m, float **ptr, size_t count, const char *field, int layer)
{
	*ptr = sb_be_alloc(m->be, count * sizeof(float) + 64);
	if (!*ptr)
		return 1;
	if (!m->rz.on)
		return 0;
	if (m->rz.n >= N3A_ZMAX)
		return 1;
	const char *f = strstr(field, "->");
	f = f ? f + 2 : field;
	char *nm = m->zname[m->rz.n];
	if (layer >= 0)
		snprintf(nm, sizeof m->zname[0], "layer %d's %.*s", layer, (int)strcspn(f, "["), f);
	else
		snprintf(nm, sizeof m->zname[0], "%s", f);
	struct sb_err e = {0};
	struct sb_redzones one;
	if (sb_redzone_push_at(&m->rz, (char *)*ptr + count * sizeof(float), 64, count * sizeof(float), nm))
		return 1;
	one = m->rz;
	one.z += one.n - 1;
	one.n = one.cap = 1;
	return sb_redzone_fill(m->be, NULL, &one, &e) != 0;
}

int sb_n3a_model_new(struct sb_backend *be, int arch, int n, int r, int bmax, struct sb_n3a_model **out,
		     struct sb_err *err)
{
	*out = NULL;
	if (strcmp(be->name, "cpu"))
		return SB_ERR(err, SB_EUSAGE, "N3-A runs on the CPU backend, not '%s'", be->name);
	if (arch != SB_N3A_QUERY && arch != SB_N3A_TRANSFORMER)
		return SB_ERR(err, SB_EUSAGE, "n3a: unknown architecture %d", arch);
	if (n < 2 || n > SB_N3A_MAXN || r < 1 || r > n || bmax < 1)
		return SB_ERR(err, SB_EUSAGE, "n3a model: n %d, r %d, bmax %d out of range", n, r, bmax);
	const struct sb_backend_lm_ops *lm = sb_backend_lm(be);
	if (!lm)
		return SB_ERR(err, SB_EUSAGE, "n3a: backend '%s' lacks the LayerNorm op", be->name);
	struct sb_n3a_model *m = calloc(1, sizeof *m);
	if (!m)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	m->be = be;
	m->lm = lm;
	m->ctx = sb_be_main(be);
	m->arch = arch;
	m->n = n;
	m->r = r;
	m->bmax = bmax;
	build_table(m);
	SB_TRY(sb_norm_parse("softmax", 0, &m->softmax, err));
	size_t M = (size_t)bmax * n, D = SB_N3A_WIDTH, F = SB_N3A_FF, NH = SB_N3A_HEADS;
	int oom = 0;
	m->rz = (struct sb_redzones){.on = sb_redzone_wanted(), .file = "lib/n3a_model.c", .noun = "buffer"};
#define AL(ptr, count) oom |= al(m, &(ptr), (count), #ptr, -1)
#define ALL(ptr, count) oom |= al(m, &(ptr), (count), #ptr, l)
	AL(m->p, m->np);
	AL(m->g, m->np);
	AL(m->x, M * SB_N3A_FEAT);
	AL(m->v, M);
	AL(m->y, (size_t)bmax);
	AL(m->s, M);
	AL(m->ds_f, M);
	AL(m->dh, M * D);
	AL(m->dg, M * D);
	if (arch == SB_N3A_QUERY) {
		AL(m->h1, M * D);
		AL(m->g1, M * D);
		AL(m->h2, M * D);
		AL(m->h, M * D);
	} else {
		for (int l = 0; l <= SB_N3A_LAYERS; l++)
			ALL(m->U[l], M * D);
		for (int l = 0; l < SB_N3A_LAYERS; l++) {
			struct lacts *a = &m->A[l];
			size_t TT = (size_t)bmax * NH * n * n;
			ALL(a->a, M * D);
			ALL(a->mean1, M);
			ALL(a->rstd1, M);
			ALL(a->qkv, M * 3 * D);
			ALL(a->S, TT);
			ALL(a->P, TT);
			ALL(a->aux, (size_t)bmax * NH * n * SB_NORM_AUX);
			ALL(a->att, M * D);
			ALL(a->u1, M * D);
			ALL(a->c, M * D);
			ALL(a->mean2, M);
			ALL(a->rstd2, M);
			ALL(a->fpre, M * F);
			ALL(a->f, M * F);
		}
		size_t MC = (size_t)(bmax < N3A_CHUNK ? bmax : N3A_CHUNK) * n; /* the backward's chunk */
		AL(m->da, MC * D);
		AL(m->dc, MC * D);
		AL(m->df, MC * F);
		AL(m->dqkv, MC * 3 * D);
		AL(m->datt, MC * D);
	}
#undef AL
#undef ALL
	m->s64 = malloc(M * sizeof(double));
	m->w = malloc(M * sizeof(double));
	m->ds = malloc(M * sizeof(double));
	m->logit = malloc((size_t)bmax * sizeof(double));
	m->st = malloc((size_t)bmax * sizeof *m->st);
	if (oom || !m->s64 || !m->w || !m->ds || !m->logit || !m->st) {
		sb_n3a_model_free(m);
		return SB_ERR(err, SB_EINTERNAL, "out of memory (n3a model, bmax %d)", bmax);
	}
	set_ptrs(m, m->p, &m->P);
	set_ptrs(m, m->g, &m->G);
	*out = m;
	return 0;
}

void sb_n3a_model_init(struct sb_n3a_model *m, uint64_t seed)
{
	char s[32], rs[16];
	snprintf(s, sizeof s, "%llu", (unsigned long long)seed);
	snprintf(rs, sizeof rs, "%d", m->r);
	const char *parts[] = {s, rs, sb_n3a_arch_name(m->arch), "initialization"};
	uint64_t key = sb_n3a_stable_seed(parts, 4);
	memset(m->p, 0, m->np * sizeof *m->p);
	for (int i = 0; i < m->nt; i++) {
		float *p = m->p + m->t[i].off;
		size_t n = m->t[i].size;
		struct sb_rng rng;
		sb_rng_init(&rng, key, SB_N3A_RNG_INIT, (uint64_t)i);
		double bound = 0;
		switch (m->kind[i]) {
		case I_LINW:
		case I_LINB:
			bound = 1.0 / sqrt((double)m->fan_in[i]);
			break;
		case I_XAVIER:
			bound = sqrt(6.0 / (double)(m->fan_in[i] + m->fan_out[i]));
			break;
		default:
			break;
		}
		for (size_t j = 0; j < n; j++) {
			switch (m->kind[i]) {
			case I_LINW:
			case I_LINB:
			case I_XAVIER:
				p[j] = (float)((2 * sb_rng_uniform(&rng) - 1) * bound);
				break;
			case I_ZERO:
				p[j] = 0;
				break;
			case I_ONE:
				p[j] = 1;
				break;
			case I_NORMAL:
				p[j] = (float)(0.02 * sb_rng_normal(&rng));
				break;
			case I_RHO:
				p[j] = (float)log(exp(1.0) - 1.0);
				break;
			case I_COPY:
				p[j] = m->p[m->t[m->copy_of[i]].off + j];
				break;
			}
		}
	}
}

/* h [M, D] -> s [M] = h . q / sqrt(D) (float32): per row the sum over c in order of the
 * rounded products (no FMA), times 1/8. With AVX-512, 16 rows at a time with a row in each
 * lane (their 16 x 16 blocks transposed in registers): the same operations per row. */
static void scores(float *s, const float *h, const float *q, size_t M)
{
	const float inv = 1.0f / sqrtf((float)SB_N3A_WIDTH);
	size_t i = 0;
#if defined(__AVX512F__)
	for (; i + 16 <= M; i += 16) {
		__m512 a = _mm512_setzero_ps();
		for (int c0 = 0; c0 < SB_N3A_WIDTH; c0 += 16) {
			__m512 r[16];
			for (int g = 0; g < 16; g++)
				r[g] = _mm512_loadu_ps(h + (i + g) * SB_N3A_WIDTH + c0);
			vtranspose16(r);
			for (int c = 0; c < 16; c++)
				a = _mm512_add_ps(a, _mm512_mul_ps(r[c], _mm512_set1_ps(q[c0 + c])));
		}
		_mm512_storeu_ps(s + i, _mm512_mul_ps(a, _mm512_set1_ps(inv)));
	}
#endif
	for (; i < M; i++) {
		float a = 0;
		for (int c = 0; c < SB_N3A_WIDTH; c++)
			a += h[i * SB_N3A_WIDTH + c] * q[c];
		s[i] = a * inv;
	}
}

/* the transformer's input layer and encoder on examples [b0, b0 + nb) */
static int encoder_forward(struct sb_n3a_model *m, int b0, int nb, int train, struct sb_err *err)
{
	const struct sb_backend_ops *o = m->be->ops;
	struct sb_ctx *ctx = m->ctx;
	const struct sb_dropout nod = {0};
	int n = m->n, M = nb * n, D = SB_N3A_WIDTH, F = SB_N3A_FF, NH = SB_N3A_HEADS;
	size_t r0 = (size_t)b0 * n, h0 = (size_t)b0 * NH; /* first row, first (example, head) block */
	const struct params *P = &m->P;
	o->matmul_forward(ctx, m->U[0] + r0 * D, m->x + r0 * SB_N3A_FEAT, P->Win, P->bin, M, SB_N3A_FEAT, D);
	for (int l = 0; l < SB_N3A_LAYERS; l++) {
		const struct layer *L = &P->L[l];
		struct lacts *a = &m->A[l];
		float *u = m->U[l] + r0 * D, *un = m->U[l + 1] + r0 * D;
		float *aa = a->a + r0 * D, *qkv = a->qkv + r0 * 3 * D, *att = a->att + r0 * D, *u1 = a->u1 + r0 * D;
		float *c = a->c + r0 * D, *fpre = a->fpre + r0 * F, *f = a->f + r0 * F;
		m->lm->norm_forward(ctx, aa, a->mean1 + r0, a->rstd1 + r0, u, L->ln1w, L->ln1b, M, D, 1e-5f, 0);
		o->matmul_forward(ctx, qkv, aa, L->inw, L->inb, M, D, 3 * D);
		SB_TRY(o->attention_forward(ctx, att, a->S + h0 * n * n, a->P + h0 * n * n, a->aux + h0 * n * SB_NORM_AUX,
					    qkv, NULL, NULL, &m->softmax, nb, n, D, NH, err));
		o->matmul_forward(ctx, u1, att, L->outw, L->outb, M, D, D);
		m->lm->add(ctx, u1, u, (size_t)M * D);
		m->lm->norm_forward(ctx, c, a->mean2 + r0, a->rstd2 + r0, u1, L->ln2w, L->ln2b, M, D, 1e-5f, 0);
		o->matmul_forward(ctx, fpre, c, L->ff1w, L->ff1b, M, D, F);
		o->gelu_forward(ctx, f, NULL, train ? fpre : NULL, fpre, &nod, (size_t)M * F);
		o->matmul_forward(ctx, un, f, L->ff2w, L->ff2b, M, F, D);
		m->lm->add(ctx, un, u1, (size_t)M * D);
	}
	return 0;
}

/* forward of the router up to the representation m->h (float32) */
static int router_forward(struct sb_n3a_model *m, int B, int train, struct sb_err *err)
{
	const struct sb_backend_ops *o = m->be->ops;
	struct sb_ctx *ctx = m->ctx;
	const struct sb_dropout nod = {0};
	int M = B * m->n, D = SB_N3A_WIDTH;
	const struct params *P = &m->P;
	if (m->arch == SB_N3A_QUERY) {
		o->matmul_forward(ctx, m->h1, m->x, P->W1, P->b1, M, SB_N3A_FEAT, D);
		o->gelu_forward(ctx, m->g1, NULL, train ? m->h1 : NULL, m->h1, &nod, (size_t)M * D);
		o->matmul_forward(ctx, m->h2, m->g1, P->W2, P->b2, M, D, D);
		o->gelu_forward(ctx, m->h, NULL, train ? m->h2 : NULL, m->h2, &nod, (size_t)M * D);
		return 0;
	}
	for (int b0 = 0; b0 < B; b0 += N3A_CHUNK)
		SB_TRY(encoder_forward(m, b0, B - b0 < N3A_CHUNK ? B - b0 : N3A_CHUNK, train, err));
	m->h = m->U[SB_N3A_LAYERS];
	return 0;
}

/* the backward of encoder_forward on examples [b0, b0 + nb), from the gradient of its
 * output in m->dh's rows (overwritten), into the gradient arena */
static void encoder_backward(struct sb_n3a_model *m, int b0, int nb)
{
	const struct sb_backend_ops *o = m->be->ops;
	struct sb_ctx *ctx = m->ctx;
	int n = m->n, M = nb * n, D = SB_N3A_WIDTH, F = SB_N3A_FF, NH = SB_N3A_HEADS;
	size_t r0 = (size_t)b0 * n, h0 = (size_t)b0 * NH;
	const struct params *P = &m->P;
	const struct params *G = &m->G;
	float *du = m->dh + r0 * D; /* gradient of the residual stream, updated layer by layer */
	for (int l = SB_N3A_LAYERS - 1; l >= 0; l--) {
		const struct layer *L = &P->L[l];
		const struct layer *GL = &G->L[l];
		struct lacts *a = &m->A[l];
		const float *aa = a->a + r0 * D, *qkv = a->qkv + r0 * 3 * D, *att = a->att + r0 * D;
		const float *u1 = a->u1 + r0 * D, *c = a->c + r0 * D, *fpre = a->fpre + r0 * F, *f = a->f + r0 * F;
		o->matmul_backward(ctx, m->df, GL->ff2w, GL->ff2b, du, f, L->ff2w, M, F, D, 0);
		o->gelu_backward(ctx, m->df, m->df, fpre, NULL, 0, (size_t)M * F);
		o->matmul_backward(ctx, m->dc, GL->ff1w, GL->ff1b, m->df, c, L->ff1w, M, D, F, 0);
		m->lm->norm_backward(ctx, du, GL->ln2w, GL->ln2b, m->dc, u1, a->mean2 + r0, a->rstd2 + r0, L->ln2w, M, D,
				     0);
		o->matmul_backward(ctx, m->datt, GL->outw, GL->outb, du, att, L->outw, M, D, D, 0);
		o->attention_backward(ctx, m->dqkv, NULL, m->datt, qkv, a->S + h0 * n * n, a->P + h0 * n * n,
				      a->aux + h0 * n * SB_NORM_AUX, NULL, NULL, &m->softmax, nb, n, D, NH);
		o->matmul_backward(ctx, m->da, GL->inw, GL->inb, m->dqkv, aa, L->inw, M, D, 3 * D, 0);
		m->lm->norm_backward(ctx, du, GL->ln1w, GL->ln1b, m->da, m->U[l] + r0 * D, a->mean1 + r0, a->rstd1 + r0,
				     L->ln1w, M, D, 0);
	}
	o->matmul_backward(ctx, NULL, G->Win, G->bin, du, m->x + r0 * SB_N3A_FEAT, P->Win, M, SB_N3A_FEAT, D, 0);
}

/* backward of the router from dh = m->dh (overwritten) into the gradient arena */
static void router_backward(struct sb_n3a_model *m, int B)
{
	const struct sb_backend_ops *o = m->be->ops;
	struct sb_ctx *ctx = m->ctx;
	int M = B * m->n, D = SB_N3A_WIDTH;
	const struct params *P = &m->P;
	const struct params *G = &m->G;
	if (m->arch == SB_N3A_QUERY) {
		o->gelu_backward(ctx, m->dh, m->dh, m->h2, NULL, 0, (size_t)M * D);
		o->matmul_backward(ctx, m->dg, G->W2, G->b2, m->dh, m->g1, P->W2, M, D, D, 0);
		o->gelu_backward(ctx, m->dg, m->dg, m->h1, NULL, 0, (size_t)M * D);
		o->matmul_backward(ctx, NULL, G->W1, G->b1, m->dg, m->x, P->W1, M, SB_N3A_FEAT, D, 0);
		return;
	}
	for (int b0 = 0; b0 < B; b0 += N3A_CHUNK)
		encoder_backward(m, b0, B - b0 < N3A_CHUNK ? B - b0 : N3A_CHUNK);
}

static void gather(struct sb_n3a_model *m, const struct sb_n3a_data *d, const uint32_t *idx, int B)
{
	size_t n = (size_t)m->n;
	for (int b = 0; b < B; b++) {
		size_t e = idx[b];
		memcpy(m->x + b * n * SB_N3A_FEAT, d->x + e * n * SB_N3A_FEAT, n * SB_N3A_FEAT * sizeof(float));
		memcpy(m->v + b * n, d->v + e * n, n * sizeof(float));
		m->y[b] = d->y[e];
	}
}

static int forward_pass(struct sb_n3a_model *m, int arm, const struct sb_n3a_op *op, const struct sb_n3a_data *d,
			const uint32_t *idx, int B, int backward, const uint32_t *perm, double *loss, double *w_out,
			double *logit_out, struct sb_err *err)
{
	if (B < 1 || B > m->bmax || d->n != m->n || op->n != m->n)
		return SB_ERR(err, SB_EINTERNAL, "n3a forward: B %d (max %d), n %d/%d/%d", B, m->bmax, d->n, m->n, op->n);
	size_t M = (size_t)B * m->n;
	gather(m, d, idx, B);
	SB_TRY(router_forward(m, B, backward, err));
	scores(m->s, m->h, m->P.q, M);
	for (size_t i = 0; i < M; i++)
		m->s64[i] = (double)m->s[i];
	double drho = 0, dbias = 0;
	SB_TRY(sb_n3a_readout(arm, op, m->r, m->s64, m->v, m->y, B, (double)m->P.rho[0], (double)m->P.bias[0], perm,
			      m->w, m->st, m->logit, loss, backward ? m->ds : NULL, &drho, &dbias, err));
	if (w_out)
		memcpy(w_out, m->w, M * sizeof(double));
	if (logit_out)
		memcpy(logit_out, m->logit, (size_t)B * sizeof(double));
	if (!isfinite(*loss))
		return SB_ERR(err, SB_EVERDICT, "NON_FINITE_LOSS: batch-mean loss %g", *loss);
	if (!backward)
		return 0;
	memset(m->g, 0, m->np * sizeof *m->g);
	/* s = h . q / sqrt(D): dh = ds q / sqrt(D); dq = sum ds h / sqrt(D) (double, row order) */
	const float inv = 1.0f / sqrtf((float)SB_N3A_WIDTH);
	double dq[SB_N3A_WIDTH] = {0};
	size_t i = 0;
#if defined(__AVX512F__) /* the same per element, a vector of columns at a time */
	__m512d acc[SB_N3A_WIDTH / 8];
	for (int v = 0; v < SB_N3A_WIDTH / 8; v++)
		acc[v] = _mm512_setzero_pd();
	for (; i < M; i++) {
		float dsc = (float)m->ds[i] * inv;
		const float *hi = m->h + i * SB_N3A_WIDTH;
		float *dhi = m->dh + i * SB_N3A_WIDTH;
		__m512 vs = _mm512_set1_ps(dsc);
		__m512d vsd = _mm512_set1_pd((double)dsc);
		for (int c = 0; c < SB_N3A_WIDTH; c += 16)
			_mm512_storeu_ps(dhi + c, _mm512_mul_ps(vs, _mm512_loadu_ps(m->P.q + c)));
		for (int v = 0; v < SB_N3A_WIDTH / 8; v++)
			acc[v] = _mm512_add_pd(acc[v], _mm512_mul_pd(vsd, _mm512_cvtps_pd(_mm256_loadu_ps(hi + 8 * v))));
	}
	for (int v = 0; v < SB_N3A_WIDTH / 8; v++)
		_mm512_storeu_pd(dq + 8 * v, acc[v]);
#endif
	for (; i < M; i++) {
		float dsi = (float)m->ds[i];
		float dsc = dsi * inv;
		const float *hi = m->h + i * SB_N3A_WIDTH;
		float *dhi = m->dh + i * SB_N3A_WIDTH;
		for (int c = 0; c < SB_N3A_WIDTH; c++) {
			dhi[c] = dsc * m->P.q[c];
			dq[c] += (double)dsc * (double)hi[c];
		}
	}
	for (int c = 0; c < SB_N3A_WIDTH; c++)
		m->G.q[c] = (float)dq[c];
	m->G.rho[0] = (float)drho;
	m->G.bias[0] = (float)dbias;
	router_backward(m, B);
	double ss = m->be->ops->sumsq(m->ctx, m->g, m->np);
	if (!isfinite(ss))
		return SB_ERR(err, SB_EVERDICT, "NON_FINITE_GRADIENT: parameter gradient sum of squares %g", ss);
	return 0;
}

int sb_n3a_model_forward(struct sb_n3a_model *m, int arm, const struct sb_n3a_op *op, const struct sb_n3a_data *d,
			 const uint32_t *idx, int B, int backward, const uint32_t *perm, double *loss, double *w_out,
			 double *logit_out, struct sb_err *err)
{
	SB_TRY(forward_pass(m, arm, op, d, idx, B, backward, perm, loss, w_out, logit_out, err));
	const char *after = backward ? "a forward and backward pass" : "a forward pass";
	SB_TRY(sb_redzone_check(m->be, NULL, &m->rz, after, "the N3-A model", err));
	return sb_be_tails_check(m->be, after, err);
}

void *sb_n3a_model_zone(const struct sb_n3a_model *m, int i)
{
	return sb_redzone_at(NULL, &m->rz, i);
}

int sb_n3a_model_eval(struct sb_n3a_model *m, int arm, const struct sb_n3a_op *op, const struct sb_n3a_data *d,
		      struct sb_n3a_eval *ev, struct sb_err *err)
{
	memset(ev, 0, sizeof *ev);
	uint32_t *idx = malloc((size_t)m->bmax * sizeof *idx);
	if (!idx)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	double lsum = 0, correct = 0, mass = 0, ent = 0, supp = 0;
	int n = m->n, rc = 0;
	for (int e0 = 0; e0 < d->N && !rc; e0 += m->bmax) {
		int B = d->N - e0 < m->bmax ? d->N - e0 : m->bmax;
		for (int b = 0; b < B; b++)
			idx[b] = (uint32_t)(e0 + b);
		double loss;
		rc = sb_n3a_model_forward(m, arm, op, d, idx, B, 0, NULL, &loss, NULL, NULL, err);
		if (rc)
			break;
		for (int b = 0; b < B; b++) {
			double x = m->logit[b], y = (double)m->y[b];
			lsum += (x > 0 ? x : 0) - x * y + log1p(exp(-fabs(x)));
			correct += (x >= 0) == (y > 0.5);
			const double *wb = m->w + (size_t)b * n;
			const uint8_t *zb = d->z + (size_t)(e0 + b) * n;
			double ms = 0, en = 0, sp = 0;
			for (int i = 0; i < n; i++) {
				if (zb[i])
					ms += wb[i];
				if (wb[i] > 0) {
					en -= wb[i] * log(wb[i]);
					sp += 1;
				}
			}
			mass += ms;
			ent += en;
			supp += sp;
		}
	}
	free(idx);
	if (rc)
		return rc;
	double N = d->N;
	ev->ce = lsum / N;
	ev->accuracy = correct / N;
	ev->relevant_mass = mass / N;
	ev->entropy = ent / N;
	ev->support = supp / N;
	ev->gamma = softplus((double)m->P.rho[0]);
	if (!isfinite(ev->ce))
		return SB_ERR(err, SB_EVERDICT, "NON_FINITE_LOSS: validation cross-entropy %g", ev->ce);
	return 0;
}

void sb_n3a_model_adamw(struct sb_n3a_model *m, float *mom1, float *mom2, int64_t t, float lr, float b1, float b2,
			float eps, float wd)
{
	m->be->ops->adamw(m->ctx, m->p, mom1, mom2, m->g, m->np, lr, b1, b2, eps, wd, t);
}
