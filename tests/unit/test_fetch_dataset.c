/* test_fetch_dataset.c — what sb-fetch writes is what the stages read: run
 * bin/sb-fetch on the real Fashion-MNIST (Debian's dataset-fashion-mnist as the
 * mirror) and on the synthetic marker task, then read the files with
 * sb_dataset_read and carve the splits with sb_split_carve / sb_split_test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness.h"
#include "dataset.h"

static char dir[64] = "/tmp/sbfetchdsXXXXXX";
static const char *top;

static int fetch(const char *args)
{
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "'%s/bin/sb-fetch' -q -c '%s/cache' -o '%s/data' %s >'%s/out' 2>'%s/err'", top, dir,
	         dir, args, dir, dir);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void path(char *out, size_t n, const char *task, const char *split)
{
	snprintf(out, n, "%s/data/%s/%s.safetensors", dir, task, split);
}

int main(void)
{
	top = getenv("SB_TOP") ? getenv("SB_TOP") : ".";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	char p[512];
	struct sb_dataset ds;
	struct sb_err err = {0};
	struct sb_split sp;

	/* synthetic marker, two seeds */
	int rc = fetch("synthetic_marker --seeds 0-1");
	SB_CHECK(rc == 0, "sb-fetch synthetic_marker --seeds 0-1 exits 0 (got %d)", rc);
	path(p, sizeof p, "synthetic_marker", "pool");
	rc = sb_dataset_read(p, 0, &ds, &err);
	SB_CHECK(rc == 0, "sb_dataset_read accepts the synthetic pool (%s)", err.msg);
	if (!rc) {
		SB_CHECK(ds.modality == SB_TEXT && ds.presplit && ds.n == 48000 && ds.L == 96 && ds.vocab == 20000 &&
		             ds.classes == 10,
		         "synthetic pool: text, pre-split, n=48000 L=96 V=20000 C=10 (n=%lld L=%d V=%d C=%d)",
		         (long long)ds.n, ds.L, ds.vocab, ds.classes);
		rc = sb_split_carve(&ds, 1, 0.2, 0, &sp, &err);
		SB_CHECK(rc == 0 && sp.n_train == 20000 && sp.n_val == 4000,
		         "seed 1: train 20000, validation 4000 (%lld, %lld)", (long long)sp.n_train,
		         (long long)sp.n_val);
		if (!rc)
			sb_split_free(&sp);
		sb_dataset_free(&ds);
	}
	path(p, sizeof p, "synthetic_marker", "test");
	sb_err_clear(&err);
	rc = sb_dataset_read(p, 0, &ds, &err);
	SB_CHECK(rc == SB_EVERDICT, "the test file is refused without allow_test (rc %d: %s)", rc, err.msg);
	sb_err_clear(&err);
	rc = sb_dataset_read(p, 1, &ds, &err);
	SB_CHECK(rc == 0, "sb-test can read the synthetic test file (%s)", err.msg);
	if (!rc) {
		uint32_t *idx;
		int64_t n;
		rc = sb_split_test(&ds, 1, &idx, &n, &err);
		SB_CHECK(rc == 0 && n == 5000, "seed 1 has 5000 test examples (%lld)", (long long)n);
		if (!rc)
			free(idx);
		sb_dataset_free(&ds);
	}

	/* real Fashion-MNIST */
	if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK) != 0) {
		SB_CHECK(0, "Debian's dataset-fashion-mnist is installed (scripts/deps.sh installs it)");
	} else {
		rc = fetch("-m /usr/share/datasets/fashion-mnist fashion_mnist");
		SB_CHECK(rc == 0, "sb-fetch -m /usr/share/datasets/fashion-mnist fashion_mnist exits 0 (got %d)", rc);
		path(p, sizeof p, "fashion_mnist", "pool");
		sb_err_clear(&err);
		rc = sb_dataset_read(p, 0, &ds, &err);
		SB_CHECK(rc == 0, "sb_dataset_read accepts the Fashion-MNIST pool (%s)", err.msg);
		if (!rc) {
			SB_CHECK(ds.modality == SB_IMAGE && ds.n == 60000 && ds.C == 1 && ds.H == 28 && ds.W == 28 &&
			             ds.patch == 4 && ds.classes == 10 && !ds.presplit,
			         "pool: 60000 images 1x28x28, patch 4, 10 classes (n=%lld)", (long long)ds.n);
			/* first training image and label of Fashion-MNIST: an ankle boot (9) */
			SB_CHECK(ds.y[0] == 9 && ds.y[1] == 0, "first labels are 9, 0 (got %d, %d)", ds.y[0], ds.y[1]);
			rc = sb_split_carve(&ds, 0, 0.2, 0, &sp, &err);
			SB_CHECK(rc == 0 && sp.n_train == 48000 && sp.n_val == 12000,
			         "seed 0: 48000 / 12000 (%lld / %lld)", (long long)sp.n_train, (long long)sp.n_val);
			if (!rc)
				sb_split_free(&sp);
			sb_dataset_free(&ds);
		}
		path(p, sizeof p, "fashion_mnist", "test");
		rc = sb_dataset_read(p, 1, &ds, &err);
		SB_CHECK(rc == 0 && ds.n == 10000, "test: 10000 images (%s)", err.msg);
		if (!rc)
			sb_dataset_free(&ds);
	}
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return sb_test_done();
}
