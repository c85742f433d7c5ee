/* gpu_train — a few training steps of every method on the CPU and the CUDA
 * backend from the same initialisation, data, batches and dropout masks:
 * per-step losses and gradient norms, and the parameters at the end, compared
 * (the products differ in rounding, cuBLAS vs OpenBLAS, so the runs drift
 * apart slowly; the tolerances below are far above that and far below what a
 * wrong op gives). Then the multi-cell driver (train/multicell.c): cells run
 * together must give the bits of the same cells run alone, and a failing cell
 * must leave the others running.
 *
 *   gpu_train [--device cuda[:N][,tf32]] [--steps S] [--tsv FILE]
 * Exit 0 all passed, 1 some failed, 5 no device. Ends with "N passed, N failed".
 */
#include "gpu_common.h"
#include "train_common.h"

#include "../../train/multicell.h"

static struct genv E;
static int STEPS = 6, BATCH = 64;

struct run {
	double loss[16], gnorm[16];
	float *params; /* host copy at the end */
	size_t n;
	int rc;
	struct sb_err err;
};

struct cfgspec {
	const char *method;
	double alpha;
	int unrolled, text, hybrid;
	enum sb_mask_mode mask;
};

static int train_run(struct sb_backend *be, const struct sb_dataset *ds, const struct cfgspec *cs, uint64_t seed,
		     struct run *out)
{
	struct sb_err *err = &out->err;
	memset(out, 0, sizeof *out);
	struct sb_norm nm;
	struct sb_encoder_cfg cfg;
	struct sb_encoder *m = NULL;
	struct sb_encoder_data data;
	SB_TRY(out->rc = sb_norm_parse(cs->method, cs->alpha, &nm, err));
	nm.unrolled = cs->unrolled;
	nm.mask = cs->mask;
	SB_TRY(out->rc = sb_encoder_cfg_from_dataset(&cfg, ds, "compact", cs->hybrid ? "local_hybrid" : "plain", &nm, err));
	SB_TRY(out->rc = sb_encoder_new(&cfg, be, BATCH, &m, err));
	int rc = sb_encoder_init(m, seed, err);
	if (!rc)
		rc = sb_encoder_data_open(be, ds, &data, err);
	if (rc) {
		sb_encoder_free(m);
		return out->rc = rc;
	}
	struct sb_rng r;
	sb_rng_init(&r, seed, SB_RNG_SHUFFLE, 0);
	uint32_t *perm = malloc((size_t)ds->n * 4);
	sb_rng_permutation(&r, perm, (size_t)ds->n);
	struct sb_step_opts o;
	sb_step_opts_default(&o);
	o.seed = seed;
	for (int s = 0; s < STEPS && !rc; s++) {
		o.step = s;
		struct sb_step_result res;
		rc = sb_encoder_train_step(m, &data, perm + ((size_t)s * BATCH) % (size_t)(ds->n - BATCH), BATCH, &o, &res, err);
		out->loss[s] = res.loss;
		out->gnorm[s] = res.grad_norm;
	}
	if (!rc) {
		out->n = m->pstride;
		out->params = malloc(m->pstride * 4);
		rc = be->ops->download(be, out->params, m->params, m->pstride * 4, err);
	}
	free(perm);
	sb_encoder_data_close(be, &data);
	sb_encoder_free(m);
	return out->rc = rc;
}

static const struct cfgspec specs[] = {
	{"softmax", 1.5, 0, 0, 0, SB_MASK_MARGIN},
	{"topk_softmax_0125", 1.5, 0, 0, 0, SB_MASK_MARGIN},
	{"topk_softmax_025", 1.5, 0, 0, 0, SB_MASK_MARGIN},
	{"topk_softmax_05", 1.5, 0, 0, 0, SB_MASK_MARGIN},
	{"sparsemax", 1.5, 0, 0, 0, SB_MASK_MARGIN},
	{"entmax15", 1.5, 0, 0, 0, SB_MASK_MARGIN},
	{"headwise_adaptive_entmax", 1.5, 0, 0, 0, SB_MASK_MARGIN},
	{"entmax_bisect", 1.3, 0, 0, 0, SB_MASK_MARGIN},
	{"bottomk_softmax_025", 1.5, 0, 0, 0, SB_MASK_MARGIN},
	{"entmax15", 1.5, 1, 0, 0, SB_MASK_MARGIN},
	{"softmax", 1.5, 0, 0, 1, SB_MASK_MARGIN},
	{"headwise_adaptive_entmax", 1.5, 0, 0, 1, SB_MASK_MARGIN},
	{"topk_softmax_025", 1.5, 0, 1, 0, SB_MASK_MARGIN},
	{"sparsemax", 1.5, 0, 1, 0, SB_MASK_EXCLUDE},
	{"headwise_adaptive_entmax", 1.5, 0, 1, 1, SB_MASK_MARGIN},
};

static void label_of(char *buf, size_t n, const struct cfgspec *cs)
{
	snprintf(buf, n, "%s%s %s %s%s", cs->method, cs->unrolled ? "(unrolled)" : "", cs->text ? "text" : "image",
		 cs->hybrid ? "local_hybrid" : "plain", cs->text ? (cs->mask == SB_MASK_MARGIN ? " margin" : " exclude") : "");
}

/* ---- multi-cell ---- */
struct mcarg {
	const struct sb_dataset *ds;
	const struct cfgspec *cs;
	uint64_t seed;
	int fail_on_purpose;
	struct run res;
};

static int mc_fn(struct sb_backend *be, struct sb_mc_cell *cell, struct sb_err *err)
{
	struct mcarg *a = cell->arg;
	if (a->fail_on_purpose)
		return SB_ERR(err, SB_EDATA, "%s: a cell that fails on purpose (bad data)", cell->id);
	int rc = train_run(be, a->ds, a->cs, a->seed, &a->res);
	if (rc)
		*err = a->res.err;
	return rc;
}

int main(int argc, char **argv)
{
	const char *device = "cuda", *tsv = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--device") && i + 1 < argc)
			device = argv[++i];
		else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			STEPS = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--tsv") && i + 1 < argc)
			tsv = argv[++i];
		else {
			fprintf(stderr, "usage: gpu_train [--device D] [--steps S] [--tsv FILE]\n");
			return 2;
		}
	}
	if (STEPS < 1 || STEPS > 16)
		STEPS = 6;
	struct sb_err err = {0};
	E.section = "train";
	if (sb_backend_cpu_open(0, &E.cpu, &err) || sb_backend_open(device, 1, &E.gpu, &err)) {
		printf("not ok 1 - open backends: %s\n0 passed, 1 failed\n", err.msg);
		return 5;
	}
	printf("# cpu: %s\n# gpu: %s\n", E.cpu->device, E.gpu->device);
	if (tsv && (E.tsv = fopen(tsv, "w")))
		fprintf(E.tsv, "section\tcheck\tshape\tresult\tnmse\ttol\tmax_abs\tn\tdetail\n");
	struct sb_dataset img, txt;
	synth_dataset(&img, 0, 1024, 7);
	synth_dataset(&txt, 1, 1024, 8);
	double t0 = g_now();
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
		const struct cfgspec *cs = &specs[i];
		const struct sb_dataset *ds = cs->text ? &txt : &img;
		struct run a, b;
		char lab[128], det[600];
		label_of(lab, sizeof lab, cs);
		train_run(E.cpu, ds, cs, 11, &a);
		train_run(E.gpu, ds, cs, 11, &b);
		if (a.rc || b.rc) {
			snprintf(det, sizeof det, "cpu: %s | cuda: %s", a.rc ? a.err.msg : "ok", b.rc ? b.err.msg : "ok");
			g_check(&E, 0, lab, det);
			free(a.params);
			free(b.params);
			continue;
		}
		double worst = 0, wg = 0;
		int n = 0;
		n += snprintf(det + n, sizeof det - n, "losses cpu/cuda:");
		for (int s = 0; s < STEPS; s++) {
			double rel = fabs(a.loss[s] - b.loss[s]) / (fabs(a.loss[s]) + 1e-12);
			double relg = fabs(a.gnorm[s] - b.gnorm[s]) / (fabs(a.gnorm[s]) + 1e-12);
			worst = rel > worst ? rel : worst;
			wg = relg > wg ? relg : wg;
			if (s == 0 || s == STEPS - 1)
				n += snprintf(det + n, sizeof det - n, " [%d] %.7g/%.7g", s, a.loss[s], b.loss[s]);
		}
		double num = 0, den = 0;
		for (size_t k = 0; k < a.n; k++) {
			double d = (double)a.params[k] - b.params[k];
			num += d * d;
			den += (double)a.params[k] * a.params[k];
		}
		double nmse = num / (den + 1e-300);
		int ok = worst <= 1e-4 && wg <= 1e-3 && nmse <= 1e-6;
		snprintf(det + n, sizeof det - n, "; max rel loss diff %.3g (tol 1e-4), grad norm %.3g (1e-3), params nmse after %d steps %.3g (1e-6)",
			 worst, wg, STEPS, nmse);
		g_check(&E, ok, lab, det);
		free(a.params);
		free(b.params);
	}
	printf("# cpu vs cuda training: %.1f s\n", g_now() - t0);

	/* multi-cell: 6 cells at once == the same cells alone (bit for bit); one failing cell isolated */
	E.section = "multicell";
	static const int mcs[] = {0, 2, 4, 6};
	enum { NC = 7 };
	struct mcarg args[NC];
	struct sb_mc_cell cells[NC];
	memset(args, 0, sizeof args);
	memset(cells, 0, sizeof cells);
	char ids[NC][32];
	for (int c = 0; c < NC; c++) {
		args[c].ds = &img;
		args[c].cs = &specs[mcs[c % 4]];
		args[c].seed = 100 + c;
		args[c].fail_on_purpose = c == NC - 1;
		snprintf(ids[c], sizeof ids[c], "cell%d", c);
		cells[c].id = ids[c];
		cells[c].arg = &args[c];
	}
	struct sb_mc_opts mo = {device, 1, 0, NULL, NULL};
	t0 = g_now();
	int rc = sb_multicell_run(&mo, cells, NC, mc_fn, &err);
	double tmc = g_now() - t0;
	char det[400];
	snprintf(det, sizeof det, "returned %d (%s) in %.2f s", rc, rc ? err.msg : "ok", tmc);
	g_check(&E, rc == SB_EDATA, "multicell: the run reports the failed cell", det);
	for (int c = 0; c < NC; c++) {
		if (c == NC - 1) {
			snprintf(det, sizeof det, "status %s: %s", sb_mc_status_name(cells[c].status), cells[c].err.msg);
			g_check(&E, cells[c].status == SB_MC_FAILED, "multicell: failing cell is status failed (not failed_device)", det);
			continue;
		}
		struct run alone;
		train_run(E.gpu, &img, args[c].cs, args[c].seed, &alone);
		int same = cells[c].status == SB_MC_OK && alone.rc == 0 && args[c].res.n == alone.n &&
			   !memcmp(args[c].res.params, alone.params, alone.n * 4) &&
			   !memcmp(args[c].res.loss, alone.loss, sizeof alone.loss);
		snprintf(det, sizeof det, "%s seed %llu: status %s; losses and %zu parameters %s", args[c].cs->method,
			 (unsigned long long)args[c].seed, sb_mc_status_name(cells[c].status), alone.n,
			 same ? "bit-identical to the cell trained alone" : "DIFFER from the cell trained alone");
		g_check(&E, same, "multicell == single cell", det);
		free(alone.params);
		free(args[c].res.params);
	}
	synth_free(&img);
	synth_free(&txt);
	if (E.tsv)
		fclose(E.tsv);
	sb_backend_close(E.gpu);
	sb_backend_close(E.cpu);
	printf("%d passed, %d failed\n", E.n - E.fail, E.fail);
	return E.fail ? 1 : 0;
}
