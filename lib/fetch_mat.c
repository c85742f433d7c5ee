/* fetch_mat.c — MATLAB level-5 MAT-files (the SVHN .mat files).
 *
 * Layout (MathWorks, "MAT-File Format", level 5): a 128-byte header (116 bytes
 * of text, 8 bytes of subsystem offset, a 16-bit version 0x0100 and the
 * endian indicator "IM" for little-endian files), then data elements: an
 * 8-byte tag (32-bit type, 32-bit byte count) and the data. A miCOMPRESSED
 * element holds one zlib stream that inflates to another element, normally a
 * miMATRIX. A miMATRIX holds sub-elements: array flags, dimensions, name and
 * the real part; a sub-element of at most 4 bytes may use the "small" tag
 * (byte count in the upper 16 bits of the first word, data in the second);
 * sub-elements are padded to 8 bytes. MATLAB may store a double array with a
 * narrower type (e.g. miUINT8), so the real part's storage type is read from
 * its own tag.
 */
#include "fetch.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int mi_size(int t)
{
	switch (t) {
	case SB_MI_INT8:
	case SB_MI_UINT8:
		return 1;
	case SB_MI_INT16:
	case SB_MI_UINT16:
		return 2;
	case SB_MI_INT32:
	case SB_MI_UINT32:
	case SB_MI_SINGLE:
		return 4;
	case SB_MI_DOUBLE:
	case SB_MI_INT64:
	case SB_MI_UINT64:
		return 8;
	}
	return 0;
}

double sb_mat_get(const struct sb_mat_var *v, uint64_t i)
{
	const uint8_t *p = v->data + i * (uint64_t)mi_size(v->mtype);
	switch (v->mtype) {
	case SB_MI_INT8:
		return (int8_t)p[0];
	case SB_MI_UINT8:
		return p[0];
	case SB_MI_INT16:
		return (int16_t)(p[0] | p[1] << 8);
	case SB_MI_UINT16:
		return (uint16_t)(p[0] | p[1] << 8);
	case SB_MI_INT32:
		return (int32_t)le32(p);
	case SB_MI_UINT32:
		return le32(p);
	case SB_MI_SINGLE: {
		uint32_t u = le32(p);
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	case SB_MI_DOUBLE:
	case SB_MI_INT64:
	case SB_MI_UINT64: {
		uint64_t u = (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
		if (v->mtype == SB_MI_INT64)
			return (double)(int64_t)u;
		if (v->mtype == SB_MI_UINT64)
			return (double)u;
		double d;
		memcpy(&d, &u, 8);
		return d;
	}
	}
	return 0;
}

void sb_mat_var_free(struct sb_mat_var *v)
{
	if (!v)
		return;
	sb_blob_free(&v->owned);
	v->data = NULL;
}

/* One sub-element of a matrix at p[*off], within len bytes. */
static int sub_next(const uint8_t *p, size_t len, size_t *off, uint32_t *type, uint32_t *nb, const uint8_t **data)
{
	if (len - *off < 8)
		return -1;
	uint32_t w0 = le32(p + *off);
	if (w0 >> 16) {
		*type = w0 & 0xffff;
		*nb = w0 >> 16;
		if (*nb > 4)
			return -1;
		*data = p + *off + 4;
		*off += 8;
		return 0;
	}
	*type = w0;
	*nb = le32(p + *off + 4);
	if (*nb > len - *off - 8)
		return -1;
	*data = p + *off + 8;
	size_t adv = 8 + (((size_t)*nb + 7) & ~(size_t)7);
	*off = adv > len - *off ? len : *off + adv;
	return 0;
}

/* Parse a miMATRIX body p[0..len) into v (name and numeric data borrowed from p).
 * Returns 0, or -1 with msg describing the problem. *numeric is 0 for arrays
 * that are not plain real numeric arrays (then only the name is filled). */
static int parse_matrix(const uint8_t *p, size_t len, struct sb_mat_var *v, int *numeric, const char **msg)
{
	size_t off = 0;
	uint32_t t, nb;
	const uint8_t *d;
	*numeric = 0;
	if (sub_next(p, len, &off, &t, &nb, &d) || t != SB_MI_UINT32 || nb != 8) {
		*msg = "array flags sub-element missing or malformed";
		return -1;
	}
	uint32_t flags = le32(d);
	v->mxclass = (int)(flags & 0xff);
	int complex = (flags & 0x800) != 0;
	if (sub_next(p, len, &off, &t, &nb, &d) || t != SB_MI_INT32 || nb % 4 || nb < 8 || nb > 32) {
		*msg = "dimensions sub-element missing or malformed";
		return -1;
	}
	v->ndim = (int)(nb / 4);
	uint64_t count = 1;
	for (int i = 0; i < v->ndim; i++) {
		int32_t dim = (int32_t)le32(d + 4 * i);
		if (dim < 0) {
			*msg = "negative dimension";
			return -1;
		}
		v->dims[i] = dim;
		if (dim && count > UINT64_MAX / 16 / (uint64_t)dim) {
			*msg = "absurd dimensions (product overflows)";
			return -1;
		}
		count *= (uint64_t)dim;
	}
	v->count = count;
	if (sub_next(p, len, &off, &t, &nb, &d) || t != SB_MI_INT8) {
		*msg = "array name sub-element missing or malformed";
		return -1;
	}
	if (nb >= sizeof v->name) {
		*msg = "array name too long";
		return -1;
	}
	memcpy(v->name, d, nb);
	v->name[nb] = 0;
	if (v->mxclass < 6 || v->mxclass > 15)
		return 0; /* cell, struct, object, char, sparse: not numeric */
	if (sub_next(p, len, &off, &t, &nb, &d)) {
		*msg = "real part sub-element missing or truncated";
		return -1;
	}
	int es = mi_size((int)t);
	if (!es) {
		*msg = "real part has a non-numeric storage type";
		return -1;
	}
	if ((uint64_t)nb != count * (uint64_t)es) {
		*msg = "real part size does not match the dimensions";
		return -1;
	}
	v->mtype = (int)t;
	v->data = d;
	*numeric = !complex;
	if (complex)
		*msg = "complex array";
	return 0;
}

/* Inflate a miCOMPRESSED element into *out (the inner element, tag included). */
static int inflate_elem(const uint8_t *src, size_t n, const char *name, size_t at, uint64_t limit, struct sb_blob *out,
                        struct sb_err *err)
{
	z_stream z;
	uint8_t tag[8];
	memset(&z, 0, sizeof z);
	if (inflateInit(&z) != Z_OK)
		return SB_ERR(err, SB_EINTERNAL, "%s: zlib: inflateInit failed", name);
	int rc = 0, zr;
	z.next_in = (Bytef *)src;
	z.avail_in = (uInt)(n > UINT32_MAX ? UINT32_MAX : n);
	z.next_out = tag;
	z.avail_out = 8;
	zr = inflate(&z, Z_SYNC_FLUSH);
	if (z.avail_out != 0) {
		rc = SB_ERR(err, SB_EDATA, "%s: MAT: compressed element at offset %zu: bad or truncated zlib data (%s)",
		            name, at, z.msg ? z.msg : "too short");
		goto done;
	}
	uint64_t inner = le32(tag + 4);
	/* Deflate cannot expand more than about 1032:1; a larger claim is absurd. */
	if (inner > limit || inner > (uint64_t)n * 1040 + 4096) {
		rc = SB_ERR(err, SB_EDATA, "%s: MAT: compressed element at offset %zu claims an absurd %llu bytes",
		            name, at, (unsigned long long)inner);
		goto done;
	}
	out->n = 8 + (size_t)inner;
	out->data = malloc(out->n ? out->n : 1);
	if (!out->data) {
		rc = SB_ERR(err, SB_EINTERNAL, "%s: out of memory (%zu bytes)", name, out->n);
		goto done;
	}
	memcpy(out->data, tag, 8);
	z.next_out = out->data + 8;
	size_t left = (size_t)inner;
	zr = Z_OK;
	while (zr == Z_OK) {
		uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
		z.avail_out = chunk;
		if (z.avail_in == 0 && (size_t)(z.next_in - src) < n) {
			size_t rest = n - (size_t)(z.next_in - src);
			z.avail_in = (uInt)(rest > UINT32_MAX ? UINT32_MAX : rest);
		}
		zr = inflate(&z, Z_NO_FLUSH);
		left -= chunk - z.avail_out;
		if (zr == Z_BUF_ERROR && left > 0 && z.avail_in == 0)
			break;
		if (left == 0 && zr == Z_OK) {
			/* output full: the stream must end here */
			uint8_t extra;
			z.next_out = &extra;
			z.avail_out = 1;
			zr = inflate(&z, Z_NO_FLUSH);
			if (zr != Z_STREAM_END || z.avail_out == 0) {
				rc = SB_ERR(err, SB_EDATA,
				            "%s: MAT: compressed element at offset %zu inflates past its declared size",
				            name, at);
				goto done;
			}
		}
	}
	if (zr != Z_STREAM_END || left != 0) {
		rc = SB_ERR(err, SB_EDATA, "%s: MAT: compressed element at offset %zu: %s", name, at,
		            zr == Z_STREAM_END ? "inflates to fewer bytes than declared"
		            : z.msg            ? z.msg
		                               : "truncated zlib stream");
		goto done;
	}
done:
	inflateEnd(&z);
	if (rc)
		sb_blob_free(out);
	return rc;
}

int sb_mat_read(const uint8_t *buf, size_t n, const char *name, size_t nwant, const char *const *want,
                struct sb_mat_var *out, uint64_t limit, struct sb_err *err)
{
	int rc = 0;
	for (size_t i = 0; i < nwant; i++)
		memset(&out[i], 0, sizeof out[i]);
	if (n < 128 || memcmp(buf, "MATLAB", 6) != 0)
		return SB_ERR(err, SB_EDATA, "%s: MAT: bad magic (not a MATLAB MAT-file)", name);
	uint16_t version = (uint16_t)(buf[124] | buf[125] << 8);
	if (buf[126] == 'M' && buf[127] == 'I')
		return SB_ERR(err, SB_EDATA, "%s: MAT: big-endian MAT-files are not supported", name);
	if (buf[126] != 'I' || buf[127] != 'M')
		return SB_ERR(err, SB_EDATA, "%s: MAT: bad endian indicator (not a level-5 MAT-file)", name);
	if (version != 0x0100)
		return SB_ERR(err, SB_EDATA,
		              "%s: MAT: version 0x%04x is not level 5 (v7.3 HDF5 files are not supported)", name,
		              version);
	size_t pos = 128;
	while (pos < n) {
		if (n - pos < 8) {
			rc = SB_ERR(err, SB_EDATA, "%s: MAT: truncated element tag at offset %zu", name, pos);
			goto fail;
		}
		uint32_t type = le32(buf + pos), nb = le32(buf + pos + 4);
		if (nb > n - pos - 8) {
			rc = SB_ERR(
			    err, SB_EDATA,
			    "%s: MAT: element at offset %zu claims %u bytes but only %zu remain (truncated or absurd)",
			    name, pos, nb, n - pos - 8);
			goto fail;
		}
		const uint8_t *body = buf + pos + 8;
		size_t blen = nb;
		struct sb_blob owned = {0};
		if (type == SB_MI_COMPRESSED) {
			rc = inflate_elem(body, nb, name, pos, limit, &owned, err);
			if (rc)
				goto fail;
			if (le32(owned.data) != SB_MI_MATRIX) {
				sb_blob_free(&owned);
				pos += 8 + (size_t)nb;
				continue; /* some other compressed element */
			}
			body = owned.data + 8;
			blen = owned.n - 8;
		} else if (type != SB_MI_MATRIX) {
			pos += 8 + (size_t)nb;
			continue;
		}
		struct sb_mat_var v;
		memset(&v, 0, sizeof v);
		int numeric;
		const char *msg = NULL;
		if (parse_matrix(body, blen, &v, &numeric, &msg)) {
			sb_blob_free(&owned);
			rc = SB_ERR(err, SB_EDATA, "%s: MAT: variable at offset %zu: %s", name, pos, msg);
			goto fail;
		}
		size_t k;
		for (k = 0; k < nwant; k++)
			if (!strcmp(v.name, want[k]))
				break;
		if (k == nwant) {
			sb_blob_free(&owned);
		} else if (out[k].data) {
			sb_blob_free(&owned);
			rc = SB_ERR(err, SB_EDATA, "%s: MAT: variable '%s' appears twice", name, v.name);
			goto fail;
		} else if (!numeric) {
			sb_blob_free(&owned);
			rc = SB_ERR(err, SB_EDATA, "%s: MAT: variable '%s' is not a real numeric array (%s)", name,
			            v.name, msg ? msg : "class not numeric");
			goto fail;
		} else {
			v.owned = owned;
			out[k] = v;
		}
		pos += 8 + (size_t)nb;
	}
	for (size_t k = 0; k < nwant; k++)
		if (!out[k].data) {
			rc = SB_ERR(err, SB_EDATA, "%s: MAT: variable '%s' not found", name, want[k]);
			goto fail;
		}
	return 0;
fail:
	for (size_t k = 0; k < nwant; k++)
		sb_mat_var_free(&out[k]);
	return rc;
}
