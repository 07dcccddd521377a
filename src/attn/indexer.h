/* DeepSeek Sparse Attention's selection (V3.2, DeepSeek's inference/model.py `Indexer`): every
 * query token scores the keys of the indexer cache it may see,
 *   score(t, s) = sum_h w[t, h] * relu(q[t, h] . k[s]),
 * and attends (MLA) to the index_topk best, all of them while it sees no more than that.
 * Ties go to the lower position (a strict total order, so the set is one whatever the
 * algorithm or the layout). Under DCP each rank scores its own shard with global positions,
 * keeps its local top-k, and the ranks' candidates are gathered and merged into the global
 * top-k, of which each rank keeps the keys it stores: the key in the global top-k is in its
 * own rank's local top-k, so the merge is exact; a rank with fewer keys than k sends padding.
 * The indexer cache lives in struct kv_cache beside the latent rows, at the same slots, so the
 * scheduler's blocks hold both and nothing above attn/ knows it exists. The model side (q,
 * head weights, fp8 keys) is model/indexer.c; the scoring kernels kernels/indexer_kernels.c. */
#ifndef MLA_ATTN_INDEXER_H
#define MLA_ATTN_INDEXER_H

#include <stddef.h>
#include <stdint.h>

#include "attn/attn.h"

struct attn_index_args {
	const struct attn_meta *meta;
	const struct kv_cache *kv; /* with its indexer cache (kv->index_dim > 0) */
	int layer;
	int n_heads, topk; /* index_n_heads, index_topk */
	const float *q;    /* [n_tokens, n_heads, index_dim] the dequantized fp8 index queries */
	const float *w;    /* [n_tokens, n_heads] the head weights */
	struct pool *pool;
	struct arena *scratch;
	/* DCP (meta->dcp_size > 1): gathers nbytes of every rank of the group into recv
	 * [dcp_size, nbytes], rank-major; every rank calls it once per layer with the same n */
	int (*dcp_allgather)(void *ctx, const void *send, size_t nbytes, void *recv, struct err *e);
	void *dcp_ctx;
};

/* Selects every token's keys: sel[sel_start[t] .. sel_start[t + 1]) are the local key indices
 * (this rank's, ascending) that token t attends. sel_start [n_tokens + 1] is the caller's;
 * *sel comes from the scratch arena (at most n_tokens x topk entries). */
int attn_index_select(const struct attn_index_args *a, int32_t *sel_start, int32_t **sel, struct err *e);

/* One key's score for one query: sum_h w[h] * relu(q[h] . k) over the key's codes and scales
 * (kv_cache_index_codes / _scales); the same arithmetic as the selection's at this CPU's
 * kernel level (tests compare against it). NaN if out of memory. */
float attn_index_score(const float *q, const float *w, int n_heads, int dim, int group, const uint8_t *codes,
		       const float *scales);

/* Arena bytes attn_index_select needs at most: n_tokens tokens of n_heads x dim queries, keys
 * seen per token at most max_keys, the pool's n_threads, dcp_size ranks. */
size_t attn_index_scratch_bytes(int n_tokens, int n_heads, int dim, int topk, int max_keys, int n_threads,
				int dcp_size);

#endif
