/* test_records_fuzz.c — replay every kept fuzz input of the readers of records and cells
 * (tests/fuzz/records/crashers/TARGET/ and seeds/TARGET/) through its target: each must
 * return without crashing or breaking an invariant (targets.h aborts then). Inputs that once
 * crashed or broke an invariant of a reader are kept in crashers/ as fixed regression tests;
 * they must now be refused (non-zero status) or read. Seeds are real cells, validation logs,
 * selections, ledgers and sidecars written by the programs: each target must accept at
 * least one of them. Run under tests/san.sh (ASan + UBSan) to catch silent memory errors. */
#include <stdlib.h>

#include "../fuzz/records/targets.h"
#include "../harness.h"
#include "../fuzz/replay.h"

int main(void)
{
	const char *top = getenv("SB_TOP") ? getenv("SB_TOP") : ".";
	int total = 0;
	for (const struct fz_target *t = fz_targets; t->name; t++)
		total += fz_replay_target(top, "records", t->name, t->fn);
	fz_cleanup();
	SB_CHECK(total >= 30, "replayed %d inputs in all", total);
	return sb_test_done();
}
