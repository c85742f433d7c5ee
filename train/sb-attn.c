/* sb-attn — apply one attention normaliser to score rows read as NDJSON.
 *
 * One JSON array of scores per input line in, the normalised row out as one
 * JSON array per line (with --backward: {"scores":[..],"grad":[..]} in, the
 * gradient with respect to the scores out). For inspecting a normaliser with
 * ordinary tools and checking it against any reference. See usage() and
 * docs/sb-attn.md.
 */
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_norm.h"
#include "cli.h"
#include "json.h"

static void usage(void)
{
	printf("Usage: sb-attn --method M [OPTION]... [FILE]\n"
	       "Apply an attention normaliser (PROTOCOL A3) to rows of scores.\n"
	       "\n"
	       "Reads NDJSON from FILE (default '-', stdin): one JSON array of scores per line (a\n"
	       "row; rows may differ in length). Writes one JSON array per input line: the\n"
	       "probabilities p = normalise(scores). With --backward each input line is an object\n"
	       "{\"scores\":[...],\"grad\":[...]} (grad = dL/dp, the same length) and the output is\n"
	       "dL/dscores. A score may be null or \"nan\" (NaN), \"inf\" or \"-inf\" (a number beyond\n"
	       "the double range, such as 1e400, reads as infinite too); non-finite\n"
	       "outputs are written as null. Blank lines are skipped. No run.meta line is written:\n"
	       "the output is exactly one row per input row.\n"
	       "\n"
	       "Options:\n"
	       "  -m, --method M     softmax, topk_softmax_0125, topk_softmax_025 (= topk_softmax),\n"
	       "                     topk_softmax_05, bottomk_softmax_0125, bottomk_softmax_025\n"
	       "                     (= bottomk_softmax), bottomk_softmax_05 (another ratio: its\n"
	       "                     digits after the point, topk_softmax_0375 = 0.375), sparsemax,\n"
	       "                     entmax15, entmax_bisect, headwise_adaptive_entmax\n"
	       "  -r, --ratio R      top-k/bottom-k ratio in (0, 1], overriding the name's; keys kept:\n"
	       "                     k = max(1, ceil(R n_valid)), ties to the lower index\n"
	       "  -a, --alpha A      alpha of entmax_bisect and headwise_adaptive_entmax (default 1.5),\n"
	       "                     clamped to [1.05, 2] (dL/dalpha is 0 outside it)\n"
	       "  -b, --backward     gradient mode (input objects, see above)\n"
	       "      --dalpha       with --backward and an alpha method: write\n"
	       "                     {\"grad\":[...],\"dalpha\":D} (D = dL/dalpha) instead of the array\n"
	       "      --mask MODE    padded keys: margin (the study's: score = min(valid) - 60,\n"
	       "                     default) or exclude (probability exactly 0)\n"
	       "      --n-valid N    keys N, N+1, ... of every row are padding (default: none)\n"
	       "      --unrolled     entmax methods: the study's 18-iteration bisection, and the gradient\n"
	       "                     of its unrolled iterations (default: exact threshold and gradient)\n"
	       "      --double       compute in double precision with the reference implementation\n"
	       "                     (numbers printed to 17 digits) instead of the float path\n"
	       "  -q, --quiet        accepted for uniformity (sb-attn prints no progress)\n"
	       "      --help         show this help and exit\n"
	       "      --version      show the version and exit\n"
	       "\n"
	       "Exit status:\n"
	       "  0  every row written\n"
	       "  2  usage error\n"
	       "  3  bad input: a line that is not a row (or object) of numbers, grad of another\n"
	       "     length, --n-valid beyond a row, a row with no finite valid score; the message\n"
	       "     names FILE:LINE and the rows before it are already written\n"
	       "  4  I/O error (reading, or writing stdout)\n"
	       "\n"
	       "Examples:\n"
	       "  $ echo '[1,2,3]' | sb-attn -m sparsemax\n"
	       "  [0,0,1]\n"
	       "  $ echo '[1,3,3,2]' | sb-attn -m topk_softmax_05\n"
	       "  [0,0.5,0.5,0]\n"
	       "  $ echo '{\"scores\":[0,0],\"grad\":[1,0]}' | sb-attn -m softmax --backward\n"
	       "  [0.25,-0.25]\n");
}

enum { OPT_DALPHA = 256, OPT_MASK, OPT_NVALID, OPT_UNROLLED, OPT_DOUBLE, OPT_HELP, OPT_VERSION };

static const struct option LONGOPTS[] = {{"method", required_argument, NULL, 'm'},
                                         {"ratio", required_argument, NULL, 'r'},
                                         {"alpha", required_argument, NULL, 'a'},
                                         {"backward", no_argument, NULL, 'b'},
                                         {"dalpha", no_argument, NULL, OPT_DALPHA},
                                         {"mask", required_argument, NULL, OPT_MASK},
                                         {"n-valid", required_argument, NULL, OPT_NVALID},
                                         {"unrolled", no_argument, NULL, OPT_UNROLLED},
                                         {"double", no_argument, NULL, OPT_DOUBLE},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"help", no_argument, NULL, OPT_HELP},
                                         {"version", no_argument, NULL, OPT_VERSION},
                                         {NULL, 0, NULL, 0}};

struct opts {
	const char *method, *input;
	double ratio, alpha;
	int backward, dalpha, unrolled, dbl;
	long long n_valid; /* 0: all keys valid */
	enum sb_mask_mode mask;
};

static void parse_opts(int argc, char **argv, struct opts *o)
{
	struct sb_err err = {0};
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":m:r:a:bq", LONGOPTS, NULL)) != -1) {
		switch (ch) {
		case 'm':
			o->method = optarg;
			break;
		case 'r':
			if (sb_parse_double("--ratio", optarg, 0, 1, &o->ratio, &err) || !(o->ratio > 0))
				sb_cli_usage_error("invalid value for --ratio: '%s' (a number in (0, 1])", optarg);
			break;
		case 'a':
			if (sb_parse_double("--alpha", optarg, -1e300, 1e300, &o->alpha, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case 'b':
			o->backward = 1;
			break;
		case OPT_DALPHA:
			o->dalpha = 1;
			break;
		case OPT_MASK:
			if (!strcmp(optarg, "margin"))
				o->mask = SB_MASK_MARGIN;
			else if (!strcmp(optarg, "exclude"))
				o->mask = SB_MASK_EXCLUDE;
			else
				sb_cli_usage_error("invalid value for --mask: '%s' (margin or exclude)", optarg);
			break;
		case OPT_NVALID:
			if (sb_parse_int("--n-valid", optarg, 1, 1LL << 30, &o->n_valid, &err))
				sb_cli_usage_error("%s", err.msg);
			break;
		case OPT_UNROLLED:
			o->unrolled = 1;
			break;
		case OPT_DOUBLE:
			o->dbl = 1;
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
			sb_cli_usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			sb_cli_usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (!o->method)
		sb_cli_usage_error("no --method given");
	if (o->dalpha && !o->backward)
		sb_cli_usage_error("--dalpha needs --backward");
	if (argc - optind > 1)
		sb_cli_usage_error("more than one FILE given");
	if (argc - optind == 1)
		o->input = argv[optind];
}

/* a JSON array of numbers (null, "nan", "inf", "-inf" allowed) -> doubles */
static int read_row(const struct sb_json *v, const char *what, double **out, size_t *n, const char *where,
                    struct sb_err *err)
{
	if (!v || v->type != SB_JSON_ARRAY)
		return SB_ERR(err, SB_EDATA, "%s: %s is not a JSON array of numbers", where, what);
	if (v->n == 0)
		return SB_ERR(err, SB_EDATA, "%s: %s is empty", where, what);
	double *d = malloc(v->n * sizeof *d);
	if (!d)
		return SB_ERR(err, SB_EINTERNAL, "%s: out of memory", where);
	for (size_t i = 0; i < v->n; i++) {
		const struct sb_json *e = v->items[i];
		if (e->type == SB_JSON_NUMBER) {
			d[i] = e->number;
		} else if (e->type == SB_JSON_NULL || (e->type == SB_JSON_STRING && !strcmp(e->text, "nan"))) {
			d[i] = NAN;
		} else if (e->type == SB_JSON_STRING && !strcmp(e->text, "inf")) {
			d[i] = INFINITY;
		} else if (e->type == SB_JSON_STRING && !strcmp(e->text, "-inf")) {
			d[i] = -INFINITY;
		} else {
			free(d);
			return SB_ERR(err, SB_EDATA, "%s: %s: element %zu is not a number", where, what, i);
		}
	}
	*out = d;
	*n = v->n;
	return 0;
}

static float to_float(double v)
{
	if (v > FLT_MAX)
		return INFINITY;
	if (v < -FLT_MAX)
		return -INFINITY;
	return (float)v;
}

/* one row: forward, or forward + backward; writes the output line */
static int do_row(const struct opts *o, const struct sb_norm *nm, struct sb_jw *w, const double *s, const double *g,
                  size_t T, const char *where, struct sb_err *err)
{
	int nv = o->n_valid ? (int)o->n_valid : (int)T, rc = 0;
	if (o->n_valid > (long long)T)
		return SB_ERR(err, SB_EDATA, "%s: --n-valid %lld exceeds the row's %zu scores", where, o->n_valid, T);
	double *pd = malloc(T * sizeof *pd), da = 0;
	float *sf = malloc(T * sizeof *sf), *pf = malloc(T * sizeof *pf), *gf = malloc(T * sizeof *gf);
	float aux[SB_NORM_AUX];
	if (!pd || !sf || !pf || !gf) {
		rc = SB_ERR(err, SB_EINTERNAL, "%s: out of memory", where);
		goto out;
	}
	if (o->dbl) {
		rc = g ? sb_norm_backward_ref_f64(nm, pd, &da, g, s, 1, (int)T, nv, o->alpha, err)
		       : sb_norm_forward_ref_f64(nm, pd, s, 1, (int)T, nv, o->alpha, err);
	} else {
		for (size_t i = 0; i < T; i++)
			sf[i] = to_float(s[i]);
		rc = sb_norm_forward(nm, pf, aux, sf, 1, (int)T, nv, (float)o->alpha, err);
		if (!rc && g) {
			double daf = 0;
			for (size_t i = 0; i < T; i++)
				gf[i] = to_float(g[i]);
			sb_norm_backward(nm, gf, &daf, gf, pf, aux, sf, 1, (int)T, nv, (float)o->alpha);
			memcpy(pf, gf, T * sizeof *pf);
			da = daf;
		}
	}
	if (rc) {
		sb_err_prefix(err, "%s", where);
		goto out;
	}
	if (o->dalpha) {
		sb_jw_obj(w);
		sb_jw_key(w, "grad");
	}
	sb_jw_arr(w);
	for (size_t i = 0; i < T; i++) {
		if (o->dbl)
			sb_jw_f64(w, pd[i]);
		else
			sb_jw_f32(w, pf[i]);
	}
	sb_jw_arr_end(w);
	if (o->dalpha) {
		sb_jw_kf64(w, "dalpha", da);
		sb_jw_obj_end(w);
	}
	rc = sb_jw_line(w, err);
out:
	free(pd);
	free(sf);
	free(pf);
	free(gf);
	return rc;
}

int main(int argc, char **argv)
{
	sb_cli_init("sb-attn", argc, argv);
	struct opts o = {.input = "-", .alpha = 1.5, .mask = SB_MASK_MARGIN};
	parse_opts(argc, argv, &o);
	struct sb_err err = {0};
	struct sb_norm nm;
	if (sb_norm_parse(o.method, o.alpha, &nm, &err))
		sb_cli_usage_error("%s", err.msg);
	if (o.ratio > 0) {
		if (nm.kind != SB_NORM_TOPK && nm.kind != SB_NORM_BOTTOMK)
			sb_cli_usage_error("--ratio applies to topk_softmax and bottomk_softmax, not %s", o.method);
		nm.ratio = o.ratio;
	}
	int has_alpha = nm.kind == SB_NORM_ENTMAX_BISECT || nm.kind == SB_NORM_ADAPTIVE;
	if (o.dalpha && !has_alpha)
		sb_cli_usage_error("--dalpha needs entmax_bisect or headwise_adaptive_entmax, not %s", o.method);
	if (o.unrolled && nm.kind != SB_NORM_ENTMAX15 && !has_alpha)
		sb_cli_usage_error("--unrolled applies to entmax15, entmax_bisect and headwise_adaptive_entmax");
	nm.unrolled = o.unrolled;
	nm.mask = o.mask;

	struct sb_ndjson_reader *r = NULL;
	if (sb_ndjson_open(o.input, &r, &err))
		sb_cli_die(&err);
	struct sb_jw w;
	sb_jw_init(&w, stdout);
	int rc = 0;
	for (;;) {
		struct sb_json *v = NULL;
		if ((rc = sb_ndjson_next(r, &v, &err)) != 0 || !v)
			break;
		char where[512];
		snprintf(where, sizeof where, "%s:%ld", sb_ndjson_name(r), sb_ndjson_line(r));
		double *s = NULL, *g = NULL;
		size_t T = 0, Tg = 0;
		if (o.backward) {
			if (v->type != SB_JSON_OBJECT)
				rc = SB_ERR(&err, SB_EDATA,
				            "%s: with --backward a line is {\"scores\":[...],\"grad\":[...]}", where);
			if (!rc)
				rc = read_row(sb_json_get(v, "scores"), "scores", &s, &T, where, &err);
			if (!rc)
				rc = read_row(sb_json_get(v, "grad"), "grad", &g, &Tg, where, &err);
			if (!rc && Tg != T)
				rc = SB_ERR(&err, SB_EDATA, "%s: grad has %zu values for %zu scores", where, Tg, T);
		} else {
			rc = read_row(v, "the row", &s, &T, where, &err);
		}
		if (!rc)
			rc = do_row(&o, &nm, &w, s, g, T, where, &err);
		free(s);
		free(g);
		sb_json_free(v);
		if (rc)
			break;
	}
	sb_ndjson_close(r);
	sb_jw_free(&w);
	if (rc) {
		fflush(stdout);
		sb_cli_die(&err);
	}
	return sb_cli_finish(0);
}
