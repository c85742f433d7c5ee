/* test_fetch_text.c — BLAKE2b against RFC 7693 and Python's hashlib, and the
 * 20 Newsgroups cleaning and tokenisation of PROTOCOL A1.
 *
 * The hashlib values were produced with Python 3.11's hashlib.blake2b; the
 * shell test tests/sh/fetch_news.sh compares many more tokens live against
 * python3 when it is installed. */
#include <stdio.h>
#include <string.h>

#include "../harness.h"
#include "fetch.h"

static void hex(const uint8_t *h, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", h[i]);
}

static void check_b2b(const char *what, const void *key, size_t keylen, const void *in, size_t n, size_t outlen,
                      const char *want)
{
	uint8_t h[64];
	char got[129];
	sb_blake2b(h, outlen, key, keylen, in, n);
	hex(h, outlen, got);
	SB_CHECK(strcmp(got, want) == 0, "blake2b %s: got %s want %s", what, got, want);
}

/* C-escape newlines and non-ASCII so a TAP line stays one line. */
static const char *esc(const char *s, char *buf)
{
	char *o = buf;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '\n')
			o += sprintf(o, "\\n");
		else if (c < 0x20 || c >= 0x7f)
			o += sprintf(o, "\\x%02x", c);
		else
			*o++ = (char)c;
	}
	*o = 0;
	return buf;
}

static void check_clean(const char *what, const char *in, const char *want)
{
	char out[4096], e1[8192], e2[8192];
	size_t n = sb_news_clean(in, strlen(in), out);
	out[n] = 0;
	SB_CHECK(strcmp(out, want) == 0, "clean %s: got \"%s\" want \"%s\"", what, esc(out, e1), esc(want, e2));
}

int main(void)
{
	/* RFC 7693 Appendix A: BLAKE2b-512("abc"). */
	check_b2b("RFC 7693 abc/64", NULL, 0, "abc", 3, 64,
	          "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d17d87c5392aab792dc252d5de4533cc9518d3"
	          "8aa8dbf1925ab92386edd4009923");
	/* digest_size=4 is its own parameter block (not a truncation of the 64-byte digest). */
	check_b2b("abc/4", NULL, 0, "abc", 3, 4, "63906248");
	check_b2b("empty/4", NULL, 0, "", 0, 4, "1271cf25");
	char buf[300];
	memset(buf, 'x', 127);
	check_b2b("127 bytes/4", NULL, 0, buf, 127, 4, "1dab6b6d");
	memset(buf, 'y', 128);
	check_b2b("128 bytes (one full block)/4", NULL, 0, buf, 128, 4, "e70e01c5");
	memset(buf, 'z', 129);
	check_b2b("129 bytes/4", NULL, 0, buf, 129, 4, "a5a38fd0");
	check_b2b("keyed abc/32", "key", 3, "abc", 3, 32,
	          "0330531d097355a3f72e80d55c1245ccf79f1704431c6e3887938320442c23c0");
	uint8_t key64[64];
	for (int i = 0; i < 64; i++)
		key64[i] = (uint8_t)i;
	check_b2b("64-byte key, empty/64", key64, 64, "", 0, 64,
	          "10ebb67700b1868efb4417987acf4690ae9d972fb7a590c2f02871799aaa4786b5e996e8f0f4eb981fc214b005f42d2ff423"
	          "3499391653df7aefcbc13fc51568");

	/* Token ids: 2 + int.from_bytes(blake2b(tok, digest_size=4), 'little') % 19998. */
	SB_CHECK(sb_news_token_id("abc", 3, 20000) == 499, "id(abc) = %d, want 499", sb_news_token_id("abc", 3, 20000));
	SB_CHECK(sb_news_token_id("the", 3, 20000) == 7162, "id(the) = %d, want 7162",
	         sb_news_token_id("the", 3, 20000));
	SB_CHECK(sb_news_token_id("ab", 2, 20000) == 11662, "id(ab) = %d, want 11662",
	         sb_news_token_id("ab", 2, 20000));
	memset(buf, 'w', 256);
	buf[256] = 'q';
	SB_CHECK(sb_news_token_id(buf, 257, 20000) == 15366, "id(w*256+q) = %d, want 15366",
	         sb_news_token_id(buf, 257, 20000));

	/* Tokenisation: runs of >= 2 ASCII letters, lower-cased; truncate and pad. */
	int32_t ids[8];
	const char *t = "The a ABC x9ab-\xe9th\xe9 e";
	int64_t k = sb_news_tokenize(t, strlen(t), ids, 8, 20000);
	SB_CHECK(k == 4, "token count of \"The a ABC x9ab-...\" = %lld, want 4 (the, abc, ab, th)", (long long)k);
	SB_CHECK(ids[0] == 7162 && ids[1] == 499 && ids[2] == 11662 && ids[4] == 0 && ids[7] == 0,
	         "ids %d %d %d pad %d %d", ids[0], ids[1], ids[2], ids[4], ids[7]);
	k = sb_news_tokenize(t, strlen(t), ids, 2, 20000);
	SB_CHECK(k == 4 && ids[0] == 7162 && ids[1] == 499, "truncation to L=2 keeps the first ids and the full count");

	/* Cleaning. */
	check_clean("no blank line -> empty", "Subject: x\nFrom: y\nbody", "");
	check_clean("header", "Subject: x\n\nbody line\nmore", "body line\nmore");
	check_clean("quotes", "H: x\n\nkeep\n> quoted\nJoe writes: hi\nIn article <1> x\n|bar\n  > indented ok\nend",
	            "keep\n  > indented ok\nend");
	check_clean("said/says/wrote/Quoted from", "H\n\na said: b\nc says: d\ne wrote: f\nQuoted from x\nok", "ok");
	check_clean("footer", "H\n\nbody\n-----\nsig\n", "body");
	check_clean("footer '--' too short", "H\n\nbody\n--\nsig", "body\n--\nsig");
	check_clean("footer with spaces and NBSP", "H\n\nbody\n \xa0---\t\nsig", "body");
	check_clean("footer: the last separator wins", "H\n\na\n---\nb\n----\nc", "a\n---\nb");
	check_clean("footer beyond 11 lines ignored", "H\n\na\n---\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11",
	            "a\n---\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11");
	check_clean("footer exactly 11th from end", "H\n\na\n---\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10", "a");
	check_clean("footer on the first line", "H\n\n----\nx", "");
	check_clean("quotes removed before footer lines are counted",
	            "H\n\na\n---\n>1\n>2\n>3\n>4\n>5\n>6\n>7\n>8\n>9\n>10\n>11\nz", "a");
	check_clean("CR stays part of the line", "H\r\n\r\nbody\r\n", "");
	check_clean("CRLF blank line is not a blank line", "H\r\n\r\n\nx", "x");
	return sb_test_done();
}
