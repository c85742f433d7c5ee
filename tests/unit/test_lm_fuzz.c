/* test_lm_fuzz.c — replay every kept fuzz input of the LM-file parsers (tests/fuzz/lm/
 * crashers/TARGET/ and seeds/TARGET/) through its target: each must return without
 * crashing or breaking an invariant (targets.h aborts then). Inputs that once crashed or
 * hung a parser are kept in crashers/ as fixed regression tests; they must now be refused
 * (non-zero status) or parsed. Seeds of the tokenizer, config, index and safetensors
 * targets are real files cut down: each target must accept at least one of them. Run
 * under tests/san.sh (ASan + UBSan) to catch silent memory errors. */
#include <stdlib.h>

#include "../fuzz/lm/targets.h"
#include "../harness.h"
#include "../fuzz/replay.h"

int main(void)
{
	const char *top = getenv("SB_TOP") ? getenv("SB_TOP") : ".";
	int total = 0;
	for (const struct fz_target *t = fz_targets; t->name; t++)
		total += fz_replay_target(top, "lm", t->name, t->fn);
	for (int k = 0; k < 3; k++)
		sb_tok_free(fz_fixture_tok[k]);
	SB_CHECK(total >= 40, "replayed %d inputs in all", total);
	return sb_test_done();
}
