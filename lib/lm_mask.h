/* lm_mask.h — training-free sparse attention masks of the LM track (PROTOCOL C).
 *
 * A mask selects, for each query row t of a causal full-attention layer, a set
 * of keys among 0..t. Unselected keys are excluded before the softmax; selected
 * keys keep their scores. Masks touch only A layers.
 *
 * Selection is PER HEAD (each head of each A layer selects with its own scores,
 * accumulated attention or pooled keys) and PER ROW; the random controls draw
 * independently per (layer, head, row) and match the recipe's count row by row,
 * so every control is matched per head as well.
 *
 * Every method uses only keys that exist at step t (0..t), and only quantities
 * available when decoding token t with a KV cache: its own scores q_t.k_j, the
 * attention of earlier rows (heavy hitters), and pooled keys of complete blocks.
 * One function (sb_lm_mask_row) serves the full-sequence forward and KV-cached
 * decoding, so decode-time selection equals the causal full-sequence mask.
 *
 * Methods (names as written in records):
 *   dense          all keys 0..t.
 *   recipe         sinks S = {0..s-1} (s = 4), window W = {t-w+1..t} (w = 64, the
 *                  query included), plus the k = 32 highest-scoring "free" keys
 *                  (not in S or W) by the query's own score; ties go to the lower
 *                  key index. Rows with <= |S u W| + k causal keys keep all of them.
 *                  Kept count n(t) = min(t+1, |S u W| + k).
 *   struct_random  S u W plus min(k, #free) free keys drawn uniformly without
 *                  replacement: the same count n(t) as the recipe on every row.
 *   random         n(t) keys drawn uniformly without replacement from 0..t
 *                  (unstructured; the query itself is not forced in).
 *   structure      S u W only (StreamingLLM); a smaller budget, reported as measured.
 *   h2o            heavy hitters (H2O-style): the window W plus the n(t) - |W| keys
 *                  outside W with the largest accumulated attention
 *                  A_t(j) = sum over rows i < t of p_i(j), where p_i is the attention
 *                  row i actually computed under this mask (the quantity a decoder
 *                  has when it decides what to keep for token t); ties go to the
 *                  lower key index. Count n(t), matched to the recipe row by row.
 *                  Keys are re-ranked every row (no permanent eviction).
 *   blockB         block selection (Quest/MoBA-style) with blocks of B keys
 *                  (B = 16, 64, 128): the query's own block (its causal part) plus the
 *                  top m(t) complete earlier blocks scored by q_t . mean(k over the
 *                  block) / sqrt(hd), ties to the lower block; m(t) =
 *                  round((n(t) - own)/B) clamped to [0, #earlier blocks] (round half
 *                  down), i.e. the block count closest to the recipe's budget. Its
 *                  budget is not exactly the recipe's and is reported as measured.
 * The numbers s, w, k (and B) are configurable: "recipe:s=4,w=64,k=32". In a mask
 * list (sb_lm_mask_parse_list) a control without numbers of its own takes the
 * recipe's, so that it stays matched to the recipe's budget.
 *
 * Random draws: sb_rng(seed, SB_RNG_MASK, stream = sb_lm_mask_stream(layer, head, t)),
 * where `seed` is the mask's seed (the evaluation sets it per text).
 */
#ifndef SB_LM_MASK_H
#define SB_LM_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

enum sb_lm_mask_kind {
	SB_LM_MASK_DENSE,
	SB_LM_MASK_RECIPE,
	SB_LM_MASK_STRUCT_RANDOM,
	SB_LM_MASK_RANDOM,
	SB_LM_MASK_STRUCTURE,
	SB_LM_MASK_H2O,
	SB_LM_MASK_BLOCK
};

struct sb_lm_mask {
	enum sb_lm_mask_kind kind;
	int sinks, window, topk; /* 4, 64, 32 */
	int block;               /* block size (SB_LM_MASK_BLOCK) */
	uint64_t seed;           /* random controls */
};

/* Parse "dense", "recipe", "struct_random", "random", "structure", "h2o",
 * "block16" / "block64" / "block128" (any B >= 1), each optionally followed by
 * ":s=S,w=W,k=K". Defaults s=4, w=64, k=32. */
int sb_lm_mask_parse(const char *spec, struct sb_lm_mask *m, struct sb_err *err);
/* Canonical name: "recipe", "block64", ...; with the numbers when they are not
 * the defaults ("recipe:s=4,w=64,k=16"). buf >= 64 bytes. */
const char *sb_lm_mask_name(const struct sb_lm_mask *m, char *buf, size_t cap);
/* Do two masks run with the same s, w, k? */
static inline int sb_lm_mask_same_params(const struct sb_lm_mask *a, const struct sb_lm_mask *b)
{
	return a->sinks == b->sinks && a->window == b->window && a->topk == b->topk;
}
/* Parse a list of masks ("recipe:s=4,w=64,k=16;struct_random;random": ';' between
 * masks, or ',' when no mask has parameters) into out[0..*n), at most cap, in the
 * order given, and match the controls (every method but dense and recipe) to the
 * recipes, so that they run at the recipe's budget (PROTOCOL C):
 *   - a control written without parameters inherits the s, w, k of the recipe of
 *     the list; with two or more recipes (a sweep) it is ambiguous: SB_EUSAGE;
 *   - a control written with parameters (missing ones take the defaults) must
 *     equal one recipe's s, w, k exactly, else SB_EUSAGE naming both specs;
 *   - a list without a recipe leaves every mask with its own parameters;
 *   - two masks of the same name (after inheritance) are SB_EUSAGE.
 * The error message names the offending spec and the recipe spec(s). */
int sb_lm_mask_parse_list(const char *list, struct sb_lm_mask *out, int cap, int *n, struct sb_err *err);
/* The methods of the study, in report order (dense first). */
int sb_lm_mask_defaults(struct sb_lm_mask *out, int cap);

/* Does the method need the query's scores / accumulated attention / pooled keys? */
static inline int sb_lm_mask_needs_scores(const struct sb_lm_mask *m) { return m->kind == SB_LM_MASK_RECIPE; }
static inline int sb_lm_mask_needs_acc(const struct sb_lm_mask *m) { return m->kind == SB_LM_MASK_H2O; }
static inline int sb_lm_mask_needs_blocks(const struct sb_lm_mask *m) { return m->kind == SB_LM_MASK_BLOCK; }

/* The recipe's kept count for row t: min(t+1, |S u W| + k). */
int sb_lm_mask_recipe_count(const struct sb_lm_mask *m, int t);
/* Kept count of row t for the methods whose count depends only on t
 * (all but block); -1 for block. */
int sb_lm_mask_count(const struct sb_lm_mask *m, int t);

static inline uint64_t sb_lm_mask_stream(int layer, int head, int t)
{
	return ((uint64_t)(uint32_t)layer << 48) ^ ((uint64_t)(uint32_t)head << 32) ^ (uint64_t)(uint32_t)t;
}

/* Scratch for one row of up to T keys. */
struct sb_lm_mask_scratch {
	int cap;
	int32_t *a;   /* [cap] */
	float *f;     /* [cap] */
};
int sb_lm_mask_scratch_init(struct sb_lm_mask_scratch *s, int T);
void sb_lm_mask_scratch_free(struct sb_lm_mask_scratch *s);

/* Select the keys of query row t (0-based) of (layer, head).
 *   scores[0..t]   q_t . k_j / sqrt(hd) (recipe; may be NULL otherwise)
 *   acc[0..t]      accumulated attention of rows < t (h2o; else NULL)
 *   bscore[0..t/B) q_t . mean(k of block c) / sqrt(hd) for the complete blocks
 *                  c < t/B (block; else NULL)
 * Writes the selected keys to idx in increasing order and returns their number
 * (>= 1: the selection is never empty). */
int sb_lm_mask_row(const struct sb_lm_mask *m, int layer, int head, int t, const float *scores, const float *acc,
		   const float *bscore, int32_t *idx, struct sb_lm_mask_scratch *s);

/* Blocks of size B touched by a sorted index list. */
int sb_lm_mask_blocks_touched(const int32_t *idx, int n, int B);

/* Budget accounting: kept pairs over causal pairs. */
struct sb_lm_budget {
	double kept, causal;
};
static inline double sb_lm_budget_fraction(const struct sb_lm_budget *b) { return b->causal > 0 ? b->kept / b->causal : 0; }

/* What the evaluation attention observed (one A layer): kept and causal
 * (query, key) pairs summed over rows and heads, blocks of 16/64/128 keys the
 * selections touch, and optionally the selections themselves:
 * sel[(row * NH + head) * cap + i], i < sel_n[row * NH + head] (rows relative to t0). */
struct sb_lm_attn_obs {
	double kept, causal;
	double touched[3];
	double rows;   /* (row, head) pairs observed */
	int32_t *sel;  /* optional */
	int32_t *sel_n;
	int cap;
};
static inline int sb_lm_touch_block(int i) { return i == 0 ? 16 : i == 1 ? 64 : 128; }

#endif
