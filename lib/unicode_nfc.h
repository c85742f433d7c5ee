/* unicode_nfc.h — Unicode Normalization Form C (UAX #15) of UTF-8 text, Unicode 14.0.0
 * (the tables in lib/unicode_nfc_tab.h, generated from Python 3.11's unicodedata by
 * scripts/gen_unicode_tables.py). Used by lib/tokenizer.c for an NFC normalizer.
 *
 * NFC = canonical decomposition (recursive; Hangul syllables arithmetically), canonical
 * ordering (each run of non-starters stably sorted by combining class), then canonical
 * composition (primary composites only, a mark blocked by an earlier one of the same or a
 * higher class or by a starter; Hangul L+V and LV+T arithmetically).
 */
#ifndef SB_UNICODE_NFC_H
#define SB_UNICODE_NFC_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* One code point of valid UTF-8 at s[i] (check first: sb_utf8_check, lib/json.h); *len
 * receives its byte length. */
static inline uint32_t sb_utf8_at(const unsigned char *s, size_t i, int *len)
{
	unsigned c = s[i];
	if (c < 0x80) {
		*len = 1;
		return c;
	}
	if (c < 0xE0) {
		*len = 2;
		return (uint32_t)(c & 0x1F) << 6 | (s[i + 1] & 0x3F);
	}
	if (c < 0xF0) {
		*len = 3;
		return (uint32_t)(c & 0x0F) << 12 | (uint32_t)(s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F);
	}
	*len = 4;
	return (uint32_t)(c & 0x07) << 18 | (uint32_t)(s[i + 1] & 0x3F) << 12 | (uint32_t)(s[i + 2] & 0x3F) << 6 |
	       (s[i + 3] & 0x3F);
}

/* A table of sorted, non-overlapping inclusive code point ranges with a value (the generated
 * tables of lib/unicode_tab.h and lib/unicode_nfc_tab.h), and its lookup: the value of the
 * range holding cp, 0 when none does (binary search). */
struct sb_uc_range {
	uint32_t lo, hi;
	uint8_t v;
};
int sb_uc_lookup(const struct sb_uc_range *t, size_t n, uint32_t cp);

/* The NFC quick check (UAX #15 §9) of n bytes of valid UTF-8: the byte offset of the first
 * code point whose NFC_Quick_Check is No or Maybe or whose combining class is lower than the
 * previous one's (non-zero), or (size_t)-1 when every code point passes — s is then NFC.
 * A Maybe does not mean s is not NFC (Devanagari U+091C U+093C is NFC and fails the check). */
size_t sb_nfc_quick_check(const char *s, size_t n);

/* NFC of n bytes of UTF-8. When s passes the quick check it is already NFC: *out = NULL and
 * *n_out = n (use s itself; nothing is copied). Otherwise *out is a malloc'd buffer of *n_out
 * bytes plus a terminating NUL, which the caller frees. Only the part from the last starter
 * before the first quick check failure on is normalised (what precedes it is NFC and cannot
 * interact with what follows). Invalid UTF-8: SB_EDATA "byte offset N: invalid UTF-8";
 * out of memory: SB_EINTERNAL. NFC can make text longer (U+0958 -> U+0915 U+093C) as well
 * as shorter. */
int sb_nfc_normalize(const char *s, size_t n, char **out, size_t *n_out, struct sb_err *err);

/* The Unicode version of the tables ("14.0.0"). */
const char *sb_nfc_unicode_version(void);

#endif
