/* tokenizer.c — HF tokenizer.json BPE, byte-level and SentencePiece-style (see tokenizer.h and
 * docs/tokenizer.md).
 *
 * Encode pipeline, as HF tokenizers 0.20 runs it:
 *   1. split the text on added tokens whose "normalized" is false (leftmost-longest);
 *   2. each remaining piece: normalise (the normalizer's steps: normalize below), then split it
 *      on the added tokens whose "normalized" is true (their content normalised too: struct
 *      added's key);
 *   3. each remaining piece: pre-tokenize (byte-level: the pattern, pattern_match below, bytes
 *      mapped to the GPT-2 byte-level alphabet, bpe_word; SentencePiece-style: Metaspace or a
 *      literal Split, word_end, characters as symbols, bpe_chars), BPE each pre-token
 *      (merge_syms).
 */
#include "tokenizer.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "json.h"
#include "unicode_nfc.h"
#include "unicode_tab.h"

#define MAX_ID (1 << 24)                   /* ids at or above are refused ("huge") */
#define MAX_FILE ((size_t)1 << 30)          /* tokenizer.json size limit */

/* ---- the three patterns, recognised by their exact text ---- */

static const char PAT_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char PAT_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
				 "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char PAT_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
				"?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The parameters that tell the patterns apart. */
struct pattern {
	int contr_ci;     /* contractions case-insensitive: (?i:'s|...) */
	int letter_class; /* letters: [^\r\n\p{L}\p{N}]?\p{L}+ (1) or ` ?\p{L}+` (0) */
	int num_max;      /* \p{N}{1,num_max} (0: ` ?\p{N}+`) */
	int punct_nl;     /* ` ?[^\s\p{L}\p{N}]+[\r\n]*` (1) or without [\r\n]* (0) */
	int nl_alt;       /* the alternative \s*[\r\n]+ */
};

static const struct pattern P_GPT2 = {0, 0, 0, 0, 0};
static const struct pattern P_LLAMA3 = {1, 1, 3, 1, 1};
static const struct pattern P_QWEN2 = {1, 1, 1, 1, 1};

/* ---- hash maps ---- */

static uint64_t fnv1a(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ULL;
	}
	return h ^ (h >> 29);
}

/* string -> id; keys borrowed (they live in struct sb_tok). */
struct strmap {
	const char **key;
	uint32_t *klen;
	int32_t *val;
	size_t cap, n; /* cap: power of two */
};

static int strmap_init(struct strmap *m, size_t n)
{
	size_t cap = 16;
	while (cap < 2 * n + 2)
		cap *= 2;
	m->key = calloc(cap, sizeof *m->key);
	m->klen = calloc(cap, sizeof *m->klen);
	m->val = calloc(cap, sizeof *m->val);
	m->cap = cap;
	m->n = 0;
	return m->key && m->klen && m->val ? 0 : -1;
}

static void strmap_free(struct strmap *m)
{
	free(m->key);
	free(m->klen);
	free(m->val);
}

/* Returns the slot of key (key[slot] == NULL when absent). */
static size_t strmap_slot(const struct strmap *m, const char *k, size_t n)
{
	size_t i = fnv1a(k, n) & (m->cap - 1);
	while (m->key[i] && !(m->klen[i] == n && memcmp(m->key[i], k, n) == 0))
		i = (i + 1) & (m->cap - 1);
	return i;
}

static int32_t strmap_get(const struct strmap *m, const char *k, size_t n)
{
	if (!m->cap)
		return -1;
	size_t i = strmap_slot(m, k, n);
	return m->key[i] ? m->val[i] : -1;
}

/* Insert (capacity was sized up front); returns 1 when the key was already there. */
static int strmap_put(struct strmap *m, const char *k, size_t n, int32_t v)
{
	size_t i = strmap_slot(m, k, n);
	if (m->key[i])
		return 1;
	m->key[i] = k;
	m->klen[i] = (uint32_t)n;
	m->val[i] = v;
	m->n++;
	return 0;
}

/* (left id, right id) -> (rank, merged id) */
struct pairmap {
	uint64_t *key; /* (a << 32 | b) + 1; 0 = empty */
	int32_t *rank, *merged;
	size_t cap;
};

static int pairmap_init(struct pairmap *m, size_t n)
{
	size_t cap = 16;
	while (cap < 2 * n + 2)
		cap *= 2;
	m->key = calloc(cap, sizeof *m->key);
	m->rank = calloc(cap, sizeof *m->rank);
	m->merged = calloc(cap, sizeof *m->merged);
	m->cap = cap;
	return m->key && m->rank && m->merged ? 0 : -1;
}

static void pairmap_free(struct pairmap *m)
{
	free(m->key);
	free(m->rank);
	free(m->merged);
}

static size_t pairmap_slot(const struct pairmap *m, int32_t a, int32_t b)
{
	uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
	uint64_t h = k * 0x9E3779B97F4A7C15ULL;
	size_t i = (size_t)(h ^ (h >> 32)) & (m->cap - 1);
	while (m->key[i] && m->key[i] != k)
		i = (i + 1) & (m->cap - 1);
	return i;
}

/* rank of the merge (a, b), -1 if none; *merged receives its id. */
static int32_t pairmap_get(const struct pairmap *m, int32_t a, int32_t b, int32_t *merged)
{
	size_t i = pairmap_slot(m, a, b);
	if (!m->key[i])
		return -1;
	*merged = m->merged[i];
	return m->rank[i];
}

/* ---- the tokenizer ---- */

struct added {
	char *content;
	size_t len;
	int32_t id;
	int normalized;
	char *key; /* the text matched: content, or its NFC when normalized under an NFC normalizer */
	size_t key_len;
};

/* A normalizer step (applied in order), or a decoder's per-token Replace. */
enum { NS_NFC, NS_PREPEND, NS_REPLACE };
struct step {
	int kind;
	char *a, *b; /* Prepend: a; Replace: a -> b */
	size_t na, nb;
};

/* pre-tokenizers; Split behaviours; Metaspace prepend schemes; decoders */
enum { PRE_PATTERN, PRE_NONE, PRE_METASPACE, PRE_SPLIT };
enum { SPLIT_PREVIOUS, SPLIT_NEXT, SPLIT_ISOLATED };
enum { SCHEME_ALWAYS, SCHEME_FIRST, SCHEME_NEVER };
enum { DEC_BYTELEVEL, DEC_CHAIN, DEC_METASPACE };

struct sb_tok {
	int n_ids;             /* largest id + 1 */
	char **model_str;      /* id -> model vocab string (NULL: not in the model vocab) */
	uint32_t *model_len;
	char *bytes;           /* decoded bytes of every id, concatenated */
	size_t *bytes_off;     /* id -> offset into bytes; bytes_off[n_ids] = end */
	unsigned char *has_id; /* id is in the model vocab or an added token */
	struct strmap vocab;   /* model vocab string -> id */
	struct strmap added_map;
	struct pairmap merges;
	int32_t byte_id[256]; /* id of each byte's single-character token, -1 if none */
	int ignore_merges;
	/* symbols: 0 the bytes of a pre-token in the GPT-2 byte-level alphabet (a ByteLevel
	 * pre-tokenizer); 1 its characters, as they are (SentencePiece-style files) */
	int chars;
	int byte_fallback, fuse_unk; /* chars: a character missing from the vocab */
	int32_t unk_id;              /* -1: none */
	int32_t fb_id[256];          /* id of <0xHH>, -1 if none */
	struct step *norm;           /* the normalizer's steps */
	size_t n_norm;
	int pre;                     /* PRE_* */
	char rep[8];                 /* Metaspace's replacement character (pre-tokenizer) */
	size_t rep_len;
	int scheme, ms_split;
	char *split_s;               /* Split's literal pattern */
	size_t split_len;
	int split_beh;
	int dec;                     /* DEC_* */
	struct step *drep;           /* a Sequence decoder's Replace steps, per token, in order */
	size_t n_drep;
	int dec_fallback;            /* ByteFallback: a token <0xHH> is that byte */
	char strip_c[8];             /* Strip after Fuse: up to strip_start leading and strip_stop */
	size_t strip_len;            /* trailing strip_c of the whole text */
	int strip_start, strip_stop;
	char drep_ms[8];             /* Metaspace decoder's replacement */
	size_t drep_ms_len;
	int dec_scheme;
	int32_t bos;          /* the post-processor's leading special token of a single sequence, -1 */
	struct pattern pat;
	struct added *added;
	size_t n_added;
	/* added tokens by first byte, longest first: set 0 normalized false, set 1 true */
	size_t *by_first[2][256];
	size_t n_first[2][256];
};

/* GPT-2 bytes_to_unicode: byte -> code point, and back (code points < 324). */
static uint32_t byte_cp(int b)
{
	if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
		return (uint32_t)b;
	int n = 0;
	for (int x = 0; x < b; x++)
		if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF)))
			n++;
	return 256u + (uint32_t)n;
}

/* The byte-level form of each byte as UTF-8 (1 or 2 bytes) and the inverse map. */
static unsigned char bl_utf8[256][2];
static unsigned char bl_len[256];
static int16_t bl_inv[324];
static pthread_once_t bl_once = PTHREAD_ONCE_INIT;

static void bl_init(void)
{
	for (int i = 0; i < 324; i++)
		bl_inv[i] = -1;
	for (int b = 0; b < 256; b++) {
		uint32_t cp = byte_cp(b);
		bl_inv[cp] = (int16_t)b;
		if (cp < 0x80) {
			bl_utf8[b][0] = (unsigned char)cp;
			bl_len[b] = 1;
		} else {
			bl_utf8[b][0] = (unsigned char)(0xC0 | (cp >> 6));
			bl_utf8[b][1] = (unsigned char)(0x80 | (cp & 0x3F));
			bl_len[b] = 2;
		}
	}
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
enum { C_OTHER = 0, C_L = 1, C_N = 2, C_S = 3 };

static int uc_class(uint32_t cp)
{
	if (cp < 0x80) {
		if (cp >= 'a' && cp <= 'z')
			return C_L;
		if (cp >= 'A' && cp <= 'Z')
			return C_L;
		if (cp >= '0' && cp <= '9')
			return C_N;
		if (cp == ' ' || (cp >= 9 && cp <= 13))
			return C_S;
		return C_OTHER;
	}
	return sb_uc_lookup(sb_uc_class, NELEM(sb_uc_class), cp);
}

/* ---- the pre-tokenizer ---- */

/* One code point of the piece: class and byte extent. */
struct cpi {
	uint32_t cp;
	int cls;
	size_t end; /* byte offset just after it */
};

static struct cpi cp_at(const unsigned char *s, size_t i)
{
	struct cpi r;
	int len;
	r.cp = sb_utf8_at(s, i, &len);
	r.cls = uc_class(r.cp);
	r.end = i + (size_t)len;
	return r;
}

/* End of the run of class cls starting at i (i itself when none). */
static size_t run_of(const unsigned char *s, size_t n, size_t i, int cls)
{
	while (i < n) {
		struct cpi c = cp_at(s, i);
		if (c.cls != cls)
			break;
		i = c.end;
	}
	return i;
}

/* Case fold for the contraction letters: Oniguruma's (?i) folds ASCII letters and U+017F
 * LATIN SMALL LETTER LONG S (folds to 's'); no other code point folds to t r e v m l d. */
static uint32_t fold(uint32_t cp, int ci)
{
	if (!ci)
		return cp;
	if (cp >= 'A' && cp <= 'Z')
		return cp + 32;
	if (cp == 0x17F)
		return 's';
	return cp;
}

/* The end of the match that starts at i (the patterns match every character, and never the
 * empty string, so a match always starts at i and ends after it). The alternatives are tried
 * in order; the first that matches wins (each greedy, backtracking as the regex would). */
static size_t pattern_match(const struct pattern *p, const unsigned char *s, size_t n, size_t i)
{
	struct cpi c = cp_at(s, i);
	struct cpi nx = {0, -1, c.end};
	if (c.end < n)
		nx = cp_at(s, c.end);

	/* 's|'t|'re|'ve|'m|'ll|'d */
	if (c.cp == '\'' && c.end < n) {
		uint32_t a = fold(nx.cp, p->contr_ci);
		if (a == 's' || a == 't' || a == 'm' || a == 'd')
			return nx.end;
		if ((a == 'r' || a == 'v' || a == 'l') && nx.end < n) {
			struct cpi b = cp_at(s, nx.end);
			uint32_t bf = fold(b.cp, p->contr_ci);
			if ((a == 'r' && bf == 'e') || (a == 'v' && bf == 'e') || (a == 'l' && bf == 'l'))
				return b.end;
		}
	}
	/* letters */
	if (c.cls == C_L)
		return run_of(s, n, c.end, C_L);
	if (nx.cls == C_L) {
		if (p->letter_class ? (c.cp != '\r' && c.cp != '\n' && c.cls != C_N) : c.cp == ' ')
			return run_of(s, n, nx.end, C_L);
	}
	/* numbers */
	if (p->num_max) {
		if (c.cls == C_N) {
			size_t e = c.end;
			for (int k = 1; k < p->num_max && e < n; k++) {
				struct cpi d = cp_at(s, e);
				if (d.cls != C_N)
					break;
				e = d.end;
			}
			return e;
		}
	} else {
		if (c.cls == C_N)
			return run_of(s, n, c.end, C_N);
		if (c.cp == ' ' && nx.cls == C_N)
			return run_of(s, n, nx.end, C_N);
	}
	/* ` ?[^\s\p{L}\p{N}]+` then [\r\n]* */
	size_t e = 0;
	if (c.cls == C_OTHER)
		e = run_of(s, n, c.end, C_OTHER);
	else if (c.cp == ' ' && nx.cls == C_OTHER)
		e = run_of(s, n, nx.end, C_OTHER);
	if (e) {
		if (p->punct_nl)
			while (e < n && (s[e] == '\r' || s[e] == '\n'))
				e++;
		return e;
	}
	/* here c is white space: W = the run of white space from i */
	size_t w_end = c.end, last_start = i, last_nl_end = 0;
	if (c.cp == '\r' || c.cp == '\n')
		last_nl_end = c.end;
	while (w_end < n) {
		struct cpi d = cp_at(s, w_end);
		if (d.cls != C_S)
			break;
		last_start = w_end;
		w_end = d.end;
		if (d.cp == '\r' || d.cp == '\n')
			last_nl_end = d.end;
	}
	/* \s*[\r\n]+ : \s* backs off to the last CR or LF of W, [\r\n]+ takes it */
	if (p->nl_alt && last_nl_end)
		return last_nl_end;
	/* \s+(?!\S) : all of W at the end of the piece, else W less its last character */
	if (w_end == n)
		return w_end;
	if (last_start > i)
		return last_start;
	/* \s+ */
	return w_end;
}

/* ---- BPE ---- */

struct sym {
	int32_t id;
	int32_t prev, next;
	int32_t alive;
};

struct merge_item {
	int32_t rank, pos, merged;
};

/* scratch buffers of one encode call */
struct scratch {
	struct sym *sym;
	size_t sym_cap;
	struct merge_item *heap;
	size_t heap_n, heap_cap;
	char *map; /* byte-level form of a pre-token (ignore_merges) */
	size_t map_cap;
	char *buf; /* a piece with Metaspace's replacements */
	size_t buf_cap;
	int32_t *ids;
	size_t n_ids, ids_cap;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 64;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * elem);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static int emit(struct scratch *sc, int32_t id)
{
	if (grow((void **)&sc->ids, &sc->ids_cap, sc->n_ids + 1, sizeof *sc->ids))
		return -1;
	sc->ids[sc->n_ids++] = id;
	return 0;
}

static int item_less(const struct merge_item *a, const struct merge_item *b)
{
	return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static int heap_push(struct scratch *sc, struct merge_item it)
{
	if (grow((void **)&sc->heap, &sc->heap_cap, sc->heap_n + 1, sizeof *sc->heap))
		return -1;
	size_t i = sc->heap_n++;
	while (i > 0) {
		size_t up = (i - 1) / 2;
		if (!item_less(&it, &sc->heap[up]))
			break;
		sc->heap[i] = sc->heap[up];
		i = up;
	}
	sc->heap[i] = it;
	return 0;
}

static struct merge_item heap_pop(struct scratch *sc)
{
	struct merge_item top = sc->heap[0], last = sc->heap[--sc->heap_n];
	size_t i = 0, n = sc->heap_n;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		const struct merge_item *best = &last;
		if (l < n && item_less(&sc->heap[l], best)) {
			m = l;
			best = &sc->heap[l];
		}
		if (r < n && item_less(&sc->heap[r], best))
			m = r;
		if (m == i)
			break;
		sc->heap[i] = sc->heap[m];
		i = m;
	}
	if (n)
		sc->heap[i] = last;
	return top;
}

static int push_pair(const struct sb_tok *t, struct scratch *sc, int32_t pos)
{
	int32_t merged, nx = sc->sym[pos].next;
	if (nx < 0)
		return 0;
	int32_t rank = pairmap_get(&t->merges, sc->sym[pos].id, sc->sym[nx].id, &merged);
	if (rank < 0)
		return 0;
	return heap_push(sc, (struct merge_item){rank, pos, merged});
}

/* The merges on ns symbols (sc->sym), as HF's Word::merge_all: the lowest-rank merge first,
 * the leftmost on ties; the ids emitted. */
static int merge_syms(const struct sb_tok *t, struct scratch *sc, int32_t ns)
{
	if (!ns)
		return 0;
	sc->sym[ns - 1].next = -1;
	sc->heap_n = 0;
	for (int32_t i = 0; i + 1 < ns; i++)
		if (push_pair(t, sc, i))
			return -1;
	while (sc->heap_n) {
		struct merge_item top = heap_pop(sc);
		struct sym *a = &sc->sym[top.pos];
		if (!a->alive || a->next < 0)
			continue;
		int32_t merged;
		if (pairmap_get(&t->merges, a->id, sc->sym[a->next].id, &merged) < 0 || merged != top.merged)
			continue;
		int32_t b = a->next;
		a->id = merged;
		a->next = sc->sym[b].next;
		sc->sym[b].alive = 0;
		if (a->next >= 0)
			sc->sym[a->next].prev = top.pos;
		if (a->prev >= 0 && push_pair(t, sc, a->prev))
			return -1;
		if (push_pair(t, sc, top.pos))
			return -1;
	}
	for (int32_t i = 0; i >= 0; i = sc->sym[i].next)
		if (emit(sc, sc->sym[i].id))
			return -1;
	return 0;
}

/* BPE of one pre-token (raw bytes), as HF's BPE::merge_word + Word::merge_all: one symbol
 * per byte (a byte whose token is missing from the vocab is dropped, as HF does without
 * unk_token), then the merges. */
static int bpe_word(const struct sb_tok *t, struct scratch *sc, const unsigned char *w, size_t n)
{
	if (t->ignore_merges) {
		size_t m = 0;
		if (grow((void **)&sc->map, &sc->map_cap, 2 * n, 1))
			return -1;
		for (size_t i = 0; i < n; i++)
			for (int k = 0; k < bl_len[w[i]]; k++)
				sc->map[m++] = (char)bl_utf8[w[i]][k];
		int32_t id = strmap_get(&t->vocab, sc->map, m);
		if (id >= 0)
			return emit(sc, id);
	}
	if (grow((void **)&sc->sym, &sc->sym_cap, n, sizeof *sc->sym))
		return -1;
	int32_t ns = 0;
	for (size_t i = 0; i < n; i++) {
		int32_t id = t->byte_id[w[i]];
		if (id < 0)
			continue;
		sc->sym[ns] = (struct sym){id, ns - 1, ns + 1, 1};
		ns++;
	}
	return merge_syms(t, sc, ns);
}

/* BPE of one word of characters (SentencePiece-style files), as HF's BPE::merge_word: a
 * character in the vocab is its symbol; one that is not is its bytes' <0xHH> tokens under
 * byte_fallback when the vocab has all of them, else <unk> (consecutive ones fused into one
 * under fuse_unk), else dropped. As in HF, a pending <unk> is placed only before the next
 * character found in the vocab (or at the end), so after the byte tokens of characters in
 * between; under fuse_unk those characters do not break the fused run. */
static int bpe_chars(const struct sb_tok *t, struct scratch *sc, const unsigned char *w, size_t n)
{
	if (t->ignore_merges) {
		int32_t id = strmap_get(&t->vocab, (const char *)w, n);
		if (id >= 0)
			return emit(sc, id);
	}
	if (grow((void **)&sc->sym, &sc->sym_cap, n + 1, sizeof *sc->sym))
		return -1;
	int32_t ns = 0;
	int pend = 0;
#define ADD_SYM(x) (sc->sym[ns] = (struct sym){(x), ns - 1, ns + 1, 1}, ns++)
	for (size_t i = 0; i < n;) {
		int len;
		sb_utf8_at(w, i, &len);
		int32_t id = strmap_get(&t->vocab, (const char *)w + i, (size_t)len);
		if (id >= 0) {
			if (pend)
				ADD_SYM(t->unk_id);
			pend = 0;
			ADD_SYM(id);
		} else {
			int fb = t->byte_fallback;
			for (int k = 0; fb && k < len; k++)
				fb = t->fb_id[w[i + (size_t)k]] >= 0;
			if (fb) {
				for (int k = 0; k < len; k++)
					ADD_SYM(t->fb_id[w[i + (size_t)k]]);
			} else if (t->unk_id >= 0) {
				if (pend && !t->fuse_unk)
					ADD_SYM(t->unk_id);
				pend = 1;
			}
		}
		i += (size_t)len;
	}
	if (pend)
		ADD_SYM(t->unk_id);
#undef ADD_SYM
	return merge_syms(t, sc, ns);
}

/* Does s[i..n) begin with the delimiter d (nd bytes)? */
static int at_delim(const unsigned char *s, size_t n, size_t i, const char *d, size_t nd)
{
	return nd && nd <= n - i && memcmp(s + i, d, nd) == 0;
}

/* The first occurrence of d in s[i..n) (n when none). */
static size_t find_delim(const unsigned char *s, size_t n, size_t i, const char *d, size_t nd)
{
	for (; i < n; i++)
		if (at_delim(s, n, i, d, nd))
			return i;
	return n;
}

/* The end of the word that starts at i (i < n) for the character pre-tokenizers:
 *   none       the whole piece;
 *   Split      a literal pattern (HF's non-overlapping leftmost matches) with behaviour
 *              MergedWithPrevious (a match ends a word), MergedWithNext (a match starts
 *              one) or Isolated (a match is a word);
 *   Metaspace  with split, MergedWithNext on the replacement character; a space counts as
 *              one too, so that the same words come out of the text before the spaces are
 *              replaced (sb_tok_pretokenize) as after (encode). */
static size_t word_end(const struct sb_tok *t, const unsigned char *s, size_t n, size_t i)
{
	if (t->pre == PRE_METASPACE) {
		if (!t->ms_split)
			return n;
		size_t j = i + (s[i] == ' ' ? 1 : at_delim(s, n, i, t->rep, t->rep_len) ? t->rep_len : 0);
		for (; j < n; j++)
			if (s[j] == ' ' || at_delim(s, n, j, t->rep, t->rep_len))
				return j;
		return n;
	}
	if (t->pre == PRE_SPLIT) {
		const char *d = t->split_s;
		size_t nd = t->split_len;
		int here = at_delim(s, n, i, d, nd);
		if (t->split_beh == SPLIT_ISOLATED)
			return here ? i + nd : find_delim(s, n, i, d, nd);
		if (t->split_beh == SPLIT_NEXT)
			return find_delim(s, n, here ? i + nd : i, d, nd);
		size_t p = find_delim(s, n, i, d, nd);
		return p < n ? p + nd : n;
	}
	return n;
}

/* Pre-tokenize a piece and BPE each pre-token. at0: the piece begins the text (Metaspace's
 * prepend_scheme "first": HF's offsets_original().0 == 0). */
static int encode_piece(const struct sb_tok *t, struct scratch *sc, const unsigned char *s, size_t n, int at0)
{
	if (t->pre == PRE_PATTERN) {
		for (size_t i = 0; i < n;) {
			size_t e = pattern_match(&t->pat, s, n, i);
			if (bpe_word(t, sc, s + i, e - i))
				return -1;
			i = e;
		}
		return 0;
	}
	if (t->pre == PRE_METASPACE) { /* spaces replaced, the replacement prepended per the scheme */
		size_t m = 0;
		if (grow((void **)&sc->buf, &sc->buf_cap, t->rep_len * (n + 1), 1))
			return -1;
		int pre = t->scheme == SCHEME_ALWAYS || (t->scheme == SCHEME_FIRST && at0);
		if (pre && n && s[0] != ' ' && !at_delim(s, n, 0, t->rep, t->rep_len)) {
			memcpy(sc->buf, t->rep, t->rep_len);
			m = t->rep_len;
		}
		for (size_t i = 0; i < n; i++) {
			if (s[i] == ' ') {
				memcpy(sc->buf + m, t->rep, t->rep_len);
				m += t->rep_len;
			} else {
				sc->buf[m++] = (char)s[i];
			}
		}
		s = (const unsigned char *)sc->buf;
		n = m;
	}
	for (size_t i = 0; i < n;) {
		size_t e = word_end(t, s, n, i);
		if (bpe_chars(t, sc, s + i, e - i))
			return -1;
		i = e;
	}
	return 0;
}

/* s with every occurrence of a (non-overlapping, leftmost first) replaced by b: *out
 * malloc'd, NUL-terminated. */
static int replace_all(const char *s, size_t n, const char *a, size_t na, const char *b, size_t nb, char **out,
		       size_t *n_out)
{
	size_t k = 0;
	for (size_t i = 0; i < n;)
		if (at_delim((const unsigned char *)s, n, i, a, na)) {
			k++;
			i += na;
		} else {
			i++;
		}
	size_t m = n - k * na + k * nb, o = 0;
	char *r = malloc(m + 1);
	if (!r)
		return -1;
	for (size_t i = 0; i < n;)
		if (at_delim((const unsigned char *)s, n, i, a, na)) {
			memcpy(r + o, b, nb);
			o += nb;
			i += na;
		} else {
			r[o++] = s[i++];
		}
	r[o] = 0;
	*out = r;
	*n_out = o;
	return 0;
}

/* The normalizer's steps on s (valid UTF-8): *out malloc'd and NUL-terminated, or NULL with
 * *n_out = n when the text is unchanged. NFC as lib/unicode_nfc.h; Prepend to a non-empty
 * text; Replace of a literal string. */
static int normalize(const struct sb_tok *t, const char *s, size_t n, char **out, size_t *n_out, struct sb_err *err)
{
	char *cur = NULL;
	size_t m = n;
	for (size_t k = 0; k < t->n_norm; k++) {
		const struct step *st = &t->norm[k];
		const char *in = cur ? cur : s;
		char *next = NULL;
		size_t nn = m;
		int rc = 0;
		if (st->kind == NS_NFC) {
			rc = sb_nfc_normalize(in, m, &next, &nn, err);
		} else if (st->kind == NS_PREPEND) {
			if (m && (next = malloc(st->na + m + 1))) {
				memcpy(next, st->a, st->na);
				memcpy(next + st->na, in, m);
				nn = st->na + m;
				next[nn] = 0;
			} else if (m) {
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			}
		} else if (replace_all(in, m, st->a, st->na, st->b, st->nb, &next, &nn)) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		}
		if (rc) {
			free(cur);
			return rc;
		}
		if (next) {
			free(cur);
			cur = next;
			m = nn;
		}
	}
	*out = cur;
	*n_out = m;
	return 0;
}

/* Leftmost-longest added token of set `set` in s[from..n): returns its index, or -1. */
static long find_added(const struct sb_tok *t, int set, const unsigned char *s, size_t from, size_t n,
		       size_t *at)
{
	for (size_t i = from; i < n; i++) {
		size_t k = t->n_first[set][s[i]];
		const size_t *list = t->by_first[set][s[i]];
		for (size_t j = 0; j < k; j++) {
			const struct added *a = &t->added[list[j]];
			if (a->key_len <= n - i && memcmp(a->key, s + i, a->key_len) == 0) {
				*at = i;
				return (long)list[j];
			}
		}
	}
	return -1;
}

/* Pieces between the non-normalized added tokens: normalise, split on the normalized ones.
 * at0: the piece begins the text. */
static int encode_normalized(const struct sb_tok *t, struct scratch *sc, const unsigned char *s, size_t n, int at0,
			     struct sb_err *err)
{
	char *norm = NULL; /* NULL: the normalizer left the piece as it is */
	SB_TRY(normalize(t, (const char *)s, n, &norm, &n, err));
	if (norm)
		s = (const unsigned char *)norm;
	size_t i = 0, at;
	int rc = 0;
	while (i < n) {
		long k = find_added(t, 1, s, i, n, &at);
		size_t stop = k < 0 ? n : at;
		if ((stop > i && encode_piece(t, sc, s + i, stop - i, at0 && i == 0)) ||
		    (k >= 0 && emit(sc, t->added[k].id))) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			break;
		}
		if (k < 0)
			break;
		i = at + t->added[k].key_len;
	}
	free(norm);
	return rc;
}

int sb_tok_encode(const struct sb_tok *t, const char *text, size_t n, int32_t **ids, size_t *n_ids,
		  struct sb_err *err)
{
	*ids = NULL;
	*n_ids = 0;
	size_t bad = sb_utf8_check(text, n);
	if (bad != (size_t)-1)
		return SB_ERR(err, SB_EDATA, "text: byte offset %zu: invalid UTF-8", bad);
	struct scratch sc = {0};
	const unsigned char *s = (const unsigned char *)text;
	size_t i = 0, at;
	int rc = 0;
	while (i < n) {
		long k = find_added(t, 0, s, i, n, &at);
		size_t stop = k < 0 ? n : at;
		if (stop > i && (rc = encode_normalized(t, &sc, s + i, stop - i, i == 0, err)))
			break;
		if (k < 0)
			break;
		if (emit(&sc, t->added[k].id)) {
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			break;
		}
		i = at + t->added[k].key_len;
	}
	free(sc.sym);
	free(sc.heap);
	free(sc.map);
	free(sc.buf);
	if (rc) {
		free(sc.ids);
		return rc;
	}
	if (!sc.ids && !(sc.ids = malloc(sizeof *sc.ids)))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	*ids = sc.ids;
	*n_ids = sc.n_ids;
	return 0;
}

int sb_tok_pretokenize(const struct sb_tok *t, const char *text, size_t n, size_t **ends, size_t *n_ends,
		       struct sb_err *err)
{
	*ends = NULL;
	*n_ends = 0;
	size_t bad = sb_utf8_check(text, n);
	if (bad != (size_t)-1)
		return SB_ERR(err, SB_EDATA, "text: byte offset %zu: invalid UTF-8", bad);
	size_t cap = 0, m = 0, *e = NULL;
	for (size_t i = 0; i < n;) {
		i = t->pre == PRE_PATTERN ? pattern_match(&t->pat, (const unsigned char *)text, n, i)
					  : word_end(t, (const unsigned char *)text, n, i);
		if (grow((void **)&e, &cap, m + 1, sizeof *e)) {
			free(e);
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		}
		e[m++] = i;
	}
	if (!e && !(e = malloc(sizeof *e)))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	*ends = e;
	*n_ends = m;
	return 0;
}

/* ---- decode ---- */

/* The string of an id as HF's id_to_token gives it (an added token's content first), or "". */
static const char *id_str(const struct sb_tok *t, int32_t id, size_t *len)
{
	for (size_t i = 0; i < t->n_added; i++)
		if (t->added[i].id == id) {
			*len = t->added[i].len;
			return t->added[i].content;
		}
	*len = t->model_str[id] ? t->model_len[id] : 0;
	return t->model_str[id] ? t->model_str[id] : "";
}

int sb_tok_token_bytes(const struct sb_tok *t, int32_t id, char *buf, size_t cap)
{
	if (!t || id < 0 || id >= t->n_ids || !t->has_id[id])
		return -1;
	size_t len = t->bytes_off[id + 1] - t->bytes_off[id];
	memcpy(buf, t->bytes + t->bytes_off[id], len < cap ? len : cap);
	return (int)len;
}

int sb_tok_decode(const struct sb_tok *t, const int32_t *ids, size_t n, char **out, size_t *n_out,
		  struct sb_err *err)
{
	*out = NULL;
	*n_out = 0;
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if (ids[i] < 0 || ids[i] >= t->n_ids || !t->has_id[ids[i]])
			return SB_ERR(err, SB_EDATA, "ids[%zu]: id %ld is not in the vocabulary (size %d)", i,
				      (long)ids[i], t->n_ids);
		total += t->bytes_off[ids[i] + 1] - t->bytes_off[ids[i]];
	}
	char *o = malloc(total + 1);
	if (!o)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (i == 0 && t->dec == DEC_METASPACE && t->dec_scheme != SCHEME_NEVER) {
			/* HF's Metaspace decoder drops every replacement character of the first token */
			size_t len;
			const char *src = id_str(t, ids[0], &len);
			for (size_t j = 0; j < len;)
				if (at_delim((const unsigned char *)src, len, j, t->drep_ms, t->drep_ms_len))
					j += t->drep_ms_len;
				else
					o[m++] = src[j++];
			continue;
		}
		size_t len = t->bytes_off[ids[i] + 1] - t->bytes_off[ids[i]];
		memcpy(o + m, t->bytes + t->bytes_off[ids[i]], len);
		m += len;
	}
	if (t->dec == DEC_CHAIN && t->strip_len) { /* Strip after Fuse: the whole text's ends */
		size_t b = 0, sl = t->strip_len;
		for (int k = 0; k < t->strip_start && b + sl <= m && memcmp(o + b, t->strip_c, sl) == 0; k++)
			b += sl;
		for (int k = 0; k < t->strip_stop && m >= b + sl && memcmp(o + m - sl, t->strip_c, sl) == 0; k++)
			m -= sl;
		memmove(o, o + b, m - b);
		m -= b;
	}
	o[m] = 0;
	*out = o;
	*n_out = m;
	return 0;
}

/* ---- queries ---- */

int sb_tok_vocab_size(const struct sb_tok *t) { return t ? t->n_ids : 0; }

int sb_tok_id(const struct sb_tok *t, const char *token)
{
	if (!t || !token)
		return -1;
	size_t n = strlen(token);
	int32_t id = strmap_get(&t->added_map, token, n);
	return id >= 0 ? id : strmap_get(&t->vocab, token, n);
}

void sb_tok_free(struct sb_tok *t)
{
	if (!t)
		return;
	if (t->model_str)
		for (int i = 0; i < t->n_ids; i++)
			free(t->model_str[i]);
	free(t->model_str);
	free(t->model_len);
	free(t->bytes);
	free(t->bytes_off);
	free(t->has_id);
	strmap_free(&t->vocab);
	strmap_free(&t->added_map);
	pairmap_free(&t->merges);
	for (size_t i = 0; i < t->n_added; i++) {
		if (t->added[i].key != t->added[i].content)
			free(t->added[i].key);
		free(t->added[i].content);
	}
	free(t->added);
	for (size_t k = 0; k < t->n_norm; k++) {
		free(t->norm[k].a);
		free(t->norm[k].b);
	}
	free(t->norm);
	for (size_t k = 0; k < t->n_drep; k++) {
		free(t->drep[k].a);
		free(t->drep[k].b);
	}
	free(t->drep);
	free(t->split_s);
	for (int s = 0; s < 2; s++)
		for (int b = 0; b < 256; b++)
			free(t->by_first[s][b]);
	free(t);
}

/* ---- load ---- */

/* "field is not X" for an optional member that must be null/absent/false/empty. */
static int want_null(const struct sb_json *obj, const char *key, const char *name, const char *path,
		     struct sb_err *err)
{
	const struct sb_json *v = sb_json_get(obj, key);
	if (!v || v->type == SB_JSON_NULL)
		return 0;
	return SB_ERR(err, SB_EDATA, "%s: %s.%s: only null is supported", name, path, key);
}

static int want_false(const struct sb_json *obj, const char *key, const char *name, const char *path,
		      struct sb_err *err)
{
	const struct sb_json *v = sb_json_get(obj, key);
	if (!v || v->type == SB_JSON_NULL || (v->type == SB_JSON_BOOL && !v->boolean))
		return 0;
	return SB_ERR(err, SB_EDATA, "%s: %s.%s: only false is supported", name, path, key);
}

static const char *type_of(const struct sb_json *v)
{
	return sb_json_str(sb_json_get(v, "type"), NULL);
}

static int get_id(const struct sb_json *v, int32_t *id, const char *name, const char *field, struct sb_err *err)
{
	int64_t x;
	/* digits only, as serde reads a u32 (HF refuses 1e3 or 5.0) */
	if (!v || v->type != SB_JSON_NUMBER || !v->text || v->text[strspn(v->text, "0123456789")] != 0 ||
	    sb_json_int64(v, &x) || x < 0 || x >= MAX_ID)
		return SB_ERR(err, SB_EDATA, "%s: %s: id must be an integer in [0, %d)", name, field, MAX_ID);
	*id = (int32_t)x;
	return 0;
}

/* A JSON string member of exactly one character (Metaspace's replacement, Strip's content). */
static int one_char(const struct sb_json *obj, const char *key, char *out, size_t *n_out, const char *name,
		    const char *path, struct sb_err *err)
{
	const struct sb_json *v = sb_json_get(obj, key);
	int len = 0;
	if (v && v->type == SB_JSON_STRING && v->len > 0 && v->len < 8)
		sb_utf8_at((const unsigned char *)v->text, 0, &len);
	if (!len || (size_t)len != v->len)
		return SB_ERR(err, SB_EDATA, "%s: %s.%s: must be a string of one character", name, path, key);
	memcpy(out, v->text, v->len);
	*n_out = v->len;
	return 0;
}

/* A literal pattern {"String": s} (non-empty): a copy in *out. */
static int string_pattern(const struct sb_json *obj, char **out, size_t *n_out, const char *name, const char *path,
			  struct sb_err *err)
{
	const struct sb_json *pat = sb_json_get(obj, "pattern"), *str = sb_json_get(pat, "String");
	if (!str || str->type != SB_JSON_STRING || !str->len)
		return SB_ERR(err, SB_EDATA, "%s: %s.pattern: only a non-empty {\"String\": ...} is supported", name,
			      path);
	if (!(*out = malloc(str->len + 1)))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	memcpy(*out, str->text, str->len + 1);
	*n_out = str->len;
	return 0;
}

/* A Replace step ({"pattern": {"String": a}, "content": b}) appended to *steps. */
static int add_replace(struct step **steps, size_t *n, const struct sb_json *obj, const char *name, const char *path,
		       struct sb_err *err)
{
	const struct sb_json *c = sb_json_get(obj, "content");
	if (!c || c->type != SB_JSON_STRING)
		return SB_ERR(err, SB_EDATA, "%s: %s.content: missing or not a string", name, path);
	struct step *q = realloc(*steps, (*n + 1) * sizeof *q);
	if (!q)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	*steps = q;
	struct step *st = &q[*n];
	*st = (struct step){NS_REPLACE, NULL, NULL, 0, 0};
	SB_TRY(string_pattern(obj, &st->a, &st->na, name, path, err));
	if (!(st->b = malloc(c->len + 1))) {
		free(st->a);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	memcpy(st->b, c->text, c->len + 1);
	st->nb = c->len;
	++*n;
	return 0;
}

/* normalizer: null, NFC, Prepend, Replace (a literal string), or a Sequence of these (nested
 * Sequences flattened), applied in order. */
static int check_normalizer(struct sb_tok *t, const struct sb_json *nz, const char *name, const char *path,
			    struct sb_err *err)
{
	if (!nz || nz->type == SB_JSON_NULL)
		return 0;
	const char *ty = type_of(nz);
	char sub[96];
	if (ty && strcmp(ty, "Sequence") == 0) {
		const struct sb_json *list = sb_json_get(nz, "normalizers");
		if (!list || list->type != SB_JSON_ARRAY)
			return SB_ERR(err, SB_EDATA, "%s: %s.normalizers: missing or not an array", name, path);
		for (size_t i = 0; i < list->n; i++) {
			snprintf(sub, sizeof sub, "%.70s.normalizers[%zu]", path, i);
			SB_TRY(check_normalizer(t, list->items[i], name, sub, err));
		}
		return 0;
	}
	if (ty && strcmp(ty, "Replace") == 0)
		return add_replace(&t->norm, &t->n_norm, nz, name, path, err);
	if (ty && (strcmp(ty, "NFC") == 0 || strcmp(ty, "Prepend") == 0)) {
		const struct sb_json *pp = sb_json_get(nz, "prepend");
		int nfc = ty[0] == 'N';
		if (!nfc && (!pp || pp->type != SB_JSON_STRING))
			return SB_ERR(err, SB_EDATA, "%s: %s.prepend: missing or not a string", name, path);
		struct step *q = realloc(t->norm, (t->n_norm + 1) * sizeof *q);
		if (!q)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		t->norm = q;
		q[t->n_norm] = (struct step){nfc ? NS_NFC : NS_PREPEND, NULL, NULL, 0, 0};
		if (!nfc) {
			if (!(q[t->n_norm].a = malloc(pp->len + 1)))
				return SB_ERR(err, SB_EINTERNAL, "out of memory");
			memcpy(q[t->n_norm].a, pp->text, pp->len + 1);
			q[t->n_norm].na = pp->len;
		}
		t->n_norm++;
		return 0;
	}
	return SB_ERR(err, SB_EDATA,
		      "%s: %s: only null, NFC, Prepend, Replace (a String pattern) or a Sequence of these is "
		      "supported (got %s)",
		      name, path, ty ? ty : "no type");
}

static int check_bytelevel_pre(const struct sb_json *bl, int want_regex, const char *name, const char *field,
			       struct sb_err *err)
{
	if (sb_json_bool(sb_json_get(bl, "add_prefix_space"), 1))
		return SB_ERR(err, SB_EDATA, "%s: %s.add_prefix_space: only false is supported", name, field);
	if (sb_json_bool(sb_json_get(bl, "use_regex"), 1) != want_regex)
		return SB_ERR(err, SB_EDATA, "%s: %s.use_regex: must be %s here", name, field,
			      want_regex ? "true" : "false");
	return 0;
}

/* Metaspace's prepend_scheme ("always", "first", "never"), or, in files written before
 * tokenizers 0.15, add_prefix_space (true: always); absent: always. */
static int ms_scheme(const struct sb_json *ms, int *scheme, const char *name, const char *path, struct sb_err *err)
{
	const struct sb_json *ps = sb_json_get(ms, "prepend_scheme");
	if (!ps || ps->type == SB_JSON_NULL) {
		*scheme = sb_json_bool(sb_json_get(ms, "add_prefix_space"), 1) ? SCHEME_ALWAYS : SCHEME_NEVER;
		return 0;
	}
	const char *v = sb_json_str(ps, "");
	if (!strcmp(v, "always"))
		*scheme = SCHEME_ALWAYS;
	else if (!strcmp(v, "first"))
		*scheme = SCHEME_FIRST;
	else if (!strcmp(v, "never"))
		*scheme = SCHEME_NEVER;
	else
		return SB_ERR(err, SB_EDATA, "%s: %s.prepend_scheme: must be \"always\", \"first\" or \"never\"", name,
			      path);
	return 0;
}

static int check_pre_tokenizer(struct sb_tok *t, const struct sb_json *pt, const char *name, struct sb_err *err)
{
	const char *ty = type_of(pt);
	if (!pt || pt->type == SB_JSON_NULL) { /* SentencePiece-style: each piece is one word */
		t->pre = PRE_NONE;
		t->chars = 1;
		return 0;
	}
	if (ty && strcmp(ty, "Metaspace") == 0) {
		t->pre = PRE_METASPACE;
		t->chars = 1;
		SB_TRY(one_char(pt, "replacement", t->rep, &t->rep_len, name, "pre_tokenizer", err));
		SB_TRY(ms_scheme(pt, &t->scheme, name, "pre_tokenizer", err));
		t->ms_split = sb_json_bool(sb_json_get(pt, "split"), 1);
		return 0;
	}
	if (ty && strcmp(ty, "Split") == 0 && sb_json_get(sb_json_get(pt, "pattern"), "String")) {
		t->pre = PRE_SPLIT; /* a literal pattern (Gemma's Split(" ", MergedWithPrevious)) */
		t->chars = 1;
		SB_TRY(string_pattern(pt, &t->split_s, &t->split_len, name, "pre_tokenizer", err));
		const char *beh = sb_json_str(sb_json_get(pt, "behavior"), "");
		if (!strcmp(beh, "MergedWithPrevious"))
			t->split_beh = SPLIT_PREVIOUS;
		else if (!strcmp(beh, "MergedWithNext"))
			t->split_beh = SPLIT_NEXT;
		else if (!strcmp(beh, "Isolated"))
			t->split_beh = SPLIT_ISOLATED;
		else
			return SB_ERR(err, SB_EDATA, "%s: pre_tokenizer.behavior: only \"MergedWithPrevious\", "
						     "\"MergedWithNext\" or \"Isolated\" is supported",
				      name);
		return want_false(pt, "invert", name, "pre_tokenizer", err);
	}
	t->pre = PRE_PATTERN;
	if (ty && strcmp(ty, "ByteLevel") == 0) {
		SB_TRY(check_bytelevel_pre(pt, 1, name, "pre_tokenizer", err));
		t->pat = P_GPT2;
		return 0;
	}
	if (!ty || strcmp(ty, "Sequence") != 0)
		return SB_ERR(err, SB_EDATA, "%s: pre_tokenizer: only null, ByteLevel, Sequence[Split, ByteLevel], Metaspace or Split (a String "
					     "pattern) is supported",
			      name);
	const struct sb_json *list = sb_json_get(pt, "pretokenizers");
	if (!list || list->type != SB_JSON_ARRAY || list->n != 2 || !type_of(list->items[0]) ||
	    strcmp(type_of(list->items[0]), "Split") != 0 || !type_of(list->items[1]) ||
	    strcmp(type_of(list->items[1]), "ByteLevel") != 0)
		return SB_ERR(err, SB_EDATA,
			      "%s: pre_tokenizer.pretokenizers: only [Split, ByteLevel] is supported", name);
	const struct sb_json *sp = list->items[0];
	const char *re = sb_json_str(sb_json_get(sb_json_get(sp, "pattern"), "Regex"), NULL);
	if (!re)
		return SB_ERR(err, SB_EDATA, "%s: pre_tokenizer.pretokenizers[0].pattern: only a Regex is supported",
			      name);
	if (strcmp(re, PAT_GPT2) == 0)
		t->pat = P_GPT2;
	else if (strcmp(re, PAT_LLAMA3) == 0)
		t->pat = P_LLAMA3;
	else if (strcmp(re, PAT_QWEN2) == 0)
		t->pat = P_QWEN2;
	else
		return SB_ERR(err, SB_EDATA,
			      "%s: pre_tokenizer.pretokenizers[0].pattern.Regex: unknown pattern (only the GPT-2, "
			      "Llama-3 and Qwen2 patterns are supported)",
			      name);
	const char *beh = sb_json_str(sb_json_get(sp, "behavior"), "");
	if (strcmp(beh, "Isolated") != 0)
		return SB_ERR(err, SB_EDATA, "%s: pre_tokenizer.pretokenizers[0].behavior: only \"Isolated\" is supported",
			      name);
	SB_TRY(want_false(sp, "invert", name, "pre_tokenizer.pretokenizers[0]", err));
	return check_bytelevel_pre(list->items[1], 0, name, "pre_tokenizer.pretokenizers[1]", err);
}

/* Parse a merge entry into its two parts (pointers into the JSON, lengths). */
static int merge_parts(const struct sb_json *m, const char **a, size_t *na, const char **b, size_t *nb)
{
	if (m->type == SB_JSON_STRING) {
		const char *sp = memchr(m->text, ' ', m->len);
		if (!sp || memchr(sp + 1, ' ', m->len - (size_t)(sp + 1 - m->text)))
			return -1;
		*a = m->text;
		*na = (size_t)(sp - m->text);
		*b = sp + 1;
		*nb = m->len - *na - 1;
		return 0;
	}
	if (m->type == SB_JSON_ARRAY && m->n == 2 && m->items[0]->type == SB_JSON_STRING &&
	    m->items[1]->type == SB_JSON_STRING) {
		*a = m->items[0]->text;
		*na = m->items[0]->len;
		*b = m->items[1]->text;
		*nb = m->items[1]->len;
		return 0;
	}
	return -1;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Byte-level decode of one token string (HF ByteLevel decoder): every character mapped
 * back to its byte, or, when one character is not in the byte alphabet, the UTF-8 as is. */
static size_t token_to_bytes(const char *s, size_t n, char *out)
{
	size_t m = 0;
	for (size_t i = 0; i < n;) {
		int len;
		uint32_t cp = sb_utf8_at((const unsigned char *)s, i, &len);
		if (cp >= 324 || bl_inv[cp] < 0) {
			memcpy(out, s, n);
			return n;
		}
		out[m++] = (char)bl_inv[cp];
		i += (size_t)len;
	}
	return m;
}

/* The bytes one token decodes to (*out malloc'd): the ByteLevel decoder's bytes; a Sequence
 * decoder's Replace steps in order, then ByteFallback (a token "<0xHH>" is that byte: two
 * hexadecimal digits of either case, or "+" and one, as Rust's u8::from_str_radix reads them);
 * the Metaspace decoder's replacement character as a space. */
static int token_bytes(const struct sb_tok *t, const char *s, size_t n, char **out, size_t *n_out)
{
	char *cur = malloc(n + 1);
	if (!cur)
		return -1;
	if (t->dec == DEC_BYTELEVEL) {
		*n_out = token_to_bytes(s, n, cur);
		*out = cur;
		return 0;
	}
	memcpy(cur, s, n);
	size_t m = n;
	for (size_t k = 0; k < t->n_drep + (t->dec == DEC_METASPACE); k++) {
		char *next;
		size_t nn;
		int r = t->dec == DEC_METASPACE ? replace_all(cur, m, t->drep_ms, t->drep_ms_len, " ", 1, &next, &nn)
						 : replace_all(cur, m, t->drep[k].a, t->drep[k].na, t->drep[k].b,
							       t->drep[k].nb, &next, &nn);
		free(cur);
		if (r)
			return -1;
		cur = next;
		m = nn;
	}
	if (t->dec_fallback && m == 6 && !memcmp(cur, "<0x", 3) && cur[5] == '>') {
		int hi = hexval(cur[3]), lo = hexval(cur[4]);
		if (lo >= 0 && (hi >= 0 || cur[3] == '+')) {
			cur[0] = (char)(hi >= 0 ? hi * 16 + lo : lo);
			m = 1;
		}
	}
	*out = cur;
	*n_out = m;
	return 0;
}

static int load_model(struct sb_tok *t, const struct sb_json *model, const struct sb_json *added_list,
		      const char *name, struct sb_err *err)
{
	if (!model || model->type != SB_JSON_OBJECT)
		return SB_ERR(err, SB_EDATA, "%s: model: missing or not an object", name);
	const char *ty = type_of(model);
	if (!ty || strcmp(ty, "BPE") != 0)
		return SB_ERR(err, SB_EDATA, "%s: model.type: only \"BPE\" is supported (got %s)", name,
			      ty ? ty : "none");
	SB_TRY(want_null(model, "dropout", name, "model", err));
	const struct sb_json *unk = sb_json_get(model, "unk_token");
	for (int k = 0; k < 2; k++) {
		const struct sb_json *v = sb_json_get(model, k ? "fuse_unk" : "byte_fallback");
		if (v && v->type != SB_JSON_BOOL && v->type != SB_JSON_NULL)
			return SB_ERR(err, SB_EDATA, "%s: model.%s: not a boolean", name, k ? "fuse_unk" : "byte_fallback");
	}
	t->byte_fallback = sb_json_bool(sb_json_get(model, "byte_fallback"), 0);
	t->fuse_unk = sb_json_bool(sb_json_get(model, "fuse_unk"), 0);
	if (!t->chars) { /* a byte-level alphabet: every byte has its token */
		SB_TRY(want_null(model, "unk_token", name, "model", err));
		SB_TRY(want_false(model, "byte_fallback", name, "model", err));
	} else if (unk && unk->type != SB_JSON_NULL && unk->type != SB_JSON_STRING) {
		return SB_ERR(err, SB_EDATA, "%s: model.unk_token: not a string", name);
	}
	const char *aff[2] = {"continuing_subword_prefix", "end_of_word_suffix"};
	for (int k = 0; k < 2; k++) {
		const struct sb_json *v = sb_json_get(model, aff[k]);
		if (v && v->type != SB_JSON_NULL && !(v->type == SB_JSON_STRING && v->len == 0))
			return SB_ERR(err, SB_EDATA, "%s: model.%s: only null or \"\" is supported", name, aff[k]);
	}
	const struct sb_json *im = sb_json_get(model, "ignore_merges");
	if (im && im->type != SB_JSON_BOOL && im->type != SB_JSON_NULL)
		return SB_ERR(err, SB_EDATA, "%s: model.ignore_merges: not a boolean", name);
	t->ignore_merges = sb_json_bool(im, 0);

	const struct sb_json *vocab = sb_json_get(model, "vocab");
	if (!vocab || vocab->type != SB_JSON_OBJECT)
		return SB_ERR(err, SB_EDATA, "%s: model.vocab: missing or not an object", name);
	const struct sb_json *merges = sb_json_get(model, "merges");
	if (!merges || merges->type != SB_JSON_ARRAY)
		return SB_ERR(err, SB_EDATA, "%s: model.merges: missing or not an array", name);
	if (added_list && added_list->type != SB_JSON_ARRAY && added_list->type != SB_JSON_NULL)
		return SB_ERR(err, SB_EDATA, "%s: added_tokens: not an array", name);
	size_t n_added = added_list && added_list->type == SB_JSON_ARRAY ? added_list->n : 0;

	/* ids: the largest one sizes the tables */
	int32_t max_id = -1;
	char field[160];
	for (size_t i = 0; i < vocab->n; i++) {
		int32_t id;
		snprintf(field, sizeof field, "model.vocab[\"%.60s\"]", vocab->keys[i]);
		SB_TRY(get_id(vocab->items[i], &id, name, field, err));
		if (id > max_id)
			max_id = id;
	}
	if (!(t->added = calloc(n_added ? n_added : 1, sizeof *t->added)))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (size_t i = 0; i < n_added; i++) {
		const struct sb_json *a = added_list->items[i];
		snprintf(field, sizeof field, "added_tokens[%zu]", i);
		if (a->type != SB_JSON_OBJECT)
			return SB_ERR(err, SB_EDATA, "%s: %s: not an object", name, field);
		const struct sb_json *c = sb_json_get(a, "content");
		if (!c || c->type != SB_JSON_STRING || c->len == 0)
			return SB_ERR(err, SB_EDATA, "%s: %s.content: missing or empty", name, field);
		snprintf(field, sizeof field, "added_tokens[%zu].id", i);
		int32_t id;
		SB_TRY(get_id(sb_json_get(a, "id"), &id, name, field, err));
		snprintf(field, sizeof field, "added_tokens[%zu]", i);
		SB_TRY(want_false(a, "single_word", name, field, err));
		SB_TRY(want_false(a, "lstrip", name, field, err));
		SB_TRY(want_false(a, "rstrip", name, field, err));
		if (!(t->added[i].content = malloc(c->len + 1)))
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		memcpy(t->added[i].content, c->text, c->len + 1);
		t->added[i].len = c->len;
		t->added[i].id = id;
		t->added[i].normalized = sb_json_bool(sb_json_get(a, "normalized"), 0);
		t->added[i].key = t->added[i].content;
		t->added[i].key_len = c->len;
		t->n_added = i + 1;
		/* HF matches a normalized added token by its normalised content */
		if (t->n_norm && t->added[i].normalized) {
			int rc = normalize(t, t->added[i].content, c->len, &t->added[i].key, &t->added[i].key_len, err);
			if (rc) {
				sb_err_prefix(err, "%s: %s.content", name, field);
				return rc;
			}
			if (!t->added[i].key)
				t->added[i].key = t->added[i].content;
			if (!t->added[i].key_len)
				return SB_ERR(err, SB_EDATA, "%s: %s.content: empty once normalised", name, field);
		}
		if (id > max_id)
			max_id = id;
	}
	/* the tables are sized by the largest id: ids far past the number of tokens (a
	 * tokenizer.json's are dense, 0..N-1) would make a small file take gigabytes */
	if ((size_t)max_id + 1 > 2 * (vocab->n + n_added) + 1024)
		return SB_ERR(err, SB_EDATA, "%s: model.vocab and added_tokens: the largest id %d is far past the %zu "
					     "tokens (ids are dense, at most 2 x tokens + 1024)",
			      name, (int)max_id, vocab->n + n_added);
	t->n_ids = max_id + 1;
	size_t nid = (size_t)t->n_ids;
	t->model_str = calloc(nid ? nid : 1, sizeof *t->model_str);
	t->model_len = calloc(nid ? nid : 1, sizeof *t->model_len);
	t->has_id = calloc(nid ? nid : 1, 1);
	t->bytes_off = calloc(nid + 1, sizeof *t->bytes_off);
	if (!t->model_str || !t->model_len || !t->has_id || !t->bytes_off || strmap_init(&t->vocab, vocab->n) ||
	    strmap_init(&t->added_map, n_added) || pairmap_init(&t->merges, merges->n))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");

	for (size_t i = 0; i < vocab->n; i++) {
		int32_t id;
		SB_TRY(get_id(vocab->items[i], &id, name, "model.vocab", err));
		if (t->model_str[id])
			return SB_ERR(err, SB_EDATA, "%s: model.vocab[\"%.60s\"]: id %ld already used by \"%.60s\"", name,
				      vocab->keys[i], (long)id, t->model_str[id]);
		size_t len = strlen(vocab->keys[i]);
		if (!(t->model_str[id] = malloc(len + 1)))
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		memcpy(t->model_str[id], vocab->keys[i], len + 1);
		t->model_len[id] = (uint32_t)len;
		t->has_id[id] = 1;
		strmap_put(&t->vocab, t->model_str[id], len, id); /* keys are unique (JSON parser) */
	}
	/* HF ignores the ids of added tokens on load and assigns them again (AddedVocabulary::
	 * add_tokens, in file order): the model vocab's id when the content is in it, otherwise the
	 * model vocab's size (its number of entries), or one more than the largest added id when
	 * that is already at or past it. A file whose ids differ would mean other ids in HF: refused. */
	int32_t max_added = -1;
	for (size_t i = 0; i < n_added; i++) {
		struct added *a = &t->added[i];
		int32_t want = strmap_get(&t->vocab, a->content, a->len);
		int32_t nv = (int32_t)vocab->n;
		if (want < 0)
			want = max_added < 0 ? nv : (max_added >= nv || nv == 0) ? max_added + 1 : nv;
		if (want != a->id)
			return SB_ERR(err, SB_EDATA,
				      "%s: added_tokens[%zu].id: %ld, but HF assigns %ld to \"%.60s\" on load "
				      "(model.vocab has %zu entries)",
				      name, i, (long)a->id, (long)want, a->content, vocab->n);
		if (want > max_added)
			max_added = want;
		if (strmap_put(&t->added_map, a->content, a->len, a->id))
			return SB_ERR(err, SB_EDATA, "%s: added_tokens[%zu].content: \"%.60s\" given twice", name, i,
				      a->content);
		for (size_t j = 0; j < i; j++)
			if (t->added[j].id == a->id)
				return SB_ERR(err, SB_EDATA, "%s: added_tokens[%zu].id: id %ld already used by "
							     "added_tokens[%zu]",
					      name, i, (long)a->id, j);
		if (t->model_str[a->id] &&
		    !(t->model_len[a->id] == a->len && memcmp(t->model_str[a->id], a->content, a->len) == 0))
			return SB_ERR(err, SB_EDATA,
				      "%s: added_tokens[%zu].id: id %ld is \"%.60s\" in model.vocab, not \"%.60s\"",
				      name, i, (long)a->id, t->model_str[a->id], a->content);
		t->has_id[a->id] = 1;
	}

	/* merges: (left, right) -> (rank, merged); a pair given twice keeps its last rank (HF's map) */
	for (size_t i = 0; i < merges->n; i++) {
		const char *a, *b;
		size_t na, nb;
		if (merge_parts(merges->items[i], &a, &na, &b, &nb))
			return SB_ERR(err, SB_EDATA,
				      "%s: model.merges[%zu]: not \"a b\" (one space) nor a pair of strings", name, i);
		int32_t ia = strmap_get(&t->vocab, a, na), ib = strmap_get(&t->vocab, b, nb);
		char *ab = malloc(na + nb + 1);
		if (!ab)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		memcpy(ab, a, na);
		memcpy(ab + na, b, nb);
		int32_t iab = strmap_get(&t->vocab, ab, na + nb);
		if (ia < 0 || ib < 0 || iab < 0) {
			int rc = SB_ERR(err, SB_EDATA, "%s: model.merges[%zu]: token \"%.*s\" is not in model.vocab", name,
					i, ia < 0 ? (int)(na > 60 ? 60 : na) : ib < 0 ? (int)(nb > 60 ? 60 : nb)
										 : (int)(na + nb > 60 ? 60 : na + nb),
					ia < 0 ? a : ib < 0 ? b : ab);
			free(ab);
			return rc;
		}
		free(ab);
		if (i >= INT32_MAX)
			return SB_ERR(err, SB_EDATA, "%s: model.merges: too many", name);
		size_t slot = pairmap_slot(&t->merges, ia, ib);
		t->merges.key[slot] = ((uint64_t)(uint32_t)ia << 32 | (uint32_t)ib) + 1;
		t->merges.rank[slot] = (int32_t)i;
		t->merges.merged[slot] = iab;
	}

	/* single-byte tokens; <0xHH> tokens; <unk> */
	t->unk_id = -1;
	for (int b = 0; b < 256; b++) {
		char fb[8];
		snprintf(fb, sizeof fb, "<0x%02X>", b);
		t->byte_id[b] = strmap_get(&t->vocab, (const char *)bl_utf8[b], bl_len[b]);
		t->fb_id[b] = strmap_get(&t->vocab, fb, 6);
	}
	if (t->chars && unk && unk->type == SB_JSON_STRING &&
	    (t->unk_id = strmap_get(&t->vocab, unk->text, unk->len)) < 0)
		return SB_ERR(err, SB_EDATA, "%s: model.unk_token: \"%.60s\" is not in model.vocab", name, unk->text);

	/* decoded bytes of every id: added content first (HF's id_to_token), then the model's */
	const char **src = calloc(nid ? nid : 1, sizeof *src);
	size_t *srclen = calloc(nid ? nid : 1, sizeof *srclen), cap = 0, off = 0;
	int rc = 0;
	if (!src || !srclen)
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (size_t id = 0; !rc && id < nid; id++) {
		src[id] = t->model_str[id];
		srclen[id] = t->model_len[id];
	}
	for (size_t i = 0; !rc && i < n_added; i++) {
		src[t->added[i].id] = t->added[i].content;
		srclen[t->added[i].id] = t->added[i].len;
	}
	for (size_t id = 0; !rc && id < nid; id++) {
		t->bytes_off[id] = off;
		if (!src[id])
			continue;
		char *d = NULL;
		size_t nd = 0;
		if (token_bytes(t, src[id], srclen[id], &d, &nd) ||
		    grow((void **)&t->bytes, &cap, off + nd + 1, 1)) {
			free(d);
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			break;
		}
		memcpy(t->bytes + off, d, nd);
		off += nd;
		free(d);
	}
	t->bytes_off[nid] = off;
	free(src);
	free(srclen);
	if (rc)
		return rc;
	if (!t->bytes && !(t->bytes = malloc(1)))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");

	/* added-token lookup by first byte, longest first */
	for (size_t i = 0; i < n_added; i++) {
		int set = t->added[i].normalized ? 1 : 0;
		unsigned char b = (unsigned char)t->added[i].key[0];
		size_t k = t->n_first[set][b];
		size_t *l = realloc(t->by_first[set][b], (k + 1) * sizeof *l);
		if (!l)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		t->by_first[set][b] = l;
		while (k > 0 && t->added[l[k - 1]].key_len < t->added[i].key_len) {
			l[k] = l[k - 1];
			k--;
		}
		l[k] = i;
		t->n_first[set][b]++;
	}
	return 0;
}

/* decoder: ByteLevel with a ByteLevel pre-tokenizer; with the character pre-tokenizers,
 * Metaspace, or a Sequence of Replace steps (literal patterns), then ByteFallback, Fuse and a
 * Strip of the fused text, each optional, in that order (the converters' order for Llama 2,
 * Mistral and Gemma; another order changes what HF's per-token steps see, so it is refused). */
static int check_decoder(struct sb_tok *t, const struct sb_json *dec, const char *name, struct sb_err *err)
{
	const char *ty = type_of(dec);
	if (!t->chars) {
		if (!ty || strcmp(ty, "ByteLevel"))
			return SB_ERR(err, SB_EDATA, "%s: decoder: only ByteLevel is supported with a ByteLevel "
						     "pre-tokenizer",
				      name);
		t->dec = DEC_BYTELEVEL;
		return 0;
	}
	if (ty && !strcmp(ty, "Metaspace")) {
		t->dec = DEC_METASPACE;
		SB_TRY(one_char(dec, "replacement", t->drep_ms, &t->drep_ms_len, name, "decoder", err));
		return ms_scheme(dec, &t->dec_scheme, name, "decoder", err);
	}
	if (!ty || strcmp(ty, "Sequence"))
		return SB_ERR(err, SB_EDATA, "%s: decoder: only Metaspace or a Sequence[Replace..., ByteFallback, Fuse, "
					     "Strip] is supported with this pre-tokenizer (got %s)",
			      name, ty ? ty : "none");
	t->dec = DEC_CHAIN;
	const struct sb_json *list = sb_json_get(dec, "decoders");
	if (!list || list->type != SB_JSON_ARRAY)
		return SB_ERR(err, SB_EDATA, "%s: decoder.decoders: missing or not an array", name);
	int stage = 0; /* 0 Replace steps, 1 after ByteFallback, 2 after Fuse, 3 after Strip */
	for (size_t i = 0; i < list->n; i++) {
		const struct sb_json *d = list->items[i];
		const char *dt = type_of(d);
		char path[64];
		snprintf(path, sizeof path, "decoder.decoders[%zu]", i);
		int want = !dt ? -1 : !strcmp(dt, "Replace") ? 0 : !strcmp(dt, "ByteFallback") ? 1 : !strcmp(dt, "Fuse") ? 2
			   : !strcmp(dt, "Strip") ? 3 : -1;
		if (want < 0 || (want == 0 && stage > 0) || (want > 0 && want <= stage) || (want == 3 && stage != 2))
			return SB_ERR(err, SB_EDATA, "%s: %s: %s here (the supported order is Replace..., ByteFallback, "
						     "Fuse, Strip)",
				      name, path, want < 0 ? "an unsupported decoder" : "out of order");
		stage = want;
		if (want == 0) {
			SB_TRY(add_replace(&t->drep, &t->n_drep, d, name, path, err));
		} else if (want == 1) {
			t->dec_fallback = 1;
		} else if (want == 3) {
			SB_TRY(one_char(d, "content", t->strip_c, &t->strip_len, name, path, err));
			double st = sb_json_num(sb_json_get(d, "start"), -1), sp = sb_json_num(sb_json_get(d, "stop"), -1);
			if (!(st >= 0 && st <= 1e6 && st == (int)st && sp >= 0 && sp <= 1e6 && sp == (int)sp))
				return SB_ERR(err, SB_EDATA, "%s: %s: start and stop must be integers in [0, 1000000]", name,
					      path);
			t->strip_start = (int)st;
			t->strip_stop = (int)sp;
		}
	}
	return 0;
}

/* The token a TemplateProcessing post-processor puts before a single sequence (Llama 3's
 * <|begin_of_text|>), alone or inside a Sequence of processors: t->bos, else -1. Only the
 * leading special token is read; encode still adds nothing (the caller places it). */
static int read_bos(struct sb_tok *t, const struct sb_json *pp, const char *name, struct sb_err *err)
{
	t->bos = -1;
	if (!pp || pp->type == SB_JSON_NULL)
		return 0;
	const char *ty = type_of(pp);
	if (ty && !strcmp(ty, "Sequence")) {
		const struct sb_json *ps = sb_json_get(pp, "processors");
		if (!ps || ps->type != SB_JSON_ARRAY)
			return SB_ERR(err, SB_EDATA, "%s: post_processor.processors must be an array", name);
		int32_t found = -1; /* each call resets t->bos: keep the one a processor placed */
		for (size_t i = 0; i < ps->n; i++) {
			SB_TRY(read_bos(t, ps->items[i], name, err));
			if (t->bos >= 0)
				found = t->bos;
		}
		t->bos = found;
		return 0;
	}
	if (!ty || strcmp(ty, "TemplateProcessing"))
		return 0; /* ByteLevel (offsets only) and others add no leading token we would place */
	const struct sb_json *single = sb_json_get(pp, "single");
	if (!single || single->type != SB_JSON_ARRAY || !single->n)
		return SB_ERR(err, SB_EDATA, "%s: post_processor.single must be a non-empty array", name);
	const struct sb_json *st = sb_json_get(single->items[0], "SpecialToken");
	if (!st)
		return 0; /* the sequence comes first: no leading token */
	const char *id = sb_json_str(sb_json_get(st, "id"), NULL);
	/* HF places the ids its special_tokens map gives the name (any ids, in the vocabulary or
	 * not); a name the map lacks, by its id in the vocabulary */
	const struct sb_json *map = sb_json_get(pp, "special_tokens");
	const struct sb_json *ent = id && map && map->type == SB_JSON_OBJECT ? sb_json_get(map, id) : NULL;
	if (ent) {
		const struct sb_json *ids = sb_json_get(ent, "ids");
		if (!ids || ids->type != SB_JSON_ARRAY || ids->n != 1 || ids->items[0]->type != SB_JSON_NUMBER)
			return SB_ERR(err, SB_EDATA,
				      "%s: post_processor.special_tokens['%s'].ids must be one id (one leading token)", name,
				      id);
		double d = ids->items[0]->number;
		if (!(d >= 0 && d < sb_tok_vocab_size(t)) || d != (double)(int32_t)d)
			return SB_ERR(err, SB_EDATA, "%s: post_processor.special_tokens['%s'].ids: %g is not an id of the "
				      "vocabulary (0..%d)", name, id, d, sb_tok_vocab_size(t) - 1);
		t->bos = (int32_t)d;
		return 0;
	}
	int32_t v = id ? sb_tok_id(t, id) : -1;
	if (v < 0)
		return SB_ERR(err, SB_EDATA, "%s: post_processor.single[0]: special token '%s' is not in the vocabulary",
			      name, id ? id : "?");
	t->bos = v;
	return 0;
}

int32_t sb_tok_bos(const struct sb_tok *t) { return t ? t->bos : -1; }

size_t sb_tok_utf8_clean(const uint8_t *s, size_t n, uint8_t *out)
{
	size_t o = 0, i = 0;
	while (i < n) {
		size_t bad = sb_utf8_check((const char *)s + i, n - i);
		size_t good = bad == (size_t)-1 ? n - i : bad;
		memmove(out + o, s + i, good); /* (out may be s: o <= i) */
		o += good;
		i += good + (bad != (size_t)-1);
	}
	return o;
}

int sb_tok_encode_clean(const struct sb_tok *t, const uint8_t *s, size_t n, int bos, int32_t **ids, size_t *n_ids,
			struct sb_err *err)
{
	uint8_t *c = malloc(n ? n : 1);
	if (!c)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = sb_tok_encode(t, (const char *)c, sb_tok_utf8_clean(s, n, c), ids, n_ids, err);
	free(c);
	int32_t b = sb_tok_bos(t);
	if (!rc && bos && b >= 0) {
		int32_t *q = realloc(*ids, (*n_ids + 1) * sizeof *q);
		if (!q)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		memmove(q + 1, q, *n_ids * sizeof *q);
		q[0] = b;
		*ids = q;
		++*n_ids;
	}
	return rc;
}

void sb_tok_utf8_edges(const uint8_t *s, size_t n, size_t *beg, size_t *end)
{
	size_t b = 0, k = n;
	while (b < n && b < 3 && (s[b] & 0xC0) == 0x80) /* inside a sequence cut before it */
		b++;
	int cont = 0;
	while (k > b && cont < 3 && (s[k - 1] & 0xC0) == 0x80) {
		k--;
		cont++;
	}
	size_t e = n;
	if (k > b) { /* s[k-1] leads the last sequence: complete when cont + 1 bytes make it */
		uint8_t c = s[k - 1];
		int need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		if (need > 1 && cont + 1 < need)
			e = k - 1;
	}
	*beg = b;
	*end = e;
}

int sb_tok_load_mem(const char *json, size_t n, const char *name, struct sb_tok **out, struct sb_err *err)
{
	*out = NULL;
	pthread_once(&bl_once, bl_init);
	struct sb_json *root = NULL;
	if (sb_json_parse(json, n, &root, err)) {
		sb_err_prefix(err, "%s", name);
		err->code = SB_EDATA;
		return SB_EDATA;
	}
	struct sb_tok *t = calloc(1, sizeof *t);
	int rc = 0;
	if (!t) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto done;
	}
	if (root->type != SB_JSON_OBJECT) {
		rc = SB_ERR(err, SB_EDATA, "%s: not a JSON object", name);
		goto done;
	}
	/* the model's type first: a WordPiece or Unigram file is named as such, not by a part of it
	 * that differs too (load_model checks the rest) */
	const struct sb_json *mdl = sb_json_get(root, "model");
	if (mdl && mdl->type == SB_JSON_OBJECT && (!type_of(mdl) || strcmp(type_of(mdl), "BPE"))) {
		rc = SB_ERR(err, SB_EDATA, "%s: model.type: only \"BPE\" is supported (got %s)", name,
			    type_of(mdl) ? type_of(mdl) : "none");
		goto done;
	}
	if ((rc = check_normalizer(t, sb_json_get(root, "normalizer"), name, "normalizer", err)))
		goto done;
	if ((rc = check_pre_tokenizer(t, sb_json_get(root, "pre_tokenizer"), name, err)))
		goto done;
	if ((rc = check_decoder(t, sb_json_get(root, "decoder"), name, err)))
		goto done;
	if ((rc = load_model(t, sb_json_get(root, "model"), sb_json_get(root, "added_tokens"), name, err)))
		goto done;
	if ((rc = read_bos(t, sb_json_get(root, "post_processor"), name, err)))
		goto done;
done:
	sb_json_free(root);
	if (rc) {
		sb_tok_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int sb_tok_load(const char *path, struct sb_tok **out, struct sb_err *err)
{
	char *data;
	size_t n;
	*out = NULL;
	SB_TRY(sb_read_file(path, &data, &n, MAX_FILE, err));
	int rc = sb_tok_load_mem(data, n, path, out, err);
	free(data);
	return rc;
}
