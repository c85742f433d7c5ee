/* test_unicode_nfc.c — lib/unicode_nfc against Python's unicodedata.normalize("NFC") on the
 * committed fixture tests/fixtures/unicode_nfc/cases.txt (gen.py there: every code point NFC
 * changes, every canonical decomposition, Hangul, mark orders, blocked compositions, seeded
 * random strings; Unicode 14.0.0), plus invalid UTF-8, the fast path and a long run of marks.
 *
 * Each case is normalised alone, between "x " and " y" (a starter that composes with nothing
 * on either side: NFC of the whole is "x " NFC(s) " y", so the part before the first quick
 * check failure is copied), and its expected NFC is normalised again (NFC is idempotent).
 * A failure names the group, the fixture line and both results in hex. Fixtures are found
 * under $SB_TOP (default: the current directory).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../harness.h"
#include "io.h"
#include "unicode_nfc.h"

static char top_dir[2048];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t put_utf8(char *o, uint32_t cp)
{
	unsigned char *u = (unsigned char *)o;
	if (cp < 0x80) {
		u[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		u[0] = (unsigned char)(0xC0 | cp >> 6);
		u[1] = (unsigned char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		u[0] = (unsigned char)(0xE0 | cp >> 12);
		u[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
		u[2] = (unsigned char)(0x80 | (cp & 0x3F));
		return 3;
	}
	u[0] = (unsigned char)(0xF0 | cp >> 18);
	u[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
	u[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
	u[3] = (unsigned char)(0x80 | (cp & 0x3F));
	return 4;
}

/* "41 301" (hex code points, up to `end`) as UTF-8 into out (cap bytes): length, or -1. */
static long parse_cps(const char *p, const char *end, char *out, size_t cap)
{
	size_t n = 0;
	while (p < end) {
		char *q;
		unsigned long cp = strtoul(p, &q, 16);
		if (q == p || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || n + 4 > cap)
			return -1;
		n += put_utf8(out + n, (uint32_t)cp);
		p = q;
		while (p < end && *p == ' ')
			p++;
	}
	return (long)n;
}

/* UTF-8 as hex code points, for messages. */
static const char *hex(const char *s, size_t n)
{
	static char buf[4][200];
	static int k;
	char *b = buf[k++ & 3];
	size_t m = 0;
	b[0] = 0;
	for (size_t i = 0; i < n && m + 12 < sizeof buf[0];) {
		unsigned char c = (unsigned char)s[i];
		int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
		uint32_t cp = len == 1 ? c : (uint32_t)(c & (0x7F >> len));
		for (int j = 1; j < len && i + (size_t)j < n; j++)
			cp = cp << 6 | ((unsigned char)s[i + j] & 0x3F);
		m += (size_t)snprintf(b + m, sizeof buf[0] - m, "%s%X", m ? " " : "", (unsigned)cp);
		i += (size_t)len;
	}
	if (m + 12 >= sizeof buf[0])
		snprintf(b + m, sizeof buf[0] - m, " ...");
	return b;
}

/* NFC of s: 0 and *same (whether it equals want), or the error code. */
static int nfc_equals(const char *s, size_t n, const char *want, size_t nw, int *same, char *got_hex, size_t cap)
{
	char *out = NULL;
	size_t n_out = 0;
	struct sb_err err = {0};
	int rc = sb_nfc_normalize(s, n, &out, &n_out, &err);
	if (rc) {
		snprintf(got_hex, cap, "rc %d: %s", rc, err.msg);
		*same = 0;
		return rc;
	}
	const char *got = out ? out : s;
	*same = n_out == nw && memcmp(got, want, nw) == 0;
	if (!*same)
		snprintf(got_hex, cap, "%s", hex(got, n_out));
	free(out);
	return 0;
}

/* "x " s " y" into out: its length. */
static size_t between(char *out, const char *s, size_t n)
{
	memcpy(out, "x ", 2);
	memcpy(out + 2, s, n);
	memcpy(out + 2 + n, " y", 2);
	return n + 4;
}

struct group {
	char name[32];
	long declared, n, bad, first_line, changed;
	char first[600];
};

static void group_report(const struct group *g)
{
	if (!g->name[0])
		return;
	SB_CHECK(g->bad == 0 && g->n == g->declared && g->n > 0,
		 "%s: %ld strings (%ld changed by NFC; the fixture declares %ld) equal Python's NFC alone, between "
		 "\"x \" and \" y\", and normalised again (%ld failures%s%s)",
		 g->name, g->n, g->changed, g->declared, g->bad, g->bad ? "; first: " : "", g->bad ? g->first : "");
}

static void check_fixture(void)
{
	char path[2200];
	snprintf(path, sizeof path, "%s/tests/fixtures/unicode_nfc/cases.txt", top_dir);
	char *data = NULL;
	size_t n = 0;
	struct sb_err err = {0};
	if (!SB_CHECK(sb_read_file(path, &data, &n, 0, &err) == 0, "read %s (%s)", path, err.msg))
		return;
	SB_CHECK(strstr(data, "Unicode 14.0.0") && !strcmp(sb_nfc_unicode_version(), "14.0.0"),
		 "the fixture and the tables are Unicode 14.0.0 (tables: %s)", sb_nfc_unicode_version());
	struct group g;
	memset(&g, 0, sizeof g);
	long total = 0, n_groups = 0, line = 0;
	enum { CAP = 8192 };
	char *src = malloc(CAP + 4), *want = malloc(CAP + 4), *ctx = malloc(2 * CAP + 16), *wctx = malloc(2 * CAP + 16);
	for (char *p = data, *end = data + n; p < end;) {
		char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end;
		line++;
		if (*p == '@') {
			group_report(&g);
			memset(&g, 0, sizeof g);
			sscanf(p + 1, "%31s %ld", g.name, &g.declared);
			n_groups++;
		} else if (*p != '#' && eol > p) {
			char *semi = memchr(p, ';', (size_t)(eol - p));
			long ns = semi ? parse_cps(p, semi, src, CAP) : -1;
			long nw = semi ? parse_cps(semi + 1, eol, want, CAP) : -1;
			char got[600] = "";
			int same = 0, ok = ns >= 0 && nw >= 0;
			if (!ok)
				snprintf(got, sizeof got, "unreadable line");
			if (ok)
				nfc_equals(src, (size_t)ns, want, (size_t)nw, &same, got, sizeof got);
			if (ok && same) { /* in context */
				size_t a = between(ctx, src, (size_t)ns), b = between(wctx, want, (size_t)nw);
				nfc_equals(ctx, a, wctx, b, &same, got, sizeof got);
				if (!same)
					snprintf(got + strlen(got), sizeof got - strlen(got), " (between \"x \" and \" y\")");
			}
			if (ok && same) { /* idempotent */
				nfc_equals(want, (size_t)nw, want, (size_t)nw, &same, got, sizeof got);
				if (!same)
					snprintf(got + strlen(got), sizeof got - strlen(got), " (the NFC normalised again)");
			}
			g.n++;
			total++;
			g.changed += ok && (ns != nw || memcmp(src, want, (size_t)nw) != 0);
			if (!(ok && same) && g.bad++ == 0) {
				g.first_line = line;
				snprintf(g.first, sizeof g.first, "line %ld: %s -> got %s, want %s", line,
					 ns >= 0 ? hex(src, (size_t)ns) : "?", got, nw >= 0 ? hex(want, (size_t)nw) : "?");
			}
		}
		p = eol + 1;
	}
	group_report(&g);
	SB_CHECK(n_groups == 6 && total >= 9000, "%ld cases in %ld groups (want at least 9000 in 6)", total, n_groups);
	free(src);
	free(want);
	free(ctx);
	free(wctx);
	free(data);
}

static void check_edges(void)
{
	struct sb_err err = {0};
	char *out = (char *)1;
	size_t n_out = 99;
	int rc = sb_nfc_normalize("", 0, &out, &n_out, &err);
	SB_CHECK(rc == 0 && out == NULL && n_out == 0, "empty text: already NFC (rc %d, n_out %zu)", rc, n_out);
	const char *ascii = "plain ASCII, and caf\xC3\xA9 precomposed";
	rc = sb_nfc_normalize(ascii, strlen(ascii), &out, &n_out, &err);
	SB_CHECK(rc == 0 && out == NULL && n_out == strlen(ascii),
		 "text passing the quick check: returned as is, nothing copied (rc %d, out %s)", rc, out ? "set" : "NULL");
	free(out);
	/* the quick check's false alarm: Devanagari JA + NUKTA is NFC (U+095B is excluded) */
	const char *ja = "\xE0\xA4\x9C\xE0\xA4\xBC";
	size_t qc = sb_nfc_quick_check(ja, 6);
	rc = sb_nfc_normalize(ja, 6, &out, &n_out, &err);
	SB_CHECK(qc == 3 && rc == 0 && out && n_out == 6 && !memcmp(out, ja, 6),
		 "U+091C U+093C: the quick check says Maybe at byte 3 (got %zu), NFC leaves it as it is", qc);
	free(out);
	/* invalid UTF-8: refused with the offset, as the tokenizer refuses it */
	static const struct {
		const char *s;
		size_t n, off;
	} bad[] = {{"ab\xFF" "cd", 5, 2}, {"e\xCC", 2, 1}, {"x\xED\xA0\x80", 4, 1}, {"\xC0\x80", 2, 0},
		   {"e\xCC\x81\xF4\x90\x80\x80", 7, 3}};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char want[64];
		snprintf(want, sizeof want, "byte offset %zu: invalid UTF-8", bad[i].off);
		sb_err_clear(&err);
		out = NULL;
		rc = sb_nfc_normalize(bad[i].s, bad[i].n, &out, &n_out, &err);
		SB_CHECK(rc == SB_EDATA && strstr(err.msg, want) && !out, "invalid UTF-8 %s: SB_EDATA \"%s\" (rc %d: %s)",
			 hex(bad[i].s, bad[i].n), want, rc, err.msg);
	}
	/* NFC can lengthen: U+0958 (3 bytes) -> U+0915 U+093C (6) */
	rc = sb_nfc_normalize("\xE0\xA5\x98", 3, &out, &n_out, &err);
	SB_CHECK(rc == 0 && out && n_out == 6 && !memcmp(out, "\xE0\xA4\x95\xE0\xA4\xBC", 6) && out[6] == 0,
		 "U+0958 -> U+0915 U+093C, 6 bytes and a NUL (got %zu)", n_out);
	free(out);
}

/* "a" then K pairs U+0301 (class 230) U+0316 (220): the run is sorted (counting sort), U+0301
 * composes with "a" past the U+0316 in front of it, the other U+0301 are blocked:
 * U+00E1, K x U+0316, K-1 x U+0301. Linear time: a quadratic sort would take minutes. */
static void check_long_run(void)
{
	enum { K = 100000 };
	size_t n = 1 + 4 * (size_t)K;
	char *s = malloc(n), *want = malloc(n);
	s[0] = 'a';
	for (size_t i = 0; i < K; i++)
		memcpy(s + 1 + 4 * i, "\xCC\x81\xCC\x96", 4);
	size_t m = 0;
	m += put_utf8(want + m, 0xE1);
	for (size_t i = 0; i < K; i++)
		m += put_utf8(want + m, 0x316);
	for (size_t i = 0; i + 1 < K; i++)
		m += put_utf8(want + m, 0x301);
	char *out = NULL;
	size_t n_out = 0;
	struct sb_err err = {0};
	double t0 = now();
	int rc = sb_nfc_normalize(s, n, &out, &n_out, &err);
	double dt = now() - t0;
	SB_CHECK(rc == 0 && out && n_out == m && !memcmp(out, want, m),
		 "a run of %d marks after \"a\": sorted, the first U+0301 composed, the rest blocked (%zu bytes, want "
		 "%zu; %.3f s)",
		 2 * K, n_out, m, dt);
	free(out);
	free(s);
	free(want);
}

int main(void)
{
	const char *top = getenv("SB_TOP");
	snprintf(top_dir, sizeof top_dir, "%s", top ? top : ".");
	check_fixture();
	check_edges();
	check_long_run();
	return sb_test_done();
}
