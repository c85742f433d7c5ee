/* lm_eval.h — evaluation of a trained LM run under the training-free masks
 * (PROTOCOL C measurements 1-4), writing records; and the report.
 *
 * Held-out text is the valid part of each of the run's corpora (lm_data.h).
 *
 * Fidelity: n_windows windows of T+1 bytes, evenly spaced in the valid parts
 * (shared equally between corpora). Dense and masked next-byte logits come from
 * the same evaluation path; per position: KL(dense || masked) of the softmaxes,
 * top-1 agreement (argmax, lowest index on ties), Pearson correlation of the two
 * logit vectors ("logit fidelity"), and the NLL of the true next byte under each
 * (perplexity = exp(mean NLL)). Means over all positions, and over the "tail"
 * positions t >= n_budget (the recipe's per-row budget s + w + k), where masks
 * differ from dense. Per method, the window means get bootstrap CIs; the gain of
 * content top-k over its structure-matched control (recipe - struct_random) is a
 * paired comparison over windows (mean, bootstrap CI, paired t and Wilcoxon).
 *
 * Retrieval: n_probes probes per task (depths (i+0.5)/n) of length T, the
 * haystack corpus's valid part as essay; greedy decoding with the KV cache under
 * each mask (prompt prefill, then token by token), exact match of every turn.
 * One probe.result per probe and method (read by sb-stats); per method the
 * Wilson interval over all tasks, over the needle arms (niah_single_1..3) and per
 * task; recipe against each other method on the same probes: 2x2 counts,
 * Newcombe's paired CI of the difference, exact McNemar p.
 *
 * Budgets: kept / causal (query, key) pairs per A layer and overall, on the
 * fidelity text and on the probes; blocks of 16/64/128 keys touched per row.
 *
 * Efficiency (CPU backend, one thread, the first A layer's real q, k, v of one
 * window): wall-clock of the training path's dense attention (OpenBLAS), of the
 * evaluation path's row kernel for dense and for every mask (selection included;
 * the recipe scores every causal key), minimum and median over bench_reps runs;
 * speed-ups reported as measured, below 1 included. For each budget (recipe
 * with k free keys, k in budgets_k) the blocks of 16/64/128 keys its per-key
 * selection touches, and the time of a block-sparse kernel that computes those
 * whole blocks.
 */
#ifndef SB_LM_EVAL_H
#define SB_LM_EVAL_H

#include <stdint.h>

#include "backend.h"
#include "err.h"
#include "json.h"
#include "lm_mask.h"
#include "lm_probe.h"

#define SB_LM_EVAL_MAXMASK 24

struct sb_lm_eval_opts {
	int n_windows;   /* 32 */
	int n_probes;    /* 40 */
	int tasks[SB_LM_NTASKS];
	int n_tasks;     /* 13 */
	struct sb_lm_mask masks[SB_LM_EVAL_MAXMASK];
	int n_masks;     /* dense first */
	uint64_t seed;   /* probe seed (0) */
	int bench_reps;  /* 7 */
	int budgets_k[8];
	int n_budgets;   /* k = 8, 16, 32, 64, 128 */
	int boot_resamples; /* 10000 */
	void (*progress)(void *arg, const char *phase, int done, int total);
	void *progress_arg;
};

void sb_lm_eval_defaults(struct sb_lm_eval_opts *o);
/* Parse a comma-separated list of masks / tasks into o. */
int sb_lm_eval_set_masks(struct sb_lm_eval_opts *o, const char *list, struct sb_err *err);
int sb_lm_eval_set_tasks(struct sb_lm_eval_opts *o, const char *list, struct sb_err *err);
/* One setting KEY=VALUE: masks=LIST, tasks=LIST, probes=N, windows=N, bench_reps=N,
 * budgets=K,K,..., seed=N (what sb-eval's --set passes to an LM run). */
int sb_lm_eval_set(struct sb_lm_eval_opts *o, const char *setting, struct sb_err *err);

/* Evaluate RUN_DIR; records go to w (which writes them). */
int sb_lm_eval_run(struct sb_backend *be, const char *run_dir, const struct sb_lm_eval_opts *o, struct sb_jw *w,
		   struct sb_err *err);

/* Per-position fidelity of masked logits lm against dense logits ld (V entries):
 * KL(softmax(ld) || softmax(lm)), top-1 agreement, Pearson correlation. */
void sb_lm_fidelity_row(const float *ld, const float *lm, int V, double *kl, int *agree, double *corr);

/* The report: OUT_DIR/lm-report.md, lm-retrieval.svg, lm-fidelity.svg, lm-blocks.svg
 * from the records of one eval.ndjson. */
int sb_lm_report_write(const char *eval_path, const char *out_dir, struct sb_err *err);

/* Command-line entries of `sb-lm eval` and `sb-lm report` (train/lm_cmds.c). */
int sb_lm_eval_main(int argc, char **argv);
int sb_lm_report_main(int argc, char **argv);

#endif
