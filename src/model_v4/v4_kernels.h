/* SIMD kernels of DeepSeek-V4's attention core and indexer scoring (v4_attn.h,
 * v4_indexer.h define what they compute; those files keep the double-precision references).
 * One body per kernel, built for AVX-512, AVX2 + FMA and portable C (GCC vector types: the
 * level decides the instructions, not the arithmetic's order), chosen by ops_level_best().
 *
 * Attention in double, as the reference: per head, s_j = scale q . kv_j (8-lane partials,
 * then the lanes; four heads a pass over the keys), softmax with the sink, o = sum_j p_j kv_j,
 * rounded to float at the end; the keys in chunks of 64 that every head reads while they are in
 * cache (an HCA layer at 1M context attends 17 MB of rows), which changes no head's arithmetic. Only
 * the dots' summation order differs from v4_attn_one (~1e-16 relative), so the outputs are its
 * floats but for rare last-bit roundings. (A float32 version moved them by ~1e-7: enough to
 * flip an fp8 rounding midpoint downstream between a cold and a prefix-cached run.)
 * Indexer: 16 keys at a time, each in a lane of its own (its score does not depend on its
 * neighbours), q_h . k summed per 32-dim block in float32 from 0, the blocks' sums added in
 * order in float32, relu, w_h * dot summed over the heads in double. The stored keys are e2m1
 * codes x a power of two per 32 and the query has been through the same fp4 round trip, so a
 * block's sum is exact: the float32 dot differs from the double one only where block sums of
 * different scales meet, and at avx2 / avx512 packed keys go through integer block dots with the
 * same floats (v4_ix_int.h). At the amx level packed keys go through tdpbf16ps tiles
 * (v4_ix_amx.h), with the same exact products. */
#ifndef MLA_MODEL_V4_V4_KERNELS_H
#define MLA_MODEL_V4_V4_KERNELS_H

#include <stddef.h>

#include "model_v4/v4_keys.h"
#include "ops/cpu.h"

#define V4K_KB 16 /* keys of an indexer tile */

/* Heads [h0, h1) of v4_attn_one (same arguments, q/o [H, hd] indexed by head), at level lv.
 * scratch: [v4k_attn_scratch(h1 - h0, hd, n_kv)] doubles. */
#define V4K_MAX_ATTN_HEADS 256 /* heads of one pass (more: several) */
static inline size_t v4k_attn_scratch(int n_heads, int hd, int n_kv)
{
	int nh = n_heads < V4K_MAX_ATTN_HEADS ? n_heads : V4K_MAX_ATTN_HEADS;
	return (size_t)nh * ((size_t)n_kv + 2 * (size_t)hd);
}
void v4k_attn_heads(enum ops_level lv, int h0, int h1, int hd, float scale, const float *q, const float *const *kv,
		    int n_kv, const float *sink, float *o, float *lse, double *scratch);


/* scores s[e - e0] of keys e0 .. e1 - 1 for one query: q [H, di], w [H] (v4_index_score's
 * terms), at level lv. di <= V4K_MAX_DI, di % 32 == 0 when packed. */
void v4k_index_scores(enum ops_level lv, int H, int di, const float *q, const float *w, const struct v4k_keys *k,
		      long e0, long e1, double *s);

#endif
