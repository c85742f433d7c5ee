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
 * target[i] (a reversal: 4 <= target <= K[i], K[i] the epochs of group i's trajectories); pred[m * n + i] the LOO prediction of
 * predictor m (m = 0 the mechanistic ridge, 1..npred-1 the baselines). cifar[d] marks the CIFAR datasets. */
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
int sb_a8_m1_verdict(int n, int nd, int npred, const int *K, const int *ds, const int *cifar, const int *arch, const int *tier,
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

/* ---- N3-A: the synthetic intervention assay's inference (docs/n3a-spec.md section 3) ----
 *
 * Per-seed contrasts of validation cross-entropies (CE) between arms, one sign test with a
 * margin and one order-statistic median interval per (component, architecture), the
 * intersection-union p's (max over components), two Holm families and the verdict. The
 * numbers of the registered design are fixed here (they are not options). */
#define SB_N3A_MARGIN 0.005 /* delta: a contrast must exceed it (equal counts against) */
#define SB_N3A_ALPHA 0.05   /* family-wise level of both Holm families */
#define SB_N3A_NCOMP 20     /* 8 context + 12 identification components */
#define SB_N3A_ALPHA_INTERVAL (SB_N3A_ALPHA / SB_N3A_NCOMP) /* 0.0025: each median interval */
#define SB_N3A_SEEDS 64                                     /* the registered design: seeds 64000..64063 */
#define SB_N3A_SEED0 64000

enum { SB_N3A_ARCHS = 2, SB_N3A_RS = 4, SB_N3A_STEPS = 5, SB_N3A_PARENTS = 2, SB_N3A_FORK_ARMS = 5, SB_N3A_HYPS = 6 };
extern const char *const sb_n3a_arch_names[SB_N3A_ARCHS]; /* "query", "transformer" */
extern const int sb_n3a_r[SB_N3A_RS];                     /* 1, 4, 16, 24 */
/* the main-trajectory steps the analysis reads: Stage 1's 32, 64, 128 (early), 768, 1024
 * (late); 128 and 768 are also the parents (their S CE is the forks' denominator) */
extern const int sb_n3a_steps[SB_N3A_STEPS];
extern const int sb_n3a_parents[SB_N3A_PARENTS];          /* 128, 768 */
extern const char sb_n3a_fork_arms[SB_N3A_FORK_ARMS + 1]; /* "SLPGN" */
#define SB_N3A_FORK_STEP 32                               /* forks are read at relative step 32 */
/* Main arms D = 0, S = 1; fork arms in sb_n3a_fork_arms' order. Index of seed i (0..n-1) of
 * main CE[arch][r][arm][step] and of fork CE[arch][r][parent][arm]: */
#define SB_N3A_MAIN(a, r, arm, k, i, n)                                                                                \
	(((((size_t)(a)*SB_N3A_RS + (r)) * 2 + (arm)) * SB_N3A_STEPS + (k)) * (size_t)(n) + (i))
#define SB_N3A_FORK(a, r, p, arm, i, n)                                                                                \
	(((((size_t)(a)*SB_N3A_RS + (r)) * SB_N3A_PARENTS + (p)) * SB_N3A_FORK_ARMS + (arm)) * (size_t)(n) + (i))

struct sb_a8_n3a_data {
	int n;                 /* seeds (>= 1) */
	const double *main_ce; /* SB_N3A_MAIN-indexed, 2 x 4 x 2 x 5 x n */
	const double *fork_ce; /* SB_N3A_FORK-indexed, 2 x 4 x 2 x 5 x n */
	const long long *seed; /* the seeds' numbers, for messages (may be NULL: indices) */
	int one_arch;          /* 0: both architectures, the whole analysis; 1 + a: only arch a's ten
	                        * components (an interim look: the other arch's CEs are not read, no
	                        * families, no verdict: res->verdict stays NULL) */
};

/* One component: the per-seed contrast of one architecture. */
struct sb_a8_n3a_comp {
	int hyp;          /* -1: a Stage-1 (context) component; 0..5: H1..H6 */
	int arch;         /* 0 query, 1 transformer */
	int r;            /* 16 or 24; 0 for the interactions I_B, I_F */
	const char *name; /* early_benefit, late_cost, B768, I_B, F768, I_F */
	int n, above;     /* seeds; seeds with contrast > margin */
	int rank;         /* order-statistic rank of the interval (0: infinite) */
	double median, lo, hi, p;
	int excluded; /* the interval's upper end <= margin: the required direction is excluded */
};

/* Components in this order: context r = 16 (query early_benefit, query late_cost,
 * transformer early_benefit, transformer late_cost), context r = 24 (the same), then H1..H6
 * (query, transformer each): H1 B768 r16, H2 B768 r24, H3 I_B, H4 F768 r16, H5 F768 r24, H6 I_F. */
struct sb_a8_n3a {
	struct sb_a8_n3a_comp comp[SB_N3A_NCOMP];
	double density_p[2], density_holm[2];             /* r = 16, 24: max of the four p's; Holm over the two */
	int density_excluded[2];                          /* some of the density's four components is excluded */
	double hyp_p[SB_N3A_HYPS], hyp_holm[SB_N3A_HYPS]; /* max over the two archs; Holm over six */
	int context_pass;                                 /* some density's Holm p <= alpha */
	int backward_supported;                           /* context_pass and H1, H2, H3 Holm <= alpha */
	int forward_supported;                            /* context_pass and H4, H5, H6 Holm <= alpha */
	int killed_context;                               /* 3a: both densities have an excluded context component */
	int backward_excluded, forward_excluded;          /* some component of H1-H3 / of H4-H6 excluded */
	int killed_mechanism;                             /* 3b: both */
	const char *verdict; /* BACKWARD_SUPPORTED_SYNTHETIC, FORWARD_ONLY_SUPPORTED_SYNTHETIC,
	                      * KILLED_FOR_REGISTERED_EPSILON or INCONCLUSIVE (first that applies) */
};
extern const char *const sb_a8_n3a_hyp_desc[SB_N3A_HYPS]; /* "B(768) at r = 16", ... */

/* The whole inference from the CEs: every CE finite, the denominators (D at the five steps,
 * S at the parents) > 0, else SB_EDATA naming the unit (no decision). With d->one_arch, only
 * that architecture's components (comp[] of the other arch left zero, n = 0). */
int sb_a8_n3a(const struct sb_a8_n3a_data *d, struct sb_a8_n3a *res, struct sb_err *err);

/* The families and the verdict from comp[].p and comp[].excluded alone (sb_a8_n3a's last
 * step; also applied to the published components to check their Holm p's and verdict). */
int sb_a8_n3a_decide(struct sb_a8_n3a *res, struct sb_err *err);

/* Whether the verdict is already fixed while some components are unknown (an interim look
 * with one architecture complete): known[c] marks the known components of comp[]; an unknown
 * one is treated as free (any p in [0, 1], excluded or not, independently). *verdict is the
 * verdict every such completion gives, or NULL when some completion gives another (treating
 * p and exclusion as free may say NULL where linked values would not: never the reverse).
 * Holm's adjusted p's never fall when a raw p grows and a density's or hypothesis' p is a
 * maximum, so unknown p's at 0 and at 1 bound them. *context_possible: context_pass can
 * still hold. */
int sb_a8_n3a_determined(const struct sb_a8_n3a_comp comp[SB_N3A_NCOMP], const int known[SB_N3A_NCOMP],
                         const char **verdict, int *context_possible, struct sb_err *err);

/* The published outcome (RUN/outputs/SCIENTIFIC_DECISION.json as docs/n3a-spec.md section 4
 * prints it), in the component order above: counts of 64, medians, intervals, the excluded
 * flags, and each p as printed with half a unit of its last printed digit (0 when exact). */
struct sb_a8_n3a_pub {
	int above;
	double median, lo, hi;
	int excluded;
	const char *p_text;
	double p, p_tol;
};
struct sb_a8_n3a_pub_family {
	const char *p_text, *holm_text;
	double p, p_tol, holm, holm_tol;
};
extern const struct sb_a8_n3a_pub sb_a8_n3a_published[SB_N3A_NCOMP];
extern const struct sb_a8_n3a_pub_family sb_a8_n3a_published_density[2], sb_a8_n3a_published_hyp[SB_N3A_HYPS];
#define SB_A8_N3A_PUBLISHED_VERDICT "KILLED_FOR_REGISTERED_EPSILON"

#endif
