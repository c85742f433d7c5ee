/* lm_report.c — the LM track's report from one eval.ndjson: Markdown tables with
 * the study's three findings beside ours, and SVG figures (see lm_eval.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "json.h"
#include "lm_eval.h"

/* ---------------------------------------------------------------- text buffer */
struct buf {
	char *p;
	size_t n, cap;
	int oom;
};

static void bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(struct buf *b, const char *fmt, ...)
{
	if (b->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
		va_end(ap);
		if (k < 0) {
			b->oom = 1;
			return;
		}
		if (b->p && b->n + (size_t)k < b->cap) {
			b->n += (size_t)k;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 4096;
		while (cap < b->n + (size_t)k + 1)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q) {
			b->oom = 1;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
}

/* ---------------------------------------------------------------- records */
struct recs {
	struct sb_json **v;
	size_t n;
};

static const char *kind_of(const struct sb_json *v) { return sb_json_str(sb_json_get(v, "kind"), ""); }
static double num(const struct sb_json *v, const char *k) { return sb_json_num(sb_json_get(v, k), NAN); }
static const char *str(const struct sb_json *v, const char *k) { return sb_json_str(sb_json_get(v, k), ""); }

static const struct sb_json *find(const struct recs *r, const char *kind, const char *k1, const char *v1, const char *k2,
				  const char *v2)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct sb_json *v = r->v[i];
		if (strcmp(kind_of(v), kind))
			continue;
		if (k1 && strcmp(str(v, k1), v1))
			continue;
		if (k2 && strcmp(str(v, k2), v2))
			continue;
		return v;
	}
	return NULL;
}

/* The fields the report reads, per record kind: strings, then numbers (a number may be null,
 * as sb-lm eval writes a non-finite one). A record of these kinds without one of them, or
 * with another type, is refused (FILE:LINE), not rendered as a blank or a NaN. */
static const struct {
	const char *kind, *strs, *nums;
} SCHEMA[] = {
    {"lm.fidelity", "method", "n_windows kl kl_ci_lo kl_ci_hi top1 corr corr_ci_lo corr_ci_hi kl_tail top1_tail "
                              "corr_tail ppl ppl_change_pct"},
    {"lm.fidelity.pair", "method_a method_b metric", "n_windows mean_diff ci_lo ci_hi p_t cohen_dz"},
    {"lm.retrieval", "method subset", "correct n accuracy wilson_lo wilson_hi"},
    {"lm.retrieval.pair", "method_a method_b subset", "n n11 n10 n01 n00 diff ci_lo ci_hi mcnemar_p"},
    {"lm.efficiency", "method", "ms_min cpu_ms_min speedup_vs_dense_gemm cpu_speedup_vs_dense_gemm"},
    {"lm.budget", "method", "fraction keys_per_row blocks16_per_row blocks64_per_row blocks128_per_row"},
    {"lm.blocks", "method", "topk kept_fraction keys_kept_per_row"},
};

static int check_record(const struct sb_json *v, struct sb_err *err)
{
	const char *kind = kind_of(v);
	for (size_t i = 0; i < sizeof SCHEMA / sizeof SCHEMA[0]; i++) {
		if (strcmp(kind, SCHEMA[i].kind))
			continue;
		for (int pass = 0; pass < 2; pass++) {
			const char *p = pass ? SCHEMA[i].nums : SCHEMA[i].strs;
			while (*p) {
				char key[40];
				size_t n = strcspn(p, " ");
				snprintf(key, sizeof key, "%.*s", (int)n, p);
				p += n + (p[n] == ' ');
				const struct sb_json *f = sb_json_get(v, key);
				if (!f)
					return SB_ERR(err, SB_EDATA, "%s: missing field '%s'", kind, key);
				if (pass ? f->type != SB_JSON_NUMBER && f->type != SB_JSON_NULL : f->type != SB_JSON_STRING)
					return SB_ERR(err, SB_EDATA, "%s: field '%s' must be %s", kind, key,
					              pass ? "a number or null" : "a string");
			}
		}
	}
	return 0;
}

/* A number as fmt, or "n/a" for a null one (sb-lm eval writes null for a statistic of no
 * observations: windows 0, probes 0; printf would print "nan"). */
static void f3(char *s, size_t n, double x, const char *fmt)
{
	if (isnan(x))
		snprintf(s, n, "n/a");
	else
		snprintf(s, n, fmt, x);
}

/* f3 onto the report */
static void bnum(struct buf *b, const char *fmt, double x)
{
	char s[64];
	f3(s, sizeof s, x, fmt);
	bprintf(b, "%s", s);
}

/* ---------------------------------------------------------------- SVG */

/* Horizontal bar chart: one bar per label with an optional interval [lo, hi]; a null value
 * (and a chart of no bars) says na instead. */
static void svg_bars(struct buf *b, const char *title, const char *xlabel, char (*labels)[64], const double *val,
		     const double *lo, const double *hi, int n, double xmin, double xmax, const char *na)
{
	int W = 720, row = 26, top = 48, left = 170, right = 40, H = top + row * n + 50;
	double pw = W - left - right;
#define X(v) (left + pw * (((v) < xmin ? xmin : (v) > xmax ? xmax : (v)) - xmin) / (xmax - xmin))
	bprintf(b,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
		"<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
		W, H, W, H, 10, title);
	for (int t = 0; t <= 4; t++) {
		double v = xmin + (xmax - xmin) * t / 4;
		double x = X(v);
		bprintf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", x, top - 6, x,
			top + row * n);
		bprintf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%.3g</text>\n", x,
			top + row * n + 16, v);
	}
	bprintf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", left + pw / 2, top + row * n + 36,
		xlabel);
	if (n == 0)
		bprintf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%s</text>\n", left + pw / 2,
			top - 10, na);
	for (int i = 0; i < n; i++) {
		int y = top + row * i;
		bprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", left - 8, y + 15, labels[i]);
		if (!isnan(val[i])) {
			double x0 = X(xmin), x1 = X(val[i]);
			bprintf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"16\" fill=\"%s\"/>\n", x0, y + 3,
				x1 - x0 > 0 ? x1 - x0 : 0, i == 0 ? "#888" : "#4a7ebb");
			bprintf(b, "<text x=\"%.1f\" y=\"%d\" fill=\"#222\">%.3f</text>\n", x1 + 4, y + 15, val[i]);
		} else
			bprintf(b, "<text x=\"%.1f\" y=\"%d\" fill=\"#555\">%s</text>\n", X(xmin) + 4, y + 15, na);
		if (lo && hi && !isnan(lo[i]) && !isnan(hi[i])) {
			double a = X(lo[i]), c = X(hi[i]);
			bprintf(b,
				"<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\" stroke-width=\"1.5\"/>\n"
				"<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>\n"
				"<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>\n",
				a, y + 11, c, y + 11, a, y + 6, a, y + 16, c, y + 6, c, y + 16);
		}
	}
	bprintf(b, "</svg>\n");
#undef X
}

static int write_buf(const char *dir, const char *name, struct buf *b, struct sb_err *err)
{
	if (b->oom)
		return SB_ERR(err, SB_EINTERNAL, "out of memory (report)");
	char *p = sb_path_join(dir, name);
	if (!p)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int rc = sb_write_file_atomic(p, b->p ? b->p : "", b->n, err);
	free(p);
	return rc;
}

/* ---------------------------------------------------------------- report */

int sb_lm_report_write(const char *eval_path, const char *out_dir, struct sb_err *err)
{
	struct recs r = {0};
	struct sb_ndjson_reader *rd;
	SB_TRY(sb_ndjson_open(eval_path, &rd, err));
	struct sb_json *v;
	int rc = 0;
	size_t cap = 0;
	while (!(rc = sb_ndjson_next(rd, &v, err)) && v) {
		if ((rc = check_record(v, err))) {
			sb_err_prefix(err, "%s:%ld", sb_ndjson_name(rd), sb_ndjson_line(rd));
			sb_json_free(v);
			break;
		}
		if (r.n == cap) {
			cap = cap ? 2 * cap : 1024;
			void *q = realloc(r.v, cap * sizeof *r.v);
			if (!q) {
				sb_json_free(v);
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
				break;
			}
			r.v = q;
		}
		r.v[r.n++] = v;
	}
	sb_ndjson_close(rd);
	const struct sb_json *setup = find(&r, "lm.eval.setup", NULL, NULL, NULL, NULL);
	if (!rc && !setup)
		rc = SB_ERR(err, SB_EDATA, "%s: no lm.eval.setup record (not an LM evaluation)", eval_path);
	struct buf md = {0}, svg1 = {0}, svg2 = {0}, svg3 = {0};
	if (rc)
		goto out;
	const struct sb_json *masks = sb_json_get(setup, "masks"), *tasks = sb_json_get(setup, "tasks");
	int nm = masks ? (int)masks->n : 0, nt = tasks ? (int)tasks->n : 0;
	const struct sb_json *model = sb_json_get(setup, "model"), *td = sb_json_get(setup, "train_done");
	char a[64], b2[64], c[64], d[64], e[64];

	bprintf(&md, "# LM track report — budget-matched sparse masks (PROTOCOL C)\n\n");
	bprintf(&md, "Run `%s`, evaluated from `%s`.\n\n", str(setup, "cell_id"), eval_path);
	/* a pretrained decoder (sb-lm import) is evaluated in its tokenizer's tokens */
	int tokens = !strcmp(str(setup, "units"), "tokens");
	const char *unit = tokens ? "token" : "byte";
	const struct sb_json *source = sb_json_get(setup, "source");
	if (source) {
		/* which layers the masks act on: every layer of the Llama/Qwen layouts; a hybrid's
		 * (LFM2's, Granite 4.0's, Gemma 2's and 3's) full-attention layers, its convolutions / Mamba2
		 * mixers / sliding-window attention unchanged */
		const char *pat = str(model, "pattern");
		struct buf la = {0}, lc = {0};
		int nA = 0, nC = 0;
		for (int l = 0; pat[l]; l++) {
			if (pat[l] == 'A')
				bprintf(&la, "%s%d", nA++ ? ", " : "", l);
			else
				bprintf(&lc, "%s%d", nC++ ? ", " : "", l);
		}
		char layers[600], legend[160] = ""; /* the pattern has at most SB_LM_MAX_LAYERS (128) letters */
		if (strchr(pat, 'C'))
			snprintf(legend + strlen(legend), sizeof legend - strlen(legend), ", C = gated short convolution");
		if (strchr(pat, 'M'))
			snprintf(legend + strlen(legend), sizeof legend - strlen(legend), ", M = Mamba2 mixer");
		if (strchr(pat, 'V'))
			snprintf(legend + strlen(legend), sizeof legend - strlen(legend), ", V = Mamba (1) mixer");
		if (strchr(pat, 'D'))
			snprintf(legend + strlen(legend), sizeof legend - strlen(legend), ", D = gated DeltaNet");
		if (strchr(pat, 'S'))
			snprintf(legend + strlen(legend), sizeof legend - strlen(legend),
				 ", S = sliding-window attention (%.0f keys)", num(model, "window"));
		const char *nope = str(model, "rope_layers");
		int par = num(model, "parallel_ssm") == 1; /* Falcon-H1's: a Mamba2 mixer beside each attention */
		if (!nC && par)
			snprintf(layers, sizeof layers,
				 "a parallel hybrid: every layer attention and a Mamba2 mixer side by side on the same input, "
				 "their outputs added");
		else if (!nC)
			snprintf(layers, sizeof layers, "every layer is full attention, every layer is masked");
		else
			snprintf(layers, sizeof layers, "a hybrid, layers `%s`: A = full attention%s", pat, legend);
		if (nope[0]) /* NoPE layers (SmolLM3's, EXAONE 4's global ones) */
			snprintf(layers + strlen(layers), sizeof layers - strlen(layers),
				 "; RoPE by layer `%s` (0 = none: NoPE)", nope);
		const char *others = strchr(pat, 'M') ? "Mamba2/convolution"
				     : strchr(pat, 'V') ? "Mamba"
				     : strchr(pat, 'D') ? "gated DeltaNet"
				     : strchr(pat, 'S') ? (strchr(pat, 'C') ? "convolution/sliding-window" : "sliding-window")
							: "convolution";
		bprintf(&md,
			"Model: a pretrained `%s` decoder imported by `sb-lm import` (PROTOCOL C(b); %s), %.0f layers, d = "
			"%.0f, %.0f heads of %.0f (kv heads %.0f), ffn %.0f; %.0f parameters; vocabulary %.0f, %s%s%s; "
			"context T = %.0f %ss. ",
			str(source, "model_type"), layers, num(model, "n_layer"), num(model, "d"), num(model, "heads"),
			num(model, "head_dim"), num(model, "kv_heads"), num(model, "ffn"), num(setup, "parameter_count"),
			num(model, "vocab"), tokens ? "text encoded by its tokenizer `" : "text read as bytes (no tokenizer.json)",
			tokens ? str(setup, "tokenizer") : "", tokens ? "`" : "", num(setup, "T"), unit);
		/* Gemma 2's soft-capping: the masks select among capped scores */
		double acap = num(model, "attn_softcap"), fcap = num(model, "final_softcap");
		if (acap > 0 || fcap > 0) {
			bprintf(&md, "Soft-capping (cap tanh(x / cap)) of ");
			if (acap > 0)
				bprintf(&md, "the attention scores at %g%s", acap, fcap > 0 ? " and " : "");
			if (fcap > 0)
				bprintf(&md, "the logits at %g", fcap);
			bprintf(&md, "%s. ", acap > 0 ? "; the masks select among the capped scores" : "");
		}
		if (nC)
			bprintf(&md,
				"The masks act on the %d attention layers (%s) only; the %d %s layers (%s) run "
				"unchanged under every mask. ",
				nA, la.p ? la.p : "none", nC, others, lc.p ? lc.p : "");
		if (par)
			bprintf(&md,
				"The masks act on the attention of every layer (%s); the Mamba2 mixers beside it run "
				"unchanged under every mask. ",
				la.p ? la.p : "none");
		bprintf(&md, "Files read (SHA-256): ");
		free(la.p);
		free(lc.p);
	} else {
		char sl[96] = "";
		if (strchr(str(model, "pattern"), 'S'))
			snprintf(sl, sizeof sl, ", S = sliding-window attention (%.0f keys, RoPE base %g)", num(model, "window"),
				 num(model, "rope_local_theta") > 0 ? num(model, "rope_local_theta") : num(model, "rope_theta"));
		bprintf(&md,
			"Model: hybrid decoder `%s` (A = full attention, C = %s causal depthwise short convolution, L = "
			"linear attention%s), d = %.0f, %.0f heads of %.0f (kv heads %.0f), ffn %.0f, %s, %s, positions %s; "
			"%.0f parameters; %s vocabulary %.0f; context T = %.0f.\n\n",
			str(model, "pattern"), num(model, "conv_gate") == 0 ? "plain" : "gated", sl, num(model, "d"),
			num(model, "heads"), num(model, "head_dim"), num(model, "kv_heads"), num(model, "ffn"), str(model, "mlp"),
			str(model, "norm"), str(model, "pos"), num(setup, "parameter_count"), unit, num(model, "vocab"),
			num(setup, "T"));
	}
	const struct sb_json *files = source ? sb_json_get(source, "files") : NULL;
	for (size_t i = 0; files && i < files->n; i++)
		bprintf(&md, "%s`%s` %.12s…", i ? ", " : "", str(files->items[i], "name"), str(files->items[i], "sha256"));
	if (source)
		bprintf(&md, ".\n\n");
	if (source)
		; /* nothing was trained here */
	else if (sb_json_get(setup, "train_warm_steps")) {
		double ws = num(setup, "train_warm_steps"), wT = num(setup, "train_warm_T"), T = num(setup, "T");
		bprintf(&md, "Training: %.0f steps: %.0f at context %.0f (%.0f sequences per step), then %.0f at %.0f (%.0f per step)",
			num(setup, "train_steps"), ws, wT, num(setup, "train_batch") * T / wT,
			num(setup, "train_steps") - ws, T, num(setup, "train_batch"));
	} else {
		bprintf(&md, "Training: %.0f steps of %.0f sequences", num(setup, "train_steps"), num(setup, "train_batch"));
	}
	if (!source)
		bprintf(&md, " on the mixture `%s` (haystack corpus `%s`)", str(setup, "mixture"), str(setup, "haystack"));
	if (source)
		;
	else if (td)
	{
		bprintf(&md, "; final training loss %.4f nats/byte; training took %.0f s wall-clock", num(td, "final_loss"),
			num(td, "train_seconds"));
		if (sb_json_get(td, "train_cpu_seconds"))
			bprintf(&md, " and %.0f s of CPU time (user + system, all threads)", num(td, "train_cpu_seconds"));
		bprintf(&md, ".\n\n");
	}
	else if (!strcmp(str(setup, "train_status"), "no_log")) /* a checkpoint copied out of its run */
		bprintf(&md, ". The run directory has **no train.ndjson**: the model evaluated is its model.safetensors as it "
			"is (a checkpoint evaluated on its own, such as a step-NNNNNN.safetensors copied as the model).\n\n");
	else if (sb_json_get(setup, "train_status")) /* a trained run whose train.ndjson does not end in train.done */
		bprintf(&md, ". **The training did not finish** (train_status `%s`: the run's train.ndjson does not end in "
			"train.done); the model evaluated is whatever model.safetensors held.\n\n",
			str(setup, "train_status"));
	else
		bprintf(&md, ".\n\n");
	bprintf(&md,
		"Held-out text: the valid parts (bytes [0.9 n, 0.95 n)) of the corpora; %.0f fidelity windows of T+1 "
		"%ss; %.0f retrieval probes per task and method over %d tasks%s; tail positions are t >= %.0f "
		"(where the recipe's budget is below the causal row length). Masks act on the A layers only, per "
		"head; the random controls match the recipe's kept count on every row and head; budgets count %ss.\n\n",
		num(setup, "n_windows"), unit, num(setup, "n_probes"), nt,
		tokens ? " (made in bytes at about 0.85 T tokens, encoded turn by turn; answers compared in bytes)" : "",
		num(setup, "tail_from"), unit);

	/* ---- the three findings side by side ---- */
	const struct sb_json *gain = find(&r, "lm.fidelity.pair", "metric", "corr", "positions", "all");
	const struct sb_json *gain_t = find(&r, "lm.fidelity.pair", "metric", "corr", "positions", "tail");
	/* the recipe of the findings: the first of the list ("recipe", or with its numbers) */
	const char *recipe = "recipe";
	for (int i = 0; i < nm; i++)
		if (!strncmp(masks->items[i]->text, "recipe", 6)) {
			recipe = masks->items[i]->text;
			break;
		}
	const struct sb_json *rec_n = find(&r, "lm.retrieval", "method", recipe, "subset", "needle");
	const struct sb_json *den_n = find(&r, "lm.retrieval", "method", "dense", "subset", "needle");
	const struct sb_json *cb_n = find(&r, "lm.retrieval", "method", "content_blind", "subset", "needle");
	const struct sb_json *eff_g = find(&r, "lm.efficiency", "kernel", "dense_gemm", NULL, NULL);
	const struct sb_json *eff_r = find(&r, "lm.efficiency", "method", recipe, "kernel", "rows");
	const struct sb_json *blk32 = NULL;
	for (size_t i = 0; i < r.n; i++)
		if (!strcmp(kind_of(r.v[i]), "lm.blocks") && num(r.v[i], "topk") == 32)
			blk32 = r.v[i];
	/* an evaluation of no windows (retrieval only) or no probes (fidelity only) measured
	 * nothing for the other findings: n/a, not the nan of a null (sb-lm eval --windows 0) */
	int no_windows = num(setup, "n_windows") == 0, no_probes = num(setup, "n_probes") == 0;
	bprintf(&md, "## The three findings, study and this run\n\n");
	bprintf(&md, "| finding | the study (pretrained hybrids, 0.6B–27B) | this run |\n|---|---|---|\n");
	static const char find1[] = "| 1. fidelity gain of content top-k over the structure-matched random control (logit "
				    "correlation, recipe − struct_random) | +0.016 to +0.057 (median +0.024) over 15 model "
				    "cells; unstructured random collapses | ";
	static const char find2[] = "| 2. retrieval: the recipe vs content-blind patterns (needle arms, exact match) | "
				    "recipe 44/45 and 45/45 (near dense); content-blind patterns 0/270 at each context, even "
				    "with moderate-to-high logit fidelity | ";
	static const char find3[] = "| 3. the efficiency boundary | the pair reduction is a logical budget: a per-key "
				    "masked kernel still scores nearly every key and is not faster; blocks of 128+ keys "
				    "cannot express per-key selection | ";
	if (gain && num(gain, "n_windows") == 0) {
		bprintf(&md, "%sn/a (0 windows) |\n", find1);
	} else if (gain) {
		char g[7][64];
		f3(g[0], sizeof g[0], num(gain, "mean_diff"), "%+.4f");
		f3(g[1], sizeof g[1], num(gain, "ci_lo"), "%+.4f");
		f3(g[2], sizeof g[2], num(gain, "ci_hi"), "%+.4f");
		f3(g[3], sizeof g[3], num(gain, "p_t"), "%.2g");
		f3(g[4], sizeof g[4], gain_t ? num(gain_t, "mean_diff") : NAN, "%+.4f");
		f3(g[5], sizeof g[5], gain_t ? num(gain_t, "ci_lo") : NAN, "%+.4f");
		f3(g[6], sizeof g[6], gain_t ? num(gain_t, "ci_hi") : NAN, "%+.4f");
		bprintf(&md, "%s%s [%s, %s] over %.0f windows (paired t p = %s); tail positions %s [%s, %s] |\n", find1,
			g[0], g[1], g[2], num(gain, "n_windows"), g[3], g[4], g[5], g[6]);
	}
	if (!rec_n && no_probes) {
		bprintf(&md, "%sn/a (0 probes) |\n", find2);
	} else if (rec_n) {
		bprintf(&md,
			"%srecipe %.0f/%.0f [%.2f, %.2f]; dense %.0f/%.0f; content-blind (struct_random, "
			"random, structure) %.0f/%.0f [%.2f, %.2f] |\n", find2,
			num(rec_n, "correct"), num(rec_n, "n"), num(rec_n, "wilson_lo"), num(rec_n, "wilson_hi"),
			den_n ? num(den_n, "correct") : NAN, den_n ? num(den_n, "n") : NAN,
			cb_n ? num(cb_n, "correct") : NAN, cb_n ? num(cb_n, "n") : NAN, cb_n ? num(cb_n, "wilson_lo") : NAN,
			cb_n ? num(cb_n, "wilson_hi") : NAN);
	}
	if (!(eff_g && eff_r) && no_windows) { /* the kernels are timed on the first window */
		bprintf(&md, "%sn/a (0 windows) |\n", find3);
	} else if (eff_g && eff_r) {
		bprintf(&md,
			"%srecipe kernel %.2f ms vs dense %.2f ms (OpenBLAS; CPU time %.2f vs %.2f ms): "
			"speed-up %.2fx (CPU %.2fx) at kept fraction %.3f", find3,
			num(eff_r, "ms_min"), num(eff_g, "ms_min"), num(eff_r, "cpu_ms_min"), num(eff_g, "cpu_ms_min"),
			num(eff_r, "speedup_vs_dense_gemm"), num(eff_r, "cpu_speedup_vs_dense_gemm"),
			num(eff_r, "kept_fraction"));
		if (blk32) {
			const struct sb_json *bl = sb_json_get(blk32, "block");
			bprintf(&md, "; at k = 32 the per-key selection touches");
			for (size_t i = 0; bl && i < bl->n; i++)
				bprintf(&md, "%s %.1f blocks of %.0f (%.0f%% of causal keys covered)", i ? "," : "",
					num(bl->items[i], "blocks_per_row"), num(bl->items[i], "B"),
					100 * num(bl->items[i], "covered_fraction"));
		}
		bprintf(&md, " |\n");
	}
	bprintf(&md, "\n");

	/* ---- budgets ---- */
	bprintf(&md, "## Budgets (measured)\n\nFraction of causal (query, key) pairs kept, summed over the A layers "
		     "and heads; keys per row; blocks of 16/64/128 keys touched per row.\n\n");
	bprintf(&md, "| method | kept fraction (text) | keys/row | blocks16/row | blocks64/row | blocks128/row | kept "
		     "fraction (probes) | per A layer (text) |\n|---|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < nm; i++) {
		const char *mname = masks->items[i]->text;
		const struct sb_json *bt = find(&r, "lm.budget", "method", mname, "source", "text");
		const struct sb_json *bp = find(&r, "lm.budget", "method", mname, "source", "probes");
		if (!bt)
			continue;
		/* a source of no rows (windows 0, probes 0) has null ratios */
		static const char *const key[] = {"fraction", "keys_per_row", "blocks16_per_row", "blocks64_per_row",
						  "blocks128_per_row"};
		static const char *const fmt[] = {"%.4f", "%.1f", "%.2f", "%.2f", "%.2f"};
		char cell[6][64];
		for (int k = 0; k < 5; k++)
			f3(cell[k], sizeof cell[k], num(bt, key[k]), fmt[k]);
		f3(cell[5], sizeof cell[5], bp ? num(bp, "fraction") : NAN, "%.4f");
		bprintf(&md, "| %s | %s | %s | %s | %s | %s | %s | ", mname, cell[0], cell[1], cell[2], cell[3], cell[4],
			cell[5]);
		const struct sb_json *ls = sb_json_get(bt, "layers");
		for (size_t k = 0; ls && k < ls->n; k++) {
			bprintf(&md, "%sL%.0f ", k ? ", " : "", num(ls->items[k], "layer"));
			bnum(&md, "%.4f", num(ls->items[k], "fraction"));
		}
		bprintf(&md, " |\n");
	}
	if (no_windows || no_probes)
		bprintf(&md, "\nn/a (0 %s): no %s was evaluated; the %s have no rows to count (null in the records).\n",
			no_windows ? "windows" : "probes", no_windows ? "held-out window" : "probe",
			no_windows ? "text columns" : "probes column");

	/* ---- fidelity ---- */
	bprintf(&md, "\n## Fidelity on held-out text\n\nMeans over windows (95%% bootstrap CIs over windows). KL(dense || "
		     "masked) in nats; top-1 agreement; logit fidelity = mean per-position Pearson correlation of the "
		     "logit vectors; perplexity of the true next %s.\n\n", unit);
	if (!no_windows)
		bprintf(&md, "| method | KL | top-1 | logit corr | ppl | Δppl %% | KL (tail) | top-1 (tail) | corr (tail) |\n"
			     "|---|---|---|---|---|---|---|---|---|\n");
	char(*lab)[64] = calloc((size_t)(nm + nt + 4), 64);
	double *val = calloc((size_t)(nm + 4), sizeof *val), *lo = calloc((size_t)(nm + 4), sizeof *lo),
	       *hi = calloc((size_t)(nm + 4), sizeof *hi);
	if (!lab || !val || !lo || !hi) {
		free(lab);
		free(val);
		free(lo);
		free(hi);
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto out;
	}
	int nf = 0;
	double cmin = 1;
	for (int i = 0; i < nm; i++) {
		const char *mname = masks->items[i]->text;
		const struct sb_json *f = find(&r, "lm.fidelity", "method", mname, NULL, NULL);
		if (!f)
			continue;
		if (!no_windows) { /* (a null here: n/a) */
			static const char *const key[] = {"kl_ci_lo", "kl_ci_hi", "top1", "corr_ci_lo", "corr_ci_hi", "ppl",
							  "ppl_change_pct", "kl_tail", "top1_tail", "corr_tail"};
			static const char *const fmt[] = {"%.3g", "%.3g", "%.4f", "%.5f", "%.5f", "%.4f", "%+.3f", "%.4g", "%.4f", "%.5f"};
			char cell[10][64];
			for (int k = 0; k < 10; k++)
				f3(cell[k], sizeof cell[k], num(f, key[k]), fmt[k]);
			f3(a, sizeof a, num(f, "kl"), "%.4g");
			f3(b2, sizeof b2, num(f, "corr"), "%.5f");
			bprintf(&md, "| %s | %s [%s, %s] | %s | %s [%s, %s] | %s | %s | %s | %s | %s |\n", mname, a, cell[0],
				cell[1], cell[2], b2, cell[3], cell[4], cell[5], cell[6], cell[7], cell[8], cell[9]);
		}
		snprintf(lab[nf], 64, "%s", mname);
		val[nf] = num(f, "corr");
		lo[nf] = num(f, "corr_ci_lo");
		hi[nf] = num(f, "corr_ci_hi");
		if (val[nf] < cmin)
			cmin = val[nf];
		nf++;
	}
	if (!no_windows)
		bprintf(&md, "\nPaired over windows, recipe (A) − struct_random of the same s, w, k (B) (same windows, same "
			     "kept count per row and head):\n\n"
			     "| A | B | metric | positions | mean difference | 95%% CI | paired t p | Wilcoxon p | dz |\n"
			     "|---|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < r.n && !no_windows; i++) {
		const struct sb_json *p = r.v[i];
		if (strcmp(kind_of(p), "lm.fidelity.pair"))
			continue;
		static const char *const key[] = {"mean_diff", "ci_lo", "ci_hi", "p_t", "p_wilcoxon", "cohen_dz"};
		static const char *const fmt[] = {"%+.5g", "%+.5g", "%+.5g", "%.3g", "%.3g", "%.3g"};
		char cell[6][64];
		for (int k = 0; k < 6; k++)
			f3(cell[k], sizeof cell[k], num(p, key[k]), fmt[k]);
		bprintf(&md, "| %s | %s | %s | %s | %s | [%s, %s] | %s | %s | %s |\n", str(p, "method_a"), str(p, "method_b"),
			str(p, "metric"), str(p, "positions"), cell[0], cell[1], cell[2], cell[3], cell[4], cell[5]);
	}
	if (no_windows)
		bprintf(&md, "n/a (0 windows): no held-out text was evaluated; KL, top-1, logit correlation, perplexity "
			     "and the paired comparisons over windows are undefined (null in the records).\n");
	double lo_axis = cmin > 0.9 ? floor(cmin * 100 - 0.5) / 100 : cmin > 0 ? 0 : floor(cmin * 10) / 10;
	svg_bars(&svg2, "Logit fidelity (mean per-position Pearson correlation with dense; 95% bootstrap CI)",
		 "logit correlation", lab, val, lo, hi, nf, lo_axis, 1.0, no_windows ? "n/a (0 windows)" : "n/a");

	/* ---- retrieval ---- */
	bprintf(&md, "\n## Retrieval (exact match; 95%% Wilson intervals)\n\n");
	if (no_probes)
		bprintf(&md, "n/a (0 probes): no retrieval probe was evaluated; accuracies, intervals and the paired "
			     "comparisons are undefined (no lm.retrieval records).\n");
	else {
		bprintf(&md, "| method | needle arms | all %d tasks |", nt);
		for (int t = 0; t < nt; t++)
			bprintf(&md, " %s |", tasks->items[t]->text);
		bprintf(&md, "\n|---|---|---|");
		for (int t = 0; t < nt; t++)
			bprintf(&md, "---|");
		bprintf(&md, "\n");
	}
	int nr = 0;
	for (int i = 0; i < nm && !no_probes; i++) {
		const char *mname = masks->items[i]->text;
		const struct sb_json *ra = find(&r, "lm.retrieval", "method", mname, "subset", "all");
		const struct sb_json *rn = find(&r, "lm.retrieval", "method", mname, "subset", "needle");
		if (!ra)
			continue;
		bprintf(&md, "| %s | ", mname);
		if (rn)
			bprintf(&md, "%.0f/%.0f = %.3f [%.3f, %.3f]", num(rn, "correct"), num(rn, "n"), num(rn, "accuracy"),
				num(rn, "wilson_lo"), num(rn, "wilson_hi"));
		bprintf(&md, " | %.0f/%.0f = %.3f [%.3f, %.3f] |", num(ra, "correct"), num(ra, "n"), num(ra, "accuracy"),
			num(ra, "wilson_lo"), num(ra, "wilson_hi"));
		for (int t = 0; t < nt; t++) {
			const struct sb_json *rt = find(&r, "lm.retrieval", "method", mname, "subset", tasks->items[t]->text);
			bprintf(&md, " ");
			bnum(&md, "%.2f", rt ? num(rt, "accuracy") : NAN);
			bprintf(&md, " |");
		}
		bprintf(&md, "\n");
		snprintf(lab[nr], 64, "%s", mname);
		const struct sb_json *use = rn ? rn : ra;
		val[nr] = num(use, "accuracy");
		lo[nr] = num(use, "wilson_lo");
		hi[nr] = num(use, "wilson_hi");
		nr++;
	}
	if (cb_n)
		bprintf(&md, "\nContent-blind patterns pooled (struct_random, random, structure) on the needle arms: "
			     "%.0f/%.0f [%.3f, %.3f].\n",
			num(cb_n, "correct"), num(cb_n, "n"), num(cb_n, "wilson_lo"), num(cb_n, "wilson_hi"));
	if (!no_probes)
		bprintf(&md, "\nPaired on the same probes, recipe (A) against dense and each method run with its s, w, k "
			     "(B): 2×2 counts, difference in accuracy with Newcombe's paired score CI, exact McNemar p.\n\n"
			     "| A | B | subset | n | A right, B wrong | A wrong, B right | both right | diff | 95%% CI | "
			     "McNemar p |\n|---|---|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < r.n; i++) {
		const struct sb_json *p = r.v[i];
		if (strcmp(kind_of(p), "lm.retrieval.pair"))
			continue;
		f3(c, sizeof c, num(p, "mcnemar_p"), "%.3g");
		bprintf(&md, "| %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %+.3f | [%+.3f, %+.3f] | %s |\n",
			str(p, "method_a"), str(p, "method_b"), str(p, "subset"), num(p, "n"), num(p, "n10"), num(p, "n01"), num(p, "n11"), num(p, "diff"),
			num(p, "ci_lo"), num(p, "ci_hi"), c);
	}
	svg_bars(&svg1, "Needle retrieval (niah_single_1..3), exact match, 95% Wilson CI", "accuracy", lab, val, lo, hi,
		 nr, 0.0, 1.0, no_probes ? "n/a (0 probes)" : "n/a");

	/* ---- efficiency ---- */
	bprintf(&md, "\n## Efficiency (one A layer, T = %.0f, CPU, one thread; minimum over repetitions)\n\n",
		num(setup, "T"));
	bprintf(&md, "Wall-clock and thread CPU time (the machine may be shared: CPU time is the steadier of the "
		     "two). Speed-ups are dense / method, as measured (below 1 = slower than dense). `dense_gemm` is "
		     "the training path's OpenBLAS attention (full T×T product); `rows` is the evaluation kernel, "
		     "whose selection needs the scores it selects on (the recipe scores every causal key).");
	if (eff_g && str(eff_g, "blas")[0])
		bprintf(&md, " OpenBLAS ran its `%s` kernels.", str(eff_g, "blas"));
	if (eff_g && sb_json_bool(sb_json_get(eff_g, "blas_generic"), 0))
		bprintf(&md, " **These are OpenBLAS's generic pre-AVX2 kernels on a CPU with AVX2 (it did not know the "
			     "model): the dense baseline is slower than this CPU allows, so every speed-up against "
			     "`dense_gemm` is overstated. Rerun with `OPENBLAS_CORETYPE` set (SkylakeX on AVX-512, Haswell on "
			     "AVX2).** The speed-ups against dense rows do not depend on OpenBLAS.");
	bprintf(&md, "\n\n");
	int no_timing = no_windows && !eff_g; /* the kernels are timed on the first held-out window */
	if (no_timing)
		bprintf(&md, "n/a (0 windows): the kernels are timed on a held-out window; none was evaluated.\n");
	else
		bprintf(&md, "| method | kernel | wall ms | CPU ms | speed-up vs dense (wall) | vs dense (CPU) | vs dense rows "
			     "(CPU) | keys scored/row | keys kept/row |\n|---|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < r.n; i++) {
		const struct sb_json *p = r.v[i];
		if (strcmp(kind_of(p), "lm.efficiency"))
			continue;
		if (sb_json_get(p, "cpu_speedup_vs_dense_rows"))
			f3(d, sizeof d, num(p, "cpu_speedup_vs_dense_rows"), "%.2fx");
		else /* dense_gemm: not a rows kernel (no value to have, not a null) */
			snprintf(d, sizeof d, "—");
		bprintf(&md, "| %s | %s | %.3f | %.3f | %.2fx | %.2fx | %s | %.1f | %.1f |\n", str(p, "method"),
			str(p, "kernel"), num(p, "ms_min"), num(p, "cpu_ms_min"), num(p, "speedup_vs_dense_gemm"),
			num(p, "cpu_speedup_vs_dense_gemm"), d, num(p, "keys_scored_per_row"),
			num(p, "keys_kept_per_row"));
	}
	if (!no_timing) {
		bprintf(&md, "\nBlock granularity: for each budget (the recipe with k free keys), the blocks of B keys its "
			     "per-key selection touches per row, the keys those blocks cover, and the CPU time of a "
			     "block-sparse kernel that computes those whole blocks (dense OpenBLAS for reference).\n\n");
		bprintf(&md, "| budget | keys kept/row (fraction) | B | blocks/row | keys covered/row (fraction) | kernel "
			     "CPU ms | speed-up vs dense (CPU) |\n|---|---|---|---|---|---|---|\n");
	}
	int nb = 0;
	double bval[32], blo[32], bhi[32];
	char(*blab)[64] = calloc(32, 64);
	for (size_t i = 0; i < r.n && blab; i++) {
		const struct sb_json *p = r.v[i];
		if (strcmp(kind_of(p), "lm.blocks"))
			continue;
		const struct sb_json *bl = sb_json_get(p, "block");
		for (size_t k = 0; bl && k < bl->n; k++) {
			const struct sb_json *q = bl->items[k];
			snprintf(e, sizeof e, "k=%.0f", num(p, "topk"));
			bprintf(&md, "| %s | %.1f (%.3f) | %.0f | %.2f | %.1f (%.3f) | %.3f | %.2fx |\n", k ? "" : e,
				num(p, "keys_kept_per_row"), num(p, "kept_fraction"), num(q, "B"), num(q, "blocks_per_row"),
				num(q, "keys_covered_per_row"), num(q, "covered_fraction"), num(q, "cpu_ms_min"),
				num(q, "cpu_speedup_vs_dense_gemm"));
			if (nb < 32) {
				snprintf(blab[nb], 64, "k=%.0f, B=%.0f", num(p, "topk"), num(q, "B"));
				bval[nb] = num(q, "covered_fraction");
				blo[nb] = bhi[nb] = NAN;
				nb++;
			}
		}
	}
	if (blab)
		svg_bars(&svg3, "Causal keys covered by the blocks a per-key selection touches (fraction)",
			 "fraction of causal (query, key) pairs", blab, bval, blo, bhi, nb, 0.0, 1.0,
			 no_timing ? "n/a (0 windows)" : "n/a");
	free(blab);
	bprintf(&md, "\n## Figures\n\n![needle retrieval](lm-retrieval.svg)\n\n![logit fidelity](lm-fidelity.svg)\n\n"
		     "![block coverage](lm-blocks.svg)\n\n");
	bprintf(&md, "Per-probe outcomes are the `probe.result` records of the evaluation; `sb-stats` computes the same "
		     "Wilson intervals and McNemar tests from them (`sb-stats --baseline dense --all-pairs`).\n");
	free(lab);
	free(val);
	free(lo);
	free(hi);
	rc = write_buf(out_dir, "lm-report.md", &md, err);
	if (!rc)
		rc = write_buf(out_dir, "lm-retrieval.svg", &svg1, err);
	if (!rc)
		rc = write_buf(out_dir, "lm-fidelity.svg", &svg2, err);
	if (!rc)
		rc = write_buf(out_dir, "lm-blocks.svg", &svg3, err);
out:
	for (size_t i = 0; i < r.n; i++)
		sb_json_free(r.v[i]);
	free(r.v);
	free(md.p);
	free(svg1.p);
	free(svg2.p);
	free(svg3.p);
	return rc;
}
