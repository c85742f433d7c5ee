/* test_lm_mask — mask construction (PROTOCOL C): exact counts, causality, no
 * duplicates, rows shorter than the budget, the recipe against a brute-force
 * reference (ties to the lower index), controls matched to the recipe row by
 * row, random draws uniform and deterministic, heavy hitters and block
 * selection against references, block-touch counting; mask lists: controls
 * inherit the recipe's parameters, ambiguous or unmatched controls refused. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "lm_eval.h"
#include "lm_mask.h"
#include "rng.h"

static int well_formed(const int32_t *idx, int n, int t)
{
	if (n < 1 || n > t + 1)
		return 0;
	for (int i = 0; i < n; i++) {
		if (idx[i] < 0 || idx[i] > t)
			return 0;
		if (i && idx[i] <= idx[i - 1])
			return 0;
	}
	return 1;
}

static int contains(const int32_t *idx, int n, int j)
{
	for (int i = 0; i < n; i++)
		if (idx[i] == j)
			return 1;
	return 0;
}

/* brute-force recipe: S u W plus top-k free by (score desc, index asc) */
static int ref_recipe(int s, int w, int k, int t, const float *sc, int32_t *out)
{
	int n = 0, nf = 0;
	int32_t fr[4096];
	for (int j = 0; j <= t; j++) {
		if (j < s || j > t - w)
			out[n++] = j;
		else
			fr[nf++] = j;
	}
	/* selection sort of the free keys by rank */
	for (int i = 0; i < nf && i < k; i++) {
		int b = i;
		for (int j = i + 1; j < nf; j++)
			if (sc[fr[j]] > sc[fr[b]] || (sc[fr[j]] == sc[fr[b]] && fr[j] < fr[b]))
				b = j;
		int32_t x = fr[i];
		fr[i] = fr[b];
		fr[b] = x;
		out[n++] = fr[i];
	}
	/* sort out */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && out[j] < out[j - 1]; j--) {
			int32_t x = out[j];
			out[j] = out[j - 1];
			out[j - 1] = x;
		}
	return n;
}

int main(void)
{
	enum { T = 1024 };
	float *sc = malloc(T * sizeof *sc), *acc = malloc(T * sizeof *acc), *bs = malloc(T * sizeof *bs);
	int32_t *idx = malloc(T * sizeof *idx), *ref = malloc(T * sizeof *ref), *idx2 = malloc(T * sizeof *idx2);
	struct sb_lm_mask_scratch s;
	sb_lm_mask_scratch_init(&s, T);
	struct sb_rng r;
	sb_rng_init(&r, 1, SB_RNG_USER, 0);

	/* parsing and names */
	{
		struct sb_lm_mask m;
		char buf[64];
		struct sb_err err = {0};
		int ok = sb_lm_mask_parse("recipe", &m, &err) == 0 && m.kind == SB_LM_MASK_RECIPE && m.sinks == 4 &&
			 m.window == 64 && m.topk == 32;
		ok &= sb_lm_mask_parse("recipe:s=2,w=16,k=8", &m, &err) == 0 && m.sinks == 2 && m.window == 16 &&
		      m.topk == 8 && strcmp(sb_lm_mask_name(&m, buf, sizeof buf), "recipe:s=2,w=16,k=8") == 0;
		ok &= sb_lm_mask_parse("block64", &m, &err) == 0 && m.kind == SB_LM_MASK_BLOCK && m.block == 64 &&
		      strcmp(sb_lm_mask_name(&m, buf, sizeof buf), "block64") == 0;
		SB_CHECK(ok, "mask names parse and print back");
		SB_CHECK(sb_lm_mask_parse("bogus", &m, &err) == SB_EUSAGE &&
				 sb_lm_mask_parse("recipe:q=3", &m, &err) == SB_EUSAGE &&
				 sb_lm_mask_parse("recipe:w=0", &m, &err) == SB_EUSAGE &&
				 sb_lm_mask_parse("block0", &m, &err) == SB_EUSAGE &&
				 sb_lm_mask_parse("block1", &m, &err) == SB_EUSAGE,
			 "bad mask specs refused (%s)", err.msg);
		struct sb_lm_mask all[16];
		SB_CHECK(sb_lm_mask_defaults(all, 16) == 9, "nine default methods");
	}

	/* mask lists (sb-lm eval --masks, sb-eval --set masks=): controls at the recipe's budget */
	{
		struct sb_lm_eval_opts o;
		struct sb_err err = {0};
		char buf[64], names[512];
		sb_lm_eval_defaults(&o);
		int rc = sb_lm_eval_set_masks(&o, "recipe:s=4,w=64,k=16;struct_random;random;structure;h2o;block64", &err);
		int ok = rc == 0 && o.n_masks == 7, rows = 1;
		names[0] = 0;
		for (int i = 0; ok && i < o.n_masks; i++) {
			snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? " " : "",
				 sb_lm_mask_name(&o.masks[i], buf, sizeof buf));
			if (i > 0)
				ok &= o.masks[i].sinks == 4 && o.masks[i].window == 64 && o.masks[i].topk == 16;
		}
		SB_CHECK(ok && !strcmp(names, "dense recipe:s=4,w=64,k=16 struct_random:s=4,w=64,k=16 random:s=4,w=64,k=16 "
					      "structure:s=4,w=64,k=16 h2o:s=4,w=64,k=16 block64:s=4,w=64,k=16"),
			 "controls without parameters inherit the recipe's s, w, k and say so in their names (rc %d: %s%s)",
			 rc, names, rc ? err.msg : "");
		for (int t = 0; ok && t < 1024; t++)
			for (int i = 2; i < 6; i++)
				if (o.masks[i].kind != SB_LM_MASK_STRUCTURE &&
				    sb_lm_mask_count(&o.masks[i], t) != sb_lm_mask_count(&o.masks[1], t))
					rows = 0;
		SB_CHECK(ok && rows, "recipe:k=16 with inherited struct_random, random, h2o: the same count on rows 0..1023");
		sb_lm_eval_defaults(&o);
		rc = sb_lm_eval_set_masks(&o, "recipe,struct_random,random", &err);
		SB_CHECK(rc == 0 && o.n_masks == 4 && o.masks[2].topk == 32 &&
				 !strcmp(sb_lm_mask_name(&o.masks[2], buf, sizeof buf), "struct_random"),
			 "default parameters: names unchanged (%s)", rc ? err.msg : buf);
		rc = sb_lm_eval_set_masks(&o, "recipe:k=16;recipe;struct_random:k=16;random:s=4,w=64,k=32;h2o:k=16", &err);
		SB_CHECK(rc == 0 && o.n_masks == 6 && o.masks[3].topk == 16 && o.masks[4].topk == 32 && o.masks[5].topk == 16,
			 "a sweep whose controls give their recipe's parameters is accepted (%s)", rc ? err.msg : "");
		err.msg[0] = 0;
		rc = sb_lm_eval_set_masks(&o, "recipe:k=16;recipe;struct_random", &err);
		SB_CHECK(rc == SB_EUSAGE && strstr(err.msg, "'struct_random'") && strstr(err.msg, "'recipe:k=16'") &&
				 strstr(err.msg, "'recipe'"),
			 "a control without parameters among several recipes is ambiguous: usage error naming the specs "
			 "(rc %d: %s)",
			 rc, err.msg);
		err.msg[0] = 0;
		rc = sb_lm_eval_set_masks(&o, "recipe:s=4,w=64,k=16;struct_random:k=32", &err);
		SB_CHECK(rc == SB_EUSAGE && strstr(err.msg, "'struct_random:k=32'") &&
				 strstr(err.msg, "'recipe:s=4,w=64,k=16'"),
			 "a control whose parameters match no recipe: usage error naming both specs (rc %d: %s)", rc,
			 err.msg);
		err.msg[0] = 0;
		rc = sb_lm_eval_set_masks(&o, "recipe:k=16;recipe:k=8;block16:w=32,k=16", &err);
		SB_CHECK(rc == SB_EUSAGE && strstr(err.msg, "'block16:w=32,k=16'"),
			 "a block control matching neither recipe of a sweep is refused (rc %d: %s)", rc, err.msg);
		err.msg[0] = 0;
		rc = sb_lm_eval_set_masks(&o, "recipe:k=16;struct_random;struct_random:k=16", &err);
		SB_CHECK(rc == SB_EUSAGE, "the same method twice (once inherited) is refused (rc %d: %s)", rc, err.msg);
		rc = sb_lm_eval_set_masks(&o, "struct_random:k=8;random", &err);
		SB_CHECK(rc == 0 && o.n_masks == 3 && o.masks[1].topk == 8 && o.masks[2].topk == 32,
			 "without a recipe every mask keeps its own parameters (%s)", rc ? err.msg : "");
	}

	/* configurations: default recipe, small ones, edge cases */
	const char *cfgs[] = {"recipe", "recipe:s=0,w=1,k=0", "recipe:s=4,w=8,k=3", "recipe:s=1,w=1,k=5",
			      "recipe:s=64,w=64,k=32", "recipe:s=4,w=2000,k=32"};
	for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
		struct sb_lm_mask rec, srnd, rnd, st, h2o;
		sb_lm_mask_parse(cfgs[ci], &rec, NULL);
		srnd = rec;
		srnd.kind = SB_LM_MASK_STRUCT_RANDOM;
		srnd.seed = 5;
		rnd = rec;
		rnd.kind = SB_LM_MASK_RANDOM;
		rnd.seed = 5;
		st = rec;
		st.kind = SB_LM_MASK_STRUCTURE;
		h2o = rec;
		h2o.kind = SB_LM_MASK_H2O;
		int ok_form = 1, ok_ref = 1, ok_count = 1, ok_sw = 1, ok_short = 1, ok_h2o = 1, ok_st = 1;
		double kept[4] = {0, 0, 0, 0};
		for (int t = 0; t < T; t++) {
			/* scores with ties: quantised normals */
			for (int j = 0; j <= t; j++) {
				sc[j] = (float)floor(4 * sb_rng_normal(&r)) / 4;
				acc[j] = (float)floor(8 * sb_rng_uniform(&r)) / 8;
			}
			int want = rec.sinks + 0;
			(void)want;
			int c = sb_lm_mask_recipe_count(&rec, t);
			int n = sb_lm_mask_row(&rec, 0, 0, t, sc, NULL, NULL, idx, &s);
			int nr = ref_recipe(rec.sinks, rec.window, rec.topk, t, sc, ref);
			ok_form &= well_formed(idx, n, t);
			ok_ref &= n == nr && memcmp(idx, ref, (size_t)n * sizeof *idx) == 0;
			ok_count &= n == c;
			if (t + 1 <= c)
				ok_short &= n == t + 1;
			kept[0] += n;
			int n2 = sb_lm_mask_row(&srnd, 0, 0, t, NULL, NULL, NULL, idx2, &s);
			ok_form &= well_formed(idx2, n2, t);
			ok_count &= n2 == c;
			kept[1] += n2;
			for (int j = 0; j <= t; j++)
				if (j < rec.sinks || j > t - rec.window)
					ok_sw &= contains(idx2, n2, j);
			n2 = sb_lm_mask_row(&rnd, 0, 0, t, NULL, NULL, NULL, idx2, &s);
			ok_form &= well_formed(idx2, n2, t);
			ok_count &= n2 == c;
			kept[2] += n2;
			n2 = sb_lm_mask_row(&st, 0, 0, t, NULL, NULL, NULL, idx2, &s);
			ok_form &= well_formed(idx2, n2, t);
			int nsw = 0;
			for (int j = 0; j <= t; j++)
				if (j < rec.sinks || j > t - rec.window) {
					nsw++;
					ok_st &= contains(idx2, n2, j);
				}
			ok_st &= n2 == nsw && n2 == sb_lm_mask_count(&st, t);
			n2 = sb_lm_mask_row(&h2o, 0, 0, t, NULL, acc, NULL, idx2, &s);
			ok_form &= well_formed(idx2, n2, t);
			ok_count &= n2 == c;
			kept[3] += n2;
			/* h2o: the window, then the best accumulated keys outside it */
			if (n2 < t + 1) {
				int wlo = t - rec.window + 1 > 0 ? t - rec.window + 1 : 0;
				for (int j = wlo; j <= t; j++)
					ok_h2o &= contains(idx2, n2, j);
				/* every kept heavy hitter ranks before every dropped key */
				for (int a = 0; a < wlo; a++) {
					if (!contains(idx2, n2, a))
						continue;
					for (int b = 0; b < wlo; b++)
						if (!contains(idx2, n2, b) &&
						    !(acc[a] > acc[b] || (acc[a] == acc[b] && a < b)))
							ok_h2o = 0;
				}
			}
		}
		SB_CHECK(ok_form, "%s: every row sorted, causal, no duplicates, non-empty (all methods)", cfgs[ci]);
		SB_CHECK(ok_ref, "%s: recipe equals the brute-force reference on %d rows (quantised scores: ties to lower index)",
			 cfgs[ci], T);
		SB_CHECK(ok_count, "%s: recipe, struct_random, random, h2o keep min(t+1, |SuW|+k) on every row", cfgs[ci]);
		SB_CHECK(ok_short, "%s: rows shorter than the budget keep all their keys", cfgs[ci]);
		SB_CHECK(ok_sw, "%s: struct_random keeps the sinks and the window", cfgs[ci]);
		SB_CHECK(ok_st, "%s: structure = sinks + window exactly", cfgs[ci]);
		SB_CHECK(ok_h2o, "%s: h2o keeps the window and the top accumulated keys", cfgs[ci]);
		SB_CHECK(kept[0] == kept[1] && kept[0] == kept[2] && kept[0] == kept[3],
			 "%s: matched budgets: kept pairs recipe %.0f, struct_random %.0f, random %.0f, h2o %.0f", cfgs[ci],
			 kept[0], kept[1], kept[2], kept[3]);
	}

	/* the default recipe's budget at T = 512 and 1024: closed form */
	{
		struct sb_lm_mask m;
		sb_lm_mask_parse("recipe", &m, NULL);
		for (int TT = 512; TT <= 1024; TT *= 2) {
			double kept = 0, causal = 0;
			for (int t = 0; t < TT; t++) {
				kept += sb_lm_mask_recipe_count(&m, t);
				causal += t + 1;
			}
			double want = 5050.0 + (TT - 100) * 100.0;
			SB_CHECK(kept == want, "recipe at T=%d keeps %.0f of %.0f causal pairs (%.4f; closed form %.0f)", TT,
				 kept, causal, kept / causal, want);
		}
	}

	/* random draws: deterministic, seed-dependent, uniform over the free keys */
	{
		struct sb_lm_mask m;
		sb_lm_mask_parse("struct_random", &m, NULL);
		m.seed = 9;
		int t = 500, n1 = sb_lm_mask_row(&m, 2, 3, t, NULL, NULL, NULL, idx, &s);
		int n2 = sb_lm_mask_row(&m, 2, 3, t, NULL, NULL, NULL, idx2, &s);
		SB_CHECK(n1 == n2 && memcmp(idx, idx2, (size_t)n1 * 4) == 0, "struct_random: same (seed, layer, head, row), same keys");
		m.seed = 10;
		n2 = sb_lm_mask_row(&m, 2, 3, t, NULL, NULL, NULL, idx2, &s);
		SB_CHECK(memcmp(idx, idx2, (size_t)n1 * 4) != 0, "struct_random: another seed, other keys");
		m.seed = 9;
		n2 = sb_lm_mask_row(&m, 2, 4, t, NULL, NULL, NULL, idx2, &s);
		SB_CHECK(memcmp(idx, idx2, (size_t)n1 * 4) != 0, "struct_random: another head, other keys (drawn per head)");
		/* frequency of each free key over many seeds: free keys 4..436 (433), 32 drawn */
		static int freq[T];
		memset(freq, 0, sizeof freq);
		int R = 4000;
		for (int i = 0; i < R; i++) {
			m.seed = (uint64_t)i;
			int n = sb_lm_mask_row(&m, 0, 0, t, NULL, NULL, NULL, idx, &s);
			for (int q = 0; q < n; q++)
				freq[idx[q]]++;
		}
		double e = R * 32.0 / 433, chi = 0;
		for (int j = 4; j <= 436; j++)
			chi += (freq[j] - e) * (freq[j] - e) / e;
		/* chi-square with 432 df: mean 432, sd ~29.4; 600 is beyond 5.7 sd */
		SB_CHECK(chi < 600 && chi > 300, "struct_random free keys uniform: chi2 = %.1f on 432 df", chi);
		struct sb_lm_mask u;
		sb_lm_mask_parse("random", &u, NULL);
		memset(freq, 0, sizeof freq);
		for (int i = 0; i < R; i++) {
			u.seed = (uint64_t)i;
			int n = sb_lm_mask_row(&u, 0, 0, t, NULL, NULL, NULL, idx, &s);
			for (int q = 0; q < n; q++)
				freq[idx[q]]++;
		}
		e = R * 100.0 / 501;
		chi = 0;
		for (int j = 0; j <= 500; j++)
			chi += (freq[j] - e) * (freq[j] - e) / e;
		SB_CHECK(chi < 700 && chi > 350, "random keys uniform over 0..t: chi2 = %.1f on 500 df", chi);
	}

	/* block selection */
	for (int B = 16; B <= 128; B *= 2) {
		if (B == 32)
			continue;
		struct sb_lm_mask m;
		char spec[32];
		snprintf(spec, sizeof spec, "block%d", B);
		sb_lm_mask_parse(spec, &m, NULL);
		int ok = 1, ok_top = 1;
		double kept = 0, rkept = 0;
		for (int t = 0; t < T; t++) {
			int c0 = t / B;
			for (int c = 0; c < c0; c++)
				bs[c] = (float)floor(3 * sb_rng_normal(&r)) / 3;
			int n = sb_lm_mask_row(&m, 0, 0, t, NULL, NULL, bs, idx, &s);
			ok &= well_formed(idx, n, t);
			for (int j = c0 * B; j <= t; j++)
				ok &= contains(idx, n, j);
			/* whole blocks: the count of earlier keys is a multiple of B */
			int own = t - c0 * B + 1, mb = (n - own) / B;
			ok &= (n - own) % B == 0 && sb_lm_mask_blocks_touched(idx, n, B) == mb + 1;
			/* number of blocks: closest to the recipe budget */
			int want = sb_lm_mask_recipe_count(&m, t) - own;
			int best = 0;
			for (int q = 0; q <= c0; q++)
				if (abs(q * B - want) < abs(best * B - want))
					best = q;
			ok &= mb == best;
			/* the chosen blocks rank before the others */
			for (int a = 0; a < c0; a++)
				for (int b = 0; b < c0; b++)
					if (contains(idx, n, a * B) && !contains(idx, n, b * B) &&
					    !(bs[a] > bs[b] || (bs[a] == bs[b] && a < b)))
						ok_top = 0;
			kept += n;
			rkept += sb_lm_mask_recipe_count(&m, t);
		}
		SB_CHECK(ok, "block%d: own block, whole earlier blocks, block count closest to the recipe's budget", B);
		SB_CHECK(ok_top, "block%d: selected blocks are the top-scoring ones (ties to the lower block)", B);
		printf("# block%d at T=%d keeps %.0f pairs (recipe %.0f)\n", B, T, kept, rkept);
	}

	/* k = 0 (recipe:k=0, h2o with no heavy hitter): nothing is chosen among the free keys, and
	 * nothing is read from the output slots (once top_k read out[0], never written, as a key
	 * index: a crash or a wrong key, with scratch left over from earlier rows) */
	{
		struct sb_lm_mask mr, mh;
		sb_lm_mask_parse("recipe:s=0,w=1,k=0", &mr, NULL);
		sb_lm_mask_parse("h2o:s=0,w=16,k=0", &mh, NULL);
		int ok = 1, t = 200;
		for (int j = 0; j < T; j++) {
			idx[j] = INT32_MAX; /* poison: an index far outside every row */
			sc[j] = acc[j] = (float)(j % 13);
		}
		int n = sb_lm_mask_row(&mr, 0, 0, t, sc, NULL, NULL, idx, &s);
		ok &= n == 1 && idx[0] == t;
		for (int j = 0; j < T; j++)
			idx[j] = INT32_MAX;
		n = sb_lm_mask_row(&mh, 0, 0, t, sc, acc, NULL, idx, &s);
		ok &= well_formed(idx, n, t) && n == 16 && idx[0] == t - 15;
		SB_CHECK(ok, "k = 0: the recipe keeps the query alone, h2o its window of 16 (rows of t = %d)", t);
	}

	/* blocks touched */
	{
		int32_t a[] = {0, 1, 2, 15, 16, 17, 40, 127, 128, 500};
		SB_CHECK(sb_lm_mask_blocks_touched(a, 10, 16) == 6 && sb_lm_mask_blocks_touched(a, 10, 64) == 4 &&
				 sb_lm_mask_blocks_touched(a, 10, 128) == 3 && sb_lm_mask_blocks_touched(a, 10, 1) == 10,
			 "blocks touched by an index list (16: %d, 64: %d, 128: %d)", sb_lm_mask_blocks_touched(a, 10, 16),
			 sb_lm_mask_blocks_touched(a, 10, 64), sb_lm_mask_blocks_touched(a, 10, 128));
	}

	sb_lm_mask_scratch_free(&s);
	free(sc);
	free(acc);
	free(bs);
	free(idx);
	free(idx2);
	free(ref);
	return sb_test_done();
}
