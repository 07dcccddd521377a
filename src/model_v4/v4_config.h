/* DeepSeek-V4 config.json (model_type "deepseek_v4", DeepseekV4ForCausalLM) -> a validated
 * struct v4_config. The key names are the published DeepSeek-V4-Flash / -Pro ones (HF ->
 * DeepSeek's inference/model.py ModelArgs: hidden_size -> dim, sliding_window -> window_size,
 * qk_rope_head_dim -> rope_head_dim, num_experts_per_tok -> n_activated_experts, ...).
 *
 * Structural sizes are required; epsilons and thetas default to the published values.
 * io/config.c (the V2/V3/V3.2 parser) refuses model_type deepseek_v4: a loader reads
 * model_type first and sends V4 checkpoints here. */
#ifndef MLA_MODEL_V4_V4_CONFIG_H
#define MLA_MODEL_V4_V4_CONFIG_H

#include <stdbool.h>

#include "base/err.h"

#define V4_MAX_LAYERS 256 /* compress_ratios entries (main layers + MTP layers + spare) */
#define V4_MAX_HC 16      /* hc_mult */

/* The routed experts' weight format. Absent key: the initial V4-Flash upload had FP4 experts
 * and no key, V4-Flash-Base says "fp8": the loader decides from the checkpoint's dtypes (I8
 * packed e2m1 vs F8_E4M3). */
enum v4_expert_dtype { V4_EXPERT_UNSPECIFIED, V4_EXPERT_FP8, V4_EXPERT_FP4 };

struct v4_config {
	int vocab_size;
	int hidden_size; /* D */
	int num_hidden_layers;
	int num_nextn_predict_layers; /* MTP blocks after the main layers (mtp.N.*) */
	int max_position_embeddings;
	/* attention: H query heads of head_dim, ONE kv vector of head_dim (key and value) */
	int num_attention_heads; /* H */
	int head_dim;            /* 512 published; the last qk_rope_head_dim dims carry RoPE */
	int qk_rope_head_dim;    /* rd */
	int q_lora_rank;
	int o_groups, o_lora_rank; /* output: H/o_groups heads per group -> o_lora_rank each */
	int sliding_window;        /* window keys per query (the query's own token included) */
	/* per layer: 0 = window only, 4 = CSA (overlapping windows + indexer), other r = HCA.
	 * n_compress_ratios >= num_hidden_layers + num_nextn_predict_layers: the MTP layer i
	 * uses entry num_hidden_layers + i; later entries (DSpark drafts) are kept, unused */
	int n_compress_ratios;
	int compress_ratios[V4_MAX_LAYERS];
	/* RoPE: ratio-0 layers rope_theta without YaRN; compressed layers compress_rope_theta with
	 * YaRN (model.py; no mscale anywhere) */
	float rope_theta, compress_rope_theta;
	bool rope_yarn; /* rope_scaling {type yarn}; false: no scaling on compressed layers */
	float yarn_factor;
	int yarn_original_max_position;
	float yarn_beta_fast, yarn_beta_slow;
	/* indexer of the ratio-4 layers */
	int index_n_heads, index_head_dim, index_topk;
	/* hyper-connections: hc_mult residual streams, Sinkhorn-normalised mixing */
	int hc_mult, hc_sinkhorn_iters;
	float hc_eps;
	/* MoE (every layer): sqrt(softplus) scores; hash routing (tid2eid) for layers <
	 * num_hash_layers, else top-k of score + bias */
	int n_routed_experts, num_experts_per_tok, n_shared_experts, moe_intermediate_size;
	int num_hash_layers;
	float routed_scaling_factor;
	float swiglu_limit; /* 0 = no clamp */
	bool norm_topk_prob;
	float rms_norm_eps;
	bool tie_word_embeddings;
	int bos_token_id, eos_token_id; /* -1 when absent */
	/* quantization_config: fp8 e4m3 weights, ue8m0 scales per 128x128 block */
	bool fp8;
	int fp8_block_rows, fp8_block_cols;
	bool fp8_scale_ue8m0;
	enum v4_expert_dtype expert_dtype;
	char torch_dtype[16]; /* as written, "" when absent */
};

/* Reads and validates DIR/config.json; errors name the key and the value. */
int v4_config_load(const char *dir, struct v4_config *cfg, struct err *e);
/* Same from a JSON text; `what` names the source in messages. */
int v4_config_parse(const char *json_text, const char *what, struct v4_config *cfg, struct err *e);

/* Whether DIR/config.json says model_type "deepseek_v4": a loader's dispatch before
 * io/config.h's config_load (which refuses it). False when the file is unreadable. */
bool v4_config_is_v4(const char *dir);

/* The compress ratio of layer `layer` (0 .. num_hidden_layers + num_nextn_predict_layers - 1;
 * the MTP layers follow the main ones). */
static inline int v4_layer_ratio(const struct v4_config *c, int layer) { return c->compress_ratios[layer]; }
/* The layer routes by token id (tid2eid) rather than by score. */
static inline bool v4_layer_is_hash(const struct v4_config *c, int layer) { return layer < c->num_hash_layers; }

#endif
