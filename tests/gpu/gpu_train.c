/* gpu_train — training on the CPU and the CUDA backend, compared step by step; the
 * recorded (CUDA-graph) step against the op-by-op step; the multi-cell driver.
 *
 * 1. CPU vs CUDA, teacher-forced: before every step the CUDA model is given the CPU
 *    model's state (parameters, AdamW moments, step), both take the same step (same
 *    batch, dropout masks), and the losses, gradient norms and parameters after the
 *    step are compared. Per step the backends differ only by rounding (cuBLAS vs the
 *    CPU backend's own GEMM, reductions in another order), so nothing accumulates over
 *    steps. Top-k and bottom-k select exactly k keys per row: when the k-th and
 *    (k+1)-th scores of a row are closer than that rounding, the two backends may
 *    select different keys, and the row's probabilities then differ by O(1) (a
 *    discontinuity of the method, not an error). Every step therefore also compares
 *    the selected sets of every attention row (both models keep the whole batch in
 *    one tile), counts the rows that differ, and measures how far the flipped keys'
 *    CPU scores are from the row's k-th score. A step passes with the plain
 *    tolerances (loss 1e-4, gradient norm 1e-3, parameters NMSE 1e-6) when no row
 *    flipped; with flipped rows it passes when every flip of the first layer (or of a
 *    sample not already flipped in an earlier layer) is a near-tie (distance <= 1e-5
 *    relative) and the step is within the widened tolerances (loss 2e-3, gradient norm
 *    2e-2, parameters 1e-5): one flipped row of the 2 x 64 x 4 x 50 = 25600 moves the
 *    batch loss by at most about 1/64 of its sample's change.
 * 2. The same cells trained 8 steps with recorded steps (graphs) and op by op: the
 *    same bits, and the recording must have been used where the backend offers it.
 * 3. Multi-cell (train/multicell.c): cells at once == the same cells alone, bit for
 *    bit; a failing cell is isolated.
 *
 *   gpu_train [--device cuda[:N][,tf32]] [--steps S] [--tsv FILE]
 * Exit 0 all passed, 1 some failed, 5 no device. Ends with "N passed, N failed".
 */
#include "gpu_common.h"
#include "train_common.h"

#include "../../train/multicell.h"

static struct genv E;
static int STEPS = 6, BATCH = 64;

struct cfgspec {
	const char *method;
	double alpha;
	int unrolled, text, hybrid;
	enum sb_mask_mode mask;
};

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

/* a model of the spec on be, initialised from seed, with the dataset on the device */
struct mdl {
	struct sb_encoder *m;
	struct sb_encoder_data data;
	int have_data;
};

static int mdl_open(struct mdl *md, struct sb_backend *be, const struct sb_dataset *ds, const struct cfgspec *cs,
		    uint64_t seed, struct sb_err *err)
{
	memset(md, 0, sizeof *md);
	struct sb_norm nm;
	struct sb_encoder_cfg cfg;
	SB_TRY(sb_norm_parse(cs->method, cs->alpha, &nm, err));
	nm.unrolled = cs->unrolled;
	nm.mask = cs->mask;
	SB_TRY(sb_encoder_cfg_from_dataset(&cfg, ds, "compact", cs->hybrid ? "local_hybrid" : "plain", &nm, err));
	SB_TRY(sb_encoder_new(&cfg, be, BATCH, &md->m, err));
	int rc = sb_encoder_init(md->m, seed, err);
	if (!rc)
		md->have_data = !(rc = sb_encoder_data_open(be, ds, &md->data, err));
	return rc;
}

static void mdl_close(struct mdl *md)
{
	if (md->have_data)
		sb_encoder_data_close(md->m->be, &md->data);
	sb_encoder_free(md->m);
	memset(md, 0, sizeof *md);
}

static uint32_t *perm_of(const struct sb_dataset *ds, uint64_t seed)
{
	struct sb_rng r;
	sb_rng_init(&r, seed, SB_RNG_SHUFFLE, 0);
	uint32_t *perm = malloc((size_t)ds->n * 4);
	sb_rng_permutation(&r, perm, (size_t)ds->n);
	return perm;
}

static const uint32_t *batch_of(const uint32_t *perm, const struct sb_dataset *ds, int s)
{
	return perm + ((size_t)s * BATCH) % (size_t)(ds->n - BATCH);
}

static float *params_of(struct sb_encoder *m, struct sb_err *err)
{
	float *h = malloc(m->pstride * 4);
	if (m->be->ops->download(m->be, h, m->params, m->pstride * 4, err)) {
		free(h);
		return NULL;
	}
	return h;
}

/* ---- selected sets of the k-methods ---- */

struct flips {
	long rows, flipped, flipped_checked; /* rows compared; rows whose selected set differs; those gap-checked */
	double worst_gap;                    /* largest relative distance of a checked flipped key from the k-th score */
};

static int cmp_desc(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* rows of layer l whose selected set (P > 0) differs; hit[b] marks samples with a flip;
 * nv[b]: the sample's valid keys (k = the method's k of them; NULL: all T) */
static int compare_sets(struct sb_encoder *mc, struct sb_encoder *mg, const struct sb_norm *nm, int l, int B,
			const int *nv, unsigned char *hit, struct flips *f, struct sb_err *err)
{
	int NH = mc->cfg.heads, T = mc->T;
	size_t n = (size_t)B * NH * T * T;
	float *Sc = malloc(n * 4), *Pc = malloc(n * 4), *Pg = malloc(n * 4), *row = malloc((size_t)T * 4);
	int rc = 0;
	if (sb_encoder_saved_attention(mc, l, B, Sc, Pc, err) < 0 || sb_encoder_saved_attention(mg, l, B, NULL, Pg, err) < 0)
		rc = SB_EINTERNAL;
	unsigned char *now = calloc((size_t)B, 1);
	int largest = nm->kind == SB_NORM_TOPK;
	for (size_t r = 0; !rc && r < (size_t)B * NH * T; r++) {
		int b = (int)(r / ((size_t)NH * T));
		int n = nv ? nv[b] : T, k = sb_norm_topk_k(nm->ratio, n);
		const float *s = Sc + r * T, *pc = Pc + r * T, *pg = Pg + r * T;
		f->rows++;
		int differ = 0;
		for (int j = 0; j < T; j++)
			differ |= (pc[j] > 0) != (pg[j] > 0);
		if (!differ)
			continue;
		f->flipped++;
		now[b] = 1;
		if (hit[b]) /* a consequence of an earlier layer's flip in this sample */
			continue;
		f->flipped_checked++;
		for (int j = 0; j < n; j++)
			row[j] = largest ? s[j] : -s[j];
		qsort(row, (size_t)n, 4, cmp_desc);
		double kth = largest ? row[k - 1] : -row[k - 1];
		for (int j = 0; j < T; j++)
			if ((pc[j] > 0) != (pg[j] > 0)) { /* a flip at a padded key is never a near-tie */
				double g = j < n ? fabs((double)s[j] - kth) / (1.0 + fabs(kth)) : INFINITY;
				f->worst_gap = g > f->worst_gap ? g : f->worst_gap;
			}
	}
	for (int b = 0; b < B; b++)
		hit[b] |= now[b];
	free(now);
	free(Sc);
	free(Pc);
	free(Pg);
	free(row);
	return rc;
}

/* ---- 1. CPU vs CUDA, teacher-forced ---- */

static void compare_backends(struct sb_backend *cpu, struct sb_backend *gpu, const struct sb_dataset *ds,
			     const struct cfgspec *cs)
{
	char lab[128], det[900];
	label_of(lab, sizeof lab, cs);
	struct sb_err err = {0};
	struct mdl c, g;
	if (mdl_open(&c, cpu, ds, cs, 11, &err) || mdl_open(&g, gpu, ds, cs, 11, &err)) {
		g_check(&E, 0, lab, err.msg);
		mdl_close(&c);
		mdl_close(&g);
		return;
	}
	int kmeth = c.m->cfg.norm.kind == SB_NORM_TOPK || c.m->cfg.norm.kind == SB_NORM_BOTTOMK;
	uint32_t *perm = perm_of(ds, 11);
	struct sb_step_opts o;
	sb_step_opts_default(&o);
	o.seed = 11;
	double wl = 0, wg = 0, wp = 0, wl_f = 0;
	int bad = 0, steps_flipped = 0, reported = 0;
	struct flips fl = {0, 0, 0, 0};
	unsigned char *hit = calloc((size_t)BATCH, 1);
	for (int s = 0; s < STEPS && !bad; s++) {
		/* the CUDA model takes the CPU model's state */
		struct sb_tensors ts;
		sb_tensors_init(&ts);
		int rc = sb_encoder_to_tensors(c.m, &ts, 1, &err);
		if (!rc)
			rc = sb_encoder_from_tensors(g.m, &ts, 1, &err);
		sb_tensors_free(&ts);
		o.step = s;
		struct sb_step_result rc_, rg;
		if (!rc)
			rc = sb_encoder_train_step(c.m, &c.data, batch_of(perm, ds, s), BATCH, &o, &rc_, &err);
		if (!rc)
			rc = sb_encoder_train_step(g.m, &g.data, batch_of(perm, ds, s), BATCH, &o, &rg, &err);
		float *pc = rc ? NULL : params_of(c.m, &err), *pg = rc || !pc ? NULL : params_of(g.m, &err);
		if (!pc || !pg) {
			snprintf(det, sizeof det, "step %d: %s", s, err.msg);
			g_check(&E, 0, lab, det);
			free(pc);
			free(pg);
			bad = reported = 1;
			break;
		}
		double num = 0, den = 0;
		for (size_t i = 0; i < c.m->pstride; i++) {
			double d = (double)pc[i] - pg[i];
			num += d * d;
			den += (double)pc[i] * pc[i];
		}
		free(pc);
		free(pg);
		double rl = fabs(rc_.loss - rg.loss) / (fabs(rc_.loss) + 1e-12);
		double rgn = fabs(rc_.grad_norm - rg.grad_norm) / (fabs(rc_.grad_norm) + 1e-12);
		double np = num / (den + 1e-300);
		struct flips f1 = {0, 0, 0, 0};
		memset(hit, 0, (size_t)BATCH);
		int nv[1024];
		const uint32_t *bi = batch_of(perm, ds, s);
		for (int b = 0; b < BATCH; b++) /* text: CLS + the tokens (as gather_tokens) */
			nv[b] = ds->len ? 1 + ds->len[bi[b]] : c.m->T;
		for (int l = 0; kmeth && l < c.m->cfg.layers; l++)
			if (compare_sets(c.m, g.m, &c.m->cfg.norm, l, BATCH, nv, hit, &f1, &err)) {
				snprintf(det, sizeof det, "step %d: saved attention: %s", s, err.msg);
				g_check(&E, 0, lab, det);
				bad = reported = 1;
				break;
			}
		fl.rows += f1.rows;
		fl.flipped += f1.flipped;
		fl.flipped_checked += f1.flipped_checked;
		fl.worst_gap = f1.worst_gap > fl.worst_gap ? f1.worst_gap : fl.worst_gap;
		if (f1.flipped) {
			steps_flipped++;
			wl_f = rl > wl_f ? rl : wl_f;
			if (rl > 2e-3 || rgn > 2e-2 || np > 1e-5 || f1.worst_gap > 1e-5)
				bad = 1;
		} else {
			wl = rl > wl ? rl : wl;
			if (rl > 1e-4 || rgn > 1e-3 || np > 1e-6)
				bad = 1;
		}
		wg = rgn > wg ? rgn : wg;
		wp = np > wp ? np : wp;
	}
	int n = snprintf(det, sizeof det,
			 "%d teacher-forced steps: max rel loss diff %.3g (tol 1e-4), grad norm %.3g (1e-3), params "
			 "nmse after a step %.3g (1e-6)",
			 STEPS, wl, wg, wp);
	if (kmeth)
		snprintf(det + n, sizeof det - n,
			 "; selected sets: %ld of %ld rows differ (%ld checked, %ld consequential), in %d steps, worst "
			 "distance from the k-th score %.3g (near-tie tol 1e-5); steps with flips: max rel loss diff %.3g "
			 "(tol 2e-3)",
			 fl.flipped, fl.rows, fl.flipped_checked, fl.flipped - fl.flipped_checked, steps_flipped,
			 fl.worst_gap, wl_f);
	if (!reported)
		g_check(&E, !bad, lab, det);
	free(hit);
	free(perm);
	mdl_close(&c);
	mdl_close(&g);
}

/* ---- 2. recorded steps == op-by-op steps ---- */

struct run {
	struct sb_step_acc acc;
	float *params;
	size_t n;
	int64_t replayed, issued;
	char note[200];
	int rc;
	struct sb_err err;
};

/* STEPS + 2 asynchronous steps (the last with attention statistics, issued op by op) */
static int run_async(struct sb_backend *be, const struct sb_dataset *ds, const struct cfgspec *cs, uint64_t seed,
		     int graphs, struct run *out)
{
	memset(out, 0, sizeof *out);
	struct mdl md;
	int rc = mdl_open(&md, be, ds, cs, seed, &out->err);
	uint32_t *perm = perm_of(ds, seed);
	struct sb_step_opts o;
	sb_step_opts_default(&o);
	o.seed = seed;
	if (!rc)
		md.m->use_graphs = graphs;
	int ns = STEPS + 2;
	for (int s = 0; !rc && s < ns; s++) {
		o.step = s;
		o.lr = 1e-3f * (1.0f - (float)s / 20); /* a decaying rate: the recording reads each step's */
		o.stats = s == ns - 1;
		struct sb_attn_stats st;
		rc = sb_encoder_step(md.m, &md.data, batch_of(perm, ds, s), BATCH, &o, &st, &out->err);
	}
	if (!rc)
		rc = sb_encoder_acc_read(md.m, &out->acc, 0, &out->err);
	if (!rc) {
		out->n = md.m->pstride;
		out->params = params_of(md.m, &out->err);
		rc = out->params ? 0 : SB_EINTERNAL;
	}
	if (md.m) {
		out->replayed = md.m->steps_replayed;
		out->issued = md.m->steps_issued;
		snprintf(out->note, sizeof out->note, "%s", md.m->graph_note);
	}
	free(perm);
	mdl_close(&md);
	return out->rc = rc;
}

static void compare_graphs(const struct sb_dataset *ds, const struct cfgspec *cs)
{
	char lab[160], det[600];
	char l0[128];
	label_of(l0, sizeof l0, cs);
	snprintf(lab, sizeof lab, "recorded steps == op-by-op steps: %s", l0);
	struct run a, b;
	run_async(E.gpu, ds, cs, 21, 1, &a);
	run_async(E.gpu, ds, cs, 21, 0, &b);
	if (a.rc || b.rc) {
		snprintf(det, sizeof det, "recorded: %s | op by op: %s", a.rc ? a.err.msg : "ok", b.rc ? b.err.msg : "ok");
		g_check(&E, 0, lab, det);
	} else {
		int offered = E.gpu->ops->graph_begin != NULL;
		int same = a.n == b.n && !memcmp(a.params, b.params, a.n * 4) && !memcmp(&a.acc, &b.acc, sizeof a.acc);
		int used = !offered || a.replayed >= STEPS - 1;
		snprintf(det, sizeof det,
			 "%d steps: parameters and accumulator (loss sum %.9g, last norm %.6g) %s; %lld replayed, %lld issued "
			 "op by op%s%s",
			 STEPS + 2, a.acc.loss_sum, a.acc.grad_norm, same ? "bit-identical" : "DIFFER", (long long)a.replayed,
			 (long long)a.issued, offered ? "" : " (no graph ops on this backend)", a.note[0] ? "; " : "");
		if (a.note[0])
			snprintf(det + strlen(det), sizeof det - strlen(det), "%s", a.note);
		g_check(&E, same && used, lab, det);
	}
	free(a.params);
	free(b.params);
}

/* ---- 3. multi-cell ---- */
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
	int rc = run_async(be, a->ds, a->cs, a->seed, 1, &a->res);
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
	struct sb_backend *cpu1 = NULL, *gpu1 = NULL;
	if (sb_backend_cpu_open(0, &E.cpu, &err) || sb_backend_open(device, 1, &E.gpu, &err) ||
	    sb_backend_cpu_open(0, &cpu1, &err) || (!strcmp(E.gpu->name, "cpu") && sb_backend_cpu_open(1, &gpu1, &err))) {
		printf("not ok 1 - open backends: %s\n0 passed, 1 failed\n", err.msg);
		return 5;
	}
	/* the reference of the step-by-step comparison keeps the whole batch in one tile, as the
	 * CUDA backend does, so that both models' saved attention covers every row */
	cpu1->tile = 0;
	cpu1->slots = 1;
	if (gpu1) { /* dry run: a second CPU backend stands for the GPU */
		gpu1->tile = 0;
		gpu1->slots = 1;
	}
	printf("# cpu: %s\n# gpu: %s\n", E.cpu->device, E.gpu->device);
	if (tsv && (E.tsv = fopen(tsv, "w")))
		fprintf(E.tsv, "section\tcheck\tshape\tresult\tnmse\ttol\tmax_abs\tn\tdetail\n");
	struct sb_dataset img, txt;
	synth_dataset(&img, 0, 1024, 7);
	synth_dataset(&txt, 1, 1024, 8);
	double t0 = g_now();
	for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
		compare_backends(cpu1, gpu1 ? gpu1 : E.gpu, specs[i].text ? &txt : &img, &specs[i]);
	printf("# cpu vs cuda training: %.1f s\n", g_now() - t0);

	E.section = "graph";
	t0 = g_now();
	static const int gs[] = {0, 6, 11, 13};
	for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++)
		compare_graphs(specs[gs[i]].text ? &txt : &img, &specs[gs[i]]);
	printf("# recorded vs op-by-op steps: %.1f s\n", g_now() - t0);

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
		run_async(E.gpu, &img, args[c].cs, args[c].seed, 1, &alone);
		int same = cells[c].status == SB_MC_OK && alone.rc == 0 && args[c].res.n == alone.n &&
			   !memcmp(args[c].res.params, alone.params, alone.n * 4) &&
			   !memcmp(&args[c].res.acc, &alone.acc, sizeof alone.acc);
		snprintf(det, sizeof det, "%s seed %llu: status %s; accumulator and %zu parameters %s", args[c].cs->method,
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
	sb_backend_close(cpu1);
	sb_backend_close(gpu1);
	printf("%d passed, %d failed\n", E.n - E.fail, E.fail);
	return E.fail ? 1 : 0;
}
