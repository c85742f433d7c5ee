/* test_attn_norm_fd.c — the double reference backward against central finite
 * differences of the double reference forward.
 *
 * L(s, alpha) = sum_i w_i p_i(s, alpha) for a random w; the reference backward
 * with dp = w must equal (L(s + h e_j) - L(s - h e_j)) / 2h for every key j,
 * and dalpha must equal the same difference in alpha.
 *
 * The normalisers are piecewise smooth: top-k changes its kept set, sparsemax
 * and entmax their support, the study's bisection its branch decisions. Test
 * points are drawn away from those kinks: rows are redrawn until the k-th and
 * (k+1)-th scores differ by > 1e-3, or until every y_i = (alpha-1)(s_i - max s)
 * is > 1e-3 from the threshold tau. The unrolled bisection's decisions cannot
 * be steered that way, so there a coordinate whose difference quotient at h and
 * at h/4 disagree (a decision flipped inside [s-h, s+h]) is skipped and
 * counted; at most 10% may be skipped.
 *
 * Tolerance: max_j |fd_j - g_j| <= 1e-6 max_j |g_j| (+1e-9). With h = 1e-5 the
 * central difference's truncation error is ~h^2 |L'''| ~ 1e-10 and its rounding
 * error ~1e-16/h ~ 1e-11, both far below 1e-6.
 */
#include "test_attn_norm_util.h"

struct fdcfg {
	const char *label, *method;
	double alpha;
	int unrolled;
};

static const struct fdcfg fdcfgs[] = {
	{"softmax", "softmax", 0, 0},
	{"topk_0125", "topk_softmax_0125", 0, 0},
	{"topk_05", "topk_softmax_05", 0, 0},
	{"bottomk_025", "bottomk_softmax_025", 0, 0},
	{"sparsemax", "sparsemax", 0, 0},
	{"entmax15", "entmax15", 0, 0},
	{"bisect_a1.1", "entmax_bisect", 1.1, 0},
	{"bisect_a1.3", "entmax_bisect", 1.3, 0},
	{"bisect_a1.7", "entmax_bisect", 1.7, 0},
	{"bisect_a1.95", "entmax_bisect", 1.95, 0},
	{"hae_a1.5", "headwise_adaptive_entmax", 1.5, 0},
	{"entmax15_unrolled", "entmax15", 0, 1},
	{"bisect_a1.2_unrolled", "entmax_bisect", 1.2, 1},
	{"hae_a1.6_unrolled", "headwise_adaptive_entmax", 1.6, 1},
	{"bisect_a1.9_unrolled", "entmax_bisect", 1.9, 1},
};

static double loss(const struct sb_norm *nm, const double *s, const double *w, int T, int nv,
		   double alpha, double *p)
{
	struct sb_err err = {0};
	sb_norm_forward_ref_f64(nm, p, s, 1, T, nv, alpha, &err);
	double L = 0;
	for (int i = 0; i < T; i++)
		L += w[i] * p[i];
	return L;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x < y) - (x > y);
}

/* distance of the row from the nearest kink of its method */
static double kink_gap(const struct sb_norm *nm, const double *s, const double *p, int T, int nv,
		       double alpha)
{
	int n = nm->mask == SB_MASK_EXCLUDE ? nv : T;
	double *z = malloc((size_t)T * sizeof *z), gap = INFINITY;
	if (nm->kind == SB_NORM_TOPK || nm->kind == SB_NORM_BOTTOMK) {
		int k = sb_norm_topk_k(nm->ratio, nv);
		for (int i = 0; i < nv; i++)
			z[i] = nm->kind == SB_NORM_TOPK ? s[i] : -s[i];
		qsort(z, (size_t)nv, sizeof *z, cmp_d);
		gap = k < nv ? z[k - 1] - z[k] : INFINITY;
		if (nm->kind == SB_NORM_BOTTOMK && nm->mask == SB_MASK_MARGIN && nv < T)
			gap = 0; /* it would keep the padded keys, whose scores all tie */
	} else if (nm->kind != SB_NORM_SOFTMAX) {
		double a = nm->kind == SB_NORM_SPARSEMAX ? 2 : nm->kind == SB_NORM_ENTMAX15 ? 1.5 : alpha;
		double m = -INFINITY, tau = 0;
		int j = 0;
		for (int i = 0; i < nv; i++)
			if (s[i] > m)
				m = s[i];
		for (int i = 0; i < nv; i++)
			if (p[i] > p[j])
				j = i;
		/* on the support p = (y - tau)^(1/(a-1)), so tau = y_j - p_j^(a-1) */
		tau = (a - 1) * (s[j] - m) - pow(p[j], a - 1);
		for (int i = 0; i < n && i < nv; i++)
			gap = fmin(gap, fabs((a - 1) * (s[i] - m) - tau));
	}
	free(z);
	return gap;
}

static void test_fd(void)
{
	static const int sizes[] = {1, 2, 3, 7, 13, 50, 97};
	for (size_t ci = 0; ci < sizeof fdcfgs / sizeof fdcfgs[0]; ci++) {
		const struct fdcfg *c = &fdcfgs[ci];
		double worst = 0, worst_a = 0;
		char wctx[160] = "-", actx[160] = "-";
		long ncoord = 0, nskip = 0, na = 0;
		int has_alpha = strcmp(c->method, "entmax_bisect") == 0 ||
				strcmp(c->method, "headwise_adaptive_entmax") == 0;
		for (int mode = 0; mode < 3; mode++)
			for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
				for (int rep = 0; rep < 3; rep++) {
					int T = sizes[si], nv = mode == 0 ? T : (T * 3 + 4) / 5;
					if (mode && nv == T)
						continue;
					struct sb_norm nm;
					struct sb_err err = {0};
					sb_norm_parse(c->method, c->alpha, &nm, &err);
					nm.unrolled = c->unrolled;
					nm.mask = mode == 2 ? SB_MASK_EXCLUDE : SB_MASK_MARGIN;
					double alpha = c->alpha;
					struct sb_rng rng;
					sb_rng_init(&rng, 77 + ci, SB_RNG_USER, (uint64_t)(si * 100 + rep * 10 + mode));
					double *s = malloc(T * sizeof *s), *w = malloc(T * sizeof *w);
					double *p = malloc(T * sizeof *p), *g = malloc(T * sizeof *g);
					double *sp = malloc(T * sizeof *sp);
					for (int tries = 0; tries < 200; tries++) {
						for (int i = 0; i < T; i++)
							s[i] = 1.5 * sb_rng_normal(&rng);
						loss(&nm, s, s, T, nv, alpha, p);
						if (kink_gap(&nm, s, p, T, nv, alpha) > 1e-3)
							break;
					}
					for (int i = 0; i < T; i++)
						w[i] = sb_rng_normal(&rng);
					double da = 0;
					sb_norm_backward_ref_f64(&nm, g, &da, w, s, 1, T, nv, alpha, &err);
					double gmax = 1e-300, h = c->unrolled ? 1e-6 : 1e-5;
					for (int i = 0; i < T; i++)
						gmax = fmax(gmax, fabs(g[i]));
					for (int j = 0; j < T; j++) {
						double fd[2];
						for (int q = 0; q < 2; q++) {
							double hh = q ? h / 4 : h;
							memcpy(sp, s, T * sizeof *s);
							sp[j] = s[j] + hh;
							double Lp = loss(&nm, sp, w, T, nv, alpha, p);
							sp[j] = s[j] - hh;
							double Lm = loss(&nm, sp, w, T, nv, alpha, p);
							fd[q] = (Lp - Lm) / (2 * hh);
						}
						ncoord++;
						if (c->unrolled && fabs(fd[0] - fd[1]) > 1e-6 * gmax + 1e-9) {
							nskip++;
							continue;
						}
						double e = fabs(fd[0] - g[j]) / (gmax + 1e-3);
						if (e > worst) {
							worst = e;
							snprintf(wctx, sizeof wctx,
								 "T=%d n_valid=%d %s key %d: fd %.12g grad %.12g", T, nv,
								 mode == 2 ? "exclude" : "margin", j, fd[0], g[j]);
						}
					}
					if (has_alpha) {
						double fd[2];
						for (int q = 0; q < 2; q++) {
							double hh = q ? h / 4 : h;
							double Lp = loss(&nm, s, w, T, nv, alpha + hh, p);
							double Lm = loss(&nm, s, w, T, nv, alpha - hh, p);
							fd[q] = (Lp - Lm) / (2 * hh);
						}
						double sc = fmax(fabs(da), 1e-3);
						if (!(c->unrolled && fabs(fd[0] - fd[1]) > 1e-6 * sc)) {
							na++;
							double e = fabs(fd[0] - da) / sc;
							if (e > worst_a) {
								worst_a = e;
								snprintf(actx, sizeof actx,
									 "T=%d n_valid=%d: fd %.12g dalpha %.12g", T, nv,
									 fd[0], da);
							}
						}
					}
					free(s);
					free(w);
					free(p);
					free(g);
					free(sp);
				}
		SB_CHECK(worst <= 1e-6 && nskip * 10 <= ncoord,
			 "%s: reference backward vs central differences: max |fd - grad|/max|grad| = %.3g "
			 "(tolerance 1e-6) over %ld keys, %ld skipped at a kink; worst %s",
			 c->label, worst, ncoord, nskip, wctx);
		if (has_alpha)
			SB_CHECK(worst_a <= 1e-6 && na > 0,
				 "%s: reference dalpha vs central differences: max rel error %.3g (tolerance "
				 "1e-6) over %ld rows; worst %s",
				 c->label, worst_a, na, actx);
	}
}

int main(void)
{
	test_fd();
	return sb_test_done();
}
