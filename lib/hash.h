/* hash.h — SHA-256 (OpenSSL EVP) of buffers, streams and files, and
 * ".sha256" sidecars in sha256sum format ("HEX  NAME\n", so `sha256sum -c` works
 * from the file's directory). Hex digests are 64 lowercase characters + NUL. */
#ifndef SB_HASH_H
#define SB_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define SB_SHA256_HEX 65

struct sb_sha256; /* streaming context */

struct sb_sha256 *sb_sha256_new(void);
void sb_sha256_update(struct sb_sha256 *h, const void *data, size_t n);
/* Finish: writes the hex digest and frees the context. */
void sb_sha256_final(struct sb_sha256 *h, char hex[SB_SHA256_HEX]);
void sb_sha256_free(struct sb_sha256 *h); /* discard without finishing; NULL ok */

void sb_sha256_buf(const void *data, size_t n, char hex[SB_SHA256_HEX]);
/* Hash a file; *size_out (if not NULL) receives its size in bytes. */
int sb_sha256_file(const char *path, char hex[SB_SHA256_HEX], uint64_t *size_out, struct sb_err *err);

/* Write PATH.sha256 (atomically) holding "HEX  basename(PATH)\n". */
int sb_sidecar_write(const char *path, const char hex[SB_SHA256_HEX], struct sb_err *err);
/* Read PATH.sha256 into hex. SB_EDATA when malformed or naming another file. */
int sb_sidecar_read(const char *path, char hex[SB_SHA256_HEX], struct sb_err *err);
/* Hash PATH and compare with PATH.sha256: SB_EDATA with
 * "PATH: SHA-256 mismatch: expected X, actual Y" when they differ. */
int sb_sidecar_verify(const char *path, char hex_out[SB_SHA256_HEX], struct sb_err *err);
/* Compare a file with an expected digest (same message on mismatch). */
int sb_sha256_verify_file(const char *path, const char *expected_hex, struct sb_err *err);

/* Is s 64 lowercase hex characters? */
int sb_is_sha256_hex(const char *s);

/* The SHA-256 of the canonical form (sb_jw_canonical, lib/json.h) of the JSON text held by
 * a writer (sb_jw_init(w, NULL)): the content hash behind the cell ids, independent of key
 * order and spacing. SB_EINTERNAL when the writer ran out of memory. */
struct sb_jw;
int sb_sha256_json_canonical(const struct sb_jw *w, char hex[SB_SHA256_HEX], struct sb_err *err);

#endif
