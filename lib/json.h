/* json.h — NDJSON reading and writing. yajl is used behind this header only.
 *
 * Reader: one JSON value per line. Lines end in LF or CRLF; the last line may
 * lack its newline. A line that is not one complete JSON value (including a
 * value that continues on the next line), invalid UTF-8, a \u escape of a lone
 * surrogate, a byte-order mark, a NUL byte (raw or escaped as \u0000), a key
 * twice in one object or a line longer than SB_NDJSON_LINE_MAX is an error
 * naming the file and line (SB_EDATA). Blank lines are skipped.
 *
 * Writer: compact JSON, keys in the order written; numbers formatted to
 * round-trip (shortest of %.{6..9}g for float32, %.{15..17}g for double) and
 * never locale-dependent; a non-finite number is written as null plus a
 * sibling field "<key>_nonfinite": "nan" | "inf" | "-inf".
 */
#ifndef SB_JSON_H
#define SB_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"

/* ---- values ---- */

enum sb_json_type { SB_JSON_NULL, SB_JSON_BOOL, SB_JSON_NUMBER, SB_JSON_STRING, SB_JSON_ARRAY, SB_JSON_OBJECT };

struct sb_json {
	enum sb_json_type type;
	int boolean;
	double number;      /* SB_JSON_NUMBER */
	char *text;         /* STRING: the string (NUL-terminated, holds no NUL);
			       NUMBER: the number as written in the input */
	size_t len;         /* STRING: length in bytes */
	size_t n;           /* ARRAY / OBJECT: number of items */
	char **keys;        /* OBJECT: keys[i] */
	struct sb_json **items; /* ARRAY / OBJECT: values */
};

/* Parse one complete JSON value from buf[0..len). On error returns non-zero and
 * sets err->msg to "column C: what", C the 1-based byte offset in buf. Nesting
 * deeper than 256 and a key twice in one object (column C: the object's closing
 * brace) are errors too. The text must be UTF-8 as RFC 3629 has it (no overlong
 * forms, no surrogates U+D800..DFFF, nothing above U+10FFFF; C: the first bad
 * byte), and a \u escape must not be a lone surrogate: "\uD800" alone, or not
 * followed by an escaped low surrogate, and "\uDC00" alone are refused (C: the
 * backslash). RFC 8259 allows them, but they have no UTF-8 form, and yajl would
 * turn them into '?' or invalid bytes. NUL is refused too, a raw byte ("column C:
 * NUL byte") or the escape \u0000 in a string or key (C: the backslash): strings
 * and keys are C strings, which it would silently cut short. So every string and
 * key is valid UTF-8 without NUL. */
int sb_json_parse(const char *buf, size_t len, struct sb_json **out, struct sb_err *err);
void sb_json_free(struct sb_json *v);

/* 1 when a and b are the same value: the same type; numbers: two written as integers
 * (digits only) compare as written, at any magnitude (-0 is 0); an int64 and a number
 * written otherwise (1.0, 1e16) are equal when the latter is exactly that integer; others
 * compare as doubles (non-finite ones as written); strings byte for byte; arrays item by
 * item; objects with the same keys (in any order) and equal values. NULL equals only NULL. */
int sb_json_equal(const struct sb_json *a, const struct sb_json *b);
/* Object member lookup (first match) or NULL; NULL-safe on v. */
const struct sb_json *sb_json_get(const struct sb_json *obj, const char *key);
/* Typed accessors: return def when v is NULL or of another type. */
const char *sb_json_str(const struct sb_json *v, const char *def);
double sb_json_num(const struct sb_json *v, double def);
int sb_json_bool(const struct sb_json *v, int def);
/* Exact integer: 0 on success; SB_EDATA when v is not a number holding an
 * integer representable in int64 (checked on the text, not through double). */
int sb_json_int64(const struct sb_json *v, int64_t *out);
/* Typed member lookups with error messages naming the key ("missing field 'seed'"). */
int sb_json_req_str(const struct sb_json *obj, const char *key, const char **out, struct sb_err *err);
int sb_json_req_num(const struct sb_json *obj, const char *key, double *out, struct sb_err *err);
int sb_json_req_int(const struct sb_json *obj, const char *key, int64_t *out, struct sb_err *err);

/* ---- NDJSON reader ---- */

struct sb_ndjson_reader;

/* The longest line read: 64 MiB before the LF (a CR of CRLF counted). Records
 * written are far shorter: run.meta, the largest, holds argv and one entry of
 * about 150 bytes per input file (under 2 MiB for ten thousand inputs); an
 * sb-attn row of a million scores is 10-20 MiB. The limit bounds the memory
 * that a file without newlines can take. */
#define SB_NDJSON_LINE_MAX ((size_t)64 << 20)

/* Read from an open FILE (not closed by the reader); `name` is used in messages
 * ("-" shows as "<stdin>"). bufsize 0 means the default (64 KiB); tests use 1..31. */
struct sb_ndjson_reader *sb_ndjson_open_file(FILE *f, const char *name, size_t bufsize);
/* Another line limit for this reader (0: SB_NDJSON_LINE_MAX); for tests. */
void sb_ndjson_set_max_line(struct sb_ndjson_reader *r, size_t max);
/* Open a path ("-" = stdin). */
int sb_ndjson_open(const char *path, struct sb_ndjson_reader **out, struct sb_err *err);
/* Next value: returns 0 and *out (owned by caller) or NULL at end of input;
 * non-zero on error, with err->msg "name:line: what". */
int sb_ndjson_next(struct sb_ndjson_reader *r, struct sb_json **out, struct sb_err *err);
/* Raw next line (validated as UTF-8 without BOM, CR stripped), without parsing.
 * The returned pointer is valid until the next call. NULL at end. */
int sb_ndjson_next_line(struct sb_ndjson_reader *r, const char **line, size_t *len, struct sb_err *err);
long sb_ndjson_line(const struct sb_ndjson_reader *r); /* line number of the last value */
const char *sb_ndjson_name(const struct sb_ndjson_reader *r);
void sb_ndjson_close(struct sb_ndjson_reader *r); /* closes the FILE only if opened by path */

/* Validate UTF-8 (no overlongs, no surrogates, <= U+10FFFF). Returns the
 * offset of the first bad byte or (size_t)-1 when valid. */
size_t sb_utf8_check(const char *s, size_t len);

/* ---- writer ---- */

/* A writer appends to a growable buffer; sb_jw_line() ends the record with '\n'
 * and flushes it to the FILE (if any). Nesting is tracked to place commas. */
struct sb_jw {
	char *buf;
	size_t len, cap;
	int depth;
	int need_comma[32];
	int oom;  /* set on allocation failure; everything after is dropped */
	FILE *out;
};

void sb_jw_init(struct sb_jw *w, FILE *out); /* out may be NULL: build in memory */
void sb_jw_free(struct sb_jw *w);
void sb_jw_reset(struct sb_jw *w);           /* empty the buffer, keep capacity */

void sb_jw_obj(struct sb_jw *w);             /* { */
void sb_jw_obj_end(struct sb_jw *w);         /* } */
void sb_jw_arr(struct sb_jw *w);             /* [ */
void sb_jw_arr_end(struct sb_jw *w);         /* ] */
void sb_jw_key(struct sb_jw *w, const char *key);
void sb_jw_str(struct sb_jw *w, const char *s);
void sb_jw_strn(struct sb_jw *w, const char *s, size_t n);
void sb_jw_int(struct sb_jw *w, int64_t v);
void sb_jw_uint(struct sb_jw *w, uint64_t v);
void sb_jw_bool(struct sb_jw *w, int v);
void sb_jw_null(struct sb_jw *w);
/* Bare number values (arrays). A non-finite value is written as null. */
void sb_jw_f32(struct sb_jw *w, float v);
void sb_jw_f64(struct sb_jw *w, double v);
/* Append pre-formatted JSON text as one value (caller guarantees validity). */
void sb_jw_raw(struct sb_jw *w, const char *json, size_t n);
/* Write a parsed value back (round-trip). */
void sb_jw_value(struct sb_jw *w, const struct sb_json *v);

/* Key + value conveniences. The float ones write null and "<key>_nonfinite". */
void sb_jw_kstr(struct sb_jw *w, const char *key, const char *s);
void sb_jw_kint(struct sb_jw *w, const char *key, int64_t v);
void sb_jw_kbool(struct sb_jw *w, const char *key, int v);
void sb_jw_knull(struct sb_jw *w, const char *key);
void sb_jw_kf32(struct sb_jw *w, const char *key, float v);
void sb_jw_kf64(struct sb_jw *w, const char *key, double v);

/* Start a record: "{\"kind\":KIND,\"v\":V". Finish with sb_jw_obj_end + sb_jw_line. */
void sb_jw_record(struct sb_jw *w, const char *kind, int v);
/* Append '\n'; write the buffer to w->out (if set) and empty it. Returns 0, or
 * SB_EIO when the write failed, SB_EINTERNAL on allocation failure. */
int sb_jw_line(struct sb_jw *w, struct sb_err *err);

/* Number formatting used by the writer (also for tables): shortest text that
 * reads back as the same float / double; "." always; buf >= 32 bytes. */
void sb_fmt_f32(char *buf, float v);
void sb_fmt_f64(char *buf, double v);
/* Make each *v[i] that is -0 a 0, so that a setting is written, and hashed, one way
 * (cell ids: lib/train_cell.c, lib/lm_train.c). */
void sb_unsign_zeros(double *const v[], size_t n);

/* Canonical JSON (sorted keys, no spaces, non-ASCII as \uXXXX, as Python's
 * json.dumps(sort_keys=True, separators=(",",":")) with ensure_ascii) of v,
 * appended to w. Numbers are written as they were read (their text). */
void sb_jw_canonical(struct sb_jw *w, const struct sb_json *v);

#endif
