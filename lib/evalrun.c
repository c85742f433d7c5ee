/* evalrun.c — the evaluation call of sb-eval and sb-test (see evalrun.h).
 *
 * With the compute engine (lib/encoder.h, branch engine): build the cell's
 * model once, then per checkpoint read its bytes, check their SHA-256 when one
 * is expected (so the bytes evaluated are the bytes the caller verified), load
 * the parameters and evaluate (PROTOCOL A4 evaluate: sb_encoder_evaluate).
 *
 * Without it (a build of this branch before the engine is merged) every entry
 * point reports that no evaluation engine is linked in, and the programs stop
 * before reading data they could not use. The switch is the presence of the
 * engine's header, so merging the engine needs no edit here.
 */
#include "evalrun.h"

#if defined(__has_include)
#if __has_include("encoder.h")
#define SB_EVALRUN_ENGINE 1
#endif
#endif

#ifdef SB_EVALRUN_ENGINE

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_norm.h"
#include "backend.h"
#include "encoder.h"
#include "hash.h"
#include "io.h"
#include "tensor.h"

struct sb_evalrun {
	struct sb_backend *be;
	struct sb_encoder *m;
	struct sb_encoder_data data;
	int have_data;
	int batch;
};

int sb_evalrun_available(struct sb_err *err)
{
	return 0;
}

void sb_evalrun_close(struct sb_evalrun *r)
{
	if (!r)
		return;
	if (r->have_data)
		sb_encoder_data_close(r->be, &r->data);
	sb_encoder_free(r->m);
	sb_backend_close(r->be);
	free(r);
}

int sb_evalrun_open(const struct sb_json *cell, const struct sb_dataset *ds, const struct sb_evalrun_opts *o,
                    struct sb_evalrun **out, struct sb_err *err)
{
	*out = NULL;
	const char *method = sb_json_str(sb_json_get(cell, "method"), NULL);
	const char *tier = sb_json_str(sb_json_get(cell, "tier"), "compact");
	const char *arch = sb_json_str(sb_json_get(cell, "arch"), "plain");
	const char *mask = sb_json_str(sb_json_get(cell, "mask"), "margin");
	double alpha = sb_json_num(sb_json_get(cell, "alpha"), 1.5);
	int64_t batch = 256;
	const struct sb_json *b = sb_json_get(cell, "batch");
	if (b && (sb_json_int64(b, &batch) || batch < 1 || batch > 1 << 20))
		return SB_ERR(err, SB_EDATA, "cell.json: 'batch' must be a positive integer");
	if (o && o->batch > 0)
		batch = o->batch;
	if (!method)
		return SB_ERR(err, SB_EDATA, "cell.json: missing field 'method'");
	struct sb_norm nm;
	struct sb_err e2 = {0};
	int rc = sb_norm_parse(method, alpha, &nm, &e2);
	if (rc)
		return SB_ERR(err, rc == SB_EUSAGE ? SB_EDATA : rc, "cell.json: %s", e2.msg);
	if (strcmp(mask, "exclude") == 0)
		nm.mask = SB_MASK_EXCLUDE;
	else if (strcmp(mask, "margin") == 0)
		nm.mask = SB_MASK_MARGIN;
	else
		return SB_ERR(err, SB_EDATA, "cell.json: 'mask' must be \"margin\" or \"exclude\"");
	struct sb_encoder_cfg cfg;
	if ((rc = sb_encoder_cfg_from_dataset(&cfg, ds, tier, arch, &nm, &e2)))
		return SB_ERR(err, rc == SB_EUSAGE ? SB_EDATA : rc, "cell.json: %s", e2.msg);
	struct sb_evalrun *r = calloc(1, sizeof *r);
	if (!r)
		return SB_ERR(err, SB_EINTERNAL, "out of memory");
	r->batch = (int)batch;
	if ((rc = sb_backend_open(o && o->device ? o->device : "cpu", o ? o->threads : 0, &r->be, err)) ||
	    (rc = sb_encoder_new(&cfg, r->be, r->batch, &r->m, err)) ||
	    (rc = sb_encoder_data_open(r->be, ds, &r->data, err))) {
		sb_evalrun_close(r);
		return rc;
	}
	r->have_data = 1;
	*out = r;
	return 0;
}

int sb_evalrun_checkpoint(struct sb_evalrun *r, const char *checkpoint, const char *expect_sha256, const uint32_t *idx,
                          int64_t n, struct sb_evalrun_result *res, uint8_t *correct, struct sb_err *err)
{
	char *buf;
	size_t len;
	SB_TRY(sb_read_file(checkpoint, &buf, &len, 0, err));
	if (expect_sha256) {
		char hex[SB_SHA256_HEX];
		sb_sha256_buf(buf, len, hex);
		if (strcmp(hex, expect_sha256) != 0) {
			free(buf);
			return SB_ERR(err, SB_EDATA, "%s: SHA-256 mismatch: expected %s, actual %s", checkpoint,
			              expect_sha256, hex);
		}
	}
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	int rc = sb_st_parse(buf, len, checkpoint, &ts, err);
	if (!rc && (rc = sb_encoder_from_tensors(r->m, &ts, 0, err)))
		sb_err_prefix(err, "%s", checkpoint);
	sb_tensors_free(&ts);
	free(buf);
	if (rc)
		return rc;
	struct sb_eval_result e;
	if ((rc = sb_encoder_evaluate(r->m, &r->data, idx, n, r->batch, &e, correct, err)))
		return rc;
	res->n = e.n;
	res->correct = e.correct;
	res->accuracy = e.accuracy;
	res->macro_f1 = e.macro_f1;
	res->loss = e.loss;
	res->attention_density = e.attention_density;
	res->attention_entropy = e.attention_entropy;
	res->alpha_mean = e.alpha_mean;
	res->alpha_std = e.alpha_std;
	return 0;
}

const char *sb_evalrun_device(const struct sb_evalrun *r)
{
	return r ? r->be->device : "cpu";
}
int sb_evalrun_threads(const struct sb_evalrun *r)
{
	return r ? r->be->threads : 1;
}

#else /* no engine */

#define NO_ENGINE "no evaluation engine in this build (lib/encoder.h of the engine is not merged)"

int sb_evalrun_available(struct sb_err *err)
{
	return SB_ERR(err, SB_EINTERNAL, NO_ENGINE);
}

int sb_evalrun_open(const struct sb_json *cell, const struct sb_dataset *ds, const struct sb_evalrun_opts *o,
                    struct sb_evalrun **out, struct sb_err *err)
{
	*out = NULL;
	return SB_ERR(err, SB_EINTERNAL, NO_ENGINE);
}

int sb_evalrun_checkpoint(struct sb_evalrun *r, const char *checkpoint, const char *expect_sha256, const uint32_t *idx,
                          int64_t n, struct sb_evalrun_result *res, uint8_t *correct, struct sb_err *err)
{
	return SB_ERR(err, SB_EINTERNAL, NO_ENGINE);
}

const char *sb_evalrun_device(const struct sb_evalrun *r)
{
	return "cpu";
}
int sb_evalrun_threads(const struct sb_evalrun *r)
{
	return 1;
}
void sb_evalrun_close(struct sb_evalrun *r) {}

#endif
