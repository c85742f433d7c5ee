/* unicode_nfc.c — NFC of UTF-8 text (see unicode_nfc.h and docs/tokenizer.md, "NFC"). */
#include "unicode_nfc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "unicode_nfc_tab.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Hangul syllables (Unicode §3.12): S = SBASE + (L * VCOUNT + V) * TCOUNT + T. */
enum {
	SBASE = 0xAC00,
	LBASE = 0x1100,
	VBASE = 0x1161,
	TBASE = 0x11A7, /* T = 0: no trailing consonant; the T jamo are TBASE + 1 .. TBASE + 27 */
	LCOUNT = 19,
	VCOUNT = 21,
	TCOUNT = 28,
	NCOUNT = VCOUNT * TCOUNT,
	SCOUNT = LCOUNT * NCOUNT
};

const char *sb_nfc_unicode_version(void) { return SB_UNICODE_VERSION; }

static size_t utf8_put(unsigned char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (unsigned char)(0xC0 | cp >> 6);
		o[1] = (unsigned char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (unsigned char)(0xE0 | cp >> 12);
		o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
		o[2] = (unsigned char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (unsigned char)(0xF0 | cp >> 18);
	o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
	o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
	o[3] = (unsigned char)(0x80 | (cp & 0x3F));
	return 4;
}

int sb_uc_lookup(const struct sb_uc_range *t, size_t n, uint32_t cp)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cp < t[mid].lo)
			hi = mid;
		else if (cp > t[mid].hi)
			lo = mid + 1;
		else
			return t[mid].v;
	}
	return 0;
}

static int ccc(uint32_t cp) { return cp < 0x300 ? 0 : sb_uc_lookup(sb_nfc_ccc, NELEM(sb_nfc_ccc), cp); }

size_t sb_nfc_quick_check(const char *text, size_t n)
{
	const unsigned char *s = (const unsigned char *)text;
	int last_cc = 0;
	for (size_t i = 0; i < n;) {
		if (s[i] < 0xCC) { /* below U+0300: combining class 0, quick check Yes */
			last_cc = 0;
			i += s[i] < 0x80 ? 1 : 2;
			continue;
		}
		int len;
		uint32_t cp = sb_utf8_at(s, i, &len);
		int cc = ccc(cp);
		if (cc && last_cc > cc)
			return i;
		if (sb_uc_lookup(sb_nfc_qc, NELEM(sb_nfc_qc), cp))
			return i;
		last_cc = cc;
		i += (size_t)len;
	}
	return (size_t)-1;
}

/* The canonical decomposition of cp (one level), or NULL. */
static const struct sb_nfc_map *decomp_of(uint32_t cp)
{
	size_t lo = 0, hi = NELEM(sb_nfc_decomp);
	if (cp < 0xC0) /* the first mapping is U+00C0's */
		return NULL;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cp < sb_nfc_decomp[mid].cp)
			hi = mid;
		else if (cp > sb_nfc_decomp[mid].cp)
			lo = mid + 1;
		else
			return &sb_nfc_decomp[mid];
	}
	return NULL;
}

/* The primary composite of the pair (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
	if (a - LBASE < LCOUNT && b - VBASE < VCOUNT)
		return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
	if (a - SBASE < SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b - TBASE < TCOUNT)
		return a + (b - TBASE);
	size_t lo = 0, hi = NELEM(sb_nfc_comp);
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct sb_nfc_map *m = &sb_nfc_decomp[sb_nfc_comp[mid]];
		if (a < m->a || (a == m->a && b < m->b))
			hi = mid;
		else if (a > m->a || b > m->b)
			lo = mid + 1;
		else
			return m->cp;
	}
	return 0;
}

/* A code point of the text being normalised, with its combining class. */
struct ch {
	uint32_t cp;
	uint8_t cc;
};

struct chbuf {
	struct ch *c;
	size_t n, cap;
};

static int push(struct chbuf *b, uint32_t cp)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 64;
		struct ch *c = realloc(b->c, cap * sizeof *c);
		if (!c)
			return -1;
		b->c = c;
		b->cap = cap;
	}
	b->c[b->n].cp = cp;
	b->c[b->n].cc = (uint8_t)ccc(cp);
	b->n++;
	return 0;
}

/* Append the full canonical decomposition of cp (mappings are at most 4 deep). */
static int decompose(struct chbuf *b, uint32_t cp)
{
	if (cp - SBASE < SCOUNT) {
		uint32_t i = cp - SBASE, t = i % TCOUNT;
		if (push(b, LBASE + i / NCOUNT) || push(b, VBASE + i % NCOUNT / TCOUNT))
			return -1;
		return t ? push(b, TBASE + t) : 0;
	}
	const struct sb_nfc_map *m = decomp_of(cp);
	if (!m)
		return push(b, cp);
	if (decompose(b, m->a))
		return -1;
	return m->b ? decompose(b, m->b) : 0;
}

/* Stable sort of a run of non-starters by combining class: insertion sort when short,
 * counting sort (tmp holds k entries) otherwise, so that a long run stays linear. */
static void sort_run(struct ch *r, size_t k, struct ch *tmp)
{
	if (k <= 16) {
		for (size_t i = 1; i < k; i++) {
			struct ch x = r[i];
			size_t j = i;
			while (j > 0 && r[j - 1].cc > x.cc) {
				r[j] = r[j - 1];
				j--;
			}
			r[j] = x;
		}
		return;
	}
	size_t start[256] = {0};
	for (size_t i = 0; i < k; i++)
		start[r[i].cc]++;
	size_t sum = 0;
	for (int c = 0; c < 256; c++) {
		size_t cnt = start[c];
		start[c] = sum;
		sum += cnt;
	}
	for (size_t i = 0; i < k; i++)
		tmp[start[r[i].cc]++] = r[i];
	memcpy(r, tmp, k * sizeof *r);
}

/* Canonical ordering of b; 0, or -1 when out of memory. */
static int reorder(struct chbuf *b)
{
	struct ch *tmp = NULL;
	for (size_t i = 0; i < b->n;) {
		if (!b->c[i].cc) {
			i++;
			continue;
		}
		size_t j = i + 1;
		while (j < b->n && b->c[j].cc)
			j++;
		if (j - i > 16 && !tmp && !(tmp = malloc(b->n * sizeof *tmp)))
			return -1;
		sort_run(b->c + i, j - i, tmp);
		i = j;
	}
	free(tmp);
	return 0;
}

/* Canonical composition of b, in place. A character C is tried with the last starter S when
 * nothing is between them, or when the character kept just before C has a lower non-zero
 * class than C (after ordering, that one has the highest class of those between: C is not
 * blocked). */
static void recompose(struct chbuf *b)
{
	size_t starter = (size_t)-1, o = 0;
	int last_cc = 0;
	for (size_t i = 0; i < b->n; i++) {
		struct ch c = b->c[i];
		if (starter != (size_t)-1 && (o == starter + 1 || last_cc < c.cc)) {
			uint32_t p = compose(b->c[starter].cp, c.cp);
			if (p) {
				b->c[starter].cp = p; /* primary composites are starters */
				continue;
			}
		}
		if (!c.cc)
			starter = o;
		last_cc = c.cc;
		b->c[o++] = c;
	}
	b->n = o;
}

int sb_nfc_normalize(const char *text, size_t n, char **out, size_t *n_out, struct sb_err *err)
{
	const unsigned char *s = (const unsigned char *)text;
	*out = NULL;
	*n_out = n;
	size_t bad = sb_utf8_check(text, n);
	if (bad != (size_t)-1)
		return SB_ERR(err, SB_EDATA, "byte offset %zu: invalid UTF-8", bad);
	bad = sb_nfc_quick_check(text, n);
	if (bad == (size_t)-1)
		return 0;
	/* Start at the last starter before the failure (everything before it passed the check,
	 * so that starter composes with nothing before it and its decomposition begins with a
	 * starter; the generator checks the latter), or at 0. */
	size_t start = bad;
	while (start > 0) {
		size_t k = start - 1;
		while (k > 0 && (s[k] & 0xC0) == 0x80)
			k--;
		int len;
		start = k;
		if (!ccc(sb_utf8_at(s, k, &len)))
			break;
	}
	struct chbuf b = {0};
	for (size_t i = start; i < n;) {
		int len;
		uint32_t cp = sb_utf8_at(s, i, &len);
		if (decompose(&b, cp)) {
			free(b.c);
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		}
		i += (size_t)len;
	}
	if (reorder(&b)) {
		free(b.c);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	recompose(&b);
	size_t m = start;
	for (size_t i = 0; i < b.n; i++)
		m += b.c[i].cp < 0x80 ? 1 : b.c[i].cp < 0x800 ? 2 : b.c[i].cp < 0x10000 ? 3 : 4;
	unsigned char *o = malloc(m + 1);
	if (!o) {
		free(b.c);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	memcpy(o, s, start);
	size_t at = start;
	for (size_t i = 0; i < b.n; i++)
		at += utf8_put(o + at, b.c[i].cp);
	o[at] = 0;
	free(b.c);
	*out = (char *)o;
	*n_out = at;
	return 0;
}
