/* replay.h — replay the kept inputs of one fuzz target (tests/fuzz/SUITE/KIND/TARGET/, KIND
 * crashers or seeds) through its function, for the replay tests test_fetch_fuzz and
 * test_lm_fuzz. Files starting with '.' and notes (*.md) are skipped. Include after
 * ../harness.h. */
#ifndef SB_FUZZ_REPLAY_H
#define SB_FUZZ_REPLAY_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Returns how many inputs fn refused (non-zero status); adds the number replayed to *count
 * and raises *slowest (seconds, may be NULL) to the slowest call. A missing directory
 * replays nothing. */
static int fz_replay(const char *top, const char *suite, const char *kind, const char *target,
                     int (*fn)(const uint8_t *, size_t), int *count, double *slowest)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/tests/fuzz/%s/%s/%s", top, suite, kind, target);
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
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int rc = fn(buf, got);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		double dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
		if (slowest && dt > *slowest)
			*slowest = dt;
		refused += rc != 0;
		free(buf);
		++*count;
	}
	closedir(d);
	return refused;
}

/* Replays the crashers and seeds of one target of SUITE (the lm and records suites): every
 * input returns, and some seed is accepted. Returns the number of inputs replayed. */
__attribute__((unused)) static int fz_replay_target(const char *top, const char *suite, const char *target,
                                                    int (*fn)(const uint8_t *, size_t))
{
	int n = 0, m = 0;
	double slow = 0;
	int r = fz_replay(top, suite, "crashers", target, fn, &n, &slow);
	int rs = fz_replay(top, suite, "seeds", target, fn, &m, &slow);
	SB_CHECK(m > 0 && rs < m,
	         "%s: %d seeds (%d accepted) and %d kept crashers (%d refused) replayed without crashing; "
	         "slowest %.3f s",
	         target, m, m - rs, n, r, slow);
	return n + m;
}

#endif
