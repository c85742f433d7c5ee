/* test_io — atomic writes (temp in the same directory, renamed; removed on
 * error and on SIGTERM/SIGINT), whole-file reads, SHA-256 and sidecars. */
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness.h"
#include "hash.h"
#include "io.h"

static char dir[256];

static int count_tmp(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)))
		n += strstr(e->d_name, ".tmp.") != NULL;
	closedir(d);
	return n;
}

static void atomic(void)
{
	struct sb_err err = {0};
	char *p = sb_path_join(dir, "out.txt");
	SB_CHECK(sb_write_file_atomic(p, "hello\n", 6, &err) == 0, "atomic write (%s)", err.msg);
	char *data;
	size_t n;
	SB_CHECK(sb_read_file(p, &data, &n, 0, &err) == 0 && n == 6 && memcmp(data, "hello\n", 6) == 0, "read back");
	free(data);
	SB_CHECK(sb_read_file(p, &data, &n, 3, &err) == SB_EDATA && strstr(err.msg, "larger than 3"), "size limit: %s", err.msg);

	/* an aborted write leaves the old content and no temp file */
	struct sb_atomic a;
	SB_CHECK(sb_atomic_open(&a, p, &err) == 0, "open");
	fputs("partial", a.f);
	SB_CHECK(count_tmp() == 1, "a temp file exists while writing");
	sb_atomic_abort(&a);
	SB_CHECK(count_tmp() == 0, "abort removes the temp file");
	SB_CHECK(sb_read_file(p, &data, &n, 0, &err) == 0 && n == 6, "old content intact after abort");
	free(data);

	/* a target in a missing directory fails cleanly */
	char *q = sb_path_join(dir, "nope/x.txt");
	int rc = sb_write_file_atomic(q, "x", 1, &err);
	SB_CHECK(rc == SB_EIO && strstr(err.msg, "nope/x.txt"), "missing directory: rc=%d %s", rc, err.msg);
	free(q);

	/* SIGTERM while writing: the handler removes the temp file, the target is untouched */
	for (int s = 0; s < 2; s++) {
		int sig = s ? SIGINT : SIGTERM;
		pid_t pid = fork();
		if (pid == 0) {
			sb_io_install_signals();
			struct sb_atomic b;
			struct sb_err e2 = {0};
			if (sb_atomic_open(&b, p, &e2))
				_exit(9);
			fputs("never", b.f);
			fflush(b.f);
			raise(sig);
			_exit(8);
		}
		int st;
		waitpid(pid, &st, 0);
		SB_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == sig, "child died of signal %d", sig);
		SB_CHECK(count_tmp() == 0, "signal %d: temp file removed", sig);
		SB_CHECK(sb_read_file(p, &data, &n, 0, &err) == 0 && n == 6, "signal %d: target untouched", sig);
		free(data);
	}
	SB_CHECK(sb_mkdir_p(q = sb_path_join(dir, "a/b/c"), &err) == 0 && sb_file_exists(q), "mkdir -p");
	SB_CHECK(sb_mkdir_p(q, &err) == 0, "mkdir -p again is fine");
	free(q);
	SB_CHECK(sb_mkdir_p(p, &err) == SB_EIO, "mkdir -p over a file fails: %s", err.msg);
	free(p);
}

static void hashing(void)
{
	struct sb_err err = {0};
	char hex[SB_SHA256_HEX];
	sb_sha256_buf("abc", 3, hex);
	SB_CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "SHA-256('abc') FIPS 180-2 vector: %s", hex);
	sb_sha256_buf("", 0, hex);
	SB_CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0, "SHA-256('') vector");
	/* streaming over odd chunk sizes equals one shot; million 'a' vector */
	struct sb_sha256 *h = sb_sha256_new();
	char block[997];
	memset(block, 'a', sizeof block);
	size_t left = 1000000;
	while (left) {
		size_t k = left < sizeof block ? left : sizeof block;
		sb_sha256_update(h, block, k);
		left -= k;
	}
	sb_sha256_final(h, hex);
	SB_CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0, "SHA-256 of a million 'a' streamed");

	char *p = sb_path_join(dir, "data.bin");
	sb_write_file_atomic(p, "abc", 3, &err);
	uint64_t size;
	SB_CHECK(sb_sha256_file(p, hex, &size, &err) == 0 && size == 3 &&
		 strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "file hash");
	SB_CHECK(sb_sidecar_write(p, hex, &err) == 0, "sidecar write");
	char *side = sb_path_join(dir, "data.bin.sha256"), *txt;
	size_t n;
	sb_read_file(side, &txt, &n, 0, &err);
	SB_CHECK(strcmp(txt, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  data.bin\n") == 0,
		 "sidecar is sha256sum format: %s", txt);
	free(txt);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "cd '%s' && sha256sum -c --status data.bin.sha256", dir);
	SB_CHECK(system(cmd) == 0, "sha256sum -c accepts the sidecar");
	SB_CHECK(sb_sidecar_verify(p, hex, &err) == 0, "verify ok");
	sb_write_file_atomic(p, "abd", 3, &err);
	int rc = sb_sidecar_verify(p, hex, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "expected ba7816bf") && strstr(err.msg, "actual "), "mismatch names both hashes: %s", err.msg);
	sb_write_file_atomic(side, "zz  data.bin\n", 13, &err);
	rc = sb_sidecar_verify(p, hex, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "not a sha256sum line"), "malformed sidecar: %s", err.msg);
	rc = sb_sha256_file("/nonexistent/x", hex, NULL, &err);
	SB_CHECK(rc == SB_EIO && strstr(err.msg, "/nonexistent/x"), "missing file: %s", err.msg);
	SB_CHECK(sb_is_sha256_hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") &&
		 !sb_is_sha256_hex("BA7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") && !sb_is_sha256_hex("ab"),
		 "hex validation");
	free(side);
	free(p);
}

/* a write that must not replace: the new file appears whole; an existing one is kept, refused */
static void write_new(void)
{
	struct sb_err err = {0};
	char *p = sb_path_join(dir, "new.txt");
	int rc1 = sb_write_file_new(p, "first\n", 6, &err);
	int rc2 = sb_write_file_new(p, "second\n", 7, &err);
	char *data = NULL;
	size_t n = 0;
	sb_read_file(p, &data, &n, 0, NULL);
	SB_CHECK(rc1 == 0 && rc2 == SB_EVERDICT && strstr(err.msg, "exists") && data && n == 6 &&
	             !memcmp(data, "first\n", 6) && count_tmp() == 0,
	         "write_new: written (%d), then refused (%d: %s), the first content kept (%zu bytes), no temp file (%d)",
	         rc1, rc2, err.msg, n, count_tmp());
	free(data);
	free(p);
}

int main(void)
{
	snprintf(dir, sizeof dir, "/tmp/sb_test_io.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	atomic();
	write_new();
	hashing();
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd))
		printf("# cleanup failed\n");
	char t[32];
	sb_time_rfc3339(t, NULL);
	SB_CHECK(strlen(t) == 24 && t[10] == 'T' && t[23] == 'Z', "RFC 3339 time %s", t);
	return sb_test_done();
}
