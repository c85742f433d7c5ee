/* gpu_ops — every op of the CUDA backend against the CPU backend, ggml
 * test-backend-ops style: fresh random inputs of many shapes, outputs poisoned
 * with NaN before each GPU run (an unwritten element fails), normalised MSE
 * against a per-op tolerance, max abs error and the number of bit-identical
 * elements (ops written to the CPU's order should be all identical; reductions
 * in another order and cuBLAS products are not).
 *
 *   gpu_ops [--device cuda[:N][,tf32]] [--seed S] [--tsv FILE]
 * Exit: 0 all passed, 1 some failed, 5 no CUDA device / backend.
 * Ends with "N passed, N failed".
 */
#include "gpu_common.h"

#include "attn_norm.h"

static struct genv E;
static const char *g_device = "cuda";

/* the CUDA backend's queries (lib/cuda/backend_cuda.h); weak: absent in a CUDA=0 build */
int sb_cuda_failed(struct sb_backend *be) __attribute__((weak));
size_t sb_cuda_retired_bytes(struct sb_backend *be) __attribute__((weak));
static double TOL_MM = 1e-10;  /* cuBLAS vs the CPU backend's own GEMM (fp32); tf32: 1e-5 */
static const double TOL_EX = 1e-10; /* ops in the CPU's order (bit-identical to the CPU's scalar paths; within rounding of its AVX-512 ones) */
static const double TOL_RED = 1e-10; /* sums in another order */

#define FREEH(...)                                                                                                 \
	do {                                                                                                       \
		void *fp_[] = {__VA_ARGS__};                                                                       \
		for (size_t i_ = 0; i_ < sizeof fp_ / sizeof fp_[0]; i_++)                                         \
			free(fp_[i_]);                                                                             \
	} while (0)
#define FREED(...)                                                                                                 \
	do {                                                                                                       \
		void *fp_[] = {__VA_ARGS__};                                                                       \
		for (size_t i_ = 0; i_ < sizeof fp_ / sizeof fp_[0]; i_++)                                         \
			sb_be_free(E.gpu, fp_[i_]);                                                                \
	} while (0)

static float *copyf(const float *a, size_t n)
{
	float *p = malloc((n ? n : 1) * sizeof *p);
	memcpy(p, a, n * sizeof *p);
	return p;
}

/* ---------------------------------------------------------------- dense */

static void t_matmul(int M, int K, int N)
{
	char sh[64];
	snprintf(sh, sizeof sh, "M=%d K=%d N=%d", M, K, N);
	float *x = g_randn(&E, (size_t)M * K, 1), *w = g_randn(&E, (size_t)N * K, 0.2f), *b = g_randn(&E, N, 0.5f);
	float *o = malloc((size_t)M * N * 4);
	E.cpu->ops->matmul_forward(E.cc, o, x, w, b, M, K, N);
	float *dx = g_up(&E, x, (size_t)M * K * 4), *dw = g_up(&E, w, (size_t)N * K * 4), *db = g_up(&E, b, N * 4);
	float *dout = g_poison(&E, (size_t)M * N);
	E.gpu->ops->matmul_forward(E.gc, dout, dx, dw, db, M, K, N);
	g_cmp(&E, "matmul_forward", sh, dout, o, (size_t)M * N, TOL_MM);
	/* backward: dinp (= and +=), dw +=, dbias += */
	float *g = g_randn(&E, (size_t)M * N, 1), *gi = g_randn(&E, (size_t)M * K, 1), *gw = g_randn(&E, (size_t)N * K, 1),
	      *gb = g_randn(&E, N, 1);
	float *gi0 = copyf(gi, (size_t)M * K), *gw0 = copyf(gw, (size_t)N * K), *gb0 = copyf(gb, N);
	for (int acc = 0; acc < 2; acc++) {
		memcpy(gi, gi0, (size_t)M * K * 4);
		memcpy(gw, gw0, (size_t)N * K * 4);
		memcpy(gb, gb0, (size_t)N * 4);
		E.cpu->ops->matmul_backward(E.cc, gi, gw, gb, g, x, w, M, K, N, acc);
		float *dg = g_up(&E, g, (size_t)M * N * 4), *dgi = acc ? g_up(&E, gi0, (size_t)M * K * 4) : g_poison(&E, (size_t)M * K);
		float *dgw = g_up(&E, gw0, (size_t)N * K * 4), *dgb = g_up(&E, gb0, N * 4);
		E.gpu->ops->matmul_backward(E.gc, dgi, dgw, dgb, dg, dx, dw, M, K, N, acc);
		char s2[80];
		snprintf(s2, sizeof s2, "%s acc=%d", sh, acc);
		g_cmp(&E, "matmul_backward dinp", s2, dgi, gi, (size_t)M * K, TOL_MM);
		g_cmp(&E, "matmul_backward dw+=", s2, dgw, gw, (size_t)N * K, TOL_MM);
		g_cmp(&E, "matmul_backward dbias+=", s2, dgb, gb, N, TOL_RED);
		FREED(dg, dgi, dgw, dgb);
	}
	FREED(dx, dw, db, dout);
	FREEH(x, w, b, o, g, gi, gw, gb, gi0, gw0, gb0);
}

/* ---------------------------------------------------------------- layer norm */

static void t_ln(int M, int d, int var)
{
	char sh[64];
	snprintf(sh, sizeof sh, "M=%d d=%d %s", M, d, var == 0 ? "y+dropout" : var == 1 ? "y" : "no y");
	size_t n = (size_t)M * d;
	float *x = g_randn(&E, n, 2), *y = g_randn(&E, n, 1), *w = g_randn(&E, d, 0.3f), *b = g_randn(&E, d, 0.1f);
	for (int c = 0; c < d; c++)
		w[c] += 1;
	float *o = malloc(n * 4), *r = malloc(n * 4), *mu = malloc(M * 4), *rs = malloc(M * 4);
	uint8_t *mk = calloc(n, 1);
	struct sb_dropout dr = {var == 0 ? 0.1f : 0, 1000 + (uint64_t)M, SB_DROPOUT_STREAM(17, 3), 12345, NULL};
	const float *yy = var == 2 ? NULL : y;
	E.cpu->ops->residual_ln_forward(E.cc, o, r, mu, rs, mk, x, yy, w, b, &dr, M, d);
	float *gx = g_up(&E, x, n * 4), *gy = g_up(&E, y, n * 4), *gw = g_up(&E, w, d * 4), *gb = g_up(&E, b, d * 4);
	float *go = g_poison(&E, n), *gr = g_poison(&E, n), *gm = g_poison(&E, M), *gs = g_poison(&E, M);
	uint8_t *gk = g_up(&E, mk, n); /* overwritten when dropout is on */
	if (var == 0) {
		uint8_t *z = calloc(n, 1);
		for (size_t i = 0; i < n; i++)
			z[i] = 7;
		E.gpu->ops->upload(E.gpu, gk, z, n, &(struct sb_err){0});
		free(z);
	}
	E.gpu->ops->residual_ln_forward(E.gc, go, gr, gm, gs, gk, gx, yy ? gy : NULL, gw, gb, &dr, M, d);
	g_cmp(&E, "residual_ln_forward out", sh, go, o, n, TOL_EX);
	g_cmp(&E, "residual_ln_forward r", sh, gr, r, n, TOL_EX);
	g_cmp(&E, "residual_ln_forward mean", sh, gm, mu, M, TOL_EX);
	g_cmp(&E, "residual_ln_forward rstd", sh, gs, rs, M, TOL_EX);
	if (var == 0)
		g_cmpi(&E, "residual_ln_forward dropout mask", sh, gk, mk, n);
	float *g = g_randn(&E, n, 1), *dx = malloc(n * 4), *dy = malloc(n * 4), *dw = g_randn(&E, d, 1), *db = g_randn(&E, d, 1);
	float *gdw = g_up(&E, dw, d * 4), *gdb = g_up(&E, db, d * 4), *gg = g_up(&E, g, n * 4);
	float p = dr.p;
	E.cpu->ops->residual_ln_backward(E.cc, dx, dy, dw, db, g, r, mu, rs, mk, w, p, M, d);
	float *gdx = g_poison(&E, n), *gdy = g_poison(&E, n);
	E.gpu->ops->residual_ln_backward(E.gc, gdx, gdy, gdw, gdb, gg, gr, gm, gs, gk, gw, p, M, d);
	g_cmp(&E, "residual_ln_backward dx", sh, gdx, dx, n, TOL_EX);
	g_cmp(&E, "residual_ln_backward dy", sh, gdy, dy, n, TOL_EX);
	g_cmp(&E, "residual_ln_backward dw+=", sh, gdw, dw, d, TOL_RED);
	g_cmp(&E, "residual_ln_backward db+=", sh, gdb, db, d, TOL_RED);
	FREED(gx, gy, gw, gb, go, gr, gm, gs, gk, gdw, gdb, gg, gdx, gdy);
	FREEH(x, y, w, b, o, r, mu, rs, mk, g, dx, dy, dw, db);
}

/* got (device, n floats) equal in value to want at every element (-0 == +0, NaN == NaN):
 * for ops that do the CPU's float operations in its order */
static void g_same(const char *op, const char *shape, const float *gdev, const float *want, size_t n)
{
	struct sb_err err = {0};
	float *got = g_down(&E, gdev, n * sizeof(float), &err);
	size_t bad = 0;
	for (size_t i = 0; got && i < n; i++)
		if (!(got[i] == want[i]) && !(isnan(got[i]) && isnan(want[i])))
			bad++;
	char det[200];
	snprintf(det, sizeof det, "%s: %zu of %zu elements differ%s%s", shape, bad, n, got ? "" : "; download: ",
		 got ? "" : err.msg);
	g_check(&E, got && bad == 0, op, det);
	free(got);
}

/* the CPU's gelu_forward as the encoder runs it: inside a task of the backend's workers,
 * under its flush-to-zero and denormals-are-zero (lib/backend_cpu.c), as the device code
 * (-ftz=true); a direct call on the main context keeps denormals */
struct gelu_ref {
	float *out, *dg;
	uint8_t *mask;
	const float *x;
	const struct sb_dropout *dr;
	size_t n;
};
static int gelu_ref_task(struct sb_ctx *ctx, int worker, int task, void *arg, struct sb_err *err)
{
	struct gelu_ref *a = arg;
	E.cpu->ops->gelu_forward(ctx, a->out, a->mask, a->dg, a->x, a->dr, a->n);
	return 0;
}

static void t_gelu(size_t n, float p, uint64_t off)
{
	char sh[64];
	snprintf(sh, sizeof sh, "n=%zu p=%.2g offset=%llu", n, p, (unsigned long long)off);
	float *x = g_randn(&E, n, 2), *o = malloc(n * 4), *dg = malloc(n * 4), *g = g_randn(&E, n, 1),
	      *di = malloc(n * 4);
	uint8_t *mk = calloc(n, 1);
	struct sb_dropout dr = {p, 42, SB_DROPOUT_STREAM(3, 1), off, NULL};
	E.cpu->ops->gelu_forward(E.cc, o, mk, dg, x, &dr, n);
	E.cpu->ops->gelu_backward(E.cc, di, g, dg, mk, p, n);
	float *gx = g_up(&E, x, n * 4), *go = g_poison(&E, n), *gdg = g_poison(&E, n), *gg = g_up(&E, g, n * 4),
	      *gd = g_poison(&E, n), *gxi = g_up(&E, x, n * 4);
	uint8_t *gk = g_up(&E, mk, n);
	E.gpu->ops->gelu_forward(E.gc, go, gk, NULL, gx, &dr, n);
	g_cmp(&E, "gelu_forward", sh, go, o, n, TOL_EX);
	if (p > 0)
		g_cmpi(&E, "gelu_forward dropout mask", sh, gk, mk, n);
	E.gpu->ops->gelu_forward(E.gc, go, gk, gdg, gx, &dr, n);
	g_cmp(&E, "gelu_forward gelu'", sh, gdg, dg, n, TOL_EX);
	E.gpu->ops->gelu_forward(E.gc, go, gk, gxi, gxi, &dr, n); /* a training pass: gelu' over the input */
	g_cmp(&E, "gelu_forward gelu' in place", sh, gxi, dg, n, TOL_EX);
	E.gpu->ops->gelu_backward(E.gc, gd, gg, gxi, gk, p, n);
	g_cmp(&E, "gelu_backward", sh, gd, di, n, TOL_EX);
#if defined(__FMA__) || defined(__AVX512F__)
	/* lanes.cuh's sb_normcdf1 is backend_cpu_simd.h's vnormcdf per element, FMA where it
	 * fuses (x^2 formed exactly as h + l): with an FMA build of the CPU reference the same
	 * values, not only within TOL_EX (the port of the older u*u form passed the NMSE
	 * check with a quarter of the elements off by up to 9e-8) */
	{
		float *fo = malloc(n * 4), *fdg = malloc(n * 4);
		uint8_t *fmk = calloc(n, 1);
		struct gelu_ref a = {fo, fdg, fmk, x, &dr, n};
		struct sb_err err = {0};
		/* a dry run's "device" is the CPU op called directly: its reference is o, dg */
		int dry = !strcmp(E.gpu->name, "cpu");
		if (!dry && E.cpu->ops->run(E.cpu, 1, gelu_ref_task, &a, &err)) {
			g_check(&E, 0, "gelu_forward in a CPU task", err.msg);
		} else {
			g_same("gelu_forward same values as the CPU", sh, go, dry ? o : fo, n);
			g_same("gelu_forward gelu' same values as the CPU", sh, gxi, dry ? dg : fdg, n);
		}
		FREEH(fo, fdg, fmk);
	}
#endif
	FREED(gx, go, gdg, gg, gd, gxi, gk);
	FREEH(x, o, dg, g, di, mk);
}

/* ---------------------------------------------------------------- attention */

/* Set around t_attention: q, k and v rounded to -1, 0 or 1, so that the scores of a
 * row are small multiples of 1/sqrt(hd) and tie exactly, also at the k-th score of
 * top-k and bottom-k, where both backends must keep the lowest-index tied keys (the
 * device's rprefix: a ballot per half-warp, code no random input reaches). */
static int g_ties;
/* Set around t_attention: a NaN in one key of head 0 and a +inf in one key of the last
 * head of sample 0, so that their rows hold a NaN or a +-inf score: such a row is NaN
 * on both backends (lib/attn_norm.c; the device finds it with a half-warp vote) */
static int g_bad;

/* attention aux (4 fields per row) against the CPU's with the fields of `skip` (bit f:
 * field f) left out: the device's are replaced by the CPU's before g_cmp; with
 * `count2`, the rows whose field 2 differed are counted in the label */
static void cmp_aux_fields(const char *sh, const float *ga, const float *aux, size_t na, unsigned skip, int count2)
{
	struct sb_err derr = {0};
	float *ha = g_down(&E, ga, na * 4, &derr), *gb = NULL;
	size_t nd = 0, nrow = na / 4;
	char fields[16] = "", sh2[240];
	for (int f = 0; f < 4; f++)
		if (!(skip >> f & 1))
			snprintf(fields + strlen(fields), sizeof fields - strlen(fields), "%s%d", *fields ? "," : "", f);
	if (ha) {
		for (size_t r = 0; r < nrow; r++) {
			if (memcmp(&ha[4 * r + 2], &aux[4 * r + 2], 4))
				nd++;
			for (int f = 0; f < 4; f++)
				if (skip >> f & 1)
					ha[4 * r + f] = aux[4 * r + f];
		}
		gb = g_up(&E, ha, na * 4);
	}
	if (count2)
		snprintf(sh2, sizeof sh2, "%s (fields %s; decision words differ in %zu/%zu rows)", sh, fields, nd, nrow);
	else
		snprintf(sh2, sizeof sh2, "%s (fields %s)", sh, fields);
	if (gb)
		g_cmp(&E, "attention_forward aux", sh2, gb, aux, na, TOL_EX);
	else
		g_check(&E, 0, "attention_forward aux download", derr.msg);
	free(ha);
	FREED(gb);
}

static void t_attention(const char *method, double alpha, int unrolled, int mask, int hae, int B, int T, int d, int NH,
			int use_nvalid)
{
	struct sb_err err = {0};
	struct sb_norm nm;
	if (sb_norm_parse(method, alpha, &nm, &err)) {
		g_check(&E, 0, "attention parse", err.msg);
		return;
	}
	nm.unrolled = unrolled;
	nm.mask = mask ? SB_MASK_EXCLUDE : SB_MASK_MARGIN;
	char sh[160];
	snprintf(sh, sizeof sh, "%s%s%s B=%d T=%d d=%d NH=%d%s%s%s", method, unrolled ? "(unrolled)" : "",
		 hae ? "(alpha per head)" : "", B, T, d, NH, use_nvalid ? " nvalid" : "",
		 use_nvalid ? (mask ? "/exclude" : "/margin") : "", g_ties ? " tied scores" : g_bad ? " NaN/inf scores" : "");
	size_t nq = (size_t)B * T * 3 * d, no = (size_t)B * T * d, nS = (size_t)B * NH * T * T, na = (size_t)B * NH * T * 4;
	float *qkv = g_randn(&E, nq, 1.2f), *out = malloc(no * 4), *S = malloc(nS * 4), *P = malloc(nS * 4),
	      *aux = malloc(na * 4);
	if (g_ties)
		for (size_t i = 0; i < nq; i++)
			qkv[i] = qkv[i] > 0.6f ? 1.0f : qkv[i] < -0.6f ? -1.0f : 0.0f;
	if (g_bad) { /* sample 0's keys: token T/3 of head 0, token 2T/3 of head NH-1 */
		int hd = d / NH;
		qkv[(size_t)(T / 3) * 3 * d + d] = NAN;
		qkv[(size_t)(2 * T / 3) * 3 * d + d + (size_t)(NH - 1) * hd + (hd > 1)] = INFINITY;
	}
	int32_t *nv = malloc(B * 4);
	for (int b = 0; b < B; b++)
		nv[b] = 1 + (int)(g_urand(&E) * T);
	float *al = malloc(NH * 4);
	for (int h = 0; h < NH; h++)
		al[h] = 1.05f + 0.9f * (float)g_urand(&E);
	const int32_t *nvp = use_nvalid ? nv : NULL;
	const float *alp = hae ? al : NULL;
	int rc = E.cpu->ops->attention_forward(E.cc, out, S, P, aux, qkv, nvp, alp, &nm, B, T, d, NH, &err);
	if (rc) {
		g_check(&E, 0, "attention_forward cpu", err.msg);
		FREEH(qkv, out, S, P, aux, nv, al);
		return;
	}
	float *gq = g_up(&E, qkv, nq * 4), *go = g_poison(&E, no), *gS = g_poison(&E, nS), *gP = g_poison(&E, nS),
	      *ga = g_poison(&E, na);
	int32_t *gnv = g_up(&E, nv, B * 4);
	float *gal = g_up(&E, al, NH * 4);
	rc = E.gpu->ops->attention_forward(E.gc, go, gS, gP, ga, gq, nvp ? gnv : NULL, alp ? gal : NULL, &nm, B, T, d, NH,
					   &err);
	if (rc)
		g_check(&E, 0, "attention_forward cuda", err.msg);
	g_cmp(&E, "attention_forward out", sh, go, out, no, TOL_EX);
	g_cmp(&E, "attention_forward S", sh, gS, S, nS, TOL_EX);
	g_cmp(&E, "attention_forward P", sh, gP, P, nS, TOL_EX);
	if (g_bad) {
		/* A -inf score among the valid keys (here +inf times a negative q): the CPU's
		 * row_build compacts the row (drops the key, shifting the later ones to other
		 * lanes), the CUDA rows keep it in place as a zero term, so their sums group
		 * differently and tau (aux[0]) and the pass count (aux[2]) of such rows may
		 * differ in rounding while P agrees (docs/cuda.md, "Rows with infinite
		 * scores"). Fields 1 and 3 (the row's max, its count or support; NaN for a NaN
		 * row) are compared exactly. */
		cmp_aux_fields(sh, ga, aux, na, 0x5, 0);
	} else if (!unrolled) {
		g_cmp(&E, "attention_forward aux", sh, ga, aux, na, TOL_EX);
	} else {
		/* aux[2] of the unrolled bisection holds its 18 branch decisions as an integer
		 * (lib/attn_norm.h): a diagnostic that neither backward reads. A row whose score
		 * and alpha round differently on the two devices (the CPU's AVX-512 kernels are
		 * within rounding, not bit-identical) may take the other branch at a near-tie in
		 * the last iterations, which moves this integer by 2^t while P and tau agree to
		 * TOL_EX (checked above and here). So aux[0,1,3] are compared; differing
		 * decision words are counted and printed, not failed. */
		cmp_aux_fields(sh, ga, aux, na, 0x4, 1);
	}
	if (g_bad) {
		/* the backward of such rows differs by design in where it makes NaN: a dq term
		 * 0 * inf (a key of infinite component whose probability is 0) is NaN on the
		 * CPU's dense products and skipped by the CUDA nonzero-list products
		 * (docs/cuda.md, "Rows with infinite scores"); the forward above is the check */
		FREED(gq, go, gS, gP, ga, gnv, gal);
		FREEH(qkv, out, S, P, aux, nv, al);
		return;
	}
	/* backward */
	float *dout = g_randn(&E, no, 1), *dq = malloc(nq * 4), *da = g_randn(&E, NH, 0.1f);
	float *gdout = g_up(&E, dout, no * 4), *gdq = g_poison(&E, nq), *gda = g_up(&E, da, NH * 4);
	int want_da = nm.kind == SB_NORM_ADAPTIVE || nm.kind == SB_NORM_ENTMAX_BISECT;
	E.cpu->ops->attention_backward(E.cc, dq, want_da ? da : NULL, dout, qkv, S, P, aux, nvp, alp, &nm, B, T, d, NH);
	E.gpu->ops->attention_backward(E.gc, gdq, want_da ? gda : NULL, gdout, gq, gS, gP, ga, nvp ? gnv : NULL,
				       alp ? gal : NULL, &nm, B, T, d, NH);
	g_cmp(&E, "attention_backward dqkv", sh, gdq, dq, nq, TOL_EX);
	if (want_da)
		g_cmp(&E, "attention_backward dalpha+=", sh, gda, da, NH, TOL_EX);
	/* statistics */
	/* the op on the same P on both devices (the forward's P is compared above; feeding
	 * the GPU's own P would mix the forward's rounding into this op's check) */
	struct sb_attn_stats s1 = {0}, s2 = {0};
	float *gPc = g_up(&E, P, nS * 4);
	E.cpu->ops->attention_stats(E.cc, &s1, P, nvp, B, NH, T);
	E.gpu->ops->attention_stats(E.gc, &s2, gPc, nvp ? gnv : NULL, B, NH, T);
	FREED(gPc);
	char det[200];
	double re = fabs(s1.entropy_sum - s2.entropy_sum) / (fabs(s1.entropy_sum) + 1e-300);
	/* the CPU takes each entropy term's logarithm in float (within 2.08e-7 relative of
	 * the double one: lib/attn_norm.c entropy_terms, tests/unit/test_attn_norm.c), the
	 * GPU in double: the CPU's bound, 2.5e-7 (was 1e-9 while both used double) */
	int ok = s1.nonzero == s2.nonzero && s1.valid_total == s2.valid_total && s1.rows == s2.rows &&
		 (re < 2.5e-7 || (isnan(s1.entropy_sum) && isnan(s2.entropy_sum))); /* NaN rows: NaN on both */
	snprintf(det, sizeof det, "%s: nonzero %.0f/%.0f valid %.0f/%.0f rows %.0f/%.0f entropy rel err %.3g", sh,
		 s2.nonzero, s1.nonzero, s2.valid_total, s1.valid_total, s2.rows, s1.rows, re);
	g_check(&E, ok, "attention_stats", det);
	FREED(gq, go, gS, gP, ga, gnv, gal, gdout, gdq, gda);
	FREEH(qkv, out, S, P, aux, nv, al, dout, dq, da);
}

/* ---------------------------------------------------------------- local mixer */

static void t_localmix(int B, int T, int d, int G, int use_nvalid)
{
	char sh[80];
	snprintf(sh, sizeof sh, "B=%d T=%d d=%d G=%d%s", B, T, d, G, use_nvalid ? " nvalid" : "");
	int L = T - 1, KK = G > 0 ? 9 : 3;
	size_t n = (size_t)B * T * d, nl = (size_t)B * L * d;
	float *x = g_randn(&E, n, 1), *lnw = g_randn(&E, d, 0.2f), *lnb = g_randn(&E, d, 0.1f), *cw = g_randn(&E, (size_t)d * KK, 0.3f),
	      *cb = g_randn(&E, d, 0.1f), sc[1] = {0.37f};
	for (int c = 0; c < d; c++)
		lnw[c] += 1;
	int32_t *nv = malloc(B * 4);
	for (int b = 0; b < B; b++)
		nv[b] = 1 + (int)(g_urand(&E) * T);
	const int32_t *nvp = use_nvalid ? nv : NULL;
	float *o = malloc(n * 4), *y = malloc(nl * 4), *z = malloc(nl * 4), *mu = malloc(B * L * 4), *rs = malloc(B * L * 4);
	E.cpu->ops->localmix_forward(E.cc, o, y, z, mu, rs, x, nvp, lnw, lnb, cw, cb, sc, B, T, d, G);
	float *gx = g_up(&E, x, n * 4), *glw = g_up(&E, lnw, d * 4), *glb = g_up(&E, lnb, d * 4),
	      *gcw = g_up(&E, cw, (size_t)d * KK * 4), *gcb = g_up(&E, cb, d * 4), *gsc = g_up(&E, sc, 4);
	int32_t *gnv = g_up(&E, nv, B * 4);
	float *go = g_poison(&E, n), *gy = g_poison(&E, nl), *gz = g_poison(&E, nl), *gm = g_poison(&E, B * L),
	      *gr = g_poison(&E, B * L);
	E.gpu->ops->localmix_forward(E.gc, go, gy, gz, gm, gr, gx, nvp ? gnv : NULL, glw, glb, gcw, gcb, gsc, B, T, d, G);
	g_cmp(&E, "localmix_forward out", sh, go, o, n, TOL_EX);
	g_cmp(&E, "localmix_forward y", sh, gy, y, nl, TOL_EX);
	g_cmp(&E, "localmix_forward z", sh, gz, z, nl, TOL_EX);
	g_cmp(&E, "localmix_forward mean", sh, gm, mu, B * L, TOL_EX);
	g_cmp(&E, "localmix_forward rstd", sh, gr, rs, B * L, TOL_EX);
	float *g = g_randn(&E, n, 1), *dx = malloc(n * 4), *dlw = g_randn(&E, d, 1), *dlb = g_randn(&E, d, 1),
	      *dcw = g_randn(&E, (size_t)d * KK, 1), *dcb = g_randn(&E, d, 1), dsc[1] = {0.5f};
	float *gg = g_up(&E, g, n * 4), *gdx = g_poison(&E, n), *gdlw = g_up(&E, dlw, d * 4), *gdlb = g_up(&E, dlb, d * 4),
	      *gdcw = g_up(&E, dcw, (size_t)d * KK * 4), *gdcb = g_up(&E, dcb, d * 4), *gdsc = g_up(&E, dsc, 4);
	E.cpu->ops->localmix_backward(E.cc, dx, dlw, dlb, dcw, dcb, dsc, g, x, y, z, mu, rs, nvp, lnw, cw, sc, B, T, d, G);
	E.gpu->ops->localmix_backward(E.gc, gdx, gdlw, gdlb, gdcw, gdcb, gdsc, gg, gx, gy, gz, gm, gr, nvp ? gnv : NULL,
				      glw, gcw, gsc, B, T, d, G);
	g_cmp(&E, "localmix_backward dx", sh, gdx, dx, n, TOL_EX);
	g_cmp(&E, "localmix_backward dlnw+=", sh, gdlw, dlw, d, TOL_RED);
	g_cmp(&E, "localmix_backward dlnb+=", sh, gdlb, dlb, d, TOL_RED);
	g_cmp(&E, "localmix_backward dconvw+=", sh, gdcw, dcw, (size_t)d * KK, TOL_RED);
	g_cmp(&E, "localmix_backward dconvb+=", sh, gdcb, dcb, d, TOL_RED);
	g_cmp(&E, "localmix_backward dscale+=", sh, gdsc, dsc, 1, TOL_EX);
	FREED(gx, glw, glb, gcw, gcb, gsc, gnv, go, gy, gz, gm, gr, gg, gdx, gdlw, gdlb, gdcw, gdcb, gdsc);
	FREEH(x, lnw, lnb, cw, cb, nv, o, y, z, mu, rs, g, dx, dlw, dlb, dcw, dcb);
}

/* ---------------------------------------------------------------- embedding, gathers, loss */

static void t_embed(int B, int C, int H, int W, int p, int Lt, int V, int d)
{
	char sh[96];
	snprintf(sh, sizeof sh, "B=%d img %dx%dx%d p=%d text L=%d V=%d d=%d", B, C, H, W, p, Lt, V, d);
	int N = B + 7, gh = H / p, gw = W / p, L = gh * gw, P = C * p * p;
	uint8_t *img = malloc((size_t)N * C * H * W);
	for (size_t i = 0; i < (size_t)N * C * H * W; i++)
		img[i] = (uint8_t)(g_urand(&E) * 256);
	uint32_t *idx = malloc(B * 4);
	for (int b = 0; b < B; b++)
		idx[b] = (uint32_t)(g_urand(&E) * N);
	float *pt = malloc((size_t)B * L * P * 4);
	E.cpu->ops->patchify(E.cc, pt, img, idx, B, C, H, W, p);
	uint8_t *gimg = g_up(&E, img, (size_t)N * C * H * W);
	uint32_t *gidx = g_up(&E, idx, B * 4);
	float *gpt = g_poison(&E, (size_t)B * L * P);
	E.gpu->ops->patchify(E.gc, gpt, gimg, gidx, B, C, H, W, p);
	g_cmp(&E, "patchify", sh, gpt, pt, (size_t)B * L * P, 0);
	/* tokens */
	int32_t *tok = malloc((size_t)N * Lt * 4), *len = malloc(N * 4), *lab = malloc(N * 4);
	for (int i = 0; i < N; i++) {
		len[i] = (int)(g_urand(&E) * (Lt + 1));
		lab[i] = (int)(g_urand(&E) * 10);
		for (int t = 0; t < Lt; t++)
			tok[(size_t)i * Lt + t] = t < len[i] ? 1 + (int)(g_urand(&E) * (V - 1)) : 0;
	}
	int32_t *ids = malloc((size_t)B * Lt * 4), *nv = malloc(B * 4), *lb = malloc(B * 4);
	E.cpu->ops->gather_tokens(E.cc, ids, nv, tok, len, idx, B, Lt);
	E.cpu->ops->gather_i32(E.cc, lb, lab, idx, B);
	int32_t *gtok = g_up(&E, tok, (size_t)N * Lt * 4), *glen = g_up(&E, len, N * 4), *glab = g_up(&E, lab, N * 4);
	int32_t *gids = g_up(&E, ids, (size_t)B * Lt * 4), *gnv = g_up(&E, nv, B * 4), *glb = g_up(&E, lb, B * 4);
	E.gpu->ops->zero(E.gc, gids, (size_t)B * Lt * 4);
	E.gpu->ops->zero(E.gc, gnv, B * 4);
	E.gpu->ops->zero(E.gc, glb, B * 4);
	E.gpu->ops->gather_tokens(E.gc, gids, gnv, gtok, glen, gidx, B, Lt);
	E.gpu->ops->gather_i32(E.gc, glb, glab, gidx, B);
	g_cmpi(&E, "gather_tokens ids", sh, gids, ids, (size_t)B * Lt * 4);
	g_cmpi(&E, "gather_tokens nvalid", sh, gnv, nv, B * 4);
	g_cmpi(&E, "gather_i32", sh, glb, lb, B * 4);
	float *tab = g_randn(&E, (size_t)V * d, 1), *emb = malloc((size_t)B * Lt * d * 4);
	E.cpu->ops->embedding_forward(E.cc, emb, ids, tab, B * Lt, d);
	float *gtab = g_up(&E, tab, (size_t)V * d * 4), *gemb = g_poison(&E, (size_t)B * Lt * d);
	E.gpu->ops->embedding_forward(E.gc, gemb, gids, gtab, B * Lt, d);
	g_cmp(&E, "embedding_forward", sh, gemb, emb, (size_t)B * Lt * d, 0);
	float *gout = g_randn(&E, (size_t)B * Lt * d, 1);
	float *ggout = g_up(&E, gout, (size_t)B * Lt * d * 4);
	E.cpu->ops->embedding_backward(E.cc, tab, gout, ids, B * Lt, d);
	E.gpu->ops->embedding_backward(E.gc, gtab, ggout, gids, B * Lt, d);
	g_cmp(&E, "embedding_backward +=", sh, gtab, tab, (size_t)V * d, TOL_EX);
	/* assemble, cls */
	int T = L + 1;
	float *e = g_randn(&E, (size_t)B * L * d, 1), *cls = g_randn(&E, d, 1), *pos = g_randn(&E, (size_t)T * d, 1);
	float *x = malloc((size_t)B * T * d * 4);
	E.cpu->ops->assemble_forward(E.cc, x, e, cls, pos, B, T, d);
	float *ge = g_up(&E, e, (size_t)B * L * d * 4), *gcls = g_up(&E, cls, d * 4), *gpos = g_up(&E, pos, (size_t)T * d * 4),
	      *gx = g_poison(&E, (size_t)B * T * d);
	E.gpu->ops->assemble_forward(E.gc, gx, ge, gcls, gpos, B, T, d);
	g_cmp(&E, "assemble_forward", sh, gx, x, (size_t)B * T * d, 0);
	float *dx = g_randn(&E, (size_t)B * T * d, 1), *demb = malloc((size_t)B * L * d * 4);
	float *gdx = g_up(&E, dx, (size_t)B * T * d * 4), *gdemb = g_poison(&E, (size_t)B * L * d);
	E.cpu->ops->assemble_backward(E.cc, demb, cls, pos, dx, B, T, d);
	E.gpu->ops->assemble_backward(E.gc, gdemb, gcls, gpos, gdx, B, T, d);
	g_cmp(&E, "assemble_backward demb", sh, gdemb, demb, (size_t)B * L * d, 0);
	g_cmp(&E, "assemble_backward dcls+=", sh, gcls, cls, d, TOL_EX);
	g_cmp(&E, "assemble_backward dpos+=", sh, gpos, pos, (size_t)T * d, TOL_EX);
	float *co = malloc((size_t)B * d * 4), *gco = g_poison(&E, (size_t)B * d);
	E.cpu->ops->gather_cls(E.cc, co, x, B, T, d);
	E.gpu->ops->gather_cls(E.gc, gco, gx, B, T, d);
	g_cmp(&E, "gather_cls", sh, gco, co, (size_t)B * d, 0);
	E.cpu->ops->scatter_cls(E.cc, x, co, B, T, d);
	E.gpu->ops->scatter_cls(E.gc, gx, gco, B, T, d);
	g_cmp(&E, "scatter_cls", sh, gx, x, (size_t)B * T * d, 0);
	FREED(gimg, gidx, gpt, gtok, glen, glab, gids, gnv, glb, gtab, gemb, ggout, ge, gcls, gpos, gx, gdx, gdemb, gco);
	FREEH(img, idx, pt, tok, len, lab, ids, nv, lb, tab, emb, gout, e, cls, pos, x, dx, demb, co);
}

static void t_loss_optim(int B, int C, size_t n)
{
	char sh[64];
	snprintf(sh, sizeof sh, "B=%d C=%d", B, C);
	float *lg = g_randn(&E, (size_t)B * C, 3), *ls = malloc(B * 4), *dl = malloc((size_t)B * C * 4);
	int32_t *lab = malloc(B * 4), *pr = malloc(B * 4);
	for (int b = 0; b < B; b++)
		lab[b] = (int)(g_urand(&E) * C);
	/* rows with a NaN logit (first, last, two of them) and a tie: the prediction is the
	 * first NaN's index on both backends (sb_argmax, torch.argmax's rule), the loss NaN */
	if (B >= 5 && C >= 3) {
		lg[0] = NAN;
		lg[(size_t)1 * C + C - 1] = NAN;
		lg[(size_t)2 * C + 1] = NAN, lg[(size_t)2 * C + 2] = NAN, lg[(size_t)2 * C] = INFINITY;
		lg[(size_t)3 * C + 1] = lg[(size_t)3 * C + 2] = 40.0f;
	}
	E.cpu->ops->cross_entropy(E.cc, ls, pr, dl, lg, lab, B, C, 1.0f / B);
	float *glg = g_up(&E, lg, (size_t)B * C * 4), *gls = g_poison(&E, B), *gdl = g_poison(&E, (size_t)B * C);
	int32_t *glab = g_up(&E, lab, B * 4), *gpr = g_up(&E, lab, B * 4);
	E.gpu->ops->cross_entropy(E.gc, gls, gpr, gdl, glg, glab, B, C, 1.0f / B);
	g_cmp(&E, "cross_entropy losses", sh, gls, ls, B, TOL_EX);
	g_cmpi(&E, "cross_entropy pred", sh, gpr, pr, B * 4);
	g_cmp(&E, "cross_entropy dlogits", sh, gdl, dl, (size_t)B * C, TOL_EX);
	FREED(glg, gls, gdl, glab, gpr);
	FREEH(lg, ls, dl, lab, pr);
	/* hae alpha */
	float raw[8], a1[8], dr1[8], da[8];
	for (int i = 0; i < 8; i++) {
		raw[i] = g_nrand(&E);
		da[i] = g_nrand(&E);
		dr1[i] = g_nrand(&E);
	}
	float *graw = g_up(&E, raw, 32), *ga = g_poison(&E, 8), *gda = g_up(&E, da, 32), *gdr = g_up(&E, dr1, 32);
	E.cpu->ops->hae_alpha(E.cc, a1, raw, 8);
	E.cpu->ops->hae_alpha_backward(E.cc, dr1, da, raw, 8);
	E.gpu->ops->hae_alpha(E.gc, ga, graw, 8);
	E.gpu->ops->hae_alpha_backward(E.gc, gdr, gda, graw, 8);
	g_cmp(&E, "hae_alpha", "n=8", ga, a1, 8, 1e-13);
	g_cmp(&E, "hae_alpha_backward +=", "n=8", gdr, dr1, 8, 1e-13);
	FREED(graw, ga, gda, gdr);
	/* slots, norms, AdamW */
	snprintf(sh, sizeof sh, "n=%zu", n);
	int ns = 3;
	float *src = g_randn(&E, n * ns, 1), *dst = malloc(n * 4);
	E.cpu->ops->reduce_slots(E.cc, dst, src, ns, n, n);
	float *gsrc = g_up(&E, src, n * ns * 4), *gdst = g_poison(&E, n);
	E.gpu->ops->reduce_slots(E.gc, gdst, gsrc, ns, n, n);
	g_cmp(&E, "reduce_slots", sh, gdst, dst, n, 0);
	double q1 = E.cpu->ops->sumsq(E.cc, src, n), q2 = E.gpu->ops->sumsq(E.gc, gsrc, n);
	char det[160];
	snprintf(det, sizeof det, "%s: %.17g vs %.17g (rel %.3g)", sh, q2, q1, fabs(q1 - q2) / q1);
	g_check(&E, fabs(q1 - q2) <= 1e-12 * q1, "sumsq", det);
	E.cpu->ops->scale(E.cc, src, 0.37f, n);
	E.gpu->ops->scale(E.gc, gsrc, 0.37f, n);
	g_cmp(&E, "scale", sh, gsrc, src, n, 0);
	float *p = g_randn(&E, n, 1), *m = g_randn(&E, n, 0.01f), *v = g_randn(&E, n, 0.001f);
	for (size_t i = 0; i < n; i++)
		v[i] = v[i] * v[i];
	float *gp = g_up(&E, p, n * 4), *gm = g_up(&E, m, n * 4), *gv = g_up(&E, v, n * 4);
	for (int t = 1; t <= 3; t++) {
		E.cpu->ops->adamw(E.cc, p, m, v, src, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f, t);
		E.gpu->ops->adamw(E.gc, gp, gm, gv, gsrc, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f, t);
	}
	g_cmp(&E, "adamw p (3 steps)", sh, gp, p, n, 0);
	g_cmp(&E, "adamw m", sh, gm, m, n, 0);
	g_cmp(&E, "adamw v", sh, gv, v, n, 0);
	{ /* gradients whose squares, or which themselves, are below FLT_MIN: the CPU backend runs
	   * its ops with flush-to-zero and denormals-are-zero (lib/backend_cpu.c), the device code
	   * is built with -ftz=true to match; without it v kept g*g = 1e-40 (and m the denormal
	   * gradients) where the CPU's are 0 */
		size_t nt = 4099;
		float *tp = g_randn(&E, nt, 1), *tm = calloc(nt, 4), *tv = calloc(nt, 4), *tg = malloc(nt * 4);
		for (size_t i = 0; i < nt; i++)
			tg[i] = (float)(i % 3 == 0   ? 1e-20 * (1.0 + g_urand(&E))
			                : i % 3 == 1 ? 1e-39 * (1.0 + g_urand(&E))
			                             : 1e-3 * g_nrand(&E));
		float *gtp = g_up(&E, tp, nt * 4), *gtm = g_up(&E, tm, nt * 4), *gtv = g_up(&E, tv, nt * 4),
		      *gtg = g_up(&E, tg, nt * 4);
		for (int t = 1; t <= 2; t++) {
			E.cpu->ops->adamw(E.cc, tp, tm, tv, tg, nt, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f, t);
			E.gpu->ops->adamw(E.gc, gtp, gtm, gtv, gtg, nt, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f, t);
		}
		const char *s3 = "n=4099, gradients 1e-20 (squares below FLT_MIN), 1e-39 (denormal), 1e-3";
		g_cmp(&E, "adamw p (tiny gradients)", s3, gtp, tp, nt, 0);
		g_cmp(&E, "adamw m (tiny gradients)", s3, gtm, tm, nt, 0);
		g_cmp(&E, "adamw v (tiny gradients)", s3, gtv, tv, nt, 0);
		FREED(gtp, gtm, gtv, gtg);
		FREEH(tp, tm, tv, tg);
	}
	/* the step without host round trips: loss_accum, clip_coef, adamw_dev (state and
	 * accumulator in device memory) against the CPU's; clipped, unclipped, non-finite */
	if (E.gpu->ops->loss_accum && E.cpu->ops->loss_accum) {
		for (int var = 0; var < 3; var++) {
			float clip = var == 1 ? 0.0f : 5.0f;
			struct sb_step_state st;
			memset(&st, 0, sizeof st);
			st.step = 40 + var;
			st.t = 4 + var;
			sb_adamw_consts(&st.k, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f, st.t);
			struct sb_step_acc ac, ag;
			sb_step_acc_reset(&ac);
			ac.loss_sum = 7.25; /* accumulates */
			ac.steps = 3;
			float *ls = g_randn(&E, B, 1);
			for (int b = 0; b < B; b++)
				ls[b] = 2 + fabsf(ls[b]);
			if (var == 2)
				ls[B / 2] = NAN;
			float *p0 = copyf(p, n), *m0 = copyf(m, n), *v0 = copyf(v, n);
			struct sb_step_state *gst = g_up(&E, &st, sizeof st);
			struct sb_step_acc *gac = g_up(&E, &ac, sizeof ac);
			float *gls = g_up(&E, ls, B * 4), *gp2 = g_up(&E, p, n * 4), *gm2 = g_up(&E, m, n * 4),
			      *gv2 = g_up(&E, v, n * 4);
			E.cpu->ops->loss_accum(E.cc, &ac, ls, B, &st);
			E.cpu->ops->clip_coef(E.cc, &ac, src, n, clip);
			E.cpu->ops->adamw_dev(E.cc, p0, m0, v0, src, n, &ac, &st);
			E.gpu->ops->loss_accum(E.gc, gac, gls, B, gst);
			E.gpu->ops->clip_coef(E.gc, gac, gsrc, n, clip);
			E.gpu->ops->adamw_dev(E.gc, gp2, gm2, gv2, gsrc, n, gac, gst);
			char s2[96], det[400];
			snprintf(s2, sizeof s2, "%s B=%d clip=%g%s", sh, B, clip, var == 2 ? " loss NaN" : "");
			struct sb_err e2 = {0};
			int got = E.gpu->ops->download(E.gpu, &ag, gac, sizeof ag, &e2) == 0;
			double rn = fabs(ag.grad_norm - ac.grad_norm) / (ac.grad_norm + 1e-300);
			int same_loss = (isnan(ac.last_loss) && isnan(ag.last_loss)) || ac.last_loss == ag.last_loss;
			int ok = got && same_loss && ag.loss_sum == ac.loss_sum && ag.steps == ac.steps &&
				 ag.first_bad == ac.first_bad && rn <= 1e-12 && ag.clipped == ac.clipped &&
				 fabs((double)ag.coef - ac.coef) <= 2e-7 * fabs((double)ac.coef);
			snprintf(det, sizeof det,
				 "%s: last_loss %.17g/%.17g sum %.17g/%.17g steps %lld/%lld first_bad %lld/%lld norm rel %.3g "
				 "clipped %d/%d coef %.9g/%.9g%s%s",
				 s2, ag.last_loss, ac.last_loss, ag.loss_sum, ac.loss_sum, (long long)ag.steps,
				 (long long)ac.steps, (long long)ag.first_bad, (long long)ac.first_bad, rn, ag.clipped,
				 ac.clipped, ag.coef, ac.coef, got ? "" : "; download: ", got ? "" : e2.msg);
			g_check(&E, ok, "loss_accum + clip_coef", det);
			g_cmp(&E, "adamw_dev p", s2, gp2, p0, n, var == 2 ? 0 : 1e-12);
			g_cmp(&E, "adamw_dev m", s2, gm2, m0, n, var == 2 ? 0 : 1e-12);
			g_cmp(&E, "adamw_dev v", s2, gv2, v0, n, var == 2 ? 0 : 1e-12);
			FREED(gst, gac, gls, gp2, gm2, gv2);
			FREEH(ls, p0, m0, v0);
		}
	}
	FREED(gsrc, gdst, gp, gm, gv);
	FREEH(src, dst, p, m, v);
}

/* ---------------------------------------------------------------- errors that must not stick */

static void t_errors(void)
{
	struct sb_err err = {0};
	struct sb_norm nm;
	sb_norm_parse("softmax", 1.5, &nm, &err);
	float *buf = g_poison(&E, 1024), one = 1.0f;
	int32_t zero = 0, *gnv = g_up(&E, &zero, 4);
	struct sb_err e1 = {0}, e2 = {0};
	float *h1, *h2;
	char det[400];
	int rc;
	if (!strcmp(E.gpu->name, "cpu")) { /* dry run: the CPU has no row-length limit */
		g_check(&E, 1, "a refused shape does not poison the backend", "skipped on the CPU backend");
		goto data_error;
	}
	/* 1. a shape the backend refuses: returned, and the backend goes on */
	rc = E.gpu->ops->attention_forward(E.gc, buf, buf, buf, buf, buf, NULL, NULL, &nm, 1, 600, 16, 1, &err);
	E.gpu->ops->upload(E.gpu, buf, &one, 4, &(struct sb_err){0});
	float *h = g_down(&E, buf, 4, &(struct sb_err){0});
	snprintf(det, sizeof det, "attention_forward T=600 returned %d (%s); a download afterwards %s", rc, err.msg,
		 h && h[0] == 1.0f ? "works" : "FAILS");
	g_check(&E, rc != 0 && h && h[0] == 1.0f, "a refused shape does not poison the backend", det);
	free(h);
	/* 2. the same from a void op: reported once by the next fallible call, then gone */
	sb_err_clear(&err);
	E.gpu->ops->attention_backward(E.gc, buf, NULL, buf, buf, buf, buf, buf, NULL, NULL, &nm, 1, 600, 16, 1);
	h1 = g_down(&E, buf, 4, &e1);
	h2 = g_down(&E, buf, 4, &e2);
	snprintf(det, sizeof det, "first download after attention_backward T=600: %s; second: %s",
		 h1 ? "no error (WRONG)" : e1.msg, h2 ? "works" : e2.msg);
	g_check(&E, !h1 && h2, "an error of a void op is reported once, then the backend goes on", det);
	free(h1);
	free(h2);
	/* 2b. widths d > 256 (layer norm, local mixer): refused, pending, reported once as
	 * SB_EDATA, and not a device failure (sb_cuda_failed stays as it was: a cell of
	 * train/multicell.c would be "failed", not "failed_device", and not retried) */
	for (int op = 0; op < 3; op++) {
		static const char *const name[] = {"residual_ln_forward", "residual_ln_backward", "localmix_forward"};
		int f0 = sb_cuda_failed ? sb_cuda_failed(E.gpu) : 0;
		int M = 2, d = 300; /* M * d floats fit in buf */
		sb_err_clear(&e1);
		sb_err_clear(&e2);
		if (op == 0)
			E.gpu->ops->residual_ln_forward(E.gc, buf, buf, buf, buf, NULL, buf, NULL, buf, buf, NULL, M, d);
		else if (op == 1)
			E.gpu->ops->residual_ln_backward(E.gc, buf, NULL, buf, buf, buf, buf, buf, buf, NULL, buf, 0.0f, M,
							 d);
		else
			E.gpu->ops->localmix_forward(E.gc, buf, buf, buf, buf, buf, buf, NULL, buf, buf, buf, buf, buf, 1, M,
						     d, 0);
		int f1 = sb_cuda_failed ? sb_cuda_failed(E.gpu) : 0;
		h1 = g_down(&E, buf, 4, &e1);
		h2 = g_down(&E, buf, 4, &e2);
		snprintf(det, sizeof det, "%s d=%d: first download %s (code %d); second %s; sb_cuda_failed %d -> %d", name[op],
			 d, h1 ? "no error (WRONG)" : e1.msg, e1.code, h2 ? "works" : e2.msg, f0, f1);
		g_check(&E, !h1 && e1.code == SB_EDATA && h2 && f1 == f0 && !f1, "a refused width is pending, not a device failure",
			det);
		free(h1);
		free(h2);
	}
	/* 2c. a data error found on the device while another error is pending: the first
	 * (pending) one is reported first, then the data error at the next wait, then none */
	{
		struct sb_err e3 = {0};
		float *h3;
		sb_err_clear(&e1);
		sb_err_clear(&e2);
		E.gpu->ops->residual_ln_forward(E.gc, buf, buf, buf, buf, NULL, buf, NULL, buf, buf, NULL, 2, 300);
		E.gpu->ops->attention_backward(E.gc, buf, NULL, buf, buf, buf, buf, buf, gnv, NULL, &nm, 1, 8, 16, 1);
		h1 = g_down(&E, buf, 4, &e1);
		h2 = g_down(&E, buf, 4, &e2);
		h3 = g_down(&E, buf, 4, &e3);
		snprintf(det, sizeof det,
			 "refused layer norm, then n_valid = 0 in attention_backward: downloads report %s; %s (code %d); %s",
			 h1 ? "no error (WRONG)" : e1.msg, h2 ? "no error (WRONG)" : e2.msg, e2.code, h3 ? "works" : e3.msg);
		g_check(&E, !h1 && strstr(e1.msg, "layer norm") && !h2 && e2.code == SB_EDATA && h3,
			"the first pending error is reported first, the data error next", det);
		free(h1);
		free(h2);
		free(h3);
	}
data_error:
	/* 3. a data error found by a kernel (n_valid = 0): SB_EDATA at the next wait, once */
	sb_err_clear(&e1);
	sb_err_clear(&e2);
	rc = E.gpu->ops->attention_forward(E.gc, buf, buf, buf, buf, buf, gnv, NULL, &nm, 1, 8, 16, 1, &e1);
	h1 = rc ? NULL : g_down(&E, buf, 4, &e1);
	h2 = g_down(&E, buf, 4, &e2);
	snprintf(det, sizeof det, "n_valid = 0: %s (code %d); the next download %s", h1 ? "no error (WRONG)" : e1.msg,
		 e1.code, h2 ? "works" : e2.msg);
	g_check(&E, !h1 && e1.code == SB_EDATA && h2, "a data error is the cell's, reported once", det);
	free(h1);
	free(h2);
	/* 4. a row with no finite score (q_0 = -inf in the component where every key is 1):
	 * the CPU's attn_norm refuses it (SB_EDATA); the device flags it from the kernel */
	{
		enum { T4 = 8, D4 = 16 };
		static float q4[T4 * 3 * D4];
		memset(q4, 0, sizeof q4);
		for (int t = 0; t < T4; t++)
			q4[t * 3 * D4 + D4] = 1.0f;
		q4[0] = -INFINITY;
		float o4[T4 * D4], S4[T4 * T4], P4[T4 * T4], a4[T4 * 4];
		struct sb_err ec = {0};
		int rcc = E.cpu->ops->attention_forward(E.cc, o4, S4, P4, a4, q4, NULL, NULL, &nm, 1, T4, D4, 1, &ec);
		float *gq4 = g_up(&E, q4, sizeof q4), *go4 = g_poison(&E, T4 * D4), *gS4 = g_poison(&E, T4 * T4),
		      *gP4 = g_poison(&E, T4 * T4), *ga4 = g_poison(&E, T4 * 4);
		sb_err_clear(&e1);
		sb_err_clear(&e2);
		rc = E.gpu->ops->attention_forward(E.gc, go4, gS4, gP4, ga4, gq4, NULL, NULL, &nm, 1, T4, D4, 1, &e1);
		h1 = rc ? NULL : g_down(&E, go4, 4, &e1);
		h2 = g_down(&E, go4, 4, &e2);
		snprintf(det, sizeof det, "cpu: code %d (%s); device: %s (code %d); the next download %s", rcc, ec.msg,
			 h1 ? "no error (WRONG)" : e1.msg, e1.code, h2 ? "works" : e2.msg);
		g_check(&E, rcc == SB_EDATA && !h1 && e1.code == SB_EDATA && h2 && strstr(e1.msg, "no finite score"),
			"a row with no finite score is the cell's data error on both backends", det);
		free(h1);
		free(h2);
		FREED(gq4, go4, gS4, gP4, ga4);
	}
	FREED(buf, gnv);
}

/* ---------------------------------------------------------------- recorded steps */

/* A recording replays with the device memory it names as it is at replay time: a
 * dropout site whose step is read from device memory gives each replay's own mask. */
static void t_graph(void)
{
	struct sb_backend *g = E.gpu;
	if (!g->ops->graph_begin) {
		g_check(&E, 1, "graph ops", "not offered by this backend (skipped)");
		return;
	}
	struct sb_err err = {0};
	size_t n = 100003;
	float *x = g_randn(&E, n, 2), *o = malloc(n * 4);
	uint8_t *mk = malloc(n);
	struct sb_step_state st;
	memset(&st, 0, sizeof st);
	struct sb_step_state *gst = g_up(&E, &st, sizeof st);
	float *gx = g_up(&E, x, n * 4), *go = g_poison(&E, n);
	uint8_t *gk = g_up(&E, mk, n);
	struct sb_dropout dr = {0.1f, 9, SB_DROPOUT_STREAM(0, 2), 12, &gst->step};
	int rc = g->ops->graph_begin(g, &err);
	if (!rc) {
		g->ops->gelu_forward(sb_be_main(g), go, gk, NULL, gx, &dr, n);
		g->ops->scale(sb_be_main(g), go, 0.5f, n);
	}
	void *graph = NULL;
	if (!rc)
		rc = g->ops->graph_end(g, &graph, &err);
	if (rc) {
		g_check(&E, 0, "record gelu + scale", err.msg);
	} else {
		for (int64_t step = 3; step <= 7; step += 4) {
			st.step = step;
			g->ops->upload(g, gst, &st, sizeof st, &err);
			rc = g->ops->graph_launch(g, graph, &err);
			struct sb_dropout d2 = {0.1f, 9, SB_DROPOUT_STREAM(step, 2), 12, NULL};
			E.cpu->ops->gelu_forward(E.cc, o, mk, NULL, x, &d2, n);
			E.cpu->ops->scale(E.cc, o, 0.5f, n);
			char sh[64];
			snprintf(sh, sizeof sh, "n=%zu replay with step %lld", n, (long long)step);
			if (rc)
				g_check(&E, 0, "graph_launch", err.msg);
			g_cmp(&E, "recorded gelu + scale", sh, go, o, n, TOL_EX);
			g_cmpi(&E, "recorded dropout mask (step from device memory)", sh, gk, mk, n);
		}
		g->ops->graph_free(g, graph);
	}
	/* a recording that waits for the device is refused, and the backend goes on */
	sb_err_clear(&err);
	rc = g->ops->graph_begin(g, &err);
	float tmp;
	int rc2 = rc ? 0 : g->ops->download(g, &tmp, gx, 4, &(struct sb_err){0});
	graph = NULL;
	int rc3 = rc ? 0 : g->ops->graph_end(g, &graph, &err);
	float *h = g_down(&E, gx, 4, &(struct sb_err){0});
	char det[300];
	snprintf(det, sizeof det, "download while recording: %d; graph_end: %d (%s); a download afterwards %s", rc2, rc3,
		 err.msg, h && h[0] == x[0] ? "works" : "FAILS");
	g_check(&E, !rc && rc2 && rc3 && !graph && h && h[0] == x[0], "a refused recording leaves the backend usable",
		 det);
	free(h);
	FREED(gst, gx, go, gk);
	FREEH(x, o, mk);
}

/* A recording names the scratch (and ones) buffer of its time. Ops issued op by op
 * between replays may grow it (statistics steps, evaluation); the replay must not
 * then write to the freed old buffer, which the device's pool hands to the next
 * allocation. Here: a fresh backend; the layer norm backward (scratch for its
 * partial sums) and a bias gradient (the ones vector) recorded at M0 rows; both grown
 * op by op at M1 rows; new buffers allocated (where the pool would put the old ones)
 * and filled with a pattern; then the replay must give the right sums and leave the
 * new buffers alone. */
static void t_graph_scratch(void)
{
	if (!E.gpu->ops->graph_begin || !strcmp(E.gpu->name, "cpu")) {
		g_check(&E, 1, "replay after the scratch grew", "skipped (no recorded steps on this backend)");
		return;
	}
	struct genv save = E;
	struct sb_err err = {0};
	struct sb_backend *g = NULL;
	if (sb_backend_open(g_device, 1, &g, &err)) {
		g_check(&E, 0, "replay after the scratch grew: open a fresh backend", err.msg);
		return;
	}
	E.gpu = g;
	E.gc = sb_be_main(g);
	const int d = 64, M0 = 64, M1 = 64 * 200, MB = 70000; /* MB > the 65536 ones of the first size */
	size_t n1 = (size_t)M1 * d;
	float *x = g_randn(&E, n1, 2), *w = g_randn(&E, d, 0.3f), *b = g_randn(&E, d, 0.1f), *go = g_randn(&E, n1, 1);
	for (int c = 0; c < d; c++)
		w[c] += 1;
	float *o = malloc(n1 * 4), *r = malloc(n1 * 4), *mu = malloc(M1 * 4), *rs = malloc(M1 * 4);
	E.cpu->ops->residual_ln_forward(E.cc, o, r, mu, rs, NULL, x, NULL, w, b, NULL, M1, d);
	/* the CPU's answer for M0 rows: dx, dy, dw, db (from zero) and dbias = dout^T 1 */
	float *dx = malloc((size_t)M0 * d * 4), *dy = malloc((size_t)M0 * d * 4), *dw = calloc(d, 4), *db = calloc(d, 4),
	      *dbias = calloc(d, 4);
	E.cpu->ops->residual_ln_backward(E.cc, dx, dy, dw, db, go, r, mu, rs, NULL, w, 0.0f, M0, d);
	for (int c = 0; c < d; c++) {
		double s = 0;
		for (int i = 0; i < M0; i++)
			s += go[(size_t)i * d + c];
		dbias[c] = (float)s;
	}
	float *gr = g_up(&E, r, n1 * 4), *gm = g_up(&E, mu, M1 * 4), *gs = g_up(&E, rs, M1 * 4), *gw = g_up(&E, w, d * 4),
	      *gg = g_up(&E, go, n1 * 4);
	float *gdx = g_poison(&E, (size_t)M0 * d), *gdy = g_poison(&E, (size_t)M0 * d), *gdw = g_poison(&E, d),
	      *gdb = g_poison(&E, d), *gdbias = g_poison(&E, d);
	float *bx = g_poison(&E, n1), *by = g_poison(&E, n1), *bw = g_poison(&E, d), *bb = g_poison(&E, d);
	float *ob = g_randn(&E, MB, 1), *gob = g_up(&E, ob, (size_t)MB * 4), *g1 = g_poison(&E, 1);
	struct sb_ctx *c = E.gc;
	const struct sb_backend_ops *ops = g->ops;
#define STEP_M0()                                                                                                  \
	do {                                                                                                       \
		ops->zero(c, gdw, d * 4);                                                                          \
		ops->zero(c, gdb, d * 4);                                                                          \
		ops->zero(c, gdbias, d * 4);                                                                       \
		ops->residual_ln_backward(c, gdx, gdy, gdw, gdb, gg, gr, gm, gs, NULL, gw, 0.0f, M0, d);           \
		ops->matmul_backward(c, NULL, NULL, gdbias, gg, NULL, NULL, M0, d, d, 0);                        \
	} while (0)
	STEP_M0(); /* op by op: the buffers of this size */
	void *graph = NULL;
	int rc = ops->graph_begin(g, &err);
	if (!rc) {
		STEP_M0();
		rc = ops->graph_end(g, &graph, &err);
	}
	char det[400];
	if (rc) {
		g_check(&E, 0, "replay after the scratch grew: record", err.msg);
	} else {
		/* grow both op by op (other outputs) */
		ops->residual_ln_backward(c, bx, by, bw, bb, gg, gr, gm, gs, NULL, gw, 0.0f, M1, d);
		ops->matmul_backward(c, NULL, NULL, g1, gob, NULL, NULL, MB, 1, 1, 0);
		size_t ret = sb_cuda_retired_bytes ? sb_cuda_retired_bytes(g) : 0;
		/* new buffers where the pool would put the old scratch (4736 bytes) and ones (256 KiB) */
		enum { NV = 8 };
		static const size_t vsz[2] = {4736, 65536 * 4};
		void *vic[2][NV];
		unsigned char *pat = malloc(vsz[1]);
		memset(pat, 0x5a, vsz[1]);
		for (int k = 0; k < 2; k++)
			for (int v = 0; v < NV; v++) {
				vic[k][v] = sb_be_alloc(g, vsz[k]);
				if (vic[k][v])
					ops->upload(g, vic[k][v], pat, vsz[k], &(struct sb_err){0});
			}
		rc = ops->graph_launch(g, graph, &err);
		snprintf(det, sizeof det, "graph_launch %s; %zu bytes retired while the recording lives",
			 rc ? err.msg : "ok", ret);
		g_check(&E, !rc && (!sb_cuda_retired_bytes || ret > 0), "replay after the scratch grew: launch", det);
		const char *sh = "M0=64 d=64 recorded, grown to M=12800 (ln) and M=70000 (bias)";
		g_cmp(&E, "replayed residual_ln_backward dx", sh, gdx, dx, (size_t)M0 * d, TOL_EX);
		g_cmp(&E, "replayed residual_ln_backward dy", sh, gdy, dy, (size_t)M0 * d, TOL_EX);
		g_cmp(&E, "replayed residual_ln_backward dw", sh, gdw, dw, d, TOL_RED);
		g_cmp(&E, "replayed residual_ln_backward db", sh, gdb, db, d, TOL_RED);
		g_cmp(&E, "replayed matmul_backward dbias", sh, gdbias, dbias, d, TOL_RED);
		size_t bad = 0, nv = 0;
		for (int k = 0; k < 2; k++)
			for (int v = 0; v < NV; v++) {
				if (!vic[k][v])
					continue;
				nv++;
				unsigned char *h = (unsigned char *)g_down(&E, vic[k][v], vsz[k], &err);
				if (!h || memcmp(h, pat, vsz[k]))
					bad++;
				free(h);
				sb_be_free(g, vic[k][v]);
			}
		snprintf(det, sizeof det, "%zu of %zu buffers allocated after the growth were written by the replay", bad,
			 nv);
		g_check(&E, bad == 0 && nv == 2 * NV, "a replay does not write to freed scratch", det);
		free(pat);
		ops->graph_free(g, graph);
		size_t after = sb_cuda_retired_bytes ? sb_cuda_retired_bytes(g) : 0;
		snprintf(det, sizeof det, "%zu bytes retired after the last recording was freed", after);
		g_check(&E, after == 0, "retired scratch freed with the last recording", det);
	}
#undef STEP_M0
	FREED(gr, gm, gs, gw, gg, gdx, gdy, gdw, gdb, gdbias, bx, by, bw, bb, gob, g1);
	FREEH(x, w, b, go, o, r, mu, rs, dx, dy, dw, db, dbias, ob);
	{
		float *z = g_poison(&E, 1), *h = z ? g_down(&E, z, 4, &err) : NULL;
		int f = sb_cuda_failed ? sb_cuda_failed(g) : 0;
		snprintf(det, sizeof det, "no pending or sticky error: %s; sb_cuda_failed %d", h ? "none" : err.msg, f);
		g_check(&E, h && !f, "replay after the scratch grew: backend healthy", det);
		free(h);
		sb_be_free(g, z);
	}
	sb_backend_close(g);
	E.gpu = save.gpu;
	E.gc = save.gc;
}

int main(int argc, char **argv)
{
	const char *device = "cuda", *tsv = NULL;
	uint64_t seed = (uint64_t)time(NULL);
	int quick = 0, errors_only = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--device") && i + 1 < argc)
			device = argv[++i];
		else if (!strcmp(argv[i], "--quick"))
			quick = 1;
		else if (!strcmp(argv[i], "--errors"))
			errors_only = 1;
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--tsv") && i + 1 < argc)
			tsv = argv[++i];
		else {
			fprintf(stderr, "usage: gpu_ops [--device cuda[:N][,tf32]] [--seed S] [--tsv FILE] [--quick | --errors]\n"
			                "  --quick   every kernel once on small shapes (both attention layouts), none of\n"
			                "            the deliberate device errors: for compute-sanitizer\n"
			                "  --errors  only the deliberate device errors (refused shapes, data errors,\n"
			                "            errors that must not stick): for tests/cudaemu/mutants.sh\n");
			return 2;
		}
	}
	if (quick && errors_only) {
		fprintf(stderr, "gpu_ops: --quick and --errors are two different runs: give one\n");
		return 2;
	}
	struct sb_err err = {0};
	E.rs = seed * 2654435761u + 1;
	E.section = "ops";
	g_device = device;
	printf("# gpu_ops: seed %llu, device %s\n", (unsigned long long)seed, device);
	if (sb_backend_cpu_open(0, &E.cpu, &err) || sb_backend_open(device, 1, &E.gpu, &err)) {
		printf("not ok 1 - open backends: %s\n0 passed, 1 failed\n", err.msg);
		return 5;
	}
	printf("# cpu: %s\n# gpu: %s\n", E.cpu->device, E.gpu->device);
	if (strstr(E.gpu->device, "tf32"))
		TOL_MM = 1e-5;
	E.cc = sb_be_main(E.cpu);
	E.gc = sb_be_main(E.gpu);
	if (tsv) {
		E.tsv = fopen(tsv, "w");
		if (E.tsv)
			fprintf(E.tsv, "section\top\tshape\tresult\tnmse\ttol\tmax_abs\tn\tbit_identical_or_detail\n");
	}
	double t0 = g_now();
	if (errors_only) {
		t_errors();
		goto done;
	}
	if (quick) {
		/* every kernel once, small: the memory, race and synchronisation checkers run the
		 * device code 10-100x slower; no t_errors (its device errors are deliberate) */
		static const char *qm[] = {"softmax",  "topk_softmax_025", "bottomk_softmax_025",     "sparsemax",
		                           "entmax15", "entmax_bisect",    "headwise_adaptive_entmax"};
		t_matmul(33, 17, 31);
		t_matmul(517, 48, 100);
		t_ln(37, 24, 0);
		t_ln(99, 100, 2);
		t_gelu(1000, 0.1f, 3);
		for (size_t mi = 0; mi < sizeof qm / sizeof qm[0]; mi++) {
			double a = strcmp(qm[mi], "entmax_bisect") ? 1.5 : 1.3;
			int hae = !strcmp(qm[mi], "headwise_adaptive_entmax");
			t_attention(qm[mi], a, 0, 0, hae, 2, 50, 64, 4, 0);  /* shared-memory layout */
			t_attention(qm[mi], a, 0, 1, hae, 2, 17, 24, 3, 1);  /* text rows, exclusion */
			t_attention(qm[mi], a, 0, 0, hae, 1, 200, 64, 2, 0); /* global layout */
			t_attention(qm[mi], a, 0, 0, hae, 1, 257, 32, 2, 0); /* global, 32 keys per lane */
		}
		t_attention("entmax15", 1.5, 1, 0, 0, 2, 50, 64, 4, 0); /* the unrolled bisection */
		g_ties = 1; /* the k-th score tied: both layouts, both k-methods */
		t_attention("topk_softmax_025", 1.5, 0, 0, 0, 2, 50, 64, 4, 0);
		t_attention("bottomk_softmax_025", 1.5, 0, 0, 0, 1, 200, 64, 2, 0);
		g_ties = 0;
		g_bad = 1; /* rows with a NaN or an infinite score: both layouts */
		t_attention("entmax15", 1.5, 0, 0, 0, 2, 50, 64, 4, 0);
		t_attention("topk_softmax_025", 1.5, 0, 0, 0, 1, 200, 64, 2, 0);
		g_bad = 0;
		t_localmix(3, 10, 32, 3, 0);
		t_localmix(3, 10, 32, 0, 1);
		t_embed(3, 3, 10, 9, 3, 9, 23, 32);
		t_loss_optim(37, 100, 1000003);
		t_graph();
		t_graph_scratch(); /* replays that must not touch scratch freed or regrown since */
		goto done;
	}
	/* dense: sizes 1, primes, the model's */
	static const int mm[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 17, 31}, {64, 64, 192}, {12800, 64, 192}, {12800, 64, 64},
				    {12800, 64, 256}, {12800, 256, 64}, {256, 64, 10}, {12544, 16, 64}, {517, 48, 100}};
	for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++)
		t_matmul(mm[i][0], mm[i][1], mm[i][2]);
	static const int ln[][2] = {{1, 16}, {37, 24}, {5, 8}, {12800, 64}, {6400, 128}, {99, 100}, {3, 256}};
	for (size_t i = 0; i < sizeof ln / sizeof ln[0]; i++)
		for (int v = 0; v < 3; v++)
			t_ln(ln[i][0], ln[i][1], v);
	t_gelu(1, 0.1f, 0);
	t_gelu(1000003, 0.0f, 0);
	t_gelu(1000003, 0.1f, 3);
	t_gelu(12800 * 256, 0.1f, 12800 * 256 * 3);
	/* attention: every method, row lengths of the study (50, 65, 97) and odd ones */
	static const struct {
		const char *m;
		double a;
		int unrolled, hae;
	} am[] = {{"softmax", 1.5, 0, 0},          {"topk_softmax_0125", 1.5, 0, 0}, {"topk_softmax_025", 1.5, 0, 0},
		  {"topk_softmax_05", 1.5, 0, 0},  {"bottomk_softmax_025", 1.5, 0, 0}, {"sparsemax", 1.5, 0, 0},
		  {"entmax15", 1.5, 0, 0},         {"entmax_bisect", 1.3, 0, 0},     {"entmax_bisect", 2.0, 0, 0},
		  {"headwise_adaptive_entmax", 1.5, 0, 1}, {"entmax15", 1.5, 1, 0}, {"headwise_adaptive_entmax", 1.5, 1, 1},
		  {"bottomk_softmax_0125", 1.5, 0, 0},   {"entmax_bisect", 1.3, 1, 0}};
	/* T = 200 with d/NH = 32 needs more shared memory than a block gets: the global-memory
	 * kernels; 257..512: the global ones with 32 keys per lane */
	static const int as[][4] = {{4, 50, 64, 4}, {3, 65, 64, 4}, {2, 97, 128, 4}, {3, 10, 32, 2}, {2, 17, 24, 3},
				    {1, 1, 16, 1},  {1, 200, 64, 2}, {1, 257, 32, 2}, {1, 384, 64, 4}, {1, 512, 64, 4}};
	for (size_t mi = 0; mi < sizeof am / sizeof am[0]; mi++)
		for (size_t si = 0; si < sizeof as / sizeof as[0]; si++) {
			t_attention(am[mi].m, am[mi].a, am[mi].unrolled, 0, am[mi].hae, as[si][0], as[si][1], as[si][2],
				    as[si][3], 0);
			if (si == 2 || si == 3 || si == 6 || si == 7) { /* text rows: margin and exclusion (shared and global layouts) */
				t_attention(am[mi].m, am[mi].a, am[mi].unrolled, 0, am[mi].hae, as[si][0], as[si][1],
					    as[si][2], as[si][3], 1);
				t_attention(am[mi].m, am[mi].a, am[mi].unrolled, 1, am[mi].hae, as[si][0], as[si][1],
					    as[si][2], as[si][3], 1);
			}
		}
	/* the compact model's full-size block: B = 256 */
	t_attention("softmax", 1.5, 0, 0, 0, 256, 50, 64, 4, 0);
	t_attention("headwise_adaptive_entmax", 1.5, 0, 0, 1, 256, 50, 64, 4, 0);
	/* tied scores: every k-method in both layouts, and the other normalisers on ties */
	g_ties = 1;
	for (size_t mi = 0; mi < sizeof am / sizeof am[0]; mi++) {
		t_attention(am[mi].m, am[mi].a, am[mi].unrolled, 0, am[mi].hae, 4, 50, 64, 4, 0);
		t_attention(am[mi].m, am[mi].a, am[mi].unrolled, 1, am[mi].hae, 1, 200, 64, 2, 1);
	}
	g_ties = 0;
	g_bad = 1; /* rows with a NaN or an infinite score: every method, both layouts */
	for (size_t mi = 0; mi < sizeof am / sizeof am[0]; mi++) {
		t_attention(am[mi].m, am[mi].a, am[mi].unrolled, 0, am[mi].hae, 2, 50, 64, 4, 0);
		t_attention(am[mi].m, am[mi].a, am[mi].unrolled, 0, am[mi].hae, 1, 200, 64, 2, 0);
	}
	g_bad = 0;
	/* more than 64 heads: d alpha of every head (k_dalpha's grid) */
	t_attention("headwise_adaptive_entmax", 1.5, 0, 0, 1, 2, 10, 160, 80, 0);
	t_attention("entmax_bisect", 1.3, 0, 0, 0, 2, 10, 130, 130, 0);
	t_localmix(3, 10, 32, 3, 0);
	t_localmix(2, 50, 64, 7, 0);
	t_localmix(3, 10, 32, 0, 1);
	t_localmix(2, 97, 64, 0, 1);
	t_embed(5, 1, 28, 28, 4, 96, 50, 64);
	t_embed(3, 3, 10, 9, 3, 9, 23, 32);
	t_loss_optim(1, 10, 1);
	t_loss_optim(256, 10, 107978);
	t_loss_optim(37, 100, 1000003);
	t_errors();
	t_graph();
	t_graph_scratch();
done:
	printf("# gpu_ops: %.1f s\n", g_now() - t0);
	{ /* a sticky backend error surfaces at the next download */
		float *z = g_poison(&E, 1), *h = z ? g_down(&E, z, 4, &err) : NULL;
		g_check(&E, h != NULL, "no sticky backend error at the end", h ? "none" : err.msg);
		free(h);
		sb_be_free(E.gpu, z);
	}
	if (E.tsv)
		fclose(E.tsv);
	sb_backend_close(E.gpu);
	sb_backend_close(E.cpu);
	printf("%d passed, %d failed\n", E.n - E.fail, E.fail);
	return E.fail ? 1 : 0;
}
