/* The indexer's scores (v4k_index_scores, v4_kernels.h) on AMX-BF16 tiles, for packed fp4 keys.
 * Exact products as the float32 kernels: a query that has been through v4_index_query's fp4
 * round trip and a key's e2m1 codes x its e8m0 scale are bf16 values, so tdpbf16ps multiplies
 * them exactly and sums in fp32, the blocks in order (a block's pairs rounded into the running
 * sum: with block scales far apart not the float32 kernels' floats to the bit, test_v4_kernels).
 * (Subnormal values, below 2^-126, count as 0 there: AMX flushes them.) */
#ifndef MLA_MODEL_V4_V4_IX_AMX_H
#define MLA_MODEL_V4_V4_IX_AMX_H

#include "model_v4/v4_keys.h"

/* v4k_index_scores at the amx level for packed keys: 0, or -1 (nothing written) where it does
 * not apply: di not a multiple of 32, more than V4_IX_AMX_QMAX query values (padded to 16
 * heads), or a query value that is not a bf16 one. */
#define V4_IX_AMX_QMAX 16384
int v4k_ix_amx_scores(int H, int di, const float *q, const float *w, const struct v4k_keys *k, long e0, long e1,
		      double *s);

#endif
