/* bench_step.c — steady-state training throughput of the engine (bench/train/run.py).
 *
 *   bench_step DATA_DIR TASK METHOD THREADS STEPS [TIER [ARCH]]
 *
 * Builds the model of sb-train for the cell (seed 0, batch 256), runs 3 warm-up
 * steps, then STEPS training steps on consecutive batches of the training split,
 * and prints one JSON line: samples_per_s (wall), cpu_s (process CPU time of the
 * timed steps), samples_per_cpu_s, peak_mb (backend allocations). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "dataset.h"
#include "encoder.h"
#include "train_cell.h"

static double now(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: bench_step DATA_DIR TASK METHOD THREADS STEPS [TIER [ARCH]]\n");
		return 2;
	}
	struct sb_err e = {0};
	char path[4096];
	snprintf(path, sizeof path, "%s/%s/pool.safetensors", argv[1], argv[2]);
	struct sb_dataset ds;
	if (sb_dataset_read(path, 0, &ds, &e)) {
		fprintf(stderr, "%s\n", e.msg);
		return 3;
	}
	struct sb_cell cell;
	sb_cell_defaults(&cell);
	snprintf(cell.task, sizeof cell.task, "%s", argv[2]);
	snprintf(cell.method, sizeof cell.method, "%s", argv[3]);
	if (argc > 6)
		snprintf(cell.tier, sizeof cell.tier, "%s", argv[6]);
	if (argc > 7)
		snprintf(cell.arch, sizeof cell.arch, "%s", argv[7]);
	int threads = atoi(argv[4]), steps = atoi(argv[5]);
	struct sb_split sp;
	struct sb_backend *be;
	struct sb_encoder_cfg cfg;
	struct sb_encoder *m;
	struct sb_encoder_data data;
	if (sb_cell_finish(&cell, &e) || sb_split_carve(&ds, 0, 0.2, 0, &sp, &e) ||
	    sb_backend_cpu_open(threads, &be, &e) || sb_cell_model_cfg(&cell, &ds, &cfg, &e) ||
	    sb_encoder_new(&cfg, be, 256, &m, &e) || sb_encoder_init(m, 0, &e) ||
	    sb_encoder_data_open(be, &ds, &data, &e)) {
		fprintf(stderr, "%s\n", e.msg);
		return 3;
	}
	struct sb_step_opts o;
	sb_step_opts_default(&o);
	struct sb_step_result r;
	int64_t nb = sp.n_train / 256;
	for (int s = 0; s < 3; s++) {
		o.step = s;
		sb_encoder_train_step(m, &data, sp.train + (s % nb) * 256, 256, &o, &r, &e);
	}
	double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
	for (int s = 0; s < steps; s++) {
		o.step = 3 + s;
		if (sb_encoder_train_step(m, &data, sp.train + ((3 + s) % nb) * 256, 256, &o, &r, &e)) {
			fprintf(stderr, "%s\n", e.msg);
			return 5;
		}
	}
	double t = now(CLOCK_MONOTONIC) - t0, c = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
	printf("{\"method\":\"%s\",\"threads\":%d,\"steps\":%d,\"samples_per_s\":%.1f,\"cpu_s\":%.3f,\"samples_per_cpu_"
	       "s\":%.1f,"
	       "\"wall_s\":%.3f,\"params\":%zu,\"seq_len\":%d,\"peak_mb\":%.1f,\"loss\":%.6f,\"device\":\"%s\"}\n",
	       argv[3], threads, steps, steps * 256 / t, c, steps * 256 / c, t, sb_encoder_param_count(m), m->T,
	       sb_cpu_bytes_peak(be) / 1e6, r.loss, be->device);
	return 0;
}
