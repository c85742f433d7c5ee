/* tasks.c — one registry task: obtain and verify its files, decode them with
 * the format's decoder, and write DATA_DIR/TASK/{pool,test}.safetensors (or a
 * corpus's train/valid/test) with .sha256 sidecars, as lib/dataset.h says.
 *
 * Nothing is written until every file of the task has verified and decoded:
 * a bad input leaves no output. Outputs are written atomically (sb_st_write),
 * then their sidecars. An output whose sidecar verifies and whose metadata
 * carries the same recipe hash (decoder version, task entry, SHA-256 of every
 * source) is left alone: re-running is a no-op that re-verifies. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "dataset.h"
#include "io.h"
#include "rng.h"
#include "sbf.h"

/* ---- obtained files, verified once per process ---- */

#define MAX_MEMO 64
static struct sbf_src memo[MAX_MEMO];
static int nmemo;

static int get_file(struct sbf_ctx *c, const char *task, const char *id, const struct sbf_src **out, struct sb_err *err)
{
	for (int i = 0; i < nmemo; i++)
		if (!strcmp(memo[i].f->id, id)) {
			*out = &memo[i];
			return 0;
		}
	const struct sbf_file *f = sbf_file(c->reg, id);
	if (!f)
		return SB_ERR(err, SB_EINTERNAL, "task %s: unknown file %s", task, id);
	if (nmemo == MAX_MEMO)
		return SB_ERR(err, SB_EINTERNAL, "too many files in one run");
	struct sbf_src *s = &memo[nmemo];
	int rc = sbf_obtain(c, f, s, err);
	if (rc) {
		const char *how = sbf_str(f->json, "obtain");
		if (how && rc == SB_EIO)
			snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg), " (obtain: %s)", how);
		return rc;
	}
	nmemo++;
	*out = s;
	return 0;
}

static void emit_archive(struct sbf_ctx *c, const char *task, const struct sbf_src *s)
{
	struct sb_jw *w = c->w;
	sb_jw_record(w, "fetch.archive", 1);
	sb_jw_kstr(w, "task", task);
	sb_jw_kstr(w, "file", s->f->id);
	sb_jw_kstr(w, "origin", s->origin);
	sb_jw_kstr(w, "path", s->path);
	if (s->url[0])
		sb_jw_kstr(w, "url", s->url);
	if (s->url_final[0])
		sb_jw_kstr(w, "url_final", s->url_final);
	sb_jw_kint(w, "size_bytes", (int64_t)s->size);
	sb_jw_kstr(w, "sha256", s->sha256);
	sb_jw_kstr(w, "md5", s->md5);
	sb_jw_kstr(w, "verified_by", s->verified_by);
	if (!strcmp(s->verified_by, "content_sha256"))
		sb_jw_kstr(w, "content_sha256", s->content_sha256);
	sb_jw_obj_end(w);
	sb_jw_line(w, NULL); /* a failed write shows at exit (sb_cli_finish) */
}

/* ---- decoded splits ---- */

struct split {
	const char *name; /* "pool", "test", "train", "valid" */
	struct sb_tensors ts;
	int64_t n;
	void *own[8];
	int nown;
	struct sb_blob blobs[8];
	int nblobs;
};

static void split_free(struct split *s)
{
	sb_tensors_free(&s->ts);
	for (int i = 0; i < s->nown; i++)
		free(s->own[i]);
	for (int i = 0; i < s->nblobs; i++)
		sb_blob_free(&s->blobs[i]);
	s->nown = s->nblobs = 0;
}

static void *own(struct split *s, void *p)
{
	if (p)
		s->own[s->nown++] = p;
	return p;
}

static int add(struct split *s, const char *name, enum sb_dtype t, int nd, const int64_t *shape, const void *data,
               struct sb_err *err)
{
	return sb_tensors_add(&s->ts, name, t, nd, shape, data, 1, err);
}

/* Images: x U8 [n, C, H, W] and y I32 [n]. */
static int image_split(struct split *s, int64_t n, const int64_t chw[3], const uint8_t *x, const int32_t *y,
                       struct sb_err *err)
{
	int64_t xs[4] = {n, chw[0], chw[1], chw[2]}, ys[1] = {n};
	s->n = n;
	SB_TRY(add(s, "x", SB_U8, 4, xs, x, err));
	return add(s, "y", SB_I32, 1, ys, y, err);
}

struct tinfo {
	const char *name, *decoder, *modality;
	const struct sb_json *t;
	int64_t classes, n_pool, n_test;
	int64_t chw[3];
};

static int check_count(const struct tinfo *ti, const char *split, const char *what, int64_t n, struct sb_err *err)
{
	int64_t want = !strcmp(split, "pool") ? ti->n_pool : ti->n_test;
	if (want >= 0 && n != want)
		return SB_ERR(err, SB_EDATA, "%s: %lld examples, but the registry expects %lld for the %s split of %s",
		              what, (long long)n, (long long)want, split, ti->name);
	return 0;
}

static int check_labels(const struct tinfo *ti, const char *what, int32_t *y, int64_t n, int64_t offset,
                        struct sb_err *err)
{
	for (int64_t i = 0; i < n; i++) {
		int64_t v = (int64_t)y[i] + offset;
		if (v < 0 || v >= ti->classes)
			return SB_ERR(err, SB_EDATA, "%s: label %d of example %lld outside the %lld classes%s", what,
			              y[i], (long long)i, (long long)ti->classes,
			              offset ? " (after the label offset)" : "");
		y[i] = (int32_t)v;
	}
	return 0;
}

/* Get the decompressed bytes of a gzip source (verified content when there). */
static int gz_bytes(const struct sbf_src *s, struct sb_blob *out, const uint8_t **data, size_t *n, struct sb_err *err)
{
	if (s->content.data) {
		*data = s->content.data;
		*n = s->content.n;
		return 0;
	}
	SB_TRY(sb_decompress_file(s->path, s->path, "gzip", out, SBF_MEMBER_LIMIT, err));
	*data = out->data;
	*n = out->n;
	return 0;
}

/* IDX images + labels (already decompressed) into an image split. */
static int idx_pair(const struct tinfo *ti, struct split *s, const uint8_t *ib, size_t in, const char *iname,
                    const uint8_t *lb, size_t ln, const char *lname, int transpose, int64_t offset, struct sb_err *err)
{
	struct sb_idx im, lab;
	SB_TRY(sb_idx_parse(ib, in, iname, &im, err));
	SB_TRY(sb_idx_parse(lb, ln, lname, &lab, err));
	if (im.ndim != 3 || (int64_t)im.dims[1] != ti->chw[1] || (int64_t)im.dims[2] != ti->chw[2] || ti->chw[0] != 1)
		return SB_ERR(err, SB_EDATA, "%s: IDX images must be N x %lld x %lld (got %d dimensions: %u x %u x %u)",
		              iname, (long long)ti->chw[1], (long long)ti->chw[2], im.ndim, im.dims[0],
		              im.ndim > 1 ? im.dims[1] : 0, im.ndim > 2 ? im.dims[2] : 0);
	if (lab.ndim != 1)
		return SB_ERR(err, SB_EDATA, "%s: IDX labels must have 1 dimension (got %d)", lname, lab.ndim);
	if (im.dims[0] != lab.dims[0])
		return SB_ERR(err, SB_EDATA, "%s: %u images but %s holds %u labels", iname, im.dims[0], lname,
		              lab.dims[0]);
	int64_t n = im.dims[0];
	SB_TRY(check_count(ti, s->name, iname, n, err));
	int32_t *y = own(s, malloc((size_t)(n ? n : 1) * sizeof *y));
	if (!y)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int64_t i = 0; i < n; i++)
		y[i] = lab.data[i];
	SB_TRY(check_labels(ti, lname, y, n, offset, err));
	const uint8_t *x = im.data;
	if (transpose) {
		size_t H = im.dims[1], W = im.dims[2];
		uint8_t *t = own(s, malloc((size_t)(n ? n : 1) * H * W));
		if (!t)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		for (int64_t k = 0; k < n; k++) {
			const uint8_t *src = im.data + (size_t)k * H * W;
			uint8_t *dst = t + (size_t)k * H * W;
			for (size_t i = 0; i < H; i++)
				for (size_t j = 0; j < W; j++)
					dst[i * W + j] = src[j * H + i];
		}
		x = t;
	}
	return image_split(s, n, ti->chw, x, y, err);
}

static int dec_idx(struct sbf_ctx *c, const struct tinfo *ti, const struct sbf_src *const src[4], struct split sp[2],
                   struct sb_err *err)
{
	for (int k = 0; k < 2; k++) {
		const uint8_t *ib, *lb;
		size_t in, ln;
		SB_TRY(gz_bytes(src[2 * k], &sp[k].blobs[sp[k].nblobs++], &ib, &in, err));
		SB_TRY(gz_bytes(src[2 * k + 1], &sp[k].blobs[sp[k].nblobs++], &lb, &ln, err));
		SB_TRY(idx_pair(ti, &sp[k], ib, in, src[2 * k]->path, lb, ln, src[2 * k + 1]->path, 0, 0, err));
	}
	return 0;
}

static int dec_emnist(struct sbf_ctx *c, const struct tinfo *ti, const struct sbf_src *arch, struct split sp[2],
                      struct sb_err *err)
{
	const char *mem[4];
	const char *roles[2] = {"pool", "test"};
	for (int k = 0; k < 2; k++) {
		mem[2 * k] = sbf_str(sb_json_get(ti->t, roles[k]), "images");
		mem[2 * k + 1] = sbf_str(sb_json_get(ti->t, roles[k]), "labels");
		if (!mem[2 * k] || !mem[2 * k + 1])
			return SB_ERR(err, SB_EDATA, "registry: task %s: %s needs 'images' and 'labels' members",
			              ti->name, roles[k]);
	}
	int64_t offset = 0;
	sbf_int(ti->t, "label_offset", &offset);
	int transpose = sb_json_bool(sb_json_get(ti->t, "transpose"), 0);
	struct sb_blob gz[4] = {{0}};
	int rc = sb_ar_members(arch->path, arch->path, 4, mem, gz, SBF_MEMBER_LIMIT, err);
	if (rc)
		return rc;
	for (int k = 0; k < 2 && !rc; k++) {
		char iname[4400], lname[4400];
		snprintf(iname, sizeof iname, "%s[%s]", arch->path, mem[2 * k]);
		snprintf(lname, sizeof lname, "%s[%s]", arch->path, mem[2 * k + 1]);
		struct sb_blob *bi = &sp[k].blobs[sp[k].nblobs++], *bl = &sp[k].blobs[sp[k].nblobs++];
		if ((rc = sb_decompress_mem(gz[2 * k].data, gz[2 * k].n, iname, "gzip", bi, SBF_MEMBER_LIMIT, err)) ||
		    (rc = sb_decompress_mem(gz[2 * k + 1].data, gz[2 * k + 1].n, lname, "gzip", bl, SBF_MEMBER_LIMIT,
		                            err)))
			break;
		rc = idx_pair(ti, &sp[k], bi->data, bi->n, iname, bl->data, bl->n, lname, transpose, offset, err);
	}
	for (int i = 0; i < 4; i++)
		sb_blob_free(&gz[i]);
	return rc;
}

static int npz_array(const struct sbf_src *s, const char *array, struct sb_blob *blob, struct sb_npy *a, char *name,
                     size_t namen, struct sb_err *err)
{
	char member[128];
	snprintf(member, sizeof member, "%s.npy", array);
	const char *m[1] = {member};
	SB_TRY(sb_ar_members(s->path, s->path, 1, m, blob, SBF_MEMBER_LIMIT, err));
	snprintf(name, namen, "%s[%s]", s->path, member);
	return sb_npy_parse(blob->data, blob->n, name, a, err);
}

static int dec_npz(struct sbf_ctx *c, const struct tinfo *ti, const struct sbf_src *const src[4], struct split sp[2],
                   struct sb_err *err)
{
	const char *array = sbf_str(ti->t, "array");
	if (!array)
		array = "arr_0";
	for (int k = 0; k < 2; k++) {
		struct sb_npy im, lab;
		char iname[4400], lname[4400];
		SB_TRY(npz_array(src[2 * k], array, &sp[k].blobs[sp[k].nblobs++], &im, iname, sizeof iname, err));
		SB_TRY(npz_array(src[2 * k + 1], array, &sp[k].blobs[sp[k].nblobs++], &lab, lname, sizeof lname, err));
		if (im.kind != 'u' || im.itemsize != 1 || im.ndim != 3 || im.shape[1] != ti->chw[1] ||
		    im.shape[2] != ti->chw[2] || ti->chw[0] != 1)
			return SB_ERR(err, SB_EDATA, "%s: images must be uint8 N x %lld x %lld", iname,
			              (long long)ti->chw[1], (long long)ti->chw[2]);
		if ((lab.kind != 'u' && lab.kind != 'i') || lab.ndim != 1)
			return SB_ERR(err, SB_EDATA, "%s: labels must be a 1-dimensional integer array", lname);
		if (im.shape[0] != lab.shape[0])
			return SB_ERR(err, SB_EDATA, "%s: %lld images but %s holds %lld labels", iname,
			              (long long)im.shape[0], lname, (long long)lab.shape[0]);
		int64_t n = im.shape[0];
		SB_TRY(check_count(ti, sp[k].name, iname, n, err));
		int32_t *y = own(&sp[k], malloc((size_t)(n ? n : 1) * sizeof *y));
		if (!y)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		for (int64_t i = 0; i < n; i++) {
			int64_t v = sb_npy_get_int(&lab, (uint64_t)i);
			if (v < 0 || v >= ti->classes)
				return SB_ERR(err, SB_EDATA, "%s: label %lld of example %lld outside the %lld classes",
				              lname, (long long)v, (long long)i, (long long)ti->classes);
			y[i] = (int32_t)v;
		}
		SB_TRY(image_split(&sp[k], n, ti->chw, im.data, y, err));
	}
	return 0;
}

static int str_list(const struct sb_json *a, const char **out, int max)
{
	if (!a || a->type != SB_JSON_ARRAY || a->n == 0 || a->n > (size_t)max)
		return -1;
	for (size_t i = 0; i < a->n; i++) {
		if (a->items[i]->type != SB_JSON_STRING)
			return -1;
		out[i] = a->items[i]->text;
	}
	return (int)a->n;
}

static int dec_cifar(struct sbf_ctx *c, const struct tinfo *ti, const struct sbf_src *arch, struct split sp[2],
                     struct sb_err *err)
{
	const char *mem[16];
	int np = str_list(sb_json_get(ti->t, "pool"), mem, 8);
	int nt = np > 0 ? str_list(sb_json_get(ti->t, "test"), mem + np, 8) : -1;
	int64_t lb = 1, li = 0;
	sbf_int(ti->t, "label_bytes", &lb);
	sbf_int(ti->t, "label_index", &li);
	if (np < 1 || nt < 1 || lb < 1 || lb > 2 || li < 0 || li >= lb || ti->chw[0] != 3 || ti->chw[1] != 32 ||
	    ti->chw[2] != 32)
		return SB_ERR(err, SB_EDATA, "registry: task %s: bad CIFAR member lists, label bytes or shape",
		              ti->name);
	struct sb_blob b[16] = {{0}};
	int rc = sb_ar_members(arch->path, arch->path, (size_t)(np + nt), mem, b, SBF_MEMBER_LIMIT, err);
	if (rc)
		return rc;
	for (int k = 0; k < 2 && !rc; k++) {
		uint8_t *x = NULL;
		int32_t *y = NULL;
		int64_t n = 0;
		int lo = k ? np : 0, hi = k ? np + nt : np;
		for (int i = lo; i < hi && !rc; i++) {
			char name[4400];
			snprintf(name, sizeof name, "%s[%s]", arch->path, mem[i]);
			rc = sb_cifar_parse(b[i].data, b[i].n, name, (int)lb, (int)li, &x, &y, &n, err);
		}
		own(&sp[k], x);
		own(&sp[k], y);
		if (rc)
			break;
		char what[4400];
		snprintf(what, sizeof what, "%s[%s]", arch->path, mem[lo]);
		if ((rc = check_count(ti, sp[k].name, what, n, err)) || (rc = check_labels(ti, what, y, n, 0, err)))
			break;
		rc = image_split(&sp[k], n, ti->chw, x, y, err);
	}
	for (int i = 0; i < np + nt; i++)
		sb_blob_free(&b[i]);
	return rc;
}

/* Map a whole file read-only (the .mat files are read in place). */
static int map_file(const char *path, struct sb_blob *b, struct sb_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return SB_ERRNO(err, path);
	struct stat st;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return SB_ERRNO(err, path);
	}
	b->n = (size_t)st.st_size;
	b->data = NULL;
	if (b->n > 0) {
		void *p = mmap(NULL, b->n, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			close(fd);
			return SB_ERRNO(err, path);
		}
		b->data = p;
	}
	close(fd);
	return 0;
}

static int dec_svhn(struct sbf_ctx *c, const struct tinfo *ti, const struct sbf_src *const src[2], struct split sp[2],
                    struct sb_err *err)
{
	const struct sb_json *lm = sb_json_get(ti->t, "label_map");
	for (int k = 0; k < 2; k++) {
		struct sb_blob m = {0};
		SB_TRY(map_file(src[k]->path, &m, err));
		const char *want[2] = {"X", "y"};
		struct sb_mat_var v[2];
		const char *name = src[k]->path;
		int rc =
		    sb_mat_read(m.data ? m.data : (const uint8_t *)"", m.n, name, 2, want, v, SBF_MEMBER_LIMIT, err);
		if (rc) {
			if (m.data)
				munmap(m.data, m.n);
			return rc;
		}
		int64_t H = ti->chw[1], W = ti->chw[2], C = ti->chw[0];
		int64_t N = v[0].ndim == 4 ? v[0].dims[3] : v[0].ndim == 3 ? 1 : -1;
		if (N < 0 || v[0].dims[0] != H || v[0].dims[1] != W || v[0].dims[2] != C)
			rc = SB_ERR(err, SB_EDATA, "%s: MAT: X must be %lld x %lld x %lld x N (got %d dimensions)",
			            name, (long long)H, (long long)W, (long long)C, v[0].ndim);
		else if (v[1].count != (uint64_t)N || v[1].ndim != 2 || (v[1].dims[0] != 1 && v[1].dims[1] != 1))
			rc = SB_ERR(err, SB_EDATA, "%s: MAT: X holds %lld images but y holds %llu labels", name,
			            (long long)N, (unsigned long long)v[1].count);
		else
			rc = check_count(ti, sp[k].name, name, N, err);
		uint8_t *x = NULL;
		int32_t *y = NULL;
		if (!rc) {
			x = own(&sp[k], malloc((size_t)(N ? N : 1) * (size_t)(C * H * W)));
			y = own(&sp[k], malloc((size_t)(N ? N : 1) * sizeof *y));
			if (!x || !y)
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		}
		/* MATLAB is column-major: X(i, j, c, n) is at i + H j + H W c + H W C n;
		 * the output is [n][c][i][j]. */
		if (!rc && v[0].mtype == SB_MI_UINT8) {
			const uint8_t *X = v[0].data;
			for (int64_t n = 0; n < N; n++)
				for (int64_t ch = 0; ch < C; ch++)
					for (int64_t i = 0; i < H; i++)
						for (int64_t j = 0; j < W; j++)
							x[((n * C + ch) * H + i) * W + j] =
							    X[i + H * (j + W * (ch + C * n))];
		} else if (!rc) {
			for (int64_t n = 0; n < N && !rc; n++)
				for (int64_t ch = 0; ch < C && !rc; ch++)
					for (int64_t i = 0; i < H && !rc; i++)
						for (int64_t j = 0; j < W; j++) {
							double d = sb_mat_get(
							    &v[0], (uint64_t)(i + H * (j + W * (ch + C * n))));
							if (!(d >= 0 && d <= 255 && d == floor(d))) {
								rc = SB_ERR(err, SB_EDATA,
								            "%s: MAT: pixel value %g is not an integer "
								            "in 0..255",
								            name, d);
								break;
							}
							x[((n * C + ch) * H + i) * W + j] = (uint8_t)d;
						}
		}
		for (int64_t n = 0; n < N && !rc; n++) {
			double d = sb_mat_get(&v[1], (uint64_t)n);
			if (!(d >= -1e9 && d <= 1e9 && d == floor(d))) {
				rc = SB_ERR(err, SB_EDATA, "%s: MAT: label %g of example %lld is not an integer", name,
				            d, (long long)n);
				break;
			}
			char key[32];
			snprintf(key, sizeof key, "%lld", (long long)d);
			int64_t mapped;
			y[n] = sbf_int(lm, key, &mapped) == 0 ? (int32_t)mapped : (int32_t)d;
		}
		if (!rc)
			rc = check_labels(ti, name, y, N, 0, err);
		sb_mat_var_free(&v[0]);
		sb_mat_var_free(&v[1]);
		if (m.data)
			munmap(m.data, m.n);
		if (!rc)
			rc = image_split(&sp[k], N, ti->chw, x, y, err);
		if (rc)
			return rc;
	}
	return 0;
}

static int dec_libsvm(struct sbf_ctx *c, const struct tinfo *ti, const struct sbf_src *const src[2], struct split sp[2],
                      struct sb_err *err)
{
	int64_t nfeat = 0, offset = 0;
	sbf_int(ti->t, "features", &nfeat);
	sbf_int(ti->t, "label_offset", &offset);
	if (nfeat != ti->chw[0] * ti->chw[1] * ti->chw[2] || nfeat < 1)
		return SB_ERR(err, SB_EDATA, "registry: task %s: 'features' must equal C*H*W", ti->name);
	for (int k = 0; k < 2; k++) {
		struct sb_blob *b = &sp[k].blobs[sp[k].nblobs++];
		SB_TRY(sb_decompress_file(src[k]->path, src[k]->path, "bzip2", b, SBF_MEMBER_LIMIT, err));
		double *xv;
		int32_t *y;
		int64_t n;
		SB_TRY(sb_libsvm_parse((const char *)b->data, b->n, src[k]->path, (int)nfeat, &xv, &y, &n, err));
		own(&sp[k], xv);
		own(&sp[k], y);
		SB_TRY(check_count(ti, sp[k].name, src[k]->path, n, err));
		SB_TRY(check_labels(ti, src[k]->path, y, n, offset, err));
		uint8_t *x = own(&sp[k], malloc((size_t)(n ? n : 1) * (size_t)nfeat));
		if (!x)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		for (int64_t i = 0; i < n * nfeat; i++) {
			int p = sb_usps_pixel(xv[i]);
			if (p < 0)
				return SB_ERR(err, SB_EDATA, "%s: example %lld: feature %lld = %g outside [-1, 1]",
				              src[k]->path, (long long)(i / nfeat), (long long)(i % nfeat + 1), xv[i]);
			x[i] = (uint8_t)p;
		}
		SB_TRY(image_split(&sp[k], n, ti->chw, x, y, err));
	}
	return 0;
}

/* growable arrays for the text tasks */
struct tbuf {
	int32_t *x, *len, *y;
	int64_t n, cap;
};

static int tbuf_push(struct tbuf *b, int L, struct sb_err *err)
{
	if (b->n == b->cap) {
		int64_t nc = b->cap ? 2 * b->cap : 1024;
		int32_t *x = realloc(b->x, (size_t)nc * (size_t)L * sizeof *x);
		if (x)
			b->x = x;
		int32_t *l = realloc(b->len, (size_t)nc * sizeof *l);
		if (l)
			b->len = l;
		int32_t *y = realloc(b->y, (size_t)nc * sizeof *y);
		if (y)
			b->y = y;
		if (!x || !l || !y)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		b->cap = nc;
	}
	b->n++;
	return 0;
}

static int text_split(struct split *s, int64_t n, int L, int32_t *x, int32_t *len, int32_t *y, struct sb_err *err)
{
	int64_t xs[2] = {n, L}, ns[1] = {n};
	s->n = n;
	SB_TRY(add(s, "x", SB_I32, 2, xs, x, err));
	SB_TRY(add(s, "len", SB_I32, 1, ns, len, err));
	return add(s, "y", SB_I32, 1, ns, y, err);
}

static int dec_news(struct sbf_ctx *c, const struct tinfo *ti, const struct sbf_src *arch, struct split sp[2],
                    struct sb_err *err)
{
	const char *dirs[2] = {sbf_str(ti->t, "pool"), sbf_str(ti->t, "test")};
	int64_t L = 0, V = 0;
	if (!dirs[0] || !dirs[1] || sbf_int(ti->t, "seq_len", &L) || sbf_int(ti->t, "vocab", &V) || L < 1 ||
	    L > 1 << 20 || V < 3 || V > INT32_MAX)
		return SB_ERR(err, SB_EDATA, "registry: task %s: needs 'pool', 'test', 'seq_len' and 'vocab'",
		              ti->name);
	struct sb_ar *ar;
	SB_TRY(sb_ar_open_file(&ar, arch->path, arch->path, err));
	struct tbuf tb[2] = {{0}};
	char groups[64][128];
	int ngroups = 0, rc = 0;
	char *clean = NULL;
	size_t cleancap = 0;
	int64_t docs = 0;
	for (;;) {
		const char *p;
		int is_file;
		if ((rc = sb_ar_next(ar, &p, &is_file, err)) || !p)
			break;
		if (!is_file)
			continue;
		while (p[0] == '.' && p[1] == '/')
			p += 2;
		const char *s1 = strchr(p, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL;
		if (!s1 || !s2 || strchr(s2 + 1, '/') || !s2[1] || s2 == s1 + 1)
			continue; /* not SPLIT/GROUP/DOC */
		int k;
		for (k = 0; k < 2; k++)
			if (strlen(dirs[k]) == (size_t)(s1 - p) && !strncmp(p, dirs[k], (size_t)(s1 - p)))
				break;
		if (k == 2)
			continue;
		size_t gl = (size_t)(s2 - s1 - 1);
		int g;
		for (g = 0; g < ngroups; g++)
			if (strlen(groups[g]) == gl && !strncmp(groups[g], s1 + 1, gl))
				break;
		if (g == ngroups) {
			if (ngroups == 64 || gl >= sizeof groups[0]) {
				rc = SB_ERR(err, SB_EDATA, "%s: too many newsgroup folders (or a name too long)",
				            arch->path);
				break;
			}
			memcpy(groups[ngroups], s1 + 1, gl);
			groups[ngroups++][gl] = 0;
		}
		struct sb_blob doc;
		if ((rc = sb_ar_read(ar, &doc, 64u << 20, err)))
			break;
		if (doc.n > cleancap) {
			char *nc = realloc(clean, doc.n);
			if (!nc) {
				sb_blob_free(&doc);
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
				break;
			}
			clean = nc;
			cleancap = doc.n;
		}
		size_t cn = sb_news_clean((const char *)doc.data, doc.n, clean);
		sb_blob_free(&doc);
		if ((rc = tbuf_push(&tb[k], (int)L, err)))
			break;
		int64_t i = tb[k].n - 1;
		int64_t nt = sb_news_tokenize(clean, cn, tb[k].x + i * L, (int)L, (int)V);
		tb[k].len[i] = (int32_t)(nt < L ? nt : L);
		tb[k].y[i] = g;
		if (++docs % 2000 == 0)
			sb_progress(0, "%s: %lld documents tokenised", ti->name, (long long)docs);
	}
	sb_ar_close(ar);
	free(clean);
	for (int k = 0; k < 2; k++) {
		own(&sp[k], tb[k].x);
		own(&sp[k], tb[k].len);
		own(&sp[k], tb[k].y);
	}
	if (rc)
		return rc;
	if (ngroups != ti->classes)
		return SB_ERR(err, SB_EDATA, "%s: %d newsgroup folders, the registry expects %lld classes", arch->path,
		              ngroups, (long long)ti->classes);
	for (int k = 0; k < 2; k++) {
		char what[4400];
		snprintf(what, sizeof what, "%s[%s/]", arch->path, dirs[k]);
		if (tb[k].n == 0)
			return SB_ERR(err, SB_EDATA, "%s: no documents", what);
		SB_TRY(check_count(ti, sp[k].name, what, tb[k].n, err));
		SB_TRY(text_split(&sp[k], tb[k].n, (int)L, tb[k].x, tb[k].len, tb[k].y, err));
	}
	return 0;
}

static int dec_synth(struct sbf_ctx *c, const struct tinfo *ti, const int64_t *seeds, int nseeds, struct split sp[2],
                     struct sb_err *err)
{
	const struct sb_json *g = sb_json_get(ti->t, "generator");
	int64_t L, V, C, ntr, nva, nte, otr, ova, ote;
	if (sbf_int(g, "L", &L) || sbf_int(g, "V", &V) || sbf_int(g, "C", &C) || sbf_int(g, "n_train", &ntr) ||
	    sbf_int(g, "n_val", &nva) || sbf_int(g, "n_test", &nte) || sbf_int(g, "seed_offset_train", &otr) ||
	    sbf_int(g, "seed_offset_val", &ova) || sbf_int(g, "seed_offset_test", &ote) || L < 2 || L > 4096 || V < 3 ||
	    V > INT32_MAX || C < 2 || C != ti->classes || ntr < 0 || nva < 0 || nte < 0 || ntr > 1 << 24 ||
	    nva > 1 << 24 || nte > 1 << 24)
		return SB_ERR(err, SB_EDATA, "registry: task %s: bad generator parameters", ti->name);
	for (int k = 0; k < 2; k++) {
		int64_t per = k ? nte : ntr + nva, N = per * nseeds;
		int32_t *x = own(&sp[k], malloc((size_t)(N ? N : 1) * (size_t)L * sizeof *x));
		int32_t *len = own(&sp[k], malloc((size_t)(N ? N : 1) * sizeof *len));
		int32_t *y = own(&sp[k], malloc((size_t)(N ? N : 1) * sizeof *y));
		int32_t *sd = own(&sp[k], malloc((size_t)(N ? N : 1) * sizeof *sd));
		uint8_t *part = own(&sp[k], malloc((size_t)(N ? N : 1)));
		if (!x || !len || !y || !sd || !part)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		int64_t at = 0;
		for (int s = 0; s < nseeds; s++) {
			const int64_t cnt[2] = {k ? nte : ntr, k ? 0 : nva};
			const int64_t off[2] = {k ? ote : otr, ova};
			for (int pi = 0; pi < 2; pi++) {
				if (cnt[pi] == 0)
					continue;
				sb_synth_marker((uint64_t)(seeds[s] + off[pi]), cnt[pi], (int)L, (int)V, (int)C,
				                x + at * L, y + at);
				for (int64_t i = at; i < at + cnt[pi]; i++) {
					len[i] = (int32_t)L;
					sd[i] = (int32_t)seeds[s];
					part[i] = (uint8_t)(k ? 2 : pi);
				}
				at += cnt[pi];
			}
			sb_progress(0, "%s: generated seed %lld", ti->name, (long long)seeds[s]);
		}
		SB_TRY(text_split(&sp[k], N, (int)L, x, len, y, err));
		int64_t ns[1] = {N};
		SB_TRY(add(&sp[k], "seed", SB_I32, 1, ns, sd, err));
		SB_TRY(add(&sp[k], "part", SB_U8, 1, ns, part, err));
	}
	return 0;
}

/* ---- corpora ---- */

static int bytes_split(struct split *s, const uint8_t *data, size_t n, struct sb_err *err)
{
	int64_t shape[1] = {(int64_t)n};
	s->n = (int64_t)n;
	return add(s, "bytes", SB_U8, 1, shape, n ? data : (const uint8_t *)"", err);
}

static const char *const corpus_splits[3] = {"train", "valid", "test"};

static int dec_corpus(struct sbf_ctx *c, const struct tinfo *ti, const struct sbf_src **src, int nsrc,
                      struct split sp[3], struct sb_err *err)
{
	const char *arch = sbf_str(ti->t, "archive"), *file = sbf_str(ti->t, "file");
	const struct sb_json *splits = sb_json_get(ti->t, "splits");
	if (file) {
		const struct sb_json *fr = sb_json_get(ti->t, "split_fractions");
		const char *comp = sbf_str(ti->t, "compression");
		if (!fr || fr->type != SB_JSON_ARRAY || fr->n != 3)
			return SB_ERR(err, SB_EDATA, "registry: task %s: 'split_fractions' must hold 3 numbers",
			              ti->name);
		double f0 = sb_json_num(fr->items[0], -1), f1 = sb_json_num(fr->items[1], -1),
		       f2 = sb_json_num(fr->items[2], -1);
		if (f0 < 0 || f1 < 0 || f2 < 0 || fabs(f0 + f1 + f2 - 1) > 1e-9)
			return SB_ERR(err, SB_EDATA, "registry: task %s: 'split_fractions' must be >= 0 and sum to 1",
			              ti->name);
		struct sb_blob *b = &sp[0].blobs[sp[0].nblobs++];
		const uint8_t *d;
		size_t n;
		if (comp && !strcmp(comp, "gzip")) {
			SB_TRY(gz_bytes(src[0], b, &d, &n, err));
		} else if (comp) {
			return SB_ERR(err, SB_EDATA, "registry: task %s: unknown compression '%s'", ti->name, comp);
		} else {
			char *buf;
			SB_TRY(sb_read_file(src[0]->path, &buf, &n, 0, err));
			b->data = (uint8_t *)buf;
			b->n = n;
			d = b->data;
		}
		size_t cut1 = (size_t)floor(f0 * (double)n), cut2 = (size_t)floor((f0 + f1) * (double)n);
		if (cut2 > n)
			cut2 = n;
		SB_TRY(bytes_split(&sp[0], d, cut1, err));
		SB_TRY(bytes_split(&sp[1], d + cut1, cut2 - cut1, err));
		return bytes_split(&sp[2], d + cut2, n - cut2, err);
	}
	for (int k = 0; k < 3; k++) {
		const char *ref = sbf_str(splits, corpus_splits[k]);
		if (!ref)
			return SB_ERR(err, SB_EDATA, "registry: task %s: 'splits' lacks '%s'", ti->name,
			              corpus_splits[k]);
		struct sb_blob *b = &sp[k].blobs[sp[k].nblobs++];
		if (arch) {
			const char *m[1] = {ref};
			SB_TRY(sb_ar_members(src[0]->path, src[0]->path, 1, m, b, SBF_MEMBER_LIMIT, err));
		} else {
			char *buf;
			size_t n;
			SB_TRY(sb_read_file(src[k]->path, &buf, &n, 0, err));
			b->data = (uint8_t *)buf;
			b->n = n;
		}
		SB_TRY(bytes_split(&sp[k], b->data, b->n, err));
	}
	(void)nsrc;
	return 0;
}

/* ---- outputs ---- */

static int set_meta(struct split *s, const char *k, const char *v, struct sb_err *err)
{
	return sb_tensors_set_meta(&s->ts, k, v, err);
}

static int set_meta_int(struct split *s, const char *k, int64_t v, struct sb_err *err)
{
	char b[32];
	snprintf(b, sizeof b, "%lld", (long long)v);
	return set_meta(s, k, b, err);
}

static int fill_meta(struct sbf_ctx *c, const struct tinfo *ti, struct split *s, const char *sources,
                     const char *recipe, const char *generator, struct sb_err *err)
{
	int corpus = !strcmp(ti->modality, "corpus");
	SB_TRY(set_meta(s, "format", corpus ? "sparsebench.corpus" : "sparsebench.dataset", err));
	SB_TRY(set_meta(s, "format_version", "1", err));
	SB_TRY(set_meta(s, corpus ? "corpus" : "task", ti->name, err));
	SB_TRY(set_meta(s, "split", s->name, err));
	if (!corpus) {
		SB_TRY(set_meta(s, "modality", ti->modality, err));
		SB_TRY(set_meta_int(s, "classes", ti->classes, err));
		int64_t v;
		if (!strcmp(ti->modality, "image")) {
			if (sbf_int(ti->t, "patch", &v))
				return SB_ERR(err, SB_EDATA, "registry: task %s lacks 'patch'", ti->name);
			SB_TRY(set_meta_int(s, "patch", v, err));
		} else {
			if (sbf_int(ti->t, "seq_len", &v))
				return SB_ERR(err, SB_EDATA, "registry: task %s lacks 'seq_len'", ti->name);
			SB_TRY(set_meta_int(s, "seq_len", v, err));
			if (sbf_int(ti->t, "vocab", &v))
				return SB_ERR(err, SB_EDATA, "registry: task %s lacks 'vocab'", ti->name);
			SB_TRY(set_meta_int(s, "vocab", v, err));
		}
		SB_TRY(set_meta(s, "presplit", generator ? "1" : "0", err));
	}
	SB_TRY(set_meta(s, "registry_version", c->reg->version, err));
	SB_TRY(set_meta(s, "sources", sources, err));
	if (generator)
		SB_TRY(set_meta(s, "generator", generator, err));
	const char *lic = sbf_str(ti->t, "license"), *cit = sbf_str(ti->t, "citation");
	SB_TRY(set_meta(s, "license", lic ? lic : "unspecified", err));
	if (cit)
		SB_TRY(set_meta(s, "citation", cit, err));
	char dec[64];
	snprintf(dec, sizeof dec, "%s/%s", ti->decoder, SBF_DECODER_VERSION);
	SB_TRY(set_meta(s, "decoder", dec, err));
	return set_meta(s, "fetch_recipe_sha256", recipe, err);
}

static void emit_split(struct sbf_ctx *c, const struct tinfo *ti, const char *split, const char *path, const char *sha,
                       uint64_t size, int64_t n, const char *status)
{
	struct sb_jw *w = c->w;
	sb_jw_record(w, "fetch.split", 1);
	sb_jw_kstr(w, "task", ti->name);
	sb_jw_kstr(w, "split", split);
	sb_jw_kstr(w, "path", path);
	sb_jw_kstr(w, "sha256", sha);
	sb_jw_kint(w, "size_bytes", (int64_t)size);
	sb_jw_kint(w, "n", n);
	sb_jw_kstr(w, "status", status);
	sb_jw_obj_end(w);
	sb_jw_line(w, NULL);
}

/* Do the existing outputs verify and carry this recipe? Fills sha/size/n. */
static int current(const char *path, const char *recipe, char sha[SB_SHA256_HEX], uint64_t *size, int64_t *n)
{
	struct sb_err e = {0};
	struct stat st;
	if (stat(path, &st) != 0)
		return 0;
	char side[4200];
	snprintf(side, sizeof side, "%s.sha256", path);
	if (stat(side, &st) != 0)
		return 0;
	struct sb_tensors m;
	if (sb_st_read_meta(path, &m, &e))
		return 0;
	const char *r = sb_tensors_meta(&m, "fetch_recipe_sha256");
	int same = r && !strcmp(r, recipe);
	const struct sb_tensor *t = sb_tensors_find(&m, "y");
	if (!t)
		t = sb_tensors_find(&m, "bytes");
	*n = t ? t->shape[0] : -1;
	sb_tensors_free(&m);
	if (!same)
		return 0;
	if (sb_sidecar_verify(path, sha, &e)) {
		sb_cli_warn("%s (rewriting it)", e.msg);
		return 0;
	}
	stat(path, &st);
	*size = (uint64_t)st.st_size;
	return 1;
}

static int tinfo_of(const struct sb_json *t, struct tinfo *ti, struct sb_err *err)
{
	memset(ti, 0, sizeof *ti);
	ti->t = t;
	ti->name = sbf_str(t, "task");
	ti->decoder = sbf_str(t, "decoder");
	ti->modality = sbf_str(t, "modality");
	ti->n_pool = ti->n_test = -1;
	sbf_int(t, "classes", &ti->classes);
	sbf_int(t, "n_pool", &ti->n_pool);
	sbf_int(t, "n_test", &ti->n_test);
	if (!strcmp(ti->modality, "image")) {
		const struct sb_json *sh = sb_json_get(t, "shape");
		if (!sh || sh->type != SB_JSON_ARRAY || sh->n != 3)
			return SB_ERR(err, SB_EDATA, "registry: task %s: 'shape' must be [C, H, W]", ti->name);
		for (int i = 0; i < 3; i++)
			if (sb_json_int64(sh->items[i], &ti->chw[i]) || ti->chw[i] < 1 || ti->chw[i] > 4096)
				return SB_ERR(err, SB_EDATA, "registry: task %s: bad 'shape'", ti->name);
	}
	return 0;
}

/* The file ids a task reads, in a fixed order. */
static int task_files(const struct tinfo *ti, const char **ids, int max)
{
	const struct sb_json *t = ti->t;
	const char *d = ti->decoder, *arch = sbf_str(t, "archive");
	int n = 0;
	if (!strcmp(d, "idx") || !strcmp(d, "npz")) {
		const char *roles[2] = {"pool", "test"};
		for (int i = 0; i < 2; i++) {
			ids[n++] = sbf_str(sb_json_get(t, roles[i]), "images");
			ids[n++] = sbf_str(sb_json_get(t, roles[i]), "labels");
		}
	} else if (!strcmp(d, "svhn_mat") || !strcmp(d, "libsvm")) {
		ids[n++] = sbf_str(t, "pool");
		ids[n++] = sbf_str(t, "test");
	} else if (!strcmp(d, "corpus")) {
		const char *file = sbf_str(t, "file");
		if (file)
			ids[n++] = file;
		else if (arch)
			ids[n++] = arch;
		else
			for (int k = 0; k < 3 && n < max; k++)
				ids[n++] = sbf_str(sb_json_get(t, "splits"), corpus_splits[k]);
	} else if (arch) {
		ids[n++] = arch;
	}
	return n;
}

int sbf_run_task(struct sbf_ctx *c, const struct sb_json *task, const int64_t *seeds, int nseeds, struct sb_err *err)
{
	struct tinfo ti;
	SB_TRY(tinfo_of(task, &ti, err));
	int corpus = !strcmp(ti.modality, "corpus"), synth = !strcmp(ti.decoder, "synthetic_marker");
	const char *ids[8];
	int nids = task_files(&ti, ids, 8);
	const struct sbf_src *src[8];
	for (int i = 0; i < nids; i++) {
		if (!ids[i])
			return SB_ERR(err, SB_EDATA, "registry: task %s: missing file reference", ti.name);
		SB_TRY(get_file(c, ti.name, ids[i], &src[i], err));
	}
	for (int i = 0; i < nids; i++)
		emit_archive(c, ti.name, src[i]);

	/* The recipe: everything the output bytes depend on. */
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_jw_obj(&w);
	sb_jw_kstr(&w, "decoder_version", SBF_DECODER_VERSION);
	if (synth) {
		sb_jw_key(&w, "seeds");
		sb_jw_arr(&w);
		for (int i = 0; i < nseeds; i++)
			sb_jw_int(&w, seeds[i]);
		sb_jw_arr_end(&w);
	}
	sb_jw_key(&w, "sources");
	sb_jw_arr(&w);
	for (int i = 0; i < nids; i++) {
		sb_jw_obj(&w);
		sb_jw_kstr(&w, "name", src[i]->f->id);
		sb_jw_kstr(&w, "sha256", src[i]->sha256);
		sb_jw_obj_end(&w);
	}
	sb_jw_arr_end(&w);
	sb_jw_key(&w, "task");
	sb_jw_canonical(&w, task);
	sb_jw_obj_end(&w);
	char recipe[SB_SHA256_HEX];
	if (w.oom) {
		sb_jw_free(&w);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	sb_sha256_buf(w.buf, w.len, recipe);
	sb_jw_free(&w);

	/* sources and generator metadata (JSON strings) */
	sb_jw_init(&w, NULL);
	sb_jw_arr(&w);
	for (int i = 0; i < nids; i++) {
		sb_jw_obj(&w);
		sb_jw_kstr(&w, "name", src[i]->f->id);
		sb_jw_kstr(&w, "sha256", src[i]->sha256);
		sb_jw_obj_end(&w);
	}
	sb_jw_arr_end(&w);
	char *sources = strndup(w.buf ? w.buf : "[]", w.len);
	sb_jw_free(&w);
	char *generator = NULL;
	if (synth) {
		sb_jw_init(&w, NULL);
		sb_jw_obj(&w);
		const struct sb_json *g = sb_json_get(task, "generator");
		for (size_t i = 0; g && i < g->n; i++) {
			sb_jw_key(&w, g->keys[i]);
			sb_jw_value(&w, g->items[i]);
		}
		sb_jw_key(&w, "seeds");
		sb_jw_arr(&w);
		for (int i = 0; i < nseeds; i++)
			sb_jw_int(&w, seeds[i]);
		sb_jw_arr_end(&w);
		sb_jw_obj_end(&w);
		generator = strndup(w.buf, w.len);
		sb_jw_free(&w);
	}

	int nsplit = corpus ? 3 : 2, rc = 0;
	char dir[4096], paths[3][4200], lockp[4200];
	snprintf(dir, sizeof dir, "%s/%s", c->out, ti.name);
	struct split sp[3];
	memset(sp, 0, sizeof sp);
	for (int k = 0; k < nsplit; k++) {
		sp[k].name = corpus ? corpus_splits[k] : (k ? "test" : "pool");
		sb_tensors_init(&sp[k].ts);
		snprintf(paths[k], sizeof paths[k], "%s/%s.safetensors", dir, sp[k].name);
	}
	/* One process per task output at a time. */
	int lfd = -1;
	if ((rc = sb_mkdir_p(c->out, err)))
		goto done;
	snprintf(lockp, sizeof lockp, "%s/.%s.lock", c->out, ti.name);
	lfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lfd < 0) {
		rc = SB_ERRNO(err, lockp);
		goto done;
	}
	while (flock(lfd, LOCK_EX) != 0 && errno == EINTR)
		;

	char sha[3][SB_SHA256_HEX];
	uint64_t size[3];
	int64_t nn[3];
	int all = 1;
	for (int k = 0; k < nsplit; k++)
		all = all && current(paths[k], recipe, sha[k], &size[k], &nn[k]);
	if (all) {
		for (int k = 0; k < nsplit; k++)
			emit_split(c, &ti, sp[k].name, paths[k], sha[k], size[k], nn[k], "verified");
		goto done;
	}

	sb_progress(0, "%s: decoding", ti.name);
	double t0 = sb_monotonic_seconds();
	const char *d = ti.decoder;
	if (!strcmp(d, "idx"))
		rc = dec_idx(c, &ti, src, sp, err);
	else if (!strcmp(d, "emnist"))
		rc = dec_emnist(c, &ti, src[0], sp, err);
	else if (!strcmp(d, "npz"))
		rc = dec_npz(c, &ti, src, sp, err);
	else if (!strcmp(d, "cifar"))
		rc = dec_cifar(c, &ti, src[0], sp, err);
	else if (!strcmp(d, "svhn_mat"))
		rc = dec_svhn(c, &ti, src, sp, err);
	else if (!strcmp(d, "libsvm"))
		rc = dec_libsvm(c, &ti, src, sp, err);
	else if (!strcmp(d, "news"))
		rc = dec_news(c, &ti, src[0], sp, err);
	else if (synth)
		rc = dec_synth(c, &ti, seeds, nseeds, sp, err);
	else if (!strcmp(d, "corpus"))
		rc = dec_corpus(c, &ti, src, nids, sp, err);
	else
		rc = SB_ERR(err, SB_EINTERNAL, "decoder %s not implemented", d);
	if (rc)
		goto done;
	for (int k = 0; k < nsplit && !rc; k++)
		rc = fill_meta(c, &ti, &sp[k], sources, recipe, generator, err);
	if (rc)
		goto done;
	sb_progress(0, "%s: decoded in %.2f s; writing", ti.name, sb_monotonic_seconds() - t0);
	if ((rc = sb_mkdir_p(dir, err)))
		goto done;
	for (int k = 0; k < nsplit; k++) {
		/* Drop a stale sidecar first, so that a crash between the two
		 * renames never leaves a sidecar that names the old content. */
		char side[4300];
		snprintf(side, sizeof side, "%s.sha256", paths[k]);
		if (unlink(side) != 0 && errno != ENOENT) {
			rc = SB_ERRNO(err, side);
			goto done;
		}
		if ((rc = sb_st_write(paths[k], &sp[k].ts, err)) ||
		    (rc = sb_sha256_file(paths[k], sha[k], &size[k], err)) ||
		    (rc = sb_sidecar_write(paths[k], sha[k], err)))
			goto done;
	}
	/* Read every dataset file back with the stages' own reader (lib/dataset.h):
	 * what sb-fetch writes must be what sb-train accepts. */
	for (int k = 0; k < nsplit && !corpus; k++) {
		struct sb_dataset ds;
		if ((rc = sb_dataset_read(paths[k], 1, &ds, err))) {
			sb_err_prefix(err, "internal error: the dataset reader refuses what sb-fetch wrote");
			rc = SB_EINTERNAL;
			/* nothing the stages would refuse is left behind */
			for (int j = 0; j < nsplit; j++) {
				char side[4300];
				snprintf(side, sizeof side, "%s.sha256", paths[j]);
				unlink(side);
				unlink(paths[j]);
			}
			rmdir(dir);
			goto done;
		}
		sb_dataset_free(&ds);
	}
	for (int k = 0; k < nsplit; k++)
		emit_split(c, &ti, sp[k].name, paths[k], sha[k], size[k], sp[k].n, "written");
	sb_progress(1, "%s: done in %.2f s", ti.name, sb_monotonic_seconds() - t0);
done:
	if (lfd >= 0) {
		flock(lfd, LOCK_UN);
		close(lfd);
	}
	for (int k = 0; k < nsplit; k++)
		split_free(&sp[k]);
	free(sources);
	free(generator);
	return rc;
}
