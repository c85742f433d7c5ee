/* sb-stats — paired statistics, Holm, the power condition, the A7 rule, tables and figures.
 * See usage() and docs/sb-stats.md. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hash.h"
#include "io.h"
#include "json.h"
#include "model.h"
#include "select.h"
#include "record.h"

static void usage(void)
{
	fputs("Usage: sb-stats [OPTIONS] RECORDS...\n"
	      "Paired statistics of sparse methods against a baseline, from NDJSON records.\n"
	      "\n"
	      "RECORDS are NDJSON files ('-' = stdin, once). Records read (schema v 1):\n"
	      "  eval.epoch    task, method, seed, epoch (0-based), val_accuracy; optional arch\n"
	      "                (default plain), tier (compact), cell_id, attention_entropy\n"
	      "  eval.done     the same identity, epochs, epochs_evaluated, train_status (sb-eval): a\n"
	      "                run whose train_status is not 'completed' is excluded (PROTOCOL A7); a\n"
	      "                later run that wins with epochs not evaluated leaves its seed out\n"
	      "  test.cell     task, method, seed, test_accuracy; optional arch, tier\n"
	      "  probe.result  model, task, method, probe_id (string or integer), correct (bool or 0/1)\n"
	      "  published.value  a published value to measure against: task, quantity (mean: a method's\n"
	      "                mean validation accuracy; delta: method - baseline; best_delta: the best\n"
	      "                of the sparse methods; budget_delta: the delta within the first 'budget'\n"
	      "                epochs; test_mean: a method's mean test accuracy), value, source, method\n"
	      "                (optional for best_delta); optional arch, tier, baseline (of differences:\n"
	      "                softmax), patience, supported (the published Holm mark, bool); compared\n"
	      "                only under the same --baseline and --patience; e.g.\n"
	      "                pipelines/published/study.ndjson (the study's published numbers)\n"
	      "Other kinds (run.meta, train.*, ...) are ignored. For one (task, arch, tier, method, seed)\n"
	      "the last cell_id read among the runs not excluded wins (a rerun supersedes an earlier\n"
	      "run, a failed rerun does not; both counted in stats.summary).\n"
	      "\n"
	      "Options:\n"
	      "  -b, --baseline NAME   baseline method of every paired difference (softmax)\n"
	      "  -f, --format FMT      stdout: ndjson (records, default), md, csv or tex (the tables)\n"
	      "  -o, --out DIR         also write DIR/stats.ndjson and every table as DIR/NAME.{md,csv,tex}\n"
	      "                        (NAME: table2 detail budget test test_detail probes probe_pairs\n"
	      "                        published)\n"
	      "  -p, --plot DIR        write DIR/budget.svg (difference vs epoch budget with CI bands, a\n"
	      "                        panel per task), DIR/curves.svg (validation accuracy by epoch) and,\n"
	      "                        with published values, DIR/published.svg (ours minus published)\n"
	      "  -p, --plot FILE.svg   the budget figure as FILE.svg, the others beside it as\n"
	      "                        FILE-curves.svg and FILE-published.svg\n"
	      "      --patience N      early stopping read from the epochs (PROTOCOL A4): stop after N\n"
	      "                        epochs without strict improvement; 0 = never (5)\n"
	      "  -s, --seed N          bootstrap seed (0)\n"
	      "      --resamples B     bootstrap resamples (10000)\n"
	      "      --level L         confidence level of every interval (0.95)\n"
	      "      --alpha A         Holm level for 'supported' and the * marks (0.05)\n"
	      "      --min-seeds N     skip comparisons with fewer paired seeds (2; the study used 10)\n"
	      "      --wilcoxon M      auto (exact when <= 50 non-zero differences), exact or approx (auto)\n"
	      "      --rule            apply the power floor and fit the leave-one-task-out threshold rule\n"
	      "                        of PROTOCOL A7 (see EXIT STATUS); a task enters when all six sparse\n"
	      "                        methods have at least --min-seeds paired seeds\n"
	      "      --all-pairs       probes: compare every pair of methods, not only each with the baseline\n"
	      "  -q, --quiet           no progress lines\n"
	      "      --help            this help;  --version  the version\n"
	      "\n"
	      "Analyses (per task, arch and tier; 'method' is every non-baseline method present):\n"
	      "  validation  per seed, the best epoch under --patience (first epoch of maximal val_accuracy\n"
	      "              among the epochs before the stop); differences over seeds present in both arms;\n"
	      "              two-sided paired t (PROTOCOL A7: n<2 -> p=1; sd=0 -> p=0 if mean!=0 else 1;\n"
	      "              mean=0 -> p=1), Wilcoxon signed-rank (zeros dropped; differences rounded to 1e-9\n"
	      "              for ranking), percentile bootstrap CI of the mean, Cohen's dz, Holm over the\n"
	      "              six sparse methods of the task (other methods: a family of their own);\n"
	      "              supported = Holm p < alpha; a task is sparse-helps when one of the six has\n"
	      "              mean > 0 and is supported.\n"
	      "  budgets     for E = 1..K (K = fewest epochs among the paired runs): best val_accuracy within\n"
	      "              the first E epochs; mean difference, bootstrap CI, t p; the sign change (first E\n"
	      "              from which the mean difference stays < 0; K+1 = none), the first negative E and\n"
	      "              PROTOCOL A8's switch epoch, each with a bootstrap CI over seeds.\n"
	      "  test        test.cell: the same paired statistics on test_accuracy.\n"
	      "  probes      Wilson interval per model and method (all tasks and per task); per model, each\n"
	      "              method against the baseline (or every pair) on the same (task, probe_id):\n"
	      "              difference in accuracy with Newcombe's paired score CI, exact McNemar p, Holm.\n"
	      "  published   for each published value of a task with records to measure it on: ours (the\n"
	      "              same quantity: at the best epoch, within the first E epochs for a budget,\n"
	      "              over the test reads for a test mean), our bootstrap CI, whether the\n"
	      "              published value lies inside it, and ours - published.\n"
	      "\n"
	      "Records written (stdout with --format ndjson, and DIR/stats.ndjson): run.meta, then\n"
	      "  stats.task, stats.paired, stats.budget, stats.sign_change (per task and method),\n"
	      "  stats.power, stats.rule_fold and stats.rule (with --rule), stats.probe_rate,\n"
	      "  stats.probe_paired, stats.published, and a closing stats.summary. Fields:\n"
	      "  docs/sb-stats.md.\n"
	      "\n"
	      "Exit status:\n"
	      "  0  done (with --rule: the rule succeeded: mean gain > 0, wins > losses and at least one\n"
	      "     non-softmax decision)\n"
	      "  2  usage error; with --rule: the power condition is not met (fewer than 3 sparse-helps\n"
	      "     tasks; no rule is fitted; outputs are still written)\n"
	      "  3  malformed input (file:line named); with --rule: the rule was fitted and failed\n"
	      "  4  I/O error\n"
	      "\n"
	      "Examples:\n"
	      "  sb-stats runs/*/val.ndjson > stats.ndjson\n"
	      "  sb-stats --format md --plot fig runs/*/val.ndjson test/test.ndjson\n"
	      "  sb-stats --rule --min-seeds 10 -o out runs/*/val.ndjson\n"
	      "  sb-stats -f md runs/*/val.ndjson pipelines/published/study.ndjson   # against the paper\n",
	      stdout);
}

enum {
	OPT_PATIENCE = 256,
	OPT_RESAMPLES,
	OPT_LEVEL,
	OPT_ALPHA,
	OPT_MIN_SEEDS,
	OPT_WILCOXON,
	OPT_RULE,
	OPT_ALL_PAIRS,
	OPT_HELP,
	OPT_VERSION
};

static const struct option LONGOPTS[] = {{"baseline", required_argument, NULL, 'b'},
                                         {"format", required_argument, NULL, 'f'},
                                         {"out", required_argument, NULL, 'o'},
                                         {"plot", required_argument, NULL, 'p'},
                                         {"patience", required_argument, NULL, OPT_PATIENCE},
                                         {"seed", required_argument, NULL, 's'},
                                         {"resamples", required_argument, NULL, OPT_RESAMPLES},
                                         {"level", required_argument, NULL, OPT_LEVEL},
                                         {"alpha", required_argument, NULL, OPT_ALPHA},
                                         {"min-seeds", required_argument, NULL, OPT_MIN_SEEDS},
                                         {"wilcoxon", required_argument, NULL, OPT_WILCOXON},
                                         {"rule", no_argument, NULL, OPT_RULE},
                                         {"all-pairs", no_argument, NULL, OPT_ALL_PAIRS},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"help", no_argument, NULL, OPT_HELP},
                                         {"version", no_argument, NULL, OPT_VERSION},
                                         {NULL, 0, NULL, 0}};

static void parse_opts(int argc, char **argv, struct opts *o)
{
	struct sb_err err = {0};
	long long v;
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":b:f:o:p:s:q", LONGOPTS, NULL)) != -1) {
		switch (ch) {
		case 'b':
			if (!*optarg)
				sb_cli_usage_error("--baseline needs a method name");
			o->baseline = canonical_method(optarg); /* as the records' method names */
			break;
		case 'f':
			if (strcmp(optarg, "md") && strcmp(optarg, "csv") && strcmp(optarg, "tex") &&
			    strcmp(optarg, "ndjson"))
				sb_cli_usage_error("invalid value for --format: '%s' (md, csv, tex or ndjson)", optarg);
			o->format = optarg;
			break;
		case 'o':
			o->out_dir = optarg;
			break;
		case 'p':
			o->plot_dir = optarg;
			break;
		case OPT_PATIENCE:
			if (sb_parse_int("--patience", optarg, 0, 1000000, &v, &err))
				sb_cli_usage_error("%s", err.msg);
			o->patience = (int)v;
			break;
		case 's':
			if (sb_parse_int("--seed", optarg, 0, 9007199254740991LL, &v, &err))
				sb_cli_usage_error("%s", err.msg);
			o->seed = (uint64_t)v;
			break;
		case OPT_RESAMPLES:
			if (sb_parse_int("--resamples", optarg, 1, 10000000, &v, &err))
				sb_cli_usage_error("%s", err.msg);
			o->resamples = (int)v;
			break;
		case OPT_LEVEL:
			if (sb_parse_double("--level", optarg, 0.5, 0.999999, &o->level, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case OPT_ALPHA:
			if (sb_parse_double("--alpha", optarg, 1e-12, 0.5, &o->alpha, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case OPT_MIN_SEEDS:
			if (sb_parse_int("--min-seeds", optarg, 1, 1000000, &v, &err))
				sb_cli_usage_error("%s", err.msg);
			o->min_seeds = (int)v;
			break;
		case OPT_WILCOXON:
			if (!strcmp(optarg, "auto"))
				o->wilcoxon = SB_WILCOXON_AUTO;
			else if (!strcmp(optarg, "exact"))
				o->wilcoxon = SB_WILCOXON_EXACT;
			else if (!strcmp(optarg, "approx"))
				o->wilcoxon = SB_WILCOXON_APPROX;
			else
				sb_cli_usage_error("invalid value for --wilcoxon: '%s' (auto, exact or approx)",
				                   optarg);
			break;
		case OPT_RULE:
			o->rule = 1;
			break;
		case OPT_ALL_PAIRS:
			o->all_pairs = 1;
			break;
		case 'q':
			sb_quiet = 1;
			break;
		case OPT_HELP:
			usage();
			exit(sb_cli_finish(0));
		case OPT_VERSION:
			sb_cli_version();
		case ':':
			sb_cli_bad_option(argv, 1);
		default:
			sb_cli_bad_option(argv, 0);
		}
	}
	if (optind >= argc)
		sb_cli_usage_error("no RECORDS given (use '-' for stdin)");
}

/* ---- inputs ---- */

struct input {
	const char *path;
	char *data; /* stdin only: its bytes */
	size_t n;
};

static int write_tables(const char *dir, struct table **t, int nt, struct sb_err *err)
{
	static const char *ext[3] = {"md", "csv", "tex"};
	for (int i = 0; i < nt; i++)
		for (int k = 0; k < 3; k++) {
			char name[256];
			snprintf(name, sizeof name, "%s.%s", t[i]->name, ext[k]);
			char *path = sb_path_join(dir, name);
			if (!path)
				return SB_ERR(err, SB_EINTERNAL, "out of memory");
			struct sb_atomic a;
			int rc = sb_atomic_open(&a, path, err);
			free(path);
			SB_TRY(rc);
			if (k == 0)
				table_write_md(t[i], a.f);
			else if (k == 1)
				table_write_csv(t[i], a.f);
			else
				table_write_tex(t[i], a.f);
			SB_TRY(sb_atomic_commit(&a, err));
		}
	return 0;
}

static void print_tables(const char *format, struct table **t, int nt)
{
	for (int i = 0; i < nt; i++) {
		if (i)
			fputc('\n', stdout);
		if (!strcmp(format, "md"))
			table_write_md(t[i], stdout);
		else if (!strcmp(format, "csv"))
			table_write_csv(t[i], stdout);
		else
			table_write_tex(t[i], stdout);
	}
}

/* The path of figure NAME under --plot ARG: ARG/NAME.svg, or with ARG a FILE.svg the budget
 * figure ARG itself and the others FILE-NAME.svg (malloc'd; NULL: out of memory) */
static char *plot_path(const char *arg, int file, const char *name)
{
	if (!file) {
		char nm[32];
		snprintf(nm, sizeof nm, "%s.svg", name);
		return sb_path_join(arg, nm);
	}
	if (!strcmp(name, "budget"))
		return strdup(arg);
	size_t n = strlen(arg) - 4;
	char *p = malloc(n + strlen(name) + 6);
	if (p)
		sprintf(p, "%.*s-%s.svg", (int)n, arg, name);
	return p;
}

int main(int argc, char **argv)
{
	sb_cli_init("sb-stats", argc, argv);
	struct opts o = {.baseline = "softmax",
	                 .format = "ndjson",
	                 .patience = 5,
	                 .seed = 0,
	                 .resamples = 10000,
	                 .alpha = 0.05,
	                 .min_seeds = 2,
	                 .wilcoxon = SB_WILCOXON_AUTO,
	                 .level = 0.95};
	parse_opts(argc, argv, &o);
	struct sb_err err = {0};

	/* inputs: hash every file for run.meta (stdin is read into memory and hashed) */
	int nin = argc - optind, saw_stdin = 0;
	struct input *in = calloc((size_t)nin, sizeof *in);
	struct sb_input *meta_in = calloc((size_t)nin, sizeof *meta_in);
	if (!in || !meta_in) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		sb_cli_die(&err);
	}
	for (int i = 0; i < nin; i++) {
		in[i].path = argv[optind + i];
		if (!strcmp(in[i].path, "-")) {
			if (saw_stdin++)
				sb_cli_usage_error("'-' (stdin) given more than once");
			if (sb_read_stream(stdin, "<stdin>", &in[i].data, &in[i].n, 0, &err))
				sb_cli_die(&err);
			meta_in[i].path = "-";
			sb_sha256_buf(in[i].data, in[i].n, meta_in[i].sha256);
			meta_in[i].size_bytes = in[i].n;
		} else if (sb_input_hash(&meta_in[i], in[i].path, &err)) {
			sb_cli_die(&err);
		}
	}

	struct data d;
	data_init(&d);
	for (int i = 0; i < nin; i++) {
		struct sb_ndjson_reader *r = NULL;
		FILE *mem = NULL;
		if (in[i].data) {
			mem = fmemopen(in[i].data, in[i].n ? in[i].n : 1, "rb");
			if (!mem || !(r = sb_ndjson_open_file(mem, "-", 0))) {
				SB_ERR(&err, SB_EINTERNAL, "cannot read stdin from memory");
				sb_cli_die(&err);
			}
			if (!in[i].n) { /* fmemopen of size 1 would read a stray byte */
				sb_ndjson_close(r);
				fclose(mem);
				continue;
			}
		} else if (sb_ndjson_open(in[i].path, &r, &err)) {
			sb_cli_die(&err);
		}
		int rc = data_load(&d, r, &err);
		sb_ndjson_close(r);
		if (mem)
			fclose(mem);
		if (rc)
			sb_cli_die(&err);
		sb_progress(0, "read %s (%ld records so far)", in[i].path, d.records);
	}
	if (data_check(&d, &err))
		sb_cli_die(&err);
	if (!d.n_cells && !d.n_tests && !d.n_probes)
		sb_cli_warn("no eval.epoch, test.cell or probe.result records in the input");
	else if (d.n_pubs && !d.n_cells)
		sb_cli_warn("published values read, but no eval.epoch records to compare them with");
	if (d.excluded_cells)
		sb_cli_warn("%d run(s) excluded: their eval.done says the training did not complete, or (for the "
		            "run that counts) not every epoch was evaluated (PROTOCOL A7); first: %s",
		            d.excluded_cells, d.excluded_example);
	if (d.superseded_cells)
		sb_cli_warn("%d cell(s) superseded by a later run of the same task/arch/tier/method/seed",
		            d.superseded_cells);
	if ((d.n_cells || d.n_tests) && strtab_find(&d.methods, o.baseline) < 0)
		sb_cli_warn("baseline method '%s' is absent: no paired comparison is possible", o.baseline);

	struct analysis a;
	if (analysis_run(&d, &o, &a, &err))
		sb_cli_die(&err);
	if (a.skipped)
		sb_cli_warn("%d comparison(s) skipped: fewer than %d paired seed(s)", a.skipped, o.min_seeds);

	/* records: run.meta first */
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	struct sb_run_meta meta = {.device = "cpu", .threads = 1, .inputs = meta_in, .n_inputs = nin};
	if (sb_record_run_meta(&w, &meta, &err) || report_records(&w, &d, &a, &o, &err))
		sb_cli_die(&err);
	int nt = 0;
	struct table **tables = report_tables(&d, &a, &o, &nt);
	if (!tables) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		sb_cli_die(&err);
	}

	if (o.out_dir) {
		char *p = sb_path_join(o.out_dir, "stats.ndjson");
		if (!p || sb_mkdir_p(o.out_dir, &err) || sb_write_file_atomic(p, w.buf, w.len, &err) ||
		    write_tables(o.out_dir, tables, nt, &err)) {
			free(p);
			sb_cli_die(&err);
		}
		free(p);
	}
	if (o.plot_dir) {
		/* --plot DIR: DIR/budget.svg, DIR/curves.svg, DIR/published.svg; --plot FILE.svg
		 * (DESIGN's synopsis): the budget figure there, the others beside it as
		 * FILE-curves.svg and FILE-published.svg */
		size_t pl = strlen(o.plot_dir);
		int file = pl > 4 && !strcmp(o.plot_dir + pl - 4, ".svg");
		char *dir = file ? sb_path_dirname(o.plot_dir) : strdup(o.plot_dir);
		if (!dir || sb_mkdir_p(dir, &err))
			sb_cli_die(&err);
		free(dir);
		if (a.n_val) {
			char *p = plot_path(o.plot_dir, file, "budget");
			if (!p || plot_budget(p, &d, &a, &o, &err))
				sb_cli_die(&err);
			free(p);
		}
		if (a.n_curves) {
			char *p = plot_path(o.plot_dir, file, "curves");
			if (!p || plot_curves(p, &d, &a, &o, &err))
				sb_cli_die(&err);
			free(p);
		}
		int npm = 0;
		for (int i = 0; i < a.n_pub; i++)
			npm += isfinite(a.pub[i].ours);
		if (npm) {
			char *p = plot_path(o.plot_dir, file, "published");
			if (!p || plot_published(p, &d, &a, &o, &err))
				sb_cli_die(&err);
			free(p);
		}
		if (!a.n_val && !a.n_curves)
			sb_cli_warn("--plot: no validation records, no figure written");
	}
	if (!strcmp(o.format, "ndjson"))
		fwrite(w.buf, 1, w.len, stdout);
	else
		print_tables(o.format, tables, nt);

	int rc = 0;
	if (o.rule && a.rule_incomplete)
		sb_cli_warn("%d task(s) left out of the rule: PROTOCOL A7 needs all six sparse methods, each with "
		            "at least --min-seeds paired seeds (first: %s)",
		            a.rule_incomplete, a.rule_incomplete_example);
	if (o.rule) {
		if (a.n_labelled < SB_RULE_MIN_LABELLED) {
			sb_cli_warn("power condition not met: %d task(s) carry the sparse-helps label, at least %d are "
			            "needed; no rule fitted",
			            a.n_labelled, SB_RULE_MIN_LABELLED);
			rc = SB_EUSAGE; /* PROTOCOL A7: exit 2 */
		} else {
			sb_cli_warn("rule %s: mean gain %+.6f, wins %d, losses %d, non-softmax decisions %d of %d",
			            a.rule.success ? "succeeded" : "failed", a.rule.mean_gain, a.rule.wins,
			            a.rule.losses, a.rule.non_softmax, a.rule.n_tasks);
			rc = a.rule.success ? 0 : SB_EDATA; /* PROTOCOL A7: exit 3 on failure */
		}
	}
	for (int i = 0; i < nt; i++)
		table_free(tables[i]);
	free(tables);
	sb_jw_free(&w);
	analysis_free(&a);
	data_free(&d);
	for (int i = 0; i < nin; i++)
		free(in[i].data);
	free(in);
	free(meta_in);
	return sb_cli_finish(rc);
}
