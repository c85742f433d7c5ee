/* a8.c — PROTOCOL A8's extension arithmetic (see a8.h and docs/sb-a8.md). */
#include "a8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

int sb_a8_switch_target(const double *delta, int K)
{
	if (K < 3)
		return K + 1;
	if ((delta[0] + delta[1] + delta[2]) / 3.0 <= 0)
		return 3;
	for (int e = 4; e <= K - 2; e++)
		if (delta[e - 1] <= 0 && delta[e] <= 0 && delta[e + 1] <= 0)
			return e;
	return K + 1;
}

void sb_ridge_free(struct sb_ridge *r)
{
	if (!r)
		return;
	free(r->mu);
	free(r->sd);
	free(r->beta);
	memset(r, 0, sizeof *r);
}

int sb_ridge_fit(struct sb_ridge *r, const double *X, const double *y, const int *use, int n, int p, double lambda,
                 struct sb_err *err)
{
	memset(r, 0, sizeof *r);
	r->p = p;
	r->lambda = lambda;
	if (p > 64)
		return SB_ERR(err, SB_EUSAGE, "ridge: at most 64 features (%d)", p);
	r->mu = calloc((size_t)p + 1, sizeof(double));
	r->sd = calloc((size_t)p + 1, sizeof(double));
	r->beta = calloc((size_t)p + 1, sizeof(double));
	double *A = calloc((size_t)p * p + 1, sizeof(double)), *b = calloc((size_t)p + 1, sizeof(double));
	if (!r->mu || !r->sd || !r->beta || !A || !b) {
		free(A);
		free(b);
		sb_ridge_free(r);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	int m = 0;
	for (int i = 0; i < n; i++)
		if (!use || use[i]) {
			m++;
			r->ybar += y[i];
			for (int j = 0; j < p; j++)
				r->mu[j] += X[(size_t)i * p + j];
		}
	if (m < 1) {
		free(A);
		free(b);
		sb_ridge_free(r);
		return SB_ERR(err, SB_EDATA, "ridge: no training rows");
	}
	r->ybar /= m;
	for (int j = 0; j < p; j++)
		r->mu[j] /= m;
	for (int i = 0; i < n; i++)
		if (!use || use[i])
			for (int j = 0; j < p; j++) {
				double c = X[(size_t)i * p + j] - r->mu[j];
				r->sd[j] += c * c;
			}
	for (int j = 0; j < p; j++) {
		r->sd[j] = sqrt(r->sd[j] / m);
		if (!(r->sd[j] > 0))
			r->sd[j] = 1;
	}
	/* A = Z'Z + lambda I, b = Z'(y - ybar) */
	for (int i = 0; i < n; i++) {
		if (use && !use[i])
			continue;
		double z[64];
		for (int j = 0; j < p && j < 64; j++)
			z[j] = (X[(size_t)i * p + j] - r->mu[j]) / r->sd[j];
		for (int j = 0; j < p; j++) {
			b[j] += z[j] * (y[i] - r->ybar);
			for (int k = 0; k < p; k++)
				A[(size_t)j * p + k] += z[j] * z[k];
		}
	}
	for (int j = 0; j < p; j++)
		A[(size_t)j * p + j] += lambda;
	/* Cholesky A = L L' in place (lower), then two triangular solves */
	for (int j = 0; j < p; j++) {
		double s = A[(size_t)j * p + j];
		for (int k = 0; k < j; k++)
			s -= A[(size_t)j * p + k] * A[(size_t)j * p + k];
		if (!(s > 0)) {
			free(A);
			free(b);
			sb_ridge_free(r);
			return SB_ERR(err, SB_EDATA, "ridge: the system is not positive definite (lambda %g)", lambda);
		}
		double d = sqrt(s);
		A[(size_t)j * p + j] = d;
		for (int i = j + 1; i < p; i++) {
			double t = A[(size_t)i * p + j];
			for (int k = 0; k < j; k++)
				t -= A[(size_t)i * p + k] * A[(size_t)j * p + k];
			A[(size_t)i * p + j] = t / d;
		}
	}
	for (int i = 0; i < p; i++) {
		double t = b[i];
		for (int k = 0; k < i; k++)
			t -= A[(size_t)i * p + k] * b[k];
		b[i] = t / A[(size_t)i * p + i];
	}
	for (int i = p - 1; i >= 0; i--) {
		double t = b[i];
		for (int k = i + 1; k < p; k++)
			t -= A[(size_t)k * p + i] * r->beta[k];
		r->beta[i] = t / A[(size_t)i * p + i];
	}
	free(A);
	free(b);
	return 0;
}

double sb_ridge_predict(const struct sb_ridge *r, const double *x)
{
	double v = r->ybar;
	for (int j = 0; j < r->p; j++)
		v += r->beta[j] * (x[j] - r->mu[j]) / r->sd[j];
	return v;
}

int sb_a8_round_clip(double v, int lo, int hi)
{
	if (isnan(v))
		return lo;
	double r = nearbyint(v);
	return r < lo ? lo : r > hi ? hi : (int)r;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_dbl);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

int sb_a8_loo(const double *X, const double *y, const int *fold, int n, int p, double lambda, int *pred, double *raw,
              struct sb_err *err)
{
	if (p > 64)
		return SB_ERR(err, SB_EUSAGE, "ridge: at most 64 features (%d)", p);
	int *use = malloc((size_t)n * sizeof *use + 1);
	double *tmp = malloc((size_t)n * sizeof *tmp + 1);
	char *done = calloc((size_t)n + 1, 1);
	if (!use || !tmp || !done) {
		free(use);
		free(tmp);
		free(done);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	int rc = 0;
	for (int i0 = 0; i0 < n && !rc; i0++) {
		if (done[i0])
			continue;
		int f = fold[i0], m = 0;
		for (int i = 0; i < n; i++) {
			use[i] = fold[i] != f;
			if (use[i])
				tmp[m++] = y[i];
		}
		if (m < 1) {
			rc = SB_ERR(err, SB_EDATA, "leave-one-out: fold %d holds every row", f);
			break;
		}
		struct sb_ridge r = {0};
		double med = 0;
		if (p == 0)
			med = median_of(tmp, m);
		else if ((rc = sb_ridge_fit(&r, X, y, use, n, p, lambda, err)))
			break;
		for (int i = 0; i < n; i++)
			if (fold[i] == f) {
				double v = p == 0 ? med : sb_ridge_predict(&r, X + (size_t)i * p);
				if (raw)
					raw[i] = v;
				pred[i] = sb_a8_round_clip(v, 3, 30);
				done[i] = 1;
			}
		sb_ridge_free(&r);
	}
	free(use);
	free(tmp);
	free(done);
	return rc;
}

int sb_a8_fit_predict(const double *X, const double *y, int n, int p, double lambda, const double *Xnew, int m,
                      int *pred, double *raw, struct sb_err *err)
{
	if (n < 1)
		return SB_ERR(err, SB_EDATA, "fit: no training rows");
	double med = 0;
	struct sb_ridge r = {0};
	if (p == 0) {
		double *tmp = malloc((size_t)n * sizeof *tmp);
		if (!tmp)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		memcpy(tmp, y, (size_t)n * sizeof *tmp);
		med = median_of(tmp, n);
		free(tmp);
	} else {
		SB_TRY(sb_ridge_fit(&r, X, y, NULL, n, p, lambda, err));
	}
	for (int i = 0; i < m; i++) {
		double v = p == 0 ? med : sb_ridge_predict(&r, Xnew + (size_t)i * p);
		if (raw)
			raw[i] = v;
		pred[i] = sb_a8_round_clip(v, 3, 30);
	}
	sb_ridge_free(&r);
	return 0;
}

int sb_a8_m1_verdict(int n, int nd, int npred, const int *K, const int *ds, const int *cifar, const int *arch, const int *tier,
                     const double *target, const int *pred, uint64_t seed, int resamples,
                     struct sb_a8_m1_verdict *v, struct sb_err *err)
{
	memset(v, 0, sizeof *v);
	if (npred < 2 || npred > 8 || nd < 1)
		return SB_ERR(err, SB_EUSAGE, "M1 verdict: %d predictors, %d datasets", npred, nd);
	/* clause 1 */
	int *rd = calloc((size_t)nd, sizeof *rd), ra[2] = {0}, rt[3] = {0};
	double *mae = calloc((size_t)npred * nd, sizeof *mae), *cnt = calloc((size_t)nd, sizeof *cnt);
	double *diff = calloc((size_t)nd, sizeof *diff);
	if (!rd || !mae || !cnt || !diff) {
		free(rd);
		free(mae);
		free(cnt);
		free(diff);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	for (int i = 0; i < n; i++) {
		cnt[ds[i]]++;
		for (int m = 0; m < npred; m++)
			mae[(size_t)m * nd + ds[i]] += fabs(pred[(size_t)m * n + i] - target[i]);
		if (target[i] >= 4 && target[i] <= K[i] && !cifar[ds[i]]) {
			rd[ds[i]] = 1;
			ra[arch[i] ? 1 : 0] = 1;
			if (tier[i] >= 0 && tier[i] < 3)
				rt[tier[i]] = 1;
		}
	}
	for (int d = 0; d < nd; d++)
		v->rev_datasets_noncifar += rd[d];
	v->rev_archs = ra[0] + ra[1];
	v->rev_tiers = rt[0] + rt[1] + rt[2];
	v->clause_reversals = v->rev_datasets_noncifar >= 3 && v->rev_archs == 2 && v->rev_tiers >= 2;
	/* clause 2 */
	int np = 0;
	for (int d = 0; d < nd; d++)
		if (cnt[d] > 0)
			np++;
	for (int m = 0; m < npred; m++) {
		double s = 0;
		for (int d = 0; d < nd; d++)
			if (cnt[d] > 0) {
				mae[(size_t)m * nd + d] /= cnt[d];
				s += mae[(size_t)m * nd + d];
			}
		v->macro_mae[m] = np ? s / np : NAN;
	}
	v->best_baseline = 1;
	for (int m = 2; m < npred; m++)
		if (v->macro_mae[m] < v->macro_mae[v->best_baseline])
			v->best_baseline = m;
	double mb = v->macro_mae[v->best_baseline], mm = v->macro_mae[0];
	v->improvement = mb > 0 ? (mb - mm) / mb : NAN;
	v->clause_improvement = v->improvement >= 0.10;
	/* clause 3 */
	int k = 0;
	for (int d = 0; d < nd; d++)
		if (cnt[d] > 0)
			diff[k++] = mae[d] - mae[(size_t)v->best_baseline * nd + d];
	double s = 0;
	for (int d = 0; d < k; d++)
		s += diff[d];
	v->diff = k ? s / k : NAN;
	struct sb_boot bc = {seed, 0, resamples, 0.95};
	int rc = k ? sb_stats_bootstrap_ci(diff, k, &bc, &v->ci_lo, &v->ci_hi, err) : 0;
	v->clause_ci = !rc && k && v->ci_hi < 0;
	/* clause 4 */
	double tot = 0, mx = -INFINITY;
	v->max_share_dataset = -1;
	for (int d = 0, j = 0; d < nd; d++)
		if (cnt[d] > 0) {
			double imp = -diff[j++];
			tot += imp;
			if (imp > mx) {
				mx = imp;
				v->max_share_dataset = d;
			}
		}
	v->max_share = tot > 0 ? mx / tot : NAN;
	v->clause_share = tot > 0 && v->max_share <= 0.5;
	v->pass = v->clause_reversals && v->clause_improvement && v->clause_ci && v->clause_share;
	free(rd);
	free(mae);
	free(cnt);
	free(diff);
	return rc;
}

int sb_a8_time_to_target(const double *acc, int K, double dense_final)
{
	for (int e = 1; e <= K; e++)
		if (acc[e - 1] >= 0.95 * dense_final)
			return e;
	return K + 1;
}

static double mean_of(const double *v, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += v[i];
	return n ? s / n : NAN;
}

int sb_a8_m2_verdict(int n, int nsimple, const double *ttt_dense, const double *ttt_mech, const double *ttt_simple,
                     const double *final_dense, const double *final_mech, const int *arch, const int *tier,
                     uint64_t seed, int resamples, struct sb_a8_m2_verdict *v, struct sb_err *err)
{
	memset(v, 0, sizeof *v);
	if (n < 1)
		return SB_ERR(err, SB_EDATA, "M2 verdict: no paired units");
	double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
	if (!a || !b) {
		free(a);
		free(b);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	struct sb_boot bc = {seed, 0, resamples, 0.95};
	int rc = 0;
	for (int i = 0; i < n; i++)
		a[i] = (ttt_dense[i] - ttt_mech[i]) / ttt_dense[i];
	v->median_reduction = median_of(a, n);
	v->clause_median = v->median_reduction >= 0.10;
	for (int i = 0; i < n; i++)
		a[i] = ttt_dense[i] - ttt_mech[i];
	rc = sb_stats_bootstrap_ci(a, n, &bc, &v->lo_vs_dense, &v->hi_vs_dense, err);
	v->best_simple = -1;
	double best = -INFINITY;
	for (int s = 0; s < nsimple; s++) {
		double m = 0;
		for (int i = 0; i < n; i++)
			m += ttt_dense[i] - ttt_simple[(size_t)s * n + i];
		if (m / n > best) {
			best = m / n;
			v->best_simple = s;
		}
	}
	v->lo_vs_simple = v->hi_vs_simple = NAN;
	if (!rc && v->best_simple >= 0) {
		for (int i = 0; i < n; i++)
			b[i] = ttt_simple[(size_t)v->best_simple * n + i] - ttt_mech[i];
		rc = sb_stats_bootstrap_ci(b, n, &bc, &v->lo_vs_simple, &v->hi_vs_simple, err);
	}
	v->clause_bounds = !rc && v->lo_vs_dense > 0 && (v->best_simple < 0 || v->lo_vs_simple > 0);
	for (int i = 0; i < n; i++)
		b[i] = final_mech[i] - final_dense[i];
	v->final_diff = mean_of(b, n);
	if (!rc)
		rc = sb_stats_bootstrap_ci(b, n, &bc, &v->final_lo, &v->final_hi, err);
	v->clause_final = !rc && v->final_lo > -0.005;
	double sa[2] = {0}, st[3] = {0};
	int na[2] = {0}, nt[3] = {0};
	for (int i = 0; i < n; i++) {
		int ai = arch[i] ? 1 : 0;
		sa[ai] += a[i];
		na[ai]++;
		if (tier[i] >= 0 && tier[i] < 3) {
			st[tier[i]] += a[i];
			nt[tier[i]]++;
		}
	}
	int tiers_pos = 0;
	for (int t = 0; t < 3; t++) {
		v->benefit_tier[t] = nt[t] ? st[t] / nt[t] : NAN;
		tiers_pos += nt[t] && v->benefit_tier[t] > 0;
	}
	for (int q = 0; q < 2; q++)
		v->benefit_arch[q] = na[q] ? sa[q] / na[q] : NAN;
	v->clause_benefit = na[0] && na[1] && v->benefit_arch[0] > 0 && v->benefit_arch[1] > 0 && tiers_pos >= 2;
	v->pass = v->clause_median && v->clause_bounds && v->clause_final && v->clause_benefit;
	free(a);
	free(b);
	return rc;
}

/* ---- N3-A ---- */

const char *const sb_n3a_arch_names[SB_N3A_ARCHS] = {"query", "transformer"};
const int sb_n3a_r[SB_N3A_RS] = {1, 4, 16, 24};
const int sb_n3a_steps[SB_N3A_STEPS] = {32, 64, 128, 768, 1024};
const int sb_n3a_parents[SB_N3A_PARENTS] = {128, 768};
const char sb_n3a_fork_arms[SB_N3A_FORK_ARMS + 1] = "SLPGN";
const char *const sb_a8_n3a_hyp_desc[SB_N3A_HYPS] = {"B(768) at r = 16", "B(768) at r = 24", "I_B",
                                                     "F(768) at r = 16", "F(768) at r = 24", "I_F"};

enum { K32, K64, K128, K768, K1024 }; /* sb_n3a_steps */
enum { FS, FL, FP, FG, FN };          /* sb_n3a_fork_arms */
enum { R1, R4, R16, R24 };            /* sb_n3a_r */

/* the sign test and the median interval of one component's per-seed values */
static int n3a_component(struct sb_a8_n3a_comp *c, int hyp, int arch, int r, const char *name, const double *x, int n,
                         struct sb_err *err)
{
	struct sb_sign_test t;
	struct sb_median_interval m;
	SB_TRY(sb_stats_sign_test(x, n, SB_N3A_MARGIN, &t, err));
	SB_TRY(sb_stats_median_interval(x, n, SB_N3A_ALPHA_INTERVAL, &m, err));
	*c = (struct sb_a8_n3a_comp){.hyp = hyp,
	                             .arch = arch,
	                             .r = r,
	                             .name = name,
	                             .n = n,
	                             .above = t.above,
	                             .rank = m.rank,
	                             .median = m.median,
	                             .lo = m.lo,
	                             .hi = m.hi,
	                             .p = t.p,
	                             .excluded = m.hi <= SB_N3A_MARGIN};
	return 0;
}

static void n3a_seed_name(char *b, size_t nb, const struct sb_a8_n3a_data *d, int i)
{
	if (d->seed)
		snprintf(b, nb, "seed %lld", d->seed[i]);
	else
		snprintf(b, nb, "seed #%d", i);
}

/* whether arch a is analysed (all of them, or the one of an interim look) */
static int n3a_counts(const struct sb_a8_n3a_data *d, int a)
{
	return !d->one_arch || d->one_arch == 1 + a;
}

/* every CE finite; the denominators (D at the five steps, S at the parents) > 0 */
static int n3a_check(const struct sb_a8_n3a_data *d, struct sb_err *err)
{
	int n = d->n;
	char sn[48];
	for (int a = 0; a < SB_N3A_ARCHS; a++)
		for (int r = 0; r < SB_N3A_RS && n3a_counts(d, a); r++)
			for (int i = 0; i < n; i++) {
				for (int arm = 0; arm < 2; arm++)
					for (int k = 0; k < SB_N3A_STEPS; k++) {
						double v = d->main_ce[SB_N3A_MAIN(a, r, arm, k, i, n)];
						int denom = arm == 0 || k == K128 || k == K768;
						if (!isfinite(v) || (denom && v <= 0)) {
							n3a_seed_name(sn, sizeof sn, d, i);
							return SB_ERR(
							    err, SB_EDATA,
							    "%s validation CE %g (arch %s, r %d, %s, arm %c, step "
							    "%d)%s",
							    isfinite(v) ? "non-positive" : "non-finite", v,
							    sb_n3a_arch_names[a], sb_n3a_r[r], sn, arm ? 'S' : 'D',
							    sb_n3a_steps[k],
							    arm ? ": the forks' parent denominator must be finite and "
							          "> 0"
							        : ": a Stage-1 denominator must be finite and > 0");
						}
					}
				for (int p = 0; p < SB_N3A_PARENTS; p++)
					for (int arm = 0; arm < SB_N3A_FORK_ARMS; arm++) {
						double v = d->fork_ce[SB_N3A_FORK(a, r, p, arm, i, n)];
						if (!isfinite(v)) {
							n3a_seed_name(sn, sizeof sn, d, i);
							return SB_ERR(err, SB_EDATA,
							              "non-finite validation CE (arch %s, r %d, %s, "
							              "arm %c, parent %d, "
							              "step %d)",
							              sb_n3a_arch_names[a], sb_n3a_r[r], sn,
							              sb_n3a_fork_arms[arm], sb_n3a_parents[p],
							              SB_N3A_FORK_STEP);
						}
					}
			}
	return 0;
}

int sb_a8_n3a(const struct sb_a8_n3a_data *d, struct sb_a8_n3a *res, struct sb_err *err)
{
	memset(res, 0, sizeof *res);
	int n = d->n;
	if (n < 1)
		return SB_ERR(err, SB_EDATA, "N3-A: no seeds");
	SB_TRY(n3a_check(d, err));
	/* per arch: E, C at r 16 and 24; B and F at both parents for every r */
	double *x = malloc((size_t)n * sizeof *x);
	double *bf = malloc((size_t)n * SB_N3A_RS * SB_N3A_PARENTS * 2 * sizeof *bf);
	if (!x || !bf) {
		free(x);
		free(bf);
		return SB_ERR(err, SB_EINTERNAL, "N3-A: out of memory");
	}
#define BF(r, p, which, i) bf[(((size_t)(r)*SB_N3A_PARENTS + (p)) * 2 + (which)) * (size_t)n + (i)]
	int rc = 0;
	for (int ri = R16; ri <= R24 && !rc; ri++)
		for (int a = 0; a < SB_N3A_ARCHS && !rc; a++)
			for (int which = 0; which < 2 && !rc && n3a_counts(d, a); which++) {
				for (int i = 0; i < n; i++) {
					const double *D = d->main_ce, *S = d->main_ce;
					double s = 0;
					if (which == 0) /* early sparse benefit: mean over 32, 64, 128 of (D - S) / D */
						for (int k = K32; k <= K128; k++) {
							double dd = D[SB_N3A_MAIN(a, ri, 0, k, i, n)],
							       ss = S[SB_N3A_MAIN(a, ri, 1, k, i, n)];
							s += (dd - ss) / dd;
						}
					else /* late sparse cost: mean over 768, 1024 of (S - D) / D */
						for (int k = K768; k <= K1024; k++) {
							double dd = D[SB_N3A_MAIN(a, ri, 0, k, i, n)],
							       ss = S[SB_N3A_MAIN(a, ri, 1, k, i, n)];
							s += (ss - dd) / dd;
						}
					x[i] = which == 0 ? s / 3 : s / 2;
				}
				rc = n3a_component(&res->comp[(ri - R16) * 4 + a * 2 + which], -1, a, sb_n3a_r[ri],
				                   which ? "late_cost" : "early_benefit", x, n, err);
			}
	for (int a = 0; a < SB_N3A_ARCHS && !rc; a++) {
		if (!n3a_counts(d, a))
			continue;
		/* B(p) = (N - G) / S(p), F(p) = (P - L) / S(p) for every r and parent */
		for (int ri = 0; ri < SB_N3A_RS; ri++)
			for (int p = 0; p < SB_N3A_PARENTS; p++)
				for (int i = 0; i < n; i++) {
					double den = d->main_ce[SB_N3A_MAIN(a, ri, 1, p ? K768 : K128, i, n)];
					const double *f = d->fork_ce;
					BF(ri, p, 0, i) =
					    (f[SB_N3A_FORK(a, ri, p, FN, i, n)] - f[SB_N3A_FORK(a, ri, p, FG, i, n)]) /
					    den;
					BF(ri, p, 1, i) =
					    (f[SB_N3A_FORK(a, ri, p, FP, i, n)] - f[SB_N3A_FORK(a, ri, p, FL, i, n)]) /
					    den;
				}
		for (int h = 0; h < SB_N3A_HYPS && !rc; h++) {
			int which = h >= 3, kind = h % 3; /* 0: X(768) at r 16, 1: at r 24, 2: the interaction */
			for (int i = 0; i < n; i++) {
				if (kind < 2) {
					x[i] = BF(kind ? R24 : R16, 1, which, i);
				} else { /* I_X = mean_{16,24} (X768 - X128) - mean_{1,4} (X768 - X128) */
					double hi = ((BF(R16, 1, which, i) - BF(R16, 0, which, i)) +
					             (BF(R24, 1, which, i) - BF(R24, 0, which, i))) /
					            2;
					double lo = ((BF(R1, 1, which, i) - BF(R1, 0, which, i)) +
					             (BF(R4, 1, which, i) - BF(R4, 0, which, i))) /
					            2;
					x[i] = hi - lo;
				}
			}
			static const char *names[2][3] = {{"B768", "B768", "I_B"}, {"F768", "F768", "I_F"}};
			/* H1..H6 with query at 8 + 2h, transformer at 9 + 2h */
			rc = n3a_component(&res->comp[8 + 2 * h + a], h, a,
			                   kind == 2 ? 0
			                   : kind    ? 24
			                             : 16,
			                   names[which][kind], x, n, err);
		}
	}
#undef BF
	free(x);
	free(bf);
	if (rc || d->one_arch)
		return rc;
	return sb_a8_n3a_decide(res, err);
}

int sb_a8_n3a_decide(struct sb_a8_n3a *res, struct sb_err *err)
{
	/* Stage 1: a density's p is the max of its four components' (intersection-union) */
	for (int d = 0; d < 2; d++) {
		res->density_p[d] = 0;
		res->density_excluded[d] = 0;
		for (int j = 0; j < 4; j++) {
			const struct sb_a8_n3a_comp *c = &res->comp[4 * d + j];
			if (c->p > res->density_p[d])
				res->density_p[d] = c->p;
			res->density_excluded[d] |= c->excluded;
		}
	}
	SB_TRY(sb_stats_holm(res->density_p, 2, res->density_holm, err));
	res->context_pass = res->density_holm[0] <= SB_N3A_ALPHA || res->density_holm[1] <= SB_N3A_ALPHA;
	/* Stage 2: a hypothesis' p is the max over the two architectures; Holm over the six */
	res->backward_excluded = res->forward_excluded = 0;
	for (int h = 0; h < SB_N3A_HYPS; h++) {
		const struct sb_a8_n3a_comp *q = &res->comp[8 + 2 * h], *t = q + 1;
		res->hyp_p[h] = q->p > t->p ? q->p : t->p;
		if (q->excluded || t->excluded) {
			if (h < 3)
				res->backward_excluded = 1;
			else
				res->forward_excluded = 1;
		}
	}
	SB_TRY(sb_stats_holm(res->hyp_p, SB_N3A_HYPS, res->hyp_holm, err));
	int bw = 1, fw = 1;
	for (int h = 0; h < 3; h++) {
		bw &= res->hyp_holm[h] <= SB_N3A_ALPHA;
		fw &= res->hyp_holm[3 + h] <= SB_N3A_ALPHA;
	}
	res->backward_supported = res->context_pass && bw;
	res->forward_supported = res->context_pass && fw;
	res->killed_context = res->density_excluded[0] && res->density_excluded[1];
	res->killed_mechanism = res->backward_excluded && res->forward_excluded;
	res->verdict = res->backward_supported                        ? "BACKWARD_SUPPORTED_SYNTHETIC"
	               : res->forward_supported                       ? "FORWARD_ONLY_SUPPORTED_SYNTHETIC"
	               : res->killed_context || res->killed_mechanism ? "KILLED_FOR_REGISTERED_EPSILON"
	                                                              : "INCONCLUSIVE";
	return 0;
}

/* the Holm-adjusted density and hypothesis p's with every unknown component's p set to u */
static int n3a_bound_holm(const struct sb_a8_n3a_comp *comp, const int *known, double u, double dh[2],
                          double hh[SB_N3A_HYPS], struct sb_err *err)
{
	double dp[2] = {0, 0}, hp[SB_N3A_HYPS] = {0};
	for (int c = 0; c < SB_N3A_NCOMP; c++) {
		double p = known[c] ? comp[c].p : u, *x = c < 8 ? &dp[c / 4] : &hp[(c - 8) / 2];
		*x = p > *x ? p : *x;
	}
	SB_TRY(sb_stats_holm(dp, 2, dh, err));
	return sb_stats_holm(hp, SB_N3A_HYPS, hh, err);
}

int sb_a8_n3a_determined(const struct sb_a8_n3a_comp comp[SB_N3A_NCOMP], const int known[SB_N3A_NCOMP],
                         const char **verdict, int *context_possible, struct sb_err *err)
{
	/* floors (unknown p's 0) and ceilings (unknown p's 1) of the adjusted p's */
	double dlo[2], hlo[SB_N3A_HYPS], dhi[2], hhi[SB_N3A_HYPS];
	SB_TRY(n3a_bound_holm(comp, known, 0, dlo, hlo, err));
	SB_TRY(n3a_bound_holm(comp, known, 1, dhi, hhi, err));
	const double a = SB_N3A_ALPHA;
	int ctx_can = dlo[0] <= a || dlo[1] <= a, ctx_sure = dhi[0] <= a || dhi[1] <= a;
	int bw_can = ctx_can, bw_sure = ctx_sure, fw_can = ctx_can, fw_sure = ctx_sure;
	for (int h = 0; h < 3; h++) {
		bw_can &= hlo[h] <= a;
		bw_sure &= hhi[h] <= a;
		fw_can &= hlo[3 + h] <= a;
		fw_sure &= hhi[3 + h] <= a;
	}
	/* KILLED's clauses: some member of each density (3a), or of the backward and of the
	 * forward hypotheses (3b), excluded: surely (a known one is) or possibly (or unknown) */
	int dsure[2] = {0, 0}, dcan[2] = {0, 0}, bsure = 0, bcan = 0, fsure = 0, fcan = 0;
	for (int c = 0; c < SB_N3A_NCOMP; c++) {
		int sure = known[c] && comp[c].excluded, can = !known[c] || comp[c].excluded;
		if (c < 8)
			dsure[c / 4] |= sure, dcan[c / 4] |= can;
		else if (c < 14)
			bsure |= sure, bcan |= can;
		else
			fsure |= sure, fcan |= can;
	}
	int k_sure = (dsure[0] && dsure[1]) || (bsure && fsure), k_can = (dcan[0] && dcan[1]) || (bcan && fcan);
	*context_possible = ctx_can;
	/* the verdict's precedence, each step decided only when sure either way */
	*verdict = bw_sure                    ? "BACKWARD_SUPPORTED_SYNTHETIC"
	           : bw_can                   ? NULL
	           : fw_sure                  ? "FORWARD_ONLY_SUPPORTED_SYNTHETIC"
	           : fw_can                   ? NULL
	           : k_sure                   ? "KILLED_FOR_REGISTERED_EPSILON"
	           : k_can                    ? NULL
	                                      : "INCONCLUSIVE";
	return 0;
}

/* docs/n3a-spec.md section 4 (the study's SCIENTIFIC_DECISION.json as printed there) */
const struct sb_a8_n3a_pub sb_a8_n3a_published[SB_N3A_NCOMP] = {
    /* context r = 16: query E, C; transformer E, C */
    {0, -0.12044, -0.12731, -0.10945, 1, "1", 1, 0},
    {64, 0.24565, 0.23464, 0.25308, 0, "5.42e-20", 5.42e-20, 5e-23},
    {0, -0.14834, -0.15468, -0.14346, 1, "1", 1, 0},
    {59, 0.16951, 0.11677, 0.22732, 0, "4.50e-13", 4.50e-13, 5e-16},
    /* context r = 24 */
    {0, -0.34547, -0.35794, -0.33476, 1, "1", 1, 0},
    {64, 0.51231, 0.50438, 0.52371, 0, "5.42e-20", 5.42e-20, 5e-23},
    {0, -0.35338, -0.36669, -0.34539, 1, "1", 1, 0},
    {60, 0.22132, 0.14892, 0.27948, 0, "3.68e-14", 3.68e-14, 5e-17},
    /* H1 B(768) r 16: query, transformer */
    {8, 0.0014527, -0.0002621, 0.0027699, 1, "1 - 3.8e-11", 1 - 3.8e-11, 5e-13},
    {23, -0.0001235, -0.0059410, 0.0069097, 0, "0.99157", 0.99157, 5e-6},
    /* H2 B(768) r 24 */
    {11, 0.0009272, -0.0007101, 0.0035872, 1, "0.99999999", 0.99999999, 5e-9},
    {26, 0.0020792, -0.0046621, 0.0071617, 0, "0.94829", 0.94829, 5e-6},
    /* H3 I_B */
    {9, -0.0001331, -0.0025101, 0.0027915, 1, "0.9999999997", 0.9999999997, 5e-11},
    {24, -0.0016852, -0.0114362, 0.0081452, 0, "0.98362", 0.98362, 5e-6},
    /* H4 F(768) r 16 */
    {64, 0.030828, 0.028760, 0.033328, 0, "5.42e-20", 5.42e-20, 5e-23},
    {64, 0.047690, 0.039476, 0.055026, 0, "5.42e-20", 5.42e-20, 5e-23},
    /* H5 F(768) r 24 */
    {64, 0.044710, 0.042392, 0.046431, 0, "5.42e-20", 5.42e-20, 5e-23},
    {64, 0.062933, 0.053453, 0.065759, 0, "5.42e-20", 5.42e-20, 5e-23},
    /* H6 I_F */
    {0, -0.011836, -0.013275, -0.009309, 1, "1", 1, 0},
    {16, -0.0027176, -0.0095257, 0.0041500, 1, "0.99999", 0.99999, 5e-6},
};
const struct sb_a8_n3a_pub_family sb_a8_n3a_published_density[2] = {{"1", "1", 1, 0, 1, 0}, {"1", "1", 1, 0, 1, 0}};
const struct sb_a8_n3a_pub_family sb_a8_n3a_published_hyp[SB_N3A_HYPS] = {
    {"0.99999999996", "1", 0.99999999996, 5e-12, 1, 0},
    {"0.99999999", "1", 0.99999999, 5e-9, 1, 0},
    {"0.9999999997", "1", 0.9999999997, 5e-11, 1, 0},
    {"5.42e-20", "3.2526e-19", 5.42e-20, 5e-23, 3.2526e-19, 5e-24},
    {"5.42e-20", "3.2526e-19", 5.42e-20, 5e-23, 3.2526e-19, 5e-24},
    {"1", "1", 1, 0, 1, 0},
};
