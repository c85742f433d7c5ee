/* sb-train — train encoder cells (PROTOCOL A2, A4, A8), and cells of other families
 * (PROTOCOL C's LM decoders: "family": "lm"), into run directories.
 * See usage() and docs/sb-train.md. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cli.h"
#include "dataset.h"
#include "hash.h"
#include "io.h"
#include "json.h"
#include "multicell.h"
#include "record.h"
#include "train.h"
#include "train_cell.h"
#include "train_lm.h"
#include "train_n3a.h"
#include "train_sas.h"

static void usage(void)
{
	fputs("Usage: sb-train [OPTIONS] [CELLS.ndjson | -]\n"
	      "       sb-train [OPTIONS] --task T --method M --seed S [--epochs E] [CELL OPTIONS]\n"
	      "Train encoder classifiers (PROTOCOL A2/A4) cell by cell; every epoch's checkpoint is kept.\n"
	      "\n"
	      "Cells are NDJSON objects, one per line ('-' = stdin), or one cell from the flags below.\n"
	      "Fields (defaults): task, method, seed (required); epochs (30), batch (256), lr (1e-3),\n"
	      "weight_decay (1e-4), clip (5.0; 0 = off), tier (compact | medium | deep | wide),\n"
	      "arch (plain | local_hybrid), limit (0 = whole pool), val_fraction (0.2),\n"
	      "schedule (constant | linear_decay: lr (1 - t/T)), alpha (1.5; entmax_bisect only, in [1.05, 2]),\n"
	      "mask (margin | exclude: padded keys of text tasks), dropout (0.1),\n"
	      "switch_epoch (switching methods). Unknown fields are an error.\n"
	      "A cell with \"family\": \"lm\" is a decoder of PROTOCOL C (fields: docs/lm.md): it trains after\n"
	      "the encoder cells, alone, with every thread, into RUNS/CELL_ID/, and writes an lm.train record.\n"
	      "A cell with \"family\": \"sas\" is a SAS cell of PROTOCOL B (fields: docs/sas.md): the same, on one\n"
	      "CPU thread, with a sas.train record.\n"
	      "A cell with \"family\": \"n3a\" is one block of PROTOCOL A8's N3-A assay (fields: docs/n3a.md):\n"
	      "the same, on one CPU thread, with an n3a.train record. SAS and N3-A cells train on the CPU\n"
	      "only: with another --device the file is refused (exit 2) before anything trains.\n"
	      "Methods: softmax, topk_softmax_R and bottomk_softmax_R (R: a ratio in (0, 1] as its digits\n"
	      "without the point: 0125, 025, 05, ...; bare: 025), sparsemax, entmax15, entmax_bisect,\n"
	      "headwise_adaptive_entmax; schedules (epochs e = 1..E):\n"
	      "median_switch, early_accuracy_switch, entropy_switch, mechanistic_switch (top-k 0.25 while\n"
	      "e < switch_epoch, then softmax) and cosine_alpha (entmax, alpha = 1 + 0.25 (1 - cos(pi (e-1)/29)),\n"
	      "at least 1.05).\n"
	      "\n"
	      "Options:\n"
	      "  -d, --data DIR        dataset files DIR/TASK/pool.safetensors from sb-fetch (data)\n"
	      "  -o, --out DIR         run directories DIR/CELL_ID/ (runs)\n"
	      "      --device DEV      cpu (default) or cuda[:N][,tf32] when built with CUDA (tf32: TF32\n"
	      "                        products, recorded in every record; fp32 otherwise)\n"
	      "  -j, --threads N       worker threads in all (0 = every core; default 0). With several\n"
	      "                        cells, up to N cells train at once; results do not depend on N.\n"
	      "                        On a GPU, cells of one task, architecture and tier train at once\n"
	      "                        (each on its own stream), up to N of them (0: all, at most 128)\n"
	      "  -q, --quiet           no progress lines on stderr\n"
	      "      --ids             print each cell's CELL_ID (its run directory's name), one line per\n"
	      "                        distinct cell in input order, and exit: nothing is read or trained\n"
	      "                        (encoder cells only)\n"
	      "      --help            this help;  --version  the version\n"
	      "Cell options (with --task): --method M --seed S --epochs E --batch B --lr X\n"
	      "  --weight-decay X --clip X --tier T --arch A --limit N --val-fraction X --schedule S\n"
	      "  --alpha X --mask M --dropout X --switch-epoch N\n"
	      "\n"
	      "Run directory RUNS/CELL_ID/ (CELL_ID = TASK.METHOD.sSEED.ARCH.TIER.HASH8):\n"
	      "  cell.json, epoch-NNN.safetensors (+ .sha256) for every epoch, the optimiser state of\n"
	      "  the newest epoch (epoch-NNN.optim.safetensors) and train.ndjson. A cell whose\n"
	      "  train.ndjson ends in train.done is skipped; an interrupted one resumes from its last\n"
	      "  complete epoch, bit-identical to an uninterrupted run.\n"
	      "\n"
	      "Records (stdout): run.meta, then per cell train.epoch records, and train.done,\n"
	      "train.failed (status failed_nonfinite_loss, failed_device or failed, with error, and for\n"
	      "a non-finite loss the epoch and step), train.resume or train.skip. Fields: docs/records.md.\n"
	      "A failing cell is recorded and the others go on.\n"
	      "\n"
	      "Exit status: 0 every cell completed, was skipped or ended with a non-finite loss (a\n"
	      "result, recorded); 1 a dataset is a test split (refused); 2 usage; 3 bad input (cells,\n"
	      "dataset); 4 I/O error; 5 internal or device error (the first failing cell's code).\n"
	      "\n"
	      "Examples:\n"
	      "  sb-train --task fashion_mnist --method sparsemax --seed 0 --epochs 2\n"
	      "  sb-train -d data -o runs -j 2 cells.ndjson > train.ndjson\n",
	      stdout);
}

enum {
	OPT_DEVICE = 256,
	OPT_TASK,
	OPT_METHOD,
	OPT_SEED,
	OPT_EPOCHS,
	OPT_BATCH,
	OPT_LR,
	OPT_WD,
	OPT_CLIP,
	OPT_TIER,
	OPT_ARCH,
	OPT_LIMIT,
	OPT_VALF,
	OPT_SCHEDULE,
	OPT_ALPHA,
	OPT_MASK,
	OPT_DROPOUT,
	OPT_SWITCH,
	OPT_HELP,
	OPT_VERSION,
	OPT_IDS
};

static const struct option LONGOPTS[] = {{"data", required_argument, NULL, 'd'},
                                         {"out", required_argument, NULL, 'o'},
                                         {"device", required_argument, NULL, OPT_DEVICE},
                                         {"threads", required_argument, NULL, 'j'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"task", required_argument, NULL, OPT_TASK},
                                         {"method", required_argument, NULL, OPT_METHOD},
                                         {"seed", required_argument, NULL, OPT_SEED},
                                         {"epochs", required_argument, NULL, OPT_EPOCHS},
                                         {"batch", required_argument, NULL, OPT_BATCH},
                                         {"lr", required_argument, NULL, OPT_LR},
                                         {"weight-decay", required_argument, NULL, OPT_WD},
                                         {"clip", required_argument, NULL, OPT_CLIP},
                                         {"tier", required_argument, NULL, OPT_TIER},
                                         {"arch", required_argument, NULL, OPT_ARCH},
                                         {"limit", required_argument, NULL, OPT_LIMIT},
                                         {"val-fraction", required_argument, NULL, OPT_VALF},
                                         {"schedule", required_argument, NULL, OPT_SCHEDULE},
                                         {"alpha", required_argument, NULL, OPT_ALPHA},
                                         {"mask", required_argument, NULL, OPT_MASK},
                                         {"dropout", required_argument, NULL, OPT_DROPOUT},
                                         {"switch-epoch", required_argument, NULL, OPT_SWITCH},
                                         {"help", no_argument, NULL, OPT_HELP},
                                         {"version", no_argument, NULL, OPT_VERSION},
                                         {"ids", no_argument, NULL, OPT_IDS},
                                         {NULL, 0, NULL, 0}};

struct opts {
	const char *data_dir, *runs_dir, *device, *cells_path;
	int threads, ids;
	/* a cell from flags, as a JSON object built in w */
	struct sb_jw flag_cell;
	int nflags, have_task;
};

/* A numeric cell field from its flag, checked against the field's range (the cell's
 * own check would name the field, not the flag). */
static void flag_num(struct opts *o, const char *key, const char *opt, const char *val)
{
	const struct sb_cell_range *r = sb_cell_range(key);
	char what[96], *end;
	sb_cell_range_text(r, what, sizeof what);
	errno = 0;
	if (r->integer) {
		long long v = strtoll(val, &end, 10);
		if (!*val || *end || errno || v < r->ilo || v > r->ihi)
			sb_cli_usage_error("invalid value for %s: '%s' (%s)", opt, val, what);
		sb_jw_kint(&o->flag_cell, key, v);
	} else {
		double v = strtod(val, &end);
		if (!*val || *end || errno || !sb_cell_range_check(r, v))
			sb_cli_usage_error("invalid value for %s: '%s' (%s)", opt, val, what);
		sb_jw_kf64(&o->flag_cell, key, v);
	}
	o->nflags++;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	struct sb_err err = {0};
	memset(o, 0, sizeof *o);
	o->data_dir = "data";
	o->runs_dir = "runs";
	o->device = "cpu";
	sb_jw_init(&o->flag_cell, NULL);
	sb_jw_obj(&o->flag_cell);
	int c;
	opterr = 0; /* one message of ours, not getopt's as well */
	while ((c = getopt_long(argc, argv, ":d:o:j:q", LONGOPTS, NULL)) != -1) {
		long long v;
		switch (c) {
		case 'd':
			o->data_dir = optarg;
			break;
		case 'o':
			o->runs_dir = optarg;
			break;
		case OPT_DEVICE:
			o->device = optarg;
			if (sb_device_check(optarg, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case 'j':
			if (sb_parse_int("--threads", optarg, 0, 1024, &v, &err))
				sb_cli_usage_error("%s", err.msg);
			o->threads = (int)v;
			break;
		case 'q':
			sb_quiet = 1;
			break;
		case OPT_TASK:
			sb_jw_kstr(&o->flag_cell, "task", optarg);
			o->have_task = 1;
			o->nflags++;
			break;
		case OPT_METHOD:
			sb_jw_kstr(&o->flag_cell, "method", optarg);
			o->nflags++;
			break;
		case OPT_TIER:
			sb_jw_kstr(&o->flag_cell, "tier", optarg);
			o->nflags++;
			break;
		case OPT_ARCH:
			sb_jw_kstr(&o->flag_cell, "arch", optarg);
			o->nflags++;
			break;
		case OPT_SCHEDULE:
			sb_jw_kstr(&o->flag_cell, "schedule", optarg);
			o->nflags++;
			break;
		case OPT_MASK:
			sb_jw_kstr(&o->flag_cell, "mask", optarg);
			o->nflags++;
			break;
		case OPT_SEED:
			flag_num(o, "seed", "--seed", optarg);
			break;
		case OPT_EPOCHS:
			flag_num(o, "epochs", "--epochs", optarg);
			break;
		case OPT_BATCH:
			flag_num(o, "batch", "--batch", optarg);
			break;
		case OPT_LIMIT:
			flag_num(o, "limit", "--limit", optarg);
			break;
		case OPT_SWITCH:
			flag_num(o, "switch_epoch", "--switch-epoch", optarg);
			break;
		case OPT_LR:
			flag_num(o, "lr", "--lr", optarg);
			break;
		case OPT_WD:
			flag_num(o, "weight_decay", "--weight-decay", optarg);
			break;
		case OPT_CLIP:
			flag_num(o, "clip", "--clip", optarg);
			break;
		case OPT_VALF:
			flag_num(o, "val_fraction", "--val-fraction", optarg);
			break;
		case OPT_ALPHA:
			flag_num(o, "alpha", "--alpha", optarg);
			break;
		case OPT_DROPOUT:
			flag_num(o, "dropout", "--dropout", optarg);
			break;
		case OPT_HELP:
			usage();
			exit(sb_cli_finish(0));
		case OPT_IDS:
			o->ids = 1;
			break;
		case OPT_VERSION:
			sb_cli_version();
		case ':':
			sb_cli_bad_option(argv, 1);
		default:
			sb_cli_bad_option(argv, 0);
		}
	}
	sb_jw_obj_end(&o->flag_cell);
	int npos = argc - optind;
	if (o->nflags > 0) {
		if (!o->have_task)
			sb_cli_usage_error("cell options need --task (and --method, --seed)");
		if (npos > 0)
			sb_cli_usage_error("give either a cells file or a cell from flags, not both");
	} else {
		if (npos == 0)
			sb_cli_usage_error("no cells: give CELLS.ndjson, '-' for stdin, or --task/--method/--seed");
		if (npos > 1)
			sb_cli_usage_error("one cells file at a time (got %d)", npos);
		o->cells_path = argv[optind];
	}
}

/* ---------------------------------------------------------------- other families */

/* A cell with "family": NAME goes to NAME's trainer, which writes its run directory
 * RUNS/CELL_ID/ and one record per cell to stdout. Encoder cells carry no family. To add a
 * family, add a row. */
typedef int (*family_train_fn)(const struct sb_json *cell, const char *runs_dir, struct sb_backend *be, FILE *out,
                               int *skipped, struct sb_err *err);
/* check (optional): validates a cell when it is read, so that a malformed one is refused
 * naming its file and line before anything trains, and gives its run id (128 bytes). */
typedef int (*family_check_fn)(const struct sb_json *cell, char *id, char *canon, struct sb_err *err);
/* cpu_only: the family's trainer has no other backend, so a cell of it under another
 * --device is refused before anything trains. */
static const struct {
	const char *name;
	family_train_fn train;
	family_check_fn check;
	int cpu_only;
} FAMILIES[] = {
	{"lm", sb_train_lm_cell, NULL, 0},                  /* train/train_lm.h: lib/lm_train.h, docs/lm.md */
	{"sas", sb_train_sas_cell, sb_train_sas_check, 1}, /* train/train_sas.h: lib/sas_run.h, docs/sas.md */
	{"n3a", sb_train_n3a_cell, sb_train_n3a_check, 1}, /* train/train_n3a.h: lib/n3a.h, docs/n3a.md */
};

struct family_cell {
	struct sb_json *cell; /* owned */
	int family;           /* index in FAMILIES */
	long line;            /* its line in the cells file */
	char id[128];         /* its run id, when the family has a check ("" otherwise) */
	char canon[SB_SHA256_HEX]; /* the SHA-256 of the complete cell (defaults filled in) */
};

/* The family of a cell object: -1 none (an encoder cell), an index in FAMILIES, or an
 * error for a family nobody trains. */
static int cell_family(const struct sb_json *v, int *family, struct sb_err *err)
{
	*family = -1;
	const struct sb_json *f = sb_json_get(v, "family");
	if (!f)
		return 0;
	const char *name = sb_json_str(f, "");
	for (size_t i = 0; i < sizeof FAMILIES / sizeof FAMILIES[0]; i++)
		if (!strcmp(name, FAMILIES[i].name)) {
			*family = (int)i;
			return 0;
		}
	return SB_ERR(err, SB_EDATA, "cell: unknown family \"%s\"", name);
}

/* ---------------------------------------------------------------- cells */

struct cells {
	struct sb_cell *c;
	long *line; /* the cells file's line of each cell (0: the cell from flags) */
	int n, cap;
	char name[4200]; /* the cells file as messages name it */
	struct family_cell *fc; /* cells of other families, in input order */
	int nf, capf;
};

static int cells_add(struct cells *cs, const struct sb_cell *c, long line)
{
	for (int i = 0; i < cs->n; i++)
		if (!strcmp(cs->c[i].cell_id, c->cell_id)) {
			sb_cli_warn("cell %s given twice: trained once", c->cell_id);
			return 0;
		}
	if (cs->n == cs->cap) {
		int cap = cs->cap ? 2 * cs->cap : 16;
		void *p = realloc(cs->c, (size_t)cap * sizeof *cs->c);
		if (!p)
			return -1;
		cs->c = p;
		p = realloc(cs->line, (size_t)cap * sizeof *cs->line);
		if (!p)
			return -1;
		cs->line = p;
		cs->cap = cap;
	}
	cs->line[cs->n] = line;
	cs->c[cs->n++] = *c;
	return 0;
}

/* v's run id is the id of an earlier cell of its family: the same cell is trained once
 * (*dup set), as an encoder cell given twice is; another cell under the same id (a SAS id
 * is given, or sas-sSEED by default) would write over the first one's run, so it is bad input. */
static int family_cell_dup(const struct cells *cs, int family, const char *id, const char *canon, int *dup,
                           struct sb_err *err)
{
	*dup = 0;
	for (int i = 0; id[0] && i < cs->nf; i++) {
		const struct family_cell *f = &cs->fc[i];
		if (f->family != family || strcmp(f->id, id))
			continue;
		if (strcmp(f->canon, canon))
			return SB_ERR(err, SB_EDATA,
			              "%s cell: run id '%s' is also line %ld's, a cell with other fields (give each its own "
			              "\"id\")",
			              FAMILIES[family].name, id, f->line);
		sb_cli_warn("cell %s given twice: trained once", id);
		*dup = 1;
		return 0;
	}
	return 0;
}

static int family_cell_add(struct cells *cs, struct sb_json *v, int family, const char *id, const char *canon,
                           long line, struct sb_err *err)
{
	if (cs->nf == cs->capf) {
		int cap = cs->capf ? 2 * cs->capf : 4;
		void *p = realloc(cs->fc, (size_t)cap * sizeof *cs->fc);
		if (!p)
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		cs->fc = p;
		cs->capf = cap;
	}
	cs->fc[cs->nf] = (struct family_cell){v, family, line, "", ""};
	snprintf(cs->fc[cs->nf].id, sizeof cs->fc[cs->nf].id, "%s", id);
	snprintf(cs->fc[cs->nf].canon, sizeof cs->fc[cs->nf].canon, "%s", canon);
	cs->nf++;
	return 0;
}

static void cells_free(struct cells *cs)
{
	for (int i = 0; i < cs->nf; i++)
		sb_json_free(cs->fc[i].cell);
	free(cs->fc);
	free(cs->c);
	free(cs->line);
}

/* An error about cell i, named FILE:LINE:. bad_value: the cell's own value is wrong (not
 * the dataset), which is bad input in a cells file and a usage error from flags, as when
 * a cell does not parse. */
static void cell_error(const struct cells *cs, int i, int bad_value, struct sb_err *err)
{
	if (cs->line[i] > 0)
		sb_err_prefix(err, "%s:%ld", cs->name, cs->line[i]);
	if (bad_value)
		err->code = cs->line[i] > 0 ? SB_EDATA : SB_EUSAGE;
}

static int read_cells(const struct opts *o, struct cells *cs, struct sb_err *err)
{
	struct sb_cell c;
	if (!o->cells_path) {
		struct sb_json *v = NULL;
		int rc = sb_json_parse(o->flag_cell.buf, o->flag_cell.len, &v, err);
		if (!rc)
			rc = sb_cell_from_json(v, 1, &c, err);
		sb_json_free(v);
		if (rc) {
			err->code = SB_EUSAGE;
			return rc;
		}
		return cells_add(cs, &c, 0) ? SB_ERR(err, SB_EINTERNAL, "out of memory") : 0;
	}
	struct sb_ndjson_reader *rd = NULL;
	SB_TRY(sb_ndjson_open(o->cells_path, &rd, err));
	snprintf(cs->name, sizeof cs->name, "%s", sb_ndjson_name(rd));
	int rc = 0;
	for (;;) {
		struct sb_json *v = NULL;
		rc = sb_ndjson_next(rd, &v, err);
		if (rc || !v)
			break;
		int family;
		rc = cell_family(v, &family, err);
		if (!rc && family >= 0) { /* kept whole for its family's trainer */
			char id[128] = "", canon[SB_SHA256_HEX] = "";
			int dup = 0;
			if (FAMILIES[family].check)
				rc = FAMILIES[family].check(v, id, canon, err);
			if (!rc)
				rc = family_cell_dup(cs, family, id, canon, &dup, err);
			if (!rc && !dup)
				rc = family_cell_add(cs, v, family, id, canon, sb_ndjson_line(rd), err);
			if (rc || dup)
				sb_json_free(v);
		} else {
			if (!rc)
				rc = sb_cell_from_json(v, 1, &c, err);
			sb_json_free(v);
			if (!rc && cells_add(cs, &c, sb_ndjson_line(rd)))
				rc = SB_ERR(err, SB_EINTERNAL, "out of memory");
		}
		if (rc) {
			sb_err_prefix(err, "%s:%ld", sb_ndjson_name(rd), sb_ndjson_line(rd));
			break;
		}
	}
	sb_ndjson_close(rd);
	if (!rc && cs->n + cs->nf == 0)
		rc = SB_ERR(err, SB_EDATA, "%s: no cells", o->cells_path);
	return rc;
}

/* ---------------------------------------------------------------- datasets */

struct task_ds {
	char task[64];
	char path[4096];
	struct sb_dataset ds;
};

/* ---------------------------------------------------------------- runners */

struct runner_shared {
	struct cells *cs;
	struct task_ds *tds;
	int ntds;
	const char *device;
	struct train_env *env;
	pthread_mutex_t mu;
	int next;
	int first_rc; /* code of the lowest-index failing cell */
	int first_idx;
	struct sb_err first_err;
	int completed, skipped, nonfinite, failed;
};

struct runner {
	struct runner_shared *sh;
	int threads;
	pthread_t th;
};

static void *runner_main(void *p)
{
	struct runner *rn = p;
	struct runner_shared *sh = rn->sh;
	struct sb_backend *be = NULL;
	struct sb_err err = {0};
	int open_rc = sb_backend_open(sh->device, rn->threads, &be, &err);
	for (;;) {
		pthread_mutex_lock(&sh->mu);
		int i = sh->next++;
		pthread_mutex_unlock(&sh->mu);
		if (i >= sh->cs->n)
			break;
		const struct sb_cell *c = &sh->cs->c[i];
		const struct sb_dataset *ds = NULL;
		for (int k = 0; k < sh->ntds; k++)
			if (!strcmp(sh->tds[k].task, c->task))
				ds = &sh->tds[k].ds;
		enum cell_status st = CELL_FAILED;
		struct sb_err e = {0};
		int rc = open_rc;
		if (open_rc) { /* recorded as the GPU path records a cell it could not start */
			struct sb_err e2 = {0};
			e = err;
			train_cell_unrun(c, i, sh->env, strcmp(sh->device, "cpu") ? "failed_device" : "failed", err.msg,
			                 &e2);
		} else {
			rc = train_cell(c, i, ds, be, sh->env, &st, &e);
		}
		pthread_mutex_lock(&sh->mu);
		if (rc && (sh->first_idx < 0 || i < sh->first_idx)) {
			sh->first_idx = i;
			sh->first_rc = rc;
			sh->first_err = e;
		}
		if (rc)
			sh->failed++;
		else if (st == CELL_COMPLETED)
			sh->completed++;
		else if (st == CELL_SKIPPED)
			sh->skipped++;
		else if (st == CELL_FAILED_NONFINITE)
			sh->nonfinite++;
		pthread_mutex_unlock(&sh->mu);
		if (rc) {
			pthread_mutex_lock(sh->env->out_mu);
			sb_cli_warn("cell %s failed: %s", c->cell_id, e.msg);
			pthread_mutex_unlock(sh->env->out_mu);
		}
	}
	sb_backend_close(be);
	return NULL;
}

/* ---------------------------------------------------------------- GPU: cells at once */

/* On a GPU the cells of one task, architecture and tier (a grid row: its methods and
 * seeds) train together through train/multicell.c: each cell on its own backend
 * (stream, cuBLAS handle, memory) and host thread, so a cell computes the same bits
 * as alone, and a device error ends only this process's cells (failed_device). */
struct gpu_cell {
	const struct sb_cell *cell;
	int index;
	const struct sb_dataset *ds;
	struct train_env *env;
	int ran;
	enum cell_status st;
};

static int gpu_cell_fn(struct sb_backend *be, struct sb_mc_cell *mc, struct sb_err *err)
{
	struct gpu_cell *g = mc->arg;
	(void)be;
	if (sb_train_device_lost(g->env)) /* as multicell.c does for a lost CUDA context */
		return SB_ERR(err, SB_EINTERNAL, "%s: not run: the device was lost by another cell of this process",
		              g->cell->cell_id);
	g->ran = 1;
	return train_cell(g->cell, g->index, g->ds, be, g->env, &g->st, err);
}

static void run_gpu_groups(struct runner_shared *sh, int max_active)
{
	int n = sh->cs->n;
	char *grouped = calloc((size_t)n, 1);
	struct sb_mc_cell *mc = calloc((size_t)n, sizeof *mc);
	struct gpu_cell *gc = calloc((size_t)n, sizeof *gc);
	int *idx = calloc((size_t)n, sizeof *idx);
	if (!grouped || !mc || !gc || !idx) {
		SB_ERR(&sh->first_err, SB_EINTERNAL, "out of memory");
		sh->first_rc = SB_EINTERNAL;
		sh->first_idx = 0;
		free(grouped);
		free(mc);
		free(gc);
		free(idx);
		return;
	}
	for (int i0 = 0; i0 < n; i0++) {
		if (grouped[i0])
			continue;
		const struct sb_cell *a = &sh->cs->c[i0];
		int m = 0;
		for (int i = i0; i < n; i++) {
			const struct sb_cell *c = &sh->cs->c[i];
			if (grouped[i] || strcmp(c->task, a->task) || strcmp(c->arch, a->arch) || strcmp(c->tier, a->tier))
				continue;
			grouped[i] = 1;
			const struct sb_dataset *ds = NULL;
			for (int k = 0; k < sh->ntds; k++)
				if (!strcmp(sh->tds[k].task, c->task))
					ds = &sh->tds[k].ds;
			gc[m] = (struct gpu_cell){c, i, ds, sh->env, 0, CELL_FAILED};
			mc[m] = (struct sb_mc_cell){c->cell_id, &gc[m], SB_MC_PENDING, {0}, 0};
			idx[m] = i;
			m++;
		}
		struct sb_mc_opts o = {sh->device, 1, max_active > 0 ? max_active : (m < 128 ? m : 128), NULL, NULL};
		struct sb_err err = {0};
		sb_multicell_run(&o, mc, m, gpu_cell_fn, &err);
		for (int k = 0; k < m; k++) {
			int i = idx[k];
			const struct sb_cell *c = &sh->cs->c[i];
			int rc = 0;
			struct sb_err e = mc[k].err;
			if (mc[k].status != SB_MC_OK)
				rc = e.code ? e.code : SB_EINTERNAL;
			if (!gc[k].ran) { /* never started: the device was lost, or no backend for it */
				struct sb_err e2 = {0};
				train_cell_unrun(c, i, sh->env, "failed_device", e.msg[0] ? e.msg : "not run", &e2);
				rc = SB_EINTERNAL;
			}
			if (rc && (sh->first_idx < 0 || i < sh->first_idx)) {
				sh->first_idx = i;
				sh->first_rc = rc;
				sh->first_err = e;
			}
			if (rc)
				sh->failed++;
			else if (gc[k].st == CELL_COMPLETED)
				sh->completed++;
			else if (gc[k].st == CELL_SKIPPED)
				sh->skipped++;
			else if (gc[k].st == CELL_FAILED_NONFINITE)
				sh->nonfinite++;
			if (rc) {
				pthread_mutex_lock(sh->env->out_mu);
				sb_cli_warn("cell %s failed: %s", c->cell_id, e.msg);
				pthread_mutex_unlock(sh->env->out_mu);
			}
		}
	}
	free(grouped);
	free(mc);
	free(gc);
	free(idx);
}

/* Train the cells of other families one after another, each with every thread, after
 * the encoder cells. Counts go to sh; the first failure's code and message too. */
static void train_family_cells(const struct cells *cs, const char *device, int threads, int first_index,
                               struct runner_shared *sh)
{
	for (int i = 0; i < cs->nf; i++) {
		const struct family_cell *fc = &cs->fc[i];
		struct sb_backend *be = NULL;
		struct sb_err e = {0};
		int skipped = 0;
		int rc = sb_backend_open(device, threads, &be, &e);
		if (!rc)
			rc = FAMILIES[fc->family].train(fc->cell, sh->env->runs_dir, be, sh->env->out, &skipped, &e);
		sb_backend_close(be);
		if (fflush(sh->env->out) && !rc)
			rc = SB_ERR(&e, SB_EIO, "stdout: write error");
		if (rc) {
			sh->failed++;
			sb_err_prefix(&e, "%s:%ld: %s cell", cs->name, fc->line, FAMILIES[fc->family].name);
			if (sh->first_idx < 0) {
				sh->first_idx = first_index + i;
				sh->first_rc = rc;
				sh->first_err = e;
			}
			sb_cli_warn("%s", e.msg);
		} else if (skipped) {
			sh->skipped++;
		} else {
			sh->completed++;
		}
	}
}

static int ncores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : (int)n;
}

int main(int argc, char **argv)
{
	sb_cli_init("sb-train", argc, argv);
	struct opts o;
	parse_opts(argc, argv, &o);
	struct sb_err err = {0};
	struct cells cs = {0};
	if (read_cells(&o, &cs, &err))
		sb_cli_die(&err);
	/* a family that trains only on the CPU, under another device: refused before anything
	 * trains (it was a usage error after the encoder cells, with no record) */
	if (strcmp(o.device, "cpu"))
		for (int i = 0; i < cs.nf; i++)
			if (FAMILIES[cs.fc[i].family].cpu_only) {
				SB_ERR(&err, SB_EUSAGE, "%s:%ld: %s cells train on the CPU only (--device cpu), not on '%s'",
				       cs.name, cs.fc[i].line, FAMILIES[cs.fc[i].family].name, o.device);
				sb_cli_die(&err);
			}
	if (o.ids) { /* the run directories the cells would train into */
		if (cs.nf > 0)
			sb_cli_usage_error("--ids: only encoder cells (%d cell%s of another family)", cs.nf,
			                   cs.nf == 1 ? " is" : "s are");
		for (int i = 0; i < cs.n; i++)
			printf("%s\n", cs.c[i].cell_id);
		cells_free(&cs);
		sb_jw_free(&o.flag_cell);
		if (fflush(stdout)) {
			SB_ERR(&err, SB_EIO, "stdout: write error");
			sb_cli_die(&err);
		}
		return sb_cli_finish(0);
	}
	/* the datasets, once per task (pool files only: the reader refuses test splits) */
	struct task_ds *tds = calloc((size_t)cs.n, sizeof *tds);
	int ntds = 0;
	if (!tds) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		sb_cli_die(&err);
	}
	for (int i = 0; i < cs.n; i++) {
		int k;
		for (k = 0; k < ntds; k++)
			if (!strcmp(tds[k].task, cs.c[i].task))
				break;
		if (k < ntds)
			continue;
		snprintf(tds[k].task, sizeof tds[k].task, "%s", cs.c[i].task);
		snprintf(tds[k].path, sizeof tds[k].path, "%s/%s/pool.safetensors", o.data_dir, cs.c[i].task);
		if (sb_dataset_read(tds[k].path, 0, &tds[k].ds, &err))
			sb_cli_die(&err);
		ntds++;
		/* as sb-eval and sb-test check: a pool of another task (copied or linked under this
		 * task's name) would train the cell on other data, found only at evaluation */
		if (strcmp(tds[k].ds.task, tds[k].task) != 0) {
			SB_ERR(&err, SB_EDATA, "%s: a dataset of task '%s', but the cell's task is '%s'", tds[k].path,
			       tds[k].ds.task, tds[k].task);
			sb_cli_die(&err);
		}
	}
	/* check every cell against its dataset before anything is trained */
	for (int i = 0; i < cs.n; i++) {
		for (int k = 0; k < ntds; k++)
			if (!strcmp(tds[k].task, cs.c[i].task)) {
				const struct sb_cell *c = &cs.c[i];
				struct sb_encoder_cfg cfg;
				int bad_value = 0;
				if (sb_cell_model_cfg(c, &tds[k].ds, &cfg, &err) ||
				    (bad_value = sb_split_check(&tds[k].ds, c->seed, c->val_fraction, c->limit, &err))) {
					sb_err_prefix(&err, "cell %s", c->cell_id);
					cell_error(&cs, i, bad_value, &err);
					sb_cli_die(&err);
				}
			}
	}
	int threads = o.threads > 0 ? o.threads : ncores();
	int nrun = cs.n < threads ? cs.n : threads;
	int gpu = strcmp(o.device, "cpu") != 0; /* cells of a grid row at once: run_gpu_groups */
	const char *grp = getenv("SB_TRAIN_GROUPS"); /* testing: the GPU's grouping on the CPU */
	if (grp && !strcmp(grp, "1"))
		gpu = 1;
	/* probe the device once so that a bad --device is a usage error, not n failed cells */
	{
		struct sb_backend *be = NULL;
		if (sb_backend_open(o.device, 1, &be, &err))
			sb_cli_die(&err);
		sb_backend_close(be);
	}
	if (sb_mkdir_p(o.runs_dir, &err))
		sb_cli_die(&err);
	struct sb_input *inputs = calloc((size_t)ntds + 1, sizeof *inputs);
	for (int k = 0; k < ntds; k++) {
		inputs[k].path = tds[k].path;
		memcpy(inputs[k].sha256, tds[k].ds.sha256, sizeof inputs[k].sha256);
		inputs[k].size_bytes = 0;
		FILE *f = fopen(tds[k].path, "rb");
		if (f) {
			fseek(f, 0, SEEK_END);
			inputs[k].size_bytes = (uint64_t)ftell(f);
			fclose(f);
		}
	}
	struct sb_run_meta meta = {.device = o.device, .threads = threads, .inputs = inputs, .n_inputs = ntds};
	{
		struct sb_backend *be = NULL;
		static char dev[160];
		if (!sb_backend_open(o.device, threads, &be, &err)) {
			snprintf(dev, sizeof dev, "%s", be->device);
			meta.device = dev;
			sb_backend_close(be);
		}
	}
	struct sb_jw w;
	sb_jw_init(&w, stdout);
	if (sb_record_run_meta(&w, &meta, &err))
		sb_cli_die(&err);
	sb_jw_free(&w);
	pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
	struct train_env env = {.runs_dir = o.runs_dir, .out = stdout, .out_mu = &out_mu, .meta = &meta, .ncells = cs.n};
	const char *stop = getenv("SB_TRAIN_STOP_AFTER_STEPS");
	if (stop)
		env.stop_after_steps = atoll(stop);
	const char *nan = getenv("SB_TRAIN_NAN_AT_STEP");
	if (nan)
		env.nan_at_step = atoll(nan);
	atomic_int device_lost = 0;
	const char *dev_err = getenv("SB_TRAIN_DEVICE_ERROR"); /* testing: N[:FILE] */
	if (dev_err && *dev_err) {
		char *end = NULL;
		env.device_error_at_step = strtoll(dev_err, &end, 10);
		if (end && *end == ':' && end[1])
			env.device_error_once = end + 1;
		env.device_lost = &device_lost;
	}
	struct runner_shared sh = {&cs, tds, ntds, o.device, &env, PTHREAD_MUTEX_INITIALIZER, 0, 0, -1,
	                           {0}, 0,   0,    0,        0};
	struct runner *rn = calloc((size_t)nrun, sizeof *rn);
	if (cs.n == 0) {
		/* only cells of other families */
	} else if (gpu) {
		run_gpu_groups(&sh, o.threads);
	} else {
		for (int i = 0; i < nrun; i++) {
			rn[i].sh = &sh;
			rn[i].threads = threads / nrun + (i < threads % nrun);
		}
		for (int i = 1; i < nrun; i++)
			if (pthread_create(&rn[i].th, NULL, runner_main, &rn[i])) {
				rn[0].threads += rn[i].threads;
				rn[i].threads = 0;
			}
		runner_main(&rn[0]);
		for (int i = 1; i < nrun; i++)
			if (rn[i].threads)
				pthread_join(rn[i].th, NULL);
	}
	train_family_cells(&cs, o.device, threads, cs.n, &sh);
	if (!sb_quiet)
		sb_progress(1, "%d cell%s: %d completed, %d skipped, %d non-finite loss, %d failed", cs.n + cs.nf,
		            cs.n + cs.nf == 1 ? "" : "s", sh.completed, sh.skipped, sh.nonfinite, sh.failed);
	int rc = sh.first_idx >= 0 ? sh.first_rc : 0;
	for (int k = 0; k < ntds; k++)
		sb_dataset_free(&tds[k].ds);
	free(tds);
	free(inputs);
	free(rn);
	cells_free(&cs);
	sb_jw_free(&o.flag_cell);
	return sb_cli_finish(rc);
}
