/* fuzz.c — libFuzzer entry point for one reader of records and cells (FZ_TARGET = fz_cell, ...).
 * Built and run by tests/fuzz/records/run.sh; not part of `make`. */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FZ_TARGET(data, size);
	return 0;
}
