/* Per-thread scratch buffers of the kernels, allocated on a thread's first use and freed when
 * the thread exits. Static _Thread_local arrays of these sizes (hundreds of KB) would be
 * allocated and zeroed in every thread of the process, HTTP and waiter threads included,
 * and would make pthread_create fail for threads with small stacks. A test runs every GEMM
 * path in a thread with a 256 KB stack. */
#ifndef MLA_OPS_SCRATCH_H
#define MLA_OPS_SCRATCH_H

#include <stddef.h>

enum ops_scratch_id {
	OPS_SCRATCH_AVX2_PACK,  /* gemm_rows.c: packed AVX2 panel */
	OPS_SCRATCH_X_BF16,     /* gemm_avx512.c: x converted to bf16 */
	OPS_SCRATCH_PACK512_W,  /* gemm_pack512.c: packed weights */
	OPS_SCRATCH_PACK512_X,  /* gemm_pack512.c: x tile */
	OPS_SCRATCH_PACK512_SC, /* gemm_pack512.c: fp8 segment scales */
	OPS_SCRATCH_ACT,        /* gemm.c: x as the weight formats' kernels read it (ops/wformat.h) */
	OPS_SCRATCH_AMX_C,      /* gemm_amx.c: C tiles between k chunks */
	OPS_SCRATCH_N
};

/* The calling thread's buffer `id` of at least `bytes` bytes, 64-byte aligned; NULL when out
 * of memory (the kernels then take a path without it). Contents are not preserved when it
 * grows. */
void *ops_scratch(enum ops_scratch_id id, size_t bytes);

#endif
