/* entmax_step.h — the scalar arithmetic of the general-alpha threshold iteration,
 * shared by lib/attn_norm.c (the portable kernel) and lib/cuda/norm_rows.cuh (the
 * CUDA row kernel), so that both do the same float operations in the same order
 * (the CUDA build disables FMA contraction, as ISO C11 does here). Internal.
 *
 * h(tau) = F^(alpha-1) - 1 with F = sum [y - tau]_+^e (e = 1/(alpha-1)),
 * S1 = sum d^(e-1), S2 = sum d^(e-2) and P = F^(alpha-1):
 *   Newton step -h/h' = (F - F^(1-(alpha-1)))/S1,
 *   Halley step = Newton / (1 - L/2), L = h h''/h'^2 = (P - 1)(e - 1)(F S2 - S1^2)/(P S1^2),
 * taken when |L| <= 1, Newton otherwise (see entmax_halley in attn_norm.c).
 */
#ifndef SB_ENTMAX_STEP_H
#define SB_ENTMAX_STEP_H

#include <math.h>

#ifdef __CUDACC__
#define SB_ES_FN __host__ __device__ static inline
#else
#define SB_ES_FN static inline
#endif

/* Jensen's bound from the largest of the per-threshold bounds t0: backed off by a few
 * ulps for the rounding of the means, and never below -1 (the max key's bound). */
SB_ES_FN float sb_entmax_tau0_backoff(float t0)
{
	t0 = t0 - 4.8e-7f * (1.0f + fabsf(t0));
	return t0 > -1.0f ? t0 : -1.0f;
}

/* One step from tau given F, S1, S2 there (em1 = e - 1); *next = the new tau. Returns
 * 1 when the iteration goes on (the step moves tau by more than 2.4e-7 |tau|, 2 ulps,
 * and it < 100 passes), 0 when tau is final (also for NaN: never an endless loop).
 * *last holds the previous step's size (INFINITY before the first): a step no smaller
 * than the last, within 16 ulps, is the noise of F's exp and log, not convergence, and
 * ends the iteration at tau too (constant rows oscillated to the pass cap otherwise). */
SB_ES_FN int sb_entmax_halley_step(float *next, float *last, float tau, float F, float S1, float S2, float am1,
                                   float em1, int it)
{
	float pw = (float)pow((double)F, 1.0 - (double)am1);
	float nstep = (F - pw) / S1;
	float P = F / pw;
	float L = ((P - 1.0f) * em1) * (F * S2 - S1 * S1) / (P * (S1 * S1));
	float step = fabsf(L) <= 1.0f ? nstep / (1.0f - 0.5f * L) : nstep;
	*next = tau + step;
	float moved = fabsf(*next - tau), thr = 2.4e-7f * fabsf(tau);
	int stall = moved >= *last && moved <= 16.0f * thr;
	*last = moved;
	return it < 100 && moved > thr && !stall;
}

#endif
