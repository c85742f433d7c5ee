/* ref_lm.h — an independent double-precision reference of the LM track's
 * decoder (plain loops, written from the definitions in lib/lm_model.h, no
 * shared code with the backend): layer forwards and the whole model's loss.
 * Used by test_lm_grad (finite differences) and test_lm_model. */
#ifndef SB_REF_LM_H
#define SB_REF_LM_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* out[M, N] = inp[M, K] w[N, K]^T + b */
static void ref_matmul(double *out, const double *inp, const double *w, const double *b, int M, int K, int N)
{
	for (int i = 0; i < M; i++)
		for (int n = 0; n < N; n++) {
			double s = b ? b[n] : 0;
			for (int k = 0; k < K; k++)
				s += inp[(size_t)i * K + k] * w[(size_t)n * K + k];
			out[(size_t)i * N + n] = s;
		}
}

static void ref_norm(double *out, const double *x, const double *w, const double *b, int M, int d, double eps, int rms)
{
	for (int i = 0; i < M; i++) {
		const double *xi = x + (size_t)i * d;
		double mu = 0, q = 0;
		if (!rms) {
			for (int c = 0; c < d; c++)
				mu += xi[c];
			mu /= d;
		}
		for (int c = 0; c < d; c++)
			q += (xi[c] - mu) * (xi[c] - mu);
		double rs = 1 / sqrt(q / d + eps);
		for (int c = 0; c < d; c++)
			out[(size_t)i * d + c] = (xi[c] - mu) * rs * w[c] + (b ? b[c] : 0);
	}
}

static double ref_gelu1(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double ref_silu(double x) { return x / (1 + exp(-x)); }
/* torch's gelu(approximate="tanh") (GeGLU's) */
static double ref_gelu_tanh(double x)
{
	return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

/* RoPE with the frequencies freq[hd / 2] */
/* RoPE on the first rd dimensions of each head (rd = hd: all), pairs (i, i + rd/2) */
static void ref_rope_part(double *x, int T, int nh, int hd, int rd, const double *freq)
{
	int half = rd / 2;
	for (int t = 0; t < T; t++)
		for (int h = 0; h < nh; h++)
			for (int i = 0; i < half; i++) {
				double ang = t * freq[i];
				double *p = x + ((size_t)t * nh + h) * hd;
				double a = p[i], b = p[i + half];
				p[i] = a * cos(ang) - b * sin(ang);
				p[i + half] = b * cos(ang) + a * sin(ang);
			}
}

static inline void ref_rope_freq(double *x, int T, int nh, int hd, const double *freq)
{
	ref_rope_part(x, T, nh, hd, hd, freq);
}

static inline void ref_rope(double *x, int T, int nh, int hd, double theta)
{
	double freq[128];
	for (int i = 0; i < hd / 2 && i < 128; i++)
		freq[i] = pow(theta, -2.0 * i / hd);
	ref_rope_freq(x, T, nh, hd, freq);
}

/* causal softmax attention, GQA; window > 0: query t attends to keys t - window + 1 .. t
 * only (an S layer) */
static void ref_attn_w(double *out, const double *q, const double *k, const double *v, int T, int NH, int NKV, int hd,
		       int window, double softcap)
{
	int g = NH / NKV;
	double *s = malloc((size_t)T * sizeof *s);
	for (int h = 0; h < NH; h++)
		for (int t = 0; t < T; t++) {
			double mx = -INFINITY;
			int lo = window > 0 && t - window + 1 > 0 ? t - window + 1 : 0;
			for (int j = 0; j < lo; j++)
				s[j] = -INFINITY; /* exp: 0 */
			for (int j = lo; j <= t; j++) {
				double a = 0;
				for (int e = 0; e < hd; e++)
					a += q[((size_t)t * NH + h) * hd + e] * k[((size_t)j * NKV + h / g) * hd + e];
				s[j] = a / sqrt((double)hd);
				if (softcap > 0) /* Gemma 2's soft-capping */
					s[j] = softcap * tanh(s[j] / softcap);
				mx = s[j] > mx ? s[j] : mx;
			}
			double z = 0;
			for (int j = 0; j <= t; j++)
				z += (s[j] = exp(s[j] - mx));
			for (int e = 0; e < hd; e++) {
				double o = 0;
				for (int j = 0; j <= t; j++)
					o += s[j] / z * v[((size_t)j * NKV + h / g) * hd + e];
				out[((size_t)t * NH + h) * hd + e] = o;
			}
		}
	free(s);
}

static inline void ref_attn(double *out, const double *q, const double *k, const double *v, int T, int NH, int NKV, int hd)
{
	ref_attn_w(out, q, k, v, T, NH, NKV, hd, 0, 0);
}

/* gated short conv: bch [T, 3d] = (b | c | h), w [d, K] */
static void ref_conv(double *y, const double *bch, const double *w, const double *bias, int T, int d, int K)
{
	for (int t = 0; t < T; t++)
		for (int c = 0; c < d; c++) {
			double z = bias ? bias[c] : 0;
			for (int i = 0; i < K; i++) {
				int s = t - K + 1 + i;
				if (s >= 0)
					z += w[(size_t)c * K + i] * bch[(size_t)s * 3 * d + c] * bch[(size_t)s * 3 * d + 2 * d + c];
			}
			y[(size_t)t * d + c] = bch[(size_t)t * 3 * d + d + c] * z;
		}
}

/* plain depthwise conv: x [T, d], w [d, K] */
static void ref_dwconv(double *y, const double *x, const double *w, const double *bias, int T, int d, int K)
{
	for (int t = 0; t < T; t++)
		for (int c = 0; c < d; c++) {
			double z = bias ? bias[c] : 0;
			for (int i = 0; i < K; i++) {
				int s = t - K + 1 + i;
				if (s >= 0)
					z += w[(size_t)c * K + i] * x[(size_t)s * d + c];
			}
			y[(size_t)t * d + c] = z;
		}
}

static double ref_phi(double x) { return x > 0 ? x + 1 : exp(x); }

/* causal linear attention, heads of hd over width NH*hd */
static void ref_linattn(double *out, const double *q, const double *k, const double *v, int T, int NH, int hd)
{
	int ld = NH * hd;
	for (int h = 0; h < NH; h++)
		for (int t = 0; t < T; t++) {
			double den = 0;
			double *o = out + (size_t)t * ld + (size_t)h * hd;
			for (int e = 0; e < hd; e++)
				o[e] = 0;
			for (int j = 0; j <= t; j++) {
				double a = 0;
				for (int e = 0; e < hd; e++)
					a += ref_phi(q[(size_t)t * ld + h * hd + e]) * ref_phi(k[(size_t)j * ld + h * hd + e]);
				den += a;
				for (int e = 0; e < hd; e++)
					o[e] += a * v[(size_t)j * ld + h * hd + e];
			}
			for (int e = 0; e < hd; e++)
				o[e] /= den + 1e-6;
		}
}

/* ---- the whole model ----
 * Parameters are addressed by the same table as the library (offsets into a double
 * array); the reference receives the pointers, so only the layout is shared. */
struct ref_layer {
	char kind;
	const double *ln1_w, *ln1_b, *ln2_w, *ln2_b, *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *o_w, *o_b;
	const double *qn_w, *kn_w; /* qk_norm: each head's RMSNorm before RoPE */
	const double *ln3_w, *ln4_w; /* sandwich: RMSNorms of the mixer's and the MLP's outputs */
	const double *in_w, *in_b, *cw, *cb, *out_w, *out_b, *gate_w, *gate_b, *up_w, *up_b, *down_w, *down_b;
};
struct ref_model {
	int V, d, L, NH, NKV, hd, LH, K, F, swiglu, rms, pos, tied, conv_gate;
	double eps, theta;
	/* RoPE's frequencies: the model's own table (sb_lm_rope_freqs; with a scaling, checked
	 * against transformers' logits by test_lm_import), and YaRN's factor on the scores */
	double freq[128], qs;
	int rd; /* rotated dimensions of a head (a partial rotary factor's) */
	int qk_full; /* q/k norms over all heads of a position (OLMo), not per head */
	char rope_layers[130]; /* '0' at a NoPE layer; "" = RoPE on every layer */
	/* S layers: the window, their own frequencies (rope_local_theta, unscaled) and factor */
	int window;
	double freq_local[128], qs_local;
	/* Granite's multipliers (1: none; attn_scale 0: 1 / sqrt(head_dim)), as transformers'
	 * GraniteForCausalLM applies them */
	double emb_mult, resid_mult, attn_scale, logit_div;
	double attn_softcap, final_softcap; /* Gemma 2's (0: none) */
	const double *embed, *posw, *lnf_w, *lnf_b, *head;
	struct ref_layer layer[32];
};

/* mean cross-entropy of next-byte prediction over tok[0..T] (T+1 bytes); logits_out
 * (may be NULL) receives [T][V] */
static double ref_model_loss(const struct ref_model *r, const unsigned char *tok, int T, double *logits_out)
{
	int d = r->d, F = r->F;
	size_t Td = (size_t)T * d;
	double *x = calloc(Td, sizeof *x), *n = calloc(Td, sizeof *n), *y = calloc(Td, sizeof *y);
	int qd = r->NH * r->hd, kvd = r->NKV * r->hd;
	size_t wide = (size_t)T * (3 * d > qd ? 3 * d : qd) + (size_t)T * 2 * (F ? F : 1) + 16;
	double *q = calloc(wide, sizeof *q), *k = calloc(wide, sizeof *k), *v = calloc(wide, sizeof *v);
	double *att = calloc(wide, sizeof *att), *h = calloc(wide, sizeof *h);
	for (int t = 0; t < T; t++)
		for (int c = 0; c < d; c++)
			x[(size_t)t * d + c] = r->emb_mult * r->embed[(size_t)tok[t] * d + c] +
					       (r->pos == 1 ? r->posw[(size_t)t * d + c] : 0);
	for (int l = 0; l < r->L; l++) {
		const struct ref_layer *y_ = &r->layer[l];
		if (y_->ln1_w)
			ref_norm(n, x, y_->ln1_w, y_->ln1_b, T, d, r->eps, r->rms);
		else /* no pre-norm (OLMo): the mixer reads x */
			memcpy(n, x, Td * sizeof *n);
		if (y_->kind == 'A' || y_->kind == 'S') {
			int loc = y_->kind == 'S';
			ref_matmul(q, n, y_->q_w, y_->q_b, T, d, qd);
			ref_matmul(k, n, y_->k_w, y_->k_b, T, d, kvd);
			ref_matmul(v, n, y_->v_w, y_->v_b, T, d, kvd);
			if (y_->qn_w && r->qk_full) { /* over all heads of a position (OLMo) */
				ref_norm(q, q, y_->qn_w, NULL, T, qd, r->eps, 1);
				ref_norm(k, k, y_->kn_w, NULL, T, kvd, r->eps, 1);
			} else if (y_->qn_w) {
				ref_norm(q, q, y_->qn_w, NULL, T * r->NH, r->hd, r->eps, 1);
				ref_norm(k, k, y_->kn_w, NULL, T * r->NKV, r->hd, r->eps, 1);
			}
			if (r->pos == 2 && (!r->rope_layers[0] || r->rope_layers[l] == '1')) {
				ref_rope_part(q, T, r->NH, r->hd, r->rd, loc ? r->freq_local : r->freq);
				ref_rope_part(k, T, r->NKV, r->hd, r->rd, loc ? r->freq_local : r->freq);
			}
			/* ref_attn scores q.k / sqrt(hd): another scale is put on q */
			int roped = r->pos == 2 && (!r->rope_layers[0] || r->rope_layers[l] == '1');
			double qs = (!roped ? 1.0 : loc ? r->qs_local : r->qs) * /* YaRN's factor rides on RoPE */
				    (r->attn_scale != 0 ? r->attn_scale * sqrt((double)r->hd) : 1.0);
			for (size_t i = 0; qs != 1.0 && i < (size_t)T * qd; i++)
				q[i] *= qs;
			ref_attn_w(att, q, k, v, T, r->NH, r->NKV, r->hd, loc ? r->window : 0, r->attn_softcap);
			ref_matmul(y, att, y_->o_w, y_->o_b, T, qd, d);
		} else if (y_->kind == 'L') {
			ref_matmul(q, n, y_->q_w, y_->q_b, T, d, d);
			ref_matmul(k, n, y_->k_w, y_->k_b, T, d, d);
			ref_matmul(v, n, y_->v_w, y_->v_b, T, d, d);
			ref_linattn(att, q, k, v, T, r->LH, d / r->LH);
			ref_matmul(y, att, y_->o_w, y_->o_b, T, d, d);
		} else {
			if (r->conv_gate) {
				ref_matmul(q, n, y_->in_w, y_->in_b, T, d, 3 * d);
				ref_conv(att, q, y_->cw, y_->cb, T, d, r->K);
			} else {
				ref_matmul(q, n, y_->in_w, y_->in_b, T, d, d);
				ref_dwconv(att, q, y_->cw, y_->cb, T, d, r->K);
			}
			ref_matmul(y, att, y_->out_w, y_->out_b, T, d, d);
		}
		if (y_->ln3_w)
			ref_norm(y, y, y_->ln3_w, NULL, T, d, r->eps, 1);
		for (size_t i = 0; i < Td; i++)
			x[i] += r->resid_mult * y[i];
		if (F) {
			if (y_->ln2_w)
				ref_norm(n, x, y_->ln2_w, y_->ln2_b, T, d, r->eps, r->rms);
			else
				memcpy(n, x, Td * sizeof *n);
			if (r->swiglu) {
				ref_matmul(h, n, y_->gate_w, y_->gate_b, T, d, F);
				ref_matmul(h + (size_t)T * F, n, y_->up_w, y_->up_b, T, d, F);
				for (size_t i = 0; i < (size_t)T * F; i++)
					att[i] = (r->swiglu == 2 ? ref_gelu_tanh(h[i]) : ref_silu(h[i])) * h[(size_t)T * F + i];
			} else {
				ref_matmul(h, n, y_->up_w, y_->up_b, T, d, F);
				for (size_t i = 0; i < (size_t)T * F; i++)
					att[i] = ref_gelu1(h[i]);
			}
			ref_matmul(y, att, y_->down_w, y_->down_b, T, F, d);
			if (y_->ln4_w)
				ref_norm(y, y, y_->ln4_w, NULL, T, d, r->eps, 1);
			for (size_t i = 0; i < Td; i++)
				x[i] += r->resid_mult * y[i];
		}
	}
	ref_norm(n, x, r->lnf_w, r->lnf_b, T, d, r->eps, r->rms);
	double *lg = calloc((size_t)T * r->V, sizeof *lg), loss = 0;
	ref_matmul(lg, n, r->head, NULL, T, d, r->V);
	for (size_t i = 0; i < (size_t)T * r->V; i++) {
		lg[i] /= r->logit_div;
		if (r->final_softcap > 0)
			lg[i] = r->final_softcap * tanh(lg[i] / r->final_softcap);
	}
	for (int t = 0; t < T; t++) {
		const double *l = lg + (size_t)t * r->V;
		double mx = l[0], s = 0;
		for (int c = 1; c < r->V; c++)
			mx = l[c] > mx ? l[c] : mx;
		for (int c = 0; c < r->V; c++)
			s += exp(l[c] - mx);
		loss += log(s) + mx - l[tok[t + 1]];
	}
	if (logits_out)
		memcpy(logits_out, lg, (size_t)T * r->V * sizeof *lg);
	free(lg);
	free(x);
	free(n);
	free(y);
	free(q);
	free(k);
	free(v);
	free(att);
	free(h);
	return loss / T;
}

#ifdef SB_LM_MODEL_H
/* The reference's view of a library model's parameters (converted to double in P,
 * laid out by the library's table): only names and offsets are shared. */
static const double *ref_dp(const struct sb_lm_model *m, const double *base, const char *name)
{
	for (int i = 0; i < m->n_params; i++)
		if (strcmp(m->params[i].name, name) == 0)
			return base + m->params[i].offset;
	return NULL;
}

static void ref_from_model(struct ref_model *r, const struct sb_lm_model *m, const double *P)
{
	const struct sb_lm_cfg *c = &m->cfg;
	memset(r, 0, sizeof *r);
	r->V = c->vocab;
	r->d = c->d;
	r->L = c->n_layer;
	r->NH = c->heads;
	r->NKV = c->kv_heads;
	r->hd = c->head_dim;
	r->LH = c->lin_heads;
	r->K = c->conv_k;
	r->F = c->ffn;
	r->swiglu = c->swiglu;
	r->rms = c->rmsnorm;
	r->pos = c->pos;
	r->tied = c->tied;
	r->conv_gate = c->conv_gate;
	r->eps = c->norm_eps;
	r->theta = c->rope_theta;
	sb_lm_rope_freqs(c, r->freq); /* head_dim <= 256 here */
	r->qs = c->rope_scaling == 3 ? (double)c->rope_attn * c->rope_attn : 1.0;
	r->rd = c->rope_dim ? c->rope_dim : c->head_dim;
	r->qk_full = c->qk_norm == 2;
	snprintf(r->rope_layers, sizeof r->rope_layers, "%s", c->rope_layers);
	r->window = c->window;
	struct sb_lm_cfg lc = *c; /* S layers: rope_local_theta unscaled, else the A layers' */
	if (lc.rope_local_theta != 0.0f) {
		lc.rope_theta = lc.rope_local_theta;
		lc.rope_scaling = 0;
	}
	sb_lm_rope_freqs(&lc, r->freq_local);
	r->qs_local = lc.rope_scaling == 3 ? r->qs : 1.0;
	r->emb_mult = c->emb_mult;
	r->resid_mult = c->resid_mult;
	r->attn_scale = c->attn_scale;
	r->logit_div = c->logit_div;
	r->attn_softcap = c->attn_softcap;
	r->final_softcap = c->final_softcap;
	r->embed = ref_dp(m, P, "model.embed_tokens.weight");
	r->posw = ref_dp(m, P, "model.embed_positions.weight");
	r->lnf_w = ref_dp(m, P, "model.norm.weight");
	r->lnf_b = ref_dp(m, P, "model.norm.bias");
	r->head = c->tied ? r->embed : ref_dp(m, P, "lm_head.weight");
	char nm[128];
	for (int l = 0; l < c->n_layer; l++) {
		struct ref_layer *y = &r->layer[l];
		y->kind = c->pattern[l];
#define G(f, s) (snprintf(nm, sizeof nm, "model.layers.%d.%s", l, s), y->f = ref_dp(m, P, nm))
		G(ln1_w, "input_layernorm.weight");
		G(ln1_b, "input_layernorm.bias");
		G(ln2_w, "post_attention_layernorm.weight");
		G(ln2_b, "post_attention_layernorm.bias");
		G(ln3_w, "post_mixer_layernorm.weight");
		G(ln4_w, "post_feedforward_layernorm.weight");
		const char *pre = y->kind == 'A' || y->kind == 'S' ? "self_attn" : "linear_attn";
		char s[96];
#define GA(f, s2) (snprintf(s, sizeof s, "%s.%s", pre, s2), G(f, s))
		GA(q_w, "q_proj.weight");
		GA(q_b, "q_proj.bias");
		GA(k_w, "k_proj.weight");
		GA(k_b, "k_proj.bias");
		GA(v_w, "v_proj.weight");
		GA(v_b, "v_proj.bias");
		GA(o_w, "o_proj.weight");
		GA(o_b, "o_proj.bias");
		GA(qn_w, "q_norm.weight");
		GA(kn_w, "k_norm.weight");
		G(in_w, "conv.in_proj.weight");
		G(in_b, "conv.in_proj.bias");
		G(cw, "conv.conv.weight");
		G(cb, "conv.conv.bias");
		G(out_w, "conv.out_proj.weight");
		G(out_b, "conv.out_proj.bias");
		G(gate_w, "mlp.gate_proj.weight");
		G(gate_b, "mlp.gate_proj.bias");
		G(up_w, "mlp.up_proj.weight");
		G(up_b, "mlp.up_proj.bias");
		G(down_w, "mlp.down_proj.weight");
		G(down_b, "mlp.down_proj.bias");
#undef GA
#undef G
	}
}

#endif

#endif
