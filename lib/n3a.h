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

#define SB_N3A_MAXN 256               /* longest row */
#define SB_N3A_ENVELOPE 700.0         /* top-k score range ceiling */
#define SB_N3A_TOL 1e-10              /* invariant tolerance */
#define SB_N3A_VJP_ZERO 1e-14         /* ||a|| at or below this: the G/N gradient is 0 */

/* Faults for tests only (0 in every real run): a deliberately broken operator, to show
 * that the invariant checks catch it. */
enum sb_n3a_fault {
	SB_N3A_FAULT_NONE = 0,
	SB_N3A_FAULT_G_NO_RENORM = 1, /* G/N backward returns the candidate without the S-norm rescale */
	SB_N3A_FAULT_L_TAIL = 2       /* L forward puts 2 eps on the tail */
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

#endif
