/* lm_cmds.c — `sb-lm eval` and `sb-lm report`: option parsing, files, progress;
 * the work is lib/lm_eval.c and lib/lm_report.c. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "cli.h"
#include "io.h"
#include "json.h"
#include "lm_eval.h"
#include "lm_import.h"
#include "dataset.h"
#include "tokenizer.h"
#include "record.h"

static void eval_progress(void *arg, const char *phase, int done, int total)
{
	sb_progress(done == total, "%s: %s %d/%d", (const char *)arg, phase, done, total);
}

/* -o OUT_DIR, made when missing; a run that fails before writing into it leaves no empty
 * directory behind (rmdir at exit removes it only while it is empty) */
static char *made_dir;
static void remove_made_dir(void)
{
	if (made_dir)
		rmdir(made_dir);
}
static int make_out_dir(const char *dir, struct sb_err *err)
{
	struct stat st;
	if (stat(dir, &st) != 0 && !made_dir) {
		made_dir = strdup(dir);
		if (made_dir)
			atexit(remove_made_dir);
	}
	return sb_mkdir_p(dir, err);
}

int sb_lm_eval_main(int argc, char **argv)
{
	struct sb_lm_eval_opts o;
	sb_lm_eval_defaults(&o);
	const char *out_dir = NULL;
	int threads = 0;
	struct sb_err err = {0};
	static const struct option lo[] = {{"out", 1, 0, 'o'},        {"threads", 1, 0, 'j'}, {"masks", 1, 0, 'm'},
					   {"probes", 1, 0, 'p'},     {"windows", 1, 0, 'w'}, {"tasks", 1, 0, 't'},
					   {"bench-reps", 1, 0, 'r'}, {"budgets", 1, 0, 'b'}, {"seed", 1, 0, 's'},
					   {"quiet", 0, 0, 'q'},      {"help", 0, 0, 'h'},    {"version", 0, 0, 'V'},
					   {0, 0, 0, 0}};
	int ch;
	long long v;
	opterr = 0; /* one message of ours, not getopt's as well */
	while ((ch = getopt_long(argc, argv, ":o:j:q", lo, NULL)) != -1) {
		switch (ch) {
		case 'o': out_dir = optarg; break;
		case 'j':
			if (sb_parse_int("--threads", optarg, 0, 1024, &v, &err))
				sb_cli_die(&err);
			threads = (int)v;
			break;
		case 'm':
			if (sb_lm_eval_set_masks(&o, optarg, &err))
				sb_cli_die(&err);
			break;
		case 't':
			if (sb_lm_eval_set_tasks(&o, optarg, &err))
				sb_cli_die(&err);
			break;
		case 'p':
			if (sb_parse_int("--probes", optarg, 0, 100000, &v, &err))
				sb_cli_die(&err);
			o.n_probes = (int)v;
			break;
		case 'w':
			if (sb_parse_int("--windows", optarg, 0, 100000, &v, &err))
				sb_cli_die(&err);
			o.n_windows = (int)v;
			break;
		case 'r':
			if (sb_parse_int("--bench-reps", optarg, 1, 10000, &v, &err))
				sb_cli_die(&err);
			o.bench_reps = (int)v;
			break;
		case 's':
			if (sb_parse_int("--seed", optarg, 0, 1ll << 62, &v, &err))
				sb_cli_die(&err);
			o.seed = (uint64_t)v;
			break;
		case 'b':
			if (sb_lm_eval_set_budgets(&o, optarg, &err))
				sb_cli_die(&err);
			break;
		case 'q': sb_quiet = 1; break;
		case 'h':
			puts("Usage: sb-lm eval [-o OUT_DIR] [-j N] [--masks LIST] [--tasks LIST] [--probes N]\n"
			     "                  [--windows N] [--bench-reps N] [--budgets K,K,...] [--seed N] RUN_DIR\n"
			     "LIST: masks separated by ';' (',' when none has parameters), NAME[:s=S,w=W,k=K];\n"
			     "a control without parameters takes the recipe's; see sb-lm --help and docs/lm.md.\n"
			     "--budgets: 1 to 8 numbers (an empty item or a ninth is a usage error).\n"
			     "--windows 0 evaluates retrieval only, --probes 0 fidelity only (their statistics are\n"
			     "written as null, the report says n/a); both 0 is a usage error.\n"
			     "Exit status: 0 ok, 1 refused (a corpus whose bytes are a split=test safetensors file),\n"
			     "2 usage, 3 bad input data, 4 I/O error, 5 internal error.");
			return sb_cli_finish(0);
		case 'V': sb_cli_version();
		case ':': sb_cli_bad_option(argv, 1);
		default: sb_cli_bad_option(argv, 0);
		}
	}
	if (optind != argc - 1)
		sb_cli_usage_error("eval needs one run directory");
	if (sb_lm_eval_check(&o, &err)) /* before the output directory is made */
		sb_cli_die(&err);
	const char *run_dir = argv[optind];
	char path[4600];
	snprintf(path, sizeof path, "%s/eval.ndjson", out_dir ? out_dir : run_dir);
	if (out_dir && make_out_dir(out_dir, &err))
		sb_cli_die(&err);
	struct sb_backend *be;
	if (sb_backend_open("cpu", threads, &be, &err))
		sb_cli_die(&err);
	struct sb_atomic a;
	if (sb_atomic_open(&a, path, &err))
		sb_cli_die(&err);
	struct sb_jw w;
	sb_jw_init(&w, a.f);
	struct sb_input in[2];
	int nin = 0;
	char mp[4600];
	snprintf(mp, sizeof mp, "%s/model.safetensors", run_dir);
	if (!sb_input_hash(&in[0], mp, &err))
		nin = 1;
	struct sb_run_meta meta = {.device = be->device, .threads = be->threads, .inputs = in, .n_inputs = nin};
	int rc = sb_record_run_meta(&w, &meta, &err);
	o.progress = eval_progress;
	o.progress_arg = (void *)run_dir;
	if (!rc)
		rc = sb_lm_eval_run(be, run_dir, &o, &w, &err);
	const char *note = rc ? NULL : sb_lm_blas_note(); /* on the efficiency records just written */
	if (note && !sb_quiet)
		sb_cli_warn("%s: %s", run_dir, note);
	sb_jw_free(&w);
	if (!rc)
		rc = sb_atomic_commit(&a, &err);
	else
		sb_atomic_abort(&a);
	sb_backend_close(be);
	/* as sb-eval: the messages name the file; the run directory is added when they do not */
	if (rc && !strstr(err.msg, run_dir))
		sb_err_prefix(&err, "%s", run_dir);
	if (rc)
		sb_cli_die(&err);
	printf("%s\n", path);
	return sb_cli_finish(0);
}

int sb_lm_report_main(int argc, char **argv)
{
	const char *out_dir = ".";
	struct sb_err err = {0};
	static const struct option lo[] = {{"out", 1, 0, 'o'},  {"threads", 1, 0, 'j'}, {"quiet", 0, 0, 'q'},
					   {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'}, {0, 0, 0, 0}};
	int ch;
	long long threads;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":o:j:q", lo, NULL)) != -1) {
		switch (ch) {
		case 'o': out_dir = optarg; break;
		case 'j': /* accepted like every sb-lm command's; the report is written on one thread */
			if (sb_parse_int("--threads", optarg, 0, 1024, &threads, &err))
				sb_cli_die(&err);
			break;
		case 'q': sb_quiet = 1; break;
		case 'V': sb_cli_version();
		case 'h':
			puts("Usage: sb-lm report [-o OUT_DIR] EVAL.ndjson\n"
			     "Writes OUT_DIR/lm-report.md, lm-retrieval.svg, lm-fidelity.svg, lm-blocks.svg.");
			return sb_cli_finish(0);
		case ':': sb_cli_bad_option(argv, 1);
		default: sb_cli_bad_option(argv, 0);
		}
	}
	if (optind != argc - 1)
		sb_cli_usage_error("report needs one eval.ndjson");
	if (make_out_dir(out_dir, &err) || sb_lm_report_write(argv[optind], out_dir, &err))
		sb_cli_die(&err);
	printf("%s/lm-report.md\n", out_dir);
	return sb_cli_finish(0);
}

/* ---------------------------------------------------------------- sb-lm import */

int sb_lm_import_main(int argc, char **argv)
{
	struct sb_lm_import_opts o;
	memset(&o, 0, sizeof o);
	const char *runs = "runs";
	int threads = 1;
	long long v;
	struct sb_err err = {0};
	static const struct option lo[] = {{"out", 1, 0, 'o'},     {"corpus", 1, 0, 'c'}, {"haystack", 1, 0, 'y'},
					   {"T", 1, 0, 'T'},       {"threads", 1, 0, 'j'}, {"quiet", 0, 0, 'q'},
					   {"help", 0, 0, 'h'},    {"version", 0, 0, 'V'}, {0, 0, 0, 0}};
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":o:c:j:q", lo, NULL)) != -1) {
		switch (ch) {
		case 'o': runs = optarg; break;
		case 'c':
			if (o.n_corpora >= 8 || strlen(optarg) >= sizeof o.corpora[0] || !strchr(optarg, '='))
				sb_cli_usage_error("--corpus NAME=PATH (at most 8)");
			snprintf(o.corpora[o.n_corpora++], sizeof o.corpora[0], "%s", optarg);
			break;
		case 'y':
			if (strlen(optarg) >= sizeof o.haystack)
				sb_cli_usage_error("--haystack NAME: a corpus name");
			snprintf(o.haystack, sizeof o.haystack, "%s", optarg);
			break;
		case 'T':
			if (sb_parse_int("--T", optarg, 8, 1 << 20, &v, &err))
				sb_cli_die(&err);
			o.T = (int)v;
			break;
		case 'j':
			if (sb_parse_int("--threads", optarg, 0, 1024, &v, &err))
				sb_cli_die(&err);
			threads = (int)v;
			break;
		case 'q': sb_quiet = 1; break;
		case 'h':
			puts("Usage: sb-lm import [-o RUNS_DIR] -c|--corpus NAME=PATH [--corpus ...] [--haystack NAME]\n"
			     "                    [--T N] HF_DIR\n"
			     "A pretrained decoder of the Llama/Qwen family (Granite 3 too), or the hybrid LFM2 or\n"
			     "Granite 4.0\n"
			     "(PROTOCOL C(b)),\n"
			     "from a Hugging Face directory (config.json; model.safetensors or\n"
			     "model.safetensors.index.json and its shards; tokenizer.json) into\n"
			     "RUNS_DIR/CELL_ID/ (default RUNS_DIR: runs), which\n"
			     "sb-eval and sb-lm eval evaluate like a trained LM run: cell.json (the model, the\n"
			     "SHA-256 of every file read, the evaluation text), model.safetensors (the weights in\n"
			     "their dtype, under the toolkit's names) and a copy of tokenizer.json.\n"
			     "  -c, --corpus NAME=PATH  held-out text for fidelity and the probes' essays (an\n"
			     "                      sb-fetch corpus directory or a text file; read here as the\n"
			     "                      evaluation will read it: a missing file is refused, and so is\n"
			     "                      a split=test file, exit 1)\n"
			     "  --haystack NAME     the corpus of the probes' essays, one of the --corpus names\n"
			     "                      (default: the first)\n"
			     "  --T N               evaluation context in tokens (default min(512, max_position_embeddings))\n"
			     "Read (model_type): dense decoders llama, mistral (T within its sliding_window), phi3\n"
			     "(Phi-3, Phi-4; not LongRoPE), granite (Granite 3, with its four multipliers), qwen2,\n"
			     "qwen3, smollm3, exaone4, olmo2, olmo3, ministral, cohere2 (an MLP in parallel), gemma2\n"
			     "(its soft-capping included), gemma3_text and gemma3 (the language model of the\n"
			     "multimodal layout): where layers slide (olmo3, exaone4, ministral, cohere2, gemma*)\n"
			     "the global ones are masked, the sliding-window ones run unchanged; mixtures of experts\n"
			     "granitemoe, granitemoeshared, qwen2_moe, qwen3_moe, mixtral and olmoe; hybrids lfm2\n"
			     "(gated short convolutions), granitemoehybrid and bamba (Mamba2), jamba (Mamba) and\n"
			     "qwen3_next (gated DeltaNet): their attention layers masked, their other layers\n"
			     "unchanged; falcon_h1 (Falcon-H1): every layer's attention masked, the Mamba2 mixer\n"
			     "beside it unchanged;\n"
			     "F32/BF16/F16 weights; RoPE scaling none, llama3, linear or yarn (as transformers 5\n"
			     "and vLLM read it).\n"
			     "Anything else is refused, naming the field (docs/lm.md). An existing run of the same\n"
			     "cell is kept. stdout: one lm.import record {cell_id, run_dir, status}.\n"
			     "-j N and -q as every sb-lm command's (the import runs on one thread).\n"
			     "A model of more than 256 ids needs its tokenizer.json (else exit 3).\n"
			     "Exit status: 0 ok, 1 refused (a --corpus whose bytes are a safetensors file with\n"
			     "split=test in its metadata: only sb-test reads test data), 2 usage, 3 bad input data,\n"
			     "4 I/O error, 5 internal error.");
			return sb_cli_finish(0);
		case 'V': sb_cli_version();
		case ':': sb_cli_bad_option(argv, 1);
		default: sb_cli_bad_option(argv, 0);
		}
	}
	if (optind != argc - 1)
		sb_cli_usage_error("import needs one Hugging Face model directory");
	(void)threads; /* accepted like every sb-lm command's; the import computes nothing */
	struct sb_lm_cell *cell = malloc(sizeof *cell);
	char *run_dir = malloc(4096);
	if (!cell || !run_dir) {
		SB_ERR(&err, SB_EINTERNAL, "out of memory");
		sb_cli_die(&err);
	}
	int existed = 0;
	sb_progress(0, "importing %s", argv[optind]);
	if (sb_lm_import(argv[optind], runs, &o, cell, run_dir, &existed, &err))
		sb_cli_die(&err);
	sb_progress(1, "%s: %s", existed ? "already imported" : "imported", run_dir);
	struct sb_jw w;
	sb_jw_init(&w, stdout);
	sb_jw_record(&w, "lm.import", 1);
	sb_jw_kstr(&w, "cell_id", cell->cell_id);
	sb_jw_kstr(&w, "run_dir", run_dir);
	sb_jw_kstr(&w, "status", existed ? "existed" : "imported");
	sb_jw_obj_end(&w);
	if (sb_jw_line(&w, &err))
		sb_cli_die(&err);
	sb_jw_free(&w);
	free(cell);
	free(run_dir);
	return sb_cli_finish(0);
}

/* ---------------------------------------------------------------- sb-lm tokenize */

int sb_lm_tokenize_main(int argc, char **argv)
{
	const char *tok_path = NULL;
	int decode = 0, bos = 0;
	struct sb_err err = {0};
	static const struct option lo[] = {{"tokenizer", 1, 0, 't'}, {"decode", 0, 0, 'd'},  {"bos", 0, 0, 'b'},
					   {"threads", 1, 0, 'j'},   {"quiet", 0, 0, 'q'},   {"help", 0, 0, 'h'},
					   {"version", 0, 0, 'V'},   {0, 0, 0, 0}};
	int ch;
	long long threads;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":t:dj:q", lo, NULL)) != -1) {
		switch (ch) {
		case 't': tok_path = optarg; break;
		case 'd': decode = 1; break;
		case 'b': bos = 1; break;
		case 'j': /* accepted like every sb-lm command's; the tokenizer runs on one thread */
			if (sb_parse_int("--threads", optarg, 0, 1024, &threads, &err))
				sb_cli_die(&err);
			break;
		case 'q': sb_quiet = 1; break;
		case 'V': sb_cli_version();
		case 'h':
			puts("Usage: sb-lm tokenize -t|--tokenizer TOKENIZER.json [--bos] [FILE|-]\n"
			     "       sb-lm tokenize -t|--tokenizer TOKENIZER.json -d|--decode [FILE|-]\n"
			     "Encode UTF-8 text (FILE or stdin) with a Hugging Face BPE tokenizer (byte-level, or\n"
			     "SentencePiece-style as converted for Llama 2, Mistral and Gemma), as\n"
			     "the LM evaluation of an imported model does (docs/tokenizer.md): one id per line on\n"
			     "stdout; --bos puts the tokenizer's leading special token first when its post-processor\n"
			     "has one (Hugging Face's add_special_tokens default). -d, --decode reads whitespace-separated\n"
			     "ids and writes their bytes. With an NFC normalizer (Qwen2) the text is normalised\n"
			     "first, so --decode gives back its NFC. -j N and -q as every sb-lm command's (one thread,\n"
			     "no progress lines).\n"
			     "Exit status: 0 ok, 1 refused (FILE's bytes are a safetensors file with split=test in its\n"
			     "metadata: only sb-test reads test data), 2 usage, 3 bad input data (the tokenizer, invalid\n"
			     "UTF-8, an id outside the vocabulary), 4 I/O error.");
			return sb_cli_finish(0);
		case ':': sb_cli_bad_option(argv, 1);
		default: sb_cli_bad_option(argv, 0);
		}
	}
	if (!tok_path)
		sb_cli_usage_error("tokenize needs --tokenizer FILE");
	if (optind < argc - 1)
		sb_cli_usage_error("tokenize reads one FILE (or stdin)");
	const char *in = optind < argc ? argv[optind] : "-";
	const char *in_name = strcmp(in, "-") ? in : "stdin";
	struct sb_tok *tok;
	if (sb_tok_load(tok_path, &tok, &err))
		sb_cli_die(&err);
	char *buf;
	size_t n;
	int rc = !strcmp(in, "-") ? sb_read_stream(stdin, "stdin", &buf, &n, 0, &err) : sb_read_file(in, &buf, &n, 0, &err);
	if (rc)
		sb_cli_die(&err);
	if (sb_bytes_are_test_split(buf, n)) {
		SB_ERR(&err, SB_EVERDICT,
		       "%s: a file whose safetensors metadata says split=test: refusing to read it (only sb-test reads "
		       "test data)",
		       in_name);
		sb_cli_die(&err);
	}
	if (!decode) {
		int32_t *ids;
		size_t ni;
		if (sb_tok_encode(tok, buf, n, &ids, &ni, &err)) {
			sb_err_prefix(&err, "%s", in_name);
			sb_cli_die(&err);
		}
		if (bos && sb_tok_bos(tok) >= 0)
			printf("%d\n", (int)sb_tok_bos(tok));
		for (size_t i = 0; i < ni; i++)
			printf("%d\n", (int)ids[i]);
		free(ids);
	} else {
		size_t cap = 1024, ni = 0;
		int32_t *ids = malloc(cap * sizeof *ids);
		char *p = buf, *end;
		for (;;) {
			while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
				p++;
			if (!*p)
				break;
			long v = strtol(p, &end, 10);
			if (end == p || v < 0 || v > INT32_MAX) {
				SB_ERR(&err, SB_EDATA, "%s: byte %zu: expected a token id", in_name, (size_t)(p - buf));
				sb_cli_die(&err);
			}
			if (ni == cap) {
				int32_t *q = ids ? realloc(ids, 2 * cap * sizeof *ids) : NULL;
				if (!q) {
					SB_ERR(&err, SB_EINTERNAL, "out of memory");
					sb_cli_die(&err);
				}
				ids = q;
				cap *= 2;
			}
			ids[ni++] = (int32_t)v;
			p = end;
		}
		char *out;
		size_t no;
		if (sb_tok_decode(tok, ids, ni, &out, &no, &err)) {
			sb_err_prefix(&err, "%s", in_name);
			sb_cli_die(&err);
		}
		fwrite(out, 1, no, stdout);
		free(out);
		free(ids);
	}
	free(buf);
	sb_tok_free(tok);
	return sb_cli_finish(0);
}
