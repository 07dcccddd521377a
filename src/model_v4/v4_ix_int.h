/* The indexer's scores (v4k_index_scores, v4_kernels.h) on integer block dots, for packed fp4
 * keys at the avx2 / avx512 levels. A query through v4_index_query's fp4 round trip is, per
 * 32-dim block, integers |q_i| <= 12 times a power of two, and a key 2 x e2m1 codes times one, so
 * a block's dot is an int16 sum (vpmaddubsw, the key's codes offset by 12 to be unsigned) times
 * the two powers of two: exactly the float32 kernel's block sum, the blocks then added in order
 * in float32 as it does, so the scores are its doubles bit for bit. A key is decoded once for
 * all the heads. */
#ifndef MLA_MODEL_V4_V4_IX_INT_H
#define MLA_MODEL_V4_V4_IX_INT_H

#include "model_v4/v4_keys.h"

#define V4_IX_INT_QMAX 16384 /* query values (H x di) it takes */
#define V4_IX_INT_KB 16      /* keys of a tile at avx2 (twice that at avx512) */

/* Scores s[e - e0] of keys e0 .. e1 - 1 (packed) for one query, as v4k_index_scores; avx512
 * picks that level's build. Returns how many keys it scored from e0: all, or up to the first
 * tile (V4_IX_INT_KB or twice that keys from e0) holding a key whose block scales with the query's could leave
 * float32's normal range (products not exact there: that tile is the float kernel's); -1
 * (nothing written) where it does not apply: di not a multiple of 32 or over V4K_MAX_DI, more
 * than V4_IX_INT_QMAX query values, or a query block that is not integers |q_i| <= 12 times a
 * power of two. */
long v4k_ix_int_scores(int avx512, int H, int di, const float *q, const float *w, const struct v4k_keys *k, long e0,
		       long e1, double *s);

#endif
