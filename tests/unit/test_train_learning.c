/* test_train_learning.c — the model learns: Fashion-MNIST, compact, softmax, seed 0,
 * one epoch of sb-train, then the validation split through the library's evaluation
 * API (lib/encoder.h sb_encoder_evaluate, what sb-eval builds on) from the saved
 * checkpoint.
 *
 * Threshold: validation accuracy >= 0.70 after one epoch (chance: 0.10), below the
 * issue's 0.75, and why: the PyTorch reference itself does not reach 0.75 on this
 * condition. bench/train/learn.py (bench/RESULTS.md, "learning"; 2026-11-30, git
 * 600faa0) trained both implementations one epoch on the PROTOCOL A1 split, seeds 0-9:
 * ours mean 0.7315 (sd 0.0233, range 0.685-0.759), PyTorch mean 0.7360 (sd 0.0140,
 * range 0.707-0.756; 8 of 10 seeds below 0.75); difference -0.0045, bootstrap 95%
 * interval [-0.021, +0.011], Welch p = 0.61; training losses 1.2486 vs 1.2501. Our
 * seed 0 gives 0.7217. The parenthetical condition (one epoch on the full 60k,
 * test accuracy 0.76-0.80) is met: ours 0.7628, PyTorch 0.7700 (seed 0). 0.70 sits
 * about 1.3 sd below our mean: it fails when learning is broken (chance 0.10; a
 * one-step-too-few or a wrong gradient sign lands far below), not on a seed's luck.
 * The golden test (test_encoder_golden) pins the per-step arithmetic to PyTorch's.
 *
 * Data: $SB_DATA/fashion_mnist/pool.safetensors when SB_DATA is set, else
 * $SB_TOP/data/..., else sb-fetch from Debian's dataset-fashion-mnist mirror
 * (/usr/share/datasets/fashion-mnist) into a temporary directory; skipped (not
 * failed) when none is available.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness.h"
#include "encoder.h"
#include "io.h"
#include "train_cell.h"

static int sh(const char *cmd)
{
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void)
{
	const char *top = getenv("SB_TOP") ? getenv("SB_TOP") : ".";
	char tmp[] = "/tmp/sblearn.XXXXXX", data[4200], path[4400], cmd[16384];
	if (!mkdtemp(tmp)) {
		SB_CHECK(0, "mkdtemp");
		return sb_test_done();
	}
	const char *env = getenv("SB_DATA");
	snprintf(data, sizeof data, "%s", env ? env : "");
	snprintf(path, sizeof path, "%s/fashion_mnist/pool.safetensors", data);
	if (!env || !sb_file_exists(path)) {
		snprintf(data, sizeof data, "%s/data", top);
		snprintf(path, sizeof path, "%s/fashion_mnist/pool.safetensors", data);
	}
	if (!sb_file_exists(path)) {
		snprintf(data, sizeof data, "%s/data", tmp);
		snprintf(path, sizeof path, "%s/fashion_mnist/pool.safetensors", data);
		snprintf(cmd, sizeof cmd,
		         "'%s/bin/sb-fetch' -q --offline -m /usr/share/datasets/fashion-mnist -c '%s/cache' -o '%s' "
		         "fashion_mnist > /dev/null 2>&1",
		         top, tmp, data);
		if (sh(cmd) != 0 || !sb_file_exists(path)) {
			printf("ok 1 # SKIP no Fashion-MNIST (set SB_DATA, or install dataset-fashion-mnist)\n1 "
			       "passed, 0 failed\n");
			snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
			sh(cmd);
			return 0;
		}
	}
	snprintf(
	    cmd, sizeof cmd,
	    "'%s/bin/sb-train' -q -j 2 -d '%s' -o '%s/runs' --task fashion_mnist --method softmax --seed 0 --epochs 1 "
	    "> '%s/out' 2> '%s/err'",
	    top, data, tmp, tmp, tmp);
	int rc = sh(cmd);
	SB_CHECK(rc == 0, "sb-train: Fashion-MNIST, compact, softmax, seed 0, 1 epoch (exit %d)", rc);
	/* the run directory */
	char run[4400] = "";
	snprintf(cmd, sizeof cmd, "ls -d '%s'/runs/fashion_mnist.softmax.s0.plain.compact.* 2>/dev/null", tmp);
	FILE *p = popen(cmd, "r");
	if (p) {
		if (fgets(run, sizeof run, p))
			run[strcspn(run, "\n")] = 0;
		pclose(p);
	}
	struct sb_err e = {0};
	struct sb_cell cell;
	rc = sb_cell_read(run, &cell, &e);
	SB_CHECK(rc == 0, "cell.json reads back (%s)", rc ? e.msg : cell.cell_id);
	struct sb_dataset ds;
	rc = rc ? rc : sb_dataset_read(path, 0, &ds, &e);
	if (rc) {
		SB_CHECK(0, "%s", e.msg);
		return sb_test_done();
	}
	struct sb_split sp;
	sb_split_carve(&ds, cell.seed, cell.val_fraction, cell.limit, &sp, &e);
	struct sb_eval_result res[2];
	for (int th = 1; th <= 2; th++) {
		struct sb_backend *be;
		sb_backend_cpu_open(th, &be, &e);
		struct sb_encoder *m = NULL;
		struct sb_cell c2;
		rc = sb_run_open_model(run, 1, &ds, be, 0, &c2, &m, &e);
		struct sb_encoder_data d;
		if (!rc)
			rc = sb_encoder_data_open(be, &ds, &d, &e);
		uint8_t *bits = calloc((size_t)(sp.n_val + 7) / 8, 1);
		if (!rc)
			rc = sb_encoder_evaluate(m, &d, sp.val, sp.n_val, 256, &res[th - 1], bits, &e);
		SB_CHECK(rc == 0, "evaluate epoch-001 on the %lld validation examples with %d thread%s (%s)",
		         (long long)sp.n_val, th, th > 1 ? "s" : "", rc ? e.msg : "ok");
		int64_t pop = 0;
		for (int64_t i = 0; i < sp.n_val; i++)
			pop += (bits[i / 8] >> (i % 8)) & 1;
		SB_CHECK(pop == res[th - 1].correct, "correctness bitmap has %lld set bits = correct count %lld",
		         (long long)pop, (long long)res[th - 1].correct);
		free(bits);
		sb_encoder_free(m);
		sb_backend_close(be);
	}
	struct sb_eval_result *r = &res[0];
	printf("# validation after 1 epoch: accuracy %.4f, macro-F1 %.4f, loss %.4f, density %.4f, entropy %.4f\n",
	       r->accuracy, r->macro_f1, r->loss, r->attention_density, r->attention_entropy);
	SB_CHECK(r->accuracy >= 0.70, "validation accuracy after 1 epoch %.4f >= 0.70", r->accuracy);
	SB_CHECK(r->macro_f1 > 0.6 && r->macro_f1 <= r->accuracy + 0.05, "macro-F1 %.4f is sane", r->macro_f1);
	SB_CHECK(r->attention_density > 0.999 && r->attention_density <= 1.0,
	         "softmax attention density %.6f in (0.999, 1] (probabilities <= 1e-7 do not count)",
	         r->attention_density);
	SB_CHECK(r->attention_entropy > 0 && r->attention_entropy <= 3.9121, "attention entropy %.4f in (0, log 50]",
	         r->attention_entropy);
	SB_CHECK(res[0].accuracy == res[1].accuracy && res[0].loss == res[1].loss &&
	             res[0].attention_entropy == res[1].attention_entropy,
	         "evaluation identical with 1 and 2 threads");
	sb_split_free(&sp);
	sb_dataset_free(&ds);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	sh(cmd);
	return sb_test_done();
}
