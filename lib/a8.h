/* a8.h — the arithmetic of PROTOCOL A8's extension analyses (pure, no I/O), used by
 * aggregate/sb-a8.c and tested by tests/unit/test_a8.c (against NumPy fixtures and
 * verdict fixtures). docs/sb-a8.md defines every quantity.
 */
#ifndef SB_A8_H
#define SB_A8_H

#include <stdint.h>

#include "err.h"

/* M1's target switch epoch from delta[0..K) (delta[e-1] = mean paired top-k - dense
 * validation accuracy at epoch e): 3 if mean(delta_1..3) <= 0; else the first e in
 * 4..K-2 with delta_e, delta_e+1, delta_e+2 all <= 0; else K + 1 (censored). K >= 3. */
int sb_a8_switch_target(const double *delta, int K);

/* Ridge regression with standardised features and a centred target: on the training
 * rows, each column is standardised by its mean and population sd (an sd of 0 counts
 * as 1), y is centred by its mean, and beta solves (Z'Z + lambda I) beta = Z'(y - ybar)
 * (Cholesky). A prediction is ybar + sum_j beta_j (x_j - mu_j) / sd_j. */
struct sb_ridge {
	int p;
	double lambda, ybar;
	double *mu, *sd, *beta;
};
int sb_ridge_fit(struct sb_ridge *r, const double *X, const double *y, const int *use, int n, int p, double lambda,
                 struct sb_err *err);
double sb_ridge_predict(const struct sb_ridge *r, const double *x);
void sb_ridge_free(struct sb_ridge *r);

/* Rounded (to nearest, halves to even, as numpy.rint) and clipped to [lo, hi]. */
int sb_a8_round_clip(double v, int lo, int hi);

/* Leave-one-group-out: for each distinct fold[i], fit on the rows of the other folds
 * (p = 0: the median of their y, numpy.median) and predict the fold's rows, rounded
 * and clipped to [3, 30]; pred[i] the integer prediction, raw[i] (may be NULL) the
 * unrounded one. */
int sb_a8_loo(const double *X, const double *y, const int *fold, int n, int p, double lambda, int *pred, double *raw,
              struct sb_err *err);

/* Fit on every row of (X, y) (n rows, p features; p = 0: the median of y, numpy.median)
 * and predict the m rows of Xnew: pred[i] rounded and clipped to [3, 30], raw[i] (may be
 * NULL) unrounded. PROTOCOL A8 M3's switch map: the M1 predictors fitted on all discovery
 * groups, applied to the confirmation tasks. */
int sb_a8_fit_predict(const double *X, const double *y, int n, int p, double lambda, const double *Xnew, int m,
                      int *pred, double *raw, struct sb_err *err);

/* M1's verdict. Groups i < n: dataset ds[i] < nd, arch[i] (0/1), tier[i] (0..2),
 * target[i] (a reversal: 4 <= target <= K, K the epochs of the trajectories); pred[m * n + i] the LOO prediction of predictor m (m = 0 the mechanistic
 * ridge, 1..npred-1 the baselines). cifar[d] marks the CIFAR datasets. */
struct sb_a8_m1_verdict {
	/* clause 1: reversals (target in 4..30) */
	int rev_datasets_noncifar, rev_archs, rev_tiers, clause_reversals;
	/* clause 2 */
	double macro_mae[8]; /* per predictor: mean over datasets of the dataset's mean |pred - target| */
	int best_baseline;   /* the predictor (1..) with the lowest macro-MAE (first on ties) */
	double improvement;  /* (MAE_best - MAE_mech) / MAE_best (NaN when MAE_best = 0) */
	int clause_improvement;
	/* clause 3: percentile bootstrap CI over datasets of mean(MAE_mech,d - MAE_best,d) */
	double diff, ci_lo, ci_hi;
	int clause_ci;
	/* clause 4: max over datasets of (MAE_best,d - MAE_mech,d) / sum_d (...) */
	double max_share;
	int max_share_dataset, clause_share;
	int pass;
};
int sb_a8_m1_verdict(int n, int nd, int npred, int K, const int *ds, const int *cifar, const int *arch, const int *tier,
                     const double *target, const int *pred, uint64_t seed, int resamples,
                     struct sb_a8_m1_verdict *v, struct sb_err *err);

/* M2: time to target of one run: the first epoch e (1-based) of acc[0..K) with
 * acc >= 0.95 * dense_final, else K + 1. */
int sb_a8_time_to_target(const double *acc, int K, double dense_final);

/* M2's verdict over n paired units (group x seed): ttt_dense[i], ttt_mech[i],
 * ttt_simple[s * n + i] for the nsimple simple schedules, final accuracies of the dense
 * and the mechanistic runs, arch[i], tier[i]. */
struct sb_a8_m2_verdict {
	double median_reduction; /* median over units of (ttt_dense - ttt_mech) / ttt_dense */
	int clause_median;
	int best_simple;         /* the simple schedule with the largest mean ttt reduction vs dense */
	double lo_vs_dense, hi_vs_dense, lo_vs_simple, hi_vs_simple; /* CIs of mean ttt reductions */
	int clause_bounds;
	double final_diff, final_lo, final_hi; /* mean final accuracy mech - dense and its CI */
	int clause_final;
	double benefit_arch[2], benefit_tier[3]; /* mean (ttt_dense - ttt_mech) */
	int clause_benefit;
	int pass;
};
int sb_a8_m2_verdict(int n, int nsimple, const double *ttt_dense, const double *ttt_mech, const double *ttt_simple,
                     const double *final_dense, const double *final_mech, const int *arch, const int *tier,
                     uint64_t seed, int resamples, struct sb_a8_m2_verdict *v, struct sb_err *err);

#endif
