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
	for (const struct fz_target *t = fz_targets; t->name; t++) {
		int n = 0, m = 0;
		double slow = 0;
		int r = fz_replay(top, "records", "crashers", t->name, t->fn, &n, &slow);
		int rs = fz_replay(top, "records", "seeds", t->name, t->fn, &m, &slow);
		SB_CHECK(m > 0 && rs < m,
		         "%s: %d seeds (%d accepted) and %d kept crashers (%d refused) replayed without crashing; "
		         "slowest %.3f s",
		         t->name, m, m - rs, n, r, slow);
		total += n + m;
	}
	fz_cleanup();
	SB_CHECK(total >= 30, "replayed %d inputs in all", total);
	return sb_test_done();
}
