/* config.json → struct model_config. Structural sizes are required; routing knobs default
 * to the HF class defaults of the model_type (DeepseekV2Config / DeepseekV3Config), except
 * n_group / topk_group which default to 1 (no grouping). */
#include "io/config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json_util.h"

struct src {
	const json_t *o; /* the object being read (root or a nested one) */
	const char *what;
	struct err *e;
};

/* An int key in [lo, INT_MAX]; `required` rejects absent/null, else `def` is used. */
static int get_int(struct src s, const char *key, bool required, long long def, long long lo, int *out)
{
	long long v;
	int r = json_util_int(s.o, s.what, key, def, &v, s.e);
	if (r < 0)
		return -1;
	if (r == 1 && required)
		return err_set(s.e, "%s: key \"%s\" is missing or null", s.what, key);
	if (r == 0 && (v < lo || v > INT_MAX)) /* defaults need no check */
		return json_util_bad(s.e, s.what, key, json_util_get(s.o, key), "invalid",
				     "expected an integer >= %lld", lo);
	*out = (int)v;
	return 0;
}

/* A finite number > lo (open) or >= lo (closed). */
static int get_num(struct src s, const char *key, bool required, double def, double lo, bool open, float *out)
{
	double v;
	int r = json_util_num(s.o, s.what, key, def, &v, s.e);
	if (r < 0)
		return -1;
	if (r == 1 && required)
		return err_set(s.e, "%s: key \"%s\" is missing or null", s.what, key);
	if (r == 0 && (!isfinite(v) || v < lo || (open && v == lo) || fabs(v) > 3e38))
		return json_util_bad(s.e, s.what, key, json_util_get(s.o, key), "invalid", "expected a number %s %g",
				     open ? ">" : ">=", lo);
	*out = (float)v;
	return 0;
}

/* A string among names[0..n); `expected` lists them for the message. */
static int get_enum(struct src s, const char *key, const char *def, const char *const *names, int n,
		    const char *expected, int *out)
{
	const char *v;
	int r = json_util_str(s.o, s.what, key, def, &v, s.e);
	if (r < 0)
		return -1;
	if (!v)
		return err_set(s.e, "%s: key \"%s\" is missing or null", s.what, key);
	for (int i = 0; i < n; i++)
		if (strcmp(v, names[i]) == 0) {
			*out = i;
			return 0;
		}
	return json_util_bad(s.e, s.what, key, json_util_get(s.o, key), "unsupported", "expected %s", expected);
}

/* bos/eos: an id, a list of ids (the first is used), or absent/null => -1. */
static int get_token_id(struct src s, const char *key, int *out)
{
	const json_t *v = json_util_get(s.o, key);
	if (json_is_array(v) && json_array_size(v) > 0)
		v = json_array_get(v, 0);
	*out = -1;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
		return json_util_bad(s.e, s.what, key, json_util_get(s.o, key), "invalid",
				     "expected a token id or a list of them");
	*out = (int)json_integer_value(v);
	return 0;
}

static int check_architectures(struct src s)
{
	const json_t *a = json_object_get(s.o, "architectures");
	if (!a || json_is_null(a))
		return 0;
	if (!json_is_array(a) || json_array_size(a) == 0)
		return json_util_bad(s.e, s.what, "architectures", a, "invalid",
				     "expected a list of architecture names");
	size_t i;
	const json_t *v;
	json_array_foreach(a, i, v)
	{
		const char *n = json_string_value(v);
		if (!n || (strcmp(n, "DeepseekV2ForCausalLM") && strcmp(n, "DeepseekV3ForCausalLM") &&
			   strcmp(n, "DeepseekV32ForCausalLM") && strcmp(n, "GlmMoeDsaForCausalLM")))
			return json_util_bad(s.e, s.what, "architectures", v, "unsupported",
					     "expected DeepseekV2ForCausalLM, DeepseekV3ForCausalLM, "
					     "DeepseekV32ForCausalLM or GlmMoeDsaForCausalLM");
	}
	return 0;
}

static int parse_dims(struct src s, bool v3, struct model_config *c)
{
	if (get_int(s, "vocab_size", true, 0, 1, &c->vocab_size) ||
	    get_int(s, "hidden_size", true, 0, 1, &c->hidden_size) ||
	    get_int(s, "intermediate_size", true, 0, 1, &c->intermediate_size) ||
	    get_int(s, "num_hidden_layers", true, 0, 1, &c->num_hidden_layers) ||
	    get_int(s, "num_nextn_predict_layers", false, 0, 0, &c->num_nextn_predict_layers) ||
	    get_int(s, "num_attention_heads", true, 0, 1, &c->num_attention_heads) ||
	    get_int(s, "q_lora_rank", false, 0, 0, &c->q_lora_rank) ||
	    get_int(s, "kv_lora_rank", true, 0, 1, &c->kv_lora_rank) ||
	    get_int(s, "qk_nope_head_dim", true, 0, 1, &c->qk_nope_head_dim) ||
	    get_int(s, "qk_rope_head_dim", true, 0, 2, &c->qk_rope_head_dim) ||
	    get_int(s, "v_head_dim", true, 0, 1, &c->v_head_dim) ||
	    get_int(s, "max_position_embeddings", false, v3 ? 4096 : 2048, 1, &c->max_position_embeddings))
		return -1;
	if (c->qk_rope_head_dim % 2)
		return json_util_bad(s.e, s.what, "qk_rope_head_dim", json_util_get(s.o, "qk_rope_head_dim"),
				     "invalid", "expected an even number: rope rotates pairs");
	return 0;
}

static int parse_moe(struct src s, bool v3, struct model_config *c)
{
	static const char *const topk[] = {"greedy", "group_limited_greedy", "noaux_tc"};
	static const char *const scoring[] = {"softmax", "sigmoid"};
	int tm, sf;
	if (get_int(s, "n_routed_experts", false, 0, 0, &c->n_routed_experts))
		return -1;
	bool moe = c->n_routed_experts > 0;
	if (get_int(s, "moe_intermediate_size", moe, 0, 1, &c->moe_intermediate_size) ||
	    get_int(s, "num_experts_per_tok", moe, 1, 1, &c->num_experts_per_tok) ||
	    get_int(s, "n_shared_experts", false, 0, 0, &c->n_shared_experts) ||
	    get_int(s, "first_k_dense_replace", false, 0, 0, &c->first_k_dense_replace) ||
	    get_int(s, "moe_layer_freq", false, 1, 1, &c->moe_layer_freq) ||
	    get_int(s, "n_group", false, 1, 1, &c->n_group) || get_int(s, "topk_group", false, 1, 1, &c->topk_group) ||
	    get_enum(s, "topk_method", v3 ? "noaux_tc" : "greedy", topk, 3, "greedy, group_limited_greedy or noaux_tc",
		     &tm) ||
	    get_enum(s, "scoring_func", v3 ? "sigmoid" : "softmax", scoring, 2, "softmax or sigmoid", &sf) ||
	    json_util_bool(s.o, s.what, "norm_topk_prob", v3, &c->norm_topk_prob, s.e) < 0 ||
	    get_num(s, "routed_scaling_factor", false, v3 ? 2.5 : 1.0, 0, true, &c->routed_scaling_factor))
		return -1;
	c->topk_method = (enum topk_method)tm;
	c->scoring_func = (enum scoring_func)sf;
	if (!moe) {
		c->n_shared_experts = 0; /* dense model: MoE keys are unused */
		return 0;
	}
	int e_n = c->n_routed_experts, g = c->n_group;
	if (c->num_experts_per_tok > e_n)
		return json_util_bad(s.e, s.what, "num_experts_per_tok", json_util_get(s.o, "num_experts_per_tok"),
				     "invalid", "expected <= n_routed_experts %d", e_n);
	if (e_n % g)
		return json_util_bad(s.e, s.what, "n_group", json_util_get(s.o, "n_group"), "invalid",
				     "expected a divisor of n_routed_experts %d", e_n);
	if (c->topk_group > g)
		return json_util_bad(s.e, s.what, "topk_group", json_util_get(s.o, "topk_group"), "invalid",
				     "expected <= n_group %d", g);
	if (c->topk_method != TOPK_GREEDY && c->num_experts_per_tok > c->topk_group * (e_n / g))
		return json_util_bad(s.e, s.what, "num_experts_per_tok", json_util_get(s.o, "num_experts_per_tok"),
				     "invalid", "expected <= topk_group x experts per group = %d",
				     c->topk_group * (e_n / g));
	/* noaux_tc scores a group by the sum of its two best experts */
	if (c->topk_method == TOPK_NOAUX_TC && e_n / g < 2)
		return json_util_bad(s.e, s.what, "n_group", json_util_get(s.o, "n_group"), "invalid",
				     "noaux_tc needs >= 2 experts per group, n_routed_experts is %d", e_n);
	return 0;
}

/* "OBJ.LEAF" into buf (64 bytes): the key as messages show it (json_util reads LEAF). */
static const char *sub(char *buf, const char *obj, const char *leaf)
{
	snprintf(buf, 64, "%s.%s", obj, leaf);
	return buf;
}

/* rope_parameters (newer transformers, rope_type and rope_theta inside) or rope_scaling. */
static int parse_rope(struct src root, struct model_config *c)
{
	const char *rkey = "rope_parameters";
	const json_t *r = json_object_get(root.o, rkey);
	if (!r || json_is_null(r)) {
		rkey = "rope_scaling";
		r = json_object_get(root.o, rkey);
	}
	c->rope_yarn = false;
	if (!r || json_is_null(r))
		return 0;
	if (!json_is_object(r))
		return json_util_bad(root.e, root.what, rkey, r, "invalid", "expected an object or null");
	struct src s = {r, root.what, root.e};
	bool is_params = strcmp(rkey, "rope_parameters") == 0;
	const json_t *rt = json_object_get(r, "rope_type");
	char tkey[64], k[64];
	sub(tkey, rkey, rt && !json_is_null(rt) ? "rope_type" : "type");
	const char *type;
	if (json_util_str(r, root.what, tkey, is_params ? "default" : NULL, &type, root.e) < 0)
		return -1;
	if (!type)
		return err_set(root.e, "%s: key \"%s\" is missing or null", root.what, tkey);
	if (is_params && get_num(s, sub(k, rkey, "rope_theta"), false, c->rope_theta, 0, true, &c->rope_theta))
		return -1;
	if (strcmp(type, "default") == 0)
		return 0;
	if (strcmp(type, "yarn"))
		return json_util_bad(root.e, root.what, tkey, json_util_get(r, tkey), "unsupported",
				     "expected yarn or default");
	c->rope_yarn = true;
	if (get_num(s, sub(k, rkey, "factor"), true, 0, 1, false, &c->yarn_factor) ||
	    get_int(s, sub(k, rkey, "original_max_position_embeddings"), false, c->max_position_embeddings, 1,
		    &c->yarn_original_max_position) ||
	    get_num(s, sub(k, rkey, "beta_fast"), false, 32, 0, true, &c->yarn_beta_fast) ||
	    get_num(s, sub(k, rkey, "beta_slow"), false, 1, 0, true, &c->yarn_beta_slow) ||
	    get_num(s, sub(k, rkey, "mscale"), false, 1, 0, false, &c->yarn_mscale) ||
	    get_num(s, sub(k, rkey, "mscale_all_dim"), false, 0, 0, false, &c->yarn_mscale_all_dim))
		return -1;
	if (c->yarn_beta_fast < c->yarn_beta_slow)
		return json_util_bad(root.e, root.what, sub(k, rkey, "beta_fast"), json_object_get(r, "beta_fast"),
				     "invalid", "expected >= beta_slow %g", c->yarn_beta_slow);
	return 0;
}

/* config_groups.NAME.weights: what quant_int4_from_packed reads, and nothing else */
static int parse_ct_weights(struct src s, const char *path, const json_t *w)
{
	char k[256];
	const json_t *v;
#define CT_BAD(leaf, expected)                                                                                \
	json_util_bad(s.e, s.what, (snprintf(k, sizeof k, "%s.%s", path, leaf), k), json_object_get(w, leaf), \
		      "unsupported", "%s", expected)
	if (!json_is_object(w))
		return json_util_bad(s.e, s.what, (snprintf(k, sizeof k, "%s", path), k), w, "unsupported",
				     "expected an object of int4 weights");
	v = json_object_get(w, "num_bits");
	if (!json_is_integer(v) || json_integer_value(v) != 4)
		return CT_BAD("num_bits", "expected 4: int4 weights are the compressed-tensors scheme read here");
	v = json_object_get(w, "type");
	if (v && !json_is_null(v) && (!json_is_string(v) || strcmp(json_string_value(v), "int")))
		return CT_BAD("type", "expected int");
	v = json_object_get(w, "symmetric");
	if (v && !json_is_null(v) && !json_is_true(v))
		return CT_BAD("symmetric", "expected true: zero points (asymmetric int4) are not supported");
	v = json_object_get(w, "strategy");
	if (!json_is_string(v) || strcmp(json_string_value(v), "group"))
		return CT_BAD("strategy", "expected group");
	v = json_object_get(w, "group_size");
	if (!json_is_integer(v) || json_integer_value(v) != 32)
		return CT_BAD("group_size", "expected 32: the int4 kernels' groups");
	v = json_object_get(w, "actorder");
	if (v && !json_is_null(v) && !json_is_false(v))
		return CT_BAD("actorder", "expected null: activation ordering (g_idx) is not supported");
	v = json_object_get(w, "dynamic");
	if (v && !json_is_null(v) && !json_is_false(v))
		return CT_BAD("dynamic", "expected false: the checkpoint's scales are read as they are");
	v = json_object_get(w, "block_structure");
	if (v && !json_is_null(v))
		return CT_BAD("block_structure", "expected null (group quantization)");
#undef CT_BAD
	return 0;
}

/* compressed-tensors: pack-quantized int4 weights on the Linear modules (one config group) */
static int parse_ct(struct src s, const json_t *q, struct model_config *c)
{
	const char *fmt;
	if (json_util_str(q, s.what, "quantization_config.format", NULL, &fmt, s.e) < 0)
		return -1;
	if (!fmt || strcmp(fmt, "pack-quantized"))
		return json_util_bad(s.e, s.what, "quantization_config.format", json_object_get(q, "format"),
				     "unsupported", "expected pack-quantized (int4 in int32 words)");
	const json_t *groups = json_object_get(q, "config_groups");
	if (!json_is_object(groups) || json_object_size(groups) != 1)
		return json_util_bad(s.e, s.what, "quantization_config.config_groups", groups, "unsupported",
				     "expected one group (int4 weights on the Linear modules)");
	const char *gname = json_object_iter_key(json_object_iter((json_t *)groups));
	const json_t *g = json_object_get(groups, gname), *t = json_object_get(g, "targets");
	char path[128];
	snprintf(path, sizeof path, "quantization_config.config_groups.%s", gname);
	char k[160];
	if (!json_is_array(t) || json_array_size(t) != 1 || !json_is_string(json_array_get(t, 0)) ||
	    strcmp(json_string_value(json_array_get(t, 0)), "Linear"))
		return json_util_bad(s.e, s.what, (snprintf(k, sizeof k, "%s.targets", path), k), t, "unsupported",
				     "expected [\"Linear\"] (the modules not in ignore)");
	static const char *const acts[] = {"input_activations", "output_activations"};
	for (int i = 0; i < 2; i++) {
		const json_t *a = json_object_get(g, acts[i]);
		if (a && !json_is_null(a))
			return json_util_bad(s.e, s.what, (snprintf(k, sizeof k, "%s.%s", path, acts[i]), k), a,
					     "unsupported", "expected null: W4A16, activations not quantized");
	}
	snprintf(k, sizeof k, "%s.weights", path);
	if (parse_ct_weights(s, k, json_object_get(g, "weights")))
		return -1;
	const json_t *ig = json_object_get(q, "ignore");
	size_t i;
	const json_t *v;
	if (ig && !json_is_null(ig) && !json_is_array(ig))
		return json_util_bad(s.e, s.what, "quantization_config.ignore", ig, "invalid",
				     "expected a list of module names");
	json_array_foreach(ig, i, v)
	{
		if (!json_is_string(v))
			return json_util_bad(s.e, s.what, "quantization_config.ignore", v, "invalid",
					     "expected a module name or \"re:REGEX\"");
	}
	c->ct_int4 = true;
	return 0;
}

static int parse_quant(struct src root, struct model_config *c)
{
	const json_t *q = json_object_get(root.o, "quantization_config");
	if (!q || json_is_null(q))
		return 0;
	if (!json_is_object(q))
		return json_util_bad(root.e, root.what, "quantization_config", q, "invalid",
				     "expected an object or null");
	struct src s = {q, root.what, root.e};
	const char *method, *fmt, *act, *scale_fmt;
	if (json_util_str(q, s.what, "quantization_config.quant_method", NULL, &method, s.e) < 0 ||
	    json_util_str(q, s.what, "quantization_config.fmt", "e4m3", &fmt, s.e) < 0 ||
	    json_util_str(q, s.what, "quantization_config.activation_scheme", NULL, &act, s.e) < 0 ||
	    json_util_str(q, s.what, "quantization_config.scale_fmt", NULL, &scale_fmt, s.e) < 0)
		return -1;
	if (method && !strcmp(method, "compressed-tensors"))
		return parse_ct(s, q, c);
	if (!method || !strstr(method, "fp8"))
		return json_util_bad(s.e, s.what, "quantization_config.quant_method",
				     json_object_get(q, "quant_method"), "unsupported",
				     "expected fp8 or compressed-tensors");
	if (strcmp(fmt, "e4m3"))
		return json_util_bad(s.e, s.what, "quantization_config.fmt", json_object_get(q, "fmt"), "unsupported",
				     "expected e4m3");
	if (!act || strcmp(act, "dynamic"))
		return json_util_bad(s.e, s.what, "quantization_config.activation_scheme",
				     json_object_get(q, "activation_scheme"), "unsupported", "expected dynamic");
	if (scale_fmt && strcmp(scale_fmt, "ue8m0"))
		return json_util_bad(s.e, s.what, "quantization_config.scale_fmt", json_object_get(q, "scale_fmt"),
				     "unsupported", "expected ue8m0 or null");
	/* Only DeepSeek's 128x128 blocks: per-tensor fp8 would need other kernels. */
	const json_t *b = json_object_get(q, "weight_block_size");
	if (!json_is_array(b) || json_array_size(b) != 2 || json_integer_value(json_array_get(b, 0)) != 128 ||
	    json_integer_value(json_array_get(b, 1)) != 128)
		return json_util_bad(s.e, s.what, "quantization_config.weight_block_size", b, "unsupported",
				     "expected [128, 128]");
	c->fp8 = true;
	c->fp8_block_rows = c->fp8_block_cols = 128;
	c->fp8_scale_ue8m0 = scale_fmt != NULL;
	return 0;
}

/* DeepSeek Sparse Attention's indexer (deepseek_v32, glm_moe_dsa: vLLM reads the same keys).
 * indexer_rope_interleave defaults to false for deepseek_v32 (DeepSeek's NeoX halves), true for
 * glm_moe_dsa (GLM-5 writes true; vLLM's GLM path assumes it). */
static int parse_indexer(struct src s, bool glm, struct model_config *c)
{
	if (get_int(s, "index_n_heads", true, 0, 1, &c->index_n_heads) ||
	    get_int(s, "index_head_dim", true, 0, 2, &c->index_head_dim) ||
	    get_int(s, "index_topk", true, 0, 1, &c->index_topk) ||
	    json_util_bool(s.o, s.what, "indexer_rope_interleave", glm, &c->indexer_rope_interleave, s.e) < 0)
		return -1;
	if (c->index_n_heads > 1024)
		return json_util_bad(s.e, s.what, "index_n_heads", json_util_get(s.o, "index_n_heads"), "invalid",
				     "expected at most 1024");
	if (c->index_topk > (1 << 20))
		return json_util_bad(s.e, s.what, "index_topk", json_util_get(s.o, "index_topk"), "invalid",
				     "expected at most 1048576");
	int d = c->index_head_dim;
	if ((d & (d - 1)) || d > 1024)
		return json_util_bad(s.e, s.what, "index_head_dim", json_util_get(s.o, "index_head_dim"), "invalid",
				     "expected a power of two <= 1024 (the indexer's Hadamard rotation)");
	if (d < c->qk_rope_head_dim)
		return json_util_bad(s.e, s.what, "index_head_dim", json_util_get(s.o, "index_head_dim"), "invalid",
				     "expected >= qk_rope_head_dim %d (rope covers its first dims)",
				     c->qk_rope_head_dim);
	if (c->q_lora_rank <= 0)
		return err_set(s.e, "%s: deepseek_v32 needs q_lora_rank > 0 (the indexer reads the q latent)", s.what);
	return 0;
}

/* Keys of the MLA relatives (and V3.2's) that would change the forward, each refused unless it
 * says what the forward does: attention_bias (no biases in MLA's projections here), GLM's
 * rope_interleave (MLA's RoPE is interleaved pairs), and GLM-5.x's indexer sharing (layers that
 * reuse another layer's index set: indexer_types other than "full", index_topk_freq > 1,
 * index_skip_topk_offset, index_topk_pattern), and mlp_layer_types that disagrees with
 * first_k_dense_replace / moe_layer_freq. */
static bool null_or_absent(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return !v || json_is_null(v);
}

static int check_unhonoured(struct src s, const struct model_config *c)
{
	bool b;
	long long v;
	if (json_util_bool(s.o, s.what, "attention_bias", false, &b, s.e) < 0)
		return -1;
	if (b)
		return json_util_bad(s.e, s.what, "attention_bias", json_util_get(s.o, "attention_bias"),
				     "unsupported", "expected false: MLA's projections have no biases here");
	if (json_util_bool(s.o, s.what, "rope_interleave", true, &b, s.e) < 0)
		return -1;
	if (!b)
		return json_util_bad(s.e, s.what, "rope_interleave", json_util_get(s.o, "rope_interleave"),
				     "unsupported", "expected true: MLA's RoPE rotates interleaved pairs");
	const json_t *it = json_object_get(s.o, "indexer_types");
	if (it && !json_is_null(it)) {
		size_t i;
		const json_t *x;
		if (!json_is_array(it))
			return json_util_bad(s.e, s.what, "indexer_types", it, "invalid", "expected a list");
		json_array_foreach(it, i, x)
		{
			if (!json_is_string(x) || strcmp(json_string_value(x), "full"))
				return json_util_bad(s.e, s.what, "indexer_types", x, "unsupported",
						     "expected \"full\" for every layer: shared index sets are "
						     "not supported");
		}
	}
	if (json_util_int(s.o, s.what, "index_topk_freq", 1, &v, s.e) < 0)
		return -1;
	if (v != 1)
		return json_util_bad(s.e, s.what, "index_topk_freq", json_util_get(s.o, "index_topk_freq"),
				     "unsupported", "expected 1: shared index sets are not supported");
	if (!null_or_absent(s.o, "index_skip_topk_offset"))
		return json_util_bad(s.e, s.what, "index_skip_topk_offset",
				     json_util_get(s.o, "index_skip_topk_offset"), "unsupported",
				     "expected null: shared index sets are not supported");
	if (!null_or_absent(s.o, "index_topk_pattern"))
		return json_util_bad(s.e, s.what, "index_topk_pattern", json_util_get(s.o, "index_topk_pattern"),
				     "unsupported", "expected null: shared index sets are not supported");
	const json_t *ml = json_object_get(s.o, "mlp_layer_types");
	if (ml && !json_is_null(ml)) {
		if (!json_is_array(ml))
			return json_util_bad(s.e, s.what, "mlp_layer_types", ml, "invalid", "expected a list");
		size_t i;
		const json_t *x;
		json_array_foreach(ml, i, x)
		{
			const char *want = config_layer_is_moe(c, (int)i) ? "sparse" : "dense";
			if (!json_is_string(x) || strcmp(json_string_value(x), want))
				return json_util_bad(s.e, s.what, "mlp_layer_types", x, "unsupported",
						     "expected \"%s\" for layer %zu (first_k_dense_replace %d, "
						     "moe_layer_freq %d)",
						     want, i, c->first_k_dense_replace, c->moe_layer_freq);
		}
	}
	return 0;
}

static int parse_root(const json_t *root, const char *what, struct model_config *c, struct err *e)
{
	/* kimi_k2 (Kimi K2 / K2-Thinking, DeepseekV3ForCausalLM) is V3 with its own dims;
	 * glm_moe_dsa (GLM-5, GlmMoeDsaForCausalLM) is V3.2 with its own dims */
	static const char *const types[] = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm_moe_dsa"};
	static const char *const acts[] = {"silu"};
	static const char *const dtypes[] = {"bfloat16", "float16", "float32"};
	struct src s = {root, what, e};
	int mt, act, dt;
	memset(c, 0, sizeof *c);
	if (!json_is_object(root)) {
		char buf[64];
		return err_set(e, "%s: expected a JSON object, got %s", what, json_util_show(root, buf, sizeof buf));
	}
	if (get_enum(s, "model_type", NULL, types, 5, "deepseek_v2, deepseek_v3, deepseek_v32, kimi_k2 or glm_moe_dsa",
		     &mt) ||
	    check_architectures(s) || get_enum(s, "hidden_act", "silu", acts, 1, "silu", &act))
		return -1;
	bool v3 = mt >= 1;                /* V3.2 is V3 plus the indexer */
	bool sparse = mt == 2 || mt == 4; /* deepseek_v32, glm_moe_dsa */
	snprintf(c->model_type, sizeof c->model_type, "%s", types[mt]);
	const char *dkey = json_object_get(root, "torch_dtype") ? "torch_dtype" : "dtype";
	if (parse_dims(s, v3, c) || parse_moe(s, v3, c) ||
	    get_num(s, "rms_norm_eps", false, 1e-6, 0, true, &c->rms_norm_eps) ||
	    get_num(s, "rope_theta", false, 10000, 0, true, &c->rope_theta) || parse_rope(s, c) || parse_quant(s, c) ||
	    json_util_bool(root, what, "tie_word_embeddings", false, &c->tie_word_embeddings, e) < 0 ||
	    get_token_id(s, "bos_token_id", &c->bos_token_id) || get_token_id(s, "eos_token_id", &c->eos_token_id) ||
	    (sparse && parse_indexer(s, mt == 4, c)) || check_unhonoured(s, c))
		return -1;
	const json_t *dv = json_object_get(root, dkey);
	if (dv && !json_is_null(dv)) {
		if (get_enum(s, dkey, NULL, dtypes, 3, "bfloat16, float16 or float32", &dt))
			return -1;
		snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", dtypes[dt]);
	}
	return 0;
}

static bool is_kimi_k25(const json_t *root)
{
	const char *mt = json_string_value(json_object_get(root, "model_type"));
	return mt && !strcmp(mt, "kimi_k25");
}

/* Kimi K2.5 / K2.6: the text model's config is text_config (a kimi_k2 / DeepSeek-V3 one); its
 * quantization_config is there, or else at the top (as vLLM's KimiK25Config hoists it) */
static int parse_kimi_k25(const json_t *root, const char *what, struct model_config *c, struct err *e)
{
	const json_t *a = json_object_get(root, "architectures"), *tc = json_object_get(root, "text_config");
	const char *arch = json_string_value(json_array_get(a, 0));
	if (a && !json_is_null(a) &&
	    (json_array_size(a) != 1 || !arch || strcmp(arch, "KimiK25ForConditionalGeneration")))
		return json_util_bad(e, what, "architectures", a, "unsupported",
				     "expected [\"KimiK25ForConditionalGeneration\"] for model_type kimi_k25");
	if (!json_is_object(tc))
		return json_util_bad(e, what, "text_config", tc, "invalid",
				     "expected the text model's config (an object) for model_type kimi_k25");
	json_t *text = json_copy((json_t *)tc);
	const json_t *q = json_object_get(root, "quantization_config");
	if (!text || (q && !json_object_get(text, "quantization_config") &&
		      json_object_set(text, "quantization_config", (json_t *)q) < 0)) {
		json_decref(text);
		return err_set(e, "%s: out of memory", what);
	}
	char sub_what[4200];
	snprintf(sub_what, sizeof sub_what, "%s: text_config", what);
	int rc = is_kimi_k25(text) ? json_util_bad(e, sub_what, "model_type", json_object_get(text, "model_type"),
						   "unsupported", "expected the text model's type")
				   : parse_root(text, sub_what, c, e);
	json_decref(text);
	if (rc)
		return -1;
	snprintf(c->weight_prefix, sizeof c->weight_prefix, "language_model.");
	return 0;
}

static int parse_any(const json_t *root, const char *what, struct model_config *c, struct err *e)
{
	return is_kimi_k25(root) ? parse_kimi_k25(root, what, c, e) : parse_root(root, what, c, e);
}

int config_parse(const char *json_text, const char *what, struct model_config *cfg, struct err *e)
{
	json_t *root;
	if (json_util_parse(json_text, strlen(json_text), what, &root, e))
		return -1;
	int rc = parse_any(root, what, cfg, e);
	json_decref(root);
	return rc;
}

int config_load(const char *dir, struct model_config *cfg, struct err *e)
{
	char path[4096];
	json_t *root;
	snprintf(path, sizeof path, "%s/config.json", dir);
	if (json_util_load(path, &root, e))
		return -1;
	int rc = parse_any(root, path, cfg, e);
	json_decref(root);
	return rc;
}

int config_ct_ignore(const char *dir, char ***out, int *n, struct err *e)
{
	char path[4096];
	json_t *root;
	*out = NULL;
	*n = 0;
	snprintf(path, sizeof path, "%s/config.json", dir);
	if (json_util_load(path, &root, e))
		return -1;
	const json_t *q = json_object_get(root, "quantization_config");
	if (is_kimi_k25(root) && json_object_get(json_object_get(root, "text_config"), "quantization_config"))
		q = json_object_get(json_object_get(root, "text_config"), "quantization_config");
	const json_t *ig = json_object_get(q, "ignore");
	size_t k = json_is_array(ig) ? json_array_size(ig) : 0;
	char **list = k ? calloc(k, sizeof *list) : NULL;
	int rc = k && !list ? err_set(e, "%s: out of memory", path) : 0;
	for (size_t i = 0; i < k && !rc; i++) {
		const char *v = json_string_value(json_array_get(ig, i));
		if (!v || !(list[i] = strdup(v)))
			rc = err_set(e, "%s: quantization_config.ignore[%zu]: %s", path, i,
				     v ? "out of memory" : "expected a string");
	}
	json_decref(root);
	if (rc) {
		for (size_t i = 0; list && i < k; i++)
			free(list[i]);
		free(list);
		return -1;
	}
	*out = list;
	*n = (int)k;
	return 0;
}

bool config_layer_is_moe(const struct model_config *cfg, int layer)
{
	return cfg->n_routed_experts > 0 && layer >= cfg->first_k_dense_replace && layer % cfg->moe_layer_freq == 0;
}
