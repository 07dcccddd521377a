/* DeepSeek-V4's KV compressor (model.py Compressor), for the main attention's compressed
 * entries (head_dim) and the indexer's compressed keys (index_head_dim). Entry i of a layer
 * with ratio r pools the r tokens of window i = positions [i*r, (i+1)*r):
 *   per token t: kv_t = wkv x_t, score_t = wgate x_t + ape[t % r]   ([width], fp32 GEMMs, the
 *   caller's); per feature f, entry[f] = sum_t softmax_t(score_t[f]) kv_t[f] over the window.
 *   r == 4 (CSA) overlaps: width = 2d; entry i pools the FIRST d channels of window i-1's 4
 *   tokens together with the LAST d channels of window i's 4 tokens (window -1: nothing).
 *   Other r (HCA): width = d, window i alone.
 * then RMSNorm(norm), RoPE at position i*r (compressed-layer table), and the kind's round trip
 * (main: fp8 of [:-rd] in blocks of 64; indexer: Hadamard, then fp4 in blocks of 32).
 *
 * The softmax is accumulated online (running max, sum and weighted sum per feature), so the
 * state of the unfinished window is O(width) whatever r, lives in caller memory (the paged
 * pool) and is fed token by token in order: any split of a sequence into feeds gives the same
 * entries bit for bit. */
#ifndef MLA_MODEL_V4_COMPRESSOR_H
#define MLA_MODEL_V4_COMPRESSOR_H

#include <stddef.h>

#include "model_v4/v4_rope.h"

enum v4_comp_kind {
	V4_COMP_KV,    /* the main attention's entries: fp8 round trip of [:-rd], blocks of 64 */
	V4_COMP_INDEX, /* the indexer's keys: Hadamard, fp4 round trip in blocks of 32 */
	V4_COMP_PLAIN, /* no round trip (--kv-quant off) */
};

struct v4_comp {
	int ratio; /* r >= 2; 4 = overlapping windows */
	int d;     /* entry dims: head_dim or index_head_dim */
	float eps; /* rms_norm_eps */
	enum v4_comp_kind kind;
	const float *ape;           /* [r, width] (layers.N.attn[.indexer].compressor.ape, F32) */
	const float *norm;          /* [d] */
	const struct v4_rope *rope; /* the layer's compressed table; rotates the last rope->dim */
};

/* Channels of a token's kv / score rows: 2d for ratio 4, d otherwise. */
static inline int v4_comp_width(const struct v4_comp *c) { return c->ratio == 4 ? 2 * c->d : c->d; }
/* Floats of one sequence's state: 3 x width for the open window (+ 3d for ratio 4: the
 * previous window's first half). */
size_t v4_comp_state_floats(const struct v4_comp *c);
/* A fresh state (no token fed): every running max -inf, sums 0. */
void v4_comp_state_init(const struct v4_comp *c, float *state);

/* Feeds the tokens at positions pos0 .. pos0+n-1 (the state holds positions 0 .. pos0-1):
 * kv, score [n, width] (score without ape). Writes the entries those tokens complete, in order,
 * to entries [count, d] and returns count; the first is entry pos0 / r. */
int v4_comp_feed(const struct v4_comp *c, float *state, long pos0, int n, const float *kv, const float *score,
		 float *entries);
/* An entry as the paged pool stores it (model_v4/v4_pack.h: fp8 / fp4 codes for the quantised
 * kinds, exact; the float row for V4_COMP_PLAIN): its floats, and x [d] to and from it. */
size_t v4_comp_entry_floats(const struct v4_comp *c);
void v4_comp_store(const struct v4_comp *c, const float *x, float *dst);
void v4_comp_load(const struct v4_comp *c, const float *src, float *x);
/* Entries that a feed of n tokens at pos0 completes (to size `entries`). */
static inline int v4_comp_count(int ratio, long pos0, int n) { return (int)((pos0 + n) / ratio - pos0 / ratio); }

#endif
