/* json.c — NDJSON reader (yajl behind this file only) and writer. */
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

/* ---------------------------------------------------------------- values */

void sb_json_free(struct sb_json *v)
{
	if (!v)
		return;
	free(v->text);
	for (size_t i = 0; i < v->n; i++) {
		if (v->keys)
			free(v->keys[i]);
		sb_json_free(v->items[i]);
	}
	free(v->keys);
	free(v->items);
	free(v);
}

/* the number's text is an integer: an optional '-' and digits only */
static int integer_text(const char *t)
{
	t += *t == '-';
	if (!*t)
		return 0;
	for (; *t; t++)
		if (*t < '0' || *t > '9')
			return 0;
	return 1;
}

/* sb_json_equal of two numbers: integers written as integers compare as written (any
 * magnitude; -0 is 0); an exact int64 and a number written otherwise are equal when the
 * latter's double is that integer exactly; otherwise the doubles, and non-finite ones
 * (beyond double range) as written */
static int same_number(const struct sb_json *a, const struct sb_json *b)
{
	int ia = integer_text(a->text), ib = integer_text(b->text);
	if (ia && ib) {
		const char *x = strcmp(a->text, "-0") ? a->text : "0", *y = strcmp(b->text, "-0") ? b->text : "0";
		return strcmp(x, y) == 0;
	}
	int64_t v;
	if (ia || ib) {
		const struct sb_json *i = ia ? a : b, *o = ia ? b : a;
		double d = o->number;
		if (sb_json_int64(i, &v))
			return 0; /* an integer beyond int64 against a fraction or an exponent form */
		return d == trunc(d) && fabs(d) < 9.2e18 && (int64_t)d == v && (double)v == d;
	}
	if (!isfinite(a->number) || !isfinite(b->number))
		return strcmp(a->text, b->text) == 0;
	return a->number == b->number;
}

int sb_json_equal(const struct sb_json *a, const struct sb_json *b)
{
	if (!a || !b)
		return a == b;
	if (a->type != b->type)
		return 0;
	switch (a->type) {
	case SB_JSON_NULL:
		return 1;
	case SB_JSON_BOOL:
		return !a->boolean == !b->boolean;
	case SB_JSON_NUMBER:
		return same_number(a, b);
	case SB_JSON_STRING:
		return a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
	case SB_JSON_ARRAY:
		if (a->n != b->n)
			return 0;
		for (size_t i = 0; i < a->n; i++)
			if (!sb_json_equal(a->items[i], b->items[i]))
				return 0;
		return 1;
	case SB_JSON_OBJECT:
		if (a->n != b->n) /* keys are unique (the parser refuses a key twice) */
			return 0;
		for (size_t i = 0; i < a->n; i++)
			if (!sb_json_equal(a->items[i], sb_json_get(b, a->keys[i])))
				return 0;
		return 1;
	}
	return 0;
}

const struct sb_json *sb_json_get(const struct sb_json *obj, const char *key)
{
	if (!obj || obj->type != SB_JSON_OBJECT)
		return NULL;
	for (size_t i = 0; i < obj->n; i++)
		if (strcmp(obj->keys[i], key) == 0)
			return obj->items[i];
	return NULL;
}

const char *sb_json_str(const struct sb_json *v, const char *def)
{
	return v && v->type == SB_JSON_STRING ? v->text : def;
}

double sb_json_num(const struct sb_json *v, double def)
{
	return v && v->type == SB_JSON_NUMBER ? v->number : def;
}

int sb_json_bool(const struct sb_json *v, int def) { return v && v->type == SB_JSON_BOOL ? v->boolean : def; }

int sb_json_int64(const struct sb_json *v, int64_t *out)
{
	if (!v || v->type != SB_JSON_NUMBER || !v->text)
		return SB_EDATA;
	const char *s = v->text;
	char *end;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (*end == 0 && errno == 0) {
		*out = x;
		return 0;
	}
	/* allow integral values written with a fraction or exponent, e.g. 3.0 or 1e3 */
	double d = v->number;
	if (isfinite(d) && d == floor(d) && fabs(d) <= 9007199254740992.0) {
		*out = (int64_t)d;
		return 0;
	}
	return SB_EDATA;
}

int sb_json_req_str(const struct sb_json *obj, const char *key, const char **out, struct sb_err *err)
{
	const struct sb_json *v = sb_json_get(obj, key);
	if (!v)
		return SB_ERR(err, SB_EDATA, "missing field '%s'", key);
	if (v->type != SB_JSON_STRING)
		return SB_ERR(err, SB_EDATA, "field '%s' must be a string", key);
	*out = v->text;
	return 0;
}

int sb_json_req_num(const struct sb_json *obj, const char *key, double *out, struct sb_err *err)
{
	const struct sb_json *v = sb_json_get(obj, key);
	if (!v)
		return SB_ERR(err, SB_EDATA, "missing field '%s'", key);
	if (v->type != SB_JSON_NUMBER)
		return SB_ERR(err, SB_EDATA, "field '%s' must be a number", key);
	*out = v->number;
	return 0;
}

int sb_json_req_int(const struct sb_json *obj, const char *key, int64_t *out, struct sb_err *err)
{
	const struct sb_json *v = sb_json_get(obj, key);
	if (!v)
		return SB_ERR(err, SB_EDATA, "missing field '%s'", key);
	if (sb_json_int64(v, out))
		return SB_ERR(err, SB_EDATA, "field '%s' must be an integer", key);
	return 0;
}

/* ---------------------------------------------------------------- parser */

struct builder {
	struct sb_json *root;
	struct sb_json *stack[256];
	int depth;
	char *pending_key; /* key waiting for its value */
	int oom, too_deep;
	char *dup_key;  /* an object key that appeared twice (owned) */
};

static struct sb_json *new_value(enum sb_json_type t)
{
	struct sb_json *v = calloc(1, sizeof *v);
	if (v)
		v->type = t;
	return v;
}

static int append_child(struct sb_json *parent, char *key, struct sb_json *child)
{
	size_t n = parent->n + 1;
	/* capacity is the next power of two >= count: grow when the old count is 0 or a power of two */
	if ((parent->n & (parent->n - 1)) == 0) {
		size_t cap = 1;
		while (cap < n)
			cap <<= 1;
		struct sb_json **items = realloc(parent->items, cap * sizeof *items);
		if (!items)
			return -1;
		parent->items = items;
		if (parent->type == SB_JSON_OBJECT) {
			char **keys = realloc(parent->keys, cap * sizeof *keys);
			if (!keys)
				return -1;
			parent->keys = keys;
		}
	}
	parent->items[parent->n] = child;
	if (parent->type == SB_JSON_OBJECT)
		parent->keys[parent->n] = key;
	parent->n = n;
	return 0;
}

static int add_value(struct builder *b, struct sb_json *v)
{
	if (!v) {
		b->oom = 1;
		return 0;
	}
	if (b->depth == 0) {
		b->root = v;
	} else {
		struct sb_json *parent = b->stack[b->depth - 1];
		char *key = NULL;
		if (parent->type == SB_JSON_OBJECT) {
			key = b->pending_key;
			b->pending_key = NULL;
		}
		if (append_child(parent, key, v)) {
			free(key);
			sb_json_free(v);
			b->oom = 1;
			return 0;
		}
	}
	if (v->type == SB_JSON_ARRAY || v->type == SB_JSON_OBJECT) {
		if (b->depth >= (int)(sizeof b->stack / sizeof b->stack[0])) {
			b->too_deep = 1;
			return 0;
		}
		b->stack[b->depth++] = v;
	}
	return 1;
}

static int cb_null(void *ctx) { return add_value(ctx, new_value(SB_JSON_NULL)); }

static int cb_bool(void *ctx, int x)
{
	struct sb_json *v = new_value(SB_JSON_BOOL);
	if (v)
		v->boolean = x;
	return add_value(ctx, v);
}

static int cb_number(void *ctx, const char *s, size_t n)
{
	struct sb_json *v = new_value(SB_JSON_NUMBER);
	if (v) {
		v->text = malloc(n + 1);
		if (!v->text) {
			free(v);
			return add_value(ctx, NULL);
		}
		memcpy(v->text, s, n);
		v->text[n] = 0;
		v->number = strtod(v->text, NULL); /* JSON numbers use '.', as the C locale */
	}
	return add_value(ctx, v);
}

static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
	struct sb_json *v = new_value(SB_JSON_STRING);
	if (v) {
		v->text = malloc(n + 1);
		if (!v->text) {
			free(v);
			return add_value(ctx, NULL);
		}
		memcpy(v->text, s, n);
		v->text[n] = 0;
		v->len = n;
	}
	return add_value(ctx, v);
}

static int cb_start_map(void *ctx) { return add_value(ctx, new_value(SB_JSON_OBJECT)); }
static int cb_start_array(void *ctx) { return add_value(ctx, new_value(SB_JSON_ARRAY)); }

static int cb_map_key(void *ctx, const unsigned char *s, size_t n)
{
	struct builder *b = ctx;
	free(b->pending_key);
	b->pending_key = malloc(n + 1);
	if (!b->pending_key) {
		b->oom = 1;
		return 0;
	}
	memcpy(b->pending_key, s, n);
	b->pending_key[n] = 0;
	return 1;
}

static int cmp_key(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A key twice in one object is refused: readers take the first (sb_json_get), Python's
 * json the last, so the same line would mean two different things. Sorted copy of the
 * key pointers: O(n log n) for objects of any size. */
static int check_dup_keys(struct builder *b, const struct sb_json *o)
{
	if (o->n < 2)
		return 1;
	char **k = malloc(o->n * sizeof *k);
	if (!k) {
		b->oom = 1;
		return 0;
	}
	memcpy(k, o->keys, o->n * sizeof *k);
	qsort(k, o->n, sizeof *k, cmp_key);
	int ok = 1;
	for (size_t i = 1; i < o->n && ok; i++)
		if (strcmp(k[i - 1], k[i]) == 0) {
			b->dup_key = strdup(k[i]);
			if (!b->dup_key)
				b->oom = 1;
			ok = 0;
		}
	free(k);
	return ok;
}

static int cb_end_map(void *ctx)
{
	struct builder *b = ctx;
	const struct sb_json *o = b->stack[--b->depth];
	return check_dup_keys(b, o);
}

static int cb_end(void *ctx)
{
	struct builder *b = ctx;
	b->depth--;
	return 1;
}

static const yajl_callbacks callbacks = {
	cb_null, cb_bool, NULL, NULL, cb_number, cb_string,
	cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end,
};

static int hex4(const char *s, size_t len, size_t i, unsigned *out)
{
	if (i + 4 > len)
		return 0;
	unsigned v = 0;
	for (size_t k = i; k < i + 4; k++) {
		unsigned c = (unsigned char)s[k], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			d = (c | 0x20) - 'a' + 10;
		else
			return 0;
		v = v << 4 | d;
	}
	*out = v;
	return 1;
}

/* Where the 1-based byte offset at1 of s lies, for a message: "column N" in a text of one line
 * (an NDJSON line: the callers name the file and line), "line L, column C" (C in bytes) in a
 * text of several (a whole JSON file: config.json, tokenizer.json). */
static const char *json_pos(const char *s, size_t len, size_t at1, char *buf, size_t cap)
{
	size_t line = 1, start = 0, end = at1 ? at1 - 1 : 0;
	for (size_t i = 0; i < end && i < len; i++)
		if (s[i] == '\n') {
			line++;
			start = i + 1;
		}
	if (line == 1 && !memchr(s, '\n', len))
		snprintf(buf, cap, "column %zu", at1);
	else
		snprintf(buf, cap, "line %zu, column %zu", line, at1 - start);
	return buf;
}

/* The text must be UTF-8 as RFC 3629 defines it, and a \u escape must not stand for a lone
 * UTF-16 surrogate. yajl checks neither: it lets overlong forms, surrogates and code points
 * above U+10FFFF through in strings, turns an escaped lone high surrogate into '?' and a lone
 * low one into the three bytes of the surrogate, and joins a high one with any \u escape that
 * follows. Nor may a string or key hold NUL, raw or as \u0000: yajl decodes the escape to a
 * NUL byte, and our strings and keys are C strings, so "a\u0000b" would silently read as "a".
 * Checked here, before yajl, so that every string and key it gives back is valid UTF-8 without
 * NUL. Returns 0, or SB_EDATA with "column C: what" (C: 1-based byte offset in buf). A text
 * that is not JSON may pass (yajl refuses it next). */
static int check_text(const char *s, size_t len, struct sb_err *err)
{
	char pos[64];
	size_t bad = sb_utf8_check(s, len);
	if (bad != (size_t)-1)
		return SB_ERR(err, SB_EDATA, "%s: invalid UTF-8", json_pos(s, len, bad + 1, pos, sizeof pos));
	const char *nul = memchr(s, 0, len);
	if (nul)
		return SB_ERR(err, SB_EDATA, "%s: NUL byte", json_pos(s, len, (size_t)(nul - s) + 1, pos, sizeof pos));
	int in_str = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '"') {
			in_str = !in_str;
		} else if (in_str && s[i] == '\\' && i + 1 < len) {
			unsigned hi, lo;
			if (s[i + 1] != 'u' || !hex4(s, len, i + 2, &hi)) {
				i++; /* a one-character escape (or a bad one: yajl's to refuse) */
				continue;
			}
			if (hi == 0)
				return SB_ERR(err, SB_EDATA, "%s: \\u%.4s (NUL) is not allowed in a string or key",
					      json_pos(s, len, i + 1, pos, sizeof pos), s + i + 2);
			if (hi >= 0xD800 && hi <= 0xDBFF) {
				if (i + 7 < len && s[i + 6] == '\\' && s[i + 7] == 'u' && hex4(s, len, i + 8, &lo) &&
				    lo >= 0xDC00 && lo <= 0xDFFF) {
					i += 11;
					continue;
				}
			} else if (hi < 0xDC00 || hi > 0xDFFF) {
				i += 5;
				continue;
			}
			return SB_ERR(err, SB_EDATA, "%s: \\u%.4s is a lone UTF-16 surrogate, which has no UTF-8 form",
				      json_pos(s, len, i + 1, pos, sizeof pos), s + i + 2);
		}
	}
	return 0;
}

int sb_json_parse(const char *buf, size_t len, struct sb_json **out, struct sb_err *err)
{
	struct builder b = {0};
	*out = NULL;
	SB_TRY(check_text(buf, len, err));
	yajl_handle h = yajl_alloc(&callbacks, NULL, &b);
	if (!h)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	/* strict: no comments, validate UTF-8, one value only */
	yajl_config(h, yajl_allow_comments, 0);
	yajl_config(h, yajl_dont_validate_strings, 0);
	yajl_status st = yajl_parse(h, (const unsigned char *)buf, len);
	int incomplete = 0;
	if (st == yajl_status_ok) {
		st = yajl_complete_parse(h);
		incomplete = st != yajl_status_ok;
	}
	int rc = 0;
	char pos[64];
	if (b.oom) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	} else if (b.too_deep) {
		rc = SB_ERR(err, SB_EDATA, "JSON nested too deeply (limit 256)");
	} else if (b.dup_key) {
		rc = SB_ERR(err, SB_EDATA, "%s: duplicate key '%.200s'",
			    json_pos(buf, len, yajl_get_bytes_consumed(h), pos, sizeof pos), b.dup_key);
	} else if (incomplete) {
		rc = SB_ERR(err, SB_EDATA, "%s: incomplete JSON value (%s)", json_pos(buf, len, len + 1, pos, sizeof pos),
			    memchr(buf, '\n', len) ? "the text ends inside it" : "each line must hold one complete value");
	} else if (st != yajl_status_ok) {
		size_t at = yajl_get_bytes_consumed(h);
		unsigned char *m = yajl_get_error(h, 0, (const unsigned char *)buf, len);
		const char *msg = (const char *)m;
		/* yajl's messages start with "parse error: "; keep the detail */
		if (strncmp(msg, "parse error: ", 13) == 0)
			msg += 13;
		char detail[256];
		snprintf(detail, sizeof detail, "%s", msg);
		char *nl = strchr(detail, '\n');
		if (nl)
			*nl = 0;
		rc = SB_ERR(err, SB_EDATA, "%s: invalid JSON: %s", json_pos(buf, len, at ? at : 1, pos, sizeof pos), detail);
		yajl_free_error(h, m);
	} else if (!b.root) {
		rc = SB_ERR(err, SB_EDATA, "column 1: empty JSON value");
	}
	yajl_free(h);
	free(b.pending_key);
	free(b.dup_key);
	if (rc) {
		sb_json_free(b.root);
		return rc;
	}
	*out = b.root;
	return 0;
}

/* ---------------------------------------------------------------- UTF-8 */

size_t sb_utf8_check(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;
	while (i < len) {
		unsigned c = s[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t n;
		unsigned cp;
		if (c >= 0xC2 && c <= 0xDF) {
			n = 2;
			cp = c & 0x1F;
		} else if (c >= 0xE0 && c <= 0xEF) {
			n = 3;
			cp = c & 0x0F;
		} else if (c >= 0xF0 && c <= 0xF4) {
			n = 4;
			cp = c & 0x07;
		} else {
			return i;
		}
		if (i + n > len)
			return i;
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return i;
			cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
		    (cp >= 0xD800 && cp <= 0xDFFF))
			return i;
		i += n;
	}
	return (size_t)-1;
}

/* ---------------------------------------------------------------- reader */

struct sb_ndjson_reader {
	FILE *f;
	int own;
	char *name;
	char *buf;         /* read buffer */
	size_t bufsize, bpos, blen;
	char *line;        /* current line */
	size_t llen, lcap;
	long lineno;
	int eof;
	size_t max_line;   /* bytes before a line's LF (SB_NDJSON_LINE_MAX unless set) */
};

struct sb_ndjson_reader *sb_ndjson_open_file(FILE *f, const char *name, size_t bufsize)
{
	struct sb_ndjson_reader *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->f = f;
	r->bufsize = bufsize ? bufsize : 65536;
	r->max_line = SB_NDJSON_LINE_MAX;
	r->buf = malloc(r->bufsize);
	r->name = strdup(strcmp(name, "-") == 0 ? "<stdin>" : name);
	if (!r->buf || !r->name) {
		sb_ndjson_close(r);
		return NULL;
	}
	return r;
}

int sb_ndjson_open(const char *path, struct sb_ndjson_reader **out, struct sb_err *err)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	if (!f)
		return SB_ERRNO(err, path);
	struct sb_ndjson_reader *r = sb_ndjson_open_file(f, path, 0);
	if (!r) {
		if (f != stdin)
			fclose(f);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	r->own = f != stdin;
	*out = r;
	return 0;
}

void sb_ndjson_close(struct sb_ndjson_reader *r)
{
	if (!r)
		return;
	if (r->own && r->f)
		fclose(r->f);
	free(r->buf);
	free(r->line);
	free(r->name);
	free(r);
}

void sb_ndjson_set_max_line(struct sb_ndjson_reader *r, size_t max) { r->max_line = max ? max : SB_NDJSON_LINE_MAX; }

long sb_ndjson_line(const struct sb_ndjson_reader *r) { return r->lineno; }
const char *sb_ndjson_name(const struct sb_ndjson_reader *r) { return r->name; }

static int line_push(struct sb_ndjson_reader *r, const char *p, size_t n)
{
	if (r->llen + n + 1 > r->lcap) {
		size_t cap = r->lcap ? r->lcap : 256;
		while (cap < r->llen + n + 1)
			cap *= 2;
		if (cap > r->max_line + 1) /* never more than the longest line allowed */
			cap = r->max_line + 1;
		char *l = realloc(r->line, cap);
		if (!l)
			return -1;
		r->line = l;
		r->lcap = cap;
	}
	memcpy(r->line + r->llen, p, n);
	r->llen += n;
	return 0;
}

/* Read one raw line into r->line (without '\n'); 1 = got a line, 0 = EOF. */
static int read_line(struct sb_ndjson_reader *r, struct sb_err *err)
{
	r->llen = 0;
	int got = 0;
	for (;;) {
		if (r->bpos == r->blen) {
			if (r->eof)
				break;
			r->blen = fread(r->buf, 1, r->bufsize, r->f);
			r->bpos = 0;
			if (r->blen == 0) {
				if (ferror(r->f))
					return SB_ERR(err, SB_EIO, "%s:%ld: read error", r->name, r->lineno + 1);
				r->eof = 1;
				break;
			}
		}
		got = 1;
		char *start = r->buf + r->bpos;
		char *nl = memchr(start, '\n', r->blen - r->bpos);
		size_t n = nl ? (size_t)(nl - start) : r->blen - r->bpos;
		if (n > r->max_line - r->llen)
			return r->max_line % (1u << 20)
				       ? SB_ERR(err, SB_EDATA, "%s:%ld: line longer than %zu bytes (the limit of one record)",
						r->name, r->lineno + 1, r->max_line)
				       : SB_ERR(err, SB_EDATA, "%s:%ld: line longer than %zu MiB (the limit of one record)",
						r->name, r->lineno + 1, r->max_line >> 20);
		if (line_push(r, start, n))
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		r->bpos += n + (nl ? 1 : 0);
		if (nl)
			break;
	}
	if (!got)
		return 0;
	r->lineno++;
	if (r->llen && r->line[r->llen - 1] == '\r')
		r->llen--;
	r->line[r->llen] = 0;
	return 1;
}

int sb_ndjson_next_line(struct sb_ndjson_reader *r, const char **line, size_t *len, struct sb_err *err)
{
	for (;;) {
		int rc = read_line(r, err);
		if (rc < 0 || rc > 1)
			return rc;
		if (rc == 0) {
			*line = NULL;
			*len = 0;
			return 0;
		}
		if (rc != 1)
			return rc;
		const char *s = r->line;
		size_t n = r->llen;
		if (n >= 3 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF)
			return SB_ERR(err, SB_EDATA, "%s:%ld: byte-order mark not allowed", r->name, r->lineno);
		if (memchr(s, 0, n))
			return SB_ERR(err, SB_EDATA, "%s:%ld: NUL byte in line", r->name, r->lineno);
		size_t bad = sb_utf8_check(s, n);
		if (bad != (size_t)-1)
			return SB_ERR(err, SB_EDATA, "%s:%ld: column %zu: invalid UTF-8", r->name, r->lineno, bad + 1);
		size_t k = 0;
		while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r'))
			k++;
		if (k == n)
			continue; /* blank line */
		*line = s;
		*len = n;
		return 0;
	}
}

int sb_ndjson_next(struct sb_ndjson_reader *r, struct sb_json **out, struct sb_err *err)
{
	const char *line;
	size_t n;
	*out = NULL;
	int rc = sb_ndjson_next_line(r, &line, &n, err);
	if (rc)
		return rc;
	/* a read error after a line is reported by read_line with its own code */
	if (!line)
		return 0;
	rc = sb_json_parse(line, n, out, err);
	if (rc) {
		sb_err_prefix(err, "%s:%ld", r->name, r->lineno);
		return rc;
	}
	return 0;
}

/* ---------------------------------------------------------------- writer */

void sb_jw_init(struct sb_jw *w, FILE *out)
{
	memset(w, 0, sizeof *w);
	w->out = out;
}

void sb_jw_free(struct sb_jw *w)
{
	free(w->buf);
	w->buf = NULL;
	w->len = w->cap = 0;
}

void sb_jw_reset(struct sb_jw *w)
{
	w->len = 0;
	w->depth = 0;
	w->need_comma[0] = 0;
	w->oom = 0;
}

static void put(struct sb_jw *w, const char *s, size_t n)
{
	if (w->oom)
		return;
	if (w->len + n + 1 > w->cap) {
		size_t cap = w->cap ? w->cap : 256;
		while (cap < w->len + n + 1)
			cap *= 2;
		char *b = realloc(w->buf, cap);
		if (!b) {
			w->oom = 1;
			return;
		}
		w->buf = b;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = 0;
}

static void puts_(struct sb_jw *w, const char *s) { put(w, s, strlen(s)); }

static void str_body(struct sb_jw *w, const char *s, size_t n, int ascii_only);

/* Before a value: a comma if a sibling came first (a value after a key needs none). */
static void before_value(struct sb_jw *w)
{
	if (w->need_comma[w->depth] == 1)
		put(w, ",", 1);
	w->need_comma[w->depth] = 1;
}

void sb_jw_key(struct sb_jw *w, const char *key)
{
	if (w->need_comma[w->depth] == 1)
		put(w, ",", 1);
	str_body(w, key, strlen(key), 0);
	put(w, ":", 1);
	w->need_comma[w->depth] = 2; /* the value that follows adds no comma */
}

static void str_body(struct sb_jw *w, const char *s, size_t n, int ascii_only);

static void open_(struct sb_jw *w, char c)
{
	before_value(w);
	put(w, &c, 1);
	if (w->depth < 31)
		w->depth++;
	w->need_comma[w->depth] = 0;
}

static void close_(struct sb_jw *w, char c)
{
	put(w, &c, 1);
	if (w->depth > 0)
		w->depth--;
}

void sb_jw_obj(struct sb_jw *w) { open_(w, '{'); }
void sb_jw_obj_end(struct sb_jw *w) { close_(w, '}'); }
void sb_jw_arr(struct sb_jw *w) { open_(w, '['); }
void sb_jw_arr_end(struct sb_jw *w) { close_(w, ']'); }

static void str_body(struct sb_jw *w, const char *s, size_t n, int ascii_only)
{
	static const char hex[] = "0123456789abcdef";
	put(w, "\"", 1);
	size_t run = 0; /* start of a run of bytes copied verbatim */
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *esc = NULL;
		char ubuf[16];
		if (c == '"')
			esc = "\\\"";
		else if (c == '\\')
			esc = "\\\\";
		else if (c == '\n')
			esc = "\\n";
		else if (c == '\r')
			esc = "\\r";
		else if (c == '\t')
			esc = "\\t";
		else if (c == '\b')
			esc = "\\b";
		else if (c == '\f')
			esc = "\\f";
		else if (c < 0x20 || (c == 0x7f && ascii_only)) { /* ASCII-only as Python's: DEL too */
			snprintf(ubuf, sizeof ubuf, "\\u%04x", c);
			esc = ubuf;
		} else if (c >= 0x80 && ascii_only) {
			/* decode one UTF-8 sequence (input is valid UTF-8) into \uXXXX (surrogate pairs) */
			unsigned cp;
			size_t k;
			if (c >= 0xF0) {
				cp = c & 0x07;
				k = 3;
			} else if (c >= 0xE0) {
				cp = c & 0x0F;
				k = 2;
			} else {
				cp = c & 0x1F;
				k = 1;
			}
			for (size_t j = 0; j < k && i + 1 < n; j++)
				cp = (cp << 6) | ((unsigned char)s[++i] & 0x3F);
			put(w, s + run, i - k - run);
			if (cp >= 0x10000) {
				unsigned v = cp - 0x10000, hi = 0xD800 + (v >> 10), lo = 0xDC00 + (v & 0x3FF);
				char b[13] = {'\\', 'u', hex[hi >> 12], hex[(hi >> 8) & 15], hex[(hi >> 4) & 15], hex[hi & 15],
					      '\\', 'u', hex[lo >> 12], hex[(lo >> 8) & 15], hex[(lo >> 4) & 15], hex[lo & 15], 0};
				put(w, b, 12);
			} else {
				char b[7] = {'\\', 'u', hex[cp >> 12], hex[(cp >> 8) & 15], hex[(cp >> 4) & 15], hex[cp & 15], 0};
				put(w, b, 6);
			}
			run = i + 1;
			continue;
		}
		if (esc) {
			put(w, s + run, i - run);
			puts_(w, esc);
			run = i + 1;
		}
	}
	put(w, s + run, n - run);
	put(w, "\"", 1);
}

void sb_jw_strn(struct sb_jw *w, const char *s, size_t n)
{
	before_value(w);
	str_body(w, s, n, 0);
}

void sb_jw_str(struct sb_jw *w, const char *s)
{
	if (!s) {
		sb_jw_null(w);
		return;
	}
	sb_jw_strn(w, s, strlen(s));
}

void sb_jw_int(struct sb_jw *w, int64_t v)
{
	char b[32];
	before_value(w);
	snprintf(b, sizeof b, "%" PRId64, v);
	puts_(w, b);
}

void sb_jw_uint(struct sb_jw *w, uint64_t v)
{
	char b[32];
	before_value(w);
	snprintf(b, sizeof b, "%" PRIu64, v);
	puts_(w, b);
}

void sb_jw_bool(struct sb_jw *w, int v)
{
	before_value(w);
	puts_(w, v ? "true" : "false");
}

void sb_jw_null(struct sb_jw *w)
{
	before_value(w);
	puts_(w, "null");
}

/* Replace the locale's decimal point by '.', whatever LC_NUMERIC says. */
static void fix_decimal_point(char *buf)
{
	const char *dp = localeconv()->decimal_point;
	if (!dp || (dp[0] == '.' && dp[1] == 0))
		return;
	size_t dl = strlen(dp);
	char *p = strstr(buf, dp);
	if (p) {
		*p = '.';
		memmove(p + 1, p + dl, strlen(p + dl) + 1);
	}
}

static double parse_c_number(const char *s)
{
	/* strtod honours the locale too: parse with '.' replaced by the locale's point */
	const char *dp = localeconv()->decimal_point;
	if (!dp || (dp[0] == '.' && dp[1] == 0))
		return strtod(s, NULL);
	char tmp[64];
	size_t j = 0;
	for (size_t i = 0; s[i] && j + 8 < sizeof tmp; i++) {
		if (s[i] == '.') {
			for (size_t k = 0; dp[k]; k++)
				tmp[j++] = dp[k];
		} else {
			tmp[j++] = s[i];
		}
	}
	tmp[j] = 0;
	return strtod(tmp, NULL);
}

void sb_fmt_f32(char *buf, float v)
{
	if (!isfinite(v)) {
		strcpy(buf, isnan(v) ? "null" : "null");
		return;
	}
	for (int prec = 6; prec <= 9; prec++) {
		snprintf(buf, 32, "%.*g", prec, (double)v);
		fix_decimal_point(buf);
		if ((float)parse_c_number(buf) == v)
			return;
	}
}

void sb_fmt_f64(char *buf, double v)
{
	if (!isfinite(v)) {
		strcpy(buf, "null");
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, 32, "%.*g", prec, v);
		fix_decimal_point(buf);
		if (parse_c_number(buf) == v)
			return;
	}
}

void sb_unsign_zeros(double *const v[], size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (*v[i] == 0)
			*v[i] = 0;
}

void sb_jw_f32(struct sb_jw *w, float v)
{
	char b[40];
	before_value(w);
	sb_fmt_f32(b, v);
	puts_(w, b);
}

void sb_jw_f64(struct sb_jw *w, double v)
{
	char b[40];
	before_value(w);
	sb_fmt_f64(b, v);
	puts_(w, b);
}

void sb_jw_raw(struct sb_jw *w, const char *json, size_t n)
{
	before_value(w);
	put(w, json, n);
}

void sb_jw_value(struct sb_jw *w, const struct sb_json *v)
{
	if (!v) {
		sb_jw_null(w);
		return;
	}
	switch (v->type) {
	case SB_JSON_NULL: sb_jw_null(w); break;
	case SB_JSON_BOOL: sb_jw_bool(w, v->boolean); break;
	case SB_JSON_NUMBER: sb_jw_raw(w, v->text, strlen(v->text)); break;
	case SB_JSON_STRING: sb_jw_strn(w, v->text, v->len); break;
	case SB_JSON_ARRAY:
		sb_jw_arr(w);
		for (size_t i = 0; i < v->n; i++)
			sb_jw_value(w, v->items[i]);
		sb_jw_arr_end(w);
		break;
	case SB_JSON_OBJECT:
		sb_jw_obj(w);
		for (size_t i = 0; i < v->n; i++) {
			sb_jw_key(w, v->keys[i]);
			sb_jw_value(w, v->items[i]);
		}
		sb_jw_obj_end(w);
		break;
	}
}

static const char *nonfinite_name(double v) { return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

static void nonfinite_reason(struct sb_jw *w, const char *key, double v)
{
	char k[256];
	snprintf(k, sizeof k, "%s_nonfinite", key);
	sb_jw_key(w, k);
	sb_jw_str(w, nonfinite_name(v));
}

void sb_jw_kstr(struct sb_jw *w, const char *key, const char *s) { sb_jw_key(w, key); sb_jw_str(w, s); }
void sb_jw_kint(struct sb_jw *w, const char *key, int64_t v) { sb_jw_key(w, key); sb_jw_int(w, v); }
void sb_jw_kbool(struct sb_jw *w, const char *key, int v) { sb_jw_key(w, key); sb_jw_bool(w, v); }
void sb_jw_knull(struct sb_jw *w, const char *key) { sb_jw_key(w, key); sb_jw_null(w); }

void sb_jw_kf32(struct sb_jw *w, const char *key, float v)
{
	sb_jw_key(w, key);
	sb_jw_f32(w, v);
	if (!isfinite(v))
		nonfinite_reason(w, key, v);
}

void sb_jw_kf64(struct sb_jw *w, const char *key, double v)
{
	sb_jw_key(w, key);
	sb_jw_f64(w, v);
	if (!isfinite(v))
		nonfinite_reason(w, key, v);
}

void sb_jw_record(struct sb_jw *w, const char *kind, int v)
{
	sb_jw_obj(w);
	sb_jw_kstr(w, "kind", kind);
	sb_jw_kint(w, "v", v);
}

int sb_jw_line(struct sb_jw *w, struct sb_err *err)
{
	put(w, "\n", 1);
	if (w->oom) {
		sb_jw_reset(w);
		return SB_ERR(err, SB_EINTERNAL, "out of memory while writing a record");
	}
	int rc = 0;
	if (w->out) {
		if (fwrite(w->buf, 1, w->len, w->out) != w->len || fflush(w->out) != 0)
			rc = SB_ERRNO(err, "write error");
		sb_jw_reset(w);
	} else {
		w->depth = 0;
		w->need_comma[0] = 0;
	}
	return rc;
}

/* canonical JSON: sorted keys (by UTF-16 code units, as Python sorts str; for
 * keys in the BMP that equals code-point order, which byte order of UTF-8 gives
 * except for supplementary characters — those sort by byte here; documented). */
static int cmp_keys(const void *a, const void *b)
{
	const struct { const char *k; const struct sb_json *v; } *x = a, *y = b;
	return strcmp(x->k, y->k);
}

void sb_jw_canonical(struct sb_jw *w, const struct sb_json *v)
{
	if (!v) {
		sb_jw_null(w);
		return;
	}
	switch (v->type) {
	case SB_JSON_STRING:
		before_value(w);
		str_body(w, v->text, v->len, 1);
		break;
	case SB_JSON_ARRAY:
		sb_jw_arr(w);
		for (size_t i = 0; i < v->n; i++)
			sb_jw_canonical(w, v->items[i]);
		sb_jw_arr_end(w);
		break;
	case SB_JSON_OBJECT: {
		struct kv { const char *k; const struct sb_json *v; } *kv = malloc((v->n ? v->n : 1) * sizeof *kv);
		if (!kv) {
			w->oom = 1;
			return;
		}
		for (size_t i = 0; i < v->n; i++) {
			kv[i].k = v->keys[i];
			kv[i].v = v->items[i];
		}
		qsort(kv, v->n, sizeof *kv, cmp_keys);
		sb_jw_obj(w);
		for (size_t i = 0; i < v->n; i++) {
			before_value(w);
			str_body(w, kv[i].k, strlen(kv[i].k), 1);
			put(w, ":", 1);
			w->need_comma[w->depth] = 2;
			sb_jw_canonical(w, kv[i].v);
		}
		sb_jw_obj_end(w);
		free(kv);
		break;
	}
	default:
		sb_jw_value(w, v);
	}
}
