/* model_v4/v4_config: tiny-v4's config.json, the published V4-Flash and V4-Pro configs, and
 * the refused values with their messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model_v4/v4_config.h"
#include "unit/v4_configs.h"

#define WHAT "x/config.json"

static void test_tiny_v4(void)
{
	struct v4_config c;
	struct err e = {{0}};
	EXPECTF(v4_config_load(fixture_path("tiny-v4"), &c, &e) == 0, "%s", e.msg);
	EXPECT_EQ_INT(c.vocab_size, 1024);
	EXPECT_EQ_INT(c.hidden_size, 256);
	EXPECT_EQ_INT(c.num_hidden_layers, 4);
	EXPECT_EQ_INT(c.num_nextn_predict_layers, 1);
	EXPECT_EQ_INT(c.num_attention_heads, 4);
	EXPECT_EQ_INT(c.head_dim, 96);
	EXPECT_EQ_INT(c.qk_rope_head_dim, 32);
	EXPECT_EQ_INT(c.q_lora_rank, 128);
	EXPECT_EQ_INT(c.o_groups, 2);
	EXPECT_EQ_INT(c.o_lora_rank, 64);
	EXPECT_EQ_INT(c.sliding_window, 16);
	EXPECT_EQ_INT(c.n_compress_ratios, 5);
	int want[] = {0, 4, 16, 128, 0};
	for (int i = 0; i < 5; i++)
		EXPECT_EQ_INT(v4_layer_ratio(&c, i), want[i]);
	EXPECT_NEAR(c.rope_theta, 10000, 0);
	EXPECT_NEAR(c.compress_rope_theta, 160000, 0);
	EXPECT(c.rope_yarn);
	EXPECT_NEAR(c.yarn_factor, 16, 0);
	EXPECT_EQ_INT(c.yarn_original_max_position, 4096);
	EXPECT_NEAR(c.yarn_beta_fast, 32, 0);
	EXPECT_NEAR(c.yarn_beta_slow, 1, 0);
	EXPECT_EQ_INT(c.index_n_heads, 8);
	EXPECT_EQ_INT(c.index_head_dim, 64);
	EXPECT_EQ_INT(c.index_topk, 8);
	EXPECT_EQ_INT(c.hc_mult, 4);
	EXPECT_EQ_INT(c.hc_sinkhorn_iters, 20);
	EXPECT_NEAR(c.hc_eps, 1e-6, 1e-12);
	EXPECT_EQ_INT(c.n_routed_experts, 8);
	EXPECT_EQ_INT(c.num_experts_per_tok, 2);
	EXPECT_EQ_INT(c.n_shared_experts, 1);
	EXPECT_EQ_INT(c.moe_intermediate_size, 128);
	EXPECT_EQ_INT(c.num_hash_layers, 2);
	EXPECT(v4_layer_is_hash(&c, 1) && !v4_layer_is_hash(&c, 2));
	EXPECT_NEAR(c.routed_scaling_factor, 1.5, 0);
	EXPECT_NEAR(c.swiglu_limit, 2, 0);
	EXPECT(c.norm_topk_prob);
	EXPECT_NEAR(c.rms_norm_eps, 1e-6, 1e-12);
	EXPECT(!c.tie_word_embeddings);
	EXPECT_EQ_INT(c.bos_token_id, 0);
	EXPECT_EQ_INT(c.eos_token_id, 1);
	EXPECT(c.fp8 && c.fp8_scale_ue8m0);
	EXPECT_EQ_INT(c.fp8_block_rows, 128);
	EXPECT(c.expert_dtype == V4_EXPERT_FP4);
	EXPECT(!strcmp(c.torch_dtype, "bfloat16"));
}

static void test_flash(void)
{
	struct v4_config c;
	struct err e = {{0}};
	EXPECTF(v4_config_parse(v4_flash_config_json, "flash", &c, &e) == 0, "%s", e.msg);
	EXPECT_EQ_INT(c.hidden_size, 4096);
	EXPECT_EQ_INT(c.num_hidden_layers, 43);
	EXPECT_EQ_INT(c.num_attention_heads, 64);
	EXPECT_EQ_INT(c.head_dim, 512);
	EXPECT_EQ_INT(c.qk_rope_head_dim, 64);
	EXPECT_EQ_INT(c.q_lora_rank, 1024);
	EXPECT_EQ_INT(c.o_groups, 8);
	EXPECT_EQ_INT(c.o_lora_rank, 1024);
	EXPECT_EQ_INT(c.sliding_window, 128);
	EXPECT_EQ_INT(c.n_compress_ratios, 44);
	EXPECT_EQ_INT(v4_layer_ratio(&c, 0), 0);
	EXPECT_EQ_INT(v4_layer_ratio(&c, 2), 4);
	EXPECT_EQ_INT(v4_layer_ratio(&c, 3), 128);
	EXPECT_EQ_INT(v4_layer_ratio(&c, 42), 4);
	EXPECT_EQ_INT(v4_layer_ratio(&c, 43), 0); /* the MTP layer: window only */
	EXPECT_EQ_INT(c.index_n_heads, 64);
	EXPECT_EQ_INT(c.index_head_dim, 128);
	EXPECT_EQ_INT(c.index_topk, 512);
	EXPECT_EQ_INT(c.n_routed_experts, 256);
	EXPECT_EQ_INT(c.num_experts_per_tok, 6);
	EXPECT_EQ_INT(c.moe_intermediate_size, 2048);
	EXPECT_EQ_INT(c.num_hash_layers, 3);
	EXPECT_NEAR(c.routed_scaling_factor, 1.5, 0);
	EXPECT_NEAR(c.swiglu_limit, 10, 0);
	EXPECT_EQ_INT(c.yarn_original_max_position, 65536);
	EXPECT_EQ_INT(c.vocab_size, 129280);
	EXPECT_EQ_INT(c.max_position_embeddings, 1048576);
	EXPECT(c.expert_dtype == V4_EXPERT_FP4);
}

static void test_pro(void)
{
	struct v4_config c;
	struct err e = {{0}};
	EXPECTF(v4_config_parse(v4_pro_config_json, "pro", &c, &e) == 0, "%s", e.msg);
	EXPECT_EQ_INT(c.hidden_size, 7168);
	EXPECT_EQ_INT(c.num_hidden_layers, 61);
	EXPECT_EQ_INT(c.num_attention_heads, 128);
	EXPECT_EQ_INT(c.q_lora_rank, 1536);
	EXPECT_EQ_INT(c.o_groups, 16);
	EXPECT_EQ_INT(c.index_topk, 1024);
	EXPECT_EQ_INT(c.n_routed_experts, 384);
	EXPECT_EQ_INT(c.moe_intermediate_size, 3072);
	EXPECT_NEAR(c.routed_scaling_factor, 2.5, 0);
	EXPECT_EQ_INT(c.n_compress_ratios, 62);
	EXPECT_EQ_INT(v4_layer_ratio(&c, 0), 128);
	EXPECT_EQ_INT(v4_layer_ratio(&c, 60), 4);
	EXPECT_EQ_INT(v4_layer_ratio(&c, 61), 0);
}

/* The Flash config with `from` replaced by `to` (which must occur once). */
static char *edit(const char *from, const char *to)
{
	const char *p = strstr(v4_flash_config_json, from);
	CHECK(p && !strstr(p + 1, from));
	size_t n = strlen(v4_flash_config_json) + strlen(to) + 1;
	char *s = malloc(n);
	CHECK(s);
	snprintf(s, n, "%.*s%s%s", (int)(p - v4_flash_config_json), v4_flash_config_json, to, p + strlen(from));
	return s;
}

static void expect_refused(const char *from, const char *to, const char *msg)
{
	char *s = edit(from, to);
	struct v4_config c;
	struct err e = {{0}};
	int rc = v4_config_parse(s, WHAT, &c, &e);
	EXPECTF(rc < 0 && strstr(e.msg, msg), "%s -> %s: rc %d, message \"%s\", expected \"%s\"", from, to, rc, e.msg,
		msg);
	free(s);
}

static void test_refused(void)
{
	expect_refused("\"model_type\": \"deepseek_v4\"", "\"model_type\": \"deepseek_v3\"",
		       "x/config.json: key \"model_type\": invalid value \"deepseek_v3\" (expected deepseek_v4)");
	expect_refused("\"hidden_size\": 4096,", "", "key \"hidden_size\" is missing or null");
	expect_refused("\"hc_mult\": 4", "\"hc_mult\": 17", "key \"hc_mult\": invalid value 17");
	expect_refused("\"hc_mult\": 4", "\"hc_mult\": 4.5", "key \"hc_mult\": expected an integer");
	expect_refused("\"compress_ratios\": [0, 0, 4", "\"compress_ratios\": [1, 0, 4",
		       "\"compress_ratios\"[0]: invalid value (expected 0 = window only");
	expect_refused("4, 128, 4, 0]", "4, 128, 4]", "key \"compress_ratios\": invalid value");
	expect_refused("\"scoring_func\": \"sqrtsoftplus\"", "\"scoring_func\": \"sigmoid\"",
		       "key \"scoring_func\": invalid value \"sigmoid\" (expected sqrtsoftplus)");
	expect_refused("\"o_groups\": 8", "\"o_groups\": 7", "key \"o_groups\": invalid value 7");
	expect_refused("\"index_head_dim\": 128", "\"index_head_dim\": 96", "(the Hadamard rotation)");
	expect_refused("\"num_key_value_heads\": 1", "\"num_key_value_heads\": 2", "expected 1");
	expect_refused("\"num_experts_per_tok\": 6", "\"num_experts_per_tok\": 300", "expected <= n_routed_experts");
	expect_refused("\"num_hash_layers\": 3", "\"num_hash_layers\": 44", "expected <= num_hidden_layers");
	expect_refused("\"qk_rope_head_dim\": 64", "\"qk_rope_head_dim\": 63", "expected an even number");
	expect_refused("\"type\": \"yarn\"", "\"type\": \"linear\"", "\"rope_scaling.type\": invalid value");
	expect_refused("\"factor\": 16", "\"factor\": 0.5", "\"rope_scaling.factor\": invalid value 0.5");
	expect_refused("\"expert_dtype\": \"fp4\"", "\"expert_dtype\": \"int4\"", "expected fp8 or fp4");
	expect_refused("\"weight_block_size\": [128, 128]", "\"weight_block_size\": [64, 64]", "expected [128, 128]");
	expect_refused("\"quant_method\": \"fp8\"", "\"quant_method\": \"awq\"", "expected fp8");
	expect_refused("\"routed_scaling_factor\": 1.5", "\"routed_scaling_factor\": 0", "expected a number > 0");
	expect_refused("\"architectures\": [\"DeepseekV4ForCausalLM\"]", "\"architectures\": [\"X\"]",
		       "expected [\"DeepseekV4ForCausalLM\"]");
}

static void test_defaults(void)
{
	/* absent optional keys: published defaults; absent expert_dtype: undecided */
	char *s = edit("\"expert_dtype\": \"fp4\",", "");
	char *t = edit("\"rope_scaling\": {", "\"x\": {");
	struct v4_config c;
	struct err e = {{0}};
	EXPECTF(v4_config_parse(s, WHAT, &c, &e) == 0, "%s", e.msg);
	EXPECT(c.expert_dtype == V4_EXPERT_UNSPECIFIED);
	EXPECTF(v4_config_parse(t, WHAT, &c, &e) == 0, "%s", e.msg);
	EXPECT(!c.rope_yarn);
	free(s);
	free(t);
}

static void test_is_v4(void)
{
	EXPECT(v4_config_is_v4(fixture_path("tiny-v4")));
	EXPECT(!v4_config_is_v4(fixture_path("tiny-v3")));
	EXPECT(!v4_config_is_v4(fixture_path("no-such-dir")));
}

TESTS(T(test_tiny_v4), T(test_is_v4), T(test_flash), T(test_pro), T(test_refused), T(test_defaults))
