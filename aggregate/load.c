/* load.c — read eval.epoch, test.cell, probe.result and published.value records into struct data. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "model.h"
#include "record.h"
#include "runsel.h"

/* ---- strings ---- */

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static size_t strtab_slot(const struct strtab *t, const char *s)
{
	size_t h = str_hash(s) & (t->slot_cap - 1);
	while (t->slot[h] >= 0 && strcmp(t->s[t->slot[h]], s))
		h = (h + 1) & (t->slot_cap - 1);
	return h;
}

int strtab_find(const struct strtab *t, const char *s)
{
	return t->slot_cap ? t->slot[strtab_slot(t, s)] : -1;
}

int strtab_id(struct strtab *t, const char *s)
{
	int i = strtab_find(t, s);
	if (i >= 0)
		return i;
	if (t->n == t->cap) {
		int cap = t->cap ? 2 * t->cap : 16;
		char **p = realloc(t->s, (size_t)cap * sizeof *p);
		if (!p)
			return -1;
		t->s = p;
		t->cap = cap;
	}
	if ((size_t)(t->n + 1) * 2 > t->slot_cap) { /* rehash into twice the slots */
		size_t cap = t->slot_cap ? 2 * t->slot_cap : 32;
		int *slot = malloc(cap * sizeof *slot);
		if (!slot)
			return -1;
		free(t->slot);
		t->slot = slot;
		t->slot_cap = cap;
		for (size_t h = 0; h < cap; h++)
			slot[h] = -1;
		for (int k = 0; k < t->n; k++)
			slot[strtab_slot(t, t->s[k])] = k;
	}
	if (!(t->s[t->n] = strdup(s)))
		return -1;
	t->slot[strtab_slot(t, s)] = t->n;
	return t->n++;
}

void strtab_free(struct strtab *t)
{
	for (int i = 0; i < t->n; i++)
		free(t->s[i]);
	free(t->s);
	free(t->slot);
	memset(t, 0, sizeof *t);
}

/* ---- data ---- */

void data_init(struct data *d)
{
	memset(d, 0, sizeof *d);
}

void data_free(struct data *d)
{
	strtab_free(&d->tasks);
	strtab_free(&d->archs);
	strtab_free(&d->tiers);
	strtab_free(&d->methods);
	strtab_free(&d->models);
	strtab_free(&d->probe_ids);
	for (int i = 0; i < d->n_cells; i++) {
		free(d->cells[i].cell_id);
		free(d->cells[i].acc);
		free(d->cells[i].ent);
		free(d->cells[i].src);
		free(d->cells[i].gap_src);
	}
	for (int i = 0; i < d->n_tests; i++)
		free(d->tests[i].src);
	for (int i = 0; i < d->n_probes; i++)
		free(d->probes[i].src);
	for (int i = 0; i < d->n_pubs; i++) {
		struct published *p = &d->pubs[i];
		free(p->task);
		free(p->arch);
		free(p->tier);
		free(p->method);
		free(p->baseline);
		free(p->source);
		free(p->src);
	}
	free(d->pubs);
	free(d->cells);
	free(d->tests);
	free(d->probes);
	free(d->groups);
	free(d->cell_index.slot);
	free(d->test_index.slot);
	free(d->probe_index.slot);
	memset(d, 0, sizeof *d);
}

#define GROW(arr, n, cap)                                                                                              \
	do {                                                                                                           \
		if ((n) == (cap)) {                                                                                    \
			int c_ = (cap) ? 2 * (cap) : 64;                                                               \
			void *p_ = realloc((arr), (size_t)c_ * sizeof *(arr));                                         \
			if (!p_)                                                                                       \
				return SB_ERR(err, SB_EINTERNAL, "out of memory");                                     \
			(arr) = p_;                                                                                    \
			(cap) = c_;                                                                                    \
		}                                                                                                      \
	} while (0)

int data_group_find(const struct data *d, int task, int arch, int tier)
{
	for (int g = 0; g < d->n_groups; g++)
		if (d->groups[g].task == task && d->groups[g].arch == arch && d->groups[g].tier == tier)
			return g;
	return -1;
}

/* Index of the group, created when absent; -1 when out of memory. */
static int group_id(struct data *d, int task, int arch, int tier)
{
	int g = data_group_find(d, task, arch, tier);
	if (g >= 0)
		return g;
	if (d->n_groups == d->cap_groups) {
		int cap = d->cap_groups ? 2 * d->cap_groups : 16;
		struct group *p = realloc(d->groups, (size_t)cap * sizeof *p);
		if (!p)
			return -1;
		d->groups = p;
		d->cap_groups = cap;
	}
	d->groups[d->n_groups] = (struct group){task, arch, tier};
	return d->n_groups++;
}

const char *group_label(const struct data *d, int g, char *buf, size_t n)
{
	const struct group *gr = &d->groups[g];
	const char *arch = d->archs.s[gr->arch], *tier = d->tiers.s[gr->tier];
	if (!strcmp(arch, "plain") && !strcmp(tier, "compact"))
		snprintf(buf, n, "%s", d->tasks.s[gr->task]);
	else
		snprintf(buf, n, "%s (%s/%s)", d->tasks.s[gr->task], arch, tier);
	return buf;
}

/* ---- key index (struct keyidx) ---- */

static size_t key_slot(const struct keyidx *x, const int64_t k[4])
{
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < 4; i++) {
		h ^= (uint64_t)k[i] + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
		h *= 1099511628211ull;
	}
	h &= x->cap - 1;
	while (x->slot[h].item >= 0 && memcmp(x->slot[h].k, k, sizeof x->slot[h].k))
		h = (h + 1) & (x->cap - 1);
	return h;
}

/* the item of key (a, b, c, e), or -1 */
static int key_find(const struct keyidx *x, int64_t a, int64_t b, int64_t c, int64_t e)
{
	const int64_t k[4] = {a, b, c, e};
	return x->cap ? x->slot[key_slot(x, k)].item : -1;
}

/* key (a, b, c, e) names ITEM from now on (a new key, or another item for a known one);
 * -1 when out of memory */
static int key_put(struct keyidx *x, int64_t a, int64_t b, int64_t c, int64_t e, int item)
{
	const int64_t k[4] = {a, b, c, e};
	if ((x->n + 1) * 2 > x->cap) { /* rehash into twice the slots */
		struct keyslot *old = x->slot;
		size_t old_cap = x->cap, cap = x->cap ? 2 * x->cap : 1024;
		if (!(x->slot = malloc(cap * sizeof *x->slot))) {
			x->slot = old;
			return -1;
		}
		x->cap = cap;
		for (size_t h = 0; h < cap; h++)
			x->slot[h].item = -1;
		for (size_t h = 0; h < old_cap; h++)
			if (old[h].item >= 0)
				x->slot[key_slot(x, old[h].k)] = old[h];
		free(old);
	}
	struct keyslot *sl = &x->slot[key_slot(x, k)];
	if (sl->item < 0) {
		memcpy(sl->k, k, sizeof sl->k);
		x->n++;
	}
	sl->item = item;
	return 0;
}

/* the cell index again from d->cells, in cell order, so that each key ends on its latest run */
static int cell_index_rebuild(struct data *d)
{
	free(d->cell_index.slot);
	memset(&d->cell_index, 0, sizeof d->cell_index);
	for (int c = 0; c < d->n_cells; c++)
		if (key_put(&d->cell_index, d->cells[c].group, d->cells[c].method, d->cells[c].seed, 0, c))
			return -1;
	return 0;
}

/* the latest run of (g, m, seed), or -1 */
static int cell_find(const struct data *d, int g, int m, int64_t seed)
{
	return key_find(&d->cell_index, g, m, seed, 0);
}

/* The run of (g, m, seed) that records with this cell_id belong to, or -1 for a new run: the
 * open run of that cell_id in the current input (open: no eval.done read yet); without a
 * cell_id, the latest run if it is open and of the current input; a run read without any
 * cell_id so far takes the first cell_id it meets. A run of an earlier input, or a closed one,
 * is never continued: the same cell_id there is a rerun. */
static int run_find(struct data *d, int g, int m, int64_t seed, const char *cell_id, struct sb_err *err, int *rc)
{
	*rc = 0;
	int head = cell_find(d, g, m, seed), file = d->n_files - 1;
	if (head >= 0 && (d->cells[head].file != file || d->cells[head].has_done) && !cell_id)
		return -1;
	if (!cell_id || head < 0)
		return head;
	for (int c = head; c >= 0 && d->cells[c].file == file; c = d->cells[c].prev)
		if (d->cells[c].cell_id && !strcmp(d->cells[c].cell_id, cell_id))
			return d->cells[c].has_done ? -1 : c;
	if (!d->cells[head].cell_id && d->cells[head].file == file && !d->cells[head].has_done) {
		if (!(d->cells[head].cell_id = strdup(cell_id)))
			*rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		return head;
	}
	return -1;
}

static int cell_new(struct data *d, int g, int m, int64_t seed, const char *cell_id, const char *src,
                    struct sb_err *err)
{
	GROW(d->cells, d->n_cells, d->cap_cells);
	struct cell *c = &d->cells[d->n_cells];
	memset(c, 0, sizeof *c);
	c->group = g;
	c->method = m;
	c->seed = seed;
	c->prev = cell_find(d, g, m, seed);
	c->file = d->n_files - 1;
	if (!(c->src = strdup(src)) || (cell_id && !(c->cell_id = strdup(cell_id))))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	d->n_cells++;
	if (key_put(&d->cell_index, g, m, seed, 0, d->n_cells - 1))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	return 0;
}

static int cell_set(struct cell *c, int64_t epoch, double acc, double ent, const char *src, struct sb_err *err)
{
	if (epoch > c->n_epochs && !c->gap_src && !(c->gap_src = strdup(src))) /* an epoch left out before it */
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	if (epoch >= c->cap) {
		int cap = c->cap ? c->cap : 32;
		while (cap <= epoch)
			cap *= 2;
		double *a = realloc(c->acc, (size_t)cap * sizeof *a);
		if (a)
			c->acc = a;
		double *e = realloc(c->ent, (size_t)cap * sizeof *e);
		if (e)
			c->ent = e;
		if (!a || !e)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		for (int i = c->cap; i < cap; i++)
			c->acc[i] = c->ent[i] = NAN;
		c->cap = cap;
	}
	c->acc[epoch] = acc;
	c->ent[epoch] = ent;
	if (epoch + 1 > c->n_epochs)
		c->n_epochs = (int)epoch + 1;
	return 0;
}

/* ---- record parsing ---- */

#define MAX_EPOCH 100000

/* One name per method: "topk_softmax" is the study's name of top-k 0.25, which sb-train
 * writes as topk_softmax_025 (lib/train_cell.c); records of either name are one method (one
 * Holm family member, one Table 2 cell, and a rerun under the other name supersedes). */
const char *canonical_method(const char *m)
{
	return strcmp(m, "topk_softmax") ? m : "topk_softmax_025";
}

/* Common identity fields: task, method, seed, arch, tier. */
static int read_identity(struct data *d, const struct sb_json *rec, int *g, int *m, int64_t *seed, struct sb_err *err)
{
	const char *task, *method, *arch = "plain", *tier = "compact";
	SB_TRY(sb_json_req_str(rec, "task", &task, err));
	SB_TRY(sb_json_req_str(rec, "method", &method, err));
	SB_TRY(sb_json_req_int(rec, "seed", seed, err));
	if (sb_json_get(rec, "arch"))
		SB_TRY(sb_json_req_str(rec, "arch", &arch, err));
	if (sb_json_get(rec, "tier"))
		SB_TRY(sb_json_req_str(rec, "tier", &tier, err));
	if (!*task || !*method)
		return SB_ERR(err, SB_EDATA, "empty task or method name");
	int t = strtab_id(&d->tasks, task), a = strtab_id(&d->archs, arch), ti = strtab_id(&d->tiers, tier);
	*m = strtab_id(&d->methods, canonical_method(method));
	if (t < 0 || a < 0 || ti < 0 || *m < 0)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	*g = group_id(d, t, a, ti);
	return *g < 0 ? SB_ERR(err, SB_EINTERNAL, "out of memory") : 0;
}

static int req_unit(const struct sb_json *rec, const char *key, double *out, struct sb_err *err)
{
	SB_TRY(sb_json_req_num(rec, key, out, err));
	if (!(*out >= 0 && *out <= 1))
		return SB_ERR(err, SB_EDATA, "field '%s' must lie in [0, 1] (got %g)", key, *out);
	return 0;
}

static int load_eval_epoch(struct data *d, const struct sb_json *rec, const char *src, struct sb_err *err)
{
	int g, m;
	int64_t seed, epoch;
	double acc, ent = NAN;
	SB_TRY(read_identity(d, rec, &g, &m, &seed, err));
	SB_TRY(sb_json_req_int(rec, "epoch", &epoch, err));
	if (epoch < 0 || epoch > MAX_EPOCH)
		return SB_ERR(err, SB_EDATA, "field 'epoch' out of range (%lld)", (long long)epoch);
	SB_TRY(req_unit(rec, "val_accuracy", &acc, err));
	const struct sb_json *e = sb_json_get(rec, "attention_entropy");
	if (e && e->type == SB_JSON_NUMBER)
		ent = e->number;
	else if (e && e->type != SB_JSON_NULL)
		return SB_ERR(err, SB_EDATA, "field 'attention_entropy' must be a number or null");
	const char *cell_id = NULL; /* optional; when present, a string */
	if (sb_json_get(rec, "cell_id"))
		SB_TRY(sb_json_req_str(rec, "cell_id", &cell_id, err));
	int rc, c = run_find(d, g, m, seed, cell_id, err, &rc);
	SB_TRY(rc);
	if (c < 0) {
		SB_TRY(cell_new(d, g, m, seed, cell_id, src, err));
		c = d->n_cells - 1;
	}
	return cell_set(&d->cells[c], epoch, acc, ent, src, err);
}

/* eval.done (sb-eval): whether the run may enter the statistics (PROTOCOL A7: status
 * completed), and every epoch of its budget evaluated */
static int load_eval_done(struct data *d, const struct sb_json *rec, const char *src, struct sb_err *err)
{
	int g, m;
	int64_t seed, epochs, evaluated;
	const char *status, *cell_id = NULL;
	SB_TRY(read_identity(d, rec, &g, &m, &seed, err));
	SB_TRY(sb_json_req_int(rec, "epochs", &epochs, err));
	SB_TRY(sb_json_req_int(rec, "epochs_evaluated", &evaluated, err));
	SB_TRY(sb_json_req_str(rec, "train_status", &status, err));
	if (sb_json_get(rec, "cell_id"))
		SB_TRY(sb_json_req_str(rec, "cell_id", &cell_id, err));
	if (epochs < 1 || epochs > MAX_EPOCH || evaluated < 0 || evaluated > epochs)
		return SB_ERR(err, SB_EDATA, "eval.done: epochs %lld / epochs_evaluated %lld out of range",
		              (long long)epochs, (long long)evaluated);
	int rc, c = run_find(d, g, m, seed, cell_id, err, &rc);
	SB_TRY(rc);
	if (c < 0) { /* no epoch evaluated */
		SB_TRY(cell_new(d, g, m, seed, cell_id, src, err));
		c = d->n_cells - 1;
	}
	struct cell *ce = &d->cells[c];
	/* the log's own count must agree with its summary: a disagreement is a damaged or edited
	 * log, which sb-freeze refuses too (lib/vallog.c); it used to be excluded as "3 of 3
	 * epochs evaluated" */
	if (evaluated != ce->n_epochs)
		return SB_ERR(err, SB_EDATA, "eval.done says %lld epochs evaluated, the run's eval.epoch records are %d",
		              (long long)evaluated, ce->n_epochs);
	ce->has_done = 1;
	if (strcmp(status, "completed") != 0) {
		ce->excluded = 1;
		snprintf(ce->why, sizeof ce->why, "training status '%s', not 'completed'", status);
	} else if (evaluated != epochs || ce->n_epochs != epochs) {
		ce->partial = 1;
		snprintf(ce->why, sizeof ce->why, "%d of %lld epochs evaluated", ce->n_epochs, (long long)epochs);
	}
	return 0;
}

static int load_test_cell(struct data *d, const struct sb_json *rec, const char *src, struct sb_err *err)
{
	int g, m;
	int64_t seed;
	double acc;
	SB_TRY(read_identity(d, rec, &g, &m, &seed, err));
	SB_TRY(req_unit(rec, "test_accuracy", &acc, err));
	int i = key_find(&d->test_index, g, m, seed, 0);
	if (i >= 0) {
		struct testcell *t = &d->tests[i];
		d->superseded_tests++;
		t->acc = acc;
		free(t->src);
		return (t->src = strdup(src)) ? 0 : SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	GROW(d->tests, d->n_tests, d->cap_tests);
	struct testcell *t = &d->tests[d->n_tests];
	*t = (struct testcell){g, m, seed, acc, strdup(src)};
	if (!t->src || key_put(&d->test_index, g, m, seed, 0, d->n_tests))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	d->n_tests++;
	return 0;
}

static int load_probe(struct data *d, const struct sb_json *rec, const char *src, struct sb_err *err)
{
	const char *model, *task, *method;
	char idbuf[64];
	const char *pid;
	SB_TRY(sb_json_req_str(rec, "model", &model, err));
	SB_TRY(sb_json_req_str(rec, "task", &task, err));
	SB_TRY(sb_json_req_str(rec, "method", &method, err));
	const struct sb_json *v = sb_json_get(rec, "probe_id");
	if (!v)
		return SB_ERR(err, SB_EDATA, "missing field 'probe_id'");
	if (v->type == SB_JSON_STRING) {
		pid = v->text;
	} else {
		int64_t i;
		if (sb_json_int64(v, &i))
			return SB_ERR(err, SB_EDATA, "field 'probe_id' must be a string or an integer");
		snprintf(idbuf, sizeof idbuf, "%lld", (long long)i);
		pid = idbuf;
	}
	int correct;
	const struct sb_json *c = sb_json_get(rec, "correct");
	int64_t ci;
	if (!c)
		return SB_ERR(err, SB_EDATA, "missing field 'correct'");
	if (c->type == SB_JSON_BOOL)
		correct = c->boolean;
	else if (!sb_json_int64(c, &ci) && (ci == 0 || ci == 1))
		correct = (int)ci;
	else
		return SB_ERR(err, SB_EDATA, "field 'correct' must be true, false, 0 or 1");
	int mo = strtab_id(&d->models, model), t = strtab_id(&d->tasks, task), me = strtab_id(&d->methods, canonical_method(method));
	int p = strtab_id(&d->probe_ids, pid);
	if (mo < 0 || t < 0 || me < 0 || p < 0)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	int i = key_find(&d->probe_index, mo, t, me, p);
	if (i >= 0) {
		d->superseded_probes++;
		d->probes[i].correct = correct;
		return 0;
	}
	GROW(d->probes, d->n_probes, d->cap_probes);
	d->probes[d->n_probes] = (struct probe){mo, t, me, p, correct, strdup(src)};
	if (!d->probes[d->n_probes].src || key_put(&d->probe_index, mo, t, me, p, d->n_probes))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	d->n_probes++;
	return 0;
}

/* published.value: task, quantity (mean | delta | best_delta | budget_delta | test_mean), value, source;
 * method (required but for best_delta); budget (budget_delta only, required there); optional
 * arch, tier, baseline (differences only; softmax), patience, supported (bool). A second
 * record of the same (task, arch, tier, method, baseline, quantity, budget, patience, source)
 * replaces the first, as reruns do. */
static int load_published(struct data *d, const struct sb_json *rec, const char *src, struct sb_err *err)
{
	const char *task, *quantity, *source, *method = NULL, *arch = "plain", *tier = "compact",
	                                       *baseline = "softmax";
	double value;
	int supported = -1;
	SB_TRY(sb_json_req_str(rec, "task", &task, err));
	SB_TRY(sb_json_req_str(rec, "quantity", &quantity, err));
	SB_TRY(sb_json_req_str(rec, "source", &source, err));
	SB_TRY(sb_json_req_num(rec, "value", &value, err));
	enum pub_quantity q;
	if (!strcmp(quantity, "mean"))
		q = PUB_MEAN;
	else if (!strcmp(quantity, "delta"))
		q = PUB_DELTA;
	else if (!strcmp(quantity, "best_delta"))
		q = PUB_BEST_DELTA;
	else if (!strcmp(quantity, "budget_delta"))
		q = PUB_BUDGET_DELTA;
	else if (!strcmp(quantity, "test_mean"))
		q = PUB_TEST_MEAN;
	else
		return SB_ERR(err, SB_EDATA,
		              "field 'quantity' must be mean, delta, best_delta, budget_delta or test_mean (got '%s')",
		              quantity);
	int level = pub_is_mean(q);
	int64_t budget = 0, patience = -1;
	if (q == PUB_BUDGET_DELTA) {
		SB_TRY(sb_json_req_int(rec, "budget", &budget, err));
		if (budget < 1 || budget > MAX_EPOCH + 1)
			return SB_ERR(err, SB_EDATA, "field 'budget' must be an epoch count from 1 (got %lld)",
			              (long long)budget);
	} else if (sb_json_get(rec, "budget")) {
		return SB_ERR(err, SB_EDATA, "field 'budget' belongs to quantity budget_delta only");
	}
	if (sb_json_get(rec, "baseline")) {
		if (level)
			return SB_ERR(err, SB_EDATA, "field 'baseline' belongs to differences, not to quantity %s", quantity);
		SB_TRY(sb_json_req_str(rec, "baseline", &baseline, err));
		if (!*baseline)
			return SB_ERR(err, SB_EDATA, "empty baseline");
		baseline = canonical_method(baseline);
	}
	if (sb_json_get(rec, "patience")) {
		SB_TRY(sb_json_req_int(rec, "patience", &patience, err));
		if (patience < 0 || patience > 1000000)
			return SB_ERR(err, SB_EDATA, "field 'patience' out of range (%lld)", (long long)patience);
	}
	if (q != PUB_BEST_DELTA || sb_json_get(rec, "method")) {
		SB_TRY(sb_json_req_str(rec, "method", &method, err));
		method = canonical_method(method);
	}
	if (sb_json_get(rec, "arch"))
		SB_TRY(sb_json_req_str(rec, "arch", &arch, err));
	if (sb_json_get(rec, "tier"))
		SB_TRY(sb_json_req_str(rec, "tier", &tier, err));
	const struct sb_json *sv = sb_json_get(rec, "supported");
	if (sv) {
		if (sv->type != SB_JSON_BOOL)
			return SB_ERR(err, SB_EDATA, "field 'supported' must be true or false");
		supported = sv->boolean;
	}
	if (!*task || !*source || (method && !*method))
		return SB_ERR(err, SB_EDATA, "empty task, method or source");
	if (level ? !(value >= 0 && value <= 1) : !(value >= -1 && value <= 1))
		return SB_ERR(err, SB_EDATA, "field 'value' must lie in [%s, 1] for quantity %s (got %g)", level ? "0" : "-1",
		              quantity, value);
	struct published *p = NULL;
	for (int i = 0; i < d->n_pubs && !p; i++) {
		struct published *o = &d->pubs[i];
		if (o->quantity == q && o->budget == (int)budget && o->patience == (int)patience &&
		    !strcmp(o->task, task) && !strcmp(o->arch, arch) && !strcmp(o->tier, tier) &&
		    !strcmp(o->baseline, baseline) && !strcmp(o->source, source) &&
		    (o->method && method ? !strcmp(o->method, method) : !o->method && !method))
			p = o;
	}
	if (p) {
		p->value = value;
		p->supported = supported;
		free(p->src);
		return (p->src = strdup(src)) ? 0 : SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	GROW(d->pubs, d->n_pubs, d->cap_pubs);
	p = &d->pubs[d->n_pubs];
	*p = (struct published){.task = strdup(task),
	                        .arch = strdup(arch),
	                        .tier = strdup(tier),
	                        .method = method ? strdup(method) : NULL,
	                        .baseline = strdup(baseline),
	                        .quantity = q,
	                        .value = value,
	                        .budget = (int)budget,
	                        .patience = (int)patience,
	                        .supported = supported,
	                        .source = strdup(source),
	                        .src = strdup(src)};
	d->n_pubs++;
	if (!p->task || !p->arch || !p->tier || (method && !p->method) || !p->baseline || !p->source || !p->src)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	return 0;
}

int data_load(struct data *d, void *reader, struct sb_err *err)
{
	struct sb_ndjson_reader *r = reader;
	d->n_files++;
	for (;;) {
		struct sb_json *rec;
		SB_TRY(sb_ndjson_next(r, &rec, err));
		if (!rec)
			return 0;
		char src[512];
		snprintf(src, sizeof src, "%s:%ld", sb_ndjson_name(r), sb_ndjson_line(r));
		const char *kind;
		int64_t v;
		int rc = sb_record_kind(rec, &kind, &v, err);
		if (!rc) {
			d->records++;
			int known = !strcmp(kind, "eval.epoch") || !strcmp(kind, "eval.done") ||
			            !strcmp(kind, "test.cell") || !strcmp(kind, "probe.result") ||
			            !strcmp(kind, "published.value");
			if (!known) {
				d->ignored++;
			} else if (v != 1) {
				rc =
				    SB_ERR(err, SB_EDATA, "%s record version %lld not supported (this program reads 1)",
				           kind, (long long)v);
			} else if (!strcmp(kind, "eval.epoch")) {
				rc = load_eval_epoch(d, rec, src, err);
			} else if (!strcmp(kind, "eval.done")) {
				rc = load_eval_done(d, rec, src, err);
			} else if (!strcmp(kind, "test.cell")) {
				rc = load_test_cell(d, rec, src, err);
			} else if (!strcmp(kind, "published.value")) {
				rc = load_published(d, rec, src, err);
			} else {
				rc = load_probe(d, rec, src, err);
			}
		}
		sb_json_free(rec);
		if (rc) {
			if (rc == SB_EDATA)
				sb_err_prefix(err, "%s", src);
			return rc;
		}
	}
}

static void cell_free(struct cell *c)
{
	free(c->cell_id);
	free(c->acc);
	free(c->ent);
	free(c->src);
	free(c->gap_src);
}

static void note_excluded(struct data *d, const struct cell *ce)
{
	if (!d->excluded_cells++)
		snprintf(d->excluded_example, sizeof d->excluded_example, "%s: %s/%s seed %lld: %s", ce->src,
		         d->tasks.s[d->groups[ce->group].task], d->methods.s[ce->method], (long long)ce->seed, ce->why);
}

/* One run per (group, method, seed), by the rule sb-freeze applies (lib/runsel.h,
 * docs/sb-freeze.md): runs whose training did not complete are dropped first and supersede
 * nothing; among the others the latest wins; a winner with epochs not evaluated leaves its key
 * without a run (it is the run the protocol counts, and it cannot be read whole). The kept run
 * takes the place of the key's first run (the order the records first named it). */
static int resolve_runs(struct data *d, struct sb_err *err)
{
	int n = d->n_cells, k = 0, n_keys = 0;
	int *keep = malloc((size_t)(n ? n : 1) * sizeof *keep),
	    *key_run = malloc((size_t)(n ? n : 1) * sizeof *key_run);
	char *used = calloc((size_t)(n ? n : 1), 1);
	struct sb_runsel_item *rs = calloc((size_t)(n ? n : 1), sizeof *rs);
	int rc = !keep || !key_run || !used || !rs ? SB_ERR(err, SB_EINTERNAL, "out of memory") : 0;
	for (int c = 0; c < n && !rc; c++) { /* a key per (group, method, seed), by its first run */
		const struct cell *ce = &d->cells[c];
		rs[c].key = ce->prev < 0 ? n_keys++ : rs[ce->prev].key;
		rs[c].completed = !ce->excluded && (ce->n_epochs > 0 || ce->has_done);
		rs[c].whole = !ce->partial;
	}
	if (!rc)
		rc = sb_runsel_resolve(rs, (size_t)n, n_keys, key_run, err);
	for (int c = 0; c < n && !rc; c++) {
		if (d->cells[c].prev >= 0)
			continue; /* not the key's first run */
		int not_whole = -1;
		for (int r = cell_find(d, d->cells[c].group, d->cells[c].method, d->cells[c].seed); r >= 0;
		     r = d->cells[r].prev) { /* the key's runs, latest first */
			if (d->cells[r].excluded)
				note_excluded(d, &d->cells[r]);
			d->superseded_cells += rs[r].disp == SB_RUNSEL_SUPERSEDED;
			if (rs[r].disp == SB_RUNSEL_WINNER_NOT_WHOLE) /* the run that counts cannot be read whole */
				not_whole = r;
		}
		if (not_whole >= 0)
			note_excluded(d, &d->cells[not_whole]);
		int win = key_run[rs[c].key];
		if (win >= 0) {
			keep[k++] = win;
			used[win] = 1;
			d->no_done_cells += !d->cells[win].has_done;
		}
	}
	free(key_run);
	free(rs);
	if (rc) {
		free(keep);
		free(used);
		return rc;
	}
	struct cell *cells = malloc((size_t)(k ? k : 1) * sizeof *cells);
	if (!cells) {
		free(keep);
		free(used);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	for (int i = 0; i < k; i++) {
		cells[i] = d->cells[keep[i]];
		cells[i].prev = -1;
	}
	for (int c = 0; c < n; c++)
		if (!used[c])
			cell_free(&d->cells[c]);
	free(d->cells);
	free(keep);
	free(used);
	d->cells = cells;
	d->n_cells = d->cap_cells = k;
	if (cell_index_rebuild(d))
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	return 0;
}

int data_check(struct data *d, struct sb_err *err)
{
	SB_TRY(resolve_runs(d, err));
	for (int c = 0; c < d->n_cells; c++) {
		const struct cell *ce = &d->cells[c];
		for (int e = 0; e < ce->n_epochs; e++)
			if (isnan(ce->acc[e]))
				return SB_ERR(
				    err, SB_EDATA,
				    "%s: cell %s/%s seed %lld: epoch %d missing (epochs must run 0..%d without gaps)",
				    ce->gap_src ? ce->gap_src : ce->src, d->tasks.s[d->groups[ce->group].task], d->methods.s[ce->method],
				    (long long)ce->seed, e, ce->n_epochs - 1);
	}
	return 0;
}
