/* test_fetch_fuzz.c — replay every kept fuzz input (tests/fuzz/fetch/crashers/
 * TARGET/ and seeds/TARGET/) through its decoder: each must return without
 * crashing. Inputs that once crashed a decoder are kept in crashers/ as fixed
 * regression tests; they must now be refused (non-zero status) or decoded. Run
 * under valgrind or with -fsanitize=address to catch silent memory errors. */
#include <stdlib.h>

#include "../fuzz/fetch/targets.h"
#include "../harness.h"
#include "../fuzz/replay.h"

int main(void)
{
	const char *top = getenv("SB_TOP") ? getenv("SB_TOP") : ".";
	int total = 0;
	for (const struct fz_target *t = fz_targets; t->name; t++) {
		int n = 0, m = 0;
		int r = fz_replay(top, "fetch", "crashers", t->name, t->fn, &n, NULL);
		fz_replay(top, "fetch", "seeds", t->name, t->fn, &m, NULL);
		SB_CHECK(m > 0, "%s: %d seeds and %d kept crashers replayed without crashing (%d crashers refused)",
		         t->name, m, n, r);
		total += n + m;
	}
	SB_CHECK(total >= 15, "replayed %d inputs in all", total);
	return sb_test_done();
}
