/* test_a8_n3a.c — lib/a8's N3-A inference (docs/n3a-spec.md section 3):
 *   - the published outcome (section 4): the published counts (#> 0.005 of 64) reproduce the
 *     published p's, the published intervals the excluded flags, and those the density and
 *     hypothesis p's, both Holm families and the verdict, each to the printed precision;
 *   - the study's planted verdict fixtures (BACKWARD_SUPPORTED; KILLED; context fails) and
 *     scenarios of ours (FORWARD_ONLY, INCONCLUSIVE, the context gate, too few seeds, a
 *     single failing hypothesis), built in memory for 64 and for fewer seeds;
 *   - the "no decision" refusals: non-finite CE, non-positive parent or Stage-1 denominator;
 *   - sb_a8_n3a_determined (the interim's "verdict whatever the rest"): the published outcome
 *     with one architecture known, planted scenarios, and 3,000 random component sets and
 *     known-masks against brute force over completions of the unknown components.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "a8.h"
#include "stats.h"

/* ---- the published outcome ---- */

static int within(double got, double want, double tol)
{
	return fabs(got - want) <= tol;
}

static void published(void)
{
	struct sb_a8_n3a res;
	memset(&res, 0, sizeof res);
	int bad_p = 0, bad_ex = 0;
	for (int c = 0; c < SB_N3A_NCOMP; c++) {
		const struct sb_a8_n3a_pub *pb = &sb_a8_n3a_published[c];
		double p = sb_stats_sign_p(pb->above, 64);
		if (!within(p, pb->p, pb->p_tol)) {
			bad_p++;
			SB_CHECK(0, "component %d: %d/64 gives p %.17g, published %s", c, pb->above, p, pb->p_text);
		}
		int ex = pb->hi <= SB_N3A_MARGIN;
		if (ex != pb->excluded) {
			bad_ex++;
			SB_CHECK(0, "component %d: interval upper end %g vs margin gives excluded %d, published %d", c,
			         pb->hi, ex, pb->excluded);
		}
		res.comp[c].p = p;
		res.comp[c].excluded = ex;
	}
	SB_CHECK(bad_p == 0, "published counts reproduce the 20 published sign-test p's to the printed precision");
	SB_CHECK(bad_ex == 0, "published intervals reproduce the 20 published excluded flags (upper end <= 0.005)");
	struct sb_err err = {0};
	int rc = sb_a8_n3a_decide(&res, &err);
	int ok = rc == 0;
	for (int d = 0; d < 2; d++) {
		const struct sb_a8_n3a_pub_family *f = &sb_a8_n3a_published_density[d];
		ok &= SB_CHECK(within(res.density_p[d], f->p, f->p_tol) &&
		                   within(res.density_holm[d], f->holm, f->holm_tol),
		               "density r = %d: p %.17g (published %s), Holm %.17g (published %s)", d ? 24 : 16,
		               res.density_p[d], f->p_text, res.density_holm[d], f->holm_text);
	}
	for (int h = 0; h < SB_N3A_HYPS; h++) {
		const struct sb_a8_n3a_pub_family *f = &sb_a8_n3a_published_hyp[h];
		ok &= SB_CHECK(within(res.hyp_p[h], f->p, f->p_tol) && within(res.hyp_holm[h], f->holm, f->holm_tol),
		               "H%d %s: p %.17g (published %s), Holm %.17g (published %s)", h + 1,
		               sb_a8_n3a_hyp_desc[h], res.hyp_p[h], f->p_text, res.hyp_holm[h], f->holm_text);
	}
	SB_CHECK(res.hyp_holm[3] == 6 * ldexp(1, -64) && res.hyp_holm[4] == 6 * ldexp(1, -64),
	         "H4, H5 Holm = 6 x 2^-64 = 3.2526065174565133e-19 exactly (got %.17g)", res.hyp_holm[3]);
	SB_CHECK(ok && !strcmp(res.verdict, SB_A8_N3A_PUBLISHED_VERDICT) && !res.context_pass && res.killed_context &&
	             res.killed_mechanism && res.backward_excluded && res.forward_excluded,
	         "published components give the published verdict %s (got %s), context_pass false, both kill clauses",
	         SB_A8_N3A_PUBLISHED_VERDICT, res.verdict);
}

/* ---- scenarios built in memory ---- */

/* CE of a main unit (arm 0 D, 1 S) at step index k and of a fork (arm in SLPGN) at parent p */
struct scen {
	const char *name;
	double (*main)(int a, int r, int arm, int k, int i);
	double (*fork)(int a, int r, int p, int arm, int i);
};

static double *mce, *fce;
static int run(const struct scen *s, int n, struct sb_a8_n3a *res, struct sb_err *err)
{
	size_t nm = (size_t)SB_N3A_ARCHS * SB_N3A_RS * 2 * SB_N3A_STEPS * n;
	size_t nf = (size_t)SB_N3A_ARCHS * SB_N3A_RS * SB_N3A_PARENTS * SB_N3A_FORK_ARMS * n;
	free(mce);
	free(fce);
	mce = malloc(nm * sizeof *mce);
	fce = malloc(nf * sizeof *fce);
	for (int a = 0; a < SB_N3A_ARCHS; a++)
		for (int r = 0; r < SB_N3A_RS; r++)
			for (int i = 0; i < n; i++) {
				for (int arm = 0; arm < 2; arm++)
					for (int k = 0; k < SB_N3A_STEPS; k++)
						mce[SB_N3A_MAIN(a, r, arm, k, i, n)] =
						    s->main(a, sb_n3a_r[r], arm, sb_n3a_steps[k], i);
				for (int p = 0; p < SB_N3A_PARENTS; p++)
					for (int arm = 0; arm < SB_N3A_FORK_ARMS; arm++)
						fce[SB_N3A_FORK(a, r, p, arm, i, n)] = s->fork(
						    a, sb_n3a_r[r], sb_n3a_parents[p], sb_n3a_fork_arms[arm], i);
			}
	struct sb_a8_n3a_data d = {.n = n, .main_ce = mce, .fork_ce = fce};
	return sb_a8_n3a(&d, res, err);
}

/* the study's planted main trajectories: D = 1; S = 0.98 at t <= 128, 1.02 later */
static double main_ctx(int a, int r, int arm, int t, int i)
{
	return arm == 0 ? 1.0 : t <= 128 ? 0.98 : 1.02;
}
static double main_flat(int a, int r, int arm, int t, int i)
{
	return 1.0;
}
/* ours: the planted context at r = 16 only; r = 24 flat (its context components excluded) */
static double main_r16(int a, int r, int arm, int t, int i)
{
	return r == 24 ? 1.0 : main_ctx(a, r, arm, t, i);
}
/* G and L = 0.96 at r >= 16, parent 768; else every fork arm 1 */
static double fork_backward(int a, int r, int p, int arm, int i)
{
	return (arm == 'G' || arm == 'L') && r >= 16 && p == 768 ? 0.96 : 1.0;
}
/* G and L = 1.04 everywhere */
static double fork_killed(int a, int r, int p, int arm, int i)
{
	return arm == 'G' || arm == 'L' ? 1.04 : 1.0;
}
static double fork_flat(int a, int r, int p, int arm, int i)
{
	return 1.0;
}
/* ours: only L helps (at r >= 16, parent 768): B = 0 everywhere (excluded), F supported */
static double fork_forward(int a, int r, int p, int arm, int i)
{
	return arm == 'L' && r >= 16 && p == 768 ? 0.96 : 1.0;
}
/* ours: B = 0 (excluded); L helps at r >= 16, parent 768 in half the seeds only: F neither
 * supported nor excluded */
static double fork_inconclusive(int a, int r, int p, int arm, int i)
{
	return arm == 'L' && r >= 16 && p == 768 && i % 2 ? 0.96 : 1.0;
}
/* ours: the backward planted fixture with B at r = 24 absent in the transformer (H2 fails) */
static double fork_h2(int a, int r, int p, int arm, int i)
{
	if (arm == 'G' && r == 24 && a == 1)
		return 1.0;
	return fork_backward(a, r, p, arm, i);
}

/* ours: B(p) = (0.005 - 0) / 1 = 0.005 exactly (the margin) for every seed, r and parent */
static double fork_tie(int a, int r, int p, int arm, int i)
{
	return arm == 'G' ? 0.0 : arm == 'N' ? 0.005 : 1.0;
}

static void expect(const char *what, const struct scen *s, int n, const char *verdict, int context_pass)
{
	struct sb_a8_n3a res;
	struct sb_err err = {0};
	int rc = run(s, n, &res, &err);
	SB_CHECK(rc == 0 && !strcmp(res.verdict, verdict) && res.context_pass == context_pass,
	         "%s, %d seeds: %s (got %s), context_pass %d (got %d) [rc %d %s]", what, n, verdict,
	         rc ? "-" : res.verdict, context_pass, res.context_pass, rc, err.msg);
}

static void scenarios(void)
{
	struct scen backward = {"backward", main_ctx, fork_backward}, killed = {"killed", main_ctx, fork_killed},
	            nocontext = {"context fails", main_flat, fork_flat}, forward = {"forward", main_ctx, fork_forward},
	            inconcl = {"inconclusive", main_ctx, fork_inconclusive},
	            gated = {"gated", main_flat, fork_backward}, h2 = {"h2", main_ctx, fork_h2};
	expect("planted: D = 1, S 0.98 -> 1.02, G, L = 0.96 at r >= 16, parent 768", &backward, 64,
	       "BACKWARD_SUPPORTED_SYNTHETIC", 1);
	expect("planted: same main, G, L = 1.04 everywhere", &killed, 64, "KILLED_FOR_REGISTERED_EPSILON", 1);
	expect("planted: all CE = 1 (context fails; every contrast 0, so excluded)", &nocontext, 64,
	       "KILLED_FOR_REGISTERED_EPSILON", 0);
	expect("ours: only L helps (forward placement)", &forward, 64, "FORWARD_ONLY_SUPPORTED_SYNTHETIC", 1);
	expect("ours: B = 0, F in half the seeds", &inconcl, 64, "INCONCLUSIVE", 1);
	struct scen onegate = {"one gate", main_r16, fork_inconclusive};
	expect("ours: context at r = 16 only (one gate excluded, not both), F in half the seeds", &onegate, 64,
	       "INCONCLUSIVE", 1);
	expect("ours: G, L help but there is no context (gate)", &gated, 64, "KILLED_FOR_REGISTERED_EPSILON", 0);
	expect("ours: backward fixture, H2 absent in the transformer", &h2, 64, "FORWARD_ONLY_SUPPORTED_SYNTHETIC", 1);
	/* the fixtures' seed count (tests/fixtures/a8/n3a: 10) decides as 64 do */
	expect("planted backward", &backward, 10, "BACKWARD_SUPPORTED_SYNTHETIC", 1);
	expect("planted killed", &killed, 10, "KILLED_FOR_REGISTERED_EPSILON", 1);
	/* too few seeds: p = 2^-n, no finite interval below 10 seeds */
	expect("planted backward (p = 1/8: nothing significant, nothing excludable)", &backward, 3, "INCONCLUSIVE", 0);
	expect("planted killed (no finite interval: nothing excluded)", &killed, 9, "INCONCLUSIVE", 1);

	/* the numbers of the planted backward fixture at 64 seeds */
	struct sb_a8_n3a res;
	struct sb_err err = {0};
	run(&backward, 64, &res, &err);
	const struct sb_a8_n3a_comp *c = res.comp;
	double two64 = ldexp(1, -64);
	SB_CHECK(c[0].hyp == -1 && c[0].arch == 0 && c[0].r == 16 && !strcmp(c[0].name, "early_benefit") &&
	             c[3].arch == 1 && !strcmp(c[3].name, "late_cost") && c[4].r == 24,
	         "component order: context r16 (query E, C, transformer E, C), then r24");
	SB_CHECK(fabs(c[0].median - 0.02) < 1e-15 && c[0].above == 64 && c[0].p == two64 && c[0].rank == 20 &&
	             c[0].lo == c[0].median && c[0].hi == c[0].median && !c[0].excluded,
	         "early benefit = (1 - 0.98) / 1 = 0.02 for all 64 seeds: p 2^-64, rank 20 (median %.17g, p %g)",
	         c[0].median, c[0].p);
	SB_CHECK(fabs(c[1].median - 0.02) < 1e-15, "late cost = (1.02 - 1) / 1 = 0.02 (%.17g)", c[1].median);
	SB_CHECK(res.density_p[0] == two64 && res.density_holm[0] == 2 * two64 && res.density_holm[1] == 2 * two64,
	         "density p = max of four = 2^-64, Holm over two = 2^-63 (%g)", res.density_holm[0]);
	SB_CHECK(c[8].hyp == 0 && c[8].arch == 0 && c[8].r == 16 && !strcmp(c[8].name, "B768") && c[9].arch == 1 &&
	             c[10].hyp == 1 && c[10].r == 24 && c[12].hyp == 2 && c[12].r == 0 && !strcmp(c[12].name, "I_B") &&
	             !strcmp(c[14].name, "F768") && !strcmp(c[18].name, "I_F"),
	         "component order: H1 (query, transformer) .. H6");
	SB_CHECK(fabs(c[8].median - 0.04 / 1.02) < 1e-15 && fabs(c[12].median - 0.04 / 1.02) < 1e-15,
	         "B(768) = (1 - 0.96) / 1.02 = %.6f; I_B = mean_{16,24} B - mean_{1,4} B = the same (%.17g, %.17g)",
	         0.04 / 1.02, c[8].median, c[12].median);
	SB_CHECK(res.hyp_holm[0] == 6 * two64 && res.hyp_holm[5] == 6 * two64, "every hypothesis Holm 6 x 2^-64");
	/* a single hypothesis failing moves only its p (the fixed order) */
	run(&h2, 64, &res, &err);
	SB_CHECK(
	    res.hyp_p[1] == 1 && res.hyp_p[0] == two64 && res.hyp_p[2] == two64 && res.hyp_holm[1] == 1 &&
	        res.comp[11].above == 0 && res.comp[10].above == 64,
	    "H2 absent in the transformer: H2 p = max(2^-64, 1) = 1, H1 and H3 still 2^-64 (I_B halves but stays)");
	/* ties: a contrast equal to the margin counts against, and an interval ending at it excludes */
	struct scen tie = {"tie", main_flat, fork_tie};
	run(&tie, 64, &res, &err);
	SB_CHECK(res.comp[8].median == SB_N3A_MARGIN && res.comp[8].above == 0 && res.comp[8].p == 1 &&
	             res.comp[8].hi == SB_N3A_MARGIN && res.comp[8].excluded && res.hyp_p[0] == 1,
	         "B(768) = 0.005 exactly for all 64 seeds: 0 above the margin, p 1, interval [0.005, 0.005] excluded "
	         "(got %d above, p %g, hi %.17g, excluded %d)",
	         res.comp[8].above, res.comp[8].p, res.comp[8].hi, res.comp[8].excluded);
	/* killed: 3b (B and F excluded), not 3a */
	run(&killed, 64, &res, &err);
	SB_CHECK(res.killed_mechanism && !res.killed_context && res.backward_excluded && res.forward_excluded &&
	             res.comp[8].hi < 0,
	         "killed fixture: both mechanism branches excluded (3b), context not (3a false)");
	run(&nocontext, 64, &res, &err);
	SB_CHECK(res.killed_context && res.density_excluded[0] && res.density_excluded[1] && res.density_holm[0] == 1,
	         "context fails: both densities excluded (3a), density Holm 1");
}

/* ---- no decision ---- */

static int bad_seed, bad_arm;
static double bad_value;
static double main_bad(int a, int r, int arm, int t, int i)
{
	if (i == bad_seed && a == 1 && r == 24 && arm == bad_arm && t == (arm ? 768 : 64))
		return bad_value;
	return main_ctx(a, r, arm, t, i);
}
static double fork_bad(int a, int r, int p, int arm, int i)
{
	if (i == bad_seed && arm == 'N' && p == 128 && r == 1)
		return NAN;
	return fork_backward(a, r, p, arm, i);
}

static void refusals(void)
{
	struct sb_a8_n3a res;
	struct sb_err err = {0};
	struct scen s = {"bad", main_bad, fork_backward};
	bad_seed = 3;
	bad_arm = 1;
	bad_value = 0;
	int rc = run(&s, 5, &res, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "non-positive") && strstr(err.msg, "seed #3") &&
	             strstr(err.msg, "parent"),
	         "parent CE 0 (S at 768): no decision, naming it (%s)", err.msg);
	bad_value = -1;
	bad_arm = 1;
	rc = run(&s, 5, &res, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "non-positive"), "parent CE < 0: no decision");
	bad_value = INFINITY;
	rc = run(&s, 5, &res, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "non-finite"), "parent CE inf: no decision (%s)", err.msg);
	bad_arm = 0;
	bad_value = 0;
	rc = run(&s, 5, &res, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "arm D, step 64"), "Stage-1 denominator D = 0: no decision (%s)",
	         err.msg);
	struct scen f = {"badfork", main_ctx, fork_bad};
	rc = run(&f, 5, &res, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "non-finite") && strstr(err.msg, "arm N, parent 128"),
	         "a NaN fork CE: no decision (%s)", err.msg);
	long long seeds[5] = {64000, 64001, 64002, 64003, 64004};
	struct sb_a8_n3a_data d = {.n = 5, .main_ce = mce, .fork_ce = fce, .seed = seeds};
	rc = sb_a8_n3a(&d, &res, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "seed 64003"), "the message names the seed by number (%s)", err.msg);
	d.n = 0;
	SB_CHECK(sb_a8_n3a(&d, &res, &err) == SB_EDATA, "no seeds: refused");
}

/* ---- the verdict with some components unknown ---- */

static int arch_of(int c)
{
	return c < 8 ? (c / 2) % 2 : (c - 8) % 2;
}

/* the verdict of comp with the unknown components set from (p, ex) arrays */
static const char *complete_verdict(const struct sb_a8_n3a_comp *comp, const int *known, const double *p,
                                    const int *ex)
{
	struct sb_a8_n3a res;
	struct sb_err err = {0};
	memset(&res, 0, sizeof res);
	for (int c = 0; c < SB_N3A_NCOMP; c++) {
		res.comp[c] = comp[c];
		if (!known[c])
			res.comp[c].p = p[c], res.comp[c].excluded = ex[c];
	}
	return sb_a8_n3a_decide(&res, &err) ? "error" : res.verdict;
}

static uint64_t lcg = 88172645463325252ull;
static double urand(void)
{
	lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(lcg >> 11) * 0x1p-53;
}

static void determined(void)
{
	struct sb_err err = {0};
	struct sb_a8_n3a_comp pub[SB_N3A_NCOMP];
	memset(pub, 0, sizeof pub);
	for (int c = 0; c < SB_N3A_NCOMP; c++)
		pub[c].p = sb_stats_sign_p(sb_a8_n3a_published[c].above, 64), pub[c].excluded = sb_a8_n3a_published[c].excluded;
	const char *v;
	int ctx, known[SB_N3A_NCOMP];
	for (int a = 0; a < 3; a++) { /* query known, transformer known, both */
		for (int c = 0; c < SB_N3A_NCOMP; c++)
			known[c] = a == 2 || arch_of(c) == a;
		int rc = sb_a8_n3a_determined(pub, known, &v, &ctx, &err);
		SB_CHECK(rc == 0 && v && !strcmp(v, SB_A8_N3A_PUBLISHED_VERDICT) && !ctx,
		         "published components, %s known: %s whatever the rest (got %s), context_pass impossible (%d)",
		         a == 2 ? "all" : sb_n3a_arch_names[a], SB_A8_N3A_PUBLISHED_VERDICT, v ? v : "NULL", ctx);
	}
	/* the planted backward scenario: with one architecture unknown nothing is fixed; all known:
	 * its verdict */
	struct scen backward = {"backward", main_ctx, fork_backward};
	struct sb_a8_n3a res;
	run(&backward, 64, &res, &err);
	for (int c = 0; c < SB_N3A_NCOMP; c++)
		known[c] = arch_of(c) == 0;
	sb_a8_n3a_determined(res.comp, known, &v, &ctx, &err);
	SB_CHECK(!v && ctx, "planted backward, query known: not fixed (got %s), context_pass possible", v ? v : "NULL");
	for (int c = 0; c < SB_N3A_NCOMP; c++)
		known[c] = 1;
	sb_a8_n3a_determined(res.comp, known, &v, &ctx, &err);
	SB_CHECK(v && !strcmp(v, "BACKWARD_SUPPORTED_SYNTHETIC") && ctx, "planted backward, all known: %s (got %s)",
	         "BACKWARD_SUPPORTED_SYNTHETIC", v ? v : "NULL");

	/* random component sets and masks against completions: four uniform extremes (every
	 * unknown p 0 or 1, excluded or not) and 60 random ones. A fixed verdict must be what
	 * every completion gives; NULL must be shown by two completions that differ. */
	static const double ps[] = {0x1p-64, 1e-4, 0.004, 0.01, 0.02, 0.03, 0.2, 0.9, 1};
	int wrong_fixed = 0, wrong_null = 0, n_fixed = 0, n_null = 0;
	for (int t = 0; t < 3000; t++) {
		struct sb_a8_n3a_comp comp[SB_N3A_NCOMP];
		memset(comp, 0, sizeof comp);
		int mode = t % 4; /* 0: query known, 1: transformer known, 2: random mask, 3: all known */
		int small = t % 5 < 2;              /* p's mostly small: supported verdicts reachable */
		double pk = 0.3 + 0.65 * urand();  /* the random mask's share of known components */
		for (int c = 0; c < SB_N3A_NCOMP; c++) {
			comp[c].p = ps[(int)(urand() * (small ? 3 : 9))];
			comp[c].excluded = urand() < (t % 3 == 0 ? 0.05 : 0.3);
			known[c] = mode == 3 || (mode < 2 ? arch_of(c) == mode : urand() < pk);
		}
		sb_a8_n3a_determined(comp, known, &v, &ctx, &err);
		const char *seen[64];
		int ns = 0, differ = 0, bad = 0;
		for (int k = 0; k < 64; k++) {
			double p[SB_N3A_NCOMP];
			int ex[SB_N3A_NCOMP];
			for (int c = 0; c < SB_N3A_NCOMP; c++) {
				p[c] = k < 4 ? (k & 1 ? 1 : 0) : ps[(int)(urand() * 9)];
				ex[c] = k < 4 ? (k >> 1) : urand() < 0.5;
			}
			seen[ns++] = complete_verdict(comp, known, p, ex);
			if (strcmp(seen[ns - 1], seen[0]))
				differ = 1;
			if (v && strcmp(seen[ns - 1], v))
				bad = 1;
		}
		if (v) {
			n_fixed++;
			if (bad && wrong_fixed++ < 3)
				SB_CHECK(0, "trial %d: fixed %s but a completion gives another verdict", t, v);
		} else {
			n_null++;
			if (!differ && wrong_null++ < 3)
				SB_CHECK(0, "trial %d: not fixed, yet all 64 completions give %s", t, seen[0]);
		}
	}
	SB_CHECK(!wrong_fixed && !wrong_null && n_fixed > 300 && n_null > 300,
	         "3,000 random sets: %d fixed verdicts, each what every completion gives (%d wrong); %d not fixed, each "
	         "shown by completions that differ (%d wrong)",
	         n_fixed, wrong_fixed, n_null, wrong_null);
}

int main(void)
{
	published();
	scenarios();
	refusals();
	determined();
	free(mce);
	free(fce);
	return sb_test_done();
}
