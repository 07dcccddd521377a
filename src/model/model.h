/* A model: a checkpoint's weights and its forward pass over a flat batch. Its family
 * (model/family.h: DeepSeek V2/V3/V3.1/V3.2 today) loads and runs it behind this API. The
 * model never sees requests: the runner hands it tokens, positions and attention metadata for
 * one step. */
#ifndef MLA_MODEL_MODEL_H
#define MLA_MODEL_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "attn/attn.h"
#include "base/err.h"
#include "io/config.h"
#include "model/model_types.h"

struct model;

/* What the caller learns of DIR's checkpoint before loading it, from the family that would
 * load it (family.h): the config fields the engine reads (vocab_size,
 * max_position_embeddings, bos/eos_token_id, torch_dtype, num_attention_heads,
 * index_topk for sparse attention), and what the engine must not do with it, each a reason
 * to show (NULL: allowed). */
struct model_probe {
	const char *family; /* its name: "deepseek", "deepseek_v4" */
	struct model_config cfg;
	const char *no_prefix_caching, *no_parallel, *no_dcp, *no_spec;
	bool auto_float32; /* --dtype auto resolves to float32 */
	enum attn_kind attn_kind; /* the attention backends it can use (its default's kind) */
};
/* Reads and checks DIR/config.json as a rank's load would (no weights are read), for a model
 * cut over tp_size ranks (1: one rank): a cut the family cannot make is refused here, before
 * any rank starts. */
int model_probe_config(const char *dir, int tp_size, struct model_probe *p, struct err *e);

int model_load(const char *dir, const struct model_options *opt, struct model **out, struct err *e);
void model_free(struct model *m);
const struct model_config *model_config(const struct model *m);
/* Bytes of weights resident (for the memory report and the roofline). */
size_t model_weight_bytes(const struct model *m);
enum dtype model_act_dtype(const struct model *m); /* resolved activation dtype (DT_F32 or DT_BF16) */
/* Bytes of weights the last model_forward read, each matrix (or used view) counted once:
 * the numerator of the decode roofline (routed experts count only when some token chose
 * them). */
size_t model_step_weight_bytes(const struct model *m);
/* Seconds the last forward spent in DeepSeek Sparse Attention's indexer (V3.2; 0 otherwise):
 * its projections, the key cache write and the top-k selection (benchmarks report its share). */
double model_step_index_seconds(const struct model *m);
/* Layers of the latent KV cache this model writes: the main ones, plus the MTP layer when
 * it was loaded (model_options.load_mtp). */
int model_kv_layers(const struct model *m);
bool model_has_mtp(const struct model *m);
/* The KV cache this model needs: the latent cache of its model_kv_layers, and for DeepSeek
 * Sparse Attention (V3.2) the indexer's key cache beside it; its bytes per block of
 * block_size tokens (the budget's divisor), and its allocation. */
size_t model_kv_bytes_per_block(const struct model *m, int block_size, enum dtype kv_dtype);
int model_kv_cache_init(const struct model *m, struct kv_cache *kv, int n_blocks, int block_size, enum dtype kv_dtype,
			struct err *e);
/* Whether a prefix-cache hit may end after full block `block` (family.h's prefix_resumable). */
bool model_prefix_resumable(const struct model *m, int32_t block);
/* The attention backend this model runs by default (sparse for V3.2, else the first dense
 * one), and whether `b` can run it (e filled naming the backends that can). */
const struct attn_backend *model_default_backend(const struct model *m);
int model_check_backend(const struct model *m, const struct attn_backend *b, struct err *e);

/* Writes the step's latent rows into `kv`, runs every layer, and fills
 * logits[n_logits, vocab_size] (fp32). Under tensor parallelism the logits are gathered to
 * TP rank 0; `logits` may be NULL on the other ranks. */
int model_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *backend,
		  float *logits, struct err *e);

/* DeepSeek MTP (V3 tech report §2.2; vLLM's deepseek_mtp): for each token t at position p,
 * h = eh_proj [enorm(embed(tokens[t])) | hnorm(hidden of row hidden_rows[t])] (the embedding
 * is zero at position 0), then the MTP decoder layer over its own latent cache layer, and
 * logits[n_logits, vocab] = shared_head(norm(h)) of the requested rows: the distribution of
 * the token after tokens[t]. The hidden states are the final-normed rows of the last
 * model_forward on this rank, so every rank runs this right after the same model_forward;
 * with b->hidden_from_mtp they are the layer's own output rows h (before the head's norm)
 * of the last model_mtp_forward's logits rows, which each call keeps (when there are at most
 * max_seqs of them). */
int model_mtp_forward(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *backend,
		      float *logits, struct err *e);

#endif
