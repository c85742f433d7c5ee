/* hash.c — SHA-256 through OpenSSL's EVP interface, and sha256sum sidecars. */
#include "hash.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "json.h"

struct sb_sha256 {
	EVP_MD_CTX *ctx;
};

struct sb_sha256 *sb_sha256_new(void)
{
	struct sb_sha256 *h = malloc(sizeof *h);
	if (!h)
		return NULL;
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(h->ctx);
		free(h);
		return NULL;
	}
	return h;
}

void sb_sha256_update(struct sb_sha256 *h, const void *data, size_t n)
{
	EVP_DigestUpdate(h->ctx, data, n);
}

static void to_hex(const unsigned char *d, unsigned n, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	for (unsigned i = 0; i < n; i++) {
		hex[2 * i] = digits[d[i] >> 4];
		hex[2 * i + 1] = digits[d[i] & 15];
	}
	hex[2 * n] = 0;
}

void sb_sha256_final(struct sb_sha256 *h, char hex[SB_SHA256_HEX])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	EVP_DigestFinal_ex(h->ctx, d, &n);
	to_hex(d, n, hex);
	sb_sha256_free(h);
}

void sb_sha256_free(struct sb_sha256 *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

void sb_sha256_buf(const void *data, size_t n, char hex[SB_SHA256_HEX])
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dn = 0;
	EVP_Digest(data, n, d, &dn, EVP_sha256(), NULL);
	to_hex(d, dn, hex);
}

int sb_sha256_file(const char *path, char hex[SB_SHA256_HEX], uint64_t *size_out, struct sb_err *err)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return SB_ERRNO(err, path);
	struct sb_sha256 *h = sb_sha256_new();
	char *buf = malloc(1 << 20);
	if (!h || !buf) {
		fclose(f);
		free(buf);
		sb_sha256_free(h);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	uint64_t total = 0;
	size_t n;
	while ((n = fread(buf, 1, 1 << 20, f)) > 0) {
		sb_sha256_update(h, buf, n);
		total += n;
	}
	int bad = ferror(f);
	fclose(f);
	free(buf);
	if (bad) {
		sb_sha256_free(h);
		return SB_ERR(err, SB_EIO, "%s: read error", path);
	}
	sb_sha256_final(h, hex);
	if (size_out)
		*size_out = total;
	return 0;
}

int sb_is_sha256_hex(const char *s)
{
	if (!s)
		return 0;
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[64] == 0;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

int sb_sidecar_write(const char *path, const char hex[SB_SHA256_HEX], struct sb_err *err)
{
	char *side = malloc(strlen(path) + 8);
	if (!side)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	sprintf(side, "%s.sha256", path);
	char line[4200];
	int n = snprintf(line, sizeof line, "%s  %s\n", hex, base_name(path));
	int rc = sb_write_file_atomic(side, line, (size_t)n, err);
	free(side);
	return rc;
}

int sb_sidecar_read(const char *path, char hex[SB_SHA256_HEX], struct sb_err *err)
{
	char *side = malloc(strlen(path) + 8);
	if (!side)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	sprintf(side, "%s.sha256", path);
	char *data = NULL;
	size_t n = 0;
	int rc = sb_read_file(side, &data, &n, 8192, err);
	if (rc) {
		free(side);
		return rc;
	}
	/* "HEX  NAME\n" (sha256sum text mode) or "HEX *NAME\n" (binary mode) */
	const char *name = base_name(path);
	size_t nl = strlen(name);
	int ok = n >= 66 + nl && data[64] == ' ' && (data[65] == ' ' || data[65] == '*') &&
		 strncmp(data + 66, name, nl) == 0 && (data[66 + nl] == '\n' || data[66 + nl] == 0);
	if (ok) {
		memcpy(hex, data, 64);
		hex[64] = 0;
		ok = sb_is_sha256_hex(hex);
	}
	if (!ok)
		rc = SB_ERR(err, SB_EDATA, "%s:1: not a sha256sum line for '%s'", side, name);
	free(data);
	free(side);
	return rc;
}

int sb_sha256_verify_file(const char *path, const char *expected_hex, struct sb_err *err)
{
	char actual[SB_SHA256_HEX];
	SB_TRY(sb_sha256_file(path, actual, NULL, err));
	if (strcmp(actual, expected_hex) != 0)
		return SB_ERR(err, SB_EDATA, "%s: SHA-256 mismatch: expected %s, actual %s", path, expected_hex, actual);
	return 0;
}

int sb_sidecar_verify(const char *path, char hex_out[SB_SHA256_HEX], struct sb_err *err)
{
	char expected[SB_SHA256_HEX];
	SB_TRY(sb_sidecar_read(path, expected, err));
	SB_TRY(sb_sha256_verify_file(path, expected, err));
	if (hex_out)
		memcpy(hex_out, expected, SB_SHA256_HEX);
	return 0;
}

int sb_sha256_json_canonical(const struct sb_jw *w, char hex[SB_SHA256_HEX], struct sb_err *err)
{
	if (w->oom)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	struct sb_json *v = NULL;
	SB_TRY(sb_json_parse(w->buf, w->len, &v, err));
	struct sb_jw cw;
	sb_jw_init(&cw, NULL);
	sb_jw_canonical(&cw, v);
	sb_json_free(v);
	int rc = cw.oom ? SB_ERR(err, SB_EINTERNAL, "out of memory") : 0;
	if (!rc)
		sb_sha256_buf(cw.buf, cw.len, hex);
	sb_jw_free(&cw);
	return rc;
}
