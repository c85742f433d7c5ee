/* evalrun.c — the evaluation call of sb-eval and sb-test (see evalrun.h).
 *
 * Placeholder until the engine (lib/encoder.h) is merged: every entry point
 * reports that no evaluation engine is linked in, so the programs refuse
 * before reading any data they could not use. */
#include "evalrun.h"

#define NO_ENGINE "no evaluation engine in this build (lib/encoder.h is not merged yet)"

int sb_evalrun_available(struct sb_err *err) { return SB_ERR(err, SB_EINTERNAL, NO_ENGINE); }

int sb_evalrun_open(const struct sb_json *cell, const struct sb_dataset *ds, const struct sb_evalrun_opts *o,
		    struct sb_evalrun **out, struct sb_err *err)
{
	*out = NULL;
	return SB_ERR(err, SB_EINTERNAL, NO_ENGINE);
}

int sb_evalrun_checkpoint(struct sb_evalrun *r, const char *checkpoint, const char *expect_sha256,
			  const uint32_t *idx, int64_t n, struct sb_evalrun_result *res, uint8_t *correct,
			  struct sb_err *err)
{
	return SB_ERR(err, SB_EINTERNAL, NO_ENGINE);
}

const char *sb_evalrun_device(const struct sb_evalrun *r) { return "cpu"; }
int sb_evalrun_threads(const struct sb_evalrun *r) { return 1; }
void sb_evalrun_close(struct sb_evalrun *r) {}
