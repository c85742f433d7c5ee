/* sb-lm — the LM track's program (PROTOCOL C): train decoder cells, evaluate
 * their masks, write the report. A temporary entry point: sb-train and sb-eval
 * dispatch "family": "lm" cells and LM run directories to the same library
 * functions (train/lm_train.c, evalsel/lm_eval.c). See docs/lm.md. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cli.h"
#include "io.h"
#include "json.h"
#include "lm_eval.h"
#include "lm_import.h"
#include "lm_probe.h"
#include "lm_train.h"
#include "record.h"
#include "train_lm.h"

static void usage(void)
{
	fputs("Usage: sb-lm COMMAND [OPTIONS] ARGS\n"
	      "The LM track of PROTOCOL C: hybrid decoders, training-free sparse masks, fidelity,\n"
	      "retrieval and efficiency. Full documentation: docs/lm.md.\n"
	      "\n"
	      "Commands:\n"
	      "  train [-o RUNS_DIR] [-j N] [--set KEY=VALUE]... CELLS.ndjson|-\n"
	      "        train every cell (one JSON object per line, \"family\": \"lm\") into\n"
	      "        RUNS_DIR/CELL_ID/ (cell.json, train.ndjson, model.safetensors); --set writes a\n"
	      "        field into every cell before it is read (model fields as model.KEY=VALUE; VALUE is\n"
	      "        JSON, else a string), so fields derived from it (kv_heads, head_dim, max_T) follow\n"
	      "        as in a cell written so; a finished cell is skipped, a killed one resumes from its\n"
	      "        newest checkpoint (ckpt_every; docs/lm.md)\n"
	      "  eval [-o OUT_DIR] [-j N] [--masks LIST] [--probes N] [--windows N] [--bench-reps N]\n"
	      "       [--tasks LIST] [--budgets LIST] [--seed S] RUN_DIR\n"
	      "        evaluate a trained run on held-out text (the corpora's valid parts): fidelity of\n"
	      "        every mask against dense, the 13-task retrieval battery (N probes per task and\n"
	      "        method), budgets, block touches and kernel timings; writes OUT_DIR/eval.ndjson\n"
	      "        (default RUN_DIR/eval.ndjson)\n"
	      "        --masks LIST: masks separated by ';' (or ',' when none has parameters) among\n"
	      "        dense, recipe, struct_random, random, structure, h2o, blockB, each optionally\n"
	      "        NAME:s=S,w=W,k=K (defaults 4, 64, 32; default list: all of them, block16/64/128).\n"
	      "        Controls (every mask but dense and recipe) run at the recipe's budget: one\n"
	      "        written without parameters takes the recipe's ('recipe:k=16;struct_random');\n"
	      "        one with parameters must equal a recipe's exactly; with several recipes (a\n"
	      "        sweep) each control must give the parameters of its recipe. An ambiguous or\n"
	      "        unmatched control, a mask given twice, a mask parameter given twice or an empty\n"
	      "        list is a usage error (exit 2). Pair\n"
	      "        records compare a recipe only with dense and the controls of its parameters.\n"
	      "  report [-o OUT_DIR] EVAL.ndjson\n"
	      "        the report: OUT_DIR/lm-report.md, lm-retrieval.svg, lm-fidelity.svg,\n"
	      "        lm-blocks.svg; a record it reads with a field missing is bad input (exit 3)\n"
	      "  probe --task NAME [--len N] [--index I] [--depth D] [--corpus PATH]\n"
	      "        print one retrieval probe (for inspection)\n"
	      "  import [-o RUNS_DIR] -c|--corpus NAME=PATH [--haystack NAME] [--T N] HF_DIR\n"
	      "        a pretrained Llama, Mixtral, Qwen (MoE and Qwen3-Next too), OLMo (OLMoE too), SmolLM3,\n"
	      "        EXAONE 4, LFM2, Granite 4.0, Bamba, Falcon-H1, Jamba or Gemma decoder (Hugging Face\n"
	      "        directory: config.json, safetensors weights, tokenizer.json) as a run directory\n"
	      "        RUNS_DIR/CELL_ID/ that eval measures like a trained one (PROTOCOL C(b); sb-lm\n"
	      "        import --help)\n"
	      "  tokenize -t|--tokenizer TOKENIZER.json [--bos] [-d|--decode] [FILE]\n"
	      "        encode text to ids (one per line) or decode ids, as the evaluation of an imported\n"
	      "        model does (docs/tokenizer.md)\n"
	      "\n"
	      "Common options (every command takes them; COMMAND --help is the command's own text):\n"
	      "  -j, --threads N   worker threads (0 = all cores; default 0); report, probe, import\n"
	      "                    and tokenize run on one thread and check N only\n"
	      "  -q, --quiet       no progress lines\n"
	      "      --help, --version\n"
	      "\n"
	      "Exit status: 0 ok; 1 refused: a corpus or text whose bytes are a safetensors file with\n"
	      "split=test in its metadata (train, eval, probe, tokenize: only sb-test reads test data);\n"
	      "2 usage; 3 bad input data; 4 I/O error; 5 internal error.\n",
	      stdout);
}

/* obj[key] = val, replacing the value under key or adding the key; obj owns val from here on
 * (freed on failure too) */
static int json_put(struct sb_json *obj, const char *key, struct sb_json *val, struct sb_err *err)
{
	for (size_t i = 0; i < obj->n; i++)
		if (!strcmp(obj->keys[i], key)) {
			sb_json_free(obj->items[i]);
			obj->items[i] = val;
			return 0;
		}
	char **keys = realloc(obj->keys, (obj->n + 1) * sizeof *keys);
	if (keys)
		obj->keys = keys;
	struct sb_json **items = keys ? realloc(obj->items, (obj->n + 1) * sizeof *items) : NULL;
	if (items)
		obj->items = items;
	char *k = items ? strdup(key) : NULL;
	if (!k) {
		sb_json_free(val);
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	}
	obj->keys[obj->n] = k;
	obj->items[obj->n++] = val;
	return 0;
}

/* One --set KEY=VALUE (model fields as model.KEY=VALUE) written into the cell's JSON, as if
 * the cell said it: the cell is parsed again from that, so the fields derived from others
 * (kv_heads = heads, head_dim = d / heads, max_T = T) are derived again from the new values,
 * unless the cell or a --set gives them. (Setting them on the parsed cell kept the derived
 * values of the cell as written: --set model.d=32 on a cell of d 16, heads 2 gave head_dim 8,
 * not the 16 of a cell written with d 32.) VALUE is JSON when it parses as JSON, else a
 * string. */
static int apply_set(struct sb_json *cell, const char *kv, struct sb_err *err)
{
	const char *eq = strchr(kv, '=');
	int model = strncmp(kv, "model.", 6) == 0;
	const char *key = model ? kv + 6 : kv;
	if (!eq || eq == key || eq - key >= 64)
		return SB_ERR(err, SB_EUSAGE, "--set expects KEY=VALUE or model.KEY=VALUE, got '%s'", kv);
	char name[64];
	snprintf(name, sizeof name, "%.*s", (int)(eq - key), key);
	/* fields that the cell's reader skips (written into cell.json from the others) */
	if (model ? !strcmp(name, "n_layer") || !strcmp(name, "parameter_count")
	          : !strcmp(name, "cell_id") || !strcmp(name, "parameter_count") || !strcmp(name, "mixture_used"))
		return SB_ERR(err, SB_EUSAGE, "--set %.*s: derived from the other fields, not a setting",
			      (int)(eq - kv), kv);
	struct sb_json *val;
	struct sb_err e2 = {0};
	if (sb_json_parse(eq + 1, strlen(eq + 1), &val, &e2)) {
		struct sb_jw sw;
		sb_jw_init(&sw, NULL);
		sb_jw_str(&sw, eq + 1);
		int rc = sw.oom ? SB_ERR(err, SB_EINTERNAL, "out of memory") : sb_json_parse(sw.buf, sw.len, &val, err);
		sb_jw_free(&sw);
		if (rc)
			return rc;
	}
	if (!model)
		return json_put(cell, name, val, err);
	struct sb_json *m = (struct sb_json *)sb_json_get(cell, "model");
	if (!m) { /* (the cell parsed: a model it has is an object) */
		m = calloc(1, sizeof *m);
		if (!m) {
			sb_json_free(val);
			return SB_ERR(err, SB_EINTERNAL, "out of memory");
		}
		m->type = SB_JSON_OBJECT;
		if (json_put(cell, "model", m, err)) {
			sb_json_free(val);
			return err->code;
		}
	}
	return json_put(m, name, val, err);
}

static int cmd_train(int argc, char **argv)
{
	const char *runs = "runs";
	int threads = 0;
	char *sets[64];
	int nsets = 0;
	static const struct option lo[] = {{"out", 1, 0, 'o'},   {"threads", 1, 0, 'j'}, {"set", 1, 0, 's'},
					   {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'},    {"version", 0, 0, 'V'},
					   {0, 0, 0, 0}};
	int ch;
	struct sb_err err = {0};
	opterr = 0; /* one message of ours, not getopt's as well */
	while ((ch = getopt_long(argc, argv, ":o:j:q", lo, NULL)) != -1) {
		long long v;
		switch (ch) {
		case 'o': runs = optarg; break;
		case 'j':
			if (sb_parse_int("--threads", optarg, 0, 1024, &v, &err))
				sb_cli_die(&err);
			threads = (int)v;
			break;
		case 's':
			if (nsets == 64)
				sb_cli_usage_error("too many --set");
			if (!strchr(optarg, '=') || optarg[0] == '=' || !strncmp(optarg, "model.=", 7))
				sb_cli_usage_error("--set expects KEY=VALUE or model.KEY=VALUE, got '%s'", optarg);
			sets[nsets++] = optarg;
			break;
		case 'q': sb_quiet = 1; break;
		case 'h': usage(); return sb_cli_finish(0);
		case 'V': sb_cli_version();
		case ':': sb_cli_bad_option(argv, 1);
		default: sb_cli_bad_option(argv, 0);
		}
	}
	if (optind != argc - 1)
		sb_cli_usage_error("train needs one cells file (or -)");
	const char *cells = argv[optind];
	struct sb_backend *be;
	if (sb_backend_open("cpu", threads, &be, &err))
		sb_cli_die(&err);
	struct sb_ndjson_reader *r;
	if (sb_ndjson_open(cells, &r, &err))
		sb_cli_die(&err);
	struct sb_jw w;
	sb_jw_init(&w, stdout);
	struct sb_input in = {0};
	int nin = 0;
	if (strcmp(cells, "-") && !sb_input_hash(&in, cells, &err))
		nin = 1;
	struct sb_run_meta meta = {.device = be->device, .threads = be->threads, .inputs = &in, .n_inputs = nin};
	if (sb_record_run_meta(&w, &meta, &err))
		sb_cli_die(&err);
	struct sb_json *v;
	int rc = 0;
	while (!rc && !(rc = sb_ndjson_next(r, &v, &err)) && v) {
		struct sb_lm_cell c;
		rc = sb_lm_cell_parse(&c, v, &err);
		if (rc)
			sb_err_prefix(&err, "%s:%ld", sb_ndjson_name(r), sb_ndjson_line(r));
		/* the cell as written must parse on its own (bad input, exit 3); then the cell with
		 * every --set written into it, parsed once: a cell it makes invalid is misuse */
		for (int i = 0; i < nsets && !rc; i++)
			rc = apply_set(v, sets[i], &err);
		if (!rc && nsets && sb_lm_cell_parse(&c, v, &err)) {
			sb_err_prefix(&err, "%s:%ld with the --set values", sb_ndjson_name(r), sb_ndjson_line(r));
			rc = err.code = SB_EUSAGE;
		}
		sb_json_free(v);
		if (rc)
			break;
		char run_dir[4096];
		int skipped = 0;
		sb_lm_cell_id(&c, &err);
		struct sb_train_lm_prog tp = {c.cell_id, be};
		struct sb_lm_progress prog = sb_train_lm_progress(&tp);
		rc = sb_lm_train_cell(be, &c, runs, run_dir, &skipped, &prog, &err);
		sb_jw_record(&w, "lm.train", 1);
		sb_jw_kstr(&w, "cell_id", c.cell_id);
		sb_jw_kstr(&w, "run_dir", run_dir);
		sb_jw_kstr(&w, "status", rc ? "failed" : skipped ? "skipped" : "completed");
		if (rc)
			sb_jw_kstr(&w, "error", err.msg);
		sb_jw_obj_end(&w);
		struct sb_err e2 = {0};
		if (sb_jw_line(&w, &e2))
			sb_cli_die(&e2);
	}
	sb_ndjson_close(r);
	sb_jw_free(&w);
	sb_backend_close(be);
	if (rc)
		sb_cli_die(&err);
	return sb_cli_finish(0);
}

static int cmd_probe(int argc, char **argv)
{
	const char *task = NULL, *corpus = NULL;
	long long len = 512, index = 0;
	double depth = -1;
	struct sb_err err = {0};
	static const struct option lo[] = {{"task", 1, 0, 't'},  {"len", 1, 0, 'n'},    {"index", 1, 0, 'i'},
					   {"depth", 1, 0, 'd'}, {"corpus", 1, 0, 'c'}, {"threads", 1, 0, 'j'},
					   {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'},   {"version", 0, 0, 'V'},
					   {0, 0, 0, 0}};
	int ch;
	long long threads;
	opterr = 0;
	/* -j and -q as every sb-lm command takes them (sb-lm --help); a probe is made on one
	 * thread and prints no progress, so they change nothing here */
	while ((ch = getopt_long(argc, argv, ":j:q", lo, NULL)) != -1) {
		switch (ch) {
		case 't': task = optarg; break;
		case 'n':
			if (sb_parse_int("--len", optarg, 1, 1 << 20, &len, &err))
				sb_cli_die(&err);
			break;
		case 'i':
			if (sb_parse_int("--index", optarg, 0, 1ll << 40, &index, &err))
				sb_cli_die(&err);
			break;
		case 'd':
			if (sb_parse_double("--depth", optarg, 0, 1, &depth, &err))
				sb_cli_die(&err);
			break;
		case 'c': corpus = optarg; break;
		case 'j':
			if (sb_parse_int("--threads", optarg, 0, 1024, &threads, &err))
				sb_cli_die(&err);
			break;
		case 'q': sb_quiet = 1; break;
		case 'h': usage(); return sb_cli_finish(0);
		case 'V': sb_cli_version();
		case ':': sb_cli_bad_option(argv, 1);
		default: sb_cli_bad_option(argv, 0);
		}
	}
	int t = task ? sb_lm_task_parse(task) : -1;
	if (t < 0)
		sb_cli_usage_error("probe needs --task NAME (one of the 13 tasks)");
	struct sb_lm_corpus c = {0};
	if (corpus && sb_lm_corpus_read(corpus, "valid", &c, &err))
		sb_cli_die(&err);
	struct sb_lm_probe p;
	if (sb_lm_probe_make(t, (int)len, c.bytes, c.n, 0, 6 /* SB_RNG_SYNTH */, (uint64_t)index, depth, &p, &err))
		sb_cli_die(&err);
	fwrite(p.text, 1, (size_t)p.len, stdout);
	fprintf(stderr, "sb-lm: %s: %d turns; answers:", sb_lm_task_name(t), p.n_turns);
	for (int i = 0; i < p.n_turns; i++)
		fprintf(stderr, " '%.*s'", p.answer_end[i] - p.answer_beg[i] - 1, (const char *)p.text + p.answer_beg[i]);
	if (isnan(p.depth)) /* a task without a haystack (kv_recall): no depth */
		fputs("; no haystack, no depth\n", stderr);
	else
		fprintf(stderr, "; depth %.3f\n", p.depth);
	sb_lm_probe_free(&p);
	sb_lm_corpus_free(&c);
	return sb_cli_finish(0);
}

int main(int argc, char **argv)
{
	sb_cli_init("sb-lm", argc, argv);
	if (argc < 2)
		sb_cli_usage_error("missing command (train, eval, report, probe, import, tokenize)");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage();
		return sb_cli_finish(0);
	}
	if (!strcmp(argv[1], "--version"))
		sb_cli_version();
	/* the subcommand's own argv (argv[0], then what follows the command): a copy, so that
	 * run.meta's argv (sb_cli_argv) stays the command line as typed, command included */
	const char *cmd = argv[1];
	char **sub = malloc((size_t)argc * sizeof *sub);
	if (!sub) {
		struct sb_err err = {0};
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		sb_cli_die(&err);
	}
	sub[0] = argv[0];
	for (int i = 2; i <= argc; i++)
		sub[i - 1] = argv[i];
	argc--;
	argv = sub;
	int (*run)(int, char **) = !strcmp(cmd, "train")      ? cmd_train
	                           : !strcmp(cmd, "eval")     ? sb_lm_eval_main
	                           : !strcmp(cmd, "report")   ? sb_lm_report_main
	                           : !strcmp(cmd, "probe")    ? cmd_probe
	                           : !strcmp(cmd, "import")   ? sb_lm_import_main
	                           : !strcmp(cmd, "tokenize") ? sb_lm_tokenize_main
	                                                      : NULL;
	if (!run)
		sb_cli_usage_error("unknown command '%s' (train, eval, report, probe, import, tokenize)", cmd);
	int rc = run(argc, argv);
	free(sub);
	return rc;
}
