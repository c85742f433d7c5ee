/* gpu_common.h — helpers shared by the GPU check programs (tests/gpu/ *.c) and
 * the benchmark (bench/gpu/gpu_bench.c): both backends side by side, device
 * buffers from host arrays, poisoned outputs, and the comparison that every
 * check uses (normalised mean squared error against a per-op tolerance, as
 * ggml's test-backend-ops, plus max abs error and the count of bit-identical
 * elements). Output: TAP-like lines on stdout, one TSV row per check. */
#ifndef SB_GPU_COMMON_H
#define SB_GPU_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "err.h"

struct genv {
	struct sb_backend *cpu, *gpu;
	struct sb_ctx *cc, *gc;
	FILE *tsv;
	int n, fail;
	uint64_t rs;
	const char *section;
};

static inline double g_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline double g_urand(struct genv *e)
{
	e->rs = e->rs * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(e->rs >> 11) / 9007199254740992.0;
}
static inline float g_nrand(struct genv *e)
{
	double u1 = 1.0 - g_urand(e), u2 = g_urand(e);
	return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
static inline float *g_randn(struct genv *e, size_t n, float sc)
{
	float *p = malloc((n ? n : 1) * sizeof *p);
	for (size_t i = 0; i < n; i++)
		p[i] = g_nrand(e) * sc;
	return p;
}

/* a device copy of a host array (NULL on failure, reported) */
static inline void *g_up(struct genv *e, const void *host, size_t bytes)
{
	struct sb_err err = {0};
	void *p = sb_be_alloc(e->gpu, bytes ? bytes : 4);
	if (!p)
		return NULL;
	if (bytes && e->gpu->ops->upload(e->gpu, p, host, bytes, &err)) {
		fprintf(stderr, "upload: %s\n", err.msg);
		return NULL;
	}
	return p;
}

/* a device buffer of n floats full of NaN: an output the op must overwrite */
static inline float *g_poison(struct genv *e, size_t n)
{
	float *h = malloc((n ? n : 1) * sizeof *h);
	for (size_t i = 0; i < n; i++)
		h[i] = NAN;
	float *d = g_up(e, h, n * sizeof *h);
	free(h);
	return d;
}

static inline float *g_down(struct genv *e, const void *dev, size_t bytes, struct sb_err *err)
{
	float *h = malloc(bytes ? bytes : 4);
	if (e->gpu->ops->download(e->gpu, h, dev, bytes, err)) {
		free(h);
		return NULL;
	}
	return h;
}

/* got (device, n floats) against want (host): passes when NMSE <= tol over the finite
 * values and every NaN or infinity is where want has the same (infinities of the same
 * sign); a failure names its first differing elements */
static inline int g_cmp(struct genv *e, const char *op, const char *shape, const float *gdev, const float *want,
			size_t n, double tol)
{
	struct sb_err err = {0};
	float *got = g_down(e, gdev, n * sizeof(float), &err);
	e->n++;
	if (!got) {
		e->fail++;
		printf("not ok %d - %s %s: download failed: %s\n", e->n, op, shape, err.msg);
		if (e->tsv)
			fprintf(e->tsv, "%s\t%s\t%s\tFAIL\t\t\t\t%zu\t%s\n", e->section, op, shape, n, err.msg);
		return 0;
	}
	double num = 0, den = 0, maxabs = 0;
	size_t same = 0, nanbad = 0, worst = 0;
	char first[200] = "";
	int nfirst = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(want[i]) || !isfinite(got[i])) {
			if ((isnan(want[i]) && isnan(got[i])) || (isinf(want[i]) && got[i] == want[i])) {
				same++;
			} else {
				nanbad++;
				if (nfirst++ < 3)
					snprintf(first + strlen(first), sizeof first - strlen(first), " [%zu] %g vs %g", i,
						 (double)got[i], (double)want[i]);
			}
			continue;
		}
		if (!memcmp(&got[i], &want[i], sizeof(float)))
			same++;
		double d = (double)got[i] - (double)want[i];
		num += d * d;
		den += (double)want[i] * want[i];
		if (fabs(d) > maxabs) {
			maxabs = fabs(d);
			worst = i;
		}
	}
	double nmse = den > 0 ? num / den : num;
	int pass = nanbad == 0 && nmse <= tol;
	if (!pass) {
		e->fail++;
		if (nmse > tol)
			snprintf(first + strlen(first), sizeof first - strlen(first), " largest [%zu] %.9g vs %.9g", worst,
				 (double)got[worst], (double)want[worst]);
	}
	printf("%sok %d - %s %s: nmse %.3g (tol %.1g) max_abs %.3g, %zu/%zu bit-identical%s%s%s\n", pass ? "" : "not ",
	       e->n, op, shape, nmse, tol, maxabs, same, n, nanbad ? ", NaN/inf/unwritten mismatch" : "",
	       pass ? "" : "; got vs want:", pass ? "" : first);
	if (e->tsv)
		fprintf(e->tsv, "%s\t%s\t%s\t%s\t%.3g\t%.1g\t%.3g\t%zu\t%zu\n", e->section, op, shape, pass ? "ok" : "FAIL", nmse,
			tol, maxabs, n, same);
	free(got);
	return pass;
}

static inline int g_cmpi(struct genv *e, const char *op, const char *shape, const void *gdev, const void *want,
			 size_t bytes)
{
	struct sb_err err = {0};
	void *got = g_down(e, gdev, bytes, &err);
	e->n++;
	int pass = got && memcmp(got, want, bytes) == 0;
	if (!pass)
		e->fail++;
	printf("%sok %d - %s %s: %zu bytes %s%s\n", pass ? "" : "not ", e->n, op, shape, bytes,
	       pass ? "identical" : "DIFFER", got ? "" : err.msg);
	if (e->tsv)
		fprintf(e->tsv, "%s\t%s\t%s\t%s\t\t\t\t%zu\t\n", e->section, op, shape, pass ? "ok" : "FAIL", bytes);
	free(got);
	return pass;
}

static inline int g_check(struct genv *e, int pass, const char *what, const char *detail)
{
	e->n++;
	if (!pass)
		e->fail++;
	printf("%sok %d - %s: %s\n", pass ? "" : "not ", e->n, what, detail);
	if (e->tsv)
		fprintf(e->tsv, "%s\t%s\t\t%s\t\t\t\t\t%s\n", e->section, what, pass ? "ok" : "FAIL", detail);
	return pass;
}

#endif
