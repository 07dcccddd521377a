/* config.json parsing: the fixture and bench configs, defaults, and rejected values. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "io/config.h"
#include "io/json_util.h"

#define WHAT "tests/x/config.json"

static void test_tiny_v3(void)
{
	struct model_config c;
	struct err e = {{0}};
	EXPECTF(config_load(fixture_path("tiny-v3"), &c, &e) == 0, "%s", e.msg);
	EXPECT(strcmp(c.model_type, "deepseek_v3") == 0);
	EXPECT_EQ_INT(c.vocab_size, 1024);
	EXPECT_EQ_INT(c.hidden_size, 128);
	EXPECT_EQ_INT(c.intermediate_size, 320);
	EXPECT_EQ_INT(c.moe_intermediate_size, 64);
	EXPECT_EQ_INT(c.num_hidden_layers, 3);
	EXPECT_EQ_INT(c.num_attention_heads, 4);
	EXPECT_EQ_INT(c.q_lora_rank, 96);
	EXPECT_EQ_INT(c.kv_lora_rank, 64);
	EXPECT_EQ_INT(c.qk_nope_head_dim, 32);
	EXPECT_EQ_INT(c.qk_rope_head_dim, 16);
	EXPECT_EQ_INT(c.v_head_dim, 32);
	EXPECT_EQ_INT(c.n_routed_experts, 8);
	EXPECT_EQ_INT(c.num_experts_per_tok, 2);
	EXPECT_EQ_INT(c.n_shared_experts, 1);
	EXPECT_EQ_INT(c.first_k_dense_replace, 1);
	EXPECT_EQ_INT(c.moe_layer_freq, 1);
	EXPECT_EQ_INT(c.n_group, 4);
	EXPECT_EQ_INT(c.topk_group, 2);
	EXPECT(c.topk_method == TOPK_NOAUX_TC);
	EXPECT(c.scoring_func == SCORING_SIGMOID);
	EXPECT(c.norm_topk_prob);
	EXPECT_NEAR(c.routed_scaling_factor, 2.5, 0);
	EXPECT_NEAR(c.rms_norm_eps, 1e-6, 1e-12);
	EXPECT_NEAR(c.rope_theta, 10000, 0);
	EXPECT_EQ_INT(c.max_position_embeddings, 512);
	EXPECT(c.rope_yarn);
	EXPECT_NEAR(c.yarn_factor, 4, 0);
	EXPECT_EQ_INT(c.yarn_original_max_position, 128);
	EXPECT_NEAR(c.yarn_beta_fast, 32, 0);
	EXPECT_NEAR(c.yarn_beta_slow, 1, 0);
	EXPECT_NEAR(c.yarn_mscale, 1, 0);
	EXPECT_NEAR(c.yarn_mscale_all_dim, 1, 0);
	EXPECT(!c.tie_word_embeddings);
	EXPECT_EQ_INT(c.bos_token_id, 0);
	EXPECT_EQ_INT(c.eos_token_id, 1);
	EXPECT(!c.fp8);
	EXPECT(strcmp(c.torch_dtype, "bfloat16") == 0);
	EXPECT(!config_layer_is_moe(&c, 0));
	EXPECT(config_layer_is_moe(&c, 1) && config_layer_is_moe(&c, 2));
}

static void test_tiny_v2(void)
{
	struct model_config c;
	struct err e = {{0}};
	EXPECTF(config_load(fixture_path("tiny-v2"), &c, &e) == 0, "%s", e.msg);
	EXPECT(strcmp(c.model_type, "deepseek_v2") == 0);
	EXPECT_EQ_INT(c.q_lora_rank, 0); /* null */
	EXPECT_EQ_INT(c.kv_lora_rank, 64);
	EXPECT_EQ_INT(c.n_routed_experts, 8);
	EXPECT_EQ_INT(c.num_experts_per_tok, 3);
	EXPECT_EQ_INT(c.n_shared_experts, 2);
	EXPECT_EQ_INT(c.n_group, 1);
	EXPECT_EQ_INT(c.topk_group, 1);
	EXPECT(c.topk_method == TOPK_GREEDY);
	EXPECT(c.scoring_func == SCORING_SOFTMAX);
	EXPECT(!c.norm_topk_prob);
	EXPECT_NEAR(c.routed_scaling_factor, 1, 0);
	EXPECT(!c.rope_yarn); /* rope_scaling null */
	EXPECT(!c.fp8);
}

static void test_tiny_v3_fp8(void)
{
	struct model_config c;
	struct err e = {{0}};
	EXPECTF(config_load(fixture_path("tiny-v3-fp8"), &c, &e) == 0, "%s", e.msg);
	EXPECT(c.fp8);
	EXPECT_EQ_INT(c.fp8_block_rows, 128);
	EXPECT_EQ_INT(c.fp8_block_cols, 128);
	EXPECT(!c.fp8_scale_ue8m0);
	EXPECT_EQ_INT(c.q_lora_rank, 96);
	EXPECT(c.topk_method == TOPK_NOAUX_TC);
}

static void test_tiny_r1(void)
{
	struct model_config c;
	struct err e = {{0}};
	EXPECTF(config_load(fixture_path("tiny-r1"), &c, &e) == 0, "%s", e.msg);
	EXPECT(c.fp8);
	EXPECT_EQ_INT(c.intermediate_size, 256);
	EXPECT_EQ_INT(c.moe_intermediate_size, 32);
	EXPECT_EQ_INT(c.num_attention_heads, 8);
	EXPECT_EQ_INT(c.q_lora_rank, 64);
	EXPECT_EQ_INT(c.kv_lora_rank, 32);
	EXPECT_EQ_INT(c.qk_nope_head_dim, 16);
	EXPECT_EQ_INT(c.v_head_dim, 16);
	EXPECT_EQ_INT(c.n_routed_experts, 16);
	EXPECT_EQ_INT(c.num_experts_per_tok, 4);
	EXPECT_EQ_INT(c.n_group, 4);
	EXPECT_EQ_INT(c.topk_group, 2);
	EXPECT_NEAR(c.yarn_factor, 4, 0); /* written as the integer 4 */
}

static void test_bench_configs(void)
{
	struct model_config c;
	struct err e = {{0}};
	EXPECTF(config_load(fixture_path("../../bench/configs/bench-v2lite-4L"), &c, &e) == 0, "%s", e.msg);
	EXPECT(strcmp(c.model_type, "deepseek_v2") == 0);
	EXPECT_EQ_INT(c.vocab_size, 102400);
	EXPECT_EQ_INT(c.hidden_size, 2048);
	EXPECT_EQ_INT(c.intermediate_size, 10944);
	EXPECT_EQ_INT(c.moe_intermediate_size, 1408);
	EXPECT_EQ_INT(c.num_hidden_layers, 4);
	EXPECT_EQ_INT(c.num_attention_heads, 16);
	EXPECT_EQ_INT(c.q_lora_rank, 0);
	EXPECT_EQ_INT(c.kv_lora_rank, 512);
	EXPECT_EQ_INT(c.qk_nope_head_dim, 128);
	EXPECT_EQ_INT(c.qk_rope_head_dim, 64);
	EXPECT_EQ_INT(c.n_routed_experts, 64);
	EXPECT_EQ_INT(c.num_experts_per_tok, 6);
	EXPECT_EQ_INT(c.n_shared_experts, 2);
	EXPECT(c.topk_method == TOPK_GREEDY && c.scoring_func == SCORING_SOFTMAX);
	EXPECT(c.rope_yarn);
	EXPECT_NEAR(c.yarn_factor, 40, 0);
	EXPECT_EQ_INT(c.yarn_original_max_position, 4096);
	EXPECT_NEAR(c.yarn_mscale, 0.707, 1e-6);
	EXPECT_NEAR(c.yarn_mscale_all_dim, 0.707, 1e-6);
	EXPECT_EQ_INT(c.max_position_embeddings, 163840);
	EXPECT_EQ_INT(c.bos_token_id, 100000);
	EXPECT_EQ_INT(c.eos_token_id, 100001);

	EXPECTF(config_load(fixture_path("../../bench/configs/bench-v3attn-2L"), &c, &e) == 0, "%s", e.msg);
	EXPECT(strcmp(c.model_type, "deepseek_v3") == 0);
	EXPECT_EQ_INT(c.vocab_size, 102400);
	EXPECT_EQ_INT(c.hidden_size, 7168);
	EXPECT_EQ_INT(c.intermediate_size, 18432);
	EXPECT_EQ_INT(c.num_hidden_layers, 2);
	EXPECT_EQ_INT(c.num_attention_heads, 128);
	EXPECT_EQ_INT(c.q_lora_rank, 1536);
	EXPECT_EQ_INT(c.n_routed_experts, 16);
	EXPECT_EQ_INT(c.num_experts_per_tok, 8);
	EXPECT_EQ_INT(c.n_group, 8);
	EXPECT_EQ_INT(c.topk_group, 4);
	EXPECT(c.topk_method == TOPK_NOAUX_TC && c.scoring_func == SCORING_SIGMOID);
	EXPECT_NEAR(c.routed_scaling_factor, 2.5, 0);
	EXPECT_NEAR(c.yarn_mscale_all_dim, 1.0, 0);
	EXPECT(!config_layer_is_moe(&c, 0) && config_layer_is_moe(&c, 1));
}

/* Only the required keys: everything else takes its default. */
#define MINIMAL                                                                        \
	"\"vocab_size\": 64, \"hidden_size\": 32, \"intermediate_size\": 48, "         \
	"\"num_hidden_layers\": 4, \"num_attention_heads\": 2, \"kv_lora_rank\": 16, " \
	"\"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 4, \"v_head_dim\": 8"

static void test_defaults(void)
{
	struct model_config c;
	struct err e = {{0}};
	EXPECTF(config_parse("{\"model_type\": \"deepseek_v2\", " MINIMAL "}", WHAT, &c, &e) == 0, "%s", e.msg);
	EXPECT_EQ_INT(c.q_lora_rank, 0);
	EXPECT_EQ_INT(c.n_routed_experts, 0); /* dense */
	EXPECT_EQ_INT(c.n_shared_experts, 0);
	for (int i = 0; i < 4; i++)
		EXPECT(!config_layer_is_moe(&c, i));
	EXPECT_EQ_INT(c.moe_layer_freq, 1);
	EXPECT_EQ_INT(c.n_group, 1);
	EXPECT_EQ_INT(c.topk_group, 1);
	EXPECT(c.topk_method == TOPK_GREEDY && c.scoring_func == SCORING_SOFTMAX);
	EXPECT(!c.norm_topk_prob);
	EXPECT_NEAR(c.routed_scaling_factor, 1, 0);
	EXPECT_NEAR(c.rms_norm_eps, 1e-6, 1e-12);
	EXPECT_NEAR(c.rope_theta, 10000, 0);
	EXPECT_EQ_INT(c.max_position_embeddings, 2048);
	EXPECT(!c.rope_yarn && !c.fp8 && !c.tie_word_embeddings);
	EXPECT_EQ_INT(c.bos_token_id, -1);
	EXPECT_EQ_INT(c.eos_token_id, -1);
	EXPECT(c.torch_dtype[0] == 0);

	/* V3 routing defaults; yarn with only a factor; n_routed_experts null => dense */
	EXPECTF(config_parse("{\"model_type\": \"deepseek_v3\", " MINIMAL
			     ", \"n_routed_experts\": 4, \"moe_intermediate_size\": 8, "
			     "\"num_experts_per_tok\": 2, \"moe_layer_freq\": 2, "
			     "\"first_k_dense_replace\": 1, \"eos_token_id\": [7, 9], "
			     "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 2}}",
			     WHAT, &c, &e) == 0,
		"%s", e.msg);
	EXPECT(c.topk_method == TOPK_NOAUX_TC && c.scoring_func == SCORING_SIGMOID);
	EXPECT(c.norm_topk_prob);
	EXPECT_NEAR(c.routed_scaling_factor, 2.5, 0);
	EXPECT(c.rope_yarn);
	EXPECT_NEAR(c.yarn_mscale, 1, 0);
	EXPECT_NEAR(c.yarn_mscale_all_dim, 0, 0); /* absent: no softmax-scale factor */
	EXPECT_NEAR(c.yarn_beta_fast, 32, 0);
	EXPECT_NEAR(c.yarn_beta_slow, 1, 0);
	EXPECT_EQ_INT(c.yarn_original_max_position, 4096); /* max_position_embeddings */
	EXPECT_EQ_INT(c.eos_token_id, 7);
	/* layers 0..3, first dense, then every 2nd */
	EXPECT(!config_layer_is_moe(&c, 0) && !config_layer_is_moe(&c, 1));
	EXPECT(config_layer_is_moe(&c, 2) && !config_layer_is_moe(&c, 3));

	EXPECTF(config_parse("{\"model_type\": \"deepseek_v3\", " MINIMAL
			     ", \"n_routed_experts\": null, \"scoring_func\": \"softmax\"}",
			     WHAT, &c, &e) == 0,
		"%s", e.msg);
	EXPECT_EQ_INT(c.n_routed_experts, 0);
	EXPECT(!config_layer_is_moe(&c, 2));
}

static void test_rope_parameters_and_ue8m0(void)
{
	struct model_config c;
	struct err e = {{0}};
	EXPECTF(config_parse("{\"model_type\": \"deepseek_v3\", " MINIMAL ", \"rope_theta\": 5, "
			     "\"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 50000,"
			     " \"factor\": 40.0, \"original_max_position_embeddings\": 4096, "
			     "\"beta_fast\": 16, \"beta_slow\": 2, \"mscale\": 0.5, "
			     "\"mscale_all_dim\": 0.25}, \"dtype\": \"float32\", "
			     "\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": "
			     "\"e4m3\", \"activation_scheme\": \"dynamic\", \"weight_block_size\":"
			     " [128, 128], \"scale_fmt\": \"ue8m0\"}}",
			     WHAT, &c, &e) == 0,
		"%s", e.msg);
	EXPECT(c.rope_yarn);
	EXPECT_NEAR(c.rope_theta, 50000, 0);
	EXPECT_NEAR(c.yarn_factor, 40, 0);
	EXPECT_NEAR(c.yarn_beta_fast, 16, 0);
	EXPECT_NEAR(c.yarn_beta_slow, 2, 0);
	EXPECT_NEAR(c.yarn_mscale, 0.5, 0);
	EXPECT_NEAR(c.yarn_mscale_all_dim, 0.25, 0);
	EXPECT(c.fp8 && c.fp8_scale_ue8m0);
	EXPECT(strcmp(c.torch_dtype, "float32") == 0);

	/* rope_parameters "default" = plain rope with its own theta */
	EXPECTF(config_parse("{\"model_type\": \"deepseek_v2\", " MINIMAL ", \"rope_parameters\": "
			     "{\"rope_type\": \"default\", \"rope_theta\": 20000}}",
			     WHAT, &c, &e) == 0,
		"%s", e.msg);
	EXPECT(!c.rope_yarn);
	EXPECT_NEAR(c.rope_theta, 20000, 0);
	/* quant_method only has to contain fp8 */
	EXPECTF(config_parse("{\"model_type\": \"deepseek_v3\", " MINIMAL ", \"quantization_config\":"
			     " {\"quant_method\": \"deepseek_fp8\", \"activation_scheme\": "
			     "\"dynamic\", \"weight_block_size\": [128, 128]}}",
			     WHAT, &c, &e) == 0,
		"%s", e.msg);
	EXPECT(c.fp8 && !c.fp8_scale_ue8m0);
}

/* tiny-v3-fp8's config with KEY (dotted = nested) set to VALUE (JSON) or removed (NULL). */
static int parse_mutated(const char *key, const char *value, struct model_config *c, struct err *e)
{
	json_t *root, *obj;
	if (json_util_load(fixture_path("tiny-v3-fp8/config.json"), &root, e))
		return -2;
	obj = root;
	char k[128];
	snprintf(k, sizeof k, "%s", key);
	char *leaf = strchr(k, '.');
	if (leaf) {
		*leaf++ = 0;
		obj = json_object_get(root, k);
	} else {
		leaf = k;
	}
	if (value)
		json_object_set_new(obj, leaf, json_loads(value, JSON_DECODE_ANY, NULL));
	else
		json_object_del(obj, leaf);
	char *text = json_dumps(root, 0);
	int rc = config_parse(text, WHAT, c, e);
	free(text);
	json_decref(root);
	return rc;
}

static void test_rejected_values(void)
{
	static const struct {
		const char *key, *value, *msg;
	} cases[] = {
		{"scoring_func", "\"relu\"",
		 WHAT ": key \"scoring_func\": unsupported value \"relu\" (expected softmax or sigmoid)"},
		{"model_type", "\"llama\"", "key \"model_type\": unsupported value \"llama\""},
		{"model_type", NULL, "key \"model_type\" is missing or null"},
		{"architectures", "[\"LlamaForCausalLM\"]",
		 "key \"architectures\": unsupported value \"LlamaForCausalLM\""},
		{"architectures", "\"DeepseekV3ForCausalLM\"", "key \"architectures\": invalid value"},
		{"hidden_act", "\"gelu\"", "key \"hidden_act\": unsupported value \"gelu\" (expected silu)"},
		{"hidden_size", "\"128\"", "key \"hidden_size\": expected an integer, got \"128\""},
		{"hidden_size", "1.5", "key \"hidden_size\": expected an integer, got 1.5"},
		{"hidden_size", "0", "key \"hidden_size\": invalid value 0 (expected an integer >= 1)"},
		{"hidden_size", "-4", "key \"hidden_size\": invalid value -4"},
		{"hidden_size", "3000000000", "key \"hidden_size\": invalid value 3000000000"},
		{"vocab_size", "null", "key \"vocab_size\" is missing or null"},
		{"num_hidden_layers", NULL, "key \"num_hidden_layers\" is missing or null"},
		{"num_attention_heads", "0", "key \"num_attention_heads\": invalid value 0"},
		{"kv_lora_rank", "-1", "key \"kv_lora_rank\": invalid value -1"},
		{"q_lora_rank", "-1", "key \"q_lora_rank\": invalid value -1 (expected an integer >= 0)"},
		{"qk_rope_head_dim", "15", "key \"qk_rope_head_dim\": invalid value 15 (expected an even"},
		{"v_head_dim", "[32]", "key \"v_head_dim\": expected an integer, got [32]"},
		{"max_position_embeddings", "0", "key \"max_position_embeddings\": invalid value 0"},
		{"n_routed_experts", "-1", "key \"n_routed_experts\": invalid value -1"},
		{"moe_intermediate_size", NULL, "key \"moe_intermediate_size\" is missing or null"},
		{"num_experts_per_tok", "0", "key \"num_experts_per_tok\": invalid value 0"},
		{"num_experts_per_tok", "9",
		 "key \"num_experts_per_tok\": invalid value 9 (expected <= n_routed_experts 8)"},
		{"num_experts_per_tok", "5", /* 2 groups of 2 experts can give only 4 */
		 "key \"num_experts_per_tok\": invalid value 5 (expected <= topk_group x experts per "
		 "group = 4)"},
		{"n_group", "3", "key \"n_group\": invalid value 3 (expected a divisor of n_routed_experts 8)"},
		{"n_group", "0", "key \"n_group\": invalid value 0"},
		{"n_group", "8", "key \"n_group\": invalid value 8 (noaux_tc needs >= 2 experts per group"},
		{"topk_group", "5", "key \"topk_group\": invalid value 5 (expected <= n_group 4)"},
		{"topk_method", "\"topk\"",
		 "key \"topk_method\": unsupported value \"topk\" (expected greedy, group_limited_greedy "
		 "or noaux_tc)"},
		{"moe_layer_freq", "0", "key \"moe_layer_freq\": invalid value 0"},
		{"first_k_dense_replace", "-1", "key \"first_k_dense_replace\": invalid value -1"},
		{"n_shared_experts", "-2", "key \"n_shared_experts\": invalid value -2"},
		{"norm_topk_prob", "\"yes\"", "key \"norm_topk_prob\": expected true or false, got \"yes\""},
		{"routed_scaling_factor", "0",
		 "key \"routed_scaling_factor\": invalid value 0 (expected a "
		 "number > 0)"},
		{"routed_scaling_factor", "\"2.5\"", "key \"routed_scaling_factor\": expected a number"},
		{"rms_norm_eps", "-1e-6", "key \"rms_norm_eps\": invalid value -"},
		{"rope_theta", "0", "key \"rope_theta\": invalid value 0"},
		{"rope_scaling", "\"yarn\"", "key \"rope_scaling\": invalid value \"yarn\""},
		{"rope_scaling.type", "\"linear\"",
		 "key \"rope_scaling.type\": unsupported value \"linear\" (expected yarn or default)"},
		{"rope_scaling.type", NULL, "key \"rope_scaling.type\" is missing or null"},
		{"rope_scaling.factor", NULL, "key \"rope_scaling.factor\" is missing or null"},
		{"rope_scaling.factor", "0.5",
		 "key \"rope_scaling.factor\": invalid value 0.5 (expected a "
		 "number >= 1)"},
		{"rope_scaling.beta_fast", "\"x\"", "key \"rope_scaling.beta_fast\": expected a number"},
		{"rope_scaling.beta_fast", "0.5",
		 "key \"rope_scaling.beta_fast\": invalid value 0.5 "
		 "(expected >= beta_slow 1)"},
		{"rope_scaling.original_max_position_embeddings", "0",
		 "key \"rope_scaling.original_max_position_embeddings\": invalid value 0"},
		{"rope_scaling.mscale", "-1", "key \"rope_scaling.mscale\": invalid value -1"},
		{"quantization_config", "5", "key \"quantization_config\": invalid value 5"},
		{"quantization_config.quant_method", "\"gptq\"",
		 "key \"quantization_config.quant_method\": unsupported value \"gptq\" (expected fp8 or "
		 "compressed-tensors)"},
		{"quantization_config.quant_method", NULL,
		 "key \"quantization_config.quant_method\": unsupported value (absent)"},
		{"quantization_config.fmt", "\"e5m2\"",
		 "key \"quantization_config.fmt\": unsupported value \"e5m2\" (expected e4m3)"},
		{"quantization_config.activation_scheme", "\"static\"",
		 "key \"quantization_config.activation_scheme\": unsupported value \"static\""},
		{"quantization_config.weight_block_size", "[64, 64]",
		 "key \"quantization_config.weight_block_size\": unsupported value [64,64] (expected "
		 "[128, 128])"},
		{"quantization_config.weight_block_size", NULL,
		 "key \"quantization_config.weight_block_size\": unsupported value (absent)"},
		{"quantization_config.scale_fmt", "\"e4m3\"",
		 "key \"quantization_config.scale_fmt\": unsupported value \"e4m3\""},
		{"torch_dtype", "\"int8\"", "key \"torch_dtype\": unsupported value \"int8\""},
		{"bos_token_id", "-3", "key \"bos_token_id\": invalid value -3"},
		{"eos_token_id", "\"</s>\"", "key \"eos_token_id\": invalid value \"</s>\""},
		{"tie_word_embeddings", "1", "key \"tie_word_embeddings\": expected true or false, got 1"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct model_config c;
		struct err e = {{0}};
		int rc = parse_mutated(cases[i].key, cases[i].value, &c, &e);
		EXPECTF(rc == -1 && strncmp(e.msg, WHAT ": ", strlen(WHAT) + 2) == 0 && strstr(e.msg, cases[i].msg),
			"%s = %s: rc %d, message \"%s\", expected \"%s\"", cases[i].key,
			cases[i].value ? cases[i].value : "(removed)", rc, e.msg, cases[i].msg);
	}
}

/* The MLA relatives: Kimi K2 (kimi_k2, read as V3) and GLM-5 (glm_moe_dsa, read as V3.2), their
 * fixtures, their published configs' keys, and what of theirs is refused. */
#define KIMI_K2                                                                                      \
	"{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"model_type\": \"kimi_k2\", "             \
	"\"auto_map\": {\"AutoConfig\": \"configuration_deepseek.DeepseekV3Config\"}, "              \
	"\"bos_token_id\": 163584, \"eos_token_id\": 163585, "                                       \
	"\"first_k_dense_replace\": 1, \"hidden_act\": \"silu\", \"hidden_size\": 7168, "            \
	"\"intermediate_size\": 18432, \"kv_lora_rank\": 512, \"max_position_embeddings\": 131072, " \
	"\"moe_intermediate_size\": 2048, \"moe_layer_freq\": 1, \"n_group\": 1, "                   \
	"\"n_routed_experts\": 384, \"n_shared_experts\": 1, \"norm_topk_prob\": true, "             \
	"\"num_attention_heads\": 64, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 61, "       \
	"\"num_key_value_heads\": 64, \"num_nextn_predict_layers\": 0, \"q_lora_rank\": 1536, "      \
	"\"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"rms_norm_eps\": 1e-05, "             \
	"\"rope_scaling\": {\"beta_fast\": 1.0, \"beta_slow\": 1.0, \"factor\": 32.0, \"mscale\": "  \
	"1.0, \"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 4096, \"type\": "       \
	"\"yarn\"}, \"rope_theta\": 50000.0, \"routed_scaling_factor\": 2.827, \"scoring_func\": "   \
	"\"sigmoid\", \"tie_word_embeddings\": false, \"topk_group\": 1, \"topk_method\": "          \
	"\"noaux_tc\", \"torch_dtype\": \"bfloat16\", \"v_head_dim\": 128, \"vocab_size\": 163840"

#define GLM5                                                                                              \
	"{\"model_type\": \"glm_moe_dsa\", \"dtype\": \"bfloat16\", \"eos_token_id\": [154820, 154827], " \
	"\"first_k_dense_replace\": 3, \"hidden_act\": \"silu\", \"hidden_size\": 6144, "                 \
	"\"index_head_dim\": 128, \"index_n_heads\": 32, \"index_topk\": 2048, "                          \
	"\"indexer_rope_interleave\": true, \"intermediate_size\": 12288, \"kv_lora_rank\": 512, "        \
	"\"max_position_embeddings\": 202752, \"moe_intermediate_size\": 2048, \"moe_layer_freq\": 1, "   \
	"\"n_group\": 1, \"n_routed_experts\": 256, \"n_shared_experts\": 1, \"norm_topk_prob\": "        \
	"true, \"num_attention_heads\": 64, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 78, "      \
	"\"num_key_value_heads\": 64, \"num_nextn_predict_layers\": 1, \"q_lora_rank\": 2048, "           \
	"\"qk_nope_head_dim\": 192, \"qk_rope_head_dim\": 64, \"rms_norm_eps\": 1e-05, "                  \
	"\"rope_parameters\": {\"rope_theta\": 1000000, \"rope_type\": "                                  \
	"\"default\"}, \"routed_scaling_factor\": 2.5, \"scoring_func\": \"sigmoid\", "                   \
	"\"tie_word_embeddings\": false, \"topk_group\": 1, \"topk_method\": \"noaux_tc\", "              \
	"\"v_head_dim\": 256, \"vocab_size\": 154880"

static void test_mla_relatives(void)
{
	struct model_config c;
	struct err e = {{0}};
	EXPECTF(config_parse(KIMI_K2 ", \"attention_bias\": false}", WHAT, &c, &e) == 0, "%s", e.msg);
	EXPECT(strcmp(c.model_type, "kimi_k2") == 0 && !config_is_sparse(&c));
	EXPECT_EQ_INT(c.n_routed_experts, 384);
	EXPECT_EQ_INT(c.n_group, 1);
	EXPECT_EQ_INT(c.topk_group, 1);
	EXPECT(c.topk_method == TOPK_NOAUX_TC && c.scoring_func == SCORING_SIGMOID && c.norm_topk_prob);
	EXPECT_NEAR(c.routed_scaling_factor, 2.827, 1e-6);
	EXPECT_NEAR(c.rms_norm_eps, 1e-5, 1e-12);
	EXPECT(c.rope_yarn);
	EXPECT_NEAR(c.rope_theta, 50000, 0);
	EXPECT_NEAR(c.yarn_factor, 32, 0);
	EXPECT_NEAR(c.yarn_beta_fast, 1, 0);
	EXPECT_NEAR(c.yarn_beta_slow, 1, 0);
	EXPECT_EQ_INT(c.yarn_original_max_position, 4096);
	EXPECT_EQ_INT(c.num_nextn_predict_layers, 0);
	EXPECT_EQ_INT(c.bos_token_id, 163584);

	EXPECTF(config_parse(GLM5 ", \"architectures\": [\"GlmMoeDsaForCausalLM\"], \"attention_bias\": false, "
				  "\"rope_interleave\": true}",
			     WHAT, &c, &e) == 0,
		"%s", e.msg);
	EXPECT(strcmp(c.model_type, "glm_moe_dsa") == 0 && config_is_sparse(&c));
	EXPECT_EQ_INT(c.qk_nope_head_dim, 192);
	EXPECT_EQ_INT(c.v_head_dim, 256);
	EXPECT_EQ_INT(c.q_lora_rank, 2048);
	EXPECT_EQ_INT(c.num_attention_heads, 64);
	EXPECT_EQ_INT(c.num_hidden_layers, 78);
	EXPECT_EQ_INT(c.index_n_heads, 32);
	EXPECT_EQ_INT(c.index_head_dim, 128);
	EXPECT_EQ_INT(c.index_topk, 2048);
	EXPECT(c.indexer_rope_interleave);
	EXPECT(!c.rope_yarn);
	EXPECT_NEAR(c.rope_theta, 1000000, 0);
	EXPECT(!config_layer_is_moe(&c, 2) && config_layer_is_moe(&c, 3));
	EXPECT_EQ_INT(c.eos_token_id, 154820);
	EXPECT(strcmp(c.torch_dtype, "bfloat16") == 0);
	/* indexer_rope_interleave absent: true for glm_moe_dsa, false for deepseek_v32 */
	EXPECTF(config_parse("{\"model_type\": \"glm_moe_dsa\", \"q_lora_rank\": 8, \"index_n_heads\": 2, "
			     "\"index_head_dim\": 8, \"index_topk\": 4, " MINIMAL "}",
			     WHAT, &c, &e) == 0,
		"%s", e.msg);
	EXPECT(c.indexer_rope_interleave);
	EXPECTF(config_parse("{\"model_type\": \"deepseek_v32\", \"q_lora_rank\": 8, \"index_n_heads\": 2, "
			     "\"index_head_dim\": 8, \"index_topk\": 4, " MINIMAL "}",
			     WHAT, &c, &e) == 0,
		"%s", e.msg);
	EXPECT(!c.indexer_rope_interleave);
	/* GLM-5's mlp_layer_types, when it agrees with first_k_dense_replace */
	EXPECTF(config_parse(GLM5 ", \"mlp_layer_types\": [\"dense\", \"dense\", "
				  "\"dense\", \"sparse\", \"sparse\"], \"indexer_types\": [\"full\", \"full\", "
				  "\"full\", \"full\", \"full\"], \"index_topk_freq\": 1, \"index_topk_pattern\": "
				  "null}",
			     WHAT, &c, &e) == 0,
		"%s", e.msg);

	EXPECTF(config_load(fixture_path("tiny-kimi-k2"), &c, &e) == 0, "%s", e.msg);
	EXPECT(strcmp(c.model_type, "kimi_k2") == 0 && c.fp8 && !config_is_sparse(&c));
	EXPECT_EQ_INT(c.n_group, 1);
	EXPECT_NEAR(c.rms_norm_eps, 1e-5, 1e-12);
	EXPECT(c.weight_prefix[0] == 0);
	/* Kimi K2.5 / K2.6: its text_config is the model, its tensors under language_model.; a
	 * quantization_config at the top applies when text_config has none */
	EXPECTF(config_load(fixture_path("tiny-kimi-k25"), &c, &e) == 0, "%s", e.msg);
	EXPECT(strcmp(c.model_type, "kimi_k2") == 0 && c.fp8 && !strcmp(c.weight_prefix, "language_model."));
	EXPECT_EQ_INT(c.num_attention_heads, 8);
	EXPECTF(config_parse("{\"architectures\": [\"KimiK25ForConditionalGeneration\"], \"model_type\": "
			     "\"kimi_k25\", \"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", "
			     "\"weight_block_size\": [128, 128], \"activation_scheme\": \"dynamic\"}, "
			     "\"vision_config\": {\"hidden_size\": 1152}, \"text_config\": " KIMI_K2 "}}",
			     WHAT, &c, &e) == 0,
		"%s", e.msg);
	EXPECT(c.fp8 && c.n_routed_experts == 384 && !strcmp(c.weight_prefix, "language_model."));
	EXPECTF(config_load(fixture_path("tiny-glm5"), &c, &e) == 0, "%s", e.msg);
	EXPECT(strcmp(c.model_type, "glm_moe_dsa") == 0 && config_is_sparse(&c) && c.indexer_rope_interleave);
	EXPECT_EQ_INT(c.qk_nope_head_dim, 48);
	EXPECT_EQ_INT(c.v_head_dim, 64);

	/* what they may set that the forward does not do: refused, naming the key */
	static const struct {
		const char *json, *msg;
	} bad[] = {
		{GLM5 ", \"rope_interleave\": false}",
		 "key \"rope_interleave\": unsupported value false (expected true: MLA's RoPE rotates interleaved "
		 "pairs)"},
		{GLM5 ", \"indexer_types\": [\"full\", \"full\", \"full\", \"shared\"]}",
		 "key \"indexer_types\": unsupported value \"shared\""},
		{GLM5 ", \"index_topk_freq\": 4}", "key \"index_topk_freq\": unsupported value 4"},
		{GLM5 ", \"index_skip_topk_offset\": 3}", "key \"index_skip_topk_offset\": unsupported value 3"},
		{GLM5 ", \"index_topk_pattern\": \"FFSS\"}", "key \"index_topk_pattern\": unsupported value"},
		{GLM5 ", \"mlp_layer_types\": [\"dense\", \"sparse\"]}",
		 "key \"mlp_layer_types\": unsupported value \"sparse\" (expected \"dense\" for layer 1"},
		{GLM5 ", \"attention_bias\": true}", "key \"attention_bias\": unsupported value true"},
		{KIMI_K2 ", \"attention_bias\": true}", "key \"attention_bias\": unsupported value true"},
		{GLM5 ", \"architectures\": [\"Glm4MoeForCausalLM\"]}",
		 "key \"architectures\": unsupported value \"Glm4MoeForCausalLM\""},
		/* Kimi K2.5 without its text model, or with another wrapper's architecture */
		{"{\"model_type\": \"kimi_k25\", " MINIMAL "}", "key \"text_config\": invalid value"},
		{"{\"model_type\": \"kimi_k25\", \"architectures\": [\"KimiVLForConditionalGeneration\"], "
		 "\"text_config\": " KIMI_K2 "}}",
		 "key \"architectures\": unsupported value"},
		{"{\"model_type\": \"kimi_k25\", \"text_config\": {\"model_type\": \"kimi_k25\"}}",
		 "text_config: key \"model_type\": unsupported value \"kimi_k25\""},
		{"{\"model_type\": \"kimi_k25\", \"text_config\": " KIMI_K2 ", \"attention_bias\": true}}",
		 "text_config: key \"attention_bias\": unsupported value true"},
		{"{\"model_type\": \"glm4_moe\", " MINIMAL "}", "key \"model_type\": unsupported value \"glm4_moe\""},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = config_parse(bad[i].json, WHAT, &c, &e);
		EXPECTF(rc == -1 && strstr(e.msg, bad[i].msg), "case %zu: rc %d, message \"%s\", expected \"%s\"", i,
			rc, e.msg, bad[i].msg);
	}
}

static void test_bad_documents(void)
{
	struct model_config c;
	struct err e = {{0}};
	EXPECT_EQ_INT(config_parse("{\"model_type\": ", WHAT, &c, &e), -1);
	EXPECTF(strstr(e.msg, WHAT ": line 1 column"), "%s", e.msg);
	EXPECT_EQ_INT(config_parse("[1, 2]", WHAT, &c, &e), -1);
	EXPECTF(strcmp(e.msg, WHAT ": expected a JSON object, got [1,2]") == 0, "%s", e.msg);
	EXPECT_EQ_INT(config_parse("{\"model_type\": \"deepseek_v2\", \"model_type\": \"x\"}", WHAT, &c, &e), -1);
	EXPECTF(strstr(e.msg, "duplicate"), "%s", e.msg);
	EXPECT_EQ_INT(config_load("/nonexistent-dir", &c, &e), -1);
	EXPECTF(strcmp(e.msg, "/nonexistent-dir/config.json: cannot open: No such file or directory") == 0, "%s",
		e.msg);
	EXPECT_EQ_INT(config_load(fixture_path("tiny-v3/config.json/.."), &c, &e), -1);
	EXPECT_EQ_INT(config_load(fixture_path(""), &c, &e), -1); /* no config.json there */
}

TESTS(T(test_tiny_v3), T(test_tiny_v2), T(test_tiny_v3_fp8), T(test_tiny_r1), T(test_bench_configs), T(test_defaults),
      T(test_rope_parameters_and_ue8m0), T(test_rejected_values), T(test_bad_documents), T(test_mla_relatives))
