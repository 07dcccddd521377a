/* The engine flags (src/setup/engine_args.c): values, both spellings, errors, the vLLM
 * flags that are taken without effect so that a vLLM command line starts, and where the
 * sampling defaults come from (--generation-config, --override-generation-config). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "setup/engine_args.h"
#include "ops/wformat.h"
#include "harness.h"

/* parses every argument of argv (NULL-terminated) as an engine flag; 0 ok, -1 error (e->msg),
 * 1 an argument was not an engine flag */
static int parse_all(struct engine_args *a, char **argv, struct err *e)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	engine_args_init(a, true);
	for (int i = 0; i < argc;) {
		int rc = engine_args_parse(a, argc, argv, &i, e);
		if (rc <= 0)
			return rc < 0 ? -1 : 1;
	}
	return 0;
}

static void test_values(void)
{
	struct engine_args a;
	struct err e = {0};
	char *argv[] = {"-tp",
			"2",
			"--dcp-kv-cache-interleave-size=4",
			"--max-num-seqs",
			"8",
			"--kv-cache-memory=2GiB",
			"--no-enable-prefix-caching",
			"--dtype",
			"float32",
			NULL};
	EXPECT_EQ_INT(parse_all(&a, argv, &e), 0);
	EXPECT_EQ_INT(a.tp_size, 2);
	EXPECT_EQ_INT(a.dcp_interleave, 4);
	EXPECT_EQ_INT(a.max_num_seqs, 8);
	EXPECT(a.kv_cache_memory == 2ull << 30);
	EXPECT(!a.enable_prefix_caching);
	EXPECT(!strcmp(a.dtype, "float32"));
	EXPECT(!a.quant);
	char *bad[] = {"--max-num-seqs", "0", NULL};
	EXPECT_EQ_INT(parse_all(&a, bad, &e), -1);
	/* vLLM's --quantization / -q: fp8 or int8, the last one given */
	char *q1[] = {"-q", "fp8", NULL}, *q2[] = {"--quantization=fp8", NULL},
	     *q3[] = {"--quantization", "awq", NULL}, *q4[] = {"-q", "int8", NULL}, *q5[] = {"-q", "fp8", "-q", "int8", NULL};
	EXPECT(parse_all(&a, q1, &e) == 0 && a.quant == wformat_by_name("fp8"));
	EXPECT(parse_all(&a, q2, &e) == 0 && a.quant == wformat_by_name("fp8"));
	EXPECT(parse_all(&a, q4, &e) == 0 && a.quant == wformat_by_name("int8"));
	EXPECT(parse_all(&a, q1, &e) == 0 && a.quant == wformat_by_name("fp8"));
	EXPECT(parse_all(&a, q5, &e) == 0 && a.quant == wformat_by_name("int8"));
	EXPECTF(parse_all(&a, q3, &e) == -1 && strstr(e.msg, "--quantization") && strstr(e.msg, "'awq'"), "%s", e.msg);
	/* --quantization-rest: a format that quantizes, or bf16 / none (kept as the checkpoint has them) */
	char *r1[] = {"-q", "int4", "--quantization-rest", "fp8", NULL}, *r2[] = {"--quantization-rest=bf16", NULL},
	     *r3[] = {"--quantization-rest", "q4_k", NULL};
	EXPECT(!a.quant_rest_set);
	EXPECT(parse_all(&a, r1, &e) == 0 && a.quant == wformat_by_name("int4") && a.quant_rest_set &&
	       a.quant_rest == wformat_by_name("fp8"));
	EXPECT(parse_all(&a, r2, &e) == 0 && a.quant_rest_set && !a.quant_rest);
	EXPECTF(parse_all(&a, r3, &e) == -1 && strstr(e.msg, "--quantization-rest: invalid value 'q4_k'") &&
			strstr(e.msg, "int8") && strstr(e.msg, "bf16"),
		"%s", e.msg);
	/* --quantization-rest alone is refused before the model loads */
	struct engine_args r;
	engine_args_init(&r, false);
	r.model_dir = fixture_path("tiny-v3");
	r.quant_rest_set = true;
	struct pool *pool;
	struct model *model;
	enum dtype kvd;
	EXPECTF(engine_args_open_model(&r, &pool, &model, &kvd, &e) == -1 &&
			strstr(e.msg, "--quantization-rest needs --quantization"),
		"%s", e.msg);
	/* --quantize-lm-head takes no value: the argument after it is the next flag */
	char *qh[] = {"--quantize-lm-head", "--max-num-seqs", "3", NULL};
	EXPECT(!a.quantize_lm_head);
	EXPECT(parse_all(&a, qh, &e) == 0 && a.quantize_lm_head && a.max_num_seqs == 3);
	char *qe[] = {"--quantize-embedding", "--max-num-seqs", "5", NULL};
	EXPECT(!a.quantize_embedding);
	EXPECT(parse_all(&a, qe, &e) == 0 && a.quantize_embedding && a.max_num_seqs == 5);
	char *other[] = {"--port", "1", NULL};
	EXPECT_EQ_INT(parse_all(&a, other, &e), 1);
}

static void test_vllm_flags_without_effect(void)
{
	struct engine_args a, ref;
	struct err e = {0};
	char *argv[] = {"--trust-remote-code",
			"--enforce-eager",
			"--enable-chunked-prefill",
			"--gpu-memory-utilization",
			"0.9",
			"--gpu-memory-utilization=1",
			NULL};
	EXPECT_EQ_INT(parse_all(&a, argv, &e), 0);
	engine_args_init(&ref, true);
	EXPECT(!memcmp(&a, &ref, sizeof a)); /* nothing changed */
	const char *bad[] = {"0", "1.5", "x", "-0.1"};
	for (int k = 0; k < 4; k++) {
		char *b[] = {"--gpu-memory-utilization", (char *)bad[k], NULL};
		EXPECTF(parse_all(&a, b, &e) == -1 && strstr(e.msg, "--gpu-memory-utilization"), "%s", bad[k]);
	}
}

/* --generation-config auto|vllm|DIR and --override-generation-config decide the sampling
 * defaults (tiny-v3's generation_config.json: temperature 0.6, top_p 0.95, eos 1) */
static int open_with(char **argv, struct engine_runtime *rt, struct err *e)
{
	struct engine_args a;
	if (parse_all(&a, argv, e) != 0)
		return -1;
	a.model_dir = fixture_path("tiny-v3");
	a.max_model_len = 64;
	a.kv_cache_memory = 1 << 20;
	a.threads = 1;
	return engine_runtime_open(&a, NULL, rt, e);
}

static void test_generation_config(void)
{
	struct engine_runtime rt;
	struct err e = {0};
	char *dflt[] = {NULL};
	EXPECT(open_with(dflt, &rt, &e) == 0);
	EXPECT_NEAR(rt.defaults.temperature, 0.6, 1e-6);
	EXPECT_NEAR(rt.defaults.top_p, 0.95, 1e-6);
	engine_runtime_close(&rt);
	char *vllm[] = {"--generation-config", "vllm", NULL};
	EXPECT(open_with(vllm, &rt, &e) == 0);
	EXPECT_NEAR(rt.defaults.temperature, 1.0, 1e-6);
	EXPECT_NEAR(rt.defaults.top_p, 1.0, 1e-6);
	EXPECT_EQ_INT(rt.opts.eos_ids[0], 1);
	engine_runtime_close(&rt);
	char *over[] = {"--override-generation-config", "{\"temperature\": 0.2, \"top_k\": 5, \"max_new_tokens\": 7}",
			NULL};
	EXPECT(open_with(over, &rt, &e) == 0);
	EXPECT_NEAR(rt.defaults.temperature, 0.2, 1e-6);
	EXPECT_NEAR(rt.defaults.top_p, 0.95, 1e-6); /* the model's, not overridden */
	EXPECT_EQ_INT(rt.defaults.top_k, 5);
	EXPECT_EQ_INT(rt.defaults.max_tokens, 7);
	engine_runtime_close(&rt);
	/* DIR: its generation_config.json replaces the model's, EOS ids included */
	char dir[] = "/tmp/mlaserve-gencfg-XXXXXX";
	EXPECT(mkdtemp(dir) != NULL);
	char path[256];
	snprintf(path, sizeof path, "%s/generation_config.json", dir);
	FILE *f = fopen(path, "w");
	EXPECT(f != NULL);
	if (f) {
		fputs("{\"temperature\": 0.3, \"eos_token_id\": [1, 5]}", f);
		fclose(f);
	}
	char *from_dir[] = {"--generation-config", dir, NULL};
	EXPECT(open_with(from_dir, &rt, &e) == 0);
	EXPECT_NEAR(rt.defaults.temperature, 0.3, 1e-6);
	EXPECT_NEAR(rt.defaults.top_p, 1.0, 1e-6);
	EXPECT_EQ_INT(rt.opts.n_eos_ids, 2);
	EXPECT_EQ_INT(rt.opts.eos_ids[1], 5);
	engine_runtime_close(&rt);
	remove(path);
	char *missing[] = {"--generation-config", dir, NULL};
	EXPECTF(open_with(missing, &rt, &e) < 0 && strstr(e.msg, "generation_config.json"), "%s", e.msg);
	rmdir(dir);
	const char *bad[] = {"[1]", "{\"top_k\": 1.5}", "{\"temperature\": \"hot\"}", "{"};
	for (int k = 0; k < 4; k++) {
		struct engine_args a;
		char *b[] = {"--override-generation-config", (char *)bad[k], NULL};
		EXPECTF(parse_all(&a, b, &e) == -1 && strstr(e.msg, "--override-generation-config"), "%s: %s", bad[k],
			e.msg);
	}
}

TESTS(T(test_values), T(test_vllm_flags_without_effect), T(test_generation_config))
