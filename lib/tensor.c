/* tensor.c — named tensors and the safetensors format (read with full
 * validation of untrusted input; write atomically). */
#include "tensor.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "hash.h"
#include "io.h"
#include "json.h"

static const struct {
	const char *name;
	size_t size;
} dtypes[] = {
	[SB_F32] = {"F32", 4}, [SB_F64] = {"F64", 8}, [SB_F16] = {"F16", 2}, [SB_BF16] = {"BF16", 2},
	[SB_I8] = {"I8", 1},   [SB_U8] = {"U8", 1},   [SB_I16] = {"I16", 2}, [SB_U16] = {"U16", 2},
	[SB_I32] = {"I32", 4}, [SB_U32] = {"U32", 4}, [SB_I64] = {"I64", 8}, [SB_U64] = {"U64", 8},
	[SB_BOOL] = {"BOOL", 1},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])

size_t sb_dtype_size(enum sb_dtype t) { return (unsigned)t < N_DTYPES ? dtypes[t].size : 0; }
const char *sb_dtype_name(enum sb_dtype t) { return (unsigned)t < N_DTYPES ? dtypes[t].name : "?"; }

int sb_dtype_parse(const char *s, enum sb_dtype *out)
{
	for (size_t i = 0; i < N_DTYPES; i++)
		if (strcmp(s, dtypes[i].name) == 0) {
			*out = (enum sb_dtype)i;
			return 0;
		}
	return -1;
}

int64_t sb_tensor_numel(const struct sb_tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= t->shape[i];
	return n;
}

void sb_tensors_init(struct sb_tensors *ts) { memset(ts, 0, sizeof *ts); }

void sb_tensors_free(struct sb_tensors *ts)
{
	if (!ts)
		return;
	for (size_t i = 0; i < ts->n; i++) {
		free(ts->t[i].name);
		if (!ts->t[i].borrowed)
			free(ts->t[i].data);
	}
	free(ts->t);
	for (size_t i = 0; i < ts->n_meta; i++) {
		free(ts->meta_keys[i]);
		free(ts->meta_vals[i]);
	}
	free(ts->meta_keys);
	free(ts->meta_vals);
	memset(ts, 0, sizeof *ts);
}

/* numel * size with overflow check; returns 0 on overflow (and sets *ok=0) */
static size_t checked_nbytes(int ndim, const int64_t *shape, size_t esize, int *ok)
{
	unsigned __int128 n = esize;
	*ok = 1;
	for (int i = 0; i < ndim; i++) {
		if (shape[i] < 0) {
			*ok = 0;
			return 0;
		}
		n *= (uint64_t)shape[i];
		if (n > (unsigned __int128)SIZE_MAX / 2) {
			*ok = 0;
			return 0;
		}
	}
	return (size_t)n;
}

int sb_tensors_add(struct sb_tensors *ts, const char *name, enum sb_dtype dtype, int ndim, const int64_t *shape,
		   const void *data, int borrow, struct sb_err *err)
{
	if (ndim < 0 || ndim > SB_TENSOR_MAXDIM)
		return SB_ERR(err, SB_EINTERNAL, "tensor '%s': %d dimensions (limit %d)", name, ndim, SB_TENSOR_MAXDIM);
	if (sb_tensors_find(ts, name))
		return SB_ERR(err, SB_EINTERNAL, "tensor '%s' added twice", name);
	int ok;
	size_t nbytes = checked_nbytes(ndim, shape, sb_dtype_size(dtype), &ok);
	if (!ok)
		return SB_ERR(err, SB_EINTERNAL, "tensor '%s': bad shape", name);
	if (ts->n == ts->cap) {
		size_t cap = ts->cap ? ts->cap * 2 : 16;
		struct sb_tensor *t = realloc(ts->t, cap * sizeof *t);
		if (!t)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		ts->t = t;
		ts->cap = cap;
	}
	struct sb_tensor *t = &ts->t[ts->n];
	memset(t, 0, sizeof *t);
	t->name = strdup(name);
	t->dtype = dtype;
	t->ndim = ndim;
	for (int i = 0; i < ndim; i++)
		t->shape[i] = shape[i];
	t->nbytes = nbytes;
	t->borrowed = borrow;
	if (borrow) {
		t->data = (void *)data;
	} else {
		t->data = malloc(nbytes ? nbytes : 1);
		if (t->data && nbytes)
			memcpy(t->data, data, nbytes);
	}
	if (!t->name || !t->data) {
		free(t->name);
		if (!borrow)
			free(t->data);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	ts->n++;
	return 0;
}

const struct sb_tensor *sb_tensors_find(const struct sb_tensors *ts, const char *name)
{
	for (size_t i = 0; i < ts->n; i++)
		if (strcmp(ts->t[i].name, name) == 0)
			return &ts->t[i];
	return NULL;
}

int sb_tensors_set_meta(struct sb_tensors *ts, const char *key, const char *val, struct sb_err *err)
{
	for (size_t i = 0; i < ts->n_meta; i++)
		if (strcmp(ts->meta_keys[i], key) == 0) {
			char *v = strdup(val);
			if (!v)
				return SB_ERR(err, SB_EINTERNAL, "out of memory");
			free(ts->meta_vals[i]);
			ts->meta_vals[i] = v;
			return 0;
		}
	char **k = realloc(ts->meta_keys, (ts->n_meta + 1) * sizeof *k);
	if (!k)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	ts->meta_keys = k;
	char **v = realloc(ts->meta_vals, (ts->n_meta + 1) * sizeof *v);
	if (!v)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	ts->meta_vals = v;
	ts->meta_keys[ts->n_meta] = strdup(key);
	ts->meta_vals[ts->n_meta] = strdup(val);
	if (!ts->meta_keys[ts->n_meta] || !ts->meta_vals[ts->n_meta])
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	ts->n_meta++;
	return 0;
}

int sb_tensors_set_metas(struct sb_tensors *ts, const char *const (*kv)[2], size_t n, struct sb_err *err)
{
	for (size_t i = 0; i < n; i++)
		SB_TRY(sb_tensors_set_meta(ts, kv[i][0], kv[i][1], err));
	return 0;
}

const char *sb_tensors_meta(const struct sb_tensors *ts, const char *key)
{
	for (size_t i = 0; i < ts->n_meta; i++)
		if (strcmp(ts->meta_keys[i], key) == 0)
			return ts->meta_vals[i];
	return NULL;
}

/* ---------------------------------------------------------------- reading */

struct span {
	uint64_t b, e;
	const char *name;
};

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;
	return x->b < y->b ? -1 : x->b > y->b ? 1 : (x->e < y->e ? -1 : x->e > y->e);
}

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* Parse and validate the header; if data != NULL also copy tensor data. */
static int parse_header(const unsigned char *hdr, uint64_t hlen, uint64_t data_len, const unsigned char *data,
			int borrow, const char *path, struct sb_tensors *out, struct sb_err *err)
{
	struct sb_json *root = NULL;
	struct span *spans = NULL;
	int rc = sb_json_parse((const char *)hdr, hlen, &root, err);
	if (rc) {
		sb_err_prefix(err, "%s: header", path);
		return SB_EDATA;
	}
	if (root->type != SB_JSON_OBJECT) {
		rc = SB_ERR(err, SB_EDATA, "%s: header is not a JSON object", path);
		goto out;
	}
	spans = calloc(root->n ? root->n : 1, sizeof *spans);
	if (!spans) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto out;
	}
	size_t ns = 0;
	for (size_t i = 0; i < root->n; i++) {
		const char *name = root->keys[i];
		const struct sb_json *v = root->items[i];
		for (size_t j = 0; j < i; j++)
			if (strcmp(root->keys[j], name) == 0) {
				rc = SB_ERR(err, SB_EDATA, "%s: tensor '%s' appears twice in the header", path, name);
				goto out;
			}
		if (strcmp(name, "__metadata__") == 0) {
			if (v->type != SB_JSON_OBJECT) {
				rc = SB_ERR(err, SB_EDATA, "%s: __metadata__ is not an object", path);
				goto out;
			}
			for (size_t k = 0; k < v->n; k++) {
				if (v->items[k]->type != SB_JSON_STRING) {
					rc = SB_ERR(err, SB_EDATA, "%s: __metadata__ value '%s' is not a string", path, v->keys[k]);
					goto out;
				}
				if ((rc = sb_tensors_set_meta(out, v->keys[k], v->items[k]->text, err)))
					goto out;
			}
			continue;
		}
		if (v->type != SB_JSON_OBJECT) {
			rc = SB_ERR(err, SB_EDATA, "%s: tensor '%s': entry is not an object", path, name);
			goto out;
		}
		const char *dt = sb_json_str(sb_json_get(v, "dtype"), NULL);
		const struct sb_json *shape = sb_json_get(v, "shape");
		const struct sb_json *offs = sb_json_get(v, "data_offsets");
		enum sb_dtype dtype;
		if (!dt || sb_dtype_parse(dt, &dtype)) {
			rc = SB_ERR(err, SB_EDATA, "%s: tensor '%s': unknown or missing dtype", path, name);
			goto out;
		}
		if (!shape || shape->type != SB_JSON_ARRAY || shape->n > SB_TENSOR_MAXDIM) {
			rc = SB_ERR(err, SB_EDATA, "%s: tensor '%s': bad shape", path, name);
			goto out;
		}
		int64_t dims[SB_TENSOR_MAXDIM];
		for (size_t k = 0; k < shape->n; k++) {
			if (sb_json_int64(shape->items[k], &dims[k]) || dims[k] < 0) {
				rc = SB_ERR(err, SB_EDATA, "%s: tensor '%s': bad shape", path, name);
				goto out;
			}
		}
		int64_t b, e;
		if (!offs || offs->type != SB_JSON_ARRAY || offs->n != 2 || sb_json_int64(offs->items[0], &b) ||
		    sb_json_int64(offs->items[1], &e) || b < 0 || e < b) {
			rc = SB_ERR(err, SB_EDATA, "%s: tensor '%s': bad data_offsets", path, name);
			goto out;
		}
		if ((uint64_t)e > data_len) {
			rc = SB_ERR(err, SB_EDATA, "%s: tensor '%s': data_offsets [%" PRId64 ", %" PRId64 "] outside the file's %" PRIu64 " data bytes",
				    path, name, b, e, data_len);
			goto out;
		}
		int ok;
		size_t nbytes = checked_nbytes((int)shape->n, dims, sb_dtype_size(dtype), &ok);
		if (!ok || nbytes != (uint64_t)(e - b)) {
			rc = SB_ERR(err, SB_EDATA, "%s: tensor '%s': shape x dtype size does not match its %" PRId64 " bytes", path,
				    name, e - b);
			goto out;
		}
		spans[ns].b = (uint64_t)b;
		spans[ns].e = (uint64_t)e;
		spans[ns].name = name;
		ns++;
		if (data) {
			if ((rc = sb_tensors_add(out, name, dtype, (int)shape->n, dims, data + b, borrow, err)))
				goto out;
		} else {
			if ((rc = sb_tensors_add(out, name, dtype, (int)shape->n, dims, "", 1, err)))
				goto out;
			out->t[out->n - 1].data = NULL;
			out->t[out->n - 1].nbytes = nbytes;
		}
	}
	qsort(spans, ns, sizeof *spans, cmp_span);
	for (size_t i = 1; i < ns; i++) {
		if (spans[i].b < spans[i - 1].e) {
			rc = SB_ERR(err, SB_EDATA, "%s: tensors '%s' and '%s' overlap", path, spans[i - 1].name, spans[i].name);
			goto out;
		}
	}
out:
	free(spans);
	sb_json_free(root);
	return rc;
}

int sb_st_parse(const void *buf, size_t len, const char *path, struct sb_tensors *out, struct sb_err *err)
{
	sb_tensors_init(out);
	const unsigned char *p = buf;
	if (len < 8)
		return SB_ERR(err, SB_EDATA, "%s: too short for a safetensors file (%zu bytes)", path, len);
	uint64_t hlen = le64(p);
	if (hlen > SB_ST_HEADER_LIMIT)
		return SB_ERR(err, SB_EDATA, "%s: header size %" PRIu64 " exceeds the limit of %u bytes", path, hlen,
			      SB_ST_HEADER_LIMIT);
	if (hlen > len - 8)
		return SB_ERR(err, SB_EDATA, "%s: header size %" PRIu64 " larger than the file", path, hlen);
	int rc = parse_header(p + 8, hlen, len - 8 - hlen, p + 8 + hlen, 0, path, out, err);
	if (rc)
		sb_tensors_free(out);
	return rc;
}

int sb_st_read(const char *path, struct sb_tensors *out, struct sb_err *err)
{
	char *buf;
	size_t n;
	sb_tensors_init(out);
	SB_TRY(sb_read_file(path, &buf, &n, 0, err));
	int rc = sb_st_parse(buf, n, path, out, err);
	free(buf);
	return rc;
}

int sb_st_read_checked(const char *path, int sidecar, char hex[65], struct sb_tensors *out, struct sb_err *err)
{
	sb_tensors_init(out);
	char want[SB_SHA256_HEX], got[SB_SHA256_HEX], side[4200];
	snprintf(side, sizeof side, "%s.sha256", path);
	int check = sidecar || sb_file_exists(side);
	if (check)
		SB_TRY(sb_sidecar_read(path, want, err));
	char *buf;
	size_t n;
	SB_TRY(sb_read_file(path, &buf, &n, 0, err));
	sb_sha256_buf(buf, n, got);
	int rc = check && strcmp(got, want)
	             ? SB_ERR(err, SB_EDATA, "%s: SHA-256 mismatch: expected %s, actual %s", path, want, got)
	             : sb_st_parse(buf, n, path, out, err);
	free(buf);
	if (!rc && hex)
		memcpy(hex, got, SB_SHA256_HEX);
	return rc;
}

/* ---------------------------------------------------------------- a mapped file that shrinks */

/* When another process truncates a file that sb_st_map has mapped, the next touch of a page
 * past the new end raises SIGBUS, which would end the program without a word. While the
 * mapping is live, a handler turns that into one line on stderr, "PROG: PATH: the file
 * changed while mapped (truncated by another process?)", removes the pending temporary files
 * as SIGINT would (lib/io.h), and exits with SB_EIO: the one place in lib/ that prints and
 * exits, since a fault in the middle of a copy has no caller to return to. The line is
 * formatted when the file is mapped, so the handler only compares addresses and calls
 * write(2) and _exit(2), both async-signal-safe. A SIGBUS anywhere else (a bug, or one sent
 * by kill) gets the default action, as without the handler. MAP_WATCH mappings are watched
 * at once; more are mapped as before, unwatched (an import maps all of a checkpoint's shards
 * at once; a run's checkpoint is one file). */
#define MAP_WATCH 16
static struct {
	atomic_int state; /* 0 free, 1 being filled, 2 live */
	uintptr_t lo, hi;
	size_t n;
	char line[4400];
} watched[MAP_WATCH];

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	(void)uctx;
	uintptr_t a = (uintptr_t)si->si_addr;
	for (int i = 0; si->si_code == BUS_ADRERR && i < MAP_WATCH; i++) {
		if (atomic_load(&watched[i].state) == 2 && a >= watched[i].lo && a < watched[i].hi) {
			sb_io_remove_pending();
			ssize_t w = write(STDERR_FILENO, watched[i].line, watched[i].n);
			(void)w;
			_exit(SB_EIO);
		}
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static pthread_once_t sigbus_once = PTHREAD_ONCE_INIT;

static void install_sigbus(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

static void watch(const void *addr, size_t len, const char *path)
{
	pthread_once(&sigbus_once, install_sigbus);
	for (int i = 0; i < MAP_WATCH; i++) {
		int expect = 0;
		if (!atomic_compare_exchange_strong(&watched[i].state, &expect, 1))
			continue;
		watched[i].lo = (uintptr_t)addr;
		watched[i].hi = (uintptr_t)addr + len;
		size_t cap = sizeof watched[i].line;
		int n = snprintf(watched[i].line, cap, "%s: %s: the file changed while mapped (truncated by another process?)\n",
				 sb_prog, path);
		watched[i].n = n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
		if (watched[i].n)
			watched[i].line[watched[i].n - 1] = '\n'; /* a path too long for the line is cut */
		atomic_store(&watched[i].state, 2);
		return;
	}
}

static void unwatch(const void *addr)
{
	for (int i = 0; i < MAP_WATCH; i++) {
		if (atomic_load(&watched[i].state) == 2 && watched[i].lo == (uintptr_t)addr) {
			atomic_store(&watched[i].state, 0);
			return;
		}
	}
}

int sb_st_map(const char *path, const char *sha256, struct sb_tensors *out, struct sb_st_map *map,
	      struct sb_err *err)
{
	sb_tensors_init(out);
	map->addr = NULL;
	map->len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return SB_ERRNO(err, path);
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		int rc = S_ISREG(st.st_mode) ? SB_ERRNO(err, path) : SB_ERR(err, SB_EIO, "%s: not a regular file", path);
		close(fd);
		return rc;
	}
	size_t len = (size_t)st.st_size;
	if (len < 8) {
		close(fd);
		return SB_ERR(err, SB_EDATA, "%s: too short for a safetensors file (%zu bytes)", path, len);
	}
	void *a = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (a == MAP_FAILED)
		return SB_ERRNO(err, path);
	watch(a, len, path);
	const unsigned char *p = a;
	uint64_t hlen = le64(p);
	int rc;
	char got[SB_SHA256_HEX];
	if (sha256)
		sb_sha256_buf(a, len, got); /* the bytes that will be used, before they are parsed */
	if (sha256 && strcmp(got, sha256))
		rc = SB_ERR(err, SB_EDATA, "%s: SHA-256 mismatch: expected %s, actual %s", path, sha256, got);
	else if (hlen > SB_ST_HEADER_LIMIT || hlen > len - 8)
		rc = SB_ERR(err, SB_EDATA, "%s: bad header size %" PRIu64, path, hlen);
	else
		rc = parse_header(p + 8, hlen, len - 8 - hlen, p + 8 + hlen, 1, path, out, err);
	if (rc) {
		sb_tensors_free(out);
		unwatch(a);
		munmap(a, len);
		return rc;
	}
	map->addr = a;
	map->len = len;
	return 0;
}

void sb_st_unmap(struct sb_tensors *ts, struct sb_st_map *map)
{
	sb_tensors_free(ts);
	if (map->addr) {
		unwatch(map->addr);
		munmap(map->addr, map->len);
	}
	map->addr = NULL;
	map->len = 0;
}

int sb_st_read_meta(const char *path, struct sb_tensors *out, struct sb_err *err)
{
	sb_tensors_init(out);
	FILE *f = fopen(path, "rb");
	if (!f)
		return SB_ERRNO(err, path);
	unsigned char h8[8];
	int rc = 0;
	unsigned char *hdr = NULL;
	if (fseek(f, 0, SEEK_END) != 0) {
		rc = SB_ERRNO(err, path);
		goto out;
	}
	long size = ftell(f);
	rewind(f);
	if (size < 8 || fread(h8, 1, 8, f) != 8) {
		rc = SB_ERR(err, SB_EDATA, "%s: too short for a safetensors file", path);
		goto out;
	}
	uint64_t hlen = le64(h8);
	if (hlen > SB_ST_HEADER_LIMIT || hlen > (uint64_t)size - 8) {
		rc = SB_ERR(err, SB_EDATA, "%s: bad header size %" PRIu64, path, hlen);
		goto out;
	}
	hdr = malloc(hlen + 1);
	if (!hdr) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto out;
	}
	if (fread(hdr, 1, hlen, f) != hlen) {
		rc = SB_ERR(err, SB_EDATA, "%s: truncated header", path);
		goto out;
	}
	rc = parse_header(hdr, hlen, (uint64_t)size - 8 - hlen, NULL, 0, path, out, err);
out:
	free(hdr);
	fclose(f);
	if (rc)
		sb_tensors_free(out);
	return rc;
}

/* ---------------------------------------------------------------- writing */

int sb_st_write(const char *path, const struct sb_tensors *ts, struct sb_err *err)
{
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_jw_obj(&w);
	if (ts->n_meta) {
		sb_jw_key(&w, "__metadata__");
		sb_jw_obj(&w);
		for (size_t i = 0; i < ts->n_meta; i++)
			sb_jw_kstr(&w, ts->meta_keys[i], ts->meta_vals[i]);
		sb_jw_obj_end(&w);
	}
	uint64_t off = 0;
	for (size_t i = 0; i < ts->n; i++) {
		const struct sb_tensor *t = &ts->t[i];
		sb_jw_key(&w, t->name);
		sb_jw_obj(&w);
		sb_jw_kstr(&w, "dtype", sb_dtype_name(t->dtype));
		sb_jw_key(&w, "shape");
		sb_jw_arr(&w);
		for (int k = 0; k < t->ndim; k++)
			sb_jw_int(&w, t->shape[k]);
		sb_jw_arr_end(&w);
		sb_jw_key(&w, "data_offsets");
		sb_jw_arr(&w);
		sb_jw_uint(&w, off);
		sb_jw_uint(&w, off + t->nbytes);
		sb_jw_arr_end(&w);
		sb_jw_obj_end(&w);
		off += t->nbytes;
	}
	sb_jw_obj_end(&w);
	if (w.oom) {
		sb_jw_free(&w);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	size_t hlen = w.len;
	while (hlen % 8)
		hlen++;
	unsigned char h8[8];
	for (int i = 0; i < 8; i++)
		h8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
	struct sb_atomic a;
	int rc = sb_atomic_open(&a, path, err);
	if (rc) {
		sb_jw_free(&w);
		return rc;
	}
	int bad = fwrite(h8, 1, 8, a.f) != 8 || fwrite(w.buf, 1, w.len, a.f) != w.len;
	for (size_t i = w.len; i < hlen && !bad; i++)
		bad = fputc(' ', a.f) == EOF;
	for (size_t i = 0; i < ts->n && !bad; i++)
		if (ts->t[i].nbytes)
			bad = fwrite(ts->t[i].data, 1, ts->t[i].nbytes, a.f) != ts->t[i].nbytes;
	sb_jw_free(&w);
	if (bad) {
		rc = SB_ERRNO(err, path);
		sb_atomic_abort(&a);
		return rc;
	}
	return sb_atomic_commit(&a, err);
}
