/* sb-a8 — PROTOCOL A8's extension analyses with their predeclared criteria:
 * M1 (the switch-epoch predictor, and the switch epochs of the M2 schedules), M2 (the
 * switching schedules), M3, the bottom-k control, the linear-decay control and N3-A's
 * inference (the synthetic intervention assay, from the N3-A runner's n3a.eval records). The
 * arithmetic is lib/a8.h; docs/sb-a8.md defines every number. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "a8.h"
#include "cli.h"
#include "hash.h"
#include "io.h"
#include "json.h"
#include "record.h"
#include "runsel.h"
#include "select.h"
#include "stats.h"

static const char usage_text[] =
    "Usage: sb-a8 m1|m2|bottomk|lineardecay|m3|m3map|n3a [--md FILE] [--switch-epochs FILE] [--seed N]\n"
    "             [--resamples N] [--trajectory A8.ndjson --m2 A8.ndjson] [--interim] [-q] RECORDS...\n"
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
    "  n3a          N3-A's inference from the N3-A runner's n3a.eval records (RECORDS; other kinds are\n"
    "               skipped): 20 sign tests with margin 0.005 and median intervals, Holm over the 2\n"
    "               densities and the 6 hypotheses; verdict BACKWARD_SUPPORTED_SYNTHETIC,\n"
    "               FORWARD_ONLY_SUPPORTED_SYNTHETIC, KILLED_FOR_REGISTERED_EPSILON or INCONCLUSIVE. Of\n"
    "               records of the same arch, r, seed, arm, parent and step the later wins. No decision\n"
    "               (exit 3, naming the first missing or bad evaluation) on an incomplete census, a\n"
    "               non-finite CE or a non-positive denominator\n"
    "\n"
    "Options:\n"
    "  --md FILE             the section of the report (Markdown), written atomically\n"
    "  --switch-epochs FILE  (m1, m3map) the switch epochs, rewritten only when their content changes\n"
    "  --trajectory FILE     (m3map) sb-a8 m1's records (a8.m1.group) of the trajectory grid\n"
    "  --m2 FILE             (m3map) sb-a8 m2's records (its a8.verdict names strongest_simple)\n"
    "  --interim             (n3a) an interim look at a grid still running, not a decision: each\n"
    "                        architecture's ten components over the seeds complete for it, beside\n"
    "                        the published ones (records a8.n3a.interim, then a8.interim); no Holm\n"
    "                        families, no verdict; exit 0 when some seed is complete\n"
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
    "input (n3a: no decision); 4 I/O error.\n";

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
 * train_status, epochs_evaluated (-1 when the record lacks it). A run's evaluation records are
 * those of its id in one input file up to its eval.done: the same id in a later file, or after
 * the eval.done, is a rerun (cell_ids hash the cell's settings, so a rerun carries its
 * original's) and select_runs keeps the later one. file: the input its evaluation came from
 * (-1 while it has only a test.cell). */
struct run {
	char id[256], task[64], method[64], arch[32], tier[32], status[48]; /* id: a generated one always fits */
	int seed, budget, n_val, done, evaluated, file;
	int have[MAXE], have_test;
	double acc[MAXE], ent[MAXE], probe[MAXE][NPROBE], test_acc;
};

static struct run *runs;
static int nruns, caprun;

/* the runs left out of every analysis by select_runs (docs/sb-a8.md, "Which runs count") */
static struct {
	int used, status, no_done, partial, superseded;
} left;

/* A test.cell read before a rerun of its cell was read (test.ndjson before the logs on the
 * command line) went to the run of that id there was then: it belongs to the latest run of
 * the id, as when the logs come first (docs/sb-a8.md). */
static void tests_to_latest(void)
{
	for (int i = 0; i < nruns; i++) {
		if (!runs[i].have_test)
			continue;
		int last = i;
		for (int j = i + 1; j < nruns; j++)
			if (!strcmp(runs[j].id, runs[i].id))
				last = j;
		if (last != i && !runs[last].have_test) {
			runs[last].have_test = 1;
			runs[last].test_acc = runs[i].test_acc;
			runs[i].have_test = 0;
		}
	}
}

/* The run that a record of id from input file belongs to: for a test.cell (eval 0), the
 * latest run of id; for evaluation records, the latest run of id when it is open in this file
 * or has no evaluation yet (a test.cell read first); otherwise a new run. */
static struct run *run_get(const char *id, int file, int eval)
{
	for (int i = nruns - 1; i >= 0; i--) {
		if (strcmp(runs[i].id, id) != 0)
			continue;
		struct run *r = &runs[i];
		if (!eval)
			return r;
		if (r->file < 0 || (r->file == file && !r->done)) {
			r->file = file;
			return r;
		}
		break;
	}
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
	r->file = eval ? file : -1;
	return r;
}

/* a run's epochs: its registered budget (select_runs keeps only runs evaluated at every one) */
static int run_epochs(const struct run *r)
{
	return r->budget;
}

/* a records file read whole and hashed; '-' is stdin, once (hashed from the bytes read) */
/* sb_read_file, of a regular file only: a FIFO would block (a record file is read twice, for
 * its records and for its hash in run.meta) and a device may never end ('-' reads stdin) */
static int regular(const char *path, struct sb_err *err)
{
	struct stat st;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return SB_ERR(err, SB_EIO, "%s: not a regular file", path);
	return 0;
}
static int read_regular(const char *path, char **buf, size_t *len, struct sb_err *err)
{
	SB_TRY(regular(path, err));
	return sb_read_file(path, buf, len, 0, err);
}

static int slurp(const char *path, struct sb_input *in, char **buf, size_t *len, struct sb_err *err)
{
	if (!strcmp(path, "-")) {
		static int stdin_used;
		if (stdin_used++)
			return SB_ERR(err, SB_EUSAGE, "'-' (stdin) given twice");
		SB_TRY(sb_read_stream(stdin, "<stdin>", buf, len, 0, err));
		in->path = "-";
		in->size_bytes = *len;
		sb_sha256_buf(*buf, *len, in->sha256);
		return 0;
	}
	SB_TRY(read_regular(path, buf, len, err));
	int rc = sb_input_hash(in, path, err);
	if (rc)
		free(*buf);
	return rc;
}

/* The next non-empty line of buf[*at..len) as a JSON value in *rec (NULL at the end; the
 * caller frees it); *line: its 1-based number. A line that is not JSON is SB_EDATA naming
 * path:line. */
static int next_record(const char *buf, size_t len, size_t *at, int *line, const char *path, struct sb_json **rec,
                       struct sb_err *err)
{
	*rec = NULL;
	while (*at < len) {
		size_t a = *at, b = a;
		while (b < len && buf[b] != '\n')
			b++;
		*at = b + 1;
		++*line;
		if (b == a)
			continue;
		if (b - a > SB_NDJSON_LINE_MAX) /* lib/json.h's limit of one record, as its reader */
			return SB_ERR(err, SB_EDATA, "%s:%d: line longer than %zu MiB (the limit of one record)", path,
			              *line, SB_NDJSON_LINE_MAX >> 20);
		if (sb_json_parse(buf + a, b - a, rec, err))
			return SB_ERR(err, SB_EDATA, "%s:%d: %s", path, *line, err->msg);
		return 0;
	}
	return 0;
}

/* with_test: also sb-test's test.cell records (their test_accuracy, for m3) */
static int load(const char *path, int file, struct sb_input *in, int with_test, struct sb_err *err)
{
	char *buf;
	size_t len;
	SB_TRY(slurp(path, in, &buf, &len, err));
	int rc = 0, line = 0;
	size_t at = 0;
	struct sb_json *rec;
	while (!rc && !(rc = next_record(buf, len, &at, &line, path, &rec, err)) && rec) {
		if (rec->type != SB_JSON_OBJECT) { /* as sb-stats: every line a record */
			rc = SB_ERR(err, SB_EDATA, "%s:%d: record is not a JSON object", path, line);
			sb_json_free(rec);
			break;
		}
		const char *kind = sb_json_str(sb_json_get(rec, "kind"), "");
		int ep = strcmp(kind, "eval.epoch") == 0, done = strcmp(kind, "eval.done") == 0;
		int64_t ver = 1;
		if ((ep || done || (with_test && !strcmp(kind, "test.cell"))) && sb_json_get(rec, "v") &&
		    (sb_json_int64(sb_json_get(rec, "v"), &ver) || ver != 1)) {
			rc = SB_ERR(err, SB_EDATA, "%s:%d: %s record version %s not supported (this program reads 1)", path,
			            line, kind, sb_json_get(rec, "v")->type == SB_JSON_NUMBER ? sb_json_get(rec, "v")->text : "?");
			sb_json_free(rec);
			break;
		}
		int tc = with_test && strcmp(kind, "test.cell") == 0;
		if (ep || done || tc) {
			const char *task, *method, *arch = "plain", *tier = "compact", *id = NULL;
			int64_t seed = 0, e = 0;
			if (sb_json_req_str(rec, "task", &task, err) || sb_json_req_str(rec, "method", &method, err) ||
			    sb_json_req_int(rec, "seed", &seed, err) ||
			    (ep && sb_json_req_int(rec, "epoch", &e, err)) ||
			    (sb_json_get(rec, "arch") && sb_json_req_str(rec, "arch", &arch, err)) ||
			    (sb_json_get(rec, "tier") && sb_json_req_str(rec, "tier", &tier, err)) ||
			    (sb_json_get(rec, "cell_id") && sb_json_req_str(rec, "cell_id", &id, err))) {
				rc = SB_ERR(err, SB_EDATA, "%s:%d: %s", path, line, err->msg);
				sb_json_free(rec);
				break;
			}
			/* names that do not fit would be cut, and two runs merged under the cut name */
			if (strlen(task) >= sizeof runs->task || strlen(method) >= sizeof runs->method ||
			    strlen(arch) >= sizeof runs->arch || strlen(tier) >= sizeof runs->tier ||
			    (id && strlen(id) >= sizeof runs->id) || seed < 0 || seed > INT_MAX) {
				rc = SB_ERR(err, SB_EDATA,
				            "%s:%d: a task or method of %zu or more bytes, an arch or tier of %zu or more, a "
				            "cell_id of %zu or more, or a seed outside [0, %d]: not a record of this study",
				            path, line, sizeof runs->task, sizeof runs->arch, sizeof runs->id, INT_MAX);
				sb_json_free(rec);
				break;
			}
			char idb[256];
			if (!id) {
				snprintf(idb, sizeof idb, "%s.%s.s%lld.%s.%s", task, method, (long long)seed, arch, tier);
				id = idb;
			}
			struct run *r = run_get(id, file, !tc);
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
					            line);
				r->test_acc = acc;
				r->have_test = 1;
			} else if (done) {
				/* sb-eval's eval.done (lib/vallog.h): the budget and the training status */
				int64_t E, ev = -1;
				const char *st;
				if (sb_json_req_int(rec, "epochs", &E, err) || sb_json_req_str(rec, "train_status", &st, err) ||
				    (sb_json_get(rec, "epochs_evaluated") &&
				     sb_json_req_int(rec, "epochs_evaluated", &ev, err))) {
					rc = SB_ERR(err, SB_EDATA, "%s:%d: eval.done: %s", path, line, err->msg);
				} else if (E < 1 || E > MAXE) {
					rc = SB_ERR(err, SB_EDATA, "%s:%d: eval.done epochs %lld out of range (1..%d)", path,
					            line, (long long)E, MAXE);
				} else {
					r->done = 1;
					r->budget = (int)E;
					r->evaluated = (int)ev;
					snprintf(r->status, sizeof r->status, "%s", st);
				}
			} else if (e < 0 || e >= MAXE) {
				rc = SB_ERR(err, SB_EDATA, "%s:%d: epoch %lld out of range", path, line, (long long)e);
			} else {
				double acc = sb_json_num(sb_json_get(rec, "val_accuracy"), NAN);
				if (!(acc >= 0 && acc <= 1))
					rc = SB_ERR(err, SB_EDATA, "%s:%d: val_accuracy missing or outside [0, 1]", path,
					            line);
				r->have[e] = 1;
				r->acc[e] = acc;
				r->ent[e] = sb_json_num(sb_json_get(rec, "attention_entropy"), NAN);
				for (int f = 0; f < NPROBE; f++)
					r->probe[e][f] = sb_json_num(sb_json_get(rec, probe_names[f]), NAN);
				r->n_val = (int)sb_json_num(sb_json_get(rec, "n_val"), 0);
				if (sb_json_get(rec, "n_val") && !(r->n_val >= 1))
					rc = SB_ERR(err, SB_EDATA, "%s:%d: n_val must be an integer >= 1", path, line);
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
	struct sb_runsel_item *rs = calloc((size_t)(nruns > 0 ? nruns : 1), sizeof *rs);
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

/* Is (arch, tier) in M1's and M2's design (PROTOCOL A8: plain and local_hybrid x compact,
 * deep and wide)? Another (e.g. tier medium) would count as plain or compact in the
 * architecture and tier clauses and the metadata features: the caller leaves it out and
 * says so (off_design_warn). */
static int in_design(const char *arch, const char *tier)
{
	return (!strcmp(arch, "plain") || !strcmp(arch, "local_hybrid")) &&
	       (!strcmp(tier, "compact") || !strcmp(tier, "deep") || !strcmp(tier, "wide"));
}

static void off_design_warn(const char *analysis, const char *unit, int n, const char *task, const char *arch,
                            const char *tier)
{
	if (n > 0)
		sb_cli_warn("%s: %d %s(s) left out: architecture or tier outside the design (plain, local_hybrid x "
		            "compact, deep, wide; e.g. %s %s %s)",
		            analysis, n, unit, task, arch, tier);
}

/* classes and modality of the A1 tasks (metadata features) */
static int task_meta(const char *task, double *classes, double *text)
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
			return 1;
		}
	return 0;
}

/* m1's metadata features need the task's classes and modality: a task outside PROTOCOL A1's
 * 13 is taken as a 10-class image task, and said once (the tests' toy tasks are such) */
static int known_task(const char *task, struct sb_err *err)
{
	static char said[16][64];
	double c, t;
	if (task_meta(task, &c, &t))
		return 0;
	for (int i = 0; i < 16; i++) {
		if (!strcmp(said[i], task))
			return 0;
		if (!said[i][0]) {
			snprintf(said[i], sizeof said[i], "%s", task);
			break;
		}
	}
	sb_cli_warn("task '%s' is not one of PROTOCOL A1's 13: m1's features take it as a 10-class image task",
	            task);
	return 0;
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
	    *nseeds = calloc((size_t)ng + 1, sizeof *nseeds), *nval = calloc((size_t)ng + 1, sizeof *nval),
	    *kg = calloc((size_t)ng + 1, sizeof *kg);
	int *pred = calloc((size_t)NPRED * ng + 1, sizeof *pred);
	const char *dsname[64];
	int cifar[64], nd = 0, rc = 0;
	if (!X || !y || !xe || !xh || !ds || !arch || !tier || !gi || !nseeds || !nval || !pred || !kg)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (int j = 0; j < ng && !rc; j++)
		rc = known_task(g[j].task, err);
	if (rc)
		goto out;
	int off_design = 0, off_j = -1;
	for (int j = 0; j < ng; j++) {
		if (!in_design(g[j].arch, g[j].tier)) {
			if (off_design++ == 0)
				off_j = j;
			continue;
		}
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
		kg[n] = gf.K;
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
		if (!isfinite(gf.ent3) || !isfinite(gf.acc3)) {
			rc = SB_ERR(err, SB_EDATA,
			            "%s/%s/%s: the dense run's validation accuracy or attention_entropy of epoch 3 is "
			            "missing (the early-accuracy and early-entropy predictors need them)",
			            g[j].task, g[j].arch, g[j].tier);
			goto out;
		}
		n++;
	}
	if (off_design)
		off_design_warn("m1", "group", off_design, g[off_j].task, g[off_j].arch, g[off_j].tier);
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
	if ((rc = sb_a8_m1_verdict(n, nd, NPRED, kg, ds, cifar, arch, tier, y, pred, seed, resamples, &v, err)))
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
		int same = sb_file_exists(switch_path) && !read_regular(switch_path, &old, &olen, &e2) &&
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
	free(kg);
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
	int off_design = 0;
	const struct run *off_run = NULL;
	for (int i = 0; i < nruns; i++) {
		struct run *mr = &runs[i];
		if (strcmp(mr->method, "mechanistic_switch"))
			continue;
		if (!in_design(mr->arch, mr->tier)) {
			if (off_design++ == 0)
				off_run = mr;
			continue;
		}
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
	if (off_design)
		off_design_warn("m2", "run", off_design, off_run->task, off_run->arch, off_run->tier);
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
	SB_TRY(read_regular(path, &buf, &len, err));
	int rc = 0, line = 0;
	size_t at = 0;
	struct sb_json *rec;
	while (!rc && !(rc = next_record(buf, len, &at, &line, path, &rec, err)) && rec) {
		if ((rc = fn(rec, ctx, err)))
			rc = SB_ERR(err, SB_EDATA, "%s:%d: %s", path, line, err->msg);
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
	SB_TRY(known_task(task, err));
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
		int same = sb_file_exists(switch_path) && !read_regular(switch_path, &old, &olen, &e2) &&
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
	sb_jw_knull(w, "published_outcome"); /* the map is this study's own; PROTOCOL A8 publishes none */
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
	sb_jw_knull(w, "published_outcome"); /* PROTOCOL A8 reports no M3 outcome */
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

/* PROTOCOL A8's bottom-k and linear-decay controls are one group's (CIFAR-10, one
 * architecture and tier): runs of several groups are refused, not pooled. what: the analysis. */
static int one_group(const char *what, struct sb_err *err)
{
	for (int i = 1; i < nruns; i++)
		if (strcmp(runs[i].task, runs[0].task) || strcmp(runs[i].arch, runs[0].arch) ||
		    strcmp(runs[i].tier, runs[0].tier))
			return SB_ERR(err, SB_EDATA,
			              "%s reads the runs of one task, architecture and tier (PROTOCOL A8: CIFAR-10); "
			              "got %s/%s/%s and %s/%s/%s: give it one group's validation logs",
			              what, runs[0].task, runs[0].arch, runs[0].tier, runs[i].task, runs[i].arch,
			              runs[i].tier);
	return 0;
}

static int bottomk(struct sb_jw *w, struct md *md, struct sb_err *err)
{
	SB_TRY(one_group("bottomk", err));
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
	/* PROTOCOL A8 gives the dense readout (0.67093), not the verdict; 0.67093 >= 0.60 */
	sb_jw_kstr(w, "published_outcome", "GUARD_MET");
	left_fields(w);
	sb_jw_obj_end(w);
	SB_TRY(emit(w, err));
	mdf(md,
	    "\nGuard (dense mean best validation accuracy >= 0.60): %.5f, %s. **Bottom-k verdict: %s** (published: "
	    "GUARD_MET, dense 0.67093 at patience 5)\n\n",
	    mean0[0], yes(guard), verdict);
	left_md(md);
	return 0;
}

/* PROTOCOL A8's registered linear-decay budgets: the verdict compares exactly these two */
#define LD_FIRST 3
#define LD_LAST 30

static int lineardecay(struct sb_jw *w, struct md *md, struct sb_err *err)
{
	SB_TRY(one_group("lineardecay", err));
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
			if (r->n_val < 1 || d->n_val < 1)
				return SB_ERR(err, SB_EDATA,
				              "run %s: its eval.epoch records give no n_val >= 1 (correct counts are "
				              "round(val_accuracy x n_val))",
				              r->n_val < 1 ? r->id : d->id);
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

/* ---------------------------------------------------------------- N3-A */

/* One n3a.eval record (the N3-A runner's, docs/n3a-spec.md 2.8-2.10): a unit (arch, r, seed,
 * arm, parent) evaluated at a step. arm: D = 0, S = 1 on a main trajectory (parent -1); the
 * index in SLPGN on a fork (parent 0: 128, 1: 768). ce is NaN for a null (non-finite) CE. */
struct n3rec {
	long long seed;
	int arch, ri, arm, parent, step, file, line;
	int reg; /* registered_settings: the cell's every other setting is the registered one */
	double ce;
};
static struct n3rec *n3;
static size_t n3n, n3cap;
static const char *n3paths[4096];
static int n3_interim; /* --interim */
static struct {
	long long read, superseded, counted, unregistered;
	char sup_example[200];
} n3count;

static const int n3_main_steps[] = {0, 32, 64, 128, 160, 256, 512, 768, 800, 1024};
static const int n3_fork_steps[] = {0, 1, 32};

static int n3_index(const int *tab, int n, int v)
{
	for (int i = 0; i < n; i++)
		if (tab[i] == v)
			return i;
	return -1;
}

/* "arch A, r R, seed S, arm X, parent P, step T" */
static void n3_unit(char *b, size_t nb, int arch, int ri, long long seed, int arm, int parent, int step)
{
	if (parent < 0)
		snprintf(b, nb, "arch %s, r %d, seed %lld, arm %c, main, step %d", sb_n3a_arch_names[arch],
		         sb_n3a_r[ri], seed, arm ? 'S' : 'D', step);
	else
		snprintf(b, nb, "arch %s, r %d, seed %lld, arm %c, parent %d, step %d", sb_n3a_arch_names[arch],
		         sb_n3a_r[ri], seed, sb_n3a_fork_arms[arm], sb_n3a_parents[parent], step);
}

/* the n3a.eval records of one file (other kinds are skipped); a field missing or outside the
 * design is malformed input, naming file and line */
static int n3a_load(const char *path, int file, struct sb_input *in, struct sb_err *err)
{
	char *buf;
	size_t len;
	SB_TRY(slurp(path, in, &buf, &len, err));
	n3paths[file] = path;
	int rc = 0, line = 0;
	size_t at = 0;
	struct sb_json *rec;
	while (!rc && !(rc = next_record(buf, len, &at, &line, path, &rec, err)) && rec) {
		if (rec->type != SB_JSON_OBJECT) { /* as load(): every line a record */
			rc = SB_ERR(err, SB_EDATA, "%s:%d: record is not a JSON object", path, line);
			sb_json_free(rec);
			break;
		}
		if (strcmp(sb_json_str(sb_json_get(rec, "kind"), ""), "n3a.eval")) {
			sb_json_free(rec);
			continue;
		}
		int64_t ver = 1; /* as load(): a record of another version is not read as version 1 */
		if (sb_json_get(rec, "v") && (sb_json_int64(sb_json_get(rec, "v"), &ver) || ver != 1)) {
			rc = SB_ERR(err, SB_EDATA, "%s:%d: n3a.eval record version %s not supported (this program reads 1)",
			            path, line,
			            sb_json_get(rec, "v")->type == SB_JSON_NUMBER ? sb_json_get(rec, "v")->text : "?");
			sb_json_free(rec);
			break;
		}
		const char *arch, *arm;
		int64_t r, seed, step, parent = -1;
		const struct sb_json *pj = sb_json_get(rec, "parent"),
		                     *cj = sb_json_get(rec, "validation_cross_entropy");
		struct n3rec x = {.file = file, .line = line, .parent = -1};
		if (sb_json_req_str(rec, "arch", &arch, err) || sb_json_req_int(rec, "r", &r, err) ||
		    sb_json_req_int(rec, "seed", &seed, err) || sb_json_req_str(rec, "arm", &arm, err) ||
		    sb_json_req_int(rec, "step", &step, err)) {
		} else if (!pj || (pj->type != SB_JSON_NULL && sb_json_req_int(rec, "parent", &parent, err))) {
			if (!pj)
				SB_ERR(err, SB_EDATA, "missing field 'parent' (null on a main trajectory)");
		} else if (sb_json_get(rec, "registered_settings") &&
		           sb_json_get(rec, "registered_settings")->type != SB_JSON_BOOL) {
			SB_ERR(err, SB_EDATA, "registered_settings is not true or false");
		} else if (!cj || (cj->type != SB_JSON_NULL && cj->type != SB_JSON_NUMBER)) {
			SB_ERR(err, SB_EDATA,
			       "validation_cross_entropy missing or not a number (null when non-finite)");
		} else if ((x.arch = !strcmp(arch, "query") ? 0 : !strcmp(arch, "transformer") ? 1 : -1) < 0) {
			SB_ERR(err, SB_EDATA, "arch '%s' is not query or transformer", arch);
		} else if (r != (int)r || (x.ri = n3_index(sb_n3a_r, SB_N3A_RS, (int)r)) < 0) {
			SB_ERR(err, SB_EDATA, "r %lld is not 1, 4, 16 or 24", (long long)r);
		} else if (pj->type != SB_JSON_NULL &&
		           (parent != (int)parent ||
		            (x.parent = n3_index(sb_n3a_parents, SB_N3A_PARENTS, (int)parent)) < 0)) {
			SB_ERR(err, SB_EDATA, "parent %lld is not null, 128 or 768", (long long)parent);
		} else if (x.parent < 0 ? strlen(arm) != 1 || (arm[0] != 'D' && arm[0] != 'S')
		                        : strlen(arm) != 1 || !strchr(sb_n3a_fork_arms, arm[0])) {
			SB_ERR(err, SB_EDATA, "arm '%s' is not one of %s", arm,
			       x.parent < 0 ? "D, S (main)" : "S, L, P, G, N (fork)");
		} else if (step != (int)step || (x.parent < 0 ? n3_index(n3_main_steps, 10, (int)step)
		                                              : n3_index(n3_fork_steps, 3, (int)step)) < 0) {
			SB_ERR(err, SB_EDATA, "step %lld is not an evaluation step of a %s", (long long)step,
			       x.parent < 0 ? "main trajectory (0, 32, 64, 128, 160, 256, 512, 768, 800, 1024)"
			                    : "fork (relative 0, 1, 32)");
		} else {
			x.seed = (long long)seed;
			x.step = (int)step;
			x.arm =
			    x.parent < 0 ? arm[0] == 'S' : (int)(strchr(sb_n3a_fork_arms, arm[0]) - sb_n3a_fork_arms);
			x.ce = cj->type == SB_JSON_NUMBER && isfinite(cj->number) ? cj->number : NAN;
			x.reg = sb_json_bool(sb_json_get(rec, "registered_settings"), 0);
			if (n3n == n3cap) {
				n3cap = n3cap ? 2 * n3cap : 4096;
				struct n3rec *t = realloc(n3, n3cap * sizeof *n3);
				if (!t) {
					sb_json_free(rec);
					free(buf);
					return SB_ERR(err, SB_EINTERNAL, "out of memory");
				}
				n3 = t;
			}
			n3[n3n++] = x;
			n3count.read++;
			err->code = 0;
		}
		if (err->code)
			rc = SB_ERR(err, SB_EDATA, "%s:%d: n3a.eval: %s", path, line, err->msg);
		sb_json_free(rec);
	}
	free(buf);
	return rc;
}

/* the evaluations' order: by unit and step, then input order (the later record of a key wins) */
static int n3_cmp(const void *pa, const void *pb)
{
	const struct n3rec *a = pa, *b = pb;
	int c = (a->arch > b->arch) - (a->arch < b->arch);
	if (!c)
		c = (a->ri > b->ri) - (a->ri < b->ri);
	if (!c)
		c = (a->seed > b->seed) - (a->seed < b->seed);
	if (!c)
		c = (a->parent > b->parent) - (a->parent < b->parent);
	if (!c)
		c = (a->arm > b->arm) - (a->arm < b->arm);
	if (!c)
		c = (a->step > b->step) - (a->step < b->step);
	if (!c)
		c = (a->file > b->file) - (a->file < b->file);
	if (!c)
		c = (a->line > b->line) - (a->line < b->line);
	return c;
}
static int n3_same_key(const struct n3rec *a, const struct n3rec *b)
{
	return a->arch == b->arch && a->ri == b->ri && a->seed == b->seed && a->parent == b->parent &&
	       a->arm == b->arm && a->step == b->step;
}
static int ll_cmp(const void *pa, const void *pb)
{
	long long a = *(const long long *)pa, b = *(const long long *)pb;
	return (a > b) - (a < b);
}

static void n3_interval(char *b, size_t nb, const struct sb_a8_n3a_comp *c)
{
	if (c->rank)
		snprintf(b, nb, "[%.5g, %.5g]", c->lo, c->hi);
	else
		snprintf(b, nb, "(-inf, inf)");
}
static void n3_pub_interval(char *b, size_t nb, const struct sb_a8_n3a_pub *p)
{
	snprintf(b, nb, "[%.5g, %.5g]", p->lo, p->hi);
}

/* one component (kind a8.n3a.component, or a8.n3a.interim for --interim) */
static void n3_component_record(struct sb_jw *w, const char *kind, const struct sb_a8_n3a_comp *x)
{
	sb_jw_record(w, kind, 1);
	sb_jw_kstr(w, "stage", x->hyp < 0 ? "context" : "identification");
	if (x->hyp < 0)
		sb_jw_knull(w, "hypothesis");
	else {
		char h[8];
		snprintf(h, sizeof h, "H%d", x->hyp + 1);
		sb_jw_kstr(w, "hypothesis", h);
	}
	sb_jw_kstr(w, "arch", sb_n3a_arch_names[x->arch]);
	if (x->r)
		sb_jw_kint(w, "r", x->r);
	else
		sb_jw_knull(w, "r");
	sb_jw_kstr(w, "component", x->name);
	sb_jw_kint(w, "n", x->n);
	sb_jw_kf64(w, "median", x->median);
	if (x->rank) {
		sb_jw_kf64(w, "interval_lo", x->lo);
		sb_jw_kf64(w, "interval_hi", x->hi);
	} else {
		sb_jw_knull(w, "interval_lo");
		sb_jw_knull(w, "interval_hi");
	}
	sb_jw_kint(w, "interval_rank", x->rank);
	sb_jw_kint(w, "above_margin", x->above);
	sb_jw_kf64(w, "p", x->p);
	sb_jw_kbool(w, "excluded", x->excluded);
	sb_jw_obj_end(w);
}

/* whether seed si has every evaluation the analysis reads for arch a */
static int n3_seed_complete(const double *mce, const double *fce, int a, int si, int ns)
{
	for (int r = 0; r < SB_N3A_RS; r++) {
		for (int arm = 0; arm < 2; arm++)
			for (int k = 0; k < SB_N3A_STEPS; k++)
				if (isnan(mce[SB_N3A_MAIN(a, r, arm, k, si, ns)]))
					return 0;
		for (int p = 0; p < SB_N3A_PARENTS; p++)
			for (int arm = 0; arm < SB_N3A_FORK_ARMS; arm++)
				if (isnan(fce[SB_N3A_FORK(a, r, p, arm, si, ns)]))
					return 0;
	}
	return 1;
}

/* --interim: each architecture's ten components over the seeds whose evaluations are complete
 * for it, beside the published ones; no families, no verdict (records a8.n3a.interim, then
 * a8.interim). mce/fce: the census of all ns seeds present (NaN where missing). */
static int n3a_interim(struct sb_jw *w, struct md *md, const double *mce, const double *fce, const long long *seeds,
                       int ns, long long missing, const char *first, struct sb_err *err)
{
	size_t nm = (size_t)SB_N3A_ARCHS * SB_N3A_RS * 2 * SB_N3A_STEPS * ns;
	size_t nf = (size_t)SB_N3A_ARCHS * SB_N3A_RS * SB_N3A_PARENTS * SB_N3A_FORK_ARMS * ns;
	double *m2 = malloc(nm * sizeof *m2), *f2 = malloc(nf * sizeof *f2);
	long long *s2 = malloc((size_t)ns * sizeof *s2);
	struct sb_a8_n3a res[SB_N3A_ARCHS];
	int na[SB_N3A_ARCHS] = {0}, rc = 0;
	if (!m2 || !f2 || !s2) {
		rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		goto out;
	}
	for (int a = 0; a < SB_N3A_ARCHS && !rc; a++) {
		int n = 0;
		for (int si = 0; si < ns; si++)
			n += n3_seed_complete(mce, fce, a, si, ns);
		na[a] = n;
		if (!n)
			continue;
		/* arch a's CEs of its complete seeds, re-indexed for n seeds (the other arch's: NaN, unread) */
		for (size_t i = 0; i < nm; i++)
			m2[i] = NAN;
		for (size_t i = 0; i < nf; i++)
			f2[i] = NAN;
		int j = 0;
		for (int si = 0; si < ns; si++) {
			if (!n3_seed_complete(mce, fce, a, si, ns))
				continue;
			s2[j] = seeds[si];
			for (int r = 0; r < SB_N3A_RS; r++) {
				for (int arm = 0; arm < 2; arm++)
					for (int k = 0; k < SB_N3A_STEPS; k++)
						m2[SB_N3A_MAIN(a, r, arm, k, j, n)] =
						    mce[SB_N3A_MAIN(a, r, arm, k, si, ns)];
				for (int p = 0; p < SB_N3A_PARENTS; p++)
					for (int arm = 0; arm < SB_N3A_FORK_ARMS; arm++)
						f2[SB_N3A_FORK(a, r, p, arm, j, n)] =
						    fce[SB_N3A_FORK(a, r, p, arm, si, ns)];
			}
			j++;
		}
		struct sb_a8_n3a_data d = {.n = n, .main_ce = m2, .fork_ce = f2, .seed = s2, .one_arch = 1 + a};
		if ((rc = sb_a8_n3a(&d, &res[a], err)))
			sb_err_prefix(err, "N3-A: interim");
	}
	if (rc)
		goto out;
	if (!na[0] && !na[1]) {
		rc = SB_ERR(
		    err, SB_EDATA,
		    "N3-A: interim: no seed has every evaluation of either architecture (%lld of %zu missing; the "
		    "first: %s)",
		    missing, nm + nf, first);
		goto out;
	}
	sb_cli_warn("N3-A: an interim look, not a decision: %d of %d seed(s) complete for query, %d for transformer",
	            na[0], ns, na[1]);
	/* the verdict every completion of the missing architecture would give, when each
	 * architecture is complete for every seed present or for none (the final analysis then
	 * uses these seeds' components as they are) */
	const char *fixed = NULL;
	int ctx_possible = 1, comparable = 1;
	struct sb_a8_n3a_comp all[SB_N3A_NCOMP];
	int known[SB_N3A_NCOMP];
	for (int a = 0; a < SB_N3A_ARCHS; a++)
		comparable &= na[a] == 0 || na[a] == ns;
	for (int c = 0; c < SB_N3A_NCOMP; c++) {
		int a = c < 8 ? (c / 2) % 2 : (c - 8) % 2;
		known[c] = na[a] == ns;
		all[c] = res[a].comp[c];
	}
	if (comparable && (rc = sb_a8_n3a_determined(all, known, &fixed, &ctx_possible, err)))
		goto out;
	for (int c = 0; c < SB_N3A_NCOMP && !rc; c++) {
		int a = c < 8 ? (c / 2) % 2 : (c - 8) % 2;
		if (na[a]) {
			n3_component_record(w, "a8.n3a.interim", &res[a].comp[c]);
			rc = emit(w, err);
		}
	}
	if (rc)
		goto out;
	sb_jw_record(w, "a8.interim", 1);
	sb_jw_kstr(w, "analysis", "n3a");
	sb_jw_knull(w, "verdict");
	sb_jw_kint(w, "n_seeds", ns);
	sb_jw_kint(w, "seeds_complete_query", na[0]);
	sb_jw_kint(w, "seeds_complete_transformer", na[1]);
	sb_jw_kint(w, "evals_required", (long long)(nm + nf));
	sb_jw_kint(w, "evals_missing", missing);
	sb_jw_kint(w, "evals_read", n3count.read);
	sb_jw_kint(w, "evals_counted", n3count.counted);
	sb_jw_kint(w, "evals_superseded", n3count.superseded);
	sb_jw_kint(w, "evals_nonregistered_settings", n3count.unregistered);
	if (comparable) {
		sb_jw_kbool(w, "context_pass_possible", ctx_possible);
		if (fixed)
			sb_jw_kstr(w, "verdict_if_completed", fixed);
		else
			sb_jw_knull(w, "verdict_if_completed");
	} else {
		sb_jw_knull(w, "context_pass_possible");
		sb_jw_knull(w, "verdict_if_completed");
	}
	sb_jw_kf64(w, "margin", SB_N3A_MARGIN);
	sb_jw_kf64(w, "interval_alpha", SB_N3A_ALPHA_INTERVAL);
	sb_jw_kstr(w, "published_outcome", SB_A8_N3A_PUBLISHED_VERDICT);
	sb_jw_obj_end(w);
	if ((rc = emit(w, err)))
		goto out;

	mdf(md, "### N3-A: an interim look (no decision)\n\n");
	mdf(md,
	    "**Not a decision.** Each architecture's components over the seeds whose evaluations are complete "
	    "for it (query %d, transformer %d, of %d seed(s) present; %lld of %zu required evaluations missing); "
	    "no Holm families and no verdict: the registered analysis needs both architectures and every seed "
	    "(`sb-a8 n3a` without --interim). Sign tests at margin %.3g, median intervals at noncoverage 0.0025 "
	    "(none when the rank is 0). Published: n = 64, the study's SCIENTIFIC_DECISION.json.\n\n",
	    na[0], na[1], ns, missing, nm + nf, SB_N3A_MARGIN);
	mdf(md,
	    "| stage | component | r | arch | n | median | interval | #> %.3g | p | excluded | published median | "
	    "published interval | published # | published p | published excluded |\n| --- | --- | --- | --- | --- "
	    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
	    SB_N3A_MARGIN);
	for (int c = 0; c < SB_N3A_NCOMP; c++) {
		int a = c < 8 ? (c / 2) % 2 : (c - 8) % 2;
		if (!na[a])
			continue;
		const struct sb_a8_n3a_comp *x = &res[a].comp[c];
		const struct sb_a8_n3a_pub *pb = &sb_a8_n3a_published[c];
		char iv[80], piv[80], r[16] = "-";
		n3_interval(iv, sizeof iv, x);
		n3_pub_interval(piv, sizeof piv, pb);
		if (x->r)
			snprintf(r, sizeof r, "%d", x->r);
		mdf(md, "| %s | %s | %s | %s | %d | %.5g | %s | %d | %.3g | %s | %.5g | %s | %d/64 | %s | %s |\n",
		    x->hyp < 0 ? "context" : sb_a8_n3a_hyp_desc[x->hyp], x->name, r, sb_n3a_arch_names[a], x->n,
		    x->median, iv, x->above, x->p, x->excluded ? "yes" : "no", pb->median, piv, pb->above, pb->p_text,
		    pb->excluded ? "yes" : "no");
	}
	mdf(md, "\n");
	if (!comparable)
		mdf(md,
		    "Whether the verdict is already fixed is not said: some architecture is complete for some seeds "
		    "but not all, so the final analysis's components are not these.\n\n");
	else if (fixed)
		mdf(md,
		    "**Whatever the missing evaluations turn out to be** (for these %d seeds), the registered rules give "
		    "**%s** (published: %s): context_pass %s; a density's and a hypothesis' p is the maximum over its "
		    "components, so a known p is a floor, and Holm's adjusted p's never fall when a raw p grows.\n\n",
		    ns, fixed, SB_A8_N3A_PUBLISHED_VERDICT,
		    ctx_possible ? "can still hold" : "cannot hold (a known component's p already keeps both densities above 0.05 after Holm)");
	else
		mdf(md, "The verdict is not fixed yet: the missing evaluations can still change it (context_pass %s).\n\n",
		    ctx_possible ? "can still hold" : "cannot hold");
out:
	free(m2);
	free(f2);
	free(s2);
	return rc;
}

static int n3a(struct sb_jw *w, struct md *md, struct sb_err *err)
{
	if (!n3n)
		return SB_ERR(err, SB_EDATA, "N3-A: no decision: no n3a.eval records");
	/* 1. reruns: of the records of one (arch, r, seed, arm, parent, step) the later wins */
	qsort(n3, n3n, sizeof *n3, n3_cmp);
	size_t m = 0;
	for (size_t i = 0; i < n3n; i++) {
		if (m && n3_same_key(&n3[m - 1], &n3[i])) {
			if (!n3count.superseded++)
				snprintf(n3count.sup_example, sizeof n3count.sup_example, "%s:%d by %s:%d",
				         n3paths[n3[m - 1].file], n3[m - 1].line, n3paths[n3[i].file], n3[i].line);
			n3[m - 1] = n3[i];
		} else {
			n3[m++] = n3[i];
		}
	}
	n3n = m;
	n3count.counted = (long long)m;
	for (size_t i = 0; i < n3n; i++)
		n3count.unregistered += !n3[i].reg;
	if (n3count.superseded)
		sb_cli_warn(
		    "N3-A: %lld evaluation(s) superseded by a later record of the same arch, r, seed, arm, parent and "
		    "step (e.g. %s)",
		    n3count.superseded, n3count.sup_example);
	/* 2. the seeds present */
	long long *seeds = malloc(n3n * sizeof *seeds);
	if (!seeds)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	for (size_t i = 0; i < n3n; i++)
		seeds[i] = n3[i].seed;
	qsort(seeds, n3n, sizeof *seeds, ll_cmp);
	int ns = 0;
	for (size_t i = 0; i < n3n; i++)
		if (!ns || seeds[ns - 1] != seeds[i])
			seeds[ns++] = seeds[i];
	/* 3. a non-finite CE in any evaluation that counts: no decision */
	for (size_t i = 0; i < n3n; i++)
		if (isnan(n3[i].ce)) {
			char u[160];
			const struct n3rec *x = &n3[i];
			n3_unit(u, sizeof u, x->arch, x->ri, x->seed, x->arm, x->parent, x->step);
			free(seeds);
			return SB_ERR(err, SB_EDATA, "N3-A: no decision: %s:%d: non-finite validation CE (%s)",
			              n3paths[x->file], x->line, u);
		}
	/* 4. the census: every seed present needs both archs, all four r, D and S at the five
	 * steps, and the five fork arms at relative step 32 of both parents */
	size_t nm = (size_t)SB_N3A_ARCHS * SB_N3A_RS * 2 * SB_N3A_STEPS * ns;
	size_t nf = (size_t)SB_N3A_ARCHS * SB_N3A_RS * SB_N3A_PARENTS * SB_N3A_FORK_ARMS * ns;
	double *mce = malloc(nm * sizeof *mce), *fce = malloc(nf * sizeof *fce);
	if (!mce || !fce) {
		free(seeds);
		free(mce);
		free(fce);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	for (size_t i = 0; i < nm; i++)
		mce[i] = NAN;
	for (size_t i = 0; i < nf; i++)
		fce[i] = NAN;
	for (size_t i = 0; i < n3n; i++) {
		const struct n3rec *x = &n3[i];
		int si = (int)((long long *)bsearch(&x->seed, seeds, (size_t)ns, sizeof *seeds, ll_cmp) - seeds);
		if (x->parent < 0) {
			int k = n3_index(sb_n3a_steps, SB_N3A_STEPS, x->step);
			if (k >= 0)
				mce[SB_N3A_MAIN(x->arch, x->ri, x->arm, k, si, ns)] = x->ce;
		} else if (x->step == SB_N3A_FORK_STEP) {
			fce[SB_N3A_FORK(x->arch, x->ri, x->parent, x->arm, si, ns)] = x->ce;
		}
	}
	long long missing = 0;
	char first[160] = "";
	for (int si = 0; si < ns; si++)
		for (int a = 0; a < SB_N3A_ARCHS; a++)
			for (int r = 0; r < SB_N3A_RS; r++) {
				for (int arm = 0; arm < 2; arm++)
					for (int k = 0; k < SB_N3A_STEPS; k++)
						if (isnan(mce[SB_N3A_MAIN(a, r, arm, k, si, ns)]) && !missing++)
							n3_unit(first, sizeof first, a, r, seeds[si], arm, -1,
							        sb_n3a_steps[k]);
				for (int p = 0; p < SB_N3A_PARENTS; p++)
					for (int arm = 0; arm < SB_N3A_FORK_ARMS; arm++)
						if (isnan(fce[SB_N3A_FORK(a, r, p, arm, si, ns)]) && !missing++)
							n3_unit(first, sizeof first, a, r, seeds[si], arm, p,
							        SB_N3A_FORK_STEP);
			}
	int rc = 0;
	struct sb_a8_n3a res;
	if (n3_interim) {
		rc = n3a_interim(w, md, mce, fce, seeds, ns, missing, first, err);
		goto out;
	}
	if (missing) {
		rc = SB_ERR(
		    err, SB_EDATA,
		    "N3-A: no decision: census incomplete: %lld of %zu required evaluations missing for the %d seed(s) "
		    "present; the first: %s",
		    missing, nm + nf, ns, first);
		goto out;
	}
	struct sb_a8_n3a_data d = {.n = ns, .main_ce = mce, .fork_ce = fce, .seed = seeds};
	if ((rc = sb_a8_n3a(&d, &res, err))) {
		sb_err_prefix(err, "N3-A: no decision");
		goto out;
	}
	int reg_seeds =
	    ns == SB_N3A_SEEDS && seeds[0] == SB_N3A_SEED0 && seeds[ns - 1] == SB_N3A_SEED0 + SB_N3A_SEEDS - 1;
	int registered = reg_seeds && !n3count.unregistered;
	if (!reg_seeds)
		sb_cli_warn("N3-A: %d seed(s) (%lld..%lld): not the registered design (%d seeds %d..%d)", ns, seeds[0],
		            seeds[ns - 1], SB_N3A_SEEDS, SB_N3A_SEED0, SB_N3A_SEED0 + SB_N3A_SEEDS - 1);
	if (n3count.unregistered)
		sb_cli_warn("N3-A: %lld of %lld evaluations come from cells whose settings are not the registered ones "
		            "(their registered_settings is not true): not the registered design",
		            n3count.unregistered, n3count.counted);
	sb_progress(1, "N3-A: %d seeds, %lld evaluations counted: %s", ns, n3count.counted, res.verdict);
	/* records: the 20 components, the two families, the verdict */
	for (int c = 0; c < SB_N3A_NCOMP; c++) {
		n3_component_record(w, "a8.n3a.component", &res.comp[c]);
		if ((rc = emit(w, err)))
			goto out;
	}
	for (int f = 0; f < 2 + SB_N3A_HYPS; f++) {
		int ctx = f < 2, h = f - 2;
		char mem[8];
		snprintf(mem, sizeof mem, ctx ? "r%d" : "H%d", ctx ? (f ? 24 : 16) : h + 1);
		double p = ctx ? res.density_p[f] : res.hyp_p[h], holm = ctx ? res.density_holm[f] : res.hyp_holm[h];
		int ex = ctx ? res.density_excluded[f] : res.comp[8 + 2 * h].excluded || res.comp[9 + 2 * h].excluded;
		sb_jw_record(w, "a8.n3a.family", 1);
		sb_jw_kstr(w, "family", ctx ? "context" : "identification");
		sb_jw_kstr(w, "member", mem);
		if (ctx)
			sb_jw_kstr(w, "description",
			           f ? "density r = 24: E and C, both archs" : "density r = 16: E and C, both archs");
		else
			sb_jw_kstr(w, "description", sb_a8_n3a_hyp_desc[h]);
		sb_jw_kf64(w, "p", p);
		sb_jw_kf64(w, "holm_p", holm);
		sb_jw_kbool(w, "significant", holm <= SB_N3A_ALPHA);
		sb_jw_kbool(w, "some_component_excluded", ex);
		sb_jw_obj_end(w);
		if ((rc = emit(w, err)))
			goto out;
	}
	sb_jw_record(w, "a8.verdict", 1);
	sb_jw_kstr(w, "analysis", "n3a");
	sb_jw_kstr(w, "verdict", res.verdict);
	sb_jw_kbool(w, "context_pass", res.context_pass);
	sb_jw_kbool(w, "clause_backward_supported", res.backward_supported);
	sb_jw_kbool(w, "clause_forward_supported", res.forward_supported);
	sb_jw_kbool(w, "clause_killed_context_gates", res.killed_context);
	sb_jw_kbool(w, "clause_killed_mechanism_branches", res.killed_mechanism);
	sb_jw_kbool(w, "backward_component_excluded", res.backward_excluded);
	sb_jw_kbool(w, "forward_component_excluded", res.forward_excluded);
	for (int dd = 0; dd < 2; dd++) {
		char k[32];
		snprintf(k, sizeof k, "density_p_r%d", dd ? 24 : 16);
		sb_jw_kf64(w, k, res.density_p[dd]);
		snprintf(k, sizeof k, "density_holm_r%d", dd ? 24 : 16);
		sb_jw_kf64(w, k, res.density_holm[dd]);
	}
	for (int h = 0; h < SB_N3A_HYPS; h++) {
		char k[16];
		snprintf(k, sizeof k, "h%d_p", h + 1);
		sb_jw_kf64(w, k, res.hyp_p[h]);
		snprintf(k, sizeof k, "h%d_holm", h + 1);
		sb_jw_kf64(w, k, res.hyp_holm[h]);
	}
	sb_jw_kf64(w, "margin", SB_N3A_MARGIN);
	sb_jw_kf64(w, "alpha", SB_N3A_ALPHA);
	sb_jw_kf64(w, "interval_alpha", SB_N3A_ALPHA_INTERVAL);
	sb_jw_kint(w, "interval_rank", res.comp[0].rank);
	sb_jw_kint(w, "n_seeds", ns);
	sb_jw_kint(w, "seed_min", seeds[0]);
	sb_jw_kint(w, "seed_max", seeds[ns - 1]);
	sb_jw_kbool(w, "registered_design", registered);
	sb_jw_kint(w, "evals_read", n3count.read);
	sb_jw_kint(w, "evals_counted", n3count.counted);
	sb_jw_kint(w, "evals_superseded", n3count.superseded);
	sb_jw_kint(w, "evals_nonregistered_settings", n3count.unregistered);
	sb_jw_kstr(w, "published_outcome", SB_A8_N3A_PUBLISHED_VERDICT);
	sb_jw_kbool(w, "mechanism_manuscript_eligible", 0);
	sb_jw_kbool(w, "real_transfer_still_required", 1);
	sb_jw_obj_end(w);
	if ((rc = emit(w, err)))
		goto out;

	/* the report's section, beside the published tables (docs/n3a-spec.md 4) */
	mdf(md, "### N3-A: the synthetic intervention assay (computed)\n\n");
	if (registered)
		mdf(md, "The registered design: %d seeds (%lld..%lld), 2 architectures x 4 densities.\n\n", ns,
		    seeds[0], seeds[ns - 1]);
	else
		mdf(md,
		    "**Not the registered design**: %d seed(s) (%lld..%lld) instead of %d (%d..%d). The p-values and "
		    "intervals below are those of %d seeds (with fewer than 10 no finite median interval exists at "
		    "0.0025, so no component can exclude its direction); the published columns are for comparison "
		    "only.\n\n",
		    ns, seeds[0], seeds[ns - 1], SB_N3A_SEEDS, SB_N3A_SEED0, SB_N3A_SEED0 + SB_N3A_SEEDS - 1, ns);
	mdf(md,
	    "Sign tests at margin %.3g (values equal to it count against), median intervals at noncoverage "
	    "0.05/20 = 0.0025 (order statistics %d and %d of %d; none when 0), a component excludes its direction "
	    "when its interval's upper end is <= %.3g. Published: n = 64, the study's SCIENTIFIC_DECISION.json.\n\n",
	    SB_N3A_MARGIN, res.comp[0].rank, ns + 1 - res.comp[0].rank, ns, SB_N3A_MARGIN);
	mdf(md,
	    "Context (Stage 1):\n\n| r | arch | component | median | interval | #> %.3g | p | excluded | published "
	    "median | published interval | published # | published p | published excluded |\n| --- | --- | --- | "
	    "--- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
	    SB_N3A_MARGIN);
	char iv[80], piv[80];
	for (int c = 0; c < 8; c++) {
		const struct sb_a8_n3a_comp *x = &res.comp[c];
		const struct sb_a8_n3a_pub *pb = &sb_a8_n3a_published[c];
		n3_interval(iv, sizeof iv, x);
		n3_pub_interval(piv, sizeof piv, pb);
		mdf(md, "| %d | %s | %s | %.5g | %s | %d/%d | %.3g | %s | %.5g | %s | %d/64 | %s | %s |\n", x->r,
		    sb_n3a_arch_names[x->arch],
		    x->hyp < 0 && !strcmp(x->name, "early_benefit") ? "early benefit" : "late cost", x->median, iv,
		    x->above, x->n, x->p, x->excluded ? "yes" : "no", pb->median, piv, pb->above, pb->p_text,
		    pb->excluded ? "yes" : "no");
	}
	mdf(md,
	    "\nDensity p (max of its four) / Holm over two: r = 16 %.3g / %.3g, r = 24 %.3g / %.3g (published 1 / 1 "
	    "for both). **context_pass: %s** (published: false).\n\n",
	    res.density_p[0], res.density_holm[0], res.density_p[1], res.density_holm[1],
	    res.context_pass ? "true" : "false");
	mdf(md,
	    "Identification (Stage 2; B = (CE_N - CE_G) / CE_S(parent), F = (CE_P - CE_L) / CE_S(parent), forks read "
	    "at "
	    "relative step 32):\n\n| hyp. | arch | median | interval | #> %.3g | p | excluded | hyp. p / Holm | "
	    "published median | published interval | published # | published p | published excluded | published hyp. "
	    "p / Holm |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
	    SB_N3A_MARGIN);
	for (int c = 8; c < SB_N3A_NCOMP; c++) {
		const struct sb_a8_n3a_comp *x = &res.comp[c];
		const struct sb_a8_n3a_pub *pb = &sb_a8_n3a_published[c];
		int h = x->hyp, first_row = x->arch == 0;
		char hp[64] = "", php[64] = "";
		if (first_row) {
			snprintf(hp, sizeof hp, "%.3g / %.3g", res.hyp_p[h], res.hyp_holm[h]);
			snprintf(php, sizeof php, "%s / %s", sb_a8_n3a_published_hyp[h].p_text,
			         sb_a8_n3a_published_hyp[h].holm_text);
		}
		n3_interval(iv, sizeof iv, x);
		n3_pub_interval(piv, sizeof piv, pb);
		mdf(md, "| H%d %s | %s | %.5g | %s | %d/%d | %.3g | %s | %s | %.5g | %s | %d/64 | %s | %s | %s |\n",
		    h + 1, sb_a8_n3a_hyp_desc[h], sb_n3a_arch_names[x->arch], x->median, iv, x->above, x->n, x->p,
		    x->excluded ? "yes" : "no", hp, pb->median, piv, pb->above, pb->p_text, pb->excluded ? "yes" : "no",
		    php);
	}
	mdf(md,
	    "\nVerdict rules (first that applies): BACKWARD_SUPPORTED_SYNTHETIC when context_pass and H1-H3 Holm <= "
	    "0.05 (%s); FORWARD_ONLY_SUPPORTED_SYNTHETIC when context_pass and H4-H6 Holm <= 0.05 (%s); "
	    "KILLED_FOR_REGISTERED_EPSILON when both densities have an excluded context component (%s) or some "
	    "backward and some forward component are excluded (%s); else INCONCLUSIVE.\n\n",
	    yes(res.backward_supported), yes(res.forward_supported), yes(res.killed_context),
	    yes(res.killed_mechanism));
	mdf(md,
	    "**N3-A verdict: %s** (published: %s). Whatever the verdict, mechanism_manuscript_eligible false and "
	    "real_transfer_still_required true.%s\n\n",
	    res.verdict, SB_A8_N3A_PUBLISHED_VERDICT, registered ? "" : " Not the registered design (see above).");
	mdf(md,
	    "Evaluations: %lld n3a.eval records read, %lld counted, %lld superseded by a later record of the same "
	    "unit and step.\n\n",
	    n3count.read, n3count.counted, n3count.superseded);
out:
	free(seeds);
	free(mce);
	free(fce);
	return rc;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
	sb_cli_init("sb-a8", argc, argv);
	struct sb_err err = {0};
	const char *md_path = NULL, *switch_path = NULL, *traj_path = NULL, *m2_path = NULL, *boot_opt = NULL;
	long long seed = -1, resamples = 20000;
	enum { O_MD = 256, O_SWITCH, O_SEED, O_RES, O_TRAJ, O_M2, O_INTERIM, O_HELP, O_VERSION };
	static const struct option lo[] = {{"md", 1, 0, O_MD},           {"switch-epochs", 1, 0, O_SWITCH},
	                                   {"seed", 1, 0, O_SEED},       {"resamples", 1, 0, O_RES},
	                                   {"trajectory", 1, 0, O_TRAJ}, {"m2", 1, 0, O_M2},
	                                   {"interim", 0, 0, O_INTERIM}, {"help", 0, 0, O_HELP},
	                                   {"version", 0, 0, O_VERSION}, {0, 0, 0, 0}};
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
		case O_INTERIM:
			n3_interim = 1;
			break;
		case O_SEED:
			if (sb_parse_int("--seed", optarg, 0, (long long)1 << 53, &seed, &err))
				sb_cli_usage_error("%s", err.msg);
			boot_opt = "--seed";
			break;
		case O_RES:
			if (sb_parse_int("--resamples", optarg, 1, 10000000, &resamples, &err))
				sb_cli_usage_error("%s", err.msg);
			boot_opt = "--resamples";
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
		sb_cli_usage_error("no analysis given (m1, m2, bottomk, lineardecay, m3map, m3 or n3a)");
	if (md_path) { /* where the report section goes must be writable before any analysis runs */
		char *dir = sb_path_dirname(md_path);
		struct sb_err e = {0};
		if (!dir || access(dir, W_OK) != 0) {
			SB_ERR(&e, SB_EIO, "--md %s: its directory %s cannot be written: %s", md_path, dir ? dir : "?",
			       strerror(errno));
			free(dir);
			sb_cli_die(&e);
		}
		free(dir);
	}
	const char *mode = argv[optind++];
	static const char *modes[] = {"m1", "m2", "bottomk", "lineardecay", "m3map", "m3", "n3a"};
	int which = 0;
	for (int i = 0; i < 7; i++)
		if (!strcmp(mode, modes[i]))
			which = i + 1;
	if (!which)
		sb_cli_usage_error("unknown analysis '%s' (m1, m2, bottomk, lineardecay, m3map, m3 or n3a)", mode);
	if (switch_path && which != 1 && which != 5)
		sb_cli_usage_error("--switch-epochs is an output of m1 and m3map only");
	if (n3_interim && which != 7)
		sb_cli_usage_error("--interim is an option of n3a only");
	if (boot_opt && which != 1 && which != 2 && which != 6)
		sb_cli_usage_error("%s is an option of m1, m2 and m3 (their bootstraps); %s has none", boot_opt, mode);
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
	if (which == 7 && nin > (int)(sizeof n3paths / sizeof n3paths[0]))
		sb_cli_usage_error("n3a reads at most %d files", (int)(sizeof n3paths / sizeof n3paths[0]));
	for (int i = 0; i < nin; i++) {
		int rc = which == 7 ? n3a_load(argv[optind + i], i, &in[i], &err)
		                    : load(argv[optind + i], i, &in[i], which == 6, &err);
		if (rc)
			sb_cli_die(&err);
	}
	if (next && (regular(traj_path, &err) || regular(m2_path, &err) || sb_input_hash(&in[nin], traj_path, &err) ||
	             sb_input_hash(&in[nin + 1], m2_path, &err)))
		sb_cli_die(&err);
	tests_to_latest();
	int nread = nruns;
	if (which != 7) { /* n3a has no runs: its evaluations' reruns are resolved in n3a() */
		if (select_runs(&err))
			sb_cli_die(&err);
		sb_progress(1, "%d files, %d runs, %d counted", nin, nread, nruns);
	}
	/* records are gathered and written when the analysis has succeeded: a data error
	 * found half-way leaves stdout empty, not a run.meta and some of the records */
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	struct sb_run_meta meta = {.device = "cpu", .threads = 1, .inputs = in, .n_inputs = nin + next};
	if (sb_record_run_meta(&w, &meta, &err))
		sb_cli_die(&err);
	struct md md = {0};
	int rc = which == 1   ? m1(&w, &md, switch_path, (uint64_t)seed, (int)resamples, &err)
	         : which == 2 ? m2(&w, &md, (uint64_t)seed, (int)resamples, &err)
	         : which == 3 ? bottomk(&w, &md, &err)
	         : which == 4 ? lineardecay(&w, &md, &err)
	         : which == 5 ? m3map(&w, &md, switch_path, traj_path, m2_path, &err)
	         : which == 6 ? m3(&w, &md, (uint64_t)seed, (int)resamples, &err)
	                      : n3a(&w, &md, &err);
	if (!rc && w.oom)
		rc = SB_ERR(&err, SB_EINTERNAL, "out of memory while writing the records");
	if (!rc && md_path)
		rc = sb_write_file_atomic(md_path, md.buf ? md.buf : "", md.len, &err);
	if (!rc && (fwrite(w.buf, 1, w.len, stdout) != w.len || fflush(stdout)))
		rc = SB_ERR(&err, SB_EIO, "stdout: write error");
	sb_jw_free(&w);
	free(md.buf);
	free(in);
	free(runs);
	free(n3);
	if (rc)
		sb_cli_die(&err);
	return sb_cli_finish(0);
}
