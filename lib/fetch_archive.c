/* fetch_archive.c — archives and compressed streams through libarchive.
 *
 * Nothing is extracted to disk: members are read into memory by name. Every
 * entry's path (and a link's target) is still checked as if it were to be
 * extracted, so an archive with a member that would escape the target
 * directory is refused whole. */
#include "fetch.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct sb_ar {
	struct archive *a;
	char name[2048];
	char desc[128];
};

int sb_ar_path_safe(const char *p)
{
	if (!p || !*p || p[0] == '/')
		return -1;
	for (const unsigned char *c = (const unsigned char *)p; *c; c++)
		if (*c < 0x20 || *c == 0x7f || *c == '\\')
			return -1;
	const char *s = p;
	while (*s) {
		const char *e = strchr(s, '/');
		size_t k = e ? (size_t)(e - s) : strlen(s);
		if (k == 2 && s[0] == '.' && s[1] == '.')
			return -1;
		if (!e)
			break;
		s = e + 1;
	}
	return 0;
}

/* "./a/b" -> "a/b" */
static const char *norm(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	while (*p == '/')
		p++;
	return p;
}

static int ar_fail(struct sb_ar *ar, struct sb_err *err, const char *what)
{
	const char *m = archive_error_string(ar->a);
	char clean[512];
	snprintf(clean, sizeof clean, "%s", m ? m : "unknown error");
	for (char *c = clean; *c; c++)
		if ((unsigned char)*c < 0x20)
			*c = ' ';
	int e = archive_errno(ar->a);
	int code = (e == ENOENT || e == EACCES || e == EIO || e == EISDIR || e == ENOMEM) ? SB_EIO : SB_EDATA;
	return SB_ERR(err, code, "%s: %s: %s", ar->name, what, clean);
}

static struct sb_ar *ar_new(const char *name)
{
	struct sb_ar *ar = calloc(1, sizeof *ar);
	if (!ar)
		return NULL;
	ar->a = archive_read_new();
	if (!ar->a) {
		free(ar);
		return NULL;
	}
	snprintf(ar->name, sizeof ar->name, "%s", name);
	archive_read_support_filter_all(ar->a);
	archive_read_support_format_tar(ar->a);
	archive_read_support_format_gnutar(ar->a);
	archive_read_support_format_zip(ar->a);
	return ar;
}

int sb_ar_open_file(struct sb_ar **out, const char *path, const char *name, struct sb_err *err)
{
	struct sb_ar *ar = ar_new(name);
	*out = NULL;
	if (!ar)
		return SB_ERR(err, SB_EINTERNAL, "%s: out of memory", name);
	if (archive_read_open_filename(ar->a, path, 1 << 16) != ARCHIVE_OK) {
		int rc = ar_fail(ar, err, "cannot open archive");
		sb_ar_close(ar);
		return rc;
	}
	*out = ar;
	return 0;
}

int sb_ar_open_mem(struct sb_ar **out, const void *buf, size_t n, const char *name, struct sb_err *err)
{
	struct sb_ar *ar = ar_new(name);
	*out = NULL;
	if (!ar)
		return SB_ERR(err, SB_EINTERNAL, "%s: out of memory", name);
	if (archive_read_open_memory(ar->a, buf, n) != ARCHIVE_OK) {
		int rc = ar_fail(ar, err, "cannot open archive");
		sb_ar_close(ar);
		return rc;
	}
	*out = ar;
	return 0;
}

void sb_ar_close(struct sb_ar *a)
{
	if (!a)
		return;
	archive_read_free(a->a);
	free(a);
}

const char *sb_ar_format(const struct sb_ar *a)
{
	const char *f = archive_format_name(a->a);
	return f ? f : "unknown";
}

int sb_ar_next(struct sb_ar *ar, const char **path, int *is_file, struct sb_err *err)
{
	struct archive_entry *e;
	*path = NULL;
	*is_file = 0;
	int r = archive_read_next_header(ar->a, &e);
	if (r == ARCHIVE_EOF)
		return 0;
	if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
		return ar_fail(ar, err, "bad or truncated archive");
	const char *p = archive_entry_pathname(e);
	if (!p)
		return SB_ERR(err, SB_EDATA, "%s: member with an unreadable name", ar->name);
	if (sb_ar_path_safe(p))
		return SB_ERR(err, SB_EDATA, "%s: member '%.200s' escapes the target directory", ar->name, p);
	const char *hl = archive_entry_hardlink(e), *sl = archive_entry_symlink(e);
	if ((hl && sb_ar_path_safe(hl)) || (sl && sb_ar_path_safe(sl)))
		return SB_ERR(err, SB_EDATA, "%s: link member '%.200s' points outside the target directory (%.200s)",
		              ar->name, p, hl ? hl : sl);
	*path = p;
	*is_file = archive_entry_filetype(e) == AE_IFREG && !hl;
	if (archive_entry_size_is_set(e) && archive_entry_size(e) < 0)
		return SB_ERR(err, SB_EDATA, "%s: member '%.200s' has a negative size", ar->name, p);
	return 0;
}

static int read_all(struct sb_ar *ar, struct sb_blob *out, uint64_t limit, int64_t hint, struct sb_err *err)
{
	size_t cap = 1 << 16, len = 0;
	if (hint > 0 && (uint64_t)hint <= limit)
		cap = (size_t)hint + 1;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return SB_ERR(err, SB_EINTERNAL, "%s: out of memory", ar->name);
	for (;;) {
		if (len == cap) {
			size_t nc = cap * 2;
			if (nc > limit + 1)
				nc = (size_t)limit + 1;
			if (nc <= cap) {
				free(buf);
				return SB_ERR(err, SB_EDATA, "%s: data larger than the limit of %llu bytes", ar->name,
				              (unsigned long long)limit);
			}
			uint8_t *nb = realloc(buf, nc);
			if (!nb) {
				free(buf);
				return SB_ERR(err, SB_EINTERNAL, "%s: out of memory", ar->name);
			}
			buf = nb;
			cap = nc;
		}
		la_ssize_t r = archive_read_data(ar->a, buf + len, cap - len);
		if (r < 0) {
			free(buf);
			return ar_fail(ar, err, "bad or truncated data");
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > limit) {
			free(buf);
			return SB_ERR(err, SB_EDATA, "%s: data larger than the limit of %llu bytes", ar->name,
			              (unsigned long long)limit);
		}
	}
	out->data = buf;
	out->n = len;
	return 0;
}

int sb_ar_read(struct sb_ar *ar, struct sb_blob *out, uint64_t limit, struct sb_err *err)
{
	out->data = NULL;
	out->n = 0;
	return read_all(ar, out, limit, 0, err);
}

int sb_ar_members(const char *path, const char *name, size_t nmem, const char *const *members, struct sb_blob *out,
                  uint64_t limit, struct sb_err *err)
{
	struct sb_ar *ar;
	int rc;
	for (size_t i = 0; i < nmem; i++)
		out[i].data = NULL, out[i].n = 0;
	SB_TRY(sb_ar_open_file(&ar, path, name, err));
	int *seen = calloc(nmem ? nmem : 1, sizeof *seen);
	if (!seen) {
		sb_ar_close(ar);
		return SB_ERR(err, SB_EINTERNAL, "%s: out of memory", name);
	}
	for (;;) {
		const char *p;
		int is_file;
		rc = sb_ar_next(ar, &p, &is_file, err);
		if (rc || !p)
			break;
		if (!is_file)
			continue;
		const char *np = norm(p);
		for (size_t i = 0; i < nmem; i++) {
			if (strcmp(np, norm(members[i])) != 0)
				continue;
			if (seen[i]) {
				rc = SB_ERR(err, SB_EDATA, "%s: member '%s' appears twice", name, members[i]);
				goto done;
			}
			seen[i] = 1;
			char sub[1400];
			snprintf(sub, sizeof sub, "%s[%s]", name, members[i]);
			snprintf(ar->name, sizeof ar->name, "%s", sub);
			rc = sb_ar_read(ar, &out[i], limit, err);
			snprintf(ar->name, sizeof ar->name, "%s", name);
			if (rc)
				goto done;
			break;
		}
	}
	if (!rc)
		for (size_t i = 0; i < nmem; i++)
			if (!seen[i]) {
				rc =
				    SB_ERR(err, SB_EDATA, "%s: member '%s' not found in the archive", name, members[i]);
				break;
			}
done:
	free(seen);
	sb_ar_close(ar);
	if (rc)
		for (size_t i = 0; i < nmem; i++)
			sb_blob_free(&out[i]);
	return rc;
}

static int decompress(struct archive *a, const char *name, const char *filter, struct sb_blob *out, uint64_t limit,
                      struct sb_err *err)
{
	struct sb_ar ar;
	struct archive_entry *e;
	int want = !strcmp(filter, "gzip") ? ARCHIVE_FILTER_GZIP : ARCHIVE_FILTER_BZIP2;
	ar.a = a;
	snprintf(ar.name, sizeof ar.name, "%s", name);
	int r = archive_read_next_header(a, &e);
	if (r == ARCHIVE_EOF)
		return SB_ERR(err, SB_EDATA, "%s: empty file (expected %s data)", name, filter);
	if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
		return ar_fail(&ar, err, "bad or truncated data");
	if (archive_filter_count(a) < 2 || archive_filter_code(a, 0) != want)
		return SB_ERR(err, SB_EDATA, "%s: bad magic: not %s-compressed", name, filter);
	return read_all(&ar, out, limit, 0, err);
}

static struct archive *raw_new(const char *filter)
{
	struct archive *a = archive_read_new();
	if (!a)
		return NULL;
	if (!strcmp(filter, "gzip"))
		archive_read_support_filter_gzip(a);
	else
		archive_read_support_filter_bzip2(a);
	archive_read_support_format_raw(a);
	return a;
}

int sb_decompress_file(const char *path, const char *name, const char *filter, struct sb_blob *out, uint64_t limit,
                       struct sb_err *err)
{
	out->data = NULL;
	out->n = 0;
	if (strcmp(filter, "gzip") && strcmp(filter, "bzip2"))
		return SB_ERR(err, SB_EINTERNAL, "%s: unknown compression '%s'", name, filter);
	struct archive *a = raw_new(filter);
	if (!a)
		return SB_ERR(err, SB_EINTERNAL, "%s: out of memory", name);
	int rc;
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		struct sb_ar ar = {.a = a};
		snprintf(ar.name, sizeof ar.name, "%s", name);
		rc = ar_fail(&ar, err, "cannot open");
	} else {
		rc = decompress(a, name, filter, out, limit, err);
	}
	archive_read_free(a);
	return rc;
}

int sb_decompress_mem(const void *buf, size_t n, const char *name, const char *filter, struct sb_blob *out,
                      uint64_t limit, struct sb_err *err)
{
	out->data = NULL;
	out->n = 0;
	if (strcmp(filter, "gzip") && strcmp(filter, "bzip2"))
		return SB_ERR(err, SB_EINTERNAL, "%s: unknown compression '%s'", name, filter);
	if (n == 0)
		return SB_ERR(err, SB_EDATA, "%s: empty file (expected %s data)", name, filter);
	struct archive *a = raw_new(filter);
	if (!a)
		return SB_ERR(err, SB_EINTERNAL, "%s: out of memory", name);
	int rc;
	if (archive_read_open_memory(a, buf, n) != ARCHIVE_OK) {
		struct sb_ar ar = {.a = a};
		snprintf(ar.name, sizeof ar.name, "%s", name);
		rc = ar_fail(&ar, err, "cannot open");
	} else {
		rc = decompress(a, name, filter, out, limit, err);
	}
	archive_read_free(a);
	return rc;
}
