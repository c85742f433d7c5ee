/* stats.c — special functions and paired tests (see stats.h). Pure math: no I/O. */
#include "stats.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define LN_SQRT_2PI 0.918938533204672741780329736406 /* log(sqrt(2 pi)) */
#define ASYM_MIN 10.0                                /* Stirling series used from here on */

/* ---- log-gamma ---- */

/* delta(x) = lgamma(x) - [(x - 1/2) log x - x + log sqrt(2 pi)] for x >= 10, from the
 * Stirling series sum_k B_2k / (2k (2k-1) x^(2k-1)), k = 1..8. At x = 10 the first
 * omitted term is below 1e-19, far under the rounding of the result. */
static double stirling_delta(double x)
{
	double r = 1.0 / x, r2 = r * r;
	double s = -3617.0 / 122400.0;
	s = s * r2 + 1.0 / 156.0;
	s = s * r2 - 691.0 / 360360.0;
	s = s * r2 + 1.0 / 1188.0;
	s = s * r2 - 1.0 / 1680.0;
	s = s * r2 + 1.0 / 1260.0;
	s = s * r2 - 1.0 / 360.0;
	s = s * r2 + 1.0 / 12.0;
	return s * r;
}

static double lgamma_big(double x) /* x >= 10 */
{
	return (x - 0.5) * log(x) - x + LN_SQRT_2PI + stirling_delta(x);
}

double sb_stats_lgamma(double x)
{
	if (isnan(x) || x <= 0)
		return NAN;
	if (isinf(x))
		return INFINITY;
	if (x >= ASYM_MIN)
		return lgamma_big(x);
	/* Gamma(x) = Gamma(x + m) / (x (x+1) ... (x+m-1)) with x + m >= 10 */
	double prod = 1.0, y = x;
	while (y < ASYM_MIN) {
		prod *= y;
		y += 1.0;
	}
	return lgamma_big(y) - log(prod);
}

/* lgamma(a) - lgamma(a + b) for a >= 10, b > 0, without cancelling large terms. */
static double lgamma_ratio_big(double a, double b)
{
	return -b * log(a) - (a + b - 0.5) * log1p(b / a) + b + stirling_delta(a) - stirling_delta(a + b);
}

double sb_stats_lbeta(double a, double b)
{
	if (isnan(a) || isnan(b) || a <= 0 || b <= 0)
		return NAN;
	if (a < b) {
		double t = a;
		a = b;
		b = t;
	}
	if (isinf(a))
		return -INFINITY;
	if (a >= ASYM_MIN)
		return sb_stats_lgamma(b) + lgamma_ratio_big(a, b);
	return sb_stats_lgamma(a) + sb_stats_lgamma(b) - sb_stats_lgamma(a + b);
}

/* ---- incomplete beta ---- */

/* x^a y^b / B(a, b) with y = 1 - x.
 * When both a and b are large it is formed as
 * (x/x0)^a (y/y0)^b sqrt(ab / (2 pi (a+b))) exp(-(delta(a) + delta(b) - delta(a+b))),
 * x0 = a/(a+b), y0 = b/(a+b). Near the peak, x - x0 = y0 - y is taken from whichever of
 * x, y is smaller and the powers go through log1p: errors in that difference cancel to
 * first order, so the factor keeps its relative accuracy where the direct form loses
 * ~ (a+b) eps. Otherwise the powers are taken with pow() (one rounding instead of the
 * |a log x| eps of exp(a log x)), falling back to logs where they would under/overflow.
 * A power of a number close to 1 uses log1p of the small complement instead. */
static double beta_prefactor(double a, double b, double x, double y)
{
	if (a >= ASYM_MIN && b >= ASYM_MIN) {
		double s = a + b, x0 = a / s, y0 = b / s;
		double e = x <= y ? x - x0 : y0 - y;
		double rest =
		    0.5 * log(a * (b / s)) - LN_SQRT_2PI - (stirling_delta(a) + stirling_delta(b) - stirling_delta(s));
		if (fabs(e) < 0.5 * x0 && fabs(e) < 0.5 * y0)
			return exp(a * log1p(e / x0) + b * log1p(-e / y0) + rest);
		double lx = a * log(x / x0), ly = b * log(y / y0), l = lx + ly + rest;
		if (lx > -700 && lx < 700 && ly > -700 && ly < 700 && l > -700)
			return pow(x / x0, a) * pow(y / y0, b) * exp(rest);
		return exp(l);
	}
	double lbab = sb_stats_lbeta(a, b);
	double lx = x <= 0.5 ? log(x) : log1p(-y);
	double ly = y <= 0.5 ? log(y) : log1p(-x);
	double l = a * lx + b * ly - lbab;
	if (a * lx < -700 || b * ly < -700 || l < -700 || fabs(lbab) > 700)
		return exp(l);
	double px = x <= 0.5 ? pow(x, a) : exp(a * lx);
	double py = y <= 0.5 ? pow(y, b) : exp(b * ly);
	return px * py * exp(-lbab);
}

#define CF_EPS 1e-15
#define CF_MAXIT 100000

/* The continued fraction of I_x(a, b) = K / (1 + c1 / (1 + c2 / (1 + ...))), K = x^a y^b /
 * (a B(a,b)), with c_{2m+1} = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1)) and
 * c_{2m} = m (b-m) x / ((a+2m-1)(a+2m)); evaluated by the modified Lentz method.
 * Converges fast for x < (a+1)/(a+b+2). Returns the fraction 1/(1 + c1/(1 + ...)). */
static int beta_cf(double a, double b, double x, double *out)
{
	const double tiny = 1e-300;
	/* f = 0 + a1/(b1 + a2/(b2 + ...)) with a1 = 1, b_j = 1, a_{j+1} = c_j */
	double f = tiny, C = tiny, D = 0.0;
	for (int j = 1; j <= 2 * CF_MAXIT; j++) {
		double aj;
		if (j == 1) {
			aj = 1.0;
		} else {
			int k = j - 1; /* coefficient c_k */
			if (k & 1) {
				double m = (k - 1) / 2;
				aj = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
			} else {
				double m = k / 2;
				aj = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
			}
		}
		D = 1.0 + aj * D;
		if (fabs(D) < tiny)
			D = tiny;
		C = 1.0 + aj / C;
		if (fabs(C) < tiny)
			C = tiny;
		D = 1.0 / D;
		double delta = C * D;
		f *= delta;
		if (j > 1 && fabs(delta - 1.0) < CF_EPS) {
			*out = f;
			return 0;
		}
	}
	*out = f;
	return SB_EINTERNAL;
}

double sb_stats_tie_grid(double x)
{
	return round(x / SB_STATS_TIE_GRID) * SB_STATS_TIE_GRID;
}

int sb_stats_betai2(double a, double b, double x, double y, double *ix, double *iy)
{
	*ix = *iy = NAN;
	if (isnan(a) || isnan(b) || isnan(x) || isnan(y) || a <= 0 || b <= 0 || isinf(a) || isinf(b) || x < 0 ||
	    x > 1 || y < 0 || y > 1)
		return SB_EDATA;
	/* only an exact 0 on one side is an end point: the other side may have rounded to 1
	 * while this one carries the tail (x = 1e-17, y = 1 - x = 1) */
	if (x == 0) {
		*ix = 0;
		*iy = 1;
		return 0;
	}
	if (y == 0) {
		*ix = 1;
		*iy = 0;
		return 0;
	}
	double cf;
	int rc;
	if (x < (a + 1) / (a + b + 2)) {
		rc = beta_cf(a, b, x, &cf);
		*ix = beta_prefactor(a, b, x, y) / a * cf;
		*iy = 1.0 - *ix;
	} else {
		rc = beta_cf(b, a, y, &cf);
		*iy = beta_prefactor(b, a, y, x) / b * cf;
		*ix = 1.0 - *iy;
	}
	return rc;
}

double sb_stats_betai(double a, double b, double x)
{
	double ix, iy;
	if (sb_stats_betai2(a, b, x, 1.0 - x, &ix, &iy) == SB_EDATA)
		return NAN;
	return ix;
}

/* ---- normal, t, binomial ---- */

double sb_stats_norm_sf(double z)
{
	return 0.5 * erfc(z * M_SQRT1_2);
}

/* Lower-tail quantile for 0 < p <= 0.5 (result <= 0): an Abramowitz-Stegun 26.2.23
 * start (|error| < 4.5e-4) refined by Halley steps on Phi(x) = p. */
static double norm_ppf_lower(double p)
{
	double t = sqrt(-2.0 * log(p));
	double x = -(t - (2.515517 + 0.802853 * t + 0.010328 * t * t) /
	                     (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t));
	for (int i = 0; i < 8; i++) {
		double cdf = 0.5 * erfc(-x * M_SQRT1_2);
		double pdf = exp(-0.5 * x * x) / 2.506628274631000502415765284811;
		if (pdf == 0)
			break;
		double u = (cdf - p) / pdf;
		double step = u / (1.0 + 0.5 * x * u);
		x -= step;
		if (fabs(step) <= 1e-17 * fabs(x))
			break;
	}
	return x;
}

double sb_stats_norm_ppf(double p)
{
	if (isnan(p) || p < 0 || p > 1)
		return NAN;
	if (p == 0)
		return -INFINITY;
	if (p == 1)
		return INFINITY;
	if (p == 0.5)
		return 0.0;
	if (p < 0.5)
		return norm_ppf_lower(p);
	return -norm_ppf_lower(1.0 - p); /* 1 - p is exact for p in [0.5, 1] */
}

double sb_stats_t_p2(double t, double df)
{
	if (isnan(t) || isnan(df) || df <= 0)
		return NAN;
	t = fabs(t);
	if (isinf(t))
		return 0.0;
	if (t == 0)
		return 1.0;
	double t2 = t * t, ix, iy;
	double x = df / (df + t2), y = t2 / (df + t2);
	if (isinf(t2)) {
		x = 0;
		y = 1;
	}
	if (isinf(df)) { /* the normal limit */
		return 2.0 * sb_stats_norm_sf(t);
	}
	sb_stats_betai2(0.5 * df, 0.5, x, y, &ix, &iy);
	return ix;
}

double sb_stats_binom_cdf(int64_t k, int64_t n, double prob)
{
	if (n < 0 || isnan(prob) || prob < 0 || prob > 1)
		return NAN;
	if (k < 0)
		return 0.0;
	if (k >= n)
		return 1.0;
	if (prob == 0)
		return 1.0;
	if (prob == 1)
		return 0.0;
	/* P(X <= k) = I_{1-p}(n - k, k + 1) */
	double ix, iy;
	sb_stats_betai2((double)(n - k), (double)(k + 1), 1.0 - prob, prob, &ix, &iy);
	return ix;
}

/* ---- means and the t test ---- */

double sb_stats_mean(const double *x, int n)
{
	if (n < 1)
		return NAN;
	double s = 0;
	for (int i = 0; i < n; i++)
		s += x[i];
	return s / n;
}

static int all_equal(const double *x, int n)
{
	for (int i = 1; i < n; i++)
		if (x[i] != x[0])
			return 0;
	return 1;
}

double sb_stats_sd(const double *x, int n)
{
	if (n < 2)
		return NAN;
	if (all_equal(x, n))
		return 0.0;
	double m = sb_stats_mean(x, n), s = 0;
	for (int i = 0; i < n; i++)
		s += (x[i] - m) * (x[i] - m);
	return sqrt(s / (n - 1));
}

static int check_finite(const double *x, int n, const char *what, struct sb_err *err)
{
	for (int i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return SB_ERR(err, SB_EDATA, "%s: value %d is not finite", what, i);
	return 0;
}

int sb_stats_ttest_paired(const double *d, int n, struct sb_ttest *out, struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	out->n = n;
	out->mean = out->sd = out->t = out->df = NAN;
	out->p = 1.0;
	if (n < 0)
		return SB_ERR(err, SB_EDATA, "t-test: negative sample size");
	SB_TRY(check_finite(d, n, "t-test", err));
	if (n < 1)
		return 0;
	out->mean = sb_stats_mean(d, n);
	if (n < 2)
		return 0; /* p = 1 */
	out->df = n - 1;
	out->sd = sb_stats_sd(d, n);
	if (out->sd == 0) {
		out->p = out->mean != 0 ? 0.0 : 1.0;
		return 0;
	}
	if (out->mean == 0) {
		out->t = 0;
		out->p = 1.0;
		return 0;
	}
	out->t = fabs(out->mean) / (out->sd / sqrt((double)n));
	out->p = sb_stats_t_p2(out->t, out->df);
	return 0;
}

double sb_stats_cohen_dz(const double *d, int n)
{
	if (n < 2)
		return NAN;
	double m = sb_stats_mean(d, n), s = sb_stats_sd(d, n);
	if (s == 0)
		return m == 0 ? NAN : (m > 0 ? INFINITY : -INFINITY);
	return m / s;
}

/* ---- Wilcoxon signed-rank ---- */

struct keyed {
	double key;
	int idx;
};

static int cmp_keyed(const void *pa, const void *pb)
{
	const struct keyed *a = pa, *b = pb;
	if (a->key < b->key)
		return -1;
	if (a->key > b->key)
		return 1;
	return (a->idx > b->idx) - (a->idx < b->idx); /* stable */
}

#define WILCOXON_EXACT_MAX 1000 /* DP cost n * n(n+1): ~1e9 at n = 1000 */

int sb_stats_wilcoxon(const double *d, int n, enum sb_wilcoxon_method method, struct sb_wilcoxon *out,
                      struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	out->z = NAN;
	out->p = 1.0;
	out->exact = 1;
	if (n < 0)
		return SB_ERR(err, SB_EDATA, "Wilcoxon: negative sample size");
	SB_TRY(check_finite(d, n, "Wilcoxon", err));
	struct keyed *k = malloc((size_t)(n ? n : 1) * sizeof *k);
	if (!k)
		return SB_ERR(err, SB_EINTERNAL, "Wilcoxon: out of memory");
	int m = 0;
	for (int i = 0; i < n; i++) {
		if (d[i] == 0) {
			out->n_zero++;
			continue;
		}
		k[m].key = fabs(d[i]);
		k[m].idx = i;
		m++;
	}
	out->n = m;
	if (m == 0) {
		free(k);
		return 0;
	}
	qsort(k, (size_t)m, sizeof *k, cmp_keyed);

	/* mid-ranks: a tie group at sorted positions i..j (0-based) has rank (i + j)/2 + 1,
	 * doubled rank i + j + 2 (an integer). */
	int *rank2 = malloc((size_t)m * sizeof *rank2); /* doubled rank, in sorted order */
	if (!rank2) {
		free(k);
		return SB_ERR(err, SB_EINTERNAL, "Wilcoxon: out of memory");
	}
	double tie_sum = 0; /* sum over tie groups of t^3 - t */
	long long r2_plus = 0, r2_total = 0;
	for (int i = 0; i < m;) {
		int j = i;
		while (j + 1 < m && k[j + 1].key == k[i].key)
			j++;
		double t = j - i + 1;
		if (t > 1) {
			out->ties = 1;
			tie_sum += t * t * t - t;
		}
		for (int q = i; q <= j; q++) {
			rank2[q] = i + j + 2;
			r2_total += rank2[q];
			if (d[k[q].idx] > 0)
				r2_plus += rank2[q];
		}
		i = j + 1;
	}
	out->r_plus = r2_plus / 2.0;
	out->r_minus = (r2_total - r2_plus) / 2.0;
	out->statistic = out->r_plus < out->r_minus ? out->r_plus : out->r_minus;

	int exact = method == SB_WILCOXON_EXACT || (method == SB_WILCOXON_AUTO && m <= 50);
	if (exact && m > WILCOXON_EXACT_MAX) {
		free(rank2);
		free(k);
		return SB_ERR(err, SB_EUSAGE, "Wilcoxon: exact distribution limited to n <= %d (got %d)",
		              WILCOXON_EXACT_MAX, m);
	}
	out->exact = exact;
	if (exact) {
		/* pmf[s] = P(doubled R+ = s) over the 2^m sign assignments; every value is a
		 * dyadic rational k / 2^j, so for m <= 50 each entry and each partial sum below
		 * is exact in double precision. */
		size_t top = (size_t)r2_total;
		double *pmf = calloc(top + 1, sizeof *pmf);
		if (!pmf) {
			free(rank2);
			free(k);
			return SB_ERR(err, SB_EINTERNAL, "Wilcoxon: out of memory");
		}
		pmf[0] = 1.0;
		size_t hi = 0;
		for (int q = 0; q < m; q++) {
			size_t w = (size_t)rank2[q];
			hi += w;
			for (size_t s = hi; s >= w; s--) {
				pmf[s] = 0.5 * (pmf[s] + pmf[s - w]);
				if (s == w)
					break;
			}
			for (size_t s = 0; s < w && s <= hi; s++)
				pmf[s] *= 0.5;
		}
		double p_less = 0, p_greater = 0;
		for (size_t s = 0; s <= (size_t)r2_plus; s++)
			p_less += pmf[s];
		for (size_t s = (size_t)r2_plus; s <= top; s++)
			p_greater += pmf[s];
		double p = 2.0 * (p_less < p_greater ? p_less : p_greater);
		out->p = p > 1.0 ? 1.0 : p;
		free(pmf);
	} else {
		double nn = m;
		double mn = nn * (nn + 1.0) * 0.25;
		double se = nn * (nn + 1.0) * (2.0 * nn + 1.0);
		se -= 0.5 * tie_sum;
		se = sqrt(se / 24.0);
		out->z = (out->statistic - mn) / se;
		double p = 2.0 * sb_stats_norm_sf(fabs(out->z));
		out->p = p > 1.0 ? 1.0 : p;
	}
	free(rank2);
	free(k);
	return 0;
}

/* ---- Holm ---- */

int sb_stats_holm(const double *p, int m, double *adj, struct sb_err *err)
{
	if (m < 0)
		return SB_ERR(err, SB_EDATA, "Holm: negative number of p-values");
	for (int i = 0; i < m; i++)
		if (!(p[i] >= 0 && p[i] <= 1))
			return SB_ERR(err, SB_EDATA, "Holm: p-value %d is %g, not in [0, 1]", i, p[i]);
	if (m == 0)
		return 0;
	struct keyed *k = malloc((size_t)m * sizeof *k);
	if (!k)
		return SB_ERR(err, SB_EINTERNAL, "Holm: out of memory");
	for (int i = 0; i < m; i++) {
		k[i].key = p[i];
		k[i].idx = i;
	}
	qsort(k, (size_t)m, sizeof *k, cmp_keyed);
	double run = 0;
	for (int r = 0; r < m; r++) {
		double v = (double)(m - r) * k[r].key;
		if (v > run)
			run = v;
		adj[k[r].idx] = run > 1.0 ? 1.0 : run; /* p is read from k, so adj may alias p */
	}
	free(k);
	return 0;
}

/* ---- percentiles and the bootstrap ---- */

/* NumPy's 'linear' interpolation between the order statistics a = x(i) and b = x(i+1) */
static double lerp_numpy(double a, double b, double g)
{
	double diff = b - a;
	return g >= 0.5 ? b - diff * (1.0 - g) : a + diff * g;
}

/* NumPy's 'linear' position of quantile q among n sorted values: between x(i) and x(i+1),
 * with weight g. 1 then, 0 when i is the last value (no interpolation), -1 for a bad n or q. */
static int pct_position(int n, double q, int *i, double *g)
{
	if (n < 1 || isnan(q) || q < 0 || q > 1)
		return -1;
	double h = (double)(n - 1) * q;
	double fl = floor(h);
	*i = (int)fl;
	*g = h - fl;
	return *i < n - 1;
}

double sb_stats_percentile(const double *sorted, int n, double q)
{
	int i;
	double g;
	int at = pct_position(n, q, &i, &g);
	return at < 0 ? NAN : at == 0 ? sorted[n - 1] : lerp_numpy(sorted[i], sorted[i + 1], g);
}

/* The k-th smallest (0-based) of v[0..n) (no NaN), by Hoare's selection: v is reordered so
 * that v[0..k) <= v[k] <= v[k+1..n). Expected O(n); runs of equal values split evenly. */
static double select_kth(double *v, int n, int k)
{
	int lo = 0, hi = n - 1;
	while (lo < hi) {
		double pivot = v[lo + (hi - lo) / 2];
		int i = lo, j = hi;
		while (i <= j) {
			while (v[i] < pivot)
				i++;
			while (v[j] > pivot)
				j--;
			if (i <= j) {
				double t = v[i];
				v[i++] = v[j];
				v[j--] = t;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			break; /* j < k < i: v[k] equals the pivot, in place */
	}
	return v[k];
}

/* sb_stats_percentile of v[0..n) as if sorted, without sorting (v is reordered): the two
 * order statistics it reads, by selection. The same value, bit for bit (a bootstrap reads
 * two percentiles of 10,000 means: a sort was 80% of sb-stats' time on the study's grid). */
static double percentile_unsorted(double *v, int n, double q)
{
	int i;
	double g;
	int at = pct_position(n, q, &i, &g);
	if (at <= 0)
		return at < 0 ? NAN : select_kth(v, n, n - 1);
	double a = select_kth(v, n, i), b = v[i + 1];
	for (int j = i + 2; j < n; j++) /* v[i+1..n) >= a: x(i+1) is their minimum */
		if (v[j] < b)
			b = v[j];
	return lerp_numpy(a, b, g);
}

static int cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;
	return (a > b) - (a < b);
}

/* The CI quantiles as NumPy's percentile(x, [50 (1 - level), 50 (1 + level)]) would see
 * them: level 0.95 gives exactly 2.5/100 and 97.5/100. */
static void ci_quantiles(double level, double *qlo, double *qhi)
{
	double l100 = level * 100.0;
	*qlo = ((100.0 - l100) / 2.0) / 100.0;
	*qhi = ((100.0 + l100) / 2.0) / 100.0;
}

static int check_boot(const struct sb_boot *cfg, int n, struct sb_err *err)
{
	if (n < 1)
		return SB_ERR(err, SB_EDATA, "bootstrap: empty sample");
	if (cfg->resamples < 1)
		return SB_ERR(err, SB_EUSAGE, "bootstrap: resamples must be >= 1");
	if (!(cfg->level > 0 && cfg->level < 1))
		return SB_ERR(err, SB_EUSAGE, "bootstrap: level must lie in (0, 1)");
	return 0;
}

int sb_stats_bootstrap_ci(const double *d, int n, const struct sb_boot *cfg, double *lo, double *hi, struct sb_err *err)
{
	*lo = *hi = NAN;
	SB_TRY(check_boot(cfg, n, err));
	SB_TRY(check_finite(d, n, "bootstrap", err));
	int B = cfg->resamples;
	double *means = malloc((size_t)B * sizeof *means);
	if (!means)
		return SB_ERR(err, SB_EINTERNAL, "bootstrap: out of memory");
	struct sb_rng r;
	sb_rng_init(&r, cfg->seed, SB_RNG_BOOTSTRAP, cfg->stream);
	for (int b = 0; b < B; b++) {
		double s = 0;
		for (int i = 0; i < n; i++)
			s += d[sb_rng_below(&r, (uint64_t)n)];
		means[b] = s / n;
	}
	double qlo, qhi;
	ci_quantiles(cfg->level, &qlo, &qhi);
	*lo = percentile_unsorted(means, B, qlo);
	*hi = percentile_unsorted(means, B, qhi);
	free(means);
	return 0;
}

int sb_stats_bootstrap_ci_cols(const double *d, int n, int k, const struct sb_boot *cfg, double *lo, double *hi,
                               struct sb_err *err)
{
	for (int j = 0; j < k; j++)
		lo[j] = hi[j] = NAN;
	if (k < 1)
		return SB_ERR(err, SB_EDATA, "bootstrap: no columns");
	SB_TRY(check_boot(cfg, n, err));
	SB_TRY(check_finite(d, n * k, "bootstrap", err));
	int B = cfg->resamples;
	double *means = malloc((size_t)B * k * sizeof *means);
	int *idx = malloc((size_t)n * sizeof *idx);
	if (!means || !idx) {
		free(means);
		free(idx);
		return SB_ERR(err, SB_EINTERNAL, "bootstrap: out of memory");
	}
	struct sb_rng r;
	sb_rng_init(&r, cfg->seed, SB_RNG_BOOTSTRAP, cfg->stream);
	for (int b = 0; b < B; b++) {
		for (int i = 0; i < n; i++)
			idx[i] = (int)sb_rng_below(&r, (uint64_t)n);
		for (int j = 0; j < k; j++) {
			double s = 0;
			for (int i = 0; i < n; i++)
				s += d[(size_t)idx[i] * k + j];
			means[(size_t)j * B + b] = s / n;
		}
	}
	double qlo, qhi;
	ci_quantiles(cfg->level, &qlo, &qhi);
	for (int j = 0; j < k; j++) {
		double *col = means + (size_t)j * B;
		lo[j] = percentile_unsorted(col, B, qlo);
		hi[j] = percentile_unsorted(col, B, qhi);
	}
	free(means);
	free(idx);
	return 0;
}

/* ---- binary outcomes ---- */

int sb_stats_wilson(int64_t k, int64_t n, double level, double *lo, double *hi, struct sb_err *err)
{
	*lo = *hi = NAN;
	if (n < 1 || k < 0 || k > n)
		return SB_ERR(err, SB_EDATA, "Wilson interval: need 0 <= k <= n, n >= 1 (got k=%lld n=%lld)",
		              (long long)k, (long long)n);
	if (!(level > 0 && level < 1))
		return SB_ERR(err, SB_EUSAGE, "Wilson interval: level must lie in (0, 1)");
	double z = -sb_stats_norm_ppf((1.0 - level) / 2.0);
	double nn = (double)n, p = (double)k / nn, z2 = z * z;
	double denom = 1.0 + z2 / nn;
	double centre = (p + z2 / (2.0 * nn)) / denom;
	double half = z * sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn)) / denom;
	*lo = centre - half;
	*hi = centre + half;
	/* at k = 0 (k = n) the bound is exactly 0 (1): centre and half are equal there, but their
	 * difference rounds to +1e-17 or so, an interval that would exclude its own estimate */
	if (*lo < 0 || k == 0)
		*lo = 0;
	if (*hi > 1 || k == n)
		*hi = 1;
	return 0;
}

double sb_stats_mcnemar_exact(int64_t b, int64_t c)
{
	if (b < 0 || c < 0)
		return NAN;
	int64_t s = b < c ? b : c, n = b + c;
	if (n == 0)
		return 1.0;
	double p = 2.0 * sb_stats_binom_cdf(s, n, 0.5);
	if (p < 1e-290) {
		/* the incomplete beta underflows before the tail does (b = 0, c = 1074 gives
		 * 2^-1073, a subnormal, where it gives 0): the same sum in logs,
		 * 2 * sum_{i<=s} C(n,i) 2^-n = 2^(1-n) C(n,s) (1 + s/(n-s+1) + ...), the terms
		 * falling at least geometrically below i = s < n / 2 */
		double lt = lgamma((double)n + 1) - lgamma((double)s + 1) - lgamma((double)(n - s) + 1);
		double sum = 1.0, term = 1.0;
		for (int64_t i = s; i > 0 && term > 1e-18 * sum; i--) {
			term *= (double)i / (double)(n - i + 1);
			sum += term;
		}
		p = exp(lt + log(sum) + (double)(1 - n) * 0.69314718055994530942);
	}
	return p > 1.0 ? 1.0 : p;
}

int sb_stats_paired_binary(int64_t n11, int64_t n10, int64_t n01, int64_t n00, double level,
                           struct sb_paired_binary *out, struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	out->diff = out->lo = out->hi = out->p_a = out->p_b = out->mcnemar_p = NAN;
	if (n11 < 0 || n10 < 0 || n01 < 0 || n00 < 0)
		return SB_ERR(err, SB_EDATA, "paired binary: negative count");
	int64_t n = n11 + n10 + n01 + n00;
	out->n = n;
	out->n11 = n11;
	out->n10 = n10;
	out->n01 = n01;
	out->n00 = n00;
	if (n < 1)
		return SB_ERR(err, SB_EDATA, "paired binary: no pairs");
	double l1, u1, l2, u2;
	SB_TRY(sb_stats_wilson(n11 + n10, n, level, &l1, &u1, err));
	SB_TRY(sb_stats_wilson(n11 + n01, n, level, &l2, &u2, err));
	double nn = (double)n;
	out->p_a = (double)(n11 + n10) / nn;
	out->p_b = (double)(n11 + n01) / nn;
	out->diff = (double)(n10 - n01) / nn;
	/* phi = (ad - bc) / sqrt of the product of the four margins (0 if one is empty) */
	double a = (double)n11, b = (double)n10, c = (double)n01, dd = (double)n00;
	double marg = (a + b) * (c + dd) * (a + c) * (b + dd);
	double phi = marg > 0 ? (a * dd - b * c) / sqrt(marg) : 0.0;
	double p1 = out->p_a, p2 = out->p_b;
	double dl = (p1 - l1) * (p1 - l1) - 2.0 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) * (u2 - p2);
	double du = (u1 - p1) * (u1 - p1) - 2.0 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) * (p2 - l2);
	out->lo = out->diff - sqrt(dl > 0 ? dl : 0);
	out->hi = out->diff + sqrt(du > 0 ? du : 0);
	out->mcnemar_p = sb_stats_mcnemar_exact(n10, n01);
	return 0;
}

/* ---- the exact sign test and the order-statistic median interval ---- */

/* sum_{i=0..k} C(n, i) 2^-n for 0 <= k < n: the terms rise with i on the short side, so they
 * are summed smallest first. For n <= 1000 the first term 2^-n is exact (ldexp) and each next
 * one is the previous times (n - i) / (i + 1); beyond that 2^-n would underflow, and each term
 * is exp(log C(n, i) - n log 2). */
static double half_lower(int64_t k, int64_t n)
{
	double sum = 0;
	if (n <= 1000) {
		double t = ldexp(1.0, -(int)n);
		for (int64_t i = 0; i <= k; i++) {
			sum += t;
			t = t * (double)(n - i) / (double)(i + 1);
		}
	} else {
		double ln = sb_stats_lgamma((double)n + 1) - (double)n * 0.69314718055994530942;
		for (int64_t i = 0; i <= k; i++)
			sum += exp(ln - sb_stats_lgamma((double)i + 1) - sb_stats_lgamma((double)(n - i) + 1));
	}
	return sum;
}

double sb_stats_binom_half_cdf(int64_t k, int64_t n)
{
	if (n < 0)
		return NAN;
	if (k < 0)
		return 0.0;
	if (k >= n)
		return 1.0;
	/* the short side: P(X <= k) directly when k is in the lower half, else 1 - P(X >= k + 1)
	 * = 1 - P(X <= n - k - 1) by symmetry */
	if (2 * k + 1 < n)
		return half_lower(k, n);
	if (2 * k + 1 == n) /* odd n, k = (n-1)/2: exactly 1/2 by symmetry (1 - a rounded half can miss it) */
		return 0.5;
	double c = 1.0 - half_lower(n - k - 1, n);
	return c < 0 ? 0 : c;
}

double sb_stats_sign_p(int64_t s, int64_t n)
{
	if (n < 0 || s > n)
		return NAN;
	if (s <= 0)
		return 1.0;
	return sb_stats_binom_half_cdf(n - s, n); /* P(X >= s) = P(X <= n - s) */
}

int sb_stats_sign_test(const double *x, int n, double margin, struct sb_sign_test *out, struct sb_err *err)
{
	out->n = n;
	out->above = 0;
	out->p = NAN;
	if (n < 1)
		return SB_ERR(err, SB_EDATA, "sign test: no values");
	if (isnan(margin))
		return SB_ERR(err, SB_EDATA, "sign test: the margin is NaN");
	for (int i = 0; i < n; i++) {
		if (!isfinite(x[i]))
			return SB_ERR(err, SB_EDATA, "sign test: value %d is not finite (%g)", i, x[i]);
		if (x[i] > margin) /* equal to the margin counts against */
			out->above++;
	}
	out->p = sb_stats_sign_p(out->above, n);
	return 0;
}

int sb_stats_sign_min_count(int n, double alpha)
{
	for (int s = 0; s <= n; s++)
		if (sb_stats_sign_p(s, n) <= alpha)
			return s;
	return n + 1;
}

int sb_stats_median_rank(int n, double alpha)
{
	int rank = 0;
	/* 2 P(X <= j - 1) grows with j: the largest qualifying j is the last before it exceeds alpha */
	for (int j = 1; j <= n / 2; j++) {
		if (2.0 * sb_stats_binom_half_cdf(j - 1, n) > alpha)
			break;
		rank = j;
	}
	return rank;
}

int sb_stats_median_interval(const double *x, int n, double alpha, struct sb_median_interval *out, struct sb_err *err)
{
	out->n = n;
	out->rank = 0;
	out->median = out->lo = out->hi = NAN;
	if (n < 1)
		return SB_ERR(err, SB_EDATA, "median interval: no values");
	if (!(alpha > 0 && alpha < 1))
		return SB_ERR(err, SB_EDATA, "median interval: noncoverage %g not in (0, 1)", alpha);
	for (int i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return SB_ERR(err, SB_EDATA, "median interval: value %d is not finite (%g)", i, x[i]);
	double *v = malloc((size_t)n * sizeof *v);
	if (!v)
		return SB_ERR(err, SB_EINTERNAL, "median interval: out of memory");
	memcpy(v, x, (size_t)n * sizeof *v);
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	out->median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	out->rank = sb_stats_median_rank(n, alpha);
	if (out->rank) {
		out->lo = v[out->rank - 1];
		out->hi = v[n - out->rank];
	} else {
		out->lo = -INFINITY;
		out->hi = INFINITY;
	}
	free(v);
	return 0;
}

/* ---- epochs and budgets ---- */

int sb_stats_best_epoch(const double *acc, int n, int patience, int *epochs_run)
{
	int best = 0, since = 0, run = n;
	for (int e = 1; e < n; e++) {
		if (acc[e] > acc[best]) {
			best = e;
			since = 0;
		} else if (patience > 0 && ++since >= patience) {
			run = e + 1;
			break;
		}
	}
	if (epochs_run)
		*epochs_run = n < 1 ? 0 : run;
	return best;
}

int sb_stats_best_within(const double *acc, int E)
{
	int best = 0;
	for (int e = 1; e < E; e++)
		if (acc[e] > acc[best])
			best = e;
	return best;
}

int sb_stats_sign_change(const double *delta, int K)
{
	if (K < 1)
		return 1;
	int E = K + 1;
	while (E > 1 && delta[E - 2] < 0)
		E--;
	return E;
}

int sb_stats_first_negative(const double *delta, int K)
{
	for (int e = 0; e < K; e++)
		if (delta[e] < 0)
			return e + 1;
	return K + 1;
}

int sb_stats_switch_epoch(const double *delta, int K)
{
	if (K < 3)
		return -1;
	if ((delta[0] + delta[1] + delta[2]) / 3.0 <= 0)
		return 3;
	for (int e = 4; e + 2 <= K; e++)
		if (delta[e - 1] <= 0 && delta[e] <= 0 && delta[e + 1] <= 0)
			return e;
	return K + 1;
}

int sb_stats_sign_change_boot(const double *d, int n, int K, const struct sb_boot *cfg, struct sb_sign_change *out,
                              struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	out->K = K;
	out->sc_lo = out->sc_hi = out->sw_lo = out->sw_hi = NAN;
	out->switch_epoch = -1;
	if (K < 1)
		return SB_ERR(err, SB_EDATA, "sign change: no budgets");
	SB_TRY(check_boot(cfg, n, err));
	SB_TRY(check_finite(d, n * K, "sign change", err));
	int B = cfg->resamples;
	double *delta = malloc((size_t)K * sizeof *delta);
	double *sc = malloc((size_t)B * sizeof *sc), *sw = malloc((size_t)B * sizeof *sw);
	int *idx = malloc((size_t)n * sizeof *idx);
	if (!delta || !sc || !sw || !idx) {
		free(delta);
		free(sc);
		free(sw);
		free(idx);
		return SB_ERR(err, SB_EINTERNAL, "sign change: out of memory");
	}
	for (int e = 0; e < K; e++) {
		double s = 0;
		for (int i = 0; i < n; i++)
			s += d[(size_t)i * K + e];
		delta[e] = s / n;
	}
	out->sign_change = sb_stats_sign_change(delta, K);
	out->first_negative = sb_stats_first_negative(delta, K);
	out->switch_epoch = sb_stats_switch_epoch(delta, K);
	for (int e = 0; e + 1 < out->sign_change && out->sign_change <= K; e++)
		if (delta[e] > 0)
			out->reversal = 1;

	struct sb_rng r;
	sb_rng_init(&r, cfg->seed, SB_RNG_BOOTSTRAP, cfg->stream);
	for (int b = 0; b < B; b++) {
		for (int i = 0; i < n; i++)
			idx[i] = (int)sb_rng_below(&r, (uint64_t)n);
		for (int e = 0; e < K; e++) {
			double s = 0;
			for (int i = 0; i < n; i++)
				s += d[(size_t)idx[i] * K + e];
			delta[e] = s / n;
		}
		sc[b] = sb_stats_sign_change(delta, K);
		sw[b] = sb_stats_switch_epoch(delta, K);
	}
	double qlo, qhi;
	ci_quantiles(cfg->level, &qlo, &qhi);
	out->sc_lo = percentile_unsorted(sc, B, qlo);
	out->sc_hi = percentile_unsorted(sc, B, qhi);
	if (K >= 3) {
		out->sw_lo = percentile_unsorted(sw, B, qlo);
		out->sw_hi = percentile_unsorted(sw, B, qhi);
	}
	free(delta);
	free(sc);
	free(sw);
	free(idx);
	return 0;
}

/* ---- leave-one-task-out rule ---- */

int sb_stats_loto_rule(const double *x, int n_tasks, int n_pred, const int *label, const double *best_delta,
                       struct sb_rule_fold *folds, struct sb_rule_result *res, struct sb_err *err)
{
	memset(res, 0, sizeof *res);
	res->n_tasks = n_tasks;
	res->mean_gain = NAN;
	if (n_tasks < 2 || n_pred < 1)
		return SB_ERR(err, SB_EDATA, "rule: need at least 2 tasks and 1 predictor (got %d, %d)", n_tasks,
		              n_pred);
	SB_TRY(check_finite(x, n_tasks * n_pred, "rule predictors", err));
	SB_TRY(check_finite(best_delta, n_tasks, "rule best deltas", err));
	double *vals = malloc((size_t)n_tasks * sizeof *vals);
	if (!vals)
		return SB_ERR(err, SB_EINTERNAL, "rule: out of memory");
	double gain_sum = 0;
	for (int h = 0; h < n_tasks; h++) {
		struct sb_rule_fold f = {0};
		f.threshold = NAN;
		int best_correct = -1;
		for (int p = 0; p < n_pred; p++) {
			int nv = 0;
			for (int t = 0; t < n_tasks; t++)
				if (t != h)
					vals[nv++] = x[(size_t)t * n_pred + p];
			qsort(vals, (size_t)nv, sizeof *vals, cmp_double);
			int nu = 0; /* unique values, in place */
			for (int i = 0; i < nv; i++)
				if (nu == 0 || vals[i] != vals[nu - 1])
					vals[nu++] = vals[i];
			for (int i = 0; i + 1 < nu; i++) {
				double thr = (vals[i] + vals[i + 1]) / 2.0;
				for (int dir = 1; dir >= -1; dir -= 2) {
					int correct = 0;
					for (int t = 0; t < n_tasks; t++) {
						if (t == h)
							continue;
						double v = x[(size_t)t * n_pred + p];
						int pred = dir > 0 ? v > thr : v < thr;
						correct += pred == (label[t] != 0);
					}
					if (correct > best_correct) {
						best_correct = correct;
						f.has_rule = 1;
						f.predictor = p;
						f.threshold = thr;
						f.direction = dir;
						f.train_correct = correct;
					}
				}
			}
		}
		if (f.has_rule) {
			double v = x[(size_t)h * n_pred + f.predictor];
			f.predict_sparse = f.direction > 0 ? v > f.threshold : v < f.threshold;
		}
		f.gain = f.predict_sparse ? best_delta[h] : 0.0;
		gain_sum += f.gain;
		res->wins += f.gain > 0;
		res->losses += f.gain < 0;
		res->non_softmax += f.predict_sparse;
		if (folds)
			folds[h] = f;
	}
	free(vals);
	res->mean_gain = gain_sum / n_tasks;
	res->success = res->mean_gain > 0 && res->wins > res->losses && res->non_softmax >= 1;
	return 0;
}
