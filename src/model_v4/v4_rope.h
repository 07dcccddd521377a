/* DeepSeek-V4 RoPE (model.py precompute_freqs_cis / apply_rotary_emb): GPT-J interleaved pairs
 * (x[2i], x[2i+1]) on the LAST rope dims of a vector. Tables per layer kind:
 *   ratio 0 (window only, MTP too): rope_theta, no YaRN;
 *   compressed layers (attention, compressor, indexer): compress_rope_theta with YaRN
 *     (factor, original_max_position_embeddings, beta_fast / slow), no mscale.
 * Computed in float32 step by step as model.py does (inv_freq, the YaRN blend, the angle
 * fp32(pos * inv_freq), cosf / sinf), so the tables equal the reference's bit for bit. */
#ifndef MLA_MODEL_V4_V4_ROPE_H
#define MLA_MODEL_V4_V4_ROPE_H

#include "base/err.h"
#include "model_v4/v4_config.h"

#define V4_ROPE_MAX_PAIRS 256

struct v4_rope {
	int dim;                           /* rotary dims rd (even) */
	float inv_freq[V4_ROPE_MAX_PAIRS]; /* [rd / 2] */
};

/* theta, and YaRN when orig > 0 (orig = original_max_position_embeddings). */
int v4_rope_init(struct v4_rope *r, int dim, double theta, int orig, double factor, double beta_fast, double beta_slow,
		 struct err *e);
/* The table of a layer whose compress ratio is `ratio` (0: rope_theta plain). */
int v4_rope_init_layer(struct v4_rope *r, const struct v4_config *c, int ratio, struct err *e);
/* cos / sin [rd / 2] at position pos */
void v4_rope_cos_sin(const struct v4_rope *r, long pos, float *cos_out, float *sin_out);
/* Rotates the last r->dim values of x [len] by pos (inverse: by -pos, undoing it). */
void v4_rope_apply(const struct v4_rope *r, float *x, int len, long pos, int inverse);

#endif
