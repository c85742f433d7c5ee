/* bench_pretrained.c — the LM evaluation path on a pretrained-sized decoder: one thread,
 * a Qwen2.5-0.5B-shaped model (random weights; the layout of sb-lm import), a prefill of
 * N tokens with every row's logits (a fidelity window) and D single-token decoding steps
 * (a probe's answer), dense and under the recipe mask, with the weights in float (an
 * F32/F16 checkpoint) and then as packed bfloat16 (a BF16 checkpoint; same values, so the
 * same logits: checked). Prints one JSON line.
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
#include "tensor.h"

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
	/* weights: uniform in +-0.035 (sd 0.02) from a cheap generator (sb_lm_model_init's
	 * normal draws take minutes at this size; the values do not change the timing), norms 1,
	 * rounded to bfloat16 so that the float and the bfloat16 model hold the same values */
	struct sb_lm_param *ps;
	int nps;
	size_t nf;
	if (sb_lm_cfg_check(&c, &err) || sb_lm_param_table(&c, &ps, &nps, &nf, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	double t0 = now();
	float *host = malloc(nf * sizeof *host);
	uint16_t *h16 = malloc(nf * sizeof *h16);
	if (!host || !h16) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	uint64_t st = 88172645463325252ull;
	for (size_t i = 0; i < nf; i++) {
		st ^= st << 13, st ^= st >> 7, st ^= st << 17;
		float f = (float)((double)(st >> 11) * 0x1p-53 * 0.07 - 0.035);
		uint32_t u;
		memcpy(&u, &f, 4);
		h16[i] = (uint16_t)(u >> 16);
	}
	size_t np = 0;
	for (int i = 0; i < nps; i++) {
		np += ps[i].numel;
		if (strstr(ps[i].name, "norm"))
			for (size_t j = 0; j < ps[i].numel; j++)
				h16[ps[i].offset + j] = 0x3f80; /* 1.0 */
	}
	for (size_t i = 0; i < nf; i++) {
		uint32_t u = (uint32_t)h16[i] << 16;
		memcpy(&host[i], &u, 4);
	}
	struct sb_tensors t32, t16;
	sb_tensors_init(&t32);
	sb_tensors_init(&t16);
	for (int i = 0; i < nps; i++)
		if (sb_tensors_add(&t32, ps[i].name, SB_F32, ps[i].ndim, ps[i].shape, host + ps[i].offset, 1, &err) ||
		    sb_tensors_add(&t16, ps[i].name, SB_BF16, ps[i].ndim, ps[i].shape, h16 + ps[i].offset, 1, &err)) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
	double t_init = now() - t0;
	int32_t *ids = malloc((size_t)(N + D) * sizeof *ids);
	float *logits = malloc((size_t)N * c.vocab * sizeof *logits), *first = malloc((size_t)c.vocab * sizeof *first);
	for (int i = 0; i < N + D; i++)
		ids[i] = (int32_t)((i * 7919u + 13u) % (unsigned)c.vocab);
	struct sb_lm_mask masks[2];
	sb_lm_mask_parse("dense", &masks[0], NULL);
	sb_lm_mask_parse("recipe", &masks[1], NULL);
	struct sb_ctx *ctx = sb_be_main(be);
	printf("{\"model\":\"qwen2.5-0.5b-shape\",\"parameters\":%zu,\"threads\":1,\"prefill_tokens\":%d,"
	       "\"decode_steps\":%d,\"init_s\":%.2f",
	       np, N, D, t_init);
	/* the float evaluation model (what sb-eval holds for an F32/F16 checkpoint), then the
	 * bfloat16 one (a BF16 checkpoint): the same values, so the same logits bit for bit */
	int same = 1;
	for (int b16 = 0; b16 < 2; b16++) {
		struct sb_lm_model *m;
		struct sb_lm_cache *cache;
		double l0 = now();
		if (sb_lm_model_new_eval(be, &c, b16, &m, &err) || sb_lm_model_from_tensors(m, b16 ? &t16 : &t32, &err) ||
		    sb_lm_cache_new(m, N + D, &cache, &err)) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		printf(",\"%sload_s\":%.2f", b16 ? "bf16_" : "", now() - l0);
		for (int k = 0; k < 2; k++) {
			sb_lm_cache_reset(cache, 0);
			double a = now();
			if (sb_lm_forward_cached_ids(ctx, m, cache, ids, N, &masks[k], logits, 1, NULL, &err)) {
				fprintf(stderr, "%s\n", err.msg);
				return 1;
			}
			double b = now();
			if (k == 0 && !b16)
				memcpy(first, logits + (size_t)(N - 1) * c.vocab, (size_t)c.vocab * sizeof *first);
			if (k == 0 && b16)
				same = !memcmp(first, logits + (size_t)(N - 1) * c.vocab, (size_t)c.vocab * sizeof *first);
			for (int s = 0; s < D; s++)
				if (sb_lm_forward_cached_ids(ctx, m, cache, ids + N + s, 1, &masks[k], logits, 0, NULL,
							     &err)) {
					fprintf(stderr, "%s\n", err.msg);
					return 1;
				}
			double e = now();
			const char *nm = k ? "recipe" : "dense", *pre = b16 ? "bf16_" : "";
			printf(",\"%s%s_prefill_s\":%.3f,\"%s%s_decode_ms_per_token\":%.1f", pre, nm, b - a, pre, nm,
			       1e3 * (e - b) / D);
			fflush(stdout);
		}
		sb_lm_cache_free(cache);
		sb_lm_model_free(m);
	}
	printf(",\"bf16_logits_equal\":%s,\"logit_check\":%.6f}\n", same ? "true" : "false", first[0]);
	sb_tensors_free(&t32);
	sb_tensors_free(&t16);
	free(ps);
	free(host);
	free(h16);
	free(ids);
	free(logits);
	free(first);
	sb_backend_close(be);
	return 0;
}
