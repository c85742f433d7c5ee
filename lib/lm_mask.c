/* lm_mask.c — per-row key selection for the sparse masks (see lm_mask.h). */
#include "lm_mask.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

static const struct {
	const char *name;
	enum sb_lm_mask_kind kind;
} kinds[] = {{"dense", SB_LM_MASK_DENSE},         {"recipe", SB_LM_MASK_RECIPE}, {"struct_random", SB_LM_MASK_STRUCT_RANDOM},
	     {"random", SB_LM_MASK_RANDOM},       {"structure", SB_LM_MASK_STRUCTURE}, {"h2o", SB_LM_MASK_H2O}};

int sb_lm_mask_parse(const char *spec, struct sb_lm_mask *m, struct sb_err *err)
{
	memset(m, 0, sizeof *m);
	m->sinks = 4;
	m->window = 64;
	m->topk = 32;
	char name[64];
	const char *colon = strchr(spec, ':');
	size_t L = colon ? (size_t)(colon - spec) : strlen(spec);
	if (L == 0 || L >= sizeof name)
		return SB_ERR(err, SB_EUSAGE, "bad mask '%s'", spec);
	memcpy(name, spec, L);
	name[L] = 0;
	int found = 0;
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (strcmp(name, kinds[i].name) == 0) {
			m->kind = kinds[i].kind;
			found = 1;
		}
	if (!found && strncmp(name, "block", 5) == 0) {
		char *end;
		long b = strtol(name + 5, &end, 10);
		/* B >= 2: a block of one key is the recipe's top-k (and the selection's scratch,
		 * block ids then chosen blocks, holds 2 T entries only for B >= 2) */
		if (end != name + 5 && !*end && b >= 2 && b <= 1 << 20) {
			m->kind = SB_LM_MASK_BLOCK;
			m->block = (int)b;
			found = 1;
		}
	}
	if (!found)
		return SB_ERR(err, SB_EUSAGE,
			      "unknown mask '%s' (dense, recipe, struct_random, random, structure, h2o, blockB with B >= 2)",
			      name);
	if (colon) {
		char *dup = strdup(colon + 1), *save = NULL;
		if (!dup)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		int rc = 0;
		char seen[4] = "";
		for (char *tok = strtok_r(dup, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
			char *end;
			if (tok[0] && strchr(seen, tok[0])) {
				rc = SB_ERR(err, SB_EUSAGE, "mask parameter '%c' given twice in '%s'", tok[0], spec);
				break;
			}
			if (strlen(seen) < 3 && strchr("swk", tok[0]) && tok[0])
				seen[strlen(seen)] = tok[0];
			if (strlen(tok) < 3 || tok[1] != '=') {
				rc = SB_ERR(err, SB_EUSAGE, "bad mask parameter '%s' in '%s'", tok, spec);
				break;
			}
			long v = strtol(tok + 2, &end, 10);
			if (*end || v < 0 || v > 1 << 20) {
				rc = SB_ERR(err, SB_EUSAGE, "bad mask parameter '%s' in '%s'", tok, spec);
				break;
			}
			switch (tok[0]) {
			case 's': m->sinks = (int)v; break;
			case 'w': m->window = (int)v; break;
			case 'k': m->topk = (int)v; break;
			default: rc = SB_ERR(err, SB_EUSAGE, "unknown mask parameter '%c' in '%s'", tok[0], spec);
			}
		}
		free(dup);
		if (rc)
			return rc;
	}
	if (m->window < 1 && m->kind != SB_LM_MASK_DENSE)
		return SB_ERR(err, SB_EUSAGE, "mask '%s': the window must hold at least the query (w >= 1)", spec);
	return 0;
}

const char *sb_lm_mask_name(const struct sb_lm_mask *m, char *buf, size_t cap)
{
	const char *base = "?";
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (kinds[i].kind == m->kind)
			base = kinds[i].name;
	char b[32];
	if (m->kind == SB_LM_MASK_BLOCK) {
		snprintf(b, sizeof b, "block%d", m->block);
		base = b;
	}
	if (m->kind != SB_LM_MASK_DENSE && (m->sinks != 4 || m->window != 64 || m->topk != 32))
		snprintf(buf, cap, "%s:s=%d,w=%d,k=%d", base, m->sinks, m->window, m->topk);
	else
		snprintf(buf, cap, "%s", base);
	return buf;
}

int sb_lm_mask_defaults(struct sb_lm_mask *out, int cap)
{
	static const char *const names[] = {"dense", "recipe", "struct_random", "random", "structure",
					    "h2o",   "block16", "block64",     "block128"};
	int n = 0;
	for (size_t i = 0; i < sizeof names / sizeof names[0] && n < cap; i++)
		sb_lm_mask_parse(names[i], &out[n++], NULL);
	return n;
}

/* Name a recipe spec for a message: "recipe" + its parameters as given. */
static const char *recipe_specs(const struct sb_lm_mask *m, char *const *spec, int n, char *buf, size_t cap)
{
	size_t at = 0;
	buf[0] = 0;
	for (int i = 0; i < n && at + 1 < cap; i++)
		if (m[i].kind == SB_LM_MASK_RECIPE) {
			int k = snprintf(buf + at, cap - at, "%s'%s'", at ? ", " : "", spec[i]);
			if (k < 0)
				break;
			at += (size_t)k < cap - at ? (size_t)k : cap - at - 1;
		}
	return buf;
}

int sb_lm_mask_parse_list(const char *list, struct sb_lm_mask *out, int cap, int *n_out, struct sb_err *err)
{
	*n_out = 0;
	char *dup = strdup(list), *save = NULL;
	char **spec = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *spec);
	if (!dup || !spec) {
		free(dup);
		free(spec);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	int n = 0, rc = 0, nrec = 0, first_rec = -1;
	/* ';' separates masks (a mask's parameters use ','); a plain list without ':' may use ',' */
	const char *sep = strchr(list, ':') ? ";" : ",;";
	for (char *t = strtok_r(dup, sep, &save); t && !rc; t = strtok_r(NULL, sep, &save)) {
		if (n == cap) {
			rc = SB_ERR(err, SB_EUSAGE, "too many masks");
			break;
		}
		spec[n] = t;
		rc = sb_lm_mask_parse(t, &out[n], err);
		if (!rc && out[n].kind == SB_LM_MASK_RECIPE && nrec++ == 0)
			first_rec = n;
		n++;
	}
	/* controls at matched budget: a control with no parameters of its own inherits the
	 * recipe's; one with parameters must equal a recipe's */
	char rs[512];
	for (int i = 0; i < n && !rc && nrec > 0; i++) {
		if (out[i].kind == SB_LM_MASK_DENSE || out[i].kind == SB_LM_MASK_RECIPE)
			continue;
		if (!strchr(spec[i], ':')) {
			if (nrec > 1) {
				rc = SB_ERR(err, SB_EUSAGE,
					    "mask '%s' is ambiguous: the list holds several recipes (%s); give it the "
					    "parameters of the recipe it is matched to ('%s:s=S,w=W,k=K')",
					    spec[i], recipe_specs(out, spec, n, rs, sizeof rs), spec[i]);
				break;
			}
			out[i].sinks = out[first_rec].sinks;
			out[i].window = out[first_rec].window;
			out[i].topk = out[first_rec].topk;
			continue;
		}
		int match = 0;
		for (int j = 0; j < n && !match; j++)
			match = out[j].kind == SB_LM_MASK_RECIPE && sb_lm_mask_same_params(&out[i], &out[j]);
		if (!match)
			rc = SB_ERR(err, SB_EUSAGE,
				    "mask '%s' matches no recipe of the list (%s): a control's s, w, k must equal its "
				    "recipe's (or be left out to inherit them)",
				    spec[i], recipe_specs(out, spec, n, rs, sizeof rs));
	}
	/* every method name once: records are keyed by it */
	for (int i = 0; i < n && !rc; i++)
		for (int j = 0; j < i && !rc; j++) {
			char a[64], b[64];
			if (!strcmp(sb_lm_mask_name(&out[i], a, sizeof a), sb_lm_mask_name(&out[j], b, sizeof b)))
				rc = SB_ERR(err, SB_EUSAGE, "masks '%s' and '%s' are the same method (%s)", spec[j], spec[i],
					    a);
		}
	free(spec);
	free(dup);
	if (!rc)
		*n_out = n;
	return rc;
}

/* |S u W| for row t */
static int sw_count(const struct sb_lm_mask *m, int t)
{
	int n = t + 1;
	int s = m->sinks < n ? m->sinks : n;
	int wlo = t - m->window + 1;
	if (wlo < 0)
		wlo = 0;
	int w = t - wlo + 1;
	int overlap = s > wlo ? s - wlo : 0;
	return s + w - overlap;
}

int sb_lm_mask_recipe_count(const struct sb_lm_mask *m, int t)
{
	int c = sw_count(m, t) + m->topk;
	return c < t + 1 ? c : t + 1;
}

int sb_lm_mask_count(const struct sb_lm_mask *m, int t)
{
	switch (m->kind) {
	case SB_LM_MASK_DENSE: return t + 1;
	case SB_LM_MASK_STRUCTURE: return sw_count(m, t);
	case SB_LM_MASK_BLOCK: return -1;
	default: return sb_lm_mask_recipe_count(m, t);
	}
}

int sb_lm_mask_scratch_init(struct sb_lm_mask_scratch *s, int T)
{
	s->cap = T;
	s->a = malloc((size_t)(T > 0 ? T : 1) * sizeof *s->a);
	s->f = malloc((size_t)(T > 0 ? T : 1) * sizeof *s->f);
	if (!s->a || !s->f) {
		sb_lm_mask_scratch_free(s);
		return -1;
	}
	return 0;
}

void sb_lm_mask_scratch_free(struct sb_lm_mask_scratch *s)
{
	if (!s)
		return;
	free(s->a);
	free(s->f);
	s->a = NULL;
	s->f = NULL;
	s->cap = 0;
}

/* "a ranks before b": larger value first, then lower index. */
static inline int before(float va, int ia, float vb, int ib) { return va > vb || (va == vb && ia < ib); }

/* Keep the k best of cand[0..n) by val[] (total order `before`), written to out[0..k)
 * in no particular order. A bounded min-heap on the ranking. */
static void top_k(const int32_t *cand, int n, const float *val, int k, int32_t *out)
{
	if (k <= 0) /* nothing to keep (recipe:k=0, h2o with no heavy hitter): out[0] is not ours */
		return;
	int h = 0;
	for (int i = 0; i < n; i++) {
		int c = cand[i];
		if (h < k) {
			/* sift up: the heap's root is the worst kept */
			int j = h++;
			out[j] = c;
			while (j > 0) {
				int p = (j - 1) / 2;
				if (before(val[out[p]], out[p], val[out[j]], out[j])) {
					int x = out[p];
					out[p] = out[j];
					out[j] = x;
					j = p;
				} else
					break;
			}
		} else if (before(val[c], c, val[out[0]], out[0])) {
			out[0] = c;
			int j = 0;
			for (;;) {
				int l = 2 * j + 1, r = l + 1, w = j;
				if (l < h && before(val[out[w]], out[w], val[out[l]], out[l]))
					w = l;
				if (r < h && before(val[out[w]], out[w], val[out[r]], out[r]))
					w = r;
				if (w == j)
					break;
				int x = out[w];
				out[w] = out[j];
				out[j] = x;
				j = w;
			}
		}
	}
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/* Sort small index lists: insertion sort when short, else qsort. */
static void sort_idx(int32_t *a, int n)
{
	if (n > 48) {
		qsort(a, (size_t)n, sizeof *a, cmp_i32);
		return;
	}
	for (int i = 1; i < n; i++) {
		int32_t x = a[i];
		int j = i - 1;
		while (j >= 0 && a[j] > x) {
			a[j + 1] = a[j];
			j--;
		}
		a[j + 1] = x;
	}
}

/* m distinct uniform draws from cand[0..n) (partial Fisher-Yates; cand is permuted). */
static void draw(struct sb_rng *r, int32_t *cand, int n, int m, int32_t *out)
{
	for (int i = 0; i < m; i++) {
		int j = i + (int)sb_rng_below(r, (uint64_t)(n - i));
		int32_t x = cand[i];
		cand[i] = cand[j];
		cand[j] = x;
		out[i] = cand[i];
	}
}

/* Write S u W (sorted) to idx; returns the count; free keys to s->a (sorted). */
static int sink_window(const struct sb_lm_mask *m, int t, int32_t *idx, int32_t *freek, int *nfree)
{
	int n = 0, nf = 0;
	int wlo = t - m->window + 1;
	if (wlo < 0)
		wlo = 0;
	for (int j = 0; j <= t; j++) {
		if (j < m->sinks || j >= wlo)
			idx[n++] = j;
		else if (freek)
			freek[nf++] = j;
	}
	if (nfree)
		*nfree = nf;
	return n;
}

int sb_lm_mask_row(const struct sb_lm_mask *m, int layer, int head, int t, const float *scores, const float *acc,
		   const float *bscore, int32_t *idx, struct sb_lm_mask_scratch *s)
{
	int n = 0;
	switch (m->kind) {
	case SB_LM_MASK_DENSE:
		for (int j = 0; j <= t; j++)
			idx[j] = j;
		return t + 1;
	case SB_LM_MASK_STRUCTURE: return sink_window(m, t, idx, NULL, NULL);
	case SB_LM_MASK_RECIPE:
	case SB_LM_MASK_STRUCT_RANDOM: {
		int nf;
		n = sink_window(m, t, idx, s->a, &nf);
		int k = m->topk < nf ? m->topk : nf;
		if (k == nf) {
			memcpy(idx + n, s->a, (size_t)nf * sizeof *idx);
		} else if (m->kind == SB_LM_MASK_RECIPE) {
			top_k(s->a, nf, scores, k, idx + n);
		} else {
			struct sb_rng r;
			sb_rng_init(&r, m->seed, SB_RNG_MASK, sb_lm_mask_stream(layer, head, t));
			draw(&r, s->a, nf, k, idx + n);
		}
		n += k;
		sort_idx(idx, n);
		return n;
	}
	case SB_LM_MASK_RANDOM: {
		int c = sb_lm_mask_recipe_count(m, t);
		if (c >= t + 1) {
			for (int j = 0; j <= t; j++)
				idx[j] = j;
			return t + 1;
		}
		for (int j = 0; j <= t; j++)
			s->a[j] = j;
		struct sb_rng r;
		sb_rng_init(&r, m->seed, SB_RNG_MASK, sb_lm_mask_stream(layer, head, t));
		draw(&r, s->a, t + 1, c, idx);
		sort_idx(idx, c);
		return c;
	}
	case SB_LM_MASK_H2O: {
		int c = sb_lm_mask_recipe_count(m, t);
		if (c >= t + 1) {
			for (int j = 0; j <= t; j++)
				idx[j] = j;
			return t + 1;
		}
		int wlo = t - m->window + 1;
		if (wlo < 0)
			wlo = 0;
		int nw = t - wlo + 1, nh = c - nw;
		for (int j = 0; j < wlo; j++)
			s->a[j] = j;
		top_k(s->a, wlo, acc, nh, idx);
		for (int j = wlo; j <= t; j++)
			idx[nh + j - wlo] = j;
		sort_idx(idx, nh);
		return c;
	}
	case SB_LM_MASK_BLOCK: {
		int B = m->block, c0 = t / B, own = t - c0 * B + 1;
		int want = sb_lm_mask_recipe_count(m, t) - own;
		int mb = want > 0 ? (2 * want + B - 1) / (2 * B) : 0; /* round half down of want/B */
		if (mb > c0)
			mb = c0;
		if (mb > 0) {
			for (int c = 0; c < c0; c++)
				s->a[c] = c;
			top_k(s->a, c0, bscore, mb, s->a + c0);
			sort_idx(s->a + c0, mb);
			for (int i = 0; i < mb; i++) {
				int c = s->a[c0 + i];
				for (int j = c * B; j < (c + 1) * B; j++)
					idx[n++] = j;
			}
		}
		for (int j = c0 * B; j <= t; j++)
			idx[n++] = j;
		return n;
	}
	}
	return 0;
}

int sb_lm_mask_blocks_touched(const int32_t *idx, int n, int B)
{
	int cnt = 0, last = -1;
	for (int i = 0; i < n; i++) {
		int b = idx[i] / B;
		if (b != last) {
			cnt++;
			last = b;
		}
	}
	return cnt;
}
