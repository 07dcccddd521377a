/* What the model needs around it, by its kind: the KV cache (the latent rows of every layer,
 * and DeepSeek Sparse Attention's indexer keys beside them) and the attention backend (dense
 * or sparse). See model.h. */
#include "attn/attn.h"
#include "model/model_internal.h"

static int index_dim(const struct model *m) { return config_is_sparse(&m->cfg) ? m->cfg.index_head_dim : 0; }

size_t model_kv_bytes_per_block(const struct model *m, int block_size, enum dtype kv_dtype)
{
	return kv_cache_bytes_per_block(m->n_layers, block_size, m->cfg.kv_lora_rank + m->cfg.qk_rope_head_dim,
					kv_dtype) +
	       kv_cache_index_bytes_per_block(m->n_layers, block_size, index_dim(m));
}

int model_kv_cache_init(const struct model *m, struct kv_cache *kv, int n_blocks, int block_size, enum dtype kv_dtype,
			struct err *e)
{
	return kv_cache_init_indexed(kv, m->n_layers, n_blocks, block_size, m->cfg.kv_lora_rank,
				     m->cfg.qk_rope_head_dim, kv_dtype, index_dim(m), e);
}

const struct attn_backend *model_default_backend(const struct model *m)
{
	return attn_backend_default(config_is_sparse(&m->cfg));
}

int model_check_backend(const struct model *m, const struct attn_backend *b, struct err *e)
{
	return attn_backend_check(b, config_is_sparse(&m->cfg), e);
}
