/* config.json → a validated model configuration (docs/reference.md A.1). */
#ifndef MLA_IO_CONFIG_H
#define MLA_IO_CONFIG_H

#include <stdbool.h>

#include "base/err.h"

enum topk_method { TOPK_GREEDY, TOPK_GROUP_LIMITED_GREEDY, TOPK_NOAUX_TC };
enum scoring_func { SCORING_SOFTMAX, SCORING_SIGMOID };

struct model_config {
	char model_type[32]; /* "deepseek_v2" | "deepseek_v3" | "deepseek_v32" | "kimi_k2" (V3) | "glm_moe_dsa" (V3.2) */
	/* Kimi K2.5 / K2.6 (model_type kimi_k25, KimiK25ForConditionalGeneration): the fields are
	 * its text_config's, the tensors those under "language_model." (the vision tower and the
	 * projector are left unread); "" for the others */
	char weight_prefix[32];
	int vocab_size;
	int hidden_size;           /* D */
	int intermediate_size;     /* dense MLP width */
	int moe_intermediate_size; /* per routed expert */
	int num_hidden_layers;
	int num_nextn_predict_layers; /* MTP modules after the main layers (model.layers.{L..}); 0 if absent */
	int num_attention_heads;      /* H */
	int q_lora_rank;              /* 0 = plain q_proj */
	int kv_lora_rank;             /* Lkv */
	int qk_nope_head_dim;         /* dn */
	int qk_rope_head_dim;         /* dr */
	int v_head_dim;               /* dv */
	/* MoE; n_routed_experts == 0 means every layer is dense */
	int n_routed_experts;
	int num_experts_per_tok;
	int n_shared_experts;
	int first_k_dense_replace;
	int moe_layer_freq;
	int n_group, topk_group;
	enum topk_method topk_method;
	enum scoring_func scoring_func;
	bool norm_topk_prob;
	float routed_scaling_factor;
	float rms_norm_eps;
	float rope_theta;
	int max_position_embeddings;
	/* rope_scaling (yarn) or rope_parameters; rope_yarn false = plain RoPE */
	bool rope_yarn;
	float yarn_factor;
	int yarn_original_max_position;
	float yarn_beta_fast, yarn_beta_slow;
	float yarn_mscale, yarn_mscale_all_dim;
	bool tie_word_embeddings;
	int bos_token_id, eos_token_id; /* -1 when absent */
	/* quantization_config */
	bool fp8;                           /* quant_method fp8, fmt e4m3 */
	int fp8_block_rows, fp8_block_cols; /* weight_block_size, 128x128 */
	bool fp8_scale_ue8m0;               /* scale_fmt "ue8m0" */
	/* compressed-tensors pack-quantized W4A16 (Kimi K2-Thinking's, llm-compressor's): the Linear
	 * modules outside its ignore list (config_ct_ignore) are <module>.weight_packed (I32
	 * [out, in / 8]), .weight_scale ([out, in / 32]) and .weight_shape (I64 [2]): signed int4
	 * in groups of 32 columns, symmetric, no activation order */
	bool ct_int4;
	char torch_dtype[16]; /* "bfloat16", "float32", ... as written */
	/* DeepSeek Sparse Attention (deepseek_v32): the lightning indexer of every layer scores
	 * the past tokens with index_n_heads heads of index_head_dim and MLA attends to the
	 * index_topk best; index_topk 0 = dense MLA (V2/V3) */
	int index_n_heads, index_head_dim, index_topk;
	bool indexer_rope_interleave; /* vLLM's key; false (DeepSeek's): NeoX halves; GLM-5: true */
};

/* The model uses DeepSeek Sparse Attention (V3.2). */
static inline bool config_is_sparse(const struct model_config *c) { return c->index_topk > 0; }

/* Reads and validates DIR/config.json. Unsupported values: error naming the key and value. */
int config_load(const char *dir, struct model_config *cfg, struct err *e);
/* Same from a JSON text (tests). `what` names the source in messages. */
int config_parse(const char *json_text, const char *what, struct model_config *cfg, struct err *e);
/* DIR/config.json's quantization_config.ignore (compressed-tensors: module names, "re:REGEX"
 * matched from the name's start), as *n malloc'd strings in *out (free each and the array);
 * none: *out NULL, *n 0. */
int config_ct_ignore(const char *dir, char ***out, int *n, struct err *e);
/* Layer i is MoE iff n_routed_experts > 0, i >= first_k_dense_replace, i % moe_layer_freq == 0. */
bool config_layer_is_moe(const struct model_config *cfg, int layer);

#endif
