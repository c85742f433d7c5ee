/* select.c — best epoch under patience, the top-k ratio rule, canonical-JSON
 * hashing, pretty JSON, relative paths (see select.h). */
#include "select.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

const char *const sb_topk_methods[3] = {"topk_softmax_0125", "topk_softmax_025", "topk_softmax_05"};
const char *const sb_test_methods[4] = {"softmax", "sparsemax", "entmax15", "headwise_adaptive_entmax"};

int sb_select_best_epoch(const double *acc, int n, int patience, int *best, int *epochs_run, struct sb_err *err)
{
	if (n < 1)
		return SB_ERR(err, SB_EDATA, "no epochs to select from");
	double best_acc = -1.0;
	int b = -1, wait = 0, run = n;
	for (int e = 0; e < n; e++) {
		if (acc[e] > best_acc) { /* NaN compares false: never an improvement */
			best_acc = acc[e];
			b = e;
			wait = 0;
		} else {
			wait++;
		}
		if (patience > 0 && wait >= patience) {
			run = e + 1;
			break;
		}
	}
	if (b < 0)
		return SB_ERR(err, SB_EDATA, "no epoch has a finite validation accuracy");
	*best = b;
	if (epochs_run)
		*epochs_run = run;
	return 0;
}

/* ---- the top-k rule ---- */

static int cmp_cell(const void *a, const void *b)
{
	const struct sb_sel_cell *x = *(const struct sb_sel_cell *const *)a, *y = *(const struct sb_sel_cell *const *)b;
	int c = strcmp(x->task, y->task);
	if (c)
		return c;
	c = strcmp(x->method, y->method);
	if (c)
		return c;
	return (x->seed > y->seed) - (x->seed < y->seed);
}

void sb_selection_free(struct sb_selection *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_cands; i++) {
		free(s->cands[i].task);
		free(s->cands[i].method);
		free(s->cands[i].seeds);
	}
	for (size_t i = 0; i < s->n_tasks; i++)
		free(s->tasks[i].task);
	free(s->cands);
	free(s->tasks);
	memset(s, 0, sizeof *s);
}

int sb_select_topk(const struct sb_sel_cell *cells, size_t n, const char *const *methods, int n_methods, int min_seeds,
                   struct sb_selection *out, struct sb_err *err)
{
	memset(out, 0, sizeof *out);
	/* the cells of the rule's methods, sorted by (task, method, seed) */
	const struct sb_sel_cell **v = malloc((n ? n : 1) * sizeof *v);
	if (!v)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		for (int j = 0; j < n_methods; j++)
			if (strcmp(cells[i].method, methods[j]) == 0) {
				v[m++] = &cells[i];
				break;
			}
	qsort(v, m, sizeof *v, cmp_cell);
	for (size_t i = 1; i < m; i++)
		if (cmp_cell(&v[i - 1], &v[i]) == 0) {
			int rc = SB_ERR(err, SB_EDATA, "two cells for task %s, method %s, seed %lld", v[i]->task,
			                v[i]->method, (long long)v[i]->seed);
			free(v);
			return rc;
		}
	/* tasks */
	size_t cap_t = 0;
	for (size_t i = 0; i < m; i++)
		if (i == 0 || strcmp(v[i - 1]->task, v[i]->task) != 0)
			cap_t++;
	out->tasks = calloc(cap_t ? cap_t : 1, sizeof *out->tasks);
	out->cands = calloc(cap_t * (size_t)n_methods + 1, sizeof *out->cands);
	if (!out->tasks || !out->cands) {
		free(v);
		sb_selection_free(out);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	size_t i = 0;
	while (i < m) {
		size_t t_end = i;
		while (t_end < m && strcmp(v[t_end]->task, v[i]->task) == 0)
			t_end++;
		struct sb_sel_task *t = &out->tasks[out->n_tasks++];
		t->task = strdup(v[i]->task);
		t->chosen = -1;
		t->reason = "no top-k ratio has enough seeds";
		double best = -INFINITY;
		/* candidates in the rule's order of methods: the strict > keeps the earlier on ties */
		for (int j = 0; j < n_methods; j++) {
			size_t a = i, k = 0;
			while (a < t_end && strcmp(v[a]->method, methods[j]) != 0)
				a++;
			size_t b = a;
			while (b < t_end && strcmp(v[b]->method, methods[j]) == 0)
				b++;
			if (a == b)
				continue;
			struct sb_sel_cand *c = &out->cands[out->n_cands++];
			c->task = strdup(v[i]->task);
			c->method = strdup(methods[j]);
			c->n_seeds = (int)(b - a);
			c->seeds = malloc((b - a) * sizeof *c->seeds);
			if (!t->task || !c->task || !c->method || !c->seeds) {
				free(v);
				sb_selection_free(out);
				return SB_ERR(err, SB_EINTERNAL, "out of memory");
			}
			double sum = 0;
			for (size_t q = a; q < b; q++, k++) {
				c->seeds[k] = v[q]->seed;
				sum += v[q]->val_accuracy;
			}
			c->val_accuracy = sum / (double)c->n_seeds;
			c->eligible = c->n_seeds >= min_seeds;
			if (c->eligible && !isfinite(c->val_accuracy)) {
				c->eligible = 0;
				if (t->chosen < 0)
					t->reason = "a validation accuracy is not finite";
			}
			if (c->eligible && c->val_accuracy > best) {
				best = c->val_accuracy;
				t->chosen = (int)(out->n_cands - 1);
				t->reason = NULL;
			}
		}
		i = t_end;
	}
	free(v);
	return 0;
}

/* ---- canonical hash ---- */

int sb_json_canonical_sha256(const struct sb_json *v, const char *omit_key, char hex[SB_SHA256_HEX], struct sb_err *err)
{
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	if (v && v->type == SB_JSON_OBJECT && omit_key) {
		/* a shallow copy of the object without the omitted members */
		struct sb_json copy = *v;
		copy.keys = malloc((v->n ? v->n : 1) * sizeof *copy.keys);
		copy.items = malloc((v->n ? v->n : 1) * sizeof *copy.items);
		if (!copy.keys || !copy.items) {
			free(copy.keys);
			free(copy.items);
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		}
		copy.n = 0;
		for (size_t i = 0; i < v->n; i++)
			if (strcmp(v->keys[i], omit_key) != 0) {
				copy.keys[copy.n] = v->keys[i];
				copy.items[copy.n++] = v->items[i];
			}
		sb_jw_canonical(&w, &copy);
		free(copy.keys);
		free(copy.items);
	} else {
		sb_jw_canonical(&w, v);
	}
	if (w.oom) {
		sb_jw_free(&w);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	sb_sha256_buf(w.buf, w.len, hex);
	sb_jw_free(&w);
	return 0;
}

/* ---- pretty printing ---- */

struct buf {
	char *p;
	size_t len, cap;
	int oom;
};

static void bput(struct buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t c = b->cap ? b->cap : 256;
		while (c < b->len + n + 1)
			c *= 2;
		char *q = realloc(b->p, c);
		if (!q) {
			b->oom = 1;
			return;
		}
		b->p = q;
		b->cap = c;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

static void newline(struct buf *b, int depth, int indent)
{
	bput(b, "\n", 1);
	for (int i = 0; i < depth * indent; i++)
		bput(b, " ", 1);
}

char *sb_json_pretty(const char *s, size_t len, int indent)
{
	struct buf b = {0};
	int depth = 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '"') {
			size_t j = i + 1;
			while (j < len && s[j] != '"')
				j += s[j] == '\\' ? 2 : 1;
			if (j >= len)
				j = len - 1;
			bput(&b, s + i, j - i + 1);
			i = j;
		} else if (c == '{' || c == '[') {
			char close = c == '{' ? '}' : ']';
			if (i + 1 < len && s[i + 1] == close) { /* empty container stays on one line */
				bput(&b, s + i, 2);
				i++;
				continue;
			}
			bput(&b, &c, 1);
			newline(&b, ++depth, indent);
		} else if (c == '}' || c == ']') {
			newline(&b, --depth, indent);
			bput(&b, &c, 1);
		} else if (c == ',') {
			bput(&b, ",", 1);
			newline(&b, depth, indent);
		} else if (c == ':') {
			bput(&b, ": ", 2);
		} else if (c != '\n') {
			bput(&b, &c, 1);
		}
	}
	bput(&b, "\n", 1);
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	return b.p;
}

/* ---- paths ---- */

char *sb_path_dirname(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

/* target made absolute and canonical but for its last component, which stays as named (a
 * symbolic link is not followed: the file is where it was named, beside its run's other files) */
static int canonical_keep_name(const char *target, char tgt[PATH_MAX], struct sb_err *err)
{
	struct stat st;
	const char *slash = strrchr(target, '/'), *name = slash ? slash + 1 : target;
	if (stat(target, &st))
		return SB_ERRNO(err, target);
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) /* no name to keep */
		return realpath(target, tgt) ? 0 : SB_ERRNO(err, target);
	char *dir = sb_path_dirname(target), parent[PATH_MAX];
	if (!dir)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int ok = realpath(dir, parent) != NULL;
	free(dir);
	if (!ok)
		return SB_ERRNO(err, target);
	if ((size_t)snprintf(tgt, PATH_MAX, "%s%s%s", parent, strcmp(parent, "/") ? "/" : "", name) >= PATH_MAX)
		return SB_ERR(err, SB_EIO, "%s: path too long", target);
	return 0;
}

int sb_path_relative(const char *base_dir, const char *target, char **out, struct sb_err *err)
{
	char base[PATH_MAX], tgt[PATH_MAX];
	if (!realpath(base_dir, base))
		return SB_ERRNO(err, base_dir);
	SB_TRY(canonical_keep_name(target, tgt, err));
	/* longest common prefix ending at a path component boundary */
	size_t common = 0, i = 0;
	for (;; i++) {
		char a = base[i], t = tgt[i];
		if ((a == '/' || a == 0) && (t == '/' || t == 0))
			common = i;
		if (a == 0 || t == 0 || a != t)
			break;
	}
	int ups = 0;
	const char *rest_base = strcmp(base, "/") == 0 ? "" : base + common;
	if (*rest_base) {
		ups = 1;
		for (const char *p = rest_base + 1; *p; p++)
			ups += *p == '/';
	}
	const char *rest = tgt + common;
	if (*rest == '/')
		rest++;
	size_t n = (size_t)ups * 3 + strlen(rest) + 2;
	char *r = malloc(n);
	if (!r)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	r[0] = 0;
	for (int u = 0; u < ups; u++)
		strcat(r, "../");
	strcat(r, rest);
	size_t rl = strlen(r);
	if (rl == 0)
		strcpy(r, ".");
	else if (r[rl - 1] == '/')
		r[rl - 1] = 0;
	*out = r;
	return 0;
}
