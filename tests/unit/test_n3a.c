/* test_n3a — N3-A's routing operators, the permutation null, the seeds (lib/n3a.h), and
 * the routers, readout and loss (finite differences in double; lib/n3a_model.h).
 * Mirrors the study's operator tests (docs/n3a-spec.md §6). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../harness.h"
#include "n3a.h"
#include "rng.h"

#define NN 32
#define KK 8
static const struct sb_n3a_op OP = {NN, KK, 1.0 / 9.0, 0};

static void rand_row(struct sb_rng *r, double *s, int n, double scale)
{
	for (int i = 0; i < n; i++)
		s[i] = scale * sb_rng_normal(r);
}

static double norm2(const double *x, int n)
{
	double a = 0;
	for (int i = 0; i < n; i++)
		a += x[i] * x[i];
	return sqrt(a);
}

/* masses over K and T of w, by the row's order */
static void kt_mass(const double *w, const struct sb_n3a_row *st, int n, int k, double *mk, double *mt)
{
	*mk = *mt = 0;
	for (int j = 0; j < n; j++)
		*(j < k ? mk : mt) += w[st->order[j]];
}

static void test_forward_masses(void)
{
	struct sb_rng r;
	sb_rng_init(&r, 1, SB_RNG_USER, 0);
	double worst[4] = {0}; /* S sum, L K, L T, P K */
	int supp_ok = 1, gn_bits = 1, p_tail_zero = 1, rc_all = 0, l_full = 1;
	for (int it = 0; it < 2000; it++) {
		double s[NN], w[SB_N3A_NARMS][NN];
		struct sb_n3a_row st[SB_N3A_NARMS];
		rand_row(&r, s, NN, it % 3 == 0 ? 10.0 : 1.0);
		for (int a = 0; a < SB_N3A_NARMS; a++)
			rc_all |= sb_n3a_row_forward(a, &OP, s, w[a], &st[a], NULL);
		double mk, mt;
		kt_mass(w[SB_N3A_S], &st[SB_N3A_S], NN, KK, &mk, &mt);
		worst[0] = fmax(worst[0], fabs(mk + mt - 1));
		int cnt = 0;
		for (int j = 0; j < NN; j++) {
			int i = st[SB_N3A_S].order[j];
			if (w[SB_N3A_S][i] > 0)
				cnt++;
			if ((j < KK) != (w[SB_N3A_S][i] > 0))
				supp_ok = 0;
		}
		if (cnt != KK)
			supp_ok = 0;
		kt_mass(w[SB_N3A_L], &st[SB_N3A_L], NN, KK, &mk, &mt);
		worst[1] = fmax(worst[1], fabs(mk - 8.0 / 9.0));
		worst[2] = fmax(worst[2], fabs(mt - 1.0 / 9.0));
		if (it % 3)
			for (int i = 0; i < NN; i++)
				if (!(w[SB_N3A_L][i] > 0))
					l_full = 0;
		kt_mass(w[SB_N3A_P], &st[SB_N3A_P], NN, KK, &mk, &mt);
		worst[3] = fmax(worst[3], fabs(mk - 1));
		if (mt != 0)
			p_tail_zero = 0;
		if (memcmp(w[SB_N3A_G], w[SB_N3A_S], sizeof w[0]) || memcmp(w[SB_N3A_N], w[SB_N3A_S], sizeof w[0]))
			gn_bits = 0;
	}
	SB_CHECK(!rc_all, "forward of every arm succeeds on 2000 random rows");
	SB_CHECK(supp_ok, "S: support exactly K (8 positions, the top 8 by score)");
	SB_CHECK(worst[0] <= 1e-14, "S sums to 1 (max |sum-1| %.3g, tolerance 1e-14)", worst[0]);
	SB_CHECK(worst[1] <= 1e-14 && worst[2] <= 1e-14, "L: mass 1-eps on K, eps on T (max miss %.3g, %.3g; tol 1e-14)",
		 worst[1], worst[2]);
	SB_CHECK(l_full, "L: full support on unit-scale rows");
	SB_CHECK(worst[3] <= 1e-14 && p_tail_zero, "P: mass 1 on K (max miss %.3g), exactly 0 on T", worst[3]);
	SB_CHECK(gn_bits, "G and N forward bit-identical to S");
}

static void test_ties_and_guards(void)
{
	double s[NN], w[NN];
	struct sb_n3a_row st;
	for (int i = 0; i < NN; i++)
		s[i] = 0.5;
	sb_n3a_row_forward(SB_N3A_S, &OP, s, w, &st, NULL);
	int ok = 1;
	for (int i = 0; i < NN; i++)
		ok &= (i < KK) ? w[i] == 1.0 / KK : w[i] == 0;
	SB_CHECK(ok, "ties: all-equal scores keep positions 0..7 with 1/8 each");
	/* a tie at the boundary: positions 3 and 20 share the 8th largest score */
	for (int i = 0; i < NN; i++)
		s[i] = -1.0 - i * 0.01;
	for (int i = 0; i < 7; i++)
		s[24 + i] = 5.0 + i; /* 7 clear winners at 24..30 */
	s[3] = s[20] = 2.0;
	sb_n3a_row_forward(SB_N3A_S, &OP, s, w, &st, NULL);
	SB_CHECK(w[3] > 0 && w[20] == 0 && st.order[7] == 3 && st.order[8] == 20,
		 "ties at the boundary go to the lower index (w[3]=%g w[20]=%g, order[7]=%d order[8]=%d)", w[3], w[20],
		 st.order[7], st.order[8]);

	/* the envelope: range over K of the centred scores */
	struct sb_err err = {0};
	for (int i = 0; i < NN; i++)
		s[i] = 0;
	s[0] = 699.0;
	int rc0 = sb_n3a_row_forward(SB_N3A_D, &OP, s, w, &st, &err);
	s[0] = 701.0;
	int nd = 0;
	for (int a = 0; a < SB_N3A_NARMS; a++) {
		memset(&err, 0, sizeof err);
		int rc = sb_n3a_row_forward(a, &OP, s, w, &st, &err);
		const char *g = sb_n3a_guard_name(err.msg);
		nd += rc == SB_EVERDICT && g && !strcmp(g, "NUMERICAL_ENVELOPE");
	}
	SB_CHECK(rc0 == 0 && nd == SB_N3A_NARMS, "envelope: range 699 passes, 701 is NUMERICAL_ENVELOPE for all 6 arms "
		 "(%d of 6; last: %s)", nd, err.msg);
	s[5] = NAN;
	memset(&err, 0, sizeof err);
	int rc = sb_n3a_row_forward(SB_N3A_S, &OP, s, w, &st, &err);
	SB_CHECK(rc == SB_EVERDICT && sb_n3a_guard_name(err.msg) && !strcmp(sb_n3a_guard_name(err.msg), "NON_FINITE_LOSS"),
		 "a NaN score is NON_FINITE_LOSS (%s)", err.msg);

	/* tail underflow: tail scores 800 below the top (the dense softmax puts 0 there), the
	 * tail softmax is normalised on its own, so L keeps mass eps on T */
	for (int i = 0; i < NN; i++)
		s[i] = i < KK ? 400.0 + i : -400.0 - i;
	rc = sb_n3a_row_forward(SB_N3A_L, &OP, s, w, &st, NULL);
	double mk, mt;
	kt_mass(w, &st, NN, KK, &mk, &mt);
	SB_CHECK(rc == 0 && fabs(mt - 1.0 / 9.0) <= 1e-15, "tail underflow keeps L's tail mass (T mass %.17g)", mt);
	double wd[NN];
	rc = sb_n3a_row_forward(SB_N3A_D, &OP, s, wd, &st, NULL);
	kt_mass(wd, &st, NN, KK, &mk, &mt);
	SB_CHECK(rc == 0 && mt == 0, "... while the dense softmax's tail underflows to 0 (T mass %g)", mt);

	/* the broken L (2 eps on the tail) is caught by the invariant checks */
	struct sb_n3a_op bad = OP;
	bad.fault = SB_N3A_FAULT_L_TAIL;
	for (int i = 0; i < NN; i++)
		s[i] = 0.1 * i;
	memset(&err, 0, sizeof err);
	rc = sb_n3a_row_forward(SB_N3A_L, &bad, s, w, &st, &err);
	SB_CHECK(rc == SB_EVERDICT && strstr(err.msg, "INVALID_CONTROL"), "a broken L forward is INVALID_CONTROL (%s)",
		 err.msg);
}

/* loss = sum g_i w_i(s): central differences in double against the backward */
static void test_fd(void)
{
	static const int arms[] = {SB_N3A_D, SB_N3A_S, SB_N3A_L, SB_N3A_P};
	struct sb_rng r;
	sb_rng_init(&r, 2, SB_RNG_USER, 0);
	for (int ai = 0; ai < 4; ai++) {
		int arm = arms[ai];
		double worst = 0, worst_rel = 0;
		int rc_all = 0;
		for (int it = 0; it < 50; it++) {
			double s[NN], g[NN], w[NN], ds[NN], fd[NN];
			struct sb_n3a_row st, st2;
			/* well-separated scores, so a step of 1e-6 never changes the top-k split */
			uint32_t perm[NN];
			sb_rng_permutation(&r, perm, NN);
			for (int i = 0; i < NN; i++)
				s[i] = 0.05 * perm[i] + 0.01 * sb_rng_uniform(&r);
			rand_row(&r, g, NN, 1.0);
			rc_all |= sb_n3a_row_forward(arm, &OP, s, w, &st, NULL);
			rc_all |= sb_n3a_row_backward(arm, &OP, g, w, &st, NULL, ds, NULL);
			for (int i = 0; i < NN; i++) {
				double h = 1e-6, sp[NN], wp[NN], wm[NN];
				memcpy(sp, s, sizeof sp);
				sp[i] = s[i] + h;
				rc_all |= sb_n3a_row_forward(arm, &OP, sp, wp, &st2, NULL);
				sp[i] = s[i] - h;
				rc_all |= sb_n3a_row_forward(arm, &OP, sp, wm, &st2, NULL);
				double lp = 0, lm = 0;
				for (int j = 0; j < NN; j++) {
					lp += g[j] * wp[j];
					lm += g[j] * wm[j];
				}
				fd[i] = (lp - lm) / (2 * h);
			}
			for (int i = 0; i < NN; i++) {
				double d = fabs(fd[i] - ds[i]);
				worst = fmax(worst, d);
				if (fabs(ds[i]) > 1e-3)
					worst_rel = fmax(worst_rel, d / fabs(ds[i]));
			}
		}
		SB_CHECK(!rc_all && worst <= 1e-8,
			 "finite differences (double, h 1e-6) of %s's backward: max abs err %.3g, max rel err %.3g "
			 "(tolerance abs 1e-8)",
			 sb_n3a_arm_name(arm), worst, worst_rel);
	}
}

static void test_gn_backward(void)
{
	struct sb_rng r;
	sb_rng_init(&r, 3, SB_RNG_USER, 0);
	double worst_norm = 0, worst_dir = 0;
	int k_equal = 1, tail_perm = 1, tail_diff = 0, rc_all = 0, s_zero_t = 1;
	for (int it = 0; it < 500; it++) {
		double s[NN], g[NN], w[NN], dS[NN], dL[NN], dG[NN], dN[NN];
		struct sb_n3a_row st;
		uint32_t perm[NN - KK];
		rand_row(&r, s, NN, 2.0);
		rand_row(&r, g, NN, 1.0);
		sb_n3a_null_perms(sb_n3a_null_key(64000, "query", 16, 128, it + 1), 1, NN - KK, perm);
		rc_all |= sb_n3a_row_forward(SB_N3A_S, &OP, s, w, &st, NULL);
		rc_all |= sb_n3a_row_backward(SB_N3A_S, &OP, g, w, &st, NULL, dS, NULL);
		rc_all |= sb_n3a_row_backward(SB_N3A_G, &OP, g, w, &st, NULL, dG, NULL);
		rc_all |= sb_n3a_row_backward(SB_N3A_N, &OP, g, w, &st, perm, dN, NULL);
		double wl[NN];
		struct sb_n3a_row stl;
		rc_all |= sb_n3a_row_forward(SB_N3A_L, &OP, s, wl, &stl, NULL);
		rc_all |= sb_n3a_row_backward(SB_N3A_L, &OP, g, wl, &stl, NULL, dL, NULL);
		double nS = norm2(dS, NN), nG = norm2(dG, NN), nN = norm2(dN, NN), nL = norm2(dL, NN);
		worst_norm = fmax(worst_norm, fmax(fabs(nG - nS), fabs(nN - nS)) / nS);
		for (int i = 0; i < NN; i++)
			worst_dir = fmax(worst_dir, fabs(dG[i] - dL[i] * (nS / nL)));
		for (int j = 0; j < NN; j++) {
			int i = st.order[j];
			if (j < KK && memcmp(&dG[i], &dN[i], sizeof(double)))
				k_equal = 0;
			if (j >= KK && (dS[i] != 0))
				s_zero_t = 0;
		}
		/* N's tail is G's tail permuted: the sorted multisets agree */
		double tg[NN], tn[NN];
		for (int j = KK; j < NN; j++) {
			tg[j - KK] = dG[st.order[j]];
			tn[j - KK] = dN[st.order[j]];
		}
		for (int a = 0; a < NN - KK; a++)
			for (int b = a + 1; b < NN - KK; b++) {
				if (tg[b] < tg[a]) {
					double x = tg[a];
					tg[a] = tg[b];
					tg[b] = x;
				}
				if (tn[b] < tn[a]) {
					double x = tn[a];
					tn[a] = tn[b];
					tn[b] = x;
				}
			}
		if (memcmp(tg, tn, sizeof(double) * (NN - KK)))
			tail_perm = 0;
		for (int j = KK; j < NN; j++)
			if (dG[st.order[j]] != dN[st.order[j]])
				tail_diff = 1;
	}
	SB_CHECK(!rc_all, "G/N/S/L backward succeed on 500 random rows");
	SB_CHECK(worst_norm <= 1e-12, "||dG|| = ||dN|| = ||dS|| (max relative miss %.3g, tolerance 1e-12)", worst_norm);
	SB_CHECK(worst_dir <= 1e-13, "G's direction is L's true gradient: dG = dL ||dS||/||dL|| (max abs err %.3g, tol 1e-13)",
		 worst_dir);
	SB_CHECK(k_equal, "G and N are bit-identical on K");
	SB_CHECK(s_zero_t, "S's true gradient is exactly 0 on T");
	SB_CHECK(tail_perm && tail_diff, "N's tail entries are G's, permuted (same multiset; some rows differ)");

	/* zero gradient when S's is zero: g constant, g zero, g only on the tail */
	double s[NN], g[NN], w[NN], d[NN];
	struct sb_n3a_row st;
	uint32_t perm[NN - KK];
	sb_n3a_null_perms(7, 1, NN - KK, perm);
	rand_row(&r, s, NN, 1.0);
	sb_n3a_row_forward(SB_N3A_G, &OP, s, w, &st, NULL);
	int zero = 1, rc = 0;
	for (int c = 0; c < 3; c++) {
		for (int i = 0; i < NN; i++)
			g[i] = c == 0 ? 0.3 : c == 1 ? 0 : 0;
		if (c == 2)
			for (int j = KK; j < NN; j++)
				g[st.order[j]] = sb_rng_normal(&r);
		for (int a = SB_N3A_G; a <= SB_N3A_N; a++) {
			rc |= sb_n3a_row_backward(a, &OP, g, w, &st, perm, d, NULL);
			for (int i = 0; i < NN; i++)
				if (d[i] != 0)
					zero = 0;
		}
	}
	SB_CHECK(!rc && zero, "G and N give exactly 0 where S's gradient is (about) 0: constant, zero, tail-only g");

	/* a broken G (no rescale to S's norm) is caught */
	struct sb_n3a_op bad = OP;
	bad.fault = SB_N3A_FAULT_G_NO_RENORM;
	rand_row(&r, g, NN, 1.0);
	struct sb_err err = {0};
	rc = sb_n3a_row_backward(SB_N3A_G, &bad, g, w, &st, NULL, d, &err);
	SB_CHECK(rc == SB_EVERDICT && strstr(err.msg, "INVALID_CONTROL"),
		 "a G backward without the S-norm rescale is INVALID_CONTROL (%s)", err.msg);
}

static void test_null_and_seeds(void)
{
	/* the study's stable_seed, known answers computed with Python's hashlib from the
	 * spec's definition (parts joined by 0x1F, SHA-256, first 8 bytes big-endian, & 2^63-1) */
	const char *p1[] = {"64000", "16", "train", "support"};
	uint64_t k1 = sb_n3a_stable_seed(p1, 4), k2 = sb_n3a_null_key(64000, "query", 16, 128, 1);
	SB_CHECK(k1 == 7370011310902175156ULL, "stable_seed(64000, 16, train, support) = %llu (want 7370011310902175156)",
		 (unsigned long long)k1);
	SB_CHECK(k2 == 8338341331806909586ULL,
		 "null key (64000, query, 16, 128, 1) = %llu (want 8338341331806909586)", (unsigned long long)k2);

	enum { ROWS = 4000, M = 24 };
	static uint32_t perm[ROWS * M], perm2[ROWS * M];
	int isperm = 1;
	long first_pos[M] = {0};
	sb_n3a_null_perms(k2, ROWS, M, perm);
	for (int r = 0; r < ROWS; r++) {
		int seen[M] = {0};
		for (int j = 0; j < M; j++) {
			if (perm[r * M + j] >= M || seen[perm[r * M + j]]++)
				isperm = 0;
			if (perm[r * M + j] == 0)
				first_pos[j]++;
		}
	}
	double chi = 0, e = (double)ROWS / M;
	for (int j = 0; j < M; j++)
		chi += (first_pos[j] - e) * (first_pos[j] - e) / e;
	SB_CHECK(isperm, "every null row is a permutation of 0..23 (4000 rows)");
	/* chi-square with 23 df: 0.1% upper point 49.7 */
	SB_CHECK(chi < 49.7, "position of element 0 uniform over 24 places: chi2 %.1f (< 49.7, p 0.001)", chi);
	sb_n3a_null_perms(k2, ROWS, M, perm2);
	SB_CHECK(!memcmp(perm, perm2, sizeof perm), "the null is a pure function of its key");
	sb_n3a_null_perms(sb_n3a_null_key(64000, "query", 16, 128, 2), ROWS, M, perm2);
	SB_CHECK(memcmp(perm, perm2, sizeof perm), "another relative step gives another permutation");

	/* it touches no other stream: the model/data streams draw the same before and after */
	struct sb_rng a, b;
	sb_rng_init(&a, k1, SB_N3A_RNG_SUPPORT, 0);
	double before[8], after[8];
	for (int i = 0; i < 8; i++)
		before[i] = sb_rng_uniform(&a);
	sb_n3a_null_perms(k1, ROWS, M, perm2); /* even with the same numeric key */
	sb_rng_init(&b, k1, SB_N3A_RNG_SUPPORT, 0);
	for (int i = 0; i < 8; i++)
		after[i] = sb_rng_uniform(&b);
	SB_CHECK(!memcmp(before, after, sizeof before), "drawing the null leaves the data streams' draws unchanged");
	int differ = 0;
	sb_n3a_null_perms(k1, 1, M, perm2);
	sb_rng_init(&b, k1, SB_N3A_RNG_SUPPORT, 0);
	uint32_t p3[M];
	for (int j = 0; j < M; j++)
		p3[j] = (uint32_t)j;
	double u[M];
	for (int j = 0; j < M; j++)
		u[j] = sb_rng_uniform(&b);
	for (int j = 0; j < M; j++)
		for (int i = j + 1; i < M; i++)
			if (u[p3[i]] < u[p3[j]]) {
				uint32_t x = p3[i];
				p3[i] = p3[j];
				p3[j] = x;
			}
	differ = memcmp(p3, perm2, sizeof p3) != 0;
	SB_CHECK(differ, "the null's purpose separates it from a data stream with the same numeric key");
}

int main(void)
{
	test_forward_masses();
	test_ties_and_guards();
	test_fd();
	test_gn_backward();
	test_null_and_seeds();
	return sb_test_done();
}
