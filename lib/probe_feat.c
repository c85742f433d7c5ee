/* probe_feat.c — PROTOCOL A8 M1's probe features (see probe_feat.h and
 * docs/sb-eval.md). The model pass is the engine's own forward and backward
 * (sb_encoder_forward_backward, one tile at a time, no dropout) with softmax in
 * place of the checkpoint's normaliser; the gradient of the scores is formed here,
 * in double, from the saved attention output gradient: dP = dout V^T per head,
 * dS = P (dP - sum_t P_t dP_t) (softmax's backward; the fill of masked keys is
 * treated as a constant). */
#include "probe_feat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_norm.h"

static int key_desc(const float *s, int a, int b)
{
	/* a ranks before b: larger score, ties to the lower index (the normaliser's rule) */
	return s[a] > s[b] || (s[a] == s[b] && a < b);
}

/* the k highest-ranked keys of s[0..n) into top[0..k) (selection by insertion; n <= T is small) */
static void top_keys(const float *s, int n, int k, int *top)
{
	int m = 0;
	for (int j = 0; j < n; j++) {
		int pos = m < k ? m : k;
		while (pos > 0 && key_desc(s, j, top[pos - 1]))
			pos--;
		if (pos >= k)
			continue;
		int end = m < k ? m : k - 1;
		for (int q = end; q > pos; q--)
			top[q] = top[q - 1];
		top[pos] = j;
		if (m < k)
			m++;
	}
}

void sb_probe_block(struct sb_probe_acc *acc, const float *S, const float *P, const double *G, int T, int nvalid)
{
	int n = nvalid < 1 ? 1 : nvalid > T ? T : nvalid;
	int k = (int)ceil(SB_PROBE_RATIO * n);
	if (k < 1)
		k = 1;
	int *top = malloc((size_t)(k + 1) * sizeof *top);
	char *in = calloc((size_t)n, 1);
	if (!top || !in) {
		free(top);
		free(in);
		return;
	}
	double sum[4] = {0};
	int64_t cnt[4] = {0};
	for (int i = 0; i < n; i++) {
		const float *s = S + (size_t)i * T, *p = P + (size_t)i * T;
		const double *g = G + (size_t)i * T;
		int kk = k < n ? k + 1 : k; /* the (k+1)-th key too, when there is one */
		top_keys(s, n, kk, top);
		memset(in, 0, (size_t)n);
		for (int q = 0; q < k; q++)
			in[top[q]] = 1;
		double ent = 0, tail = 0, g2 = 0, g2k = 0, mean = 0, var = 0;
		for (int j = 0; j < n; j++) {
			double pj = p[j], pc = pj > 1e-12 ? pj : 1e-12;
			ent -= pj * log(pc);
			if (!in[j])
				tail += pj;
			g2 += g[j] * g[j];
			if (in[j])
				g2k += g[j] * g[j];
			mean += s[j];
		}
		mean /= n;
		for (int j = 0; j < n; j++)
			var += ((double)s[j] - mean) * ((double)s[j] - mean);
		double sd = sqrt(var / n);
		sum[0] += ent;
		cnt[0]++;
		if (k < n && sd > 0) {
			sum[1] += ((double)s[top[k - 1]] - (double)s[top[k]]) / sd;
			cnt[1]++;
		}
		sum[2] += tail;
		cnt[2]++;
		if (g2 > 0) {
			sum[3] += g2k / g2;
			cnt[3]++;
		}
	}
	for (int f = 0; f < 4; f++)
		if (cnt[f]) {
			acc->sum[f] += sum[f] / (double)cnt[f];
			acc->cnt[f]++;
		}
	free(top);
	free(in);
}

void sb_probe_finish(const struct sb_probe_acc *acc, int64_t n, struct sb_probe_feat *out)
{
	double v[4];
	for (int f = 0; f < 4; f++)
		v[f] = acc->cnt[f] ? acc->sum[f] / (double)acc->cnt[f] : NAN;
	out->n = n;
	out->dense_entropy = v[0];
	out->boundary_margin = v[1];
	out->tail_mass = v[2];
	out->gradient_topk_share = v[3];
}

static void no_probe(struct sb_probe_feat *out)
{
	out->n = 0;
	out->dense_entropy = out->boundary_margin = out->tail_mass = out->gradient_topk_share = NAN;
}

int sb_probe_features(struct sb_encoder *m, const struct sb_encoder_data *data, const struct sb_dataset *ds,
                      const uint32_t *idx, int64_t n, struct sb_probe_feat *out, struct sb_err *err)
{
	no_probe(out);
	if (m->cfg.norm.kind == SB_NORM_ADAPTIVE)
		return 0; /* its parameter table has alphas: no softmax twin in this model */
	if (n > SB_PROBE_EXAMPLES)
		n = SB_PROBE_EXAMPLES;
	if (n < 1)
		return 0;
	const struct sb_norm saved = m->cfg.norm;
	struct sb_norm dense = saved;
	dense.kind = SB_NORM_SOFTMAX;
	int T = m->T, d = m->cfg.d, NH = m->cfg.heads, hd = d / NH, L = m->cfg.layers;
	int chunk = m->tile < m->max_batch ? m->tile : m->max_batch;
	size_t tt = (size_t)chunk * NH * T * T;
	float *S = malloc(tt * sizeof *S), *P = malloc(tt * sizeof *P);
	float *qkv = malloc((size_t)chunk * T * 3 * d * sizeof *qkv), *dout = malloc((size_t)chunk * T * d * sizeof *dout);
	double *G = malloc((size_t)T * T * sizeof *G), *dP = malloc((size_t)T * sizeof *dP);
	struct sb_probe_acc acc;
	memset(&acc, 0, sizeof acc);
	int rc = 0;
	if (!S || !P || !qkv || !dout || !G || !dP) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory (probe)");
		goto out;
	}
	if ((rc = sb_encoder_set_norm(m, &dense, err)) || (rc = sb_encoder_keep_grads(m, 1, err)))
		goto out;
	struct sb_step_opts so;
	sb_step_opts_default(&so);
	so.dropout = 0;
	for (int64_t b0 = 0; b0 < n && !rc; b0 += chunk) {
		int B = (int)(n - b0 < chunk ? n - b0 : chunk);
		struct sb_step_result sr;
		if ((rc = sb_encoder_forward_backward(m, data, idx + b0, B, &so, &sr, err)))
			break;
		for (int l = 0; l < L && !rc; l++) {
			int r1 = sb_encoder_saved_attention(m, l, B, S, P, err);
			int r2 = r1 < 0 ? r1 : sb_encoder_saved_grads(m, l, B, qkv, dout, err);
			if (r2 < 0) {
				rc = -r2;
				break;
			}
			for (int b = 0; b < B; b++) {
				int nv = T;
				if (ds->modality == SB_TEXT && ds->len)
					nv = 1 + ds->len[idx[b0 + b]];
				if (nv > T)
					nv = T;
				for (int h = 0; h < NH; h++) {
					const float *Pb = P + ((size_t)b * NH + h) * T * T;
					for (int i = 0; i < T; i++) {
						const float *go = dout + ((size_t)b * T + i) * d + h * hd;
						double dot = 0;
						for (int j = 0; j < T; j++) {
							const float *v = qkv + ((size_t)b * T + j) * 3 * d + 2 * d + h * hd;
							double s = 0;
							for (int c = 0; c < hd; c++)
								s += (double)go[c] * v[c];
							dP[j] = s;
							dot += (double)Pb[(size_t)i * T + j] * s;
						}
						for (int j = 0; j < T; j++)
							G[(size_t)i * T + j] = Pb[(size_t)i * T + j] * (dP[j] - dot);
					}
					sb_probe_block(&acc, S + ((size_t)b * NH + h) * T * T, Pb, G, T, nv);
				}
			}
		}
	}
	if (!rc)
		sb_probe_finish(&acc, n, out);
out:;
	struct sb_err e2 = {0};
	sb_encoder_keep_grads(m, 0, &e2);
	sb_encoder_set_norm(m, &saved, &e2);
	free(S);
	free(P);
	free(qkv);
	free(dout);
	free(G);
	free(dP);
	return rc;
}

void sb_probe_write(struct sb_jw *w, const struct sb_probe_feat *pf)
{
	if (pf->n < 1)
		return; /* not probed: the fields are absent */
	sb_jw_kint(w, "probe_examples", pf->n);
	sb_jw_kf64(w, "probe_dense_entropy", pf->dense_entropy);
	sb_jw_kf64(w, "probe_boundary_margin", pf->boundary_margin);
	sb_jw_kf64(w, "probe_tail_mass", pf->tail_mass);
	sb_jw_kf64(w, "probe_gradient_topk_share", pf->gradient_topk_share);
}
