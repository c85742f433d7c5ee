/* fetch_news.c — BLAKE2b (RFC 7693) and the 20 Newsgroups text pipeline of
 * PROTOCOL A1: header/quote/footer stripping and hashed tokenisation.
 *
 * The reference for every choice here is Python on the Latin-1 decoding of
 * the document bytes (each byte one character), which is what the fixture
 * test compares against (tests/fixtures/fetch/news_ref.py). */
#include "fetch.h"

#include <string.h>

/* ---- BLAKE2b ---- */

static const uint64_t b2b_iv[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t b2b_sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4}, {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13}, {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11}, {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5}, {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

struct b2b {
	uint64_t h[8];
	uint64_t t[2]; /* bytes compressed so far (128-bit counter) */
	uint8_t buf[128];
	size_t fill;
	size_t outlen;
};

static inline uint64_t rotr64(uint64_t x, int r)
{
	return (x >> r) | (x << (64 - r));
}

static inline uint64_t load64le(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

#define B2B_G(a, b, c, d, x, y)                                                                                        \
	do {                                                                                                           \
		v[a] = v[a] + v[b] + (x);                                                                              \
		v[d] = rotr64(v[d] ^ v[a], 32);                                                                        \
		v[c] = v[c] + v[d];                                                                                    \
		v[b] = rotr64(v[b] ^ v[c], 24);                                                                        \
		v[a] = v[a] + v[b] + (y);                                                                              \
		v[d] = rotr64(v[d] ^ v[a], 16);                                                                        \
		v[c] = v[c] + v[d];                                                                                    \
		v[b] = rotr64(v[b] ^ v[c], 63);                                                                        \
	} while (0)

static void b2b_compress(struct b2b *s, const uint8_t block[128], int last)
{
	uint64_t v[16], m[16];
	for (int i = 0; i < 16; i++)
		m[i] = load64le(block + 8 * i);
	for (int i = 0; i < 8; i++) {
		v[i] = s->h[i];
		v[i + 8] = b2b_iv[i];
	}
	v[12] ^= s->t[0];
	v[13] ^= s->t[1];
	if (last)
		v[14] = ~v[14];
	for (int r = 0; r < 12; r++) {
		const uint8_t *sg = b2b_sigma[r];
		B2B_G(0, 4, 8, 12, m[sg[0]], m[sg[1]]);
		B2B_G(1, 5, 9, 13, m[sg[2]], m[sg[3]]);
		B2B_G(2, 6, 10, 14, m[sg[4]], m[sg[5]]);
		B2B_G(3, 7, 11, 15, m[sg[6]], m[sg[7]]);
		B2B_G(0, 5, 10, 15, m[sg[8]], m[sg[9]]);
		B2B_G(1, 6, 11, 12, m[sg[10]], m[sg[11]]);
		B2B_G(2, 7, 8, 13, m[sg[12]], m[sg[13]]);
		B2B_G(3, 4, 9, 14, m[sg[14]], m[sg[15]]);
	}
	for (int i = 0; i < 8; i++)
		s->h[i] ^= v[i] ^ v[i + 8];
}

static void b2b_count(struct b2b *s, size_t n)
{
	s->t[0] += n;
	if (s->t[0] < n)
		s->t[1]++;
}

static void b2b_update(struct b2b *s, const uint8_t *in, size_t n)
{
	while (n > 0) {
		/* Compress a full buffer only when more input follows: the last
		 * block must be compressed by b2b_final with the final flag. */
		if (s->fill == 128) {
			b2b_count(s, 128);
			b2b_compress(s, s->buf, 0);
			s->fill = 0;
		}
		size_t k = 128 - s->fill;
		if (k > n)
			k = n;
		memcpy(s->buf + s->fill, in, k);
		s->fill += k;
		in += k;
		n -= k;
	}
}

static void b2b_init(struct b2b *s, size_t outlen, const void *key, size_t keylen)
{
	memset(s, 0, sizeof *s);
	for (int i = 0; i < 8; i++)
		s->h[i] = b2b_iv[i];
	/* Parameter block word 0: digest length, key length, fanout 1, depth 1. */
	s->h[0] ^= 0x01010000ULL ^ ((uint64_t)keylen << 8) ^ (uint64_t)outlen;
	s->outlen = outlen;
	if (keylen > 0) {
		uint8_t block[128] = {0};
		memcpy(block, key, keylen);
		b2b_update(s, block, 128);
	}
}

static void b2b_final(struct b2b *s, uint8_t *out)
{
	b2b_count(s, s->fill);
	memset(s->buf + s->fill, 0, 128 - s->fill);
	b2b_compress(s, s->buf, 1);
	for (size_t i = 0; i < s->outlen; i++)
		out[i] = (uint8_t)(s->h[i / 8] >> (8 * (i % 8)));
}

void sb_blake2b(uint8_t *out, size_t outlen, const void *key, size_t keylen, const void *in, size_t inlen)
{
	struct b2b s;
	if (outlen < 1 || outlen > 64 || keylen > 64)
		return;
	b2b_init(&s, outlen, key, keylen);
	b2b_update(&s, in, inlen);
	b2b_final(&s, out);
}

/* ---- cleaning ---- */

/* Python's str.isspace() on a Latin-1 character. */
static int py_space(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0;
}

/* memmem is a GNU extension: a plain search is enough for these short patterns. */
static const char *find(const char *s, size_t n, const char *pat, size_t m)
{
	if (m == 0)
		return s;
	for (size_t i = 0; i + m <= n; i++) {
		const char *c = memchr(s + i, pat[0], n - m + 1 - i);
		if (!c)
			return NULL;
		i = (size_t)(c - s);
		if (memcmp(c, pat, m) == 0)
			return c;
	}
	return NULL;
}

static int has(const char *s, size_t n, const char *pat)
{
	return find(s, n, pat, strlen(pat)) != NULL;
}

static int starts(const char *s, size_t n, const char *pat)
{
	size_t m = strlen(pat);
	return n >= m && memcmp(s, pat, m) == 0;
}

/* writes in|writes:|wrote:|says:|said:|^In article|^Quoted from|^\||^> */
static int quote_line(const char *s, size_t n)
{
	return has(s, n, "writes in") || has(s, n, "writes:") || has(s, n, "wrote:") || has(s, n, "says:") ||
	       has(s, n, "said:") || starts(s, n, "In article") || starts(s, n, "Quoted from") || starts(s, n, "|") ||
	       starts(s, n, ">");
}

/* A footer separator: after Python's strip(), only '-' and more than 2 of them. */
static int footer_line(const char *s, size_t n)
{
	size_t a = 0, b = n;
	while (a < b && py_space((unsigned char)s[a]))
		a++;
	while (b > a && py_space((unsigned char)s[b - 1]))
		b--;
	if (b - a <= 2)
		return 0;
	for (size_t i = a; i < b; i++)
		if (s[i] != '-')
			return 0;
	return 1;
}

#define NEWS_FOOTER_LINES 11

size_t sb_news_clean(const char *in, size_t n, char *out)
{
	/* Header: keep what follows the first blank line ("\n\n"); none -> nothing. */
	const char *p = find(in, n, "\n\n", 2);
	if (!p)
		return 0;
	const char *s = p + 2, *end = in + n;

	/* Quotes: drop matching lines; the rest joined by '\n'. */
	size_t o = 0;
	int first = 1;
	for (;;) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *le = nl ? nl : end;
		if (!quote_line(s, (size_t)(le - s))) {
			if (!first)
				out[o++] = '\n';
			memcpy(out + o, s, (size_t)(le - s));
			o += (size_t)(le - s);
			first = 0;
		}
		if (!nl)
			break;
		s = nl + 1;
	}

	/* Footer: among the last 11 lines, the last separator line and all
	 * after it are dropped. Lines are the '\n'-separated pieces (Python's
	 * text.split('\n')), so a trailing newline gives a last, empty line. */
	size_t starts_[NEWS_FOOTER_LINES], ends_[NEWS_FOOTER_LINES];
	int k = 0;
	size_t e = o;
	for (;;) {
		size_t b = e;
		while (b > 0 && out[b - 1] != '\n')
			b--;
		starts_[k] = b;
		ends_[k] = e;
		k++;
		if (b == 0 || k == NEWS_FOOTER_LINES)
			break;
		e = b - 1;
	}
	for (int i = 0; i < k; i++) /* i = 0 is the last line */
		if (footer_line(out + starts_[i], ends_[i] - starts_[i]))
			return starts_[i] > 0 ? starts_[i] - 1 : 0;
	return o;
}

/* ---- tokens ---- */

static int ascii_alpha(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int32_t id_of_hash(const uint8_t h[4], int vocab)
{
	uint32_t v = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
	return (int32_t)(2 + v % (uint32_t)(vocab - 2));
}

int32_t sb_news_token_id(const char *tok, size_t len, int vocab)
{
	uint8_t h[4];
	sb_blake2b(h, 4, NULL, 0, tok, len);
	return id_of_hash(h, vocab);
}

/* Hash the lower-cased run s[0..n) without copying it whole. */
static int32_t run_id(const char *s, size_t n, int vocab)
{
	struct b2b st;
	uint8_t chunk[256], h[4];
	b2b_init(&st, 4, NULL, 0);
	while (n > 0) {
		size_t k = n < sizeof chunk ? n : sizeof chunk;
		for (size_t i = 0; i < k; i++) {
			unsigned char c = (unsigned char)s[i];
			chunk[i] = (uint8_t)(c >= 'A' && c <= 'Z' ? c + 32 : c);
		}
		b2b_update(&st, chunk, k);
		s += k;
		n -= k;
	}
	b2b_final(&st, h);
	return id_of_hash(h, vocab);
}

int64_t sb_news_tokenize(const char *text, size_t n, int32_t *ids, int L, int vocab)
{
	int64_t count = 0;
	size_t i = 0;
	while (i < n) {
		if (!ascii_alpha((unsigned char)text[i])) {
			i++;
			continue;
		}
		size_t j = i;
		while (j < n && ascii_alpha((unsigned char)text[j]))
			j++;
		if (j - i >= 2) {
			if (count < L)
				ids[count] = run_id(text + i, j - i, vocab);
			count++;
		}
		i = j;
	}
	for (int64_t k = count; k < L; k++)
		ids[k] = 0;
	return count;
}
