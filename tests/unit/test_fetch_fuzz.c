/* test_fetch_fuzz.c — replay every kept fuzz input (tests/fuzz/fetch/crashers/
 * TARGET/ and seeds/TARGET/) through its decoder: each must return without
 * crashing. Inputs that once crashed a decoder are kept in crashers/ as fixed
 * regression tests; they must now be refused (non-zero status) or decoded. Run
 * under valgrind or with -fsanitize=address to catch silent memory errors. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz/fetch/targets.h"
#include "../harness.h"

static int replay(const char *top, const char *kind, const struct fz_target *t, int *count)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/tests/fuzz/fetch/%s/%s", top, kind, t->name);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *e;
	int refused = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
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
		int rc = t->fn(buf, got);
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
		int r = replay(top, "crashers", t, &n);
		replay(top, "seeds", t, &m);
		SB_CHECK(m > 0, "%s: %d seeds and %d kept crashers replayed without crashing (%d crashers refused)",
		         t->name, m, n, r);
		total += n + m;
	}
	SB_CHECK(total >= 15, "replayed %d inputs in all", total);
	return sb_test_done();
}
