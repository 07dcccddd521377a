/* Batch reordering and the decode/prefill split (docs/mla-dcp.md §1.4, §1.5): decodes first,
 * then extends (continuing prefills), then fresh prefills, moved with the minimal-swap
 * cycle-following permutation vLLM uses, so that the exact orders match. */
#ifndef MLA_ENGINE_REORDER_H
#define MLA_ENGINE_REORDER_H

#include <stdbool.h>
#include <stdint.h>

enum reorder_class { REORDER_DECODE = 0, REORDER_EXTEND = 1, REORDER_PREFILL = 2 };

/* decode: n_sched <= threshold; extend: else n_computed > 0; prefill: else. */
enum reorder_class reorder_classify(int n_sched, int n_computed, int threshold);

/* Reorders n requests (per request: tokens scheduled this step, tokens already computed)
 * by calling swap(ctx, i, j) for each swap of positions i and j, in vLLM's order; the
 * caller swaps all its per-request state there. Returns true if anything moved. */
bool reorder_batch_swaps(int n, const int32_t *n_sched, const int32_t *n_computed, int threshold,
			 void (*swap)(void *ctx, int i, int j), void *ctx);

/* The same as a permutation: perm[k] = original index of the request that ends at
 * position k (n entries). Returns the "modified" flag. */
bool reorder_batch_to_split_decodes_and_prefills(int n, const int32_t *n_sched, const int32_t *n_computed,
						 int threshold, int32_t *perm);

struct batch_split {
	int n_decodes, n_prefills, n_decode_tokens, n_prefill_tokens;
};

/* Split of a reordered batch by query lengths (query_start[n + 1]): decodes are the longest
 * prefix of requests with q <= threshold (and, with require_uniform, q == q[0]); zero-length
 * (padding) requests count as prefills. Exactly the rules of §1.5. */
struct batch_split split_decodes_and_prefills(const int32_t *query_start, int n, int threshold, bool require_uniform);

#endif
