/* test_attn_norm_golden.c — the normalisers against PyTorch.
 *
 * tests/golden/attn_norm/golden.txt is written by gen.py in the same folder
 * (Debian's python3-torch 1.13): the study's float32 normalisers with autograd
 * through its 18-iteration bisection (prec=f32), and exact float64 normalisers
 * whose gradients come from autograd through one Newton step at the root, i.e.
 * the implicit-function gradient, independently of our closed forms (prec=f64).
 *
 * Tolerances (and why):
 *  - f64 cases, C double reference vs torch float64: 1e-12 absolute on p, ds and
 *    relative on dalpha. Both are exact up to double rounding (observed <= 5e-16);
 *    1e-12 leaves room for the conditioning of the threshold (1/(alpha-1) <= 20).
 *  - C float vs torch (either precision): the float error budget of
 *    test_attn_norm.c, p: 2e-7 e + 2e-6 e |p|, ds: 2e-6 e max|g| + 2e-5 e |ds|,
 *    with e = 1/(alpha-1) (2 for the softmax family and sparsemax) and scores of
 *    magnitude <= ~6 here. The float32 torch outputs carry the same budget, so
 *    f32 cases get twice it.
 *  - the study's bisection in float32: a branch decision where sum p - 1 is within
 *    float rounding of 0 may go either way in torch and in C, moving tau_hi by one
 *    final bracket width; its tolerance is 30x the float budget (observed well
 *    inside it; a wrong gradient formula misses by orders of magnitude more).
 */
#include "test_attn_norm_util.h"

#include <errno.h>

struct gcase {
	char name[96], method[64], mask[16], prec[8];
	double ratio, alpha;
	int unrolled, T, nv, rows;
	double *s, *g, *p, *ds, da;
};

static double *read_vec(FILE *f, const char *tag, long n, int *ok)
{
	char t[8];
	double *v = malloc((size_t)n * sizeof *v);
	if (fscanf(f, "%7s", t) != 1 || strcmp(t, tag) != 0) {
		*ok = 0;
		return v;
	}
	for (long i = 0; i < n; i++)
		if (fscanf(f, "%lf", &v[i]) != 1)
			*ok = 0;
	return v;
}

static int read_case(FILE *f, struct gcase *c, int *ok)
{
	char word[16];
	int ch;
	while ((ch = fgetc(f)) == '#' || ch == '\n')
		if (ch == '#')
			while ((ch = fgetc(f)) != '\n' && ch != EOF)
				;
	if (ch == EOF)
		return 0;
	ungetc(ch, f);
	if (fscanf(f, "%15s", word) != 1 || strcmp(word, "case") != 0)
		return 0;
	if (fscanf(f, " %95s method=%63s ratio=%lf alpha=%lf unrolled=%d mask=%15s T=%d nv=%d rows=%d prec=%7s",
		   c->name, c->method, &c->ratio, &c->alpha, &c->unrolled, c->mask, &c->T, &c->nv, &c->rows,
		   c->prec) != 10) {
		*ok = 0;
		return 0;
	}
	long n = (long)c->rows * c->T;
	c->alpha = (double)(float)c->alpha; /* gen.py uses the float32 alpha; %.9g names it exactly */
	c->s = read_vec(f, "s", n, ok);
	c->g = read_vec(f, "g", n, ok);
	c->p = read_vec(f, "p", n, ok);
	c->ds = read_vec(f, "ds", n, ok);
	char t[8], num[64];
	if (fscanf(f, "%7s %63s", t, num) != 2 || strcmp(t, "da") != 0)
		*ok = 0;
	c->da = strcmp(num, "nan") == 0 ? NAN : strtod(num, NULL);
	return *ok;
}

static void free_case(struct gcase *c)
{
	free(c->s);
	free(c->g);
	free(c->p);
	free(c->ds);
}

static int cmp_dd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* sort each row in place (to compare outputs that are equal up to a permutation) */
static void sort_rows(double *v, int rows, int T)
{
	for (int r = 0; r < rows; r++)
		qsort(v + (long)r * T, (size_t)T, sizeof *v, cmp_dd);
}

static void check_case(const struct gcase *c)
{
	struct sb_norm nm;
	struct sb_err err = {0};
	if (sb_norm_parse(c->method, c->alpha, &nm, &err)) {
		SB_CHECK(0, "%s: cannot parse method %s: %s", c->name, c->method, err.msg);
		return;
	}
	nm.unrolled = c->unrolled;
	nm.mask = strcmp(c->mask, "exclude") == 0 ? SB_MASK_EXCLUDE : SB_MASK_MARGIN;
	int T = c->T, rows = c->rows, nv = c->nv, f64 = strcmp(c->prec, "f64") == 0;
	long n = (long)rows * T;
	int has_alpha = nm.kind == SB_NORM_ENTMAX_BISECT || nm.kind == SB_NORM_ADAPTIVE;
	double e = has_alpha ? 1 / (c->alpha - 1) : 2, gmax = 0;
	for (long i = 0; i < n; i++)
		gmax = fmax(gmax, fabs(c->g[i]));
	char name[200];

	/* C double reference */
	double *pr = malloc(n * sizeof *pr), *dr = malloc(n * sizeof *dr), dar = 0;
	sb_norm_forward_ref_f64(&nm, pr, c->s, rows, T, nv, c->alpha, &err);
	sb_norm_backward_ref_f64(&nm, dr, &dar, c->g, c->s, rows, T, nv, c->alpha, &err);
	double rat = f64 ? 1e-12 : 4e-7 * e, rrt = f64 ? 0 : 4e-6 * e;
	double bat = f64 ? 1e-12 : 4e-6 * e * gmax, brt = f64 ? 0 : 4e-5 * e;
	if (c->unrolled && !f64) {
		rat *= 30, rrt *= 30, bat *= 30, brt *= 30;
	}
	/* Bottom-k on margin-padded rows keeps padded keys, whose scores all tie:
	 * torch.topk breaks that tie arbitrarily, we break it toward the lower index
	 * (PROTOCOL A3 Decision), so p is compared as sorted rows there. */
	int tied = nm.kind == SB_NORM_BOTTOMK && nv < T && nm.mask == SB_MASK_MARGIN;
	double *want_p = malloc(n * sizeof *want_p);
	memcpy(want_p, c->p, n * sizeof *want_p);
	if (tied) {
		sort_rows(want_p, rows, T);
		sort_rows(pr, rows, T);
	}
	snprintf(name, sizeof name, "%s: C double reference p vs torch %s%s", c->name, c->prec,
		 tied ? " (rows sorted: tied padded keys)" : "");
	sb_check_close(name, pr, want_p, n, rat, rrt);
	snprintf(name, sizeof name, "%s: C double reference ds vs torch %s", c->name, c->prec);
	sb_check_close(name, dr, c->ds, n, bat, brt);
	if (has_alpha) {
		double tol = f64 ? 1e-12 : 4e-5 * e * e * (c->unrolled ? 30 : 1);
		SB_CHECK(fabs(dar - c->da) <= tol * fmax(1, fabs(c->da)),
			 "%s: C double reference dalpha %.12g vs torch %s %.12g (|diff| %.3g, tolerance %.1g relative)",
			 c->name, dar, c->prec, c->da, fabs(dar - c->da), tol);
	}

	/* C float */
	float *s = malloc(n * sizeof *s), *g = malloc(n * sizeof *g), *p = malloc(n * sizeof *p);
	float *ds = malloc(n * sizeof *ds), *aux = malloc(rows * SB_NORM_AUX * sizeof *aux);
	for (long i = 0; i < n; i++) {
		s[i] = (float)c->s[i];
		g[i] = (float)c->g[i];
	}
	double da = 0;
	int rc = sb_norm_forward(&nm, p, aux, s, rows, T, nv, (float)c->alpha, &err);
	sb_norm_backward(&nm, ds, &da, g, p, aux, s, rows, T, nv, (float)c->alpha);
	double *pd = to_f64(p, n), *dd = to_f64(ds, n);
	if (tied)
		sort_rows(pd, rows, T);
	double k = f64 ? 1 : 2, u = c->unrolled && !f64 ? 30 : 1;
	snprintf(name, sizeof name, "%s: C float p vs torch %s (rc %d)%s", c->name, c->prec, rc,
		 tied ? " (rows sorted: tied padded keys)" : "");
	sb_check_close(name, pd, want_p, n, k * u * 2e-7 * e, k * u * 2e-6 * e);
	snprintf(name, sizeof name, "%s: C float ds vs torch %s", c->name, c->prec);
	sb_check_close(name, dd, c->ds, n, k * u * 2e-6 * e * gmax, k * u * 2e-5 * e);
	if (has_alpha) {
		double tol = k * u * 2e-5 * e * e;
		SB_CHECK(fabs(da - c->da) <= tol * fmax(1, fabs(c->da)),
			 "%s: C float dalpha %.9g vs torch %s %.9g (|diff| %.3g, tolerance %.1g relative)", c->name,
			 da, c->prec, c->da, fabs(da - c->da), tol);
	}
	free(pr);
	free(dr);
	free(s);
	free(g);
	free(p);
	free(ds);
	free(aux);
	free(pd);
	free(dd);
	free(want_p);
}

int main(void)
{
	const char *top = getenv("SB_TOP");
	char path[4096];
	snprintf(path, sizeof path, "%s/tests/golden/attn_norm/golden.txt", top ? top : ".");
	FILE *f = fopen(path, "r");
	if (!SB_CHECK(f != NULL, "open %s (%s)", path, f ? "ok" : strerror(errno)))
		return sb_test_done();
	int ok = 1, ncase = 0;
	struct gcase c;
	while (read_case(f, &c, &ok)) {
		check_case(&c);
		free_case(&c);
		ncase++;
	}
	fclose(f);
	SB_CHECK(ok && ncase >= 28, "read %d golden cases from %s (want >= 28, parsed cleanly: %s)", ncase, path,
		 ok ? "yes" : "no");
	return sb_test_done();
}
