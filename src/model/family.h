/* A model family: the unit that knows one kind of checkpoint (its config, its tensors, its
 * forward) behind model.h's API, which dispatches to it. Families share everything under them
 * (ops, attention kernels and backends, the KV cache, dist) and above them (engine, server),
 * and within model/ the object (model.c: memory, accessors), the load sequence (load.c),
 * the tensor tables' walkers (tensors.h), one tensor's loading (weights.h) and prepacking
 * (model_pack.c).
 *
 * Today: DeepSeek V2/V3/V3.1/V3.2 (family_deepseek.c: MLA, MoE, the V3.2 lightning indexer,
 * the MTP module; tensors_deepseek.c, forward.c, indexer.c) and DeepSeek-V4 (family_v4.c:
 * float32, compressed entries in the paged pool; tensors_v4.c, forward_v4.c over
 * model_v4/'s units).
 *
 * What a second family (DeepSeek-V4: model_v4/ holds its numeric units and its config) provides,
 * as `const struct model_family model_family_NAME` in its own files and one line in family.c's
 * list, ahead of DeepSeek's (which claims every checkpoint left and names what its config parser
 * refuses):
 *   - matches: v4_config_is_v4(dir) (config.json's model_type deepseek_v4);
 *   - configure: v4_config_load into its own state (model_own'd, reached from m->fam_state),
 *     and m->cfg's fields that the engine and load.c read: vocab_size, hidden_size,
 *     num_hidden_layers, num_nextn_predict_layers, num_attention_heads (TP divides it),
 *     max_position_embeddings, bos/eos_token_id, tie_word_embeddings, torch_dtype, fp8 and its
 *     block; then its config checks and derived state (its RoPE tables, this rank's heads);
 *   - its tensor table (tensors.h; its struct of a layer's weights, hyper-connection and
 *     compressor tensors, MXFP4 experts through an ops/wformat.h row) and load walking it;
 *   - each_weight (the GEMM weights to pack), scratch_bytes (its forward's arena), forward and
 *     mtp_forward (model.h's contracts), its KV cache (the compressed / windowed layouts of
 *     attn/kv_cache.h) and the attention backends it runs. */
#ifndef MLA_MODEL_FAMILY_H
#define MLA_MODEL_FAMILY_H

#include <stdbool.h>
#include <stddef.h>

#include "attn/attn.h"
#include "base/err.h"
#include "model/model_types.h"

struct model;
struct wmat;
struct tensor_table;

/* A weight visitor (each_weight): the weight and its tensor_flag bits (tensors.h). */
typedef int (*model_weight_fn)(struct model *m, struct wmat *w, unsigned flags, void *ctx, struct err *e);

struct model_family {
	const char *name;
	/* whether DIR holds a checkpoint of this family (its config.json, read before any parse) */
	bool (*matches)(const char *dir);
	/* DIR/config.json into m->cfg (and the family's own state), checked; the derived state
	 * the loading needs (this rank's heads, RoPE). The checkpoint is not open yet. */
	int (*configure)(struct model *m, const char *dir, struct err *e);
	/* every weight (m->st open, or dummy weights); sets m->n_layers (the KV cache's layers) */
	int (*load)(struct model *m, const char *dir, struct err *e);
	/* fn over every weight a GEMM multiplies (model_pack.c packs them), in a fixed order */
	int (*each_weight)(struct model *m, model_weight_fn fn, void *ctx, struct err *e);
	void (*log_loaded)(const struct model *m);      /* the family's lines of the load report (or NULL) */
	size_t (*scratch_bytes)(const struct model *m); /* one forward's arena, at most */
	/* model.h's forward, MTP forward, KV cache and attention backends */
	int (*forward)(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *be,
		       float *logits, struct err *e);
	int (*mtp_forward)(struct model *m, const struct batch *b, struct kv_cache *kv, const struct attn_backend *be,
			   float *logits, struct err *e);
	size_t (*kv_bytes_per_block)(const struct model *m, int block_size, enum dtype kv_dtype);
	int (*kv_cache_init)(const struct model *m, struct kv_cache *kv, int n_blocks, int block_size,
			     enum dtype kv_dtype, struct err *e);
	/* whether a prefix-cache hit may end after full block `block` (NULL: always): a family
	 * whose state at a block boundary is not all in the blocks keeps it for some blocks only */
	bool (*prefix_resumable)(const struct model *m, int32_t block);
	const struct attn_backend *(*default_backend)(const struct model *m);
	int (*check_backend)(const struct model *m, const struct attn_backend *b, struct err *e);
	const struct tensor_table *tensors; /* its tensors: the model's and each layer's (tests walk it) */
	/* What the engine must not do with this family's models, each the reason a user reads
	 * (NULL: allowed): reuse KV blocks across requests (prefix caching), run on more than one
	 * rank (-tp / -dcp > 1), shard the KV over decode-context ranks (-dcp > 1), draft tokens
	 * (--speculative-config). */
	const char *no_prefix_caching, *no_parallel, *no_dcp, *no_spec;
	bool auto_float32; /* --dtype auto means float32 (its only activation dtype yet) */
};

extern const struct model_family model_family_deepseek;
extern const struct model_family model_family_v4; /* family_v4.c: DeepSeek-V4 */

/* The family of the checkpoint in DIR: the first of family.c's list that matches. */
const struct model_family *model_family_find(const char *dir);
/* The families, in the order they are asked: n of them at *out. */
int model_families(const struct model_family *const **out);

#endif
