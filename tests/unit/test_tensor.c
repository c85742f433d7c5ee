/* test_tensor — safetensors: write/read round trip of every dtype, a file
 * written by Python's safetensors package, validation of hostile headers, sb_st_map
 * with a SHA-256, and a mapped file truncated under sb_st_map (one line and exit 4,
 * not SIGBUS). */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "../harness.h"
#include "cli.h"
#include "hash.h"
#include "io.h"
#include "tensor.h"

static char dir[256];

static char *tpath(const char *name)
{
	static char p[512];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return p;
}

/* Build a file from a header string and n data bytes, then try to read it. */
static int try_header(const char *hdr, size_t ndata, char *msg)
{
	size_t hl = strlen(hdr);
	unsigned char *buf = calloc(1, 8 + hl + ndata);
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
	memcpy(buf + 8, hdr, hl);
	struct sb_tensors ts;
	struct sb_err err = {0};
	int rc = sb_st_parse(buf, 8 + hl + ndata, "bad.safetensors", &ts, &err);
	snprintf(msg, 1024, "%s", err.msg);
	if (!rc)
		sb_tensors_free(&ts);
	free(buf);
	return rc;
}

static void hostile(void)
{
	static const struct {
		const char *name, *hdr;
		size_t ndata;
		const char *want;
	} cases[] = {
		{"not JSON", "{\"a\":", 0, "header"},
		{"not an object", "[1,2]", 0, "not a JSON object"},
		{"unknown dtype", "{\"a\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}", 16, "unknown or missing dtype"},
		{"offsets past end", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, "outside the file"},
		{"size mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", 16, "does not match"},
		{"reversed offsets", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,4]}}", 16, "bad data_offsets"},
		{"negative offset", "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[-4,0]}}", 16, "bad data_offsets"},
		{"overlap", "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}", 16, "overlap"},
		{"shape overflow", "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,0]}}", 0, "does not match"},
		{"negative dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "bad shape"},
		{"too many dims", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, "bad shape"},
		{"metadata not strings", "{\"__metadata__\":{\"k\":1}}", 0, "not a string"},
		{"duplicate tensor", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, "duplicate key 'a'"},
		{"missing offsets", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "bad data_offsets"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char msg[1024];
		int rc = try_header(cases[i].hdr, cases[i].ndata, msg);
		SB_CHECK(rc == SB_EDATA && strstr(msg, cases[i].want) && strstr(msg, "bad.safetensors"),
			 "hostile header '%s' refused with SB_EDATA: rc=%d msg=%s", cases[i].name, rc, msg);
	}
	/* absurd header length */
	unsigned char b[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
	struct sb_tensors ts;
	struct sb_err err = {0};
	int rc = sb_st_parse(b, sizeof b, "big.safetensors", &ts, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "exceeds the limit"), "absurd header size refused: %s", err.msg);
	rc = sb_st_parse(b, 4, "short.safetensors", &ts, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "too short"), "short file refused: %s", err.msg);
	unsigned char c[16] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
	rc = sb_st_parse(c, 10, "trunc.safetensors", &ts, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "larger than the file"), "header longer than file refused: %s", err.msg);
}

static void roundtrip(void)
{
	struct sb_tensors ts;
	struct sb_err err = {0};
	sb_tensors_init(&ts);
	float f32[6] = {1.5f, -2.0f, 0.1f, 1e-30f, 3.4e38f, -0.0f};
	double f64[3] = {3.141592653589793, -1e-300, 2.0};
	int32_t i32[4] = {INT32_MIN, -1, 0, INT32_MAX};
	int64_t i64[2] = {INT64_MIN, INT64_MAX};
	uint8_t u8[5] = {0, 1, 127, 128, 255};
	uint16_t bf16[3] = {0x3f80, 0xc000, 0x7f80}; /* 1.0, -2.0, +inf */
	sb_tensors_add(&ts, "f32", SB_F32, 2, (int64_t[]){2, 3}, f32, 0, &err);
	sb_tensors_add(&ts, "f64", SB_F64, 1, (int64_t[]){3}, f64, 1, &err);
	sb_tensors_add(&ts, "i32", SB_I32, 1, (int64_t[]){4}, i32, 0, &err);
	sb_tensors_add(&ts, "i64", SB_I64, 1, (int64_t[]){2}, i64, 0, &err);
	sb_tensors_add(&ts, "u8", SB_U8, 1, (int64_t[]){5}, u8, 0, &err);
	sb_tensors_add(&ts, "bf16", SB_BF16, 1, (int64_t[]){3}, bf16, 0, &err);
	sb_tensors_add(&ts, "scalar", SB_F32, 0, NULL, f32, 0, &err);
	sb_tensors_add(&ts, "empty", SB_F32, 2, (int64_t[]){0, 4}, NULL, 0, &err);
	sb_tensors_set_meta(&ts, "task", "unit \"test\" \xc3\xa9", &err);
	SB_CHECK(sb_tensors_add(&ts, "u8", SB_U8, 1, (int64_t[]){5}, u8, 0, &err) != 0, "duplicate name refused");
	int rc = sb_st_write(tpath("rt.safetensors"), &ts, &err);
	SB_CHECK(rc == 0, "write (%s)", err.msg);
	struct sb_tensors back;
	rc = sb_st_read(tpath("rt.safetensors"), &back, &err);
	SB_CHECK(rc == 0, "read back (%s)", err.msg);
	int same = back.n == ts.n;
	for (size_t i = 0; same && i < ts.n; i++) {
		const struct sb_tensor *a = &ts.t[i], *b = sb_tensors_find(&back, a->name);
		same = b && a->dtype == b->dtype && a->ndim == b->ndim && a->nbytes == b->nbytes &&
		       memcmp(a->shape, b->shape, a->ndim * sizeof a->shape[0]) == 0 &&
		       (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0);
	}
	SB_CHECK(same, "every dtype (F32 F64 I32 I64 U8 BF16, scalar, empty) round-trips bit for bit");
	const char *m = sb_tensors_meta(&back, "task");
	SB_CHECK(m && strcmp(m, "unit \"test\" \xc3\xa9") == 0, "metadata round-trips: %s", m ? m : "(null)");
	/* header padded to 8 bytes */
	FILE *f = fopen(tpath("rt.safetensors"), "rb");
	unsigned char h8[8];
	size_t got = fread(h8, 1, 8, f);
	fclose(f);
	uint64_t hl = 0;
	for (int i = 7; i >= 0; i--)
		hl = hl << 8 | h8[i];
	SB_CHECK(got == 8 && hl % 8 == 0, "header length %llu is a multiple of 8", (unsigned long long)hl);
	struct sb_tensors meta;
	rc = sb_st_read_meta(tpath("rt.safetensors"), &meta, &err);
	SB_CHECK(rc == 0 && meta.n == ts.n && sb_tensors_meta(&meta, "task"), "metadata-only read");
	sb_tensors_free(&meta);
	sb_tensors_free(&back);
	sb_tensors_free(&ts);
}

static void python_written(void)
{
	const char *top = getenv("SB_TOP") ? getenv("SB_TOP") : ".";
	char p[1024];
	snprintf(p, sizeof p, "%s/tests/golden/safetensors/py_written.safetensors", top);
	struct sb_tensors ts;
	struct sb_err err = {0};
	int rc = sb_st_read(p, &ts, &err);
	SB_CHECK(rc == 0, "read the file written by Python's safetensors (%s)", err.msg);
	if (rc)
		return;
	const struct sb_tensor *t = sb_tensors_find(&ts, "f32");
	float want32[6] = {0.5f, -1.25f, 3.0f, 1e-7f, 65504.0f, -0.0f};
	SB_CHECK(t && t->dtype == SB_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 &&
		 memcmp(t->data, want32, sizeof want32) == 0, "f32 [2,3] values");
	t = sb_tensors_find(&ts, "f64");
	double want64[3] = {3.141592653589793, -2.718281828459045, 1e300};
	SB_CHECK(t && t->dtype == SB_F64 && memcmp(t->data, want64, sizeof want64) == 0, "f64 values");
	t = sb_tensors_find(&ts, "i32");
	int32_t wi32[3] = {INT32_MIN, 0, INT32_MAX};
	SB_CHECK(t && t->dtype == SB_I32 && memcmp(t->data, wi32, sizeof wi32) == 0, "i32 values");
	t = sb_tensors_find(&ts, "i64");
	int64_t wi64[3] = {INT64_MIN, 1, INT64_MAX};
	SB_CHECK(t && t->dtype == SB_I64 && memcmp(t->data, wi64, sizeof wi64) == 0, "i64 values");
	t = sb_tensors_find(&ts, "u8");
	uint8_t wu8[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
	SB_CHECK(t && t->dtype == SB_U8 && t->shape[0] == 2 && t->shape[1] == 5 && memcmp(t->data, wu8, 10) == 0, "u8 values");
	t = sb_tensors_find(&ts, "scalar");
	SB_CHECK(t && t->ndim == 0 && *(float *)t->data == 7.0f, "scalar");
	t = sb_tensors_find(&ts, "empty");
	SB_CHECK(t && t->ndim == 2 && t->shape[0] == 0 && t->nbytes == 0, "empty tensor");
	const char *who = sb_tensors_meta(&ts, "who");
	SB_CHECK(who && strcmp(who, "python safetensors") == 0, "metadata");
	sb_tensors_free(&ts);
}

/* A file of one F32 tensor "w" of 64 KiB (16 pages of 4 KiB), to be mapped and truncated. */
static void write_big(const char *path)
{
	static float w[16384];
	struct sb_tensors ts;
	struct sb_err err = {0};
	sb_tensors_init(&ts);
	sb_tensors_add(&ts, "w", SB_F32, 1, (int64_t[]){16384}, w, 1, &err);
	if (sb_st_write(path, &ts, &err))
		printf("# %s\n", err.msg);
	sb_tensors_free(&ts);
}

/* Touch the last byte of tensor "w", which lies past the end of a file cut to 4096 bytes. */
static int touch_last(const struct sb_tensors *ts)
{
	const struct sb_tensor *t = sb_tensors_find(ts, "w");
	return t ? ((volatile const unsigned char *)t->data)[t->nbytes - 1] : -1;
}

/* Children of mapped_truncated(): each ends by touching a page past the end of a truncated
 * mapping; returning means it did not fault (exit 7); 9: a setup step failed. */
static void child_truncated(int how)
{
	struct sb_tensors ts, other;
	struct sb_st_map map, omap;
	struct sb_err err = {0};
	char a[600], b[600];
	snprintf(a, sizeof a, "%s", tpath("big.safetensors"));
	snprintf(b, sizeof b, "%s", tpath("other.safetensors"));
	if (how == 0) { /* the plain case */
		if (sb_st_map(a, NULL, &ts, &map, &err) || truncate(a, 4096))
			_exit(9);
		touch_last(&ts);
	} else if (how == 1) { /* a registry slot reused many times; other mappings live and unmapped */
		for (int i = 0; i < 40; i++) {
			if (sb_st_map(b, NULL, &other, &omap, &err))
				_exit(9);
			sb_st_unmap(&other, &omap);
		}
		struct sb_tensors many[20];
		struct sb_st_map mm[20];
		for (int i = 0; i < 20; i++) /* more maps at once than the handler watches: still fine */
			if (sb_st_map(b, NULL, &many[i], &mm[i], &err))
				_exit(9);
		for (int i = 0; i < 20; i++)
			sb_st_unmap(&many[i], &mm[i]);
		if (sb_st_map(b, NULL, &other, &omap, &err) || sb_st_map(a, NULL, &ts, &map, &err) || truncate(a, 4096))
			_exit(9);
		touch_last(&ts);
	} else if (how == 2) { /* a pending atomic write is removed, as on SIGINT */
		struct sb_atomic out;
		if (sb_atomic_open(&out, tpath("out.bin"), &err) || fputs("half", out.f) < 0 || fflush(out.f) ||
		    sb_st_map(a, NULL, &ts, &map, &err) || truncate(a, 4096))
			_exit(9);
		touch_last(&ts);
	} else { /* a mapping not made by sb_st_map (a bug, here): the default action, SIGBUS */
		struct rlimit no_core = {0, 0};
		setrlimit(RLIMIT_CORE, &no_core);
		int fd = open(a, O_RDONLY);
		void *p = fd < 0 ? MAP_FAILED : mmap(NULL, 65536, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED || sb_st_map(b, NULL, &other, &omap, &err) || truncate(a, 4096))
			_exit(9);
		(void)((volatile const unsigned char *)p)[65535];
	}
	_exit(7);
}

/* Run child_truncated(how) in a child with stderr to a pipe: its wait status and stderr. */
static int run_child(int how, char *msg, size_t cap)
{
	int fds[2];
	if (pipe(fds))
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 2);
		close(fds[1]);
		child_truncated(how);
	}
	close(fds[1]);
	size_t n = 0;
	ssize_t k;
	while (n + 1 < cap && (k = read(fds[0], msg + n, cap - 1 - n)) > 0)
		n += (size_t)k;
	msg[n] = 0;
	close(fds[0]);
	int st = -1;
	waitpid(pid, &st, 0);
	return st;
}

/* Another process truncates a file while sb_st_map has it mapped: touching a page past the
 * new end raises SIGBUS, which killed the program without a word. Now: one line naming the
 * file, exit 4 (SB_EIO), no temporary file left; a SIGBUS elsewhere still kills. */
static void mapped_truncated(void)
{
	static const char *what[] = {"a mapped file truncated, a page past its end touched",
				     "the same after 60 maps and unmaps (20 at once), another map live",
				     "the same with an atomic write pending"};
	for (int how = 0; how < 3; how++) {
		write_big(tpath("big.safetensors"));
		write_big(tpath("other.safetensors"));
		char msg[8192], want[1200];
		int st = run_child(how, msg, sizeof msg);
		size_t n = strlen(msg);
		int one_line = n && msg[n - 1] == '\n' && !memchr(msg, '\n', n - 1);
		if (one_line)
			msg[n - 1] = 0;
		snprintf(want, sizeof want, "test_tensor: %s: the file changed while mapped (truncated by another process?)",
			 tpath("big.safetensors"));
		if (!SB_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == SB_EIO && one_line && strcmp(msg, want) == 0,
			      "%s: exit %d (want %d), signal %d (want none), stderr '%s' (want it, one line)", what[how],
			      WIFEXITED(st) ? WEXITSTATUS(st) : -1, SB_EIO, WIFSIGNALED(st) ? WTERMSIG(st) : 0, msg))
			printf("#   want '%s'\n", want);
	}
	int left = 0;
	DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));)
		left += strstr(e->d_name, ".tmp.") != NULL;
	if (d)
		closedir(d);
	SB_CHECK(left == 0, "the pending temporary file was removed (%d left)", left);
	write_big(tpath("big.safetensors"));
	write_big(tpath("other.safetensors"));
	char msg[8192];
	int st = run_child(3, msg, sizeof msg);
	SB_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS && msg[0] == 0,
		 "a truncated mapping not made by sb_st_map: killed by SIGBUS (signal %d, exit %d, stderr '%s')",
		 WIFSIGNALED(st) ? WTERMSIG(st) : 0, WIFEXITED(st) ? WEXITSTATUS(st) : -1, msg);
}

/* sb_st_map with a SHA-256: the mapped bytes are hashed before they are parsed. */
static void mapped_hash(void)
{
	const char *p = tpath("rt.safetensors");
	char *data;
	size_t n;
	char hex[SB_SHA256_HEX], other[SB_SHA256_HEX];
	struct sb_err err = {0};
	if (!SB_CHECK(sb_read_file(p, &data, &n, 0, &err) == 0, "read rt.safetensors%s%s", err.msg[0] ? ": " : "",
		      err.msg))
		return;
	sb_sha256_buf(data, n, hex);
	sb_sha256_buf("x", 1, other);
	struct sb_tensors ts;
	struct sb_st_map map;
	int rc = sb_st_map(p, hex, &ts, &map, &err);
	SB_CHECK(rc == 0 && sb_tensors_find(&ts, "f32"), "mapped with its SHA-256 (%s)", rc ? err.msg : "ok");
	if (!rc)
		sb_st_unmap(&ts, &map);
	rc = sb_st_map(p, other, &ts, &map, &err);
	char want[600];
	snprintf(want, sizeof want, "%s: SHA-256 mismatch: expected %s, actual %s", p, other, hex);
	SB_CHECK(rc == SB_EDATA && strcmp(err.msg, want) == 0 && !map.addr && !ts.n,
		 "mapped with another SHA-256: refused (rc %d: %s)", rc, err.msg);
	/* a header broken: the hash, checked first, is what is reported */
	data[9] = '[';
	const char *q = tpath("broken.safetensors");
	rc = sb_write_file_atomic(q, data, n, &err);
	rc = rc ? rc : sb_st_map(q, hex, &ts, &map, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "SHA-256 mismatch: expected"), "a broken header with the old hash: %s",
		 err.msg);
	rc = sb_st_map(q, NULL, &ts, &map, &err);
	SB_CHECK(rc == SB_EDATA && strstr(err.msg, "header"), "the same without a hash: %s", err.msg);
	free(data);
}

/* sb_st_read_checked: one read, hashed and parsed; the sidecar required or when present */
static void read_checked(void)
{
	const char *p = tpath("rt.safetensors");
	char hex[SB_SHA256_HEX], got[SB_SHA256_HEX] = "", other[SB_SHA256_HEX];
	struct sb_err err = {0};
	struct sb_tensors ts;
	SB_CHECK(sb_sha256_file(p, hex, NULL, &err) == 0, "hash rt.safetensors");
	int rc = sb_st_read_checked(p, 0, got, &ts, &err);
	SB_CHECK(rc == 0 && !strcmp(got, hex) && sb_tensors_find(&ts, "f32"),
		 "no sidecar, not required: read, its SHA-256 returned (%s)", rc ? err.msg : got);
	if (!rc)
		sb_tensors_free(&ts);
	char side[4200];
	snprintf(side, sizeof side, "%s.sha256", p);
	rc = sb_st_read_checked(p, 1, got, &ts, &err);
	SB_CHECK(rc != 0 && strstr(err.msg, ".sha256"), "no sidecar, required: refused naming it (%s)", err.msg);
	rc = sb_sidecar_write(p, hex, &err);
	rc = rc ? rc : sb_st_read_checked(p, 1, got, &ts, &err);
	SB_CHECK(rc == 0 && !strcmp(got, hex), "the right sidecar, required: read (%s)", rc ? err.msg : "ok");
	if (!rc)
		sb_tensors_free(&ts);
	sb_sha256_buf("x", 1, other);
	rc = sb_sidecar_write(p, other, &err);
	char want[600];
	snprintf(want, sizeof want, "%s: SHA-256 mismatch: expected %s, actual %s", p, other, hex);
	for (int req = 0; req < 2; req++) {
		rc = rc ? rc : sb_st_read_checked(p, req, got, &ts, &err);
		SB_CHECK(rc == SB_EDATA && !strcmp(err.msg, want) && !ts.n,
			 "another sidecar (%s): refused with the mismatch (rc %d: %s)", req ? "required" : "when present", rc,
			 err.msg);
		rc = 0;
	}
	unlink(side);
}

/* test_tensor --write PATH: write the file tests/sh/safetensors_python.sh checks in Python */
static int write_for_python(const char *path)
{
	struct sb_tensors ts;
	struct sb_err err = {0};
	sb_tensors_init(&ts);
	float f32[6] = {1.5f, -2.0f, 0.1f, 1e-30f, 3.4e38f, -0.0f};
	double f64[3] = {3.141592653589793, -1e-300, 2.0};
	int32_t i32[4] = {INT32_MIN, -1, 0, INT32_MAX};
	int64_t i64[2] = {INT64_MIN, INT64_MAX};
	uint8_t u8[5] = {0, 1, 127, 128, 255};
	uint16_t bf16[3] = {0x3f80, 0xc000, 0x7f80};
	sb_tensors_add(&ts, "f32", SB_F32, 2, (int64_t[]){2, 3}, f32, 0, &err);
	sb_tensors_add(&ts, "f64", SB_F64, 1, (int64_t[]){3}, f64, 0, &err);
	sb_tensors_add(&ts, "i32", SB_I32, 1, (int64_t[]){4}, i32, 0, &err);
	sb_tensors_add(&ts, "i64", SB_I64, 1, (int64_t[]){2}, i64, 0, &err);
	sb_tensors_add(&ts, "u8", SB_U8, 1, (int64_t[]){5}, u8, 0, &err);
	sb_tensors_add(&ts, "bf16", SB_BF16, 1, (int64_t[]){3}, bf16, 0, &err);
	sb_tensors_set_meta(&ts, "task", "roundtrip", &err);
	int rc = sb_st_write(path, &ts, &err);
	if (rc)
		fprintf(stderr, "test_tensor: %s\n", err.msg);
	sb_tensors_free(&ts);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write") == 0)
		return write_for_python(argv[2]);
	snprintf(dir, sizeof dir, "/tmp/sb_test_tensor.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	roundtrip();
	python_written();
	hostile();
	mapped_hash();
	read_checked();
	sb_prog = "test_tensor"; /* the handler's line names the program */
	mapped_truncated();
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	return sb_test_done();
}
