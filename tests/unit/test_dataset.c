/* test_dataset — dataset files (validation of contents, the test-split guard)
 * and the validation split (sizes, disjointness, determinism, Python rounding,
 * the cap, pre-split tasks). */
#include <stdint.h>
#include <unistd.h>

#include "../harness.h"
#include "dataset.h"
#include "hash.h"
#include "io.h"

static char dir[256];

static int write_image_ds(const char *name, const char *split, int n, int classes, int bad_label)
{
	struct sb_tensors ts;
	struct sb_err err = {0};
	sb_tensors_init(&ts);
	uint8_t *x = malloc((size_t)n * 28 * 28);
	int32_t *y = malloc((size_t)n * 4);
	for (int i = 0; i < n; i++) {
		memset(x + (size_t)i * 784, i & 255, 784);
		y[i] = i % classes;
	}
	if (bad_label)
		y[n - 1] = classes;
	sb_tensors_add(&ts, "x", SB_U8, 4, (int64_t[]){n, 1, 28, 28}, x, 0, &err);
	sb_tensors_add(&ts, "y", SB_I32, 1, (int64_t[]){n}, y, 0, &err);
	sb_tensors_set_meta(&ts, "format", "sparsebench.dataset", &err);
	sb_tensors_set_meta(&ts, "format_version", "1", &err);
	sb_tensors_set_meta(&ts, "task", "unit_images", &err);
	sb_tensors_set_meta(&ts, "split", split, &err);
	sb_tensors_set_meta(&ts, "modality", "image", &err);
	char c[16];
	snprintf(c, sizeof c, "%d", classes);
	sb_tensors_set_meta(&ts, "classes", c, &err);
	sb_tensors_set_meta(&ts, "patch", "4", &err);
	char *p = sb_path_join(dir, name);
	int rc = sb_st_write(p, &ts, &err);
	char hex[65];
	sb_sha256_file(p, hex, NULL, &err);
	sb_sidecar_write(p, hex, &err);
	free(p);
	free(x);
	free(y);
	sb_tensors_free(&ts);
	return rc;
}

static void split_checks(void)
{
	struct sb_err err = {0};
	struct sb_dataset ds;
	write_image_ds("pool.safetensors", "pool", 1001, 10, 0);
	char *p = sb_path_join(dir, "pool.safetensors");
	int rc = sb_dataset_read(p, 0, &ds, &err);
	SB_CHECK(rc == 0 && ds.n == 1001 && ds.C == 1 && ds.H == 28 && ds.patch == 4 && ds.classes == 10,
		 "read image pool (%s)", err.msg);
	struct sb_split s, s2;
	rc = sb_split_carve(&ds, 0, 0.2, 0, &s, &err);
	/* Python: round(0.2 * 1001) = round(200.2) = 200 */
	SB_CHECK(rc == 0 && s.n_val == 200 && s.n_train == 801, "sizes 801/200 for n=1001 (got %lld/%lld)",
		 (long long)s.n_train, (long long)s.n_val);
	char *seen = calloc(1001, 1);
	int dup = 0;
	for (int64_t i = 0; i < s.n_val; i++)
		dup += seen[s.val[i]]++;
	for (int64_t i = 0; i < s.n_train; i++)
		dup += seen[s.train[i]]++;
	int missing = 0;
	for (int i = 0; i < 1001; i++)
		missing += !seen[i];
	SB_CHECK(dup == 0 && missing == 0, "train and validation partition the pool (%d duplicates, %d missing)", dup, missing);
	free(seen);
	sb_split_carve(&ds, 0, 0.2, 0, &s2, &err);
	SB_CHECK(memcmp(s.val, s2.val, 200 * 4) == 0 && memcmp(s.train, s2.train, 801 * 4) == 0, "same seed, same split");
	sb_split_free(&s2);
	sb_split_carve(&ds, 1, 0.2, 0, &s2, &err);
	SB_CHECK(memcmp(s.val, s2.val, 200 * 4) != 0, "another seed, another split");
	sb_split_free(&s2);
	/* the cap keeps `limit` examples first */
	rc = sb_split_carve(&ds, 0, 0.2, 500, &s2, &err);
	SB_CHECK(rc == 0 && s2.n_val == 100 && s2.n_train == 400, "limit 500 -> 400/100");
	sb_split_free(&s2);
	rc = sb_split_carve(&ds, 0, 1.5, 0, &s2, &err);
	SB_CHECK(rc == SB_EUSAGE, "val_fraction 1.5 refused");
	sb_split_free(&s);
	sb_dataset_free(&ds);
	free(p);
	SB_CHECK(sb_round_half_even(2.5) == 2 && sb_round_half_even(3.5) == 4 && sb_round_half_even(200.2) == 200 &&
		 sb_round_half_even(1458.6) == 1459 && sb_round_half_even(0.5) == 0, "round half to even as Python");
	/* USPS recorded sizes: pool 7291 -> 5833/1458 */
	SB_CHECK(sb_round_half_even(0.2 * 7291) == 1458, "USPS n_val 1458 (PROTOCOL A1)");
	SB_CHECK(sb_round_half_even(0.2 * 50000) == 10000 && sb_round_half_even(0.2 * 60000) == 12000, "CIFAR and 60k pools");
}

static void guard_and_validation(void)
{
	struct sb_err err = {0};
	struct sb_dataset ds;
	write_image_ds("test.safetensors", "test", 50, 10, 0);
	char *p = sb_path_join(dir, "test.safetensors");
	int rc = sb_dataset_read(p, 0, &ds, &err);
	SB_CHECK(rc == SB_EVERDICT && strstr(err.msg, "refusing to read the test split"), "test split refused: %s", err.msg);
	rc = sb_dataset_read(p, 1, &ds, &err);
	SB_CHECK(rc == 0 && strcmp(ds.split, "test") == 0, "test split allowed for sb-test");
	uint32_t *idx;
	int64_t n;
	SB_CHECK(sb_split_test(&ds, 0, &idx, &n, &err) == 0 && n == 50, "all test examples");
	free(idx);
	struct sb_split s;
	SB_CHECK(sb_split_carve(&ds, 0, 0.2, 0, &s, &err) == SB_EVERDICT, "no validation split from a test file");
	sb_dataset_free(&ds);
	free(p);

	write_image_ds("bad.safetensors", "pool", 20, 10, 1);
	p = sb_path_join(dir, "bad.safetensors");
	rc = sb_dataset_read(p, 0, &ds, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "label 10 of example 19"), "label out of range: %s", err.msg);
	/* a file changed after its sidecar was written */
	write_image_ds("pool2.safetensors", "pool", 20, 10, 0);
	char *q = sb_path_join(dir, "pool2.safetensors");
	FILE *f = fopen(q, "r+b");
	fseek(f, -1, SEEK_END);
	fputc(0x55, f);
	fclose(f);
	rc = sb_dataset_read(q, 0, &ds, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "SHA-256 mismatch"), "tampered file refused: %s", err.msg);
	free(p);
	free(q);
}

static void presplit(void)
{
	struct sb_tensors ts;
	struct sb_err err = {0};
	sb_tensors_init(&ts);
	enum { N = 60, L = 8 };
	int32_t x[N * L] = {0}, len[N], y[N], seed[N];
	uint8_t part[N];
	for (int i = 0; i < N; i++) {
		len[i] = L;
		for (int j = 0; j < L; j++)
			x[i * L + j] = 2 + (i + j) % 50;
		y[i] = i % 10;
		seed[i] = i / 30;          /* seeds 0 and 1 */
		part[i] = (i % 30) >= 20;  /* 20 train, 10 validation per seed */
	}
	sb_tensors_add(&ts, "x", SB_I32, 2, (int64_t[]){N, L}, x, 0, &err);
	sb_tensors_add(&ts, "len", SB_I32, 1, (int64_t[]){N}, len, 0, &err);
	sb_tensors_add(&ts, "y", SB_I32, 1, (int64_t[]){N}, y, 0, &err);
	sb_tensors_add(&ts, "seed", SB_I32, 1, (int64_t[]){N}, seed, 0, &err);
	sb_tensors_add(&ts, "part", SB_U8, 1, (int64_t[]){N}, part, 0, &err);
	const char *kv[][2] = {{"format", "sparsebench.dataset"}, {"format_version", "1"}, {"task", "synth"},
			       {"split", "pool"}, {"modality", "text"}, {"classes", "10"}, {"vocab", "100"},
			       {"seq_len", "8"}, {"presplit", "1"}};
	for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
		sb_tensors_set_meta(&ts, kv[i][0], kv[i][1], &err);
	char *p = sb_path_join(dir, "synth.safetensors");
	sb_st_write(p, &ts, &err);
	sb_tensors_free(&ts);
	struct sb_dataset ds;
	int rc = sb_dataset_read(p, 0, &ds, &err);
	SB_CHECK(rc == 0 && ds.modality == SB_TEXT && ds.presplit && ds.L == 8, "read pre-split text pool (%s)", err.msg);
	struct sb_split s;
	rc = sb_split_carve(&ds, 1, 0.2, 0, &s, &err);
	int ok = rc == 0 && s.n_train == 20 && s.n_val == 10;
	for (int64_t i = 0; ok && i < s.n_train; i++)
		ok = seed[s.train[i]] == 1 && part[s.train[i]] == 0;
	for (int64_t i = 0; ok && i < s.n_val; i++)
		ok = seed[s.val[i]] == 1 && part[s.val[i]] == 1;
	SB_CHECK(ok, "pre-split seed 1: 20 train / 10 validation of that seed");
	sb_split_free(&s);
	/* a limit caps a pre-split task like a pool of `limit` examples: 15 -> 12 train, 3 validation */
	rc = sb_split_carve(&ds, 1, 0.2, 15, &s, &err);
	ok = rc == 0 && s.n_train == 12 && s.n_val == 3;
	for (int64_t i = 0; ok && i < s.n_train; i++)
		ok = seed[s.train[i]] == 1 && part[s.train[i]] == 0 && s.train[i] == 30 + i;
	for (int64_t i = 0; ok && i < s.n_val; i++)
		ok = seed[s.val[i]] == 1 && part[s.val[i]] == 1 && s.val[i] == 50 + i;
	SB_CHECK(ok, "pre-split with limit 15: the first 12 train and 3 validation examples of the seed (got %lld/%lld)",
		 (long long)s.n_train, (long long)s.n_val);
	sb_split_free(&s);
	rc = sb_split_carve(&ds, 1, 0.2, 1000, &s, &err);
	SB_CHECK(rc == 0 && s.n_train == 20 && s.n_val == 10, "pre-split with a limit above its size keeps everything");
	sb_split_free(&s);
	/* the cap's rounding (docs/sb-train.md): r = round-half-even(limit * val_fraction),
	 * n_val = max(1, r), n_train = max(1, limit - r), each at most what the seed has */
	static const struct {
		double vf;
		int64_t limit, n_train, n_val;
	} caps[] = {{0.2, 1, 1, 1}, {0.04, 12, 12, 1}, {0.25, 10, 8, 2}, {0.3, 5, 3, 2}, {0.9, 2, 1, 2}};
	for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
		rc = sb_split_carve(&ds, 1, caps[i].vf, caps[i].limit, &s, &err);
		SB_CHECK(rc == 0 && s.n_train == caps[i].n_train && s.n_val == caps[i].n_val,
			 "pre-split, limit %lld, val_fraction %g: %lld/%lld (got %lld/%lld)", (long long)caps[i].limit,
			 caps[i].vf, (long long)caps[i].n_train, (long long)caps[i].n_val, (long long)s.n_train,
			 (long long)s.n_val);
		sb_split_free(&s);
	}
	/* val_fraction 0 with a limit that cuts the seed's examples cannot cap a separate
	 * validation part: refused (sb_split_check, which sb-train runs before training); a limit
	 * at or above them cuts nothing and is accepted */
	rc = sb_split_carve(&ds, 1, 0, 15, &s, &err);
	SB_CHECK(rc == SB_EUSAGE && sb_split_check(&ds, 1, 0, 15, &err) == SB_EUSAGE,
		 "pre-split, limit 15, val_fraction 0 refused (rc %d)", rc);
	rc = sb_split_carve(&ds, 1, 0, 1000, &s, &err);
	SB_CHECK(rc == 0 && s.n_train == 20 && s.n_val == 10 && sb_split_check(&ds, 1, 0, 1000, &err) == 0,
		 "pre-split, limit 1000 (above the seed's 30), val_fraction 0: nothing cut, accepted (rc %d)", rc);
	sb_split_free(&s);
	rc = sb_split_carve(&ds, 1, 0, 30, &s, &err);
	SB_CHECK(rc == 0 && s.n_train == 20 && s.n_val == 10, "pre-split, limit 30 (exactly the seed's), val_fraction 0: accepted (rc %d)", rc);
	sb_split_free(&s);
	rc = sb_split_carve(&ds, 1, 0, 29, &s, &err);
	SB_CHECK(rc == SB_EUSAGE, "pre-split, limit 29 (one below the seed's), val_fraction 0 refused (rc %d)", rc);
	rc = sb_split_carve(&ds, 1, 0, 0, &s, &err);
	SB_CHECK(rc == 0 && s.n_train == 20 && s.n_val == 10 && sb_split_check(&ds, 1, 0, 0, &err) == 0,
		 "pre-split without a limit: val_fraction 0 is unused (its validation part is its own)");
	sb_split_free(&s);
	rc = sb_split_carve(&ds, 7, 0.2, 0, &s, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "seed 7"), "missing seed refused: %s", err.msg);
	sb_dataset_free(&ds);
	free(p);
}

int main(void)
{
	snprintf(dir, sizeof dir, "/tmp/sb_test_dataset.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	split_checks();
	guard_and_validation();
	presplit();
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		printf("# cleanup failed\n");
	return sb_test_done();
}
