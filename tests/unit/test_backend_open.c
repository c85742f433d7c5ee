/* test_backend_open — sb_backend_open's device strings: "cpu" opens the CPU backend;
 * every documented CUDA form ("cuda", "cuda:N", "cuda,tf32", "cuda:N,tf32") is handed to
 * the CUDA backend (which, on a machine without a GPU or in a build without CUDA, refuses
 * with its own message, never "unknown device"); anything else is a usage error naming the
 * string. ("cuda,tf32" was once refused here before the CUDA parser could see it.) */
#include <string.h>

#include "../harness.h"
#include "backend.h"

int main(void)
{
	struct sb_err err = {0};
	struct sb_backend *be = NULL;
	int rc = sb_backend_open("cpu", 1, &be, &err);
	SB_CHECK(rc == 0 && be, "cpu: rc %d (%s)", rc, err.msg);
	sb_backend_close(be);

	const char *cuda[] = {"cuda", "cuda:0", "cuda,tf32", "cuda:0,tf32", "cuda:1,fp32"};
	for (size_t i = 0; i < sizeof cuda / sizeof *cuda; i++) {
		be = NULL;
		memset(&err, 0, sizeof err);
		rc = sb_backend_open(cuda[i], 1, &be, &err);
		if (rc == 0) { /* a machine with a GPU: the string was understood */
			sb_backend_close(be);
			SB_CHECK(1, "%s opened", cuda[i]);
			continue;
		}
		SB_CHECK(!strstr(err.msg, "unknown device"), "'%s' is a documented CUDA form, but: %s", cuda[i],
		         err.msg);
	}

	const char *bad[] = {"gpu", "cudax", "cuda;0", "", "CPU", "cpu:0"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		be = NULL;
		memset(&err, 0, sizeof err);
		rc = sb_backend_open(bad[i], 1, &be, &err);
		SB_CHECK(rc == SB_EUSAGE && !be && strstr(err.msg, "unknown device"),
		         "'%s': want SB_EUSAGE 'unknown device', got rc %d: %s", bad[i], rc, err.msg);
		if (be)
			sb_backend_close(be);
	}
	return sb_test_done();
}
