/* fetch_formats.c — small decoders for IDX, .npy, LIBSVM and CIFAR binary
 * batches, and the synthetic marker generator. */
#include "fetch.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

void sb_blob_free(struct sb_blob *b)
{
	if (!b)
		return;
	free(b->data);
	b->data = NULL;
	b->n = 0;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* a *= b, refusing overflow past `cap`. */
static int mul_cap(uint64_t *a, uint64_t b, uint64_t cap)
{
	if (b != 0 && *a > cap / b)
		return -1;
	*a *= b;
	return 0;
}

/* ---- IDX ---- */

int sb_idx_parse(const uint8_t *buf, size_t n, const char *name, struct sb_idx *out, struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	if (n < 4)
		return SB_ERR(err, SB_EDATA, "%s: IDX: file of %zu bytes is too short for a header", name, n);
	if (buf[0] != 0 || buf[1] != 0)
		return SB_ERR(err, SB_EDATA, "%s: IDX: bad magic number 0x%08x (expected 0x000008NN)", name,
		              (unsigned)be32(buf));
	if (buf[2] != 0x08)
		return SB_ERR(err, SB_EDATA, "%s: IDX: element type 0x%02x is not unsigned byte (0x08)", name, buf[2]);
	int nd = buf[3];
	if (nd < 1 || nd > 4)
		return SB_ERR(err, SB_EDATA, "%s: IDX: %d dimensions (expected 1 to 4)", name, nd);
	size_t hdr = 4 + 4 * (size_t)nd;
	if (n < hdr)
		return SB_ERR(err, SB_EDATA, "%s: IDX: truncated header (%zu of %zu bytes)", name, n, hdr);
	uint64_t count = 1;
	for (int i = 0; i < nd; i++) {
		out->dims[i] = be32(buf + 4 + 4 * i);
		if (mul_cap(&count, out->dims[i], UINT64_MAX >> 1))
			return SB_ERR(err, SB_EDATA, "%s: IDX: absurd dimensions (product overflows)", name);
	}
	if (count != n - hdr) {
		if (count > n - hdr)
			return SB_ERR(err, SB_EDATA,
			              "%s: IDX: header promises %llu data bytes but the file holds %zu (truncated or "
			              "absurd header)",
			              name, (unsigned long long)count, n - hdr);
		return SB_ERR(err, SB_EDATA, "%s: IDX: %zu trailing bytes after %llu data bytes", name,
		              n - hdr - (size_t)count, (unsigned long long)count);
	}
	out->ndim = nd;
	out->count = count;
	out->data = buf + hdr;
	return 0;
}

/* ---- .npy ---- */

/* A tiny reader for the header's Python dict literal. */
struct lit {
	const char *s, *e;
};

static void lit_ws(struct lit *p)
{
	while (p->s < p->e && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
		p->s++;
}

static int lit_eat(struct lit *p, char c)
{
	lit_ws(p);
	if (p->s < p->e && *p->s == c) {
		p->s++;
		return 1;
	}
	return 0;
}

static int lit_str(struct lit *p, char *out, size_t cap)
{
	lit_ws(p);
	if (p->s >= p->e || (*p->s != '\'' && *p->s != '"'))
		return -1;
	char q = *p->s++;
	size_t k = 0;
	while (p->s < p->e && *p->s != q) {
		if (*p->s == '\\' || k + 1 >= cap)
			return -1;
		out[k++] = *p->s++;
	}
	if (p->s >= p->e)
		return -1;
	p->s++;
	out[k] = 0;
	return 0;
}

static int lit_word(struct lit *p, const char *w)
{
	lit_ws(p);
	size_t m = strlen(w);
	if ((size_t)(p->e - p->s) >= m && memcmp(p->s, w, m) == 0) {
		p->s += m;
		return 1;
	}
	return 0;
}

static int lit_int(struct lit *p, int64_t *v)
{
	lit_ws(p);
	int64_t x = 0;
	int any = 0;
	while (p->s < p->e && *p->s >= '0' && *p->s <= '9') {
		if (x > (INT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (*p->s++ - '0');
		any = 1;
	}
	if (p->s < p->e && *p->s == 'L') /* Python 2 longs */
		p->s++;
	*v = x;
	return any ? 0 : -1;
}

int64_t sb_npy_get_int(const struct sb_npy *a, uint64_t i)
{
	const uint8_t *p = a->data + i * (uint64_t)a->itemsize;
	uint64_t u = 0;
	for (int b = 0; b < a->itemsize; b++) {
		int k = a->big_endian ? b : a->itemsize - 1 - b;
		u = (u << 8) | p[k];
	}
	if (a->kind == 'i' && a->itemsize < 8 && (u >> (8 * a->itemsize - 1)) & 1)
		u |= ~0ULL << (8 * a->itemsize); /* sign-extend */
	return (int64_t)u;
}

int sb_npy_parse(const uint8_t *buf, size_t n, const char *name, struct sb_npy *out, struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	if (n < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
		return SB_ERR(err, SB_EDATA, "%s: npy: bad magic (not a .npy array)", name);
	int major = buf[6];
	size_t hlen, off;
	if (major == 1) {
		hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
		off = 10;
	} else if (major == 2 || major == 3) {
		if (n < 12)
			return SB_ERR(err, SB_EDATA, "%s: npy: truncated header", name);
		hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
		off = 12;
	} else {
		return SB_ERR(err, SB_EDATA, "%s: npy: unsupported format version %d.%d", name, major, buf[7]);
	}
	if (hlen > n - off)
		return SB_ERR(err, SB_EDATA, "%s: npy: header of %zu bytes exceeds the file (%zu bytes)", name, hlen,
		              n);
	struct lit p = {(const char *)buf + off, (const char *)buf + off + hlen};
	char descr[32] = "", key[32];
	int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0;
	if (!lit_eat(&p, '{'))
		return SB_ERR(err, SB_EDATA, "%s: npy: header is not a dict literal", name);
	while (!lit_eat(&p, '}')) {
		if (lit_str(&p, key, sizeof key) || !lit_eat(&p, ':'))
			return SB_ERR(err, SB_EDATA, "%s: npy: malformed header dict", name);
		if (!strcmp(key, "descr")) {
			if (lit_str(&p, descr, sizeof descr))
				return SB_ERR(err, SB_EDATA, "%s: npy: 'descr' is not a simple dtype string", name);
			have_descr = 1;
		} else if (!strcmp(key, "fortran_order")) {
			if (lit_word(&p, "True"))
				fortran = 1;
			else if (!lit_word(&p, "False"))
				return SB_ERR(err, SB_EDATA, "%s: npy: bad 'fortran_order'", name);
			have_fortran = 1;
		} else if (!strcmp(key, "shape")) {
			if (!lit_eat(&p, '('))
				return SB_ERR(err, SB_EDATA, "%s: npy: 'shape' is not a tuple", name);
			while (!lit_eat(&p, ')')) {
				int64_t v;
				if (out->ndim == 8 || lit_int(&p, &v))
					return SB_ERR(err, SB_EDATA, "%s: npy: bad 'shape'", name);
				out->shape[out->ndim++] = v;
				if (!lit_eat(&p, ',')) {
					if (!lit_eat(&p, ')'))
						return SB_ERR(err, SB_EDATA, "%s: npy: bad 'shape'", name);
					break;
				}
			}
			have_shape = 1;
		} else {
			return SB_ERR(err, SB_EDATA, "%s: npy: unexpected header key '%s'", name, key);
		}
		if (!lit_eat(&p, ',')) {
			if (!lit_eat(&p, '}'))
				return SB_ERR(err, SB_EDATA, "%s: npy: malformed header dict", name);
			break;
		}
	}
	if (!have_descr || !have_fortran || !have_shape)
		return SB_ERR(err, SB_EDATA, "%s: npy: header lacks descr, fortran_order or shape", name);
	if (fortran && out->ndim > 1)
		return SB_ERR(err, SB_EDATA, "%s: npy: Fortran-order arrays are not supported", name);
	/* descr: [<>|=]?[uifb][1248] */
	const char *d = descr;
	char order = '|';
	if (*d == '<' || *d == '>' || *d == '|' || *d == '=')
		order = *d++;
	if (!(d[0] == 'u' || d[0] == 'i' || d[0] == 'f' || d[0] == 'b') ||
	    !(d[1] == '1' || d[1] == '2' || d[1] == '4' || d[1] == '8') || d[2] != 0 || (d[0] == 'f' && d[1] == '1') ||
	    (d[0] == 'b' && d[1] != '1'))
		return SB_ERR(err, SB_EDATA, "%s: npy: unsupported dtype '%s'", name, descr);
	out->kind = d[0];
	out->itemsize = d[1] - '0';
	out->big_endian = order == '>';
	uint64_t count = 1;
	for (int i = 0; i < out->ndim; i++)
		if (mul_cap(&count, (uint64_t)out->shape[i], UINT64_MAX / 16))
			return SB_ERR(err, SB_EDATA, "%s: npy: absurd shape (product overflows)", name);
	size_t data_off = off + hlen;
	uint64_t bytes = count * (uint64_t)out->itemsize;
	if (bytes != n - data_off) {
		if (bytes > n - data_off)
			return SB_ERR(err, SB_EDATA,
			              "%s: npy: shape promises %llu data bytes but the file holds %zu (truncated or "
			              "absurd header)",
			              name, (unsigned long long)bytes, n - data_off);
		return SB_ERR(err, SB_EDATA, "%s: npy: %zu trailing bytes after the array", name,
		              n - data_off - (size_t)bytes);
	}
	out->count = count;
	out->data = buf + data_off;
	return 0;
}

/* ---- LIBSVM ---- */

/* Parse a number token [s, e) with strtod on a bounded copy (C locale). */
static int num_tok(const char *s, const char *e, double *v)
{
	char tmp[64];
	size_t k = (size_t)(e - s);
	if (k == 0 || k >= sizeof tmp)
		return -1;
	memcpy(tmp, s, k);
	tmp[k] = 0;
	char *end;
	errno = 0;
	*v = strtod(tmp, &end);
	if (*end != 0 || errno == ERANGE || !isfinite(*v))
		return -1;
	return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 1024;
	while (nc < need)
		nc *= 2;
	void *q = realloc(*p, nc * elem);
	if (!q)
		return -1;
	*p = q;
	*cap = nc;
	return 0;
}

int sb_libsvm_parse(const char *buf, size_t n, const char *name, int nfeat, double **xo, int32_t **yo, int64_t *rows,
                    struct sb_err *err)
{
	double *x = NULL;
	int32_t *y = NULL;
	size_t capx = 0, capy = 0, r = 0;
	const char *s = buf, *end = buf + n;
	long line = 0;
	int rc = 0;
	*xo = NULL;
	*yo = NULL;
	*rows = 0;
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *le = nl ? nl : end;
		line++;
		const char *p = s;
		s = nl ? nl + 1 : end;
		while (le > p && (le[-1] == '\r' || le[-1] == ' ' || le[-1] == '\t'))
			le--;
		while (p < le && (*p == ' ' || *p == '\t'))
			p++;
		if (p == le)
			continue; /* blank line */
		if (grow((void **)&x, &capx, (r + 1) * (size_t)nfeat, sizeof *x) ||
		    grow((void **)&y, &capy, r + 1, sizeof *y)) {
			rc = SB_ERR(err, SB_EINTERNAL, "%s: out of memory", name);
			goto fail;
		}
		double *row = x + r * (size_t)nfeat;
		for (int j = 0; j < nfeat; j++)
			row[j] = 0;
		const char *t = p;
		while (t < le && *t != ' ' && *t != '\t')
			t++;
		double lab;
		if (num_tok(p, t, &lab) || lab != floor(lab) || fabs(lab) > 1e6) {
			rc = SB_ERR(err, SB_EDATA, "%s:%ld: LIBSVM: label '%.*s' is not an integer", name, line,
			            (int)((t - p) > 40 ? 40 : (t - p)), p);
			goto fail;
		}
		y[r] = (int32_t)lab;
		long last = 0;
		p = t;
		for (;;) {
			while (p < le && (*p == ' ' || *p == '\t'))
				p++;
			if (p >= le)
				break;
			const char *colon = p;
			while (colon < le && *colon != ':' && *colon != ' ' && *colon != '\t')
				colon++;
			const char *ve = colon;
			while (ve < le && *ve != ' ' && *ve != '\t')
				ve++;
			long idx = 0;
			const char *q = p;
			int ok = colon < le && *colon == ':' && q < colon;
			for (; ok && q < colon; q++) {
				if (*q < '0' || *q > '9' || idx > 1000000) {
					ok = 0;
					break;
				}
				idx = idx * 10 + (*q - '0');
			}
			double v;
			if (!ok || num_tok(colon + 1, ve, &v)) {
				rc = SB_ERR(err, SB_EDATA, "%s:%ld: LIBSVM: malformed feature '%.*s'", name, line,
				            (int)((ve - p) > 40 ? 40 : (ve - p)), p);
				goto fail;
			}
			if (idx < 1 || idx > nfeat || idx <= last) {
				rc = SB_ERR(err, SB_EDATA,
				            "%s:%ld: LIBSVM: feature index %ld out of order or outside 1..%d", name,
				            line, idx, nfeat);
				goto fail;
			}
			last = idx;
			row[idx - 1] = v;
			p = ve;
		}
		r++;
	}
	*xo = x;
	*yo = y;
	*rows = (int64_t)r;
	return 0;
fail:
	free(x);
	free(y);
	return rc;
}

int sb_usps_pixel(double v)
{
	if (!(v >= -1.0 - 1e-6 && v <= 1.0 + 1e-6))
		return -1;
	if (v < -1.0)
		v = -1.0;
	if (v > 1.0)
		v = 1.0;
	return (int)rint(255.0 * (v + 1.0) / 2.0);
}

/* ---- CIFAR ---- */

#define CIFAR_PIX 3072

int sb_cifar_parse(const uint8_t *buf, size_t n, const char *name, int label_bytes, int label_index, uint8_t **x,
                   int32_t **y, int64_t *count, struct sb_err *err)
{
	size_t rec = (size_t)label_bytes + CIFAR_PIX;
	if (n == 0 || n % rec != 0)
		return SB_ERR(err, SB_EDATA,
		              "%s: CIFAR: %zu bytes is not a whole number of %zu-byte records (truncated?)", name, n,
		              rec);
	size_t k = n / rec, old = (size_t)*count;
	uint8_t *nx = realloc(*x, (old + k) * CIFAR_PIX);
	if (!nx)
		return SB_ERR(err, SB_EINTERNAL, "%s: out of memory", name);
	*x = nx;
	int32_t *ny = realloc(*y, (old + k) * sizeof **y);
	if (!ny)
		return SB_ERR(err, SB_EINTERNAL, "%s: out of memory", name);
	*y = ny;
	for (size_t i = 0; i < k; i++) {
		const uint8_t *r = buf + i * rec;
		ny[old + i] = r[label_index];
		memcpy(nx + (old + i) * CIFAR_PIX, r + label_bytes, CIFAR_PIX);
	}
	*count = (int64_t)(old + k);
	return 0;
}

/* ---- synthetic marker ---- */

void sb_synth_marker(uint64_t s, int64_t n, int L, int V, int C, int32_t *x, int32_t *y)
{
	struct sb_rng r;
	sb_rng_init(&r, s, SB_RNG_SYNTH, 0);
	for (int64_t i = 0; i < n * L; i++)
		x[i] = 2 + (int32_t)sb_rng_below(&r, (uint64_t)(V - 2));
	for (int64_t i = 0; i < n; i++) {
		int pos = (int)sb_rng_below(&r, (uint64_t)(L - 1));
		x[i * L + pos] = 1;
		y[i] = x[i * L + pos + 1] % C;
	}
}
