/* lm_probe.h — the 13-task RULER-style retrieval battery, scaled to a byte-level
 * model's context (PROTOCOL C, measurement 2).
 *
 * A probe is a text of exactly `len` bytes (the context it is made for: T for
 * evaluation, T+1 for a training example) cut into turns: turn i is a prompt
 * text[prompt_beg[i] .. answer_beg[i]) followed by the expected answer
 * text[answer_beg[i] .. answer_end[i]), which always ends in '\n'. Evaluation
 * feeds the prompt, generates greedily at most (answer length) bytes, stops at
 * '\n', and scores exact match of every turn (the model's own answers stay in
 * the context for the next turn). Training uses the whole text.
 *
 * Formats (K keys: 4-6 letter pseudo-words; V values: 5 digits; U: 8 hex digits;
 * every inserted line starts and ends with '\n', at a depth in the haystack):
 *   niah_single_1    noise haystack, needle "#K=V"; query "?K=" -> "V"
 *   niah_single_2    essay haystack (corpus text), needle "#K=V"
 *   niah_single_3    essay haystack, needle "#K=U" -> "U"
 *   niah_multikey_1  essay haystack, 4 needles with distinct keys, one queried
 *   niah_multikey_2  haystack made only of "#K=V" lines, one queried
 *   niah_multikey_3  haystack made only of "#U=U" lines, one queried
 *   niah_multivalue  essay, 4 needles with the same key; "?K*=" -> "V1,V2,V3,V4"
 *                    (order of appearance)
 *   niah_multiquery  essay, 4 needles; four turns "?Ki=" -> "Vi", all must be right
 *   vt               variable tracking: noise haystack, a chain "#V>N1", "#N1>N2",
 *                    "#N2>N3", "#N3>N4" and a distractor chain; "?V>" -> "N1>N2>N3>N4"
 *   cwe              common words: a word list where 3 words occur max(3, min(10, T/80)) times
 *                    (scaled with the context) and the rest once;
 *                    "?common=" -> the 3 words in order of first appearance
 *   fwe              frequent words: words drawn from a Zipf law over 12 words;
 *                    "?frequent=" -> the 3 most frequent, most frequent first
 *   qa_1             essay with facts "@E's R is A." (target + 3 distractors sharing
 *                    the entity or the relation); "Q: What is E's R?\nA: " -> "A"
 *   qa_2             a haystack made only of such facts (many documents), one asked
 *
 * Training-only tasks (mixture items "kv_recall", "qa_recall"): about len/48 needles (keys
 * words or hex, values digits or hex) or len/64 facts, in essay or noise text or as a
 * list, followed by queries of random needles filling 40% of the sequence; the last
 * query is turn 0 (so they can be evaluated like the others).
 *
 * Determinism: a probe is a pure function of (task, len, haystack corpus,
 * seed, purpose, index, depth). Evaluation uses purpose SB_RNG_SYNTH and the
 * valid part of the corpus; training examples SB_RNG_DATA and the train part.
 */
#ifndef SB_LM_PROBE_H
#define SB_LM_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

enum sb_lm_task {
	SB_LM_NIAH_SINGLE_1,
	SB_LM_NIAH_SINGLE_2,
	SB_LM_NIAH_SINGLE_3,
	SB_LM_NIAH_MULTIKEY_1,
	SB_LM_NIAH_MULTIKEY_2,
	SB_LM_NIAH_MULTIKEY_3,
	SB_LM_NIAH_MULTIVALUE,
	SB_LM_NIAH_MULTIQUERY,
	SB_LM_VT,
	SB_LM_CWE,
	SB_LM_FWE,
	SB_LM_QA_1,
	SB_LM_QA_2,
	SB_LM_NTASKS, /* the battery: the 13 tasks above */
	/* training-only tasks (mixture items; never in the battery): many needles and many
	 * queries per sequence, so that a sequence carries dozens of retrievable bytes */
	SB_LM_KV_RECALL = SB_LM_NTASKS, /* "#K=V" lines in text, then "?K=V" queries */
	SB_LM_QA_RECALL,                /* "@E's R is A." facts in text, then Q/A pairs */
	SB_LM_NALLTASKS
};

#define SB_LM_PROBE_MAXTURN 4

struct sb_lm_probe {
	int task;
	uint64_t index;
	double depth;   /* position of the (first) target line in the haystack, 0..1; NaN if none */
	int len;
	uint8_t *text;  /* owned, len bytes */
	int n_turns;
	int prompt_beg[SB_LM_PROBE_MAXTURN], answer_beg[SB_LM_PROBE_MAXTURN], answer_end[SB_LM_PROBE_MAXTURN];
};

const char *sb_lm_task_name(int task);
int sb_lm_task_parse(const char *name); /* -1 when unknown; training-only tasks included */
/* Is the task one of the needle arms (niah_single_1..3): the "needle recall" of the track. */
int sb_lm_task_is_needle(int task);
/* Default relative weight of a task in the training mixture's "retrieval" item. */
double sb_lm_task_weight(int task);
/* Smallest probe length the task supports. */
int sb_lm_task_min_len(int task);

/* Make a probe. hay/n_hay: the essay haystack (a corpus part; needed by the essay
 * tasks, n_hay >= len). depth in [0,1] places the target line; depth < 0 draws it.
 * SB_EUSAGE when len < sb_lm_task_min_len(task). */
int sb_lm_probe_make(int task, int len, const uint8_t *hay, size_t n_hay, uint64_t seed, uint32_t purpose,
		     uint64_t index, double depth, struct sb_lm_probe *p, struct sb_err *err);
void sb_lm_probe_free(struct sb_lm_probe *p);

/* Score a generated answer for turn `turn`: 1 when gen[0..n) equals the expected
 * answer without its final '\n' (generation stops at '\n', which is not included). */
int sb_lm_probe_match(const struct sb_lm_probe *p, int turn, const uint8_t *gen, int n);

/* The evaluation depth of probe i of n per task: (i + 0.5) / n. */
static inline double sb_lm_probe_depth(int i, int n) { return (i + 0.5) / n; }

#endif
