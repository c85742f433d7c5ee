/* test_lm_fuzz.c — replay every kept fuzz input of the LM-file parsers (tests/fuzz/lm/
 * crashers/TARGET/ and seeds/TARGET/) through its target: each must return without
 * crashing or breaking an invariant (targets.h aborts then). Inputs that once crashed or
 * hung a parser are kept in crashers/ as fixed regression tests; they must now be refused
 * (non-zero status) or parsed. Seeds of the tokenizer, config, index and safetensors
 * targets are real files cut down: each target must accept at least one of them. Run
 * under tests/san.sh (ASan + UBSan) to catch silent memory errors. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../fuzz/lm/targets.h"
#include "../harness.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Returns the number of inputs refused; *count the number replayed, *slowest seconds. */
static int replay(const char *top, const char *kind, const struct fz_target *t, int *count, double *slowest)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/tests/fuzz/lm/%s/%s", top, kind, t->name);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *e;
	int refused = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || strstr(e->d_name, ".md"))
			continue;
		char p[8192];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		FILE *f = fopen(p, "rb");
		if (!f)
			continue;
		fseek(f, 0, SEEK_END);
		long n = ftell(f);
		fseek(f, 0, SEEK_SET);
		uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
		size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
		fclose(f);
		if (!buf || got != (size_t)n) {
			free(buf);
			SB_CHECK(0, "read %s", p);
			continue;
		}
		double t0 = now_s();
		int rc = t->fn(buf, got);
		double dt = now_s() - t0;
		if (dt > *slowest)
			*slowest = dt;
		refused += rc != 0;
		free(buf);
		++*count;
	}
	closedir(d);
	return refused;
}

int main(void)
{
	const char *top = getenv("SB_TOP") ? getenv("SB_TOP") : ".";
	int total = 0;
	for (const struct fz_target *t = fz_targets; t->name; t++) {
		int n = 0, m = 0;
		double slow = 0;
		int r = replay(top, "crashers", t, &n, &slow);
		int rs = replay(top, "seeds", t, &m, &slow);
		SB_CHECK(m > 0 && rs < m,
			 "%s: %d seeds (%d accepted) and %d kept crashers (%d refused) replayed without crashing; "
			 "slowest %.3f s",
			 t->name, m, m - rs, n, r, slow);
		total += n + m;
	}
	for (int k = 0; k < 3; k++)
		sb_tok_free(fz_fixture_tok[k]);
	SB_CHECK(total >= 40, "replayed %d inputs in all", total);
	return sb_test_done();
}
