/* test_a8.c — lib/a8 (PROTOCOL A8's extension arithmetic):
 *   - leave-one-group-out ridge and median predictions against NumPy
 *     (tests/golden/a8/ridge.txt, from tests/golden/a8/gen.py): unrounded to 1e-10
 *     relative, rounded exactly;
 *   - fit on every row and predict new rows (M3's switch map) against NumPy
 *     (tests/golden/a8/fitall.txt, from tests/golden/a8/gen_fitall.py), the same way;
 *   - the target switch epoch on hand-made trajectories;
 *   - the M1 and M2 verdicts on fixtures that pass, and on fixtures that fail each
 *     clause alone (the verdict must name exactly that clause).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "a8.h"

static void golden(void)
{
	const char *top = getenv("SB_TOP");
	char path[4096];
	snprintf(path, sizeof path, "%s/tests/golden/a8/ridge.txt", top ? top : ".");
	FILE *f = fopen(path, "r");
	if (!SB_CHECK(f != NULL, "open %s", path))
		return;
	char name[64];
	int n, p;
	while (fscanf(f, " case %63s %d %d", name, &n, &p) == 3) {
		double *X = malloc((size_t)n * p * sizeof *X + 8), *y = malloc((size_t)n * sizeof *y);
		int *fold = malloc((size_t)n * sizeof *fold), *pred = malloc((size_t)n * sizeof *pred);
		double *raw = malloc((size_t)n * sizeof *raw), *wraw = malloc((size_t)n * sizeof *wraw);
		int *wr = malloc((size_t)n * sizeof *wr);
		int ok = 1;
		for (int i = 0; i < n; i++) {
			ok &= fscanf(f, "%d %lf", &fold[i], &y[i]) == 2;
			for (int j = 0; j < p; j++)
				ok &= fscanf(f, "%lf", &X[(size_t)i * p + j]) == 1;
		}
		for (int pass = 0; pass < 2; pass++) {
			for (int i = 0; i < n; i++)
				ok &= fscanf(f, "%lf %d", &wraw[i], &wr[i]) == 2;
			struct sb_err e = {0};
			int rc = sb_a8_loo(X, y, fold, n, pass ? 0 : p, 1.0, pred, raw, &e);
			char nm[200];
			snprintf(nm, sizeof nm, "%s: %s leave-one-group-out predictions vs NumPy (n %d, p %d)", name,
			         pass ? "median" : "ridge", n, p);
			SB_CHECK(ok && rc == 0, "%s: fixture read and fit (rc %d %s)", nm, rc, e.msg);
			sb_check_close(nm, raw, wraw, (size_t)n, 1e-12, 1e-10);
			int bad = 0, first = -1;
			for (int i = 0; i < n; i++)
				if (pred[i] != wr[i]) {
					bad++;
					if (first < 0)
						first = i;
				}
			SB_CHECK(bad == 0, "%s: rounded and clipped to [3, 30] exactly (%d differ; first row %d: %d vs %d)",
			         nm, bad, first, first >= 0 ? pred[first] : 0, first >= 0 ? wr[first] : 0);
		}
		free(X);
		free(y);
		free(fold);
		free(pred);
		free(raw);
		free(wraw);
		free(wr);
	}
	fclose(f);
}

static void fitall(void)
{
	const char *top = getenv("SB_TOP");
	char path[4096];
	snprintf(path, sizeof path, "%s/tests/golden/a8/fitall.txt", top ? top : ".");
	FILE *f = fopen(path, "r");
	if (!SB_CHECK(f != NULL, "open %s", path))
		return;
	char name[64];
	int n, m, p, ncase = 0;
	while (fscanf(f, " case %63s %d %d %d", name, &n, &m, &p) == 4) {
		ncase++;
		double *X = malloc((size_t)n * p * sizeof *X + 8), *y = malloc((size_t)n * sizeof *y);
		double *Xn = malloc((size_t)m * p * sizeof *Xn + 8), *raw = malloc((size_t)m * sizeof *raw);
		double *wraw = malloc((size_t)m * sizeof *wraw), wmed, med;
		int *pred = malloc((size_t)m * sizeof *pred), *wr = malloc((size_t)m * sizeof *wr), wmr, mr;
		int ok = 1;
		for (int i = 0; i < n; i++) {
			ok &= fscanf(f, "%lf", &y[i]) == 1;
			for (int j = 0; j < p; j++)
				ok &= fscanf(f, "%lf", &X[(size_t)i * p + j]) == 1;
		}
		for (int i = 0; i < m * p; i++)
			ok &= fscanf(f, "%lf", &Xn[i]) == 1;
		for (int i = 0; i < m; i++)
			ok &= fscanf(f, "%lf %d", &wraw[i], &wr[i]) == 2;
		ok &= fscanf(f, "%lf %d", &wmed, &wmr) == 2;
		struct sb_err e = {0};
		int rc = sb_a8_fit_predict(X, y, n, p, 1.0, Xn, m, pred, raw, &e);
		char nm[200];
		snprintf(nm, sizeof nm, "%s: ridge fitted on all %d rows, %d new rows predicted, vs NumPy (p %d)", name,
		         n, m, p);
		SB_CHECK(ok && rc == 0, "%s: fixture read and fit (rc %d %s)", nm, rc, e.msg);
		/* the same arithmetic as the leave-one-out fits, so the same tolerance */
		sb_check_close(nm, raw, wraw, (size_t)m, 1e-12, 1e-10);
		int bad = 0;
		for (int i = 0; i < m; i++)
			bad += pred[i] != wr[i];
		SB_CHECK(bad == 0, "%s: rounded and clipped to [3, 30] exactly (%d differ)", nm, bad);
		rc = sb_a8_fit_predict(NULL, y, n, 0, 1.0, NULL, 1, &mr, &med, &e);
		SB_CHECK(rc == 0 && med == wmed && mr == wmr, "%s: the median baseline %g -> %d (NumPy %g -> %d)", name,
		         med, mr, wmed, wmr);
		free(X);
		free(y);
		free(Xn);
		free(raw);
		free(wraw);
		free(pred);
		free(wr);
	}
	fclose(f);
	SB_CHECK(ncase == 3, "fitall.txt holds 3 cases (%d read)", ncase);
	int pr;
	struct sb_err e = {0};
	SB_CHECK(sb_a8_fit_predict(NULL, NULL, 0, 0, 1.0, NULL, 1, &pr, NULL, &e) == SB_EDATA,
	         "fit on no rows is refused");
}

static void targets(void)
{
	struct {
		double d[8];
		int K, want;
		const char *what;
	} c[] = {
	    {{0.01, -0.01, -0.01, 0.2, 0.2, 0.2, 0.2, 0.2}, 8, 3, "mean of delta 1..3 <= 0: 3"},
	    {{0.01, 0.0, -0.01, 0.2, 0.2, 0.2, 0.2, 0.2}, 8, 3, "mean exactly 0: 3"},
	    {{0.02, 0.01, 0.01, -0.01, 0.0, -0.02, 0.1, 0.1}, 8, 4, "first run of three non-positive from 4"},
	    {{0.02, 0.01, 0.01, -0.01, 0.01, -0.02, -0.1, -0.1}, 8, 6, "a positive in between: 6"},
	    {{0.02, 0.01, 0.01, 0.01, 0.01, -0.02, -0.1, -0.1}, 8, 6, "last admissible start K-2 = 6"},
	    {{0.02, 0.01, 0.01, 0.01, 0.01, 0.01, -0.1, -0.1}, 8, 9, "censored: K + 1"},
	    {{0.02, 0.01, 0.01, 0, 0, 0, 0, 0}, 3, 4, "K = 3 with a benefit: censored at 4"},
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		int got = sb_a8_switch_target(c[i].d, c[i].K);
		SB_CHECK(got == c[i].want, "switch target: %s (got %d, want %d)", c[i].what, got, c[i].want);
	}
}

/* ---------------------------------------------------------------- M1 fixtures */

#define ND 10
#define NG (ND * 6)
struct m1fx {
	int ds[NG], arch[NG], tier[NG], pred[5 * NG];
	double target[NG];
	int cifar[ND];
};

/* every dataset has 6 groups (2 archs x 3 tiers); datasets 0, 1 are CIFAR; target 8
 * (a reversal) everywhere; baselines miss by 3, 3, 3, 2 (the metadata baseline is the
 * strongest); the mechanistic predictor misses by mech_err[d][g] */
static void m1_base(struct m1fx *f, int mech_err[ND][6])
{
	memset(f, 0, sizeof *f);
	f->cifar[0] = f->cifar[1] = 1;
	for (int d = 0; d < ND; d++)
		for (int g = 0; g < 6; g++) {
			int i = d * 6 + g;
			f->ds[i] = d;
			f->arch[i] = g / 3;
			f->tier[i] = g % 3;
			f->target[i] = 8;
			f->pred[i] = 8 + mech_err[d][g];
			f->pred[NG + i] = 11;
			f->pred[2 * NG + i] = 5;
			f->pred[3 * NG + i] = 11;
			f->pred[4 * NG + i] = 10;
		}
}

static void m1_case(const char *what, struct m1fx *f, int want_pass, int want_rev, int want_imp, int want_ci,
                    int want_share)
{
	struct sb_a8_m1_verdict v;
	struct sb_err e = {0};
	int K[NG];
	for (int i = 0; i < NG; i++)
		K[i] = 30;
	int rc = sb_a8_m1_verdict(NG, ND, 5, K, f->ds, f->cifar, f->arch, f->tier, f->target, f->pred, 260826,
	                          20000, &v, &e);
	SB_CHECK(rc == 0 && v.pass == want_pass && v.clause_reversals == want_rev && v.clause_improvement == want_imp &&
	             v.clause_ci == want_ci && v.clause_share == want_share,
	         "M1 verdict, %s: pass %d (want %d); clauses reversals %d/%d (%d datasets, %d archs, %d tiers), "
	         "improvement %d/%d (%.4f; MAE mech %.4f vs baseline %d %.4f), CI %d/%d ([%.4f, %.4f]), share "
	         "%d/%d (%.4f)",
	         what, v.pass, want_pass, v.clause_reversals, want_rev, v.rev_datasets_noncifar, v.rev_archs,
	         v.rev_tiers, v.clause_improvement, want_imp, v.improvement, v.macro_mae[0], v.best_baseline,
	         v.macro_mae[v.best_baseline], v.clause_ci, want_ci, v.ci_lo, v.ci_hi, v.clause_share, want_share,
	         v.max_share);
}

static void m1_verdicts(void)
{
	int err[ND][6];
	struct m1fx f;
	for (int d = 0; d < ND; d++)
		for (int g = 0; g < 6; g++)
			err[d][g] = 1;
	m1_base(&f, err);
	m1_case("passing fixture (mech misses by 1, the strongest baseline by 2)", &f, 1, 1, 1, 1, 1);
	SB_CHECK(fabs(f.target[0] - 8) == 0, "fixture sanity");

	/* reversals: only two non-CIFAR datasets keep a reversal (the others' targets 3, 31) */
	m1_base(&f, err);
	for (int i = 0; i < NG; i++)
		if (f.ds[i] >= 4) {
			double t = f.ds[i] % 2 ? 3 : 31;
			for (int m = 0; m < 5; m++)
				f.pred[m * NG + i] += (int)(t - f.target[i]);
			f.target[i] = t;
		}
	m1_case("reversals in only 2 non-CIFAR datasets", &f, 0, 0, 1, 1, 1);
	/* reversals in one architecture only */
	m1_base(&f, err);
	for (int i = 0; i < NG; i++)
		if (f.arch[i] == 1) {
			for (int m = 0; m < 5; m++)
				f.pred[m * NG + i] += 23;
			f.target[i] = 31;
		}
	m1_case("reversals in one architecture only", &f, 0, 0, 1, 1, 1);
	/* reversals in one tier only */
	m1_base(&f, err);
	for (int i = 0; i < NG; i++)
		if (f.tier[i] != 0) {
			for (int m = 0; m < 5; m++)
				f.pred[m * NG + i] -= 5;
			f.target[i] = 3;
		}
	m1_case("reversals in one tier only", &f, 0, 0, 1, 1, 1);

	/* improvement 8.3% < 10%: mech misses by 2 except one group per dataset (1) */
	for (int d = 0; d < ND; d++)
		for (int g = 0; g < 6; g++)
			err[d][g] = g == 0 ? 1 : 2;
	m1_base(&f, err);
	m1_case("macro-MAE improvement 8.3%", &f, 0, 1, 0, 1, 1);

	/* CI: nine datasets improve by 1, one worsens by 6: mean -0.3 (15%), share 1/3, CI crosses 0 */
	for (int d = 0; d < ND; d++)
		for (int g = 0; g < 6; g++)
			err[d][g] = d == 9 ? 8 : 1;
	m1_base(&f, err);
	m1_case("bootstrap CI not entirely below 0", &f, 0, 1, 1, 0, 1);

	/* share: one dataset improves by 2, nine by 1/6: share 2/3.5 = 0.571 */
	for (int d = 0; d < ND; d++)
		for (int g = 0; g < 6; g++)
			err[d][g] = d == 0 ? 0 : (g == 0 ? 1 : 2);
	m1_base(&f, err);
	m1_case("largest single-dataset share 0.571", &f, 0, 1, 1, 1, 0);
}

/* ---------------------------------------------------------------- M2 fixtures */

#define NU 30
static void m2_case(const char *what, const double *dn, const double *mc, const double *sm, const double *fd,
                    const double *fm, int want_pass, int wm, int wb, int wf, int wben)
{
	int arch[NU], tier[NU];
	for (int i = 0; i < NU; i++) {
		arch[i] = i % 2;
		tier[i] = (i / 2) % 3;
	}
	struct sb_a8_m2_verdict v;
	struct sb_err e = {0};
	int rc = sb_a8_m2_verdict(NU, 3, dn, mc, sm, fd, fm, arch, tier, 260827, 20000, &v, &e);
	SB_CHECK(rc == 0 && v.pass == want_pass && v.clause_median == wm && v.clause_bounds == wb &&
	             v.clause_final == wf && v.clause_benefit == wben,
	         "M2 verdict, %s: pass %d (want %d); median %d/%d (%.4f), bounds %d/%d (vs dense [%.3f, %.3f], vs "
	         "simple %d [%.3f, %.3f]), final %d/%d (%.4f [%.4f, %.4f]), benefit %d/%d (archs %.3f %.3f)",
	         what, v.pass, want_pass, v.clause_median, wm, v.median_reduction, v.clause_bounds, wb, v.lo_vs_dense,
	         v.hi_vs_dense, v.best_simple, v.lo_vs_simple, v.hi_vs_simple, v.clause_final, wf, v.final_diff,
	         v.final_lo, v.final_hi, v.clause_benefit, wben, v.benefit_arch[0], v.benefit_arch[1]);
}

static void m2_verdicts(void)
{
	double dn[NU], mc[NU], sm[3 * NU], fd[NU], fm[NU];
	for (int i = 0; i < NU; i++) {
		dn[i] = 10;
		mc[i] = 7;
		sm[i] = 9;
		sm[NU + i] = 9.5;
		sm[2 * NU + i] = 9;
		fd[i] = 0.8;
		fm[i] = 0.8 + (i % 3 - 1) * 0.001;
	}
	m2_case("passing fixture", dn, mc, sm, fd, fm, 1, 1, 1, 1, 1);
	double mc2[NU], sm2[3 * NU], fm2[NU];
	for (int i = 0; i < NU; i++) {
		mc2[i] = 9.5;
		sm2[i] = sm2[NU + i] = sm2[2 * NU + i] = 9.8;
	}
	m2_case("median reduction 5%", dn, mc2, sm2, fd, fm, 0, 0, 1, 1, 1);
	memcpy(sm2, sm, sizeof sm2);
	for (int i = 0; i < NU; i++)
		sm2[NU + i] = 6.5;
	m2_case("a simple schedule beats it", dn, mc, sm2, fd, fm, 0, 1, 0, 1, 1);
	for (int i = 0; i < NU; i++)
		fm2[i] = 0.79;
	m2_case("final accuracy 0.01 lower", dn, mc, sm, fd, fm2, 0, 1, 1, 0, 1);
	for (int i = 0; i < NU; i++) {
		mc2[i] = i % 2 ? 10 : 7;
		sm2[i] = sm2[NU + i] = sm2[2 * NU + i] = 9.9;
	}
	m2_case("no benefit in local_hybrid", dn, mc2, sm2, fd, fm, 0, 1, 1, 1, 0);
	SB_CHECK(sb_a8_time_to_target((double[]){0.5, 0.7, 0.76, 0.8}, 4, 0.8) == 3,
	         "time to target: the first epoch with acc >= 0.95 x 0.8 = 0.76 is 3");
	SB_CHECK(sb_a8_time_to_target((double[]){0.5, 0.7, 0.75}, 3, 0.8) == 4, "time to target: never reached: K + 1");
}

/* M1's reversal clause judges each group against its own K: 16 groups of 4 non-CIFAR tasks,
 * both architectures, 2 tiers, target 8 with K 10 reverse; one more group with K 5 (a shorter
 * budget) must not make the others' targets count against its K */
static void m1_own_k(void)
{
	enum { N = 17 };
	int ds[N], cifar[4] = {0}, arch[N], tier[N], K[N], pred[5 * N];
	double target[N];
	for (int i = 0; i < N; i++) {
		ds[i] = i < 16 ? i / 4 : 0;
		arch[i] = i % 2;
		tier[i] = (i / 2) % 2;
		K[i] = i < 16 ? 10 : 5;
		target[i] = i < 16 ? 8 : 6; /* the short group: censored (6 = K + 1) */
		for (int m = 0; m < 5; m++)
			pred[m * N + i] = (int)target[i];
	}
	struct sb_a8_m1_verdict v;
	struct sb_err e = {0};
	int rc = sb_a8_m1_verdict(N, 4, 5, K, ds, cifar, arch, tier, target, pred, 1, 100, &v, &e);
	SB_CHECK(rc == 0 && v.clause_reversals && v.rev_datasets_noncifar == 4 && v.rev_archs == 2 && v.rev_tiers == 2,
	         "M1 reversals with a short-budget group: each group against its own K (rc %d: clause %d, %d datasets, "
	         "%d archs, %d tiers; want 1, 4, 2, 2)",
	         rc, v.clause_reversals, v.rev_datasets_noncifar, v.rev_archs, v.rev_tiers);
}

int main(void)
{
	m1_own_k();
	golden();
	fitall();
	targets();
	m1_verdicts();
	m2_verdicts();
	return sb_test_done();
}
