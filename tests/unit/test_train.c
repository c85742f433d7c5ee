/* test_train.c — sb-train end to end on small generated datasets:
 *   - several cells in one process (-j 3, three at once) give the same records and
 *     byte-identical checkpoints as each cell alone (-j 1, -j 2);
 *   - the same cell twice gives byte-identical records (timing fields aside:
 *     seconds, samples_per_s, train_seconds, wall_seconds, peak_memory_mb, and the
 *     run.meta / train.resume lines) and checkpoints;
 *   - a run killed mid-epoch (the SB_TRAIN_STOP_AFTER_STEPS hook, which _exits like
 *     kill -9, and real SIGKILLs at several moments) resumes to the same bits;
 *   - a finished cell is skipped; a non-finite loss is recorded where it happened;
 *   - a dataset whose metadata says split=test is refused (exit 1).
 * Needs bin/sb-train (SB_TOP). `test_train --fixtures DIR` only writes the datasets
 * (DIR/data/{img,txt,tst,pre}/pool.safetensors; pre is pre-split) for the CLI tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"
#include "hash.h"
#include "io.h"
#include "json.h"
#include "tensor.h"
#include "train_cell.h"

extern char **environ;
static char top[4096], tmp[4096], prog[4300];

static const char *ds_root = "data"; /* write_ds writes TMP/ds_root/TASK/SPLIT.safetensors */

/* TMP/ds_root/TASK/pool.safetensors from ts (freed) */
static void write_pool(const char *task, struct sb_tensors *ts)
{
	struct sb_err e = {0};
	char dir[4300], path[4400];
	snprintf(dir, sizeof dir, "%s/%s/%s", tmp, ds_root, task);
	sb_mkdir_p(dir, &e);
	snprintf(path, sizeof path, "%s/pool.safetensors", dir);
	if (sb_st_write(path, ts, &e))
		printf("# write %s: %s\n", path, e.msg);
	sb_tensors_free(ts);
}

static void write_ds(const char *task, int text, const char *split, int n)
{
	struct sb_err e = {0};
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	uint64_t s = 77 + (uint64_t)text;
#define R() (s = s * 6364136223846793005ull + 1442695040888963407ull, (double)(s >> 11) / 9007199254740992.0)
	int32_t *y = malloc((size_t)n * sizeof *y);
	int classes = text ? 3 : 4;
	for (int i = 0; i < n; i++)
		y[i] = (int)(R() * classes);
	if (!text) {
		uint8_t *x = malloc((size_t)n * 144);
		for (int i = 0; i < n; i++)
			for (int p = 0; p < 144; p++) /* a label-dependent stripe plus noise: learnable */
				x[i * 144 + p] = (uint8_t)((p / 12 == 3 * y[i] ? 160 : 0) + R() * 90);
		sb_tensors_add(&ts, "x", SB_U8, 4, (int64_t[]){n, 1, 12, 12}, x, 0, &e);
		free(x);
	} else {
		int32_t *x = calloc((size_t)n * 10, sizeof *x), *len = malloc((size_t)n * sizeof *len);
		for (int i = 0; i < n; i++) {
			len[i] = i % 9 == 4 ? 0 : 1 + (int)(R() * 10);
			for (int t = 0; t < len[i]; t++)
				x[i * 10 + t] = t == 0 ? 2 + y[i] : 2 + (int)(R() * 48);
		}
		sb_tensors_add(&ts, "x", SB_I32, 2, (int64_t[]){n, 10}, x, 0, &e);
		sb_tensors_add(&ts, "len", SB_I32, 1, (int64_t[]){n}, len, 0, &e);
		free(x);
		free(len);
	}
	sb_tensors_add(&ts, "y", SB_I32, 1, (int64_t[]){n}, y, 0, &e);
	free(y);
#undef R
	sb_tensors_set_meta(&ts, "format", "sparsebench.dataset", &e);
	sb_tensors_set_meta(&ts, "format_version", "1", &e);
	sb_tensors_set_meta(&ts, "task", task, &e);
	sb_tensors_set_meta(&ts, "split", split, &e);
	sb_tensors_set_meta(&ts, "modality", text ? "text" : "image", &e);
	sb_tensors_set_meta(&ts, "classes", text ? "3" : "4", &e);
	sb_tensors_set_meta(&ts, "presplit", "0", &e);
	if (text) {
		sb_tensors_set_meta(&ts, "seq_len", "10", &e);
		sb_tensors_set_meta(&ts, "vocab", "50", &e);
	} else {
		sb_tensors_set_meta(&ts, "patch", "4", &e);
	}
	write_pool(task, &ts);
}

/* a pre-split text task (as sb-fetch generates synthetic_marker): seeds 0 and 1, 30
 * training (part 0) and 10 validation (part 1) examples each, TMP/ds_root/TASK/pool */
static void write_presplit_ds(const char *task)
{
	enum { N = 80, L = 10 };
	struct sb_err e = {0};
	struct sb_tensors ts;
	sb_tensors_init(&ts);
	int32_t x[N * L] = {0}, len[N], y[N], seed[N];
	uint8_t part[N];
	for (int i = 0; i < N; i++) {
		y[i] = i % 3;
		len[i] = L;
		for (int t = 0; t < L; t++)
			x[i * L + t] = t == 0 ? 2 + y[i] : 2 + (i * 7 + t * 3) % 48;
		seed[i] = i / 40;
		part[i] = i % 40 >= 30;
	}
	sb_tensors_add(&ts, "x", SB_I32, 2, (int64_t[]){N, L}, x, 0, &e);
	sb_tensors_add(&ts, "len", SB_I32, 1, (int64_t[]){N}, len, 0, &e);
	sb_tensors_add(&ts, "y", SB_I32, 1, (int64_t[]){N}, y, 0, &e);
	sb_tensors_add(&ts, "seed", SB_I32, 1, (int64_t[]){N}, seed, 0, &e);
	sb_tensors_add(&ts, "part", SB_U8, 1, (int64_t[]){N}, part, 0, &e);
	const char *kv[][2] = {{"format", "sparsebench.dataset"}, {"format_version", "1"}, {"task", task},
	                       {"split", "pool"}, {"modality", "text"}, {"classes", "3"}, {"vocab", "50"},
	                       {"seq_len", "10"}, {"presplit", "1"}};
	for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
		sb_tensors_set_meta(&ts, kv[i][0], kv[i][1], &e);
	write_pool(task, &ts);
}

/* run sb-train with args; stdout/stderr to files; extra "K=V" environment */
static int run(const char *out, const char *env1, const char *const *args, pid_t *bg)
{
	char *argv[64];
	int n = 0;
	argv[n++] = prog;
	for (; *args && n < 62; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	char *envp[256];
	int ne = 0;
	for (char **e = environ; *e && ne < 250; e++)
		if (strncmp(*e, "SB_TRAIN_", 9))
			envp[ne++] = *e;
	if (env1)
		envp[ne++] = (char *)env1;
	envp[ne] = NULL;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	char errp[4400];
	snprintf(errp, sizeof errp, "%s.err", out);
	posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	pid_t pid;
	int rc = posix_spawn(&pid, prog, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return -1;
	if (bg) {
		*bg = pid;
		return 0;
	}
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* train.ndjson without run.meta / train.resume lines and timing fields */
static char *normalized(const char *path)
{
	static const char *drop[] = {"seconds", "samples_per_s", "train_seconds", "wall_seconds", "peak_memory_mb"};
	struct sb_err e = {0};
	struct sb_ndjson_reader *rd;
	if (sb_ndjson_open(path, &rd, &e))
		return NULL;
	struct sb_jw w;
	sb_jw_init(&w, NULL);
	struct sb_json *v;
	while (!sb_ndjson_next(rd, &v, &e) && v) {
		const char *k = sb_json_str(sb_json_get(v, "kind"), "");
		if (strcmp(k, "run.meta") && strcmp(k, "train.resume")) {
			sb_jw_obj(&w);
			for (size_t i = 0; i < v->n; i++) {
				int skip = 0;
				for (size_t j = 0; j < sizeof drop / sizeof drop[0]; j++)
					skip |= !strcmp(v->keys[i], drop[j]);
				if (!skip) {
					sb_jw_key(&w, v->keys[i]);
					sb_jw_value(&w, v->items[i]);
				}
			}
			sb_jw_obj_end(&w);
			sb_jw_line(&w, &e);
		}
		sb_json_free(v);
	}
	sb_ndjson_close(rd);
	char *s = malloc(w.len + 1);
	memcpy(s, w.buf, w.len);
	s[w.len] = 0;
	sb_jw_free(&w);
	return s;
}

static int same_file(const char *a, const char *b)
{
	struct sb_err e = {0};
	char *x = NULL, *y = NULL;
	size_t nx = 0, ny = 0;
	int ok = !sb_read_file(a, &x, &nx, 0, &e) && !sb_read_file(b, &y, &ny, 0, &e) && nx == ny && !memcmp(x, y, nx);
	free(x);
	free(y);
	return ok;
}

/* compare run directories of one cell: records (normalized) and every .safetensors */
static int same_run(const char *da, const char *db, const char *cell, char *why, size_t nwhy)
{
	char pa[4400], pb[4400];
	snprintf(pa, sizeof pa, "%s/%s/train.ndjson", da, cell);
	snprintf(pb, sizeof pb, "%s/%s/train.ndjson", db, cell);
	char *a = normalized(pa), *b = normalized(pb);
	int ok = a && b && !strcmp(a, b);
	if (!ok)
		snprintf(why, nwhy, "train.ndjson differs");
	free(a);
	free(b);
	for (int ep = 1; ok && ep < 100; ep++) {
		snprintf(pa, sizeof pa, "%s/%s/epoch-%03d.safetensors", da, cell, ep);
		snprintf(pb, sizeof pb, "%s/%s/epoch-%03d.safetensors", db, cell, ep);
		int ea = sb_file_exists(pa), eb = sb_file_exists(pb);
		if (!ea && !eb)
			break;
		if (ea != eb || !same_file(pa, pb)) {
			ok = 0;
			snprintf(why, nwhy, "epoch-%03d.safetensors differs", ep);
		}
		snprintf(pa, sizeof pa, "%s/%s/epoch-%03d.optim.safetensors", da, cell, ep);
		snprintf(pb, sizeof pb, "%s/%s/epoch-%03d.optim.safetensors", db, cell, ep);
		if (ok && sb_file_exists(pa) && sb_file_exists(pb) && !same_file(pa, pb)) {
			ok = 0;
			snprintf(why, nwhy, "epoch-%03d.optim.safetensors differs", ep);
		}
	}
	return ok;
}

static int grep_file(const char *path, const char *needle)
{
	struct sb_err e = {0};
	char *x = NULL;
	size_t n = 0;
	int found = !sb_read_file(path, &x, &n, 0, &e) && strstr(x, needle);
	free(x);
	return found;
}

/* cell ids from a stdout of sb-train (train.done records) */
static int cell_ids(const char *out, char ids[][192], int max)
{
	struct sb_err e = {0};
	struct sb_ndjson_reader *rd;
	int n = 0;
	if (sb_ndjson_open(out, &rd, &e))
		return 0;
	struct sb_json *v;
	while (!sb_ndjson_next(rd, &v, &e) && v) {
		if (!strcmp(sb_json_str(sb_json_get(v, "kind"), ""), "train.done") && n < max)
			snprintf(ids[n++], 192, "%s", sb_json_str(sb_json_get(v, "cell_id"), ""));
		sb_json_free(v);
	}
	sb_ndjson_close(rd);
	return n;
}

static const char *cells[] = {
    "{\"task\":\"img\",\"method\":\"softmax\",\"seed\":0,\"epochs\":3,\"batch\":32}",
    "{\"task\":\"img\",\"method\":\"sparsemax\",\"seed\":1,\"epochs\":2,\"batch\":24,\"arch\":\"local_hybrid\","
    "\"schedule\":\"linear_decay\"}",
    "{\"task\":\"txt\",\"method\":\"headwise_adaptive_entmax\",\"seed\":2,\"epochs\":2,\"batch\":40,\"mask\":"
    "\"exclude\"}",
    "{\"task\":\"txt\",\"method\":\"mechanistic_switch\",\"switch_epoch\":2,\"seed\":3,\"epochs\":3,\"batch\":50,"
    "\"arch\":\"local_hybrid\"}",
    "{\"task\":\"img\",\"method\":\"cosine_alpha\",\"seed\":4,\"epochs\":2,\"batch\":64,\"tier\":\"deep\"}",
};
#define NCELLS 5

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--fixtures")) { /* small datasets for tests/cli/sb-train.t */
		snprintf(tmp, sizeof tmp, "%s", argv[2]);
		write_ds("img", 0, "pool", 160);
		write_ds("txt", 1, "pool", 200);
		write_ds("tst", 0, "test", 40);
		write_presplit_ds("pre");
		return 0;
	}
	snprintf(top, sizeof top, "%s", getenv("SB_TOP") ? getenv("SB_TOP") : ".");
	snprintf(prog, sizeof prog, "%s/bin/sb-train", top);
	if (access(prog, X_OK)) {
		SB_CHECK(0, "%s is not built", prog);
		return sb_test_done();
	}
	snprintf(tmp, sizeof tmp, "/tmp/sbtrain.XXXXXX");
	if (!mkdtemp(tmp)) {
		SB_CHECK(0, "mkdtemp");
		return sb_test_done();
	}
	write_ds("img", 0, "pool", 160);
	write_ds("txt", 1, "pool", 200);
	write_ds("tst", 0, "test", 40);
	char data[4400], path[4500], out[4500], runs[4500], why[200] = "";
	snprintf(data, sizeof data, "%s/data", tmp);
	struct sb_err e = {0};
	/* all cells in one process, three at a time */
	snprintf(path, sizeof path, "%s/cells.ndjson", tmp);
	FILE *f = fopen(path, "w");
	for (int i = 0; i < NCELLS; i++)
		fprintf(f, "%s\n", cells[i]);
	fclose(f);
	snprintf(runs, sizeof runs, "%s/runsB", tmp);
	snprintf(out, sizeof out, "%s/B.out", tmp);
	int rc = run(out, NULL, (const char *[]){"-q", "-d", data, "-o", runs, "-j", "3", path, NULL}, NULL);
	SB_CHECK(rc == 0, "five cells in one process, -j 3 (exit %d)", rc);
	char ids[NCELLS][192];
	int nid = cell_ids(out, ids, NCELLS);
	SB_CHECK(nid == NCELLS, "train.done for every cell on stdout (%d of %d)", nid, NCELLS);
	/* each cell alone, -j 1 (and the first also with -j 2) */
	for (int i = 0; i < NCELLS; i++) {
		char one[4500], runsA[4500], outA[4500];
		snprintf(one, sizeof one, "%s/cell%d.ndjson", tmp, i);
		f = fopen(one, "w");
		fprintf(f, "%s\n", cells[i]);
		fclose(f);
		snprintf(runsA, sizeof runsA, "%s/runsA", tmp);
		snprintf(outA, sizeof outA, "%s/A%d.out", tmp, i);
		rc = run(outA, NULL, (const char *[]){"-q", "-d", data, "-o", runsA, "-j", "1", one, NULL}, NULL);
		char idA[1][192];
		int ok = rc == 0 && cell_ids(outA, idA, 1) == 1;
		SB_CHECK(ok, "cell %d alone (-j 1) completes (exit %d)", i, rc);
		if (!ok)
			continue;
		ok = same_run(runs, runsA, idA[0], why, sizeof why);
		SB_CHECK(ok, "cell %s: alone (-j 1) and among five (-j 3) give identical records and checkpoints%s%s",
		         idA[0], ok ? "" : ": ", ok ? "" : why);
	}
	{
		char runsJ[4500], outJ[4500];
		snprintf(runsJ, sizeof runsJ, "%s/runsJ2", tmp);
		snprintf(outJ, sizeof outJ, "%s/J2.out", tmp);
		char one[4500];
		snprintf(one, sizeof one, "%s/cell0.ndjson", tmp);
		rc = run(outJ, NULL, (const char *[]){"-q", "-d", data, "-o", runsJ, "-j", "2", one, NULL}, NULL);
		/* ids[] is in completion order; find cell 0's id by its prefix */
		char id0[192] = "";
		int ok;
		for (int i = 0; i < nid; i++)
			if (!strncmp(ids[i], "img.softmax.s0.", 15))
				snprintf(id0, sizeof id0, "%s", ids[i]);
		ok = rc == 0 && same_run(runs, runsJ, id0, why, sizeof why);
		SB_CHECK(ok, "cell %s with -j 2 identical to -j 1 and -j 3%s%s", id0, ok ? "" : ": ", ok ? "" : why);
	}
	/* the evaluation side: open a switching cell's run at epochs 1 and 3 */
	{
		char idS[192] = "", run[4800], dpath[4500];
		for (int i = 0; i < nid; i++)
			if (!strncmp(ids[i], "txt.mechanistic_switch.", 23))
				snprintf(idS, sizeof idS, "%s", ids[i]);
		snprintf(run, sizeof run, "%s/%s", runs, idS);
		snprintf(dpath, sizeof dpath, "%s/txt/pool.safetensors", data);
		struct sb_dataset ds;
		struct sb_backend *be = NULL;
		int ok = !sb_dataset_read(dpath, 0, &ds, &e) && !sb_backend_cpu_open(2, &be, &e);
		for (int ep = 1; ok && ep <= 3; ep += 2) {
			struct sb_cell c;
			struct sb_encoder *m = NULL;
			int r2 = sb_run_open_model(run, ep, &ds, be, 0, &c, &m, &e);
			enum sb_norm_kind want = ep == 1 ? SB_NORM_TOPK : SB_NORM_SOFTMAX;
			SB_CHECK(
			    r2 == 0 && m->cfg.norm.kind == want && m->cfg.norm.mask == SB_MASK_MARGIN,
			    "sb_run_open_model(%s, epoch %d): the schedule's normaliser (%s) and the checkpoint (%s)",
			    idS, ep, ep == 1 ? "top-k 0.25" : "softmax", r2 ? e.msg : "ok");
			if (!r2) {
				struct sb_split sp;
				struct sb_encoder_data d;
				struct sb_eval_result r1, r3;
				sb_split_carve(&ds, c.seed, c.val_fraction, c.limit, &sp, &e);
				sb_encoder_data_open(be, &ds, &d, &e);
				int a = sb_encoder_evaluate(m, &d, sp.val, sp.n_val, 64, &r1, NULL, &e);
				int b = sb_encoder_evaluate(m, &d, sp.val, sp.n_val, 64, &r3, NULL, &e);
				SB_CHECK(
				    !a && !b && r1.n == sp.n_val && r1.accuracy == r3.accuracy && r1.loss == r3.loss &&
				        isfinite(r1.loss) && r1.attention_density > 0 && r1.attention_density <= 1,
				    "evaluate epoch %d: n %lld, accuracy %.4f, loss %.4f, density %.3f (repeatable)",
				    ep, (long long)r1.n, r1.accuracy, r1.loss, r1.attention_density);
				sb_split_free(&sp);
			}
			sb_encoder_free(m);
		}
		struct sb_cell c;
		struct sb_encoder *m = NULL;
		SB_CHECK(ok && sb_run_open_model(run, 4, &ds, be, 0, &c, &m, &e) == SB_EUSAGE,
		         "sb_run_open_model refuses an epoch the cell does not have");
		if (ok) {
			sb_dataset_free(&ds);
			sb_backend_close(be);
		}
	}
	/* the same cells again: skipped, nothing rewritten */
	snprintf(out, sizeof out, "%s/C.out", tmp);
	rc = run(out, NULL, (const char *[]){"-q", "-d", data, "-o", runs, "-j", "2", path, NULL}, NULL);
	SB_CHECK(rc == 0 && grep_file(out, "\"kind\":\"train.skip\"") && !grep_file(out, "\"kind\":\"train.epoch\""),
	         "a second run of finished cells skips them (exit %d)", rc);
	/* the same cell twice into fresh directories: identical */
	{
		char runsD[4500], outD[4500], one[4500];
		snprintf(runsD, sizeof runsD, "%s/runsD", tmp);
		snprintf(outD, sizeof outD, "%s/D.out", tmp);
		snprintf(one, sizeof one, "%s/cell2.ndjson", tmp);
		rc = run(outD, NULL, (const char *[]){"-q", "-d", data, "-o", runsD, "-j", "2", one, NULL}, NULL);
		char idD[1][192];
		int ok = rc == 0 && cell_ids(outD, idD, 1) == 1;
		char runsA[4500];
		snprintf(runsA, sizeof runsA, "%s/runsA", tmp);
		ok = ok && same_run(runsA, runsD, idD[0], why, sizeof why);
		SB_CHECK(ok, "the same cell trained twice gives identical records and checkpoints%s%s", ok ? "" : ": ",
		         ok ? "" : why);
	}
	/* the GPU's way (cells of a task, architecture and tier at once through train/multicell.c,
	 * a backend each), forced on the CPU: the same records and checkpoints */
	{
		char runsG[4500], outG[4500];
		snprintf(runsG, sizeof runsG, "%s/runsG", tmp);
		snprintf(outG, sizeof outG, "%s/G.out", tmp);
		rc = run(outG, "SB_TRAIN_GROUPS=1", (const char *[]){"-q", "-d", data, "-o", runsG, "-j", "2", path, NULL},
		         NULL);
		char idG[NCELLS][192];
		int ng = cell_ids(outG, idG, NCELLS), ok = rc == 0 && ng == NCELLS;
		char runsA[4500];
		snprintf(runsA, sizeof runsA, "%s/runsA", tmp);
		for (int i = 0; ok && i < NCELLS; i++)
			ok = same_run(runsA, runsG, idG[i], why, sizeof why);
		SB_CHECK(ok, "cells grouped by task/arch/tier and run at once (multicell, SB_TRAIN_GROUPS=1): the same "
		             "records and checkpoints as alone (exit %d, %d done)%s%s",
		         rc, ng, ok ? "" : ": ", ok ? "" : why);
	}
	/* killed mid-epoch (hook: _exit(137) after 6 steps = in epoch 2 of 4 steps each), then resumed */
	{
		char runsK[4500], outK[4500], one[4500], id0[192] = "", errp0[4600];
		snprintf(runsK, sizeof runsK, "%s/runsK", tmp);
		snprintf(outK, sizeof outK, "%s/K.out", tmp);
		snprintf(one, sizeof one, "%s/cell0.ndjson", tmp);
		rc = run(outK, "SB_TRAIN_STOP_AFTER_STEPS=6",
		         (const char *[]){"-q", "-d", data, "-o", runsK, one, NULL}, NULL);
		for (int i = 0; i < nid; i++)
			if (!strncmp(ids[i], "img.softmax.s0.", 15))
				snprintf(id0, sizeof id0, "%s", ids[i]);
		char p1[4700], p2[4700];
		snprintf(p1, sizeof p1, "%s/%s/epoch-001.safetensors", runsK, id0);
		snprintf(p2, sizeof p2, "%s/%s/epoch-002.safetensors", runsK, id0);
		SB_CHECK(rc == 137 && sb_file_exists(p1) && !sb_file_exists(p2),
		         "a run dying after step 6 (in epoch 2) leaves epoch 1 only (exit %d)", rc);
		/* resumed with another dataset file for the task: refused, the run left as it was */
		char data2[4400], tn[4800], *before = NULL, *after = NULL;
		size_t nb = 0, na = 0;
		snprintf(data2, sizeof data2, "%s/data2", tmp);
		ds_root = "data2";
		write_ds("img", 0, "pool", 161);
		ds_root = "data";
		snprintf(tn, sizeof tn, "%s/%s/train.ndjson", runsK, id0);
		sb_read_file(tn, &before, &nb, 1 << 24, &e);
		rc = run(outK, NULL, (const char *[]){"-q", "-d", data2, "-o", runsK, one, NULL}, NULL);
		sb_read_file(tn, &after, &na, 1 << 24, &e);
		snprintf(errp0, sizeof errp0, "%s.err", outK);
		SB_CHECK(rc == 3 && grep_file(errp0, "the run started on the dataset file with SHA-256") && before &&
		             after && nb == na && !memcmp(before, after, nb) && !sb_file_exists(p2),
		         "resuming on another dataset file is refused (exit %d, want 3), train.ndjson unchanged (%zu -> "
		         "%zu bytes), no epoch 2",
		         rc, nb, na);
		free(before);
		free(after);
		rc = run(outK, NULL, (const char *[]){"-q", "-d", data, "-o", runsK, one, NULL}, NULL);
		char runsA[4500];
		snprintf(runsA, sizeof runsA, "%s/runsA", tmp);
		int ok = rc == 0 && grep_file(outK, "\"kind\":\"train.resume\"") &&
		         same_run(runsA, runsK, id0, why, sizeof why);
		SB_CHECK(ok, "resumed after the kill: identical to the uninterrupted run%s%s", ok ? "" : ": ",
		         ok ? "" : why);
	}
	/* real SIGKILLs at several moments of a longer cell, each followed by a resume */
	{
		const char *cell = "{\"task\":\"txt\",\"method\":\"sparsemax\",\"seed\":5,\"epochs\":6,\"batch\":8}";
		char one[4500], runsU[4500], runsS[4500], outU[4500], idU[1][192];
		snprintf(one, sizeof one, "%s/cellS.ndjson", tmp);
		f = fopen(one, "w");
		fprintf(f, "%s\n", cell);
		fclose(f);
		snprintf(runsU, sizeof runsU, "%s/runsU", tmp);
		snprintf(runsS, sizeof runsS, "%s/runsS", tmp);
		snprintf(outU, sizeof outU, "%s/U.out", tmp);
		rc = run(outU, NULL, (const char *[]){"-q", "-d", data, "-o", runsU, "-j", "1", one, NULL}, NULL);
		int ok = rc == 0 && cell_ids(outU, idU, 1) == 1;
		int kills = 0;
		/* kill k: as soon as epoch k's checkpoint exists (the run is then inside epoch k + 1) */
		for (int k = 1; ok && k <= 4; k++) {
			pid_t pid;
			char outS[4500], ck[4800];
			snprintf(outS, sizeof outS, "%s/S%d.out", tmp, k);
			snprintf(ck, sizeof ck, "%s/%s/epoch-%03d.safetensors", runsS, idU[0], k);
			run(outS, NULL, (const char *[]){"-q", "-d", data, "-o", runsS, "-j", "1", one, NULL}, &pid);
			int st, gone = 0;
			for (int w = 0; w < 20000 && !sb_file_exists(ck); w++) {
				if (waitpid(pid, &st, WNOHANG) == pid) {
					gone = 1;
					break;
				}
				struct timespec ts = {0, 200000};
				nanosleep(&ts, NULL);
			}
			if (!gone && kill(pid, SIGKILL) == 0)
				kills++;
			if (!gone)
				waitpid(pid, &st, 0);
		}
		char outS[4500];
		snprintf(outS, sizeof outS, "%s/Sfinal.out", tmp);
		rc = run(outS, NULL, (const char *[]){"-q", "-d", data, "-o", runsS, "-j", "1", one, NULL}, NULL);
		ok = ok && rc == 0 && same_run(runsU, runsS, idU[0], why, sizeof why);
		char tn[4800];
		snprintf(tn, sizeof tn, "%s/%s/train.ndjson", runsS, idU[0]);
		SB_CHECK(grep_file(tn, "\"kind\":\"train.resume\""),
		         "the SIGKILLs interrupted the run (train.resume recorded)");
		SB_CHECK(ok,
		         "%d SIGKILLs (each right after an epoch's checkpoint appeared), then a resume: identical to "
		         "the uninterrupted run%s%s",
		         kills, ok ? "" : ": ", ok ? "" : why);
	}
	/* non-finite loss */
	{
		char runsN[4500], outN[4500], one[4500];
		snprintf(runsN, sizeof runsN, "%s/runsN", tmp);
		snprintf(outN, sizeof outN, "%s/N.out", tmp);
		snprintf(one, sizeof one, "%s/cell0.ndjson", tmp);
		rc = run(outN, "SB_TRAIN_NAN_AT_STEP=6", (const char *[]){"-q", "-d", data, "-o", runsN, one, NULL},
		         NULL);
		SB_CHECK(rc == 0 && grep_file(outN, "\"status\":\"failed_nonfinite_loss\"") &&
		             grep_file(outN, "\"epoch\":1,\"step\":5,\"step_in_epoch\":1"),
		         "a non-finite loss ends the cell with failed_nonfinite_loss at epoch 1, step 5 (exit %d)", rc);
		rc = run(outN, NULL, (const char *[]){"-q", "-d", data, "-o", runsN, one, NULL}, NULL);
		SB_CHECK(rc == 0 && grep_file(outN, "\"kind\":\"train.skip\""), "and is not retried (exit %d)", rc);
	}
	/* test split refused */
	snprintf(out, sizeof out, "%s/T.out", tmp);
	rc = run(out, NULL,
	         (const char *[]){"-d", data, "-o", runs, "--task", "tst", "--method", "softmax", "--seed", "0", NULL},
	         NULL);
	char errp[4600];
	snprintf(errp, sizeof errp, "%s.err", out);
	SB_CHECK(rc == 1 && grep_file(errp, "test split"), "a split=test dataset is refused (exit %d)", rc);
	if (sb_test_done() == 0) {
		char cmd[4200];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
		if (system(cmd))
			(void)e;
		return 0;
	}
	printf("# kept %s for inspection\n", tmp);
	return 1;
}
