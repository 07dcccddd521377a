#include "base/env.h"

#include <stdlib.h>

static const struct {
	const char *name, *help;
} vars[ENV_COUNT] = {
	[ENV_API_KEY] = {"MLASERVE_API_KEY", "the API key clients must send when --api-key is not given"},
	[ENV_ATTENTION_BACKEND] = {"MLASERVE_ATTENTION_BACKEND", "the attention backend when --attention-backend is "
								 "not given"},
	[ENV_CPU_LEVEL] = {"MLASERVE_CPU_LEVEL",
			   "caps the kernel level: portable, avx2, avx2_vnni, avx512, avx512_bf16, amx"},
	[ENV_HUGEPAGES] = {"MLASERVE_HUGEPAGES", "1 or 0: huge pages for large buffers on or off (default: measured)"},
	[ENV_MEM_AVAILABLE] = {"MLASERVE_MEM_AVAILABLE", "the memory taken as available (e.g. 8G), not the host's"},
	[ENV_PREPACK] = {"MLASERVE_PREPACK", "0: weights are not packed at load for the tile kernels"},
	[ENV_DIST_LAUNCHED] = {ENV_NAME_DIST_LAUNCHED, "set in the ranks mlaserve starts (they do not start more)"},
	[ENV_MPIRUN] = {ENV_NAME_MPIRUN, "the mpirun that starts the ranks (default: mpirun on PATH)"},
	[ENV_MPIRUN_GRACE] = {ENV_NAME_MPIRUN_GRACE, "seconds mpirun has to end after the ranks did (default 10)"},
};

const char *env_name(enum env_var v) { return (unsigned)v < ENV_COUNT ? vars[v].name : "?"; }

const char *env_help(enum env_var v) { return (unsigned)v < ENV_COUNT ? vars[v].help : ""; }

const char *env_get(enum env_var v) { return (unsigned)v < ENV_COUNT ? getenv(vars[v].name) : NULL; }
