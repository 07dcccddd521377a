/* config.json -> struct v4_config: table-driven reads of the scalar keys, then the lists and
 * objects, then the cross-key checks. */
#include "model_v4/v4_config.h"

#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "io/json_util.h"

#define REQ true
#define OPT false

/* An integer key: [lo, hi]; absent: an error when required, else def. */
struct int_key {
	const char *key;
	size_t off;
	bool required;
	int def, lo, hi;
};

/* A number key: finite, > lo (open) or >= lo, <= hi. */
struct num_key {
	const char *key;
	size_t off;
	bool required;
	double def, lo, hi;
	bool open;
};

#define I(k, req, d, lo, hi)                                      \
	{                                                         \
#k, offsetof(struct v4_config, k), req, d, lo, hi \
	}
static const struct int_key int_keys[] = {
	I(vocab_size, REQ, 0, 1, INT_MAX),
	I(hidden_size, REQ, 0, 1, 1 << 20),
	I(num_hidden_layers, REQ, 0, 1, V4_MAX_LAYERS - 1),
	I(num_nextn_predict_layers, OPT, 0, 0, 16),
	I(max_position_embeddings, REQ, 0, 1, INT_MAX),
	I(num_attention_heads, REQ, 0, 1, 4096),
	I(head_dim, REQ, 0, 2, 8192),
	I(qk_rope_head_dim, REQ, 0, 2, 512),
	I(q_lora_rank, REQ, 0, 1, 1 << 20),
	I(o_groups, REQ, 0, 1, 4096),
	I(o_lora_rank, REQ, 0, 1, 1 << 20),
	I(sliding_window, REQ, 0, 1, 1 << 24),
	I(index_n_heads, REQ, 0, 1, 1024),
	I(index_head_dim, REQ, 0, 2, 1024),
	I(index_topk, REQ, 0, 1, 1 << 20),
	I(hc_mult, REQ, 0, 1, V4_MAX_HC),
	I(hc_sinkhorn_iters, REQ, 0, 1, 1000),
	I(n_routed_experts, REQ, 0, 1, 1 << 16),
	I(num_experts_per_tok, REQ, 0, 1, 1 << 16),
	I(n_shared_experts, OPT, 0, 0, 16),
	I(moe_intermediate_size, REQ, 0, 1, 1 << 20),
	I(num_hash_layers, OPT, 0, 0, V4_MAX_LAYERS),
};
#undef I

#define N(k, req, d, lo, hi, open)                                      \
	{                                                               \
#k, offsetof(struct v4_config, k), req, d, lo, hi, open \
	}
static const struct num_key num_keys[] = {
	N(rope_theta, OPT, 10000, 0, 1e30, true), N(compress_rope_theta, OPT, 160000, 0, 1e30, true),
	N(hc_eps, OPT, 1e-6, 0, 1, false),        N(routed_scaling_factor, REQ, 0, 0, 1e6, true),
	N(swiglu_limit, OPT, 0, 0, 1e30, false),  N(rms_norm_eps, OPT, 1e-6, 0, 1, true),
};
#undef N

static int bad(struct err *e, const char *what, const json_t *o, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int bad(struct err *e, const char *what, const json_t *o, const char *key, const char *fmt, ...)
{
	char why[256], v[96];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	return err_set(e, "%s: key \"%s\": invalid value %s (%s)", what, key,
		       json_util_show(json_util_get(o, key), v, sizeof v), why);
}

static int read_scalars(const json_t *o, const char *what, struct v4_config *c, struct err *e)
{
	for (size_t i = 0; i < sizeof int_keys / sizeof int_keys[0]; i++) {
		const struct int_key *k = &int_keys[i];
		long long v;
		int r = json_util_int(o, what, k->key, k->def, &v, e);
		if (r < 0)
			return -1;
		if (r == 1 && k->required)
			return err_set(e, "%s: key \"%s\" is missing or null", what, k->key);
		if (v < k->lo || v > k->hi)
			return bad(e, what, o, k->key, "expected an integer in [%d, %d]", k->lo, k->hi);
		*(int *)((char *)c + k->off) = (int)v;
	}
	for (size_t i = 0; i < sizeof num_keys / sizeof num_keys[0]; i++) {
		const struct num_key *k = &num_keys[i];
		double v;
		int r = json_util_num(o, what, k->key, k->def, &v, e);
		if (r < 0)
			return -1;
		if (r == 1 && k->required)
			return err_set(e, "%s: key \"%s\" is missing or null", what, k->key);
		if (!isfinite(v) || v < k->lo || (k->open && v == k->lo) || v > k->hi)
			return bad(e, what, o, k->key, "expected a number %s %g", k->open ? ">" : ">=", k->lo);
		*(float *)((char *)c + k->off) = (float)v;
	}
	return 0;
}

/* A string key that must be one of names (or absent when def is not NULL). */
static int read_choice(const json_t *o, const char *what, const char *key, const char *def, const char *const *names,
		       int n, int *out, struct err *e)
{
	const char *v;
	if (json_util_str(o, what, key, def, &v, e) < 0)
		return -1;
	if (!v)
		return err_set(e, "%s: key \"%s\" is missing or null", what, key);
	for (int i = 0; i < n; i++)
		if (!strcmp(v, names[i])) {
			*out = i;
			return 0;
		}
	char list[128] = "";
	for (int i = 0; i < n; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " or " : "", names[i]);
	return bad(e, what, o, key, "expected %s", list);
}

static int read_ratios(const json_t *o, const char *what, struct v4_config *c, struct err *e)
{
	const json_t *a = json_object_get(o, "compress_ratios");
	int need = c->num_hidden_layers + c->num_nextn_predict_layers;
	if (!a || json_is_null(a))
		return err_set(e, "%s: key \"compress_ratios\" is missing or null", what);
	if (!json_is_array(a) || (int)json_array_size(a) < need || json_array_size(a) > V4_MAX_LAYERS)
		return bad(e, what, o, "compress_ratios",
			   "expected a list of at least num_hidden_layers + num_nextn_predict_layers = %d and at most "
			   "%d ratios",
			   need, V4_MAX_LAYERS);
	c->n_compress_ratios = (int)json_array_size(a);
	for (int i = 0; i < c->n_compress_ratios; i++) {
		const json_t *v = json_array_get(a, (size_t)i);
		long long r = json_is_integer(v) ? json_integer_value(v) : -1;
		/* 1 would pool single tokens; vLLM writes it for "none", DeepSeek writes 0 */
		if (r < 0 || r == 1 || r > (1 << 16))
			return err_set(
				e,
				"%s: key \"compress_ratios\"[%d]: invalid value (expected 0 = window only, or a "
				"ratio in [2, 65536])",
				what, i);
		c->compress_ratios[i] = (int)r;
	}
	return 0;
}

static int read_rope_scaling(const json_t *root, const char *what, struct v4_config *c, struct err *e)
{
	const json_t *r = json_object_get(root, "rope_scaling");
	c->rope_yarn = false;
	if (!r || json_is_null(r))
		return 0;
	if (!json_is_object(r))
		return bad(e, what, root, "rope_scaling", "expected an object or null");
	const char *tkey = json_object_get(r, "rope_type") ? "rope_scaling.rope_type" : "rope_scaling.type";
	static const char *const types[] = {"yarn"};
	int t;
	long long orig;
	double f, bf, bs;
	if (read_choice(r, what, tkey, NULL, types, 1, &t, e) < 0 ||
	    json_util_num(r, what, "rope_scaling.factor", 0, &f, e) < 0 ||
	    json_util_int(r, what, "rope_scaling.original_max_position_embeddings", 0, &orig, e) < 0 ||
	    json_util_num(r, what, "rope_scaling.beta_fast", 32, &bf, e) < 0 ||
	    json_util_num(r, what, "rope_scaling.beta_slow", 1, &bs, e) < 0)
		return -1;
	if (!(f >= 1 && f < 1e9))
		return bad(e, what, r, "rope_scaling.factor", "expected a number >= 1");
	if (orig < 1 || orig > INT_MAX)
		return bad(e, what, r, "rope_scaling.original_max_position_embeddings", "expected an integer >= 1");
	if (!(bs > 0 && bf >= bs && bf < 1e9))
		return bad(e, what, r, "rope_scaling.beta_fast", "expected beta_fast >= beta_slow > 0");
	c->rope_yarn = true;
	c->yarn_factor = (float)f;
	c->yarn_original_max_position = (int)orig;
	c->yarn_beta_fast = (float)bf;
	c->yarn_beta_slow = (float)bs;
	return 0;
}

/* DeepSeek's fp8 block format, as the V3 checkpoints: e4m3 weights, 128x128 ue8m0 blocks. */
static int read_quant(const json_t *root, const char *what, struct v4_config *c, struct err *e)
{
	const json_t *q = json_object_get(root, "quantization_config");
	static const char *const methods[] = {"fp8"}, *const fmts[] = {"e4m3"}, *const acts[] = {"dynamic"},
				 *const sfmts[] = {"ue8m0"}, *const experts[] = {"fp8", "fp4"};
	int x;
	const json_t *ed = json_object_get(root, "expert_dtype");
	c->expert_dtype = V4_EXPERT_UNSPECIFIED;
	if (ed && !json_is_null(ed)) {
		if (read_choice(root, what, "expert_dtype", NULL, experts, 2, &x, e) < 0)
			return -1;
		c->expert_dtype = x ? V4_EXPERT_FP4 : V4_EXPERT_FP8;
	}
	if (!q || json_is_null(q))
		return 0;
	if (!json_is_object(q))
		return bad(e, what, root, "quantization_config", "expected an object or null");
	if (read_choice(q, what, "quantization_config.quant_method", NULL, methods, 1, &x, e) < 0 ||
	    read_choice(q, what, "quantization_config.fmt", "e4m3", fmts, 1, &x, e) < 0 ||
	    read_choice(q, what, "quantization_config.activation_scheme", "dynamic", acts, 1, &x, e) < 0)
		return -1;
	const json_t *sf = json_object_get(q, "scale_fmt");
	if (sf && !json_is_null(sf) &&
	    read_choice(q, what, "quantization_config.scale_fmt", NULL, sfmts, 1, &x, e) < 0)
		return -1;
	const json_t *b = json_object_get(q, "weight_block_size");
	if (!json_is_array(b) || json_array_size(b) != 2 || json_integer_value(json_array_get(b, 0)) != 128 ||
	    json_integer_value(json_array_get(b, 1)) != 128)
		return bad(e, what, q, "quantization_config.weight_block_size", "expected [128, 128]");
	c->fp8 = true;
	c->fp8_block_rows = c->fp8_block_cols = 128;
	c->fp8_scale_ue8m0 = sf && !json_is_null(sf);
	return 0;
}

static int token_id(const json_t *o, const char *what, const char *key, int *out, struct err *e)
{
	const json_t *v = json_object_get(o, key);
	if (json_is_array(v) && json_array_size(v) > 0)
		v = json_array_get(v, 0);
	*out = -1;
	if (!v || json_is_null(v))
		return 0;
	int32_t id;
	if (!json_util_id(v, &id))
		return bad(e, what, o, key, "expected a token id or a list of them");
	*out = id;
	return 0;
}

/* Sizes that the units rely on (and model.py assumes without checking). */
static int cross_checks(const json_t *o, const char *what, struct v4_config *c, struct err *e)
{
	int rd = c->qk_rope_head_dim, di = c->index_head_dim;
	if (rd % 2 || rd >= c->head_dim)
		return bad(e, what, o, "qk_rope_head_dim", "expected an even number < head_dim %d", c->head_dim);
	if (c->num_attention_heads % c->o_groups)
		return bad(e, what, o, "o_groups", "expected a divisor of num_attention_heads %d",
			   c->num_attention_heads);
	if ((di & (di - 1)) || di < rd)
		return bad(e, what, o, "index_head_dim",
			   "expected a power of two (the Hadamard rotation) >= qk_rope_head_dim %d", rd);
	if (c->num_experts_per_tok > c->n_routed_experts)
		return bad(e, what, o, "num_experts_per_tok", "expected <= n_routed_experts %d", c->n_routed_experts);
	if (c->num_hash_layers > c->num_hidden_layers)
		return bad(e, what, o, "num_hash_layers", "expected <= num_hidden_layers %d", c->num_hidden_layers);
	long long kv = 1;
	if (json_util_int(o, what, "num_key_value_heads", 1, &kv, e) < 0)
		return -1;
	if (kv != 1)
		return bad(e, what, o, "num_key_value_heads", "expected 1: V4 has one shared key/value vector");
	static const char *const scoring[] = {"sqrtsoftplus"}, *const topk[] = {"noaux_tc"}, *const acts[] = {"silu"};
	int x;
	if (read_choice(o, what, "scoring_func", NULL, scoring, 1, &x, e) < 0 ||
	    read_choice(o, what, "topk_method", "noaux_tc", topk, 1, &x, e) < 0 ||
	    read_choice(o, what, "hidden_act", "silu", acts, 1, &x, e) < 0)
		return -1;
	return 0;
}

static int parse_root(const json_t *o, const char *what, struct v4_config *c, struct err *e)
{
	memset(c, 0, sizeof *c);
	if (!json_is_object(o))
		return err_set(e, "%s: expected a JSON object", what);
	static const char *const types[] = {"deepseek_v4"}, *const archs[] = {"DeepseekV4ForCausalLM"};
	int x;
	if (read_choice(o, what, "model_type", NULL, types, 1, &x, e) < 0)
		return -1;
	const json_t *a = json_object_get(o, "architectures"), *v;
	size_t i;
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v) || strcmp(json_string_value(v), archs[0]))
			return bad(e, what, o, "architectures", "expected [\"%s\"]", archs[0]);
	}
	if (read_scalars(o, what, c, e) < 0 || read_ratios(o, what, c, e) < 0 ||
	    read_rope_scaling(o, what, c, e) < 0 || read_quant(o, what, c, e) < 0 || cross_checks(o, what, c, e) < 0 ||
	    json_util_bool(o, what, "norm_topk_prob", true, &c->norm_topk_prob, e) < 0 ||
	    json_util_bool(o, what, "tie_word_embeddings", false, &c->tie_word_embeddings, e) < 0 ||
	    token_id(o, what, "bos_token_id", &c->bos_token_id, e) < 0 ||
	    token_id(o, what, "eos_token_id", &c->eos_token_id, e) < 0)
		return -1;
	const char *dt;
	if (json_util_str(o, what, "torch_dtype", "", &dt, e) < 0)
		return -1;
	snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", dt);
	return 0;
}

/* parse_root, then the tree goes */
static int parse_and_free(json_t *root, const char *what, struct v4_config *cfg, struct err *e)
{
	int rc = parse_root(root, what, cfg, e);
	json_decref(root);
	return rc;
}

int v4_config_parse(const char *json_text, const char *what, struct v4_config *cfg, struct err *e)
{
	json_t *root;
	return json_util_parse(json_text, strlen(json_text), what, &root, e) ? -1 : parse_and_free(root, what, cfg, e);
}

int v4_config_load(const char *dir, struct v4_config *cfg, struct err *e)
{
	char path[4096];
	json_t *root;
	snprintf(path, sizeof path, "%s/config.json", dir);
	return json_util_load(path, &root, e) ? -1 : parse_and_free(root, path, cfg, e);
}

bool v4_config_is_v4(const char *dir)
{
	char path[4096];
	json_t *root;
	snprintf(path, sizeof path, "%s/config.json", dir);
	if (json_util_load(path, &root, NULL))
		return false;
	const char *t = json_string_value(json_object_get(root, "model_type"));
	bool yes = t && !strcmp(t, "deepseek_v4");
	json_decref(root);
	return yes;
}
