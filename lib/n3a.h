/* n3a.h — PROTOCOL A8's N3-A synthetic intervention assay: the training side
 * (docs/n3a-spec.md §2; what we built and decided: docs/n3a.md).
 *
 * Three parts:
 *   - the six float64 routing operators D/S/L/P/G/N, their backward passes (custom for
 *     G and N), the invariant checks and the permutation null (lib/n3a_ops.c);
 *   - the synthetic task, the batch schedule, the two routers (query, transformer), the
 *     readout gamma * sqrt(r) * sum w v + b and the binary cross-entropy, AdamW, the
 *     evaluation (lib/n3a_model.c);
 *   - the block runner: one cell = one (arch, r, seed) = its 12 units, the records
 *     (lib/n3a_run.c).
 *
 * Guards. A failed guard is an error with code SB_EVERDICT whose message contains the
 * guard's name (sb_n3a_guard_name): NUMERICAL_ENVELOPE (top-k score range > 700),
 * INVALID_CONTROL (mass/support invariants at 1e-10, the G/N scale), NON_FINITE_LOSS,
 * NON_FINITE_GRADIENT, WORKFLOW_NONDETERMINISTIC (the fork S replay differs from main S).
 */
#ifndef SB_N3A_H
#define SB_N3A_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "err.h"
#include "json.h"

/* ------------------------------------------------------------------ operators */

enum sb_n3a_arm { SB_N3A_D, SB_N3A_S, SB_N3A_L, SB_N3A_P, SB_N3A_G, SB_N3A_N, SB_N3A_NARMS };

/* "D", "S", "L", "P", "G", "N"; parse returns -1 for anything else */
const char *sb_n3a_arm_name(int arm);
int sb_n3a_arm_parse(const char *s);

#define SB_N3A_MAXN 64                /* longest row */
#define SB_N3A_ENVELOPE 700.0         /* top-k score range ceiling */
#define SB_N3A_TOL 1e-10              /* invariant tolerance */
#define SB_N3A_VJP_ZERO 1e-14         /* ||a|| at or below this: the G/N gradient is 0 */

/* Faults for tests only (0 in every real run): a deliberately broken operator, to show
 * that the invariant checks catch it. */
enum sb_n3a_fault {
	SB_N3A_FAULT_NONE = 0,
	SB_N3A_FAULT_G_NO_RENORM = 1, /* G/N backward returns the candidate without the S-norm rescale */
	SB_N3A_FAULT_L_TAIL = 2,      /* L forward puts 2 eps on the tail */
	SB_N3A_FAULT_REPLAY = 3       /* the fork S replay starts one ulp away from its parent */
};

struct sb_n3a_op {
	int n, k;    /* row length, kept positions (1 <= k < n <= SB_N3A_MAXN) */
	double eps;  /* tail/placebo mass (registered: 1/(k+1)) */
	int fault;   /* enum sb_n3a_fault; 0 */
};

/* One row's saved forward state: the centred scores, the stable descending order (K =
 * order[0..k), T = order[k..n)), the top-k softmax q (0 on T) and the tail softmax t (0 on K). */
struct sb_n3a_row {
	double c[SB_N3A_MAXN], q[SB_N3A_MAXN], t[SB_N3A_MAXN];
	int order[SB_N3A_MAXN];
};

/* Forward of one row: w[n] from scores s[n] (float64). Fills *st. Errors (SB_EVERDICT):
 * NON_FINITE_LOSS for a non-finite score, NUMERICAL_ENVELOPE when the range of the
 * centred scores over K exceeds 700, INVALID_CONTROL when an invariant of the arm's
 * weights fails (checked on every call). */
int sb_n3a_row_forward(int arm, const struct sb_n3a_op *op, const double *s, double *w, struct sb_n3a_row *st,
		       struct sb_err *err);
/* The invariant checks alone (called by forward): q sums to 1 with support exactly K;
 * L: sum 1, mass 1-eps on K, eps on T; P: sum 1, mass 1 on K, 0 on T; G/N: q as S, and
 * the L mixture (1-eps) q + eps t; D: sum 1. INVALID_CONTROL naming what failed. */
int sb_n3a_row_check(int arm, const struct sb_n3a_op *op, const double *w, const struct sb_n3a_row *st,
		     struct sb_err *err);
/* Backward of one row: ds[n] = d loss / d s from g[n] = d loss / d w.
 *   D: cov(w, g); S: cov(q, g); L: (1-eps) cov(q, g) + eps cov(t, g); P: (1-eps) cov(q, g);
 *   G/N: a = cov(q, g), b = cov(t, g) (N: b's tail entries, taken in descending-score
 *   order, permuted by perm[0..n-k): new b[T[j]] = b[T[perm[j]]]), candidate =
 *   (1-eps) a + eps b, ds = candidate * ||a|| / ||candidate|| when ||a|| > 1e-14, else 0.
 *   ||candidate|| is computed before the permutation (a permutation leaves it unchanged),
 *   so G and N share the scale bit for bit and are equal on K. INVALID_CONTROL when
 *   ||candidate|| is not finite or <= DBL_MIN with ||a|| > 1e-14, or when the result's
 *   norm misses ||a|| by more than 1e-10 relative (a check of ours).
 * perm is read for N only (may be NULL otherwise). */
int sb_n3a_row_backward(int arm, const struct sb_n3a_op *op, const double *g, const double *w,
			const struct sb_n3a_row *st, const uint32_t *perm, double *ds, struct sb_err *err);

/* The study's stable_seed: the parts joined by the byte 0x1F, SHA-256, the first 8 bytes
 * big-endian, AND 2^63-1. */
uint64_t sb_n3a_stable_seed(const char *const *parts, int nparts);
/* The null permutation key of a fork update:
 * stable_seed(seed, arch, r, parent, relative_step, "null_permutation"). */
uint64_t sb_n3a_null_key(uint64_t seed, const char *arch, int r, int parent, int rel_step);
/* perm[rows * m]: row i's permutation of 0..m-1 is the stable ascending argsort of m
 * float64 uniforms drawn from Philox keyed by (key, SB_N3A_RNG_NULL, stream 0). Uses no
 * other stream. */
void sb_n3a_null_perms(uint64_t key, int rows, int m, uint32_t *perm);

/* Philox purposes (lib/rng.h), one per stream of spec §2.3; the Philox seed is the
 * stream's stable_seed key. */
enum {
	SB_N3A_RNG_SUPPORT = 140,
	SB_N3A_RNG_MARKER = 141,
	SB_N3A_RNG_VALUES = 142,
	SB_N3A_RNG_NUISANCE = 143,
	SB_N3A_RNG_SCHEDULE = 144,
	SB_N3A_RNG_INIT = 145, /* stream = parameter tensor index */
	SB_N3A_RNG_NULL = 146
};

/* If msg names a guard, its name ("INVALID_CONTROL", ...), else NULL. */
const char *sb_n3a_guard_name(const char *msg);

/* ------------------------------------------------------------------ task (lib/n3a_model.c) */

#define SB_N3A_FEAT 7 /* marker + 6 nuisance features per position */

/* One split of the synthetic task (spec §2.4), a pure function of (seed, r, split, N, n):
 * per example and position the relevant set z (a uniform r-subset: the r smallest of n
 * uniforms, ties to the lower index), the marker m = z + e (e ~ N(0,1)), 6 nuisance
 * N(0,1) features, the value v ~ N(0,1) (not a feature), and y = [sum z v / sqrt(r) >= 0]
 * (on the float32 values, summed in double). Example i's draws do not depend on N. */
struct sb_n3a_data {
	int N, n, r;
	float *x;   /* [N, n, 7]: (m, nuisance 1..6) */
	float *v;   /* [N, n] */
	uint8_t *z; /* [N, n] */
	float *y;   /* [N]: 0 or 1 */
};
int sb_n3a_data_make(struct sb_n3a_data *d, uint64_t seed, int r, const char *split, int N, int n,
		     struct sb_err *err);
void sb_n3a_data_free(struct sb_n3a_data *d);

/* The batch schedule (spec §2.4): fresh permutations of 0..ntrain-1 concatenated until
 * batch * updates indices exist; update t (1-based) uses sched[(t-1)*batch ..]. A pure
 * function of (seed, r, ntrain, batch, updates). Owned array. */
int sb_n3a_schedule(uint32_t **sched, uint64_t seed, int r, int ntrain, int batch, int updates, struct sb_err *err);

/* ------------------------------------------------------------------ readout and loss */

/* The readout and the binary cross-entropy over B rows, in float64 (spec §2.5):
 * w = operator(s) per row, gamma = softplus(rho), logit = gamma sqrt(r) sum w v + bias,
 * loss = mean BCEWithLogits(logit, y). Saved: w[B n], st[B], logit[B] (all three
 * are required).
 * Backward when ds != NULL: ds[B n] = d loss / d s through the arm's backward (perm
 * [B (n-k)] for N), *drho, *dbias. */
int sb_n3a_readout(int arm, const struct sb_n3a_op *op, int r, const double *s, const float *v, const float *y, int B,
		   double rho, double bias, const uint32_t *perm, double *w, struct sb_n3a_row *st, double *logit,
		   double *loss, double *ds, double *drho, double *dbias, struct sb_err *err);

/* ------------------------------------------------------------------ routers */

enum sb_n3a_arch { SB_N3A_QUERY, SB_N3A_TRANSFORMER };
const char *sb_n3a_arch_name(int arch); /* "query", "transformer" */
int sb_n3a_arch_parse(const char *s);   /* -1 when unknown */

#define SB_N3A_WIDTH 64 /* width */
#define SB_N3A_FF 128   /* transformer feed-forward */
#define SB_N3A_HEADS 4
#define SB_N3A_LAYERS 2
#define SB_N3A_MAXT 40  /* parameter tensors */

struct sb_n3a_tensor {
	char name[32];
	size_t off, size;
};

struct sb_n3a_model; /* opaque: parameters, gradients, activations for up to bmax examples */

/* A router of arch for rows of n positions and r relevant, with room for bmax examples
 * per forward. CPU backend only (activations are read on the host). */
int sb_n3a_model_new(struct sb_backend *be, int arch, int n, int r, int bmax, struct sb_n3a_model **out,
		     struct sb_err *err);
void sb_n3a_model_free(struct sb_n3a_model *m);
/* The parameter arena (float32), the gradient arena, their length and the tensor table. */
float *sb_n3a_model_params(struct sb_n3a_model *m);
float *sb_n3a_model_grads(struct sb_n3a_model *m);
size_t sb_n3a_model_nparams(const struct sb_n3a_model *m);
const struct sb_n3a_tensor *sb_n3a_model_tensors(const struct sb_n3a_model *m, int *ntensors);
/* PyTorch-default-like initialisation from stable_seed(seed, r, arch, "initialization"):
 * Linear weight and bias U(+-1/sqrt(fan_in)); MHA in-projection weight Xavier-uniform,
 * in-projection and out-projection biases 0, out-projection weight Linear default;
 * LayerNorm 1/0; q ~ N(0, 0.02^2); rho = log(e - 1); bias 0. Tensor i draws from Philox
 * (key, SB_N3A_RNG_INIT, stream i). The second encoder layer is a copy of the first. */
void sb_n3a_model_init(struct sb_n3a_model *m, uint64_t seed);

/* Forward over the examples idx[0..B) of d (B <= bmax) with the arm's operator; *loss =
 * the batch-mean BCE. With backward: the parameter gradients are written (not
 * accumulated) to the gradient arena; perm is N's null ([B (n-k)]). The arrays out (each
 * may be NULL): w[B n] the routing weights, logit[B]. */
int sb_n3a_model_forward(struct sb_n3a_model *m, int arm, const struct sb_n3a_op *op, const struct sb_n3a_data *d,
			 const uint32_t *idx, int B, int backward, const uint32_t *perm, double *loss, double *w_out,
			 double *logit_out, struct sb_err *err);
/* SB_ARENA_CHECK set when the model was made (redzone.h): the 64-byte slack after each of
 * its buffers (parameters, gradients, activations, scratch) holds a red zone, and
 * sb_n3a_model_forward fails (SB_EINTERNAL, naming the buffer) once one was written. For
 * tests: the address of zone i (allocation order), NULL past the last or without the check. */
void *sb_n3a_model_zone(const struct sb_n3a_model *m, int i);

/* Evaluation on the whole split (spec §2.8), in chunks of bmax examples, the arm's own
 * forward: mean BCE, accuracy (logit >= 0 vs y), mean relevant mass sum w z, mean
 * entropy -sum w log w (w > 0), mean support #(w > 0), gamma. */
struct sb_n3a_eval {
	double ce, accuracy, relevant_mass, entropy, support, gamma;
};
int sb_n3a_model_eval(struct sb_n3a_model *m, int arm, const struct sb_n3a_op *op, const struct sb_n3a_data *d,
		      struct sb_n3a_eval *ev, struct sb_err *err);

/* torch.optim.AdamW on the whole arena (one parameter group: decay on every tensor),
 * step t (1-based), through the backend's adamw. */
void sb_n3a_model_adamw(struct sb_n3a_model *m, float *mom1, float *mom2, int64_t t, float lr, float b1, float b2,
			float eps, float wd);

/* ------------------------------------------------------------------ cells and the runner (lib/n3a_run.c) */

/* A cell is one block (arch, r, seed) = its 12 units:
 *   {"family":"n3a","arch":"query","r":16,"seed":64000}
 * optional (registered defaults): n 32, k 8, epsilon 1/(k+1), train 4096, validation
 * 2048, batch 128, updates 1024, eval_steps [0,32,64,128,160,256,512,768,800,1024],
 * parents [128,768], fork_updates 32, lr 1e-3, weight_decay 1e-4, beta1 0.9, beta2
 * 0.999, adam_eps 1e-8. With updates other than 1024, eval_steps and parents must be
 * given. eval_steps: increasing, starting at 0, within [0, updates]; every parent p and
 * p + fork_updates are in eval_steps (the S replay is checked at p + fork_updates).
 * An unknown key is an error. */
#define SB_N3A_MAXEVAL 64
#define SB_N3A_MAXPAR 8
struct sb_n3a_cell {
	char cell_id[128];
	int arch, r;
	uint64_t seed;
	int n, k;
	double eps;
	int ntrain, nval, batch, updates;
	int neval, eval_steps[SB_N3A_MAXEVAL];
	int nparents, parents[SB_N3A_MAXPAR];
	int fork_updates;
	float lr, wd, b1, b2, adam_eps;
	int fault; /* enum sb_n3a_fault, tests only; not part of the cell or its id */
};

int sb_n3a_is_cell(const struct sb_json *obj);
/* Parse and check a cell, fill the defaults and the id
 * "n3a.ARCH.rR.sSEED.HASH8" (HASH8: SHA-256 of the canonical filled cell). SB_EDATA. */
int sb_n3a_cell_parse(struct sb_n3a_cell *c, const struct sb_json *obj, struct sb_err *err);
void sb_n3a_cell_json(struct sb_jw *w, const struct sb_n3a_cell *c); /* the filled cell, an object value */
/* 1 when every setting but arch, r and seed is the registered one (PROTOCOL A8: what
 * n3a.eval's registered_settings says; sb-a8 n3a calls a design registered only then) */
int sb_n3a_cell_registered(const struct sb_n3a_cell *c);

/* Progress after each unit (may be NULL). */
typedef void (*sb_n3a_progress_fn)(void *arg, const char *cell_id, const char *unit, int done, int units,
				   double seconds);

/* Run one cell into runs_dir/CELL_ID (run_dir receives it, 4096 bytes): cell.json and
 * n3a.ndjson, each written atomically. n3a.ndjson: run.meta; per evaluation an n3a.eval
 * record {cell_id, arch, r, seed, arm, parent (null or the parent step), step (main:
 * update count; fork: relative), validation_cross_entropy, validation_accuracy,
 * mean_relevant_mass, mean_entropy, mean_support, gamma}; per unit an n3a.unit record
 * {cell_id, arm, parent, updates, start_params_sha256, start_state_sha256 (parameters, AdamW
 * moments and step), end_params_sha256}; last n3a.done
 * {cell_id, status "completed"|"failed", reason (the guard) and error when failed, units
 * 12, units_completed, s_replay_equal, init_params_sha256, train_seconds, cpu_seconds}.
 * A cell whose n3a.ndjson ends with a completed n3a.done is skipped (*skipped = 1).
 * A failed guard writes the failed n3a.done, commits the file and returns SB_EVERDICT. */
int sb_n3a_run_cell(struct sb_backend *be, const struct sb_n3a_cell *c, const char *runs_dir, char *run_dir,
		    int *skipped, sb_n3a_progress_fn fn, void *arg, struct sb_err *err);

#endif
