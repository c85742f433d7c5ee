/* obtain.c — find a registry file in the cache, the mirror directories or at
 * its URLs, and verify it before anything reads it.
 *
 * Order: CACHE/ID, then each mirror M as M/ID and M/NAME (both, unless they are one file), then each URL
 * (downloaded into CACHE/ID.part, resumed when a partial file is there,
 * renamed to CACHE/ID once verified). A candidate that fails verification is
 * refused with expected and actual hashes on stderr: a cache or downloaded file
 * is renamed to ID.wrong, a mirror file is left alone (mirrors are the user's
 * read-only inputs), and the search goes on. If nothing verifies, the result is
 * SB_EDATA when some candidate was refused, SB_EIO when nothing was found.
 *
 * Concurrency: everything that writes in the cache holds an exclusive flock on
 * CACHE/ID.lock (downloads, renames) or CACHE/pins.lock (the pins file); files
 * appear in the cache only by rename of a verified download. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "io.h"
#include "sbf.h"
#include "version.h"

void sbf_src_free(struct sbf_src *s)
{
	if (s)
		sb_blob_free(&s->content);
}

/* ---- locks ---- */

static int lock_open(const char *path, struct sb_err *err)
{
	char *dir = strdup(path);
	if (!dir)
		return -SB_ERR(err, SB_EINTERNAL, "out of memory");
	char *sl = strrchr(dir, '/');
	if (sl) {
		*sl = 0;
		if (sb_mkdir_p(dir, err)) {
			free(dir);
			return -SB_EIO;
		}
	}
	free(dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 && (errno == EROFS || errno == EACCES || errno == EPERM)) /* a read-only cache */
		return -SB_ERR(err, SB_EIO, "%s: %s (the cache must be writable; a read-only copy of a cache serves as a mirror: -m DIR)",
		               path, strerror(errno));
	if (fd < 0)
		return -SB_ERRNO(err, path);
	while (flock(fd, LOCK_EX) != 0) {
		if (errno != EINTR) {
			SB_ERRNO(err, path);
			close(fd);
			return -SB_EIO;
		}
	}
	return fd;
}

static void lock_close(int fd)
{
	if (fd >= 0) {
		flock(fd, LOCK_UN);
		close(fd);
	}
}

/* ---- hashing ---- */

static void hexs(const unsigned char *d, unsigned n, char *out)
{
	static const char h[] = "0123456789abcdef";
	for (unsigned i = 0; i < n; i++) {
		out[2 * i] = h[d[i] >> 4];
		out[2 * i + 1] = h[d[i] & 15];
	}
	out[2 * n] = 0;
}

/* SHA-256, MD5 and size of a file in one pass. */
static int hash_file(const char *path, char sha[SB_SHA256_HEX], char md5[33], uint64_t *size, struct sb_err *err)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return SB_ERRNO(err, path);
	struct sb_sha256 *h = sb_sha256_new();
	EVP_MD_CTX *m = EVP_MD_CTX_new();
	if (!h || !m || EVP_DigestInit_ex(m, EVP_md5(), NULL) != 1) {
		fclose(f);
		sb_sha256_free(h);
		EVP_MD_CTX_free(m);
		return SB_ERR(err, SB_EINTERNAL, "%s: cannot set up hashing", path);
	}
	static unsigned char buf[1 << 20];
	uint64_t total = 0;
	size_t k;
	while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
		sb_sha256_update(h, buf, k);
		EVP_DigestUpdate(m, buf, k);
		total += k;
	}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		sb_sha256_free(h);
		EVP_MD_CTX_free(m);
		return SB_ERR(err, SB_EIO, "%s: read error", path);
	}
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned dn = 0;
	EVP_DigestFinal_ex(m, d, &dn);
	EVP_MD_CTX_free(m);
	hexs(d, dn, md5);
	sb_sha256_final(h, sha);
	*size = total;
	return 0;
}

/* ---- pins ---- */

/* Look up the pinned SHA-256 of a file in CACHE/pins.ndjson. */
static int pin_lookup(const struct sbf_ctx *c, const char *id, char sha[SB_SHA256_HEX], int64_t *size,
                      struct sb_err *err)
{
	char *path = sb_path_join(c->cache, "pins.ndjson");
	struct sb_ndjson_reader *rd;
	sha[0] = 0;
	if (!path)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	if (!sb_file_exists(path)) {
		free(path);
		return 0;
	}
	int rc = sb_ndjson_open(path, &rd, err);
	if (rc) {
		free(path);
		return rc;
	}
	for (;;) {
		struct sb_json *v;
		if ((rc = sb_ndjson_next(rd, &v, err)) || !v)
			break;
		const char *f = sbf_str(v, "file"), *s = sbf_str(v, "sha256");
		if (f && s && !strcmp(f, id) && sb_is_sha256_hex(s)) {
			snprintf(sha, SB_SHA256_HEX, "%s", s);
			if (sbf_int(v, "size_bytes", size))
				*size = -1;
		}
		sb_json_free(v);
	}
	sb_ndjson_close(rd);
	free(path);
	return rc;
}

static int pin_add(const struct sbf_ctx *c, const struct sbf_src *s, const char *source, struct sb_err *err)
{
	char *lock = sb_path_join(c->cache, "pins.lock"), *path = sb_path_join(c->cache, "pins.ndjson");
	int rc = 0, fd = -1;
	char *old = NULL;
	size_t oldn = 0;
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	if (!lock || !path) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto done;
	}
	if ((fd = lock_open(lock, err)) < 0) {
		rc = -fd;
		goto done;
	}
	/* Another process may have pinned it meanwhile: then it must agree. */
	char have[SB_SHA256_HEX];
	int64_t hs;
	if ((rc = pin_lookup(c, s->f->id, have, &hs, err)))
		goto done;
	if (have[0]) {
		if (strcmp(have, s->sha256))
			rc = SB_ERR(err, SB_EDATA,
			            "%s: SHA-256 mismatch: expected %s (pinned by another process), actual %s", s->path,
			            have, s->sha256);
		goto done;
	}
	if (sb_file_exists(path) && (rc = sb_read_file(path, &old, &oldn, 64u << 20, err)))
		goto done;
	char t[32];
	sb_time_rfc3339(t, NULL);
	sb_jw_record(&w, "fetch.pin", 1); /* pins written before 2026-12-02 lack kind and v */
	sb_jw_kstr(&w, "file", s->f->id);
	sb_jw_kstr(&w, "sha256", s->sha256);
	sb_jw_kint(&w, "size_bytes", (int64_t)s->size);
	sb_jw_kstr(&w, "md5", s->md5);
	sb_jw_kbool(&w, "md5_checked", s->f->md5 != NULL);
	sb_jw_kstr(&w, "pinned_at", t);
	sb_jw_kstr(&w, "origin", s->origin);
	sb_jw_kstr(&w, "source", source);
	sb_jw_kstr(&w, "registry_version", c->reg->version);
	sb_jw_obj_end(&w);
	size_t n = oldn + w.len + 2;
	char *all = malloc(n);
	if (!all || w.oom) {
		free(all);
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto done;
	}
	size_t k = 0;
	if (oldn) {
		memcpy(all, old, oldn);
		k = oldn;
		if (all[k - 1] != '\n')
			all[k++] = '\n';
	}
	memcpy(all + k, w.buf, w.len);
	k += w.len;
	all[k++] = '\n';
	rc = sb_write_file_atomic(path, all, k, err);
	free(all);
done:
	lock_close(fd);
	sb_jw_free(&w);
	free(old);
	free(lock);
	free(path);
	return rc;
}

/* ---- verification ---- */

/* Verify the file at s->path (s->f, s->origin set). SB_EDATA on a mismatch,
 * with the expected and actual values in the message. */
static int verify(const struct sbf_ctx *c, struct sbf_src *s, const char *source, struct sb_err *err)
{
	const struct sbf_file *f = s->f;
	SB_TRY(hash_file(s->path, s->sha256, s->md5, &s->size, err));
	if (f->sha256 && !strcmp(s->sha256, f->sha256) && (f->size < 0 || (uint64_t)f->size == s->size)) {
		s->verified_by = "sha256";
		return 0;
	}
	if (f->content_sha256) {
		/* Accept a re-compressed copy by the hash of its decompressed bytes. */
		struct sb_err e2 = {0};
		uint64_t lim = f->content_size >= 0 ? (uint64_t)f->content_size : SBF_MEMBER_LIMIT;
		if (sb_decompress_file(s->path, s->path, "gzip", &s->content, lim, &e2) == 0) {
			sb_sha256_buf(s->content.data, s->content.n, s->content_sha256);
			if (!strcmp(s->content_sha256, f->content_sha256) &&
			    (f->content_size < 0 || (uint64_t)f->content_size == s->content.n)) {
				s->verified_by = "content_sha256";
				return 0;
			}
		} else {
			snprintf(s->content_sha256, sizeof s->content_sha256, "(not gzip: %.20s)", "undecodable");
		}
		sb_blob_free(&s->content);
		if (f->sha256)
			return SB_ERR(err, SB_EDATA,
			              "%s: SHA-256 mismatch: expected %s, actual %s; decompressed content: expected "
			              "%s, actual %s",
			              s->path, f->sha256, s->sha256, f->content_sha256, s->content_sha256);
	}
	if (f->sha256) {
		if (strcmp(s->sha256, f->sha256))
			return SB_ERR(err, SB_EDATA, "%s: SHA-256 mismatch: expected %s, actual %s", s->path, f->sha256,
			              s->sha256);
		return SB_ERR(err, SB_EDATA, "%s: size mismatch: expected %lld bytes, actual %llu", s->path,
		              (long long)f->size, (unsigned long long)s->size);
	}
	/* Pinned on first fetch. */
	char pin[SB_SHA256_HEX];
	int64_t pin_size = -1;
	SB_TRY(pin_lookup(c, f->id, pin, &pin_size, err));
	if (pin[0]) {
		if (strcmp(pin, s->sha256))
			return SB_ERR(err, SB_EDATA,
			              "%s: SHA-256 mismatch: expected %s (pinned in %s/pins.ndjson), actual %s",
			              s->path, pin, c->cache, s->sha256);
		s->verified_by = "pin";
		return 0;
	}
	if (f->size >= 0 && (uint64_t)f->size != s->size)
		return SB_ERR(err, SB_EDATA,
		              "%s: size mismatch: expected %lld bytes, actual %llu (first fetch, not pinned)", s->path,
		              (long long)f->size, (unsigned long long)s->size);
	if (f->md5 && strcmp(f->md5, s->md5))
		return SB_ERR(err, SB_EDATA,
		              "%s: MD5 mismatch: expected %s, actual %s (first fetch, not pinned; SHA-256 %s)", s->path,
		              f->md5, s->md5, s->sha256);
	SB_TRY(pin_add(c, s, source, err));
	s->verified_by = "first-fetch";
	/* Recorded in the pins file and the fetch.archive record; a progress note here. */
	sb_progress(1, "%s: pinned SHA-256 %s on first fetch%s (%s/pins.ndjson)", f->id, s->sha256,
	            f->md5 ? " after checking the published MD5" : " (trust on first use: nothing published to check)",
	            c->cache);
	return 0;
}

/* ---- HTTP ---- */

void sbf_http_global(int init)
{
	if (init)
		curl_global_init(CURL_GLOBAL_DEFAULT);
	else
		curl_global_cleanup();
}

struct dl {
	FILE *f;
	uint64_t have; /* bytes in the file before this transfer */
	uint64_t got;  /* bytes written by this transfer */
	uint64_t limit;
	int over;
	const char *label;
	double t0;
};

static size_t dl_write(char *p, size_t sz, size_t nm, void *ud)
{
	struct dl *d = ud;
	size_t n = sz * nm;
	if (d->have + d->got + n > d->limit) {
		d->over = 1;
		return 0;
	}
	if (fwrite(p, 1, n, d->f) != n)
		return 0;
	d->got += n;
	return n;
}

static int dl_progress(void *ud, curl_off_t total, curl_off_t now, curl_off_t ut, curl_off_t un)
{
	struct dl *d = ud;
	double el = sb_monotonic_seconds() - d->t0;
	double mb = (double)(d->have + (uint64_t)now) / 1e6, rate = el > 0 ? (double)now / 1e6 / el : 0;
	if (el < 2)
		return 0;
	if (total > 0)
		sb_progress(0, "%s: %.1f of %.1f MB (%.0f%%), %.1f MB/s", d->label, mb,
		            (double)(d->have + (uint64_t)total) / 1e6,
		            100.0 * (double)(d->have + (uint64_t)now) / (double)(d->have + (uint64_t)total), rate);
	else
		sb_progress(0, "%s: %.1f MB, %.1f MB/s", d->label, mb, rate);
	return 0;
}

/* One attempt at URL into part (appending when it exists). Returns 0 on a
 * complete transfer; otherwise 1 for an error worth retrying, 2 for one that
 * is not (HTTP 4xx), 3 when the partial file could not be resumed and was
 * removed (start over at once), with a message in msg; after a complete
 * transfer msg holds the URL the bytes came from (after redirects). */
static int http_once(const struct sbf_ctx *c, const char *url, const char *part, const struct sbf_file *f, char *msg,
                     size_t msgn)
{
	struct stat st;
	uint64_t have = stat(part, &st) == 0 ? (uint64_t)st.st_size : 0;
	uint64_t limit = f->size >= 0 ? (uint64_t)f->size : ((uint64_t)16 << 30);
	if (have > limit) { /* a bigger partial file cannot be a prefix */
		unlink(part);
		have = 0;
	}
	FILE *fp = fopen(part, have ? "ab" : "wb");
	if (!fp) {
		snprintf(msg, msgn, "%s: %s", part, strerror(errno));
		return 2;
	}
	CURL *h = curl_easy_init();
	if (!h) {
		fclose(fp);
		snprintf(msg, msgn, "cannot initialise libcurl");
		return 2;
	}
	char errbuf[CURL_ERROR_SIZE] = "", ua[128];
	struct dl d = {.f = fp, .have = have, .limit = limit, .label = f->id, .t0 = sb_monotonic_seconds()};
	snprintf(ua, sizeof ua, "sparsebench-sb-fetch/%s", SB_VERSION);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
	curl_easy_setopt(h, CURLOPT_USERAGENT, ua);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->connect_timeout_s * 1000));
	/* No total timeout (archives are large): abort when the transfer stalls. */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(c->stall_timeout_s < 1 ? 1 : c->stall_timeout_s));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, dl_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &d);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, dl_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, &d);
	curl_easy_setopt(h, CURLOPT_FAILONERROR, 0L);
	if (f->size >= 0)
		curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)f->size);
	if (have)
		curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)have);
	/* Proxies: libcurl reads http_proxy, https_proxy, ALL_PROXY and NO_PROXY itself. */
	CURLcode cr = curl_easy_perform(h);
	long code = 0;
	char *eff = NULL;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_getinfo(h, CURLINFO_EFFECTIVE_URL, &eff);
	char final[2048];
	snprintf(final, sizeof final, "%s", eff ? eff : url);
	curl_easy_cleanup(h);
	int bad = fclose(fp) != 0;
	if (code >= 400 && code != 416) {
		/* keep a partial file (without the error body) for the next URL */
		if (have == 0 || truncate(part, (off_t)have) != 0)
			unlink(part);
		snprintf(msg, msgn, "%s: HTTP %ld", url, code);
		return (code >= 500 || code == 408 || code == 429) ? 1 : 2;
	}
	if (cr == CURLE_RANGE_ERROR || code == 416) {
		/* The server cannot resume (or the partial file is stale): start over. */
		unlink(part);
		snprintf(msg, msgn, "%s: cannot resume a partial download (HTTP %ld); restarting", url, code);
		return 3;
	}
	if (cr == CURLE_OK && (code == 200 || code == 206) && !bad) {
		if (have && code == 200) {
			/* Should not happen (libcurl refuses); be safe: the file now holds
			 * the old prefix plus a whole body. */
			unlink(part);
			snprintf(msg, msgn, "%s: server ignored the range request; restarting", url);
			return 3;
		}
		snprintf(msg, msgn, "%s", final);
		return 0;
	}
	if (d.over || cr == CURLE_FILESIZE_EXCEEDED) {
		unlink(part);
		snprintf(msg, msgn, "%s: larger than the registry's %lld bytes", url, (long long)f->size);
		return 2;
	}
	if (cr == CURLE_OK) {
		if (code != 200 && code != 206 && have == 0)
			unlink(part);
		else if (code != 200 && code != 206) { /* keep the partial file; drop the error body */
			if (truncate(part, (off_t)have) != 0)
				unlink(part);
		}
		snprintf(msg, msgn, "%s: HTTP %ld", url, code);
		return (code >= 500 || code == 408 || code == 429) ? 1 : 2;
	}
	snprintf(msg, msgn, "%s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(cr));
	return (cr == CURLE_UNSUPPORTED_PROTOCOL || cr == CURLE_URL_MALFORMAT) ? 2 : 1;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- the search ---- */

static int is_regular(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Refused candidates: reported on stderr once the search is over (the first
 * one becomes the error when nothing verifies, so it is not printed twice). */
struct refusals {
	int n;
	struct sb_err first;
	char more[4][1200];
	int nmore;
};

static void refused(struct refusals *r, const struct sb_err *e, const char *action)
{
	if (r->n++ == 0) {
		r->first = *e;
		snprintf(r->first.msg, sizeof r->first.msg, "%s%s", e->msg, action);
	} else if (r->nmore < 4) {
		snprintf(r->more[r->nmore++], sizeof r->more[0], "%s%s", e->msg, action);
	}
}

static void report(const struct refusals *r, int success)
{
	if (r->n && success)
		sb_cli_warn("%s", r->first.msg);
	for (int i = 0; i < r->nmore; i++)
		sb_cli_warn("%s", r->more[i]);
	if (r->n > 1 + r->nmore)
		sb_cli_warn("(%d more refused candidates)", r->n - 1 - r->nmore);
}

static int set_path(char *dst, size_t n, const char *a, const char *b)
{
	int k = snprintf(dst, n, "%s/%s", a, b);
	return k < 0 || (size_t)k >= n ? -1 : 0;
}

int sbf_obtain(struct sbf_ctx *c, const struct sbf_file *f, struct sbf_src *out, struct sb_err *err)
{
	struct refusals bad = {0};
	struct sb_err e = {0};
	char cpath[4096], wrong[4200], part[4200], lock[4200];
	int rc;
	memset(out, 0, sizeof *out);
	out->f = f;
	if (set_path(cpath, sizeof cpath, c->cache, f->id))
		return SB_ERR(err, SB_EUSAGE, "cache path too long");
	snprintf(wrong, sizeof wrong, "%s.wrong", cpath);
	snprintf(part, sizeof part, "%s.part", cpath);
	snprintf(lock, sizeof lock, "%s.lock", cpath);
	if (!f->sha256) {
		/* A malformed pins file is an error of its own, not a refusal of
		 * the candidates (which would rename good downloads to .wrong). */
		char pin[SB_SHA256_HEX];
		int64_t pin_size;
		SB_TRY(pin_lookup(c, f->id, pin, &pin_size, err));
	}

	/* 1. the cache */
	if (is_regular(cpath)) {
		int fd = lock_open(lock, err);
		if (fd < 0)
			return -fd;
		if (is_regular(cpath)) {
			snprintf(out->path, sizeof out->path, "%s", cpath);
			out->origin = "cache";
			rc = verify(c, out, cpath, &e);
			if (rc == 0) {
				lock_close(fd);
				return 0; /* nothing refused yet */
			}
			if (rc != SB_EDATA) {
				lock_close(fd);
				*err = e;
				return rc;
			}
			char act[4400];
			if (rename(cpath, wrong) == 0)
				snprintf(act, sizeof act, " (renamed to %s)", wrong);
			else
				snprintf(act, sizeof act, " (could not rename it: %s)", strerror(errno));
			refused(&bad, &e, act);
			sbf_src_free(out);
		}
		lock_close(fd);
	}

	/* 2. mirror directories */
	for (int i = 0; i < c->nmirrors; i++) {
		const char *cands[2] = {f->id, f->name};
		struct stat seen = {0};
		for (int k = 0; k < 2; k++) {
			char mp[4096];
			struct stat st;
			if (set_path(mp, sizeof mp, c->mirrors[i], cands[k]) || !is_regular(mp) || stat(mp, &st))
				continue;
			if (k == 1 && seen.st_ino && st.st_dev == seen.st_dev && st.st_ino == seen.st_ino)
				continue; /* M/NAME is M/ID itself (ID == NAME, or a link), refused already */
			memset(out, 0, sizeof *out);
			out->f = f;
			snprintf(out->path, sizeof out->path, "%s", mp);
			out->origin = "mirror";
			sb_err_clear(&e);
			rc = verify(c, out, mp, &e);
			if (rc == 0) {
				report(&bad, 1);
				return 0;
			}
			if (rc != SB_EDATA) {
				*err = e;
				return rc;
			}
			refused(&bad, &e, " (mirror file left in place)");
			sbf_src_free(out);
			seen = st; /* a refused M/ID does not hide a good M/NAME */
		}
	}

	/* 3. URLs */
	char last[2300] = "";
	size_t nurls = f->urls ? f->urls->n : 0;
	if (!c->offline && nurls > 0) {
		int fd = lock_open(lock, err);
		if (fd < 0)
			return -fd;
		/* Another process may have fetched it while we waited for the lock. */
		if (is_regular(cpath)) {
			memset(out, 0, sizeof *out);
			out->f = f;
			snprintf(out->path, sizeof out->path, "%s", cpath);
			out->origin = "cache";
			sb_err_clear(&e);
			if ((rc = verify(c, out, cpath, &e)) == 0) {
				lock_close(fd);
				report(&bad, 1);
				return 0;
			}
			sbf_src_free(out);
			if (rc != SB_EDATA) {
				lock_close(fd);
				*err = e;
				return rc;
			}
			rename(cpath, wrong);
			refused(&bad, &e, " (renamed to .wrong)");
		}
		for (size_t u = 0; u < nurls; u++) {
			const char *url = f->urls->items[u]->text;
			int got = 0, restarted = 0;
			struct stat pst;
			int resumed = stat(part, &pst) == 0 && pst.st_size > 0;
			for (int attempt = 0; attempt <= c->retries; attempt++) {
				if (attempt > 0) {
					long ms = c->backoff_ms < 60000 ? c->backoff_ms : 60000; /* doubled, at most 60 s */
					for (int d = 1; d < attempt && ms < 60000; d++)
						ms = 2 * ms < 60000 ? 2 * ms : 60000;
					sb_progress(1, "%s: retrying in %.1f s (%s)", f->id, (double)ms / 1000, last);
					sleep_ms(ms);
				}
				sb_progress(0, "%s: downloading %s", f->id, url);
				int r = http_once(c, url, part, f, last, sizeof last);
				if (r == 0) {
					got = 1;
					break;
				}
				if (r == 3) /* the partial file is gone: what follows is no resumed download */
					resumed = 0;
				if (r == 3 && !restarted) {
					/* the partial file is gone: start over, not counted as a retry */
					restarted = 1;
					attempt--;
					continue;
				}
				if (r == 2)
					break;
			}
			if (!got) {
				sb_cli_warn("%s: %s", f->id, last);
				continue;
			}
			memset(out, 0, sizeof *out);
			out->f = f;
			snprintf(out->path, sizeof out->path, "%s", part);
			out->origin = "url";
			snprintf(out->url, sizeof out->url, "%s", url);
			if (strcmp(last, url)) /* redirected: where the bytes came from */
				snprintf(out->url_final, sizeof out->url_final, "%s", last);
			sb_err_clear(&e);
			rc = verify(c, out, url, &e);
			if (rc == 0) {
				if (rename(part, cpath) != 0) {
					rc = SB_ERRNO(err, cpath);
					sbf_src_free(out);
					lock_close(fd);
					return rc;
				}
				snprintf(out->path, sizeof out->path, "%s", cpath);
				sb_progress(1, "%s: downloaded and verified (%llu bytes, %s)", f->id,
				            (unsigned long long)out->size, out->verified_by);
				lock_close(fd);
				report(&bad, 1);
				return 0;
			}
			sbf_src_free(out);
			if (rc != SB_EDATA) {
				lock_close(fd);
				*err = e;
				return rc;
			}
			if (resumed) {
				/* The partial file was not a prefix of this file: start over once. */
				sb_cli_warn(
				    "%s: resumed download failed verification; downloading it again from the start",
				    f->id);
				unlink(part);
				u--;
				continue;
			}
			char act[4400];
			if (rename(part, wrong) == 0)
				snprintf(act, sizeof act, " (downloaded from %s; renamed to %s)", url, wrong);
			else
				snprintf(act, sizeof act, " (downloaded from %s)", url);
			refused(&bad, &e, act);
		}
		lock_close(fd);
	}
	memset(out, 0, sizeof *out);
	if (bad.n) {
		report(&bad, 0);
		*err = bad.first;
		return SB_EDATA;
	}
	char where[1024];
	int k = snprintf(where, sizeof where, "%s", c->cache);
	for (int i = 0; i < c->nmirrors && k < (int)sizeof where; i++)
		k += snprintf(where + k, sizeof where - (size_t)k, ", %s", c->mirrors[i]);
	if (c->offline || nurls == 0)
		return SB_ERR(err, SB_EIO, "%s: not found in %s%s", f->id, where,
		              nurls == 0 ? " and the registry has no URL for it" : " (offline: URLs not tried)");
	return SB_ERR(err, SB_EIO, "%s: not found in %s, and every URL failed (last: %s)", f->id, where, last);
}
