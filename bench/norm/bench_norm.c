/* bench_norm.c — time forward + backward per row of every normaliser.
 *
 * Build and run (from the repository root; no Makefile needed):
 *
 *   gcc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -march=native -Ilib \
 *       bench/norm/bench_norm.c lib/attn_norm.c lib/attn_norm_avx512.c lib/attn_norm_avx2.c lib/attn_norm_ref.c lib/err.c lib/rng.c \
 *       -lm -o build/bench_norm && build/bench_norm [SIGMA] [MIN_ROWS] [TRIALS]
 *
 * (bench/norm/run.sh does exactly that.) Rows come in blocks of T rows with T
 * keys (one (sample, head) block of the encoder: T queries), scores N(0, SIGMA^2)
 * (default 2), upstream gradients N(0, 1). For each method and T, forward and
 * backward each run over at least MIN_ROWS rows (default 20000) in each of
 * TRIALS trials (default 25), timed by the thread's CPU clock (the time other
 * processes run is not counted); the table shows the best trial (robust to other
 * load on a shared machine) in ns per row, for forward, backward and their sum, and
 * the sum relative to softmax's. The mean support size (keys with p > 0) is
 * shown for context: the sparse methods' cost depends on it.
 */
#include "attn_norm.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bm {
	const char *label, *method;
	double alpha;
	int unrolled;
};

static const struct bm bms[] = {
    {"softmax", "softmax", 0, 0},
    {"topk_softmax_0125", "topk_softmax_0125", 0, 0},
    {"topk_softmax_025", "topk_softmax_025", 0, 0},
    {"topk_softmax_05", "topk_softmax_05", 0, 0},
    {"bottomk_softmax_025", "bottomk_softmax_025", 0, 0},
    {"sparsemax", "sparsemax", 0, 0},
    {"entmax15", "entmax15", 0, 0},
    {"entmax_bisect a=1.3", "entmax_bisect", 1.3, 0},
    {"HAE a=1.49 (+dalpha)", "headwise_adaptive_entmax", 1.49, 0},
    {"HAE a=1.13 (+dalpha)", "headwise_adaptive_entmax", 1.13, 0},
    {"entmax15 unrolled", "entmax15", 0, 1},
    {"HAE a=1.37 unrolled", "headwise_adaptive_entmax", 1.37, 1},
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); /* CPU time: the time other processes run is not counted */
	return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv)
{
	double sigma = argc > 1 ? atof(argv[1]) : 2.0;
	long min_rows = argc > 2 ? atol(argv[2]) : 20000;
	int trials = argc > 3 ? atoi(argv[3]) : 25;
	static const int Ts[] = {50, 65, 97, 512};
	double soft[4] = {0};
	printf("# ns per row (best of %d trials), blocks of T rows x T keys, scores N(0, %g^2)\n", trials, sigma);
	printf("%-22s %5s %9s %9s %9s %7s %8s\n", "method", "T", "fwd", "bwd", "fwd+bwd", "/soft", "support");
	for (size_t m = 0; m < sizeof bms / sizeof bms[0]; m++) {
		for (int ti = 0; ti < 4; ti++) {
			int T = Ts[ti], rows = T;
			long nb = (min_rows + rows - 1) / rows;
			if (nb > 64)
				nb = 64; /* cycle over 64 distinct blocks */
			long reps = (min_rows + nb * rows - 1) / (nb * rows);
			size_t n = (size_t)nb * rows * T;
			float *s = malloc(n * sizeof *s), *g = malloc(n * sizeof *g), *p = malloc(n * sizeof *p);
			float *ds = malloc(n * sizeof *ds),
			      *aux = malloc((size_t)nb * rows * SB_NORM_AUX * sizeof *aux);
			struct sb_rng r;
			sb_rng_init(&r, 42, SB_RNG_USER, (uint64_t)T);
			for (size_t i = 0; i < n; i++) {
				s[i] = (float)(sigma * sb_rng_normal(&r));
				g[i] = (float)sb_rng_normal(&r);
			}
			struct sb_norm nm;
			struct sb_err err = {0};
			if (sb_norm_parse(bms[m].method, bms[m].alpha, &nm, &err)) {
				fprintf(stderr, "bench_norm: %s\n", err.msg);
				return 1;
			}
			nm.unrolled = bms[m].unrolled;
			float alpha = (float)bms[m].alpha;
			double bf = 1e30, bb = 1e30, dalpha = 0;
			for (int trial = 0; trial < trials; trial++) {
				double t0 = now();
				for (long k = 0; k < reps; k++)
					for (long b = 0; b < nb; b++) {
						size_t o = (size_t)b * rows * T;
						if (sb_norm_forward(&nm, p + o, aux + (size_t)b * rows * SB_NORM_AUX,
						                    s + o, rows, T, T, alpha, &err)) {
							fprintf(stderr, "bench_norm: %s\n", err.msg);
							return 1;
						}
					}
				double t1 = now();
				for (long k = 0; k < reps; k++)
					for (long b = 0; b < nb; b++) {
						size_t o = (size_t)b * rows * T;
						sb_norm_backward(&nm, ds + o, &dalpha, g + o, p + o,
						                 aux + (size_t)b * rows * SB_NORM_AUX, s + o, rows, T,
						                 T, alpha);
					}
				double t2 = now(), nr = (double)reps * nb * rows;
				bf = fmin(bf, (t1 - t0) / nr * 1e9);
				bb = fmin(bb, (t2 - t1) / nr * 1e9);
			}
			long supp = 0;
			for (size_t i = 0; i < n; i++)
				supp += p[i] > 0;
			if (m == 0)
				soft[ti] = bf + bb;
			printf("%-22s %5d %9.1f %9.1f %9.1f %7.2f %8.1f\n", bms[m].label, T, bf, bb, bf + bb,
			       (bf + bb) / soft[ti], (double)supp / ((double)nb * rows));
			fflush(stdout);
			if (!isfinite(dalpha))
				fprintf(stderr, "bench_norm: non-finite dalpha\n");
			free(s);
			free(g);
			free(p);
			free(ds);
			free(aux);
		}
	}
	return 0;
}
