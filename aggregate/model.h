/* model.h — sb-stats' data model, analyses and outputs (aggregate/ only).
 *
 *   load.c      records -> struct data (eval.epoch, test.cell, probe.result, published.value)
 *   analysis.c  paired comparisons, budgets, curves, the rule, probe statistics
 *   report.c    tables (Table 2, details, budgets, test, probes) and stats.* records
 *   table.c     a small table type rendered as Markdown, CSV or LaTeX
 *   svg.c       a small SVG writer and the two figures
 */
#ifndef SB_AGG_MODEL_H
#define SB_AGG_MODEL_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "json.h"
#include "stats.h"

/* ---- interned strings ---- */
struct strtab {
	char **s;
	int n, cap;
	int *slot; /* hash index of s: positions, -1 free; slot_cap a power of two >= 2 n */
	size_t slot_cap;
};
int strtab_find(const struct strtab *t, const char *s); /* -1 when absent */
int strtab_id(struct strtab *t, const char *s);         /* insert when absent; -1 on OOM */
void strtab_free(struct strtab *t);

/* ---- loaded data ---- */

/* A comparison group: cells of one task, architecture and tier. */
struct group {
	int task, arch, tier; /* indices into data.tasks / archs / tiers */
};

/* One training run read from its eval.epoch records. */
struct cell {
	int group, method;
	int64_t seed;
	char *cell_id; /* NULL when the records carry none */
	int n_epochs;  /* 1 + the largest epoch seen */
	int cap;
	double *acc; /* val_accuracy by 0-based epoch, NAN = missing */
	double *ent; /* attention_entropy, NAN = missing or null */
	char *src;   /* file:line of the first record, for messages */
	char *gap_src; /* file:line of the first record that left an epoch out before it, or NULL */
	/* while loading, every run (cell_id) is a cell of its own; data_check keeps one per
	 * (group, method, seed) */
	int prev;      /* the previous run of the same (group, method, seed), or -1 */
	int file;      /* the input (data_load call) its records came from, from 0 */
	int has_done;  /* an eval.done record was read */
	int excluded;  /* eval.done: training not completed (supersedes nothing) */
	int partial;   /* eval.done: not every epoch evaluated (unusable when it wins) */
	char why[160]; /* why excluded */
};

struct testcell {
	int group, method;
	int64_t seed;
	double acc;
	char *src;
};

struct probe {
	int model, task, method; /* model -> data.models, task -> data.tasks */
	int probe;               /* -> data.probe_ids */
	int correct;
	char *src;
};

/* A published value to measure against (published.value records: docs/sb-stats.md). Its
 * strings are its own: a published task absent from the records creates no group. */
enum pub_quantity { PUB_MEAN, PUB_DELTA, PUB_BEST_DELTA, PUB_BUDGET_DELTA, PUB_TEST_MEAN };
/* a mean accuracy (validation or test), not a difference between methods */
static inline int pub_is_mean(enum pub_quantity q)
{
	return q == PUB_MEAN || q == PUB_TEST_MEAN;
}
/* read at an early-stopping patience (budgets and test reads have none) */
static inline int pub_has_patience(enum pub_quantity q)
{
	return q != PUB_BUDGET_DELTA && q != PUB_TEST_MEAN;
}
struct published {
	char *task, *arch, *tier;
	char *method; /* NULL: a best_delta whose method the source does not name */
	char *baseline; /* the differences' baseline (default softmax) */
	enum pub_quantity quantity;
	double value;
	int budget;    /* budget_delta: the epoch budget E (>= 1); 0 otherwise */
	int patience;  /* the early-stopping patience the value was read at; -1 when not given */
	int supported; /* the published Holm mark: 1, 0, or -1 when the source gives none */
	char *source;  /* where the value is published */
	char *src;     /* file:line of the record */
};

/* An index from a key of four integers to an item (a position in an array): open
 * addressing, at most half full. */
struct keyslot {
	int64_t k[4];
	int item; /* -1: free */
};
struct keyidx {
	struct keyslot *slot;
	size_t cap, n;
};

struct data {
	struct strtab tasks, archs, tiers, methods, models, probe_ids;
	struct group *groups;
	int n_groups, cap_groups;
	struct cell *cells;
	int n_cells, cap_cells;
	struct testcell *tests;
	int n_tests, cap_tests;
	struct probe *probes;
	int n_probes, cap_probes;
	struct published *pubs;
	int n_pubs, cap_pubs;
	int superseded_cells; /* cells replaced by a later usable cell_id of the same key */
	int excluded_cells;   /* runs whose eval.done says training did not complete (PROTOCOL A7) */
	int no_done_cells;    /* used cells without an eval.done record (status unknown) */
	char excluded_example[400];
	int superseded_tests, superseded_probes;
	long records, ignored;
	int n_files; /* data_load calls so far: the current input is n_files - 1 */
	/* the latest cell of (group, method, seed); the test of (group, method, seed); the
	 * probe of (model, task, method, probe) */
	struct keyidx cell_index, test_index, probe_index;
};

/* One name per method: the study's "topk_softmax" is topk_softmax_025; any other name as it is. */
const char *canonical_method(const char *m);
void data_init(struct data *d);
void data_free(struct data *d);
/* Read every record of one reader into d. Unknown kinds are counted and ignored. A run is
 * the records of one cell_id (or of none) in one input, up to its eval.done: the same cell in
 * a later input, or after its eval.done, is a rerun (cell_ids are hashes of the cell's
 * settings, so a rerun carries its original's), and data_check keeps the later one, as
 * sb-freeze does with the later log. */
int data_load(struct data *d, void *reader /* struct sb_ndjson_reader * */, struct sb_err *err);
/* After loading: keep one run per (group, method, seed): runs whose eval.done says the
 * training did not complete (or not every epoch was evaluated) are excluded first, then the
 * latest remaining run wins (PROTOCOL A6/A7: filter, then the later file wins); check every
 * kept cell's epochs are 0..n-1 without gaps. */
int data_check(struct data *d, struct sb_err *err);
int data_group_find(const struct data *d, int task, int arch, int tier);
const char *group_label(const struct data *d, int g, char *buf, size_t n); /* "task" or "task (arch/tier)" */

/* ---- options ---- */
struct opts {
	const char *baseline;
	const char *format; /* md | csv | tex | ndjson */
	const char *out_dir;
	const char *plot_dir;
	int patience;
	uint64_t seed;
	int resamples;
	double alpha;
	int min_seeds;
	enum sb_wilcoxon_method wilcoxon;
	int rule;
	int all_pairs;
	double level; /* CI level, 0.95 */
};

/* ---- analysis results ---- */

/* One method against the baseline in one group, on one metric. */
struct comparison {
	int group, method;
	int n;
	int64_t *seeds;
	double *d; /* paired differences (method - baseline), seed order */
	double mean_base, mean_method;
	struct sb_ttest t;
	struct sb_wilcoxon w;
	double ci_lo, ci_hi, dz;
	double p_holm;
	int holm_m;
	int supported;
	/* validation only: best epochs and budgets */
	int *best_epoch_base, *best_epoch_method; /* per paired seed, 0-based */
	int K;                                    /* budgets 1..K (the fewest epochs among the paired cells) */
	double *b_mean, *b_lo, *b_hi, *b_p;       /* per budget */
	struct sb_sign_change sc;
};

struct group_summary {
	int group;
	int has_baseline;
	double baseline_mean; /* mean baseline metric over its seeds */
	int n_baseline;
	int n_cmp;
	int first_cmp;    /* index into the comparison array */
	int sparse_helps; /* some method of the Holm family with mean > 0 and supported */
	int n_family;        /* comparisons of the protocol's six sparse methods (one Holm family) */
	int family_complete; /* all six compared (PROTOCOL A7: required by the rule) */
	int out_of_rule;     /* --rule: left out for that reason (not counted by the power floor) */
	int best_method;  /* -1 when no comparison */
	double best_delta;
	/* predictors of the A7 rule from the baseline runs at 0-based epoch 3 */
	double acc_k, d_acc, entropy_k;
	int have_predictors;
	char missing_predictor[96];
};

/* Mean validation accuracy by epoch of one method in one group (all its seeds). */
struct curve {
	int group, method;
	int K;
	double *mean;
	int *n;
};

struct analysis {
	struct comparison *val;
	int n_val;
	struct group_summary *vgroups;
	int n_vgroups;
	struct comparison *test;
	int n_test;
	struct group_summary *tgroups;
	int n_tgroups;
	struct curve *curves;
	int n_curves;
	int n_labelled; /* groups with the sparse-helps label */
	/* rule */
	int rule_ran;
	struct sb_rule_fold *folds;
	struct sb_rule_result rule;
	int *rule_groups; /* group index of each rule task */
	int rule_incomplete; /* tasks left out of the rule: not all six sparse methods compared */
	char rule_incomplete_example[300];
	int n_rule;
	/* probes */
	struct probe_rate {
		int model, task, method; /* task -1 = all tasks */
		int64_t k, n;
		double lo, hi;
	} * rates;
	int n_rates;
	struct probe_pair {
		int model, a, b; /* methods: a compared with b (a - b) */
		struct sb_paired_binary pb;
		double p_holm;
		int holm_m;
	} * pairs;
	int n_pairs;
	int skipped; /* comparisons skipped for too few paired seeds */
	/* published values whose task, arch and tier have records to measure them on (validation;
	 * test reads for a test mean) */
	struct pub_result {
		int pub;    /* index into data.pubs */
		int group;  /* the comparison group */
		int method; /* ours: the method measured (best_delta: our best of the six); -1 none */
		int n;      /* seeds (mean) or paired seeds (delta) behind ours */
		double ours, lo, hi; /* NAN when not measured (why says so) */
		int ours_supported;  /* delta, best_delta: our Holm mark; -1 for a mean */
		int n_best;          /* best_delta: how many methods ours is the best of */
		const char *why;     /* NULL when measured */
	} * pub;
	int n_pub;
	int pub_unmatched; /* published values of tasks (arch, tier) without such records */
	int pub_other_patience; /* published values read at another patience than --patience */
	int pub_other_baseline; /* published differences from another baseline than --baseline */
};

int analysis_run(const struct data *d, const struct opts *o, struct analysis *a, struct sb_err *err);
/* the published value lies in our interval (bounds included) */
static inline int pub_inside(const struct pub_result *r, const struct published *p)
{
	return r->lo <= p->value && p->value <= r->hi;
}
void analysis_free(struct analysis *a);

/* ---- tables ---- */
enum table_align { ALIGN_LEFT, ALIGN_RIGHT };

struct table {
	const char *name; /* file stem: table2, detail, budget, test, probes, probe_pairs */
	char *title;
	char *note; /* a line under the table (may be NULL) */
	int ncols;
	char **head;
	enum table_align *align;
	char **cells; /* rows x ncols */
	int nrows, caprows;
};

struct table *table_new(const char *name, const char *title, int ncols);
void table_head(struct table *t, int col, const char *text, enum table_align al);
int table_row(struct table *t); /* append an empty row; returns its index */
void table_set(struct table *t, int row, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void table_note(struct table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void table_drop_col(struct table *t, int col);
void table_free(struct table *t);
void table_write_md(const struct table *t, FILE *f);
void table_write_csv(const struct table *t, FILE *f);
void table_write_tex(const struct table *t, FILE *f);

/* ---- reports ---- */
/* Build every table that has data; returns the count in *n. */
struct table **report_tables(const struct data *d, const struct analysis *a, const struct opts *o, int *n);
/* Append every stats.* record to w (after run.meta). */
int report_records(struct sb_jw *w, const struct data *d, const struct analysis *a, const struct opts *o,
                   struct sb_err *err);
/* Display name of a task (PROTOCOL A9 spelling) and its pre-fixed softmax threshold (NAN if none). */
const char *task_display(const char *task);
double task_threshold(const char *task);
int task_order(const char *task); /* PROTOCOL A1 order; large for unknown tasks */
/* Table 2 column order of a method (softmax 0, top-k 0.125 1 ... HAE 6; others 100). */
int method_order(const char *method);
const char *method_display(const char *method);

/* ---- figures ---- */
int plot_budget(const char *path, const struct data *d, const struct analysis *a, const struct opts *o,
                struct sb_err *err);
int plot_curves(const char *path, const struct data *d, const struct analysis *a, const struct opts *o,
                struct sb_err *err);
int plot_published(const char *path, const struct data *d, const struct analysis *a, const struct opts *o,
                   struct sb_err *err);

#endif
