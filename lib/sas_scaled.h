/* sas_scaled.h — the scaled SAS comparison (issue 9, beyond the toy): selectors trained on
 * a frozen LM-track decoder (lib/sas_lm.h), compared with dense attention and the LM
 * track's training-free masks on fidelity and retrieval, with the LM track's statistics.
 *
 * A scaled cell is a SAS cell with "backbone":
 *   {"family":"sas","seed":0,"backbone":"out/lm/runs/lm.dense.s0...."}
 * optional: id (sas-scaled-sSEED), blocks [8,16,64], dsel 32, sel_steps 150, sel_batch 8,
 * sel_lr 1e-3, sel_wd 0.01, sel_clip 1, windows 16, probes 6 (per task), tasks (names;
 * default niah_single_1..3 and niah_multikey_1..3), masks ("recipe;block16;block64"; at most 8 besides dense, each once, no h2o),
 * budget ("recipe"), untrained 1 (also evaluate every selector at its initialisation:
 * sas-bB-untrained), nogate 1 (also the trained selection with bias 0 instead of log g:
 * sas-bB-nogate).
 *
 * Training (sb-train): per block size B, a selector per A layer, trained for sel_steps
 * AdamW steps on batches of sel_batch sequences of the backbone's own training mixture
 * (lib/lm_data.h) drawn with data seed seed + 1000 (other examples than the backbone's,
 * as a pure function of the index); records sas.scaled.step {block, step, loss,
 * grad_norm}; writes selector-bB.safetensors (+ .sha256; metadata block, format, backbone_sha256,
 * cell_id, cell_sha256: the SHA-256 of cell.json without its newline) per block, train.ndjson with
 * sas.scaled.block {block: final loss, mean grad norm, seconds, selector and its SHA-256} and
 * sas.scaled.done. A finished cell is skipped (sb_sas_scaled_finished); an unfinished one trains
 * again from the start. sb-eval refuses (SB_EDATA) a selector whose cell_sha256 is not cell.json's.
 *
 * Evaluation (sb-eval): methods dense, the masks, sas-bB per block (and the controls sas-bB-nogate, sas-bB-untrained).
 * Fidelity on `windows` windows of T+1 bytes evenly spaced in the valid part of the backbone's first corpus: per
 * position KL(dense || method), top-1 agreement with dense, NLL of the true byte; all positions and the tail (t >= the
 * recipe's s + w + k, where masks differ from dense). Retrieval: `probes` probes per task (depth (i + 0.5)/probes,
 * haystack the valid part of the backbone's haystack corpus), greedy decoding with full-sequence forwards (every method
 * is causal: tested), exact match. Records (eval.ndjson and stdout): run.meta; sas.scaled.setup;
 * sas.scaled.fidelity.window; sas.scaled.fidelity {method, budget_fraction, kl, kl_lo, kl_hi, top1, nll, ppl,
 * ppl_change_pct, and _tail}; sas.scaled.fidelity.pair {method_a (sas-bB), method_b,
 * metric kl_tail, n_windows, mean_diff, ci_lo, ci_hi, p_t, p_wilcoxon, cohen_dz};
 * probe.result (sb-stats reads them); sas.scaled.retrieval {method, subset all|TASK,
 * correct, n, accuracy, wilson_lo, wilson_hi}; sas.scaled.retrieval.pair {method_a,
 * method_b, n, n11, n10, n01, n00, diff, ci_lo, ci_hi, mcnemar_p}.
 */
#ifndef SB_SAS_SCALED_H
#define SB_SAS_SCALED_H

#include "backend.h"
#include "err.h"
#include "json.h"

#define SB_SAS_SCALED_MAXB 8
#define SB_SAS_SCALED_MAXTASK 16
#define SB_SAS_SCALED_MAXMASK 8

struct sb_sas_scaled {
	char cell_id[128];
	char backbone[4096];
	uint64_t seed;
	int n_blocks, blocks[SB_SAS_SCALED_MAXB];
	int dsel, sel_steps, sel_batch;
	float sel_lr, sel_wd, sel_clip;
	int windows, probes;
	int untrained; /* also evaluate each selector at its initialisation (1) */
	int nogate;    /* also the trained selection without the log-gate bias (1) */
	int n_tasks, tasks[SB_SAS_SCALED_MAXTASK];
	char masks[512];
	char budget[128];
};

/* A SAS cell's "id" (its run directory's name) is valid: a non-empty name of LEN bytes with no
 * NUL or '/', and not "." or "..". */
int sb_sas_id_ok(const char *id, size_t len);
int sb_sas_scaled_parse(struct sb_sas_scaled *c, const struct sb_json *obj, struct sb_err *err);
void sb_sas_scaled_json(struct sb_jw *w, const struct sb_sas_scaled *c);

/* Is the cell finished in RUNS_DIR/ID, as a toy SAS cell is (sb_sas_cell_finished): its
 * cell.json the one this cell writes, byte for byte, train.ndjson ending in sas.scaled.done, each
 * block size's selector the file its sas.scaled.block record names (SHA-256), its metadata's
 * cell_sha256 this cell's, and the backbone's checkpoint (its sidecar) the one the selectors were
 * trained on? Then sb-train skips it. */
int sb_sas_scaled_finished(const struct sb_sas_scaled *c, const char *runs_dir);

typedef void (*sb_sas_scaled_progress)(void *arg, const char *what, int done, int total, double value);

int sb_sas_scaled_train(const struct sb_sas_scaled *c, const char *runs_dir, char *run_dir, sb_sas_scaled_progress fn,
                        void *arg, struct sb_err *err);
int sb_sas_scaled_eval(const char *run_dir, struct sb_jw *out, sb_sas_scaled_progress fn, void *arg,
                       struct sb_err *err);

#endif
