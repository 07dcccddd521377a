/* DeepSeek-V4's indexer (model.py Indexer) of the ratio-4 (CSA) layers: it picks, for each
 * query token t, the compressed entries the attention reads.
 *   q = indexer.wq_b(qr) [n_heads, di] (the caller's GEMM on the q latent), per head: RoPE on
 *       the last rd dims (compressed-layer table, position t), Hadamard, fp4 round trip
 *   w = indexer.weights_proj(y) [n_heads] (the caller's GEMM) * di^-0.5 * n_heads^-0.5
 *   keys: the indexer compressor's entries (model_v4/compressor.h, V4_COMP_INDEX) [n, di]
 *   score[e] = sum_h w_h relu(q_h . k_e) for the visible entries e < (t + 1) / 4
 *   selection: the top min(index_topk, visible) scores, ties to the lower entry, ascending.
 * (V3.2's indexer in attn/ differs: LayerNorm keys, fp8, NeoX RoPE, one key per token.)
 * Under DCP a rank scores its own entries and the ranks' local top-k are merged as
 * attn/indexer.h describes for V3.2: the global top-k is inside the union of the local ones. */
#ifndef MLA_MODEL_V4_V4_INDEXER_H
#define MLA_MODEL_V4_V4_INDEXER_H

#include <stddef.h>
#include <stdint.h>

#include "model_v4/v4_rope.h"

/* q [n_heads, di] in place: RoPE at pos, Hadamard, fp4 (when fp4_sim, the --kv-quant default). */
void v4_index_query(const struct v4_rope *r, int n_heads, int di, long pos, int fp4_sim, float *q);
/* w [n_heads] in place: * di^-0.5 * n_heads^-0.5. */
void v4_index_weights(int n_heads, int di, float *w);
/* One token's score of entry k [di]. Sums in double. */
double v4_index_score(int n_heads, int di, const float *q, const float *w, const float *k);
/* Key e [di] of the visible ones: a pointer to it, or buf [di] filled with it (a packed key
 * unpacked, v4_pack.h). */
typedef const float *(*v4_index_key_fn)(void *ctx, long e, float *buf);
/* Scores keys 0 .. visible - 1 and writes the selected entry indices (ascending) to
 * sel [<= topk]; returns how many (min(topk, visible)). The double-precision reference. */
int v4_index_select(int n_heads, int di, const float *q, const float *w, v4_index_key_fn key, void *ctx, int visible,
		    int topk, int32_t *sel);

struct pool;
/* v4_index_select with float32 dots (v4_kernels.h) at ops_level_best(), the keys split over
 * the pool (NULL: this thread): keys[e] packed (v4_pack_ix, when packed) or [di] floats,
 * scores [visible] the caller's scratch (left holding each key's score). */
int v4_index_select_fast(struct pool *pool, int n_heads, int di, const float *q, const float *w,
			 const float *const *keys, int packed, int visible, int topk, double *scores, int32_t *sel);

/* Under DCP (v4_block.h): a rank's candidates for one query token, its local top-k as
 * (score, global entry), e = -1 padding. */
struct v4_cand {
	double s;
	int32_t e, pad;
};
/* The global top-k of W ranks' candidates cand [W, stride] (each rank's first k valid or
 * padded): the best k under the order of v4_index_select (higher score, then the lower
 * entry), which the union of the ranks' local top-k contains; sel ascending, returns how
 * many. */
int v4_index_merge(int W, const struct v4_cand *cand, size_t stride, int k, int32_t *sel);

#endif
