/* attn_norm.c — attention normalisers (PROTOCOL A3): method names, statistics,
 * and the float forward/backward used in training.
 *
 * Each row is first turned into an "effective row" x[0..n): its finite valid
 * scores in order (keys scored -inf are dropped), then, with SB_MASK_MARGIN and
 * padding, T - n_valid copies of min(valid) - 60. The normaliser runs on x; the
 * result is scattered back (dropped and excluded keys get exactly 0), and in the
 * backward the padded keys' gradient is routed to the minimum it came from.
 * Buffers are padded to a multiple of VW with a neutral value so that every hot
 * loop vectorises (attn_norm_vec.h). The double reference in attn_norm_ref.c is
 * what every path here is tested against (tests/unit/test_attn_norm*.c).
 */
#include "attn_norm.h"
#include "attn_norm_impl.h"
#include "attn_norm_vec.h"
#include "entmax_step.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- names */

struct method {
	const char *name;
	enum sb_norm_kind kind;
	double ratio;
};

static const struct method methods[] = {
    {"softmax", SB_NORM_SOFTMAX, 0},
    {"topk_softmax_0125", SB_NORM_TOPK, 0.125},
    {"topk_softmax_025", SB_NORM_TOPK, 0.25},
    {"topk_softmax_05", SB_NORM_TOPK, 0.5},
    {"topk_softmax", SB_NORM_TOPK, 0.25},
    {"bottomk_softmax_0125", SB_NORM_BOTTOMK, 0.125},
    {"bottomk_softmax_025", SB_NORM_BOTTOMK, 0.25},
    {"bottomk_softmax_05", SB_NORM_BOTTOMK, 0.5},
    {"bottomk_softmax", SB_NORM_BOTTOMK, 0.25},
    {"sparsemax", SB_NORM_SPARSEMAX, 0},
    {"entmax15", SB_NORM_ENTMAX15, 0},
    {"entmax_bisect", SB_NORM_ENTMAX_BISECT, 0},
    {"headwise_adaptive_entmax", SB_NORM_ADAPTIVE, 0},
};

static double clamp_alpha(double a)
{
	return a < SB_ALPHA_MIN ? SB_ALPHA_MIN : a > SB_ALPHA_MAX ? SB_ALPHA_MAX : a;
}

/* "topk_softmax_0375" -> 0.375: the ratio's decimal digits without the point
 * ("1" for 1). Returns 0 when the suffix is not of that form. */
static double ratio_from_suffix(const char *suf)
{
	size_t n = strlen(suf);
	if (n == 0 || n > 12 || strspn(suf, "0123456789") != n)
		return 0;
	if (strcmp(suf, "1") == 0)
		return 1;
	if (suf[0] != '0' || n < 2)
		return 0;
	char buf[16] = "0.";
	memcpy(buf + 2, suf + 1, n - 1);
	buf[n + 1] = 0;
	double r = strtod(buf, NULL);
	return r > 0 && r <= 1 ? r : 0;
}

int sb_norm_parse(const char *method, double alpha, struct sb_norm *out, struct sb_err *err)
{
	if (!method || !out)
		return SB_ERR(err, SB_EUSAGE, "no normaliser method given");
	struct sb_norm nm = {.kind = SB_NORM_SOFTMAX, .ratio = 0, .alpha = 1.5, .unrolled = 0, .mask = SB_MASK_MARGIN};
	const struct method *m = NULL;
	for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
		if (strcmp(method, methods[i].name) == 0)
			m = &methods[i];
	if (m) {
		nm.kind = m->kind;
		nm.ratio = m->ratio;
	} else if (strncmp(method, "topk_softmax_", 13) == 0 && ratio_from_suffix(method + 13) > 0) {
		nm.kind = SB_NORM_TOPK;
		nm.ratio = ratio_from_suffix(method + 13);
	} else if (strncmp(method, "bottomk_softmax_", 16) == 0 && ratio_from_suffix(method + 16) > 0) {
		nm.kind = SB_NORM_BOTTOMK;
		nm.ratio = ratio_from_suffix(method + 16);
	} else {
		return SB_ERR(err, SB_EUSAGE, "unknown normaliser method '%s' (known: " SB_NORM_NAMES ")", method);
	}
	if (nm.kind == SB_NORM_ENTMAX_BISECT) {
		if (!isfinite(alpha))
			return SB_ERR(err, SB_EUSAGE, "entmax_bisect: alpha must be a finite number");
		nm.alpha = clamp_alpha(alpha);
	}
	*out = nm;
	return 0;
}

const char *sb_norm_name(const struct sb_norm *nm)
{
	static _Thread_local char buf[64];
	if (!nm)
		return "?";
	switch (nm->kind) {
	case SB_NORM_SOFTMAX:
		return "softmax";
	case SB_NORM_SPARSEMAX:
		return "sparsemax";
	case SB_NORM_ENTMAX15:
		return "entmax15";
	case SB_NORM_ENTMAX_BISECT:
		return "entmax_bisect";
	case SB_NORM_ADAPTIVE:
		return "headwise_adaptive_entmax";
	case SB_NORM_TOPK:
	case SB_NORM_BOTTOMK: {
		const char *base = nm->kind == SB_NORM_TOPK ? "topk_softmax_" : "bottomk_softmax_";
		char num[32], digits[32];
		size_t j = 0;
		if (nm->ratio == 1) {
			snprintf(buf, sizeof buf, "%s1", base);
			return buf;
		}
		/* fixed point with the 11 decimals a suffix can give (ratio_from_suffix), trailing
		 * zeros dropped: the digits parsed, whatever their magnitude (%g wrote 1e-05 for
		 * 0.00001, and rounded 11 digits to 10) */
		if (!(nm->ratio > 0 && nm->ratio < 1))
			return nm->kind == SB_NORM_TOPK ? "topk_softmax" : "bottomk_softmax";
		snprintf(num, sizeof num, "%.11f", nm->ratio);
		for (size_t e = strlen(num); e > 2 && num[e - 1] == '0';)
			num[--e] = 0;
		for (const char *c = num; *c; c++)
			if (*c != '.')
				digits[j++] = *c;
		digits[j] = 0;
		snprintf(buf, sizeof buf, "%s%s", base, digits);
		return buf;
	}
	}
	return "?";
}

int sb_norm_topk_k(double ratio, int n_valid)
{
	if (n_valid < 1)
		return 0;
	double c = ceil(ratio * (double)n_valid); /* Python's math.ceil(r * n), in double */
	int k = c < 1 ? 1 : c > n_valid ? n_valid : (int)c;
	return k;
}

/* The entropy terms -sum p log max(p, 1e-12) of p[0..n): each term in double from
 * the float logarithm log_pos_v (a few float ulp: p itself is a float, rounded to 6e-8
 * relative, so a double logarithm would add digits the probabilities do not have),
 * summed in double in VW lanes (element i in lane i % VW, lanes combined by a fixed
 * tree: deterministic); the last partial chunk is padded with zeros, which add
 * -0 * log(1e-12) = -0: nothing. */
static inline void entropy_chunk(double *restrict acc, const float *restrict v)
{
	float lg[VW];
	for (int h = 0; h < VP; h++) {
		ve x = vload_e(v + h * VE), lo = vset1_e(1e-12f);
		vstore_e(lg + h * VE, log_pos_v(vsel_e(x > lo, x, lo)));
	}
	for (int l = 0; l < VW; l++)
		acc[l] -= (double)v[l] * (double)lg[l];
}

static double entropy_terms(const float *restrict p, size_t n)
{
	double acc[VW];
	for (int l = 0; l < VW; l++)
		acc[l] = 0;
	size_t b = 0;
	for (; b + VW <= n; b += VW)
		entropy_chunk(acc, p + b);
	if (b < n) {
		float tail[VW];
		for (int l = 0; l < VW; l++)
			tail[l] = b + l < n ? p[b + l] : 0.0f;
		entropy_chunk(acc, tail);
	}
	for (int w = VW / 2; w >= 1; w /= 2)
		for (int l = 0; l < w; l++)
			acc[l] += acc[l + w];
	return acc[0];
}

/* how many of p[0..n) exceed 1e-7 (compared in double, as the density is defined) */
static long count_nonzero(const float *restrict p, size_t n)
{
	int32_t c[VW];
	for (int l = 0; l < VW; l++)
		c[l] = 0;
	size_t b = 0;
	for (; b + VW <= n; b += VW)
		for (int l = 0; l < VW; l++)
			c[l] += (double)p[b + l] > 1e-7 ? 1 : 0;
	long cnt = lanes_isum(c);
	for (; b < n; b++)
		cnt += (double)p[b] > 1e-7 ? 1 : 0;
	return cnt;
}

/* The rows of a block are contiguous: the entropy is summed over the whole block at
 * once (the statistics are totals; a row's own entropy is never needed), and so is
 * the count when every key is valid. Counts are whole numbers, exact in double. */
void sb_norm_stats(const float *p, int rows, int T, int n_valid, double *nonzero, double *valid_total,
                   double *entropy_sum)
{
	if (n_valid > T)
		n_valid = T;
	if (n_valid < 0)
		n_valid = 0;
	if (nonzero) {
		long cnt = 0;
		if (n_valid == T)
			cnt = count_nonzero(p, (size_t)rows * T);
		else
			for (int r = 0; r < rows; r++)
				cnt += count_nonzero(p + (size_t)r * T, (size_t)n_valid);
		*nonzero += (double)cnt;
	}
	if (valid_total)
		*valid_total += (double)rows * n_valid;
	if (entropy_sum)
		*entropy_sum += entropy_terms(p, (size_t)rows * T);
}

/* ------------------------------------------------------------ workspace */

#define STACK_T 512
#define NBUF 6                           /* x, p, g, h, and y of two rows' length */
#define BIG(np) (9 * (size_t)(np) + 160) /* scratch of the AVX-512 general-alpha entmax */

struct work {
	float *x, *y, *p, *g, *h; /* effective scores, scratch (2 rows), probabilities, upstream grad, result */
	float *big;               /* BIG(np) floats of kernel scratch */
	size_t nbig;              /* = BIG(np) */
	int32_t *key;
	int *idx;
	void *heap;
};

struct stackbuf {
	float f[NBUF * (STACK_T + VW) + BIG(STACK_T + VW)];
	int32_t key[STACK_T + VW];
	int idx[STACK_T];
};

static int work_init(struct work *w, struct stackbuf *sb, int T)
{
	size_t np = (size_t)vw_round_up(T);
	char *m;
	w->heap = NULL;
	if (T <= STACK_T) {
		np = STACK_T + VW;
		m = (char *)sb->f;
		w->key = sb->key;
		w->idx = sb->idx;
	} else {
		size_t nf = NBUF * np + BIG(np);
		m = malloc(nf * sizeof(float) + np * sizeof(int32_t) + (size_t)T * sizeof(int));
		if (!m)
			return -1;
		w->heap = m;
		w->key = (int32_t *)((float *)m + nf);
		w->idx = (int *)(w->key + np);
	}
	w->x = (float *)m;
	w->p = w->x + np;
	w->g = w->p + np;
	w->h = w->g + np;
	w->y = w->h + np;
	w->big = w->y + 2 * np;
	w->nbig = BIG(np);
	return 0;
}

/* ---------------------------------------------------------- effective row */

struct row {
	int n, nv, np; /* effective length, finite valid keys, padded length */
	int compact;   /* some valid key was -inf: idx[] maps effective -> original */
	int npads;     /* margin pads at the end of the effective row */
	int argmin;    /* original position of min finite valid score (margin gradient) */
	int bad;       /* 1: NaN or +inf score (NaN row); 2: no finite valid score */
};

static void row_build(struct row *r, struct work *w, const float *s, int T, int n_valid, enum sb_mask_mode mask)
{
	float *restrict x = w->x;
	int nv = n_valid, npv = vw_round_up(nv);
	memcpy(x, s, (size_t)nv * sizeof *x);
	for (int i = nv; i < npv; i++)
		x[i] = 0;
	float acc[VW] = {0};
	for (int b = 0; b < npv; b += VW)
		for (int l = 0; l < VW; l++)
			acc[l] += x[b + l] * 0.0f; /* NaN iff some score is not finite */
	r->compact = 0;
	r->bad = 0;
	if (lanes_sum(acc) != 0.0f) {
		int cnt = 0;
		for (int i = 0; i < n_valid; i++)
			if (isnan(s[i]) || s[i] == INFINITY) {
				r->bad = 1;
				return;
			}
		for (int i = 0; i < n_valid; i++)
			if (s[i] != -INFINITY) {
				w->idx[cnt] = i;
				x[cnt++] = s[i];
			}
		if (cnt == 0) {
			r->bad = 2;
			return;
		}
		nv = cnt;
		r->compact = 1;
	}
	r->nv = nv;
	r->npads = 0;
	r->argmin = -1;
	if (mask == SB_MASK_MARGIN && n_valid < T) {
		int am = 0;
		for (int i = 1; i < nv; i++)
			if (x[i] < x[am])
				am = i;
		float pad = x[am] - (float)SB_MASK_MARGIN_VALUE;
		r->argmin = r->compact ? w->idx[am] : am;
		r->npads = T - n_valid;
		for (int t = 0; t < r->npads; t++)
			x[nv + t] = pad;
	}
	r->n = nv + r->npads;
	r->np = vw_round_up(r->n);
	for (int i = r->n; i < r->np; i++)
		x[i] = -INFINITY;
}

static int row_identity(const struct row *r, int T)
{
	return !r->compact && r->n == T;
}

/* original layout (T) -> effective layout, zero past n */
static void row_gather(float *restrict ge, const float *restrict g, const struct row *r, const struct work *w, int T,
                       int n_valid)
{
	if (row_identity(r, T)) {
		memcpy(ge, g, (size_t)T * sizeof *ge);
	} else {
		if (r->compact)
			for (int j = 0; j < r->nv; j++)
				ge[j] = g[w->idx[j]];
		else
			memcpy(ge, g, (size_t)r->nv * sizeof *ge);
		for (int t = 0; t < r->npads; t++)
			ge[r->nv + t] = g[n_valid + t];
	}
	for (int i = r->n; i < r->np; i++)
		ge[i] = 0;
}

/* effective layout -> original layout; excluded keys get 0 */
static void row_scatter(float *out, const float *pe, const struct row *r, const struct work *w, int T, int n_valid)
{
	if (row_identity(r, T)) {
		memcpy(out, pe, (size_t)T * sizeof *out);
		return;
	}
	memset(out, 0, (size_t)T * sizeof *out);
	if (r->compact)
		for (int j = 0; j < r->nv; j++)
			out[w->idx[j]] = pe[j];
	else
		memcpy(out, pe, (size_t)r->nv * sizeof *out);
	for (int t = 0; t < r->npads; t++)
		out[n_valid + t] = pe[r->nv + t];
}

/* gradient scatter: the padded keys' gradient goes to the minimum they copy */
static void row_scatter_grad(float *ds, const float *de, const struct row *r, const struct work *w, int T)
{
	float route = 0;
	for (int t = 0; t < r->npads; t++)
		route += de[r->nv + t];
	if (!r->compact && r->npads == 0 && r->n == T) {
		memcpy(ds, de, (size_t)T * sizeof *ds);
		return;
	}
	memset(ds, 0, (size_t)T * sizeof *ds);
	if (r->compact)
		for (int j = 0; j < r->nv; j++)
			ds[w->idx[j]] = de[j];
	else
		memcpy(ds, de, (size_t)r->nv * sizeof *ds);
	if (r->npads)
		ds[r->argmin] += route;
}

/* ------------------------------------------------------- softmax family */

static void k_softmax(float *restrict p, const float *restrict x, int np, float *aux)
{
	float m = v_max(x, np);
	ve acc[VP] = {0}, vm = vset1_e(m);
	for (int b = 0; b < np; b += VW)
		for (int h = 0; h < VP; h++) {
			int i = b + h * VE;
			ve e = exp_v(vload_e(x + i) - vm);
			vstore_e(p + i, e);
			acc[h] += e;
		}
	float z = parts_sum(acc);
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			p[b + l] = p[b + l] / z;
	aux[0] = m;
	aux[1] = m;
}

/* softmax over the keys with keep[i] = 1 (others exactly 0) */
static void k_softmax_kept(float *restrict p, const float *restrict x, const float *restrict keep, int np, float *aux)
{
	float mx[VW];
	for (int l = 0; l < VW; l++)
		mx[l] = -INFINITY;
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++) {
			float xv = x[b + l];
			float v = keep[b + l] != 0 ? xv : -INFINITY;
			mx[l] = v > mx[l] ? v : mx[l];
		}
	float m = lanes_max(mx);
	ve acc[VP] = {0}, vm = vset1_e(m);
	for (int b = 0; b < np; b += VW)
		for (int h = 0; h < VP; h++) {
			int i = b + h * VE;
			ve e = exp_v(vload_e(x + i) - vm);
			e = vsel_e(vload_e(keep + i) != 0, e, vzero_e());
			vstore_e(p + i, e);
			acc[h] += e;
		}
	float z = parts_sum(acc);
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			p[b + l] = p[b + l] / z;
	aux[0] = m;
}

/* Order-preserving int32 image of a float; -0 and +0 map to the same key. */
static inline int32_t sort_key(float f)
{
	int32_t b = f_bits(f + 0.0f);
	return b ^ ((b >> 31) & 0x7fffffff);
}

static inline int count_ge(const int32_t *restrict key, int32_t t, int np)
{
	int32_t acc[VW] = {0};
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			acc[l] += key[b + l] >= t;
	return lanes_isum(acc);
}

/* keep[i] = 1 for the k largest (largest=1) or smallest keys of x[0..n), ties to
 * the lower index, exactly k kept: a bisection over the order-preserving integer
 * image of the scores (at most 32 counting passes, usually about log2 n + 2, as
 * it stops as soon as a threshold splits off exactly k keys). Returns passes. */
static int select_k_iter(float *restrict keep, int32_t *restrict key, const float *restrict x, int n, int np, int k,
                         int largest)
{
	int32_t flip = largest ? 0 : -1;
	int32_t kmn[VW], kmx[VW];
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			key[b + l] = sort_key(x[b + l]) ^ flip;
	for (int i = n; i < np; i++)
		key[i] = INT32_MIN;
	if (k >= n) {
		for (int b = 0; b < np; b += VW)
			for (int l = 0; l < VW; l++)
				keep[b + l] = key[b + l] != INT32_MIN ? 1.0f : 0.0f;
		return 0;
	}
	for (int l = 0; l < VW; l++) {
		kmn[l] = INT32_MAX;
		kmx[l] = INT32_MIN;
	}
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++) {
			int32_t v = key[b + l];
			kmx[l] = v > kmx[l] ? v : kmx[l];
			v = v == INT32_MIN ? INT32_MAX : v;
			kmn[l] = v < kmn[l] ? v : kmn[l];
		}
	int32_t mn = kmn[0], mx = kmx[0];
	for (int l = 1; l < VW; l++) {
		mn = kmn[l] < mn ? kmn[l] : mn;
		mx = kmx[l] > mx ? kmx[l] : mx;
	}
	/* invariant: count(key >= lo) = clo >= k > chi = count(key >= hi) */
	int64_t lo = mn, hi = (int64_t)mx + 1;
	int clo = n, chi = 0, passes = 0;
	while (hi - lo > 1 && clo != k) {
		int32_t mid = (int32_t)(lo + (hi - lo) / 2);
		int c = count_ge(key, mid, np);
		passes++;
		if (c >= k) {
			lo = mid;
			clo = c;
		} else {
			hi = mid;
			chi = c;
		}
	}
	int32_t t = (int32_t)lo;
	if (clo == k) {
		for (int b = 0; b < np; b += VW)
			for (int l = 0; l < VW; l++)
				keep[b + l] = key[b + l] >= t ? 1.0f : 0.0f;
	} else { /* key t is the k-th largest and is tied: lower indices first */
		for (int b = 0; b < np; b += VW)
			for (int l = 0; l < VW; l++)
				keep[b + l] = key[b + l] > t ? 1.0f : 0.0f;
		int need = k - chi;
		for (int i = 0; i < n && need > 0; i++)
			if (key[i] == t) {
				keep[i] = 1.0f;
				need--;
			}
	}
	return passes;
}

struct vi {
	float v;
	int i;
};

static int cmp_desc(const void *a, const void *b)
{
	const struct vi *x = a, *y = b;
	if (x->v > y->v)
		return -1;
	if (x->v < y->v)
		return 1;
	return (x->i > y->i) - (x->i < y->i);
}

static int cmp_asc(const void *a, const void *b)
{
	const struct vi *x = a, *y = b;
	if (x->v < y->v)
		return -1;
	if (x->v > y->v)
		return 1;
	return (x->i > y->i) - (x->i < y->i);
}

/* the plain version: a full sort by (score, index) */
static int select_k_sort(float *keep, const float *x, int n, int np, int k, int largest)
{
	struct vi *v = malloc((size_t)n * sizeof *v);
	if (!v)
		return -1;
	for (int i = 0; i < n; i++) {
		v[i].v = x[i];
		v[i].i = i;
	}
	qsort(v, (size_t)n, sizeof *v, largest ? cmp_desc : cmp_asc);
	for (int i = 0; i < np; i++)
		keep[i] = 0;
	for (int j = 0; j < k && j < n; j++)
		keep[v[j].i] = 1.0f;
	free(v);
	return 0;
}

/* ds = p (dp - <p, dp>) */
static void kb_softmax(float *restrict de, const float *restrict pe, const float *restrict ge, int np)
{
	float d = v_dot(pe, ge, np);
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			de[b + l] = pe[b + l] * (ge[b + l] - d);
}

/* ------------------------------------------------------------ sparsemax */

static int cmp_fdesc(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x < y) - (x > y);
}

/* PROTOCOL A3's sort-based sparsemax on y = x - max x: returns tau. */
static int sparsemax_tau_sort(float *tau, const float *y, int n)
{
	float *z = malloc((size_t)n * sizeof *z);
	if (!z)
		return -1;
	memcpy(z, y, (size_t)n * sizeof *z);
	qsort(z, (size_t)n, sizeof *z, cmp_fdesc);
	float cs = 0, csk = 0;
	int k = 0;
	for (int j = 0; j < n; j++) {
		cs += z[j];
		if (1.0f + (float)(j + 1) * z[j] > cs) { /* the count of such j, as torch sums the mask */
			k++;
		}
	}
	if (k < 1)
		k = 1;
	for (int j = 0; j < k; j++)
		csk += z[j];
	*tau = (csk - 1.0f) / (float)k;
	free(z);
	return 0;
}

/* Michelot's algorithm with whole-row passes (Newton on the piecewise linear
 * sum_i [y_i - tau]_+ = 1 from tau = max y - 1, which lies below the root): each
 * pass takes S = {y > tau}, tau <- (sum_S y - 1)/|S|; S only shrinks and the
 * answer is exact once |S| repeats. Returns passes, or -1 past the cap. */
static int sparsemax_tau_iter(float *tau_out, const float *restrict y, int np)
{
	float tau = -1.0f;
	int kprev = -1;
	for (int it = 1; it <= 64; it++) {
		float acc[VW] = {0};
		int32_t cnt[VW] = {0};
		for (int b = 0; b < np; b += VW)
			for (int l = 0; l < VW; l++) {
				float v = y[b + l];
				int in = v > tau;
				acc[l] += in ? v : 0.0f;
				cnt[l] += in;
			}
		int k = lanes_isum(cnt);
		float tn = (lanes_sum(acc) - 1.0f) / (float)k;
		if (k == kprev) {
			*tau_out = tn;
			return it;
		}
		kprev = k;
		tau = tn > tau ? tn : tau;
	}
	return -1;
}

static int k_sparsemax(float *restrict p, float *restrict y, const float *restrict x, int n, int np, int plain,
                       float *aux)
{
	float m = v_max(x, np);
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			y[b + l] = x[b + l] - m;
	float tau;
	int it = plain ? -1 : sparsemax_tau_iter(&tau, y, np);
	if (it < 0 && sparsemax_tau_sort(&tau, y, n))
		return -1;
	int32_t cnt[VW] = {0};
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++) {
			float d = y[b + l] - tau;
			p[b + l] = d > 0 ? d : 0.0f;
			cnt[l] += d > 0;
		}
	aux[0] = tau;
	aux[1] = m;
	aux[2] = (float)it;
	aux[3] = (float)lanes_isum(cnt);
	return 0;
}

/* ds = [p > 0] (dp - mean over the support of dp) */
static void kb_sparsemax(float *restrict de, const float *restrict pe, const float *restrict ge, int np)
{
	float acc[VW] = {0};
	int32_t cnt[VW] = {0};
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++) {
			float g = ge[b + l];
			int in = pe[b + l] > 0;
			acc[l] += in ? g : 0.0f;
			cnt[l] += in;
		}
	int k = lanes_isum(cnt);
	float mean = k ? lanes_sum(acc) / (float)k : 0.0f;
	ve vm = vset1_e(mean);
	for (int i = 0; i < np; i += VE)
		vstore_e(de + i, vsel_e(vload_e(pe + i) > 0, vload_e(ge + i) - vm, vzero_e()));
}

/* -------------------------------------------------------------- entmax */

/* y = x (alpha-1) - max(x (alpha-1)), the study's order of operations; returns max x. */
static float entmax_y(float *restrict y, const float *restrict x, int np, float am1)
{
	float m = v_max(x, np);
	float ym = m * am1;
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			y[b + l] = x[b + l] * am1 - ym;
	return m;
}

/* sum_i [y_i - tau]_+^e  (e given by mode: 1, 2, general) */
enum emode { E_ONE, E_TWO, E_GEN };

static float entmax_sum(float *restrict u, const float *restrict y, int np, float tau, float e, enum emode mode)
{
	ve acc[VP] = {0}, vt = vset1_e(tau), vx = vset1_e(e);
	for (int b = 0; b < np; b += VW)
		for (int h = 0; h < VP; h++) {
			int i = b + h * VE;
			ve d = vload_e(y + i) - vt, v;
			if (mode == E_GEN) {
				v = powpos_v(d, vx);
			} else {
				d = vsel_e(d > 0, d, vzero_e());
				v = mode == E_TWO ? d * d : d;
			}
			vstore_e(u + i, v);
			acc[h] += v;
		}
	return parts_sum(acc);
}

/* entmax-1.5 (e = 2): Newton's method on h(tau) = (sum_i [y_i - tau]_+^2)^(1/2) - 1,
 * from tau = -1 (max y = 0, so h >= 0 there); general alpha takes entmax_halley
 * below. h is convex and decreasing (a norm of convex
 * non-negative functions of tau), so the iterates rise monotonically to the
 * root without a bracket, and h is close to linear in tau (exactly linear for
 * a single support size when all supported y are equal), so few passes are
 * needed. Each pass keeps u = d^e in p, so when the step stops rising p holds
 * the unnormalised answer. Returns passes; *Z = the sum at the final tau. */
static int entmax15_newton(float *restrict p, float *tau_out, float *Z, const float *restrict y, int n, int np)
{
	float tau = -1.0f;
	int it;
	/* The registers wholly past the row (y = -inf there: u = 0) are not computed: adding
	 * their +0 to the non-negative sums would change no bit. With VE < VW (AVX2) that is
	 * the last register of a block when n mod VW <= VE. */
	int nv = (n + VE - 1) / VE * VE;
	for (int i = nv; i < np; i++)
		p[i] = 0.0f;
	for (it = 1; it <= 100; it++) {
		ve a0[VP] = {0}, a1[VP] = {0}, vt = vset1_e(tau);
		for (int b = 0; b < nv; b += VW)
			for (int h = 0; h < VP && b + h * VE < nv; h++) {
				int i = b + h * VE;
				ve d = vload_e(y + i) - vt;
				d = vsel_e(d > 0, d, vzero_e());
				ve u = d * d;
				a1[h] += d;
				vstore_e(p + i, u);
				a0[h] += u;
			}
		float se = parts_sum(a0), se1 = parts_sum(a1);
		*Z = se;
		/* tau' = tau - h/h' = tau + (S_2 - S_2^(1/2)) / S_1 */
		float tn = tau + (se - sqrtf(se)) / se1;
		if (!(tn > tau))
			break;
		tau = tn;
	}
	*tau_out = tau;
	return it;
}

/* Lower bound on the root for general alpha (Jensen, as the AVX-512 kernel's
 * gsetup): for any set S of keys, (1/|S|) sum_S [y - tau]_+^e >= [mean_S y - tau]_+^e
 * (e >= 1: convex), and sum_S <= 1 at the root, so tau* >= mean_S y - |S|^-(alpha-1).
 * S = {y > t} for t in {-1, -1/2, -1/4, -1/8}; tau* >= -1 from the max key (y = 0,
 * in every S) alone. Backed off by a few ulps for the rounding of the means. */
static float entmax_tau0(const float *restrict y, int nv, float am1)
{
	static const float thr[4] = {-1.0f, -0.5f, -0.25f, -0.125f};
	ve s[4][VP];
	vei c[4][VP];
	for (int t = 0; t < 4; t++)
		for (int h = 0; h < VP; h++) {
			s[t][h] = vzero_e();
			c[t][h] = (vei)vzero_e();
		}
	for (int b = 0; b < nv; b += VW)
		for (int h = 0; h < VP && b + h * VE < nv; h++) {
			ve v = vload_e(y + b + h * VE);
			for (int t = 0; t < 4; t++) {
				vei in = v > thr[t];
				s[t][h] += vsel_e(in, v, vzero_e());
				c[t][h] -= in; /* true lanes are -1 */
			}
		}
	_Static_assert(VE >= 4, "the four counts share one register");
	float kf[VE], kp[VE];
	for (int l = 0; l < VE; l++)
		kf[l] = 1.0f;
	for (int t = 0; t < 4; t++) {
		int32_t k = 0, ck[VE];
		for (int h = 0; h < VP; h++) {
			memcpy(ck, &c[t][h], sizeof ck);
			for (int l = 0; l < VE; l++)
				k += ck[l];
		}
		kf[t] = (float)k;
	}
	/* k^-(alpha-1) for the four counts at once, each lane the lanes' scalar exp and log */
	vstore_e(kp, powpos_v(vload_e(kf), vset1_e(-am1)));
	float t0 = -1.0f;
	for (int t = 0; t < 4; t++) {
		float bound = parts_sum(s[t]) / kf[t] - kp[t];
		t0 = bound > t0 ? bound : t0;
	}
	return sb_entmax_tau0_backoff(t0);
}

/* Halley's method on the same h (general alpha: entmax_bisect, headwise adaptive
 * entmax), from Jensen's bound tau0 (entmax_tau0); the step's arithmetic is in
 * entmax_step.h, shared with the CUDA rows. With F = sum d^e (d = [y - tau]_+),
 * S1 = sum d^(e-1), S2 = sum d^(e-2) and P = F^(alpha-1):
 *   Newton step -h/h' = (F - F^(1-(alpha-1)))/S1,
 *   Halley step = Newton / (1 - L/2), L = h h''/h'^2 = (P - 1)(e - 1)(F S2 - S1^2)/(P S1^2),
 * taken when |L| <= 1 (Newton otherwise). Cubic convergence from a start near the
 * root: about 3 passes where Newton from -1 needs 4 to 5 (Gaussian rows of 50 keys,
 * score scales 0.1 to 1).
 * A Halley step can pass the root by its cubic error; the next one comes back, so
 * steps are taken in either direction, and the iteration stops when a step would
 * move tau by at most 2.4e-7 |tau| (2 ulps; the last pass then left u = [y - tau]_+^e
 * at the final tau in p) or after 100 passes. Each pass takes one division per
 * key (r = 1/d; d^(e-1) = u r, d^(e-2) = u r r). Returns passes; *Z = F. */
static int entmax_halley(float *restrict p, float *tau_out, float *Z, const float *restrict y, int n, int np,
                         float am1)
{
	float e = 1.0f / am1, em1 = e - 1.0f;
	int nv = (n + VE - 1) / VE * VE; /* registers wholly past the row: u = 0 (entmax15_newton) */
	for (int i = nv; i < np; i++)
		p[i] = 0.0f;
	float tau = entmax_tau0(y, nv, am1), last = INFINITY;
	int it;
	for (it = 1;; it++) {
		ve a0[VP] = {0}, a1[VP] = {0}, a2[VP] = {0}, vt = vset1_e(tau), vx = vset1_e(e), one = vset1_e(1.0f);
		for (int b = 0; b < nv; b += VW)
			for (int h = 0; h < VP && b + h * VE < nv; h++) {
				int i = b + h * VE;
				ve d = vload_e(y + i) - vt;
				ve u = powpos_v(d, vx); /* 0 when d <= FLT_MIN */
				ve r = one / vsel_e(d > FLT_MIN, d, one);
				ve w = u * r;
				vstore_e(p + i, u);
				a0[h] += u;
				a1[h] += w;
				a2[h] += w * r;
			}
		float F = parts_sum(a0), tn;
		*Z = F;
		if (!sb_entmax_halley_step(&tn, &last, tau, F, parts_sum(a1), parts_sum(a2), am1, em1, it))
			break;
		tau = tn;
	}
	*tau_out = tau;
	return it;
}

/* bisection to float precision (the plain path for general alpha) */
static int entmax_bisect_plain(float *restrict p, float *tau_out, float *Z, const float *restrict y, int n, int np,
                               float am1, enum emode mode)
{
	float e = 1.0f / am1;
	float lo = -1.0f, hi = -powf(1.0f / (float)n, am1);
	int it = 0;
	while (it < 200) {
		float mid = 0.5f * (lo + hi);
		if (!(mid > lo && mid < hi))
			break;
		it++;
		if (entmax_sum(p, y, np, mid, e, mode) >= 1.0f)
			lo = mid;
		else
			hi = mid;
	}
	*tau_out = lo;
	*Z = entmax_sum(p, y, np, lo, e, mode);
	return it;
}

static int cmp_ddesc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x < y) - (x > y);
}

/* entmax-1.5 threshold by sorting: for support size k (the k largest y), tau_k
 * solves sum_{i<=k} (y_i - tau)^2 = 1, i.e. tau_k = mean_k - sqrt(1/k - var_k);
 * the support is the number of k with tau_k <= y_(k). */
static int entmax15_tau_sort(float *tau_out, const float *y, int n)
{
	double *z = malloc((size_t)n * sizeof *z);
	if (!z)
		return -1;
	for (int i = 0; i < n; i++)
		z[i] = y[i];
	qsort(z, (size_t)n, sizeof *z, cmp_ddesc);
	double s1 = 0, s2 = 0, best = z[0] - 1;
	int support = 0;
	for (int k = 1; k <= n; k++) {
		s1 += z[k - 1];
		s2 += z[k - 1] * z[k - 1];
		double mean = s1 / k, var = s2 / k - mean * mean;
		double dlt = 1.0 / k - var;
		double tk = mean - sqrt(dlt > 0 ? dlt : 0);
		if (tk <= z[k - 1]) {
			support = k;
			best = tk;
		}
	}
	(void)support;
	*tau_out = (float)best;
	free(z);
	return 0;
}

static enum emode emode_of(float am1)
{
	return am1 == 1.0f ? E_ONE : am1 == 0.5f ? E_TWO : E_GEN;
}

/* exact alpha-entmax on the effective row; am1 = alpha - 1 (clamped) */
static int k_entmax(float *restrict p, float *restrict y, const float *restrict x, int n, int np, float am1, int plain,
                    float *aux)
{
	enum emode mode = emode_of(am1);
	if (mode == E_ONE)
		return k_sparsemax(p, y, x, n, np, plain, aux);
	float m = entmax_y(y, x, np, am1);
	float tau, Z;
	int it;
	if (plain && mode == E_TWO) {
		if (entmax15_tau_sort(&tau, y, n))
			return -1;
		Z = entmax_sum(p, y, np, tau, 2.0f, E_TWO);
		it = 0;
	} else if (plain) {
		it = entmax_bisect_plain(p, &tau, &Z, y, n, np, am1, mode);
	} else if (mode == E_GEN) {
		it = entmax_halley(p, &tau, &Z, y, n, np, am1);
	} else {
		it = entmax15_newton(p, &tau, &Z, y, n, np);
	}
	int32_t cnt[VW] = {0};
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++) {
			p[b + l] = p[b + l] / Z;
			cnt[l] += p[b + l] > 0;
		}
	aux[0] = tau;
	aux[1] = m;
	aux[2] = (float)it;
	aux[3] = (float)lanes_isum(cnt);
	return 0;
}

/* Exact backward of alpha-entmax (implicit differentiation of sum p = 1).
 * With d = y - tau, p = d^e (e = 1/(alpha-1)) and q = d^(e-1) = p^(2-alpha):
 *   ds_j = q_j dp_j - q_j (sum q dp)/(sum q)
 * (the (alpha-1) of dy/ds cancels the e of dp/dd), and, with Yq = q/sum q and
 * ent = sum p log p,
 *   dp_i/dalpha = e^2 (p_i - Yq_i) - e (p_i log p_i - Yq_i ent).
 * Returns d loss/d alpha for the row (0 when want_alpha is 0). q holds 2 np floats
 * (the second row keeps log p between the two alpha passes). */
static double kb_entmax(float *restrict de, float *restrict q, const float *restrict pe, const float *restrict ge,
                        const float *restrict x, float tau, int np, float am1, int want_alpha)
{
	enum emode mode = emode_of(am1);
	if (mode == E_ONE) {
		for (int b = 0; b < np; b += VW)
			for (int l = 0; l < VW; l++)
				q[b + l] = pe[b + l] > 0 ? 1.0f : 0.0f;
	} else { /* q = p/d = d^(e-1)/Z (Z = the forward's sum, 1 up to rounding) */
		float m = v_max(x, np), ym = m * am1;
		ve va = vset1_e(am1), vy = vset1_e(ym), vt = vset1_e(tau), z = vzero_e(), one = vset1_e(1.0f);
		for (int i = 0; i < np; i += VE) {
			ve d = (vload_e(x + i) * va - vy) - vt;
			ve pv = vload_e(pe + i);
			vei in = (pv > 0) & (d > 0);
			vstore_e(q + i, vsel_e(in, pv, z) / vsel_e(in, d, one));
		}
	}
	float a0[VW] = {0}, a1[VW] = {0};
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++) {
			a0[l] += q[b + l];
			a1[l] += q[b + l] * ge[b + l];
		}
	float Q = lanes_sum(a0), QD = lanes_sum(a1);
	float c = QD / Q;
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			de[b + l] = q[b + l] * (ge[b + l] - c);
	if (!want_alpha)
		return 0;
	/* entropy term: ent = sum p log p */
	float e = 1.0f / am1;
	ve h[VP] = {0}, one = vset1_e(1.0f);
	for (int b = 0; b < np; b += VW)
		for (int k = 0; k < VP; k++) {
			int i = b + k * VE;
			ve pv = vload_e(pe + i);
			ve lp = log_pos_v(vsel_e(pv > FLT_MIN, pv, one)); /* 0 where p ~ 0 */
			vstore_e(q + np + i, lp);                       /* kept for the next pass */
			h[k] += pv * lp;
		}
	float ent = parts_sum(h);
	ve acc[VP] = {0}, vq = vset1_e(Q), vx = vset1_e(e), vent = vset1_e(ent);
	for (int b = 0; b < np; b += VW)
		for (int k = 0; k < VP; k++) {
			int i = b + k * VE;
			ve pv = vload_e(pe + i);
			ve yq = vload_e(q + i) / vq;
			ve plp = pv * vload_e(q + np + i);
			ve t = vx * (pv - yq) - (plp - yq * vent);
			acc[k] += vload_e(ge + i) * t;
		}
	return (double)e * (double)parts_sum(acc);
}

/* -------------------------------------------------- the study's bisection */

#define UNROLL_ITERS 18

struct unrolled {
	float lo0, hi0, hi, c, Z, e;
	int amin, amax; /* effective positions of min y / max y (lowest index) */
	unsigned bits;
};

/* PROTOCOL A3 steps 1-4 on the effective row (n keys); dfull = T. u gets
 * [y - tau_hi]_+^e, p the output (p may be NULL to skip it). */
static void unrolled_run(struct unrolled *st, float *restrict u, float *restrict y, const float *restrict x, int n,
                         int np, int dfull, float am1)
{
	enum emode mode = emode_of(am1);
	float e = 1.0f / am1;
	entmax_y(y, x, np, am1);
	int amin = 0, amax = 0;
	for (int i = 1; i < n; i++) {
		if (y[i] < y[amin])
			amin = i;
		if (y[i] > y[amax])
			amax = i;
	}
	float lo = y[amin] - 1.0f;
	float c = powf((float)(1.0 / (double)dfull), am1);
	float hi = y[amax] - c;
	st->lo0 = lo;
	st->hi0 = hi;
	st->c = c;
	st->bits = 0;
	for (int t = 0; t < UNROLL_ITERS; t++) {
		float tau = (lo + hi) / 2.0f;
		float s = entmax_sum(u, y, np, tau, e, mode);
		if (s - 1.0f >= 0.0f) {
			lo = tau;
			st->bits |= 1u << t;
		} else {
			hi = tau;
		}
	}
	st->hi = hi;
	st->Z = entmax_sum(u, y, np, hi, e, mode);
	st->e = e;
	st->amin = amin;
	st->amax = amax;
}

static void k_unrolled(float *restrict p, float *restrict y, const float *restrict x, int n, int np, int dfull,
                       float am1, float *aux)
{
	struct unrolled st;
	unrolled_run(&st, p, y, x, n, np, dfull, am1);
	float z = st.Z + 1e-12f;
	int32_t cnt[VW] = {0};
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++) {
			p[b + l] = p[b + l] / z;
			cnt[l] += p[b + l] > 0;
		}
	aux[0] = st.hi;
	aux[1] = x[st.amax];
	aux[2] = (float)st.bits;
	aux[3] = (float)lanes_isum(cnt);
}

/* Gradient of the unrolled graph. The branch decisions are piecewise constant,
 * so only the last step carries gradient: with d = y - tau_hi, u = [d]_+^e,
 * Z = sum u + 1e-12, p = u/Z, and tau_hi = w lo0 + (1-w) hi0 where w is the
 * dyadic weight the 18 decisions give the initial lower bound,
 * lo0 = min y - 1, hi0 = max y - (1/T)^(alpha-1):
 *   du_i = (dp_i - <dp, p>)/Z,  dd_i = du_i e d_i^(e-1),  dtau = -sum dd,
 *   dy_i = dd_i (+ w dtau at argmin y) (+ (1-w) dtau at argmax y),
 *   ds = (alpha-1) dy,
 *   dalpha = sum dy_i (x_i - x_max) + (1-w) dtau c ln T - e^2 sum du_i u_i ln d_i
 * (y = x(alpha-1) - max, c = T^-(alpha-1), e = 1/(alpha-1)). */
static double kb_unrolled(float *restrict de, float *restrict u, float *restrict y, const float *restrict ge,
                          const float *restrict x, int n, int np, int dfull, float am1, int want_alpha)
{
	struct unrolled st;
	unrolled_run(&st, u, y, x, n, np, dfull, am1);
	float z = st.Z + 1e-12f, e = st.e;
	/* <dp, p> with p = u/z */
	float a0[VW] = {0};
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			a0[l] += ge[b + l] * (u[b + l] / z);
	float P = lanes_sum(a0);
	ve a1[VP] = {0}, a2[VP] = {0}, vh = vset1_e(st.hi), vP = vset1_e(P), vz = vset1_e(z), vx = vset1_e(e);
	for (int b = 0; b < np; b += VW)
		for (int k = 0; k < VP; k++) {
			int i = b + k * VE;
			ve d = vload_e(y + i) - vh;
			ve dv = (vload_e(ge + i) - vP) / vz;
			ve uv = vload_e(u + i);
			vei in = (d > FLT_MIN) & (uv > 0);
			uv = vsel_e(in, uv, vzero_e());
			ve dc = vsel_e(in, d, vset1_e(1.0f));
			ve dd = dv * vx * (uv / dc);
			vstore_e(de + i, dd);
			a1[k] += dd;
			a2[k] += dv * uv * log_pos_v(dc);
		}
	float dtau = -parts_sum(a1);
	double w = 0, wlo = 1, whi = 0; /* coefficient of lo0 in lo, hi */
	for (int t = 0; t < UNROLL_ITERS; t++) {
		double a = 0.5 * (wlo + whi);
		if (st.bits >> t & 1u)
			wlo = a;
		else
			whi = a;
	}
	w = whi;
	float dlo = (float)(w * dtau), dhi = (float)((1 - w) * dtau);
	de[st.amin] += dlo;
	de[st.amax] += dhi;
	double da = 0;
	if (want_alpha) {
		float xm = x[st.amax];
		ve a3[VP] = {0}, vm = vset1_e(xm);
		vei lane;
		for (int l = 0; l < VE; l++)
			lane[l] = l;
		for (int b = 0; b < np; b += VW)
			for (int k = 0; k < VP; k++) {
				int i = b + k * VE;
				ve xv = vsel_e(lane + i < n, vload_e(x + i) - vm, vzero_e());
				a3[k] += vload_e(de + i) * xv;
			}
		da = (double)parts_sum(a3) + (double)dhi * st.c * log((double)dfull) - (double)e * e * parts_sum(a2);
	}
	for (int b = 0; b < np; b += VW)
		for (int l = 0; l < VW; l++)
			de[b + l] *= am1;
	return da;
}

/* ------------------------------------------------------------ the API */

static int uses_alpha(enum sb_norm_kind k)
{
	return k == SB_NORM_ENTMAX_BISECT || k == SB_NORM_ADAPTIVE;
}

static int check_args(const struct sb_norm *nm, int rows, int T, int n_valid, struct sb_err *err)
{
	if (!nm)
		return SB_ERR(err, SB_EINTERNAL, "attn_norm: no normaliser");
	if (rows < 0 || T < 1)
		return SB_ERR(err, SB_EDATA, "attn_norm: bad block shape rows=%d T=%d", rows, T);
	if (n_valid < 1)
		return SB_ERR(err, SB_EDATA, "attn_norm: no valid key (n_valid = %d, T = %d)", n_valid, T);
	if (n_valid > T)
		return SB_ERR(err, SB_EDATA, "attn_norm: n_valid = %d exceeds the row length T = %d", n_valid, T);
	if ((nm->kind == SB_NORM_TOPK || nm->kind == SB_NORM_BOTTOMK) && !(nm->ratio > 0 && nm->ratio <= 1))
		return SB_ERR(err, SB_EDATA, "attn_norm: top-k ratio %g outside (0, 1]", nm->ratio);
	return 0;
}

/* alpha - 1 for the row's method, after the clamp (NaN stays NaN) */
static float method_am1(const struct sb_norm *nm, float alpha)
{
	if (nm->kind == SB_NORM_ENTMAX15)
		return 0.5f;
	if (isnan(alpha))
		return NAN;
	float a = alpha < 1.05f ? 1.05f : alpha > 2.0f ? 2.0f : alpha;
	return a - 1.0f;
}

static void fill_nan(float *v, int n)
{
	for (int i = 0; i < n; i++)
		v[i] = NAN;
}

#if defined(SB_NORM_AVX512) || defined(SB_NORM_AVX2)
/* Methods for which SB_MASK_MARGIN gives exactly the SB_MASK_EXCLUDE result
 * (a key 60 below the row minimum is never kept by top-k, since k <= n_valid, and
 * lies outside every sparsemax/entmax support since (alpha-1) 60 > 1), as long
 * as min - 60 is below min in float. */
static int margin_is_exclude(const struct sb_norm *nm)
{
	return nm->kind == SB_NORM_TOPK || nm->kind == SB_NORM_SPARSEMAX ||
	       (!nm->unrolled &&
	        (nm->kind == SB_NORM_ENTMAX15 || nm->kind == SB_NORM_ENTMAX_BISECT || nm->kind == SB_NORM_ADAPTIVE));
}

/* the row is its own effective row: all valid scores finite and nothing to pad */
static int row_direct(const struct sb_norm *nm, const float *s, int T, int n_valid)
{
	float mn;
	if (!sbv_row_finite(s, n_valid, &mn))
		return 0;
	return n_valid == T || nm->mask == SB_MASK_EXCLUDE ||
	       (margin_is_exclude(nm) && mn - (float)SB_MASK_MARGIN_VALUE < mn);
}

/* general-alpha entmax (not 1.5 or 2, not the study's bisection): the rows the vector
 * kernels solve together */
static int general_alpha(const struct sb_norm *nm, float am1)
{
	return !nm->unrolled && uses_alpha(nm->kind) && am1 != 0.5f && am1 != 1.0f;
}
#endif

#ifdef SB_NORM_AVX2
/* the backward of general-alpha entmax on one effective row with the AVX2 kernel
 * (without aux, the threshold solved again by its forward, p into de as scratch) */
static double bwd_avx2(float *de, const float *pe, const float *ge, const float *x, const float *ar, int n, float am1,
                       int want_alpha, struct work *w)
{
	float a4[SB_NORM_AUX];
	if (!ar) {
		sbv_entmax_rows(de, x, 1, 0, n, am1, a4, w->big, w->nbig);
		ar = a4;
	}
	return sbv_entmax_bwd_rows(de, pe, ge, x, ar, 1, 0, n, am1, want_alpha, w->big, w->nbig);
}
#endif

#ifdef SB_NORM_AVX512
/* softmax, the first of rows s + g T (g < left) direct: how many of the next up to 16
 * are direct, in a run from the first (row_direct's rule for softmax: finite, and
 * nothing to pad or masked keys excluded) */
static int softmax_run(const struct sb_norm *nm, const float *s, int left, int T, int n_valid)
{
	int n = left < 16 ? left : 16;
	if (n_valid != T && nm->mask != SB_MASK_EXCLUDE)
		return 1;
	unsigned m = sbv_rows_finite(s, n, T, n_valid);
	int G = 1;
	while (G < n && (m >> G & 1))
		G++;
	return G;
}

/* forward of one effective row x[0..n) with the AVX-512 kernels */
static void fwd_avx(const struct sb_norm *nm, float *pe, float *ar, const float *x, int n, int T, int k, float am1,
                    struct work *w)
{
	switch (nm->kind) {
	case SB_NORM_SOFTMAX:
		sbv_softmax(pe, x, n, ar);
		ar[3] = (float)n;
		break;
	case SB_NORM_TOPK:
	case SB_NORM_BOTTOMK: {
		int kk = k < n ? k : n;
		sbv_topk(pe, x, n, kk, nm->kind == SB_NORM_TOPK, w->key, ar);
		ar[1] = ar[0];
		ar[3] = (float)kk;
		break;
	}
	case SB_NORM_SPARSEMAX:
		sbv_sparsemax(pe, x, n, ar);
		break;
	case SB_NORM_ENTMAX15:
	case SB_NORM_ENTMAX_BISECT:
	case SB_NORM_ADAPTIVE:
		if (nm->unrolled)
			sbv_unrolled(pe, x, n, T, am1, ar, w->big);
		else
			sbv_entmax(pe, x, n, am1, ar, w->big);
		break;
	}
}

/* backward of one effective row with the AVX-512 kernels; returns dalpha */
static double bwd_avx(const struct sb_norm *nm, float *de, const float *pe, const float *ge, const float *x,
                      const float *ar, int n, int T, float am1, int want_alpha, struct work *w)
{
	float a4[SB_NORM_AUX];
	switch (nm->kind) {
	case SB_NORM_SOFTMAX:
	case SB_NORM_TOPK:
	case SB_NORM_BOTTOMK:
		sbv_softmax_bwd(de, pe, ge, n);
		return 0;
	case SB_NORM_SPARSEMAX:
		sbv_sparsemax_bwd(de, pe, ge, n);
		return 0;
	case SB_NORM_ENTMAX15:
	case SB_NORM_ENTMAX_BISECT:
	case SB_NORM_ADAPTIVE:
		if (!ar) { /* no aux: recompute the forward's threshold (into scratch) */
			if (nm->unrolled)
				sbv_unrolled(w->y, x, n, T, am1, a4, w->big);
			else
				sbv_entmax(w->y, x, n, am1, a4, w->big);
			ar = a4;
		}
		if (nm->unrolled)
			return sbv_unrolled_bwd(de, ge, x, ar, n, T, am1, want_alpha, w->y);
		if (am1 == 1.0f) {
			sbv_sparsemax_bwd(de, pe, ge, n);
			if (!want_alpha)
				return 0;
		}
		return sbv_entmax_bwd(de, pe, ge, x, ar[0], ar[1], n, am1, want_alpha, w->y);
	}
	return 0;
}
#endif

/* forward of one effective row (padded to np) with the portable kernels */
static int fwd_portable(const struct sb_norm *nm, int plain, float *pe, float *ar, struct work *w, int n, int np, int T,
                        int k, float am1)
{
	switch (nm->kind) {
	case SB_NORM_SOFTMAX:
		k_softmax(pe, w->x, np, ar);
		ar[3] = (float)n;
		return 0;
	case SB_NORM_TOPK:
	case SB_NORM_BOTTOMK: {
		int kk = k < n ? k : n, largest = nm->kind == SB_NORM_TOPK;
		if (plain) {
			if (select_k_sort(w->y, w->x, n, np, kk, largest))
				return -1;
		} else {
			ar[2] = (float)select_k_iter(w->y, w->key, w->x, n, np, kk, largest);
		}
		k_softmax_kept(pe, w->x, w->y, np, ar);
		ar[1] = ar[0];
		ar[3] = (float)kk;
		return 0;
	}
	case SB_NORM_SPARSEMAX:
		return k_sparsemax(pe, w->y, w->x, n, np, plain, ar);
	case SB_NORM_ENTMAX15:
	case SB_NORM_ENTMAX_BISECT:
	case SB_NORM_ADAPTIVE:
		if (nm->unrolled) {
			k_unrolled(pe, w->y, w->x, n, np, T, am1, ar);
			return 0;
		}
		return k_entmax(pe, w->y, w->x, n, np, am1, plain, ar);
	}
	return 0;
}

int sb_norm_forward_algo(const struct sb_norm *nm, enum sb_norm_algo algo, float *p, float *aux, const float *s,
                         int rows, int T, int n_valid, float alpha, struct sb_err *err)
{
	SB_TRY(check_args(nm, rows, T, n_valid, err));
	struct stackbuf sbuf;
	struct work w;
	if (work_init(&w, &sbuf, T))
		return SB_ERR(err, SB_EIO, "attn_norm: out of memory for rows of %d keys", T);
	int plain = algo == SB_NORM_ALGO_PLAIN;
	float am1 = method_am1(nm, alpha);
	int k = sb_norm_topk_k(nm->ratio, n_valid);
	int rc = 0;
	for (int r = 0; r < rows && !rc; r++) {
		const float *sr = s + (size_t)r * T;
		float *pr = p + (size_t)r * T;
		float a4[SB_NORM_AUX] = {0};
		float *ar = aux ? aux + (size_t)r * SB_NORM_AUX : a4;
		for (int j = 0; j < SB_NORM_AUX; j++)
			ar[j] = 0;
		if (uses_alpha(nm->kind) && isnan(am1)) {
			fill_nan(pr, T);
			ar[3] = NAN;
			continue;
		}
#if defined(SB_NORM_AVX512) || defined(SB_NORM_AVX2)
		int direct = algo == SB_NORM_ALGO_AUTO && row_direct(nm, sr, T, n_valid);
		/* general-alpha entmax: a run of up to 16 (AVX2: 8) direct rows solved together */
		if (direct && general_alpha(nm, am1)) {
			int gmax = sbv_entmax_rows_fit(n_valid, w.nbig), G = 1;
			while (G < gmax && r + G < rows && row_direct(nm, sr + (size_t)G * T, T, n_valid))
				G++;
			float ag[16 * SB_NORM_AUX];
			sbv_entmax_rows(pr, sr, G, T, n_valid, am1, aux ? ar : ag, w.big, w.nbig);
			for (int q = 0; q < G; q++)
				for (int j = n_valid; j < T; j++)
					pr[(size_t)q * T + j] = 0;
			r += G - 1;
			continue;
		}
#endif
#ifdef SB_NORM_AVX512
		/* softmax: a run of up to 16 direct rows, their sums reduced together */
		if (direct && nm->kind == SB_NORM_SOFTMAX) {
			int G = softmax_run(nm, sr, rows - r, T, n_valid);
			float ag[16 * SB_NORM_AUX];
			float *ax = aux ? ar : ag;
			for (int q = 0; q < G * SB_NORM_AUX; q++)
				ax[q] = 0;
			sbv_softmax_rows(pr, sr, G, T, n_valid, ax);
			for (int q = 0; q < G; q++) {
				ax[q * SB_NORM_AUX + 3] = (float)n_valid;
				for (int j = n_valid; j < T; j++)
					pr[(size_t)q * T + j] = 0;
			}
			r += G - 1;
			continue;
		}
		if (direct) {
			fwd_avx(nm, pr, ar, sr, n_valid, T, k, am1, &w);
			for (int j = n_valid; j < T; j++)
				pr[j] = 0;
			continue;
		}
#endif
		struct row rw;
		row_build(&rw, &w, sr, T, n_valid, nm->mask);
		if (rw.bad == 2) {
			rc = SB_ERR(err, SB_EDATA, "attn_norm: row %d: no finite score among its %d valid keys", r,
			            n_valid);
			break;
		}
		if (rw.bad) {
			fill_nan(pr, T);
			ar[3] = NAN;
			continue;
		}
#ifdef SB_NORM_AVX512
		if (algo == SB_NORM_ALGO_AUTO)
			fwd_avx(nm, w.p, ar, w.x, rw.n, T, k, am1, &w);
		else
#elif defined(SB_NORM_AVX2)
		if (algo == SB_NORM_ALGO_AUTO && general_alpha(nm, am1))
			sbv_entmax_rows(w.p, w.x, 1, 0, rw.n, am1, ar, w.big, w.nbig);
		else
#endif
		    if (fwd_portable(nm, plain, w.p, ar, &w, rw.n, rw.np, T, k, am1))
			rc = SB_ERR(err, SB_EIO, "attn_norm: out of memory");
		if (!rc)
			row_scatter(pr, w.p, &rw, &w, T, n_valid);
	}
	free(w.heap);
	return rc;
}

int sb_norm_forward(const struct sb_norm *nm, float *p, float *aux, const float *s, int rows, int T, int n_valid,
                    float alpha, struct sb_err *err)
{
	return sb_norm_forward_algo(nm, SB_NORM_ALGO_AUTO, p, aux, s, rows, T, n_valid, alpha, err);
}

/* backward of one effective row (padded) with the portable kernels */
__attribute__((unused)) static double bwd_portable(const struct sb_norm *nm, struct work *w, const float *ar, int n,
                                                   int np, int T, float am1, int want_alpha)
{
	switch (nm->kind) {
	case SB_NORM_SOFTMAX:
	case SB_NORM_TOPK:
	case SB_NORM_BOTTOMK:
		kb_softmax(w->h, w->p, w->g, np);
		return 0;
	case SB_NORM_SPARSEMAX:
		kb_sparsemax(w->h, w->p, w->g, np);
		return 0;
	case SB_NORM_ENTMAX15:
	case SB_NORM_ENTMAX_BISECT:
	case SB_NORM_ADAPTIVE:
		if (nm->unrolled)
			return kb_unrolled(w->h, w->y, w->y + np, w->g, w->x, n, np, T, am1, want_alpha);
		float tau;
		if (ar) {
			tau = ar[0];
		} else { /* no aux: recompute the threshold */
			float a4[SB_NORM_AUX];
			k_entmax(w->h, w->y, w->x, n, np, am1, 0, a4);
			tau = a4[0];
		}
		return kb_entmax(w->h, w->y, w->p, w->g, w->x, tau, np, am1, want_alpha);
	}
	return 0;
}

void sb_norm_backward(const struct sb_norm *nm, float *ds, double *dalpha, const float *dp, const float *p,
                      const float *aux, const float *s, int rows, int T, int n_valid, float alpha)
{
	struct stackbuf sbuf;
	struct work w;
	if (check_args(nm, rows, T, n_valid, NULL) || work_init(&w, &sbuf, T)) {
		if (T > 0 && rows > 0)
			fill_nan(ds, rows * T);
		if (dalpha && nm && uses_alpha(nm->kind))
			*dalpha = NAN;
		return;
	}
	float am1 = method_am1(nm, alpha);
	int want_alpha = dalpha && uses_alpha(nm->kind) && !(alpha < 1.05f) && !(alpha > 2.0f);
	double da = 0;
	for (int r = 0; r < rows; r++) {
		const float *sr = s + (size_t)r * T, *pr = p + (size_t)r * T;
		const float *gr = dp + (size_t)r * T;
		const float *ar = aux ? aux + (size_t)r * SB_NORM_AUX : NULL;
		float *dr = ds + (size_t)r * T;
		if (uses_alpha(nm->kind) && isnan(am1)) {
			fill_nan(dr, T);
			da = NAN;
			continue;
		}
#if defined(SB_NORM_AVX512) || defined(SB_NORM_AVX2)
		int direct = row_direct(nm, sr, T, n_valid);
		/* general-alpha entmax: a run of up to 16 direct rows together (the kernel takes
		 * them in groups of as many as it solves at once) */
		if (direct && ar && general_alpha(nm, am1)) {
			int gmax = (int)(w.nbig / (2 * (size_t)n_valid)), G = 1;
			gmax = gmax > 16 ? 16 : gmax;
			while (G < gmax && r + G < rows && row_direct(nm, sr + (size_t)G * T, T, n_valid))
				G++;
			da += sbv_entmax_bwd_rows(dr, pr, gr, sr, ar, G, T, n_valid, am1, want_alpha, w.big, w.nbig);
			for (int q = 0; q < G; q++)
				for (int j = n_valid; j < T; j++)
					dr[(size_t)q * T + j] = 0;
			r += G - 1;
			continue;
		}
#endif
#ifdef SB_NORM_AVX512
		/* softmax: a run of up to 16 direct rows, their sums reduced together */
		if (direct && nm->kind == SB_NORM_SOFTMAX) {
			int G = softmax_run(nm, sr, rows - r, T, n_valid);
			sbv_softmax_bwd_rows(dr, pr, gr, G, T, n_valid);
			for (int q = 0; q < G; q++)
				for (int j = n_valid; j < T; j++)
					dr[(size_t)q * T + j] = 0;
			r += G - 1;
			continue;
		}
		if (direct) {
			da += bwd_avx(nm, dr, pr, gr, sr, ar, n_valid, T, am1, want_alpha, &w);
			for (int j = n_valid; j < T; j++)
				dr[j] = 0;
			continue;
		}
#endif
		struct row rw;
		row_build(&rw, &w, sr, T, n_valid, nm->mask);
		if (rw.bad) {
			fill_nan(dr, T);
			da = NAN;
			continue;
		}
		row_gather(w.g, gr, &rw, &w, T, n_valid);
		row_gather(w.p, pr, &rw, &w, T, n_valid);
#if defined(SB_NORM_AVX512)
		da += bwd_avx(nm, w.h, w.p, w.g, w.x, ar, rw.n, T, am1, want_alpha, &w);
#elif defined(SB_NORM_AVX2)
		if (general_alpha(nm, am1))
			da += bwd_avx2(w.h, w.p, w.g, w.x, ar, rw.n, am1, want_alpha, &w);
		else
			da += bwd_portable(nm, &w, ar, rw.n, rw.np, T, am1, want_alpha);
#else
		da += bwd_portable(nm, &w, ar, rw.n, rw.np, T, am1, want_alpha);
#endif
		row_scatter_grad(dr, w.h, &rw, &w, T);
	}
	if (want_alpha || (dalpha && uses_alpha(nm->kind) && isnan(da)))
		*dalpha += da;
	free(w.heap);
}
