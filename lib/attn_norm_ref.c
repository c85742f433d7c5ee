/* attn_norm_ref.c — the double-precision reference of every normaliser.
 *
 * Plain loops, full sorts, bisection run until the bracket stops shrinking:
 * written to be obviously right, not fast. The float code in attn_norm.c is
 * tested against it, and it is itself tested against central finite differences
 * and against PyTorch (tests/golden/attn_norm/gen.py).
 *
 * The semantics are those documented in attn_norm.h: NaN/+inf rows propagate
 * NaN, -inf keys are dropped, margin padding copies min(valid) - 60, and the
 * padded keys' gradient goes to that minimum.
 */
#include "attn_norm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- one row */

struct refrow {
	int n, nv, npads, argmin, bad;
	int *idx;   /* effective valid key j -> original position */
	double *z;  /* effective scores */
};

/* effective row: finite valid scores in order, then (margin) the pads */
static void ref_build(struct refrow *r, const double *s, int T, int n_valid, enum sb_mask_mode mask)
{
	r->bad = 0;
	r->nv = 0;
	for (int i = 0; i < n_valid; i++)
		if (isnan(s[i]) || s[i] == INFINITY)
			r->bad = 1;
	if (r->bad)
		return;
	for (int i = 0; i < n_valid; i++)
		if (s[i] != -INFINITY) {
			r->idx[r->nv] = i;
			r->z[r->nv++] = s[i];
		}
	if (r->nv == 0) {
		r->bad = 2;
		return;
	}
	r->npads = 0;
	r->argmin = -1;
	if (mask == SB_MASK_MARGIN && n_valid < T) {
		int am = 0;
		for (int j = 1; j < r->nv; j++)
			if (r->z[j] < r->z[am])
				am = j;
		r->argmin = r->idx[am];
		r->npads = T - n_valid;
		for (int t = 0; t < r->npads; t++)
			r->z[r->nv + t] = r->z[am] - SB_MASK_MARGIN_VALUE;
	}
	r->n = r->nv + r->npads;
}

/* original position of effective key j (pads sit at n_valid + t) */
static int ref_pos(const struct refrow *r, int j, int n_valid)
{
	return j < r->nv ? r->idx[j] : n_valid + (j - r->nv);
}

static double maxv(const double *z, int n)
{
	double m = z[0];
	for (int i = 1; i < n; i++)
		if (z[i] > m)
			m = z[i];
	return m;
}

static void softmax_ref(double *p, const double *z, const int *keep, int n)
{
	double m = -INFINITY, sum = 0;
	for (int i = 0; i < n; i++)
		if ((!keep || keep[i]) && z[i] > m)
			m = z[i];
	for (int i = 0; i < n; i++) {
		p[i] = !keep || keep[i] ? exp(z[i] - m) : 0.0;
		sum += p[i];
	}
	for (int i = 0; i < n; i++)
		p[i] /= sum;
}

struct dvi {
	double v;
	int i;
};

static int by_value_desc(const void *a, const void *b)
{
	const struct dvi *x = a, *y = b;
	if (x->v != y->v)
		return x->v > y->v ? -1 : 1;
	return x->i - y->i;
}

static int by_value_asc(const void *a, const void *b)
{
	const struct dvi *x = a, *y = b;
	if (x->v != y->v)
		return x->v < y->v ? -1 : 1;
	return x->i - y->i;
}

/* keep the k largest (or smallest) by a full sort; ties to the lower index */
static void topk_keep(int *keep, const double *z, int n, int k, int largest)
{
	struct dvi *v = malloc((size_t)n * sizeof *v);
	for (int i = 0; i < n; i++) {
		v[i].v = z[i];
		v[i].i = i;
		keep[i] = 0;
	}
	qsort(v, (size_t)n, sizeof *v, largest ? by_value_desc : by_value_asc);
	for (int j = 0; j < k && j < n; j++)
		keep[v[j].i] = 1;
	free(v);
}

static int desc_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x < y) - (x > y);
}

/* PROTOCOL A3: z = s - max s sorted descending; k = max(1, #{j : 1 + j z_(j) > cumsum_j});
 * tau = (cumsum_k - 1)/k; p = max(z - tau, 0). */
static void sparsemax_ref(double *p, const double *s, int n)
{
	double m = maxv(s, n), *z = malloc((size_t)n * sizeof *z), cs = 0, csk = 0;
	for (int i = 0; i < n; i++)
		z[i] = s[i] - m;
	qsort(z, (size_t)n, sizeof *z, desc_double);
	int k = 0;
	for (int j = 1; j <= n; j++) {
		cs += z[j - 1];
		if (1 + j * z[j - 1] > cs)
			k++;
	}
	if (k < 1)
		k = 1;
	for (int j = 0; j < k; j++)
		csk += z[j];
	double tau = (csk - 1) / k;
	for (int i = 0; i < n; i++)
		p[i] = fmax(s[i] - m - tau, 0);
	free(z);
}

/* entmax-1.5 by its sort-based closed form: y = (s - max)/2 sorted descending;
 * for the top k, tau_k solves sum (y_i - tau)^2 = 1: tau_k = mean - sqrt(1/k - var);
 * the support is the largest k with tau_k <= y_(k). */
static void entmax15_ref(double *p, const double *s, int n)
{
	double m = maxv(s, n), *y = malloc((size_t)n * sizeof *y), s1 = 0, s2 = 0, tau = -1;
	for (int i = 0; i < n; i++)
		y[i] = (s[i] - m) / 2;
	qsort(y, (size_t)n, sizeof *y, desc_double);
	for (int k = 1; k <= n; k++) {
		s1 += y[k - 1];
		s2 += y[k - 1] * y[k - 1];
		double mean = s1 / k, var = s2 / k - mean * mean, d = 1.0 / k - var;
		double tk = mean - sqrt(d > 0 ? d : 0);
		if (tk <= y[k - 1])
			tau = tk;
	}
	double sum = 0;
	for (int i = 0; i < n; i++) {
		double d = fmax((s[i] - m) / 2 - tau, 0);
		p[i] = d * d;
		sum += p[i];
	}
	for (int i = 0; i < n; i++)
		p[i] /= sum; /* 1 up to rounding; keeps sum p = 1 exactly as the others do */
	free(y);
}

/* alpha-entmax by bisection on tau for y = (alpha-1)(s - max s):
 * sum [y - tau]_+^(1/(alpha-1)) = 1 with tau in [-1, -(1/n)^(alpha-1)]. */
void sb_norm_entmax_row_f64(double *p, const double *s, int n, double alpha)
{
	double am1 = alpha - 1, e = 1 / am1, m = maxv(s, n);
	double lo = -1, hi = -pow(1.0 / n, am1);
	for (int it = 0; it < 300; it++) {
		double mid = 0.5 * (lo + hi), sum = 0;
		if (!(mid > lo && mid < hi))
			break;
		for (int i = 0; i < n; i++) {
			double d = am1 * (s[i] - m) - mid;
			sum += d > 0 ? pow(d, e) : 0;
		}
		if (sum >= 1)
			lo = mid;
		else
			hi = mid;
	}
	double tau = 0.5 * (lo + hi), sum = 0;
	for (int i = 0; i < n; i++) {
		double d = am1 * (s[i] - m) - tau;
		p[i] = d > 0 ? pow(d, e) : 0;
		sum += p[i];
	}
	for (int i = 0; i < n; i++)
		p[i] /= sum;
}

/* The study's 18-iteration bisection (PROTOCOL A3 steps 1-4), in double. */
struct unr {
	double hi, c, Z, e;
	int amin, amax;
	unsigned bits;
};

static void unrolled_ref(double *p, struct unr *st, const double *s, int n, int dfull, double am1)
{
	double e = 1 / am1, *y = malloc((size_t)n * sizeof *y);
	int amax = 0, amin = 0;
	for (int i = 0; i < n; i++)
		y[i] = s[i] * am1;
	for (int i = 1; i < n; i++)
		if (y[i] > y[amax])
			amax = i;
	double ym = y[amax];
	for (int i = 0; i < n; i++)
		y[i] -= ym;
	for (int i = 1; i < n; i++)
		if (y[i] < y[amin])
			amin = i;
	double c = pow(1.0 / dfull, am1);
	double lo = y[amin] - 1, hi = y[amax] - c;
	st->bits = 0;
	for (int t = 0; t < 18; t++) {
		double tau = (lo + hi) / 2, sum = 0;
		for (int i = 0; i < n; i++)
			sum += pow(fmax(y[i] - tau, 0), e);
		if (sum - 1 >= 0) {
			lo = tau;
			st->bits |= 1u << t;
		} else {
			hi = tau;
		}
	}
	double Z = 0;
	for (int i = 0; i < n; i++) {
		p[i] = pow(fmax(y[i] - hi, 0), e);
		Z += p[i];
	}
	for (int i = 0; i < n; i++)
		p[i] /= Z + 1e-12;
	st->hi = hi;
	st->c = c;
	st->Z = Z;
	st->e = e;
	st->amin = amin;
	st->amax = amax;
	free(y);
}

/* The clamp bounds are the float32 values of 1.05 and 2, as in the study's float32
 * torch.clamp (and in the float API), so that alpha = 1.05f is inside the range. */
#define A_MIN ((double)(float)SB_ALPHA_MIN)
#define A_MAX ((double)(float)SB_ALPHA_MAX)

static int alpha_kind(enum sb_norm_kind k)
{
	return k == SB_NORM_ENTMAX_BISECT || k == SB_NORM_ADAPTIVE;
}

static double ref_am1(const struct sb_norm *nm, double alpha)
{
	if (nm->kind == SB_NORM_ENTMAX15)
		return 0.5;
	double a = alpha < A_MIN ? A_MIN : alpha > A_MAX ? A_MAX : alpha;
	return a - 1;
}

/* forward on the effective row z[0..n) */
static void ref_row_forward(const struct sb_norm *nm, double *p, const double *z, int n, int T,
			    int n_valid, double alpha, int *keep)
{
	switch (nm->kind) {
	case SB_NORM_SOFTMAX:
		softmax_ref(p, z, NULL, n);
		break;
	case SB_NORM_TOPK:
	case SB_NORM_BOTTOMK:
		topk_keep(keep, z, n, sb_norm_topk_k(nm->ratio, n_valid), nm->kind == SB_NORM_TOPK);
		softmax_ref(p, z, keep, n);
		break;
	case SB_NORM_SPARSEMAX:
		sparsemax_ref(p, z, n);
		break;
	case SB_NORM_ENTMAX15:
	case SB_NORM_ENTMAX_BISECT:
	case SB_NORM_ADAPTIVE: {
		double am1 = ref_am1(nm, alpha);
		if (nm->unrolled) {
			struct unr st;
			unrolled_ref(p, &st, z, n, T, am1);
		} else if (nm->kind == SB_NORM_ENTMAX15) {
			entmax15_ref(p, z, n);
		} else {
			sb_norm_entmax_row_f64(p, z, n, am1 + 1);
		}
		break;
	}
	}
}

static int ref_check(const struct sb_norm *nm, int rows, int T, int n_valid, struct sb_err *err)
{
	if (!nm || rows < 0 || T < 1)
		return SB_ERR(err, SB_EDATA, "attn_norm ref: bad arguments");
	if (n_valid < 1 || n_valid > T)
		return SB_ERR(err, SB_EDATA, "attn_norm ref: n_valid = %d outside [1, T = %d]", n_valid, T);
	return 0;
}

int sb_norm_forward_ref_f64(const struct sb_norm *nm, double *p, const double *s, int rows, int T,
			    int n_valid, double alpha, struct sb_err *err)
{
	SB_TRY(ref_check(nm, rows, T, n_valid, err));
	struct refrow r;
	r.idx = malloc((size_t)T * sizeof *r.idx);
	r.z = malloc((size_t)T * sizeof *r.z);
	double *pe = malloc((size_t)T * sizeof *pe);
	int *keep = malloc((size_t)T * sizeof *keep);
	int rc = 0;
	for (int row = 0; row < rows && !rc; row++) {
		const double *sr = s + (size_t)row * T;
		double *pr = p + (size_t)row * T;
		ref_build(&r, sr, T, n_valid, nm->mask);
		if (r.bad == 2) {
			rc = SB_ERR(err, SB_EDATA, "attn_norm ref: row %d: no finite score", row);
			break;
		}
		if (r.bad || (alpha_kind(nm->kind) && isnan(alpha))) {
			for (int i = 0; i < T; i++)
				pr[i] = NAN;
			continue;
		}
		ref_row_forward(nm, pe, r.z, r.n, T, n_valid, alpha, keep);
		for (int i = 0; i < T; i++)
			pr[i] = 0;
		for (int j = 0; j < r.n; j++)
			pr[ref_pos(&r, j, n_valid)] = pe[j];
	}
	free(r.idx);
	free(r.z);
	free(pe);
	free(keep);
	return rc;
}

/* Gradient of the unrolled graph (see kb_unrolled in attn_norm.c for the derivation). */
static double unrolled_grad_ref(double *de, const double *g, const double *z, int n, int dfull,
				double am1)
{
	double *p = malloc((size_t)n * sizeof *p), *y = malloc((size_t)n * sizeof *y);
	struct unr st;
	unrolled_ref(p, &st, z, n, dfull, am1);
	double e = st.e, Zt = st.Z + 1e-12, P = 0, dtau = 0, dlog = 0;
	for (int i = 0; i < n; i++)
		y[i] = z[i] * am1 - z[st.amax] * am1;
	for (int i = 0; i < n; i++)
		P += g[i] * p[i];
	for (int i = 0; i < n; i++) {
		double d = y[i] - st.hi, du = (g[i] - P) / Zt;
		de[i] = 0;
		if (d > 0) {
			double u = pow(d, e);
			de[i] = du * e * pow(d, e - 1);
			dlog += du * u * log(d);
		}
		dtau -= de[i];
	}
	double wlo = 1, whi = 0; /* weight of the initial lower bound in lo and hi */
	for (int t = 0; t < 18; t++) {
		double a = (wlo + whi) / 2;
		if (st.bits >> t & 1u)
			wlo = a;
		else
			whi = a;
	}
	double dlo = whi * dtau, dhi = (1 - whi) * dtau;
	de[st.amin] += dlo;
	de[st.amax] += dhi;
	double da = 0;
	for (int i = 0; i < n; i++)
		da += de[i] * (z[i] - z[st.amax]);
	da += dhi * st.c * log((double)dfull) - e * e * dlog;
	for (int i = 0; i < n; i++)
		de[i] *= am1;
	free(p);
	free(y);
	return da;
}

int sb_norm_backward_ref_f64(const struct sb_norm *nm, double *ds, double *dalpha, const double *dp,
			     const double *s, int rows, int T, int n_valid, double alpha,
			     struct sb_err *err)
{
	SB_TRY(ref_check(nm, rows, T, n_valid, err));
	struct refrow r;
	r.idx = malloc((size_t)T * sizeof *r.idx);
	r.z = malloc((size_t)T * sizeof *r.z);
	double *pe = malloc((size_t)T * sizeof *pe), *ge = malloc((size_t)T * sizeof *ge);
	double *de = malloc((size_t)T * sizeof *de), *q = malloc((size_t)T * sizeof *q);
	int *keep = malloc((size_t)T * sizeof *keep);
	int want_alpha = dalpha && alpha_kind(nm->kind) && !(alpha < A_MIN) && !(alpha > A_MAX);
	double am1 = ref_am1(nm, alpha), da = 0;
	int rc = 0;
	for (int row = 0; row < rows && !rc; row++) {
		const double *sr = s + (size_t)row * T, *gr = dp + (size_t)row * T;
		double *dr = ds + (size_t)row * T;
		ref_build(&r, sr, T, n_valid, nm->mask);
		if (r.bad == 2) {
			rc = SB_ERR(err, SB_EDATA, "attn_norm ref: row %d: no finite score", row);
			break;
		}
		if (r.bad || (alpha_kind(nm->kind) && isnan(alpha))) {
			for (int i = 0; i < T; i++)
				dr[i] = NAN;
			da = NAN;
			continue;
		}
		int n = r.n;
		for (int j = 0; j < n; j++)
			ge[j] = gr[ref_pos(&r, j, n_valid)];
		ref_row_forward(nm, pe, r.z, n, T, n_valid, alpha, keep);
		if (nm->kind == SB_NORM_SOFTMAX || nm->kind == SB_NORM_TOPK ||
		    nm->kind == SB_NORM_BOTTOMK) {
			/* p = softmax over the kept keys: ds = p (dp - <p, dp>) */
			double dot = 0;
			for (int j = 0; j < n; j++)
				dot += pe[j] * ge[j];
			for (int j = 0; j < n; j++)
				de[j] = pe[j] * (ge[j] - dot);
		} else if (nm->unrolled) {
			da += unrolled_grad_ref(de, ge, r.z, n, T, am1);
		} else {
			/* entmax (sparsemax is alpha = 2): q = p^(2 - alpha) on the support,
			 * ds = q dp - q (sum q dp)/(sum q) */
			double a = nm->kind == SB_NORM_SPARSEMAX ? 2.0 : am1 + 1;
			double Q = 0, QD = 0, ent = 0;
			for (int j = 0; j < n; j++) {
				q[j] = pe[j] > 0 ? pow(pe[j], 2 - a) : 0;
				Q += q[j];
				QD += q[j] * ge[j];
				ent += pe[j] > 0 ? pe[j] * log(pe[j]) : 0;
			}
			for (int j = 0; j < n; j++)
				de[j] = q[j] * ge[j] - q[j] * QD / Q;
			if (want_alpha) {
				/* dp_i/dalpha = e^2 (p_i - Yq_i) - e (p_i log p_i - Yq_i ent), Yq = q/Q */
				double e = 1 / (a - 1);
				for (int j = 0; j < n; j++) {
					double yq = q[j] / Q;
					double plp = pe[j] > 0 ? pe[j] * log(pe[j]) : 0;
					da += ge[j] * (e * e * (pe[j] - yq) - e * (plp - yq * ent));
				}
			}
		}
		for (int i = 0; i < T; i++)
			dr[i] = 0;
		for (int j = 0; j < r.nv; j++)
			dr[r.idx[j]] = de[j];
		for (int t = 0; t < r.npads; t++)
			dr[r.argmin] += de[r.nv + t];
	}
	if (dalpha && alpha_kind(nm->kind) && (want_alpha || isnan(da)))
		*dalpha += da;
	free(r.idx);
	free(r.z);
	free(pe);
	free(ge);
	free(de);
	free(q);
	free(keep);
	return rc;
}
