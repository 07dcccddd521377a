/* Decode context parallelism math (docs/mla-dcp.md §4): which rank stores which token, local
 * lengths, the global-position causal mask for q_len > 1, and the LSE correction applied
 * before the reduce-scatter. Pure functions; the collectives live in dist/. */
#ifndef MLA_ATTN_DCP_H
#define MLA_ATTN_DCP_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"

/* Validates a DCP layout: tp % dcp == 0, interleave >= 1, interleave divides block_size. */
int dcp_config_check(int tp_size, int dcp_size, int interleave, int block_size, struct err *e);

/* Tokens of a length-L sequence stored on rank r: #{p < L : (p / I) % W == r} (§4.3). */
int dcp_local_seq_len(int L, int W, int r, int I);
/* out[i] = dcp_local_seq_len(L[i], W, r, I) for i < n. */
void dcp_local_seq_lens(const int32_t *L, int n, int W, int r, int I, int32_t *out);

/* Global position of local key index j on rank r: (j / I) * W * I + r * I + j % I (§4.7). */
static inline int64_t dcp_global_pos(int64_t j, int W, int r, int I)
{
	return (j / I) * ((int64_t)W * I) + (int64_t)r * I + j % I;
}

/* Keys visible on rank r to query t (0-based) of a request with global length L and q new
 * tokens: the local indices j < n whose global position is <= L - q + t. Global positions
 * grow with j, so the visible keys are a prefix; returns its length (clipped to local_len). */
int dcp_visible_keys(int L, int q, int t, int W, int r, int I, int local_len);

/* Slot of the token at global position p of a sequence with virtual-block table bt_row
 * (virtual block = block_size * W tokens) on rank r; -1 if another rank stores it (§4.3).
 * Requires I to divide block_size. */
int64_t dcp_slot(const int32_t *bt_row, int block_size, int W, int r, int I, int64_t p);

/* LSE correction (§4.5) on rank `rank`, in place. lses: [W, B, Hg] all ranks' natural-log
 * LSEs (NaN/+inf mean an empty shard); out: [B, Hg, D] this rank's partial output, scaled by
 * exp(lse_own - lse_global) (0 for an empty shard; an all-empty row becomes 0). lse_g, if
 * not NULL, receives [B, Hg] the global LSE (-inf when every shard is empty). After this,
 * summing `out` over ranks gives attention over the union of the shards. */
void dcp_lse_correct(const float *lses, int W, int B, int Hg, int rank, float *out, int D, float *lse_g);

/* Prefill-context chunking under DCP (§4.6), in local coordinates. The global chunk is
 * rounded up to a multiple of W * I; returns the local chunk length C_loc = chunk / W. */
int dcp_context_chunk_local(int max_context_chunk, int W, int I);
/* Rows rank k contributes for context chunk c of a request whose local context on rank k is
 * local_ctx_k: min(max(0, local_ctx_k - c * C_loc), C_loc). */
int dcp_context_chunk_rows(int local_ctx_k, int c, int C_loc);

#endif
