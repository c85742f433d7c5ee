/* report.c — names, tables and stats.* records. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* ---- names (PROTOCOL A1, A7, A9) ---- */

static const struct {
	const char *task, *display;
	double threshold; /* pre-fixed softmax threshold of Table 2 (A7); NAN: none ("—") */
} TASKS[] = {
    {"mnist", "MNIST", 0.95},
    {"fashion_mnist", "F-MNIST", 0.85},
    {"kmnist", "KMNIST", 0.88},
    {"cifar10", "CIFAR-10", 0.60},
    {"cifar100", "CIFAR-100", 0.25},
    {"twenty_news", "20NG", 0.55},
    {"synthetic_marker", "synthetic", NAN},
    {"emnist_balanced", "EMNIST-balanced", NAN},
    {"emnist_letters", "EMNIST-letters", NAN},
    {"emnist_digits", "EMNIST-digits", NAN},
    {"k49", "K49", NAN},
    {"svhn", "SVHN", NAN},
    {"usps", "USPS", NAN},
};
#define N_TASKS (int)(sizeof TASKS / sizeof TASKS[0])

static const struct {
	const char *method, *display;
	int order;
} METHODS[] = {
    /* (the study's "topk_softmax" is read as topk_softmax_025: load.c, canonical_method) */
    {"softmax", "softmax", 0},         {"topk_softmax_0125", "top-k 0.125", 1}, {"topk_softmax_025", "top-k 0.25", 2},
    {"topk_softmax_05", "top-k 0.5", 3}, {"sparsemax", "sparsemax", 4},         {"entmax15", "entmax-1.5", 5},
    {"headwise_adaptive_entmax", "HAE", 6},
};
#define N_METHODS (int)(sizeof METHODS / sizeof METHODS[0])
#define N_TABLE2_METHODS 7 /* orders 0..6 */

const char *task_display(const char *task)
{
	for (int i = 0; i < N_TASKS; i++)
		if (!strcmp(TASKS[i].task, task))
			return TASKS[i].display;
	return task;
}

double task_threshold(const char *task)
{
	for (int i = 0; i < N_TASKS; i++)
		if (!strcmp(TASKS[i].task, task))
			return TASKS[i].threshold;
	return NAN;
}

int task_order(const char *task)
{
	for (int i = 0; i < N_TASKS; i++)
		if (!strcmp(TASKS[i].task, task))
			return i;
	return 1000;
}

int method_order(const char *method)
{
	for (int i = 0; i < N_METHODS; i++)
		if (!strcmp(METHODS[i].method, method))
			return METHODS[i].order;
	return 100;
}

const char *method_display(const char *method)
{
	for (int i = 0; i < N_METHODS; i++)
		if (!strcmp(METHODS[i].method, method))
			return METHODS[i].display;
	return method;
}

/* ---- helpers ---- */

#define DASH "\xE2\x80\x94" /* — */

static const char *gtask(const struct data *d, int g)
{
	return d->tasks.s[d->groups[g].task];
}

static void row_label(const struct data *d, int g, char *buf, size_t n)
{
	const struct group *gr = &d->groups[g];
	const char *arch = d->archs.s[gr->arch], *tier = d->tiers.s[gr->tier];
	if (!strcmp(arch, "plain") && !strcmp(tier, "compact"))
		snprintf(buf, n, "%s", task_display(d->tasks.s[gr->task]));
	else
		snprintf(buf, n, "%s (%s/%s)", task_display(d->tasks.s[gr->task]), arch, tier);
}

/* Group summaries in PROTOCOL A1 task order (then first appearance, then arch/tier). */
static int *ordered_groups(const struct data *d, const struct group_summary *s, int n)
{
	int *o = malloc((size_t)(n ? n : 1) * sizeof *o);
	if (!o)
		return NULL;
	for (int i = 0; i < n; i++)
		o[i] = i;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0; j--) {
			int a = o[j - 1], b = o[j];
			int ta = task_order(gtask(d, s[a].group)), tb = task_order(gtask(d, s[b].group));
			int ka = d->groups[s[a].group].task, kb = d->groups[s[b].group].task;
			int swap =
			    ta > tb || (ta == tb && ka > kb) || (ta == tb && ka == kb && s[a].group > s[b].group);
			if (!swap)
				break;
			o[j - 1] = b;
			o[j] = a;
		}
	return o;
}

static void fmt_delta(char *buf, size_t n, double v, int star)
{
	if (!isfinite(v))
		snprintf(buf, n, "%s", DASH);
	else
		snprintf(buf, n, "%+.4f%s", v, star ? "*" : "");
}

static void fmt_p(char *buf, size_t n, double p)
{
	if (!isfinite(p))
		snprintf(buf, n, "%s", DASH);
	else if (p == 0)
		snprintf(buf, n, "0");
	else if (p < 1e-4)
		snprintf(buf, n, "%.2e", p);
	else
		snprintf(buf, n, "%.4f", p);
}

/* ---- Table 2 (validation) and its test counterpart ---- */

static struct table *main_table(const struct data *d, const struct comparison *cmp, const struct group_summary *gs,
                                int ngs, const struct opts *o, int test)
{
	/* columns: Dataset, Threshold, the baseline's mean, the six sparse methods of Table 2
	 * (method orders 1..6), then any other compared method (softmax included when it is not
	 * the baseline) in order of appearance */
	int extra[64], nextra = 0;
	for (int i = 0; i < ngs; i++)
		for (int c = gs[i].first_cmp; c < gs[i].first_cmp + gs[i].n_cmp; c++) {
			int m = cmp[c].method, om = method_order(d->methods.s[m]);
			if (om >= 1 && om < N_TABLE2_METHODS)
				continue;
			int seen = 0;
			for (int k = 0; k < nextra; k++)
				seen |= extra[k] == m;
			if (!seen && nextra < 64)
				extra[nextra++] = m;
		}
	int ncols = 2 + N_TABLE2_METHODS + nextra;
	char title[512];
	if (test)
		snprintf(title, sizeof title,
		         "Test accuracy (single read): %s mean and paired delta (method - %s) over seeds", o->baseline,
		         o->baseline);
	else
		snprintf(title, sizeof title,
		         "Table 2: validation accuracy at the best epoch (patience %d): %s mean and paired delta "
		         "(method - %s) over seeds",
		         o->patience, o->baseline, o->baseline);
	struct table *t = table_new(test ? "test" : "table2", title, ncols);
	table_head(t, 0, "Dataset", ALIGN_LEFT);
	table_head(t, 1, "Threshold", ALIGN_RIGHT);
	const char *heads[N_TABLE2_METHODS] = {"softmax",   "top-k 0.125", "top-k 0.25", "top-k 0.5",
	                                       "sparsemax", "entmax-1.5",  "HAE"};
	for (int k = 0; k < N_TABLE2_METHODS; k++)
		table_head(t, 2 + k, heads[k], ALIGN_RIGHT);
	table_head(t, 2, o->baseline, ALIGN_RIGHT);
	for (int k = 0; k < nextra; k++)
		table_head(t, 2 + N_TABLE2_METHODS + k, d->methods.s[extra[k]], ALIGN_RIGHT);
	int *ord = ordered_groups(d, gs, ngs);
	int any_threshold = 0;
	for (int ii = 0; ord && ii < ngs; ii++) {
		const struct group_summary *s = &gs[ord[ii]];
		if (!s->has_baseline)
			continue;
		int r = table_row(t);
		char lab[256], buf[64];
		row_label(d, s->group, lab, sizeof lab);
		table_set(t, r, 0, "%s", lab);
		double thr = task_threshold(gtask(d, s->group));
		if (isfinite(thr)) {
			any_threshold = 1;
			table_set(t, r, 1, "%.2f", thr);
		} else {
			table_set(t, r, 1, "%s", DASH);
		}
		for (int k = 1; k < ncols - 1; k++)
			table_set(t, r, 1 + k, "%s", DASH);
		table_set(t, r, 2, "%.4f", s->baseline_mean);
		for (int c = s->first_cmp; c < s->first_cmp + s->n_cmp; c++) {
			int om = method_order(d->methods.s[cmp[c].method]), col = -1;
			if (om >= 1 && om < N_TABLE2_METHODS)
				col = 2 + om;
			for (int k = 0; k < nextra; k++)
				if (extra[k] == cmp[c].method)
					col = 2 + N_TABLE2_METHODS + k;
			if (col < 0)
				continue;
			fmt_delta(buf, sizeof buf, cmp[c].t.mean, cmp[c].supported);
			table_set(t, r, col, "%s", buf);
		}
	}
	free(ord);
	table_note(t,
	           "Cells: %s column = mean %s accuracy of %s; others = mean paired difference (method - %s) over the "
	           "seeds present in both arms. * = Holm-adjusted paired-t p < %g (Holm over the protocol's six "
	           "sparse methods of each row; any other method is a family of its own). %s = no paired "
	           "comparison: fewer than %d seeds present in both arms%s.%s",
	           o->baseline, test ? "test" : "validation", o->baseline, o->baseline, o->alpha, DASH,
	           o->min_seeds > 1 ? o->min_seeds : 1,
	           test ? " (a top-k ratio the frozen selection did not keep has no test read)" : "",
	           test ? "" : " Threshold: the pre-fixed softmax threshold of PROTOCOL A7.");
	if (!any_threshold || test)
		table_drop_col(t, 1);
	return t;
}

static struct table *detail_table(const struct data *d, const struct comparison *cmp, const struct group_summary *gs,
                                  int ngs, const struct opts *o, int test)
{
	struct table *t = table_new(test ? "test_detail" : "detail",
	                            test ? "Test reads: paired comparisons in detail"
	                                 : "Validation (best epoch): paired comparisons in detail",
	                            12);
	char ci[64];
	snprintf(ci, sizeof ci, "%g%% CI (bootstrap)", 100 * o->level);
	const char *h[12] = {"Dataset", "Method", "n",     "baseline", "method",       "delta",
	                     ci,        "t",      "p (t)", "p (Holm)", "p (Wilcoxon)", "dz"};
	for (int c = 0; c < 12; c++)
		table_head(t, c, h[c], c < 2 ? ALIGN_LEFT : ALIGN_RIGHT);
	int *ord = ordered_groups(d, gs, ngs);
	for (int ii = 0; ord && ii < ngs; ii++) {
		const struct group_summary *s = &gs[ord[ii]];
		for (int c = s->first_cmp; c < s->first_cmp + s->n_cmp; c++) {
			const struct comparison *cm = &cmp[c];
			int r = table_row(t);
			char lab[256], b1[64], b2[64];
			row_label(d, s->group, lab, sizeof lab);
			table_set(t, r, 0, "%s", lab);
			table_set(t, r, 1, "%s", method_display(d->methods.s[cm->method]));
			table_set(t, r, 2, "%d", cm->n);
			table_set(t, r, 3, "%.4f", cm->mean_base);
			table_set(t, r, 4, "%.4f", cm->mean_method);
			fmt_delta(b1, sizeof b1, cm->t.mean, cm->supported);
			table_set(t, r, 5, "%s", b1);
			table_set(t, r, 6, "[%+.4f, %+.4f]", cm->ci_lo, cm->ci_hi);
			if (isfinite(cm->t.t))
				table_set(t, r, 7, "%.3f", cm->t.mean < 0 ? -cm->t.t : cm->t.t);
			else
				table_set(t, r, 7, "%s", DASH);
			fmt_p(b1, sizeof b1, cm->t.p);
			table_set(t, r, 8, "%s", b1);
			fmt_p(b1, sizeof b1, cm->p_holm);
			table_set(t, r, 9, "%s", b1);
			fmt_p(b2, sizeof b2, cm->w.p);
			table_set(t, r, 10, "%s%s", b2, cm->w.exact ? "" : " (approx)");
			if (isfinite(cm->dz))
				table_set(t, r, 11, "%.2f", cm->dz);
			else
				table_set(t, r, 11, "%s", DASH);
		}
	}
	free(ord);
	table_note(
	    t,
	    "delta = mean(method - %s); CI: %d-resample percentile bootstrap over seeds (seed %llu); t: signed "
	    "paired t; p (t): two-sided (PROTOCOL A7 rules); Holm over the six sparse methods of each dataset (any "
	    "other method: a family of its own); * = Holm p < %g; "
	    "Wilcoxon: signed-rank, zero differences dropped, exact for <= 50 non-zero differences; dz = "
	    "mean/sd of the differences.",
	    o->baseline, o->resamples, (unsigned long long)o->seed, o->alpha);
	return t;
}

/* Budgets shown: every budget when the longest run has <= 10 epochs, else PROTOCOL A9's
 * 3, 6, 9, 12, 18, 24, 30 up to the longest, plus the longest itself. */
static int budget_columns(int Kmax, int *cols)
{
	int n = 0;
	if (Kmax <= 10) {
		for (int E = 1; E <= Kmax; E++)
			cols[n++] = E;
		return n;
	}
	static const int A9[] = {3, 6, 9, 12, 18, 24, 30};
	for (int i = 0; i < 7; i++)
		if (A9[i] <= Kmax)
			cols[n++] = A9[i];
	if (cols[n - 1] != Kmax)
		cols[n++] = Kmax;
	return n;
}

static struct table *budget_table(const struct data *d, const struct analysis *a, const struct opts *o)
{
	int Kmax = 0;
	for (int c = 0; c < a->n_val; c++)
		if (a->val[c].K > Kmax)
			Kmax = a->val[c].K;
	if (!Kmax)
		return NULL;
	int cols[16];
	int nb = budget_columns(Kmax, cols);
	struct table *t = table_new("budget",
	                            "Paired difference (method - baseline) of the best validation accuracy within the "
	                            "first E epochs, in percentage points",
	                            2 + nb + 3);
	table_head(t, 0, "Dataset", ALIGN_LEFT);
	table_head(t, 1, "Method", ALIGN_LEFT);
	for (int i = 0; i < nb; i++) {
		char h[32];
		snprintf(h, sizeof h, "E=%d", cols[i]);
		table_head(t, 2 + i, h, ALIGN_RIGHT);
	}
	char h1[64], h2[64];
	snprintf(h1, sizeof h1, "sign change [%g%% CI]", 100 * o->level);
	snprintf(h2, sizeof h2, "switch epoch [%g%% CI]", 100 * o->level);
	table_head(t, 2 + nb, h1, ALIGN_RIGHT);
	table_head(t, 3 + nb, "first negative", ALIGN_RIGHT);
	table_head(t, 4 + nb, h2, ALIGN_RIGHT);
	int *ord = ordered_groups(d, a->vgroups, a->n_vgroups);
	for (int ii = 0; ord && ii < a->n_vgroups; ii++) {
		const struct group_summary *s = &a->vgroups[ord[ii]];
		for (int c = s->first_cmp; c < s->first_cmp + s->n_cmp; c++) {
			const struct comparison *cm = &a->val[c];
			int r = table_row(t);
			char lab[256];
			row_label(d, s->group, lab, sizeof lab);
			table_set(t, r, 0, "%s", lab);
			table_set(t, r, 1, "%s", method_display(d->methods.s[cm->method]));
			for (int i = 0; i < nb; i++) {
				if (cols[i] <= cm->K)
					table_set(t, r, 2 + i, "%+.3f", 100.0 * cm->b_mean[cols[i] - 1]);
				else
					table_set(t, r, 2 + i, "%s", DASH);
			}
			table_set(t, r, 2 + nb, "%d [%g, %g]", cm->sc.sign_change, cm->sc.sc_lo, cm->sc.sc_hi);
			table_set(t, r, 3 + nb, "%d", cm->sc.first_negative);
			if (cm->sc.switch_epoch > 0)
				table_set(t, r, 4 + nb, "%d [%g, %g]", cm->sc.switch_epoch, cm->sc.sw_lo, cm->sc.sw_hi);
			else
				table_set(t, r, 4 + nb, "%s", DASH);
		}
	}
	free(ord);
	table_note(t,
	           "E = epochs of training seen (budget). sign change = first budget from which the mean difference is "
	           "< 0 at every larger budget (K+1 = none within the K budgets, censored); first negative = first "
	           "budget with a negative mean difference; switch epoch = PROTOCOL A8 target (3 if the mean of "
	           "budgets 1..3 <= 0, else the first E in 4..K-2 with E, E+1, E+2 all <= 0, else K+1). CIs: %d "
	           "bootstrap resamples of seeds (seed %llu), percentile.",
	           o->resamples, (unsigned long long)o->seed);
	return t;
}

static struct table *probe_table(const struct data *d, const struct analysis *a, const struct opts *o)
{
	if (!a->n_rates)
		return NULL;
	struct table *t = table_new("probes", "Retrieval probes: accuracy per method with Wilson intervals", 6);
	char ci[64];
	snprintf(ci, sizeof ci, "%g%% CI (Wilson)", 100 * o->level);
	const char *h[6] = {"Model", "Task", "Method", "correct / n", "accuracy", ci};
	for (int c = 0; c < 6; c++)
		table_head(t, c, h[c], c < 3 ? ALIGN_LEFT : ALIGN_RIGHT);
	for (int i = 0; i < a->n_rates; i++) {
		const struct probe_rate *p = &a->rates[i];
		int r = table_row(t);
		table_set(t, r, 0, "%s", d->models.s[p->model]);
		table_set(t, r, 1, "%s", p->task < 0 ? "all" : d->tasks.s[p->task]);
		table_set(t, r, 2, "%s", d->methods.s[p->method]);
		table_set(t, r, 3, "%lld / %lld", (long long)p->k, (long long)p->n);
		table_set(t, r, 4, "%.4f", (double)p->k / (double)p->n);
		table_set(t, r, 5, "[%.4f, %.4f]", p->lo, p->hi);
	}
	table_note(t, "Wilson score interval at level %g.", o->level);
	return t;
}

static struct table *probe_pair_table(const struct data *d, const struct analysis *a, const struct opts *o)
{
	if (!a->n_pairs)
		return NULL;
	struct table *t = table_new("probe_pairs", "Retrieval probes: paired comparisons on the same probes", 12);
	char ci[64];
	snprintf(ci, sizeof ci, "%g%% CI (Newcombe)", 100 * o->level);
	const char *h[12] = {
	    "Model",   "A", "B", "n", "both", "A only", "B only", "neither", "delta (A - B)", ci, "p (McNemar exact)",
	    "p (Holm)"};
	for (int c = 0; c < 12; c++)
		table_head(t, c, h[c], c < 3 ? ALIGN_LEFT : ALIGN_RIGHT);
	for (int i = 0; i < a->n_pairs; i++) {
		const struct probe_pair *p = &a->pairs[i];
		int r = table_row(t);
		char b[64];
		table_set(t, r, 0, "%s", d->models.s[p->model]);
		table_set(t, r, 1, "%s", d->methods.s[p->a]);
		table_set(t, r, 2, "%s", d->methods.s[p->b]);
		table_set(t, r, 3, "%lld", (long long)p->pb.n);
		table_set(t, r, 4, "%lld", (long long)p->pb.n11);
		table_set(t, r, 5, "%lld", (long long)p->pb.n10);
		table_set(t, r, 6, "%lld", (long long)p->pb.n01);
		table_set(t, r, 7, "%lld", (long long)p->pb.n00);
		table_set(t, r, 8, "%+.4f%s", p->pb.diff, p->p_holm < o->alpha ? "*" : "");
		table_set(t, r, 9, "[%+.4f, %+.4f]", p->pb.lo, p->pb.hi);
		fmt_p(b, sizeof b, p->pb.mcnemar_p);
		table_set(t, r, 10, "%s", b);
		fmt_p(b, sizeof b, p->p_holm);
		table_set(t, r, 11, "%s", b);
	}
	table_note(
	    t,
	    "Pairs matched on (task, probe). delta = accuracy of A - accuracy of B; CI: Newcombe (1998) method 10 "
	    "at level %g; McNemar: exact two-sided binomial test on the discordant pairs; Holm over the "
	    "comparisons of each model; * = Holm p < %g.",
	    o->level, o->alpha);
	return t;
}

/* ---- against the published values ---- */

static const char *QUANTITY[5] = {"mean", "delta", "best_delta", "budget_delta", "test_mean"};

static void fmt_pub(char *buf, size_t n, enum pub_quantity q, double v, int star)
{
	if (!isfinite(v))
		snprintf(buf, n, "%s", DASH);
	else if (pub_is_mean(q))
		snprintf(buf, n, "%.4f", v);
	else if (q == PUB_BUDGET_DELTA) /* published in percentage points to 3 decimals */
		snprintf(buf, n, "%+.5f", v);
	else
		fmt_delta(buf, n, v, star == 1);
}

/* how many published values we measured, and how many of those lie inside our interval */
static void pub_counts(const struct data *d, const struct analysis *a, int *measured, int *inside)
{
	*measured = *inside = 0;
	for (int i = 0; i < a->n_pub; i++)
		if (isfinite(a->pub[i].ours)) {
			(*measured)++;
			*inside += pub_inside(&a->pub[i], &d->pubs[a->pub[i].pub]);
		}
}

static struct table *published_table(const struct data *d, const struct analysis *a, const struct opts *o)
{
	if (!a->n_pub)
		return NULL;
	int nm, ni;
	pub_counts(d, a, &nm, &ni);
	char title[256], ci[64];
	snprintf(title, sizeof title,
	         "Against the published values: validation accuracy at the best epoch (patience %d), and test reads",
	         o->patience);
	struct table *t = table_new("published", title, 10);
	snprintf(ci, sizeof ci, "%g%% CI (bootstrap)", 100 * o->level);
	const char *h[10] = {"Dataset", "Method", "Quantity", "Source", "published", "ours", ci, "n", "inside", "ours - published"};
	for (int c = 0; c < 10; c++)
		table_head(t, c, h[c], c < 4 ? ALIGN_LEFT : ALIGN_RIGHT);
	for (int i = 0; i < a->n_pub; i++) { /* in analysis order (run_published) */
		const struct pub_result *r = &a->pub[i];
		const struct published *p = &d->pubs[r->pub];
		int row = table_row(t);
		char lab[256], b1[64], b2[64];
		row_label(d, r->group, lab, sizeof lab);
		table_set(t, row, 0, "%s", lab);
		char named[96] = ""; /* a best delta: the method the source names, if it does */
		if (p->method)
			snprintf(named, sizeof named, " (published: %s)", method_display(p->method));
		if (p->quantity != PUB_BEST_DELTA)
			table_set(t, row, 1, "%s", method_display(p->method));
		else if (r->method < 0)
			table_set(t, row, 1, "best%s", named);
		else
			table_set(t, row, 1, "best of %d: %s%s", r->n_best, method_display(d->methods.s[r->method]), named);
		if (p->quantity == PUB_BUDGET_DELTA)
			table_set(t, row, 2, "delta within %d epochs", p->budget);
		else if (p->quantity == PUB_TEST_MEAN)
			table_set(t, row, 2, "test mean");
		else
			table_set(t, row, 2, "%s", QUANTITY[p->quantity]);
		table_set(t, row, 3, "%s", p->source);
		fmt_pub(b1, sizeof b1, p->quantity, p->value, p->supported);
		table_set(t, row, 4, "%s", b1);
		fmt_pub(b2, sizeof b2, p->quantity, r->ours, r->ours_supported);
		table_set(t, row, 5, "%s", b2);
		if (isfinite(r->ours)) {
			int dec = p->quantity == PUB_BUDGET_DELTA ? 5 : 4;
			if (pub_is_mean(p->quantity))
				table_set(t, row, 6, "[%.4f, %.4f]", r->lo, r->hi);
			else
				table_set(t, row, 6, "[%+.*f, %+.*f]", dec, r->lo, dec, r->hi);
			table_set(t, row, 7, "%d", r->n);
			table_set(t, row, 8, "%s", pub_inside(r, p) ? "yes" : "no");
			table_set(t, row, 9, "%+.*f", dec, r->ours - p->value);
		} else {
			table_set(t, row, 6, "%s", r->why);
			for (int c = 7; c < 10; c++)
				table_set(t, row, c, "%s", DASH);
		}
	}
	table_note(t,
	           "%d of the %d published values measured lie inside our interval. "
	           "published: the published.value records read (their source); ours: mean %s accuracy (mean; test "
	           "mean: the test reads' accuracy) or "
	           "mean paired difference method - %s over seeds (delta), at the best epoch under patience %d "
	           "(delta within E epochs: the best within the first E, no early stopping; values published at "
	           "another patience are not compared); "
	           "best of N: our largest mean difference among the N sparse methods run (the study's is among "
	           "six; a maximum, so biased upward). * = Holm-supported at %g (published: as the source marks "
	           "it). inside: the published value lies in our %d-resample percentile bootstrap interval (seed "
	           "%llu), which holds our seeds' variation only, not the published run's: 'no' alone is not a "
	           "disagreement.",
	           ni, nm, "validation", o->baseline, o->patience, o->alpha, o->resamples, (unsigned long long)o->seed);
	return t;
}

struct table **report_tables(const struct data *d, const struct analysis *a, const struct opts *o, int *n)
{
	struct table **t = calloc(9, sizeof *t);
	*n = 0;
	if (!t)
		return NULL;
	if (a->n_val) {
		t[(*n)++] = main_table(d, a->val, a->vgroups, a->n_vgroups, o, 0);
		t[(*n)++] = detail_table(d, a->val, a->vgroups, a->n_vgroups, o, 0);
		struct table *b = budget_table(d, a, o);
		if (b)
			t[(*n)++] = b;
	}
	if (a->n_test) {
		t[(*n)++] = main_table(d, a->test, a->tgroups, a->n_tgroups, o, 1);
		t[(*n)++] = detail_table(d, a->test, a->tgroups, a->n_tgroups, o, 1);
	}
	struct table *p = probe_table(d, a, o);
	if (p)
		t[(*n)++] = p;
	p = probe_pair_table(d, a, o);
	if (p)
		t[(*n)++] = p;
	p = published_table(d, a, o);
	if (p)
		t[(*n)++] = p;
	return t;
}

/* ---- records ---- */

static void k_group(struct sb_jw *w, const struct data *d, int g)
{
	const struct group *gr = &d->groups[g];
	sb_jw_kstr(w, "task", d->tasks.s[gr->task]);
	sb_jw_kstr(w, "arch", d->archs.s[gr->arch]);
	sb_jw_kstr(w, "tier", d->tiers.s[gr->tier]);
}

static int rec_paired(struct sb_jw *w, const struct data *d, const struct comparison *c, const struct opts *o, int test,
                      struct sb_err *err)
{
	sb_jw_record(w, "stats.paired", 1);
	sb_jw_kstr(w, "split", test ? "test" : "val");
	k_group(w, d, c->group);
	sb_jw_kstr(w, "method", d->methods.s[c->method]);
	sb_jw_kstr(w, "baseline", o->baseline);
	sb_jw_kstr(w, "metric", test ? "test_accuracy" : "val_accuracy");
	if (test) {
		sb_jw_kstr(w, "selection", "test_read");
	} else {
		sb_jw_kstr(w, "selection", "best_epoch");
		sb_jw_kint(w, "patience", o->patience);
	}
	sb_jw_kint(w, "n", c->n);
	sb_jw_key(w, "seeds");
	sb_jw_arr(w);
	for (int i = 0; i < c->n; i++)
		sb_jw_int(w, c->seeds[i]);
	sb_jw_arr_end(w);
	if (!test) {
		sb_jw_key(w, "best_epoch_baseline");
		sb_jw_arr(w);
		for (int i = 0; i < c->n; i++)
			sb_jw_int(w, c->best_epoch_base[i]);
		sb_jw_arr_end(w);
		sb_jw_key(w, "best_epoch_method");
		sb_jw_arr(w);
		for (int i = 0; i < c->n; i++)
			sb_jw_int(w, c->best_epoch_method[i]);
		sb_jw_arr_end(w);
	}
	sb_jw_key(w, "differences");
	sb_jw_arr(w);
	for (int i = 0; i < c->n; i++)
		sb_jw_f64(w, c->d[i]);
	sb_jw_arr_end(w);
	sb_jw_kf64(w, "mean_baseline", c->mean_base);
	sb_jw_kf64(w, "mean_method", c->mean_method);
	sb_jw_kf64(w, "mean_diff", c->t.mean);
	sb_jw_kf64(w, "sd_diff", c->t.sd);
	sb_jw_kf64(w, "t", c->t.t);
	sb_jw_kf64(w, "df", c->t.df);
	sb_jw_kf64(w, "p_t", c->t.p);
	sb_jw_kf64(w, "wilcoxon_statistic", c->w.statistic);
	sb_jw_kf64(w, "wilcoxon_r_plus", c->w.r_plus);
	sb_jw_kint(w, "wilcoxon_n", c->w.n);
	sb_jw_kint(w, "wilcoxon_zeros", c->w.n_zero);
	sb_jw_kbool(w, "wilcoxon_ties", c->w.ties);
	sb_jw_kbool(w, "wilcoxon_exact", c->w.exact);
	sb_jw_kf64(w, "p_wilcoxon", c->w.p);
	sb_jw_kf64(w, "ci_level", o->level);
	sb_jw_kf64(w, "ci_lo", c->ci_lo);
	sb_jw_kf64(w, "ci_hi", c->ci_hi);
	sb_jw_kint(w, "bootstrap_resamples", o->resamples);
	sb_jw_kint(w, "bootstrap_seed", (int64_t)o->seed);
	sb_jw_kf64(w, "cohen_dz", c->dz);
	sb_jw_kf64(w, "p_holm", c->p_holm);
	sb_jw_kint(w, "holm_m", c->holm_m);
	sb_jw_kf64(w, "alpha", o->alpha);
	sb_jw_kbool(w, "supported", c->supported);
	sb_jw_obj_end(w);
	return sb_jw_line(w, err);
}

static int rec_task(struct sb_jw *w, const struct data *d, const struct group_summary *s, const struct opts *o,
                    int test, struct sb_err *err)
{
	sb_jw_record(w, "stats.task", 1);
	sb_jw_kstr(w, "split", test ? "test" : "val");
	k_group(w, d, s->group);
	sb_jw_kstr(w, "baseline", o->baseline);
	sb_jw_kbool(w, "has_baseline", s->has_baseline);
	sb_jw_kint(w, "n_baseline", s->n_baseline);
	sb_jw_kf64(w, "baseline_mean", s->baseline_mean);
	sb_jw_kint(w, "n_methods", s->n_cmp);
	sb_jw_kint(w, "n_protocol_methods", s->n_family);
	sb_jw_kbool(w, "protocol_methods_complete", s->family_complete);
	sb_jw_kbool(w, "sparse_helps", s->sparse_helps);
	if (s->best_method >= 0)
		sb_jw_kstr(w, "best_method", d->methods.s[s->best_method]);
	else
		sb_jw_knull(w, "best_method");
	sb_jw_kf64(w, "best_delta", s->best_delta);
	double thr = task_threshold(gtask(d, s->group));
	if (isfinite(thr))
		sb_jw_kf64(w, "threshold", thr);
	else
		sb_jw_knull(w, "threshold");
	if (!test) {
		if (s->have_predictors) {
			sb_jw_kf64(w, "acc_k", s->acc_k);
			sb_jw_kf64(w, "d_acc", s->d_acc);
			sb_jw_kf64(w, "entropy_k", s->entropy_k);
		} else {
			sb_jw_knull(w, "acc_k");
			sb_jw_knull(w, "d_acc");
			sb_jw_knull(w, "entropy_k");
		}
	}
	sb_jw_obj_end(w);
	return sb_jw_line(w, err);
}

static int rec_budgets(struct sb_jw *w, const struct data *d, const struct comparison *c, const struct opts *o,
                       struct sb_err *err)
{
	for (int E = 1; E <= c->K; E++) {
		sb_jw_record(w, "stats.budget", 1);
		k_group(w, d, c->group);
		sb_jw_kstr(w, "method", d->methods.s[c->method]);
		sb_jw_kstr(w, "baseline", o->baseline);
		sb_jw_kint(w, "budget_epochs", E);
		sb_jw_kint(w, "n", c->n);
		sb_jw_kf64(w, "mean_diff", c->b_mean[E - 1]);
		sb_jw_kf64(w, "ci_lo", c->b_lo[E - 1]);
		sb_jw_kf64(w, "ci_hi", c->b_hi[E - 1]);
		sb_jw_kf64(w, "p_t", c->b_p[E - 1]);
		sb_jw_obj_end(w);
		SB_TRY(sb_jw_line(w, err));
	}
	const struct sb_sign_change *s = &c->sc;
	sb_jw_record(w, "stats.sign_change", 1);
	k_group(w, d, c->group);
	sb_jw_kstr(w, "method", d->methods.s[c->method]);
	sb_jw_kstr(w, "baseline", o->baseline);
	sb_jw_kint(w, "n", c->n);
	sb_jw_kint(w, "budgets", s->K);
	sb_jw_kint(w, "sign_change", s->sign_change);
	sb_jw_kbool(w, "sign_change_censored", s->sign_change == s->K + 1);
	sb_jw_kf64(w, "sign_change_ci_lo", s->sc_lo);
	sb_jw_kf64(w, "sign_change_ci_hi", s->sc_hi);
	sb_jw_kint(w, "first_negative", s->first_negative);
	sb_jw_kbool(w, "reversal", s->reversal);
	if (s->switch_epoch > 0) {
		sb_jw_kint(w, "switch_epoch", s->switch_epoch);
		sb_jw_kf64(w, "switch_epoch_ci_lo", s->sw_lo);
		sb_jw_kf64(w, "switch_epoch_ci_hi", s->sw_hi);
	} else {
		sb_jw_knull(w, "switch_epoch");
	}
	sb_jw_kf64(w, "ci_level", o->level);
	sb_jw_kint(w, "bootstrap_resamples", o->resamples);
	sb_jw_kint(w, "bootstrap_seed", (int64_t)o->seed);
	sb_jw_obj_end(w);
	return sb_jw_line(w, err);
}

/* a string, or null for NULL; a boolean, or null for a negative value */
static void k_str_or_null(struct sb_jw *w, const char *key, const char *s)
{
	if (s)
		sb_jw_kstr(w, key, s);
	else
		sb_jw_knull(w, key);
}

static void k_bool_or_null(struct sb_jw *w, const char *key, int v)
{
	if (v >= 0)
		sb_jw_kbool(w, key, v);
	else
		sb_jw_knull(w, key);
}

int report_records(struct sb_jw *w, const struct data *d, const struct analysis *a, const struct opts *o,
                   struct sb_err *err)
{
	for (int i = 0; i < a->n_vgroups; i++) {
		const struct group_summary *s = &a->vgroups[i];
		SB_TRY(rec_task(w, d, s, o, 0, err));
		for (int c = s->first_cmp; c < s->first_cmp + s->n_cmp; c++)
			SB_TRY(rec_paired(w, d, &a->val[c], o, 0, err));
		for (int c = s->first_cmp; c < s->first_cmp + s->n_cmp; c++)
			SB_TRY(rec_budgets(w, d, &a->val[c], o, err));
	}
	if (a->n_vgroups) {
		sb_jw_record(w, "stats.power", 1);
		int n = 0;
		for (int i = 0; i < a->n_vgroups; i++)
			n += a->vgroups[i].has_baseline && a->vgroups[i].n_cmp > 0 && !a->vgroups[i].out_of_rule;
		sb_jw_kint(w, "n_tasks", n);
		sb_jw_kint(w, "n_labelled", a->n_labelled);
		sb_jw_key(w, "labelled");
		sb_jw_arr(w);
		for (int i = 0; i < a->n_vgroups; i++)
			if (a->vgroups[i].sparse_helps && !a->vgroups[i].out_of_rule) {
				char lab[256];
				sb_jw_str(w, group_label(d, a->vgroups[i].group, lab, sizeof lab));
			}
		sb_jw_arr_end(w);
		sb_jw_kint(w, "min_labelled", SB_RULE_MIN_LABELLED);
		sb_jw_kbool(w, "met", a->n_labelled >= SB_RULE_MIN_LABELLED);
		sb_jw_obj_end(w);
		SB_TRY(sb_jw_line(w, err));
	}
	if (a->rule_ran) {
		static const char *pred[3] = {"acc_k", "d_acc", "entropy_k"};
		for (int j = 0; j < a->n_rule; j++) {
			const struct group_summary *s = &a->vgroups[a->rule_groups[j]];
			const struct sb_rule_fold *f = &a->folds[j];
			sb_jw_record(w, "stats.rule_fold", 1);
			k_group(w, d, s->group);
			sb_jw_kbool(w, "sparse_helps", s->sparse_helps);
			sb_jw_kf64(w, "best_delta", s->best_delta);
			sb_jw_kf64(w, "acc_k", s->acc_k);
			sb_jw_kf64(w, "d_acc", s->d_acc);
			sb_jw_kf64(w, "entropy_k", s->entropy_k);
			sb_jw_kbool(w, "has_rule", f->has_rule);
			if (f->has_rule) {
				sb_jw_kstr(w, "predictor", pred[f->predictor]);
				sb_jw_kf64(w, "threshold", f->threshold);
				sb_jw_kstr(w, "direction", f->direction > 0 ? ">" : "<");
				sb_jw_kint(w, "train_correct", f->train_correct);
			}
			sb_jw_kint(w, "train_n", a->n_rule - 1);
			sb_jw_kbool(w, "predict_sparse", f->predict_sparse);
			sb_jw_kf64(w, "gain", f->gain);
			sb_jw_obj_end(w);
			SB_TRY(sb_jw_line(w, err));
		}
		sb_jw_record(w, "stats.rule", 1);
		sb_jw_kint(w, "n_tasks", a->rule.n_tasks);
		sb_jw_kf64(w, "mean_gain", a->rule.mean_gain);
		sb_jw_kint(w, "wins", a->rule.wins);
		sb_jw_kint(w, "losses", a->rule.losses);
		sb_jw_kint(w, "non_softmax", a->rule.non_softmax);
		sb_jw_kbool(w, "success", a->rule.success);
		sb_jw_obj_end(w);
		SB_TRY(sb_jw_line(w, err));
	}
	for (int i = 0; i < a->n_tgroups; i++) {
		const struct group_summary *s = &a->tgroups[i];
		SB_TRY(rec_task(w, d, s, o, 1, err));
		for (int c = s->first_cmp; c < s->first_cmp + s->n_cmp; c++)
			SB_TRY(rec_paired(w, d, &a->test[c], o, 1, err));
	}
	for (int i = 0; i < a->n_rates; i++) {
		const struct probe_rate *p = &a->rates[i];
		sb_jw_record(w, "stats.probe_rate", 1);
		sb_jw_kstr(w, "model", d->models.s[p->model]);
		sb_jw_kstr(w, "task", p->task < 0 ? "all" : d->tasks.s[p->task]);
		sb_jw_kstr(w, "method", d->methods.s[p->method]);
		sb_jw_kint(w, "correct", p->k);
		sb_jw_kint(w, "n", p->n);
		sb_jw_kf64(w, "accuracy", (double)p->k / (double)p->n);
		sb_jw_kf64(w, "ci_lo", p->lo);
		sb_jw_kf64(w, "ci_hi", p->hi);
		sb_jw_kf64(w, "ci_level", o->level);
		sb_jw_kstr(w, "ci_method", "wilson");
		sb_jw_obj_end(w);
		SB_TRY(sb_jw_line(w, err));
	}
	for (int i = 0; i < a->n_pairs; i++) {
		const struct probe_pair *p = &a->pairs[i];
		sb_jw_record(w, "stats.probe_paired", 1);
		sb_jw_kstr(w, "model", d->models.s[p->model]);
		sb_jw_kstr(w, "method_a", d->methods.s[p->a]);
		sb_jw_kstr(w, "method_b", d->methods.s[p->b]);
		sb_jw_kint(w, "n", p->pb.n);
		sb_jw_kint(w, "both_correct", p->pb.n11);
		sb_jw_kint(w, "a_only", p->pb.n10);
		sb_jw_kint(w, "b_only", p->pb.n01);
		sb_jw_kint(w, "both_wrong", p->pb.n00);
		sb_jw_kf64(w, "accuracy_a", p->pb.p_a);
		sb_jw_kf64(w, "accuracy_b", p->pb.p_b);
		sb_jw_kf64(w, "diff", p->pb.diff);
		sb_jw_kf64(w, "ci_lo", p->pb.lo);
		sb_jw_kf64(w, "ci_hi", p->pb.hi);
		sb_jw_kf64(w, "ci_level", o->level);
		sb_jw_kstr(w, "ci_method", "newcombe10");
		sb_jw_kf64(w, "p_mcnemar", p->pb.mcnemar_p);
		sb_jw_kf64(w, "p_holm", p->p_holm);
		sb_jw_kint(w, "holm_m", p->holm_m);
		sb_jw_obj_end(w);
		SB_TRY(sb_jw_line(w, err));
	}
	for (int i = 0; i < a->n_pub; i++) {
		const struct pub_result *r = &a->pub[i];
		const struct published *p = &d->pubs[r->pub];
		sb_jw_record(w, "stats.published", 1);
		k_group(w, d, r->group);
		k_str_or_null(w, "method", p->method);
		sb_jw_kstr(w, "quantity", QUANTITY[p->quantity]);
		if (p->quantity == PUB_BUDGET_DELTA)
			sb_jw_kint(w, "budget", p->budget);
		if (p->patience >= 0)
			sb_jw_kint(w, "published_patience", p->patience);
		else
			sb_jw_knull(w, "published_patience");
		sb_jw_kstr(w, "baseline", o->baseline);
		sb_jw_kstr(w, "source", p->source);
		sb_jw_kstr(w, "record", p->src);
		sb_jw_kf64(w, "published", p->value);
		k_bool_or_null(w, "published_supported", p->supported);
		k_str_or_null(w, "ours_method", r->method >= 0 && isfinite(r->ours) ? d->methods.s[r->method] : NULL);
		if (p->quantity == PUB_BEST_DELTA)
			sb_jw_kint(w, "best_of", r->n_best);
		sb_jw_kint(w, "n", r->n);
		if (isfinite(r->ours)) {
			sb_jw_kf64(w, "ours", r->ours);
			sb_jw_kf64(w, "ci_lo", r->lo);
			sb_jw_kf64(w, "ci_hi", r->hi);
			sb_jw_kbool(w, "inside", pub_inside(r, p));
			sb_jw_kf64(w, "diff", r->ours - p->value);
		} else {
			sb_jw_knull(w, "ours");
			sb_jw_knull(w, "ci_lo");
			sb_jw_knull(w, "ci_hi");
			sb_jw_knull(w, "inside");
			sb_jw_knull(w, "diff");
			sb_jw_kstr(w, "why", r->why);
		}
		k_bool_or_null(w, "ours_supported", r->ours_supported);
		sb_jw_kf64(w, "ci_level", o->level);
		sb_jw_kint(w, "bootstrap_resamples", o->resamples);
		sb_jw_kint(w, "bootstrap_seed", (int64_t)o->seed);
		sb_jw_kint(w, "patience", o->patience);
		sb_jw_obj_end(w);
		SB_TRY(sb_jw_line(w, err));
	}
	sb_jw_record(w, "stats.summary", 1);
	sb_jw_kint(w, "records", d->records);
	sb_jw_kint(w, "ignored_records", d->ignored);
	sb_jw_kint(w, "cells", d->n_cells);
	sb_jw_kint(w, "superseded_cells", d->superseded_cells);
	sb_jw_kint(w, "excluded_cells", d->excluded_cells);
	sb_jw_kint(w, "cells_without_eval_done", d->no_done_cells);
	sb_jw_kint(w, "test_cells", d->n_tests);
	sb_jw_kint(w, "superseded_test_cells", d->superseded_tests);
	sb_jw_kint(w, "probes", d->n_probes);
	sb_jw_kint(w, "superseded_probes", d->superseded_probes);
	sb_jw_kint(w, "val_comparisons", a->n_val);
	sb_jw_kint(w, "test_comparisons", a->n_test);
	sb_jw_kint(w, "skipped_comparisons", a->skipped);
	sb_jw_kint(w, "min_seeds", o->min_seeds);
	sb_jw_kint(w, "published_values", d->n_pubs);
	sb_jw_kint(w, "published_compared", a->n_pub);
	sb_jw_kint(w, "published_unmatched", a->pub_unmatched);
	sb_jw_kint(w, "published_other_patience", a->pub_other_patience);
	sb_jw_kint(w, "published_other_baseline", a->pub_other_baseline);
	int nm, ni;
	pub_counts(d, a, &nm, &ni);
	sb_jw_kint(w, "published_measured", nm);
	sb_jw_kint(w, "published_inside", ni);
	sb_jw_obj_end(w);
	return sb_jw_line(w, err);
}
