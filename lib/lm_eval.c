/* lm_eval.c — fidelity, retrieval, budgets and efficiency of a trained LM run
 * under every mask (see lm_eval.h). */
#include "lm_eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "cli.h"
#include "hash.h"
#include "io.h"
#include "lm_data.h"
#include "lm_import.h"
#include "lm_model.h"
#include "lm_train.h"
#include "rng.h"
#include "stats.h"
#include "tokenizer.h"

void sb_lm_eval_defaults(struct sb_lm_eval_opts *o)
{
	memset(o, 0, sizeof *o);
	o->n_windows = 32;
	o->n_probes = 40;
	o->n_tasks = SB_LM_NTASKS;
	for (int i = 0; i < SB_LM_NTASKS; i++)
		o->tasks[i] = i;
	o->n_masks = sb_lm_mask_defaults(o->masks, SB_LM_EVAL_MAXMASK);
	o->bench_reps = 7;
	int ks[] = {8, 16, 32, 64, 128};
	o->n_budgets = 5;
	memcpy(o->budgets_k, ks, sizeof ks);
	o->boot_resamples = 10000;
}

int sb_lm_eval_set_masks(struct sb_lm_eval_opts *o, const char *list, struct sb_err *err)
{
	struct sb_lm_mask tmp[SB_LM_EVAL_MAXMASK - 1];
	int n;
	SB_TRY(sb_lm_mask_parse_list(list, tmp, SB_LM_EVAL_MAXMASK - 1, &n, err));
	if (n == 0)
		return SB_ERR(err, SB_EUSAGE, "masks '%s': no mask named (dense is always evaluated; name it, or "
		                              "the masks to compare with it)", list);
	/* dense first, always */
	o->n_masks = 0;
	sb_lm_mask_parse("dense", &o->masks[o->n_masks++], NULL);
	for (int i = 0; i < n; i++)
		if (tmp[i].kind != SB_LM_MASK_DENSE)
			o->masks[o->n_masks++] = tmp[i];
	return 0;
}

int sb_lm_eval_set_tasks(struct sb_lm_eval_opts *o, const char *list, struct sb_err *err)
{
	char *dup = strdup(list), *save = NULL;
	if (!dup)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = 0;
	o->n_tasks = 0;
	for (char *t = strtok_r(dup, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
		int k = sb_lm_task_parse(t);
		if (k < 0) {
			rc = SB_ERR(err, SB_EUSAGE, "unknown task '%s'", t);
			break;
		}
		/* records are keyed by the task: a task twice would count its probes twice */
		for (int i = 0; i < o->n_tasks && !rc; i++)
			if (o->tasks[i] == k)
				rc = SB_ERR(err, SB_EUSAGE, "task '%s' given twice in '%s'", t, list);
		if (!rc && o->n_tasks == SB_LM_NALLTASKS) /* (each task once: cannot happen) */
			rc = SB_ERR(err, SB_EUSAGE, "tasks '%s': more than %d tasks", list, SB_LM_NALLTASKS);
		if (!rc)
			o->tasks[o->n_tasks++] = k;
	}
	free(dup);
	if (!rc && o->n_tasks == 0) /* as an empty mask list (no probes at all: probes=0) */
		rc = SB_ERR(err, SB_EUSAGE, "tasks '%s': no task named (for no probes, set probes=0)", list);
	return rc;
}

int sb_lm_eval_set_budgets(struct sb_lm_eval_opts *o, const char *list, struct sb_err *err)
{
	int ks[8], n = 0;
	const char *p = list;
	for (;;) {
		char tok[32];
		long long v;
		size_t len = strcspn(p, ",");
		if (n == 8 || len == 0 || len >= sizeof tok)
			return SB_ERR(err, SB_EUSAGE, "budgets '%s': 1 to 8 numbers, comma-separated", list);
		snprintf(tok, sizeof tok, "%.*s", (int)len, p);
		SB_TRY(sb_parse_int("budgets", tok, 0, 1 << 20, &v, err));
		ks[n++] = (int)v;
		if (!p[len])
			break;
		p += len + 1;
	}
	memcpy(o->budgets_k, ks, sizeof ks[0] * (size_t)n);
	o->n_budgets = n;
	return 0;
}

int sb_lm_eval_set(struct sb_lm_eval_opts *o, const char *setting, struct sb_err *err)
{
	const char *eq = strchr(setting, '=');
	if (!eq || eq == setting)
		return SB_ERR(err, SB_EUSAGE, "evaluation setting '%s': expected KEY=VALUE", setting);
	char key[32];
	snprintf(key, sizeof key, "%.*s", (int)(eq - setting < 31 ? eq - setting : 31), setting);
	const char *val = eq + 1;
	long long v;
	if (!strcmp(key, "masks"))
		return sb_lm_eval_set_masks(o, val, err);
	if (!strcmp(key, "tasks"))
		return sb_lm_eval_set_tasks(o, val, err);
	if (!strcmp(key, "probes") || !strcmp(key, "windows")) {
		SB_TRY(sb_parse_int(key, val, 0, 100000, &v, err));
		*(key[0] == 'p' ? &o->n_probes : &o->n_windows) = (int)v;
		return 0;
	}
	if (!strcmp(key, "bench_reps")) {
		SB_TRY(sb_parse_int(key, val, 1, 10000, &v, err));
		o->bench_reps = (int)v;
		return 0;
	}
	if (!strcmp(key, "seed")) {
		SB_TRY(sb_parse_int(key, val, 0, 1ll << 62, &v, err));
		o->seed = (uint64_t)v;
		return 0;
	}
	if (!strcmp(key, "budgets"))
		return sb_lm_eval_set_budgets(o, val, err);
	return SB_ERR(err, SB_EUSAGE,
		      "unknown evaluation setting '%s' (masks, tasks, probes, windows, bench_reps, budgets, seed)", key);
}

int sb_lm_eval_check(const struct sb_lm_eval_opts *o, struct sb_err *err)
{
	/* one of the two alone is a legitimate evaluation (retrieval only, fidelity only);
	 * without both, no fidelity, no retrieval and no timings (they need a window) */
	if (o->n_windows == 0 && o->n_probes == 0)
		return SB_ERR(err, SB_EUSAGE, "windows 0 and probes 0: nothing to evaluate (fidelity and the timings "
		                              "need windows, retrieval needs probes)");
	return 0;
}

/* ---------------------------------------------------------------- metrics */

void sb_lm_fidelity_row(const float *ld, const float *lm, int V, double *kl, int *agree, double *corr)
{
	double mxd = ld[0], mxm = lm[0];
	int ad = sb_argmax(ld, V), am = sb_argmax(lm, V);
	for (int c = 1; c < V; c++) {
		if (ld[c] > mxd)
			mxd = ld[c];
		if (lm[c] > mxm)
			mxm = lm[c];
	}
	double sd = 0, sm = 0, md = 0, mm = 0;
	for (int c = 0; c < V; c++) {
		sd += exp(ld[c] - mxd);
		sm += exp(lm[c] - mxm);
		md += ld[c];
		mm += lm[c];
	}
	double lzd = log(sd) + mxd, lzm = log(sm) + mxm;
	md /= V;
	mm /= V;
	double k = 0, sxy = 0, sxx = 0, syy = 0;
	for (int c = 0; c < V; c++) {
		double lpd = ld[c] - lzd, lpm = lm[c] - lzm;
		k += exp(lpd) * (lpd - lpm);
		double x = ld[c] - md, y = lm[c] - mm;
		sxy += x * y;
		sxx += x * x;
		syy += y * y;
	}
	*kl = k > 0 ? k : 0;
	*agree = ad == am;
	*corr = sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : (sxx == syy ? 1.0 : 0.0);
}

static double nll_of(const float *l, int V, int target)
{
	double mx = l[0];
	for (int c = 1; c < V; c++)
		mx = l[c] > mx ? l[c] : mx;
	double s = 0;
	for (int c = 0; c < V; c++)
		s += exp(l[c] - mx);
	return log(s) + mx - l[target];
}

static int argmax_row(const float *l, int V) { return sb_argmax(l, V); }

/* ---------------------------------------------------------------- state */

/* A probe's turns as token ids (runs with a tokenizer): turn k's input is the tokens of
 * its prompt, preceded after the first turn by the newline that ended the previous answer
 * (one text, tokenized as the model reads it). */
struct tprobe {
	int32_t *ids[SB_LM_PROBE_MAXTURN];
	int n[SB_LM_PROBE_MAXTURN];
};

struct fid {
	double kl, top1, corr, nll, kl_t, top1_t, corr_t, nll_t;
	int n, nt;
};

struct ev {
	struct sb_backend *be;
	struct sb_lm_model *m;
	struct sb_lm_cell cell;
	const struct sb_lm_eval_opts *o;
	int T, V, L, tail;
	struct sb_lm_cache **cache; /* per worker */
	float **lbuf;               /* per worker [T][V] */
	int nw;
	int32_t *win;               /* [nw][T+1] token ids (bytes, or the tokenizer's) */
	int *win_corpus;
	size_t *win_start;
	float *dense;               /* [nw][T][V]; NULL when too large: each mask's task recomputes
				     * its window's dense logits into dbuf (the same bits) */
	float **dbuf;               /* per worker [T][V] when dense is NULL */
	struct fid *fid;            /* [nmask][nw] */
	struct sb_lm_attn_obs *obs_text; /* [nmask][nw][L] */
	int np, nt;
	struct sb_lm_probe *probe;  /* [nt][np] */
	uint8_t *correct;           /* [nmask][nt][np] */
	char (*gen)[64];            /* [nmask][nt][np] turn 0's output (beside turn 0's expected answer) */
	struct sb_lm_attn_obs *obs_probe; /* [nmask][nt][np][L] */
	struct sb_lm_corpus corp[8];
	int n_corp, hay;
	int phase;
	int done, total;
	struct sb_json *train_done; /* the run's train.done record */
	char train_status[32];      /* completed, failed..., incomplete (train.ndjson's end) */
	struct sb_tok *tok;         /* the run's tokenizer; NULL: bytes */
	struct tprobe *tprobe;      /* [nt][np] with a tokenizer: each turn's input as token ids */
};

#define DENSE_KEEP_BYTES (1024.0 * 1024 * 1024)

static uint64_t probe_mask_seed(uint64_t seed, int task, int idx)
{
	return sb_rng_word_at(seed, SB_RNG_MASK, ((uint64_t)task << 32) | (uint32_t)idx, 0) |
	       ((uint64_t)sb_rng_word_at(seed, SB_RNG_MASK, ((uint64_t)task << 32) | (uint32_t)idx, 1) << 32);
}

/* The random controls' draws of fidelity window w: they follow --seed (seed 0 gives the
 * window index, as before --seed reached them) */
static uint64_t window_mask_seed(uint64_t seed, int w)
{
	return (uint64_t)w ^ (seed * 0x9E3779B97F4A7C15ull);
}

static int fid_dense_task(struct sb_ctx *ctx, int worker, int w, void *arg, struct sb_err *err)
{
	struct ev *e = arg;
	struct sb_lm_cache *c = e->cache[worker];
	sb_lm_cache_reset(c, window_mask_seed(e->o->seed, w));
	struct sb_lm_mask dense;
	sb_lm_mask_parse("dense", &dense, NULL);
	struct sb_lm_attn_obs *obs = &e->obs_text[((size_t)0 * e->nw + w) * e->L];
	float *out = e->dense ? e->dense + (size_t)w * e->T * e->V : e->dbuf[worker];
	return sb_lm_forward_cached_ids(ctx, e->m, c, e->win + (size_t)w * (e->T + 1), e->T, &dense, out, 1, obs, err);
}

static int fid_mask_task(struct sb_ctx *ctx, int worker, int task, void *arg, struct sb_err *err)
{
	struct ev *e = arg;
	int mi = task / e->nw, w = task % e->nw;
	const int32_t *win = e->win + (size_t)w * (e->T + 1);
	const float *ld = e->dense ? e->dense + (size_t)w * e->T * e->V : e->dbuf[worker];
	float *lm = e->lbuf[worker];
	if (!e->dense) { /* this window's dense logits again (its observations were kept by the dense pass) */
		struct sb_lm_cache *c = e->cache[worker];
		sb_lm_cache_reset(c, window_mask_seed(e->o->seed, w));
		struct sb_lm_mask dense;
		sb_lm_mask_parse("dense", &dense, NULL);
		SB_TRY(sb_lm_forward_cached_ids(ctx, e->m, c, win, e->T, &dense, e->dbuf[worker], 1, NULL, err));
	}
	if (mi > 0) {
		struct sb_lm_cache *c = e->cache[worker];
		sb_lm_cache_reset(c, window_mask_seed(e->o->seed, w));
		struct sb_lm_attn_obs *obs = &e->obs_text[((size_t)mi * e->nw + w) * e->L];
		SB_TRY(sb_lm_forward_cached_ids(ctx, e->m, c, win, e->T, &e->o->masks[mi], lm, 1, obs, err));
	} else {
		lm = (float *)ld;
	}
	struct fid f = {0};
	for (int t = 0; t < e->T; t++) {
		double kl, corr;
		int ag;
		sb_lm_fidelity_row(ld + (size_t)t * e->V, lm + (size_t)t * e->V, e->V, &kl, &ag, &corr);
		double nll = nll_of(lm + (size_t)t * e->V, e->V, win[t + 1]);
		f.kl += kl;
		f.top1 += ag;
		f.corr += corr;
		f.nll += nll;
		f.n++;
		if (t >= e->tail) {
			f.kl_t += kl;
			f.top1_t += ag;
			f.corr_t += corr;
			f.nll_t += nll;
			f.nt++;
		}
	}
	e->fid[(size_t)mi * e->nw + w] = f;
	return 0;
}

/* The length of the UTF-8 sequence starting at s[0] (n bytes available), 0 if none. */
static size_t utf8_seq(const uint8_t *s, size_t n)
{
	size_t len;
	uint32_t cp;
	if (s[0] < 0x80)
		return s[0] != 0; /* NUL would end the C string */
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

size_t sb_lm_display_bytes(char *dst, size_t cap, const uint8_t *src, size_t n)
{
	size_t o = 0;
	if (!cap)
		return 0;
	for (size_t i = 0; i < n;) {
		size_t len = utf8_seq(src + i, n - i);
		size_t need = len ? len : 3;
		if (o + need + 1 > cap)
			break;
		if (len) {
			memcpy(dst + o, src + i, len);
			i += len;
		} else {
			memcpy(dst + o, "\xef\xbf\xbd", 3); /* U+FFFD */
			i++;
		}
		o += need;
	}
	dst[o] = 0;
	return o;
}

/* Turn k of a probe in bytes: feed its prompt (after the first turn, preceded by the
 * newline that ended the model's previous answer, as in the probe's text), then generate
 * at most alen bytes (the answer's length with its newline), feeding each generated byte
 * back, stopping at a newline. Positions never exceed the probe's length. */
static int turn_bytes(struct sb_ctx *ctx, struct ev *e, struct sb_lm_cache *c, const struct sb_lm_probe *p, int k,
		      const struct sb_lm_mask *mk, float *logit, struct sb_lm_attn_obs *obs, uint8_t *out, int cap,
		      int *n, int *stopped, struct sb_err *err)
{
	if (k > 0)
		SB_TRY(sb_lm_forward_cached(ctx, e->m, c, (const uint8_t *)"\n", 1, mk, NULL, 0, obs, err));
	int beg = p->prompt_beg[k], alen = p->answer_end[k] - p->answer_beg[k];
	SB_TRY(sb_lm_forward_cached(ctx, e->m, c, p->text + beg, p->answer_beg[k] - beg, mk, logit, 0, obs, err));
	for (int s = 0; s < alen && *n < cap; s++) {
		int b = argmax_row(logit, e->V);
		if (b == '\n') {
			*stopped = 1;
			break;
		}
		out[(*n)++] = (uint8_t)b;
		if (s + 1 < alen)
			SB_TRY(sb_lm_forward_cached(ctx, e->m, c, &out[*n - 1], 1, mk, logit, 0, obs, err));
	}
	return 0;
}

/* Turn k of a probe in tokens (a run with a tokenizer): feed the turn's ids (struct
 * tprobe), decode greedily; each generated token's bytes are appended to the answer until
 * a newline appears in them (the answer is what came before it), or the answer's length
 * in bytes is reached without one, or the cache is full. A turn that does not fit the
 * context generates nothing. */
static int turn_tokens(struct sb_ctx *ctx, struct ev *e, struct sb_lm_cache *c, const struct sb_lm_probe *p, int k,
		       const struct sb_lm_mask *mk, float *logit, struct sb_lm_attn_obs *obs, uint8_t *out, int cap,
		       int *n, int *stopped, struct sb_err *err)
{
	const struct tprobe *tp = &e->tprobe[(size_t)(p - e->probe)];
	if (sb_lm_cache_pos(c) + tp->n[k] > e->T)
		return 0;
	SB_TRY(sb_lm_forward_cached_ids(ctx, e->m, c, tp->ids[k], tp->n[k], mk, logit, 0, obs, err));
	int alen = p->answer_end[k] - p->answer_beg[k];
	for (int s = 0; s < alen && *n < alen; s++) {
		int32_t id = argmax_row(logit, e->V);
		char b[256];
		int nb = sb_tok_token_bytes(e->tok, id, b, sizeof b);
		if (nb < 0 || nb > (int)sizeof b)
			break; /* an id the tokenizer does not have (the model's vocabulary is padded) */
		for (int j = 0; j < nb && !*stopped; j++) {
			if (b[j] == '\n')
				*stopped = 1;
			else if (*n < cap)
				out[(*n)++] = (uint8_t)b[j];
		}
		if (*stopped || *n >= alen || s + 1 >= alen || sb_lm_cache_pos(c) >= e->T)
			break;
		SB_TRY(sb_lm_forward_cached_ids(ctx, e->m, c, &id, 1, mk, logit, 0, obs, err));
	}
	return 0;
}

/* Greedy decoding of one probe under one mask, turn by turn (in bytes, or in the run's
 * tokens); the probe is right when every turn's answer matches. */
static int run_probe(struct sb_ctx *ctx, struct ev *e, int worker, int mi, int ti, int pi, struct sb_err *err)
{
	const struct sb_lm_probe *p = &e->probe[(size_t)ti * e->np + pi];
	struct sb_lm_cache *c = e->cache[worker];
	float *logit = e->lbuf[worker];
	size_t at = ((size_t)mi * e->nt + ti) * e->np + pi;
	struct sb_lm_attn_obs *obs = &e->obs_probe[at * e->L];
	sb_lm_cache_reset(c, probe_mask_seed(e->o->seed, p->task, (int)p->index));
	const struct sb_lm_mask *mk = &e->o->masks[mi];
	int ok = 1;
	char *gen = e->gen[at];
	gen[0] = 0;
	for (int k = 0; k < p->n_turns; k++) {
		uint8_t out[64];
		int n = 0, stopped = 0;
		SB_TRY((e->tok ? turn_tokens : turn_bytes)(ctx, e, c, p, k, mk, logit, obs, out, (int)sizeof out, &n,
							   &stopped, err));
		int good = stopped && sb_lm_probe_match(p, k, out, n);
		if (k == 0) { /* the record's expected is turn 0's answer: output is turn 0's too */
			size_t len = sb_lm_display_bytes(gen, 64 - 3, out, (size_t)n);
			if (!stopped)
				memcpy(gen + len, "...", 4);
		}
		if (!good)
			ok = 0;
	}
	e->correct[at] = (uint8_t)ok;
	return 0;
}

/* A probe for a run with a tokenizer: its text is made in bytes (the battery's generator)
 * at a length of about 0.85 T tokens (bytes_per_token of the haystack), tokenized turn by
 * turn; when the turns and the longest answers do not fit T tokens it is made again 15%
 * shorter (at most 12 times). */
static int make_token_probe(struct ev *e, int task, int pi, const struct sb_lm_corpus *hay, double bytes_per_token,
			    struct sb_lm_probe *p, struct tprobe *tp, struct sb_err *err)
{
	double len = 0.85 * e->T * bytes_per_token;
	for (int attempt = 0; attempt < 12; attempt++, len *= 0.85) {
		int L = len > (double)hay->n ? (int)hay->n : (int)len;
		if (L < sb_lm_task_min_len(task))
			L = sb_lm_task_min_len(task);
		SB_TRY(sb_lm_probe_make(task, L, hay->bytes, hay->n, e->o->seed, SB_RNG_SYNTH, (uint64_t)pi,
					sb_lm_probe_depth(pi, e->np), p, err));
		int total = 0, rc = 0;
		for (int k = 0; k < p->n_turns && !rc; k++) {
			/* turn k's text: the newline that ended answer k-1 (after the first turn), then the prompt */
			int beg = p->prompt_beg[k], plen = p->answer_beg[k] - beg;
			char *txt = malloc((size_t)plen + 2);
			size_t n = 0;
			free(tp->ids[k]);
			tp->ids[k] = NULL;
			if (!txt) {
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
				break;
			}
			txt[0] = '\n';
			memcpy(txt + 1, p->text + beg, (size_t)plen);
			/* whole characters (a haystack essay may be cut inside one); the sequence starts
			 * with the tokenizer's BOS, as HF encodes it */
			rc = sb_tok_encode_clean(e->tok, (const uint8_t *)(k ? txt : txt + 1), (size_t)plen + (k ? 1 : 0), !k,
						 &tp->ids[k], &n, err);
			free(txt);
			tp->n[k] = (int)n;
			total += (int)n + (p->answer_end[k] - p->answer_beg[k]);
		}
		if (rc) {
			sb_err_prefix(err, "probe %s #%d", sb_lm_task_name(task), pi);
			return rc;
		}
		if (total <= e->T)
			return 0;
		if (L <= sb_lm_task_min_len(task))
			break;
		sb_lm_probe_free(p);
	}
	return SB_ERR(err, SB_EUSAGE, "probe %s #%d does not fit a context of %d tokens (the task needs %d bytes)",
		      sb_lm_task_name(task), pi, e->T, sb_lm_task_min_len(task));
}

static int probe_task(struct sb_ctx *ctx, int worker, int task, void *arg, struct sb_err *err)
{
	struct ev *e = arg;
	int per = e->nt * e->np;
	int mi = task / per, r = task % per;
	return run_probe(ctx, e, worker, mi, r / e->np, r % e->np, err);
}

/* ---------------------------------------------------------------- efficiency */

/* A block-sparse attention kernel: for each (row, head) the listed blocks of B
 * keys (whole blocks, causally truncated) are scored, normalised and summed. */
static void blocksparse_attn(float *out, const float *q, const float *k, const float *v, int T, int NH, int NKV,
			     int hd, int B, const int32_t *blk, const int32_t *nblk, int maxb, float *sc)
{
	int g = NH / NKV, ldq = NH * hd, ldk = NKV * hd;
	float scale = 1.0f / sqrtf((float)hd);
	for (int t = 0; t < T; t++)
		for (int h = 0; h < NH; h++) {
			const float *qt = q + (size_t)t * ldq + (size_t)h * hd;
			const int32_t *bl = blk + ((size_t)t * NH + h) * maxb;
			int nb = nblk[(size_t)t * NH + h], ns = 0;
			float mx = -INFINITY;
			for (int i = 0; i < nb; i++) {
				int j1 = (bl[i] + 1) * B - 1 < t ? (bl[i] + 1) * B - 1 : t;
				for (int j = bl[i] * B; j <= j1; j++) {
					const float *kj = k + (size_t)j * ldk + (size_t)(h / g) * hd;
					float s = 0;
					for (int e = 0; e < hd; e++)
						s += qt[e] * kj[e];
					s *= scale;
					sc[ns++] = s;
					mx = s > mx ? s : mx;
				}
			}
			float z = 0;
			for (int i = 0; i < ns; i++)
				z += (sc[i] = expf(sc[i] - mx));
			float *ot = out + (size_t)t * ldq + (size_t)h * hd;
			memset(ot, 0, (size_t)hd * sizeof *ot);
			ns = 0;
			for (int i = 0; i < nb; i++) {
				int j1 = (bl[i] + 1) * B - 1 < t ? (bl[i] + 1) * B - 1 : t;
				for (int j = bl[i] * B; j <= j1; j++) {
					const float *vj = v + (size_t)j * ldk + (size_t)(h / g) * hd;
					float p = sc[ns++] / z;
					for (int e = 0; e < hd; e++)
						ot[e] += p * vj[e];
				}
			}
		}
}

#include <time.h>

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void time_stats(double *t, int n, double *mn, double *med)
{
	qsort(t, (size_t)n, sizeof *t, cmp_d);
	*mn = t[0];
	*med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static int bench(struct ev *e, struct sb_jw *w, struct sb_err *err)
{
	const struct sb_lm_cfg *cf = &e->m->cfg;
	int lA = -1;
	for (int l = 0; l < cf->n_layer && lA < 0; l++)
		if (cf->pattern[l] == 'A')
			lA = l;
	if (lA < 0 || e->nw < 1)
		return 0;
	const struct sb_backend_lm_ops *lo = sb_backend_lm(e->be);
	struct sb_ctx *ctx = sb_be_main(e->be);
	int T = e->T, NH = cf->heads, NKV = cf->kv_heads, hd = cf->head_dim, qd = NH * hd, reps = e->o->bench_reps;
	/* the model's soft-capping (Gemma 2), in the rows kernel and the dense GEMM baseline alike */
	float softcap = cf->attn_softcap;
	if (reps < 1)
		reps = 1;
	struct sb_lm_cache *c = e->cache[0];
	float *q = malloc((size_t)T * qd * sizeof *q), *out = malloc((size_t)T * qd * sizeof *out);
	float *P = malloc((size_t)NH * T * T * sizeof *P), *acc = calloc((size_t)NH * T, sizeof *acc);
	int32_t *sel = malloc((size_t)T * NH * T * sizeof *sel), *seln = malloc((size_t)T * NH * sizeof *seln);
	int32_t *blk = malloc((size_t)T * NH * (T / 16 + 2) * sizeof *blk), *nblk = malloc((size_t)T * NH * sizeof *nblk);
	float *sc = malloc((size_t)T * sizeof *sc);
	double *tm = malloc((size_t)reps * sizeof *tm), *tc = malloc((size_t)reps * sizeof *tc);
	int rc = 0;
	if (!q || !out || !P || !acc || !sel || !seln || !blk || !nblk || !sc || !tm || !tc) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory (bench)");
		goto out;
	}
	sb_lm_cache_reset(c, 0);
	sb_lm_cache_capture_q(c, lA, q);
	rc = sb_lm_forward_cached_ids(ctx, e->m, c, e->win, T, NULL, NULL, 0, NULL, err);
	sb_lm_cache_capture_q(c, -1, NULL);
	if (rc)
		goto out;
	const float *K, *V;
	sb_lm_cache_kv(c, lA, &K, &V);
	/* dense, training path (OpenBLAS) */
	for (int r = 0; r < reps; r++) {
		double t0 = sb_monotonic_seconds(), c0 = cpu_now();
		lo->attn_forward(ctx, out, P, q, K, V, 1, T, NH, NKV, hd, softcap);
		tm[r] = sb_monotonic_seconds() - t0;
		tc[r] = cpu_now() - c0;
	}
	double gemm_min, gemm_med, rows_min = 0, rows_med = 0, gemm_cmin, gemm_cmed, rows_cmin = 0;
	time_stats(tm, reps, &gemm_min, &gemm_med);
	time_stats(tc, reps, &gemm_cmin, &gemm_cmed);
	char nm[64];
	double causal_rows = (double)T * (T + 1) / 2 / T;
	sb_jw_record(w, "lm.efficiency", 1);
	sb_jw_kstr(w, "cell_id", e->cell.cell_id);
	sb_jw_kstr(w, "method", "dense");
	sb_jw_kstr(w, "kernel", "dense_gemm");
	sb_jw_kstr(w, "blas", sb_cpu_blas_core()); /* the baseline's speed is its kernel set's */
	sb_jw_kbool(w, "blas_generic", sb_cpu_blas_generic());
	sb_jw_kint(w, "layer", lA);
	sb_jw_kint(w, "T", T);
	sb_jw_kint(w, "reps", reps);
	sb_jw_kf64(w, "ms_min", gemm_min * 1e3);
	sb_jw_kf64(w, "ms_median", gemm_med * 1e3);
	sb_jw_kf64(w, "cpu_ms_min", gemm_cmin * 1e3);
	sb_jw_kf64(w, "cpu_ms_median", gemm_cmed * 1e3);
	sb_jw_kf64(w, "speedup_vs_dense_gemm", 1.0);
	sb_jw_kf64(w, "cpu_speedup_vs_dense_gemm", 1.0);
	sb_jw_kf64(w, "keys_scored_per_row", (double)T); /* a full square product */
	sb_jw_kf64(w, "keys_kept_per_row", causal_rows);
	sb_jw_obj_end(w);
	if ((rc = sb_jw_line(w, err)))
		goto out;
	for (int mi = 0; mi < e->o->n_masks; mi++) {
		const struct sb_lm_mask *mk = &e->o->masks[mi];
		struct sb_lm_attn_obs obs = {0};
		for (int r = 0; r < reps; r++) {
			memset(acc, 0, (size_t)NH * T * sizeof *acc);
			struct sb_lm_mask m2 = *mk;
			m2.seed = 0;
			struct sb_lm_attn_obs o2 = {0};
			double t0 = sb_monotonic_seconds(), c0 = cpu_now();
			rc = lo->attn_rows(ctx, out, q, K, V, acc, T, 0, T, NH, NKV, hd, softcap, &m2, lA, &o2, err);
			tm[r] = sb_monotonic_seconds() - t0;
			tc[r] = cpu_now() - c0;
			if (rc)
				goto out;
			obs = o2;
		}
		double mn, med, cmn, cmed;
		time_stats(tm, reps, &mn, &med);
		time_stats(tc, reps, &cmn, &cmed);
		if (mi == 0) {
			rows_min = mn;
			rows_med = med;
			rows_cmin = cmn;
		}
		double kept = obs.kept / obs.rows;
		double scored = mk->kind == SB_LM_MASK_RECIPE || mk->kind == SB_LM_MASK_DENSE ? causal_rows : kept;
		sb_jw_record(w, "lm.efficiency", 1);
		sb_jw_kstr(w, "cell_id", e->cell.cell_id);
		sb_jw_kstr(w, "method", sb_lm_mask_name(mk, nm, sizeof nm));
		sb_jw_kstr(w, "kernel", "rows");
		sb_jw_kint(w, "layer", lA);
		sb_jw_kint(w, "T", T);
		sb_jw_kint(w, "reps", reps);
		sb_jw_kf64(w, "ms_min", mn * 1e3);
		sb_jw_kf64(w, "ms_median", med * 1e3);
		sb_jw_kf64(w, "cpu_ms_min", cmn * 1e3);
		sb_jw_kf64(w, "cpu_ms_median", cmed * 1e3);
		sb_jw_kf64(w, "speedup_vs_dense_gemm", gemm_min / mn);
		sb_jw_kf64(w, "speedup_vs_dense_rows", rows_min / mn);
		sb_jw_kf64(w, "cpu_speedup_vs_dense_gemm", gemm_cmin / cmn);
		sb_jw_kf64(w, "cpu_speedup_vs_dense_rows", rows_cmin / cmn);
		sb_jw_kf64(w, "keys_scored_per_row", scored);
		sb_jw_kf64(w, "keys_kept_per_row", kept);
		sb_jw_kf64(w, "kept_fraction", obs.kept / obs.causal);
		sb_jw_obj_end(w);
		if ((rc = sb_jw_line(w, err)))
			goto out;
	}
	(void)rows_med;
	/* budgets: blocks touched by the recipe's per-key selection, and a block-sparse kernel; the
	 * recipe is the first one evaluated (its sinks and window; the default recipe's when none
	 * is), with k free keys for each budget */
	struct sb_lm_mask base;
	sb_lm_mask_parse("recipe", &base, NULL);
	for (int i = 0; i < e->o->n_masks; i++)
		if (e->o->masks[i].kind == SB_LM_MASK_RECIPE) {
			base = e->o->masks[i];
			break;
		}
	for (int bi = 0; bi < e->o->n_budgets; bi++) {
		struct sb_lm_mask mk = base;
		mk.topk = e->o->budgets_k[bi];
		struct sb_lm_attn_obs obs = {.sel = sel, .sel_n = seln, .cap = T};
		memset(acc, 0, (size_t)NH * T * sizeof *acc);
		if ((rc = lo->attn_rows(ctx, out, q, K, V, acc, T, 0, T, NH, NKV, hd, softcap, &mk, lA, &obs, err)))
			goto out;
		sb_jw_record(w, "lm.blocks", 1);
		sb_jw_kstr(w, "cell_id", e->cell.cell_id);
		sb_jw_kstr(w, "method", sb_lm_mask_name(&mk, nm, sizeof nm));
		sb_jw_kint(w, "topk", mk.topk);
		sb_jw_kint(w, "layer", lA);
		sb_jw_kint(w, "T", T);
		sb_jw_kf64(w, "keys_kept_per_row", obs.kept / obs.rows);
		sb_jw_kf64(w, "kept_fraction", obs.kept / obs.causal);
		sb_jw_kf64(w, "dense_gemm_ms", gemm_min * 1e3);
		sb_jw_kf64(w, "dense_gemm_cpu_ms", gemm_cmin * 1e3);
		sb_jw_kf64(w, "dense_rows_cpu_ms", rows_cmin * 1e3);
		sb_jw_key(w, "block");
		sb_jw_arr(w);
		for (int b3 = 0; b3 < 3; b3++) {
			int B = sb_lm_touch_block(b3), maxb = T / B + 2;
			double covered = 0;
			for (int r = 0; r < T * NH; r++) {
				int nb = 0, last = -1;
				for (int i = 0; i < seln[r]; i++) {
					int bb = sel[(size_t)r * T + i] / B;
					if (bb != last)
						blk[(size_t)r * maxb + nb++] = last = bb;
				}
				nblk[r] = nb;
				int t = r / NH;
				for (int i = 0; i < nb; i++) {
					int j1 = (blk[(size_t)r * maxb + i] + 1) * B - 1;
					covered += (j1 < t ? j1 : t) - blk[(size_t)r * maxb + i] * B + 1;
				}
			}
			for (int r = 0; r < reps; r++) {
				double t0 = sb_monotonic_seconds(), c0 = cpu_now();
				blocksparse_attn(out, q, K, V, T, NH, NKV, hd, B, blk, nblk, maxb, sc);
				tm[r] = sb_monotonic_seconds() - t0;
				tc[r] = cpu_now() - c0;
			}
			double mn, med, cmn, cmed;
			time_stats(tm, reps, &mn, &med);
			time_stats(tc, reps, &cmn, &cmed);
			sb_jw_obj(w);
			sb_jw_kint(w, "B", B);
			sb_jw_kf64(w, "blocks_per_row", obs.touched[b3] / obs.rows);
			sb_jw_kf64(w, "keys_covered_per_row", covered / obs.rows);
			sb_jw_kf64(w, "covered_fraction", covered / obs.causal);
			sb_jw_kf64(w, "ms_min", mn * 1e3);
			sb_jw_kf64(w, "ms_median", med * 1e3);
			sb_jw_kf64(w, "cpu_ms_min", cmn * 1e3);
			sb_jw_kf64(w, "cpu_ms_median", cmed * 1e3);
			sb_jw_kf64(w, "speedup_vs_dense_gemm", gemm_min / mn);
			sb_jw_kf64(w, "cpu_speedup_vs_dense_gemm", gemm_cmin / cmn);
			sb_jw_obj_end(w);
		}
		sb_jw_arr_end(w);
		sb_jw_obj_end(w);
		if ((rc = sb_jw_line(w, err)))
			goto out;
	}
out:
	free(q);
	free(out);
	free(P);
	free(acc);
	free(sel);
	free(seln);
	free(blk);
	free(nblk);
	free(sc);
	free(tm);
	free(tc);
	return rc;
}

/* ---------------------------------------------------------------- records */

static void budget_record(struct sb_jw *w, struct ev *e, int mi, const char *source, const struct sb_lm_attn_obs *obs,
			  size_t nunits)
{
	char nm[64];
	sb_jw_record(w, "lm.budget", 1);
	sb_jw_kstr(w, "cell_id", e->cell.cell_id);
	sb_jw_kstr(w, "method", sb_lm_mask_name(&e->o->masks[mi], nm, sizeof nm));
	sb_jw_kstr(w, "source", source);
	double K = 0, C = 0, R = 0, tch[3] = {0, 0, 0};
	sb_jw_key(w, "layers");
	sb_jw_arr(w);
	for (int l = 0; l < e->L; l++) {
		if (e->m->cfg.pattern[l] != 'A')
			continue;
		double k = 0, c = 0, r = 0;
		for (size_t u = 0; u < nunits; u++) {
			const struct sb_lm_attn_obs *o = &obs[u * e->L + l];
			k += o->kept;
			c += o->causal;
			r += o->rows;
			for (int b = 0; b < 3; b++)
				tch[b] += o->touched[b];
		}
		sb_jw_obj(w);
		sb_jw_kint(w, "layer", l);
		sb_jw_kf64(w, "kept", k);
		sb_jw_kf64(w, "causal", c);
		sb_jw_kf64(w, "fraction", c > 0 ? k / c : NAN); /* 0/0: no rows (windows or probes 0) */
		sb_jw_obj_end(w);
		K += k;
		C += c;
		R += r;
	}
	sb_jw_arr_end(w);
	sb_jw_kf64(w, "kept", K);
	sb_jw_kf64(w, "causal", C);
	/* with no rows the ratios are undefined (null), not 0: nothing was kept of nothing */
	sb_jw_kf64(w, "fraction", C > 0 ? K / C : NAN);
	sb_jw_kf64(w, "keys_per_row", R > 0 ? K / R : NAN);
	sb_jw_kf64(w, "blocks16_per_row", R > 0 ? tch[0] / R : NAN);
	sb_jw_kf64(w, "blocks64_per_row", R > 0 ? tch[1] / R : NAN);
	sb_jw_kf64(w, "blocks128_per_row", R > 0 ? tch[2] / R : NAN);
	sb_jw_obj_end(w);
}

static void wilson_rec(struct sb_jw *w, struct ev *e, const char *method, const char *subset, int64_t k, int64_t n)
{
	double lo = NAN, hi = NAN;
	if (n > 0)
		sb_stats_wilson(k, n, 0.95, &lo, &hi, NULL);
	sb_jw_record(w, "lm.retrieval", 1);
	sb_jw_kstr(w, "cell_id", e->cell.cell_id);
	sb_jw_kstr(w, "method", method);
	sb_jw_kstr(w, "subset", subset);
	sb_jw_kint(w, "correct", k);
	sb_jw_kint(w, "n", n);
	sb_jw_kf64(w, "accuracy", n > 0 ? (double)k / n : NAN);
	sb_jw_kf64(w, "wilson_lo", lo);
	sb_jw_kf64(w, "wilson_hi", hi);
	sb_jw_obj_end(w);
}

static int subset_has(int subset, int task)
{
	return subset == 0 ? 1 : subset == 1 ? sb_lm_task_is_needle(task) : task == subset - 2;
}

/* Is mask mi a control paired with recipe ir: dense, or any other method run with
 * the recipe's s, w, k (the mask list matched them: sb_lm_mask_parse_list)? A recipe
 * is never paired with a control of other parameters. */
static int paired_with(const struct sb_lm_eval_opts *o, int ir, int mi)
{
	const struct sb_lm_mask *c = &o->masks[mi];
	if (mi == ir || c->kind == SB_LM_MASK_RECIPE)
		return 0;
	return c->kind == SB_LM_MASK_DENSE || sb_lm_mask_same_params(c, &o->masks[ir]);
}

/* The first mask of kind k paired with recipe ir, or -1. */
static int matched_index(const struct sb_lm_eval_opts *o, int ir, enum sb_lm_mask_kind k)
{
	for (int i = 0; i < o->n_masks; i++)
		if (o->masks[i].kind == k && paired_with(o, ir, i))
			return i;
	return -1;
}

static int first_recipe(const struct sb_lm_eval_opts *o)
{
	for (int i = 0; i < o->n_masks; i++)
		if (o->masks[i].kind == SB_LM_MASK_RECIPE)
			return i;
	return -1;
}

static int paired_metric(struct sb_jw *w, struct ev *e, int ma, int mb, const char *metric, int tail, struct sb_err *err)
{
	int n = e->nw;
	double *d = malloc((size_t)n * sizeof *d);
	if (!d)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int i = 0; i < n; i++) {
		const struct fid *a = &e->fid[(size_t)ma * n + i], *b = &e->fid[(size_t)mb * n + i];
		double va, vb;
		if (!strcmp(metric, "corr")) {
			va = tail ? a->corr_t / a->nt : a->corr / a->n;
			vb = tail ? b->corr_t / b->nt : b->corr / b->n;
		} else if (!strcmp(metric, "kl")) {
			va = tail ? a->kl_t / a->nt : a->kl / a->n;
			vb = tail ? b->kl_t / b->nt : b->kl / b->n;
		} else {
			va = tail ? a->top1_t / a->nt : a->top1 / a->n;
			vb = tail ? b->top1_t / b->nt : b->top1 / b->n;
		}
		d[i] = va - vb;
	}
	struct sb_boot bc = {.seed = 0, .stream = 0, .resamples = e->o->boot_resamples, .level = 0.95};
	double lo = NAN, hi = NAN;
	struct sb_ttest tt = {0};
	struct sb_wilcoxon wx = {0};
	sb_stats_bootstrap_ci(d, n, &bc, &lo, &hi, NULL);
	sb_stats_ttest_paired(d, n, &tt, NULL);
	/* top-1 agreement: fractions of positions, so equal differences must tie (stats.h) */
	int counts = strcmp(metric, "corr") && strcmp(metric, "kl");
	double *r = counts ? malloc((size_t)n * sizeof *r) : NULL;
	if (counts && !r) {
		free(d);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	for (int i = 0; r && i < n; i++)
		r[i] = sb_stats_tie_grid(d[i]);
	sb_stats_wilcoxon(r ? r : d, n, SB_WILCOXON_AUTO, &wx, NULL);
	free(r);
	char na[64], nb[64];
	sb_jw_record(w, "lm.fidelity.pair", 1);
	sb_jw_kstr(w, "cell_id", e->cell.cell_id);
	sb_jw_kstr(w, "method_a", sb_lm_mask_name(&e->o->masks[ma], na, sizeof na));
	sb_jw_kstr(w, "method_b", sb_lm_mask_name(&e->o->masks[mb], nb, sizeof nb));
	sb_jw_kstr(w, "metric", metric);
	sb_jw_kstr(w, "positions", tail ? "tail" : "all");
	sb_jw_kint(w, "n_windows", n);
	sb_jw_kf64(w, "mean_diff", sb_stats_mean(d, n));
	sb_jw_kf64(w, "ci_lo", lo);
	sb_jw_kf64(w, "ci_hi", hi);
	/* stats.c gives p = 1 for no pairs (a test that cannot reject); here no windows means no
	 * test at all: null, as the mean, CI and dz beside it */
	sb_jw_kf64(w, "p_t", n > 0 ? tt.p : NAN);
	sb_jw_kf64(w, "p_wilcoxon", n > 0 ? wx.p : NAN);
	sb_jw_kf64(w, "cohen_dz", sb_stats_cohen_dz(d, n));
	sb_jw_obj_end(w);
	free(d);
	return sb_jw_line(w, err);
}

static int write_records(struct ev *e, struct sb_jw *w, const char *model_sha, struct sb_err *err)
{
	const struct sb_lm_eval_opts *o = e->o;
	char nm[64];
	/* setup */
	sb_jw_record(w, "lm.eval.setup", 1);
	sb_jw_kstr(w, "cell_id", e->cell.cell_id);
	sb_jw_kstr(w, "model_sha256", model_sha);
	sb_jw_key(w, "model");
	sb_lm_cfg_json(w, &e->m->cfg);
	size_t np = 0;
	for (int i = 0; i < e->m->n_params; i++)
		np += e->m->params[i].numel;
	sb_jw_kint(w, "parameter_count", (int64_t)np);
	/* the layers the masks act on (the A layers; a hybrid's other mixers run unchanged) */
	sb_jw_key(w, "masked_layers");
	sb_jw_arr(w);
	for (int l = 0; l < e->m->cfg.n_layer; l++)
		if (e->m->cfg.pattern[l] == 'A')
			sb_jw_int(w, l);
	sb_jw_arr_end(w);
	if (e->m->bf16) /* a BF16 checkpoint's Linear weights, kept so (same results, half the memory) */
		sb_jw_kstr(w, "linear_weights", "bfloat16");
	sb_jw_kint(w, "T", e->T);
	if (e->cell.source[0]) { /* an imported model (with or without a tokenizer) */
		sb_jw_key(w, "source");
		sb_jw_raw(w, e->cell.source, strlen(e->cell.source));
	}
	if (e->tok) { /* T, windows, tail and budgets count tokens of this tokenizer; probes are made in bytes */
		sb_jw_kstr(w, "units", "tokens");
		sb_jw_kstr(w, "tokenizer", e->cell.tokenizer);
		sb_jw_key(w, "probe_len_bytes");
		sb_jw_arr(w);
		for (int i = 0; i < e->nt * e->np; i += e->np)
			sb_jw_int(w, e->probe[i].len);
		sb_jw_arr_end(w);
	}
	sb_jw_kint(w, "tail_from", e->tail);
	sb_jw_kint(w, "n_windows", e->nw);
	sb_jw_kint(w, "n_probes", e->np);
	sb_jw_kint(w, "seed", (int64_t)o->seed);
	sb_jw_key(w, "masks");
	sb_jw_arr(w);
	for (int i = 0; i < o->n_masks; i++)
		sb_jw_str(w, sb_lm_mask_name(&o->masks[i], nm, sizeof nm));
	sb_jw_arr_end(w);
	sb_jw_key(w, "tasks");
	sb_jw_arr(w);
	for (int i = 0; i < e->nt; i++)
		sb_jw_str(w, sb_lm_task_name(o->tasks[i]));
	sb_jw_arr_end(w);
	sb_jw_key(w, "heldout");
	sb_jw_arr(w);
	for (int i = 0; i < e->n_corp; i++) {
		sb_jw_obj(w);
		sb_jw_kstr(w, "name", e->corp[i].name);
		sb_jw_kstr(w, "sha256", e->corp[i].sha256);
		sb_jw_kstr(w, "split", e->corp[i].split);
		sb_jw_kint(w, "offset", (int64_t)e->corp[i].offset);
		sb_jw_kint(w, "bytes", (int64_t)e->corp[i].n);
		sb_jw_obj_end(w);
	}
	sb_jw_arr_end(w);
	sb_jw_kstr(w, "haystack", e->corp[e->hay].name);
	if (!e->cell.source[0]) { /* trained here (an import's cell holds no training: docs/lm.md) */
		sb_jw_kstr(w, "mixture", e->cell.mixture);
		sb_jw_kint(w, "train_steps", e->cell.steps);
		sb_jw_kint(w, "train_batch", e->cell.batch);
	}
	if (e->cell.warm_steps && !e->cell.source[0]) {
		sb_jw_kint(w, "train_warm_T", e->cell.warm_T);
		sb_jw_kint(w, "train_warm_steps", e->cell.warm_steps);
	}
	if (!e->cell.source[0]) /* trained here: did the training finish? */
		sb_jw_kstr(w, "train_status", e->train_status);
	if (e->train_done) {
		sb_jw_key(w, "train_done");
		sb_jw_value(w, e->train_done);
	}
	sb_jw_obj_end(w);
	SB_TRY(sb_jw_line(w, err));

	/* budgets */
	for (int mi = 0; mi < o->n_masks; mi++) {
		budget_record(w, e, mi, "text", &e->obs_text[(size_t)mi * e->nw * e->L], (size_t)e->nw);
		SB_TRY(sb_jw_line(w, err));
		budget_record(w, e, mi, "probes", &e->obs_probe[(size_t)mi * e->nt * e->np * e->L],
			      (size_t)e->nt * e->np);
		SB_TRY(sb_jw_line(w, err));
	}

	/* fidelity: windows, then per method */
	for (int mi = 0; mi < o->n_masks; mi++)
		for (int wi = 0; wi < e->nw; wi++) {
			const struct fid *f = &e->fid[(size_t)mi * e->nw + wi];
			sb_jw_record(w, "lm.fidelity.window", 1);
			sb_jw_kstr(w, "cell_id", e->cell.cell_id);
			sb_jw_kstr(w, "method", sb_lm_mask_name(&o->masks[mi], nm, sizeof nm));
			sb_jw_kint(w, "window", wi);
			sb_jw_kstr(w, "corpus", e->corp[e->win_corpus[wi]].name);
			sb_jw_kint(w, "start", (int64_t)e->win_start[wi]);
			if (e->tok) /* the index in the tokens of the corpus's valid part, not a byte offset */
				sb_jw_kstr(w, "start_unit", "token");
			sb_jw_kf64(w, "kl", f->kl / f->n);
			sb_jw_kf64(w, "top1", f->top1 / f->n);
			sb_jw_kf64(w, "corr", f->corr / f->n);
			sb_jw_kf64(w, "nll", f->nll / f->n);
			sb_jw_kf64(w, "kl_tail", f->nt ? f->kl_t / f->nt : NAN);
			sb_jw_kf64(w, "top1_tail", f->nt ? f->top1_t / f->nt : NAN);
			sb_jw_kf64(w, "corr_tail", f->nt ? f->corr_t / f->nt : NAN);
			sb_jw_kf64(w, "nll_tail", f->nt ? f->nll_t / f->nt : NAN);
			sb_jw_obj_end(w);
			SB_TRY(sb_jw_line(w, err));
		}
	/* dense perplexity over no windows is undefined (exp(0) = 1 would read as a perfect model) */
	double nll_dense = e->nw ? 0 : NAN, nll_dense_t = e->nw ? 0 : NAN;
	for (int wi = 0; wi < e->nw; wi++) {
		nll_dense += e->fid[wi].nll / e->fid[wi].n / e->nw;
		nll_dense_t += e->fid[wi].nt ? e->fid[wi].nll_t / e->fid[wi].nt / e->nw : 0;
	}
	double *x = malloc((size_t)e->nw * sizeof *x);
	if (!x)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int mi = 0; mi < o->n_masks; mi++) {
		double m[8]; /* means over the windows: NaN (null) when there are none */
		for (int i = 0; i < 8; i++)
			m[i] = e->nw ? 0 : NAN;
		for (int wi = 0; wi < e->nw; wi++) {
			const struct fid *f = &e->fid[(size_t)mi * e->nw + wi];
			m[0] += f->kl / f->n / e->nw;
			m[1] += f->top1 / f->n / e->nw;
			m[2] += f->corr / f->n / e->nw;
			m[3] += f->nll / f->n / e->nw;
			m[4] += f->nt ? f->kl_t / f->nt / e->nw : 0;
			m[5] += f->nt ? f->top1_t / f->nt / e->nw : 0;
			m[6] += f->nt ? f->corr_t / f->nt / e->nw : 0;
			m[7] += f->nt ? f->nll_t / f->nt / e->nw : 0;
		}
		struct sb_boot bc = {.seed = 0, .stream = 0, .resamples = o->boot_resamples, .level = 0.95};
		double clo = NAN, chi = NAN, klo = NAN, khi = NAN;
		for (int wi = 0; wi < e->nw; wi++)
			x[wi] = e->fid[(size_t)mi * e->nw + wi].corr / e->fid[(size_t)mi * e->nw + wi].n;
		sb_stats_bootstrap_ci(x, e->nw, &bc, &clo, &chi, NULL);
		for (int wi = 0; wi < e->nw; wi++)
			x[wi] = e->fid[(size_t)mi * e->nw + wi].kl / e->fid[(size_t)mi * e->nw + wi].n;
		sb_stats_bootstrap_ci(x, e->nw, &bc, &klo, &khi, NULL);
		sb_jw_record(w, "lm.fidelity", 1);
		sb_jw_kstr(w, "cell_id", e->cell.cell_id);
		sb_jw_kstr(w, "method", sb_lm_mask_name(&o->masks[mi], nm, sizeof nm));
		sb_jw_kint(w, "n_windows", e->nw);
		sb_jw_kf64(w, "kl", m[0]);
		sb_jw_kf64(w, "kl_ci_lo", klo);
		sb_jw_kf64(w, "kl_ci_hi", khi);
		sb_jw_kf64(w, "top1", m[1]);
		sb_jw_kf64(w, "corr", m[2]);
		sb_jw_kf64(w, "corr_ci_lo", clo);
		sb_jw_kf64(w, "corr_ci_hi", chi);
		sb_jw_kf64(w, "ppl_dense", exp(nll_dense));
		sb_jw_kf64(w, "ppl", exp(m[3]));
		sb_jw_kf64(w, "ppl_change_pct", 100.0 * (exp(m[3]) - exp(nll_dense)) / exp(nll_dense));
		sb_jw_kf64(w, "kl_tail", m[4]);
		sb_jw_kf64(w, "top1_tail", m[5]);
		sb_jw_kf64(w, "corr_tail", m[6]);
		sb_jw_kf64(w, "ppl_tail", exp(m[7]));
		sb_jw_kf64(w, "ppl_dense_tail", exp(nll_dense_t));
		sb_jw_obj_end(w);
		SB_TRY(sb_jw_line(w, err));
	}
	free(x);
	/* each recipe against its own structure-matched random control (same s, w, k) */
	for (int ir = 0; ir < o->n_masks; ir++) {
		int isr = o->masks[ir].kind == SB_LM_MASK_RECIPE ? matched_index(o, ir, SB_LM_MASK_STRUCT_RANDOM) : -1;
		if (isr < 0)
			continue;
		const char *metrics[3] = {"corr", "kl", "top1"};
		for (int k = 0; k < 3; k++)
			for (int tail = 0; tail < 2; tail++)
				SB_TRY(paired_metric(w, e, ir, isr, metrics[k], tail, err));
	}

	/* retrieval: every probe, then rates and pairs */
	for (int mi = 0; mi < o->n_masks; mi++)
		for (int ti = 0; ti < e->nt; ti++)
			for (int pi = 0; pi < e->np; pi++) {
				size_t at = ((size_t)mi * e->nt + ti) * e->np + pi;
				const struct sb_lm_probe *p = &e->probe[(size_t)ti * e->np + pi];
				sb_jw_record(w, "probe.result", 1);
				sb_jw_kstr(w, "model", e->cell.cell_id);
				sb_jw_kstr(w, "task", sb_lm_task_name(p->task));
				sb_jw_kstr(w, "method", sb_lm_mask_name(&o->masks[mi], nm, sizeof nm));
				sb_jw_kint(w, "probe_id", pi);
				sb_jw_kbool(w, "correct", e->correct[at]);
				sb_jw_kf64(w, "depth", p->depth);
				sb_jw_key(w, "expected");
				sb_jw_strn(w, (const char *)p->text + p->answer_beg[0],
					   (size_t)(p->answer_end[0] - p->answer_beg[0] - 1));
				sb_jw_kstr(w, "output", e->gen[at]);
				sb_jw_obj_end(w);
				SB_TRY(sb_jw_line(w, err));
			}
	int nsub = 2 + SB_LM_NALLTASKS; /* the training-only tasks too, when asked for */
	for (int mi = 0; mi < o->n_masks; mi++)
		for (int sub = 0; sub < nsub; sub++) {
			int64_t k = 0, n = 0;
			for (int ti = 0; ti < e->nt; ti++) {
				if (!subset_has(sub, o->tasks[ti]))
					continue;
				for (int pi = 0; pi < e->np; pi++) {
					k += e->correct[((size_t)mi * e->nt + ti) * e->np + pi];
					n++;
				}
			}
			if (n == 0)
				continue;
			wilson_rec(w, e, sb_lm_mask_name(&o->masks[mi], nm, sizeof nm),
				   sub == 0 ? "all" : sub == 1 ? "needle" : sb_lm_task_name(sub - 2), k, n);
			SB_TRY(sb_jw_line(w, err));
		}
	/* content-blind patterns pooled (struct_random, random, structure) on the needle arms:
	 * those matched to the first recipe when the list has one */
	int ir0 = first_recipe(o);
	{
		int64_t k = 0, n = 0;
		for (int mi = 0; mi < o->n_masks; mi++) {
			enum sb_lm_mask_kind kd = o->masks[mi].kind;
			if (kd != SB_LM_MASK_STRUCT_RANDOM && kd != SB_LM_MASK_RANDOM && kd != SB_LM_MASK_STRUCTURE)
				continue;
			if (ir0 >= 0 && !paired_with(o, ir0, mi))
				continue;
			for (int ti = 0; ti < e->nt; ti++)
				if (sb_lm_task_is_needle(o->tasks[ti]))
					for (int pi = 0; pi < e->np; pi++) {
						k += e->correct[((size_t)mi * e->nt + ti) * e->np + pi];
						n++;
					}
		}
		if (n > 0) {
			wilson_rec(w, e, "content_blind", "needle", k, n);
			SB_TRY(sb_jw_line(w, err));
		}
	}
	/* each recipe against dense and its matched controls, on the same probes */
	for (int ir = 0; ir < o->n_masks; ir++) {
		if (o->masks[ir].kind != SB_LM_MASK_RECIPE)
			continue;
		for (int mi = 0; mi < o->n_masks; mi++) {
			if (!paired_with(o, ir, mi))
				continue;
			for (int sub = 0; sub < 2; sub++) {
				int64_t c11 = 0, c10 = 0, c01 = 0, c00 = 0;
				for (int ti = 0; ti < e->nt; ti++) {
					if (!subset_has(sub, o->tasks[ti]))
						continue;
					for (int pi = 0; pi < e->np; pi++) {
						int a = e->correct[((size_t)ir * e->nt + ti) * e->np + pi];
						int b = e->correct[((size_t)mi * e->nt + ti) * e->np + pi];
						c11 += a && b;
						c10 += a && !b;
						c01 += !a && b;
						c00 += !a && !b;
					}
				}
				if (c11 + c10 + c01 + c00 == 0)
					continue;
				struct sb_paired_binary pb;
				sb_stats_paired_binary(c11, c10, c01, c00, 0.95, &pb, NULL);
				char nb[64];
				sb_jw_record(w, "lm.retrieval.pair", 1);
				sb_jw_kstr(w, "cell_id", e->cell.cell_id);
				sb_jw_kstr(w, "method_a", sb_lm_mask_name(&o->masks[ir], nm, sizeof nm));
				sb_jw_kstr(w, "method_b", sb_lm_mask_name(&o->masks[mi], nb, sizeof nb));
				sb_jw_kstr(w, "subset", sub == 0 ? "all" : "needle");
				sb_jw_kint(w, "n", pb.n);
				sb_jw_kint(w, "n11", c11);
				sb_jw_kint(w, "n10", c10);
				sb_jw_kint(w, "n01", c01);
				sb_jw_kint(w, "n00", c00);
				sb_jw_kf64(w, "p_a", pb.p_a);
				sb_jw_kf64(w, "p_b", pb.p_b);
				sb_jw_kf64(w, "diff", pb.diff);
				sb_jw_kf64(w, "ci_lo", pb.lo);
				sb_jw_kf64(w, "ci_hi", pb.hi);
				sb_jw_kf64(w, "mcnemar_p", pb.mcnemar_p);
				sb_jw_obj_end(w);
				SB_TRY(sb_jw_line(w, err));
			}
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- driver */

static void prog(struct ev *e, const char *phase, int done, int total)
{
	if (e->o->progress)
		e->o->progress(e->o->progress_arg, phase, done, total);
}

struct chunk {
	struct ev *e;
	sb_task_fn fn;
	int base;
};

static int chunk_fn(struct sb_ctx *ctx, int worker, int task, void *arg, struct sb_err *err)
{
	struct chunk *c = arg;
	return c->fn(ctx, worker, c->base + task, c->e, err);
}

/* run ntasks tasks in chunks, reporting progress between chunks */
static int run_tasks(struct ev *e, const char *phase, int ntasks, sb_task_fn fn, struct sb_err *err)
{
	int step = 4 * e->be->threads;
	if (step < 8)
		step = 8;
	for (int b = 0; b < ntasks; b += step) {
		struct chunk c = {e, fn, b};
		int n = ntasks - b < step ? ntasks - b : step;
		SB_TRY(e->be->ops->run(e->be, n, chunk_fn, &c, err));
		prog(e, phase, b + n, ntasks);
	}
	return 0;
}

const char *sb_lm_blas_note(void)
{
	static char line[320];
	if (!sb_cpu_blas_generic())
		return NULL;
	snprintf(line, sizeof line,
	         "OpenBLAS runs its generic '%s' kernels on this CPU (it does not know the model): the dense_gemm "
	         "baseline is slower than the CPU allows and speed-ups against it are overstated; set "
	         "OPENBLAS_CORETYPE (SkylakeX on AVX-512, Haswell on AVX2)",
	         sb_cpu_blas_core());
	return line;
}

int sb_lm_eval_run(struct sb_backend *be, const char *run_dir, const struct sb_lm_eval_opts *o, struct sb_jw *w,
		   struct sb_err *err)
{
	struct ev e;
	memset(&e, 0, sizeof e);
	e.be = be;
	e.o = o;
	char model_sha[SB_SHA256_HEX];
	SB_TRY(sb_lm_eval_check(o, err));
	SB_TRY(sb_lm_run_open(be, run_dir, 1, &e.cell, &e.m, model_sha, err));
	if (o->n_masks < 1 || o->masks[0].kind != SB_LM_MASK_DENSE) {
		sb_lm_model_free(e.m);
		return SB_ERR(err, SB_EUSAGE, "the first mask must be dense");
	}
	/* train.ndjson: as sb-eval reads an encoder run's, its last train.done or train.failed
	 * gives train_status ("incomplete" when it has neither: a killed run; "no_log" when there is
	 * no train.ndjson: a copy holding one checkpoint as its model);
	 * a train.done that names another checkpoint than model.safetensors is bad data, and so
	 * is a malformed line (the file is written whole, never torn) */
	int rc = 0;
	snprintf(e.train_status, sizeof e.train_status, "incomplete");
	{
		char tp[4600];
		snprintf(tp, sizeof tp, "%s/train.ndjson", run_dir);
		if (!e.cell.source[0] && !sb_file_exists(tp)) /* a checkpoint evaluated on its own (docs/lm.md) */
			snprintf(e.train_status, sizeof e.train_status, "no_log");
		struct sb_ndjson_reader *rd = NULL;
		if (sb_file_exists(tp) && !(rc = sb_ndjson_open(tp, &rd, err))) {
			for (;;) {
				struct sb_json *v = NULL;
				if ((rc = sb_ndjson_next(rd, &v, err)) || !v)
					break; /* the message names the file and line */
				const char *kind = sb_json_str(sb_json_get(v, "kind"), "");
				if (!strcmp(kind, "train.done") || !strcmp(kind, "train.failed")) {
					snprintf(e.train_status, sizeof e.train_status, "%s",
						 sb_json_str(sb_json_get(v, "status"), "failed"));
					sb_json_free(e.train_done);
					e.train_done = NULL;
				}
				if (!strcmp(kind, "train.done"))
					e.train_done = v;
				else
					sb_json_free(v);
			}
			sb_ndjson_close(rd);
		}
		const char *rec = e.train_done ? sb_json_str(sb_json_get(e.train_done, "checkpoint_sha256"), "") : NULL;
		if (!rc && rec && strcmp(rec, model_sha))
			rc = SB_ERR(err, SB_EDATA,
				    "%s/model.safetensors: SHA-256 %.12s... is not the checkpoint train.ndjson's train.done "
				    "names (%.12s...): the model and the training log disagree",
				    run_dir, model_sha, *rec ? rec : "(none)");
	}
	e.T = e.cell.T;
	e.V = e.m->cfg.vocab;
	e.L = e.m->cfg.n_layer;
	e.tail = o->masks[0].sinks + o->masks[0].window + o->masks[0].topk;
	for (int i = 0; i < o->n_masks; i++)
		if (o->masks[i].kind == SB_LM_MASK_RECIPE) {
			e.tail = o->masks[i].sinks + o->masks[i].window + o->masks[i].topk;
			break;
		}
	if (e.tail >= e.T)
		e.tail = e.T / 2;
	/* held-out text: the valid parts */
	e.n_corp = e.cell.n_corpora;
	for (int i = 0; i < e.n_corp && !rc; i++)
		rc = sb_lm_corpus_read(e.cell.corpora[i], "valid", &e.corp[i], err);
	e.hay = 0;
	int hay_found = !e.cell.haystack[0];
	for (int i = 0; i < e.n_corp; i++)
		if (e.cell.haystack[0] && !strcmp(e.corp[i].name, e.cell.haystack)) {
			e.hay = i;
			hay_found = 1;
		}
	if (!rc && !hay_found) /* (sb-lm import used to record any --haystack name) */
		rc = SB_ERR(err, SB_EDATA, "%s/cell.json: haystack '%s' is not among the corpora", run_dir,
			    e.cell.haystack);
	/* workers */
	int nwk = be->threads;
	e.cache = calloc((size_t)nwk, sizeof *e.cache);
	e.lbuf = calloc((size_t)nwk, sizeof *e.lbuf);
	if (!rc && (!e.cache || !e.lbuf))
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int i = 0; i < nwk && !rc; i++) {
		rc = sb_lm_cache_new(e.m, e.T, &e.cache[i], err);
		if (!rc && !(e.lbuf[i] = malloc((size_t)e.T * e.V * sizeof(float))))
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	/* the held-out text as token ids: bytes, or the run's tokenizer */
	if (!rc && e.cell.tokenizer[0]) /* checked against cell.json and the model's vocabulary */
		rc = sb_lm_run_tokenizer(run_dir, &e.cell, e.V, &e.tok, err);
	int32_t *ids[8] = {0};
	size_t nids[8] = {0};
	int32_t bos = e.tok ? sb_tok_bos(e.tok) : -1; /* HF's add_special_tokens default: Llama 3's BOS */
	for (int i = 0; i < e.n_corp && !rc; i++) {
		if (e.tok) { /* the valid part, cut at byte offsets: whole characters at its edges */
			size_t beg, end;
			sb_tok_utf8_edges(e.corp[i].bytes, e.corp[i].n, &beg, &end);
			rc = sb_tok_encode(e.tok, (const char *)e.corp[i].bytes + beg, end - beg, &ids[i], &nids[i], err);
			if (rc)
				sb_err_prefix(err, "corpus '%s' (valid part)", e.corp[i].name);
		} else if (!(ids[i] = malloc((e.corp[i].n ? e.corp[i].n : 1) * sizeof *ids[i])))
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		else {
			for (size_t j = 0; j < e.corp[i].n; j++)
				ids[i][j] = e.corp[i].bytes[j];
			nids[i] = e.corp[i].n;
		}
	}
	/* windows */
	int usable = 0;
	for (int i = 0; i < e.n_corp; i++)
		usable += nids[i] >= (size_t)e.T + 1;
	e.nw = usable ? o->n_windows : 0;
	if (!rc && e.nw) {
		e.win = malloc((size_t)e.nw * (e.T + 1) * sizeof *e.win);
		e.win_corpus = calloc((size_t)e.nw, sizeof *e.win_corpus);
		e.win_start = calloc((size_t)e.nw, sizeof *e.win_start);
		/* the dense logits of every window are kept when they fit in DENSE_KEEP_BYTES */
		const char *keep_env = getenv("SB_LM_DENSE_KEEP"); /* bytes; a test hook for the other path */
		double keep = keep_env ? atof(keep_env) : DENSE_KEEP_BYTES;
		if ((double)e.nw * e.T * e.V * sizeof(float) <= keep)
			e.dense = malloc((size_t)e.nw * e.T * e.V * sizeof(float));
		else if ((e.dbuf = calloc((size_t)nwk, sizeof *e.dbuf)))
			for (int i = 0; i < nwk; i++)
				if (!(e.dbuf[i] = malloc((size_t)e.T * e.V * sizeof(float))))
					rc = SB_ERR(err, SB_EINTERNAL, "out of memory (windows)");
		if (!e.win || !e.win_corpus || !e.win_start || (!e.dense && !e.dbuf))
			rc = SB_ERR(err, SB_EINTERNAL, "out of memory (windows)");
		int wi = 0, ui = 0;
		for (int i = 0; i < e.n_corp && !rc; i++) {
			if (nids[i] < (size_t)e.T + 1)
				continue;
			int cnt = e.nw / usable + (ui < e.nw % usable);
			ui++;
			size_t span = nids[i] - (size_t)(e.T + 1);
			for (int j = 0; j < cnt; j++, wi++) {
				size_t st = cnt > 1 ? span * (size_t)j / (size_t)(cnt - 1) : 0;
				int32_t *wp = e.win + (size_t)wi * (e.T + 1);
				if (bos >= 0) /* the tokenizer's leading token, then T tokens of text */
					wp[0] = bos;
				memcpy(wp + (bos >= 0), ids[i] + st, ((size_t)e.T + (bos < 0)) * sizeof *e.win);
				e.win_corpus[wi] = i;
				/* bytes: the offset in the corpus; tokens: the index in the valid part's tokens */
				e.win_start[wi] = e.tok ? st : e.corp[i].offset + st;
			}
		}
	}
	/* bytes per token of the haystack: the probes' length in bytes for a context of T tokens */
	double bytes_per_token = nids[e.hay] ? (double)e.corp[e.hay].n / (double)nids[e.hay] : 1.0;
	for (int i = 0; i < 8; i++)
		free(ids[i]);
	e.fid = calloc((size_t)o->n_masks * (e.nw ? e.nw : 1), sizeof *e.fid);
	e.obs_text = calloc((size_t)o->n_masks * (e.nw ? e.nw : 1) * e.L, sizeof *e.obs_text);
	/* probes */
	e.np = o->n_probes;
	e.nt = o->n_tasks;
	size_t nprob = (size_t)e.nt * e.np;
	e.probe = calloc(nprob ? nprob : 1, sizeof *e.probe);
	e.correct = calloc((size_t)o->n_masks * nprob + 1, 1);
	e.gen = calloc((size_t)o->n_masks * nprob + 1, sizeof *e.gen);
	e.obs_probe = calloc((size_t)o->n_masks * nprob * e.L + 1, sizeof *e.obs_probe);
	if (!rc && (!e.fid || !e.obs_text || !e.probe || !e.correct || !e.gen || !e.obs_probe))
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	const struct sb_lm_corpus *hay = &e.corp[e.hay];
	if (!rc && e.tok && nprob && !(e.tprobe = calloc(nprob, sizeof *e.tprobe)))
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int ti = 0; ti < e.nt && !rc; ti++)
		for (int pi = 0; pi < e.np && !rc; pi++) {
			size_t at = (size_t)ti * e.np + pi;
			if (e.tok)
				rc = make_token_probe(&e, o->tasks[ti], pi, hay, bytes_per_token, &e.probe[at], &e.tprobe[at],
						      err);
			else
				rc = sb_lm_probe_make(o->tasks[ti], e.T, hay->bytes, hay->n, o->seed, SB_RNG_SYNTH,
						      (uint64_t)pi, sb_lm_probe_depth(pi, e.np), &e.probe[at], err);
			/* the evaluation's settings do not suit this run (found before any forward pass) */
			if (rc == SB_EUSAGE) {
				char m[sizeof err->msg];
				snprintf(m, sizeof m, "%s", err->msg);
				SB_ERR(err, SB_EUSAGE, "%s (a run with T %d: set tasks=LIST to tasks that fit, or probes=0 "
				                       "for none; sb-lm eval: --tasks, --probes)", m, e.T);
			}
		}
	/* run */
	if (!rc && e.nw)
		rc = run_tasks(&e, "fidelity (dense)", e.nw, fid_dense_task, err);
	if (!rc && e.nw)
		rc = run_tasks(&e, "fidelity (masks)", o->n_masks * e.nw, fid_mask_task, err);
	if (!rc && nprob)
		rc = run_tasks(&e, "retrieval", (int)(o->n_masks * nprob), probe_task, err);
	if (!rc)
		rc = write_records(&e, w, model_sha, err);
	if (!rc && e.nw) {
		prog(&e, "efficiency", 0, 1);
		rc = bench(&e, w, err);
	}
	/* cleanup */
	for (int i = 0; i < nwk; i++) {
		if (e.cache)
			sb_lm_cache_free(e.cache[i]);
		if (e.lbuf)
			free(e.lbuf[i]);
	}
	free(e.cache);
	free(e.lbuf);
	free(e.win);
	free(e.win_corpus);
	free(e.win_start);
	free(e.dense);
	if (e.dbuf)
		for (int i = 0; i < nwk; i++)
			free(e.dbuf[i]);
	free(e.dbuf);
	sb_tok_free(e.tok);
	free(e.fid);
	free(e.obs_text);
	if (e.probe)
		for (size_t i = 0; i < nprob; i++)
			sb_lm_probe_free(&e.probe[i]);
	free(e.probe);
	if (e.tprobe)
		for (size_t i = 0; i < nprob; i++)
			for (int k = 0; k < SB_LM_PROBE_MAXTURN; k++)
				free(e.tprobe[i].ids[k]);
	free(e.tprobe);
	free(e.correct);
	free(e.gen);
	free(e.obs_probe);
	for (int i = 0; i < e.n_corp; i++)
		sb_lm_corpus_free(&e.corp[i]);
	sb_lm_model_free(e.m);
	sb_json_free(e.train_done);
	return rc;
}
