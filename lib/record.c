/* record.c — run.meta and record helpers. */
#include "record.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "hash.h"
#include "io.h"
#include "version.h"

int sb_input_hash(struct sb_input *in, const char *path, struct sb_err *err)
{
	in->path = path;
	return sb_sha256_file(path, in->sha256, &in->size_bytes, err);
}

int sb_record_run_meta(struct sb_jw *w, const struct sb_run_meta *m, struct sb_err *err)
{
	char t[32], host[256] = "";
	double unix_s;
	sb_time_rfc3339(t, &unix_s);
	gethostname(host, sizeof host - 1);
	sb_jw_record(w, "run.meta", 1);
	sb_jw_kstr(w, "program", sb_prog);
	sb_jw_kstr(w, "version", SB_VERSION);
	sb_jw_key(w, "argv");
	sb_jw_arr(w);
	for (int i = 0; i < sb_cli_argc; i++)
		sb_jw_str(w, sb_cli_argv[i]);
	sb_jw_arr_end(w);
	sb_jw_key(w, "inputs");
	sb_jw_arr(w);
	for (int i = 0; m && i < m->n_inputs; i++) {
		sb_jw_obj(w);
		sb_jw_kstr(w, "path", m->inputs[i].path);
		sb_jw_kstr(w, "sha256", m->inputs[i].sha256);
		sb_jw_kint(w, "size_bytes", (int64_t)m->inputs[i].size_bytes);
		sb_jw_obj_end(w);
	}
	sb_jw_arr_end(w);
	sb_jw_kstr(w, "device", m && m->device ? m->device : "cpu");
	sb_jw_kint(w, "threads", m && m->threads ? m->threads : 1);
	if (m && m->blas) {
		sb_jw_kstr(w, "blas", m->blas);
		sb_jw_kbool(w, "blas_generic", m->blas_generic);
	}
	sb_jw_kstr(w, "start_time", t);
	sb_jw_kf64(w, "start_unix_s", unix_s);
	sb_jw_kstr(w, "host", host);
	sb_jw_obj_end(w);
	return sb_jw_line(w, err);
}

int sb_record_kind(const struct sb_json *rec, const char **kind, int64_t *v, struct sb_err *err)
{
	if (!rec || rec->type != SB_JSON_OBJECT)
		return SB_ERR(err, SB_EDATA, "record is not a JSON object");
	*kind = sb_json_str(sb_json_get(rec, "kind"), NULL);
	if (!*kind)
		return SB_ERR(err, SB_EDATA, "record lacks a string 'kind'");
	if (sb_json_int64(sb_json_get(rec, "v"), v))
		return SB_ERR(err, SB_EDATA, "record of kind '%s' lacks an integer 'v'", *kind);
	return 0;
}
