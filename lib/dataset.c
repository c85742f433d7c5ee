/* dataset.c — reading dataset files and carving the validation split. */
#include "dataset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "io.h"
#include "json.h"
#include "rng.h"

static int meta_int(const struct sb_dataset *ds, const char *key, int required, int lo, int hi, int *out,
		    struct sb_err *err)
{
	const char *v = sb_tensors_meta(&ds->ts, key);
	if (!v) {
		if (required)
			return SB_ERR(err, SB_EDATA, "%s: metadata lacks '%s'", ds->path, key);
		return 0;
	}
	char *end;
	long x = strtol(v, &end, 10);
	if (*v == 0 || *end || x < lo || x > hi)
		return SB_ERR(err, SB_EDATA, "%s: metadata '%s' = '%s' is not an integer in [%d, %d]", ds->path, key, v, lo, hi);
	*out = (int)x;
	return 0;
}

static const struct sb_tensor *need(const struct sb_dataset *ds, const char *name, enum sb_dtype dt, int ndim,
				    struct sb_err *err)
{
	const struct sb_tensor *t = sb_tensors_find(&ds->ts, name);
	if (!t) {
		SB_ERR(err, SB_EDATA, "%s: tensor '%s' missing", ds->path, name);
		return NULL;
	}
	if (t->dtype != dt || t->ndim != ndim || t->shape[0] != ds->n) {
		SB_ERR(err, SB_EDATA, "%s: tensor '%s' must be %s with %d dimensions and %lld rows", ds->path, name,
		       sb_dtype_name(dt), ndim, (long long)ds->n);
		return NULL;
	}
	return t;
}

void sb_dataset_free(struct sb_dataset *ds)
{
	if (!ds)
		return;
	sb_tensors_free(&ds->ts);
	memset(ds, 0, sizeof *ds);
}

int sb_bytes_are_test_split(const void *bytes, size_t n)
{
	const uint8_t *b = bytes;
	if (!b || n < 10)
		return 0;
	uint64_t h = 0;
	for (int i = 7; i >= 0; i--)
		h = h << 8 | b[i];
	if (h < 2 || h > n - 8 || b[8] != '{')
		return 0;
	struct sb_json *v;
	struct sb_err e = {0};
	if (sb_json_parse((const char *)b + 8, (size_t)h, &v, &e))
		return 0;
	const struct sb_json *meta = sb_json_get(v, "__metadata__");
	const char *split = meta && meta->type == SB_JSON_OBJECT ? sb_json_str(sb_json_get(meta, "split"), NULL) : NULL;
	int test = split && strcmp(split, "test") == 0;
	sb_json_free(v);
	return test;
}

int sb_dataset_read(const char *path, int allow_test, struct sb_dataset *ds, struct sb_err *err)
{
	memset(ds, 0, sizeof *ds);
	snprintf(ds->path, sizeof ds->path, "%s", path);
	/* The guard first: look at the metadata before any tensor data is read. */
	struct sb_tensors meta;
	SB_TRY(sb_st_read_meta(path, &meta, err));
	const char *split = sb_tensors_meta(&meta, "split");
	const char *format = sb_tensors_meta(&meta, "format");
	if (!format || strcmp(format, "sparsebench.dataset") != 0) {
		sb_tensors_free(&meta);
		return SB_ERR(err, SB_EDATA, "%s: not a sparsebench dataset file (metadata 'format')", path);
	}
	if (!split || (strcmp(split, "pool") != 0 && strcmp(split, "test") != 0)) {
		sb_tensors_free(&meta);
		return SB_ERR(err, SB_EDATA, "%s: metadata 'split' must be 'pool' or 'test'", path);
	}
	if (strcmp(split, "test") == 0 && !allow_test) {
		sb_tensors_free(&meta);
		return SB_ERR(err, SB_EVERDICT,
			      "%s: refusing to read the test split (only sb-test reads test data, after the freeze)", path);
	}
	sb_tensors_free(&meta);

	char expect[SB_SHA256_HEX];
	char side[4200];
	snprintf(side, sizeof side, "%s.sha256", path);
	SB_TRY(sb_sha256_file(path, ds->sha256, &ds->size_bytes, err));
	if (sb_file_exists(side)) {
		SB_TRY(sb_sidecar_read(path, expect, err));
		if (strcmp(ds->sha256, expect) != 0)
			return SB_ERR(err, SB_EDATA, "%s: SHA-256 mismatch: expected %s, actual %s", path, expect,
			              ds->sha256);
	}
	int rc = sb_st_read(path, &ds->ts, err);
	if (rc)
		return rc;
	const char *v;
	snprintf(ds->task, sizeof ds->task, "%s", (v = sb_tensors_meta(&ds->ts, "task")) ? v : "");
	snprintf(ds->split, sizeof ds->split, "%s", sb_tensors_meta(&ds->ts, "split"));
	if (!ds->task[0]) {
		rc = SB_ERR(err, SB_EDATA, "%s: metadata lacks 'task'", path);
		goto fail;
	}
	const char *mod = sb_tensors_meta(&ds->ts, "modality");
	if (mod && strcmp(mod, "image") == 0)
		ds->modality = SB_IMAGE;
	else if (mod && strcmp(mod, "text") == 0)
		ds->modality = SB_TEXT;
	else {
		rc = SB_ERR(err, SB_EDATA, "%s: metadata 'modality' must be 'image' or 'text'", path);
		goto fail;
	}
	if ((rc = meta_int(ds, "classes", 1, 2, 100000, &ds->classes, err)))
		goto fail;
	if ((rc = meta_int(ds, "presplit", 0, 0, 1, &ds->presplit, err)))
		goto fail;
	const struct sb_tensor *y = sb_tensors_find(&ds->ts, "y");
	if (!y || y->dtype != SB_I32 || y->ndim != 1) {
		rc = SB_ERR(err, SB_EDATA, "%s: tensor 'y' must be I32 [N]", path);
		goto fail;
	}
	ds->n = y->shape[0];
	ds->y = y->data;
	for (int64_t i = 0; i < ds->n; i++)
		if (ds->y[i] < 0 || ds->y[i] >= ds->classes) {
			rc = SB_ERR(err, SB_EDATA, "%s: label %d of example %lld outside [0, %d)", path, ds->y[i], (long long)i,
				    ds->classes);
			goto fail;
		}
	const struct sb_tensor *x;
	if (ds->modality == SB_IMAGE) {
		if (!(x = need(ds, "x", SB_U8, 4, err))) {
			rc = SB_EDATA;
			goto fail;
		}
		ds->C = (int)x->shape[1];
		ds->H = (int)x->shape[2];
		ds->W = (int)x->shape[3];
		ds->x_u8 = x->data;
		if ((rc = meta_int(ds, "patch", 1, 1, 64, &ds->patch, err)))
			goto fail;
		if (ds->C < 1 || ds->H < ds->patch || ds->W < ds->patch) {
			rc = SB_ERR(err, SB_EDATA, "%s: image shape %dx%dx%d too small for patch %d", path, ds->C, ds->H, ds->W,
				    ds->patch);
			goto fail;
		}
	} else {
		if (!(x = need(ds, "x", SB_I32, 2, err))) {
			rc = SB_EDATA;
			goto fail;
		}
		ds->L = (int)x->shape[1];
		ds->x_i32 = x->data;
		if ((rc = meta_int(ds, "vocab", 1, 2, 1 << 30, &ds->vocab, err)))
			goto fail;
		const struct sb_tensor *len = need(ds, "len", SB_I32, 1, err);
		if (!len) {
			rc = SB_EDATA;
			goto fail;
		}
		ds->len = len->data;
		for (int64_t i = 0; i < ds->n; i++) {
			if (ds->len[i] < 0 || ds->len[i] > ds->L) {
				rc = SB_ERR(err, SB_EDATA, "%s: length %d of example %lld outside [0, %d]", path, ds->len[i],
					    (long long)i, ds->L);
				goto fail;
			}
			const int32_t *row = ds->x_i32 + i * ds->L;
			for (int j = 0; j < ds->L; j++)
				if (row[j] < 0 || row[j] >= ds->vocab || (j >= ds->len[i] && row[j] != 0)) {
					rc = SB_ERR(err, SB_EDATA, "%s: token %d at [%lld][%d] invalid (vocab %d, length %d)", path,
						    row[j], (long long)i, j, ds->vocab, ds->len[i]);
					goto fail;
				}
		}
	}
	if (ds->presplit) {
		const struct sb_tensor *s = need(ds, "seed", SB_I32, 1, err), *p = need(ds, "part", SB_U8, 1, err);
		if (!s || !p) {
			rc = SB_EDATA;
			goto fail;
		}
		ds->seed = s->data;
		ds->part = p->data;
		int want_test = strcmp(ds->split, "test") == 0;
		for (int64_t i = 0; i < ds->n; i++)
			if (want_test ? ds->part[i] != 2 : ds->part[i] > 1) {
				rc = SB_ERR(err, SB_EDATA, "%s: part %d of example %lld invalid for split '%s'", path, ds->part[i],
					    (long long)i, ds->split);
				goto fail;
			}
	}
	return 0;
fail:
	sb_tensors_free(&ds->ts);
	return rc;
}

int64_t sb_round_half_even(double v)
{
	double f = floor(v);
	double d = v - f;
	if (d > 0.5)
		return (int64_t)f + 1;
	if (d < 0.5)
		return (int64_t)f;
	return ((int64_t)f % 2 == 0) ? (int64_t)f : (int64_t)f + 1;
}

void sb_split_free(struct sb_split *s)
{
	if (!s)
		return;
	free(s->train);
	free(s->val);
	memset(s, 0, sizeof *s);
}

int sb_split_check(const struct sb_dataset *ds, uint64_t seed, double val_fraction, int64_t limit,
		   struct sb_err *err)
{
	if (!(val_fraction >= 0 && val_fraction < 1))
		return SB_ERR(err, SB_EUSAGE, "val_fraction %g outside [0, 1)", val_fraction);
	int64_t n_seed = 0; /* the seed's examples: a limit at or above them cuts nothing */
	if (ds->presplit && limit > 0 && !(val_fraction > 0))
		for (int64_t i = 0; i < ds->n; i++)
			n_seed += (uint64_t)ds->seed[i] == seed;
	if (ds->presplit && limit > 0 && limit < n_seed && !(val_fraction > 0))
		return SB_ERR(err, SB_EUSAGE,
			      "val_fraction %g with a limit on a pre-split task (%s): the limit keeps "
			      "round(limit * val_fraction), at least 1, of its validation examples; give a "
			      "val_fraction in (0, 1) or no limit",
			      val_fraction, ds->path);
	return 0;
}

int sb_split_carve(const struct sb_dataset *ds, uint64_t seed, double val_fraction, int64_t limit,
		   struct sb_split *out, struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	if (strcmp(ds->split, "pool") != 0)
		return SB_ERR(err, SB_EVERDICT, "%s: the validation split is carved from the pool only", ds->path);
	SB_TRY(sb_split_check(ds, seed, val_fraction, limit, err));
	if (ds->presplit) {
		int64_t nt = 0, nv = 0;
		for (int64_t i = 0; i < ds->n; i++)
			if ((uint64_t)ds->seed[i] == seed)
				ds->part[i] ? nv++ : nt++;
		if (nt == 0 || nv == 0)
			return SB_ERR(err, SB_EDATA, "%s: no pre-split examples for seed %llu (regenerate with that seed)",
				      ds->path, (unsigned long long)seed);
		out->train = malloc(nt * sizeof *out->train);
		out->val = malloc(nv * sizeof *out->val);
		if (!out->train || !out->val) {
			sb_split_free(out);
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		}
		/* a cap keeps the first max(1, r) validation and max(1, limit - r) training
		 * examples of the seed, r = round(limit * val_fraction) (file order, which is the
		 * generator's order), about as a pool of `limit` examples would be split */
		int64_t cap_t = nt, cap_v = nv;
		if (limit > 0 && limit < nt + nv) {
			int64_t lv = sb_round_half_even(val_fraction * (double)limit);
			cap_v = lv < nv ? (lv > 0 ? lv : 1) : nv;
			cap_t = limit - lv < nt ? (limit - lv > 0 ? limit - lv : 1) : nt;
		}
		for (int64_t i = 0; i < ds->n; i++)
			if ((uint64_t)ds->seed[i] == seed) {
				if (ds->part[i]) {
					if (out->n_val < cap_v)
						out->val[out->n_val++] = (uint32_t)i;
				} else if (out->n_train < cap_t) {
					out->train[out->n_train++] = (uint32_t)i;
				}
			}
		return 0;
	}
	if (ds->n > UINT32_MAX)
		return SB_ERR(err, SB_EDATA, "%s: too many examples", ds->path);
	int64_t n = ds->n;
	uint32_t *kept = malloc((n ? n : 1) * sizeof *kept);
	if (!kept)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	struct sb_rng r;
	if (limit > 0 && limit < n) {
		sb_rng_init(&r, seed, SB_RNG_CAP, 0);
		sb_rng_permutation(&r, kept, (size_t)n);
		n = limit;
	} else {
		for (int64_t i = 0; i < n; i++)
			kept[i] = (uint32_t)i;
	}
	uint32_t *perm = malloc((n ? n : 1) * sizeof *perm);
	if (!perm) {
		free(kept);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	sb_rng_init(&r, seed, SB_RNG_SPLIT, 0);
	sb_rng_permutation(&r, perm, (size_t)n);
	int64_t n_val = sb_round_half_even(val_fraction * (double)n);
	out->n_val = n_val;
	out->n_train = n - n_val;
	out->val = malloc((n_val ? n_val : 1) * sizeof *out->val);
	out->train = malloc((out->n_train ? out->n_train : 1) * sizeof *out->train);
	if (!out->val || !out->train) {
		free(kept);
		free(perm);
		sb_split_free(out);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	for (int64_t i = 0; i < n_val; i++)
		out->val[i] = kept[perm[i]];
	for (int64_t i = n_val; i < n; i++)
		out->train[i - n_val] = kept[perm[i]];
	free(kept);
	free(perm);
	return 0;
}

int sb_split_test(const struct sb_dataset *ds, uint64_t seed, uint32_t **idx, int64_t *n, struct sb_err *err)
{
	*idx = NULL;
	*n = 0;
	if (strcmp(ds->split, "test") != 0)
		return SB_ERR(err, SB_EDATA, "%s: not a test split", ds->path);
	int64_t cnt = 0;
	for (int64_t i = 0; i < ds->n; i++)
		if (!ds->presplit || (uint64_t)ds->seed[i] == seed)
			cnt++;
	if (cnt == 0)
		return SB_ERR(err, SB_EDATA, "%s: no test examples for seed %llu", ds->path, (unsigned long long)seed);
	uint32_t *v = malloc(cnt * sizeof *v);
	if (!v)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int64_t k = 0;
	for (int64_t i = 0; i < ds->n; i++)
		if (!ds->presplit || (uint64_t)ds->seed[i] == seed)
			v[k++] = (uint32_t)i;
	*idx = v;
	*n = cnt;
	return 0;
}
