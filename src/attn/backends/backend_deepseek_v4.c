/* DEEPSEEK_V4: the declaration of DeepSeek-V4's attention (attn.h's struct attn_backend), so
 * that the threshold rule (attn/threshold.c), the block-size rule and the kind check apply to
 * V4 as to the MLA backends. The work is the family's: model/forward_v4.c runs
 * model_v4/v4_block.h's v4_attn_seq, which attn/ may not call (docs/DESIGN.md §1), so the table
 * has no work entry. What it declares is what that path does:
 * - VARLEN: a step's sequences may have any query lengths; every query token runs the same path
 *   (no decode / prefill split), attending its window rows, its visible compressed entries or
 *   its indexer selection by its own global position.
 * - threshold 512, FLASHMLA_SPARSE's: with one path the threshold only orders the batch.
 * - under DCP any interleave for multi-token queries: a rank attends the window rows whose
 *   global position it owns and the entries whose global index it owns, each query by its
 *   global position, so no local causal mask is involved (docs/mla-dcp.md §7).
 * - returns the LSE: the ranks' partials are merged by it, the sink added once after. */
#include "attn/backends/backends.h"

static bool any_interleave(int dcp_interleave)
{
	(void)dcp_interleave;
	return true;
}

const struct attn_backend attn_backend_deepseek_v4 = {
	.name = "DEEPSEEK_V4",
	.reorder_batch_threshold = 512,
	.query_len_support = QLEN_VARLEN,
	.supports_dcp_multi_token = any_interleave,
	.returns_lse = true,
	.block_size_multiple = 1,
	.v4 = true,
};
