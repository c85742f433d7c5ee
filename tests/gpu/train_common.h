/* train_common.h — a synthetic dataset in memory and a training loop for the
 * GPU checks and the benchmark (tests/gpu/gpu_train.c, bench/gpu/gpu_bench.c). */
#ifndef SB_TRAIN_COMMON_H
#define SB_TRAIN_COMMON_H

#include "dataset.h"
#include "encoder.h"
#include "rng.h"

/* images [n,1,28,28] (Fashion-MNIST's shape) or text [n,L] with lengths; labels */
static inline void synth_dataset(struct sb_dataset *ds, int text, int64_t n, uint64_t seed)
{
	memset(ds, 0, sizeof *ds);
	snprintf(ds->task, sizeof ds->task, "%s", text ? "synthetic_text" : "fashion_mnist_shape");
	snprintf(ds->split, sizeof ds->split, "pool");
	ds->n = n;
	ds->classes = 10;
	struct sb_rng r;
	sb_rng_init(&r, seed, SB_RNG_SYNTH, 0);
	int32_t *y = malloc((size_t)n * 4);
	for (int64_t i = 0; i < n; i++)
		y[i] = (int32_t)sb_rng_below(&r, 10);
	ds->y = y;
	if (!text) {
		ds->modality = SB_IMAGE;
		ds->C = 1, ds->H = 28, ds->W = 28, ds->patch = 4;
		uint8_t *x = malloc((size_t)n * 784);
		for (int64_t i = 0; i < n * 784; i++)
			x[i] = (uint8_t)(sb_rng_u32(&r) >> 24);
		/* a little signal so that training moves: brighten a class-dependent band */
		for (int64_t i = 0; i < n; i++)
			for (int c = 0; c < 28; c++)
				x[i * 784 + (2 + 2 * y[i]) * 28 + c] = 255;
		ds->x_u8 = x;
	} else {
		ds->modality = SB_TEXT;
		ds->L = 24, ds->vocab = 100;
		int32_t *x = calloc((size_t)n * 24, 4), *len = malloc((size_t)n * 4);
		for (int64_t i = 0; i < n; i++) {
			len[i] = (int32_t)sb_rng_below(&r, 25);
			for (int t = 0; t < len[i]; t++)
				x[i * 24 + t] = 2 + (int32_t)sb_rng_below(&r, 98);
			if (len[i])
				x[i * 24] = 2 + y[i];
		}
		ds->x_i32 = x;
		ds->len = len;
	}
}

/* Throughput-only synthetic data of a task family's shape (gpu_bench --shape): "cifar"
 * (3 x 32 x 32, patch 4: 65 tokens, as CIFAR-10/100 and SVHN) or "text" (96 tokens of a
 * 20,000-word vocabulary, every position valid: 97 tokens, as the synthetic marker task).
 * Values are random; throughput does not depend on them. */
static inline void synth_shape(struct sb_dataset *ds, const char *shape, int64_t n, uint64_t seed)
{
	memset(ds, 0, sizeof *ds);
	snprintf(ds->task, sizeof ds->task, "%s_shape", shape);
	snprintf(ds->split, sizeof ds->split, "pool");
	ds->n = n;
	ds->classes = 10;
	struct sb_rng r;
	sb_rng_init(&r, seed, SB_RNG_SYNTH, 0);
	int32_t *y = malloc((size_t)n * 4);
	for (int64_t i = 0; i < n; i++)
		y[i] = (int32_t)sb_rng_below(&r, 10);
	ds->y = y;
	if (!strcmp(shape, "text")) {
		ds->modality = SB_TEXT;
		ds->L = 96, ds->vocab = 20000;
		int32_t *x = malloc((size_t)n * 96 * 4), *len = malloc((size_t)n * 4);
		for (int64_t i = 0; i < n; i++) {
			len[i] = 96;
			for (int t = 0; t < 96; t++)
				x[i * 96 + t] = 2 + (int32_t)sb_rng_below(&r, 19998);
		}
		ds->x_i32 = x;
		ds->len = len;
	} else {
		ds->modality = SB_IMAGE;
		ds->C = 3, ds->H = 32, ds->W = 32, ds->patch = 4;
		uint8_t *x = malloc((size_t)n * 3072);
		for (int64_t i = 0; i < n * 3072; i++)
			x[i] = (uint8_t)(sb_rng_u32(&r) >> 24);
		ds->x_u8 = x;
	}
}

static inline void synth_free(struct sb_dataset *ds)
{
	free((void *)ds->y);
	free((void *)ds->x_u8);
	free((void *)ds->x_i32);
	free((void *)ds->len);
}

#endif
