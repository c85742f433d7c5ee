/* sb-freeze — apply the predeclared selection rule to validation logs and
 * write selection.json with the hash of every input (PROTOCOL A6, DESIGN §5).
 *
 * The story: parse options; refuse to overwrite a selection without --force;
 * read and hash every validation log; keep the cells of the chosen tier and
 * architecture whose training completed (the row filter), then the later log's
 * cell of each (task, method, seed), if its every epoch was evaluated; per
 * cell, the validation accuracy at the best epoch under patience (or at a
 * fixed budget); per task, the top-k ratio of highest mean accuracy over at
 * least --min-seeds seeds (earlier ratio on ties); the test plan; seal the
 * payload with its canonical SHA-256; write it atomically; report on stdout.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "guard.h"
#include "hash.h"
#include "io.h"
#include "json.h"
#include "record.h"
#include "freeze_cells.h"
#include "freeze_m3.h"
#include "runsel.h"
#include "select.h"
#include "vallog.h"
#include "version.h"

static const char usage_text[] =
    "Usage: sb-freeze [--rule NAME] [--min-seeds N] [--patience N | --budget E] [--tier T] [--arch A]\n"
    "                 [-o selection.json] [--force] [-q] VAL.ndjson...\n"
    "       sb-freeze --rule m3_confirmation --switch-map FILE [--expect-cells N] [-o selection.json]\n"
    "                 [--force] [-q] VAL.ndjson...\n"
    "\n"
    "Apply the predeclared selection rule of PROTOCOL A6 to validation logs (RUN_DIR/val.ndjson,\n"
    "written by sb-eval) and freeze the result in selection.json, with the SHA-256 of every log read\n"
    "and the SHA-256 of the canonical JSON of the whole payload. sb-test reads the test split only\n"
    "after checking all of it.\n"
    "\n"
    "Rule topk_mean_val_acc (the default): per task, among topk_softmax_0125,\n"
    "topk_softmax_025 and topk_softmax_05, the ratio with the highest mean validation accuracy over\n"
    "its seeds, counting only ratios with at least --min-seeds seeds; ties go to the earlier ratio in\n"
    "that order (strict >). A cell's validation accuracy is the one at its best epoch under early\n"
    "stopping with --patience (first epoch of maximal accuracy among the epochs before the stop,\n"
    "PROTOCOL A4), or with --budget E the accuracy after exactly E epochs. Only cells whose training\n"
    "completed take part (a failed rerun displaces nothing); among those, the later log on the\n"
    "command line wins when two hold the same task, method and seed, and the winner must have every\n"
    "epoch evaluated (else that seed has no cell).\n"
    "\n"
    "Rule m3_confirmation (PROTOCOL A8 M3, our reading; docs/sb-freeze.md): the confirmation grid's\n"
    "logs (both blocks) against the switch map of sb-a8 m3map. Planned cells: the map's (task, arch,\n"
    "tier) groups x softmax, topk_softmax_025, mechanistic_switch and the map's simple schedule x\n"
    "the seeds of the logs (and exactly --expect-cells N of them). Status\n"
    "M3_VALIDATION_FROZEN_OFFICIAL_TEST_AUTHORIZED when every planned cell completed and every\n"
    "switching cell's cell.json has the map's switch_epoch; else M3_SWITCH_MAP_MISMATCH or\n"
    "M3_VALIDATION_INCOMPLETE with the reasons. The selection (status, reasons, the map's path and\n"
    "SHA-256 in the hashed payload; every confirmation cell in the test plan) is written whatever\n"
    "the status; sb-test reads only an authorised one whose map still hashes the same.\n"
    "\n"
    "Options:\n"
    "  --rule NAME       selection rule (topk_mean_val_acc, m3_confirmation)\n"
    "  --switch-map FILE (m3_confirmation) the switch map\n"
    "  --expect-cells N  (m3_confirmation) the number of planned cells required\n"
    "  --min-seeds N     seeds a ratio needs to be eligible (default 10)\n"
    "  --patience N      early-stopping patience for the best epoch (default 5; 0: no stopping)\n"
    "  --budget E        use the accuracy after exactly E epochs instead of the best epoch\n"
    "  --tier T          use only cells of tier T (default: the logs must hold one tier)\n"
    "  --arch A          use only cells of architecture A (default: the logs must hold one)\n"
    "  -o FILE           where to write the selection (default selection.json)\n"
    "  --force           replace an existing selection; the replacement is recorded in the new one\n"
    "  -q                no progress lines on stderr\n"
    "  --help            this text;  --version  the version\n"
    "\n"
    "Written: FILE (atomically; indented JSON): kind \"freeze.selection\", v 1, schema 1, program,\n"
    "  version, argv, frozen_at (RFC 3339 UTC), frozen_at_unix_s, newest_validation_log_mtime_unix_s,\n"
    "  rule {name, methods, min_seeds, basis, patience, budget_epochs, tie_break, tier, arch},\n"
    "  forced, replaced (with --force: the replaced file's SHA-256, payload hash and test reads),\n"
    "  selected {TASK: {topk_method, val_accuracy, n_seeds, seeds}}, unselected [{task, reason}],\n"
    "  all_topk_validation [{task, method, val_accuracy, n_seeds, seeds, eligible}],\n"
    "  cells [{cell_id, task, method, seed, tier, arch, epochs, included, reason, selected_epoch,\n"
    "  val_accuracy, log}], test_plan [{task, method, seed, cell_id, epochs, checkpoint_sha256}],\n"
    "  test_plan_missing [{task, method, seed}], validation_logs [{path (relative to FILE's\n"
    "  directory), sha256, size_bytes, mtime_unix_s, cells_used}], and last \"sha256\": the SHA-256\n"
    "  of json.dumps(payload, sort_keys=True, separators=(\",\",\":\")) of every other member.\n"
    "stdout: run.meta, then one freeze.selection record {path, sha256, file_sha256, forced,\n"
    "  selected, n_cells, n_excluded, test_plan_size, test_plan_missing}.\n"
    "\n"
    "Exit status: 0 frozen; 1 refused: FILE exists and --force was not given, or no task has an\n"
    "eligible ratio (nothing written); 2 usage; 3 bad input (a malformed log);\n"
    "4 I/O error (a log that cannot be read); 5 internal error. (The study's freeze exited 2 on an existing selection; here 2 is\n"
    "reserved for usage errors and a refusal is 1.)\n"
    "\n"
    "Examples:\n"
    "  sb-freeze -o study/selection.json runs/*/val.ndjson\n"
    "  sb-freeze --tier compact --min-seeds 3 --budget 30 -o sel.json runs/*/val.ndjson\n";

static _Noreturn void usage(void)
{
	fputs(usage_text, stdout);
	exit(sb_cli_finish(0));
}

static _Noreturn void die(const struct sb_err *e)
{
	sb_cli_die(e);
}

struct opts {
	const char *rule, *tier, *arch, *out, *switch_map;
	long long min_seeds, patience, budget, expect_cells;
	int patience_set, force, topk_opt; /* topk_opt: an option of rule topk_mean_val_acc given */
};

static const char *tier_of(const struct sb_val_cell *c)
{
	return c->tier;
}
static const char *arch_of(const struct sb_val_cell *c)
{
	return c->arch;
}

/* With no --tier (--arch), every cell must share one value; returns it or dies. */
static const char *sole_value(struct sb_vallog *logs, int n, const char *(*get)(const struct sb_val_cell *),
                              const char *opt)
{
	const char *one = NULL;
	for (int i = 0; i < n; i++)
		for (size_t j = 0; j < logs[i].n_cells; j++) {
			const char *v = get(&logs[i].cells[j]);
			if (!one)
				one = v;
			else if (strcmp(one, v) != 0)
				sb_cli_usage_error(
				    "the validation logs hold cells of %s '%s' and '%s': choose one with %s", opt + 2,
				    one, v, opt);
		}
	return one;
}

/* Which cells take part, and the order in which they are judged: lib/freeze_cells.h. */

/* A log modified after the freeze's own time (clock skew, or a log still being written):
 * exit 3 naming the newest such log, its time and how far ahead it is. */
static _Noreturn void die_future_log(const struct sb_vallog *logs, int n_logs, double frozen_unix)
{
	int k = 0;
	for (int i = 1; i < n_logs; i++)
		if (logs[i].mtime > logs[k].mtime)
			k = i;
	int ahead = 0;
	for (int i = 0; i < n_logs; i++)
		ahead += logs[i].mtime > frozen_unix;
	struct sb_err err = {0};
	SB_ERR(&err, SB_EDATA,
	       "%s: modified %.1f s in the future (clock skew?; %d log(s) ahead of the clock): cannot freeze",
	       logs[k].path, logs[k].mtime - frozen_unix, ahead);
	die(&err);
}

/* the "replaced" member: the selection that --force replaced, or null */
static void write_replaced(struct sb_jw *w, const char *old_file_sha, const struct sb_json *old, int old_reads)
{
	if (old_file_sha[0]) {
		sb_jw_key(w, "replaced");
		sb_jw_obj(w);
		sb_jw_kstr(w, "file_sha256", old_file_sha);
		const char *osha = sb_json_str(sb_json_get(old, "sha256"), NULL);
		if (osha)
			sb_jw_kstr(w, "sha256", osha);
		else
			sb_jw_knull(w, "sha256");
		const char *ofz = sb_json_str(sb_json_get(old, "frozen_at"), NULL);
		if (ofz)
			sb_jw_kstr(w, "frozen_at", ofz);
		else
			sb_jw_knull(w, "frozen_at");
		if (old_reads >= 0)
			sb_jw_kint(w, "test_reads", old_reads);
		else
			sb_jw_knull(w, "test_reads");
		sb_jw_obj_end(w);
	} else {
		sb_jw_knull(w, "replaced");
	}
}

/* ---------------------------------------------------------------- rule m3_confirmation */

/* The selection's first members, both rules: kind, v, schema, how it was made, when, the
 * newest log's time, and the rule object opened with its name (the caller adds the rest). */
static void selection_head(struct sb_jw *w, int argc, char **argv, const char *frozen_at, double frozen_unix,
                           double newest, const char *rule)
{
	sb_jw_init(w, NULL);
	sb_jw_record(w, "freeze.selection", 1);
	sb_jw_kint(w, "schema", 1);
	sb_jw_kstr(w, "program", sb_prog);
	sb_jw_kstr(w, "version", SB_VERSION);
	sb_jw_key(w, "argv");
	sb_jw_arr(w);
	for (int i = 0; i < argc; i++)
		sb_jw_str(w, argv[i]);
	sb_jw_arr_end(w);
	sb_jw_kstr(w, "frozen_at", frozen_at);
	sb_jw_kf64(w, "frozen_at_unix_s", frozen_unix);
	sb_jw_kf64(w, "newest_validation_log_mtime_unix_s", newest);
	sb_jw_key(w, "rule");
	sb_jw_obj(w);
	sb_jw_kstr(w, "name", rule);
}

/* the "validation_logs" member: each log with its path relative to the selection's
 * directory, hash, size, time and how many cells of it the selection used */
static void write_logs(struct sb_jw *w, const char *sel_dir, const struct sb_vallog *logs, int n_logs,
                       const int *cells_used)
{
	struct sb_err err = {0};
	sb_jw_key(w, "validation_logs");
	sb_jw_arr(w);
	for (int i = 0; i < n_logs; i++) {
		char *rel;
		if (sb_path_relative(sel_dir, logs[i].path, &rel, &err))
			die(&err);
		sb_jw_obj(w);
		sb_jw_kstr(w, "path", rel);
		sb_jw_kstr(w, "sha256", logs[i].sha256);
		sb_jw_kint(w, "size_bytes", (int64_t)logs[i].size_bytes);
		sb_jw_kf64(w, "mtime_unix_s", logs[i].mtime);
		sb_jw_kint(w, "cells_used", cells_used[i]);
		sb_jw_obj_end(w);
		free(rel);
	}
	sb_jw_arr_end(w);
}

/* Seal the payload (PROTOCOL A6 step 5: canonical-JSON SHA-256 as its last member) and write
 * it atomically to OUT, refusing when a selection appeared there meanwhile (unless FORCE);
 * HEX gets the payload hash, FILE_HEX the file's. */
static void seal_write(const struct sb_jw *w, const char *out, int force, char hex[SB_SHA256_HEX],
                       char file_hex[SB_SHA256_HEX])
{
	struct sb_err err = {0};
	char *text;
	size_t text_len;
	if (sb_selection_seal(w->buf, w->len, &text, &text_len, hex, &err))
		die(&err);
	/* without --force, a selection that appeared while we worked is not replaced */
	if (force ? sb_write_file_atomic(out, text, text_len, &err) : sb_write_file_new(out, text, text_len, &err)) {
		if (err.code == SB_EVERDICT)
			SB_ERR(&err, SB_EVERDICT, "%s: a selection appeared while freezing; refusing to replace it", out);
		die(&err);
	}
	sb_sha256_buf(text, text_len, file_hex);
	free(text);
}

static int m3_freeze(const struct opts *o, int argc, char **argv, struct sb_vallog *logs, int n_logs,
                     struct sb_input *inputs, double newest, const char *old_file_sha, const struct sb_json *old,
                     int old_reads)
{
	struct sb_err err = {0};
	struct sb_m3_map map;
	struct sb_m3 d;
	if (sb_m3_map_read(o->switch_map, &map, &err) || sb_m3_derive(logs, n_logs, &map, o->expect_cells, &d, &err))
		die(&err);
	for (size_t i = 0; i < d.nwarnings; i++)
		sb_cli_warn("%s", d.warnings[i]);
	/* time of the freeze, after every log was read */
	char frozen_at[32];
	double frozen_unix;
	sb_time_rfc3339(frozen_at, &frozen_unix);
	if (newest > frozen_unix)
		die_future_log(logs, n_logs, frozen_unix);
	char *sel_dir = sb_path_dirname(o->out), *map_rel = NULL;
	if (!sel_dir) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		die(&err);
	}
	if (sb_mkdir_p(sel_dir, &err) || sb_path_relative(sel_dir, o->switch_map, &map_rel, &err))
		die(&err);

	struct sb_jw w;
	selection_head(&w, argc, argv, frozen_at, frozen_unix, newest, o->rule);
	sb_jw_key(&w, "methods");
	sb_jw_arr(&w);
	for (int m = 0; m < 4; m++)
		sb_jw_str(&w, d.methods[m]);
	sb_jw_arr_end(&w);
	sb_jw_key(&w, "seeds");
	sb_jw_arr(&w);
	for (size_t s = 0; s < d.nseeds; s++)
		sb_jw_int(&w, d.seeds[s]);
	sb_jw_arr_end(&w);
	sb_jw_kstr(&w, "basis", "full_budget");
	sb_jw_kint(&w, "planned_cells", (int64_t)d.planned);
	if (o->expect_cells)
		sb_jw_kint(&w, "expected_cells", o->expect_cells);
	else
		sb_jw_knull(&w, "expected_cells");
	sb_jw_obj_end(&w);
	sb_jw_kstr(&w, "status", d.status);
	sb_jw_key(&w, "status_reasons");
	sb_jw_arr(&w);
	for (size_t i = 0; i < d.nreasons; i++)
		sb_jw_str(&w, d.reasons[i]);
	sb_jw_arr_end(&w);
	sb_jw_key(&w, "switch_map");
	sb_jw_obj(&w);
	sb_jw_kstr(&w, "path", map_rel);
	sb_jw_kstr(&w, "sha256", map.sha256);
	sb_jw_kint(&w, "lines", (int64_t)map.n);
	sb_jw_kstr(&w, "simple_schedule", map.simple);
	sb_jw_obj_end(&w);
	sb_jw_kbool(&w, "forced", o->force && old_file_sha[0]);
	write_replaced(&w, old_file_sha, old, old_reads);
	sb_jw_key(&w, "cells");
	sb_jw_raw(&w, d.cells_json.buf, d.cells_json.len);
	sb_jw_key(&w, "test_plan");
	sb_jw_raw(&w, d.plan_json.buf, d.plan_json.len);
	sb_jw_key(&w, "test_plan_missing");
	sb_jw_raw(&w, d.missing_json.buf, d.missing_json.len);
	write_logs(&w, sel_dir, logs, n_logs, d.cells_used);
	sb_jw_obj_end(&w);
	if (w.oom) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		die(&err);
	}
	char hex[SB_SHA256_HEX], file_hex[SB_SHA256_HEX];
	seal_write(&w, o->out, o->force, hex, file_hex);
	struct sb_jw out;
	sb_jw_init(&out, stdout);
	struct sb_input *ins = calloc((size_t)n_logs + 1, sizeof *ins);
	if (!ins) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		die(&err);
	}
	memcpy(ins, inputs, (size_t)n_logs * sizeof *ins);
	ins[n_logs].path = o->switch_map;
	memcpy(ins[n_logs].sha256, map.sha256, SB_SHA256_HEX);
	ins[n_logs].size_bytes = map.size_bytes;
	struct sb_run_meta meta = {.inputs = ins, .n_inputs = n_logs + 1};
	if (sb_record_run_meta(&out, &meta, &err))
		die(&err);
	sb_jw_record(&out, "freeze.selection", 1);
	sb_jw_kstr(&out, "path", o->out);
	sb_jw_kstr(&out, "sha256", hex);
	sb_jw_kstr(&out, "file_sha256", file_hex);
	sb_jw_kbool(&out, "forced", o->force && old_file_sha[0]);
	sb_jw_kstr(&out, "rule", o->rule);
	sb_jw_kstr(&out, "status", d.status);
	sb_jw_kint(&out, "status_reasons", (int64_t)d.nreasons);
	sb_jw_kstr(&out, "switch_map_sha256", map.sha256);
	sb_jw_kint(&out, "planned_cells", (int64_t)d.planned);
	sb_jw_kint(&out, "n_cells", (int64_t)d.nc);
	sb_jw_kint(&out, "n_excluded", (int64_t)d.n_excluded);
	sb_jw_kint(&out, "test_plan_size", (int64_t)d.plan_n);
	sb_jw_kint(&out, "test_plan_missing", (int64_t)d.plan_missing);
	sb_jw_obj_end(&out);
	if (sb_jw_line(&out, &err))
		die(&err);
	if (strcmp(d.status, SB_M3_AUTHORIZED)) {
		sb_cli_warn("%s: status %s: the test read will be refused (%zu reason(s); the first: %s)", o->out,
		            d.status, d.nreasons, d.nreasons ? d.reasons[0] : "-");
	} else if (!sb_quiet)
		fprintf(stderr,
		        "sb-freeze: froze %zu confirmation cells into %s, status %s (payload SHA-256 %.16s...)\n",
		        d.plan_n, o->out, d.status, hex);
	free(ins);
	sb_jw_free(&out);
	sb_jw_free(&w);
	free(sel_dir);
	free(map_rel);
	sb_m3_free(&d);
	sb_m3_map_free(&map);
	return sb_cli_finish(0);
}

int main(int argc, char **argv)
{
	sb_cli_init("sb-freeze", argc, argv);
	struct opts o = {.rule = "topk_mean_val_acc", .out = "selection.json", .min_seeds = 10, .patience = 5};
	struct sb_err err = {0};
	enum { O_RULE = 256, O_MIN, O_PAT, O_BUDGET, O_TIER, O_ARCH, O_FORCE, O_MAP, O_EXPECT, O_HELP, O_VERSION };
	static const struct option lo[] = {
	    {"rule", 1, 0, O_RULE},     {"min-seeds", 1, 0, O_MIN},   {"patience", 1, 0, O_PAT},
	    {"budget", 1, 0, O_BUDGET}, {"tier", 1, 0, O_TIER},       {"arch", 1, 0, O_ARCH},
	    {"force", 0, 0, O_FORCE},   {"switch-map", 1, 0, O_MAP},  {"expect-cells", 1, 0, O_EXPECT},
	    {"help", 0, 0, O_HELP},     {"version", 0, 0, O_VERSION}, {0, 0, 0, 0}};
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:q", lo, NULL)) != -1) {
		switch (c) {
		case O_RULE:
			o.rule = optarg;
			break;
		case O_MIN:
			if (sb_parse_int("--min-seeds", optarg, 1, 1000000, &o.min_seeds, &err))
				sb_cli_usage_error("%s", err.msg);
			o.topk_opt = 1;
			break;
		case O_MAP:
			o.switch_map = optarg;
			break;
		case O_EXPECT:
			if (sb_parse_int("--expect-cells", optarg, 1, 100000000, &o.expect_cells, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case O_PAT:
			if (sb_parse_int("--patience", optarg, 0, 1000000, &o.patience, &err))
				sb_cli_usage_error("%s", err.msg);
			o.patience_set = 1;
			o.topk_opt = 1;
			break;
		case O_BUDGET:
			if (sb_parse_int("--budget", optarg, 1, 1000000, &o.budget, &err))
				sb_cli_usage_error("%s", err.msg);
			o.topk_opt = 1;
			break;
		case O_TIER:
			o.tier = optarg;
			o.topk_opt = 1;
			break;
		case O_ARCH:
			o.arch = optarg;
			o.topk_opt = 1;
			break;
		case O_FORCE:
			o.force = 1;
			break;
		case 'o':
			o.out = optarg;
			break;
		case 'q':
			sb_quiet = 1;
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
	int m3 = strcmp(o.rule, "m3_confirmation") == 0;
	if (strcmp(o.rule, "topk_mean_val_acc") != 0 && !m3)
		sb_cli_usage_error("unknown rule '%s' (known: topk_mean_val_acc, m3_confirmation)", o.rule);
	if (m3 && !o.switch_map)
		sb_cli_usage_error("rule m3_confirmation needs --switch-map FILE (sb-a8 m3map's switch map)");
	if (m3 && o.topk_opt)
		sb_cli_usage_error(
		    "--min-seeds, --patience, --budget, --tier and --arch belong to rule topk_mean_val_acc "
		    "(m3_confirmation takes every confirmation cell at its full budget)");
	if (!m3 && (o.switch_map || o.expect_cells))
		sb_cli_usage_error("--switch-map and --expect-cells belong to rule m3_confirmation");
	if (o.budget && o.patience_set)
		sb_cli_usage_error("--patience and --budget exclude each other (a fixed budget has no early stopping)");
	int n_logs = argc - optind;
	if (n_logs < 1)
		sb_cli_usage_error("no validation logs given");
	for (int i = optind; i < argc; i++)
		if (strcmp(argv[i], "-") == 0)
			sb_cli_usage_error(
			    "validation logs must be files ('-' cannot be re-hashed before the test read)");

	/* 1. never replace a selection silently */
	struct sb_json *old = NULL;
	char old_file_sha[SB_SHA256_HEX] = "";
	int old_reads = 0;
	if (sb_file_exists(o.out)) {
		if (!o.force) {
			SB_ERR(&err, SB_EVERDICT,
			       "%s: a selection already exists; refusing to replace it (pass --force to replace it, "
			       "which the new selection records)",
			       o.out);
			die(&err);
		}
		char *buf;
		size_t len;
		struct stat st; /* read to record its hash: a FIFO would block */
		if (stat(o.out, &st) == 0 && !S_ISREG(st.st_mode)) {
			SB_ERR(&err, SB_EIO, "%s: not a regular file: refusing to replace it", o.out);
			die(&err);
		}
		if (sb_read_file(o.out, &buf, &len, 0, &err))
			die(&err);
		sb_sha256_buf(buf, len, old_file_sha);
		struct sb_err ignore = {0};
		if (sb_json_parse(buf, len, &old, &ignore))
			old = NULL; /* a damaged selection is replaced too; its file hash is recorded */
		free(buf);
		char *ledger = sb_guard_ledger_path(o.out);
		int same;
		if (!ledger || sb_guard_reads(ledger, "", &old_reads, &same, NULL, &ignore))
			old_reads = -1; /* unknown: the ledger is damaged */
		free(ledger);
	}

	/* 2. read and hash every log */
	struct sb_vallog *logs = calloc((size_t)n_logs, sizeof *logs);
	struct sb_input *inputs = calloc((size_t)n_logs, sizeof *inputs);
	if (!logs || !inputs) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		die(&err);
	}
	double newest = -INFINITY;
	for (int i = 0; i < n_logs; i++) {
		const char *p = argv[optind + i];
		sb_progress(i + 1 == n_logs, "reading validation logs: %d/%d", i + 1, n_logs);
		if (sb_vallog_read(p, &logs[i], &err))
			die(&err);
		inputs[i].path = p;
		memcpy(inputs[i].sha256, logs[i].sha256, SB_SHA256_HEX);
		inputs[i].size_bytes = logs[i].size_bytes;
		if (logs[i].mtime > newest)
			newest = logs[i].mtime;
	}
	if (m3) {
		int rc = m3_freeze(&o, argc, argv, logs, n_logs, inputs, newest, old_file_sha, old, old_reads);
		for (int i = 0; i < n_logs; i++)
			sb_vallog_free(&logs[i]);
		free(logs);
		free(inputs);
		sb_json_free(old);
		return rc;
	}
	const char *tier = o.tier ? o.tier : sole_value(logs, n_logs, tier_of, "--tier");
	const char *arch = o.arch ? o.arch : sole_value(logs, n_logs, arch_of, "--arch");

	/* 3. the cells of this tier and architecture, judged in the rule's order (lib/freeze_cells.h) */
	struct sb_fz_cell *cells;
	size_t nc;
	int *cells_used = calloc((size_t)n_logs, sizeof *cells_used);
	if (!cells_used) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		die(&err);
	}
	if (sb_fz_topk_cells(logs, n_logs, tier, arch, (int)o.patience, o.budget, &cells, &nc, &err))
		die(&err);
	for (size_t k = 0; k < nc; k++) {
		const struct sb_fz_cell *late = &cells[k], *early = late->supersedes >= 0 ? &cells[late->supersedes] : NULL;
		if (early)
			sb_cli_warn("%s: cell %s superseded by cell %s of the later log %s", logs[early->log].path,
			            early->vc->cell_id, late->vc->cell_id, logs[late->log].path);
	}
	size_t n_excluded = 0;
	for (size_t k = 0; k < nc; k++) {
		const struct sb_fz_cell *ce = &cells[k];
		const struct sb_val_cell *vc = ce->vc;
		if (ce->disp == SB_RUNSEL_FILTERED || ce->disp == SB_RUNSEL_WINNER_NOT_WHOLE)
			sb_cli_warn("%s: cell %s excluded: %s", logs[ce->log].path, vc->cell_id, ce->reason);
		if (!ce->included) {
			n_excluded++;
		} else {
			cells_used[ce->log]++;
			char note[4600];
			if (sb_fz_null_epochs_note(logs[ce->log].path, vc, note, sizeof note))
				sb_cli_warn("%s", note);
		}
	}

	/* 4. the rule */
	struct sb_selection sel;
	if (sb_fz_topk_select(cells, nc, (int)o.min_seeds, &sel, &err))
		die(&err);
	int n_chosen = 0;
	for (size_t t = 0; t < sel.n_tasks; t++)
		n_chosen += sel.tasks[t].chosen >= 0;
	if (n_chosen == 0) {
		SB_ERR(&err, SB_EVERDICT,
		       "no task has a top-k ratio with at least %lld seeds of completed cells (tier %s, arch %s): "
		       "nothing frozen",
		       o.min_seeds, tier ? tier : "-", arch ? arch : "-");
		die(&err);
	}

	/* 5. the time of the freeze, after every log was read */
	char frozen_at[32];
	double frozen_unix;
	sb_time_rfc3339(frozen_at, &frozen_unix);
	if (newest > frozen_unix)
		die_future_log(logs, n_logs, frozen_unix);

	/* 6. the payload (paths relative to the selection's directory, made if missing) */
	char *sel_dir = sb_path_dirname(o.out);
	if (!sel_dir) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		die(&err);
	}
	if (sb_mkdir_p(sel_dir, &err))
		die(&err);
	struct sb_jw w;
	selection_head(&w, argc, argv, frozen_at, frozen_unix, newest, o.rule);
	sb_jw_key(&w, "methods");
	sb_jw_arr(&w);
	for (int j = 0; j < 3; j++)
		sb_jw_str(&w, sb_topk_methods[j]);
	sb_jw_arr_end(&w);
	sb_jw_kint(&w, "min_seeds", o.min_seeds);
	sb_jw_kstr(&w, "basis", o.budget ? "fixed_budget" : "best_epoch_patience");
	if (o.budget) {
		sb_jw_knull(&w, "patience");
		sb_jw_kint(&w, "budget_epochs", o.budget);
	} else {
		sb_jw_kint(&w, "patience", o.patience);
		sb_jw_knull(&w, "budget_epochs");
	}
	sb_jw_kstr(&w, "tie_break", "earlier ratio in the order of methods (strict >)");
	if (tier)
		sb_jw_kstr(&w, "tier", tier);
	else
		sb_jw_knull(&w, "tier");
	if (arch)
		sb_jw_kstr(&w, "arch", arch);
	else
		sb_jw_knull(&w, "arch");
	sb_jw_obj_end(&w);
	sb_jw_kbool(&w, "forced", o.force && old_file_sha[0]);
	write_replaced(&w, old_file_sha, old, old_reads);
	sb_jw_key(&w, "selected");
	sb_jw_obj(&w);
	for (size_t t = 0; t < sel.n_tasks; t++) {
		if (sel.tasks[t].chosen < 0)
			continue;
		const struct sb_sel_cand *cd = &sel.cands[sel.tasks[t].chosen];
		sb_jw_key(&w, sel.tasks[t].task);
		sb_jw_obj(&w);
		sb_jw_kstr(&w, "topk_method", cd->method);
		sb_jw_kf64(&w, "val_accuracy", cd->val_accuracy);
		sb_jw_kint(&w, "n_seeds", cd->n_seeds);
		sb_jw_key(&w, "seeds");
		sb_jw_arr(&w);
		for (int s = 0; s < cd->n_seeds; s++)
			sb_jw_int(&w, cd->seeds[s]);
		sb_jw_arr_end(&w);
		sb_jw_obj_end(&w);
	}
	sb_jw_obj_end(&w);
	sb_jw_key(&w, "unselected");
	sb_jw_arr(&w);
	for (size_t t = 0; t < sel.n_tasks; t++)
		if (sel.tasks[t].chosen < 0) {
			sb_jw_obj(&w);
			sb_jw_kstr(&w, "task", sel.tasks[t].task);
			sb_jw_kstr(&w, "reason", sel.tasks[t].reason);
			sb_jw_obj_end(&w);
			sb_cli_warn("task %s: not selected: %s", sel.tasks[t].task, sel.tasks[t].reason);
		}
	sb_jw_arr_end(&w);
	sb_jw_key(&w, "all_topk_validation");
	sb_jw_arr(&w);
	for (size_t i = 0; i < sel.n_cands; i++) {
		const struct sb_sel_cand *cd = &sel.cands[i];
		sb_jw_obj(&w);
		sb_jw_kstr(&w, "task", cd->task);
		sb_jw_kstr(&w, "method", cd->method);
		sb_jw_kf64(&w, "val_accuracy", cd->val_accuracy);
		sb_jw_kint(&w, "n_seeds", cd->n_seeds);
		sb_jw_key(&w, "seeds");
		sb_jw_arr(&w);
		for (int s = 0; s < cd->n_seeds; s++)
			sb_jw_int(&w, cd->seeds[s]);
		sb_jw_arr_end(&w);
		sb_jw_kbool(&w, "eligible", cd->eligible);
		sb_jw_obj_end(&w);
	}
	sb_jw_arr_end(&w);
	sb_jw_key(&w, "cells");
	sb_jw_arr(&w);
	for (size_t k = 0; k < nc; k++)
		sb_fz_topk_cell_write(&w, &cells[k]);
	sb_jw_arr_end(&w);
	/* the test plan: PROTOCOL A6's methods plus the chosen ratio, for the chosen ratio's seeds */
	size_t plan_n = 0, plan_missing = 0;
	for (int pass = 0; pass < 2; pass++) {
		sb_jw_key(&w, pass == 0 ? "test_plan" : "test_plan_missing");
		sb_jw_arr(&w);
		for (size_t t = 0; t < sel.n_tasks; t++) {
			if (sel.tasks[t].chosen < 0)
				continue;
			const struct sb_sel_cand *cd = &sel.cands[sel.tasks[t].chosen];
			for (int m = 0; m < 5; m++) {
				const char *method = m < 4 ? sb_test_methods[m] : cd->method;
				for (int s = 0; s < cd->n_seeds; s++) {
					const struct sb_val_epoch *full;
					const struct sb_fz_cell *hit =
					    sb_fz_plan_cell(cells, nc, cd->task, method, cd->seeds[s], &full);
					if (pass == 0 && full) {
						sb_jw_obj(&w);
						sb_fz_key_cell(&w, cd->task, method, cd->seeds[s]);
						sb_jw_kstr(&w, "cell_id", hit->vc->cell_id);
						sb_jw_kint(&w, "epochs", hit->vc->epochs);
						sb_jw_kstr(&w, "checkpoint_sha256", full->checkpoint_sha256);
						sb_jw_obj_end(&w);
						plan_n++;
					} else if (pass == 1 && !full) {
						sb_jw_obj(&w);
						sb_fz_key_cell(&w, cd->task, method, cd->seeds[s]);
						sb_jw_obj_end(&w);
						plan_missing++;
						sb_cli_warn("task %s: no completed validation log for method %s seed "
						            "%lld: it will not be part of the test read",
						            cd->task, method, (long long)cd->seeds[s]);
					}
				}
			}
		}
		sb_jw_arr_end(&w);
	}
	write_logs(&w, sel_dir, logs, n_logs, cells_used);
	sb_jw_obj_end(&w);
	if (w.oom) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		die(&err);
	}

	/* 7. seal and write */
	char hex[SB_SHA256_HEX], file_hex[SB_SHA256_HEX];
	seal_write(&w, o.out, o.force, hex, file_hex);

	/* 8. report */
	struct sb_jw out;
	sb_jw_init(&out, stdout);
	struct sb_run_meta meta = {.inputs = inputs, .n_inputs = n_logs};
	if (sb_record_run_meta(&out, &meta, &err))
		die(&err);
	sb_jw_record(&out, "freeze.selection", 1);
	sb_jw_kstr(&out, "path", o.out);
	sb_jw_kstr(&out, "sha256", hex);
	sb_jw_kstr(&out, "file_sha256", file_hex);
	sb_jw_kbool(&out, "forced", o.force && old_file_sha[0]);
	sb_jw_key(&out, "selected");
	sb_jw_obj(&out);
	for (size_t t = 0; t < sel.n_tasks; t++)
		if (sel.tasks[t].chosen >= 0)
			sb_jw_kstr(&out, sel.tasks[t].task, sel.cands[sel.tasks[t].chosen].method);
	sb_jw_obj_end(&out);
	sb_jw_kint(&out, "n_cells", (int64_t)nc);
	sb_jw_kint(&out, "n_excluded", (int64_t)n_excluded);
	sb_jw_kint(&out, "test_plan_size", (int64_t)plan_n);
	sb_jw_kint(&out, "test_plan_missing", (int64_t)plan_missing);
	sb_jw_obj_end(&out);
	if (sb_jw_line(&out, &err))
		die(&err);
	if (!sb_quiet)
		fprintf(stderr, "sb-freeze: froze %d task(s) into %s (payload SHA-256 %.16s...)\n", n_chosen, o.out,
		        hex);

	sb_jw_free(&out);
	sb_jw_free(&w);
	free(sel_dir);
	sb_selection_free(&sel);
	free(cells);
	free(cells_used);
	for (int i = 0; i < n_logs; i++)
		sb_vallog_free(&logs[i]);
	free(logs);
	free(inputs);
	sb_json_free(old);
	return sb_cli_finish(0);
}
