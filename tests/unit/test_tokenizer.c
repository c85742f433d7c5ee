/* test_tokenizer.c — lib/tokenizer against Hugging Face tokenizers 0.20.3 on the committed
 * fixtures of tests/fixtures/tokenizer (gen.py there: three byte-level BPE tokenizers, GPT-2,
 * Llama-3 and Qwen2 style — Qwen2 with the NFC normalizer — and the ids and decodes HF gives
 * for 151 texts each), plus hostile tokenizer.json files and text, and an encode rate
 * diagnostic.
 *
 * Every encode is compared id for id (a failure names the tokenizer, the case, the first
 * differing position and both ids there); every decode byte for byte with HF's decode and
 * with the input text (for Qwen2, the NFC of the text). Fixtures are found under $SB_TOP
 * (default: the current directory).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../harness.h"
#include "io.h"
#include "json.h"
#include "rng.h"
#include "tokenizer.h"

/* byte-level (cases.ndjson), then SentencePiece-style (sp_cases.ndjson, gen_sp.py) */
#define NK 8
static const char *KINDS[NK] = {"gpt2", "llama3", "qwen2", "llama2", "llama2_ms", "gemma", "sp_unk", "sp_ascii"};
static struct sb_tok *toks[NK];
static char top_dir[2048];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A short printable rendering of bytes for messages. */
static const char *show(const char *s, size_t n)
{
	static char buf[4][160];
	static int k;
	char *b = buf[k++ & 3];
	size_t m = 0;
	for (size_t i = 0; i < n && m + 8 < sizeof buf[0]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7F && c != '\\')
			b[m++] = (char)c;
		else
			m += (size_t)snprintf(b + m, sizeof buf[0] - m, "\\x%02X", c);
	}
	if (m + 8 >= sizeof buf[0])
		m += (size_t)snprintf(b + m, sizeof buf[0] - m, "...");
	b[m] = 0;
	return b;
}

static void load_fixtures(void)
{
	for (int k = 0; k < NK; k++) {
		char path[4200];
		struct sb_err err = {0};
		snprintf(path, sizeof path, "%s/tests/fixtures/tokenizer/%s.json", top_dir, KINDS[k]);
		int rc = sb_tok_load(path, &toks[k], &err);
		SB_CHECK(rc == 0, "load %s (%s)", path, rc ? err.msg : "ok");
	}
}

static int kind_index(const char *s)
{
	for (int k = 0; k < NK; k++)
		if (strcmp(s, KINDS[k]) == 0)
			return k;
	return -1;
}

/* Compare with HF for every case of a cases file (cases.ndjson, sp_cases.ndjson). */
static int n_cases[NK], n_qc_fail, n_changed;

static void check_cases(const char *file)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/tests/fixtures/tokenizer/%s", top_dir, file);
	struct sb_ndjson_reader *r = NULL;
	struct sb_err err = {0};
	if (!SB_CHECK(sb_ndjson_open(path, &r, &err) == 0, "open %s (%s)", path, err.msg))
		return;
	struct sb_json *v;
	struct sb_err rerr = {0};
	while (sb_ndjson_next(r, &v, &rerr) == 0 && v) {
		const char *kind = sb_json_str(sb_json_get(v, "tok"), "");
		int k = kind_index(kind);
		long ci = (long)sb_json_num(sb_json_get(v, "i"), -1);
		const struct sb_json *text = sb_json_get(v, "text"), *want = sb_json_get(v, "ids");
		const struct sb_json *dec = sb_json_get(v, "decode");
		/* qwen2: the NFC of a text that is not NFC (what HF's decode gives back) */
		const struct sb_json *nfc = sb_json_get(v, "nfc");
		if (!SB_CHECK(k >= 0 && toks[k] && text && text->type == SB_JSON_STRING && want &&
				      want->type == SB_JSON_ARRAY,
			      "%s:%ld: a case with a loaded tokenizer, text and ids", path, sb_ndjson_line(r))) {
			sb_json_free(v);
			continue;
		}
		n_cases[k]++;
		const struct sb_json *pre = sb_json_get(v, "pre");
		if (pre && pre->type == SB_JSON_ARRAY) {
			size_t *ends = NULL, n_ends = 0, first = (size_t)-1;
			int prc = sb_tok_pretokenize(toks[k], text->text, text->len, &ends, &n_ends, &err);
			for (size_t i = 0; prc == 0 && i < n_ends && i < pre->n && first == (size_t)-1; i++)
				if (ends[i] != (size_t)sb_json_num(pre->items[i], -1))
					first = i;
			if (prc == 0 && first == (size_t)-1 && n_ends != pre->n)
				first = n_ends < pre->n ? n_ends : pre->n;
			size_t at = first == (size_t)-1 || first == 0 ? 0 : ends[first - 1];
			SB_CHECK(prc == 0 && first == (size_t)-1,
				 "%s case %ld: %zu pre-token ends equal HF's pre_tokenize_str (rc %d; first difference: "
				 "pre-token %zu, starting at byte %zu \"%s\": got end %ld, want %ld)",
				 kind, ci, pre->n, prc, first, at, show(text->text + at, text->len - at),
				 first < n_ends ? (long)ends[first] : -1L,
				 first < pre->n ? (long)sb_json_num(pre->items[first], -1) : -1L);
			free(ends);
		}
		int32_t *ids = NULL;
		size_t n_ids = 0;
		sb_err_clear(&err);
		int rc = sb_tok_encode(toks[k], text->text, text->len, &ids, &n_ids, &err);
		n_qc_fail += sb_json_bool(sb_json_get(v, "qc_fail"), 0);
		n_changed += nfc != NULL;
		if (!SB_CHECK(rc == 0, "%s case %ld \"%s\": encode (%s)", kind, ci, show(text->text, text->len),
			      rc ? err.msg : "ok")) {
			sb_json_free(v);
			continue;
		}
		size_t first = (size_t)-1, nw = want->n;
		for (size_t i = 0; i < (n_ids < nw ? n_ids : nw) && first == (size_t)-1; i++)
			if (ids[i] != (int32_t)sb_json_num(want->items[i], -1))
				first = i;
		if (first == (size_t)-1 && n_ids != nw)
			first = n_ids < nw ? n_ids : nw;
		if (first == (size_t)-1)
			SB_CHECK(1, "%s case %ld: %zu ids equal HF's", kind, ci, nw);
		else
			SB_CHECK(0,
				 "%s case %ld \"%s\": ids differ from HF's at position %zu of %zu (got %ld, want %ld; "
				 "got %zu ids)",
				 kind, ci, show(text->text, text->len), first, nw,
				 first < n_ids ? (long)ids[first] : -1L,
				 first < nw ? (long)sb_json_num(want->items[first], -1) : -1L, n_ids);
		/* decode HF's ids (so a decode check does not depend on the encode) */
		int32_t *wids = malloc((nw ? nw : 1) * sizeof *wids);
		for (size_t i = 0; i < nw; i++)
			wids[i] = (int32_t)sb_json_num(want->items[i], -1);
		char *out = NULL;
		size_t n_out = 0;
		rc = sb_tok_decode(toks[k], wids, nw, &out, &n_out, &err);
		const struct sb_json *want_text = nfc ? nfc : text;
		size_t d = 0;
		while (rc == 0 && d < n_out && d < want_text->len && out[d] == want_text->text[d])
			d++;
		int same_text = rc == 0 && n_out == want_text->len && d == n_out;
		int same_hf = rc == 0 && dec && n_out == dec->len && memcmp(out, dec->text, n_out) == 0;
		/* HF's decode is not the text either when an added token's content is not NFC */
		int hf_is_text = dec && dec->len == want_text->len && memcmp(dec->text, want_text->text, dec->len) == 0;
		SB_CHECK(same_hf && (same_text || !hf_is_text),
			 "%s case %ld: decode of HF's ids equals HF's decode and %s (%zu bytes; rc %d; first "
			 "difference from the text at byte %zu: got \"%s\", want \"%s\")",
			 kind, ci, !hf_is_text ? "not the text, as HF's" : nfc ? "the NFC of the text" : "the text",
			 want_text->len, rc, d, rc ? "" : show(out + d, n_out - d),
			 show(want_text->text + d, want_text->len - d));
		free(out);
		free(wids);
		free(ids);
		sb_json_free(v);
	}
	SB_CHECK(rerr.code == 0, "read %s to the end (%s)", path, rerr.code ? rerr.msg : "ok");
	sb_ndjson_close(r);
}

static void check_case_counts(void)
{
	SB_CHECK(n_cases[0] >= 150 && n_cases[1] >= 150 && n_cases[2] >= 150 && n_qc_fail >= 25 && n_changed >= 25,
		 "cases per tokenizer: gpt2 %d, llama3 %d, qwen2 %d (qwen2: %d fail the NFC quick check, %d are not NFC)",
		 n_cases[0], n_cases[1], n_cases[2], n_qc_fail, n_changed);
	int sp_min = n_cases[3];
	for (int k = 4; k < NK; k++)
		sp_min = n_cases[k] < sp_min ? n_cases[k] : sp_min;
	SB_CHECK(sp_min >= 170, "cases per SentencePiece-style tokenizer: at least 170 (llama2 %d, llama2_ms %d, gemma %d, "
				"sp_unk %d, sp_ascii %d)",
		 n_cases[3], n_cases[4], n_cases[5], n_cases[6], n_cases[7]);
}

/* The smaller API: ids of strings, vocab size, token bytes, bad ids. */
static void check_api(void)
{
	struct sb_tok *t = toks[1]; /* llama3 */
	if (!t)
		return;
	struct sb_err err = {0};
	SB_CHECK(sb_tok_vocab_size(t) == 904, "llama3 vocab size 904 (got %d)", sb_tok_vocab_size(t));
	SB_CHECK(sb_tok_id(t, "<|endoftext|>") == 0 && sb_tok_id(t, "<|im_end|>") == 2,
		 "ids of special tokens (%d, %d)", sb_tok_id(t, "<|endoftext|>"), sb_tok_id(t, "<|im_end|>"));
	SB_CHECK(sb_tok_id(t, "sparse bench") == 901 && sb_tok_id(t, "zz<|") == 902,
		 "ids of non-special added tokens (%d, %d)", sb_tok_id(t, "sparse bench"), sb_tok_id(t, "zz<|"));
	SB_CHECK(sb_tok_id(t, "\xC4\xA0zqxjv") == 900 && sb_tok_id(t, "\xC4\xA0") >= 0 && sb_tok_id(t, "nope!!") == -1,
		 "ids of vocab forms (Gzqxjv %d, G %d, missing %d)", sb_tok_id(t, "\xC4\xA0zqxjv"),
		 sb_tok_id(t, "\xC4\xA0"), sb_tok_id(t, "nope!!"));
	char buf[64];
	int n = sb_tok_token_bytes(t, 900, buf, sizeof buf);
	SB_CHECK(n == 6 && memcmp(buf, " zqxjv", 6) == 0, "token_bytes(900) = \" zqxjv\" (got %d)", n);
	n = sb_tok_token_bytes(t, 901, buf, 3);
	SB_CHECK(n == 12 && memcmp(buf, "spa", 3) == 0, "token_bytes(901) with cap 3: length 12, 3 bytes (got %d)", n);
	SB_CHECK(sb_tok_token_bytes(t, 904, buf, sizeof buf) == -1 && sb_tok_token_bytes(t, -1, buf, sizeof buf) == -1,
		 "token_bytes of ids 904 and -1: -1");
	/* a byte token that is half of a UTF-8 character decodes to that raw byte */
	int id_c3 = sb_tok_id(t, "\xC3\x83"); /* byte 0xC3 */
	n = sb_tok_token_bytes(t, id_c3, buf, sizeof buf);
	SB_CHECK(id_c3 >= 0 && n == 1 && (unsigned char)buf[0] == 0xC3, "byte token 0xC3 -> raw byte (id %d, len %d)",
		 id_c3, n);
	int32_t bad[3] = {5, 904, 6};
	char *out = NULL;
	size_t n_out;
	int rc = sb_tok_decode(t, bad, 3, &out, &n_out, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "ids[1]") && !out, "decode of id 904: SB_EDATA naming ids[1] (%s)",
		 err.msg);
	int32_t *ids = NULL;
	size_t n_ids = 5;
	rc = sb_tok_encode(t, "", 0, &ids, &n_ids, &err);
	SB_CHECK(rc == 0 && n_ids == 0 && ids, "empty text: no ids, non-NULL array");
	free(ids);
	rc = sb_tok_decode(t, NULL, 0, &out, &n_out, &err);
	SB_CHECK(rc == 0 && n_out == 0 && out && out[0] == 0, "decode of no ids: empty string");
	free(out);
}

static void check_bad_text(void)
{
	static const struct {
		const char *s;
		size_t n, off;
	} cases[] = {
		{"ab\xFF" "cd", 5, 2},           {"abc\xE2\x82", 5, 3},          {"\xC0\xAF", 2, 0},
		{"ok \xED\xA0\x80 surrogate", 15, 3}, {"x\xF4\x90\x80\x80", 5, 1}, {"caf\xC3\xA9\x80", 6, 5},
	};
	for (int k = 0; k < NK; k++) {
		if (!toks[k])
			continue;
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
			struct sb_err err = {0};
			int32_t *ids = (int32_t *)1;
			size_t n_ids = 9;
			char want[48];
			snprintf(want, sizeof want, "byte offset %zu:", cases[i].off);
			int rc = sb_tok_encode(toks[k], cases[i].s, cases[i].n, &ids, &n_ids, &err);
			SB_CHECK(rc == SB_EDATA && strstr(err.msg, want) && !ids && n_ids == 0,
				 "%s: invalid UTF-8 \"%s\" refused at \"%s\" (rc %d: %s)", KINDS[k],
				 show(cases[i].s, cases[i].n), want, rc, err.msg);
		}
	}
}

/* ---- hostile tokenizer.json ---- */

static const char BASE[] =
	"{\"version\":\"1.0\",\"added_tokens\":[{\"id\":4,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,"
	"\"rstrip\":false,\"normalized\":false,\"special\":true}],\"normalizer\":null,"
	"\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true},"
	"\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,"
	"\"use_regex\":true},\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
	"\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":false,"
	"\"ignore_merges\":false,\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\xC4\xA0\":3},\"merges\":[\"a b\"]}}";

/* A SentencePiece-style minimal file (Llama 2's converter): "a ab Ab" -> 5 5 3 4 1 3 in HF
 * (A is not in the vocab: its byte token <0x41>), decoded back to the text (Strip). */
static const char SP_BASE[] =
	"{\"version\":\"1.0\",\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"single_word\":false,\"lstrip\":false,"
	"\"rstrip\":false,\"normalized\":false,\"special\":true}],\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":"
	"[{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
	"\"content\":\"\\u2581\"}]},\"pre_tokenizer\":null,\"post_processor\":null,\"decoder\":{\"type\":\"Sequence\","
	"\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},\"content\":\" \"},"
	"{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]},"
	"\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":\"<unk>\",\"continuing_subword_prefix\":null,"
	"\"end_of_word_suffix\":null,\"fuse_unk\":true,\"byte_fallback\":true,\"ignore_merges\":false,\"vocab\":"
	"{\"<unk>\":0,\"<0x41>\":1,\"a\":2,\"b\":3,\"\\u2581\":4,\"\\u2581a\":5,\"ab\":6},"
	"\"merges\":[\"\\u2581 a\",\"a b\"]}}";

/* base with the first occurrence of `from` replaced by `to`. */
static char *variant_of(const char *base, const char *from, const char *to)
{
	const char *p = strstr(base, from);
	if (!p)
		return NULL;
	size_t n = strlen(base) - strlen(from) + strlen(to);
	char *s = malloc(n + 1);
	size_t a = (size_t)(p - base);
	memcpy(s, base, a);
	strcpy(s + a, to);
	strcat(s, p + strlen(from));
	return s;
}

/* A hostile variant: base with `from` replaced by `to`, refused naming the file and `field`. */
struct hostile {
	const char *from, *to, *field;
};

static void check_variants(const char *base, const char *what, const struct hostile *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char *s = variant_of(base, v[i].from, v[i].to);
		if (!SB_CHECK(s != NULL, "%shostile variant %zu: pattern found in the base", what, i))
			continue;
		struct sb_tok *t = NULL;
		struct sb_err err = {0};
		int rc = sb_tok_load_mem(s, strlen(s), "bad.json", &t, &err);
		SB_CHECK(rc == SB_EDATA && !t && strstr(err.msg, "bad.json") && strstr(err.msg, v[i].field),
			 "%shostile %zu (%s -> %s): SB_EDATA naming bad.json and %s (rc %d: %s)", what, i, v[i].from,
			 v[i].to, v[i].field, rc, err.msg);
		sb_tok_free(t);
		free(s);
	}
}

static void check_hostile(void)
{
	struct sb_tok *t = NULL;
	struct sb_err err = {0};
	int rc = sb_tok_load_mem(BASE, strlen(BASE), "base.json", &t, &err);
	SB_CHECK(rc == 0, "the minimal tokenizer.json loads (%s)", rc ? err.msg : "ok");
	if (t) {
		int32_t *ids = NULL;
		size_t n = 0;
		rc = sb_tok_encode(t, "ab a<s>b", 8, &ids, &n, &err);
		SB_CHECK(rc == 0 && n == 5 && ids[0] == 2 && ids[1] == 3 && ids[2] == 0 && ids[3] == 4 && ids[4] == 1,
			 "minimal tokenizer: \"ab a<s>b\" -> 2 3 0 4 1 (got %zu ids)", n);
		free(ids);
		sb_tok_free(t);
	}
	static const struct hostile v[] = {
		{"\"type\":\"BPE\"", "\"type\":\"WordPiece\"", "model.type"},
		{"\"type\":\"BPE\",", "", "model.type"},
		{"\"merges\":[\"a b\"]", "\"merges\":[\"a c\"]", "model.merges[0]"},
		{"\"merges\":[\"a b\"]", "\"merges\":[[\"b\",\"b\"]]", "model.merges[0]"},
		{"\"merges\":[\"a b\"]", "\"merges\":[\"a  b\"]", "model.merges[0]"},
		{"\"merges\":[\"a b\"]", "\"merges\":[\"ab\"]", "model.merges[0]"},
		{"\"merges\":[\"a b\"]", "\"merges\":[[\"a\",\"b\",\"c\"]]", "model.merges[0]"},
		{"\"merges\":[\"a b\"]", "\"merges\":[7]", "model.merges[0]"},
		{"\"merges\":[\"a b\"]", "\"merges\":{}", "model.merges"},
		{"\"b\":1,", "\"b\":0,", "model.vocab"},
		{"\"b\":1,", "\"b\":2147483648,", "model.vocab"},
		{"\"b\":1,", "\"b\":2147483647,", "model.vocab"},
		{"\"b\":1,", "\"b\":-1,", "model.vocab"},
		{"\"b\":1,", "\"b\":1.5,", "model.vocab"},
		{"\"b\":1,", "\"b\":\"1\",", "model.vocab"},
		{"\"b\":1,", "\"b\":1e3,", "model.vocab"},
		{"\"b\":1,", "\"b\":1.0,", "model.vocab"},
		{"\"b\":1,", "\"b\":16777000,", "model.vocab"}, /* sparse ids: 400 MB of tables for 6 tokens */
		{"\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\xC4\xA0\":3}", "\"vocab\":[\"a\",\"b\"]", "model.vocab"},
		{"\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\xC4\xA0\":3}", "\"vocab\":null", "model.vocab"},
		{"\"id\":4", "\"id\":2147483648", "added_tokens[0].id"},
		{"\"id\":4", "\"id\":7", "added_tokens[0].id"},
		{"\"id\":4", "\"id\":1", "added_tokens[0].id"},
		{"\"content\":\"<s>\"", "\"content\":\"\"", "added_tokens[0].content"},
		{"\"single_word\":false", "\"single_word\":true", "added_tokens[0].single_word"},
		{"\"lstrip\":false", "\"lstrip\":true", "added_tokens[0].lstrip"},
		{"\"rstrip\":false", "\"rstrip\":true", "added_tokens[0].rstrip"},
		{"\"added_tokens\":[", "\"added_tokens\":[7,", "added_tokens[0]"},
		{"\"dropout\":null", "\"dropout\":0.1", "model.dropout"},
		{"\"unk_token\":null", "\"unk_token\":\"a\"", "model.unk_token"},
		{"\"byte_fallback\":false", "\"byte_fallback\":true", "model.byte_fallback"},
		{"\"continuing_subword_prefix\":null", "\"continuing_subword_prefix\":\"##\"",
		 "model.continuing_subword_prefix"},
		{"\"end_of_word_suffix\":null", "\"end_of_word_suffix\":\"</w>\"", "model.end_of_word_suffix"},
		{"\"normalizer\":null", "\"normalizer\":{\"type\":\"NFKC\"}", "normalizer"},
		{"\"normalizer\":null", "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Lowercase\"}]}",
		 "normalizer"},
		{"\"add_prefix_space\":false", "\"add_prefix_space\":true", "pre_tokenizer.add_prefix_space"},
		{"\"use_regex\":true}", "\"use_regex\":false}", "pre_tokenizer.use_regex"},
		{"\"pre_tokenizer\":{\"type\":\"ByteLevel\"", "\"pre_tokenizer\":{\"type\":\"Whitespace\"", "pre_tokenizer"},
		{"\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}",
		 "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"},"
		 "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}",
		 "pre_tokenizer.pretokenizers[0].pattern.Regex"},
		{"\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}",
		 "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
		 "\"behavior\":\"Removed\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}",
		 "pre_tokenizer.pretokenizers[0].behavior"},
		{"\"decoder\":{\"type\":\"ByteLevel\"", "\"decoder\":{\"type\":\"Metaspace\"", "decoder"},
		{"\"model\":{", "\"model\":[],\"m\":{", "model"},
		/* strings must be UTF-8 (sb_json_parse; HF's serde_json refuses these too) */
		{"\"\xC4\xA0\":3", "\"\\ud800\":3", "\\ud800 is a lone UTF-16 surrogate"},
		{"\"\xC4\xA0\":3", "\"\\udc00\\ud800\":3", "\\udc00 is a lone UTF-16 surrogate"},
		{"\"\xC4\xA0\":3", "\"\xC0\xA0\":3", "invalid UTF-8"},
		{"\"content\":\"<s>\"", "\"content\":\"<\xED\xA0\x80>\"", "invalid UTF-8"},
		{"\"content\":\"<s>\"", "\"content\":\"<\xF4\x90\x80\x80>\"", "invalid UTF-8"},
		/* nor NUL: a vocab key "\u0120\u0000x" would be read as "\u0120" (strings are C strings) */
		{"\"\xC4\xA0\":3", "\"\xC4\xA0\\u0000x\":3", "\\u0000 (NUL) is not allowed"},
		{"\"content\":\"<s>\"", "\"content\":\"<s>\\u0000\"", "\\u0000 (NUL) is not allowed"},
	};
	check_variants(BASE, "", v, sizeof v / sizeof v[0]);
	/* not JSON, not an object, truncated at every length (a sample), bytes flipped at random */
	const char *nots[] = {"", "nul", "[]", "\"x\"", "{\"model\":1", "{} {}"};
	for (size_t i = 0; i < sizeof nots / sizeof nots[0]; i++) {
		t = NULL;
		rc = sb_tok_load_mem(nots[i], strlen(nots[i]), "bad.json", &t, &err);
		SB_CHECK(rc == SB_EDATA && !t && strstr(err.msg, "bad.json"), "not a tokenizer \"%s\": SB_EDATA (%s)",
			 nots[i], err.msg);
		sb_tok_free(t);
	}
	char path[4200];
	snprintf(path, sizeof path, "%s/tests/fixtures/tokenizer/llama3.json", top_dir);
	char *data = NULL;
	size_t n = 0;
	if (!SB_CHECK(sb_read_file(path, &data, &n, 0, &err) == 0, "read %s", path))
		return;
	int bad_trunc = 0, crashes_none = 1, loaded = 0, refused = 0;
	size_t first_bad = 0;
	for (size_t len = 0; len + 2 < n; len += (len < 2000 ? 1 : 97)) {
		t = NULL;
		rc = sb_tok_load_mem(data, len, "trunc.json", &t, &err);
		if (rc != SB_EDATA || t) {
			if (!bad_trunc++)
				first_bad = len;
		}
		sb_tok_free(t);
	}
	SB_CHECK(bad_trunc == 0, "llama3.json truncated (every length to 2000, then every 97th): all SB_EDATA "
				 "(%d not, first at length %zu)",
		 bad_trunc, first_bad);
	struct sb_rng rng;
	sb_rng_init(&rng, 12345, 0, 0);
	char *m = malloc(n + 1);
	for (int it = 0; it < 300; it++) {
		memcpy(m, data, n + 1);
		int flips = 1 + (int)(sb_rng_u64(&rng) % 4);
		for (int f = 0; f < flips; f++) {
			static const char pick[] = "{}[]\":,0123456789- aZ\\";
			m[sb_rng_u64(&rng) % n] = pick[sb_rng_u64(&rng) % (sizeof pick - 1)];
		}
		t = NULL;
		rc = sb_tok_load_mem(m, n, "flip.json", &t, &err);
		if (rc == 0) {
			loaded++;
			int32_t *ids = NULL;
			size_t nid = 0;
			const char *txt = "Hello <|im_start|>world 12345 \xD0\x9F\xD1\x80\xD0\xB8 \n\n";
			if (sb_tok_encode(t, txt, strlen(txt), &ids, &nid, &err) == 0) {
				char *o = NULL;
				size_t no;
				if (sb_tok_decode(t, ids, nid, &o, &no, &err) != 0 && err.code != SB_EDATA)
					crashes_none = 0;
				free(o);
			}
			free(ids);
		} else if (rc == SB_EDATA) {
			refused++;
		} else {
			crashes_none = 0;
		}
		sb_tok_free(t);
	}
	SB_CHECK(crashes_none, "300 llama3.json with random bytes replaced: %d refused (SB_EDATA), %d loaded and "
			       "encoded; no other outcome",
		 refused, loaded);
	free(m);
	free(data);
}

/* Encode ~2 MB of mixed text with each tokenizer; rate as a diagnostic, round trip checked. */
/* The post-processor's leading special token (sb_tok_bos), as Llama 3 writes it */
static void check_bos(void)
{
	static const struct {
		const char *pp;
		int want;
		const char *what;
	} c[] = {
		{"null", -1, "no post_processor"},
		{"{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":false,\"use_regex\":true}", -1,
		 "ByteLevel only (Qwen2)"},
		{"{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
		 "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{}}",
		 4, "TemplateProcessing <s> $A"},
		{"{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\"},{\"type\":\"TemplateProcessing\","
		 "\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}]}]}",
		 4, "Sequence[ByteLevel, TemplateProcessing] (Llama 3)"},
		{"{\"type\":\"Sequence\",\"processors\":[{\"type\":\"TemplateProcessing\","
		 "\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}]},"
		 "{\"type\":\"ByteLevel\"}]}",
		 4, "Sequence[TemplateProcessing, ByteLevel] (HF puts the BOS first in either order)"},
		{"{\"type\":\"TemplateProcessing\",\"single\":[{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},"
		 "{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}}]}",
		 -1, "TemplateProcessing $A <s> (a trailing token is not a BOS)"},
		{"{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<bos>\",\"type_id\":0}}]}",
		 -2, "a leading token not in the vocabulary: refused"},
		{"{\"type\":\"TemplateProcessing\",\"single\":[]}", -2, "an empty template: refused"},
		{"{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
		 "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[2],"
		 "\"tokens\":[\"ab\"]}}}",
		 2, "the special_tokens map's id for the name, as HF places it (not the vocabulary's)"},
		{"{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<bos>\",\"type_id\":0}},"
		 "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<bos>\":{\"id\":\"<bos>\",\"ids\":[4],"
		 "\"tokens\":[\"<s>\"]}}}",
		 4, "a name only the special_tokens map knows"},
		{"{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}}],"
		 "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[4,2],\"tokens\":[\"<s>\",\"ab\"]}}}",
		 -2, "two leading ids: refused (one BOS is placed)"},
		{"{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}}],"
		 "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[99],\"tokens\":[\"<s>\"]}}}",
		 -2, "an id outside the vocabulary: refused"},
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char *full = malloc(strlen(BASE) + strlen(c[i].pp) + 32);
		const char *p = strstr(BASE, "\"post_processor\":null");
		sprintf(full, "%.*s\"post_processor\":%s%s", (int)(p - BASE), BASE, c[i].pp,
			p + strlen("\"post_processor\":null"));
		struct sb_tok *t = NULL;
		struct sb_err err = {0};
		int rc = sb_tok_load_mem(full, strlen(full), "pp.json", &t, &err);
		if (c[i].want == -2)
			SB_CHECK(rc == SB_EDATA && strstr(err.msg, "post_processor"), "bos: %s (%s)", c[i].what, err.msg);
		else
			SB_CHECK(rc == 0 && sb_tok_bos(t) == c[i].want, "bos: %s -> %d (got %d; %s)", c[i].what, c[i].want,
				 t ? sb_tok_bos(t) : -9, rc ? err.msg : "loaded");
		if (!rc) { /* sb_tok_encode_clean: a split character dropped; with bos, the BOS first when there is one */
			int32_t *a = NULL, *b = NULL, *r = NULL;
			size_t na = 0, nb = 0, nr = 0;
			const char *txt = "ab\xc3 ab", *plain = "ab ab";
			int e1 = sb_tok_encode_clean(t, (const uint8_t *)txt, strlen(txt), 0, &a, &na, &err);
			int e2 = sb_tok_encode_clean(t, (const uint8_t *)txt, strlen(txt), 1, &b, &nb, &err);
			int e3 = sb_tok_encode(t, plain, strlen(plain), &r, &nr, &err);
			int lead = c[i].want >= 0;
			SB_CHECK(!e1 && !e2 && !e3 && na == nr && !memcmp(a, r, nr * sizeof *r) && nb == nr + (size_t)lead &&
					 (!lead || b[0] == c[i].want) && !memcmp(b + lead, r, nr * sizeof *r),
				 "encode_clean: %s: %zu ids, %zu with bos (first %d), %zu of the clean text", c[i].what, na, nb,
				 nb ? b[0] : -9, nr);
			free(a);
			free(b);
			free(r);
		}
		sb_tok_free(t);
		free(full);
	}
}

static void check_rate(void)
{
	static const char *parts[] = {
		"First Citizen:\nBefore we proceed any further, hear me speak.\n\n",
		"All:\nSpeak, speak. I'LL don't you're 1,234.5 and 7777777!!!\r\n",
		"\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, \xD0\xBC\xD0\xB8\xD1\x80! ",
		"\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xE3\x80\x82 ",
		"emoji \xF0\x9F\x98\x80 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD   tabs\t\tend  \n",
		"<|endoftext|>",
	};
	size_t cap = 2u << 20, n = 0;
	char *text = malloc(cap + 256);
	for (size_t i = 0; n < cap; i++) {
		size_t l = strlen(parts[i % 6]);
		memcpy(text + n, parts[i % 6], l);
		n += l;
	}
	for (int k = 0; k < 6; k++) { /* the tokenizers whose decode gives the text back (not sp_unk, sp_ascii: <unk>) */
		if (!toks[k])
			continue;
		struct sb_err err = {0};
		int32_t *ids = NULL;
		size_t n_ids = 0;
		double t0 = now();
		int rc = sb_tok_encode(toks[k], text, n, &ids, &n_ids, &err);
		double dt = now() - t0;
		char *out = NULL;
		size_t n_out = 0;
		if (rc == 0)
			rc = sb_tok_decode(toks[k], ids, n_ids, &out, &n_out, &err);
		SB_CHECK(rc == 0 && n_out == n && memcmp(out, text, n) == 0,
			 "%s: %.2f MB encoded to %zu ids and decoded back identically (%s)", KINDS[k], n / 1e6, n_ids,
			 rc ? err.msg : "ok");
		printf("# %s: encode rate %.2f MB/s (%.3f s for %zu bytes)\n", KINDS[k], n / 1e6 / dt, dt, n);
		free(ids);
		free(out);
	}
	free(text);
}

/* qwen2's added token "ne\u0301e" (normalized, content not NFC): matched by its NFC (the
 * cases), but its token string is the content as written, as HF's token_to_id and id_to_token
 * (HF: token_to_id("ne\u0301e") = 802, token_to_id("n\u00e9e") = None). */
static void check_nfc_added(void)
{
	struct sb_tok *t = toks[2];
	if (!t)
		return;
	int id = sb_tok_id(t, "ne\xCC\x81" "e"), id_nfc = sb_tok_id(t, "n\xC3\xA9" "e");
	char buf[16];
	int n = sb_tok_token_bytes(t, 802, buf, sizeof buf);
	SB_CHECK(id == 802 && id_nfc == -1 && n == 5 && !memcmp(buf, "ne\xCC\x81" "e", 5),
		 "qwen2: the added token \"ne\\u0301e\" is id 802 by its content (%d), not by its NFC (%d), "
		 "and decodes to its content (%d bytes)",
		 id, id_nfc, n);
}

/* sb_tok_utf8_edges: a piece cut at byte offsets loses the partial characters at its edges
 * and nothing else */
static void check_utf8_edges(void)
{
	static const struct {
		const char *s;
		size_t beg, end;
	} c[] = {
		{"abc", 0, 3},
		{"", 0, 0},
		{"\xa9" "abc", 1, 4},                   /* the tail of é */
		{"\x82\xac" "ab", 2, 4},               /* the tail of € */
		{"ab\xc3", 0, 2},                     /* é's lead alone */
		{"ab\xe2\x82", 0, 2},                 /* € without its last byte */
		{"ab\xe2\x82\xac", 0, 5},             /* € whole */
		{"ab\xf0\x9f\x98", 0, 2},             /* an emoji without its last byte */
		{"ab\xf0\x9f\x98\x80", 0, 6},         /* whole */
		{"\x80\x80\x80\x80" "a", 3, 5},       /* at most 3 skipped: the 4th is the encoder's to refuse */
		{"\xac" "caf\xc3\xa9", 1, 6},           /* both edges */
		{"a\xff", 0, 2},                      /* not a lead: left for the encoder */
	};
	/* sb_tok_utf8_clean: bytes outside valid characters dropped, in place too */
	static const struct {
		const char *s, *want;
	} cl[] = {{"abc", "abc"},
		  {"a\xc3" "b", "ab"},
		  {"\xa9" "caf\xc3\xa9", "caf\xc3\xa9"},
		  {"x\xe2\x82y\xe2\x82\xacz", "xy\xe2\x82\xacz"},
		  {"\xed\xa0\x80" "s", "s"},       /* a surrogate is not a character */
		  {"\xc0\xaf" "o", "o"},           /* an overlong */
		  {"\xff\xfe", ""}};
	for (size_t i = 0; i < sizeof cl / sizeof cl[0]; i++) {
		char buf[32];
		size_t n = strlen(cl[i].s);
		memcpy(buf, cl[i].s, n);
		size_t k = sb_tok_utf8_clean((const uint8_t *)buf, n, (uint8_t *)buf);
		SB_CHECK(k == strlen(cl[i].want) && !memcmp(buf, cl[i].want, k), "utf8 clean case %zu: %zu bytes kept of %zu, want %zu",
			 i, k, n, strlen(cl[i].want));
	}
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		size_t b = 99, e = 99, n = strlen(c[i].s);
		sb_tok_utf8_edges((const uint8_t *)c[i].s, n, &b, &e);
		SB_CHECK(b == c[i].beg && e == c[i].end, "utf8 edges case %zu (%zu bytes): [%zu, %zu), want [%zu, %zu)", i, n,
			 b, e, c[i].beg, c[i].end);
	}
}

/* The SentencePiece-style paths beyond the cases: a token's bytes against a whole decode (Strip
 * and the Metaspace decoder act on the text's start only), byte tokens under each decoder, and
 * hostile variants of a minimal file (each refused naming the file and the field). */
static void check_sp(void)
{
	struct sb_tok *l2 = toks[3], *gm = toks[5], *un = toks[6], *as = toks[7];
	if (!l2 || !gm || !un || !as)
		return;
	struct sb_err err = {0};
	const char *t_ = "\xE2\x96\x81t"; /* "▁t", the first merge of both models */
	struct {
		struct sb_tok *t;
		const char *name, *one, *two; /* decode of [▁t] and of [▁t, ▁t] */
	} dec[] = {{l2, "llama2 (Strip 1)", "t", "t t"},     {gm, "gemma (no Strip)", " t", " t t"},
		   {un, "sp_unk (Metaspace, always)", "t", "t t"}, {as, "sp_ascii (Metaspace, never)", " t", " t t"}};
	for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++) {
		int32_t ids[2];
		ids[0] = ids[1] = sb_tok_id(dec[i].t, t_);
		char buf[16], *o1 = NULL, *o2 = NULL;
		size_t n1 = 0, n2 = 0;
		int nb = sb_tok_token_bytes(dec[i].t, ids[0], buf, sizeof buf);
		int rc = sb_tok_decode(dec[i].t, ids, 1, &o1, &n1, &err) || sb_tok_decode(dec[i].t, ids, 2, &o2, &n2, &err);
		SB_CHECK(ids[0] >= 0 && nb == 2 && !memcmp(buf, " t", 2) && !rc && !strcmp(o1, dec[i].one) &&
				 !strcmp(o2, dec[i].two),
			 "%s: token bytes of \\u2581t \" t\" (%d bytes), decode \"%s\" and \"%s\" (got \"%s\", \"%s\")",
			 dec[i].name, nb, dec[i].one, dec[i].two, o1 ? o1 : "-", o2 ? o2 : "-");
		free(o1);
		free(o2);
	}
	char buf[16];
	int n = sb_tok_token_bytes(l2, sb_tok_id(l2, "<0xE9>"), buf, sizeof buf);
	SB_CHECK(n == 1 && (unsigned char)buf[0] == 0xE9, "llama2 (ByteFallback): <0xE9> is the byte E9 (%d bytes)", n);
	n = sb_tok_token_bytes(un, sb_tok_id(un, "<0xE9>"), buf, sizeof buf);
	SB_CHECK(n == 6 && !memcmp(buf, "<0xE9>", 6), "sp_unk (Metaspace decoder: no ByteFallback): <0xE9> as written "
						       "(%d bytes)", n);
	SB_CHECK(sb_tok_id(gm, "\t") >= 0 && sb_tok_id(gm, "<0x09>") < 0 && sb_tok_bos(gm) == sb_tok_id(gm, "<bos>") &&
			 sb_tok_bos(l2) == 1,
		 "gemma: the tab is \"\\t\" (id %d), not <0x09>; BOS <bos> (%d); llama2's BOS <s> = 1 (%d)",
		 sb_tok_id(gm, "\t"), sb_tok_bos(gm), sb_tok_bos(l2));

	struct sb_tok *t = NULL;
	int rc = sb_tok_load_mem(SP_BASE, strlen(SP_BASE), "sp.json", &t, &err);
	SB_CHECK(rc == 0, "the minimal SentencePiece-style tokenizer.json loads (%s)", rc ? err.msg : "ok");
	if (t) {
		int32_t *ids = NULL, want[] = {5, 5, 3, 4, 1, 3};
		size_t ni = 0, no = 0;
		char *o = NULL;
		rc = sb_tok_encode(t, "a ab Ab", 7, &ids, &ni, &err);
		int same = rc == 0 && ni == 6 && !memcmp(ids, want, sizeof want);
		rc = rc ? rc : sb_tok_decode(t, ids, ni, &o, &no, &err);
		SB_CHECK(same && rc == 0 && no == 7 && !memcmp(o, "a ab Ab", 7),
			 "minimal SentencePiece-style tokenizer: \"a ab Ab\" -> 5 5 3 4 1 3 (HF's) and back (got %zu ids, "
			 "\"%s\")", ni, o ? o : "-");
		free(ids);
		free(o);
		sb_tok_free(t);
	}
	static const struct hostile v[] = {
		{"{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}", "{\"type\":\"Fuse\"},{\"type\":\"ByteFallback\"}",
		 "decoder.decoders[2]"},
		{"{\"type\":\"Fuse\"},", "", "decoder.decoders[2]"},
		{"{\"type\":\"ByteFallback\"},", "{\"type\":\"ByteFallback\"},{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},"
					       "\"content\":\"b\"},",
		 "decoder.decoders[2]"},
		{"{\"type\":\"ByteFallback\"}", "{\"type\":\"CTC\"}", "decoder.decoders[1]"},
		{"\"content\":\" \",\"start\":1", "\"content\":\"  \",\"start\":1", "decoder.decoders[3].content"},
		{"\"start\":1", "\"start\":-1", "decoder.decoders[3]"},
		{"\"start\":1", "\"start\":1.5", "decoder.decoders[3]"},
		{"\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\"", "\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"Regex\"",
		 "decoder.decoders[0].pattern"},
		{"\"decoder\":{\"type\":\"Sequence\"", "\"decoder\":{\"type\":\"ByteLevel\",\"x\":{\"type\":\"Sequence\"}", "decoder"},
		{"\"decoder\":{\"type\":\"Sequence\"", "\"decoder\":{\"x\":{\"type\":\"Sequence\"}", "decoder"},
		{"{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"}", "{\"type\":\"Prepend\"}", "normalizer.normalizers[0].prepend"},
		{"\"pattern\":{\"String\":\" \"}", "\"pattern\":{\"Regex\":\" \"}", "normalizer.normalizers[1].pattern"},
		{"\"pattern\":{\"String\":\" \"}", "\"pattern\":{\"String\":\"\"}", "normalizer.normalizers[1].pattern"},
		{"{\"type\":\"Prepend\",", "{\"type\":\"Lowercase\",", "normalizer.normalizers[0]"},
		{"\"unk_token\":\"<unk>\"", "\"unk_token\":\"<nope>\"", "model.unk_token"},
		{"\"unk_token\":\"<unk>\"", "\"unk_token\":5", "model.unk_token"},
		{"\"byte_fallback\":true", "\"byte_fallback\":\"yes\"", "model.byte_fallback"},
		{"\"fuse_unk\":true", "\"fuse_unk\":1", "model.fuse_unk"},
		{"\"pre_tokenizer\":null", "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"ab\"}",
		 "pre_tokenizer.replacement"},
		{"\"pre_tokenizer\":null", "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\","
					   "\"prepend_scheme\":\"sometimes\"}",
		 "pre_tokenizer.prepend_scheme"},
		{"\"pre_tokenizer\":null", "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},"
					   "\"behavior\":\"Removed\",\"invert\":false}",
		 "pre_tokenizer.behavior"},
		{"\"pre_tokenizer\":null", "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},"
					   "\"behavior\":\"Isolated\",\"invert\":true}",
		 "pre_tokenizer.invert"},
		{"\"pre_tokenizer\":null", "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\" \"},"
					   "\"behavior\":\"Isolated\",\"invert\":false}",
		 "pre_tokenizer"},
	};
	check_variants(SP_BASE, "SentencePiece-style ", v, sizeof v / sizeof v[0]);
}

int main(void)
{
	const char *top = getenv("SB_TOP");
	snprintf(top_dir, sizeof top_dir, "%s", top ? top : ".");
	load_fixtures();
	check_cases("cases.ndjson");
	check_cases("sp_cases.ndjson");
	check_case_counts();
	check_sp();
	check_api();
	check_nfc_added();
	check_bad_text();
	check_hostile();
	check_bos();
	check_utf8_edges();
	check_rate();
	for (int k = 0; k < NK; k++)
		sb_tok_free(toks[k]);
	return sb_test_done();
}
