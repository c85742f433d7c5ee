/* test_lm_fuzz.c — replay every kept fuzz input of the LM-file parsers (tests/fuzz/lm/
 * crashers/TARGET/ and seeds/TARGET/) through its target: each must return without
 * crashing or breaking an invariant (targets.h aborts then). Inputs that once crashed or
 * hung a parser are kept in crashers/ as fixed regression tests; they must now be refused
 * (non-zero status) or parsed. Seeds of the tokenizer, config, index and safetensors
 * targets are real files cut down: each target must accept at least one of them. Run
 * under tests/san.sh (ASan + UBSan) to catch silent memory errors. */
#include <dirent.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../fuzz/lm/targets.h"
#include "../harness.h"
#include "../fuzz/replay.h"

/* The safetensors target's temporary file is gone once the process has exited: a child runs
 * the target, finds the file among its open descriptors (/proc/self/fd), passes its name up
 * and exits; the file must no longer exist (each run of this test left one in /dev/shm). */
static void temp_file_removed(void)
{
	if (access("/proc/self/fd", R_OK) != 0) {
		SB_CHECK(1, "# SKIP safetensors target's temporary file: no /proc/self/fd");
		return;
	}
	int pfd[2];
	if (pipe(pfd)) {
		SB_CHECK(0, "pipe");
		return;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		fz_safetensors((const uint8_t *)"x", 1);
		DIR *d = opendir("/proc/self/fd");
		struct dirent *e;
		char link[64], name[4096];
		while (d && (e = readdir(d))) {
			snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
			ssize_t k = readlink(link, name, sizeof name - 1);
			if (k > 0 && (name[k] = 0, strstr(name, "/sb-fuzz-st-"))) {
				/* a short write: the parent's check fails */
				ssize_t w = write(pfd[1], name, (size_t)k);
				(void)w;
				break;
			}
		}
		if (d)
			closedir(d);
		close(pfd[1]);
		exit(0); /* exit, not _exit: the atexit handlers run */
	}
	close(pfd[1]);
	char path[4096] = "";
	ssize_t got = pid > 0 ? read(pfd[0], path, sizeof path - 1) : -1;
	close(pfd[0]);
	int st = 0;
	if (pid > 0)
		waitpid(pid, &st, 0);
	path[got > 0 ? got : 0] = 0;
	int left = path[0] && access(path, F_OK) == 0;
	if (left)
		unlink(path);
	SB_CHECK(pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && path[0] && !left,
	         "the safetensors target's temporary file (%s) is removed at exit (exit status %d)",
	         path[0] ? path : "not found", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

int main(void)
{
	temp_file_removed(); /* first: the child makes its own temporary file */
	const char *top = getenv("SB_TOP") ? getenv("SB_TOP") : ".";
	int total = 0;
	for (const struct fz_target *t = fz_targets; t->name; t++)
		total += fz_replay_target(top, "lm", t->name, t->fn);
	for (int k = 0; k < 3; k++)
		sb_tok_free(fz_fixture_tok[k]);
	SB_CHECK(total >= 40, "replayed %d inputs in all", total);
	return sb_test_done();
}
