/* registry.c — loading and checking the dataset registry (fetch/registry.json). */
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "sbf.h"

const char *sbf_str(const struct sb_json *o, const char *key)
{
	const struct sb_json *v = sb_json_get(o, key);
	return v && v->type == SB_JSON_STRING ? v->text : NULL;
}

int sbf_int(const struct sb_json *o, const char *key, int64_t *out)
{
	const struct sb_json *v = sb_json_get(o, key);
	if (!v || v->type != SB_JSON_NUMBER)
		return -1;
	return sb_json_int64(v, out) ? -1 : 0;
}

static int is_hex(const char *s, size_t n)
{
	if (strlen(s) != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

static int check_file(struct sbf_file *f, const char *where, struct sb_err *err)
{
	const struct sb_json *o = f->json, *v;
	if (o->type != SB_JSON_OBJECT)
		return SB_ERR(err, SB_EDATA, "%s: file '%s' is not an object", where, f->id);
	const char *slash = strrchr(f->id, '/');
	f->name = slash ? slash + 1 : f->id;
	if (!*f->name || sb_ar_path_safe(f->id))
		return SB_ERR(err, SB_EDATA, "%s: file id '%s' is not a safe relative path", where, f->id);
	f->urls = sb_json_get(o, "urls");
	if (!f->urls || f->urls->type != SB_JSON_ARRAY)
		return SB_ERR(err, SB_EDATA, "%s: file '%s': 'urls' must be an array", where, f->id);
	for (size_t i = 0; i < f->urls->n; i++) {
		const struct sb_json *u = f->urls->items[i];
		if (u->type != SB_JSON_STRING || (strncmp(u->text, "http://", 7) && strncmp(u->text, "https://", 8)))
			return SB_ERR(err, SB_EDATA, "%s: file '%s': URLs must be http:// or https:// strings", where,
			              f->id);
	}
	f->size = -1;
	f->content_size = -1;
	if ((v = sb_json_get(o, "size")) && v->type != SB_JSON_NULL && (sb_json_int64(v, &f->size) || f->size < 0))
		return SB_ERR(err, SB_EDATA, "%s: file '%s': bad 'size'", where, f->id);
	if ((v = sb_json_get(o, "content_size")) && v->type != SB_JSON_NULL &&
	    (sb_json_int64(v, &f->content_size) || f->content_size < 0))
		return SB_ERR(err, SB_EDATA, "%s: file '%s': bad 'content_size'", where, f->id);
	/* a hash is a string or null (unpublished); any other type is an error, never "no hash" */
	static const char *const hashes[] = {"sha256", "md5", "content_sha256"};
	for (int k = 0; k < 3; k++)
		if ((v = sb_json_get(o, hashes[k])) && v->type != SB_JSON_STRING && v->type != SB_JSON_NULL)
			return SB_ERR(err, SB_EDATA, "%s: file '%s': '%s' must be a string or null", where, f->id,
			              hashes[k]);
	f->sha256 = sbf_str(o, "sha256");
	f->md5 = sbf_str(o, "md5");
	f->content_sha256 = sbf_str(o, "content_sha256");
	if (f->sha256 && !is_hex(f->sha256, 64))
		return SB_ERR(err, SB_EDATA, "%s: file '%s': 'sha256' is not 64 lowercase hex digits", where, f->id);
	if (f->content_sha256 && !is_hex(f->content_sha256, 64))
		return SB_ERR(err, SB_EDATA, "%s: file '%s': 'content_sha256' is not 64 lowercase hex digits", where,
		              f->id);
	if (f->md5 && !is_hex(f->md5, 32))
		return SB_ERR(err, SB_EDATA, "%s: file '%s': 'md5' is not 32 lowercase hex digits", where, f->id);
	return 0;
}

static const char *const decoders[] = {"idx",  "emnist",           "npz",    "cifar", "svhn_mat", "libsvm",
                                       "news", "synthetic_marker", "corpus", NULL};

/* Every file a task names must exist in "files". */
static int check_ref(const struct sbf_registry *r, const char *task, const char *id, const char *where,
                     struct sb_err *err)
{
	if (!id)
		return SB_ERR(err, SB_EDATA, "%s: task '%s': missing file reference", where, task);
	if (!sbf_file(r, id))
		return SB_ERR(err, SB_EDATA, "%s: task '%s' names file '%s', which 'files' lacks", where, task, id);
	return 0;
}

static int check_task(const struct sbf_registry *r, const struct sb_json *t, const char *where, struct sb_err *err)
{
	const char *name = sbf_str(t, "task"), *dec = sbf_str(t, "decoder"), *mod = sbf_str(t, "modality");
	if (!name || !dec || !mod)
		return SB_ERR(err, SB_EDATA, "%s: a task lacks 'task', 'decoder' or 'modality'", where);
	int k;
	for (k = 0; decoders[k]; k++)
		if (!strcmp(dec, decoders[k]))
			break;
	if (!decoders[k])
		return SB_ERR(err, SB_EDATA, "%s: task '%s': unknown decoder '%s'", where, name, dec);
	if (strcmp(mod, "image") && strcmp(mod, "text") && strcmp(mod, "corpus"))
		return SB_ERR(err, SB_EDATA, "%s: task '%s': unknown modality '%s'", where, name, mod);
	if (strcmp(mod, "corpus")) {
		int64_t classes;
		if (sbf_int(t, "classes", &classes) || classes < 2 || classes > 100000)
			return SB_ERR(err, SB_EDATA, "%s: task '%s': bad 'classes'", where, name);
	}
	/* file references */
	const char *arch = sbf_str(t, "archive");
	if (arch)
		SB_TRY(check_ref(r, name, arch, where, err));
	if (!strcmp(dec, "idx") || !strcmp(dec, "npz")) {
		const char *roles[2] = {"pool", "test"}, *parts[2] = {"images", "labels"};
		for (int i = 0; i < 2; i++)
			for (int j = 0; j < 2; j++)
				SB_TRY(check_ref(r, name, sbf_str(sb_json_get(t, roles[i]), parts[j]), where, err));
	} else if (!strcmp(dec, "svhn_mat") || !strcmp(dec, "libsvm")) {
		SB_TRY(check_ref(r, name, sbf_str(t, "pool"), where, err));
		SB_TRY(check_ref(r, name, sbf_str(t, "test"), where, err));
	} else if (!strcmp(dec, "emnist") || !strcmp(dec, "cifar") || !strcmp(dec, "news")) {
		if (!arch)
			return SB_ERR(err, SB_EDATA, "%s: task '%s': decoder '%s' needs 'archive'", where, name, dec);
	} else if (!strcmp(dec, "corpus")) {
		const char *file = sbf_str(t, "file");
		const struct sb_json *sp = sb_json_get(t, "splits");
		if (file)
			SB_TRY(check_ref(r, name, file, where, err));
		else if (!sp || sp->type != SB_JSON_OBJECT)
			return SB_ERR(err, SB_EDATA, "%s: task '%s': a corpus needs 'file' or 'splits'", where, name);
		else if (!arch)
			for (size_t i = 0; i < sp->n; i++)
				SB_TRY(check_ref(r, name,
				                 sp->items[i]->type == SB_JSON_STRING ? sp->items[i]->text : NULL,
				                 where, err));
	}
	/* the ranges lib/dataset.c accepts, so that a bad entry is refused here and not
	 * by the read-back of what was written */
	int64_t x;
	if (!strcmp(mod, "image") && (sbf_int(t, "patch", &x) || x < 1 || x > 64))
		return SB_ERR(err, SB_EDATA, "%s: task '%s': 'patch' must be an integer in [1, 64]", where, name);
	if (!strcmp(mod, "text") && (sbf_int(t, "seq_len", &x) || x < 1 || x > (1 << 20) ||
	                             sbf_int(t, "vocab", &x) || x < 2 || x > (1 << 30)))
		return SB_ERR(err, SB_EDATA, "%s: task '%s': bad 'seq_len' or 'vocab'", where, name);
	/* counts checked after decoding: absent or null = not checked, else an integer >= 0 */
	static const char *const counts[] = {"n_pool", "n_test"};
	for (int k = 0; k < 2; k++) {
		const struct sb_json *c = sb_json_get(t, counts[k]);
		if (c && c->type != SB_JSON_NULL && (sbf_int(t, counts[k], &x) || x < 0))
			return SB_ERR(err, SB_EDATA, "%s: task '%s': '%s' must be an integer >= 0 or null", where, name,
			              counts[k]);
	}
	return 0;
}

int sbf_registry_load(struct sbf_registry *r, const char *path, struct sb_err *err)
{
	memset(r, 0, sizeof *r);
	char *buf = NULL;
	size_t n;
	const char *where = path ? path : "(built-in registry)";
	if (path) {
		SB_TRY(sb_read_file(path, &buf, &n, 16u << 20, err));
	} else {
		n = (size_t)(sbf_registry_blob_end - sbf_registry_blob);
		buf = malloc(n + 1);
		if (!buf)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		memcpy(buf, sbf_registry_blob, n);
		buf[n] = 0;
	}
	r->path = where;
	sb_sha256_buf(buf, n, r->sha256);
	r->size = n;
	int rc = sb_json_parse(buf, n, &r->root, err);
	free(buf);
	if (rc) {
		sb_err_prefix(err, "%s", where);
		return SB_EDATA;
	}
	const struct sb_json *files = sb_json_get(r->root, "files"), *tasks = sb_json_get(r->root, "tasks");
	r->version = sbf_str(r->root, "registry_version");
	if (!files || files->type != SB_JSON_OBJECT || !tasks || tasks->type != SB_JSON_ARRAY || !r->version) {
		sbf_registry_free(r);
		return SB_ERR(err, SB_EDATA, "%s: not a registry (needs 'registry_version', 'files' and 'tasks')",
		              where);
	}
	r->files = calloc(files->n ? files->n : 1, sizeof *r->files);
	if (!r->files) {
		sbf_registry_free(r);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	r->nfiles = files->n;
	for (size_t i = 0; i < files->n; i++) {
		r->files[i].id = files->keys[i];
		r->files[i].json = files->items[i];
		if ((rc = check_file(&r->files[i], where, err))) {
			sbf_registry_free(r);
			return rc;
		}
	}
	for (size_t i = 0; i < tasks->n; i++) {
		if ((rc = check_task(r, tasks->items[i], where, err))) {
			sbf_registry_free(r);
			return rc;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(sbf_str(tasks->items[i], "task"), sbf_str(tasks->items[j], "task"))) {
				rc = SB_ERR(err, SB_EDATA, "%s: task '%s' listed twice", where,
				            sbf_str(tasks->items[i], "task"));
				sbf_registry_free(r);
				return rc;
			}
	}
	return 0;
}

void sbf_registry_free(struct sbf_registry *r)
{
	sb_json_free(r->root);
	free(r->files);
	r->root = NULL;
	r->files = NULL;
}

const struct sb_json *sbf_task(const struct sbf_registry *r, const char *name)
{
	const struct sb_json *tasks = sb_json_get(r->root, "tasks");
	for (size_t i = 0; tasks && i < tasks->n; i++)
		if (!strcmp(sbf_str(tasks->items[i], "task"), name))
			return tasks->items[i];
	return NULL;
}

const struct sbf_file *sbf_file(const struct sbf_registry *r, const char *id)
{
	for (size_t i = 0; i < r->nfiles; i++)
		if (!strcmp(r->files[i].id, id))
			return &r->files[i];
	return NULL;
}
