/* backend_cpu_dense.c — CPU matrix products (our register-blocked kernel,
 * single-threaded per call: the parallelism is the backend's tasks) and the local mixer. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "backend_cpu.h"
#include "backend_cpu_simd.h"

/* OpenBLAS is not used by this backend (its products are below); should a caller in
 * the same process use it, its threads would fight the backend's workers: keep one. */
extern void openblas_set_num_threads(int) __attribute__((weak));

void sb_cpu_blas_single_thread(void)
{
	if (openblas_set_num_threads)
		openblas_set_num_threads(1);
}

extern char *openblas_get_corename(void) __attribute__((weak));

/* Pre-AVX2 cores OpenBLAS falls back to when it does not know a CPU (Debian 12's 0.3.21
 * does not know Intel's model 207, Emerald Rapids, and runs "Prescott" there: SGEMM at a
 * sixth of its SkylakeX kernel's speed on the same machine). */
int sb_blas_core_generic(const char *core, int cpu_has_avx2)
{
	static const char *const old[] = {"Prescott", "Core2",        "Penryn",    "Dunnington", "Nehalem",    "Atom",
	                                  "Katmai",   "Coppermine",   "Northwood", "Banias",     "Yonah",      "Athlon",
	                                  "Opteron",  "Opteron_SSE3", "Barcelona", "Bobcat",     "Sandybridge"};
	if (!core || !cpu_has_avx2)
		return 0;
	for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
		if (!strcasecmp(core, old[i]))
			return 1;
	return 0;
}

const char *sb_cpu_blas_core(void)
{
	const char *c = openblas_get_corename ? openblas_get_corename() : NULL;
	return c && c[0] ? c : "unknown";
}

int sb_cpu_blas_generic(void)
{
	return sb_blas_core_generic(openblas_get_corename ? openblas_get_corename() : NULL,
	                            __builtin_cpu_supports("avx2"));
}

void sb_cpu_describe(char *buf, size_t n, int threads)
{
	char model[96] = "cpu";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[256];
		while (fgets(line, sizeof line, f)) {
			if (!strncmp(line, "model name", 10)) {
				char *c = strchr(line, ':');
				if (c) {
					c++;
					while (*c == ' ')
						c++;
					c[strcspn(c, "\n")] = 0;
					snprintf(model, sizeof model, "%s", c);
				}
				break;
			}
		}
		fclose(f);
	}
	const char *isa =
#if defined(__AVX512F__)
	    "AVX-512";
#elif defined(__AVX2__)
	    "AVX2";
#else
	    "SSE2";
#endif
	snprintf(buf, n, "cpu: %s, %d thread%s, %s", model, threads, threads == 1 ? "" : "s", isa);
}

/* ---------------------------------------------------------------- products
 *
 * One register-blocked kernel for the three products of a Linear layer:
 *   C[i][j] (= or +=) sum_k A(i, k) B[k][j]  (+ bias[j]),   A(i, k) = A[i*ars + k*acs],
 * B row-major with row stride ldb. A micro-tile is 6 rows x 64 columns of C held in
 * 24 vector accumulators (per k it loads 4 vectors of B and broadcasts 6 values of A),
 * or 6 x 48, or 8 x 32 or 8 x 16 for narrower C (attention's head products); the rows
 * of a partial tile keep their chains in registers too. A long k (the weight gradient's
 * sum over a batch) runs in passes of GEMM_KB.
 *   forward   out = inp w^T + b:  A = inp (ars K, acs 1), B = w^T packed [K][N]
 *   d input   dinp = dout w:      A = dout (ars N, acs 1), B = w [N][K]
 *   d weight  dw += dout^T inp:   A = dout^T (ars 1, acs N), B = inp [M][K]
 * Each C element is one chain of FMAs over k in increasing order: the result does
 * not depend on the tiling, the thread count or OpenBLAS (which the CPU backend no
 * longer uses for these; OpenBLAS 0.3.21 does not know recent cores and falls back
 * to its Haswell kernels). */

/* tile heights: 6 rows for 3-4 vectors of columns (24 accumulators), 8 rows for 1-2 (8 FMA
 * chains in flight for one vector; more rows run out of integer registers for their offsets) */
#define GEMM_MR 6
#define GEMM_MR_NARROW 8
/* rows of k per pass over C (see sb_cpu_gemm) */
#define GEMM_KB 128

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
#define GEMM_YMM 1 /* the 8-lane kernel below */
#else
static inline vf gemm_init(const float *C, const float *bias, int acc)
{
	return acc ? vload(C) : bias ? vload(bias) : vzero();
}

/* R rows x NV vectors of C (R <= 8, NV <= 4, both constants where it is inlined): R * NV
 * accumulators in registers; per k it loads NV vectors of B and broadcasts R values of A */
static inline __attribute__((always_inline)) void gemm_kern(int R, int NV, float *C, int ldc, const float *A, long ars,
                                                            long acs, const float *B, int ldb, int K,
                                                            const float *bias, int acc)
{
	vf c[GEMM_MR_NARROW][4];
	_Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
		_Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
			c[r][v] = gemm_init(C + (size_t)r * ldc + v * VL, bias ? bias + v * VL : NULL, acc);
	for (int k = 0; k < K; k++) {
		const float *b = B + (size_t)k * ldb;
		vf bv[4];
		_Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
			bv[v] = vload(b + v * VL);
		long o = (long)k * acs;
		_Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
			vf x = vset1(A[r * ars + o]);
			_Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
				c[r][v] = vfma(x, bv[v], c[r][v]);
		}
	}
	_Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
		_Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
			vstore(C + (size_t)r * ldc + v * VL, c[r][v]);
}

#endif

#ifdef GEMM_YMM
/* AVX2 (x86-64-v3) builds: GCC 12 keeps 16-lane generic vectors that are wider than the
 * target's registers in memory across loop iterations, so gemm_kern's accumulators went
 * through the stack on every FMA (an AVX2 build trained ~7x slower than an AVX-512 one).
 * These builds use a kernel on 8-lane registers instead: 6 rows x 16 columns (12
 * accumulators, 2 vectors of B, a broadcast) or 8 rows x 8 columns. Each C element is
 * still one FMA chain over k in increasing order from the same start (C, bias or +0), so
 * the results are the AVX-512 kernel's bit for bit. */
static inline __attribute__((always_inline)) __m256 gemm_init8(const float *C, const float *bias, int acc)
{
	return acc ? _mm256_loadu_ps(C) : bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
}
/* R rows x NY 8-column vectors of C (R <= 6 for NY 2, R <= 8 for NY 1) */
static inline __attribute__((always_inline)) void gemm_kern8(int R, int NY, float *C, int ldc, const float *A,
                                                             long ars, long acs, const float *B, int ldb, int K,
                                                             const float *bias, int acc)
{
	__m256 c[8][2];
	_Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
		_Pragma("GCC unroll 2") for (int v = 0; v < NY; v++)
			c[r][v] = gemm_init8(C + (size_t)r * ldc + v * 8, bias ? bias + v * 8 : NULL, acc);
	for (int k = 0; k < K; k++) {
		const float *b = B + (size_t)k * ldb;
		__m256 bv[2];
		_Pragma("GCC unroll 2") for (int v = 0; v < NY; v++)
			bv[v] = _mm256_loadu_ps(b + v * 8);
		long o = (long)k * acs;
		_Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
			__m256 x = _mm256_broadcast_ss(A + r * ars + o);
			_Pragma("GCC unroll 2") for (int v = 0; v < NY; v++)
				c[r][v] = _mm256_fmadd_ps(x, bv[v], c[r][v]);
		}
	}
	_Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
		_Pragma("GCC unroll 2") for (int v = 0; v < NY; v++)
			_mm256_storeu_ps(C + (size_t)r * ldc + v * 8, c[r][v]);
}
#endif

/* the kernel with R not known at compile time (1..6, or 1..8 for NV <= 2 16-lane vectors; with
 * GEMM_YMM, NV counts 8-lane vectors: 1..6 rows of 2, 1..8 rows of 1) */
#ifdef GEMM_YMM
#define GEMM_KERN gemm_kern8
#else
#define GEMM_KERN gemm_kern
#endif
#define GEMM_CASE(R, NV)                                                                                               \
	case R:                                                                                                        \
		GEMM_KERN(R, NV, C, ldc, A, ars, acs, B, ldb, K, bias, acc);                                           \
		break;
#define GEMM_ROWS(NV, MORE)                                                                                            \
	static void gemm_rows##NV(int R, float *C, int ldc, const float *A, long ars, long acs, const float *B,         \
	                          int ldb, int K, const float *bias, int acc)                                          \
	{                                                                                                              \
		switch (R) {                                                                                           \
			GEMM_CASE(1, NV)                                                                               \
			GEMM_CASE(2, NV)                                                                               \
			GEMM_CASE(3, NV)                                                                               \
			GEMM_CASE(4, NV)                                                                               \
			GEMM_CASE(5, NV)                                                                               \
			GEMM_CASE(6, NV)                                                                               \
			MORE                                                                                           \
		}                                                                                                      \
	}
#define GEMM_MORE(NV) GEMM_CASE(7, NV) GEMM_CASE(8, NV)
#ifdef GEMM_YMM
GEMM_ROWS(1, GEMM_MORE(1)) /* up to 8 rows x 8 columns */
GEMM_ROWS(2, )             /* up to 6 rows x 16 columns */
#else
GEMM_ROWS(1, GEMM_MORE(1))
GEMM_ROWS(2, GEMM_MORE(2))
GEMM_ROWS(3, )
GEMM_ROWS(4, )
#endif
#undef GEMM_MORE
#undef GEMM_ROWS
#undef GEMM_CASE
#undef GEMM_KERN

/* one pass of sb_cpu_gemm over k = 0..K-1 */
static void gemm_pass(float *C, int ldc, const float *A, long ars, long acs, const float *B, int ldb, int M, int N,
                      int K, const float *bias, int acc)
{
#ifdef GEMM_YMM
	int nfull = N / 16 * 16;
	for (int j0 = 0; j0 < nfull; j0 += 16)
		for (int i = 0; i < M; i += 6)
			gemm_rows2(M - i < 6 ? M - i : 6, C + (size_t)i * ldc + j0, ldc, A + (long)i * ars, ars, acs,
			            B + j0, ldb, K, bias ? bias + j0 : NULL, acc);
	if (N - nfull >= 8) {
		for (int i = 0; i < M; i += 8)
			gemm_rows1(M - i < 8 ? M - i : 8, C + (size_t)i * ldc + nfull, ldc, A + (long)i * ars, ars, acs,
			            B + nfull, ldb, K, bias ? bias + nfull : NULL, acc);
		nfull += 8;
	}
#else
	int nfull = N / VL * VL;
	for (int j0 = 0; j0 < nfull;) {
		int nv = (nfull - j0) / VL < 4 ? (nfull - j0) / VL : 4;
		int mr = nv <= 2 ? GEMM_MR_NARROW : GEMM_MR;
		const float *bj = B + j0, *bi = bias ? bias + j0 : NULL;
		for (int i = 0; i < M; i += mr) {
			int R = M - i < mr ? M - i : mr;
			float *c = C + (size_t)i * ldc + j0;
			const float *a = A + (long)i * ars;
			switch (nv) {
			case 1:
				gemm_rows1(R, c, ldc, a, ars, acs, bj, ldb, K, bi, acc);
				break;
			case 2:
				gemm_rows2(R, c, ldc, a, ars, acs, bj, ldb, K, bi, acc);
				break;
			case 3:
				gemm_rows3(R, c, ldc, a, ars, acs, bj, ldb, K, bi, acc);
				break;
			default:
				gemm_rows4(R, c, ldc, a, ars, acs, bj, ldb, K, bi, acc);
				break;
			}
		}
		j0 += nv * VL;
	}
#endif
	/* columns past the last whole vector: one FMA chain per element, same order */
	for (int i = 0; i < M; i++)
		for (int j = nfull; j < N; j++) {
			float s = acc ? C[(size_t)i * ldc + j] : bias ? bias[j] : 0.0f;
			for (int k = 0; k < K; k++)
				s = sfma(A[(long)i * ars + (long)k * acs], B[(size_t)k * ldb + j], s);
			C[(size_t)i * ldc + j] = s;
		}
}

/* A long k (a weight gradient's sum over the rows of a batch) runs in passes of GEMM_KB
 * rows of B, so that the rows of B a pass reads stay in L1 for every tile of C instead of
 * streaming from L2/L3 once per tile; C is stored after a pass and loaded by the next, so
 * each element is still one FMA chain over k in increasing order (float in, float out:
 * the same bits as one pass). */
void sb_cpu_gemm(float *C, int ldc, const float *A, long ars, long acs, const float *B, int ldb, int M, int N, int K,
                 const float *bias, int acc)
{
	if (K <= 2 * GEMM_KB) {
		gemm_pass(C, ldc, A, ars, acs, B, ldb, M, N, K, bias, acc);
		return;
	}
	for (int k0 = 0; k0 < K; k0 += GEMM_KB) {
		int kn = K - k0 < GEMM_KB ? K - k0 : GEMM_KB;
		gemm_pass(C, ldc, A + (long)k0 * acs, ars, acs, B + (size_t)k0 * ldb, ldb, M, N, kn, k0 ? NULL : bias,
		          k0 ? 1 : acc);
	}
}

/* out[M, N] = inp[M, K] w[N, K]^T + bias */
void sb_cpu_matmul_forward(struct sb_ctx *ctx, float *out, const float *inp, const float *w, const float *bias, int M,
                           int K, int N)
{
	if (M <= 0 || N <= 0)
		return;
	float *wt = sb_cpu_scratch(ctx, (size_t)K * N * sizeof(float) + 64);
#if defined(__AVX512F__)
	if (K % 16 == 0 && N % 16 == 0) { /* w^T, [K][N], by 16 x 16 transposes in registers */
		for (int n0 = 0; n0 < N; n0 += 16)
			for (int k0 = 0; k0 < K; k0 += 16) {
				__m512 r[16];
				for (int i = 0; i < 16; i++)
					r[i] = _mm512_loadu_ps(w + (size_t)(n0 + i) * K + k0);
				vtranspose16(r);
				for (int i = 0; i < 16; i++)
					_mm512_storeu_ps(wt + (size_t)(k0 + i) * N + n0, r[i]);
			}
		sb_cpu_gemm(out, N, inp, K, 1, wt, N, M, N, K, bias, 0);
		return;
	}
#endif
	for (int n0 = 0; n0 < N; n0 += 16) /* w^T, [K][N], in 16 x 16 blocks */
		for (int k0 = 0; k0 < K; k0 += 16) {
			int n1 = n0 + 16 < N ? n0 + 16 : N, k1 = k0 + 16 < K ? k0 + 16 : K;
			for (int n = n0; n < n1; n++)
				for (int k = k0; k < k1; k++)
					wt[(size_t)k * N + n] = w[(size_t)n * K + k];
		}
	sb_cpu_gemm(out, N, inp, K, 1, wt, N, M, N, K, bias, 0);
}

void sb_cpu_matmul_backward(struct sb_ctx *ctx, float *dinp, float *dw, float *dbias, const float *dout,
                            const float *inp, const float *w, int M, int K, int N, int accumulate)
{
	if (M <= 0)
		return;
	if (dinp)
		sb_cpu_gemm(dinp, K, dout, N, 1, w, K, M, K, N, NULL, accumulate);
	if (dw && K < VL && N >= VL) {
		/* a narrow input (fewer features than a vector, e.g. N3-A's 7): dw[N, K] has no whole
		 * vector per row and would run element by element; dw^T[K, N] = inp^T dout has, and
		 * each element is the same FMA chain over the rows in the same order (x y + s is
		 * fused, so which factor comes first does not change a bit), so the bits are those
		 * of the direct product */
		float *t = sb_cpu_scratch(ctx, (size_t)K * N * sizeof(float) + 64);
		for (int n = 0; n < N; n++)
			for (int k = 0; k < K; k++)
				t[(size_t)k * N + n] = dw[(size_t)n * K + k];
		sb_cpu_gemm(t, N, inp, 1, K, dout, N, K, N, M, NULL, 1);
		for (int n = 0; n < N; n++)
			for (int k = 0; k < K; k++)
				dw[(size_t)n * K + k] = t[(size_t)k * N + n];
	} else if (dw)
		sb_cpu_gemm(dw, K, dout, 1, N, inp, K, N, K, M, NULL, 1);
	if (dbias) {
		/* column sums over the rows in order, 4 vectors of columns held in registers */
		int c0 = 0;
		for (; c0 + 4 * VL <= N; c0 += 4 * VL) {
			vf s0 = vload(dbias + c0), s1 = vload(dbias + c0 + VL), s2 = vload(dbias + c0 + 2 * VL),
			   s3 = vload(dbias + c0 + 3 * VL);
			for (int i = 0; i < M; i++) {
				const float *g = dout + (size_t)i * N + c0;
				s0 += vload(g);
				s1 += vload(g + VL);
				s2 += vload(g + 2 * VL);
				s3 += vload(g + 3 * VL);
			}
			vstore(dbias + c0, s0);
			vstore(dbias + c0 + VL, s1);
			vstore(dbias + c0 + 2 * VL, s2);
			vstore(dbias + c0 + 3 * VL, s3);
		}
		for (int i = 0; i < M; i++) {
			const float *g = dout + (size_t)i * N;
			int c = c0;
			for (; c + VL <= N; c += VL)
				vstore(dbias + c, vload(dbias + c) + vload(g + c));
			for (; c < N; c++)
				dbias[c] += g[c];
		}
	}
}

/* ---------------------------------------------------------------- local mixer */

/* neighbour of content token t through tap k (k = 0..8 for 3x3, 0..2 for 1-D), or -1 */
static inline int mix_nbr(int t, int k, int G, int L)
{
	if (G > 0) {
		int r = t / G, c = t % G;
		int rr = r + k / 3 - 1, cc = c + k % 3 - 1;
		if (rr < 0 || rr >= G || cc < 0 || cc >= G)
			return -1;
		return rr * G + cc;
	}
	int s = t + k - 1;
	return s < 0 || s >= L ? -1 : s;
}

static inline int mix_valid(const int32_t *nvalid, int b, int t)
{
	return !nvalid || t < nvalid[b] - 1;
}

void sb_cpu_localmix_forward(struct sb_ctx *ctx, float *out, float *y, float *z, float *mean, float *rstd,
                             const float *x, const int32_t *nvalid, const float *lnw, const float *lnb, const float *cw,
                             const float *cb, const float *scale, int B, int T, int d, int G)
{
	int L = T - 1, KK = G > 0 ? 9 : 3;
	float *gz = sb_cpu_scratch(ctx, (size_t)L * d * sizeof(float) + (size_t)KK * d * sizeof(float) + 64);
	float *wt = gz + (size_t)L * d; /* taps transposed: wt[k][c] */
	for (int c = 0; c < d; c++)
		for (int k = 0; k < KK; k++)
			wt[(size_t)k * d + c] = cw[(size_t)c * KK + k];
	float s = scale[0];
	for (int b = 0; b < B; b++) {
		const float *xb = x + (size_t)b * T * d;
		float *ob = out + (size_t)b * T * d;
		float *yb = y + (size_t)b * L * d, *zb = z + (size_t)b * L * d;
		memcpy(ob, xb, (size_t)d * sizeof *ob); /* CLS untouched */
		sb_cpu_layernorm_rows(yb, mean + (size_t)b * L, rstd + (size_t)b * L, xb + d, lnw, lnb, L, d);
		for (int t = 0; t < L; t++)
			if (!mix_valid(nvalid, b, t))
				memset(yb + (size_t)t * d, 0, (size_t)d * sizeof *yb);
		for (int t = 0; t < L; t++) {
			float *zt = zb + (size_t)t * d;
			memcpy(zt, cb, (size_t)d * sizeof *zt);
			for (int k = 0; k < KK; k++) {
				int sidx = mix_nbr(t, k, G, L);
				if (sidx < 0)
					continue;
				const float *ys = yb + (size_t)sidx * d, *wk = wt + (size_t)k * d;
				for (int c = 0; c < d; c++)
					zt[c] = sfma(wk[c], ys[c], zt[c]);
			}
		}
		sb_cpu_gelu_vec(gz, NULL, zb, (size_t)L * d);
		for (int t = 0; t < L; t++) {
			const float *xt = xb + (size_t)(t + 1) * d, *gt = gz + (size_t)t * d;
			float *ot = ob + (size_t)(t + 1) * d;
			if (mix_valid(nvalid, b, t))
				for (int c = 0; c < d; c++)
					ot[c] = sfma(s, gt[c], xt[c]);
			else
				memset(ot, 0, (size_t)d * sizeof *ot);
		}
	}
}

void sb_cpu_localmix_backward(struct sb_ctx *ctx, float *dx, float *dlnw, float *dlnb, float *dcw, float *dcb,
                              float *dscale, const float *dout, const float *x, const float *y, const float *z,
                              const float *mean, const float *rstd, const int32_t *nvalid, const float *lnw,
                              const float *cw, const float *scale, int B, int T, int d, int G)
{
	int L = T - 1, KK = G > 0 ? 9 : 3;
	size_t Ld = (size_t)L * d;
	float *gz = sb_cpu_scratch(ctx, (3 * Ld + 2 * (size_t)KK * d) * sizeof(float) + 64);
	float *dg = gz + Ld, *dy = dg + Ld, *wt = dy + Ld, *dwt = wt + (size_t)KK * d;
	for (int c = 0; c < d; c++)
		for (int k = 0; k < KK; k++)
			wt[(size_t)k * d + c] = cw[(size_t)c * KK + k];
	memset(dwt, 0, (size_t)KK * d * sizeof *dwt);
	float s = scale[0];
	double ds = 0;
	for (int b = 0; b < B; b++) {
		const float *gb = dout + (size_t)b * T * d;
		float *dxb = dx + (size_t)b * T * d;
		const float *yb = y + (size_t)b * Ld, *zb = z + (size_t)b * Ld;
		memcpy(dxb, gb, (size_t)d * sizeof *dxb);
		sb_cpu_gelu_vec(gz, dg, zb, Ld); /* gz = gelu(z), dg = gelu'(z) */
		/* dz (in dg) = scale * g * gelu'(z) on valid tokens; residual to dx */
		for (int t = 0; t < L; t++) {
			const float *gt = gb + (size_t)(t + 1) * d;
			float *dxt = dxb + (size_t)(t + 1) * d, *dzt = dg + (size_t)t * d;
			const float *gzt = gz + (size_t)t * d;
			if (!mix_valid(nvalid, b, t)) {
				memset(dxt, 0, (size_t)d * sizeof *dxt);
				memset(dzt, 0, (size_t)d * sizeof *dzt);
				continue;
			}
			float acc = 0;
			for (int c = 0; c < d; c++) {
				acc = sfma(gt[c], gzt[c], acc);
				dxt[c] = gt[c];
				dzt[c] = (s * gt[c]) * dzt[c];
			}
			ds += acc;
		}
		/* conv backward: bias, taps, and the input gradient (transposed conv) */
		memset(dy, 0, Ld * sizeof *dy);
		for (int t = 0; t < L; t++) {
			const float *dzt = dg + (size_t)t * d;
			for (int c = 0; c < d; c++)
				dcb[c] += dzt[c];
			for (int k = 0; k < KK; k++) {
				int sidx = mix_nbr(t, k, G, L);
				if (sidx < 0)
					continue;
				const float *ys = yb + (size_t)sidx * d, *wk = wt + (size_t)k * d;
				float *dws = dwt + (size_t)k * d, *dys = dy + (size_t)sidx * d;
				for (int c = 0; c < d; c++) {
					dws[c] = sfma(dzt[c], ys[c], dws[c]);
					dys[c] = sfma(wk[c], dzt[c], dys[c]);
				}
			}
		}
		for (int t = 0; t < L; t++)
			if (!mix_valid(nvalid, b, t))
				memset(dy + (size_t)t * d, 0, (size_t)d * sizeof *dy);
		sb_cpu_layernorm_rows_backward(dxb + d, dlnw, dlnb, dy, x + (size_t)b * T * d + d, mean + (size_t)b * L,
		                               rstd + (size_t)b * L, lnw, L, d, 1);
	}
	for (int c = 0; c < d; c++)
		for (int k = 0; k < KK; k++)
			dcw[(size_t)c * KK + k] += dwt[(size_t)k * d + c];
	dscale[0] += (float)ds;
}
