/* Every MLASERVE_* environment variable, read here and nowhere else: one table of names and
 * what each does, so that a reader (and docs/guide/serving.md) finds them all in one place.
 * Other programs' variables (VLLM_API_KEY, OPENAI_API_KEY, Open MPI's) are read where used. */
#ifndef MLA_BASE_ENV_H
#define MLA_BASE_ENV_H

/* The names as literals, for the places that build an environment ("NAME=1") */
#define ENV_NAME_DIST_LAUNCHED "MLASERVE_DIST_LAUNCHED"
#define ENV_NAME_MPIRUN "MLASERVE_MPIRUN"
#define ENV_NAME_MPIRUN_GRACE "MLASERVE_MPIRUN_GRACE"

enum env_var {
	ENV_API_KEY,           /* the API key when --api-key is not given */
	ENV_ATTENTION_BACKEND, /* the attention backend when --attention-backend is not given */
	ENV_CPU_LEVEL,         /* cap the kernel level: portable, avx2, avx2_vnni, avx512, ... */
	ENV_HUGEPAGES,         /* 1 / 0: huge pages for the weights on / off (default: measured) */
	ENV_MEM_AVAILABLE,     /* the memory taken as available (e.g. 8G) instead of the host's */
	ENV_PREPACK,           /* 0: no load-time packing of the weights (A/B runs) */
	ENV_DIST_LAUNCHED,     /* set by mlaserve in the ranks it starts: do not launch again */
	ENV_MPIRUN,            /* the mpirun that starts the ranks (default: mpirun on PATH) */
	ENV_MPIRUN_GRACE,      /* seconds mpirun has to end after the ranks (default 10) */
	ENV_COUNT
};

const char *env_name(enum env_var v); /* "MLASERVE_CPU_LEVEL" */
const char *env_help(enum env_var v); /* one line: what it does */
const char *env_get(enum env_var v);  /* its value as getenv gives it (NULL: unset) */

#endif
