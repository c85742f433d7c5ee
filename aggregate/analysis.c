/* analysis.c — the paired statistics sb-stats reports (PROTOCOL A4, A7, A8, C). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model.h"

static void *xcalloc(size_t n, size_t size)
{
	return calloc(n ? n : 1, size);
}

/* Methods of a group in report order: Table 2 order first, then first appearance. */
static int cmp_method_order(const void *pa, const void *pb, const struct data *d)
{
	int a = *(const int *)pa, b = *(const int *)pb;
	int oa = method_order(d->methods.s[a]), ob = method_order(d->methods.s[b]);
	if (oa != ob)
		return oa < ob ? -1 : 1;
	return (a > b) - (a < b);
}

static void sort_methods(int *m, int n, const struct data *d)
{
	for (int i = 1; i < n; i++) /* insertion sort: a handful of methods */
		for (int j = i; j > 0 && cmp_method_order(&m[j - 1], &m[j], d) > 0; j--) {
			int t = m[j];
			m[j] = m[j - 1];
			m[j - 1] = t;
		}
}

static int cmp_i64(const void *pa, const void *pb)
{
	int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
	return (a > b) - (a < b);
}

static double best_within(const double *acc, int E)
{
	return acc[sb_stats_best_within(acc, E)];
}

/* Fill the test statistics of c from c->d (n values). */
static int paired_tests(struct comparison *c, const struct opts *o, struct sb_err *err)
{
	SB_TRY(sb_stats_ttest_paired(c->d, c->n, &c->t, err));
	double *r = xcalloc((size_t)c->n, sizeof *r);
	if (!r)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int i = 0; i < c->n; i++)
		r[i] = sb_stats_tie_grid(c->d[i]);
	int rc = sb_stats_wilcoxon(r, c->n, o->wilcoxon, &c->w, err);
	free(r);
	SB_TRY(rc);
	struct sb_boot cfg = {o->seed, 0, o->resamples, o->level};
	SB_TRY(sb_stats_bootstrap_ci(c->d, c->n, &cfg, &c->ci_lo, &c->ci_hi, err));
	c->dz = sb_stats_cohen_dz(c->d, c->n);
	return 0;
}

/* PROTOCOL A7's Holm family: the six sparse methods of Table 2 (top-k 0.125/0.25/0.5,
 * sparsemax, entmax-1.5, HAE) */
static int in_family(const struct data *d, int m)
{
	int o = method_order(d->methods.s[m]);
	return o >= 1 && o <= 6;
}

/* Holm over the comparisons c[idx[0..k)] */
static int holm_subset(struct comparison *c, const int *idx, int k, double alpha, struct sb_err *err)
{
	if (!k)
		return 0;
	double *p = xcalloc((size_t)k, sizeof *p), *adj = xcalloc((size_t)k, sizeof *adj);
	if (!p || !adj) {
		free(p);
		free(adj);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	for (int i = 0; i < k; i++)
		p[i] = c[idx[i]].t.p;
	int rc = sb_stats_holm(p, k, adj, err);
	for (int i = 0; !rc && i < k; i++) {
		c[idx[i]].p_holm = adj[i];
		c[idx[i]].holm_m = k;
		c[idx[i]].supported = adj[i] < alpha;
	}
	free(p);
	free(adj);
	return rc;
}

/* Holm over the comparisons [first, first + n) of one group, and the group summary. The
 * protocol's six sparse methods form one family (m = 6 in a complete grid, PROTOCOL A7); any
 * other methods of the group (a bottom-k control, say) form a second one, so that they neither
 * change the six's adjusted p-values nor the label. The label and the best delta are read
 * from the six (from the others only when none of the six is present). */
static int holm_group(const struct data *d, struct comparison *c, int n, double alpha, struct group_summary *s,
                      struct sb_err *err)
{
	int *fam = xcalloc((size_t)n, sizeof *fam), *oth = xcalloc((size_t)n, sizeof *oth), nf = 0, no = 0;
	if (!fam || !oth) {
		free(fam);
		free(oth);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	unsigned orders = 0;
	for (int i = 0; i < n; i++) {
		if (in_family(d, c[i].method)) {
			fam[nf++] = i;
			orders |= 1u << method_order(d->methods.s[c[i].method]);
		} else {
			oth[no++] = i;
		}
	}
	int rc = holm_subset(c, fam, nf, alpha, err);
	if (!rc)
		rc = holm_subset(c, oth, no, alpha, err);
	s->n_family = nf;
	s->family_complete = orders == 0x7eu; /* orders 1..6 */
	const int *lab = nf ? fam : oth;
	int nl = nf ? nf : no;
	s->best_method = -1;
	s->best_delta = NAN;
	for (int j = 0; !rc && j < nl; j++) {
		const struct comparison *ci = &c[lab[j]];
		if (ci->t.mean > 0 && ci->supported)
			s->sparse_helps = 1;
		if (s->best_method < 0 || ci->t.mean > s->best_delta) {
			s->best_method = ci->method;
			s->best_delta = ci->t.mean;
		}
	}
	free(fam);
	free(oth);
	return rc;
}

static int grow_cmp(struct comparison **arr, int n, int *cap, struct sb_err *err)
{
	if (n < *cap)
		return 0;
	int nc = *cap ? 2 * *cap : 32;
	struct comparison *p = realloc(*arr, (size_t)nc * sizeof *p);
	if (!p)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	*arr = p;
	*cap = nc;
	return 0;
}

static void rule_predictors(const struct data *d, int g, int base, struct group_summary *s)
{
	double a3 = 0, a0 = 0, e3 = 0;
	int n = 0;
	for (int c = 0; c < d->n_cells; c++) {
		const struct cell *ce = &d->cells[c];
		if (ce->group != g || ce->method != base)
			continue;
		if (ce->n_epochs < 4) {
			snprintf(s->missing_predictor, sizeof s->missing_predictor,
			         "seed %lld has %d epoch(s), the predictors need epoch index 3", (long long)ce->seed,
			         ce->n_epochs);
			return;
		}
		if (!isfinite(ce->ent[3])) {
			snprintf(s->missing_predictor, sizeof s->missing_predictor,
			         "seed %lld has no attention_entropy at epoch index 3", (long long)ce->seed);
			return;
		}
		a3 += ce->acc[3];
		a0 += ce->acc[0];
		e3 += ce->ent[3];
		n++;
	}
	if (!n)
		return;
	s->acc_k = a3 / n;
	s->d_acc = s->acc_k - a0 / n;
	s->entropy_k = e3 / n;
	s->have_predictors = 1;
}

/* ---- validation: best epoch under patience, and every budget ---- */

static int run_validation(const struct data *d, const struct opts *o, struct analysis *a, int base, struct sb_err *err)
{
	int cap = 0;
	a->vgroups = xcalloc((size_t)d->n_groups, sizeof *a->vgroups);
	int *methods = xcalloc((size_t)d->methods.n, sizeof *methods);
	int *bcell = xcalloc((size_t)d->n_cells, sizeof *bcell);
	if (!a->vgroups || !methods || !bcell) {
		free(methods);
		free(bcell);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	int rc = 0;
	for (int g = 0; g < d->n_groups && !rc; g++) {
		int has_cells = 0;
		for (int c = 0; c < d->n_cells; c++)
			has_cells |= d->cells[c].group == g;
		if (!has_cells)
			continue;
		struct group_summary *s = &a->vgroups[a->n_vgroups++];
		memset(s, 0, sizeof *s);
		s->group = g;
		s->first_cmp = a->n_val;
		s->best_method = -1;
		s->best_delta = s->baseline_mean = NAN;
		/* the baseline cells of this group, and the other methods present */
		int nb = 0, nm = 0;
		double bsum = 0;
		for (int c = 0; c < d->n_cells; c++) {
			const struct cell *ce = &d->cells[c];
			if (ce->group != g || ce->n_epochs < 1)
				continue;
			if (ce->method == base) {
				bcell[nb++] = c;
				bsum += ce->acc[sb_stats_best_epoch(ce->acc, ce->n_epochs, o->patience, NULL)];
			} else {
				int seen = 0;
				for (int i = 0; i < nm; i++)
					seen |= methods[i] == ce->method;
				if (!seen)
					methods[nm++] = ce->method;
			}
		}
		s->has_baseline = nb > 0;
		s->n_baseline = nb;
		if (!nb)
			continue;
		s->baseline_mean = bsum / nb;
		rule_predictors(d, g, base, s);
		sort_methods(methods, nm, d);
		for (int mi = 0; mi < nm && !rc; mi++) {
			int m = methods[mi];
			/* paired seeds, ascending */
			int64_t *seeds = xcalloc((size_t)nb, sizeof *seeds);
			int np = 0;
			for (int i = 0; i < nb; i++) {
				const struct cell *bc = &d->cells[bcell[i]];
				for (int c = 0; c < d->n_cells; c++) {
					const struct cell *ce = &d->cells[c];
					if (ce->group == g && ce->method == m && ce->seed == bc->seed &&
					    ce->n_epochs > 0)
						seeds[np++] = bc->seed;
				}
			}
			if (np < o->min_seeds || np < 1) {
				a->skipped++;
				free(seeds);
				continue;
			}
			qsort(seeds, (size_t)np, sizeof *seeds, cmp_i64);
			if ((rc = grow_cmp(&a->val, a->n_val, &cap, err))) {
				free(seeds);
				break;
			}
			struct comparison *cm = &a->val[a->n_val++];
			memset(cm, 0, sizeof *cm);
			cm->group = g;
			cm->method = m;
			cm->n = np;
			cm->seeds = seeds;
			cm->d = xcalloc((size_t)np, sizeof *cm->d);
			cm->best_epoch_base = xcalloc((size_t)np, sizeof(int));
			cm->best_epoch_method = xcalloc((size_t)np, sizeof(int));
			const struct cell **pb = xcalloc((size_t)np, sizeof *pb),
			                  **pm = xcalloc((size_t)np, sizeof *pm);
			if (!cm->d || !cm->best_epoch_base || !cm->best_epoch_method || !pb || !pm) {
				free(pb);
				free(pm);
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
				break;
			}
			int K = 1 << 30;
			double sb = 0, sm = 0;
			for (int i = 0; i < np; i++) {
				for (int c = 0; c < d->n_cells; c++) {
					const struct cell *ce = &d->cells[c];
					if (ce->group == g && ce->seed == seeds[i] && ce->method == base)
						pb[i] = ce;
					if (ce->group == g && ce->seed == seeds[i] && ce->method == m)
						pm[i] = ce;
				}
				int eb = sb_stats_best_epoch(pb[i]->acc, pb[i]->n_epochs, o->patience, NULL);
				int em = sb_stats_best_epoch(pm[i]->acc, pm[i]->n_epochs, o->patience, NULL);
				cm->best_epoch_base[i] = eb;
				cm->best_epoch_method[i] = em;
				sb += pb[i]->acc[eb];
				sm += pm[i]->acc[em];
				cm->d[i] = pm[i]->acc[em] - pb[i]->acc[eb];
				if (pb[i]->n_epochs < K)
					K = pb[i]->n_epochs;
				if (pm[i]->n_epochs < K)
					K = pm[i]->n_epochs;
			}
			cm->mean_base = sb / np;
			cm->mean_method = sm / np;
			rc = paired_tests(cm, o, err);
			/* budgets E = 1..K: best validation accuracy within the first E epochs */
			cm->K = K;
			double *mat = xcalloc((size_t)np * K, sizeof *mat), *col = xcalloc((size_t)np, sizeof *col);
			cm->b_mean = xcalloc((size_t)K, sizeof(double));
			cm->b_lo = xcalloc((size_t)K, sizeof(double));
			cm->b_hi = xcalloc((size_t)K, sizeof(double));
			cm->b_p = xcalloc((size_t)K, sizeof(double));
			if (!rc && (!mat || !col || !cm->b_mean || !cm->b_lo || !cm->b_hi || !cm->b_p))
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
			for (int E = 1; !rc && E <= K; E++) {
				for (int i = 0; i < np; i++) {
					mat[(size_t)i * K + E - 1] =
					    best_within(pm[i]->acc, E) - best_within(pb[i]->acc, E);
					col[i] = mat[(size_t)i * K + E - 1];
				}
				struct sb_ttest t;
				rc = sb_stats_ttest_paired(col, np, &t, err);
				cm->b_mean[E - 1] = t.mean;
				cm->b_p[E - 1] = t.p;
			}
			struct sb_boot cfg = {o->seed, 0, o->resamples, o->level};
			if (!rc)
				rc = sb_stats_bootstrap_ci_cols(mat, np, K, &cfg, cm->b_lo, cm->b_hi, err);
			if (!rc)
				rc = sb_stats_sign_change_boot(mat, np, K, &cfg, &cm->sc, err);
			free(mat);
			free(col);
			free(pb);
			free(pm);
			sb_progress(0, "validation: %d comparison(s)", a->n_val);
		}
		s->n_cmp = a->n_val - s->first_cmp;
		if (!rc && s->n_cmp)
			rc = holm_group(d, a->val + s->first_cmp, s->n_cmp, o->alpha, s, err);
		if (s->sparse_helps)
			a->n_labelled++;
	}
	free(methods);
	free(bcell);
	return rc;
}

/* ---- test reads ---- */

static int run_test(const struct data *d, const struct opts *o, struct analysis *a, int base, struct sb_err *err)
{
	int cap = 0, rc = 0;
	a->tgroups = xcalloc((size_t)d->n_groups, sizeof *a->tgroups);
	int *methods = xcalloc((size_t)d->methods.n, sizeof *methods);
	if (!a->tgroups || !methods) {
		free(methods);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	for (int g = 0; g < d->n_groups && !rc; g++) {
		int nb = 0, nm = 0;
		double bsum = 0;
		for (int i = 0; i < d->n_tests; i++) {
			const struct testcell *t = &d->tests[i];
			if (t->group != g)
				continue;
			if (t->method == base) {
				nb++;
				bsum += t->acc;
			} else {
				int seen = 0;
				for (int j = 0; j < nm; j++)
					seen |= methods[j] == t->method;
				if (!seen)
					methods[nm++] = t->method;
			}
		}
		if (!nb && !nm)
			continue;
		struct group_summary *s = &a->tgroups[a->n_tgroups++];
		memset(s, 0, sizeof *s);
		s->group = g;
		s->first_cmp = a->n_test;
		s->best_method = -1;
		s->best_delta = NAN;
		s->has_baseline = nb > 0;
		s->n_baseline = nb;
		s->baseline_mean = nb ? bsum / nb : NAN;
		if (!nb)
			continue;
		sort_methods(methods, nm, d);
		for (int mi = 0; mi < nm && !rc; mi++) {
			int m = methods[mi], np = 0;
			int64_t *seeds = xcalloc((size_t)nb, sizeof *seeds);
			double *dd = xcalloc((size_t)nb, sizeof *dd);
			double sb = 0, sm = 0;
			if (!seeds || !dd) {
				free(seeds);
				free(dd);
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
				break;
			}
			/* pair by seed, ascending seed order */
			for (int i = 0; i < d->n_tests; i++) {
				const struct testcell *tb = &d->tests[i];
				if (tb->group != g || tb->method != base)
					continue;
				for (int j = 0; j < d->n_tests; j++) {
					const struct testcell *tm = &d->tests[j];
					if (tm->group == g && tm->method == m && tm->seed == tb->seed)
						seeds[np++] = tb->seed;
				}
			}
			if (np < o->min_seeds || np < 1) {
				a->skipped++;
				free(seeds);
				free(dd);
				continue;
			}
			qsort(seeds, (size_t)np, sizeof *seeds, cmp_i64);
			for (int k = 0; k < np; k++) {
				double vb = NAN, vm = NAN;
				for (int i = 0; i < d->n_tests; i++) {
					const struct testcell *t = &d->tests[i];
					if (t->group == g && t->seed == seeds[k] && t->method == base)
						vb = t->acc;
					if (t->group == g && t->seed == seeds[k] && t->method == m)
						vm = t->acc;
				}
				dd[k] = vm - vb;
				sb += vb;
				sm += vm;
			}
			if ((rc = grow_cmp(&a->test, a->n_test, &cap, err))) {
				free(seeds);
				free(dd);
				break;
			}
			struct comparison *cm = &a->test[a->n_test++];
			memset(cm, 0, sizeof *cm);
			cm->group = g;
			cm->method = m;
			cm->n = np;
			cm->seeds = seeds;
			cm->d = dd;
			cm->mean_base = sb / np;
			cm->mean_method = sm / np;
			rc = paired_tests(cm, o, err);
		}
		s->n_cmp = a->n_test - s->first_cmp;
		if (!rc && s->n_cmp)
			rc = holm_group(d, a->test + s->first_cmp, s->n_cmp, o->alpha, s, err);
	}
	free(methods);
	return rc;
}

/* ---- curves ---- */

static int run_curves(const struct data *d, struct analysis *a, struct sb_err *err)
{
	int cap = 0;
	for (int c = 0; c < d->n_cells; c++) {
		const struct cell *ce = &d->cells[c];
		int k = -1;
		for (int i = 0; i < a->n_curves; i++)
			if (a->curves[i].group == ce->group && a->curves[i].method == ce->method)
				k = i;
		if (k < 0) {
			if (a->n_curves == cap) {
				cap = cap ? 2 * cap : 32;
				struct curve *p = realloc(a->curves, (size_t)cap * sizeof *p);
				if (!p)
					return SB_ERR(err, SB_EINTERNAL, "out of memory");
				a->curves = p;
			}
			k = a->n_curves++;
			a->curves[k] = (struct curve){ce->group, ce->method, 0, NULL, NULL};
		}
		struct curve *cu = &a->curves[k];
		if (ce->n_epochs > cu->K) {
			double *m = realloc(cu->mean, (size_t)ce->n_epochs * sizeof *m);
			if (m)
				cu->mean = m;
			int *n = realloc(cu->n, (size_t)ce->n_epochs * sizeof *n);
			if (n)
				cu->n = n;
			if (!m || !n)
				return SB_ERR(err, SB_EINTERNAL, "out of memory");
			for (int e = cu->K; e < ce->n_epochs; e++) {
				cu->mean[e] = 0;
				cu->n[e] = 0;
			}
			cu->K = ce->n_epochs;
		}
		for (int e = 0; e < ce->n_epochs; e++) {
			cu->mean[e] += ce->acc[e];
			cu->n[e]++;
		}
	}
	for (int i = 0; i < a->n_curves; i++)
		for (int e = 0; e < a->curves[i].K; e++)
			a->curves[i].mean[e] /= a->curves[i].n[e];
	return 0;
}

/* ---- the rule ---- */

static int run_rule(const struct data *d, struct analysis *a, struct sb_err *err)
{
	int n = 0;
	int *gi = xcalloc((size_t)a->n_vgroups, sizeof *gi);
	if (!gi)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	a->n_labelled = 0; /* over the tasks that enter the rule */
	for (int i = 0; i < a->n_vgroups; i++) {
		struct group_summary *s = &a->vgroups[i];
		if (!s->has_baseline || !s->n_cmp)
			continue;
		if (!s->family_complete) {
			s->out_of_rule = 1; /* PROTOCOL A7: all six sparse methods, each with enough seeds */
			char lb[256];
			if (!a->rule_incomplete++)
				snprintf(a->rule_incomplete_example, sizeof a->rule_incomplete_example,
				         "%s has %d of the six sparse methods with enough paired seeds",
				         group_label(d, s->group, lb, sizeof lb), s->n_family);
			continue;
		}
		for (int j = 0; j < n; j++)
			if (d->groups[a->vgroups[gi[j]].group].task == d->groups[s->group].task) {
				free(gi);
				return SB_ERR(err, SB_EUSAGE,
				              "--rule: task '%s' appears with more than one architecture/tier; "
				              "give the records of one grid",
				              d->tasks.s[d->groups[s->group].task]);
			}
		gi[n++] = i;
		a->n_labelled += s->sparse_helps;
	}
	a->rule_groups = gi;
	a->n_rule = n;
	if (a->n_labelled < SB_RULE_MIN_LABELLED)
		return 0; /* the power floor: the caller reports it */
	double *x = xcalloc((size_t)n * 3, sizeof *x), *best = xcalloc((size_t)n, sizeof *best);
	int *label = xcalloc((size_t)n, sizeof *label);
	a->folds = xcalloc((size_t)n, sizeof *a->folds);
	if (!x || !best || !label || !a->folds) {
		free(x);
		free(best);
		free(label);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	int rc = 0;
	for (int j = 0; j < n && !rc; j++) {
		const struct group_summary *s = &a->vgroups[gi[j]];
		if (!s->have_predictors) {
			char lb[256];
			rc = SB_ERR(err, SB_EDATA, "--rule: %s: %s", group_label(d, s->group, lb, sizeof lb),
			            s->missing_predictor[0] ? s->missing_predictor : "no baseline predictors");
			break;
		}
		x[j * 3 + 0] = s->acc_k;
		x[j * 3 + 1] = s->d_acc;
		x[j * 3 + 2] = s->entropy_k;
		label[j] = s->sparse_helps;
		best[j] = s->best_delta;
	}
	if (!rc)
		rc = sb_stats_loto_rule(x, n, 3, label, best, a->folds, &a->rule, err);
	if (!rc)
		a->rule_ran = 1;
	free(x);
	free(best);
	free(label);
	return rc;
}

/* ---- probes ---- */

static int run_probes(const struct data *d, const struct opts *o, struct analysis *a, struct sb_err *err)
{
	int nmo = d->models.n, nt = d->tasks.n, nme = d->methods.n, np = d->probe_ids.n;
	if (!d->n_probes)
		return 0;
	/* outcome[(model * nme + method) * nt * np + task * np + probe]: -1 absent */
	size_t per = (size_t)nt * np, total = (size_t)nmo * nme * per;
	signed char *out = malloc(total ? total : 1);
	a->rates = xcalloc((size_t)nmo * nme * (nt + 1), sizeof *a->rates);
	a->pairs = xcalloc((size_t)nmo * nme * nme, sizeof *a->pairs);
	int *present = xcalloc((size_t)nme, sizeof *present);
	int rc = 0;
	if (!out || !a->rates || !a->pairs || !present) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto done;
	}
	memset(out, -1, total ? total : 1);
	for (int i = 0; i < d->n_probes; i++) {
		const struct probe *p = &d->probes[i];
		out[((size_t)p->model * nme + p->method) * per + (size_t)p->task * np + p->probe] =
		    (signed char)p->correct;
	}
	for (int mo = 0; mo < nmo && !rc; mo++) {
		int nm = 0;
		int *ms = present;
		for (int me = 0; me < nme; me++) {
			const signed char *o_ = out + ((size_t)mo * nme + me) * per;
			int any = 0;
			for (size_t q = 0; q < per; q++)
				any |= o_[q] >= 0;
			if (any)
				ms[nm++] = me;
		}
		sort_methods(ms, nm, d);
		/* Wilson per method: all tasks, then each task */
		for (int i = 0; i < nm && !rc; i++) {
			const signed char *o_ = out + ((size_t)mo * nme + ms[i]) * per;
			for (int t = -1; t < nt && !rc; t++) {
				int64_t kk = 0, nn = 0;
				for (int tt = 0; tt < nt; tt++) {
					if (t >= 0 && tt != t)
						continue;
					for (int q = 0; q < np; q++) {
						signed char v = o_[(size_t)tt * np + q];
						if (v >= 0) {
							nn++;
							kk += v;
						}
					}
				}
				if (!nn)
					continue;
				struct probe_rate *r = &a->rates[a->n_rates++];
				r->model = mo;
				r->task = t;
				r->method = ms[i];
				r->k = kk;
				r->n = nn;
				rc = sb_stats_wilson(kk, nn, o->level, &r->lo, &r->hi, err);
			}
		}
		/* paired comparisons on the same probes */
		int base = strtab_find(&d->methods, o->baseline), has_base = 0;
		for (int i = 0; i < nm; i++)
			has_base |= ms[i] == base;
		if (!has_base && !o->all_pairs && nm > 1)
			sb_cli_warn("model %s has no probe records of the baseline '%s' (--baseline): its %d methods "
			            "are compared pairwise, every pair in one Holm family (as --all-pairs)",
			            d->models.s[mo], o->baseline, nm);
		int first = a->n_pairs;
		for (int i = 0; i < nm && !rc; i++)
			for (int j = 0; j < nm && !rc; j++) {
				int A = ms[i], B = ms[j];
				if (o->all_pairs || !has_base) {
					if (j <= i)
						continue;
				} else if (B != base || A == base) {
					continue;
				}
				const signed char *oa = out + ((size_t)mo * nme + A) * per;
				const signed char *ob = out + ((size_t)mo * nme + B) * per;
				int64_t c11 = 0, c10 = 0, c01 = 0, c00 = 0;
				for (size_t q = 0; q < per; q++) {
					if (oa[q] < 0 || ob[q] < 0)
						continue;
					if (oa[q] && ob[q])
						c11++;
					else if (oa[q])
						c10++;
					else if (ob[q])
						c01++;
					else
						c00++;
				}
				if (c11 + c10 + c01 + c00 == 0)
					continue;
				struct probe_pair *pp = &a->pairs[a->n_pairs++];
				pp->model = mo;
				pp->a = A;
				pp->b = B;
				rc = sb_stats_paired_binary(c11, c10, c01, c00, o->level, &pp->pb, err);
			}
		int m = a->n_pairs - first;
		if (!rc && m > 0) {
			double *p = xcalloc((size_t)m, sizeof *p);
			if (!p) {
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
				break;
			}
			for (int i = 0; i < m; i++)
				p[i] = a->pairs[first + i].pb.mcnemar_p;
			rc = sb_stats_holm(p, m, p, err);
			for (int i = 0; !rc && i < m; i++) {
				a->pairs[first + i].p_holm = p[i];
				a->pairs[first + i].holm_m = m;
			}
			free(p);
		}
	}
done:
	free(out);
	free(present);
	return rc;
}

/* ---- published values (published.value records) against ours ---- */

static const struct comparison *find_val(const struct analysis *a, int g, int m)
{
	for (int i = 0; i < a->n_val; i++)
		if (a->val[i].group == g && a->val[i].method == m)
			return &a->val[i];
	return NULL;
}

struct seed_value {
	int64_t seed;
	double v;
};

static int cmp_seed_value(const void *a, const void *b)
{
	int64_t x = ((const struct seed_value *)a)->seed, y = ((const struct seed_value *)b)->seed;
	return (x > y) - (x < y);
}

/* ours for a published mean: one method's mean over its seeds (validation: the best epoch
 * under --patience; test: the test reads) with the bootstrap CI of the mean, the values in
 * ascending seed order as in the paired comparisons (the bootstrap's resamples are index
 * sets, so the order of the values is part of the result) */
static int measure_mean(const struct data *d, const struct opts *o, struct pub_result *r, int test,
                        struct sb_err *err)
{
	int cap = test ? d->n_tests : d->n_cells;
	struct seed_value *sv = xcalloc((size_t)(cap ? cap : 1), sizeof *sv);
	double *v = xcalloc((size_t)(cap ? cap : 1), sizeof *v);
	if (!sv || !v) {
		free(sv);
		free(v);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	for (int i = 0; i < cap; i++) {
		if (test) {
			const struct testcell *t = &d->tests[i];
			if (t->group == r->group && t->method == r->method)
				sv[r->n++] = (struct seed_value){t->seed, t->acc};
		} else {
			const struct cell *ce = &d->cells[i];
			if (ce->group == r->group && ce->method == r->method && ce->n_epochs > 0)
				sv[r->n++] = (struct seed_value){
				    ce->seed, ce->acc[sb_stats_best_epoch(ce->acc, ce->n_epochs, o->patience, NULL)]};
		}
	}
	qsort(sv, (size_t)r->n, sizeof *sv, cmp_seed_value);
	double sum = 0;
	for (int i = 0; i < r->n; i++) {
		v[i] = sv[i].v;
		sum += v[i];
	}
	int rc = 0;
	if (r->n < 1) {
		r->why = test ? "no test reads of this method in this task"
		              : "no validation records of this method in this task";
	} else if (r->n < o->min_seeds) {
		r->why = "fewer seeds than --min-seeds";
	} else {
		struct sb_boot cfg = {o->seed, 0, o->resamples, o->level};
		r->ours = sum / r->n;
		rc = sb_stats_bootstrap_ci(v, r->n, &cfg, &r->lo, &r->hi, err);
	}
	free(sv);
	free(v);
	return rc;
}

/* ours for one published value: a method's mean (measure_mean), or a paired difference from
 * the validation comparisons (their mean and CI, or at a budget) */
static int measure_published(const struct data *d, const struct opts *o, const struct analysis *a,
                             const struct published *p, struct pub_result *r, struct sb_err *err)
{
	r->method = p->method ? strtab_find(&d->methods, p->method) : -1;
	r->ours = r->lo = r->hi = NAN;
	r->ours_supported = -1;
	if (pub_is_mean(p->quantity)) {
		if (r->method < 0)
			return (r->why = "no records of this method"), 0;
		return measure_mean(d, o, r, p->quantity == PUB_TEST_MEAN, err);
	}
	const struct comparison *c = NULL;
	if (p->quantity == PUB_DELTA || p->quantity == PUB_BUDGET_DELTA) {
		if (p->method && !strcmp(p->method, o->baseline))
			return (r->why = "the baseline has no paired difference"), 0;
		c = r->method >= 0 ? find_val(a, r->group, r->method) : NULL;
		if (!c)
			return (r->why = "no paired comparison of this method (absent, or too few seeds)"), 0;
	} else {
		for (int i = 0; i < a->n_vgroups && !c; i++)
			if (a->vgroups[i].group == r->group && a->vgroups[i].best_method >= 0) {
				c = find_val(a, r->group, a->vgroups[i].best_method);
				/* the best of the Holm family (the six), or of the other methods without it */
				r->n_best = a->vgroups[i].n_family ? a->vgroups[i].n_family : a->vgroups[i].n_cmp;
			}
		if (!c)
			return (r->why = "no paired comparison in this task"), 0;
		r->method = c->method;
	}
	r->n = c->n;
	if (p->quantity == PUB_BUDGET_DELTA) {
		/* best validation accuracy within the first E epochs: no early stopping, no Holm */
		if (p->budget > c->K)
			return (r->why = "the runs are shorter than the budget"), 0;
		r->ours = c->b_mean[p->budget - 1];
		r->lo = c->b_lo[p->budget - 1];
		r->hi = c->b_hi[p->budget - 1];
		return 0;
	}
	r->ours = c->t.mean;
	r->lo = c->ci_lo;
	r->hi = c->ci_hi;
	r->ours_supported = c->supported;
	return 0;
}

/* the order of the table and the figure: PROTOCOL A1's task order, then arch/tier, mean before
 * delta before best_delta before the budgets (by budget), then Table 2's method order, then
 * input order */
static int pub_before(const struct data *d, const struct pub_result *x, const struct pub_result *y)
{
	const struct published *p = &d->pubs[x->pub], *q = &d->pubs[y->pub];
	int tx = task_order(p->task), ty = task_order(q->task);
	if (tx != ty)
		return tx < ty;
	if (x->group != y->group)
		return x->group < y->group;
	if (p->quantity != q->quantity)
		return p->quantity < q->quantity;
	if (p->budget != q->budget)
		return p->budget < q->budget;
	int mx = p->method ? method_order(p->method) : -1, my = q->method ? method_order(q->method) : -1;
	if (mx != my)
		return mx < my;
	return x->pub < y->pub;
}

static int run_published(const struct data *d, const struct opts *o, struct analysis *a, struct sb_err *err)
{
	if (!d->n_pubs)
		return 0;
	a->pub = xcalloc((size_t)d->n_pubs, sizeof *a->pub);
	if (!a->pub)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int i = 0; i < d->n_pubs; i++) {
		const struct published *p = &d->pubs[i];
		int t = strtab_find(&d->tasks, p->task), ar = strtab_find(&d->archs, p->arch),
		    ti = strtab_find(&d->tiers, p->tier);
		int g = t < 0 || ar < 0 || ti < 0 ? -1 : data_group_find(d, t, ar, ti), has = 0;
		/* the records it is measured on: test reads for a test mean, validation otherwise */
		if (p->quantity == PUB_TEST_MEAN)
			for (int c = 0; g >= 0 && c < d->n_tests && !has; c++)
				has = d->tests[c].group == g;
		else
			for (int c = 0; g >= 0 && c < d->n_cells && !has; c++)
				has = d->cells[c].group == g;
		if (!has) {
			a->pub_unmatched++;
			continue;
		}
		/* a value read at another patience is another quantity (budgets have none), and so is
		 * a difference from another baseline */
		if (p->patience >= 0 && pub_has_patience(p->quantity) && p->patience != o->patience) {
			a->pub_other_patience++;
			continue;
		}
		if (!pub_is_mean(p->quantity) && strcmp(p->baseline, o->baseline) != 0) {
			a->pub_other_baseline++;
			continue;
		}
		struct pub_result *r = &a->pub[a->n_pub++];
		*r = (struct pub_result){.pub = i, .group = g};
		SB_TRY(measure_published(d, o, a, p, r, err));
	}
	for (int i = 1; i < a->n_pub; i++)
		for (int j = i; j > 0 && pub_before(d, &a->pub[j], &a->pub[j - 1]); j--) {
			struct pub_result t = a->pub[j];
			a->pub[j] = a->pub[j - 1];
			a->pub[j - 1] = t;
		}
	return 0;
}

int analysis_run(const struct data *d, const struct opts *o, struct analysis *a, struct sb_err *err)
{
	memset(a, 0, sizeof *a);
	int base = strtab_find(&d->methods, o->baseline);
	SB_TRY(run_curves(d, a, err));
	SB_TRY(run_validation(d, o, a, base, err));
	SB_TRY(run_test(d, o, a, base, err));
	if (o->rule)
		SB_TRY(run_rule(d, a, err));
	SB_TRY(run_probes(d, o, a, err));
	SB_TRY(run_published(d, o, a, err));
	sb_progress(1, "analysed %d validation and %d test comparison(s), %d probe pair(s)", a->n_val, a->n_test,
	            a->n_pairs);
	return 0;
}

static void free_cmp(struct comparison *c)
{
	free(c->seeds);
	free(c->d);
	free(c->best_epoch_base);
	free(c->best_epoch_method);
	free(c->b_mean);
	free(c->b_lo);
	free(c->b_hi);
	free(c->b_p);
}

void analysis_free(struct analysis *a)
{
	for (int i = 0; i < a->n_val; i++)
		free_cmp(&a->val[i]);
	for (int i = 0; i < a->n_test; i++)
		free_cmp(&a->test[i]);
	for (int i = 0; i < a->n_curves; i++) {
		free(a->curves[i].mean);
		free(a->curves[i].n);
	}
	free(a->val);
	free(a->test);
	free(a->vgroups);
	free(a->tgroups);
	free(a->curves);
	free(a->folds);
	free(a->rule_groups);
	free(a->rates);
	free(a->pairs);
	free(a->pub);
	memset(a, 0, sizeof *a);
}
