/* test_n3a — N3-A's routing operators, the permutation null, the seeds (lib/n3a.h), and
 * the routers, readout and loss (finite differences in double; lib/n3a_model.h).
 * Mirrors the study's operator tests (docs/n3a-spec.md §6). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../harness.h"
#include "n3a.h"
#include "json.h"
#include "backend.h"
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

/* ------------------------------------------------------------------ task, init, routers */

static void test_data_and_schedule(void)
{
	struct sb_n3a_data a, b, c, small;
	int rc = sb_n3a_data_make(&a, 64000, 16, "train", 4096, 32, NULL);
	rc |= sb_n3a_data_make(&b, 64000, 16, "train", 4096, 32, NULL);
	rc |= sb_n3a_data_make(&c, 64000, 16, "validation", 4096, 32, NULL);
	rc |= sb_n3a_data_make(&small, 64000, 16, "train", 100, 32, NULL);
	SB_CHECK(!rc, "data made");
	SB_CHECK(!memcmp(a.x, b.x, 4096 * 32 * 7 * 4) && !memcmp(a.v, b.v, 4096 * 32 * 4) && !memcmp(a.y, b.y, 4096 * 4),
		 "data are a pure function of (seed, r, split)");
	SB_CHECK(memcmp(a.x, c.x, 4096 * 32 * 7 * 4) && memcmp(a.v, c.v, 4096 * 32 * 4),
		 "train and validation splits differ");
	SB_CHECK(!memcmp(a.x, small.x, 100 * 32 * 7 * 4) && !memcmp(a.z, small.z, 100 * 32),
		 "example i does not depend on the split's size");
	int zr = 1, lab = 1;
	double ysum = 0, mk_rel = 0, mk_irr = 0, nrel = 0, nirr = 0;
	for (int e = 0; e < 4096; e++) {
		int cnt = 0;
		double sum = 0;
		for (int i = 0; i < 32; i++) {
			cnt += a.z[e * 32 + i];
			if (a.z[e * 32 + i])
				sum += a.v[e * 32 + i];
			if (a.z[e * 32 + i]) {
				mk_rel += a.x[(e * 32 + i) * 7];
				nrel++;
			} else {
				mk_irr += a.x[(e * 32 + i) * 7];
				nirr++;
			}
		}
		zr &= cnt == 16;
		lab &= (sum >= 0) == (a.y[e] == 1.0f);
		ysum += a.y[e];
	}
	SB_CHECK(zr, "every example has exactly r = 16 relevant positions");
	SB_CHECK(lab, "y = [sum over relevant of v >= 0]");
	SB_CHECK(fabs(ysum / 4096 - 0.5) < 0.03, "labels balanced: mean y %.4f (|. - 0.5| < 0.03)", ysum / 4096);
	SB_CHECK(fabs(mk_rel / nrel - 1) < 0.03 && fabs(mk_irr / nirr) < 0.03,
		 "marker mean 1 on relevant (%.4f), 0 elsewhere (%.4f) (within 0.03)", mk_rel / nrel, mk_irr / nirr);
	sb_n3a_data_free(&a);
	sb_n3a_data_free(&b);
	sb_n3a_data_free(&c);
	sb_n3a_data_free(&small);

	uint32_t *s1, *s2, *s3;
	rc = sb_n3a_schedule(&s1, 64000, 16, 4096, 128, 1024, NULL);
	rc |= sb_n3a_schedule(&s2, 64000, 16, 4096, 128, 1024, NULL);
	rc |= sb_n3a_schedule(&s3, 64000, 4, 4096, 128, 1024, NULL);
	int perms = 1;
	for (int blk = 0; blk < 32; blk++) {
		static uint8_t seen[4096];
		memset(seen, 0, sizeof seen);
		for (int i = 0; i < 4096; i++)
			if (s1[blk * 4096 + i] >= 4096 || seen[s1[blk * 4096 + i]]++)
				perms = 0;
	}
	SB_CHECK(!rc && perms, "the schedule is 32 fresh permutations of 0..4095 (1024 rows of 128)");
	SB_CHECK(!memcmp(s1, s2, 4096 * 32 * 4) && memcmp(s1, s3, 4096 * 32 * 4),
		 "the schedule depends on (seed, r) only: same for equal keys, differs for another r");
	free(s1);
	free(s2);
	free(s3);
}

static struct sb_backend *BE;

static void test_init(void)
{
	struct sb_n3a_model *m1, *m2, *m3;
	int rc = sb_n3a_model_new(BE, SB_N3A_TRANSFORMER, 32, 16, 4, &m1, NULL);
	rc |= sb_n3a_model_new(BE, SB_N3A_TRANSFORMER, 32, 16, 4, &m2, NULL);
	rc |= sb_n3a_model_new(BE, SB_N3A_TRANSFORMER, 32, 24, 4, &m3, NULL);
	SB_CHECK(!rc, "transformer models made");
	if (rc)
		return;
	sb_n3a_model_init(m1, 64000);
	sb_n3a_model_init(m2, 64000);
	sb_n3a_model_init(m3, 64000);
	size_t np = sb_n3a_model_nparams(m1);
	float *p = sb_n3a_model_params(m1);
	SB_CHECK(!memcmp(p, sb_n3a_model_params(m2), np * 4), "init is a pure function of (seed, r, arch)");
	SB_CHECK(memcmp(p, sb_n3a_model_params(m3), np * 4), "another r gives other initial weights");
	int nt;
	const struct sb_n3a_tensor *t = sb_n3a_model_tensors(m1, &nt);
	int same_layers = 1, found = 0;
	double xav = sqrt(6.0 / 256), maxabs_in = 0, maxabs_w = 0, qss = 0;
	for (int i = 0; i < nt; i++) {
		if (!strncmp(t[i].name, "layers.0.", 9)) {
			char other[32];
			snprintf(other, sizeof other, "layers.1.%s", t[i].name + 9);
			for (int j = 0; j < nt; j++)
				if (!strcmp(t[j].name, other)) {
					found++;
					if (memcmp(p + t[i].off, p + t[j].off, t[i].size * 4))
						same_layers = 0;
				}
		}
		for (size_t k = 0; k < t[i].size; k++) {
			double v = fabs(p[t[i].off + k]);
			if (!strcmp(t[i].name, "layers.0.in_proj.weight"))
				maxabs_in = fmax(maxabs_in, v);
			if (!strcmp(t[i].name, "in.weight"))
				maxabs_w = fmax(maxabs_w, v);
			if (!strcmp(t[i].name, "q"))
				qss += v * v;
		}
	}
	SB_CHECK(found == 12 && same_layers, "both encoder layers start identical (%d tensors compared)", found);
	SB_CHECK(maxabs_in <= xav && maxabs_in > 0.9 * xav,
		 "in-projection Xavier-uniform: max |w| %.4f in (0.9, 1] x %.4f", maxabs_in, xav);
	SB_CHECK(maxabs_w <= 1 / sqrt(7.0) && maxabs_w > 0.8 / sqrt(7.0),
		 "input Linear U(+-1/sqrt(7)): max |w| %.4f", maxabs_w);
	SB_CHECK(sqrt(qss / 64) > 0.01 && sqrt(qss / 64) < 0.03, "q ~ N(0, 0.02^2): rms %.4f", sqrt(qss / 64));
	float rho = p[t[nt - 2].off], bias = p[t[nt - 1].off];
	SB_CHECK(fabs(log1p(exp((double)rho)) - 1) < 1e-7 && bias == 0, "gamma = softplus(rho) = 1 (%.9f), bias 0",
		 log1p(exp((double)rho)));
	sb_n3a_model_free(m1);
	sb_n3a_model_free(m2);
	sb_n3a_model_free(m3);
}

/* ---- a float64 reference of both routers (plain loops), for finite differences ---- */

struct ref {
	int arch, n, r, B;
	const double *p; /* parameters (the model's table layout, widened) */
	const struct sb_n3a_tensor *t;
	int nt;
};

static const double *rp(const struct ref *R, const char *name)
{
	for (int i = 0; i < R->nt; i++)
		if (!strcmp(R->t[i].name, name))
			return R->p + R->t[i].off;
	return NULL;
}

static void lin(double *out, const double *in, const double *W, const double *b, int M, int K, int N)
{
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double a = b ? b[j] : 0;
			for (int k = 0; k < K; k++)
				a += in[(size_t)i * K + k] * W[(size_t)j * K + k];
			out[(size_t)i * N + j] = a;
		}
}

static double gelu(double x)
{
	return 0.5 * x * (1 + erf(x / sqrt(2.0)));
}

static void layernorm(double *out, const double *x, const double *w, const double *b, int M, int d)
{
	for (int i = 0; i < M; i++) {
		double mu = 0, var = 0;
		for (int c = 0; c < d; c++)
			mu += x[i * d + c];
		mu /= d;
		for (int c = 0; c < d; c++)
			var += (x[i * d + c] - mu) * (x[i * d + c] - mu);
		var /= d;
		for (int c = 0; c < d; c++)
			out[i * d + c] = (x[i * d + c] - mu) / sqrt(var + 1e-5) * w[c] + b[c];
	}
}

static double ref_loss(const struct ref *R, const float *xin, const float *v, const float *y, int arm,
		       const struct sb_n3a_op *op)
{
	int n = R->n, B = R->B, M = B * n, D = 64, F = 128;
	double *x = malloc(sizeof(double) * M * 7), *h = malloc(sizeof(double) * M * D);
	double *t1 = malloc(sizeof(double) * M * 3 * D), *t2 = malloc(sizeof(double) * M * F);
	double *u1 = malloc(sizeof(double) * M * D), *att = malloc(sizeof(double) * M * D);
	for (int i = 0; i < M * 7; i++)
		x[i] = xin[i];
	if (R->arch == SB_N3A_QUERY) {
		lin(t1, x, rp(R, "W1"), rp(R, "b1"), M, 7, D);
		for (int i = 0; i < M * D; i++)
			t1[i] = gelu(t1[i]);
		lin(h, t1, rp(R, "W2"), rp(R, "b2"), M, D, D);
		for (int i = 0; i < M * D; i++)
			h[i] = gelu(h[i]);
	} else {
		lin(h, x, rp(R, "in.weight"), rp(R, "in.bias"), M, 7, D);
		for (int l = 0; l < 2; l++) {
			char nm[64];
#define P(s) (snprintf(nm, sizeof nm, "layers.%d.%s", l, s), rp(R, nm))
			layernorm(u1, h, P("norm1.weight"), P("norm1.bias"), M, D);
			lin(t1, u1, P("in_proj.weight"), P("in_proj.bias"), M, D, 3 * D);
			for (int b = 0; b < B; b++)
				for (int hh = 0; hh < 4; hh++)
					for (int i = 0; i < n; i++) {
						double sc[64], mx = -INFINITY, sum = 0;
						const double *qi = t1 + (size_t)(b * n + i) * 3 * D + hh * 16;
						for (int j = 0; j < n; j++) {
							const double *kj = t1 + (size_t)(b * n + j) * 3 * D + D + hh * 16;
							double a = 0;
							for (int c = 0; c < 16; c++)
								a += qi[c] * kj[c];
							sc[j] = a / 4.0;
							mx = fmax(mx, sc[j]);
						}
						for (int j = 0; j < n; j++)
							sum += (sc[j] = exp(sc[j] - mx));
						for (int c = 0; c < 16; c++) {
							double a = 0;
							for (int j = 0; j < n; j++)
								a += sc[j] / sum *
								     t1[(size_t)(b * n + j) * 3 * D + 2 * D + hh * 16 + c];
							att[(size_t)(b * n + i) * D + hh * 16 + c] = a;
						}
					}
			lin(u1, att, P("out_proj.weight"), P("out_proj.bias"), M, D, D);
			for (int i = 0; i < M * D; i++)
				u1[i] += h[i];
			layernorm(att, u1, P("norm2.weight"), P("norm2.bias"), M, D);
			lin(t2, att, P("linear1.weight"), P("linear1.bias"), M, D, F);
			for (int i = 0; i < M * F; i++)
				t2[i] = gelu(t2[i]);
			lin(h, t2, P("linear2.weight"), P("linear2.bias"), M, F, D);
			for (int i = 0; i < M * D; i++)
				h[i] += u1[i];
#undef P
		}
	}
	double *s = malloc(sizeof(double) * M), *w = malloc(sizeof(double) * M), lg[64], loss = NAN;
	const double *q = rp(R, "q");
	for (int i = 0; i < M; i++) {
		double a = 0;
		for (int c = 0; c < D; c++)
			a += h[(size_t)i * D + c] * q[c];
		s[i] = a / 8.0;
	}
	struct sb_n3a_row st[64];
	sb_n3a_readout(arm, op, R->r, s, v, y, B, rp(R, "rho")[0], rp(R, "bias")[0], NULL, w, st, lg, &loss, NULL, NULL,
		       NULL, NULL);
	free(x);
	free(h);
	free(t1);
	free(t2);
	free(u1);
	free(att);
	free(s);
	free(w);
	return loss;
}

/* B above N3A_CHUNK (16) covers the transformer's chunked backward across chunk boundaries */
static void test_router_fd(int arch, int arm, int B)
{
	struct sb_n3a_model *m;
	struct sb_n3a_data d;
	struct sb_err err = {0};
	int rc = sb_n3a_model_new(BE, arch, 32, 4, B, &m, &err);
	rc |= sb_n3a_data_make(&d, 7, 4, "train", B, 32, &err);
	if (!SB_CHECK(!rc, "%s model and data made (%s)", sb_n3a_arch_name(arch), err.msg))
		return;
	sb_n3a_model_init(m, 11);
	size_t np = sb_n3a_model_nparams(m);
	float *p = sb_n3a_model_params(m);
	/* push the readout away from its initial symmetric point so every path carries gradient */
	int nt;
	const struct sb_n3a_tensor *t = sb_n3a_model_tensors(m, &nt);
	struct sb_rng rng;
	sb_rng_init(&rng, 5, SB_RNG_USER, 1);
	for (int i = 0; i < nt; i++)
		if (!strcmp(t[i].name, "q"))
			for (size_t k = 0; k < t[i].size; k++)
				p[t[i].off + k] = (float)(0.5 * sb_rng_normal(&rng));
		else if (strstr(t[i].name, "norm") || !strcmp(t[i].name, "bias") || strstr(t[i].name, "in_proj.bias") ||
			 strstr(t[i].name, "out_proj.bias"))
			for (size_t k = 0; k < t[i].size; k++)
				p[t[i].off + k] += (float)(0.1 * sb_rng_normal(&rng));
		else /* every weight moved a little, so the two encoder layers differ */
			for (size_t k = 0; k < t[i].size; k++)
				p[t[i].off + k] *= (float)(1 + 0.2 * sb_rng_normal(&rng));
	uint32_t idx[64];
	for (int i = 0; i < B; i++)
		idx[i] = (uint32_t)i;
	struct sb_n3a_op op = OP;
	double loss;
	rc = sb_n3a_model_forward(m, arm, &op, &d, idx, B, 1, NULL, &loss, NULL, NULL, &err);
	if (!SB_CHECK(!rc, "%s %s forward+backward (%s)", sb_n3a_arch_name(arch), sb_n3a_arm_name(arm), err.msg))
		return;
	float *g = sb_n3a_model_grads(m);
	double *pd = malloc(np * sizeof *pd), *pp = malloc(np * sizeof *pp);
	for (size_t i = 0; i < np; i++)
		pd[i] = p[i];
	struct ref R = {arch, 32, 4, B, pp, t, nt};
	memcpy(pp, pd, np * sizeof *pp);
	double l0 = ref_loss(&R, d.x, d.v, d.y, arm, &op);
	SB_CHECK(fabs(loss - l0) <= 1e-5 * fabs(l0), "%s %s: float32 model loss %.9g vs float64 reference %.9g "
		 "(rel tol 1e-5)", sb_n3a_arch_name(arch), sb_n3a_arm_name(arm), loss, l0);
	/* per tensor: a random direction u on that tensor; (L(p+hu) - L(p-hu)) / 2h vs <g, u> */
	double worst = 0;
	const char *worst_name = "";
	int bad = 0;
	for (int i = 0; i < nt; i++) {
		double gu = 0, uu = 0, h = 1e-6;
		double *u = malloc(t[i].size * sizeof *u);
		for (size_t k = 0; k < t[i].size; k++) {
			u[k] = sb_rng_normal(&rng);
			gu += (double)g[t[i].off + k] * u[k];
		}
		for (size_t k = 0; k < t[i].size; k++)
			pp[t[i].off + k] = pd[t[i].off + k] + h * u[k];
		double lp = ref_loss(&R, d.x, d.v, d.y, arm, &op);
		for (size_t k = 0; k < t[i].size; k++)
			pp[t[i].off + k] = pd[t[i].off + k] - h * u[k];
		double lm = ref_loss(&R, d.x, d.v, d.y, arm, &op);
		for (size_t k = 0; k < t[i].size; k++)
			pp[t[i].off + k] = pd[t[i].off + k];
		double fd = (lp - lm) / (2 * h);
		/* scale: the gradient norm times |u| (a float32 gradient is good to ~1e-6 of it) */
		double gn = 0;
		for (size_t k = 0; k < t[i].size; k++)
			gn += (double)g[t[i].off + k] * g[t[i].off + k], uu += u[k] * u[k];
		/* + 1e-4: the last layer's output bias has zero true gradient (every operator is
		 * shift-invariant), so its float32 gradient is pure rounding (~1e-9) */
		double e = fabs(fd - gu) / (sqrt(gn * uu) + 1e-4);
		if (e > worst) {
			worst = e;
			worst_name = t[i].name;
		}
		if (e > 1e-4)
			bad++;
		if (getenv("N3A_FD_VERBOSE"))
			printf("# %s: fd %.9g analytic %.9g |g||u| %.3g err %.3g\n", t[i].name, fd, gu, sqrt(gn * uu), e);
		free(u);
	}
	SB_CHECK(!bad, "%s %s, batch %d: directional finite differences (float64 reference, h 1e-6) vs the float32 "
		 "backward over %d tensors: worst error %.3g of |g||u| + 1e-4 (%s), tolerance 1e-4",
		 sb_n3a_arch_name(arch), sb_n3a_arm_name(arm), B, nt, worst, worst_name);
	free(pd);
	free(pp);
	sb_n3a_data_free(&d);
	sb_n3a_model_free(m);
}

static void test_readout_rows(void)
{
	/* row independence: changing example 2's scores leaves the others' w, logit, ds bit for bit */
	enum { B = 5 };
	struct sb_rng r;
	sb_rng_init(&r, 9, SB_RNG_USER, 0);
	double s[B * NN], w1[B * NN], w2[B * NN], ds1[B * NN], ds2[B * NN], lg1[B], lg2[B], l, dr, db;
	float v[B * NN], y[B];
	uint32_t perm[B * (NN - KK)];
	struct sb_n3a_row st[B];
	for (int i = 0; i < B * NN; i++) {
		s[i] = sb_rng_normal(&r);
		v[i] = (float)sb_rng_normal(&r);
	}
	for (int b = 0; b < B; b++)
		y[b] = (float)(b & 1);
	sb_n3a_null_perms(3, B, NN - KK, perm);
	int ok = 1, rc = 0;
	for (int arm = 0; arm < SB_N3A_NARMS; arm++) {
		rc |= sb_n3a_readout(arm, &OP, 16, s, v, y, B, 0.3, 0.1, perm, w1, st, lg1, &l, ds1, &dr, &db, NULL);
		double keep[NN];
		memcpy(keep, s + 2 * NN, sizeof keep);
		for (int i = 0; i < NN; i++)
			s[2 * NN + i] = 3 * sb_rng_normal(&r);
		rc |= sb_n3a_readout(arm, &OP, 16, s, v, y, B, 0.3, 0.1, perm, w2, st, lg2, &l, ds2, &dr, &db, NULL);
		memcpy(s + 2 * NN, keep, sizeof keep);
		for (int b = 0; b < B; b++) {
			if (b == 2)
				continue;
			ok &= !memcmp(w1 + b * NN, w2 + b * NN, sizeof(double) * NN) && lg1[b] == lg2[b];
			/* ds scales with 1/B and the example's own logit only */
			ok &= !memcmp(ds1 + b * NN, ds2 + b * NN, sizeof(double) * NN);
		}
	}
	SB_CHECK(!rc && ok, "rows are independent: changing one example's scores leaves the others' weights, logits "
		 "and score gradients bit for bit (all 6 arms)");
}

/* registered_settings: only a cell whose every setting but arch, r and seed is the default */
static void test_registered(void)
{
	static const struct {
		const char *json;
		int want;
	} c[] = {
	    {"{\"family\":\"n3a\",\"arch\":\"query\",\"r\":16,\"seed\":64000}", 1},
	    {"{\"family\":\"n3a\",\"arch\":\"transformer\",\"r\":1,\"seed\":64063,\"train\":4096,\"lr\":0.001}", 1},
	    {"{\"family\":\"n3a\",\"arch\":\"query\",\"r\":16,\"seed\":64000,\"train\":64}", 0},
	    {"{\"family\":\"n3a\",\"arch\":\"query\",\"r\":4,\"seed\":1,\"batch\":4}", 0},
	};
	for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
		struct sb_json *v = NULL;
		struct sb_n3a_cell cell;
		struct sb_err e = {0};
		int ok = !sb_json_parse(c[i].json, strlen(c[i].json), &v, &e) && !sb_n3a_cell_parse(&cell, v, &e);
		SB_CHECK(ok && sb_n3a_cell_registered(&cell) == c[i].want, "registered settings %d for %s (%s)", c[i].want,
			 c[i].json, ok ? "parsed" : e.msg);
		sb_json_free(v);
	}
}

/* SB_ARENA_CHECK: the 64-byte slack after each of the model's buffers holds a red zone.
 * None without the variable; with it (transformer: 45 buffers) a forward and backward pass
 * gives the same loss, routing weights and gradients; a byte or a float updated in place
 * in a zone (the first, a layer's and the last buffer's) fails the next pass naming the
 * buffer, and no longer once restored. */
static void test_arena_check(void)
{
	struct sb_n3a_model *m[2] = {NULL, NULL};
	struct sb_n3a_data d;
	struct sb_err err = {0};
	char *saved = sb_test_env_set("SB_ARENA_CHECK", NULL);
	int rc = sb_n3a_model_new(BE, SB_N3A_TRANSFORMER, 32, 4, 8, &m[0], &err);
	setenv("SB_ARENA_CHECK", "1", 1);
	rc |= sb_n3a_model_new(BE, SB_N3A_TRANSFORMER, 32, 4, 8, &m[1], &err);
	sb_test_env_restore("SB_ARENA_CHECK", saved);
	rc |= sb_n3a_data_make(&d, 7, 4, "train", 8, 32, &err);
	if (!SB_CHECK(!rc, "n3a arena check: two transformer models and data (%s)", err.msg))
		return;
	int nz = 0;
	while (sb_n3a_model_zone(m[1], nz))
		nz++;
	/* 9 shared buffers, the residual stream's L + 1, 14 per layer, 5 of backward scratch */
	int want = 9 + (SB_N3A_LAYERS + 1) + 14 * SB_N3A_LAYERS + 5;
	SB_CHECK(!sb_n3a_model_zone(m[0], 0) && nz == want,
	         "n3a arena check: no zones without SB_ARENA_CHECK, one per buffer with it (%d, want %d)", nz, want);
	uint32_t idx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	struct sb_n3a_op op = OP;
	double loss[2], w[2][8 * 32];
	int bad = 0;
	for (int k = 0; k < 2; k++) {
		sb_n3a_model_init(m[k], 11);
		bad |= sb_n3a_model_forward(m[k], SB_N3A_S, &op, &d, idx, 8, 1, NULL, &loss[k], w[k], NULL, &err) != 0;
	}
	size_t np = sb_n3a_model_nparams(m[0]);
	SB_CHECK(!bad && loss[0] == loss[1] && !memcmp(w[0], w[1], sizeof w[0]) &&
	             !memcmp(sb_n3a_model_grads(m[0]), sb_n3a_model_grads(m[1]), np * sizeof(float)),
	         "n3a arena check: a forward and backward pass gives the same loss (%.17g, %.17g), weights and "
	         "gradients with the zones checked as without (%s)",
	         loss[0], loss[1], bad ? err.msg : "ran");
	int at[3] = {0, 20, nz - 1};
	for (int j = 0; j < 3; j++)
		for (int kind = 0; kind < 2; kind++) {
			unsigned char *z = sb_n3a_model_zone(m[1], at[j]);
			unsigned char orig[4], badb[4];
			memcpy(orig, z, 4);
			sb_test_zone_hit(badb, orig, kind);
			memcpy(z, badb, 4);
			struct sb_err e1 = {0}, e2 = {0};
			double l;
			int r1 = sb_n3a_model_forward(m[1], SB_N3A_S, &op, &d, idx, 8, 0, NULL, &l, NULL, NULL, &e1);
			memcpy(z, orig, 4);
			int r2 = sb_n3a_model_forward(m[1], SB_N3A_S, &op, &d, idx, 8, 0, NULL, &l, NULL, NULL, &e2);
			char want[80];
			snprintf(want, sizeof want, "after a forward pass: byte %d past the end of the ", kind ? 2 : 0);
			SB_CHECK(r1 == SB_EINTERNAL && strstr(e1.msg, want) && strstr(e1.msg, "(the N3-A model)") && r2 == 0,
			         "n3a arena check: %s zone %d is reported (rc %d: %s), and no longer once restored (rc %d)",
			         kind ? "a float updated in place (+= 1) in" : "a byte changed in", at[j], r1, e1.msg, r2);
		}
	sb_n3a_data_free(&d);
	sb_n3a_model_free(m[0]);
	sb_n3a_model_free(m[1]);
}

int main(void)
{
	test_registered();
	test_forward_masses();
	test_ties_and_guards();
	test_fd();
	test_gn_backward();
	test_null_and_seeds();
	test_readout_rows();
	test_data_and_schedule();
	struct sb_err err = {0};
	if (!SB_CHECK(!sb_backend_cpu_open(1, &BE, &err), "CPU backend (%s)", err.msg))
		return sb_test_done();
	test_init();
	test_arena_check();
	test_router_fd(SB_N3A_QUERY, SB_N3A_D, 4);
	test_router_fd(SB_N3A_QUERY, SB_N3A_L, 4);
	test_router_fd(SB_N3A_TRANSFORMER, SB_N3A_L, 4);
	test_router_fd(SB_N3A_TRANSFORMER, SB_N3A_S, 4);
	test_router_fd(SB_N3A_TRANSFORMER, SB_N3A_L, 40); /* three chunks of the backward */
	sb_backend_close(BE);
	return sb_test_done();
}
