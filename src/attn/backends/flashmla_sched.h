/* The FlashMLA split-KV tile scheduler (get_mla_metadata, mla-dcp-spec §3.1): 64-token
 * key blocks of every request are spread over n_parts work partitions with a fixed cost of 5
 * blocks per piece; a request may be split across partitions. Computed once per step. */
#ifndef MLA_ATTN_BACKENDS_FLASHMLA_SCHED_H
#define MLA_ATTN_BACKENDS_FLASHMLA_SCHED_H

#include <stdint.h>

#define FLASHMLA_BLOCK_N 64
#define FLASHMLA_FIXED_OVERHEAD 5

/* Metadata row of partition p: [begin_req, begin_token, end_req, end_token, begin_split,
 * 0, 0, 0]; the partition covers keys [begin_token, ...) of begin_req through keys
 * [..., end_token) of end_req (begin_req >= n_reqs: empty). num_splits: [n_reqs + 1],
 * cumulative pieces per request, num_splits[0] = 0. Returns the final cursor request
 * (n_reqs when every block was assigned). */
int flashmla_sched_compute(const int32_t *seq_lens, int n_reqs, int n_parts, int32_t *meta /* [n_parts][8] */,
			   int32_t *num_splits /* [n_reqs+1] */);

struct attn_meta;
struct arena;
struct err;
/* FLASHMLA's per-step plan with an explicit partition count (the backend's plan callback
 * picks it from the CPU count); tests use it to force splits. Sets meta->plan. */
int flashmla_plan_with_parts(struct attn_meta *meta, int n_heads, int n_parts, struct arena *scratch, struct err *e);

#endif
