/* n3a_ops.c — N3-A's float64 routing operators, their backward passes, the invariant
 * checks and the permutation null (see n3a.h; docs/n3a-spec.md §2.6-2.7). Rows are
 * short (32), so every routine is the plainest loop in a fixed index order. */
#include "n3a.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "rng.h"

static const char *const ARM_NAMES[SB_N3A_NARMS] = {"D", "S", "L", "P", "G", "N"};

const char *sb_n3a_arm_name(int arm)
{
	return arm >= 0 && arm < SB_N3A_NARMS ? ARM_NAMES[arm] : "?";
}

int sb_n3a_arm_parse(const char *s)
{
	for (int i = 0; i < SB_N3A_NARMS; i++)
		if (s && !strcmp(s, ARM_NAMES[i]))
			return i;
	return -1;
}

const char *sb_n3a_guard_name(const char *msg)
{
	static const char *const names[] = {"NUMERICAL_ENVELOPE", "INVALID_CONTROL", "NON_FINITE_LOSS",
					    "NON_FINITE_GRADIENT", "WORKFLOW_NONDETERMINISTIC"};
	const char *best = NULL, *at = NULL;
	for (size_t i = 0; msg && i < sizeof names / sizeof names[0]; i++) {
		const char *p = strstr(msg, names[i]);
		if (p && (!at || p < at)) {
			at = p;
			best = names[i];
		}
	}
	return best;
}

/* ------------------------------------------------------------------ forward */

/* softmax of c over the positions idx[0..m) into p (other entries untouched) */
static void softmax_subset(double *p, const double *c, const int *idx, int m)
{
	double mx = -INFINITY, sum = 0;
	for (int j = 0; j < m; j++)
		if (c[idx[j]] > mx)
			mx = c[idx[j]];
	for (int j = 0; j < m; j++) {
		double e = exp(c[idx[j]] - mx);
		p[idx[j]] = e;
		sum += e;
	}
	for (int j = 0; j < m; j++)
		p[idx[j]] /= sum;
}

/* stable descending order of c: insertion sort, ties keep the lower index first */
static void order_desc(int *order, const double *c, int n)
{
	for (int i = 0; i < n; i++) {
		int j = i;
		while (j > 0 && c[order[j - 1]] < c[i]) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
}

int sb_n3a_row_forward(int arm, const struct sb_n3a_op *op, const double *s, double *w, struct sb_n3a_row *st,
		       struct sb_err *err)
{
	int n = op->n, k = op->k;
	double eps = op->eps, mean = 0;
	for (int i = 0; i < n; i++) {
		if (!isfinite(s[i]))
			return SB_ERR(err, SB_EVERDICT, "NON_FINITE_LOSS: score %d is %g", i, s[i]);
		mean += s[i];
	}
	mean /= n;
	for (int i = 0; i < n; i++)
		st->c[i] = s[i] - mean;
	order_desc(st->order, st->c, n);
	double range = st->c[st->order[0]] - st->c[st->order[k - 1]];
	if (range > SB_N3A_ENVELOPE)
		return SB_ERR(err, SB_EVERDICT, "NUMERICAL_ENVELOPE: top-%d score range %.17g exceeds %g", k, range,
			      SB_N3A_ENVELOPE);
	memset(st->q, 0, (size_t)n * sizeof *st->q);
	memset(st->t, 0, (size_t)n * sizeof *st->t);
	softmax_subset(st->q, st->c, st->order, k);
	softmax_subset(st->t, st->c, st->order + k, n - k);
	switch (arm) {
	case SB_N3A_D:
		softmax_subset(w, st->c, st->order, n);
		break;
	case SB_N3A_S:
	case SB_N3A_G:
	case SB_N3A_N:
		memcpy(w, st->q, (size_t)n * sizeof *w);
		break;
	case SB_N3A_L: {
		double te = op->fault == SB_N3A_FAULT_L_TAIL ? 2 * eps : eps;
		for (int i = 0; i < n; i++)
			w[i] = (1 - eps) * st->q[i] + te * st->t[i];
		break;
	}
	case SB_N3A_P:
		for (int i = 0; i < n; i++)
			w[i] = 0;
		for (int j = 0; j < k; j++) {
			int i = st->order[j];
			w[i] = (1 - eps) * st->q[i] + eps / k;
		}
		break;
	default:
		return SB_ERR(err, SB_EINTERNAL, "n3a: unknown arm %d", arm);
	}
	return sb_n3a_row_check(arm, op, w, st, err);
}

/* sum of p over all, over K and over T */
static void masses(const double *p, const int *order, int n, int k, double *all, double *onk, double *ont)
{
	double a = 0, b = 0;
	for (int j = 0; j < k; j++)
		a += p[order[j]];
	for (int j = k; j < n; j++)
		b += p[order[j]];
	*onk = a;
	*ont = b;
	*all = a + b;
}

static int check_mass(const char *what, double got, double want, struct sb_err *err)
{
	if (!(fabs(got - want) <= SB_N3A_TOL))
		return SB_ERR(err, SB_EVERDICT, "INVALID_CONTROL: %s is %.17g, expected %.17g (tolerance %g)", what, got,
			      want, SB_N3A_TOL);
	return 0;
}

static int check_q(const struct sb_n3a_op *op, const struct sb_n3a_row *st, struct sb_err *err)
{
	double all, onk, ont;
	masses(st->q, st->order, op->n, op->k, &all, &onk, &ont);
	SB_TRY(check_mass("top-k softmax sum", all, 1.0, err));
	for (int j = 0; j < op->n; j++) {
		int i = st->order[j];
		if (j < op->k ? !(st->q[i] > 0) : st->q[i] != 0)
			return SB_ERR(err, SB_EVERDICT,
				      "INVALID_CONTROL: top-k softmax support is not exactly K (position %d, %s, weight %.17g)",
				      i, j < op->k ? "kept" : "tail", st->q[i]);
	}
	return 0;
}

static int check_mixture(const char *name, const double *p, const struct sb_n3a_op *op, const struct sb_n3a_row *st,
			 double want_k, double want_t, struct sb_err *err)
{
	double all, onk, ont;
	char what[64];
	masses(p, st->order, op->n, op->k, &all, &onk, &ont);
	snprintf(what, sizeof what, "%s sum", name);
	SB_TRY(check_mass(what, all, 1.0, err));
	snprintf(what, sizeof what, "%s mass on K", name);
	SB_TRY(check_mass(what, onk, want_k, err));
	snprintf(what, sizeof what, "%s mass on T", name);
	return check_mass(what, ont, want_t, err);
}

int sb_n3a_row_check(int arm, const struct sb_n3a_op *op, const double *w, const struct sb_n3a_row *st,
		     struct sb_err *err)
{
	double eps = op->eps;
	switch (arm) {
	case SB_N3A_D: {
		double all, onk, ont;
		masses(w, st->order, op->n, op->k, &all, &onk, &ont);
		return check_mass("dense softmax sum", all, 1.0, err);
	}
	case SB_N3A_S:
		return check_q(op, st, err);
	case SB_N3A_L:
		SB_TRY(check_q(op, st, err));
		return check_mixture("L", w, op, st, 1 - eps, eps, err);
	case SB_N3A_P:
		SB_TRY(check_q(op, st, err));
		SB_TRY(check_mixture("P", w, op, st, 1.0, 0.0, err));
		for (int j = op->k; j < op->n; j++)
			if (w[st->order[j]] != 0)
				return SB_ERR(err, SB_EVERDICT, "INVALID_CONTROL: P has weight on tail position %d",
					      st->order[j]);
		return 0;
	case SB_N3A_G:
	case SB_N3A_N: {
		SB_TRY(check_q(op, st, err));
		double mix[SB_N3A_MAXN];
		for (int i = 0; i < op->n; i++)
			mix[i] = (1 - eps) * st->q[i] + eps * st->t[i];
		return check_mixture(arm == SB_N3A_G ? "G's L mixture" : "N's L mixture", mix, op, st, 1 - eps, eps,
				     err);
	}
	default:
		return SB_ERR(err, SB_EINTERNAL, "n3a: unknown arm %d", arm);
	}
}

/* ------------------------------------------------------------------ backward */

/* out = p * (g - <p, g>) (the softmax VJP), out = 0 where p = 0 */
static void cov(double *out, const double *p, const double *g, int n)
{
	double pg = 0;
	for (int i = 0; i < n; i++)
		pg += p[i] * g[i];
	for (int i = 0; i < n; i++)
		out[i] = p[i] * (g[i] - pg);
}

int sb_n3a_row_backward(int arm, const struct sb_n3a_op *op, const double *g, const double *w,
			const struct sb_n3a_row *st, const uint32_t *perm, double *ds, struct sb_err *err)
{
	int n = op->n, k = op->k;
	double eps = op->eps;
	double a[SB_N3A_MAXN], b[SB_N3A_MAXN];
	switch (arm) {
	case SB_N3A_D:
		cov(ds, w, g, n);
		return 0;
	case SB_N3A_S:
		cov(ds, st->q, g, n);
		return 0;
	case SB_N3A_L:
		cov(a, st->q, g, n);
		cov(b, st->t, g, n);
		for (int i = 0; i < n; i++)
			ds[i] = (1 - eps) * a[i] + eps * b[i];
		return 0;
	case SB_N3A_P:
		cov(a, st->q, g, n);
		for (int i = 0; i < n; i++)
			ds[i] = (1 - eps) * a[i];
		return 0;
	case SB_N3A_G:
	case SB_N3A_N:
		break;
	default:
		return SB_ERR(err, SB_EINTERNAL, "n3a: unknown arm %d", arm);
	}
	cov(a, st->q, g, n); /* zero on T (q is) */
	cov(b, st->t, g, n); /* zero on K */
	/* norms in the order K then T (descending score), before any permutation */
	double na2 = 0, nc2 = 0;
	for (int j = 0; j < n; j++) {
		int i = st->order[j];
		double ci = j < k ? (1 - eps) * a[i] : eps * b[i];
		if (j < k)
			na2 += a[i] * a[i];
		nc2 += ci * ci;
	}
	double na = sqrt(na2), nc = sqrt(nc2);
	if (!(na > SB_N3A_VJP_ZERO)) {
		if (!isfinite(na))
			return SB_ERR(err, SB_EVERDICT, "INVALID_CONTROL: sparse score gradient norm is %g", na);
		for (int i = 0; i < n; i++)
			ds[i] = 0;
		return 0;
	}
	if (!isfinite(nc) || nc <= DBL_MIN)
		return SB_ERR(err, SB_EVERDICT, "INVALID_CONTROL: candidate norm %g with sparse norm %g", nc, na);
	if (arm == SB_N3A_N) {
		double bt[SB_N3A_MAXN];
		for (int j = k; j < n; j++)
			bt[j - k] = b[st->order[j]];
		for (int j = k; j < n; j++)
			b[st->order[j]] = bt[perm[j - k]];
	}
	double scale = op->fault == SB_N3A_FAULT_G_NO_RENORM ? 1.0 : na / nc;
	double no2 = 0;
	for (int i = 0; i < n; i++) {
		ds[i] = ((1 - eps) * a[i] + eps * b[i]) * scale;
		no2 += ds[i] * ds[i];
	}
	double no = sqrt(no2);
	if (!(fabs(no - na) <= SB_N3A_TOL * na))
		return SB_ERR(err, SB_EVERDICT,
			      "INVALID_CONTROL: %s score gradient norm %.17g differs from the sparse norm %.17g "
			      "(relative tolerance %g)",
			      sb_n3a_arm_name(arm), no, na, SB_N3A_TOL);
	return 0;
}

/* ------------------------------------------------------------------ seeds and the null */

uint64_t sb_n3a_stable_seed(const char *const *parts, int nparts)
{
	char buf[1024], hex[SB_SHA256_HEX];
	size_t len = 0;
	for (int i = 0; i < nparts; i++) { /* the callers' parts are numbers and short names */
		size_t m = strlen(parts[i]);
		if (i && len < sizeof buf)
			buf[len++] = 0x1f;
		if (m > sizeof buf - len)
			m = sizeof buf - len;
		memcpy(buf + len, parts[i], m);
		len += m;
	}
	sb_sha256_buf(buf, len, hex);
	uint64_t v = 0;
	for (int i = 0; i < 16; i++) {
		int c = hex[i];
		v = (v << 4) | (uint64_t)(c <= '9' ? c - '0' : c - 'a' + 10);
	}
	return v & 0x7fffffffffffffffULL;
}

uint64_t sb_n3a_null_key(uint64_t seed, const char *arch, int r, int parent, int rel_step)
{
	char s[32], rs[16], ps[16], js[16];
	snprintf(s, sizeof s, "%llu", (unsigned long long)seed);
	snprintf(rs, sizeof rs, "%d", r);
	snprintf(ps, sizeof ps, "%d", parent);
	snprintf(js, sizeof js, "%d", rel_step);
	const char *parts[] = {s, arch, rs, ps, js, "null_permutation"};
	return sb_n3a_stable_seed(parts, 6);
}

void sb_n3a_null_perms(uint64_t key, int rows, int m, uint32_t *perm)
{
	struct sb_rng rng;
	sb_rng_init(&rng, key, SB_N3A_RNG_NULL, 0);
	double u[SB_N3A_MAXN];
	for (int r = 0; r < rows; r++) {
		uint32_t *pr = perm + (size_t)r * m;
		for (int j = 0; j < m; j++)
			u[j] = sb_rng_uniform(&rng);
		/* stable ascending argsort (insertion; ties keep the lower index first) */
		for (int i = 0; i < m; i++) {
			int j = i;
			while (j > 0 && u[pr[j - 1]] > u[i]) {
				pr[j] = pr[j - 1];
				j--;
			}
			pr[j] = (uint32_t)i;
		}
	}
}
