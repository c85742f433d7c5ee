/* targets.h — the decoder entry points fuzzed by tests/fuzz/fetch/fuzz.c and
 * replayed (with the kept crashers and seeds) by tests/unit/test_fetch_fuzz.c.
 * Each takes arbitrary bytes and must return (an error code or 0) without
 * crashing, leaking or reading out of bounds. */
#ifndef SB_FETCH_FUZZ_TARGETS_H
#define SB_FETCH_FUZZ_TARGETS_H

#include <stdlib.h>
#include <string.h>

#include "fetch.h"

#define FZ_LIMIT ((uint64_t)64 << 20)

static int fz_idx(const uint8_t *d, size_t n)
{
	struct sb_idx a;
	struct sb_err e = {0};
	int rc = sb_idx_parse(d, n, "fuzz", &a, &e);
	volatile unsigned s = 0;
	for (uint64_t i = 0; !rc && i < a.count; i++)
		s += a.data[i];
	return rc;
}

static int fz_npy(const uint8_t *d, size_t n)
{
	struct sb_npy a;
	struct sb_err e = {0};
	int rc = sb_npy_parse(d, n, "fuzz", &a, &e);
	volatile uint64_t s = 0;
	for (uint64_t i = 0; !rc && a.kind != 'f' && i < a.count; i++)
		s += (uint64_t)sb_npy_get_int(&a, i);
	return rc;
}

static int fz_mat(const uint8_t *d, size_t n)
{
	const char *want[2] = {"X", "y"};
	struct sb_mat_var v[2];
	struct sb_err e = {0};
	int rc = sb_mat_read(d, n, "fuzz", 2, want, v, FZ_LIMIT, &e);
	if (rc)
		return rc;
	volatile double s = 0; /* values may be NaN or huge: only read them */
	for (int k = 0; k < 2; k++) {
		for (uint64_t i = 0; i < v[k].count; i++)
			s += sb_mat_get(&v[k], i);
		sb_mat_var_free(&v[k]);
	}
	return 0;
}

static int fz_libsvm(const uint8_t *d, size_t n)
{
	double *x;
	int32_t *y;
	int64_t rows;
	struct sb_err e = {0};
	int rc = sb_libsvm_parse((const char *)d, n, "fuzz", 256, &x, &y, &rows, &e);
	if (!rc) {
		for (int64_t i = 0; i < rows * 256; i++)
			(void)sb_usps_pixel(x[i]);
		free(x);
		free(y);
	}
	return rc;
}

static int fz_cifar(const uint8_t *d, size_t n)
{
	uint8_t *x = NULL;
	int32_t *y = NULL;
	int64_t c = 0;
	struct sb_err e = {0};
	int rc = sb_cifar_parse(d, n, "fuzz", 2, 1, &x, &y, &c, &e);
	free(x);
	free(y);
	return rc;
}

static int fz_news(const uint8_t *d, size_t n)
{
	char *out = malloc(n ? n : 1);
	int32_t ids[96];
	if (!out)
		return 5;
	size_t k = sb_news_clean((const char *)d, n, out);
	if (k > n)
		abort();
	int64_t t = sb_news_tokenize(out, k, ids, 96, 20000);
	for (int i = 0; i < 96; i++)
		if (ids[i] < 0 || ids[i] >= 20000 || (i >= t && ids[i] != 0))
			abort();
	free(out);
	return 0;
}

/* Archives (tar, zip, any filter) read entry by entry, and single-stream gzip/bzip2. */
static int fz_archive(const uint8_t *d, size_t n)
{
	struct sb_ar *a;
	struct sb_err e = {0};
	int rc = sb_ar_open_mem(&a, d, n, "fuzz", &e);
	if (rc)
		return rc;
	for (int i = 0; i < 64; i++) {
		const char *p;
		int f;
		if ((rc = sb_ar_next(a, &p, &f, &e)) || !p)
			break;
		if (f) {
			struct sb_blob b;
			if ((rc = sb_ar_read(a, &b, FZ_LIMIT, &e)))
				break;
			sb_blob_free(&b);
		}
	}
	sb_ar_close(a);
	struct sb_blob b;
	if (sb_decompress_mem(d, n, "fuzz", "gzip", &b, FZ_LIMIT, &e) == 0)
		sb_blob_free(&b);
	if (sb_decompress_mem(d, n, "fuzz", "bzip2", &b, FZ_LIMIT, &e) == 0)
		sb_blob_free(&b);
	return rc;
}

struct fz_target {
	const char *name;
	int (*fn)(const uint8_t *, size_t);
};

static const struct fz_target fz_targets[] = {
    {"idx", fz_idx},     {"npy", fz_npy},   {"mat", fz_mat},         {"libsvm", fz_libsvm},
    {"cifar", fz_cifar}, {"news", fz_news}, {"archive", fz_archive}, {NULL, NULL},
};

#endif
