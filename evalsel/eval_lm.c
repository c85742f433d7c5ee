/* eval_lm.c — sb-eval's entry for LM run directories (see eval_lm.h). */
#include "eval_lm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "io.h"
#include "json.h"
#include "lm_eval.h"
#include "record.h"

int sb_eval_is_lm_run(const char *run_dir)
{
	char path[4600];
	snprintf(path, sizeof path, "%s/cell.json", run_dir);
	char *buf;
	size_t n;
	struct sb_err e = {0};
	if (sb_read_file(path, &buf, &n, 1 << 24, &e))
		return 0;
	struct sb_json *v;
	int lm = 0;
	if (!sb_json_parse(buf, n, &v, &e)) {
		lm = strcmp(sb_json_str(sb_json_get(v, "family"), ""), "lm") == 0;
		sb_json_free(v);
	}
	free(buf);
	return lm;
}

static void progress(void *arg, const char *phase, int done, int total)
{
	sb_progress(done == total, "%s: %s %d/%d", (const char *)arg, phase, done, total);
}

int sb_eval_lm_run(const char *run_dir, struct sb_backend *be, struct sb_err *err)
{
	return sb_eval_lm_run_set(run_dir, be, NULL, 0, err);
}

int sb_eval_lm_check_set(const char *setting, struct sb_err *err)
{
	struct sb_lm_eval_opts o;
	sb_lm_eval_defaults(&o);
	return sb_lm_eval_set(&o, setting, err);
}

int sb_eval_lm_check_settings(const char *const *settings, int n_settings, struct sb_err *err)
{
	struct sb_lm_eval_opts o;
	sb_lm_eval_defaults(&o);
	for (int i = 0; i < n_settings; i++)
		SB_TRY(sb_lm_eval_set(&o, settings[i], err));
	return sb_lm_eval_check(&o, err);
}

int sb_eval_lm_run_set(const char *run_dir, struct sb_backend *be, const char *const *settings, int n_settings,
		       struct sb_err *err)
{
	struct sb_lm_eval_opts o;
	sb_lm_eval_defaults(&o);
	for (int i = 0; i < n_settings; i++)
		SB_TRY(sb_lm_eval_set(&o, settings[i], err));
	o.progress = progress;
	o.progress_arg = (void *)run_dir;
	char path[4600], mp[4600];
	snprintf(path, sizeof path, "%s/eval.ndjson", run_dir);
	snprintf(mp, sizeof mp, "%s/model.safetensors", run_dir);
	struct sb_atomic a;
	SB_TRY(sb_atomic_open(&a, path, err));
	struct sb_jw w;
	sb_jw_init(&w, a.f);
	struct sb_input in;
	int nin = sb_input_hash(&in, mp, err) == 0;
	struct sb_run_meta meta = {.device = be->device, .threads = be->threads, .inputs = &in, .n_inputs = nin};
	int rc = sb_record_run_meta(&w, &meta, err);
	if (!rc)
		rc = sb_lm_eval_run(be, run_dir, &o, &w, err);
	const char *note = rc ? NULL : sb_lm_blas_note(); /* on the efficiency records just written */
	if (note && !sb_quiet)
		sb_cli_warn("%s: %s", run_dir, note);
	sb_jw_free(&w);
	if (!rc)
		rc = sb_atomic_commit(&a, err);
	else
		sb_atomic_abort(&a);
	return rc;
}
