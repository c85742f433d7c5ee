/* dataset.h — dataset files written by sb-fetch and read by every stage, and
 * the one function that carves the validation split.
 *
 * DATA_DIR/TASK/pool.safetensors and DATA_DIR/TASK/test.safetensors (+ .sha256):
 *   x      images: U8 [N, C, H, W];   text: I32 [N, L] token ids, 0 = pad
 *   len    text only: I32 [N], number of tokens before padding (0..L)
 *   y      I32 [N], labels 0..classes-1
 *   seed, part   only for pre-split tasks (synthetic_marker): I32 [N] generator
 *          seed of each example, and U8 [N] part (0 = train, 1 = validation;
 *          the test file has part 2)
 * __metadata__ (all strings): format "sparsebench.dataset", format_version "1",
 *   task, split ("pool" | "test"), modality ("image" | "text"), classes, patch
 *   (images), seq_len and vocab (text), presplit ("0" | "1"), registry_version,
 *   sources (JSON array of {"name","sha256"}), generator (JSON, generated tasks),
 *   license.
 */
#ifndef SB_DATASET_H
#define SB_DATASET_H

#include <stdint.h>

#include "err.h"
#include "tensor.h"

enum sb_modality { SB_IMAGE, SB_TEXT };

struct sb_dataset {
	char task[64];
	char split[16];           /* "pool" or "test" */
	enum sb_modality modality;
	int64_t n;
	int classes;
	int C, H, W;              /* images */
	int patch;                /* images: patch size from the registry */
	int L;                    /* text: tokens per example (without CLS) */
	int vocab;                /* text */
	int presplit;
	const uint8_t *x_u8;      /* images [n][C][H][W] */
	const int32_t *x_i32;     /* text [n][L] */
	const int32_t *len;       /* text [n] */
	const int32_t *y;         /* [n] */
	const int32_t *seed;      /* presplit [n] */
	const uint8_t *part;      /* presplit [n] */
	char sha256[65];          /* SHA-256 of the file as read */
	uint64_t size_bytes;      /* size of the file as hashed */
	char path[4096];
	struct sb_tensors ts;     /* owns the arrays */
};

/* Read and validate a dataset file (shapes, dtypes, label range, token range,
 * lengths). allow_test = 0 refuses a file whose metadata says split=test with
 * SB_EVERDICT ("PATH: refusing to read the test split ..."): only sb-test passes 1.
 * Verifies PATH.sha256 when it exists (SB_EDATA on mismatch). */
int sb_dataset_read(const char *path, int allow_test, struct sb_dataset *ds, struct sb_err *err);
void sb_dataset_free(struct sb_dataset *ds);

/* Whether BYTES (the whole content of a file, decompressed) are a safetensors file whose
 * metadata says split=test: a test dataset or corpus file, whatever its name. For the readers
 * of arbitrary files (LM corpora given as a path, the tokenizer): they refuse such bytes
 * (SB_EVERDICT, as sb_dataset_read does), since only sb-test reads test data. */
int sb_bytes_are_test_split(const void *bytes, size_t n);

/* The validation split, carved from the pool per seed (DESIGN §3, PROTOCOL A1):
 *   if limit > 0 and limit < n: keep the first `limit` of a permutation of 0..n-1
 *     drawn from (seed, SB_RNG_CAP);
 *   perm = permutation of the kept indices drawn from (seed, SB_RNG_SPLIT);
 *   n_val = round-half-to-even(val_fraction * n_kept) (Python's round);
 *   validation = perm[0..n_val), train = the rest (both in permutation order).
 * Pre-split tasks: train = examples with seed == `seed` and part == 0, validation
 * those with part == 1, in file order; a limit > 0 below the seed's examples keeps the
 * first max(1, r) validation and the first max(1, limit - r) training examples, each
 * at most what the seed has, r = round-half-to-even(limit * val_fraction) (about as a
 * pool of `limit` examples would split; limit 1 gives 1 and 1).
 * Returns owned arrays of indices into the dataset. */
struct sb_split {
	uint32_t *train, *val;
	int64_t n_train, n_val;
};
int sb_split_carve(const struct sb_dataset *ds, uint64_t seed, double val_fraction, int64_t limit,
		   struct sb_split *out, struct sb_err *err);
/* Whether the split's parameters fit the dataset, whatever the seed (sb_split_carve
 * checks the same): val_fraction in [0, 1), and in (0, 1) with a limit that cuts a pre-split
 * task's examples of the seed (whose validation examples are a part of their own: a limit
 * keeps a share of each; a limit at or above the seed's examples cuts nothing). SB_EUSAGE
 * otherwise, as from sb_split_carve. */
int sb_split_check(const struct sb_dataset *ds, uint64_t seed, double val_fraction, int64_t limit,
		   struct sb_err *err);
/* Test examples of a dataset: all, or for pre-split tasks those of `seed`. */
int sb_split_test(const struct sb_dataset *ds, uint64_t seed, uint32_t **idx, int64_t *n,
		  struct sb_err *err);
void sb_split_free(struct sb_split *s);

/* Python's round() for the split size: round half to even. */
int64_t sb_round_half_even(double v);

#endif
