/* test_sign.c — lib/stats' exact sign test with a margin and the order-statistic median
 * interval (PROTOCOL A8's N3-A inference, docs/n3a-spec.md section 3), for any n:
 *   - exact tail values against sums of binomial coefficients computed with Python's exact
 *     fractions (printed here to 17 digits): rtol 1e-13, and 2^-n exactly at the extremes;
 *   - the study's planted fixtures (tests/test_analysis.py as the spec describes them);
 *   - ties and values equal to the margin count against; non-finite values are refused;
 *   - the median rank for n = 1..19 and 64 at 0.0025, and the intervals it gives;
 *   - the power note's cutoffs (41/64 at 0.05/2, 43/64 at 0.05/6) and powers.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "../harness.h"
#include "stats.h"

static void check_rel(const char *what, double got, double want, double rtol)
{
	double rel = want != 0 ? fabs(got - want) / fabs(want) : fabs(got);
	SB_CHECK(rel <= rtol, "%s: got %.17g want %.17g (rel err %.3g, tol %.0e)", what, got, want, rel, rtol);
}

static void tails(void)
{
	/* the extremes are exact powers of two */
	SB_CHECK(sb_stats_sign_p(64, 64) == ldexp(1.0, -64), "sign p 64/64 = 2^-64 exactly (%.17g)",
	         sb_stats_sign_p(64, 64));
	SB_CHECK(fabs(sb_stats_sign_p(64, 64) - 5.421010862427522e-20) < 1e-34,
	         "2^-64 = 5.42e-20 (not 0: no underflow)");
	SB_CHECK(sb_stats_sign_p(0, 64) == 1.0, "sign p 0/64 = 1 (%.17g)", sb_stats_sign_p(0, 64));
	SB_CHECK(sb_stats_sign_p(1, 64) == 1.0 - ldexp(1.0, -64), "sign p 1/64 = 1 - 2^-64 (rounds to 1)");
	SB_CHECK(sb_stats_sign_p(4, 4) == 0.0625, "sign p 4/4 = 1/16 (%.17g)", sb_stats_sign_p(4, 4));
	SB_CHECK(sb_stats_binom_half_cdf(0, 1000) == ldexp(1.0, -1000), "P(Bin(1000, 1/2) <= 0) = 2^-1000 exactly");
	SB_CHECK(isnan(sb_stats_sign_p(65, 64)) && isnan(sb_stats_sign_p(1, -1)), "sign p: s > n and n < 0 are NaN");
	SB_CHECK(sb_stats_sign_p(-3, 64) == 1.0, "sign p: s <= 0 is 1");
	/* exact values (Python fractions): p = P(Bin(64, 1/2) >= s) and the lower tails */
	static const struct {
		int s;
		double p;
	} ref[] = {{59, 4.5014084690611633e-13}, {60, 3.681522317902641e-14}, {41, 0.0163828795494116},
	           {40, 0.029970594783499616},   {42, 0.008429095022140565},  {43, 0.004073451114349284},
	           {8, 0.9999999999618093},      {11, 0.9999999900175088},    {9, 0.9999999997218664},
	           {23, 0.9915709049778594},     {26, 0.9482890608419595},    {24, 0.9836171204505884},
	           {16, 0.9999878177139185},     {32, 0.5496733768739834},    {33, 0.45032662312601657}};
	for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
		char what[64];
		snprintf(what, sizeof what, "sign p %d/64", ref[i].s);
		check_rel(what, sb_stats_sign_p(ref[i].s, 64), ref[i].p, 1e-13);
	}
	/* the short-side complement keeps absolute accuracy near 1: 1 - p(8/64) = P(X <= 7) */
	check_rel("1 - sign p 8/64 = P(Bin(64,1/2) <= 7)", 1.0 - sb_stats_sign_p(8, 64), 3.819070672770111e-11, 1e-5);
	check_rel("P(Bin(64,1/2) <= 19)", sb_stats_binom_half_cdf(19, 64), 0.0007813946724140139, 1e-13);
	/* large n: the log-space terms (log C(n, i) of about 1e4 carries an absolute error of about 1e-12) */
	check_rel("sign p 1000/2000", sb_stats_sign_p(1000, 2000), 0.5089195055729272, 1e-11);
	check_rel("P(Bin(2000,1/2) <= 900)", sb_stats_binom_half_cdf(900, 2000), 4.228544767751963e-06, 1e-11);
	check_rel("P(Bin(1001,1/2) <= 399)", sb_stats_binom_half_cdf(399, 1001), 7.466346791455156e-11, 1e-11);
	/* agrees with the general binomial CDF (incomplete beta) wherever both are accurate */
	double worst = 0;
	for (int n = 1; n <= 200; n += 7)
		for (int k = 0; k <= n; k++) {
			double a = sb_stats_binom_half_cdf(k, n), b = sb_stats_binom_cdf(k, n, 0.5);
			double rel = fabs(a - b) / (b > 1e-300 ? b : 1e-300);
			if (rel > worst)
				worst = rel;
		}
	SB_CHECK(worst < 1e-10, "binom_half_cdf vs binom_cdf(p = 1/2), n = 1..200 step 7, every k: max rel err %.3g",
	         worst);
}

static void sign_tests(void)
{
	struct sb_sign_test t;
	struct sb_err err = {0};
	/* the study's planted fixtures */
	int rc = sb_stats_sign_test((double[]){1, 2, 3, 4}, 4, 0.0, &t, &err);
	SB_CHECK(rc == 0 && t.above == 4 && t.p == 1.0 / 16, "planted: four values > 0 at margin 0: p = 1/16 (%g)",
	         t.p);
	rc = sb_stats_sign_test((double[]){0.005, 0.005, 0.005, 0.005}, 4, 0.005, &t, &err);
	SB_CHECK(rc == 0 && t.above == 0 && t.p == 1.0, "planted: all equal to the margin: p = 1 (%d above, p %g)",
	         t.above, t.p);
	/* ties count against: values equal to the margin are failures, just above are successes */
	double x[6] = {0.005, nextafter(0.005, 1), 0.004, 0.006, 0.005, 1.0};
	rc = sb_stats_sign_test(x, 6, 0.005, &t, &err);
	SB_CHECK(rc == 0 && t.above == 3 && t.p == 42.0 / 64,
	         "ties against: 3 of 6 strictly above 0.005 (%d), p = 42/64 (%g)", t.above, t.p);
	double y[64];
	for (int i = 0; i < 64; i++)
		y[i] = 0.01 + i;
	rc = sb_stats_sign_test(y, 64, 0.005, &t, &err);
	SB_CHECK(rc == 0 && t.above == 64 && t.p == ldexp(1.0, -64), "64 of 64 above: p = 2^-64 (%.17g)", t.p);
	y[7] = NAN;
	SB_CHECK(sb_stats_sign_test(y, 64, 0.005, &t, &err) == SB_EDATA, "a NaN value is refused (%s)", err.msg);
	y[7] = INFINITY;
	SB_CHECK(sb_stats_sign_test(y, 64, 0.005, &t, &err) == SB_EDATA, "an infinite value is refused");
	SB_CHECK(sb_stats_sign_test(y, 0, 0.005, &t, &err) == SB_EDATA, "no values is refused");
	/* the power note's cutoffs */
	int c2 = sb_stats_sign_min_count(64, 0.05 / 2), c6 = sb_stats_sign_min_count(64, 0.05 / 6);
	SB_CHECK(c2 == 41, "smallest count with p <= 0.05/2 is 41/64 (got %d)", c2);
	SB_CHECK(c6 == 43, "smallest count with p <= 0.05/6 is 43/64 (got %d)", c6);
	SB_CHECK(sb_stats_sign_min_count(3, 0.05) == 4, "n = 3 can never reach 0.05: n + 1");
	/* the powers of those cutoffs at P(contrast > margin) = 0.8 and the union bound */
	double pw41 = 1 - sb_stats_binom_cdf(40, 64, 0.8), pw43 = 1 - sb_stats_binom_cdf(42, 64, 0.8);
	double ub = 1 - (4 * (1 - pw41) + 6 * (1 - pw43));
	double ub75 = 1 - (4 * sb_stats_binom_cdf(40, 64, 0.75) + 6 * sb_stats_binom_cdf(42, 64, 0.75));
	SB_CHECK(fabs(pw41 - 0.99909) < 5e-6 && fabs(pw43 - 0.99491) < 5e-6 && fabs(ub - 0.96585) < 5e-5 &&
	             fabs(ub75 - 0.57002) < 5e-6,
	         "power note: 0.99909 (%.5f), 0.99491 (%.5f), union bound 0.96585 (%.5f), at 0.75 0.57002 (%.5f)", pw41,
	         pw43, ub, ub75);
}

static void intervals(void)
{
	/* the rank for n = 1..19 at 0.0025 (largest j with 2 P(X <= j-1) <= alpha; Python fractions) */
	static const int want[20] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3};
	int bad = 0;
	for (int n = 1; n <= 19; n++)
		if (sb_stats_median_rank(n, 0.0025) != want[n]) {
			bad++;
			SB_CHECK(0, "median rank n = %d: got %d want %d", n, sb_stats_median_rank(n, 0.0025), want[n]);
		}
	SB_CHECK(bad == 0, "median rank at 0.0025 for n = 1..19 (0 below 10, then 1, 2, 3)");
	SB_CHECK(sb_stats_median_rank(64, 0.0025) == 20, "median rank for n = 64 at 0.0025 is 20 (got %d)",
	         sb_stats_median_rank(64, 0.0025));
	SB_CHECK(2 * sb_stats_binom_half_cdf(19, 64) <= 0.0025 && 2 * sb_stats_binom_half_cdf(20, 64) > 0.0025,
	         "rank 20: 2 P(X <= 19) = %.5f <= 0.0025 < 2 P(X <= 20) = %.5f", 2 * sb_stats_binom_half_cdf(19, 64),
	         2 * sb_stats_binom_half_cdf(20, 64));
	struct sb_median_interval m;
	struct sb_err err = {0};
	int rc = sb_stats_median_interval((double[]){3, 1, 2}, 3, 0.0025, &m, &err);
	SB_CHECK(rc == 0 && m.rank == 0 && isinf(m.lo) && m.lo < 0 && isinf(m.hi) && m.hi > 0 && m.median == 2,
	         "planted: 3 values at 0.0025: (-inf, inf), median 2 (rank %d, [%g, %g])", m.rank, m.lo, m.hi);
	/* n = 64: x_(20) and x_(45) of the sorted values; the input is left as it was */
	double x[64], x0[64];
	for (int i = 0; i < 64; i++)
		x[i] = x0[i] = (double)((i * 37) % 64) - 10; /* a permutation of -10..53 */
	rc = sb_stats_median_interval(x, 64, 0.0025, &m, &err);
	int same = 1;
	for (int i = 0; i < 64; i++)
		same &= x[i] == x0[i];
	SB_CHECK(
	    rc == 0 && m.rank == 20 && m.lo == 9 && m.hi == 34 && m.median == 21.5 && same,
	    "n = 64: interval (x_(20), x_(45)) = (9, 34), median 21.5 (got rank %d, [%g, %g], %g), input unchanged",
	    m.rank, m.lo, m.hi, m.median);
	rc = sb_stats_median_interval((double[]){5, 1, 4, 2, 3, 9, 8, 7, 6, 0}, 10, 0.0025, &m, &err);
	SB_CHECK(rc == 0 && m.rank == 1 && m.lo == 0 && m.hi == 9 && m.median == 4.5,
	         "n = 10: rank 1, the range (0, 9), median 4.5 (got %d, [%g, %g], %g)", m.rank, m.lo, m.hi, m.median);
	rc = sb_stats_median_interval((double[]){1, NAN, 2}, 3, 0.0025, &m, &err);
	SB_CHECK(rc == SB_EDATA, "median interval: a NaN is refused (%s)", err.msg);
}

static void holm(void)
{
	double p[3] = {0.04, 0.001, 0.02}, adj[6];
	struct sb_err err = {0};
	int rc = sb_stats_holm(p, 3, adj, &err);
	SB_CHECK(rc == 0 && fabs(adj[0] - 0.04) < 1e-15 && fabs(adj[1] - 0.003) < 1e-15 && fabs(adj[2] - 0.04) < 1e-15,
	         "planted: Holm([.04, .001, .02]) = [.04, .003, .04] (got [%.17g, %.17g, %.17g])", adj[0], adj[1],
	         adj[2]);
	double q[6] = {1, 1, 1, ldexp(1, -64), ldexp(1, -64), 1};
	rc = sb_stats_holm(q, 6, adj, &err);
	SB_CHECK(rc == 0 && adj[3] == 6 * ldexp(1, -64) && adj[4] == 6 * ldexp(1, -64) && adj[0] == 1,
	         "Holm of two 2^-64 among six: 6 x 2^-64 = 3.2526e-19 (got %.17g), not 0", adj[3]);
}

int main(void)
{
	tails();
	sign_tests();
	intervals();
	holm();
	return sb_test_done();
}
