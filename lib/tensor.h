/* tensor.h — named host tensors and safetensors files.
 *
 * safetensors: 8-byte little-endian header length N, N bytes of JSON header
 * ({"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...,
 * "__metadata__": {"k": "v", ...}}), then the data. Reading validates an
 * untrusted file completely before use (SB_EDATA on any violation, naming the
 * file and the tensor): header size limit, valid JSON object, known dtype,
 * shape product * dtype size == e - b without overflow, offsets inside the
 * file, no overlapping tensors, metadata values are strings.
 */
#ifndef SB_TENSOR_H
#define SB_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

enum sb_dtype { SB_F32, SB_F64, SB_F16, SB_BF16, SB_I8, SB_U8, SB_I16, SB_U16, SB_I32, SB_U32, SB_I64, SB_U64, SB_BOOL };

#define SB_TENSOR_MAXDIM 8
#define SB_ST_HEADER_LIMIT (100u << 20) /* 100 MiB, as upstream */

struct sb_tensor {
	char *name;
	enum sb_dtype dtype;
	int ndim;
	int64_t shape[SB_TENSOR_MAXDIM];
	void *data;      /* owned unless `borrowed` */
	size_t nbytes;
	int borrowed;
};

size_t sb_dtype_size(enum sb_dtype t);
const char *sb_dtype_name(enum sb_dtype t);           /* "F32" ... */
int sb_dtype_parse(const char *s, enum sb_dtype *out); /* 0 or -1 */
int64_t sb_tensor_numel(const struct sb_tensor *t);

/* A set of tensors with string metadata (a safetensors file in memory). */
struct sb_tensors {
	struct sb_tensor *t;
	size_t n, cap;
	char **meta_keys, **meta_vals;
	size_t n_meta;
};

void sb_tensors_init(struct sb_tensors *ts);
void sb_tensors_free(struct sb_tensors *ts);
/* Add a tensor; data is copied unless borrow != 0 (then it must outlive ts). */
int sb_tensors_add(struct sb_tensors *ts, const char *name, enum sb_dtype dtype, int ndim,
		   const int64_t *shape, const void *data, int borrow, struct sb_err *err);
const struct sb_tensor *sb_tensors_find(const struct sb_tensors *ts, const char *name);
int sb_tensors_set_meta(struct sb_tensors *ts, const char *key, const char *val, struct sb_err *err);
/* sb_tensors_set_meta for each of kv[0..n) ({key, value} pairs) in order; stops at the first error. */
int sb_tensors_set_metas(struct sb_tensors *ts, const char *const (*kv)[2], size_t n, struct sb_err *err);
const char *sb_tensors_meta(const struct sb_tensors *ts, const char *key); /* NULL if absent */

/* Read and validate a safetensors file. */
int sb_st_read(const char *path, struct sb_tensors *out, struct sb_err *err);
/* sb_st_read that also checks the file against its sidecar PATH.sha256 on the bytes it parses
 * (one read: nothing can change between the check and the use). sidecar 1: the sidecar must
 * exist; 0: it is checked when present. A mismatch is SB_EDATA "PATH: SHA-256 mismatch:
 * expected X, actual Y". hex (may be NULL) receives the file's SHA-256. */
int sb_st_read_checked(const char *path, int sidecar, char hex[65], struct sb_tensors *out, struct sb_err *err);
/* Parse from memory (path is used in messages). */
int sb_st_parse(const void *buf, size_t len, const char *path, struct sb_tensors *out, struct sb_err *err);
/* Map a safetensors file read-only and validate it as sb_st_read does; the tensors borrow
 * the mapping (no copy: the file's pages are the page cache's, read as used), which
 * sb_st_unmap releases with them. With sha256 (64 hex digits) not NULL, the mapped bytes
 * are hashed first, and a file whose SHA-256 differs is refused before it is parsed (SB_EDATA,
 * "PATH: SHA-256 mismatch: expected X, actual Y", as sb_sidecar_verify says it): the bytes
 * verified are those of the file mapped, not of a file read by another open. Should another process truncate the file meanwhile, a
 * touch of a page past its new end does not kill the program with SIGBUS: a handler writes
 * "PROG: PATH: the file changed while mapped (truncated by another process?)" to stderr,
 * removes pending temporary files and exits with SB_EIO (lib/tensor.c, "a mapped file that
 * shrinks"). */
struct sb_st_map {
	void *addr;
	size_t len;
};
int sb_st_map(const char *path, const char *sha256, struct sb_tensors *out, struct sb_st_map *map,
	      struct sb_err *err);
void sb_st_unmap(struct sb_tensors *ts, struct sb_st_map *map);
/* Read only the header's metadata (cheap: does not read tensor data). */
int sb_st_read_meta(const char *path, struct sb_tensors *out, struct sb_err *err);
/* Write atomically (temp file + rename). Tensors are written in the order added;
 * the header is padded with spaces to a multiple of 8 bytes. */
int sb_st_write(const char *path, const struct sb_tensors *ts, struct sb_err *err);

#endif
