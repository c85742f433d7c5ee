/* lm_data.c — corpora as byte streams and the training mixture. */
#include "lm_data.h"

#include <archive.h>
#include <math.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "hash.h"
#include "io.h"
#include "lm_probe.h"
#include "rng.h"
#include "tensor.h"

void sb_lm_corpus_free(struct sb_lm_corpus *c)
{
	if (!c)
		return;
	free(c->bytes);
	memset(c, 0, sizeof *c);
}

/* Decompress (or copy) a whole file with libarchive's raw format and every filter. */
static int read_text(const char *path, uint8_t **out, size_t *n, struct sb_err *err)
{
	struct archive *a = archive_read_new();
	if (!a)
		return SB_ERR(err, SB_EINTERNAL, "%s: out of memory", path);
	archive_read_support_filter_all(a);
	archive_read_support_format_raw(a);
	archive_read_support_format_empty(a);
	struct archive_entry *e;
	int rc = SB_OK;
	size_t cap = 1 << 20, len = 0;
	uint8_t *buf = malloc(cap);
	if (!buf) {
		archive_read_free(a);
		return SB_ERR(err, SB_EINTERNAL, "%s: out of memory", path);
	}
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		rc = SB_ERR(err, SB_EIO, "%s: %s", path, archive_error_string(a));
		goto out;
	}
	int h = archive_read_next_header(a, &e);
	if (h == ARCHIVE_EOF)
		goto out; /* empty file */
	if (h != ARCHIVE_OK) {
		rc = SB_ERR(err, SB_EDATA, "%s: %s", path, archive_error_string(a));
		goto out;
	}
	for (;;) {
		if (len == cap) {
			uint8_t *q = realloc(buf, cap * 2);
			if (!q) {
				rc = SB_ERR(err, SB_EINTERNAL, "%s: out of memory", path);
				goto out;
			}
			buf = q;
			cap *= 2;
		}
		la_ssize_t k = archive_read_data(a, buf + len, cap - len);
		if (k < 0) {
			rc = SB_ERR(err, SB_EDATA, "%s: %s", path, archive_error_string(a));
			goto out;
		}
		if (k == 0)
			break;
		len += (size_t)k;
	}
out:
	archive_read_free(a);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*n = len;
	return 0;
}

static void base_name(char *dst, size_t cap, const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	snprintf(dst, cap, "%s", b);
	char *dot = strchr(dst, '.');
	if (dot && dot != dst)
		*dot = 0;
}

static int cut(struct sb_lm_corpus *c, uint8_t *all, size_t total, const char *split, struct sb_err *err)
{
	size_t a = 0, b = total;
	if (strcmp(split, "train") == 0) {
		b = (size_t)floor(SB_LM_SPLIT_TRAIN * (double)total);
	} else if (strcmp(split, "valid") == 0) {
		a = (size_t)floor(SB_LM_SPLIT_TRAIN * (double)total);
		b = (size_t)floor(SB_LM_SPLIT_VALID * (double)total);
	} else if (strcmp(split, "test") == 0) {
		free(all);
		return SB_ERR(err, SB_EVERDICT,
			      "%s: refusing to read the test part of a corpus (only sb-test reads test data)", c->path);
	} else if (strcmp(split, "all") != 0) {
		free(all);
		return SB_ERR(err, SB_EUSAGE, "unknown corpus split '%s' (train, valid or all)", split);
	}
	c->total = total;
	c->offset = a;
	c->n = b - a;
	snprintf(c->split, sizeof c->split, "%s", split);
	if (a > 0 || b < total) {
		c->bytes = malloc(c->n ? c->n : 1);
		if (!c->bytes) {
			free(all);
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		}
		memcpy(c->bytes, all + a, c->n);
		free(all);
	} else {
		c->bytes = all;
	}
	return 0;
}

/* sb-fetch's corpus directory: DIR/SPLIT.safetensors, tensor "bytes" U8 [n] */
static int read_fetch_dir(struct sb_lm_corpus *c, const char *dir, const char *split, struct sb_err *err)
{
	if (strcmp(split, "test") == 0)
		return SB_ERR(err, SB_EVERDICT,
			      "%s: refusing to read the test part of a corpus (only sb-test reads test data)", dir);
	if (strcmp(split, "train") && strcmp(split, "valid"))
		return SB_ERR(err, SB_EUSAGE, "corpus directory %s: split must be train or valid (got '%s')", dir, split);
	char path[4200];
	snprintf(path, sizeof path, "%s/%s.safetensors", dir, split);
	snprintf(c->path, sizeof c->path, "%s", path);
	struct sb_tensors ts;
	SB_TRY(sb_st_read_checked(path, 0, c->sha256, &ts, err));
	const char *fmt = sb_tensors_meta(&ts, "format"), *sp = sb_tensors_meta(&ts, "split");
	const struct sb_tensor *t = sb_tensors_find(&ts, "bytes");
	int rc = 0;
	if (!fmt || strcmp(fmt, "sparsebench.corpus"))
		rc = SB_ERR(err, SB_EDATA, "%s: not a sparsebench corpus (metadata 'format')", path);
	else if (!sp || strcmp(sp, split))
		rc = SB_ERR(err, SB_EDATA, "%s: metadata says split '%s', expected '%s'", path, sp ? sp : "", split);
	else if (!t || t->dtype != SB_U8 || t->ndim != 1)
		rc = SB_ERR(err, SB_EDATA, "%s: tensor 'bytes' (U8, one dimension) missing", path);
	if (!rc) {
		c->n = c->total = (size_t)t->shape[0];
		c->file_bytes = sb_file_size(path); /* the file hashed, not its tensor */
		c->offset = 0;
		snprintf(c->split, sizeof c->split, "%s", split);
		c->bytes = malloc(c->n ? c->n : 1);
		if (!c->bytes)
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		else
			memcpy(c->bytes, t->data, c->n);
	}
	sb_tensors_free(&ts);
	return rc;
}

int sb_lm_corpus_read(const char *spec, const char *split, struct sb_lm_corpus *c, struct sb_err *err)
{
	memset(c, 0, sizeof *c);
	const char *eq = strchr(spec, '=');
	const char *path = eq ? eq + 1 : spec;
	if (eq) {
		size_t L = (size_t)(eq - spec);
		if (L == 0 || L >= sizeof c->name)
			return SB_ERR(err, SB_EUSAGE, "bad corpus name in '%s'", spec);
		memcpy(c->name, spec, L);
		c->name[L] = 0;
	} else {
		base_name(c->name, sizeof c->name, path);
	}
	snprintf(c->path, sizeof c->path, "%s", path);
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (!eq) { /* name a directory after itself */
			const char *b = strrchr(path, '/');
			snprintf(c->name, sizeof c->name, "%s", b && b[1] ? b + 1 : path);
		}
		return read_fetch_dir(c, path, split, err);
	}
	if (strcmp(split, "test") == 0)
		return cut(c, NULL, 0, split, err);
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) /* a device or pipe: read twice, or never ends */
		return SB_ERR(err, SB_EDATA, "%s: not a regular file (a corpus is read twice: hashed, then cut)", path);
	SB_TRY(sb_sha256_file(path, c->sha256, &c->file_bytes, err));
	uint8_t *all = NULL;
	size_t total = 0;
	SB_TRY(read_text(path, &all, &total, err));
	/* a test dataset or corpus file given by its path (or renamed, linked, compressed) is
	 * test data all the same: refused, as the corpus directory's test part is */
	if (sb_bytes_are_test_split(all, total)) {
		free(all);
		return SB_ERR(err, SB_EVERDICT,
			      "%s: a file whose safetensors metadata says split=test: refusing to read it as a corpus "
			      "(only sb-test reads test data)",
			      path);
	}
	if (total == 0) { /* nothing to train on or cut from (later: a probe without a haystack) */
		free(all);
		return SB_ERR(err, SB_EDATA, "%s: empty corpus", path);
	}
	return cut(c, all, total, split, err);
}

int sb_lm_corpus_from(struct sb_lm_corpus *c, const char *name, const void *bytes, size_t n, struct sb_err *err)
{
	memset(c, 0, sizeof *c);
	snprintf(c->name, sizeof c->name, "%s", name);
	snprintf(c->path, sizeof c->path, "<memory>");
	snprintf(c->split, sizeof c->split, "all");
	c->bytes = malloc(n ? n : 1);
	if (!c->bytes)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	memcpy(c->bytes, bytes, n);
	c->n = c->total = n;
	c->file_bytes = n;
	sb_sha256_buf(bytes, n, c->sha256);
	return 0;
}

/* ---- mixture ---- */

static int add_item(struct sb_lm_mix *m, const char *name, int corpus, int task, double w, struct sb_err *err)
{
	if (m->n == SB_LM_MIX_MAX)
		return SB_ERR(err, SB_EUSAGE, "too many mixture items (at most %d)", SB_LM_MIX_MAX);
	for (int i = 0; i < m->n; i++)
		if (strcmp(m->item[i].name, name) == 0)
			return SB_ERR(err, SB_EUSAGE, "mixture item '%s' given twice", name);
	struct sb_lm_mix_item *it = &m->item[m->n++];
	snprintf(it->name, sizeof it->name, "%s", name);
	it->corpus = corpus;
	it->task = task;
	it->weight = w;
	return 0;
}

int sb_lm_mix_parse(struct sb_lm_mix *m, const char *spec, const struct sb_lm_corpus *corpora, int n_corpora,
		    const char *haystack, uint64_t seed, int T, struct sb_err *err)
{
	memset(m, 0, sizeof *m);
	m->seed = seed;
	m->T = T;
	m->corpora = corpora;
	m->n_corpora = n_corpora;
	m->haystack = -1;
	if (n_corpora < 1)
		return SB_ERR(err, SB_EUSAGE, "the mixture needs at least one corpus");
	if (!haystack)
		m->haystack = 0;
	for (int i = 0; i < n_corpora && haystack; i++)
		if (strcmp(corpora[i].name, haystack) == 0)
			m->haystack = i;
	if (m->haystack < 0)
		return SB_ERR(err, SB_EUSAGE, "haystack corpus '%s' is not among the corpora", haystack);
	char *dup = strdup(spec), *save = NULL;
	if (!dup)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = 0;
	for (char *tok = strtok_r(dup, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		double w = 1;
		if (eq) {
			*eq = 0;
			char *end;
			w = strtod(eq + 1, &end);
			if (end == eq + 1 || *end || !(w >= 0) || !isfinite(w)) {
				rc = SB_ERR(err, SB_EUSAGE, "bad mixture weight for '%s': '%s'", tok, eq + 1);
				break;
			}
		}
		if (strcmp(tok, "retrieval") == 0) {
			double tot = 0;
			for (int t = 0; t < SB_LM_NTASKS; t++)
				tot += sb_lm_task_weight(t);
			for (int t = 0; t < SB_LM_NTASKS && !rc; t++)
				rc = add_item(m, sb_lm_task_name(t), -1, t, w * sb_lm_task_weight(t) / tot, err);
			continue;
		}
		int task = sb_lm_task_parse(tok), corpus = -1;
		for (int i = 0; i < n_corpora; i++)
			if (strcmp(corpora[i].name, tok) == 0)
				corpus = i;
		if (task < 0 && corpus < 0) {
			rc = SB_ERR(err, SB_EUSAGE, "mixture item '%s' is neither a corpus nor a retrieval task", tok);
			break;
		}
		if (task >= 0 && T + 1 < sb_lm_task_min_len(task)) {
			rc = SB_ERR(err, SB_EUSAGE, "task %s needs T+1 >= %d", tok, sb_lm_task_min_len(task));
			break;
		}
		if (corpus >= 0 && corpora[corpus].n < (size_t)T + 1) {
			rc = SB_ERR(err, SB_EUSAGE, "corpus %s has %zu bytes, fewer than T+1 = %d", tok,
				    corpora[corpus].n, T + 1);
			break;
		}
		rc = add_item(m, tok, corpus, task, w, err);
	}
	free(dup);
	if (rc)
		return rc;
	double tot = 0;
	for (int i = 0; i < m->n; i++)
		tot += m->item[i].weight;
	if (m->n == 0 || !(tot > 0))
		return SB_ERR(err, SB_EUSAGE, "the mixture '%s' has no item with a positive weight", spec);
	for (int i = 0; i < m->n; i++)
		m->item[i].weight /= tot;
	return sb_lm_mix_check_len(m, T, spec, err);
}

/* The tasks whose probes cut their haystack from the essay corpus (lm_probe.h): they need
 * n_hay >= len. kv_recall and qa_recall fall back to noise on a short haystack. */
static int essay_task(int task)
{
	return task == SB_LM_NIAH_SINGLE_2 || task == SB_LM_NIAH_SINGLE_3 || task == SB_LM_NIAH_MULTIKEY_1 ||
	       task == SB_LM_NIAH_MULTIVALUE || task == SB_LM_NIAH_MULTIQUERY || task == SB_LM_QA_1;
}

int sb_lm_mix_check_len(const struct sb_lm_mix *m, int T, const char *spec, struct sb_err *err)
{
	int fits = 0;
	const struct sb_lm_corpus *h = &m->corpora[m->haystack];
	for (int i = 0; i < m->n; i++) {
		const struct sb_lm_mix_item *it = &m->item[i];
		if (!(it->weight > 0) || (it->task >= 0 && sb_lm_task_min_len(it->task) > T + 1))
			continue;
		fits = 1;
		if (it->task >= 0 && essay_task(it->task) && h->n < (size_t)T + 1)
			return SB_ERR(err, SB_EUSAGE,
				      "haystack corpus %s has %zu bytes, fewer than T+1 = %d that task %s needs for its essay",
				      h->name, h->n, T + 1, it->name);
	}
	if (!fits)
		return SB_ERR(err, SB_EUSAGE, "no item of the mixture '%s' with a positive weight fits a context of %d", spec,
			      T);
	return 0;
}

int sb_lm_mix_sample(const struct sb_lm_mix *m, uint64_t index, uint8_t *out, int *item, struct sb_err *err)
{
	return sb_lm_mix_sample_len(m, index, m->T, out, item, err);
}

int sb_lm_mix_sample_len(const struct sb_lm_mix *m, uint64_t index, int T, uint8_t *out, int *item,
			 struct sb_err *err)
{
	struct sb_rng r;
	sb_rng_init(&r, m->seed, SB_RNG_DATA, index);
	int k = m->n - 1;
	for (int tries = 0;; tries++) {
		double u = sb_rng_uniform(&r), acc = 0;
		k = m->n - 1;
		for (int i = 0; i < m->n; i++) {
			acc += m->item[i].weight;
			if (u < acc) {
				k = i;
				break;
			}
		}
		while (k > 0 && m->item[k].weight == 0)
			k--;
		if (m->item[k].task < 0 || sb_lm_task_min_len(m->item[k].task) <= T + 1)
			break;
		if (tries == 1000)
			return SB_ERR(err, SB_EUSAGE, "no mixture item fits a context of %d", T);
	}
	if (item)
		*item = k;
	const struct sb_lm_mix_item *it = &m->item[k];
	if (it->corpus >= 0) {
		const struct sb_lm_corpus *c = &m->corpora[it->corpus];
		size_t start = (size_t)sb_rng_below(&r, (uint64_t)(c->n - (size_t)T));
		memcpy(out, c->bytes + start, (size_t)T + 1);
		return 0;
	}
	const struct sb_lm_corpus *h = &m->corpora[m->haystack];
	struct sb_lm_probe p;
	/* the probe's own draws: purpose SB_RNG_DATA, seed mixed with the index word */
	SB_TRY(sb_lm_probe_make(it->task, T + 1, h->bytes, h->n, m->seed ^ 0x6c6d6d6978ull, SB_RNG_DATA, index, -1, &p,
				err));
	memcpy(out, p.text, (size_t)T + 1);
	sb_lm_probe_free(&p);
	return 0;
}

void sb_lm_mix_json(struct sb_jw *w, const struct sb_lm_mix *m)
{
	sb_jw_obj(w);
	sb_jw_kint(w, "seed", (int64_t)m->seed);
	sb_jw_kint(w, "T", m->T);
	sb_jw_kstr(w, "haystack", m->corpora[m->haystack].name);
	sb_jw_key(w, "items");
	sb_jw_arr(w);
	for (int i = 0; i < m->n; i++) {
		sb_jw_obj(w);
		sb_jw_kstr(w, "name", m->item[i].name);
		sb_jw_kstr(w, "kind", m->item[i].corpus >= 0 ? "corpus" : "task");
		sb_jw_kf64(w, "weight", m->item[i].weight);
		sb_jw_obj_end(w);
	}
	sb_jw_arr_end(w);
	sb_jw_key(w, "corpora");
	sb_jw_arr(w);
	for (int i = 0; i < m->n_corpora; i++) {
		const struct sb_lm_corpus *c = &m->corpora[i];
		sb_jw_obj(w);
		sb_jw_kstr(w, "name", c->name);
		sb_jw_kstr(w, "path", c->path);
		sb_jw_kstr(w, "split", c->split);
		sb_jw_kstr(w, "sha256", c->sha256);
		sb_jw_kint(w, "file_bytes", (int64_t)c->file_bytes);
		sb_jw_kint(w, "text_bytes", (int64_t)c->total);
		sb_jw_kint(w, "offset", (int64_t)c->offset);
		sb_jw_kint(w, "bytes", (int64_t)c->n);
		sb_jw_obj_end(w);
	}
	sb_jw_arr_end(w);
	sb_jw_obj_end(w);
}
