/* DeepSeek-V4's attention core for one query token (model.py Attention after the projections;
 * kernel.py sparse_attn): H query heads against ONE shared kv vector per key (head_dim dims,
 * used as key AND value; the last rd dims carry RoPE), over
 *   the sliding window: the query's own token and the window - 1 before it, and
 *   the compressed entries it may see (ratio 4: the indexer's top-k of them; other ratios:
 *   all entries e < (t + 1) / ratio),
 * with a learned per-head sink logit in the softmax denominator:
 *   s_j = scale q_h . kv_j  (scale = head_dim^-0.5, no YaRN mscale)
 *   o_h = sum_j exp(s_j) kv_j / (sum_j exp(s_j) + exp(sink_h))
 * and then the inverse RoPE of each head's rope dims (at the query's position).
 *
 * LSE and DCP. The result comes with lse_h = log(sum_j exp(s_j) [+ exp(sink_h)]), natural log,
 * o normalised by the same denominator: attn/merge.h's convention. The sink is one more term
 * of the denominator and must be counted ONCE across ranks: under DCP every rank runs its own
 * keys with sink = NULL, the partials are merged (attn_merge_states: exact for disjoint key
 * sets), and v4_attn_add_sink adds the sink to the merged result; equivalently exactly one
 * rank passes the sink. A rank without keys gives o = 0, lse = -inf, which merges as nothing.
 * The inverse RoPE is linear: it may run before or after the merge. */
#ifndef MLA_MODEL_V4_V4_ATTN_H
#define MLA_MODEL_V4_V4_ATTN_H

#include <stddef.h>

#include "model_v4/v4_rope.h"

/* The keys query position t sees: window positions [*win_lo, t] and compressed entries
 * [0, *n_comp) of a layer with `ratio` (0: none). */
static inline void v4_attn_visible(int ratio, int window, long t, long *win_lo, long *n_comp)
{
	*win_lo = t - window + 1 > 0 ? t - window + 1 : 0;
	*n_comp = ratio ? (t + 1) / ratio : 0;
}

/* x [n, d] rows in place: x * rsqrt(mean(x^2) + eps), times w [d] when not NULL (model.py's
 * RMSNorm; the query's per-head norm has no weight). Sums in double. */
void v4_rmsnorm_rows(float *x, int n, int d, const float *w, float eps);
/* The query after wq_b: per head a weightless RMSNorm (eps) and RoPE at pos; q [H, head_dim]
 * in place. */
void v4_attn_prep_q(const struct v4_rope *r, int n_heads, int head_dim, float eps, long pos, float *q);
/* The kv after kv_norm: RoPE at pos, then (kv_quant) the fp8 round trip of the non-RoPE dims in
 * blocks of 64, as the window cache and model.py hold it; kv [head_dim] in place. */
void v4_attn_prep_kv(const struct v4_rope *r, int head_dim, long pos, int kv_quant, float *kv);

/* q [H, head_dim] (per-head RMS-normalised and roped), kv[0 .. n_kv) each [head_dim] (window
 * rows and selected entries, any order), sink [H] or NULL -> o [H, head_dim], lse [H].
 * Scores and sums in double: the reference v4_attn_fast is tested against. */
void v4_attn_one(int n_heads, int head_dim, float scale, const float *q, const float *const *kv, int n_kv,
		 const float *sink, float *o, float *lse);
struct pool;
/* v4_attn_one in SIMD double (v4_kernels.h) at ops_level_best(), the heads split over the pool
 * (NULL: this thread). scratch: [v4_attn_fast_scratch(n_heads, head_dim, n_kv)] doubles, the
 * caller's (the step allocates nothing). */
void v4_attn_fast(struct pool *pool, int n_heads, int head_dim, float scale, const float *q, const float *const *kv,
		  int n_kv, const float *sink, float *o, float *lse, double *scratch);
size_t v4_attn_fast_scratch(int n_heads, int head_dim, int n_kv);
/* Adds the sink to results without it (after a DCP merge): o [H, dv], lse [H] in place. */
void v4_attn_add_sink(int n_heads, int dv, const float *sink, float *o, float *lse);
/* The inverse RoPE of every head's last r->dim dims: o [H, head_dim] at position pos. */
void v4_attn_unrope(const struct v4_rope *r, int n_heads, int head_dim, float *o, long pos);

#endif
