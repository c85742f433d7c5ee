/* bench_pretrained.c — the LM evaluation path on a pretrained-sized decoder: one thread,
 * a Qwen2.5-0.5B-shaped model (random weights; the layout of sb-lm import), a prefill of
 * N tokens with every row's logits (a fidelity window) and D single-token decoding steps
 * (a probe's answer), dense and under the recipe mask. Prints one JSON line.
 *
 *   build/bench_pretrained [N [D]]        (bench/lm/pretrained.sh builds and runs it
 *                                          against bench/lm/torch_pretrained.py) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "lm_mask.h"
#include "lm_model.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int N = argc > 1 ? atoi(argv[1]) : 256, D = argc > 2 ? atoi(argv[2]) : 32;
	struct sb_err err = {0};
	struct sb_backend *be;
	if (sb_backend_cpu_open(1, &be, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	struct sb_lm_cfg c;
	sb_lm_cfg_default(&c);
	c.vocab = 151936;
	c.d = 896;
	memset(c.pattern, 'A', 24);
	c.pattern[24] = 0;
	c.heads = 14;
	c.kv_heads = 2;
	c.head_dim = 64;
	c.ffn = 4864;
	c.swiglu = 1;
	c.rmsnorm = 1;
	c.norm_eps = 1e-6f;
	c.attn_bias = 2;
	c.tied = 1;
	c.pos = SB_LM_POS_ROPE;
	c.rope_theta = 1000000.0f;
	c.max_T = 32768;
	struct sb_lm_model *m;
	double t0 = now();
	if (sb_lm_model_new(be, &c, &m, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	/* weights: uniform in +-0.035 (sd 0.02) from a cheap generator (sb_lm_model_init's
	 * normal draws take minutes at this size; the values do not change the timing), norms 1 */
	float *host = malloc(m->n_floats * sizeof *host);
	uint64_t st = 88172645463325252ull;
	for (size_t i = 0; i < m->n_floats; i++) {
		st ^= st << 13, st ^= st >> 7, st ^= st << 17;
		host[i] = (float)((double)(st >> 11) * 0x1p-53 * 0.07 - 0.035);
	}
	for (int i = 0; i < m->n_params; i++)
		if (strstr(m->params[i].name, "norm"))
			for (size_t j = 0; j < m->params[i].numel; j++)
				host[m->params[i].offset + j] = 1.0f;
	if (be->ops->upload(be, m->p, host, m->n_floats * sizeof *host, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	free(host);
	sb_lm_model_prepare(m);
	double t_init = now() - t0;
	size_t np = 0;
	for (int i = 0; i < m->n_params; i++)
		np += m->params[i].numel;
	struct sb_lm_cache *cache;
	if (sb_lm_cache_new(m, N + D, &cache, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	int32_t *ids = malloc((size_t)(N + D) * sizeof *ids);
	float *logits = malloc((size_t)N * c.vocab * sizeof *logits);
	for (int i = 0; i < N + D; i++)
		ids[i] = (int32_t)((i * 7919u + 13u) % (unsigned)c.vocab);
	struct sb_lm_mask masks[2];
	sb_lm_mask_parse("dense", &masks[0], NULL);
	sb_lm_mask_parse("recipe", &masks[1], NULL);
	struct sb_ctx *ctx = sb_be_main(be);
	printf("{\"model\":\"qwen2.5-0.5b-shape\",\"parameters\":%zu,\"threads\":1,\"prefill_tokens\":%d,"
	       "\"decode_steps\":%d,\"init_s\":%.2f",
	       np, N, D, t_init);
	for (int k = 0; k < 2; k++) {
		sb_lm_cache_reset(cache, 0);
		double a = now();
		if (sb_lm_forward_cached_ids(ctx, m, cache, ids, N, &masks[k], logits, 1, NULL, &err)) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		double b = now();
		for (int s = 0; s < D; s++)
			if (sb_lm_forward_cached_ids(ctx, m, cache, ids + N + s, 1, &masks[k], logits, 0, NULL, &err)) {
				fprintf(stderr, "%s\n", err.msg);
				return 1;
			}
		double e = now();
		printf(",\"%s_prefill_s\":%.3f,\"%s_decode_ms_per_token\":%.1f", k ? "recipe" : "dense", b - a,
		       k ? "recipe" : "dense", 1e3 * (e - b) / D);
		fflush(stdout);
	}
	printf(",\"logit_check\":%.6f}\n", logits[0]);
	sb_lm_cache_free(cache);
	sb_lm_model_free(m);
	free(ids);
	free(logits);
	sb_backend_close(be);
	return 0;
}
