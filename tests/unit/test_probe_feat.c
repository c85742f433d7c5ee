/* test_probe_feat.c — PROTOCOL A8 M1's probe features (lib/probe_feat.h) against an
 * independent double computation.
 *
 * 1. sb_probe_block on hand-made rows whose features are known in closed form
 *    (entropy of a uniform row, the margin of a row with known scores, ties broken to
 *    the lower index, a masked row, the gradient share).
 * 2. sb_probe_features on a tiny model (images; text with the margin and the
 *    exclusion mask; both architectures), trained with top-k so that the probe must
 *    swap in softmax, against the double reference encoder (ref_encoder.h, itself
 *    checked by finite differences): its dense-softmax forward gives S and P, its
 *    backward the gradient wrt each layer's attention output, from which this file
 *    forms d loss / d scores and the four features with plain loops and qsort.
 *    Tolerance 2e-6 absolute + 2e-6 relative (float32 engine vs double; measured
 *    misses 8e-9 to 4e-8, printed); a wrong k, a wrong averaging or a gradient of the
 *    wrong tensor misses by orders of magnitude more.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness.h"
#include "probe_feat.h"
#include "ref_encoder.h"

static uint64_t rs = 4242;
static double urand(void)
{
	rs = rs * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(rs >> 11) / 9007199254740992.0;
}

/* ---------------------------------------------------------------- 1. rows */

static void check_rows(void)
{
	/* T = 4, all valid, k = 1: row 0 uniform scores; row 1 scores 3,1,2,0 */
	float S[16] = {0, 0, 0, 0, 3, 1, 2, 0, 1, 1, 1, 1, 1, 1, 1, 1};
	float P[16];
	double G[16] = {0};
	for (int i = 0; i < 4; i++) {
		double z = 0;
		for (int j = 0; j < 4; j++)
			z += exp(S[i * 4 + j]);
		for (int j = 0; j < 4; j++)
			P[i * 4 + j] = (float)(exp(S[i * 4 + j]) / z);
	}
	for (int j = 0; j < 16; j++)
		G[j] = j % 4 == 0 ? 2.0 : 1.0; /* key 0 (the top key of every row): 4 of 4+1+1+1 */
	struct sb_probe_acc acc;
	memset(&acc, 0, sizeof acc);
	sb_probe_block(&acc, S, P, G, 4, 4);
	struct sb_probe_feat f;
	sb_probe_finish(&acc, 1, &f);
	/* entropy: rows 0, 2, 3 uniform (log 4); row 1 from P */
	double e1 = 0, p1top = 0;
	for (int j = 0; j < 4; j++)
		e1 -= P[4 + j] * log(P[4 + j]);
	p1top = P[4];
	double want_ent = (3 * log(4.0) + e1) / 4;
	/* margin: rows 0, 2, 3 have sd 0 (not counted); row 1: (3 - 2) / sd(3,1,2,0) */
	double sd1 = sqrt((2.25 + 0.25 + 0.25 + 2.25) / 4);
	double want_margin = 1.0 / sd1;
	/* tail: uniform rows 0.75 (the top key is key 0 by the tie rule); row 1: 1 - P[4] */
	double want_tail = (3 * 0.75 + (1 - p1top)) / 4;
	double want_share = 4.0 / 7.0;
	double got[4] = {f.dense_entropy, f.boundary_margin, f.tail_mass, f.gradient_topk_share};
	double want[4] = {want_ent, want_margin, want_tail, want_share};
	sb_check_close("rows: entropy, margin, tail mass, gradient share of a 4x4 block", got, want, 4, 1e-6, 1e-6);

	/* masked block: T = 4, 2 valid keys and rows; k = 1; G on the masked keys ignored */
	float S2[16] = {0.5f, -0.5f, 9, 9, 2, 0, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0};
	float P2[16] = {0};
	for (int i = 0; i < 2; i++) {
		double z = exp(S2[i * 4]) + exp(S2[i * 4 + 1]);
		P2[i * 4] = (float)(exp(S2[i * 4]) / z);
		P2[i * 4 + 1] = (float)(exp(S2[i * 4 + 1]) / z);
	}
	double G2[16] = {1, 3, 100, 100, 0, 0, 100, 100, 0, 0, 0, 0, 0, 0, 0, 0};
	memset(&acc, 0, sizeof acc);
	sb_probe_block(&acc, S2, P2, G2, 4, 2);
	sb_probe_finish(&acc, 1, &f);
	double got2[4] = {f.dense_entropy, f.boundary_margin, f.tail_mass, f.gradient_topk_share};
	double ent2 = 0;
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			ent2 -= P2[i * 4 + j] * log(P2[i * 4 + j]) / 2;
	/* margins: row 0 (0.5 - -0.5)/0.5 = 2; row 1 (2 - 0)/1 = 2; share: row 0 1/10, row 1 no gradient */
	double want2[4] = {ent2, 2.0, (P2[1] + P2[5]) / 2, 0.1};
	sb_check_close("masked block (2 of 4 keys valid): masked keys and rows ignored", got2, want2, 4, 1e-6, 1e-6);
}

/* ---------------------------------------------------------------- 2. model */

struct keyed {
	double s;
	int j;
};
static int cmp_keyed(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	if (x->s != y->s)
		return x->s > y->s ? -1 : 1;
	return x->j - y->j;
}

/* the four features in double, from the reference's S, P and datt */
static void ref_features(const struct sb_encoder *m, const struct ref_cache *c, double **datt, const int32_t *nvalid,
                         int B, double out[4])
{
	int T = m->T, d = m->cfg.d, NH = m->cfg.heads, hd = d / NH;
	double tot[4] = {0};
	int64_t cnt[4] = {0};
	double *g = ref_alloc((size_t)T), *dp = ref_alloc((size_t)T);
	struct keyed *ks = malloc((size_t)T * sizeof *ks);
	for (int l = 0; l < m->cfg.layers; l++)
		for (int b = 0; b < B; b++)
			for (int h = 0; h < NH; h++) {
				int n = nvalid ? nvalid[b] : T, k = (int)ceil(0.25 * n);
				double rsum[4] = {0};
				int rcnt[4] = {0};
				for (int i = 0; i < n; i++) {
					const double *S = c->l[l].S + (((size_t)b * NH + h) * T + i) * T;
					const double *P = c->l[l].P + (((size_t)b * NH + h) * T + i) * T;
					const double *qkv = c->l[l].qkv;
					double dot = 0;
					for (int j = 0; j < T; j++) {
						double s = 0;
						for (int q = 0; q < hd; q++)
							s += datt[l][((size_t)b * T + i) * d + h * hd + q] *
							     qkv[((size_t)b * T + j) * 3 * d + 2 * d + h * hd + q];
						dp[j] = s;
						dot += P[j] * s;
					}
					for (int j = 0; j < T; j++)
						g[j] = P[j] * (dp[j] - dot);
					for (int j = 0; j < n; j++)
						ks[j] = (struct keyed){S[j], j};
					qsort(ks, (size_t)n, sizeof *ks, cmp_keyed);
					double ent = 0, top = 0, g2 = 0, g2k = 0, mu = 0, var = 0, vtot = 0;
					for (int j = 0; j < n; j++) {
						ent -= P[j] * log(P[j] > 1e-12 ? P[j] : 1e-12);
						vtot += P[j];
						mu += S[j] / n;
						g2 += g[j] * g[j];
					}
					for (int q = 0; q < k; q++) {
						top += P[ks[q].j];
						g2k += g[ks[q].j] * g[ks[q].j];
					}
					for (int j = 0; j < n; j++)
						var += (S[j] - mu) * (S[j] - mu) / n;
					rsum[0] += ent;
					rcnt[0]++;
					if (k < n && var > 0) {
						rsum[1] += (ks[k - 1].s - ks[k].s) / sqrt(var);
						rcnt[1]++;
					}
					rsum[2] += vtot - top;
					rcnt[2]++;
					if (g2 > 0) {
						rsum[3] += g2k / g2;
						rcnt[3]++;
					}
				}
				for (int f = 0; f < 4; f++)
					if (rcnt[f]) {
						tot[f] += rsum[f] / rcnt[f];
						cnt[f]++;
					}
			}
	for (int f = 0; f < 4; f++)
		out[f] = cnt[f] ? tot[f] / cnt[f] : NAN;
	free(g);
	free(dp);
	free(ks);
}

static void model_case(const char *label, int text, const char *arch, enum sb_mask_mode mask)
{
	struct sb_encoder_cfg cf = {0};
	cf.modality = text ? SB_TEXT : SB_IMAGE;
	cf.channels = 3, cf.height = 9, cf.width = 10, cf.patch = 3; /* T = 10 */
	cf.seq_len = 11, cf.vocab = 23;                             /* T = 12 */
	cf.classes = 4, cf.layers = 2, cf.d = 32, cf.heads = 2;
	cf.dropout = 0.1f;
	struct sb_err e = {0};
	sb_norm_parse("topk_softmax_025", 1.5, &cf.norm, &e);
	cf.norm.mask = mask;
	sb_encoder_arch_parse(arch, &cf.arch);
	int n = 40, B = 20;
	uint8_t *img = malloc((size_t)n * 270);
	int32_t *tok = malloc((size_t)n * 11 * sizeof *tok), *len = malloc((size_t)n * sizeof *len),
	        *lab = malloc((size_t)n * sizeof *lab);
	for (int i = 0; i < n * 270; i++)
		img[i] = (uint8_t)(urand() * 256);
	for (int i = 0; i < n; i++) {
		len[i] = i % 9 == 4 ? 0 : (int)(urand() * 12);
		lab[i] = (int)(urand() * 4);
		for (int t = 0; t < 11; t++)
			tok[i * 11 + t] = t < len[i] ? 1 + (int)(urand() * 22) : 0;
	}
	struct sb_encoder_data data = {n, img, tok, len, lab, 0};
	struct sb_dataset ds;
	memset(&ds, 0, sizeof ds);
	ds.modality = cf.modality;
	ds.len = text ? len : NULL;
	struct sb_backend *be = NULL;
	struct sb_encoder *m = NULL;
	if (sb_backend_cpu_open(2, &be, &e) || sb_encoder_new(&cf, be, 32, &m, &e)) {
		SB_CHECK(0, "%s: model: %s", label, e.msg);
		return;
	}
	sb_encoder_init(m, 11, &e);
	for (int t = 0; t < m->ntensors; t++) /* off the symmetric initial values */
		for (size_t q = 0; q < m->pinfo[t].numel; q++)
			m->params[m->pinfo[t].offset + q] += (float)(0.3 * (urand() - 0.5));
	uint32_t idx[20];
	for (int i = 0; i < B; i++)
		idx[i] = (uint32_t)((i * 7 + 3) % n);
	struct sb_probe_feat pf;
	int rc = sb_probe_features(m, &data, &ds, idx, B, &pf, &e);
	SB_CHECK(rc == 0 && pf.n == B, "%s: probe ran on %d examples (rc %d, n %lld%s%s)", label, B, rc,
	         (long long)pf.n, rc ? ": " : "", rc ? e.msg : "");
	SB_CHECK(m->cfg.norm.kind == SB_NORM_TOPK, "%s: the model's normaliser is top-k again after the probe",
	         label);
	/* the reference: the same parameters in double, softmax, no dropout */
	struct sb_norm dense = m->cfg.norm;
	dense.kind = SB_NORM_SOFTMAX;
	sb_encoder_set_norm(m, &dense, &e);
	double *pd = ref_alloc(m->pstride);
	for (size_t i = 0; i < m->pstride; i++)
		pd[i] = m->params[i];
	double *dl[SB_ENCODER_MAX_LAYERS];
	for (int l = 0; l < cf.layers; l++)
		dl[l] = ref_alloc((size_t)B * m->T * cf.d);
	struct ref_input in = {B, img, tok, len, lab, idx, 0, 0, 0, dl};
	struct ref_cache cache;
	int rrc = 0;
	ref_forward(m, pd, &in, &cache, &rrc);
	double *gd = ref_alloc(m->pstride);
	ref_backward(m, pd, &in, &cache, gd);
	double want[4], got[4] = {pf.dense_entropy, pf.boundary_margin, pf.tail_mass, pf.gradient_topk_share};
	ref_features(m, &cache, dl, cache.nvalid, B, want);
	char nm[200];
	snprintf(nm, sizeof nm,
	         "%s: entropy %.6f, margin %.6f, tail %.6f, gradient share %.6f vs the double reference", label,
	         got[0], got[1], got[2], got[3]);
	sb_check_close(nm, got, want, 4, 2e-6, 2e-6);
	SB_CHECK(want[3] > 0.05 && want[3] < 0.999 && want[2] > 0.01,
	         "%s: the reference features are not degenerate (share %.4f, tail %.4f)", label, want[3], want[2]);
	ref_cache_free(&cache);
	for (int l = 0; l < cf.layers; l++)
		free(dl[l]);
	free(pd);
	free(gd);
	sb_encoder_free(m);
	sb_backend_close(be);
	free(img);
	free(tok);
	free(len);
	free(lab);
}

int main(void)
{
	check_rows();
	model_case("images, plain", 0, "plain", SB_MASK_MARGIN);
	model_case("images, local_hybrid", 0, "local_hybrid", SB_MASK_MARGIN);
	model_case("text, margin mask, plain", 1, "plain", SB_MASK_MARGIN);
	model_case("text, exclusion mask, local_hybrid", 1, "local_hybrid", SB_MASK_EXCLUDE);
	return sb_test_done();
}
