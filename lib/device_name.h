/* device_name.h — the grammar of a device name, "cpu" or "cuda[:N][,tf32|,fp32]...": one
 * parser for the programs' option checks (lib/backend_cpu.c) and the CUDA backend
 * (lib/cuda/backend_cuda.cu). Inline, because the CUDA library is linked after the main one. */
#ifndef SB_DEVICE_NAME_H
#define SB_DEVICE_NAME_H
#include <stdlib.h>
#include <string.h>
#include "err.h"

/* *cuda 1 for a CUDA name, *index its N (0 when absent, N in [0, 255]), *tf32 1 or 0 when
 * named (the last of tf32/fp32 wins), -1 when not. SB_EUSAGE for anything else; nothing is
 * opened. */
static inline int sb_device_parse(const char *device, int *cuda, int *index, int *tf32, struct sb_err *err)
{
	*cuda = 0;
	*index = 0;
	*tf32 = -1;
	if (!device || !strcmp(device, "cpu"))
		return 0;
	if (strncmp(device, "cuda", 4) || (device[4] && device[4] != ':' && device[4] != ','))
		return SB_ERR(err, SB_EUSAGE, "unknown device '%s' (expected cpu or cuda[:N][,tf32])", device);
	*cuda = 1;
	const char *p = device + 4;
	if (*p == ':') {
		char *end;
		long v = strtol(p + 1, &end, 10);
		if (p[1] < '0' || p[1] > '9' || end == p + 1 || v < 0 || v > 255) /* digits only: no sign, no space */
			return SB_ERR(err, SB_EUSAGE, "device '%s': expected cuda[:N][,tf32] with N in [0, 255]",
			              device);
		*index = (int)v;
		p = end;
	}
	while (*p == ',') {
		const char *q = p + 1;
		size_t n = strcspn(q, ",");
		if (n == 4 && !strncmp(q, "tf32", 4))
			*tf32 = 1;
		else if (n == 4 && !strncmp(q, "fp32", 4))
			*tf32 = 0;
		else
			return SB_ERR(err, SB_EUSAGE, "device '%s': unknown option (expected tf32 or fp32)", device);
		p = q + n;
	}
	if (*p)
		return SB_ERR(err, SB_EUSAGE, "device '%s': expected cuda[:N][,tf32]", device);
	return 0;
}

#endif
