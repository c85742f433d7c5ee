/* lm_probe.c — the retrieval battery's generators (see lm_probe.h for the formats). */
#include "lm_probe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static const char *const task_names[SB_LM_NALLTASKS] = {
	"niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2",
	"niah_multikey_3", "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2",
	"kv_recall", "qa_recall"};

/* Training weights: needles and lookups dominate (they are what the masks are
 * tested on); the aggregation tasks get a share so that the model sees them. */
static const double task_weight[SB_LM_NALLTASKS] = {1.0, 1.5, 1.0, 1.5, 1.0, 1.0, 0.75, 1.0, 0.75, 0.5, 0.5, 1.0, 1.0,
							   0, 0};
static const int task_min_len[SB_LM_NALLTASKS] = {64, 64, 64, 128, 64, 96, 128, 160, 192, 160, 160, 160, 128, 64, 192};

const char *sb_lm_task_name(int task) { return task >= 0 && task < SB_LM_NALLTASKS ? task_names[task] : "?"; }

int sb_lm_task_parse(const char *name)
{
	for (int i = 0; i < SB_LM_NALLTASKS; i++)
		if (strcmp(name, task_names[i]) == 0)
			return i;
	return -1;
}

int sb_lm_task_is_needle(int task) { return task >= SB_LM_NIAH_SINGLE_1 && task <= SB_LM_NIAH_SINGLE_3; }
double sb_lm_task_weight(int task) { return task >= 0 && task < SB_LM_NTASKS ? task_weight[task] : 0; }
int sb_lm_task_min_len(int task) { return task >= 0 && task < SB_LM_NALLTASKS ? task_min_len[task] : 1 << 30; }

/* RULER's noise haystack, one line. */
static const char noise_line[] =
	"The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n";

static const char *const relations[] = {"capital", "river", "king", "queen", "colour", "motto",
					"horse",   "ship",  "song", "sword", "star",   "tree"};
#define N_REL ((int)(sizeof relations / sizeof relations[0]))

/* ---- a growable byte string ---- */
struct str {
	uint8_t *p;
	int n, cap;
	int oom;
};

static void put(struct str *s, const void *b, int n)
{
	if (s->oom || n <= 0)
		return;
	if (s->n + n > s->cap) {
		int cap = s->cap ? s->cap : 256;
		while (cap < s->n + n)
			cap *= 2;
		uint8_t *q = realloc(s->p, (size_t)cap);
		if (!q) {
			s->oom = 1;
			return;
		}
		s->p = q;
		s->cap = cap;
	}
	memcpy(s->p + s->n, b, (size_t)n);
	s->n += n;
}
static void puts_(struct str *s, const char *c) { put(s, c, (int)strlen(c)); }

/* ---- random pieces ---- */
#define WORD_MAX 16

static void pseudoword(struct sb_rng *r, char *w, int lo, int hi, int cap)
{
	static const char cons[] = "bcdfghjklmnprstvwz", vow[] = "aeiou";
	int n = lo + (int)sb_rng_below(r, (uint64_t)(hi - lo + 1));
	for (int i = 0; i < n; i++)
		w[i] = i % 2 == 0 ? cons[sb_rng_below(r, sizeof cons - 1)] : vow[sb_rng_below(r, sizeof vow - 1)];
	w[n] = 0;
	if (cap && w[0])
		w[0] = (char)(w[0] - 'a' + 'A');
}

static void digits5(struct sb_rng *r, char *w)
{
	w[0] = (char)('1' + sb_rng_below(r, 9));
	for (int i = 1; i < 5; i++)
		w[i] = (char)('0' + sb_rng_below(r, 10));
	w[5] = 0;
}

static void hex8(struct sb_rng *r, char *w)
{
	static const char hx[] = "0123456789abcdef";
	for (int i = 0; i < 8; i++)
		w[i] = hx[sb_rng_below(r, 16)];
	w[8] = 0;
}

/* A small set of words already used in a probe, to keep keys distinct. */
struct wordset {
	char (*w)[WORD_MAX];
	int n, cap;
};

static int ws_has(const struct wordset *s, const char *w)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->w[i], w) == 0)
			return 1;
	return 0;
}

static int ws_add(struct wordset *s, const char *w)
{
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 64;
		void *q = realloc(s->w, (size_t)cap * sizeof *s->w);
		if (!q)
			return -1;
		s->w = q;
		s->cap = cap;
	}
	snprintf(s->w[s->n++], WORD_MAX, "%s", w);
	return 0;
}

enum wkind { W_KEY, W_NAME, W_VALUE, W_HEX };

/* A fresh word of a kind, distinct from every word in the set (and added to it). */
static int fresh(struct sb_rng *r, struct wordset *s, enum wkind k, char *w)
{
	for (int tries = 0; tries < 1000; tries++) {
		switch (k) {
		case W_KEY: pseudoword(r, w, 4, 6, 0); break;
		case W_NAME: pseudoword(r, w, 4, 6, 1); break;
		case W_VALUE: digits5(r, w); break;
		case W_HEX: hex8(r, w); break;
		}
		if (!ws_has(s, w))
			return ws_add(s, w);
	}
	return -1;
}

/* ---- haystacks ---- */

static void hay_noise(struct str *s, int H)
{
	int L = (int)sizeof noise_line - 1;
	for (int i = 0; i < H; i++)
		put(s, &noise_line[i % L], 1);
}

static int hay_essay(struct str *s, struct sb_rng *r, const uint8_t *hay, size_t n_hay, int H)
{
	if (!hay || n_hay < (size_t)H)
		return -1;
	size_t start = (size_t)sb_rng_below(r, (uint64_t)(n_hay - (size_t)H + 1));
	/* begin at a line start when one is near and the window still fits */
	for (size_t j = start; j < start + 200 && j + (size_t)H < n_hay; j++)
		if (hay[j] == '\n') {
			start = j + 1;
			break;
		}
	put(s, hay + start, H);
	return 0;
}

struct line {
	char text[96];
	double depth; /* target offset fraction in the haystack */
};

static int cmp_line(const void *a, const void *b)
{
	double x = ((const struct line *)a)->depth, y = ((const struct line *)b)->depth;
	return x < y ? -1 : x > y;
}

/* out = hay with lines inserted at floor(depth * H) (stable order by depth).
 * Returns the offset in out of the line with index `target` (before sorting). */
static int insert_lines(struct str *out, const struct str *hay, struct line *ln, int m, int target)
{
	int H = hay->n, pos = 0, tpos = -1;
	/* remember the target through the sort */
	char tmark[96];
	snprintf(tmark, sizeof tmark, "%s", target >= 0 ? ln[target].text : "");
	double tdepth = target >= 0 ? ln[target].depth : -1;
	qsort(ln, (size_t)m, sizeof *ln, cmp_line);
	for (int i = 0; i < m; i++) {
		int at = (int)floor(ln[i].depth * H);
		if (at > H)
			at = H;
		if (at < pos)
			at = pos;
		put(out, hay->p + pos, at - pos);
		pos = at;
		if (tpos < 0 && target >= 0 && ln[i].depth == tdepth && strcmp(ln[i].text, tmark) == 0)
			tpos = out->n;
		puts_(out, ln[i].text);
	}
	put(out, hay->p + pos, H - pos);
	return tpos;
}

/* ---- turns ---- */
struct turns {
	int n;
	char q[SB_LM_PROBE_MAXTURN][64];
	char a[SB_LM_PROBE_MAXTURN][64];
};

static int turns_len(const struct turns *t)
{
	int n = 0;
	for (int i = 0; i < t->n; i++)
		n += (int)strlen(t->q[i]) + (int)strlen(t->a[i]);
	return n;
}

static int lines_len(const struct line *ln, int m)
{
	int n = 0;
	for (int i = 0; i < m; i++)
		n += (int)strlen(ln[i].text);
	return n;
}

/* Appends the turns to the text, records their offsets and hands the text to p: 0, or -1
 * when out of memory (the text freed). */
static int finish(struct sb_lm_probe *p, struct str *s, const struct turns *t)
{
	for (int i = 0; i < t->n; i++) {
		p->prompt_beg[i] = i == 0 ? 0 : s->n;
		puts_(s, t->q[i]);
		p->answer_beg[i] = s->n;
		puts_(s, t->a[i]);
		p->answer_end[i] = s->n;
	}
	p->n_turns = t->n;
	if (s->oom) {
		free(s->p);
		s->p = NULL;
		return -1;
	}
	p->text = s->p;
	p->len = s->n;
	return 0;
}

/* Draw depths for distractors; d < 0 draws the target's. */
static double draw_depth(struct sb_rng *r) { return sb_rng_uniform(r); }

/* A haystack made only of lines (needles or facts) of total >= H, cut from the left
 * to exactly H bytes; the target line is then inserted after the line boundary
 * nearest to depth * H. Returns the target's offset. */
typedef void (*line_fn)(struct sb_rng *r, struct wordset *ws, char *buf, void *ctx);

static int hay_of_lines(struct str *out, struct sb_rng *r, struct wordset *ws, int H, line_fn fn, void *ctx,
			const char *target, double depth)
{
	struct str all = {0};
	char buf[96];
	while (all.n < H && !all.oom) {
		fn(r, ws, buf, ctx);
		puts_(&all, buf);
	}
	if (all.oom)
		return -1;
	const uint8_t *h = all.p + (all.n - H);
	int at = (int)floor(depth * H), best = -1;
	/* boundaries: offset 0 and every offset after a '\n' */
	for (int d = 0; d <= H; d++) {
		int lo = at - d, hi = at + d;
		if (lo >= 0 && (lo == 0 || h[lo - 1] == '\n')) {
			best = lo;
			break;
		}
		if (hi <= H && (hi == H || h[hi - 1] == '\n')) {
			best = hi;
			break;
		}
	}
	put(out, h, best);
	int tpos = out->n;
	puts_(out, target);
	put(out, h + best, H - best);
	free(all.p);
	return tpos;
}

struct kv_ctx {
	int hexkeys;
};

static void kv_line(struct sb_rng *r, struct wordset *ws, char *buf, void *vctx)
{
	const struct kv_ctx *c = vctx;
	char k[WORD_MAX], v[WORD_MAX];
	if (fresh(r, ws, c->hexkeys ? W_HEX : W_KEY, k) || (c->hexkeys ? fresh(r, ws, W_HEX, v) : (digits5(r, v), 0)))
		snprintf(k, sizeof k, "x");
	snprintf(buf, 96, "#%s=%s\n", k, v);
}

struct fact_ctx {
	char (*ent)[WORD_MAX];
	int n_ent;
	unsigned char *used; /* n_ent x N_REL */
};

static void fact_line(struct sb_rng *r, struct wordset *ws, char *buf, void *vctx)
{
	struct fact_ctx *c = vctx;
	char a[WORD_MAX];
	int e = 0, rel = 0;
	for (int tries = 0; tries < 1000; tries++) {
		e = (int)sb_rng_below(r, (uint64_t)c->n_ent);
		rel = (int)sb_rng_below(r, N_REL);
		if (!c->used[e * N_REL + rel])
			break;
	}
	c->used[e * N_REL + rel] = 1;
	pseudoword(r, a, 4, 6, 1);
	(void)ws;
	snprintf(buf, 96, "@%s's %s is %s.\n", c->ent[e], relations[rel], a);
}

/* ---- the generators ---- */

static int make_niah(struct sb_lm_probe *p, struct sb_rng *r, struct wordset *ws, int task, int len, const uint8_t *hay,
		     size_t n_hay, double depth)
{
	struct turns t = {0};
	struct line ln[8];
	int m = 0;
	char k[WORD_MAX], v[WORD_MAX];
	int noise = task == SB_LM_NIAH_SINGLE_1;
	int hexval = task == SB_LM_NIAH_SINGLE_3;
	int nneedle = task == SB_LM_NIAH_MULTIKEY_1 || task == SB_LM_NIAH_MULTIQUERY || task == SB_LM_NIAH_MULTIVALUE ? 4
															: 1;
	char keys[4][WORD_MAX], vals[4][WORD_MAX];
	int target = 0;
	for (int i = 0; i < nneedle; i++) {
		if (task == SB_LM_NIAH_MULTIVALUE && i > 0)
			memcpy(keys[i], keys[0], WORD_MAX); /* i > 0: no overlap (snprintf warned at -O1) */
		else if (fresh(r, ws, W_KEY, keys[i]))
			return -1;
		if (fresh(r, ws, hexval ? W_HEX : W_VALUE, vals[i]))
			return -1;
	}
	if (task == SB_LM_NIAH_MULTIKEY_1)
		target = (int)sb_rng_below(r, 4);
	for (int i = 0; i < nneedle; i++) {
		snprintf(ln[m].text, sizeof ln[m].text, "\n#%s=%s\n", keys[i], vals[i]);
		ln[m].depth = i == target ? depth : draw_depth(r);
		m++;
	}
	if (task == SB_LM_NIAH_MULTIVALUE) {
		/* the answer lists the values in order of appearance: fix depths first */
		qsort(ln, (size_t)m, sizeof *ln, cmp_line);
		target = 0;
		depth = ln[0].depth;
		t.n = 1;
		snprintf(t.q[0], sizeof t.q[0], "\n?%s*=", keys[0]);
		t.a[0][0] = 0;
		for (int i = 0; i < m; i++) {
			const char *val = strchr(ln[i].text, '=') + 1;
			size_t L = strlen(t.a[0]);
			snprintf(t.a[0] + L, sizeof t.a[0] - L, "%s%.*s", i ? "," : "", (int)(strlen(val) - 1), val);
		}
		strcat(t.a[0], "\n");
	} else if (task == SB_LM_NIAH_MULTIQUERY) {
		t.n = 4;
		int order[4] = {0, 1, 2, 3};
		for (int i = 3; i > 0; i--) {
			int j = (int)sb_rng_below(r, (uint64_t)i + 1), x = order[i];
			order[i] = order[j];
			order[j] = x;
		}
		for (int i = 0; i < 4; i++) {
			snprintf(t.q[i], sizeof t.q[i], "\n?%s=", keys[order[i]]);
			snprintf(t.a[i], sizeof t.a[i], "%s\n", vals[order[i]]);
		}
	} else {
		t.n = 1;
		snprintf(t.q[0], sizeof t.q[0], "\n?%s=", keys[target]);
		snprintf(t.a[0], sizeof t.a[0], "%s\n", vals[target]);
	}
	(void)k;
	(void)v;
	int H = len - turns_len(&t) - lines_len(ln, m);
	if (H < 16)
		return -2;
	struct str h = {0}, s = {0};
	if (noise)
		hay_noise(&h, H);
	else if (hay_essay(&h, r, hay, n_hay, H)) {
		free(h.p);
		return -3;
	}
	insert_lines(&s, &h, ln, m, target);
	free(h.p);
	p->depth = depth;
	return finish(p, &s, &t);
}

static int make_kv_hay(struct sb_lm_probe *p, struct sb_rng *r, struct wordset *ws, int task, int len, double depth)
{
	int hexk = task == SB_LM_NIAH_MULTIKEY_3;
	char k[WORD_MAX], v[WORD_MAX], tl[96];
	struct turns t = {.n = 1};
	if (fresh(r, ws, hexk ? W_HEX : W_KEY, k) || (hexk ? fresh(r, ws, W_HEX, v) : (digits5(r, v), 0)))
		return -1;
	snprintf(tl, sizeof tl, "#%s=%s\n", k, v);
	snprintf(t.q[0], sizeof t.q[0], "\n?%s=", k);
	snprintf(t.a[0], sizeof t.a[0], "%s\n", v);
	int H = len - turns_len(&t) - (int)strlen(tl);
	if (H < 16)
		return -2;
	struct str s = {0};
	struct kv_ctx c = {hexk};
	int tpos = hay_of_lines(&s, r, ws, H, kv_line, &c, tl, depth);
	if (tpos < 0)
		return -1;
	p->depth = (double)tpos / H;
	return finish(p, &s, &t);
}

static int make_vt(struct sb_lm_probe *p, struct sb_rng *r, struct wordset *ws, int len, double depth)
{
	struct line ln[10];
	int m = 0;
	char v0[WORD_MAX], names[4][WORD_MAX], dv[WORD_MAX], dn[4][WORD_MAX];
	if (fresh(r, ws, W_VALUE, v0) || fresh(r, ws, W_VALUE, dv))
		return -1;
	for (int i = 0; i < 4; i++)
		if (fresh(r, ws, W_KEY, names[i]) || fresh(r, ws, W_KEY, dn[i]))
			return -1;
	/* chain depths: the first at `depth`, the others after it in order */
	double dd[4];
	dd[0] = depth;
	for (int i = 1; i < 4; i++)
		dd[i] = depth + (1 - depth) * sb_rng_uniform(r);
	for (int i = 1; i < 4; i++) /* sort dd[1..3] */
		for (int j = i; j > 1 && dd[j] < dd[j - 1]; j--) {
			double x = dd[j];
			dd[j] = dd[j - 1];
			dd[j - 1] = x;
		}
	double ddist[4];
	for (int i = 0; i < 4; i++)
		ddist[i] = sb_rng_uniform(r);
	for (int i = 1; i < 4; i++)
		for (int j = i; j > 0 && ddist[j] < ddist[j - 1]; j--) {
			double x = ddist[j];
			ddist[j] = ddist[j - 1];
			ddist[j - 1] = x;
		}
	for (int i = 0; i < 4; i++) {
		snprintf(ln[m].text, sizeof ln[m].text, "\n#%s>%s\n", i ? names[i - 1] : v0, names[i]);
		ln[m++].depth = dd[i];
		snprintf(ln[m].text, sizeof ln[m].text, "\n#%s>%s\n", i ? dn[i - 1] : dv, dn[i]);
		ln[m++].depth = ddist[i];
	}
	struct turns t = {.n = 1};
	snprintf(t.q[0], sizeof t.q[0], "\n?%s>", v0);
	snprintf(t.a[0], sizeof t.a[0], "%s>%s>%s>%s\n", names[0], names[1], names[2], names[3]);
	int H = len - turns_len(&t) - lines_len(ln, m);
	if (H < 16)
		return -2;
	struct str h = {0}, s = {0};
	hay_noise(&h, H);
	insert_lines(&s, &h, ln, m, 0);
	free(h.p);
	p->depth = depth;
	return finish(p, &s, &t);
}

/* Join words with ' ', a '\n' after every 8th. */
static int joined_len(char (*w)[WORD_MAX], const int *order, int n)
{
	int L = 0;
	for (int i = 0; i < n; i++)
		L += (int)strlen(w[order[i]]) + 1;
	return L;
}

static void join_words(struct str *s, char (*w)[WORD_MAX], const int *order, int n)
{
	for (int i = 0; i < n; i++) {
		puts_(s, w[order[i]]);
		put(s, (i % 8 == 7) ? "\n" : " ", 1);
	}
}

static void shuffle(struct sb_rng *r, int *a, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)sb_rng_below(r, (uint64_t)i + 1), x = a[i];
		a[i] = a[j];
		a[j] = x;
	}
}

static int make_cwe(struct sb_lm_probe *p, struct sb_rng *r, struct wordset *ws, int len)
{
	struct turns t = {.n = 1};
	snprintf(t.q[0], sizeof t.q[0], "\n?common=");
	/* answer length is known once the words are drawn */
	char common[3][WORD_MAX];
	for (int i = 0; i < 3; i++)
		if (fresh(r, ws, W_KEY, common[i]))
			return -1;
	int fc = len / 80;
	fc = fc < 3 ? 3 : fc > 10 ? 10 : fc;
	int alen = (int)(strlen(common[0]) + strlen(common[1]) + strlen(common[2])) + 3;
	int H = len - (int)strlen(t.q[0]) - alen;
	int cap = H / 2 + 8;
	char(*w)[WORD_MAX] = calloc((size_t)cap, WORD_MAX);
	int *order = calloc((size_t)cap, sizeof *order);
	int n = 0, ret = -1;
	if (!w || !order)
		goto out;
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < fc && n < cap; j++)
			snprintf(w[n++], WORD_MAX, "%s", common[i]);
	int ncommon = n;
	for (int i = 0; i < n; i++)
		order[i] = i;
	while (n < cap && joined_len(w, order, n) < H) {
		if (fresh(r, ws, W_KEY, w[n]))
			goto out;
		order[n] = n;
		n++;
	}
	if (joined_len(w, order, n) > H + 0) {
		/* drop uncommon words (the last drawn) until it fits */
		while (n > ncommon && joined_len(w, order, n) > H)
			n--;
	}
	if (n == ncommon && joined_len(w, order, n) > H) {
		ret = -2;
		goto out;
	}
	int short_by = H - joined_len(w, order, n);
	if (short_by > 0) {
		if (n == ncommon) {
			ret = -2;
			goto out;
		}
		/* lengthen the last uncommon word by short_by letters (kept distinct) */
		int u = n - 1;
		for (int tries = 0; tries < 100; tries++) {
			char cand[WORD_MAX * 2];
			int L = (int)strlen(w[u]);
			snprintf(cand, sizeof cand, "%s", w[u]);
			for (int i = 0; i < short_by && L + i < WORD_MAX * 2 - 1; i++)
				cand[L + i] = "aeiou"[sb_rng_below(r, 5)];
			cand[L + short_by < WORD_MAX * 2 ? L + short_by : WORD_MAX * 2 - 1] = 0;
			if ((int)strlen(cand) < WORD_MAX && !ws_has(ws, cand)) {
				snprintf(w[u], WORD_MAX, "%s", cand);
				ws_add(ws, cand);
				short_by = 0;
				break;
			}
			if ((int)strlen(cand) >= WORD_MAX) { /* split the shortfall: add one word */
				break;
			}
		}
		if (short_by) {
			ret = -2;
			goto out;
		}
	}
	shuffle(r, order, n);
	struct str s = {0};
	join_words(&s, w, order, n);
	/* answer: the common words in order of first appearance */
	int seen[3] = {0, 0, 0}, k = 0;
	t.a[0][0] = 0;
	for (int i = 0; i < n && k < 3; i++)
		if (order[i] < ncommon) {
			int c = order[i] / fc;
			if (!seen[c]) {
				seen[c] = 1;
				size_t L = strlen(t.a[0]);
				snprintf(t.a[0] + L, sizeof t.a[0] - L, "%s%s", k ? " " : "", common[c]);
				k++;
			}
		}
	strcat(t.a[0], "\n");
	p->depth = NAN;
	ret = finish(p, &s, &t);
out:
	free(w);
	free(order);
	return ret;
}

static int make_fwe(struct sb_lm_probe *p, struct sb_rng *r, struct wordset *ws, int len)
{
	enum { NV = 12 };
	char vocab[NV][WORD_MAX];
	for (int i = 0; i < NV; i++)
		if (fresh(r, ws, W_KEY, vocab[i]))
			return -1;
	struct turns t = {.n = 1};
	snprintf(t.q[0], sizeof t.q[0], "\n?frequent=");
	snprintf(t.a[0], sizeof t.a[0], "%s %s %s\n", vocab[0], vocab[1], vocab[2]);
	int H = len - turns_len(&t);
	/* counts from a Zipf law (exponent 1), rank i+1 for vocab[i]; the mean word
	 * takes about 6 bytes with its separator */
	double zs = 0;
	for (int i = 0; i < NV; i++)
		zs += 1.0 / (i + 1);
	int total = H / 6, cnt[NV], n = 0;
	for (int i = 0; i < NV; i++) {
		cnt[i] = (int)floor(total * (1.0 / (i + 1)) / zs);
		if (cnt[i] < 1)
			cnt[i] = 1;
	}
	/* strict order of the top three over the rest */
	for (int i = 3; i >= 0; i--)
		if (i < 3 && cnt[i] <= cnt[i + 1])
			cnt[i] = cnt[i + 1] + 1;
	for (int i = 0; i < NV; i++)
		n += cnt[i];
	int *order = calloc((size_t)n, sizeof *order);
	if (!order)
		return -1;
	/* remove occurrences of the least frequent words until the list fits */
	for (;;) {
		int k = 0;
		for (int i = 0; i < NV; i++)
			for (int j = 0; j < cnt[i]; j++)
				order[k++] = i;
		n = k;
		if (joined_len(vocab, order, n) <= H)
			break;
		int i = NV - 1;
		while (i > 3 && cnt[i] <= 0)
			i--;
		if (i <= 3) {
			free(order);
			return -2;
		}
		cnt[i]--;
	}
	if (cnt[2] <= cnt[3]) {
		free(order);
		return -2;
	}
	shuffle(r, order, n);
	struct str s = {0};
	join_words(&s, vocab, order, n);
	while (s.n < H)
		put(&s, " ", 1);
	free(order);
	p->depth = NAN;
	return finish(p, &s, &t);
}

static int make_qa(struct sb_lm_probe *p, struct sb_rng *r, struct wordset *ws, int task, int len, const uint8_t *hay,
		   size_t n_hay, double depth)
{
	char e[WORD_MAX], a[WORD_MAX];
	if (fresh(r, ws, W_NAME, e) || fresh(r, ws, W_NAME, a))
		return -1;
	int rel = (int)sb_rng_below(r, N_REL);
	struct turns t = {.n = 1};
	snprintf(t.q[0], sizeof t.q[0], "\nQ: What is %s's %s?\nA: ", e, relations[rel]);
	snprintf(t.a[0], sizeof t.a[0], "%s\n", a);
	if (task == SB_LM_QA_1) {
		struct line ln[4];
		snprintf(ln[0].text, sizeof ln[0].text, "\n@%s's %s is %s.\n", e, relations[rel], a);
		ln[0].depth = depth;
		/* distractors: same entity other relation, same relation other entity, both other */
		for (int i = 1; i < 4; i++) {
			char e2[WORD_MAX], a2[WORD_MAX];
			int rel2 = rel;
			if (i != 2)
				while (rel2 == rel)
					rel2 = (int)sb_rng_below(r, N_REL);
			if (i == 1)
				snprintf(e2, sizeof e2, "%s", e);
			else if (fresh(r, ws, W_NAME, e2))
				return -1;
			if (fresh(r, ws, W_NAME, a2))
				return -1;
			snprintf(ln[i].text, sizeof ln[i].text, "\n@%s's %s is %s.\n", e2, relations[rel2], a2);
			ln[i].depth = draw_depth(r);
		}
		int H = len - turns_len(&t) - lines_len(ln, 4);
		if (H < 16)
			return -2;
		struct str h = {0}, s = {0};
		if (hay_essay(&h, r, hay, n_hay, H)) {
			free(h.p);
			return -3;
		}
		insert_lines(&s, &h, ln, 4, 0);
		free(h.p);
		p->depth = depth;
		return finish(p, &s, &t);
	}
	/* qa_2: facts only; entities reused so that both entity and relation must match */
	char tl[96];
	snprintf(tl, sizeof tl, "@%s's %s is %s.\n", e, relations[rel], a);
	int H = len - turns_len(&t) - (int)strlen(tl);
	if (H < 16)
		return -2;
	struct fact_ctx c;
	c.n_ent = H / 80 + 2;
	c.ent = calloc((size_t)c.n_ent, WORD_MAX);
	c.used = calloc((size_t)c.n_ent * N_REL, 1);
	if (!c.ent || !c.used) {
		free(c.ent);
		free(c.used);
		return -1;
	}
	snprintf(c.ent[0], WORD_MAX, "%s", e);
	c.used[0 * N_REL + rel] = 1; /* the target fact is the only one with (e, rel) */
	for (int i = 1; i < c.n_ent; i++)
		if (fresh(r, ws, W_NAME, c.ent[i])) {
			free(c.ent);
			free(c.used);
			return -1;
		}
	struct str s = {0};
	int tpos = hay_of_lines(&s, r, ws, H, fact_line, &c, tl, depth);
	free(c.ent);
	free(c.used);
	if (tpos < 0)
		return -1;
	p->depth = (double)tpos / H;
	return finish(p, &s, &t);
}

/* Training-only dense recall: needles or facts in text, then many queries. */
static int make_recall(struct sb_lm_probe *p, struct sb_rng *r, struct wordset *ws, int task, int len,
		       const uint8_t *hay, size_t n_hay)
{
	int qa = task == SB_LM_QA_RECALL;
	int n = qa ? len / 64 : len / 48;
	if (n < 2)
		n = 2;
	if (n > 64)
		n = 64;
	struct line *ln = calloc((size_t)n, sizeof *ln);
	char(*q)[96] = calloc((size_t)n, 96), (*a)[32] = calloc((size_t)n, 32);
	int *order = calloc((size_t)(4 * n + 8), sizeof *order);
	struct str h = {0}, s = {0}, qs = {0};
	int rc = -1;
	if (!ln || !q || !a || !order)
		goto out;
	char ents[8][WORD_MAX];
	int nent = n / 3 + 1 < 8 ? n / 3 + 1 : 8;
	for (int i = 0; i < nent && qa; i++)
		if (fresh(r, ws, W_NAME, ents[i]))
			goto out;
	unsigned char used[8][N_REL];
	memset(used, 0, sizeof used);
	for (int i = 0; i < n; i++) {
		char k[WORD_MAX], v[WORD_MAX];
		if (qa) {
			int e = 0, rel = 0;
			for (int tries = 0; tries < 100; tries++) {
				e = (int)sb_rng_below(r, (uint64_t)nent);
				rel = (int)sb_rng_below(r, N_REL);
				if (!used[e][rel])
					break;
			}
			used[e][rel] = 1;
			if (fresh(r, ws, W_NAME, v))
				goto out;
			snprintf(ln[i].text, sizeof ln[i].text, "\n@%s's %s is %s.\n", ents[e], relations[rel], v);
			snprintf(q[i], 96, "\nQ: What is %s's %s?\nA: ", ents[e], relations[rel]);
		} else {
			int hexk = sb_rng_below(r, 4) == 0, hexv = sb_rng_below(r, 10) < 3;
			if (fresh(r, ws, hexk ? W_HEX : W_KEY, k) || (hexv ? fresh(r, ws, W_HEX, v) : (digits5(r, v), 0)))
				goto out;
			snprintf(ln[i].text, sizeof ln[i].text, "\n#%s=%s\n", k, v);
			snprintf(q[i], 96, "\n?%s=", k);
		}
		snprintf(a[i], 32, "%s\n", v);
		ln[i].depth = sb_rng_uniform(r);
	}
	/* queries: every needle in random order, then random repeats, within 40% of len */
	int Q = (int)(0.4 * len), nq = 0, qlen = 0;
	for (int i = 0; i < n; i++)
		order[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)sb_rng_below(r, (uint64_t)i + 1), x = order[i];
		order[i] = order[j];
		order[j] = x;
	}
	for (int i = 0; i < 4 * n + 8; i++) {
		int which = i < n ? order[i] : (int)sb_rng_below(r, (uint64_t)n);
		int L = (int)(strlen(q[which]) + strlen(a[which]));
		if (qlen + L > Q)
			break;
		order[nq++] = which;
		qlen += L;
	}
	int nlines = lines_len(ln, n);
	int H = len - qlen - nlines;
	if (nq < 1 || H < 0) {
		rc = -2;
		goto out;
	}
	int mode = (int)sb_rng_below(r, 4); /* 0-1 essay, 2 noise, 3 a list after text */
	if (mode <= 1 && hay && n_hay >= (size_t)H + 1) {
		if (hay_essay(&h, r, hay, n_hay, H))
			goto out;
	} else {
		hay_noise(&h, H);
	}
	if (mode == 3) { /* the needles as one list after the text */
		for (int i = 0; i < n; i++)
			ln[i].depth = 1.0;
	}
	insert_lines(&s, &h, ln, n, -1);
	for (int i = 0; i < nq; i++) {
		if (i == nq - 1)
			p->prompt_beg[0] = s.n; /* the last query is turn 0, its prompt starts here */
		puts_(&s, q[order[i]]);
		if (i == nq - 1)
			p->answer_beg[0] = s.n;
		puts_(&s, a[order[i]]);
	}
	p->answer_end[0] = s.n;
	p->prompt_beg[0] = 0;
	p->n_turns = 1;
	p->depth = NAN;
	if (s.oom)
		goto out;
	p->text = s.p;
	p->len = s.n;
	s.p = NULL;
	rc = 0;
out:
	free(ln);
	free(q);
	free(a);
	free(order);
	free(h.p);
	free(s.p);
	free(qs.p);
	return rc;
}

int sb_lm_probe_make(int task, int len, const uint8_t *hay, size_t n_hay, uint64_t seed, uint32_t purpose,
		     uint64_t index, double depth, struct sb_lm_probe *p, struct sb_err *err)
{
	memset(p, 0, sizeof *p);
	if (task < 0 || task >= SB_LM_NALLTASKS)
		return SB_ERR(err, SB_EUSAGE, "unknown retrieval task %d", task);
	if (len < task_min_len[task])
		return SB_ERR(err, SB_EUSAGE, "task %s needs a context of at least %d bytes (got %d)", task_names[task],
			      task_min_len[task], len);
	p->task = task;
	p->index = index;
	struct sb_rng r;
	sb_rng_init(&r, seed, purpose, (index << 4) | (uint64_t)task);
	if (depth < 0 || depth > 1)
		depth = draw_depth(&r);
	struct wordset ws = {0};
	int rc;
	switch (task) {
	case SB_LM_NIAH_MULTIKEY_2:
	case SB_LM_NIAH_MULTIKEY_3: rc = make_kv_hay(p, &r, &ws, task, len, depth); break;
	case SB_LM_VT: rc = make_vt(p, &r, &ws, len, depth); break;
	case SB_LM_CWE: rc = make_cwe(p, &r, &ws, len); break;
	case SB_LM_FWE: rc = make_fwe(p, &r, &ws, len); break;
	case SB_LM_QA_1:
	case SB_LM_QA_2: rc = make_qa(p, &r, &ws, task, len, hay, n_hay, depth); break;
	case SB_LM_KV_RECALL:
	case SB_LM_QA_RECALL: rc = make_recall(p, &r, &ws, task, len, hay, n_hay); break;
	default: rc = make_niah(p, &r, &ws, task, len, hay, n_hay, depth); break;
	}
	free(ws.w);
	if (rc == -2)
		return SB_ERR(err, SB_EUSAGE, "task %s does not fit in %d bytes", task_names[task], len);
	if (rc == -3)
		return SB_ERR(err, SB_EUSAGE, "task %s needs an essay haystack of at least %d bytes (have %zu)",
			      task_names[task], len, hay ? n_hay : 0);
	if (rc)
		return SB_ERR(err, SB_EINTERNAL, "task %s: out of memory or no distinct words", task_names[task]);
	if (p->len != len) {
		int got = p->len;
		sb_lm_probe_free(p);
		return SB_ERR(err, SB_EINTERNAL, "task %s: made %d bytes, wanted %d", task_names[task], got, len);
	}
	return 0;
}

void sb_lm_probe_free(struct sb_lm_probe *p)
{
	if (!p)
		return;
	free(p->text);
	p->text = NULL;
	p->len = 0;
}

int sb_lm_probe_match(const struct sb_lm_probe *p, int turn, const uint8_t *gen, int n)
{
	if (turn < 0 || turn >= p->n_turns)
		return 0;
	int want = p->answer_end[turn] - p->answer_beg[turn] - 1; /* without '\n' */
	return n == want && memcmp(gen, p->text + p->answer_beg[turn], (size_t)want) == 0;
}
