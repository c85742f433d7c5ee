/* targets.h — the parsers of user-supplied LM files fuzzed by tests/fuzz/lm/fuzz.c and
 * replayed (with the kept crashers and seeds) by tests/unit/test_lm_fuzz.c:
 *   tok          tokenizer.json, a NUL byte, then text: sb_tok_load_mem, then sb_tok_encode,
 *                sb_tok_pretokenize, sb_tok_decode and the queries on the text
 *   toktext      text only (first byte mod 6 picks gpt2, llama3, qwen2, llama2, gemma or
 *                llama2_ms of tests/fixtures/tokenizer/): encode, pretokenize,
 *                decode(encode(text)) == text (for qwen2's NFC normalizer: equal after NFC;
 *                for gemma, SentencePiece-style: with U+2581 in the text read as a space;
 *                llama2 and llama2_ms, whose decode adds a space after a special token or
 *                drops a leading one as HF's does: no round trip)
 *   hfconfig     config.json: sb_lm_hf_config, then sb_lm_param_table of the result
 *   hfindex      model.safetensors.index.json: sb_lm_hf_weight_map
 *   safetensors  sb_st_parse (sb_st_read: sb-lm import's shards and a run's checkpoint),
 *                and sb_st_read_meta on the same bytes written to a temporary file
 *                (under /dev/shm when writable, removed at exit)
 *   json         sb_json_parse; a parsed value written back (sb_jw_value) must parse
 *                again to the same canonical JSON
 *   ndjson       first byte: read buffer size (0 = default, else 1..31); the rest read by
 *                sb_ndjson_open_file (fmemopen) + sb_ndjson_next to the end, which must
 *                give the same values and the same error as with the default buffer
 * Each takes arbitrary bytes and returns an error code or 0 without crashing, leaking,
 * reading out of bounds or taking long; a broken invariant calls abort(). Fixtures are
 * found under $SB_TOP (default "."). */
#ifndef SB_LM_FUZZ_TARGETS_H
#define SB_LM_FUZZ_TARGETS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "lm_import.h"
#include "lm_model.h"
#include "tensor.h"
#include "tokenizer.h"
#include "unicode_nfc.h"

#define FZ_TEXT_MAX 16384 /* text bytes encoded per input (cost: linear, about 1 ms per KiB) */

/* fz_safetensors' temporary file (one per process, rewritten for each input): removed at
 * exit and before an abort() of a check here */
static char fz_st_path[64];

static void fz_cleanup(void)
{
	if (fz_st_path[0])
		unlink(fz_st_path);
	fz_st_path[0] = 0;
}

static void fz_check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz invariant broken: %s\n", what);
		fz_cleanup(); /* abort() runs no atexit handler */
		abort();
	}
}

/* text with every U+2581 (a SentencePiece space) as a space: *out malloc'd, its length */
static size_t fz_spaces(const char *text, size_t n, char **out)
{
	char *o = malloc(n + 1);
	size_t m = 0;
	for (size_t i = 0; o && i < n; i++) {
		if (i + 2 < n && !memcmp(text + i, "\xE2\x96\x81", 3)) {
			o[m++] = ' ';
			i += 2;
		} else {
			o[m++] = text[i];
		}
	}
	*out = o;
	return m;
}

/* Encode, pretokenize and decode text with t; roundtrip: decode(encode) must give the text
 * back (only when every byte has its token, else dropped bytes are expected); 2: the text
 * with U+2581 as spaces (SentencePiece-style files decode it so). */
static void fz_tok_text(const struct sb_tok *t, const char *text, size_t n, int roundtrip)
{
	struct sb_err e = {0};
	int32_t *ids = NULL;
	size_t n_ids = 0;
	char *sp = NULL;
	if (roundtrip == 2) {
		n = fz_spaces(text, n, &sp);
		if (!sp)
			return;
		text = sp; /* the same ids as the original text: U+2581 and a space are both "▁" */
	}
	if (sb_tok_encode(t, text, n, &ids, &n_ids, &e) == 0) {
		char *out = NULL;
		size_t n_out = 0;
		fz_check(sb_tok_decode(t, ids, n_ids, &out, &n_out, &e) == 0, "encode gave an id decode refuses");
		if (roundtrip && !(n_out == n && memcmp(out, text, n) == 0)) {
			/* under an NFC normalizer the ids decode to the text's NFC, and a normalized
			 * added token to its content as written: the two agree after NFC */
			char *nf = NULL, *no = NULL;
			size_t n_nf = 0, n_no = 0;
			struct sb_err e2 = {0};
			int ok = sb_nfc_normalize(text, n, &nf, &n_nf, &e2) == 0 &&
				 sb_nfc_normalize(out, n_out, &no, &n_no, &e2) == 0;
			if (ok) {
				const char *a = nf ? nf : text, *b = no ? no : out;
				size_t na = nf ? n_nf : n, nb = no ? n_no : n_out;
				ok = na == nb && memcmp(a, b, na) == 0;
			}
			free(nf);
			free(no);
			fz_check(ok, "NFC(decode(encode(text))) != NFC(text)");
		}
		for (size_t i = 0; i < n_ids; i++) {
			char b[8];
			fz_check(sb_tok_token_bytes(t, ids[i], b, sizeof b) >= 0, "token_bytes of an encoded id");
		}
		free(out);
	}
	free(ids);
	size_t *ends = NULL, n_ends = 0;
	if (sb_tok_pretokenize(t, text, n, &ends, &n_ends, &e) == 0) {
		for (size_t i = 0; i < n_ends; i++)
			fz_check(ends[i] > (i ? ends[i - 1] : 0) && ends[i] <= n, "pre-token ends increase");
		fz_check(n_ends ? ends[n_ends - 1] == n : n == 0, "pre-tokens cover the text");
	}
	free(ends);
	free(sp);
}

/* tokenizer.json [NUL text] */
static int fz_tok(const uint8_t *d, size_t n)
{
	const uint8_t *nul = memchr(d, 0, n);
	size_t nj = nul ? (size_t)(nul - d) : n;
	const char *text = nul ? (const char *)nul + 1 : "";
	size_t nt = nul ? n - nj - 1 : 0;
	if (nt > FZ_TEXT_MAX)
		nt = FZ_TEXT_MAX;
	struct sb_tok *t;
	struct sb_err e = {0};
	int rc = sb_tok_load_mem((const char *)d, nj, "fuzz", &t, &e);
	if (rc) {
		fz_check(e.msg[0] != 0 && strstr(e.msg, "fuzz") != NULL, "a refusal names the file");
		return rc;
	}
	fz_tok_text(t, text, nt, 0);
	/* the text's bytes as ids: decode refuses or decodes, never reads outside */
	size_t k = nt / 4;
	int32_t *ids = malloc((k ? k : 1) * sizeof *ids);
	if (ids) {
		memcpy(ids, text, k * 4);
		char *out = NULL;
		size_t n_out;
		if (sb_tok_decode(t, ids, k, &out, &n_out, &e) == 0)
			free(out);
		free(ids);
	}
	int nv = sb_tok_vocab_size(t);
	for (int32_t id = -1; id <= nv && id < 4096; id++) {
		char b[64];
		(void)sb_tok_token_bytes(t, id, b, sizeof b);
	}
	int32_t bos = sb_tok_bos(t);
	fz_check(bos == -1 || (bos >= 0 && bos < nv), "bos is -1 or an id");
	char *s = malloc(nt + 1);
	if (s) {
		memcpy(s, text, nt);
		s[nt] = 0;
		int id = sb_tok_id(t, s);
		fz_check(id >= -1 && id < nv, "sb_tok_id is -1 or an id");
		free(s);
	}
	sb_tok_free(t);
	return 0;
}

/* text, encoded by the fixture tokenizers (loaded once) */
#define FZ_NTOK 6
static struct sb_tok *fz_fixture_tok[FZ_NTOK];
static int fz_fixture_full[FZ_NTOK]; /* decode(encode) is the text: 1, or 2 with U+2581 as spaces */

static struct sb_tok *fz_fixture(int k)
{
	static const char *names[FZ_NTOK] = {"gpt2", "llama3", "qwen2", "llama2", "gemma", "llama2_ms"};
	if (!fz_fixture_tok[k]) {
		const char *top = getenv("SB_TOP") ? getenv("SB_TOP") : ".";
		char p[4096];
		struct sb_err e = {0};
		snprintf(p, sizeof p, "%s/tests/fixtures/tokenizer/%s.json", top, names[k]);
		if (sb_tok_load(p, &fz_fixture_tok[k], &e)) {
			fprintf(stderr, "%s (set SB_TOP to the source tree)\n", e.msg);
			abort();
		}
		if (k >= 3) { /* byte fallback: every character has tokens */
			fz_fixture_full[k] = k == 4 ? 2 : 0; /* llama2 puts a space after each special
							      * token, llama2_ms drops a leading one (HF) */
			return fz_fixture_tok[k];
		}
		/* GPT-2's byte alphabet: every byte b as its one-character token */
		int full = 1;
		for (int b = 0; b < 256 && full; b++) {
			int cp = b, m = 0;
			if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))) {
				for (int x = 0; x < b; x++)
					m += !((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF));
				cp = 256 + m;
			}
			char u[3] = {0};
			if (cp < 0x80)
				u[0] = (char)cp;
			else {
				u[0] = (char)(0xC0 | (cp >> 6));
				u[1] = (char)(0x80 | (cp & 0x3F));
			}
			full = sb_tok_id(fz_fixture_tok[k], u) >= 0;
		}
		fz_fixture_full[k] = full;
	}
	return fz_fixture_tok[k];
}

static int fz_toktext(const uint8_t *d, size_t n)
{
	if (n < 1)
		return 0;
	int k = d[0] % FZ_NTOK;
	const struct sb_tok *t = fz_fixture(k);
	size_t nt = n - 1 > FZ_TEXT_MAX ? FZ_TEXT_MAX : n - 1;
	fz_tok_text(t, (const char *)d + 1, nt, fz_fixture_full[k]);
	return 0;
}

static int fz_hfconfig(const uint8_t *d, size_t n)
{
	struct sb_lm_cfg c;
	struct sb_lm_hf_info info;
	struct sb_err e = {0};
	int rc = sb_lm_hf_config((const char *)d, n, "fuzz", &c, &info, &e);
	if (rc) {
		fz_check(rc == SB_EDATA && strstr(e.msg, "fuzz") != NULL, "a refusal is SB_EDATA naming the file");
		return rc;
	}
	struct sb_lm_param *p = NULL;
	int np = 0;
	size_t nfl = 0;
	rc = sb_lm_param_table(&c, &p, &np, &nfl, &e);
	free(p);
	return rc;
}

static int fz_hfindex(const uint8_t *d, size_t n)
{
	char(*files)[256] = NULL;
	int nf = 0;
	struct sb_err e = {0};
	int rc = sb_lm_hf_weight_map((const char *)d, n, "fuzz", &files, &nf, &e);
	if (!rc) {
		fz_check(nf >= 1, "at least one weight file");
		for (int i = 0; i < nf; i++)
			fz_check(files[i][0] && files[i][0] != '.' && !strchr(files[i], '/'), "plain file names");
	} else
		fz_check(!files && !nf && strstr(e.msg, "fuzz") != NULL, "a refusal names the file, returns nothing");
	free(files);
	return rc;
}

static int fz_safetensors(const uint8_t *d, size_t n)
{
	struct sb_tensors ts;
	struct sb_err e = {0};
	int rc = sb_st_parse(d, n, "fuzz", &ts, &e);
	if (!rc) {
		volatile unsigned s = 0;
		for (size_t i = 0; i < ts.n; i++) {
			const struct sb_tensor *t = &ts.t[i];
			fz_check(t->nbytes == (size_t)sb_tensor_numel(t) * sb_dtype_size(t->dtype), "nbytes");
			for (size_t j = 0; j < t->nbytes; j++)
				s += ((const unsigned char *)t->data)[j];
		}
		sb_tensors_free(&ts);
	}
	/* the header-only reader, on the same bytes as a file */
	static int fd = -1;
	if (fd < 0) {
		snprintf(fz_st_path, sizeof fz_st_path, "%s/sb-fuzz-st-XXXXXX",
		         access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		fd = mkstemp(fz_st_path);
		if (fd < 0) {
			fz_st_path[0] = 0;
			return rc;
		}
		atexit(fz_cleanup);
	}
	if (ftruncate(fd, 0) || pwrite(fd, d, n, 0) != (ssize_t)n)
		return rc;
	struct sb_tensors meta;
	int rc2 = sb_st_read_meta(fz_st_path, &meta, &e);
	if (!rc2)
		sb_tensors_free(&meta);
	fz_check(rc || !rc2, "sb_st_read_meta refuses a file sb_st_parse accepts");
	return rc;
}

static int fz_json_same(const struct sb_json *a, const struct sb_json *b)
{
	struct sb_jw x, y;
	sb_jw_init(&x, NULL);
	sb_jw_init(&y, NULL);
	sb_jw_canonical(&x, a);
	sb_jw_canonical(&y, b);
	int same = !x.oom && !y.oom && x.len == y.len && memcmp(x.buf, y.buf, x.len) == 0;
	sb_jw_free(&x);
	sb_jw_free(&y);
	return same;
}

static int fz_json(const uint8_t *d, size_t n)
{
	struct sb_json *v;
	struct sb_err e = {0};
	int rc = sb_json_parse((const char *)d, n, &v, &e);
	if (rc) {
		fz_check(strncmp(e.msg, "column ", 7) == 0 || rc == SB_EINTERNAL || strstr(e.msg, "nested"),
			 "a parse error names the column");
		return rc;
	}
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	sb_jw_value(&w, v);
	struct sb_json *v2 = NULL;
	if (!w.oom) {
		fz_check(sb_json_parse(w.buf, w.len, &v2, &e) == 0, "a value written back parses again");
		fz_check(fz_json_same(v, v2), "a value written back reads as the same value");
	}
	sb_jw_free(&w);
	sb_json_free(v2);
	sb_json_free(v);
	return 0;
}

/* All values of an NDJSON stream read with buffer size bs; returns the status and a digest
 * (canonical JSON of every value, then the error message) in *out. */
static int fz_ndjson_read(const uint8_t *d, size_t n, size_t bs, struct sb_jw *out)
{
	FILE *f = fmemopen((void *)d, n, "rb");
	if (!f)
		return -1;
	struct sb_ndjson_reader *r = sb_ndjson_open_file(f, "fuzz", bs);
	if (!r) {
		fclose(f);
		return -1;
	}
	struct sb_err e = {0};
	int rc;
	for (;;) {
		struct sb_json *v;
		rc = sb_ndjson_next(r, &v, &e);
		if (rc || !v)
			break;
		sb_jw_canonical(out, v);
		sb_json_free(v);
	}
	if (rc) {
		fz_check(strncmp(e.msg, "fuzz:", 5) == 0, "an NDJSON error names the file and line");
		sb_jw_str(out, e.msg);
	}
	sb_ndjson_close(r);
	fclose(f);
	return rc;
}

static int fz_ndjson(const uint8_t *d, size_t n)
{
	if (n < 2)
		return 0;
	size_t bs = d[0] % 32;
	struct sb_jw a, b;
	sb_jw_init(&a, NULL);
	sb_jw_init(&b, NULL);
	int rc = fz_ndjson_read(d + 1, n - 1, bs, &a);
	if (bs) {
		int rc0 = fz_ndjson_read(d + 1, n - 1, 0, &b);
		fz_check(rc == rc0 && !a.oom && !b.oom && a.len == b.len && (!a.len || !memcmp(a.buf, b.buf, a.len)),
			 "the values and the error do not depend on the read buffer's size");
	}
	sb_jw_free(&a);
	sb_jw_free(&b);
	return rc;
}

struct fz_target {
	const char *name;
	int (*fn)(const uint8_t *, size_t);
};

static const struct fz_target fz_targets[] = {
    {"tok", fz_tok},   {"toktext", fz_toktext}, {"hfconfig", fz_hfconfig}, {"hfindex", fz_hfindex},
    {"safetensors", fz_safetensors}, {"json", fz_json}, {"ndjson", fz_ndjson}, {NULL, NULL},
};

#endif
