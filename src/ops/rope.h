/* Rotary embedding on interleaved pairs (x[2i], x[2i+1]) with DeepSeek YaRN frequencies
 * (docs/reference.md A.5, A.6). */
#ifndef MLA_OPS_ROPE_H
#define MLA_OPS_ROPE_H

#include <stdbool.h>

#define ROPE_MAX_PAIRS 256

struct rope {
	int dim;                        /* rotary dim dr (even) */
	float inv_freq[ROPE_MAX_PAIRS]; /* f'_i, i in [0, dim/2) */
	float mscale;                   /* cos/sin multiplier (1 for released configs) */
};

struct rope_params {
	int dim;
	float theta;
	bool yarn; /* false: plain RoPE, no scaling */
	float factor;
	int original_max_position;
	float beta_fast, beta_slow, mscale, mscale_all_dim;
};

/* 0 ok, -1 if dim is odd or larger than 2*ROPE_MAX_PAIRS. */
int ops_rope_init(struct rope *r, const struct rope_params *p);
/* yarn_get_mscale(s, m) = 1 if s <= 1 else 0.1·m·ln(s) + 1 */
float ops_yarn_mscale(float scale, float m);
/* The MLA softmax scale: (qk_head_dim)^-0.5 · mscale(factor, mscale_all_dim)² under YaRN
 * (mscale_all_dim 0/absent = no factor), plain (qk_head_dim)^-0.5 otherwise. */
float ops_mla_softmax_scale(int qk_head_dim, const struct rope_params *p);
/* Rotates n vectors of r->dim values at x, x + stride, ... for position pos. */
void ops_rope_apply(const struct rope *r, float *x, int n, int stride, int pos);
/* The same rotation on NeoX halves (x[i], x[i + dim/2]): the V3.2 indexer's layout. */
void ops_rope_apply_neox(const struct rope *r, float *x, int n, int stride, int pos);

#endif
