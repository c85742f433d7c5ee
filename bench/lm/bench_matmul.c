/* bench_matmul.c — the evaluation path's products alone: `matmul_rows` (row-deterministic,
 * weights packed by `pack_rows`; and `matmul_rows_bf16` on bfloat16 weights, as an imported
 * BF16 checkpoint is evaluated) against OpenBLAS's SGEMM (what PyTorch calls on the CPU) on
 * the shapes of a Qwen2.5-0.5B-shaped decoder, M rows (a prefill; 1 = a decoding step), one
 * thread, best of R runs each, interleaved. Prints one JSON line per shape.
 *
 *   build/bench_matmul [M [R]]        (bench/lm/pretrained.sh builds and runs it) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

char *openblas_get_corename(void);

int main(int argc, char **argv)
{
	int M = argc > 1 ? atoi(argv[1]) : 256, R = argc > 2 ? atoi(argv[2]) : 5;
	struct sb_err err = {0};
	struct sb_backend *be;
	if (M < 1 || R < 1 || sb_backend_cpu_open(1, &be, &err)) {
		fprintf(stderr, "bench_matmul: %s\n", M < 1 || R < 1 ? "M and R must be positive" : err.msg);
		return 1;
	}
	const struct sb_backend_lm_ops *lo = sb_backend_lm(be);
	struct sb_ctx *ctx = sb_be_main(be);
	/* q/k/v and o (d 896), gate+up (2 x 4864), down, the tied head (151,936: a quarter) */
	static const struct {
		const char *name;
		int K, N;
	} sh[] = {{"q", 896, 896}, {"kv", 896, 128}, {"gate_up", 896, 9728}, {"down", 4864, 896}, {"head/4", 896, 37984}};
	for (size_t s = 0; s < sizeof sh / sizeof *sh; s++) {
		int K = sh[s].K, N = sh[s].N;
		float *A = malloc((size_t)M * K * 4), *W = malloc((size_t)N * K * 4), *P = malloc((size_t)N * K * 4),
		      *O = malloc((size_t)M * N * 4);
		uint16_t *H = malloc((size_t)N * K * 2), *HP = malloc((size_t)N * K * 2);
		if (!A || !W || !P || !O || !H || !HP) {
			fprintf(stderr, "bench_matmul: out of memory\n");
			return 1;
		}
		uint64_t st = 88172645463325252ull;
		for (size_t i = 0; i < (size_t)M * K; i++) {
			st ^= st << 13, st ^= st >> 7, st ^= st << 17;
			A[i] = (float)((double)(st >> 11) * 0x1p-53 - 0.5);
		}
		for (size_t i = 0; i < (size_t)N * K; i++) {
			st ^= st << 13, st ^= st >> 7, st ^= st << 17;
			W[i] = (float)((double)(st >> 11) * 0x1p-53 * 0.07 - 0.035);
		}
		for (size_t i = 0; i < (size_t)N * K; i++) { /* bf16 weights, and the same values in float */
			uint32_t u;
			memcpy(&u, &W[i], 4);
			H[i] = (uint16_t)(u >> 16);
			u = (uint32_t)H[i] << 16;
			memcpy(&W[i], &u, 4);
		}
		lo->pack_rows(ctx, P, W, N, K);
		lo->pack_rows_bf16(ctx, HP, H, N, K);
		double ours = 1e30, blas = 1e30, b16 = 1e30;
		for (int r = 0; r < R; r++) {
			double t = now();
			lo->matmul_rows(ctx, O, A, P, NULL, M, K, N);
			t = now() - t;
			ours = t < ours ? t : ours;
			t = now();
			lo->matmul_rows_bf16(ctx, O, A, HP, NULL, M, K, N);
			t = now() - t;
			b16 = t < b16 ? t : b16;
			t = now();
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, W, K, 0.0f, O, N);
			t = now() - t;
			blas = t < blas ? t : blas;
		}
		double fl = 2.0 * M * K * N;
		printf("{\"shape\":\"%s\",\"M\":%d,\"K\":%d,\"N\":%d,\"ours_gflops\":%.1f,\"openblas_gflops\":%.1f,"
		       "\"ours_bf16_gflops\":%.1f,\"openblas_core\":\"%s\"}\n",
		       sh[s].name, M, K, N, fl / ours * 1e-9, fl / blas * 1e-9, fl / b16 * 1e-9, openblas_get_corename());
		free(A);
		free(W);
		free(P);
		free(O);
		free(H);
		free(HP);
	}
	sb_backend_close(be);
	return 0;
}
