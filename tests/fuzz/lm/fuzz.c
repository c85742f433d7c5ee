/* fuzz.c — libFuzzer entry point for one LM-file parser (FZ_TARGET = fz_tok, ...).
 * Built and run by tests/fuzz/lm/run.sh; not part of `make`. */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FZ_TARGET(data, size);
	return 0;
}
