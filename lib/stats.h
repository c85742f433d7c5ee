/* stats.h — the statistics of the study (PROTOCOL.md A4, A7, A8, C): pure math, no I/O.
 *
 * Special functions
 *   sb_stats_lgamma, sb_stats_lbeta, sb_stats_betai (regularised incomplete beta by
 *   Lentz's continued fraction with the symmetry switch), Student-t and normal tails,
 *   the normal quantile and the binomial distribution function. Accuracy measured
 *   against mpmath at 50 digits is stated in docs/sb-stats.md.
 *
 * Paired tests of differences d[i] = method[i] - baseline[i]
 *   sb_stats_ttest_paired   the study's two-sided paired t-test with its edge rules (A7)
 *   sb_stats_wilcoxon       Wilcoxon signed-rank, zero differences dropped (SciPy's
 *                           zero_method='wilcox'); see the function for exact/approximate
 *   sb_stats_holm           Holm step-down adjustment
 *   sb_stats_bootstrap_ci   percentile bootstrap CI of the mean (seeded through lib/rng)
 *   sb_stats_cohen_dz       mean / sd of the differences
 *
 * Binary outcomes (retrieval probes, PROTOCOL C)
 *   sb_stats_wilson, sb_stats_mcnemar_exact, sb_stats_paired_binary
 *
 * Sign test and the order-statistic median interval (PROTOCOL A8's N3-A, docs/n3a-spec.md 3)
 *   sb_stats_binom_half_cdf, sb_stats_sign_p, sb_stats_sign_test, sb_stats_sign_min_count,
 *   sb_stats_median_rank, sb_stats_median_interval
 *
 * Epochs, budgets and rules
 *   sb_stats_best_epoch (A4 early stopping read from per-epoch records),
 *   sb_stats_best_within (best of the first E epochs), sb_stats_sign_change,
 *   sb_stats_switch_epoch (A8), sb_stats_sign_change_boot, sb_stats_loto_rule (A7).
 *
 * Functions returning a double return NaN for arguments outside their domain.
 * Functions returning int return 0 or an enum sb_code and fill err (which may be NULL).
 */
#ifndef SB_STATS_H
#define SB_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* ---- special functions ---- */

/* log Gamma(x) for x > 0 (NaN otherwise). Absolute error ~1e-15 for x < 10,
 * relative ~1e-15 above. */
double sb_stats_lgamma(double x);
/* log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b), a, b > 0, computed without the
 * cancellation of the three large terms when a or b is large. */
double sb_stats_lbeta(double a, double b);
/* Regularised incomplete beta I_x(a, b), a, b > 0, 0 <= x <= 1. */
double sb_stats_betai(double a, double b, double x);
/* Both I_x(a,b) (*ix) and its complement 1 - I_x(a,b) = I_y(b,a) (*iy), each with
 * full relative accuracy on its small side. y must equal 1 - x; pass it computed
 * without cancellation when x is close to 1 (e.g. y = t^2/(df+t^2) in the t test).
 * Returns 0, or SB_EDATA for bad arguments (both outputs NaN) and SB_EINTERNAL if the
 * continued fraction did not converge (it always does for finite arguments). */
int sb_stats_betai2(double a, double b, double x, double y, double *ix, double *iy);

/* Standard normal: upper tail Q(z) = P(Z > z), and the quantile (inverse CDF) for
 * 0 < p < 1 (-inf/+inf at 0/1, NaN outside). */
double sb_stats_norm_sf(double z);
double sb_stats_norm_ppf(double p);

/* Student t with df > 0 degrees of freedom: two-sided p = P(|T| >= |t|)
 * = I_{df/(df+t^2)}(df/2, 1/2). */
double sb_stats_t_p2(double t, double df);

/* Binomial distribution function P(X <= k), X ~ Bin(n, prob): 0 for k < 0, 1 for k >= n. */
double sb_stats_binom_cdf(int64_t k, int64_t n, double prob);

/* ---- paired differences ---- */

struct sb_ttest {
	int n;
	double mean, sd; /* sd with n - 1 in the denominator; 0 for constant samples */
	double t, df, p; /* t = |mean| / (sd / sqrt(n)), df = n - 1; t is NaN when not defined */
};
/* The study's two-sided paired t-test (PROTOCOL A7), in this order:
 *   n < 2 -> p = 1;  sd = 0 -> p = 0 if mean != 0 else 1;  mean = 0 -> p = 1;
 *   otherwise p = I_x(df/2, 1/2), x = df/(df+t^2).
 * A sample is constant (sd = 0) when all its values are equal, tested exactly (so
 * floating-point rounding in the mean cannot fake a tiny nonzero sd).
 * Non-finite d[i] is SB_EDATA. */
int sb_stats_ttest_paired(const double *d, int n, struct sb_ttest *out, struct sb_err *err);

double sb_stats_mean(const double *x, int n); /* NaN for n = 0 */
double sb_stats_sd(const double *x, int n);   /* n - 1 denominator; NaN for n < 2 */
/* Cohen's dz = mean(d) / sd(d). sd = 0: NaN when mean = 0, else +-inf. n < 2: NaN. */
double sb_stats_cohen_dz(const double *d, int n);

enum sb_wilcoxon_method {
	SB_WILCOXON_AUTO = 0, /* exact when the non-zero count is <= 50, else normal approx */
	SB_WILCOXON_EXACT,    /* exact (conditional) null distribution whatever n (n <= 1000) */
	SB_WILCOXON_APPROX    /* normal approximation with tie correction, no continuity corr. */
};

struct sb_wilcoxon {
	int n;      /* non-zero differences used */
	int n_zero; /* zero differences dropped */
	int ties;   /* 1 when some |d| are tied among the non-zero differences */
	double r_plus, r_minus;
	double statistic; /* min(r_plus, r_minus), SciPy's two-sided statistic */
	double z;         /* normal approximation only (NaN for exact) */
	double p;         /* two-sided */
	int exact;        /* 1: exact distribution used; 0: normal approximation */
};
/* Differences of accuracies computed by subtraction can differ in the last bits when they
 * are mathematically equal ((k1 - k2)/n reached along different paths); ranking them by
 * exact equality would split true ties. Callers of the Wilcoxon test on such differences
 * (sb-stats, the LM track's top-1 agreement) round them to this 1e-9 grid first:
 * accuracies are multiples of 1/n with n <= 1e7, so distinct differences (>= 1e-7 apart)
 * stay distinct. The t test and the bootstrap use the differences as computed. */
#define SB_STATS_TIE_GRID 1e-9
double sb_stats_tie_grid(double x);
/* Wilcoxon signed-rank test, two-sided, of the differences d[0..n).
 * Zero differences are dropped first (zero_method='wilcox'); ranks of |d| are mid-ranks
 * (ties tested by exact equality: round the differences first when they come from a
 * subtraction, see sb-stats). With no non-zero difference the result is p = 1,
 * statistic 0 (SciPy raises an error there).
 * Exact: the distribution of R+ over the 2^n equally likely sign assignments of the
 * observed mid-ranks (dynamic programming on doubled ranks, which are integers);
 * p = min(1, 2 min(P(R+ <= r+), P(R+ >= r+))). Without ties this is the classical
 * exact distribution and equals SciPy's method='exact'; with ties it is the exact
 * conditional permutation test (= scipy.stats.permutation_test with
 * permutation_type='samples' and every permutation enumerated).
 * Approximate: z = (T - n(n+1)/4) / sqrt((n(n+1)(2n+1) - sum(t^3 - t)/2) / 24),
 * p = 2 Q(|z|), equal to SciPy's method='approx' (no continuity correction).
 * SB_WILCOXON_AUTO uses the exact distribution when n (non-zero count) <= 50, so it
 * equals SciPy 1.10's method='auto' when there are no zeros and no ties; with zeros
 * SciPy 1.10 falls back to the normal approximation and with ties it truncates the
 * half-integer statistic (a known defect): we use the exact conditional distribution
 * instead, as newer SciPy does (a permutation test for small samples with ties or zeros). */
int sb_stats_wilcoxon(const double *d, int n, enum sb_wilcoxon_method method, struct sb_wilcoxon *out,
                      struct sb_err *err);

/* Holm step-down: sort p ascending (stable: equal p keep their input order), then
 * adj(rank r, 0-based) = min(1, max over r' <= r of (m - r') p(r')); written back in
 * input order. p must lie in [0, 1] (else SB_EDATA). adj may alias p. */
int sb_stats_holm(const double *p, int m, double *adj, struct sb_err *err);

/* Percentile of sorted[0..n) at q in [0,1] with NumPy's default 'linear' method:
 * h = q (n - 1), i = floor(h), g = h - i, value = lerp(sorted[i], sorted[i+1], g)
 * computed as NumPy does (a + g (b - a) for g < 0.5, b - (1 - g)(b - a) otherwise). */
double sb_stats_percentile(const double *sorted, int n, double q);

struct sb_boot {
	uint64_t seed;   /* key of the draws with purpose SB_RNG_BOOTSTRAP */
	uint64_t stream; /* 0 unless a caller wants independent index sets */
	int resamples;   /* B >= 1 (sb-stats default 10000) */
	double level;    /* 0.95 */
};
/* Percentile bootstrap CI of the mean of d[0..n): B resamples of n indices drawn
 * with replacement, in order resample 0..B-1, index 0..n-1, each by
 * sb_rng_below(&rng, n) from one cursor sb_rng_init(seed, SB_RNG_BOOTSTRAP, stream);
 * the resample mean is the plain left-to-right sum / n; the CI is the
 * sb_stats_percentile of the sorted means at (1-level)/2 and (1+level)/2.
 * So every comparison with the same n, seed and stream uses the same index sets. */
int sb_stats_bootstrap_ci(const double *d, int n, const struct sb_boot *cfg, double *lo, double *hi,
                          struct sb_err *err);

/* The same bootstrap on the k columns of d (n rows x k columns, row-major): the rows are
 * resampled with the index sets of sb_stats_bootstrap_ci (same seed, stream, n), so
 * lo[j], hi[j] equal sb_stats_bootstrap_ci of column j; one pass for all columns. */
int sb_stats_bootstrap_ci_cols(const double *d, int n, int k, const struct sb_boot *cfg, double *lo, double *hi,
                               struct sb_err *err);

/* ---- binary outcomes ---- */

/* Wilson score interval for k successes in n trials at the given level (0.95):
 * with z = Q^{-1}((1-level)/2), centre (k + z^2/2)/(n + z^2),
 * half-width z sqrt(k(n-k)/n + z^2/4)/(n + z^2) (statsmodels method='wilson').
 * n < 1 or k outside [0, n] is SB_EDATA. */
int sb_stats_wilson(int64_t k, int64_t n, double level, double *lo, double *hi, struct sb_err *err);

/* Exact McNemar test on the discordant counts b (A right, B wrong) and c (A wrong,
 * B right): p = min(1, 2 P(X <= min(b,c))), X ~ Bin(b+c, 1/2) (statsmodels
 * mcnemar(exact=True)); p = 1 when b + c = 0. */
double sb_stats_mcnemar_exact(int64_t b, int64_t c);

struct sb_paired_binary {
	int64_t n, n11, n10, n01, n00; /* n10: A correct, B wrong; n01: A wrong, B correct */
	double p_a, p_b;               /* proportions correct */
	double diff, lo, hi;           /* p_a - p_b and its CI (Newcombe 1998, method 10) */
	double mcnemar_p;
};
/* Paired comparison of two methods on the same probes from the 2x2 counts:
 * difference in proportions with Newcombe's hybrid score interval for paired data
 * (method 10: Wilson intervals of both margins combined with the phi correlation,
 * phi taken as 0 when a margin is empty), and the exact McNemar p. */
int sb_stats_paired_binary(int64_t n11, int64_t n10, int64_t n01, int64_t n00, double level,
                           struct sb_paired_binary *out, struct sb_err *err);

/* ---- the exact sign test and the order-statistic median interval ---- */

/* P(X <= k), X ~ Bin(n, 1/2), as an exact sum of C(n, i) 2^-n (each term to a few ulps, no
 * incomplete beta): 0 for k < 0, 1 for k >= n, NaN for n < 0. Summed over the short side
 * (1 - P(X <= n-k-1) when k >= n/2), so both tails keep their absolute accuracy; the lower
 * tail keeps full relative accuracy down to 2^-n (2^-64 = 5.42e-20 for n = 64, k = 0). Relative
 * error about 1e-14 for n <= 1000; above, the terms go through log C(n, i): about 1e-11. */
double sb_stats_binom_half_cdf(int64_t k, int64_t n);

/* The one-sided exact sign-test p of s successes in n trials: P(X >= s), X ~ Bin(n, 1/2),
 * computed directly as the upper tail P(X <= n - s) (symmetry), never as 1 - CDF, so 64
 * successes of 64 give 2^-64, not 0. 1 for s <= 0; NaN for s > n or n < 0. */
double sb_stats_sign_p(int64_t s, int64_t n);

struct sb_sign_test {
	int n;     /* values */
	int above; /* values strictly above the margin (equal to it or below count against) */
	double p;  /* sb_stats_sign_p(above, n) */
};
/* The exact one-sided sign test with a margin: H1 median(x) > margin. A value equal to the
 * margin is a failure (ties count against). Non-finite x[i] or a NaN margin is SB_EDATA;
 * n >= 1. */
int sb_stats_sign_test(const double *x, int n, double margin, struct sb_sign_test *out, struct sb_err *err);

/* The smallest count s in 0..n with sb_stats_sign_p(s, n) <= alpha, or n + 1 when none
 * (e.g. 41 for n = 64 at 0.025, 43 at 0.05/6). */
int sb_stats_sign_min_count(int n, double alpha);

/* The order-statistic rank of the distribution-free interval for the median of n values at
 * noncoverage alpha: the largest j in 1..n/2 with 2 P(Bin(n, 1/2) <= j - 1) <= alpha, or 0
 * when no j qualifies (then the interval is (-inf, +inf)). 20 for n = 64 at 0.0025; 0 for
 * n = 3 at 0.0025. */
int sb_stats_median_rank(int n, double alpha);

struct sb_median_interval {
	int n;
	int rank;      /* sb_stats_median_rank(n, alpha); 0: no finite interval */
	double median; /* sample median: the middle value, or the mean of the two middle ones */
	double lo, hi; /* x_(rank) and x_(n+1-rank), 1-based order statistics; -inf / +inf at rank 0 */
};
/* The median and its order-statistic interval at noncoverage alpha (0 < alpha < 1) of
 * x[0..n), n >= 1; x is not modified. Non-finite x[i] is SB_EDATA. */
int sb_stats_median_interval(const double *x, int n, double alpha, struct sb_median_interval *out, struct sb_err *err);

/* ---- epochs and budgets ---- */

/* PROTOCOL A4 read from per-epoch validation accuracies acc[0..n): training stops after
 * `patience` consecutive epochs without a strict improvement (patience <= 0: never);
 * returns the 0-based index of the first epoch of maximal accuracy among the epochs
 * run, and the number of epochs run in *epochs_run (may be NULL). n >= 1. */
int sb_stats_best_epoch(const double *acc, int n, int patience, int *epochs_run);
/* Index of the first maximum of acc[0..E) (budget E >= 1: the first E epochs). */
int sb_stats_best_within(const double *acc, int E);

/* Sign change along budgets: delta[0..K) are the mean differences at budgets E = 1..K.
 * Returns the smallest budget E such that delta at every budget E..K is < 0 (the
 * difference turns negative and stays negative); K + 1 when delta at K is >= 0
 * (censored: no sign change within the budgets). */
int sb_stats_sign_change(const double *delta, int K);
/* First budget with delta < 0 (K + 1 when none). */
int sb_stats_first_negative(const double *delta, int K);
/* PROTOCOL A8 target switch epoch over epochs 1..K (K >= 3; the study's K = 30):
 * 3 when mean(delta_1..3) <= 0; else the first e in 4..K-2 with delta_e, delta_e+1,
 * delta_e+2 all <= 0; else K + 1 (31 for K = 30, censored). */
int sb_stats_switch_epoch(const double *delta, int K);

struct sb_sign_change {
	int K;
	int sign_change; /* sb_stats_sign_change of the mean differences */
	int first_negative;
	int switch_epoch;    /* sb_stats_switch_epoch (A8) */
	int reversal;        /* the difference turns negative and stays (sign_change <= K) after
	                      * some earlier budget with delta > 0: a flip from + to -; 0 when
	                      * censored (it never turns negative for good) */
	double sc_lo, sc_hi; /* bootstrap percentile CI of sign_change */
	double sw_lo, sw_hi; /* bootstrap percentile CI of switch_epoch */
};
/* d is n seeds x K budgets (row-major): d[i*K + E-1] = paired difference of seed i at
 * budget E. The bootstrap resamples seeds (rows) with the index sets of
 * sb_stats_bootstrap_ci (same seed, stream and n give the same resamples, so the CI of
 * the mean at one budget equals sb_stats_bootstrap_ci of that column), recomputes
 * the mean differences at every budget and both budget statistics per resample.
 * switch_epoch and its CI need K >= 3 (else -1 and NaN). */
int sb_stats_sign_change_boot(const double *d, int n, int K, const struct sb_boot *cfg, struct sb_sign_change *out,
                              struct sb_err *err);

/* ---- the leave-one-task-out single-threshold rule (PROTOCOL A7) ---- */

#define SB_RULE_MIN_LABELLED 3 /* power floor: fewer sparse-helps tasks -> no rule */

struct sb_rule_fold {
	int has_rule;       /* 0 when the training fold offers no threshold (all values equal) */
	int predictor;      /* column of x */
	double threshold;   /* midpoint of two adjacent sorted unique training values */
	int direction;      /* +1: predict sparse when x > threshold; -1: when x < threshold */
	int train_correct;  /* training tasks whose label the rule reproduces */
	int predict_sparse; /* the rule's decision for the held-out task */
	double gain;        /* held-out best delta if predict_sparse, else 0 */
};

struct sb_rule_result {
	int n_tasks;
	double mean_gain;
	int wins, losses; /* held-out tasks with gain > 0 / gain < 0 */
	int non_softmax;  /* held-out decisions that chose a sparse method */
	int success;      /* mean_gain > 0 && wins > losses && non_softmax >= 1 */
};
/* Leave-one-task-out: for each held-out task t, fit on the other tasks one threshold on
 * one predictor: for each predictor p = 0..n_pred-1 (in order), each candidate threshold
 * (midpoints of the sorted unique training values, ascending), each direction (+1 then
 * -1), count the training tasks whose label equals the prediction; the first strict
 * maximiser in that order wins. A fold without candidates predicts softmax.
 * x is n_tasks x n_pred row-major; label[t] = 1 for sparse-helps tasks; best_delta[t]
 * is the task's best mean paired difference over the sparse methods. n_tasks >= 2;
 * non-finite inputs are SB_EDATA. folds may be NULL. */
int sb_stats_loto_rule(const double *x, int n_tasks, int n_pred, const int *label, const double *best_delta,
                       struct sb_rule_fold *folds, struct sb_rule_result *res, struct sb_err *err);

#endif
