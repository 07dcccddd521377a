/* The FlashMLA split-KV tile scheduler (get_mla_metadata, docs/mla-dcp.md §3.1): 64-token
 * key blocks of every request are spread over n_parts work partitions with a fixed cost of 5
 * blocks per piece; a request may be split across partitions. Computed once per step. */
#ifndef MLA_ATTN_BACKENDS_FLASHMLA_SCHED_H
#define MLA_ATTN_BACKENDS_FLASHMLA_SCHED_H

#include <stddef.h>
#include <stdint.h>

#define FLASHMLA_BLOCK_N 64
#define FLASHMLA_FIXED_OVERHEAD 5

/* The work of one partition: keys [begin_tok, ...) of request begin_req through keys
 * [..., end_tok) of request end_req; begin_req >= n_reqs: none. Laid out as a row of
 * FlashMLA's tile_scheduler_metadata ([num_sm_parts, 8] int32 from get_mla_metadata:
 * begin_idx, begin_seqlen, end_idx, end_seqlen, begin_n_split_idx, then unused), which the
 * asserts below check, so that the plan reads as the CUDA one does. */
struct flashmla_part {
	int32_t begin_req;   /* the first request it covers */
	int32_t begin_tok;   /* its first key in begin_req (a multiple of FLASHMLA_BLOCK_N) */
	int32_t end_req;     /* the last request it covers */
	int32_t end_tok;     /* one past its last key in end_req */
	int32_t begin_split; /* the piece of begin_req that it computes (0: the request's first) */
	int32_t unused[3];
};
_Static_assert(sizeof(struct flashmla_part) == 8 * sizeof(int32_t), "a tile_scheduler_metadata row");
_Static_assert(offsetof(struct flashmla_part, begin_req) == 0 * sizeof(int32_t) &&
		       offsetof(struct flashmla_part, begin_tok) == 1 * sizeof(int32_t) &&
		       offsetof(struct flashmla_part, end_req) == 2 * sizeof(int32_t) &&
		       offsetof(struct flashmla_part, end_tok) == 3 * sizeof(int32_t) &&
		       offsetof(struct flashmla_part, begin_split) == 4 * sizeof(int32_t),
	       "the fields at FlashMLA's indices");

/* Fills parts[n_parts] (unused fields 0) and num_splits[n_reqs + 1], the cumulative pieces
 * per request (num_splits[0] = 0). Returns the final cursor request (n_reqs when every
 * block was assigned). */
int flashmla_sched_compute(const int32_t *seq_lens, int n_reqs, int n_parts, struct flashmla_part *parts,
			   int32_t *num_splits);

struct attn_meta;
struct arena;
struct err;
/* FLASHMLA's per-step plan with an explicit partition count (the backend's plan callback
 * picks it from the CPU count); tests use it to force splits. Sets meta->plan. */
int flashmla_plan_with_parts(struct attn_meta *meta, int n_heads, int n_parts, struct arena *scratch, struct err *e);

#endif
