/* test_tensor — safetensors: write/read round trip of every dtype, a file
 * written by Python's safetensors package, and validation of hostile headers. */
#include <stdint.h>
#include <unistd.h>

#include "../harness.h"
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
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	return sb_test_done();
}
