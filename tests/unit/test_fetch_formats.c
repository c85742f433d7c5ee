/* test_fetch_formats.c — the decoders of lib/fetch.h on inputs built in memory:
 * IDX, .npy headers, MAT v5 (hand-built elements: small tags, narrowed storage,
 * uncompressed and zlib-compressed matrices), LIBSVM, CIFAR records, USPS pixel
 * rounding, archive path checks, and archives written with libarchive. */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../harness.h"
#include "fetch.h"

static struct sb_err err;

/* ---- IDX ---- */
static void test_idx(void)
{
	uint8_t b[16 + 6] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6};
	struct sb_idx a;
	int rc = sb_idx_parse(b, sizeof b, "t", &a, &err);
	SB_CHECK(rc == 0 && a.ndim == 3 && a.dims[0] == 1 && a.dims[1] == 2 && a.dims[2] == 3 && a.count == 6 &&
	             a.data[5] == 6,
	         "IDX 1x2x3 parses (%s)", err.msg);
	SB_CHECK(sb_idx_parse(b, sizeof b - 1, "t", &a, &err) == SB_EDATA &&
	             strstr(err.msg, "t: IDX: header promises 6"),
	         "IDX one byte short: %s", err.msg);
	uint8_t c[sizeof b + 1];
	memcpy(c, b, sizeof b);
	c[sizeof b] = 9;
	SB_CHECK(sb_idx_parse(c, sizeof c, "t", &a, &err) == SB_EDATA && strstr(err.msg, "trailing"),
	         "IDX trailing byte: %s", err.msg);
	b[3] = 5;
	SB_CHECK(sb_idx_parse(b, sizeof b, "t", &a, &err) == SB_EDATA, "IDX with 5 dimensions refused");
	b[3] = 3;
	b[2] = 0x0d;
	SB_CHECK(sb_idx_parse(b, sizeof b, "t", &a, &err) == SB_EDATA && strstr(err.msg, "0x0d"),
	         "IDX float type refused: %s", err.msg);
	SB_CHECK(sb_idx_parse(b, 3, "t", &a, &err) == SB_EDATA, "IDX of 3 bytes refused");
}

/* ---- npy ---- */
static size_t npy(uint8_t *out, const char *dict, const void *data, size_t n)
{
	size_t hl = strlen(dict);
	size_t total = 10 + hl + 1;
	size_t pad = (64 - total % 64) % 64;
	memcpy(out, "\x93NUMPY\x01\x00", 8);
	out[8] = (uint8_t)((hl + pad + 1) & 0xff);
	out[9] = (uint8_t)((hl + pad + 1) >> 8);
	memcpy(out + 10, dict, hl);
	memset(out + 10 + hl, ' ', pad);
	out[10 + hl + pad] = '\n';
	memcpy(out + 11 + hl + pad, data, n);
	return 11 + hl + pad + n;
}

static void test_npy(void)
{
	uint8_t buf[512];
	struct sb_npy a;
	int16_t v[3] = {-2, 300, 7};
	size_t n = npy(buf, "{'descr': '<i2', 'fortran_order': False, 'shape': (3,), }", v, sizeof v);
	int rc = sb_npy_parse(buf, n, "t", &a, &err);
	SB_CHECK(rc == 0 && a.kind == 'i' && a.itemsize == 2 && a.ndim == 1 && a.shape[0] == 3 &&
	             sb_npy_get_int(&a, 0) == -2 && sb_npy_get_int(&a, 1) == 300,
	         "npy <i2 (3,) parses, sign-extended (%s)", err.msg);
	uint8_t be[4] = {0x01, 0x02, 0xff, 0xfe};
	n = npy(buf, "{'shape': (2,), 'fortran_order': False, 'descr': '>u2'}", be, 4);
	rc = sb_npy_parse(buf, n, "t", &a, &err);
	SB_CHECK(rc == 0 && sb_npy_get_int(&a, 0) == 0x0102 && sb_npy_get_int(&a, 1) == 0xfffe,
	         "npy >u2, keys in another order, no trailing comma (%s)", err.msg);
	uint8_t u[6] = {1, 2, 3, 4, 5, 6};
	n = npy(buf, "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", u, 6);
	SB_CHECK(sb_npy_parse(buf, n, "t", &a, &err) == 0 && a.ndim == 2 && a.count == 6, "npy |u1 (2, 3)");
	n = npy(buf, "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }", u, 6);
	SB_CHECK(sb_npy_parse(buf, n, "t", &a, &err) == SB_EDATA && strstr(err.msg, "Fortran"),
	         "Fortran order refused");
	n = npy(buf, "{'descr': '<U8', 'fortran_order': False, 'shape': (1,), }", u, 6);
	SB_CHECK(sb_npy_parse(buf, n, "t", &a, &err) == SB_EDATA && strstr(err.msg, "dtype"),
	         "string dtype refused: %s", err.msg);
	n = npy(buf, "{'descr': '|u1', 'fortran_order': False, 'shape': (7,), }", u, 6);
	SB_CHECK(sb_npy_parse(buf, n, "t", &a, &err) == SB_EDATA && strstr(err.msg, "truncated"), "short data refused");
	n = npy(buf, "{'descr': '|u1', 'fortran_order': False, 'shape': (99999999999999999999,), }", u, 6);
	SB_CHECK(sb_npy_parse(buf, n, "t", &a, &err) == SB_EDATA, "a 20-digit dimension refused: %s", err.msg);
	buf[8] = 0xff;
	buf[9] = 0xff;
	SB_CHECK(sb_npy_parse(buf, n, "t", &a, &err) == SB_EDATA && strstr(err.msg, "exceeds"),
	         "header length past the end");
}

/* ---- MAT ---- */
struct mb {
	uint8_t b[8192];
	size_t n;
};

static void put32(struct mb *m, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		m->b[m->n++] = (uint8_t)(v >> (8 * i));
}

static void put(struct mb *m, const void *d, size_t n)
{
	memcpy(m->b + m->n, d, n);
	m->n += n;
}

static void pad8(struct mb *m)
{
	while (m->n % 8)
		m->b[m->n++] = 0;
}

/* A miMATRIX element body: flags, dims, name (small tag), real part. */
static void matrix(struct mb *m, int cls, int nd, const int32_t *dims, const char *name, int mtype, const void *data,
                   size_t nbytes)
{
	put32(m, 6);
	put32(m, 8);
	put32(m, (uint32_t)cls);
	put32(m, 0);
	put32(m, 5);
	put32(m, (uint32_t)(4 * nd));
	for (int i = 0; i < nd; i++)
		put32(m, (uint32_t)dims[i]);
	pad8(m);
	size_t nl = strlen(name);
	if (nl <= 4) {
		put32(m, (uint32_t)(nl << 16 | 1));
		uint8_t z[4] = {0};
		memcpy(z, name, nl);
		put(m, z, 4);
	} else {
		put32(m, 1);
		put32(m, (uint32_t)nl);
		put(m, name, nl);
		pad8(m);
	}
	put32(m, (uint32_t)mtype);
	put32(m, (uint32_t)nbytes);
	put(m, data, nbytes);
	pad8(m);
}

static void header(struct mb *m)
{
	memset(m->b, ' ', 116);
	memcpy(m->b, "MATLAB 5.0 MAT-file, test", 25);
	memset(m->b + 116, 0, 8);
	m->b[124] = 0x00;
	m->b[125] = 0x01;
	m->b[126] = 'I';
	m->b[127] = 'M';
	m->n = 128;
}

static void element(struct mb *m, int compress, const struct mb *body)
{
	if (!compress) {
		put32(m, 14);
		put32(m, (uint32_t)body->n);
		put(m, body->b, body->n);
		return;
	}
	struct mb inner = {.n = 0};
	put32(&inner, 14);
	put32(&inner, (uint32_t)body->n);
	put(&inner, body->b, body->n);
	uLongf cl = sizeof m->b - m->n - 8;
	compress2(m->b + m->n + 8, &cl, inner.b, inner.n, 6);
	put32(m, 15);
	put32(m, (uint32_t)cl);
	m->n += cl;
}

static void test_mat(void)
{
	for (int comp = 0; comp < 2; comp++) {
		struct mb m, x = {.n = 0}, y = {.n = 0}, o = {.n = 0};
		header(&m);
		int32_t dx[4] = {2, 2, 1, 3};
		uint8_t px[12];
		for (int i = 0; i < 12; i++)
			px[i] = (uint8_t)(10 * i);
		int32_t dy[2] = {3, 1};
		uint8_t ly[3] = {10, 1, 9}; /* a double array stored as miUINT8, as MATLAB does */
		int32_t dother[2] = {1, 1};
		double one = 1;
		matrix(&o, 6, 2, dother, "__other__", SB_MI_DOUBLE, &one, 8);
		matrix(&x, 9, 4, dx, "X", SB_MI_UINT8, px, 12);
		matrix(&y, 6, 2, dy, "y", SB_MI_UINT8, ly, 3);
		element(&m, comp, &o);
		element(&m, comp, &y);
		element(&m, comp, &x);
		const char *want[2] = {"X", "y"};
		struct sb_mat_var v[2];
		int rc = sb_mat_read(m.b, m.n, "t.mat", 2, want, v, 1 << 20, &err);
		SB_CHECK(rc == 0, "%s MAT file with X, y and another variable reads (%s)",
		         comp ? "compressed" : "uncompressed", err.msg);
		if (rc)
			continue;
		SB_CHECK(v[0].ndim == 4 && v[0].dims[3] == 3 && v[0].count == 12 && sb_mat_get(&v[0], 11) == 110,
		         "X: 2x2x1x3 uint8, last value 110");
		SB_CHECK(v[1].mxclass == 6 && v[1].mtype == SB_MI_UINT8 && sb_mat_get(&v[1], 0) == 10 &&
		             sb_mat_get(&v[1], 2) == 9,
		         "y: double class stored as uint8 reads 10, 1, 9");
		sb_mat_var_free(&v[0]);
		sb_mat_var_free(&v[1]);
		/* truncated by one byte */
		rc = sb_mat_read(m.b, m.n - 1, "t.mat", 2, want, v, 1 << 20, &err);
		SB_CHECK(rc == SB_EDATA && strstr(err.msg, "t.mat: MAT"), "%s, truncated: %s",
		         comp ? "compressed" : "plain", err.msg);
	}
	struct mb m;
	header(&m);
	m.b[126] = 'M';
	m.b[127] = 'I';
	const char *want[1] = {"X"};
	struct sb_mat_var v[1];
	SB_CHECK(sb_mat_read(m.b, m.n, "t", 1, want, v, 1 << 20, &err) == SB_EDATA && strstr(err.msg, "big-endian"),
	         "big-endian MAT refused: %s", err.msg);
	header(&m);
	SB_CHECK(sb_mat_read(m.b, m.n, "t", 1, want, v, 1 << 20, &err) == SB_EDATA && strstr(err.msg, "'X' not found"),
	         "empty MAT: X not found");
	/* a complex X is refused */
	struct mb body = {.n = 0};
	int32_t d2[2] = {1, 1};
	uint8_t one = 1;
	matrix(&body, 9, 2, d2, "X", SB_MI_UINT8, &one, 1);
	body.b[9] = 0x08; /* complex flag 0x800 in the array flags word (after its 8-byte tag) */
	element(&m, 0, &body);
	SB_CHECK(sb_mat_read(m.b, m.n, "t", 1, want, v, 1 << 20, &err) == SB_EDATA && strstr(err.msg, "complex"),
	         "complex X refused: %s", err.msg);
}

/* ---- LIBSVM, USPS pixels, CIFAR ---- */
static void test_text_and_records(void)
{
	const char *t = "3 1:-1 2:0.5 4:1e-0\r\n\n10 3:0.25\n";
	double *x;
	int32_t *y;
	int64_t rows;
	int rc = sb_libsvm_parse(t, strlen(t), "u", 4, &x, &y, &rows, &err);
	SB_CHECK(rc == 0 && rows == 2 && y[0] == 3 && y[1] == 10 && x[0] == -1 && x[1] == 0.5 && x[2] == 0 &&
	             x[3] == 1 && x[6] == 0.25 && x[4] == 0,
	         "LIBSVM: 2 rows, CRLF and blank lines, absent features 0 (%s)", err.msg);
	if (!rc) {
		free(x);
		free(y);
	}
	const char *bad[] = {"1 2:1 1:1\n", "1 0:1\n",   "1 5:1\n", "1.5 1:1\n",
	                     "1 1:x\n",     "1 1:nan\n", "1 :1\n",  "1 1\n"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		SB_CHECK(sb_libsvm_parse(bad[i], strlen(bad[i]), "u", 4, &x, &y, &rows, &err) == SB_EDATA &&
		             strstr(err.msg, "u:1:"),
		         "LIBSVM refuses '%.*s' (%s)", (int)strlen(bad[i]) - 1, bad[i], err.msg);
	SB_CHECK(sb_usps_pixel(-1) == 0 && sb_usps_pixel(1) == 255 && sb_usps_pixel(0) == 128 &&
	             sb_usps_pixel(1.0000005) == 255,
	         "USPS pixel: -1 -> 0, 1 -> 255, 0 -> 127.5 -> 128 (half to even), 1+5e-7 clamped");
	SB_CHECK(sb_usps_pixel(1e-9) == 128 && sb_usps_pixel(-1e-9) == 127 && sb_usps_pixel(-0.5) == 64,
	         "USPS pixel: nearest (127.5 + tiny -> 128, 127.5 - tiny -> 127, 63.75 -> 64)");
	SB_CHECK(sb_usps_pixel(1.01) == -1 && sb_usps_pixel(-1.5) == -1, "USPS pixel outside [-1, 1] refused");

	uint8_t rec[2 * 3074];
	for (size_t i = 0; i < sizeof rec; i++)
		rec[i] = (uint8_t)i;
	uint8_t *px = NULL;
	int32_t *lab = NULL;
	int64_t n = 0;
	rc = sb_cifar_parse(rec, sizeof rec, "c", 2, 1, &px, &lab, &n, &err);
	rc |= sb_cifar_parse(rec, 3074, "c", 2, 1, &px, &lab, &n, &err);
	SB_CHECK(rc == 0 && n == 3 && lab[0] == 1 && lab[1] == (uint8_t)(3074 + 1) && px[0] == 2 && lab[2] == 1,
	         "CIFAR-100 records: fine label (second byte), appended across batches");
	free(px);
	free(lab);
	px = NULL;
	lab = NULL;
	n = 0;
	SB_CHECK(sb_cifar_parse(rec, 3072, "c", 1, 0, &px, &lab, &n, &err) == SB_EDATA &&
	             strstr(err.msg, "whole number"),
	         "partial CIFAR record refused");
	free(px);
	free(lab);
}

/* ---- archives ---- */
static size_t make_archive(uint8_t *buf, size_t cap, int zip, const char *evil, const char *link)
{
	struct archive *a = archive_write_new();
	size_t used = 0;
	if (zip)
		archive_write_set_format_zip(a);
	else {
		archive_write_set_format_pax_restricted(a);
		archive_write_add_filter_gzip(a);
	}
	archive_write_open_memory(a, buf, cap, &used);
	const char *names[3] = {"d/a.bin", "d/b.txt", evil};
	for (int i = 0; i < 3 && names[i]; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, names[i]);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, 5);
		archive_write_header(a, e);
		archive_write_data(a, "hello", 5);
		archive_entry_free(e);
	}
	if (link) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, "d/link");
		archive_entry_set_filetype(e, AE_IFLNK);
		archive_entry_set_symlink(e, link);
		archive_write_header(a, e);
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	return used;
}

static int walk(const uint8_t *b, size_t n, uint64_t limit, int *files)
{
	struct sb_ar *a;
	*files = 0;
	SB_TRY(sb_ar_open_mem(&a, b, n, "ar", &err));
	int rc;
	for (;;) {
		const char *p;
		int f;
		if ((rc = sb_ar_next(a, &p, &f, &err)) || !p)
			break;
		if (f) {
			struct sb_blob blob;
			if ((rc = sb_ar_read(a, &blob, limit, &err)))
				break;
			sb_blob_free(&blob);
			++*files;
		}
	}
	sb_ar_close(a);
	return rc;
}

static void test_archives(void)
{
	SB_CHECK(sb_ar_path_safe("a/b") == 0 && sb_ar_path_safe("./a/./b") == 0 && sb_ar_path_safe("a..b/c") == 0,
	         "safe paths accepted");
	const char *unsafe[] = {"", "/etc/passwd", "../x", "a/../../x", "a/..", "a\\..\\b", "a/\x01", NULL};
	int all = 1;
	for (int i = 0; unsafe[i]; i++)
		all &= sb_ar_path_safe(unsafe[i]) != 0;
	SB_CHECK(all, "unsafe paths refused (absolute, .., backslash, control, empty)");
	static uint8_t buf[1 << 16];
	for (int zip = 0; zip < 2; zip++) {
		const char *fmt = zip ? "zip" : "tar.gz";
		int files;
		size_t n = make_archive(buf, sizeof buf, zip, NULL, NULL);
		int rc = walk(buf, n, 100, &files);
		SB_CHECK(rc == 0 && files == 2, "%s written by libarchive: 2 members read (%s)", fmt, err.msg);
		rc = walk(buf, n, 4, &files);
		SB_CHECK(rc == SB_EDATA && strstr(err.msg, "limit"), "%s: a member over the read limit is refused (%s)",
		         fmt, err.msg);
		n = make_archive(buf, sizeof buf, zip, "../escape", NULL);
		rc = walk(buf, n, 100, &files);
		SB_CHECK(rc == SB_EDATA && strstr(err.msg, "'../escape' escapes"), "%s: ../ member refused (%s)", fmt,
		         err.msg);
		n = make_archive(buf, sizeof buf, zip, "/abs", NULL);
		rc = walk(buf, n, 100, &files);
		SB_CHECK(rc == SB_EDATA && strstr(err.msg, "escapes"), "%s: absolute member refused", fmt);
		n = make_archive(buf, sizeof buf, zip, NULL, "../../etc");
		rc = walk(buf, n, 100, &files);
		SB_CHECK(rc == SB_EDATA && strstr(err.msg, "points outside"), "%s: escaping symlink refused (%s)", fmt,
		         err.msg);
	}
	struct sb_blob out;
	SB_CHECK(sb_decompress_mem("plain text", 10, "p", "gzip", &out, 100, &err) == SB_EDATA &&
	             strstr(err.msg, "not gzip"),
	         "plain bytes are not gzip: %s", err.msg);
	uint8_t gz[64];
	uLongf gl = sizeof gz;
	compress2(gz, &gl, (const Bytef *)"zlib", 4, 6); /* zlib, not gzip framing */
	SB_CHECK(sb_decompress_mem(gz, gl, "z", "gzip", &out, 100, &err) == SB_EDATA, "a raw zlib stream is not gzip");
}

int main(void)
{
	test_idx();
	test_npy();
	test_mat();
	test_text_and_records();
	test_archives();
	return sb_test_done();
}
