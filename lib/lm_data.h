/* lm_data.h — LM corpora as byte streams, and the training mixture (PROTOCOL C).
 *
 * Corpora. A corpus is either sb-fetch's corpus directory DATA_DIR/CORPUS/
 * ({train,valid,test}.safetensors, tensor "bytes" U8 [n], metadata format
 * "sparsebench.corpus", SHA-256 sidecars verified), or one text (a plain file,
 * or gzip/bzip2/xz-compressed: any filter libarchive reads) cut into
 * train / valid / test at floor(0.9 n) and floor(0.95 n) bytes, the cut
 * sb-fetch's registry uses for one-file corpora, so both give the same bytes.
 * The "valid" part is the held-out text of the LM evaluation. Tokens are bytes (vocabulary 256, PROTOCOL B Decision). The test part
 * is refused (SB_EVERDICT), as every stage before sb-test refuses test data.
 *
 * Mixture. A training example is T+1 bytes (inputs 0..T-1, targets 1..T).
 * Example i of a run is a pure function of (seed, SB_RNG_DATA, stream i):
 * the first draw picks an item by weight, then either a uniformly random
 * window of a corpus's train part, or a retrieval sequence of one of the 13
 * battery tasks (lm_probe.h) drawn with purpose SB_RNG_DATA, whose haystack
 * text comes from the haystack corpus's train part. The mixture (items,
 * weights, seed, haystack) is written into every run's records
 * (sb_lm_mix_json).
 */
#ifndef SB_LM_DATA_H
#define SB_LM_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "json.h"

#define SB_LM_SPLIT_TRAIN 0.90
#define SB_LM_SPLIT_VALID 0.95

struct sb_lm_corpus {
	char name[64];
	char path[4096];
	char split[8];      /* "train" | "valid" | "all" */
	char sha256[65];    /* SHA-256 of the file as read (before decompression) */
	uint64_t file_bytes;
	size_t total;       /* bytes of the whole (decompressed) text */
	size_t offset;      /* where the split starts in the text */
	uint8_t *bytes;     /* the split's bytes (owned) */
	size_t n;
};

/* Read a corpus. spec is PATH or NAME=PATH (the name defaults to the file's
 * base name without extensions). split: "train", "valid" or "all"; "test" is
 * refused with SB_EVERDICT. */
int sb_lm_corpus_read(const char *spec, const char *split, struct sb_lm_corpus *c, struct sb_err *err);
/* A corpus over bytes the caller owns (copied), for tests and generated text. */
int sb_lm_corpus_from(struct sb_lm_corpus *c, const char *name, const void *bytes, size_t n, struct sb_err *err);
void sb_lm_corpus_free(struct sb_lm_corpus *c);

#define SB_LM_MIX_MAX 40

struct sb_lm_mix_item {
	char name[32];  /* corpus name or task name */
	int corpus;     /* index into corpora, or -1 */
	int task;       /* enum sb_lm_task, or -1 */
	double weight;  /* normalised: the weights sum to 1 */
};

struct sb_lm_mix {
	uint64_t seed;
	int T;
	int n;
	struct sb_lm_mix_item item[SB_LM_MIX_MAX];
	const struct sb_lm_corpus *corpora; /* borrowed */
	int n_corpora;
	int haystack;   /* corpus index of the essay haystack of retrieval items */
};

/* Parse a mixture spec: comma-separated NAME=WEIGHT items, NAME a corpus name,
 * a task name, or "retrieval" (the 13 tasks with the default task weights,
 * sb_lm_task_weight, scaled to WEIGHT). Weights are normalised. haystack names
 * the corpus of essay haystacks (NULL: the first corpus). */
int sb_lm_mix_parse(struct sb_lm_mix *m, const char *spec, const struct sb_lm_corpus *corpora, int n_corpora,
		    const char *haystack, uint64_t seed, int T, struct sb_err *err);
/* Every example of a context of T bytes can be made: an item with a positive weight fits
 * T+1, and the essay tasks that fit have a haystack of T+1 bytes (SB_EUSAGE naming spec
 * otherwise). sb_lm_mix_parse checks its T; a trainer with a shorter context checks it. */
int sb_lm_mix_check_len(const struct sb_lm_mix *m, int T, const char *spec, struct sb_err *err);
/* Example `index`: out[0..T] (T+1 bytes); *item (may be NULL) the item drawn. */
int sb_lm_mix_sample(const struct sb_lm_mix *m, uint64_t index, uint8_t *out, int *item, struct sb_err *err);
/* The same for a shorter context T' <= T (out[0..T']): items that do not fit (tasks
 * whose minimum length exceeds T'+1) are redrawn from the same stream. */
int sb_lm_mix_sample_len(const struct sb_lm_mix *m, uint64_t index, int T, uint8_t *out, int *item,
			 struct sb_err *err);
/* The mixture as a JSON object value (items with weights, seed, T, haystack,
 * corpora with their split, offsets and SHA-256). */
void sb_lm_mix_json(struct sb_jw *w, const struct sb_lm_mix *m);

#endif
