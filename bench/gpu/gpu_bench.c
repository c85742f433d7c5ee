/* gpu_bench — training throughput (samples/s) of the compact Fashion-MNIST cell
 * (PROTOCOL A2 compact tier, patch 4 -> 50 tokens, batch 256, dropout 0.1,
 * AdamW, clipping at 5): one cell per method, then many cells at once (the
 * methods x seeds of a grid row) through train/multicell.c.
 *
 *   gpu_bench --make-data PATH          write a synthetic dataset of Fashion-MNIST's shape
 *   gpu_bench [--device D] [--data PATH] [--steps S] [--warmup W] [--single] [--multi SEEDS]
 *
 * Without --data the examples are synthetic (60000 x 1 x 28 x 28 u8, 10 classes):
 * throughput does not depend on the pixel values. Output: one NDJSON record per
 * measurement on stdout ("kind": "bench.single" / "bench.multi"), progress on stderr.
 */
#include <pthread.h>

#include "../../tests/gpu/gpu_common.h"
#include "../../tests/gpu/train_common.h"
#include "../../train/multicell.h"
#include "tensor.h"

static const char *METHODS[] = {"softmax",   "topk_softmax_0125", "topk_softmax_025",        "topk_softmax_05",
				"sparsemax", "entmax15",          "headwise_adaptive_entmax"};
enum { NMETH = 7, BATCH = 256 };
static int STEPS = 40, WARMUP = 5;

/* a barrier that gives up after a while (a cell that never arrives must not hang the run) */
struct tbar {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int need, have;
};
static void tbar_wait(struct tbar *b)
{
	pthread_mutex_lock(&b->mu);
	if (++b->have >= b->need)
		pthread_cond_broadcast(&b->cv);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 120;
	while (b->have < b->need)
		if (pthread_cond_timedwait(&b->cv, &b->mu, &ts))
			break;
	pthread_mutex_unlock(&b->mu);
}

struct cellarg {
	const struct sb_dataset *ds;
	const char *method;
	uint64_t seed;
	struct tbar *bar; /* multi: all cells start timing together */
	double t_start, t_end;
	double last_loss;
	int rc;
};

static int cell_fn(struct sb_backend *be, struct sb_mc_cell *cell, struct sb_err *err)
{
	struct cellarg *a = cell->arg;
	struct sb_norm nm;
	struct sb_encoder_cfg cfg;
	struct sb_encoder *m = NULL;
	struct sb_encoder_data data;
	int rc = sb_norm_parse(a->method, 1.5, &nm, err);
	if (!rc)
		rc = sb_encoder_cfg_from_dataset(&cfg, a->ds, "compact", "plain", &nm, err);
	if (!rc)
		rc = sb_encoder_new(&cfg, be, BATCH, &m, err);
	if (!rc)
		rc = sb_encoder_init(m, a->seed, err);
	int have_data = 0;
	if (!rc)
		have_data = !(rc = sb_encoder_data_open(be, a->ds, &data, err));
	uint32_t *perm = malloc((size_t)a->ds->n * 4);
	struct sb_rng r;
	sb_rng_init(&r, a->seed, SB_RNG_SHUFFLE, 0);
	sb_rng_permutation(&r, perm, (size_t)a->ds->n);
	struct sb_step_opts o;
	sb_step_opts_default(&o);
	o.seed = a->seed;
	int64_t nb = a->ds->n / BATCH;
	for (int s = 0; !rc && s < WARMUP; s++) {
		struct sb_step_result res;
		o.step = s;
		rc = sb_encoder_train_step(m, &data, perm + (s % nb) * BATCH, BATCH, &o, &res, err);
	}
	float tmp;
	if (!rc) /* the warm-up's work is done before the clock starts */
		rc = be->ops->download(be, &tmp, m->out_loss, 4, err);
	if (a->bar)
		tbar_wait(a->bar);
	a->t_start = g_now();
	for (int s = WARMUP; !rc && s < WARMUP + STEPS; s++) {
		struct sb_step_result res;
		o.step = s;
		rc = sb_encoder_train_step(m, &data, perm + (s % nb) * BATCH, BATCH, &o, &res, err);
		a->last_loss = res.loss;
	}
	if (!rc)
		rc = be->ops->download(be, &tmp, m->out_loss, 4, err);
	a->t_end = g_now();
	free(perm);
	if (have_data)
		sb_encoder_data_close(be, &data);
	sb_encoder_free(m);
	return a->rc = rc;
}

static int make_data(const char *path)
{
	struct sb_dataset ds;
	synth_dataset(&ds, 0, 60000, 2026);
	struct sb_tensors ts;
	struct sb_err err = {0};
	sb_tensors_init(&ts);
	int64_t sx[4] = {60000, 1, 28, 28}, sy[1] = {60000};
	int rc = sb_tensors_add(&ts, "x", SB_U8, 4, sx, ds.x_u8, 1, &err);
	if (!rc)
		rc = sb_tensors_add(&ts, "y", SB_I32, 1, sy, ds.y, 1, &err);
	const char *kv[][2] = {{"format", "sparsebench.dataset"}, {"format_version", "1"}, {"task", "fashion_mnist"},
			       {"split", "pool"},    {"modality", "image"},          {"classes", "10"},
			       {"patch", "4"},       {"presplit", "0"},              {"registry_version", "0"},
			       {"sources", "[]"},
			       {"generator", "{\"name\":\"gpu_bench synthetic: random pixels of Fashion-MNIST's shape (throughput only)\"}"},
			       {"license", "synthetic"}};
	for (size_t i = 0; !rc && i < sizeof kv / sizeof kv[0]; i++)
		rc = sb_tensors_set_meta(&ts, kv[i][0], kv[i][1], &err);
	if (!rc)
		rc = sb_st_write(path, &ts, &err);
	if (rc)
		fprintf(stderr, "gpu_bench: %s\n", err.msg);
	else
		fprintf(stderr, "gpu_bench: wrote %s (synthetic, 60000 x 1 x 28 x 28 u8, 10 classes, patch 4)\n", path);
	sb_tensors_free(&ts);
	synth_free(&ds);
	return rc ? 4 : 0;
}

int main(int argc, char **argv)
{
	const char *device = "cuda", *data = NULL;
	int single = 0, seeds = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--make-data") && i + 1 < argc)
			return make_data(argv[++i]);
		else if (!strcmp(argv[i], "--device") && i + 1 < argc)
			device = argv[++i];
		else if (!strcmp(argv[i], "--data") && i + 1 < argc)
			data = argv[++i];
		else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			STEPS = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
			WARMUP = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--single"))
			single = 1;
		else if (!strcmp(argv[i], "--multi") && i + 1 < argc)
			seeds = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: gpu_bench --make-data PATH | [--device D] [--data PATH] [--steps S] "
					"[--warmup W] [--single] [--multi SEEDS]\n");
			return 2;
		}
	}
	struct sb_err err = {0};
	struct sb_dataset ds;
	int synthetic = data == NULL;
	if (data) {
		if (sb_dataset_read(data, 0, &ds, &err)) {
			fprintf(stderr, "gpu_bench: %s\n", err.msg);
			return 3;
		}
	} else {
		synth_dataset(&ds, 0, 60000, 2026);
	}
	const char *what = synthetic || strstr(ds.task, "fashion") == NULL ? "synthetic pixels" : "dataset file";
	int rc_all = 0;
	struct sb_mc_opts mo = {device, 0, 0, NULL, NULL};
	if (single) {
		for (int mi = 0; mi < NMETH; mi++) {
			struct cellarg a = {&ds, METHODS[mi], 1, NULL, 0, 0, 0, 0};
			struct sb_mc_cell c = {METHODS[mi], &a, 0, {0}, 0};
			int rc = sb_multicell_run(&mo, &c, 1, cell_fn, &err);
			double sps = rc ? 0 : (double)STEPS * BATCH / (a.t_end - a.t_start);
			printf("{\"kind\":\"bench.single\",\"device\":\"%s\",\"method\":\"%s\",\"cells\":1,\"batch\":%d,\"steps\":%d,"
			       "\"samples_per_s\":%.1f,\"ms_per_step\":%.4f,\"data\":\"%s\",\"status\":\"%s\"%s%s%s}\n",
			       device, METHODS[mi], BATCH, STEPS, sps, rc ? 0 : 1e3 * (a.t_end - a.t_start) / STEPS, what,
			       sb_mc_status_name(c.status), rc ? ",\"error\":\"" : "", rc ? "see stderr" : "", rc ? "\"" : "");
			if (rc)
				fprintf(stderr, "gpu_bench: %s: %s\n", METHODS[mi], c.err.msg);
			fflush(stdout);
			rc_all |= rc;
		}
	}
	if (seeds > 0) {
		int n = NMETH * seeds;
		struct cellarg *a = calloc((size_t)n, sizeof *a);
		struct sb_mc_cell *c = calloc((size_t)n, sizeof *c);
		char (*ids)[48] = calloc((size_t)n, 48);
		struct tbar bar = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, n, 0};
		for (int i = 0; i < n; i++) {
			a[i].ds = &ds;
			a[i].method = METHODS[i % NMETH];
			a[i].seed = (uint64_t)(i / NMETH);
			a[i].bar = &bar;
			snprintf(ids[i], 48, "%s/seed%d", a[i].method, i / NMETH);
			c[i].id = ids[i];
			c[i].arg = &a[i];
		}
		double t0 = g_now();
		int rc = sb_multicell_run(&mo, c, n, cell_fn, &err);
		double wall = g_now() - t0;
		double ts = 1e300, te = 0;
		int ok = 0;
		for (int i = 0; i < n; i++)
			if (c[i].status == SB_MC_OK) {
				ok++;
				ts = a[i].t_start < ts ? a[i].t_start : ts;
				te = a[i].t_end > te ? a[i].t_end : te;
			}
		double sps = ok ? (double)ok * STEPS * BATCH / (te - ts) : 0;
		printf("{\"kind\":\"bench.multi\",\"device\":\"%s\",\"cells\":%d,\"cells_ok\":%d,\"batch\":%d,\"steps\":%d,"
		       "\"samples_per_s\":%.1f,\"timed_s\":%.3f,\"wall_s\":%.3f,\"data\":\"%s\"}\n",
		       device, n, ok, BATCH, STEPS, sps, ok ? te - ts : 0, wall, what);
		if (rc)
			fprintf(stderr, "gpu_bench: multi: %s\n", err.msg);
		rc_all |= rc;
		free(a);
		free(c);
		free(ids);
	}
	if (synthetic)
		synth_free(&ds);
	else
		sb_dataset_free(&ds);
	return rc_all ? 5 : 0;
}
