/* sbf.h — internals of sb-fetch shared by its files (fetch/ only). */
#ifndef SBF_H
#define SBF_H

#include <stdint.h>

#include "err.h"
#include "fetch.h"
#include "hash.h"
#include "json.h"
#include "tensor.h"

/* Bumped whenever a decoder's output for the same input changes: it is part
 * of the recipe hash that decides whether existing outputs are still current. */
#define SBF_DECODER_VERSION "1"

/* Caps on what one decoded member may inflate to (bombs and absurd headers). */
#define SBF_MEMBER_LIMIT ((uint64_t)4 << 30)

/* ---- registry ---- */

struct sbf_file {
	const char *id;   /* "GROUP/NAME" */
	const char *name; /* NAME */
	const struct sb_json *urls;
	int64_t size;       /* -1: unknown */
	const char *sha256; /* NULL: pinned on first fetch */
	const char *md5;    /* NULL: not published */
	const char *content_sha256;
	int64_t content_size; /* -1: unknown */
	const struct sb_json *json;
};

struct sbf_registry {
	struct sb_json *root;
	const char *version;
	const char *path; /* "(built-in)" or the file */
	char sha256[SB_SHA256_HEX];
	uint64_t size;
	struct sbf_file *files;
	size_t nfiles;
};

int sbf_registry_load(struct sbf_registry *r, const char *path, struct sb_err *err);
void sbf_registry_free(struct sbf_registry *r);
const struct sb_json *sbf_task(const struct sbf_registry *r, const char *name);
const struct sbf_file *sbf_file(const struct sbf_registry *r, const char *id);
/* The built-in registry (fetch/registry.json embedded at build time). */
extern const char sbf_registry_blob[];
extern const char sbf_registry_blob_end[];

/* ---- obtaining files ---- */

struct sbf_ctx {
	const char *cache;
	const char *out;
	const char **mirrors;
	int nmirrors;
	int offline;
	int retries;
	double connect_timeout_s;
	double stall_timeout_s;
	long backoff_ms;
	const struct sbf_registry *reg;
	struct sb_jw *w;
};

/* A verified file. */
struct sbf_src {
	const struct sbf_file *f;
	char path[4096];
	const char *origin; /* "cache" | "mirror" | "url" */
	char url[2048];
	char url_final[2048]; /* the URL after redirects, when it differs from url */
	char sha256[SB_SHA256_HEX];
	char md5[33];
	uint64_t size;
	const char *verified_by;            /* "sha256" | "content_sha256" | "pin" | "first-fetch" */
	char content_sha256[SB_SHA256_HEX]; /* when verified by content */
	struct sb_blob content;             /* decompressed bytes, when verified by content */
};

/* Find, fetch and verify one registry file (cache, mirrors, URLs). */
int sbf_obtain(struct sbf_ctx *c, const struct sbf_file *f, struct sbf_src *out, struct sb_err *err);
void sbf_src_free(struct sbf_src *s);
void sbf_http_global(int init);

/* ---- tasks ---- */

int sbf_run_task(struct sbf_ctx *c, const struct sb_json *task, const int64_t *seeds, int nseeds, struct sb_err *err);

/* small helpers */
const char *sbf_str(const struct sb_json *o, const char *key);
int sbf_int(const struct sb_json *o, const char *key, int64_t *out);

#endif
