/* sb-a8 — PROTOCOL A8's extension analyses with their predeclared criteria:
 * M1 (the switch-epoch predictor, and the switch epochs of the M2 schedules), M2 (the
 * switching schedules), the bottom-k control and the linear-decay control. The
 * arithmetic is lib/a8.h; docs/sb-a8.md defines every number. */
#include <getopt.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "a8.h"
#include "cli.h"
#include "hash.h"
#include "io.h"
#include "json.h"
#include "record.h"
#include "runsel.h"
#include "stats.h"

static const char usage_text[] =
    "Usage: sb-a8 m1|m2|bottomk|lineardecay|m3|m3map [--md FILE] [--switch-epochs FILE] [--seed N]\n"
    "             [--resamples N] [--trajectory A8.ndjson --m2 A8.ndjson] [-q] RECORDS...\n"
    "\n"
    "PROTOCOL A8's extension analyses from sb-eval's eval.epoch records (val.ndjson files; '-' =\n"
    "stdin, once),\n"
    "each ending with its verdict against the predeclared criteria (docs/sb-a8.md):\n"
    "  m1           target switch epoch per (task, arch, tier) from the paired softmax /\n"
    "               topk_softmax_025 trajectories; leave-one-dataset-out ridge on the early\n"
    "               probe features (epochs 1..3) + metadata against the constant (median),\n"
    "               early-accuracy, entropy and metadata baselines; verdict PASS or FAILED\n"
    "               (naming each failed clause). --switch-epochs FILE: the switch epochs of\n"
    "               median_switch, early_accuracy_switch, entropy_switch and mechanistic_switch\n"
    "               per (task, arch, tier), as pipelines' switching-epochs.inc\n"
    "  m2           time to target of the switching schedules; verdict PASS or KILLED\n"
    "  bottomk      endpoint best validation accuracy, the guard (dense mean >= 0.60) and the\n"
    "               patience-5 readout beside the published one\n"
    "  lineardecay  summed correct-count difference per budget; at E = 3 and E = 30: PERSISTS_BOTH,\n"
    "               PERSISTS_0125, PERSISTS_025 or PERSISTS_NEITHER (INCOMPLETE, naming what is missing,\n"
    "               without complete paired runs at either)\n"
    "  m3map        M3's switch map: the switch epochs of mechanistic_switch and of M2's strongest\n"
    "               simple schedule per confirmation (task, arch, tier), the M1 predictors fitted\n"
    "               on ALL discovery groups (--trajectory: sb-a8 m1's a8.ndjson of the trajectory\n"
    "               grid; --m2: sb-a8 m2's a8.ndjson, which names the strongest simple schedule)\n"
    "               applied to RECORDS, the confirmation grid's softmax / topk_softmax_025 logs;\n"
    "               --switch-epochs FILE writes the map (its SHA-256 is recorded)\n"
    "  m3           M2's criteria on the confirmation grid (RECORDS: its validation logs and\n"
    "               sb-test's test.ndjson; the final-accuracy clause on test accuracy); verdict\n"
    "               CONFIRMED or NOT_CONFIRMED (a rule of ours: the protocol gives none)\n"
    "\n"
    "Options:\n"
    "  --md FILE             the section of the report (Markdown), written atomically\n"
    "  --switch-epochs FILE  (m1, m3map) the switch epochs, rewritten only when their content changes\n"
    "  --trajectory FILE     (m3map) sb-a8 m1's records (a8.m1.group) of the trajectory grid\n"
    "  --m2 FILE             (m3map) sb-a8 m2's records (its a8.verdict names strongest_simple)\n"
    "  --seed N              bootstrap seed (m1 260826, m2 and m3 260827)\n"
    "  --resamples N         bootstrap resamples (20000)\n"
    "  -q                    no progress lines\n"
    "  --help, --version\n"
    "\n"
    "Which runs count (as sb-freeze and sb-stats): runs whose eval.done says the training did not\n"
    "complete are dropped first; of duplicate runs (same task, method, seed, arch, tier, epochs)\n"
    "the later of the rest wins; the winner must have an eval.done and every epoch of its budget\n"
    "evaluated, else its identity has no run. The others are counted on stderr and in the verdict\n"
    "record (runs_*).\n"
    "\n"
    "stdout: run.meta, then a8.* records (docs/sb-a8.md), the last one a8.verdict.\n"
    "Exit status: 0 computed (whatever the verdict); 2 usage; 3 malformed or insufficient\n"
    "input; 4 I/O error.\n";

static _Noreturn void usage(void)
{
	fputs(usage_text, stdout);
	exit(sb_cli_finish(0));
}

/* ---------------------------------------------------------------- runs */

#define MAXE 64
enum { F_ENT, F_MARGIN, F_TAIL, F_GRAD, NPROBE };
static const char *probe_names[NPROBE] = {"probe_dense_entropy", "probe_boundary_margin", "probe_tail_mass",
                                          "probe_gradient_topk_share"};

/* One run (a cell_id, or without one task.method.seed.arch.tier). budget, status and
 * evaluated come from the run's eval.done (done = 1): the cell's registered epochs, sb-train's
 * train_status, epochs_evaluated (-1 when the record lacks it). */
struct run {
	char id[160], task[64], method[64], arch[32], tier[32], status[48];
	int seed, budget, n_val, done, evaluated;
	int have[MAXE], have_test;
	double acc[MAXE], ent[MAXE], probe[MAXE][NPROBE], test_acc;
};

static struct run *runs;
static int nruns, caprun;

/* the runs left out of every analysis by select_runs (docs/sb-a8.md, "Which runs count") */
static struct {
	int used, status, no_done, partial, superseded;
} left;

static struct run *run_get(const char *id)
{
	for (int i = nruns - 1; i >= 0; i--)
		if (strcmp(runs[i].id, id) == 0)
			return &runs[i];
	if (nruns == caprun) {
		caprun = caprun ? 2 * caprun : 256;
		runs = realloc(runs, (size_t)caprun * sizeof *runs);
		if (!runs) {
			fprintf(stderr, "sb-a8: out of memory\n");
			exit(5);
		}
	}
	struct run *r = &runs[nruns++];
	memset(r, 0, sizeof *r);
	snprintf(r->id, sizeof r->id, "%s", id);
	return r;
}

/* a run's epochs: its registered budget (select_runs keeps only runs evaluated at every one) */
static int run_epochs(const struct run *r)
{
	return r->budget;
}

/* with_test: also sb-test's test.cell records (their test_accuracy, for m3) */
static int load(const char *path, struct sb_input *in, int with_test, struct sb_err *err)
{
	char *buf;
	size_t len;
	if (!strcmp(path, "-")) { /* stdin, once: hashed from the bytes read */
		static int stdin_used;
		if (stdin_used++)
			return SB_ERR(err, SB_EUSAGE, "'-' (stdin) given twice");
		SB_TRY(sb_read_stream(stdin, "<stdin>", &buf, &len, 0, err));
		in->path = "-";
		in->size_bytes = len;
		sb_sha256_buf(buf, len, in->sha256);
	} else {
		SB_TRY(sb_read_file(path, &buf, &len, 0, err));
		SB_TRY(sb_input_hash(in, path, err));
	}
	int rc = 0, line = 0;
	for (size_t a = 0; a < len && !rc; line++) {
		size_t b = a;
		while (b < len && buf[b] != '\n')
			b++;
		size_t n = b - a;
		const char *s = buf + a;
		a = b + 1;
		if (n == 0)
			continue;
		struct sb_json *rec;
		if (sb_json_parse(s, n, &rec, err)) {
			rc = SB_ERR(err, SB_EDATA, "%s:%d: %s", path, line + 1, err->msg);
			break;
		}
		const char *kind = sb_json_str(sb_json_get(rec, "kind"), "");
		int ep = strcmp(kind, "eval.epoch") == 0, done = strcmp(kind, "eval.done") == 0;
		int tc = with_test && strcmp(kind, "test.cell") == 0;
		if (ep || done || tc) {
			const char *task, *method;
			int64_t seed = 0, e = 0;
			if (sb_json_req_str(rec, "task", &task, err) || sb_json_req_str(rec, "method", &method, err) ||
			    sb_json_req_int(rec, "seed", &seed, err) ||
			    (ep && sb_json_req_int(rec, "epoch", &e, err))) {
				rc = SB_ERR(err, SB_EDATA, "%s:%d: %s", path, line + 1, err->msg);
				sb_json_free(rec);
				break;
			}
			const char *arch = sb_json_str(sb_json_get(rec, "arch"), "plain");
			const char *tier = sb_json_str(sb_json_get(rec, "tier"), "compact");
			char idb[160];
			const char *id = sb_json_str(sb_json_get(rec, "cell_id"), NULL);
			if (!id) {
				snprintf(idb, sizeof idb, "%s.%s.s%lld.%s.%s", task, method, (long long)seed, arch, tier);
				id = idb;
			}
			struct run *r = run_get(id);
			snprintf(r->task, sizeof r->task, "%s", task);
			snprintf(r->method, sizeof r->method, "%s", method);
			/* the defaults only where no record of the run said otherwise */
			if (!r->arch[0] || sb_json_get(rec, "arch"))
				snprintf(r->arch, sizeof r->arch, "%s", arch);
			if (!r->tier[0] || sb_json_get(rec, "tier"))
				snprintf(r->tier, sizeof r->tier, "%s", tier);
			r->seed = (int)seed;
			if (tc) {
				double acc = sb_json_num(sb_json_get(rec, "test_accuracy"), NAN);
				if (!(acc >= 0 && acc <= 1))
					rc = SB_ERR(err, SB_EDATA, "%s:%d: test_accuracy missing or outside [0, 1]", path,
					            line + 1);
				r->test_acc = acc;
				r->have_test = 1;
			} else if (done) {
				/* sb-eval's eval.done (lib/vallog.h): the budget and the training status */
				int64_t E, ev = -1;
				const char *st;
				if (sb_json_req_int(rec, "epochs", &E, err) || sb_json_req_str(rec, "train_status", &st, err) ||
				    (sb_json_get(rec, "epochs_evaluated") &&
				     sb_json_req_int(rec, "epochs_evaluated", &ev, err))) {
					rc = SB_ERR(err, SB_EDATA, "%s:%d: eval.done: %s", path, line + 1, err->msg);
				} else if (E < 1 || E > MAXE) {
					rc = SB_ERR(err, SB_EDATA, "%s:%d: eval.done epochs %lld out of range (1..%d)", path,
					            line + 1, (long long)E, MAXE);
				} else {
					r->done = 1;
					r->budget = (int)E;
					r->evaluated = (int)ev;
					snprintf(r->status, sizeof r->status, "%s", st);
				}
			} else if (e < 0 || e >= MAXE) {
				rc = SB_ERR(err, SB_EDATA, "%s:%d: epoch %lld out of range", path, line + 1, (long long)e);
			} else {
				double acc = sb_json_num(sb_json_get(rec, "val_accuracy"), NAN);
				if (!(acc >= 0 && acc <= 1))
					rc = SB_ERR(err, SB_EDATA, "%s:%d: val_accuracy missing or outside [0, 1]", path,
					            line + 1);
				r->have[e] = 1;
				r->acc[e] = acc;
				r->ent[e] = sb_json_num(sb_json_get(rec, "attention_entropy"), NAN);
				for (int f = 0; f < NPROBE; f++)
					r->probe[e][f] = sb_json_num(sb_json_get(rec, probe_names[f]), NAN);
				r->n_val = (int)sb_json_num(sb_json_get(rec, "n_val"), 0);
			}
		}
		sb_json_free(rec);
	}
	free(buf);
	return rc;
}

/* Which runs count (PROTOCOL A7: status `completed`; as sb-freeze's cell_unusable): a run
 * enters the analyses only when its eval.done says train_status "completed" and every epoch
 * of its budget was evaluated. A run without eval.done (sb-eval did not finish, or only a
 * test.cell record) does not count either. Among the runs that count, the later run (in input
 * order: files as given, records in file order) of the same task, method, seed, arch, tier and
 * budget wins, as in sb-stats and sb-freeze (the rule of lib/runsel.h). The runs array keeps
 * only the runs that count, in input order; `left` counts the others. */
static int run_cmp(int a, int b, void *ctx)
{
	const struct run *x = &runs[a], *y = &runs[b];
	int c = strcmp(x->task, y->task);
	if (!c)
		c = strcmp(x->method, y->method);
	if (!c)
		c = (x->seed > y->seed) - (x->seed < y->seed);
	if (!c)
		c = strcmp(x->arch, y->arch);
	if (!c)
		c = strcmp(x->tier, y->tier);
	if (!c)
		c = (x->budget > y->budget) - (x->budget < y->budget);
	return c;
}
static int select_runs(struct sb_err *err)
{
	/* one example of each (copies: the array is compacted in place) */
	char ex_status[160] = "", ex_done[160] = "", ex_partial[160] = "", ex_sup[160] = "", st[48] = "";
	struct sb_runsel_item *rs = calloc((size_t)(nruns ? nruns : 1), sizeof *rs);
	if (!rs)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int i = 0; i < nruns; i++) {
		const struct run *r = &runs[i];
		/* 1. the row filter: training not completed (a failed rerun supersedes nothing) */
		rs[i].completed = !(r->done && strcmp(r->status, "completed"));
		/* 3. the winner must be whole: an eval.done and every epoch of its budget evaluated */
		int complete = r->done && (r->evaluated < 0 || r->evaluated == r->budget);
		for (int e = 0; complete && e < r->budget; e++)
			complete = r->have[e];
		rs[i].whole = complete;
	}
	/* 2. the later run of an identity wins */
	int n_keys, n = 0;
	if (sb_runsel_keys(rs, (size_t)nruns, run_cmp, NULL, &n_keys, err) ||
	    sb_runsel_resolve(rs, (size_t)nruns, n_keys, NULL, err)) {
		free(rs);
		return err->code;
	}
	for (int i = 0; i < nruns; i++) {
		const struct run *r = &runs[i];
		switch (rs[i].disp) {
		case SB_RUNSEL_FILTERED:
			if (!left.status++) {
				snprintf(ex_status, sizeof ex_status, "%s", r->id);
				snprintf(st, sizeof st, "%s", r->status);
			}
			break;
		case SB_RUNSEL_SUPERSEDED:
			if (!left.superseded++)
				snprintf(ex_sup, sizeof ex_sup, "%s", r->id);
			break;
		case SB_RUNSEL_WINNER_NOT_WHOLE: /* not replaced by an earlier run */
			if (!r->done) {
				if (!left.no_done++)
					snprintf(ex_done, sizeof ex_done, "%s", r->id);
			} else if (!left.partial++) {
				snprintf(ex_partial, sizeof ex_partial, "%s", r->id);
			}
			break;
		case SB_RUNSEL_WINNER:
			if (n != i)
				runs[n] = runs[i];
			n++;
			break;
		}
	}
	free(rs);
	nruns = n;
	left.used = n;
	if (left.status)
		sb_cli_warn("%d run(s) left out: training status not 'completed' (e.g. %s: %s)", left.status, ex_status,
		            st);
	if (left.no_done)
		sb_cli_warn("%d run(s) left out: no eval.done record (sb-eval did not finish; e.g. %s)", left.no_done,
		            ex_done);
	if (left.partial)
		sb_cli_warn("%d run(s) left out: not evaluated at every epoch of the budget (e.g. %s)", left.partial,
		            ex_partial);
	if (left.superseded)
		sb_cli_warn("%d run(s) superseded by a later run of the same task/method/seed/arch/tier/epochs (e.g. %s)",
		            left.superseded, ex_sup);
	return 0;
}

/* the runs' counts in a verdict record, and in the report */
static void left_fields(struct sb_jw *w)
{
	sb_jw_kint(w, "runs_used", left.used);
	sb_jw_kint(w, "runs_excluded_status", left.status);
	sb_jw_kint(w, "runs_excluded_no_eval_done", left.no_done);
	sb_jw_kint(w, "runs_excluded_partial", left.partial);
	sb_jw_kint(w, "runs_superseded", left.superseded);
}

/* the run of that identity (budget <= 0: any budget); select_runs left at most one per budget,
 * and the later one in input order is taken */
static struct run *find(const char *task, const char *arch, const char *tier, const char *method, int seed,
                        int budget)
{
	for (int i = nruns - 1; i >= 0; i--) {
		struct run *r = &runs[i];
		if (r->seed == seed && !strcmp(r->task, task) && !strcmp(r->arch, arch) && !strcmp(r->tier, tier) &&
		    !strcmp(r->method, method) && (budget <= 0 || run_epochs(r) == budget))
			return r;
	}
	return NULL;
}

/* distinct (task, arch, tier[, budget]) groups in order of first appearance */
struct group {
	const char *task, *arch, *tier;
	int budget;
};
static int groups_of(struct group *g, int cap, int by_budget)
{
	int n = 0;
	for (int i = 0; i < nruns; i++) {
		const struct run *r = &runs[i];
		int b = by_budget ? run_epochs(r) : 0, j;
		for (j = 0; j < n; j++)
			if (!strcmp(g[j].task, r->task) && !strcmp(g[j].arch, r->arch) && !strcmp(g[j].tier, r->tier) &&
			    g[j].budget == b)
				break;
		if (j == n && n < cap)
			g[n++] = (struct group){r->task, r->arch, r->tier, b};
	}
	return n;
}

static int tier_index(const char *t)
{
	return !strcmp(t, "deep") ? 1 : !strcmp(t, "wide") ? 2 : 0;
}

/* classes and modality of the A1 tasks (metadata features) */
static void task_meta(const char *task, double *classes, double *text)
{
	static const struct {
		const char *t;
		int c, text;
	} tab[] = {{"mnist", 10, 0},          {"fashion_mnist", 10, 0},   {"kmnist", 10, 0},
	           {"cifar10", 10, 0},        {"cifar100", 100, 0},       {"twenty_news", 20, 1},
	           {"synthetic_marker", 10, 1}, {"emnist_balanced", 47, 0}, {"emnist_letters", 26, 0},
	           {"emnist_digits", 10, 0},  {"k49", 49, 0},             {"svhn", 10, 0},
	           {"usps", 10, 0}};
	*classes = 10;
	*text = 0;
	for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
		if (!strcmp(tab[i].t, task)) {
			*classes = tab[i].c;
			*text = tab[i].text;
		}
}

/* ---------------------------------------------------------------- output helpers */

struct md {
	char *buf;
	size_t len, cap;
};
static void mdf(struct md *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mdf(struct md *m, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int n = vsnprintf(m->buf ? m->buf + m->len : NULL, m->buf ? m->cap - m->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (m->buf && m->len + (size_t)n < m->cap) {
			m->len += (size_t)n;
			return;
		}
		m->cap = (m->cap + (size_t)n + 1) * 2;
		m->buf = realloc(m->buf, m->cap);
		if (!m->buf) {
			fprintf(stderr, "sb-a8: out of memory\n");
			exit(5);
		}
	}
}

static int emit(struct sb_jw *w, struct sb_err *err)
{
	return sb_jw_line(w, err);
}

/* The last members of the m2 and m3 verdict records (the same criteria): the benefit per
 * architecture and tier, its clause, the bootstrap's seed and resamples, and pass. */
static void m2_tail(struct sb_jw *w, const struct sb_a8_m2_verdict *v, uint64_t seed, int resamples)
{
	sb_jw_kf64(w, "benefit_plain", v->benefit_arch[0]);
	sb_jw_kf64(w, "benefit_local_hybrid", v->benefit_arch[1]);
	sb_jw_kf64(w, "benefit_compact", v->benefit_tier[0]);
	sb_jw_kf64(w, "benefit_deep", v->benefit_tier[1]);
	sb_jw_kf64(w, "benefit_wide", v->benefit_tier[2]);
	sb_jw_kbool(w, "clause_benefit", v->clause_benefit);
	sb_jw_kint(w, "bootstrap_seed", (int64_t)seed);
	sb_jw_kint(w, "bootstrap_resamples", resamples);
	sb_jw_kbool(w, "pass", v->pass);
}

/* A verdict string: PASS_WORD when every clause holds, else FAIL_WORD followed by the name of
 * each clause that failed (" name", in the order given). */
struct clause {
	int holds;
	const char *name;
};
static void verdict_str(char *out, size_t n, const char *pass_word, const char *fail_word, const struct clause *c,
                        int nc)
{
	int all = 1;
	for (int i = 0; i < nc; i++)
		all &= c[i].holds != 0;
	size_t k = (size_t)snprintf(out, n, "%s", all ? pass_word : fail_word);
	for (int i = 0; i < nc && k < n; i++)
		if (!c[i].holds)
			k += (size_t)snprintf(out + k, n - k, " %s", c[i].name);
}

static const char *yes(int c)
{
	return c ? "met" : "**not met**";
}

/* the report's line on the runs that count (select_runs) */
static void left_md(struct md *md)
{
	mdf(md, "Runs counted: %d; left out: %d with a training status other than `completed`, %d without "
	        "`eval.done` (evaluation unfinished), %d not evaluated at every epoch of their budget; %d superseded "
	        "by a later run of the same cell.\n\n",
	    left.used, left.status, left.no_done, left.partial, left.superseded);
}

/* ---------------------------------------------------------------- M1 */

#define NMETA 6
#define NMECH (2 * NPROBE + NMETA)
enum { P_MECH, P_CONST, P_EARLY, P_ENTROPY, P_META, NPRED };
static const char *pred_names[NPRED] = {"mechanistic", "constant_median", "early_accuracy", "entropy", "metadata"};
static const char *switch_methods[NPRED] = {"mechanistic_switch", "median_switch", "early_accuracy_switch",
                                            "entropy_switch", NULL};

/* The M1 features of one (task, arch, tier) group from its paired seeds (a softmax and a
 * topk_softmax_025 run of the same seed): delta_e (mean top-k - softmax accuracy), the
 * mechanistic features (the top-k runs' probe features at epoch 3 and their change from
 * epoch 1 to 3, then the six metadata), the softmax runs' epoch-3 accuracy and entropy.
 * Returns 0 when the group has no paired seeds of at least 3 epochs. */
struct gfeat {
	int ns, K, n_val;
	double delta[MAXE], x[NMECH], acc3, ent3;
};
static void meta_features(double *meta, const char *task, const char *arch, const char *tier, int n_val)
{
	double classes, text;
	task_meta(task, &classes, &text);
	meta[0] = !strcmp(arch, "local_hybrid");
	meta[1] = tier_index(tier) == 1;
	meta[2] = tier_index(tier) == 2;
	meta[3] = log(classes);
	meta[4] = text;
	meta[5] = n_val > 0 ? log((double)n_val) : 0;
}
static int group_features(const struct group *g, struct gfeat *f)
{
	double fe[NPROBE][3] = {{0}};
	memset(f, 0, sizeof *f);
	f->K = MAXE;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < nruns; i++) {
			struct run *s = &runs[i];
			if (strcmp(s->method, "topk_softmax_025") || strcmp(s->task, g->task) || strcmp(s->arch, g->arch) ||
			    strcmp(s->tier, g->tier))
				continue;
			struct run *d = find(g->task, g->arch, g->tier, "softmax", s->seed, 0);
			if (!d)
				continue;
			if (pass == 0) {
				int k = run_epochs(s) < run_epochs(d) ? run_epochs(s) : run_epochs(d);
				f->K = k < f->K ? k : f->K;
				f->ns++;
				continue;
			}
			for (int e = 0; e < f->K; e++)
				f->delta[e] += (s->acc[e] - d->acc[e]) / f->ns;
			for (int q = 0; q < NPROBE; q++)
				for (int e = 0; e < 3; e++)
					fe[q][e] += s->probe[e][q] / f->ns;
			f->acc3 += d->acc[2] / f->ns;
			f->ent3 += d->ent[2] / f->ns;
		}
	if (f->ns == 0 || f->K < 3)
		return 0;
	for (int q = 0; q < NPROBE; q++) {
		f->x[q] = fe[q][2];
		f->x[NPROBE + q] = fe[q][2] - fe[q][0];
	}
	for (int i = 0; i < nruns; i++)
		if (!strcmp(runs[i].task, g->task) && runs[i].n_val > 0) {
			f->n_val = runs[i].n_val;
			break;
		}
	meta_features(f->x + 2 * NPROBE, g->task, g->arch, g->tier, f->n_val);
	return 1;
}

static int m1(struct sb_jw *w, struct md *md, const char *switch_path, uint64_t seed, int resamples,
              struct sb_err *err)
{
	struct group g[1024];
	int ng = groups_of(g, 1024, 0), n = 0, K = 0;
	double *X = calloc((size_t)ng * NMECH + 1, sizeof *X), *y = calloc((size_t)ng + 1, sizeof *y);
	double *xe = calloc((size_t)ng * 2 + 1, sizeof *xe), *xh = calloc((size_t)ng + 1, sizeof *xh);
	int *ds = calloc((size_t)ng + 1, sizeof *ds), *arch = calloc((size_t)ng + 1, sizeof *arch),
	    *tier = calloc((size_t)ng + 1, sizeof *tier), *gi = calloc((size_t)ng + 1, sizeof *gi),
	    *nseeds = calloc((size_t)ng + 1, sizeof *nseeds), *nval = calloc((size_t)ng + 1, sizeof *nval);
	int *pred = calloc((size_t)NPRED * ng + 1, sizeof *pred);
	const char *dsname[64];
	int cifar[64], nd = 0, rc = 0;
	if (!X || !y || !xe || !xh || !ds || !arch || !tier || !gi || !nseeds || !nval || !pred)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int j = 0; j < ng; j++) {
		struct gfeat gf;
		if (!group_features(&g[j], &gf))
			continue;
		if (K == 0 || gf.K < K)
			K = gf.K;
		int dj;
		for (dj = 0; dj < nd; dj++)
			if (!strcmp(dsname[dj], g[j].task))
				break;
		if (dj == nd) {
			if (nd == 64)
				continue;
			dsname[nd] = g[j].task;
			cifar[nd] = !strncmp(g[j].task, "cifar", 5);
			nd++;
		}
		ds[n] = dj;
		arch[n] = !strcmp(g[j].arch, "local_hybrid");
		tier[n] = tier_index(g[j].tier);
		y[n] = sb_a8_switch_target(gf.delta, gf.K);
		gi[n] = j;
		nseeds[n] = gf.ns;
		nval[n] = gf.n_val;
		double *x = X + (size_t)n * NMECH;
		memcpy(x, gf.x, sizeof gf.x);
		xe[n] = gf.acc3;
		xh[n] = gf.ent3;
		for (int q = 0; q < NMECH; q++)
			if (!isfinite(x[q])) {
				rc = SB_ERR(err, SB_EDATA,
				            "%s/%s/%s: the early probe features are missing (records without probe_* "
				            "fields: sb-eval ran with --no-probe, or an older sb-eval)",
				            g[j].task, g[j].arch, g[j].tier);
				goto out;
			}
		n++;
	}
	if (n < 2 || nd < 2) {
		rc = SB_ERR(err, SB_EDATA, "M1 needs paired softmax / topk_softmax_025 trajectories of at least 3 epochs "
		                           "in at least 2 tasks (found %d groups in %d tasks)",
		            n, nd);
		goto out;
	}
	/* the five leave-one-dataset-out predictors */
	double *meta = calloc((size_t)n * NMETA + 1, sizeof *meta);
	if (!meta) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++)
		memcpy(meta + (size_t)i * NMETA, X + (size_t)i * NMECH + 2 * NPROBE, NMETA * sizeof *meta);
	if ((rc = sb_a8_loo(X, y, ds, n, NMECH, 1.0, pred + (size_t)P_MECH * n, NULL, err)) ||
	    (rc = sb_a8_loo(NULL, y, ds, n, 0, 1.0, pred + (size_t)P_CONST * n, NULL, err)) ||
	    (rc = sb_a8_loo(xe, y, ds, n, 1, 1.0, pred + (size_t)P_EARLY * n, NULL, err)) ||
	    (rc = sb_a8_loo(xh, y, ds, n, 1, 1.0, pred + (size_t)P_ENTROPY * n, NULL, err)) ||
	    (rc = sb_a8_loo(meta, y, ds, n, NMETA, 1.0, pred + (size_t)P_META * n, NULL, err))) {
		free(meta);
		goto out;
	}
	free(meta);
	struct sb_a8_m1_verdict v;
	if ((rc = sb_a8_m1_verdict(n, nd, NPRED, K, ds, cifar, arch, tier, y, pred, seed, resamples, &v, err)))
		goto out;
	for (int i = 0; i < n; i++) {
		const struct group *q = &g[gi[i]];
		sb_jw_record(w, "a8.m1.group", 1);
		sb_jw_kstr(w, "task", q->task);
		sb_jw_kstr(w, "arch", q->arch);
		sb_jw_kstr(w, "tier", q->tier);
		sb_jw_kint(w, "n_seeds", nseeds[i]);
		sb_jw_kint(w, "n_val", nval[i]);
		sb_jw_kint(w, "target_switch_epoch", (int64_t)y[i]);
		for (int f = 0; f < NPROBE; f++) {
			char k[80];
			snprintf(k, sizeof k, "%s_e3", probe_names[f]);
			sb_jw_kf64(w, k, X[(size_t)i * NMECH + f]);
			snprintf(k, sizeof k, "%s_d13", probe_names[f]);
			sb_jw_kf64(w, k, X[(size_t)i * NMECH + NPROBE + f]);
		}
		sb_jw_kf64(w, "dense_val_accuracy_e3", xe[i]);
		sb_jw_kf64(w, "dense_attention_entropy_e3", xh[i]);
		for (int m = 0; m < NPRED; m++) {
			char k[80];
			snprintf(k, sizeof k, "pred_%s", pred_names[m]);
			sb_jw_kint(w, k, pred[(size_t)m * n + i]);
		}
		sb_jw_obj_end(w);
		if ((rc = emit(w, err)))
			goto out;
	}
	char verdict[440];
	verdict_str(verdict, sizeof verdict, "PASS", "FAILED:",
	            (struct clause[]){{v.clause_reversals, "reversals"},
	                              {v.clause_improvement, "macro-MAE-improvement"},
	                              {v.clause_ci, "bootstrap-CI"},
	                              {v.clause_share, "single-dataset-share"}},
	            4);
	sb_jw_record(w, "a8.verdict", 1);
	sb_jw_kstr(w, "analysis", "m1");
	sb_jw_kstr(w, "verdict", verdict);
	sb_jw_kint(w, "groups", n);
	sb_jw_kint(w, "datasets", nd);
	sb_jw_kint(w, "epochs", K);
	sb_jw_kint(w, "reversal_datasets_noncifar", v.rev_datasets_noncifar);
	sb_jw_kint(w, "reversal_archs", v.rev_archs);
	sb_jw_kint(w, "reversal_tiers", v.rev_tiers);
	sb_jw_kbool(w, "clause_reversals", v.clause_reversals);
	for (int m = 0; m < NPRED; m++) {
		char k[80];
		snprintf(k, sizeof k, "macro_mae_%s", pred_names[m]);
		sb_jw_kf64(w, k, v.macro_mae[m]);
	}
	sb_jw_kstr(w, "strongest_baseline", pred_names[v.best_baseline]);
	sb_jw_kf64(w, "improvement", v.improvement);
	sb_jw_kbool(w, "clause_improvement", v.clause_improvement);
	sb_jw_kf64(w, "mae_diff", v.diff);
	sb_jw_kf64(w, "mae_diff_ci_lo", v.ci_lo);
	sb_jw_kf64(w, "mae_diff_ci_hi", v.ci_hi);
	sb_jw_kint(w, "bootstrap_seed", (int64_t)seed);
	sb_jw_kint(w, "bootstrap_resamples", resamples);
	sb_jw_kbool(w, "clause_ci", v.clause_ci);
	sb_jw_kf64(w, "max_dataset_share", v.max_share);
	sb_jw_kstr(w, "max_share_dataset", v.max_share_dataset >= 0 ? dsname[v.max_share_dataset] : "");
	sb_jw_kbool(w, "clause_share", v.clause_share);
	sb_jw_kbool(w, "pass", v.pass);
	sb_jw_kstr(w, "published_outcome", "failed");
	left_fields(w);
	sb_jw_obj_end(w);
	if ((rc = emit(w, err)))
		goto out;
	/* the report's section */
	mdf(md, "### M1: the switch-epoch predictor (computed)\n\n");
	mdf(md, "%d (task, arch, tier) groups in %d datasets, %d epochs; targets and leave-one-dataset-out "
	        "predictions in stats `a8.m1.group` records.\n\n",
	    n, nd, K);
	mdf(md, "| predictor | macro-MAE (epochs) |\n| --- | --- |\n");
	for (int m = 0; m < NPRED; m++)
		mdf(md, "| %s%s | %.4f |\n", pred_names[m], m == v.best_baseline ? " (strongest baseline)" : "",
		    v.macro_mae[m]);
	mdf(md, "\n| criterion | computed | |\n| --- | --- | --- |\n");
	mdf(md, "| reversals in >= 3 non-CIFAR datasets, both architectures, >= 2 tiers | %d datasets, %d "
	        "architectures, %d tiers | %s |\n",
	    v.rev_datasets_noncifar, v.rev_archs, v.rev_tiers, yes(v.clause_reversals));
	mdf(md, "| macro-MAE improvement >= 10%% over the strongest baseline | %.1f%% | %s |\n", 100 * v.improvement,
	    yes(v.clause_improvement));
	mdf(md, "| bootstrap 95%% CI of the MAE difference (seed %llu, %d resamples) entirely < 0 | %.4f [%.4f, "
	        "%.4f] | %s |\n",
	    (unsigned long long)seed, resamples, v.diff, v.ci_lo, v.ci_hi, yes(v.clause_ci));
	mdf(md, "| largest single-dataset share of the improvement <= 0.5 | %.3f (%s) | %s |\n", v.max_share,
	    v.max_share_dataset >= 0 ? dsname[v.max_share_dataset] : "-", yes(v.clause_share));
	mdf(md, "\n**M1 verdict: %s** (published outcome: failed)\n\n", verdict);
	left_md(md);
	/* switching-epochs.inc */
	if (switch_path) {
		struct md inc = {0};
		mdf(&inc, "# switching-epochs.inc — written by sb-a8 m1 (docs/sb-a8.md): the switch epoch of each\n"
		          "# switching method per (task, arch, tier), predicted leave-one-dataset-out from the\n"
		          "# trajectory grid: median_switch = the constant (median) baseline, early_accuracy_switch\n"
		          "# = ridge on the dense epoch-3 accuracy, entropy_switch = ridge on the dense epoch-3\n"
		          "# attention entropy, mechanistic_switch = ridge on the early probe features + metadata.\n");
		for (int i = 0; i < n; i++)
			for (int m = 0; m < NPRED; m++)
				if (switch_methods[m])
					mdf(&inc, "set when task=%s arch=%s tier=%s method=%s switch_epoch=%d\n",
					    g[gi[i]].task, g[gi[i]].arch, g[gi[i]].tier, switch_methods[m],
					    pred[(size_t)m * n + i]);
		char *old = NULL;
		size_t olen = 0;
		struct sb_err e2 = {0};
		int same = sb_file_exists(switch_path) && !sb_read_file(switch_path, &old, &olen, 0, &e2) &&
		           olen == inc.len && memcmp(old, inc.buf, olen) == 0;
		free(old);
		if (!same)
			rc = sb_write_file_atomic(switch_path, inc.buf, inc.len, err);
		free(inc.buf);
	}
out:
	free(X);
	free(y);
	free(xe);
	free(xh);
	free(ds);
	free(arch);
	free(tier);
	free(gi);
	free(nseeds);
	free(nval);
	free(pred);
	return rc;
}

/* ---------------------------------------------------------------- M2 */

static const char *simple_methods[] = {"median_switch", "early_accuracy_switch", "entropy_switch"};
#define NSIMPLE 3

static int m2(struct sb_jw *w, struct md *md, uint64_t seed, int resamples, struct sb_err *err)
{
	int cap = nruns + 1, n = 0;
	double *td = calloc((size_t)cap, sizeof *td), *tm = calloc((size_t)cap, sizeof *tm),
	       *ts = calloc((size_t)cap * NSIMPLE, sizeof *ts), *fd = calloc((size_t)cap, sizeof *fd),
	       *fm = calloc((size_t)cap, sizeof *fm);
	int *arch = calloc((size_t)cap, sizeof *arch), *tier = calloc((size_t)cap, sizeof *tier);
	int rc = 0;
	if (!td || !tm || !ts || !fd || !fm || !arch || !tier)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int i = 0; i < nruns; i++) {
		struct run *mr = &runs[i];
		if (strcmp(mr->method, "mechanistic_switch"))
			continue;
		struct run *d = find(mr->task, mr->arch, mr->tier, "softmax", mr->seed, 0), *s[NSIMPLE];
		int ok = d != NULL;
		for (int q = 0; q < NSIMPLE && ok; q++)
			ok = (s[q] = find(mr->task, mr->arch, mr->tier, simple_methods[q], mr->seed, 0)) != NULL;
		if (!ok)
			continue;
		int K = run_epochs(d);
		if (run_epochs(mr) < K)
			K = run_epochs(mr);
		for (int q = 0; q < NSIMPLE; q++)
			if (run_epochs(s[q]) < K)
				K = run_epochs(s[q]);
		if (K < 1)
			continue;
		double dense_final = d->acc[K - 1];
		td[n] = sb_a8_time_to_target(d->acc, K, dense_final);
		tm[n] = sb_a8_time_to_target(mr->acc, K, dense_final);
		for (int q = 0; q < NSIMPLE; q++)
			ts[(size_t)q * cap + n] = sb_a8_time_to_target(s[q]->acc, K, dense_final);
		fd[n] = dense_final;
		fm[n] = mr->acc[K - 1];
		arch[n] = !strcmp(mr->arch, "local_hybrid");
		tier[n] = tier_index(mr->tier);
		n++;
	}
	if (n < 1) {
		rc = SB_ERR(err, SB_EDATA, "M2 needs paired softmax, mechanistic_switch, median_switch, "
		                           "early_accuracy_switch and entropy_switch runs (found none)");
		goto out;
	}
	double *ts2 = malloc((size_t)n * NSIMPLE * sizeof *ts2);
	if (!ts2) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto out;
	}
	for (int q = 0; q < NSIMPLE; q++)
		memcpy(ts2 + (size_t)q * n, ts + (size_t)q * cap, (size_t)n * sizeof *ts2);
	struct sb_a8_m2_verdict v;
	rc = sb_a8_m2_verdict(n, NSIMPLE, td, tm, ts2, fd, fm, arch, tier, seed, resamples, &v, err);
	free(ts2);
	if (rc)
		goto out;
	char verdict[440];
	verdict_str(verdict, sizeof verdict, "PASS", "KILLED:",
	            (struct clause[]){{v.clause_median, "median-reduction"},
	                              {v.clause_bounds, "bootstrap-lower-bounds"},
	                              {v.clause_final, "final-accuracy"},
	                              {v.clause_benefit, "benefit-archs-tiers"}},
	            4);
	const char *bs = v.best_simple >= 0 ? simple_methods[v.best_simple] : "";
	sb_jw_record(w, "a8.verdict", 1);
	sb_jw_kstr(w, "analysis", "m2");
	sb_jw_kstr(w, "verdict", verdict);
	sb_jw_kint(w, "units", n);
	sb_jw_kf64(w, "median_reduction", v.median_reduction);
	sb_jw_kbool(w, "clause_median", v.clause_median);
	sb_jw_kf64(w, "reduction_vs_dense_ci_lo", v.lo_vs_dense);
	sb_jw_kf64(w, "reduction_vs_dense_ci_hi", v.hi_vs_dense);
	sb_jw_kstr(w, "strongest_simple", bs);
	sb_jw_kf64(w, "reduction_vs_simple_ci_lo", v.lo_vs_simple);
	sb_jw_kf64(w, "reduction_vs_simple_ci_hi", v.hi_vs_simple);
	sb_jw_kbool(w, "clause_bounds", v.clause_bounds);
	sb_jw_kf64(w, "final_accuracy_diff", v.final_diff);
	sb_jw_kf64(w, "final_accuracy_ci_lo", v.final_lo);
	sb_jw_kf64(w, "final_accuracy_ci_hi", v.final_hi);
	sb_jw_kbool(w, "clause_final", v.clause_final);
	m2_tail(w, &v, seed, resamples);
	sb_jw_kstr(w, "published_outcome", "killed");
	left_fields(w);
	sb_jw_obj_end(w);
	if ((rc = emit(w, err)))
		goto out;
	mdf(md, "### M2: the switching schedules (computed)\n\n%d paired units (task x arch x tier x seed); "
	        "mechanistic_switch against softmax and the simple schedules.\n\n",
	    n);
	mdf(md, "| criterion | computed | |\n| --- | --- | --- |\n");
	mdf(md, "| median time-to-target reduction vs dense >= 10%% | %.1f%% | %s |\n", 100 * v.median_reduction,
	    yes(v.clause_median));
	mdf(md, "| bootstrap lower bounds (seed %llu) > 0 vs dense and vs the strongest simple schedule (%s) | "
	        "[%.3f, %.3f]; [%.3f, %.3f] epochs | %s |\n",
	    (unsigned long long)seed, bs, v.lo_vs_dense, v.hi_vs_dense, v.lo_vs_simple, v.hi_vs_simple,
	    yes(v.clause_bounds));
	mdf(md, "| final-accuracy CI lower bound > -0.005 | %.4f [%.4f, %.4f] | %s |\n", v.final_diff, v.final_lo,
	    v.final_hi, yes(v.clause_final));
	mdf(md, "| benefit > 0 in both architectures and >= 2 tiers | plain %.3f, local_hybrid %.3f; compact "
	        "%.3f, deep %.3f, wide %.3f | %s |\n",
	    v.benefit_arch[0], v.benefit_arch[1], v.benefit_tier[0], v.benefit_tier[1], v.benefit_tier[2],
	    yes(v.clause_benefit));
	mdf(md, "\n**M2 verdict: %s** (published outcome: killed)\n\n", verdict);
	left_md(md);
out:
	free(td);
	free(tm);
	free(ts);
	free(fd);
	free(fm);
	free(arch);
	free(tier);
	return rc;
}

/* ---------------------------------------------------------------- M3 */

/* the simple schedules and the M1 predictor each takes its switch epoch from */
static const char *simple_predictor(const char *method)
{
	return !strcmp(method, "median_switch")           ? "constant_median"
	       : !strcmp(method, "early_accuracy_switch") ? "early_accuracy"
	       : !strcmp(method, "entropy_switch")        ? "entropy"
	                                                  : NULL;
}

/* Calls fn on every record of an NDJSON file; errors name file:line. */
static int each_record(const char *path, int (*fn)(const struct sb_json *rec, void *ctx, struct sb_err *err), void *ctx,
                       struct sb_err *err)
{
	char *buf;
	size_t len;
	SB_TRY(sb_read_file(path, &buf, &len, 0, err));
	int rc = 0, line = 0;
	for (size_t a = 0; a < len && !rc; line++) {
		size_t b = a;
		while (b < len && buf[b] != '\n')
			b++;
		const char *s = buf + a;
		size_t n = b - a;
		a = b + 1;
		if (n == 0)
			continue;
		struct sb_json *rec;
		if (sb_json_parse(s, n, &rec, err)) {
			rc = SB_ERR(err, SB_EDATA, "%s:%d: %s", path, line + 1, err->msg);
			break;
		}
		if ((rc = fn(rec, ctx, err)))
			rc = SB_ERR(err, SB_EDATA, "%s:%d: %s", path, line + 1, err->msg);
		sb_json_free(rec);
	}
	free(buf);
	return rc;
}

/* the discovery groups of sb-a8 m1's a8.m1.group records */
struct traj {
	int n, cap;
	double *x, *xe, *xh, *y;
	char (*task)[64];
};
static int traj_rec(const struct sb_json *rec, void *ctx, struct sb_err *err)
{
	struct traj *t = ctx;
	if (strcmp(sb_json_str(sb_json_get(rec, "kind"), ""), "a8.m1.group"))
		return 0;
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 64;
		t->x = realloc(t->x, (size_t)t->cap * NMECH * sizeof *t->x);
		t->xe = realloc(t->xe, (size_t)t->cap * sizeof *t->xe);
		t->xh = realloc(t->xh, (size_t)t->cap * sizeof *t->xh);
		t->y = realloc(t->y, (size_t)t->cap * sizeof *t->y);
		t->task = realloc(t->task, (size_t)t->cap * sizeof *t->task);
		if (!t->x || !t->xe || !t->xh || !t->y || !t->task)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	const char *task, *arch, *tier;
	int64_t target, n_val;
	if (sb_json_req_str(rec, "task", &task, err) || sb_json_req_str(rec, "arch", &arch, err) ||
	    sb_json_req_str(rec, "tier", &tier, err) || sb_json_req_int(rec, "target_switch_epoch", &target, err))
		return err->code;
	if (sb_json_req_int(rec, "n_val", &n_val, err))
		return SB_ERR(err, SB_EDATA, "a8.m1.group without n_val (written by an older sb-a8: run sb-a8 m1 again)");
	double *x = t->x + (size_t)t->n * NMECH;
	for (int f = 0; f < NPROBE; f++) {
		char k[80];
		snprintf(k, sizeof k, "%s_e3", probe_names[f]);
		x[f] = sb_json_num(sb_json_get(rec, k), NAN);
		snprintf(k, sizeof k, "%s_d13", probe_names[f]);
		x[NPROBE + f] = sb_json_num(sb_json_get(rec, k), NAN);
	}
	meta_features(x + 2 * NPROBE, task, arch, tier, (int)n_val);
	t->xe[t->n] = sb_json_num(sb_json_get(rec, "dense_val_accuracy_e3"), NAN);
	t->xh[t->n] = sb_json_num(sb_json_get(rec, "dense_attention_entropy_e3"), NAN);
	t->y[t->n] = (double)target;
	for (int q = 0; q < NMECH; q++)
		if (!isfinite(x[q]))
			return SB_ERR(err, SB_EDATA, "a8.m1.group %s/%s/%s: a feature is missing or not finite", task, arch,
			              tier);
	if (!isfinite(t->xe[t->n]) || !isfinite(t->xh[t->n]))
		return SB_ERR(err, SB_EDATA, "a8.m1.group %s/%s/%s: dense_val_accuracy_e3 or dense_attention_entropy_e3 "
		                             "missing",
		              task, arch, tier);
	snprintf(t->task[t->n], sizeof t->task[0], "%s", task);
	t->n++;
	return 0;
}
static int m2_rec(const struct sb_json *rec, void *ctx, struct sb_err *err)
{
	char *best = ctx;
	if (strcmp(sb_json_str(sb_json_get(rec, "kind"), ""), "a8.verdict") ||
	    strcmp(sb_json_str(sb_json_get(rec, "analysis"), ""), "m2"))
		return 0;
	snprintf(best, 64, "%s", sb_json_str(sb_json_get(rec, "strongest_simple"), ""));
	return 0;
}

static const struct group *sort_groups_base;
static int cmp_group(const void *a, const void *b)
{
	const struct group *x = &sort_groups_base[*(const int *)a], *y = &sort_groups_base[*(const int *)b];
	int c = strcmp(x->task, y->task);
	if (!c)
		c = strcmp(x->arch, y->arch);
	if (!c)
		c = tier_index(x->tier) - tier_index(y->tier);
	return c;
}

static int m3map(struct sb_jw *w, struct md *md, const char *switch_path, const char *traj_path, const char *m2_path,
                 struct sb_err *err)
{
	struct traj t = {0};
	char simple[64] = "";
	int rc = 0;
	struct group g[1024];
	int ng = groups_of(g, 1024, 0), n = 0, ntask = 0;
	int *gi = calloc((size_t)ng + 1, sizeof *gi), *pm = calloc((size_t)ng + 1, sizeof *pm),
	    *ps = calloc((size_t)ng + 1, sizeof *ps), *target = calloc((size_t)ng + 1, sizeof *target);
	struct gfeat *gf = calloc((size_t)ng + 1, sizeof *gf);
	double *X = calloc((size_t)ng * NMECH + 1, sizeof *X), *xs = calloc((size_t)ng + 1, sizeof *xs);
	struct md inc = {0};
	if (!gi || !pm || !ps || !target || !gf || !X || !xs) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto out;
	}
	if ((rc = each_record(traj_path, traj_rec, &t, err)) || (rc = each_record(m2_path, m2_rec, simple, err)))
		goto out;
	const char *spred = simple_predictor(simple);
	if (!spred) {
		rc = SB_ERR(err, SB_EDATA,
		            "%s: no a8.verdict of analysis m2 naming its strongest simple schedule (median_switch, "
		            "early_accuracy_switch or entropy_switch)",
		            m2_path);
		goto out;
	}
	if (t.n < 2) {
		rc = SB_ERR(err, SB_EDATA, "%s: %d a8.m1.group records (sb-a8 m1's output of the trajectory grid); at "
		                           "least 2 are needed",
		            traj_path, t.n);
		goto out;
	}
	for (int i = 0; i < t.n; i++) {
		int j = 0;
		while (j < i && strcmp(t.task[j], t.task[i]))
			j++;
		ntask += j == i;
	}
	/* the confirmation groups, in a fixed order (the map's content does not depend on
	 * the order of the inputs) */
	for (int j = 0; j < ng; j++)
		gi[j] = j;
	sort_groups_base = g;
	qsort(gi, (size_t)ng, sizeof *gi, cmp_group);
	for (int k = 0; k < ng; k++) {
		int j = gi[k];
		for (int i = 0; i < t.n; i++)
			if (!strcmp(t.task[i], g[j].task)) {
				rc = SB_ERR(err, SB_EDATA,
				            "task %s is a discovery task of %s: the confirmation tasks must be new (the "
				            "predictors are fitted on every discovery group)",
				            g[j].task, traj_path);
				goto out;
			}
		if (!group_features(&g[j], &gf[n]))
			continue;
		for (int q = 0; q < NMECH; q++)
			if (!isfinite(gf[n].x[q])) {
				rc = SB_ERR(err, SB_EDATA,
				            "%s/%s/%s: the early probe features are missing (records without probe_* fields)",
				            g[j].task, g[j].arch, g[j].tier);
				goto out;
			}
		memcpy(X + (size_t)n * NMECH, gf[n].x, sizeof gf[n].x);
		xs[n] = !strcmp(spred, "early_accuracy") ? gf[n].acc3 : gf[n].ent3;
		target[n] = sb_a8_switch_target(gf[n].delta, gf[n].K);
		gi[n] = j;
		n++;
	}
	if (n < 1) {
		rc = SB_ERR(err, SB_EDATA, "M3's switch map needs paired softmax / topk_softmax_025 runs of at least 3 "
		                           "epochs of the confirmation tasks (found none)");
		goto out;
	}
	/* the predictors fitted on every discovery group, applied to the confirmation groups */
	if ((rc = sb_a8_fit_predict(t.x, t.y, t.n, NMECH, 1.0, X, n, pm, NULL, err)))
		goto out;
	if (!strcmp(spred, "constant_median"))
		rc = sb_a8_fit_predict(NULL, t.y, t.n, 0, 1.0, NULL, n, ps, NULL, err);
	else
		rc = sb_a8_fit_predict(!strcmp(spred, "early_accuracy") ? t.xe : t.xh, t.y, t.n, 1, 1.0, xs, n, ps, NULL,
		                       err);
	if (rc)
		goto out;
	mdf(&inc, "# written by sb-a8 m3map (docs/sb-a8.md): PROTOCOL A8 M3's switch map. Per confirmation\n"
	          "# (task, arch, tier), the switch epoch of mechanistic_switch (ridge on the early probe features\n"
	          "# + metadata) and of %s (M2's strongest simple schedule; predictor %s), each\n"
	          "# fitted on all %d discovery groups of the trajectory grid and applied to the features of\n"
	          "# the confirmation grid's own softmax / topk_softmax_025 runs (epochs 1-3). The method line\n"
	          "# is the method axis of the block that includes this file (pipelines/grids/confirmation.grid).\n"
	          "method mechanistic_switch %s\n",
	    simple, spred, t.n, simple);
	for (int i = 0; i < n; i++) {
		const struct group *q = &g[gi[i]];
		mdf(&inc, "set when task=%s arch=%s tier=%s method=mechanistic_switch switch_epoch=%d\n", q->task, q->arch,
		    q->tier, pm[i]);
		mdf(&inc, "set when task=%s arch=%s tier=%s method=%s switch_epoch=%d\n", q->task, q->arch, q->tier,
		    simple, ps[i]);
	}
	char hex[SB_SHA256_HEX];
	sb_sha256_buf(inc.buf, inc.len, hex);
	int rewritten = 0;
	if (switch_path) {
		char *old = NULL;
		size_t olen = 0;
		struct sb_err e2 = {0};
		int same = sb_file_exists(switch_path) && !sb_read_file(switch_path, &old, &olen, 0, &e2) &&
		           olen == inc.len && memcmp(old, inc.buf, olen) == 0;
		free(old);
		if (!same) {
			if ((rc = sb_write_file_atomic(switch_path, inc.buf, inc.len, err)))
				goto out;
			rewritten = 1;
		}
		sb_progress(1, "switch map %s: SHA-256 %s (%s)", switch_path, hex, rewritten ? "written" : "unchanged");
	}
	char pk[80];
	snprintf(pk, sizeof pk, "pred_%s", spred);
	for (int i = 0; i < n; i++) {
		const struct group *q = &g[gi[i]];
		sb_jw_record(w, "a8.m3map.group", 1);
		sb_jw_kstr(w, "task", q->task);
		sb_jw_kstr(w, "arch", q->arch);
		sb_jw_kstr(w, "tier", q->tier);
		sb_jw_kint(w, "n_seeds", gf[i].ns);
		sb_jw_kint(w, "n_val", gf[i].n_val);
		for (int f = 0; f < NPROBE; f++) {
			char k[80];
			snprintf(k, sizeof k, "%s_e3", probe_names[f]);
			sb_jw_kf64(w, k, gf[i].x[f]);
			snprintf(k, sizeof k, "%s_d13", probe_names[f]);
			sb_jw_kf64(w, k, gf[i].x[NPROBE + f]);
		}
		sb_jw_kf64(w, "dense_val_accuracy_e3", gf[i].acc3);
		sb_jw_kf64(w, "dense_attention_entropy_e3", gf[i].ent3);
		sb_jw_kint(w, "observed_target_switch_epoch", target[i]);
		sb_jw_kint(w, "pred_mechanistic", pm[i]);
		sb_jw_kint(w, pk, ps[i]);
		sb_jw_obj_end(w);
		if ((rc = emit(w, err)))
			goto out;
	}
	const char *verdict = !switch_path ? "SWITCH_MAP_COMPUTED" : rewritten ? "SWITCH_MAP_WRITTEN" : "SWITCH_MAP_UNCHANGED";
	sb_jw_record(w, "a8.verdict", 1);
	sb_jw_kstr(w, "analysis", "m3map");
	sb_jw_kstr(w, "verdict", verdict);
	sb_jw_kint(w, "groups", n);
	sb_jw_kint(w, "discovery_groups", t.n);
	sb_jw_kint(w, "discovery_tasks", ntask);
	sb_jw_kstr(w, "strongest_simple", simple);
	sb_jw_kstr(w, "simple_predictor", spred);
	if (switch_path)
		sb_jw_kstr(w, "switch_map", switch_path);
	else
		sb_jw_knull(w, "switch_map");
	sb_jw_kstr(w, "switch_map_sha256", hex);
	sb_jw_kbool(w, "switch_map_rewritten", rewritten);
	left_fields(w);
	sb_jw_obj_end(w);
	if ((rc = emit(w, err)))
		goto out;
	mdf(md, "### M3: the switch map (computed)\n\n%d confirmation (task, arch, tier) groups; the M1 predictors "
	        "fitted on all %d discovery groups (%d tasks) of the trajectory grid, no leave-one-out; "
	        "mechanistic_switch and %s (M2's strongest simple schedule, predictor %s). Switch map SHA-256 "
	        "`%s`.\n\n",
	    n, t.n, ntask, simple, spred, hex);
	mdf(md, "| task | arch | tier | seeds | mechanistic_switch | %s | observed target (this grid) |\n| --- | --- | --- "
	        "| --- | --- | --- | --- |\n",
	    simple);
	for (int i = 0; i < n; i++)
		mdf(md, "| %s | %s | %s | %d | %d | %d | %d |\n", g[gi[i]].task, g[gi[i]].arch, g[gi[i]].tier, gf[i].ns,
		    pm[i], ps[i], target[i]);
	mdf(md, "\n**M3 switch map: %s**\n\n", verdict);
	left_md(md);
out:
	free(inc.buf);
	free(gi);
	free(pm);
	free(ps);
	free(target);
	free(gf);
	free(X);
	free(xs);
	free(t.x);
	free(t.xe);
	free(t.xh);
	free(t.y);
	free(t.task);
	return rc;
}

static int m3(struct sb_jw *w, struct md *md, uint64_t seed, int resamples, struct sb_err *err)
{
	const char *simple = NULL;
	for (int i = 0; i < nruns; i++)
		if (simple_predictor(runs[i].method)) {
			if (!simple)
				simple = runs[i].method;
			else if (strcmp(simple, runs[i].method))
				return SB_ERR(err, SB_EDATA,
				              "runs of two simple schedules (%s, %s): the confirmation grid runs one, M2's "
				              "strongest",
				              simple, runs[i].method);
		}
	if (!simple)
		return SB_ERR(err, SB_EDATA, "no runs of a simple schedule (median_switch, early_accuracy_switch or "
		                             "entropy_switch)");
	int cap = nruns + 1, n = 0, unpaired = 0, no_test = 0, rc = 0;
	double *td = calloc((size_t)cap, sizeof *td), *tm = calloc((size_t)cap, sizeof *tm),
	       *ts = calloc((size_t)cap, sizeof *ts), *fd = calloc((size_t)cap, sizeof *fd),
	       *fm = calloc((size_t)cap, sizeof *fm);
	int *arch = calloc((size_t)cap, sizeof *arch), *tier = calloc((size_t)cap, sizeof *tier);
	if (!td || !tm || !ts || !fd || !fm || !arch || !tier) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto out;
	}
	for (int i = 0; i < nruns; i++) {
		struct run *mr = &runs[i];
		if (strcmp(mr->method, "mechanistic_switch") || run_epochs(mr) < 1)
			continue;
		struct run *d = find(mr->task, mr->arch, mr->tier, "softmax", mr->seed, 0);
		struct run *s = find(mr->task, mr->arch, mr->tier, simple, mr->seed, 0);
		if (!d || !s || run_epochs(d) < 1 || run_epochs(s) < 1) {
			unpaired++;
			continue;
		}
		if (!mr->have_test || !d->have_test) {
			no_test++;
			continue;
		}
		int K = run_epochs(d);
		if (run_epochs(mr) < K)
			K = run_epochs(mr);
		if (run_epochs(s) < K)
			K = run_epochs(s);
		double dense_final = d->acc[K - 1];
		td[n] = sb_a8_time_to_target(d->acc, K, dense_final);
		tm[n] = sb_a8_time_to_target(mr->acc, K, dense_final);
		ts[n] = sb_a8_time_to_target(s->acc, K, dense_final);
		fd[n] = d->test_acc;
		fm[n] = mr->test_acc;
		arch[n] = !strcmp(mr->arch, "local_hybrid");
		tier[n] = tier_index(mr->tier);
		n++;
	}
	if (unpaired || no_test)
		sb_cli_warn("%d mechanistic_switch runs without a softmax / %s run of the same seed, %d without the test "
		            "accuracy of both: left out",
		            unpaired, simple, no_test);
	if (n < 1) {
		rc = SB_ERR(err, SB_EDATA, "M3 needs mechanistic_switch runs paired by seed with softmax and %s runs, "
		                           "with their test accuracies (test.cell records of sb-test; found none)",
		            simple);
		goto out;
	}
	struct sb_a8_m2_verdict v;
	if ((rc = sb_a8_m2_verdict(n, 1, td, tm, ts, fd, fm, arch, tier, seed, resamples, &v, err)))
		goto out;
	/* mean test accuracy per method, overall and per (arch, tier) */
	const char *methods[4] = {"softmax", "topk_softmax_025", "mechanistic_switch", simple};
	static const char *archs[2] = {"plain", "local_hybrid"}, *tiers[3] = {"compact", "deep", "wide"};
	double sum[4][7] = {{0}};
	int cnt[4][7] = {{0}};
	for (int i = 0; i < nruns; i++) {
		if (!runs[i].have_test)
			continue;
		for (int q = 0; q < 4; q++)
			if (!strcmp(runs[i].method, methods[q])) {
				int c = 1 + (strcmp(runs[i].arch, "local_hybrid") == 0) * 3 + tier_index(runs[i].tier);
				sum[q][0] += runs[i].test_acc;
				cnt[q][0]++;
				sum[q][c] += runs[i].test_acc;
				cnt[q][c]++;
			}
	}
	for (int q = 0; q < 4; q++)
		for (int c = 0; c < 7; c++) {
			if (!cnt[q][c])
				continue;
			sb_jw_record(w, "a8.m3.test", 1);
			sb_jw_kstr(w, "method", methods[q]);
			sb_jw_kstr(w, "arch", c ? archs[(c - 1) / 3] : "all");
			sb_jw_kstr(w, "tier", c ? tiers[(c - 1) % 3] : "all");
			sb_jw_kint(w, "runs", cnt[q][c]);
			sb_jw_kf64(w, "mean_test_accuracy", sum[q][c] / cnt[q][c]);
			sb_jw_obj_end(w);
			if ((rc = emit(w, err)))
				goto out;
		}
	char verdict[440];
	verdict_str(verdict, sizeof verdict, "CONFIRMED", "NOT_CONFIRMED:",
	            (struct clause[]){{v.clause_median, "median-reduction"},
	                              {v.clause_bounds, "bootstrap-lower-bounds"},
	                              {v.clause_final, "final-test-accuracy"},
	                              {v.clause_benefit, "benefit-archs-tiers"}},
	            4);
	sb_jw_record(w, "a8.verdict", 1);
	sb_jw_kstr(w, "analysis", "m3");
	sb_jw_kstr(w, "verdict", verdict);
	sb_jw_kint(w, "units", n);
	sb_jw_kint(w, "units_unpaired", unpaired);
	sb_jw_kint(w, "units_without_test", no_test);
	sb_jw_kstr(w, "simple_schedule", simple);
	sb_jw_kf64(w, "median_reduction", v.median_reduction);
	sb_jw_kbool(w, "clause_median", v.clause_median);
	sb_jw_kf64(w, "reduction_vs_dense_ci_lo", v.lo_vs_dense);
	sb_jw_kf64(w, "reduction_vs_dense_ci_hi", v.hi_vs_dense);
	sb_jw_kf64(w, "reduction_vs_simple_ci_lo", v.lo_vs_simple);
	sb_jw_kf64(w, "reduction_vs_simple_ci_hi", v.hi_vs_simple);
	sb_jw_kbool(w, "clause_bounds", v.clause_bounds);
	sb_jw_kf64(w, "final_test_accuracy_diff", v.final_diff);
	sb_jw_kf64(w, "final_test_accuracy_ci_lo", v.final_lo);
	sb_jw_kf64(w, "final_test_accuracy_ci_hi", v.final_hi);
	sb_jw_kbool(w, "clause_final", v.clause_final);
	m2_tail(w, &v, seed, resamples);
	sb_jw_kstr(w, "verdict_rule", "ours: PROTOCOL A8 gives no M3 verdict rule; the M2 criteria on the confirmation "
	                              "grid, the final-accuracy clause on test accuracy");
	left_fields(w);
	sb_jw_obj_end(w);
	if ((rc = emit(w, err)))
		goto out;
	mdf(md, "### M3: the confirmation (computed)\n\n%d units (task x arch x tier x seed): mechanistic_switch against "
	        "softmax and %s (the simple schedule of the switch map); time to target on validation accuracy, the "
	        "final-accuracy clause on the test read (mechanistic - softmax test accuracy, paired by seed).%s\n\n",
	    n, simple, unpaired || no_test ? " Some runs were left out (see the a8.verdict record)." : "");
	mdf(md, "| criterion (M2's, on the confirmation grid) | computed | |\n| --- | --- | --- |\n");
	mdf(md, "| median time-to-target reduction vs dense >= 10%% | %.1f%% | %s |\n", 100 * v.median_reduction,
	    yes(v.clause_median));
	mdf(md, "| bootstrap lower bounds (seed %llu) > 0 vs dense and vs %s | [%.3f, %.3f]; [%.3f, %.3f] epochs | %s |\n",
	    (unsigned long long)seed, simple, v.lo_vs_dense, v.hi_vs_dense, v.lo_vs_simple, v.hi_vs_simple,
	    yes(v.clause_bounds));
	mdf(md, "| final TEST accuracy CI lower bound > -0.005 | %.4f [%.4f, %.4f] | %s |\n", v.final_diff, v.final_lo,
	    v.final_hi, yes(v.clause_final));
	mdf(md, "| benefit > 0 in both architectures and >= 2 tiers | plain %.3f, local_hybrid %.3f; compact %.3f, deep "
	        "%.3f, wide %.3f | %s |\n",
	    v.benefit_arch[0], v.benefit_arch[1], v.benefit_tier[0], v.benefit_tier[1], v.benefit_tier[2],
	    yes(v.clause_benefit));
	mdf(md, "\nMean test accuracy (runs):\n\n| method | all |");
	for (int c = 1; c < 7; c++)
		if (cnt[0][c] || cnt[2][c])
			mdf(md, " %s %s |", archs[(c - 1) / 3], tiers[(c - 1) % 3]);
	mdf(md, "\n| --- | --- |");
	for (int c = 1; c < 7; c++)
		if (cnt[0][c] || cnt[2][c])
			mdf(md, " --- |");
	mdf(md, "\n");
	for (int q = 0; q < 4; q++) {
		mdf(md, "| %s |", methods[q]);
		for (int c = 0; c < 7; c++) {
			if (c && !cnt[0][c] && !cnt[2][c])
				continue;
			if (cnt[q][c])
				mdf(md, " %.4f (%d) |", sum[q][c] / cnt[q][c], cnt[q][c]);
			else
				mdf(md, " - |");
		}
		mdf(md, "\n");
	}
	mdf(md, "\n**M3 verdict: %s** (the verdict rule is ours: PROTOCOL A8 gives none)\n\n", verdict);
	left_md(md);
out:
	free(td);
	free(tm);
	free(ts);
	free(fd);
	free(fm);
	free(arch);
	free(tier);
	return rc;
}

/* ---------------------------------------------------------------- controls */

/* best validation accuracy within the first K epochs with patience (0 = never stop):
 * the first epoch of maximal accuracy among those before the stop */
static double best_acc(const struct run *r, int K, int patience)
{
	double best = -1;
	int since = 0;
	for (int e = 0; e < K; e++) {
		if (r->acc[e] > best) {
			best = r->acc[e];
			since = 0;
		} else if (patience > 0 && ++since >= patience)
			break;
	}
	return best;
}

static int bottomk(struct sb_jw *w, struct md *md, struct sb_err *err)
{
	static const char *methods[] = {"softmax", "topk_softmax_0125", "topk_softmax_025", "bottomk_softmax_0125",
	                                "bottomk_softmax_025"};
	static const double published[] = {0.67093, -0.03227, -0.01783, -0.3726, -0.34618};
	double mean0[5] = {0}, mean5[5] = {0};
	int cnt[5] = {0};
	for (int i = 0; i < nruns; i++)
		for (int q = 0; q < 5; q++)
			if (!strcmp(runs[i].method, methods[q])) {
				int K = run_epochs(&runs[i]);
				mean0[q] += best_acc(&runs[i], K, 0);
				mean5[q] += best_acc(&runs[i], K, 5);
				cnt[q]++;
			}
	if (!cnt[0])
		return SB_ERR(err, SB_EDATA, "bottom-k control: no softmax runs");
	for (int q = 0; q < 5; q++)
		if (cnt[q]) {
			mean0[q] /= cnt[q];
			mean5[q] /= cnt[q];
		}
	int guard = mean0[0] >= 0.60;
	mdf(md, "### Bottom-k control (computed)\n\n| method | runs | endpoint best val acc (patience 0) | delta | "
	        "patience-5 readout | delta | published patience-5 |\n| --- | --- | --- | --- | --- | --- | --- |\n");
	for (int q = 0; q < 5; q++) {
		sb_jw_record(w, "a8.bottomk", 1);
		sb_jw_kstr(w, "method", methods[q]);
		sb_jw_kint(w, "runs", cnt[q]);
		if (cnt[q]) {
			sb_jw_kf64(w, "mean_best_val_accuracy", mean0[q]);
			sb_jw_kf64(w, "mean_best_val_accuracy_patience5", mean5[q]);
			sb_jw_kf64(w, "delta", q ? mean0[q] - mean0[0] : 0.0);
			sb_jw_kf64(w, "delta_patience5", q ? mean5[q] - mean5[0] : 0.0);
			mdf(md, "| %s | %d | %.5f | %s%+.5f | %.5f | %s%+.5f | %s%.5f |\n", methods[q], cnt[q], mean0[q],
			    "", q ? mean0[q] - mean0[0] : 0.0, mean5[q], "", q ? mean5[q] - mean5[0] : 0.0,
			    q ? "delta " : "", published[q]);
		} else {
			mdf(md, "| %s | 0 | - | - | - | - | %s%.5f |\n", methods[q], q ? "delta " : "", published[q]);
		}
		sb_jw_kf64(w, q ? "published_delta_patience5" : "published_patience5", published[q]);
		sb_jw_obj_end(w);
		SB_TRY(emit(w, err));
	}
	const char *verdict = guard ? "GUARD_MET" : "GUARD_FAILED";
	sb_jw_record(w, "a8.verdict", 1);
	sb_jw_kstr(w, "analysis", "bottomk");
	sb_jw_kstr(w, "verdict", verdict);
	sb_jw_kf64(w, "dense_mean", mean0[0]);
	sb_jw_kbool(w, "guard", guard);
	left_fields(w);
	sb_jw_obj_end(w);
	SB_TRY(emit(w, err));
	mdf(md, "\nGuard (dense mean best validation accuracy >= 0.60): %.5f, %s. **Bottom-k verdict: %s**\n\n",
	    mean0[0], yes(guard), verdict);
	left_md(md);
	return 0;
}

/* PROTOCOL A8's registered linear-decay budgets: the verdict compares exactly these two */
#define LD_FIRST 3
#define LD_LAST 30

static int lineardecay(struct sb_jw *w, struct md *md, struct sb_err *err)
{
	static const char *ratios[] = {"topk_softmax_0125", "topk_softmax_025"};
	/* the registered budgets of the runs that count, and the two the verdict needs */
	int budgets[MAXE + 2] = {LD_FIRST, LD_LAST}, nb = 2;
	for (int i = 0; i < nruns; i++) {
		int K = run_epochs(&runs[i]), j;
		for (j = 0; j < nb; j++)
			if (budgets[j] == K)
				break;
		if (j == nb && nb < MAXE + 2)
			budgets[nb++] = K;
	}
	for (int a = 0; a < nb; a++) /* ascending */
		for (int b = a + 1; b < nb; b++)
			if (budgets[b] < budgets[a]) {
				int t = budgets[a];
				budgets[a] = budgets[b];
				budgets[b] = t;
			}
	long long diff[2][MAXE + 2] = {{0}};
	int pairs[2][MAXE + 2] = {{0}}, first = 0, last = 0;
	for (int b = 0; b < nb; b++) {
		if (budgets[b] == LD_FIRST)
			first = b;
		if (budgets[b] == LD_LAST)
			last = b;
	}
	for (int i = 0; i < nruns; i++) {
		struct run *r = &runs[i];
		for (int q = 0; q < 2; q++) {
			if (strcmp(r->method, ratios[q]))
				continue;
			int K = run_epochs(r);
			struct run *d = find(r->task, r->arch, r->tier, "softmax", r->seed, K);
			if (!d)
				continue;
			int b;
			for (b = 0; b < nb && budgets[b] != K; b++)
				;
			long long cs = llround(best_acc(r, K, 0) * r->n_val), cd = llround(best_acc(d, K, 0) * d->n_val);
			diff[q][b] += cs - cd;
			pairs[q][b]++;
		}
	}
	mdf(md, "### Linear-decay LR control (computed)\n\nSummed correct-count difference (top-k - softmax, best "
	        "validation epoch of each run) per budget:\n\n| budget E |");
	for (int q = 0; q < 2; q++)
		mdf(md, " %s |", ratios[q]);
	mdf(md, "\n| --- | --- | --- |\n");
	for (int b = 0; b < nb; b++) {
		mdf(md, "| %d |", budgets[b]);
		for (int q = 0; q < 2; q++) {
			sb_jw_record(w, "a8.lineardecay", 1);
			sb_jw_kstr(w, "method", ratios[q]);
			sb_jw_kint(w, "budget_epochs", budgets[b]);
			sb_jw_kint(w, "pairs", pairs[q][b]);
			sb_jw_kint(w, "correct_diff", diff[q][b]);
			sb_jw_obj_end(w);
			SB_TRY(emit(w, err));
			mdf(md, " %+lld (%d seeds) |", diff[q][b], pairs[q][b]);
		}
		mdf(md, "\n");
	}
	/* a ratio without complete paired runs at E = 3 or E = 30 has no verdict: INCOMPLETE,
	 * naming what is missing (never another budget in their place) */
	int per[2], known[2];
	char missing[400] = "";
	size_t k = 0;
	for (int q = 0; q < 2; q++) {
		known[q] = pairs[q][first] > 0 && pairs[q][last] > 0;
		per[q] = known[q] && diff[q][first] > 0 && diff[q][last] < 0;
		for (int e = 0; e < 2; e++)
			if (pairs[q][e ? last : first] == 0 && k < sizeof missing)
				k += (size_t)snprintf(missing + k, sizeof missing - k, "%s%s at E = %d", k ? "; " : "", ratios[q],
				                      e ? LD_LAST : LD_FIRST);
	}
	char verdict[440];
	if (missing[0])
		snprintf(verdict, sizeof verdict, "INCOMPLETE: no complete paired runs of %s", missing);
	else
		snprintf(verdict, sizeof verdict, "%s",
		         per[0] && per[1] ? "PERSISTS_BOTH"
		         : per[0]         ? "PERSISTS_0125"
		         : per[1]         ? "PERSISTS_025"
		                          : "PERSISTS_NEITHER");
	if (missing[0])
		sb_cli_warn("linear-decay control: %s (the verdict compares E = %d and E = %d only)", verdict, LD_FIRST,
		            LD_LAST);
	sb_jw_record(w, "a8.verdict", 1);
	sb_jw_kstr(w, "analysis", "lineardecay");
	sb_jw_kstr(w, "verdict", verdict);
	sb_jw_kint(w, "first_budget", LD_FIRST);
	sb_jw_kint(w, "last_budget", LD_LAST);
	for (int q = 0; q < 2; q++) {
		const char *key = q ? "persists_025" : "persists_0125";
		if (known[q])
			sb_jw_kbool(w, key, per[q]);
		else
			sb_jw_knull(w, key);
	}
	if (missing[0])
		sb_jw_kstr(w, "missing", missing);
	else
		sb_jw_knull(w, "missing");
	sb_jw_kstr(w, "published_outcome", "PERSISTS_BOTH");
	left_fields(w);
	sb_jw_obj_end(w);
	SB_TRY(emit(w, err));
	mdf(md, "\npersists = difference > 0 at E = %d and < 0 at E = %d: 0.125 %s, 0.25 %s. **Linear-decay verdict: "
	        "%s** (published: PERSISTS_BOTH)\n\n",
	    LD_FIRST, LD_LAST, known[0] ? per[0] ? "yes" : "no" : "unknown", known[1] ? per[1] ? "yes" : "no" : "unknown",
	    verdict);
	left_md(md);
	return 0;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
	sb_cli_init("sb-a8", argc, argv);
	struct sb_err err = {0};
	const char *md_path = NULL, *switch_path = NULL, *traj_path = NULL, *m2_path = NULL;
	long long seed = -1, resamples = 20000;
	enum { O_MD = 256, O_SWITCH, O_SEED, O_RES, O_TRAJ, O_M2, O_HELP, O_VERSION };
	static const struct option lo[] = {{"md", 1, 0, O_MD},          {"switch-epochs", 1, 0, O_SWITCH},
	                                   {"seed", 1, 0, O_SEED},      {"resamples", 1, 0, O_RES},
	                                   {"trajectory", 1, 0, O_TRAJ}, {"m2", 1, 0, O_M2},
	                                   {"help", 0, 0, O_HELP},      {"version", 0, 0, O_VERSION},
	                                   {0, 0, 0, 0}};
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":q", lo, NULL)) != -1) {
		switch (ch) {
		case 'q':
			sb_quiet = 1;
			break;
		case O_MD:
			md_path = optarg;
			break;
		case O_SWITCH:
			switch_path = optarg;
			break;
		case O_TRAJ:
			traj_path = optarg;
			break;
		case O_M2:
			m2_path = optarg;
			break;
		case O_SEED:
			if (sb_parse_int("--seed", optarg, 0, (long long)1 << 53, &seed, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case O_RES:
			if (sb_parse_int("--resamples", optarg, 1, 10000000, &resamples, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case O_HELP:
			usage();
		case O_VERSION:
			sb_cli_version();
		case ':':
			sb_cli_bad_option(argv, 1);
		default:
			sb_cli_bad_option(argv, 0);
		}
	}
	if (optind >= argc)
		sb_cli_usage_error("no analysis given (m1, m2, bottomk, lineardecay, m3map or m3)");
	const char *mode = argv[optind++];
	static const char *modes[] = {"m1", "m2", "bottomk", "lineardecay", "m3map", "m3"};
	int which = 0;
	for (int i = 0; i < 6; i++)
		if (!strcmp(mode, modes[i]))
			which = i + 1;
	if (!which)
		sb_cli_usage_error("unknown analysis '%s' (m1, m2, bottomk, lineardecay, m3map or m3)", mode);
	if (switch_path && which != 1 && which != 5)
		sb_cli_usage_error("--switch-epochs is an output of m1 and m3map only");
	if ((traj_path || m2_path) && which != 5)
		sb_cli_usage_error("--trajectory and --m2 are inputs of m3map only");
	if (which == 5 && (!traj_path || !m2_path))
		sb_cli_usage_error("m3map needs --trajectory (sb-a8 m1's records of the trajectory grid) and --m2 (sb-a8 "
		                   "m2's records of the switching grid)");
	if (optind >= argc)
		sb_cli_usage_error("no record files given");
	if (seed < 0)
		seed = which == 2 || which == 6 ? 260827 : 260826;
	int nin = argc - optind, next = which == 5 ? 2 : 0;
	struct sb_input *in = calloc((size_t)(nin + next), sizeof *in);
	if (!in)
		sb_cli_die(&(struct sb_err){SB_EINTERNAL, "out of memory", "", 0});
	for (int i = 0; i < nin; i++) {
		int rc = load(argv[optind + i], &in[i], which == 6, &err);
		if (rc)
			sb_cli_die(&err);
	}
	if (next && (sb_input_hash(&in[nin], traj_path, &err) || sb_input_hash(&in[nin + 1], m2_path, &err)))
		sb_cli_die(&err);
	int nread = nruns;
	if (select_runs(&err))
		sb_cli_die(&err);
	sb_progress(1, "%d files, %d runs, %d counted", nin, nread, nruns);
	struct sb_jw w;
	sb_jw_init(&w, stdout);
	struct sb_run_meta meta = {.device = "cpu", .threads = 1, .inputs = in, .n_inputs = nin + next};
	if (sb_record_run_meta(&w, &meta, &err))
		sb_cli_die(&err);
	struct md md = {0};
	int rc = which == 1   ? m1(&w, &md, switch_path, (uint64_t)seed, (int)resamples, &err)
	         : which == 2 ? m2(&w, &md, (uint64_t)seed, (int)resamples, &err)
	         : which == 3 ? bottomk(&w, &md, &err)
	         : which == 4 ? lineardecay(&w, &md, &err)
	         : which == 5 ? m3map(&w, &md, switch_path, traj_path, m2_path, &err)
	                      : m3(&w, &md, (uint64_t)seed, (int)resamples, &err);
	if (!rc && md_path)
		rc = sb_write_file_atomic(md_path, md.buf ? md.buf : "", md.len, &err);
	sb_jw_free(&w);
	free(md.buf);
	free(in);
	free(runs);
	if (rc)
		sb_cli_die(&err);
	return sb_cli_finish(0);
}
