/* The DeepSeek family (family.h): V2, V3 (R1), V3.1 and V3.2 (DeepSeek Sparse Attention), and
 * V3's MTP module. Its config is io/config.h's, its layers' tensors tensors_deepseek.c's, its
 * step forward.c's (the V3.2 indexer: indexer.c). Here: the config's checks and derived state,
 * the load's order over the table and the MTP module's embedding and head (the model's when the
 * checkpoint's are copies), the scratch bound, and the KV cache and attention backends it needs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/backends/backends.h"
#include "attn/prefill.h"
#include "base/bigmem.h"
#include "base/log.h"
#include "model/family.h"
#include "model/forward.h"
#include "model/step_scratch.h"
#include "model/tensors_deepseek.h"
#include "ops/route.h"

/* every checkpoint no family ahead of this one took: config_load names what it cannot read */
static bool ds_matches(const char *dir) { return true; }

static int check_config(const struct model_config *c, struct err *e)
{
	if (c->qk_rope_head_dim % 2 || c->qk_rope_head_dim / 2 > ROPE_MAX_PAIRS)
		return err_set(e, "config: qk_rope_head_dim %d unsupported (even, <= %d)", c->qk_rope_head_dim,
			       2 * ROPE_MAX_PAIRS);
	if (c->n_routed_experts > ROUTE_MAX_EXPERTS)
		return err_set(e, "config: n_routed_experts %d unsupported (<= %d)", c->n_routed_experts,
			       ROUTE_MAX_EXPERTS);
	if (c->n_routed_experts > 0 && (c->num_experts_per_tok <= 0 || c->num_experts_per_tok > c->n_routed_experts ||
					c->num_experts_per_tok > ROUTE_MAX_TOPK))
		return err_set(e, "config: num_experts_per_tok %d unsupported", c->num_experts_per_tok);
	if (c->n_group > 1 && c->n_routed_experts % c->n_group)
		return err_set(e, "config: n_routed_experts %d is not a multiple of n_group %d", c->n_routed_experts,
			       c->n_group);
	return 0;
}

static int ds_configure(struct model *m, const char *dir, struct err *e)
{
	if (config_load(dir, &m->cfg, e) || check_config(&m->cfg, e))
		return -1;
	const struct model_config *c = &m->cfg;
	if (c->num_attention_heads % m->tp_size)
		return err_set(e, "model: tensor-parallel-size %d must divide num_attention_heads %d", m->tp_size,
			       c->num_attention_heads);
	m->n_heads_local = c->num_attention_heads / m->tp_size;
	m->head0 = m->tp_rank * m->n_heads_local;
	struct rope_params rp = {.dim = c->qk_rope_head_dim,
				 .theta = c->rope_theta,
				 .yarn = c->rope_yarn,
				 .factor = c->yarn_factor,
				 .original_max_position = c->yarn_original_max_position,
				 .beta_fast = c->yarn_beta_fast,
				 .beta_slow = c->yarn_beta_slow,
				 .mscale = c->yarn_mscale,
				 .mscale_all_dim = c->yarn_mscale_all_dim};
	ops_rope_init(&m->rope, &rp);
	m->scale = ops_mla_softmax_scale(c->qk_nope_head_dim + c->qk_rope_head_dim, &rp);
	if (m->opt.load_mtp && c->num_nextn_predict_layers < 1)
		return err_set(e,
			       "%s/config.json: speculative method deepseek_mtp needs the checkpoint's MTP layer, and "
			       "num_nextn_predict_layers is 0",
			       dir);
	return 0;
}

/* Layer i (the MTP module's decoder layer: i = num_hidden_layers) from the table */
static void layer_kind(struct model *m, int i)
{
	struct layer_weights *l = &m->layers[i];
	l->moe = config_layer_is_moe(&m->cfg, i);
	l->has_shared = l->moe && m->cfg.n_shared_experts > 0;
}

static int load_layer(struct model *m, int i, struct err *e)
{
	layer_kind(m, i);
	return tensors_load(m, &tensors_deepseek, i, e);
}

/* "int4 + group scales 1.2 GB, bf16 3.4 GB, ..." of per-dtype byte counts */
static void format_list(const size_t *b, char *out, size_t cap)
{
	static const struct {
		enum dtype dt;
		const char *what;
	} f[] = {{DT_I4, "int4 + group scales"},
		 {DT_I8, "int8 + scales"},
		 {DT_F8_E4M3, "fp8 e4m3 + block scales"},
		 {DT_BF16, "bf16"},
		 {DT_F32, "f32"}};
	size_t o = 0;
	out[0] = 0;
	for (size_t i = 0; i < sizeof f / sizeof f[0] && o < cap; i++)
		if (b[f[i].dt]) /* the norms' f32 are MBs */
			o += (size_t)snprintf(out + o, cap - o, "%s%s %.2f %s", o ? ", " : "", f[i].what,
					      b[f[i].dt] / (b[f[i].dt] < 10000000 ? 1e6 : 1e9),
					      b[f[i].dt] < 10000000 ? "MB" : "GB");
}

/* dummy weights are written as they are made: refused before any, when they cannot fit (an
 * overcommitted allocation would be killed on first touch, not fail); the bytes by format
 * are the load report's */
static int check_dummy_memory(struct model *m, const char *dir, char *list, size_t cap, struct err *e)
{
	size_t by[DT_COUNT] = {0}, need = 0;
	int n = m->cfg.num_hidden_layers + (m->opt.load_mtp ? 1 : 0);
	tensors_dummy_bytes(m, &tensors_deepseek, TENSORS_MODEL, by);
	for (int i = 0; i < n; i++) {
		layer_kind(m, i);
		tensors_dummy_bytes(m, &tensors_deepseek, i, by);
	}
	for (int d = 0; d < DT_COUNT; d++)
		need += by[d];
	format_list(by, list, cap);
	size_t avail = bigmem_available();
	if (need <= avail)
		return 0;
	return err_set(e,
		       "%s: dummy weights need %.1f GB (%s), %.1f GB available: use a config with fewer layers or "
		       "experts (as bench/configs/*-2L-e16)",
		       dir, need / 1e9, list, avail / 1e9);
}

/* The MTP module's embedding or head: its own tensor, unless the checkpoint has none or a
 * byte-equal copy of the model's (DeepSeek's V3/R1 carry copies: 1.9 GB each). A head is
 * split by vocabulary under TP, and fp8 under --quantize-lm-head, as the model's. */
static int mtp_shared_mat(struct model *m, const char *name, const char *model_name, bool head,
			  const struct wmat *model_w, struct wmat *w, bool *own, struct err *e)
{
	const struct model_config *c = &m->cfg;
	*own = false;
	*w = *model_w;
	if (m->opt.load_dummy)
		return 0;
	const struct st_tensor *t = st_find(m->st, name), *mt = st_find(m->st, model_name);
	if (!t || (mt && t->dtype == mt->dtype && t->nbytes == mt->nbytes && !memcmp(t->data, mt->data, t->nbytes)))
		return 0;
	*own = true;
	if (head)
		return model_mat_part(m, name, c->vocab_size, c->hidden_size, WQ_HEAD, SPLIT_ROWS, m->vocab0,
				      m->vocab_cols[m->tp_rank], w, e);
	return model_mat(m, name, c->vocab_size, c->hidden_size, WQ_EMBED, w, e);
}

/* The MTP module, model.layers.{L} (L = num_hidden_layers): its embedding and head (maybe the
 * model's), then its rows of the table and its decoder layer */
static int load_mtp(struct model *m, struct err *e)
{
	const struct model_config *c = &m->cfg;
	int L = c->num_hidden_layers, D = c->hidden_size;
	struct mtp_weights *t = &m->mtp;
	char emb[256], head[256];
	snprintf(emb, sizeof emb, "model.layers.%d.embed_tokens.weight", L);
	snprintf(head, sizeof head, "model.layers.%d.shared_head.head.weight", L);
	if (mtp_shared_mat(m, emb, "model.embed_tokens.weight", false, &m->embed, &t->embed, &t->own_embed, e) ||
	    mtp_shared_mat(m, head, c->tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", true,
			   &m->lm_head, &t->head, &t->own_head, e) ||
	    load_layer(m, L, e))
		return -1;
	m->n_layers = L + 1;
	m->hidden = model_own(m, sizeof(float) * (size_t)m->opt.max_batch_tokens * (size_t)D);
	m->mtp_hidden = model_own(m, sizeof(float) * (size_t)m->opt.max_seqs * (size_t)D);
	if (!m->hidden || !m->mtp_hidden)
		return err_set(e, "model: out of memory for the MTP hidden states");
	return 0;
}

static int ds_load(struct model *m, const char *dir, struct err *e)
{
	const struct model_config *c = &m->cfg;
	m->n_layers = c->num_hidden_layers;
	m->layers = calloc((size_t)c->num_hidden_layers + 1, sizeof *m->layers);
	if (!m->layers)
		return err_set(e, "model: out of memory");
	char by_format[256] = "";
	if (m->opt.load_dummy && check_dummy_memory(m, dir, by_format, sizeof by_format, e))
		return -1;
	int tty = isatty(2);
	if (tensors_load(m, &tensors_deepseek, TENSORS_MODEL, e))
		return -1;
	for (int i = 0; i < c->num_hidden_layers; i++) {
		if (load_layer(m, i, e))
			return -1;
		if (tty)
			fprintf(stderr, "\rloading %s: layer %d/%d, %.2f GB",
				m->opt.load_dummy ? "dummy weights" : dir, i + 1, c->num_hidden_layers,
				m->weight_bytes / 1e9);
	}
	if (m->opt.load_mtp && load_mtp(m, e))
		return -1;
	if (tty)
		fprintf(stderr, "\n");
	if (m->opt.load_dummy)
		LOG_I("model", "weights by format (dummy): %s", by_format);
	return 0;
}

/* The table's rows of the model (the lm_head), the MTP module's own head, then every layer's */
static int ds_each_weight(struct model *m, model_weight_fn fn, void *ctx, struct err *e)
{
	if (tensors_each_mat(m, &tensors_deepseek, TENSORS_MODEL, fn, ctx, e))
		return -1;
	if (m->mtp.own_head && fn(m, &m->mtp.head, 0, ctx, e))
		return -1;
	if (model_has_mtp(m) && !m->mtp.own_head)
		m->mtp.head = m->lm_head; /* the model's, packed copy included */
	for (int i = 0; i < m->n_layers; i++)
		if (tensors_each_mat(m, &tensors_deepseek, i, fn, ctx, e))
			return -1;
	return 0;
}

static void ds_log_loaded(const struct model *m)
{
	if (model_has_mtp(m))
		LOG_I("model", "MTP module: layer %d%s%s", m->cfg.num_hidden_layers,
		      m->mtp.own_embed ? ", its own embedding" : ", the model's embedding",
		      m->mtp.own_head ? ", its own head" : ", the model's lm_head");
}

/* ---- what the model needs around it: the KV cache (the latent rows of every layer, and DeepSeek
 * Sparse Attention's indexer keys beside them) and the attention backend (dense or sparse) ---- */
static int index_dim(const struct model *m) { return config_is_sparse(&m->cfg) ? m->cfg.index_head_dim : 0; }

static size_t ds_kv_bytes_per_block(const struct model *m, int block_size, enum dtype kv_dtype)
{
	size_t row = kv_cache_row_bytes(m->cfg.kv_lora_rank, m->cfg.qk_rope_head_dim, kv_dtype, index_dim(m) > 0);
	return (size_t)m->n_layers * (size_t)block_size * row +
	       kv_cache_index_bytes_per_block(m->n_layers, block_size, index_dim(m));
}

static int ds_kv_cache_init(const struct model *m, struct kv_cache *kv, int n_blocks, int block_size,
			    enum dtype kv_dtype, struct err *e)
{
	return kv_cache_init_indexed(kv, m->n_layers, n_blocks, block_size, m->cfg.kv_lora_rank,
				     m->cfg.qk_rope_head_dim, kv_dtype, index_dim(m), e);
}

static const struct attn_backend *ds_default_backend(const struct model *m)
{
	return attn_backend_default(config_is_sparse(&m->cfg));
}

static int ds_check_backend(const struct model *m, const struct attn_backend *b, struct err *e)
{
	return attn_backend_check(b, config_is_sparse(&m->cfg), e);
}

const struct model_family model_family_deepseek = {
	.name = "deepseek",
	.matches = ds_matches,
	.configure = ds_configure,
	.load = ds_load,
	.each_weight = ds_each_weight,
	.log_loaded = ds_log_loaded,
	.scratch_bytes = deepseek_step_scratch_bytes, /* step_scratch.c */
	.forward = deepseek_forward,
	.mtp_forward = deepseek_mtp_forward,
	.kv_bytes_per_block = ds_kv_bytes_per_block,
	.kv_cache_init = ds_kv_cache_init,
	.default_backend = ds_default_backend,
	.check_backend = ds_check_backend,
	.tensors = &tensors_deepseek,
};
