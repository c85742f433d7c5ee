/* sb-fetch — obtain, verify and decode the datasets of the study.
 *
 * Reads the registry (built in, or --registry FILE), finds each task's files in
 * the cache, the mirror directories or at their URLs, verifies every one
 * (size, SHA-256, or the pin/MD5 rules for unpublished hashes), decodes them
 * and writes DATA_DIR/TASK/{pool,test}.safetensors (lib/dataset.h) or a
 * corpus's {train,valid,test}.safetensors, with .sha256 sidecars. Records on
 * stdout: run.meta, then fetch.archive and fetch.split (fetch.failed on
 * error). See docs/sb-fetch.md. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dataset.h"
#include "io.h"
#include "json.h"
#include "record.h"
#include "sbf.h"

static void usage(void)
{
	printf("Usage: sb-fetch [-m MIRROR_DIR]... [-c CACHE_DIR] [-o DATA_DIR] [OPTION]... TASK...\n"
	       "       sb-fetch --list [--registry FILE]\n"
	       "\n"
	       "Obtain, verify and decode the datasets of the sparsebench studies (PROTOCOL A1,\n"
	       "B, C). For each TASK, every file it needs is looked for in CACHE_DIR, then in each\n"
	       "MIRROR_DIR (as DIR/GROUP/NAME, then DIR/NAME), then downloaded from its URLs in\n"
	       "registry order; whichever way it came it is verified (size and SHA-256, or the\n"
	       "pin rules below) before it is read. The task is then decoded and written as\n"
	       "DATA_DIR/TASK/pool.safetensors and test.safetensors (corpora: train, valid,\n"
	       "test), each with a .sha256 sidecar. Outputs that verify and were made from the\n"
	       "same inputs are left alone: re-running is a no-op that re-verifies.\n"
	       "\n"
	       "Options:\n"
	       "  -m, --mirror DIR     look for files in DIR before downloading (repeatable; the\n"
	       "                       directories in $SB_MIRROR, colon-separated, come after)\n"
	       "  -c, --cache DIR      download cache and pins file (default $SB_CACHE, else\n"
	       "                       $XDG_CACHE_HOME/sparsebench, else ~/.cache/sparsebench)\n"
	       "  -o, --output DIR     data directory (default $SB_DATA, else ./data)\n"
	       "      --list           print the registry's tasks as NDJSON (fetch.task records)\n"
	       "      --registry FILE  use FILE instead of the built-in registry (test fixtures)\n"
	       "      --offline        never use the network: cache and mirrors only\n"
	       "      --seeds LIST     synthetic_marker seeds, e.g. 0-9 or 0,3,7 (default 0-9)\n"
	       "      --retries N      retries per URL after the first attempt (default 3),\n"
	       "                       with exponential backoff from $SB_FETCH_BACKOFF_MS (1000)\n"
	       "      --timeout S      connection timeout in seconds (default 30); a transfer\n"
	       "                       that stalls for 2*S seconds is retried\n"
	       "  -q, --quiet          no progress lines on stderr\n"
	       "      --help           show this help and exit\n"
	       "      --version        show the version and exit\n"
	       "\n"
	       "Tasks (sb-fetch --list has the details): mnist fashion_mnist kmnist cifar10\n"
	       "cifar100 twenty_news synthetic_marker emnist_balanced emnist_letters\n"
	       "emnist_digits k49 svhn usps, and the corpora wikitext2 wikitext2_v1\n"
	       "wikitext2_raw tinyshakespeare jargon.\n"
	       "\n"
	       "Verification: a file with a published SHA-256 must match it (and its size). A\n"
	       "gzip file with a content_sha256 is also accepted when its decompressed bytes\n"
	       "match (mirrors that re-compress, like Debian's Fashion-MNIST). A file without a\n"
	       "published SHA-256 is pinned on first fetch: checked against the published size\n"
	       "and MD5 where they exist, its SHA-256 is recorded in CACHE_DIR/pins.ndjson and\n"
	       "required from then on. A file that fails is refused with the expected and actual\n"
	       "hashes; a cache or downloaded file is renamed NAME.wrong (mirror files are left\n"
	       "alone) and the search goes on; if nothing verifies, nothing is written for the\n"
	       "task and sb-fetch exits 3.\n"
	       "\n"
	       "Downloads go to CACHE_DIR/GROUP/NAME.part (resumed when present), with\n"
	       "redirects, timeouts, retries and a progress line on stderr; libcurl honours\n"
	       "http_proxy, https_proxy, ALL_PROXY and NO_PROXY. Concurrent runs on one cache\n"
	       "or data directory are safe (flock; files appear only by atomic rename).\n"
	       "\n"
	       "Records (NDJSON on stdout, docs/sb-fetch.md): run.meta; fetch.archive per file\n"
	       "(task, file, origin cache|mirror|url, path, url, size_bytes, sha256, md5,\n"
	       "verified_by sha256|content_sha256|pin|first-fetch); fetch.split per output\n"
	       "(task, split, path, sha256, size_bytes, n, status written|verified);\n"
	       "fetch.failed (task, code, error); with --list, fetch.task per task.\n"
	       "\n"
	       "Exit status: 0 all tasks done; 2 usage error; 3 bad data (hash mismatch,\n"
	       "malformed or inconsistent file); 4 I/O or network error (file not found\n"
	       "anywhere); 5 internal error. With several tasks, the first failure's status.\n"
	       "\n"
	       "Examples:\n"
	       "  sb-fetch -m /usr/share/datasets/fashion-mnist -o data fashion_mnist\n"
	       "  sb-fetch -o data synthetic_marker --seeds 0-4\n"
	       "  sb-fetch -c ~/.cache/sparsebench -o data cifar10 svhn\n"
	       "  sb-fetch --list | jq -r 'select(.kind == \"fetch.task\") | .task'\n");
}

/* "0-9" or "0,3,7" or "1,4-6" */
static int parse_seeds(const char *s, int64_t *out, int max)
{
	int n = 0;
	const char *p = s;
	while (*p) {
		char *e;
		long long a = strtoll(p, &e, 10), b;
		if (e == p || a < 0 || a > 2000000000)
			return -1;
		b = a;
		if (*e == '-') {
			p = e + 1;
			b = strtoll(p, &e, 10);
			if (e == p || b < a || b > 2000000000)
				return -1;
		}
		for (long long v = a; v <= b; v++) {
			if (n == max)
				return -1;
			for (int i = 0; i < n; i++)
				if (out[i] == v)
					return -1;
			out[n++] = v;
		}
		if (*e == ',')
			e++;
		else if (*e)
			return -1;
		p = e;
	}
	return n;
}

static void list_tasks(const struct sbf_registry *reg, struct sb_jw *w)
{
	const struct sb_json *tasks = sb_json_get(reg->root, "tasks");
	for (size_t i = 0; i < tasks->n; i++) {
		const struct sb_json *t = tasks->items[i];
		sb_jw_record(w, "fetch.task", 1);
		for (size_t k = 0; k < t->n; k++) {
			sb_jw_key(w, t->keys[k]);
			sb_jw_value(w, t->items[k]);
		}
		sb_jw_key(w, "files");
		sb_jw_arr(w);
		for (size_t f = 0; f < reg->nfiles; f++) {
			const struct sbf_file *rf = &reg->files[f];
			/* a file belongs to the task when the task names it anywhere */
			int used = 0;
			const struct sb_json *stack[64];
			int sp = 0;
			stack[sp++] = t;
			while (sp > 0 && !used) {
				const struct sb_json *v = stack[--sp];
				if (v->type == SB_JSON_STRING && !strcmp(v->text, rf->id))
					used = 1;
				else if (v->type == SB_JSON_ARRAY || v->type == SB_JSON_OBJECT)
					for (size_t j = 0; j < v->n && sp < 64; j++)
						stack[sp++] = v->items[j];
			}
			if (!used)
				continue;
			sb_jw_obj(w);
			sb_jw_kstr(w, "id", rf->id);
			sb_jw_kstr(w, "name", rf->name);
			for (size_t j = 0; j < rf->json->n; j++) {
				sb_jw_key(w, rf->json->keys[j]);
				sb_jw_value(w, rf->json->items[j]);
			}
			sb_jw_kstr(w, "pin", rf->sha256 ? "published" : "first-fetch");
			sb_jw_obj_end(w);
		}
		sb_jw_arr_end(w);
		sb_jw_kstr(w, "registry_version", reg->version);
		sb_jw_obj_end(w);
		sb_jw_line(w, NULL);
	}
}

int main(int argc, char **argv)
{
	sb_cli_init("sb-fetch", argc, argv);
	const char *cache = NULL, *out = NULL, *regpath = NULL, *seeds_arg = "0-9";
	const char **mirrors = calloc((size_t)argc + 64, sizeof *mirrors);
	int nmir = 0, list = 0, offline = 0;
	long long retries = 3;
	double timeout = 30;
	struct sb_err err = {0};
	enum { O_LIST = 256, O_REG, O_OFF, O_SEEDS, O_RETRIES, O_TIMEOUT, O_HELP, O_VERSION };
	static const struct option opts[] = {{"mirror", required_argument, 0, 'm'},
	                                     {"cache", required_argument, 0, 'c'},
	                                     {"output", required_argument, 0, 'o'},
	                                     {"quiet", no_argument, 0, 'q'},
	                                     {"list", no_argument, 0, O_LIST},
	                                     {"registry", required_argument, 0, O_REG},
	                                     {"offline", no_argument, 0, O_OFF},
	                                     {"seeds", required_argument, 0, O_SEEDS},
	                                     {"retries", required_argument, 0, O_RETRIES},
	                                     {"timeout", required_argument, 0, O_TIMEOUT},
	                                     {"help", no_argument, 0, O_HELP},
	                                     {"version", no_argument, 0, O_VERSION},
	                                     {0, 0, 0, 0}};
	if (!mirrors) {
		fprintf(stderr, "sb-fetch: out of memory\n");
		return SB_EINTERNAL;
	}
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, ":m:c:o:q", opts, NULL)) != -1) {
		switch (ch) {
		case 'm':
			mirrors[nmir++] = optarg;
			break;
		case 'c':
			cache = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'q':
			sb_quiet = 1;
			break;
		case O_LIST:
			list = 1;
			break;
		case O_REG:
			regpath = optarg;
			break;
		case O_OFF:
			offline = 1;
			break;
		case O_SEEDS:
			seeds_arg = optarg;
			break;
		case O_RETRIES:
			if (sb_parse_int("--retries", optarg, 0, 20, &retries, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case O_TIMEOUT:
			if (sb_parse_double("--timeout", optarg, 0.1, 3600, &timeout, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case O_HELP:
			usage();
			return sb_cli_finish(0);
		case O_VERSION:
			sb_cli_version();
		case ':':
			sb_cli_bad_option(argv, 1);
		default:
			sb_cli_bad_option(argv, 0);
		}
	}
	int64_t seeds[1024];
	int nseeds = parse_seeds(seeds_arg, seeds, 1024);
	if (nseeds <= 0)
		sb_cli_usage_error("invalid value for --seeds: '%s' (e.g. 0-9 or 0,3,7)", seeds_arg);
	if (!list && optind >= argc)
		sb_cli_usage_error("no TASK given (sb-fetch --list shows them)");
	if (list && optind < argc)
		sb_cli_usage_error("--list takes no TASK");

	/* mirrors from the environment come after -m */
	char *envm = getenv("SB_MIRROR") ? strdup(getenv("SB_MIRROR")) : NULL;
	for (char *save = NULL, *tok = envm ? strtok_r(envm, ":", &save) : NULL; tok && nmir < argc + 63;
	     tok = strtok_r(NULL, ":", &save))
		mirrors[nmir++] = tok;
	char *defcache = NULL;
	if (!cache && (cache = getenv("SB_CACHE")) && !*cache)
		cache = NULL;
	if (!cache) {
		const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
		if (x && *x)
			defcache = sb_path_join(x, "sparsebench");
		else if (h && *h)
			defcache = sb_path_join(h, ".cache/sparsebench");
		else
			defcache = strdup(".sparsebench-cache");
		cache = defcache;
	}
	if (!out && (out = getenv("SB_DATA")) && !*out)
		out = NULL;
	if (!out)
		out = "data";

	struct sbf_registry reg;
	if (sbf_registry_load(&reg, regpath, &err))
		sb_cli_die(&err);
	for (int i = optind; i < argc; i++)
		if (!sbf_task(&reg, argv[i]))
			sb_cli_usage_error("unknown task '%s' (sb-fetch --list shows the tasks)", argv[i]);

	struct sb_jw w;
	sb_jw_init(&w, stdout);
	struct sb_input in = {.path = reg.path, .size_bytes = reg.size};
	memcpy(in.sha256, reg.sha256, sizeof in.sha256);
	struct sb_run_meta meta = {.device = "cpu", .threads = 1, .inputs = &in, .n_inputs = 1};
	if (sb_record_run_meta(&w, &meta, &err))
		sb_cli_die(&err);
	if (list) {
		list_tasks(&reg, &w);
		sb_jw_free(&w);
		sbf_registry_free(&reg);
		return sb_cli_finish(0);
	}

	const char *bo = getenv("SB_FETCH_BACKOFF_MS");
	struct sbf_ctx ctx = {.cache = cache,
	                      .out = out,
	                      .mirrors = mirrors,
	                      .nmirrors = nmir,
	                      .offline = offline,
	                      .retries = (int)retries,
	                      .connect_timeout_s = timeout,
	                      .stall_timeout_s = 2 * timeout,
	                      .backoff_ms = bo && *bo ? atol(bo) : 1000,
	                      .reg = &reg,
	                      .w = &w};
	if (ctx.backoff_ms < 0)
		ctx.backoff_ms = 0;
	sbf_http_global(1);
	int rc = 0;
	for (int i = optind; i < argc; i++) {
		int dup = 0;
		for (int j = optind; j < i; j++)
			dup |= !strcmp(argv[i], argv[j]);
		if (dup)
			continue;
		sb_err_clear(&err);
		int r = sbf_run_task(&ctx, sbf_task(&reg, argv[i]), seeds, nseeds, &err);
		if (r) {
			fprintf(stderr, "sb-fetch: %s\n", err.msg[0] ? err.msg : "failed");
			sb_jw_record(&w, "fetch.failed", 1);
			sb_jw_kstr(&w, "task", argv[i]);
			sb_jw_kint(&w, "code", r);
			sb_jw_kstr(&w, "error", err.msg);
			sb_jw_obj_end(&w);
			sb_jw_line(&w, NULL);
			if (!rc)
				rc = r;
		}
	}
	sbf_http_global(0);
	sb_jw_free(&w);
	sbf_registry_free(&reg);
	free(envm);
	free(defcache);
	free(mirrors);
	return sb_cli_finish(rc);
}
