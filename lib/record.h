/* record.h — the records every stream carries.
 *
 * Every output stream starts with a run.meta record:
 *   {"kind":"run.meta","v":1,"program":..,"version":..,"argv":[..],
 *    "inputs":[{"path":..,"sha256":..,"size_bytes":..}],"device":..,"threads":..,
 *    "start_time":"RFC 3339 UTC","start_unix_s":..,"host":..}
 * and every record has "kind" and "v".
 */
#ifndef SB_RECORD_H
#define SB_RECORD_H

#include <stdint.h>

#include "err.h"
#include "json.h"

struct sb_input {
	const char *path;
	char sha256[65];
	uint64_t size_bytes;
};

struct sb_run_meta {
	const char *device;  /* "cpu", "cuda:0 NVIDIA H200", ... */
	int threads;
	const struct sb_input *inputs;
	int n_inputs;
	/* OpenBLAS's kernel set and whether it is a pre-AVX2 fallback on an AVX2 CPU
	 * (lib/backend_cpu.h), written as "blas" and "blas_generic" when blas is set: for
	 * programs whose products (and so speed and float results) go through OpenBLAS */
	const char *blas;
	int blas_generic;
};

/* Write the run.meta record (program, version, argv from cli.h) as one line. */
int sb_record_run_meta(struct sb_jw *w, const struct sb_run_meta *m, struct sb_err *err);
/* Hash a file into an sb_input. */
int sb_input_hash(struct sb_input *in, const char *path, struct sb_err *err);

/* Read a record's kind and version; SB_EDATA when missing or of the wrong type. */
int sb_record_kind(const struct sb_json *rec, const char **kind, int64_t *v, struct sb_err *err);

#endif
