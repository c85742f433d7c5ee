/* fetch.h — sb-fetch's decoders: bytes of an upstream file in, arrays out.
 *
 * Used by fetch/ (the sb-fetch program), by the unit tests and by the fuzz
 * harnesses (tests/fuzz/fetch/). They live in lib/ only so that those three can
 * link them; no other stage should need them. Nothing here prints or exits: a
 * failure returns an enum sb_code and fills struct sb_err with a one-line
 * message that starts with the name given by the caller (the file, or
 * "FILE[MEMBER]" for a member of an archive).
 *
 * Every decoder treats its input as untrusted: sizes in headers are checked
 * against the bytes present (and against overflow) before anything is
 * allocated from them, and decompression is bounded by a caller's limit.
 */
#ifndef SB_FETCH_H
#define SB_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* An owned byte buffer. */
struct sb_blob {
	uint8_t *data;
	size_t n;
};
void sb_blob_free(struct sb_blob *b); /* NULL-safe; leaves {NULL, 0} */

/* ---- archives and compressed streams (libarchive) ---- */

/* Is an archive member's path safe to extract under a target directory?
 * Refuses empty and absolute paths, ".." components, backslashes and control
 * characters ("." components are fine). Returns 0 when safe. */
int sb_ar_path_safe(const char *path);

/* An archive read entry by entry (tar, zip, ... with any compression filter).
 * Every entry's path is checked with sb_ar_path_safe, and link entries' targets
 * too: an unsafe one is SB_EDATA ("NAME: member 'P' escapes the target
 * directory"). */
struct sb_ar;
int sb_ar_open_file(struct sb_ar **out, const char *path, const char *name, struct sb_err *err);
int sb_ar_open_mem(struct sb_ar **out, const void *buf, size_t n, const char *name, struct sb_err *err);
/* Next entry: returns 0 with *path the entry's path (valid until the next
 * call; NULL at the end of the archive) and *is_file set for regular files;
 * an sb_code on error. */
int sb_ar_next(struct sb_ar *a, const char **path, int *is_file, struct sb_err *err);
/* Read the current entry's data (at most `limit` bytes, else SB_EDATA). */
int sb_ar_read(struct sb_ar *a, struct sb_blob *out, uint64_t limit, struct sb_err *err);
void sb_ar_close(struct sb_ar *a);
/* The archive's format/filter description (libarchive's names), for messages. */
const char *sb_ar_format(const struct sb_ar *a);

/* Read the named members of an archive file into out[i] (each exactly once;
 * a missing or duplicated member is SB_EDATA). */
int sb_ar_members(const char *path, const char *name, size_t nmem, const char *const *members, struct sb_blob *out,
                  uint64_t limit, struct sb_err *err);

/* Decompress a single-stream compressed file (gzip or bzip2, as `filter`
 * says: "gzip" | "bzip2") from a file or from memory, at most `limit` bytes
 * of output. Input that is not of that compression is SB_EDATA. */
int sb_decompress_file(const char *path, const char *name, const char *filter, struct sb_blob *out, uint64_t limit,
                       struct sb_err *err);
int sb_decompress_mem(const void *buf, size_t n, const char *name, const char *filter, struct sb_blob *out,
                      uint64_t limit, struct sb_err *err);

/* ---- IDX (MNIST family) ---- */

struct sb_idx {
	int ndim;
	uint32_t dims[4];
	const uint8_t *data; /* borrowed from the input buffer */
	uint64_t count;      /* product of dims */
};
/* Unsigned-byte IDX only (type 0x08), 1..4 dimensions, no trailing bytes. */
int sb_idx_parse(const uint8_t *buf, size_t n, const char *name, struct sb_idx *out, struct sb_err *err);

/* ---- NumPy .npy ---- */

struct sb_npy {
	char kind;      /* 'u', 'i', 'f', 'b' */
	int itemsize;   /* 1, 2, 4, 8 */
	int big_endian; /* only meaningful when itemsize > 1 */
	int ndim;
	int64_t shape[8];
	uint64_t count;
	const uint8_t *data; /* borrowed */
};
/* Versions 1.0, 2.0, 3.0; C order only; integer, float and bool dtypes. */
int sb_npy_parse(const uint8_t *buf, size_t n, const char *name, struct sb_npy *out, struct sb_err *err);
/* Element i as int64 (integer and bool dtypes). */
int64_t sb_npy_get_int(const struct sb_npy *a, uint64_t i);

/* ---- MATLAB v5 MAT-file (level 5, little-endian; miCOMPRESSED via zlib) ---- */

enum {
	SB_MI_INT8 = 1,
	SB_MI_UINT8 = 2,
	SB_MI_INT16 = 3,
	SB_MI_UINT16 = 4,
	SB_MI_INT32 = 5,
	SB_MI_UINT32 = 6,
	SB_MI_SINGLE = 7,
	SB_MI_DOUBLE = 9,
	SB_MI_INT64 = 12,
	SB_MI_UINT64 = 13,
	SB_MI_MATRIX = 14,
	SB_MI_COMPRESSED = 15,
	SB_MI_UTF8 = 16
};

struct sb_mat_var {
	char name[64];
	int mxclass; /* mxDOUBLE_CLASS = 6, mxUINT8_CLASS = 9, ... */
	int ndim;
	int64_t dims[8]; /* column-major, as MATLAB */
	uint64_t count;
	int mtype;            /* storage type of the real part (SB_MI_*) */
	const uint8_t *data;  /* real part, count elements of mtype */
	struct sb_blob owned; /* the decompressed element, when it was compressed */
};
/* Find the numeric variables named in want[0..nwant) (each must be present
 * exactly once; others are skipped). Complex, sparse, cell, struct and object
 * arrays among the wanted ones are SB_EDATA. `limit` bounds each
 * decompressed element. */
int sb_mat_read(const uint8_t *buf, size_t n, const char *name, size_t nwant, const char *const *want,
                struct sb_mat_var *out, uint64_t limit, struct sb_err *err);
void sb_mat_var_free(struct sb_mat_var *v);
double sb_mat_get(const struct sb_mat_var *v, uint64_t i);

/* ---- LIBSVM text ---- */

/* Parse "LABEL IDX:VAL ..." lines (1-based increasing indices <= nfeat;
 * absent features are 0). Labels must be integers. Outputs are owned. */
int sb_libsvm_parse(const char *buf, size_t n, const char *name, int nfeat, double **x, int32_t **y, int64_t *rows,
                    struct sb_err *err);

/* USPS pixel: (v+1)/2 scaled to 0..255 and rounded to nearest, ties to even:
 * u8 = rint(255 * (v + 1) / 2) computed in double. v must lie in [-1, 1]
 * (within 1e-6, then clamped); returns -1 when it does not. */
int sb_usps_pixel(double v);

/* ---- CIFAR binary batches ---- */

/* Records of `label_bytes` (1: CIFAR-10; 2: CIFAR-100 coarse, fine) labels
 * followed by 3072 pixel bytes (R, G, B planes of 32x32). `label_index` picks
 * the label byte kept. Appends to x (n*3072) and y; *count is the number of
 * records. The buffer size must be a multiple of the record size. */
int sb_cifar_parse(const uint8_t *buf, size_t n, const char *name, int label_bytes, int label_index, uint8_t **x,
                   int32_t **y, int64_t *count, struct sb_err *err);

/* ---- 20 Newsgroups text (PROTOCOL A1) ---- */

/* BLAKE2b (RFC 7693), any digest length 1..64, optional key (0..64 bytes). */
void sb_blake2b(uint8_t *out, size_t outlen, const void *key, size_t keylen, const void *in, size_t inlen);

/* Strip header, quote lines and footer (docs/sb-fetch.md, "20 Newsgroups").
 * out must hold n bytes; returns the cleaned length. */
size_t sb_news_clean(const char *in, size_t n, char *out);
/* Token id of an already lower-cased token: 2 + LE-uint32(blake2b(tok, 4)) % (vocab - 2). */
int32_t sb_news_token_id(const char *tok, size_t len, int vocab);
/* Tokenise (runs of >= 2 ASCII letters, lower-cased): the first L ids go to
 * ids[0..L) (0-padded); returns the total number of tokens in the text. */
int64_t sb_news_tokenize(const char *text, size_t n, int32_t *ids, int L, int vocab);

/* ---- synthetic marker task (PROTOCOL A1) ---- */

/* n examples of length L over vocabulary V with C classes from generator seed s:
 * draws from sb_rng (seed s, SB_RNG_SYNTH, stream 0): first all x[i][j] =
 * 2 + below(V - 2) row by row, then pos[i] = below(L - 1) for every i;
 * x[i][pos] = 1, y[i] = x[i][pos + 1] % C. */
void sb_synth_marker(uint64_t s, int64_t n, int L, int V, int C, int32_t *x, int32_t *y);

#endif
