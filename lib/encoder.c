/* encoder.c — the encoder classifier (PROTOCOL A2) on a backend: parameter
 * table, initialisation, the per-tile forward and backward passes, the training
 * step (gradient slots, reduction, clipping, AdamW) and evaluation. */
#include "encoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "io.h"
#include "redzone.h"
#include "rng.h"

/* ------------------------------------------------------------------ config */

int sb_encoder_tier(const char *name, int *layers, int *d, int *heads)
{
	static const struct {
		const char *n;
		int l, d, h;
	} t[] = {{"compact", 2, 64, 4}, {"medium", 4, 128, 4}, {"deep", 4, 64, 4}, {"wide", 2, 128, 4}};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(name, t[i].n)) {
			*layers = t[i].l;
			*d = t[i].d;
			*heads = t[i].h;
			return 0;
		}
	return -1;
}

int sb_encoder_arch_parse(const char *name, enum sb_arch *out)
{
	if (!strcmp(name, "plain") || !strcmp(name, "plain_transformer")) {
		*out = SB_ARCH_PLAIN;
		return 0;
	}
	if (!strcmp(name, "local_hybrid")) {
		*out = SB_ARCH_LOCAL_HYBRID;
		return 0;
	}
	return -1;
}

const char *sb_encoder_arch_name(enum sb_arch a)
{
	return a == SB_ARCH_LOCAL_HYBRID ? "local_hybrid" : "plain";
}

int sb_encoder_cfg_from_dataset(struct sb_encoder_cfg *cfg, const struct sb_dataset *ds, const char *tier,
                                const char *arch, const struct sb_norm *nm, struct sb_err *err)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->modality = ds->modality;
	cfg->classes = ds->classes;
	if (ds->modality == SB_IMAGE) {
		cfg->channels = ds->C;
		cfg->height = ds->H;
		cfg->width = ds->W;
		cfg->patch = ds->patch;
	} else {
		cfg->seq_len = ds->L;
		cfg->vocab = ds->vocab;
	}
	if (sb_encoder_tier(tier, &cfg->layers, &cfg->d, &cfg->heads))
		return SB_ERR(err, SB_EUSAGE, "unknown tier '%s' (compact, medium, deep, wide)", tier);
	if (sb_encoder_arch_parse(arch, &cfg->arch))
		return SB_ERR(err, SB_EUSAGE, "unknown architecture '%s' (plain, local_hybrid)", arch);
	cfg->norm = *nm;
	cfg->dropout = 0.1f;
	return 0;
}

/* ------------------------------------------------------------------ parameter table */

struct ptable {
	struct sb_param_info *t;
	int n, cap;
	size_t off;
	int zones; /* SB_ARENA_CHECK: 16 floats more after each tensor (param_zones) */
};

static int padd(struct ptable *pt, const char *name, int ndim, const int64_t *shape, enum sb_init init, float a)
{
	if (pt->n == pt->cap) {
		int cap = pt->cap ? 2 * pt->cap : 64;
		void *p = realloc(pt->t, (size_t)cap * sizeof *pt->t);
		if (!p)
			return -1;
		pt->t = p;
		pt->cap = cap;
	}
	struct sb_param_info *q = &pt->t[pt->n++];
	memset(q, 0, sizeof *q);
	snprintf(q->name, sizeof q->name, "%s", name);
	q->ndim = ndim;
	size_t numel = 1;
	for (int i = 0; i < ndim; i++) {
		q->shape[i] = shape[i];
		numel *= (size_t)shape[i];
	}
	q->numel = numel;
	q->offset = pt->off;
	pt->off += ((numel + 15) & ~(size_t)15) + (pt->zones ? 16 : 0); /* 64-byte aligned tensors */
	q->init = init;
	q->a = a;
	return 0;
}

#define P1(n0) ((const int64_t[]){(n0)})
#define P2(n0, n1) ((const int64_t[]){(n0), (n1)})
#define P3(n0, n1, n2) ((const int64_t[]){(n0), (n1), (n2)})
#define P4(n0, n1, n2, n3) ((const int64_t[]){(n0), (n1), (n2), (n3)})

static float ubound(int fan_in)
{
	return (float)(1.0 / sqrt((double)fan_in));
}

/* SB_ARENA_CHECK: the zones between the tensors of the parameter table (each tensor's
 * rounding to 16 floats and 16 floats more), zero in the parameters, the gradients, each
 * gradient slot (the dense tensors' zones: the first pzones_dense) and both moments. */
static int param_zones(struct sb_encoder *m, size_t end, struct sb_err *err)
{
	m->pzones = calloc(1, sizeof *m->pzones);
	if (!m->pzones)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	*m->pzones = (struct sb_redzones){.on = 1, .zero = 1, .file = "lib/encoder.c"};
	if (!(m->plain_off = malloc((size_t)m->ntensors * sizeof *m->plain_off)))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	size_t plain = 0; /* padd's offsets without the zones */
	for (int i = 0; i < m->ntensors; i++) {
		m->plain_off[i] = plain;
		plain += (m->pinfo[i].numel + 15) & ~(size_t)15;
	}
	m->plain_stride = (plain + 255) & ~(size_t)255;
	for (int i = 0; i < m->ntensors; i++) {
		const struct sb_param_info *q = &m->pinfo[i];
		size_t lo = q->offset + q->numel, hi = i + 1 < m->ntensors ? m->pinfo[i + 1].offset : end;
		if (sb_redzone_push(m->pzones, lo * sizeof(float), (hi - lo) * sizeof(float), q->numel * sizeof(float),
		                    q->name))
			return SB_ERR(err, SB_EINTERNAL, "out of memory (parameter zones)");
		if (hi <= m->dense_n)
			m->pzones_dense = i + 1;
	}
	return 0;
}

static void free_zones(struct sb_encoder *m)
{
	if (m->pzones)
		sb_redzone_free(m->pzones);
	free(m->pzones);
	m->pzones = NULL;
	free(m->plain_off);
	m->plain_off = NULL;
}

static int build_table(struct sb_encoder *m, struct sb_err *err)
{
	const struct sb_encoder_cfg *c = &m->cfg;
	struct ptable pt = {.zones = m->arena_check};
	int d = c->d, rc = 0;
	char nm[64];
	if (c->modality == SB_IMAGE) {
		rc |= padd(&pt, "embed.weight", 2, P2(d, m->P), SB_INIT_UNIFORM, ubound(m->P));
		rc |= padd(&pt, "embed.bias", 1, P1(d), SB_INIT_UNIFORM, ubound(m->P));
	} /* text: the token table goes last (below), outside the gradient slots */
	rc |= padd(&pt, "cls", 1, P1(d), SB_INIT_NORMAL, 0.02f);
	rc |= padd(&pt, "pos", 2, P2(m->T, d), SB_INIT_NORMAL, 0.02f);
	for (int l = 0; l < c->layers; l++) {
#define NAME(s) (snprintf(nm, sizeof nm, "blocks.%d.%s", l, s), nm)
		if (c->arch == SB_ARCH_LOCAL_HYBRID) {
			int kk = m->G > 0 ? 9 : 3;
			rc |= padd(&pt, NAME("mixer.ln.weight"), 1, P1(d), SB_INIT_CONST, 1.0f);
			rc |= padd(&pt, NAME("mixer.ln.bias"), 1, P1(d), SB_INIT_CONST, 0.0f);
			if (m->G > 0)
				rc |= padd(&pt, NAME("mixer.conv.weight"), 4, P4(d, 1, 3, 3), SB_INIT_UNIFORM,
				           ubound(kk));
			else
				rc |= padd(&pt, NAME("mixer.conv.weight"), 3, P3(d, 1, 3), SB_INIT_UNIFORM, ubound(kk));
			rc |= padd(&pt, NAME("mixer.conv.bias"), 1, P1(d), SB_INIT_UNIFORM, ubound(kk));
			rc |= padd(&pt, NAME("mixer.scale"), 1, P1(1), SB_INIT_CONST, 0.1f);
		}
		rc |= padd(&pt, NAME("attn.qkv.weight"), 2, P2(3 * d, d), SB_INIT_UNIFORM, ubound(d));
		rc |= padd(&pt, NAME("attn.qkv.bias"), 1, P1(3 * d), SB_INIT_UNIFORM, ubound(d));
		rc |= padd(&pt, NAME("attn.out.weight"), 2, P2(d, d), SB_INIT_UNIFORM, ubound(d));
		rc |= padd(&pt, NAME("attn.out.bias"), 1, P1(d), SB_INIT_UNIFORM, ubound(d));
		if (c->norm.kind == SB_NORM_ADAPTIVE)
			rc |= padd(&pt, NAME("attn.alpha_raw"), 1, P1(c->heads), SB_INIT_CONST, 0.0f);
		rc |= padd(&pt, NAME("ln1.weight"), 1, P1(d), SB_INIT_CONST, 1.0f);
		rc |= padd(&pt, NAME("ln1.bias"), 1, P1(d), SB_INIT_CONST, 0.0f);
		rc |= padd(&pt, NAME("ff.fc1.weight"), 2, P2(m->ff, d), SB_INIT_UNIFORM, ubound(d));
		rc |= padd(&pt, NAME("ff.fc1.bias"), 1, P1(m->ff), SB_INIT_UNIFORM, ubound(d));
		rc |= padd(&pt, NAME("ff.fc2.weight"), 2, P2(d, m->ff), SB_INIT_UNIFORM, ubound(m->ff));
		rc |= padd(&pt, NAME("ff.fc2.bias"), 1, P1(d), SB_INIT_UNIFORM, ubound(m->ff));
		rc |= padd(&pt, NAME("ln2.weight"), 1, P1(d), SB_INIT_CONST, 1.0f);
		rc |= padd(&pt, NAME("ln2.bias"), 1, P1(d), SB_INIT_CONST, 0.0f);
#undef NAME
	}
	rc |= padd(&pt, "head.weight", 2, P2(c->classes, d), SB_INIT_UNIFORM, ubound(d));
	rc |= padd(&pt, "head.bias", 1, P1(c->classes), SB_INIT_UNIFORM, ubound(d));
	/* the dense part: what the gradient slots hold (the token table's gradient is
	 * scattered once per batch from the tiles' embedding gradients instead) */
	m->dense_n = pt.off;
	if (c->modality == SB_TEXT)
		rc |= padd(&pt, "embed.weight", 2, P2(c->vocab, d), SB_INIT_EMBEDDING, 1.0f);
	if (rc) {
		free(pt.t);
		return SB_ERR(err, SB_EINTERNAL, "out of memory building the parameter table");
	}
	m->pinfo = pt.t;
	m->ntensors = pt.n;
	m->pstride = (pt.off + 255) & ~(size_t)255;
	m->dstride = (m->dense_n + 255) & ~(size_t)255;
	m->nparams = 0;
	for (int i = 0; i < pt.n; i++)
		m->nparams += pt.t[i].numel;
	return m->arena_check ? param_zones(m, pt.off, err) : 0;
}

static const struct sb_param_info *pfind(const struct sb_encoder *m, const char *name)
{
	for (int i = 0; i < m->ntensors; i++)
		if (!strcmp(m->pinfo[i].name, name))
			return &m->pinfo[i];
	return NULL;
}

void sb_encoder_ptrs(const struct sb_encoder *m, float *base, struct sb_model_ptrs *o)
{
	memset(o, 0, sizeof *o);
	const struct sb_param_info *q;
	char nm[64];
#define AT(name) ((q = pfind(m, name)) ? base + q->offset : NULL)
	o->embed_w = AT("embed.weight");
	o->embed_b = AT("embed.bias");
	o->cls = AT("cls");
	o->pos = AT("pos");
	for (int l = 0; l < m->cfg.layers; l++) {
		struct sb_layer_ptrs *L = &o->l[l];
#define LAT(s) (snprintf(nm, sizeof nm, "blocks.%d.%s", l, s), AT(nm))
		L->mix_lnw = LAT("mixer.ln.weight");
		L->mix_lnb = LAT("mixer.ln.bias");
		L->mix_cw = LAT("mixer.conv.weight");
		L->mix_cb = LAT("mixer.conv.bias");
		L->mix_scale = LAT("mixer.scale");
		L->qkv_w = LAT("attn.qkv.weight");
		L->qkv_b = LAT("attn.qkv.bias");
		L->out_w = LAT("attn.out.weight");
		L->out_b = LAT("attn.out.bias");
		L->alpha_raw = LAT("attn.alpha_raw");
		L->ln1_w = LAT("ln1.weight");
		L->ln1_b = LAT("ln1.bias");
		L->fc1_w = LAT("ff.fc1.weight");
		L->fc1_b = LAT("ff.fc1.bias");
		L->fc2_w = LAT("ff.fc2.weight");
		L->fc2_b = LAT("ff.fc2.bias");
		L->ln2_w = LAT("ln2.weight");
		L->ln2_b = LAT("ln2.bias");
#undef LAT
	}
	o->head_w = AT("head.weight");
	o->head_b = AT("head.bias");
#undef AT
}

size_t sb_encoder_param_count(const struct sb_encoder *m)
{
	return m->nparams;
}

/* ------------------------------------------------------------------ arena */

struct layer_acts {
	float *xm, *my, *mz, *mmean, *mrstd;
	float *qkv, *S, *P, *aux, *att;
	float *r1, *mean1, *rstd1, *x1;
	uint8_t *mask1, *maskh, *mask2;
	float *h, *g;
	float *r2, *mean2, *rstd2, *xout;
};

struct sb_encoder_arena {
	void *base;
	size_t bytes;
	struct sb_redzones rz; /* SB_ARENA_CHECK (redzone.h): after each buffer */
	float *patches, *emb, *x0, *tmp, *cls_out, *logits, *dlogits;
	int32_t *ids, *nvalid, *labels;
	struct layer_acts la[SB_ENCODER_MAX_LAYERS];
	float *dx, *dxa, *dxb, *dtmp, *dqkv, *dh, *datt, *dcls, *demb, *dalpha;
};

/* bump allocation: with base NULL only counts (bytes, and red zones) */
struct bump {
	char *base;
	size_t off;
	struct sb_redzones *rz;
};
static void *bget(struct bump *b, size_t bytes, int line)
{
	size_t o = sb_redzone_take(b->rz, &b->off, bytes, line);
	return b->base ? b->base + o : NULL;
}
#define BF(b, n) ((float *)bget((b), (size_t)(n) * sizeof(float), __LINE__))
#define BI(b, n) ((int32_t *)bget((b), (size_t)(n) * sizeof(int32_t), __LINE__))
#define BU(b, n) ((uint8_t *)bget((b), (size_t)(n), __LINE__))

static void arena_layout(const struct sb_encoder *m, struct sb_encoder_arena *a, struct bump *b)
{
	const struct sb_encoder_cfg *c = &m->cfg;
	size_t B = (size_t)m->tile, T = m->T, L = m->L, d = c->d, n = B * T, ff = m->ff, NH = c->heads;
	int hybrid = c->arch == SB_ARCH_LOCAL_HYBRID;
	a->patches = c->modality == SB_IMAGE ? BF(b, B * L * m->P) : NULL;
	a->ids = c->modality == SB_TEXT ? BI(b, B * L) : NULL;
	a->nvalid = BI(b, B);
	a->labels = BI(b, B);
	a->emb = BF(b, B * L * d);
	a->x0 = BF(b, n * d);
	a->tmp = BF(b, n * d);
	a->cls_out = BF(b, B * d);
	a->logits = BF(b, B * c->classes);
	a->dlogits = BF(b, B * c->classes);
	for (int l = 0; l < c->layers; l++) {
		struct layer_acts *la = &a->la[l];
		memset(la, 0, sizeof *la);
		if (hybrid) {
			la->xm = BF(b, n * d);
			la->my = BF(b, B * L * d);
			la->mz = BF(b, B * L * d);
			la->mmean = BF(b, B * L);
			la->mrstd = BF(b, B * L);
		}
		la->qkv = BF(b, n * 3 * d);
		la->S = BF(b, B * NH * T * T);
		la->P = BF(b, B * NH * T * T);
		la->aux = BF(b, B * NH * T * SB_NORM_AUX);
		la->att = BF(b, n * d);
		la->r1 = BF(b, n * d);
		la->mean1 = BF(b, n);
		la->rstd1 = BF(b, n);
		la->mask1 = BU(b, n * d);
		la->x1 = BF(b, n * d);
		la->h = BF(b, n * ff);
		la->g = BF(b, n * ff);
		la->maskh = BU(b, n * ff);
		la->r2 = BF(b, n * d);
		la->mean2 = BF(b, n);
		la->rstd2 = BF(b, n);
		la->mask2 = BU(b, n * d);
		la->xout = BF(b, n * d);
	}
	a->dx = BF(b, n * d);
	a->dxa = BF(b, n * d);
	a->dxb = BF(b, n * d);
	a->dtmp = BF(b, n * d);
	a->dqkv = BF(b, n * 3 * d);
	a->dh = BF(b, n * ff);
	a->datt = BF(b, n * d);
	a->dcls = BF(b, B * d);
	a->demb = BF(b, B * L * d);
	a->dalpha = BF(b, NH);
}

static void arena_free(struct sb_backend *be, struct sb_encoder_arena *a)
{
	if (!a)
		return;
	sb_be_free(be, a->base);
	sb_redzone_free(&a->rz);
	free(a);
}

static struct sb_encoder_arena *arena_new(struct sb_encoder *m)
{
	struct sb_encoder_arena *a = calloc(1, sizeof *a);
	if (!a)
		return NULL;
	a->rz = (struct sb_redzones){.on = m->arena_check, .file = "lib/encoder.c"};
	struct bump b = {NULL, 0, &a->rz};
	arena_layout(m, a, &b);
	a->bytes = b.off;
	a->base = sb_be_alloc(m->be, a->bytes);
	struct sb_err e = {0};
	if (!a->base || sb_redzone_alloc(&a->rz)) {
		arena_free(m->be, a);
		return NULL;
	}
	b = (struct bump){a->base, 0, &a->rz};
	arena_layout(m, a, &b);
	if (sb_redzone_fill(m->be, a->base, &a->rz, &e)) {
		arena_free(m->be, a);
		return NULL;
	}
	return a;
}

static int param_zones_each(struct sb_encoder *m, const char *after, struct sb_err *err);

/* The red zones still hold their bytes (SB_ARENA_CHECK); `after` names what just ran. */
static int arena_verify(struct sb_encoder *m, const char *after, struct sb_err *err)
{
	if (!m->arena_check)
		return 0;
	for (int w = 0; w < m->nworkers; w++) {
		char owner[40];
		snprintf(owner, sizeof owner, "worker %d's arena", w);
		SB_TRY(sb_redzone_check(m->be, m->arena[w]->base, &m->arena[w]->rz, after, owner, err));
	}
	SB_TRY(sb_be_tails_check(m->be, after, err));
	return m->pzones ? param_zones_each(m, after, err) : 0;
}

/* The buffers laid out like the parameter table (param_zones): their bases, names and
 * whether only the dense tensors' zones are theirs (the gradient slots); the count. */
enum { PZ_BUFS_MAX = 4 + 64 };
static int pz_buffers(const struct sb_encoder *m, float **base, char (*name)[32], int *dense)
{
	/* in the order a stray write spreads (slots, gradients, then AdamW's), so that the
	 * first reported is where it was made */
	int n = 0;
	if (m->slots != m->grads)
		for (int s = 0; s < m->nslots_max && n < PZ_BUFS_MAX - 4; s++, n++) {
			base[n] = m->slots + (size_t)s * m->dstride;
			snprintf(name[n], sizeof name[n], "gradient slot %d", s);
			dense[n] = 1;
		}
	float *fixed[4] = {m->grads, m->m, m->v, m->params};
	const char *fname[4] = {"the gradients", "the first moments", "the second moments", "the parameters"};
	for (int i = 0; i < 4; i++, n++) {
		base[n] = fixed[i];
		snprintf(name[n], sizeof name[n], "%s", fname[i]);
		dense[n] = 0;
	}
	return n;
}

/* the zones of buffer k of pz_buffers: all, or the dense tensors' */
static struct sb_redzones pz_of(const struct sb_encoder *m, int dense)
{
	struct sb_redzones r = *m->pzones;
	if (dense)
		r.n = r.cap = m->pzones_dense;
	return r;
}

/* Fill the zones of every buffer laid out like the table (after NULL), or check them */
static int param_zones_each(struct sb_encoder *m, const char *after, struct sb_err *err)
{
	float *base[PZ_BUFS_MAX];
	char name[PZ_BUFS_MAX][32];
	int dense[PZ_BUFS_MAX];
	int n = pz_buffers(m, base, name, dense);
	for (int k = 0; k < n; k++) {
		struct sb_redzones r = pz_of(m, dense[k]);
		SB_TRY(after ? sb_redzone_check(m->be, base[k], &r, after, name[k], err)
		             : sb_redzone_fill(m->be, base[k], &r, err));
	}
	return 0;
}

void *sb_encoder_param_zone(const struct sb_encoder *m, const float *buffer, int i)
{
	if (!m->pzones)
		return NULL;
	int dense = m->slots != m->grads && buffer >= m->slots &&
	            buffer < m->slots + (size_t)m->nslots_max * m->dstride;
	struct sb_redzones r = pz_of(m, dense);
	return sb_redzone_at(buffer, &r, i);
}

void *sb_encoder_arena_zone(const struct sb_encoder *m, int worker, int i)
{
	if (worker < 0 || worker >= m->nworkers)
		return NULL;
	return sb_redzone_at(m->arena[worker]->base, &m->arena[worker]->rz, i);
}

/* ------------------------------------------------------------------ new / free */

static int acc_reset(struct sb_encoder *m, struct sb_err *err)
{
	struct sb_step_acc a;
	sb_step_acc_reset(&a);
	return m->be->ops->upload(m->be, m->acc_dev, &a, sizeof a, err);
}

int sb_encoder_new(const struct sb_encoder_cfg *cfg, struct sb_backend *be, int max_batch, struct sb_encoder **out,
                   struct sb_err *err)
{
	const struct sb_encoder_cfg *c = cfg;
	if (c->layers < 1 || c->layers > SB_ENCODER_MAX_LAYERS || c->d < 1 || c->heads < 1 || c->d % c->heads)
		return SB_ERR(err, SB_EUSAGE, "invalid model shape: %d layers, d %d, %d heads", c->layers, c->d,
		              c->heads);
	if (c->classes < 2)
		return SB_ERR(err, SB_EDATA, "a classifier needs at least 2 classes (got %d)", c->classes);
	if (max_batch < 1)
		return SB_ERR(err, SB_EUSAGE, "batch size must be >= 1");
	struct sb_encoder *m = calloc(1, sizeof *m);
	if (!m)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	m->cfg = *cfg;
	m->be = be;
	m->ff = 4 * c->d;
	if (c->modality == SB_IMAGE) {
		if (c->patch < 1 || c->height < c->patch || c->width < c->patch || c->channels < 1) {
			free(m);
			return SB_ERR(err, SB_EDATA, "image %dx%dx%d cannot be cut into %dx%d patches", c->channels,
			              c->height, c->width, c->patch, c->patch);
		}
		int gh = c->height / c->patch, gw = c->width / c->patch;
		m->L = gh * gw;
		m->P = c->channels * c->patch * c->patch;
		m->G = gh == gw ? gh : -1;
		if (c->arch == SB_ARCH_LOCAL_HYBRID && m->G < 0) {
			free(m);
			return SB_ERR(err, SB_EDATA, "local_hybrid needs a square patch grid (got %dx%d)", gh, gw);
		}
	} else {
		if (c->seq_len < 1 || c->vocab < 2) {
			free(m);
			return SB_ERR(err, SB_EDATA, "text model needs seq_len >= 1 and vocab >= 2");
		}
		m->L = c->seq_len;
		m->G = 0;
	}
	m->T = m->L + 1;
	m->arena_check = sb_redzone_wanted();
	int rc = build_table(m, err);
	if (rc) {
		free_zones(m);
		free(m->pinfo);
		free(m);
		return rc;
	}
	m->max_batch = max_batch;
	m->tile = be->tile > 0 && be->tile < max_batch ? be->tile : max_batch;
	m->ntiles_max = (max_batch + m->tile - 1) / m->tile;
	m->nslots_max = be->slots > 0 ? (be->slots < m->ntiles_max ? be->slots : m->ntiles_max) : 1;
	size_t pbytes = m->pstride * sizeof(float);
	m->params = sb_be_alloc(be, pbytes);
	m->grads = sb_be_alloc(be, pbytes);
	/* one slot: it is the gradient buffer itself (reduce_slots of one slot in place is a no-op) */
	m->slots = m->nslots_max == 1 ? m->grads : sb_be_alloc(be, m->dstride * sizeof(float) * (size_t)m->nslots_max);
	m->m = sb_be_alloc(be, pbytes);
	m->v = sb_be_alloc(be, pbytes);
	m->alpha = sb_be_alloc(be, (size_t)c->layers * c->heads * sizeof(float));
	m->state_dev = sb_be_alloc(be, sizeof(struct sb_step_state) + (size_t)max_batch * sizeof(uint32_t));
	m->idx_dev = m->state_dev ? (uint32_t *)(m->state_dev + 1) : NULL;
	m->acc_dev = sb_be_alloc(be, sizeof(struct sb_step_acc));
	m->stage = malloc(sizeof(struct sb_step_state) + (size_t)max_batch * sizeof(uint32_t));
	m->use_graphs = 1;
	m->out_loss = sb_be_alloc(be, (size_t)max_batch * sizeof(float));
	m->out_pred = sb_be_alloc(be, (size_t)max_batch * sizeof(int32_t));
	m->out_labels = sb_be_alloc(be, (size_t)max_batch * sizeof(int32_t));
	m->out_logits = sb_be_alloc(be, (size_t)max_batch * c->classes * sizeof(float));
	m->tile_stats = calloc((size_t)m->ntiles_max, sizeof *m->tile_stats);
	m->host_loss = calloc((size_t)max_batch, sizeof *m->host_loss);
	if (c->modality == SB_TEXT) {
		m->demb_all = sb_be_alloc(be, (size_t)max_batch * m->L * c->d * sizeof(float));
		m->ids_all = sb_be_alloc(be, (size_t)max_batch * m->L * sizeof(int32_t));
	}
	if (m->pzones)
		m->plain = sb_be_alloc(be, m->plain_stride * sizeof(float));
	m->nworkers = be->threads > 0 ? be->threads : 1;
	m->arena = calloc((size_t)m->nworkers, sizeof *m->arena);
	int ok = m->params && m->slots && m->grads && m->m && m->v && m->alpha && m->idx_dev && m->acc_dev &&
	         (!m->pzones || m->plain) &&
	         m->stage && m->out_loss &&
	         m->out_pred && m->out_labels && m->out_logits && m->tile_stats && m->host_loss && m->arena &&
	         (c->modality == SB_IMAGE || (m->demb_all && m->ids_all));
	for (int w = 0; ok && w < m->nworkers; w++)
		ok = (m->arena[w] = arena_new(m)) != NULL;
	if (!ok) {
		sb_encoder_free(m);
		return SB_ERR(err, SB_EINTERNAL, "out of memory allocating the model (%zu parameters, batch %d)",
		              m->nparams, max_batch);
	}
	sb_encoder_ptrs(m, m->params, &m->p);
	sb_encoder_ptrs(m, m->grads, &m->g);
	if ((m->pzones && (rc = param_zones_each(m, NULL, err))) || (rc = acc_reset(m, err))) {
		sb_encoder_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void sb_encoder_free(struct sb_encoder *m)
{
	if (!m)
		return;
	struct sb_backend *be = m->be;
	sb_encoder_graph_reset(m);
	sb_be_free(be, m->params);
	if (m->slots != m->grads)
		sb_be_free(be, m->slots);
	sb_be_free(be, m->grads);
	sb_be_free(be, m->keep_datt);
	sb_be_free(be, m->m);
	sb_be_free(be, m->v);
	sb_be_free(be, m->plain);
	sb_be_free(be, m->alpha);
	sb_be_free(be, m->state_dev);
	sb_be_free(be, m->acc_dev);
	free(m->stage);
	sb_be_free(be, m->out_loss);
	sb_be_free(be, m->out_pred);
	sb_be_free(be, m->out_labels);
	sb_be_free(be, m->out_logits);
	sb_be_free(be, m->demb_all);
	sb_be_free(be, m->ids_all);
	if (m->arena)
		for (int w = 0; w < m->nworkers; w++)
			arena_free(be, m->arena[w]);
	free(m->arena);
	free(m->tile_stats);
	free(m->host_loss);
	free_zones(m);
	free(m->pinfo);
	free(m);
}

int sb_encoder_set_norm(struct sb_encoder *m, const struct sb_norm *nm, struct sb_err *err)
{
	if ((nm->kind == SB_NORM_ADAPTIVE) != (m->cfg.norm.kind == SB_NORM_ADAPTIVE))
		return SB_ERR(err, SB_EINTERNAL, "cannot switch to or from headwise_adaptive_entmax in a built model");
	m->cfg.norm = *nm;
	return 0;
}

/* ------------------------------------------------------------------ init */

static uint64_t fnv1a64(const char *s)
{
	uint64_t h = 14695981039346656037ull;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h;
}

int sb_encoder_init(struct sb_encoder *m, uint64_t seed, struct sb_err *err)
{
	float *host = calloc(m->pstride, sizeof *host);
	if (!host)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int i = 0; i < m->ntensors; i++) {
		const struct sb_param_info *q = &m->pinfo[i];
		float *p = host + q->offset;
		struct sb_rng r;
		sb_rng_init(&r, seed, SB_RNG_INIT, fnv1a64(q->name));
		for (size_t e = 0; e < q->numel; e++) {
			switch (q->init) {
			case SB_INIT_UNIFORM:
				p[e] = (float)((2.0 * sb_rng_uniform(&r) - 1.0) * q->a);
				break;
			case SB_INIT_NORMAL:
				p[e] = (float)(sb_rng_normal(&r) * q->a);
				break;
			case SB_INIT_EMBEDDING:
				p[e] = (float)(sb_rng_normal(&r) * q->a);
				break;
			case SB_INIT_CONST:
				p[e] = q->a;
				break;
			}
		}
		if (q->init == SB_INIT_EMBEDDING) /* padding_idx = 0 */
			memset(p, 0, (size_t)q->shape[1] * sizeof *p);
	}
	struct sb_backend *be = m->be;
	int rc = be->ops->upload(be, m->params, host, m->pstride * sizeof *host, err);
	free(host);
	if (rc)
		return rc;
	be->ops->zero(sb_be_main(be), m->m, m->pstride * sizeof(float));
	be->ops->zero(sb_be_main(be), m->v, m->pstride * sizeof(float));
	m->adam_t = 0;
	return acc_reset(m, err);
}

/* ------------------------------------------------------------------ data */

int sb_encoder_data_open(struct sb_backend *be, const struct sb_dataset *ds, struct sb_encoder_data *out,
                         struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	out->n = ds->n;
	if (!strcmp(be->name, "cpu")) { /* borrow the host arrays */
		out->images = ds->x_u8;
		out->tokens = ds->x_i32;
		out->len = ds->len;
		out->labels = ds->y;
		return 0;
	}
	out->owned = 1;
	size_t n = (size_t)ds->n;
	struct {
		const void *src;
		size_t bytes;
		const void **dst;
	} a[] = {
	    {ds->x_u8, ds->x_u8 ? n * ds->C * ds->H * ds->W : 0, (const void **)&out->images},
	    {ds->x_i32, ds->x_i32 ? n * ds->L * sizeof(int32_t) : 0, (const void **)&out->tokens},
	    {ds->len, ds->len ? n * sizeof(int32_t) : 0, (const void **)&out->len},
	    {ds->y, n * sizeof(int32_t), (const void **)&out->labels},
	};
	for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
		if (!a[i].src)
			continue;
		void *p = sb_be_alloc(be, a[i].bytes);
		if (!p) {
			sb_encoder_data_close(be, out);
			return SB_ERR(err, SB_EINTERNAL, "out of device memory for the dataset");
		}
		int rc = be->ops->upload(be, p, a[i].src, a[i].bytes, err);
		*a[i].dst = p;
		if (rc) {
			sb_encoder_data_close(be, out);
			return rc;
		}
	}
	return 0;
}

void sb_encoder_data_close(struct sb_backend *be, struct sb_encoder_data *d)
{
	if (d->owned) {
		sb_be_free(be, (void *)d->images);
		sb_be_free(be, (void *)d->tokens);
		sb_be_free(be, (void *)d->len);
		sb_be_free(be, (void *)d->labels);
	}
	memset(d, 0, sizeof *d);
}

/* ------------------------------------------------------------------ forward / backward of a tile */

struct pass {
	struct sb_encoder *m;
	const struct sb_encoder_data *data;
	const struct sb_step_opts *o; /* NULL: evaluation */
	int B;                        /* whole batch */
	int ntiles, nslots;
	int stats;
	const int64_t *step_dev; /* dropout streams from the device step (sb_encoder_step), else o->step */
};

static int tile_forward(struct sb_ctx *ctx, struct sb_encoder_arena *a, const struct pass *ps, int b0, int B,
                        struct sb_attn_stats *st, struct sb_err *err)
{
	struct sb_encoder *m = ps->m;
	const struct sb_backend_ops *ops = m->be->ops;
	const struct sb_encoder_cfg *c = &m->cfg;
	const struct sb_model_ptrs *P = &m->p;
	int T = m->T, L = m->L, d = c->d, NH = c->heads, n = B * T, ff = m->ff;
	const uint32_t *idx = m->idx_dev + b0;
	int32_t *nvalid = NULL;
	float p = ps->o ? ps->o->dropout : 0.0f;
	if (c->modality == SB_IMAGE) {
		ops->patchify(ctx, a->patches, ps->data->images, idx, B, c->channels, c->height, c->width, c->patch);
		ops->matmul_forward(ctx, a->emb, a->patches, P->embed_w, P->embed_b, B * L, m->P, d);
	} else {
		int32_t *ids = ps->o ? m->ids_all + (size_t)b0 * L : a->ids;
		ops->gather_tokens(ctx, ids, a->nvalid, ps->data->tokens, ps->data->len, idx, B, L);
		ops->embedding_forward(ctx, a->emb, ids, P->embed_w, B * L, d);
		nvalid = a->nvalid;
	}
	ops->gather_i32(ctx, a->labels, ps->data->labels, idx, B);
	ops->assemble_forward(ctx, a->x0, a->emb, P->cls, P->pos, B, T, d);
	float *x = a->x0;
	for (int l = 0; l < c->layers; l++) {
		struct layer_acts *la = &a->la[l];
		const struct sb_layer_ptrs *lp = &P->l[l];
		float *xm = x;
		if (c->arch == SB_ARCH_LOCAL_HYBRID) {
			ops->localmix_forward(ctx, la->xm, la->my, la->mz, la->mmean, la->mrstd, x, nvalid, lp->mix_lnw,
			                      lp->mix_lnb, lp->mix_cw, lp->mix_cb, lp->mix_scale, B, T, d, m->G);
			xm = la->xm;
		}
		ops->matmul_forward(ctx, la->qkv, xm, lp->qkv_w, lp->qkv_b, n, d, 3 * d);
		const float *alpha = c->norm.kind == SB_NORM_ADAPTIVE ? m->alpha + (size_t)l * NH : NULL;
		int rc = ops->attention_forward(ctx, la->att, la->S, la->P, la->aux, la->qkv, nvalid, alpha, &c->norm,
		                                B, T, d, NH, err);
		if (rc) {
			sb_err_prefix(err, "layer %d", l);
			return rc;
		}
		if (st)
			ops->attention_stats(ctx, st, la->P, nvalid, B, NH, T);
		ops->matmul_forward(ctx, a->tmp, la->att, lp->out_w, lp->out_b, n, d, d);
		int64_t step = ps->o && !ps->step_dev ? ps->o->step : 0;
		struct sb_dropout dr = {p, ps->o ? ps->o->seed : 0, 0, 0, ps->step_dev};
		dr.stream = SB_DROPOUT_STREAM(step, 3 * l);
		dr.offset = (uint64_t)b0 * T * d;
		ops->residual_ln_forward(ctx, la->x1, la->r1, la->mean1, la->rstd1, la->mask1, xm, a->tmp, lp->ln1_w,
		                         lp->ln1_b, &dr, n, d);
		ops->matmul_forward(ctx, la->h, la->x1, lp->fc1_w, lp->fc1_b, n, d, ff);
		dr.stream = SB_DROPOUT_STREAM(step, 3 * l + 1);
		dr.offset = (uint64_t)b0 * T * ff;
		/* a training pass keeps gelu'(h) in h for the backward (nothing else reads h) */
		ops->gelu_forward(ctx, la->g, la->maskh, ps->o ? la->h : NULL, la->h, &dr, (size_t)n * ff);
		ops->matmul_forward(ctx, a->tmp, la->g, lp->fc2_w, lp->fc2_b, n, ff, d);
		dr.stream = SB_DROPOUT_STREAM(step, 3 * l + 2);
		dr.offset = (uint64_t)b0 * T * d;
		ops->residual_ln_forward(ctx, la->xout, la->r2, la->mean2, la->rstd2, la->mask2, la->x1, a->tmp,
		                         lp->ln2_w, lp->ln2_b, &dr, n, d);
		x = la->xout;
	}
	ops->gather_cls(ctx, a->cls_out, x, B, T, d);
	ops->matmul_forward(ctx, a->logits, a->cls_out, P->head_w, P->head_b, B, d, c->classes);
	return 0;
}

static void tile_backward(struct sb_ctx *ctx, struct sb_encoder_arena *a, const struct pass *ps,
                          const struct sb_model_ptrs *G, int b0, int B)
{
	struct sb_encoder *m = ps->m;
	const struct sb_backend_ops *ops = m->be->ops;
	const struct sb_encoder_cfg *c = &m->cfg;
	const struct sb_model_ptrs *P = &m->p;
	int T = m->T, L = m->L, d = c->d, NH = c->heads, n = B * T, ff = m->ff;
	const int32_t *nvalid = c->modality == SB_TEXT ? a->nvalid : NULL;
	float p = ps->o->dropout;
	ops->cross_entropy(ctx, m->out_loss + b0, m->out_pred + b0, a->dlogits, a->logits, a->labels, B, c->classes,
	                   1.0f / (float)ps->B);
	ops->matmul_backward(ctx, a->dcls, G->head_w, G->head_b, a->dlogits, a->cls_out, P->head_w, B, d, c->classes,
	                     0);
	float *dx = a->dx, *dxa = a->dxa, *dxb = a->dxb;
	ops->scatter_cls(ctx, dx, a->dcls, B, T, d);
	for (int l = c->layers - 1; l >= 0; l--) {
		struct layer_acts *la = &a->la[l];
		const struct sb_layer_ptrs *lp = &P->l[l];
		const struct sb_layer_ptrs *lg = &G->l[l];
		const float *xin = l == 0 ? a->x0 : a->la[l - 1].xout;
		const float *xm = c->arch == SB_ARCH_LOCAL_HYBRID ? la->xm : xin;
		/* x_out = LN2(x1 + drop(f)) */
		ops->residual_ln_backward(ctx, dxa, a->dtmp, lg->ln2_w, lg->ln2_b, dx, la->r2, la->mean2, la->rstd2,
		                          la->mask2, lp->ln2_w, p, n, d);
		ops->matmul_backward(ctx, a->dh, lg->fc2_w, lg->fc2_b, a->dtmp, la->g, lp->fc2_w, n, ff, d, 0);
		ops->gelu_backward(ctx, a->dh, a->dh, la->h /* gelu'(h) */, la->maskh, p, (size_t)n * ff);
		ops->matmul_backward(ctx, dxa, lg->fc1_w, lg->fc1_b, a->dh, la->x1, lp->fc1_w, n, d, ff, 1);
		/* x1 = LN1(xm + drop(proj)) */
		ops->residual_ln_backward(ctx, dxb, a->dtmp, lg->ln1_w, lg->ln1_b, dxa, la->r1, la->mean1, la->rstd1,
		                          la->mask1, lp->ln1_w, p, n, d);
		ops->matmul_backward(ctx, a->datt, lg->out_w, lg->out_b, a->dtmp, la->att, lp->out_w, n, d, d, 0);
		if (m->keep_datt && b0 == 0)
			ops->copy(ctx, m->keep_datt + (size_t)l * m->tile * T * d, a->datt, (size_t)n * d * sizeof(float));
		int adaptive = c->norm.kind == SB_NORM_ADAPTIVE;
		if (adaptive)
			ops->zero(ctx, a->dalpha, (size_t)NH * sizeof(float));
		ops->attention_backward(ctx, a->dqkv, adaptive ? a->dalpha : NULL, a->datt, la->qkv, la->S, la->P,
		                        la->aux, nvalid, adaptive ? m->alpha + (size_t)l * NH : NULL, &c->norm, B, T, d,
		                        NH);
		if (adaptive)
			ops->hae_alpha_backward(ctx, lg->alpha_raw, a->dalpha, lp->alpha_raw, NH);
		ops->matmul_backward(ctx, dxb, lg->qkv_w, lg->qkv_b, a->dqkv, xm, lp->qkv_w, n, d, 3 * d, 1);
		if (c->arch == SB_ARCH_LOCAL_HYBRID) {
			ops->localmix_backward(ctx, dx, lg->mix_lnw, lg->mix_lnb, lg->mix_cw, lg->mix_cb, lg->mix_scale,
			                       dxb, xin, la->my, la->mz, la->mmean, la->mrstd, nvalid, lp->mix_lnw,
			                       lp->mix_cw, lp->mix_scale, B, T, d, m->G);
		} else {
			float *t = dx;
			dx = dxb;
			dxb = t;
		}
	}
	if (c->modality == SB_IMAGE) {
		ops->assemble_backward(ctx, a->demb, G->cls, G->pos, dx, B, T, d);
		ops->matmul_backward(ctx, NULL, G->embed_w, G->embed_b, a->demb, a->patches, P->embed_w, B * L, m->P, d,
		                     0);
	} else {
		/* the table's gradient is scattered after the slots are summed (sparse rows) */
		ops->assemble_backward(ctx, m->demb_all + (size_t)b0 * L * d, G->cls, G->pos, dx, B, T, d);
	}
}

/* training: one task per gradient slot, its tiles in order */
static int slot_task(struct sb_ctx *ctx, int worker, int s, void *arg, struct sb_err *err)
{
	struct pass *ps = arg;
	struct sb_encoder *m = ps->m;
	struct sb_encoder_arena *a = m->arena[worker];
	float *slot = m->slots + (size_t)s * m->dstride;
	struct sb_model_ptrs G;
	sb_encoder_ptrs(m, slot, &G); /* G.embed_w of a text model points past the slot: never used */
	m->be->ops->zero(ctx, slot, m->dstride * sizeof(float));
	int t0 = (int)((int64_t)s * ps->ntiles / ps->nslots), t1 = (int)((int64_t)(s + 1) * ps->ntiles / ps->nslots);
	for (int t = t0; t < t1; t++) {
		int b0 = t * m->tile, B = ps->B - b0 < m->tile ? ps->B - b0 : m->tile;
		struct sb_attn_stats *st = ps->stats ? &m->tile_stats[t] : NULL;
		if (st)
			memset(st, 0, sizeof *st);
		int rc = tile_forward(ctx, a, ps, b0, B, st, err);
		if (rc)
			return rc;
		tile_backward(ctx, a, ps, &G, b0, B);
	}
	return 0;
}

/* evaluation: one task per tile */
static int eval_task(struct sb_ctx *ctx, int worker, int t, void *arg, struct sb_err *err)
{
	struct pass *ps = arg;
	struct sb_encoder *m = ps->m;
	struct sb_encoder_arena *a = m->arena[worker];
	const struct sb_backend_ops *ops = m->be->ops;
	int b0 = t * m->tile, B = ps->B - b0 < m->tile ? ps->B - b0 : m->tile;
	struct sb_attn_stats *st = ps->stats ? &m->tile_stats[t] : NULL;
	if (st)
		memset(st, 0, sizeof *st);
	int rc = tile_forward(ctx, a, ps, b0, B, st, err);
	if (rc)
		return rc;
	ops->cross_entropy(ctx, m->out_loss + b0, m->out_pred + b0, NULL, a->logits, a->labels, B, m->cfg.classes, 0);
	ops->copy(ctx, m->out_labels + b0, a->labels, (size_t)B * sizeof(int32_t));
	ops->copy(ctx, m->out_logits + (size_t)b0 * m->cfg.classes, a->logits,
	          (size_t)B * m->cfg.classes * sizeof(float));
	return 0;
}

/* ------------------------------------------------------------------ step */

void sb_step_opts_default(struct sb_step_opts *o)
{
	memset(o, 0, sizeof *o);
	o->dropout = 0.1f;
	o->lr = 1e-3f;
	o->weight_decay = 1e-4f;
	o->clip = 5.0f;
	o->beta1 = 0.9f;
	o->beta2 = 0.999f;
	o->eps = 1e-8f;
}

static int upload_idx(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int B,
                      struct sb_err *err)
{
	if (B < 1 || B > m->max_batch)
		return SB_ERR(err, SB_EINTERNAL, "batch of %d examples (model built for at most %d)", B, m->max_batch);
	for (int i = 0; i < B; i++)
		if ((int64_t)idx[i] >= data->n)
			return SB_ERR(err, SB_EINTERNAL, "example index %u out of range (%lld examples)", idx[i],
			              (long long)data->n);
	return m->be->ops->upload(m->be, m->idx_dev, idx, (size_t)B * sizeof *idx, err);
}

static void compute_alpha(struct sb_encoder *m)
{
	if (m->cfg.norm.kind != SB_NORM_ADAPTIVE)
		return;
	struct sb_ctx *ctx = sb_be_main(m->be);
	for (int l = 0; l < m->cfg.layers; l++)
		m->be->ops->hae_alpha(ctx, m->alpha + (size_t)l * m->cfg.heads, m->p.l[l].alpha_raw, m->cfg.heads);
}

static void sum_stats(const struct sb_encoder *m, int ntiles, struct sb_attn_stats *out)
{
	for (int t = 0; t < ntiles; t++) {
		out->nonzero += m->tile_stats[t].nonzero;
		out->valid_total += m->tile_stats[t].valid_total;
		out->entropy_sum += m->tile_stats[t].entropy_sum;
		out->rows += m->tile_stats[t].rows;
	}
}

int sb_encoder_forward_backward(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int B,
                                const struct sb_step_opts *o, struct sb_step_result *res, struct sb_err *err)
{
	struct sb_backend *be = m->be;
	const struct sb_backend_ops *ops = be->ops;
	memset(res, 0, sizeof *res);
	SB_TRY(upload_idx(m, data, idx, B, err));
	compute_alpha(m);
	struct pass ps = {m, data, o, B, 0, 0, o->stats, NULL};
	ps.ntiles = (B + m->tile - 1) / m->tile;
	ps.nslots = ps.ntiles < m->nslots_max ? ps.ntiles : m->nslots_max;
	SB_TRY(ops->run(be, ps.nslots, slot_task, &ps, err));
	struct sb_ctx *ctx = sb_be_main(be);
	ops->reduce_slots(ctx, m->grads, m->slots, ps.nslots, m->dstride, m->dense_n);
	if (m->cfg.modality == SB_TEXT) { /* the token table: rows of the whole batch in order */
		ops->zero(ctx, m->grads + m->dense_n, (m->pstride - m->dense_n) * sizeof(float));
		ops->embedding_backward(ctx, m->g.embed_w, m->demb_all, m->ids_all, B * m->L, m->cfg.d);
	}
	float *loss = m->host_loss;
	SB_TRY(ops->download(be, loss, m->out_loss, (size_t)B * sizeof *loss, err));
	double s = 0;
	for (int i = 0; i < B; i++)
		s += loss[i];
	res->loss = s / B;
	if (o->stats)
		sum_stats(m, ps.ntiles, &res->stats);
	return arena_verify(m, "a forward and backward pass", err);
}

/* The gradients whose norm clipping takes, and their length. A backend sums a flat buffer
 * in chunks (the CPU's of 32768 floats; CUDA's grid from the length), whose ends
 * SB_ARENA_CHECK's zones would move, and with them the norm's last bits: with the zones,
 * the tensors are first copied into the layout without them (zeros between, as there), so
 * that clipping is the same bits. */
static const float *norm_src(struct sb_encoder *m, size_t *n)
{
	if (!m->plain) {
		*n = m->pstride;
		return m->grads;
	}
	struct sb_ctx *ctx = sb_be_main(m->be);
	for (int i = 0; i < m->ntensors; i++)
		m->be->ops->copy(ctx, m->plain + m->plain_off[i], m->grads + m->pinfo[i].offset,
		                 m->pinfo[i].numel * sizeof(float));
	*n = m->plain_stride;
	return m->plain;
}

int sb_encoder_update(struct sb_encoder *m, const struct sb_step_opts *o, struct sb_step_result *res,
                      struct sb_err *err)
{
	struct sb_backend *be = m->be;
	const struct sb_backend_ops *ops = be->ops;
	struct sb_ctx *ctx = sb_be_main(be);
	size_t nn;
	const float *src = norm_src(m, &nn);
	double norm = sqrt(ops->sumsq(ctx, src, nn));
	res->grad_norm = norm;
	res->clipped = 0;
	if (o->clip > 0) {
		/* torch.nn.utils.clip_grad_norm_: coef = max_norm / (total_norm + 1e-6), applied when < 1 */
		double coef = (double)o->clip / (norm + 1e-6);
		if (coef < 1.0) {
			ops->scale(ctx, m->grads, (float)coef, m->pstride);
			res->clipped = 1;
		}
	}
	m->adam_t++;
	ops->adamw(ctx, m->params, m->m, m->v, m->grads, m->pstride, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay,
	           m->adam_t);
	return 0;
}

/* ------------------------------------------------------------------ the step without host round trips */

static int have_dev_ops(const struct sb_backend *be)
{
	return be->ops->loss_accum && be->ops->clip_coef && be->ops->adamw_dev;
}

static int have_graph_ops(const struct sb_backend *be)
{
	return be->ops->graph_begin && be->ops->graph_end && be->ops->graph_launch && be->ops->graph_free;
}

/* Queue the whole step (state and indices already uploaded): forward and backward,
 * the slots' sum, the loss bookkeeping, clipping and AdamW. Reads nothing back
 * (unless stats: attention_stats waits). */
static int step_issue(struct sb_encoder *m, const struct sb_encoder_data *data, int B, const struct sb_step_opts *o,
                      int stats, struct sb_err *err)
{
	struct sb_backend *be = m->be;
	const struct sb_backend_ops *ops = be->ops;
	compute_alpha(m);
	struct pass ps = {m, data, o, B, 0, 0, stats, &m->state_dev->step};
	ps.ntiles = (B + m->tile - 1) / m->tile;
	ps.nslots = ps.ntiles < m->nslots_max ? ps.ntiles : m->nslots_max;
	SB_TRY(ops->run(be, ps.nslots, slot_task, &ps, err));
	struct sb_ctx *ctx = sb_be_main(be);
	ops->reduce_slots(ctx, m->grads, m->slots, ps.nslots, m->dstride, m->dense_n);
	if (m->cfg.modality == SB_TEXT) {
		ops->zero(ctx, m->grads + m->dense_n, (m->pstride - m->dense_n) * sizeof(float));
		ops->embedding_backward(ctx, m->g.embed_w, m->demb_all, m->ids_all, B * m->L, m->cfg.d);
	}
	ops->loss_accum(ctx, m->acc_dev, m->out_loss, B, m->state_dev);
	size_t nn;
	const float *src = norm_src(m, &nn);
	ops->clip_coef(ctx, m->acc_dev, src, nn, o->clip);
	ops->adamw_dev(ctx, m->params, m->m, m->v, m->grads, m->pstride, m->acc_dev, m->state_dev);
	return 0;
}

/* What a recording depends on besides device memory: recorded again when it changes. */
struct graph_key {
	int B, modality;
	uint64_t seed;
	float dropout, clip;
	int norm_kind, norm_unrolled, norm_mask;
	double norm_ratio, norm_alpha;
	const void *images, *tokens, *len, *labels;
};

static void graph_key_of(const struct sb_encoder *m, const struct sb_encoder_data *data, int B,
                         const struct sb_step_opts *o, unsigned char out[128])
{
	struct graph_key k;
	memset(&k, 0, sizeof k);
	k.B = B;
	k.modality = (int)m->cfg.modality;
	k.seed = o->seed;
	k.dropout = o->dropout;
	k.clip = o->clip;
	k.norm_kind = (int)m->cfg.norm.kind;
	k.norm_unrolled = m->cfg.norm.unrolled;
	k.norm_mask = (int)m->cfg.norm.mask;
	k.norm_ratio = m->cfg.norm.ratio;
	k.norm_alpha = m->cfg.norm.alpha;
	k.images = data->images;
	k.tokens = data->tokens;
	k.len = data->len;
	k.labels = data->labels;
	_Static_assert(sizeof k <= 128, "graph key");
	memset(out, 0, 128);
	memcpy(out, &k, sizeof k);
}

void sb_encoder_graph_reset(struct sb_encoder *m)
{
	if (m->graph)
		m->be->ops->graph_free(m->be, m->graph);
	m->graph = NULL;
	m->graph_warm = 0;
}

/* Record the step (step_issue between graph_begin and graph_end); 0 with m->graph set,
 * or non-zero when the recording failed (nothing ran; the caller issues the step). */
static int graph_record(struct sb_encoder *m, const struct sb_encoder_data *data, int B, const struct sb_step_opts *o)
{
	struct sb_backend *be = m->be;
	struct sb_err e = {0};
	void *g = NULL;
	int rc = be->ops->graph_begin(be, &e);
	if (!rc) {
		struct sb_err e2 = {0};
		int rc2 = step_issue(m, data, B, o, 0, &e2);
		rc = be->ops->graph_end(be, &g, &e);
		if (rc2 && !rc) {
			be->ops->graph_free(be, g);
			g = NULL;
			rc = rc2;
			e = e2;
		}
	}
	if (rc) {
		m->graph_failed = 1;
		snprintf(m->graph_note, sizeof m->graph_note, "recording the step failed (steps issued op by op): %s",
		         e.msg);
		return rc;
	}
	m->graph = g;
	return 0;
}

static int step_run(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int B,
                    const struct sb_step_opts *o, struct sb_attn_stats *stats, struct sb_err *err);

int sb_encoder_step(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int B,
                    const struct sb_step_opts *o, struct sb_attn_stats *stats, struct sb_err *err)
{
	SB_TRY(step_run(m, data, idx, B, o, stats, err));
	return arena_verify(m, m->graph && !o->stats ? "a recorded training step" : "a training step", err);
}

static int step_run(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int B,
                    const struct sb_step_opts *o, struct sb_attn_stats *stats, struct sb_err *err)
{
	struct sb_backend *be = m->be;
	if (!have_dev_ops(be))
		return SB_ERR(err, SB_EINTERNAL, "backend '%s' lacks the device-side step ops", be->name);
	if (B < 1 || B > m->max_batch)
		return SB_ERR(err, SB_EINTERNAL, "batch of %d examples (model built for at most %d)", B, m->max_batch);
	for (int i = 0; i < B; i++)
		if ((int64_t)idx[i] >= data->n)
			return SB_ERR(err, SB_EINTERNAL, "example index %u out of range (%lld examples)", idx[i],
			              (long long)data->n);
	/* the step's state and indices: one upload (the source may be reused at once) */
	struct sb_step_state st;
	memset(&st, 0, sizeof st);
	st.step = o->step;
	st.t = m->adam_t + 1;
	sb_adamw_consts(&st.k, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, st.t);
	memcpy(m->stage, &st, sizeof st);
	memcpy((char *)m->stage + sizeof st, idx, (size_t)B * sizeof *idx);
	SB_TRY(be->ops->upload(be, m->state_dev, m->stage, sizeof st + (size_t)B * sizeof *idx, err));
	m->adam_t = st.t;
	if (o->stats) { /* waits for the device: issued op by op */
		SB_TRY(step_issue(m, data, B, o, 1, err));
		struct sb_attn_stats sum = {0};
		sum_stats(m, (B + m->tile - 1) / m->tile, &sum);
		if (stats)
			*stats = sum;
		m->steps_issued++;
		return 0;
	}
	int can = m->use_graphs && !m->graph_failed && have_graph_ops(be);
	if (can) {
		unsigned char key[128];
		graph_key_of(m, data, B, o, key);
		if (memcmp(key, m->graph_key, sizeof key)) {
			sb_encoder_graph_reset(m);
			memcpy(m->graph_key, key, sizeof key);
		}
		if (!m->graph && m->graph_warm)
			graph_record(m, data, B, o);
		if (m->graph) {
			SB_TRY(be->ops->graph_launch(be, m->graph, err));
			m->steps_replayed++;
			return 0;
		}
	}
	SB_TRY(step_issue(m, data, B, o, 0, err));
	m->steps_issued++;
	if (can)
		m->graph_warm = 1;
	return 0;
}

int sb_encoder_acc_read(struct sb_encoder *m, struct sb_step_acc *out, int reset, struct sb_err *err)
{
	SB_TRY(m->be->ops->download(m->be, out, m->acc_dev, sizeof *out, err));
	return reset ? acc_reset(m, err) : 0;
}

int sb_encoder_train_step(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int B,
                          const struct sb_step_opts *o, struct sb_step_result *res, struct sb_err *err)
{
	memset(res, 0, sizeof *res);
	SB_TRY(sb_encoder_step(m, data, idx, B, o, &res->stats, err));
	struct sb_step_acc a;
	SB_TRY(sb_encoder_acc_read(m, &a, 0, err));
	res->loss = a.last_loss;
	if (!isfinite(a.last_loss)) {
		m->adam_t--; /* adamw_dev skipped the update */
		return 0;
	}
	res->grad_norm = a.grad_norm;
	res->clipped = a.clipped;
	return 0;
}

int sb_encoder_saved_attention(struct sb_encoder *m, int layer, int B, float *S, float *P, struct sb_err *err)
{
	if (layer < 0 || layer >= m->cfg.layers || B < 1 || B > m->tile)
		return -SB_ERR(err, SB_EUSAGE, "saved attention of layer %d for %d samples: the pass must be one tile "
		                               "(tile %d)",
		               layer, B, m->tile);
	const struct layer_acts *la = &m->arena[0]->la[layer];
	size_t n = (size_t)B * m->cfg.heads * m->T * m->T * sizeof(float);
	int rc = 0;
	if (S)
		rc = m->be->ops->download(m->be, S, la->S, n, err);
	if (!rc && P)
		rc = m->be->ops->download(m->be, P, la->P, n, err);
	return rc ? -rc : B;
}

int sb_encoder_keep_grads(struct sb_encoder *m, int on, struct sb_err *err)
{
	/* A recorded step copies into keep_datt when it was on at recording time and not
	 * otherwise: turning it on or off records the step again (op by op first), so a
	 * replay never writes to a freed keep_datt nor skips the copy. */
	if (!on) {
		if (m->keep_datt)
			sb_encoder_graph_reset(m);
		sb_be_free(m->be, m->keep_datt);
		m->keep_datt = NULL;
		return 0;
	}
	if (m->keep_datt)
		return 0;
	sb_encoder_graph_reset(m);
	if (!(m->keep_datt = sb_be_alloc(m->be, (size_t)m->cfg.layers * m->tile * m->T * m->cfg.d * sizeof(float))))
		return SB_ERR(err, SB_EINTERNAL, "out of memory (probe gradients)");
	return 0;
}

int sb_encoder_saved_grads(struct sb_encoder *m, int layer, int B, float *qkv, float *datt, struct sb_err *err)
{
	if (layer < 0 || layer >= m->cfg.layers || B < 1 || B > m->tile || !m->keep_datt)
		return -SB_ERR(err, SB_EUSAGE, "saved gradients of layer %d for %d samples: the pass must be one tile "
		                               "(tile %d) with sb_encoder_keep_grads on",
		               layer, B, m->tile);
	size_t n = (size_t)B * m->T * m->cfg.d;
	int rc = 0;
	if (qkv)
		rc = m->be->ops->download(m->be, qkv, m->arena[0]->la[layer].qkv, 3 * n * sizeof(float), err);
	if (!rc && datt)
		rc = m->be->ops->download(m->be, datt, m->keep_datt + (size_t)layer * m->tile * m->T * m->cfg.d,
		                          n * sizeof(float), err);
	return rc ? -rc : B;
}

/* ------------------------------------------------------------------ evaluation */

int sb_encoder_forward(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int B,
                       float *logits, float *losses, int32_t *pred, struct sb_attn_stats *stats, struct sb_err *err)
{
	struct sb_backend *be = m->be;
	SB_TRY(upload_idx(m, data, idx, B, err));
	compute_alpha(m);
	struct pass ps = {m, data, NULL, B, 0, 0, stats != NULL, NULL};
	ps.ntiles = (B + m->tile - 1) / m->tile;
	SB_TRY(be->ops->run(be, ps.ntiles, eval_task, &ps, err));
	if (stats)
		sum_stats(m, ps.ntiles, stats);
	if (logits)
		SB_TRY(be->ops->download(be, logits, m->out_logits, (size_t)B * m->cfg.classes * sizeof *logits, err));
	if (losses)
		SB_TRY(be->ops->download(be, losses, m->out_loss, (size_t)B * sizeof *losses, err));
	if (pred)
		SB_TRY(be->ops->download(be, pred, m->out_pred, (size_t)B * sizeof *pred, err));
	return arena_verify(m, "a forward pass", err);
}

int sb_encoder_alphas(struct sb_encoder *m, float *out, struct sb_err *err)
{
	if (m->cfg.norm.kind != SB_NORM_ADAPTIVE)
		return 0;
	compute_alpha(m);
	int n = m->cfg.layers * m->cfg.heads;
	int rc = m->be->ops->download(m->be, out, m->alpha, (size_t)n * sizeof *out, err);
	return rc ? -rc : n; /* the callers read a negative count as the error */
}

int sb_encoder_evaluate(struct sb_encoder *m, const struct sb_encoder_data *data, const uint32_t *idx, int64_t n,
                        int batch, struct sb_eval_result *res, uint8_t *correct, struct sb_err *err)
{
	memset(res, 0, sizeof *res);
	if (batch < 1 || batch > m->max_batch)
		batch = m->max_batch;
	int C = m->cfg.classes;
	float *loss = malloc((size_t)batch * sizeof *loss);
	int32_t *pred = malloc((size_t)batch * sizeof *pred);
	int32_t *lab = malloc((size_t)batch * sizeof *lab);
	int64_t *conf = calloc((size_t)C * 3, sizeof *conf); /* tp, fp, fn per class */
	if (!loss || !pred || !lab || !conf) {
		free(loss);
		free(pred);
		free(lab);
		free(conf);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	if (correct)
		memset(correct, 0, (size_t)((n + 7) / 8));
	double loss_sum = 0, dens_sum = 0, ent_sum = 0;
	int64_t nb = 0, ndens = 0;
	int rc = 0;
	for (int64_t b0 = 0; b0 < n; b0 += batch) {
		int B = n - b0 < batch ? (int)(n - b0) : batch;
		struct sb_attn_stats st = {0};
		rc = sb_encoder_forward(m, data, idx + b0, B, NULL, loss, pred, &st, err);
		if (!rc)
			rc = m->be->ops->download(m->be, lab, m->out_labels, (size_t)B * sizeof *lab, err);
		if (rc)
			break;
		double bl = 0;
		for (int i = 0; i < B; i++) {
			bl += loss[i];
			int32_t y = lab[i];
			int ok = pred[i] == y;
			res->correct += ok;
			if (correct && ok)
				correct[(b0 + i) / 8] |= (uint8_t)(1u << ((b0 + i) % 8));
			if (ok) {
				conf[y * 3]++;
			} else {
				conf[pred[i] * 3 + 1]++;
				conf[y * 3 + 2]++;
			}
		}
		loss_sum += bl / B;
		nb++;
		if (st.valid_total > 0 && st.rows > 0) {
			dens_sum += st.nonzero / st.valid_total;
			ent_sum += st.entropy_sum / st.rows;
			ndens++;
		}
	}
	if (!rc) {
		res->n = n;
		res->accuracy = n ? (double)res->correct / n : NAN;
		double f1 = 0;
		for (int c = 0; c < C; c++) {
			int64_t tp = conf[c * 3], fp = conf[c * 3 + 1], fn = conf[c * 3 + 2];
			int64_t den = 2 * tp + fp + fn;
			f1 += den ? 2.0 * tp / den : 0.0;
		}
		res->macro_f1 = f1 / C;
		res->loss = nb ? loss_sum / nb : NAN;
		res->attention_density = ndens ? dens_sum / ndens : NAN;
		res->attention_entropy = ndens ? ent_sum / ndens : NAN;
		res->alpha_mean = res->alpha_std = NAN;
		float al[SB_ENCODER_MAX_LAYERS * 64];
		int na =
		    m->cfg.layers * m->cfg.heads <= (int)(sizeof al / sizeof al[0]) ? sb_encoder_alphas(m, al, err) : 0;
		if (na > 0) {
			double s = 0, q = 0;
			for (int i = 0; i < na; i++)
				s += al[i];
			double mu = s / na;
			for (int i = 0; i < na; i++)
				q += (al[i] - mu) * (al[i] - mu);
			res->alpha_mean = mu;
			res->alpha_std = na > 1 ? sqrt(q / (na - 1)) : NAN;
		} else if (na < 0) {
			rc = -na;
		}
	}
	free(loss);
	free(pred);
	free(lab);
	free(conf);
	return rc;
}

/* ------------------------------------------------------------------ tensors */

int sb_encoder_to_tensors(struct sb_encoder *m, struct sb_tensors *ts, int with_optim, struct sb_err *err)
{
	size_t bytes = m->pstride * sizeof(float);
	float *host = malloc(bytes * (with_optim ? 3 : 1));
	if (!host)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = m->be->ops->download(m->be, host, m->params, bytes, err);
	if (!rc && with_optim) {
		rc = m->be->ops->download(m->be, host + m->pstride, m->m, bytes, err);
		if (!rc)
			rc = m->be->ops->download(m->be, host + 2 * m->pstride, m->v, bytes, err);
	}
	for (int k = 0; !rc && k < (with_optim ? 3 : 1); k++) {
		static const char *pre[3] = {"", "adam_m.", "adam_v."};
		for (int i = 0; !rc && i < m->ntensors; i++) {
			const struct sb_param_info *q = &m->pinfo[i];
			char name[96];
			snprintf(name, sizeof name, "%s%s", pre[k], q->name);
			rc = sb_tensors_add(ts, name, SB_F32, q->ndim, q->shape,
			                    host + (size_t)k * m->pstride + q->offset, 0, err);
		}
	}
	if (!rc && with_optim) {
		int64_t shape[1] = {1}, t = m->adam_t;
		rc = sb_tensors_add(ts, "step", SB_I64, 1, shape, &t, 0, err);
	}
	free(host);
	return rc;
}

int sb_encoder_from_tensors(struct sb_encoder *m, const struct sb_tensors *ts, int with_optim, struct sb_err *err)
{
	size_t bytes = m->pstride * sizeof(float);
	float *host = calloc(m->pstride * (with_optim ? 3 : 1), sizeof(float));
	if (!host)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = 0;
	for (int k = 0; !rc && k < (with_optim ? 3 : 1); k++) {
		static const char *pre[3] = {"", "adam_m.", "adam_v."};
		for (int i = 0; !rc && i < m->ntensors; i++) {
			const struct sb_param_info *q = &m->pinfo[i];
			char name[96];
			snprintf(name, sizeof name, "%s%s", pre[k], q->name);
			const struct sb_tensor *t = sb_tensors_find(ts, name);
			if (!t) {
				rc = SB_ERR(err, SB_EDATA, "missing tensor '%s'", name);
				break;
			}
			int same = t->dtype == SB_F32 && t->ndim == q->ndim;
			for (int j = 0; same && j < q->ndim; j++)
				same = t->shape[j] == q->shape[j];
			if (!same) {
				rc = SB_ERR(err, SB_EDATA, "tensor '%s' has the wrong dtype or shape for this model",
				            name);
				break;
			}
			memcpy(host + (size_t)k * m->pstride + q->offset, t->data, q->numel * sizeof(float));
		}
	}
	int64_t step = m->adam_t;
	if (!rc && with_optim) {
		const struct sb_tensor *t = sb_tensors_find(ts, "step");
		if (!t || t->dtype != SB_I64 || sb_tensor_numel(t) != 1)
			rc = SB_ERR(err, SB_EDATA, "missing or malformed tensor 'step'");
		else
			memcpy(&step, t->data, sizeof step);
	}
	if (!rc)
		rc = m->be->ops->upload(m->be, m->params, host, bytes, err);
	if (!rc && with_optim) {
		rc = m->be->ops->upload(m->be, m->m, host + m->pstride, bytes, err);
		if (!rc)
			rc = m->be->ops->upload(m->be, m->v, host + 2 * m->pstride, bytes, err);
		if (!rc)
			m->adam_t = step;
	}
	free(host);
	return rc;
}

int sb_encoder_load_checkpoint(struct sb_encoder *m, const char *path, struct sb_err *err)
{
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	int rc = sb_st_read_checked(path, 0, NULL, &ts, err); /* against its sidecar when there is one */
	if (!rc) {
		rc = sb_encoder_from_tensors(m, &ts, 0, err);
		if (rc)
			sb_err_prefix(err, "%s", path);
	}
	sb_tensors_free(&ts);
	return rc;
}
