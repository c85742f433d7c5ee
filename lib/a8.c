/* a8.c — PROTOCOL A8's extension arithmetic (see a8.h and docs/sb-a8.md). */
#include "a8.h"

#include <math.h>
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

int sb_a8_m1_verdict(int n, int nd, int npred, int K, const int *ds, const int *cifar, const int *arch, const int *tier,
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
		if (target[i] >= 4 && target[i] <= K && !cifar[ds[i]]) {
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
